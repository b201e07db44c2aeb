/* Kernel programs: source loading (embedded or $CLATTN_KERNEL_DIR), the
 * per-context in-memory cache (one in-flight entry per variant, so builds of
 * different variants run in parallel), the on-disk binary cache (entries
 * that carry and check their own key, size and checksum, rebuilt when bad),
 * kernel arguments and checked launches. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ files */

clattn_read_result clattn_read_regular(const char *path, size_t cap, char **out, size_t *size, char *why,
                                size_t why_size) {
  *out = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int e = errno;
    snprintf(why, why_size, "cannot be opened (errno %d)", e);
    /* ENOTDIR: the cache folder is missing (a file in its place) */
    return e == ENOENT || e == ENOTDIR ? READ_MISSING : e == EISDIR ? READ_DIRECTORY : READ_BAD;
  }
  struct stat st;
  clattn_read_result r = READ_OK;
  if (fstat(fd, &st) != 0) {
    snprintf(why, why_size, "cannot be examined (errno %d)", errno);
    r = READ_BAD;
  } else if (S_ISDIR(st.st_mode)) {
    snprintf(why, why_size, "is a directory");
    r = READ_DIRECTORY;
  } else if (!S_ISREG(st.st_mode)) {
    snprintf(why, why_size, "is not a regular file");
    r = READ_BAD;
  } else if (st.st_size < 0 || (uint64_t)st.st_size > cap) {
    snprintf(why, why_size, "holds %lld bytes, more than the %zu read back", (long long)st.st_size,
             cap);
    r = READ_BAD;
  }
  char *buf = NULL;
  const size_t n = r == READ_OK ? (size_t)st.st_size : 0;
  if (r == READ_OK && !(buf = malloc(n + 1))) {
    snprintf(why, why_size, "does not fit in memory (%zu bytes)", n);
    r = READ_BAD;
  }
  size_t got = 0;
  while (r == READ_OK && got < n) {
    ssize_t k = read(fd, buf + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      snprintf(why, why_size, "could not be read whole (%zu of %zu bytes)", got, n);
      r = READ_BAD;
      break;
    }
    got += (size_t)k;
  }
  close(fd);
  if (r != READ_OK) {
    free(buf);
    return r;
  }
  buf[n] = '\0';
  *out = buf;
  *size = n;
  return READ_OK;
}

static bool write_all(int fd, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

/* ------------------------------------------------------------------ sources */

/* Kernel sources from $CLATTN_KERNEL_DIR stay far below this. */
#define SOURCE_MAX_BYTES ((size_t)16 << 20)

static char *raw_source(const char *name) {
  const char *dir = getenv("CLATTN_KERNEL_DIR");
  if (dir && *dir) {
    char path[2048], why[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = NULL;
    size_t n = 0;
    clattn_read_regular(path, SOURCE_MAX_BYTES, &text, &n, why, sizeof why);
    return text;
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

/* An entry file: a 32-byte header, the key text the entry was stored under,
 * then the driver's binary (the payload). Header, little-endian:
 *    0  magic "CLATTNPC"        8  u32 format version    12  u32 key bytes
 *   16  u64 payload bytes      24  u64 FNV-1a 64 of the payload
 * A file is handed to the driver only when all of these match what this
 * build expects: another variant's or kernel's entry (a hash collision, a
 * copied file), a truncated or overwritten one, or one of an older format is
 * rebuilt from source and replaced. Bump CACHE_VERSION when the key text or
 * this layout changes (v1 was the bare binary). */
#define CACHE_VERSION 2u
#define CACHE_HEADER 32
/* The largest entry read back or written. Program binaries are a few MB at
 * most (PoCL's bitcode, NVIDIA's PTX); a file far above that is not ours. */
#define CACHE_MAX_BYTES ((size_t)256 << 20)
static const unsigned char cache_magic[8] = {'C', 'L', 'A', 'T', 'T', 'N', 'P', 'C'};

#define FNV_INIT 1469598103934665603ull

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The text an entry is stored under and checked against: everything that
 * decides the binary (the expanded source by its hash). NULL: out of memory. */
static char *cache_key_text(const clattn_context *ctx, const char *file, const char *src,
                            const char *options) {
  const clattn_device_profile *p = &ctx->profile;
  const unsigned long long hs = (unsigned long long)fnv1a(FNV_INIT, src, strlen(src));
  static const char fmt[] = "clattn program cache v%u\nkernel file: %s\nplatform: %s\ndevice: %s\n"
                            "vendor: %s\ndriver: %s\noptions: %s\nsource fnv1a-64: %016llx\n";
  int n = snprintf(NULL, 0, fmt, CACHE_VERSION, file, p->platform, p->name, p->vendor,
                   p->driver_version, options, hs);
  char *key = n > 0 ? malloc((size_t)n + 1) : NULL;
  if (key)
    snprintf(key, (size_t)n + 1, fmt, CACHE_VERSION, file, p->platform, p->name, p->vendor,
             p->driver_version, options, hs);
  return key;
}

/* The entry's file: named by a hash of its key text. */
static void cache_path(const clattn_context *ctx, const char *key, char *path, size_t size) {
  snprintf(path, size, "%s/%016llx.bin", ctx->cache_dir,
           (unsigned long long)fnv1a(FNV_INIT, key, strlen(key)));
}

typedef enum load_result {
  LOAD_HIT,
  LOAD_MISS,     /* no entry: store one */
  LOAD_BAD,      /* an entry that fails a check or that the driver cannot use: replace it */
  LOAD_KEEP_OUT, /* a directory in the entry's place: build, but store nothing */
} load_result;

/* Loads the entry at `path` for `key`: read whole, its header checked, then
 * built by the driver and asked for `kernel_name`, so a binary of another
 * kernel counts as bad instead of failing every run. `why` says what was
 * wrong. */
static load_result load_entry(clattn_context *ctx, const char *path, const char *key,
                              const char *options, const char *kernel_name, cl_program *out,
                              char *why, size_t why_size) {
  *out = NULL;
  char *file = NULL;
  size_t n = 0;
  switch (clattn_read_regular(path, CACHE_MAX_BYTES, &file, &n, why, why_size)) {
  case READ_OK: break;
  case READ_MISSING: return LOAD_MISS;
  case READ_DIRECTORY: return LOAD_KEEP_OUT;
  case READ_BAD: return LOAD_BAD;
  }
  const unsigned char *b = (const unsigned char *)file;
  const size_t klen = strlen(key);
  const char *bad = NULL;
  if (n < CACHE_HEADER || memcmp(b, cache_magic, sizeof cache_magic) != 0)
    bad = "has no clattn cache header";
  else if (get_le(b + 8, 4) != CACHE_VERSION)
    bad = "is of another cache format version";
  else if (get_le(b + 12, 4) != klen || n - CACHE_HEADER < klen ||
           memcmp(b + CACHE_HEADER, key, klen) != 0)
    bad = "was stored under another key (another variant, kernel, device or driver)";
  else if (get_le(b + 16, 8) != n - CACHE_HEADER - klen)
    bad = "does not hold the payload size its header gives (truncated or overwritten)";
  else if (n == CACHE_HEADER + klen)
    bad = "holds an empty binary";
  else if (get_le(b + 24, 8) != fnv1a(FNV_INIT, b + CACHE_HEADER + klen, n - CACHE_HEADER - klen))
    bad = "fails its checksum";
  if (bad) {
    snprintf(why, why_size, "%s", bad);
    free(file);
    return LOAD_BAD;
  }
  const unsigned char *bin = b + CACHE_HEADER + klen;
  const size_t bin_size = n - CACHE_HEADER - klen;
  cl_int st = CL_SUCCESS, err = CL_SUCCESS;
  cl_program prog = clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &bin_size, &bin, &st, &err);
  free(file);
  if (err == CL_SUCCESS && st != CL_SUCCESS) err = st;
  const char *step = "clCreateProgramWithBinary";
  if (err == CL_SUCCESS) {
    step = "clBuildProgram";
    err = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
  }
  if (err == CL_SUCCESS) {
    step = "clCreateKernel";
    cl_kernel k = clCreateKernel(prog, kernel_name, &err);
    if (k) clReleaseKernel(k);
  }
  if (err != CL_SUCCESS) {
    snprintf(why, why_size, "was refused by the driver: %s(%s) gave %s", step,
             strcmp(step, "clCreateKernel") == 0 ? kernel_name : "binary", clattn_cl_error_name(err));
    if (prog) clReleaseProgram(prog);
    return LOAD_BAD;
  }
  *out = prog;
  return LOAD_HIT;
}

/* Temporary file names of this process (with its pid): unique across threads. */
static atomic_uint tmp_serial;

/* Writes the entry for `key` holding `payload`: to a temporary file, then
 * renamed over `path`, so a reader sees the old entry or the new one, never
 * part of one (a crash can leave a truncated file; its size check catches
 * that, so no fsync is needed). A directory at `path` makes the rename fail:
 * nothing is stored. Best effort: false when nothing was written. */
static bool store_entry(const clattn_context *ctx, const char *path, const char *key,
                        const unsigned char *payload, size_t size) {
  const size_t klen = strlen(key);
  if (size == 0 || size > CACHE_MAX_BYTES - CACHE_HEADER - klen || klen > UINT32_MAX) return false;
  const size_t total = CACHE_HEADER + klen + size;
  unsigned char *buf = malloc(total);
  if (!buf) return false;
  memcpy(buf, cache_magic, sizeof cache_magic);
  put_le(buf + 8, CACHE_VERSION, 4);
  put_le(buf + 12, klen, 4);
  put_le(buf + 16, size, 8);
  put_le(buf + 24, fnv1a(FNV_INIT, payload, size), 8);
  memcpy(buf + CACHE_HEADER, key, klen);
  memcpy(buf + CACHE_HEADER + klen, payload, size);
  char tmp[1200];
  int fd = -1;
  for (int attempt = 0; attempt < 4 && fd < 0; attempt++) {
    snprintf(tmp, sizeof tmp, "%s.%ld-%u.tmp", path, (long)getpid(),
             atomic_fetch_add(&tmp_serial, 1u));
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  bool ok = fd >= 0;
  if (ok) {
    ok = write_all(fd, buf, total);
    ok &= close(fd) == 0;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) unlink(tmp);
  }
  free(buf);
  if (!ok) clattn_log(ctx, CLATTN_LOG_DEBUG, "clattn: could not store the cache entry %s", path);
  return ok;
}

/* Stores the program's binary (built for the context's one device). */
static void save_program(const clattn_context *ctx, cl_program prog, const char *path,
                         const char *key) {
  size_t n = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || !n ||
      n > CACHE_MAX_BYTES)
    return;
  unsigned char *bin = malloc(n);
  if (!bin) return;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
    store_entry(ctx, path, key, bin, n);
  free(bin);
}

/* ------------------------------------------------------------------ build */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

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

/* The full options of a variant: the language version, the family's
 * options, the device's feature macros and CLATTN_BUILD_OPTIONS. */
static clattn_status full_options(const clattn_context *ctx, const char *file, const char *options,
                                  char *buf, size_t size) {
  char feat[256];
  clattn_feature_options(ctx, feat, sizeof feat);
  /* CLATTN_BUILD_OPTIONS: extra compiler options for developers (e.g. -cl-nv-verbose) */
  const char *extra = getenv("CLATTN_BUILD_OPTIONS");
  int n = snprintf(buf, size, "-cl-std=CL1.2 %s%s%s%s", options, feat, extra ? " " : "",
                   extra ? extra : "");
  if (n < 0 || (size_t)n >= size)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s: build options too long", file);
  return CLATTN_SUCCESS;
}

/* The PTX route (cl/wgmma.clh): NVIDIA's OpenCL compiler targets sm_90 and
 * refuses sm_90a's instructions, which kernels write as inline asm comments
 * "// CLATTN_PTX ...". Where the built program's PTX holds such a marker, or
 * the options ask for a register cap (-DCLATTN_PTX_MAXNREG=n: the driver
 * ignores -cl-nv-maxrregcount, tools/PERF.md), the markers are removed, the
 * target raised to sm_90a, each entry given ".maxnreg n", and the program
 * rebuilt from that PTX (*prog replaced). Other programs are kept as built.
 * A failure names the program; the caller's plans then avoid the route
 * (clattn_nv_wgmma_active). */
static const char PTX_MARK[] = "// CLATTN_PTX ";
static const char MAXNREG_OPT[] = "-DCLATTN_PTX_MAXNREG=";

/* Whether the line at c (up to end) declares an entry (".entry", also after
 * ".visible" or ".weak"). */
static bool ptx_entry_line(const char *c, const char *end) {
  for (; c + 6 <= end && *c != '\n'; c++)
    if (!memcmp(c, ".entry", 6) && (c + 6 == end || isspace((unsigned char)c[6]) || c[6] == '('))
      return true;
  return false;
}

char *clattn_ptx_patched(const char *ptx, size_t n, int maxnreg) {
  if (maxnreg > 255) maxnreg = 255;
  /* an entry takes at least 8 bytes (".entry\n{"), its cap at most 13 (".maxnreg 255\n") */
  char *out = malloc(n + 2 + (maxnreg > 0 ? 16 * (n / 8 + 1) : 0)), *o = out;
  if (!out) return NULL;
  bool in_entry = false; /* between an .entry and its body's "{" */
  for (const char *c = ptx, *end = ptx + n; c < end && *c;) {
    const bool line_start = c == ptx || c[-1] == '\n';
    if ((size_t)(end - c) >= sizeof PTX_MARK - 1 && !memcmp(c, PTX_MARK, sizeof PTX_MARK - 1)) {
      c += sizeof PTX_MARK - 1;
    } else if ((size_t)(end - c) > 13 && !memcmp(c, ".target sm_90", 13) && c[13] != 'a' &&
               !isdigit((unsigned char)c[13])) {
      memcpy(o, ".target sm_90a", 14);
      o += 14;
      c += 13;
    } else {
      if (maxnreg > 0 && line_start && ptx_entry_line(c, end)) in_entry = true;
      if (in_entry && line_start && *c == '{') {
        o += sprintf(o, ".maxnreg %d\n", maxnreg);
        in_entry = false;
      }
      *o++ = *c++;
    }
  }
  *o = '\0';
  return out;
}

/* The register cap the options ask for (0: none; at most 255, the most a
 * work-item can hold). */
static int ptx_maxnreg(const char *options) {
  const char *m = strstr(options, MAXNREG_OPT);
  if (!m) return 0;
  const long v = strtol(m + sizeof MAXNREG_OPT - 1, NULL, 10);
  return v <= 0 ? 0 : v > 255 ? 255 : (int)v;
}

static clattn_status ptx_route(clattn_context *ctx, const char *file, const char *options,
                               cl_program *prog) {
  size_t n = 0;
  if (clGetProgramInfo(*prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || !n)
    return CLATTN_SUCCESS;
  char *ptx = malloc(n + 1);
  if (!ptx) return clattn_fail(CLATTN_OUT_OF_MEMORY, "%s: PTX", file);
  if (clGetProgramInfo(*prog, CL_PROGRAM_BINARIES, sizeof ptx, &ptx, NULL) != CL_SUCCESS) {
    free(ptx);
    return CLATTN_SUCCESS;
  }
  ptx[n] = '\0';
  const int maxnreg = ptx_maxnreg(options);
  if (!strstr(ptx, PTX_MARK) && maxnreg <= 0) {
    free(ptx);
    return CLATTN_SUCCESS;
  }
  char *edited = clattn_ptx_patched(ptx, n, maxnreg);
  free(ptx);
  if (!edited) return clattn_fail(CLATTN_OUT_OF_MEMORY, "%s: PTX", file);
  const size_t len = strlen(edited);
  const unsigned char *bin = (const unsigned char *)edited;
  cl_int st = CL_SUCCESS, err = CL_SUCCESS;
  cl_program p = clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &len, &bin, &st, &err);
  free(edited);
  if (err == CL_SUCCESS) err = st;
  if (err == CL_SUCCESS) err = clBuildProgram(p, 1, &ctx->device, options, NULL, NULL);
  if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS) {
    /* a driver that takes no source options for PTX: none (ptxas's defaults) */
    clattn_log(ctx, CLATTN_LOG_DEBUG, "clattn: %s's PTX did not build with [%s] (%d); without options",
               file, options, (int)err);
    err = clBuildProgram(p, 1, &ctx->device, "", NULL, NULL);
  }
  if (err != CL_SUCCESS) {
    char *log = p ? build_log(ctx, p) : NULL;
    clattn_status s = clattn_fail(CLATTN_BUILD_ERROR,
                                  "building %s with [%s] through the sm_90a PTX route failed: %s (%d)\n%.4000s",
                                  file, options, clattn_cl_error_name(err), (int)err,
                                  log ? log : "(no log)");
    free(log);
    if (p) clReleaseProgram(p);
    return s;
  }
  clReleaseProgram(*prog);
  *prog = p;
  return CLATTN_SUCCESS;
}

/* Builds the program of `file` with the full `options`: from the disk cache
 * when its entry is good, else from source (storing the entry). Runs with
 * no lock held; the "building" and "built" debug messages bracket it. */
static clattn_status build(clattn_context *ctx, const char *file, const char *options,
                           const char *kernel_name, cl_program *out) {
  char *src = NULL;
  CLATTN_TRY(clattn_source_load(file, &src));
  clattn_log(ctx, CLATTN_LOG_DEBUG, "clattn: building %s [%s]", file, options);
  const double t0 = now_ms();
  char path[1200] = "";
  char *key = NULL;
  bool store = false;
  if (ctx->cache_dir[0] && (key = cache_key_text(ctx, file, src, options)) != NULL) {
    cache_path(ctx, key, path, sizeof path);
    char why[256] = "";
    cl_program p = NULL;
    switch (load_entry(ctx, path, key, options, kernel_name, &p, why, sizeof why)) {
    case LOAD_HIT:
      clattn_log(ctx, CLATTN_LOG_DEBUG, "clattn: built %s [%s] from disk cache in %.1f ms", file,
                 options, now_ms() - t0);
      free(key);
      free(src);
      *out = p;
      return CLATTN_SUCCESS;
    case LOAD_MISS: store = true; break;
    case LOAD_BAD:
      clattn_log(ctx, CLATTN_LOG_INFO,
                 "clattn: the cache entry %s (%s [%s]) %s: rebuilding and replacing it", path,
                 file, options, why);
      store = true;
      break;
    case LOAD_KEEP_OUT:
      clattn_log(ctx, CLATTN_LOG_INFO,
                 "clattn: the cache entry %s (%s [%s]) %s: building without caching", path, file,
                 options, why);
      break;
    }
  }
  cl_int err = CL_SUCCESS;
  const char *text = src;
  cl_program prog = clCreateProgramWithSource(ctx->cl, 1, &text, NULL, &err);
  free(src);
  if (err != CL_SUCCESS) {
    free(key);
    return clattn_fail_cl(err, "clCreateProgramWithSource", file);
  }
  err = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    char *log = build_log(ctx, prog);
    clattn_status s = clattn_fail(CLATTN_BUILD_ERROR, "building %s with [%s] failed: %s (%d)\n%.12000s",
                                  file, options, clattn_cl_error_name(err), (int)err,
                                  log ? log : "(no log)");
    free(log);
    free(key);
    clReleaseProgram(prog);
    return s;
  }
  if (ctx->profile.has_nv_ptx) { /* also with CLATTN_PORTABLE=1: a register cap is no vendor instruction */
    const clattn_status rs = ptx_route(ctx, file, options, &prog);
    if (rs != CLATTN_SUCCESS) {
      free(key);
      clReleaseProgram(prog);
      return rs;
    }
  }
  if (store) save_program(ctx, prog, path, key);
  free(key);
  if (ctx->opts.log && ctx->opts.log_level >= CLATTN_LOG_DEBUG) {
    /* compiler remarks (NVIDIA: registers and spills with -cl-nv-verbose) */
    char *log = build_log(ctx, prog);
    clattn_log(ctx, CLATTN_LOG_DEBUG, "clattn: built %s [%s] from source in %.1f ms\n%s", file,
               options, now_ms() - t0, log ? log : "");
    free(log);
  }
  *out = prog;
  return CLATTN_SUCCESS;
}

clattn_status clattn_program_cache_store(clattn_context *ctx, const char *file, const char *options,
                                         const void *payload, size_t size, char *path,
                                         size_t path_size) {
  if (!ctx || !ctx->cache_dir[0])
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx has no disk cache");
  char opts[4096];
  CLATTN_TRY(full_options(ctx, file, options, opts, sizeof opts));
  char *src = NULL;
  CLATTN_TRY(clattn_source_load(file, &src));
  char *key = cache_key_text(ctx, file, src, opts);
  free(src);
  if (!key) return clattn_fail(CLATTN_OUT_OF_MEMORY, "cache key");
  cache_path(ctx, key, path, path_size);
  const bool ok = store_entry(ctx, path, key, payload, size);
  free(key);
  return ok ? CLATTN_SUCCESS : clattn_fail(CLATTN_OPENCL_ERROR, "could not write %s", path);
}

/* ------------------------------------------------------------------ in-memory cache */

/* One variant's program. A thread that finds no entry inserts one in state
 * BUILDING and builds with the lock released; threads asking for the same
 * key wait on its condition variable, threads asking for other keys build
 * theirs meanwhile. A failed build is unlinked (a later call tries again)
 * and its waiters report the builder's status and message. */
typedef enum entry_state { ENTRY_BUILDING, ENTRY_READY, ENTRY_FAILED } entry_state;

typedef struct entry {
  char *key; /* file + '\n' + full options */
  entry_state state;
  cl_program program;  /* READY */
  clattn_status status; /* FAILED: the builder's status and message */
  char *message;
  int waiters; /* threads in cond_wait; the last one out frees a FAILED entry */
  pthread_cond_t done;
  struct entry *next;
} entry;

struct clattn_program_cache {
  pthread_mutex_t lock;
  entry *head;
};

clattn_status clattn_program_cache_create(struct clattn_program_cache **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return clattn_fail(CLATTN_OUT_OF_MEMORY, "program cache");
  if (pthread_mutex_init(&(*out)->lock, NULL) != 0) {
    free(*out);
    *out = NULL;
    return clattn_fail(CLATTN_OUT_OF_MEMORY, "program cache lock");
  }
  return CLATTN_SUCCESS;
}

static void entry_free(entry *e) {
  if (e->program) clReleaseProgram(e->program);
  pthread_cond_destroy(&e->done);
  free(e->message);
  free(e->key);
  free(e);
}

/* Called when no call on the context is in flight (clattn_context_release). */
void clattn_program_cache_free(struct clattn_program_cache *c) {
  if (!c) return;
  for (entry *e = c->head, *n; e; e = n) {
    n = e->next;
    entry_free(e);
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* Builds (or waits for another thread's build of) the program for `key`.
 * The program stays owned by the cache. */
static clattn_status cached_program(clattn_context *ctx, const char *file, const char *opts,
                                    const char *kernel_name, char *key, cl_program *out) {
  struct clattn_program_cache *c = ctx->programs;
  pthread_mutex_lock(&c->lock);
  entry *e = c->head;
  while (e && strcmp(e->key, key) != 0) e = e->next;
  if (e) {
    free(key);
    while (e->state == ENTRY_BUILDING) {
      e->waiters++;
      pthread_cond_wait(&e->done, &c->lock);
      e->waiters--;
    }
    if (e->state == ENTRY_READY) {
      *out = e->program;
      pthread_mutex_unlock(&c->lock);
      return CLATTN_SUCCESS;
    }
    clattn_status s = e->message ? clattn_fail(e->status, "%s", e->message)
                                 : clattn_fail(e->status, "building %s failed (in another thread)", file);
    if (e->waiters == 0) entry_free(e);
    pthread_mutex_unlock(&c->lock);
    return s;
  }
  e = calloc(1, sizeof *e);
  if (!e || pthread_cond_init(&e->done, NULL) != 0) {
    pthread_mutex_unlock(&c->lock);
    free(e);
    free(key);
    return clattn_fail(CLATTN_OUT_OF_MEMORY, "program cache entry");
  }
  e->key = key;
  e->state = ENTRY_BUILDING;
  e->next = c->head;
  c->head = e;
  pthread_mutex_unlock(&c->lock);

  cl_program prog = NULL;
  clattn_status s = build(ctx, file, opts, kernel_name, &prog);

  pthread_mutex_lock(&c->lock);
  if (s == CLATTN_SUCCESS) {
    e->program = prog;
    e->state = ENTRY_READY;
    *out = prog;
  } else {
    entry **pp = &c->head;
    while (*pp != e) pp = &(*pp)->next;
    *pp = e->next;
    e->state = ENTRY_FAILED;
    e->status = s;
    e->message = strdup(clattn_last_error());
  }
  pthread_cond_broadcast(&e->done);
  if (s != CLATTN_SUCCESS && e->waiters == 0) entry_free(e);
  pthread_mutex_unlock(&c->lock);
  return s;
}

clattn_status clattn_kernel_get(clattn_context *ctx, const char *file, const char *options,
                                const char *kernel_name, cl_kernel *out) {
  if (!ctx->programs) return clattn_fail(CLATTN_INVALID_ARGUMENT, "context has no program cache");
  char opts[4096];
  CLATTN_TRY(full_options(ctx, file, options, opts, sizeof opts));
  size_t klen = strlen(file) + 1 + strlen(opts) + 1;
  char *key = malloc(klen);
  if (!key) return clattn_fail(CLATTN_OUT_OF_MEMORY, "program key");
  snprintf(key, klen, "%s\n%s", file, opts);
  cl_program prog = NULL;
  CLATTN_TRY(cached_program(ctx, file, opts, kernel_name, key, &prog));
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
    if (ctx->opts.log && ctx->opts.log_level >= CLATTN_LOG_DEBUG) {
      cl_ulong lmem = 0, pmem = 0;
      clGetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
      clGetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof pmem, &pmem, NULL);
      clattn_log(ctx, CLATTN_LOG_DEBUG, "clattn: launching %s: work-group %zu (the kernel allows %zu), %llu bytes local, %llu private",
                 kernel_name, total, kmax, (unsigned long long)lmem, (unsigned long long)pmem);
    }
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

clattn_status clattn_args_launch(clattn_context *ctx, cl_command_queue queue, const clattn_args *a,
                                 const char *kernel_name, cl_uint dims, const size_t *global,
                                 const size_t *local, cl_uint num_wait, const cl_event *wait,
                                 cl_event *event) {
  clattn_status s = clattn_args_end(a, kernel_name);
  if (s == CLATTN_SUCCESS)
    s = clattn_launch(ctx, queue, a->kernel, kernel_name, dims, global, local, num_wait, wait, event);
  clReleaseKernel(a->kernel);
  return s;
}
