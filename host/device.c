/* Device enumeration, selection ($CLATTN_DEVICE) and the device profile.
 * Vendor and architecture are classified here, once, from vendor ids and
 * device queries; the operations only ever see the profile. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VENDOR_NVIDIA 0x10DEu
#define VENDOR_AMD 0x1002u
#define VENDOR_INTEL 0x8086u

/* Everything clattn_device_get indexes: platforms in order, devices in order. */
static clattn_status all_devices(cl_device_id *out, cl_uint cap, cl_uint *count) {
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &np);
  if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR: the ICD loader found no platform */ || np == 0) {
    *count = 0;
    return CLATTN_SUCCESS;
  }
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clGetPlatformIDs", "count");
  cl_platform_id plats[16];
  if (np > 16) np = 16;
  err = clGetPlatformIDs(np, plats, NULL);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clGetPlatformIDs", "list");
  cl_uint n = 0;
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS) continue;
    cl_device_id devs[64];
    if (nd > 64) nd = 64;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs, NULL) != CL_SUCCESS) continue;
    for (cl_uint d = 0; d < nd; d++) {
      if (out && n < cap) out[n] = devs[d];
      n++;
    }
  }
  *count = n;
  return CLATTN_SUCCESS;
}

clattn_status clattn_device_count(cl_uint *count) {
  if (!count) return clattn_fail(CLATTN_INVALID_ARGUMENT, "count is NULL");
  return all_devices(NULL, 0, count);
}

clattn_status clattn_device_get(cl_uint index, cl_device_id *device) {
  if (!device) return clattn_fail(CLATTN_INVALID_ARGUMENT, "device is NULL");
  cl_device_id devs[256];
  cl_uint n = 0;
  CLATTN_TRY(all_devices(devs, 256, &n));
  if (index >= n || index >= 256)
    return clattn_fail(CLATTN_NO_DEVICE, "device index %u out of range: only %u OpenCL devices found", index, n);
  *device = devs[index];
  return CLATTN_SUCCESS;
}

static void lower(char *s) {
  for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

clattn_status clattn_device_select(const char *selector, cl_device_id *out) {
  if (!out) return clattn_fail(CLATTN_INVALID_ARGUMENT, "device is NULL");
  cl_device_id devs[256];
  cl_uint n = 0;
  CLATTN_TRY(all_devices(devs, 256, &n));
  if (n > 256) n = 256;
  if (n == 0) return clattn_fail(CLATTN_NO_DEVICE, "no OpenCL platform or device found");
  if (selector && *selector) {
    char *end = NULL;
    long idx = strtol(selector, &end, 10);
    if (end && *end == '\0') {
      if (idx < 0 || (cl_uint)idx >= n)
        return clattn_fail(CLATTN_NO_DEVICE, "device index %ld out of range (%u devices)", idx, n);
      *out = devs[idx];
      return CLATTN_SUCCESS;
    }
    char want[256];
    snprintf(want, sizeof want, "%s", selector);
    lower(want);
    for (cl_uint i = 0; i < n; i++) {
      clattn_device_profile p;
      if (clattn_device_profile_query(devs[i], &p) != CLATTN_SUCCESS) continue;
      char hay[600];
      snprintf(hay, sizeof hay, "%s %s %s", p.platform, p.name, p.vendor);
      lower(hay);
      if (strstr(hay, want)) {
        *out = devs[i];
        return CLATTN_SUCCESS;
      }
    }
    return clattn_fail(CLATTN_NO_DEVICE, "no OpenCL device matches \"%s\"", selector);
  }
  for (cl_uint i = 0; i < n; i++) {
    cl_device_type t = 0;
    clGetDeviceInfo(devs[i], CL_DEVICE_TYPE, sizeof t, &t, NULL);
    if (t & CL_DEVICE_TYPE_GPU) {
      *out = devs[i];
      return CLATTN_SUCCESS;
    }
  }
  *out = devs[0];
  return CLATTN_SUCCESS;
}

static void info_str(cl_device_id d, cl_device_info what, char *buf, size_t size) {
  buf[0] = '\0';
  if (clGetDeviceInfo(d, what, size, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
  buf[size - 1] = '\0';
}

/* Architecture key: the table in params.c matches on its prefixes. */
static void classify(clattn_device_profile *p, cl_device_id d, const char *ext) {
  if (p->vendor_id == VENDOR_NVIDIA || strstr(p->platform, "NVIDIA")) {
    p->simd_width = 32;
    p->has_nv_ptx = strstr(ext, "cl_nv_compiler_options") != NULL;
#ifndef CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
#define CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#endif
    cl_uint major = 0, minor = 0;
    clGetDeviceInfo(d, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof major, &major, NULL);
    clGetDeviceInfo(d, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, sizeof minor, &minor, NULL);
    snprintf(p->arch, sizeof p->arch, "nvidia-sm%u%u", major, minor);
    /* mma.sync m16n8k16 needs sm_80 or newer */
    if (major < 8) p->has_nv_ptx = 0;
  } else if (p->vendor_id == VENDOR_AMD && (p->type & CL_DEVICE_TYPE_GPU)) {
    /* AMD's runtime reports the gfx name as the device name. */
    char gfx[48];
    snprintf(gfx, sizeof gfx, "%.47s", p->name);
    char *colon = strchr(gfx, ':');
    if (colon) *colon = '\0';
    snprintf(p->arch, sizeof p->arch, "amd-%.47s", gfx);
    /* RDNA (gfx10xx, gfx11xx) runs wave32, GCN/CDNA wave64. */
    p->simd_width = (strncmp(gfx, "gfx10", 5) == 0 || strncmp(gfx, "gfx11", 5) == 0) ? 32 : 64;
    p->has_amd_builtins = strncmp(gfx, "gfx", 3) == 0;
  } else if (strstr(p->platform, "Portable Computing Language") || strstr(p->name, "pthread") ||
             strstr(p->name, "cpu-")) {
    snprintf(p->arch, sizeof p->arch, "pocl-%s", (p->type & CL_DEVICE_TYPE_GPU) ? "gpu" : "cpu");
    p->simd_width = 8;
    /* PoCL builds a CPU's kernels with clang for the host, every address
     * space one flat memory: the prefetch builtin is the CPU's own */
    p->has_cpu_prefetch = (p->type & CL_DEVICE_TYPE_CPU) != 0;
  } else if (p->vendor_id == VENDOR_INTEL) {
    snprintf(p->arch, sizeof p->arch, "intel-%s", (p->type & CL_DEVICE_TYPE_GPU) ? "gpu" : "cpu");
    p->simd_width = (p->type & CL_DEVICE_TYPE_GPU) ? 16 : 8;
  } else {
    snprintf(p->arch, sizeof p->arch, "generic");
    p->simd_width = 1;
  }
}

clattn_status clattn_device_profile_query(cl_device_id d, clattn_device_profile *p) {
  if (!d || !p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "device or profile is NULL");
  memset(p, 0, sizeof *p);
  cl_platform_id plat = NULL;
  cl_int err = clGetDeviceInfo(d, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clGetDeviceInfo", "CL_DEVICE_PLATFORM");
  clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof p->platform, p->platform, NULL);
  p->platform[sizeof p->platform - 1] = '\0';
  info_str(d, CL_DEVICE_NAME, p->name, sizeof p->name);
  info_str(d, CL_DEVICE_VENDOR, p->vendor, sizeof p->vendor);
  info_str(d, CL_DRIVER_VERSION, p->driver_version, sizeof p->driver_version);
  clGetDeviceInfo(d, CL_DEVICE_VENDOR_ID, sizeof p->vendor_id, &p->vendor_id, NULL);
  clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof p->type, &p->type, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof p->compute_units, &p->compute_units, NULL);
  clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof p->local_mem_bytes, &p->local_mem_bytes, NULL);
  clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof p->global_mem_bytes, &p->global_mem_bytes,
                  NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof p->max_alloc_bytes, &p->max_alloc_bytes,
                  NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof p->max_work_group_size,
                  &p->max_work_group_size, NULL);
  size_t ext_size = 0;
  clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_size);
  char *ext = calloc(ext_size + 1, 1);
  if (!ext) return clattn_fail(CLATTN_OUT_OF_MEMORY, "profile: extensions string");
  clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, ext_size, ext, NULL);
  p->has_fp16 = strstr(ext, "cl_khr_fp16") != NULL;
  p->has_fp64 = strstr(ext, "cl_khr_fp64") != NULL;
  /* kernels built without -cl-denorms-are-zero keep f32 denormals where the device has them */
  cl_device_fp_config fp32 = 0;
  p->has_f32_denormals = clGetDeviceInfo(d, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp32, &fp32, NULL) == CL_SUCCESS &&
                         (fp32 & CL_FP_DENORM) != 0;
  p->has_subgroups = strstr(ext, "cl_khr_subgroups") != NULL;
  p->has_int64_atomics = strstr(ext, "cl_khr_int64_base_atomics") == NULL         ? 0
                         : strstr(ext, "cl_khr_int64_extended_atomics") == NULL ? 1
                                                                                : 2;
  classify(p, d, ext);
  free(ext);
  return CLATTN_SUCCESS;
}
