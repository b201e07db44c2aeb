/* The on-disk program cache against bad entries. One decode variant's entry
 * is damaged in each way that once gave wrong results, aborted, blocked or
 * failed every run: (a) another variant's entry copied under its name,
 * (b) the entry truncated, (c) random bytes past its first 64, (d) a directory in
 * its place, (e) a FIFO in its place, (f) another kernel's entry copied
 * under its name, (g) a valid header for its key around another kernel's
 * binary. Two fresh contexts then run the variant: both must match the CPU
 * reference without blocking or an absurd allocation, and the first must
 * have rebuilt the entry so that the second loads it from the disk (a
 * directory is left alone and the variant is not cached). */
#include "common.h"
#include "internal.h"
#include "ref.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- allocations */

/* The suite links with -Wl,--wrap=malloc: every malloc of the library's
 * objects passes here, so a read of a directory "file" (once 2^63 bytes) shows. */
void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
static _Atomic size_t largest_malloc;
void *__wrap_malloc(size_t n) {
  size_t m = atomic_load(&largest_malloc);
  while (n > m && !atomic_compare_exchange_weak(&largest_malloc, &m, n)) {
  }
  return __real_malloc(n);
}
/* Far above any program binary or kernel source. */
#define MALLOC_LIMIT ((size_t)1 << 30)

/* ---------------------------------------------------------------- files */

static bool read_all(const char *path, unsigned char **out, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc(len > 0 ? (size_t)len : 1);
  *n = fread(*out, 1, len > 0 ? (size_t)len : 0, f);
  fclose(f);
  return *n == (size_t)len;
}

static bool write_file(const char *path, const unsigned char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(p, 1, n, f) == n;
  return (fclose(f) == 0) && ok;
}

static void remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char sub[2048];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      remove_tree(sub);
    }
    if (d) closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

/* A fresh folder under $CLATTN_CACHE_DIR (the build folder in meson test), else /tmp. */
static void temp_dir(char *dir, size_t size) {
  const char *base = getenv("CLATTN_CACHE_DIR");
  snprintf(dir, size, "%s/cache-test-XXXXXX", base && *base ? base : "/tmp");
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
}

#define MAX_BINS 16

/* The .bin entries in dir. */
static int list_bins(const char *dir, char names[MAX_BINS][256]) {
  int n = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0 && n < MAX_BINS)
      snprintf(names[n++], 256, "%s", e->d_name);
  }
  if (d) closedir(d);
  return n;
}

/* ---------------------------------------------------------------- runs */

/* What a context logged: loads from the disk cache and builds from source
 * (the debug messages of clattn_kernel_get's builds). */
typedef struct capture {
  int disk_hits, source_builds;
} capture;

static void on_log(void *priv, clattn_log_level level, const char *msg) {
  (void)level;
  capture *c = priv;
  if (strstr(msg, "from disk cache"))
    c->disk_hits++;
  else if (strncmp(msg, "clattn: built ", 14) == 0)
    c->source_builds++;
}

static clattn_context *context_on(const char *dir, capture *cap) {
  clattn_context_options opts = {0};
  opts.cache_dir = dir;
  opts.log = on_log;
  opts.log_priv = cap;
  opts.log_level = CLATTN_LOG_DEBUG;
  clattn_context *c = NULL;
  CHECK_OK(clattn_context_create(fx.cl, fx.dev, &opts, &c));
  return c;
}

/* The decode problem: four queries over 37 keys; the causal and the
 * non-causal variant differ in every query but the last, so one's binary
 * in the other's place shows in the results. One split: decode.cl only. */
enum { B = 1, MQ = 4, HQ = 2, HKV = 1, D = 16, N = 37 };
#define NQ ((size_t)B * MQ * HQ * D)
#define NKV ((size_t)B * N * HKV * D)
static double q[NQ], k[NKV], v[NKV], want[2][NQ];
static cl_mem q_m, k_m, v_m, o_m;

static void problem_init(void) {
  if (q_m) return;
  rng_seed(18);
  for (size_t i = 0; i < NQ; i++) q[i] = rng_normal();
  for (size_t i = 0; i < NKV; i++) k[i] = rng_normal(), v[i] = rng_normal();
  for (int causal = 0; causal < 2; causal++) {
    ref_decode_args ra = {B, MQ, HQ, HKV, D, N, q, k, v, NULL, NULL, NULL,
                          1.0 / sqrt((double)D), causal, want[causal], NULL};
    ref_decode(&ra);
  }
  q_m = buf_from(q, NQ, CLATTN_F32);
  k_m = buf_from(k, NKV, CLATTN_F32);
  v_m = buf_from(v, NKV, CLATTN_F32);
  o_m = buf_zeros(NQ * 4);
}

static clattn_decode_params decode_params(int causal) {
  clattn_decode_params p;
  memset(&p, 0, sizeof p);
  p.q = clattn_tensor_4d(q_m, 0, CLATTN_F32, B, MQ, HQ, D);
  p.k = clattn_tensor_4d(k_m, 0, CLATTN_F32, B, N, HKV, D);
  p.v = clattn_tensor_4d(v_m, 0, CLATTN_F32, B, N, HKV, D);
  p.o = clattn_tensor_4d(o_m, 0, CLATTN_F32, B, MQ, HQ, D);
  p.causal = causal;
  p.num_splits = 1;
  return p;
}

/* Runs the variant on a fresh context over dir and checks it against the
 * reference; returns what the context logged. */
static capture run_decode(const char *dir, int causal, const char *label) {
  capture cap = {0, 0};
  clattn_context *c = context_on(dir, &cap);
  cl_mem poison = buf_poison(NQ * 4); /* o starts as NaN: an unwritten output shows */
  CU_ASSERT_EQUAL(clEnqueueCopyBuffer(fx.queue, poison, o_m, 0, 0, NQ * 4, 0, NULL, NULL),
                  CL_SUCCESS);
  clattn_decode_params p = decode_params(causal);
  clattn_status s = clattn_decode(c, fx.queue, &p, 0, NULL, NULL);
  if (s != CLATTN_SUCCESS)
    fprintf(stderr, "  %s: clattn_decode -> %s: %s\n", label, clattn_status_string(s),
            clattn_last_error());
  CU_ASSERT_EQUAL(s, CLATTN_SUCCESS);
  finish();
  double got[NQ];
  buf_read(o_m, 0, NQ, CLATTN_F32, got);
  check_close(label, got, want[causal], NQ, 1e-5, 1e-5); /* f32 storage, 37 terms */
  buf_release(&poison);
  clattn_context_release(&c);
  return cap;
}

/* Another kernel: the reference path's staging kernel, one program. */
#define OTHER_FILE "baseline.cl"
#define OTHER_OPTIONS "-DSRC_DT=f32 -DVARLEN=0"
#define OTHER_KERNEL "clattn_baseline_stage"

static void build_other(const char *dir, unsigned char **binary, size_t *size) {
  capture cap = {0, 0};
  clattn_context *c = context_on(dir, &cap);
  cl_kernel kern = NULL;
  CHECK_OK(clattn_kernel_get(c, OTHER_FILE, OTHER_OPTIONS, OTHER_KERNEL, &kern));
  if (binary) {
    cl_program prog = NULL;
    clGetKernelInfo(kern, CL_KERNEL_PROGRAM, sizeof prog, &prog, NULL);
    CU_ASSERT_EQUAL(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof *size, size, NULL),
                    CL_SUCCESS);
    *binary = malloc(*size);
    CU_ASSERT_EQUAL(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof *binary, binary, NULL),
                    CL_SUCCESS);
  }
  clReleaseKernel(kern);
  clattn_context_release(&c);
}

/* Runs `step` on dir and returns the one entry it added (its path). */
#define ADDED_ENTRY(dir, path, step)                                                       \
  do {                                                                                     \
    char before_[MAX_BINS][256], after_[MAX_BINS][256];                                    \
    int nb_ = list_bins(dir, before_);                                                     \
    step;                                                                                  \
    int na_ = list_bins(dir, after_);                                                      \
    CU_ASSERT_EQUAL_FATAL(na_, nb_ + 1);                                                   \
    for (int i_ = 0; i_ < na_; i_++) {                                                     \
      bool old_ = false;                                                                   \
      for (int j_ = 0; j_ < nb_; j_++) old_ |= strcmp(after_[i_], before_[j_]) == 0;       \
      if (!old_) snprintf(path, sizeof path, "%.1000s/%.255s", dir, after_[i_]);                    \
    }                                                                                      \
  } while (0)

/* ---------------------------------------------------------------- FIFO watchdog */

/* Opens the FIFO for writing after a minute of the run not finishing: a
 * reader blocked in open() returns, the test goes on and fails. */
typedef struct watchdog {
  const char *fifo;
  pthread_mutex_t lock;
  pthread_cond_t cv;
  bool done, fired;
} watchdog;

static void *watch(void *arg) {
  watchdog *w = arg;
  pthread_mutex_lock(&w->lock);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 60;
  while (!w->done) {
    if (pthread_cond_timedwait(&w->cv, &w->lock, &until) != ETIMEDOUT) continue;
    w->fired = true;
    int fd = open(w->fifo, O_WRONLY | O_NONBLOCK); /* succeeds only while a reader waits */
    if (fd >= 0) close(fd);
    until.tv_sec += 1;
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

/* ---------------------------------------------------------------- the cases */

typedef enum damage {
  COPY_VARIANT,
  TRUNCATE,
  RANDOM_BYTES,
  DIRECTORY,
  FIFO,
  COPY_KERNEL,
  FORGED_KERNEL
} damage;

static const char *damage_name[] = {"another variant's entry", "truncated", "random bytes",
                                    "a directory", "a FIFO", "another kernel's entry",
                                    "another kernel's binary under a valid header"};

static void check_damage(damage d) {
  problem_init();
  atomic_store(&largest_malloc, 0);
  char dir[1024], variant[1400] = "", kernel[1400] = "", victim[1400] = "";
  temp_dir(dir, sizeof dir);
  /* the entries: the non-causal variant, another kernel, then the causal one (the victim) */
  ADDED_ENTRY(dir, variant, run_decode(dir, 0, "decode, the other variant"));
  unsigned char *other_bin = NULL;
  size_t other_size = 0;
  ADDED_ENTRY(dir, kernel, build_other(dir, &other_bin, &other_size));
  ADDED_ENTRY(dir, victim, run_decode(dir, 1, "decode, first build"));

  unsigned char *bytes = NULL, *damaged = NULL;
  size_t n = 0, damaged_n = 0;
  CU_ASSERT_FATAL(read_all(victim, &bytes, &n) && n > 64);
  switch (d) {
  case COPY_VARIANT:
  case COPY_KERNEL:
    CU_ASSERT_FATAL(read_all(d == COPY_VARIANT ? variant : kernel, &damaged, &damaged_n));
    CU_ASSERT_FATAL(write_file(victim, damaged, damaged_n));
    break;
  case TRUNCATE:
    damaged_n = n / 2;
    damaged = malloc(damaged_n);
    CU_ASSERT_FATAL(damaged != NULL);
    memcpy(damaged, bytes, damaged_n);
    CU_ASSERT_FATAL(write_file(victim, damaged, damaged_n));
    break;
  case RANDOM_BYTES:
    /* past its first 64 bytes, so a driver's own magic number still matches */
    damaged_n = n;
    damaged = malloc(n);
    CU_ASSERT_FATAL(damaged != NULL);
    for (size_t i = 0; i < n; i++) damaged[i] = i < 64 ? bytes[i] : (unsigned char)rng_u64();
    CU_ASSERT_FATAL(write_file(victim, damaged, damaged_n));
    break;
  case DIRECTORY: {
    CU_ASSERT_FATAL(unlink(victim) == 0 && mkdir(victim, 0755) == 0);
    char inside[1500];
    snprintf(inside, sizeof inside, "%s/keep", victim); /* must survive */
    CU_ASSERT_FATAL(write_file(inside, (const unsigned char *)"x", 1));
    break;
  }
  case FIFO: CU_ASSERT_FATAL(unlink(victim) == 0 && mkfifo(victim, 0644) == 0); break;
  case FORGED_KERNEL: {
    /* the victim's own key (decode's options for this problem) around the other binary */
    capture cap = {0, 0};
    clattn_context *c = context_on(dir, &cap);
    clattn_decode_params p = decode_params(1);
    char opts[1024], path[1300];
    CHECK_OK(clattn_decode_build_options(c, &p, opts, sizeof opts));
    CHECK_OK(clattn_program_cache_store(c, "decode.cl", opts, other_bin, other_size, path,
                                        sizeof path));
    CU_ASSERT_STRING_EQUAL(path, victim); /* the hook names the entry decode looks up */
    clattn_context_release(&c);
    CU_ASSERT_FATAL(read_all(victim, &damaged, &damaged_n));
    break;
  }
  }

  watchdog w = {.fifo = victim, .done = false, .fired = false};
  pthread_t th;
  if (d == FIFO) {
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_create(&th, NULL, watch, &w);
  }
  char label[128];
  snprintf(label, sizeof label, "decode over %s, first run", damage_name[d]);
  capture first = run_decode(dir, 1, label);
  snprintf(label, sizeof label, "decode over %s, second run", damage_name[d]);
  capture second = run_decode(dir, 1, label);
  if (d == FIFO) {
    pthread_mutex_lock(&w.lock);
    w.done = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.lock);
    pthread_join(th, NULL);
    if (w.fired) fprintf(stderr, "  a run blocked on the FIFO for a minute\n");
    CU_ASSERT(!w.fired);
  }

  /* the first run rebuilt from source, the second loaded its replacement */
  if (first.source_builds != 1 || second.disk_hits != (d == DIRECTORY ? 0 : 1))
    fprintf(stderr, "  %s: first run %d source builds, %d disk loads; second %d, %d\n",
            damage_name[d], first.source_builds, first.disk_hits, second.source_builds,
            second.disk_hits);
  CU_ASSERT_EQUAL(first.source_builds, 1);
  CU_ASSERT_EQUAL(first.disk_hits, 0);
  CU_ASSERT_EQUAL(second.source_builds, d == DIRECTORY ? 1 : 0);
  CU_ASSERT_EQUAL(second.disk_hits, d == DIRECTORY ? 0 : 1);
  struct stat st;
  CU_ASSERT_FATAL(lstat(victim, &st) == 0);
  if (d == DIRECTORY) {
    CU_ASSERT(S_ISDIR(st.st_mode)); /* left alone, the file inside too */
    char inside[1500];
    snprintf(inside, sizeof inside, "%s/keep", victim);
    CU_ASSERT(access(inside, F_OK) == 0);
  } else {
    CU_ASSERT(S_ISREG(st.st_mode));
    unsigned char *now = NULL;
    size_t now_n = 0;
    CU_ASSERT(read_all(victim, &now, &now_n));
    if (damaged) CU_ASSERT(now_n != damaged_n || memcmp(now, damaged, now_n) != 0);
    free(now);
  }
  /* no temporary file left behind */
  DIR *dd = opendir(dir);
  for (struct dirent *e; dd && (e = readdir(dd));) CU_ASSERT_PTR_NULL(strstr(e->d_name, ".tmp"));
  if (dd) closedir(dd);
  if (atomic_load(&largest_malloc) > MALLOC_LIMIT)
    fprintf(stderr, "  %s: the library asked malloc for %zu bytes\n", damage_name[d],
            atomic_load(&largest_malloc));
  CU_ASSERT(atomic_load(&largest_malloc) <= MALLOC_LIMIT);
  free(bytes);
  free(damaged);
  free(other_bin);
  remove_tree(dir);
}

static void test_copy_variant(void) { check_damage(COPY_VARIANT); }
static void test_truncated(void) { check_damage(TRUNCATE); }
static void test_random(void) { check_damage(RANDOM_BYTES); }
static void test_directory(void) { check_damage(DIRECTORY); }
static void test_fifo(void) { check_damage(FIFO); }
static void test_copy_kernel(void) { check_damage(COPY_KERNEL); }
static void test_forged_kernel(void) { check_damage(FORGED_KERNEL); }

/* A cache folder that cannot be written (a file in its place): builds work, nothing is stored. */
static void test_unwritable(void) {
  problem_init();
  char dir[1024], file[1100];
  temp_dir(dir, sizeof dir);
  snprintf(file, sizeof file, "%s/not-a-folder", dir);
  CU_ASSERT_FATAL(write_file(file, (const unsigned char *)"x", 1));
  for (int round = 0; round < 2; round++) {
    capture cap = run_decode(file, 1, "decode, cache folder is a file");
    CU_ASSERT_EQUAL(cap.source_builds, 1);
    CU_ASSERT_EQUAL(cap.disk_hits, 0);
  }
  remove_tree(dir);
}

static int cleanup(void) {
  buf_release(&q_m);
  buf_release(&k_m);
  buf_release(&v_m);
  buf_release(&o_m);
  return fixture_cleanup();
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("cache", fixture_init, cleanup);
  CU_add_test(s, "bad entry: another variant's entry", test_copy_variant);
  CU_add_test(s, "bad entry: truncated", test_truncated);
  CU_add_test(s, "bad entry: random bytes", test_random);
  CU_add_test(s, "bad entry: a directory", test_directory);
  CU_add_test(s, "bad entry: a FIFO", test_fifo);
  CU_add_test(s, "bad entry: another kernel's entry", test_copy_kernel);
  CU_add_test(s, "bad entry: another kernel's binary, valid header", test_forged_kernel);
  CU_add_test(s, "cache folder that cannot be written", test_unwritable);
  return run_suites();
}
