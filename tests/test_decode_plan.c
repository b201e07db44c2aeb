/* Decode's planning, without running a kernel: the split counts the planner
 * chooses for given compute units and tuning (lib/decode_plan.c). */
#include "common.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* The tensor-core form's split count fills the units once (planning only,
 * lib/decode_plan.c mma_resident): 8 units, 16 warps per unit, groups of 4
 * warps, B=1, Hkv=8 (8 groups), 1024 keys of 64 per split at least. At 8
 * rows and D <= 128 a unit holds 4 groups: 4 splits; D = 160 / 192 3; D =
 * 256 and 16 rows (Mq = 4 causal) 2; without the count (0) the split target
 * of 2 per unit rounds up: 2. */
static void test_split_fill(void) {
  static const struct { int D, Mq, warps, want; } cases[] = {
      {128, 1, 16, 4}, {64, 1, 16, 4}, {80, 1, 16, 4}, {160, 1, 16, 3}, {192, 1, 16, 3},
      {256, 1, 16, 2}, {128, 4, 16, 2}, {128, 1, 0, 2}, {256, 1, 32, 4}};
  const clattn_tuning saved = fx.ctx->tuning;
  const int saved_cus = fx.ctx->profile.compute_units;
  fx.ctx->profile.compute_units = 8;
  fx.ctx->tuning.decode_mma_wg = 128;
  fx.ctx->tuning.decode_mma_small_wg = 0;
  fx.ctx->tuning.decode_mma_splits_per_cu = 2;
  fx.ctx->tuning.decode_mma_min_keys = 64;
  fx.ctx->tuning.decode_max_splits = 64;
  clattn_force_path(2);
  const int B = 1, Hq = 32, Hkv = 8, N = 1024;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int D = cases[i].D, Mq = cases[i].Mq;
    cl_mem qm = buf_zeros((size_t)B * Mq * Hq * D * 2), km = buf_zeros((size_t)B * N * Hkv * D * 2);
    cl_mem vm = buf_zeros((size_t)B * N * Hkv * D * 2), om = buf_zeros((size_t)B * Mq * Hq * D * 2);
    clattn_decode_params p;
    memset(&p, 0, sizeof p);
    p.q = clattn_tensor_4d(qm, 0, CLATTN_F16, B, Mq, Hq, D);
    p.o = clattn_tensor_4d(om, 0, CLATTN_F16, B, Mq, Hq, D);
    p.k = clattn_tensor_4d(km, 0, CLATTN_F16, B, N, Hkv, D);
    p.v = clattn_tensor_4d(vm, 0, CLATTN_F16, B, N, Hkv, D);
    p.causal = Mq > 1;
    fx.ctx->tuning.decode_mma_warps_per_cu = cases[i].warps;
    int parts = 0;
    CHECK_OK(clattn_decode_workspace_size(fx.ctx, &p, NULL, &parts));
    const char *k = clattn_decode_kernels(fx.ctx, &p);
    CU_ASSERT(k && strstr(k, "tensor cores"));
    if (parts != cases[i].want)
      fprintf(stderr, "split fill D=%d Mq=%d warps=%d: %d splits, want %d\n", D, Mq, cases[i].warps, parts,
              cases[i].want);
    CU_ASSERT_EQUAL(parts, cases[i].want);
    buf_release(&qm), buf_release(&km), buf_release(&vm), buf_release(&om);
  }
  clattn_force_path(0);
  fx.ctx->tuning = saved;
  fx.ctx->profile.compute_units = saved_cus;
}

/* The wide groups (8 warps, one per unit) of few groups or short keys
 * (planning only): 8 units, 4 groups of 4 warps per unit, 1024 keys of 1024
 * per split for 4-warp groups, 512 for 8-warp ones. B=1 Hkv=1 (1 group): wide,
 * 2 splits (by length); Hkv=4 (few * 8 > 8 units): wide only with
 * decode_mma_small_short, 8 units / 4 groups = 2 splits, else 4-warp groups
 * capped at 1 split; Hkv=8 (8 groups, one per unit: no split): 4-warp
 * groups either way. */
static void test_wide_groups(void) {
  static const struct { int Hkv, short_keys, splits; bool wide; } cases[] = {
      {1, 1, 2, true}, {1, 0, 2, true}, {4, 1, 2, true}, {4, 0, 1, false}, {8, 1, 1, false}};
  const clattn_tuning saved = fx.ctx->tuning;
  const int saved_cus = fx.ctx->profile.compute_units;
  fx.ctx->profile.compute_units = 8;
  fx.ctx->tuning.decode_mma_wg = 128;
  fx.ctx->tuning.decode_mma_small_wg = 256;
  fx.ctx->tuning.decode_mma_warps_per_cu = 16;
  fx.ctx->tuning.decode_mma_min_keys = 1024;
  fx.ctx->tuning.decode_max_splits = 64;
  clattn_force_path(2);
  const int B = 1, G = 4, D = 64, N = 1024;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int Hkv = cases[i].Hkv, Hq = G * Hkv;
    cl_mem qm = buf_zeros((size_t)B * Hq * D * 2), km = buf_zeros((size_t)B * N * Hkv * D * 2);
    cl_mem vm = buf_zeros((size_t)B * N * Hkv * D * 2), om = buf_zeros((size_t)B * Hq * D * 2);
    clattn_decode_params p;
    memset(&p, 0, sizeof p);
    p.q = clattn_tensor_4d(qm, 0, CLATTN_F16, B, 1, Hq, D);
    p.o = clattn_tensor_4d(om, 0, CLATTN_F16, B, 1, Hq, D);
    p.k = clattn_tensor_4d(km, 0, CLATTN_F16, B, N, Hkv, D);
    p.v = clattn_tensor_4d(vm, 0, CLATTN_F16, B, N, Hkv, D);
    fx.ctx->tuning.decode_mma_small_short = cases[i].short_keys;
    int parts = 0;
    CHECK_OK(clattn_decode_workspace_size(fx.ctx, &p, NULL, &parts));
    const char *k = clattn_decode_kernels(fx.ctx, &p);
    CU_ASSERT(k && strstr(k, "tensor cores"));
    const bool wide = k && strstr(k, "wide groups");
    if (parts != cases[i].splits || wide != cases[i].wide)
      fprintf(stderr, "wide groups Hkv=%d short=%d: %d splits, %s; want %d, %s\n", Hkv, cases[i].short_keys,
              parts, k ? k : "?", cases[i].splits, cases[i].wide ? "wide" : "4 warps");
    CU_ASSERT_EQUAL(parts, cases[i].splits);
    CU_ASSERT_EQUAL(wide, cases[i].wide);
    buf_release(&qm), buf_release(&km), buf_release(&vm), buf_release(&om);
  }
  clattn_force_path(0);
  fx.ctx->tuning = saved;
  fx.ctx->profile.compute_units = saved_cus;
}

void add_decode_plan_tests(CU_pSuite s) {
  CU_add_test(s, "tensor-core split count fills the units once", test_split_fill);
  CU_add_test(s, "wide groups for few groups or short keys", test_wide_groups);
}
