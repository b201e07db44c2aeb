/* The decode suite's case (tests/test_decode.c runs it against the double
 * reference; test_decode_mma.c takes it for the tensor-core form). */
#ifndef CLATTN_TEST_DECODE_H
#define CLATTN_TEST_DECODE_H

#include "clattn.h"
#include "ref.h"

#include <stdint.h>

typedef struct dcase {
  int B, Mq, Hq, Hkv, D, Nkv;
  clattn_dtype qdt, kvdt, odt;
  int splits;            /* 0 auto */
  int causal, bias, lse;
  int bhsd;              /* K/V stored [B, Hkv, N, D] and viewed through strides */
  int pad;               /* extra elements before each tensor (non-zero offsets) */
  const int32_t *kv_len; /* NULL: all Nkv */
  int page_size;         /* > 0: paged cache with a shuffled block table */
  int share_pages;       /* paged: sequences share their first pages (prefix sharing) */
  const int32_t *q_counts; /* varlen: queries per sequence (NULL: dense Mq) */
  int bad_entry;         /* paged: 1 = sequence 0's logical page 1 maps to -1, 2 = past num_pages */
  int len_over;          /* paged: kv_len[0] exceeds the table's capacity by this much */
  int two_launch;        /* splits merged by the merge kernel (decode_merge_last off) */
  int ws_junk;           /* a caller's workspace full of junk, decode run twice on it */
  const char *kernels;   /* a substring clattn_decode_kernels must give (NULL: not checked) */
  int rule;              /* also FlashAttention's accuracy rule against the same math in the K/V
                            dtype (f16 / bf16: the weights rounded to it); o in f32 */
} dcase;

/* FlashAttention's accuracy rule for o (tests/test_decode.c). */
void accuracy_rule(const char *name, const ref_decode_args *ra, const double *ks, const double *vs,
                   const double *o, size_t nq, clattn_dtype dt);
/* Runs c and checks o (and lse) against the double reference. */
void run_case(const dcase *c);
/* The plain case the tests vary: B=2 Mq=1 Hq=8 Hkv=2 D=64 77 keys, f32, lse. */
dcase base(void);

#endif
