/* Test helpers: fixture, dtype conversions, random data, buffers, checks. */
#include "common.h"
#include "ref_quant.h"

#include <CUnit/Basic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

fixture fx;

int fixture_init(void) {
  if (fx.ctx) return 0;
  clattn_context_options opts = {0};
  opts.cache_dir = getenv("CLATTN_CACHE_DIR"); /* NULL: default */
  clattn_status s = clattn_context_create_default(&opts, &fx.ctx);
  if (s != CLATTN_SUCCESS) {
    fprintf(stderr, "fixture: no OpenCL device: %s: %s\n", clattn_status_string(s),
            clattn_last_error());
    return 1;
  }
  fx.cl = clattn_context_cl(fx.ctx);
  fx.dev = clattn_context_device(fx.ctx);
  cl_int err = CL_SUCCESS;
  fx.queue = clCreateCommandQueue(fx.cl, fx.dev, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) return 1;
  clattn_device_profile p;
  clattn_context_profile(fx.ctx, &p);
  static int printed;
  if (!printed++) fprintf(stderr, "device: %s (%s), arch %s\n", p.name, p.platform, p.arch);
  return 0;
}

int fixture_cleanup(void) {
  if (fx.queue) clFinish(fx.queue);
  guards_check_all(); /* the buffers a test left for the suite's end */
  if (fx.queue) clReleaseCommandQueue(fx.queue);
  fx.queue = NULL;
  clattn_context_release(&fx.ctx);
  return 0;
}

double round_dtype(double x, clattn_dtype dt) {
  switch (dt) {
  case CLATTN_F16: return ref_half_value(ref_half_round((float)x, 0));
  case CLATTN_BF16: return ref_bf16_value(ref_bf16_round((float)x));
  case CLATTN_F64: return x;
  default: return (float)x;
  }
}

/* ---------------------------------------------------------------- random (splitmix64) */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
void rng_seed(uint64_t seed) { rng_state = seed * 0x9e3779b97f4a7c15ull + 1; }
uint64_t rng_u64(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double rng_uniform(double lo, double hi) {
  return lo + (hi - lo) * ((double)(rng_u64() >> 11) / 9007199254740992.0);
}
int rng_int(int lo, int hi) { return lo + (int)(rng_u64() % (uint64_t)(hi - lo + 1)); }
double rng_normal(void) {
  double u = rng_uniform(1e-12, 1.0), v = rng_uniform(0.0, 1.0);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

double *rand_tensor(size_t n, clattn_dtype dt, double scale) {
  double *x = malloc(sizeof(double) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) x[i] = round_dtype(scale * rng_normal(), dt);
  return x;
}

/* ---------------------------------------------------------------- buffers */

void host_pack(const double *src, size_t n, clattn_dtype dt, void *dst) {
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
    case CLATTN_F16: ((uint16_t *)dst)[i] = ref_half_round((float)src[i], 0); break;
    case CLATTN_BF16: ((uint16_t *)dst)[i] = ref_bf16_round((float)src[i]); break;
    case CLATTN_F64: ((double *)dst)[i] = src[i]; break;
    case CLATTN_I32: ((int32_t *)dst)[i] = (int32_t)src[i]; break;
    default: ((float *)dst)[i] = (float)src[i]; break;
    }
  }
}

void host_unpack(const void *src, size_t n, clattn_dtype dt, double *dst) {
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
    case CLATTN_F16: dst[i] = ref_half_value(((const uint16_t *)src)[i]); break;
    case CLATTN_BF16: dst[i] = ref_bf16_value(((const uint16_t *)src)[i]); break;
    case CLATTN_F64: dst[i] = ((const double *)src)[i]; break;
    case CLATTN_I32: dst[i] = ((const int32_t *)src)[i]; break;
    default: dst[i] = ((const float *)src)[i]; break;
    }
  }
}

/* Guard regions (ggml's sentinel tensors): every test buffer is a
 * sub-buffer between GUARD-patterned bytes of a larger buffer; releasing it
 * (or guards_check_all) checks that no kernel wrote outside it. */
#define GUARD_BYTE 0x5a
typedef struct guarded {
  cl_mem sub, parent;
  size_t lead, bytes, total; /* the sub-buffer is [lead, lead + bytes) of parent */
  struct guarded *next;
} guarded;
static guarded *guards;

static size_t base_align(cl_context cl) {
  cl_device_id dev = NULL;
  cl_uint bits = 0;
  clGetContextInfo(cl, CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL);
  if (dev) clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
  size_t a = bits / 8;
  return a < 256 ? 256 : a;
}

cl_mem buf_in(cl_context cl, size_t bytes, const void *host) {
  if (!bytes) bytes = 4;
  const size_t lead = base_align(cl), total = lead + (bytes + lead - 1) / lead * lead + lead;
  unsigned char *init = malloc(total);
  CU_ASSERT_FATAL(init != NULL);
  memset(init, GUARD_BYTE, total);
  if (host) memcpy(init + lead, host, bytes);
  cl_int err = CL_SUCCESS;
  cl_mem parent = clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, total, init, &err);
  free(init);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  const cl_buffer_region region = {lead, bytes};
  cl_mem sub = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  guarded *g = malloc(sizeof *g);
  CU_ASSERT_FATAL(g != NULL);
  *g = (guarded){sub, parent, lead, bytes, total, guards};
  guards = g;
  return sub;
}

/* Reads g's guard bytes; fails the test if any changed. */
static void guard_verify(const guarded *g) {
  cl_context cl = NULL;
  clGetMemObjectInfo(g->parent, CL_MEM_CONTEXT, sizeof cl, &cl, NULL);
  cl_device_id dev = NULL;
  clGetContextInfo(cl, CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL);
  cl_int err = CL_SUCCESS;
  cl_command_queue q = cl == fx.cl ? fx.queue : clCreateCommandQueue(cl, dev, 0, &err);
  unsigned char *all = malloc(g->total);
  if (!all || err != CL_SUCCESS ||
      clEnqueueReadBuffer(q, g->parent, CL_TRUE, 0, g->total, all, 0, NULL, NULL) != CL_SUCCESS) {
    CU_FAIL("guard check: could not read the buffer back");
  } else {
    for (size_t i = 0; i < g->total; i++) {
      if (i >= g->lead && i < g->lead + g->bytes) continue;
      if (all[i] != GUARD_BYTE) {
        fprintf(stderr, "  guard: a kernel wrote byte %s %zu of a %zu-byte buffer (0x%02x)\n",
                i < g->lead ? "before it, at" : "after it, at offset",
                i < g->lead ? g->lead - i : i - g->lead - g->bytes, g->bytes, all[i]);
        CU_FAIL("a write outside the buffer's bounds");
        break;
      }
    }
  }
  free(all);
  if (q != fx.queue && q) clReleaseCommandQueue(q);
}

void guards_check_all(void) {
  for (const guarded *g = guards; g; g = g->next) guard_verify(g);
}

static cl_mem make_buf(size_t bytes, const void *host) { return buf_in(fx.cl, bytes, host); }

cl_mem buf_from(const double *host, size_t n, clattn_dtype dt) {
  size_t es = clattn_dtype_size(dt);
  void *tmp = calloc(n ? n : 1, es);
  host_pack(host, n, dt, tmp);
  cl_mem m = make_buf(n * es, tmp);
  free(tmp);
  return m;
}

cl_mem buf_from_i32(const int32_t *host, size_t n) { return make_buf(n * 4, n ? host : NULL); }

cl_mem buf_from_i32_after(const int32_t *host, size_t n, int32_t junk) {
  int32_t *tmp = malloc(sizeof(int32_t) * (n + VIEW_LEAD));
  CU_ASSERT_FATAL(tmp != NULL);
  for (int i = 0; i < VIEW_LEAD; i++) tmp[i] = junk;
  if (n) memcpy(tmp + VIEW_LEAD, host, sizeof(int32_t) * n);
  cl_mem m = make_buf((n + VIEW_LEAD) * 4, tmp);
  free(tmp);
  return m;
}

cl_mem buf_zeros(size_t bytes) {
  void *z = calloc(bytes ? bytes : 4, 1);
  cl_mem m = make_buf(bytes, z);
  free(z);
  return m;
}

cl_mem buf_poison(size_t bytes) {
  void *z = malloc(bytes ? bytes : 4);
  memset(z, 0xff, bytes ? bytes : 4);
  cl_mem m = make_buf(bytes, z);
  free(z);
  return m;
}

void buf_read(cl_mem m, size_t off, size_t n, clattn_dtype dt, double *host) {
  size_t es = clattn_dtype_size(dt);
  void *tmp = malloc(n * es + 1);
  cl_int err = clEnqueueReadBuffer(fx.queue, m, CL_TRUE, off * es, n * es, tmp, 0, NULL, NULL);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  host_unpack(tmp, n, dt, host);
  free(tmp);
}

void buf_read_i32(cl_mem m, size_t n, int32_t *host) {
  cl_int err = clEnqueueReadBuffer(fx.queue, m, CL_TRUE, 0, n * 4, host, 0, NULL, NULL);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
}

void buf_release(cl_mem *m) {
  if (!*m) return;
  for (guarded **pg = &guards; *pg; pg = &(*pg)->next) {
    guarded *g = *pg;
    if (g->sub != *m) continue;
    clFinish(fx.queue);
    guard_verify(g);
    clReleaseMemObject(g->sub);
    clReleaseMemObject(g->parent);
    *pg = g->next;
    free(g);
    *m = NULL;
    return;
  }
  clReleaseMemObject(*m);
  *m = NULL;
}

void finish(void) { CU_ASSERT_EQUAL_FATAL(clFinish(fx.queue), CL_SUCCESS); }

/* ---------------------------------------------------------------- checks */

double tol_for(clattn_dtype dt) {
  switch (dt) {
  case CLATTN_F16: return 4.0 / 2048.0; /* a few f16 ulps (2^-11) */
  case CLATTN_BF16: return 4.0 / 256.0; /* a few bf16 ulps (2^-8) */
  case CLATTN_F64: return 1e-9;
  default: return 2e-5; /* f32 accumulation over up to a few thousand terms */
  }
}

double check_close(const char *label, const double *got, const double *want, size_t n, double atol,
                   double rtol) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    bool ok;
    if (isnan(w))
      ok = isnan(g);
    else if (isinf(w))
      ok = g == w;
    else
      ok = isfinite(g) && fabs(g - w) <= atol + rtol * fabs(w);
    double err = (isnan(w) || isinf(w)) ? (ok ? 0.0 : INFINITY) : fabs(g - w);
    if (!isfinite(g) && !(isnan(w) || isinf(w))) err = INFINITY;
    if (err > worst) worst = err;
    if (!ok) {
      fprintf(stderr, "  %s: element %zu: got %.9g, want %.9g (atol %.3g, rtol %.3g)\n", label, i,
              g, w, atol, rtol);
      CU_FAIL("values differ from the reference");
      return INFINITY;
    }
  }
  return worst;
}

int run_suites(void) {
  /* CLATTN_TEST_ONLY=text runs only the tests whose names contain it (development) */
  const char *only = getenv("CLATTN_TEST_ONLY");
  if (only && *only)
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
      for (CU_pTest t = s->pTest; t; t = t->pNext)
        CU_set_test_active(t, strstr(t->pName, only) ? CU_TRUE : CU_FALSE);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
