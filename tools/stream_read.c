/* Streaming read through OpenCL: the bandwidth a kernel that only reads
 * sees on a device (issue #22's yardstick for PoCL decode). Each work-item
 * sums a contiguous slice of a buffer in float4 loads and writes one float.
 *   cc -O2 -o /tmp/stream_read tools/stream_read.c -lOpenCL
 *   /tmp/stream_read [device substring] [MiB, default 1024] */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *src =
    "__kernel void rd(__global const float4 *x, __global float *out, int per) {\n"
    "  const size_t g = get_global_id(0);\n"
    "  float4 s = (float4)(0.0f);\n"
    "  for (int i = 0; i < per; i++) s += x[g * per + i];\n"
    "  out[g] = s.x + s.y + s.z + s.w;\n"
    "}\n";

int main(int argc, char **argv) {
  const char *want = argc > 1 ? argv[1] : "";
  const size_t mib = argc > 2 ? (size_t)atoi(argv[2]) : 1024;
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
  cl_uint units = 0;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) return fprintf(stderr, "build failed\n"), 1;
  cl_kernel k = clCreateKernel(prog, "rd", &err);
  const size_t bytes = mib << 20, items = (size_t)units * 64, per = bytes / 16 / items;
  cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_ONLY, per * items * 16, NULL, &err);
  cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, items * 4, NULL, &err);
  const float one = 1.0f;
  clEnqueueFillBuffer(q, x, &one, 4, 0, per * items * 16, 0, NULL, NULL);
  const int iper = (int)per;
  clSetKernelArg(k, 0, sizeof x, &x);
  clSetKernelArg(k, 1, sizeof out, &out);
  clSetKernelArg(k, 2, sizeof iper, &iper);
  double best = 0;
  for (int rep = 0; rep < 6; rep++) {
    cl_event e;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, &e);
    clWaitForEvents(1, &e);
    cl_ulong t0, t1;
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    clReleaseEvent(e);
    const double gbs = (double)(per * items * 16) / (double)(t1 - t0);
    if (rep > 0 && gbs > best) best = gbs;
  }
  printf("%s: streaming read %.1f GB/s (%zu MiB, %zu work-items, best of 5)\n", name, best, mib, items);
  return 0;
}
