/* Which Hopper-only PTX instructions NVIDIA's OpenCL compiler accepts
 * through inline asm (issue #21): each probe is a one-kernel program built
 * on the device; it prints "accepted" or the build log's first lines, and
 * runs the accepted ones that need no operands set up (one work-group of
 * 128) to see that they do not fault. The driver's PTX target decides:
 * instructions of sm_90a (wgmma, setmaxnreg) need the "a" target, which an
 * OpenCL build does not get (H200, driver 580: ".target sm_90", also with
 * -cl-nv-arch sm_90a). The last probes take the other route: the PTX of a
 * built kernel, edited to `.target sm_90a` (and wgmma put in), loaded back
 * with clCreateProgramWithBinary (H200: built and ran); then a wgmma
 * product checked against the CPU, and the rates of mma.sync and wgmma.
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

/* ---------------------------------------------------------------- the PTX route
 *
 * Around the OpenCL compiler's target: a kernel whose sm_90a instructions
 * are inline asm comments "// CLATTN_PTX <instruction>" (the compiler
 * substitutes their operands' registers) is built from source; its PTX
 * (NVIDIA's program binary) has the markers removed and, with `raise`, the
 * target raised to sm_90a, and is loaded back with
 * clCreateProgramWithBinary. NULL (the log printed) when it does not build. */
static cl_program build_patched(cl_context ctx, cl_device_id dev, const char *src, int raise,
                                const char *what) {
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  size_t n = 0;
  char log[2048] = "";
  if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS ||
      clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || !n) {
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    printf("%-52s the marked kernel did not build: %.400s\n", what, log);
    return NULL;
  }
  char *ptx = malloc(n + 1), *edited = malloc(n + 2);
  clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptx, &ptx, NULL);
  ptx[n] = 0;
  clReleaseProgram(prog);
  char *o = edited;
  for (const char *c = ptx; *c;) {
    if (!strncmp(c, "// CLATTN_PTX ", 14)) {
      c += 14;
    } else if (raise && !strncmp(c, ".target sm_90", 13) && c[13] != 'a') {
      o += sprintf(o, ".target sm_90a");
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
  free(ptx), free(edited);
  if (err != CL_SUCCESS || clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
    if (prog) clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    for (char *c = log; *c; c++)
      if (*c == '\n') *c = ' ';
    printf("%-52s the patched PTX did not build: %.500s\n", what, log);
    if (prog) clReleaseProgram(prog);
    return NULL;
  }
  return prog;
}

/* A context with a profiling queue and an output buffer of `bytes`. */
typedef struct env {
  cl_context ctx;
  cl_command_queue q;
  cl_mem out;
} env;
static env env_make(cl_device_id dev, size_t bytes) {
  cl_int err;
  env e;
  e.ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  e.q = clCreateCommandQueue(e.ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  e.out = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  return e;
}
static void env_release(env *e) {
  clReleaseMemObject(e->out);
  clReleaseCommandQueue(e->q);
  clReleaseContext(e->ctx);
}

/* Launches kernel `name` of prog (argument 0 the output, then the ints
 * given) `reps` times over g work-items in groups of 128; the best time in
 * ns, or -1 when a launch fails. */
static double launch(env *e, cl_program prog, size_t g, int reps, int nargs, const cl_uint *args) {
  cl_int err;
  cl_kernel k = clCreateKernel(prog, "probe", &err);
  clSetKernelArg(k, 0, sizeof e->out, &e->out);
  for (int i = 0; i < nargs; i++) clSetKernelArg(k, (cl_uint)i + 1, sizeof args[i], &args[i]);
  const size_t l = 128;
  double best = 1e30;
  for (int rep = 0; rep < reps; rep++) {
    cl_event ev;
    if ((err = clEnqueueNDRangeKernel(e->q, k, 1, NULL, &g, &l, 0, NULL, &ev)) != CL_SUCCESS) break;
    if ((err = clWaitForEvents(1, &ev)) != CL_SUCCESS) break;
    cl_ulong t0 = 0, t1 = 0;
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    clReleaseEvent(ev);
    if ((double)(t1 - t0) < best) best = (double)(t1 - t0);
  }
  clReleaseKernel(k);
  return err == CL_SUCCESS ? best : -1.0;
}

/* A marked kernel that stores 7 everywhere, with `body` first: built by the
 * route (target raised or not), run, the result read back. */
static void probe_route(cl_device_id dev, const char *what, const char *body, int raise) {
  char src[1024];
  snprintf(src, sizeof src, "__kernel void probe(__global uint *out) {\n  %s\n  out[get_global_id(0)] = 7;\n}\n",
           body);
  env e = env_make(dev, 4096);
  cl_program prog = build_patched(e.ctx, dev, src, raise, what);
  if (prog) {
    cl_uint got = 0;
    const int ok = launch(&e, prog, 128, 1, 0, NULL) >= 0 &&
                   clEnqueueReadBuffer(e.q, e.out, CL_TRUE, 0, 4, &got, 0, NULL, NULL) == CL_SUCCESS && got == 7;
    printf("%-52s %s\n", what, ok ? "built and ran" : "FAULTED or wrong result");
    clReleaseProgram(prog);
  }
  env_release(&e);
}

/* A numeric check of warpgroup MMA: one warpgroup (128 work-items) computes
 * C (64 x 8, f32) = A (64 x 16) B^T (B: 8 x 16), f16 operands in local
 * memory without swizzle. Each 8 x 8 core matrix is 128 contiguous bytes (8
 * rows of 16); A's cores (mi, ki) lie at (2 mi + ki) 128 bytes, B's at ki
 * 128. The descriptors' two byte offsets are the kernel's arguments, so both
 * readings of "leading" and "stride" are tried. */
static const char *wgmma_src =
    "__kernel void probe(__global float *out, uint lbo, uint sbo) {\n"
    "  __local uint4 a4[128], b4[16]; /* 2 KB, 256 B: 16-byte aligned */\n"
    "  __local ushort *a = (__local ushort *)a4, *b = (__local ushort *)b4;\n"
    "  const int l = get_local_id(0);\n"
    "  for (int i = l; i < 64 * 16; i += 128) { /* A[m][k] = (m + 2k) % 7 - 3 */\n"
    "    const int m = i / 16, k = i % 16;\n"
    "    vstore_half((float)((m + 2 * k) % 7 - 3), ((m / 8) * 2 + k / 8) * 64 + (m % 8) * 8 + k % 8,"
    " (__local half *)a);\n"
    "  }\n"
    "  { /* B[n][k] = (3n + k) % 5 - 2 */\n"
    "    const int n = l / 16, k = l % 16;\n"
    "    vstore_half((float)((3 * n + k) % 5 - 2), (k / 8) * 64 + n * 8 + k % 8, (__local half *)b);\n"
    "  }\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  asm volatile(\"fence.proxy.async.shared::cta;\");\n"
    "  const uint sa = (uint)(size_t)a, sb = (uint)(size_t)b;\n"
    "  const ulong hi = ((ulong)((sbo >> 4) & 0x3fff) << 32) | ((ulong)((lbo >> 4) & 0x3fff) << 16);\n"
    "  const ulong da = hi | ((sa & 0x3ffff) >> 4), db = hi | ((sb & 0x3ffff) >> 4);\n"
    "  float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;\n"
    "  asm volatile(\"// CLATTN_PTX {.reg .pred p; setp.ne.b32 p, %6, 0; wgmma.fence.sync.aligned;\"\n"
    "               \" wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\"\n"
    "               \" wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned 0;}\"\n"
    "               : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3) : \"l\"(da), \"l\"(db), \"r\"(1u));\n"
    "  const int w = l / 32, g = (l % 32) / 4, t = l % 4, r = 16 * w + g;\n"
    "  out[r * 8 + 2 * t] = d0; out[r * 8 + 2 * t + 1] = d1;\n"
    "  out[(r + 8) * 8 + 2 * t] = d2; out[(r + 8) * 8 + 2 * t + 1] = d3;\n"
    "}\n";

static void probe_wgmma_gemm(cl_device_id dev) {
  env e = env_make(dev, 64 * 8 * 4);
  cl_program prog = build_patched(e.ctx, dev, wgmma_src, 1, "wgmma GEMM m64n8k16");
  float ref[64 * 8];
  for (int m = 0; m < 64; m++)
    for (int j = 0; j < 8; j++) {
      float acc = 0.0f;
      for (int k = 0; k < 16; k++) acc += (float)((m + 2 * k) % 7 - 3) * (float)((3 * j + k) % 5 - 2);
      ref[m * 8 + j] = acc;
    }
  static const cl_uint offs[][2] = {{128, 256}, {256, 128}};
  for (int v = 0; prog && v < 2; v++) {
    float got[64 * 8];
    if (launch(&e, prog, 128, 1, 2, offs[v]) < 0 ||
        clEnqueueReadBuffer(e.q, e.out, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL) != CL_SUCCESS) {
      printf("wgmma GEMM m64n8k16, LBO %u SBO %u: FAULTED\n", offs[v][0], offs[v][1]);
      break;
    }
    int bad = 0;
    for (int i = 0; i < 64 * 8; i++) bad += got[i] != ref[i];
    printf("wgmma GEMM m64n8k16, LBO %u SBO %u: %d of 512 elements differ from the CPU's (C[0][0..3] %g %g %g "
           "%g, want %g %g %g %g)\n",
           offs[v][0], offs[v][1], bad, got[0], got[1], got[2], got[3], ref[0], ref[1], ref[2], ref[3]);
  }
  if (prog) clReleaseProgram(prog);
  env_release(&e);
}

/* The rate of `flop_per_group` FLOPs per work-group of 128 in kernel `src`
 * (argument: the iterations), 4 groups per unit. */
static void probe_rate(cl_device_id dev, const char *what, const char *src, int raise, double flop_per_iter) {
  env e = env_make(dev, 1 << 20);
  cl_program prog = build_patched(e.ctx, dev, src, raise, what);
  if (!prog) {
    env_release(&e);
    return;
  }
  cl_uint units = 0;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
  const cl_uint iters = 4096;
  const double ns = launch(&e, prog, (size_t)units * 4 * 128, 5, 1, &iters);
  if (ns > 0)
    printf("%-52s %.0f TFLOP/s (%u units, 4 groups of 128 each, %u iterations)\n", what,
           flop_per_iter * iters * units * 4 / ns * 1e-3, units, iters);
  else
    printf("%-52s launch failed\n", what);
  clReleaseProgram(prog);
  env_release(&e);
}

/* Warpgroup MMA m64nNk16 (f16 in, f32 accumulators) from one local tile of
 * zeros, ITER instructions in a row per warpgroup: its rate (no result is
 * checked here; probe_wgmma_gemm checks one product). */
static void probe_wgmma_rate(cl_device_id dev, int N) {
  const int acc = N / 2; /* f32 accumulators per work-item */
  char src[16384], *o = src;
  o += sprintf(o,
               "__kernel void probe(__global float *out, int iters) {\n"
               "  __local uint4 t4[%d]; /* A 64 x 16 and B %d x 16, f16: zeros */\n"
               "  for (int i = get_local_id(0); i < %d; i += 128) t4[i] = (uint4)(0u);\n"
               "  barrier(CLK_LOCAL_MEM_FENCE);\n"
               "  asm volatile(\"fence.proxy.async.shared::cta;\");\n"
               "  const uint sa = (uint)(size_t)t4, sb = sa + 2048;\n"
               "  const ulong hi = ((ulong)(256 >> 4) << 32) | ((ulong)(128 >> 4) << 16);\n"
               "  const ulong da = hi | ((sa & 0x3ffff) >> 4), db = hi | ((sb & 0x3ffff) >> 4);\n"
               "  float d[%d];\n  for (int i = 0; i < %d; i++) d[i] = 0.0f;\n"
               "  asm volatile(\"// CLATTN_PTX wgmma.fence.sync.aligned;\");\n"
               "  for (int it = 0; it < iters; it++)\n"
               "    asm volatile(\"// CLATTN_PTX {.reg .pred p; setp.ne.b32 p, %%%d, 0; "
               "wgmma.mma_async.sync.aligned.m64n%dk16.f32.f16.f16 {",
               128 + N * 2, N, 128 + N * 2, acc, acc, acc + 2, N);
  for (int i = 0; i < acc; i++) o += sprintf(o, "%s%%%d", i ? ", " : "", i);
  o += sprintf(o, "}, %%%d, %%%d, p, 1, 1, 0, 0;}\"\n                 : ", acc, acc + 1);
  for (int i = 0; i < acc; i++) o += sprintf(o, "%s\"+f\"(d[%d])", i ? ", " : "", i);
  o += sprintf(o,
               " : \"l\"(da), \"l\"(db), \"r\"(1u));\n"
               "  asm volatile(\"// CLATTN_PTX wgmma.commit_group.sync.aligned;\");\n"
               "  asm volatile(\"// CLATTN_PTX wgmma.wait_group.sync.aligned 0;\");\n"
               "  float s = 0.0f;\n  for (int i = 0; i < %d; i++) s += d[i];\n"
               "  out[get_global_id(0)] = s;\n}\n",
               acc);
  char what[64];
  snprintf(what, sizeof what, "wgmma rate m64n%dk16", N);
  probe_rate(dev, what, src, 1, 2.0 * 64 * N * 16);
}

/* The same through mma.sync m16n8k16 (what the kernels use now): 4
 * independent products per warp, 4 warps per group. */
static const char *mma_sync_src =
    "__kernel void probe(__global float *out, int iters) {\n"
    "  float4 c[4] = {(float4)(0.0f), (float4)(0.0f), (float4)(0.0f), (float4)(0.0f)};\n"
    "  const uint a0 = get_local_id(0), a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, b0 = a0 ^ 5, b1 = a0 ^ 9;\n"
    "  for (int it = 0; it < iters; it++)\n"
    "    for (int j = 0; j < 4; j++)\n"
    "      asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7},"
    " {%8, %9}, {%0, %1, %2, %3};\" : \"+f\"(c[j].x), \"+f\"(c[j].y), \"+f\"(c[j].z), \"+f\"(c[j].w)"
    " : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
    "  out[get_global_id(0)] = c[0].x + c[1].y + c[2].z + c[3].w;\n}\n";

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
    probe_route(dev, "PTX route, nothing changed (sm_90)", "", 0);
    probe_route(dev, "PTX route, .target sm_90a", "", 1);
    probe_route(dev, "PTX route sm_90a, wgmma fence/commit/wait",
                "asm volatile(\"// CLATTN_PTX wgmma.fence.sync.aligned; wgmma.commit_group.sync.aligned;"
                " wgmma.wait_group.sync.aligned 0;\");",
                1);
    probe_wgmma_gemm(dev);
    probe_rate(dev, "mma.sync m16n8k16 rate", mma_sync_src, 0, 2.0 * 16 * 8 * 16 * 4 * 4);
    for (int n = 64; n <= 256; n *= 2) probe_wgmma_rate(dev, n);
  }
  return 0;
}
