/* Split-K decode attention (cl/decode.cl): validation, planning (variant,
 * rows per group, split count, workspace) and launch. The planner that sizes
 * the workspace is the code that launches. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct plan {
  clattn_decode_problem pr; /* the validated call */
  int rows, RB, nrb; /* query rows per KV head, rows per group, row blocks */
  int WG, S, chunk;
  bool aligned, lane_keys, kstage;
  bool mma, emulate; /* the tensor-core form (cl/decode_mma.clh); its PTX emulated (tests) */
  int nblk;          /* its 16-key blocks per warp in flight */
  int stages;        /* its ring of blocks per warp for quantized rows (0: none) */
  int tokens;        /* its token-row form: KV heads per group, a warp each (0: a group per head) */
  bool whole;        /* token rows: the group's heads are all of a token's, tokens back to back */
  bool rows32;       /* 16 rows of K, V (and their scale-shift words) span < 2^31 elements */
  bool stream;       /* token rows: spans of chunk keys over all (sequence, row block) pairs' blocks */
  int64_t blocks, P; /* stream: those 16-key blocks, spans (a work-group per span and head group) */
  bool merge_last;   /* splits merged in the partial kernel by each row block's last work-group */
  bool small;        /* tensor cores, float K/V, a grid of few groups: wider groups, one per unit */
  bool serial;       /* the serial form (cl/decode_serial.clh): a work-item per group, every KV head */
  size_t part_o_elems, lse_offset_bytes, ticket_offset_bytes, ws_bytes;
} plan;

static int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Width in elements (words for packed dtypes) of one K/V row. */
static int64_t row_width(const clattn_decode_problem *pr) {
  if (pr->kv_q == 1) return pr->kv_groups + pr->D / 8;
  if (pr->kv_q == 2) return pr->D / 4;
  return pr->D;
}

/* Bytes of t's buffer (0 if it cannot be asked). */
static size_t buffer_bytes(const clattn_tensor *t) {
  size_t n = 0;
  if (!t->buf || clGetMemObjectInfo(t->buf, CL_MEM_SIZE, sizeof n, &n, NULL) != CL_SUCCESS) return 0;
  return n;
}

/* The largest key stride (stride[1]) of K, V and, fp8, their scale-shift
 * words: the kernels hold 16 keys' row offsets in 32 bits where it is small. */
static int64_t max_key_stride(const clattn_decode_params *p, int kv_q) {
  const clattn_tensor *ts[4] = {&p->k, &p->v, &p->maybe_k_scale_shift, &p->maybe_v_scale_shift};
  int64_t m = 0;
  for (int i = 0; i < (kv_q == 2 ? 4 : 2); i++)
    if (ts[i]->stride[1] > m) m = ts[i]->stride[1];
  return m;
}

/* Every row of t starts at a multiple of `bytes` (offset and outer strides). */
static bool aligned_to(const clattn_tensor *t, size_t bytes) {
  size_t es = clattn_dtype_size(t->dtype);
  if (t->offset % bytes) return false;
  for (int i = 0; i < 3; i++)
    if ((t->stride[i] * es) % bytes) return false;
  return true;
}

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

/* Quantized rows through a ring of blocks in local memory (cl/decode_mma.clh,
 * STAGES): as many blocks per warp as the tuning asks and the local memory
 * holds, at least 2; int4 rows of one group only. Blocks must not straddle pages, and an int4 row is
 * copied in aligned 16-byte chunks that may reach 12 bytes past it: its
 * buffers must end on a 16-byte boundary. */
static void plan_stages(const clattn_context *ctx, const clattn_decode_params *p, plan *pl) {
  pl->stages = 0;
  const int want = pl->pr.kv_q == 1 ? ctx->tuning.decode_mma_int4_stages : ctx->tuning.decode_mma_fp8_stages;
  if (!pl->pr.kv_q || want < 2) return;
  if (pl->pr.kv_q == 1 && pl->pr.kv_groups > 1) return; /* read straight from global memory */
  if (pl->pr.paged && pl->pr.page_size % 16) return;
  if (pl->pr.kv_q == 1) {
    const size_t kb = buffer_bytes(&p->k), vb = buffer_bytes(&p->v);
    if (kb == 0 || kb % 16 || vb == 0 || vb % 16) return;
  }
  /* a block's row offsets are 32-bit byte counts in the kernel */
  if (max_key_stride(p, pl->pr.kv_q) >= ((int64_t)1 << 25)) return;
  const size_t chunks = pl->pr.kv_q == 1 ? (size_t)(4 * (pl->pr.kv_groups + pl->pr.D / 8) + 27) / 16 : (size_t)pl->pr.D / 16;
  const size_t slot = (2 * 16 * 4 * chunks + (pl->pr.kv_q == 2 ? 32 : 0) + 4) * 4, nw = (size_t)pl->WG / 32;
  const size_t other = (size_t)pl->RB * pl->pr.D * 4 + (3 * nw + 3) * pl->RB * 4 + (pl->emulate ? 64 * (size_t)pl->WG : 0) + 256;
  int n = want < 6 ? want : 6;
  while (n >= 2 && nw * n * slot + other > ctx->profile.local_mem_bytes) n--;
  if (n >= 2) {
    pl->stages = n;
    pl->nblk = 1;
  }
}

/* Work-groups along the KV heads of a row block: one per head, or per group
 * of `tokens` heads. */
static int head_groups(const plan *pl) {
  return pl->serial ? 1 : pl->tokens ? pl->pr.Hkv / pl->tokens : pl->pr.Hkv;
}

/* A token's rows of its KV heads side by side, tokens 16-byte aligned. */
static bool tokens_layout(const clattn_tensor *t, int64_t rw) {
  return t->offset % 16 == 0 && t->stride[0] % 4 == 0 && t->stride[1] % 4 == 0 && t->stride[2] == rw;
}
/* Whether a group of n heads, a warp each, with a ring of two blocks of
 * token spans staged pad words per token, fits the device. */
static bool tokens_fit(const clattn_context *ctx, const plan *pl, int64_t n, int64_t pad) {
  const size_t ring = 2 * (32 * (size_t)pad + 4) * 4 + (pl->emulate ? 64 * 32 * (size_t)n : 0) + 256;
  return (size_t)n * 32 <= ctx->profile.max_work_group_size && ring <= ctx->profile.local_mem_bytes;
}
/* Token rows (cl/decode_mma.clh, TOKENS): int4 K/V whose token's rows of a
 * group of heads are one span of whole 16-byte chunks (rows side by side,
 * 16-byte aligned tokens and pages; K and V with one token stride, 16 of
 * which fit in 31 bits), blocks inside one page. Where the tuning asks and
 * tokens lie back to back, one group of all Hkv heads, the blocks staged
 * as they lie (whole); else the most heads per group the tuning allows that
 * divide Hkv, with rows padded in local memory. */
static void plan_tokens(const clattn_context *ctx, const clattn_decode_params *p, plan *pl) {
  pl->tokens = 0;
  pl->whole = false;
  const int64_t rw = row_width(&pl->pr);
  if (pl->pr.kv_q != 1 || pl->stages || (pl->pr.paged && pl->pr.page_size % 16) ||
      !tokens_layout(&p->k, rw) || !tokens_layout(&p->v, rw) || p->k.stride[1] != p->v.stride[1] ||
      max_key_stride(p, pl->pr.kv_q) >= ((int64_t)1 << 26) || ctx->tuning.decode_mma_int4_heads < 2)
    return;
  /* whole: unpadded, the quads' fragment reads of tokens all words apart
   * share banks gcd(all, 32) / 4 ways; at most 2 (all % 16 != 0) is taken
   * (H200, B=64 ctx=32768, 8 heads: int4's 2 ways 5% faster than padded
   * rows, int4g2's 4 ways even, int4g4's 8 ways 10% slower) */
  const int64_t all = pl->pr.Hkv * rw;
  if (ctx->tuning.decode_mma_int4_whole && pl->pr.Hkv >= 2 && p->k.stride[1] == all && all % 16 != 0 &&
      tokens_fit(ctx, pl, pl->pr.Hkv, all)) { /* (all % 4 == 0: the token stride's, checked above) */
    pl->whole = true;
    pl->tokens = pl->pr.Hkv;
  }
  for (int n = ctx->tuning.decode_mma_int4_heads; n >= 2 && !pl->tokens; n /= 2) {
    const int64_t seg = n * rw, pad = seg + (12 - seg % 8) % 8; /* TPAD */
    if (pl->pr.Hkv % n == 0 && seg % 4 == 0 && tokens_fit(ctx, pl, n, pad)) pl->tokens = n;
  }
  if (pl->tokens) {
    pl->WG = 32 * pl->tokens;
    pl->nblk = 1;
  }
}

/* Stream spans (token rows, split count chosen): the 16-key blocks of the
 * (sequence, row block) pairs laid end to end and cut into equal spans, as
 * many as the device runs at once (slots: per group of heads, whose
 * work-groups take the same spans, reading their token rows together), so
 * every SM gets the same work where equal splits of each pair leave slots
 * idle (H200, int4, B=40 / 50: 3.6% / 1.6% faster; B=64 leaves 16 of 528
 * idle, even). A span may end one pair and start the next; each piece is a
 * part of its pair, merged like splits (pl->S: the most parts a pair has).
 * Only where a span is shorter than a pair: otherwise a work-group per pair
 * and group of heads fills the device already. */
static bool plan_stream(plan *pl, int64_t pairs, int64_t slots, int min_keys, int max_parts) {
  const int64_t nb = div_up(pl->pr.kv_cap, 16), total = pairs * nb;
  if (pairs < 1 || nb < 2 || max_parts < 2 || pl->pr.kv_cap >= (1 << 30) || slots < 1) return false;
  int64_t wb = div_up(total, slots);
  if (wb < div_up(min_keys, 16)) wb = div_up(min_keys, 16);
  if (wb < div_up(nb, max_parts - 1)) wb = div_up(nb, max_parts - 1); /* parts per pair <= max */
  if (wb >= nb) return false;
  int64_t parts = 0; /* the most spans one pair meets */
  for (int64_t g = 0; g < pairs; g++) {
    const int64_t n = ((g + 1) * nb - 1) / wb - g * nb / wb + 1;
    if (n > parts) parts = n;
  }
  pl->stream = true;
  pl->blocks = total;
  pl->P = div_up(total, wb);
  pl->chunk = (int)(16 * wb);
  pl->S = (int)parts;
  return true;
}

static clattn_status plan_decode(const clattn_context *ctx, const clattn_decode_params *p, plan *pl) {
  memset(pl, 0, sizeof *pl);
  CLATTN_TRY(clattn_decode_validate(ctx, p, &pl->pr));

  /* float K/V rows that are 16-byte aligned get wide loads */
  pl->aligned = pl->pr.kv_q == 0 && aligned_to(&p->k, 16) && aligned_to(&p->v, 16);

  /* rows per group and work-group size */
  const clattn_tuning *t = &ctx->tuning;
  pl->rows = pl->pr.G * pl->pr.Mq;
  pl->RB = pl->rows < 1 ? 1 : clattn_pow2_at_least(pl->rows < 8 ? pl->rows : 8);
  pl->nrb = (int)div_up(pl->rows > 0 ? pl->rows : 1, pl->RB);
  pl->WG = t->decode_wg;
  while (pl->WG < pl->pr.D / 8) pl->WG *= 2; /* one row of chunks must fit */
  /* whole warps / wavefronts: the native lane paths use every lane */
  while (ctx->profile.simd_width > 1 && pl->WG % (int)ctx->profile.simd_width) pl->WG *= 2;
  if ((size_t)pl->WG > ctx->profile.max_work_group_size)
    return clattn_fail(CLATTN_UNSUPPORTED, "decode needs %d work-items per group; the device allows %zu",
                       pl->WG, ctx->profile.max_work_group_size);

  /* a key's lanes read it together where the lane sum is cheap (see cl/lanes.clh) */
  const int nc = pl->pr.D / 8;
  pl->lane_keys = t->decode_lane_keys && (nc & (nc - 1)) == 0 && pl->WG % nc == 0;

  /* K tiles staged in local memory (aligned float K, or quantized K) when the
   * tile fits beside the rest; the lane-per-chunk pass reads K coalesced already */
  const size_t es = clattn_dtype_size(pl->pr.kvdt);
  const size_t kstage_bytes = pl->pr.kv_q ? (size_t)pl->WG * (row_width(&pl->pr) | 1) * 4
                                       : (size_t)pl->WG * (pl->pr.D * es / 16 + 1) * 16;
  const size_t other_bytes = (size_t)pl->RB * (pl->pr.D + 2 * pl->WG + 3 + pl->pr.kv_groups) * 4;
  const bool want = pl->pr.kv_q ? t->decode_kstage_quant : (t->decode_kstage && pl->aligned);
  pl->kstage = want && !pl->lane_keys && kstage_bytes + other_bytes <= ctx->profile.local_mem_bytes;

  /* The tensor-core form where it applies (D a multiple of 8, fp8 16, padded
   * to 64 in registers; f16/bf16 q with 16-byte aligned K/V rows of its
   * dtype, or f16 q with quantized rows); its PTX is real on NVIDIA and
   * emulated where a test forces it elsewhere (CLATTN_FORCE_MMA=1). Blocks
   * of 8 or 16 rows. Staged and token rows take D a multiple of 64. */
  const int forced = clattn_forced_path();
  const bool ptx = clattn_nv_ptx_active(ctx);
  const bool mma_float = pl->pr.kv_q == 0 && pl->pr.qdt == pl->pr.kvdt && pl->pr.kvdt != CLATTN_F32 && pl->aligned;
  /* quantized rows with f16 q: int4 (several groups: dequantized in
   * registers), fp8 rows 16-byte aligned */
  const bool mma_quant = pl->pr.qdt == CLATTN_F16 &&
                         (pl->pr.kv_q == 1 || (pl->pr.kv_q == 2 && aligned_to(&p->k, 16) && aligned_to(&p->v, 16)));
  if ((forced == 2 || (forced == 0 && t->decode_mma && ptx)) && (mma_float || mma_quant) &&
      pl->pr.D % (pl->pr.kv_q == 2 ? 16 : 8) == 0) {
    pl->mma = true;
    /* 16-key blocks in flight per warp: enough bytes to cover the latency */
    pl->nblk = t->decode_mma_blocks ? t->decode_mma_blocks : 1;
    pl->emulate = !ptx;
    pl->lane_keys = pl->kstage = false;
    pl->RB = pl->rows <= 8 ? 8 : 16;
    pl->nrb = (int)div_up(pl->rows > 0 ? pl->rows : 1, pl->RB);
    const int qwg = pl->pr.kv_q == 1 ? t->decode_mma_int4_wg
                    : pl->pr.kv_q == 2 ? t->decode_mma_fp8_wg
                                       : t->decode_mma_wg;
    if (qwg >= 32 && qwg % 32 == 0) pl->WG = qwg; /* whole warps; the lookup kept it within the device */
    if (pl->pr.D % 64 == 0) {
      plan_stages(ctx, p, pl);
      plan_tokens(ctx, p, pl);
    }
    /* Few (sequence, KV head, row block) groups (B = 1: 8 for 132 SMs): 8
     * warps per group, one group per unit, split after two iterations of
     * keys (H200, B=1 ctx=16384: 56 against 68 us with 4 warps, 2 per SM) */
    const int64_t few = (int64_t)pl->pr.B * head_groups(pl) * pl->nrb;
    if (!pl->pr.kv_q && t->decode_mma_small_wg >= 32 && few * 8 <= (int64_t)ctx->profile.compute_units &&
        (size_t)t->decode_mma_small_wg <= ctx->profile.max_work_group_size) {
      pl->small = true;
      pl->WG = t->decode_mma_small_wg;
    }
    pl->rows32 = max_key_stride(p, pl->pr.kv_q) < ((int64_t)1 << 27); /* strides are >= 0 (checked) */
  }

  /* The serial form where the tuning asks for it (devices that run a group
   * on one thread; not where a test forces the work-group kernel,
   * clattn_force_path(1)) and its state fits the local memory: q and the
   * accumulators of every KV head's rows, and a tile of 16 keys' scores. */
  const size_t serial_bytes = (size_t)pl->pr.Hkv * pl->RB * (2 * (size_t)pl->pr.D + 16 + 2) * 4;
  if (!pl->mma && forced == 0 && t->decode_serial && serial_bytes <= ctx->profile.local_mem_bytes) {
    pl->serial = true;
    pl->WG = 1;
    pl->lane_keys = pl->kstage = false;
  }

  /* split count: fill the compute units unless fixed */
  const int64_t groups = (int64_t)pl->pr.B * head_groups(pl) * pl->nrb;
  /* token rows: the tuning's groups per unit are of int4_heads heads; the
   * same warps per unit for groups of other sizes */
  const int tok_per_cu = pl->tokens ? t->decode_mma_int4_groups_per_cu * t->decode_mma_int4_heads / pl->tokens : 0;
  const int per_cu = pl->small ? 1
                     : pl->tokens && t->decode_mma_int4_groups_per_cu ? (tok_per_cu > 1 ? tok_per_cu : 1)
                     : pl->mma && t->decode_mma_splits_per_cu ? t->decode_mma_splits_per_cu
                                                              : t->decode_splits_per_cu;
  const int64_t target = (int64_t)ctx->profile.compute_units * per_cu;
  const int min_keys = pl->small ? 2 * pl->WG
                       : pl->mma && t->decode_mma_min_keys ? t->decode_mma_min_keys : t->decode_min_keys_per_split;
  if (p->num_splits > 0) {
    pl->S = p->num_splits;
    pl->chunk = (int)div_up(pl->pr.kv_cap > 0 ? pl->pr.kv_cap : 1, pl->S);
    /* the tensor-core form's 16-key blocks never straddle two splits' (or pages') keys */
    if (pl->mma) pl->chunk = (int)(div_up(pl->chunk, 16) * 16);
  } else if (!(pl->tokens && plan_stream(pl, (int64_t)pl->pr.B * pl->nrb, target / head_groups(pl), min_keys,
                                          t->decode_max_splits))) {
    /* token rows: as many groups as fit the compute units at once, not more */
    int64_t s = pl->tokens ? target / (groups > 0 ? groups : 1) : div_up(target, groups > 0 ? groups : 1);
    int64_t by_len = div_up(pl->pr.kv_cap, min_keys > 0 ? min_keys : 1);
    if (s > by_len) s = by_len;
    if (s > t->decode_max_splits) s = t->decode_max_splits;
    if (s < 1) s = 1;
    int64_t chunk = div_up(div_up(pl->pr.kv_cap > 0 ? pl->pr.kv_cap : 1, s), pl->WG) * pl->WG;
    pl->chunk = (int)chunk;
    pl->S = (int)div_up(pl->pr.kv_cap > 0 ? pl->pr.kv_cap : 1, chunk);
  }
  /* One launch where the device has the tickets' atomics and the splits are
   * few (the tuning's most: one work-group's merge of many splits costs more
   * than a merge kernel), the last of a row block's work-groups merges them
   * (its local scratch holds RB x S weights: S <= D). Token rows' groups
   * span several heads: two launches. */
  pl->merge_last = pl->S > 1 && pl->S <= t->decode_merge_last && ctx->profile.has_int64_atomics &&
                   !pl->tokens && !pl->serial && pl->S <= pl->pr.D;
  if (pl->S > 1) {
    /* partials: o [S, B, Mq, Hq, D] then lse [S, B, Hq, Mq], f32; one launch:
     * then a ticket (u64) per (sequence, row block of a KV head), from the
     * first multiple of 8 bytes (the workspace's offset is one of 4) */
    uint64_t rows, o_elems, bytes;
    if (__builtin_mul_overflow((uint64_t)pl->S * (uint64_t)pl->pr.B, (uint64_t)pl->pr.Mq * (uint64_t)pl->pr.Hq, &rows) ||
        __builtin_mul_overflow(rows, (uint64_t)pl->pr.D, &o_elems) || o_elems > ((uint64_t)1 << 60) ||
        (bytes = (o_elems * 4 + 255) / 256 * 256 + rows * 4) > ctx->profile.max_alloc_bytes)
      return clattn_fail(CLATTN_UNSUPPORTED,
                         "num_splits: %d split-K partials of %d x %d x %d rows of head dim %d need "
                         "more workspace than one buffer of the device holds (%llu bytes)",
                         pl->S, pl->pr.B, pl->pr.Mq, pl->pr.Hq, pl->pr.D,
                         (unsigned long long)ctx->profile.max_alloc_bytes);
    pl->part_o_elems = (size_t)o_elems;
    pl->lse_offset_bytes = (pl->part_o_elems * 4 + 255) / 256 * 256;
    pl->ticket_offset_bytes = (size_t)bytes;
    const uint64_t tickets = 8 * (uint64_t)pl->pr.B * head_groups(pl) * pl->nrb + 8;
    if (pl->merge_last && bytes + tickets <= ctx->profile.max_alloc_bytes)
      bytes += tickets;
    else
      pl->merge_last = false;
    pl->ws_bytes = (size_t)bytes;
  }
  return CLATTN_SUCCESS;
}

static void decode_options(const plan *pl, bool split, char *buf, size_t size) {
  char page[64] = ""; /* a paged kernel is built for its page size (no runtime division) */
  if (pl->pr.paged) snprintf(page, sizeof page, " -DKV_PAGE_SIZE=%d", pl->pr.page_size);
  if (pl->serial) /* built for its KV head count */
    snprintf(page + strlen(page), sizeof page - strlen(page), " -DSERIAL=1 -DHKV=%d", pl->pr.Hkv);
  snprintf(buf, size,
           "-DQ_DT=%s -DKV_DT=%s -DO_DT=%s -DD=%d -DWG=%d -DRB=%d -DKV_Q=%d -DKV_GROUPS=%d "
           "-DFP8_FNUZ=%d -DALIGNED=%d -DPAGED=%d -DVARLEN=%d -DCAUSAL=%d -DHAS_BIAS=%d -DSPLIT=%d "
           "-DLANE_KEYS=%d -DKSTAGE=%d -DMMA=%d -DNBLK=%d -DSTAGES=%d -DTOKENS=%d -DTWHOLE=%d "
           "-DSTREAM=%d -DROWS32=%d -DMERGE_LAST=%d%s%s",
           clattn_dtype_cl(pl->pr.qdt), clattn_dtype_cl(pl->pr.kv_q ? CLATTN_F32 : pl->pr.kvdt),
           clattn_dtype_cl(pl->pr.odt), pl->pr.D, pl->WG, pl->RB, pl->pr.kv_q, pl->pr.kv_groups, pl->pr.fnuz,
           pl->aligned, pl->pr.paged, pl->pr.varlen, pl->pr.causal, pl->pr.bias, split, pl->lane_keys, pl->kstage,
           pl->mma, pl->nblk > 0 ? pl->nblk : 1, pl->stages, pl->tokens, pl->whole, pl->stream, pl->rows32,
           pl->merge_last, pl->emulate ? " -DMMA_EMULATE=1 -cl-opt-disable" : "", page);
}

clattn_status clattn_decode_workspace_size(clattn_context *ctx, const clattn_decode_params *params,
                                           size_t *bytes, int *num_splits) {
  clattn_clear_error();
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  plan pl;
  CLATTN_TRY(plan_decode(ctx, params, &pl));
  if (bytes) *bytes = pl.ws_bytes;
  if (num_splits) *num_splits = pl.S;
  return CLATTN_SUCCESS;
}

clattn_status clattn_decode_check(clattn_context *ctx, const clattn_decode_params *params) {
  plan pl;
  CLATTN_TRY(plan_decode(ctx, params, &pl));
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
  CLATTN_TRY(plan_decode(ctx, params, &pl));
  decode_options(&pl, pl.S > 1, buf, size);
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
  decode_options(pl, split, opts, sizeof opts);
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
  clattn_status s = clattn_args_end(&a, name);
  if (s == CLATTN_SUCCESS) {
    size_t local[3] = {(size_t)pl->WG, 1, 1};
    size_t global[3] = {(size_t)pl->WG * pl->S, (size_t)head_groups(pl) * pl->nrb, (size_t)pl->pr.B};
    if (pl->stream) global[0] = (size_t)pl->WG * pl->P * head_groups(pl), global[1] = global[2] = 1;
    s = clattn_launch(ctx, queue, k, name, 3, global, local, num_wait, wait_list, event);
  }
  clReleaseKernel(k);
  return s;
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
  CLATTN_TRY(plan_decode(ctx, p, &pl));
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
  static _Thread_local char text[160];
  clattn_clear_error();
  if (!ctx || !params) {
    clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is NULL", ctx ? "params" : "ctx");
    return NULL;
  }
  plan pl;
  if (plan_decode(ctx, params, &pl) != CLATTN_SUCCESS) return NULL;
  const char *form = pl.serial ? "serial (a work-item per split, whole token rows)"
                     : !pl.mma ? "portable"
                     : pl.tokens ? "tensor cores, token rows"
                                 : "tensor cores";
  const char *emu = pl.emulate ? " (emulated)" : "";
  if (pl.S <= 1)
    snprintf(text, sizeof text, "%s%s, 1 split: one launch", form, emu);
  else
    snprintf(text, sizeof text, "%s%s, %d %s: %s", form, emu, pl.S, pl.stream ? "parts of equal spans" : "splits",
             pl.merge_last ? "one launch (the last work-group merges)" : "two launches (partials, merge)");
  return text;
}

/* ------------------------------------------------------------------ variants */

void clattn_decode_variants(clattn_variant_fn fn, void *priv) {
  static const clattn_dtype fl[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  plan base;
  memset(&base, 0, sizeof base);
  base.pr.qdt = base.pr.kvdt = base.pr.odt = CLATTN_F16;
  base.pr.D = 128;
  base.WG = 128;
  base.RB = 4;
  base.pr.kv_groups = 1;
  char opts[512];
#define EMIT(pl, split)                                                                      \
  do {                                                                                       \
    decode_options(&(pl), (split), opts, sizeof opts);                                        \
    fn(priv, "decode.cl", opts);                                                             \
  } while (0)
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      for (int al = 0; al < 2; al++) {
        plan pl = base;
        pl.pr.qdt = pl.pr.odt = fl[i];
        pl.pr.kvdt = fl[j];
        pl.aligned = al;
        EMIT(pl, i == j);
        pl.kstage = al && fl[j] != CLATTN_F32; /* aligned rows; an f32 tile exceeds 64 KiB */
        EMIT(pl, i != j);
      }
  static const int dims[] = {8, 64, 80, 96, 128, 256};
  static const int rbs[] = {1, 2, 8};
  static const int wgs[] = {32, 64, 256};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    plan pl = base;
    pl.pr.D = dims[i];
    EMIT(pl, 1);
  }
  for (size_t i = 0; i < 3; i++) {
    plan pl = base;
    pl.RB = rbs[i];
    pl.WG = wgs[i];
    EMIT(pl, 0);
  }
  for (int flags = 1; flags < 32; flags++) {
    plan pl = base;
    pl.pr.page_size = (flags & 1) ? 16 + 32 * (flags & 2) : 0; /* 16 and 80 */
    pl.lane_keys = (flags >> 4) & 1;
    pl.pr.paged = flags & 1;
    pl.pr.varlen = (flags >> 1) & 1;
    pl.pr.causal = (flags >> 2) & 1;
    pl.pr.bias = (flags >> 3) & 1;
    EMIT(pl, flags & 1);
    EMIT(pl, !(flags & 1));
  }
  for (int g = 1; g <= 8; g *= 2) {
    plan pl = base;
    pl.pr.kv_q = 1;
    pl.pr.kv_groups = g;
    pl.lane_keys = g >= 4;
    pl.pr.paged = g == 2;
    pl.pr.page_size = pl.pr.paged ? 48 : 0;
    EMIT(pl, g & 1);
    pl.lane_keys = 0;
    pl.kstage = 1;
    EMIT(pl, g & 2);
  }
  for (int fnuz = 0; fnuz < 2; fnuz++) {
    plan pl = base;
    pl.pr.kv_q = 2;
    pl.pr.fnuz = fnuz;
    pl.lane_keys = !fnuz;
    pl.pr.varlen = fnuz;
    EMIT(pl, 1);
    pl.lane_keys = 0;
    pl.kstage = 1;
    EMIT(pl, fnuz);
  }
  /* the tensor-core form, its PTX emulated (portable OpenCL) */
  for (int f = 0; f < 4; f++) {
    plan pl = base;
    pl.mma = pl.emulate = pl.aligned = true;
    pl.pr.qdt = pl.pr.kvdt = (f & 1) ? CLATTN_BF16 : CLATTN_F16;
    pl.pr.odt = (f & 2) ? CLATTN_F32 : pl.pr.qdt;
    pl.pr.D = f == 3 ? 256 : 64 << (f & 1);
    pl.RB = f == 2 ? 16 : 8;
    pl.pr.paged = pl.pr.causal = f == 1;
    pl.pr.page_size = pl.pr.paged ? 16 : 0;
    pl.pr.varlen = pl.pr.bias = f == 2;
    EMIT(pl, f != 3);
  }
  for (int f = 0; f < 6; f++) { /* the serial form: f16, bf16 D=80 paged causal, int4 g2, fp8 varlen bias */
    plan pl = base;
    pl.serial = true;
    pl.WG = 1;
    pl.pr.Hkv = f == 1 ? 1 : 8;
    pl.pr.kvdt = pl.pr.qdt = pl.pr.odt = f == 1 ? CLATTN_BF16 : CLATTN_F16;
    pl.pr.D = f == 1 ? 80 : 128;
    pl.pr.paged = pl.pr.causal = f == 1;
    pl.pr.page_size = pl.pr.paged ? 16 : 0;
    pl.pr.kv_q = f == 2 ? 1 : f == 3 ? 2 : 0;
    pl.pr.kv_groups = f == 2 ? 2 : 1;
    pl.pr.varlen = pl.pr.bias = f == 3;
    pl.pr.kvdt = f == 4 ? CLATTN_F32 : pl.pr.kvdt;
    pl.pr.D = f == 5 ? 8 : pl.pr.D;
    EMIT(pl, f != 4);
  }
  for (int f = 0; f < 3; f++) { /* the one-launch merge: portable (varlen), tensor cores f16 and int4 */
    plan pl = base;
    pl.merge_last = true;
    pl.pr.varlen = f == 0;
    pl.mma = pl.emulate = pl.aligned = f > 0;
    pl.RB = f > 0 ? 8 : pl.RB;
    pl.pr.kv_q = f == 2;
    EMIT(pl, 1);
  }
  for (int q = 1; q <= 3; q++) { /* int4, fp8, fp8 fnuz */
    plan pl = base;
    pl.mma = pl.emulate = true;
    pl.pr.kv_q = q == 1 ? 1 : 2;
    pl.pr.fnuz = q == 3;
    pl.nblk = q == 1 ? 1 : 2;
    pl.pr.paged = pl.pr.causal = q == 2;
    pl.pr.page_size = pl.pr.paged ? 16 : 0;
    pl.pr.bias = q == 3;
    pl.RB = q == 3 ? 16 : 8;
    EMIT(pl, q != 2);
    pl.stages = q == 1 ? 4 : 2; /* rows through the ring (as deep as the local memory allows) */
    pl.nblk = 1;
    EMIT(pl, q == 2);
  }
  for (int g = 1; g <= 4; g *= 4) { /* int4 token rows: 4 heads of 68-byte rows, 8 of 80-byte rows */
    plan pl = base;
    pl.mma = pl.emulate = true;
    pl.pr.kv_q = 1;
    pl.pr.kv_groups = g;
    pl.nblk = 1;
    pl.tokens = g == 1 ? 4 : 8;
    pl.WG = 32 * pl.tokens;
    pl.RB = g == 1 ? 8 : 16;
    pl.pr.paged = pl.pr.causal = g == 4;
    pl.pr.page_size = pl.pr.paged ? 16 : 0;
    EMIT(pl, g == 1);
    pl.stream = true; /* spans over every sequence's blocks (split parts) */
    EMIT(pl, 1);
    pl.whole = true; /* one group of all heads, blocks staged as they lie */
    pl.stream = g == 1;
    EMIT(pl, 1);
  }
#undef EMIT
}
