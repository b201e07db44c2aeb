/* ReRoPE windowed attention, backward. Deterministic: no float atomics,
 * every gradient element is summed by one work-item in a fixed order.
 *
 * clattn_rerope_bwd_pre:  delta_i = o_i . dout_i (f32 workspace [Z, Hq, Nq]).
 * clattn_rerope_bwd_dkdv: one work-group per (block of BN keys, KV head,
 *   batch); loops over the query heads of its group and the query tiles that
 *   can see its keys, recomputing P from lse; accumulates dk1, dk2, dv.
 * clattn_rerope_bwd_dq:   one work-group per (block of BM queries, query
 *   head, batch); loops over key tiles; accumulates dq1, dq2.
 * With ROTARY the kernels read raw q, k and return dq = R(p_i)^T dq1 +
 * R(W)^T dq2 and dk = R(p_j)^T dk1 + dk2 in the dq1 / dk1 arguments.
 *
 * Portable kernels (RR_MMA 0): work-item (r, c) owns score rows r + RT*i and
 * columns c + CT*u, and the rotary pairs c + CT*w of the head dim (both
 * elements of a pair, so the final inverse rotation stays in registers).
 * Tensor-core kernels (RR_MMA 1, cl/rerope_mma.clh): four warps of 16 rows
 * (queries in dq, keys in dk/dv); S, dP, dV, dK, dQ are mma.sync products,
 * P and dS pass from accumulator to A fragments in registers; each block's
 * dq (dk, dv) stays in registers until its one store. */
#include "rerope.clh"

#if RR_MMA
#include "rerope_mma.clh"
#endif

#define RT (WG / CT)
#define DW (D / CT) /* head-dim elements per work-item: pairs c + CT*w, both halves */
#define NPW (DW / 2)

/* The kernels' argument lists (lib/rerope_bwd.c: run_bwd), both implementations:
 * the inputs, then each kernel's gradients, then the positions and scalars. */
#define RR_BWD_INPUTS                                                                              \
  __global const ELT(DT) *q1, rr_view vq1, __global const ELT(DT) *q2, rr_view vq2,                \
      __global const ELT(DT) *k1, rr_view vk1, __global const ELT(DT) *k2, rr_view vk2,            \
      __global const ELT(DT) *v, rr_view vv, __global const ELT(DT) *dout, rr_view vdo,            \
      __global const float *lse, rr_view vl, __global const float *delta, rr_view vdl
#define RR_DKDV_PARAMS                                                                             \
  RR_BWD_INPUTS, __global ELT(DT) *dk1, rr_view vdk1, __global ELT(DT) *dk2, rr_view vdk2,         \
      __global ELT(DT) *dv, rr_view vdv, RR_POS_PARAMS
#define RR_DQ_PARAMS                                                                               \
  RR_BWD_INPUTS, __global ELT(DT) *dq1, rr_view vdq1, __global ELT(DT) *dq2, rr_view vdq2,         \
      RR_POS_PARAMS

__kernel void clattn_rerope_bwd_pre(__global const ELT(DT) *o, rr_view vo,
                                    __global const ELT(DT) *dout, rr_view vdo,
                                    __global float *delta, rr_view vdl, rr_args A) {
  const int i = get_global_id(0), h = get_global_id(1), z = get_global_id(2);
  if (i >= A.Nq) return;
  const long ob = vidx(vo, z, h, i, 0), db = vidx(vdo, z, h, i, 0);
  float s = 0.0f;
  for (int d = 0; d < D; d++) s += LD(DT, o, ob + d * vo.d) * LD(DT, dout, db + d * vdo.d);
  delta[vdl.off + z * vdl.z + h * vdl.h + i * vdl.n] = s;
}

#if !RR_MMA

#define TK (BN / RT) /* dkdv: keys per work-item */
#define TQ (BM / CT) /* dkdv: queries per work-item */
#define TM (BM / RT) /* dq: queries per work-item */
#define TN (BN / CT) /* dq: keys per work-item */

RR_TILE_DOTS(dots_kq, TK, TQ)
RR_TILE_DOTS(dots_qk, TM, TN)

/* Head-dim column of a work-item's element x = 2*w + b (pair c + CT*w). */
static inline int own_col(int c, int x, rr_args A) {
  return rope_elem(c + CT * (x >> 1), x & 1, A);
}

/* Positions, lse and delta of query rows m0 .. m0 + BM - 1 (head h) into
 * local memory by the whole work-group; 0, -inf and 0 past Nq. */
static inline void stage_qrows(__local int *tqpos, __local float *tlse, __local float *tdelta,
                               __global const int *qpos, rr_view vqp, __global const float *lse,
                               rr_view vl, __global const float *delta, rr_view vdl, int z, int h,
                               int m0, rr_args A) {
  for (int x = get_local_id(0); x < BM; x += WG) {
    const bool in = m0 + x < A.Nq;
    tqpos[x] = in ? qpos_at(qpos, vqp, z, m0 + x, A) : 0;
    tlse[x] = in ? lse[vl.off + z * vl.z + h * vl.h + (m0 + x) * vl.n] : -INFINITY;
    tdelta[x] = in ? delta[vdl.off + z * vdl.z + h * vdl.h + (m0 + x) * vdl.n] : 0.0f;
  }
}

/* The two kernels are one pass seen from either side: dk/dv holds a key
 * block and visits the query tiles, dq holds a query block and visits the
 * key tiles. The steps they share are the macros below, written in the
 * kernels' own names (their arguments, RR_*_PARAMS, and locals: the t*
 * tiles, r, c, col, cls, m0, n0, h, hk, z). Macros, not functions, so that
 * each kernel compiles to the code it had written out: a helper taking the
 * views, the scalars or the private sums moves their loads and the loops.
 *
 * Each kernel's sums, one entry per accumulator: X(sum, its coefficient
 * tile, an element's coefficient (P, or dS on the sum's side of the window),
 * the visited tile Y it multiplies, whether the tile's class leaves Y out). */
#define DKDV_SUMS(X)                                                                               \
  X(av, tpt, p, tdo, 0)                                                                            \
  X(a1, tds1, inside ? ds : 0.0f, tq1, cls & RR_OUT)                                               \
  X(a2, tds2, inside ? 0.0f : ds, tq2, cls & RR_IN)
#define DQ_SUMS(X)                                                                                 \
  X(a1, tds1, inside ? ds : 0.0f, tk1, cls & RR_OUT)                                               \
  X(a2, tds2, inside ? 0.0f : ds, tk2, cls & RR_IN)

/* Query tile m0 of head h: positions, lse and delta, then (the rotation
 * reads the positions) Q1 / Q2 for class cls, and dO. */
#define STAGE_QTILE(m0, cls)                                                                       \
  do {                                                                                             \
    stage_qrows(tqpos, tlse, tdelta, qpos, vqp, lse, vl, delta, vdl, z, h, m0, A);                 \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    stage_q_pair(q1, vq1, q2, vq2, z, h, m0, BM, tq1, tq2, tqpos, cls, A);                         \
    stage_raw(dout, vdo, z, h, m0, A.Nq, BM, tdo);                                                 \
  } while (0)

/* P and dS = P (dP - delta) of query qi and key kj of the tiles (in: both
 * lie before the ends) from the logit sx and dP dpx, into element atx of
 * the coefficient tiles of SUMS. */
#define SUM_PUT(sum, tile, coef, y, skip) tile[at] = coef;
#define TILE_COEFS(SUMS, sx, dpx, qi, kj, in, atx)                                                 \
  do {                                                                                             \
    const float l = tlse[qi];                                                                      \
    /* a query without visible keys has lse = -inf and no gradient */                              \
    const bool ok = (in) && l != -INFINITY && rr_visible(tqpos[qi], tkpos[kj], A);                 \
    const float p = ok ? exp((sx) * A.scale - l) : 0.0f;                                           \
    const float ds = p * ((dpx) - tdelta[qi]);                                                     \
    const bool inside =                                                                            \
        (cls & RR_IN) || (!(cls & RR_OUT) && rr_inside(tqpos[qi], tkpos[kj], A));                  \
    const int at = (atx);                                                                          \
    SUMS(SUM_PUT)                                                                                  \
  } while (0)

/* The sums over the NY rows of the visited tile, for this work-item's NI
 * rows i of the coefficient tiles (row stride NY + 1): sum[i][x] +=
 * coefficient * Y[row][col[x]] for each entry of SUMS. */
#define SUM_Y(sum, tile, coef, y, skip) float sum##_y[DW];
#define SUM_Y_LOAD(sum, tile, coef, y, skip)                                                       \
  sum##_y[x] = (skip) ? 0.0f : tl_get(y, q * LDT + col[x]);
#define SUM_C_LOAD(sum, tile, coef, y, skip) const float sum##_c = tile[at];
#define SUM_ADD(sum, tile, coef, y, skip) sum[i * DW + x] += sum##_c * sum##_y[x];
#define TILE_SUMS(SUMS, NI, NY)                                                                    \
  do {                                                                                             \
    for (int q = 0; q < (NY); q++) {                                                               \
      SUMS(SUM_Y)                                                                                  \
      for (int x = 0; x < DW; x++) {                                                               \
        SUMS(SUM_Y_LOAD)                                                                           \
      }                                                                                            \
      for (int i = 0; i < (NI); i++) {                                                             \
        const int at = (r + RT * i) * ((NY) + 1) + q;                                              \
        SUMS(SUM_C_LOAD)                                                                           \
        for (int x = 0; x < DW; x++) {                                                             \
          SUMS(SUM_ADD)                                                                            \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* The coefficients of the NI x NJ scores (s) and dP (dp) of the visited tile
 * this work-item holds (rows ri = r + RT i of its own side, columns cj = c +
 * CT j; QI, KJ: the query and key of (ri, cj); IN: both before the ends),
 * then the sums over the tile's NY columns into the NI rows' accumulators. */
#define TILE_GRADS(SUMS, NI, NJ, NY, QI, KJ, IN)                                                   \
  do {                                                                                             \
    for (int i = 0; i < (NI); i++) {                                                               \
      const int ri = r + RT * i;                                                                   \
      for (int j = 0; j < (NJ); j++) {                                                             \
        const int cj = c + CT * j;                                                                 \
        TILE_COEFS(SUMS, s[i * (NJ) + j], dp[i * (NJ) + j], QI, KJ, IN, ri * ((NY) + 1) + cj);     \
      }                                                                                            \
    }                                                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    TILE_SUMS(SUMS, NI, NY);                                                                       \
  } while (0)

/* Row n (head h) of a gradient pair from row i of this work-item's sums
 * a1, a2 (its rotary pairs c + CT*w): t1 = scale a1, t2 = scale a2; on the
 * fly R(pos)^T t1 + t2, with ROT2 R(pos)^T t1 + R(W)^T t2, into t1 alone. */
#if ROTARY
#define STORE_PAIR(t1, v1, t2, v2, h, n, pair, x0, x1, y0, y1, pos, ROT2)                          \
  do {                                                                                             \
    const float2 x = rope_pair_rot((float2)(x0, x1), pair, pos, A, true);                          \
    const float2 y = ROT2 ? rope_pair_rot((float2)(y0, y1), pair, (float)A.window, A, true)        \
                          : (float2)(y0, y1);                                                      \
    x0 = x.x, x1 = x.y, y0 = y.x, y1 = y.y;                                                        \
    ST(DT, t1, vidx(v1, z, h, n, rope_elem(pair, 0, A)), x0 + y0);                                 \
    ST(DT, t1, vidx(v1, z, h, n, rope_elem(pair, 1, A)), x1 + y1);                                 \
  } while (0)
#else
#define STORE_PAIR(t1, v1, t2, v2, h, n, pair, x0, x1, y0, y1, pos, ROT2)                          \
  do {                                                                                             \
    ST(DT, t1, vidx(v1, z, h, n, rope_elem(pair, 0, A)), x0);                                      \
    ST(DT, t1, vidx(v1, z, h, n, rope_elem(pair, 1, A)), x1);                                      \
    ST(DT, t2, vidx(v2, z, h, n, rope_elem(pair, 0, A)), y0);                                      \
    ST(DT, t2, vidx(v2, z, h, n, rope_elem(pair, 1, A)), y1);                                      \
  } while (0)
#endif
#define STORE_PAIRS(t1, v1, t2, v2, h, n, i, pos, ROT2)                                            \
  do {                                                                                             \
    for (int w = 0; w < NPW; w++) {                                                                \
      const int pair = c + CT * w;                                                                 \
      float x0 = a1[(i) * DW + 2 * w] * A.scale, x1 = a1[(i) * DW + 2 * w + 1] * A.scale;          \
      float y0 = a2[(i) * DW + 2 * w] * A.scale, y1 = a2[(i) * DW + 2 * w + 1] * A.scale;          \
      STORE_PAIR(t1, v1, t2, v2, h, n, pair, x0, x1, y0, y1, pos, ROT2);                           \
    }                                                                                              \
  } while (0)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_rerope_bwd_dkdv(RR_DKDV_PARAMS) {
  RR_POSITIONS(qpos, kpos);
  __local TT tk1[BN * LDT], tk2[BN * LDT], tv[BN * LDT];
  __local TT tq1[BM * LDT], tq2[BM * LDT], tdo[BM * LDT];
  __local float tlse[BM], tdelta[BM];
  __local int tqpos[BM], tkpos[BN];
  __local float tpt[BN * (BM + 1)], tds1[BN * (BM + 1)], tds2[BN * (BM + 1)];

  const int lid = get_local_id(0), r = lid / CT, c = lid % CT;
  const int2 bh = rr_block_head(A, A.Hq / A.G, false);
  const int n0 = bh.x * BN, hk = bh.y, z = get_group_id(2);
  const int n1 = min(n0 + BN, A.Nk);

  RR_STAGE_KTILE(n0, 0);
  long klo, khi;
  kpos_range(kpos, vkp, z, n0, n1, &klo, &khi);

  float a1[TK * DW], a2[TK * DW], av[TK * DW];
  for (int x = 0; x < TK * DW; x++) a1[x] = a2[x] = av[x] = 0.0f;
  int col[DW];
  for (int x = 0; x < DW; x++) col[x] = own_col(c, x, A);

  /* Default positions and causal: the first query that sees key n0. */
  int m_start = 0;
  if (A.causal && !qpos) m_start = (int)clamp(klo - (A.Nk - A.Nq), 0L, (long)A.Nq) / BM * BM;

  for (int g = 0; g < A.G; g++) {
    const int h = hk * A.G + g;
    int m0 = rr_next_qtile(m_start, klo, khi, qpos, vqp, z, A);
    while (m0 < A.Nq) {
      const int cls = rr_qclass(m0, klo, khi, qpos, vqp, z, A);
      barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers are done */
      STAGE_QTILE(m0, cls);
      barrier(CLK_LOCAL_MEM_FENCE);

      /* transposed scores: rows are keys, columns queries */
      float s[TK * TQ], dp[TK * TQ];
      RR_BANDED_DOTS(dots_kq, cls, tk1, tq1, tk2, tq2, r, c, tkpos, tqpos, TK, TQ, s, A);
      dots_kq(tv, tdo, r, c, dp);
      TILE_GRADS(DKDV_SUMS, TK, TQ, BM, cj, ri, n0 + ri < A.Nk && m0 + cj < A.Nq);
      m0 = rr_next_qtile(m0 + BM, klo, khi, qpos, vqp, z, A);
    }
  }

  for (int i = 0; i < TK; i++) {
    const int n = n0 + r + RT * i;
    if (n >= A.Nk) continue;
    /* dk = R(p_j)^T dk1 + dk2 */
    STORE_PAIRS(dk1, vdk1, dk2, vdk2, hk, n, i, (float)tkpos[r + RT * i], false);
    for (int x = 0; x < DW; x++) ST(DT, dv, vidx(vdv, z, hk, n, col[x]), av[i * DW + x]);
  }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_rerope_bwd_dq(RR_DQ_PARAMS) {
  RR_POSITIONS(qpos, kpos);
  __local TT tq1[BM * LDT], tq2[BM * LDT], tdo[BM * LDT];
  __local TT tk1[BN * LDT], tk2[BN * LDT], tv[BN * LDT];
  __local float tlse[BM], tdelta[BM];
  __local int tqpos[BM], tkpos[BN];
  __local float tds1[BM * (BN + 1)], tds2[BM * (BN + 1)];

  const int lid = get_local_id(0), r = lid / CT, c = lid % CT;
  const int2 bh = rr_block_head(A, A.Hq, true);
  const int m0 = bh.x * BM, h = bh.y, z = get_group_id(2);
  const int hk = h / A.G;
  const int m1 = min(m0 + BM, A.Nq);

  STAGE_QTILE(m0, 0);
  long qlo, qhi;
  qpos_range(qpos, vqp, z, m0, m1, A, &qlo, &qhi);
  int n_end = A.Nk;
  if (A.causal && !kpos) n_end = (int)clamp(qhi + 1, 0L, (long)A.Nk);

  float a1[TM * DW], a2[TM * DW];
  for (int x = 0; x < TM * DW; x++) a1[x] = a2[x] = 0.0f;
  int col[DW];
  for (int x = 0; x < DW; x++) col[x] = own_col(c, x, A);

  int n0 = rr_next_ktile(0, n_end, qlo, qhi, kpos, vkp, z, A);
  while (n0 < n_end) {
    const int cls = rr_kclass(n0, qlo, qhi, kpos, vkp, z, A);
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers are done */
    RR_STAGE_KTILE(n0, cls);
    barrier(CLK_LOCAL_MEM_FENCE);

    float s[TM * TN], dp[TM * TN];
    RR_BANDED_DOTS(dots_qk, cls, tq1, tk1, tq2, tk2, r, c, tqpos, tkpos, TM, TN, s, A);
    dots_qk(tdo, tv, r, c, dp);
    TILE_GRADS(DQ_SUMS, TM, TN, BN, ri, cj, m0 + ri < A.Nq && n0 + cj < A.Nk);
    n0 = rr_next_ktile(n0 + BN, n_end, qlo, qhi, kpos, vkp, z, A);
  }

  for (int i = 0; i < TM; i++) {
    const int n = m0 + r + RT * i;
    if (n >= A.Nq) continue;
    /* dq = R(p_i)^T dq1 + R(W)^T dq2 */
    STORE_PAIRS(dq1, vdq1, dq2, vdq2, h, n, i, (float)tqpos[r + RT * i], true);
  }
}

#else /* RR_MMA */

/* dq: RB query rows per work-group, key tiles of BN. dk/dv: RB keys per
 * work-group, query tiles of BM. Wide heads (D > 64, the host's choice):
 * each work-group accumulates one slice of DCB column blocks of the
 * gradients (NSL slices, grid z = Z NSL: the scores are recomputed per
 * slice), and its own rows' fragments come from global memory per tile
 * (FRAG_G) instead of living in registers (dq) or local memory (dk/dv). */
/* Wide heads also take the tiles in two phases (NPH 2): the tiles inside
 * the window (and band edges) first, accumulating dq1 (dk1), stored; then
 * those outside (and band edges again) into the same registers for dq2
 * (dk2): one accumulator of the pair is live at a time. */
#if FRAG_G
#define NPH 2
#define PH_SKIP(cls, ph) ((ph) ? ((cls) & RR_IN) : ((cls) & RR_OUT)) /* not this phase's side */
#define PH_IS(ph, want) ((ph) == (want))
#else
#define NPH 1
#define PH_IS(ph, want) 1
#endif
#define NBK (BN / 8) /* dq: 8-key blocks of a key tile */
#define NBQ (BM / 8) /* dk/dv: 8-query blocks of a query tile */
#if BN % 16 || BM % 16 || (!FRAG_G && 3 * BN < RB)
#error "tensor-core backward: BN, BM multiples of 16, RB <= 3 BN"
#endif

/* Stages q (rotary: RoPE(q, pos) or RoPE(q, W)) or a plain tensor. */
#if ROTARY
#define STAGE_Q1(T, V, Z, H, N0, NE, ROWS, X, TPOS, A)                                             \
  mstage_rope(T, V, Z, H, N0, NE, ROWS, X, TPOS, 0, A)
#define STAGE_Q2(T, V, Z, H, N0, NE, ROWS, X, A)                                                   \
  mstage_rope(T, V, Z, H, N0, NE, ROWS, X, NULL, (A).window, A)
#else
#define STAGE_Q1(T, V, Z, H, N0, NE, ROWS, X, TPOS, A) mstage_raw(T, V, Z, H, N0, NE, ROWS, X)
#define STAGE_Q2(T, V, Z, H, N0, NE, ROWS, X, A) mstage_raw(T, V, Z, H, N0, NE, ROWS, X)
#endif

/* Two phases: the first phase's gradient (f, rows n_a, n_a + 8, times sc)
 * stored, and its registers cleared for the second. */
MMA_INLINE void store_frags_clear(__global ELT(DT) *t, rr_view vt, int z, int h, int n_a,
                                  int n_end, float4 *f, float sc, int cb0) {
  store_frags_at(t, vt, z, h, n_a, n_end, f, sc, sc, cb0, DCB);
  MMA_UNROLL
  for (int db = 0; db < DCB; db++) f[db] = (float4)(0.0f);
}

/* ---------------------------------------------------------------- phases of both kernels */

/* Row n's lse in log2 units (+inf where the row has no keys or does not
 * exist, so p = 0) and its delta (0 past the end). */
MMA_INLINE float2 row_lse_delta(__global const float *lse, rr_view vl, __global const float *delta,
                                rr_view vdl, int z, int h, int n, int n_end) {
  if (n >= n_end) return (float2)(INFINITY, 0.0f);
  const float x = lse[vl.off + z * vl.z + h * vl.h + n * vl.n];
  return (float2)((x == -INFINITY) ? INFINITY : x * M_LOG2E_F,
                  delta[vdl.off + z * vdl.z + h * vdl.h + n * vdl.n]);
}

/* dk/dv: query tile m0 of head h: lse (log2 units), delta and positions
 * per query, then Q1 at sq1 and / or Q2 at sq2 (the sides of the window
 * `sides` has: a tile class, or RR_IN / RR_OUT for one) and dO at sdo; the
 * copies issued, and (wait) waited for. */
MMA_INLINE void dkdv_issue_qtile(__global const ushort *Q1, rr_view vq1, __global const ushort *Q2,
                                 rr_view vq2, __global const ushort *DO, rr_view vdo,
                                 __global const float *lse, rr_view vl,
                                 __global const float *delta, rr_view vdl,
                                 __global const int *qpos, rr_view vqp, int z, int h, int m0,
                                 int sides, __local ushort *sq1, __local ushort *sq2,
                                 __local ushort *sdo, __local float *slse, __local float *sdelta,
                                 __local int *sqpos, rr_args A, bool wait) {
  for (int x = get_local_id(0); x < BM; x += WG) {
    const float2 ld = row_lse_delta(lse, vl, delta, vdl, z, h, m0 + x, A.Nq);
    slse[x] = ld.x;
    sdelta[x] = ld.y;
    sqpos[x] = m0 + x < A.Nq ? qpos_at(qpos, vqp, z, m0 + x, A) : 0;
  }
#if ROTARY
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
  if (!(sides & RR_OUT)) STAGE_Q1(Q1, vq1, z, h, m0, A.Nq, BM, sq1, sqpos, A);
  if (!(sides & RR_IN)) STAGE_Q2(ROTARY ? Q1 : Q2, ROTARY ? vq1 : vq2, z, h, m0, A.Nq, BM, sq2, A);
  mstage_raw(DO, vdo, z, h, m0, A.Nq, BM, sdo);
  if (wait) {
    copy_wait();
    wg_proxy_fence_if();
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* The A fragments of this warp's rows of a tile the caller began to stage
 * at x: waits for it, reads them, and leaves x free again. */
MMA_INLINE void frags_of_staged(uint4 *f, __local const ushort *x EMU_PARAM) {
  copy_wait();
  barrier(CLK_LOCAL_MEM_FENCE);
  load_afrags(f, x EMU_ARG);
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* The gradients' accumulation over a tile's n16 16-row blocks of Y: dX1 +=
 * dS1 Y1 and dX2 += dS2 Y2 (dq: Y = K of a key tile; dk: Y = Q of a query
 * tile), each where the tile has that side of the window and, in two
 * phases, where it is this phase's side (x1 and x2 are then one array). */
MMA_INLINE void acc_sides(float4 *x1, float4 *x2, const float4 *s1, const float4 *s2, int n16,
                          __local const ushort *y1, __local const ushort *y2, int cls, int ph,
                          int cb0 EMU_PARAM) {
  (void)ph;
  MMA_UNROLL
  for (int kk = 0; kk < n16; kk++) {
    if (!(cls & RR_OUT) && PH_IS(ph, 0))
      mma_rows_slice(x1, afrag(s1[2 * kk], s1[2 * kk + 1]), y1, kk, cb0 EMU_ARG);
    if (!(cls & RR_IN) && PH_IS(ph, 1))
      mma_rows_slice(x2, afrag(s2[2 * kk], s2[2 * kk + 1]), y2, kk, cb0 EMU_ARG);
  }
}

#if RR_WG && !PHASED
#error "warpgroup MMA backward: the two-phase kernels only"
#endif
#if PHASED
#include "rerope_bwd_phased.clh"
#else

/* ---------------------------------------------------------------- dq */

#if !FRAG_G
/* Q1, Q2 (rotary: RoPE(q, pos), RoPE(q, W)) and dO of the work-group's rows
 * m0.. as this warp's A fragments, kept in registers; staged through smem. */
MMA_INLINE void dq_row_frags(uint4 *qf1, uint4 *qf2, uint4 *dof, __global const ushort *Q1,
                             rr_view vq1, __global const ushort *Q2, rr_view vq2,
                             __global const ushort *DO, rr_view vdo, int z, int h, int m0,
                             __local ushort *smem, __local const int *sqpos, rr_args A EMU_PARAM) {
  STAGE_Q1(Q1, vq1, z, h, m0, A.Nq, RB, smem, sqpos, A);
  frags_of_staged(qf1, smem EMU_ARG);
  STAGE_Q2(ROTARY ? Q1 : Q2, ROTARY ? vq1 : vq2, z, h, m0, A.Nq, RB, smem, A);
  frags_of_staged(qf2, smem EMU_ARG);
  mstage_raw(DO, vdo, z, h, m0, A.Nq, RB, smem);
  copy_wait();
  barrier(CLK_LOCAL_MEM_FENCE);
  load_afrags(dof, smem EMU_ARG); /* (the first tile's barrier frees smem) */
}
#endif

/* dS = P (dP - delta) of a key tile for this warp's rows g, g + 8 (c: the
 * logits, log2 units; dp: dP; ld: the rows' lse and delta), into both d1
 * and d2; a mixed tile then keeps d1 inside the window and d2 outside. */
MMA_INLINE void dq_ds(float4 *d1, float4 *d2, bool mixed, int n0, rr_pos pq0, rr_pos pq1,
                      float4 ld, __global const int *kpos, __local const int *skpos, rr_args A) {
  const int t = lane_id() & 3;
  MMA_UNROLL
  for (int nb = 0; nb < NBK; nb++) {
    const float4 c = d1[nb];
    const float4 p = (float4)(fast_exp2(c.x - ld.x), fast_exp2(c.y - ld.x), fast_exp2(c.z - ld.y),
                              fast_exp2(c.w - ld.y));
    d1[nb] = d2[nb] = p * (d2[nb] - (float4)(ld.z, ld.z, ld.w, ld.w)); /* dS */
  }
  if (mixed) {
    MMA_UNROLL
    for (int nb = 0; nb < NBK; nb++) {
      const int cc = nb * 8 + 2 * t;
      const rr_pos pk0 = kpos ? skpos[cc] : n0 + cc, pk1 = kpos ? skpos[cc + 1] : n0 + cc + 1;
      const int4 in = (int4)(rr_inside(pq0, pk0, A), rr_inside(pq0, pk1, A),
                             rr_inside(pq1, pk0, A), rr_inside(pq1, pk1, A));
      d1[nb] = select((float4)(0.0f), d1[nb], in != 0);
      d2[nb] = select(d2[nb], (float4)(0.0f), in != 0);
    }
  } /* else only the tile's side is used */
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_rerope_bwd_dq(RR_DQ_PARAMS) {
  RR_POSITIONS(qpos, kpos);
  /* K1, K2, V tiles; Q1, Q2, dO staged here first. uint4: 16-byte rows for ldmatrix, cp.async */
  __local uint4 smem_[3 * BN * LDS / 8];
  __local ushort *smem = (__local ushort *)smem_;
  __local int sqpos[RB], skpos[BN];
  EMU_DECL
  __local ushort *sk1 = smem, *sk2 = smem + BN * LDS, *sv = smem + 2 * BN * LDS;
  __global const ushort *Q1 = (__global const ushort *)q1, *Q2 = (__global const ushort *)q2;
  __global const ushort *K1 = (__global const ushort *)k1, *K2 = (__global const ushort *)k2;
  __global const ushort *V = (__global const ushort *)v, *DO = (__global const ushort *)dout;

  const int l = lane_id(), w = warp_id(), g = l >> 2;
  const int2 bh = rr_block_head(A, A.Hq, true);
  const int m0 = bh.x * RB, h = bh.y, z = get_group_id(2) / NSL;
  const int cb0 = (get_group_id(2) % NSL) * DCB; /* this work-group's column slice */
  const int hk = h / A.G;

  stage_qpos(sqpos, qpos, vqp, z, m0, RB, A);
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Q1, Q2 and dO as A fragments: in registers throughout, or (FRAG_G) read per tile */
  uint4 qf1[KB], qf2[KB], dof[KB];
#if !FRAG_G
  dq_row_frags(qf1, qf2, dof, Q1, vq1, Q2, vq2, DO, vdo, z, h, m0, smem, sqpos, A EMU_ARG);
#endif

  /* this lane's rows g and g + 8: positions, lse and delta */
  const int r0 = w * 16 + g, n_a = m0 + r0, n_b = n_a + 8;
  const rr_pos pq0 = sqpos[r0], pq1 = sqpos[r0 + 8];
  const float2 lda = row_lse_delta(lse, vl, delta, vdl, z, h, n_a, A.Nq);
  const float2 ldb = row_lse_delta(lse, vl, delta, vdl, z, h, n_b, A.Nq);
  const float4 ld = (float4)(lda.x, ldb.x, lda.y, ldb.y);
  long qlo, qhi;
  qpos_range(qpos, vqp, z, m0, min(m0 + RB, A.Nq), A, &qlo, &qhi);
  int n_end = A.Nk;
  if (A.causal && !kpos) n_end = (int)clamp(qhi + 1, 0L, (long)A.Nk);

  const float sl2 = A.scale * M_LOG2E_F;
#if FRAG_G
  float4 a[DCB]; /* dq1, then dq2 */
#define a1 a
#define a2 a
#else
  float4 a1[DCB], a2[DCB];
#endif
  MMA_UNROLL
  for (int db = 0; db < DCB; db++) a1[db] = a2[db] = (float4)(0.0f);

  for (int ph = 0; ph < NPH; ph++) {
    int n0 = rr_next_ktile(0, n_end, qlo, qhi, kpos, vkp, z, A);
    while (n0 < n_end) {
      const int cls = rr_kclass(n0, qlo, qhi, kpos, vkp, z, A);
#if FRAG_G
      if (PH_SKIP(cls, ph)) {
        n0 = rr_next_ktile(n0 + BN, n_end, qlo, qhi, kpos, vkp, z, A);
        continue;
      }
#endif
      barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile (and the staging) is no longer read */
      stage_kpos(skpos, kpos, vkp, z, n0, BN, A);
#if ROTARY
      barrier(CLK_LOCAL_MEM_FENCE); /* the positions, for k1's rotation */
#endif
      mstage_ktile(K1, vk1, K2, vk2, V, vv, z, hk, n0, BN, cls, sk1, skpos, A);
      copy_wait();
      barrier(CLK_LOCAL_MEM_FENCE);

      /* the logits (d1) and dP = dO V^T (d2), then dS by side of the window */
      const bool mixed = !(cls & (RR_IN | RR_OUT));
      float4 d1[NBK], d2[NBK];
      const rr_pos pq[2] = {pq0, pq1};
#if FRAG_G
      if (!(cls & RR_OUT)) load_afrags_g(qf1, Q1, vq1, z, h, m0 + w * 16, A.Nq);
      if (cls & RR_OUT || mixed) load_afrags_g(qf2, Q2, vq2, z, h, m0 + w * 16, A.Nq);
#endif
      tile_logits(d1, 1, cls, n0, qf1, qf2, sk1, sk2, kpos ? skpos : NULL, pq, A, sl2 EMU_ARG);
#if FRAG_G
      load_afrags_g(dof, DO, vdo, z, h, m0 + w * 16, A.Nq);
#endif
      qk_tile(d2, dof, 1, sv EMU_ARG); /* in one straight run of mma */
      dq_ds(d1, d2, mixed, n0, pq0, pq1, ld, kpos, skpos, A);
      acc_sides(a1, a2, d1, d2, BN / 16, sk1, sk2, cls, ph, cb0 EMU_ARG); /* dQ1, dQ2 */
      n0 = rr_next_ktile(n0 + BN, n_end, qlo, qhi, kpos, vkp, z, A);
    }
#if FRAG_G
    store_frags_clear(ph ? dq2 : dq1, ph ? vdq2 : vdq1, z, h, n_a, A.Nq, a, A.scale, cb0);
#endif
  }

#if ROTARY
  /* dq = R(p_i)^T dq1 + R(W)^T dq2 */
  rope_frag_inverse(a1, (float)pq0, (float)pq1, A);
  rope_frag_inverse(a2, (float)A.window, (float)A.window, A);
  MMA_UNROLL
  for (int db = 0; db < DB; db++) a1[db] += a2[db];
  store_frags(dq1, vdq1, z, h, n_a, A.Nq, a1, A.scale, A.scale);
#elif !FRAG_G
  store_frags_at(dq1, vdq1, z, h, n_a, A.Nq, a1, A.scale, A.scale, cb0, DCB);
  store_frags_at(dq2, vdq2, z, h, n_a, A.Nq, a2, A.scale, A.scale, cb0, DCB);
#endif
#undef a1
#undef a2
}

/* ---------------------------------------------------------------- dk, dv */

/* P^T of a query tile for this warp's keys j_a, j_a + 8 (rows) and the
 * tile's queries (columns): from the logits pt (q1 . k1, or the tile's one
 * side) and s2 (q2 . k2 where mixed), masked where the tile needs it, and
 * the queries' lse. */
MMA_INLINE void dkdv_probs(float4 *pt, const float4 *s2, bool mixed, bool masked, int j_a,
                           rr_pos pk0, rr_pos pk1, __local const float *slse,
                           __local const int *sqpos, rr_args A, float sl2) {
  const int t = lane_id() & 3;
  if (masked) {
    MMA_UNROLL
    for (int qb = 0; qb < NBQ; qb++) {
      const float4 c1 = pt[qb], c2 = mixed ? s2[qb] : c1;
      const int c = qb * 8 + 2 * t;
      const rr_pos pqa = sqpos[c], pqb = sqpos[c + 1];
      /* rows are keys j_a, j_a + 8; columns queries c, c + 1 */
      pt[qb] = (float4)(logit(c1.x, c2.x, mixed, pqa, j_a, pk0, A, sl2),
                        logit(c1.y, c2.y, mixed, pqb, j_a, pk0, A, sl2),
                        logit(c1.z, c2.z, mixed, pqa, j_a + 8, pk1, A, sl2),
                        logit(c1.w, c2.w, mixed, pqb, j_a + 8, pk1, A, sl2));
    }
  } else {
    MMA_UNROLL
    for (int qb = 0; qb < NBQ; qb++) pt[qb] *= sl2;
  }
  MMA_UNROLL
  for (int qb = 0; qb < NBQ; qb++) {
    const int c = qb * 8 + 2 * t;
    const float la = slse[c], lb = slse[c + 1];
    pt[qb] = (float4)(fast_exp2(pt[qb].x - la), fast_exp2(pt[qb].y - lb),
                      fast_exp2(pt[qb].z - la), fast_exp2(pt[qb].w - lb));
  }
}

/* dS^T = P^T (dP^T - delta) from P^T (pt) and dP^T (d2), into both; a mixed
 * tile then keeps pt inside the window and d2 outside. */
MMA_INLINE void dkdv_ds(float4 *pt, float4 *d2, bool mixed, rr_pos pk0, rr_pos pk1,
                        __local const float *sdelta, __local const int *sqpos, rr_args A) {
  const int t = lane_id() & 3;
  MMA_UNROLL
  for (int qb = 0; qb < NBQ; qb++) {
    const int c = qb * 8 + 2 * t;
    pt[qb] = d2[qb] = pt[qb] * (d2[qb] - (float4)(sdelta[c], sdelta[c + 1], sdelta[c], sdelta[c + 1]));
  }
  if (mixed) {
    MMA_UNROLL
    for (int qb = 0; qb < NBQ; qb++) {
      const int c = qb * 8 + 2 * t;
      const rr_pos pqa = sqpos[c], pqb = sqpos[c + 1];
      const int4 in = (int4)(rr_inside(pqa, pk0, A), rr_inside(pqb, pk0, A),
                             rr_inside(pqa, pk1, A), rr_inside(pqb, pk1, A));
      pt[qb] = select((float4)(0.0f), pt[qb], in != 0);
      d2[qb] = select(d2[qb], (float4)(0.0f), in != 0);
    }
  }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_rerope_bwd_dkdv(RR_DKDV_PARAMS) {
  RR_POSITIONS(qpos, kpos);
  /* K1, K2, V of this work-group's keys (FRAG_G: read per tile from global
   * memory instead); Q1, Q2, dO of a query tile (uint4: 16-byte rows) */
#if !FRAG_G
  __local uint4 skv_[3 * RB * LDS / 8];
  __local ushort *skv = (__local ushort *)skv_;
  __local ushort *sk1 = skv, *sk2 = skv + RB * LDS, *sv = skv + 2 * RB * LDS;
#endif
  __local uint4 sqt_[3 * BM * LDS / 8];
  __local ushort *sqt = (__local ushort *)sqt_;
  __local float slse[BM], sdelta[BM];
  __local int sqpos[BM], skpos[RB];
  EMU_DECL
  __local ushort *sq1 = sqt, *sq2 = sqt + BM * LDS, *sdo = sqt + 2 * BM * LDS;
  __global const ushort *Q1 = (__global const ushort *)q1, *Q2 = (__global const ushort *)q2;
  __global const ushort *K1 = (__global const ushort *)k1, *K2 = (__global const ushort *)k2;
  __global const ushort *V = (__global const ushort *)v, *DO = (__global const ushort *)dout;

  const int l = lane_id(), w = warp_id(), g = l >> 2;
  const int2 bh = rr_block_head(A, A.Hq / A.G, false);
  const int n0 = bh.x * RB, hk = bh.y, z = get_group_id(2) / NSL;
  const int cb0 = (get_group_id(2) % NSL) * DCB; /* this work-group's column slice */

  stage_kpos(skpos, kpos, vkp, z, n0, RB, A);
  barrier(CLK_LOCAL_MEM_FENCE);
#if !FRAG_G
  mstage_ktile(K1, vk1, K2, vk2, V, vv, z, hk, n0, RB, 0, sk1, skpos, A);
  copy_wait();
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
  const int r0 = w * 16 + g, j_a = n0 + r0;
  const rr_pos pk0 = skpos[r0], pk1 = skpos[r0 + 8];
  long klo, khi;
  kpos_range(kpos, vkp, z, n0, min(n0 + RB, A.Nk), &klo, &khi);
  /* Default positions and causal: the first query that sees key n0. */
  int m_start = 0;
  if (A.causal && !qpos) m_start = (int)clamp(klo - (A.Nk - A.Nq), 0L, (long)A.Nq) / BM * BM;

  const float sl2 = A.scale * M_LOG2E_F;
#if FRAG_G
  float4 ak[DCB], av[DCB]; /* dk1, then dk2 */
#define ak1 ak
#define ak2 ak
#else
  float4 ak1[DCB], ak2[DCB], av[DCB];
#endif
  MMA_UNROLL
  for (int db = 0; db < DCB; db++) ak1[db] = ak2[db] = av[db] = (float4)(0.0f);
  /* this warp's keys as A fragments: reloaded per tile (registers go to the accumulators) */
#if FRAG_G
#define KFRAGS(f, G_, VG, L_) load_afrags_g(f, G_, VG, z, hk, n0 + w * 16, A.Nk)
#else
#define KFRAGS(f, G_, VG, L_) load_afrags(f, L_ EMU_ARG)
#endif

  for (int ph = 0; ph < NPH; ph++) {
    for (int gq = 0; gq < A.G; gq++) {
      const int h = hk * A.G + gq;
      int m0 = rr_next_qtile(m_start, klo, khi, qpos, vqp, z, A);
      while (m0 < A.Nq) {
        const int cls = rr_qclass(m0, klo, khi, qpos, vqp, z, A);
#if FRAG_G
        if (PH_SKIP(cls, ph)) {
          m0 = rr_next_qtile(m0 + BM, klo, khi, qpos, vqp, z, A);
          continue;
        }
#endif
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous query tile is no longer read */
        dkdv_issue_qtile(Q1, vq1, Q2, vq2, DO, vdo, lse, vl, delta, vdl, qpos, vqp, z, h, m0, cls,
                         sq1, sq2, sdo, slse, sdelta, sqpos, A, true);

        const bool mixed = !(cls & (RR_IN | RR_OUT)), out = (cls & RR_OUT) != 0;
        const bool masked =
            mixed || (cls & RR_CAUSAL_EDGE) || m0 + BM > A.Nq || n0 + RB > A.Nk || qpos;
        /* P^T (16 keys x BM queries of this warp) */
        float4 pt[NBQ], d2[NBQ];
        uint4 kf[KB];
        KFRAGS(kf, out ? K2 : K1, out ? vk2 : vk1, out ? sk2 : sk1);
        MMA_UNROLL
        for (int qb = 0; qb < NBQ; qb++) pt[qb] = qk_block(qb, kf, out ? sq2 : sq1 EMU_ARG);
        if (mixed) {
          KFRAGS(kf, K2, vk2, sk2);
          MMA_UNROLL
          for (int qb = 0; qb < NBQ; qb++) d2[qb] = qk_block(qb, kf, sq2 EMU_ARG);
        }
        dkdv_probs(pt, d2, mixed, masked, j_a, pk0, pk1, slse, sqpos, A, sl2);
        /* dV += P^T dO (two phases: a band edge's in the first) */
        if (PH_IS(ph, 0) || out) {
          MMA_UNROLL
          for (int kk = 0; kk < BM / 16; kk++)
            mma_rows_slice(av, afrag(pt[2 * kk], pt[2 * kk + 1]), sdo, kk, cb0 EMU_ARG);
        }
        KFRAGS(kf, V, vv, sv); /* now V's fragments: dP^T = V dO^T */
        MMA_UNROLL
        for (int qb = 0; qb < NBQ; qb++) d2[qb] = qk_block(qb, kf, sdo EMU_ARG);
        dkdv_ds(pt, d2, mixed, pk0, pk1, sdelta, sqpos, A);
        acc_sides(ak1, ak2, pt, d2, BM / 16, sq1, sq2, cls, ph, cb0 EMU_ARG); /* dK1, dK2 */
        m0 = rr_next_qtile(m0 + BM, klo, khi, qpos, vqp, z, A);
      }
    }
#if FRAG_G
    store_frags_clear(ph ? dk2 : dk1, ph ? vdk2 : vdk1, z, hk, j_a, A.Nk, ak, A.scale, cb0);
#endif
  }
#undef KFRAGS

#if ROTARY
  /* dk = R(p_j)^T dk1 + dk2 */
  rope_frag_inverse(ak1, (float)pk0, (float)pk1, A);
  MMA_UNROLL
  for (int db = 0; db < DB; db++) ak1[db] += ak2[db];
  store_frags(dk1, vdk1, z, hk, j_a, A.Nk, ak1, A.scale, A.scale);
#elif !FRAG_G
  store_frags_at(dk1, vdk1, z, hk, j_a, A.Nk, ak1, A.scale, A.scale, cb0, DCB);
  store_frags_at(dk2, vdk2, z, hk, j_a, A.Nk, ak2, A.scale, A.scale, cb0, DCB);
#endif
#undef ak1
#undef ak2
  store_frags_at(dv, vdv, z, hk, j_a, A.Nk, av, 1.0f, 1.0f, cb0, DCB);
}

#endif /* PHASED */

#endif /* RR_MMA */
