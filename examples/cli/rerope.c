/* `clattn run rerope`: ReRoPE windowed attention (forward, optionally the
 * backward) on synthetic data. Builds the inputs on the device, runs
 * clattn_rerope_fwd / _bwd (or the rotary variants with --on-the-fly),
 * checks them against the double-precision reference (tests/ref_rerope.h)
 * on the very values the device read, and reports median kernel times and
 * TFLOP/s (forward 4 Z H Nq Nk D, halved when causal; backward 2.5x that).
 *
 * The full reference costs Z H Nq Nk D multiply-adds per product; above
 * --ref-limit it is skipped and the forward is checked on sampled rows
 * (the first, middle and last 8 queries of the first and last head), which
 * the reference computes alone. The backward is only checked in full.
 *
 * Timing: each repetition enqueues, behind a kernel spinning on the device
 * (cli_time_median: all is queued before the device reaches the tick), a no-op
 * "tick" kernel then the operation; the time is END(its last kernel) -
 * END(tick), so the backward's kernels and the gaps between them count. */
#include "cli.h"
#include "ref_rerope.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
  int z, heads, kv_heads, n, n_k, head_dim, window, repeat, warmup, seed;
  const char *dtype, *device;
  double scale, theta, ref_limit;
  bool causal, backward, on_the_fly, interleaved, no_check;
} opts;

enum { Q1, Q2, K1, K2, V, O, DO, DQ1, DQ2, DK1, DK2, DV, NT }; /* tensors of a run */
static const char *tname[NT] = {"q1",   "q2",  "k1",  "k2",  "v",   "o",
                                "dout", "dq1", "dq2", "dk1", "dk2", "dv"};

typedef struct run {
  opts o;
  cli_env env;
  bool borrowed_env; /* the tuner's: not closed with the run */
  clattn_dtype dt;
  int Z, Hq, Hkv, Nq, Nk, D;
  cl_mem buf[NT], lse, ws;
  clattn_tensor t[NT], tl, tws;
} run;

static bool is_q(int i) { return i == Q1 || i == Q2 || i == O || i == DO || i == DQ1 || i == DQ2; }
/* Tensors a run holds: the rotary variant has no q2 / k2 (nor their gradients). */
static bool used(const run *r, int i) {
  if (r->o.on_the_fly && (i == Q2 || i == K2 || i == DQ2 || i == DK2)) return false;
  return i < DO || r->o.backward;
}
static size_t numel(const run *r, int i) {
  return (size_t)r->Z * (is_q(i) ? (size_t)r->Hq * r->Nq : (size_t)r->Hkv * r->Nk) * r->D;
}

static bool setup(run *r) {
  cli_env *env = &r->env;
  for (int i = 0; i < NT; i++) {
    if (!used(r, i)) continue;
    r->buf[i] = cli_buffer(env, numel(r, i) * clattn_dtype_size(r->dt), tname[i]);
    if (!r->buf[i]) return false;
    r->t[i] = is_q(i) ? clattn_tensor_4d(r->buf[i], 0, r->dt, r->Z, r->Hq, r->Nq, r->D)
                      : clattn_tensor_4d(r->buf[i], 0, r->dt, r->Z, r->Hkv, r->Nk, r->D);
    if (i <= DO &&
        !cli_fill_random(env, r->buf[i], r->dt, 0, numel(r, i), (uint64_t)r->o.seed * 16 + i, 1.0f))
      return false;
  }
  const size_t rows = (size_t)r->Z * r->Hq * r->Nq;
  r->lse = cli_buffer(env, rows * 4 + 4, "lse");
  if (!r->lse) return false;
  r->tl = clattn_tensor_3d(r->lse, 0, CLATTN_F32, r->Z, r->Hq, r->Nq);
  if (r->o.backward) {
    /* a caller-owned workspace, as a training loop keeps one */
    const size_t ws = clattn_rerope_bwd_workspace_size(r->Z, r->Hq, r->Nq);
    r->ws = cli_buffer(env, ws + 4, "workspace");
    if (!r->ws) return false;
    r->tws = clattn_tensor_1d(r->ws, 0, CLATTN_F32, (int64_t)(ws / 4));
  }
  return clFinish(env->queue) == CL_SUCCESS;
}

static void teardown(run *r) {
  for (int i = 0; i < NT; i++)
    if (r->buf[i]) clReleaseMemObject(r->buf[i]);
  if (r->lse) clReleaseMemObject(r->lse);
  if (r->ws) clReleaseMemObject(r->ws);
  if (!r->borrowed_env) cli_close(&r->env);
}

/* ------------------------------------------------------------------ operations */

/* The rotary variant's parameters (raw q and k in the Q1 and K1 slots). */
static clattn_rerope_rotary_params rotary_params(const run *r) {
  const opts *o = &r->o;
  const clattn_rerope_rotary_params p = {
      r->t[Q1],  r->t[K1],        r->t[V],
      r->t[O],   r->tl,           {0},
      {0},       o->window,       (float)o->scale,
      o->causal, (float)o->theta, o->interleaved ? CLATTN_ROPE_INTERLEAVED : CLATTN_ROPE_NEOX};
  return p;
}

static clattn_status fwd(run *r, cl_event *ev) {
  const opts *o = &r->o;
  if (o->on_the_fly) {
    const clattn_rerope_rotary_params p = rotary_params(r);
    return clattn_rerope_rotary_fwd(r->env.ctx, r->env.queue, &p, 0, NULL, ev);
  }
  clattn_rerope_params p = {r->t[Q1], r->t[Q2], r->t[K1],  r->t[K2],        r->t[V],
                            r->t[O],  r->tl,    o->window, (float)o->scale, o->causal};
  return clattn_rerope_fwd(r->env.ctx, r->env.queue, &p, 0, NULL, ev);
}

static clattn_status bwd(run *r, cl_event *ev) {
  const opts *o = &r->o;
  if (o->on_the_fly) {
    clattn_rerope_rotary_bwd_params p = {r->t[Q1],
                                         r->t[K1],
                                         r->t[V],
                                         r->t[O],
                                         r->tl,
                                         r->t[DO],
                                         r->t[DQ1],
                                         r->t[DK1],
                                         r->t[DV],
                                         {0},
                                         {0},
                                         r->tws,
                                         o->window,
                                         (float)o->scale,
                                         o->causal,
                                         (float)o->theta,
                                         o->interleaved ? CLATTN_ROPE_INTERLEAVED
                                                        : CLATTN_ROPE_NEOX};
    return clattn_rerope_rotary_bwd(r->env.ctx, r->env.queue, &p, 0, NULL, ev);
  }
  clattn_rerope_bwd_params p = {r->t[Q1],        r->t[Q2],  r->t[K1], r->t[K2],  r->t[V],
                                r->t[O],         r->tl,     r->t[DO], r->t[DQ1], r->t[DQ2],
                                r->t[DK1],       r->t[DK2], r->t[DV], r->tws,    o->window,
                                (float)o->scale, o->causal};
  return clattn_rerope_bwd(r->env.ctx, r->env.queue, &p, 0, NULL, ev);
}

typedef struct op_call {
  run *r;
  clattn_status (*op)(run *, cl_event *);
} op_call;

static clattn_status call_op(void *priv, cl_event *done) {
  const op_call *c = priv;
  return c->op(c->r, done);
}

/* Median over --repeat runs (after --warmup) of END(op) - END(tick), in ms
 * (cli_time_median, held; no cache flush: ReRoPE is bound by arithmetic, not
 * by reading its operands). */
static double time_op(run *r, clattn_status (*op)(run *, cl_event *), const char *label) {
  op_call c = {r, op};
  return cli_time_median(&r->env, NULL, 0, r->o.warmup, r->o.repeat, true, call_op, &c, label,
                         NULL);
}

/* ------------------------------------------------------------------ checks */

static double max_err(const double *got, const double *want, size_t n, double *scale) {
  double e = 0.0, m = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (isinf(want[i])) {
      if (got[i] != want[i]) e = INFINITY;
      continue;
    }
    const double d = fabs(got[i] - want[i]);
    e = (d > e || isnan(d)) ? d : e;
    if (fabs(want[i]) > m) m = fabs(want[i]);
  }
  if (scale) *scale = m;
  return e;
}

/* Bound on |err| / max |ref|: a few roundings of the stored dtype (tensor
 * cores also round P and dS to it). */
static double tolerance(clattn_dtype dt) {
  return dt == CLATTN_F16 ? 8.0 / 2048 : dt == CLATTN_BF16 ? 8.0 / 256 : 1e-4;
}

/* The tuner's checks print only what fails. */
static bool quiet_checks;

static bool report(const char *what, const double *got, const double *want, size_t n,
                   clattn_dtype dt) {
  double scale = 0.0;
  const double e = max_err(got, want, n, &scale);
  const bool ok = e <= tolerance(dt) * (scale + 1e-3);
  if (!ok || !quiet_checks) printf("  check %-4s max |err| %.3g (max |ref| %.3g)%s\n", what, e, scale, ok ? "" : "  FAILED");
  return ok;
}

/* Reads tensor i back in logical order [Z][H][N][D]. */
static double *read_back(run *r, int i) {
  double *x = malloc(sizeof(double) * (numel(r, i) + 1));
  if (x && !cli_read(&r->env, r->buf[i], r->dt, 0, numel(r, i), x)) {
    free(x);
    return NULL;
  }
  return x;
}

/* The reference's inputs: rotary runs rotate raw q, k here (q1 = R(p_i) q,
 * q2 = R(W) q, k1 = R(p_j) k, k2 = k; default positions). */
static void rotate(const run *r, double *q1, double *q2, double *k1) {
  for (int z = 0; z < r->Z; z++)
    for (int h = 0; h < r->Hq; h++)
      for (int i = 0; i < r->Nq; i++) {
        const size_t at = (((size_t)z * r->Hq + h) * r->Nq + i) * r->D;
        ref_rope(q1 + at, 1, r->D, NULL, r->Nk - r->Nq + i, r->o.theta, r->o.interleaved, 0);
        ref_rope(q2 + at, 1, r->D, NULL, r->o.window, r->o.theta, r->o.interleaved, 0);
      }
  for (int z = 0; z < r->Z; z++)
    for (int h = 0; h < r->Hkv; h++)
      for (int j = 0; j < r->Nk; j++)
        ref_rope(k1 + (((size_t)z * r->Hkv + h) * r->Nk + j) * r->D, 1, r->D, NULL, j, r->o.theta,
                 r->o.interleaved, 0);
}

static bool check_full(run *r, double scale) {
  const size_t nq = numel(r, Q1), nk = numel(r, K1), nl = (size_t)r->Z * r->Hq * r->Nq;
  double *x[DO + 1] = {0};
  bool ok = true;
  for (int i = 0; i <= DO && ok; i++) {
    if (i == DO && !r->o.backward) break; /* a forward-only run holds no dout */
    const int src = (r->o.on_the_fly && (i == Q2 || i == K2)) ? i - 1 : i; /* raw q, k */
    x[i] = read_back(r, src);
    ok = x[i] != NULL;
  }
  double *o_ref = malloc(sizeof(double) * (nq + 1)), *lse_ref = malloc(sizeof(double) * (nl + 1));
  double *lse = malloc(sizeof(double) * (nl + 1));
  ok = ok && o_ref && lse_ref && lse && cli_read(&r->env, r->lse, CLATTN_F32, 0, nl, lse);
  double *rk2 = NULL;
  if (ok && r->o.on_the_fly) {
    rotate(r, x[Q1], x[Q2], x[K1]);
    rk2 = x[K2];
  }
  ref_rerope_args a = {r->Z, r->Hq,       r->Hkv,      r->Nq, r->Nk,
                       r->D, r->o.window, r->o.causal, scale, NULL,
                       NULL, x[Q1],       x[Q2],       x[K1], rk2 ? rk2 : x[K2],
                       x[V], o_ref,       lse_ref,     x[DO], NULL,
                       NULL, NULL,        NULL,        NULL};
  if (ok) {
    ref_rerope_fwd(&a);
    double *o = read_back(r, O);
    ok = o && report("o", o, o_ref, nq, r->dt);
    /* lse moves by at most the logits' error: they come from operands rounded
     * to the storage dtype (tensor cores; rotated q and k on the fly), so the
     * dtype's bound, not f32's */
    ok = report("lse", lse, lse_ref, nl, r->dt) && ok;
    free(o);
  }
  if (ok && r->o.backward) {
    double *g[5];
    for (int i = 0; i < 5; i++) g[i] = malloc(sizeof(double) * ((i < 2 ? nq : nk) + 1));
    a.dq1 = g[0], a.dq2 = g[1], a.dk1 = g[2], a.dk2 = g[3], a.dv = g[4];
    ref_rerope_bwd(&a);
    if (r->o.on_the_fly) { /* back through the rotations: dq = R^T dq1 + R(W)^T dq2, dk = R^T dk1 +
                              dk2 */
      for (int z = 0; z < r->Z; z++)
        for (int h = 0; h < r->Hq; h++)
          for (int i = 0; i < r->Nq; i++) {
            const size_t at = (((size_t)z * r->Hq + h) * r->Nq + i) * r->D;
            ref_rope(g[0] + at, 1, r->D, NULL, r->Nk - r->Nq + i, r->o.theta, r->o.interleaved, 1);
            ref_rope(g[1] + at, 1, r->D, NULL, r->o.window, r->o.theta, r->o.interleaved, 1);
          }
      for (int z = 0; z < r->Z; z++)
        for (int h = 0; h < r->Hkv; h++)
          for (int j = 0; j < r->Nk; j++)
            ref_rope(g[2] + (((size_t)z * r->Hkv + h) * r->Nk + j) * r->D, 1, r->D, NULL, j,
                     r->o.theta, r->o.interleaved, 1);
      for (size_t i = 0; i < nq; i++) g[0][i] += g[1][i];
      for (size_t i = 0; i < nk; i++) g[2][i] += g[3][i];
    }
    static const int outs[5] = {DQ1, DQ2, DK1, DK2, DV};
    for (int i = 0; i < 5; i++) {
      if (!used(r, outs[i])) continue;
      double *got = read_back(r, outs[i]);
      const char *nm = r->o.on_the_fly ? (i == 0 ? "dq" : i == 2 ? "dk" : "dv") : tname[outs[i]];
      ok = got && report(nm, got, g[i], i < 2 ? nq : nk, r->dt) && ok;
      free(got);
    }
    for (int i = 0; i < 5; i++) free(g[i]);
  }
  for (int i = 0; i <= DO; i++) free(x[i]);
  free(o_ref), free(lse_ref), free(lse);
  return ok;
}

/* The forward on sampled query rows of two heads: each row needs its own q
 * and all of that head's keys, so the reference runs on those rows alone
 * (positions passed explicitly). Explicit variant only. */
static bool check_rows(run *r, double scale) {
  const int D = r->D, G = r->Hq / r->Hkv;
  int rows[24], nr = 0;
  for (int i = 0; i < 8 && i < r->Nq; i++) rows[nr++] = i;
  for (int i = r->Nq / 2; i < r->Nq / 2 + 8 && i < r->Nq; i++) rows[nr++] = i;
  for (int i = r->Nq - 8 < 0 ? 0 : r->Nq - 8; i < r->Nq; i++) rows[nr++] = i;
  const int heads[2][2] = {{0, 0}, {r->Z - 1, r->Hq - 1}};
  const size_t nk = (size_t)r->Nk * D;
  double *k1 = malloc(sizeof(double) * nk), *k2 = malloc(sizeof(double) * nk);
  double *v = malloc(sizeof(double) * nk);
  double *q1 = malloc(sizeof(double) * nr * D), *q2 = malloc(sizeof(double) * nr * D);
  double *o = malloc(sizeof(double) * nr * D), *o_ref = malloc(sizeof(double) * nr * D);
  double *lse = malloc(sizeof(double) * nr), *lse_ref = malloc(sizeof(double) * nr);
  int32_t *qp = malloc(sizeof(int32_t) * nr), *kp = malloc(sizeof(int32_t) * r->Nk);
  bool ok = k1 && k2 && v && q1 && q2 && o && o_ref && lse && lse_ref && qp && kp;
  double worst_o = 0, worst_l = 0, scale_o = 0;
  for (int j = 0; ok && j < r->Nk; j++) kp[j] = j;
  for (int hh = 0; ok && hh < 2; hh++) {
    const int z = heads[hh][0], h = heads[hh][1], hk = h / G;
    const size_t kb = (((size_t)z * r->Hkv + hk) * r->Nk) * D;
    ok = cli_read(&r->env, r->buf[K1], r->dt, kb, nk, k1) &&
         cli_read(&r->env, r->buf[K2], r->dt, kb, nk, k2) &&
         cli_read(&r->env, r->buf[V], r->dt, kb, nk, v);
    for (int i = 0; ok && i < nr; i++) {
      const size_t qb = (((size_t)z * r->Hq + h) * r->Nq + rows[i]) * D;
      ok = cli_read(&r->env, r->buf[Q1], r->dt, qb, D, q1 + (size_t)i * D) &&
           cli_read(&r->env, r->buf[Q2], r->dt, qb, D, q2 + (size_t)i * D) &&
           cli_read(&r->env, r->buf[O], r->dt, qb, D, o + (size_t)i * D) &&
           cli_read(&r->env, r->lse, CLATTN_F32, ((size_t)z * r->Hq + h) * r->Nq + rows[i], 1,
                    lse + i);
      qp[i] = r->Nk - r->Nq + rows[i];
    }
    if (!ok) break;
    ref_rerope_args a = {1,     1,       1,    nr,   r->Nk, D,    r->o.window, r->o.causal,
                         scale, qp,      kp,   q1,   q2,    k1,   k2,          v,
                         o_ref, lse_ref, NULL, NULL, NULL,  NULL, NULL,        NULL};
    ref_rerope_fwd(&a);
    double s = 0;
    const double eo = max_err(o, o_ref, (size_t)nr * D, &s), el = max_err(lse, lse_ref, nr, NULL);
    worst_o = fmax(worst_o, eo), worst_l = fmax(worst_l, el), scale_o = fmax(scale_o, s);
  }
  if (ok) {
    const bool good = worst_o <= tolerance(r->dt) * (scale_o + 1e-3) && worst_l <= 1e-3;
    if (!good || !quiet_checks) printf("  check o, lse on %d sampled rows of 2 heads: max |err| %.3g (max |ref| %.3g), lse "
           "%.3g%s\n",
           nr, worst_o, scale_o, worst_l, good ? "" : "  FAILED");
    ok = good;
  }
  free(k1), free(k2), free(v), free(q1), free(q2), free(o), free(o_ref), free(lse), free(lse_ref);
  free(qp), free(kp);
  return ok;
}

/* ------------------------------------------------------------------ main */

/* Which kernels the library picks for this shape (the rotary form reads raw
 * q and k where the other takes q1 and k1). */
static const char *path_name(run *r, int backward) {
  if (r->o.on_the_fly) {
    const clattn_rerope_rotary_params rp = rotary_params(r);
    const char *name = clattn_rerope_rotary_kernels(r->env.ctx, &rp, backward);
    return name ? name : "?";
  }
  const bool pair = r->t[Q2].buf != NULL;
  const clattn_rerope_params p = {r->t[Q1], pair ? r->t[Q2] : r->t[Q1], r->t[K1], pair ? r->t[K2] : r->t[K1],
                                  r->t[V], r->t[O], r->tl, r->o.window, (float)r->o.scale, r->o.causal};
  const char *name = clattn_rerope_kernels(r->env.ctx, &p, backward);
  return name ? name : "?";
}

int cli_run_rerope(int argc, char **argv) {
  run r;
  memset(&r, 0, sizeof r);
  opts *o = &r.o;
  o->z = 1, o->heads = 32, o->n = 4096, o->head_dim = 64, o->window = -1;
  o->repeat = 10, o->warmup = 2, o->seed = 1, o->theta = 10000.0, o->ref_limit = 2e9;
  o->dtype = "f16";
  const cli_flag flags[] = {
      {"z", FLAG_INT, &o->z, "batch Z"},
      {"heads", FLAG_INT, &o->heads, "query heads Hq"},
      {"kv-heads", FLAG_INT, &o->kv_heads, "K/V heads Hkv, dividing Hq (0: Hq)"},
      {"n", FLAG_INT, &o->n, "queries Nq"},
      {"n-k", FLAG_INT, &o->n_k, "keys Nk (0: Nq)"},
      {"head-dim", FLAG_INT, &o->head_dim, "head dim D"},
      {"window", FLAG_INT, &o->window, "ReRoPE window W (-1: Nk / 4)"},
      {"causal", FLAG_BOOL, &o->causal, "causal mask (query i at position Nk - Nq + i)"},
      {"backward", FLAG_BOOL, &o->backward, "also run and time the backward"},
      {"on-the-fly", FLAG_BOOL, &o->on_the_fly, "rotary variant: raw q, k rotated in the kernels"},
      {"interleaved", FLAG_BOOL, &o->interleaved, "on-the-fly: interleaved pairs (else NeoX)"},
      {"theta", FLAG_DOUBLE, &o->theta, "on-the-fly: RoPE base"},
      {"dtype", FLAG_STR, &o->dtype, "f32, f16 or bf16"},
      {"scale", FLAG_DOUBLE, &o->scale, "softmax scale (0: 1/sqrt(D))"},
      {"repeat", FLAG_INT, &o->repeat, "timed repetitions"},
      {"warmup", FLAG_INT, &o->warmup, "untimed repetitions first"},
      {"seed", FLAG_INT, &o->seed, "random data seed"},
      {"device", FLAG_STR, &o->device, "device index or name substring"},
      {"no-check", FLAG_BOOL, &o->no_check, "skip the reference check"},
      {"ref-limit", FLAG_DOUBLE, &o->ref_limit,
       "multiply-adds above which only sampled rows are checked"},
  };
  int pr = cli_parse("clattn run rerope", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
  if (pr) return pr == 1 ? 0 : 2;
  int groups = 1;
  if (!cli_dtype(o->dtype, &r.dt, &groups) ||
      (r.dt != CLATTN_F32 && r.dt != CLATTN_F16 && r.dt != CLATTN_BF16)) {
    fprintf(stderr, "clattn run rerope: --dtype %s: use f32, f16 or bf16\n", o->dtype);
    return 2;
  }
  r.Z = o->z, r.Hq = o->heads, r.Hkv = o->kv_heads ? o->kv_heads : o->heads;
  r.Nq = o->n, r.Nk = o->n_k ? o->n_k : o->n, r.D = o->head_dim;
  if (o->window < 0) o->window = r.Nk / 4;
  if (r.Z < 1 || r.Hq < 1 || r.Hkv < 1 || r.Nq < 1 || r.Nk < 1 || o->repeat < 1 || o->warmup < 0) {
    fprintf(stderr, "clattn run rerope: sizes and --repeat must be positive\n");
    return 2;
  }
  if (!cli_open(o->device, &r.env)) return 1;
  int rc = 1;
  if (!setup(&r)) goto done;
  const double scale = o->scale != 0.0 ? o->scale : 1.0 / sqrt((double)r.D);
  printf("rerope%s Z=%d Hq=%d Hkv=%d Nq=%d Nk=%d D=%d W=%d %s%s on %s\n",
         o->on_the_fly ? " (on the fly)" : "", r.Z, r.Hq, r.Hkv, r.Nq, r.Nk, r.D, o->window,
         clattn_dtype_name(r.dt), o->causal ? " causal" : "", r.env.profile.name);
  printf("  kernels: forward %s", path_name(&r, 0));
  if (o->backward) printf(", backward %s", path_name(&r, 1));
  printf("\n");

  /* one run of each for the check (the backward reads the forward's o and lse) */
  cl_event ev = NULL;
  clattn_status s = fwd(&r, &ev);
  if (s != CLATTN_SUCCESS) {
    rc = cli_fail("clattn_rerope_fwd", s);
    goto done;
  }
  clReleaseEvent(ev);
  if (o->backward) {
    s = bwd(&r, &ev);
    if (s != CLATTN_SUCCESS) {
      rc = cli_fail("clattn_rerope_bwd", s);
      goto done;
    }
    clReleaseEvent(ev);
  }
  clFinish(r.env.queue);
  bool ok = true;
  const double macs = (double)r.Z * r.Hq * r.Nq * r.Nk * r.D;
  if (o->no_check) {
    printf("  check skipped (--no-check)\n");
  } else if (macs <= o->ref_limit) {
    ok = check_full(&r, scale);
  } else if (!o->on_the_fly) {
    printf("  full check skipped: the CPU reference would take %.0e multiply-adds per product "
           "(--ref-limit %.0e)%s\n",
           macs, o->ref_limit, o->backward ? "; backward unchecked" : "");
    ok = check_rows(&r, scale);
  } else {
    printf("  check skipped: the CPU reference would take %.0e multiply-adds per product "
           "(--ref-limit %.0e)\n",
           macs, o->ref_limit);
  }

  const double flops = 4.0 * r.Z * r.Hq * (double)r.Nq * r.Nk * r.D * (o->causal ? 0.5 : 1.0);
  const double tf = time_op(&r, fwd, "rerope fwd");
  if (isnan(tf)) goto done;
  printf("  forward  %9.3f ms  %7.3g TFLOP/s (median of %d)\n", tf, flops / tf * 1e-9, o->repeat);
  if (o->backward) {
    const double tb = time_op(&r, bwd, "rerope bwd");
    if (isnan(tb)) goto done;
    printf("  backward %9.3f ms  %7.3g TFLOP/s (2.5x the forward's FLOPs)\n", tb,
           2.5 * flops / tb * 1e-9);
    printf("  fwd+bwd  %9.3f ms  %7.3g TFLOP/s\n", tf + tb, 3.5 * flops / (tf + tb) * 1e-9);
  }
  rc = ok ? 0 : 1;
done:
  teardown(&r);
  return rc;
}

/* ------------------------------------------------------------------ the tuner's cases (tune.c) */

typedef struct cli_rerope_case {
  run r;
} cli_rerope_case;

static void case_free(void *c);

/* A run of the shape (heads, KV heads, n, window as given), on the caller's device. */
static bool case_run(run *r, cli_env *env, const cli_rerope_shape *sh, int heads, int kv_heads, int n,
                     int window, bool backward) {
  r->o = (opts){.z = 1, .heads = heads, .kv_heads = kv_heads, .n = n, .head_dim = sh->head_dim,
                .window = window, .seed = 1, .dtype = sh->dtype, .ref_limit = 2e9,
                .causal = sh->causal, .backward = backward};
  r->env = *env;
  r->borrowed_env = true;
  int g = 1;
  if (!cli_dtype(sh->dtype, &r->dt, &g) || r->dt > CLATTN_BF16) {
    fprintf(stderr, "clattn tune: bad rerope dtype %s\n", sh->dtype);
    return false;
  }
  r->Z = 1, r->Hq = heads, r->Hkv = kv_heads ? kv_heads : heads;
  r->Nq = r->Nk = n, r->D = sh->head_dim;
  return setup(r);
}

static void *case_new(cli_env *env, const void *shape) {
  const cli_rerope_shape *sh = shape;
  cli_rerope_case *c = calloc(1, sizeof *c);
  if (c && !case_run(&c->r, env, sh, sh->heads, sh->kv_heads, sh->n, sh->window, false)) {
    case_free(c);
    return NULL;
  }
  return c;
}

/* The forward (and with `backward` the backward) run once and finished. */
static clattn_status run_once(run *r, bool backward) {
  cl_event ev = NULL;
  clattn_status s = fwd(r, &ev);
  if (ev) clReleaseEvent(ev);
  ev = NULL;
  if (s == CLATTN_SUCCESS && backward) s = bwd(r, &ev);
  if (ev) clReleaseEvent(ev);
  if (s == CLATTN_SUCCESS && clFinish(r->env.queue) != CL_SUCCESS) s = CLATTN_OPENCL_ERROR;
  return s;
}

/* Whether s is success; else why says what failed. */
static bool ran(clattn_status s, char *why, size_t n) {
  if (s != CLATTN_SUCCESS) snprintf(why, n, "%s: %s", clattn_status_string(s), clattn_last_error());
  return s == CLATTN_SUCCESS;
}

/* A tuner case's check of run r after status s: the failure, or the
 * comparison with the CPU reference (in full where it is small enough, else
 * sampled rows of the forward) without its report lines; why says what failed. */
static bool checked(run *r, clattn_status s, char *why, size_t n) {
  if (!ran(s, why, n)) return false;
  const double scale = 1.0 / sqrt((double)r->D);
  const double macs = (double)r->Z * r->Hq * r->Nq * r->Nk * r->D;
  quiet_checks = true;
  const bool ok = macs <= r->o.ref_limit ? check_full(r, scale) : check_rows(r, scale);
  quiet_checks = false;
  if (!ok)
    snprintf(why, n, "the %s is out of tolerance (above)", r->o.backward ? "backward" : "forward");
  return ok;
}

/* A tuner case's time of op on run r. */
static double timed(run *r, int warmup, int repeat, clattn_status (*op)(run *, cl_event *),
                    const char *label) {
  r->o.warmup = warmup;
  r->o.repeat = repeat;
  return time_op(r, op, label);
}

static bool case_check(void *cv, char *why, size_t n) {
  run *r = &((cli_rerope_case *)cv)->r;
  return checked(r, run_once(r, false), why, n);
}

static double case_time(void *cv, int warmup, int repeat) {
  return timed(&((cli_rerope_case *)cv)->r, warmup, repeat, fwd, "rerope fwd");
}

static const char *case_kernels(void *cv) { return path_name(&((cli_rerope_case *)cv)->r, 0); }

static void case_free(void *cv) {
  cli_rerope_case *c = cv;
  if (!c) return;
  teardown(&c->r);
  free(c);
}

static void case_describe(const void *shape, char *buf, size_t n) {
  const cli_rerope_shape *s = shape;
  snprintf(buf, n, "rerope fwd H=%d N=%d D=%d W=%d %s%s", s->heads, s->n, s->head_dim, s->window,
           s->dtype, s->causal ? " causal" : "");
}

const cli_case_ops cli_rerope_cases = {case_new, case_check, case_time, case_free, case_describe, case_kernels};

/* The backward's cases: the timed run of the shape, its forward run once
 * when made (the backward reads its o and lse; the family's knobs do not
 * change the forward), and a check run of one or two KV heads with the
 * shape's group size and 256 positions (window scaled, at least 1 below N:
 * band edges), small enough for the full CPU reference; the kernels the
 * planner picks depend on the head dim, dtype, mask and form, not on the
 * lengths. */
typedef struct cli_rerope_bwd_case {
  run r, small;
} cli_rerope_bwd_case;

static void bwd_case_free(void *cv) {
  cli_rerope_bwd_case *c = cv;
  if (!c) return;
  teardown(&c->r);
  teardown(&c->small);
  free(c);
}

static void *bwd_case_new(cli_env *env, const void *shape) {
  const cli_rerope_shape *sh = shape;
  cli_rerope_bwd_case *c = calloc(1, sizeof *c);
  if (c) c->r.borrowed_env = c->small.borrowed_env = true; /* teardown of a run not set up */
  const int n = sh->n < 256 ? sh->n : 256;
  int w = (int)((long)sh->window * n / sh->n);
  if (w < 1 && sh->window > 0) w = 1;
  const int kv = sh->kv_heads && sh->kv_heads < sh->heads ? 1 : 2;
  const int heads = sh->kv_heads ? sh->heads / sh->kv_heads * kv : 2;
  char why[256] = "";
  if (c && !(case_run(&c->r, env, sh, sh->heads, sh->kv_heads, sh->n, sh->window, true) &&
             case_run(&c->small, env, sh, heads, kv, n, w, true) &&
             ran(run_once(&c->r, false), why, sizeof why))) {
    if (why[0]) fprintf(stderr, "clattn tune: the forward: %s\n", why);
    bwd_case_free(c);
    return NULL;
  }
  return c;
}

static bool bwd_case_check(void *cv, char *why, size_t n) {
  cli_rerope_bwd_case *c = cv;
  return checked(&c->small, run_once(&c->small, true), why, n);
}

static double bwd_case_time(void *cv, int warmup, int repeat) {
  return timed(&((cli_rerope_bwd_case *)cv)->r, warmup, repeat, bwd, "rerope bwd");
}

static const char *bwd_case_kernels(void *cv) { return path_name(&((cli_rerope_bwd_case *)cv)->r, 1); }

static void bwd_case_describe(const void *shape, char *buf, size_t n) {
  const cli_rerope_shape *s = shape;
  snprintf(buf, n, "rerope bwd H=%d N=%d D=%d W=%d %s%s", s->heads, s->n, s->head_dim, s->window,
           s->dtype, s->causal ? " causal" : "");
}

const cli_case_ops cli_rerope_bwd_cases = {bwd_case_new,      bwd_case_check,   bwd_case_time,
                                           bwd_case_free,     bwd_case_describe, bwd_case_kernels};
