/* Double-precision references of ReRoPE windowed attention: the forward,
 * its analytic backward, the rotary embedding, and the loss the tests
 * differentiate numerically to check the analytic gradients. */
#ifndef CLATTN_TESTS_REF_REROPE_H
#define CLATTN_TESTS_REF_REROPE_H

#include <stdint.h>

/* Contiguous logical tensors: q1, q2, o, dout, dq1, dq2 [Z][Hq][Nq][D];
 * k1, k2, v, dk1, dk2, dv [Z][Hkv][Nk][D]; lse [Z][Hq][Nq].
 * Positions: q_pos [Z][Nq], k_pos [Z][Nk]; NULL: query i sits at
 * Nk - Nq + i, key j at j.
 *   s_ij = scale * (|p_i - p_j| < window ? q1_i . k1_j : q2_i . k2_j)
 * over the keys with p_j <= p_i when causal. A row without keys gives
 * o = 0, lse = -inf, and no gradient. */
typedef struct ref_rerope_args {
  int Z, Hq, Hkv, Nq, Nk, D;
  int window, causal;
  double scale;
  const int32_t *q_pos, *k_pos;
  const double *q1, *q2, *k1, *k2, *v;
  double *o, *lse; /* forward outputs (lse may be NULL) */
  /* backward: input dout, outputs dq1..dv (summed over the query heads of a group) */
  const double *dout;
  double *dq1, *dq2, *dk1, *dk2, *dv;
} ref_rerope_args;

void ref_rerope_fwd(const ref_rerope_args *a);
/* Needs q1..v and dout; computes the forward itself. */
void ref_rerope_bwd(const ref_rerope_args *a);
/* sum over all elements of o * dout: the loss whose gradient ref_rerope_bwd gives. */
double ref_rerope_loss(const ref_rerope_args *a);

/* Rotary embedding of rows x [rows][D] in place: row r at position pos[r]
 * (pos NULL: every row at `fixed_pos`). NeoX pairs (d, d + D/2), interleaved
 * pairs (2i, 2i + 1); pair i turns by pos * theta^(-2i/D). inverse != 0
 * applies the transpose (the rotation by -pos). */
void ref_rope(double *x, int rows, int D, const int32_t *pos, int fixed_pos, double theta,
              int interleaved, int inverse);

#endif
