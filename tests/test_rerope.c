/* ReRoPE windowed attention against the double-precision reference: forward
 * (o, lse) and every gradient, windows 0, 1, 17, N/2, >= N, causal and not,
 * GQA, Nq != Nk, odd lengths, f32/f16/bf16, strided views, the rotary
 * variant (NeoX and interleaved, default, shared and per-batch positions),
 * the tensor-core kernels (emulated where the device has no PTX), finite-
 * difference checks of the reference gradients, and the error paths.
 * Developers: RR_ONLY=<substring> runs only the cases whose name has it,
 * RR_VERBOSE=1 prints every comparison's largest error. */
#include "common.h"
#include "part.h"
#include "internal.h"
#include "ref_rerope.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_rerope.h"

/* A device tensor [Z, H, N, D] holding x (logical order), contiguous or
 * [Z, N, H, D] through strides after `pad` elements. */
static clattn_tensor upload(const double *x, int Z, int H, int N, int D, clattn_dtype dt,
                            int strided, int poison) {
  const size_t n = (size_t)Z * H * N * D, pad = strided ? 3 : 0;
  double *tmp = calloc(n + pad + 1, sizeof(double));
  for (int z = 0; z < Z; z++)
    for (int h = 0; h < H; h++)
      for (int s = 0; s < N; s++)
        for (int d = 0; d < D; d++) {
          const size_t src = (((size_t)z * H + h) * N + s) * D + d;
          const size_t dst = strided ? (((size_t)z * N + s) * H + h) * D + d : src;
          tmp[pad + dst] = x ? x[src] : 0.0;
        }
  cl_mem m = poison ? buf_poison((n + pad) * clattn_dtype_size(dt)) : buf_from(tmp, n + pad, dt);
  free(tmp);
  clattn_tensor t = clattn_tensor_4d(m, pad * clattn_dtype_size(dt), dt, Z, H, N, D);
  if (strided) {
    t.stride[0] = (int64_t)N * H * D;
    t.stride[1] = D;
    t.stride[2] = (int64_t)H * D;
  }
  return t;
}

static double *download(const clattn_tensor *t) {
  const int Z = (int)t->shape[0], H = (int)t->shape[1], N = (int)t->shape[2], D = (int)t->shape[3];
  size_t total = 0;
  clGetMemObjectInfo(t->buf, CL_MEM_SIZE, sizeof total, &total, NULL);
  const size_t ne = total / clattn_dtype_size(t->dtype);
  double *all = malloc(sizeof(double) * (ne ? ne : 1));
  buf_read(t->buf, 0, ne, t->dtype, all);
  double *x = malloc(sizeof(double) * ((size_t)Z * H * N * D + 1));
  const int64_t off = clattn_elem_offset(t);
  for (int z = 0; z < Z; z++)
    for (int h = 0; h < H; h++)
      for (int s = 0; s < N; s++)
        for (int d = 0; d < D; d++)
          x[(((size_t)z * H + h) * N + s) * D + d] =
              all[off + z * t->stride[0] + h * t->stride[1] + s * t->stride[2] + d * t->stride[3]];
  free(all);
  return x;
}

static void release(clattn_tensor *t) {
  if (t->buf) clReleaseMemObject(t->buf);
  t->buf = NULL;
}

/* |got - want| <= tol * (max |want| + 1e-3) + tol * |want|: errors of an
 * attention output scale with the tensor's magnitude, not each element's. */
static void compare(const char *name, const char *what, const double *got, const double *want,
                    size_t n, double tol) {
  double mx = 0.0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(want[i]) && fabs(want[i]) > mx) mx = fabs(want[i]);
  char label[320];
  snprintf(label, sizeof label, "%s: %s", name, what);
  double err = check_close(label, got, want, n, tol * (mx + 1e-3), tol);
  if (getenv("RR_VERBOSE")) fprintf(stderr, "    %-8s max err %.3g (scale %.3g)\n", what, err, mx);
}

static void rope_rows(double *x, int Z, int H, int N, int D, const int32_t *pos, int fixed,
                      const rcase *c, int inverse) {
  for (int z = 0; z < Z; z++)
    for (int h = 0; h < H; h++)
      ref_rope(x + (((size_t)z * H + h) * N) * D, N, D, pos ? pos + (size_t)z * N : NULL, fixed,
               10000.0, c->interleaved, inverse);
}

/* Positions [Z][N] as the reference sees them (the defaults Nk - Nq + i and
 * j when the case passes none), and the device tensor (absent then). */
static int32_t *make_pos(const rcase *c, int N, int is_q, clattn_tensor *t) {
  memset(t, 0, sizeof *t);
  int32_t *p = malloc(sizeof(int32_t) * c->Z * N + 4);
  for (int z = 0; z < c->Z; z++)
    for (int i = 0; i < N; i++)
      p[z * N + i] = c->positions == 0   ? i + (is_q ? c->Nk - c->Nq : 0)
                     : c->positions == 1 ? i + (is_q ? 3 : 0)
                                         : i + 5 * z;
  if (c->positions == 2) /* shuffled within each batch: tiles with scattered positions */
    for (int z = 0; z < c->Z; z++)
      for (int i = N - 1; i > 0; i--) {
        int j = rng_int(0, i), x = p[z * N + i];
        p[z * N + i] = p[z * N + j];
        p[z * N + j] = x;
      }
  if (c->positions) {
    const int per_batch = c->positions == 2;
    /* a view behind junk positions (common.h) */
    cl_mem m = buf_from_i32_after(p, per_batch ? (size_t)c->Z * N : (size_t)N, 1 << 16);
    *t = per_batch ? clattn_tensor_2d(m, VIEW_LEAD * 4, CLATTN_I32, c->Z, N)
                   : clattn_tensor_1d(m, VIEW_LEAD * 4, CLATTN_I32, N);
  }
  return p;
}

/* Tolerance (relative to the tensor's largest value) of o and the gradients.
 * 16-bit dtypes: the inputs are exact in both, so the error is the rounding
 * of the stored outputs (f16 2^-11, bf16 2^-8) times a few; tensor cores
 * also round P and dS to the dtype before their products, and the rotary
 * kernels round rotated q, k to it: twice the margin then. f32: float
 * accumulation over ~100 terms (observed below 1e-6); rotary angles
 * p * theta^(-2i/D) are formed in f32 (relative 2^-24 of up to N radians). */
static double tol_of(const rcase *c, bool mma) {
  const bool extra = mma || c->rotary;
  switch (c->dt) {
  case CLATTN_F16:
    return (extra ? 8.0 : 4.0) / 2048.0;
  case CLATTN_BF16:
    return (extra ? 8.0 : 4.0) / 256.0;
  default:
    return c->rotary ? 5e-5 : 2e-5;
  }
}

/* Tolerance of lse: logits in f32 from exact inputs, except rotary 16-bit
 * runs, whose rotated q, k carry one rounding of the dtype. */
static double lse_tol_of(const rcase *c) {
  if (c->rotary && c->dt == CLATTN_F16) return 1.0 / 2048.0;
  if (c->rotary && c->dt == CLATTN_BF16) return 1.0 / 256.0;
  return 2e-5;
}

/* Whether the library runs the tensor-core kernels for this case. */
static bool runs_mma(const clattn_tensor *q, const clattn_tensor *k, const clattn_tensor *v,
                     clattn_rr_kind kind, int W) {
  clattn_rr_problem p;
  clattn_rr_plan pl;
  const clattn_tensor *views[] = {q, k, v};
  if (clattn_rr_problem_init(fx.ctx, &p, q, "q", k, "k", W, 0.0f, 0) != CLATTN_SUCCESS) return false;
  return clattn_rr_plan_make(fx.ctx, &p, kind, views, 3, &pl) == CLATTN_SUCCESS && pl.mma;
}

void run_case(const rcase *c) {
  char name[256];
  CASE_NAME(name, "rerope Z=%d Hq=%d Hkv=%d Nq=%d Nk=%d D=%d W=%d %s%s%s%s%s%s%s scale=%g stages=%d mt=%d bn=%d cols=%d phases=%d qring=%d bm=%d bbn=%d st=%d wg=%d/%d/%d", c->Z, c->Hq,
            c->Hkv, c->Nq, c->Nk, c->D, c->W, clattn_dtype_name(c->dt), c->causal ? " causal" : "",
            c->rotary ? (c->interleaved ? " rotary-interleaved" : " rotary-neox") : "",
            c->positions == 1   ? " pos"
            : c->positions == 2 ? " pos-per-batch"
                                : "",
            c->strided ? " strided" : "", c->bwd ? " bwd" : "",
            c->path == 1   ? " portable"
            : c->path == 2 ? " mma"
                           : "",
            (double)c->scale, c->stages, c->warp_blocks, c->block_n, c->bwd_cols, c->phases - 1,
            c->qring, c->bwd_bm, c->bwd_bn, c->bwd_stages, c->wgmma, c->wg_bn, c->bwd_wgmma);
  if (getenv("RR_ONLY") && !strstr(name, getenv("RR_ONLY"))) return;
  fprintf(stderr, "  %s\n", name);
  clattn_force_path(c->path);
  const clattn_tuning saved = fx.ctx->tuning;
  if (c->stages) fx.ctx->tuning.rerope_stages = c->stages;
  if (c->warp_blocks) fx.ctx->tuning.rerope_warp_blocks = c->warp_blocks;
  if (c->block_n) fx.ctx->tuning.rerope_mma_block_n = c->block_n;
  if (c->bwd_cols) fx.ctx->tuning.rerope_bwd_cols = c->bwd_cols;
  if (c->phases) fx.ctx->tuning.rerope_bwd_phases = c->phases - 1;
  if (c->qring) fx.ctx->tuning.rerope_bwd_qring = c->qring;
  if (c->bwd_bm) fx.ctx->tuning.rerope_bwd_block_m = c->bwd_bm;
  if (c->bwd_stages) fx.ctx->tuning.rerope_bwd_stages = c->bwd_stages;
  if (c->bwd_bn) fx.ctx->tuning.rerope_bwd_block_n = c->bwd_bn;
  if (c->wgmma) fx.ctx->tuning.rerope_wgmma = c->wgmma;
  if (c->wg_bn) fx.ctx->tuning.rerope_wgmma_block_n = c->wg_bn;
  if (c->bwd_wgmma) fx.ctx->tuning.rerope_bwd_wgmma = c->bwd_wgmma;
  const float scale = c->scale;
  const double ref_scale = scale != 0.0f ? (double)scale : 1.0 / sqrt((double)c->D);
  const int Z = c->Z, Hq = c->Hq, Hkv = c->Hkv, Nq = c->Nq, Nk = c->Nk, D = c->D;
  const size_t nq = (size_t)Z * Hq * Nq * D, nk = (size_t)Z * Hkv * Nk * D;
  const size_t nl = (size_t)Z * Hq * Nq;
  clattn_tensor qpos_t, kpos_t;
  int32_t *qpos = make_pos(c, Nq, 1, &qpos_t), *kpos = make_pos(c, Nk, 0, &kpos_t);

  /* inputs: explicit q1, q2, k1, k2; rotary: raw q, k rotated here for the reference */
  double *q1 = rand_tensor(nq, c->dt, 1.0), *k1 = rand_tensor(nk, c->dt, 1.0), *v = rand_tensor(nk, c->dt, 1.0);
  double *q2 = NULL, *k2 = NULL;
  if (c->rotary) {
    q2 = malloc(sizeof(double) * nq);
    k2 = malloc(sizeof(double) * nk);
    memcpy(q2, q1, sizeof(double) * nq);
    memcpy(k2, k1, sizeof(double) * nk);
  } else {
    q2 = rand_tensor(nq, c->dt, 1.0);
    k2 = rand_tensor(nk, c->dt, 1.0);
  }
  double *rq1 = q1, *rq2 = q2, *rk1 = k1; /* what the reference sees */
  if (c->rotary) {
    rq1 = malloc(sizeof(double) * nq);
    rk1 = malloc(sizeof(double) * nk);
    memcpy(rq1, q1, sizeof(double) * nq);
    memcpy(rk1, k1, sizeof(double) * nk);
    rope_rows(rq1, Z, Hq, Nq, D, qpos, 0, c, 0);
    rope_rows(rq2, Z, Hq, Nq, D, NULL, c->W, c, 0);
    rope_rows(rk1, Z, Hkv, Nk, D, kpos, 0, c, 0);
  }
  double *o_ref = malloc(sizeof(double) * (nq + 1)), *lse_ref = malloc(sizeof(double) * (nl + 1));
  ref_rerope_args ra = {Z,    Hq,   Hkv,  Nq,   Nk,   D,   c->W, c->causal, ref_scale,
                        qpos, kpos, rq1,  rq2,  rk1,  k2,  v,    o_ref,     lse_ref,
                        NULL, NULL, NULL, NULL, NULL, NULL};
  ref_rerope_fwd(&ra);

  /* device */
  clattn_tensor tq1 = upload(q1, Z, Hq, Nq, D, c->dt, c->strided, 0);
  clattn_tensor tk1 = upload(k1, Z, Hkv, Nk, D, c->dt, c->strided, 0);
  clattn_tensor tv = upload(v, Z, Hkv, Nk, D, c->dt, c->strided, 0);
  clattn_tensor tq2 = {0}, tk2 = {0};
  if (!c->rotary) {
    tq2 = upload(q2, Z, Hq, Nq, D, c->dt, c->strided, 0);
    tk2 = upload(k2, Z, Hkv, Nk, D, c->dt, c->strided, 0);
  }
  clattn_tensor to = upload(NULL, Z, Hq, Nq, D, c->dt, c->strided, 1);
  cl_mem lse_m = buf_poison(sizeof(float) * (nl + VIEW_LEAD)); /* lse at an offset */
  clattn_tensor tl = clattn_tensor_3d(lse_m, VIEW_LEAD * 4, CLATTN_F32, Z, Hq, Nq);
  cl_event ev = NULL;
  if (c->rotary) {
    clattn_rerope_rotary_params p = {
        tq1,  tk1,       tv,     to,
        tl,   qpos_t,    kpos_t, c->W,
        scale, c->causal, 0.0f,  c->interleaved ? CLATTN_ROPE_INTERLEAVED : CLATTN_ROPE_NEOX};
    CHECK_OK(clattn_rerope_rotary_fwd(fx.ctx, fx.queue, &p, 0, NULL, &ev));
  } else {
    clattn_rerope_params p = {tq1, tq2, tk1, tk2, tv, to, tl, c->W, scale, c->causal};
    CHECK_OK(clattn_rerope_fwd(fx.ctx, fx.queue, &p, 0, NULL, &ev));
  }
  CU_ASSERT_PTR_NOT_NULL(ev);
  if (ev) clReleaseEvent(ev);
  finish();
  const bool mma_f = runs_mma(&tq1, &tk1, &tv, CLATTN_RR_FWD, c->W);
  const bool mma_b = runs_mma(&tq1, &tk1, &tv, CLATTN_RR_BWD, c->W);
  if (getenv("RR_VERBOSE"))
    fprintf(stderr, "    kernels: forward %s, backward %s\n", mma_f ? "mma" : "portable",
            mma_b ? "mma" : "portable");
  double tol = tol_of(c, mma_f);
  double *o = download(&to), *lse = malloc(sizeof(double) * (nl + 1));
  buf_read(lse_m, VIEW_LEAD, nl, CLATTN_F32, lse);
  compare(name, "o", o, o_ref, nq, tol);
  compare(name, "lse", lse, lse_ref, nl, lse_tol_of(c));

  if (c->rotary && c->cross_check) {
    /* the explicit kernels on inputs rotated (and rounded) on the host */
    double *hq1 = malloc(sizeof(double) * nq), *hq2 = malloc(sizeof(double) * nq);
    double *hk1 = malloc(sizeof(double) * nk);
    for (size_t i = 0; i < nq; i++)
      hq1[i] = round_dtype(rq1[i], c->dt), hq2[i] = round_dtype(rq2[i], c->dt);
    for (size_t i = 0; i < nk; i++) hk1[i] = round_dtype(rk1[i], c->dt);
    clattn_tensor eq1 = upload(hq1, Z, Hq, Nq, D, c->dt, 0, 0),
                  eq2 = upload(hq2, Z, Hq, Nq, D, c->dt, 0, 0);
    clattn_tensor ek1 = upload(hk1, Z, Hkv, Nk, D, c->dt, 0, 0),
                  ek2 = upload(k2, Z, Hkv, Nk, D, c->dt, 0, 0);
    clattn_tensor eo = upload(NULL, Z, Hq, Nq, D, c->dt, 0, 1);
    clattn_tensor ev_ = upload(v, Z, Hkv, Nk, D, c->dt, 0, 0);
    if (!c->positions) {
      clattn_rerope_params p = {eq1, eq2, ek1, ek2, ev_, eo, {0}, c->W, scale, c->causal};
      CHECK_OK(clattn_rerope_fwd(fx.ctx, fx.queue, &p, 0, NULL, NULL));
      finish();
      double *eo_h = download(&eo);
      /* same numbers up to where the rotated values were rounded (host: from double) */
      compare(name, "o vs explicit kernels", o, eo_h, nq, tol);
      free(eo_h);
    }
    release(&eq1), release(&eq2), release(&ek1), release(&ek2), release(&eo), release(&ev_);
    free(hq1), free(hq2), free(hk1);
  }

  if (c->bwd) {
    tol = tol_of(c, mma_f || mma_b); /* the backward reads the forward's o and lse */
    double *dout = rand_tensor(nq, c->dt, 1.0);
    double *g[5];
    for (int i = 0; i < 5; i++) g[i] = malloc(sizeof(double) * ((i < 2 ? nq : nk) + 1));
    ra.dout = dout;
    ra.dq1 = g[0], ra.dq2 = g[1], ra.dk1 = g[2], ra.dk2 = g[3], ra.dv = g[4];
    ref_rerope_bwd(&ra);
    clattn_tensor tdo = upload(dout, Z, Hq, Nq, D, c->dt, c->strided, 0);
    clattn_tensor tg[5];
    for (int i = 0; i < 5; i++)
      tg[i] = (c->rotary && (i == 1 || i == 3))
                  ? (clattn_tensor){0}
                  : upload(NULL, Z, i < 2 ? Hq : Hkv, i < 2 ? Nq : Nk, D, c->dt, c->strided, 1);
    ev = NULL;
    if (c->rotary) {
      clattn_rerope_rotary_bwd_params p = {tq1,
                                           tk1,
                                           tv,
                                           to,
                                           tl,
                                           tdo,
                                           tg[0],
                                           tg[2],
                                           tg[4],
                                           qpos_t,
                                           kpos_t,
                                           {0},
                                           c->W,
                                           scale,
                                           c->causal,
                                           0.0f,
                                           c->interleaved ? CLATTN_ROPE_INTERLEAVED
                                                          : CLATTN_ROPE_NEOX};
      CHECK_OK(clattn_rerope_rotary_bwd(fx.ctx, fx.queue, &p, 0, NULL, &ev));
    } else {
      /* a caller-provided workspace, at an offset */
      const size_t wsb = clattn_rerope_bwd_workspace_size(Z, Hq, Nq);
      cl_mem ws = buf_zeros(wsb + 64);
      clattn_rerope_bwd_params p = {
          tq1,      tq2,
          tk1,      tk2,
          tv,       to,
          tl,       tdo,
          tg[0],    tg[1],
          tg[2],    tg[3],
          tg[4],    clattn_tensor_1d(ws, 16, CLATTN_F32, (int64_t)(wsb / 4)),
          c->W,     scale,
          c->causal};
      CHECK_OK(clattn_rerope_bwd(fx.ctx, fx.queue, &p, 0, NULL, &ev));
      clReleaseMemObject(ws); /* the runtime keeps it until the kernels finish */
    }
    CU_ASSERT_PTR_NOT_NULL(ev);
    if (ev) clReleaseEvent(ev);
    finish();
    if (c->rotary) {
      /* dq = R(p_i)^T dq1 + R(W)^T dq2, dk = R(p_j)^T dk1 + dk2 */
      double *dq = malloc(sizeof(double) * nq), *dk = malloc(sizeof(double) * nk);
      rope_rows(g[1], Z, Hq, Nq, D, NULL, c->W, c, 1);
      rope_rows(g[0], Z, Hq, Nq, D, qpos, 0, c, 1);
      rope_rows(g[2], Z, Hkv, Nk, D, kpos, 0, c, 1);
      for (size_t i = 0; i < nq; i++) dq[i] = g[0][i] + g[1][i];
      for (size_t i = 0; i < nk; i++) dk[i] = g[2][i] + g[3][i];
      double *got_dq = download(&tg[0]), *got_dk = download(&tg[2]), *got_dv = download(&tg[4]);
      compare(name, "dq", got_dq, dq, nq, tol);
      compare(name, "dk", got_dk, dk, nk, tol);
      compare(name, "dv", got_dv, g[4], nk, tol);
      free(got_dq), free(got_dk), free(got_dv), free(dq), free(dk);
    } else {
      static const char *names[5] = {"dq1", "dq2", "dk1", "dk2", "dv"};
      for (int i = 0; i < 5; i++) {
        double *got = download(&tg[i]);
        compare(name, names[i], got, g[i], i < 2 ? nq : nk, tol);
        free(got);
      }
    }
    for (int i = 0; i < 5; i++) {
      release(&tg[i]);
      free(g[i]);
    }
    release(&tdo);
    free(dout);
  }

  release(&tq1), release(&tq2), release(&tk1), release(&tk2), release(&tv), release(&to);
  release(&qpos_t), release(&kpos_t);
  buf_release(&lse_m);
  if (c->rotary) free(rq1), free(rk1);
  free(q1), free(q2), free(k1), free(k2), free(v), free(o), free(lse), free(o_ref), free(lse_ref);
  free(qpos), free(kpos);
  fx.ctx->tuning = saved;
  clattn_force_path(0);
}

rcase base(void) {
  rcase c;
  memset(&c, 0, sizeof c);
  c.Z = 1, c.Hq = 2, c.Hkv = 1, c.Nq = 37, c.Nk = 37, c.D = 32, c.W = 9;
  c.dt = CLATTN_F32;
  return c;
}

/* ---------------------------------------------------------------- cases */

static void test_windows(void) {
  const int N = 45;
  const int ws[] = {0, 1, 17, N / 2, N, N + 100};
  for (int causal = 0; causal < 2; causal++)
    for (int i = 0; i < 6; i++) {
      rcase c = base();
      c.Nq = c.Nk = N;
      c.W = ws[i];
      c.causal = causal;
      c.bwd = 1;
      run_case(&c);
    }
}

static void test_gqa_lengths(void) {
  static const int sh[][4] = {
      /* Hq Hkv Nq Nk */ {4, 2, 33, 33}, {6, 1, 20, 53}, {3, 3, 61, 17}, {4, 1, 1, 40}};
  for (int i = 0; i < 4; i++)
    for (int causal = 0; causal < 2; causal++) {
      rcase c = base();
      c.Z = i == 1 ? 2 : 1;
      c.Hq = sh[i][0], c.Hkv = sh[i][1], c.Nq = sh[i][2], c.Nk = sh[i][3];
      c.W = i == 2 ? 5 : 12;
      c.causal = causal;
      c.bwd = 1;
      run_case(&c);
    }
}

/* f16 and bf16 on the portable kernels and on whatever the device picks
 * (tensor cores on NVIDIA; the same portable kernels on PoCL, run once). */
static void test_dtypes(void) {
  clattn_device_profile prof;
  clattn_context_profile(fx.ctx, &prof);
  for (int i = 0; i < 2; i++) {
    rcase c = base();
    c.dt = i ? CLATTN_BF16 : CLATTN_F16;
    c.D = 64;
    c.Nq = 50, c.Nk = 71;
    c.W = 13;
    c.Hq = 4, c.Hkv = 2;
    c.bwd = 1;
    for (c.path = prof.has_nv_ptx ? 1 : 0; c.path >= 0; c.path--)
      for (c.causal = 0; c.causal < 2; c.causal++) run_case(&c);
  }
}

static void test_head_dims(void) {
  static const int dims[] = {8, 24, 256};
  for (int i = 0; i < 3; i++) {
    rcase c = base();
    c.D = dims[i];
    c.dt = i == 2 ? CLATTN_F16 : CLATTN_F32;
    c.Nq = c.Nk = i == 2 ? 29 : 40;
    c.W = 7;
    c.causal = i != 1;
    c.bwd = 1;
    run_case(&c);
  }
}

static void test_strided(void) {
  rcase c = base();
  c.strided = 1;
  c.Hq = 4, c.Hkv = 2;
  c.Nq = 30, c.Nk = 47;
  c.causal = 1;
  c.bwd = 1;
  run_case(&c);
  c.dt = CLATTN_F16;
  c.D = 64;
  run_case(&c);
}

static void test_rotary(void) {
  for (int il = 0; il < 2; il++)
    for (int pos = 0; pos < 3; pos++) {
      rcase c = base();
      c.rotary = 1;
      c.interleaved = il;
      c.positions = pos;
      c.Z = pos == 2 ? 2 : 1;
      c.Hq = 4, c.Hkv = 2;
      c.Nq = pos == 1 ? 31 : 40, c.Nk = 40;
      c.W = 11;
      c.causal = pos != 1 || il;
      c.bwd = 1;
      run_case(&c);
    }
}

static void test_rotary_f16(void) {
  rcase c = base();
  c.rotary = 1;
  c.dt = CLATTN_F16;
  c.D = 64;
  c.Nq = c.Nk = 52;
  c.W = 20;
  c.causal = 1;
  c.bwd = 1;
  c.cross_check = 1;
  run_case(&c);
  c.interleaved = 1;
  c.causal = 0;
  c.Nq = 25;
  run_case(&c);
}

/* ---------------------------------------------------------------- finite differences */

/* The analytic gradients of the reference against central differences of its
 * loss sum(o * dout), explicit and through the rotary embedding. */
static void test_reference_gradients(void) {
  const int Z = 1, Hq = 2, Hkv = 1, N = 9, D = 8;
  const size_t nq = (size_t)Z * Hq * N * D, nk = (size_t)Z * Hkv * N * D;
  rng_seed(11);
  for (int rotary = 0; rotary < 2; rotary++) {
    double *x[5], *g[5], *o = malloc(sizeof(double) * nq), *dout = malloc(sizeof(double) * nq);
    for (int i = 0; i < 5; i++) {
      const size_t n = i < 2 ? nq : nk;
      x[i] = malloc(sizeof(double) * n);
      g[i] = malloc(sizeof(double) * n);
      for (size_t j = 0; j < n; j++) x[i][j] = rng_normal();
    }
    for (size_t j = 0; j < nq; j++) dout[j] = rng_normal();
    /* rotary: x[0] = raw q, x[2] = raw k drive q1 = R(p) q, q2 = R(W) q, k1 = R(p) k, k2 = k */
    double *rq1 = malloc(sizeof(double) * nq), *rq2 = malloc(sizeof(double) * nq);
    double *rk1 = malloc(sizeof(double) * nk), *rk2 = malloc(sizeof(double) * nk);
    ref_rerope_args ra = {Z,   Hq,  Hkv, N,    N, D,    3,    1,    0.4,  NULL, NULL, rq1,
                          rq2, rk1, rk2, x[4], o, NULL, dout, g[0], g[1], g[2], g[3], g[4]};
    int32_t pos[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
#define PREPARE()                                                                                  \
  do {                                                                                             \
    memcpy(rq1, x[0], sizeof(double) * nq);                                                        \
    memcpy(rq2, rotary ? x[0] : x[1], sizeof(double) * nq);                                        \
    memcpy(rk1, x[2], sizeof(double) * nk);                                                        \
    memcpy(rk2, rotary ? x[2] : x[3], sizeof(double) * nk);                                        \
    if (rotary) {                                                                                  \
      for (int h = 0; h < Hq; h++) ref_rope(rq1 + (size_t)h * N * D, N, D, pos, 0, 100.0, 0, 0);   \
      ref_rope(rq2, Hq *N, D, NULL, 3, 100.0, 0, 0);                                               \
      ref_rope(rk1, N, D, pos, 0, 100.0, 0, 0);                                                    \
    }                                                                                              \
  } while (0)
    PREPARE();
    ref_rerope_bwd(&ra);
    if (rotary) { /* chain rule through the rotations */
      for (int h = 0; h < Hq; h++) ref_rope(g[0] + (size_t)h * N * D, N, D, pos, 0, 100.0, 0, 1);
      ref_rope(g[1], Hq * N, D, NULL, 3, 100.0, 0, 1);
      ref_rope(g[2], N, D, pos, 0, 100.0, 0, 1);
      for (size_t j = 0; j < nq; j++) g[0][j] += g[1][j];
      for (size_t j = 0; j < nk; j++) g[2][j] += g[3][j];
    }
    for (int t = 0; t < 5; t++) {
      if (rotary && (t == 1 || t == 3)) continue; /* q2, k2 are not inputs there */
      const size_t n = t < 2 ? nq : nk;
      for (int s = 0; s < 12; s++) {
        const size_t j = (size_t)rng_int(0, (int)n - 1);
        const double h = 1e-5, keep = x[t][j];
        x[t][j] = keep + h;
        PREPARE();
        const double lp = ref_rerope_loss(&ra);
        x[t][j] = keep - h;
        PREPARE();
        const double lm = ref_rerope_loss(&ra);
        x[t][j] = keep;
        const double fd = (lp - lm) / (2 * h);
        /* central differences: O(h^2) truncation plus 1e-16 / h rounding */
        if (fabs(fd - g[t][j]) > 1e-7 * (1.0 + fabs(g[t][j]))) {
          fprintf(stderr, "  %s grad %d[%zu]: analytic %.12g, finite difference %.12g\n",
                  rotary ? "rotary" : "explicit", t, j, g[t][j], fd);
          CU_FAIL("analytic gradient differs from finite differences");
        }
      }
    }
#undef PREPARE
    for (int i = 0; i < 5; i++) free(x[i]), free(g[i]);
    free(o), free(dout), free(rq1), free(rq2), free(rk1), free(rk2);
  }
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void) {
  const int Z = 1, H = 2, N = 8, D = 16;
  cl_mem big = buf_zeros(4 * sizeof(float) * Z * H * N * D); /* room for the shape errors */
  cl_mem small = buf_zeros(64);
  clattn_tensor q = clattn_tensor_4d(big, 0, CLATTN_F32, Z, H, N, D);
  clattn_tensor l = clattn_tensor_3d(big, 0, CLATTN_F32, Z, H, N);
  clattn_rerope_params p0 = {q, q, q, q, q, q, l, 4, 0.0f, 1}, p;
  cl_event ev = NULL;
#define FAILS(params_expr, status, needle)                                                         \
  do {                                                                                             \
    ev = NULL;                                                                                     \
    CHECK_FAILS(clattn_rerope_fwd(fx.ctx, fx.queue, params_expr, 0, NULL, &ev), status, needle);   \
    CU_ASSERT_PTR_NULL(ev); /* nothing enqueued */                                                 \
  } while (0)
  FAILS(NULL, CLATTN_INVALID_ARGUMENT, "params");
  p = p0, p.q1.buf = NULL;
  FAILS(&p, CLATTN_INVALID_ARGUMENT, "q1.buf");
  p = p0, p.q1.shape[3] = p.q2.shape[3] = 12;
  p.k1.shape[3] = p.k2.shape[3] = p.v.shape[3] = p.o.shape[3] = 12;
  FAILS(&p, CLATTN_UNSUPPORTED, "head dim");
  p = p0, p.q1.dtype = CLATTN_F64;
  FAILS(&p, CLATTN_UNSUPPORTED, "q1.dtype");
  p = p0, p.k1.shape[1] = p.k2.shape[1] = p.v.shape[1] = 3;
  FAILS(&p, CLATTN_INVALID_SHAPE, "k1.shape[1]");
  p = p0, p.k2.shape[2] = 7;
  FAILS(&p, CLATTN_INVALID_SHAPE, "k2.shape[2]");
  p = p0, p.q2.shape[0] = 1, p.q2.shape[2] = 4;
  FAILS(&p, CLATTN_INVALID_SHAPE, "q2.shape[2]");
  p = p0, p.v.dtype = CLATTN_F16;
  FAILS(&p, CLATTN_INVALID_ARGUMENT, "v.dtype");
  p = p0, p.o.buf = small;
  FAILS(&p, CLATTN_OUT_OF_BOUNDS, "o");
  p = p0, p.maybe_lse.dtype = CLATTN_F16;
  FAILS(&p, CLATTN_UNSUPPORTED, "maybe_lse.dtype");
  p = p0, p.maybe_lse.shape[2] = 5;
  FAILS(&p, CLATTN_INVALID_SHAPE, "maybe_lse.shape[2]");
  p = p0, p.window = -1;
  FAILS(&p, CLATTN_INVALID_ARGUMENT, "window");
  p = p0, p.scale = NAN;
  FAILS(&p, CLATTN_INVALID_ARGUMENT, "scale");
  p = p0, p.k1.stride[2] = -16;
  FAILS(&p, CLATTN_INVALID_SHAPE, "k1.stride[2]");
#undef FAILS
  CHECK_FAILS(clattn_rerope_fwd(fx.ctx, NULL, &p0, 0, NULL, NULL), CLATTN_INVALID_ARGUMENT,
              "queue");
  CHECK_FAILS(clattn_rerope_fwd(fx.ctx, fx.queue, &p0, 1, NULL, NULL), CLATTN_INVALID_ARGUMENT,
              "num_wait");

  /* backward */
  clattn_rerope_bwd_params b0 = {q, q, q, q, q, q, l, q, q, q, q, q, q, {0}, 4, 0.0f, 0}, b;
  b = b0, b.lse.buf = NULL;
  ev = NULL;
  CHECK_FAILS(clattn_rerope_bwd(fx.ctx, fx.queue, &b, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "lse.buf");
  CU_ASSERT_PTR_NULL(ev);
  b = b0, b.dk2.shape[2] = 9;
  CHECK_FAILS(clattn_rerope_bwd(fx.ctx, fx.queue, &b, 0, NULL, &ev), CLATTN_INVALID_SHAPE,
              "dk2.shape[2]");
  b = b0, b.dout.dtype = CLATTN_BF16;
  CHECK_FAILS(clattn_rerope_bwd(fx.ctx, fx.queue, &b, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "dout.dtype");
  /* b0's outputs are all one view: an output over another */
  CHECK_FAILS(clattn_rerope_bwd(fx.ctx, fx.queue, &b0, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "overlaps");
  /* outputs apart, the caller's workspace too small */
  cl_mem outs = buf_zeros(5 * sizeof(float) * Z * H * N * D);
  b = b0;
  clattn_tensor *dst[5] = {&b.dq1, &b.dq2, &b.dk1, &b.dk2, &b.dv};
  for (int i = 0; i < 5; i++)
    *dst[i] = clattn_tensor_4d(outs, (size_t)i * sizeof(float) * Z * H * N * D, CLATTN_F32, Z, H, N, D);
  b.maybe_workspace = clattn_tensor_1d(small, 0, CLATTN_F32, 3);
  CHECK_FAILS(clattn_rerope_bwd(fx.ctx, fx.queue, &b, 0, NULL, &ev), CLATTN_OUT_OF_BOUNDS,
              "maybe_workspace.shape[0] is 3 floats (12 bytes); this call needs 64 bytes");
  buf_release(&outs);
  CHECK_FAILS(clattn_rerope_bwd(fx.ctx, fx.queue, NULL, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "params");
  CU_ASSERT_PTR_NULL(ev);

  /* rotary */
  cl_mem posm = buf_zeros(64);
  clattn_rerope_rotary_params r0 = {q, q, q, q, l, {0}, {0}, 4, 0.0f, 1, 0.0f, CLATTN_ROPE_NEOX}, r;
  r = r0, r.maybe_q_pos = clattn_tensor_1d(posm, 0, CLATTN_I32, 7);
  CHECK_FAILS(clattn_rerope_rotary_fwd(fx.ctx, fx.queue, &r, 0, NULL, &ev), CLATTN_INVALID_SHAPE,
              "maybe_q_pos.shape[0]");
  r = r0, r.maybe_k_pos = clattn_tensor_1d(posm, 0, CLATTN_F32, 8);
  CHECK_FAILS(clattn_rerope_rotary_fwd(fx.ctx, fx.queue, &r, 0, NULL, &ev), CLATTN_UNSUPPORTED,
              "maybe_k_pos.dtype");
  r = r0, r.maybe_k_pos = clattn_tensor_2d(posm, 0, CLATTN_I32, 2, 8);
  CHECK_FAILS(clattn_rerope_rotary_fwd(fx.ctx, fx.queue, &r, 0, NULL, &ev), CLATTN_INVALID_SHAPE,
              "maybe_k_pos.shape[0]");
  r = r0, r.rope_theta = -3.0f;
  CHECK_FAILS(clattn_rerope_rotary_fwd(fx.ctx, fx.queue, &r, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "rope_theta");
  r = r0, r.rope_layout = (clattn_rope_layout)7;
  CHECK_FAILS(clattn_rerope_rotary_fwd(fx.ctx, fx.queue, &r, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "rope_layout");
  clattn_rerope_rotary_bwd_params rb = {
      q, q, q, q, l, q, q, q, q, {0}, {0}, {0}, 4, 0.0f, 0, 0.0f, CLATTN_ROPE_NEOX};
  rb.dq.shape[1] = 1;
  CHECK_FAILS(clattn_rerope_rotary_bwd(fx.ctx, fx.queue, &rb, 0, NULL, &ev), CLATTN_INVALID_SHAPE,
              "dq.shape[1]");
  CU_ASSERT_PTR_NULL(ev);
  finish();
  buf_release(&big);
  buf_release(&small);
  buf_release(&posm);
}

/* clattn_rerope_kernels names what the planner picks: the portable kernels
 * when forced, tensor cores when forced where the shape allows (f16, D = 32
 * and D = 96, both directions), nothing for invalid params (the reason
 * named); clattn_rerope_rotary_kernels the same for the rotary variant, whose
 * backward has tensor cores up to D = 128 only. D = 32, not 64: the emulated
 * backward (CLATTN_PORTABLE=1 on NVIDIA) needs 8 KiB of local memory more,
 * which at 64 passed 48 KiB in the one-pass kernels. */
static void test_kernels_named(void) {
  const int Z = 1, H = 2, N = 32;
  for (int d = 32; d <= 96; d += 64) {
    cl_mem b = buf_zeros((size_t)Z * H * N * d * 2);
    const clattn_tensor t = clattn_tensor_4d(b, 0, CLATTN_F16, Z, H, N, d);
    clattn_rerope_params p = {t, t, t, t, t, t, {0}, 8, 0.0f, 1};
    clattn_force_path(1);
    CU_ASSERT_STRING_EQUAL(clattn_rerope_kernels(fx.ctx, &p, 0), "portable");
    CU_ASSERT_STRING_EQUAL(clattn_rerope_kernels(fx.ctx, &p, 1), "portable");
    clattn_force_path(2);
    const clattn_tuning saved = fx.ctx->tuning;
    /* (where the device has it, both take warpgroup MMA by default: here not) */
    fx.ctx->tuning.rerope_wgmma = fx.ctx->tuning.rerope_bwd_wgmma = 1;
    CU_ASSERT_STRING_EQUAL(clattn_rerope_kernels(fx.ctx, &p, 0), "tensor cores");
    CU_ASSERT_STRING_EQUAL(clattn_rerope_kernels(fx.ctx, &p, 1), "tensor cores");
    fx.ctx->tuning.rerope_wgmma = 2;
    CU_ASSERT_STRING_EQUAL(clattn_rerope_kernels(fx.ctx, &p, 0), "tensor cores (warpgroup MMA)");
    CU_ASSERT_STRING_EQUAL(clattn_rerope_kernels(fx.ctx, &p, 1), "tensor cores");
    /* the warpgroup backward everywhere, D = 32 included (its dq chain in halves, session 42) */
    fx.ctx->tuning.rerope_bwd_wgmma = 2;
    if (d == 32) CU_ASSERT_STRING_EQUAL(clattn_rerope_kernels(fx.ctx, &p, 1), "tensor cores (warpgroup MMA)");
    fx.ctx->tuning = saved;
    p.v.shape[2] = N - 1;
    CU_ASSERT_PTR_NULL(clattn_rerope_kernels(fx.ctx, &p, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(clattn_last_error(), "v.shape[2]"));
    clattn_force_path(0);
    buf_release(&b);
  }
  CU_ASSERT_PTR_NULL(clattn_rerope_kernels(NULL, NULL, 0));
  CU_ASSERT_PTR_NOT_NULL(strstr(clattn_last_error(), "ctx is NULL"));
  CU_ASSERT_PTR_NULL(clattn_rerope_kernels(fx.ctx, NULL, 0));
  CU_ASSERT_PTR_NOT_NULL(strstr(clattn_last_error(), "params is NULL"));
  /* the rotary variant: tensor cores forward at every D, backward up to D =
   * 128 (the two-phase kernels; above, the one-pass kernels take q and k as
   * given); its positions and settings checked too */
  const int dims[] = {128, 256};
  for (int i = 0; i < 2; i++) {
    const int d = dims[i];
    cl_mem b = buf_zeros((size_t)Z * H * N * d * 2);
    const clattn_tensor t = clattn_tensor_4d(b, 0, CLATTN_F16, Z, H, N, d);
    clattn_rerope_rotary_params r = {t, t, t, t, {0}, {0}, {0}, 8, 0.0f, 1, 0.0f, CLATTN_ROPE_NEOX};
    clattn_force_path(2);
    const clattn_tuning saved = fx.ctx->tuning;
    fx.ctx->tuning.rerope_wgmma = 2; /* warpgroup MMA up to D = 128 */
    CU_ASSERT_STRING_EQUAL(clattn_rerope_rotary_kernels(fx.ctx, &r, 0),
                           d <= 128 ? "tensor cores (warpgroup MMA)" : "tensor cores");
    fx.ctx->tuning.rerope_wgmma = 1;
    CU_ASSERT_STRING_EQUAL(clattn_rerope_rotary_kernels(fx.ctx, &r, 0), "tensor cores");
    fx.ctx->tuning = saved;
    CU_ASSERT_STRING_EQUAL(clattn_rerope_rotary_kernels(fx.ctx, &r, 1), d <= 128 ? "tensor cores" : "portable");
    clattn_force_path(1);
    CU_ASSERT_STRING_EQUAL(clattn_rerope_rotary_kernels(fx.ctx, &r, 1), "portable");
    r.rope_theta = 0.5f;
    CU_ASSERT_PTR_NULL(clattn_rerope_rotary_kernels(fx.ctx, &r, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(clattn_last_error(), "rope_theta"));
    clattn_force_path(0);
    buf_release(&b);
  }
  CU_ASSERT_PTR_NULL(clattn_rerope_rotary_kernels(fx.ctx, NULL, 1));
  CU_ASSERT_PTR_NOT_NULL(strstr(clattn_last_error(), "params is NULL"));
}

int main(int argc, char **argv) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("rerope", fixture_init, fixture_cleanup);
  CU_add_test(s, "reference gradients vs finite differences", test_reference_gradients);
  CU_add_test(s, "errors", test_errors);
  CU_add_test(s, "which kernels run, named", test_kernels_named);
  CU_add_test(s, "windows 0 1 17 N/2 N N+100, causal or not, fwd+bwd", test_windows);
  CU_add_test(s, "GQA and Nq != Nk, odd lengths", test_gqa_lengths);
  CU_add_test(s, "dtypes f16 bf16", test_dtypes);
  CU_add_test(s, "head dims 8 24 256", test_head_dims);
  CU_add_test(s, "strided views and offsets", test_strided);
  CU_add_test(s, "rotary neox/interleaved, positions default/shared/per-batch", test_rotary);
  CU_add_test(s, "rotary f16 against the explicit kernels", test_rotary_f16);
  add_rerope_mma_tests(s); /* test_rerope_mma.c */
  if (!select_part(argc, argv)) return 1; /* tests/part.h */
  return run_suites();
}
