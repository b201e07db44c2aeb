/* Decode's tensor-core form (cl/decode_mma.clh) forced, its PTX emulated off
 * NVIDIA, and the one-launch merge of the splits, against the double
 * reference through run_case (tests/test_decode.c). */
#include "common.h"
#include "internal.h"
#include "test_decode.h"

#include <string.h>

/* The tensor-core form (cl/decode_mma.clh), forced: mma.sync on NVIDIA, its
 * PTX emulated in local memory elsewhere, so the fragment bookkeeping is
 * checked on every device. f16/bf16 q and K/V with aligned rows, D 64 128 256;
 * blocks of 8 and 16 rows (and two blocks), lengths not a multiple of a warp's
 * 16 keys, splits, causal, bias, paged (with bad entries), varlen, strides. */
static dcase mma_base(clattn_dtype dt, int D) {
  dcase c = base();
  c.qdt = c.kvdt = c.odt = dt;
  c.D = D;
  return c;
}

/* FlashAttention's accuracy rule (accuracy_rule, through run_case) for f16 / bf16
 * K/V on tensor cores, whose weights are rounded to the K/V dtype for the
 * V product as torch's math rounds them: one split over 8192 keys (every
 * rounding a warp's sums carry piles up there), causal Mq 2 with bias and
 * GQA of 4, a padded head dim paged, D = 256 split; then the portable form
 * (its twin, f32 weights) on the first two. o in f32. */
static void test_mma_rule(void) {
  static const struct { clattn_dtype dt; int D, Hkv, N, Mq, causal, bias, page, splits; } cases[] = {
      {CLATTN_F16, 128, 2, 8192, 1, 0, 0, 0, 1},
      {CLATTN_BF16, 64, 2, 300, 2, 1, 1, 0, 0},
      {CLATTN_F16, 80, 2, 4000, 1, 0, 0, 16, 1},
      {CLATTN_BF16, 256, 2, 2048, 1, 0, 0, 0, 2},
  };
  for (int path = 2; path >= 1; path--)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && (path == 2 || i < 2); i++) {
      dcase c = mma_base(cases[i].dt, cases[i].D);
      c.odt = CLATTN_F32;
      c.Hkv = cases[i].Hkv, c.Nkv = cases[i].N, c.Mq = cases[i].Mq;
      c.causal = cases[i].causal, c.bias = cases[i].bias, c.page_size = cases[i].page;
      c.splits = cases[i].splits;
      c.rule = 1;
      c.kernels = path == 2 ? "tensor cores" : "portable";
      clattn_force_path(path);
      run_case(&c);
      clattn_force_path(0);
    }
}

/* Head dims not a multiple of 64 on tensor cores (padded to 64 in
 * registers, cl/decode_mma.clh): 80, 96, 112, 160, 200 with GQA, lengths
 * 0, 1 and 45; paged, varlen causal, causal Mq 3, split; then 80 (split)
 * and 112 (bf16, paged, varlen causal) in groups of 8 warps. */
static void test_padded_dims(void) {
  static const int32_t lens[] = {0, 1, 45};
  static const int32_t counts[] = {3, 1, 0};
  /* wide: groups of 8 warps (decode_mma_wide_wg), as NVIDIA's row plans them (plan_wide) */
  static const struct { int D, bf16, paged, varlen, Mq, causal, splits, wide; } cases[] = {
      {80, 0, 0, 0, 1, 0, 0, 0},  {96, 1, 1, 0, 1, 0, 0, 0}, {112, 0, 0, 1, 1, 1, 0, 0},
      {160, 1, 0, 0, 3, 1, 0, 0}, {200, 0, 0, 0, 1, 0, 3, 0}, {80, 0, 0, 0, 1, 0, 3, 1},
      {112, 1, 1, 1, 1, 1, 0, 1}};
  const clattn_tuning saved = fx.ctx->tuning;
  clattn_force_path(2);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fx.ctx->tuning.decode_mma_wide_wg = cases[i].wide ? 256 : saved.decode_mma_wide_wg;
    dcase c = base();
    c.qdt = c.kvdt = c.odt = cases[i].bf16 ? CLATTN_BF16 : CLATTN_F16;
    c.D = cases[i].D;
    c.B = 3;
    c.Nkv = 45;
    c.kv_len = lens;
    c.kernels = "tensor cores";
    if (cases[i].paged) c.page_size = 16;
    if (cases[i].varlen) c.q_counts = counts;
    c.Mq = cases[i].Mq;
    c.causal = cases[i].causal;
    c.splits = cases[i].splits;
    run_case(&c);
  }
  fx.ctx->tuning = saved;
  clattn_force_path(0);
}

/* The one-launch merge (the last work-group of each row block merges the
 * splits, cl/decode.cl) against the reference, and the two-launch path
 * beside it: split counts 2, 9, 100 (> 64; with 300 keys the tensor-core
 * form's 16-key chunks leave most of them empty) and auto; lengths 0, 1 and
 * more; varlen with a sequence of no queries, causal; no lse; a caller's
 * workspace of junk (unaligned to 8 bytes) used by two calls in a row; more
 * splits than D; more than the tuning's most (two launches). Portable and
 * tensor-core (emulated) forms. */
static void test_merge_last(void) {
  static const int32_t lens[] = {0, 1, 200, 300};
  static const int32_t counts[] = {2, 0, 1, 3};
  static const int splits[] = {2, 9, 100, 0, 5, 7, 3};
  const int most = fx.ctx->tuning.decode_merge_last, with_max = fx.ctx->tuning.decode_merge_last_max;
  fx.ctx->tuning.decode_merge_last = 4096; /* any split count the scratch holds */
  for (int path = 1; path <= 2; path++) {
    clattn_force_path(path);
    for (int i = 0; i < 7; i++) {
      /* the emulated tensor-core form (compiled at -O0 per variant) takes the
       * cases whose kernels differ: splits few and many, varlen causal, junk */
      if (path == 2 && (i == 1 || i == 3 || i == 6)) continue;
      dcase c = base();
      c.D = 128;
      if (path == 2) c.qdt = c.kvdt = c.odt = CLATTN_F16;
      c.Nkv = 300;
      c.splits = splits[i];
      c.kernels = c.splits ? "one launch" : NULL;
      /* the tickets raised by atom_max first in every other case (both forms,
       * the junk workspace's first run on its compare-exchange loop) */
      fx.ctx->tuning.decode_merge_last_max = i % 2;
      if (i % 2 && c.splits && fx.ctx->profile.has_int64_atomics > 1) c.kernels = "tickets by atom_max";
      if (i == 3) { /* auto split count, lengths 0 and 1 */
        c.B = 4;
        c.kv_len = lens;
      } else if (i == 4) {
        c.B = 4;
        c.q_counts = counts;
        c.causal = 1;
        c.kv_len = lens;
      } else if (i == 5) {
        c.lse = 0;
        c.ws_junk = 1;
      } else if (i == 6) {
        c.q_counts = counts;
        c.B = 4;
        c.ws_junk = 1;
      }
      run_case(&c);
      if (i == 1 || (i == 4 && path == 1)) {
        c.two_launch = 1;
        c.kernels = "two launches";
        run_case(&c);
      }
    }
    if (path == 2) continue; /* the limits below are the planner's, whatever the form */
    dcase c = base(); /* S > D: one launch too (the merge keeps no per-part state in local memory) */
    c.D = 64;
    c.Nkv = 3000;
    c.splits = 100;
    c.kernels = "one launch";
    run_case(&c);
    c.kernels = "two launches";
    fx.ctx->tuning.decode_merge_last = 8; /* more splits than the tuning's most */
    c.splits = 9;
    run_case(&c);
    c.splits = 5; /* few splits, but with Mq = 2 more split rows than the most */
    c.Mq = 2;
    run_case(&c);
    c.Mq = 1;
    c.splits = 8; /* as many as the most */
    c.kernels = "one launch";
    run_case(&c);
    fx.ctx->tuning.decode_merge_last = 4096;
  }
  fx.ctx->tuning.decode_merge_last = most;
  fx.ctx->tuning.decode_merge_last_max = with_max;
  clattn_force_path(0);
}

static void test_mma(void) {
  clattn_force_path(2);
  dcase c = mma_base(CLATTN_F16, 64);
  run_case(&c);
  c.odt = CLATTN_F32;
  c.splits = 3;
  run_case(&c);
  c = mma_base(CLATTN_BF16, 128);
  c.Nkv = 45;
  run_case(&c);
  c.odt = CLATTN_F32;
  run_case(&c);
  c = mma_base(CLATTN_F16, 256);
  c.Hq = c.Hkv = 3; /* MHA: one row per block */
  c.Nkv = 20;
  run_case(&c);
  c = mma_base(CLATTN_BF16, 192); /* units of a row not a power of two */
  c.Nkv = 40;
  run_case(&c);

  /* 16 rows (G = 16), 32 rows (two blocks), 12 rows, causal Mq 2 and 4 */
  c = mma_base(CLATTN_F16, 64);
  c.Hq = 16;
  c.Hkv = 1;
  c.bias = 1;
  run_case(&c);
  c.Hq = 32;
  c.Hkv = 1; /* G = 32: two blocks of 16 rows */
  c.bias = 0;
  c.Nkv = 50;
  run_case(&c);
  c.Hq = 24;
  c.Hkv = 2; /* G = 12: one block of 16, 4 rows idle */
  run_case(&c);
  c = mma_base(CLATTN_BF16, 64);
  c.Mq = 2;
  c.causal = 1;
  c.Hq = 8;
  c.Hkv = 1; /* 16 rows */
  run_case(&c);
  c.Mq = 4;
  c.Hq = 4;
  c.Hkv = 2; /* 8 rows */
  c.splits = 5;
  run_case(&c);

  /* lengths 0, 1, 7 and long in one batch; more splits than tiles */
  static const int32_t lens[] = {0, 1, 7, 700};
  c = mma_base(CLATTN_F16, 128);
  c.B = 4;
  c.Nkv = 700;
  c.kv_len = lens;
  run_case(&c);
  c.splits = 100;
  run_case(&c);

  /* strided BHSD views at aligned offsets */
  c = mma_base(CLATTN_F16, 64);
  c.bhsd = 1;
  c.pad = 8;
  run_case(&c);

  /* paged (page sizes 1 and 48, prefix pages shared, causal), bad entries */
  static const int32_t plens[] = {130, 1, 0, 97};
  c = mma_base(CLATTN_BF16, 64);
  c.B = 4;
  c.Nkv = 130;
  c.kv_len = plens;
  c.page_size = 48;
  c.share_pages = 1;
  c.Mq = 2;
  c.causal = 1;
  run_case(&c);
  c.page_size = 1;
  c.share_pages = 0;
  c.Mq = 1;
  c.causal = 0;
  run_case(&c);
  c.page_size = 16;
  c.bad_entry = 1;
  run_case(&c);
  static const int32_t full[] = {144, 1, 0, 97}; /* sequence 0 fills its table */
  c.Nkv = 144;
  c.kv_len = full;
  c.bad_entry = 0;
  c.len_over = 5;
  run_case(&c);

  /* varlen queries, 0 to 4 per sequence, causal */
  static const int32_t counts[] = {2, 0, 4, 1};
  c = mma_base(CLATTN_F16, 64);
  c.B = 4;
  c.Mq = 4;
  c.q_counts = counts;
  c.causal = 1;
  c.bias = 1;
  run_case(&c);
  clattn_force_path(0);
}

/* The tensor-core form's wide groups (8 warps, one per unit, 2 blocks in
 * flight per warp: the B = 1 form on NVIDIA) against the reference: the
 * units made many so that few groups take it; lengths 0, 1, 7 and long in
 * one batch with auto and 3 splits (one launch), bf16 D = 80 paged causal
 * Mq 2, D = 192 (one block in flight: accumulators over 8 x 128). */
static void test_mma_small(void) {
  const clattn_tuning saved = fx.ctx->tuning;
  const cl_uint saved_cus = fx.ctx->profile.compute_units;
  fx.ctx->profile.compute_units = 64;
  fx.ctx->tuning.decode_mma_small_wg = 256;
  fx.ctx->tuning.decode_mma_small_blocks = 2;
  fx.ctx->tuning.decode_merge_last = 8;
  clattn_force_path(2);
  static const int32_t lens[] = {0, 1, 7, 700};
  dcase c = mma_base(CLATTN_F16, 128);
  c.B = 4;
  c.Nkv = 700;
  c.kv_len = lens;
  c.kernels = "wide groups";
  run_case(&c);
  c.splits = 3;
  run_case(&c);
  static const int32_t plens[] = {130, 97};
  c = mma_base(CLATTN_BF16, 80);
  c.B = 2;
  c.Nkv = 130;
  c.kv_len = plens;
  c.page_size = 16;
  c.Mq = 2;
  c.causal = 1;
  c.kernels = "wide groups";
  run_case(&c);
  c = mma_base(CLATTN_F16, 192);
  c.Nkv = 300;
  c.kernels = "wide groups";
  run_case(&c);
  clattn_force_path(0);
  fx.ctx->tuning = saved;
  fx.ctx->profile.compute_units = saved_cus;
}

void add_decode_mma_tests(CU_pSuite s) {
  CU_add_test(s, "tensor-core form (PTX emulated off NVIDIA)", test_mma);
  CU_add_test(s, "tensor-core form: accuracy rule against f16 / bf16 math", test_mma_rule);
  CU_add_test(s, "padded head dims 80 96 112 160 200 on tensor cores", test_padded_dims);
  CU_add_test(s, "tensor-core wide groups, 2 blocks in flight (few groups)", test_mma_small);
  CU_add_test(s, "one-launch merge of the splits, tickets in a junk workspace", test_merge_last);
}
