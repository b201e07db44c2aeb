/* Host layer: status strings, device selection and profile, tuning table
 * and override file, tensor checks, program cache (memory and disk), build
 * errors carrying the log, and concurrent use from two threads. */
#include "common.h"
#include "internal.h"
#include "ref.h"

#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
  /* the selector alone (what `clattn devices` marks) */
  cl_device_id first = NULL, picked = NULL;
  CHECK_OK(clattn_device_get(0, &first));
  CHECK_OK(clattn_device_select("0", &picked));
  CU_ASSERT_PTR_EQUAL(picked, first);
  picked = NULL;
  CHECK_OK(clattn_device_select(sub, &picked));
  CU_ASSERT_PTR_NOT_NULL(picked);
  CHECK_OK(clattn_device_select(NULL, &picked));
  CHECK_FAILS(clattn_device_select("no-such-device-xyz", &picked), CLATTN_NO_DEVICE, "no-such-device-xyz");
  CHECK_FAILS(clattn_device_select("0", NULL), CLATTN_INVALID_ARGUMENT, "device is NULL");
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
  clattn_tuning_lookup(NULL, &p, NULL, &t, NULL);
  CU_ASSERT_EQUAL(t.decode_wg, 256); /* the portable form */
  CU_ASSERT_EQUAL(t.decode_mma_wg, 128); /* the tensor-core form */
  snprintf(p.arch, sizeof p.arch, "some-unknown-device");
  clattn_tuning_lookup(NULL, &p, NULL, &t, NULL);
  CU_ASSERT(t.decode_wg >= 32); /* the generic row */
  /* a small device caps work-group sizes */
  p.max_work_group_size = 32;
  clattn_tuning_lookup(NULL, &p, NULL, &t, NULL);
  CU_ASSERT(t.decode_wg <= 32 && t.merge_wg <= 32);
  /* override file: known keys applied, unknown and bad lines ignored */
  p.max_work_group_size = 1024;
  char path[] = "/tmp/clattn-tuning-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  clattn_tuning w;
  clattn_tuning_lookup(NULL, &p, NULL, &w, NULL);
  CU_ASSERT(clattn_tuning_set(&w, "decode_wg", 256));
  CU_ASSERT(!clattn_tuning_set(&w, "no_such_key", 1));
  CHECK_OK(clattn_tuning_write(&w, &p, path));
  FILE *f = fopen(path, "a");
  fprintf(f, "bogus=12\ndecode_max_splits=-5\n# comment\n");
  fclose(f);
  clattn_tuning_lookup(NULL, &p, path, &t, NULL);
  CU_ASSERT_EQUAL(t.decode_wg, 256);
  CU_ASSERT_EQUAL(t.decode_max_splits, w.decode_max_splits);
  remove(path);
  /* every row's every value is in its parameter's range */
  static const char *archs[] = {"nvidia-sm90", "nvidia-sm86", "nvidia-sm75", "amd-gfx90a",
                                "amd-gfx1030", "pocl-cpu", "intel-cpu", "generic"};
  for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
    snprintf(p.arch, sizeof p.arch, "%s", archs[a]);
    clattn_tuning_lookup(NULL, &p, NULL, &t, NULL);
    for (size_t i = 0; i < clattn_tuning_count(); i++) {
      clattn_tuning c = t;
      const bool ok = clattn_tuning_set(&c, clattn_tuning_name(i), clattn_tuning_get(&t, i));
      if (!ok) fprintf(stderr, "  row %s: %s=%d out of range\n", archs[a], clattn_tuning_name(i),
                       clattn_tuning_get(&t, i));
      CU_ASSERT(ok);
    }
  }
}

typedef struct captured {
  char text[4096];
} captured;
static void capture_log(void *priv, clattn_log_level level, const char *msg) {
  captured *c = priv;
  (void)level;
  size_t n = strlen(c->text);
  snprintf(c->text + n, sizeof c->text - n, "%s\n", msg);
}

/* Options of a context that logs its errors into `log` and has no disk cache. */
static clattn_context_options logging_to(captured *log) {
  clattn_context_options opts = {0};
  opts.log = capture_log;
  opts.log_priv = log;
  opts.log_level = CLATTN_LOG_ERROR;
  opts.cache_dir = "";
  return opts;
}

/* An override file of zeros and nonsense (decode_wg=0 once hung decode,
 * merge_wg=0 and quant_wg=0 divided by zero) is reported line by line and
 * ignored: the context keeps its row's values and decode runs. */
static void test_tuning_bad_override(void) {
  char path[] = "/tmp/clattn-tuning-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  static const char text[] = "decode_wg=0\nmerge_wg=0\nquant_wg=0\ndecode_splits_per_cu=abc\n"
                             "bogus_key=5\ndecode_wg=100\nrerope_wg=-3\njust words\n"
                             "decode_max_splits=99999999999999\n# a comment\n\n";
  CU_ASSERT_FATAL(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
  close(fd);
  setenv("CLATTN_TUNING_FILE", path, 1);
  captured log = {{0}};
  const clattn_context_options opts = logging_to(&log);
  clattn_context *c = NULL;
  clattn_status st = clattn_context_create(fx.cl, fx.dev, &opts, &c);
  unsetenv("CLATTN_TUNING_FILE");
  remove(path);
  CHECK_OK(st);
  CU_ASSERT_EQUAL(c->tuning.decode_wg, fx.ctx->tuning.decode_wg);
  CU_ASSERT_EQUAL(c->tuning.merge_wg, fx.ctx->tuning.merge_wg);
  CU_ASSERT_EQUAL(c->tuning.quant_wg, fx.ctx->tuning.quant_wg);
  CU_ASSERT_EQUAL(c->tuning.decode_splits_per_cu, fx.ctx->tuning.decode_splits_per_cu);
  CU_ASSERT_EQUAL(c->tuning.decode_max_splits, fx.ctx->tuning.decode_max_splits);
  static const char *needles[] = {":1: decode_wg=0 is not", ":2: merge_wg=0", ":3: quant_wg=0",
                                  ":4: decode_splits_per_cu=abc", ":5: unknown tuning key \"bogus_key\"",
                                  ":6: decode_wg=100 is not a power of two", ":7: rerope_wg=-3",
                                  ":8: \"just words\" is not key=value", ":9: decode_max_splits="};
  for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++) {
    if (!strstr(log.text, needles[i])) fprintf(stderr, "  log lacks \"%s\":\n%s", needles[i], log.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(log.text, needles[i]));
  }
  CU_ASSERT_PTR_NULL(strstr(log.text, ":10:")); /* the comment and the blank line are fine */
  /* the context keeps what was wrong, for clattn devices */
  CU_ASSERT_PTR_NOT_NULL(strstr(clattn_context_tuning_problems(c), ":5: unknown tuning key \"bogus_key\""));
  CU_ASSERT_STRING_EQUAL(clattn_context_tuning_problems(fx.ctx), "");
  /* the public view of the tuning: the file read, every value by index */
  CU_ASSERT_STRING_EQUAL(clattn_context_tuning_file(c), path);
  CU_ASSERT_STRING_EQUAL(clattn_context_tuning_file(fx.ctx), ""); /* the suites' file is never written */
  for (size_t i = 0; i < clattn_tuning_count(); i++)
    CU_ASSERT_EQUAL(clattn_context_tuning_value(c, i), clattn_tuning_get(&c->tuning, i));
  CU_ASSERT_PTR_NULL(clattn_tuning_name(clattn_tuning_count()));
  CU_ASSERT_EQUAL(clattn_context_tuning_value(c, clattn_tuning_count()), 0);
  CU_ASSERT_STRING_EQUAL(clattn_tuning_name(0), "decode_wg");
  /* decode (split, so merge runs too) on that context finishes */
  const int B = 1, H = 2, D = 16, N = 300;
  double *x = calloc((size_t)B * N * H * D, sizeof(double));
  cl_mem q = buf_from(x, (size_t)B * H * D, CLATTN_F32), k = buf_from(x, (size_t)B * N * H * D, CLATTN_F32);
  cl_mem o = buf_poison((size_t)B * H * D * 4);
  clattn_decode_params dp = {0};
  dp.q = clattn_tensor_4d(q, 0, CLATTN_F32, B, 1, H, D);
  dp.k = dp.v = clattn_tensor_4d(k, 0, CLATTN_F32, B, N, H, D);
  dp.o = clattn_tensor_4d(o, 0, CLATTN_F32, B, 1, H, D);
  dp.num_splits = 3;
  cl_command_queue queue = clCreateCommandQueue(fx.cl, fx.dev, 0, NULL);
  CHECK_OK(clattn_decode(c, queue, &dp, 0, NULL, NULL));
  CU_ASSERT_EQUAL(clFinish(queue), CL_SUCCESS);
  double got[2 * 16];
  buf_read(o, 0, (size_t)B * H * D, CLATTN_F32, got);
  for (int i = 0; i < B * H * D; i++) CU_ASSERT_DOUBLE_EQUAL(got[i], 0.0, 1e-6); /* mean of zeros */
  clReleaseCommandQueue(queue);
  buf_release(&q);
  buf_release(&k);
  buf_release(&o);
  free(x);
  clattn_context_release(&c);
  /* a FIFO or a directory in the tuning file's place is reported, never waited on */
  char dir[] = "/tmp/clattn-tuning-dir-XXXXXX";
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
  char fifo[1100];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  CU_ASSERT_FATAL(mkfifo(fifo, 0600) == 0);
  const char *places[2] = {fifo, dir};
  for (int i = 0; i < 2; i++) {
    log.text[0] = '\0';
    setenv("CLATTN_TUNING_FILE", places[i], 1);
    st = clattn_context_create(fx.cl, fx.dev, &opts, &c);
    unsetenv("CLATTN_TUNING_FILE");
    CHECK_OK(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(log.text, i ? "is a directory; ignored" : "is not a regular file; ignored"));
    CU_ASSERT_EQUAL(c->tuning.decode_wg, fx.ctx->tuning.decode_wg);
    clattn_context_release(&c);
  }
  remove(fifo);
  rmdir(dir);
}

/* Where each value comes from, files of other devices and versions, and
 * the tuner's hooks (set one value, write the file, read it back). */
static void test_tuning_origins(void) {
  clattn_device_profile p;
  memset(&p, 0, sizeof p);
  p.max_work_group_size = 1024;
  snprintf(p.name, sizeof p.name, "NVIDIA H200");
  clattn_tuning t;
  clattn_tuning_origin why;
  /* rows: architecture before vendor before the generic row */
  snprintf(p.arch, sizeof p.arch, "nvidia-sm90");
  clattn_tuning_lookup(NULL, &p, NULL, &t, &why);
  CU_ASSERT_STRING_EQUAL(why.of[CLATTN_TP_decode_wg], "arch row nvidia-sm9");
  CU_ASSERT_EQUAL(t.decode_mma, 1);
  snprintf(p.arch, sizeof p.arch, "nvidia-sm75");
  clattn_tuning_lookup(NULL, &p, NULL, &t, &why);
  CU_ASSERT_STRING_EQUAL(why.of[CLATTN_TP_decode_wg], "vendor row nvidia");
  CU_ASSERT_EQUAL(t.decode_mma, 0);
  snprintf(p.arch, sizeof p.arch, "nvidiax-sm90"); /* a vendor key matches a whole word only */
  clattn_tuning_lookup(NULL, &p, NULL, &t, &why);
  CU_ASSERT_STRING_EQUAL(why.of[CLATTN_TP_decode_wg], "generic row");
  /* clamps say so */
  snprintf(p.arch, sizeof p.arch, "amd-gfx90a");
  p.max_work_group_size = 64;
  clattn_tuning_lookup(NULL, &p, NULL, &t, &why);
  CU_ASSERT_EQUAL(t.decode_wg, 64);
  CU_ASSERT_STRING_EQUAL(why.of[CLATTN_TP_decode_wg], "clamped to the device's max work-group size (was 256)");
  CU_ASSERT_STRING_EQUAL(why.of[CLATTN_TP_decode_splits_per_cu], "arch row amd-gfx9");
  p.max_work_group_size = 1024;

  /* a written file names its device and version; it is read for that device only */
  char path[] = "/tmp/clattn-tuning-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  clattn_tuning w = t;
  w.decode_splits_per_cu = 7;
  CHECK_OK(clattn_tuning_write(&w, &p, path));
  CU_ASSERT(clattn_tuning_lookup(NULL, &p, path, &t, &why));
  CU_ASSERT_EQUAL(t.decode_splits_per_cu, 7);
  CU_ASSERT_STRING_EQUAL(why.of[CLATTN_TP_decode_splits_per_cu], "override file");
  captured log = {{0}};
  const clattn_context_options opts = logging_to(&log);
  clattn_context *lc = NULL;
  CHECK_OK(clattn_context_create(fx.cl, fx.dev, &opts, &lc)); /* a context only to log through */
  clattn_device_profile other = p;
  snprintf(other.name, sizeof other.name, "NVIDIA H100");
  CU_ASSERT(!clattn_tuning_lookup(lc, &other, path, &t, &why));
  CU_ASSERT_NOT_EQUAL(t.decode_splits_per_cu, 7);
  CU_ASSERT_STRING_EQUAL(why.of[CLATTN_TP_decode_splits_per_cu], "arch row amd-gfx9");
  CU_ASSERT_PTR_NOT_NULL(strstr(log.text, "written for device \"NVIDIA H200\", not this one (\"NVIDIA H100\"); ignored"));
  FILE *f = fopen(path, "w");
  fprintf(f, "clattn_version=0.0.1\ndecode_splits_per_cu=7\n");
  fclose(f);
  log.text[0] = '\0';
  CU_ASSERT(!clattn_tuning_lookup(lc, &p, path, &t, &why));
  CU_ASSERT_NOT_EQUAL(t.decode_splits_per_cu, 7);
  CU_ASSERT_PTR_NOT_NULL(strstr(log.text, "written for clattn version \"0.0.1\""));
  remove(path);
  clattn_context_release(&lc);

  /* the default file of a device: one per device name */
  char def[256];
  clattn_tuning_default_path("/c", &p, def, sizeof def);
  CU_ASSERT_STRING_EQUAL(def, "/c/tuning-amd-gfx90a-nvidia-h200.txt");

  /* the public hooks: set a value (checked), write, and a new context reads it */
  clattn_context *c = NULL;
  CHECK_OK(clattn_context_create(fx.cl, fx.dev, NULL, &c));
  const int wg = c->tuning.decode_wg;
  CHECK_FAILS(clattn_context_set_tuning(c, "no_such_key", 1), CLATTN_INVALID_ARGUMENT, "no_such_key");
  CHECK_FAILS(clattn_context_set_tuning(c, "decode_wg", 100), CLATTN_INVALID_ARGUMENT, "decode_wg=100");
  CHECK_FAILS(clattn_context_set_tuning(NULL, "decode_wg", 64), CLATTN_INVALID_ARGUMENT, "ctx");
  CU_ASSERT_EQUAL(c->tuning.decode_wg, wg);
  CHECK_OK(clattn_context_set_tuning(c, "decode_wg", wg == 32 ? 64 : 32));
  CHECK_OK(clattn_context_set_tuning(c, "decode_max_splits", 5));
  CU_ASSERT_STRING_EQUAL(clattn_context_tuning_origin(c, CLATTN_TP_decode_wg), "set by clattn_context_set_tuning");
  CU_ASSERT_PTR_NULL(clattn_context_tuning_origin(c, clattn_tuning_count()));
  const clattn_tuning_param *info = clattn_tuning_param_info(CLATTN_TP_decode_wg);
  CU_ASSERT_STRING_EQUAL(info->name, "decode_wg");
  CU_ASSERT(info->pow2 && info->lo == 8 && info->hi == 256 && strlen(info->meaning) > 10);
  CU_ASSERT_PTR_NULL(clattn_tuning_param_info(clattn_tuning_count()));
  char file[] = "/tmp/clattn-tuned-XXXXXX";
  fd = mkstemp(file);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  CHECK_OK(clattn_context_write_tuning(c, file));
  CHECK_FAILS(clattn_context_write_tuning(c, "/no/such/dir/x"), CLATTN_INVALID_ARGUMENT, "/no/such/dir/x");
  setenv("CLATTN_TUNING_FILE", file, 1);
  clattn_context *c2 = NULL;
  CHECK_OK(clattn_context_create(fx.cl, fx.dev, NULL, &c2));
  unsetenv("CLATTN_TUNING_FILE");
  CU_ASSERT_STRING_EQUAL(clattn_context_tuning_file(c2), file);
  CU_ASSERT_STRING_EQUAL(clattn_context_tuning_path(c2), file);
  for (size_t i = 0; i < clattn_tuning_count(); i++)
    CU_ASSERT_EQUAL(clattn_context_tuning_value(c2, i), clattn_context_tuning_value(c, i));
  CU_ASSERT_STRING_EQUAL(clattn_context_tuning_origin(c2, CLATTN_TP_decode_max_splits), "override file");
  remove(file);
  clattn_context_release(&c);
  clattn_context_release(&c2);
}

static void test_tensor_checks(void) {
  cl_mem m = buf_zeros(1024);
  clattn_tensor t = clattn_tensor_2d(m, 0, CLATTN_F32, 16, 16);
  CHECK_OK(clattn_check_tensor(fx.ctx, &t, "x", 2, CLATTN_FLOAT_DTYPES));
  t.shape[0] = 17;
  CHECK_FAILS(clattn_check_tensor(fx.ctx, &t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_OUT_OF_BOUNDS,
              "reaches byte 1088, but the buffer holds 1024 bytes");
  t = clattn_tensor_2d(m, 0, CLATTN_F32, 0, 1000000);
  CHECK_OK(clattn_check_tensor(fx.ctx, &t, "x", 2, CLATTN_FLOAT_DTYPES)); /* empty: touches nothing */
  t = clattn_tensor_2d(m, 6, CLATTN_F32, 2, 2);
  CHECK_FAILS(clattn_check_tensor(fx.ctx, &t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_INVALID_ARGUMENT,
              "x.offset (6 bytes)");
  t = clattn_tensor_2d(m, 0, CLATTN_I32, 2, 2);
  CHECK_FAILS(clattn_check_tensor(fx.ctx, &t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_UNSUPPORTED, "x.dtype i32");
  /* offset + extent wrapping past 2^64 once passed (and decode wrote 256
   * bytes before the buffer) */
  t = clattn_tensor_1d(m, (size_t)0 - 256, CLATTN_F32, 64);
  CHECK_FAILS(clattn_check_tensor(fx.ctx, &t, "x", 1, CLATTN_FLOAT_DTYPES), CLATTN_OUT_OF_BOUNDS,
              "x: shape [64] with strides [1] and offset 18446744073709551360 reaches beyond 2^64");
  /* a dim of 2^32 + 2 once wrapped the extent, and was cast to int as 2 */
  t = clattn_tensor_2d(m, 0, CLATTN_F32, ((int64_t)1 << 32) + 2, 1);
  t.stride[0] = ((int64_t)1 << 40) - 256;
  CHECK_FAILS(clattn_check_tensor(fx.ctx, &t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_UNSUPPORTED,
              "x.shape[0] (4294967298) exceeds 2^31 - 1");
  /* dims in range whose extent still overflows 64 bits */
  t = clattn_tensor_3d(m, 0, CLATTN_F32, INT32_MAX, INT32_MAX, 4);
  t.stride[0] = (int64_t)1 << 62;
  t.stride[1] = (int64_t)1 << 31;
  CHECK_FAILS(clattn_check_tensor(fx.ctx, &t, "x", 3, CLATTN_FLOAT_DTYPES), CLATTN_OUT_OF_BOUNDS,
              "reaches beyond 2^64 bytes");
  t = clattn_tensor_2d(m, 1028, CLATTN_F32, 0, 4); /* empty, but past the end */
  CHECK_FAILS(clattn_check_tensor(fx.ctx, &t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_OUT_OF_BOUNDS,
              "reaches byte 1028");
  /* a buffer of another cl_context */
  cl_int err = CL_SUCCESS;
  cl_context other = clCreateContext(NULL, 1, &fx.dev, NULL, NULL, &err);
  CU_ASSERT_FATAL(err == CL_SUCCESS);
  cl_mem foreign = buf_in(other, 1024, NULL);
  t = clattn_tensor_2d(foreign, 0, CLATTN_F32, 16, 16);
  CHECK_FAILS(clattn_check_tensor(fx.ctx, &t, "x", 2, CLATTN_FLOAT_DTYPES), CLATTN_INVALID_ARGUMENT,
              "x.buf belongs to another cl_context than ctx");
  CHECK_OK(clattn_check_tensor(NULL, &t, "x", 2, CLATTN_FLOAT_DTYPES));
  buf_release(&foreign);
  clReleaseContext(other);
  buf_release(&m);
}

/* Outputs that reach one element twice, and outputs sharing elements with
 * inputs: through one buffer, sub-buffers of one parent, and interleaved
 * views of one layout (which are fine). */
static void test_aliasing_checks(void) {
  cl_mem m = buf_zeros(4096);
  clattn_tensor o = clattn_tensor_3d(m, 0, CLATTN_F32, 4, 2, 8);
  CHECK_OK(clattn_check_output(&o, "o"));
  o.stride[0] = 0;
  CHECK_FAILS(clattn_check_output(&o, "o"), CLATTN_INVALID_ARGUMENT, "o.stride[0] (0) makes output elements overlap");
  o = clattn_tensor_3d(m, 0, CLATTN_F32, 4, 2, 8);
  o.stride[1] = 4; /* rows of 8 every 4 elements */
  CHECK_FAILS(clattn_check_output(&o, "o"), CLATTN_INVALID_ARGUMENT, "o.stride[1] (4)");
  o = clattn_tensor_3d(m, 0, CLATTN_F32, 4, 1, 8);
  o.stride[1] = 0; /* a dim of 1 never steps */
  CHECK_OK(clattn_check_output(&o, "o"));
  o = clattn_tensor_3d(m, 0, CLATTN_F32, 8, 2, 8); /* dims in any order of strides */
  o.stride[0] = 8, o.stride[1] = 64, o.stride[2] = 1;
  CHECK_OK(clattn_check_output(&o, "o"));

  clattn_tensor in = clattn_tensor_1d(m, 256, CLATTN_F32, 64);
  clattn_tensor out = clattn_tensor_1d(m, 0, CLATTN_F32, 64);
  CHECK_OK(clattn_check_apart(&out, "out", &in, "in")); /* [0, 256) and [256, 512) */
  out.shape[0] = 65;
  CHECK_FAILS(clattn_check_apart(&out, "out", &in, "in"), CLATTN_INVALID_ARGUMENT,
              "out overlaps in: bytes [0, 260) and [256, 512)");
  /* K and V caches interleaved per token, [N, 2, H, D] seen as two [N, H, D] views */
  clattn_tensor kc = clattn_tensor_3d(m, 0, CLATTN_F32, 8, 4, 8), vc = kc;
  kc.stride[0] = vc.stride[0] = 2 * 4 * 8;
  vc.offset = 4 * 8 * 4;
  CHECK_OK(clattn_check_apart(&kc, "k_cache", &vc, "v_cache"));
  vc.offset = 4 * 8 * 4 + 4 * 4; /* shifted by 4 elements: rows meet */
  CHECK_FAILS(clattn_check_apart(&kc, "k_cache", &vc, "v_cache"), CLATTN_INVALID_ARGUMENT,
              "k_cache overlaps v_cache");
  /* sub-buffers of one parent compare by the parent's bytes */
  cl_int err = CL_SUCCESS;
  cl_mem parent = clCreateBuffer(fx.cl, CL_MEM_READ_WRITE, 8192, NULL, &err);
  CU_ASSERT_FATAL(err == CL_SUCCESS);
  cl_uint bits = 0;
  clGetDeviceInfo(fx.dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
  const size_t al = bits / 8 > 256 ? bits / 8 : 256;
  const cl_buffer_region r1 = {0, 2 * al}, r2 = {al, al};
  cl_mem s1 = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r1, &err);
  cl_mem s2 = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r2, &err);
  CU_ASSERT_FATAL(err == CL_SUCCESS);
  out = clattn_tensor_1d(s1, 0, CLATTN_F32, (int64_t)(2 * al / 4));
  in = clattn_tensor_1d(s2, 0, CLATTN_F32, 1);
  CHECK_FAILS(clattn_check_apart(&out, "out", &in, "in"), CLATTN_INVALID_ARGUMENT, "out overlaps in");
  out.shape[0] = (int64_t)(al / 4);
  CHECK_OK(clattn_check_apart(&out, "out", &in, "in"));
  clReleaseMemObject(s1);
  clReleaseMemObject(s2);
  clReleaseMemObject(parent);
  buf_release(&m);
}

/* The kernel argument structs (cl/args.clh) as this device's compiler lays
 * them out (the probe kernel) against the host's: the one definition both
 * compile must give one layout. */
#define HOST_FIELD(t, name) want[n++] = (int)offsetof(st_, name);
#define HOST_STRUCT(name, FIELDS)                                                                \
  {                                                                                              \
    typedef name st_;                                                                            \
    want[n++] = (int)sizeof(name);                                                               \
    FIELDS(HOST_FIELD)                                                                           \
  }
static void test_args_layout(void) {
  int want[512], n = 0;
  CLATTN_ARG_STRUCTS(HOST_STRUCT)
  cl_kernel k = NULL;
  CHECK_OK(clattn_kernel_get(fx.ctx, "args.cl", "", "clattn_args_layout", &k));
  cl_mem out = buf_poison(sizeof want);
  CU_ASSERT_EQUAL(clSetKernelArg(k, 0, sizeof out, &out), CL_SUCCESS);
  const size_t one = 1;
  CU_ASSERT_EQUAL(clEnqueueNDRangeKernel(fx.queue, k, 1, NULL, &one, &one, 0, NULL, NULL), CL_SUCCESS);
  int32_t got[512];
  buf_read_i32(out, (size_t)n, got);
  for (int i = 0; i < n; i++) {
    if (got[i] != want[i]) fprintf(stderr, "  args layout: entry %d is %d on the device, %d on the host\n", i, got[i], want[i]);
    CU_ASSERT_EQUAL(got[i], want[i]);
  }
  CU_ASSERT(n > 40);
  clReleaseKernel(k);
  buf_release(&out);
}
#undef HOST_FIELD
#undef HOST_STRUCT

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

/* The PTX route's edit (host/program.c): markers removed wherever they sit,
 * the target raised to sm_90a once (already sm_90a, or sm_90 as a prefix of
 * another number, kept), the rest byte for byte; a register cap before each
 * entry's body, not before other braces. */
static void test_ptx_route_edit(void) {
  static const char in[] = ".version 9.0\n.target sm_90, texmode_independent\n"
                           "\t// CLATTN_PTX wgmma.fence.sync.aligned;\n"
                           "\tmov.u32 %r1, 0; // CLATTN_PTX {wgmma.commit_group.sync.aligned;}\n"
                           "\t// a plain comment\n";
  static const char want[] = ".version 9.0\n.target sm_90a, texmode_independent\n"
                             "\twgmma.fence.sync.aligned;\n"
                             "\tmov.u32 %r1, 0; {wgmma.commit_group.sync.aligned;}\n"
                             "\t// a plain comment\n";
  char *out = clattn_ptx_patched(in, sizeof in - 1, 0);
  CU_ASSERT_STRING_EQUAL(out, want);
  free(out);
  static const char kept[] = ".target sm_90a\n.target sm_900\n// CLATTN_PTX";
  out = clattn_ptx_patched(kept, sizeof kept - 1, 0);
  CU_ASSERT_STRING_EQUAL(out, ".target sm_90a\n.target sm_900\n// CLATTN_PTX");
  free(out);
  static const char two[] = ".func f()\n{\n}\n.entry a(\n.param .u64 p\n)\n.reqntid 256, 1, 1\n{\n"
                            "{\n}\n}\n.entry b()\n{\n}\n";
  out = clattn_ptx_patched(two, sizeof two - 1, 128);
  CU_ASSERT_STRING_EQUAL(out, ".func f()\n{\n}\n.entry a(\n.param .u64 p\n)\n.reqntid 256, 1, 1\n"
                              ".maxnreg 128\n{\n{\n}\n}\n.entry b()\n.maxnreg 128\n{\n}\n");
  free(out);
  out = clattn_ptx_patched(two, sizeof two - 1, 0);
  CU_ASSERT_STRING_EQUAL(out, two);
  free(out);
  /* ".visible .entry", a cap past 255, and entries back to back (the most the edit adds) */
  static const char vis[] = ".visible .entry k(\n)\n{\n}\n.entry\n{\n.entry\n{\n";
  out = clattn_ptx_patched(vis, sizeof vis - 1, 1000);
  CU_ASSERT_STRING_EQUAL(out, ".visible .entry k(\n)\n.maxnreg 255\n{\n}\n.entry\n.maxnreg 255\n{\n"
                              ".entry\n.maxnreg 255\n{\n");
  free(out);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("host", fixture_init, fixture_cleanup);
  CU_add_test(s, "status and dtype strings", test_status_strings);
  CU_add_test(s, "device selection", test_device_selection);
  CU_add_test(s, "device profile", test_profile);
  CU_add_test(s, "tuning table and override file", test_tuning);
  CU_add_test(s, "tensor bounds checks", test_tensor_checks);
  CU_add_test(s, "aliasing checks", test_aliasing_checks);
  CU_add_test(s, "kernel argument structs: one layout on host and device", test_args_layout);
  CU_add_test(s, "tuning override of zeros and nonsense", test_tuning_bad_override);
  CU_add_test(s, "tuning origins, foreign files, set and write", test_tuning_origins);
  CU_add_test(s, "program cache: memory and disk", test_program_cache);
  CU_add_test(s, "embedded kernel sources are complete", test_embedded_sources);
  CU_add_test(s, "PTX route: markers and target", test_ptx_route_edit);
  CU_add_test(s, "build errors carry the log", test_build_error);
  CU_add_test(s, "two threads, one context", test_threads);
  return run_suites();
}
