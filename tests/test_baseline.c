/* Suite baseline: the CLBlast unfused reference (clattn_reference_decode)
 * against the double-precision CPU reference: dtypes (staged and in-place
 * K/V), GQA with one and several queries, lengths, causal, bias, lse, varlen
 * queries, strided K/V, rounds over sequences, an empty cache; and its
 * error paths. Built without CLBlast, it checks the UNSUPPORTED twin. */
#include "common.h"
#include "internal.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bcase {
  int B, Mq, Hq, Hkv, D, N;
  clattn_dtype qdt, kvdt, odt;
  int causal, bias, lse, bhsd;
  int varlen_kv;        /* random kv lengths in [0, N] */
  const int *q_counts;  /* varlen queries (NULL: dense Mq) */
  int64_t stage_limit;  /* > 0: floats per staged slab (forces rounds) */
  int in_place;         /* o is q itself (the same view; odt = qdt) */
} bcase;

#ifdef CLATTN_HAVE_CLBLAST
static void run_case(const bcase *c) {
  char name[200];
  CASE_NAME(name, "baseline B=%d Mq=%d Hq=%d Hkv=%d D=%d N=%d q=%s kv=%s o=%s%s%s%s%s%s%s%s%s", c->B,
            c->Mq, c->Hq, c->Hkv, c->D, c->N, clattn_dtype_name(c->qdt), clattn_dtype_name(c->kvdt),
            clattn_dtype_name(c->odt), c->causal ? " causal" : "", c->bias ? " bias" : "",
            c->lse ? " lse" : "", c->bhsd ? " bhsd" : "", c->varlen_kv ? " kvlen" : "",
            c->q_counts ? " varlen" : "", c->stage_limit ? " rounds" : "", c->in_place ? " o=q" : "");
  const int B = c->B, Hq = c->Hq, Hkv = c->Hkv, D = c->D, N = c->N;
  int32_t *q_start = calloc((size_t)B + 1, sizeof *q_start);
  int Mq = c->Mq;
  if (c->q_counts) {
    Mq = 0;
    for (int b = 0; b < B; b++) {
      q_start[b + 1] = q_start[b] + c->q_counts[b];
      if (c->q_counts[b] > Mq) Mq = c->q_counts[b];
    }
  }
  const int total_q = c->q_counts ? q_start[B] : B * Mq;
  const size_t nq = (size_t)total_q * Hq * D, nkv = (size_t)B * N * Hkv * D;
  double *q = rand_tensor(nq, c->qdt, 1.0), *k = rand_tensor(nkv, c->kvdt, 1.0), *v = rand_tensor(nkv, c->kvdt, 1.0);
  double *bias = c->bias ? rand_tensor((size_t)B * Hq * Mq * N, CLATTN_F32, 1.0) : NULL;
  int32_t *kv_len = malloc(sizeof(int32_t) * (size_t)B);
  for (int b = 0; b < B; b++) kv_len[b] = c->varlen_kv ? rng_int(0, N) : N;
  double *o_ref = calloc(nq + 1, sizeof(double));
  double *lse_ref = calloc((size_t)total_q * Hq + 1, sizeof(double));
  ref_decode_args ra = {B, Mq, Hq, Hkv, D, N, q, k, v, bias, kv_len, c->q_counts ? q_start : NULL,
                        1.0 / sqrt((double)D), c->causal, o_ref, lse_ref};
  ref_decode(&ra);

  clattn_decode_params p;
  memset(&p, 0, sizeof p);
  cl_mem qb = buf_from(q, nq, c->qdt);
  p.q = c->q_counts ? clattn_tensor_4d(qb, 0, c->qdt, 1, total_q, Hq, D)
                    : clattn_tensor_4d(qb, 0, c->qdt, B, Mq, Hq, D);
  cl_mem kvb[2] = {NULL, NULL};
  for (int w = 0; w < 2; w++) {
    const double *src = w ? v : k;
    if (c->bhsd) { /* stored [B, Hkv, N, D], viewed as [B, N, Hkv, D] */
      double *t = malloc(sizeof(double) * (nkv + 1));
      for (int b = 0; b < B; b++)
        for (int j = 0; j < N; j++)
          for (int h = 0; h < Hkv; h++)
            memcpy(t + (((size_t)b * Hkv + h) * N + j) * D, src + (((size_t)b * N + j) * Hkv + h) * D,
                   sizeof(double) * D);
      kvb[w] = buf_from(t, nkv, c->kvdt);
      free(t);
    } else {
      kvb[w] = buf_from(src, nkv, c->kvdt);
    }
  }
  p.k = clattn_tensor_4d(kvb[0], 0, c->kvdt, B, N, Hkv, D);
  if (c->bhsd) {
    p.k.stride[1] = D;
    p.k.stride[2] = (int64_t)N * D;
  }
  p.v = p.k;
  p.v.buf = kvb[1];
  cl_mem ob = c->in_place ? qb : buf_poison(nq * clattn_dtype_size(c->odt) + 4);
  if (c->in_place) clRetainMemObject(qb);
  p.o = p.q;
  p.o.buf = ob;
  p.o.dtype = c->odt;
  cl_mem lb = NULL, kb = NULL, sb = NULL, bb = NULL;
  if (c->lse) {
    lb = buf_poison((size_t)total_q * Hq * 4 + 4);
    p.maybe_lse = c->q_counts ? clattn_tensor_3d(lb, 0, CLATTN_F32, 1, Hq, total_q)
                              : clattn_tensor_3d(lb, 0, CLATTN_F32, B, Hq, Mq);
  }
  if (c->varlen_kv) {
    kb = buf_from_i32(kv_len, (size_t)B);
    p.maybe_kv_len = clattn_tensor_1d(kb, 0, CLATTN_I32, B);
  }
  if (c->q_counts) {
    sb = buf_from_i32(q_start, (size_t)B + 1);
    p.maybe_q_start = clattn_tensor_1d(sb, 0, CLATTN_I32, B + 1);
    p.batch = B;
    p.max_q_len = Mq;
  }
  if (bias) {
    bb = buf_from(bias, (size_t)B * Hq * Mq * N, CLATTN_F32);
    p.maybe_bias = clattn_tensor_4d(bb, 0, CLATTN_F32, B, Hq, Mq, N);
  }
  p.causal = c->causal;
  if (c->stage_limit) clattn_baseline_stage_limit = c->stage_limit;
  cl_event ev = NULL;
  clattn_status s = clattn_reference_decode(fx.ctx, fx.queue, &p, 0, NULL, &ev);
  clattn_baseline_stage_limit = (int64_t)1 << 28;
  if (s != CLATTN_SUCCESS) fprintf(stderr, "  %s: %s\n", name, clattn_last_error());
  CU_ASSERT_EQUAL_FATAL(s, CLATTN_SUCCESS);
  CU_ASSERT_EQUAL(clWaitForEvents(1, &ev), CL_SUCCESS);
  clReleaseEvent(ev);

  double *o = malloc(sizeof(double) * (nq + 1));
  buf_read(ob, 0, nq, c->odt, o);
  /* the output's rounding (tol_for: a few ulps of o's dtype) plus f32
   * accumulation over N keys, relative to the output's O(1) scale */
  const double tol = tol_for(c->odt) + 1e-5;
  double err = check_close(name, o, o_ref, nq, tol, tol);
  if (c->lse) {
    double *l = malloc(sizeof(double) * ((size_t)total_q * Hq + 1));
    buf_read(lb, 0, (size_t)total_q * Hq, CLATTN_F32, l);
    /* lse is f32 from the same rounded inputs: f32 arithmetic error only */
    check_close(name, l, lse_ref, (size_t)total_q * Hq, 1e-4, 1e-5);
    free(l);
  }
  fprintf(stderr, "  %s: max err %.3g\n", name, err);
  cl_mem all[] = {qb, kvb[0], kvb[1], ob, lb, kb, sb, bb};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_release(&all[i]);
  free(q), free(k), free(v), free(bias), free(kv_len), free(q_start), free(o_ref), free(lse_ref);
  free(o);
}

static void test_dtypes(void) {
  /* f32 K/V read in place; f16/bf16 staged to f32 */
  const clattn_dtype dt[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  for (int i = 0; i < 3; i++) {
    bcase c = {.B = 2, .Mq = 1, .Hq = 8, .Hkv = 2, .D = 64, .N = 77, .lse = 1};
    c.qdt = c.kvdt = c.odt = dt[i];
    run_case(&c);
  }
  bcase mixed = {.B = 2, .Mq = 1, .Hq = 4, .Hkv = 4, .D = 32, .N = 40, .qdt = CLATTN_BF16,
                 .kvdt = CLATTN_F16, .odt = CLATTN_F32};
  run_case(&mixed);
}

static void test_shapes(void) {
  /* one query per sequence: the G heads of a KV head form one GEMM; several
   * queries: one GEMM per head */
  bcase mqa = {.B = 3, .Mq = 1, .Hq = 8, .Hkv = 1, .D = 80, .N = 50, .qdt = CLATTN_F32,
               .kvdt = CLATTN_F32, .odt = CLATTN_F32, .lse = 1};
  run_case(&mqa);
  bcase multi = {.B = 2, .Mq = 3, .Hq = 6, .Hkv = 2, .D = 16, .N = 33, .qdt = CLATTN_F16,
                 .kvdt = CLATTN_F16, .odt = CLATTN_F16, .lse = 1};
  run_case(&multi);
  bcase strided = {.B = 2, .Mq = 1, .Hq = 4, .Hkv = 2, .D = 24, .N = 31, .qdt = CLATTN_F32,
                   .kvdt = CLATTN_F32, .odt = CLATTN_F32, .bhsd = 1};
  run_case(&strided);
}

static void test_masks(void) {
  bcase causal = {.B = 3, .Mq = 4, .Hq = 4, .Hkv = 2, .D = 32, .N = 20, .qdt = CLATTN_F32,
                  .kvdt = CLATTN_F32, .odt = CLATTN_F32, .causal = 1, .lse = 1, .varlen_kv = 1};
  run_case(&causal);
  bcase bias = {.B = 2, .Mq = 2, .Hq = 4, .Hkv = 4, .D = 32, .N = 45, .qdt = CLATTN_F16,
                .kvdt = CLATTN_F16, .odt = CLATTN_F32, .bias = 1, .lse = 1, .varlen_kv = 1};
  run_case(&bias);
  static const int counts[] = {2, 0, 3, 1};
  bcase varlen = {.B = 4, .Mq = 3, .Hq = 4, .Hkv = 2, .D = 16, .N = 25, .qdt = CLATTN_F32,
                  .kvdt = CLATTN_F32, .odt = CLATTN_F32, .causal = 1, .lse = 1,
                  .q_counts = counts};
  run_case(&varlen);
}

static void test_rounds(void) {
  /* a slab of 2 sequences: 5 sequences take 3 rounds, staged and in place */
  bcase c = {.B = 5, .Mq = 1, .Hq = 4, .Hkv = 2, .D = 32, .N = 30, .qdt = CLATTN_F16,
             .kvdt = CLATTN_F16, .odt = CLATTN_F32, .lse = 1, .varlen_kv = 1,
             .stage_limit = 2 * 30 * 2 * 32};
  run_case(&c);
  c.qdt = c.kvdt = CLATTN_F32;
  run_case(&c);
}

/* o = q (the same view), as clattn_decode allows: each round reads its q
 * rows before it writes them, one GEMM for the heads of a KV head or one
 * per head, f32 read in place or staged f16, over rounds and varlen rows. */
static void test_in_place(void) {
  bcase c = {.B = 5, .Mq = 1, .Hq = 4, .Hkv = 2, .D = 32, .N = 30, .qdt = CLATTN_F16,
             .kvdt = CLATTN_F16, .odt = CLATTN_F16, .lse = 1, .varlen_kv = 1,
             .stage_limit = 2 * 30 * 2 * 32, .in_place = 1};
  run_case(&c);
  c.qdt = c.kvdt = c.odt = CLATTN_F32;
  run_case(&c);
  static const int counts[] = {2, 0, 3, 1};
  bcase varlen = {.B = 4, .Mq = 3, .Hq = 4, .Hkv = 2, .D = 16, .N = 25, .qdt = CLATTN_F32,
                  .kvdt = CLATTN_F32, .odt = CLATTN_F32, .causal = 1, .lse = 1,
                  .q_counts = counts, .in_place = 1};
  run_case(&varlen);
}

static void test_empty(void) {
  /* no keys at all: o = 0, lse = -inf */
  bcase c = {.B = 2, .Mq = 1, .Hq = 2, .Hkv = 1, .D = 16, .N = 0, .qdt = CLATTN_F32,
             .kvdt = CLATTN_F32, .odt = CLATTN_F32, .lse = 1};
  run_case(&c);
}
#endif

/* A valid small problem for the error cases; o is poisoned so a test can
 * tell that nothing was written. */
typedef struct small {
  cl_mem q, k, v, o;
  clattn_decode_params p;
} small;

static void small_make(small *s) {
  memset(s, 0, sizeof *s);
  double z[2 * 4 * 16] = {0};
  s->q = buf_from(z, 2 * 4 * 16, CLATTN_F32);
  s->k = buf_from(z, 2 * 4 * 16, CLATTN_F32);
  s->v = buf_from(z, 2 * 4 * 16, CLATTN_F32);
  s->o = buf_poison(2 * 4 * 16 * 4);
  s->p.q = clattn_tensor_4d(s->q, 0, CLATTN_F32, 2, 1, 4, 16);
  s->p.k = clattn_tensor_4d(s->k, 0, CLATTN_F32, 2, 4, 1, 16);
  s->p.v = clattn_tensor_4d(s->v, 0, CLATTN_F32, 2, 4, 1, 16);
  s->p.o = clattn_tensor_4d(s->o, 0, CLATTN_F32, 2, 1, 4, 16);
}

static void small_free(small *s) {
  /* nothing was enqueued: o still holds the poison */
  finish();
  uint32_t w = 0;
  CU_ASSERT_EQUAL(clEnqueueReadBuffer(fx.queue, s->o, CL_TRUE, 0, 4, &w, 0, NULL, NULL), CL_SUCCESS);
  CU_ASSERT_EQUAL(w, 0xffffffffu);
  buf_release(&s->q);
  buf_release(&s->k);
  buf_release(&s->v);
  buf_release(&s->o);
}

static void test_errors(void) {
  small s;
#ifdef CLATTN_HAVE_CLBLAST
  small_make(&s);
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, NULL, 0, NULL, NULL),
              CLATTN_INVALID_ARGUMENT, "params");
  CHECK_FAILS(clattn_reference_decode(NULL, fx.queue, &s.p, 0, NULL, NULL), CLATTN_INVALID_ARGUMENT,
              "ctx");
  CHECK_FAILS(clattn_reference_decode(fx.ctx, NULL, &s.p, 0, NULL, NULL), CLATTN_INVALID_ARGUMENT,
              "queue");
  clattn_decode_params p = s.p;
  p.maybe_block_table = clattn_tensor_2d(s.q, 0, CLATTN_I32, 2, 1);
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL), CLATTN_UNSUPPORTED,
              "maybe_block_table");
  p = s.p;
  p.k.dtype = p.v.dtype = CLATTN_INT4;
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL), CLATTN_UNSUPPORTED,
              "k.dtype");
  p = s.p;
  p.k.shape[2] = p.v.shape[2] = 3; /* 4 query heads over 3 KV heads */
  p.k.shape[1] = p.v.shape[1] = 1;
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL), CLATTN_INVALID_SHAPE,
              "q.shape[2]");
  p = s.p;
  p.o.shape[3] = 8;
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL), CLATTN_INVALID_SHAPE,
              "o.shape[3]");
  p = s.p;
  p.v.dtype = CLATTN_F16;
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL),
              CLATTN_INVALID_ARGUMENT, "v.dtype");
  p = s.p;
  p.k.shape[1] = p.v.shape[1] = 100; /* past the buffer's end */
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL), CLATTN_OUT_OF_BOUNDS,
              "k");
  p = s.p;
  p.scale = -1.0f;
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, &p, 0, NULL, NULL),
              CLATTN_INVALID_ARGUMENT, "scale");
  /* CLBlast takes no wait list: an out-of-order queue would lose the order */
  cl_int err = CL_SUCCESS;
  cl_command_queue ooo =
      clCreateCommandQueue(fx.cl, fx.dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
  if (err == CL_SUCCESS) {
    CHECK_FAILS(clattn_reference_decode(fx.ctx, ooo, &s.p, 0, NULL, NULL), CLATTN_UNSUPPORTED,
                "in-order");
    clReleaseCommandQueue(ooo);
  }
  small_free(&s);
#else
  small_make(&s);
  CHECK_FAILS(clattn_reference_decode(fx.ctx, fx.queue, &s.p, 0, NULL, NULL), CLATTN_UNSUPPORTED,
              "CLBlast");
  small_free(&s);
#endif
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  rng_seed(7);
  CU_pSuite s = CU_add_suite("baseline", fixture_init, fixture_cleanup);
#ifdef CLATTN_HAVE_CLBLAST
  CU_add_test(s, "dtypes f32 (in place) f16 bf16 (staged) mixed", test_dtypes);
  CU_add_test(s, "MQA, several queries, BHSD strides", test_shapes);
  CU_add_test(s, "causal, bias, kv lengths, varlen queries", test_masks);
  CU_add_test(s, "rounds over sequences", test_rounds);
  CU_add_test(s, "empty cache", test_empty);
  CU_add_test(s, "o is q (in place)", test_in_place);
#endif
  CU_add_test(s, "error paths", test_errors);
  return run_suites();
}
