/* Double-precision ReRoPE attention: forward, analytic backward, the loss
 * for finite differences, and the rotary embedding. Written for clarity,
 * not speed: the tests keep shapes small. */
#include "ref_rerope.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static long qpos_of(const ref_rerope_args *a, int z, int i) {
  return a->q_pos ? a->q_pos[(size_t)z * a->Nq + i] : (long)a->Nk - a->Nq + i;
}
static long kpos_of(const ref_rerope_args *a, int z, int j) {
  return a->k_pos ? a->k_pos[(size_t)z * a->Nk + j] : j;
}

static double dot(const double *x, const double *y, int n) {
  double s = 0.0;
  for (int d = 0; d < n; d++) s += x[d] * y[d];
  return s;
}

/* Row (z, h, i): its logits over all keys (-inf where masked), whether each
 * key lies inside the window, and the row's lse. Returns false for a row
 * without keys. */
static int row_logits(const ref_rerope_args *a, int z, int h, int i, double *s, char *inwin,
                      double *lse) {
  const int D = a->D, G = a->Hq / a->Hkv, hk = h / G;
  const double *q1 = a->q1 + (((size_t)z * a->Hq + h) * a->Nq + i) * D;
  const double *q2 = a->q2 + (((size_t)z * a->Hq + h) * a->Nq + i) * D;
  const long pi = qpos_of(a, z, i);
  double m = -INFINITY;
  for (int j = 0; j < a->Nk; j++) {
    const long pj = kpos_of(a, z, j);
    const size_t kr = (((size_t)z * a->Hkv + hk) * a->Nk + j) * D;
    inwin[j] = labs(pi - pj) < a->window;
    if (a->causal && pj > pi) {
      s[j] = -INFINITY;
      continue;
    }
    s[j] = a->scale * (inwin[j] ? dot(q1, a->k1 + kr, D) : dot(q2, a->k2 + kr, D));
    if (s[j] > m) m = s[j];
  }
  if (m == -INFINITY) {
    *lse = -INFINITY;
    return 0;
  }
  double l = 0.0;
  for (int j = 0; j < a->Nk; j++)
    if (s[j] != -INFINITY) l += exp(s[j] - m);
  *lse = m + log(l);
  return 1;
}

void ref_rerope_fwd(const ref_rerope_args *a) {
  const int D = a->D, G = a->Hq / a->Hkv;
  double *s = malloc(sizeof(double) * (a->Nk ? a->Nk : 1));
  char *inwin = malloc(a->Nk ? a->Nk : 1);
  for (int z = 0; z < a->Z; z++)
    for (int h = 0; h < a->Hq; h++)
      for (int i = 0; i < a->Nq; i++) {
        const size_t row = ((size_t)z * a->Hq + h) * a->Nq + i;
        double lse;
        int any = row_logits(a, z, h, i, s, inwin, &lse);
        double *o = a->o + row * D;
        memset(o, 0, sizeof(double) * D);
        if (a->lse) a->lse[row] = lse;
        if (!any) continue;
        for (int j = 0; j < a->Nk; j++) {
          if (s[j] == -INFINITY) continue;
          const double p = exp(s[j] - lse);
          const double *v = a->v + (((size_t)z * a->Hkv + h / G) * a->Nk + j) * D;
          for (int d = 0; d < D; d++) o[d] += p * v[d];
        }
      }
  free(s);
  free(inwin);
}

void ref_rerope_bwd(const ref_rerope_args *a) {
  const int D = a->D, G = a->Hq / a->Hkv;
  const size_t nq = (size_t)a->Z * a->Hq * a->Nq * D, nk = (size_t)a->Z * a->Hkv * a->Nk * D;
  memset(a->dq1, 0, sizeof(double) * nq);
  memset(a->dq2, 0, sizeof(double) * nq);
  memset(a->dk1, 0, sizeof(double) * nk);
  memset(a->dk2, 0, sizeof(double) * nk);
  memset(a->dv, 0, sizeof(double) * nk);
  double *s = malloc(sizeof(double) * (a->Nk ? a->Nk : 1));
  double *dp = malloc(sizeof(double) * (a->Nk ? a->Nk : 1));
  char *inwin = malloc(a->Nk ? a->Nk : 1);
  for (int z = 0; z < a->Z; z++)
    for (int h = 0; h < a->Hq; h++)
      for (int i = 0; i < a->Nq; i++) {
        const size_t row = ((size_t)z * a->Hq + h) * a->Nq + i;
        double lse;
        if (!row_logits(a, z, h, i, s, inwin, &lse)) continue;
        const double *dout = a->dout + row * D;
        /* delta = sum_j p_ij dp_ij = o_i . dout_i */
        double delta = 0.0;
        for (int j = 0; j < a->Nk; j++) {
          if (s[j] == -INFINITY) continue;
          const double *v = a->v + (((size_t)z * a->Hkv + h / G) * a->Nk + j) * D;
          dp[j] = dot(dout, v, D);
          delta += exp(s[j] - lse) * dp[j];
        }
        for (int j = 0; j < a->Nk; j++) {
          if (s[j] == -INFINITY) continue;
          const size_t kr = (((size_t)z * a->Hkv + h / G) * a->Nk + j) * D;
          const double p = exp(s[j] - lse);
          const double ds = p * (dp[j] - delta) * a->scale;
          const double *qx = (inwin[j] ? a->q1 : a->q2) + row * D;
          const double *kx = (inwin[j] ? a->k1 : a->k2) + kr;
          double *dqx = (inwin[j] ? a->dq1 : a->dq2) + row * D;
          double *dkx = (inwin[j] ? a->dk1 : a->dk2) + kr;
          for (int d = 0; d < D; d++) {
            a->dv[kr + d] += p * dout[d];
            dqx[d] += ds * kx[d];
            dkx[d] += ds * qx[d];
          }
        }
      }
  free(s);
  free(dp);
  free(inwin);
}

double ref_rerope_loss(const ref_rerope_args *a) {
  const size_t n = (size_t)a->Z * a->Hq * a->Nq * a->D;
  ref_rerope_args b = *a;
  b.o = malloc(sizeof(double) * (n ? n : 1));
  b.lse = NULL;
  ref_rerope_fwd(&b);
  double loss = 0.0;
  for (size_t i = 0; i < n; i++) loss += b.o[i] * a->dout[i];
  free(b.o);
  return loss;
}

void ref_rope(double *x, int rows, int D, const int32_t *pos, int fixed_pos, double theta,
              int interleaved, int inverse) {
  const int half = D / 2;
  for (int r = 0; r < rows; r++) {
    const double p = pos ? pos[r] : fixed_pos;
    double *row = x + (size_t)r * D;
    for (int i = 0; i < half; i++) {
      const double ang = p * pow(theta, -2.0 * i / D);
      const double c = cos(ang), s = inverse ? -sin(ang) : sin(ang);
      const int d0 = interleaved ? 2 * i : i, d1 = interleaved ? 2 * i + 1 : i + half;
      const double a0 = row[d0], a1 = row[d1];
      row[d0] = a0 * c - a1 * s;
      row[d1] = a1 * c + a0 * s;
    }
  }
}
