/* Which Hopper-only PTX instructions NVIDIA's OpenCL compiler accepts
 * through inline asm (issue #21): each probe is a one-kernel program built
 * on the device; it prints "accepted" or the build log's first lines, and
 * runs the accepted ones that need no operands set up (one work-group of
 * 128) to see that they do not fault. The driver's PTX target decides:
 * instructions of sm_90a (wgmma, setmaxnreg) need the "a" target, which an
 * OpenCL build does not get (H200, driver 580: ".target sm_90", also with
 * -cl-nv-arch sm_90a). The last probes take the other route: the PTX of a
 * built kernel, edited to `.target sm_90a` (and wgmma put in), loaded back
 * with clCreateProgramWithBinary (H200: built and ran).
 *   cc -O2 -o /tmp/ptx_probe tools/ptx_probe.c -lOpenCL
 *   /tmp/ptx_probe [device substring, default NVIDIA] [build options, e.g.
 *   "-cl-nv-arch sm_90a"] */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct probe {
  const char *name, *body; /* body: statements of a kernel taking __global uint *out */
  int run;                 /* safe to launch as is */
} probe;

/* Shared-memory operands are 32-bit addresses of __local variables. */
#define SH(x) "\"r\"((uint)(size_t)(" x "))"
static const probe probes[] = {
    {"mov %cluster_ctarank (sm_90)",
     "uint r; asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(r)); out[get_global_id(0)] = r;", 1},
    {"elect.sync (sm_90)",
     "uint p; asm volatile(\"{.reg .pred q; .reg .b32 r; elect.sync r|q, 0xffffffff; selp.u32 %0, 1, 0, q;}\""
     " : \"=r\"(p)); out[get_global_id(0)] = p;",
     1},
    {"griddepcontrol.wait (sm_90)", "asm volatile(\"griddepcontrol.wait;\"); out[get_global_id(0)] = 1;", 1},
    {"fence.proxy.async.shared::cta (sm_90)",
     "asm volatile(\"fence.proxy.async.shared::cta;\"); out[get_global_id(0)] = 1;", 1},
    {"mbarrier.try_wait.parity (sm_90)",
     "__local ulong bar; uint ok = 0;"
     " if (get_local_id(0) == 0) asm volatile(\"mbarrier.init.shared.b64 [%0], 1;\" :: " SH("&bar") ");"
     " barrier(CLK_LOCAL_MEM_FENCE);"
     " if (get_local_id(0) == 0) asm volatile(\"{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 1;"
     " selp.u32 %0, 1, 0, p;}\" : \"=r\"(ok) : " SH("&bar") ");"
     " out[get_global_id(0)] = ok;",
     1},
    {"stmatrix.m8n8.x1 (sm_90)",
     "__local uint4 t4[32]; __local ushort *t = (__local ushort *)t4; /* rows 16-byte aligned */"
     " asm volatile(\"stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\" :: "
     SH("t + (get_local_id(0) % 8) * 8") ", \"r\"(0x3c003c00u));"
     " barrier(CLK_LOCAL_MEM_FENCE); out[get_global_id(0)] = t[get_local_id(0) % 64];",
     1},
    {"cp.async.bulk global -> shared (sm_90)",
     "__local uint4 t[8]; __local ulong bar; uint busy = 1;"
     " if (get_local_id(0) == 0) {"
     "  asm volatile(\"mbarrier.init.shared.b64 [%0], 1;\" :: " SH("&bar") ");"
     "  asm volatile(\"mbarrier.arrive.expect_tx.shared.b64 _, [%0], 128;\" :: " SH("&bar") ");"
     "  asm volatile(\"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 128, [%2];\""
     "   :: " SH("t") ", \"l\"(out + 1024), " SH("&bar") ");"
     "  do asm volatile(\"{.reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 0, 1, p;}\""
     "   : \"=r\"(busy) : " SH("&bar") "); while (busy);"
     " }"
     " barrier(CLK_LOCAL_MEM_FENCE); out[get_global_id(0)] = t[get_local_id(0) % 8].x;",
     1},
    {"cp.async.bulk.tensor.2d (sm_90; needs a tensor map)",
     "__local uint4 t[8]; __local ulong bar; if (get_global_id(0) == 12345678)"
     " asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
     " [%0], [%1, {%2, %3}], [%4];\" :: " SH("t") ", \"l\"(out), \"r\"(0), \"r\"(0), " SH("&bar") ");"
     " out[get_global_id(0)] = 1;",
     0},
    {"setmaxnreg.inc (sm_90a)", "asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\"); out[get_global_id(0)] = 1;", 0},
    {"wgmma.fence (sm_90a)", "asm volatile(\"wgmma.fence.sync.aligned;\"); out[get_global_id(0)] = 1;", 0},
    {"wgmma.mma_async m64n8k16 f32.f16.f16 (sm_90a)",
     "float d0 = 0, d1 = 0, d2 = 0, d3 = 0; ulong da = 0, db = 0; if (get_global_id(0) == 12345678) {"
     " asm volatile(\"wgmma.fence.sync.aligned;\");"
     " asm volatile(\"wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\""
     "  : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3) : \"l\"(da), \"l\"(db));"
     " asm volatile(\"wgmma.commit_group.sync.aligned;\"); asm volatile(\"wgmma.wait_group.sync.aligned 0;\"); }"
     " out[get_global_id(0)] = (uint)(d0 + d1 + d2 + d3);",
     0},
};
#undef SH

/* The PTX route around the OpenCL compiler's target: a kernel built from
 * source with a marker in an inline asm, its PTX (NVIDIA's program binary)
 * edited (the marker replaced by `insn`, the target by `target`) and loaded
 * back with clCreateProgramWithBinary, then run. */
static void probe_binary(cl_device_id dev, const char *what, const char *insn, const char *target) {
  static const char *src = "__kernel void probe(__global uint *out) {\n"
                           "  asm volatile(\"// CLATTN_PROBE_SLOT\");\n"
                           "  out[get_global_id(0)] = 7;\n}\n";
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  size_t n = 0;
  if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS ||
      clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || !n) {
    printf("%-52s the marker kernel did not build\n", what);
    return;
  }
  char *ptx = malloc(n + 1), *edited = malloc(n + 1024);
  clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptx, &ptx, NULL);
  ptx[n] = 0;
  clReleaseProgram(prog);
  /* copy, replacing the marker and the .target line's architecture */
  char *o = edited;
  for (const char *c = ptx; *c;) {
    if (!strncmp(c, "// CLATTN_PROBE_SLOT", 20)) {
      o += sprintf(o, "%s", insn);
      c += 20;
    } else if (!strncmp(c, ".target sm_90", 13)) {
      o += sprintf(o, ".target %s", target);
      c += 13;
    } else {
      *o++ = *c++;
    }
  }
  *o = 0;
  const size_t len = strlen(edited);
  const unsigned char *bin = (const unsigned char *)edited;
  cl_int st = 0;
  prog = clCreateProgramWithBinary(ctx, 1, &dev, &len, &bin, &st, &err);
  const char *res = "built and ran";
  cl_uint got = 0;
  if (err != CL_SUCCESS || st != CL_SUCCESS) {
    res = "binary refused";
  } else if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
    char log[1024] = "";
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    for (char *c = log; *c; c++)
      if (*c == '\n') *c = ' ';
    printf("%-52s rejected: %.300s\n", what, log);
    res = NULL;
  } else {
    cl_kernel k = clCreateKernel(prog, "probe", &err);
    clSetKernelArg(k, 0, sizeof out, &out);
    const size_t g = 128, l = 128;
    err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clEnqueueReadBuffer(q, out, CL_TRUE, 0, 4, &got, 0, NULL, NULL);
    if (err != CL_SUCCESS || got != 7) res = "FAULTED or wrong result";
    clReleaseKernel(k);
  }
  if (res) printf("%-52s %s\n", what, res);
  if (prog) clReleaseProgram(prog);
  free(ptx), free(edited);
  clReleaseMemObject(out);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
}

int main(int argc, char **argv) {
  const char *want = argc > 1 ? argv[1] : "NVIDIA";
  const char *opts = argc > 2 ? argv[2] : "";
  cl_platform_id plats[8];
  cl_uint np = 0;
  clGetPlatformIDs(8, plats, &np);
  cl_device_id dev = NULL;
  char name[256] = "";
  for (cl_uint p = 0; p < np && !dev; p++) {
    cl_device_id ds[8];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 8, ds, &nd) != CL_SUCCESS) continue;
    for (cl_uint d = 0; d < nd && !dev; d++) {
      char pn[256] = "";
      clGetDeviceInfo(ds[d], CL_DEVICE_NAME, sizeof name, name, NULL);
      clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pn, pn, NULL);
      if (strstr(name, want) || strstr(pn, want)) dev = ds[d];
    }
  }
  if (!dev) return fprintf(stderr, "no device matches \"%s\"\n", want), 1;
  char drv[128] = "";
  clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof drv, drv, NULL);
  printf("device: %s, driver %s, build options \"%s\"\n", name, drv, opts);
  cl_int err;
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    /* a context per probe: a fault leaves its context unusable */
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 8192, NULL, &err);
    const cl_uint zero = 0;
    clEnqueueFillBuffer(q, out, &zero, 4, 0, 8192, 0, NULL, NULL);
    char src[4096];
    snprintf(src, sizeof src, "__kernel void probe(__global uint *out) { %s }\n", probes[i].body);
    const char *s = src;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &s, NULL, &err);
    const cl_int built = clBuildProgram(prog, 1, &dev, opts, NULL, NULL);
    if (built != CL_SUCCESS) {
      char log[2048] = "";
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
      for (char *c = log; *c; c++)
        if (*c == '\n') *c = ' ';
      printf("%-52s rejected: %.300s\n", probes[i].name, log);
    } else {
      if (i == 0) { /* NVIDIA's program binary is PTX: its .version and .target
                       lines */
        size_t n = 0;
        clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL);
        unsigned char *bin = n ? malloc(n + 1) : NULL;
        if (bin && clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
          bin[n] = 0;
          for (char *line = strtok((char *)bin, "\n"); line; line = strtok(NULL, "\n"))
            if (!strncmp(line, ".version", 8) || !strncmp(line, ".target", 7)) printf("  PTX %s\n", line);
        }
        free(bin);
      }
      const char *ran = "not run";
      if (probes[i].run) {
        cl_kernel k = clCreateKernel(prog, "probe", &err);
        clSetKernelArg(k, 0, sizeof out, &out);
        const size_t g = 128, l = 128;
        err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL);
        if (err == CL_SUCCESS) err = clFinish(q);
        ran = err == CL_SUCCESS ? "ran" : "FAULTED";
        clReleaseKernel(k);
      }
      printf("%-52s accepted, %s\n", probes[i].name, ran);
    }
    clReleaseProgram(prog);
    clReleaseMemObject(out);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
  }
  if (strstr(name, "NVIDIA") || strstr(name, "H100") || strstr(name, "H200")) {
    probe_binary(dev, "PTX binary, unchanged (sm_90)", "", "sm_90");
    probe_binary(dev, "PTX binary, .target sm_90a", "", "sm_90a");
    probe_binary(dev, "PTX binary sm_90a, wgmma fence/commit/wait",
                 "wgmma.fence.sync.aligned;\n\twgmma.commit_group.sync.aligned;\n\t"
                 "wgmma.wait_group.sync.aligned 0;",
                 "sm_90a");
  }
  return 0;
}
