/* `clattn devices`: every OpenCL device with the index CLATTN_DEVICE and
 * --device take, the default one, clattn's profile of it and its tuning;
 * --params lists every tuning value with where it came from and what it
 * means, --json the same as one JSON object per device. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *yes_no(int v) { return v ? "yes" : "no"; }

static void print_size(const char *label, cl_ulong bytes) {
  if (bytes >= (1ull << 30))
    printf("%s %.1f GiB", label, (double)bytes / (double)(1ull << 30));
  else if (bytes >= (1ull << 20))
    printf("%s %.1f MiB", label, (double)bytes / (double)(1ull << 20));
  else
    printf("%s %.0f KiB", label, (double)bytes / 1024.0);
}

/* The tuning as "key=value" pairs, four to a line, in the library's order
 * (fields added later show up without touching this file). */
static void print_tuning(const clattn_context *ctx) {
  for (size_t i = 0; i < clattn_tuning_count(); i++)
    printf("%s%s=%d", i % 4 == 0 ? "\n               " : "  ", clattn_tuning_name(i),
           clattn_context_tuning_value(ctx, i));
  printf("\n");
}

/* --params: one line per value: name, value, where it came from, meaning. */
static void print_params(const clattn_context *ctx) {
  for (size_t i = 0; i < clattn_tuning_count(); i++) {
    const clattn_tuning_param *p = clattn_tuning_param_info(i);
    printf("      %-32s %7d  %-28s %s [%d, %d%s]\n", p->name, clattn_context_tuning_value(ctx, i),
           clattn_context_tuning_origin(ctx, i), p->meaning, p->lo, p->hi, p->pow2 ? ", 2^k" : "");
  }
}

/* --json: the profile, its features and every tuning value of one device, one line. */
static void print_json(cl_uint index, const clattn_device_profile *p, bool is_default,
                       const clattn_context *ctx) {
  printf("{\"index\":%u,\"default\":%s,", index, cli_json_bool(is_default));
  cli_json_str("name", p->name, true);
  cli_json_str("platform", p->platform, true);
  cli_json_str("arch", p->arch, true);
  printf("\"compute_units\":%u,\"simd_width\":%u,\"max_work_group_size\":%zu,"
         "\"local_mem_bytes\":%llu,\"global_mem_bytes\":%llu,",
         p->compute_units, p->simd_width, p->max_work_group_size,
         (unsigned long long)p->local_mem_bytes, (unsigned long long)p->global_mem_bytes);
  printf("\"features\":{\"fp16\":%s,\"fp64\":%s,\"subgroups\":%s,\"int64_atomics\":%s,"
         "\"nv_ptx\":%s,\"amd_builtins\":%s,\"cpu_prefetch\":%s,\"f32_denormals\":%s},",
         cli_json_bool(p->has_fp16), cli_json_bool(p->has_fp64), cli_json_bool(p->has_subgroups),
         cli_json_bool(p->has_int64_atomics), cli_json_bool(p->has_nv_ptx),
         cli_json_bool(p->has_amd_builtins), cli_json_bool(p->has_cpu_prefetch),
         cli_json_bool(p->has_f32_denormals));
  if (!ctx) {
    cli_json_str("error", clattn_last_error(), false);
    printf("}\n");
    return;
  }
  cli_json_str("tuning_file", clattn_context_tuning_file(ctx), true);
  cli_json_str("tuning_path", clattn_context_tuning_path(ctx), true);
  cli_json_str("tuning_problems", clattn_context_tuning_problems(ctx), true);
  printf("\"params\":[");
  for (size_t i = 0; i < clattn_tuning_count(); i++) {
    const clattn_tuning_param *t = clattn_tuning_param_info(i);
    printf("%s{", i ? "," : "");
    cli_json_str("name", t->name, true);
    printf("\"value\":%d,\"lo\":%d,\"hi\":%d,\"pow2\":%s,", clattn_context_tuning_value(ctx, i),
           t->lo, t->hi, cli_json_bool(t->pow2));
    cli_json_str("origin", clattn_context_tuning_origin(ctx, i), true);
    cli_json_str("meaning", t->meaning, false);
    printf("}");
  }
  printf("]}\n");
}

typedef struct show {
  bool params, json;
} show;

static void print_device(cl_uint index, cl_device_id dev, bool is_default, show how) {
  clattn_device_profile p;
  clattn_status s = clattn_device_profile_query(dev, &p);
  if (s != CLATTN_SUCCESS) {
    if (how.json)
      printf("{\"index\":%u,\"error\":\"profile failed\"}\n", index);
    else
      printf("[%u] (profile failed: %s)\n", index, clattn_last_error());
    return;
  }
  /* the tuning as a context on this device sees it (table, override file, clamps) */
  cl_int err = CL_SUCCESS;
  cl_context cl = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  clattn_context *ctx = NULL;
  if (err == CL_SUCCESS) clattn_context_create(cl, dev, NULL, &ctx);
  if (how.json) {
    print_json(index, &p, is_default, ctx);
  } else {
    printf("[%u] %s%s\n", index, p.name, is_default ? "   (default)" : "");
    printf("    platform   %s, driver %s\n", p.platform, p.driver_version);
    printf("    type       %s, vendor %s (0x%04x)\n",
           (p.type & CL_DEVICE_TYPE_GPU) ? "GPU" : (p.type & CL_DEVICE_TYPE_CPU) ? "CPU" : "other",
           p.vendor, p.vendor_id);
    printf("    arch       %s\n", p.arch);
    printf("    units      %u compute units, SIMD width %u, max work-group %zu\n", p.compute_units,
           p.simd_width, p.max_work_group_size);
    printf("    memory    ");
    print_size(" global", p.global_mem_bytes);
    print_size(" (max allocation", p.max_alloc_bytes);
    print_size("), local", p.local_mem_bytes);
    printf("\n    features   fp16 %s, fp64 %s, subgroups %s; fast paths: NVIDIA PTX %s, AMD %s, CPU "
           "prefetch %s, f32 denormals %s\n",
           yes_no(p.has_fp16), yes_no(p.has_fp64), yes_no(p.has_subgroups), yes_no(p.has_nv_ptx),
           yes_no(p.has_amd_builtins), yes_no(p.has_cpu_prefetch), yes_no(p.has_f32_denormals));
    if (ctx) {
      const char *file = clattn_context_tuning_file(ctx), *path = clattn_context_tuning_path(ctx);
      printf("    tuning     %s", clattn_context_tuning_origin(ctx, 0));
      if (file[0])
        printf(" + override file %s", file);
      else
        printf(" (no override file%s%s)", path[0] ? " at " : "", path);
      const char *bad = clattn_context_tuning_problems(ctx);
      if (bad[0]) printf("\n    tuning file problems (ignored):\n      %s", bad);
      if (how.params) {
        printf("; each value, where it came from, what it means [range]:\n");
        print_params(ctx);
      } else {
        print_tuning(ctx);
      }
    } else {
      printf("    tuning     (no context: %s)\n", err != CL_SUCCESS ? "clCreateContext failed"
                                                                    : clattn_last_error());
    }
  }
  clattn_context_release(&ctx);
  if (cl) clReleaseContext(cl);
}

int cli_devices(int argc, char **argv) {
  static const char *usage =
      "clattn devices [flags]\n"
      "\n"
      "Lists every OpenCL platform's devices in the order that CLATTN_DEVICE=<index> and\n"
      "--device <index> refer to (a substring of the platform or device name works too),\n"
      "marks the default (CLATTN_DEVICE, else the first GPU, else the first device),\n"
      "and shows clattn's profile of each device and the tuning it would use: the\n"
      "table row, the override file (clattn tune writes it), the device's limits.";
  const char *only = NULL;
  show how = {false, false};
  cli_flag flags[] = {
      {"device", FLAG_STR, &only, "show only this device (index or name substring)"},
      {"params", FLAG_BOOL, &how.params, "every tuning value, where it came from and its meaning"},
      {"json", FLAG_BOOL, &how.json, "one JSON object per device (profile and every tuning value)"},
  };
  int r = cli_parse(usage, argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
  if (r) return r == 1 ? 0 : 2;

  cl_uint n = 0;
  clattn_status s = clattn_device_count(&n);
  if (s != CLATTN_SUCCESS) return cli_fail("device count", s);
  if (n == 0) {
    fprintf(stderr, "clattn: no OpenCL device found (is an ICD installed? e.g. pocl-opencl-icd)\n");
    return 1;
  }
  cl_device_id def = NULL, pick = NULL;
  const char *env = getenv("CLATTN_DEVICE");
  if (clattn_device_select(env, &def) != CLATTN_SUCCESS)
    printf("note: CLATTN_DEVICE=%s selects nothing: %s\n", env ? env : "", clattn_last_error());
  if (only && clattn_device_select(only, &pick) != CLATTN_SUCCESS)
    return cli_fail("--device", CLATTN_NO_DEVICE);
  if (!how.json)
    printf("OpenCL devices (use the index or a name substring as --device or CLATTN_DEVICE):\n\n");
  for (cl_uint i = 0; i < n; i++) {
    cl_device_id dev = NULL;
    if (clattn_device_get(i, &dev) != CLATTN_SUCCESS) continue;
    if (pick && dev != pick) continue;
    print_device(i, dev, dev == def, how);
    if (!how.json) printf("\n");
  }
  if (!how.json) printf("clattn %s\n", clattn_version(NULL, NULL, NULL));
  return 0;
}
