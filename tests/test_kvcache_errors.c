/* The K/V cache operations' error paths: each bad argument returns its
 * status with a message naming the argument and dimension, and enqueues
 * nothing (no event comes back and the cache keeps its poison). */
#include "test_kvcache.h"

#include <string.h>

/* A valid append: B = 2 sequences, 3 new rows (new_start), Hkv = 2, D = 32,
 * an int4 G = 2 paged K/V cache of 4 pages of 8 rows (X = 2 + 4 words), a
 * dense fp8 cache [2, 8, 2, 8] with its scale-shift [2, 8, 2] for the variants. */
typedef struct valid {
  clattn_kv_append_params p;
  cl_mem x, kc, vc, pos, start, table, flag, big;
} valid;

#define CACHE_BYTES (4 * 8 * 2 * 8 * 4) /* room for the fp8 views too */

static void make_valid(valid *w) {
  memset(w, 0, sizeof *w);
  static const int32_t pos[2] = {0, 3}, start[3] = {0, 2, 3}, table[4] = {0, 1, 2, 3};
  w->x = buf_zeros(3 * 2 * 32 * 4);
  w->kc = buf_poison(CACHE_BYTES);
  w->vc = buf_poison(CACHE_BYTES);
  w->big = buf_zeros(1 << 16);
  w->pos = buf_from_i32(pos, 2);
  w->start = buf_from_i32(start, 3);
  w->table = buf_from_i32(table, 4);
  w->flag = buf_zeros(16);
  w->p.new_k = clattn_tensor_3d(w->x, 0, CLATTN_F32, 3, 2, 32);
  w->p.maybe_new_v = w->p.new_k;
  w->p.k_cache = clattn_tensor_4d(w->kc, 0, CLATTN_INT4, 4, 8, 2, 6);
  w->p.maybe_v_cache = clattn_tensor_4d(w->vc, 0, CLATTN_INT4, 4, 8, 2, 6);
  w->p.pos = clattn_tensor_1d(w->pos, 0, CLATTN_I32, 2);
  w->p.maybe_new_start = clattn_tensor_1d(w->start, 0, CLATTN_I32, 3);
  w->p.maybe_block_table = clattn_tensor_2d(w->table, 0, CLATTN_I32, 2, 2);
  w->p.maybe_error_flag = clattn_tensor_1d(w->flag, 0, CLATTN_I32, 1);
  w->p.kv_groups = 2;
}

static void free_valid(valid *w) {
  buf_release(&w->x);
  buf_release(&w->kc);
  buf_release(&w->vc);
  buf_release(&w->pos);
  buf_release(&w->start);
  buf_release(&w->table);
  buf_release(&w->flag);
  buf_release(&w->big);
}

/* The cache's first word is still the 0xFF poison. */
static void expect_untouched(cl_mem m) {
  finish();
  int32_t first = 0;
  buf_read_i32(m, 1, &first);
  CU_ASSERT_EQUAL(first, -1);
}

static void expect_fail(const clattn_kv_append_params *p, clattn_status status,
                        const char *needle, cl_mem cache) {
  cl_event ev = NULL;
  CHECK_FAILS(clattn_kv_append(fx.ctx, fx.queue, p, 0, NULL, &ev), status, needle);
  CU_ASSERT_PTR_NULL(ev);
  expect_untouched(cache);
}

static void test_append_arguments(void) {
  valid w;
  make_valid(&w);
  cl_event ev = NULL;
  /* the valid params succeed (and write) */
  CHECK_OK(clattn_kv_append(fx.ctx, fx.queue, &w.p, 0, NULL, NULL));
  finish();
  buf_release(&w.kc);
  w.kc = buf_poison(CACHE_BYTES);
  w.p.k_cache.buf = w.kc;
  CHECK_FAILS(clattn_kv_append(NULL, fx.queue, &w.p, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT, "ctx");
  CHECK_FAILS(clattn_kv_append(fx.ctx, NULL, &w.p, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT, "queue");
  CHECK_FAILS(clattn_kv_append(fx.ctx, fx.queue, NULL, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "params");
  CHECK_FAILS(clattn_kv_append(fx.ctx, fx.queue, &w.p, 1, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "num_wait");
  CU_ASSERT_PTR_NULL(ev);

  clattn_kv_append_params p = w.p;
  p.new_k.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "new_k.buf is NULL", w.kc);
  p = w.p;
  p.new_k.ndim = 4;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "new_k.ndim is 4", w.kc);
  p = w.p;
  p.new_k.dtype = CLATTN_I32;
  expect_fail(&p, CLATTN_UNSUPPORTED, "new_k.dtype i32", w.kc);
  p = w.p;
  p.new_k = clattn_tensor_3d(w.x, 0, CLATTN_F32, 3, 2, 12);
  expect_fail(&p, CLATTN_UNSUPPORTED, "new_k.shape[2] (12)", w.kc);
  p.new_k = clattn_tensor_3d(w.big, 0, CLATTN_F16, 3, 2, 4096);
  expect_fail(&p, CLATTN_UNSUPPORTED, "new_k.shape[2] (4096)", w.kc);
  p = w.p;
  p.new_k = clattn_tensor_3d(w.x, 0, CLATTN_F32, 4, 2, 32); /* 4 rows do not fit in x */
  expect_fail(&p, CLATTN_OUT_OF_BOUNDS, "new_k", w.kc);
  p = w.p;
  p.pos.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "pos.buf is NULL", w.kc);
  p = w.p;
  p.pos.dtype = CLATTN_F32;
  expect_fail(&p, CLATTN_UNSUPPORTED, "pos.dtype f32", w.kc);
  p = w.p;
  p.maybe_new_start.shape[0] = 2;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_new_start.shape[0] is 2, expected 3", w.kc);
  p = w.p;
  p.maybe_new_start.buf = NULL; /* then one row per sequence: 3 rows for 2 sequences */
  expect_fail(&p, CLATTN_INVALID_SHAPE, "new_k.shape[0] is 3, expected 2", w.kc);
  p = w.p;
  p.maybe_error_flag.shape[0] = 2;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_error_flag.shape[0] is 2", w.kc);
  p = w.p;
  p.maybe_error_flag.dtype = CLATTN_F32;
  expect_fail(&p, CLATTN_UNSUPPORTED, "maybe_error_flag.dtype", w.kc);
  free_valid(&w);
}

static void test_append_caches(void) {
  valid w;
  make_valid(&w);
  clattn_kv_append_params p = w.p;
  p.k_cache.ndim = 3;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "k_cache.ndim is 3", w.kc);
  p = w.p;
  p.k_cache.dtype = CLATTN_I32;
  expect_fail(&p, CLATTN_UNSUPPORTED, "k_cache.dtype i32", w.kc);
  p = w.p;
  p.k_cache.shape[2] = 1;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "k_cache.shape[2] is 1, expected 2", w.kc);
  p = w.p;
  p.kv_groups = 1; /* X = 1 + 4 words, the cache has 6 */
  expect_fail(&p, CLATTN_INVALID_SHAPE, "k_cache.shape[3] is 6, expected 5 (kv_groups + D/8", w.kc);
  p.kv_groups = 3;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "kv_groups (3) must be 1, 2, 4 or 8", w.kc);
  p.kv_groups = 8; /* 32 % 64 */
  expect_fail(&p, CLATTN_UNSUPPORTED, "not a multiple of 8 * kv_groups (8)", w.kc);
  p = w.p;
  p.k_cache.stride[3] = 2;
  p.k_cache.shape[0] = 1;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "k_cache.stride[3] (2) must be 1", w.kc);
  p = w.p;
  p.k_cache.buf = w.x; /* too small for the view */
  expect_fail(&p, CLATTN_OUT_OF_BOUNDS, "k_cache", w.kc);
  /* V */
  p = w.p;
  p.maybe_v_cache.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "maybe_new_v is given but maybe_v_cache.buf is NULL", w.kc);
  p = w.p;
  p.maybe_new_v.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "maybe_v_cache is given but maybe_new_v.buf is NULL", w.kc);
  p = w.p;
  p.maybe_new_v.dtype = CLATTN_F16;
  expect_fail(&p, CLATTN_UNSUPPORTED, "maybe_new_v.dtype f16 differs from new_k.dtype f32", w.kc);
  p = w.p;
  p.maybe_new_v.shape[1] = 1;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_new_v.shape[1] is 1, expected 2", w.kc);
  p = w.p;
  p.maybe_v_cache.dtype = CLATTN_FP8;
  p.maybe_v_cache.shape[3] = 8;
  p.kv_groups = 2;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "kv_groups (2) applies to int4 caches only", w.kc);
  p = w.p;
  p.maybe_v_cache.shape[0] = 3;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_v_cache.shape[0] is 3, expected 4", w.kc);
  /* paging */
  p = w.p;
  p.maybe_block_table.dtype = CLATTN_F32;
  expect_fail(&p, CLATTN_UNSUPPORTED, "maybe_block_table.dtype f32", w.kc);
  p = w.p;
  p.maybe_block_table.shape[0] = 1;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_block_table.shape[0] is 1, expected 2", w.kc);
  p = w.p;
  p.maybe_block_table.stride[1] = 2;
  p.maybe_block_table.stride[0] = 1;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_block_table.stride[1] (2) must be 1", w.kc);
  p = w.p;
  p.k_cache.shape[1] = 0;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "page size", w.kc);
  p = w.p;
  p.maybe_block_table.buf = NULL; /* dense: shape[0] must be B */
  expect_fail(&p, CLATTN_INVALID_SHAPE, "k_cache.shape[0] is 4, expected 2", w.kc);
  free_valid(&w);
}

static void test_fp8_scale_shift(void) {
  valid w;
  make_valid(&w);
  cl_mem ss = buf_zeros(4 * 8 * 2 * 4);
  clattn_kv_append_params p = w.p;
  p.kv_groups = 0;
  p.k_cache = clattn_tensor_4d(w.kc, 0, CLATTN_FP8, 4, 8, 2, 8);
  p.maybe_v_cache = clattn_tensor_4d(w.vc, 0, CLATTN_FP8_FNUZ, 4, 8, 2, 8);
  p.maybe_k_scale_shift = clattn_tensor_3d(ss, 0, CLATTN_I32, 4, 8, 2);
  p.maybe_v_scale_shift = p.maybe_k_scale_shift;
  expect_fail(&p, CLATTN_UNSUPPORTED, "maybe_v_cache.dtype fp8fnuz differs from k_cache.dtype fp8", w.kc);
  p.maybe_v_cache.dtype = CLATTN_FP8;
  p.k_cache.shape[3] = 6;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "k_cache.shape[3] is 6, expected 8 (D/4 words", w.kc);
  p.k_cache.shape[3] = 8;
  p.maybe_k_scale_shift.buf = NULL;
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "maybe_k_scale_shift.buf is NULL: an fp8 cache", w.kc);
  p.maybe_k_scale_shift = p.maybe_v_scale_shift;
  p.maybe_k_scale_shift.shape[1] = 4;
  expect_fail(&p, CLATTN_INVALID_SHAPE, "maybe_k_scale_shift.shape[1] is 4, expected 8", w.kc);
  p.maybe_k_scale_shift = p.maybe_v_scale_shift;
  p.maybe_k_scale_shift.dtype = CLATTN_F32;
  expect_fail(&p, CLATTN_UNSUPPORTED, "maybe_k_scale_shift.dtype f32", w.kc);
  /* a scale-shift tensor with an int4 cache */
  p = w.p;
  p.maybe_k_scale_shift = clattn_tensor_3d(ss, 0, CLATTN_I32, 4, 8, 2);
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "maybe_k_scale_shift is only for fp8 caches", w.kc);
  p = w.p;
  p.maybe_new_v.buf = NULL;
  p.maybe_v_cache.buf = NULL;
  p.maybe_v_scale_shift = clattn_tensor_3d(ss, 0, CLATTN_I32, 4, 8, 2);
  expect_fail(&p, CLATTN_INVALID_ARGUMENT, "maybe_v_scale_shift is given without", w.kc);
  buf_release(&ss);
  free_valid(&w);
}

static void test_quantize_dequantize_arguments(void) {
  valid w;
  make_valid(&w);
  cl_mem out = buf_poison(2 * 3 * 2 * 32 * 4);
  clattn_kv_quantize_params q;
  memset(&q, 0, sizeof q);
  q.src = clattn_tensor_4d(w.x, 0, CLATTN_F32, 2, 1, 2, 32);
  q.cache = w.p.k_cache;
  q.maybe_block_table = w.p.maybe_block_table;
  q.maybe_start = w.p.pos;
  q.kv_groups = 2;
  CHECK_OK(clattn_kv_quantize(fx.ctx, fx.queue, &q, 0, NULL, NULL));
  finish();
  cl_event ev = NULL;
  CHECK_FAILS(clattn_kv_quantize(fx.ctx, fx.queue, NULL, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "params");
  clattn_kv_quantize_params qb = q;
  qb.cache.buf = w.vc;
  qb.src.ndim = 3;
  CHECK_FAILS(clattn_kv_quantize(fx.ctx, fx.queue, &qb, 0, NULL, &ev), CLATTN_INVALID_SHAPE,
              "src.ndim is 3");
  qb = q;
  qb.cache.buf = w.vc;
  qb.maybe_start.shape[0] = 1;
  CHECK_FAILS(clattn_kv_quantize(fx.ctx, fx.queue, &qb, 0, NULL, &ev), CLATTN_INVALID_SHAPE,
              "maybe_start.shape[0] is 1, expected 2");
  qb = q;
  qb.cache.buf = w.vc;
  qb.src.dtype = CLATTN_F64;
  CHECK_FAILS(clattn_kv_quantize(fx.ctx, fx.queue, &qb, 0, NULL, &ev), CLATTN_UNSUPPORTED,
              "src.dtype f64");
  CU_ASSERT_PTR_NULL(ev);
  expect_untouched(w.vc);

  clattn_kv_dequantize_params d;
  memset(&d, 0, sizeof d);
  d.cache = w.p.k_cache;
  d.maybe_block_table = w.p.maybe_block_table;
  d.out = clattn_tensor_4d(out, 0, CLATTN_F32, 2, 3, 2, 32);
  d.kv_groups = 2;
  CHECK_OK(clattn_kv_dequantize(fx.ctx, fx.queue, &d, 0, NULL, NULL));
  finish();
  buf_release(&out);
  out = buf_poison(2 * 3 * 2 * 32 * 4);
  d.out.buf = out;
  clattn_kv_dequantize_params db = d;
  db.out.dtype = CLATTN_I32;
  CHECK_FAILS(clattn_kv_dequantize(fx.ctx, fx.queue, &db, 0, NULL, &ev), CLATTN_UNSUPPORTED,
              "out.dtype i32");
  db = d;
  db.out.shape[3] = 16;
  CHECK_FAILS(clattn_kv_dequantize(fx.ctx, fx.queue, &db, 0, NULL, &ev), CLATTN_INVALID_SHAPE,
              "cache.shape[3] is 6, expected 4 (kv_groups + D/8");
  db = d;
  db.out.shape[2] = 1;
  CHECK_FAILS(clattn_kv_dequantize(fx.ctx, fx.queue, &db, 0, NULL, &ev), CLATTN_INVALID_SHAPE,
              "cache.shape[2] is 2, expected 1");
  db = d;
  db.out.shape[1] = 100; /* beyond the out buffer */
  CHECK_FAILS(clattn_kv_dequantize(fx.ctx, fx.queue, &db, 0, NULL, &ev), CLATTN_OUT_OF_BOUNDS,
              "out");
  db = d;
  db.cache.dtype = CLATTN_FP8;
  db.cache.shape[3] = 8;
  db.kv_groups = 0;
  CHECK_FAILS(clattn_kv_dequantize(fx.ctx, fx.queue, &db, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT,
              "maybe_scale_shift.buf is NULL");
  CU_ASSERT_PTR_NULL(ev);
  finish();
  double first = 0;
  buf_read(out, 0, 1, CLATTN_F32, &first);
  CU_ASSERT(first != first); /* still the NaN poison */
  buf_release(&out);
  free_valid(&w);
}

static void test_row_size(void) {
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_F16, 128, 0), 128);
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_INT4, 128, 0), 17);
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_INT4, 128, 8), 24);
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_INT4, 80, 4), 0); /* 80 % 32 */
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_INT4, 64, 3), 0);
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_FP8, 72, 0), 18);
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_FP8_FNUZ, 12, 0), 0);
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_FP8, 64, 2), 0);
  CU_ASSERT_EQUAL(clattn_kv_row_size(CLATTN_I32, 64, 0), 0);
}

void kvcache_add_error_tests(CU_pSuite s) {
  CU_add_test(s, "errors: append arguments", test_append_arguments);
  CU_add_test(s, "errors: append caches, V, block table", test_append_caches);
  CU_add_test(s, "errors: fp8 scale-shift tensors", test_fp8_scale_shift);
  CU_add_test(s, "errors: quantize and dequantize", test_quantize_dequantize_arguments);
  CU_add_test(s, "cache row sizes", test_row_size);
}
