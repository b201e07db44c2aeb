/* Host layer: status strings, device selection and profile, tuning table
 * and override file, tensor checks, program cache (memory and disk), build
 * errors carrying the log, and concurrent use from two threads. */
#include "common.h"
#include "internal.h"
#include "ref.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_status_strings(void) {
  CU_ASSERT_STRING_EQUAL(clattn_status_string(CLATTN_SUCCESS), "CLATTN_SUCCESS");
  CU_ASSERT_STRING_EQUAL(clattn_status_string(CLATTN_OUT_OF_BOUNDS), "CLATTN_OUT_OF_BOUNDS");
  CU_ASSERT_STRING_EQUAL(clattn_status_string(CLATTN_BUILD_ERROR), "CLATTN_BUILD_ERROR");
  CU_ASSERT_STRING_EQUAL(clattn_status_string((clattn_status)99), "CLATTN_UNKNOWN_STATUS");
  CU_ASSERT_STRING_EQUAL(clattn_dtype_name(CLATTN_BF16), "bf16");
  CU_ASSERT_EQUAL(clattn_dtype_size(CLATTN_F16), 2);
}

static void test_device_selection(void) {
  cl_uint n = 0;
  CHECK_OK(clattn_device_count(&n));
  CU_ASSERT(n >= 1);
  cl_device_id d = NULL;
  CHECK_OK(clattn_device_get(0, &d));
  CU_ASSERT_PTR_NOT_NULL(d);
  CHECK_FAILS(clattn_device_get(n, &d), CLATTN_NO_DEVICE, "out of range");
  clattn_context *c = NULL;
  CHECK_FAILS(clattn_context_create_selected("no-such-device-xyz", NULL, &c), CLATTN_NO_DEVICE,
              "no-such-device-xyz");
  CU_ASSERT_PTR_NULL(c);
  CHECK_FAILS(clattn_context_create_selected("9999", NULL, &c), CLATTN_NO_DEVICE, "9999");
  /* by index and by a name substring of the fixture's device */
  clattn_device_profile p;
  CHECK_OK(clattn_context_profile(fx.ctx, &p));
  CHECK_OK(clattn_context_create_selected("0", NULL, &c));
  clattn_context_release(&c);
  CU_ASSERT_PTR_NULL(c);
  clattn_context_release(&c); /* NULL is fine */
  char sub[8];
  snprintf(sub, sizeof sub, "%.6s", p.name);
  CHECK_OK(clattn_context_create_selected(sub, NULL, &c));
  clattn_context_release(&c);
  CHECK_FAILS(clattn_context_create(NULL, fx.dev, NULL, &c), CLATTN_INVALID_ARGUMENT, "cl_ctx");
  CHECK_FAILS(clattn_context_create(fx.cl, NULL, NULL, &c), CLATTN_INVALID_ARGUMENT, "device");
}

static void test_profile(void) {
  clattn_device_profile p;
  CHECK_OK(clattn_context_profile(fx.ctx, &p));
  CU_ASSERT(p.compute_units >= 1);
  CU_ASSERT(p.simd_width >= 1);
  CU_ASSERT(p.local_mem_bytes >= 16384);
  CU_ASSERT(p.max_work_group_size >= 64);
  CU_ASSERT(strlen(p.arch) > 0);
  CU_ASSERT(strlen(p.driver_version) > 0);
  CHECK_FAILS(clattn_device_profile_query(NULL, &p), CLATTN_INVALID_ARGUMENT, "NULL");
}

static void test_tuning(void) {
  clattn_device_profile p;
  memset(&p, 0, sizeof p);
  p.max_work_group_size = 1024;
  clattn_tuning t;
  snprintf(p.arch, sizeof p.arch, "nvidia-sm90");
  clattn_tuning_lookup(&p, NULL, &t);
  CU_ASSERT_EQUAL(t.decode_wg, 128);
  snprintf(p.arch, sizeof p.arch, "some-unknown-device");
  clattn_tuning_lookup(&p, NULL, &t);
  CU_ASSERT(t.decode_wg >= 32); /* the generic row */
  /* a small device caps work-group sizes */
  p.max_work_group_size = 32;
  clattn_tuning_lookup(&p, NULL, &t);
  CU_ASSERT(t.decode_wg <= 32 && t.merge_wg <= 32);
  /* override file: known keys applied, unknown and bad lines ignored */
  p.max_work_group_size = 1024;
  char path[] = "/tmp/clattn-tuning-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  clattn_tuning w;
  clattn_tuning_lookup(&p, NULL, &w);
  CU_ASSERT(clattn_tuning_set(&w, "decode_wg", 256));
  CU_ASSERT(!clattn_tuning_set(&w, "no_such_key", 1));
  CHECK_OK(clattn_tuning_write(&w, path));
  FILE *f = fopen(path, "a");
  fprintf(f, "bogus=12\ndecode_max_splits=-5\n# comment\n");
  fclose(f);
  clattn_tuning_lookup(&p, path, &t);
  CU_ASSERT_EQUAL(t.decode_wg, 256);
  CU_ASSERT_EQUAL(t.decode_max_splits, w.decode_max_splits);
  remove(path);
}

static void test_tensor_checks(void) {
  cl_mem m = buf_zeros(1024);
  clattn_tensor t = clattn_tensor_2d(m, 0, CLATTN_F32, 16, 16);
  CHECK_OK(clattn_check_tensor(&t, "x", 2, CLATTN_FLOAT_DTYPES));
  t.shape[0] = 17;
  CHECK_FAILS(clattn_check_tensor(&t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_OUT_OF_BOUNDS,
              "reaches byte 1088, but the buffer holds 1024 bytes");
  t = clattn_tensor_2d(m, 0, CLATTN_F32, 0, 1000000);
  CHECK_OK(clattn_check_tensor(&t, "x", 2, CLATTN_FLOAT_DTYPES)); /* empty: touches nothing */
  t = clattn_tensor_2d(m, 6, CLATTN_F32, 2, 2);
  CHECK_FAILS(clattn_check_tensor(&t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_INVALID_ARGUMENT,
              "x.offset (6 bytes)");
  t = clattn_tensor_2d(m, 0, CLATTN_I32, 2, 2);
  CHECK_FAILS(clattn_check_tensor(&t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_UNSUPPORTED, "x.dtype i32");
  buf_release(&m);
}

static void test_program_cache(void) {
  /* Same variant twice: the second comes from the in-memory cache. */
  cl_kernel k1 = NULL, k2 = NULL;
  CHECK_OK(clattn_kernel_get(fx.ctx, "decode.cl", "-DD=32", "clattn_decode_partial", &k1));
  cl_program p1 = NULL, p2 = NULL;
  clGetKernelInfo(k1, CL_KERNEL_PROGRAM, sizeof p1, &p1, NULL);
  CHECK_OK(clattn_kernel_get(fx.ctx, "decode.cl", "-DD=32", "clattn_decode_partial", &k2));
  clGetKernelInfo(k2, CL_KERNEL_PROGRAM, sizeof p2, &p2, NULL);
  CU_ASSERT_PTR_EQUAL(p1, p2);
  clReleaseKernel(k1);
  clReleaseKernel(k2);
  /* A fresh context with a disk cache folder writes a binary, a second reads it. */
  char dir[] = "/tmp/clattn-cache-XXXXXX";
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
  clattn_context_options opts = {0};
  opts.cache_dir = dir;
  for (int round = 0; round < 2; round++) {
    clattn_context *c = NULL;
    CHECK_OK(clattn_context_create(fx.cl, fx.dev, &opts, &c));
    cl_kernel k = NULL;
    CHECK_OK(clattn_kernel_get(c, "decode.cl", "-DD=16", "clattn_decode_partial", &k));
    clReleaseKernel(k);
    clattn_context_release(&c);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s/*.bin >/dev/null 2>&1", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
  }
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

/* Every kernel file expands from the embedded sources alone (the library as
 * installed, without CLATTN_KERNEL_DIR): no #include left unembedded. */
static void test_embedded_sources(void) {
  static const char *files[] = {"decode.cl", "merge.cl", "kvcache.cl", "rerope.cl", "rerope_bwd.cl",
                                "baseline.cl"};
  char *saved = getenv("CLATTN_KERNEL_DIR") ? strdup(getenv("CLATTN_KERNEL_DIR")) : NULL;
  unsetenv("CLATTN_KERNEL_DIR");
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *src = NULL;
    CHECK_OK(clattn_source_load(files[i], &src));
    CU_ASSERT(src && strlen(src) > 100);
    free(src);
  }
  char *src = NULL;
  CHECK_FAILS(clattn_source_load("nope.cl", &src), CLATTN_BUILD_ERROR, "nope.cl not found (embedded)");
  if (saved) setenv("CLATTN_KERNEL_DIR", saved, 1);
  free(saved);
}

static void test_build_error(void) {
  cl_kernel k = NULL;
  /* an option that breaks the kernel: the message carries the build log */
  CHECK_FAILS(clattn_kernel_get(fx.ctx, "decode.cl", "-DQ_DT=not_a_dtype", "clattn_decode_partial", &k),
              CLATTN_BUILD_ERROR, "not_a_dtype");
  CHECK_FAILS(clattn_kernel_get(fx.ctx, "missing.cl", "", "x", &k), CLATTN_BUILD_ERROR,
              "missing.cl not found");
  CHECK_FAILS(clattn_kernel_get(fx.ctx, "decode.cl", "-DD=32", "no_such_kernel", &k),
              CLATTN_OPENCL_ERROR, "CL_INVALID_KERNEL_NAME");
}

/* Two threads, each with its own queue, run decode on one context. */
typedef struct job {
  cl_command_queue queue;
  clattn_decode_params p;
  clattn_status status;
} job;

static void *worker(void *arg) {
  job *j = arg;
  for (int i = 0; i < 4 && j->status == CLATTN_SUCCESS; i++) {
    j->status = clattn_decode(fx.ctx, j->queue, &j->p, 0, NULL, NULL);
    if (clFinish(j->queue) != CL_SUCCESS) j->status = CLATTN_OPENCL_ERROR;
  }
  return NULL;
}

static void test_threads(void) {
  const int B = 2, Hq = 4, Hkv = 2, D = 32, N = 50;
  const size_t nq = (size_t)B * Hq * D, nkv = (size_t)B * N * Hkv * D;
  double *q = malloc(sizeof(double) * nq), *k = malloc(sizeof(double) * nkv),
         *v = malloc(sizeof(double) * nkv), *o_ref = malloc(sizeof(double) * nq),
         *o = malloc(sizeof(double) * nq);
  for (size_t i = 0; i < nq; i++) q[i] = rng_normal();
  for (size_t i = 0; i < nkv; i++) k[i] = rng_normal(), v[i] = rng_normal();
  ref_decode_args ra = {B, 1, Hq, Hkv, D, N, q, k, v, NULL, NULL, NULL, 1.0 / sqrt((double)D), 0, o_ref, NULL};
  ref_decode(&ra);
  cl_mem qm = buf_from(q, nq, CLATTN_F32), km = buf_from(k, nkv, CLATTN_F32),
         vm = buf_from(v, nkv, CLATTN_F32);
  job jobs[2];
  pthread_t th[2];
  for (int t = 0; t < 2; t++) {
    memset(&jobs[t], 0, sizeof jobs[t]);
    cl_int err;
    jobs[t].queue = clCreateCommandQueue(fx.cl, fx.dev, 0, &err);
    jobs[t].p.q = clattn_tensor_4d(qm, 0, CLATTN_F32, B, 1, Hq, D);
    jobs[t].p.k = clattn_tensor_4d(km, 0, CLATTN_F32, B, N, Hkv, D);
    jobs[t].p.v = clattn_tensor_4d(vm, 0, CLATTN_F32, B, N, Hkv, D);
    jobs[t].p.o = clattn_tensor_4d(buf_poison(nq * 4), 0, CLATTN_F32, B, 1, Hq, D);
    jobs[t].p.num_splits = t + 1; /* two different variants built concurrently */
    pthread_create(&th[t], NULL, worker, &jobs[t]);
  }
  for (int t = 0; t < 2; t++) {
    pthread_join(th[t], NULL);
    CU_ASSERT_EQUAL(jobs[t].status, CLATTN_SUCCESS);
    buf_read(jobs[t].p.o.buf, 0, nq, CLATTN_F32, o);
    check_close("threads", o, o_ref, nq, 1e-4, 1e-4); /* f32 storage */
    clReleaseMemObject(jobs[t].p.o.buf);
    clReleaseCommandQueue(jobs[t].queue);
  }
  buf_release(&qm);
  buf_release(&km);
  buf_release(&vm);
  free(q), free(k), free(v), free(o_ref), free(o);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("host", fixture_init, fixture_cleanup);
  CU_add_test(s, "status and dtype strings", test_status_strings);
  CU_add_test(s, "device selection", test_device_selection);
  CU_add_test(s, "device profile", test_profile);
  CU_add_test(s, "tuning table and override file", test_tuning);
  CU_add_test(s, "tensor bounds checks", test_tensor_checks);
  CU_add_test(s, "program cache: memory and disk", test_program_cache);
  CU_add_test(s, "embedded kernel sources are complete", test_embedded_sources);
  CU_add_test(s, "build errors carry the log", test_build_error);
  CU_add_test(s, "two threads, one context", test_threads);
  return run_suites();
}
