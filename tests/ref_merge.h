/* Double-precision references of merging attention states (forward and
 * backward), on dense logical arrays: o [B][M][H][D], lse [B][H][M]. */
#ifndef CLATTN_TESTS_REF_MERGE_H
#define CLATTN_TESTS_REF_MERGE_H

typedef struct ref_merge_args {
  int n, B, M, H, D;
  const double *const *o;   /* n parts [B][M][H][D] */
  const double *const *lse; /* n parts [B][H][M] */
} ref_merge_args;

/* o = sum_i exp(lse_i - lse) o_i, lse = log sum_i exp(lse_i), with the
 * library's special values: parts with lse_i = -inf are skipped (their o_i
 * is never read), all -inf gives o = 0 and lse = -inf, a NaN or +inf lse_i
 * makes the row's o and lse NaN. */
void ref_merge(const ref_merge_args *a, double *o, double *lse);

/* Gradients of L = sum(dout * o) + sum(dlse * lse) (either NULL: zero) with
 * respect to each part, from the given forward o and lse:
 * do_i = w_i dout, dlse_i = w_i (dlse + dout . (o_i - o)), w_i = exp(lse_i - lse);
 * zero for a part with lse_i = -inf. */
void ref_merge_backward(const ref_merge_args *a, const double *o, const double *lse,
                        const double *dout, const double *dlse, double *const *do_i,
                        double *const *dlse_i);

/* L above, with o and lse from ref_merge (for finite differences); rows
 * with lse = -inf (no keys in any part) are left out of the lse term. */
double ref_merge_loss(const ref_merge_args *a, const double *dout, const double *dlse);

#endif
