/* Small checked workloads for the thread and leak tests: each holds its
 * host inputs and CPU reference, and runs on any clattn context and queue
 * (its buffers made on that context). wl_run uses no global state and no
 * CUnit assertion, so threads may run workloads at once; it reports a
 * mismatch or a failed call through its message. */
#ifndef CLATTN_TESTS_WORKLOAD_H
#define CLATTN_TESTS_WORKLOAD_H

#include "clattn.h"

#include <stddef.h>
#include <stdint.h>

typedef enum wl_kind {
  WL_DECODE,           /* clattn_decode, two splits (the partial and the merge kernel) */
  WL_REFERENCE_DECODE, /* clattn_reference_decode (CLBlast) */
  WL_MERGE,            /* clattn_merge of three parts */
  WL_KV_APPEND,        /* clattn_kv_append into a dense f16 cache */
  WL_KV_QUANTIZE,      /* clattn_kv_quantize to int4 (two groups), then clattn_kv_dequantize */
  WL_REROPE,           /* clattn_rerope_fwd, causal, window 4 */
} wl_kind;

typedef struct wl_spec {
  wl_kind kind;
  clattn_dtype dtype; /* q/k/v/o (decode, ReRoPE), the parts (merge); f32 elsewhere */
  int head_dim;       /* a multiple of 8 (kv: of 16) */
  uint64_t seed;
} wl_spec;

typedef struct workload workload;

/* The workload's inputs and reference. NULL when out of memory. */
workload *wl_create(const wl_spec *spec);
void wl_free(workload *w);
/* "decode f16 D=64" */
const char *wl_name(const workload *w);
/* Uploads the inputs to ctx's context, runs on queue, waits, reads back and
 * compares with the reference. 0 when everything matched; else -1 and
 * `msg` says what failed. */
int wl_run(const workload *w, clattn_context *ctx, cl_command_queue queue, char *msg,
           size_t msg_size);

#endif
