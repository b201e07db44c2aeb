/* `clattn run quant`: K/V cache quantization on synthetic rows. Quantizes
 * [rows, heads, head_dim] floats into an int4 / fp8 cache (clattn_kv_quantize,
 * the append kernel), dequantizes it back (clattn_kv_dequantize), checks a
 * sample of rows against the host reference codecs (tests/ref_quant.h: the
 * cache words bit for bit, the round trip within the documented bound) and
 * reports each kernel's median device time and bandwidth (bytes read +
 * written). */
#include "cli.h"
#include "ref_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_ROWS 2048 /* rows (of all heads) sampled by the check */

static const char *usage =
    "usage: clattn run quant [flags]\n"
    "Quantizes synthetic K/V rows into an int4 or fp8 cache and back, checks the round\n"
    "trip against the host reference and reports the time and bandwidth of both kernels.";

typedef struct opts {
  int rows, heads, head_dim, repeat, warmup, seed;
  const char *kv_dtype, *dtype, *device;
  bool json, no_check;
} opts;

typedef struct run {
  opts o;
  cli_env env;
  bool borrowed_env; /* the tuner's: not closed with the run */
  clattn_dtype kvdt, fdt;
  int groups, X;
  cl_mem src, cache, ss, out;
  clattn_kv_quantize_params q;
  clattn_kv_dequantize_params d;
} run;

/* ------------------------------------------------------------------ timing */

typedef clattn_status (*op_fn)(run *r, cl_event *e);

static clattn_status do_quantize(run *r, cl_event *e) {
  return clattn_kv_quantize(r->env.ctx, r->env.queue, &r->q, 0, NULL, e);
}
static clattn_status do_dequantize(run *r, cl_event *e) {
  return clattn_kv_dequantize(r->env.ctx, r->env.queue, &r->d, 0, NULL, e);
}

typedef struct op_call {
  run *r;
  op_fn op;
} op_call;

static clattn_status call_op(void *priv, cl_event *done) {
  const op_call *c = priv;
  return c->op(c->r, done);
}

/* Median kernel time (ms: the event's own START..END) of `repeat` runs
 * after `warmup`, through cli_time_median unheld and unflushed; NAN on
 * failure. */
static double time_op(run *r, op_fn op, const char *label) {
  op_call c = {r, op};
  double own = NAN;
  const double ms = cli_time_median(&r->env, NULL, 0, r->o.warmup, r->o.repeat, false, call_op, &c,
                                    label, &own);
  return isnan(ms) ? NAN : own;
}

/* ------------------------------------------------------------------ check */

typedef struct check {
  size_t rows, bad_words, bad_values, over_bound;
  double worst_ratio; /* max |x - x'| / bound */
  double max_err;
  char first[200];
} check;

/* Checks sampled rows: the device's words against the reference quantizer,
 * the round trip against the documented bound, the output against the
 * reference dequantization (rounded to the output dtype). */
static bool run_check(run *r, check *c) {
  memset(c, 0, sizeof *c);
  const int H = r->o.heads, D = r->o.head_dim, X = r->X;
  const bool fp8 = r->kvdt != CLATTN_INT4, fnuz = r->kvdt == CLATTN_FP8_FNUZ;
  const size_t nrows = (size_t)r->o.rows;
  const size_t step = nrows > CHECK_ROWS ? nrows / CHECK_ROWS : 1;
  double *x = malloc(sizeof(double) * H * D), *y = malloc(sizeof(double) * H * D);
  double *ref = malloc(sizeof(double) * D);
  float *xf = malloc(sizeof(float) * D);
  uint32_t *words = malloc(sizeof(uint32_t) * H * X), *want = malloc(sizeof(uint32_t) * X);
  uint32_t *ss = malloc(sizeof(uint32_t) * H);
  bool ok = x && y && ref && xf && words && want && ss;
  for (size_t row = 0; ok && row < nrows; row += step) {
    const size_t e0 = row * H * D;
    ok = cli_read(&r->env, r->src, r->fdt, e0, (size_t)H * D, x) &&
         cli_read(&r->env, r->out, r->fdt, e0, (size_t)H * D, y) &&
         clEnqueueReadBuffer(r->env.queue, r->cache, CL_TRUE, row * H * X * 4, (size_t)H * X * 4,
                             words, 0, NULL, NULL) == CL_SUCCESS &&
         (!fp8 || clEnqueueReadBuffer(r->env.queue, r->ss, CL_TRUE, row * H * 4, (size_t)H * 4, ss,
                                      0, NULL, NULL) == CL_SUCCESS);
    if (!ok) {
      fprintf(stderr, "clattn: reading buffers back for the check failed\n");
      break;
    }
    c->rows++;
    for (int h = 0; h < H; h++) {
      const uint32_t *w = words + (size_t)h * X;
      for (int d = 0; d < D; d++) xf[d] = (float)x[h * D + d];
      uint32_t want_ss = 0;
      if (fp8) ref_fp8_quantize_row(xf, D, fnuz, want, &want_ss);
      else ref_int4_quantize_row(xf, D, r->groups, want);
      for (int k = 0; k < X; k++) c->bad_words += w[k] != want[k];
      if (fp8) c->bad_words += ss[h] != want_ss;
      if (fp8) ref_fp8_dequantize_row(w, ss[h], D, fnuz, ref);
      else ref_int4_dequantize_row(w, D, r->groups, ref);
      for (int d = 0; d < D; d++) {
        double scale, shift;
        ref_scale_shift(fp8 ? ss[h] : w[d / (D / r->groups)], &scale, &shift);
        const double xv = x[h * D + d], got = y[h * D + d];
        /* the output's own rounding comes on top of the round trip's bound */
        const double out_ulp = r->fdt == CLATTN_F32 ? 0x1p-23 : r->fdt == CLATTN_F16 ? 0x1p-10 : 0x1p-7;
        const double bound = (fp8 ? ref_fp8_bound(xv, scale, shift, fnuz)
                                  : ref_int4_bound(xv, scale, shift)) +
                             out_ulp * fabs(ref[d]) + 0x1p-24;
        const double err = fabs(got - xv);
        if (err > c->max_err) c->max_err = err;
        if (bound > 0 && err / bound > c->worst_ratio) c->worst_ratio = err / bound;
        const bool bad_v = !(fabs(got - ref[d]) <= out_ulp * fabs(ref[d]) + 0x1p-24);
        const bool over = !(err <= bound);
        c->bad_values += bad_v;
        c->over_bound += over;
        if ((bad_v || over) && !c->first[0])
          snprintf(c->first, sizeof c->first,
                   "row %zu head %d elt %d: x %.7g read back %.7g (reference %.7g, bound %.3g)",
                   row, h, d, xv, got, ref[d], bound);
      }
    }
  }
  free(x);
  free(y);
  free(ref);
  free(xf);
  free(words);
  free(want);
  free(ss);
  return ok;
}

/* ------------------------------------------------------------------ main */

static void release(run *r) {
  if (r->src) clReleaseMemObject(r->src);
  if (r->cache) clReleaseMemObject(r->cache);
  if (r->ss) clReleaseMemObject(r->ss);
  if (r->out) clReleaseMemObject(r->out);
  if (!r->borrowed_env) cli_close(&r->env);
  free(r);
}

/* The rows, the cache and the params of both operations; false after
 * printing the error. */
static bool setup(run *r) {
  const opts *o = &r->o;
  const bool fp8 = r->kvdt != CLATTN_INT4;
  const int N = o->rows, H = o->heads, D = o->head_dim;
  const size_t n = (size_t)N * H * D, fsz = clattn_dtype_size(r->fdt);
  r->src = cli_buffer(&r->env, n * fsz, "the rows");
  r->out = cli_buffer(&r->env, n * fsz, "the output");
  r->cache = cli_buffer(&r->env, (size_t)N * H * r->X * 4, "the cache");
  if (fp8) r->ss = cli_buffer(&r->env, (size_t)N * H * 4, "the scale-shift words");
  if (!r->src || !r->out || !r->cache || (fp8 && !r->ss) ||
      !cli_fill_random(&r->env, r->src, r->fdt, 0, n, (uint64_t)o->seed, 1.0f))
    return false;
  r->q.src = clattn_tensor_4d(r->src, 0, r->fdt, 1, N, H, D);
  r->q.cache = clattn_tensor_4d(r->cache, 0, r->kvdt, 1, N, H, r->X);
  if (fp8) r->q.maybe_scale_shift = clattn_tensor_3d(r->ss, 0, CLATTN_I32, 1, N, H);
  r->q.kv_groups = r->groups;
  r->d.cache = r->q.cache;
  r->d.maybe_scale_shift = r->q.maybe_scale_shift;
  r->d.out = clattn_tensor_4d(r->out, 0, r->fdt, 1, N, H, D);
  r->d.kv_groups = r->groups;
  return true;
}

int cli_run_quant(int argc, char **argv) {
  run *r = calloc(1, sizeof *r);
  if (!r) return 1;
  opts *o = &r->o;
  *o = (opts){.rows = 65536, .heads = 8, .head_dim = 128, .repeat = 20, .warmup = 3, .seed = 1,
              .kv_dtype = "int4", .dtype = "f16"};
  cli_flag flags[] = {
      {"kv-dtype", FLAG_STR, &o->kv_dtype, "cache dtype: int4, int4g2, int4g4, int4g8, fp8, fp8fnuz"},
      {"dtype", FLAG_STR, &o->dtype, "dtype of the rows quantized and read back: f32, f16, bf16"},
      {"rows", FLAG_INT, &o->rows, "cache positions (rows of every head)"},
      {"heads", FLAG_INT, &o->heads, "K/V heads Hkv"},
      {"head-dim", FLAG_INT, &o->head_dim, "head dim D (a multiple of 8)"},
      {"device", FLAG_STR, &o->device, "device index or name substring (default $CLATTN_DEVICE)"},
      {"repeat", FLAG_INT, &o->repeat, "timed runs (the median is reported)"},
      {"warmup", FLAG_INT, &o->warmup, "untimed runs first"},
      {"seed", FLAG_INT, &o->seed, "data seed"},
      {"no-check", FLAG_BOOL, &o->no_check, "skip the check against the host reference"},
      {"json", FLAG_BOOL, &o->json, "print one JSON line instead of the report"},
  };
  int rc = cli_parse(usage, argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
  if (rc) {
    free(r);
    return rc == 1 ? 0 : 2;
  }
  if (o->rows < 1 || o->heads < 1 || o->head_dim < 8 || o->head_dim % 8 || o->repeat < 1 ||
      o->warmup < 0) {
    fprintf(stderr, "clattn run quant: --rows, --heads, --repeat must be >= 1, --warmup >= 0, "
                    "--head-dim a positive multiple of 8\n");
    free(r);
    return 2;
  }
  int g = 1;
  if (!cli_dtype(o->kv_dtype, &r->kvdt, &r->groups) ||
      (r->kvdt != CLATTN_INT4 && r->kvdt != CLATTN_FP8 && r->kvdt != CLATTN_FP8_FNUZ)) {
    fprintf(stderr, "clattn run quant: --kv-dtype %s: use int4, int4g2, int4g4, int4g8, fp8 or "
                    "fp8fnuz\n", o->kv_dtype);
    free(r);
    return 2;
  }
  if (!cli_dtype(o->dtype, &r->fdt, &g) || r->fdt > CLATTN_BF16) {
    fprintf(stderr, "clattn run quant: --dtype %s: use f32, f16 or bf16\n", o->dtype);
    free(r);
    return 2;
  }
  r->X = (int)clattn_kv_row_size(r->kvdt, o->head_dim, r->groups);
  if (r->X == 0) {
    fprintf(stderr, "clattn run quant: --head-dim %d does not hold %d int4 groups of whole words\n",
            o->head_dim, r->groups);
    free(r);
    return 2;
  }
  if (!cli_open(o->device, &r->env)) {
    free(r);
    return 1;
  }
  const bool fp8 = r->kvdt != CLATTN_INT4, human = !o->json;
  const int N = o->rows, H = o->heads, D = o->head_dim;
  const size_t n = (size_t)N * H * D, fsz = clattn_dtype_size(r->fdt);
  if (!setup(r)) {
    release(r);
    return 1;
  }

  if (human)
    printf("device: %s (%s), arch %s\nquant: %s cache, %d rows x %d heads x D=%d, %s rows\n",
           r->env.profile.name, r->env.profile.platform, r->env.profile.arch, o->kv_dtype, N, H, D,
           o->dtype);
  const double tq = time_op(r, do_quantize, "quantize");
  const double td = isnan(tq) ? NAN : time_op(r, do_dequantize, "dequantize");
  if (isnan(tq) || isnan(td)) {
    release(r);
    return 1;
  }
  /* bytes moved: the float rows, the cache words and (fp8) the scale-shift words */
  const double cache_bytes = (double)N * H * (4.0 * r->X + (fp8 ? 4.0 : 0.0));
  const double float_bytes = (double)n * (double)fsz;
  const double gq = (cache_bytes + float_bytes) / (tq * 1e6);
  const double gd = (cache_bytes + float_bytes) / (td * 1e6);

  check c;
  memset(&c, 0, sizeof c);
  bool failed = false;
  if (!o->no_check) {
    clFinish(r->env.queue);
    if (!run_check(r, &c)) {
      release(r);
      return 1;
    }
    failed = c.bad_words || c.bad_values || c.over_bound;
  }
  if (human) {
    if (o->no_check) {
      printf("check: skipped (--no-check)\n");
    } else {
      printf("check: %zu sampled rows x %d heads: %zu words differ from the reference "
             "quantizer, %zu values from its dequantization, %zu beyond the round-trip bound: %s\n",
             c.rows, H, c.bad_words, c.bad_values, c.over_bound, failed ? "FAIL" : "PASS");
      printf("round trip: max abs error %.4g, worst error / bound %.3f\n", c.max_err,
             c.worst_ratio);
      if (c.first[0]) printf("  first: %s\n", c.first);
    }
    printf("quantize:   %.4f ms (median of %d), %.1f GB/s (%.1f MB moved)\n", tq, o->repeat, gq,
           (cache_bytes + float_bytes) / 1e6);
    printf("dequantize: %.4f ms (median of %d), %.1f GB/s\n", td, o->repeat, gd);
  } else {
    printf("{\"op\":\"quant\",\"device\":\"%s\",\"kv_dtype\":\"%s\",\"dtype\":\"%s\",\"rows\":%d,"
           "\"heads\":%d,\"head_dim\":%d,\"quantize_ms\":%.6f,\"quantize_gbps\":%.2f,"
           "\"dequantize_ms\":%.6f,\"dequantize_gbps\":%.2f,\"bytes\":%.0f",
           r->env.profile.name, o->kv_dtype, o->dtype, N, H, D, tq, gq, td, gd,
           cache_bytes + float_bytes);
    if (!o->no_check)
      printf(",\"max_err\":%.4g,\"worst_ratio\":%.4f,\"check\":\"%s\"", c.max_err, c.worst_ratio,
             failed ? "fail" : "pass");
    printf("}\n");
  }
  release(r);
  return failed ? 1 : 0;
}

/* ------------------------------------------------------------------ the tuner's cases (tune.c) */

typedef struct cli_quant_case {
  run *r;
} cli_quant_case;

static void case_free(void *c);

static void *case_new(cli_env *env, const void *shape) {
  const cli_quant_shape *sh = shape;
  cli_quant_case *c = calloc(1, sizeof *c);
  run *r = c ? calloc(1, sizeof *r) : NULL;
  if (!r) return free(c), NULL;
  c->r = r;
  r->o = (opts){.rows = sh->rows, .heads = sh->heads, .head_dim = sh->head_dim, .seed = 1,
                .kv_dtype = sh->kv_dtype, .dtype = sh->dtype};
  r->env = *env;
  r->borrowed_env = true;
  int g = 1;
  const bool dt_ok = cli_dtype(sh->kv_dtype, &r->kvdt, &r->groups) && r->kvdt >= CLATTN_INT4 &&
                     cli_dtype(sh->dtype, &r->fdt, &g) && r->fdt <= CLATTN_BF16;
  r->X = dt_ok ? (int)clattn_kv_row_size(r->kvdt, sh->head_dim, r->groups) : 0;
  if (!r->X || !setup(r)) {
    if (!r->X) fprintf(stderr, "clattn tune: bad quant shape\n");
    case_free(c);
    return NULL;
  }
  return c;
}

static bool case_check(void *cv, char *why, size_t n) {
  cli_quant_case *c = cv;
  run *r = c->r;
  clattn_status s = do_quantize(r, NULL);
  if (s == CLATTN_SUCCESS) s = do_dequantize(r, NULL);
  if (s == CLATTN_SUCCESS && clFinish(r->env.queue) != CL_SUCCESS) s = CLATTN_OPENCL_ERROR;
  if (s != CLATTN_SUCCESS)
    return snprintf(why, n, "%s: %s", clattn_status_string(s), clattn_last_error()), false;
  check k;
  if (!run_check(r, &k)) return snprintf(why, n, "the check could not run"), false;
  const bool ok = !k.bad_words && !k.bad_values && !k.over_bound;
  if (!ok) snprintf(why, n, "%zu words, %zu values differ; first %s", k.bad_words, k.bad_values, k.first);
  return ok;
}

static double case_time(void *cv, int warmup, int repeat) {
  cli_quant_case *c = cv;
  run *r = c->r;
  r->o.warmup = warmup;
  r->o.repeat = repeat;
  const double tq = time_op(r, do_quantize, "quantize");
  return isnan(tq) ? NAN : tq + time_op(r, do_dequantize, "dequantize");
}

static void case_free(void *cv) {
  cli_quant_case *c = cv;
  if (!c) return;
  if (c->r) release(c->r);
  free(c);
}

static void case_describe(const void *shape, char *buf, size_t n) {
  const cli_quant_shape *s = shape;
  snprintf(buf, n, "quantize+dequantize %d rows x %d heads D=%d %s/%s", s->rows, s->heads, s->head_dim,
           s->dtype, s->kv_dtype);
}

const cli_case_ops cli_quant_cases = {case_new, case_check, case_time, case_free, case_describe, NULL};
