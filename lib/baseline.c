/* The unfused reference of decode attention on the GPU (cl/baseline.cl):
 * CLBlast's batched SGEMM for S = scale Q K^T and O = P V around a softmax
 * kernel. It is the baseline `clattn run decode --baseline` measures the
 * fused kernels against, and the check for shapes too large for the CPU
 * reference, so it favours plainness over speed: everything is f32. */
#include "internal.h"

#include <clblast_c.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CLBlast passes batch offsets to its kernels as int: every offset into a
 * staged buffer must stay below 2^31 elements. Staged K/V slabs are kept
 * under 2^28 floats (1 GiB) so three of them fit any device's allocation. */
int64_t clattn_baseline_stage_limit = (int64_t)1 << 28;
#define INT_LIMIT ((int64_t)INT32_MAX)
#define SOFTMAX_WG 128 /* at most: a smaller device takes the power of two it allows */
#define STAGE_WG 256

/* The largest power of two up to `want` the device runs in one work-group. */
static size_t group_size(const clattn_context *ctx, size_t want) {
  size_t n = want;
  while (n > 1 && n > ctx->profile.max_work_group_size) n /= 2;
  return n;
}

typedef struct bplan {
  int B, Mq, Mp, Hq, Hkv, G, D, N, total_q;
  bool varlen, causal, bias;
  float scale;
  int chunk;        /* sequences per GEMM round */
  bool stage_kv;    /* K/V copied to f32 (not f32, or offsets too large for CLBlast) */
} bplan;

static clattn_status validate(const clattn_context *ctx, const clattn_decode_params *p, bplan *pl) {
  memset(pl, 0, sizeof *pl);
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  if (clattn_present(&p->maybe_block_table))
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "maybe_block_table: the CLBlast reference takes dense K/V only");
  if (p->k.buf && ((unsigned)p->k.dtype >= 32 || !(CLATTN_FLOAT_DTYPES & CLATTN_DT(p->k.dtype))))
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "k.dtype %s: the CLBlast reference takes f32, f16 or bf16 K/V only",
                       clattn_dtype_name(p->k.dtype));
  clattn_decode_problem pr;
  CLATTN_TRY(clattn_decode_validate(ctx, p, &pr));
  pl->varlen = pr.varlen;
  pl->causal = pr.causal;
  pl->bias = pr.bias;
  pl->B = pr.B;
  pl->Mq = pl->Mp = pr.Mq;
  pl->Hq = pr.Hq;
  pl->Hkv = pr.Hkv;
  pl->G = pr.G;
  pl->D = pr.D;
  pl->N = pr.kv_cap;
  pl->total_q = pr.total_q;
  pl->scale = pr.scale;

  /* K/V are read in place when CLBlast can address them, else staged. */
  const int64_t per_seq = (int64_t)pl->N * pl->Hkv * pl->D;
  const clattn_tensor *kv[2] = {&p->k, &p->v};
  for (int i = 0; i < 2; i++) {
    const clattn_tensor *t = kv[i];
    const int64_t end = clattn_elem_offset(t) + (int64_t)(clattn_tensor_extent_bytes(t) / 4);
    if (t->dtype != CLATTN_F32 || t->stride[3] != 1 || end > INT_LIMIT || t->stride[1] > INT_LIMIT)
      pl->stage_kv = true;
  }
  for (int i = 0; i < 3; i++) /* one layout serves both GEMMs */
    if (p->v.stride[i] != p->k.stride[i]) pl->stage_kv = true;
  if (per_seq > INT_LIMIT)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "k: one sequence holds %lld K values, more than the 2^31 CLBlast addresses",
                       (long long)per_seq);
  /* sequences per round: the staged K/V and the scores each stay under the limit */
  const int64_t scores_per_seq = (int64_t)pl->Hq * pl->Mp * pl->N;
  int64_t biggest = scores_per_seq > per_seq ? scores_per_seq : per_seq;
  if (biggest < 1) biggest = 1;
  int64_t chunk = clattn_baseline_stage_limit / biggest;
  if (chunk < 1) chunk = 1;
  if (chunk > pl->B) chunk = pl->B;
  pl->chunk = (int)chunk;
  if ((int64_t)pl->B * pl->Mp * pl->Hq * pl->D > INT_LIMIT)
    return clattn_fail(CLATTN_UNSUPPORTED, "o: more than 2^31 output values");
  return CLATTN_SUCCESS;
}

static clattn_status clblast_fail(CLBlastStatusCode st, const char *what) {
  return clattn_fail(st == CLBlastTempBufferAllocFailure ? CLATTN_OUT_OF_MEMORY : CLATTN_OPENCL_ERROR,
                     "CLBlastSgemmBatched(%s) failed: CLBlast status %d%s", what, (int)st,
                     st == CLBlastOpenCLBuildProgramFailure ? " (its kernels did not build)" : "");
}

/* Copies sequences [b0, b0 + nb) of a 4-d tensor to contiguous f32
 * [nb, n1, shape[2], shape[3]]; with q_start, packed varlen queries. */
static clattn_status stage(clattn_context *ctx, cl_command_queue queue, const clattn_tensor *t,
                           int b0, int nb, int n1, const clattn_tensor *q_start, int total_q,
                           cl_mem dst) {
  char opts[96];
  snprintf(opts, sizeof opts, "-DSRC_DT=%s -DVARLEN=%d", clattn_dtype_cl(t->dtype),
           q_start != NULL);
  static const char *name = "clattn_baseline_stage";
  cl_kernel k = NULL;
  CLATTN_TRY(clattn_kernel_get(ctx, "baseline.cl", opts, name, &k));
  clattn_args a = clattn_args_begin(k);
  clattn_arg_tensor(&a, t);
  for (int i = 0; i < 4; i++) clattn_arg_long(&a, t->stride[i]);
  clattn_arg_mem(&a, dst);
  clattn_arg_long(&a, nb);
  clattn_arg_int(&a, n1);
  clattn_arg_int(&a, (int)t->shape[2]);
  clattn_arg_int(&a, (int)t->shape[3]);
  clattn_arg_int(&a, b0);
  clattn_arg_mem(&a, q_start ? q_start->buf : NULL);
  clattn_arg_long(&a, q_start ? clattn_elem_offset(q_start) : 0);
  clattn_arg_int(&a, total_q);
  const int64_t total = (int64_t)nb * n1 * t->shape[2] * t->shape[3];
  int64_t groups = (total + STAGE_WG - 1) / STAGE_WG;
  if (groups > 65536) groups = 65536; /* the kernel strides over the rest */
  size_t local = group_size(ctx, STAGE_WG), global = (size_t)groups * local;
  return clattn_args_launch(ctx, queue, &a, name, 1, &global, &local, 0, NULL, NULL);
}

static clattn_status softmax(clattn_context *ctx, cl_command_queue queue,
                             const clattn_decode_params *p, const bplan *pl, cl_mem scores, int b0,
                             int nb, cl_mem lse) {
  char opts[128];
  const size_t wg = group_size(ctx, SOFTMAX_WG);
  snprintf(opts, sizeof opts, "-DVARLEN=%d -DCAUSAL=%d -DHAS_BIAS=%d -DWG=%zu", pl->varlen,
           pl->causal, pl->bias, wg);
  static const char *name = "clattn_baseline_softmax";
  cl_kernel k = NULL;
  CLATTN_TRY(clattn_kernel_get(ctx, "baseline.cl", opts, name, &k));
  clattn_args a = clattn_args_begin(k);
  clattn_arg_mem(&a, scores);
  clattn_arg_int(&a, pl->N);
  clattn_arg_int(&a, pl->Hq);
  clattn_arg_int(&a, pl->Mp);
  clattn_arg_int(&a, b0);
  clattn_arg_tensor(&a, &p->maybe_kv_len);
  clattn_arg_tensor(&a, &p->maybe_q_start);
  clattn_arg_int(&a, pl->total_q);
  clattn_arg_tensor(&a, &p->maybe_bias);
  for (int i = 0; i < 4; i++) clattn_arg_long(&a, pl->bias ? p->maybe_bias.stride[i] : 0);
  clattn_arg_mem(&a, lse);
  size_t local[3] = {wg, 1, 1};
  size_t global[3] = {wg, (size_t)pl->Hq * pl->Mp, (size_t)nb};
  return clattn_args_launch(ctx, queue, &a, name, 3, global, local, 0, NULL, NULL);
}

/* Batch offsets of the two GEMMs for sequences [b0, b0 + nb). With one
 * query per sequence the G heads sharing a KV head form one GEMM of G rows
 * (their q rows are adjacent); otherwise each head is a GEMM of Mp rows. */
typedef struct gemm_batch {
  size_t n, m;       /* batch count, rows per GEMM */
  size_t q_ld, o_ld; /* row strides of Q and O */
  size_t *q_off, *kv_off, *s_off, *o_off;
  float *alpha, *beta;
} gemm_batch;

static void batch_free(gemm_batch *g) {
  free(g->q_off);
  free(g->kv_off);
  free(g->s_off);
  free(g->o_off);
  free(g->alpha);
  free(g->beta);
}

static clattn_status batch_plan(const bplan *pl, int b0, int nb, int64_t kv_base,
                                int64_t kv_s0, int64_t kv_s2, gemm_batch *g) {
  const bool grouped = pl->Mp == 1;
  g->m = grouped ? (size_t)pl->G : (size_t)pl->Mp;
  g->n = (size_t)nb * (grouped ? pl->Hkv : pl->Hq);
  g->q_ld = grouped ? (size_t)pl->D : (size_t)pl->Hq * pl->D;
  g->o_ld = g->q_ld;
  g->q_off = calloc(g->n, sizeof(size_t));
  g->kv_off = calloc(g->n, sizeof(size_t));
  g->s_off = calloc(g->n, sizeof(size_t));
  g->o_off = calloc(g->n, sizeof(size_t));
  g->alpha = calloc(g->n, sizeof(float));
  g->beta = calloc(g->n, sizeof(float));
  if (!g->q_off || !g->kv_off || !g->s_off || !g->o_off || !g->alpha || !g->beta) {
    batch_free(g);
    return clattn_fail(CLATTN_OUT_OF_MEMORY, "reference decode: batch offsets");
  }
  size_t i = 0;
  for (int bl = 0; bl < nb; bl++) {
    const int64_t b = b0 + bl;
    const int heads = grouped ? pl->Hkv : pl->Hq;
    for (int hh = 0; hh < heads; hh++, i++) {
      const int h = grouped ? hh * pl->G : hh; /* first q head of the GEMM */
      const int hk = h / pl->G;
      /* q and o are [B, Mp, Hq, D]; scores [nb, Hq, Mp, N] */
      g->q_off[i] = (size_t)(((b * pl->Mp) * pl->Hq + h) * pl->D);
      g->o_off[i] = g->q_off[i];
      g->kv_off[i] = (size_t)(kv_base + bl * kv_s0 + hk * kv_s2);
      g->s_off[i] = (size_t)(((int64_t)bl * pl->Hq + h) * pl->Mp * pl->N);
      g->alpha[i] = 1.0f;
      g->beta[i] = 0.0f;
    }
  }
  return CLATTN_SUCCESS;
}

clattn_status clattn_reference_decode(clattn_context *ctx, cl_command_queue queue,
                                      const clattn_decode_params *p, cl_uint num_wait,
                                      const cl_event *wait_list, cl_event *event) {
  clattn_clear_error();
  CLATTN_TRY(clattn_check_enqueue(ctx, queue, num_wait, wait_list));
  bplan pl;
  CLATTN_TRY(validate(ctx, p, &pl));
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  /* CLBlast takes no wait list: order comes from the queue */
  if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return clattn_fail(CLATTN_UNSUPPORTED, "queue: the CLBlast reference needs an in-order queue");

  const size_t q_elems = (size_t)pl.B * pl.Mp * pl.Hq * pl.D;
  const size_t kv_elems = (size_t)pl.chunk * pl.N * pl.Hkv * pl.D;
  const size_t s_elems = (size_t)pl.chunk * pl.Hq * pl.Mp * pl.N;
  const size_t lse_elems = (size_t)pl.B * pl.Hq * pl.Mp;
  cl_mem q32 = NULL, o32 = NULL, lse32 = NULL, scores = NULL, k32 = NULL, v32 = NULL;
  clattn_status s = clattn_temp_buffer(ctx, q_elems * 4, &q32);
  if (s == CLATTN_SUCCESS) s = clattn_temp_buffer(ctx, q_elems * 4, &o32);
  if (s == CLATTN_SUCCESS) s = clattn_temp_buffer(ctx, lse_elems * 4, &lse32);
  if (s == CLATTN_SUCCESS) s = clattn_temp_buffer(ctx, s_elems * 4, &scores);
  if (s == CLATTN_SUCCESS && pl.stage_kv) s = clattn_temp_buffer(ctx, kv_elems * 4, &k32);
  if (s == CLATTN_SUCCESS && pl.stage_kv) s = clattn_temp_buffer(ctx, kv_elems * 4, &v32);

  /* CLBlast takes no wait list: the caller's events gate everything through a barrier */
  if (s == CLATTN_SUCCESS && num_wait) {
    cl_int err = clEnqueueBarrierWithWaitList(queue, num_wait, wait_list, NULL);
    if (err != CL_SUCCESS) s = clattn_fail_cl(err, "clEnqueueBarrierWithWaitList", "wait_list");
  }
  if (s == CLATTN_SUCCESS)
    s = stage(ctx, queue, &p->q, 0, pl.B, pl.Mp, pl.varlen ? &p->maybe_q_start : NULL, pl.total_q,
              q32);

  if (s == CLATTN_SUCCESS) atomic_store(&ctx->ran_clblast, true); /* CLBlast now knows ctx->cl */
  for (int b0 = 0; s == CLATTN_SUCCESS && b0 < pl.B && pl.Mp > 0; b0 += pl.chunk) {
    const int nb = pl.B - b0 < pl.chunk ? pl.B - b0 : pl.chunk;
    cl_mem kb = p->k.buf, vb = p->v.buf;
    int64_t k_base = clattn_elem_offset(&p->k), v_base = clattn_elem_offset(&p->v);
    int64_t kv_s0 = p->k.stride[0], kv_s1 = p->k.stride[1], kv_s2 = p->k.stride[2];
    if (pl.stage_kv) {
      s = stage(ctx, queue, &p->k, b0, nb, pl.N, NULL, 0, k32);
      if (s == CLATTN_SUCCESS) s = stage(ctx, queue, &p->v, b0, nb, pl.N, NULL, 0, v32);
      kb = k32;
      vb = v32;
      k_base = v_base = 0;
      kv_s0 = (int64_t)pl.N * pl.Hkv * pl.D;
      kv_s1 = (int64_t)pl.Hkv * pl.D;
      kv_s2 = pl.D;
    } else {
      /* in place (validate checked that v shares k's strides) */
      k_base += (int64_t)b0 * kv_s0;
      v_base += (int64_t)b0 * kv_s0;
    }
    if (s != CLATTN_SUCCESS) break;

    gemm_batch gk = {0}, gv = {0};
    s = batch_plan(&pl, b0, nb, k_base, kv_s0, kv_s2, &gk);
    if (s != CLATTN_SUCCESS) break;
    s = batch_plan(&pl, b0, nb, v_base, kv_s0, kv_s2, &gv);
    if (s != CLATTN_SUCCESS) {
      batch_free(&gk);
      break;
    }
    for (size_t i = 0; i < gk.n; i++) gk.alpha[i] = pl.scale;
    if (pl.N > 0) {
      /* S = scale Q K^T: [m, D] x [N, D]^T, K rows kv_s1 apart */
      CLBlastStatusCode st = CLBlastSgemmBatched(
          CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, gk.m, (size_t)pl.N,
          (size_t)pl.D, gk.alpha, q32, gk.q_off, gk.q_ld, kb, gk.kv_off, (size_t)kv_s1, gk.beta,
          scores, gk.s_off, (size_t)pl.N, gk.n, &queue, NULL);
      if (st != CLBlastSuccess) s = clblast_fail(st, "S = Q K^T");
    }
    if (s == CLATTN_SUCCESS) s = softmax(ctx, queue, p, &pl, scores, b0, nb, lse32);
    if (s == CLATTN_SUCCESS && pl.N > 0) {
      /* O = P V: [m, N] x [N, D] */
      CLBlastStatusCode st = CLBlastSgemmBatched(
          CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, gv.m, (size_t)pl.D,
          (size_t)pl.N, gv.alpha, scores, gv.s_off, (size_t)pl.N, vb, gv.kv_off, (size_t)kv_s1,
          gv.beta, o32, gv.o_off, gv.o_ld, gv.n, &queue, NULL);
      if (st != CLBlastSuccess) s = clblast_fail(st, "O = P V");
    }
    batch_free(&gk);
    batch_free(&gv);
  }

  if (s == CLATTN_SUCCESS) {
    /* o and lse in the caller's dtype, strides and (varlen) packing: a merge of one part */
    const int64_t Mp = pl.Mp, Hq = pl.Hq, D = pl.D;
    clattn_merge_strided m = {
        .part_o = o32,
        .part_lse = lse32,
        .part_o_split_stride = 0,
        .part_lse_split_stride = 0,
        .part_o_stride = {Mp * Hq * D, Hq * D, D, 1},
        .part_lse_stride = {Hq * Mp, Mp, 1},
        .n = 1,
        .B = pl.B,
        .M = pl.Mp,
        .H = pl.Hq,
        .D = pl.D,
        .o = &p->o,
        .lse = &p->maybe_lse,
        .q_start = pl.varlen ? &p->maybe_q_start : NULL,
        .total_q = pl.total_q,
    };
    s = clattn_merge_strided_enqueue(ctx, queue, &m, 0, NULL, event);
  }
  /* released now, freed by OpenCL once the enqueued commands finish */
  cl_mem bufs[] = {q32, o32, lse32, scores, k32, v32};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) clReleaseMemObject(bufs[i]);
  return s;
}

void clattn_baseline_context_release(clattn_context *ctx) {
  /* CLBlast's program cache holds a reference to every cl_context it ran on
   * (its programs retain it) until CLBlastClearCache, which drops all of it,
   * for every context: the only way to let go of this one. Safe while other
   * threads run CLBlast (its cache hands out shared copies under a lock). */
  if (atomic_load(&ctx->ran_clblast)) CLBlastClearCache();
}

void clattn_baseline_variants(clattn_variant_fn fn, void *priv) {
  static const char *dts[] = {"f32", "f16", "bf16"};
  char opts[128];
  for (int i = 0; i < 3; i++)
    for (int v = 0; v < 2; v++) {
      snprintf(opts, sizeof opts, "-DSRC_DT=%s -DVARLEN=%d", dts[i], v);
      fn(priv, "baseline.cl", opts);
    }
  for (int flags = 0; flags < 8; flags++) {
    snprintf(opts, sizeof opts, "-DVARLEN=%d -DCAUSAL=%d -DHAS_BIAS=%d -DWG=%d", flags & 1,
             (flags >> 1) & 1, (flags >> 2) & 1, SOFTMAX_WG);
    fn(priv, "baseline.cl", opts);
  }
}
