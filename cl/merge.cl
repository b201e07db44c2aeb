/* Merging attention states, forward and backward.
 *
 *   o = sum_i w_i o_i,  lse = log sum_i exp(lse_i),  w_i = exp(lse_i - lse)
 *
 * clattn_merge: the one forward kernel. It serves the public merge (up to
 * NARGS partials per launch, each its own buffer, offset and strides) and
 * the split-K reduce of decode (slot 0 alone, holding all S partials of one
 * f32 buffer spaced by a split stride). Longer lists are merged in chunks by
 * the host: a chunk's result is itself a partial (f32 o, lse), fed to the
 * next chunk through slot 0.
 * clattn_merge_backward: do_i = w_i do, dlse_i = w_i (dlse + do . (o_i - o)).
 *
 * Work layout (both kernels): dim 0 = lanes of one row, each owning VEC
 * consecutive d; dim 1 = rows (m, h), several per work-group; dim 2 = b.
 *
 * Options: P0_DT (slot 0), P_DT (slots 1..), O_DT, DO_DT, DP_DT (do_i): the
 * storage dtypes f32|f16|bf16; NARGS buffer slots (1, 2, 4, 8, 16); VEC 1 or
 * 4 (4 needs D % 4 == 0 and unit d-strides everywhere); ALIGNED (with VEC 4:
 * every row starts on a multiple of 4 elements, so the four are one aligned
 * vector access instead of four scalar ones). */
#include "softmax.clh"
#include "seq.clh"

#ifndef P0_DT
#define P0_DT f32
#endif
#ifndef P_DT
#define P_DT f32
#endif
#ifndef O_DT
#define O_DT f32
#endif
#ifndef DO_DT
#define DO_DT f32
#endif
#ifndef DP_DT
#define DP_DT f32
#endif
#ifndef NARGS
#define NARGS 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ALIGNED
#define ALIGNED 0
#endif
#define MB 8  /* NARGS 1: slot 0's parts whose loads are in flight together */
#define MB1 16 /* NARGS 1, one d block a lane: up to this many parts in one round of loads */

/* ---------------------------------------------------------------- vectors of VEC d */

static inline void st4_f32(__global float *p, long i, float4 x) { vstore4(x, 0, p + i); }
static inline void st4_f16(__global half *p, long i, float4 x) { vstore_half4_rte(x, 0, p + i); }
static inline void st4_bf16(__global ushort *p, long i, float4 x) {
  vstore4((ushort4)(bf16_from_float(x.x), bf16_from_float(x.y), bf16_from_float(x.z),
                    bf16_from_float(x.w)),
          0, p + i);
}

/* The same at an index that is a multiple of 4 from an aligned row start. */
static inline float4 lda4_f32(__global const float *p, long i) { return *(__global const float4 *)(p + i); }
static inline float4 lda4_f16(__global const half *p, long i) { return vloada_half4(0, p + i); }
static inline float4 lda4_bf16(__global const ushort *p, long i) {
  const uint4 u = convert_uint4(*(__global const ushort4 *)(p + i)) << 16;
  return as_float4(u);
}
static inline void sta4_f32(__global float *p, long i, float4 x) { *(__global float4 *)(p + i) = x; }
static inline void sta4_f16(__global half *p, long i, float4 x) { vstorea_half4_rte(x, 0, p + i); }
static inline void sta4_bf16(__global ushort *p, long i, float4 x) {
  *(__global ushort4 *)(p + i) = (ushort4)(bf16_from_float(x.x), bf16_from_float(x.y),
                                           bf16_from_float(x.z), bf16_from_float(x.w));
}

#if VEC == 4 && ALIGNED
typedef float4 vfloat;
#define LDV(dt, p, i) CAT(lda4_, dt)((p), (i))
#define STV(dt, p, i, x) CAT(sta4_, dt)((p), (i), (x))
static inline float vsum(float4 x) { return (x.x + x.y) + (x.z + x.w); }
#elif VEC == 4
typedef float4 vfloat;
#define LDV(dt, p, i) LD4(dt, p, i)
#define STV(dt, p, i, x) CAT(st4_, dt)((p), (i), (x))
static inline float vsum(float4 x) { return (x.x + x.y) + (x.z + x.w); }
#else
typedef float vfloat;
#define LDV(dt, p, i) LD(dt, p, i)
#define STV(dt, p, i, x) ST(dt, p, i, x)
static inline float vsum(float x) { return x; }
#endif

/* ---------------------------------------------------------------- slots */

/* Slot j's arguments: a partial o [B, M, H, D] of dtype dt and its lse [B, H, M]. */
#define SLOT_ARGS(j, dt)                                                                     \
  __global const ELT(dt) *po##j, long po_off##j, long pob##j, long pom##j, long poh##j,     \
      long pod##j, __global const float *pl##j, long pl_off##j, long plb##j, long plh##j,  \
      long plm##j

/* The same for the gradients of the backward. */
#define DSLOT_ARGS(j)                                                                        \
  __global ELT(DP_DT) *dpo##j, long dpo_off##j, long dpob##j, long dpom##j, long dpoh##j,   \
      long dpod##j, __global float *dpl##j, long dpl_off##j, long dplb##j, long dplh##j,   \
      long dplm##j

/* X(j) for slots j = 1 .. NARGS-1 (slot 0 is special in the forward). */
#if NARGS > 16
#error "NARGS is at most 16"
#endif
#if NARGS > 1
#define X1(X) X(1)
#else
#define X1(X)
#endif
#if NARGS > 2
#define X2(X) X(2) X(3)
#else
#define X2(X)
#endif
#if NARGS > 4
#define X4(X) X(4) X(5) X(6) X(7)
#else
#define X4(X)
#endif
#if NARGS > 8
#define X8(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#else
#define X8(X)
#endif
#define FOR_SLOTS(X) X1(X) X2(X) X4(X) X8(X)
/* Slot arguments come in powers of two so that NARGS 1, 2, 4, 8, 16 are the variants. */
#if NARGS != 1 && NARGS != 2 && NARGS != 4 && NARGS != 8 && NARGS != 16
#error "NARGS is a power of two"
#endif

#define COMMA_SLOT(j) , SLOT_ARGS(j, P_DT)
#define COMMA_DSLOT(j) , DSLOT_ARGS(j)

/* ---------------------------------------------------------------- forward */

/* Slot 0 holds n0 parts spaced by (po_split, pl_split) elements; slots
 * 1 .. nslots-1 one part each. q_start (varlen decode, at element qs_off):
 * row m of sequence b is packed row q_start[b] + m of o and lse, which are
 * then [1, total_q, H, D] and [1, H, total_q]; a sequence of invalid entries
 * (seq.clh) writes nothing. */
__kernel void clattn_merge(int M, int H, int D, int nslots, int n0, long po_split,
                           long pl_split, SLOT_ARGS(0, P0_DT) FOR_SLOTS(COMMA_SLOT),
                           __global ELT(O_DT) *o, long o_off, long ob, long om, long oh,
                           long od, __global float *lse, long lse_off, long lb, long lh, long lm,
                           __global const int *q_start, long qs_off, int total_q) {
  const int b = get_global_id(2);
  const int mh = get_global_id(1);
  if (mh >= M * H) return; /* padding rows of the last group (no barriers below) */
  const int m = mh / H, h = mh % H;
  int out_b = b, out_m = m;
  if (q_start) {
    int start, count;
    seq_q_rows(q_start + qs_off, b, total_q, M, &start, &count);
    if (m >= count) return;
    out_b = 0;
    out_m = start + m;
  }

  /* pass 1: the row's max and sum over every part's lse */
  float mx = -INFINITY, l = 0.0f;
  const long rl0 = pl_off0 + b * plb0 + h * plh0 + m * plm0;
  const long ro0 = po_off0 + b * pob0 + m * pom0 + h * poh0;
  const long oo = o_off + out_b * ob + out_m * om + h * oh;
#if NARGS == 1
  if (n0 <= MB1 && get_local_size(0) * VEC >= D) {
    /* Few parts and one d block a lane (decode's split-K reduce at small
     * batches: B=1, 16 splits, 4 work-groups): every part's lse and this
     * lane's o in one round of loads, where the passes below wait for four
     * (each MB parts' lse, then their lse and o). The same sums in the same
     * order: the same bits. H100, f16 D=128 Hq=32 Hkv=8, B=1 ctx=16384 (16
     * splits): 46.3 / 46.4 us against 46.8 / 46.7 (the merge kernel's own
     * time 6.7 us, of which an empty kernel's is 3.2; tools/PERF.md, session 37). */
    const int d = get_local_id(0) * VEC;
    float y[MB1];
    vfloat x[MB1];
    _Pragma("unroll") for (int u = 0; u < MB1; u++) {
      const bool ok = u < n0;
      y[u] = ok ? pl0[rl0 + u * pl_split] : -INFINITY;
      x[u] = ok && d < D ? LDV(P0_DT, po0, ro0 + u * po_split + d * pod0) : (vfloat)0.0f;
    }
    _Pragma("unroll") for (int u = 0; u < MB1; u++)
      if (u < n0) merge_fold(&mx, &l, y[u]);
    vfloat acc = 0.0f;
    _Pragma("unroll") for (int u = 0; u < MB1; u++) {
      const float w = u < n0 ? part_weight(y[u], mx) : 0.0f;
      if (w != 0.0f) acc += w * x[u];
    }
    if (d < D) STV(O_DT, o, oo + d * od, acc * merge_inv(l));
    if (lse && get_local_id(0) == 0) lse[lse_off + out_b * lb + h * lh + out_m * lm] = merge_lse(mx, l);
    return;
  }
  /* decode's split-K reduce and the stacked merge: slot 0's parts MB at a
   * time, their loads in flight together (a part at a time, below for
   * NARGS > 1, the reduce was 1-3% slower: tools/PERF.md, session 34) */
  for (int t0 = 0; t0 < n0; t0 += MB) {
    float y[MB];
    _Pragma("unroll") for (int u = 0; u < MB; u++)
      y[u] = t0 + u < n0 ? pl0[rl0 + (t0 + u) * pl_split] : -INFINITY;
    _Pragma("unroll") for (int u = 0; u < MB; u++)
      if (t0 + u < n0) merge_fold(&mx, &l, y[u]);
  }
#else
  for (int t = 0; t < n0; t++) merge_fold(&mx, &l, pl0[rl0 + t * pl_split]);
#endif
#define FOLD(j)                                                                              \
  const long ro##j = po_off##j + b * pob##j + m * pom##j + h * poh##j;                      \
  const float lse##j = (j < nslots) ? pl##j[pl_off##j + b * plb##j + h * plh##j + m * plm##j] \
                                    : -INFINITY;                                             \
  merge_fold(&mx, &l, lse##j);
  FOR_SLOTS(FOLD)
#undef FOLD

  /* pass 2: weights against the final max; empty parts are not read */
#define WEIGHT(j) const float w##j = part_weight(lse##j, mx);
  FOR_SLOTS(WEIGHT)
#undef WEIGHT
  const float inv = merge_inv(l);
  for (int d = get_local_id(0) * VEC; d < D; d += get_local_size(0) * VEC) {
    vfloat acc = 0.0f;
#if NARGS == 1
    /* an empty part's o is read (inside its buffer) and left out by its weight 0 */
    for (int t0 = 0; t0 < n0; t0 += MB) {
      float y[MB];
      vfloat x[MB];
      _Pragma("unroll") for (int u = 0; u < MB; u++) {
        const bool ok = t0 + u < n0;
        y[u] = ok ? pl0[rl0 + (t0 + u) * pl_split] : -INFINITY;
        x[u] = ok ? LDV(P0_DT, po0, ro0 + (t0 + u) * po_split + d * pod0) : (vfloat)0.0f;
      }
      _Pragma("unroll") for (int u = 0; u < MB; u++) {
        const float w = t0 + u < n0 ? part_weight(y[u], mx) : 0.0f;
        if (w != 0.0f) acc += w * x[u];
      }
    }
#else
    for (int t = 0; t < n0; t++) {
      const float w = part_weight(pl0[rl0 + t * pl_split], mx);
      if (w != 0.0f) acc += w * LDV(P0_DT, po0, ro0 + t * po_split + d * pod0);
    }
#endif
#define ACC(j)                                                                               \
  if (w##j != 0.0f) acc += w##j * LDV(P_DT, po##j, ro##j + d * pod##j);
    FOR_SLOTS(ACC)
#undef ACC
    STV(O_DT, o, oo + d * od, acc * inv);
  }
  if (lse && get_local_id(0) == 0) lse[lse_off + out_b * lb + h * lh + out_m * lm] = merge_lse(mx, l);
}

/* ---------------------------------------------------------------- backward */

/* Every slot holds one part; slots are independent, so a long list is just
 * several launches. red: local floats, NARGS per work-item, for the d-sums.
 * do / dlse may be NULL (zero). A part with weight 0 gets zero gradients
 * without its o_i being read. */
__kernel void clattn_merge_backward(
    int M, int H, int D, int nslots, SLOT_ARGS(0, P_DT) FOR_SLOTS(COMMA_SLOT),
    DSLOT_ARGS(0) FOR_SLOTS(COMMA_DSLOT), __global const ELT(O_DT) *o, long o_off, long ob,
    long om, long oh, long od, __global const float *lse, long lse_off, long lb, long lh,
    long lm, __global const ELT(DO_DT) *dout, long do_off, long dob, long dom, long doh,
    long dod, __global const float *dlse, long dlse_off, long dlb, long dlh, long dlm,
    __local float *red) {
  const int b = get_global_id(2);
  const int mh = get_global_id(1);
  const bool active = mh < M * H; /* padding rows still meet the barriers */
  const int m = active ? mh / H : 0, h = active ? mh % H : 0;
  const int lane = get_local_id(0), lanes = get_local_size(0);
  __local float *r = red + (get_local_id(1) * lanes + lane) * NARGS;

  float L = 0.0f, dl = 0.0f;
  if (active) {
    L = lse[lse_off + b * lb + h * lh + m * lm];
    if (dlse) dl = dlse[dlse_off + b * dlb + h * dlh + m * dlm];
  }
#define WEIGHT(j)                                                                            \
  const long ro##j = po_off##j + b * pob##j + m * pom##j + h * poh##j;                      \
  const long rd##j = dpo_off##j + b * dpob##j + m * dpom##j + h * dpoh##j;                  \
  const float w##j = (active && j < nslots)                                                  \
                         ? part_weight(pl##j[pl_off##j + b * plb##j + h * plh##j + m * plm##j], L) \
                         : 0.0f;                                                             \
  float dot##j = 0.0f;
  WEIGHT(0)
  FOR_SLOTS(WEIGHT)
#undef WEIGHT

  if (active) {
    const long oo = o_off + b * ob + m * om + h * oh;
    const long dd = do_off + b * dob + m * dom + h * doh;
    for (int d = lane * VEC; d < D; d += lanes * VEC) {
      vfloat g = 0.0f, ov = 0.0f;
      if (dout) {
        g = LDV(DO_DT, dout, dd + d * dod);
        ov = LDV(O_DT, o, oo + d * od);
      }
#define GRAD(j)                                                                              \
  if (j < nslots) {                                                                          \
    vfloat gi = 0.0f;                                                                        \
    if (w##j != 0.0f) {                                                                      \
      gi = w##j * g;                                                                         \
      if (dout) dot##j += vsum(g * (LDV(P_DT, po##j, ro##j + d * pod##j) - ov));            \
    }                                                                                        \
    STV(DP_DT, dpo##j, rd##j + d * dpod##j, gi);                                             \
  }
      GRAD(0)
      FOR_SLOTS(GRAD)
#undef GRAD
    }
  }

  /* d-sums across the row's lanes (a power of two), all slots at once */
#define PUT(j) r[j] = dot##j;
  PUT(0)
  FOR_SLOTS(PUT)
#undef PUT
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = lanes / 2; s > 0; s /= 2) {
    if (lane < s)
      for (int j = 0; j < NARGS; j++) r[j] += r[s * NARGS + j];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (active && lane == 0) {
#define DLSE(j)                                                                              \
  if (j < nslots)                                                                            \
    dpl##j[dpl_off##j + b * dplb##j + h * dplh##j + m * dplm##j] =                           \
        (w##j != 0.0f) ? w##j * (dl + r[j]) : 0.0f;
    DLSE(0)
    FOR_SLOTS(DLSE)
#undef DLSE
  }
}
