/* Per-device kernel parameters, as data. A row is keyed by a device name,
 * an architecture, or a vendor; the lookup takes the first row that matches
 * in that order, else the generic row, which is correct everywhere. An
 * override file written by `clattn tune` ("key=value" lines) is applied on
 * top. Every parameter, its range and its meaning are one list,
 * CLATTN_TUNING_PARAMS in internal.h; correctness never depends on a value
 * in range, only speed does. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What a row's key is matched against, in the order the lookup tries them. */
typedef enum row_kind { BY_NAME, BY_ARCH, BY_VENDOR, GENERIC } row_kind;

typedef struct row {
  row_kind by;
  const char *key; /* BY_NAME: a substring of the device name (any case); BY_ARCH: a
                      prefix of clattn_device_profile.arch; BY_VENDOR: its first word */
  clattn_tuning t;
} row;

/* The portable kernels' values every GPU row starts from. Quantized K rows
 * that start on 16 bytes are read 16 bytes at a time (decode_kq_wide = 1;
 * H100, B=64 ctx=32768: int4g4 and fp8 16-18% faster; rows at any word
 * through the shift, 2, level: cl/decode.cl kq_row_words). */
#define GPU_COMMON                                                                          \
  .decode_splits_per_cu = 2, .decode_min_keys_per_split = 256, .decode_max_splits = 128,    \
  .merge_wg = 128, .quant_wg = 256, .decode_kq_wide = 1
#define GPU_PORTABLE .decode_wg = 128, GPU_COMMON, .decode_merge_last = 8

/* Hopper / Ampere (H200 measurements, tools/PERF.md). Decode takes the
 * tensor-core form (f16/bf16 q, D % 64 == 0) with 2 groups per SM as the
 * split target (B=64 ctx=32768: f16 1.88 ms, 4.6 TB/s; 4 per SM 1.90), 4
 * warps per group (decode_mma_wg; 8 warps 1.03x the time in `clattn tune`);
 * below that batch, as many splits as fill 16 warps per SM once (a group of
 * 4 warps at D <= 128 and 8 rows: 4 per SM; at D = 256 or 16 rows 2: B=16
 * ctx=8192 D=256 290 us with 2 splits, 334 with 3; D=128 B=8 ctx=32768 271
 * with 8 splits, 283 with 5; decode_mma_warps_per_cu, lib/decode_plan.c).
 * The portable form keeps 2 per SM and a work-item per key, 256 keys per
 * group: NVIDIA's compiler gives the kernel 128-130 registers (128 since
 * 680983c), so groups of 128 run 3 per SM, not 4 (`clattn tune`,
 * CLATTN_PORTABLE=1, f16 D=128: B=1 ctx=32768, B=64 ctx=4096 / 32768 0.096 / 0.419 / 2.960 ms against 0.105 /
 * 0.605 / 4.485 with 128 keys; f25e022's kernel had 128 registers and 0.397
 * / 2.800 ms with 128 keys, tools/PERF.md; 16 lanes per key 2.2x the time,
 * staged K tiles no gain).
 * Quantized rows on tensor cores (B=64 ctx=32768) go straight from global
 * memory, one block per warp in flight: int4 with 4 warps per group (0.77
 * ms; through a ring of 2 staged blocks with 8 warps 0.93), fp8 with 8 warps
 * (1.02 ms; 6 warps with 2 blocks in flight 1.09). int4 caches of whole
 * token rows take the token-row form instead: 4 KV heads per group, 4
 * groups per SM (0.64-0.65 ms; 8 heads with 2 groups per SM 0.64; 3 or 8
 * splits 0.70 / 0.66); on sm_90, with
 * tokens back to back, one group of all 8 heads, each block of K or V one
 * bulk copy (0.615-0.617 ms against 0.650-0.652 padded in the same runs);
 * whole rows in spans of at least 512 keys (B=16 ctx=8192 paged: 16 parts,
 * 82 us, against 8 of 1024 keys, 101; padded rows lose with them).
 * Float groups of 8 warps where a warp's accumulators pass 8 x 128
 * (decode_mma_wide_wg; B=64 ctx=32768 D=192: 3.00 ms against 3.33) or D is
 * padded in registers (H100, B=16 ctx=8192 D=80: 135 us against 145).
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
 * 80 us), up to 16 on NVIDIA's, whose driver has 64-bit atom_max: a row
 * block's work-groups, arriving together, raise its ticket to the call's tag
 * instead of queueing on a compare-exchange (H100, B=1 f16 D=128 Hkv=8, us,
 * one launch of 16 against two: ctx=16384 43.5 / 46.2, 32768 65.9 / 68.5;
 * ctx=4096, 8 splits, 18.5 against 21.1 with the loop alone; the loop
 * alone at 16 splits 48.7; the limit counts splits times query rows). CPUs
 * keep the merge kernel (PoCL, 2 cores, B=2 ctx=8192, 8 splits: one launch
 * 64.9 / 49.3 ms against 47.8 / 55.0 ms, no gain), as does the generic row. */
#define NVIDIA_MMA                                                                          \
  .decode_wg = 256, GPU_COMMON, .decode_merge_last = 16, .decode_merge_last_max = 1,        \
  .decode_mma = 1, .decode_mma_wg = 128,                                                    \
  .decode_mma_splits_per_cu = 2, .decode_mma_warps_per_cu = 16, .decode_mma_min_keys = 1024, \
  .decode_mma_int4_wg = 128, .decode_mma_int4_heads = 4,                                    \
  .decode_mma_int4_groups_per_cu = 4, .decode_mma_fp8_wg = 256, .decode_mma_small_wg = 256, \
  .decode_mma_small_blocks = 2,                                                            \
  .decode_mma_small_short = 1, .decode_mma_whole_min_keys = 512, .decode_mma_wide_wg = 256,  \
  .rerope_block_m = 64,                                                                     \
  .rerope_block_n = 32, .rerope_wg = 128, .rerope_use_mma = 1, .rerope_stages = 2,          \
  .rerope_warp_blocks = 2, .rerope_mma_block_n = 64

/* AMD rows: reasoned, not measured (no AMD GPU was at hand); `clattn tune`
 * on the GPU corrects them. What the register allocator allows was read
 * offline (clang-16 with libclc, tools/check_amdgcn.py; ROCm's compiler
 * differs in detail): the portable decode at D = 128, 4 rows, groups of 256
 * on CDNA: f16 126 / 124 VGPRs (gfx90a / gfx940) and int4 122 / 120, 4
 * waves per SIMD, as assumed below; int4 of 4 groups 168 / 164 and fp8 142
 * / 134, 3 (decode_port_waves = 4 would cap them at 128 with 12-24 bytes of
 * scratch: left to the tuner); no scratch in any. RDNA (groups of 128):
 * 111-118 VGPRs, 8-9 waves per SIMD32 on gfx1030, 12 on gfx1100. With an
 * additive bias 125 (it took all 512 and spilled before 7c2bb54, which
 * reads the bias before the products). Left: quantized K rows read as
 * shifted 16-byte words (decode_kq_wide = 2, a tuner's choice) spill 84-148
 * bytes on CDNA.
 * CDNA (gfx9: MI200 gfx90a, MI300 gfx942) runs wave64 on 4 SIMDs per CU
 * with 64 KiB of LDS per work-group: a group of 256 work-items is one wave
 * per SIMD, and 4 groups per CU (16 waves, 4 per SIMD) is the occupancy that
 * hides HBM latency on a GPU that hides it by waves, not by loads in flight
 * per thread; 32x32 ReRoPE tiles of D <= 256 in f32 (K 32 KiB, V 32 KiB
 * at D = 256 are the most) fit its LDS. RDNA
 * (gfx10/11) runs wave32 on WGPs of two CUs: NVIDIA's warp-sized choices
 * (groups of 128 = 4 waves, 2 per CU) carry over. Both keep the one-launch
 * merge of up to 8 splits (ROCm has cl_khr_int64_base_atomics; without it
 * the planner falls back to the merge kernel). The portable decode's halves
 * (decode_port_roles) stay off: they gain where latency binds (the H100:
 * B=1 5%, fp8 3%) and lose where issue does (int4 11%); CDNA's row counts
 * on 4 waves per SIMD to hide latency, so the issue-bound case is the one
 * expected there. */
#define AMD_CDNA                                                                            \
  .decode_wg = 256, .decode_splits_per_cu = 4, .decode_min_keys_per_split = 256,            \
  .decode_max_splits = 128, .merge_wg = 256, .quant_wg = 256, .rerope_block_m = 32,         \
  .rerope_block_n = 32, .rerope_wg = 256, .decode_merge_last = 8, .decode_kq_wide = 1

/* CPUs: few compute units. Decode takes the serial form, a work-item per
 * split walking whole token rows (PoCL, 2-core Xeon, B=8 ctx=8192 Hq=32
 * Hkv=8 D=128 f16: 19.8 ms, 13.5 GB/s, against 113.6 ms for the work-group
 * kernel, whose group reads one KV head's row every Hkv D 2 bytes; with
 * the CPU's prefetch instruction, a 2-core EPYC: 10.2 ms, 50-54% of its
 * streaming read; tools/PERF.md). The K/V cache kernels take a work-item
 * per row (PoCL, 65536 x 8 rows of 128 f16, int4 quantize / dequantize: 67 / 12.4 ms
 * against 134 / 39.3 with a row's lanes in a work-group). */
#define CPU_ROW                                                                             \
  .decode_wg = 64, .decode_splits_per_cu = 2, .decode_min_keys_per_split = 64,              \
  .decode_serial = 1,                                                                       \
  .decode_max_splits = 64, .merge_wg = 64, .quant_wg = 64, .quant_rowwise = 1,             \
  .rerope_block_m = 16, .rerope_block_n = 16, .rerope_wg = 64

static const row table[] = {
    /* sm_90 has bulk copies: whole token rows. ReRoPE's warpgroup MMA forms
     * pass their checks on the GPU (tools/gpu_session31.sh); the backward's
     * is on up to D = 64 (lib/rerope.c plan_phased: 3-8% faster there,
     * slower above on an H100), the forward's off (slower than mma.sync);
     * up to D = 64 both at 128 registers (lib/rerope.c wgmma_maxnreg). */
    {BY_ARCH, "nvidia-sm9", {NVIDIA_MMA, .decode_mma_int4_whole = 1, .rerope_wgmma = 1,
                              .rerope_wgmma_maxnreg = 128}},
    {BY_ARCH, "nvidia-sm8", {NVIDIA_MMA}},
    {BY_ARCH, "amd-gfx9", {AMD_CDNA}},
    {BY_ARCH, "amd-gfx1", {GPU_PORTABLE, .rerope_block_m = 32, .rerope_block_n = 32, .rerope_wg = 128}},
    {BY_ARCH, "pocl-cpu", {CPU_ROW}},
    {BY_ARCH, "intel-cpu", {CPU_ROW}},
    /* NVIDIA before sm_80: no tensor-core form */
    {BY_VENDOR, "nvidia", {GPU_PORTABLE, .rerope_block_m = 32, .rerope_block_n = 32, .rerope_wg = 128}},
    {GENERIC, "",
     {.decode_wg = 64, .decode_splits_per_cu = 2, .decode_min_keys_per_split = 128,
      .decode_max_splits = 64, .merge_wg = 64, .quant_wg = 64, .rerope_block_m = 16,
      .rerope_block_n = 16, .rerope_wg = 64}},
};
#undef AMD_CDNA
#undef CPU_ROW
#undef GPU_COMMON
#undef GPU_PORTABLE
#undef NVIDIA_MMA

static const struct param {
  clattn_tuning_param info; /* name, meaning, range */
  size_t off;
} params[] = {
#define PARAM(name, lo, hi, pow2, meaning) {{#name, meaning, lo, hi, pow2}, offsetof(clattn_tuning, name)},
    CLATTN_TUNING_PARAMS(PARAM)
#undef PARAM
};

/* The work-group sizes: clamped to the device's limit. */
static const size_t wg_params[] = {CLATTN_TP_decode_wg,   CLATTN_TP_decode_mma_wg, CLATTN_TP_decode_mma_int4_wg,
                                   CLATTN_TP_decode_mma_fp8_wg, CLATTN_TP_decode_mma_small_wg, CLATTN_TP_decode_mma_wide_wg,
                                   CLATTN_TP_merge_wg,    CLATTN_TP_rerope_wg,
                                   CLATTN_TP_quant_wg};
#define NPARAMS (sizeof params / sizeof params[0])

static const struct param *param_of(const char *key) {
  for (size_t i = 0; i < NPARAMS; i++)
    if (strcmp(params[i].info.name, key) == 0) return &params[i];
  return NULL;
}

/* The field of t that parameter p names. */
static int *field(clattn_tuning *t, const struct param *p) { return (int *)((char *)t + p->off); }
static int field_value(const clattn_tuning *t, const struct param *p) {
  return *(const int *)((const char *)t + p->off);
}

static bool in_range(const struct param *f, long v) {
  if (v < f->info.lo || v > f->info.hi) return false;
  return !f->info.pow2 || v == 0 || (v & (v - 1)) == 0;
}

bool clattn_tuning_set(clattn_tuning *t, const char *key, int value) {
  const struct param *f = param_of(key);
  if (!f || !in_range(f, value)) return false;
  *field(t, f) = value;
  return true;
}

static bool is_wg(size_t i) {
  for (size_t k = 0; k < sizeof wg_params / sizeof wg_params[0]; k++)
    if (wg_params[k] == i) return true;
  return false;
}

/* The largest value parameter i may take on this device (its range's top,
 * or the device's max work-group size for a work-group size). */
static int device_max(const clattn_device_profile *prof, size_t i) {
  if (i >= NPARAMS) return 0;
  if (is_wg(i) && prof->max_work_group_size < (size_t)params[i].info.hi) return (int)prof->max_work_group_size;
  return params[i].info.hi;
}

clattn_status clattn_tuning_write(const clattn_tuning *t, const clattn_device_profile *prof,
                                  const char *path) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return clattn_fail(CLATTN_INVALID_ARGUMENT, "cannot write tuning file %s", tmp);
  fprintf(f, "# clattn tuning override (written by clattn tune); key=value lines, '#' comments.\n"
             "# The library reads it for the device named below only, and only as this version.\n");
  fprintf(f, "clattn_version=%s\ndevice=%s\narch=%s\n", clattn_version(NULL, NULL, NULL), prof->name,
          prof->arch);
  for (size_t i = 0; i < NPARAMS; i++)
    fprintf(f, "%s=%d\n", params[i].info.name, field_value(t, &params[i]));
  const bool written = fclose(f) == 0;
  if (!written || rename(tmp, path) != 0) {
    remove(tmp);
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "cannot write tuning file %s", path);
  }
  return CLATTN_SUCCESS;
}

/* The file's lines one at a time: *s the line without its end and leading
 * blanks, NULL at the end. Ends the line in place. */
static char *next_line(char **cursor) {
  char *s = *cursor, *eol = strchr(s, '\n');
  if (!*s) return NULL;
  *cursor = eol ? eol + 1 : s + strlen(s);
  if (eol) *eol = '\0';
  while (*s == ' ' || *s == '\t') s++;
  s[strcspn(s, "\r")] = '\0';
  return s;
}

/* What a file says it was written for; empty where it says nothing. */
typedef struct file_header {
  char version[64], device[256], arch[64];
} file_header;

static bool header_key(file_header *h, const char *key, const char *value) {
  const struct {
    const char *key;
    char *dst;
    size_t n;
  } f[] = {{"clattn_version", h->version, sizeof h->version},
           {"device", h->device, sizeof h->device},
           {"arch", h->arch, sizeof h->arch}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (strcmp(key, f[i].key) == 0) {
      snprintf(f[i].dst, f[i].n, "%s", value);
      return true;
    }
  return false;
}

/* Reports a problem with the override file through log_ctx's log and keeps
 * it, a line each, in origin->problems (clattn devices prints them). */
static void problem(const clattn_context *log_ctx, clattn_tuning_origin *origin, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
static void problem(const clattn_context *log_ctx, clattn_tuning_origin *origin, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  clattn_log(log_ctx, CLATTN_LOG_ERROR, "%s", msg);
  const size_t used = strlen(origin->problems);
  snprintf(origin->problems + used, sizeof origin->problems - used, "%s%s", used ? "\n" : "", msg);
}

/* Whose file it is: false (reported) when it names another device,
 * architecture or library version. A file naming none of them (written by
 * hand) applies to any device. */
static bool header_fits(const clattn_context *log_ctx, clattn_tuning_origin *origin,
                        const clattn_device_profile *prof, const char *path, const file_header *h) {
  const char *version = clattn_version(NULL, NULL, NULL);
  const char *what = NULL, *theirs = NULL, *ours = NULL;
  if (h->device[0] && strcmp(h->device, prof->name) != 0)
    what = "device", theirs = h->device, ours = prof->name;
  else if (h->arch[0] && strcmp(h->arch, prof->arch) != 0)
    what = "architecture", theirs = h->arch, ours = prof->arch;
  else if (h->version[0] && strcmp(h->version, version) != 0)
    what = "clattn version", theirs = h->version, ours = version;
  if (what)
    problem(log_ctx, origin, "clattn: tuning file %s was written for %s \"%s\", not this one (\"%s\"); ignored",
            path, what, theirs, ours);
  return what == NULL;
}

/* Applies the file's lines; each line that is not a known key with a value
 * in range is reported and ignored. A file of another device or version is
 * ignored whole. */
static bool apply_override(const clattn_context *log_ctx, const clattn_device_profile *prof,
                           clattn_tuning *t, clattn_tuning_origin *origin, const char *path) {
  char *text = NULL, why[128];
  size_t size = 0;
  const clattn_read_result r = clattn_read_regular(path, 1 << 20, &text, &size, why, sizeof why);
  if (r != READ_OK) {
    if (r != READ_MISSING)
      problem(log_ctx, origin, "clattn: tuning file %s %s; ignored", path, why);
    return false;
  }
  file_header h = {{0}, {0}, {0}};
  clattn_tuning got = *t;
  bool from_file[CLATTN_TUNING_N] = {false};
  char *cursor = text, *s;
  for (int no = 1; (s = next_line(&cursor)) != NULL; no++) {
    if (*s == '#' || *s == '\0') continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      problem(log_ctx, origin, "clattn: %s:%d: \"%s\" is not key=value; ignored", path, no, s);
      continue;
    }
    *eq = '\0';
    if (header_key(&h, s, eq + 1)) continue;
    const struct param *p = param_of(s);
    char *end = NULL;
    errno = 0;
    const long v = strtol(eq + 1, &end, 10);
    if (!p) {
      problem(log_ctx, origin, "clattn: %s:%d: unknown tuning key \"%s\"; ignored", path, no, s);
    } else if (end == eq + 1 || *end != '\0' || errno || !in_range(p, v)) {
      problem(log_ctx, origin, "clattn: %s:%d: %s=%s is not %s in [%d, %d]; ignored", path, no, s, eq + 1,
              p->info.pow2 ? "a power of two (or 0)" : "an integer", p->info.lo, p->info.hi);
    } else {
      *field(&got, p) = (int)v;
      from_file[p - params] = true;
    }
  }
  free(text);
  if (!header_fits(log_ctx, origin, prof, path, &h)) return false;
  *t = got;
  for (size_t i = 0; i < NPARAMS; i++)
    if (from_file[i]) snprintf(origin->of[i], sizeof origin->of[i], "override file");
  return true;
}

static bool row_matches(const row *w, const clattn_device_profile *prof) {
  switch (w->by) {
    case BY_NAME: {
      const size_t n = strlen(w->key);
      for (const char *s = prof->name; *s; s++)
        if (strncasecmp(s, w->key, n) == 0) return true;
      return false;
    }
    case BY_ARCH: return strncmp(prof->arch, w->key, strlen(w->key)) == 0;
    case BY_VENDOR: {
      const size_t n = strlen(w->key);
      return strncmp(prof->arch, w->key, n) == 0 && (prof->arch[n] == '-' || prof->arch[n] == '\0');
    }
    case GENERIC: return true;
  }
  return false;
}

bool clattn_tuning_lookup(const clattn_context *log_ctx, const clattn_device_profile *prof,
                          const char *override_path, clattn_tuning *out, clattn_tuning_origin *origin) {
  static const char *kind_name[] = {"device", "arch", "vendor", "generic"};
  clattn_tuning_origin scratch;
  if (!origin) origin = &scratch;
  origin->problems[0] = '\0';
  const row *hit = &table[sizeof table / sizeof table[0] - 1]; /* the generic row */
  for (int by = BY_NAME; by < GENERIC && hit->by == GENERIC; by++)
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
      if (table[i].by == (row_kind)by && row_matches(&table[i], prof)) {
        hit = &table[i];
        break;
      }
  *out = hit->t;
  for (size_t i = 0; i < NPARAMS; i++)
    snprintf(origin->of[i], sizeof origin->of[i], hit->by == GENERIC ? "generic row" : "%s row %s",
             kind_name[hit->by], hit->key);
  const bool read = override_path && apply_override(log_ctx, prof, out, origin, override_path);
  /* A row written for a big GPU must not exceed a small device's limits. */
  for (size_t k = 0; k < sizeof wg_params / sizeof wg_params[0]; k++) {
    int *wg = field(out, &params[wg_params[k]]);
    const int was = *wg;
    while ((size_t)*wg > prof->max_work_group_size && *wg > 1) *wg /= 2;
    if (*wg != was)
      snprintf(origin->of[wg_params[k]], sizeof origin->of[0],
               "clamped to the device's max work-group size (was %d)", was);
  }
  return read;
}

void clattn_tuning_default_path(const char *dir, const clattn_device_profile *prof, char *out,
                                size_t n) {
  char name[96];
  size_t k = 0;
  for (const char *s = prof->name; *s && k + 1 < sizeof name; s++) {
    const unsigned char ch = (unsigned char)*s;
    if (isalnum(ch))
      name[k++] = (char)tolower(ch);
    else if (k > 0 && name[k - 1] != '-')
      name[k++] = '-';
  }
  while (k > 0 && name[k - 1] == '-') k--;
  name[k] = '\0';
  snprintf(out, n, "%s/tuning-%s%s%s.txt", dir, prof->arch, k ? "-" : "", name);
}

size_t clattn_tuning_count(void) { return NPARAMS; }

const char *clattn_tuning_name(size_t i) { return i < NPARAMS ? params[i].info.name : NULL; }

int clattn_tuning_get(const clattn_tuning *t, size_t i) {
  return i < NPARAMS ? field_value(t, &params[i]) : 0;
}

int clattn_context_tuning_value(const clattn_context *ctx, size_t i) {
  return ctx ? clattn_tuning_get(&ctx->tuning, i) : 0;
}

const char *clattn_context_tuning_file(const clattn_context *ctx) { return ctx ? ctx->tuning_file : ""; }

const clattn_tuning_param *clattn_tuning_param_info(size_t i) {
  return i < NPARAMS ? &params[i].info : NULL;
}

const char *clattn_context_tuning_origin(const clattn_context *ctx, size_t i) {
  return ctx && i < NPARAMS ? ctx->tuning_origin.of[i] : NULL;
}

clattn_status clattn_context_set_tuning(clattn_context *ctx, const char *name, int value) {
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  if (!name) return clattn_fail(CLATTN_INVALID_ARGUMENT, "name is NULL");
  const struct param *p = param_of(name);
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "name: no tuning parameter is called \"%s\"", name);
  const size_t i = (size_t)(p - params);
  const int hi = device_max(&ctx->profile, i);
  if (!in_range(p, value) || value > hi)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "value: %s=%d is not %s in [%d, %d] on this device", name,
                       value, p->info.pow2 ? "a power of two (or 0)" : "an integer", p->info.lo, hi);
  *field(&ctx->tuning, p) = value;
  snprintf(ctx->tuning_origin.of[i], sizeof ctx->tuning_origin.of[i], "set by clattn_context_set_tuning");
  return CLATTN_SUCCESS;
}

clattn_status clattn_context_write_tuning(const clattn_context *ctx, const char *path) {
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  if (!path || !path[0]) return clattn_fail(CLATTN_INVALID_ARGUMENT, "path is NULL or empty");
  return clattn_tuning_write(&ctx->tuning, &ctx->profile, path);
}

const char *clattn_context_tuning_path(const clattn_context *ctx) { return ctx ? ctx->tuning_path : ""; }

const char *clattn_context_tuning_problems(const clattn_context *ctx) {
  return ctx ? ctx->tuning_origin.problems : "";
}
