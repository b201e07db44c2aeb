/* The fake OpenCL runtime of the fuzzer: see fake_cl.h; programs to
 * enqueues in fake_cl_exec.c. Objects are never
 * freed while a call may still name them: a released object stays in the
 * list, marked dead, until the end of the call, so a use after release is
 * reported by name instead of reading freed memory. */
#include "fake_cl_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


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

static const char *kind_name[] = {"?", "platform", "device", "context", "queue",
                                  "buffer", "program", "kernel", "event"};

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
bool fk_known_has(const void *p) {
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

void *fk_new_obj(size_t size, enum kind k) {
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
bool fk_valid(const void *h, enum kind k, const char *fn, const char *what) {
  const obj *o = h;
  if (!o) return false;
  const bool is_static = ((const char *)h >= (const char *)platforms && (const char *)h < (const char *)(platforms + NPROF)) ||
                         ((const char *)h >= (const char *)devices && (const char *)h < (const char *)(devices + NPROF));
  if (!is_static && !fk_known_has(h)) {
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

cl_int fk_retain(void *h, enum kind k, const char *fn) {
  if (!h || !fk_valid(h, k, fn, "the object")) return CL_INVALID_VALUE;
  ((obj *)h)->refs++;
  return CL_SUCCESS;
}
cl_int fk_release(void *h, enum kind k, const char *fn) {
  if (!h) {
    fake_fail("runtime", "%s(NULL)", fn);
    return CL_INVALID_VALUE;
  }
  if (!fk_valid(h, k, fn, "the object")) return CL_INVALID_VALUE;
  ((obj *)h)->refs--;
  return CL_SUCCESS;
}

/* A failure the library should have prevented. */
cl_int fk_misuse(cl_int err, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fake_fail("runtime", "%s (a real runtime returns %d)", msg, (int)err);
  return err;
}

cl_int fk_copy_info(size_t size, void *value, size_t *ret, const void *src, size_t n) {
  if (ret) *ret = n;
  if (value) {
    if (size < n) return CL_INVALID_VALUE;
    memcpy(value, src, n);
  }
  return CL_SUCCESS;
}

/* ------------------------------------------------------------------ the log and the graph */

typedef struct node {
  int ndeps, cap;
  int *deps;
  long created, done_at;
} node;

fake_cmd *fk_cmds;
int fk_ncmds, fk_cap_cmds;
static node *nodes;
static int nnodes, cap_nodes;
long fk_seq;
static cl_mem *created;
static int ncreated_, cap_created;
#define NEVER 0x7fffffffffffffffL

void *fk_grow(void *p, int *cap, int need, size_t elem) {
  if (need <= *cap) return p;
  int c = *cap ? *cap * 2 : 64;
  while (c < need) c *= 2;
  void *q = realloc(p, (size_t)c * elem);
  if (!q) abort();
  memset((char *)q + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
  *cap = c;
  return q;
}

int fk_new_node(void) {
  nodes = fk_grow(nodes, &cap_nodes, nnodes + 1, sizeof *nodes);
  node *n = &nodes[nnodes];
  n->ndeps = 0;
  n->created = fk_seq++;
  n->done_at = NEVER;
  return nnodes++;
}
void fk_add_dep(int n, int d) {
  if (d < 0) return;
  node *x = &nodes[n];
  x->deps = fk_grow(x->deps, &x->cap, x->ndeps + 1, sizeof *x->deps);
  x->deps[x->ndeps++] = d;
}

void fk_mark_done(int n, long t) {
  if (nodes[n].done_at <= t) return;
  nodes[n].done_at = t;
  for (int i = 0; i < nodes[n].ndeps; i++) fk_mark_done(nodes[n].deps[i], t);
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

int fk_live_programs;
static int refused_allocs;
int fake_refused_allocs(void) { return refused_allocs; }
int fake_live_programs(void) { return fk_live_programs; }

int fake_ncmds(void) { return fk_ncmds; }
const fake_cmd *fake_cmd_at(int i) { return &fk_cmds[i]; }
int fake_ncreated(void) { return ncreated_; }
cl_mem fake_created_at(int i) { return created[i]; }
size_t fake_mem_size(cl_mem m) { return m ? m->size : 0; }
cl_context fake_mem_context(cl_mem m) { return m ? m->ctx : NULL; }
bool fake_mem_live(cl_mem m) { return fk_known_has(m) && m->o.magic == MAGIC && m->o.kind == K_MEM && m->o.refs > 0; }

int fake_event_node(cl_event e) {
  if (!fk_known_has(e) || e->o.magic != MAGIC || e->o.kind != K_EVENT) return -1;
  return e->node;
}

static void reset_queues(void) {
  for (obj *o = all; o; o = o->next)
    if (o->kind == K_QUEUE) ((cl_command_queue)o)->last = ((cl_command_queue)o)->barrier = -1;
}

void fake_call_begin(void) {
  init_static();
  for (int i = 0; i < fk_ncmds; i++) free(fk_cmds[i].args);
  fk_ncmds = 0;
  for (int i = 0; i < nnodes; i++) nodes[i].ndeps = 0;
  nnodes = 0;
  fk_seq = 0;
  ncreated_ = 0;
  refused_allocs = 0;
  reset_queues();
  for (obj *o = all; o; o = o->next) o->counted = false;
}

void fake_call_finish(void) {
  /* the commands complete: what they retained is released */
  for (int i = 0; i < fk_ncmds; i++) {
    fake_cmd *c = &fk_cmds[i];
    for (int a = 0; a < c->nargs; a++)
      if (c->args[a].mem) c->args[a].mem->o.refs--;
    if (c->mem) c->mem->o.refs--;
    c->queue->o.refs--;
  }
  for (int i = 0; i < fk_ncmds; i++) free(fk_cmds[i].args);
  fk_ncmds = 0;
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
    return fk_copy_info(param_value_size, param_value, param_value_size_ret, f->max_items,
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
    if (!fk_valid(devs[i], K_DEVICE, __func__, "a device")) {
      *errcode_ret = CL_INVALID_DEVICE;
      return NULL;
    }
  cl_context c = fk_new_obj(sizeof *c, K_CONTEXT);
  c->ndev = num_devices;
  memcpy(c->dev, devs, num_devices * sizeof *devs);
  *errcode_ret = CL_SUCCESS;
  return c;
}

cl_int clRetainContext(cl_context c) { return fk_retain(c, K_CONTEXT, __func__); }
cl_int clReleaseContext(cl_context c) { return fk_release(c, K_CONTEXT, __func__); }

cl_int clGetContextInfo(cl_context c, cl_context_info param_name, size_t param_value_size,
                        void *param_value, size_t *param_value_size_ret) {
  CHECK(c, K_CONTEXT, CL_INVALID_CONTEXT);
  cl_uint u;
  switch (param_name) {
  case CL_CONTEXT_NUM_DEVICES: return INFO(c->ndev);
  case CL_CONTEXT_DEVICES:
    return fk_copy_info(param_value_size, param_value, param_value_size_ret, c->dev,
                     c->ndev * sizeof c->dev[0]);
  case CL_CONTEXT_REFERENCE_COUNT: u = (cl_uint)c->o.refs; return INFO(u);
  }
  return CL_INVALID_VALUE;
}

bool fk_ctx_has(cl_context c, cl_device_id d) {
  for (cl_uint i = 0; i < c->ndev; i++)
    if (c->dev[i] == d) return true;
  return false;
}

cl_command_queue clCreateCommandQueue(cl_context c, cl_device_id d,
                                      cl_command_queue_properties props, cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!c || !fk_valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  if (!d || !fk_valid(d, K_DEVICE, __func__, "device") || !fk_ctx_has(c, d)) {
    *errcode_ret = CL_INVALID_DEVICE;
    return NULL;
  }
  cl_command_queue q = fk_new_obj(sizeof *q, K_QUEUE);
  q->ctx = c;
  q->dev = d;
  q->props = props;
  q->last = q->barrier = -1;
  c->o.refs++;
  *errcode_ret = CL_SUCCESS;
  return q;
}

cl_int clRetainCommandQueue(cl_command_queue q) { return fk_retain(q, K_QUEUE, __func__); }
cl_int clReleaseCommandQueue(cl_command_queue q) {
  cl_int e = fk_release(q, K_QUEUE, __func__);
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
  long t = fk_seq++;
  for (int i = 0; i < fk_ncmds; i++)
    if (fk_cmds[i].queue == q) fk_mark_done(fk_cmds[i].node, t);
  return CL_SUCCESS;
}

/* ------------------------------------------------------------------ buffers */

cl_mem clCreateBuffer(cl_context c, cl_mem_flags flags, size_t size, void *host_ptr,
                      cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!c || !fk_valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  const bool copy = flags & (CL_MEM_COPY_HOST_PTR | CL_MEM_USE_HOST_PTR);
  if (copy != (host_ptr != NULL)) {
    *errcode_ret = fk_misuse(CL_INVALID_HOST_PTR, "clCreateBuffer: host_ptr %s with flags 0x%llx",
                          host_ptr ? "set" : "NULL", (unsigned long long)flags);
    return NULL;
  }
  if (size == 0) {
    *errcode_ret = fk_misuse(CL_INVALID_BUFFER_SIZE, "clCreateBuffer of 0 bytes");
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
  cl_mem m = fk_new_obj(sizeof *m, K_MEM);
  m->ctx = c;
  m->size = size;
  m->flags = flags;
  if (!harness_phase) {
    created = fk_grow(created, &cap_created, ncreated_ + 1, sizeof *created);
    created[ncreated_++] = m;
  }
  *errcode_ret = CL_SUCCESS;
  return m;
}

cl_int clRetainMemObject(cl_mem m) { return fk_retain(m, K_MEM, __func__); }
cl_int clReleaseMemObject(cl_mem m) { return fk_release(m, K_MEM, __func__); }

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

