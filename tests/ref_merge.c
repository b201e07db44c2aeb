/* Double-precision references of merging attention states. */
#include "ref_merge.h"

#include <math.h>
#include <stdlib.h>

static long o_at(const ref_merge_args *a, int b, int m, int h) {
  return (((long)b * a->M + m) * a->H + h) * a->D;
}
static long lse_at(const ref_merge_args *a, int b, int m, int h) {
  return ((long)b * a->H + h) * a->M + m;
}

void ref_merge(const ref_merge_args *a, double *o, double *lse) {
  for (int b = 0; b < a->B; b++)
    for (int m = 0; m < a->M; m++)
      for (int h = 0; h < a->H; h++) {
        const long ro = o_at(a, b, m, h), rl = lse_at(a, b, m, h);
        double mx = -INFINITY;
        int poisoned = 0;
        for (int i = 0; i < a->n; i++) {
          const double l = a->lse[i][rl];
          if (isnan(l) || l == INFINITY) poisoned = 1;
          else if (l > mx) mx = l;
        }
        if (poisoned) {
          for (int d = 0; d < a->D; d++) o[ro + d] = NAN;
          lse[rl] = NAN;
          continue;
        }
        if (mx == -INFINITY) {
          for (int d = 0; d < a->D; d++) o[ro + d] = 0.0;
          lse[rl] = -INFINITY;
          continue;
        }
        double sum = 0.0;
        for (int i = 0; i < a->n; i++)
          if (a->lse[i][rl] > -INFINITY) sum += exp(a->lse[i][rl] - mx);
        const double total = mx + log(sum);
        lse[rl] = total;
        for (int d = 0; d < a->D; d++) {
          double acc = 0.0;
          for (int i = 0; i < a->n; i++)
            if (a->lse[i][rl] > -INFINITY) acc += exp(a->lse[i][rl] - total) * a->o[i][ro + d];
          o[ro + d] = acc;
        }
      }
}

void ref_merge_backward(const ref_merge_args *a, const double *o, const double *lse,
                        const double *dout, const double *dlse, double *const *do_i,
                        double *const *dlse_i) {
  for (int b = 0; b < a->B; b++)
    for (int m = 0; m < a->M; m++)
      for (int h = 0; h < a->H; h++) {
        const long ro = o_at(a, b, m, h), rl = lse_at(a, b, m, h);
        const double g_lse = dlse ? dlse[rl] : 0.0;
        for (int i = 0; i < a->n; i++) {
          const double li = a->lse[i][rl];
          const double w = (li == -INFINITY) ? 0.0 : exp(li - lse[rl]);
          double dot = 0.0;
          for (int d = 0; d < a->D; d++) {
            const double g = dout ? dout[ro + d] : 0.0;
            do_i[i][ro + d] = w == 0.0 ? 0.0 : w * g;
            if (w != 0.0 && dout) dot += g * (a->o[i][ro + d] - o[ro + d]);
          }
          dlse_i[i][rl] = w == 0.0 ? 0.0 : w * (g_lse + dot);
        }
      }
}

double ref_merge_loss(const ref_merge_args *a, const double *dout, const double *dlse) {
  const long no = (long)a->B * a->M * a->H * a->D, nl = (long)a->B * a->H * a->M;
  double *o = malloc(sizeof(double) * (size_t)(no ? no : 1));
  double *lse = malloc(sizeof(double) * (size_t)(nl ? nl : 1));
  ref_merge(a, o, lse);
  double L = 0.0;
  for (long i = 0; i < no && dout; i++) L += dout[i] * o[i];
  /* an empty row's lse (-inf) is a constant of the parts: left out */
  for (long i = 0; i < nl && dlse; i++)
    if (lse[i] != -INFINITY) L += dlse[i] * lse[i];
  free(o);
  free(lse);
  return L;
}
