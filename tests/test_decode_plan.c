/* Decode's planning, without running a kernel: the split counts, forms and
 * group sizes the planner chooses for given compute units and tuning
 * (lib/decode_plan.c). Every test fixes the planner's inputs it depends on,
 * whatever the device's row, and restores them. */
#include "common.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* A dense decode call's shape: f16 q/o; K/V f16 or int4 (one group). */
typedef struct shape {
  int B, Mq, Hq, Hkv, D, N;
  clattn_dtype kvdt;
} shape;

/* What the planner chose for s (forced onto the tensor-core form, or with
 * path 1 the work-group kernel): the split count (or most parts a sequence
 * has), the work-group size, the blocks in flight per warp, the kernel line
 * and the build options. */
typedef struct planned {
  int parts, wg, nblk;
  char kernel[160], opts[1024];
} planned;

static planned plan_on(const shape *s, int path) {
  planned r = {0, 0, 0, "", ""};
  const bool q4 = s->kvdt == CLATTN_INT4;
  const int X = q4 ? 1 + s->D / 8 : s->D; /* a row's elements: int4 words or f16 values */
  const size_t row = q4 ? (size_t)X * 4 : (size_t)X * 2, nq = (size_t)s->B * s->Mq * s->Hq * s->D * 2;
  cl_mem qm = buf_zeros(nq), om = buf_zeros(nq);
  cl_mem km = buf_zeros((size_t)s->B * s->N * s->Hkv * row), vm = buf_zeros((size_t)s->B * s->N * s->Hkv * row);
  clattn_decode_params p;
  memset(&p, 0, sizeof p);
  p.q = clattn_tensor_4d(qm, 0, CLATTN_F16, s->B, s->Mq, s->Hq, s->D);
  p.o = clattn_tensor_4d(om, 0, CLATTN_F16, s->B, s->Mq, s->Hq, s->D);
  p.k = clattn_tensor_4d(km, 0, s->kvdt, s->B, s->N, s->Hkv, X);
  p.v = clattn_tensor_4d(vm, 0, s->kvdt, s->B, s->N, s->Hkv, X);
  p.causal = s->Mq > 1;
  clattn_force_path(path);
  CHECK_OK(clattn_decode_workspace_size(fx.ctx, &p, NULL, &r.parts));
  const char *k = clattn_decode_kernels(fx.ctx, &p);
  CU_ASSERT(k && (strstr(k, "tensor cores") != NULL) == (path == 2));
  snprintf(r.kernel, sizeof r.kernel, "%s", k ? k : "?");
  CHECK_OK(clattn_decode_build_options(fx.ctx, &p, r.opts, sizeof r.opts));
  const char *wg = strstr(r.opts, "-DWG=");
  r.wg = wg ? atoi(wg + 5) : 0;
  const char *nb = strstr(r.opts, "-DNBLK=");
  r.nblk = nb ? atoi(nb + 7) : 0;
  clattn_force_path(0);
  buf_release(&qm), buf_release(&km), buf_release(&vm), buf_release(&om);
  return r;
}
static planned plan_of(const shape *s) { return plan_on(s, 2); }

/* The planner's inputs every test here fixes: units, local memory (64 KiB:
 * the emulated token rows' ring of 8 heads passes the H200's 48), warps,
 * key counts. */
static void fix_inputs(int cus) {
  clattn_tuning *t = &fx.ctx->tuning;
  fx.ctx->profile.compute_units = cus;
  fx.ctx->profile.local_mem_bytes = 65536;
  t->decode_mma_wg = 128;
  t->decode_mma_small_wg = 0;
  t->decode_mma_small_short = 0;
  t->decode_mma_small_blocks = 0;
  t->decode_mma_blocks = 0;
  t->decode_mma_wide_wg = 0;
  t->decode_mma_splits_per_cu = 2;
  t->decode_mma_warps_per_cu = 16;
  t->decode_mma_min_keys = 64;
  t->decode_mma_whole_min_keys = 0;
  t->decode_mma_int4_stages = 0;
  t->decode_mma_int4_heads = 0;
  t->decode_max_splits = 64;
}

#define SAVE_INPUTS()                                                                        \
  const clattn_tuning saved = fx.ctx->tuning;                                                \
  const clattn_device_profile saved_profile = fx.ctx->profile
#define RESTORE_INPUTS() (fx.ctx->tuning = saved, fx.ctx->profile = saved_profile)

/* The tensor-core form's split count fills the units once (mma_resident):
 * 8 units, 16 warps per unit, groups of 4 warps, B=1, Hkv=8 (8 groups),
 * 1024 keys of 64 per split at least. At 8 rows and D <= 128 a unit holds 4
 * groups: 4 splits; D = 160 / 192 3; D = 256 and 16 rows (Mq = 4 causal) 2;
 * without the count (0) the split target of 2 per unit rounds up: 2. */
static void test_split_fill(void) {
  static const struct { int D, Mq, warps, want; } cases[] = {
      {128, 1, 16, 4}, {64, 1, 16, 4}, {80, 1, 16, 4}, {160, 1, 16, 3}, {192, 1, 16, 3},
      {256, 1, 16, 2}, {128, 4, 16, 2}, {128, 1, 0, 2}, {256, 1, 32, 4}};
  SAVE_INPUTS();
  fix_inputs(8);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fx.ctx->tuning.decode_mma_warps_per_cu = cases[i].warps;
    const shape s = {1, cases[i].Mq, 32, 8, cases[i].D, 1024, CLATTN_F16};
    const planned r = plan_of(&s);
    if (r.parts != cases[i].want)
      fprintf(stderr, "split fill D=%d Mq=%d warps=%d: %d splits, want %d\n", s.D, s.Mq, cases[i].warps, r.parts,
              cases[i].want);
    CU_ASSERT_EQUAL(r.parts, cases[i].want);
  }
  RESTORE_INPUTS();
}

/* The wide groups (8 warps, one per unit) of few groups or short keys: 8
 * units, 4 groups of 4 warps per unit, 1024 keys of 1024 per split for
 * 4-warp groups, 512 for 8-warp ones. B=1 Hkv=1 (1 group): wide, 2 splits
 * (by length); Hkv=4 (few * 8 > 8 units): wide only with
 * decode_mma_small_short, 8 units / 4 groups = 2 splits, else 4-warp groups
 * capped at 1 split; Hkv=8 (8 groups, one per unit: no split): 4-warp
 * groups either way. */
static void test_wide_groups(void) {
  static const struct { int Hkv, short_keys, splits; bool wide; } cases[] = {
      {1, 1, 2, true}, {1, 0, 2, true}, {4, 1, 2, true}, {4, 0, 1, false}, {8, 1, 1, false}};
  SAVE_INPUTS();
  fix_inputs(8);
  fx.ctx->tuning.decode_mma_small_wg = 256;
  fx.ctx->tuning.decode_mma_min_keys = 1024;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fx.ctx->tuning.decode_mma_small_short = cases[i].short_keys;
    const shape s = {1, 1, 4 * cases[i].Hkv, cases[i].Hkv, 64, 1024, CLATTN_F16};
    const planned r = plan_of(&s);
    const bool wide = strstr(r.kernel, "wide groups") != NULL;
    if (r.parts != cases[i].splits || wide != cases[i].wide)
      fprintf(stderr, "wide groups Hkv=%d short=%d: %d splits, %s; want %d, %s\n", s.Hkv, cases[i].short_keys,
              r.parts, r.kernel, cases[i].splits, cases[i].wide ? "wide" : "4 warps");
    CU_ASSERT_EQUAL(r.parts, cases[i].splits);
    CU_ASSERT_EQUAL(wide, cases[i].wide);
  }
  RESTORE_INPUTS();
}

/* The wide groups' blocks in flight per warp (decode_mma_small_blocks, 2)
 * where the groups are few (at most units / 8) and a warp's accumulators at
 * most 8 x 128: 8 units, B=1 Hkv=1 at D = 64 and 128 (padded 128) 2; at D
 * = 192 / 256 the other groups' count (decode_mma_blocks 0: 1); with the
 * key at 0, 1 at D = 64 too; Hkv=4 wide for its short keys only
 * (decode_mma_small_short) 1; 4-warp groups (Hkv=8, not wide) keep 1. */
static void test_small_blocks(void) {
  static const struct { int Hkv, D, key, nblk; } cases[] = {
      {1, 64, 2, 2}, {1, 128, 2, 2}, {1, 192, 2, 1}, {1, 256, 2, 1}, {1, 64, 0, 1}, {4, 64, 2, 1}, {8, 64, 2, 1}};
  SAVE_INPUTS();
  fix_inputs(8);
  fx.ctx->tuning.decode_mma_small_wg = 256;
  fx.ctx->tuning.decode_mma_min_keys = 1024;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fx.ctx->tuning.decode_mma_small_blocks = cases[i].key;
    fx.ctx->tuning.decode_mma_small_short = 1;
    const shape s = {1, 1, 4 * cases[i].Hkv, cases[i].Hkv, cases[i].D, 1024, CLATTN_F16};
    const planned r = plan_of(&s);
    const bool wide = strstr(r.kernel, "wide groups") != NULL;
    if (r.nblk != cases[i].nblk || wide != (cases[i].Hkv <= 4))
      fprintf(stderr, "small blocks Hkv=%d D=%d key=%d: NBLK=%d (%s), want %d\n", s.Hkv, s.D, cases[i].key, r.nblk,
              r.kernel, cases[i].nblk);
    CU_ASSERT_EQUAL(r.nblk, cases[i].nblk);
    CU_ASSERT_EQUAL(wide, cases[i].Hkv <= 4);
  }
  RESTORE_INPUTS();
}

/* Groups of decode_mma_wide_wg (8 warps) where a warp's accumulators pass
 * 8 x 128 or D is padded in registers (plan_wide): 8 units, B=1 Hkv=8 (8
 * groups), 1024 keys. D = 192 (padded 192): always, one 8-warp group per
 * unit, 1 split; D = 128 with 16 rows (Mq = 4, G = 4): where 4-warp groups
 * (2 per unit) would split, at B=1 (8 groups of 16 places), 1 split of 8
 * warps; at B=2 (16 groups) not: 4 warps, 1 split; D = 128 with 8 rows
 * never: 4 splits; D = 80 (padded 128) always, two 8-warp groups a unit
 * (16 warps of 8 x 128 accumulators): 2 splits; the key at 0: 4-warp groups
 * (3 splits at D = 192, 4 at D = 80). */
static void test_wide_rows(void) {
  static const struct { int B, Mq, D, wide_wg, parts, wg; } cases[] = {
      {1, 1, 192, 256, 1, 256}, {1, 4, 128, 256, 1, 256}, {2, 4, 128, 256, 1, 128},
      {1, 1, 128, 256, 4, 128}, {1, 1, 80, 256, 2, 256},  {1, 1, 192, 0, 3, 128}, {1, 1, 80, 0, 4, 128}};
  SAVE_INPUTS();
  fix_inputs(8);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fx.ctx->tuning.decode_mma_wide_wg = cases[i].wide_wg;
    const shape s = {cases[i].B, cases[i].Mq, 32, 8, cases[i].D, 1024, CLATTN_F16};
    const planned r = plan_of(&s);
    if (r.parts != cases[i].parts || r.wg != cases[i].wg)
      fprintf(stderr, "wide rows B=%d Mq=%d D=%d wide_wg=%d: %d splits, WG=%d; want %d, %d\n", s.B, s.Mq, s.D,
              cases[i].wide_wg, r.parts, r.wg, cases[i].parts, cases[i].wg);
    CU_ASSERT_EQUAL(r.parts, cases[i].parts);
    CU_ASSERT_EQUAL(r.wg, cases[i].wg);
  }
  RESTORE_INPUTS();
}

/* int4 token rows' spans (plan_stream), D=128, Hkv=8, 64 keys per span at
 * least. Whole rows (one group of 8 heads, 2 per unit, 8 units: 16 slots),
 * B=4 N=1024 (64 blocks a sequence): spans of 16 blocks, 4 parts;
 * decode_mma_whole_min_keys = 512: spans of 32, 2 parts. Padded rows (4
 * heads a group, 2 groups of heads: 8 slots) ignore that key: spans of 32.
 * Spans that tile a sequence where ones at most 1/16 longer do: 1 group per
 * unit, 17 units, B=4 N=2048 (128 blocks): 31 blocks a span would give 5
 * parts; 32 tile it in 4. B=5 N=1024: 20 blocks, none within 1/16 tiles 64:
 * spans end one sequence and start the next, 4 parts. */
static void test_token_spans(void) {
  static const struct { int B, N, heads, whole, whole_min, gpc, cus, parts; } cases[] = {
      {4, 1024, 8, 1, 0, 2, 8, 4},    {4, 1024, 8, 1, 512, 2, 8, 2}, {4, 1024, 4, 0, 1024, 2, 8, 2},
      {4, 2048, 8, 1, 0, 1, 17, 4},  {5, 1024, 8, 1, 0, 2, 8, 4}};
  SAVE_INPUTS();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fix_inputs(cases[i].cus);
    clattn_tuning *t = &fx.ctx->tuning;
    t->decode_mma_int4_heads = cases[i].heads;
    t->decode_mma_int4_whole = cases[i].whole;
    t->decode_mma_whole_min_keys = cases[i].whole_min;
    t->decode_mma_int4_groups_per_cu = cases[i].gpc;
    const shape s = {cases[i].B, 1, 32, 8, 128, cases[i].N, CLATTN_INT4};
    const planned r = plan_of(&s);
    const bool spans = strstr(r.kernel, "token rows") && strstr(r.kernel, "parts of equal spans");
    if (r.parts != cases[i].parts || !spans)
      fprintf(stderr, "token spans B=%d N=%d heads=%d whole=%d: %d parts, %s; want %d\n", s.B, s.N, cases[i].heads,
              cases[i].whole, r.parts, r.kernel, cases[i].parts);
    CU_ASSERT(spans);
    CU_ASSERT_EQUAL(r.parts, cases[i].parts);
    CU_ASSERT_EQUAL(r.wg, 32 * cases[i].heads);
  }
  RESTORE_INPUTS();
}

/* The portable form's occupancy (decode_port_waves): the device's option
 * (NVIDIA: a register cap of 512 / waves in steps of 8 through the PTX
 * route, also with CLATTN_PORTABLE=1, none at 2 warps or fewer; AMD: the
 * kernel attribute's waves); none at 0, none on a device that takes none (a
 * CPU), none on the tensor-core form. */
static void test_occupancy(void) {
  static const struct { bool nv, amd; int waves, path; const char *want; } cases[] = {
      {true, false, 6, 1, " -DCLATTN_PTX_MAXNREG=80 "}, {true, false, 5, 1, " -DCLATTN_PTX_MAXNREG=96 "},
      {true, false, 16, 1, " -DCLATTN_PTX_MAXNREG=32 "}, {false, true, 5, 1, " -DCLATTN_AMD_WAVES_PER_EU=5 "},
      {true, false, 2, 1, NULL}, {true, false, 0, 1, NULL}, {false, false, 6, 1, NULL}, {true, false, 6, 2, NULL}};
  SAVE_INPUTS();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fix_inputs(16);
    fx.ctx->tuning.decode_serial = 0;
    fx.ctx->tuning.decode_port_waves = cases[i].waves;
    fx.ctx->profile.has_nv_ptx = cases[i].nv;
    fx.ctx->profile.has_amd_builtins = cases[i].amd;
    const shape s = {2, 1, 32, 8, 128, 1024, CLATTN_F16};
    planned r = plan_on(&s, cases[i].path);
    strcat(r.opts, " ");
    const bool capped = strstr(r.opts, "MAXNREG") || strstr(r.opts, "WAVES_PER_EU");
    if (cases[i].want ? !strstr(r.opts, cases[i].want) : capped)
      fprintf(stderr, "register cap case %zu: options [%s], want %s\n", i, r.opts,
              cases[i].want ? cases[i].want : "none");
    CU_ASSERT(cases[i].want ? strstr(r.opts, cases[i].want) != NULL : !capped);
  }
  RESTORE_INPUTS();
}

void add_decode_plan_tests(CU_pSuite s) {
  CU_add_test(s, "tensor-core split count fills the units once", test_split_fill);
  CU_add_test(s, "wide groups for few groups or short keys", test_wide_groups);
  CU_add_test(s, "wide groups: 2 blocks in flight at up to 8 x 128 accumulators", test_small_blocks);
  CU_add_test(s, "8-warp groups for accumulators over 8 x 128", test_wide_rows);
  CU_add_test(s, "token rows: spans of whole rows, spans that tile a sequence", test_token_spans);
  CU_add_test(s, "portable form's occupancy option per device", test_occupancy);
}
