/* ReRoPE windowed attention (cl/rerope.cl): validation, planning (portable
 * or tensor-core kernels, tile sizes that fit local memory) and the forward
 * launch, explicit and rotary. The backward's host is lib/rerope_bwd.c. */
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- views and arguments */

static clattn_rr_view view_of(const clattn_tensor *t) {
  clattn_rr_view v = {0, 0, 0, 0, 0};
  if (!t || !clattn_present(t)) return v;
  v.off = clattn_elem_offset(t);
  switch (t->ndim) {
  case 4:
    v.z = t->stride[0], v.h = t->stride[1], v.n = t->stride[2], v.d = t->stride[3];
    break;
  case 3:
    v.z = t->stride[0], v.h = t->stride[1], v.n = t->stride[2];
    break; /* lse [Z, H, N] */
  case 2:
    v.z = t->stride[0], v.n = t->stride[1];
    break; /* positions [Z, N] */
  case 1:
    v.n = t->stride[0];
    break; /* positions [N] */
  }
  return v;
}

void clattn_rr_arg(clattn_args *a, const clattn_tensor *t) {
  const bool present = t && clattn_present(t);
  clattn_arg_mem(a, present ? t->buf : NULL);
  clattn_rr_view v = view_of(t);
  clattn_arg(a, sizeof v, &v);
}

/* ---------------------------------------------------------------- validation */

clattn_status clattn_rr_check_like(const clattn_context *ctx, const clattn_tensor *t, const char *name,
                                   const clattn_tensor *ref, const char *ref_name,
                                   unsigned axes_mask) {
  CLATTN_TRY(clattn_check_tensor(ctx, t, name, 4, CLATTN_FLOAT_DTYPES));
  if (t->dtype != ref->dtype)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s.dtype (%s) differs from %s.dtype (%s)", name,
                       clattn_dtype_name(t->dtype), ref_name, clattn_dtype_name(ref->dtype));
  char what[64];
  for (int i = 0; i < 4; i++) {
    if (!(axes_mask & (1u << i))) continue;
    snprintf(what, sizeof what, "%s.shape[%d]", ref_name, i);
    CLATTN_TRY(clattn_check_dim(t, name, i, ref->shape[i], what));
  }
  return CLATTN_SUCCESS;
}

clattn_status clattn_rr_problem_init(const clattn_context *ctx, clattn_rr_problem *p, const clattn_tensor *q,
                                     const char *qname, const clattn_tensor *k, const char *kname,
                                     int window, float scale, int causal) {
  memset(p, 0, sizeof *p);
  CLATTN_TRY(clattn_check_tensor(ctx, q, qname, 4, CLATTN_FLOAT_DTYPES));
  CLATTN_TRY(clattn_rr_check_like(ctx, k, kname, q, qname, 0x9u)); /* Z and D */
  for (int i = 0; i < 3; i++)
    if (q->shape[i] > INT_MAX || k->shape[i] > INT_MAX)
      return clattn_fail(CLATTN_UNSUPPORTED, "%s or %s: dimension %d exceeds INT_MAX", qname, kname,
                         i);
  p->Z = (int)q->shape[0];
  p->Hq = (int)q->shape[1];
  p->Nq = (int)q->shape[2];
  p->D = (int)q->shape[3];
  p->Hkv = (int)k->shape[1];
  p->Nk = (int)k->shape[2];
  p->dtype = q->dtype;
  if (p->D % 8 || p->D < 8 || p->D > 256)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "%s.shape[3]: head dim D = %d is not supported (a multiple of 8 up to 256)",
                       qname, p->D);
  if (p->Hkv == 0 ? p->Hq != 0 : p->Hq % p->Hkv != 0)
    return clattn_fail(CLATTN_INVALID_SHAPE,
                       "%s.shape[1] (Hkv = %d) must divide %s.shape[1] (Hq = %d)", kname, p->Hkv,
                       qname, p->Hq);
  if (window < 0) return clattn_fail(CLATTN_INVALID_ARGUMENT, "window (%d) is negative", window);
  if (!isfinite(scale))
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "scale (%g) must be finite (0: 1/sqrt(D))",
                       (double)scale);
  p->args.Hq = p->Hq;
  p->args.G = p->Hkv ? p->Hq / p->Hkv : 1;
  p->args.Nq = p->Nq;
  p->args.Nk = p->Nk;
  p->args.window = window;
  p->args.causal = causal != 0;
  p->args.scale = scale != 0.0f ? scale : (float)(1.0 / sqrt((double)p->D));
  p->args.log2_theta = 0.0f;
  return CLATTN_SUCCESS;
}

static clattn_status check_pos(const clattn_context *ctx, const clattn_tensor *t, const char *name, const clattn_rr_problem *p,
                               int n, const char *n_what) {
  if (!clattn_present(t)) return CLATTN_SUCCESS;
  const int nd = t->ndim == 1 ? 1 : 2;
  CLATTN_TRY(clattn_check_tensor(ctx, t, name, nd, CLATTN_DT(CLATTN_I32)));
  if (nd == 2) CLATTN_TRY(clattn_check_dim(t, name, 0, p->Z, "the batch Z"));
  return clattn_check_dim(t, name, nd - 1, n, n_what);
}

clattn_status clattn_rr_inputs_init(const clattn_context *ctx, const clattn_rr_inputs *in,
                                    clattn_rr_problem *p) {
  const char *qn = in->rotary ? "q" : "q1", *kn = in->rotary ? "k" : "k1";
  CLATTN_TRY(clattn_rr_problem_init(ctx, p, in->q1, qn, in->k1, kn, in->window, in->scale,
                                    in->causal));
  p->qname = qn, p->kname = kn;
  if (!in->rotary) {
    CLATTN_TRY(clattn_rr_check_like(ctx, in->q2, "q2", in->q1, qn, 0xfu));
    CLATTN_TRY(clattn_rr_check_like(ctx, in->k2, "k2", in->k1, kn, 0xfu));
  }
  CLATTN_TRY(clattn_rr_check_like(ctx, in->v, "v", in->k1, kn, 0xfu));
  return clattn_rr_check_like(ctx, in->o, "o", in->q1, qn, 0xfu);
}

clattn_status clattn_rr_enqueue_init(const clattn_context *ctx, cl_command_queue queue,
                                     cl_uint num_wait, const cl_event *wait,
                                     const clattn_rr_inputs *in, clattn_rr_problem *p) {
  CLATTN_TRY(clattn_check_enqueue(ctx, queue, num_wait, wait));
  return clattn_rr_inputs_init(ctx, in, p);
}

clattn_status clattn_rr_check_lse(const clattn_context *ctx, const clattn_tensor *lse, const char *name,
                                  const clattn_tensor *q, const char *qname) {
  CLATTN_TRY(clattn_check_tensor(ctx, lse, name, 3, CLATTN_DT(CLATTN_F32)));
  char what[32];
  for (int i = 0; i < 3; i++) {
    snprintf(what, sizeof what, "%s.shape[%d]", qname, i);
    CLATTN_TRY(clattn_check_dim(lse, name, i, q->shape[i], what));
  }
  return CLATTN_SUCCESS;
}

clattn_status clattn_rr_rotary_init(const clattn_context *ctx, clattn_rr_problem *p, const clattn_tensor *q_pos,
                                    const clattn_tensor *k_pos, float theta, int layout) {
  if (theta == 0.0f) theta = 10000.0f;
  if (!(theta > 1.0f) || !isfinite(theta))
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "rope_theta (%g) must be finite and > 1",
                       (double)theta);
  if (layout != CLATTN_ROPE_NEOX && layout != CLATTN_ROPE_INTERLEAVED)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "rope_layout (%d) is not a clattn_rope_layout",
                       layout);
  CLATTN_TRY(check_pos(ctx, q_pos, "maybe_q_pos", p, p->Nq, "Nq of q"));
  CLATTN_TRY(check_pos(ctx, k_pos, "maybe_k_pos", p, p->Nk, "Nk of k"));
  p->rotary = 1;
  p->q_pos = clattn_present(q_pos) ? q_pos : NULL;
  p->k_pos = clattn_present(k_pos) ? k_pos : NULL;
  p->args.rope_interleaved = layout == CLATTN_ROPE_INTERLEAVED;
  p->args.log2_theta = (float)log2((double)theta);
  return CLATTN_SUCCESS;
}

/* ---------------------------------------------------------------- planning */

/* Whether the build options will carry -DCLATTN_NV_PTX=1 (the profile, and
 * CLATTN_PORTABLE=1 forcing the portable twins). */
/* Local memory of the portable kernels; mirrors the __local arrays of
 * cl/rerope.cl (fwd) and cl/rerope_bwd.cl (bwd: the larger of dkdv and dq). */
static size_t portable_local_bytes(const clattn_rr_problem *p, clattn_rr_kind kind, int bm, int bn,
                                   int ct) {
  const size_t es = clattn_dtype_size(p->dtype), ldt = (size_t)p->D + (es == 4 ? 1 : 2);
  if (kind == CLATTN_RR_FWD)
    return es * ldt * (2 * (size_t)bm + 3 * (size_t)bn) + 4 * (size_t)bm * (bn + 1) +
           4 * (size_t)bm * ct + 4 * ((size_t)bm + bn);
  const size_t tiles = es * ldt * (3 * (size_t)bm + 3 * (size_t)bn) + 4 * (3 * (size_t)bm + bn);
  const size_t dkdv = tiles + 3 * 4 * (size_t)bn * (bm + 1);
  const size_t dq = tiles + 2 * 4 * (size_t)bm * (bn + 1);
  return dkdv > dq ? dkdv : dq;
}

static clattn_status plan_portable(const clattn_context *ctx, const clattn_rr_problem *p,
                                   clattn_rr_kind kind, clattn_rr_plan *pl) {
  /* CT work-items share a score row; each owns whole rotary pairs of the head dim. */
  const int ct = (p->D / 2) % 8 == 0 ? 8 : 4;
  int bm = ctx->tuning.rerope_block_m, bn = ctx->tuning.rerope_block_n;
  int wg = ctx->tuning.rerope_wg;
  /* powers of two, at least CT, and a work-group that divides every tile */
  int x = ct;
  while (x < bm) x *= 2;
  bm = x;
  x = ct;
  while (x < bn) x *= 2;
  bn = x;
  const size_t budget = ctx->profile.local_mem_bytes > 512 ? ctx->profile.local_mem_bytes - 512 : 0;
  while (portable_local_bytes(p, kind, bm, bn, ct) > budget) {
    if (bn >= bm && bn > ct)
      bn /= 2;
    else if (bm > ct)
      bm /= 2;
    else
      return clattn_fail(CLATTN_UNSUPPORTED,
                         "rerope: head dim %d does not fit the device's %llu bytes of local memory",
                         p->D, (unsigned long long)ctx->profile.local_mem_bytes);
  }
  int rt = wg / ct;
  if (rt < 1) rt = 1;
  while (rt & (rt - 1)) rt &= rt - 1; /* a power of two: it divides the tiles */
  while (rt > bm || rt > bn) rt /= 2;
  while ((size_t)(rt * ct) > ctx->profile.max_work_group_size && rt > 1) rt /= 2;
  pl->mma = 0;
  pl->bm = pl->q_rows = bm;
  pl->bn = pl->k_rows = bn;
  pl->ct = ct;
  pl->wg = rt * ct;
  return CLATTN_SUCCESS;
}

/* The tensor-core kernels read every input with 16-byte copies, at 32-bit
 * offsets from a tile's first row. */
static bool aligned16(const clattn_tensor *t) {
  if (t->stride[3] != 1 || t->offset % 16 || t->stride[2] >= (1 << 23)) return false;
  for (int i = 0; i < 3; i++)
    if (t->stride[i] % 8) return false;
  return true;
}

/* The register cap of a warpgroup MMA plan (rerope_wgmma_maxnreg): up to
 * D = 64, where 128 registers let the forward hold two groups of 256 per SM
 * and the two-phase backward four of 128 (H100, Z=1 H=32 N=8192 W=2048
 * causal D = 64: backward 5.54 -> 5.08 ms; the forward 1.56 -> 1.21, still
 * behind mma.sync's 1.07, tools/PERF.md); wider heads spill under it. At
 * least 96: ptxas gave up on the D = 64 forward at 64 (at 80 it spilled). */
static int wgmma_maxnreg(const clattn_context *ctx, const clattn_rr_problem *p) {
  const int v = ctx->tuning.rerope_wgmma_maxnreg;
  return p->D > 64 || v == 0 ? 0 : v < 96 ? 96 : v;
}

/* The two-phase backward (cl/rerope_bwd_phased.clh), up to D = 128 (above,
 * a warp's fragments and accumulators pass the registers) where its tiles
 * fit the local memory: 4 warps of 16 rows each.
 *   dq streams the phase's K and V tiles of bn keys (64 where they fit; 32
 *   up to D = 64) through a ring of 2 where two fit, else one stage (H200,
 *   Z=1 H=32 N=8192 W=2048 causal: D = 128 one of 64 keys 11.71 ms against
 *   two of 32 12.05; D = 64 two of 32 with query tiles of 32 5.57 against
 *   7.04 for the one-pass kernels; tiles of 64 there not timed yet).
 *   dk/dv keeps the phase's K and V of its 64 keys in local memory and
 *   stages query tiles of bm (64, 32 or 16) rows, or, where that leaves
 *   tiles under 32 rows (D = 128), holds the keys' fragments in registers
 *   and streams query tiles through a ring of 2 (qring; D = 128: 8.4 -> 6.0
 *   ms for dk/dv; at D = 64, where the first form's tiles are 64 rows, the
 *   ring loses: 6.46 against 5.57 ms for the backward).
 * row: a staged row's bytes. */
static bool plan_phased(const clattn_context *ctx, const clattn_rr_problem *p, size_t row,
                        size_t emu, clattn_rr_plan *pl) {
  const clattn_tuning *tu = &ctx->tuning;
  /* warpgroup MMA (sm_90 up to D = 64, at every D where rerope_bwd_wgmma =
   * 2 or 3; emulated where 2): the same plan, tiles as core matrices without
   * padding. Z=1 H=32 N=8192 W=2048 causal, against mma.sync: H200 D = 64
   * 8% faster, D = 128 2.5%; H100 (tools/gpu_session31.sh) D = 64 3% faster,
   * D = 96 11% and D = 128 5% slower. dq's key tiles of D (D = 32 with the
   * default 32, D = 64 with rerope_bwd_block_n = 64) once gave a wrong dq on
   * the H100; its chain now runs in halves there (cl/rerope_mma.clh
   * WG_ROWS_HALVES, tools/PERF.md sessions 35 and 42). */
  const int wgm = tu->rerope_bwd_wgmma;
  const int wgmma = wgm != 1 &&
                    ((clattn_nv_wgmma_active(ctx) && (wgm != 0 || p->D <= 64)) || (wgm == 2 && emu > 0));
  if (wgmma) row = 2 * (size_t)p->D;
  const size_t local = ctx->profile.local_mem_bytes > emu ? ctx->profile.local_mem_bytes - emu : 0;
  if (p->D > 128) return false;
#define DQ_BYTES(st, bn) ((st) * 2 * (size_t)(bn) * row + 4 * (64 + (size_t)(bn)))
#define DKDV_BYTES(ring, bm)                                                                     \
  ((ring) ? 2 * 2 * (size_t)(bm) * row + 4 * (6 * (size_t)(bm) + 64)                             \
          : 2 * 64 * row + 2 * (size_t)(bm) * row + 4 * (3 * (size_t)(bm) + 64))
  /* the largest tiles that fit, up to 64 (32 up to D = 64: the tiles timed there) */
  const int top = p->D <= 64 ? 32 : 64;
  int bn = tu->rerope_bwd_block_n ? tu->rerope_bwd_block_n : top;
  int stages = p->rotary ? 1 : tu->rerope_bwd_stages ? tu->rerope_bwd_stages : 2;
  if (!p->rotary && !tu->rerope_bwd_stages && DQ_BYTES(2, bn) > local) stages = 1;
  while (!tu->rerope_bwd_block_n && bn > 16 && DQ_BYTES(stages, bn) > local) bn /= 2;
  /* dk/dv: the largest query tile of each form, the ring where the first's is short */
  int bm1 = top, bm2 = top;
  while (bm1 > 16 && DKDV_BYTES(0, bm1) > local) bm1 /= 2;
  while (bm2 > 16 && DKDV_BYTES(1, bm2) > local) bm2 /= 2;
  const int q = tu->rerope_bwd_qring;
  const int ring = !p->rotary && (q == 2 || (q == 0 && bm1 < 32 && bm2 > bm1));
  const int bm = tu->rerope_bwd_block_m ? tu->rerope_bwd_block_m : ring ? bm2 : bm1;
  /* (the kernels' own check, cl/rerope_bwd.cl: 3 bn >= the 64 rows of a dq group) */
  const bool ok = bn >= 16 && bm >= 16 && stages * 2 * bn >= 64 && 3 * bn >= 64 && (!ring || 4 * bm >= 64) &&
                  DQ_BYTES(stages, bn) <= local && DKDV_BYTES(ring, bm) <= local;
#undef DQ_BYTES
#undef DKDV_BYTES
  if (!ok) return false;
  pl->phased = 1;
  pl->wgmma = wgmma;
  pl->maxnreg = wgmma && emu == 0 ? wgmma_maxnreg(ctx, p) : 0;
  pl->qring = ring;
  pl->stages = stages;
  pl->q_rows = pl->k_rows = 64;
  pl->bm = bm;
  pl->bn = bn;
  return true;
}

/* The forward on warpgroup MMA (sm_90, or emulated where rerope_wgmma = 2),
 * D <= 128: warpgroups of 64 query rows, two by default (128 rows share each
 * key tile), one row block per warp; key tiles of 64 in a ring of 2 where
 * they fit the local memory, else of 32 (D = 128 in NVIDIA's 48 KiB). Tiles
 * are core matrices without padding: a row is 2 D bytes. */
static bool plan_wgmma(const clattn_context *ctx, const clattn_rr_problem *p, bool emulate,
                       size_t emu, clattn_rr_plan *pl) {
  const clattn_tuning *tu = &ctx->tuning;
  const int mode = tu->rerope_wgmma;
  if (mode == 1 || p->D > 128 || !(clattn_nv_wgmma_active(ctx) || (mode == 2 && emulate)))
    return false;
  const size_t row = 2 * (size_t)p->D;
  int wg = emulate ? 128 : tu->rerope_wgmma_wg >= 128 ? tu->rerope_wgmma_wg : 256;
  if ((size_t)wg > ctx->profile.max_work_group_size) wg = 128;
  const int stages = p->rotary ? 1 : tu->rerope_stages >= 2 ? tu->rerope_stages : 2;
  const int bm = wg / 2;
  const size_t fixed = 4 * ((size_t)bm + 128) + emu;
  if (fixed >= ctx->profile.local_mem_bytes) return false;
  const size_t budget = ctx->profile.local_mem_bytes - fixed;
  int bn = tu->rerope_wgmma_block_n ? tu->rerope_wgmma_block_n : 64;
  while (!tu->rerope_wgmma_block_n && bn > 32 && stages * 2 * bn * row > budget) bn /= 2;
  if (bn < 16 || stages * 2 * bn * row > budget || stages * 2 * bn < bm) return false;
  pl->mma = 1;
  pl->wgmma = 1;
  pl->maxnreg = emulate ? 0 : wgmma_maxnreg(ctx, p);
  pl->emulate = emulate;
  pl->wg = wg;
  pl->ct = 8;
  pl->mt = 1;
  pl->bm = pl->q_rows = bm;
  pl->bn = pl->k_rows = bn;
  pl->stages = stages;
  return true;
}

/* Tensor-core kernels, f16/bf16 with D a multiple of 16 up to 256: 4 warps
 * of 16 query rows (the m16n8k16 fragment height), key tiles of 64 (32 or
 * 16 for wide heads: registers and local memory). */
static bool plan_mma(const clattn_context *ctx, const clattn_rr_problem *p, clattn_rr_kind kind,
                     const clattn_tensor *const *views, int n_views, bool emulate,
                     clattn_rr_plan *pl) {
  /* backward: two phases where their tiles fit (plan_phased: up to D = 128);
   * else in one pass, the dk1, dk2, dv accumulators and the K/V tiles of 64
   * keys in the registers and 48 KiB up to D = 64, wider heads' rows'
   * fragments from global memory (below: q and k as given, no on-the-fly form) */
  const bool wide = kind == CLATTN_RR_BWD && p->D > 64;
  const size_t row = 2 * ((size_t)p->D + 8), emu = emulate ? 2 * 4 * 8 * 128 : 0;
  const bool phased =
      kind == CLATTN_RR_BWD && !ctx->tuning.rerope_bwd_phases && plan_phased(ctx, p, row, emu, pl);
  if (p->dtype == CLATTN_F32 || p->D % 16 || p->D > 256 || (wide && p->rotary && !phased))
    return false;
  for (int i = 0; i < n_views; i++)
    if (!aligned16(views[i])) return false;
  if (kind == CLATTN_RR_FWD && plan_wgmma(ctx, p, emulate, emu, pl)) return true;
  pl->mma = 1;
  pl->emulate = emulate;
  /* forward: the tuning row's work-group (16 query rows per warp) and key tile */
  const int twg = ctx->tuning.rerope_wg;
  pl->wg = kind == CLATTN_RR_FWD && twg >= 64 && twg <= 256 && twg % 32 == 0 && !emulate ? twg : 128;
  pl->ct = 8;
  size_t bytes;
  if (kind == CLATTN_RR_FWD) {
    /* each warp owns mt blocks of 16 query rows (one above D = 128: the
     * accumulators and Q's fragments of two would pass the registers) */
    pl->mt = ctx->tuning.rerope_warp_blocks == 2 && p->D <= 128 ? 2 : 1;
    pl->bm = pl->q_rows = 16 * pl->mt * (pl->wg / 32);
    const int tbn = ctx->tuning.rerope_mma_block_n;
    pl->bn = p->D <= 64 ? (tbn == 32 ? 32 : 64) : 32;
    /* a ring of key tiles (a pass's K, and V) streams in while one is
     * computed; on the fly, k1 is rotated while staged: one stage */
    pl->stages = p->rotary ? 1 : ctx->tuning.rerope_stages >= 2 ? ctx->tuning.rerope_stages : 2;
    const size_t fixed = 4 * ((size_t)pl->bm + pl->bn) + emu;
    if (fixed >= ctx->profile.local_mem_bytes) return false;
    const size_t budget = ctx->profile.local_mem_bytes - fixed;
    while (pl->stages * 2 * pl->bn * row > budget && pl->bn > 16) pl->bn /= 2;
    while (pl->stages * 2 * pl->bn * row > budget && pl->stages > 2) pl->stages--;
    if (pl->stages * 2 * pl->bn < pl->bm && pl->mt == 2) { /* Q is staged where the key tiles go */
      pl->mt = 1;
      pl->bm = pl->q_rows = 16 * (pl->wg / 32);
    }
    if (pl->stages * 2 * pl->bn < pl->bm) return false;
    bytes = pl->stages * 2 * pl->bn * row + 4 * ((size_t)pl->bm + pl->bn) + emu;
  } else if (phased) {
    bytes = 0; /* plan_phased's */
  } else if (!wide) { /* dq: 64 query rows, key tiles of 32; dk/dv: 64 keys, query tiles of 32 */
    pl->q_rows = pl->k_rows = 64;
    pl->bm = pl->bn = 32;
    const size_t dq = 3 * pl->bn * row + 4 * (64 + (size_t)pl->bn);
    const size_t dkdv = 3 * 64 * row + 3 * pl->bm * row + 4 * (3 * (size_t)pl->bm + 64);
    bytes = (dq > dkdv ? dq : dkdv) + emu;
  } else {
    /* D > 64: each work-group reads its own rows' fragments from global
     * memory per tile; only the other side's tiles, of 32 rows (16 where 32
     * pass the local memory), are staged. It accumulates one slice of the
     * gradients' columns: the fewest slices of whole 8-column blocks within
     * rerope_bwd_cols, by default one. Recomputing the scores per slice costs
     * more than registers spilled by whole rows (H200, Z=1 H=32 causal,
     * W = N/4, before the two phases: D = 128, N = 8192, 16 / 8 / 4 column
     * blocks per slice 23.6 / 34.3 / 65.8 ms; D = 256, N = 4096, 32 / 16 / 8
     * blocks 22.8 / 30.2 / 50.9 ms; with them, D = 128 21.0 against 36.1 ms
     * for two slices, D = 256 22.5 against 28.3); a device with fewer
     * registers may want slices. */
    const int cap = ctx->tuning.rerope_bwd_cols ? ctx->tuning.rerope_bwd_cols : p->D;
    const int blocks = p->D / 8;
    pl->nsl = blocks;
    for (int n = 1; n <= blocks; n++)
      if (blocks % n == 0 && p->D / n <= cap) {
        pl->nsl = n;
        break;
      }
    pl->q_rows = pl->k_rows = 64;
    pl->bm = pl->bn = 32;
    if (3 * 32 * row + 4 * (3 * 32 + 64) + emu > ctx->profile.local_mem_bytes) pl->bm = pl->bn = 16;
    bytes = 3 * (size_t)pl->bm * row + 4 * (3 * (size_t)pl->bm + 64) + emu;
  }
  return bytes <= ctx->profile.local_mem_bytes &&
         (size_t)pl->wg <= ctx->profile.max_work_group_size;
}

clattn_status clattn_rr_plan_make(const clattn_context *ctx, const clattn_rr_problem *p,
                                  clattn_rr_kind kind, const clattn_tensor *const *views,
                                  int n_views, clattn_rr_plan *out) {
  memset(out, 0, sizeof *out);
  const int forced = clattn_forced_path();
  const bool ptx = clattn_nv_ptx_active(ctx);
  /* forced tensor-core kernels run the real PTX where it exists, the emulation elsewhere */
  const bool fast = forced == 2 || (forced == 0 && ctx->tuning.rerope_use_mma && ptx);
  if (fast && plan_mma(ctx, p, kind, views, n_views, !ptx, out)) return CLATTN_SUCCESS;
  memset(out, 0, sizeof *out);
  return plan_portable(ctx, p, kind, out);
}

clattn_status clattn_rr_plan_built(clattn_context *ctx, const clattn_rr_problem *p,
                                   clattn_rr_kind kind, const clattn_tensor *const *views,
                                   int n_views, const char *kernel_name, clattn_rr_plan *pl,
                                   char *opts, size_t size, cl_kernel *kernel) {
  const char *file = kind == CLATTN_RR_FWD ? "rerope.cl" : "rerope_bwd.cl";
  CLATTN_TRY(clattn_rr_plan_make(ctx, p, kind, views, n_views, pl));
  clattn_rr_options(p, pl, opts, size);
  const clattn_status st = clattn_kernel_get(ctx, file, opts, kernel_name, kernel);
  if (st != CLATTN_BUILD_ERROR || !pl->wgmma || pl->emulate) return st;
  /* the PTX route did not build on this driver: mma.sync from now on */
  clattn_log(ctx, CLATTN_LOG_ERROR, "clattn: %s; ReRoPE takes mma.sync instead of warpgroup MMA",
             clattn_last_error());
  atomic_store(&ctx->wgmma_failed, true);
  CLATTN_TRY(clattn_rr_plan_make(ctx, p, kind, views, n_views, pl));
  clattn_rr_options(p, pl, opts, size);
  return clattn_kernel_get(ctx, file, opts, kernel_name, kernel);
}

void clattn_rr_options(const clattn_rr_problem *p, const clattn_rr_plan *pl, char *buf,
                       size_t size) {
  char stages[40] = "";
  if (pl->stages) snprintf(stages, sizeof stages, " -DSTAGES=%d -DMT=%d", pl->stages, pl->mt);
  if (pl->nsl) snprintf(stages, sizeof stages, " -DNSL=%d -DFRAG_G=1", pl->nsl);
  if (pl->phased)
    snprintf(stages, sizeof stages, " -DPHASED=1 -DSTAGES=%d%s", pl->stages, pl->qring ? " -DQRING=1" : "");
  char cap[40] = "";
  if (pl->maxnreg) snprintf(cap, sizeof cap, " -DCLATTN_PTX_MAXNREG=%d", pl->maxnreg);
  snprintf(buf, size, "-DDT=%s -DD=%d -DROTARY=%d -DBM=%d -DBN=%d -DWG=%d -DCT=%d -DRR_MMA=%d%s%s%s%s%s%s",
           clattn_dtype_cl(p->dtype), p->D, p->rotary, pl->bm, pl->bn, pl->wg, pl->ct, pl->mma,
           stages, pl->wgmma ? " -DRR_WG=1" : "", cap, p->q_pos ? " -DQPOS=1" : "",
           p->k_pos ? " -DKPOS=1" : "", pl->emulate ? " -DMMA_EMULATE=1 -cl-opt-disable" : "");
}

/* ---------------------------------------------------------------- forward */

static clattn_status launch_fwd(clattn_context *ctx, cl_command_queue queue,
                                const clattn_rr_problem *p, const clattn_rr_inputs *t,
                                cl_uint num_wait, const cl_event *wait, cl_event *event) {
  const clattn_tensor *views[] = {t->q1, t->q2, t->k1, t->k2, t->v};
  clattn_rr_plan pl;
  char opts[256];
  static const char *name = "clattn_rerope_fwd";
  cl_kernel k = NULL;
  CLATTN_TRY(clattn_rr_plan_built(ctx, p, CLATTN_RR_FWD, views, 5, name, &pl, opts, sizeof opts, &k));
  const clattn_tensor *ts[] = {t->q1, t->q2, t->k1, t->k2, t->v, t->o, t->lse, p->q_pos, p->k_pos};
  clattn_args a = clattn_args_begin(k);
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clattn_rr_arg(&a, ts[i]);
  clattn_arg(&a, sizeof p->args, &p->args);
  const size_t blocks = ((size_t)p->Nq + pl.q_rows - 1) / pl.q_rows;
  size_t local[3] = {(size_t)pl.wg, 1, 1};
  size_t global[3] = {blocks * pl.wg, (size_t)p->Hq, (size_t)p->Z};
  return clattn_args_launch(ctx, queue, &a, name, 3, global, local, num_wait, wait, event);
}

/* Both forward forms: the checks, then the launch. rot: the rotary form's
 * settings, NULL for the explicit form. */
static clattn_status run_fwd(clattn_context *ctx, cl_command_queue queue, const clattn_rr_inputs *t,
                             const clattn_rerope_rotary_params *rot, cl_uint num_wait,
                             const cl_event *wait, cl_event *event) {
  clattn_rr_problem pr;
  CLATTN_TRY(clattn_rr_enqueue_init(ctx, queue, num_wait, wait, t, &pr));
  if (clattn_present(t->lse))
    CLATTN_TRY(clattn_rr_check_lse(ctx, t->lse, "maybe_lse", t->q1, pr.qname));
  if (rot)
    CLATTN_TRY(clattn_rr_rotary_init(ctx, &pr, &rot->maybe_q_pos, &rot->maybe_k_pos,
                                     rot->rope_theta, rot->rope_layout));
  /* o and lse share no element with each other or the inputs */
  const clattn_named outs[] = {{t->o, "o"}, {t->lse, "maybe_lse"}};
  const clattn_named ins[] = {{t->q1, pr.qname},
                              {rot ? NULL : t->q2, "q2"},
                              {t->k1, pr.kname},
                              {rot ? NULL : t->k2, "k2"},
                              {t->v, "v"},
                              {pr.q_pos, "maybe_q_pos"},
                              {pr.k_pos, "maybe_k_pos"}};
  CLATTN_TRY(clattn_check_aliasing(outs, 2, ins, 7));
  return launch_fwd(ctx, queue, &pr, t, num_wait, wait, event);
}

clattn_status clattn_rerope_fwd(clattn_context *ctx, cl_command_queue queue,
                                const clattn_rerope_params *params, cl_uint num_wait,
                                const cl_event *wait_list, cl_event *event) {
  if (!params) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  const clattn_rerope_params *p = params;
  const clattn_rr_inputs t = {&p->q1, &p->q2, &p->k1, &p->k2, &p->v, &p->o, &p->maybe_lse,
                              p->window, p->causal, 0, p->scale};
  return run_fwd(ctx, queue, &t, NULL, num_wait, wait_list, event);
}

/* The kernels one call of either form would take: the forward's checks on
 * in, the rotary form's on its positions and settings (rot), then the plan. */
static const char *kernels_of(clattn_context *ctx, const clattn_rr_inputs *in,
                              const clattn_rerope_rotary_params *rot, int backward) {
  clattn_rr_problem pr;
  clattn_rr_plan pl;
  const clattn_tensor *views[] = {in->q1, in->q2, in->k1, in->k2, in->v, in->o};
  if (clattn_rr_inputs_init(ctx, in, &pr) != CLATTN_SUCCESS ||
      (rot && clattn_rr_rotary_init(ctx, &pr, &rot->maybe_q_pos, &rot->maybe_k_pos,
                                    rot->rope_theta, rot->rope_layout) != CLATTN_SUCCESS) ||
      clattn_rr_plan_make(ctx, &pr, backward ? CLATTN_RR_BWD : CLATTN_RR_FWD, views, backward ? 6 : 5,
                          &pl) != CLATTN_SUCCESS)
    return NULL;
  return pl.wgmma ? "tensor cores (warpgroup MMA)" : pl.mma ? "tensor cores" : "portable";
}

const char *clattn_rerope_kernels(clattn_context *ctx, const clattn_rerope_params *params, int backward) {
  clattn_clear_error();
  if (!ctx || !params) {
    clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is NULL", ctx ? "params" : "ctx");
    return NULL;
  }
  const clattn_rerope_params *p = params;
  const clattn_rr_inputs in = {&p->q1, &p->q2, &p->k1, &p->k2, &p->v, &p->o, NULL,
                               p->window, p->causal, 0, p->scale};
  return kernels_of(ctx, &in, NULL, backward);
}

const char *clattn_rerope_rotary_kernels(clattn_context *ctx,
                                         const clattn_rerope_rotary_params *params, int backward) {
  clattn_clear_error();
  if (!ctx || !params) {
    clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is NULL", ctx ? "params" : "ctx");
    return NULL;
  }
  const clattn_rerope_rotary_params *p = params;
  const clattn_rr_inputs in = {&p->q, &p->q, &p->k, &p->k, &p->v, &p->o, NULL,
                               p->window, p->causal, 1, p->scale};
  return kernels_of(ctx, &in, p, backward);
}

clattn_status clattn_rerope_rotary_fwd(clattn_context *ctx, cl_command_queue queue,
                                       const clattn_rerope_rotary_params *params, cl_uint num_wait,
                                       const cl_event *wait_list, cl_event *event) {
  if (!params) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  const clattn_rerope_rotary_params *p = params;
  const clattn_rr_inputs t = {&p->q, &p->q, &p->k, &p->k, &p->v, &p->o, &p->maybe_lse,
                              p->window, p->causal, 1, p->scale};
  return run_fwd(ctx, queue, &t, p, num_wait, wait_list, event);
}

/* ---------------------------------------------------------------- variants */

/* The planner's own choices for AMD-like devices (64 KiB of local memory,
 * the tuning rows of CDNA and RDNA), over dtypes, head dims (with CT 4 and 8)
 * and both variants; plus the tensor-core kernels with the PTX emulated,
 * which are plain OpenCL C and so compile anywhere. */
void clattn_rerope_variants(clattn_variant_fn fn, void *priv) {
  /* every shape on CDNA (wave64 rows), the first two on RDNA (another work-group size) */
  static const struct {
    const char *arch;
    size_t shapes;
  } archs[] = {{"amd-gfx90a", 7}, {"amd-gfx1100", 2}};
  static const struct {
    clattn_dtype dt;
    int d, rotary;
  } shapes[] = {{CLATTN_F32, 64, 0}, {CLATTN_F16, 128, 1},  {CLATTN_BF16, 96, 0},
                {CLATTN_F16, 8, 1},  {CLATTN_BF16, 256, 1}, {CLATTN_F32, 24, 1},
                {CLATTN_F16, 256, 0}};
  char opts[256], last[2][256] = {"", ""};
  for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
    clattn_context ctx;
    memset(&ctx, 0, sizeof ctx);
    snprintf(ctx.profile.arch, sizeof ctx.profile.arch, "%s", archs[a].arch);
    ctx.profile.local_mem_bytes = 65536;
    ctx.profile.max_work_group_size = 1024;
    clattn_tuning_lookup(NULL, &ctx.profile, NULL, &ctx.tuning, NULL);
    for (size_t i = 0; i < archs[a].shapes && i < sizeof shapes / sizeof shapes[0]; i++) {
      clattn_rr_problem p;
      memset(&p, 0, sizeof p);
      p.dtype = shapes[i].dt;
      p.D = shapes[i].d;
      p.rotary = shapes[i].rotary;
      for (int kind = 0; kind < 2; kind++) {
        clattn_rr_plan pl;
        memset(&pl, 0, sizeof pl);
        if (plan_portable(&ctx, &p, (clattn_rr_kind)kind, &pl) != CLATTN_SUCCESS) continue;
        clattn_rr_options(&p, &pl, opts, sizeof opts);
        if (strcmp(opts, last[kind]) == 0) continue;
        snprintf(last[kind], sizeof last[kind], "%s", opts);
        fn(priv, kind == CLATTN_RR_FWD ? "rerope.cl" : "rerope_bwd.cl", opts);
      }
    }
  }
  clattn_rr_problem p;
  memset(&p, 0, sizeof p);
  p.dtype = CLATTN_F16;
  p.D = 64;
  clattn_rr_plan pl = {1, 1, 128, 32, 128, 8, 128, 64, 3, 2, 0, 0, 0, 0, 0};
  clattn_rr_options(&p, &pl, opts, sizeof opts);
  fn(priv, "rerope.cl", opts);
  pl.bm = pl.bn = 32;
  pl.stages = 0;
  p.rotary = 1;
  const clattn_tensor given = {0};
  p.q_pos = p.k_pos = &given; /* positions given */
  clattn_rr_options(&p, &pl, opts, sizeof opts);
  fn(priv, "rerope_bwd.cl", opts);
  /* a wide head's backward: fragments from global memory, whole rows or column slices */
  p.D = 128;
  p.rotary = 0;
  for (pl.nsl = 1; pl.nsl <= 2; pl.nsl++) {
    clattn_rr_options(&p, &pl, opts, sizeof opts);
    fn(priv, "rerope_bwd.cl", opts);
  }
  /* the forward on warpgroup MMA (emulated here; on nvptx64 with sm_90's
   * macros the wgmma path): D = 128 in tiles of 32 keys, a ring of 2; bf16 D =
   * 64 on the fly, one stage of 64 */
  {
    clattn_rr_problem w = {0};
    clattn_rr_plan wp = {1, 1, 64, 32, 128, 8, 64, 32, 2, 1, 0, 0, 0, 1, 0};
    w.dtype = CLATTN_F16;
    w.D = 128;
    clattn_rr_options(&w, &wp, opts, sizeof opts);
    fn(priv, "rerope.cl", opts);
    w.dtype = CLATTN_BF16;
    w.D = 64;
    w.rotary = 1;
    wp.bn = wp.k_rows = 64;
    wp.stages = 1;
    clattn_rr_options(&w, &wp, opts, sizeof opts);
    fn(priv, "rerope.cl", opts);
    /* ... the two-phase backward: D = 128 with dk/dv's ring, D = 64 with dq's */
    w.dtype = CLATTN_F16;
    w.rotary = 0;
    wp.phased = 1;
    for (int i = 0; i < 2; i++) {
      w.D = i ? 64 : 128;
      wp.bm = 32;
      wp.bn = i ? 32 : 64;
      wp.stages = i ? 2 : 1;
      wp.qring = !i;
      clattn_rr_options(&w, &wp, opts, sizeof opts);
      fn(priv, "rerope_bwd.cl", opts);
    }
  }
  /* ... in two phases: D = 128 (dq one stage of 64 keys, dk/dv's ring of
   * query tiles of 32), D = 96 (dq one stage of 64, query tiles of 32), D =
   * 64 (dq's ring of 2 tiles of 32, query tiles of 32); explicit and on the
   * fly (one stage, no ring) */
  pl.nsl = 0;
  pl.phased = 1;
  for (p.rotary = 0; p.rotary <= 1; p.rotary++) {
    static const int dims[3][5] = {{128, 32, 64, 1, 1}, {96, 32, 64, 1, 0}, {64, 32, 32, 2, 0}};
    for (int i = 0; i < 3; i++) {
      p.D = dims[i][0];
      pl.bm = dims[i][1];
      pl.bn = dims[i][2];
      pl.stages = p.rotary ? 1 : dims[i][3];
      pl.qring = p.rotary ? 0 : dims[i][4];
      clattn_rr_options(&p, &pl, opts, sizeof opts);
      fn(priv, "rerope_bwd.cl", opts);
    }
  }
}
