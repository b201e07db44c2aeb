/* Decode's planning (cl/decode.cl, its forms decode_mma.clh and
 * decode_serial.clh): from a validated call, the form, rows per group, load
 * widths, split count and workspace in one plan, and the kernel's build
 * options; the offline variants. The launch is lib/decode.c. */
#include "decode_plan.h"

#include <stdio.h>
#include <string.h>

/* Bytes of t's buffer (0 if it cannot be asked). */
static size_t buffer_bytes(const clattn_tensor *t) {
  size_t n = 0;
  if (!t->buf || clGetMemObjectInfo(t->buf, CL_MEM_SIZE, sizeof n, &n, NULL) != CL_SUCCESS) return 0;
  return n;
}

/* t's buffer ends on 16 bytes, so 16-byte loads of the words that hold its
 * last row (reaching up to 12 bytes past it) stay inside it. */
static bool buffer_ends16(const clattn_tensor *t) {
  const size_t n = buffer_bytes(t);
  return n > 0 && n % 16 == 0;
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

/* ------------------------------------------------------------------ planning */

/* The tensor-core form's head dim padded in registers (cl/decode_mma.clh DP). */
static int padded_d(const plan *pl) { return (pl->pr.D + 63) / 64 * 64; }

/* The tensor-core form's combine of its warps (mma_combine): slices of
 * local memory, a warp's RB x DP f32 accumulators each, as many as half the
 * warps within 8 KiB, at least 1; 1 beside a ring of blocks (STAGES), which
 * takes the local memory. (H200, 16 KiB: D=256 B=16 ctx=8192 3% slower
 * than the combine warp by warp, with 25 against 9 KiB per group.) */
static int combine_slices(const plan *pl) {
  if (pl->stages) return 1;
  const int dp = padded_d(pl), nw = pl->WG / 32;
  const int fit = 8192 / (pl->RB * dp * 4 > 0 ? pl->RB * dp * 4 : 1);
  const int n = nw / 2 < fit ? nw / 2 : fit;
  return n > 1 ? n : 1;
}

/* The tensor-core form's work-groups a compute unit holds at once, from the
 * tuning's warps per unit at up to 8 rows x 128 (padded) head dims of
 * accumulators a warp: fewer in proportion beyond, but never under half (a
 * work-item holds at most 255 registers), rounded to the nearest whole count
 * of groups (the compiler fits the registers to one). 0: no count, the split
 * target rounds up instead. H200, ptxas through -cl-nv-verbose, groups of 4
 * warps: 128 registers at 8 rows and D <= 128 (4 groups per SM), 165-168 at
 * D = 160 / 192 (3), 244 at D = 256 and 212-254 at 16 rows (Mq = 4 causal,
 * 2); fp8's groups of 8 warps 126 (2). A split count that overfills them runs
 * a second, mostly idle round: B=16 ctx=8192, Hkv=8, D=256 takes 334 us with
 * 3 splits (384 groups for 264 places), 290 with 2. */
static int mma_resident(const clattn_tuning *t, const plan *pl) {
  const int64_t w = t->decode_mma_warps_per_cu, wgw = pl->WG / 32;
  if (!w || wgw < 1) return 0;
  const int64_t acc = (int64_t)pl->RB * padded_d(pl);
  int64_t twice = acc > 1024 ? 2 * w * 1024 / acc : 2 * w; /* twice the warps */
  if (twice < w) twice = w;
  const int64_t n = (twice + wgw) / (2 * wgw);
  return n > 1 ? (int)n : 1;
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
  if (pl->pr.kv_q == 1 && !(buffer_ends16(&p->k) && buffer_ends16(&p->v))) return;
  /* a block's row offsets are 32-bit byte counts in the kernel */
  if (max_key_stride(p, pl->pr.kv_q) >= ((int64_t)1 << 25)) return;
  const size_t chunks = pl->pr.kv_q == 1 ? (size_t)(4 * (pl->pr.kv_groups + pl->pr.D / 8) + 27) / 16 : (size_t)pl->pr.D / 16;
  const size_t slot = (2 * 16 * 4 * chunks + (pl->pr.kv_q == 2 ? 32 : 0) + 4) * 4, nw = (size_t)pl->WG / 32;
  const size_t other = (size_t)pl->RB * pl->pr.D * 4 + (3 * nw + 3) * pl->RB * 4 + (pl->emulate ? 64 * (size_t)pl->WG : 0) +
                       (size_t)pl->RB * padded_d(pl) * 4 /* combine_slices: 1 */ + 256;
  int n = want < 6 ? want : 6;
  while (n >= 2 && nw * n * slot + other > ctx->profile.local_mem_bytes) n--;
  if (n >= 2) {
    pl->stages = n;
    pl->nblk = 1;
  }
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
  /* spans that tile each pair where ones at most 1/16 longer do: a span
   * that ends one pair and starts the next restarts its loads (H200, int4
   * paged B=8 ctx=32768: 34 parts of 63 blocks 136 us, 32 of 64 127); k,
   * the spans per pair, is about slots / pairs */
  for (int64_t k = nb / wb; k >= 1 && nb / k <= wb + wb / 16; k--)
    if (nb % k == 0 && nb / k >= wb) {
      wb = nb / k;
      break;
    }
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

/* The tensor-core form's fewest keys per split (its own where the tuning sets one). */
static int mma_min_keys(const clattn_tuning *t) {
  return t->decode_mma_min_keys ? t->decode_mma_min_keys : t->decode_min_keys_per_split;
}

/* The (sequence, KV head group, row block) groups: work-groups per split. */
static int64_t group_count(const plan *pl) { return (int64_t)pl->pr.B * head_groups(pl) * pl->nrb; }

/* Few (sequence, KV head, row block) groups (B = 1: 8 for 132 SMs): 8 warps
 * per group, one group per unit, split after two iterations of keys (H200,
 * B=1 ctx=16384: 56 against 68 us with 4 warps, 2 per SM). Where the tuning
 * asks, also where the keys are too few for the 4-warp groups' splits (of
 * decode_mma_min_keys) to fill the units and one 8-warp group per unit
 * still splits each in two or more; the split count then fills the units
 * once (H200, B=4 ctx=8192: 8 splits of 4-warp groups, 256 groups, 68 us;
 * 4 splits of 8 warps 62). Tensor cores, float K/V. Where the groups are
 * few, their 8 warps hold too few loads to cover the latency: 2 blocks in
 * flight per warp where a warp's accumulators are at most 8 x 128 (H200,
 * f16 B=1 ctx=131072 / 32768 / 16384: 156 / 64-66 / 50-51 us against 167-171
 * / 69 / 54-55 with 1, D=64 ctx=32768 47-50 against 56-58; the short-key
 * groups of B=4 / 8 1-3% slower with 2, 4-warp groups at B=16 154 -> 167). */
static void plan_small(const clattn_context *ctx, plan *pl) {
  const clattn_tuning *t = &ctx->tuning;
  const int64_t few = group_count(pl), cu = ctx->profile.compute_units;
  const int64_t fill4 = cu * mma_resident(t, pl) / (few > 0 ? few : 1),
                by_len4 = div_up(pl->pr.kv_cap, mma_min_keys(t));
  const bool short_keys = t->decode_mma_small_short && fill4 > by_len4 && few * 2 <= cu;
  const bool few_groups = few * 8 <= cu;
  if (!pl->pr.kv_q && t->decode_mma_small_wg >= 32 && (few_groups || short_keys) &&
      (size_t)t->decode_mma_small_wg <= ctx->profile.max_work_group_size) {
    pl->small = true;
    pl->WG = t->decode_mma_small_wg;
    if (few_groups && t->decode_mma_small_blocks && pl->RB * padded_d(pl) <= 1024)
      pl->nblk = t->decode_mma_small_blocks;
  }
}

/* Float groups that are not few, whose warps hold more than 8 x 128
 * accumulators, of decode_mma_wide_wg work-items: at D over 128 (padded)
 * always, at 16 rows (Mq = 4 causal) where 4-warp groups would split the
 * keys in two or more. H200 (f16, Hq=32 Hkv=8, us, 4 warps -> 8): D = 160
 * / 192 / 256 at B=64 ctx=32768 2931 -> 2663 / 3326 -> 3000 / 3816 ->
 * 3816, at B=16 ctx=8192 193 -> 193 / 221 -> 214 / 289 -> 267, at B=8
 * ctx=32768 343 -> 359 / 400 -> 403 / 535 -> 529; Mq = 4 causal at B=4 /
 * 16 ctx=8192 90 -> 74 / 171 -> 151 (one split, not 2), at B=64 517 -> 541
 * (one split either way: kept at 4 warps). Also head dims padded in
 * registers (D % 64 != 0), whose warps spend a share of their time on the
 * padding's products: H100 (f16 unless said, us, 4 warps -> 8) at B=16
 * ctx=8192 D = 80 145.5 -> 135.3, bf16 145.2 -> 134.9, D = 96 155.7 ->
 * 154.8, 112 185.2 -> 182.7; D = 80 at B=4 51.9 -> 49.9, at B=64 ctx=32768
 * 2158 -> 2101, Mq = 4 causal level (tools/PERF.md session 36). */
static void plan_wide(const clattn_context *ctx, plan *pl) {
  const int wg = ctx->tuning.decode_mma_wide_wg;
  const bool padded = padded_d(pl) != pl->pr.D;
  if (pl->pr.kv_q || pl->small || wg < 32 || wg % 32 || (size_t)wg > ctx->profile.max_work_group_size ||
      (pl->RB * padded_d(pl) <= 1024 && !padded))
    return;
  const int64_t groups = group_count(pl);
  if (padded || padded_d(pl) > 128 || 2 * groups <= (int64_t)ctx->profile.compute_units * mma_resident(&ctx->tuning, pl))
    pl->WG = wg;
}

/* The portable kernel's score pass: a key's lanes reading it together where
 * the lane sum is cheap (see cl/lanes.clh), else K tiles staged in local
 * memory (aligned float K, or quantized K) when the tile fits beside the
 * rest (the lane-per-chunk pass reads K coalesced already); quantized V's
 * rows in flight. */
static void plan_portable(const clattn_context *ctx, plan *pl) {
  const clattn_tuning *t = &ctx->tuning;
  const int nc = pl->pr.D / 8;
  pl->lane_keys = t->decode_lane_keys && (nc & (nc - 1)) == 0 && pl->WG % nc == 0;
  const size_t es = clattn_dtype_size(pl->pr.kvdt);
  const size_t kstage_bytes = pl->pr.kv_q ? (size_t)pl->WG * (row_width(&pl->pr) | 1) * 4
                                       : (size_t)pl->WG * (pl->pr.D * es / 16 + 1) * 16;
  const size_t other_bytes = (size_t)pl->RB * (pl->pr.D + 2 * pl->WG + 3 + pl->pr.kv_groups) * 4;
  const bool want = pl->pr.kv_q ? t->decode_kstage_quant : (t->decode_kstage && pl->aligned);
  pl->kstage = want && !pl->lane_keys && kstage_bytes + other_bytes <= ctx->profile.local_mem_bytes;
  pl->vuq = t->decode_quant_value_rows ? t->decode_quant_value_rows : 8;
  /* the halves: each needs whole warps / wavefronts, the value half a whole row of chunks */
  const int half = pl->WG / 2, simd = (int)ctx->profile.simd_width;
  pl->roles = t->decode_port_roles && !pl->lane_keys && !pl->kstage && half >= nc && (simd <= 1 || half % simd == 0);
  /* registers allocated for more groups per unit, where the device takes it */
  clattn_occupancy_option(ctx, t->decode_port_waves, pl->occupancy, sizeof pl->occupancy);
}

/* The portable score pass's quantized K row in 16-byte loads (one
 * work-item's whole row; neither lanes nor staging): rows on 16 bytes
 * (whole 16-byte words, or a buffer that ends on 16 bytes), else, where the
 * tuning allows, the words that hold a row, which may reach 12 bytes past
 * it: its buffer must end on 16 bytes. pl->kq_wide is the kernel's KQ_WIDE
 * (1: rows on 16 bytes, 2: the shifted words), numbered as the tuning's
 * decode_kq_wide (1: rows on 16 bytes only, 2: the shift too). */
static void plan_kq_wide(const clattn_tuning *t, const clattn_decode_params *p, plan *pl) {
  if (!pl->pr.kv_q || !t->decode_kq_wide || pl->lane_keys || pl->kstage) return;
  const bool ends16 = buffer_ends16(&p->k);
  if (aligned_to(&p->k, 16) && (row_width(&pl->pr) % 4 == 0 || ends16))
    pl->kq_wide = 1;
  else if (ends16 && t->decode_kq_wide == 2)
    pl->kq_wide = 2;
}

clattn_status clattn_decode_plan(const clattn_context *ctx, const clattn_decode_params *p, plan *pl) {
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

  plan_portable(ctx, pl);

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
    pl->lane_keys = pl->kstage = pl->roles = false;
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
    plan_small(ctx, pl);
    plan_wide(ctx, pl);
    pl->rows32 = max_key_stride(p, pl->pr.kv_q) < ((int64_t)1 << 27); /* strides are >= 0 (checked) */
  }

  /* The serial form where the tuning asks for it (devices that run a group
   * on one thread; not where a test forces the work-group kernel,
   * clattn_force_path(1)) and its state fits the local memory: q and the
   * accumulators of every KV head's rows, a tile of 16 keys' scores, a
   * head's tile of value weights, and (quantized rows) the rows' q sums per
   * group and a head's tile of 16 V rows' scales and shifts. */
  const size_t ng = pl->pr.kv_q == 1 ? (size_t)pl->pr.kv_groups : 1;
  const size_t serial_bytes = (size_t)pl->pr.Hkv * pl->RB * (2 * (size_t)pl->pr.D + 16 + 2) * 4 +
                              16 * (size_t)pl->RB * 4 +
                              (pl->pr.kv_q ? ((size_t)pl->pr.Hkv * pl->RB + 16 * 2) * ng * 4 : 0);
  if (!pl->mma && forced == 0 && t->decode_serial && serial_bytes <= ctx->profile.local_mem_bytes) {
    pl->serial = true;
    pl->WG = 1;
    pl->lane_keys = pl->kstage = pl->roles = false;
  }

  /* split count: fill the compute units unless fixed */
  const int64_t groups = group_count(pl);
  /* token rows: the tuning's groups per unit are of int4_heads heads; the
   * same warps per unit for groups of other sizes */
  const int tok_per_cu = pl->tokens ? t->decode_mma_int4_groups_per_cu * t->decode_mma_int4_heads / pl->tokens : 0;
  const int per_cu = pl->small ? 1
                     : pl->tokens && t->decode_mma_int4_groups_per_cu ? (tok_per_cu > 1 ? tok_per_cu : 1)
                     : pl->mma && t->decode_mma_splits_per_cu ? t->decode_mma_splits_per_cu
                                                              : t->decode_splits_per_cu;
  const int64_t target = (int64_t)ctx->profile.compute_units * per_cu;
  const int64_t resident = pl->mma && !pl->small && !pl->tokens ? mma_resident(t, pl) : 0;
  const int min_keys = pl->small                                     ? 2 * pl->WG
                       : pl->whole && t->decode_mma_whole_min_keys ? t->decode_mma_whole_min_keys
                       : pl->mma                                     ? mma_min_keys(t)
                                                                     : t->decode_min_keys_per_split;
  if (p->num_splits > 0) {
    pl->S = p->num_splits;
    pl->chunk = (int)div_up(pl->pr.kv_cap > 0 ? pl->pr.kv_cap : 1, pl->S);
    /* the tensor-core form's 16-key blocks never straddle two splits' (or pages') keys */
    if (pl->mma) pl->chunk = (int)(div_up(pl->chunk, 16) * 16);
  } else if (!(pl->tokens && plan_stream(pl, (int64_t)pl->pr.B * pl->nrb, target / head_groups(pl), min_keys,
                                          t->decode_max_splits))) {
    /* token rows and counted tensor-core groups: as many as fit the units at once */
    const int64_t g = groups > 0 ? groups : 1, fit = resident ? ctx->profile.compute_units * resident : target;
    /* (wide groups with decode_mma_small_short: filled once too) */
    int64_t s = resident || pl->tokens || (pl->small && t->decode_mma_small_short) ? fit / g : div_up(target, g);
    int64_t by_len = div_up(pl->pr.kv_cap, min_keys > 0 ? min_keys : 1);
    if (s > by_len) s = by_len;
    if (s > t->decode_max_splits) s = t->decode_max_splits;
    if (s < 1) s = 1;
    int64_t chunk = div_up(div_up(pl->pr.kv_cap > 0 ? pl->pr.kv_cap : 1, s), pl->WG) * pl->WG;
    pl->chunk = (int)chunk;
    pl->S = (int)div_up(pl->pr.kv_cap > 0 ? pl->pr.kv_cap : 1, chunk);
  }
  if (!pl->mma && !pl->serial) { /* the portable kernel's K loads */
    plan_kq_wide(t, p, pl);
    /* a tile ahead: a work-item's row in whole 16-byte words, by itself */
    pl->kpre = t->decode_port_kpre && !pl->roles && !pl->lane_keys && !pl->kstage &&
               (pl->pr.kv_q ? pl->kq_wide > 0 : pl->aligned);
  }
  /* One launch where the device has the tickets' atomics and the splits are
   * few (the tuning's most, counted in splits times query rows: one
   * work-group's merge of many splits costs more than a merge kernel; H100,
   * B=1 ctx=16384, 16 splits: Mq = 1 43.5 us in one launch against 46.2 in
   * two, Mq = 4 59.6 against 51.6), the last of a row block's work-groups
   * merges them. Token rows' groups span several heads: two launches. */
  const int atomics = ctx->profile.has_int64_atomics; /* 2: with atom_max */
  const bool one_launch = pl->S > 1 && (int64_t)pl->S * pl->pr.Mq <= t->decode_merge_last && atomics &&
                          !pl->tokens && !pl->serial;
  pl->merge_last = !one_launch ? 0 : atomics > 1 && t->decode_merge_last_max ? 2 : 1;
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
    const uint64_t tickets = 8 * (uint64_t)group_count(pl) + 8;
    if (pl->merge_last && bytes + tickets <= ctx->profile.max_alloc_bytes)
      bytes += tickets;
    else
      pl->merge_last = 0; /* none planned, or no room for the tickets: two launches */
    pl->ws_bytes = (size_t)bytes;
  }
  return CLATTN_SUCCESS;
}

void clattn_decode_plan_options(const plan *pl, bool split, char *buf, size_t size) {
  char page[160] = ""; /* a paged kernel is built for its page size (no runtime division) */
  if (pl->pr.paged) snprintf(page, sizeof page, " -DKV_PAGE_SIZE=%d", pl->pr.page_size);
  if (pl->pr.kv_q && !pl->mma && !pl->serial)
    snprintf(page + strlen(page), sizeof page - strlen(page), " -DVUQ=%d -DKQ_WIDE=%d", pl->vuq, pl->kq_wide);
  if (!pl->mma && !pl->serial)
    snprintf(page + strlen(page), sizeof page - strlen(page), "%s%s%s", pl->roles ? " -DROLES=1" : "",
             pl->kpre ? " -DKPRE=1" : "", pl->occupancy);
  if (pl->serial) /* built for its KV head count */
    snprintf(page + strlen(page), sizeof page - strlen(page), " -DSERIAL=1 -DHKV=%d", pl->pr.Hkv);
  snprintf(buf, size,
           "-DQ_DT=%s -DKV_DT=%s -DO_DT=%s -DD=%d -DWG=%d -DRB=%d -DKV_Q=%d -DKV_GROUPS=%d "
           "-DFP8_FNUZ=%d -DALIGNED=%d -DPAGED=%d -DVARLEN=%d -DCAUSAL=%d -DHAS_BIAS=%d -DSPLIT=%d "
           "-DLANE_KEYS=%d -DKSTAGE=%d -DMMA=%d -DNBLK=%d -DSTAGES=%d -DTOKENS=%d -DTWHOLE=%d "
           "-DSTREAM=%d -DROWS32=%d -DMERGE_LAST=%d -DMMA_SLICES=%d%s%s",
           clattn_dtype_cl(pl->pr.qdt), clattn_dtype_cl(pl->pr.kv_q ? CLATTN_F32 : pl->pr.kvdt),
           clattn_dtype_cl(pl->pr.odt), pl->pr.D, pl->WG, pl->RB, pl->pr.kv_q, pl->pr.kv_groups, pl->pr.fnuz,
           pl->aligned, pl->pr.paged, pl->pr.varlen, pl->pr.causal, pl->pr.bias, split, pl->lane_keys, pl->kstage,
           pl->mma, pl->nblk > 0 ? pl->nblk : 1, pl->stages, pl->tokens, pl->whole, pl->stream, pl->rows32,
           pl->merge_last, pl->mma ? combine_slices(pl) : 1, pl->emulate ? " -DMMA_EMULATE=1 -cl-opt-disable" : "",
           page);
}

/* ------------------------------------------------------------------ variants */

/* One variant: the options of plan pl, built with split-K partials or not. */
#define EMIT(pl, split)                                                                      \
  do {                                                                                       \
    clattn_decode_plan_options(&(pl), (split), opts, sizeof opts);                           \
    fn(priv, "decode.cl", opts);                                                             \
  } while (0)

/* The tensor-core form's quantized rows: int4 and fp8 straight from global
 * memory and through the ring, int4 token rows (padded, stream spans, whole). */
static void quant_mma_variants(clattn_variant_fn fn, void *priv, const plan *base_plan) {
  const plan base = *base_plan;
  char opts[512];
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
}

/* The portable form's halves and its K rows a tile ahead. */
static void port_form_variants(clattn_variant_fn fn, void *priv, const plan *base_plan) {
  const plan base = *base_plan;
  char opts[512];
  for (int f = 0; f < 4; f++) { /* the score / value halves: f16, int4 of 2 groups paged causal, fp8 varlen bias (D = 96: chunks left over), bf16 D = 256 */
    plan pl = base;
    pl.roles = true;
    pl.pr.kv_q = f == 1 ? 1 : f == 2 ? 2 : 0;
    pl.pr.kv_groups = f == 1 ? 2 : 1;
    pl.pr.paged = pl.pr.causal = f == 1;
    pl.pr.page_size = pl.pr.paged ? 16 : 0;
    pl.pr.varlen = pl.pr.bias = f == 2;
    pl.pr.D = f == 2 ? 96 : f == 3 ? 256 : 128;
    pl.pr.qdt = pl.pr.kvdt = pl.pr.odt = f == 3 ? CLATTN_BF16 : CLATTN_F16;
    pl.aligned = f == 0 || f == 3;
    pl.merge_last = f == 0;
    EMIT(pl, f != 2);
  }
  for (int f = 0; f < 4; f++) { /* K rows a tile ahead: f16, bf16 D = 256 paged causal, int4 (shifted words) bias, fp8 fnuz D = 96 varlen */
    plan pl = base;
    pl.kpre = true;
    pl.pr.kv_q = f == 2 ? 1 : f == 3 ? 2 : 0;
    pl.pr.fnuz = f == 3;
    pl.kq_wide = f == 2 ? 2 : f == 3 ? 1 : 0;
    pl.pr.paged = pl.pr.causal = f == 1;
    pl.pr.page_size = pl.pr.paged ? 16 : 0;
    pl.pr.bias = f == 2;
    pl.pr.varlen = f == 3;
    pl.pr.D = f == 1 ? 256 : f == 3 ? 96 : 128;
    pl.pr.qdt = pl.pr.kvdt = pl.pr.odt = f == 1 ? CLATTN_BF16 : CLATTN_F16;
    pl.aligned = f < 2;
    EMIT(pl, f != 3);
  }
}

void clattn_decode_variants(clattn_variant_fn fn, void *priv) {
  static const clattn_dtype fl[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  plan base;
  memset(&base, 0, sizeof base);
  base.pr.qdt = base.pr.kvdt = base.pr.odt = CLATTN_F16;
  base.pr.D = 128;
  base.WG = 128;
  base.RB = 4;
  base.vuq = 8;
  base.pr.kv_groups = 1;
  char opts[512];
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
    pl.kq_wide = g == 4 ? 1 : 2; /* 16-byte loads: rows of 80 bytes on 16, of 68 / 72 / 96 anywhere */
    EMIT(pl, g & 1);
    pl.kq_wide = 0;
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
    pl.kq_wide = 1 + fnuz;
    EMIT(pl, fnuz);
    snprintf(pl.occupancy, sizeof pl.occupancy, " -DCLATTN_AMD_WAVES_PER_EU=5"); /* AMD's attribute */
    EMIT(pl, 1);
    pl.occupancy[0] = '\0';
    pl.kq_wide = 0;
    pl.kstage = 1;
    EMIT(pl, fnuz);
  }
  port_form_variants(fn, priv, &base);
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
    pl.merge_last = f == 1 ? 2 : 1; /* (the tensor-core f16 one with the tickets' atom_max) */
    pl.pr.varlen = f == 0;
    pl.mma = pl.emulate = pl.aligned = f > 0;
    pl.RB = f > 0 ? 8 : pl.RB;
    pl.pr.kv_q = f == 2;
    EMIT(pl, 1);
    if (f == 1) { /* the small form: 8 warps, 2 blocks in flight */
      pl.WG = 256;
      pl.nblk = 2;
      EMIT(pl, 1);
    }
  }
  quant_mma_variants(fn, priv, &base);
#undef EMIT
}
