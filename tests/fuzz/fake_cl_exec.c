/* The fake OpenCL runtime, part two: programs and kernels, events, enqueues
 * and CLBlast (see fake_cl.c for the objects and the command log). */
#include "fake_cl_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FAKE_CLBLAST
#include <clblast_c.h>
#endif

/* ------------------------------------------------------------------ programs and kernels */

static cl_program new_program(cl_context c, const char *src, size_t len) {
  cl_program p = fk_new_obj(sizeof *p, K_PROGRAM);
  fk_live_programs++;
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
  if (!c || !fk_valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  if (count == 0 || !strings) {
    *errcode_ret = fk_misuse(CL_INVALID_VALUE, "clCreateProgramWithSource without sources");
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
  if (!c || !fk_valid(c, K_CONTEXT, __func__, "context")) {
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
    if (!devs || !fk_valid(devs[i], K_DEVICE, __func__, "a device") || !fk_ctx_has(p->ctx, devs[i]))
      return fk_misuse(CL_INVALID_DEVICE, "clBuildProgram for a device outside the program's context");
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

cl_int clRetainProgram(cl_program p) { return fk_retain(p, K_PROGRAM, __func__); }
cl_int clReleaseProgram(cl_program p) {
  cl_int e = fk_release(p, K_PROGRAM, __func__);
  if (e == CL_SUCCESS && p->o.refs == 0) p->ctx->o.refs--, fk_live_programs--;
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
  if (!p || !fk_valid(p, K_PROGRAM, __func__, "program")) {
    *errcode_ret = CL_INVALID_PROGRAM;
    return NULL;
  }
  if (!p->built) {
    *errcode_ret = fk_misuse(CL_INVALID_PROGRAM_EXECUTABLE, "clCreateKernel(%s) on an unbuilt program", name);
    return NULL;
  }
  int found = -1;
  for (int i = 0; i < p->nk; i++)
    if (name && strcmp(p->k[i].name, name) == 0) found = i;
  if (found < 0) {
    *errcode_ret = fk_misuse(CL_INVALID_KERNEL_NAME, "clCreateKernel: the program has no kernel %s",
                          name ? name : "(NULL)");
    return NULL;
  }
  cl_kernel k = fk_new_obj(sizeof *k, K_KERNEL);
  k->prog = p;
  k->info = p->k[found];
  p->o.refs++;
  *errcode_ret = CL_SUCCESS;
  return k;
}

cl_int clRetainKernel(cl_kernel k) { return fk_retain(k, K_KERNEL, __func__); }
cl_int clReleaseKernel(cl_kernel k) {
  cl_int e = fk_release(k, K_KERNEL, __func__);
  if (e == CL_SUCCESS && k->o.refs == 0) k->prog->o.refs--;
  return e;
}

static bool is_mem(const void *value, size_t size) {
  if (size != sizeof(cl_mem) || !value) return false;
  const obj *o = *(const obj *const *)value;
  return fk_known_has(o) && o->magic == MAGIC && o->kind == K_MEM;
}

cl_int clSetKernelArg(cl_kernel k, cl_uint index, size_t size, const void *value) {
  CHECK(k, K_KERNEL, CL_INVALID_KERNEL);
  if (index >= MAX_ARGS) return fk_misuse(CL_INVALID_ARG_INDEX, "clSetKernelArg(%s, %u)", k->info.name, index);
  if (size == 0) return fk_misuse(CL_INVALID_ARG_SIZE, "clSetKernelArg(%s, %u) of size 0", k->info.name, index);
  fake_arg *a = &k->arg[index];
  memset(a, 0, sizeof *a);
  a->size = size;
  if (!value) {
    a->local = true;
  } else {
    if (is_mem(value, size)) {
      cl_mem m = *(const cl_mem *)value;
      if (!fk_valid(m, K_MEM, __func__, "a buffer argument")) return CL_INVALID_MEM_OBJECT;
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
  size_t s = fake_profile_at(d->profile)->max_wg;
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
  cl_event e = fk_new_obj(sizeof *e, K_EVENT);
  e->ctx = c;
  e->queue = q;
  e->node = node;
  e->status = q ? CL_QUEUED : CL_SUBMITTED;
  return e;
}

cl_event clCreateUserEvent(cl_context c, cl_int *errcode_ret) {
  cl_int dummy;
  if (!errcode_ret) errcode_ret = &dummy;
  if (!c || !fk_valid(c, K_CONTEXT, __func__, "context")) {
    *errcode_ret = CL_INVALID_CONTEXT;
    return NULL;
  }
  *errcode_ret = CL_SUCCESS;
  return new_event(c, NULL, fk_new_node());
}

cl_int clSetUserEventStatus(cl_event e, cl_int status) {
  CHECK(e, K_EVENT, CL_INVALID_EVENT);
  if (e->queue) return fk_misuse(CL_INVALID_EVENT, "clSetUserEventStatus on a command's event");
  e->status = status;
  return CL_SUCCESS;
}

cl_int clRetainEvent(cl_event e) { return fk_retain(e, K_EVENT, __func__); }
cl_int clReleaseEvent(cl_event e) { return fk_release(e, K_EVENT, __func__); }

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
    return fk_misuse(CL_INVALID_EVENT_WAIT_LIST, "%s: num_events_in_wait_list %u with a %s list", fn, n,
                  list ? "non-NULL" : "NULL");
  for (cl_uint i = 0; i < n; i++) {
    if (!list[i] || !fk_valid(list[i], K_EVENT, fn, "a wait-list event"))
      return fk_misuse(CL_INVALID_EVENT_WAIT_LIST, "%s: wait-list entry %u is not an event", fn, i);
    if (c && list[i]->ctx != c)
      return fk_misuse(CL_INVALID_CONTEXT, "%s: wait-list event %u belongs to another context", fn, i);
  }
  return CL_SUCCESS;
}

cl_int clWaitForEvents(cl_uint n, const cl_event *list) {
  if (n == 0 || !list) return fk_misuse(CL_INVALID_VALUE, "clWaitForEvents with an empty list");
  cl_int e = check_waits(__func__, list[0] && fk_valid(list[0], K_EVENT, __func__, "event 0") ? list[0]->ctx : NULL,
                         n, list);
  if (e != CL_SUCCESS) return e;
  long t = fk_seq++;
  for (cl_uint i = 0; i < n; i++) fk_mark_done(list[i]->node, t);
  return CL_SUCCESS;
}

/* ------------------------------------------------------------------ enqueues */

/* Records a command on q after its wait list (checked by the caller). */
static fake_cmd *record(fake_cmd_kind kind, cl_command_queue q, cl_uint nw, const cl_event *wl,
                        cl_event *event) {
  fk_cmds = fk_grow(fk_cmds, &fk_cap_cmds, fk_ncmds + 1, sizeof *fk_cmds);
  fake_cmd *c = &fk_cmds[fk_ncmds++];
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->queue = q;
  q->o.refs++;
  c->node = fk_new_node();
  for (cl_uint i = 0; i < nw; i++) fk_add_dep(c->node, wl[i]->node);
  const bool in_order = !(q->props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  if (in_order) {
    fk_add_dep(c->node, q->last);
  } else {
    fk_add_dep(c->node, q->barrier);
    /* a marker or barrier without a wait list waits for everything before it */
    if ((kind == FAKE_MARKER || kind == FAKE_BARRIER) && nw == 0)
      for (int i = 0; i < fk_ncmds - 1; i++)
        if (fk_cmds[i].queue == q) fk_add_dep(c->node, fk_cmds[i].node);
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
  const fake_profile *f = fake_profile_at(q->dev->profile);
  if (k->prog->ctx != q->ctx) return fk_misuse(CL_INVALID_CONTEXT, "%s: kernel and queue of different contexts", kn);
  if (dims < 1 || dims > 3) return fk_misuse(CL_INVALID_WORK_DIMENSION, "%s: %u dimensions", kn, dims);
  if (offset) return fk_misuse(CL_INVALID_GLOBAL_OFFSET, "%s: a global offset", kn);
  if (!global) return fk_misuse(CL_INVALID_GLOBAL_WORK_SIZE, "%s: global size NULL", kn);
  const size_t addr_max = f->address_bits == 32 ? 0xffffffffu : SIZE_MAX;
  for (cl_uint i = 0; i < dims; i++) {
    if (global[i] == 0) return fk_misuse(CL_INVALID_GLOBAL_WORK_SIZE, "%s: global size %u is 0", kn, i);
    if (global[i] > addr_max)
      return fk_misuse(CL_INVALID_GLOBAL_WORK_SIZE, "%s: global size %zu (dim %u) past the device's %u-bit size_t", kn,
                    global[i], i, f->address_bits);
  }
  size_t total = 1;
  if (local) {
    for (cl_uint i = 0; i < dims; i++) {
      if (local[i] == 0 || global[i] % local[i])
        return fk_misuse(CL_INVALID_WORK_GROUP_SIZE, "%s: local size %zu does not divide global size %zu (dim %u)",
                      kn, local[i], global[i], i);
      if (local[i] > f->max_items[i])
        return fk_misuse(CL_INVALID_WORK_ITEM_SIZE, "%s: local size %zu past the device's %zu (dim %u)", kn,
                      local[i], f->max_items[i], i);
      total *= local[i];
    }
    if (total > f->max_wg)
      return fk_misuse(CL_INVALID_WORK_GROUP_SIZE, "%s: work-group of %zu past the device's %zu", kn, total, f->max_wg);
  }
  if (k->info.reqd) {
    if (!local) return fk_misuse(CL_INVALID_WORK_GROUP_SIZE, "%s: reqd_work_group_size without a local size", kn);
    if (local[0] != (size_t)k->info.reqd || (dims > 1 && local[1] != 1) || (dims > 2 && local[2] != 1))
      return fk_misuse(CL_INVALID_WORK_GROUP_SIZE, "%s: local size %zu, the kernel requires %ld", kn, local[0],
                    k->info.reqd);
  }
  cl_ulong local_bytes = 0;
  for (int i = 0; i < k->nset; i++) {
    if (!k->set[i]) return fk_misuse(CL_INVALID_KERNEL_ARGS, "%s: argument %d not set (%d set)", kn, i, k->nset);
    const fake_arg *a = &k->arg[i];
    if (a->local) local_bytes += a->size;
    if (a->mem) {
      if (!fk_valid(a->mem, K_MEM, kn, "a buffer argument")) return CL_INVALID_MEM_OBJECT;
      if (a->mem->ctx != q->ctx)
        return fk_misuse(CL_INVALID_MEM_OBJECT, "%s: argument %d is a buffer of another context", kn, i);
    }
  }
  if (local_bytes > f->local_mem)
    return fk_misuse(CL_OUT_OF_RESOURCES, "%s: %llu bytes of __local arguments, the device has %llu", kn,
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
  if (!m || !fk_valid(m, K_MEM, fn, "buffer")) return fk_misuse(CL_INVALID_MEM_OBJECT, "%s: no buffer", fn);
  if (m->ctx != q->ctx) return fk_misuse(CL_INVALID_CONTEXT, "%s: a buffer of another context", fn);
  if (n == 0 || off > m->size || n > m->size - off)
    return fk_misuse(CL_INVALID_VALUE, "%s: bytes [%zu, %zu + %zu) of a buffer of %zu", fn, off, off, n, m->size);
  return CL_SUCCESS;
}

static void host_sync_on(int node) { fk_mark_done(node, fk_seq++); }

cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off, size_t n,
                           void *ptr, cl_uint nw, const cl_event *wl, cl_event *event) {
  CHECK(q, K_QUEUE, CL_INVALID_COMMAND_QUEUE);
  cl_int e = check_range(__func__, q, m, off, n);
  if (e == CL_SUCCESS && !ptr) e = fk_misuse(CL_INVALID_VALUE, "clEnqueueReadBuffer into NULL");
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
  if (e == CL_SUCCESS && !ptr) e = fk_misuse(CL_INVALID_VALUE, "clEnqueueWriteBuffer from NULL");
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
    e = fk_misuse(CL_MEM_COPY_OVERLAP, "clEnqueueCopyBuffer: overlapping ranges");
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
    e = fk_misuse(CL_INVALID_VALUE, "clEnqueueFillBuffer: pattern of %zu bytes, offset %zu, size %zu", psize, off, n);
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
  if (!queue || !fk_valid(*queue, K_QUEUE, __func__, "queue")) return CLBlastInvalidCommandQueue;
  cl_command_queue q = *queue;
  const cl_mem bufs[3] = {a_buffer, b_buffer, c_buffer};
  for (int i = 0; i < 3; i++) {
    if (!bufs[i] || !fk_valid(bufs[i], K_MEM, __func__, "a matrix")) return CLBlastInvalidMatrixA;
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
