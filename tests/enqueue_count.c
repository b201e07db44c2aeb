/* Counts every command the library enqueues: the clEnqueue* functions it
 * (and CLBlast) call are defined here, in the test executable, so they take
 * precedence over the ICD loader's; each counts, then calls the loader's
 * (dlsym RTLD_NEXT). A failing call must leave the count unchanged. */
#define _GNU_SOURCE
#include "enqueue_count.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_long count;

long enqueue_count(void) { return atomic_load(&count); }

static void *next(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) {
    fprintf(stderr, "enqueue_count: %s not found in the OpenCL library\n", name);
    abort();
  }
  return f;
}

#define FORWARD(ret, name, params, args)                                                     \
  CL_API_ENTRY ret CL_API_CALL name params {                                                 \
    static ret(CL_API_CALL * real) params;                                                   \
    if (!real) real = (ret(CL_API_CALL *) params)next(#name);                                \
    atomic_fetch_add(&count, 1);                                                             \
    return real args;                                                                        \
  }

FORWARD(cl_int, clEnqueueNDRangeKernel,
        (cl_command_queue q, cl_kernel k, cl_uint dims, const size_t *off, const size_t *global,
         const size_t *local, cl_uint nw, const cl_event *w, cl_event *e),
        (q, k, dims, off, global, local, nw, w, e))
FORWARD(cl_int, clEnqueueTask,
        (cl_command_queue q, cl_kernel k, cl_uint nw, const cl_event *w, cl_event *e),
        (q, k, nw, w, e))
FORWARD(cl_int, clEnqueueMarkerWithWaitList,
        (cl_command_queue q, cl_uint nw, const cl_event *w, cl_event *e), (q, nw, w, e))
FORWARD(cl_int, clEnqueueBarrierWithWaitList,
        (cl_command_queue q, cl_uint nw, const cl_event *w, cl_event *e), (q, nw, w, e))
FORWARD(cl_int, clEnqueueReadBuffer,
        (cl_command_queue q, cl_mem m, cl_bool b, size_t off, size_t n, void *p, cl_uint nw,
         const cl_event *w, cl_event *e),
        (q, m, b, off, n, p, nw, w, e))
FORWARD(cl_int, clEnqueueWriteBuffer,
        (cl_command_queue q, cl_mem m, cl_bool b, size_t off, size_t n, const void *p, cl_uint nw,
         const cl_event *w, cl_event *e),
        (q, m, b, off, n, p, nw, w, e))
FORWARD(cl_int, clEnqueueCopyBuffer,
        (cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dof, size_t n, cl_uint nw,
         const cl_event *w, cl_event *e),
        (q, s, d, so, dof, n, nw, w, e))
FORWARD(cl_int, clEnqueueFillBuffer,
        (cl_command_queue q, cl_mem m, const void *pat, size_t ps, size_t off, size_t n,
         cl_uint nw, const cl_event *w, cl_event *e),
        (q, m, pat, ps, off, n, nw, w, e))
