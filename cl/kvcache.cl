/* K/V cache kernels (host twin lib/kvcache.c).
 *
 * clattn_kv_write: rows of floats into a cache at per-sequence positions:
 *   the append of new K/V rows and the quantize of a float range. A float
 *   cache stores them (rounded to its dtype), an int4 / fp8 cache quantizes
 *   them (cl/quant.clh). Get_global_id(1) picks K (0) or V (1).
 * clattn_kv_read: a range of cache positions back to floats (dequantize).
 *
 * D/8 work-items share a row, each owning 8 consecutive elements (one int4
 * code word, two fp8 words); a work-group of the write kernel holds whole
 * rows so a quantization group's min / max reduce through local memory.
 * Positions outside the cache (dense: outside [0, N); paged: beyond the block
 * table or on an entry outside [0, num_pages)) are skipped and raise the
 * error flag: nothing is read or written outside the caller's buffers.
 *
 * ROWWISE 1 (CPUs): a work-item per row instead, its chunks in a loop, no
 * local memory or barriers (a CPU runs a group's lanes one after another;
 * a row's lanes cost more to walk than its 8-element chunks to convert).
 *
 * Options: IN_DT (write) / OUT_DT (read) f32|f16|bf16, the float side;
 * KV_QUANT 0: float cache of dtype KV_DT, 1: int4, 2: fp8 (FP8_FNUZ 0|1);
 * ROWWISE 0|1. */
#include "common.clh"
#include "kvaddr.clh"
#include "quant.clh"

#ifndef IN_DT
#define IN_DT f32
#endif
#ifndef OUT_DT
#define OUT_DT f32
#endif
#ifndef KV_QUANT
#define KV_QUANT 0
#endif
#ifndef KV_DT
#define KV_DT f32
#endif

#ifndef ROWWISE
#define ROWWISE 0
#endif

#if KV_QUANT
#define CACHE_T uint
#else
#define CACHE_T ELT(KV_DT)
#endif

/* ------------------------------------------------------------------ 8 elements at a stride */

/* common.clh's LD8 reads contiguous elements; these take an element stride. */
#define LD8S(dt, p, i, st) CAT(ld8s_, dt)((p), (i), (st))
#define ST8S(dt, p, i, st, x) CAT(st8s_, dt)((p), (i), (st), (x))

static inline float8 ld8s_f32(__global const float *p, long i, long st) {
  if (st == 1) return LD8(f32, p, i);
  return (float8)(p[i], p[i + st], p[i + 2 * st], p[i + 3 * st], p[i + 4 * st], p[i + 5 * st],
                  p[i + 6 * st], p[i + 7 * st]);
}
static inline float8 ld8s_f16(__global const half *p, long i, long st) {
  if (st == 1) return LD8(f16, p, i);
  return (float8)(vload_half(i, p), vload_half(i + st, p), vload_half(i + 2 * st, p),
                  vload_half(i + 3 * st, p), vload_half(i + 4 * st, p),
                  vload_half(i + 5 * st, p), vload_half(i + 6 * st, p),
                  vload_half(i + 7 * st, p));
}
static inline float8 ld8s_bf16(__global const ushort *p, long i, long st) {
  if (st == 1) return LD8(bf16, p, i);
  const ushort8 u = (ushort8)(p[i], p[i + st], p[i + 2 * st], p[i + 3 * st], p[i + 4 * st],
                              p[i + 5 * st], p[i + 6 * st], p[i + 7 * st]);
  return as_float8(convert_uint8(u) << 16);
}

static inline void st8s_f32(__global float *p, long i, long st, float8 x) {
  if (st == 1) {
    vstore8(x, 0, p + i);
    return;
  }
  p[i] = x.s0, p[i + st] = x.s1, p[i + 2 * st] = x.s2, p[i + 3 * st] = x.s3;
  p[i + 4 * st] = x.s4, p[i + 5 * st] = x.s5, p[i + 6 * st] = x.s6, p[i + 7 * st] = x.s7;
}
static inline void st8s_f16(__global half *p, long i, long st, float8 x) {
  if (st == 1) {
    vstore_half8_rte(x, 0, p + i);
    return;
  }
  vstore_half_rte(x.s0, i, p), vstore_half_rte(x.s1, i + st, p);
  vstore_half_rte(x.s2, i + 2 * st, p), vstore_half_rte(x.s3, i + 3 * st, p);
  vstore_half_rte(x.s4, i + 4 * st, p), vstore_half_rte(x.s5, i + 5 * st, p);
  vstore_half_rte(x.s6, i + 6 * st, p), vstore_half_rte(x.s7, i + 7 * st, p);
}
static inline void st8s_bf16(__global ushort *p, long i, long st, float8 x) {
  const ushort8 u = (ushort8)(bf16_from_float(x.s0), bf16_from_float(x.s1),
                              bf16_from_float(x.s2), bf16_from_float(x.s3),
                              bf16_from_float(x.s4), bf16_from_float(x.s5),
                              bf16_from_float(x.s6), bf16_from_float(x.s7));
  if (st == 1) {
    vstore8(u, 0, p + i);
    return;
  }
  p[i] = u.s0, p[i + st] = u.s1, p[i + 2 * st] = u.s2, p[i + 3 * st] = u.s3;
  p[i + 4 * st] = u.s4, p[i + 5 * st] = u.s5, p[i + 6 * st] = u.s6, p[i + 7 * st] = u.s7;
}

/* ------------------------------------------------------------------ positions */

/* The sequence owning packed row t: the last b with start[b] <= t (starts
 * non-decreasing), provided t < start[b + 1]; -1 for a row of no sequence. */
static inline int seq_of_row(__global const int *start, long st, int B, int t, int *first) {
  if (B <= 0 || start[0] > t) return -1;
  int lo = 0, hi = B - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (start[mid * st] <= t) lo = mid;
    else hi = mid - 1;
  }
  if (t >= start[(lo + 1) * st]) return -1;
  *first = start[lo * st];
  return lo;
}

/* Element offset of cache row (b, position j, head h), -1 when j lies outside
 * the cache; kv_locate checks the block table, this adds the dense capacity
 * N and negative positions (which kv_locate leaves to its callers). */
static inline long cache_row(const kv_layout *l, const kv_pages *pg, int N, int b, long j, int h) {
  const long cap = pg->page_size ? (long)pg->max_pages * pg->page_size : (long)N;
  if (j < 0 || j >= cap) return -1;
  return kv_row(l, pg, b, (int)j, h);
}

/* ------------------------------------------------------------------ write (append, quantize) */

/* The min and max of 8 values; a non-finite value gives max +inf, which
 * marks its group (int4_group_params, fp8_row_params). */
static inline float2 minmax8(float8 v) {
  const float mn = fmin(fmin(fmin(v.s0, v.s1), fmin(v.s2, v.s3)), fmin(fmin(v.s4, v.s5), fmin(v.s6, v.s7)));
  float mx = fmax(fmax(fmax(v.s0, v.s1), fmax(v.s2, v.s3)), fmax(fmax(v.s4, v.s5), fmax(v.s6, v.s7)));
  if (any(isnan(v)) || any(isinf(v))) mx = INFINITY;
  return (float2)(mn, mx);
}

/* Row t of the input lies at xb * b + xi * i (uniform mode: rows_per_seq rows
 * per sequence) or at xi * t (varlen mode: new_start given, xb unused). Its
 * cache position is pos[b] + i (pos absent: i). */
__kernel void clattn_kv_write(
    int H, int D, int G, int rows, int rows_per_seq, int B, int N,
    __global const ELT(IN_DT) *xk, long xk_off, long xk_b, long xk_i, long xk_h, long xk_d,
    __global const ELT(IN_DT) *xv, long xv_off, long xv_b, long xv_i, long xv_h, long xv_d,
    __global CACHE_T *ck, long ck_off, long ck_s0, long ck_s1, long ck_s2,
    __global CACHE_T *cv, long cv_off, long cv_s0, long cv_s1, long cv_s2,
    __global uint *sk, long sk_off, long sk_s0, long sk_s1, long sk_s2,
    __global uint *sv, long sv_off, long sv_s0, long sv_s1, long sv_s2,
    __global const int *new_start, long ns_off, long ns_st,
    __global const int *pos, long pos_off, long pos_st,
    __global const int *table, long table_off, long table_st, int max_pages, int page_size,
    int num_pages, __global int *err, long err_off, __local float *lmn, __local float *lmx) {
  /* 32-bit index arithmetic (the host keeps rows and lanes below 2^31 and
   * 2^32): 64-bit divisions cost GPUs dozens of instructions */
  const uint L = (uint)D >> 3;
  const uint lid = get_local_id(0);
#if ROWWISE
  const uint l = 0, r = (uint)get_global_id(0);
#else
  const uint rl = lid / L, l = lid - rl * L;
  const uint r = (uint)get_group_id(0) * ((uint)get_local_size(0) / L) + rl;
#endif
  const bool is_v = get_global_id(1) == 1;

  __global const ELT(IN_DT) *x = is_v ? xv : xk;
  __global CACHE_T *c = is_v ? cv : ck;
  const long xo = is_v ? xv_off : xk_off, xb = is_v ? xv_b : xk_b, xi = is_v ? xv_i : xk_i;
  const long xh = is_v ? xv_h : xk_h, xd = is_v ? xv_d : xk_d;
  kv_layout cl;
  cl.off = is_v ? cv_off : ck_off;
  cl.s0 = is_v ? cv_s0 : ck_s0;
  cl.s1 = is_v ? cv_s1 : ck_s1;
  cl.s2 = is_v ? cv_s2 : ck_s2;
#if KV_QUANT == 2
  __global uint *s = is_v ? sv : sk; /* the fp8 rows' scale-shift words */
  kv_layout sl;
  sl.off = is_v ? sv_off : sk_off;
  sl.s0 = is_v ? sv_s0 : sk_s0;
  sl.s1 = is_v ? sv_s1 : sk_s1;
  sl.s2 = is_v ? sv_s2 : sk_s2;
#endif
  const kv_pages pg = kv_pages_of(table, table_off, table_st, max_pages, page_size, num_pages);

  long crow = -1, xrow = 0;
#if KV_QUANT == 2
  long srow = -1;
#endif
  if (r < (uint)rows) {
    const int t = (int)(r / (uint)H), h = (int)(r - (uint)t * (uint)H);
    int b = -1, i = 0;
    if (new_start) {
      int first = 0;
      b = seq_of_row(new_start + ns_off, ns_st, B, t, &first);
      i = t - first;
      xrow = xo + xi * t + xh * h;
    } else {
      b = (int)((uint)t / (uint)rows_per_seq);
      i = t - b * rows_per_seq;
      xrow = xo + xb * b + xi * i + xh * h;
    }
    if (b >= 0) {
      const long j = (long)(pos ? pos[pos_off + b * pos_st] : 0) + i;
      crow = cache_row(&cl, &pg, N, b, j, h);
#if KV_QUANT == 2
      if (crow >= 0) srow = cache_row(&sl, &pg, N, b, j, h);
#endif
      /* a racing store of the same value: any order leaves 1 (a row's lane 0 reports) */
      if (crow < 0 && err)
        if (l == 0) err[err_off] = 1;
    }
  }
  const bool live = crow >= 0;
#define X8(l) LD8S(IN_DT, x, xrow + 8 * (l) * xd, xd)
#if ROWWISE
  (void)lid, (void)lmn, (void)lmx;
  if (!live) return;
#if KV_QUANT
  /* each group's min / max over its chunks, its word, then its codes (the
   * chunks read again: they are in the cache) */
  const int Gq = KV_QUANT == 1 ? G : 1, Lg = (int)L / Gq;
  for (int g = 0; g < Gq; g++) {
    float8 vmn = (float8)(INFINITY), vmx = (float8)(-INFINITY);
    int8 bad = (int8)(0);
    for (int k = g * Lg; k < (g + 1) * Lg; k++) {
      const float8 v = X8(k);
      vmn = fmin(vmn, v);
      vmx = fmax(vmx, v);
      bad |= isnan(v) | isinf(v);
    }
    const float mn = minmax8(vmn).x, mx = any(bad) ? INFINITY : minmax8(vmx).y;
    /* + 0 turns -0 into +0 (as below) */
#if KV_QUANT == 1
    const uint ssw = int4_group_params(mn + 0.0f, mx + 0.0f);
    const float2 ss = scale_shift_unpack(ssw);
    c[crow + g] = ssw;
    for (int k = g * Lg; k < (g + 1) * Lg; k++) c[crow + G + k] = int4_quant8(X8(k), ss.x, ss.y);
#else
    const uint ssw = fp8_row_params(mn + 0.0f, mx + 0.0f);
    const float2 ss = scale_shift_unpack(ssw);
    s[srow] = ssw;
    for (int k = 0; k < (int)L; k++) vstore2(fp8_quant8(X8(k), ss.x, ss.y), k, c + crow);
#endif
  }
#else
  for (int k = 0; k < (int)L; k++) ST8S(KV_DT, c, crow + 8 * k, 1, X8(k));
#endif
#else /* lanes */
  const float8 v = live ? X8(l) : (float8)(0.0f);

#if KV_QUANT
  /* lane min / max; a non-finite value marks its group with mx = +inf */
  const float2 m = minmax8(v);
  float mn = m.x, mx = m.y;
  lmn[lid] = mn;
  lmx[lid] = mx;
  barrier(CLK_LOCAL_MEM_FENCE);
  const int Lg = KV_QUANT == 1 ? L / G : L; /* lanes per quantization group */
  const int lead = lid - l % Lg;
  if (lid == lead) {
    for (int k = 1; k < Lg; k++) {
      mn = fmin(mn, lmn[lid + k]);
      mx = fmax(mx, lmx[lid + k]);
    }
    lmn[lid] = mn;
    lmx[lid] = mx;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* + 0 turns -0 into +0: fmin / fmax may pick either zero, the result must not */
  mn = lmn[lead] + 0.0f;
  mx = lmx[lead] + 0.0f;
  if (!live) return; /* after the last barrier */
#if KV_QUANT == 1
  const uint ssw = int4_group_params(mn, mx);
  const float2 ss = scale_shift_unpack(ssw);
  if (l % Lg == 0) c[crow + l / Lg] = ssw;
  c[crow + G + l] = int4_quant8(v, ss.x, ss.y);
#else
  const uint ssw = fp8_row_params(mn, mx);
  const float2 ss = scale_shift_unpack(ssw);
  if (l == 0) s[srow] = ssw;
  vstore2(fp8_quant8(v, ss.x, ss.y), l, c + crow);
#endif
#else
  if (live) ST8S(KV_DT, c, crow + 8 * l, 1, v);
#endif
#endif /* ROWWISE */
#undef X8
}

/* ------------------------------------------------------------------ read (dequantize) */

/* Output row (b, i, h) gets cache position start[b] + i (start absent: i);
 * a position outside the cache gives a zero row and raises the error flag. */
__kernel void clattn_kv_read(
    int H, int D, int G, int rows, int n, int N,
    __global const CACHE_T *c, long c_off, long c_s0, long c_s1, long c_s2,
    __global const uint *s, long s_off, long s_s0, long s_s1, long s_s2,
    __global ELT(OUT_DT) *o, long o_off, long ob, long on, long oh, long od,
    __global const int *start, long start_off, long start_st,
    __global const int *table, long table_off, long table_st, int max_pages, int page_size,
    int num_pages, __global int *err, long err_off) {
  /* 32-bit index arithmetic, as in clattn_kv_write */
  const uint L = (uint)D >> 3;
  const uint gid = get_global_id(0);
#if ROWWISE
  const uint r = gid, l0 = 0, l1 = L;
#else
  const uint r = gid / L, l0 = gid - r * L, l1 = l0 + 1;
#endif
  if (r >= (uint)rows) return;
  const uint rh = r / (uint)H, bu = rh / (uint)n;
  const int h = (int)(r - rh * (uint)H), i = (int)(rh - bu * (uint)n), b = (int)bu;
  const kv_layout cl = {c_off, c_s0, c_s1, c_s2};
  const kv_pages pg = kv_pages_of(table, table_off, table_st, max_pages, page_size, num_pages);
  const long j = (long)(start ? start[start_off + b * start_st] : 0) + i;
  const long crow = cache_row(&cl, &pg, N, b, j, h);
  if (crow < 0 && err)
    if (l0 == 0) err[err_off] = 1; /* a row's first lane reports */
#if KV_QUANT == 2
  const kv_layout sl = {s_off, s_s0, s_s1, s_s2};
  const float2 rss = crow < 0 ? (float2)(0.0f) : scale_shift_unpack(s[kv_row(&sl, &pg, b, (int)j, h)]);
#endif
  for (uint l = l0; l < l1; l++) {
    float8 v = (float8)(0.0f);
    if (crow >= 0) {
#if KV_QUANT == 1
      const float2 ss = scale_shift_unpack(c[crow + l / (L / G)]);
      v = int4_dequant8(c[crow + G + l], ss.x, ss.y);
#elif KV_QUANT == 2
      v = fp8_dequant8(vload2(l, c + crow), rss.x, rss.y);
#else
      v = LD8(KV_DT, c, crow + 8 * l);
#endif
    }
    ST8S(OUT_DT, o, o_off + ob * b + on * i + oh * h + 8 * l * od, od, v);
  }
}
