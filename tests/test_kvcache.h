/* Shared by the kvcache suite's files: a cache tensor mirrored on the host
 * (the exact bytes its buffer should hold, guards included) and the
 * registration of the format and error-path tests. */
#ifndef CLATTN_TESTS_TEST_KVCACHE_H
#define CLATTN_TESTS_TEST_KVCACHE_H

#include "common.h"

#define KV_GUARD 64 /* poisoned bytes before and after every cache buffer's tensor */

/* A [S0, S1, H, X] cache (stride[2] = X + pad) of dtype dt and, for fp8, its
 * [S0, S1, H] scale-shift tensor, both between KV_GUARD bytes of 0xFF. */
typedef struct hcache {
  clattn_dtype dt;
  int G, D, H, pad;
  int64_t S0, S1, X;
  size_t es, bytes, ss_bytes;
  uint8_t *host, *ss_host; /* expected contents */
  cl_mem buf, ss_buf;
} hcache;

void hcache_init(hcache *c, clattn_dtype dt, int G, int D, int H, int64_t S0, int64_t S1,
                 int pad);
/* Creates the device buffers from the host bytes as they are now. */
void hcache_upload(hcache *c);
void hcache_free(hcache *c);
clattn_tensor hcache_tensor(const hcache *c);
clattn_tensor hcache_ss_tensor(const hcache *c); /* absent unless fp8 */
/* The expected row (o, i, h) after writing x (D floats): rounded to a float
 * dtype or quantized by the host reference. */
void hcache_write_row(hcache *c, int64_t o, int64_t i, int h, const float *x);
/* The expected row's values (dequantized by the host reference). */
void hcache_read_row(const hcache *c, int64_t o, int64_t i, int h, double *out);
/* The device buffers equal the expected bytes (a CUnit assertion). */
bool hcache_check(const hcache *c, const char *label);

void kvcache_add_format_tests(CU_pSuite s);
void kvcache_add_error_tests(CU_pSuite s);

#endif
