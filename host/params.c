/* Per-device kernel parameters, as data. Rows are matched by architecture
 * prefix (most specific first); the generic row is correct everywhere. An
 * override file written by `clattn tune` ("key=value" lines) is applied on
 * top. Correctness never depends on a row: only speed does. */
#include "internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
  const char *arch_prefix; /* matched against clattn_device_profile.arch */
  clattn_tuning t;
} row;

/* Rows per family, so a new field is added in one place. */
#define DECODE(wg, per_cu, min_keys, max_splits, lane_keys, kstage, kstage_quant)             \
  .decode_wg = (wg), .decode_splits_per_cu = (per_cu), .decode_min_keys_per_split = (min_keys), \
  .decode_max_splits = (max_splits), .decode_lane_keys = (lane_keys), .decode_kstage = (kstage), \
  .decode_kstage_quant = (kstage_quant)
#define DECODE_MMA(use, per_cu, min_keys, int4_wg, int4_stages, int4_heads, int4_per_cu, int4_whole, \
                   fp8_wg, fp8_stages)                                                               \
  .decode_mma = (use), .decode_mma_splits_per_cu = (per_cu), .decode_mma_min_keys = (min_keys),   \
  .decode_mma_int4_wg = (int4_wg), .decode_mma_int4_stages = (int4_stages),                       \
  .decode_mma_int4_heads = (int4_heads), .decode_mma_int4_groups_per_cu = (int4_per_cu),          \
  .decode_mma_int4_whole = (int4_whole), .decode_mma_fp8_wg = (fp8_wg), .decode_mma_fp8_stages = (fp8_stages)
#define RROPE(bm, bn, wg, mma) .rerope_block_m = (bm), .rerope_block_n = (bn), .rerope_wg = (wg), .rerope_use_mma = (mma)
#define RROPE_MMA(stages, warp_blocks, block_n) \
  .rerope_stages = (stages), .rerope_warp_blocks = (warp_blocks), .rerope_mma_block_n = (block_n)
#define OTHERS(merge, quant) .merge_wg = (merge), .quant_wg = (quant)

static const row table[] = {
    /* Hopper / Ampere (H200 measurements, tools/PERF.md). Decode takes the
     * tensor-core form (f16/bf16 q, D % 64 == 0) with 2 groups per SM as the
     * split target (B=64 ctx=32768: f16 1.88 ms, 4.6 TB/s; 4 per SM 1.90);
     * the portable form keeps 2 per SM and a work-item per key (it beat 16
     * lanes per key, 2.9 against 1.9 TB/s, and staged K tiles, 2.3 TB/s).
     * Quantized rows on tensor cores (B=64 ctx=32768) go straight from
     * global memory, one block per warp in flight: int4 with 4 warps per
     * group (0.77 ms; through a ring of 2 staged blocks with 8 warps 0.93),
     * fp8 with 8 warps (1.02 ms; 6 warps with 2 blocks in flight 1.09).
     * int4 caches of whole token rows take the token-row form instead: 4
     * KV heads per group, 4 groups per SM (0.64-0.65 ms; 8 heads with 2
     * groups per SM 0.64; 3 or 8 splits 0.70 / 0.66); on sm_90, with tokens
     * back to back, one group of all 8 heads, each block of K or V one bulk
     * copy (0.615-0.617 ms against 0.650-0.652 padded in the same runs).
     * ReRoPE forward (Z=1 H=32 N=8192 D=64 W=2048, non-causal; two passes,
     * one Q in registers): key tiles of 64, a ring of 2 tiles, 2 blocks of
     * 16 query rows per warp (2.05 ms; tiles of 32: 2.22, with 3 in the ring
     * 2.19; 1 block per warp 2.54). */
    {"nvidia-sm9", {DECODE(128, 2, 256, 128, 0, 0, 0), DECODE_MMA(1, 2, 1024, 128, 0, 4, 4, 1, 256, 0), RROPE(64, 32, 128, 1), RROPE_MMA(2, 2, 64), OTHERS(128, 256)}},
    {"nvidia-sm8", {DECODE(128, 2, 256, 128, 0, 0, 0), DECODE_MMA(1, 2, 1024, 128, 0, 4, 4, 0, 256, 0), RROPE(64, 32, 128, 1), RROPE_MMA(2, 2, 64), OTHERS(128, 256)}},
    {"nvidia", {DECODE(128, 2, 256, 128, 0, 0, 0), RROPE(32, 32, 128, 0), OTHERS(128, 256)}},
    /* CDNA (wave64) and RDNA (wave32): unmeasured, NVIDIA's choices */
    {"amd-gfx9", {DECODE(256, 4, 256, 128, 0, 0, 0), RROPE(32, 32, 256, 0), OTHERS(256, 256)}},
    {"amd-gfx1", {DECODE(128, 2, 256, 128, 0, 0, 0), RROPE(32, 32, 128, 0), OTHERS(128, 256)}},
    /* CPUs: few compute units; a work-item per key needs no barriers */
    {"pocl-cpu", {DECODE(64, 2, 64, 64, 0, 0, 0), RROPE(16, 16, 64, 0), OTHERS(64, 64)}},
    {"intel-cpu", {DECODE(64, 2, 64, 64, 0, 0, 0), RROPE(16, 16, 64, 0), OTHERS(64, 64)}},
    {"", {DECODE(64, 2, 128, 64, 0, 0, 0), RROPE(16, 16, 64, 0), OTHERS(64, 64)}}, /* generic */
};
#undef DECODE
#undef DECODE_MMA
#undef RROPE
#undef RROPE_MMA
#undef OTHERS

#define FIELD(name) {#name, offsetof(clattn_tuning, name)}
static const struct {
  const char *key;
  size_t off;
} fields[] = {
    FIELD(decode_wg),      FIELD(decode_splits_per_cu), FIELD(decode_min_keys_per_split),
    FIELD(decode_max_splits), FIELD(decode_lane_keys), FIELD(decode_kstage), FIELD(decode_kstage_quant),
    FIELD(decode_mma), FIELD(decode_mma_splits_per_cu), FIELD(decode_mma_min_keys),
    FIELD(decode_mma_blocks), FIELD(decode_mma_int4_wg), FIELD(decode_mma_int4_stages), FIELD(decode_mma_int4_heads), FIELD(decode_mma_int4_groups_per_cu),
    FIELD(decode_mma_int4_whole),
    FIELD(decode_mma_fp8_wg), FIELD(decode_mma_fp8_stages), FIELD(merge_wg),
    FIELD(rerope_block_m), FIELD(rerope_block_n), FIELD(rerope_wg),
    FIELD(rerope_use_mma), FIELD(rerope_stages), FIELD(rerope_warp_blocks), FIELD(rerope_mma_block_n), FIELD(quant_wg),
};
#undef FIELD

bool clattn_tuning_set(clattn_tuning *t, const char *key, int value) {
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    if (strcmp(fields[i].key, key) == 0) {
      *(int *)((char *)t + fields[i].off) = value;
      return true;
    }
  }
  return false;
}

clattn_status clattn_tuning_write(const clattn_tuning *t, const char *path) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return clattn_fail(CLATTN_INVALID_ARGUMENT, "cannot write tuning file %s", tmp);
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    fprintf(f, "%s=%d\n", fields[i].key, *(const int *)((const char *)t + fields[i].off));
  if (fclose(f) != 0 || rename(tmp, path) != 0)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "cannot write tuning file %s", path);
  return CLATTN_SUCCESS;
}

static void apply_override(clattn_tuning *t, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    char *eq = strchr(line, '=');
    if (!eq || line[0] == '#') continue;
    *eq = '\0';
    char *end = NULL;
    long v = strtol(eq + 1, &end, 10);
    if (end != eq + 1 && v >= 0 && v < (1 << 20)) clattn_tuning_set(t, line, (int)v);
  }
  fclose(f);
}

void clattn_tuning_lookup(const clattn_device_profile *prof, const char *override_path,
                          clattn_tuning *out) {
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (strncmp(prof->arch, table[i].arch_prefix, strlen(table[i].arch_prefix)) == 0) {
      *out = table[i].t;
      break;
    }
  }
  /* A row written for a big GPU must not exceed a small device's limits. */
  int *wgs[] = {&out->decode_wg, &out->decode_mma_int4_wg, &out->decode_mma_fp8_wg,
                &out->merge_wg, &out->rerope_wg, &out->quant_wg};
  if (override_path) apply_override(out, override_path);
  for (size_t i = 0; i < sizeof wgs / sizeof wgs[0]; i++)
    while ((size_t)*wgs[i] > prof->max_work_group_size && *wgs[i] > 1) *wgs[i] /= 2;
}
