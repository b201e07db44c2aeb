/* Tensor views: constructors, dtype facts and the bounds checks every
 * operation runs before it enqueues anything. */
#include "internal.h"

#include <stdio.h>
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
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.stride[i] = s;
    s *= shape[i];
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

uint64_t clattn_tensor_extent_bytes(const clattn_tensor *t) {
  uint64_t last = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0) return 0;
    last += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->stride[i];
  }
  return (last + 1) * clattn_dtype_size(t->dtype);
}

clattn_status clattn_check_tensor(const clattn_tensor *t, const char *name, int ndim,
                                  unsigned dtype_mask) {
  if (!t->buf) return clattn_fail(CLATTN_INVALID_ARGUMENT, "%s.buf is NULL", name);
  if (t->ndim != ndim)
    return clattn_fail(CLATTN_INVALID_SHAPE, "%s.ndim is %d, expected %d", name, t->ndim, ndim);
  size_t es = clattn_dtype_size(t->dtype);
  if (es == 0 || (unsigned)t->dtype >= 32 || !(dtype_mask & CLATTN_DT(t->dtype)))
    return clattn_fail(CLATTN_UNSUPPORTED, "%s.dtype %s is not supported here", name,
                       clattn_dtype_name(t->dtype));
  for (int i = 0; i < ndim; i++) {
    if (t->shape[i] < 0)
      return clattn_fail(CLATTN_INVALID_SHAPE, "%s.shape[%d] is negative (%lld)", name, i,
                         (long long)t->shape[i]);
    if (t->stride[i] < 0)
      return clattn_fail(CLATTN_INVALID_SHAPE, "%s.stride[%d] is negative (%lld)", name, i,
                         (long long)t->stride[i]);
    if (t->shape[i] > ((int64_t)1 << 40) || t->stride[i] > ((int64_t)1 << 40))
      return clattn_fail(CLATTN_INVALID_SHAPE, "%s dimension %d is implausibly large", name, i);
  }
  if (t->offset % es)
    return clattn_fail(CLATTN_INVALID_ARGUMENT,
                       "%s.offset (%zu bytes) is not a multiple of its element size (%zu)", name,
                       t->offset, es);
  size_t size = 0;
  cl_int err = clGetMemObjectInfo(t->buf, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clGetMemObjectInfo", name);
  uint64_t extent = clattn_tensor_extent_bytes(t);
  if (extent && (uint64_t)t->offset + extent > (uint64_t)size) {
    char dims[160] = "", strides[160] = "";
    size_t dl = 0, sl = 0;
    for (int i = 0; i < ndim; i++) {
      dl += (size_t)snprintf(dims + dl, sizeof dims - dl, "%s%lld", i ? ", " : "",
                             (long long)t->shape[i]);
      sl += (size_t)snprintf(strides + sl, sizeof strides - sl, "%s%lld", i ? ", " : "",
                             (long long)t->stride[i]);
    }
    return clattn_fail(CLATTN_OUT_OF_BOUNDS,
                       "%s: shape [%s] with strides [%s] and offset %zu reaches byte %llu, but "
                       "the buffer holds %zu bytes",
                       name, dims, strides, t->offset,
                       (unsigned long long)(t->offset + extent), size);
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
