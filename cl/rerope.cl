/* ReRoPE windowed attention, forward (the second seed, in f32 accumulation).
 *
 * clattn_rerope_fwd: one work-group per (block of BM query rows, query head,
 * batch). K/V tiles of BN keys go through local memory; tiles wholly inside
 * or outside the window band compute one dot product, band-edge tiles both.
 * Online softmax in f32; o and lse (natural log) written once. A row without
 * visible keys gets o = 0, lse = -inf.
 *
 * Two implementations of one kernel, one argument list:
 *   portable (RR_MMA 0): work-item (r, c) of WG = RT x CT owns rows r + RT*i
 *     and score columns c + CT*u; the softmax row max goes through local memory.
 *   tensor cores (RR_MMA 1, NVIDIA inline PTX, cl/rerope_mma.clh): WG / 32
 *     warps of MT blocks of 16 query rows; two passes over the key tiles,
 *     the pairs inside the window with Q1 held as mma A fragments, then
 *     those outside with Q2; mma.sync m16n8k16 for S = Q K^T and O += P V
 *     (P goes from accumulator to A fragment in registers); a ring of STAGES
 *     key tiles streams in by cp.async while one is computed, one barrier
 *     per tile. */
#include "rerope.clh"

#if RR_MMA
#include "rerope_mma.clh"
#endif

#define RT (WG / CT)
#define TM (BM / RT)
#define TN (BN / CT)
#define DW (D / CT)

/* The kernel's one argument list (lib/rerope.c: launch_fwd), both implementations. */
#define RR_FWD_PARAMS                                                                              \
  __global const ELT(DT) *q1, rr_view vq1, __global const ELT(DT) *q2, rr_view vq2,                \
      __global const ELT(DT) *k1, rr_view vk1, __global const ELT(DT) *k2, rr_view vk2,            \
      __global const ELT(DT) *v, rr_view vv, __global ELT(DT) *o, rr_view vo, __global float *lse, \
      rr_view vl, RR_POS_PARAMS

#if !RR_MMA

RR_TILE_DOTS(tile_dots, TM, TN)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_rerope_fwd(RR_FWD_PARAMS) {
  RR_POSITIONS(qpos, kpos);
  __local TT tq1[BM * LDT], tq2[BM * LDT];
  __local TT tk1[BN * LDT], tk2[BN * LDT], tv[BN * LDT];
  __local float tp[BM * (BN + 1)];
  __local float tred[BM * CT];
  __local int tqpos[BM], tkpos[BN];

  const int lid = get_local_id(0), r = lid / CT, c = lid % CT;
  const int2 bh = rr_block_head(A, A.Hq, true);
  const int m0 = bh.x * BM, h = bh.y, z = get_group_id(2);
  const int hk = h / A.G;
  const int m_end = min(m0 + BM, A.Nq);

  stage_qpos(tqpos, qpos, vqp, z, m0, BM, A);
  barrier(CLK_LOCAL_MEM_FENCE);
  stage_q_pair(q1, vq1, q2, vq2, z, h, m0, BM, tq1, tq2, tqpos, 0, A);
  long qlo, qhi;
  qpos_range(qpos, vqp, z, m0, m_end, A, &qlo, &qhi);
  /* Default positions: causal rows see keys j <= qhi only. */
  int n_end = A.Nk;
  if (A.causal && !kpos) n_end = (int)clamp(qhi + 1, 0L, (long)A.Nk);

  float m_i[TM], l_i[TM], acc[TM * DW];
  for (int i = 0; i < TM; i++) {
    m_i[i] = -INFINITY;
    l_i[i] = 0.0f;
  }
  for (int x = 0; x < TM * DW; x++) acc[x] = 0.0f;

  int n0 = rr_next_ktile(0, n_end, qlo, qhi, kpos, vkp, z, A);
  while (n0 < n_end) {
    const int cls = rr_kclass(n0, qlo, qhi, kpos, vkp, z, A);
    RR_STAGE_KTILE(n0, cls); /* only the side(s) of the band this tile touches */
    barrier(CLK_LOCAL_MEM_FENCE);

    float s[TM * TN];
    RR_BANDED_DOTS(tile_dots, cls, tq1, tk1, tq2, tk2, r, c, tqpos, tkpos, TM, TN, s, A);
    /* scale, mask (rows/keys past the end, causal), partial row max */
    for (int i = 0; i < TM; i++) {
      const int row = r + RT * i;
      float mx = -INFINITY;
      for (int u = 0; u < TN; u++) {
        const int col = c + CT * u;
        const bool ok = m0 + row < A.Nq && n0 + col < A.Nk && rr_visible(tqpos[row], tkpos[col], A);
        const float x = ok ? s[i * TN + u] * A.scale : -INFINITY;
        s[i * TN + u] = x;
        mx = fmax(mx, x);
      }
      tred[row * CT + c] = mx;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < TM; i++) {
      const int row = r + RT * i;
      float mx = m_i[i];
      for (int x = 0; x < CT; x++) mx = fmax(mx, tred[row * CT + x]);
      /* mx == -inf: nothing visible yet; exp(-inf - 0) = 0 keeps p and alpha finite */
      const float mu = (mx == -INFINITY) ? 0.0f : mx;
      const float alpha = exp(m_i[i] - mu);
      m_i[i] = mx;
      float sum = 0.0f;
      for (int u = 0; u < TN; u++) {
        const float p = exp(s[i * TN + u] - mu);
        sum += p;
        tp[row * (BN + 1) + c + CT * u] = p;
      }
      l_i[i] = l_i[i] * alpha + sum;
      for (int w = 0; w < DW; w++) acc[i * DW + w] *= alpha;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = 0; j < BN; j++) {
      float vv_[DW];
      for (int w = 0; w < DW; w++) vv_[w] = tl_get(tv, j * LDT + c + CT * w);
      for (int i = 0; i < TM; i++) {
        const float p = tp[(r + RT * i) * (BN + 1) + j];
        for (int w = 0; w < DW; w++) acc[i * DW + w] += p * vv_[w];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    n0 = rr_next_ktile(n0 + BN, n_end, qlo, qhi, kpos, vkp, z, A);
  }

  /* the row sums are split over the CT work-items of a row */
  for (int i = 0; i < TM; i++) tred[(r + RT * i) * CT + c] = l_i[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = 0; i < TM; i++) {
    const int row = r + RT * i, n = m0 + row;
    if (n >= A.Nq) continue;
    float l = 0.0f;
    for (int x = 0; x < CT; x++) l += tred[row * CT + x];
    const float inv = (l > 0.0f) ? 1.0f / l : 0.0f;
    const long ob = vidx(vo, z, h, n, 0);
    for (int w = 0; w < DW; w++) ST(DT, o, ob + (c + CT * w) * vo.d, acc[i * DW + w] * inv);
    if (lse && c == 0) lse[vl.off + z * vl.z + h * vl.h + n * vl.n] = state_lse(m_i[i], l);
  }
}

#else /* RR_MMA */

#define NB (BN / 8) /* n-blocks of 8 keys in a tile */
#ifndef MT
#define MT 1 /* blocks of 16 query rows per warp */
#endif
#ifndef STAGES
#define STAGES 2
#endif
/* a stage holds one key tile of a pass: its K (K1 or K2) and V, BN rows each */
#define STAGE_ELTS (2 * TILE_ELTS(BN))
#if BM != 16 * MT * NW || BN % 16 || STAGES < 1 || STAGES * 2 * BN < BM
#error "tensor-core forward: BM = 16 MT rows per warp, BN a multiple of 16, BM <= 2 BN STAGES"
#endif
#if RR_WG && (MT != 1 || D > 128)
#error "warpgroup MMA forward: one row block per warp (a warpgroup's 64 rows), D <= 128"
#endif

/* The running row maximum moves only when a tile's maximum passes it by more
 * than this (log2 units): until then p = 2^(s - max) <= 2^8 (f32 sums, and P
 * rounded to f16 / bf16 keep their relative precision), and the accumulator
 * is rescaled far less often than once per tile. */
#define MAX_SLACK 8.0f

/* One row block's share of a tile of the online softmax: raw scores s (-inf
 * where masked) become p = 2^(sl2 s - max); the row maxima (log2 units) and
 * sums, and the accumulator, are rescaled when a maximum moves. */
MMA_INLINE void softmax_tile(float4 *s, float *mx, float *lsum, float4 *acc, float sl2 EMU_PARAM) {
  float tm0 = -INFINITY, tm1 = -INFINITY;
  MMA_UNROLL
  for (int nb = 0; nb < NB; nb++) {
    tm0 = fmax(tm0, fmax(s[nb].x, s[nb].y));
    tm1 = fmax(tm1, fmax(s[nb].z, s[nb].w));
  }
  /* sl2 > 0 (the kernel folds the sign of the scale into Q), so max(sl2 s) = sl2 max(s).
   * A row's maximum is the same on the 4 lanes of its quad: the quad's
   * maxima are formed only when some lane's own passes it (a warp-uniform
   * branch). The emulation's shuffles are work-group barriers, which must not
   * sit in a branch that warps may take differently: there the quad's maxima
   * are formed first (the same test, the same values). */
  tm0 *= sl2;
  tm1 *= sl2;
#if MMA_EMULATE
  tm0 = quad_max(tm0 EMU_ARG);
  tm1 = quad_max(tm1 EMU_ARG);
#endif
  if (warp_any(tm0 > mx[0] + MAX_SLACK || tm1 > mx[1] + MAX_SLACK EMU_ARG)) {
#if !MMA_EMULATE
    tm0 = quad_max(tm0 EMU_ARG);
    tm1 = quad_max(tm1 EMU_ARG);
#endif
    const float mn0 = fmax(mx[0], tm0), mn1 = fmax(mx[1], tm1);
    /* a row with nothing visible yet keeps max -inf and scale 1, never NaN */
    const float al0 = (mn0 == -INFINITY) ? 1.0f : fast_exp2(mx[0] - mn0);
    const float al1 = (mn1 == -INFINITY) ? 1.0f : fast_exp2(mx[1] - mn1);
    mx[0] = mn0;
    mx[1] = mn1;
    lsum[0] *= al0;
    lsum[1] *= al1;
    MMA_UNROLL
    for (int db = 0; db < DB; db++) acc[db] *= (float4)(al0, al0, al1, al1);
  }
  /* masked scores are -inf: 2^-inf = 0 (and a row still at max -inf sees only those) */
  const float mu0 = (mx[0] == -INFINITY) ? 0.0f : mx[0], mu1 = (mx[1] == -INFINITY) ? 0.0f : mx[1];
  float ps0 = 0.0f, ps1 = 0.0f;
  MMA_UNROLL
  for (int nb = 0; nb < NB; nb++) {
    const float4 p = (float4)(fast_exp2(fma(s[nb].x, sl2, -mu0)), fast_exp2(fma(s[nb].y, sl2, -mu0)),
                              fast_exp2(fma(s[nb].z, sl2, -mu1)), fast_exp2(fma(s[nb].w, sl2, -mu1)));
    s[nb] = p;
    ps0 += p.x + p.y;
    ps1 += p.z + p.w;
  }
  lsum[0] += ps0;
  lsum[1] += ps1;
}

/* ---------------------------------------------------------------- the two passes
 *
 * The key tiles are taken in two passes: pass 0 has the pairs inside the
 * window (scores q1 . k1), pass 1 those outside (q2 . k2). A tile wholly
 * inside (RR_IN) or outside (RR_OUT) is in one pass; a band-edge tile is in
 * both, each pass masking the other's pairs. The online softmax is
 * indifferent to the order and the split of the keys. A pass holds one Q in
 * registers and stages one K per tile: the registers of a second Q and of
 * band edges' second product are free for more warps. */

/* The key tiles of a pass: steps of BN from 0 before end, less the tiles
 * [skip_lo, skip_hi). With implied key positions: pass 0's keys lie less
 * than W from [qlo, qhi] (none when W = 0), pass 1's at or before qhi - W
 * or at or after qlo + W; both before n_end. A tile in pass 0 has a key
 * inside the window, one in pass 1 a key outside: the classes agree (RR_IN
 * tiles are only in pass 0, RR_OUT only in pass 1). Given key positions
 * (KPOS), the tiles' classes are scanned instead. */
typedef struct rr_pass {
  int end, skip_lo, skip_hi;
} rr_pass;

static inline rr_pass pass_tiles(int ps, int n_end, long qlo, long qhi, rr_args A) {
  rr_pass P = {n_end, -1, -1};
#if !KPOS
  if (ps == 0) {
    const long lo = qlo - A.window + 1;
    P.end = A.window > 0 ? (int)clamp(qhi + A.window, 0L, (long)n_end) : 0;
    if (lo > 0) {
      P.skip_lo = 0;
      P.skip_hi = lo < n_end ? (int)(lo / BN * BN) : n_end;
    }
  } else {
    const long a = qhi - A.window < 0 ? 0 : ((qhi - A.window) / BN + 1) * BN;
    const long b = qlo + A.window < n_end ? (qlo + A.window) / BN * BN : n_end;
    if (b > a) {
      P.skip_lo = (int)a;
      P.skip_hi = (int)b;
    }
  }
#endif
  return P;
}

/* The first tile of pass ps (tiles P) at or after n0, or P.end. */
static inline int pass_next(int n0, int ps, rr_pass P, long qlo, long qhi,
                            __global const int *kpos, rr_view vkp, int z, rr_args A) {
#if KPOS
  const int other = ps ? RR_IN : RR_OUT;
  n0 = rr_next_ktile(n0, P.end, qlo, qhi, kpos, vkp, z, A);
  while (n0 < P.end && (rr_kclass(n0, qlo, qhi, kpos, vkp, z, A) & other))
    n0 = rr_next_ktile(n0 + BN, P.end, qlo, qhi, kpos, vkp, z, A);
  return n0;
#else
  return n0 == P.skip_lo ? P.skip_hi : n0;
#endif
}

/* Key tile n0 of pass ps into x: its K at x (pass 0 K1, on the fly
 * RoPE(k, tpos); pass 1 K2, on the fly k itself), V at x + TILE_ELTS(BN). */
MMA_INLINE void stage_pass_tile(__global const ushort *K1, rr_view vk1, __global const ushort *K2,
                                rr_view vk2, __global const ushort *V, rr_view vv, int z, int hk,
                                int n0, int ps, __local ushort *x, __local const int *tpos,
                                rr_args A) {
#if ROTARY
  if (ps == 0)
    mstage_rope(K1, vk1, z, hk, n0, A.Nk, BN, x, tpos, 0, A);
  else
    mstage_raw(K1, vk1, z, hk, n0, A.Nk, BN, x);
#else
  mstage_raw(ps ? K2 : K1, ps ? vk2 : vk1, z, hk, n0, A.Nk, BN, x);
#endif
  mstage_raw(V, vv, z, hk, n0, A.Nk, BN, x + TILE_ELTS(BN));
}

/* The score of query position pq and key j (position pk) in pass ps, or
 * -inf where the key is past Nk, invisible, or (mixed: a band edge) on the
 * other pass's side. */
static inline float pass_logit(float s, bool mixed, int ps, rr_pos pq, int j, rr_pos pk,
                               rr_args A) {
  const bool other = mixed && rr_inside(pq, pk, A) == (ps != 0);
  return (j >= A.Nk || !rr_visible(pq, pk, A) || other) ? -INFINITY : s;
}

#if RR_WG
/* Warpgroup MMA (rerope_mma.clh's WG_ROWS_T, WG_ROWS): S = Q K^T of the
 * warpgroup's 64 rows and the tile's BN keys in one chain of KB
 * instructions ... */
MMA_INLINE void wg_scores(float4 *s, const uint4 *qf, __local const ushort *sk EMU_PARAM) {
  wg_fence();
  WG_ROWS_T(BN, s, qf, sk);
  wg_commit();
  wg_wait();
  wg_touch(s, NB);
}
/* ... and O += P V, P the probabilities s (rounded to the storage dtype) as
 * A fragments, in BN / 16. */
MMA_INLINE void wg_pv(float4 *acc, const float4 *s, __local const ushort *sv EMU_PARAM) {
  uint4 pa[BN / 16];
  MMA_UNROLL
  for (int kk = 0; kk < BN / 16; kk++) pa[kk] = afrag(s[2 * kk], s[2 * kk + 1]);
  wg_fence();
  WG_ROWS(BN, acc, pa, sv);
  wg_commit();
  wg_wait();
  wg_touch(acc, DB);
}
#endif

/* The scores of this warp's MT row blocks (A fragments qf of the pass's Q,
 * row positions pq[2 mt], pq[2 mt + 1] for rows g, g + 8) against key tile
 * n0 of class cls (K at sk, positions skpos or NULL for j) in pass ps:
 * s[mt * NB + nb], in one straight run of mma, then masked where needed. */
MMA_INLINE void pass_scores(float4 *s, int cls, int ps, int n0, const uint4 *qf,
                            __local const ushort *sk, __local const int *skpos, const rr_pos *pq,
                            rr_args A EMU_PARAM) {
#if RR_WG
  wg_scores(s, qf, sk EMU_ARG);
#else
  qk_tile(s, qf, MT, sk EMU_ARG);
#endif
  if (!tile_masked(cls, n0, A)) return; /* interior tiles (nearly all) */
  const int t = lane_id() & 3;
  const bool mixed = !(cls & (RR_IN | RR_OUT));
  MMA_UNROLL
  for (int mt = 0; mt < MT; mt++) {
    MMA_UNROLL
    for (int nb = 0; nb < NB; nb++) {
      const float4 c = s[mt * NB + nb];
      const int j = n0 + nb * 8 + 2 * t;
      const rr_pos pk0 = skpos ? skpos[j - n0] : j, pk1 = skpos ? skpos[j - n0 + 1] : j + 1;
      const rr_pos pa = pq[2 * mt], pb = pq[2 * mt + 1];
      s[mt * NB + nb] = (float4)(pass_logit(c.x, mixed, ps, pa, j, pk0, A),
                                 pass_logit(c.y, mixed, ps, pa, j + 1, pk1, A),
                                 pass_logit(c.z, mixed, ps, pb, j, pk0, A),
                                 pass_logit(c.w, mixed, ps, pb, j + 1, pk1, A));
    }
  }
}

/* One key tile of a pass for this warp's MT row blocks: scores, the
 * softmax, then O += P V with P's accumulator fragments as the A fragments. */
MMA_INLINE void tile_step(float4 *acc, float *mx, float *lsum, int cls, int ps, int n0,
                          const uint4 *qf, __local const ushort *sk, __local const int *skpos,
                          const rr_pos *pq, float sl2, rr_args A EMU_PARAM) {
  float4 s[MT * NB];
  pass_scores(s, cls, ps, n0, qf, sk, skpos, pq, A EMU_ARG);
  MMA_UNROLL
  for (int mt = 0; mt < MT; mt++)
    softmax_tile(s + mt * NB, mx + 2 * mt, lsum + 2 * mt, acc + mt * DB, sl2 EMU_ARG);
#if RR_WG
  wg_pv(acc, s, sk + TILE_ELTS(BN) EMU_ARG);
#else
  MMA_UNROLL
  for (int kk = 0; kk < BN / 16; kk++) {
    uint4 pa[MT];
    MMA_UNROLL
    for (int mt = 0; mt < MT; mt++) pa[mt] = afrag(s[mt * NB + 2 * kk], s[mt * NB + 2 * kk + 1]);
    mma_rows_n(acc, pa, MT, sk + BN * LDS, kk EMU_ARG);
  }
#endif
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_rerope_fwd(RR_FWD_PARAMS) {
  RR_POSITIONS(qpos, kpos);
  /* STAGES key tiles; each pass's Q is staged here first. uint4: ldmatrix and cp.async need 16-byte rows */
  __local uint4 smem_[STAGES * STAGE_ELTS / 8];
  __local ushort *smem = (__local ushort *)smem_;
  __local int sqpos[BM], skpos[BN];
  EMU_DECL
  __global const ushort *Q1 = (__global const ushort *)q1, *Q2 = (__global const ushort *)q2;
  __global const ushort *K1 = (__global const ushort *)k1, *K2 = (__global const ushort *)k2;
  __global const ushort *V = (__global const ushort *)v;

  const int l = lane_id(), w = warp_id(), g = l >> 2, t = l & 3;
  const int2 bh = rr_block_head(A, A.Hq, true);
  const int m0 = bh.x * BM, h = bh.y, z = get_group_id(2);
  const int hk = h / A.G;
  const int r0 = w * 16 * MT; /* this warp's first row of the block */

  stage_qpos(sqpos, qpos, vqp, z, m0, BM, A);
  barrier(CLK_LOCAL_MEM_FENCE);
  /* this lane's rows: g and g + 8 of each row block */
  rr_pos pq[2 * MT];
  MMA_UNROLL
  for (int mt = 0; mt < MT; mt++) {
    pq[2 * mt] = sqpos[r0 + 16 * mt + g];
    pq[2 * mt + 1] = sqpos[r0 + 16 * mt + g + 8];
  }
  long qlo, qhi;
  qpos_range(qpos, vqp, z, m0, min(m0 + BM, A.Nq), A, &qlo, &qhi);
  int n_end = A.Nk;
  if (A.causal && !kpos) n_end = (int)clamp(qhi + 1, 0L, (long)A.Nk);
  const float sl2 = fabs(A.scale) * M_LOG2E_F; /* logits in log2 units: exp2 */

  float mx[2 * MT], lsum[2 * MT];
  float4 acc[MT * DB];
  MMA_UNROLL
  for (int i = 0; i < 2 * MT; i++) {
    mx[i] = -INFINITY;
    lsum[i] = 0.0f;
  }
  MMA_UNROLL
  for (int i = 0; i < MT * DB; i++) acc[i] = (float4)(0.0f);

  for (int ps = 0; ps < 2; ps++) {
    /* The pass's Q (pass 0 Q1, on the fly RoPE(q, p_i); pass 1 Q2, on the
     * fly RoPE(q, W)) as A fragments for the whole pass, staged where the
     * key tiles go. */
    uint4 qf[MT * KB];
    barrier(CLK_LOCAL_MEM_FENCE); /* the last pass's tiles are no longer read */
#if ROTARY
    mstage_rope(Q1, vq1, z, h, m0, A.Nq, BM, smem, ps ? NULL : sqpos, ps ? A.window : 0, A);
#else
    mstage_raw(ps ? Q2 : Q1, ps ? vq2 : vq1, z, h, m0, A.Nq, BM, smem);
#endif
    copy_wait();
    barrier(CLK_LOCAL_MEM_FENCE);
    MMA_UNROLL
    for (int mt = 0; mt < MT; mt++) load_afrags_at(qf + mt * KB, smem, r0 + 16 * mt EMU_ARG);
    barrier(CLK_LOCAL_MEM_FENCE); /* the staging area becomes the K/V tiles */
    /* a negative scale: scores of -Q, so that the softmax scale sl2 is positive */
    if (A.scale < 0.0f) {
      MMA_UNROLL
      for (int kb = 0; kb < MT * KB; kb++) qf[kb] ^= (uint4)(0x80008000u);
    }

    const rr_pass P = pass_tiles(ps, n_end, qlo, qhi, A);
    int n0 = pass_next(0, ps, P, qlo, qhi, kpos, vkp, z, A);
#if ROTARY
    /* k1 = RoPE(k, p_j) is computed while staging: one stage, no asynchronous copies */
    while (n0 < P.end) {
      const int cls = rr_kclass(n0, qlo, qhi, kpos, vkp, z, A);
      stage_kpos(skpos, kpos, vkp, z, n0, BN, A);
      barrier(CLK_LOCAL_MEM_FENCE);
      stage_pass_tile(K1, vk1, K2, vk2, V, vv, z, hk, n0, ps, smem, skpos, A);
      copy_wait();
      wg_proxy_fence_if();
      barrier(CLK_LOCAL_MEM_FENCE);
      tile_step(acc, mx, lsum, cls, ps, n0, qf, smem, skpos, pq, sl2, A EMU_ARG);
      n0 = pass_next(n0 + BN, ps, P, qlo, qhi, kpos, vkp, z, A);
      barrier(CLK_LOCAL_MEM_FENCE); /* the tiles are no longer read */
    }
#else
    /* A ring of STAGES key tiles: tile i + STAGES - 1 streams in (cp.async
     * on NVIDIA, one copy group per tile) while tile i is computed; one
     * barrier per tile, which also frees the stage the next copies overwrite. */
    int nn = n0;
    for (int st = 0; st + 1 < STAGES; st++) {
      if (nn < P.end) {
        stage_pass_tile(K1, vk1, K2, vk2, V, vv, z, hk, nn, ps, smem + st * STAGE_ELTS, NULL, A);
        nn = pass_next(nn + BN, ps, P, qlo, qhi, kpos, vkp, z, A);
      }
      copy_commit();
    }
    int cur = 0;
    while (n0 < P.end) {
#if STAGES > 1
      copy_wait_groups(STAGES - 2); /* this lane's copies of tile n0 have landed */
      wg_proxy_fence_if();          /* (warpgroup MMA reads them through the async proxy) */
#endif
      barrier(CLK_LOCAL_MEM_FENCE); /* ... everyone's; and the stage before is no longer read */
      int nxt = cur + STAGES - 1;
      if (nxt >= STAGES) nxt -= STAGES;
      if (nn < P.end) {
        stage_pass_tile(K1, vk1, K2, vk2, V, vv, z, hk, nn, ps, smem + nxt * STAGE_ELTS, NULL, A);
        nn = pass_next(nn + BN, ps, P, qlo, qhi, kpos, vkp, z, A);
      }
      copy_commit();
#if STAGES == 1
      copy_wait(); /* one stage: the tile just issued is the one computed */
      wg_proxy_fence_if();
      barrier(CLK_LOCAL_MEM_FENCE);
#endif
      tile_step(acc, mx, lsum, rr_kclass(n0, qlo, qhi, kpos, vkp, z, A), ps, n0, qf,
                smem + cur * STAGE_ELTS, NULL, pq, sl2, A EMU_ARG);
      n0 = pass_next(n0 + BN, ps, P, qlo, qhi, kpos, vkp, z, A);
      if (++cur == STAGES) cur = 0;
    }
    copy_wait(); /* (only empty groups are left) */
#endif
  }

  MMA_UNROLL
  for (int mt = 0; mt < MT; mt++) {
    const float l0 = quad_sum(lsum[2 * mt] EMU_ARG), l1 = quad_sum(lsum[2 * mt + 1] EMU_ARG);
    const float i0 = (l0 > 0.0f) ? 1.0f / l0 : 0.0f, i1 = (l1 > 0.0f) ? 1.0f / l1 : 0.0f;
    const int n_a = m0 + r0 + 16 * mt + g, n_b = n_a + 8;
    store_frags(o, vo, z, h, n_a, A.Nq, acc + mt * DB, i0, i1);
    if (lse && t == 0) {
      if (n_a < A.Nq) lse[vl.off + z * vl.z + h * vl.h + n_a * vl.n] = state_lse2(mx[2 * mt], l0);
      if (n_b < A.Nq) lse[vl.off + z * vl.z + h * vl.h + n_b * vl.n] = state_lse2(mx[2 * mt + 1], l1);
    }
  }
}

#endif /* RR_MMA */
