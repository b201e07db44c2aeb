/* Merging attention states (cl/merge.cl): the public merge and its
 * backward, and the split-K reduce of decode. Every forward launch, public
 * or decode's, goes through launch_forward: one kernel, one launcher. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 16 /* the kernel's limit on NARGS */

/* One partial (or output) as kernel arguments: element offsets and strides. */
typedef struct view {
  cl_mem o;
  int64_t o_off, o_stride[4]; /* b, m, h, d */
  cl_mem lse;
  int64_t lse_off, lse_stride[3]; /* b, h, m */
} view;

/* One forward launch: slot 0 holds n0 parts spaced by (po_split, pl_split),
 * slots 1 .. nslots-1 one part each. */
typedef struct fwd_launch {
  int B, M, H, D, vec;
  clattn_dtype p0dt, pdt, odt;
  int nslots, n0;
  int64_t po_split, pl_split;
  view slot[MAX_SLOTS];
  view out; /* out.lse may be NULL */
  cl_mem q_start;   /* varlen decode's [B + 1] query starts, or NULL */
  int64_t qs_off;   /* their element offset */
  int total_q;      /* packed rows of o */
} fwd_launch;

static view view_of(const clattn_tensor *o, const clattn_tensor *lse) {
  view v;
  memset(&v, 0, sizeof v);
  if (o && clattn_present(o)) {
    v.o = o->buf;
    v.o_off = clattn_elem_offset(o);
    for (int i = 0; i < 4; i++) v.o_stride[i] = o->stride[i];
  }
  if (lse && clattn_present(lse)) {
    v.lse = lse->buf;
    v.lse_off = clattn_elem_offset(lse);
    for (int i = 0; i < 3; i++) v.lse_stride[i] = lse->stride[i];
  }
  return v;
}

/* Slots per launch that fit the device's kernel-argument space (at least
 * 1024 bytes): `fixed` bytes and `fixed_ptrs` pointers, plus `per_slot`
 * bytes and `slot_ptrs` pointers per slot (counted from the kernels'
 * signatures), with room for alignment. */
static int max_slots(const clattn_context *ctx, size_t fixed, size_t fixed_ptrs, size_t per_slot,
                     size_t slot_ptrs) {
  size_t limit = 1024;
  cl_uint bits = 64;
  clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_PARAMETER_SIZE, sizeof limit, &limit, NULL);
  clGetDeviceInfo(ctx->device, CL_DEVICE_ADDRESS_BITS, sizeof bits, &bits, NULL);
  const size_t ptr = bits / 8, margin = 64;
  int s = MAX_SLOTS;
  while (s > 1 && fixed + fixed_ptrs * ptr + (size_t)s * (per_slot + slot_ptrs * ptr) + margin > limit)
    s /= 2;
  return s;
}
/* forward: 6 ints, 2 + 10 + 1 longs, 3 pointers; a slot: 9 longs, 2 pointers */
static int fwd_slots(const clattn_context *ctx) { return max_slots(ctx, 6 * 4 + 13 * 8, 3, 9 * 8, 2); }
/* backward: 4 ints, 18 longs, 5 pointers; a slot and its gradient: 18 longs, 4 pointers */
static int bwd_slots(const clattn_context *ctx) { return max_slots(ctx, 4 * 4 + 18 * 8, 5, 18 * 8, 4); }

/* Lanes per row (a power of two, VEC d each) and rows per work-group. */
static void work_shape(const clattn_context *ctx, int D, int vec, size_t *lanes, size_t *rows) {
  size_t wg = (size_t)ctx->tuning.merge_wg;
  size_t l = (size_t)clattn_pow2_at_least(D > 0 ? (D + vec - 1) / vec : 1);
  if (l > wg) l = wg;
  *lanes = l;
  *rows = wg / l;
}

/* With VEC 4, whether every row of these views starts on a multiple of 4
 * elements of a buffer whose base is 16-byte aligned: the kernel then moves
 * the four as one aligned vector. */
static bool rows_aligned(const clattn_context *ctx, const view *const *v, int n, int64_t split) {
  cl_uint base_bits = 0;
  clGetDeviceInfo(ctx->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof base_bits, &base_bits, NULL);
  if (base_bits < 128 || split % 4) return false;
  for (int i = 0; i < n; i++) {
    if (!v[i]->o) continue;
    if (v[i]->o_off % 4 || v[i]->o_stride[0] % 4 || v[i]->o_stride[1] % 4 || v[i]->o_stride[2] % 4)
      return false;
  }
  return true;
}

static void forward_options(clattn_dtype p0dt, clattn_dtype pdt, clattn_dtype odt, int nargs,
                            int vec, bool aligned, char *buf, size_t size) {
  snprintf(buf, size, "-DP0_DT=%s -DP_DT=%s -DO_DT=%s -DNARGS=%d -DVEC=%d -DALIGNED=%d",
           clattn_dtype_cl(p0dt), clattn_dtype_cl(nargs > 1 ? pdt : CLATTN_F32),
           clattn_dtype_cl(odt), nargs, vec, vec == 4 && aligned);
}

static void arg_view_o(clattn_args *a, const view *v) {
  clattn_arg_mem(a, v->o);
  clattn_arg_long(a, v->o_off);
  for (int i = 0; i < 4; i++) clattn_arg_long(a, v->o_stride[i]);
}
static void arg_view_lse(clattn_args *a, const view *v) {
  clattn_arg_mem(a, v->lse);
  clattn_arg_long(a, v->lse_off);
  for (int i = 0; i < 3; i++) clattn_arg_long(a, v->lse_stride[i]);
}

static clattn_status launch_forward(clattn_context *ctx, cl_command_queue queue,
                                    const fwd_launch *L, cl_uint num_wait, const cl_event *wait,
                                    cl_event *event) {
  const int nargs = clattn_pow2_at_least(L->nslots);
  const view *views[MAX_SLOTS + 1];
  for (int j = 0; j < L->nslots; j++) views[j] = &L->slot[j];
  views[L->nslots] = &L->out;
  const bool aligned = L->vec == 4 && rows_aligned(ctx, views, L->nslots + 1, L->po_split);
  char opts[192];
  forward_options(L->p0dt, L->pdt, L->odt, nargs, L->vec, aligned, opts, sizeof opts);
  static const char *name = "clattn_merge";
  cl_kernel k = NULL;
  CLATTN_TRY(clattn_kernel_get(ctx, "merge.cl", opts, name, &k));
  clattn_args a = clattn_args_begin(k);
  clattn_arg_int(&a, L->M);
  clattn_arg_int(&a, L->H);
  clattn_arg_int(&a, L->D);
  clattn_arg_int(&a, L->nslots);
  clattn_arg_int(&a, L->n0);
  clattn_arg_long(&a, L->po_split);
  clattn_arg_long(&a, L->pl_split);
  for (int j = 0; j < nargs; j++) {
    static const view unused; /* slots past nslots: NULL buffers, never read */
    const view *v = j < L->nslots ? &L->slot[j] : &unused;
    arg_view_o(&a, v);
    arg_view_lse(&a, v);
  }
  arg_view_o(&a, &L->out);
  arg_view_lse(&a, &L->out);
  clattn_arg_mem(&a, L->q_start);
  clattn_arg_long(&a, L->qs_off);
  clattn_arg_int(&a, L->total_q);
  size_t lanes, rows;
  work_shape(ctx, L->D, L->vec, &lanes, &rows);
  const size_t mh = (size_t)L->M * (size_t)L->H;
  size_t local[3] = {lanes, rows, 1};
  size_t global[3] = {lanes, (mh + rows - 1) / rows * rows, (size_t)L->B};
  return clattn_args_launch(ctx, queue, &a, name, 3, global, local, num_wait, wait, event);
}

/* ------------------------------------------------------------------ split-K reduce (internal) */

clattn_status clattn_merge_strided_enqueue(clattn_context *ctx, cl_command_queue queue,
                                           const clattn_merge_strided *m, cl_uint num_wait,
                                           const cl_event *wait, cl_event *event) {
  fwd_launch L;
  memset(&L, 0, sizeof L);
  L.B = m->B;
  L.M = m->M;
  L.H = m->H;
  L.D = m->D;
  L.p0dt = L.pdt = CLATTN_F32;
  L.odt = m->o->dtype;
  L.nslots = 1;
  L.n0 = m->n;
  L.po_split = m->part_o_split_stride;
  L.pl_split = m->part_lse_split_stride;
  L.slot[0].o = m->part_o;
  L.slot[0].o_off = m->part_o_off;
  L.slot[0].lse = m->part_lse;
  L.slot[0].lse_off = m->part_lse_off;
  memcpy(L.slot[0].o_stride, m->part_o_stride, sizeof L.slot[0].o_stride);
  memcpy(L.slot[0].lse_stride, m->part_lse_stride, sizeof L.slot[0].lse_stride);
  L.out = view_of(m->o, m->lse);
  if (m->q_start) {
    L.q_start = m->q_start->buf;
    L.qs_off = clattn_elem_offset(m->q_start);
    L.total_q = m->total_q;
  }
  L.vec = (m->D % 4 == 0 && m->part_o_stride[3] == 1 && m->o->stride[3] == 1) ? 4 : 1;
  return launch_forward(ctx, queue, &L, num_wait, wait, event);
}

/* ------------------------------------------------------------------ checks shared by both directions */

/* A [B, M, H, D] state tensor (`like` NULL: sets the shape) or its [B, H, M] lse. */
static clattn_status check_o(const clattn_context *ctx, const clattn_tensor *t, const char *name,
                             const clattn_tensor *like, const char *like_name) {
  CLATTN_TRY(clattn_check_tensor(ctx, t, name, 4, CLATTN_FLOAT_DTYPES));
  if (like) {
    char what[64];
    snprintf(what, sizeof what, "%s's shape", like_name);
    for (int i = 0; i < 4; i++) CLATTN_TRY(clattn_check_dim(t, name, i, like->shape[i], what));
  }
  return CLATTN_SUCCESS;
}

static clattn_status check_lse(const clattn_context *ctx, const clattn_tensor *t, const char *name,
                               const clattn_tensor *o, const char *o_name) {
  CLATTN_TRY(clattn_check_tensor(ctx, t, name, 3, CLATTN_DT(CLATTN_F32)));
  char what[64];
  static const int from[3] = {0, 2, 1}; /* [B, H, M] against [B, M, H, D] */
  static const char *dims[3] = {"B", "H", "M"};
  for (int i = 0; i < 3; i++) {
    snprintf(what, sizeof what, "%s = %s.shape[%d]", dims[i], o_name, from[i]);
    CLATTN_TRY(clattn_check_dim(t, name, i, o->shape[from[i]], what));
  }
  return CLATTN_SUCCESS;
}

/* The n parts: non-NULL arrays, one shape and one dtype. */
static clattn_status check_parts(const clattn_context *ctx, int n, const clattn_tensor *po,
                                 const clattn_tensor *pl, const char *o_name,
                                 const char *lse_name) {
  if (n < 1) return clattn_fail(CLATTN_INVALID_ARGUMENT, "n is %d: merge needs at least one part", n);
  if (!po) return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is NULL", o_name);
  if (!pl) return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is NULL", lse_name);
  char name[48], first[48];
  snprintf(first, sizeof first, "%s[0]", o_name);
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "%s[%d]", o_name, i);
    CLATTN_TRY(check_o(ctx, &po[i], name, i ? &po[0] : NULL, first));
    if (po[i].dtype != po[0].dtype)
      return clattn_fail(CLATTN_UNSUPPORTED, "%s.dtype (%s) differs from %s.dtype (%s)", name,
                         clattn_dtype_name(po[i].dtype), first, clattn_dtype_name(po[0].dtype));
    char lname[48];
    snprintf(lname, sizeof lname, "%s[%d]", lse_name, i);
    CLATTN_TRY(check_lse(ctx, &pl[i], lname, &po[0], first));
  }
  if (po[0].shape[1] * po[0].shape[2] > INT32_MAX || po[0].shape[3] > INT32_MAX ||
      po[0].shape[0] > INT32_MAX)
    return clattn_fail(CLATTN_INVALID_SHAPE, "%s: M * H, B or D exceeds 2^31", first);
  return CLATTN_SUCCESS;
}

/* The aliasing rules over part lists: outputs `outs` (nout fixed views) and
 * `d_o`, `d_lse` (n views each, NULL for none); inputs `ins` and the n parts. */
static clattn_status check_merge_aliasing(int n, const clattn_tensor *po, const clattn_tensor *pl,
                                          const clattn_tensor *d_o, const clattn_tensor *d_lse,
                                          const clattn_named *outs, int nout,
                                          const clattn_named *ins, int nin) {
  const int nd = d_o ? n : 0, no = nout + 2 * nd, ni = nin + 2 * n;
  clattn_named *v = malloc(sizeof *v * (size_t)(no + ni));
  char(*names)[40] = malloc(sizeof *names * (size_t)(4 * n));
  if (!v || !names) {
    free(v);
    free(names);
    return clattn_fail(CLATTN_OUT_OF_MEMORY, "merge: aliasing check");
  }
  const clattn_tensor *lists[4] = {d_o, d_lse, po, pl};
  static const char *bases[4] = {"d_parts_o", "d_parts_lse", "parts_o", "parts_lse"};
  int k = 0, nm = 0;
  for (int i = 0; i < nout; i++) v[k++] = outs[i];
  for (int l = 0; l < 4; l++) {
    if (l == 2)
      for (int i = 0; i < nin; i++) v[k++] = ins[i];
    if (!lists[l]) continue;
    for (int i = 0; i < n; i++, nm++) {
      snprintf(names[nm], sizeof names[nm], "%s[%d]", bases[l], i);
      v[k++] = (clattn_named){&lists[l][i], names[nm]};
    }
  }
  const clattn_status s = clattn_check_aliasing(v, no, v + no, ni);
  free(v);
  free(names);
  return s;
}

/* ------------------------------------------------------------------ forward */

typedef struct plan {
  int B, M, H, D, vec;
  int slots;     /* per launch */
  int run;       /* parts 0 .. run-1 stacked in one buffer: slot 0 of the first launch */
  int launches;
  int nbuf;      /* workspace partials (0, 1 or 2) */
  int64_t ws_part_elems; /* floats of one workspace partial: o then lse */
  size_t ws_bytes;
} plan;

/* How many leading parts lie in one buffer at a constant spacing, with one
 * layout: those go to slot 0 as a strided run. */
static int stacked_run(const clattn_tensor *po, const clattn_tensor *pl, int n, int64_t *po_split,
                       int64_t *pl_split) {
  *po_split = *pl_split = 0;
  if (n < 2 || po[1].buf != po[0].buf || pl[1].buf != pl[0].buf) return 1;
  const int64_t so = clattn_elem_offset(&po[1]) - clattn_elem_offset(&po[0]);
  const int64_t sl = clattn_elem_offset(&pl[1]) - clattn_elem_offset(&pl[0]);
  int r = 1;
  while (r < n && po[r].buf == po[0].buf && pl[r].buf == pl[0].buf &&
         clattn_elem_offset(&po[r]) == clattn_elem_offset(&po[0]) + r * so &&
         clattn_elem_offset(&pl[r]) == clattn_elem_offset(&pl[0]) + r * sl &&
         memcmp(po[r].stride, po[0].stride, 4 * sizeof po[0].stride[0]) == 0 &&
         memcmp(pl[r].stride, pl[0].stride, 3 * sizeof pl[0].stride[0]) == 0)
    r++;
  if (r > 1) {
    *po_split = so;
    *pl_split = sl;
  }
  return r;
}

static clattn_status plan_merge(const clattn_context *ctx, const clattn_merge_params *p, plan *pl) {
  memset(pl, 0, sizeof *pl);
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  CLATTN_TRY(check_parts(ctx, p->n, p->parts_o, p->parts_lse, "parts_o", "parts_lse"));
  const clattn_tensor *p0 = &p->parts_o[0];
  CLATTN_TRY(check_o(ctx, &p->o, "o", p0, "parts_o[0]"));
  if (clattn_present(&p->maybe_lse))
    CLATTN_TRY(check_lse(ctx, &p->maybe_lse, "maybe_lse", p0, "parts_o[0]"));
  if (clattn_present(&p->maybe_workspace)) /* its size once the plan is known */
    CLATTN_TRY(clattn_check_workspace(ctx, &p->maybe_workspace, 0, "clattn_merge_workspace_size"));
  const clattn_named outs[] = {
      {&p->o, "o"}, {&p->maybe_lse, "maybe_lse"}, {&p->maybe_workspace, "maybe_workspace"}};
  CLATTN_TRY(check_merge_aliasing(p->n, p->parts_o, p->parts_lse, NULL, NULL, outs, 3, NULL, 0));
  pl->B = (int)p0->shape[0];
  pl->M = (int)p0->shape[1];
  pl->H = (int)p0->shape[2];
  pl->D = (int)p0->shape[3];

  /* VEC 4: four consecutive d per lane where every d-stride is 1 */
  bool unit = p->o.stride[3] == 1;
  for (int i = 0; i < p->n; i++) unit = unit && p->parts_o[i].stride[3] == 1;
  pl->vec = (unit && pl->D % 4 == 0) ? 4 : 1;

  pl->slots = fwd_slots(ctx);
  int64_t so, sl;
  pl->run = pl->slots > 1 ? stacked_run(p->parts_o, p->parts_lse, p->n, &so, &sl) : 1;
  /* first launch: the run in slot 0 plus slots-1 single parts; then the
   * running result in slot 0 plus slots-1 parts each */
  int left = p->n - pl->run - (pl->slots - 1);
  pl->launches = 1;
  if (left > 0) {
    if (pl->slots < 2)
      return clattn_fail(CLATTN_UNSUPPORTED,
                         "n = %d parts: the device's kernel-argument space holds one part per launch",
                         p->n);
    pl->launches += (left + pl->slots - 2) / (pl->slots - 1);
  }
  pl->nbuf = pl->launches > 2 ? 2 : pl->launches - 1;
  const int64_t rows = (int64_t)pl->B * pl->M * pl->H;
  pl->ws_part_elems = rows * pl->D + rows;
  pl->ws_bytes = (size_t)pl->nbuf * (size_t)pl->ws_part_elems * 4;
  return CLATTN_SUCCESS;
}

clattn_status clattn_merge_workspace_size(clattn_context *ctx, const clattn_merge_params *params,
                                          size_t *bytes) {
  clattn_clear_error();
  if (!ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "ctx is NULL");
  plan pl;
  CLATTN_TRY(plan_merge(ctx, params, &pl));
  if (bytes) *bytes = pl.ws_bytes;
  return CLATTN_SUCCESS;
}

/* Workspace partial k: o [B, M, H, D] then lse [B, H, M], both contiguous f32. */
static view ws_view(const plan *pl, cl_mem ws, int64_t base, int k) {
  view v;
  memset(&v, 0, sizeof v);
  const int64_t M = pl->M, H = pl->H, D = pl->D;
  v.o = v.lse = ws;
  v.o_off = base + k * pl->ws_part_elems;
  v.o_stride[0] = M * H * D;
  v.o_stride[1] = H * D;
  v.o_stride[2] = D;
  v.o_stride[3] = 1;
  v.lse_off = v.o_off + (int64_t)pl->B * M * H * D;
  v.lse_stride[0] = H * M;
  v.lse_stride[1] = M;
  v.lse_stride[2] = 1;
  return v;
}

clattn_status clattn_merge(clattn_context *ctx, cl_command_queue queue,
                           const clattn_merge_params *p, cl_uint num_wait,
                           const cl_event *wait_list, cl_event *event) {
  clattn_clear_error();
  CLATTN_TRY(clattn_check_enqueue(ctx, queue, num_wait, wait_list));
  plan pl;
  CLATTN_TRY(plan_merge(ctx, p, &pl));

  clattn_workspace w = {NULL, 0, false};
  if (pl.nbuf > 0)
    CLATTN_TRY(clattn_workspace_acquire(ctx, &p->maybe_workspace, pl.ws_bytes,
                                        "clattn_merge_workspace_size", &w));
  const cl_mem ws = w.buf;
  const int64_t ws_base = w.off;

  fwd_launch L;
  memset(&L, 0, sizeof L);
  L.B = pl.B;
  L.M = pl.M;
  L.H = pl.H;
  L.D = pl.D;
  L.vec = pl.vec;
  L.pdt = p->parts_o[0].dtype;
  clattn_status s = CLATTN_SUCCESS;
  cl_event prev = NULL;
  int next = 0; /* the next part to merge */
  for (int c = 0; c < pl.launches && s == CLATTN_SUCCESS; c++) {
    const bool last = c == pl.launches - 1;
    if (c == 0) {
      L.p0dt = L.pdt;
      L.n0 = pl.run;
      L.slot[0] = view_of(&p->parts_o[0], &p->parts_lse[0]);
      stacked_run(p->parts_o, p->parts_lse, pl.run, &L.po_split, &L.pl_split);
      next = pl.run;
    } else {
      L.p0dt = CLATTN_F32; /* the running result */
      L.n0 = 1;
      L.po_split = L.pl_split = 0;
      L.slot[0] = ws_view(&pl, ws, ws_base, (c - 1) & 1);
    }
    L.nslots = 1;
    while (L.nslots < pl.slots && next < p->n) {
      L.slot[L.nslots++] = view_of(&p->parts_o[next], &p->parts_lse[next]);
      next++;
    }
    if (last) {
      L.odt = p->o.dtype;
      L.out = view_of(&p->o, &p->maybe_lse);
    } else {
      L.odt = CLATTN_F32;
      L.out = ws_view(&pl, ws, ws_base, c & 1);
    }
    cl_event done = NULL;
    if (c == 0)
      s = launch_forward(ctx, queue, &L, num_wait, wait_list, last ? event : &done);
    else
      s = launch_forward(ctx, queue, &L, 1, &prev, last ? event : &done);
    if (prev) clReleaseEvent(prev);
    prev = done;
  }
  if (prev) clReleaseEvent(prev);
  clattn_workspace_release(&w);
  return s;
}

/* ------------------------------------------------------------------ backward */

static void backward_options(clattn_dtype pdt, clattn_dtype odt, clattn_dtype dodt,
                             clattn_dtype dpdt, int nargs, int vec, bool aligned, char *buf,
                             size_t size) {
  snprintf(buf, size, "-DP_DT=%s -DO_DT=%s -DDO_DT=%s -DDP_DT=%s -DNARGS=%d -DVEC=%d -DALIGNED=%d",
           clattn_dtype_cl(pdt), clattn_dtype_cl(odt), clattn_dtype_cl(dodt),
           clattn_dtype_cl(dpdt), nargs, vec, vec == 4 && aligned);
}

clattn_status clattn_merge_backward(clattn_context *ctx, cl_command_queue queue,
                                    const clattn_merge_backward_params *p, cl_uint num_wait,
                                    const cl_event *wait_list, cl_event *event) {
  clattn_clear_error();
  CLATTN_TRY(clattn_check_enqueue(ctx, queue, num_wait, wait_list));
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  CLATTN_TRY(check_parts(ctx, p->n, p->parts_o, p->parts_lse, "parts_o", "parts_lse"));
  CLATTN_TRY(check_parts(ctx, p->n, p->d_parts_o, p->d_parts_lse, "d_parts_o", "d_parts_lse"));
  const clattn_tensor *p0 = &p->parts_o[0];
  for (int i = 0; i < 4; i++)
    CLATTN_TRY(clattn_check_dim(&p->d_parts_o[0], "d_parts_o[0]", i, p0->shape[i],
                                "parts_o[0]'s shape"));
  const bool has_do = clattn_present(&p->maybe_do), has_dlse = clattn_present(&p->maybe_dlse);
  if (has_do) {
    CLATTN_TRY(check_o(ctx, &p->maybe_do, "maybe_do", p0, "parts_o[0]"));
    if (!clattn_present(&p->o))
      return clattn_fail(CLATTN_INVALID_ARGUMENT, "o.buf is NULL: the forward's o is needed with maybe_do");
  }
  if (clattn_present(&p->o)) CLATTN_TRY(check_o(ctx, &p->o, "o", p0, "parts_o[0]"));
  CLATTN_TRY(check_lse(ctx, &p->lse, "lse", p0, "parts_o[0]"));
  if (has_dlse) CLATTN_TRY(check_lse(ctx, &p->maybe_dlse, "maybe_dlse", p0, "parts_o[0]"));
  const clattn_named ins[] = {
      {&p->o, "o"}, {&p->lse, "lse"}, {&p->maybe_do, "maybe_do"}, {&p->maybe_dlse, "maybe_dlse"}};
  CLATTN_TRY(check_merge_aliasing(p->n, p->parts_o, p->parts_lse, p->d_parts_o, p->d_parts_lse,
                                  NULL, 0, ins, 4));

  const int B = (int)p0->shape[0], M = (int)p0->shape[1], H = (int)p0->shape[2],
            D = (int)p0->shape[3];
  bool unit = !has_do || (p->o.stride[3] == 1 && p->maybe_do.stride[3] == 1);
  for (int i = 0; i < p->n; i++)
    unit = unit && p->parts_o[i].stride[3] == 1 && p->d_parts_o[i].stride[3] == 1;
  const int vec = (unit && D % 4 == 0) ? 4 : 1;
  const int slots = bwd_slots(ctx);
  size_t lanes, rows;
  work_shape(ctx, D, vec, &lanes, &rows);
  const size_t red_bytes = lanes * rows * (size_t)clattn_pow2_at_least(slots < p->n ? slots : p->n) * 4;
  if (red_bytes > ctx->profile.local_mem_bytes)
    return clattn_fail(CLATTN_UNSUPPORTED, "merge backward needs %zu bytes of local memory; the device has %llu",
                       red_bytes, (unsigned long long)ctx->profile.local_mem_bytes);

  const view outv = view_of(&p->o, &p->lse);
  const view dv = view_of(&p->maybe_do, &p->maybe_dlse);
  const int launches = (p->n + slots - 1) / slots;
  cl_event *done = calloc((size_t)launches, sizeof *done);
  if (!done) return clattn_fail(CLATTN_OUT_OF_MEMORY, "merge backward events");
  clattn_status s = CLATTN_SUCCESS;
  static const char *name = "clattn_merge_backward";
  for (int c = 0; c < launches && s == CLATTN_SUCCESS; c++) {
    const int first = c * slots;
    const int count = p->n - first < slots ? p->n - first : slots;
    const int nargs = clattn_pow2_at_least(count);
    view pv[2 * MAX_SLOTS];
    const view *views[2 * MAX_SLOTS + 2];
    for (int j = 0; j < count; j++) {
      pv[2 * j] = view_of(&p->parts_o[first + j], NULL);
      pv[2 * j + 1] = view_of(&p->d_parts_o[first + j], NULL);
      views[2 * j] = &pv[2 * j];
      views[2 * j + 1] = &pv[2 * j + 1];
    }
    views[2 * count] = &outv;
    views[2 * count + 1] = &dv;
    const bool aligned = vec == 4 && rows_aligned(ctx, views, 2 * count + 2, 0);
    char opts[192];
    backward_options(p0->dtype, has_do ? p->o.dtype : CLATTN_F32,
                     has_do ? p->maybe_do.dtype : CLATTN_F32, p->d_parts_o[0].dtype, nargs, vec,
                     aligned, opts, sizeof opts);
    cl_kernel k = NULL;
    s = clattn_kernel_get(ctx, "merge.cl", opts, name, &k);
    if (s != CLATTN_SUCCESS) break;
    clattn_args a = clattn_args_begin(k);
    clattn_arg_int(&a, M);
    clattn_arg_int(&a, H);
    clattn_arg_int(&a, D);
    clattn_arg_int(&a, count);
    static const view unused;
    for (int j = 0; j < nargs; j++) {
      view v = j < count ? view_of(&p->parts_o[first + j], &p->parts_lse[first + j]) : unused;
      arg_view_o(&a, &v);
      arg_view_lse(&a, &v);
    }
    for (int j = 0; j < nargs; j++) {
      view v = j < count ? view_of(&p->d_parts_o[first + j], &p->d_parts_lse[first + j]) : unused;
      arg_view_o(&a, &v);
      arg_view_lse(&a, &v);
    }
    arg_view_o(&a, &outv);
    arg_view_lse(&a, &outv);
    arg_view_o(&a, &dv);
    arg_view_lse(&a, &dv);
    clattn_arg_local(&a, lanes * rows * (size_t)nargs * 4);
    const size_t mh = (size_t)M * (size_t)H;
    size_t local[3] = {lanes, rows, 1};
    size_t global[3] = {lanes, (mh + rows - 1) / rows * rows, (size_t)B};
    s = clattn_args_launch(ctx, queue, &a, name, 3, global, local, num_wait, wait_list,
                           (launches == 1) ? event : &done[c]);
  }
  /* the launches are independent: the caller's event covers them all */
  if (s == CLATTN_SUCCESS && launches > 1 && event) {
    cl_int err = clEnqueueMarkerWithWaitList(queue, (cl_uint)launches, done, event);
    if (err != CL_SUCCESS) s = clattn_fail_cl(err, "clEnqueueMarkerWithWaitList", name);
  }
  for (int c = 0; c < launches; c++)
    if (done[c]) clReleaseEvent(done[c]);
  free(done);
  return s;
}

/* ------------------------------------------------------------------ variants */

void clattn_merge_variants(clattn_variant_fn fn, void *priv) {
  static const clattn_dtype fl[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  char opts[192];
  /* the split-K reduce of decode: f32 parts, every output dtype, every width */
  for (int o = 0; o < 3; o++)
    for (int w = 0; w < 3; w++) {
      forward_options(CLATTN_F32, CLATTN_F32, fl[o], 1, w ? 4 : 1, w == 2, opts, sizeof opts);
      fn(priv, "merge.cl", opts);
    }
  /* public merge: every (parts, output) dtype pair, every slot count, and
   * the later chunks (f32 running result in slot 0) */
  for (int pi = 0; pi < 3; pi++)
    for (int o = 0; o < 3; o++) {
      forward_options(fl[pi], fl[pi], fl[o], 8, 4, true, opts, sizeof opts);
      fn(priv, "merge.cl", opts);
      forward_options(CLATTN_F32, fl[pi], fl[o], 16, 1, false, opts, sizeof opts);
      fn(priv, "merge.cl", opts);
    }
  for (int nargs = 1; nargs <= 4; nargs *= 2) {
    forward_options(CLATTN_F16, CLATTN_F16, CLATTN_F16, nargs, 4, false, opts, sizeof opts);
    fn(priv, "merge.cl", opts);
  }
  /* backward: each dtype on each of its four axes, every slot count, every width */
  for (int i = 0; i < 3; i++) {
    backward_options(fl[i], CLATTN_F32, CLATTN_F32, CLATTN_F32, 4, 4, true, opts, sizeof opts);
    fn(priv, "merge.cl", opts);
    backward_options(CLATTN_F32, fl[i], CLATTN_F32, CLATTN_F32, 8, 1, false, opts, sizeof opts);
    fn(priv, "merge.cl", opts);
    backward_options(CLATTN_F32, CLATTN_F32, fl[i], CLATTN_F32, 2, 4, false, opts, sizeof opts);
    fn(priv, "merge.cl", opts);
    backward_options(CLATTN_F32, CLATTN_F32, CLATTN_F32, fl[i], 1, 4, true, opts, sizeof opts);
    fn(priv, "merge.cl", opts);
  }
  backward_options(CLATTN_BF16, CLATTN_F16, CLATTN_BF16, CLATTN_F16, 16, 4, true, opts, sizeof opts);
  fn(priv, "merge.cl", opts);
}
