/* Merging attention states against double-precision references: the merge
 * equals attention over the concatenated keys (n = 1, 2, 7, 64, uneven and
 * empty parts, every dtype pair, strided views and offsets, stacked parts,
 * chunked lists with and without a caller's workspace), the documented
 * special values, the split-K reduce of decode, and the backward against the
 * analytic gradient and central finite differences. Multi-device decode and
 * the error paths are in test_merge_multi.c. */
#include "test_merge.h"
#include "part.h"
#include "internal.h"
#include "ref.h"
#include "ref_merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const layout L_DENSE4 = {{0, 1, 2, 3}, 1, 0};
const layout L_BHMD = {{0, 2, 1, 3}, 1, 5};    /* [B, M, H, D] stored [B][H][M][D] */
const layout L_DSTRIDE = {{0, 1, 2, 3}, 2, 3}; /* every other element: d-stride 2 */
const layout L_DENSE3 = {{0, 1, 2}, 1, 0};
const layout L_LSE_T = {{0, 2, 1}, 1, 7};      /* [B, H, M] stored [B][M][H] */

/* ---------------------------------------------------------------- views */

static size_t storage(int ndim, const int64_t *shape, const layout *ly, int64_t *stride) {
  int64_t s = ly->spread;
  for (int k = ndim - 1; k >= 0; k--) {
    stride[ly->perm[k]] = s;
    s *= shape[ly->perm[k]];
  }
  return (size_t)ly->pad + (size_t)s;
}

static size_t count(int ndim, const int64_t *shape) {
  size_t n = 1;
  for (int a = 0; a < ndim; a++) n *= (size_t)shape[a];
  return n;
}

/* Storage position of logical element i (row-major over shape). */
static size_t position(int ndim, const int64_t *shape, const int64_t *stride, size_t i) {
  size_t off = 0;
  for (int a = ndim - 1; a >= 0; a--) {
    off += (i % (size_t)shape[a]) * (size_t)stride[a];
    i /= (size_t)shape[a];
  }
  return off;
}

clattn_tensor view_make_in(cl_context cl, const double *x, int ndim, const int64_t *shape,
                           const layout *ly, clattn_dtype dt, double fill) {
  clattn_tensor t;
  memset(&t, 0, sizeof t);
  int64_t stride[4];
  const size_t total = storage(ndim, shape, ly, stride), n = count(ndim, shape);
  double *h = malloc(sizeof(double) * total);
  for (size_t i = 0; i < total; i++) h[i] = NAN;
  for (size_t i = 0; i < n; i++) h[ly->pad + position(ndim, shape, stride, i)] = x ? x[i] : fill;
  const size_t es = clattn_dtype_size(dt);
  void *bytes = malloc(total * es);
  host_pack(h, total, dt, bytes);
  cl_int err = CL_SUCCESS;
  t.buf = clCreateBuffer(cl ? cl : fx.cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, total * es,
                         bytes, &err);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  free(h);
  free(bytes);
  t.offset = (size_t)ly->pad * es;
  t.dtype = dt;
  t.ndim = ndim;
  for (int a = 0; a < ndim; a++) {
    t.shape[a] = shape[a];
    t.stride[a] = stride[a];
  }
  return t;
}

clattn_tensor view_make(const double *x, int ndim, const int64_t *shape, const layout *ly,
                        clattn_dtype dt, double fill) {
  return view_make_in(NULL, x, ndim, shape, ly, dt, fill);
}

void view_read(const clattn_tensor *t, double *x, const char *label) {
  size_t bytes = 0;
  clGetMemObjectInfo(t->buf, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
  const size_t es = clattn_dtype_size(t->dtype), total = bytes / es, n = count(t->ndim, t->shape);
  double *h = malloc(sizeof(double) * total);
  char *inside = calloc(total, 1);
  buf_read(t->buf, 0, total, t->dtype, h);
  const size_t base = t->offset / es;
  for (size_t i = 0; i < n; i++) {
    const size_t p = base + position(t->ndim, t->shape, t->stride, i);
    x[i] = h[p];
    inside[p] = 1;
  }
  size_t bad = 0;
  for (size_t i = 0; i < total; i++) bad += !inside[i] && !isnan(h[i]);
  if (bad) fprintf(stderr, "  %s: %zu elements outside the view were written\n", label, bad);
  CU_ASSERT_EQUAL(bad, 0);
  free(h);
  free(inside);
}

void view_release(clattn_tensor *t) { buf_release(&t->buf); }

double *rand_dtype(size_t n, clattn_dtype dt) {
  double *x = malloc(sizeof(double) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) x[i] = round_dtype(rng_normal(), dt);
  return x;
}

/* ---------------------------------------------------------------- merge = attention over concatenated keys */

typedef struct ccase {
  int n, B, M, H, D;
  const int *lens; /* keys of each part (0: empty part) */
  clattn_dtype pdt, odt;
  const layout *o_ly, *lse_ly, *out_ly;
  int stacked;     /* the first `stacked` parts lie in one buffer at a constant spacing */
  int workspace;   /* pass a caller's workspace */
} ccase;

static void run_concat(const ccase *c) {
  char name[200];
  CASE_NAME(name, "merge n=%d B=%d M=%d H=%d D=%d parts=%s o=%s%s%s%s", c->n, c->B, c->M, c->H,
            c->D, clattn_dtype_name(c->pdt), clattn_dtype_name(c->odt),
            c->o_ly == &L_DENSE4 ? "" : c->o_ly == &L_BHMD ? " bhmd" : " d-strided",
            c->stacked ? " stacked" : "", c->workspace ? " workspace" : "");
  fprintf(stderr, "  case: %s\n", name);
  const int n = c->n, B = c->B, M = c->M, H = c->H, D = c->D;
  int N = 0;
  for (int i = 0; i < n; i++) N += c->lens[i];
  const size_t no = (size_t)B * M * H * D, nl = (size_t)B * H * M;
  double *q = rand_dtype(no, CLATTN_F64);
  double *k = rand_dtype((size_t)B * N * H * D, CLATTN_F64);
  double *v = rand_dtype((size_t)B * N * H * D, CLATTN_F64);
  const double scale = 1.0 / sqrt((double)D);

  /* attention over all keys, and over each part's keys */
  double *o_full = malloc(sizeof(double) * no), *lse_full = malloc(sizeof(double) * nl);
  ref_decode_args ra = {B, M, H, H, D, N, q, k, v, NULL, NULL, NULL, scale, 0, o_full, lse_full};
  ref_decode(&ra);
  double **po = malloc(sizeof(double *) * n), **pl = malloc(sizeof(double *) * n);
  int start = 0;
  for (int i = 0; i < n; i++) {
    const int len = c->lens[i];
    double *ki = malloc(sizeof(double) * ((size_t)B * len * H * D + 1));
    double *vi = malloc(sizeof(double) * ((size_t)B * len * H * D + 1));
    for (int b = 0; b < B; b++)
      for (int j = 0; j < len; j++) {
        const size_t row = (size_t)H * D;
        memcpy(ki + ((size_t)b * len + j) * row, k + ((size_t)b * N + start + j) * row,
               sizeof(double) * row);
        memcpy(vi + ((size_t)b * len + j) * row, v + ((size_t)b * N + start + j) * row,
               sizeof(double) * row);
      }
    po[i] = malloc(sizeof(double) * no);
    pl[i] = malloc(sizeof(double) * nl);
    ref_decode_args pa = {B, M, H, H, D, len, q, ki, vi, NULL, NULL, NULL, scale, 0, po[i], pl[i]};
    ref_decode(&pa);
    for (size_t e = 0; e < no; e++) po[i][e] = len ? round_dtype(po[i][e], c->pdt) : NAN;
    for (size_t e = 0; e < nl; e++) pl[i][e] = (float)pl[i][e];
    free(ki);
    free(vi);
    start += len;
  }
  /* the merge of the stored parts, in double */
  double *o_rm = malloc(sizeof(double) * no), *lse_rm = malloc(sizeof(double) * nl);
  ref_merge_args rm = {n, B, M, H, D, (const double *const *)po, (const double *const *)pl};
  ref_merge(&rm, o_rm, lse_rm);

  /* device views */
  const int64_t so[4] = {B, M, H, D}, sl[3] = {B, H, M};
  clattn_tensor *to = calloc(n, sizeof *to), *tl = calloc(n, sizeof *tl);
  cl_mem stack_o = NULL, stack_l = NULL;
  if (c->stacked) {
    /* [stacked][B][M][H][D] and [stacked][B][H][M] after a few elements of padding */
    const int S = c->stacked, pad = 3;
    double *ho = malloc(sizeof(double) * (pad + S * no)), *hl = malloc(sizeof(double) * (pad + S * nl));
    for (int i = 0; i < pad; i++) ho[i] = hl[i] = NAN;
    for (int i = 0; i < S; i++) {
      memcpy(ho + pad + i * no, po[i], sizeof(double) * no);
      memcpy(hl + pad + i * nl, pl[i], sizeof(double) * nl);
    }
    stack_o = buf_from(ho, pad + S * no, c->pdt);
    stack_l = buf_from(hl, pad + S * nl, CLATTN_F32);
    for (int i = 0; i < S; i++) {
      to[i] = clattn_tensor_4d(stack_o, (pad + i * no) * clattn_dtype_size(c->pdt), c->pdt, B, M, H, D);
      tl[i] = clattn_tensor_3d(stack_l, (pad + i * nl) * 4, CLATTN_F32, B, H, M);
    }
    free(ho);
    free(hl);
  }
  for (int i = c->stacked; i < n; i++) {
    to[i] = view_make(po[i], 4, so, c->o_ly, c->pdt, 0);
    tl[i] = view_make(pl[i], 3, sl, c->lse_ly, CLATTN_F32, 0);
  }
  clattn_merge_params p;
  memset(&p, 0, sizeof p);
  p.n = n;
  p.parts_o = to;
  p.parts_lse = tl;
  p.o = view_make(NULL, 4, so, c->out_ly, c->odt, NAN);
  p.maybe_lse = view_make(NULL, 3, sl, c->lse_ly, CLATTN_F32, NAN);
  size_t ws_bytes = 0;
  CHECK_OK(clattn_merge_workspace_size(fx.ctx, &p, &ws_bytes));
  if (c->workspace) {
    CU_ASSERT(ws_bytes > 0);
    const size_t pad = 16; /* the workspace may sit at an offset */
    p.maybe_workspace = clattn_tensor_1d(buf_poison(ws_bytes + pad * 4), pad * 4, CLATTN_F32,
                                         (int64_t)(ws_bytes / 4));
  }
  cl_event ev = NULL;
  CHECK_OK(clattn_merge(fx.ctx, fx.queue, &p, 0, NULL, &ev));
  CU_ASSERT_EQUAL(clWaitForEvents(1, &ev), CL_SUCCESS);
  clReleaseEvent(ev);

  double *o = malloc(sizeof(double) * no), *lse = malloc(sizeof(double) * nl);
  view_read(&p.o, o, name);
  view_read(&p.maybe_lse, lse, name);
  /* against the merge of the stored parts: f32 accumulation, then o's rounding */
  const double t_o = tol_for(c->odt);
  check_close(name, o, o_rm, no, t_o, t_o);
  check_close(name, lse, lse_rm, nl, 2e-5, 2e-6); /* f32 log-sum-exp of values up to ~10 */
  /* against attention over all keys: the parts' storage rounding adds up */
  const double t_full = tol_for(c->pdt) + tol_for(c->odt);
  check_close(name, o, o_full, no, t_full, t_full);
  check_close(name, lse, lse_full, nl, 2e-5, 2e-6);

  for (int i = 0; i < n; i++) {
    if (i >= c->stacked) {
      view_release(&to[i]);
      view_release(&tl[i]);
    }
    free(po[i]);
    free(pl[i]);
  }
  buf_release(&stack_o);
  buf_release(&stack_l);
  view_release(&p.o);
  view_release(&p.maybe_lse);
  if (c->workspace) view_release(&p.maybe_workspace);
  free(to), free(tl), free(po), free(pl), free(q), free(k), free(v);
  free(o_full), free(lse_full), free(o_rm), free(lse_rm), free(o), free(lse);
}

static void test_part_counts(void) {
  static const int one[] = {37}, two[] = {20, 9};
  static const int seven[] = {5, 0, 17, 1, 0, 30, 2}; /* uneven, two empty */
  ccase c = {1, 2, 1, 4, 64, one, CLATTN_F32, CLATTN_F32, &L_DENSE4, &L_DENSE3, &L_DENSE4, 0, 0};
  run_concat(&c);
  c = (ccase){2, 2, 3, 2, 32, two, CLATTN_F32, CLATTN_F32, &L_DENSE4, &L_DENSE3, &L_DENSE4, 0, 0};
  run_concat(&c);
  c = (ccase){7, 2, 1, 3, 16, seven, CLATTN_F32, CLATTN_F32, &L_DENSE4, &L_DENSE3, &L_DENSE4, 0, 0};
  run_concat(&c);
}

static void test_many_parts(void) {
  int lens[64];
  for (int i = 0; i < 64; i++) lens[i] = (i % 9 == 4) ? 0 : 1 + (i * 7) % 11;
  /* 64 separate buffers: chunked through the workspace */
  ccase c = {64, 1, 2, 2, 16, lens, CLATTN_F32, CLATTN_F32, &L_DENSE4, &L_DENSE3, &L_DENSE4, 0, 0};
  run_concat(&c);
  /* f16 parts to bf16 output: the chunks' f32 running result between dtypes */
  c = (ccase){64, 1, 1, 3, 24, lens, CLATTN_F16, CLATTN_BF16, &L_BHMD, &L_LSE_T, &L_DENSE4, 0, 1};
  run_concat(&c);
  /* 64 stacked in one buffer: one launch */
  c = (ccase){64, 2, 1, 2, 16, lens, CLATTN_F32, CLATTN_F16, &L_DENSE4, &L_DENSE3, &L_DENSE4, 64, 0};
  run_concat(&c);
  /* 6 stacked then 14 separate */
  c = (ccase){20, 1, 2, 2, 8, lens, CLATTN_F32, CLATTN_F32, &L_DENSE4, &L_DENSE3, &L_BHMD, 6, 0};
  run_concat(&c);
}

static void test_dtypes(void) {
  static const int lens[] = {11, 0, 25};
  static const clattn_dtype fl[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      ccase c = {3, 2, 1, 2, 32, lens, fl[i], fl[j], &L_DENSE4, &L_DENSE3, &L_DENSE4, 0, 0};
      run_concat(&c);
    }
}

static void test_views(void) {
  static const int lens[] = {13, 4, 0, 21, 6};
  /* parts [B][H][M][D] at offsets, lse [B][M][H], output d-strided (VEC 1 path) */
  ccase c = {5, 2, 3, 2, 20, lens, CLATTN_BF16, CLATTN_F32, &L_BHMD, &L_LSE_T, &L_DSTRIDE, 0, 0};
  run_concat(&c);
  /* d-strided parts into a [B][H][M][D] output; D not a multiple of 4 */
  c = (ccase){5, 1, 2, 3, 10, lens, CLATTN_F16, CLATTN_F16, &L_DSTRIDE, &L_DENSE3, &L_BHMD, 0, 0};
  run_concat(&c);
}

/* ---------------------------------------------------------------- special values */

/* Rows (b = 0, h = 0, m = row) of a 4-part merge, each showing one rule. */
static void run_special(clattn_dtype pdt, clattn_dtype odt) {
  char name[96];
  CASE_NAME(name, "merge special values parts=%s o=%s", clattn_dtype_name(pdt), clattn_dtype_name(odt));
  fprintf(stderr, "  case: %s\n", name);
  enum { n = 4, M = 8, D = 8 };
  const size_t no = (size_t)M * D;
  double *po[n], *pl[n];
  for (int i = 0; i < n; i++) {
    po[i] = rand_dtype(no, pdt);
    pl[i] = malloc(sizeof(double) * M);
    for (int m = 0; m < M; m++) pl[i][m] = (float)rng_uniform(-2, 2);
  }
  /* row 0: every part empty, garbage o: o = 0, lse = -inf */
  for (int i = 0; i < n; i++) pl[i][0] = -INFINITY, po[i][0 * D + 2] = NAN;
  /* row 1: two empty parts with NaN o: ignored */
  pl[1][1] = pl[3][1] = -INFINITY;
  for (int d = 0; d < D; d++) po[1][1 * D + d] = po[3][1 * D + d] = NAN;
  /* row 2: lse +inf: NaN row */
  pl[2][2] = INFINITY;
  /* row 3: lse NaN: NaN row */
  pl[1][3] = NAN;
  /* row 4: NaN lse while every other part is empty: still a NaN row */
  pl[0][4] = NAN, pl[1][4] = pl[2][4] = pl[3][4] = -INFINITY;
  /* row 5: NaN / inf inside an o_i of non-zero weight reach o; lse finite */
  po[1][5 * D + 3] = NAN, po[2][5 * D + 6] = INFINITY;
  /* row 6: part 3's weight underflows in f32 (exp(-200)): its NaN o is not read */
  pl[3][6] = pl[0][6] - 200.0;
  for (int d = 0; d < D; d++) po[3][6 * D + d] = NAN;
  /* row 7: lse far from 0 in both directions stays exact */
  pl[0][7] = 80.0, pl[1][7] = 79.0, pl[2][7] = -INFINITY, pl[3][7] = 60.0;

  double o_ref[M * D], lse_ref[M];
  ref_merge_args rm = {n, 1, M, 1, D, (const double *const *)po, (const double *const *)pl};
  ref_merge(&rm, o_ref, lse_ref);
  { /* row 6 by the documented rule: the underflowed part is not read */
    double *pr[3] = {po[0], po[1], po[2]}, *lr[3] = {pl[0], pl[1], pl[2]};
    double o3[M * D], l3[M];
    ref_merge_args r3 = {3, 1, M, 1, D, (const double *const *)pr, (const double *const *)lr};
    ref_merge(&r3, o3, l3);
    memcpy(o_ref + 6 * D, o3 + 6 * D, sizeof(double) * D);
  }
  CU_ASSERT(o_ref[0] == 0.0 && lse_ref[0] == -INFINITY);
  CU_ASSERT(isnan(o_ref[2 * D]) && isnan(lse_ref[2]) && isnan(lse_ref[4]));
  CU_ASSERT(isnan(o_ref[5 * D + 3]) && isinf(o_ref[5 * D + 6]) && isfinite(lse_ref[5]));
  for (size_t e = 0; e < no; e++) o_ref[e] = round_dtype(o_ref[e], odt);

  const int64_t so[4] = {1, M, 1, D}, sl[3] = {1, 1, M};
  clattn_tensor to[n], tl[n];
  for (int i = 0; i < n; i++) {
    to[i] = view_make(po[i], 4, so, &L_DENSE4, pdt, 0);
    tl[i] = view_make(pl[i], 3, sl, &L_DENSE3, CLATTN_F32, 0);
  }
  clattn_merge_params p;
  memset(&p, 0, sizeof p);
  p.n = n;
  p.parts_o = to;
  p.parts_lse = tl;
  p.o = view_make(NULL, 4, so, &L_DENSE4, odt, NAN);
  p.maybe_lse = view_make(NULL, 3, sl, &L_DENSE3, CLATTN_F32, NAN);
  CHECK_OK(clattn_merge(fx.ctx, fx.queue, &p, 0, NULL, NULL));
  finish();
  double o[M * D], lse[M];
  view_read(&p.o, o, name);
  view_read(&p.maybe_lse, lse, name);
  check_close(name, o, o_ref, no, tol_for(odt), tol_for(odt));
  check_close(name, lse, lse_ref, M, 2e-5, 2e-6);
  for (int i = 0; i < n; i++) {
    view_release(&to[i]);
    view_release(&tl[i]);
    free(po[i]);
    free(pl[i]);
  }
  view_release(&p.o);
  view_release(&p.maybe_lse);
}

static void test_special(void) {
  run_special(CLATTN_F32, CLATTN_F32);
  run_special(CLATTN_F16, CLATTN_BF16);
  run_special(CLATTN_BF16, CLATTN_F16);
}

/* ---------------------------------------------------------------- the split-K reduce of decode */

/* clattn_merge_strided_enqueue: S partials in one f32 buffer, dense or varlen output. */
static void run_strided(int varlen, clattn_dtype odt) {
  char name[96];
  CASE_NAME(name, "split-K reduce S=5 o=%s%s", clattn_dtype_name(odt), varlen ? " varlen" : "");
  fprintf(stderr, "  case: %s\n", name);
  enum { S = 5, B = 2, M = 3, H = 2, D = 16 };
  const int counts[B] = {3, 1}, q_start[B + 1] = {0, 3, 4};
  const size_t no = (size_t)B * M * H * D, nl = (size_t)B * H * M;
  double *ho = rand_dtype(S * no, CLATTN_F32), *hl = malloc(sizeof(double) * S * nl);
  for (size_t i = 0; i < S * nl; i++) hl[i] = (float)rng_uniform(-3, 3);
  for (size_t i = 0; i < nl; i++) hl[2 * nl + i] = -INFINITY; /* an empty split */
  for (size_t i = 0; i < no; i++) ho[2 * no + i] = NAN;
  const double *po[S], *pl[S];
  for (int i = 0; i < S; i++) po[i] = ho + i * no, pl[i] = hl + i * nl;
  double o_ref[B * M * H * D], lse_ref[B * H * M];
  ref_merge_args rm = {S, B, M, H, D, po, pl};
  ref_merge(&rm, o_ref, lse_ref);

  cl_mem part = buf_from(ho, S * no, CLATTN_F32), part_l = buf_from(hl, S * nl, CLATTN_F32);
  const int total = q_start[B];
  const int64_t so[4] = {varlen ? 1 : B, varlen ? total : M, H, D};
  const int64_t sl[3] = {varlen ? 1 : B, H, varlen ? total : M};
  clattn_tensor o = view_make(NULL, 4, so, &L_BHMD, odt, NAN);
  clattn_tensor lse = view_make(NULL, 3, sl, &L_LSE_T, CLATTN_F32, NAN);
  cl_mem qs = buf_from_i32(q_start, B + 1);
  const clattn_tensor qs_t = clattn_tensor_1d(qs, 0, CLATTN_I32, B + 1);
  clattn_merge_strided m = {
      .part_o = part,
      .part_lse = part_l,
      .part_o_split_stride = (int64_t)no,
      .part_lse_split_stride = (int64_t)nl,
      .part_o_stride = {M * H * D, H * D, D, 1},
      .part_lse_stride = {H * M, M, 1},
      .n = S, .B = B, .M = M, .H = H, .D = D,
      .o = &o,
      .lse = &lse,
      .q_start = varlen ? &qs_t : NULL,
      .total_q = total,
  };
  CHECK_OK(clattn_merge_strided_enqueue(fx.ctx, fx.queue, &m, 0, NULL, NULL));
  finish();
  double got_o[B * M * H * D], got_l[B * H * M];
  view_read(&o, got_o, name);
  view_read(&lse, got_l, name);
  /* expected, packed when varlen: row m < counts[b] of sequence b is row q_start[b] + m */
  double want_o[B * M * H * D], want_l[B * H * M];
  if (!varlen) {
    memcpy(want_o, o_ref, sizeof want_o);
    memcpy(want_l, lse_ref, sizeof want_l);
  } else {
    for (int b = 0; b < B; b++)
      for (int mm = 0; mm < counts[b]; mm++)
        for (int h = 0; h < H; h++) {
          const int r = q_start[b] + mm;
          memcpy(want_o + ((size_t)r * H + h) * D, o_ref + (((size_t)b * M + mm) * H + h) * D,
                 sizeof(double) * D);
          want_l[(size_t)h * total + r] = lse_ref[((size_t)b * H + h) * M + mm];
        }
  }
  const size_t n_o = (size_t)so[0] * so[1] * H * D, n_l = (size_t)sl[0] * H * sl[2];
  for (size_t e = 0; e < n_o; e++) want_o[e] = round_dtype(want_o[e], odt);
  check_close(name, got_o, want_o, n_o, tol_for(odt), tol_for(odt));
  check_close(name, got_l, want_l, n_l, 2e-5, 2e-6);
  view_release(&o);
  view_release(&lse);
  buf_release(&part);
  buf_release(&part_l);
  buf_release(&qs);
  free(ho);
  free(hl);
}

static void test_strided_reduce(void) {
  run_strided(0, CLATTN_F32);
  run_strided(1, CLATTN_F16);
}

/* ---------------------------------------------------------------- backward */

typedef struct bcase {
  int n, B, M, H, D;
  clattn_dtype pdt, odt, dodt, dpdt;
  int has_do, has_dlse;
  int empty;       /* part index with lse -inf and NaN o (-1: none) */
  int empty_rows;  /* rows 0 of every part -inf: an empty merged row */
  const layout *ly, *dly;
  int fd;          /* also against central finite differences (f32 cases) */
} bcase;

static void run_backward(const bcase *c) {
  char name[200];
  CASE_NAME(name, "merge backward n=%d B=%d M=%d H=%d D=%d parts=%s o=%s do=%s dparts=%s%s%s%s%s",
            c->n, c->B, c->M, c->H, c->D, clattn_dtype_name(c->pdt), clattn_dtype_name(c->odt),
            clattn_dtype_name(c->dodt), clattn_dtype_name(c->dpdt), c->has_do ? " do" : "",
            c->has_dlse ? " dlse" : "", c->empty >= 0 ? " empty-part" : "",
            c->ly == &L_DENSE4 ? "" : " strided");
  fprintf(stderr, "  case: %s\n", name);
  const int n = c->n, B = c->B, M = c->M, H = c->H, D = c->D;
  const size_t no = (size_t)B * M * H * D, nl = (size_t)B * H * M;
  double **po = malloc(sizeof(double *) * n), **pl = malloc(sizeof(double *) * n);
  for (int i = 0; i < n; i++) {
    po[i] = rand_dtype(no, c->pdt);
    pl[i] = malloc(sizeof(double) * nl);
    for (size_t e = 0; e < nl; e++) pl[i][e] = (float)rng_uniform(-2, 2);
    if (i == c->empty)
      for (size_t e = 0; e < nl; e++) pl[i][e] = -INFINITY;
    if (i == c->empty)
      for (size_t e = 0; e < no; e++) po[i][e] = NAN;
    if (c->empty_rows) pl[i][0] = -INFINITY;
  }
  ref_merge_args rm = {n, B, M, H, D, (const double *const *)po, (const double *const *)pl};
  /* the forward's outputs as the device would store them */
  double *o = malloc(sizeof(double) * no), *lse = malloc(sizeof(double) * nl);
  ref_merge(&rm, o, lse);
  double *o_st = malloc(sizeof(double) * no), *lse_st = malloc(sizeof(double) * nl);
  for (size_t e = 0; e < no; e++) o_st[e] = round_dtype(o[e], c->odt);
  for (size_t e = 0; e < nl; e++) lse_st[e] = (float)lse[e];
  double *dout = c->has_do ? rand_dtype(no, c->dodt) : NULL;
  double *dlse = NULL;
  if (c->has_dlse) {
    dlse = malloc(sizeof(double) * nl);
    for (size_t e = 0; e < nl; e++) dlse[e] = (float)rng_normal();
  }
  double **gro = malloc(sizeof(double *) * n), **grl = malloc(sizeof(double *) * n);
  for (int i = 0; i < n; i++) {
    gro[i] = malloc(sizeof(double) * no);
    grl[i] = malloc(sizeof(double) * nl);
  }
  ref_merge_backward(&rm, o_st, lse_st, dout, dlse, gro, grl);

  /* device */
  const int64_t so[4] = {B, M, H, D}, sl[3] = {B, H, M};
  clattn_tensor *to = calloc(n, sizeof *to), *tl = calloc(n, sizeof *tl);
  clattn_tensor *tdo = calloc(n, sizeof *tdo), *tdl = calloc(n, sizeof *tdl);
  for (int i = 0; i < n; i++) {
    to[i] = view_make(po[i], 4, so, c->ly, c->pdt, 0);
    tl[i] = view_make(pl[i], 3, sl, &L_LSE_T, CLATTN_F32, 0);
    tdo[i] = view_make(NULL, 4, so, c->dly, c->dpdt, NAN);
    tdl[i] = view_make(NULL, 3, sl, &L_DENSE3, CLATTN_F32, NAN);
  }
  clattn_merge_backward_params p;
  memset(&p, 0, sizeof p);
  p.n = n;
  p.parts_o = to;
  p.parts_lse = tl;
  if (c->has_do) p.o = view_make(o_st, 4, so, c->ly, c->odt, 0); /* o only with do */
  p.lse = view_make(lse_st, 3, sl, &L_DENSE3, CLATTN_F32, 0);
  if (c->has_do) p.maybe_do = view_make(dout, 4, so, c->dly, c->dodt, 0);
  if (c->has_dlse) p.maybe_dlse = view_make(dlse, 3, sl, &L_LSE_T, CLATTN_F32, 0);
  p.d_parts_o = tdo;
  p.d_parts_lse = tdl;
  cl_event ev = NULL;
  CHECK_OK(clattn_merge_backward(fx.ctx, fx.queue, &p, 0, NULL, &ev));
  CU_ASSERT_EQUAL(clWaitForEvents(1, &ev), CL_SUCCESS);
  clReleaseEvent(ev);

  double *go = malloc(sizeof(double) * no), *gl = malloc(sizeof(double) * nl);
  double *fo = malloc(sizeof(double) * no), *fl = malloc(sizeof(double) * nl);
  for (int i = 0; i < n; i++) {
    view_read(&tdo[i], go, name);
    view_read(&tdl[i], gl, name);
    for (size_t e = 0; e < no; e++) gro[i][e] = round_dtype(gro[i][e], c->dpdt);
    /* do_i: one f32 product, then do_i's rounding; dlse_i: f32 sums over D */
    check_close(name, go, gro[i], no, tol_for(c->dpdt), tol_for(c->dpdt));
    check_close(name, gl, grl[i], nl, 5e-5, 5e-5);
    if (!c->fd) continue;
    /* central differences of L = sum(do * o) + sum(dlse * lse), in double */
    const double h = 1e-5;
    for (size_t e = 0; e < no; e++) {
      const double x = po[i][e];
      po[i][e] = x + h;
      const double up = ref_merge_loss(&rm, dout, dlse);
      po[i][e] = x - h;
      const double down = ref_merge_loss(&rm, dout, dlse);
      po[i][e] = x;
      fo[e] = isnan(x) ? 0.0 : (up - down) / (2 * h);
    }
    for (size_t e = 0; e < nl; e++) {
      const double x = pl[i][e];
      pl[i][e] = x + h;
      const double up = ref_merge_loss(&rm, dout, dlse);
      pl[i][e] = x - h;
      const double down = ref_merge_loss(&rm, dout, dlse);
      pl[i][e] = x;
      fl[e] = isinf(x) ? 0.0 : (up - down) / (2 * h);
    }
    /* FD error ~h^2 plus the f32 forward the device was given: 1e-4 */
    check_close(name, go, fo, no, 1e-4, 1e-4);
    check_close(name, gl, fl, nl, 1e-4, 1e-4);
  }

  for (int i = 0; i < n; i++) {
    view_release(&to[i]), view_release(&tl[i]), view_release(&tdo[i]), view_release(&tdl[i]);
    free(po[i]), free(pl[i]), free(gro[i]), free(grl[i]);
  }
  if (c->has_do) view_release(&p.o), view_release(&p.maybe_do);
  if (c->has_dlse) view_release(&p.maybe_dlse);
  view_release(&p.lse);
  free(to), free(tl), free(tdo), free(tdl), free(po), free(pl), free(gro), free(grl);
  free(o), free(lse), free(o_st), free(lse_st), free(dout), free(dlse);
  free(go), free(gl), free(fo), free(fl);
}

static void test_backward(void) {
  const clattn_dtype F32 = CLATTN_F32, F16 = CLATTN_F16, BF16 = CLATTN_BF16;
  /* f32 everywhere, against the analytic gradient and finite differences */
  bcase c = {3, 2, 2, 2, 8, F32, F32, F32, F32, 1, 1, -1, 0, &L_DENSE4, &L_DENSE4, 1};
  run_backward(&c);
  /* an empty part and an empty row; finite differences see zero gradients there */
  c = (bcase){2, 1, 3, 2, 12, F32, F32, F32, F32, 1, 1, 1, 1, &L_DENSE4, &L_DENSE4, 1};
  run_backward(&c);
  /* 9 parts: several launches; d-strided views (VEC 1) */
  c = (bcase){9, 1, 2, 2, 8, F32, F32, F32, F32, 1, 1, 4, 0, &L_DSTRIDE, &L_BHMD, 0};
  run_backward(&c);
  /* storage dtypes, do only, strided */
  c = (bcase){5, 2, 1, 3, 32, F16, F16, F16, BF16, 1, 0, 2, 0, &L_BHMD, &L_DSTRIDE, 0};
  run_backward(&c);
  /* dlse only: no o needed, do_i all zero */
  c = (bcase){2, 2, 2, 2, 16, BF16, F32, F32, F16, 0, 1, -1, 0, &L_DENSE4, &L_DENSE4, 0};
  run_backward(&c);
  /* neither: zero gradients */
  c = (bcase){1, 1, 1, 2, 8, F32, F32, F32, F32, 0, 0, -1, 0, &L_DENSE4, &L_DENSE4, 0};
  run_backward(&c);
  /* do in bf16, o in f16 */
  c = (bcase){4, 1, 2, 2, 64, F32, F16, BF16, F32, 1, 1, -1, 1, &L_DENSE4, &L_DENSE4, 0};
  run_backward(&c);
}

int main(int argc, char **argv) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("merge", fixture_init, fixture_cleanup);
  add_merge_error_tests(s);
  CU_add_test(s, "parts n=1 2 7 (uneven, empty) = attention over all keys", test_part_counts);
  CU_add_test(s, "parts n=64 separate, chunked, stacked", test_many_parts);
  CU_add_test(s, "dtypes parts x output f32 f16 bf16", test_dtypes);
  CU_add_test(s, "strided views, offsets, d-strides", test_views);
  CU_add_test(s, "special values -inf +inf NaN underflow", test_special);
  CU_add_test(s, "split-K reduce of decode, dense and varlen", test_strided_reduce);
  CU_add_test(s, "backward vs analytic and finite differences", test_backward);
  add_merge_multi_tests(s);
  if (!select_part(argc, argv)) return 1; /* tests/part.h */
  return run_suites();
}
