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

/* Fields: decode_wg, decode_block_n, decode_splits_per_cu, decode_min_keys_per_split,
 *         decode_max_splits, merge_wg, rerope_block_m, rerope_block_n, rerope_wg,
 *         rerope_use_mma, quant_wg */
static const row table[] = {
    /* Hopper / Ampere: 132 SMs, bandwidth-bound decode wants ~4 resident groups per SM. */
    {"nvidia-sm9", {128, 64, 4, 256, 128, 128, 64, 64, 128, 1, 256}},
    {"nvidia-sm8", {128, 64, 4, 256, 128, 128, 64, 64, 128, 1, 256}},
    {"nvidia", {128, 64, 4, 256, 128, 128, 32, 32, 128, 0, 256}},
    /* CDNA (wave64) and RDNA (wave32) */
    {"amd-gfx9", {256, 64, 4, 256, 128, 256, 32, 32, 256, 0, 256}},
    {"amd-gfx1", {128, 64, 4, 256, 128, 128, 32, 32, 128, 0, 256}},
    /* CPUs: few compute units, large groups are cheap */
    {"pocl-cpu", {64, 32, 2, 64, 64, 64, 16, 16, 64, 0, 64}},
    {"intel-cpu", {64, 32, 2, 64, 64, 64, 16, 16, 64, 0, 64}},
    {"", {64, 32, 2, 128, 64, 64, 16, 16, 64, 0, 64}}, /* generic */
};

#define FIELD(name) {#name, offsetof(clattn_tuning, name)}
static const struct {
  const char *key;
  size_t off;
} fields[] = {
    FIELD(decode_wg),      FIELD(decode_block_n), FIELD(decode_splits_per_cu),
    FIELD(decode_min_keys_per_split), FIELD(decode_max_splits), FIELD(merge_wg),
    FIELD(rerope_block_m), FIELD(rerope_block_n), FIELD(rerope_wg),
    FIELD(rerope_use_mma), FIELD(quant_wg),
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
    if (end != eq + 1 && v > 0 && v < (1 << 20)) clattn_tuning_set(t, line, (int)v);
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
  int *wgs[] = {&out->decode_wg, &out->merge_wg, &out->rerope_wg, &out->quant_wg};
  if (override_path) apply_override(out, override_path);
  for (size_t i = 0; i < sizeof wgs / sizeof wgs[0]; i++)
    while ((size_t)*wgs[i] > prof->max_work_group_size && *wgs[i] > 1) *wgs[i] /= 2;
}
