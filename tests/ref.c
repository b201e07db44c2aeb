/* Double-precision reference of decode attention. */
#include "ref.h"
#include "ref_quant.h"

#include <math.h>
#include <stdlib.h>

/* p_round: the weights exp(s - max) rounded to f16 (1), bf16 (2), or not (0). */
static void decode(const ref_decode_args *a, int p_round) {
  const int D = a->D, G = a->Hq / a->Hkv;
  double *s = malloc(sizeof(double) * (size_t)(a->Nkv > 0 ? a->Nkv : 1));
  for (int b = 0; b < a->B; b++) {
    int n = a->kv_len ? a->kv_len[b] : a->Nkv;
    if (n > a->Nkv) n = a->Nkv;
    int mq_count = a->q_start ? a->q_start[b + 1] - a->q_start[b] : a->Mq;
    for (int m = 0; m < mq_count; m++) {
      /* row index into q/o and lse */
      long qrow = a->q_start ? (long)a->q_start[b] + m : (long)b * a->Mq + m;
      for (int h = 0; h < a->Hq; h++) {
        const double *q = a->q + (qrow * a->Hq + h) * D;
        double *o = a->o + (qrow * a->Hq + h) * D;
        int hk = h / G;
        int visible = n;
        if (a->causal) {
          visible = n - mq_count + m + 1;
          if (visible < 0) visible = 0;
          if (visible > n) visible = n;
        }
        double mx = -INFINITY;
        for (int j = 0; j < visible; j++) {
          const double *k = a->k + (((long)b * a->Nkv + j) * a->Hkv + hk) * D;
          double dot = 0;
          for (int d = 0; d < D; d++) dot += q[d] * k[d];
          s[j] = dot * a->scale;
          if (a->bias) s[j] += a->bias[(((long)b * a->Hq + h) * a->Mq + m) * a->Nkv + j];
          if (s[j] > mx) mx = s[j];
        }
        double sum = 0;
        for (int d = 0; d < D; d++) o[d] = 0;
        if (mx > -INFINITY) {
          for (int j = 0; j < visible; j++) {
            double p = exp(s[j] - mx);
            sum += p;
            if (p_round == 1) p = ref_half_value(ref_half_round(p, 0));
            if (p_round == 2) p = ref_bf16_value(ref_bf16_round((float)p));
            const double *v = a->v + (((long)b * a->Nkv + j) * a->Hkv + hk) * D;
            for (int d = 0; d < D; d++) o[d] += p * v[d];
          }
          for (int d = 0; d < D; d++) o[d] /= sum;
        }
        if (a->lse) {
          double l = sum > 0 ? mx + log(sum) : -INFINITY;
          if (a->q_start)
            a->lse[(long)h * a->q_start[a->B] + qrow] = l;
          else
            a->lse[((long)b * a->Hq + h) * a->Mq + m] = l;
        }
      }
    }
  }
  free(s);
}

void ref_decode(const ref_decode_args *a) { decode(a, 0); }

void ref_decode_p_f16(const ref_decode_args *a) { decode(a, 1); }

void ref_decode_p_bf16(const ref_decode_args *a) { decode(a, 2); }
