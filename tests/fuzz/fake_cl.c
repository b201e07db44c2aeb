/* The fake OpenCL runtime of the fuzzer: see fake_cl.h. Objects are never
 * freed while a call may still name them: a released object stays in the
 * list, marked dead, until the end of the call, so a use after release is
 * reported by name instead of reading freed memory. */
#include "fake_cl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FAKE_CLBLAST
#include <clblast_c.h>
#endif

#ifndef CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
#define CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#endif

/* ------------------------------------------------------------------ profiles */

#define GiB (1ull << 30)
static const fake_profile profiles[] = {
    {"h200", "NVIDIA CUDA", "NVIDIA H200", "NVIDIA Corporation", "580.159.04",
     "cl_khr_global_int32_base_atomics cl_khr_global_int32_extended_atomics "
     "cl_khr_local_int32_base_atomics cl_khr_local_int32_extended_atomics cl_khr_fp64 "
     "cl_khr_3d_image_writes cl_khr_byte_addressable_store cl_khr_icd cl_nv_compiler_options "
     "cl_nv_device_attribute_query cl_nv_pragma_unroll cl_nv_copy_opts "
     "cl_khr_int64_base_atomics cl_khr_int64_extended_atomics",
     0x10DE, CL_DEVICE_TYPE_GPU, 132, 49152, 140 * GiB, 35 * GiB, 1024, {1024, 1024, 64}, 4352,
     64, 4096, 9, 0},
    {"a100", "NVIDIA CUDA", "NVIDIA A100-SXM4-80GB", "NVIDIA Corporation", "535.104.05",
     "cl_khr_fp64 cl_khr_byte_addressable_store cl_khr_icd cl_nv_compiler_options "
     "cl_nv_device_attribute_query cl_nv_pragma_unroll",
     0x10DE, CL_DEVICE_TYPE_GPU, 108, 49152, 80 * GiB, 20 * GiB, 1024, {1024, 1024, 64}, 4352, 64,
     4096, 8, 0},
    {"turing", "NVIDIA CUDA", "NVIDIA T4", "NVIDIA Corporation", "470.82",
     "cl_khr_fp64 cl_khr_byte_addressable_store cl_khr_icd", 0x10DE, CL_DEVICE_TYPE_GPU, 40, 49152,
     16 * GiB, 4 * GiB, 1024, {1024, 1024, 64}, 4352, 64, 4096, 7, 5},
    {"gfx90a", "AMD Accelerated Parallel Processing", "gfx90a:sramecc+:xnack-",
     "Advanced Micro Devices, Inc.", "3590.0 (HSA1.1,LC)",
     "cl_khr_fp64 cl_khr_fp16 cl_khr_subgroups cl_khr_byte_addressable_store "
     "cl_amd_device_attribute_query cl_khr_int64_base_atomics",
     0x1002, CL_DEVICE_TYPE_GPU, 110, 65536, 64 * GiB, 56 * GiB, 256, {1024, 1024, 1024}, 1024, 64,
     1024, 0, 0},
    {"gfx1100", "AMD Accelerated Parallel Processing", "gfx1100", "Advanced Micro Devices, Inc.",
     "3614.0 (HSA1.1,LC)", "cl_khr_fp64 cl_khr_fp16 cl_khr_byte_addressable_store", 0x1002,
     CL_DEVICE_TYPE_GPU, 48, 65536, 24 * GiB, 20 * GiB, 1024, {1024, 1024, 1024}, 1024, 64, 1024,
     0, 0},
    {"pocl", "Portable Computing Language", "pthread-skylake-avx512-Intel(R) Xeon(R) Processor",
     "GenuineIntel", "3.1+debian",
     "cl_khr_byte_addressable_store cl_khr_global_int32_base_atomics cl_khr_3d_image_writes "
     "cl_khr_spir cl_khr_int64_base_atomics cl_khr_int64_extended_atomics cl_khr_fp64",
     0x8086, CL_DEVICE_TYPE_CPU, 2, 2097152, 5 * GiB, 2 * GiB, 4096, {4096, 4096, 4096}, 1024, 64,
     1024, 0, 0},
    /* the smallest limits the specification allows an embedded-profile GPU,
     * 32-bit addresses: global sizes past 2^32 are refused */
    {"tiny", "Generic Platform", "Tiny GPU", "Nobody", "1.0", "", 0x1234, CL_DEVICE_TYPE_GPU, 1,
     1024, 256ull << 20, 64ull << 20, 64, {64, 64, 64}, 256, 32, 64, 0, 0},
    {"intel", "Intel(R) OpenCL Graphics", "Intel(R) UHD Graphics 770", "Intel(R) Corporation",
     "23.17", "cl_khr_fp16 cl_khr_subgroups cl_khr_byte_addressable_store", 0x8086,
     CL_DEVICE_TYPE_GPU, 32, 65536, 16 * GiB, 4 * GiB, 512, {512, 512, 512}, 2048, 64, 1024, 0,
     0},
};
#define NPROF ((int)(sizeof profiles / sizeof profiles[0]))

int fake_num_profiles(void) { return NPROF; }
const fake_profile *fake_profile_at(int i) { return &profiles[i]; }

/* ------------------------------------------------------------------ objects */

enum kind { K_PLATFORM = 1, K_DEVICE, K_CONTEXT, K_QUEUE, K_MEM, K_PROGRAM, K_KERNEL, K_EVENT };
static const char *kind_name[] = {"?", "platform", "device", "context", "queue",
                                  "buffer", "program", "kernel", "event"};
#define MAGIC 0xC1A77E57u

typedef struct obj {
  uint32_t magic;
  enum kind kind;
  int refs;
  bool harness; /* made in the harness phase */
  bool counted; /* made by the library during the current call */
  struct obj *next;
} obj;

struct _cl_platform_id {
  obj o;
  int profile;
};
struct _cl_device_id {
  obj o;
  int profile;
  cl_platform_id platform;
};
struct _cl_context {
  obj o;
  cl_uint ndev;
  cl_device_id dev[4];
};
struct _cl_command_queue {
  obj o;
  cl_context ctx;
  cl_device_id dev;
  cl_command_queue_properties props;
  int last;          /* the call's last node on this queue (-1 none) */
  int barrier;       /* out-of-order: the last barrier's node (-1 none) */
};
struct _cl_mem {
  obj o;
  cl_context ctx;
  size_t size;
  cl_mem_flags flags;
};
typedef struct kinfo {
  char name[64];
  long reqd; /* reqd_work_group_size(X, 1, 1), 0 if none or unknown */
} kinfo;
struct _cl_program {
  obj o;
  cl_context ctx;
  char *source; /* until built */
  char *options;
  bool built;
  int nk;
  kinfo k[16];
};
#define MAX_ARGS 512
struct _cl_kernel {
  obj o;
  cl_program prog;
  kinfo info;
  int nset; /* one past the highest argument set */
  bool set[MAX_ARGS];
  fake_arg arg[MAX_ARGS];
};
struct _cl_event {
  obj o;
  cl_context ctx;
  cl_command_queue queue; /* NULL for a user event */
  int node;
  cl_int status;
};

static struct _cl_platform_id platforms[NPROF];
static struct _cl_device_id devices[NPROF][2];
static obj *all; /* every allocated (non-static) object */
static bool harness_phase;

static void init_static(void) {
  static bool done;
  if (done) return;
  done = true;
  for (int p = 0; p < NPROF; p++) {
    platforms[p] = (struct _cl_platform_id){{MAGIC, K_PLATFORM, 1, true, false, NULL}, p};
    for (int d = 0; d < 2; d++)
      devices[p][d] = (struct _cl_device_id){{MAGIC, K_DEVICE, 1, true, false, NULL}, p, &platforms[p]};
  }
}

cl_device_id fake_device(int profile, int which) {
  init_static();
  return &devices[profile][which & 1];
}
const fake_profile *fake_device_profile(cl_device_id d) { return &profiles[d->profile]; }
void fake_set_harness(bool on) { harness_phase = on; }

/* Addresses of every allocated object: an argument value is a cl_mem only
 * if it is one of them (a long that looks like a pointer is not read). */
static const obj **known;
static size_t known_cap, known_n;
static size_t hash_ptr(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull); }
static void known_put(const obj *o);
static void known_grow(void) {
  const obj **old = known;
  const size_t old_cap = known_cap;
  known_cap = known_cap ? known_cap * 2 : 1024;
  known = calloc(known_cap, sizeof *known);
  known_n = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i] && old[i] != (const obj *)1) known_put(old[i]);
  free(old);
}
static void known_put(const obj *o) {
  if ((known_n + 1) * 2 > known_cap) known_grow();
  size_t i = hash_ptr(o) & (known_cap - 1);
  while (known[i] && known[i] != (const obj *)1) i = (i + 1) & (known_cap - 1);
  known[i] = o;
  known_n++;
}
static bool known_has(const void *p) {
  if (!known_cap || !p) return false;
  for (size_t i = hash_ptr(p) & (known_cap - 1); known[i]; i = (i + 1) & (known_cap - 1))
    if (known[i] == p) return true;
  return false;
}
static void known_del(const obj *o) {
  if (!known_cap) return;
  for (size_t i = hash_ptr(o) & (known_cap - 1); known[i]; i = (i + 1) & (known_cap - 1))
    if (known[i] == o) {
      known[i] = (const obj *)1; /* a tombstone */
      return;
    }
}

static void *new_obj(size_t size, enum kind k) {
  obj *o = calloc(1, size);
  if (!o) return NULL;
  known_put(o);
  o->magic = MAGIC;
  o->kind = k;
  o->refs = 1;
  o->harness = harness_phase;
  o->counted = !harness_phase;
  o->next = all;
  all = o;
  return o;
}

/* A handle must be a live object of its kind: anything else is a library defect. */
static bool valid(const void *h, enum kind k, const char *fn, const char *what) {
  const obj *o = h;
  if (!o) return false;
  const bool is_static = ((const char *)h >= (const char *)platforms && (const char *)h < (const char *)(platforms + NPROF)) ||
                         ((const char *)h >= (const char *)devices && (const char *)h < (const char *)(devices + NPROF));
  if (!is_static && !known_has(h)) {
    fake_fail("runtime", "%s: %s (%p) is no OpenCL object", fn, what, h);
    return false;
  }
  if (o->magic != MAGIC || o->kind != k) {
    fake_fail("runtime", "%s: %s is not a %s", fn, what, kind_name[k]);
    return false;
  }
  if (o->refs <= 0) {
    fake_fail("runtime", "%s: %s is a released %s", fn, what, kind_name[k]);
    return false;
  }
  return true;
}
#define CHECK(h, k, err)                                                                   \
  do {                                                                                     \
    if (!(h)) return (err);                                                                \
    if (!valid((h), (k), __func__, #h)) return (err);                                       \
  } while (0)

static cl_int retain(void *h, enum kind k, const char *fn) {
  if (!h || !valid(h, k, fn, "the object")) return CL_INVALID_VALUE;
  ((obj *)h)->refs++;
  return CL_SUCCESS;
}
static cl_int release(void *h, enum kind k, const char *fn) {
  if (!h) {
    fake_fail("runtime", "%s(NULL)", fn);
    return CL_INVALID_VALUE;
  }
  if (!valid(h, k, fn, "the object")) return CL_INVALID_VALUE;
  ((obj *)h)->refs--;
  return CL_SUCCESS;
}

/* A failure the library should have prevented. */
static cl_int misuse(cl_int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cl_int misuse(cl_int err, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fake_fail("runtime", "%s (a real runtime returns %d)", msg, (int)err);
  return err;
}

static cl_int copy_info(size_t size, void *value, size_t *ret, const void *src, size_t n) {
  if (ret) *ret = n;
  if (value) {
    if (size < n) return CL_INVALID_VALUE;
    memcpy(value, src, n);
  }
  return CL_SUCCESS;
}
#define INFO(x) copy_info(param_value_size, param_value, param_value_size_ret, &(x), sizeof(x))
#define INFO_STR(s) copy_info(param_value_size, param_value, param_value_size_ret, (s), strlen(s) + 1)

/* ------------------------------------------------------------------ the log and the graph */

typedef struct node {
  int ndeps, cap;
  int *deps;
  long created, done_at;
} node;

static fake_cmd *cmds;
static int ncmds, cap_cmds;
static node *nodes;
static int nnodes, cap_nodes;
static long seq;
static cl_mem *created;
static int ncreated_, cap_created;
#define NEVER 0x7fffffffffffffffL

static void *grow(void *p, int *cap, int need, size_t elem) {
  if (need <= *cap) return p;
  int c = *cap ? *cap * 2 : 64;
  while (c < need) c *= 2;
  void *q = realloc(p, (size_t)c * elem);
  if (!q) abort();
  memset((char *)q + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
  *cap = c;
  return q;
}

static int new_node(void) {
  nodes = grow(nodes, &cap_nodes, nnodes + 1, sizeof *nodes);
  node *n = &nodes[nnodes];
  n->ndeps = 0;
  n->created = seq++;
  n->done_at = NEVER;
  return nnodes++;
}
static void add_dep(int n, int d) {
  if (d < 0) return;
  node *x = &nodes[n];
  x->deps = grow(x->deps, &x->cap, x->ndeps + 1, sizeof *x->deps);
  x->deps[x->ndeps++] = d;
}

static void mark_done(int n, long t) {
  if (nodes[n].done_at <= t) return;
  nodes[n].done_at = t;
  for (int i = 0; i < nodes[n].ndeps; i++) mark_done(nodes[n].deps[i], t);
}

bool fake_depends(int a, int b) {
  if (a == b) return true;
  if (a < 0 || b < 0 || a >= nnodes || b >= nnodes) return false;
  /* nodes only depend on earlier ones */
  char *seen = calloc((size_t)nnodes, 1);
  int *stack = malloc(sizeof(int) * (size_t)nnodes);
  int sp = 0;
  bool found = false;
  stack[sp++] = a;
  seen[a] = 1;
  while (sp && !found) {
    int x = stack[--sp];
    for (int i = 0; i < nodes[x].ndeps; i++) {
      int d = nodes[x].deps[i];
      if (d == b) found = true;
      if (!seen[d]) seen[d] = 1, stack[sp++] = d;
    }
  }
  free(seen);
  free(stack);
  return found;
}

bool fake_host_done(int n, int before) {
  if (n < 0 || n >= nnodes) return false;
  if (before < 0) return nodes[n].done_at != NEVER;
  return nodes[n].done_at < nodes[before].created;
}

static int live_programs, refused_allocs;
int fake_refused_allocs(void) { return refused_allocs; }
int fake_live_programs(void) { return live_programs; }

int fake_ncmds(void) { return ncmds; }
const fake_cmd *fake_cmd_at(int i) { return &cmds[i]; }
int fake_ncreated(void) { return ncreated_; }
cl_mem fake_created_at(int i) { return created[i]; }
size_t fake_mem_size(cl_mem m) { return m ? m->size : 0; }
cl_context fake_mem_context(cl_mem m) { return m ? m->ctx : NULL; }
bool fake_mem_live(cl_mem m) { return known_has(m) && m->o.magic == MAGIC && m->o.kind == K_MEM && m->o.refs > 0; }

int fake_event_node(cl_event e) {
  if (!known_has(e) || e->o.magic != MAGIC || e->o.kind != K_EVENT) return -1;
  return e->node;
}

static void reset_queues(void) {
  for (obj *o = all; o; o = o->next)
    if (o->kind == K_QUEUE) ((cl_command_queue)o)->last = ((cl_command_queue)o)->barrier = -1;
}

void fake_call_begin(void) {
  init_static();
  for (int i = 0; i < ncmds; i++) free(cmds[i].args);
  ncmds = 0;
  for (int i = 0; i < nnodes; i++) nodes[i].ndeps = 0;
  nnodes = 0;
  seq = 0;
  ncreated_ = 0;
  refused_allocs = 0;
  reset_queues();
  for (obj *o = all; o; o = o->next) o->counted = false;
}

void fake_call_finish(void) {
  /* the commands complete: what they retained is released */
  for (int i = 0; i < ncmds; i++) {
    fake_cmd *c = &cmds[i];
    for (int a = 0; a < c->nargs; a++)
      if (c->args[a].mem) c->args[a].mem->o.refs--;
    if (c->mem) c->mem->o.refs--;
    c->queue->o.refs--;
  }
  for (int i = 0; i < ncmds; i++) free(cmds[i].args);
  ncmds = 0;
  /* the library's objects of this call must all be gone (programs are cached) */
  for (obj *o = all; o; o = o->next)
    if (o->counted && o->refs > 0 && o->kind != K_PROGRAM) {
      fake_fail("leak", "the library left a %s alive (%d references) after the call",
                kind_name[o->kind], o->refs);
      o->refs = 0;
    }
  /* free the dead */
  for (obj **p = &all; *p;) {
    obj *o = *p;
    if (o->refs <= 0) {
      *p = o->next;
      if (o->kind == K_PROGRAM) {
        free(((cl_program)o)->source);
        free(((cl_program)o)->options);
      }
      known_del(o);
      free(o);
    } else {
      p = &o->next;
    }
  }
  ncreated_ = 0;
}

/* ------------------------------------------------------------------ platforms and devices */

cl_int clGetPlatformIDs(cl_uint num_entries, cl_platform_id *plats, cl_uint *num) {
  init_static();
  if ((num_entries == 0 && plats) || (!plats && !num)) return CL_INVALID_VALUE;
  for (cl_uint i = 0; i < num_entries && i < (cl_uint)NPROF && plats; i++) plats[i] = &platforms[i];
  if (num) *num = NPROF;
  return CL_SUCCESS;
}

cl_int clGetPlatformInfo(cl_platform_id p, cl_platform_info param_name, size_t param_value_size,
                         void *param_value, size_t *param_value_size_ret) {
  CHECK(p, K_PLATFORM, CL_INVALID_PLATFORM);
  const fake_profile *f = &profiles[p->profile];
  switch (param_name) {
  case CL_PLATFORM_NAME: return INFO_STR(f->platform);
  case CL_PLATFORM_VENDOR: return INFO_STR(f->vendor);
  case CL_PLATFORM_VERSION: return INFO_STR("OpenCL 1.2 fake");
  case CL_PLATFORM_PROFILE: return INFO_STR("FULL_PROFILE");
  case CL_PLATFORM_EXTENSIONS: return INFO_STR("");
  }
  return CL_INVALID_VALUE;
}

cl_int clGetDeviceIDs(cl_platform_id p, cl_device_type type, cl_uint num_entries,
                      cl_device_id *devs, cl_uint *num) {
  CHECK(p, K_PLATFORM, CL_INVALID_PLATFORM);
  if ((num_entries == 0 && devs) || (!devs && !num)) return CL_INVALID_VALUE;
  if (!(type & profiles[p->profile].type) && type != CL_DEVICE_TYPE_ALL) return CL_DEVICE_NOT_FOUND;
  for (cl_uint i = 0; i < num_entries && i < 2 && devs; i++) devs[i] = &devices[p->profile][i];
  if (num) *num = 2;
  return CL_SUCCESS;
}

cl_int clGetDeviceInfo(cl_device_id d, cl_device_info param_name, size_t param_value_size,
                       void *param_value, size_t *param_value_size_ret) {
  CHECK(d, K_DEVICE, CL_INVALID_DEVICE);
  const fake_profile *f = &profiles[d->profile];
  cl_uint u;
  cl_ulong l;
  size_t s;
  cl_device_type t;
  cl_bool b;
  switch (param_name) {
  case CL_DEVICE_PLATFORM: return INFO(d->platform);
  case CL_DEVICE_NAME: return INFO_STR(f->name);
  case CL_DEVICE_VENDOR: return INFO_STR(f->vendor);
  case CL_DRIVER_VERSION: return INFO_STR(f->driver);
  case CL_DEVICE_VERSION: return INFO_STR("OpenCL 1.2 fake");
  case CL_DEVICE_OPENCL_C_VERSION: return INFO_STR("OpenCL C 1.2");
  case CL_DEVICE_EXTENSIONS: return INFO_STR(f->extensions);
  case CL_DEVICE_VENDOR_ID: return INFO(f->vendor_id);
  case CL_DEVICE_TYPE: t = f->type; return INFO(t);
  case CL_DEVICE_MAX_COMPUTE_UNITS: return INFO(f->compute_units);
  case CL_DEVICE_LOCAL_MEM_SIZE: return INFO(f->local_mem);
  case CL_DEVICE_GLOBAL_MEM_SIZE: return INFO(f->global_mem);
  case CL_DEVICE_MAX_MEM_ALLOC_SIZE: return INFO(f->max_alloc);
  case CL_DEVICE_MAX_WORK_GROUP_SIZE: return INFO(f->max_wg);
  case CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS: u = 3; return INFO(u);
  case CL_DEVICE_MAX_WORK_ITEM_SIZES:
    return copy_info(param_value_size, param_value, param_value_size_ret, f->max_items,
                     sizeof f->max_items);
  case CL_DEVICE_MAX_PARAMETER_SIZE: return INFO(f->max_param);
  case CL_DEVICE_ADDRESS_BITS: return INFO(f->address_bits);
  case CL_DEVICE_MEM_BASE_ADDR_ALIGN: return INFO(f->base_align_bits);
  case CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE: l = 65536; return INFO(l);
  case CL_DEVICE_GLOBAL_MEM_CACHE_SIZE: l = 50u << 20; return INFO(l);
  case CL_DEVICE_MAX_CLOCK_FREQUENCY: u = 1500; return INFO(u);
  case CL_DEVICE_PROFILING_TIMER_RESOLUTION: s = 1000; return INFO(s);
  case CL_DEVICE_AVAILABLE:
  case CL_DEVICE_COMPILER_AVAILABLE: b = CL_TRUE; return INFO(b);
  case CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV:
    if (f->vendor_id != 0x10DE) return CL_INVALID_VALUE;
    return INFO(f->cc_major);
  case CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV:
    if (f->vendor_id != 0x10DE) return CL_INVALID_VALUE;
    return INFO(f->cc_minor);
  }
  return CL_INVALID_VALUE;
}

cl_int clRetainDevice(cl_device_id d) {
  CHECK(d, K_DEVICE, CL_INVALID_DEVICE);
  return CL_SUCCESS; /* root devices: no reference counting */
}
cl_int clReleaseDevice(cl_device_id d) {
  CHECK(d, K_DEVICE, CL_INVALID_DEVICE);
  return CL_SUCCESS;
}

/* ------------------------------------------------------------------ contexts and queues */

cl_context clCreateContext(const cl_context_properties *props, cl_uint num_devices,
                           const cl_device_id *devs, void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *),
                           void *user_data, cl_int *errcode_ret) {
  (void)props, (void)notify, (void)user_data;
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!devs || num_devices == 0 || num_devices > 4) {
    *errcode_ret = CL_INVALID_VALUE;
    return NULL;
  }
  for (cl_uint i = 0; i < num_devices; i++)
    if (!valid(devs[i], K_DEVICE, __func__, "a device")) {
      *errcode_ret = CL_INVALID_DEVICE;
      return NULL;
    }
  cl_context c = new_obj(sizeof *c, K_CONTEXT);
  c->ndev = num_devices;
  memcpy(c->dev, devs, num_devices * sizeof *devs);
  *errcode_ret = CL_SUCCESS;
  return c;
}

cl_int clRetainContext(cl_context c) { return retain(c, K_CONTEXT, __func__); }
cl_int clReleaseContext(cl_context c) { return release(c, K_CONTEXT, __func__); }

cl_int clGetContextInfo(cl_context c, cl_context_info param_name, size_t param_value_size,
                        void *param_value, size_t *param_value_size_ret) {
  CHECK(c, K_CONTEXT, CL_INVALID_CONTEXT);
  cl_uint u;
  switch (param_name) {
  case CL_CONTEXT_NUM_DEVICES: return INFO(c->ndev);
  case CL_CONTEXT_DEVICES:
    return copy_info(param_value_size, param_value, param_value_size_ret, c->dev,
                     c->ndev * sizeof c->dev[0]);
  case CL_CONTEXT_REFERENCE_COUNT: u = (cl_uint)c->o.refs; return INFO(u);
  }
  return CL_INVALID_VALUE;
}

static bool ctx_has(cl_context c, cl_device_id d) {
  for (cl_uint i = 0; i < c->ndev; i++)
    if (c->dev[i] == d) return true;
  return false;
}

cl_command_queue clCreateCommandQueue(cl_context c, cl_device_id d,
                                      cl_command_queue_properties props, cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!c || !valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  if (!d || !valid(d, K_DEVICE, __func__, "device") || !ctx_has(c, d)) {
    *errcode_ret = CL_INVALID_DEVICE;
    return NULL;
  }
  cl_command_queue q = new_obj(sizeof *q, K_QUEUE);
  q->ctx = c;
  q->dev = d;
  q->props = props;
  q->last = q->barrier = -1;
  c->o.refs++;
  *errcode_ret = CL_SUCCESS;
  return q;
}

cl_int clRetainCommandQueue(cl_command_queue q) { return retain(q, K_QUEUE, __func__); }
cl_int clReleaseCommandQueue(cl_command_queue q) {
  cl_int e = release(q, K_QUEUE, __func__);
  if (e == CL_SUCCESS && q->o.refs == 0) q->ctx->o.refs--;
  return e;
}

cl_int clGetCommandQueueInfo(cl_command_queue q, cl_command_queue_info param_name,
                             size_t param_value_size, void *param_value,
                             size_t *param_value_size_ret) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  cl_uint u;
  switch (param_name) {
  case CL_QUEUE_CONTEXT: return INFO(q->ctx);
  case CL_QUEUE_DEVICE: return INFO(q->dev);
  case CL_QUEUE_PROPERTIES: return INFO(q->props);
  case CL_QUEUE_REFERENCE_COUNT: u = (cl_uint)q->o.refs; return INFO(u);
  }
  return CL_INVALID_VALUE;
}

cl_int clFlush(cl_command_queue q) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  return CL_SUCCESS;
}

cl_int clFinish(cl_command_queue q) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  long t = seq++;
  for (int i = 0; i < ncmds; i++)
    if (cmds[i].queue == q) mark_done(cmds[i].node, t);
  return CL_SUCCESS;
}

/* ------------------------------------------------------------------ buffers */

cl_mem clCreateBuffer(cl_context c, cl_mem_flags flags, size_t size, void *host_ptr,
                      cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!c || !valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  const bool copy = flags & (CL_MEM_COPY_HOST_PTR | CL_MEM_USE_HOST_PTR);
  if (copy != (host_ptr != NULL)) {
    *errcode_ret = misuse(CL_INVALID_HOST_PTR, "clCreateBuffer: host_ptr %s with flags 0x%llx",
                          host_ptr ? "set" : "NULL", (unsigned long long)flags);
    return NULL;
  }
  if (size == 0) {
    *errcode_ret = misuse(CL_INVALID_BUFFER_SIZE, "clCreateBuffer of 0 bytes");
    return NULL;
  }
  if (!harness_phase) {
    cl_ulong most = 0;
    for (cl_uint i = 0; i < c->ndev; i++)
      if (profiles[c->dev[i]->profile].max_alloc > most) most = profiles[c->dev[i]->profile].max_alloc;
    if (size > most) { /* an ordinary failure: the device cannot hold it */
      refused_allocs++;
      *errcode_ret = CL_INVALID_BUFFER_SIZE;
      return NULL;
    }
  }
  if (host_ptr) {
    /* the runtime reads all of host_ptr: touch its ends (all of it when small) */
    volatile const unsigned char *h = host_ptr;
    unsigned sum = h[0] + h[size - 1];
    if (size <= (1u << 16))
      for (size_t i = 0; i < size; i++) sum += h[i];
    (void)sum;
  }
  cl_mem m = new_obj(sizeof *m, K_MEM);
  m->ctx = c;
  m->size = size;
  m->flags = flags;
  if (!harness_phase) {
    created = grow(created, &cap_created, ncreated_ + 1, sizeof *created);
    created[ncreated_++] = m;
  }
  *errcode_ret = CL_SUCCESS;
  return m;
}

cl_int clRetainMemObject(cl_mem m) { return retain(m, K_MEM, __func__); }
cl_int clReleaseMemObject(cl_mem m) { return release(m, K_MEM, __func__); }

cl_int clGetMemObjectInfo(cl_mem m, cl_mem_info param_name, size_t param_value_size,
                          void *param_value, size_t *param_value_size_ret) {
  CHECK(m, K_MEM, CL_INVALID_MEM_OBJECT);
  cl_uint u;
  cl_mem_object_type t = CL_MEM_OBJECT_BUFFER;
  switch (param_name) {
  case CL_MEM_SIZE: return INFO(m->size);
  case CL_MEM_CONTEXT: return INFO(m->ctx);
  case CL_MEM_FLAGS: return INFO(m->flags);
  case CL_MEM_TYPE: return INFO(t);
  case CL_MEM_REFERENCE_COUNT: u = (cl_uint)m->o.refs; return INFO(u);
  }
  return CL_INVALID_VALUE;
}

/* ------------------------------------------------------------------ programs and kernels */

static cl_program new_program(cl_context c, const char *src, size_t len) {
  cl_program p = new_obj(sizeof *p, K_PROGRAM);
  live_programs++;
  p->ctx = c;
  p->source = malloc(len + 1);
  memcpy(p->source, src, len);
  p->source[len] = '\0';
  c->o.refs++;
  return p;
}

cl_program clCreateProgramWithSource(cl_context c, cl_uint count, const char **strings,
                                     const size_t *lengths, cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!c || !valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  if (count == 0 || !strings) {
    *errcode_ret = misuse(CL_INVALID_VALUE, "clCreateProgramWithSource without sources");
    return NULL;
  }
  size_t total = 0;
  for (cl_uint i = 0; i < count; i++) total += lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
  char *all_src = malloc(total + 1), *w = all_src;
  for (cl_uint i = 0; i < count; i++) {
    size_t n = lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
    memcpy(w, strings[i], n);
    w += n;
  }
  cl_program p = new_program(c, all_src, total);
  free(all_src);
  *errcode_ret = CL_SUCCESS;
  return p;
}

cl_program clCreateProgramWithBinary(cl_context c, cl_uint num_devices, const cl_device_id *devs,
                                     const size_t *lengths, const unsigned char **binaries,
                                     cl_int *binary_status, cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  (void)devs;
  if (!c || !valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  /* the disk cache is off in the fuzzer: no binary is ever valid */
  if (binary_status)
    for (cl_uint i = 0; i < num_devices; i++) binary_status[i] = CL_INVALID_BINARY;
  (void)lengths, (void)binaries;
  *errcode_ret = CL_INVALID_BINARY;
  return NULL;
}

/* The value of macro `name` for a build: -Dname=V in the options, else a
 * "#define name V" of the source (the kernels' defaults); 0 if unknown. */
static long macro_value(const char *options, const char *src, const char *name) {
  char pat[80];
  snprintf(pat, sizeof pat, "-D%s=", name);
  const char *s = options ? strstr(options, pat) : NULL;
  if (s) return strtol(s + strlen(pat), NULL, 10);
  snprintf(pat, sizeof pat, "#define %s ", name);
  s = strstr(src, pat);
  if (s) return strtol(s + strlen(pat), NULL, 10);
  return 0;
}

/* Kernel names and their reqd_work_group_size from the source. */
static void scan_kernels(cl_program p) {
  const char *src = p->source;
  p->nk = 0;
  for (const char *s = strstr(src, "__kernel"); s && p->nk < 16; s = strstr(s + 8, "__kernel")) {
    const char *paren = strchr(s, '(');
    const char *v = strstr(s, "void");
    if (!v) break;
    long reqd = 0;
    const char *r = strstr(s, "reqd_work_group_size(");
    if (r && r < v) {
      r += strlen("reqd_work_group_size(");
      char tok[64];
      int n = 0;
      while (r[n] && r[n] != ',' && r[n] != ')' && n < 63) n++;
      memcpy(tok, r, (size_t)n);
      tok[n] = '\0';
      reqd = (tok[0] >= '0' && tok[0] <= '9') ? strtol(tok, NULL, 10) : macro_value(p->options, src, tok);
    }
    (void)paren;
    const char *nm = v + 4;
    while (*nm == ' ' || *nm == '\n' || *nm == '\t') nm++;
    int n = 0;
    while ((nm[n] >= 'a' && nm[n] <= 'z') || (nm[n] >= 'A' && nm[n] <= 'Z') ||
           (nm[n] >= '0' && nm[n] <= '9') || nm[n] == '_')
      n++;
    if (n == 0 || n >= 64) continue;
    bool dup = false;
    for (int i = 0; i < p->nk; i++)
      if ((int)strlen(p->k[i].name) == n && strncmp(p->k[i].name, nm, (size_t)n) == 0) dup = true;
    if (dup) continue;
    memcpy(p->k[p->nk].name, nm, (size_t)n);
    p->k[p->nk].name[n] = '\0';
    p->k[p->nk].reqd = reqd;
    p->nk++;
  }
}

/* The library's -D values must be numbers or dtype names: a negative count,
 * an empty value or "(null)" is a plan gone wrong. */
static void check_options(const char *options) {
  for (const char *s = strstr(options, "-D"); s; s = strstr(s + 2, "-D")) {
    if (s > options && s[-1] != ' ') continue;
    const char *eq = strchr(s, '=');
    const char *sp = strchr(s, ' ');
    if (!eq || (sp && sp < eq)) continue; /* -DNAME without a value */
    const char *v = eq + 1;
    if (*v == ' ' || *v == '\0' || strncmp(v, "(null)", 6) == 0 || (v[0] == '-' && v[1] >= '0' && v[1] <= '9'))
      fake_fail("runtime", "build option %.*s has no sensible value", (int)((sp ? sp : eq + strlen(eq)) - s), s);
  }
}

cl_int clBuildProgram(cl_program p, cl_uint num_devices, const cl_device_id *devs,
                      const char *options, void(CL_CALLBACK *notify)(cl_program, void *),
                      void *user_data) {
  (void)notify, (void)user_data;
  CHECK(p, K_PROGRAM, CL_INVALID_PROGRAM);
  for (cl_uint i = 0; i < num_devices; i++)
    if (!devs || !valid(devs[i], K_DEVICE, __func__, "a device") || !ctx_has(p->ctx, devs[i]))
      return misuse(CL_INVALID_DEVICE, "clBuildProgram for a device outside the program's context");
  free(p->options);
  p->options = strdup(options ? options : "");
  check_options(p->options);
  if (p->source) {
    scan_kernels(p);
    free(p->source); /* the variants are many: keep only what enqueues check */
    p->source = NULL;
  }
  p->built = true;
  return CL_SUCCESS;
}

cl_int clRetainProgram(cl_program p) { return retain(p, K_PROGRAM, __func__); }
cl_int clReleaseProgram(cl_program p) {
  cl_int e = release(p, K_PROGRAM, __func__);
  if (e == CL_SUCCESS && p->o.refs == 0) p->ctx->o.refs--, live_programs--;
  return e;
}

cl_int clGetProgramInfo(cl_program p, cl_program_info param_name, size_t param_value_size,
                        void *param_value, size_t *param_value_size_ret) {
  CHECK(p, K_PROGRAM, CL_INVALID_PROGRAM);
  size_t zero = 0;
  cl_uint u;
  switch (param_name) {
  case CL_PROGRAM_BINARY_SIZES: return INFO(zero); /* no binaries: the disk cache stays empty */
  case CL_PROGRAM_NUM_DEVICES: return INFO(p->ctx->ndev);
  case CL_PROGRAM_CONTEXT: return INFO(p->ctx);
  case CL_PROGRAM_REFERENCE_COUNT: u = (cl_uint)p->o.refs; return INFO(u);
  }
  return CL_INVALID_VALUE;
}

cl_int clGetProgramBuildInfo(cl_program p, cl_device_id d, cl_program_build_info param_name,
                             size_t param_value_size, void *param_value,
                             size_t *param_value_size_ret) {
  CHECK(p, K_PROGRAM, CL_INVALID_PROGRAM);
  CHECK(d, K_DEVICE, CL_INVALID_DEVICE);
  cl_build_status st = p->built ? CL_BUILD_SUCCESS : CL_BUILD_NONE;
  switch (param_name) {
  case CL_PROGRAM_BUILD_LOG: return INFO_STR("");
  case CL_PROGRAM_BUILD_STATUS: return INFO(st);
  case CL_PROGRAM_BUILD_OPTIONS: return INFO_STR(p->options ? p->options : "");
  }
  return CL_INVALID_VALUE;
}

cl_kernel clCreateKernel(cl_program p, const char *name, cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!p || !valid(p, K_PROGRAM, __func__, "program")) {
    *errcode_ret = CL_INVALID_PROGRAM;
    return NULL;
  }
  if (!p->built) {
    *errcode_ret = misuse(CL_INVALID_PROGRAM_EXECUTABLE, "clCreateKernel(%s) on an unbuilt program", name);
    return NULL;
  }
  int found = -1;
  for (int i = 0; i < p->nk; i++)
    if (name && strcmp(p->k[i].name, name) == 0) found = i;
  if (found < 0) {
    *errcode_ret = misuse(CL_INVALID_KERNEL_NAME, "clCreateKernel: the program has no kernel %s",
                          name ? name : "(NULL)");
    return NULL;
  }
  cl_kernel k = new_obj(sizeof *k, K_KERNEL);
  k->prog = p;
  k->info = p->k[found];
  p->o.refs++;
  *errcode_ret = CL_SUCCESS;
  return k;
}

cl_int clRetainKernel(cl_kernel k) { return retain(k, K_KERNEL, __func__); }
cl_int clReleaseKernel(cl_kernel k) {
  cl_int e = release(k, K_KERNEL, __func__);
  if (e == CL_SUCCESS && k->o.refs == 0) k->prog->o.refs--;
  return e;
}

static bool is_mem(const void *value, size_t size) {
  if (size != sizeof(cl_mem) || !value) return false;
  const obj *o = *(const obj *const *)value;
  return known_has(o) && o->magic == MAGIC && o->kind == K_MEM;
}

cl_int clSetKernelArg(cl_kernel k, cl_uint index, size_t size, const void *value) {
  CHECK(k, K_KERNEL, CL_INVALID_KERNEL);
  if (index >= MAX_ARGS) return misuse(CL_INVALID_ARG_INDEX, "clSetKernelArg(%s, %u)", k->info.name, index);
  if (size == 0) return misuse(CL_INVALID_ARG_SIZE, "clSetKernelArg(%s, %u) of size 0", k->info.name, index);
  fake_arg *a = &k->arg[index];
  memset(a, 0, sizeof *a);
  a->size = size;
  if (!value) {
    a->local = true;
  } else {
    if (is_mem(value, size)) {
      cl_mem m = *(const cl_mem *)value;
      if (!valid(m, K_MEM, __func__, "a buffer argument")) return CL_INVALID_MEM_OBJECT;
      a->mem = m;
    }
    memcpy(a->word, value, size < sizeof a->word ? size : sizeof a->word);
  }
  k->set[index] = true;
  if ((int)index + 1 > k->nset) k->nset = (int)index + 1;
  return CL_SUCCESS;
}

cl_int clGetKernelWorkGroupInfo(cl_kernel k, cl_device_id d, cl_kernel_work_group_info param_name,
                                size_t param_value_size, void *param_value,
                                size_t *param_value_size_ret) {
  CHECK(k, K_KERNEL, CL_INVALID_KERNEL);
  CHECK(d, K_DEVICE, CL_INVALID_DEVICE);
  size_t s = profiles[d->profile].max_wg;
  cl_ulong l = 0;
  switch (param_name) {
  case CL_KERNEL_WORK_GROUP_SIZE: return INFO(s);
  case CL_KERNEL_LOCAL_MEM_SIZE: return INFO(l);
  case CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE: s = 32; return INFO(s);
  }
  return CL_INVALID_VALUE;
}

/* ------------------------------------------------------------------ events */

static cl_event new_event(cl_context c, cl_command_queue q, int node) {
  cl_event e = new_obj(sizeof *e, K_EVENT);
  e->ctx = c;
  e->queue = q;
  e->node = node;
  e->status = q ? CL_QUEUED : CL_SUBMITTED;
  return e;
}

cl_event clCreateUserEvent(cl_context c, cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!c || !valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  *errcode_ret = CL_SUCCESS;
  return new_event(c, NULL, new_node());
}

cl_int clSetUserEventStatus(cl_event e, cl_int status) {
  CHECK(e, K_EVENT, CL_INVALID_EVENT);
  if (e->queue) return misuse(CL_INVALID_EVENT, "clSetUserEventStatus on a command's event");
  e->status = status;
  return CL_SUCCESS;
}

cl_int clRetainEvent(cl_event e) { return retain(e, K_EVENT, __func__); }
cl_int clReleaseEvent(cl_event e) { return release(e, K_EVENT, __func__); }

cl_int clGetEventInfo(cl_event e, cl_event_info param_name, size_t param_value_size,
                      void *param_value, size_t *param_value_size_ret) {
  CHECK(e, K_EVENT, CL_INVALID_EVENT);
  cl_uint u;
  cl_command_type t = CL_COMMAND_NDRANGE_KERNEL;
  switch (param_name) {
  case CL_EVENT_CONTEXT: return INFO(e->ctx);
  case CL_EVENT_COMMAND_QUEUE: return INFO(e->queue);
  case CL_EVENT_COMMAND_EXECUTION_STATUS: return INFO(e->status);
  case CL_EVENT_COMMAND_TYPE: return INFO(t);
  case CL_EVENT_REFERENCE_COUNT: u = (cl_uint)e->o.refs; return INFO(u);
  }
  return CL_INVALID_VALUE;
}

static cl_int check_waits(const char *fn, cl_context c, cl_uint n, const cl_event *list) {
  if ((n > 0) != (list != NULL))
    return misuse(CL_INVALID_EVENT_WAIT_LIST, "%s: num_events_in_wait_list %u with a %s list", fn, n,
                  list ? "non-NULL" : "NULL");
  for (cl_uint i = 0; i < n; i++) {
    if (!list[i] || !valid(list[i], K_EVENT, fn, "a wait-list event"))
      return misuse(CL_INVALID_EVENT_WAIT_LIST, "%s: wait-list entry %u is not an event", fn, i);
    if (c && list[i]->ctx != c)
      return misuse(CL_INVALID_CONTEXT, "%s: wait-list event %u belongs to another context", fn, i);
  }
  return CL_SUCCESS;
}

cl_int clWaitForEvents(cl_uint n, const cl_event *list) {
  if (n == 0 || !list) return misuse(CL_INVALID_VALUE, "clWaitForEvents with an empty list");
  cl_int e = check_waits(__func__, list[0] && valid(list[0], K_EVENT, __func__, "event 0") ? list[0]->ctx : NULL,
                         n, list);
  if (e != CL_SUCCESS) return e;
  long t = seq++;
  for (cl_uint i = 0; i < n; i++) mark_done(list[i]->node, t);
  return CL_SUCCESS;
}

/* ------------------------------------------------------------------ enqueues */

/* Records a command on q after its wait list (checked by the caller). */
static fake_cmd *record(fake_cmd_kind kind, cl_command_queue q, cl_uint nw, const cl_event *wl,
                        cl_event *event) {
  cmds = grow(cmds, &cap_cmds, ncmds + 1, sizeof *cmds);
  fake_cmd *c = &cmds[ncmds++];
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->queue = q;
  q->o.refs++;
  c->node = new_node();
  for (cl_uint i = 0; i < nw; i++) add_dep(c->node, wl[i]->node);
  const bool in_order = !(q->props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  if (in_order) {
    add_dep(c->node, q->last);
  } else {
    add_dep(c->node, q->barrier);
    /* a marker or barrier without a wait list waits for everything before it */
    if ((kind == FAKE_MARKER || kind == FAKE_BARRIER) && nw == 0)
      for (int i = 0; i < ncmds - 1; i++)
        if (cmds[i].queue == q) add_dep(c->node, cmds[i].node);
  }
  q->last = c->node;
  if (kind == FAKE_BARRIER) q->barrier = c->node;
  if (event) *event = new_event(q->ctx, q, c->node);
  return c;
}

cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims, const size_t *offset,
                              const size_t *global, const size_t *local, cl_uint nw,
                              const cl_event *wl, cl_event *event) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  CHECK(k, K_KERNEL, CL_INVALID_KERNEL);
  const char *kn = k->info.name;
  const fake_profile *f = &profiles[q->dev->profile];
  if (k->prog->ctx != q->ctx) return misuse(CL_INVALID_CONTEXT, "%s: kernel and queue of different contexts", kn);
  if (dims < 1 || dims > 3) return misuse(CL_INVALID_WORK_DIMENSION, "%s: %u dimensions", kn, dims);
  if (offset) return misuse(CL_INVALID_GLOBAL_OFFSET, "%s: a global offset", kn);
  if (!global) return misuse(CL_INVALID_GLOBAL_WORK_SIZE, "%s: global size NULL", kn);
  const size_t addr_max = f->address_bits == 32 ? 0xffffffffu : SIZE_MAX;
  for (cl_uint i = 0; i < dims; i++) {
    if (global[i] == 0) return misuse(CL_INVALID_GLOBAL_WORK_SIZE, "%s: global size %u is 0", kn, i);
    if (global[i] > addr_max)
      return misuse(CL_INVALID_GLOBAL_WORK_SIZE, "%s: global size %zu (dim %u) past the device's %u-bit size_t", kn,
                    global[i], i, f->address_bits);
  }
  size_t total = 1;
  if (local) {
    for (cl_uint i = 0; i < dims; i++) {
      if (local[i] == 0 || global[i] % local[i])
        return misuse(CL_INVALID_WORK_GROUP_SIZE, "%s: local size %zu does not divide global size %zu (dim %u)",
                      kn, local[i], global[i], i);
      if (local[i] > f->max_items[i])
        return misuse(CL_INVALID_WORK_ITEM_SIZE, "%s: local size %zu past the device's %zu (dim %u)", kn,
                      local[i], f->max_items[i], i);
      total *= local[i];
    }
    if (total > f->max_wg)
      return misuse(CL_INVALID_WORK_GROUP_SIZE, "%s: work-group of %zu past the device's %zu", kn, total, f->max_wg);
  }
  if (k->info.reqd) {
    if (!local) return misuse(CL_INVALID_WORK_GROUP_SIZE, "%s: reqd_work_group_size without a local size", kn);
    if (local[0] != (size_t)k->info.reqd || (dims > 1 && local[1] != 1) || (dims > 2 && local[2] != 1))
      return misuse(CL_INVALID_WORK_GROUP_SIZE, "%s: local size %zu, the kernel requires %ld", kn, local[0],
                    k->info.reqd);
  }
  cl_ulong local_bytes = 0;
  for (int i = 0; i < k->nset; i++) {
    if (!k->set[i]) return misuse(CL_INVALID_KERNEL_ARGS, "%s: argument %d not set (%d set)", kn, i, k->nset);
    const fake_arg *a = &k->arg[i];
    if (a->local) local_bytes += a->size;
    if (a->mem) {
      if (!valid(a->mem, K_MEM, kn, "a buffer argument")) return CL_INVALID_MEM_OBJECT;
      if (a->mem->ctx != q->ctx)
        return misuse(CL_INVALID_MEM_OBJECT, "%s: argument %d is a buffer of another context", kn, i);
    }
  }
  if (local_bytes > f->local_mem)
    return misuse(CL_OUT_OF_RESOURCES, "%s: %llu bytes of __local arguments, the device has %llu", kn,
                  (unsigned long long)local_bytes, (unsigned long long)f->local_mem);
  cl_int e = check_waits(kn, q->ctx, nw, wl);
  if (e != CL_SUCCESS) return e;
  fake_cmd *c = record(FAKE_NDRANGE, q, nw, wl, event);
  snprintf(c->kernel, sizeof c->kernel, "%s", kn);
  c->options = k->prog->options;
  c->dims = dims;
  for (cl_uint i = 0; i < dims; i++) {
    c->global[i] = global[i];
    c->local[i] = local ? local[i] : 0;
  }
  c->nargs = k->nset;
  c->args = malloc(sizeof *c->args * (size_t)(k->nset ? k->nset : 1));
  memcpy(c->args, k->arg, sizeof *c->args * (size_t)k->nset);
  for (int i = 0; i < k->nset; i++)
    if (c->args[i].mem) c->args[i].mem->o.refs++; /* the command holds its buffers */
  return CL_SUCCESS;
}

cl_int clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint nw, const cl_event *wl, cl_event *event) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  cl_int e = check_waits(__func__, q->ctx, nw, wl);
  if (e != CL_SUCCESS) return e;
  record(FAKE_MARKER, q, nw, wl, event);
  return CL_SUCCESS;
}

cl_int clEnqueueBarrierWithWaitList(cl_command_queue q, cl_uint nw, const cl_event *wl, cl_event *event) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  cl_int e = check_waits(__func__, q->ctx, nw, wl);
  if (e != CL_SUCCESS) return e;
  record(FAKE_BARRIER, q, nw, wl, event);
  return CL_SUCCESS;
}

static cl_int check_range(const char *fn, cl_command_queue q, cl_mem m, size_t off, size_t n) {
  if (!m || !valid(m, K_MEM, fn, "buffer")) return misuse(CL_INVALID_MEM_OBJECT, "%s: no buffer", fn);
  if (m->ctx != q->ctx) return misuse(CL_INVALID_CONTEXT, "%s: a buffer of another context", fn);
  if (n == 0 || off > m->size || n > m->size - off)
    return misuse(CL_INVALID_VALUE, "%s: bytes [%zu, %zu + %zu) of a buffer of %zu", fn, off, off, n, m->size);
  return CL_SUCCESS;
}

static void host_sync_on(int node) { mark_done(node, seq++); }

cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off, size_t n,
                           void *ptr, cl_uint nw, const cl_event *wl, cl_event *event) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  cl_int e = check_range(__func__, q, m, off, n);
  if (e == CL_SUCCESS && !ptr) e = misuse(CL_INVALID_VALUE, "clEnqueueReadBuffer into NULL");
  if (e == CL_SUCCESS) e = check_waits(__func__, q->ctx, nw, wl);
  if (e != CL_SUCCESS) return e;
  /* the runtime writes all of ptr: touch its ends (all of it when small) */
  volatile unsigned char *h = ptr;
  h[0] = 0x5a;
  h[n - 1] = 0x5a;
  if (n <= (1u << 16)) memset(ptr, 0x5a, n);
  fake_cmd *c = record(FAKE_READ, q, nw, wl, event);
  c->mem = m;
  m->o.refs++;
  c->offset = off;
  c->bytes = n;
  if (blocking) host_sync_on(c->node);
  return CL_SUCCESS;
}

cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off, size_t n,
                            const void *ptr, cl_uint nw, const cl_event *wl, cl_event *event) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  cl_int e = check_range(__func__, q, m, off, n);
  if (e == CL_SUCCESS && !ptr) e = misuse(CL_INVALID_VALUE, "clEnqueueWriteBuffer from NULL");
  if (e == CL_SUCCESS) e = check_waits(__func__, q->ctx, nw, wl);
  if (e != CL_SUCCESS) return e;
  volatile const unsigned char *h = ptr;
  unsigned sum = h[0] + h[n - 1];
  (void)sum;
  fake_cmd *c = record(FAKE_WRITE, q, nw, wl, event);
  c->mem = m;
  m->o.refs++;
  c->offset = off;
  c->bytes = n;
  if (blocking) host_sync_on(c->node);
  return CL_SUCCESS;
}

cl_int clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, size_t d_o,
                           size_t n, cl_uint nw, const cl_event *wl, cl_event *event) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  cl_int e = check_range(__func__, q, src, so, n);
  if (e == CL_SUCCESS) e = check_range(__func__, q, dst, d_o, n);
  if (e == CL_SUCCESS && src == dst && so < d_o + n && d_o < so + n)
    e = misuse(CL_MEM_COPY_OVERLAP, "clEnqueueCopyBuffer: overlapping ranges");
  if (e == CL_SUCCESS) e = check_waits(__func__, q->ctx, nw, wl);
  if (e != CL_SUCCESS) return e;
  fake_cmd *c = record(FAKE_COPY, q, nw, wl, event);
  c->mem = src;
  src->o.refs++;
  c->offset = so;
  c->bytes = n;
  return CL_SUCCESS;
}

cl_int clEnqueueFillBuffer(cl_command_queue q, cl_mem m, const void *pattern, size_t psize,
                           size_t off, size_t n, cl_uint nw, const cl_event *wl, cl_event *event) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  cl_int e = check_range(__func__, q, m, off, n);
  if (e == CL_SUCCESS && (!pattern || psize == 0 || (psize & (psize - 1)) || psize > 128 || off % psize ||
                          n % psize))
    e = misuse(CL_INVALID_VALUE, "clEnqueueFillBuffer: pattern of %zu bytes, offset %zu, size %zu", psize, off, n);
  if (e == CL_SUCCESS) e = check_waits(__func__, q->ctx, nw, wl);
  if (e != CL_SUCCESS) return e;
  fake_cmd *c = record(FAKE_FILL, q, nw, wl, event);
  c->mem = m;
  m->o.refs++;
  c->offset = off;
  c->bytes = n;
  return CL_SUCCESS;
}

/* ------------------------------------------------------------------ CLBlast */

#ifdef FAKE_CLBLAST
/* Bytes [first, last] of one row-major matrix of rows x cols floats, ld apart. */
static bool matrix_fits(cl_mem m, size_t off, size_t rows, size_t cols, size_t ld, const char *what,
                        size_t batch) {
  if (rows == 0 || cols == 0) return true;
  if (ld < cols) {
    fake_fail("runtime", "CLBlastSgemmBatched: %s[%zu] has leading dimension %zu < %zu columns", what, batch, ld,
              cols);
    return false;
  }
  const unsigned __int128 last = ((unsigned __int128)off + (unsigned __int128)(rows - 1) * ld + cols) * 4;
  if (last > m->size) {
    fake_fail("runtime",
              "CLBlastSgemmBatched: %s[%zu] (offset %zu, %zu x %zu, ld %zu) reaches byte %llu of a buffer of %zu "
              "(CLBlast returns CLBlastInsufficientMemory)",
              what, batch, off, rows, cols, ld, (unsigned long long)last, m->size);
    return false;
  }
  return true;
}

CLBlastStatusCode CLBlastSgemmBatched(const CLBlastLayout layout, const CLBlastTranspose a_transpose,
                                      const CLBlastTranspose b_transpose, const size_t m, const size_t n,
                                      const size_t k, const float *alphas, const cl_mem a_buffer,
                                      const size_t *a_offsets, const size_t a_ld, const cl_mem b_buffer,
                                      const size_t *b_offsets, const size_t b_ld, const float *betas,
                                      cl_mem c_buffer, const size_t *c_offsets, const size_t c_ld,
                                      const size_t batch_count, cl_command_queue *queue, cl_event *event) {
  if (!queue || !valid(*queue, K_QUEUE, __func__, "queue")) return CLBlastInvalidCommandQueue;
  cl_command_queue q = *queue;
  const cl_mem bufs[3] = {a_buffer, b_buffer, c_buffer};
  for (int i = 0; i < 3; i++) {
    if (!bufs[i] || !valid(bufs[i], K_MEM, __func__, "a matrix")) return CLBlastInvalidMatrixA;
    if (bufs[i]->ctx != q->ctx) {
      fake_fail("runtime", "CLBlastSgemmBatched: matrix %c is a buffer of another context", "ABC"[i]);
      return CLBlastInvalidMatrixA;
    }
  }
  if (batch_count == 0) return CLBlastInvalidBatchCount;
  /* batched arrays are read in full: a short array is an overflow ASan sees */
  volatile float sink = 0; (void)sink;
  volatile size_t ssink = 0; (void)ssink;
  for (size_t i = 0; i < batch_count; i++) {
    sink += alphas[i] + betas[i];
    ssink += a_offsets[i] + b_offsets[i] + c_offsets[i];
    /* row-major: A m x k (or k x m transposed), B k x n (or n x k), C m x n */
    const bool ta = a_transpose != CLBlastTransposeNo, tb = b_transpose != CLBlastTransposeNo;
    if (layout != CLBlastLayoutRowMajor) return CLBlastNotImplemented; /* the library uses row-major */
    if (!matrix_fits(a_buffer, a_offsets[i], ta ? k : m, ta ? m : k, a_ld, "A", i)) return CLBlastInsufficientMemoryA;
    if (!matrix_fits(b_buffer, b_offsets[i], tb ? n : k, tb ? k : n, b_ld, "B", i)) return CLBlastInsufficientMemoryB;
    if (!matrix_fits(c_buffer, c_offsets[i], m, n, c_ld, "C", i)) return CLBlastInsufficientMemoryC;
  }
  fake_cmd *c = record(FAKE_GEMM, q, 0, NULL, event);
  snprintf(c->kernel, sizeof c->kernel, "CLBlastSgemmBatched");
  /* pseudo-arguments: each matrix as (buffer, offset of batch 0, ld, then
   * the other batches' offsets less batch 0's), for the harness's checks */
  c->nargs = 3 * 2;
  c->args = calloc((size_t)c->nargs, sizeof *c->args);
  const size_t *offs[3] = {a_offsets, b_offsets, c_offsets};
  const size_t lds[3] = {a_ld, b_ld, c_ld};
  for (int i = 0; i < 3; i++) {
    fake_arg *mem = &c->args[2 * i], *w = &c->args[2 * i + 1];
    mem->size = sizeof(cl_mem);
    mem->mem = bufs[i];
    bufs[i]->o.refs++;
    memcpy(mem->word, &bufs[i], sizeof bufs[i]);
    w->size = sizeof w->word;
    w->word[0] = offs[i][0];
    w->word[1] = lds[i];
    for (size_t b = 1; b < batch_count && b < 7; b++) w->word[1 + b] = offs[i][b] - offs[i][0];
  }
  return CLBlastSuccess;
}

/* Releasing a context that ran the reference clears CLBlast's caches: nothing to do here. */
CLBlastStatusCode CLBlastClearCache(void) { return CLBlastSuccess; }
#endif
