/* Decode attention against the double-precision reference: dtypes, head
 * dims, GQA/MQA, lengths, splits, causal, bias, lse, strided views, paged
 * caches, varlen queries, the portable and serial forms; the error paths,
 * the quantized caches, the planner and the tensor-core form in the files
 * beside it (test_decode_*.c). */
#include "common.h"
#include "part.h"
#include "internal.h"
#include "ref.h"
#include "test_decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Elements of junk before each optional tensor's view (common.h). */
#define OPT VIEW_LEAD

/* Keys sequence b holds (the rows past it are NaN in the cache). */
static int seq_len(const dcase *c, int b) {
  const int n = c->kv_len ? c->kv_len[b] : c->Nkv;
  return n < 0 ? 0 : n > c->Nkv ? c->Nkv : n;
}

/* FlashAttention's accuracy rule: o's error against the double reference
 * (ra's o) at most 2x that of the same math in storage dtype dt (torch's
 * attention in f16 / bf16: K and V as that dtype holds them, ks / vs or
 * NULL for ra's, and each weight exp(s - max) rounded to it before it
 * multiplies V), plus a floor of max|v| 2^-17 for the kernel's f32 sums and
 * exp2 (what an f32 cache's error is). */
void accuracy_rule(const char *name, const ref_decode_args *ra, const double *ks, const double *vs,
                   const double *o, size_t nq, clattn_dtype dt) {
  double *o16 = malloc(sizeof(double) * (nq ? nq : 1)), vmax = 0.0;
  ref_decode_args r16 = *ra;
  r16.o = o16, r16.lse = NULL;
  if (ks) r16.k = ks, r16.v = vs;
  if (dt == CLATTN_BF16) ref_decode_p_bf16(&r16);
  else if (dt == CLATTN_F16) ref_decode_p_f16(&r16);
  else ref_decode(&r16);
  const size_t nkv = (size_t)ra->B * ra->Nkv * ra->Hkv * ra->D;
  for (size_t i = 0; i < nkv; i++) vmax = fmax(vmax, fabs(ra->v[i]));
  double e16 = 0.0, e = 0.0;
  for (size_t i = 0; i < nq; i++) e16 = fmax(e16, fabs(o16[i] - ra->o[i])), e = fmax(e, fabs(o[i] - ra->o[i]));
  const double bound = 2.0 * e16 + vmax / 131072.0;
  if (e > bound || getenv("CLATTN_TEST_VERBOSE"))
    fprintf(stderr, "  %s: max error %.3g, %s math %.3g (bound %.3g)\n", name, e, clattn_dtype_name(dt), e16, bound);
  CU_ASSERT(e <= bound);
  free(o16);
}

void run_case(const dcase *c) {
  char name[256];
  CASE_NAME(name, "decode B=%d Mq=%d Hq=%d Hkv=%d D=%d N=%d q=%s kv=%s o=%s split=%d%s%s%s%s%s page=%d%s%s%s",
            c->B, c->Mq, c->Hq, c->Hkv, c->D, c->Nkv, clattn_dtype_name(c->qdt),
            clattn_dtype_name(c->kvdt), clattn_dtype_name(c->odt), c->splits,
            c->causal ? " causal" : "", c->bias ? " bias" : "", c->lse ? " lse" : "",
            c->bhsd ? " bhsd" : "", c->kv_len ? " kvlen" : "", c->page_size,
            c->q_counts ? " varlen" : "", c->two_launch ? " two-launch" : "", c->ws_junk ? " ws-junk" : "");
  const int B = c->B, Hq = c->Hq, Hkv = c->Hkv, D = c->D, N = c->Nkv;
  const bool varlen = c->q_counts != NULL;
  int32_t *q_start = calloc((size_t)B + 1, sizeof *q_start);
  int Mq = c->Mq;
  if (varlen) {
    Mq = 0;
    for (int b = 0; b < B; b++) {
      q_start[b + 1] = q_start[b] + c->q_counts[b];
      if (c->q_counts[b] > Mq) Mq = c->q_counts[b];
    }
  }
  const int total_q = varlen ? q_start[B] : B * c->Mq;
  const size_t nq = (size_t)total_q * Hq * D, nkv = (size_t)B * N * Hkv * D;
  double *q = rand_tensor(nq, c->qdt, 1.0);
  double *k = rand_tensor(nkv, c->kvdt, 1.0);
  double *v = rand_tensor(nkv, c->kvdt, 1.0);
  double *bias = NULL;
  if (c->bias) bias = rand_tensor((size_t)B * Hq * Mq * N, CLATTN_F32, 2.0);
  /* some bias entries -inf: masked keys */
  if (bias)
    for (size_t i = 0; i < (size_t)B * Hq * Mq * N; i += 7) bias[i] = -INFINITY;

  /* Keys the device must skip (bad block-table entry) are masked in the reference. */
  double *ref_bias = bias;
  if (c->bad_entry) {
    ref_bias = calloc((size_t)B * Hq * Mq * N, sizeof(double));
    if (bias) memcpy(ref_bias, bias, sizeof(double) * B * Hq * Mq * N);
    for (int h = 0; h < Hq; h++)
      for (int m = 0; m < Mq; m++)
        for (int j = c->page_size; j < 2 * c->page_size && j < N; j++)
          ref_bias[((size_t)h * Mq + m) * N + j] = -INFINITY;
  }
  /* A paged cache without lengths would expose the whole last page: give N. */
  int32_t *kv_len = NULL;
  if (c->kv_len || c->page_size > 0) {
    kv_len = malloc(sizeof(int32_t) * B);
    for (int b = 0; b < B; b++) kv_len[b] = c->kv_len ? c->kv_len[b] : N;
  }
  /* reference */
  double *o_ref = calloc(nq ? nq : 1, sizeof(double));
  double *lse_ref = calloc((size_t)B * Hq * (Mq ? Mq : 1) + (size_t)Hq * total_q + 1, sizeof(double));
  ref_decode_args ra = {B, Mq, Hq, Hkv, D, N, q, k, v, ref_bias, kv_len, varlen ? q_start : NULL,
                        1.0 / sqrt((double)D), c->causal, o_ref, lse_ref};
  if (!varlen) ra.Mq = c->Mq;
  ref_decode(&ra);

  /* device tensors */
  const int pad = c->pad;
  clattn_decode_params p;
  memset(&p, 0, sizeof p);
  {
    double *tmp = calloc(nq + pad, sizeof(double));
    memcpy(tmp + pad, q, nq * sizeof(double));
    cl_mem m = buf_from(tmp, nq + pad, c->qdt);
    free(tmp);
    p.q = clattn_tensor_4d(m, pad * clattn_dtype_size(c->qdt), c->qdt, varlen ? 1 : B,
                           varlen ? total_q : c->Mq, Hq, D);
  }
  /* K/V: dense BSHD, dense BHSD through strides, or paged */
  int num_pages = 0, max_pages = 0;
  int32_t *table = NULL;
  for (int which = 0; which < 2; which++) {
    const double *src = which ? v : k;
    clattn_tensor t;
    /* Rows past a sequence's length (and pages no sequence uses) hold NaN:
     * none of it may reach an output (xformers' rule). */
    if (c->page_size > 0) {
      const int ps = c->page_size;
      max_pages = (N + ps - 1) / ps;
      if (max_pages == 0) max_pages = 1;
      /* page ids: shuffled; with share_pages all sequences share logical page 0
       * (their first page_size keys are made equal below). */
      if (!table) {
        num_pages = B * max_pages + 3;
        table = malloc(sizeof(int32_t) * B * max_pages);
        int *perm = malloc(sizeof(int) * num_pages);
        for (int i = 0; i < num_pages; i++) perm[i] = i;
        for (int i = num_pages - 1; i > 0; i--) {
          int j = rng_int(0, i), t2 = perm[i];
          perm[i] = perm[j];
          perm[j] = t2;
        }
        for (int b = 0; b < B; b++)
          for (int lp = 0; lp < max_pages; lp++)
            table[b * max_pages + lp] = (c->share_pages && lp == 0) ? perm[0] : perm[b * max_pages + lp];
        free(perm);
        if (c->bad_entry && max_pages > 1) table[1] = c->bad_entry == 1 ? -1 : num_pages + 7;
      }
      const size_t np = (size_t)num_pages * ps * Hkv * D;
      double *pages = malloc(sizeof(double) * np);
      for (size_t i = 0; i < np; i++) pages[i] = NAN;
      for (int b = 0; b < B; b++)
        for (int j = 0; j < seq_len(c, b); j++) {
          int page = table[b * max_pages + j / ps];
          if (page < 0 || page >= num_pages) continue;
          /* shared page: sequence 0's keys win; the reference uses the same values below */
          if (c->share_pages && j < ps && b > 0) continue;
          memcpy(pages + (((size_t)page * ps + j % ps) * Hkv) * D,
                 src + (((size_t)b * N + j) * Hkv) * D, sizeof(double) * Hkv * D);
        }
      cl_mem m = buf_from(pages, (size_t)num_pages * ps * Hkv * D, c->kvdt);
      free(pages);
      t = clattn_tensor_4d(m, 0, c->kvdt, num_pages, ps, Hkv, D);
    } else if (c->bhsd) {
      size_t n = nkv + pad;
      double *tmp = malloc(sizeof(double) * n);
      for (size_t i = 0; i < n; i++) tmp[i] = NAN;
      for (int b = 0; b < B; b++)
        for (int j = 0; j < seq_len(c, b); j++)
          for (int h = 0; h < Hkv; h++)
            memcpy(tmp + pad + (((size_t)b * Hkv + h) * N + j) * D,
                   src + (((size_t)b * N + j) * Hkv + h) * D, sizeof(double) * D);
      cl_mem m = buf_from(tmp, n, c->kvdt);
      free(tmp);
      t = clattn_tensor_4d(m, pad * clattn_dtype_size(c->kvdt), c->kvdt, B, N, Hkv, D);
      t.stride[0] = (int64_t)Hkv * N * D;
      t.stride[1] = D;
      t.stride[2] = (int64_t)N * D;
    } else {
      double *tmp = malloc(sizeof(double) * (nkv + pad));
      for (size_t i = 0; i < nkv + pad; i++) tmp[i] = NAN;
      for (int b = 0; b < B; b++)
        memcpy(tmp + pad + (size_t)b * N * Hkv * D, src + (size_t)b * N * Hkv * D,
               sizeof(double) * seq_len(c, b) * Hkv * D);
      cl_mem m = buf_from(tmp, nkv + pad, c->kvdt);
      free(tmp);
      t = clattn_tensor_4d(m, pad * clattn_dtype_size(c->kvdt), c->kvdt, B, N, Hkv, D);
    }
    if (which)
      p.v = t;
    else
      p.k = t;
  }
  if (c->page_size > 0 && c->share_pages) {
    /* the reference must see sequence 0's first page in every sequence */
    for (int b = 1; b < B; b++)
      for (int j = 0; j < N && j < c->page_size; j++) {
        memcpy(k + (((size_t)b * N + j) * Hkv) * D, k + ((size_t)j * Hkv) * D, sizeof(double) * Hkv * D);
        memcpy(v + (((size_t)b * N + j) * Hkv) * D, v + ((size_t)j * Hkv) * D, sizeof(double) * Hkv * D);
      }
    ref_decode(&ra);
  }
  cl_mem table_m = NULL, kvlen_m = NULL, qs_m = NULL, bias_m = NULL, lse_m = NULL, flag_m = NULL;
  /* Every optional tensor is a view OPT elements into its buffer, behind
   * values that would break the result if the offset were ignored. */
  if (table) {
    table_m = buf_from_i32_after(table, (size_t)B * max_pages, num_pages - 1);
    p.maybe_block_table = clattn_tensor_2d(table_m, OPT * 4, CLATTN_I32, B, max_pages);
  }
  if (kv_len) {
    /* Past the table's capacity: the device clamps to it and raises the flag,
     * the reference (which has only N keys) sees the clamped length. */
    int32_t *dev_len = malloc(sizeof(int32_t) * B);
    memcpy(dev_len, kv_len, sizeof(int32_t) * B);
    if (c->len_over) dev_len[0] = max_pages * c->page_size + c->len_over;
    kvlen_m = buf_from_i32_after(dev_len, B, 1);
    free(dev_len);
    p.maybe_kv_len = clattn_tensor_1d(kvlen_m, OPT * 4, CLATTN_I32, B);
  }
  if (varlen) {
    qs_m = buf_from_i32_after(q_start, (size_t)B + 1, 0);
    p.maybe_q_start = clattn_tensor_1d(qs_m, OPT * 4, CLATTN_I32, B + 1);
    p.batch = B;
    p.max_q_len = Mq;
  }
  if (bias) {
    /* the bias covers every key a sequence can hold: N, or the table's capacity */
    const int cap = c->page_size > 0 ? max_pages * c->page_size : N;
    const size_t nb = (size_t)B * Hq * Mq * cap;
    double *wide = malloc(sizeof(double) * (nb + OPT)); /* NaN before it and past each length */
    for (size_t i = 0; i < nb + OPT; i++) wide[i] = NAN;
    for (size_t row = 0; row < (size_t)B * Hq * Mq; row++) {
      const int b = (int)(row / ((size_t)Hq * Mq)), m = (int)(row % Mq);
      if (!varlen || m < c->q_counts[b])
        memcpy(wide + OPT + row * cap, bias + row * N, sizeof(double) * seq_len(c, b));
    }
    bias_m = buf_from(wide, nb + OPT, CLATTN_F32);
    free(wide);
    p.maybe_bias = clattn_tensor_4d(bias_m, OPT * 4, CLATTN_F32, B, Hq, Mq, cap);
  }
  const size_t nlse = varlen ? (size_t)Hq * total_q : (size_t)B * Hq * c->Mq;
  if (c->lse) {
    lse_m = buf_poison((nlse + OPT) * 4);
    p.maybe_lse = varlen ? clattn_tensor_3d(lse_m, OPT * 4, CLATTN_F32, 1, Hq, total_q)
                         : clattn_tensor_3d(lse_m, OPT * 4, CLATTN_F32, B, Hq, c->Mq);
  }
  flag_m = buf_zeros((OPT + 2) * 4); /* the flag between zeros that must stay zeros */
  p.maybe_error_flag = clattn_tensor_1d(flag_m, OPT * 4, CLATTN_I32, 1);
  cl_mem o_m = buf_poison((nq + pad) * clattn_dtype_size(c->odt));
  p.o = p.q;
  p.o.buf = o_m;
  p.o.dtype = c->odt;
  p.o.offset = pad * clattn_dtype_size(c->odt);
  p.causal = c->causal;
  p.num_splits = c->splits;

  const int merge_last = fx.ctx->tuning.decode_merge_last;
  if (c->two_launch) fx.ctx->tuning.decode_merge_last = 0;
  if (c->kernels) {
    const char *k = clattn_decode_kernels(fx.ctx, &p);
    CU_ASSERT_PTR_NOT_NULL(k);
    if (k && !strstr(k, c->kernels)) fprintf(stderr, "  %s: kernels \"%s\", want \"%s\"\n", name, k, c->kernels);
    CU_ASSERT(k && strstr(k, c->kernels));
  }
  cl_mem ws_m = NULL;
  if (c->ws_junk) {
    /* junk in every byte: the one-launch merge's tickets may not rely on zeros */
    size_t bytes = 0;
    CHECK_OK(clattn_decode_workspace_size(fx.ctx, &p, &bytes, NULL));
    unsigned char *junk = malloc(bytes + 8);
    for (size_t i = 0; i < bytes + 8; i++) junk[i] = (unsigned char)rng_int(0, 255);
    ws_m = buf_in(fx.cl, bytes + 8, junk);
    free(junk);
    p.maybe_workspace = clattn_tensor_1d(ws_m, 4, CLATTN_F32, (int64_t)(bytes / 4)); /* offset 4: not 8-aligned */
  }
  for (int run = 0; run < (c->ws_junk ? 2 : 1); run++) {
    cl_event ev = NULL;
    CHECK_OK(clattn_decode(fx.ctx, fx.queue, &p, 0, NULL, &ev));
    CU_ASSERT_EQUAL(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    if (run == 0 && c->ws_junk) { /* the second run's output must be its own */
      unsigned char *poison = malloc((nq + pad) * clattn_dtype_size(c->odt));
      memset(poison, 0xff, (nq + pad) * clattn_dtype_size(c->odt));
      CU_ASSERT_EQUAL(clEnqueueWriteBuffer(fx.queue, o_m, CL_TRUE, 0, (nq + pad) * clattn_dtype_size(c->odt),
                                           poison, 0, NULL, NULL), CL_SUCCESS);
      free(poison);
    }
  }
  fx.ctx->tuning.decode_merge_last = merge_last;
  buf_release(&ws_m);

  double *o = malloc(sizeof(double) * (nq ? nq : 1));
  buf_read(o_m, pad, nq, c->odt, o);
  /* The output is a convex combination of V rows (|o| <~ max|v|): errors come
   * from rounding q.k in f32, and from the output's own storage rounding. */
  double tol = tol_for(c->odt) + tol_for(c->kvdt) * 0.25 + 1e-4;
  double err = check_close(name, o, o_ref, nq, tol, tol);
  if (c->rule) accuracy_rule(name, &ra, NULL, NULL, o, nq, c->kvdt);
  if (c->lse) {
    double *lse = malloc(sizeof(double) * nlse);
    buf_read(lse_m, OPT, nlse, CLATTN_F32, lse);
    /* lse is stored in f32: f32 rounding of the scores and of the log */
    check_close(name, lse, lse_ref, nlse, 2e-4, 2e-5);
    free(lse);
  }
  int32_t flags[OPT + 2];
  buf_read_i32(flag_m, OPT + 2, flags);
  CU_ASSERT_EQUAL(flags[OPT], (c->bad_entry || c->len_over) ? 1 : 0);
  for (int i = 0; i < OPT + 2; i++)
    if (i != OPT) CU_ASSERT_EQUAL(flags[i], 0);
  if (getenv("CLATTN_TEST_VERBOSE")) fprintf(stderr, "  %s: max err %.3g\n", name, err);

  buf_release(&o_m);
  buf_release(&p.q.buf);
  buf_release(&p.k.buf);
  buf_release(&p.v.buf);
  buf_release(&table_m);
  buf_release(&kvlen_m);
  buf_release(&qs_m);
  buf_release(&bias_m);
  buf_release(&lse_m);
  buf_release(&flag_m);
  free(table);
  free(q);
  free(k);
  free(v);
  free(bias);
  if (ref_bias != bias) free(ref_bias);
  free(kv_len);
  free(o);
  free(o_ref);
  free(lse_ref);
  free(q_start);
}

dcase base(void) {
  dcase c;
  memset(&c, 0, sizeof c);
  c.B = 2;
  c.Mq = 1;
  c.Hq = 8;
  c.Hkv = 2;
  c.D = 64;
  c.Nkv = 77;
  c.qdt = c.kvdt = c.odt = CLATTN_F32;
  c.lse = 1;
  return c;
}

static void test_dtypes(void) {
  static const clattn_dtype dts[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      dcase c = base();
      c.qdt = c.odt = dts[i];
      c.kvdt = dts[j];
      run_case(&c);
    }
}

static void test_head_dims(void) {
  static const int dims[] = {8, 64, 80, 128, 256};
  for (int i = 0; i < 5; i++) {
    dcase c = base();
    c.D = dims[i];
    c.qdt = c.kvdt = c.odt = CLATTN_F16;
    run_case(&c);
  }
}

static void test_heads(void) {
  static const int hq[] = {1, 4, 8, 8, 12}, hkv[] = {1, 1, 8, 2, 1};
  for (int i = 0; i < 5; i++) {
    dcase c = base();
    c.Hq = hq[i];
    c.Hkv = hkv[i];
    run_case(&c);
  }
}

static void test_lengths(void) {
  static const int32_t lens[] = {0, 1, 7, 1000};
  dcase c = base();
  c.B = 4;
  c.Nkv = 1000;
  c.kv_len = lens;
  run_case(&c);
  static const int32_t lens2[] = {333, 0};
  c = base();
  c.Nkv = 333;
  c.kv_len = lens2;
  c.causal = 1;
  c.Mq = 2;
  run_case(&c);
}

static void test_splits(void) {
  static const int splits[] = {1, 0, 3, 16, 200};
  for (int i = 0; i < 5; i++) {
    dcase c = base();
    c.Nkv = 300;
    c.splits = splits[i];
    run_case(&c);
  }
}

static void test_causal(void) {
  for (int mq = 1; mq <= 4; mq *= 2) {
    dcase c = base();
    c.Mq = mq;
    c.causal = 1;
    c.splits = mq == 2 ? 4 : 0;
    run_case(&c);
  }
}

static void test_bias(void) {
  dcase c = base();
  c.bias = 1;
  c.Mq = 2;
  c.causal = 1;
  run_case(&c);
  c.splits = 1;
  c.qdt = c.kvdt = c.odt = CLATTN_BF16;
  run_case(&c);
}

static void test_views(void) {
  dcase c = base();
  c.bhsd = 1;
  c.pad = 3; /* element offsets that break 16-byte alignment: the general load path */
  c.qdt = c.kvdt = c.odt = CLATTN_F16;
  run_case(&c);
  c.pad = 8;
  c.lse = 0;
  run_case(&c);
  c.bhsd = 0;
  c.pad = 5;
  c.kvdt = CLATTN_BF16;
  run_case(&c);
}


static void test_paged(void) {
  static const int sizes[] = {1, 16, 48, 256};
  static const int32_t lens[] = {0, 1, 300, 97};
  for (int i = 0; i < 4; i++) {
    dcase c = base();
    c.B = 4;
    c.Nkv = 300;
    c.kv_len = lens;
    c.page_size = sizes[i];
    c.qdt = c.kvdt = c.odt = i == 2 ? CLATTN_BF16 : CLATTN_F16;
    c.splits = i == 1 ? 5 : 0;
    run_case(&c);
  }
}

static void test_paged_shared_causal(void) {
  dcase c = base();
  c.B = 3;
  c.Nkv = 130;
  c.page_size = 16;
  c.Mq = 3;
  c.causal = 1;
  run_case(&c);
  c.causal = 0;
  c.share_pages = 1;
  run_case(&c);
  c.causal = 1;
  run_case(&c);
  c.splits = 1;
  c.bias = 1;
  run_case(&c);
}

static void test_varlen(void) {
  static const int32_t counts[] = {0, 1, 4, 2, 3};
  static const int32_t lens[] = {50, 1, 200, 0, 77};
  for (int paged = 0; paged < 2; paged++)
    for (int causal = 0; causal < 2; causal++) {
      dcase c = base();
      c.B = 5;
      c.Nkv = 200;
      c.q_counts = counts;
      c.kv_len = lens;
      c.causal = causal;
      c.page_size = paged ? 16 : 0;
      c.splits = causal ? 3 : 0;
      run_case(&c);
    }
  dcase c = base();
  c.B = 5;
  c.Nkv = 200;
  c.q_counts = counts;
  c.bias = 1;
  c.splits = 1;
  run_case(&c);
}

static void test_out_of_range(void) {
  static const int32_t lens[] = {100, 64};
  for (int bad = 1; bad <= 2; bad++) {
    dcase c = base();
    c.Nkv = 100;
    c.kv_len = lens;
    c.page_size = 16;
    c.bad_entry = bad;
    c.splits = bad == 1 ? 1 : 0;
    run_case(&c);
  }
  dcase c = base();
  c.Nkv = 96;
  static const int32_t lens2[] = {96, 50};
  c.kv_len = lens2;
  c.page_size = 16;
  c.len_over = 1000;
  run_case(&c);
}

/* The serial form (cl/decode_serial.clh, the CPU rows' choice: on CPUs the
 * suite's other cases take it too), forced on any device: head dims with 8-
 * and 16-wide vectors, MQA and MHA with splits, causal Mq 3 with bias,
 * paged with lengths 0 and 1 and a bad page, varlen causal, [B, Hkv, N, D]
 * strides at offsets without lse, the prefetch and its twin. */
static void test_serial(void) {
  const clattn_tuning saved = fx.ctx->tuning;
  fx.ctx->tuning.decode_serial = 1;
  fx.ctx->tuning.decode_mma = 0;
  static const int dims[] = {8, 80, 128, 256};
  for (int i = 0; i < 4; i++) {
    dcase c = base();
    c.D = dims[i];
    c.qdt = c.kvdt = c.odt = i == 2 ? CLATTN_BF16 : CLATTN_F16;
    c.kernels = "serial";
    run_case(&c);
  }
  static const int hkv[] = {1, 8};
  for (int i = 0; i < 2; i++) {
    dcase c = base();
    c.Hkv = hkv[i];
    c.splits = 3;
    c.kernels = "serial";
    run_case(&c);
  }
  dcase c = base();
  c.Mq = 3;
  c.causal = 1;
  c.bias = 1;
  c.Nkv = 45;
  run_case(&c);
  static const int32_t lens[] = {0, 1, 300, 97};
  static const int32_t lens_bad[] = {300, 1, 0, 97}; /* sequence 0 reaches its bad page */
  static const int32_t counts[] = {2, 0, 1, 3};
  c = base();
  c.B = 4;
  c.Nkv = 300;
  c.kv_len = lens;
  c.page_size = 16;
  run_case(&c);
  c.kv_len = lens_bad;
  c.bad_entry = 2;
  run_case(&c);
  c = base();
  c.B = 4;
  c.Nkv = 300;
  c.kv_len = lens;
  c.q_counts = counts;
  c.causal = 1;
  run_case(&c);
  c = base();
  c.bhsd = 1;
  c.pad = 3;
  c.lse = 0;
  c.splits = 16;
  run_case(&c);
  /* the CPU's prefetch instruction (CLATTN_CPU_PREFETCH, where the profile
   * has it: PoCL's CPU device) and its portable twin (a byte of each line
   * read), each against the reference, over paged keys of many tiles */
  const int has_prefetch = fx.ctx->profile.has_cpu_prefetch;
  for (int pf = has_prefetch; pf >= 0; pf--) {
    fx.ctx->profile.has_cpu_prefetch = pf;
    c = base();
    c.Nkv = 300;
    c.page_size = 16;
    c.kernels = "serial";
    run_case(&c);
  }
  fx.ctx->profile.has_cpu_prefetch = has_prefetch;
  fx.ctx->tuning = saved;
}

/* The work-group kernel (the portable form the GPU rows take) where a
 * device's row takes another (CPUs: the serial form): the dtype, head-dim,
 * paged, varlen, causal, bias and split cases again. */
static void test_work_group(void) {
  clattn_force_path(1);
  test_dtypes();
  test_head_dims();
  test_paged();
  test_varlen();
  test_causal();
  test_bias();
  test_splits();
  clattn_force_path(0);
}

/* A portable variant's cases, the tuning set for it: head dims (the second
 * with causal Mq = 3, the third bf16, the fourth a bias; f16 else), paged
 * lengths 0 and 1, then a bad page; `kernels`: what its kernels must say
 * (NULL: not checked). */
static void form_cases(const int *dims, int n, const char *kernels) {
  for (int i = 0; i < n; i++) {
    dcase c = base();
    c.D = dims[i];
    c.qdt = c.kvdt = c.odt = i == 2 ? CLATTN_BF16 : CLATTN_F16;
    c.Mq = i == 1 ? 3 : 1;
    c.causal = i == 1;
    c.bias = i == 3;
    c.kernels = kernels;
    run_case(&c);
  }
  static const int32_t lens[] = {0, 1, 300, 97};
  dcase c = base();
  c.B = 4;
  c.Nkv = 300;
  c.kv_len = lens;
  c.page_size = 16;
  c.kernels = kernels;
  run_case(&c);
  static const int32_t lens_bad[] = {300, 1, 0, 97}; /* sequence 0 reaches its bad page */
  c.kv_len = lens_bad;
  c.bad_entry = 2;
  run_case(&c);
}

/* The lane-per-chunk score pass (the GPU rows' choice) with its portable lane
 * sum: the twin that NVIDIA's shfl.sync and AMD's ds_bpermute sums are
 * compared against when the suite runs there with and without CLATTN_PORTABLE. */
static void test_lane_keys(void) {
  clattn_force_path(1); /* not the tensor-core form */
  const int saved = fx.ctx->tuning.decode_lane_keys, saved_wg = fx.ctx->tuning.decode_wg;
  fx.ctx->tuning.decode_lane_keys = 1;
  static const int dims[] = {8, 64, 128, 256};
  form_cases(dims, 4, NULL);
  fx.ctx->tuning.decode_wg = 128;
  dcase c = base();
  c.Hq = c.Hkv = 4;
  c.splits = 3;
  run_case(&c);
  fx.ctx->tuning.decode_lane_keys = saved;
  fx.ctx->tuning.decode_wg = saved_wg;
  clattn_force_path(0);
}

/* K tiles staged through local memory (a GPU row's choice), every float dtype. */
static void test_kstage(void) {
  clattn_force_path(1);
  const int saved = fx.ctx->tuning.decode_kstage;
  fx.ctx->tuning.decode_kstage = 1;
  static const clattn_dtype dts[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  for (int i = 0; i < 3; i++) {
    dcase c = base();
    c.kvdt = dts[i];
    c.D = i == 0 ? 64 : 128;
    c.Mq = 2;
    c.causal = 1;
    c.bias = i == 1;
    run_case(&c);
  }
  static const int32_t lens[] = {300, 0, 1, 97};
  dcase c = base();
  c.B = 4;
  c.Nkv = 300;
  c.kv_len = lens;
  c.page_size = 16;
  c.kvdt = CLATTN_F16;
  c.bad_entry = 1;
  run_case(&c);
  fx.ctx->tuning.decode_kstage = saved;
  clattn_force_path(0);
}

/* A portable form the tuning asks for (its flag set): form_cases (D = 96
 * bf16: chunks left over in the value pass), then f32 with splits 3 and 200
 * (more than keys), the one-launch merge and two launches; each case's
 * kernels say the form. */
static void run_port_form(int *flag, const char *kernels) {
  clattn_force_path(1);
  const clattn_tuning saved = fx.ctx->tuning;
  *flag = 1;
  static const int dims[] = {8, 64, 96, 128, 256};
  form_cases(dims, 5, kernels);
  static const int splits[] = {3, 200};
  for (int i = 0; i < 2; i++) {
    dcase c = base();
    c.Nkv = 1000;
    c.splits = splits[i];
    c.two_launch = i == 1;
    c.kernels = kernels;
    run_case(&c);
  }
  fx.ctx->tuning = saved;
  clattn_force_path(0);
}

/* The portable form's score and value passes by the group's halves, a tile apart. */
static void test_roles(void) { run_port_form(&fx.ctx->tuning.decode_port_roles, "score / value halves"); }

/* The portable form's K rows loaded a tile ahead (during the previous tile's
 * values); a bad page entry (form_cases) is found by the load's lookup. */
static void test_kpre(void) { run_port_form(&fx.ctx->tuning.decode_port_kpre, "K a tile ahead"); }

void add_decode_error_tests(CU_pSuite s); /* test_decode_errors.c */
void add_decode_quant_tests(CU_pSuite s); /* test_decode_quant.c */
void add_decode_plan_tests(CU_pSuite s);  /* test_decode_plan.c */
void add_decode_mma_tests(CU_pSuite s);   /* test_decode_mma.c */

int main(int argc, char **argv) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("decode", fixture_init, fixture_cleanup);
  add_decode_error_tests(s);
  add_decode_quant_tests(s);
  CU_add_test(s, "dtypes q/kv/o in f32 f16 bf16", test_dtypes);
  CU_add_test(s, "head dims 8 64 80 128 256", test_head_dims);
  CU_add_test(s, "heads MHA GQA MQA", test_heads);
  CU_add_test(s, "kv lengths 0 1 7 1000", test_lengths);
  CU_add_test(s, "splits 1 auto 3 16 200", test_splits);
  CU_add_test(s, "causal Mq 1 2 4", test_causal);
  CU_add_test(s, "additive bias", test_bias);
  CU_add_test(s, "strided views and offsets", test_views);
  CU_add_test(s, "paged page sizes 1 16 48 256, shuffled", test_paged);
  CU_add_test(s, "paged shared prefix pages, causal", test_paged_shared_causal);
  CU_add_test(s, "varlen queries, dense and paged", test_varlen);
  CU_add_test(s, "block table out of range", test_out_of_range);
  CU_add_test(s, "serial form, a work-item per split", test_serial);
  CU_add_test(s, "work-group kernel, forced", test_work_group);
  CU_add_test(s, "lane-per-chunk score pass", test_lane_keys);
  CU_add_test(s, "K tiles staged in local memory", test_kstage);
  CU_add_test(s, "score / value halves", test_roles);
  CU_add_test(s, "K a tile ahead", test_kpre);
  add_decode_mma_tests(s);
  add_decode_plan_tests(s);
  if (!select_part(argc, argv)) return 1; /* tests/part.h */
  return run_suites();
}
