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
 *   tensor cores (RR_MMA 1, NVIDIA inline PTX, cl/rerope_mma.clh): four warps,
 *     16 query rows each; Q1, Q2 held as mma A fragments, mma.sync m16n8k16
 *     for S = Q K^T and O += P V (P goes from accumulator to A fragment in
 *     registers); cp.async streams V during S and the next K during P V. */
#include "rerope.clh"

#if RR_MMA
#include "rerope_mma.clh"
#endif

#define RT (WG / CT)
#define TM (BM / RT)
#define TN (BN / CT)
#define DW (D / CT)

#if !RR_MMA

RR_TILE_DOTS(tile_dots, TM, TN)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_rerope_fwd(__global const ELT(DT) *q1, rr_view vq1, __global const ELT(DT) *q2,
                  rr_view vq2, __global const ELT(DT) *k1, rr_view vk1,
                  __global const ELT(DT) *k2, rr_view vk2, __global const ELT(DT) *v, rr_view vv,
                  __global ELT(DT) *o, rr_view vo, __global float *lse, rr_view vl,
                  __global const int *qpos, rr_view vqp, __global const int *kpos, rr_view vkp,
                  rr_args A) {
  __local TT tq1[BM * LDT], tq2[BM * LDT];
  __local TT tk1[BN * LDT], tk2[BN * LDT], tv[BN * LDT];
  __local float tp[BM * (BN + 1)];
  __local float tred[BM * CT];
  __local int tqpos[BM], tkpos[BN];

  const int lid = get_local_id(0), r = lid / CT, c = lid % CT;
  const int m0 = rr_query_block(A) * BM, h = get_group_id(1), z = get_group_id(2);
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
    stage_kpos(tkpos, kpos, vkp, z, n0, BN, A);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* only the side(s) of the band this tile touches */
    stage_k_pair(k1, vk1, k2, vk2, z, hk, n0, BN, tk1, tk2, tkpos, cls, A);
    stage_raw(v, vv, z, hk, n0, A.Nk, BN, tv);
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
#if BM != 16 * NW || BN % 16 || 3 * BN < BM
#error "tensor-core forward: BM = 16 rows per warp, BN a multiple of 16, BM <= 3 BN"
#endif

/* One tile of the online softmax: logits s (log2 units) become p, the row
 * maxima / sums and the accumulator are rescaled; then O += P V. */
MMA_INLINE void softmax_pv(float4 *s, float *mx, float *lsum, float4 *acc,
                          __local const ushort *sv EMU_PARAM) {
  float tm0 = -INFINITY, tm1 = -INFINITY;
  MMA_UNROLL
  for (int nb = 0; nb < NB; nb++) {
    tm0 = fmax(tm0, fmax(s[nb].x, s[nb].y));
    tm1 = fmax(tm1, fmax(s[nb].z, s[nb].w));
  }
  /* a row with nothing visible yet keeps max -inf: exp2(-inf - 0) = 0, never NaN */
  const float mn0 = fmax(mx[0], quad_max(tm0 EMU_ARG)), mn1 = fmax(mx[1], quad_max(tm1 EMU_ARG));
  const float mu0 = (mn0 == -INFINITY) ? 0.0f : mn0, mu1 = (mn1 == -INFINITY) ? 0.0f : mn1;
  const float al0 = native_exp2(mx[0] - mu0), al1 = native_exp2(mx[1] - mu1);
  mx[0] = mn0;
  mx[1] = mn1;
  float ps0 = 0.0f, ps1 = 0.0f;
  MMA_UNROLL
  for (int nb = 0; nb < NB; nb++) {
    const float4 p = (float4)(native_exp2(s[nb].x - mu0), native_exp2(s[nb].y - mu0),
                              native_exp2(s[nb].z - mu1), native_exp2(s[nb].w - mu1));
    s[nb] = p;
    ps0 += p.x + p.y;
    ps1 += p.z + p.w;
  }
  lsum[0] = lsum[0] * al0 + ps0;
  lsum[1] = lsum[1] * al1 + ps1;
  MMA_UNROLL
  for (int db = 0; db < DB; db++) acc[db] *= (float4)(al0, al0, al1, al1);
  /* P's accumulator fragments are the A fragments of the next product */
  MMA_UNROLL
  for (int kk = 0; kk < BN / 16; kk++)
    mma_rows(acc, afrag(s[2 * kk], s[2 * kk + 1]), sv, kk EMU_ARG);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_rerope_fwd(__global const ELT(DT) *q1, rr_view vq1, __global const ELT(DT) *q2,
                  rr_view vq2, __global const ELT(DT) *k1, rr_view vk1,
                  __global const ELT(DT) *k2, rr_view vk2, __global const ELT(DT) *v, rr_view vv,
                  __global ELT(DT) *o, rr_view vo, __global float *lse, rr_view vl,
                  __global const int *qpos, rr_view vqp, __global const int *kpos, rr_view vkp,
                  rr_args A) {
  /* K1, K2, V tiles; Q is staged here first. uint4: ldmatrix and cp.async need 16-byte rows */
  __local uint4 smem_[3 * BN * LDS / 8];
  __local ushort *smem = (__local ushort *)smem_;
  __local int sqpos[BM], skpos[BN];
  EMU_DECL
  __local ushort *sk1 = smem, *sk2 = smem + BN * LDS, *sv = smem + 2 * BN * LDS;
  __global const ushort *Q1 = (__global const ushort *)q1, *Q2 = (__global const ushort *)q2;
  __global const ushort *K1 = (__global const ushort *)k1, *K2 = (__global const ushort *)k2;
  __global const ushort *V = (__global const ushort *)v;

  const int l = lane_id(), w = warp_id(), g = l >> 2, t = l & 3;
  const int m0 = rr_query_block(A) * BM, h = get_group_id(1), z = get_group_id(2);
  const int hk = h / A.G;

  stage_qpos(sqpos, qpos, vqp, z, m0, BM, A);
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Q1 and Q2 stay in registers as A fragments for the whole loop. */
  uint4 qf1[KB], qf2[KB];
#if ROTARY
  mstage_rope(Q1, vq1, z, h, m0, A.Nq, BM, smem, sqpos, 0, A);
#else
  mstage_raw(Q1, vq1, z, h, m0, A.Nq, BM, smem);
#endif
  copy_wait();
  barrier(CLK_LOCAL_MEM_FENCE);
  load_afrags(qf1, smem EMU_ARG);
  barrier(CLK_LOCAL_MEM_FENCE);
#if ROTARY
  mstage_rope(Q1, vq1, z, h, m0, A.Nq, BM, smem, NULL, A.window, A);
#else
  mstage_raw(Q2, vq2, z, h, m0, A.Nq, BM, smem);
#endif
  copy_wait();
  barrier(CLK_LOCAL_MEM_FENCE);
  load_afrags(qf2, smem EMU_ARG);
  barrier(CLK_LOCAL_MEM_FENCE); /* the staging area becomes the K/V tiles */

  /* this lane's two rows: g and g + 8 of the warp */
  const int r0 = w * 16 + g;
  const long pq0 = sqpos[r0], pq1 = sqpos[r0 + 8];
  long qlo, qhi;
  qpos_range(qpos, vqp, z, m0, min(m0 + BM, A.Nq), A, &qlo, &qhi);
  int n_end = A.Nk;
  if (A.causal && !kpos) n_end = (int)clamp(qhi + 1, 0L, (long)A.Nk);

  const float sl2 = A.scale * M_LOG2E_F; /* logits in log2 units: exp2 */
  float mx[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.0f, 0.0f};
  float4 acc[DB], s[NB];
  MMA_UNROLL
  for (int db = 0; db < DB; db++) acc[db] = (float4)(0.0f);

  int n0 = rr_next_ktile(0, n_end, qlo, qhi, kpos, vkp, z, A);
#if ROTARY
  /* k1 = RoPE(k, p_j) is computed while staging: no asynchronous copies */
  while (n0 < n_end) {
    const int cls = rr_kclass(n0, qlo, qhi, kpos, vkp, z, A);
    stage_kpos(skpos, kpos, vkp, z, n0, BN, A);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!(cls & RR_OUT)) mstage_rope(K1, vk1, z, hk, n0, A.Nk, BN, sk1, skpos, 0, A);
    if (!(cls & RR_IN)) mstage_raw(K1, vk1, z, hk, n0, A.Nk, BN, sk2); /* k2 = k */
    mstage_raw(V, vv, z, hk, n0, A.Nk, BN, sv);
    copy_wait();
    barrier(CLK_LOCAL_MEM_FENCE);
    tile_logits(s, cls, n0, qf1, qf2, sk1, sk2, skpos, pq0, pq1, A, sl2 EMU_ARG);
    softmax_pv(s, mx, lsum, acc, sv EMU_ARG);
    n0 = rr_next_ktile(n0 + BN, n_end, qlo, qhi, kpos, vkp, z, A);
    barrier(CLK_LOCAL_MEM_FENCE); /* the tiles are no longer read */
  }
#else
  /* Software pipeline: V of this tile streams in during S = Q K^T, K of the
   * next tile during O += P V (one buffer each; cp.async on NVIDIA). */
  if (n0 < n_end) {
    const int cls = rr_kclass(n0, qlo, qhi, kpos, vkp, z, A);
    if (!(cls & RR_OUT)) mstage_raw(K1, vk1, z, hk, n0, A.Nk, BN, sk1);
    if (!(cls & RR_IN)) mstage_raw(K2, vk2, z, hk, n0, A.Nk, BN, sk2);
  }
  while (n0 < n_end) {
    const int cls = rr_kclass(n0, qlo, qhi, kpos, vkp, z, A);
    copy_wait();
    barrier(CLK_LOCAL_MEM_FENCE); /* K(n0) has landed; V(previous) is no longer read */
    mstage_raw(V, vv, z, hk, n0, A.Nk, BN, sv);
    tile_logits(s, cls, n0, qf1, qf2, sk1, sk2, NULL, pq0, pq1, A, sl2 EMU_ARG);
    copy_wait();
    barrier(CLK_LOCAL_MEM_FENCE); /* V(n0) has landed; K(n0) is no longer read */
    const int n1 = rr_next_ktile(n0 + BN, n_end, qlo, qhi, kpos, vkp, z, A);
    if (n1 < n_end) {
      const int c1 = rr_kclass(n1, qlo, qhi, kpos, vkp, z, A);
      if (!(c1 & RR_OUT)) mstage_raw(K1, vk1, z, hk, n1, A.Nk, BN, sk1);
      if (!(c1 & RR_IN)) mstage_raw(K2, vk2, z, hk, n1, A.Nk, BN, sk2);
    }
    softmax_pv(s, mx, lsum, acc, sv EMU_ARG);
    n0 = n1;
  }
#endif

  const float l0 = quad_sum(lsum[0] EMU_ARG), l1 = quad_sum(lsum[1] EMU_ARG);
  const float i0 = (l0 > 0.0f) ? 1.0f / l0 : 0.0f, i1 = (l1 > 0.0f) ? 1.0f / l1 : 0.0f;
  const int n_a = m0 + r0, n_b = n_a + 8;
  store_frags(o, vo, z, h, n_a, A.Nq, acc, i0, i1);
  if (lse && t == 0) {
    /* natural log of the row sum: (max + log2 l) ln 2 */
    if (n_a < A.Nq)
      lse[vl.off + z * vl.z + h * vl.h + n_a * vl.n] =
          (l0 > 0.0f) ? (mx[0] + log2(l0)) * M_LN2_F : -INFINITY;
    if (n_b < A.Nq)
      lse[vl.off + z * vl.z + h * vl.h + n_b * vl.n] =
          (l1 > 0.0f) ? (mx[1] + log2(l1)) * M_LN2_F : -INFINITY;
  }
}

#endif /* RR_MMA */
