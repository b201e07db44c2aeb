/* ReRoPE's tensor-core kernels forced (their PTX emulated off NVIDIA): the
 * forward's tiles and rings, the backward in two phases, in one pass, and
 * with wide heads' rows read from global memory, against the double
 * reference through run_case (tests/test_rerope.c). */
#include "common.h"
#include "test_rerope.h"

/* The plain case on the tensor-core kernels (forced), dtype dt, head dim D. */
static rcase mma_base(clattn_dtype dt, int D, int bwd) {
  rcase c = base();
  c.path = 2;
  c.dt = dt;
  c.D = D;
  c.bwd = bwd;
  return c;
}

/* The tensor-core kernels (cl/rerope_mma.clh): on NVIDIA their PTX, elsewhere
 * the PTX emulated in local memory, so the fragment bookkeeping the H200
 * runs is tested on any device. */
static void test_mma(void) {
  rcase c = mma_base(CLATTN_F16, 64, 0);
  c.Hq = 2, c.Hkv = 1;
  c.Nq = 70, c.Nk = 200; /* 4 key tiles: wholly outside, band edge, inside */
  c.W = 21;
  c.causal = 1;
  c.bwd = 1;
  run_case(&c);
  /* the forward's ring of key tiles wrapping unevenly (3 stages over 4 and 2
   * tiles), a negative scale (its sign folded into Q), and two blocks of 16
   * query rows per warp (Nq = 70: the second block of the second warp idle) */
  c.stages = 3;
  c.scale = -0.3f;
  run_case(&c);
  c.causal = 0;
  c.Nk = 100;
  c.scale = 0.0f;
  run_case(&c);
  c.warp_blocks = 2;
  run_case(&c);
  c.stages = 2;
  c.causal = 1;
  c.Nq = 150;
  c.Nk = 170;
  run_case(&c);
  c.stages = c.warp_blocks = 0;
  c.Nk = 200;
  c.dt = CLATTN_BF16;
  c.D = 48;
  c.causal = 0;
  c.Nq = 40;
  c.W = 70;
  run_case(&c);
  /* the forward's two passes over the key tiles (inside the window with Q1,
   * outside with Q2): pass 0 empty (W = 0), pass 1 empty (W >= N); queries
   * amid many key tiles, where pass 1 jumps over the band (W = 100, a block
   * of rows 256..319 skips keys 224..351); more queries than keys (the first
   * rows at positions below 0) */
  c = mma_base(CLATTN_F16, 64, 0);
  c.Nq = 70, c.Nk = 100;
  for (int i = 0; i < 2; i++) {
    c.W = i ? 100 : 0;
    c.causal = i;
    run_case(&c);
  }
  c.Nq = c.Nk = 600;
  c.W = 100;
  c.causal = 0;
  run_case(&c);
  c.warp_blocks = 2;
  c.causal = 1;
  run_case(&c);
  c.block_n = 32; /* tiles of 32 keys: the band's tiles and gaps at a finer grain */
  run_case(&c);
  c.warp_blocks = c.block_n = 0;
  c.Nq = 100, c.Nk = 60;
  c.W = 30;
  run_case(&c);
  c = mma_base(CLATTN_F16, 64, 0);
  c.rotary = 1;
  c.interleaved = 1;
  c.positions = 2;
  c.Z = 2;
  c.Nq = c.Nk = 66;
  c.W = 17;
  c.causal = 1;
  c.bwd = 1;
  run_case(&c);
  c.interleaved = 0;
  c.positions = 0;
  c.D = 128;
  c.Z = 1;
  c.causal = 0;
  run_case(&c);
}

/* The tensor-core backward of wide heads (D > 64) with the rows' fragments
 * read from global memory per tile (rerope_bwd_phases = 1; the form above
 * D = 128): whole rows of the gradients, or (rerope_bwd_cols) one column
 * slice: slices of an even and an odd number of 8-column blocks (D = 128:
 * 2 x 8; D = 80: 2 x 5), three slices (D = 96, 32 columns), whole rows (D =
 * 96, D = 256); GQA, band edges, keys past the last tile, causal or not. The
 * forward above D = 128 on tensor cores too. Same tolerance as the D <= 64
 * kernels: the same products, P and dS rounded to the dtype. */
static void test_mma_wide(void) {
  rcase c = mma_base(CLATTN_F16, 128, 1);
  c.phases = 2;
  c.Hq = 4, c.Hkv = 2;
  c.Nq = 70, c.Nk = 150; /* key tiles wholly outside, band edges, inside */
  c.W = 21;
  c.causal = 1;
  c.bwd_cols = 64;
  run_case(&c);
  c.bwd_cols = 40;
  c.dt = CLATTN_BF16;
  c.D = 80;
  c.Hq = 2, c.Hkv = 1;
  c.causal = 0;
  c.Nq = 40, c.Nk = 90;
  c.W = 30;
  run_case(&c);
  c.dt = CLATTN_F16;
  c.D = 96;
  c.bwd_cols = 32;
  c.causal = 1;
  c.Nq = c.Nk = 67;
  c.W = 70; /* W >= N: plain attention */
  run_case(&c);
  c.bwd_cols = 0;
  c.W = 0;
  run_case(&c);
  c.D = 256;
  c.Nq = c.Nk = 33;
  c.W = 9;
  run_case(&c);
}

/* The two-phase backward (cl/rerope_bwd_phased.clh; the default up to D =
 * 128): each phase masked to its side of the window, so band edges, a phase
 * with no tiles (W = 0, W >= N) and the on-the-fly form's rotations carried
 * from one phase into the other are the cases; dk/dv's ring of query tiles
 * of 32 (D = 128, explicit) or one stage (on the fly; tiles of 16), the
 * largest tiles the device's local memory holds elsewhere (up to 64; 32 up
 * to D = 64), dq's one stage of 64 keys (D = 128) or ring of 2, GQA, Nq !=
 * Nk, explicit positions. Tolerance as the other tensor-core kernels.
 * wgmma: rerope_wgmma and rerope_bwd_wgmma (2: warpgroup MMA, emulated off
 * sm_90; 0: the row's). */
static void phased_cases(int wgmma) {
  rcase c = mma_base(CLATTN_F16, 128, 1);
  c.bwd_wgmma = c.wgmma = wgmma;
  c.Hq = 4, c.Hkv = 2;
  c.Nq = 70, c.Nk = 150; /* key tiles wholly outside, band edges, inside */
  c.W = 21;
  c.causal = 1;
  c.qring = 2, c.bwd_bm = 32, c.bwd_stages = 1; /* the H200's plan at D = 128 */
  run_case(&c);
  c.qring = 1, c.bwd_bm = 16; /* the ring's query tiles of 16; without it */
  run_case(&c);
  c.qring = 2;
  run_case(&c);
  c.qring = c.bwd_bm = c.bwd_stages = 0;
  c.D = 64; /* tiles of 32, dq's ring of 2 */
  c.Hq = 2, c.Hkv = 1;
  c.Nq = c.Nk = 200;
  run_case(&c);
  c.dt = CLATTN_BF16;
  c.D = 80;
  c.Hq = 2, c.Hkv = 1;
  c.causal = 0;
  c.Nq = 40, c.Nk = 90;
  c.W = 30;
  run_case(&c);
  c.dt = CLATTN_F16;
  c.D = 96;
  c.causal = 1;
  c.Nq = c.Nk = 67;
  c.W = 70; /* W >= N: the second phase has no tiles */
  run_case(&c);
  c.W = 0; /* the first has none */
  run_case(&c);
  /* on the fly: dq = R(W)^T (R(W) R(p)^T dq1 + dq2), dk = R(p)^T dk1 + dk2 */
  c.rotary = 1;
  c.D = 128;
  c.Hq = 4, c.Hkv = 2;
  c.Nq = 70, c.Nk = 150;
  c.W = 21;
  c.positions = 1;
  c.bwd_bm = 16;
  run_case(&c);
  c.bwd_bm = 0;
  c.D = 96;
  c.interleaved = 1;
  c.positions = 2;
  c.Z = 2;
  c.causal = 0;
  run_case(&c);
  /* D = 16: tiles of 32, dq's ring of 2 key tiles */
  c.D = 16;
  c.Z = 1;
  c.interleaved = 0;
  c.positions = 0;
  run_case(&c);
  /* dq's key tiles of D (D = 32 with the row's 32, D = 64 with 64): on
   * warpgroup MMA its chain in halves (cl/rerope_mma.clh WG_ROWS_HALVES) */
  c.rotary = 0;
  c.D = 32;
  c.causal = 1;
  c.Hq = 4, c.Hkv = 2;
  c.Nq = 70, c.Nk = 150;
  c.W = 21;
  run_case(&c);
  c.D = 64;
  c.bwd_bn = 64;
  c.causal = 0;
  run_case(&c);
}

/* phased_cases on mma.sync, then the one-pass kernels. */
static void test_mma_phased(void) {
  phased_cases(0);
  rcase c;
  /* the one-pass kernels up to D = 64 (rerope_bwd_phases = 1; test_mma runs
   * the two-phase ones on its shapes): band edges, GQA, both products on the
   * fly with per-batch positions */
  c = mma_base(CLATTN_F16, 64, 1);
  c.phases = 2;
  c.Hq = 4, c.Hkv = 2;
  c.Nq = 70, c.Nk = 200;
  c.W = 21;
  c.causal = 1;
  run_case(&c);
  c.dt = CLATTN_BF16;
  c.D = 48;
  c.causal = 0;
  c.Nq = 40;
  run_case(&c);
  c.dt = CLATTN_F16;
  c.D = 64;
  c.rotary = 1;
  c.interleaved = 1;
  c.positions = 2;
  c.Z = 2;
  c.Nq = c.Nk = 66;
  c.causal = 1;
  run_case(&c);
}

/* The forward on warpgroup MMA (cl/wgmma.clh; rerope_wgmma = 2: emulated off
 * sm_90, each instruction's B read through its descriptor as the PTX ISA
 * defines it, so the tiles' core-matrix layout and the descriptors' offsets
 * are what is tested): K-major B of 16 (D = 16), 80 (odd chunk pairs), 64,
 * 96, 128 head columns and MN-major V of as many; key tiles of 16, 32, 64 and
 * 128; band edges, W = 1, both passes empty in turn, GQA, Nq != Nk, a ring of 3, a
 * negative scale, on the fly with per-batch positions (one stage), then a
 * backward from its LSE. Same tolerance as the other tensor-core kernels:
 * the same products in the same order. */
static void test_mma_wgmma(void) {
  rcase c = mma_base(CLATTN_F16, 64, 0);
  c.wgmma = 2;
  c.Hq = 2, c.Hkv = 1;
  c.Nq = 70, c.Nk = 200;
  c.W = 21;
  c.causal = 1;
  run_case(&c);
  c.stages = 3;
  c.scale = -0.3f;
  c.wg_bn = 32;
  run_case(&c);
  c.stages = 0;
  c.scale = 0.0f;
  c.wg_bn = 0;
  c.dt = CLATTN_BF16;
  c.D = 128;
  c.causal = 0;
  c.Nq = 40, c.Nk = 90;
  c.W = 100; /* W >= N: pass 1 empty */
  run_case(&c);
  c.dt = CLATTN_F16;
  c.D = 80;
  c.W = 0; /* pass 0 empty */
  c.causal = 1;
  c.wg_bn = 16;
  run_case(&c);
  c.D = 16;
  c.Nq = c.Nk = 150;
  c.W = 30;
  c.wg_bn = 128;
  run_case(&c);
  c.W = 1; /* the band: the diagonal only */
  c.causal = 0;
  c.wg_bn = 0;
  run_case(&c);
  c.causal = 1;
  c.wg_bn = 0;
  c.rotary = 1;
  c.interleaved = 1;
  c.positions = 2;
  c.Z = 2;
  c.D = 96;
  c.Nq = c.Nk = 66;
  c.W = 17;
  run_case(&c);
  c = mma_base(CLATTN_F16, 32, 1);
  c.wgmma = 2;
  c.Nq = 50, c.Nk = 80;
  c.W = 9;
  c.causal = 1;
  run_case(&c);
}

/* The two-phase backward on warpgroup MMA (rerope_bwd_wgmma = 2: emulated off
 * sm_90; the forward on it too): phased_cases' shapes and plans. dq: S and
 * dP chains, dq += dS K (MN-major K); dk/dv: S^T and dP^T (K-major query and
 * dO tiles), dv += P^T dO, dk += dS^T Q (MN-major), the keys' fragments in
 * registers (the ring) or read from local memory per tile. */
static void test_mma_wgmma_bwd(void) { phased_cases(2); }

void add_rerope_mma_tests(CU_pSuite s) {
  CU_add_test(s, "tensor-core kernels (PTX emulated off NVIDIA)", test_mma);
  CU_add_test(s, "tensor-core backward of wide heads, column slices", test_mma_wide);
  CU_add_test(s, "tensor-core backward in two phases, and in one pass", test_mma_phased);
  CU_add_test(s, "tensor-core forward on warpgroup MMA (emulated off sm_90)", test_mma_wgmma);
  CU_add_test(s, "tensor-core backward on warpgroup MMA (emulated off sm_90)", test_mma_wgmma_bwd);
}
