/* K/V cache operations (cl/kvcache.cl): append, quantize, dequantize.
 * Validation of the cache layouts, the kernel options and the launches.
 * The layouts and quantization rules are documented in include/clattn.h. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define CACHE_DTYPES                                                                        \
  (CLATTN_FLOAT_DTYPES | CLATTN_DT(CLATTN_INT4) | CLATTN_DT(CLATTN_FP8) |                   \
   CLATTN_DT(CLATTN_FP8_FNUZ))
#define I32 CLATTN_DT(CLATTN_I32)
#define MAX_HEAD_DIM 2048
#define INT32_LIMIT ((int64_t)1 << 31)

/* Quantization kind of a cache dtype: 0 float, 1 int4, 2 fp8 (either variant). */
static int quant_kind(clattn_dtype dt) {
  if (dt == CLATTN_INT4) return 1;
  if (dt == CLATTN_FP8 || dt == CLATTN_FP8_FNUZ) return 2;
  return 0;
}

int64_t clattn_kv_row_size(clattn_dtype dtype, int head_dim, int kv_groups) {
  const int G = kv_groups ? kv_groups : 1;
  if (head_dim <= 0 || head_dim % 8 || head_dim > MAX_HEAD_DIM) return 0;
  switch (dtype) {
  case CLATTN_F32:
  case CLATTN_F16:
  case CLATTN_BF16: return G == 1 ? head_dim : 0;
  case CLATTN_INT4:
    if ((G != 1 && G != 2 && G != 4 && G != 8) || head_dim % (8 * G)) return 0;
    return G + head_dim / 8;
  case CLATTN_FP8:
  case CLATTN_FP8_FNUZ: return G == 1 ? head_dim / 4 : 0;
  default: return 0;
  }
}

/* ------------------------------------------------------------------ validation */

/* What the kernels need to know of a cache (and its block table). */
typedef struct cache_desc {
  clattn_dtype dtype;
  int quant; /* quant_kind */
  int D, G;
  int N;     /* dense: positions per sequence; paged: 0 */
  int max_pages, page_size, num_pages; /* paged; page_size 0 = dense */
} cache_desc;

static clattn_status check_head_dim(const clattn_context *ctx, const clattn_tensor *t,
                                    const char *name, int axis) {
  const int64_t D = t->shape[axis];
  if (D <= 0 || D % 8 || D > MAX_HEAD_DIM)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "%s.shape[%d] (%lld): the head dim must be a positive multiple of 8 up "
                       "to %d",
                       name, axis, (long long)D, MAX_HEAD_DIM);
  if ((size_t)(D / 8) > ctx->profile.max_work_group_size)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "%s.shape[%d] (%lld): head dim / 8 exceeds the device's work-group "
                       "limit %zu",
                       name, axis, (long long)D, ctx->profile.max_work_group_size);
  return CLATTN_SUCCESS;
}

/* The kernels index rows and 8-element lanes in 32 bits (64-bit divisions
 * are slow on GPUs): at most 2^31 - 1 rows and 2^32 - 2^20 lanes per call. */
static clattn_status check_rows(int64_t rows, int D, const char *what) {
  if (rows >= INT32_LIMIT || rows * (D / 8) >= ((int64_t)1 << 32) - ((int64_t)1 << 20))
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "%s: %lld rows of head dim %d are too many for one call (at most 2^31 "
                       "rows and 2^32 8-element chunks): split it",
                       what, (long long)rows, D);
  return CLATTN_SUCCESS;
}

/* A [B] or [B + 1] i32 vector. */
static clattn_status check_vec(const clattn_context *ctx, const clattn_tensor *t,
                               const char *name, int64_t n, const char *what) {
  CLATTN_TRY(clattn_check_tensor(ctx, t, name, 1, I32));
  return clattn_check_dim(t, name, 0, n, what);
}

/* Checks a cache tensor `c` (named cname) holding rows of H heads and head
 * dim D for B sequences, its scale-shift tensor `ss` and the block table. */
static clattn_status check_cache(const clattn_context *ctx, const clattn_tensor *c,
                                 const char *cname,
                                 const clattn_tensor *ss, const char *ssname,
                                 const clattn_tensor *table, int64_t B, int64_t H, int D,
                                 int kv_groups, cache_desc *out) {
  memset(out, 0, sizeof *out);
  CLATTN_TRY(clattn_check_tensor(ctx, c, cname, 4, CACHE_DTYPES));
  out->dtype = c->dtype;
  out->quant = quant_kind(c->dtype);
  out->D = D;
  out->G = kv_groups ? kv_groups : 1;
  if (out->quant == 1) {
    if (out->G != 1 && out->G != 2 && out->G != 4 && out->G != 8)
      return clattn_fail(CLATTN_INVALID_ARGUMENT, "kv_groups (%d) must be 1, 2, 4 or 8",
                         kv_groups);
    if (D % (8 * out->G))
      return clattn_fail(CLATTN_UNSUPPORTED,
                         "head dim %d is not a multiple of 8 * kv_groups (%d): int4 groups "
                         "hold whole code words",
                         D, out->G);
  } else if (out->G != 1) {
    return clattn_fail(CLATTN_INVALID_ARGUMENT,
                       "kv_groups (%d) applies to int4 caches only, %s is %s", kv_groups,
                       cname, clattn_dtype_name(c->dtype));
  }
  const char *xwhat = out->quant == 1   ? "kv_groups + D/8 words of an int4 row"
                      : out->quant == 2 ? "D/4 words of an fp8 row"
                                        : "the head dim D";
  CLATTN_TRY(clattn_check_dim(c, cname, 2, H, "Hkv of the new rows"));
  CLATTN_TRY(clattn_check_dim(c, cname, 3, clattn_kv_row_size(c->dtype, D, kv_groups), xwhat));
  if (c->stride[3] != 1 && c->shape[3] > 1)
    return clattn_fail(CLATTN_INVALID_SHAPE,
                       "%s.stride[3] (%lld) must be 1: cache rows are contiguous", cname,
                       (long long)c->stride[3]);
  if (clattn_present(table)) {
    CLATTN_TRY(clattn_check_tensor(ctx, table, "maybe_block_table", 2, I32));
    CLATTN_TRY(clattn_check_dim(table, "maybe_block_table", 0, B, "B, the sequences"));
    if (table->stride[1] != 1 && table->shape[1] > 1)
      return clattn_fail(CLATTN_INVALID_SHAPE,
                         "maybe_block_table.stride[1] (%lld) must be 1",
                         (long long)table->stride[1]);
    if (c->shape[1] <= 0)
      return clattn_fail(CLATTN_INVALID_SHAPE, "%s.shape[1] (page size) is 0", cname);
    if (c->shape[0] >= INT32_LIMIT || table->shape[1] * c->shape[1] >= INT32_LIMIT)
      return clattn_fail(CLATTN_UNSUPPORTED,
                         "%s: %lld pages, %lld table entries of %lld rows: positions must fit "
                         "in 31 bits",
                         cname, (long long)c->shape[0], (long long)table->shape[1],
                         (long long)c->shape[1]);
    out->num_pages = (int)c->shape[0];
    out->page_size = (int)c->shape[1];
    out->max_pages = (int)table->shape[1];
  } else {
    CLATTN_TRY(clattn_check_dim(c, cname, 0, B, "B, the sequences (dense cache)"));
    if (c->shape[1] >= INT32_LIMIT)
      return clattn_fail(CLATTN_UNSUPPORTED, "%s.shape[1] (%lld): positions must fit in 31 bits",
                         cname, (long long)c->shape[1]);
    out->N = (int)c->shape[1];
  }
  if (out->quant == 2) {
    if (!clattn_present(ss))
      return clattn_fail(CLATTN_INVALID_ARGUMENT,
                         "%s.buf is NULL: an fp8 cache needs its scale-shift tensor", ssname);
    CLATTN_TRY(clattn_check_tensor(ctx, ss, ssname, 3, I32));
    for (int a = 0; a < 3; a++)
      CLATTN_TRY(clattn_check_dim(ss, ssname, a, c->shape[a], "the cache's rows"));
  } else if (clattn_present(ss)) {
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is only for fp8 caches, %s is %s", ssname,
                       cname, clattn_dtype_name(c->dtype));
  }
  return CLATTN_SUCCESS;
}

/* ------------------------------------------------------------------ kernel options */

/* The write (append, quantize) or read (dequantize) kernel's options: the
 * float side's dtype as IN_DT or OUT_DT, the cache's, and the row-wise form
 * where asked (-DROWWISE=1 only then: the lane form's options stay as they
 * were). */
static void kv_options(char *buf, size_t size, const char *side, clattn_dtype fl, clattn_dtype kv,
                       bool rowwise) {
  const int q = quant_kind(kv);
  const char *rw = rowwise ? " -DROWWISE=1" : "";
  if (q == 0)
    snprintf(buf, size, "-D%s=%s -DKV_QUANT=0 -DKV_DT=%s%s", side, clattn_dtype_cl(fl), clattn_dtype_cl(kv), rw);
  else if (q == 1)
    snprintf(buf, size, "-D%s=%s -DKV_QUANT=1%s", side, clattn_dtype_cl(fl), rw);
  else
    snprintf(buf, size, "-D%s=%s -DKV_QUANT=2 -DFP8_FNUZ=%d%s", side, clattn_dtype_cl(fl), kv == CLATTN_FP8_FNUZ, rw);
}

void clattn_kvcache_variants(clattn_variant_fn fn, void *priv) {
  static const clattn_dtype floats[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  static const clattn_dtype caches[] = {CLATTN_F32,  CLATTN_F16, CLATTN_BF16,
                                        CLATTN_INT4, CLATTN_FP8, CLATTN_FP8_FNUZ};
  char opts[160];
  for (int rw = 0; rw < 2; rw++)
    for (int f = 0; f < 3; f++)
      for (int c = 0; c < 6; c++) {
        kv_options(opts, sizeof opts, "IN_DT", floats[f], caches[c], rw);
        fn(priv, "kvcache.cl", opts);
        kv_options(opts, sizeof opts, "OUT_DT", floats[f], caches[c], rw);
        fn(priv, "kvcache.cl", opts);
      }
}

/* ------------------------------------------------------------------ launches */

/* One launch of clattn_kv_write for K (and V). */
typedef struct write_job {
  const clattn_tensor *x[2];     /* the float rows; x[1] NULL: K only */
  int64_t xs[2][4];              /* their strides: sequence, row, head, element */
  const clattn_tensor *cache[2];
  const clattn_tensor *ss[2];    /* fp8 scale-shift tensors (else unused) */
  const clattn_tensor *new_start, *pos, *table, *flag; /* may be absent */
  cache_desc cd;
  int64_t rows; /* input rows (T) times heads */
  int H, B;
  int rows_per_seq; /* uniform mode (no new_start) */
} write_job;

/* An optional tensor: NULL or absent. */
static bool given(const clattn_tensor *t) { return t && clattn_present(t); }

static void arg_opt_tensor(clattn_args *a, const clattn_tensor *t) {
  const bool p = given(t);
  clattn_arg_mem(a, p ? t->buf : NULL);
  clattn_arg_long(a, p ? clattn_elem_offset(t) : 0);
}

static void arg_table(clattn_args *a, const clattn_tensor *table, const cache_desc *cd) {
  arg_opt_tensor(a, table);
  clattn_arg_long(a, given(table) ? table->stride[0] : 0);
  clattn_arg_int(a, cd->max_pages);
  clattn_arg_int(a, cd->page_size);
  clattn_arg_int(a, cd->num_pages);
}

static clattn_status launch_write(clattn_context *ctx, cl_command_queue queue,
                                  const write_job *j, cl_uint num_wait, const cl_event *wait,
                                  cl_event *event) {
  char opts[160];
  const bool rowwise = ctx->tuning.quant_rowwise;
  kv_options(opts, sizeof opts, "IN_DT", j->x[0]->dtype, j->cd.dtype, rowwise);
  static const char *name = "clattn_kv_write";
  cl_kernel k = NULL;
  CLATTN_TRY(clattn_kernel_get(ctx, "kvcache.cl", opts, name, &k));
  const int L = rowwise ? 1 : j->cd.D / 8; /* work-items per row */
  /* whole rows per work-group: a quantization group never straddles two */
  size_t per = (size_t)ctx->tuning.quant_wg / (size_t)L;
  if (per < 1) per = 1;
  const size_t local = per * (size_t)L;
  const size_t groups = (size_t)((j->rows + (int64_t)per - 1) / (int64_t)per);
  const int nkv = j->x[1] ? 2 : 1;

  clattn_args a = clattn_args_begin(k);
  clattn_arg_int(&a, j->H);
  clattn_arg_int(&a, j->cd.D);
  clattn_arg_int(&a, j->cd.G);
  clattn_arg_int(&a, (int)j->rows);
  clattn_arg_int(&a, j->rows_per_seq);
  clattn_arg_int(&a, j->B);
  clattn_arg_int(&a, j->cd.N);
  for (int i = 0; i < 2; i++) {
    const int s = i < nkv ? i : 0; /* V absent: K's arguments, never read */
    clattn_arg_tensor(&a, j->x[s]);
    for (int d = 0; d < 4; d++) clattn_arg_long(&a, j->xs[s][d]);
  }
  for (int i = 0; i < 2; i++) {
    const clattn_tensor *c = j->cache[i < nkv ? i : 0];
    clattn_arg_tensor(&a, c);
    for (int d = 0; d < 3; d++) clattn_arg_long(&a, c->stride[d]);
  }
  for (int i = 0; i < 2; i++) {
    const clattn_tensor *s = j->ss[i < nkv ? i : 0];
    const bool p = j->cd.quant == 2;
    arg_opt_tensor(&a, p ? s : NULL);
    for (int d = 0; d < 3; d++) clattn_arg_long(&a, p ? s->stride[d] : 0);
  }
  arg_opt_tensor(&a, j->new_start);
  clattn_arg_long(&a, given(j->new_start) ? j->new_start->stride[0] : 0);
  arg_opt_tensor(&a, j->pos);
  clattn_arg_long(&a, given(j->pos) ? j->pos->stride[0] : 0);
  arg_table(&a, j->table, &j->cd);
  arg_opt_tensor(&a, j->flag);
  clattn_arg_local(&a, local * sizeof(float));
  clattn_arg_local(&a, local * sizeof(float));
  size_t global[2] = {groups * local, (size_t)nkv};
  size_t lsz[2] = {local, 1};
  return clattn_args_launch(ctx, queue, &a, name, 2, global, lsz, num_wait, wait, event);
}

/* ------------------------------------------------------------------ append */

clattn_status clattn_kv_append(clattn_context *ctx, cl_command_queue queue,
                               const clattn_kv_append_params *p, cl_uint num_wait,
                               const cl_event *wait_list, cl_event *event) {
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  CLATTN_TRY(clattn_check_enqueue(ctx, queue, num_wait, wait_list));
  CLATTN_TRY(clattn_check_tensor(ctx, &p->new_k, "new_k", 3, CLATTN_FLOAT_DTYPES));
  CLATTN_TRY(check_head_dim(ctx, &p->new_k, "new_k", 2));
  const int64_t T = p->new_k.shape[0], H = p->new_k.shape[1];
  const int D = (int)p->new_k.shape[2];
  CLATTN_TRY(clattn_check_tensor(ctx, &p->pos, "pos", 1, I32));
  const int64_t B = p->pos.shape[0];
  if (T >= INT32_LIMIT || B >= INT32_LIMIT || H >= INT32_LIMIT)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "new_k.shape[0] (%lld), shape[1] (%lld) or pos.shape[0] (%lld) beyond "
                       "31 bits",
                       (long long)T, (long long)H, (long long)B);
  if (clattn_present(&p->maybe_new_start))
    CLATTN_TRY(check_vec(ctx, &p->maybe_new_start, "maybe_new_start", B + 1, "B + 1, B from pos"));
  else
    CLATTN_TRY(clattn_check_dim(&p->new_k, "new_k", 0, B,
                                "one row per sequence when maybe_new_start is absent"));

  const bool has_v = clattn_present(&p->maybe_new_v);
  if (has_v != clattn_present(&p->maybe_v_cache))
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is given but %s.buf is NULL",
                       has_v ? "maybe_new_v" : "maybe_v_cache",
                       has_v ? "maybe_v_cache" : "maybe_new_v");
  if (!has_v && clattn_present(&p->maybe_v_scale_shift))
    return clattn_fail(CLATTN_INVALID_ARGUMENT,
                       "maybe_v_scale_shift is given without maybe_v_cache");
  write_job j;
  memset(&j, 0, sizeof j);
  CLATTN_TRY(check_cache(ctx, &p->k_cache, "k_cache", &p->maybe_k_scale_shift, "maybe_k_scale_shift",
                         &p->maybe_block_table, B, H, D, p->kv_groups, &j.cd));
  if (has_v) {
    CLATTN_TRY(clattn_check_tensor(ctx, &p->maybe_new_v, "maybe_new_v", 3, CLATTN_FLOAT_DTYPES));
    if (p->maybe_new_v.dtype != p->new_k.dtype)
      return clattn_fail(CLATTN_UNSUPPORTED, "maybe_new_v.dtype %s differs from new_k.dtype %s",
                         clattn_dtype_name(p->maybe_new_v.dtype),
                         clattn_dtype_name(p->new_k.dtype));
    for (int a = 0; a < 3; a++)
      CLATTN_TRY(clattn_check_dim(&p->maybe_new_v, "maybe_new_v", a, p->new_k.shape[a],
                                  "new_k's shape"));
    cache_desc vd;
    CLATTN_TRY(check_cache(ctx, &p->maybe_v_cache, "maybe_v_cache", &p->maybe_v_scale_shift,
                           "maybe_v_scale_shift", &p->maybe_block_table, B, H, D, p->kv_groups,
                           &vd));
    if (p->maybe_v_cache.dtype != p->k_cache.dtype)
      return clattn_fail(CLATTN_UNSUPPORTED,
                         "maybe_v_cache.dtype %s differs from k_cache.dtype %s",
                         clattn_dtype_name(p->maybe_v_cache.dtype),
                         clattn_dtype_name(p->k_cache.dtype));
    for (int a = 0; a < 2; a++)
      CLATTN_TRY(clattn_check_dim(&p->maybe_v_cache, "maybe_v_cache", a, p->k_cache.shape[a],
                                  "k_cache's shape"));
  }
  CLATTN_TRY(clattn_check_error_flag(ctx, &p->maybe_error_flag));
  const clattn_named outs[] = {{&p->k_cache, "k_cache"},
                               {&p->maybe_v_cache, "maybe_v_cache"},
                               {&p->maybe_k_scale_shift, "maybe_k_scale_shift"},
                               {&p->maybe_v_scale_shift, "maybe_v_scale_shift"},
                               {&p->maybe_error_flag, "maybe_error_flag"}};
  const clattn_named ins[] = {{&p->new_k, "new_k"},
                              {&p->maybe_new_v, "maybe_new_v"},
                              {&p->pos, "pos"},
                              {&p->maybe_new_start, "maybe_new_start"},
                              {&p->maybe_block_table, "maybe_block_table"}};
  CLATTN_TRY(clattn_check_aliasing(outs, 5, ins, 5));

  j.x[0] = &p->new_k;
  j.x[1] = has_v ? &p->maybe_new_v : NULL;
  for (int i = 0; i < (has_v ? 2 : 1); i++) {
    /* packed rows: the sequence stride is unused (varlen) or the row stride (one row each) */
    const clattn_tensor *x = j.x[i];
    j.xs[i][0] = x->stride[0];
    j.xs[i][1] = x->stride[0];
    j.xs[i][2] = x->stride[1];
    j.xs[i][3] = x->stride[2];
  }
  j.cache[0] = &p->k_cache;
  j.cache[1] = has_v ? &p->maybe_v_cache : NULL;
  j.ss[0] = &p->maybe_k_scale_shift;
  j.ss[1] = has_v ? &p->maybe_v_scale_shift : NULL;
  j.new_start = &p->maybe_new_start;
  j.pos = &p->pos;
  j.table = &p->maybe_block_table;
  j.flag = &p->maybe_error_flag;
  j.rows = T * H;
  CLATTN_TRY(check_rows(j.rows, D, "new_k"));
  j.H = (int)H;
  j.B = (int)B;
  j.rows_per_seq = 1;
  return launch_write(ctx, queue, &j, num_wait, wait_list, event);
}

/* ------------------------------------------------------------------ quantize */

/* The tensors quantize and dequantize share: the [B, n, H, D] float rows
 * (src, read; out, written), the cache with its scale-shift words and block
 * table, the first positions and the error flag. */
typedef struct rows_op {
  const clattn_tensor *rows, *cache, *ss, *table, *start, *flag;
  const char *rows_name;
  int kv_groups;
} rows_op;

/* Their checks: the queue, the rows (head dim, B * n and H within 31 bits),
 * the cache for those rows (cd), the positions and the flag. */
static clattn_status check_rows_op(const clattn_context *ctx, cl_command_queue queue,
                                   cl_uint num_wait, const cl_event *wait, const rows_op *r,
                                   int64_t *B, int64_t *n, int64_t *H, cache_desc *cd) {
  CLATTN_TRY(clattn_check_enqueue(ctx, queue, num_wait, wait));
  const clattn_tensor *t = r->rows;
  const char *name = r->rows_name;
  CLATTN_TRY(clattn_check_tensor(ctx, t, name, 4, CLATTN_FLOAT_DTYPES));
  CLATTN_TRY(check_head_dim(ctx, t, name, 3));
  *B = t->shape[0], *n = t->shape[1], *H = t->shape[2];
  if (*B >= INT32_LIMIT || *n >= INT32_LIMIT || *B * *n >= INT32_LIMIT || *H >= INT32_LIMIT)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "%s.shape[0] * shape[1] (%lld) or shape[2] (%lld) beyond 31 bits", name,
                       (long long)(*B * *n), (long long)*H);
  CLATTN_TRY(check_cache(ctx, r->cache, "cache", r->ss, "maybe_scale_shift", r->table, *B, *H,
                         (int)t->shape[3], r->kv_groups, cd));
  if (clattn_present(r->start)) {
    char what[32];
    snprintf(what, sizeof what, "B, from %s", name);
    CLATTN_TRY(check_vec(ctx, r->start, "maybe_start", *B, what));
  }
  return clattn_check_error_flag(ctx, r->flag);
}

clattn_status clattn_kv_quantize(clattn_context *ctx, cl_command_queue queue,
                                 const clattn_kv_quantize_params *p, cl_uint num_wait,
                                 const cl_event *wait_list, cl_event *event) {
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  const rows_op r = {&p->src, &p->cache, &p->maybe_scale_shift, &p->maybe_block_table,
                     &p->maybe_start, &p->maybe_error_flag, "src", p->kv_groups};
  int64_t B, n, H;
  write_job j;
  memset(&j, 0, sizeof j);
  CLATTN_TRY(check_rows_op(ctx, queue, num_wait, wait_list, &r, &B, &n, &H, &j.cd));
  const clattn_named outs[] = {{&p->cache, "cache"},
                               {&p->maybe_scale_shift, "maybe_scale_shift"},
                               {&p->maybe_error_flag, "maybe_error_flag"}};
  const clattn_named ins[] = {{&p->src, "src"},
                              {&p->maybe_start, "maybe_start"},
                              {&p->maybe_block_table, "maybe_block_table"}};
  CLATTN_TRY(clattn_check_aliasing(outs, 3, ins, 3));
  j.x[0] = &p->src;
  for (int d = 0; d < 4; d++) j.xs[0][d] = p->src.stride[d];
  j.cache[0] = &p->cache;
  j.ss[0] = &p->maybe_scale_shift;
  j.new_start = NULL;
  j.pos = &p->maybe_start;
  j.table = &p->maybe_block_table;
  j.flag = &p->maybe_error_flag;
  j.rows = B * n * H;
  CLATTN_TRY(check_rows(j.rows, j.cd.D, "src"));
  j.H = (int)H;
  j.B = (int)B;
  j.rows_per_seq = (int)n;
  return launch_write(ctx, queue, &j, num_wait, wait_list, event);
}

/* ------------------------------------------------------------------ dequantize */

clattn_status clattn_kv_dequantize(clattn_context *ctx, cl_command_queue queue,
                                   const clattn_kv_dequantize_params *p, cl_uint num_wait,
                                   const cl_event *wait_list, cl_event *event) {
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  const rows_op r = {&p->out, &p->cache, &p->maybe_scale_shift, &p->maybe_block_table,
                     &p->maybe_start, &p->maybe_error_flag, "out", p->kv_groups};
  int64_t B, n, H;
  cache_desc cd;
  CLATTN_TRY(check_rows_op(ctx, queue, num_wait, wait_list, &r, &B, &n, &H, &cd));
  const clattn_named outs[] = {{&p->out, "out"}, {&p->maybe_error_flag, "maybe_error_flag"}};
  const clattn_named ins[] = {{&p->cache, "cache"},
                              {&p->maybe_scale_shift, "maybe_scale_shift"},
                              {&p->maybe_start, "maybe_start"},
                              {&p->maybe_block_table, "maybe_block_table"}};
  CLATTN_TRY(clattn_check_aliasing(outs, 2, ins, 4));
  const int64_t rows = B * n * H;
  CLATTN_TRY(check_rows(rows, cd.D, "out"));

  char opts[160];
  const bool rowwise = ctx->tuning.quant_rowwise;
  kv_options(opts, sizeof opts, "OUT_DT", p->out.dtype, cd.dtype, rowwise);
  static const char *name = "clattn_kv_read";
  cl_kernel k = NULL;
  CLATTN_TRY(clattn_kernel_get(ctx, "kvcache.cl", opts, name, &k));
  const size_t wg = (size_t)ctx->tuning.quant_wg;
  const size_t lanes = (size_t)rows * (size_t)(rowwise ? 1 : cd.D / 8);
  clattn_args a = clattn_args_begin(k);
  clattn_arg_int(&a, (int)H);
  clattn_arg_int(&a, cd.D);
  clattn_arg_int(&a, cd.G);
  clattn_arg_int(&a, (int)rows);
  clattn_arg_int(&a, (int)n);
  clattn_arg_int(&a, cd.N);
  clattn_arg_tensor(&a, &p->cache);
  for (int d = 0; d < 3; d++) clattn_arg_long(&a, p->cache.stride[d]);
  const bool fp8 = cd.quant == 2;
  arg_opt_tensor(&a, fp8 ? &p->maybe_scale_shift : NULL);
  for (int d = 0; d < 3; d++) clattn_arg_long(&a, fp8 ? p->maybe_scale_shift.stride[d] : 0);
  clattn_arg_tensor(&a, &p->out);
  for (int d = 0; d < 4; d++) clattn_arg_long(&a, p->out.stride[d]);
  arg_opt_tensor(&a, &p->maybe_start);
  clattn_arg_long(&a, clattn_present(&p->maybe_start) ? p->maybe_start.stride[0] : 0);
  arg_table(&a, &p->maybe_block_table, &cd);
  arg_opt_tensor(&a, &p->maybe_error_flag);
  size_t global = (lanes + wg - 1) / wg * wg;
  return clattn_args_launch(ctx, queue, &a, name, 1, &global, &wg, num_wait, wait_list, event);
}
