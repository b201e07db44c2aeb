/* Context lifetime: cycles that each create their own cl_context and a
 * clattn context on it, run decode, clattn_reference_decode (CLBlast),
 * merge, kv append, int4 quantize and ReRoPE (each checked against the CPU
 * reference), then release the clattn context, the queue and the
 * cl_context. Whatever a cycle leaves behind (a context retained by
 * CLBlast's program cache, with its programs and buffers) adds up, so the
 * resident size after the last cycle must stay within LEAK_BOUND_MB of the
 * size after cycle WARMUP.
 * CLATTN_LEAK_CYCLES sets the number of cycles (default 20). */
#include "common.h"
#include "workload.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* The first cycles grow the process for good (PoCL's and CLBlast's lazily
 * loaded code and per-device state, malloc's arenas); after these, a cycle
 * that frees what it made leaves the size flat. */
#define WARMUP 4
/* A bound on the growth from the end of cycle WARMUP to the end of the
 * last. On PoCL here a context retained by CLBlast cost 3 MB a cycle
 * (110 -> 190 MB from cycle 4 to 30, 48 MB over the default 16 cycles);
 * with every context released the size grew 2 MB up to cycle 8, then
 * stayed flat (+2.3 MB from cycle 4 to 30; +1.2 MB over 20 cycles once
 * malloc's free memory is trimmed, 86 MB in all): 12 MB leaves room for a
 * slower warm-up elsewhere, and catches a quarter of that leak. */
#define LEAK_BOUND_MB 12.0

/* The resident size of what is live: glibc's free lists (per-thread arenas,
 * which grow with contention: the same run gave +17 MB beside the other
 * suites and +5 MB alone) go back to the system first. */
static double rss_mb(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f) return -1.0;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1.0 : (double)resident * (double)sysconf(_SC_PAGESIZE) / (1 << 20);
}

static const wl_spec specs[] = {
    {WL_DECODE, CLATTN_F32, 32, 1},    {WL_REFERENCE_DECODE, CLATTN_F32, 32, 2},
    {WL_MERGE, CLATTN_F32, 32, 3},     {WL_KV_APPEND, CLATTN_F32, 16, 4},
    {WL_KV_QUANTIZE, CLATTN_F32, 32, 5}, {WL_REROPE, CLATTN_F32, 32, 6},
};
#define NSPECS (sizeof specs / sizeof specs[0])

static void test_cycles(void) {
  const char *env = getenv("CLATTN_LEAK_CYCLES");
  const int cycles = env && atoi(env) > WARMUP ? atoi(env) : 20;
  workload *w[NSPECS];
  for (size_t i = 0; i < NSPECS; i++) {
    w[i] = wl_create(&specs[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w[i]);
  }
  double early = 0.0, late = 0.0;
  for (int cycle = 1; cycle <= cycles; cycle++) {
    cl_int err = CL_SUCCESS;
    cl_context cl = clCreateContext(NULL, 1, &fx.dev, NULL, NULL, &err);
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
    clattn_context *ctx = NULL;
    CHECK_OK(clattn_context_create(cl, fx.dev, NULL, &ctx)); /* the tests' disk cache */
    cl_command_queue queue = clCreateCommandQueue(cl, fx.dev, 0, &err);
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
    for (size_t i = 0; i < NSPECS; i++) {
      char msg[1024];
      if (wl_run(w[i], ctx, queue, msg, sizeof msg) != 0) {
        fprintf(stderr, "  cycle %d, %s: %s\n", cycle, wl_name(w[i]), msg);
        CU_FAIL("a workload failed");
      }
    }
    clReleaseCommandQueue(queue);
    clattn_context_release(&ctx);
    clReleaseContext(cl);
    const double rss = rss_mb();
    if (cycle == WARMUP) early = rss;
    if (cycle == cycles) late = rss;
    if (getenv("CLATTN_TEST_VERBOSE")) fprintf(stderr, "  cycle %d: RSS %.1f MB\n", cycle, rss);
  }
  fprintf(stderr, "  RSS %.1f MB after cycle %d, %.1f MB after cycle %d: %+.1f MB (bound %.0f)\n",
          early, WARMUP, late, cycles, late - early, LEAK_BOUND_MB);
  CU_ASSERT(early > 0.0 && late > 0.0);
  CU_ASSERT(late - early <= LEAK_BOUND_MB);
  for (size_t i = 0; i < NSPECS; i++) wl_free(w[i]);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("leak", fixture_init, fixture_cleanup);
  CU_add_test(s, "create / run / release cycles", test_cycles);
  return run_suites();
}
