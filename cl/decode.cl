/* Split-K decode attention: the partial kernel.
 *
 * One work-group per (split, KV head x block of query rows, sequence). The
 * rows of a block are the G = Hq / Hkv query heads sharing the KV head, times
 * the Mq queries of the sequence, so each K/V tile is read once for all of
 * them. A tile is WG keys:
 *   1. scores: work-item t takes key t of the tile, dots it with every row's
 *      q (kept in local memory, pre-scaled by scale * log2 e) in 8-element
 *      chunks, and raises the tile's row maxima with a local atomic max;
 *   2. probabilities: each work-item turns its own scores into
 *      p = exp2(s - m) against the new running max m (one exp per score);
 *   3. values: work-item (ks, c) accumulates the 8 columns c of V over the
 *      keys ks, ks + NS, ... with the probabilities from local memory.
 * Every work-item keeps the same running max, so the key subsets' partial
 * sums combine by plain addition at the end. Scores and maxima are double
 * buffered by tile parity: three barriers per tile.
 *
 * Variants (per-device choices in host/params.c, all tested on every device):
 *   LANE_KEYS  the score pass with NC lanes per key (coalesced reads, lane sums
 *              from lanes.clh) instead of a work-item per key;
 *   KSTAGE     the K tile copied to local memory first, with coalesced loads;
 *   ROLES      the group's first half scores tile i while the second takes
 *              tile i - 1's values (tiles of WG / 2 keys, two barriers a
 *              tile), so the two passes' loads are in flight together;
 *   KV_Q       int4 / fp8 rows read packed: the affine map of a row's values
 *              is folded into the dot products and accumulators;
 *   MMA        the tensor-core form (decode_mma.clh, same arguments): warps of
 *              mma.sync products straight from global K/V; f16/bf16 q with
 *              K/V of that dtype, int4 (one group) or fp8, D % 64 == 0.
 *   SERIAL     the serial form (decode_serial.clh, same arguments): one
 *              work-item per split walks its keys in order over whole token
 *              rows (every KV head), for devices that run a group on one thread.
 * On the H200 the tensor-core form is used where it applies, the plain form
 * elsewhere (tools/PERF.md).
 *
 * With SPLIT the group writes a normalised partial (o, lse) in f32 that the
 * merge kernel (merge.cl) reduces; otherwise it writes o (and lse) directly.
 */
#include "args.clh"
#include "softmax.clh"
#include "kvaddr.clh"
#include "seq.clh"
#include "quant.clh"
#include "lanes.clh"

#ifndef Q_DT
#define Q_DT f32
#endif
#ifndef KV_DT
#define KV_DT f32
#endif
#ifndef O_DT
#define O_DT f32
#endif
#ifndef D
#define D 64 /* head dim, a multiple of 8 up to 256 */
#endif
#ifndef WG
#define WG 64 /* work-items per group = keys per tile */
#endif
#ifndef RB
#define RB 4 /* query rows per group */
#endif
#ifndef VU
#define VU 4 /* value rows in flight per work-item */
#endif
#ifndef VUQ
#define VUQ 8 /* the same for int4 / fp8 rows, kept as raw words (decode_quant_value_rows) */
#endif
#ifndef LANE_KEYS
#define LANE_KEYS 0 /* 1: scores with NC lanes per key (NC a power of two); 0: a work-item per key */
#endif
#ifndef KU
#define KU 4 /* key rows in flight per work-item in the LANE_KEYS score pass */
#endif
#ifndef KSTAGE
#define KSTAGE 0 /* 1: each K tile is first copied to local memory with coalesced loads (aligned float K) */
#endif
#ifndef KV_Q
#define KV_Q 0 /* 0: float K/V; 1: int4; 2: fp8 */
#endif
#ifndef KV_GROUPS
#define KV_GROUPS 1
#endif
#ifndef KQ_WIDE
#define KQ_WIDE 0 /* quantized K in the score pass: 1 rows that start on 16 bytes; 2 a row read as the 16-byte words holding it (its buffer ends on 16 bytes) */
#endif
#ifndef ALIGNED
#define ALIGNED 0 /* K/V rows 16-byte aligned: wide loads */
#endif
#ifndef PAGED
#define PAGED 0
#endif
#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef MERGE_LAST
#define MERGE_LAST 0 /* 1: with SPLIT, the last work-group of a sequence's row block merges the splits */
#endif
#ifndef MMA
#define MMA 0 /* 1: the tensor-core form (decode_mma.clh): f16/bf16 q and K/V, D a multiple of 64 */
#endif
#ifndef SERIAL
#define SERIAL 0 /* 1: the serial form (decode_serial.clh): a work-item per split, whole token rows */
#endif
#ifndef ROLES
#define ROLES 0 /* 1: the portable form's score and value passes by the group's two halves, a tile apart */
#endif
#ifndef KPRE
#define KPRE 0 /* 1: the portable form's K row of the next tile loaded during this tile's values */
#endif

#define NC (D / 8)   /* 8-element chunks per row */
#define TILE (ROLES ? WG / 2 : WG) /* keys per tile */
#define NS (TILE / NC)               /* key subsets in the value pass */
#define LOG2E 1.4426950408889634f

#if SPLIT
#define OUT_DT f32
#else
#define OUT_DT O_DT
#endif

/* K/V chunk loads. KV_RAW8 gives the 8 values of chunk c before the row's
 * affine map and KV_SS its (scale, shift): quantized rows fold the map into
 * the dot products and accumulators (scale * sum q.code + shift * sum q)
 * instead of dequantizing every element. KV_LOAD8 is the dequantized chunk.
 *   float: the values, (1, 0)
 *   int4:  the codes 0..15, the group's scale-shift word (first KV_GROUPS words)
 *   fp8:   the E4M3 values, the row's word from its own tensor (rss) */
#if KV_Q == 0
#define KV_ELT ELT(KV_DT)
#if ALIGNED
#define KV_RAW8(p, row, c) LD8A(KV_DT, p, (row) + (c)*8)
#else
#define KV_RAW8(p, row, c) LD8(KV_DT, p, (row) + (c)*8)
#endif
#define KV_SS(p, row, c, rss) ((float2)(1.0f, 0.0f))
#define KV_LOAD8(p, row, c, rss) KV_RAW8(p, row, c)
#else
/* KV_WORD: the words of chunk c as loaded, KV_WORD8 their 8 values */
#define KV_ELT uint
#if KV_Q == 1
#define KV_WORD_T uint
#define KV_WORD_ZERO 0u
#define KV_WORD(p, row, c) ((p)[(row) + KV_GROUPS + (c)])
#define KV_WORD8(w) int4_codes8(w)
#define KV_SS(p, row, c, rss) scale_shift_unpack((p)[(row) + (c) / (NC / KV_GROUPS)])
#else
#define KV_WORD_T uint2
#define KV_WORD_ZERO ((uint2)(0u))
#define KV_WORD(p, row, c) vload2(0, (p) + (row) + 2 * (c))
#define KV_WORD8(w) fp8_values8(w)
#define KV_SS(p, row, c, rss) (rss)
#endif
#define KV_RAW8(p, row, c) KV_WORD8(KV_WORD(p, row, c))
static inline float8 affine8(float8 x, float2 ss) { return fma(x, (float8)(ss.x), (float8)(ss.y)); }
#define KV_LOAD8(p, row, c, rss) affine8(KV_RAW8(p, row, c), KV_SS(p, row, c, rss))
#endif
/* scale-shift groups per row (each NC / NG chunks) */
#if KV_Q == 1
#define NG KV_GROUPS
#else
#define NG 1
#endif

/* qs_l[i] = the sum of the (scaled) q elements of group i % NG of row i / NG
 * of the rows q_l holds (D each); a quantized key's shift enters its score
 * as shift times this sum. A macro: as a function, clang placed the
 * portable kernel's blocks otherwise (tools/ptx_snapshot.sh). */
#define Q_GROUP_SUM(qs_l, q_l, i)                                                                \
  do {                                                                                           \
    float sum_ = 0.0f;                                                                           \
    for (int d_ = 0; d_ < D / NG; d_++) sum_ += (q_l)[((i) / NG) * D + ((i) % NG) * (D / NG) + d_]; \
    (qs_l)[i] = sum_;                                                                            \
  } while (0)

/* Raises the tile's running max of a row with this work-item's score. Native
 * lanes combine the warp first (one atomic per warp, not per work-item: the
 * atomics of one row all hit one address and serialize). The whole group
 * calls it. */
#define RAISE_MAX(slot, s)                                                                   \
  do {                                                                                       \
    if (LANES_NATIVE) {                                                                      \
      const float wmax_ = simd_max_or_self(s);                                               \
      if (get_local_id(0) % CLATTN_SIMD == 0 && wmax_ != -INFINITY)                          \
        atomic_max((slot), ord_of(wmax_));                                                   \
    } else if ((s) != -INFINITY) {                                                           \
      atomic_max((slot), ord_of(s));                                                         \
    }                                                                                        \
  } while (0)
#if LANES_NATIVE
#define simd_max_or_self(x) simd_max(x)
#else
#define simd_max_or_self(x) (x)
#endif

/* A quantized K row's int32 words: int4's scale-shift words and codes, fp8's codes. */
#if KV_Q == 1
#define KQ_X (KV_GROUPS + NC)
#else
#define KQ_X (2 * NC)
#endif
#if KSTAGE && KV_Q
/* A staged quantized K row: the row stride odd so that the work-items
 * reading different rows hit different banks. */
#define KQ_STRIDE (KQ_X | 1)
#endif
#if (KSTAGE || KPRE) && !KV_Q
/* A float K row as 16-byte words (16-byte aligned rows), 8 elements each for
 * f16/bf16, 4 for f32: kwords8 gives chunk c of the row's words w. */
#define KE_f32 4
#define KE_f16 8
#define KE_bf16 8
#define KWORD_ELEMS CAT(KE_, KV_DT)
#define KW (D / KWORD_ELEMS)
#define kwords8_f32(w, c) ((float8)(as_float4((w)[2 * (c)]), as_float4((w)[2 * (c) + 1])))
#define kwords8_f16(w, c) f16x8_to_float8((w)[c])
#define kwords8_bf16(w, c) bf16x8_to_float8((w)[c])
#define kwords8(w, c) CAT(kwords8_, KV_DT)(w, c)
#endif
#if KSTAGE && !KV_Q
/* A staged K row: one word of padding per row keeps a quarter-warp's reads of
 * different rows on different banks. */
#define KSTRIDE (KW + 1)
#endif

#if KQ_WIDE && KV_Q && !KSTAGE
/* The score pass's quantized K row (a work-item's whole row) in 16-byte
 * loads, not word by word (fp8: 8 bytes): a warp's load instruction then
 * fetches four times the bytes (each instruction touches one line per key
 * either way). KQ_WIDE 1: rows start on 16 bytes. KQ_WIDE 2: rows start on
 * any word (int4's 68 bytes): the 16-byte words from the one at or before
 * the row hold it, and two selects a word shift it into place; the last may
 * reach 12 bytes past the row, inside the buffer where its size is a
 * multiple of 16 (the host checks). H100, CLATTN_PORTABLE=1, B=64
 * ctx=32768: int4g4 (80-byte rows) 3.40 -> 2.79 ms, fp8 4.86 -> 4.10; int4
 * of one group (the shift) 2.66 -> 2.68, paged B=16 0.265 -> 0.270: the
 * preset (decode_kq_wide = 1, numbered as here) takes the first only
 * (tools/PERF.md). */
#define KQ_WIN ((KQ_X + 6) / 4) /* 16-byte words holding a row at any word offset */
CLATTN_INLINE void kq_row_words(__global const uint *k, long row, uint w[KQ_X]) {
#if KQ_WIDE == 1
  const __global uint4 *p = (const __global uint4 *)(k + row);
#pragma unroll
  for (int i = 0; i < KQ_X; i += 4) {
    const uint4 x = p[i / 4];
    w[i] = x.x;
    if (i + 1 < KQ_X) w[i + 1] = x.y;
    if (i + 2 < KQ_X) w[i + 2] = x.z;
    if (i + 3 < KQ_X) w[i + 3] = x.w;
  }
#else
  const int m = (int)(row & 3);
  const __global uint4 *p = (const __global uint4 *)(k + (row - m));
  uint a[4 * KQ_WIN];
#pragma unroll
  for (int i = 0; i < KQ_WIN; i++) {
    const uint4 x = p[i];
    a[4 * i] = x.x;
    a[4 * i + 1] = x.y;
    a[4 * i + 2] = x.z;
    a[4 * i + 3] = x.w;
  }
#pragma unroll
  for (int i = 0; i < 4 * KQ_WIN - 1; i++) a[i] = (m & 1) ? a[i + 1] : a[i];
#pragma unroll
  for (int i = 0; i < KQ_X; i++) w[i] = (m & 2) ? a[i + 2] : a[i];
#endif
}
#if KV_Q == 1
#define KW_RAW8(w, c) int4_codes8((w)[KV_GROUPS + (c)])
#else
#define KW_RAW8(w, c) fp8_values8((uint2)((w)[2 * (c)], (w)[2 * (c) + 1]))
#endif
#endif

/* Order-preserving map of floats to ints, so atomic_max on ints is a float max. */
static inline int ord_of(float f) {
  const int i = as_int(f);
  return i >= 0 ? i : i ^ 0x7fffffff;
}
static inline float float_of_ord(int i) { return as_float(i >= 0 ? i : i ^ 0x7fffffff); }

/* The queries and keys of sequence b: mq queries from packed row q0 (varlen;
 * none where its q_start entries are invalid, see seq.clh) or its own rows
 * (q_base: the offset of its first query row), n keys, its kv_len clamped to
 * the cache. An invalid q_start range or a kv_len past the cache raises the
 * error flag (from the one work-item that reports). */
typedef struct dseq {
  int mq, q0, n;
  long q_base;
} dseq;
static inline dseq decode_seq(int b, int Mq, long sqb, long sqm, __global const int *q_start,
                              int total_q, __global const int *kv_len, int kv_cap,
                              __global int *err_flag, bool report) {
  dseq d;
  d.mq = Mq;
  d.q0 = 0;
  d.q_base = b * sqb;
#if VARLEN
  if (!seq_q_rows(q_start, b, total_q, Mq, &d.q0, &d.mq) && report) *err_flag = 1;
  d.q_base = d.q0 * sqm;
#endif
  d.n = kv_len ? kv_len[b] : kv_cap;
  if (d.n > kv_cap && report) *err_flag = 1;
  d.n = clamp(d.n, 0, kv_cap);
  return d;
}

/* ---------------------------------------------------------------- hooks
 *
 * What every form of the kernel (portable and tensor-core) calls for one
 * score, so a variant of the logits or the mask is one function here, not a
 * branch in each loop. Logits are in log2 units (q was scaled by scale log2 e). */

/* The additive terms of the logit of query m of head h, key j of sequence
 * b, besides q . k: the bias (HAS_BIAS only). A form may start its sum from
 * them (the portable score pass does). Called for keys and rows that exist. */
static inline float decode_logit_terms(__global const float *bias, clattn_view4 bv, int b, int h, int m,
                                       int j) {
  return LOG2E * bias[bv.off + b * bv.s0 + h * bv.s1 + m * bv.s2 + j * bv.s3];
}

/* The logit of query m of head h, key j of sequence b, after q . k: x plus
 * its additive terms. Called for keys and rows that exist. */
static inline float decode_logit(float x, __global const float *bias, clattn_view4 bv, int b, int h,
                                 int m, int j) {
#if HAS_BIAS
  x += decode_logit_terms(bias, bv, b, h, m, j);
#else
  (void)bias, (void)bv, (void)b, (void)h, (void)m, (void)j;
#endif
  return x;
}

/* Writes a block's rows from local memory: o = acc / l (0 where l is 0; NaN
 * inputs stay NaN) and lse = (m + log2 l) ln 2 (-inf where l is 0), m in log2
 * units. Row r of the block is query (r0 + r) / G of head hk * G + (r0 + r) % G;
 * o_base and lse_base point at the sequence (and split). The whole group calls it. */
static inline void store_block_rows(__local const float *acc, __local const float *l_l,
                             __local const float *m_l, __global ELT(OUT_DT) *o, long o_base,
                             long som, long soh, long sod, __global float *lse, long lse_base,
                             long slh, long slm, long om0, int hk, int G, int r0, int rows) {
  for (int i = get_local_id(0); i < RB * D; i += WG) {
    const int r = i / D, d = i % D, rr = r0 + r;
    if (rr >= rows) continue;
    const float l = l_l[r];
    const float x = (l != 0.0f) ? acc[i] / l : 0.0f;
    ST(OUT_DT, o, o_base + (om0 + rr / G) * som + (hk * G + rr % G) * soh + d * sod, x);
  }
  const int r = get_local_id(0), rr = r0 + r;
  if (lse && r < RB && rr < rows) {
    const float l = l_l[r];
    lse[lse_base + (hk * G + rr % G) * slh + (om0 + rr / G) * slm] =
        state_lse2(m_l[r], l);
  }
}

#include "decode_merge.clh"

/* The partial kernel's parameters, the same for both forms: the buffers,
 * then the views and scalars in one struct (args.clh, the host's twin);
 * fo, flse and the tickets are MERGE_LAST's (NULL otherwise). */
#define DECODE_PARTIAL_PARAMS                                                                \
  __global const ELT(Q_DT) *q, __global const KV_ELT *k, __global const KV_ELT *v,            \
      __global const uint *k_ss, __global const uint *v_ss, __global const int *kv_len,       \
      __global const float *bias, __global const int *block_table, __global const int *q_start, \
      __global ELT(OUT_DT) *o, __global float *lse, __global int *err_flag,                    \
      __global ELT(O_DT) *fo, __global float *flse, volatile __global ulong *tickets,          \
      const clattn_decode_args A

/* The views and scalars under their names in the kernels (the last three
 * only the tensor-core form's STREAM spans read: the row blocks per
 * sequence, all (sequence, row block) pairs' 16-key blocks, the parts); the
 * caller's i32 vectors moved to their offsets. */
#define DECODE_UNPACK()                                                                      \
  const long q_off = A.q.off, sqb = A.q.s0, sqm = A.q.s1, sqh = A.q.s2, sqd = A.q.s3;          \
  const long k_off = A.k.off, sk0 = A.k.s0, sk1 = A.k.s1, sk2 = A.k.s2;                        \
  const long v_off = A.v.off, sv0 = A.v.s0, sv1 = A.v.s1, sv2 = A.v.s2;                        \
  const long kss_off = A.kss.off, skss0 = A.kss.s0, skss1 = A.kss.s1, skss2 = A.kss.s2;        \
  const long vss_off = A.vss.off, svss0 = A.vss.s0, svss1 = A.vss.s1, svss2 = A.vss.s2;        \
  const long bias_off = A.bias.off, sbb = A.bias.s0, sbh = A.bias.s1, sbm = A.bias.s2,         \
             sbn = A.bias.s3;                                                                  \
  const long o_off = A.o.off, sob = A.o.s0, som = A.o.s1, soh = A.o.s2, sod = A.o.s3,          \
             o_split = A.o_split;                                                              \
  const long lse_off = A.lse.off, slb = A.lse.s0, slh = A.lse.s1, slm = A.lse.s2,              \
             lse_split = A.lse_split;                                                          \
  const long bt_stride = A.bt_stride, blocks = A.blocks;                                       \
  const int kv_cap = A.kv_cap, max_pages = A.max_pages, page_size = A.page_size,               \
            num_pages = A.num_pages, total_q = A.total_q, Mq = A.Mq, Hq = A.Hq, Hkv = A.Hkv,   \
            chunk = A.chunk, nrb = A.nrb, slots = A.slots;                                     \
  const float scale = A.scale;                                                                 \
  if (kv_len) kv_len += A.kvl_off;                                                             \
  DECODE_REBASE_PAGED(block_table, A.bt_off);                                                  \
  DECODE_REBASE_VARLEN(q_start, A.qs_off);                                                     \
  err_flag += A.flag_off

/* The block table and q_start exist exactly when PAGED and VARLEN: moved
 * unconditionally (a NULL test kept in the loop cost NVIDIA's compiler a
 * select per page). */
#if PAGED
#define DECODE_REBASE_PAGED(p, off) p += (off)
#else
#define DECODE_REBASE_PAGED(p, off) (void)(p)
#endif
#if VARLEN
#define DECODE_REBASE_VARLEN(p, off) p += (off)
#else
#define DECODE_REBASE_VARLEN(p, off) (void)(p)
#endif

#if MMA
#include "decode_mma.clh"
#elif SERIAL
#include "decode_serial.clh"
#else
#include "decode_portable.clh"
#endif /* MMA, SERIAL */
