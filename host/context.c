/* The clattn context: the caller's cl_context and device, the device
 * profile, its tuning row and the program cache. */
#include "internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void default_cache_dir(char *buf, size_t size) {
  const char *env = getenv("CLATTN_CACHE_DIR");
  if (env) {
    snprintf(buf, size, "%s", env);
    return;
  }
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (xdg && *xdg)
    snprintf(buf, size, "%s/clattn", xdg);
  else if (home && *home)
    snprintf(buf, size, "%s/.cache/clattn", home);
  else
    buf[0] = '\0';
}

/* mkdir -p, best effort: a cache that cannot be written is just not used. */
static void make_dirs(const char *path) {
  char tmp[1024];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      mkdir(tmp, 0755);
      *p = '/';
    }
  }
  mkdir(tmp, 0755);
}

static void stderr_log(void *priv, clattn_log_level level, const char *msg) {
  (void)priv;
  (void)level;
  fprintf(stderr, "%s\n", msg);
}

/* Tags start at a random point per context, so a workspace shared by two
 * contexts (or holding another's tickets) meets a tag it has seen with odds
 * of about 2^-48 per ticket. */
static uint64_t tag_seed(const clattn_context *ctx) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  uint64_t x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  x ^= (uint64_t)(uintptr_t)ctx * 0x9e3779b97f4a7c15u;
  x ^= x >> 31; /* splitmix64's finaliser */
  x *= 0xbf58476d1ce4e5b9u;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

uint64_t clattn_decode_tag(clattn_context *ctx) {
  for (;;) {
    const uint64_t t = (atomic_fetch_add(&ctx->decode_tag, 1) + 1) & (((uint64_t)1 << 48) - 1);
    if (t) return t;
  }
}

clattn_status clattn_context_create(cl_context cl_ctx, cl_device_id device,
                                    const clattn_context_options *opts, clattn_context **out) {
  if (!out) return clattn_fail(CLATTN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!cl_ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "cl_ctx is NULL");
  if (!device) return clattn_fail(CLATTN_INVALID_ARGUMENT, "device is NULL");
  /* The device must belong to the context. */
  cl_uint nd = 0;
  cl_int err = clGetContextInfo(cl_ctx, CL_CONTEXT_NUM_DEVICES, sizeof nd, &nd, NULL);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clGetContextInfo", "cl_ctx");
  cl_device_id *devs = calloc(nd ? nd : 1, sizeof *devs);
  if (!devs) return clattn_fail(CLATTN_OUT_OF_MEMORY, "context: device list");
  clGetContextInfo(cl_ctx, CL_CONTEXT_DEVICES, nd * sizeof *devs, devs, NULL);
  bool found = false;
  for (cl_uint i = 0; i < nd; i++) found |= devs[i] == device;
  free(devs);
  if (!found) return clattn_fail(CLATTN_INVALID_ARGUMENT, "device is not a device of cl_ctx");

  clattn_context *c = calloc(1, sizeof *c);
  if (!c) return clattn_fail(CLATTN_OUT_OF_MEMORY, "context");
  clattn_status s = clattn_device_profile_query(device, &c->profile);
  /* created here, not on first use: no process-wide lock guards its creation */
  if (s == CLATTN_SUCCESS) s = clattn_program_cache_create(&c->programs);
  if (s != CLATTN_SUCCESS) {
    free(c);
    return s;
  }
  atomic_init(&c->decode_tag, tag_seed(c));
  if (opts) c->opts = *opts;
  if (!c->opts.log) {
    /* CLATTN_LOG=info|debug: log to stderr when the caller set no callback */
    const char *env = getenv("CLATTN_LOG");
    if (env && (strcmp(env, "info") == 0 || strcmp(env, "debug") == 0)) {
      c->opts.log = stderr_log;
      c->opts.log_level = env[0] == 'd' ? CLATTN_LOG_DEBUG : CLATTN_LOG_INFO;
    }
  }
  c->opts.cache_dir = NULL; /* copied below; the caller's string need not outlive the call */
  if (opts && opts->cache_dir)
    snprintf(c->cache_dir, sizeof c->cache_dir, "%s", opts->cache_dir);
  else
    default_cache_dir(c->cache_dir, sizeof c->cache_dir);
  if (c->cache_dir[0]) make_dirs(c->cache_dir);

  /* the override file: $CLATTN_TUNING_FILE, else one per device in the cache directory */
  const char *tf = getenv("CLATTN_TUNING_FILE");
  if (tf)
    snprintf(c->tuning_path, sizeof c->tuning_path, "%s", tf);
  else if (c->cache_dir[0])
    clattn_tuning_default_path(c->cache_dir, &c->profile, c->tuning_path, sizeof c->tuning_path);
  if (clattn_tuning_lookup(c, &c->profile, c->tuning_path[0] ? c->tuning_path : NULL, &c->tuning,
                           &c->tuning_origin))
    snprintf(c->tuning_file, sizeof c->tuning_file, "%s", c->tuning_path);

  c->scratch = clCreateBuffer(cl_ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
  if (err != CL_SUCCESS) {
    clattn_program_cache_free(c->programs);
    free(c);
    return clattn_fail_cl(err, "clCreateBuffer", "context scratch");
  }
  clRetainContext(cl_ctx);
  clRetainDevice(device);
  c->cl = cl_ctx;
  c->device = device;
  clattn_log(c, CLATTN_LOG_INFO, "clattn: %s (%s), arch %s, %u CUs", c->profile.name,
             c->profile.platform, c->profile.arch, c->profile.compute_units);
  *out = c;
  return CLATTN_SUCCESS;
}

clattn_status clattn_context_create_selected(const char *selector, const clattn_context_options *opts,
                                             clattn_context **out) {
  if (!out) return clattn_fail(CLATTN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  cl_device_id dev = NULL;
  CLATTN_TRY(clattn_device_select(selector, &dev));
  cl_int err = CL_SUCCESS;
  cl_context cl = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clCreateContext", "selected device");
  clattn_status s = clattn_context_create(cl, dev, opts, out);
  clReleaseContext(cl); /* the clattn context holds its own reference */
  if (s == CLATTN_SUCCESS) (*out)->owns_cl = true;
  return s;
}

clattn_status clattn_context_create_default(const clattn_context_options *opts,
                                            clattn_context **out) {
  return clattn_context_create_selected(getenv("CLATTN_DEVICE"), opts, out);
}

void clattn_context_release(clattn_context **ctx) {
  if (!ctx || !*ctx) return;
  clattn_context *c = *ctx;
  clattn_program_cache_free(c->programs);
  clattn_baseline_context_release(c); /* CLBlast's hold on c->cl, if it ran here */
  clReleaseMemObject(c->scratch);
  clReleaseDevice(c->device);
  clReleaseContext(c->cl);
  free(c);
  *ctx = NULL;
}

cl_context clattn_context_cl(const clattn_context *ctx) { return ctx ? ctx->cl : NULL; }
cl_device_id clattn_context_device(const clattn_context *ctx) { return ctx ? ctx->device : NULL; }

clattn_status clattn_context_profile(const clattn_context *ctx, clattn_device_profile *out) {
  if (!ctx || !out) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx or out is NULL");
  *out = ctx->profile;
  return CLATTN_SUCCESS;
}

void clattn_log(const clattn_context *ctx, clattn_log_level level, const char *fmt, ...) {
  if (!ctx || !ctx->opts.log || level > ctx->opts.log_level) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ctx->opts.log(ctx->opts.log_priv, level, msg);
}

/* The vendor fast paths are on: CLATTN_PORTABLE=1 in the environment forces
 * the portable twins (tests use it). */
static bool fast_paths(void) {
  const char *portable = getenv("CLATTN_PORTABLE");
  return !(portable && portable[0] == '1');
}

void clattn_feature_options(const clattn_context *ctx, char *buf, size_t size) {
  /* NVIDIA compute capability from the arch key "nvidia-smXY" (0 elsewhere) */
  unsigned sm = 0;
  if (sscanf(ctx->profile.arch, "nvidia-sm%u", &sm) != 1) sm = 0;
  snprintf(buf, size,
           " -DCLATTN_NV_PTX=%d -DCLATTN_NV_SM=%u -DCLATTN_NV_WGMMA=%d -DCLATTN_AMD=%d -DCLATTN_SIMD=%u"
           " -DCLATTN_FP64=%d -DCLATTN_CPU_PREFETCH=%d -DCLATTN_F32_DENORM=%d",
           clattn_nv_ptx_active(ctx), sm, clattn_nv_ptx_active(ctx) && sm == 90,
           fast_paths() && ctx->profile.has_amd_builtins, ctx->profile.simd_width,
           ctx->profile.has_fp64, fast_paths() && ctx->profile.has_cpu_prefetch,
           ctx->profile.has_f32_denormals); /* standard OpenCL, as fp64: CLATTN_PORTABLE keeps it */
}

bool clattn_nv_ptx_active(const clattn_context *ctx) {
  return fast_paths() && ctx->profile.has_nv_ptx;
}

/* NVIDIA: a quarter SM's 16384 registers are 512 per lane, allocated in
 * steps of 8, at most 255 a work-item (so 2 warps or fewer need no cap).
 * No vendor instruction: it holds with CLATTN_PORTABLE=1. */
void clattn_occupancy_option(const clattn_context *ctx, int waves, char *buf, size_t size) {
  buf[0] = '\0';
  if (waves <= 0) return;
  if (ctx->profile.has_nv_ptx && 512 / waves / 8 * 8 < 255)
    snprintf(buf, size, " -DCLATTN_PTX_MAXNREG=%d", 512 / waves / 8 * 8);
  else if (ctx->profile.has_amd_builtins)
    snprintf(buf, size, " -DCLATTN_AMD_WAVES_PER_EU=%d", waves);
}

/* sm_90 only: sm_90a's wgmma is not in later architectures. */
bool clattn_nv_wgmma_active(const clattn_context *ctx) {
  return clattn_nv_ptx_active(ctx) && strcmp(ctx->profile.arch, "nvidia-sm90") == 0 &&
         !atomic_load(&ctx->wgmma_failed);
}

static atomic_int forced_path; /* clattn_force_path */

void clattn_force_path(int path) { atomic_store(&forced_path, path); }

/* The test hook's choice, else CLATTN_FORCE_MMA=1 in the environment: the
 * tensor-core kernels wherever the shape allows (emulated off NVIDIA). */
int clattn_forced_path(void) {
  const int path = atomic_load(&forced_path);
  if (path) return path;
  const char *mma = getenv("CLATTN_FORCE_MMA");
  return mma && mma[0] == '1' ? 2 : 0;
}

clattn_status clattn_check_enqueue(const clattn_context *ctx, cl_command_queue queue,
                                   cl_uint num_wait, const cl_event *wait) {
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  if (!queue) return clattn_fail(CLATTN_INVALID_ARGUMENT, "queue is NULL");
  if ((num_wait > 0) != (wait != NULL))
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "num_wait is %u but wait_list is %s", num_wait,
                       wait ? "set" : "NULL");
  cl_context qc = NULL;
  cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qc, &qc, NULL);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clGetCommandQueueInfo", "queue");
  if (qc != ctx->cl)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "queue belongs to another cl_context than ctx");
  cl_device_id qd = NULL;
  clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qd, &qd, NULL);
  if (qd != ctx->device)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "queue is for another device than ctx's");
  return CLATTN_SUCCESS;
}

clattn_status clattn_temp_buffer(clattn_context *ctx, size_t bytes, cl_mem *out) {
  cl_int err = CL_SUCCESS;
  *out = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &err);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clCreateBuffer", "workspace");
  return CLATTN_SUCCESS;
}
