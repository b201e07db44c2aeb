/* Merging attention states: o = sum_i exp(lse_i - lse) o_i, lse = log sum_i exp(lse_i).
 *
 * clattn_merge_strided: n partials in one f32 buffer (the split-K reduce of
 * decode, and the public merge once its inputs are gathered).
 * One work-group per output row (b, m, h); work-items stride over d.
 *
 * Options: O_DT (f32|f16|bf16) the output dtype. */
#include "softmax.clh"

#ifndef O_DT
#define O_DT f32
#endif

__kernel void clattn_merge_strided(
    __global const float *part_o, long part_o_off, long part_o_split,
    long pob, long pom, long poh, long pod,
    __global const float *part_lse, long part_lse_off, long part_lse_split,
    long plb, long plh, long plm,
    int n, int M, int H, int D,
    __global ELT(O_DT) *o, long o_off, long ob, long om, long oh, long od,
    __global float *lse, long lse_off, long lb, long lh, long lm,
    __global const int *q_start) {
  const int b = get_global_id(2);
  const int mh = get_group_id(1);
  const int m = mh / H, h = mh % H;
  int out_b = b, out_m = m;
  if (q_start) {
    /* varlen: row m of sequence b is packed row q_start[b] + m */
    const int start = q_start[b];
    if (m >= q_start[b + 1] - start) return;
    out_b = 0;
    out_m = start + m;
  }
  const long pl = part_lse_off + b * plb + h * plh + m * plm;
  float mx = -INFINITY;
  for (int i = 0; i < n; i++) mx = fmax(mx, part_lse[pl + i * part_lse_split]);
  float sum = 0.0f;
  if (mx != -INFINITY)
    for (int i = 0; i < n; i++) sum += exp(part_lse[pl + i * part_lse_split] - mx);
  const float total = state_lse(mx, sum);
  const long po = part_o_off + b * pob + m * pom + h * poh;
  const long oo = o_off + out_b * ob + out_m * om + h * oh;
  for (int d = get_local_id(0); d < D; d += get_local_size(0)) {
    float acc = 0.0f;
    if (total != -INFINITY)
      for (int i = 0; i < n; i++) {
        const float w = exp_diff(part_lse[pl + i * part_lse_split], total);
        if (w != 0.0f) acc += w * part_o[po + i * part_o_split + d * pod];
      }
    ST(O_DT, o, oo + d * od, acc);
  }
  if (lse && get_local_id(0) == 0) lse[lse_off + out_b * lb + h * lh + out_m * lm] = total;
}
