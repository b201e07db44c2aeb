/* The ReRoPE suite's case (tests/test_rerope.c runs it against the double
 * reference; test_rerope_mma.c takes it for the tensor-core kernels). */
#ifndef CLATTN_TEST_REROPE_H
#define CLATTN_TEST_REROPE_H

#include "clattn.h"

#include <CUnit/CUnit.h>

typedef struct rcase {
  int Z, Hq, Hkv, Nq, Nk, D, W, causal;
  clattn_dtype dt;
  int rotary;      /* 1: clattn_rerope_rotary_* on raw q, k */
  int interleaved; /* rotary layout */
  int positions;   /* rotary: 0 default, 1 shared [N] (shifted), 2 per batch [Z, N] shuffled */
  int bwd;         /* also the backward */
  int strided;     /* tensors stored [Z, N, H, D] at an element offset, viewed through strides */
  int path;        /* clattn_force_path: 0 auto (the fast path where the device has
                    * one), 1 portable, 2 tensor cores (their PTX emulated without NVIDIA) */
  int cross_check; /* rotary: also the explicit kernels on host-rotated inputs */
  float scale;     /* softmax scale (0: 1/sqrt(D)) */
  int stages;      /* the tensor-core forward's ring of key tiles (0: the tuning row's) */
  int warp_blocks; /* ... and its 16-row query blocks per warp (0: the tuning row's) */
  int block_n;     /* ... and its keys per tile (0: the tuning row's) */
  int bwd_cols;    /* the tensor-core backward's columns per work-group, D > 64 (0: the row's) */
  int phases;      /* the tensor-core backward's rerope_bwd_phases + 1 (0: the row's) */
  int qring;       /* the two-phase backward's rerope_bwd_qring (0: the row's) */
  int bwd_bm;      /* ... rerope_bwd_block_m, dk/dv's query tile (0: the row's) */
  int bwd_stages;  /* ... rerope_bwd_stages, dq's ring (0: the row's) */
  int bwd_bn;      /* ... rerope_bwd_block_n, dq's key tile (0: the row's) */
  int wgmma;       /* the forward's rerope_wgmma: 2 warpgroup MMA (emulated off sm_90), 1 never (0: the row's) */
  int wg_bn;       /* ... rerope_wgmma_block_n, its keys per tile (0: the row's) */
  int bwd_wgmma;   /* the two-phase backward's rerope_bwd_wgmma (0: the row's) */
} rcase;

/* Runs c (forward, and the backward where c->bwd) against the double reference. */
void run_case(const rcase *c);
/* The plain case the tests vary: Z=1 Hq=2 Hkv=1 N=37 D=32 W=9, f32. */
rcase base(void);
/* The tensor-core kernels' tests (test_rerope_mma.c). */
void add_rerope_mma_tests(CU_pSuite s);

#endif
