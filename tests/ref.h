/* Double-precision CPU references the tests (and `clattn run`) compare against. */
#ifndef CLATTN_TESTS_REF_H
#define CLATTN_TESTS_REF_H

#include <stdint.h>

/* Decode attention on logical (dense, contiguous) tensors:
 * q, o [B][Mq][Hq][D] (varlen: [total_q][Hq][D] with q_start), k, v [B][Nkv][Hkv][D],
 * bias [B][Hq][Mq][Nkv] (NULL: none), lse [B][Hq][Mq] (varlen: [Hq][total_q]).
 * kv_len NULL: every sequence has Nkv keys. */
typedef struct ref_decode_args {
  int B, Mq, Hq, Hkv, D, Nkv;
  const double *q, *k, *v, *bias;
  const int32_t *kv_len;
  const int32_t *q_start;
  double scale;
  int causal;
  double *o, *lse;
} ref_decode_args;

void ref_decode(const ref_decode_args *a);
/* The same math in f16 storage (FlashAttention's accuracy rule): each weight
 * exp(s - max) rounded to f16 before it multiplies V (pass K and V rounded
 * to f16 too); the sum of the weights exact. */
void ref_decode_p_f16(const ref_decode_args *a);
/* The same in bf16 storage: the weights rounded to bf16. */
void ref_decode_p_bf16(const ref_decode_args *a);

#endif
