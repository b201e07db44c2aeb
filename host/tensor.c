/* Tensor views: constructors, dtype facts and the bounds checks every
 * operation runs before it enqueues anything. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t clattn_dtype_size(clattn_dtype dtype) {
  switch (dtype) {
  case CLATTN_F32: return 4;
  case CLATTN_F16: return 2;
  case CLATTN_BF16: return 2;
  case CLATTN_F64: return 8;
  case CLATTN_I32: return 4;
  case CLATTN_INT4: return 4;
  case CLATTN_FP8: return 4;
  case CLATTN_FP8_FNUZ: return 4;
  }
  return 0;
}

const char *clattn_dtype_name(clattn_dtype dtype) {
  switch (dtype) {
  case CLATTN_F32: return "f32";
  case CLATTN_F16: return "f16";
  case CLATTN_BF16: return "bf16";
  case CLATTN_F64: return "f64";
  case CLATTN_I32: return "i32";
  case CLATTN_INT4: return "int4";
  case CLATTN_FP8: return "fp8";
  case CLATTN_FP8_FNUZ: return "fp8fnuz";
  }
  return "unknown";
}

const char *clattn_dtype_cl(clattn_dtype dtype) {
  switch (dtype) {
  case CLATTN_F16: return "f16";
  case CLATTN_BF16: return "bf16";
  case CLATTN_F64: return "f64";
  default: return "f32";
  }
}

static clattn_tensor make(cl_mem buf, size_t offset, clattn_dtype dtype, int ndim,
                          const int64_t *shape) {
  clattn_tensor t;
  memset(&t, 0, sizeof t);
  t.buf = buf;
  t.offset = offset;
  t.dtype = dtype;
  t.ndim = ndim;
  /* contiguous strides; past 2^63 they saturate, and the checks refuse the view */
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.stride[i] = s;
    if (shape[i] < 0 || __builtin_mul_overflow(s, shape[i], &s)) s = INT64_MAX;
  }
  return t;
}

clattn_tensor clattn_tensor_1d(cl_mem buf, size_t offset, clattn_dtype dtype, int64_t d0) {
  int64_t s[1] = {d0};
  return make(buf, offset, dtype, 1, s);
}
clattn_tensor clattn_tensor_2d(cl_mem buf, size_t offset, clattn_dtype dtype, int64_t d0,
                               int64_t d1) {
  int64_t s[2] = {d0, d1};
  return make(buf, offset, dtype, 2, s);
}
clattn_tensor clattn_tensor_3d(cl_mem buf, size_t offset, clattn_dtype dtype, int64_t d0,
                               int64_t d1, int64_t d2) {
  int64_t s[3] = {d0, d1, d2};
  return make(buf, offset, dtype, 3, s);
}
clattn_tensor clattn_tensor_4d(cl_mem buf, size_t offset, clattn_dtype dtype, int64_t d0,
                               int64_t d1, int64_t d2, int64_t d3) {
  int64_t s[4] = {d0, d1, d2, d3};
  return make(buf, offset, dtype, 4, s);
}

int64_t clattn_elem_offset(const clattn_tensor *t) {
  return (int64_t)(t->offset / clattn_dtype_size(t->dtype));
}

/* Checked arithmetic on non-negative sizes: false on overflow. */
static bool add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }
static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

bool clattn_tensor_bytes(const clattn_tensor *t, uint64_t *first, uint64_t *end) {
  *first = *end = (uint64_t)t->offset;
  uint64_t last = 0; /* element index of the last reachable element */
  for (int i = 0; i < t->ndim && i < CLATTN_MAX_DIMS; i++) {
    if (t->shape[i] <= 0) return t->shape[i] == 0; /* empty: nothing reachable */
    uint64_t step;
    if (t->stride[i] < 0 || !mul_u64((uint64_t)(t->shape[i] - 1), (uint64_t)t->stride[i], &step) ||
        !add_u64(last, step, &last))
      return false;
  }
  uint64_t bytes;
  if (!add_u64(last, 1, &last) || !mul_u64(last, clattn_dtype_size(t->dtype), &bytes)) return false;
  return add_u64(*first, bytes, end);
}

uint64_t clattn_tensor_extent_bytes(const clattn_tensor *t) {
  uint64_t first, end;
  return clattn_tensor_bytes(t, &first, &end) ? end - first : UINT64_MAX;
}

/* "[a, b, c]" of n values, for messages. */
static void format_dims(const int64_t *v, int n, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)v[i]);
}

clattn_status clattn_check_tensor(const clattn_context *ctx, const clattn_tensor *t, const char *name,
                                  int ndim, unsigned dtype_mask) {
  if (!t->buf) return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s.buf is NULL", name);
  if (t->ndim != ndim)
    return clattn_fail(CLATTN_INVALID_SHAPE, "%s.ndim is %d, expected %d", name, t->ndim, ndim);
  if ((unsigned)t->dtype >= 32 || clattn_dtype_size(t->dtype) == 0 ||
      !(dtype_mask & CLATTN_DT(t->dtype)))
    return clattn_fail(CLATTN_UNSUPPORTED, "%s.dtype %s is not supported here", name,
                       clattn_dtype_name(t->dtype));
  const size_t es = clattn_dtype_size(t->dtype);
  for (int i = 0; i < ndim; i++) {
    if (t->shape[i] < 0)
      return clattn_fail(CLATTN_INVALID_SHAPE, "%s.shape[%d] is negative (%lld)", name, i,
                         (long long)t->shape[i]);
    if (t->shape[i] > CLATTN_MAX_DIM)
      return clattn_fail(CLATTN_UNSUPPORTED, "%s.shape[%d] (%lld) exceeds 2^31 - 1", name, i,
                         (long long)t->shape[i]);
    if (t->stride[i] < 0)
      return clattn_fail(CLATTN_INVALID_SHAPE, "%s.stride[%d] is negative (%lld)", name, i,
                         (long long)t->stride[i]);
  }
  if (t->offset % es)
    return clattn_fail(CLATTN_INVALID_ARGUMENT,
                       "%s.offset (%zu bytes) is not a multiple of its element size (%zu)", name,
                       t->offset, es);
  if (ctx) {
    cl_context c = NULL;
    cl_int err = clGetMemObjectInfo(t->buf, CL_MEM_CONTEXT, sizeof c, &c, NULL);
    if (err != CL_SUCCESS) return clattn_fail_cl(err, "clGetMemObjectInfo", name);
    if (c != ctx->cl)
      return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s.buf belongs to another cl_context than ctx",
                         name);
  }
  size_t size = 0;
  cl_int err = clGetMemObjectInfo(t->buf, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clGetMemObjectInfo", name);
  uint64_t first, end;
  const bool fits = clattn_tensor_bytes(t, &first, &end);
  if (!fits || end > (uint64_t)size) {
    char dims[160], strides[160];
    format_dims(t->shape, ndim, dims, sizeof dims);
    format_dims(t->stride, ndim, strides, sizeof strides);
    if (!fits)
      return clattn_fail(CLATTN_OUT_OF_BOUNDS,
                         "%s: shape [%s] with strides [%s] and offset %zu reaches beyond 2^64 "
                         "bytes; the buffer holds %zu bytes",
                         name, dims, strides, t->offset, size);
    return clattn_fail(CLATTN_OUT_OF_BOUNDS,
                       "%s: shape [%s] with strides [%s] and offset %zu reaches byte %llu, but "
                       "the buffer holds %zu bytes",
                       name, dims, strides, t->offset, (unsigned long long)end, size);
  }
  return CLATTN_SUCCESS;
}

clattn_status clattn_check_dim(const clattn_tensor *t, const char *name, int axis, int64_t expect,
                               const char *what) {
  if (t->shape[axis] != expect)
    return clattn_fail(CLATTN_INVALID_SHAPE, "%s.shape[%d] is %lld, expected %lld (%s)", name, axis,
                       (long long)t->shape[axis], (long long)expect, what);
  return CLATTN_SUCCESS;
}

clattn_status clattn_check_unit_stride(const clattn_tensor *t, const char *name, int axis,
                                       const char *why) {
  if (t->shape[axis] > 1 && t->stride[axis] != 1)
    return clattn_fail(CLATTN_UNSUPPORTED, "%s.stride[%d] is %lld: it must be 1 (%s)", name, axis,
                       (long long)t->stride[axis], why);
  return CLATTN_SUCCESS;
}

clattn_status clattn_check_range(int64_t v, int64_t lo, int64_t hi, const char *what) {
  if (v < lo || v > hi)
    return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s is %lld, outside [%lld, %lld]", what,
                       (long long)v, (long long)lo, (long long)hi);
  return CLATTN_SUCCESS;
}

clattn_status clattn_check_output(const clattn_tensor *t, const char *name) {
  /* The dims that step (shape > 1), by increasing stride: each stride must
   * pass the last element the smaller ones reach, so every index tuple has
   * its own element (a sufficient test; every dense or strided layout of
   * distinct elements passes it). */
  int order[CLATTN_MAX_DIMS], n = 0;
  for (int i = 0; i < t->ndim && i < CLATTN_MAX_DIMS; i++) {
    if (t->shape[i] == 0) return CLATTN_SUCCESS; /* nothing is written */
    if (t->shape[i] > 1) order[n++] = i;
  }
  for (int a = 1; a < n; a++)
    for (int b = a; b > 0 && t->stride[order[b]] < t->stride[order[b - 1]]; b--) {
      const int x = order[b];
      order[b] = order[b - 1];
      order[b - 1] = x;
    }
  uint64_t span = 0; /* elements the smaller dims reach, past the first */
  for (int a = 0; a < n; a++) {
    const int i = order[a];
    if ((uint64_t)t->stride[i] <= span)
      return clattn_fail(CLATTN_INVALID_ARGUMENT,
                         "%s.stride[%d] (%lld) makes output elements overlap (dimension %d of "
                         "%lld steps within the %llu elements the smaller strides span)",
                         name, i, (long long)t->stride[i], i, (long long)t->shape[i],
                         (unsigned long long)span + 1);
    span += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->stride[i]; /* bounded by the checked extent */
  }
  return CLATTN_SUCCESS;
}

/* The memory a buffer's bytes are in: a sub-buffer's parent and its origin
 * there; a buffer on host memory (CL_MEM_USE_HOST_PTR) that memory. */
typedef struct place {
  const void *root;
  uint64_t base;
} place;

static place place_of(cl_mem m) {
  place p = {m, 0};
  cl_mem parent = NULL;
  size_t origin = 0;
  if (clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL) ==
          CL_SUCCESS &&
      parent &&
      clGetMemObjectInfo(m, CL_MEM_OFFSET, sizeof origin, &origin, NULL) == CL_SUCCESS) {
    p.root = parent;
    p.base = origin;
    m = parent;
  }
  cl_mem_flags flags = 0;
  void *host = NULL;
  if (clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof flags, &flags, NULL) == CL_SUCCESS &&
      (flags & CL_MEM_USE_HOST_PTR) &&
      clGetMemObjectInfo(m, CL_MEM_HOST_PTR, sizeof host, &host, NULL) == CL_SUCCESS && host) {
    p.root = NULL; /* host memory: addresses compare across buffers */
    p.base += (uint64_t)(uintptr_t)host;
  }
  return p;
}

/* Whether delta = sum c_i stride_i for integers |c_i| <= shape_i - 1 over the
 * first k dims of `order` (sorted by stride, each stride past the span of
 * the smaller ones): that stride takes one of the two multiples nearest
 * delta, since the rest reach less than it. */
static bool lattice_reaches(__int128 delta, const clattn_tensor *t, const int *order, int k) {
  if (k == 0) return delta == 0;
  const int i = order[k - 1];
  const __int128 st = t->stride[i], n = t->shape[i];
  __int128 c = delta / st;
  if (c * st > delta) c--; /* floor */
  for (__int128 cc = c; cc <= c + 1; cc++)
    if (cc > -n && cc < n && lattice_reaches(delta - cc * st, t, order, k - 1)) return true;
  return false;
}

/* Two views of one layout (dtype, shape, strides; an injective one) whose
 * byte ranges overlap but whose elements never meet: K and V caches
 * interleaved per token, say. delta: b's first byte minus a's. */
static bool interleaved(const clattn_tensor *a, const clattn_tensor *b, __int128 delta) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  int order[CLATTN_MAX_DIMS], n = 0;
  for (int i = 0; i < a->ndim && i < CLATTN_MAX_DIMS; i++) {
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->stride[i] != b->stride[i])) return false;
    if (a->shape[i] > 1) order[n++] = i;
  }
  const __int128 es = (__int128)clattn_dtype_size(a->dtype);
  if (delta % es) return false;
  for (int x = 1; x < n; x++)
    for (int y = x; y > 0 && a->stride[order[y]] < a->stride[order[y - 1]]; y--) {
      const int z = order[y];
      order[y] = order[y - 1];
      order[y - 1] = z;
    }
  __int128 span = 0;
  for (int x = 0; x < n; x++) {
    const int i = order[x];
    if (a->stride[i] <= span) return false; /* not injective: ranges decide */
    span += (__int128)(a->shape[i] - 1) * a->stride[i];
  }
  return !lattice_reaches(delta / es, a, order, n);
}

bool clattn_same_view(const clattn_tensor *a, const clattn_tensor *b) {
  if (a->buf != b->buf || a->offset != b->offset || a->dtype != b->dtype || a->ndim != b->ndim)
    return false;
  for (int i = 0; i < a->ndim && i < CLATTN_MAX_DIMS; i++)
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->stride[i] != b->stride[i]))
      return false;
  return true;
}

/* A view's bytes in the memory they live in. */
typedef struct span {
  const clattn_tensor *t;
  const char *name;
  const void *root;
  uint64_t lo, hi; /* absolute [lo, hi) */
  bool out;
} span;

static bool span_of(const clattn_tensor *t, const char *name, bool out, span *sp) {
  uint64_t a0, a1;
  if (!t || !clattn_present(t) || !clattn_tensor_bytes(t, &a0, &a1) || a0 == a1) return false;
  const place p = place_of(t->buf);
  *sp = (span){t, name, p.root, a0 + p.base, a1 + p.base, out};
  return true;
}

static clattn_status overlap_fail(const span *a, const span *b) {
  const place pa = place_of(a->t->buf), pb = place_of(b->t->buf);
  return clattn_fail(CLATTN_INVALID_ARGUMENT,
                     "%s overlaps %s: bytes [%llu, %llu) and [%llu, %llu) of one memory object; "
                     "an output may share no element with an input or another output",
                     a->name, b->name, (unsigned long long)(a->lo - pa.base),
                     (unsigned long long)(a->hi - pa.base), (unsigned long long)(b->lo - pb.base),
                     (unsigned long long)(b->hi - pb.base));
}

/* Two spans (one of them an output) that share an element. */
static bool spans_meet(const span *a, const span *b) {
  return a->root == b->root && a->lo < b->hi && b->lo < a->hi &&
         !interleaved(a->t, b->t, (__int128)b->lo - (__int128)a->lo);
}

clattn_status clattn_check_apart(const clattn_tensor *a, const char *a_name, const clattn_tensor *b,
                                 const char *b_name) {
  span sa, sb;
  if (span_of(a, a_name, true, &sa) && span_of(b, b_name, false, &sb) && spans_meet(&sa, &sb))
    return overlap_fail(&sa, &sb);
  return CLATTN_SUCCESS;
}

static int span_cmp(const void *x, const void *y) {
  const span *a = x, *b = y;
  if (a->root != b->root) return (uintptr_t)a->root < (uintptr_t)b->root ? -1 : 1;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

clattn_status clattn_check_aliasing(const clattn_named *outs, int nout, const clattn_named *ins,
                                    int nin) {
  for (int i = 0; i < nout; i++)
    if (outs[i].t && clattn_present(outs[i].t)) CLATTN_TRY(clattn_check_output(outs[i].t, outs[i].name));
  span *sp = malloc(sizeof *sp * (size_t)(nout + nin + 1));
  if (!sp) return clattn_fail(CLATTN_OUT_OF_MEMORY, "aliasing check");
  int n = 0;
  for (int i = 0; i < nout; i++) n += span_of(outs[i].t, outs[i].name, true, &sp[n]);
  for (int i = 0; i < nin; i++) n += span_of(ins[i].t, ins[i].name, false, &sp[n]);
  /* by memory, then start: a span can only meet the ones after it that
   * start before it ends */
  qsort(sp, (size_t)n, sizeof *sp, span_cmp);
  clattn_status s = CLATTN_SUCCESS;
  for (int i = 0; i < n && s == CLATTN_SUCCESS; i++)
    for (int j = i + 1; j < n && sp[j].root == sp[i].root && sp[j].lo < sp[i].hi; j++)
      if ((sp[i].out || sp[j].out) && spans_meet(&sp[i], &sp[j])) {
        s = sp[i].out ? overlap_fail(&sp[i], &sp[j]) : overlap_fail(&sp[j], &sp[i]);
        break;
      }
  free(sp);
  return s;
}

clattn_status clattn_check_error_flag(const clattn_context *ctx, const clattn_tensor *flag) {
  if (!clattn_present(flag)) return CLATTN_SUCCESS;
  CLATTN_TRY(clattn_check_tensor(ctx, flag, "maybe_error_flag", 1, CLATTN_DT(CLATTN_I32)));
  return clattn_check_dim(flag, "maybe_error_flag", 0, 1, "one i32 flag");
}

clattn_status clattn_check_workspace(const clattn_context *ctx, const clattn_tensor *w,
                                     size_t bytes, const char *sizer) {
  CLATTN_TRY(clattn_check_tensor(ctx, w, "maybe_workspace", 1, CLATTN_DT(CLATTN_F32)));
  if (w->shape[0] > 1 && w->stride[0] != 1)
    return clattn_fail(CLATTN_INVALID_ARGUMENT,
                       "maybe_workspace.stride[0] is %lld: the workspace is contiguous (1)",
                       (long long)w->stride[0]);
  if ((uint64_t)w->shape[0] * 4 < (uint64_t)bytes)
    return clattn_fail(CLATTN_OUT_OF_BOUNDS,
                       "maybe_workspace.shape[0] is %lld floats (%llu bytes); this call needs %zu "
                       "bytes (%s)",
                       (long long)w->shape[0], (unsigned long long)w->shape[0] * 4, bytes, sizer);
  return CLATTN_SUCCESS;
}

clattn_status clattn_workspace_acquire(clattn_context *ctx, const clattn_tensor *maybe, size_t bytes,
                                       const char *sizer, clattn_workspace *out) {
  out->buf = NULL;
  out->off = 0;
  out->owned = false;
  if (clattn_present(maybe)) {
    CLATTN_TRY(clattn_check_workspace(ctx, maybe, bytes, sizer));
    out->buf = maybe->buf;
    out->off = clattn_elem_offset(maybe);
    return CLATTN_SUCCESS;
  }
  CLATTN_TRY(clattn_temp_buffer(ctx, bytes, &out->buf));
  out->owned = true;
  return CLATTN_SUCCESS;
}

void clattn_workspace_release(clattn_workspace *w) {
  if (w->owned && w->buf) clReleaseMemObject(w->buf); /* freed once the commands using it finish */
  w->buf = NULL;
  w->owned = false;
}
