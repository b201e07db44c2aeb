/* Decode's error paths: each bad argument returns its status with a message
 * naming the argument and dimension, and enqueues nothing (no event comes
 * back and the output keeps its poison); bad varlen starts on the device,
 * which the kernels must bound. */
#include "common.h"
#include "internal.h"
#include "ref.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct valid {
  clattn_decode_params p;
  cl_mem q, k, v, o, small;
} valid;

/* B=2, Mq=1, Hq=4, Hkv=2, D=64, N=32, f32. */
static void make_valid(valid *w) {
  memset(w, 0, sizeof *w);
  const size_t nq = 2 * 1 * 4 * 64, nkv = 2 * 32 * 2 * 64;
  w->q = buf_zeros(nq * 4);
  w->k = buf_zeros(nkv * 4);
  w->v = buf_zeros(nkv * 4);
  w->o = buf_poison(nq * 4);
  w->small = buf_zeros(16);
  w->p.q = clattn_tensor_4d(w->q, 0, CLATTN_F32, 2, 1, 4, 64);
  w->p.k = clattn_tensor_4d(w->k, 0, CLATTN_F32, 2, 32, 2, 64);
  w->p.v = clattn_tensor_4d(w->v, 0, CLATTN_F32, 2, 32, 2, 64);
  w->p.o = clattn_tensor_4d(w->o, 0, CLATTN_F32, 2, 1, 4, 64);
}

static void free_valid(valid *w) {
  buf_release(&w->q);
  buf_release(&w->k);
  buf_release(&w->v);
  buf_release(&w->o);
  buf_release(&w->small);
}

/* Runs decode expecting `status` and `needle`; checks nothing was enqueued. */
static void expect_fail(const clattn_decode_params *p, clattn_status status, const char *needle,
                        cl_mem o) {
  cl_event ev = NULL;
  CHECK_FAILS(clattn_decode(fx.ctx, fx.queue, p, 0, NULL, &ev), status, needle);
  CU_ASSERT_PTR_NULL(ev);
  finish();
  double first = 0;
  buf_read(o, 0, 1, CLATTN_F32, &first);
  CU_ASSERT(isnan(first)); /* still the 0xFF poison */
}

static void test_null_arguments(void) {
  valid w;
  make_valid(&w);
  cl_event ev = NULL;
  CHECK_FAILS(clattn_decode(NULL, fx.queue, &w.p, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT, "ctx");
  CHECK_FAILS(clattn_decode(fx.ctx, NULL, &w.p, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT, "queue");
  CHECK_FAILS(clattn_decode(fx.ctx, fx.queue, NULL, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT, "params");
  CHECK_FAILS(clattn_decode(fx.ctx, fx.queue, &w.p, 2, NULL, &ev), CLATTN_INVALID_ARGUMENT, "num_wait");
  CU_ASSERT_PTR_NULL(ev);
  clattn_decode_params p = w.p;
  p.q.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "q.buf is NULL", w.o);
  p = w.p;
  p.k.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "k.buf is NULL", w.o);
  p = w.p;
  p.v.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "v.buf is NULL", w.o);
  p = w.p;
  p.o.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "o.buf is NULL", w.o);
  free_valid(&w);
}

static void test_inconsistent_shapes(void) {
  valid w;
  make_valid(&w);
  clattn_decode_params p = w.p;
  p.q.shape[2] = p.o.shape[2] = 3; /* Hq = 3 with Hkv = 2 */
  expect_fail(&p, CLATTN_INVALID_SHAPE, "not a multiple of k.shape[2]", w.o);
  p = w.p;
  p.v.shape[1] = 16;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "v.shape[1] is 16, expected 32", w.o);
  p = w.p;
  p.k.shape[0] = 1;
  p.v.shape[0] = 1;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "k.shape[0] is 1, expected 2", w.o);
  p = w.p;
  p.o.shape[2] = 2;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "o.shape[2] is 2, expected 4", w.o);
  p = w.p;
  p.q.ndim = 3;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "q.ndim is 3", w.o);
  p = w.p;
  p.k.dtype = CLATTN_F16;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "v.dtype (f32) differs from k.dtype (f16)", w.o);
  p = w.p;
  p.q.dtype = CLATTN_I32;
  expect_fail(&p, CLATTN_UNSUPPORTED, "q.dtype i32", w.o);
  p = w.p;
  p.k.stride[3] = 2;
  p.k.shape[1] = p.v.shape[1] = 16;
  expect_fail(&p, CLATTN_UNSUPPORTED, "k.stride[3]", w.o);
  p = w.p;
  p.q.shape[1] = -1;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "q.shape[1] is negative", w.o);
  p = w.p;
  p.num_splits = -2;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "num_splits", w.o);
  p = w.p;
  p.scale = NAN;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "scale", w.o);
  /* optional tensors */
  p = w.p;
  p.maybe_lse = clattn_tensor_3d(w.q, 0, CLATTN_F32, 2, 4, 2);
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_lse.shape[2] is 2, expected 1", w.o);
  p = w.p;
  p.maybe_kv_len = clattn_tensor_1d(w.small, 0, CLATTN_I32, 3);
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_kv_len.shape[0] is 3, expected 2", w.o);
  p = w.p;
  p.maybe_kv_len = clattn_tensor_1d(w.small, 0, CLATTN_F32, 2);
  expect_fail(&p, CLATTN_UNSUPPORTED, "maybe_kv_len.dtype f32", w.o);
  p = w.p;
  p.maybe_block_table = clattn_tensor_2d(w.small, 0, CLATTN_I32, 1, 2);
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_block_table.shape[0] is 1, expected 2", w.o);
  p = w.p;
  p.maybe_q_start = clattn_tensor_1d(w.small, 0, CLATTN_I32, 3);
  expect_fail(&p, CLATTN_INVALID_SHAPE, "varlen q is [1, total_q, Hq, D]", w.o);
  p = w.p;
  p.k.dtype = p.v.dtype = CLATTN_FP8;
  p.k.shape[3] = p.v.shape[3] = 16;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "maybe_k_scale_shift.buf is NULL: fp8 K/V need it", w.o);
  p = w.p;
  p.k.dtype = p.v.dtype = CLATTN_INT4;
  p.kv_groups = 3;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "kv_groups is 3", w.o);
  p.kv_groups = 2;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "k.shape[3] is 64, expected 10 (int4 row", w.o);
  free_valid(&w);
}

static void test_head_dim_unsupported(void) {
  valid w;
  make_valid(&w);
  static const int bad[] = {4, 12, 264, 0};
  for (int i = 0; i < 4; i++) {
    clattn_decode_params p = w.p;
    p.q.shape[3] = p.o.shape[3] = bad[i];
    p.q.shape[0] = p.o.shape[0] = 1;
    expect_fail(&p, CLATTN_UNSUPPORTED, "head dim D", w.o);
  }
  free_valid(&w);
}

static void test_buffer_too_small(void) {
  valid w;
  make_valid(&w);
  clattn_decode_params p = w.p;
  p.k.shape[1] = 33; /* one key more than the buffer holds */
  p.v.shape[1] = 33;
  expect_fail(&p, CLATTN_OUT_OF_BOUNDS, "k: shape [2, 33, 2, 64]", w.o);
  p = w.p;
  p.v.offset = 4;
  expect_fail(&p, CLATTN_OUT_OF_BOUNDS, "v: shape", w.o);
  p = w.p;
  p.q.stride[0] = 1000; /* strides reach past the end */
  expect_fail(&p, CLATTN_OUT_OF_BOUNDS, "q: shape [2, 1, 4, 64] with strides [1000", w.o);
  p = w.p;
  p.o.offset = 2; /* misaligned */
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "o.offset (2 bytes)", w.o);
  p = w.p;
  p.maybe_bias = clattn_tensor_4d(w.small, 0, CLATTN_F32, 2, 4, 1, 32);
  expect_fail(&p, CLATTN_OUT_OF_BOUNDS, "maybe_bias", w.o);
  p = w.p;
  p.num_splits = 4;
  p.maybe_workspace = clattn_tensor_1d(w.small, 0, CLATTN_F32, 4);
  expect_fail(&p, CLATTN_OUT_OF_BOUNDS, "maybe_workspace.shape[0] is 4 floats (16 bytes); this call needs", w.o);
  free_valid(&w);
}

/* ------------------------------------------------------------------ bad data on the device */

/* Varlen starts the kernels bound (cl/seq.clh): a sequence whose range is
 * negative, decreasing, past the packed rows or longer than max_q_len is
 * skipped and raises the flag; its rows stay as they were (poison), the valid
 * sequences' rows are right, nothing is written outside o and lse (guards).
 * Once, {0, 4, 5} over 3 packed queries wrote 1 KiB after o and lse, and
 * {-4, 0, 3} 2 KiB before them. Portable and tensor-core (emulated) kernels,
 * one split and three. */
static void run_bad_starts(const int32_t *starts, int nb, int total, int max_q) {
  enum { HQ = 4, HKV = 2 };
  const int Dh = 64, Nk = 40;
  const size_t nq = (size_t)total * HQ * Dh, nkv = (size_t)nb * Nk * HKV * Dh;
  double *q = rand_tensor(nq, CLATTN_F16, 1.0), *k = rand_tensor(nkv, CLATTN_F16, 1.0),
         *v = rand_tensor(nkv, CLATTN_F16, 1.0);
  cl_mem qm = buf_from(q, nq, CLATTN_F16), km = buf_from(k, nkv, CLATTN_F16), vm = buf_from(v, nkv, CLATTN_F16);
  cl_mem sm = buf_from_i32(starts, (size_t)nb + 1);
  for (int path = 1; path <= 2; path++)
    for (int splits = 1; splits <= 3; splits += 2) {
      cl_mem om = buf_poison(nq * 2), lm = buf_poison((size_t)HQ * total * 4), fm = buf_zeros(4);
      clattn_decode_params p = {0};
      p.q = clattn_tensor_4d(qm, 0, CLATTN_F16, 1, total, HQ, Dh);
      p.k = clattn_tensor_4d(km, 0, CLATTN_F16, nb, Nk, HKV, Dh);
      p.v = clattn_tensor_4d(vm, 0, CLATTN_F16, nb, Nk, HKV, Dh);
      p.o = clattn_tensor_4d(om, 0, CLATTN_F16, 1, total, HQ, Dh);
      p.maybe_lse = clattn_tensor_3d(lm, 0, CLATTN_F32, 1, HQ, total);
      p.maybe_q_start = clattn_tensor_1d(sm, 0, CLATTN_I32, nb + 1);
      p.maybe_error_flag = clattn_tensor_1d(fm, 0, CLATTN_I32, 1);
      p.batch = nb;
      p.max_q_len = max_q;
      p.num_splits = splits;
      p.causal = 1;
      clattn_force_path(path);
      CHECK_OK(clattn_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL));
      clattn_force_path(0);
      finish();
      double *o = malloc(sizeof(double) * nq), *lse = malloc(sizeof(double) * HQ * total);
      buf_read(om, 0, nq, CLATTN_F16, o);
      buf_read(lm, 0, (size_t)HQ * total, CLATTN_F32, lse);
      int32_t flag = 0;
      buf_read_i32(fm, 1, &flag);
      CU_ASSERT_EQUAL(flag, 1);
      bool *owned = calloc((size_t)total, 1);
      for (int b = 0; b < nb; b++) {
        const int s0 = starts[b], s1 = starts[b + 1];
        if (!(0 <= s0 && s0 <= s1 && s1 <= total && s1 - s0 <= max_q)) continue;
        const int mq = s1 - s0;
        double *oref = calloc((size_t)mq * HQ * Dh + 1, sizeof(double)), *lref = calloc((size_t)HQ * mq + 1, sizeof(double));
        ref_decode_args a = {1, mq, HQ, HKV, Dh, Nk, q + (size_t)s0 * HQ * Dh, k + (size_t)b * Nk * HKV * Dh,
                             v + (size_t)b * Nk * HKV * Dh, NULL, NULL, NULL, 1.0 / 8.0, 1, oref, lref};
        ref_decode(&a);
        const double tol = 4.0 / 2048.0 * 2;
        check_close("valid sequence's o", o + (size_t)s0 * HQ * Dh, oref, (size_t)mq * HQ * Dh, tol, tol);
        for (int h = 0; h < HQ; h++)
          check_close("valid sequence's lse", lse + (size_t)h * total + s0, lref + (size_t)h * mq, (size_t)mq, 1e-3, 1e-4);
        for (int r = s0; r < s1; r++) owned[r] = true;
        free(oref), free(lref);
      }
      for (int r = 0; r < total; r++) /* rows of no valid sequence keep the poison */
        if (!owned[r]) {
          CU_ASSERT(isnan(o[(size_t)r * HQ * Dh]) && isnan(o[((size_t)r + 1) * HQ * Dh - 1]));
          CU_ASSERT(isnan(lse[r]));
        }
      free(owned), free(o), free(lse);
      buf_release(&om);
      buf_release(&lm);
      buf_release(&fm);
    }
  buf_release(&qm), buf_release(&km), buf_release(&vm), buf_release(&sm);
  free(q), free(k), free(v);
}

static void test_bad_starts(void) {
  static const int32_t a[3] = {0, 4, 5};      /* past 3 packed rows */
  static const int32_t b[4] = {-4, 0, 3, 4};  /* negative first, then two valid */
  static const int32_t c[4] = {0, 2, 9, 4};   /* valid, past the end, decreasing */
  static const int32_t d[4] = {0, 3, 3, 4};   /* 3 rows with max_q_len 2, empty, valid */
  run_bad_starts(a, 2, 3, 3);
  run_bad_starts(b, 3, 4, 3);
  run_bad_starts(c, 3, 4, 4);
  run_bad_starts(d, 3, 4, 2);
}

void add_decode_error_tests(CU_pSuite s) {
  CU_add_test(s, "errors: NULL arguments", test_null_arguments);
  CU_add_test(s, "errors: inconsistent shapes and dtypes", test_inconsistent_shapes);
  CU_add_test(s, "errors: head dim unsupported", test_head_dim_unsupported);
  CU_add_test(s, "errors: buffers smaller than shape and strides", test_buffer_too_small);
  CU_add_test(s, "varlen starts out of range on the device: bounded, flagged", test_bad_starts);
}
