/* The operations' builders and contracts (ops.c, ops_decode.c): what
 * their files share. */
#ifndef FUZZ_OPS_H
#define FUZZ_OPS_H

#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const cl_event *wait_list(const state *S) {
  if (S->bad_wait_list) return S->num_wait ? NULL : S->wait;
  return S->num_wait ? S->wait : NULL;
}
static inline cl_event *out_event(state *S) { return S->want_event ? &S->event : NULL; }

/* Resizes the buffer of slot i (after the buffers were made). */
static inline void remake_buffer(state *S, int i, uint64_t size) {
  slot *s = &S->s[i];
  if (s->buf < 0) return;
  bufd *b = &S->b[s->buf];
  fake_set_harness(true);
  if (b->mem) clReleaseMemObject(b->mem);
  cl_int err;
  b->size = size ? size : 4;
  b->mem = clCreateBuffer(S->w->cl[b->cl], CL_MEM_READ_WRITE, b->size, NULL, &err);
  fake_set_harness(false);
  for (int j = 0; j < S->ns; j++)
    if (S->s[j].buf == s->buf) S->s[j].t->buf = b->mem;
}

/* A workspace slot sized from the library's own answer (`bytes`). */
static inline void size_workspace(state *S, int i, size_t bytes) {
  slot *s = &S->s[i];
  if (i < 0 || !s->ws_auto || s->edited || s->buf < 0) return;
  const int64_t n = (int64_t)(bytes / 4) > 0 ? (int64_t)(bytes / 4) : 1;
  s->t->shape[0] = n; /* its stride stays as given (an edit may have changed it) */
  remake_buffer(S, i, s->t->offset + (uint64_t)n * 4);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* 4 bytes times the factors, saturated at 2^100 (negative factors count 0). */
static inline unsigned __int128 need_bytes(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  const int64_t f[5] = {a, b, c, d, e};
  unsigned __int128 p = 4;
  for (int i = 0; i < 5; i++) {
    if (f[i] <= 0) return 0;
    p *= (unsigned __int128)f[i];
    if (p > ((unsigned __int128)1 << 100)) return (unsigned __int128)1 << 100;
  }
  return p;
}

/* Elements of a semantic shape, saturated (a contract's "work"). */
static inline int64_t elems(const slot *s) {
  __int128 p = 1;
  for (int i = 0; i < s->sndim; i++) {
    if (s->sshape[i] <= 0) return 0;
    p *= s->sshape[i];
    if (p > INT64_MAX / 2) return INT64_MAX / 2;
  }
  return (int64_t)p;
}

static const clattn_dtype float_dt[4] __attribute__((unused)) = {CLATTN_F16, CLATTN_BF16, CLATTN_F32, CLATTN_F16};

/* ops_decode.c: decode, its workspace size, decode_multi, the reference */
void dec_build(state *S, rd *r);
void dec_prepare(state *S);
clattn_status dec_call(state *S);
void dec_contract(state *S);
void dec_failed(state *S);
clattn_status decws_call(state *S);
void decws_contract(state *S);
void multi_build(state *S, rd *r);
void multi_prepare(state *S);
clattn_status multi_call(state *S);
void multi_contract(state *S);
clattn_status ref_call(state *S);
void ref_contract(state *S);

#endif
