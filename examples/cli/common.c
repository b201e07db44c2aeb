/* The clattn tool's shared plumbing: device opening, flag parsing, dtype
 * names, timing helpers, progress lines, and the synthetic-data kernels
 * (built from the small OpenCL source below, not part of the library). */
#include "cli.h"
#include "ref_quant.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ device */

bool cli_open(const char *selector, cli_env *env) {
  memset(env, 0, sizeof *env);
  const char *sel = (selector && *selector) ? selector : getenv("CLATTN_DEVICE");
  /* no log callback: the library logs to stderr under CLATTN_LOG=info|debug */
  clattn_status s = clattn_context_create_selected(sel, NULL, &env->ctx);
  if (s != CLATTN_SUCCESS) {
    fprintf(stderr, "clattn: cannot open device%s%s%s: %s: %s (see `clattn devices`)\n",
            sel ? " \"" : "", sel ? sel : "", sel ? "\"" : "", clattn_status_string(s),
            clattn_last_error());
    return false;
  }
  clattn_context_profile(env->ctx, &env->profile);
  cl_int err = CL_SUCCESS;
  env->queue = clCreateCommandQueue(clattn_context_cl(env->ctx), clattn_context_device(env->ctx),
                                    CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clattn: clCreateCommandQueue failed (%d) on %s\n", (int)err, env->profile.name);
    clattn_context_release(&env->ctx);
    return false;
  }
  return true;
}

static cl_program fill_program;
static cl_context fill_program_ctx;

void cli_close(cli_env *env) {
  if (fill_program && fill_program_ctx == clattn_context_cl(env->ctx)) {
    clReleaseProgram(fill_program);
    fill_program = NULL;
    fill_program_ctx = NULL;
  }
  if (env->queue) clReleaseCommandQueue(env->queue);
  env->queue = NULL;
  clattn_context_release(&env->ctx);
}

int cli_fail(const char *what, clattn_status s) {
  fprintf(stderr, "clattn: %s: %s: %s\n", what, clattn_status_string(s), clattn_last_error());
  return 1;
}

cl_mem cli_buffer(cli_env *env, size_t bytes, const char *what) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(clattn_context_cl(env->ctx), CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL,
                            &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clattn: cannot allocate %s (%.1f MiB): clCreateBuffer error %d\n", what,
            (double)bytes / 1048576.0, (int)err);
    return NULL;
  }
  return m;
}

/* ------------------------------------------------------------------ flags */

/* The command's name for messages: the usage's first line up to its first
 * " [", " <" or " -" ("clattn run decode [flags]" -> "clattn run decode"). */
static void command_name(const char *usage, char *buf, size_t size) {
  if (strncmp(usage, "usage: ", 7) == 0) usage += 7;
  size_t n = strcspn(usage, "\n");
  const char *cuts[] = {" [", " <", " -"};
  for (size_t i = 0; i < 3; i++) {
    const char *c = strstr(usage, cuts[i]);
    if (c && (size_t)(c - usage) < n) n = (size_t)(c - usage);
  }
  if (n >= size) n = size - 1;
  memcpy(buf, usage, n);
  buf[n] = '\0';
}

static void print_help(const char *usage, const cli_flag *flags, int nflags) {
  printf("%s\n", usage);
  if (nflags) printf("\nflags:\n");
  for (int i = 0; i < nflags; i++) {
    const cli_flag *f = &flags[i];
    char left[64], def[96] = "";
    switch (f->type) {
    case FLAG_INT:
      snprintf(left, sizeof left, "--%s N", f->name);
      snprintf(def, sizeof def, " (default %d)", *(int *)f->ptr);
      break;
    case FLAG_DOUBLE:
      snprintf(left, sizeof left, "--%s X", f->name);
      snprintf(def, sizeof def, " (default %g)", *(double *)f->ptr);
      break;
    case FLAG_STR:
      snprintf(left, sizeof left, "--%s S", f->name);
      if (*(const char **)f->ptr) snprintf(def, sizeof def, " (default %s)", *(const char **)f->ptr);
      break;
    case FLAG_BOOL: snprintf(left, sizeof left, "--%s", f->name); break;
    }
    printf("  %-22s %s%s\n", left, f->help ? f->help : "", def);
  }
}

static bool parse_bool(const char *v, bool *out) {
  static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (strcmp(v, yes[i]) == 0) return *out = true, true;
    if (strcmp(v, no[i]) == 0) return *out = false, true;
  }
  return false;
}

int cli_parse(const char *usage, int argc, char **argv, const cli_flag *flags, int nflags) {
  char cmd[128];
  command_name(usage, cmd, sizeof cmd);
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      print_help(usage, flags, nflags);
      return 1;
    }
    if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
      fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", cmd, arg);
      return 2;
    }
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const cli_flag *f = NULL;
    for (int j = 0; j < nflags && !f; j++)
      if (strlen(flags[j].name) == len && strncmp(flags[j].name, name, len) == 0) f = &flags[j];
    if (!f) {
      fprintf(stderr, "%s: unknown flag --%.*s (see --help)\n", cmd, (int)len, name);
      return 2;
    }
    if (f->type == FLAG_BOOL) {
      bool v = true;
      if (eq && !parse_bool(eq + 1, &v)) {
        fprintf(stderr, "%s: --%s takes no value or one of 1/0/true/false, not '%s'\n", cmd,
                f->name, eq + 1);
        return 2;
      }
      *(bool *)f->ptr = v;
      continue;
    }
    const char *val = eq ? eq + 1 : NULL;
    if (!val) {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s: --%s needs a value (see --help)\n", cmd, f->name);
        return 2;
      }
      val = argv[++i];
    }
    char *end = NULL;
    errno = 0;
    if (f->type == FLAG_INT) {
      long v = strtol(val, &end, 10);
      if (!*val || *end || errno || v < -2147483647L || v > 2147483647L) {
        fprintf(stderr, "%s: --%s: '%s' is not an integer\n", cmd, f->name, val);
        return 2;
      }
      *(int *)f->ptr = (int)v;
    } else if (f->type == FLAG_DOUBLE) {
      double v = strtod(val, &end);
      if (!*val || *end || errno) {
        fprintf(stderr, "%s: --%s: '%s' is not a number\n", cmd, f->name, val);
        return 2;
      }
      *(double *)f->ptr = v;
    } else {
      *(const char **)f->ptr = val;
    }
  }
  return 0;
}

bool cli_dtype(const char *name, clattn_dtype *dt, int *groups) {
  static const struct {
    const char *name;
    clattn_dtype dt;
    int groups;
  } names[] = {
      {"f32", CLATTN_F32, 1},  {"f16", CLATTN_F16, 1},    {"bf16", CLATTN_BF16, 1},
      {"int4", CLATTN_INT4, 1}, {"int4g1", CLATTN_INT4, 1}, {"int4g2", CLATTN_INT4, 2},
      {"int4g4", CLATTN_INT4, 4}, {"int4g8", CLATTN_INT4, 8}, {"fp8", CLATTN_FP8, 1},
      {"fp8fnuz", CLATTN_FP8_FNUZ, 1},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (name && strcmp(name, names[i].name) == 0) {
      *dt = names[i].dt;
      if (groups) *groups = names[i].groups;
      return true;
    }
  }
  return false;
}

/* ------------------------------------------------------------------ timing */

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cli_event_ms(cl_event e) {
  cl_ulong t0 = 0, t1 = 0;
  if (!e || clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) != CL_SUCCESS ||
      clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) != CL_SUCCESS)
    return NAN;
  return (double)(t1 - t0) * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_median(double *v, int n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* On a terminal: a "\r" line redrawn at most every 0.1 s. Elsewhere (logs,
 * CI): plain lines every 2 s, and only once the run has taken 2 s. */
static struct {
  double start, last;
  bool active, drawn;
} progress;

void cli_progress(const char *label, int i, int n) {
  const double now = cli_now();
  if (!progress.active) {
    progress.active = true;
    progress.start = now;
    progress.last = 0.0;
  }
  if (isatty(2)) {
    if (now - progress.last < 0.1 && i < n) return;
    fprintf(stderr, "\r[%s] %d/%d", label, i, n);
  } else {
    if (now - progress.start < 2.0 || now - progress.last < 2.0) return;
    fprintf(stderr, "[%s] %d/%d\n", label, i, n);
  }
  fflush(stderr);
  progress.last = now;
  progress.drawn = true;
}

void cli_progress_done(void) {
  if (progress.drawn && isatty(2)) fprintf(stderr, "\r\033[K");
  progress.active = progress.drawn = false;
}

bool cli_read(cli_env *env, cl_mem buf, clattn_dtype dt, size_t off, size_t n, double *out) {
  const size_t es = clattn_dtype_size(dt);
  void *tmp = malloc(n * es + 1);
  if (!tmp) {
    fprintf(stderr, "clattn: out of host memory reading %zu values\n", n);
    return false;
  }
  cl_int err = n ? clEnqueueReadBuffer(env->queue, buf, CL_TRUE, off * es, n * es, tmp, 0, NULL, NULL)
                 : CL_SUCCESS;
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clattn: clEnqueueReadBuffer failed (%d)\n", (int)err);
    free(tmp);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
    case CLATTN_F16: out[i] = ref_half_value(((const uint16_t *)tmp)[i]); break;
    case CLATTN_BF16: out[i] = ref_bf16_value(((const uint16_t *)tmp)[i]); break;
    case CLATTN_F64: out[i] = ((const double *)tmp)[i]; break;
    case CLATTN_I32: out[i] = ((const int32_t *)tmp)[i]; break;
    default: out[i] = ((const float *)tmp)[i]; break;
    }
  }
  free(tmp);
  return true;
}

/* ------------------------------------------------------------------ synthetic data on the device */

/* Every value is a function of (seed, index) only, so a buffer filled in
 * pieces equals one filled at once, and the CLI reads back exactly what
 * the kernels saw. */
static const char *fill_source =
    "ulong mix(ulong z) {\n"
    "  z += 0x9e3779b97f4a7c15UL;\n"
    "  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;\n"
    "  z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;\n"
    "  return z ^ (z >> 31);\n"
    "}\n"
    "ulong hash(ulong seed, ulong i) { return mix(mix(seed) + i); }\n"
    "float normal_at(ulong seed, ulong i) {\n"
    "  const ulong h = hash(seed, i);\n"
    "  const float u1 = ((float)(uint)(h >> 40) + 1.0f) * (1.0f / 16777216.0f);\n"
    "  const float u2 = (float)((uint)(h >> 8) & 0xffffffu) * (1.0f / 16777216.0f);\n"
    "  return sqrt(-2.0f * log(u1)) * cos(6.28318530718f * u2);\n"
    "}\n"
    "__kernel void cli_fill_f32(__global float *p, ulong off, ulong n, ulong seed, float scale) {\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0))\n"
    "    p[off + i] = scale * normal_at(seed, off + i);\n"
    "}\n"
    "__kernel void cli_fill_f16(__global half *p, ulong off, ulong n, ulong seed, float scale) {\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0))\n"
    "    vstore_half_rte(scale * normal_at(seed, off + i), off + i, p);\n"
    "}\n"
    "__kernel void cli_fill_bf16(__global ushort *p, ulong off, ulong n, ulong seed, float scale) {\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
    "    uint u = as_uint(scale * normal_at(seed, off + i));\n"
    "    u += 0x7fffu + ((u >> 16) & 1u);\n"
    "    p[off + i] = (ushort)(u >> 16);\n"
    "  }\n"
    "}\n"
    /* fp16 bits of a value in the normal range, mantissa truncated (synthetic data only) */
    "uint f16_bits(float x) {\n"
    "  const uint u = as_uint(x);\n"
    "  return ((u >> 16) & 0x8000u) | ((((u >> 23) & 0xffu) - 112u) << 10) | ((u >> 13) & 0x3ffu);\n"
    "}\n"
    /* int4 rows: `groups` words (scale in [1/8, 1/4), shift = -7.5 scale, so codes
     * 0..15 straddle 0), then random code words */
    "__kernel void cli_fill_int4(__global uint *p, ulong n, int row_words, int groups, ulong seed) {\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
    "    const ulong h = hash(seed, i);\n"
    "    if ((int)(i % row_words) < groups) {\n"
    "      const float scale = 0.125f * (1.0f + (float)(h & 0x3ffu) / 1024.0f);\n"
    "      p[i] = f16_bits(scale) | (f16_bits(-7.5f * scale) << 16);\n"
    "    } else {\n"
    "      p[i] = (uint)(h >> 32);\n"
    "    }\n"
    "  }\n"
    "}\n"
    /* fp8 codes: random sign and mantissa, exponent field 4..8 (finite, never
     * a NaN code of E4M3FN or E4M3FNUZ, magnitudes about 2^-4 .. 2^1.9) */
    "__kernel void cli_fill_fp8(__global uint *p, ulong n, ulong seed) {\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
    "    const ulong h = hash(seed, i);\n"
    "    uint w = 0;\n"
    "    for (int b = 0; b < 4; b++) {\n"
    "      const uint r = (uint)(h >> (16 * b)) & 0xffffu;\n"
    "      const uint byte = ((r & 1u) << 7) | ((4u + (r >> 1) % 5u) << 3) | ((r >> 4) & 7u);\n"
    "      w |= byte << (8 * b);\n"
    "    }\n"
    "    p[i] = w;\n"
    "  }\n"
    "}\n"
    /* fp8 scale-shift words: scale in [1/2, 1), shift +-[1/16, 1/8) */
    "__kernel void cli_fill_scale_shift(__global uint *p, ulong n, ulong seed) {\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
    "    const ulong h = hash(seed, i);\n"
    "    const uint scale = (14u << 10) | (uint)(h & 0x3ffu);\n"
    "    const uint shift = (uint)((h >> 10) & 1u) << 15 | (11u << 10) | (uint)((h >> 11) & 0x3ffu);\n"
    "    p[i] = scale | (shift << 16);\n"
    "  }\n"
    "}\n"
    "__kernel void cli_tick(__global int *unused) {}\n"
    /* about a millisecond of dependent multiply-adds on one work-item */
    "__kernel void cli_spin(__global float *p, int n) {\n"
    "  float x = (float)n;\n"
    "  for (int i = 0; i < n; i++) x = x * 0.999f + 0.001f;\n"
    "  if (x == 12345.0f && p) p[0] = x;\n"
    "}\n";

static cl_kernel fill_kernel(cli_env *env, const char *name) {
  cl_context cl = clattn_context_cl(env->ctx);
  cl_device_id dev = clattn_context_device(env->ctx);
  cl_int err = CL_SUCCESS;
  if (!fill_program || fill_program_ctx != cl) {
    if (fill_program) clReleaseProgram(fill_program);
    fill_program = clCreateProgramWithSource(cl, 1, &fill_source, NULL, &err);
    if (err == CL_SUCCESS) err = clBuildProgram(fill_program, 1, &dev, "-cl-std=CL1.2", NULL, NULL);
    if (err != CL_SUCCESS) {
      char log[4096] = "";
      if (fill_program)
        clGetProgramBuildInfo(fill_program, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
      fprintf(stderr, "clattn: the data generator did not build (%d):\n%s\n", (int)err, log);
      if (fill_program) clReleaseProgram(fill_program);
      fill_program = NULL;
      return NULL;
    }
    fill_program_ctx = cl;
  }
  cl_kernel k = clCreateKernel(fill_program, name, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clattn: clCreateKernel(%s) failed (%d)\n", name, (int)err);
    return NULL;
  }
  return k;
}

/* Runs a grid-stride fill kernel over n items; args are set by the caller. */
static bool fill_launch(cli_env *env, cl_kernel k, size_t n, const char *name) {
  size_t local = 256, groups = (n + local - 1) / local;
  if (groups > 16384) groups = 16384;
  size_t global = (groups ? groups : 1) * local;
  cl_int err = clEnqueueNDRangeKernel(env->queue, k, 1, NULL, &global, &local, 0, NULL, NULL);
  clReleaseKernel(k);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clattn: enqueueing %s failed (%d)\n", name, (int)err);
    return false;
  }
  return true;
}

bool cli_fill_random(cli_env *env, cl_mem buf, clattn_dtype dt, size_t off, size_t n,
                     uint64_t seed, float scale) {
  const char *name = dt == CLATTN_F32 ? "cli_fill_f32" : dt == CLATTN_F16 ? "cli_fill_f16"
                     : dt == CLATTN_BF16 ? "cli_fill_bf16" : NULL;
  if (!name) {
    fprintf(stderr, "clattn: no random fill for dtype %s\n", clattn_dtype_name(dt));
    return false;
  }
  cl_kernel k = fill_kernel(env, name);
  if (!k) return false;
  cl_ulong o = off, cnt = n, s = seed;
  clSetKernelArg(k, 0, sizeof buf, &buf);
  clSetKernelArg(k, 1, sizeof o, &o);
  clSetKernelArg(k, 2, sizeof cnt, &cnt);
  clSetKernelArg(k, 3, sizeof s, &s);
  clSetKernelArg(k, 4, sizeof scale, &scale);
  return fill_launch(env, k, n, name);
}

bool cli_fill_quant(cli_env *env, cl_mem buf, clattn_dtype dt, int groups, int d, size_t rows,
                    uint64_t seed) {
  const bool int4 = dt == CLATTN_INT4;
  if (!int4 && dt != CLATTN_FP8 && dt != CLATTN_FP8_FNUZ) {
    fprintf(stderr, "clattn: %s is not a quantized dtype\n", clattn_dtype_name(dt));
    return false;
  }
  const char *name = int4 ? "cli_fill_int4" : "cli_fill_fp8";
  cl_kernel k = fill_kernel(env, name);
  if (!k) return false;
  const int row_words = int4 ? groups + d / 8 : d / 4;
  cl_ulong n = (cl_ulong)rows * (cl_ulong)row_words, s = seed;
  clSetKernelArg(k, 0, sizeof buf, &buf);
  clSetKernelArg(k, 1, sizeof n, &n);
  if (int4) {
    clSetKernelArg(k, 2, sizeof row_words, &row_words);
    clSetKernelArg(k, 3, sizeof groups, &groups);
    clSetKernelArg(k, 4, sizeof s, &s);
  } else {
    clSetKernelArg(k, 2, sizeof s, &s);
  }
  return fill_launch(env, k, (size_t)n, name);
}

bool cli_fill_scale_shift(cli_env *env, cl_mem buf, size_t n, uint64_t seed) {
  cl_kernel k = fill_kernel(env, "cli_fill_scale_shift");
  if (!k) return false;
  cl_ulong cnt = n, s = seed;
  clSetKernelArg(k, 0, sizeof buf, &buf);
  clSetKernelArg(k, 1, sizeof cnt, &cnt);
  clSetKernelArg(k, 2, sizeof s, &s);
  return fill_launch(env, k, n, "cli_fill_scale_shift");
}

bool cli_tick(cli_env *env, cl_event *e) {
  cl_kernel k = fill_kernel(env, "cli_tick");
  if (!k) return false;
  cl_mem none = NULL;
  clSetKernelArg(k, 0, sizeof none, &none);
  size_t one = 1;
  cl_int err = clEnqueueNDRangeKernel(env->queue, k, 1, NULL, &one, &one, 0, NULL, e);
  clReleaseKernel(k);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clattn: enqueueing the timing marker failed (%d)\n", (int)err);
    return false;
  }
  return true;
}

/* Holds the queue for about a millisecond: a kernel spinning on the device
 * (the commands enqueued meanwhile then run back to back from its queue). */
static bool cli_spin(cli_env *env) {
  cl_kernel k = fill_kernel(env, "cli_spin");
  if (!k) return false;
  cl_mem none = NULL;
  const cl_int n = 400000;
  clSetKernelArg(k, 0, sizeof none, &none);
  clSetKernelArg(k, 1, sizeof n, &n);
  size_t one = 1;
  cl_int err = clEnqueueNDRangeKernel(env->queue, k, 1, NULL, &one, &one, 0, NULL, NULL);
  clReleaseKernel(k);
  return err == CL_SUCCESS;
}

/* One run of cli_time_median (repetition `it`): its ms, *last_ms its own;
 * by_event: held by a user event, not the spinning kernel (with gated). */
static double time_once(cli_env *env, cl_mem flush, size_t flush_n, int it, bool gated,
                        bool by_event, cli_enqueue_fn fn, void *priv, const char *label,
                        double *last_ms) {
  cl_int err = CL_SUCCESS;
  cl_event gate = by_event ? clCreateUserEvent(clattn_context_cl(env->ctx), &err) : NULL;
  if (err != CL_SUCCESS) return NAN;
  cl_event tick = NULL, done = NULL;
  double ms = NAN;
  bool ok = gate ? clEnqueueBarrierWithWaitList(env->queue, 1, &gate, NULL) == CL_SUCCESS
                 : !gated || cli_spin(env);
  if (ok && flush) { /* a plain write (no maths) over twice the cache evicts K/V */
    const cl_uint pattern = (cl_uint)it;
    ok = clEnqueueFillBuffer(env->queue, flush, &pattern, 4, 0, flush_n * 4, 0, NULL, NULL) ==
         CL_SUCCESS;
  }
  ok = ok && cli_tick(env, &tick);
  clattn_status s = CLATTN_SUCCESS;
  if (ok) {
    s = fn(priv, &done);
    if (s != CLATTN_SUCCESS) cli_fail(label, s);
  }
  if (gate) clSetUserEventStatus(gate, CL_COMPLETE);
  clFinish(env->queue);
  if (ok && s == CLATTN_SUCCESS) {
    cl_ulong t0 = 0, t1 = 0;
    if (clGetEventProfilingInfo(tick, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL) == CL_SUCCESS &&
        clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS)
      ms = (double)(t1 - t0) * 1e-6;
    if (last_ms) *last_ms = cli_event_ms(done);
  }
  if (tick) clReleaseEvent(tick);
  if (done) clReleaseEvent(done);
  if (gate) clReleaseEvent(gate);
  return ms;
}

double cli_time_median(cli_env *env, cl_mem flush, size_t flush_n, int warmup, int repeat,
                       bool gated, cli_enqueue_fn fn, void *priv, const char *label,
                       double *last_median) {
  double *v = repeat > 0 ? malloc(sizeof(double) * 2 * (size_t)repeat) : NULL;
  if (!v) return NAN;
  double *last = v + repeat;
  const char *hold = getenv("CLATTN_CLI_HOLD");
  const bool by_event = gated && hold && strcmp(hold, "event") == 0;
  int got = 0;
  for (int i = 0; i < warmup + repeat; i++) {
    double own = NAN;
    const double ms = time_once(env, flush, flush_n, i, gated, by_event, fn, priv, label, &own);
    if (isnan(ms)) {
      got = 0;
      break;
    }
    if (i >= warmup) last[got] = own, v[got++] = ms;
    cli_progress(label, i + 1, warmup + repeat);
  }
  cli_progress_done();
  if (last_median) *last_median = got ? cli_median(last, got) : NAN;
  const double med = got ? cli_median(v, got) : NAN;
  free(v);
  return med;
}

cl_mem cli_flush_buffer(cli_env *env, size_t *words) {
  cl_ulong cache = 0;
  clGetDeviceInfo(clattn_context_device(env->ctx), CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof cache,
                  &cache, NULL);
  size_t bytes = (size_t)cache * 2;
  if (bytes < ((size_t)8 << 20)) bytes = (size_t)8 << 20;
  if (bytes > ((size_t)512 << 20)) bytes = (size_t)512 << 20;
  *words = bytes / 4;
  return cli_buffer(env, bytes, "L2 flush buffer");
}

const char *cli_json_bool(bool v) { return v ? "true" : "false"; }

void cli_json_str(const char *key, const char *v, bool comma) {
  printf("\"%s\":\"", key);
  for (; *v; v++) {
    if (*v == '"' || *v == '\\') putchar('\\');
    if (*v == '\n')
      fputs("\\n", stdout);
    else if ((unsigned char)*v >= 0x20)
      putchar(*v);
  }
  printf("\"%s", comma ? "," : "");
}
