/* Eight threads on one clattn context, each with its own queue, build and
 * run different variants at once: decode in f32, f16 and bf16 at three head
 * dims (two threads on the same f32 variant), merge, int4 quantize, f16
 * append and ReRoPE. Every result is checked against the CPU reference;
 * each variant is built once per context; builds of different variants
 * overlap in time (the debug log's "building" / "built" messages, stamped
 * here), which they cannot while one lock is held across a build. Then the
 * warm context again (nothing built), a fresh context over the same disk
 * cache (every variant loaded from it at once), and four threads asking for
 * one variant that fails to build (each reports the build log). Run under
 * ThreadSanitizer by .ci/jobs/tsan.sh. */
#include "common.h"
#include "internal.h"
#include "workload.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8

/* ---------------------------------------------------------------- the build log */

typedef struct record {
  double t_ms;
  pthread_t thread;
  bool start; /* "clattn: building ..." (else "clattn: built ...") */
  char text[1024]; /* the message's first line */
} record;

#define MAX_RECORDS 256
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static record records[MAX_RECORDS];
static int nrecords;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Called from every thread that builds (the contexts' log callback). */
static void on_log(void *priv, clattn_log_level level, const char *msg) {
  (void)priv, (void)level;
  const bool start = strncmp(msg, "clattn: building ", 17) == 0;
  if (!start && strncmp(msg, "clattn: built ", 14) != 0) return;
  const double t = now_ms();
  pthread_mutex_lock(&log_lock);
  if (nrecords < MAX_RECORDS) {
    record *r = &records[nrecords++];
    r->t_ms = t;
    r->thread = pthread_self();
    r->start = start;
    size_t n = strcspn(msg, "\n");
    snprintf(r->text, sizeof r->text, "%.*s", (int)n, msg);
  }
  pthread_mutex_unlock(&log_lock);
}

static void log_reset(void) {
  pthread_mutex_lock(&log_lock);
  nrecords = 0;
  pthread_mutex_unlock(&log_lock);
}

typedef struct interval {
  const char *key; /* "decode.cl [options]" */
  double t0, t1;
  bool from_disk;
} interval;

/* Pairs each "building" with the next "built" of its thread. */
static int intervals(interval *out) {
  int n = 0;
  for (int i = 0; i < nrecords; i++) {
    if (!records[i].start) continue;
    interval iv = {records[i].text + 17, records[i].t_ms, -1.0, false};
    for (int j = i + 1; j < nrecords; j++)
      if (!records[j].start && pthread_equal(records[j].thread, records[i].thread)) {
        iv.t1 = records[j].t_ms;
        iv.from_disk = strstr(records[j].text, "from disk cache") != NULL;
        break;
      }
    if (iv.t1 < 0) {
      fprintf(stderr, "  no \"built\" message after \"%s\"\n", records[i].text);
      CU_FAIL("a build never finished");
      continue;
    }
    out[n++] = iv;
  }
  return n;
}

/* ---------------------------------------------------------------- running */

typedef struct job {
  const workload *w;
  clattn_context *ctx;
  cl_command_queue queue;
  pthread_barrier_t *start;
  int rc;
  char msg[1024];
} job;

static void *worker(void *arg) {
  job *j = arg;
  pthread_barrier_wait(j->start); /* all threads reach clattn at once */
  j->rc = wl_run(j->w, j->ctx, j->queue, j->msg, sizeof j->msg);
  return NULL;
}

static const wl_spec specs[THREADS] = {
    {WL_DECODE, CLATTN_F32, 32, 1},
    {WL_DECODE, CLATTN_F32, 32, 2}, /* the same variant as thread 0 */
    {WL_DECODE, CLATTN_F16, 64, 3},
    {WL_DECODE, CLATTN_BF16, 16, 4},
    {WL_MERGE, CLATTN_F32, 32, 5},
    {WL_KV_QUANTIZE, CLATTN_F32, 32, 6},
    {WL_KV_APPEND, CLATTN_F32, 16, 7},
    {WL_REROPE, CLATTN_F32, 32, 8},
};
static workload *loads[THREADS];
static cl_command_queue queues[THREADS];

/* One round: every thread runs its workload on ctx once; results checked. */
static void round_on(clattn_context *ctx, const char *what) {
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t th[THREADS];
  job jobs[THREADS];
  log_reset();
  for (int i = 0; i < THREADS; i++) {
    jobs[i] = (job){loads[i], ctx, queues[i], &start, -1, ""};
    pthread_create(&th[i], NULL, worker, &jobs[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    if (jobs[i].rc != 0) fprintf(stderr, "  %s, %s: %s\n", what, wl_name(loads[i]), jobs[i].msg);
    CU_ASSERT_EQUAL(jobs[i].rc, 0);
  }
  pthread_barrier_destroy(&start);
}

static void check_once_each(const interval *iv, int n) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (strcmp(iv[i].key, iv[j].key) == 0) {
        fprintf(stderr, "  built twice on one context: %.200s\n", iv[i].key);
        CU_FAIL("a variant was built twice on one context");
      }
}

static void temp_dir(char *dir, size_t size) {
  const char *base = getenv("CLATTN_CACHE_DIR");
  snprintf(dir, size, "%s/threads-XXXXXX", base && *base ? base : "/tmp");
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (e->d_name[0] != '.') unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static clattn_context *context_on(const char *dir) {
  clattn_context_options opts = {0};
  opts.cache_dir = dir;
  opts.log = on_log;
  opts.log_level = CLATTN_LOG_DEBUG;
  clattn_context *c = NULL;
  CHECK_OK(clattn_context_create(fx.cl, fx.dev, &opts, &c));
  return c;
}

static void test_concurrent_builds(void) {
  for (int i = 0; i < THREADS; i++) {
    loads[i] = wl_create(&specs[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loads[i]);
    cl_int err = CL_SUCCESS;
    queues[i] = clCreateCommandQueue(fx.cl, fx.dev, 0, &err);
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  }
  char dir[1024];
  temp_dir(dir, sizeof dir);
  interval iv[MAX_RECORDS];

  /* 1. an empty disk cache: every variant built from source, all at once */
  clattn_context *ctx = context_on(dir);
  round_on(ctx, "cold");
  int n = intervals(iv);
  CU_ASSERT(n >= 7); /* at least one program per distinct workload */
  check_once_each(iv, n);
  int overlapping = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (strcmp(iv[i].key, iv[j].key) != 0 && iv[i].t0 < iv[j].t1 && iv[j].t0 < iv[i].t1)
        overlapping++;
  if (overlapping == 0 || getenv("CLATTN_TEST_VERBOSE")) {
    fprintf(stderr, "  %d pairs of builds overlapped in time:\n", overlapping);
    for (int i = 0; i < n; i++)
      fprintf(stderr, "    %10.1f .. %10.1f ms  %.80s\n", iv[i].t0 - iv[0].t0, iv[i].t1 - iv[0].t0,
              iv[i].key);
  }
  CU_ASSERT(overlapping > 0);
  for (int i = 0; i < n; i++) CU_ASSERT(!iv[i].from_disk);

  /* 2. the warm context: every program from memory */
  round_on(ctx, "warm");
  CU_ASSERT_EQUAL(intervals(iv), 0);
  clattn_context_release(&ctx);

  /* 3. a fresh context over the same folder: every variant loaded from the disk at once */
  ctx = context_on(dir);
  round_on(ctx, "from disk");
  int m = intervals(iv);
  CU_ASSERT_EQUAL(m, n);
  check_once_each(iv, m);
  for (int i = 0; i < m; i++) {
    if (!iv[i].from_disk) fprintf(stderr, "  not from the disk cache: %.200s\n", iv[i].key);
    CU_ASSERT(iv[i].from_disk);
  }
  clattn_context_release(&ctx);

  for (int i = 0; i < THREADS; i++) {
    wl_free(loads[i]);
    clReleaseCommandQueue(queues[i]);
  }
  remove_dir(dir);
}

/* ---------------------------------------------------------------- a failing build */

typedef struct bad_job {
  clattn_context *ctx;
  pthread_barrier_t *start;
  clattn_status status;
  char msg[256];
} bad_job;

static void *bad_worker(void *arg) {
  bad_job *j = arg;
  pthread_barrier_wait(j->start);
  cl_kernel k = NULL;
  j->status = clattn_kernel_get(j->ctx, "decode.cl", "-DQ_DT=not_a_dtype", "clattn_decode_partial", &k);
  snprintf(j->msg, sizeof j->msg, "%s", clattn_last_error());
  if (k) clReleaseKernel(k);
  return NULL;
}

/* Whoever built it, every thread gets the failure and the log (waiters
 * report the builder's status and message); the failure is not kept, so a
 * later call builds again. */
static void test_failed_build(void) {
  enum { N = 4 };
  clattn_context_options opts = {0};
  opts.cache_dir = "";
  clattn_context *ctx = NULL;
  CHECK_OK(clattn_context_create(fx.cl, fx.dev, &opts, &ctx));
  for (int round = 0; round < 2; round++) {
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    pthread_t th[N];
    bad_job jobs[N];
    for (int i = 0; i < N; i++) {
      jobs[i] = (bad_job){ctx, &start, CLATTN_SUCCESS, ""};
      pthread_create(&th[i], NULL, bad_worker, &jobs[i]);
    }
    for (int i = 0; i < N; i++) {
      pthread_join(th[i], NULL);
      CU_ASSERT_EQUAL(jobs[i].status, CLATTN_BUILD_ERROR);
      CU_ASSERT_PTR_NOT_NULL(strstr(jobs[i].msg, "not_a_dtype"));
    }
    pthread_barrier_destroy(&start);
  }
  clattn_context_release(&ctx);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("threads", fixture_init, fixture_cleanup);
  CU_add_test(s, "8 threads build different variants at once", test_concurrent_builds);
  CU_add_test(s, "4 threads wait on one failing build", test_failed_build);
  return run_suites();
}
