/* Kernel programs: source loading (embedded or $CLATTN_KERNEL_DIR), the
 * per-context in-memory cache, the on-disk binary cache, kernel arguments
 * and checked launches. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bump when the cache key or file format changes. */
#define CACHE_FORMAT "clattn-binary-v1"

typedef struct entry {
  char *key; /* file + '\n' + options */
  cl_program program;
  struct entry *next;
} entry;

struct clattn_program_cache {
  pthread_mutex_t lock;
  entry *head;
};

void clattn_program_cache_free(struct clattn_program_cache *c) {
  if (!c) return;
  for (entry *e = c->head, *n; e; e = n) {
    n = e->next;
    clReleaseProgram(e->program);
    free(e->key);
    free(e);
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* ------------------------------------------------------------------ sources */

static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) {
    buf[n] = '\0';
    if (size) *size = (size_t)n;
  }
  return buf;
}

static char *raw_source(const char *name) {
  const char *dir = getenv("CLATTN_KERNEL_DIR");
  if (dir && *dir) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return read_file(path, NULL);
  }
  for (size_t i = 0; i < clattn_num_sources; i++) {
    if (strcmp(clattn_sources[i].name, name) == 0) {
      char *s = malloc(clattn_sources[i].size + 1);
      if (!s) return NULL;
      memcpy(s, clattn_sources[i].text, clattn_sources[i].size);
      s[clattn_sources[i].size] = '\0';
      return s;
    }
  }
  return NULL;
}

typedef struct strbuf {
  char *p;
  size_t len, cap;
} strbuf;

static bool sb_add(strbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 65536);
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return true;
}

/* Expands `#include "x"` lines, each header once (they are all guarded
 * anyway), so the device compiler needs no include path. */
static clattn_status expand(const char *name, strbuf *out, char seen[][64], int *nseen, int depth) {
  if (depth > 8) return clattn_fail(CLATTN_BUILD_ERROR, "%s: includes nested too deeply", name);
  for (int i = 0; i < *nseen; i++)
    if (strcmp(seen[i], name) == 0) return CLATTN_SUCCESS;
  if (*nseen < 64) snprintf(seen[(*nseen)++], 64, "%s", name);
  char *src = raw_source(name);
  if (!src)
    return clattn_fail(CLATTN_BUILD_ERROR, "kernel source %s not found (%s)", name,
                       getenv("CLATTN_KERNEL_DIR") ? "CLATTN_KERNEL_DIR" : "embedded");
  clattn_status s = CLATTN_SUCCESS;
  for (char *line = src; *line && s == CLATTN_SUCCESS;) {
    char *eol = strchr(line, '\n');
    size_t n = eol ? (size_t)(eol - line + 1) : strlen(line);
    char inc[64];
    if (sscanf(line, " #include \"%63[^\"]\"", inc) == 1) {
      s = expand(inc, out, seen, nseen, depth + 1);
      if (s == CLATTN_SUCCESS && !sb_add(out, "\n", 1))
        s = clattn_fail(CLATTN_OUT_OF_MEMORY, "kernel source %s", name);
    } else if (!sb_add(out, line, n)) {
      s = clattn_fail(CLATTN_OUT_OF_MEMORY, "kernel source %s", name);
    }
    line += n;
  }
  free(src);
  return s;
}

clattn_status clattn_source_load(const char *name, char **out) {
  strbuf b = {0};
  char seen[64][64];
  int nseen = 0;
  clattn_status s = expand(name, &b, seen, &nseen, 0);
  if (s != CLATTN_SUCCESS) {
    free(b.p);
    return s;
  }
  *out = b.p;
  return CLATTN_SUCCESS;
}

/* ------------------------------------------------------------------ disk cache */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

static void cache_path(const clattn_context *ctx, const char *src, const char *options, char *path,
                       size_t size) {
  const clattn_device_profile *p = &ctx->profile;
  const char *parts[] = {CACHE_FORMAT, p->platform, p->name, p->vendor, p->driver_version, src, options};
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) h = fnv1a(h, parts[i], strlen(parts[i]) + 1);
  snprintf(path, size, "%s/%016llx.bin", ctx->cache_dir, (unsigned long long)h);
}

static cl_program load_binary(clattn_context *ctx, const char *path, const char *options) {
  size_t n = 0;
  char *bin = read_file(path, &n);
  if (!bin) return NULL;
  const unsigned char *b = (const unsigned char *)bin;
  cl_int st = CL_SUCCESS, err = CL_SUCCESS;
  cl_program prog = clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &n, &b, &st, &err);
  free(bin);
  if (err != CL_SUCCESS || st != CL_SUCCESS) {
    if (prog) clReleaseProgram(prog);
    return NULL;
  }
  if (clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL) != CL_SUCCESS) {
    clReleaseProgram(prog);
    return NULL;
  }
  return prog;
}

static void save_binary(clattn_context *ctx, cl_program prog, const char *path) {
  size_t n = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || !n) return;
  unsigned char *bin = malloc(n);
  if (!bin) return;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.%p.tmp", path, (void *)prog);
    FILE *f = fopen(tmp, "wb");
    if (f) {
      bool ok = fwrite(bin, 1, n, f) == n;
      ok &= fclose(f) == 0;
      if (!ok || rename(tmp, path) != 0) remove(tmp);
    }
  }
  (void)ctx;
  free(bin);
}

/* ------------------------------------------------------------------ build */

/* The program's build log for the context's device (caller frees; NULL if out of memory). */
static char *build_log(const clattn_context *ctx, cl_program prog) {
  size_t n = 0;
  clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
  char *log = malloc(n + 1);
  if (log) {
    log[0] = '\0';
    clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, n, log, NULL);
    log[n] = '\0';
  }
  return log;
}

static clattn_status build(clattn_context *ctx, const char *file, const char *options,
                           cl_program *out) {
  char *src = NULL;
  CLATTN_TRY(clattn_source_load(file, &src));
  char path[1200] = "";
  if (ctx->cache_dir[0]) {
    cache_path(ctx, src, options, path, sizeof path);
    cl_program p = load_binary(ctx, path, options);
    if (p) {
      free(src);
      clattn_log(ctx, CLATTN_LOG_DEBUG, "clattn: %s [%s] from disk cache", file, options);
      *out = p;
      return CLATTN_SUCCESS;
    }
  }
  cl_int err = CL_SUCCESS;
  const char *text = src;
  cl_program prog = clCreateProgramWithSource(ctx->cl, 1, &text, NULL, &err);
  free(src);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clCreateProgramWithSource", file);
  err = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    char *log = build_log(ctx, prog);
    clattn_status s = clattn_fail(CLATTN_BUILD_ERROR, "building %s with [%s] failed: %s (%d)\n%.12000s",
                                  file, options, clattn_cl_error_name(err), (int)err,
                                  log ? log : "(no log)");
    free(log);
    clReleaseProgram(prog);
    return s;
  }
  if (ctx->opts.log && ctx->opts.log_level >= CLATTN_LOG_DEBUG) {
    /* compiler remarks (NVIDIA: registers and spills with -cl-nv-verbose) */
    char *log = build_log(ctx, prog);
    if (log) clattn_log(ctx, CLATTN_LOG_DEBUG, "clattn: built %s [%s]\n%s", file, options, log);
    free(log);
  }
  if (path[0]) save_binary(ctx, prog, path);
  *out = prog;
  return CLATTN_SUCCESS;
}

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

clattn_status clattn_kernel_get(clattn_context *ctx, const char *file, const char *options,
                                const char *kernel_name, cl_kernel *out) {
  pthread_mutex_lock(&init_lock);
  if (!ctx->programs) {
    ctx->programs = calloc(1, sizeof *ctx->programs);
    if (ctx->programs) pthread_mutex_init(&ctx->programs->lock, NULL);
  }
  pthread_mutex_unlock(&init_lock);
  if (!ctx->programs) return clattn_fail(CLATTN_OUT_OF_MEMORY, "program cache");

  char opts[4096];
  char feat[256];
  clattn_feature_options(ctx, feat, sizeof feat);
  /* CLATTN_BUILD_OPTIONS: extra compiler options for developers (e.g. -cl-nv-verbose) */
  const char *extra = getenv("CLATTN_BUILD_OPTIONS");
  int n = snprintf(opts, sizeof opts, "-cl-std=CL1.2 %s%s%s%s", options, feat, extra ? " " : "",
                   extra ? extra : "");
  if (n < 0 || (size_t)n >= sizeof opts)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s: build options too long", file);
  size_t klen = strlen(file) + 1 + strlen(opts) + 1;
  char *key = malloc(klen);
  if (!key) return clattn_fail(CLATTN_OUT_OF_MEMORY, "program key");
  snprintf(key, klen, "%s\n%s", file, opts);

  struct clattn_program_cache *c = ctx->programs;
  /* Held across the build: two threads asking for one variant build it once. */
  pthread_mutex_lock(&c->lock);
  cl_program prog = NULL;
  for (entry *e = c->head; e; e = e->next) {
    if (strcmp(e->key, key) == 0) {
      prog = e->program;
      break;
    }
  }
  clattn_status s = CLATTN_SUCCESS;
  if (!prog) {
    s = build(ctx, file, opts, &prog);
    if (s == CLATTN_SUCCESS) {
      entry *e = malloc(sizeof *e);
      if (!e) {
        clReleaseProgram(prog);
        s = clattn_fail(CLATTN_OUT_OF_MEMORY, "program cache entry");
      } else {
        e->key = key;
        key = NULL;
        e->program = prog;
        e->next = c->head;
        c->head = e;
      }
    }
  }
  pthread_mutex_unlock(&c->lock);
  free(key);
  if (s != CLATTN_SUCCESS) return s;
  cl_int err = CL_SUCCESS;
  *out = clCreateKernel(prog, kernel_name, &err);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clCreateKernel", kernel_name);
  return CLATTN_SUCCESS;
}

/* ------------------------------------------------------------------ args and launch */

void clattn_arg(clattn_args *a, size_t size, const void *value) {
  cl_int err = clSetKernelArg(a->kernel, a->next, size, value);
  if (err != CL_SUCCESS && a->err == CL_SUCCESS) {
    a->err = err;
    a->failed_at = a->next;
  }
  a->next++;
}
void clattn_arg_mem(clattn_args *a, cl_mem m) { clattn_arg(a, sizeof m, &m); }
void clattn_arg_int(clattn_args *a, int v) { clattn_arg(a, sizeof v, &v); }
void clattn_arg_long(clattn_args *a, int64_t v) {
  cl_long l = (cl_long)v;
  clattn_arg(a, sizeof l, &l);
}
void clattn_arg_float(clattn_args *a, float v) { clattn_arg(a, sizeof v, &v); }
void clattn_arg_local(clattn_args *a, size_t bytes) { clattn_arg(a, bytes, NULL); }
void clattn_arg_tensor(clattn_args *a, const clattn_tensor *t) {
  clattn_arg_mem(a, t->buf);
  clattn_arg_long(a, t->buf ? clattn_elem_offset(t) : 0);
}

clattn_status clattn_args_end(const clattn_args *a, const char *kernel_name) {
  if (a->err == CL_SUCCESS) return CLATTN_SUCCESS;
  char what[160];
  snprintf(what, sizeof what, "%s, argument %u", kernel_name, a->failed_at);
  return clattn_fail_cl(a->err, "clSetKernelArg", what);
}

clattn_status clattn_launch(clattn_context *ctx, cl_command_queue queue, cl_kernel kernel,
                            const char *kernel_name, cl_uint dims, const size_t *global,
                            const size_t *local, cl_uint num_wait, const cl_event *wait,
                            cl_event *event) {
  if (local) {
    size_t total = 1, kmax = 0;
    for (cl_uint i = 0; i < dims; i++) {
      if (local[i] == 0 || global[i] % local[i])
        return clattn_fail(CLATTN_INVALID_ARGUMENT,
                           "%s: global size %zu is not a multiple of local size %zu (dim %u)",
                           kernel_name, global[i], local[i], i);
      total *= local[i];
    }
    clGetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kmax, &kmax, NULL);
    if (total > ctx->profile.max_work_group_size || (kmax && total > kmax))
      return clattn_fail(CLATTN_UNSUPPORTED,
                         "%s: work-group of %zu exceeds the device limit %zu / kernel limit %zu",
                         kernel_name, total, ctx->profile.max_work_group_size, kmax);
  }
  for (cl_uint i = 0; i < dims; i++)
    if (global[i] == 0) { /* nothing to do: still honour the event contract */
      if (event) {
        cl_int err = clEnqueueMarkerWithWaitList(queue, num_wait, wait, event);
        if (err != CL_SUCCESS) return clattn_fail_cl(err, "clEnqueueMarkerWithWaitList", kernel_name);
      }
      return CLATTN_SUCCESS;
    }
  cl_int err = clEnqueueNDRangeKernel(queue, kernel, dims, NULL, global, local, num_wait, wait, event);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clEnqueueNDRangeKernel", kernel_name);
  return CLATTN_SUCCESS;
}
