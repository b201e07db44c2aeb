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

#define NC (D / 8)   /* 8-element chunks per row */
#define NS (WG / NC) /* key subsets in the value pass */
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
#elif KSTAGE
/* A staged K row: 16-byte words, 8 elements each for f16/bf16, 4 for f32.
 * One word of padding per row keeps a quarter-warp's reads of different rows
 * on different banks. */
#define KE_f32 4
#define KE_f16 8
#define KE_bf16 8
#define KWORD_ELEMS CAT(KE_, KV_DT)
#define KW (D / KWORD_ELEMS)
#define KSTRIDE (KW + 1)
static inline float8 kword8_f32(__local const uint4 *row, int c) {
  return (float8)(as_float4(row[2 * c]), as_float4(row[2 * c + 1]));
}
static inline float8 kword8_bf16(__local const uint4 *row, int c) { return bf16x8_to_float8(row[c]); }
static inline float8 kword8_f16(__local const uint4 *row, int c) {
  const uint4 w = row[c];
  return (float8)(half2_bits_to_float2(w.x), half2_bits_to_float2(w.y), half2_bits_to_float2(w.z),
                  half2_bits_to_float2(w.w));
}
#define kstaged8(row, c) CAT(kword8_, KV_DT)((row), (c))
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
/* ---------------------------------------------------------------- the portable kernel's phases
 *
 * Per work-group: q rows into local memory (port_q), then per tile of WG
 * keys: K staged (port_stage_k, KSTAGE) and the scores (port_scores, or
 * port_scores_lanes with LANE_KEYS, both calling the logit hook), the
 * softmax step (port_softmax), the values (port_values); then the key
 * subsets combined (port_combine) and the rows stored. */

/* Where the work-group's work lies: its sequence, KV head and rows, the
 * keys [.., hi), this work-item and its (key subset, chunk) in the value pass. */
typedef struct port_at {
  int b, hk, r0, G, rows, hi, tid, ks, c;
  kv_layout kl, vl, kssl, vssl;
  kv_pages pg;
} port_at;

/* The block's q rows into local memory, pre-scaled by scale log2 e (zeros
 * past the sequence's rows); the whole group calls it. */
CLATTN_INLINE void port_q(__local float *q_l, __global const ELT(Q_DT) *q, long qbase, long sqm,
                          long sqh, long sqd, float scale, const port_at *at) {
  for (int i = at->tid; i < RB * D; i += WG) {
    const int r = i / D, d = i % D, rr = at->r0 + r;
    float x = 0.0f;
    if (rr < at->rows)
      x = LD(Q_DT, q, qbase + (rr / at->G) * sqm + (at->hk * at->G + rr % at->G) * sqh + d * sqd);
    q_l[i] = x * scale * LOG2E;
  }
}

#if KSTAGE
/* 0. the tile's K rows into local memory: consecutive work-items read
 * consecutive words of a row (coalesced); quantized rows word by word, float
 * rows in 16-byte words with all KW loads in flight. The whole group calls it. */
#if KV_Q
CLATTN_INLINE void port_stage_k(__local uint *kq_l, __global const KV_ELT *k, int t0,
                                const port_at *at) {
  for (int i = at->tid; i < WG * KQ_X; i += WG) {
    const int jj = i / KQ_X, w = i % KQ_X, jk = t0 + jj;
    uint val = 0u;
    if (jk < at->hi) {
      const long row = kv_row(&at->kl, &at->pg, at->b, jk, at->hk);
      if (row >= 0) val = k[row + w];
    }
    kq_l[jj * KQ_STRIDE + w] = val;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
#else
CLATTN_INLINE void port_stage_k(__local uint4 *k_l, __global const KV_ELT *k, int t0,
                                const port_at *at) {
#pragma unroll
  for (int i = at->tid; i < WG * KW; i += WG) {
    const int jj = i / KW, w = i % KW, jk = t0 + jj;
    uint4 val = (uint4)(0u);
    if (jk < at->hi) {
      const long row = kv_row(&at->kl, &at->pg, at->b, jk, at->hk);
      if (row >= 0) val = *(const __global uint4 *)(k + row + w * KWORD_ELEMS);
    }
    k_l[jj * KSTRIDE + w] = val;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
#endif
#endif

#if LANE_KEYS
/* 1. scores with a key's lanes: lane (ks, c) reads columns 8c.. of keys ks,
 * ks + NS, ... of the tile at t0 (a key's NC lanes read its row in one
 * coalesced sweep), dots them with its q columns qr, and the key's lanes sum
 * their parts; the logit hook, the mask (lim), the tile's row maxima
 * (tmax), and (paged) each key's V row. The loop is uniform over the group
 * (the portable lane sum has barriers). */
CLATTN_INLINE void port_scores_lanes(__local float (*s_l)[RB][WG], __local int (*tmax_l)[RB],
                                     __local long (*vrow_l)[WG], int par, const float8 qr[RB],
                                     __global const KV_ELT *k, __global const uint *k_ss,
                                     __global const float *bias, clattn_view4 bv, const int lim[RB],
                                     int t0, const port_at *at, __global int *err_flag) {
  const int ks = at->ks, c = at->c;
  (void)vrow_l, (void)k_ss;
  for (int it = 0; it < WG / NS; it += KU) {
    float8 kk[KU];
    bool ok[KU];
#pragma unroll
    for (int u = 0; u < KU; u++) {
      const int j = t0 + ks + (it + u) * NS;
      long row = -1;
      if (it + u < WG / NS && j < at->hi) {
        row = kv_row(&at->kl, &at->pg, at->b, j, at->hk);
        if (row < 0) *err_flag = 1; /* benign race: every writer stores 1 */
      }
      ok[u] = row >= 0;
      kk[u] = (float8)(0.0f);
      if (ok[u]) {
#if KV_Q == 2
        const float2 kss = scale_shift_unpack(k_ss[kv_row(&at->kssl, &at->pg, at->b, j, at->hk)]);
#else
        const float2 kss = (float2)(0.0f);
#endif
        kk[u] = KV_LOAD8(k, row, c, kss);
      }
    }
#pragma unroll
    for (int u = 0; u < KU; u++) {
      const int jj = ks + (it + u) * NS, j = t0 + jj;
      float part[RB];
      for (int r = 0; r < RB; r++) part[r] = dot(qr[r].lo, kk[u].lo) + dot(qr[r].hi, kk[u].hi);
      LANE_SUM_ROWS(part, RB, NC, WG, &s_l[par ^ 1][0][0]);
      if (it + u < WG / NS) { /* uniform: past the tile when KU > WG / NS */
        for (int r = 0; r < RB; r++) {
          float s = part[r];
          const int rr = at->r0 + r;
          if (ok[u] && rr < at->rows)
            s = decode_logit(s, bias, bv, at->b, at->hk * at->G + rr % at->G, rr / at->G, j);
          s = (ok[u] && j < lim[r]) ? s : -INFINITY;
          if (c == 0) s_l[par][r][jj] = s;
#if PAGED
          if (c == 0 && r == 0) vrow_l[par][jj] = ok[u] ? kv_row(&at->vl, &at->pg, at->b, j, at->hk) : -1;
#endif
          RAISE_MAX(&tmax_l[par][r], s);
        }
      }
    }
  }
}
#else
/* q . k over a chunk of 8 elements into a row's running sums of its even
 * and odd elements: FMAs only (two dot()s cost a product, three FMAs and an
 * add each, and an add to join them: 10 operations for 8 products, on
 * NVIDIA and AMD alike), two chains for latency; a pair is one packed FMA
 * on CDNA2/3 (v_pk_fma_f32). */
static inline float2 fma_chunk8(float8 q, float8 k, float2 acc) {
  acc = fma(q.s01, k.s01, acc);
  acc = fma(q.s23, k.s23, acc);
  acc = fma(q.s45, k.s45, acc);
  return fma(q.s67, k.s67, acc);
}

/* 1. scores of key t0 + tid, read whole by this work-item (from the staged
 * tile with KSTAGE): the quantized rows' scale and shift folded in per
 * group, the logit hook, the mask (lim), the tile's row maxima (tmax), and
 * (paged) the key's V row. */
CLATTN_INLINE void port_scores(__local float (*s_l)[RB][WG], __local int (*tmax_l)[RB],
                               __local long (*vrow_l)[WG], int par, __local const float *q_l,
                               __local const float *qsum_l, __local const void *kstage,
                               __global const KV_ELT *k, __global const uint *k_ss,
                               __global const float *bias, clattn_view4 bv, const int lim[RB],
                               int t0, const port_at *at, __global int *err_flag) {
  const int tid = at->tid, j = t0 + tid;
  (void)vrow_l, (void)qsum_l, (void)kstage, (void)k_ss, (void)bias, (void)bv;
#if KSTAGE && KV_Q
  __local const uint *kq_l = (__local const uint *)kstage;
#elif KSTAGE
  __local const uint4 *k_l = (__local const uint4 *)kstage;
#endif
#if PAGED
  vrow_l[par][tid] = (j < at->hi) ? kv_row(&at->vl, &at->pg, at->b, j, at->hk) : -1;
#endif
  float sc[RB];
  for (int r = 0; r < RB; r++) sc[r] = -INFINITY;
  if (j < at->hi) {
    const long row = kv_row(&at->kl, &at->pg, at->b, j, at->hk);
    if (row < 0) {
      *err_flag = 1; /* benign race: every writer stores 1 */
    } else {
#if KV_Q == 2
      const float2 kss = scale_shift_unpack(k_ss[kv_row(&at->kssl, &at->pg, at->b, j, at->hk)]);
#else
      const float2 kss = (float2)(0.0f);
#endif
      /* the sums start from the logits' additive terms: read after the
       * products, the rows' bias loads took CDNA's compiler (clang 16,
       * gfx90a / gfx940, groups of 128) to all 512 VGPRs and 264 bytes of
       * scratch, against 125 VGPRs and none (tools/check_amdgcn.py) */
      float sdot[RB];
      for (int r = 0; r < RB; r++) {
        const int rr = at->r0 + r;
        sdot[r] = 0.0f;
#if HAS_BIAS
        if (rr < at->rows)
          sdot[r] = decode_logit_terms(bias, bv, at->b, at->hk * at->G + rr % at->G, rr / at->G, j);
#endif
      }
#if KQ_WIDE && KV_Q
      uint kw[KQ_X];
      kq_row_words(k, row, kw);
#endif
#pragma unroll
      for (int g = 0; g < NG; g++) {
        float2 part[RB];
        for (int r = 0; r < RB; r++) part[r] = (float2)(0.0f);
#pragma unroll
        for (int cc = g * (NC / NG); cc < (g + 1) * (NC / NG); cc++) {
#if KSTAGE && KV_Q
          const float8 kk = KV_RAW8(kq_l, tid * KQ_STRIDE, cc);
#elif KSTAGE
          const float8 kk = kstaged8(k_l + tid * KSTRIDE, cc);
#elif KQ_WIDE && KV_Q
          const float8 kk = KW_RAW8(kw, cc);
#else
          const float8 kk = KV_RAW8(k, row, cc);
#endif
          for (int r = 0; r < RB; r++) {
            part[r] = fma_chunk8(vload8(0, q_l + r * D + cc * 8), kk, part[r]);
          }
        }
#if KV_Q
#if KSTAGE
        const float2 ss = KV_SS(kq_l, tid * KQ_STRIDE, g * (NC / NG), kss);
#elif KQ_WIDE
        const float2 ss = KV_SS(kw, 0, g * (NC / NG), kss);
#else
        const float2 ss = KV_SS(k, row, g * (NC / NG), kss);
#endif
        for (int r = 0; r < RB; r++) sdot[r] += ss.x * (part[r].x + part[r].y) + ss.y * qsum_l[r * NG + g];
#else
        for (int r = 0; r < RB; r++) sdot[r] += part[r].x + part[r].y;
#endif
      }
      for (int r = 0; r < RB; r++) sc[r] = (j < lim[r]) ? sdot[r] : -INFINITY;
    }
  }
  for (int r = 0; r < RB; r++) {
    s_l[par][r][tid] = sc[r];
    RAISE_MAX(&tmax_l[par][r], sc[r]);
  }
}
#endif

/* The V row of key t0 + jj of the tile (paged: found by the score pass). */
#if PAGED
#define V_ROW(jj) vrow_l[par][jj]
#else
#define V_ROW(jj) kv_row(&at->vl, &at->pg, at->b, t0 + (jj), at->hk)
#endif
/* The scale-shift word of scale group g of that row (quantized V) */
#if KV_Q == 1
#define V_SS_WORD(row, jj, g) v[(row) + (g)]
#elif KV_Q == 2
#define V_SS_WORD(row, jj, g) v_ss[kv_row(&at->vssl, &at->pg, at->b, t0 + (jj), at->hk)]
#endif

/* FOLD_V: quantized V rows of one scale-shift word (int4 of one group, fp8).
 * The work-item that owns key tid in the softmax step reads its V row's word
 * once and leaves p * scale for the value pass, adding p * shift to its own
 * sum; the key's NC work-items of the value pass no longer load it and form
 * both again (int4 groups keep that: their words differ by column). */
#define FOLD_V (KV_Q && NG == 1)

/* 2. the new running max (the same in every work-item, from the tile's
 * maxima), the rescale of this work-item's state, and the probability of
 * key tid in place of its score (FOLD_V: times its V row's scale), added to
 * this work-item's sum of them (port_combine adds the group's); the next
 * tile's maxima reset. */
CLATTN_INLINE void port_softmax(__local float (*s_l)[RB][WG], __local int (*tmax_l)[RB],
                                __local const long (*vrow_l)[WG], int par, float m_run[RB],
                                float l_run[RB], float8 acc[RB], float sh[RB],
                                __global const KV_ELT *v, __global const uint *v_ss, int t0,
                                const port_at *at) {
  const int tid = at->tid;
  (void)sh, (void)vrow_l, (void)v, (void)v_ss, (void)t0;
#if FOLD_V
  float2 vs = (float2)(0.0f); /* a row outside the cache has no weight (its scores are -inf) */
  const long vrow = (t0 + tid < at->hi) ? V_ROW(tid) : -1;
  if (vrow >= 0) vs = scale_shift_unpack(V_SS_WORD(vrow, tid, 0));
#endif
  for (int r = 0; r < RB; r++) {
    const float sc = s_l[par][r][tid];
    float alpha;
    const float m_new = state_step2(m_run[r], float_of_ord(tmax_l[par][r]), &alpha);
    acc[r] *= alpha;
    l_run[r] *= alpha;
#if KV_Q
    sh[r] *= alpha;
#endif
    m_run[r] = m_new;
    float p = (sc == -INFINITY) ? 0.0f : exp2(sc - m_new);
    l_run[r] += p;
#if FOLD_V
    if (p != 0.0f) { /* a weightless row stays out, as unread (a NaN scale included) */
      sh[r] += p * vs.y;
      p *= vs.x;
    }
#endif
    s_l[par][r][tid] = p;
  }
  if (tid < RB) tmax_l[par ^ 1][tid] = ord_of(-INFINITY);
}

/* 3. values: keys ks, ks + NS, ... of the tile at t0, columns 8c .. 8c + 7.
 * Float rows: VU rows loaded before any is used so their latencies overlap;
 * a row is read only when some query gives it weight (masked keys and rows
 * outside the cache are never touched). Quantized rows: a row is a word or
 * two of codes and a scale-shift word, so VUQ rows stay in flight as raw
 * words (two or three registers each, converted where used): the loads of a
 * tile's value pass are a few long round trips, not many short ones. Every
 * key before the tile's end is read (rows outside the cache never are); one
 * no query gives weight is left out when used. (Float rows kept as words
 * lose: tools/PERF.md.) FOLD_V rows: the weights are p * scale, the shifts
 * already counted. */
CLATTN_INLINE void port_values(__local const float (*s_l)[RB][WG], __local const long (*vrow_l)[WG],
                               int par, float8 acc[RB], float sh[RB],
                               __global const KV_ELT *v, __global const uint *v_ss, int t0,
                               const port_at *at) {
  const int ks = at->ks, c = at->c;
  (void)sh, (void)vrow_l, (void)v_ss;
  /* Work-items past the NS subsets (WG % NC != 0, e.g. D = 72 or 96) run
   * the pass too, on keys of the tile; port_combine leaves their sums out.
   * No early return for them: PoCL 3.1 (LLVM 15) hoists such a test of the
   * local id out of the tile loop and then takes the last work-item's
   * answer for every work-item, so the whole pass was skipped (int4 / fp8
   * at D = 72, 80, 96 with 4 rows: wrong results; test_features). */
#if KV_Q
  for (int jj0 = ks; jj0 < WG && t0 + jj0 < at->hi; jj0 += NS * VUQ) {
    KV_WORD_T w[VUQ];
#if !FOLD_V
    uint ssw[VUQ];
#endif
#pragma unroll
    for (int u = 0; u < VUQ; u++) {
      const int jj = jj0 + u * NS;
      const long row = (jj < WG && t0 + jj < at->hi) ? V_ROW(jj) : -1;
      w[u] = KV_WORD_ZERO;
#if !FOLD_V
      ssw[u] = 0u; /* scale and shift 0: no weight from a row outside the cache */
#endif
      if (row >= 0) {
        w[u] = KV_WORD(v, row, c);
#if !FOLD_V
        ssw[u] = V_SS_WORD(row, jj, c / (NC / KV_GROUPS));
#endif
      }
    }
#pragma unroll
    for (int u = 0; u < VUQ; u++) {
      const int jj = jj0 + u * NS;
      if (jj >= WG || t0 + jj >= at->hi) break;
      float p[RB], any = 0.0f;
      for (int r = 0; r < RB; r++) {
        p[r] = s_l[par][r][jj];
        any += p[r];
      }
      if (any == 0.0f) continue; /* no weight: a non-finite row stays out, as unread */
      const float8 vv = KV_WORD8(w[u]);
#if FOLD_V
      for (int r = 0; r < RB; r++) acc[r] += p[r] * vv;
#else
      const float2 vs = scale_shift_unpack(ssw[u]);
      for (int r = 0; r < RB; r++) {
        acc[r] += (p[r] * vs.x) * vv;
        sh[r] += p[r] * vs.y;
      }
#endif
    }
  }
#else
  for (int jj0 = ks; jj0 < WG && t0 + jj0 < at->hi; jj0 += NS * VU) {
    float8 vv[VU];
    float p[VU][RB];
#pragma unroll
    for (int u = 0; u < VU; u++) {
      const int jj = jj0 + u * NS;
      const bool in = jj < WG && t0 + jj < at->hi;
      float any = 0.0f;
      for (int r = 0; r < RB; r++) {
        p[u][r] = in ? s_l[par][r][jj] : 0.0f;
        any += p[u][r];
      }
      const long row = (any != 0.0f) ? V_ROW(jj) : -1;
      vv[u] = (float8)(0.0f);
      if (row >= 0) vv[u] = KV_RAW8(v, row, c);
    }
#pragma unroll
    for (int u = 0; u < VU; u++)
      for (int r = 0; r < RB; r++) acc[r] += p[u][r] * vv[u];
  }
#endif
}
#undef V_SS_WORD
#undef V_ROW

/* Combines the work-items' sums (they share the running max, so they
 * simply add): the key subsets' accumulators into acc_l (rows of D), every
 * work-item's sums over its own keys of the weights into l_l and (FOLD_V)
 * of the shifts into every column, through red_l (2 RB WG floats: the score
 * tiles, free now); the max into m_l. The whole group calls it. */
CLATTN_INLINE void port_combine(__local float *acc_l, __local float *l_l, __local float *m_l,
                                __local float *red_l, const float m_run[RB], const float l_run[RB],
                                const float sh[RB], const float8 acc[RB], const port_at *at) {
  const int tid = at->tid, nred = FOLD_V ? 2 * RB : RB;
  (void)sh;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = 0; r < RB; r++) {
    red_l[r * WG + tid] = l_run[r];
#if FOLD_V
    red_l[(RB + r) * WG + tid] = sh[r];
#endif
  }
  for (int s = 0; s < NS; s++) {
    if (at->ks == s) {
      for (int r = 0; r < RB; r++) {
        __local float *dst = acc_l + r * D + at->c * 8;
        const float8 prev = (s == 0) ? (float8)(0.0f) : vload8(0, dst);
        vstore8(prev + acc[r], 0, dst);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  int span = 1; /* a tree over the group (WG need not be a power of two) */
  while (2 * span < WG) span *= 2;
  for (; span > 0; span /= 2) {
    if (tid < span && tid + span < WG)
      for (int r = 0; r < nred; r++) red_l[r * WG + tid] += red_l[r * WG + tid + span];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (tid < RB) l_l[tid] = red_l[tid * WG];
  if (tid == 0)
    for (int r = 0; r < RB; r++) m_l[r] = m_run[r];
#if FOLD_V
  for (int i = tid; i < RB * D; i += WG) acc_l[i] += red_l[(RB + i / D) * WG];
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* ---------------------------------------------------------------- the portable kernel */

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) CLATTN_REG_CAP void clattn_decode_partial(
    DECODE_PARTIAL_PARAMS) {
  DECODE_UNPACK();
  port_at at;
  at.tid = get_local_id(0);
  const int split = get_group_id(0);
  at.hk = get_group_id(1) % Hkv;
  at.r0 = (get_group_id(1) / Hkv) * RB;
  at.b = get_group_id(2);
  at.G = Hq / Hkv;
  const int tid = at.tid, b = at.b;

  const dseq sq = decode_seq(b, Mq, sqb, sqm, q_start, total_q, kv_len, kv_cap, err_flag,
                             tid == 0 && split == 0 && at.r0 == 0 && at.hk == 0);
  const int mq_count = sq.mq, n = sq.n;
  at.rows = at.G * mq_count;
  if (at.r0 >= at.rows) return; /* uniform over the group */
  const int lo = split * chunk;
  const kv_layout kl = {k_off, sk0, sk1, sk2}, vl = {v_off, sv0, sv1, sv2};
  const kv_layout kssl = {kss_off, skss0, skss1, skss2}, vssl = {vss_off, svss0, svss1, svss2};
  const kv_pages pg = {block_table, bt_stride, max_pages, PAGED ? page_size : 0, num_pages};
  at.kl = kl;
  at.vl = vl;
  at.kssl = kssl;
  at.vssl = vssl;
  at.pg = pg;

  /* Row r of the block is query mq = (r0 + r) / G of head hk * G + (r0 + r) % G.
   * Causal: query mq sees keys j < n - mq_count + mq + 1. */
  int lim[RB];
  int lim_max = 0;
  for (int r = 0; r < RB; r++) {
    const int rr = at.r0 + r;
    lim[r] = (rr < at.rows) ? (CAUSAL ? n - mq_count + rr / at.G + 1 : n) : 0;
    lim_max = max(lim_max, lim[r]);
  }
  at.hi = min(min(lo + chunk, n), lim_max);

  __local float q_l[RB * D]; /* also the reduction buffer at the end */
  __local float s_l[2][RB][WG];
  __local int tmax_l[2][RB];
  __local float l_l[RB], m_fin_l[RB];
#if KSTAGE && KV_Q
  __local uint kq_l[WG * KQ_STRIDE];
#define KSTAGE_L kq_l
#elif KSTAGE
  __local uint4 k_l[WG * KSTRIDE];
#define KSTAGE_L k_l
#else
#define KSTAGE_L NULL
#endif
  /* PAGED: V row of each key of the tile, found once by the work-item that
   * scores the key, so the value pass repeats no block-table lookups; by
   * parity. (Dense rows are cheaper to recompute: H200, 0.41 against 0.63 ms.) */
#if PAGED
  __local long vrow_l[2][WG];
#define VROW_L vrow_l
#else
#define VROW_L NULL
#endif
#if KV_Q
  __local float qsum_l[RB * NG]; /* sum of each row's (scaled) q over each scale group */
#define QSUM_L qsum_l
#else
#define QSUM_L NULL
#endif

  port_q(q_l, q, q_off + sq.q_base, sqm, sqh, sqd, scale, &at);
  if (tid < RB) {
    tmax_l[0][tid] = ord_of(-INFINITY);
    tmax_l[1][tid] = ord_of(-INFINITY);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#if KV_Q
  if (tid < RB * NG) {
    float sum = 0.0f;
    for (int d = 0; d < D / NG; d++) sum += q_l[(tid / NG) * D + (tid % NG) * (D / NG) + d];
    qsum_l[tid] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#endif

  float m_run[RB], l_run[RB], sh[RB]; /* sh: sum of p * shift, the V rows' shifts (KV_Q) */
  float8 acc[RB];
  for (int r = 0; r < RB; r++) {
    m_run[r] = -INFINITY;
    l_run[r] = 0.0f;
    acc[r] = (float8)(0.0f);
    sh[r] = 0.0f;
  }
  at.ks = tid / NC;
  at.c = tid % NC;
#if LANE_KEYS
  float8 qr[RB]; /* this lane's 8 columns of every row's q */
  for (int r = 0; r < RB; r++) qr[r] = vload8(0, q_l + r * D + at.c * 8);
#endif

  int par = 0;
  for (int t0 = lo; t0 < at.hi; t0 += WG, par ^= 1) {
#if LANE_KEYS
    port_scores_lanes(s_l, tmax_l, VROW_L, par, qr, k, k_ss, bias, A.bias, lim, t0, &at, err_flag);
#else
#if KSTAGE
    port_stage_k(KSTAGE_L, k, t0, &at);
#endif
    port_scores(s_l, tmax_l, VROW_L, par, q_l, QSUM_L, KSTAGE_L, k, k_ss, bias, A.bias, lim, t0, &at,
                err_flag);
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    port_softmax(s_l, tmax_l, VROW_L, par, m_run, l_run, acc, sh, v, v_ss, t0, &at);
    barrier(CLK_LOCAL_MEM_FENCE);
    port_values(s_l, VROW_L, par, acc, sh, v, v_ss, t0, &at);
  }
#if KV_Q && !FOLD_V
  for (int r = 0; r < RB; r++) acc[r] += (float8)(sh[r]);
#endif
  port_combine(q_l, l_l, m_fin_l, &s_l[0][0][0], m_run, l_run, sh, acc, &at);

  /* Output rows: packed (varlen, direct) or [b, mq, h] (also the partials' layout). */
#if VARLEN && !SPLIT
  const long ob = 0, om0 = sq.q0;
#else
  const long ob = b, om0 = 0;
#endif
  store_block_rows(q_l, l_l, m_fin_l, o, o_off + split * o_split + ob * sob, som, soh, sod, lse,
                   lse_off + split * lse_split + ob * slb, slh, slm, om0, at.hk, at.G, at.r0, at.rows);
#if MERGE_LAST
  __local int last_l;
  DECODE_MERGE_LAST(b, get_group_id(1), sq.q0, at.hk, at.G, at.r0, at.rows, &last_l);
#endif
}
#endif /* MMA, SERIAL */
