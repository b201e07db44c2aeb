/* Per-device kernel parameters, as data. Rows are matched by architecture
 * prefix (most specific first); the generic row is correct everywhere. An
 * override file written by `clattn tune` ("key=value" lines) is applied on
 * top. Every parameter, its range and its meaning are one list,
 * CLATTN_TUNING_PARAMS in internal.h; correctness never depends on a value
 * in range, only speed does. */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
  const char *arch_prefix; /* matched against clattn_device_profile.arch */
  clattn_tuning t;
} row;

/* The portable kernels' values every GPU row starts from. */
#define GPU_PORTABLE                                                                        \
  .decode_wg = 128, .decode_splits_per_cu = 2, .decode_min_keys_per_split = 256,            \
  .decode_max_splits = 128, .merge_wg = 128, .quant_wg = 256, .decode_merge_last = 8

/* Hopper / Ampere (H200 measurements, tools/PERF.md). Decode takes the
 * tensor-core form (f16/bf16 q, D % 64 == 0) with 2 groups per SM as the
 * split target (B=64 ctx=32768: f16 1.88 ms, 4.6 TB/s; 4 per SM 1.90); the
 * portable form keeps 2 per SM and a work-item per key (it beat 16 lanes per
 * key, 2.9 against 1.9 TB/s, and staged K tiles, 2.3 TB/s). Quantized rows on
 * tensor cores (B=64 ctx=32768) go straight from global memory, one block per
 * warp in flight: int4 with 4 warps per group (0.77 ms; through a ring of 2
 * staged blocks with 8 warps 0.93), fp8 with 8 warps (1.02 ms; 6 warps with 2
 * blocks in flight 1.09). int4 caches of whole token rows take the token-row
 * form instead: 4 KV heads per group, 4 groups per SM (0.64-0.65 ms; 8 heads
 * with 2 groups per SM 0.64; 3 or 8 splits 0.70 / 0.66); on sm_90, with
 * tokens back to back, one group of all 8 heads, each block of K or V one
 * bulk copy (0.615-0.617 ms against 0.650-0.652 padded in the same runs).
 * ReRoPE forward (Z=1 H=32 N=8192 D=64 W=2048, non-causal; two passes, one Q
 * in registers): key tiles of 64, a ring of 2 tiles, 2 blocks of 16 query
 * rows per warp (2.05 ms; tiles of 32: 2.22, with 3 in the ring 2.19; 1 block
 * per warp 2.54).
 * Small grids (B=1, f16 D=128 Hkv=8: 8 groups): groups of 8 warps, one per
 * SM (ctx 4096 / 16384 / 32768: 38.4 / 55.0 / 73.1 us against 43.8 / 63.0 /
 * 75.7 with 4 warps, 2 per SM). Splits merged in the partial kernel up to 8
 * on every GPU row (B=1 ctx=4096, 8 splits: 38.4 against 37.5 us of device
 * time, 23.8 against 52.7 us per call back to back; one work-group's merge
 * of many splits is slower than the merge kernel: 128 splits 143 against
 * 80 us). CPUs keep the merge kernel (PoCL, 2 cores, B=2 ctx=8192, 8 splits:
 * one launch 64.9 / 49.3 ms against 47.8 / 55.0 ms, no gain), as does the
 * generic row. */
#define NVIDIA_MMA                                                                          \
  GPU_PORTABLE, .decode_mma = 1, .decode_mma_splits_per_cu = 2, .decode_mma_min_keys = 1024, \
  .decode_mma_int4_wg = 128, .decode_mma_int4_heads = 4,                                    \
  .decode_mma_int4_groups_per_cu = 4, .decode_mma_fp8_wg = 256, .decode_mma_small_wg = 256, \
  .rerope_block_m = 64,                                                                     \
  .rerope_block_n = 32, .rerope_wg = 128, .rerope_use_mma = 1, .rerope_stages = 2,          \
  .rerope_warp_blocks = 2, .rerope_mma_block_n = 64

static const row table[] = {
    /* sm_90 has bulk copies: whole token rows */
    {"nvidia-sm9", {NVIDIA_MMA, .decode_mma_int4_whole = 1}},
    {"nvidia-sm8", {NVIDIA_MMA}},
    {"nvidia", {GPU_PORTABLE, .rerope_block_m = 32, .rerope_block_n = 32, .rerope_wg = 128}},
    /* CDNA (wave64) and RDNA (wave32): unmeasured, NVIDIA's choices */
    {"amd-gfx9",
     {.decode_wg = 256, .decode_splits_per_cu = 4, .decode_min_keys_per_split = 256,
      .decode_max_splits = 128, .merge_wg = 256, .quant_wg = 256, .rerope_block_m = 32,
      .rerope_block_n = 32, .rerope_wg = 256, .decode_merge_last = 8}},
    {"amd-gfx1", {GPU_PORTABLE, .rerope_block_m = 32, .rerope_block_n = 32, .rerope_wg = 128}},
    /* CPUs: few compute units; a work-item per key needs no barriers */
    {"pocl-cpu",
     {.decode_wg = 64, .decode_splits_per_cu = 2, .decode_min_keys_per_split = 64,
      .decode_max_splits = 64, .merge_wg = 64, .quant_wg = 64, .rerope_block_m = 16,
      .rerope_block_n = 16, .rerope_wg = 64}},
    {"intel-cpu",
     {.decode_wg = 64, .decode_splits_per_cu = 2, .decode_min_keys_per_split = 64,
      .decode_max_splits = 64, .merge_wg = 64, .quant_wg = 64, .rerope_block_m = 16,
      .rerope_block_n = 16, .rerope_wg = 64}},
    /* generic: correct everywhere */
    {"",
     {.decode_wg = 64, .decode_splits_per_cu = 2, .decode_min_keys_per_split = 128,
      .decode_max_splits = 64, .merge_wg = 64, .quant_wg = 64, .rerope_block_m = 16,
      .rerope_block_n = 16, .rerope_wg = 64}},
};
#undef GPU_PORTABLE
#undef NVIDIA_MMA

static const struct param {
  const char *key;
  size_t off;
  int lo, hi;
  bool pow2;
} params[] = {
#define PARAM(name, lo, hi, pow2, meaning) {#name, offsetof(clattn_tuning, name), lo, hi, pow2},
    CLATTN_TUNING_PARAMS(PARAM)
#undef PARAM
};
#define NPARAMS (sizeof params / sizeof params[0])

static const struct param *param_of(const char *key) {
  for (size_t i = 0; i < NPARAMS; i++)
    if (strcmp(params[i].key, key) == 0) return &params[i];
  return NULL;
}

static bool in_range(const struct param *f, long v) {
  if (v < f->lo || v > f->hi) return false;
  return !f->pow2 || v == 0 || (v & (v - 1)) == 0;
}

bool clattn_tuning_set(clattn_tuning *t, const char *key, int value) {
  const struct param *f = param_of(key);
  if (!f || !in_range(f, value)) return false;
  *(int *)((char *)t + f->off) = value;
  return true;
}

clattn_status clattn_tuning_write(const clattn_tuning *t, const char *path) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return clattn_fail(CLATTN_INVALID_ARGUMENT, "cannot write tuning file %s", tmp);
  for (size_t i = 0; i < NPARAMS; i++)
    fprintf(f, "%s=%d\n", params[i].key, *(const int *)((const char *)t + params[i].off));
  if (fclose(f) != 0 || rename(tmp, path) != 0)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "cannot write tuning file %s", path);
  return CLATTN_SUCCESS;
}

/* Applies the file's lines; each line that is not a known key with a value
 * in range is reported and ignored. */
static bool apply_override(const clattn_context *log_ctx, clattn_tuning *t, const char *path) {
  char *text = NULL, why[128];
  size_t size = 0;
  const clattn_read_result r = clattn_read_regular(path, 1 << 20, &text, &size, why, sizeof why);
  if (r != READ_OK) {
    if (r != READ_MISSING)
      clattn_log(log_ctx, CLATTN_LOG_ERROR, "clattn: tuning file %s %s; ignored", path, why);
    return false;
  }
  char *next = text;
  for (int no = 1; *next; no++) {
    char *s = next, *eol = strchr(next, '\n');
    next = eol ? eol + 1 : next + strlen(next);
    if (eol) *eol = '\0';
    while (*s == ' ' || *s == '\t') s++;
    s[strcspn(s, "\r")] = '\0';
    if (*s == '#' || *s == '\0') continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      clattn_log(log_ctx, CLATTN_LOG_ERROR, "clattn: %s:%d: \"%s\" is not key=value; ignored", path,
                 no, s);
      continue;
    }
    *eq = '\0';
    const struct param *p = param_of(s);
    char *end = NULL;
    errno = 0;
    const long v = strtol(eq + 1, &end, 10);
    if (!p) {
      clattn_log(log_ctx, CLATTN_LOG_ERROR, "clattn: %s:%d: unknown tuning key \"%s\"; ignored",
                 path, no, s);
    } else if (end == eq + 1 || *end != '\0' || errno || !in_range(p, v)) {
      clattn_log(log_ctx, CLATTN_LOG_ERROR,
                 "clattn: %s:%d: %s=%s is not %s in [%d, %d]; ignored", path, no, s, eq + 1,
                 p->pow2 ? "a power of two (or 0)" : "an integer", p->lo, p->hi);
    } else {
      *(int *)((char *)t + p->off) = (int)v;
    }
  }
  free(text);
  return true;
}

bool clattn_tuning_lookup(const clattn_context *log_ctx, const clattn_device_profile *prof,
                          const char *override_path, clattn_tuning *out) {
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (strncmp(prof->arch, table[i].arch_prefix, strlen(table[i].arch_prefix)) == 0) {
      *out = table[i].t;
      break;
    }
  }
  const bool read = override_path && apply_override(log_ctx, out, override_path);
  /* A row written for a big GPU must not exceed a small device's limits. */
  int *wgs[] = {&out->decode_wg, &out->decode_mma_int4_wg, &out->decode_mma_fp8_wg,
                &out->merge_wg, &out->rerope_wg, &out->quant_wg};
  for (size_t i = 0; i < sizeof wgs / sizeof wgs[0]; i++)
    while ((size_t)*wgs[i] > prof->max_work_group_size && *wgs[i] > 1) *wgs[i] /= 2;
  return read;
}

size_t clattn_tuning_count(void) { return NPARAMS; }

const char *clattn_tuning_name(size_t i) { return i < NPARAMS ? params[i].key : NULL; }

int clattn_tuning_get(const clattn_tuning *t, size_t i) {
  return i < NPARAMS ? *(const int *)((const char *)t + params[i].off) : 0;
}

int clattn_context_tuning_value(const clattn_context *ctx, size_t i) {
  return ctx ? clattn_tuning_get(&ctx->tuning, i) : 0;
}

const char *clattn_context_tuning_file(const clattn_context *ctx) { return ctx ? ctx->tuning_file : ""; }
