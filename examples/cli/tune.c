/* `clattn tune`: measures candidate tuning values on model-like shapes and
 * writes the fastest as the device's override file.
 *
 * Coordinate descent from the values the context starts with (its table
 * row and any override file): for each parameter of the family in turn,
 * each candidate value is set on the context (clattn_context_set_tuning),
 * checked on every shape against the CPU reference (a wrong or failing
 * candidate is reported and dropped), then timed on every shape, and the
 * best value so far is timed again right after it (so that clock drift
 * cancels); the candidate is kept when the mean of its times over the
 * best's is at least 2% lower (less is noise between timed runs). At the end the preset and the chosen
 * values are timed again, one after the other, and the file is written
 * atomically (clattn_context_write_tuning) where the context looks for it
 * (or --out). */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CANDIDATES 6
#define KEEP_MARGIN 0.02 /* a candidate must beat the best by this fraction */

/* A parameter and the values the tuner tries for it; tried only where some
 * case's kernels (cli_case_ops.kernels) contain `needs` (NULL: always). */
typedef struct knob {
  const char *param;
  int n;
  int values[MAX_CANDIDATES];
  const char *needs;
} knob;

typedef struct family {
  const char *name;
  const cli_case_ops *ops;
  size_t shape_size;
  const void *shapes[3]; /* by shape set: a GPU's, --quick, a CPU's */
  int nshapes[3];
  const knob *knobs[2]; /* [0] full, [1] --quick */
  int nknobs[2];
} family;

/* ------------------------------------------------------------------ decode */

/* The shapes of issue #22: a single long sequence and a big batch, short and long. */
static const cli_decode_shape decode_shapes[] = {
    {.batch = 1, .q_len = 1, .heads = 32, .kv_heads = 8, .head_dim = 128, .ctx = 32768, .dtype = "f16"},
    {.batch = 64, .q_len = 1, .heads = 32, .kv_heads = 8, .head_dim = 128, .ctx = 4096, .dtype = "f16"},
    {.batch = 64, .q_len = 1, .heads = 32, .kv_heads = 8, .head_dim = 128, .ctx = 32768, .dtype = "f16"},
    /* the quantized rows' variants (the portable form's; the tensor-core form reads them too) */
    {.batch = 64, .q_len = 1, .heads = 32, .kv_heads = 8, .head_dim = 128, .ctx = 32768, .dtype = "f16", .kv_dtype = "int4"},
    /* int4 paged at a small batch (issue #20's): the token rows' knobs */
    {.batch = 16, .q_len = 1, .heads = 32, .kv_heads = 8, .head_dim = 128, .ctx = 8192, .dtype = "f16", .kv_dtype = "int4",
     .paged = true, .page_size = 16},
};
/* a CPU's: issue #22's PoCL shape and a long single sequence */
static const cli_decode_shape decode_cpu_shapes[] = {
    {.batch = 8, .q_len = 1, .heads = 32, .kv_heads = 8, .head_dim = 128, .ctx = 8192, .dtype = "f16"},
    {.batch = 1, .q_len = 1, .heads = 32, .kv_heads = 8, .head_dim = 128, .ctx = 32768, .dtype = "f16"},
};
static const cli_decode_shape decode_quick_shapes[] = {
    {.batch = 2, .q_len = 1, .heads = 8, .kv_heads = 2, .head_dim = 64, .ctx = 512, .dtype = "f16"},
    {.batch = 1, .q_len = 1, .heads = 8, .kv_heads = 2, .head_dim = 64, .ctx = 2048, .dtype = "f16"},
};
/* The kernels' shape first (the split plan depends on it), then the plan;
 * the tensor-core form's parameters only where it runs, the portable
 * kernel's only where that runs. The serial form (CPU rows) is weighed
 * against the work-group kernel where it runs; it is never tried on a GPU,
 * where one work-item per group would take seconds. */
#define TC "tensor cores"
#define PORT "portable"
#define PORTQ "portable, quantized rows"
static const knob decode_knobs[] = {
    {"decode_serial", 2, {0, 1}, "serial"},
    {"decode_wg", 4, {32, 64, 128, 256}, PORT},
    {"decode_lane_keys", 2, {0, 1}, PORT},
    {"decode_kstage", 2, {0, 1}, PORT},
    {"decode_kq_wide", 3, {0, 1, 2}, PORTQ},
    {"decode_kstage_quant", 2, {0, 1}, PORTQ},
    {"decode_quant_value_rows", 3, {4, 8, 16}, PORTQ},
    {"decode_port_roles", 2, {0, 1}, PORT},
    {"decode_port_kpre", 2, {0, 1}, PORT},
    {"decode_port_waves", 3, {0, 4, 6}, PORT}, /* CDNA fp8 at 128 VGPRs; NVIDIA 3 groups of 256 */
    {"decode_splits_per_cu", 4, {1, 2, 4, 8}, NULL},
    {"decode_min_keys_per_split", 5, {64, 128, 256, 512, 1024}, NULL},
    {"decode_max_splits", 4, {32, 64, 128, 256}, NULL},
    {"decode_merge_last", 3, {0, 8, 16}, NULL},
    {"decode_merge_last_max", 2, {0, 1}, "the last work-group merges"},
    {"decode_mma_wg", 3, {64, 128, 256}, TC},
    {"decode_mma_blocks", 2, {0, 2}, TC},
    {"decode_mma_small_wg", 3, {0, 128, 256}, TC},
    {"decode_mma_small_short", 2, {0, 1}, TC},
    {"decode_mma_wide_wg", 2, {0, 256}, TC},
    {"decode_mma_splits_per_cu", 4, {0, 1, 2, 4}, TC},
    {"decode_mma_warps_per_cu", 4, {0, 12, 16, 24}, TC},
    {"decode_mma_min_keys", 4, {256, 512, 1024, 2048}, TC},
    {"decode_mma_int4_heads", 3, {0, 4, 8}, TC},
    {"decode_mma_int4_groups_per_cu", 4, {0, 2, 4, 8}, "token rows"},
    {"decode_mma_int4_whole", 2, {0, 1}, "token rows"},
};
#undef TC
#undef PORT
#undef PORTQ
static const knob decode_quick_knobs[] = {
    {"decode_wg", 2, {32, 128}, "portable"},
    {"decode_splits_per_cu", 2, {1, 4}, NULL},
    {"decode_min_keys_per_split", 2, {32, 256}, NULL},
};

/* ------------------------------------------------------------------ merge and quant */

/* a cascade's few big parts, and a split decode's many small ones */
static const cli_merge_shape merge_shapes[] = {
    {.n = 4, .batch = 64, .heads = 32, .head_dim = 128, .dtype = "f32"},
    {.n = 16, .batch = 8, .heads = 32, .head_dim = 128, .dtype = "f32"},
};
static const cli_merge_shape merge_cpu_shapes[] = {
    {.n = 4, .batch = 8, .heads = 32, .head_dim = 128, .dtype = "f32"},
};
static const cli_merge_shape merge_quick_shapes[] = {{.n = 3, .batch = 2, .heads = 4, .head_dim = 64, .dtype = "f32"}};
static const knob merge_knobs[] = {{"merge_wg", 4, {32, 64, 128, 256}, NULL}};
static const knob merge_quick_knobs[] = {{"merge_wg", 2, {32, 128}, NULL}};

static const cli_quant_shape quant_shapes[] = {
    {.rows = 65536, .heads = 8, .head_dim = 128, .kv_dtype = "int4", .dtype = "f16"},
    {.rows = 65536, .heads = 8, .head_dim = 128, .kv_dtype = "fp8", .dtype = "f16"},
};
static const cli_quant_shape quant_cpu_shapes[] = {
    {.rows = 8192, .heads = 8, .head_dim = 128, .kv_dtype = "int4", .dtype = "f16"},
};
static const cli_quant_shape quant_quick_shapes[] = {
    {.rows = 256, .heads = 2, .head_dim = 64, .kv_dtype = "int4", .dtype = "f16"},
};
static const knob quant_knobs[] = {{"quant_rowwise", 2, {0, 1}, NULL}, {"quant_wg", 4, {64, 128, 256, 512}, NULL}};
static const knob quant_quick_knobs[] = {{"quant_wg", 2, {32, 128}, NULL}};

/* ------------------------------------------------------------------ rerope (forward) */

static const cli_rerope_shape rerope_shapes[] = {
    {.heads = 32, .n = 4096, .head_dim = 64, .window = 1024, .dtype = "f16", .causal = true},
    {.heads = 32, .n = 4096, .head_dim = 128, .window = 1024, .dtype = "f16"},
};
static const cli_rerope_shape rerope_cpu_shapes[] = {
    {.heads = 8, .n = 1024, .head_dim = 64, .window = 256, .dtype = "f32", .causal = true},
};
static const cli_rerope_shape rerope_quick_shapes[] = {
    {.heads = 2, .n = 96, .head_dim = 32, .window = 17, .dtype = "f16", .causal = true},
};
static const knob rerope_knobs[] = {
    {"rerope_block_m", 3, {16, 32, 64}, "portable"},
    {"rerope_block_n", 3, {16, 32, 64}, "portable"},
    {"rerope_wg", 3, {64, 128, 256}, NULL},
    /* sm_90's warpgroup MMA form first (0: on where the device has it; each
     * candidate is checked against the reference before it is timed), then its
     * tiles where it runs */
    {"rerope_wgmma", 2, {0, 1}, "tensor cores"},
    {"rerope_wgmma_wg", 2, {128, 256}, "warpgroup MMA"},
    {"rerope_wgmma_block_n", 3, {16, 32, 64}, "warpgroup MMA"},
    {"rerope_mma_block_n", 2, {32, 64}, "tensor cores"},
    {"rerope_stages", 2, {2, 3}, "tensor cores"},
    {"rerope_warp_blocks", 2, {1, 2}, "tensor cores"},
};
static const knob rerope_quick_knobs[] = {{"rerope_block_n", 2, {8, 32}, "portable"}};

/* ------------------------------------------------------------------ rerope-bwd (the backward) */

static const cli_rerope_shape rerope_bwd_shapes[] = {
    {.heads = 32, .n = 4096, .head_dim = 128, .window = 1024, .dtype = "f16", .causal = true},
    {.heads = 32, .n = 4096, .head_dim = 64, .window = 1024, .dtype = "f16", .causal = true},
};
static const cli_rerope_shape rerope_bwd_cpu_shapes[] = {
    {.heads = 4, .n = 512, .head_dim = 64, .window = 128, .dtype = "f32", .causal = true},
};
static const cli_rerope_shape rerope_bwd_quick_shapes[] = {
    {.heads = 2, .n = 96, .head_dim = 32, .window = 17, .dtype = "f16", .causal = true},
};
/* the two-phase kernels' tiles and forms (lib/rerope.c plan_phased); the
 * portable backward shares the forward family's tiles */
static const knob rerope_bwd_knobs[] = {
    {"rerope_bwd_wgmma", 3, {0, 1, 3}, "tensor cores"}, /* sm_90's warpgroup MMA form, checked first */
    {"rerope_bwd_qring", 2, {1, 2}, "tensor cores"},
    /* the warpgroup kernels' register cap, forward and backward alike: tuned here
     * only (with --family all the backward would re-decide the forward's choice),
     * where the backward takes it by default */
    {"rerope_wgmma_maxnreg", 3, {0, 96, 128}, "warpgroup MMA"},
    {"rerope_bwd_block_m", 3, {16, 32, 64}, "tensor cores"},
    {"rerope_bwd_block_n", 2, {32, 64}, "tensor cores"},
    {"rerope_bwd_stages", 2, {1, 2}, "tensor cores"},
};
static const knob rerope_bwd_quick_knobs[] = {{"rerope_bwd_block_m", 2, {16, 32}, "tensor cores"}};

#define N(a) ((int)(sizeof a / sizeof a[0]))
#define SHAPES(f) {f##_shapes, f##_quick_shapes, f##_cpu_shapes}, {N(f##_shapes), N(f##_quick_shapes), N(f##_cpu_shapes)}
#define KNOBS(f) {f##_knobs, f##_quick_knobs}, {N(f##_knobs), N(f##_quick_knobs)}
static const family families[] = {
    {"decode", &cli_decode_cases, sizeof(cli_decode_shape), SHAPES(decode), KNOBS(decode)},
    {"merge", &cli_merge_cases, sizeof(cli_merge_shape), SHAPES(merge), KNOBS(merge)},
    {"rerope", &cli_rerope_cases, sizeof(cli_rerope_shape), SHAPES(rerope), KNOBS(rerope)},
    {"rerope-bwd", &cli_rerope_bwd_cases, sizeof(cli_rerope_shape), SHAPES(rerope_bwd), KNOBS(rerope_bwd)},
    {"quant", &cli_quant_cases, sizeof(cli_quant_shape), SHAPES(quant), KNOBS(quant)},
};
#undef SHAPES
#undef KNOBS

/* ------------------------------------------------------------------ the search */

enum { SHAPES_GPU, SHAPES_QUICK, SHAPES_CPU };

typedef struct tuner {
  cli_env env;
  bool quick;
  int set; /* the shape set: SHAPES_* */
  int warmup, repeat;
  int *preset; /* the context's values at the start, by parameter index */
  double t0, cand_s; /* the start; the seconds the measured candidates took */
  int done, total;    /* candidates measured, and to measure, in all */
} tuner;

static int param_index(const char *name) {
  for (size_t i = 0; i < clattn_tuning_count(); i++)
    if (strcmp(clattn_tuning_name(i), name) == 0) return (int)i;
  return -1;
}

static int value_of(const tuner *t, const char *name) {
  return clattn_context_tuning_value(t->env.ctx, (size_t)param_index(name));
}

/* Checks every case (when `check`), then times it into ms[]; false when a
 * check or a run fails (reported). */
static bool measure(tuner *t, const family *f, void **cases, const void *const *shapes, bool check,
                    double *ms, const char *what) {
  const int n = f->nshapes[t->set];
  char why[256], name[160];
  for (int i = 0; check && i < n; i++)
    if (!f->ops->check(cases[i], why, sizeof why)) {
      f->ops->describe(shapes[i], name, sizeof name);
      printf("  %s: fails on %s: %s; dropped\n", what, name, why);
      return false;
    }
  for (int i = 0; i < n; i++) {
    ms[i] = f->ops->time(cases[i], t->warmup, t->repeat);
    if (isnan(ms[i])) {
      printf("  %s: timing failed: %s; dropped\n", what, clattn_last_error());
      return false;
    }
  }
  return true;
}

/* The mean over shapes of a[i] / b[i]. */
static double mean_ratio(const double *a, const double *b, int n) {
  double sum = 0.0;
  for (int i = 0; i < n; i++) sum += a[i] / b[i] / n;
  return sum;
}

/* Progress: the estimate is the candidates' own mean time (the shapes'
 * preparation and the presets' runs left out) times the candidates left;
 * knobs that no shape's kernels use leave the count (session 34: with them
 * counted as done in no time, an 8-minute run first said 77 s were left). */
static void print_eta(tuner *t) {
  const double spent = cli_now() - t->t0;
  if (!t->done) {
    printf(" [0/%d, %.0f s]\n", t->total, spent);
    return;
  }
  const double left = t->cand_s / t->done * (t->total - t->done);
  printf(" [%d/%d, %.0f s, about %.0f s left]\n", t->done, t->total, spent, left);
}

/* One family: every knob in turn; leaves the best values set on the context. */
static bool tune_family(tuner *t, const family *f) {
  const int q = t->quick, n = f->nshapes[t->set];
  void **cases = calloc((size_t)n, sizeof *cases);
  const void **shapes = calloc((size_t)n, sizeof *shapes);
  double *base = calloc((size_t)n, sizeof *base), *now = calloc((size_t)n, sizeof *now);
  double *ref = calloc((size_t)n, sizeof *ref);
  int *start = calloc(clattn_tuning_count(), sizeof *start); /* the values this family starts from */
  bool ok = cases && shapes && base && now && ref && start;
  for (size_t i = 0; ok && i < clattn_tuning_count(); i++) start[i] = clattn_context_tuning_value(t->env.ctx, i);
  char name[160];
  for (int i = 0; ok && i < n; i++) {
    shapes[i] = (const char *)f->shapes[t->set] + (size_t)i * f->shape_size;
    f->ops->describe(shapes[i], name, sizeof name);
    printf("%s: preparing %s\n", f->name, name);
    ok = (cases[i] = f->ops->make(&t->env, shapes[i])) != NULL;
  }
  if (ok) { /* twice: the first run builds the kernels and warms the caches */
    ok = measure(t, f, cases, shapes, true, base, "the preset") &&
         measure(t, f, cases, shapes, false, base, "the preset");
    if (!ok) printf("%s: the preset fails its check; nothing to tune from\n", f->name);
  }
  for (int i = 0; ok && i < n; i++) {
    f->ops->describe(shapes[i], name, sizeof name);
    printf("  preset on %s: %.4f ms\n", name, base[i]);
  }
  double best = 1.0;
  for (int k = 0; ok && k < f->nknobs[q]; k++) {
    const knob *kb = &f->knobs[q][k];
    const int was = value_of(t, kb->param);
    int keep = was;
    bool applies = !kb->needs;
    for (int i = 0; !applies && i < n; i++) {
      const char *kernels = f->ops->kernels ? f->ops->kernels(cases[i]) : NULL;
      applies = kernels && strstr(kernels, kb->needs);
    }
    if (!applies) {
      for (int c = 0; c < kb->n; c++) t->total -= kb->values[c] != was;
      printf("  %s: not tuned (no shape runs the %s kernels)", kb->param, kb->needs);
      print_eta(t);
      continue;
    }
    for (int c = 0; c < kb->n; c++) {
      const int v = kb->values[c];
      if (v == was) continue;
      char what[96];
      snprintf(what, sizeof what, "%s=%d", kb->param, v);
      if (clattn_context_set_tuning(t->env.ctx, kb->param, v) != CLATTN_SUCCESS) {
        t->total--;
        printf("  %s: skipped (%s)", what, clattn_last_error());
        print_eta(t);
        continue;
      }
      /* the candidate (checked), then the best so far again: drift between them cancels */
      const double c0 = cli_now();
      bool fine = measure(t, f, cases, shapes, true, now, what);
      clattn_context_set_tuning(t->env.ctx, kb->param, keep);
      fine = fine && measure(t, f, cases, shapes, false, ref, "the best so far");
      t->done++, t->cand_s += cli_now() - c0;
      if (!fine) continue;
      const double ratio = mean_ratio(now, ref, n);
      printf("  %s: %.3fx the best so far's time (which is %.3fx the preset's)", what, ratio, best);
      print_eta(t);
      if (ratio < 1.0 - KEEP_MARGIN) best *= ratio, keep = v;
    }
    clattn_context_set_tuning(t->env.ctx, kb->param, keep);
    if (keep != was) printf("  -> %s=%d (was %d)\n", kb->param, keep, was);
  }
  if (ok) { /* the preset and the chosen values, timed again one after the other */
    double *chosen = calloc((size_t)n, sizeof *chosen);
    int *mine = calloc(clattn_tuning_count(), sizeof *mine);
    ok = chosen && mine;
    for (size_t i = 0; ok && i < clattn_tuning_count(); i++) mine[i] = clattn_context_tuning_value(t->env.ctx, i);
    for (size_t i = 0; ok && i < clattn_tuning_count(); i++)
      clattn_context_set_tuning(t->env.ctx, clattn_tuning_name(i), start[i]);
    ok = ok && measure(t, f, cases, shapes, false, base, "the preset");
    for (size_t i = 0; ok && i < clattn_tuning_count(); i++)
      clattn_context_set_tuning(t->env.ctx, clattn_tuning_name(i), mine[i]);
    ok = ok && measure(t, f, cases, shapes, false, chosen, "the chosen values");
    printf("%s: the preset against the chosen values (ms of device time):\n", f->name);
    double ratio = 0.0;
    for (int i = 0; ok && i < n; i++) {
      f->ops->describe(shapes[i], name, sizeof name);
      printf("  %-48s %9.4f %9.4f  %.3fx\n", name, base[i], chosen[i], base[i] / chosen[i]);
      ratio += chosen[i] / base[i] / n;
    }
    if (ok && ratio > 1.0) { /* what looked faster was noise: keep the preset */
      printf("%s: the chosen values are not faster when timed again (%.3fx the preset's time); "
             "the preset stays\n", f->name, ratio);
      for (size_t i = 0; i < clattn_tuning_count(); i++)
        clattn_context_set_tuning(t->env.ctx, clattn_tuning_name(i), start[i]);
    }
    free(chosen);
    free(mine);
  }
  for (int i = 0; cases && i < n; i++)
    if (cases[i]) f->ops->release(cases[i]);
  free(cases);
  free(shapes);
  free(base);
  free(now);
  free(ref);
  free(start);
  return ok;
}

static const char *usage =
    "clattn tune [flags]\n"
    "\n"
    "Times candidate tuning values on model-like shapes of each family and writes the\n"
    "fastest as this device's override file, which every later context on the device\n"
    "reads (the path is printed; $CLATTN_TUNING_FILE names another). Each candidate is\n"
    "checked against the CPU reference first; a wrong or failing one is reported and\n"
    "dropped. Parameters are tried one at a time from the values the device has now (its\n"
    "table row and any override file); a value is kept when it is at least 2% faster on\n"
    "the mean of the shapes. With CLATTN_PORTABLE=1 the portable kernels are tuned.\n"
    "Families: decode (the split plan and the kernels' shape), merge, rerope (the\n"
    "forward's tiles), rerope-bwd (the tensor-core backward's tiles and forms), quant\n"
    "(the K/V cache kernels); all: each in turn.\n"
    "--quick: small shapes and a few candidates. A CPU device gets smaller shapes.\n"
    "\n"
    "example: clattn tune --family decode";

int cli_tune(int argc, char **argv) {
  const char *fam = "all", *device = NULL, *out = NULL;
  bool quick = false, dry = false;
  int repeat = 0;
  cli_flag flags[] = {
      {"family", FLAG_STR, &fam, "decode, merge, rerope, rerope-bwd, quant or all"},
      {"device", FLAG_STR, &device, "device index or name substring (default $CLATTN_DEVICE)"},
      {"quick", FLAG_BOOL, &quick, "small shapes and a few candidates (a check that the tuner works)"},
      {"repeat", FLAG_INT, &repeat, "timed runs per shape and candidate (0: 10, --quick 3)"},
      {"out", FLAG_STR, &out, "write the file here instead of where the context looks for it"},
      {"dry-run", FLAG_BOOL, &dry, "measure and print, write nothing"},
  };
  int r = cli_parse(usage, argc, argv, flags, N(flags));
  if (r) return r == 1 ? 0 : 2;
  bool any = strcmp(fam, "all") == 0;
  for (int i = 0; i < N(families); i++) any = any || strcmp(fam, families[i].name) == 0;
  if (!any || repeat < 0) {
    fprintf(stderr, "clattn tune: %s (see --help)\n",
            repeat < 0 ? "--repeat must be at least 0" : "--family: decode, merge, quant or all");
    return 2;
  }
  tuner t = {.quick = quick, .warmup = quick ? 1 : 2, .repeat = repeat ? repeat : quick ? 3 : 10};
  if (!cli_open(device, &t.env)) return 1;
  const bool cpu = (t.env.profile.type & CL_DEVICE_TYPE_CPU) != 0;
  t.set = quick ? SHAPES_QUICK : cpu ? SHAPES_CPU : SHAPES_GPU;
  const char *path = out ? out : clattn_context_tuning_path(t.env.ctx);
  if (!dry && !path[0]) {
    fprintf(stderr, "clattn tune: no place to write the file (no cache directory): use --out\n");
    cli_close(&t.env);
    return 2;
  }
  printf("device: %s, arch %s%s\n", t.env.profile.name, t.env.profile.arch,
         getenv("CLATTN_PORTABLE") ? ", portable kernels (CLATTN_PORTABLE)" : "");
  t.preset = calloc(clattn_tuning_count(), sizeof *t.preset);
  if (!t.preset) return cli_close(&t.env), 1;
  for (size_t i = 0; i < clattn_tuning_count(); i++) t.preset[i] = clattn_context_tuning_value(t.env.ctx, i);
  for (int i = 0; i < N(families); i++)
    if (any && (strcmp(fam, "all") == 0 || strcmp(fam, families[i].name) == 0))
      for (int k = 0; k < families[i].nknobs[quick]; k++) {
        const knob *kb = &families[i].knobs[quick][k];
        for (int c = 0; c < kb->n; c++) t.total += kb->values[c] != value_of(&t, kb->param);
      }
  t.t0 = cli_now();
  bool ok = true;
  for (int i = 0; ok && i < N(families); i++)
    if (strcmp(fam, "all") == 0 || strcmp(fam, families[i].name) == 0) ok = tune_family(&t, &families[i]);
  if (ok) {
    printf("chosen (the rest as before):");
    int changed = 0;
    for (size_t i = 0; i < clattn_tuning_count(); i++) {
      const int v = clattn_context_tuning_value(t.env.ctx, i);
      if (v != t.preset[i]) printf(" %s=%d (was %d)", clattn_tuning_name(i), v, t.preset[i]), changed++;
    }
    printf("%s\n", changed ? "" : " nothing: the preset is the fastest found");
    printf("tuning took %.0f s\n", cli_now() - t.t0);
    if (!dry) {
      clattn_status s = clattn_context_write_tuning(t.env.ctx, path);
      if (s != CLATTN_SUCCESS) ok = !cli_fail("writing the tuning file", s);
      else printf("wrote %s\n", path);
    }
  }
  free(t.preset);
  cli_close(&t.env);
  return ok ? 0 : 1;
}
