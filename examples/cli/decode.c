/* `clattn run decode`: split-K decode attention on synthetic data. Builds
 * the inputs on the device, runs clattn_decode, checks it against the
 * double-precision CPU reference (tests/ref.h) on the very values the
 * device read (or against the CLBlast unfused path for shapes too large for
 * the CPU), and reports the median kernel time and the K/V bandwidth.
 *
 * Timing: each repetition enqueues, behind a kernel that spins on the
 * device for about a millisecond (cli_time_median), an L2 flush (a write over
 * twice the device cache), a no-op "tick" kernel, then the decode; all are
 * queued before the spin ends, so the device runs them back to back from its
 * queue with no host gap. The time is END(last decode kernel) - END(tick):
 * every kernel of the operation and the gaps between them, with a cold
 * cache, as inside a model's layer loop where the host runs ahead.
 * (clattn_decode returns the event of its last kernel only; the tick stands
 * for the start of the first.) The wall clock of back-to-back launches
 * (warm cache, host enqueue cost included) is printed beside it. The CLBlast
 * baseline is timed the same way without the hold (CLBlast blocks the host
 * inside its calls). */
#include "cli.h"
#include "ref.h"
#include "ref_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CPU reference work above which only the first and the last sequence are
 * checked (or, above it too, none) unless forced (--ref-limit): 5e9
 * multiply-adds take a few seconds in the scalar double reference. */
#define REF_MAX_MACS 5e9

typedef struct opts {
  int batch, q_len, heads, kv_heads, head_dim, ctx, splits, page_size;
  int repeat, warmup, seed;
  const char *dtype, *kv_dtype, *device;
  double scale, ref_limit;
  bool causal, bias, lse, paged, varlen, no_check, check, baseline, json, no_flush;
} opts;

/* Everything one run owns. */
typedef struct run {
  opts opt;
  cli_env env;
  clattn_dtype qdt, kvdt;
  int groups, row_w; /* int4 groups; K/V row width in elements (words if packed) */
  int B, Mq, Hq, Hkv, D, N, total_q, max_pages, num_pages;
  int32_t *kv_len, *q_start, *table;
  cl_mem q, k, v, o, lse, bias, kv_len_buf, q_start_buf, table_buf, kss, vss, ws, flush;
  size_t flush_n;
  clattn_decode_params p;
  int splits;
  size_t ws_bytes; /* the caller-owned workspace's size */
  double kv_bytes;
  bool borrowed_env; /* the tuner's: not closed with the run */
  bool check_ends;   /* the CPU check reads sequences 0 and B - 1 only (the tuner) */
} run;

/* ------------------------------------------------------------------ host random (shapes, lengths, tables) */

static uint64_t rng_state;
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }

/* ------------------------------------------------------------------ setup */

static cl_mem upload_i32(run *r, const int32_t *host, size_t n, const char *what) {
  cl_mem m = cli_buffer(&r->env, n * 4, what);
  if (m && n &&
      clEnqueueWriteBuffer(r->env.queue, m, CL_TRUE, 0, n * 4, host, 0, NULL, NULL) != CL_SUCCESS) {
    fprintf(stderr, "clattn: writing %s failed\n", what);
    clReleaseMemObject(m);
    return NULL;
  }
  return m;
}

/* Bytes of one stored K/V row of one head, as the kernel reads it. */
static double row_bytes(const run *r) {
  if (r->kvdt == CLATTN_INT4) return 4.0 * r->row_w;
  if (r->kvdt == CLATTN_FP8 || r->kvdt == CLATTN_FP8_FNUZ) return 4.0 * r->row_w + 4.0; /* + scale-shift */
  return (double)r->row_w * (double)clattn_dtype_size(r->kvdt);
}

/* Fills o with 0xFF bytes (NaN in every float dtype) to catch unwritten outputs. */
static bool poison_o(run *r) {
  const size_t bytes = (size_t)r->total_q * r->Hq * r->D * clattn_dtype_size(r->qdt);
  const cl_uint ones = 0xffffffffu;
  return bytes < 4 || clEnqueueFillBuffer(r->env.queue, r->o, &ones, 4, 0, bytes / 4 * 4, 0, NULL,
                                          NULL) == CL_SUCCESS;
}

/* The split count and a caller-owned workspace for the context's current
 * tuning (as a serving engine keeps one: no allocation per call); grown
 * when a new tuning needs more. */
static bool size_workspace(run *r) {
  size_t bytes = 0;
  clattn_status s = clattn_decode_workspace_size(r->env.ctx, &r->p, &bytes, &r->splits);
  if (s != CLATTN_SUCCESS) return cli_fail("clattn_decode_workspace_size", s), false;
  if (bytes > r->ws_bytes) {
    if (r->ws) clReleaseMemObject(r->ws);
    r->ws = cli_buffer(&r->env, bytes, "workspace");
    r->ws_bytes = r->ws ? bytes : 0;
    if (!r->ws) return false;
  }
  if (r->ws) r->p.maybe_workspace = clattn_tensor_1d(r->ws, 0, CLATTN_F32, (int64_t)(r->ws_bytes / 4));
  return true;
}

static bool setup(run *r) {
  const opts *o = &r->opt;
  r->B = o->batch, r->Mq = o->q_len, r->Hq = o->heads, r->Hkv = o->kv_heads;
  r->D = o->head_dim, r->N = o->ctx;
  const bool quant = r->kvdt == CLATTN_INT4 || r->kvdt == CLATTN_FP8 || r->kvdt == CLATTN_FP8_FNUZ;
  r->row_w = r->kvdt == CLATTN_INT4 ? r->groups + r->D / 8 : quant ? r->D / 4 : r->D;
  rng_state = (uint64_t)o->seed * 0x2545f4914f6cdd1dull;

  /* lengths: random kv lengths in [1, ctx]; with several queries, random
   * query counts in [0, q_len] (the first sequence has q_len, so max_q_len = q_len) */
  r->kv_len = malloc(sizeof(int32_t) * (size_t)r->B);
  r->q_start = malloc(sizeof(int32_t) * (size_t)(r->B + 1));
  if (!r->kv_len || !r->q_start) return false;
  const bool varq = o->varlen && r->Mq > 1;
  r->q_start[0] = 0;
  for (int b = 0; b < r->B; b++) {
    r->kv_len[b] = o->varlen ? rng_int(1, r->N) : r->N;
    const int ql = varq ? (b == 0 ? r->Mq : rng_int(0, r->Mq)) : r->Mq;
    r->q_start[b + 1] = r->q_start[b] + ql;
  }
  r->total_q = r->q_start[r->B];
  r->kv_bytes = 0.0;
  for (int b = 0; b < r->B; b++) r->kv_bytes += 2.0 * r->kv_len[b] * r->Hkv * row_bytes(r);

  cli_env *env = &r->env;
  const size_t qes = clattn_dtype_size(r->qdt), kes = clattn_dtype_size(r->kvdt);
  const size_t q_elems = (size_t)r->total_q * r->Hq * r->D;
  size_t kv_rows; /* rows of one head dim's width, all heads */
  if (o->paged) {
    r->max_pages = (r->N + o->page_size - 1) / o->page_size;
    r->num_pages = r->B * r->max_pages;
    kv_rows = (size_t)r->num_pages * o->page_size * r->Hkv;
  } else {
    kv_rows = (size_t)r->B * r->N * r->Hkv;
  }
  const size_t kv_elems = kv_rows * (size_t)r->row_w;
  r->q = cli_buffer(env, q_elems * qes, "q");
  r->o = r->q ? cli_buffer(env, q_elems * qes, "o") : NULL;
  r->k = r->o ? cli_buffer(env, kv_elems * kes, "k") : NULL;
  r->v = r->k ? cli_buffer(env, kv_elems * kes, "v") : NULL;
  if (!r->v) return false;
  const uint64_t seed = (uint64_t)o->seed;
  bool ok = cli_fill_random(env, r->q, r->qdt, 0, q_elems, seed * 16 + 1, 1.0f);
  if (quant) {
    ok = ok && cli_fill_quant(env, r->k, r->kvdt, r->groups, r->D, kv_rows, seed * 16 + 2);
    ok = ok && cli_fill_quant(env, r->v, r->kvdt, r->groups, r->D, kv_rows, seed * 16 + 3);
  } else {
    ok = ok && cli_fill_random(env, r->k, r->kvdt, 0, kv_elems, seed * 16 + 2, 1.0f);
    ok = ok && cli_fill_random(env, r->v, r->kvdt, 0, kv_elems, seed * 16 + 3, 1.0f);
  }
  if (!ok) return false;
  if (!poison_o(r)) return false;

  clattn_decode_params *p = &r->p;
  memset(p, 0, sizeof *p);
  if (varq) {
    p->q = clattn_tensor_4d(r->q, 0, r->qdt, 1, r->total_q, r->Hq, r->D);
    r->q_start_buf = upload_i32(r, r->q_start, (size_t)r->B + 1, "q_start");
    if (!r->q_start_buf) return false;
    p->maybe_q_start = clattn_tensor_1d(r->q_start_buf, 0, CLATTN_I32, r->B + 1);
    p->batch = r->B;
    p->max_q_len = r->Mq;
  } else {
    p->q = clattn_tensor_4d(r->q, 0, r->qdt, r->B, r->Mq, r->Hq, r->D);
  }
  p->o = p->q;
  p->o.buf = r->o;
  if (o->paged) {
    p->k = clattn_tensor_4d(r->k, 0, r->kvdt, r->num_pages, o->page_size, r->Hkv, r->row_w);
    /* a shuffled block table: logical pages land anywhere in the pool */
    r->table = malloc(sizeof(int32_t) * (size_t)r->num_pages);
    if (!r->table) return false;
    for (int i = 0; i < r->num_pages; i++) r->table[i] = i;
    for (int i = r->num_pages - 1; i > 0; i--) {
      int j = rng_int(0, i), t = r->table[i];
      r->table[i] = r->table[j];
      r->table[j] = t;
    }
    r->table_buf = upload_i32(r, r->table, (size_t)r->num_pages, "block table");
    if (!r->table_buf) return false;
    p->maybe_block_table = clattn_tensor_2d(r->table_buf, 0, CLATTN_I32, r->B, r->max_pages);
  } else {
    p->k = clattn_tensor_4d(r->k, 0, r->kvdt, r->B, r->N, r->Hkv, r->row_w);
  }
  p->v = p->k;
  p->v.buf = r->v;
  if (r->kvdt == CLATTN_FP8 || r->kvdt == CLATTN_FP8_FNUZ) {
    r->kss = cli_buffer(env, kv_rows * 4, "k scale-shift");
    r->vss = r->kss ? cli_buffer(env, kv_rows * 4, "v scale-shift") : NULL;
    if (!r->vss || !cli_fill_scale_shift(env, r->kss, kv_rows, seed * 16 + 5) ||
        !cli_fill_scale_shift(env, r->vss, kv_rows, seed * 16 + 6))
      return false;
    p->maybe_k_scale_shift = clattn_tensor_3d(r->kss, 0, CLATTN_I32, p->k.shape[0], p->k.shape[1], r->Hkv);
    p->maybe_v_scale_shift = p->maybe_k_scale_shift;
    p->maybe_v_scale_shift.buf = r->vss;
  }
  if (r->kvdt == CLATTN_INT4) p->kv_groups = r->groups;
  /* paged: without lengths a sequence would own its whole last page */
  if (o->varlen || o->paged) {
    r->kv_len_buf = upload_i32(r, r->kv_len, (size_t)r->B, "kv_len");
    if (!r->kv_len_buf) return false;
    p->maybe_kv_len = clattn_tensor_1d(r->kv_len_buf, 0, CLATTN_I32, r->B);
  }
  if (o->lse) {
    r->lse = cli_buffer(env, (size_t)r->total_q * r->Hq * 4, "lse");
    if (!r->lse) return false;
    p->maybe_lse = varq ? clattn_tensor_3d(r->lse, 0, CLATTN_F32, 1, r->Hq, r->total_q)
                        : clattn_tensor_3d(r->lse, 0, CLATTN_F32, r->B, r->Hq, r->Mq);
  }
  if (o->bias) {
    const int kv_cap = o->paged ? r->max_pages * o->page_size : r->N;
    const size_t n = (size_t)r->B * r->Hq * r->Mq * kv_cap;
    r->bias = cli_buffer(env, n * 4, "bias");
    if (!r->bias || !cli_fill_random(env, r->bias, CLATTN_F32, 0, n, seed * 16 + 4, 1.0f)) return false;
    p->maybe_bias = clattn_tensor_4d(r->bias, 0, CLATTN_F32, r->B, r->Hq, r->Mq, kv_cap);
  }
  p->scale = (float)o->scale;
  p->causal = o->causal;
  p->num_splits = o->splits;

  if (!size_workspace(r)) return false;
  if (!o->no_flush) {
    r->flush = cli_flush_buffer(env, &r->flush_n);
    if (!r->flush) return false;
  }
  return clFinish(env->queue) == CL_SUCCESS;
}

static void teardown(run *r) {
  cl_mem bufs[] = {r->q, r->k, r->v, r->o, r->lse, r->bias, r->kv_len_buf, r->q_start_buf,
                   r->table_buf, r->kss, r->vss, r->ws, r->flush};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) clReleaseMemObject(bufs[i]);
  free(r->kv_len);
  free(r->q_start);
  free(r->table);
  if (!r->borrowed_env) cli_close(&r->env);
}

/* ------------------------------------------------------------------ timing */

typedef clattn_status (*op_fn)(clattn_context *, cl_command_queue, const clattn_decode_params *,
                               cl_uint, const cl_event *, cl_event *);

/* One repetition (see the header comment); returns ms, NaN on error. The
 * hold is only for operations that never block the host: CLBlast uploads
 * its batch offsets with a blocking write (behind the spin that write would
 * wait for it, and with CLATTN_CLI_HOLD=event deadlock). */
typedef struct op_call {
  cli_env *env;
  op_fn op;
  const clattn_decode_params *p;
} op_call;

static clattn_status call_op(void *priv, cl_event *done) {
  const op_call *c = priv;
  return c->op(c->env->ctx, c->env->queue, c->p, 0, NULL, done);
}

/* median_ms: END(tick) to END(last kernel); last_ms: the last kernel's own
 * START to END (the whole operation where it is one launch) */
typedef struct timing {
  double median_ms, last_ms, wall_ms;
} timing;

static bool time_op(run *r, op_fn op, const clattn_decode_params *p, const char *label, bool gated,
                    timing *t) {
  const int n = r->opt.repeat;
  op_call c = {&r->env, op, p};
  t->median_ms = cli_time_median(&r->env, r->flush, r->flush_n, r->opt.warmup, n, gated, call_op,
                                 &c, label, &t->last_ms);
  if (isnan(t->median_ms)) return false;
  /* back to back, warm cache: what the host sees */
  clFinish(r->env.queue);
  const double t0 = cli_now();
  for (int i = 0; i < n; i++) {
    clattn_status s = op(r->env.ctx, r->env.queue, p, 0, NULL, NULL);
    if (s != CLATTN_SUCCESS) return cli_progress_done(), cli_fail(label, s), false;
  }
  clFinish(r->env.queue);
  t->wall_ms = (cli_now() - t0) * 1e3 / n;
  cli_progress_done();
  return true;
}

/* ------------------------------------------------------------------ reading back */

/* Raw rows 0..n-1 of sequence b of a cache tensor ([.., rows, Hkv, width] of
 * elem-byte elements), in logical order. */
static bool read_rows(run *r, cl_mem buf, size_t width, size_t es, int b, int n, uint8_t *out) {
  const size_t row = (size_t)r->Hkv * width * es;
  cl_int err = CL_SUCCESS;
  if (!r->opt.paged) {
    err = clEnqueueReadBuffer(r->env.queue, buf, CL_FALSE, (size_t)b * r->N * row, (size_t)n * row,
                              out, 0, NULL, NULL);
  } else {
    const int ps = r->opt.page_size;
    for (int lp = 0; lp * ps < n && err == CL_SUCCESS; lp++) {
      const int rows = n - lp * ps < ps ? n - lp * ps : ps;
      const size_t page = (size_t)r->table[(size_t)b * r->max_pages + lp];
      err = clEnqueueReadBuffer(r->env.queue, buf, CL_FALSE, page * ps * row, (size_t)rows * row,
                                out + (size_t)lp * ps * row, 0, NULL, NULL);
    }
  }
  if (err == CL_SUCCESS) err = clFinish(r->env.queue);
  if (err != CL_SUCCESS) fprintf(stderr, "clattn: reading the K/V cache back failed (%d)\n", (int)err);
  return err == CL_SUCCESS;
}

/* Logical K or V of sequence b as doubles [n][Hkv][D], dequantized like the kernel. */
static bool read_kv(run *r, cl_mem buf, cl_mem ss_buf, int b, int n, double *out) {
  const size_t es = clattn_dtype_size(r->kvdt), rows = (size_t)n * r->Hkv;
  uint8_t *raw = malloc(rows * r->row_w * es + 1);
  uint32_t *ss = NULL;
  bool ok = raw && read_rows(r, buf, (size_t)r->row_w, es, b, n, raw);
  if (ok && ss_buf) {
    ss = malloc(rows * 4 + 4);
    ok = ss && read_rows(r, ss_buf, 1, 4, b, n, (uint8_t *)ss);
  }
  const int D = r->D;
  for (size_t i = 0; ok && i < rows; i++) {
    double *dst = out + i * D;
    if (r->kvdt == CLATTN_INT4) {
      const uint32_t *w = (const uint32_t *)raw + i * r->row_w;
      const int per = D / r->groups;
      for (int d = 0; d < D; d++) {
        const uint32_t g = w[d / per];
        const double scale = ref_half_value((uint16_t)(g & 0xffffu));
        const double shift = ref_half_value((uint16_t)(g >> 16));
        const unsigned code = (w[r->groups + d / 8] >> (4 * (d % 8))) & 15u;
        dst[d] = scale * code + shift;
      }
    } else if (ss) {
      const uint8_t *bytes = raw + i * r->row_w * 4; /* element d is byte d of the row */
      const double scale = ref_half_value((uint16_t)(ss[i] & 0xffffu));
      const double shift = ref_half_value((uint16_t)(ss[i] >> 16));
      for (int d = 0; d < D; d++)
        dst[d] = ref_fp8_decode(bytes[d], r->kvdt == CLATTN_FP8_FNUZ) * scale + shift;
    } else {
      for (int d = 0; d < D; d++) {
        const uint8_t *e = raw + (i * D + d) * es;
        uint16_t h;
        float f;
        if (es == 2) {
          memcpy(&h, e, 2);
          dst[d] = r->kvdt == CLATTN_F16 ? ref_half_value(h) : ref_bf16_value(h);
        } else {
          memcpy(&f, e, 4);
          dst[d] = f;
        }
      }
    }
  }
  free(raw);
  free(ss);
  return ok;
}

/* ------------------------------------------------------------------ checks */

typedef struct check {
  double o_err, lse_err;
  size_t bad;
  char first_bad[160];
} check;

/* Output tolerance by dtype: the output's rounding (f16 2^-11, bf16 2^-8
 * relative) times 4 for the f32 accumulation and the exp/rescale steps;
 * f32 outputs see only f32 accumulation error over up to ~1e5 keys. The lse
 * is f32 from the same rounded inputs in both, so its error is f32 math only. */
static double o_tol(clattn_dtype dt) {
  return dt == CLATTN_F16 ? 4.0 / 2048.0 : dt == CLATTN_BF16 ? 4.0 / 256.0 : 1e-4;
}
#define LSE_ATOL 2e-4
#define LSE_RTOL 1e-5

static void compare(check *c, const char *what, size_t idx, double got, double want, double atol,
                    double rtol, double *worst) {
  bool ok;
  double err;
  if (isnan(want) || isinf(want)) {
    ok = isnan(want) ? isnan(got) : got == want;
    err = ok ? 0.0 : INFINITY;
  } else {
    err = isfinite(got) ? fabs(got - want) : INFINITY;
    ok = err <= atol + rtol * fabs(want);
  }
  if (err > *worst) *worst = err;
  if (!ok && c->bad++ == 0)
    snprintf(c->first_bad, sizeof c->first_bad, "%s[%zu]: got %.7g, want %.7g", what, idx, got, want);
}

/* Device lse of (b, h, m). */
static size_t lse_index(const run *r, int b, int h, int m) {
  if (r->p.maybe_q_start.buf) return (size_t)h * r->total_q + r->q_start[b] + m;
  return ((size_t)b * r->Hq + h) * r->Mq + m;
}

/* The CPU reference's multiply-adds: every sequence, or (ends) 0 and B - 1 only. */
static double ref_macs(const run *r, bool ends) {
  double macs = 0.0;
  for (int b = 0; b < r->B; b++)
    if (!ends || b == 0 || b == r->B - 1)
      macs += 2.0 * (r->q_start[b + 1] - r->q_start[b]) * r->Hq * (double)r->kv_len[b] * r->D;
  return macs;
}

static bool check_cpu(run *r, check *c) {
  const int Hq = r->Hq, D = r->D, Hkv = r->Hkv;
  const size_t row_q = (size_t)Hq * D;
  const double tol = o_tol(r->qdt);
  double *lse_dev = NULL;
  if (r->lse) {
    lse_dev = malloc(sizeof(double) * (size_t)r->total_q * Hq + 1);
    if (!lse_dev || !cli_read(&r->env, r->lse, CLATTN_F32, 0, (size_t)r->total_q * Hq, lse_dev))
      return free(lse_dev), false;
  }
  bool ok = true;
  const int kv_cap = r->p.maybe_bias.buf ? (int)r->p.maybe_bias.shape[3] : r->N;
  for (int b = 0; b < r->B && ok; b++) {
    const int nq = r->q_start[b + 1] - r->q_start[b], n = r->kv_len[b];
    if (nq == 0 || (r->check_ends && b != 0 && b != r->B - 1)) continue;
    const size_t q0 = (size_t)r->q_start[b] * row_q, nqe = (size_t)nq * row_q;
    double *q = malloc(sizeof(double) * nqe), *o = malloc(sizeof(double) * nqe);
    double *want = malloc(sizeof(double) * nqe), *lse = malloc(sizeof(double) * (size_t)nq * Hq);
    double *k = malloc(sizeof(double) * ((size_t)n * Hkv * D + 1));
    double *v = malloc(sizeof(double) * ((size_t)n * Hkv * D + 1));
    double *bias = NULL;
    const size_t bias_n = (size_t)Hq * r->Mq * kv_cap;
    if (r->bias) bias = malloc(sizeof(double) * bias_n);
    ok = q && o && want && lse && k && v && (!r->bias || bias);
    if (!ok) fprintf(stderr, "clattn: out of host memory for the CPU reference\n");
    ok = ok && cli_read(&r->env, r->q, r->qdt, q0, nqe, q) && cli_read(&r->env, r->o, r->qdt, q0, nqe, o);
    ok = ok && read_kv(r, r->k, r->kss, b, n, k) && read_kv(r, r->v, r->vss, b, n, v);
    if (ok && bias) ok = cli_read(&r->env, r->bias, CLATTN_F32, (size_t)b * bias_n, bias_n, bias);
    if (ok) {
      /* one sequence at a time: host memory stays at one sequence's K/V */
      const int32_t qs[2] = {0, nq};
      ref_decode_args a = {
          .B = 1, .Mq = r->Mq, .Hq = Hq, .Hkv = Hkv, .D = D, .Nkv = kv_cap,
          .q = q, .k = k, .v = v, .bias = bias, .kv_len = &n,
          .q_start = r->p.maybe_q_start.buf ? qs : NULL,
          .scale = r->opt.scale > 0 ? r->opt.scale : 1.0 / sqrt((double)D),
          .causal = r->opt.causal, .o = want, .lse = lse,
      };
      ref_decode(&a);
      for (size_t i = 0; i < nqe; i++) compare(c, "o", q0 + i, o[i], want[i], tol, tol, &c->o_err);
      for (int h = 0; lse_dev && h < Hq; h++)
        for (int m = 0; m < nq; m++) {
          const size_t li = lse_index(r, b, h, m);
          compare(c, "lse", li, lse_dev[li], lse[(size_t)h * nq + m], LSE_ATOL, LSE_RTOL, &c->lse_err);
        }
    }
    free(q), free(o), free(want), free(lse), free(k), free(v), free(bias);
    cli_progress("check", b + 1, r->B);
  }
  cli_progress_done();
  free(lse_dev);
  return ok;
}

/* Dense copies of a paged cache (page by page, on the device) for the baseline. */
static cl_mem densify(run *r, cl_mem paged) {
  const size_t es = clattn_dtype_size(r->kvdt), row = (size_t)r->Hkv * r->row_w * es;
  cl_mem d = cli_buffer(&r->env, (size_t)r->B * r->N * row, "dense K/V copy");
  const int ps = r->opt.page_size;
  cl_int err = CL_SUCCESS;
  for (int b = 0; d && b < r->B && err == CL_SUCCESS; b++)
    for (int lp = 0; lp * ps < r->N && err == CL_SUCCESS; lp++) {
      const int rows = r->N - lp * ps < ps ? r->N - lp * ps : ps;
      const size_t page = (size_t)r->table[(size_t)b * r->max_pages + lp];
      err = clEnqueueCopyBuffer(r->env.queue, paged, d, page * ps * row,
                                ((size_t)b * r->N + (size_t)lp * ps) * row, (size_t)rows * row, 0,
                                NULL, NULL);
    }
  if (d && err != CL_SUCCESS) {
    fprintf(stderr, "clattn: copying the paged cache failed (%d)\n", (int)err);
    clReleaseMemObject(d);
    return NULL;
  }
  return d;
}

/* The baseline's params: same inputs, dense K/V, f32 outputs of its own. */
typedef struct baseline {
  clattn_decode_params p;
  cl_mem o, lse, k, v; /* k, v: dense copies when paged */
} baseline;

static bool baseline_setup(run *r, baseline *bl) {
  memset(bl, 0, sizeof *bl);
  bl->p = r->p;
  clattn_decode_params *p = &bl->p;
  memset(&p->maybe_block_table, 0, sizeof p->maybe_block_table);
  memset(&p->maybe_workspace, 0, sizeof p->maybe_workspace);
  p->num_splits = 0;
  if (r->opt.paged) {
    bl->k = densify(r, r->k);
    bl->v = bl->k ? densify(r, r->v) : NULL;
    if (!bl->v) return false;
    p->k = clattn_tensor_4d(bl->k, 0, r->kvdt, r->B, r->N, r->Hkv, r->row_w);
    p->v = p->k;
    p->v.buf = bl->v;
    if (p->maybe_bias.buf) p->maybe_bias.shape[3] = r->N; /* the columns past N are padding */
  }
  const size_t n = (size_t)r->total_q * r->Hq;
  bl->o = cli_buffer(&r->env, n * r->D * 4, "baseline o");
  bl->lse = bl->o ? cli_buffer(&r->env, n * 4, "baseline lse") : NULL;
  if (!bl->lse) return false;
  p->o.buf = bl->o;
  p->o.dtype = CLATTN_F32;
  p->maybe_lse = r->p.maybe_q_start.buf ? clattn_tensor_3d(bl->lse, 0, CLATTN_F32, 1, r->Hq, r->total_q)
                                        : clattn_tensor_3d(bl->lse, 0, CLATTN_F32, r->B, r->Hq, r->Mq);
  return true;
}

static void baseline_free(baseline *bl) {
  cl_mem bufs[] = {bl->o, bl->lse, bl->k, bl->v};
  for (int i = 0; i < 4; i++)
    if (bufs[i]) clReleaseMemObject(bufs[i]);
}

/* clattn_decode against the finished baseline run, on the device outputs. */
static bool check_baseline(run *r, baseline *bl, check *c) {
  const size_t n = (size_t)r->total_q * r->Hq, ne = n * r->D;
  double *got = malloc(sizeof(double) * ne), *want = malloc(sizeof(double) * ne);
  bool ok = got && want && cli_read(&r->env, r->o, r->qdt, 0, ne, got) &&
            cli_read(&r->env, bl->o, CLATTN_F32, 0, ne, want);
  const double tol = o_tol(r->qdt);
  for (size_t i = 0; ok && i < ne; i++) compare(c, "o", i, got[i], want[i], tol, tol, &c->o_err);
  if (ok && r->lse) {
    ok = cli_read(&r->env, r->lse, CLATTN_F32, 0, n, got) && cli_read(&r->env, bl->lse, CLATTN_F32, 0, n, want);
    for (size_t i = 0; ok && i < n; i++)
      compare(c, "lse", i, got[i], want[i], LSE_ATOL, LSE_RTOL, &c->lse_err);
  }
  free(got);
  free(want);
  return ok;
}

/* ------------------------------------------------------------------ the command */

static const char *usage =
    "clattn run decode [flags]\n"
    "\n"
    "Split-K decode attention on synthetic data (random normal q/k/v, generated on the\n"
    "device): checks the result against the double-precision CPU reference on the same\n"
    "rounded inputs (above --ref-limit multiply-adds: against the CLBlast unfused path\n"
    "with --baseline, else its first and last sequences), then prints the median device\n"
    "time over --repeat runs (L2 flushed before each) and the K/V bandwidth: bytes of K\n"
    "and V read / time.\n"
    "Exit status: 0 ok, 1 check failed or runtime error, 2 bad usage.\n"
    "With --devices LIST (e.g. 0,1 or NVIDIA,NVIDIA) the cache is split along the\n"
    "sequence across the devices and merged (see clattn run merge --help).\n"
    "\n"
    "example: clattn run decode --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096";


/* The command line into r->opt and r's dtypes: -1 to go on, else the exit
 * status (0 after --help, 2 on bad usage, with a message). */
static int decode_options(int argc, char **argv, run *r) {
  opts *o = &r->opt;
  *o = (opts){.batch = 4, .q_len = 1, .heads = 32, .kv_heads = 8, .head_dim = 128, .ctx = 4096,
              .page_size = 16, .repeat = 20, .warmup = 3, .seed = 1, .dtype = "f16",
              .ref_limit = REF_MAX_MACS};
  cli_flag flags[] = {
      {"batch", FLAG_INT, &o->batch, "sequences B"},
      {"q-len", FLAG_INT, &o->q_len, "queries per sequence Mq (> 1: speculative decoding)"},
      {"heads", FLAG_INT, &o->heads, "query heads Hq"},
      {"kv-heads", FLAG_INT, &o->kv_heads, "K/V heads Hkv (Hq a multiple of it)"},
      {"head-dim", FLAG_INT, &o->head_dim, "head dim D"},
      {"ctx", FLAG_INT, &o->ctx, "keys per sequence (the most, with --varlen)"},
      {"dtype", FLAG_STR, &o->dtype, "q/o dtype: f32, f16, bf16"},
      {"kv-dtype", FLAG_STR, &o->kv_dtype,
       "K/V dtype: f32, f16, bf16, int4, int4g2, int4g4, int4g8, fp8, fp8fnuz (default: --dtype)"},
      {"splits", FLAG_INT, &o->splits, "split-K count (0: chosen per device)"},
      {"scale", FLAG_DOUBLE, &o->scale, "softmax scale (0: 1/sqrt(D))"},
      {"causal", FLAG_BOOL, &o->causal, "causal mask over the Mq queries"},
      {"bias", FLAG_BOOL, &o->bias, "random additive bias [B, Hq, Mq, ctx]"},
      {"lse", FLAG_BOOL, &o->lse, "also write and check the lse"},
      {"paged", FLAG_BOOL, &o->paged, "paged K/V cache with a shuffled block table"},
      {"page-size", FLAG_INT, &o->page_size, "keys per page with --paged"},
      {"varlen", FLAG_BOOL, &o->varlen,
       "random kv lengths in [1, ctx]; with --q-len > 1 also packed random query counts"},
      {"device", FLAG_STR, &o->device, "device index or name substring (default $CLATTN_DEVICE)"},
      {"repeat", FLAG_INT, &o->repeat, "timed runs (the median is reported)"},
      {"warmup", FLAG_INT, &o->warmup, "untimed runs first"},
      {"seed", FLAG_INT, &o->seed, "data seed"},
      {"check", FLAG_BOOL, &o->check, "run the CPU reference whatever the shape's size"},
      {"no-check", FLAG_BOOL, &o->no_check, "skip the correctness check"},
      {"ref-limit", FLAG_DOUBLE, &o->ref_limit,
       "most multiply-adds the CPU reference runs without --check"},
      {"baseline", FLAG_BOOL, &o->baseline, "also time the CLBlast unfused path (and check against it)"},
      {"no-flush", FLAG_BOOL, &o->no_flush, "keep the L2 cache warm between timed runs"},
      {"json", FLAG_BOOL, &o->json, "print one JSON line instead of the report"},
  };
  const int rc = cli_parse(usage, argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
  if (rc) return rc == 1 ? 0 : 2;
  const struct {
    const char *name;
    int v, min;
  } lim[] = {{"batch", o->batch, 1},       {"q-len", o->q_len, 1},   {"heads", o->heads, 1},
             {"kv-heads", o->kv_heads, 1}, {"head-dim", o->head_dim, 1}, {"ctx", o->ctx, 1},
             {"page-size", o->page_size, 1}, {"repeat", o->repeat, 1}, {"warmup", o->warmup, 0},
             {"splits", o->splits, 0}};
  for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
    if (lim[i].v < lim[i].min) {
      fprintf(stderr, "clattn run decode: --%s is %d, must be at least %d\n", lim[i].name, lim[i].v,
              lim[i].min);
      return 2;
    }
  int qgroups = 1;
  if (!cli_dtype(o->dtype, &r->qdt, &qgroups) || r->qdt > CLATTN_BF16) {
    fprintf(stderr, "clattn run decode: --dtype %s: use f32, f16 or bf16\n", o->dtype);
    return 2;
  }
  if (!o->kv_dtype) o->kv_dtype = o->dtype;
  if (!cli_dtype(o->kv_dtype, &r->kvdt, &r->groups)) {
    fprintf(stderr, "clattn run decode: --kv-dtype %s is not a dtype (see --help)\n", o->kv_dtype);
    return 2;
  }
  if (o->check && o->no_check) {
    fprintf(stderr, "clattn run decode: --check and --no-check contradict each other\n");
    return 2;
  }

  return -1;
}

/* The report as one JSON line: t (tb: the baseline's, NULL if not run), the
 * check (NULL if none ran). */
static void print_json(const run *r, const timing *t, const timing *tb, const char *kernels,
                       const check *c, const char *check_result) {
  const opts *o = &r->opt;
  const clattn_device_profile *prof = &r->env.profile;
  const double gbps = r->kv_bytes / (t->median_ms * 1e6);
  printf("{\"op\":\"decode\",");
  cli_json_str("device", prof->name, true);
  cli_json_str("arch", prof->arch, true);
  printf("\"batch\":%d,\"q_len\":%d,\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"ctx\":%d,", r->B,
         r->Mq, r->Hq, r->Hkv, r->D, r->N);
  cli_json_str("dtype", o->dtype, true);
  cli_json_str("kv_dtype", o->kv_dtype, true);
  printf("\"paged\":%s,\"page_size\":%d,\"varlen\":%s,\"causal\":%s,\"bias\":%s,\"lse\":%s,",
         cli_json_bool(o->paged), o->page_size, cli_json_bool(o->varlen), cli_json_bool(o->causal),
         cli_json_bool(o->bias), cli_json_bool(o->lse));
  printf("\"splits\":%d,\"time_ms\":%.6f,\"last_kernel_ms\":%.6f,\"wall_ms\":%.6f,\"kv_bytes\":%.0f,"
         "\"gbps\":%.2f,",
         r->splits, t->median_ms, t->last_ms, t->wall_ms, r->kv_bytes, gbps);
  cli_json_str("check", check_result, true);
  cli_json_str("kernel", kernels ? kernels : "", true);
  if (c)
    printf("\"max_err\":%.4g", c->o_err);
  else
    printf("\"max_err\":null");
  if (tb)
    printf(",\"baseline_ms\":%.6f,\"speedup\":%.3f", tb->median_ms, tb->median_ms / t->median_ms);
  printf("}\n");
}

int cli_run_decode(int argc, char **argv) {
  /* --devices LIST: sequence-parallel decode over several devices (merge.c) */
  for (int i = 0; i < argc; i++)
    if (strncmp(argv[i], "--devices", 9) == 0) return cli_run_merge(argc, argv);
  run *r = calloc(1, sizeof *r);
  if (!r) return 1;
  baseline bl;
  memset(&bl, 0, sizeof bl);
  const opts *o = &r->opt;
  int rc = decode_options(argc, argv, r);
  if (rc >= 0) {
    free(r);
    return rc;
  }
  if (!cli_open(o->device, &r->env)) {
    free(r);
    return 1;
  }
  rc = 1;
  const clattn_device_profile *prof = &r->env.profile;
  const bool human = !o->json;
  if (human) printf("device: %s (%s), arch %s\n", prof->name, prof->platform, prof->arch);
  if (!setup(r)) goto done;
  if (human)
    printf("decode: B=%d Mq=%d Hq=%d Hkv=%d D=%d ctx=%d, q/o %s, K/V %s, %s%s%s%s%s, splits %d%s\n",
           r->B, r->Mq, r->Hq, r->Hkv, r->D, r->N, o->dtype, o->kv_dtype,
           o->paged ? "paged" : "dense", o->varlen ? ", varlen" : "", o->causal ? ", causal" : "",
           o->bias ? ", bias" : "", o->lse ? ", lse" : "", r->splits, o->splits ? "" : " (auto)");
  const char *kernels = clattn_decode_kernels(r->env.ctx, &r->p);
  if (human) printf("kernel: %s\n", kernels ? kernels : clattn_last_error());

  /* the first run builds the kernels and gives the output the check reads */
  clattn_status s = clattn_decode(r->env.ctx, r->env.queue, &r->p, 0, NULL, NULL);
  if (s != CLATTN_SUCCESS || clFinish(r->env.queue) != CL_SUCCESS) {
    cli_fail("clattn_decode", s);
    goto done;
  }

  /* the baseline runs first too when asked: its output may be the check */
  const bool kv_float = r->kvdt <= CLATTN_BF16;
  bool have_baseline = false;
  if (o->baseline) {
    if (!kv_float) {
      if (human) printf("baseline: skipped (the CLBlast path takes float K/V, not %s)\n", o->kv_dtype);
    } else if (baseline_setup(r, &bl)) {
      s = clattn_reference_decode(r->env.ctx, r->env.queue, &bl.p, 0, NULL, NULL);
      if (s == CLATTN_SUCCESS && clFinish(r->env.queue) == CL_SUCCESS)
        have_baseline = true;
      else if (human)
        printf("baseline: unavailable: %s\n", clattn_last_error());
    }
  }

  const char *check_result = "skipped";
  check c;
  memset(&c, 0, sizeof c);
  bool failed = false;
  const double macs = ref_macs(r, false);
  const char *check_kind = NULL;
  if (o->no_check) {
    if (human) printf("check: skipped (--no-check)\n");
  } else if (o->check || macs <= o->ref_limit) {
    check_kind = "CPU reference (double)";
    if (!check_cpu(r, &c)) goto done;
  } else if (have_baseline) {
    check_kind = "CLBlast unfused path (GPU, f32)";
    if (!check_baseline(r, &bl, &c)) goto done;
  } else if (ref_macs(r, true) <= o->ref_limit) {
    /* too large whole: the first and the last sequence (a wrong kernel form is
     * wrong there too; the tuner checks this way) */
    check_kind = "CPU reference (double), sequences 0 and B-1";
    r->check_ends = true;
    if (!check_cpu(r, &c)) goto done;
  } else if (human) {
    printf("check: skipped (shape too large for the CPU reference: %.2g multiply-adds > "
           "--ref-limit %.2g; --check forces it%s)\n",
           macs, o->ref_limit, kv_float ? ", --baseline compares against the CLBlast unfused path" : "");
  }
  if (check_kind) {
    failed = c.bad > 0;
    check_result = failed ? "fail" : "pass";
    if (human) {
      printf("check: against the %s: max abs error %.3g (o)", check_kind, c.o_err);
      if (r->lse) printf(", %.3g (lse)", c.lse_err);
      printf("; tolerance %.3g (%s o): %s\n", o_tol(r->qdt), o->dtype, failed ? "FAIL" : "PASS");
      if (failed) printf("  %zu values out of tolerance, first: %s\n", c.bad, c.first_bad);
    }
  }

  timing t = {0}, tb = {0};
  if (!time_op(r, clattn_decode, &r->p, "decode", true, &t)) goto done;
  const double gbps = r->kv_bytes / (t.median_ms * 1e6);
  if (have_baseline && !time_op(r, clattn_reference_decode, &bl.p, "baseline", false, &tb)) goto done;
  if (human) {
    printf("time: %.4f ms (median of %d, device, cold L2), %.4f ms per call back to back (wall)\n",
           t.median_ms, o->repeat, t.wall_ms);
    printf("last kernel: %.4f ms (its own start to end: the whole decode where it is one launch)\n",
           t.last_ms);
    printf("bandwidth: %.1f GB/s (%.1f MB of K/V read)\n", gbps, r->kv_bytes / 1e6);
    if (have_baseline)
      printf("baseline: %.4f ms (CLBlast GEMM + softmax + GEMM, f32%s), speedup %.1fx\n",
             tb.median_ms, kv_float && r->kvdt != CLATTN_F32 ? ", incl. staging K/V to f32" : "",
             tb.median_ms / t.median_ms);
  } else {
    print_json(r, &t, have_baseline ? &tb : NULL, kernels, check_kind ? &c : NULL, check_result);
  }
  rc = failed ? 1 : 0;
done:
  baseline_free(&bl);
  teardown(r);
  free(r);
  return rc;
}

/* ------------------------------------------------------------------ the tuner's cases (tune.c) */

typedef struct cli_decode_case {
  run r;
} cli_decode_case;

static void case_free(void *c);

static void *case_new(cli_env *env, const void *shape) {
  const cli_decode_shape *sh = shape;
  cli_decode_case *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  run *r = &c->r;
  r->opt = (opts){.batch = sh->batch, .q_len = sh->q_len, .heads = sh->heads,
                  .kv_heads = sh->kv_heads, .head_dim = sh->head_dim, .ctx = sh->ctx,
                  .page_size = sh->page_size ? sh->page_size : 16, .repeat = 1, .seed = 1,
                  .dtype = sh->dtype, .kv_dtype = sh->kv_dtype ? sh->kv_dtype : sh->dtype,
                  .paged = sh->paged, .causal = sh->causal};
  r->env = *env;
  r->borrowed_env = true;
  r->check_ends = true;
  int qgroups = 1;
  if (!cli_dtype(r->opt.dtype, &r->qdt, &qgroups) || !cli_dtype(r->opt.kv_dtype, &r->kvdt, &r->groups)) {
    fprintf(stderr, "clattn tune: bad dtype in a decode shape\n");
    free(c);
    return NULL;
  }
  if (!setup(r)) {
    case_free(c);
    return NULL;
  }
  return c;
}

static bool case_check(void *cv, char *why, size_t n) {
  cli_decode_case *c = cv;
  run *r = &c->r;
  why[0] = '\0';
  if (!size_workspace(r) || !poison_o(r)) return snprintf(why, n, "setup failed"), false;
  clattn_status s = clattn_decode(r->env.ctx, r->env.queue, &r->p, 0, NULL, NULL);
  if (s == CLATTN_SUCCESS && clFinish(r->env.queue) != CL_SUCCESS) s = CLATTN_OPENCL_ERROR;
  if (s != CLATTN_SUCCESS)
    return snprintf(why, n, "%s: %s", clattn_status_string(s), clattn_last_error()), false;
  check k;
  memset(&k, 0, sizeof k);
  if (!check_cpu(r, &k)) return snprintf(why, n, "the check could not run"), false;
  if (k.bad) snprintf(why, n, "%zu values out of tolerance, first %s", k.bad, k.first_bad);
  return k.bad == 0;
}

static double case_time(void *cv, int warmup, int repeat) {
  cli_decode_case *c = cv;
  run *r = &c->r;
  r->opt.warmup = warmup;
  r->opt.repeat = repeat;
  timing t;
  if (!size_workspace(r) || !time_op(r, clattn_decode, &r->p, "", true, &t)) return NAN;
  return t.median_ms;
}

static void case_free(void *cv) {
  cli_decode_case *c = cv;
  if (!c) return;
  teardown(&c->r);
  free(c);
}

static const char *case_kernels(void *cv) {
  const cli_decode_case *c = cv;
  return clattn_decode_kernels(c->r.env.ctx, &c->r.p);
}

static void case_describe(const void *shape, char *buf, size_t n) {
  const cli_decode_shape *s = shape;
  snprintf(buf, n, "decode B=%d Hq=%d Hkv=%d D=%d ctx=%d %s%s%s", s->batch, s->heads, s->kv_heads,
           s->head_dim, s->ctx, s->dtype, s->kv_dtype ? "/" : "", s->kv_dtype ? s->kv_dtype : "");
}

const cli_case_ops cli_decode_cases = {case_new, case_check, case_time, case_free, case_describe, case_kernels};
