/* Split-K decode attention (cl/decode.cl): validation and launch; the
 * planning (variant, rows per group, split count, workspace) is
 * lib/decode_plan.c. The plan that sizes the workspace is the one the
 * launch takes. */
#include "decode_plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ validation */

/* The most keys a sequence may hold: the kernels count keys, splits and
 * tiles in int, with room for a split's rounding. */
#define MAX_KEYS ((int64_t)1 << 30)
/* The most split-K partials a call may ask for. */
#define MAX_SPLITS 65536

/* k (t == k) or v: a K/V tensor of the call's row format, v like k. */
static clattn_status check_kv(const clattn_context *ctx, const clattn_tensor *t, const char *name,
                              const clattn_decode_problem *pr, const clattn_tensor *k) {
  const unsigned kv_dtypes = CLATTN_FLOAT_DTYPES | CLATTN_DT(CLATTN_INT4) | CLATTN_DT(CLATTN_FP8) |
                             CLATTN_DT(CLATTN_FP8_FNUZ);
  CLATTN_TRY(clattn_check_tensor(ctx, t, name, 4, kv_dtypes));
  if (t != k) {
    if (t->dtype != k->dtype)
      return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s.dtype (%s) differs from k.dtype (%s)", name,
                         clattn_dtype_name(t->dtype), clattn_dtype_name(k->dtype));
    for (int i = 0; i < 4; i++) CLATTN_TRY(clattn_check_dim(t, name, i, k->shape[i], "k's shape"));
  }
  CLATTN_TRY(clattn_check_dim(t, name, 3, row_width(pr),
                              pr->kv_q == 1   ? "int4 row: kv_groups + D/8 words"
                              : pr->kv_q == 2 ? "fp8 row: D/4 words"
                                              : "head dim D of q"));
  if (t->stride[3] != 1)
    return clattn_fail(CLATTN_UNSUPPORTED, "%s.stride[3] is %lld: the head dim must be contiguous",
                       name, (long long)t->stride[3]);
  return CLATTN_SUCCESS;
}

/* B, Mq and the packed query rows (varlen: batch, max_q_len and q_start). */
static clattn_status check_batch(const clattn_context *ctx, const clattn_decode_params *p,
                                 clattn_decode_problem *pr) {
  pr->total_q = (int)p->q.shape[1];
  if (pr->varlen) {
    CLATTN_TRY(clattn_check_dim(&p->q, "q", 0, 1, "varlen q is [1, total_q, Hq, D]"));
    if (p->batch <= 0 || p->batch >= CLATTN_MAX_DIM)
      return clattn_fail(CLATTN_INVALID_ARGUMENT,
                         "batch is %d: varlen decode needs 0 < batch < 2^31 - 1", p->batch);
    pr->B = p->batch;
    if (p->max_q_len < 0 || p->max_q_len > p->q.shape[1])
      return clattn_fail(CLATTN_INVALID_ARGUMENT, "max_q_len (%d) is outside [0, total_q = %lld]",
                         p->max_q_len, (long long)p->q.shape[1]);
    pr->Mq = p->max_q_len ? p->max_q_len : pr->total_q;
    CLATTN_TRY(clattn_check_tensor(ctx, &p->maybe_q_start, "maybe_q_start", 1, CLATTN_DT(CLATTN_I32)));
    CLATTN_TRY(clattn_check_dim(&p->maybe_q_start, "maybe_q_start", 0, (int64_t)pr->B + 1, "batch + 1"));
    return clattn_check_unit_stride(&p->maybe_q_start, "maybe_q_start", 0, "the kernels read it packed");
  }
  pr->B = (int)p->q.shape[0];
  pr->Mq = (int)p->q.shape[1];
  if (p->batch && p->batch != pr->B)
    return clattn_fail(CLATTN_INVALID_SHAPE, "batch (%d) differs from q.shape[0] (%d)", p->batch,
                       pr->B);
  if ((int64_t)pr->B * pr->Mq > CLATTN_MAX_DIM)
    return clattn_fail(CLATTN_UNSUPPORTED, "q: B * Mq = %lld query rows exceed 2^31 - 1",
                       (long long)pr->B * pr->Mq);
  pr->total_q = pr->B * pr->Mq;
  return CLATTN_SUCCESS;
}

/* Where the keys are: a dense cache of kv_cap keys per sequence, or pages
 * through the block table; fp8's scale-shift tensors beside the rows. */
static clattn_status check_cache(const clattn_context *ctx, const clattn_decode_params *p,
                                 clattn_decode_problem *pr) {
  int64_t cap;
  if (pr->paged) {
    const clattn_tensor *bt = &p->maybe_block_table;
    CLATTN_TRY(clattn_check_tensor(ctx, bt, "maybe_block_table", 2, CLATTN_DT(CLATTN_I32)));
    CLATTN_TRY(clattn_check_dim(bt, "maybe_block_table", 0, pr->B, "batch B"));
    if (bt->stride[1] != 1 && bt->shape[1] > 1)
      return clattn_fail(CLATTN_UNSUPPORTED, "maybe_block_table.stride[1] is %lld: it must be 1",
                         (long long)bt->stride[1]);
    if (p->k.shape[1] < 1) return clattn_fail(CLATTN_INVALID_SHAPE, "k.shape[1] (page_size) is 0");
    pr->num_pages = (int)p->k.shape[0];
    pr->page_size = (int)p->k.shape[1];
    pr->max_pages = (int)bt->shape[1];
    cap = (int64_t)pr->max_pages * pr->page_size;
    if (cap > MAX_KEYS)
      return clattn_fail(CLATTN_UNSUPPORTED,
                         "maybe_block_table.shape[1] * k.shape[1] (max_pages %d * page_size %d) "
                         "exceeds 2^30 keys per sequence",
                         pr->max_pages, pr->page_size);
  } else {
    CLATTN_TRY(clattn_check_dim(&p->k, "k", 0, pr->B, "batch B"));
    cap = p->k.shape[1];
    if (cap > MAX_KEYS)
      return clattn_fail(CLATTN_UNSUPPORTED, "k.shape[1] (%lld keys) exceeds 2^30 keys per sequence",
                         (long long)cap);
  }
  pr->kv_cap = (int)cap;
  const clattn_tensor *ss[2] = {&p->maybe_k_scale_shift, &p->maybe_v_scale_shift};
  static const char *names[2] = {"maybe_k_scale_shift", "maybe_v_scale_shift"};
  for (int i = 0; i < 2; i++) {
    if (pr->kv_q != 2) {
      if (clattn_present(ss[i]))
        return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is only for fp8 K/V, k is %s", names[i],
                           clattn_dtype_name(p->k.dtype));
      continue;
    }
    if (!clattn_present(ss[i]))
      return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s.buf is NULL: fp8 K/V need it", names[i]);
    CLATTN_TRY(clattn_check_tensor(ctx, ss[i], names[i], 3, CLATTN_DT(CLATTN_I32)));
    for (int d = 0; d < 3; d++) CLATTN_TRY(clattn_check_dim(ss[i], names[i], d, p->k.shape[d], "k's rows"));
  }
  return CLATTN_SUCCESS;
}

/* o, maybe_lse, maybe_kv_len, maybe_bias (keys columns), the flag, scale. */
static clattn_status check_io(const clattn_context *ctx, const clattn_decode_params *p,
                              const clattn_decode_problem *pr) {
  CLATTN_TRY(clattn_check_tensor(ctx, &p->o, "o", 4, CLATTN_FLOAT_DTYPES));
  for (int i = 0; i < 4; i++) CLATTN_TRY(clattn_check_dim(&p->o, "o", i, p->q.shape[i], "q's shape"));
  if (clattn_present(&p->maybe_lse)) {
    const clattn_tensor *l = &p->maybe_lse;
    CLATTN_TRY(clattn_check_tensor(ctx, l, "maybe_lse", 3, CLATTN_DT(CLATTN_F32)));
    CLATTN_TRY(clattn_check_dim(l, "maybe_lse", 0, pr->varlen ? 1 : pr->B, "batch B (1 if varlen)"));
    CLATTN_TRY(clattn_check_dim(l, "maybe_lse", 1, pr->Hq, "Hq"));
    CLATTN_TRY(clattn_check_dim(l, "maybe_lse", 2, p->q.shape[1], "q.shape[1]"));
  }
  if (clattn_present(&p->maybe_kv_len)) {
    CLATTN_TRY(clattn_check_tensor(ctx, &p->maybe_kv_len, "maybe_kv_len", 1, CLATTN_DT(CLATTN_I32)));
    CLATTN_TRY(clattn_check_dim(&p->maybe_kv_len, "maybe_kv_len", 0, pr->B, "batch B"));
    CLATTN_TRY(clattn_check_unit_stride(&p->maybe_kv_len, "maybe_kv_len", 0, "the kernels read it packed"));
  }
  if (pr->bias) {
    const clattn_tensor *t = &p->maybe_bias;
    CLATTN_TRY(clattn_check_tensor(ctx, t, "maybe_bias", 4, CLATTN_DT(CLATTN_F32)));
    CLATTN_TRY(clattn_check_dim(t, "maybe_bias", 0, pr->B, "batch B"));
    CLATTN_TRY(clattn_check_dim(t, "maybe_bias", 1, pr->Hq, "Hq"));
    CLATTN_TRY(clattn_check_dim(t, "maybe_bias", 2, pr->Mq, "Mq (max_q_len if varlen)"));
    CLATTN_TRY(clattn_check_dim(t, "maybe_bias", 3, pr->kv_cap, "keys per sequence"));
  }
  CLATTN_TRY(clattn_check_error_flag(ctx, &p->maybe_error_flag));
  if (clattn_present(&p->maybe_workspace)) /* its size once the plan is known */
    CLATTN_TRY(clattn_check_workspace(ctx, &p->maybe_workspace, 0, "clattn_decode_workspace_size"));
  if (!(p->scale >= 0.0f) || isinf(p->scale))
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "scale (%g) must be finite and >= 0 (0: 1/sqrt(D))",
                       (double)p->scale);
  return CLATTN_SUCCESS;
}

/* Outputs (o, lse, the flag, a caller's workspace) share no memory with each
 * other or the inputs; o may be q itself (each work-group reads its rows of
 * q before it writes them, and split partials go to the workspace). */
static clattn_status check_aliasing(const clattn_decode_params *p) {
  const bool o_is_q = clattn_same_view(&p->o, &p->q);
  const clattn_named outs[] = {{&p->o, "o"},
                               {&p->maybe_lse, "maybe_lse"},
                               {&p->maybe_error_flag, "maybe_error_flag"},
                               {&p->maybe_workspace, "maybe_workspace"}};
  const clattn_named ins[] = {{o_is_q ? NULL : &p->q, "q"},
                              {&p->k, "k"},
                              {&p->v, "v"},
                              {&p->maybe_k_scale_shift, "maybe_k_scale_shift"},
                              {&p->maybe_v_scale_shift, "maybe_v_scale_shift"},
                              {&p->maybe_kv_len, "maybe_kv_len"},
                              {&p->maybe_bias, "maybe_bias"},
                              {&p->maybe_block_table, "maybe_block_table"},
                              {&p->maybe_q_start, "maybe_q_start"}};
  CLATTN_TRY(clattn_check_aliasing(outs, 4, ins, 9));
  if (o_is_q) /* o over q also must not reach the other outputs */
    for (int i = 1; i < 4; i++) CLATTN_TRY(clattn_check_apart(outs[i].t, outs[i].name, &p->q, "q"));
  return CLATTN_SUCCESS;
}

clattn_status clattn_decode_validate(const clattn_context *ctx, const clattn_decode_params *p,
                                     clattn_decode_problem *pr) {
  memset(pr, 0, sizeof *pr);
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  pr->varlen = clattn_present(&p->maybe_q_start);
  pr->paged = clattn_present(&p->maybe_block_table);
  pr->causal = p->causal != 0;
  pr->bias = clattn_present(&p->maybe_bias);

  CLATTN_TRY(clattn_check_tensor(ctx, &p->q, "q", 4, CLATTN_FLOAT_DTYPES));
  pr->qdt = p->q.dtype;
  pr->Hq = (int)p->q.shape[2];
  pr->D = (int)p->q.shape[3];
  if (pr->D % 8 || pr->D < 8 || pr->D > 256)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "q.shape[3]: head dim D = %d is not supported (a multiple of 8 up to 256)",
                       pr->D);
  CLATTN_TRY(check_batch(ctx, p, pr));

  /* K/V dtype decides the row format */
  if (!p->k.buf) return clattn_fail(CLATTN_INVALID_ARGUMENT, "k.buf is NULL");
  pr->kvdt = p->k.dtype;
  pr->kv_q = p->k.dtype == CLATTN_INT4 ? 1 : (p->k.dtype == CLATTN_FP8 || p->k.dtype == CLATTN_FP8_FNUZ) ? 2 : 0;
  pr->fnuz = p->k.dtype == CLATTN_FP8_FNUZ;
  pr->kv_groups = p->kv_groups ? p->kv_groups : 1;
  if (pr->kv_q != 1 && pr->kv_groups != 1)
    return clattn_fail(CLATTN_INVALID_ARGUMENT,
                       "kv_groups is %d: groups apply to int4 K/V only (k is %s; 0 or 1)",
                       p->kv_groups, clattn_dtype_name(p->k.dtype));
  if (pr->kv_q == 1 && pr->kv_groups != 1 && pr->kv_groups != 2 && pr->kv_groups != 4 &&
      pr->kv_groups != 8)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "kv_groups is %d: int4 rows have 1, 2, 4 or 8 groups",
                       p->kv_groups);
  if (pr->kv_q == 1 && pr->D % (8 * pr->kv_groups))
    return clattn_fail(CLATTN_INVALID_SHAPE,
                       "head dim D = %d is not a multiple of 8 * kv_groups (%d) for int4 K/V", pr->D,
                       pr->kv_groups);
  CLATTN_TRY(check_kv(ctx, &p->k, "k", pr, &p->k));
  pr->Hkv = (int)p->k.shape[2];
  if (pr->Hkv == 0 || pr->Hq % pr->Hkv)
    return clattn_fail(CLATTN_INVALID_SHAPE,
                       "q.shape[2] (Hq = %d) is not a multiple of k.shape[2] (Hkv = %d)", pr->Hq,
                       pr->Hkv);
  pr->G = pr->Hq / pr->Hkv;
  CLATTN_TRY(check_cache(ctx, p, pr)); /* k's batch before v is compared with k */
  CLATTN_TRY(check_kv(ctx, &p->v, "v", pr, &p->k));
  if ((int64_t)pr->G * pr->Mq > CLATTN_MAX_DIM || (int64_t)pr->Hq * pr->Mq > CLATTN_MAX_DIM)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "q: Hq * Mq = %lld query rows of a sequence exceed 2^31 - 1",
                       (long long)pr->Hq * pr->Mq);

  CLATTN_TRY(check_io(ctx, p, pr));
  pr->odt = p->o.dtype;
  pr->scale = p->scale > 0.0f ? p->scale : 1.0f / sqrtf((float)pr->D);
  if (p->num_splits < 0 || p->num_splits > MAX_SPLITS)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "num_splits is %d: it must be in [0, %d] (0: auto)",
                       p->num_splits, MAX_SPLITS);
  return check_aliasing(p);
}

clattn_status clattn_decode_workspace_size(clattn_context *ctx, const clattn_decode_params *params,
                                           size_t *bytes, int *num_splits) {
  clattn_clear_error();
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  plan pl;
  CLATTN_TRY(clattn_decode_plan(ctx, params, &pl));
  if (bytes) *bytes = pl.ws_bytes;
  if (num_splits) *num_splits = pl.S;
  return CLATTN_SUCCESS;
}

clattn_status clattn_decode_check(clattn_context *ctx, const clattn_decode_params *params) {
  plan pl;
  CLATTN_TRY(clattn_decode_plan(ctx, params, &pl));
  if (pl.S > 1 && clattn_present(&params->maybe_workspace))
    return clattn_check_workspace(ctx, &params->maybe_workspace, pl.ws_bytes,
                                  "clattn_decode_workspace_size");
  return CLATTN_SUCCESS;
}

clattn_status clattn_decode_build_options(clattn_context *ctx, const clattn_decode_params *params,
                                          char *buf, size_t size) {
  clattn_clear_error();
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  plan pl;
  CLATTN_TRY(clattn_decode_plan(ctx, params, &pl));
  clattn_decode_plan_options(&pl, pl.S > 1, buf, size);
  return CLATTN_SUCCESS;
}

/* A view's element offset and its first n strides (absent: zeros). */
static clattn_view4 view4(const clattn_tensor *t, int n) {
  clattn_view4 v = {0, 0, 0, 0, 0};
  if (!clattn_present(t)) return v;
  int64_t s[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; i++) s[i] = t->stride[i];
  v = (clattn_view4){clattn_elem_offset(t), s[0], s[1], s[2], s[3]};
  return v;
}
static clattn_kv_view kv_view(const clattn_tensor *t) {
  const clattn_view4 v = view4(t, 3);
  return (clattn_kv_view){v.off, v.s0, v.s1, v.s2};
}
static cl_long elem_offset(const clattn_tensor *t) { return clattn_present(t) ? clattn_elem_offset(t) : 0; }

/* The partial kernel's views and scalars (cl/args.clh). */
static clattn_decode_args partial_args(clattn_context *ctx, const clattn_decode_params *p, const plan *pl,
                                       const clattn_workspace *ws) {
  const clattn_decode_problem *pr = &pl->pr;
  clattn_decode_args a;
  memset(&a, 0, sizeof a);
  a.q = view4(&p->q, 4);
  a.k = kv_view(&p->k);
  a.v = kv_view(&p->v);
  if (pr->kv_q == 2) {
    a.kss = kv_view(&p->maybe_k_scale_shift);
    a.vss = kv_view(&p->maybe_v_scale_shift);
  }
  a.bias = view4(&p->maybe_bias, 4);
  if (pl->S > 1) {
    /* partials: o [S, B, Mq, Hq, D], lse [S, B, Hq, Mq], f32 */
    const int64_t Mq = pr->Mq, Hq = pr->Hq, D = pr->D;
    a.o = (clattn_view4){ws->off, Mq * Hq * D, Hq * D, D, 1};
    a.o_split = (int64_t)pr->B * Mq * Hq * D;
    a.lse = (clattn_view4){ws->off + (int64_t)(pl->lse_offset_bytes / 4), Hq * Mq, Mq, 1, 0};
    a.lse_split = (int64_t)pr->B * Hq * Mq;
    if (pl->merge_last) {
      a.fo = view4(&p->o, 4);
      a.flse = view4(&p->maybe_lse, 3);
      a.ticket_off = (ws->off * 4 + (int64_t)pl->ticket_offset_bytes + 7) / 8;
      a.epoch = (int64_t)clattn_decode_tag(ctx);
    }
  } else {
    a.o = view4(&p->o, 4);
    a.lse = view4(&p->maybe_lse, 3);
  }
  a.kvl_off = elem_offset(&p->maybe_kv_len);
  a.bt_off = elem_offset(&p->maybe_block_table);
  a.bt_stride = pr->paged ? p->maybe_block_table.stride[0] : 0;
  a.qs_off = elem_offset(&p->maybe_q_start);
  a.flag_off = elem_offset(&p->maybe_error_flag);
  a.blocks = pl->blocks;
  a.kv_cap = pr->kv_cap;
  a.max_pages = pr->max_pages;
  a.page_size = pr->page_size;
  a.num_pages = pr->num_pages;
  a.total_q = pr->total_q;
  a.Mq = pr->Mq;
  a.Hq = pr->Hq;
  a.Hkv = pr->Hkv;
  a.chunk = pl->chunk;
  a.nrb = pl->nrb;
  a.slots = pl->S;
  a.scale = pr->scale;
  return a;
}

static clattn_status launch_partial(clattn_context *ctx, cl_command_queue queue,
                                    const clattn_decode_params *p, const plan *pl,
                                    const clattn_workspace *ws, cl_uint num_wait,
                                    const cl_event *wait_list, cl_event *event) {
  const bool split = pl->S > 1;
  char opts[512];
  clattn_decode_plan_options(pl, split, opts, sizeof opts);
  static const char *name = "clattn_decode_partial";
  cl_kernel k = NULL;
  CLATTN_TRY(clattn_kernel_get(ctx, "decode.cl", opts, name, &k));
  const bool fp8 = pl->pr.kv_q == 2;
  const clattn_decode_args args = partial_args(ctx, p, pl, ws);
  clattn_args a = clattn_args_begin(k);
  clattn_arg_mem(&a, p->q.buf);
  clattn_arg_mem(&a, p->k.buf);
  clattn_arg_mem(&a, p->v.buf);
  clattn_arg_mem(&a, fp8 ? p->maybe_k_scale_shift.buf : NULL);
  clattn_arg_mem(&a, fp8 ? p->maybe_v_scale_shift.buf : NULL);
  clattn_arg_mem(&a, p->maybe_kv_len.buf);
  clattn_arg_mem(&a, p->maybe_bias.buf);
  clattn_arg_mem(&a, p->maybe_block_table.buf);
  clattn_arg_mem(&a, p->maybe_q_start.buf);
  clattn_arg_mem(&a, split ? ws->buf : p->o.buf);
  clattn_arg_mem(&a, split ? ws->buf : p->maybe_lse.buf);
  clattn_arg_mem(&a, clattn_present(&p->maybe_error_flag) ? p->maybe_error_flag.buf : ctx->scratch);
  clattn_arg_mem(&a, pl->merge_last ? p->o.buf : NULL); /* merge_last: split too */
  clattn_arg_mem(&a, pl->merge_last ? p->maybe_lse.buf : NULL);
  clattn_arg_mem(&a, pl->merge_last ? ws->buf : NULL);
  clattn_arg(&a, sizeof args, &args);
  size_t local[3] = {(size_t)pl->WG, 1, 1};
  size_t global[3] = {(size_t)pl->WG * pl->S, (size_t)head_groups(pl) * pl->nrb, (size_t)pl->pr.B};
  if (pl->stream) global[0] = (size_t)pl->WG * pl->P * head_groups(pl), global[1] = global[2] = 1;
  return clattn_args_launch(ctx, queue, &a, name, 3, global, local, num_wait, wait_list, event);
}

/* The split-K reduce: the S partials in the workspace into o (and lse). */
static clattn_status launch_merge(clattn_context *ctx, cl_command_queue queue,
                                  const clattn_decode_params *p, const plan *pl,
                                  const clattn_workspace *ws, cl_event partial_done,
                                  cl_event *event) {
  const int64_t Mq = pl->pr.Mq, Hq = pl->pr.Hq, D = pl->pr.D;
  clattn_merge_strided m = {
      .part_o = ws->buf,
      .part_lse = ws->buf,
      .part_o_off = ws->off,
      .part_lse_off = ws->off + (int64_t)(pl->lse_offset_bytes / 4),
      .part_o_split_stride = (int64_t)pl->pr.B * Mq * Hq * D,
      .part_lse_split_stride = (int64_t)pl->pr.B * Hq * Mq,
      .part_o_stride = {Mq * Hq * D, Hq * D, D, 1},
      .part_lse_stride = {Hq * Mq, Mq, 1},
      .n = pl->S,
      .B = pl->pr.B,
      .M = pl->pr.Mq,
      .H = pl->pr.Hq,
      .D = pl->pr.D,
      .o = &p->o,
      .lse = &p->maybe_lse,
      .q_start = pl->pr.varlen ? &p->maybe_q_start : NULL,
      .total_q = pl->pr.total_q,
  };
  return clattn_merge_strided_enqueue(ctx, queue, &m, partial_done ? 1 : 0,
                                      partial_done ? &partial_done : NULL, event);
}

clattn_status clattn_decode(clattn_context *ctx, cl_command_queue queue,
                            const clattn_decode_params *p, cl_uint num_wait,
                            const cl_event *wait_list, cl_event *event) {
  clattn_clear_error();
  CLATTN_TRY(clattn_check_enqueue(ctx, queue, num_wait, wait_list));
  plan pl;
  CLATTN_TRY(clattn_decode_plan(ctx, p, &pl));
  const bool split = pl.S > 1;
  clattn_workspace ws = {NULL, 0, false};
  if (split)
    CLATTN_TRY(clattn_workspace_acquire(ctx, &p->maybe_workspace, pl.ws_bytes,
                                        "clattn_decode_workspace_size", &ws));
  const bool merge = split && !pl.merge_last; /* a second kernel merges the splits */
  cl_event partial_done = NULL;
  clattn_status s = launch_partial(ctx, queue, p, &pl, &ws, num_wait, wait_list,
                                   merge ? &partial_done : event);
  if (s == CLATTN_SUCCESS && merge) s = launch_merge(ctx, queue, p, &pl, &ws, partial_done, event);
  if (partial_done) clReleaseEvent(partial_done);
  clattn_workspace_release(&ws);
  return s;
}

const char *clattn_decode_kernels(clattn_context *ctx, const clattn_decode_params *params) {
  static _Thread_local char text[192];
  clattn_clear_error();
  if (!ctx || !params) {
    clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is NULL", ctx ? "params" : "ctx");
    return NULL;
  }
  plan pl;
  if (clattn_decode_plan(ctx, params, &pl) != CLATTN_SUCCESS) return NULL;
  const char *form = pl.serial ? "serial (a work-item per split, whole token rows)"
                     : !pl.mma ? (pl.pr.kv_q ? "portable, quantized rows" : "portable")
                     : pl.tokens ? "tensor cores, token rows"
                     : pl.small  ? "tensor cores, wide groups (one per unit)"
                                 : "tensor cores";
  /* the tensor-core form emulated, or the portable form's halves or K a tile ahead (one at most) */
  const char *detail = pl.emulate ? " (emulated)" : pl.roles ? ", score / value halves" : pl.kpre ? ", K a tile ahead" : "";
  if (pl.S <= 1)
    snprintf(text, sizeof text, "%s%s, 1 split: one launch", form, detail);
  else
    snprintf(text, sizeof text, "%s%s, %d %s: %s", form, detail, pl.S, pl.stream ? "parts of equal spans" : "splits",
             pl.merge_last > 1 ? "one launch (the last work-group merges; tickets by atom_max)"
             : pl.merge_last   ? "one launch (the last work-group merges)"
                               : "two launches (partials, merge)");
  return text;
}
