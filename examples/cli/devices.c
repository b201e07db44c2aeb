/* `clattn devices`: every OpenCL device with the index CLATTN_DEVICE and
 * --device take, the default one, clattn's profile of it and its tuning row. */
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

/* The tuning row as "key=value" pairs, four to a line, in the library's
 * order (fields added later show up without touching this file). */
static void print_tuning(const clattn_context *ctx) {
  for (size_t i = 0; i < clattn_tuning_count(); i++)
    printf("%s%s=%d", i % 4 == 0 ? "\n               " : "  ", clattn_tuning_name(i),
           clattn_context_tuning_value(ctx, i));
  printf("\n");
}

static void print_device(cl_uint index, cl_device_id dev, bool is_default) {
  clattn_device_profile p;
  clattn_status s = clattn_device_profile_query(dev, &p);
  if (s != CLATTN_SUCCESS) {
    printf("[%u] (profile failed: %s)\n", index, clattn_last_error());
    return;
  }
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
  printf("\n    features   fp16 %s, fp64 %s, subgroups %s; fast paths: NVIDIA PTX %s, AMD %s\n",
         yes_no(p.has_fp16), yes_no(p.has_fp64), yes_no(p.has_subgroups), yes_no(p.has_nv_ptx),
         yes_no(p.has_amd_builtins));

  /* the tuning row as a context on this device sees it (table + override file) */
  cl_int err = CL_SUCCESS;
  cl_context cl = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  clattn_context *ctx = NULL;
  if (err == CL_SUCCESS && clattn_context_create(cl, dev, NULL, &ctx) == CLATTN_SUCCESS) {
    const char *file = clattn_context_tuning_file(ctx);
    printf("    tuning     table row for %s%s%s", p.arch, file[0] ? " + override " : " (no override file)",
           file);
    print_tuning(ctx);
  } else {
    printf("    tuning     (no context: %s)\n", err != CL_SUCCESS ? "clCreateContext failed"
                                                                  : clattn_last_error());
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
      "and shows clattn's profile of each device and the tuning row it would use.";
  const char *only = NULL;
  cli_flag flags[] = {
      {"device", FLAG_STR, &only, "show only this device (index or name substring)"},
  };
  int r = cli_parse(usage, argc, argv, flags, 1);
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
  printf("OpenCL devices (use the index or a name substring as --device or CLATTN_DEVICE):\n\n");
  for (cl_uint i = 0; i < n; i++) {
    cl_device_id dev = NULL;
    if (clattn_device_get(i, &dev) != CLATTN_SUCCESS) continue;
    if (pick && dev != pick) continue;
    print_device(i, dev, dev == def);
    printf("\n");
  }
  printf("clattn %d.%d.%d\n", CLATTN_VERSION_MAJOR, CLATTN_VERSION_MINOR, CLATTN_VERSION_PATCH);
  return 0;
}
