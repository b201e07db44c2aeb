/* The floor under a decode through OpenCL (issue #20): what an empty kernel,
 * and two and four dependent empty kernels back to back, cost when timed as
 * the CLI times an operation (a marker kernel first, commands held behind a
 * user event until all are enqueued, then END(last) - END(marker) from the
 * events' profiling), with each kernel's own START..END and the gaps
 * between them; then the wall time per kernel of 2000 empty kernels
 * enqueued back to back without events (the launch rate an engine sees).
 * The same chains are timed a second way: held not by a user event but
 * behind a kernel that spins for about a millisecond on the device, so that
 * every command is in the device's queue before the marker runs (a user
 * event may keep the commands behind it in the driver until it completes).
 *   cc -O2 -o /tmp/launch_floor tools/launch_floor.c -lOpenCL
 *   /tmp/launch_floor [device substring, default NVIDIA] [repeats, default 50] */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *src =
    "__kernel void empty(__global int *p) { if (p[0] == 12345) p[1] = 0; }\n"
    "__kernel void spin(__global float *p, int n) {\n"
    "  float x = p[2];\n"
    "  for (int i = 0; i < n; i++) x = x * 0.999f + 0.001f;\n"
    "  if (x == 12345.0f) p[3] = x;\n"
    "}\n";

#define CHECK(x)                                                                  \
  do {                                                                            \
    cl_int e_ = (x);                                                              \
    if (e_ != CL_SUCCESS) {                                                       \
      fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)e_); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static cl_device_id pick(const char *want) {
  cl_platform_id ps[8];
  cl_uint np = 0;
  CHECK(clGetPlatformIDs(8, ps, &np));
  for (cl_uint i = 0; i < np; i++) {
    cl_device_id ds[8];
    cl_uint nd = 0;
    if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 8, ds, &nd) != CL_SUCCESS) continue;
    for (cl_uint j = 0; j < nd; j++) {
      char name[256] = "";
      clGetDeviceInfo(ds[j], CL_DEVICE_NAME, sizeof name, name, NULL);
      char vendor[256] = "";
      clGetDeviceInfo(ds[j], CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
      if (strstr(name, want) || strstr(vendor, want)) {
        printf("device: %s (%s)\n", name, vendor);
        return ds[j];
      }
    }
  }
  fprintf(stderr, "no device matching \"%s\"\n", want);
  exit(1);
}

static cl_ulong prof(cl_event e, cl_profiling_info what) {
  cl_ulong t = 0;
  CHECK(clGetEventProfilingInfo(e, what, sizeof t, &t, NULL));
  return t;
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

int main(int argc, char **argv) {
  const char *want = argc > 1 ? argv[1] : "NVIDIA";
  const int reps = argc > 2 ? atoi(argv[2]) : 50;
  cl_device_id dev = pick(want);
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  CHECK(err);
  cl_command_queue qn = clCreateCommandQueue(ctx, dev, 0, &err);
  CHECK(err);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  CHECK(err);
  CHECK(clBuildProgram(prog, 1, &dev, "", NULL, NULL));
  cl_kernel k = clCreateKernel(prog, "empty", &err);
  CHECK(err);
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  CHECK(err);
  CHECK(clSetKernelArg(k, 0, sizeof buf, &buf));
  const size_t g = 128, l = 128;

  cl_kernel sp = clCreateKernel(prog, "spin", &err);
  CHECK(err);
  const int spin_n = 400000;
  CHECK(clSetKernelArg(sp, 0, sizeof buf, &buf));
  CHECK(clSetKernelArg(sp, 1, sizeof spin_n, &spin_n));
  const size_t one = 1;

  /* n dependent kernels after a marker kernel, held by a user event (held =
   * 0, the CLI's hold before session 36, CLATTN_CLI_HOLD=event) or behind
   * the spinning kernel (held = 1, the CLI's hold now) */
  for (int held = 0; held < 2; held++)
  for (int n = 1; n <= 4; n *= 2) {
    double *tot = malloc(sizeof(double) * reps), *own = malloc(sizeof(double) * reps);
    double *gap = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
      cl_event gate = NULL, tick, ev[4], spun = NULL;
      if (held) {
        CHECK(clEnqueueNDRangeKernel(q, sp, 1, NULL, &one, &one, 0, NULL, &spun));
      } else {
        gate = clCreateUserEvent(ctx, &err);
        CHECK(err);
        CHECK(clEnqueueBarrierWithWaitList(q, 1, &gate, NULL));
      }
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, &tick));
      for (int i = 0; i < n; i++) CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, &ev[i]));
      if (gate) CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
      CHECK(clFinish(q));
      tot[r] = (double)(prof(ev[n - 1], CL_PROFILING_COMMAND_END) - prof(tick, CL_PROFILING_COMMAND_END)) * 1e-3;
      own[r] = (double)(prof(ev[0], CL_PROFILING_COMMAND_END) - prof(ev[0], CL_PROFILING_COMMAND_START)) * 1e-3;
      gap[r] = (double)(prof(ev[0], CL_PROFILING_COMMAND_START) - prof(tick, CL_PROFILING_COMMAND_END)) * 1e-3;
      if (r == 0 && n == 1 && held)
        printf("(the spinning kernel: %.0f us)\n",
               (double)(prof(spun, CL_PROFILING_COMMAND_END) - prof(spun, CL_PROFILING_COMMAND_START)) * 1e-3);
      if (spun) clReleaseEvent(spun);
      if (gate) clReleaseEvent(gate);
      clReleaseEvent(tick);
      for (int i = 0; i < n; i++) clReleaseEvent(ev[i]);
    }
    printf("%s, %d empty kernel%s after the marker: END - END(marker) %.1f us (median of %d); "
           "one kernel's START..END %.1f us, END(marker)..START %.1f us\n",
           held ? "behind a spinning kernel" : "held by a user event", n, n > 1 ? "s" : "",
           median(tot, reps), reps, median(own, reps), median(gap, reps));
    free(tot), free(own), free(gap);
  }

  /* the launch rate: 2000 kernels back to back, no events, one wait */
  for (int p = 0; p < 2; p++) {
    cl_command_queue qq = p ? q : qn;
    for (int i = 0; i < 100; i++) CHECK(clEnqueueNDRangeKernel(qq, k, 1, NULL, &g, &l, 0, NULL, NULL));
    CHECK(clFinish(qq));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 2000; i++) CHECK(clEnqueueNDRangeKernel(qq, k, 1, NULL, &g, &l, 0, NULL, NULL));
    CHECK(clFinish(qq));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3) / 2000;
    printf("2000 empty kernels back to back, no events, queue %s profiling: %.2f us each (wall)\n",
           p ? "with" : "without", us);
  }
  clReleaseMemObject(buf), clReleaseKernel(k), clReleaseKernel(sp), clReleaseProgram(prog);
  clReleaseCommandQueue(q), clReleaseCommandQueue(qn), clReleaseContext(ctx);
  return 0;
}
