/*
 * A fake OpenCL runtime for the fuzzer (fake_cl.c): every cl* function the
 * library calls, with no device behind it. Platforms and devices come from a
 * table of profiles (an H200-like sm_90 NVIDIA GPU, an A100, an older NVIDIA
 * without inline PTX, AMD gfx90a and gfx1100, PoCL on a CPU, a small generic
 * device with 32-bit addresses, an Intel GPU); buffers are (context, size)
 * records without storage; programs "build" at once; enqueues record the
 * command (kernel, arguments, sizes, wait list, event) and do nothing else.
 *
 * Every call checks its arguments as the OpenCL 1.2 specification says a
 * runtime may: a call that a real runtime would refuse (a buffer of another
 * context as a kernel argument, a local size that does not divide the
 * global size, a read past a buffer's end, a released object...) is a
 * library defect, reported through fake_fail (class "runtime") rather than
 * returned as an error code the library might swallow. Only a buffer larger
 * than the device allows is an ordinary error (CL_INVALID_BUFFER_SIZE).
 */
#ifndef FAKE_CL_H
#define FAKE_CL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ oracle failures */

/* Reports a defect of class `cls` ("bounds", "runtime", "events", ...) and
 * aborts, unless the class is listed in $FUZZ_SKIP (comma-separated; for
 * fuzzing past a known defect): then it only counts. Defined by the harness. */
void fake_fail(const char *cls, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ profiles */

typedef struct fake_profile {
  const char *key; /* short name for messages: "h200", "gfx90a", ... */
  const char *platform, *name, *vendor, *driver, *extensions;
  cl_uint vendor_id;
  cl_device_type type;
  cl_uint compute_units;
  cl_ulong local_mem, global_mem, max_alloc;
  size_t max_wg, max_items[3];
  size_t max_param;
  cl_uint address_bits, base_align_bits;
  cl_uint cc_major, cc_minor; /* NVIDIA only (CL_DEVICE_COMPUTE_CAPABILITY_*_NV) */
} fake_profile;

int fake_num_profiles(void);
const fake_profile *fake_profile_at(int i);
/* Device `which` (0 or 1: each profile's platform holds two identical devices). */
cl_device_id fake_device(int profile, int which);
const fake_profile *fake_device_profile(cl_device_id d);

/* ------------------------------------------------------------------ phases */

/* Objects made while the harness phase is on belong to the harness (it
 * creates buffers, queues, user events); the others were made by the library. */
void fake_set_harness(bool on);
/* Starts a fresh log for one library call (nothing of an earlier call is kept). */
void fake_call_begin(void);
/* Completes every recorded command (releasing what they retained), then
 * checks that nothing the library made during the call is still alive,
 * programs excepted (they are cached in the clattn context): fails "leak". */
void fake_call_finish(void);

/* ------------------------------------------------------------------ the log */

typedef enum fake_cmd_kind {
  FAKE_NDRANGE = 1,
  FAKE_MARKER,
  FAKE_BARRIER,
  FAKE_READ,
  FAKE_WRITE,
  FAKE_COPY,
  FAKE_FILL,
  FAKE_GEMM, /* CLBlastSgemmBatched */
} fake_cmd_kind;

typedef struct fake_arg {
  size_t size;      /* as given to clSetKernelArg */
  bool local;       /* __local size (value NULL) */
  cl_mem mem;       /* the buffer, when the value is a live cl_mem */
  uint64_t word[64]; /* the value's first 512 bytes as 64-bit words (zero-padded): a
                     * struct of views and scalars fits whole */
} fake_arg;

typedef struct fake_cmd {
  fake_cmd_kind kind;
  int node;                /* its node in the dependency graph */
  cl_command_queue queue;
  char kernel[64];         /* kernel name (NDRANGE), else "" */
  const char *options;     /* build options of the kernel's program (NDRANGE) */
  cl_uint dims;
  size_t global[3], local[3];
  int nargs;
  fake_arg *args;          /* NDRANGE: its arguments; GEMM: pseudo-arguments (buffer, words) */
  cl_mem mem;              /* READ / WRITE / FILL: the buffer; COPY: the source */
  size_t offset, bytes;
} fake_cmd;

int fake_ncmds(void);
const fake_cmd *fake_cmd_at(int i);
/* Buffers the library created during the call, and their sizes. */
int fake_ncreated(void);
cl_mem fake_created_at(int i);

/* Buffers the library asked for beyond the device's allocation limit during the call. */
int fake_refused_allocs(void);
/* Programs alive (the library caches them per context). */
int fake_live_programs(void);

size_t fake_mem_size(cl_mem m);
cl_context fake_mem_context(cl_mem m);
bool fake_mem_live(cl_mem m);

/* ------------------------------------------------------------------ the dependency graph */

/* Node of an event (a command's or a user event's), -1 if not an event. */
int fake_event_node(cl_event e);
/* Whether node a waits (transitively) for node b, or a == b. */
bool fake_depends(int a, int b);
/* Whether node n was known complete on the host (clWaitForEvents, a
 * blocking read or clFinish that covered it) before node `before` was
 * enqueued; before = -1: by now. */
bool fake_host_done(int n, int before);

#endif /* FAKE_CL_H */
