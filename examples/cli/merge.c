/* `clattn run merge`: merging attention states on synthetic data, and the
 * sequence-parallel decode built on it.
 *
 * Merge (the default): n partial states (random o_i in --dtype, random
 * lse_i) merged by clattn_merge; the result is checked against the
 * double-precision reference (tests/ref_merge.h) on the values the device
 * read; the median device time and the bandwidth (bytes of partials read +
 * outputs written, per second) are printed. --backward does the same for
 * clattn_merge_backward.
 *
 * Split decode (--split-devices 0,1,...): one KV cache cut into equal
 * sequence ranges, one per listed device (a device listed twice holds two
 * ranges in one context), decoded by clattn_decode_multi, compared with one
 * clattn_decode over the whole cache on the first device; both times are
 * printed.
 *
 * Device times are taken as in `run decode`: behind a spinning kernel, an
 * L2 flush, a no-op tick kernel, then the operation; time = END(op) -
 * END(tick). */
#include "cli.h"
#include "ref_merge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHARDS 16
/* Host reference work above which the check is skipped (doubles read back). */
#define CHECK_MAX_ELEMS (64u << 20)

typedef struct opts {
  int n, batch, m, heads, kv_heads, head_dim, ctx, repeat, warmup, seed;
  const char *dtype, *out_dtype, *kv_dtype, *partial_dtype, *device, *split_devices;
  bool stacked, no_lse, lse, backward, no_check, no_flush, separate_contexts, json;
} opts;

/* f32 accumulation, then the output dtype's rounding (a few ulps). */
static double o_tol(clattn_dtype dt) {
  return dt == CLATTN_F16 ? 4.0 / 2048 : dt == CLATTN_BF16 ? 4.0 / 256 : 2e-5;
}

/* ------------------------------------------------------------------ held device timing */

typedef cli_enqueue_fn enqueue_fn;

typedef struct timer {
  cli_env *env;
  cl_mem flush; /* NULL: warm cache */
  size_t flush_n;
} timer;

static bool timer_init(timer *t, cli_env *env, bool no_flush) {
  memset(t, 0, sizeof *t);
  t->env = env;
  if (no_flush) return true;
  t->flush = cli_flush_buffer(env, &t->flush_n);
  return t->flush != NULL;
}

static void timer_free(timer *t) {
  if (t->flush) clReleaseMemObject(t->flush);
  t->flush = NULL;
}


/* Median device ms over `repeat` runs after `warmup`; NaN on error. */
static double time_device(timer *t, enqueue_fn fn, void *priv, const opts *o, const char *label) {
  return cli_time_median(t->env, t->flush, t->flush_n, o->warmup, o->repeat, true, fn, priv, label,
                         NULL);
}

/* Largest |got - want| over n values, and how many exceed atol + rtol |want|
 * (NaN/inf must match exactly). */
static double max_err(const double *got, const double *want, size_t n, double tol, size_t *bad) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double g = got[i], w = want[i];
    bool ok;
    double e;
    if (isnan(w) || isinf(w)) {
      ok = isnan(w) ? isnan(g) : g == w;
      e = ok ? 0.0 : INFINITY;
    } else {
      e = isfinite(g) ? fabs(g - w) : INFINITY;
      ok = e <= tol + tol * fabs(w);
    }
    if (!ok) (*bad)++;
    if (e > worst) worst = e;
  }
  return worst;
}

/* ------------------------------------------------------------------ merge */

typedef struct mrun {
  const opts *o;
  cli_env env;
  bool borrowed_env; /* the tuner's: not closed with the run */
  clattn_dtype pdt, odt;
  int R, D;
  cl_mem *po, *pl, stack_o, stack_l, out_o, out_l, ws;
  clattn_tensor *to, *tl;
  clattn_merge_params p;
  /* backward */
  cl_mem *dpo, *dpl, dout, dlse;
  clattn_tensor *tdo, *tdl;
  clattn_merge_backward_params bp;
} mrun;

static clattn_status enq_merge(void *priv, cl_event *done) {
  mrun *r = priv;
  return clattn_merge(r->env.ctx, r->env.queue, &r->p, 0, NULL, done);
}

static clattn_status enq_merge_backward(void *priv, cl_event *done) {
  mrun *r = priv;
  return clattn_merge_backward(r->env.ctx, r->env.queue, &r->bp, 0, NULL, done);
}

static bool merge_setup(mrun *r) {
  const opts *o = r->o;
  const int n = o->n, B = o->batch, M = o->m, H = o->heads, D = o->head_dim;
  r->R = B * M * H;
  r->D = D;
  const size_t no = (size_t)r->R * D, nl = (size_t)r->R;
  const size_t pes = clattn_dtype_size(r->pdt), oes = clattn_dtype_size(r->odt);
  r->po = calloc((size_t)n, sizeof *r->po);
  r->pl = calloc((size_t)n, sizeof *r->pl);
  r->to = calloc((size_t)n, sizeof *r->to);
  r->tl = calloc((size_t)n, sizeof *r->tl);
  if (!r->po || !r->pl || !r->to || !r->tl) return false;
  cli_env *env = &r->env;
  const uint64_t seed = (uint64_t)o->seed * 1000;
  if (o->stacked) { /* [n, B, M, H, D] and [n, B, H, M]: one launch however many */
    r->stack_o = cli_buffer(env, (size_t)n * no * pes, "stacked partial o");
    r->stack_l = r->stack_o ? cli_buffer(env, (size_t)n * nl * 4, "stacked partial lse") : NULL;
    if (!r->stack_l || !cli_fill_random(env, r->stack_o, r->pdt, 0, (size_t)n * no, seed + 1, 1.0f) ||
        !cli_fill_random(env, r->stack_l, CLATTN_F32, 0, (size_t)n * nl, seed + 2, 2.0f))
      return false;
    for (int i = 0; i < n; i++) {
      r->to[i] = clattn_tensor_4d(r->stack_o, (size_t)i * no * pes, r->pdt, B, M, H, D);
      r->tl[i] = clattn_tensor_3d(r->stack_l, (size_t)i * nl * 4, CLATTN_F32, B, H, M);
    }
  } else { /* each part its own buffer, as a cascade's or a multi-device gather's are */
    for (int i = 0; i < n; i++) {
      r->po[i] = cli_buffer(env, no * pes, "partial o");
      r->pl[i] = r->po[i] ? cli_buffer(env, nl * 4, "partial lse") : NULL;
      if (!r->pl[i] || !cli_fill_random(env, r->po[i], r->pdt, 0, no, seed + 10 + 2 * i, 1.0f) ||
          !cli_fill_random(env, r->pl[i], CLATTN_F32, 0, nl, seed + 11 + 2 * i, 2.0f))
        return false;
      r->to[i] = clattn_tensor_4d(r->po[i], 0, r->pdt, B, M, H, D);
      r->tl[i] = clattn_tensor_3d(r->pl[i], 0, CLATTN_F32, B, H, M);
    }
  }
  r->out_o = cli_buffer(env, no * oes, "o");
  r->out_l = r->out_o ? cli_buffer(env, nl * 4, "lse") : NULL;
  if (!r->out_l) return false;
  clattn_merge_params *p = &r->p;
  p->n = n;
  p->parts_o = r->to;
  p->parts_lse = r->tl;
  p->o = clattn_tensor_4d(r->out_o, 0, r->odt, B, M, H, D);
  /* the backward needs the forward's lse: written whenever it will run */
  if (!o->no_lse || o->backward) p->maybe_lse = clattn_tensor_3d(r->out_l, 0, CLATTN_F32, B, H, M);
  size_t ws = 0;
  clattn_status s = clattn_merge_workspace_size(env->ctx, p, &ws);
  if (s != CLATTN_SUCCESS) return cli_fail("clattn_merge_workspace_size", s), false;
  if (ws) { /* a caller-owned workspace: no allocation per call */
    r->ws = cli_buffer(env, ws, "workspace");
    if (!r->ws) return false;
    p->maybe_workspace = clattn_tensor_1d(r->ws, 0, CLATTN_F32, (int64_t)(ws / 4));
  }
  if (!o->backward) return clFinish(env->queue) == CL_SUCCESS;

  r->dpo = calloc((size_t)n, sizeof *r->dpo);
  r->dpl = calloc((size_t)n, sizeof *r->dpl);
  r->tdo = calloc((size_t)n, sizeof *r->tdo);
  r->tdl = calloc((size_t)n, sizeof *r->tdl);
  if (!r->dpo || !r->dpl || !r->tdo || !r->tdl) return false;
  for (int i = 0; i < n; i++) {
    r->dpo[i] = cli_buffer(env, no * pes, "do_i");
    r->dpl[i] = r->dpo[i] ? cli_buffer(env, nl * 4, "dlse_i") : NULL;
    if (!r->dpl[i]) return false;
    r->tdo[i] = clattn_tensor_4d(r->dpo[i], 0, r->pdt, B, M, H, D);
    r->tdl[i] = clattn_tensor_3d(r->dpl[i], 0, CLATTN_F32, B, H, M);
  }
  r->dout = cli_buffer(env, no * oes, "do");
  r->dlse = r->dout ? cli_buffer(env, nl * 4, "dlse") : NULL;
  if (!r->dlse || !cli_fill_random(env, r->dout, r->odt, 0, no, seed + 3, 1.0f) ||
      !cli_fill_random(env, r->dlse, CLATTN_F32, 0, nl, seed + 4, 1.0f))
    return false;
  clattn_merge_backward_params *bp = &r->bp;
  bp->n = n;
  bp->parts_o = r->to;
  bp->parts_lse = r->tl;
  bp->o = p->o;
  bp->lse = clattn_tensor_3d(r->out_l, 0, CLATTN_F32, B, H, M);
  bp->maybe_do = clattn_tensor_4d(r->dout, 0, r->odt, B, M, H, D);
  bp->maybe_dlse = clattn_tensor_3d(r->dlse, 0, CLATTN_F32, B, H, M);
  bp->d_parts_o = r->tdo;
  bp->d_parts_lse = r->tdl;
  return clFinish(env->queue) == CL_SUCCESS;
}

static void merge_teardown(mrun *r) {
  for (int i = 0; r->po && i < r->o->n; i++) {
    if (r->po[i]) clReleaseMemObject(r->po[i]);
    if (r->pl[i]) clReleaseMemObject(r->pl[i]);
  }
  for (int i = 0; r->dpo && i < r->o->n; i++) {
    if (r->dpo[i]) clReleaseMemObject(r->dpo[i]);
    if (r->dpl[i]) clReleaseMemObject(r->dpl[i]);
  }
  cl_mem single[] = {r->stack_o, r->stack_l, r->out_o, r->out_l, r->ws, r->dout, r->dlse};
  for (size_t i = 0; i < sizeof single / sizeof single[0]; i++)
    if (single[i]) clReleaseMemObject(single[i]);
  free(r->po), free(r->pl), free(r->to), free(r->tl);
  free(r->dpo), free(r->dpl), free(r->tdo), free(r->tdl);
  if (!r->borrowed_env) cli_close(&r->env);
}

/* Reads the parts back (the values the device merged) and checks the
 * forward, and with --backward the gradients. */
static bool merge_check(mrun *r, double *err_o, double *err_lse, double *err_grad, size_t *bad) {
  const int n = r->o->n;
  const size_t no = (size_t)r->R * r->D, nl = (size_t)r->R;
  const opts *o = r->o;
  double **po = calloc((size_t)n, sizeof *po), **pl = calloc((size_t)n, sizeof *pl);
  double *want_o = malloc(sizeof(double) * no), *want_l = malloc(sizeof(double) * nl);
  double *got_o = malloc(sizeof(double) * no), *got_l = malloc(sizeof(double) * nl);
  bool ok = po && pl && want_o && want_l && got_o && got_l;
  for (int i = 0; ok && i < n; i++) {
    po[i] = malloc(sizeof(double) * no);
    pl[i] = malloc(sizeof(double) * nl);
    const size_t so = o->stacked ? (size_t)i * no : 0, sl = o->stacked ? (size_t)i * nl : 0;
    ok = po[i] && pl[i] &&
         cli_read(&r->env, o->stacked ? r->stack_o : r->po[i], r->pdt, so, no, po[i]) &&
         cli_read(&r->env, o->stacked ? r->stack_l : r->pl[i], CLATTN_F32, sl, nl, pl[i]);
  }
  ref_merge_args a = {n, o->batch, o->m, o->heads, o->head_dim, (const double *const *)po,
                      (const double *const *)pl};
  if (ok) {
    ref_merge(&a, want_o, want_l);
    ok = cli_read(&r->env, r->out_o, r->odt, 0, no, got_o);
    *err_o = max_err(got_o, want_o, no, o_tol(r->odt), bad);
    if (ok && (r->p.maybe_lse.buf != NULL)) {
      ok = cli_read(&r->env, r->out_l, CLATTN_F32, 0, nl, got_l);
      *err_lse = max_err(got_l, want_l, nl, 2e-5, bad);
    }
  }
  if (ok && o->backward) {
    /* against the analytic gradient at the device's own forward o and lse */
    double *dout = malloc(sizeof(double) * no), *dlse = malloc(sizeof(double) * nl);
    double **go = calloc((size_t)n, sizeof *go), **gl = calloc((size_t)n, sizeof *gl);
    double *buf = malloc(sizeof(double) * (no > nl ? no : nl));
    ok = dout && dlse && go && gl && buf && cli_read(&r->env, r->dout, r->odt, 0, no, dout) &&
         cli_read(&r->env, r->dlse, CLATTN_F32, 0, nl, dlse);
    for (int i = 0; ok && i < n; i++) {
      go[i] = malloc(sizeof(double) * no);
      gl[i] = malloc(sizeof(double) * nl);
      ok = go[i] && gl[i];
    }
    if (ok) ref_merge_backward(&a, got_o, got_l, dout, dlse, go, gl);
    *err_grad = 0.0;
    for (int i = 0; ok && i < n; i++) {
      ok = cli_read(&r->env, r->dpo[i], r->pdt, 0, no, buf);
      double e = max_err(buf, go[i], no, o_tol(r->pdt), bad);
      if (e > *err_grad) *err_grad = e;
      ok = ok && cli_read(&r->env, r->dpl[i], CLATTN_F32, 0, nl, buf);
      e = max_err(buf, gl[i], nl, 1e-4, bad); /* f32 sums over D */
      if (e > *err_grad) *err_grad = e;
    }
    for (int i = 0; go && gl && i < n; i++) free(go[i]), free(gl[i]);
    free(go), free(gl), free(dout), free(dlse), free(buf);
  }
  for (int i = 0; po && pl && i < n; i++) free(po[i]), free(pl[i]);
  free(po), free(pl), free(want_o), free(want_l), free(got_o), free(got_l);
  return ok;
}

static int run_merge(const opts *o) {
  mrun *r = calloc(1, sizeof *r);
  if (!r) return 1;
  r->o = o;
  int g;
  if (!cli_dtype(o->dtype, &r->pdt, &g) || r->pdt > CLATTN_BF16 ||
      !cli_dtype(o->out_dtype ? o->out_dtype : o->dtype, &r->odt, &g) || r->odt > CLATTN_BF16) {
    fprintf(stderr, "clattn run merge: --dtype / --out-dtype: use f32, f16 or bf16\n");
    free(r);
    return 2;
  }
  if (!cli_open(o->device, &r->env)) {
    free(r);
    return 1;
  }
  int rc = 1;
  timer t;
  memset(&t, 0, sizeof t);
  const clattn_device_profile *prof = &r->env.profile;
  if (!o->json) printf("device: %s (%s), arch %s\n", prof->name, prof->platform, prof->arch);
  if (!merge_setup(r) || !timer_init(&t, &r->env, o->no_flush)) goto done;
  if (!o->json)
    printf("merge: n=%d parts of B=%d M=%d H=%d D=%d, parts %s, o %s, %s%s%s\n", o->n, o->batch,
           o->m, o->heads, o->head_dim, o->dtype, clattn_dtype_name(r->odt),
           o->stacked ? "stacked in one buffer" : "separate buffers",
           r->ws ? ", chunked through a workspace" : "", (r->p.maybe_lse.buf != NULL) ? ", lse" : "");

  clattn_status s = clattn_merge(r->env.ctx, r->env.queue, &r->p, 0, NULL, NULL);
  if (s == CLATTN_SUCCESS && o->backward)
    s = clattn_merge_backward(r->env.ctx, r->env.queue, &r->bp, 0, NULL, NULL);
  if (s != CLATTN_SUCCESS || clFinish(r->env.queue) != CL_SUCCESS) {
    cli_fail("clattn_merge", s);
    goto done;
  }
  double err_o = 0, err_l = 0, err_g = 0;
  size_t bad = 0;
  const size_t no = (size_t)r->R * r->D;
  const char *check = "skipped";
  if (!o->no_check && (size_t)o->n * no <= CHECK_MAX_ELEMS) {
    if (!merge_check(r, &err_o, &err_l, &err_g, &bad)) goto done;
    check = bad ? "fail" : "pass";
    if (!o->json) {
      printf("check: against the double reference: max abs error %.3g (o), %.3g (lse)", err_o, err_l);
      if (o->backward) printf(", %.3g (gradients)", err_g);
      printf("; tolerance %.3g (%s o): %s\n", o_tol(r->odt), clattn_dtype_name(r->odt),
             bad ? "FAIL" : "PASS");
    }
  } else if (!o->json) {
    printf("check: skipped%s\n", o->no_check ? " (--no-check)" : " (too large for the host reference)");
  }

  const double pes = (double)clattn_dtype_size(r->pdt), oes = (double)clattn_dtype_size(r->odt);
  const double parts_bytes = o->n * ((double)no * pes + (double)r->R * 4);
  const double lse_bytes = (r->p.maybe_lse.buf != NULL) ? (double)r->R * 4 : 0.0;
  const double fwd_bytes = parts_bytes + (double)no * oes + lse_bytes;
  const double ms = time_device(&t, enq_merge, r, o, "merge");
  if (isnan(ms)) goto done;
  double bms = NAN, bwd_bytes = 0;
  if (o->backward) {
    /* reads: parts, o, lse, do, dlse; writes: do_i, dlse_i */
    bwd_bytes = 2 * parts_bytes + 2 * ((double)no * oes + (double)r->R * 4);
    bms = time_device(&t, enq_merge_backward, r, o, "merge backward");
    if (isnan(bms)) goto done;
  }
  if (!o->json) {
    printf("time: %.4f ms (median of %d, device, %s L2)\n", ms, o->repeat,
           o->no_flush ? "warm" : "cold");
    printf("bandwidth: %.1f GB/s (%.2f MB: partials read %.2f MB + outputs written %.2f MB)\n",
           fwd_bytes / (ms * 1e6), fwd_bytes / 1e6, parts_bytes / 1e6, (fwd_bytes - parts_bytes) / 1e6);
    if (o->backward)
      printf("backward: %.4f ms, %.1f GB/s (%.2f MB moved)\n", bms, bwd_bytes / (bms * 1e6),
             bwd_bytes / 1e6);
  } else {
    printf("{\"op\":\"merge\",\"device\":\"%s\",\"n\":%d,\"batch\":%d,\"m\":%d,\"heads\":%d,"
           "\"head_dim\":%d,\"dtype\":\"%s\",\"out_dtype\":\"%s\",\"stacked\":%s,\"time_ms\":%.6f,"
           "\"bytes\":%.0f,\"gbps\":%.2f,\"check\":\"%s\",\"max_err\":%.4g",
           prof->name, o->n, o->batch, o->m, o->heads, o->head_dim, o->dtype,
           clattn_dtype_name(r->odt), cli_json_bool(o->stacked), ms, fwd_bytes,
           fwd_bytes / (ms * 1e6), check, err_o);
    if (o->backward)
      printf(",\"backward_ms\":%.6f,\"backward_gbps\":%.2f", bms, bwd_bytes / (bms * 1e6));
    printf("}\n");
  }
  rc = bad ? 1 : 0;
done:
  timer_free(&t);
  merge_teardown(r);
  free(r);
  return rc;
}

/* ------------------------------------------------------------------ the tuner's cases (tune.c) */

typedef struct cli_merge_case {
  opts o;
  mrun r;
  timer t;
} cli_merge_case;

static void case_free(void *c);

static void *case_new(cli_env *env, const void *shape) {
  const cli_merge_shape *sh = shape;
  cli_merge_case *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->o = (opts){.n = sh->n, .batch = sh->batch, .m = 1, .heads = sh->heads, .head_dim = sh->head_dim,
                .seed = 1, .dtype = sh->dtype, .out_dtype = sh->dtype, .no_lse = false};
  mrun *r = &c->r;
  r->o = &c->o;
  r->env = *env;
  r->borrowed_env = true;
  int g;
  if (!cli_dtype(sh->dtype, &r->pdt, &g) || r->pdt > CLATTN_BF16) {
    fprintf(stderr, "clattn tune: bad merge dtype %s\n", sh->dtype);
    free(c);
    return NULL;
  }
  r->odt = r->pdt;
  if (!merge_setup(r) || !timer_init(&c->t, &r->env, false)) {
    case_free(c);
    return NULL;
  }
  return c;
}

static bool case_check(void *cv, char *why, size_t n) {
  cli_merge_case *c = cv;
  mrun *r = &c->r;
  clattn_status s = clattn_merge(r->env.ctx, r->env.queue, &r->p, 0, NULL, NULL);
  if (s == CLATTN_SUCCESS && clFinish(r->env.queue) != CL_SUCCESS) s = CLATTN_OPENCL_ERROR;
  if (s != CLATTN_SUCCESS)
    return snprintf(why, n, "%s: %s", clattn_status_string(s), clattn_last_error()), false;
  double eo = 0, el = 0, eg = 0;
  size_t bad = 0;
  if (!merge_check(r, &eo, &el, &eg, &bad)) return snprintf(why, n, "the check could not run"), false;
  if (bad) snprintf(why, n, "%zu values out of tolerance (max error %.3g in o, %.3g in lse)", bad, eo, el);
  return bad == 0;
}

static double case_time(void *cv, int warmup, int repeat) {
  cli_merge_case *c = cv;
  c->o.warmup = warmup;
  c->o.repeat = repeat;
  return time_device(&c->t, enq_merge, &c->r, &c->o, "merge");
}

static void case_free(void *cv) {
  cli_merge_case *c = cv;
  if (!c) return;
  timer_free(&c->t);
  merge_teardown(&c->r);
  free(c);
}

/* ------------------------------------------------------------------ split decode */

typedef struct srun {
  const opts *o;
  int n;                     /* shards */
  cli_env envs[MAX_SHARDS];  /* opened devices (shared by shards listing one device) */
  int nenv, env_of[MAX_SHARDS];
  clattn_dtype qdt, kvdt, pdt;
  cl_mem q, k, v, o1, l1, om, lm;           /* on the first device: full cache, outputs */
  cl_mem sq[MAX_SHARDS], sk[MAX_SHARDS], sv[MAX_SHARDS], so[MAX_SHARDS], sl[MAX_SHARDS];
  clattn_decode_params one;
  clattn_decode_shard shards[MAX_SHARDS];
  clattn_decode_multi_params mp;
} srun;

static clattn_status enq_single(void *priv, cl_event *done) {
  srun *r = priv;
  return clattn_decode(r->envs[0].ctx, r->envs[0].queue, &r->one, 0, NULL, done);
}

static clattn_status enq_multi(void *priv, cl_event *done) {
  return clattn_decode_multi(&((srun *)priv)->mp, 0, NULL, done);
}

/* Copies `bytes` at src_off of the first device's `src` into dst of shard
 * environment e: a device copy within one context, else through the host. */
static bool copy_to(srun *r, cl_mem src, size_t src_off, cli_env *e, cl_mem dst, size_t dst_off,
                    size_t bytes, void *host) {
  cli_env *e0 = &r->envs[0];
  cl_int err;
  if (clattn_context_cl(e->ctx) == clattn_context_cl(e0->ctx)) {
    err = clEnqueueCopyBuffer(e0->queue, src, dst, src_off, dst_off, bytes, 0, NULL, NULL);
  } else {
    err = clEnqueueReadBuffer(e0->queue, src, CL_TRUE, src_off, bytes, host, 0, NULL, NULL);
    if (err == CL_SUCCESS)
      err = clEnqueueWriteBuffer(e->queue, dst, CL_TRUE, dst_off, bytes, host, 0, NULL, NULL);
  }
  if (err != CL_SUCCESS) fprintf(stderr, "clattn: copying the cache to a shard failed (%d)\n", (int)err);
  return err == CL_SUCCESS;
}

static bool split_setup(srun *r) {
  const opts *o = r->o;
  const int B = o->batch, Mq = o->m, Hq = o->heads, Hkv = o->kv_heads, D = o->head_dim, N = o->ctx;
  const size_t qes = clattn_dtype_size(r->qdt), kes = clattn_dtype_size(r->kvdt);
  const size_t nq = (size_t)B * Mq * Hq * D, nl = (size_t)B * Hq * Mq, row = (size_t)Hkv * D;
  cli_env *e0 = &r->envs[0];
  r->q = cli_buffer(e0, nq * qes, "q");
  r->k = r->q ? cli_buffer(e0, (size_t)B * N * row * kes, "k") : NULL;
  r->v = r->k ? cli_buffer(e0, (size_t)B * N * row * kes, "v") : NULL;
  r->o1 = r->v ? cli_buffer(e0, nq * qes, "o (one device)") : NULL;
  r->l1 = r->o1 ? cli_buffer(e0, nl * 4, "lse (one device)") : NULL;
  r->om = r->l1 ? cli_buffer(e0, nq * qes, "o (split)") : NULL;
  r->lm = r->om ? cli_buffer(e0, nl * 4, "lse (split)") : NULL;
  const uint64_t seed = (uint64_t)o->seed * 16;
  if (!r->lm || !cli_fill_random(e0, r->q, r->qdt, 0, nq, seed + 1, 1.0f) ||
      !cli_fill_random(e0, r->k, r->kvdt, 0, (size_t)B * N * row, seed + 2, 1.0f) ||
      !cli_fill_random(e0, r->v, r->kvdt, 0, (size_t)B * N * row, seed + 3, 1.0f) ||
      clFinish(e0->queue) != CL_SUCCESS)
    return false;
  clattn_decode_params *p = &r->one;
  p->q = clattn_tensor_4d(r->q, 0, r->qdt, B, Mq, Hq, D);
  p->k = clattn_tensor_4d(r->k, 0, r->kvdt, B, N, Hkv, D);
  p->v = clattn_tensor_4d(r->v, 0, r->kvdt, B, N, Hkv, D);
  p->o = clattn_tensor_4d(r->o1, 0, r->qdt, B, Mq, Hq, D);
  p->maybe_lse = clattn_tensor_3d(r->l1, 0, CLATTN_F32, B, Hq, Mq);
  p->causal = Mq > 1;

  /* shard j: keys [N j / n, N (j+1) / n) of every sequence, in its own buffers */
  const size_t pes = clattn_dtype_size(r->pdt);
  void *host = malloc(((size_t)(N / r->n + 1) * row * kes) > nq * qes ? (size_t)(N / r->n + 1) * row * kes
                                                                      : nq * qes);
  if (!host) return false;
  bool ok = true;
  for (int j = 0; ok && j < r->n; j++) {
    cli_env *e = &r->envs[r->env_of[j]];
    const int s = (int)((int64_t)N * j / r->n), len = (int)((int64_t)N * (j + 1) / r->n) - s;
    const size_t part = (size_t)len * row * kes;
    r->sq[j] = cli_buffer(e, nq * qes, "shard q");
    r->sk[j] = r->sq[j] ? cli_buffer(e, (size_t)B * part, "shard k") : NULL;
    r->sv[j] = r->sk[j] ? cli_buffer(e, (size_t)B * part, "shard v") : NULL;
    r->so[j] = r->sv[j] ? cli_buffer(e, nq * pes, "shard partial o") : NULL;
    r->sl[j] = r->so[j] ? cli_buffer(e, nl * 4, "shard partial lse") : NULL;
    ok = r->sl[j] && copy_to(r, r->q, 0, e, r->sq[j], 0, nq * qes, host);
    for (int b = 0; ok && b < B; b++) {
      const size_t src = ((size_t)b * N + s) * row * kes;
      ok = copy_to(r, r->k, src, e, r->sk[j], (size_t)b * part, part, host) &&
           copy_to(r, r->v, src, e, r->sv[j], (size_t)b * part, part, host);
    }
    clattn_decode_shard *sh = &r->shards[j];
    sh->ctx = e->ctx;
    sh->queue = e->queue;
    sh->params.q = clattn_tensor_4d(r->sq[j], 0, r->qdt, B, Mq, Hq, D);
    sh->params.k = clattn_tensor_4d(r->sk[j], 0, r->kvdt, B, len, Hkv, D);
    sh->params.v = clattn_tensor_4d(r->sv[j], 0, r->kvdt, B, len, Hkv, D);
    sh->params.o = clattn_tensor_4d(r->so[j], 0, r->pdt, B, Mq, Hq, D);
    sh->params.maybe_lse = clattn_tensor_3d(r->sl[j], 0, CLATTN_F32, B, Hq, Mq);
    sh->params.causal = Mq > 1 && j == r->n - 1; /* only where the sequences end */
  }
  free(host);
  for (int i = 0; ok && i < r->nenv; i++) ok = clFinish(r->envs[i].queue) == CL_SUCCESS;
  r->mp.n = r->n;
  r->mp.shards = r->shards;
  r->mp.o = clattn_tensor_4d(r->om, 0, r->qdt, B, Mq, Hq, D);
  r->mp.maybe_lse = clattn_tensor_3d(r->lm, 0, CLATTN_F32, B, Hq, Mq);
  return ok;
}

static void split_teardown(srun *r) {
  cl_mem all[] = {r->q, r->k, r->v, r->o1, r->l1, r->om, r->lm};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  for (int j = 0; j < r->n; j++) {
    cl_mem s[] = {r->sq[j], r->sk[j], r->sv[j], r->so[j], r->sl[j]};
    for (int i = 0; i < 5; i++)
      if (s[i]) clReleaseMemObject(s[i]);
  }
  for (int i = 0; i < r->nenv; i++) cli_close(&r->envs[i]);
}

/* Wall-clock ms per call, median over repeats, every queue finished. */
static double time_wall(srun *r, bool multi) {
  const opts *o = r->o;
  double *v = malloc(sizeof(double) * (size_t)o->repeat);
  if (!v) return NAN;
  int got = 0;
  for (int i = 0; i < o->warmup + o->repeat; i++) {
    const double t0 = cli_now();
    clattn_status s = multi ? clattn_decode_multi(&r->mp, 0, NULL, NULL)
                            : clattn_decode(r->envs[0].ctx, r->envs[0].queue, &r->one, 0, NULL, NULL);
    if (s != CLATTN_SUCCESS) {
      cli_fail(multi ? "clattn_decode_multi" : "clattn_decode", s);
      got = 0;
      break;
    }
    for (int e = 0; e < (multi ? r->nenv : 1); e++) clFinish(r->envs[e].queue);
    if (i >= o->warmup) v[got++] = (cli_now() - t0) * 1e3;
  }
  const double med = got ? cli_median(v, got) : NAN;
  free(v);
  return med;
}

static int run_split(const opts *o) {
  srun *r = calloc(1, sizeof *r);
  if (!r) return 1;
  r->o = o;
  int g;
  if (!cli_dtype(o->dtype, &r->qdt, &g) || r->qdt > CLATTN_BF16 ||
      !cli_dtype(o->kv_dtype ? o->kv_dtype : o->dtype, &r->kvdt, &g) || r->kvdt > CLATTN_BF16 ||
      !cli_dtype(o->partial_dtype, &r->pdt, &g) || r->pdt > CLATTN_BF16) {
    fprintf(stderr, "clattn run merge: --dtype, --kv-dtype, --partial-dtype: use f32, f16 or bf16 "
                    "(quantized caches: see `run decode`)\n");
    free(r);
    return 2;
  }
  /* the device list: equal names share one context unless told otherwise */
  char list[256];
  snprintf(list, sizeof list, "%s", o->split_devices);
  char *names[MAX_SHARDS];
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    if (r->n == MAX_SHARDS) {
      fprintf(stderr, "clattn run merge: --split-devices lists more than %d devices\n", MAX_SHARDS);
      free(r);
      return 2;
    }
    names[r->n++] = tok;
  }
  if (r->n < 1 || o->ctx < r->n) {
    fprintf(stderr, "clattn run merge: --split-devices needs 1..%d devices and --ctx >= their count\n",
            MAX_SHARDS);
    free(r);
    return 2;
  }
  int rc = 1;
  timer t;
  memset(&t, 0, sizeof t);
  for (int j = 0; j < r->n; j++) {
    int same = -1;
    for (int i = 0; i < j && !o->separate_contexts; i++)
      if (strcmp(names[i], names[j]) == 0) same = r->env_of[i];
    if (same >= 0) {
      r->env_of[j] = same;
      continue;
    }
    if (!cli_open(names[j], &r->envs[r->nenv])) goto done;
    r->env_of[j] = r->nenv++;
  }
  const bool one_queue = r->nenv == 1;
  if (!o->json) {
    printf("split decode: B=%d Mq=%d Hq=%d Hkv=%d D=%d ctx=%d, q/o %s, K/V %s, partials %s, %d "
           "shards of ~%d keys\n",
           o->batch, o->m, o->heads, o->kv_heads, o->head_dim, o->ctx, o->dtype,
           clattn_dtype_name(r->kvdt), o->partial_dtype, r->n, o->ctx / r->n);
    for (int j = 0; j < r->n; j++)
      printf("  shard %d: device %s: %s%s\n", j, names[j], r->envs[r->env_of[j]].profile.name,
             r->env_of[j] == r->env_of[0] ? "" : " (own context: partial read back through the host)");
  }
  if (!split_setup(r) || !timer_init(&t, &r->envs[0], o->no_flush)) goto done;

  clattn_status s = clattn_decode(r->envs[0].ctx, r->envs[0].queue, &r->one, 0, NULL, NULL);
  if (s != CLATTN_SUCCESS) {
    cli_fail("clattn_decode", s);
    goto done;
  }
  s = clattn_decode_multi(&r->mp, 0, NULL, NULL);
  if (s != CLATTN_SUCCESS) {
    cli_fail("clattn_decode_multi", s);
    goto done;
  }
  for (int i = 0; i < r->nenv; i++) clFinish(r->envs[i].queue);

  const size_t nq = (size_t)o->batch * o->m * o->heads * o->head_dim;
  const size_t nl = (size_t)o->batch * o->heads * o->m;
  size_t bad = 0;
  double err_o = 0, err_l = 0;
  double *a = malloc(sizeof(double) * nq), *b = malloc(sizeof(double) * nq);
  bool ok = a && b && cli_read(&r->envs[0], r->o1, r->qdt, 0, nq, a) &&
            cli_read(&r->envs[0], r->om, r->qdt, 0, nq, b);
  /* both round o to its dtype; the split also stores its partials */
  const double tol = 2 * o_tol(r->qdt) + o_tol(r->pdt);
  if (ok) err_o = max_err(b, a, nq, tol, &bad);
  ok = ok && cli_read(&r->envs[0], r->l1, CLATTN_F32, 0, nl, a) &&
       cli_read(&r->envs[0], r->lm, CLATTN_F32, 0, nl, b);
  if (ok) err_l = max_err(b, a, nl, 2e-4, &bad);
  free(a), free(b);
  if (!ok) goto done;

  const double kv_bytes = 2.0 * o->batch * (double)o->ctx * o->kv_heads * o->head_dim *
                          (double)clattn_dtype_size(r->kvdt);
  const double w1 = time_wall(r, false), wm = time_wall(r, true);
  const double d1 = time_device(&t, enq_single, r, o, "one device");
  const double dm = one_queue ? time_device(&t, enq_multi, r, o, "split") : NAN;
  if (isnan(w1) || isnan(wm) || isnan(d1)) goto done;
  if (!o->json) {
    printf("check: split vs one device: max abs error %.3g (o), %.3g (lse); tolerance %.3g: %s\n",
           err_o, err_l, tol, bad ? "FAIL" : "PASS");
    printf("one device: %.4f ms device (%.1f GB/s of K/V), %.4f ms wall per call\n", d1,
           kv_bytes / (d1 * 1e6), w1);
    if (one_queue)
      printf("split:      %.4f ms device (%.1f GB/s of K/V), %.4f ms wall per call (%d decodes + merge "
             "on one queue)\n",
             dm, kv_bytes / (dm * 1e6), wm, r->n);
    else
      printf("split:      %.4f ms wall per call (%.1f GB/s of K/V, devices in parallel)\n", wm,
             kv_bytes / (wm * 1e6));
  } else {
    printf("{\"op\":\"split_decode\",\"shards\":%d,\"contexts\":%d,\"batch\":%d,\"q_len\":%d,"
           "\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"ctx\":%d,\"dtype\":\"%s\","
           "\"single_ms\":%.6f,\"single_wall_ms\":%.6f,\"split_wall_ms\":%.6f",
           r->n, r->nenv, o->batch, o->m, o->heads, o->kv_heads, o->head_dim, o->ctx, o->dtype, d1,
           w1, wm);
    if (one_queue) printf(",\"split_ms\":%.6f", dm);
    printf(",\"check\":\"%s\",\"max_err\":%.4g}\n", bad ? "fail" : "pass", err_o);
  }
  rc = bad ? 1 : 0;
done:
  timer_free(&t);
  split_teardown(r);
  free(r);
  return rc;
}

/* ------------------------------------------------------------------ the command */

static const char *usage =
    "clattn run merge [flags]\n"
    "\n"
    "Merging attention states on synthetic data: --n partial states (random o_i in\n"
    "--dtype, random lse_i) merged into o (--out-dtype) and lse; checked against the\n"
    "double-precision reference; prints the median device time (L2 flushed) and the\n"
    "bandwidth: bytes of partials read + outputs written / time. --backward also runs\n"
    "and times the backward.\n"
    "\n"
    "With --split-devices LIST: one decode over a --ctx long KV cache, cut into equal\n"
    "sequence ranges, one per listed device (clattn_decode_multi), against a single\n"
    "decode on the first device; prints both times. A device listed twice holds two\n"
    "ranges in one context (--separate-contexts: one context each, through the host).\n"
    "Exit status: 0 ok, 1 check failed or runtime error, 2 bad usage.\n"
    "\n"
    "examples: clattn run merge --n 8 --batch 64 --m 1 --heads 32 --head-dim 128 --dtype f32\n"
    "          clattn run merge --split-devices 0,0 --batch 4 --heads 32 --kv-heads 8 "
    "--head-dim 128 --ctx 32768";

int cli_run_merge(int argc, char **argv) {
  opts o = {.n = 8, .batch = 64, .m = 1, .heads = 32, .kv_heads = 8, .head_dim = 128,
            .ctx = 32768, .repeat = 20, .warmup = 3, .seed = 1, .dtype = "f32",
            .partial_dtype = "f32"};
  cli_flag flags[] = {
      {"n", FLAG_INT, &o.n, "partial states to merge"},
      {"batch", FLAG_INT, &o.batch, "sequences B"},
      {"m", FLAG_INT, &o.m, "queries per sequence M (split decode: Mq, causal when > 1)"},
      {"heads", FLAG_INT, &o.heads, "heads H (split decode: query heads Hq)"},
      {"kv-heads", FLAG_INT, &o.kv_heads, "split decode: K/V heads Hkv"},
      {"head-dim", FLAG_INT, &o.head_dim, "head dim D"},
      {"ctx", FLAG_INT, &o.ctx, "split decode: keys per sequence"},
      {"dtype", FLAG_STR, &o.dtype, "parts' dtype (split decode: q/o): f32, f16, bf16"},
      {"out-dtype", FLAG_STR, &o.out_dtype, "merged o's dtype (default: --dtype)"},
      {"kv-dtype", FLAG_STR, &o.kv_dtype, "split decode: K/V dtype (default: --dtype)"},
      {"partial-dtype", FLAG_STR, &o.partial_dtype, "split decode: the shards' partial o dtype"},
      {"stacked", FLAG_BOOL, &o.stacked, "parts stacked in one buffer (one launch for any n)"},
      {"no-lse", FLAG_BOOL, &o.no_lse, "do not write the merged lse"},
      {"lse", FLAG_BOOL, &o.lse, "write the merged lse (the default; `run decode` spelling)"},
      {"backward", FLAG_BOOL, &o.backward, "also check and time clattn_merge_backward"},
      {"split-devices", FLAG_STR, &o.split_devices,
       "comma-separated devices (index or name) for a split decode, e.g. 0,1 or 0,0"},
      {"devices", FLAG_STR, &o.split_devices, "the same as --split-devices (`run decode --devices`)"},
      {"q-len", FLAG_INT, &o.m, "the same as --m (`run decode` spelling)"},
      {"separate-contexts", FLAG_BOOL, &o.separate_contexts,
       "split decode: one context per listed device even when listed twice"},
      {"device", FLAG_STR, &o.device, "device index or name substring (default $CLATTN_DEVICE)"},
      {"repeat", FLAG_INT, &o.repeat, "timed runs (the median is reported)"},
      {"warmup", FLAG_INT, &o.warmup, "untimed runs first"},
      {"seed", FLAG_INT, &o.seed, "data seed"},
      {"no-check", FLAG_BOOL, &o.no_check, "skip the correctness check"},
      {"no-flush", FLAG_BOOL, &o.no_flush, "keep the L2 cache warm between timed runs"},
      {"json", FLAG_BOOL, &o.json, "print one JSON line instead of the report"},
  };
  int rc = cli_parse(usage, argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
  if (rc) return rc == 1 ? 0 : 2;
  const struct {
    const char *name;
    int v, min;
  } lim[] = {{"n", o.n, 1},           {"batch", o.batch, 1},     {"m", o.m, 1},
             {"heads", o.heads, 1},   {"kv-heads", o.kv_heads, 1}, {"head-dim", o.head_dim, 1},
             {"ctx", o.ctx, 1},       {"repeat", o.repeat, 1},   {"warmup", o.warmup, 0}};
  for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
    if (lim[i].v < lim[i].min) {
      fprintf(stderr, "clattn run merge: --%s is %d, must be at least %d\n", lim[i].name, lim[i].v,
              lim[i].min);
      return 2;
    }
  return o.split_devices ? run_split(&o) : run_merge(&o);
}

static void case_describe(const void *shape, char *buf, size_t n) {
  const cli_merge_shape *s = shape;
  snprintf(buf, n, "merge n=%d B=%d H=%d D=%d %s", s->n, s->batch, s->heads, s->head_dim, s->dtype);
}

const cli_case_ops cli_merge_cases = {case_new, case_check, case_time, case_free, case_describe, NULL};
