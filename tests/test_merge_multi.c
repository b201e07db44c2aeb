/* Sequence-parallel decode (clattn_decode_multi) against one decode over
 * the whole cache and the double reference: the fixture device listed
 * twice (one context), a shard on a second context (through the host),
 * empty shards, causal queries. Then the error paths of merge, its backward
 * and decode_multi: status, message, and nothing enqueued. */
#include "test_merge.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- multi-device decode */

typedef struct mcase {
  int nshards;
  const int *cuts;  /* nshards + 1 positions: shard j holds keys cuts[j] .. cuts[j+1]-1 */
  int separate;     /* shard on a second cl_context of the same device (-1: none) */
  int Mq, causal;
  const int *kv_len; /* [B] */
  clattn_dtype kvdt, part_dt, odt;
} mcase;

static cl_mem mem_in(cl_context cl, const double *x, size_t n, clattn_dtype dt) {
  const size_t es = clattn_dtype_size(dt);
  void *bytes = malloc(n * es + 4);
  host_pack(x, n, dt, bytes);
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * es + 4, bytes, &err);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  free(bytes);
  return m;
}

static cl_mem mem_i32_in(cl_context cl, const int32_t *x, size_t n) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * 4, (void *)x, &err);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  return m;
}

static void run_multi(const mcase *c) {
  enum { B = 2, Hq = 4, Hkv = 2, D = 64 };
  char name[200];
  CASE_NAME(name, "decode_multi shards=%d%s Mq=%d%s kv=%s partials=%s o=%s", c->nshards,
            c->separate >= 0 ? " (one on a second context)" : " (one context)", c->Mq,
            c->causal ? " causal" : "", clattn_dtype_name(c->kvdt), clattn_dtype_name(c->part_dt),
            clattn_dtype_name(c->odt));
  fprintf(stderr, "  case: %s\n", name);
  const int Mq = c->Mq, N = c->cuts[c->nshards];
  const size_t nq = (size_t)B * Mq * Hq * D, nkv = (size_t)B * N * Hkv * D, nl = (size_t)B * Hq * Mq;
  double *q = rand_dtype(nq, CLATTN_F32), *k = rand_dtype(nkv, c->kvdt), *v = rand_dtype(nkv, c->kvdt);
  int32_t kv_len[B] = {c->kv_len[0], c->kv_len[1]};
  double *o_ref = malloc(sizeof(double) * nq), *lse_ref = malloc(sizeof(double) * nl);
  ref_decode_args ra = {B, Mq, Hq, Hkv, D, N, q, k, v, NULL, kv_len, NULL,
                        1.0 / sqrt((double)D), c->causal, o_ref, lse_ref};
  ref_decode(&ra);

  /* one decode over the whole cache */
  cl_mem qm = buf_from(q, nq, CLATTN_F32), km = buf_from(k, nkv, c->kvdt),
         vm = buf_from(v, nkv, c->kvdt), lm = buf_from_i32(kv_len, B);
  clattn_decode_params one;
  memset(&one, 0, sizeof one);
  one.q = clattn_tensor_4d(qm, 0, CLATTN_F32, B, Mq, Hq, D);
  one.k = clattn_tensor_4d(km, 0, c->kvdt, B, N, Hkv, D);
  one.v = clattn_tensor_4d(vm, 0, c->kvdt, B, N, Hkv, D);
  one.o = clattn_tensor_4d(buf_poison(nq * 4), 0, c->odt, B, Mq, Hq, D);
  one.maybe_lse = clattn_tensor_3d(buf_poison(nl * 4), 0, CLATTN_F32, B, Hq, Mq);
  one.maybe_kv_len = clattn_tensor_1d(lm, 0, CLATTN_I32, B);
  one.causal = c->causal;
  CHECK_OK(clattn_decode(fx.ctx, fx.queue, &one, 0, NULL, NULL));

  /* a second context on the same device stands for another GPU */
  cl_context cl2 = NULL;
  clattn_context *ctx2 = NULL;
  cl_command_queue q2 = NULL;
  if (c->separate >= 0) {
    cl_int err = CL_SUCCESS;
    cl2 = clCreateContext(NULL, 1, &fx.dev, NULL, NULL, &err);
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
    CHECK_OK(clattn_context_create(cl2, fx.dev, NULL, &ctx2));
    q2 = clCreateCommandQueue(cl2, fx.dev, 0, &err);
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  }
  clattn_decode_shard sh[4];
  cl_mem owned[4][4];
  memset(sh, 0, sizeof sh);
  for (int j = 0; j < c->nshards; j++) {
    const bool other = j == c->separate;
    cl_context cl = other ? cl2 : fx.cl;
    const int s = c->cuts[j], len = c->cuts[j + 1] - s;
    const size_t row = (size_t)Hkv * D, npart = (size_t)B * len * row;
    double *kj = malloc(sizeof(double) * npart), *vj = malloc(sizeof(double) * npart);
    for (int b = 0; b < B; b++) {
      memcpy(kj + (size_t)b * len * row, k + ((size_t)b * N + s) * row, sizeof(double) * len * row);
      memcpy(vj + (size_t)b * len * row, v + ((size_t)b * N + s) * row, sizeof(double) * len * row);
    }
    int32_t lj[B];
    for (int b = 0; b < B; b++) {
      int l = kv_len[b] - s;
      lj[b] = l < 0 ? 0 : l > len ? len : l; /* 0: this shard is empty for sequence b */
    }
    owned[j][0] = mem_in(cl, q, nq, CLATTN_F32);
    owned[j][1] = mem_in(cl, kj, npart, c->kvdt);
    owned[j][2] = mem_in(cl, vj, npart, c->kvdt);
    owned[j][3] = mem_i32_in(cl, lj, B);
    free(kj);
    free(vj);
    sh[j].ctx = other ? ctx2 : fx.ctx;
    sh[j].queue = other ? q2 : fx.queue;
    clattn_decode_params *p = &sh[j].params;
    p->q = clattn_tensor_4d(owned[j][0], 0, CLATTN_F32, B, Mq, Hq, D);
    p->k = clattn_tensor_4d(owned[j][1], 0, c->kvdt, B, len, Hkv, D);
    p->v = clattn_tensor_4d(owned[j][2], 0, c->kvdt, B, len, Hkv, D);
    p->maybe_kv_len = clattn_tensor_1d(owned[j][3], 0, CLATTN_I32, B);
    /* partials as strided views at an offset: [B][Hq][Mq][D] storage */
    const int64_t so[4] = {B, Mq, Hq, D}, sl[3] = {B, Hq, Mq};
    p->o = view_make_in(cl, NULL, 4, so, &L_BHMD, c->part_dt, 0);
    p->maybe_lse = view_make_in(cl, NULL, 3, sl, &L_LSE_T, CLATTN_F32, 0);
    p->causal = c->causal && j == c->nshards - 1; /* only where the sequences end */
  }
  clattn_decode_multi_params mp;
  memset(&mp, 0, sizeof mp);
  mp.n = c->nshards;
  mp.shards = sh;
  mp.o = clattn_tensor_4d(buf_poison(nq * 4), 0, c->odt, B, Mq, Hq, D);
  mp.maybe_lse = clattn_tensor_3d(buf_poison(nl * 4), 0, CLATTN_F32, B, Hq, Mq);
  cl_event ev = NULL;
  CHECK_OK(clattn_decode_multi(&mp, 0, NULL, &ev));
  CU_ASSERT_EQUAL(clWaitForEvents(1, &ev), CL_SUCCESS);
  clReleaseEvent(ev);
  finish();

  double *o = malloc(sizeof(double) * nq), *lse = malloc(sizeof(double) * nl);
  double *o1 = malloc(sizeof(double) * nq), *lse1 = malloc(sizeof(double) * nl);
  buf_read(mp.o.buf, 0, nq, c->odt, o);
  buf_read(mp.maybe_lse.buf, 0, nl, CLATTN_F32, lse);
  buf_read(one.o.buf, 0, nq, c->odt, o1);
  buf_read(one.maybe_lse.buf, 0, nl, CLATTN_F32, lse1);
  /* split vs one decode: the partials' storage and both outputs' rounding */
  const double t1 = tol_for(c->part_dt) + 2 * tol_for(c->odt) + 1e-5;
  check_close(name, o, o1, nq, t1, t1);
  check_close(name, lse, lse1, nl, 2e-4, 2e-5);
  /* against the double reference, as the decode suite measures it */
  const double tr = tol_for(c->odt) + tol_for(c->part_dt) + tol_for(c->kvdt) * 0.25 + 1e-4;
  check_close(name, o, o_ref, nq, tr, tr);
  check_close(name, lse, lse_ref, nl, 2e-4, 2e-5);

  for (int j = 0; j < c->nshards; j++) {
    for (int i = 0; i < 4; i++) clReleaseMemObject(owned[j][i]);
    view_release(&sh[j].params.o);
    view_release(&sh[j].params.maybe_lse);
  }
  if (q2) clReleaseCommandQueue(q2);
  clattn_context_release(&ctx2);
  if (cl2) clReleaseContext(cl2);
  buf_release(&qm), buf_release(&km), buf_release(&vm), buf_release(&lm);
  buf_release(&one.o.buf), buf_release(&one.maybe_lse.buf);
  buf_release(&mp.o.buf), buf_release(&mp.maybe_lse.buf);
  free(q), free(k), free(v), free(o_ref), free(lse_ref), free(o), free(lse), free(o1), free(lse1);
}

static void test_multi_one_context(void) {
  /* the fixture device listed twice; sequence 1 ends inside shard 0 */
  static const int cuts2[] = {0, 60, 128}, len2[] = {128, 45};
  mcase c = {2, cuts2, -1, 1, 0, len2, CLATTN_F16, CLATTN_F32, CLATTN_F16};
  run_multi(&c);
  /* one shard: the same as a plain decode */
  static const int cuts1[] = {0, 77}, len1[] = {77, 3};
  c = (mcase){1, cuts1, -1, 1, 0, len1, CLATTN_F32, CLATTN_F32, CLATTN_F32};
  run_multi(&c);
}

static void test_multi_two_contexts(void) {
  /* shard 1 on another context: read back and copied; bf16 partials */
  static const int cuts[] = {0, 40, 90, 100}, len[] = {100, 30};
  mcase c = {3, cuts, 1, 1, 0, len, CLATTN_BF16, CLATTN_BF16, CLATTN_F32};
  run_multi(&c);
}

static void test_multi_causal(void) {
  /* Mq = 3 causal GQA: only the last shard (30 >= Mq - 1 keys) is causal */
  static const int cuts[] = {0, 50, 80}, len[] = {80, 80};
  mcase c = {2, cuts, -1, 3, 1, len, CLATTN_F32, CLATTN_F32, CLATTN_F32};
  run_multi(&c);
}

/* ---------------------------------------------------------------- merge errors */

typedef struct valid {
  clattn_tensor po[20], pl[20];
  clattn_merge_params p;
  cl_mem bufs[6], o, lse, small;
} valid;

/* 3 parts [2, 1, 4, 16] f32 in their own buffers; outputs poisoned. */
static void make_valid(valid *w) {
  memset(w, 0, sizeof *w);
  for (int i = 0; i < 3; i++) {
    w->bufs[2 * i] = buf_zeros(2 * 4 * 16 * 4);
    w->bufs[2 * i + 1] = buf_zeros(2 * 4 * 4);
  }
  for (int i = 0; i < 20; i++) {
    w->po[i] = clattn_tensor_4d(w->bufs[2 * (i % 3)], 0, CLATTN_F32, 2, 1, 4, 16);
    w->pl[i] = clattn_tensor_3d(w->bufs[2 * (i % 3) + 1], 0, CLATTN_F32, 2, 4, 1);
  }
  w->o = buf_poison(2 * 4 * 16 * 4);
  w->lse = buf_poison(2 * 4 * 4);
  w->small = buf_zeros(16);
  w->p.n = 3;
  w->p.parts_o = w->po;
  w->p.parts_lse = w->pl;
  w->p.o = clattn_tensor_4d(w->o, 0, CLATTN_F32, 2, 1, 4, 16);
  w->p.maybe_lse = clattn_tensor_3d(w->lse, 0, CLATTN_F32, 2, 4, 1);
}

static void free_valid(valid *w) {
  for (int i = 0; i < 6; i++) buf_release(&w->bufs[i]);
  buf_release(&w->o);
  buf_release(&w->lse);
  buf_release(&w->small);
}

static void expect_poison(cl_mem o) {
  finish();
  double first = 0;
  buf_read(o, 0, 1, CLATTN_F32, &first);
  CU_ASSERT(isnan(first)); /* still the 0xFF poison: nothing ran */
}

static void expect_merge_fail(valid *w, clattn_status status, const char *needle) {
  cl_event ev = NULL;
  CHECK_FAILS(clattn_merge(fx.ctx, fx.queue, &w->p, 0, NULL, &ev), status, needle);
  CU_ASSERT_PTR_NULL(ev);
  expect_poison(w->o);
}

static void test_merge_errors(void) {
  valid w;
  make_valid(&w);
  CHECK_OK(clattn_merge_workspace_size(fx.ctx, &w.p, NULL));
  cl_event ev = NULL;
  CHECK_FAILS(clattn_merge(NULL, fx.queue, &w.p, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  CHECK_FAILS(clattn_merge(fx.ctx, NULL, &w.p, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT, "queue is NULL");
  CHECK_FAILS(clattn_merge(fx.ctx, fx.queue, NULL, 0, NULL, &ev), CLATTN_INVALID_ARGUMENT, "params is NULL");
  CHECK_FAILS(clattn_merge(fx.ctx, fx.queue, &w.p, 2, NULL, &ev), CLATTN_INVALID_ARGUMENT, "num_wait");
  CHECK_FAILS(clattn_merge_workspace_size(NULL, &w.p, NULL), CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  CU_ASSERT_PTR_NULL(ev);

  const clattn_merge_params good = w.p;
  w.p.n = 0;
  expect_merge_fail(&w, CLATTN_INVALID_ARGUMENT, "n is 0");
  w.p = good, w.p.parts_o = NULL;
  expect_merge_fail(&w, CLATTN_INVALID_ARGUMENT, "parts_o is NULL");
  w.p = good, w.p.parts_lse = NULL;
  expect_merge_fail(&w, CLATTN_INVALID_ARGUMENT, "parts_lse is NULL");

  w.p = good;
  w.po[2].shape[2] = 3; /* smaller than its buffer: a shape, not a bounds, error */
  expect_merge_fail(&w, CLATTN_INVALID_SHAPE, "parts_o[2].shape[2] is 3, expected 4");
  w.po[2].shape[2] = 4;
  w.po[1].dtype = CLATTN_F16;
  expect_merge_fail(&w, CLATTN_UNSUPPORTED, "parts_o[1].dtype (f16) differs from parts_o[0].dtype (f32)");
  w.po[1].dtype = CLATTN_F32;
  w.pl[0].dtype = CLATTN_F16;
  expect_merge_fail(&w, CLATTN_UNSUPPORTED, "parts_lse[0].dtype f16 is not supported");
  w.pl[0].dtype = CLATTN_F32;
  w.pl[1].shape[1] = 3;
  expect_merge_fail(&w, CLATTN_INVALID_SHAPE, "parts_lse[1].shape[1] is 3, expected 4");
  w.pl[1].shape[1] = 4;
  w.po[1].buf = w.small;
  expect_merge_fail(&w, CLATTN_OUT_OF_BOUNDS, "parts_o[1]: shape [2, 1, 4, 16]");
  w.po[1].buf = w.bufs[2];
  w.po[0].offset = 4 * 4; /* reaches 16 bytes past the end */
  expect_merge_fail(&w, CLATTN_OUT_OF_BOUNDS, "parts_o[0]");
  w.po[0].offset = 0;
  w.pl[2].ndim = 4;
  expect_merge_fail(&w, CLATTN_INVALID_SHAPE, "parts_lse[2].ndim is 4, expected 3");
  w.pl[2].ndim = 3;

  w.p.o.shape[3] = 8;
  expect_merge_fail(&w, CLATTN_INVALID_SHAPE, "o.shape[3] is 8, expected 16");
  w.p.o = good.o;
  w.p.o.dtype = CLATTN_I32;
  expect_merge_fail(&w, CLATTN_UNSUPPORTED, "o.dtype i32");
  w.p.o = good.o;
  w.p.maybe_lse.shape[1] = 3;
  expect_merge_fail(&w, CLATTN_INVALID_SHAPE, "maybe_lse.shape[1] is 3, expected 4");
  w.p.maybe_lse = good.maybe_lse;

  /* a buffer of another context */
  cl_int err = CL_SUCCESS;
  cl_context cl2 = clCreateContext(NULL, 1, &fx.dev, NULL, NULL, &err);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  cl_mem foreign = clCreateBuffer(cl2, CL_MEM_READ_WRITE, 4096, NULL, &err);
  w.po[1].buf = foreign;
  expect_merge_fail(&w, CLATTN_INVALID_ARGUMENT, "parts_o[1].buf belongs to another cl_context");
  w.po[1].buf = w.bufs[2];
  clReleaseMemObject(foreign);
  clReleaseContext(cl2);

  /* 20 parts need a workspace; a caller's that is too small, or not f32 */
  w.p.n = 20;
  size_t need = 0;
  CHECK_OK(clattn_merge_workspace_size(fx.ctx, &w.p, &need));
  CU_ASSERT(need > 0);
  w.p.maybe_workspace = clattn_tensor_1d(w.small, 0, CLATTN_F32, 4);
  expect_merge_fail(&w, CLATTN_OUT_OF_BOUNDS, "maybe_workspace.shape[0] is 4 floats (16 bytes); this call needs");
  w.p.maybe_workspace.dtype = CLATTN_F16;
  expect_merge_fail(&w, CLATTN_UNSUPPORTED, "maybe_workspace.dtype f16");
  free_valid(&w);
}

static void test_backward_errors(void) {
  valid w;
  make_valid(&w);
  cl_mem d[6];
  clattn_tensor dpo[3], dpl[3];
  for (int i = 0; i < 3; i++) {
    d[2 * i] = buf_poison(2 * 4 * 16 * 4);
    d[2 * i + 1] = buf_poison(2 * 4 * 4);
    dpo[i] = clattn_tensor_4d(d[2 * i], 0, CLATTN_F32, 2, 1, 4, 16);
    dpl[i] = clattn_tensor_3d(d[2 * i + 1], 0, CLATTN_F32, 2, 4, 1);
  }
  clattn_merge_backward_params p;
  memset(&p, 0, sizeof p);
  p.n = 3;
  p.parts_o = w.po;
  p.parts_lse = w.pl;
  p.o = clattn_tensor_4d(w.bufs[0], 0, CLATTN_F32, 2, 1, 4, 16);
  p.lse = clattn_tensor_3d(w.bufs[1], 0, CLATTN_F32, 2, 4, 1);
  p.maybe_do = clattn_tensor_4d(w.bufs[2], 0, CLATTN_F32, 2, 1, 4, 16);
  p.d_parts_o = dpo;
  p.d_parts_lse = dpl;
  const clattn_merge_backward_params good = p;
#define EXPECT_BWD(status, needle)                                                           \
  do {                                                                                       \
    cl_event ev = NULL;                                                                      \
    CHECK_FAILS(clattn_merge_backward(fx.ctx, fx.queue, &p, 0, NULL, &ev), status, needle);  \
    CU_ASSERT_PTR_NULL(ev);                                                                  \
    expect_poison(d[0]);                                                                     \
    p = good;                                                                                \
  } while (0)
  CHECK_FAILS(clattn_merge_backward(fx.ctx, fx.queue, NULL, 0, NULL, NULL), CLATTN_INVALID_ARGUMENT,
              "params is NULL");
  p.n = 0;
  EXPECT_BWD(CLATTN_INVALID_ARGUMENT, "n is 0");
  p.d_parts_o = NULL;
  EXPECT_BWD(CLATTN_INVALID_ARGUMENT, "d_parts_o is NULL");
  p.d_parts_lse = NULL;
  EXPECT_BWD(CLATTN_INVALID_ARGUMENT, "d_parts_lse is NULL");
  p.lse.buf = NULL;
  EXPECT_BWD(CLATTN_INVALID_ARGUMENT, "lse.buf is NULL");
  p.o.buf = NULL;
  EXPECT_BWD(CLATTN_INVALID_ARGUMENT, "o.buf is NULL: the forward's o is needed with maybe_do");
  p.maybe_do.shape[2] = 2;
  EXPECT_BWD(CLATTN_INVALID_SHAPE, "maybe_do.shape[2] is 2, expected 4");
  p.maybe_dlse = clattn_tensor_3d(w.bufs[1], 0, CLATTN_F16, 2, 4, 1);
  EXPECT_BWD(CLATTN_UNSUPPORTED, "maybe_dlse.dtype f16");
  dpo[1].shape[3] = 8;
  EXPECT_BWD(CLATTN_INVALID_SHAPE, "d_parts_o[1].shape[3] is 8, expected 16");
  dpo[1].shape[3] = 16;
  for (int i = 0; i < 3; i++) dpo[i].shape[3] = 8; /* consistent, but not the parts' shape */
  EXPECT_BWD(CLATTN_INVALID_SHAPE, "d_parts_o[0].shape[3] is 8, expected 16 (parts_o[0]'s shape)");
  for (int i = 0; i < 3; i++) dpo[i].shape[3] = 16;
  dpl[2].dtype = CLATTN_BF16;
  EXPECT_BWD(CLATTN_UNSUPPORTED, "d_parts_lse[2].dtype bf16");
  dpl[2].dtype = CLATTN_F32;
  dpo[0].buf = w.small;
  EXPECT_BWD(CLATTN_OUT_OF_BOUNDS, "d_parts_o[0]");
  dpo[0].buf = d[0];
#undef EXPECT_BWD
  for (int i = 0; i < 6; i++) buf_release(&d[i]);
  free_valid(&w);
}

static void test_multi_errors(void) {
  enum { B = 2, Hq = 4, Hkv = 2, D = 64, N = 16 };
  cl_mem q = buf_zeros(B * Hq * D * 4), kv = buf_zeros(B * N * Hkv * D * 4);
  cl_mem po = buf_zeros(B * Hq * D * 4), pl = buf_zeros(B * Hq * 4);
  cl_mem o = buf_poison(B * Hq * D * 4);
  clattn_decode_shard sh[2];
  memset(sh, 0, sizeof sh);
  for (int j = 0; j < 2; j++) {
    sh[j].ctx = fx.ctx;
    sh[j].queue = fx.queue;
    sh[j].params.q = clattn_tensor_4d(q, 0, CLATTN_F32, B, 1, Hq, D);
    sh[j].params.k = clattn_tensor_4d(kv, 0, CLATTN_F32, B, N, Hkv, D);
    sh[j].params.v = sh[j].params.k;
    sh[j].params.o = clattn_tensor_4d(po, 0, CLATTN_F32, B, 1, Hq, D);
    sh[j].params.maybe_lse = clattn_tensor_3d(pl, 0, CLATTN_F32, B, Hq, 1);
  }
  clattn_decode_multi_params p;
  memset(&p, 0, sizeof p);
  p.n = 2;
  p.shards = sh;
  p.o = clattn_tensor_4d(o, 0, CLATTN_F32, B, 1, Hq, D);
  const clattn_decode_multi_params good = p;
  const clattn_decode_shard good1 = sh[1];
#define EXPECT_MULTI(status, needle)                                                         \
  do {                                                                                       \
    cl_event ev = NULL;                                                                      \
    CHECK_FAILS(clattn_decode_multi(&p, 0, NULL, &ev), status, needle);                      \
    CU_ASSERT_PTR_NULL(ev);                                                                  \
    expect_poison(o);                                                                        \
    p = good;                                                                                \
    sh[1] = good1;                                                                           \
  } while (0)
  CHECK_FAILS(clattn_decode_multi(NULL, 0, NULL, NULL), CLATTN_INVALID_ARGUMENT, "params is NULL");
  p.n = 0;
  EXPECT_MULTI(CLATTN_INVALID_ARGUMENT, "n is 0");
  p.shards = NULL;
  EXPECT_MULTI(CLATTN_INVALID_ARGUMENT, "shards is NULL");
  sh[1].ctx = NULL;
  EXPECT_MULTI(CLATTN_INVALID_ARGUMENT, "shards[1].ctx is NULL");
  sh[1].queue = NULL;
  EXPECT_MULTI(CLATTN_INVALID_ARGUMENT, "shards[1]: queue is NULL");
  sh[1].params.q.shape[3] = 32;
  EXPECT_MULTI(CLATTN_INVALID_SHAPE, "shards[1]: ");
  sh[1].params.maybe_lse.buf = NULL;
  EXPECT_MULTI(CLATTN_INVALID_ARGUMENT, "shards[1].params.maybe_lse is absent");
  sh[1].params.o.dtype = CLATTN_F16;
  EXPECT_MULTI(CLATTN_UNSUPPORTED, "shards[1].params.o.dtype (f16) differs");
  p.o.shape[2] = 2;
  EXPECT_MULTI(CLATTN_INVALID_SHAPE, "o.shape[2] is 2, expected 4");
  cl_event ev = NULL;
  CHECK_FAILS(clattn_decode_multi(&p, 2, NULL, &ev), CLATTN_INVALID_ARGUMENT, "num_wait");
  CU_ASSERT_PTR_NULL(ev);
  expect_poison(o);
#undef EXPECT_MULTI
  buf_release(&q), buf_release(&kv), buf_release(&po), buf_release(&pl), buf_release(&o);
}

void add_merge_error_tests(CU_pSuite s) {
  CU_add_test(s, "errors: merge arguments, shapes, dtypes, bounds, workspace", test_merge_errors);
  CU_add_test(s, "errors: merge backward", test_backward_errors);
  CU_add_test(s, "errors: decode_multi", test_multi_errors);
}

void add_merge_multi_tests(CU_pSuite s) {
  CU_add_test(s, "decode_multi: fixture device listed twice, one context", test_multi_one_context);
  CU_add_test(s, "decode_multi: a shard on a second context", test_multi_two_contexts);
  CU_add_test(s, "decode_multi: causal Mq=3 GQA", test_multi_causal);
}
