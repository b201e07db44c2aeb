/* Checked workloads for the thread and leak tests (see workload.h). */
#include "workload.h"

#include "common.h"
#include "ref.h"
#include "ref_merge.h"
#include "ref_quant.h"
#include "ref_rerope.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_IN = 6 };

struct workload {
  wl_spec s;
  char name[64];
  int B, M, Hq, Hkv, D, N; /* the shape of each kind, see wl_create */
  double *in[MAX_IN];      /* inputs, logical row-major, already rounded to their dtype */
  size_t n_in[MAX_IN];
  double *want; /* the reference output */
  size_t n_want;
  double *want2; /* a second output (merge's lse, the dequantized int4 rows) */
  size_t n_want2;
  uint32_t *words; /* int4 cache words of the reference quantizer */
  size_t n_words;
  double tol;
};

/* splitmix64, per workload: wl_create needs no shared state either */
static double normal(uint64_t *st) {
  double u[2];
  for (int i = 0; i < 2; i++) {
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    u[i] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
  }
  return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static double *inputs(workload *w, int i, size_t n, clattn_dtype dt, uint64_t *st) {
  w->in[i] = malloc(sizeof(double) * n);
  w->n_in[i] = n;
  if (w->in[i])
    for (size_t j = 0; j < n; j++) w->in[i][j] = round_dtype(normal(st), dt);
  return w->in[i];
}

const char *wl_name(const workload *w) { return w->name; }

void wl_free(workload *w) {
  if (!w) return;
  for (int i = 0; i < MAX_IN; i++) free(w->in[i]);
  free(w->want);
  free(w->want2);
  free(w->words);
  free(w);
}

workload *wl_create(const wl_spec *spec) {
  workload *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->s = *spec;
  const int D = spec->head_dim;
  const clattn_dtype dt = spec->dtype;
  uint64_t st = spec->seed * 0x9e3779b97f4a7c15ull + 1;
  w->D = D;
  bool ok = true;
  switch (spec->kind) {
  case WL_DECODE:
  case WL_REFERENCE_DECODE: {
    /* q [B, 1, Hq, D], k, v [B, N, Hkv, D], o like q */
    w->B = 2, w->M = 1, w->Hq = 4, w->Hkv = 2, w->N = 70;
    const size_t nq = (size_t)w->B * w->Hq * D, nkv = (size_t)w->B * w->N * w->Hkv * D;
    ok = inputs(w, 0, nq, dt, &st) && inputs(w, 1, nkv, dt, &st) && inputs(w, 2, nkv, dt, &st);
    w->n_want = nq;
    ok = ok && (w->want = malloc(sizeof(double) * nq));
    if (ok) {
      ref_decode_args ra = {w->B, 1,    w->Hq, w->Hkv, D,   w->N, w->in[0], w->in[1], w->in[2],
                            NULL, NULL, NULL,  1.0 / sqrt((double)D),       0,        w->want,
                            NULL};
      ref_decode(&ra);
    }
    w->tol = tol_for(dt) + 1e-4; /* o's rounding plus f32 accumulation over 70 keys */
    snprintf(w->name, sizeof w->name, "%s %s D=%d",
             spec->kind == WL_DECODE ? "decode" : "reference decode", clattn_dtype_name(dt), D);
    break;
  }
  case WL_MERGE: {
    /* three parts o_i [B, M, H, D] (dtype), lse_i [B, H, M] f32; o, lse f32 */
    w->B = 2, w->M = 1, w->Hq = 4, w->N = 3;
    const size_t no = (size_t)w->B * w->M * w->Hq * D, nl = (size_t)w->B * w->Hq * w->M;
    for (int i = 0; i < w->N && ok; i++)
      ok = inputs(w, i, no, dt, &st) && inputs(w, 3 + i, nl, CLATTN_F32, &st);
    w->n_want = no;
    w->n_want2 = nl;
    ok = ok && (w->want = malloc(sizeof(double) * no)) && (w->want2 = malloc(sizeof(double) * nl));
    if (ok) {
      const double *po[3] = {w->in[0], w->in[1], w->in[2]}, *pl[3] = {w->in[3], w->in[4], w->in[5]};
      ref_merge_args rm = {w->N, w->B, w->M, w->Hq, D, po, pl};
      ref_merge(&rm, w->want, w->want2);
    }
    w->tol = 1e-5; /* f32 output of exact inputs: a few roundings */
    snprintf(w->name, sizeof w->name, "merge %s D=%d", clattn_dtype_name(dt), D);
    break;
  }
  case WL_KV_APPEND: {
    /* new rows [B, Hkv, D] f32 at positions {3, 9} of a zeroed f16 cache [B, N, Hkv, D] */
    w->B = 2, w->Hkv = 2, w->N = 16;
    const size_t nr = (size_t)w->B * w->Hkv * D, nc = (size_t)w->B * w->N * w->Hkv * D;
    ok = inputs(w, 0, nr, CLATTN_F32, &st) && (w->want = calloc(nc, sizeof(double)));
    w->n_want = nc;
    for (int b = 0; ok && b < w->B; b++)
      for (size_t e = 0; e < (size_t)w->Hkv * D; e++)
        w->want[(((size_t)b * w->N + 3 + 6 * b) * w->Hkv) * D + e] =
            round_dtype(w->in[0][(size_t)b * w->Hkv * D + e], CLATTN_F16);
    w->tol = 0; /* bit-exact: one rounding to f16 */
    snprintf(w->name, sizeof w->name, "kv append f16 D=%d", D);
    break;
  }
  case WL_KV_QUANTIZE: {
    /* src [1, N, Hkv, D] f32 into an int4 cache of two groups, read back */
    w->B = 1, w->Hkv = 2, w->N = 8;
    const int G = 2, X = G + D / 8;
    const size_t rows = (size_t)w->N * w->Hkv, ne = rows * D;
    ok = inputs(w, 0, ne, CLATTN_F32, &st);
    w->n_words = rows * X;
    w->n_want2 = ne;
    ok = ok && (w->words = malloc(4 * w->n_words)) && (w->want2 = malloc(sizeof(double) * ne));
    float *row = malloc(sizeof(float) * D);
    ok = ok && row;
    for (size_t r = 0; ok && r < rows; r++) {
      for (int d = 0; d < D; d++) row[d] = (float)w->in[0][r * D + d];
      ref_int4_quantize_row(row, D, G, w->words + r * X);
      ref_int4_dequantize_row(w->words + r * X, D, G, w->want2 + r * D);
    }
    free(row);
    w->tol = 0x1p-23; /* the words bit-exact; the dequantized f32 value, one rounding */
    snprintf(w->name, sizeof w->name, "kv quantize int4 D=%d", D);
    break;
  }
  case WL_REROPE: {
    /* q1, q2 [1, Hq, N, D], k1, k2, v [1, Hkv, N, D], o like q1 */
    w->B = 1, w->Hq = 2, w->Hkv = 1, w->N = 12;
    const size_t nq = (size_t)w->Hq * w->N * D, nk = (size_t)w->Hkv * w->N * D;
    ok = inputs(w, 0, nq, dt, &st) && inputs(w, 1, nq, dt, &st) && inputs(w, 2, nk, dt, &st) &&
         inputs(w, 3, nk, dt, &st) && inputs(w, 4, nk, dt, &st);
    w->n_want = nq;
    ok = ok && (w->want = malloc(sizeof(double) * nq));
    if (ok) {
      ref_rerope_args ra;
      memset(&ra, 0, sizeof ra);
      ra.Z = 1, ra.Hq = w->Hq, ra.Hkv = w->Hkv, ra.Nq = ra.Nk = w->N, ra.D = D;
      ra.window = 4, ra.causal = 1, ra.scale = 1.0 / sqrt((double)D);
      ra.q1 = w->in[0], ra.q2 = w->in[1], ra.k1 = w->in[2], ra.k2 = w->in[3], ra.v = w->in[4];
      ra.o = w->want;
      ref_rerope_fwd(&ra);
    }
    /* o's rounding (f16 2^-11, bf16 2^-8) times a few; f32: accumulation over 12 keys */
    w->tol = dt == CLATTN_F32 ? 2e-5 : tol_for(dt);
    snprintf(w->name, sizeof w->name, "rerope %s D=%d", clattn_dtype_name(dt), D);
    break;
  }
  }
  if (!ok) {
    wl_free(w);
    return NULL;
  }
  return w;
}

/* ---------------------------------------------------------------- running */

typedef struct run {
  cl_context cl;
  cl_command_queue queue;
  char *msg;
  size_t msg_size;
  bool failed;
  cl_mem mems[16];
  int nmems;
} run;

#if defined(__GNUC__)
static void fail(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
static void fail(run *r, const char *fmt, ...) {
  if (r->failed) return; /* the first failure is the one to read */
  r->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, r->msg_size, fmt, ap);
  va_end(ap);
}

static cl_mem upload(run *r, const void *bytes, size_t size) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(r->cl, CL_MEM_READ_WRITE | (bytes ? CL_MEM_COPY_HOST_PTR : 0),
                            size ? size : 4, (void *)bytes, &err);
  if (err != CL_SUCCESS) {
    fail(r, "clCreateBuffer(%zu bytes) failed: %d", size, (int)err);
    return NULL;
  }
  if (r->nmems < 16) r->mems[r->nmems++] = m;
  return m;
}

/* n doubles as dtype dt, or (x NULL) n elements of zeros. */
static cl_mem upload_as(run *r, const double *x, size_t n, clattn_dtype dt) {
  const size_t es = clattn_dtype_size(dt);
  void *tmp = calloc(n ? n : 1, es);
  if (!tmp) {
    fail(r, "out of host memory");
    return NULL;
  }
  if (x) host_pack(x, n, dt, tmp);
  cl_mem m = upload(r, tmp, n * es);
  free(tmp);
  return m;
}

static void call(run *r, clattn_status s, const char *what) {
  if (s != CLATTN_SUCCESS)
    fail(r, "%s -> %s: %.400s", what, clattn_status_string(s), clattn_last_error());
}

static double *download(run *r, cl_mem m, size_t n, clattn_dtype dt) {
  const size_t es = clattn_dtype_size(dt);
  void *tmp = malloc(n * es + 1);
  double *out = malloc(sizeof(double) * (n ? n : 1));
  if (!tmp || !out) {
    fail(r, "out of host memory");
  } else if (!r->failed) {
    cl_int err = clEnqueueReadBuffer(r->queue, m, CL_TRUE, 0, n * es, tmp, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      fail(r, "clEnqueueReadBuffer failed: %d", (int)err);
    else
      host_unpack(tmp, n, dt, out);
  }
  free(tmp);
  if (r->failed) {
    free(out);
    return NULL;
  }
  return out;
}

/* |got - want| <= tol (1 + |want|) everywhere, NaN nowhere. */
static void compare(run *r, const char *what, const double *got, const double *want, size_t n,
                    double tol) {
  if (!got) return;
  for (size_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i])))) {
      fail(r, "%s: element %zu is %.9g, the reference %.9g (tolerance %.3g)", what, i, got[i],
           want[i], tol);
      return;
    }
}

static void run_decode(run *r, const workload *w, clattn_context *ctx) {
  const clattn_dtype dt = w->s.dtype;
  cl_mem q = upload_as(r, w->in[0], w->n_in[0], dt), k = upload_as(r, w->in[1], w->n_in[1], dt),
         v = upload_as(r, w->in[2], w->n_in[2], dt), o = upload_as(r, NULL, w->n_want, dt);
  if (r->failed) return;
  clattn_decode_params p;
  memset(&p, 0, sizeof p);
  p.q = clattn_tensor_4d(q, 0, dt, w->B, 1, w->Hq, w->D);
  p.k = clattn_tensor_4d(k, 0, dt, w->B, w->N, w->Hkv, w->D);
  p.v = clattn_tensor_4d(v, 0, dt, w->B, w->N, w->Hkv, w->D);
  p.o = clattn_tensor_4d(o, 0, dt, w->B, 1, w->Hq, w->D);
  if (w->s.kind == WL_DECODE) {
    p.num_splits = 2;
    call(r, clattn_decode(ctx, r->queue, &p, 0, NULL, NULL), "clattn_decode");
  } else {
    call(r, clattn_reference_decode(ctx, r->queue, &p, 0, NULL, NULL), "clattn_reference_decode");
  }
  double *got = download(r, o, w->n_want, dt);
  compare(r, "o", got, w->want, w->n_want, w->tol);
  free(got);
}

static void run_merge(run *r, const workload *w, clattn_context *ctx) {
  const clattn_dtype dt = w->s.dtype;
  clattn_tensor po[3], pl[3];
  for (int i = 0; i < 3; i++) {
    po[i] = clattn_tensor_4d(upload_as(r, w->in[i], w->n_in[i], dt), 0, dt, w->B, w->M, w->Hq, w->D);
    pl[i] = clattn_tensor_3d(upload_as(r, w->in[3 + i], w->n_in[3 + i], CLATTN_F32), 0, CLATTN_F32,
                             w->B, w->Hq, w->M);
  }
  cl_mem o = upload_as(r, NULL, w->n_want, CLATTN_F32), lse = upload_as(r, NULL, w->n_want2, CLATTN_F32);
  if (r->failed) return;
  clattn_merge_params p;
  memset(&p, 0, sizeof p);
  p.n = 3;
  p.parts_o = po;
  p.parts_lse = pl;
  p.o = clattn_tensor_4d(o, 0, CLATTN_F32, w->B, w->M, w->Hq, w->D);
  p.maybe_lse = clattn_tensor_3d(lse, 0, CLATTN_F32, w->B, w->Hq, w->M);
  call(r, clattn_merge(ctx, r->queue, &p, 0, NULL, NULL), "clattn_merge");
  double *got = download(r, o, w->n_want, CLATTN_F32);
  compare(r, "o", got, w->want, w->n_want, w->tol);
  free(got);
  got = download(r, lse, w->n_want2, CLATTN_F32);
  compare(r, "lse", got, w->want2, w->n_want2, w->tol);
  free(got);
}

static void run_append(run *r, const workload *w, clattn_context *ctx) {
  const int32_t pos[2] = {3, 9};
  cl_mem rows = upload_as(r, w->in[0], w->n_in[0], CLATTN_F32);
  cl_mem cache = upload_as(r, NULL, w->n_want, CLATTN_F16);
  cl_mem pos_m = upload(r, pos, sizeof pos);
  if (r->failed) return;
  clattn_kv_append_params p;
  memset(&p, 0, sizeof p);
  p.new_k = clattn_tensor_3d(rows, 0, CLATTN_F32, w->B, w->Hkv, w->D);
  p.k_cache = clattn_tensor_4d(cache, 0, CLATTN_F16, w->B, w->N, w->Hkv, w->D);
  p.pos = clattn_tensor_1d(pos_m, 0, CLATTN_I32, w->B);
  call(r, clattn_kv_append(ctx, r->queue, &p, 0, NULL, NULL), "clattn_kv_append");
  double *got = download(r, cache, w->n_want, CLATTN_F16);
  compare(r, "cache", got, w->want, w->n_want, 0.0);
  free(got);
}

static void run_quantize(run *r, const workload *w, clattn_context *ctx) {
  const int G = 2, X = G + w->D / 8;
  cl_mem src = upload_as(r, w->in[0], w->n_in[0], CLATTN_F32);
  cl_mem cache = upload(r, NULL, 4 * w->n_words);
  cl_mem out = upload_as(r, NULL, w->n_want2, CLATTN_F32);
  if (r->failed) return;
  clattn_kv_quantize_params q;
  memset(&q, 0, sizeof q);
  q.src = clattn_tensor_4d(src, 0, CLATTN_F32, 1, w->N, w->Hkv, w->D);
  q.cache = clattn_tensor_4d(cache, 0, CLATTN_INT4, 1, w->N, w->Hkv, X);
  q.kv_groups = G;
  call(r, clattn_kv_quantize(ctx, r->queue, &q, 0, NULL, NULL), "clattn_kv_quantize");
  clattn_kv_dequantize_params dq;
  memset(&dq, 0, sizeof dq);
  dq.cache = q.cache;
  dq.out = clattn_tensor_4d(out, 0, CLATTN_F32, 1, w->N, w->Hkv, w->D);
  dq.kv_groups = G;
  if (!r->failed) call(r, clattn_kv_dequantize(ctx, r->queue, &dq, 0, NULL, NULL), "clattn_kv_dequantize");
  uint32_t *words = malloc(4 * w->n_words);
  if (!r->failed && words) {
    cl_int err = clEnqueueReadBuffer(r->queue, cache, CL_TRUE, 0, 4 * w->n_words, words, 0, NULL, NULL);
    if (err != CL_SUCCESS) fail(r, "clEnqueueReadBuffer failed: %d", (int)err);
    for (size_t i = 0; !r->failed && i < w->n_words; i++)
      if (words[i] != w->words[i])
        fail(r, "int4 cache word %zu is %08x, the reference quantizer's %08x", i, words[i],
             w->words[i]);
  }
  free(words);
  double *got = download(r, out, w->n_want2, CLATTN_F32);
  compare(r, "dequantized", got, w->want2, w->n_want2, w->tol);
  free(got);
}

static void run_rerope(run *r, const workload *w, clattn_context *ctx) {
  const clattn_dtype dt = w->s.dtype;
  cl_mem m[5];
  for (int i = 0; i < 5; i++) m[i] = upload_as(r, w->in[i], w->n_in[i], dt);
  cl_mem o = upload_as(r, NULL, w->n_want, dt);
  if (r->failed) return;
  clattn_rerope_params p;
  memset(&p, 0, sizeof p);
  p.q1 = clattn_tensor_4d(m[0], 0, dt, 1, w->Hq, w->N, w->D);
  p.q2 = clattn_tensor_4d(m[1], 0, dt, 1, w->Hq, w->N, w->D);
  p.k1 = clattn_tensor_4d(m[2], 0, dt, 1, w->Hkv, w->N, w->D);
  p.k2 = clattn_tensor_4d(m[3], 0, dt, 1, w->Hkv, w->N, w->D);
  p.v = clattn_tensor_4d(m[4], 0, dt, 1, w->Hkv, w->N, w->D);
  p.o = clattn_tensor_4d(o, 0, dt, 1, w->Hq, w->N, w->D);
  p.window = 4;
  p.causal = 1;
  call(r, clattn_rerope_fwd(ctx, r->queue, &p, 0, NULL, NULL), "clattn_rerope_fwd");
  double *got = download(r, o, w->n_want, dt);
  compare(r, "o", got, w->want, w->n_want, w->tol);
  free(got);
}

int wl_run(const workload *w, clattn_context *ctx, cl_command_queue queue, char *msg,
           size_t msg_size) {
  run r = {clattn_context_cl(ctx), queue, msg, msg_size, false, {0}, 0};
  if (msg_size) msg[0] = '\0';
  switch (w->s.kind) {
  case WL_DECODE:
  case WL_REFERENCE_DECODE: run_decode(&r, w, ctx); break;
  case WL_MERGE: run_merge(&r, w, ctx); break;
  case WL_KV_APPEND: run_append(&r, w, ctx); break;
  case WL_KV_QUANTIZE: run_quantize(&r, w, ctx); break;
  case WL_REROPE: run_rerope(&r, w, ctx); break;
  }
  if (clFinish(queue) != CL_SUCCESS) fail(&r, "clFinish failed");
  for (int i = 0; i < r.nmems; i++) clReleaseMemObject(r.mems[i]);
  return r.failed ? -1 : 0;
}
