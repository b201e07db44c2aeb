/* Decode reading int4 and fp8 K/V directly: equals decode (double reference)
 * on the same cache dequantized on the host, dense and paged, with the
 * features decode has (GQA, varlen lengths, causal, bias, lse, split-K). */
#include "common.h"
#include "internal.h"
#include "ref.h"
#include "ref_quant.h"
#include "test_decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct qcase {
  clattn_dtype kvdt; /* CLATTN_INT4, CLATTN_FP8, CLATTN_FP8_FNUZ */
  int groups;        /* int4 */
  int page_size;     /* 0: dense */
  int Mq, causal, bias, splits;
  int lane_keys;
  int kstage; /* K rows staged word by word in local memory */
  int mma;    /* the tensor-core form (forced; emulated off NVIDIA), with f16 q */
  int D;      /* head dim (0: 64) */
  int stages; /* the tensor-core form's ring of staged blocks (0: rows straight from global) */
  int hkv;    /* KV heads (0: 2) */
  int heads;  /* the tensor-core form's token rows: up to this many KV heads per group (0: off) */
  int cus;    /* compute units the planner sees (0: the device's): token rows' stream spans */
  int parts;  /* with cus: the parts (split count) the planner must choose */
  int whole;  /* token rows: the tuning asks for one group of all KV heads, blocks staged as
                 they lie; 1: taken, 2: refused (fragment reads 4 or 8 ways in one bank) */
} qcase;

/* run_qcase also checks FlashAttention's accuracy rule against f16 math, on
 * rows of unit normal values (test_mma_accuracy sets it) */
static bool check_rule;
/* the first sequence's length (0: 100; test_mma_accuracy's long ones) */
static int long_n;
/* run_qcase forces the serial form (cl/decode_serial.clh; test_serial sets it) */
static bool serial_form;
/* run_qcase asks for the portable form's score / value halves (test_roles sets it) */
static bool roles_form;
/* run_qcase asks for the portable form's K rows a tile ahead (test_kpre sets it) */
static bool kpre_form;
/* the portable form's V rows in flight as raw words (0: the row's;
 * test_value_rows sets it) */
static int value_rows;
/* the portable score pass's K rows in 16-byte loads, and the form the plan
 * must take (-DKQ_WIDE=n: 1 rows on 16 bytes, 2 rows at any word;
 * test_kq_wide sets them) */
static int kq_wide, kq_wide_want;
/* K's buffer one word longer than its rows (test_kq_wide): no longer a
 * multiple of 16 bytes */
static bool k_buffer_odd;

/* Whether the partial kernel's build options for p hold the word
 * <macro><value> (e.g. "-DVUQ=" 3). */
static bool build_has(const clattn_decode_params *p, const char *macro, int value) {
  char opts[1024], want[64];
  if (clattn_decode_build_options(fx.ctx, p, opts, sizeof opts) != CLATTN_SUCCESS) return false;
  snprintf(want, sizeof want, "%s%d", macro, value);
  const char *at = strstr(opts, want);
  const bool ok = at && (at[strlen(want)] == ' ' || at[strlen(want)] == '\0');
  if (!ok) fprintf(stderr, "  build options without %s: %s\n", want, opts);
  return ok;
}

static void run_qcase(const qcase *c) {
  const int B = 3, Hq = 8, Hkv = c->hkv ? c->hkv : 2, D = c->D ? c->D : 64, N = long_n ? long_n : 100, Mq = c->Mq;
  const int32_t kv_len[3] = {N, 37, 0};
  const bool fp8 = c->kvdt != CLATTN_INT4;
  const int fnuz = c->kvdt == CLATTN_FP8_FNUZ;
  const int X = fp8 ? D / 4 : c->groups + D / 8;
  char name[160];
  CASE_NAME(name, "decode kv=%s%s%d D=%d Hkv=%d page=%d Mq=%d%s%s split=%d lanes=%d kstage=%d mma=%d stages=%d heads=%d%s cus=%d",
            clattn_dtype_name(c->kvdt), fp8 ? "" : " g", fp8 ? 0 : c->groups, D, Hkv, c->page_size, Mq,
            c->causal ? " causal" : "", c->bias ? " bias" : "", c->splits, c->lane_keys, c->kstage,
            c->mma, c->stages, c->heads, c->whole ? " whole" : "", c->cus);
  const clattn_dtype qdt = c->mma ? CLATTN_F16 : CLATTN_F32;

  /* logical rows [B][N][Hkv] quantized on the host, and their dequantized values */
  const size_t rows = (size_t)B * N * Hkv;
  uint32_t *kw = malloc(rows * X * 4), *vw = malloc(rows * X * 4);
  uint32_t *kss = calloc(rows, 4), *vss = calloc(rows, 4);
  double *kd = malloc(rows * D * sizeof(double)), *vd = malloc(rows * D * sizeof(double));
  float *x = malloc(D * sizeof(float));
  for (int which = 0; which < 2; which++) {
    uint32_t *w = which ? vw : kw, *ss = which ? vss : kss;
    double *deq = which ? vd : kd;
    for (size_t r = 0; r < rows; r++) {
      for (int d = 0; d < D; d++) x[d] = (float)(rng_normal() * (check_rule ? 1 : 1 + (r % 5)));
      if (fp8) {
        ref_fp8_quantize_row(x, D, fnuz, w + r * X, ss + r);
        ref_fp8_dequantize_row(w + r * X, ss[r], D, fnuz, deq + r * D);
      } else {
        ref_int4_quantize_row(x, D, c->groups, w + r * X);
        ref_int4_dequantize_row(w + r * X, D, c->groups, deq + r * D);
      }
    }
  }
  /* The tensor-core form dequantizes int4 rows of several groups to f16 in
   * registers, each value scale * code + shift rounded once (an f16x2 fma),
   * as an f16 cache would hold it: the reference takes the same values. */
  if (c->mma && !fp8 && c->groups > 1)
    for (size_t i = 0; i < rows * D; i++) kd[i] = round_dtype(kd[i], CLATTN_F16), vd[i] = round_dtype(vd[i], CLATTN_F16);
  const size_t nq = (size_t)B * Mq * Hq * D;
  double *q = malloc(nq * sizeof(double)), *o_ref = malloc(nq * sizeof(double)),
         *o = malloc(nq * sizeof(double));
  for (size_t i = 0; i < nq; i++) q[i] = round_dtype(rng_normal(), qdt);
  double *bias = NULL;
  if (c->bias) {
    bias = malloc(sizeof(double) * B * Hq * Mq * N);
    for (size_t i = 0; i < (size_t)B * Hq * Mq * N; i++) bias[i] = (float)rng_normal();
  }
  double lse_ref[3 * 8 * 4], lse[3 * 8 * 4];
  ref_decode_args ra = {B, Mq, Hq, Hkv, D, N, q, kd, vd, bias, kv_len, NULL,
                        1.0 / sqrt((double)D), c->causal, o_ref, lse_ref};
  ref_decode(&ra);

  /* device cache: dense [B, N, Hkv, X] or paged [pages, ps, Hkv, X] with a shuffled table */
  const int ps = c->page_size;
  const int max_pages = ps ? (N + ps - 1) / ps : 0, num_pages = ps ? B * max_pages : 0;
  int32_t *table = NULL;
  uint32_t *dk = kw, *dv = vw, *dks = kss, *dvs = vss;
  if (ps) {
    table = malloc(sizeof(int32_t) * num_pages);
    for (int i = 0; i < num_pages; i++) table[i] = i;
    for (int i = num_pages - 1; i > 0; i--) {
      int j = rng_int(0, i), t = table[i];
      table[i] = table[j];
      table[j] = t;
    }
    const size_t prow = (size_t)num_pages * ps * Hkv;
    dk = calloc(prow * X, 4), dv = calloc(prow * X, 4), dks = calloc(prow, 4), dvs = calloc(prow, 4);
    for (int b = 0; b < B; b++)
      for (int j = 0; j < N; j++) {
        const size_t src = ((size_t)b * N + j) * Hkv;
        const size_t dst = ((size_t)table[b * max_pages + j / ps] * ps + j % ps) * Hkv;
        memcpy(dk + dst * X, kw + src * X, (size_t)Hkv * X * 4);
        memcpy(dv + dst * X, vw + src * X, (size_t)Hkv * X * 4);
        memcpy(dks + dst, kss + src, (size_t)Hkv * 4);
        memcpy(dvs + dst, vss + src, (size_t)Hkv * 4);
      }
  }
  const int64_t outer = ps ? num_pages : B, inner = ps ? ps : N;
  const size_t nrow = (size_t)outer * inner * Hkv;
  uint32_t *dk_odd = NULL;
  if (k_buffer_odd) {
    dk_odd = calloc(nrow * X + 1, 4);
    memcpy(dk_odd, dk, nrow * X * 4);
  }
  cl_mem km = buf_from_i32((const int32_t *)(dk_odd ? dk_odd : dk), nrow * X + (dk_odd != NULL)), vm = buf_from_i32((const int32_t *)dv, nrow * X);
  cl_mem ksm = buf_from_i32((const int32_t *)dks, nrow), vsm = buf_from_i32((const int32_t *)dvs, nrow);
  cl_mem qm = buf_from(q, nq, qdt), om = buf_poison(nq * 4), lm = buf_poison(sizeof lse / 2);
  cl_mem lenm = buf_from_i32(kv_len, B), tm = NULL, bm = NULL;
  clattn_decode_params p;
  memset(&p, 0, sizeof p);
  p.q = clattn_tensor_4d(qm, 0, qdt, B, Mq, Hq, D);
  p.o = clattn_tensor_4d(om, 0, CLATTN_F32, B, Mq, Hq, D);
  p.k = clattn_tensor_4d(km, 0, c->kvdt, outer, inner, Hkv, X);
  p.v = clattn_tensor_4d(vm, 0, c->kvdt, outer, inner, Hkv, X);
  if (fp8) {
    p.maybe_k_scale_shift = clattn_tensor_3d(ksm, 0, CLATTN_I32, outer, inner, Hkv);
    p.maybe_v_scale_shift = clattn_tensor_3d(vsm, 0, CLATTN_I32, outer, inner, Hkv);
  }
  p.kv_groups = fp8 ? 0 : c->groups;
  p.maybe_kv_len = clattn_tensor_1d(lenm, 0, CLATTN_I32, B);
  p.maybe_lse = clattn_tensor_3d(lm, 0, CLATTN_F32, B, Hq, Mq);
  if (ps) {
    tm = buf_from_i32(table, num_pages);
    p.maybe_block_table = clattn_tensor_2d(tm, 0, CLATTN_I32, B, max_pages);
  }
  if (bias) {
    const int cap = ps ? max_pages * ps : N;
    double *wide = calloc((size_t)B * Hq * Mq * cap, sizeof(double));
    for (size_t r = 0; r < (size_t)B * Hq * Mq; r++) memcpy(wide + r * cap, bias + r * N, sizeof(double) * N);
    bm = buf_from(wide, (size_t)B * Hq * Mq * cap, CLATTN_F32);
    free(wide);
    p.maybe_bias = clattn_tensor_4d(bm, 0, CLATTN_F32, B, Hq, Mq, cap);
  }
  p.causal = c->causal;
  p.num_splits = c->splits;
  const clattn_tuning saved = fx.ctx->tuning;
  const int saved_cus = fx.ctx->profile.compute_units;
  if (c->cus) { /* the planner's inputs fixed, whatever the device's row */
    fx.ctx->profile.compute_units = c->cus;
    fx.ctx->tuning.decode_mma_int4_groups_per_cu = 2;
    fx.ctx->tuning.decode_mma_min_keys = 64;
    fx.ctx->tuning.decode_mma_whole_min_keys = 0;
    fx.ctx->tuning.decode_max_splits = 64;
  }
  fx.ctx->tuning.decode_lane_keys = c->lane_keys;
  fx.ctx->tuning.decode_kstage_quant = c->kstage;
  fx.ctx->tuning.decode_quant_value_rows = value_rows;
  fx.ctx->tuning.decode_kq_wide = kq_wide;
  fx.ctx->tuning.decode_mma_int4_stages = fx.ctx->tuning.decode_mma_fp8_stages = c->stages;
  fx.ctx->tuning.decode_mma_int4_heads = c->heads;
  fx.ctx->tuning.decode_mma_int4_whole = c->whole != 0;
  fx.ctx->tuning.decode_serial = serial_form;
  fx.ctx->tuning.decode_port_roles = roles_form;
  fx.ctx->tuning.decode_port_kpre = kpre_form;
  if (serial_form) fx.ctx->tuning.decode_mma = 0;
  clattn_force_path(c->mma ? 2 : serial_form ? 0 : 1);
  if (serial_form || roles_form || kpre_form) { /* the form asked for is the one planned */
    const char *k = clattn_decode_kernels(fx.ctx, &p);
    CU_ASSERT(k && strstr(k, serial_form ? "serial" : roles_form ? "score / value halves" : "K a tile ahead"));
  }
  if (value_rows) /* the count reaches the portable kernel's build */
    CU_ASSERT(build_has(&p, "-DVUQ=", value_rows));
  if (kq_wide) /* the form too */
    CU_ASSERT(build_has(&p, "-DKQ_WIDE=", kq_wide_want));
  if (c->parts) {
    int parts = 0;
    CHECK_OK(clattn_decode_workspace_size(fx.ctx, &p, NULL, &parts));
    CU_ASSERT_EQUAL(parts, c->parts);
  }
  if (c->heads) { /* the token-row form taken, whole where asked (every case's layout allows it) */
    char opts[1024], want[64];
    CHECK_OK(clattn_decode_build_options(fx.ctx, &p, opts, sizeof opts));
    snprintf(want, sizeof want, "-DTWHOLE=%d", c->whole == 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(opts, want));
    CU_ASSERT_PTR_NULL(strstr(opts, "-DTOKENS=0 "));
  }
  CHECK_OK(clattn_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL));
  clattn_force_path(0);
  fx.ctx->tuning = saved;
  fx.ctx->profile.compute_units = saved_cus;
  buf_read(om, 0, nq, CLATTN_F32, o);
  buf_read(lm, 0, (size_t)B * Hq * Mq, CLATTN_F32, lse);
  /* Same dequantized values on both sides: only f32 arithmetic differs
   * (dequantizing fma, dot products, exp2): a few 1e-6 relative, margin 10x.
   * The tensor-core form rounds each weight p * scale to f16 for the V
   * product (half an ulp, 2^-12 relative): up to 2^-12 max |v| more. */
  double vmax = 0.0;
  for (size_t i = 0; i < rows * D; i++) vmax = fmax(vmax, fabs(vd[i]));
  check_close(name, o, o_ref, nq, 5e-5 + (c->mma ? vmax / 4096.0 : 0.0), 5e-5);
  if (check_rule) {
    /* FlashAttention's rule against torch's f16 attention on the dequantized
     * cache (K and V rounded to f16) */
    double *k16 = malloc(rows * D * sizeof(double)), *v16 = malloc(rows * D * sizeof(double));
    for (size_t i = 0; i < rows * D; i++) k16[i] = round_dtype(kd[i], CLATTN_F16), v16[i] = round_dtype(vd[i], CLATTN_F16);
    accuracy_rule(name, &ra, k16, v16, o, nq, CLATTN_F16);
    free(k16), free(v16);
  }
  check_close(name, lse, lse_ref, (size_t)B * Hq * Mq, 5e-5, 5e-6);

  buf_release(&km), buf_release(&vm), buf_release(&ksm), buf_release(&vsm), buf_release(&qm);
  buf_release(&om), buf_release(&lm), buf_release(&lenm), buf_release(&tm), buf_release(&bm);
  if (ps) free(dk), free(dv), free(dks), free(dvs);
  free(dk_odd);
  free(kw), free(vw), free(kss), free(vss), free(kd), free(vd), free(x), free(q), free(o_ref);
  free(o), free(bias), free(table);
}

static void test_int4(void) {
  for (int g = 1; g <= 8; g *= 2) {
    qcase c = {CLATTN_INT4, g, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    c.page_size = g == 2 ? 16 : 0;
    c.splits = g == 4 ? 3 : 0;
    run_qcase(&c);
  }
}

static void test_fp8(void) {
  qcase c = {CLATTN_FP8, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  run_qcase(&c);
  c.kvdt = CLATTN_FP8_FNUZ;
  c.page_size = 16;
  run_qcase(&c);
}

static void test_features(void) {
  qcase c = {CLATTN_INT4, 2, 16, 4, 1, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  run_qcase(&c);
  c.kvdt = CLATTN_FP8;
  c.page_size = 0;
  c.splits = 1;
  run_qcase(&c);
  c.lane_keys = 1; /* the lane-per-chunk score pass reads the same formats */
  run_qcase(&c);
  c.kvdt = CLATTN_INT4;
  c.groups = 8;
  c.page_size = 16;
  run_qcase(&c);
  /* head dims whose chunks leave work-items out of the value pass's key
   * subsets (WG % (D / 8) != 0), 8 rows (one KV head): int4 at D = 72,
   * fp8 at D = 96 (PoCL skipped the whole pass for every work-item there) */
  c.lane_keys = 0;
  c.groups = 1;
  c.D = 72;
  c.Mq = 1;
  c.hkv = 1;
  run_qcase(&c);
  c.kvdt = CLATTN_FP8;
  c.D = 96;
  c.page_size = 0;
  run_qcase(&c);
}

/* The serial form (the CPU rows' choice) reads every format: int4 of 1, 2
 * and 4 groups, fp8 and fnuz, paged, causal Mq 4 with bias, splits, MHA,
 * and a head dim of 8-wide vectors (D = 72, not a multiple of 16); then
 * with the value pass's accumulators sized for another register width
 * (the profile's SIMD width 4, 16: SSE, AVX-512) int4 of one group and of
 * groups of 8 elements (8-wide vectors) and fp8 causal Mq 3 over splits. */
static void test_serial(void) {
  qcase c = {CLATTN_INT4, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  serial_form = true;
  run_qcase(&c);
  c.groups = 4;
  c.page_size = 16;
  c.Mq = 4;
  c.causal = c.bias = 1;
  c.splits = 3;
  run_qcase(&c);
  c.kvdt = CLATTN_FP8;
  c.groups = 1;
  run_qcase(&c);
  c.kvdt = CLATTN_FP8_FNUZ;
  c.page_size = 0;
  c.D = 72;
  run_qcase(&c);
  c.kvdt = CLATTN_INT4;
  c.groups = 2;
  c.D = 0;
  c.hkv = 8;
  c.splits = 0;
  run_qcase(&c);
  const unsigned simd = fx.ctx->profile.simd_width;
  static const unsigned widths[] = {4, 16};
  for (int w = 0; w < 2; w++) {
    fx.ctx->profile.simd_width = widths[w];
    qcase d = {CLATTN_INT4, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    run_qcase(&d);
    d.groups = 8; /* D = 64: groups of 8 elements */
    d.bias = 1;
    run_qcase(&d);
    d.kvdt = CLATTN_FP8;
    d.groups = 1;
    d.bias = 0;
    d.Mq = 3;
    d.causal = 1;
    d.splits = 2;
    run_qcase(&d);
  }
  fx.ctx->profile.simd_width = simd;
  serial_form = false;
}

static void test_kstage(void) {
  for (int g = 1; g <= 8; g *= 2) {
    qcase c = {CLATTN_INT4, g, g == 4 ? 16 : 0, g == 2 ? 2 : 1, g == 2, g == 8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    run_qcase(&c);
  }
  qcase c = {CLATTN_FP8, 1, 16, 3, 1, 1, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  run_qcase(&c);
  c.kvdt = CLATTN_FP8_FNUZ;
  c.page_size = 0;
  run_qcase(&c);
}

/* Every E4M3 code (FN and FNUZ) through decode's fp8 loads, the portable, the
 * serial and the tensor-core form (f16 q; its PTX emulated off NVIDIA, where
 * it is the software pairs of cl/decode_rows.clh, as for FNUZ on NVIDIA),
 * and the portable form again with the profile's f32 denormals the other way
 * (cl/quant.clh's decode by one multiply and its bit-level twin): one key per
 * sequence and q = 0, so p = 1 and o is the key's V row exactly; sequences 0
 * and 1 hold the 256 codes as V elements (each o element is its code's
 * value, NaN for the NaN codes), in order and as 5 i mod 256 (so that every
 * code shares a word with no NaN code once: such words take the bit-level
 * decode), sequence 2 a K row with one NaN code (its score, so all its o,
 * NaN). Scale 1, shift 0. */
static void test_fp8_codes(void) {
  enum { B = 3, D = 128, X = D / 4 };
  for (int fnuz = 0; fnuz < 2; fnuz++)
    for (int form = 0; form < 8; form++) { /* (portable, serial, tensor cores, portable with
                                              the denormals flipped) x the two orders */
      const int serial = form % 4 == 1, spread = form / 4;
      const clattn_dtype qdt = form % 4 == 2 ? CLATTN_F16 : CLATTN_F32;
      uint32_t kw[B * X], vw[B * X], ss[B];
      memset(kw, 0, sizeof kw);
      memset(vw, 0, sizeof vw);
      for (int i = 0; i < 2 * D; i++) vw[(i / D) * X + (i % D) / 4] |= (uint32_t)(spread ? 5 * i % 256 : i) << (8 * (i % 4));
      kw[2 * X + 5] = (fnuz ? 0x80u : 0x7fu) << 16; /* element 22 of sequence 2's K */
      for (int b = 0; b < B; b++) ss[b] = 0x3c00u; /* fp16 scale 1, shift 0 */
      double zeros[B * D] = {0}, o[B * D];
      cl_mem km = buf_from_i32((const int32_t *)kw, B * X), vm = buf_from_i32((const int32_t *)vw, B * X);
      cl_mem sm = buf_from_i32((const int32_t *)ss, B);
      cl_mem qm = buf_from(zeros, B * D, qdt), om = buf_poison(B * D * 4);
      const clattn_dtype dt = fnuz ? CLATTN_FP8_FNUZ : CLATTN_FP8;
      clattn_decode_params p;
      memset(&p, 0, sizeof p);
      p.q = clattn_tensor_4d(qm, 0, qdt, B, 1, 1, D);
      p.o = clattn_tensor_4d(om, 0, CLATTN_F32, B, 1, 1, D);
      p.k = clattn_tensor_4d(km, 0, dt, B, 1, 1, X);
      p.v = clattn_tensor_4d(vm, 0, dt, B, 1, 1, X);
      p.maybe_k_scale_shift = clattn_tensor_3d(sm, 0, CLATTN_I32, B, 1, 1);
      p.maybe_v_scale_shift = clattn_tensor_3d(sm, 0, CLATTN_I32, B, 1, 1);
      const clattn_tuning saved = fx.ctx->tuning;
      const int denormals = fx.ctx->profile.has_f32_denormals;
      fx.ctx->tuning.decode_serial = serial;
      fx.ctx->tuning.decode_mma = 0;
      if (form % 4 == 3) fx.ctx->profile.has_f32_denormals = !denormals;
      clattn_force_path(form % 4 == 2 ? 2 : serial ? 0 : 1);
      const char *k = clattn_decode_kernels(fx.ctx, &p);
      CU_ASSERT(k && strstr(k, form % 4 == 2 ? "tensor cores" : serial ? "serial" : "portable"));
      CHECK_OK(clattn_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL));
      clattn_force_path(0);
      fx.ctx->tuning = saved;
      fx.ctx->profile.has_f32_denormals = denormals;
      buf_read(om, 0, B * D, CLATTN_F32, o);
      int bad = 0;
      for (int i = 0; i < 2 * D; i++) {
        const int code = spread ? 5 * i % 256 : i;
        const double want = ref_fp8_decode((uint8_t)code, fnuz);
        if (isnan(want) ? !isnan(o[i]) : o[i] != want) {
          if (bad++ < 4) fprintf(stderr, "fp8%s form %d code 0x%02x: o %g, want %g\n", fnuz ? " fnuz" : "",
                                 form, code, o[i], want);
        }
      }
      for (int d = 0; d < D; d++) bad += !isnan(o[2 * D + d]);
      CU_ASSERT_EQUAL(bad, 0);
      buf_release(&km), buf_release(&vm), buf_release(&sm), buf_release(&qm), buf_release(&om);
    }
}

/* The portable value pass with 1, 3 (rounds that end mid-way through a
 * tile's keys) and 32 rows in flight: int4 of 1 and 4 groups, paged and
 * causal with Mq = 3, fp8 with bias; every case has a sequence of length 0. */
static void test_value_rows(void) {
  const int rows[] = {1, 3, 32};
  for (int i = 0; i < 3; i++) {
    value_rows = rows[i];
    qcase c = {CLATTN_INT4, 1, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    run_qcase(&c);
    c.groups = 4, c.page_size = 16, c.Mq = 3, c.causal = 1;
    run_qcase(&c);
    qcase f = {CLATTN_FP8, 1, 16, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    run_qcase(&f);
  }
  value_rows = 0;
}

static void run_qcases(const qcase *cases, size_t n) {
  for (size_t i = 0; i < n; i++) run_qcase(&cases[i]);
}

/* The portable form's score and value passes by the group's halves, a tile
 * apart (cl/decode_portable.clh ROLES): int4 of 1, 2 and 4 groups (the value
 * half's shift sums, FOLD_V's in the score half), fp8 and FNUZ; paged,
 * causal Mq = 3, bias, splits, D = 96 (chunks left over in the value half). */
static void test_roles(void) {
  /* kvdt, groups, page, Mq, causal, bias, splits, lanes, kstage, mma, D, stages, hkv */
  static const qcase cases[] = {
      {CLATTN_INT4, 1, 16, 3, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {CLATTN_INT4, 2, 0, 2, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0, 0, 0, 0},
      {CLATTN_INT4, 4, 16, 1, 1, 1, 3, 0, 0, 0, 96, 0, 4, 0, 0, 0, 0},
      {CLATTN_FP8, 1, 0, 3, 1, 0, 2, 0, 0, 0, 96, 0, 0, 0, 0, 0, 0},
      {CLATTN_FP8_FNUZ, 1, 16, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
  };
  roles_form = true;
  run_qcases(cases, sizeof cases / sizeof cases[0]);
  roles_form = false;
}

/* The portable score pass's K rows in 16-byte loads. Rows at every word
 * offset (int4 of one group: 36 and 68 bytes apart; two groups: 40; fp8 of
 * D = 72: 72), read as the 16-byte words that hold them and shifted into
 * place; rows on 16 bytes (int4 of 4 groups at D = 96: 64 bytes; fp8 at
 * D = 64: 64) read straight. Paged, causal Mq = 3, bias, splits, a sequence
 * of length 0; every case's buffers end on 16 bytes. */
static const struct { qcase c; int want; } kq_wide_cases[] = {
    /* kvdt, groups, page, Mq, causal, bias, splits, lanes, kstage, mma, D, stages, hkv */
    {{CLATTN_INT4, 1, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 2},
    {{CLATTN_INT4, 1, 0, 4, 0, 0, 0, 0, 0, 0, 72, 0, 0, 0, 0, 0, 0}, 2},
    {{CLATTN_INT4, 1, 16, 3, 1, 1, 0, 0, 0, 0, 128, 0, 4, 0, 0, 0, 0}, 2},
    {{CLATTN_INT4, 2, 0, 2, 0, 0, 3, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0}, 2},
    {{CLATTN_INT4, 4, 16, 1, 1, 0, 0, 0, 0, 0, 96, 0, 0, 0, 0, 0, 0}, 1},
    {{CLATTN_FP8, 1, 0, 2, 1, 1, 2, 0, 0, 0, 72, 0, 0, 0, 0, 0, 0}, 2},
    {{CLATTN_FP8_FNUZ, 1, 16, 1, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0}, 1},
};
#define KQ_WIDE_CASES (sizeof kq_wide_cases / sizeof kq_wide_cases[0])

static void run_kq_wide_cases(void) {
  kq_wide = 2;
  for (size_t i = 0; i < KQ_WIDE_CASES; i++) {
    kq_wide_want = kq_wide_cases[i].want;
    run_qcase(&kq_wide_cases[i].c);
  }
  kq_wide = kq_wide_want = 0;
}

static void test_kq_wide(void) {
  run_kq_wide_cases();
  /* a K buffer that does not end on 16 bytes: rows at any word keep the
   * word loads (the words holding the last row would reach past it), rows
   * on 16 bytes of whole 16-byte words keep theirs */
  kq_wide = 2;
  k_buffer_odd = true;
  kq_wide_want = 0;
  run_qcase(&kq_wide_cases[0].c); /* int4, D = 64 */
  kq_wide_want = 1;
  run_qcase(&kq_wide_cases[KQ_WIDE_CASES - 1].c); /* fp8 fnuz, D = 64 */
  k_buffer_odd = false;
  kq_wide = kq_wide_want = 0;
}

/* The portable form's K rows a tile ahead (cl/decode_portable.clh KPRE):
 * the rows as the 16-byte loads read them (test_kq_wide's cases). */
static void test_kpre(void) {
  kpre_form = true;
  run_kq_wide_cases();
  kpre_form = false;
}

/* The tensor-core form on int4 (one group) and fp8 rows: the codes become f16
 * operands, the rows' affine maps fold into scores and weights. Rows come
 * straight from global memory (stages 0) or through a ring of staged blocks
 * (3: the slot index wraps unevenly); pages of 1 take the direct loads. */
static void run_mma_cases(int stages) {
  qcase c = {CLATTN_INT4, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, stages, 0, 0, 0, 0, 0};
  run_qcase(&c); /* D = 64, Hkv = 2: rows of 36 bytes, every 4-byte misalignment */
  c.page_size = 16;
  c.Mq = 2;
  c.causal = 1;
  c.splits = 3;
  run_qcase(&c);
  c.kvdt = CLATTN_FP8;
  run_qcase(&c);
  c.D = 128; /* 16-byte V units */
  run_qcase(&c);
  c.kvdt = CLATTN_INT4;
  run_qcase(&c); /* rows 34 words apart: a head's rows alternate between two alignments */
  c.hkv = 4;     /* 68 words apart: all rows of a head at one alignment, each head another */
  run_qcase(&c);
  c.page_size = 0;
  run_qcase(&c);
  c.hkv = 0;
  c.page_size = 1; /* a block over many pages */
  c.D = 64;
  run_qcase(&c);
  c.page_size = 16;
  c.D = 192; /* 8-byte fp8 V units, three per row */
  c.kvdt = CLATTN_FP8;
  run_qcase(&c);
  c.D = 0;
  c.kvdt = CLATTN_FP8_FNUZ;
  c.page_size = 0;
  c.Mq = 1;
  c.causal = 0;
  c.bias = 1;
  c.splits = 0;
  run_qcase(&c);
}
static void test_mma(void) {
  run_mma_cases(0);
  /* int4 rows of 2, 4, 8 groups: dequantized in registers, each 8-code unit
   * by its group's scale and shift (D = 64 with 8 groups: one unit each);
   * blocks over many pages (page 1) take the lookup per row */
  for (int g = 2; g <= 8; g *= 2) {
    qcase c = {CLATTN_INT4, g, g == 4 ? 16 : 0, g == 2 ? 2 : 1, g == 2, g == 8, g == 4 ? 3 : 0,
               0, 0, 1, g == 8 ? 128 : 0, 0, g == 2 ? 4 : 0, 0, 0, 0, 0};
    run_qcase(&c);
  }
  qcase c = {CLATTN_INT4, 4, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  run_qcase(&c);
}
static void test_mma_staged(void) { run_mma_cases(3); }

/* FlashAttention's accuracy rule on tensor cores (run_qcase): one-group
 * int4 (D=64, Hq=Hkv=8, bias, causal Mq=2: a held-out check once measured
 * 2.7x f16 math's error there), int4 of 4 groups, fp8. */
static void test_mma_accuracy(void) {
  static const qcase cases[] = {
      /* kvdt, groups, page, Mq, causal, bias, splits, lanes, kstage, mma, D, stages, hkv, heads, cus, parts, whole */
      {CLATTN_INT4, 1, 0, 2, 1, 1, 0, 0, 0, 1, 64, 0, 8, 0, 0, 0, 0},
      {CLATTN_INT4, 1, 0, 1, 0, 0, 0, 0, 0, 1, 128, 0, 2, 0, 0, 0, 0},
      {CLATTN_INT4, 4, 0, 2, 1, 1, 0, 0, 0, 1, 128, 0, 2, 0, 0, 0, 0},
      {CLATTN_FP8, 1, 0, 2, 1, 1, 0, 0, 0, 1, 64, 0, 8, 0, 0, 0, 0},
  };
  check_rule = true;
  run_qcases(cases, sizeof cases / sizeof cases[0]);
  /* One split over 8192 keys: one-group int4's V operands carry the
   * conversion's offset (1024 + c), taken off as 1032 times the weights'
   * sum. Taken off only at the end, the f32 sum of the offset products
   * grew with the keys (its rounding 2^-24 of 1032 sum p per addition) and
   * passed the rule 4x at 32768 keys on an H100 (o[0] 2x its value); every
   * form of reading the rows (straight, a ring of staged blocks, token rows). */
  static const qcase longs[] = {
      {CLATTN_INT4, 1, 0, 1, 0, 0, 1, 0, 0, 1, 64, 0, 2, 0, 0, 0, 0},
      {CLATTN_INT4, 1, 16, 1, 0, 0, 1, 0, 0, 1, 128, 3, 2, 0, 0, 0, 0},
      {CLATTN_INT4, 1, 0, 2, 1, 0, 1, 0, 0, 1, 64, 0, 4, 4, 0, 0, 0},
      {CLATTN_FP8, 1, 0, 1, 0, 0, 1, 0, 0, 1, 64, 0, 2, 0, 0, 0, 0},
  };
  long_n = 8192;
  run_qcases(longs, sizeof longs / sizeof longs[0]);
  long_n = 0;
  check_rule = false;
}

/* Head dims not a multiple of 64 on tensor cores (padded to 64 in
 * registers): one-group int4 paged, two-group int4 causal Mq 3 with splits,
 * fp8 paged causal Mq 2 with bias and splits; the lengths 100, 37, 0. */
static void test_padded_dims(void) {
  static const qcase cases[] = {
      /* kvdt, groups, page, Mq, causal, bias, splits, lanes, kstage, mma, D, ... */
      {CLATTN_INT4, 1, 16, 1, 0, 0, 0, 0, 0, 1, 80, 0, 0, 0, 0, 0, 0},
      {CLATTN_INT4, 2, 0, 3, 1, 0, 3, 0, 0, 1, 96, 0, 0, 0, 0, 0, 0},
      {CLATTN_FP8, 1, 16, 2, 1, 1, 2, 0, 0, 1, 112, 0, 0, 0, 0, 0, 0},
  };
  run_qcases(cases, sizeof cases / sizeof cases[0]);
}

/* Token rows: int4 caches whose token's rows of a group of heads are whole
 * 16-byte chunks ([.., N, Hkv, X] with Hkv X a multiple of 4 words); a group
 * takes those heads, a warp each, and stages whole token spans. One group of
 * heads or several (heads < Hkv), rows of 36, 68, 40, 80, 96 bytes, every
 * int4 format, pages of 16 and 32, causal, bias, splits, 12 query rows per
 * head (blocks of 16 rows), sequences of 100, 37 and 0 keys. Whole token
 * rows (tokens back to back, the tuning asking): one group of all heads,
 * each block staged as it lies (bulk copies on sm_90, zeros stored past
 * the valid tokens; 16-byte copies elsewhere), and the refusal where the
 * staged rows would share banks 8 ways. */
static void test_mma_tokens(void) {
  static const qcase cases[] = {
      /* kvdt, groups, page, Mq, causal, bias, splits, lanes, kstage, mma, D, stages, hkv, heads, cus, parts, whole */
      {CLATTN_INT4, 1, 0, 1, 0, 0, 0, 0, 0, 1, 64, 0, 4, 4, 0, 0, 0},
      {CLATTN_INT4, 1, 16, 2, 1, 1, 3, 0, 0, 1, 128, 0, 8, 8, 0, 0, 0},
      {CLATTN_INT4, 1, 0, 4, 1, 0, 0, 0, 0, 1, 64, 0, 8, 4, 0, 0, 0},
      {CLATTN_INT4, 2, 32, 3, 0, 0, 2, 0, 0, 1, 64, 0, 2, 2, 0, 0, 0},
      {CLATTN_INT4, 4, 0, 1, 0, 1, 0, 0, 0, 1, 128, 0, 4, 8, 0, 0, 0},
      {CLATTN_INT4, 8, 16, 1, 1, 0, 0, 0, 0, 1, 128, 0, 2, 2, 0, 0, 0},
      /* whole token rows: one group of all heads, blocks staged as they lie
       * (tokens 36, 72, 20, 40 words apart), or refused (96: 8 ways) */
      {CLATTN_INT4, 1, 0, 1, 0, 0, 0, 0, 0, 1, 64, 0, 4, 4, 0, 0, 1},
      {CLATTN_INT4, 1, 16, 2, 1, 1, 3, 0, 0, 1, 64, 0, 8, 4, 0, 0, 1},
      {CLATTN_INT4, 2, 32, 3, 0, 0, 2, 0, 0, 1, 64, 0, 2, 2, 0, 0, 1},
      {CLATTN_INT4, 4, 0, 4, 1, 1, 0, 0, 0, 1, 128, 0, 2, 2, 0, 0, 1},
      {CLATTN_INT4, 8, 0, 1, 0, 0, 0, 0, 0, 1, 128, 0, 4, 4, 0, 0, 2},
  };
  run_qcases(cases, sizeof cases / sizeof cases[0]);
}

/* Token rows with the split count chosen: spans of equal length over the
 * (sequence, row block) pairs' 16-key blocks laid end to end, a work-group
 * per span and group of heads. Sequences of 100, 37 and 0 keys (7 blocks
 * each, 8 with pages of 32): the compute units the planner sees (2 slots
 * each, shared by the groups of heads) cut them into spans of 6 or 4
 * blocks (at least 4: 64 keys), so spans end one sequence
 * and start the next, a sequence has 2 or 3 parts (fewer padded with empty
 * parts), one has none; causal Mq 3, bias, pages of 16 and 32. */
static void test_mma_stream(void) {
  static const qcase cases[] = {
      /* kvdt, groups, page, Mq, causal, bias, splits, lanes, kstage, mma, D, stages, hkv, heads, cus, parts */
      {CLATTN_INT4, 1, 0, 1, 0, 0, 0, 0, 0, 1, 64, 0, 4, 4, 2, 2, 0},    /* spans of 6 */
      {CLATTN_INT4, 1, 16, 1, 0, 1, 0, 0, 0, 1, 64, 0, 4, 4, 3, 3, 0},   /* 4: parts 2, 3, 3 */
      {CLATTN_INT4, 1, 0, 3, 1, 0, 0, 0, 0, 1, 64, 0, 8, 4, 6, 3, 0},    /* 2 groups of heads */
      {CLATTN_INT4, 1, 32, 2, 0, 0, 0, 0, 0, 1, 128, 0, 8, 8, 4, 2, 0},  /* 4 of 8: aligned */
      {CLATTN_INT4, 1, 0, 3, 1, 0, 0, 0, 0, 1, 64, 0, 8, 4, 6, 3, 1},    /* whole: 1 group of 8, half the groups per unit: same spans */
  };
  run_qcases(cases, sizeof cases / sizeof cases[0]);
}

void add_decode_quant_tests(CU_pSuite s) {
  CU_add_test(s, "quantized K/V: int4 g1 g2 g4 g8", test_int4);
  CU_add_test(s, "quantized K/V: fp8 e4m3fn and fnuz", test_fp8);
  CU_add_test(s, "quantized K/V: causal, bias, paged, lanes", test_features);
  CU_add_test(s, "quantized K/V: K rows staged in local memory", test_kstage);
  CU_add_test(s, "quantized K/V: K rows in 16-byte loads", test_kq_wide);
  CU_add_test(s, "quantized K/V: K rows a tile ahead", test_kpre);
  CU_add_test(s, "quantized K/V: the value pass's rows in flight", test_value_rows);
  CU_add_test(s, "quantized K/V: score / value halves", test_roles);
  CU_add_test(s, "quantized K/V: every fp8 code through each form's loads", test_fp8_codes);
  CU_add_test(s, "quantized K/V: the serial form", test_serial);
  CU_add_test(s, "quantized K/V: tensor-core form (PTX emulated off NVIDIA)", test_mma);
  CU_add_test(s, "quantized K/V: tensor-core form, rows staged through a ring", test_mma_staged);
  CU_add_test(s, "quantized K/V: padded head dims on tensor cores 80 96 112", test_padded_dims);
  CU_add_test(s, "quantized K/V: accuracy rule on tensor cores against f16 math", test_mma_accuracy);
  CU_add_test(s, "quantized K/V: tensor-core form, token rows of a group of heads", test_mma_tokens);
  CU_add_test(s, "quantized K/V: token rows in stream spans over every sequence", test_mma_stream);
}
