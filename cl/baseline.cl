/* The unfused reference of decode attention (lib/baseline.c): the kernels
 * around CLBlast's two batched GEMMs, S = scale Q K^T and O = P V.
 *
 * clattn_baseline_stage: copies a 4-d tensor of any float dtype and strides
 *   into a contiguous f32 buffer (CLBlast's half GEMM needs cl_khr_fp16,
 *   which NVIDIA lacks, so f16/bf16 inputs are staged). With VARLEN, packed
 *   queries [1, total_q, H, D] are spread to [B, Mp, H, D], missing rows 0.
 * clattn_baseline_softmax: one work-group per score row: adds the bias,
 *   masks keys past kv_len (and the future, when causal), and turns the row
 *   into probabilities in place; writes the row's lse.
 * The output (o in its dtype and strides, lse) is written by merge.cl's
 * clattn_merge_strided with a single part.
 *
 * Options: SRC_DT (f32|f16|bf16), VARLEN, CAUSAL, HAS_BIAS, WG. */
#include "softmax.clh"
#include "seq.clh"

#ifndef SRC_DT
#define SRC_DT f32
#endif
#ifndef WG
#define WG 128 /* work-items per softmax row, a power of two */
#endif

/* dst[i0, i1, i2, i3] = src[b0 + i0, i1, i2, i3] for dst of shape [nb, n1, n2, n3];
 * a grid-stride loop over the flat index, so any size fits one launch. */
__kernel void clattn_baseline_stage(__global const ELT(SRC_DT) *src, long src_off, long s0,
                                    long s1, long s2, long s3, __global float *dst, long nb,
                                    int n1, int n2, int n3, int b0,
                                    __global const int *q_start, long qs_off, int total_q) {
  const long total = nb * n1 * n2 * n3;
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    long r = i;
    const int i3 = (int)(r % n3);
    r /= n3;
    const int i2 = (int)(r % n2);
    r /= n2;
    const int i1 = (int)(r % n1);
    const long b = b0 + r / n1;
    long outer = b, inner = i1;
#if VARLEN
    /* query i1 of sequence b is packed row q_start[b] + i1 of batch 0 */
    int start, count;
    seq_q_rows(q_start + qs_off, (int)b, total_q, n1, &start, &count);
    if (i1 >= count) {
      dst[i] = 0.0f;
      continue;
    }
    outer = 0;
    inner = start + i1;
#endif
    dst[i] = LD(SRC_DT, src, src_off + outer * s0 + inner * s1 + i2 * s2 + i3 * s3);
  }
}

/* Max or sum of the work-group's values, through local memory (no
 * sub-group functions: NVIDIA's OpenCL has none). */
static inline float group_reduce(float x, __local float *tmp, bool is_max) {
  const int t = get_local_id(0);
  tmp[t] = x;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (t < s) tmp[t] = is_max ? fmax(tmp[t], tmp[t + s]) : tmp[t] + tmp[t + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = tmp[0];
  barrier(CLK_LOCAL_MEM_FENCE); /* tmp is reused by the next reduction */
  return r;
}

/* s: scores [nb, Hq, Mp, N] (already scaled), becomes probabilities.
 * lse: [B, Hq, Mp] f32, rows of sequence b0 + bl. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void clattn_baseline_softmax(
    __global float *s, int N, int Hq, int Mp, int b0, __global const int *kv_len, long kvl_off,
    __global const int *q_start, long qs_off, int total_q, __global const float *bias,
    long bias_off, long bb, long bh, long bm, long bn, __global float *lse) {
  __local float tmp[WG];
  const int t = get_local_id(0);
  const int hm = get_group_id(1);
  const int h = hm / Mp, m = hm % Mp;
  const int bl = get_group_id(2);
  const int b = b0 + bl;
  const int len = kv_len ? min(max(kv_len[kvl_off + b], 0), N) : N;
#if VARLEN
  int q0, qlen;
  seq_q_rows(q_start + qs_off, b, total_q, Mp, &q0, &qlen);
#else
  const int qlen = Mp;
#endif
  int visible = m < qlen ? len : 0;
#if CAUSAL
  /* query m of qlen sits at position len - qlen + m */
  if (m < qlen) visible = clamp(len - qlen + m + 1, 0, len);
#endif
  __global float *row = s + ((long)(bl * Hq + h) * Mp + m) * N;

  float mx = -INFINITY;
  for (int j = t; j < N; j += WG) {
    float x = -INFINITY;
    if (j < visible) {
      x = row[j];
#if HAS_BIAS
      x += bias[bias_off + b * bb + h * bh + m * bm + j * bn];
#endif
    }
    row[j] = x;
    mx = fmax(mx, x);
  }
  mx = group_reduce(mx, tmp, true);
  float sum = 0.0f;
  for (int j = t; j < N; j += WG) sum += exp_diff(row[j], mx);
  sum = group_reduce(sum, tmp, false);
  /* masked keys get exactly 0, so the second GEMM ignores them */
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int j = t; j < N; j += WG) row[j] = exp_diff(row[j], mx) * inv;
  if (t == 0) lse[((long)b * Hq + h) * Mp + m] = state_lse(mx, sum);
}
