/*
 * libFuzzer target over argument validation and planning of every public
 * operation, on the fake OpenCL runtime (fake_cl.c). See harness.h for the
 * input format and README.md for how to build and run it.
 *
 * The oracle, after every call:
 *   - a failing call enqueued nothing, left no event and no object behind;
 *   - a successful call: every tensor its contract (ops.c) names lies in a
 *     buffer of the right context, with the documented ndim, dtype and
 *     shape, dimensions below 2^31, and reaches only bytes inside its buffer
 *     (first and last byte in exact 128-bit arithmetic, independent of the
 *     library); outputs overlap no other tensor; a non-zero offset, and
 *     every non-contiguous stride, of a tensor reaches the kernels that use
 *     its buffer; workspaces hold what the call needs; the commands wait for
 *     the wait list and the returned event waits for them all; the number of
 *     kernels is plausible; the fake runtime saw no call a real runtime
 *     refuses.
 * A failure prints "FUZZ ORACLE [class] ..." and aborts. $FUZZ_SKIP lists
 * classes (or class:text, matching text in the message) to count instead,
 * for fuzzing past a known defect; by default nothing is skipped.
 */
#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clattn_force_path(int path); /* the library's test hook (host/internal.h) */

static state *cur; /* the input being run, for messages */

/* ------------------------------------------------------------------ failures */

static bool skipped(const char *cls, const char *msg) {
  const char *skip = getenv("FUZZ_SKIP");
  if (!skip || !*skip) return false;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", skip);
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    char *colon = strchr(tok, ':');
    if (colon) *colon = '\0';
    if (strcmp(tok, cls) == 0 && (!colon || strstr(msg, colon + 1))) return true;
  }
  return false;
}

bool avoid(const char *what) { return skipped("avoid", what); }

void fake_fail(const char *cls, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (skipped(cls, msg)) return;
  const bool during = cur && cur->in_call;
  fprintf(stderr, "FUZZ ORACLE [%s] op=%s profile=%s %s%s: %s\n", cls, cur && cur->op ? cur->op->name : "?",
          cur ? fake_profile_at(cur->profile)->key : "?", during ? "during the call" : "status=",
          during ? "" : cur ? clattn_status_string(cur->st) : "?", msg);
  if (cur && !during && cur->st != CLATTN_SUCCESS) fprintf(stderr, "  library message: %s\n", clattn_last_error());
  abort();
}

void rule(state *S, bool ok, const char *fmt, ...) {
  (void)S;
  if (ok) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fake_fail("contract", "accepted although %s", msg);
}

/* ------------------------------------------------------------------ the world */

static world worlds[16];
static bool world_made[16];

static world *get_world(int profile) {
  world *w = &worlds[profile];
  if (world_made[profile]) return w;
  fake_set_harness(true);
  cl_device_id d0 = fake_device(profile, 0), d1 = fake_device(profile, 1);
  cl_device_id both[2] = {d0, d1};
  cl_int err;
  w->cl[0] = clCreateContext(NULL, 2, both, NULL, NULL, &err);
  w->cl[1] = clCreateContext(NULL, 1, &d0, NULL, NULL, &err);
  const cl_context cls[NCX] = {w->cl[0], w->cl[0], w->cl[1]};
  const cl_device_id devs[NCX] = {d0, d1, d0};
  clattn_context_options opts;
  memset(&opts, 0, sizeof opts);
  opts.cache_dir = ""; /* nothing on disk */
  for (int i = 0; i < NCX; i++) {
    if (clattn_context_create(cls[i], devs[i], &opts, &w->cx[i]) != CLATTN_SUCCESS) {
      fprintf(stderr, "fuzz: clattn_context_create on %s: %s\n", fake_profile_at(profile)->key,
              clattn_last_error());
      abort();
    }
    w->q[i][0] = clCreateCommandQueue(cls[i], devs[i], 0, &err);
    w->q[i][1] = clCreateCommandQueue(cls[i], devs[i], CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
  }
  fake_set_harness(false);
  world_made[profile] = true;
  return w;
}

/* The clattn contexts cache a program per kernel variant, and fuzzed shapes
 * make variants without end: past a few thousand the worlds start afresh. */
static void maybe_reset_worlds(void) {
  if (fake_live_programs() < 4000) return;
  fake_set_harness(true);
  for (int p = 0; p < 16; p++) {
    if (!world_made[p]) continue;
    world *w = &worlds[p];
    for (int i = 0; i < NCX; i++) {
      clattn_context_release(&w->cx[i]);
      clReleaseCommandQueue(w->q[i][0]);
      clReleaseCommandQueue(w->q[i][1]);
    }
    clReleaseContext(w->cl[0]);
    clReleaseContext(w->cl[1]);
    world_made[p] = false;
  }
  fake_set_harness(false);
}

/* ------------------------------------------------------------------ slots and buffers */

int64_t dtype_bytes(clattn_dtype dt) {
  switch (dt) {
  case CLATTN_F32: case CLATTN_I32: case CLATTN_INT4: case CLATTN_FP8: case CLATTN_FP8_FNUZ: return 4;
  case CLATTN_F16: case CLATTN_BF16: return 2;
  case CLATTN_F64: return 8;
  }
  return 0;
}

int add_slot(state *S, const char *name, clattn_tensor *t, int role, int cx) {
  if (S->ns >= MAX_SLOTS) abort();
  slot *s = &S->s[S->ns];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->t = t;
  s->buf = s->own = -1;
  s->role = role;
  s->cx = cx;
  memset(t, 0, sizeof *t);
  return S->ns++;
}

static int new_buf(state *S, int cl, uint64_t size) {
  if (S->nb >= MAX_BUFS) return 0;
  S->b[S->nb] = (bufd){cl, size, NULL};
  return S->nb++;
}

static int cx_cl(int cx) { return cx == CX_B ? 1 : 0; }
cl_context slot_cl(const state *S, int i) { return S->w->cl[cx_cl(S->s[i].cx)]; }

/* Exact bytes [lo, hi) a view reaches (empty when a dimension is 0). */
typedef struct span {
  __int128 lo, hi;
  bool empty;
} span;

static span view_span(const clattn_tensor *t, int ndim, const int64_t *shape) {
  span sp = {(__int128)t->offset, (__int128)t->offset, false};
  const __int128 es = dtype_bytes(t->dtype);
  if (ndim > CLATTN_MAX_DIMS) ndim = CLATTN_MAX_DIMS;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] <= 0) {
      sp.empty = true;
      return sp;
    }
    /* |(shape - 1) stride| < 2^126; clamped to 2^100 (past any buffer) so that
     * the bytes and the sum of five dimensions stay inside 128 bits */
    const __int128 lim = (__int128)1 << 100;
    __int128 ext = (__int128)(shape[i] - 1) * t->stride[i];
    ext = ext > lim ? lim : ext < -lim ? -lim : ext;
    ext *= es;
    if (ext < 0) sp.lo += ext; else sp.hi += ext;
  }
  sp.hi += es;
  return sp;
}

static uint64_t clamp_size(__int128 v) {
  if (v < 4) return 4;
  if (v > ((__int128)1 << 62)) return (uint64_t)1 << 62;
  return (uint64_t)v;
}

void fit_buffer(state *S, int i, uint64_t slack) {
  slot *s = &S->s[i];
  if (s->buf < 0) return;
  span sp = view_span(s->t, s->t->ndim, s->t->shape);
  S->b[s->buf].size = clamp_size((sp.empty ? (__int128)s->t->offset : sp.hi) + slack);
}

static size_t canon_offset(const state *S, clattn_dtype dt) {
  const size_t es = (size_t)dtype_bytes(dt);
  switch (S->off_mode) {
  case 1: return 256;
  case 2: return 16 * es;
  case 3: return 3 * es; /* not 16-byte aligned */
  }
  return 0;
}

void canon_perm(state *S, int i, clattn_dtype dt, int ndim, const int64_t *shape, const int *perm,
                int64_t pad) {
  slot *s = &S->s[i];
  clattn_tensor *t = s->t;
  t->dtype = dt;
  t->ndim = ndim;
  int64_t st = 1;
  for (int k = ndim - 1; k >= 0; k--) {
    const int d = perm ? perm[k] : k;
    t->shape[d] = shape[d];
    t->stride[d] = st;
    int64_t n = shape[d] > 0 ? shape[d] : 1;
    if (k == ndim - 1 && pad > 0 && ndim > 1) n += pad; /* padded rows */
    st *= n;
  }
  t->offset = canon_offset(S, dt);
  s->buf = s->own = new_buf(S, cx_cl(s->cx), 0);
  fit_buffer(S, i, 0);
}

void drop(state *S, int i) { S->s[i].buf = -1; }

void canon(state *S, int i, clattn_dtype dt, int ndim, const int64_t *shape, int64_t pad) {
  canon_perm(S, i, dt, ndim, shape, NULL, pad);
}

void stack_slots(state *S, const int *sl, int n, uint64_t gap) {
  const int b = S->s[sl[0]].buf;
  uint64_t at = S->s[sl[0]].t->offset;
  for (int k = 0; k < n; k++) {
    slot *s = &S->s[sl[k]];
    span sp = view_span(s->t, s->t->ndim, s->t->shape);
    const uint64_t len = sp.empty ? 0 : (uint64_t)(sp.hi - (__int128)s->t->offset);
    s->t->offset = (size_t)at;
    s->buf = b;
    at += len + gap;
    const int64_t es = dtype_bytes(s->t->dtype);
    if (es > 0) at = (at + (uint64_t)es - 1) / (uint64_t)es * (uint64_t)es;
  }
  S->b[b].size = at > 4 ? at : 4;
}

void add_int(state *S, const char *name, int *v) {
  if (S->nsc >= MAX_SCALARS) return;
  scalar *c = &S->sc[S->nsc++];
  snprintf(c->name, sizeof c->name, "%s", name);
  c->i = v;
  c->f = NULL;
}
void add_float(state *S, const char *name, float *v) {
  if (S->nsc >= MAX_SCALARS) return;
  scalar *c = &S->sc[S->nsc++];
  snprintf(c->name, sizeof c->name, "%s", name);
  c->i = NULL;
  c->f = v;
}

bool present(const state *S, int i) { return i >= 0 && S->s[i].t->buf != NULL; }

/* ------------------------------------------------------------------ edits */

static const int64_t specials[] = {
    0, 1, -1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 127, 128, 255, 256, 1023, 1024, 4095,
    4096, 65535, 65536, (int64_t)1 << 20, (int64_t)1 << 24, INT32_MAX, (int64_t)INT32_MAX + 1,
    (int64_t)INT32_MAX + 2, UINT32_MAX, (int64_t)1 << 32, ((int64_t)1 << 32) + 1, ((int64_t)1 << 32) + 2,
    ((int64_t)1 << 32) + 8, (int64_t)1 << 33, (int64_t)1 << 36, ((int64_t)1 << 40) - 256, (int64_t)1 << 40,
    ((int64_t)1 << 40) + 1, (int64_t)1 << 48, (int64_t)1 << 62, INT64_MAX, INT64_MIN, INT32_MIN,
    -((int64_t)1 << 32), -256, -16, INT64_MAX - 255, ((int64_t)1 << 63) / 3, ((int64_t)1 << 56) + 7,
};
#define NSPECIAL ((int)(sizeof specials / sizeof specials[0]))

static const float fspecials[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.125f, 1e-30f, 1e30f, 1e-45f, 10000.0f,
                                  500000.0f, 1.0000001f, 0.5f, 3.4e38f, NAN, INFINITY, -INFINITY};
#define NFSPECIAL ((int)(sizeof fspecials / sizeof fspecials[0]))

/* A new value from `old` by edit kind k and argument byte v. */
static int64_t edit_value(state *S, rd *r, int64_t old, unsigned k, unsigned v) {
  (void)S;
  switch (k % 8) {
  case 0: return (int8_t)v;
  case 1: return (int64_t)((uint64_t)old + (uint64_t)(int64_t)(int8_t)v);
  case 2: return specials[v % NSPECIAL];
  case 3: return (int64_t)((uint64_t)old * (uint64_t)(v % 8 + 2));
  case 4: return (int64_t)((uint64_t)1 << (v % 64));
  case 5: {
    uint64_t x = v;
    for (int i = 0; i < 7; i++) x = (x << 8) | rd_u8(r);
    return (int64_t)x;
  }
  case 6: return (int64_t)((uint64_t)specials[v % NSPECIAL] + (uint64_t)(int64_t)(int8_t)rd_u8(r));
  default: return v % 2 ? (int64_t)(0 - (uint64_t)old) : old / 2;
  }
}

static void apply_edit(state *S, rd *r) {
  const unsigned target = rd_u8(r), field = rd_u8(r), kind = rd_u8(r), v = rd_u8(r);
  const int total = S->ns + S->nsc;
  if (total == 0) return;
  const int tix = (int)(target % (unsigned)total);
  if (tix >= S->ns) {
    scalar *c = &S->sc[tix - S->ns];
    if (c->i) *c->i = (int)(int32_t)(uint32_t)(uint64_t)edit_value(S, r, *c->i, kind, v);
    else *c->f = (kind % 2) ? fspecials[v % NFSPECIAL] : (float)(int8_t)v / 8.0f;
    (void)field;
    return;
  }
  slot *s = &S->s[tix];
  clattn_tensor *t = s->t;
  const unsigned f = field % 15;
  s->edited |= f == 0 || f == 4 || f == 14; /* buffer, shape[0] or size: a workspace keeps what it was given */
  if (f == 0) { /* buffer choice */
    switch (v % 6) {
    case 0: s->buf = -1; break;
    case 1: /* its own buffer (back, for an optional tensor left absent) */
      if (s->own >= 0) s->buf = s->own;
      else if (s->buf < 0) s->buf = s->own = new_buf(S, cx_cl(s->cx), 0), fit_buffer(S, tix, 0);
      break;
    case 2: { /* share another slot's buffer */
      const int o = (int)(rd_u8(r) % (unsigned)S->ns);
      if (S->s[o].buf >= 0) s->buf = S->s[o].buf;
      break;
    }
    case 3: { /* a copy of its buffer in the other context */
      const uint64_t size = s->buf >= 0 ? S->b[s->buf].size : 4096;
      s->buf = new_buf(S, 1 - cx_cl(s->cx), size);
      break;
    }
    case 4: s->buf = new_buf(S, cx_cl(s->cx), (uint64_t)specials[rd_u8(r) % NSPECIAL] & ((1ull << 40) - 1)); break;
    default:
      if (s->buf >= 0) fit_buffer(S, tix, 0);
      break;
    }
    return;
  }
  if (f == 14) { /* its buffer's size */
    if (s->buf < 0) return;
    bufd *b = &S->b[s->buf];
    int64_t nv = edit_value(S, r, (int64_t)b->size, kind, v);
    b->size = (uint64_t)nv;
    if (b->size == 0) b->size = 1;
    return;
  }
  int64_t *field_p = NULL;
  int64_t scratch;
  if (f == 1) scratch = (int64_t)t->offset, field_p = &scratch;
  else if (f == 2) scratch = t->dtype, field_p = &scratch;
  else if (f == 3) scratch = t->ndim, field_p = &scratch;
  else if (f < 9) field_p = &t->shape[f - 4];
  else field_p = &t->stride[f - 9];
  int64_t nv;
  if (kind % 8 == 7 && f >= 4) { /* copy the field from another slot */
    const clattn_tensor *o = S->s[v % (unsigned)S->ns].t;
    nv = f < 9 ? o->shape[f - 4] : o->stride[f - 9];
  } else {
    nv = edit_value(S, r, *field_p, kind, v);
  }
  if (f == 1) t->offset = (size_t)(uint64_t)nv;
  else if (f == 2) t->dtype = (clattn_dtype)(int)(nv & 0xff);
  else if (f == 3) t->ndim = (int)(int32_t)(uint32_t)(uint64_t)nv;
  else *field_p = nv;
}

/* ------------------------------------------------------------------ the oracle */

static bool empty_view(const slot *s) {
  for (int i = 0; i < s->sndim; i++)
    if (s->sshape[i] <= 0) return true;
  return false;
}

void expect(state *S, int i, unsigned dtypes, int ndim, const int64_t *shape) {
  if (i < 0) return;
  slot *s = &S->s[i];
  s->relevant = true;
  s->run_base = -1;
  s->dtypes = dtypes;
  s->sndim = ndim;
  for (int d = 0; d < ndim; d++) s->sshape[d] = shape[d];
}

int count_kernels(const char *name) {
  int n = 0;
  for (int i = 0; i < fake_ncmds(); i++) {
    const fake_cmd *c = fake_cmd_at(i);
    if ((c->kind == FAKE_NDRANGE || c->kind == FAKE_GEMM) && (!name || strcmp(c->kernel, name) == 0)) n++;
  }
  return n;
}

static const char *u128s(__int128 v, char *buf) {
  if (v < 0) {
    buf[0] = '-';
    u128s(-v, buf + 1);
    return buf;
  }
  char tmp[48];
  int n = 0;
  unsigned __int128 u = (unsigned __int128)v;
  do tmp[n++] = (char)('0' + (int)(u % 10)), u /= 10; while (u);
  for (int i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
  return buf;
}

static void describe(const slot *s, char *buf, size_t size) {
  const clattn_tensor *t = s->t;
  int n = snprintf(buf, size, "%s (%s, offset %zu, shape [", s->name, clattn_dtype_name(t->dtype), t->offset);
  const int nd = t->ndim >= 0 && t->ndim <= CLATTN_MAX_DIMS ? t->ndim : 0;
  for (int i = 0; i < nd && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  if (n > 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, "], strides [");
  for (int i = 0; i < nd && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? ", " : "", (long long)t->stride[i]);
  if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "])");
}

/* Sorted byte addresses of a small view's elements; NULL when too big. */
#define ENUM_LIMIT 16384
static int64_t *elements(const slot *s, size_t *count) {
  const clattn_tensor *t = s->t;
  size_t n = 1;
  for (int d = 0; d < s->sndim; d++) {
    if (s->sshape[d] <= 0) {
      *count = 0;
      return NULL;
    }
    if ((uint64_t)s->sshape[d] > ENUM_LIMIT || n * (size_t)s->sshape[d] > ENUM_LIMIT) return NULL;
    n *= (size_t)s->sshape[d];
  }
  int64_t *a = malloc(n * sizeof *a);
  const int64_t es = dtype_bytes(t->dtype);
  for (size_t e = 0; e < n; e++) {
    size_t rem = e;
    int64_t addr = (int64_t)t->offset;
    for (int d = s->sndim - 1; d >= 0; d--) {
      const int64_t idx = (int64_t)(rem % (size_t)s->sshape[d]);
      rem /= (size_t)s->sshape[d];
      addr += idx * t->stride[d] * es;
    }
    a[e] = addr;
  }
  int cmp(const void *x, const void *y);
  qsort(a, n, sizeof *a, cmp);
  *count = n;
  return a;
}
int cmp(const void *x, const void *y) {
  const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return a < b ? -1 : a > b;
}

/* The one aliasing clattn.h allows: decode's (and reference_decode's) o may
 * be q itself (the same buffer, offset, dtype, shape and the strides that
 * step), decode_multi's o a shard's q, and a shard's o its own q
 * (shards[j].o over shards[j].q). */
static bool same_view_exception(const state *S, const slot *x, const slot *y) {
  if (strncmp(S->op->name, "decode", 6) != 0 && strcmp(S->op->name, "reference_decode") != 0)
    return false;
  const size_t nx = strlen(x->name), ny = strlen(y->name);
  bool pair;
  if (strcmp(x->name, "o") == 0) /* the result: over any shard's q */
    pair = strcmp(y->name, "q") == 0 || (ny > 2 && strcmp(y->name + ny - 2, ".q") == 0);
  else /* a shard's o: over that shard's q only */
    pair = nx > 2 && nx == ny && strcmp(x->name + nx - 2, ".o") == 0 &&
           strcmp(y->name + ny - 2, ".q") == 0 && strncmp(x->name, y->name, nx - 2) == 0;
  if (!pair) return false;
  const clattn_tensor *a = x->t, *b = y->t;
  if (a->buf != b->buf || a->offset != b->offset || a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim && i < CLATTN_MAX_DIMS; i++)
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->stride[i] != b->stride[i])) return false;
  return true;
}

/* Whether two views (of one buffer) share a byte: exact for small views and
 * for dense ones, else undecided (false). */
static bool overlap(const slot *a, const slot *b) {
  span sa = view_span(a->t, a->sndim, a->sshape), sb = view_span(b->t, b->sndim, b->sshape);
  if (sa.empty || sb.empty || sa.hi <= sb.lo || sb.hi <= sa.lo) return false;
  size_t na = 0, nb = 0;
  int64_t *ea = elements(a, &na), *eb = elements(b, &nb);
  bool hit = false;
  if (ea && eb) {
    const int64_t la = dtype_bytes(a->t->dtype), lb = dtype_bytes(b->t->dtype);
    size_t i = 0, j = 0;
    while (i < na && j < nb && !hit) {
      if (ea[i] + la <= eb[j]) i++;
      else if (eb[j] + lb <= ea[i]) j++;
      else hit = true;
    }
  } else {
    /* dense views: the elements tile the span */
    __int128 ca = dtype_bytes(a->t->dtype), cb = dtype_bytes(b->t->dtype);
    const __int128 lim = (__int128)1 << 100;
    for (int d = 0; d < a->sndim && ca < lim; d++) ca = ca * a->sshape[d] < lim ? ca * a->sshape[d] : lim;
    for (int d = 0; d < b->sndim && cb < lim; d++) cb = cb * b->sshape[d] < lim ? cb * b->sshape[d] : lim;
    hit = ca < lim && cb < lim && ca == sa.hi - sa.lo && cb == sb.hi - sb.lo;
  }
  free(ea);
  free(eb);
  return hit;
}

/* The words following buffer argument `ai` of command c (its offset and
 * strides, by the library's convention), up to the next buffer. */
static int arg_words(const fake_cmd *c, int ai, uint64_t *w, int cap) {
  int n = 0;
  for (int j = ai + 1; j < c->nargs && j <= ai + 10 && n < cap; j++) {
    const fake_arg *a = &c->args[j];
    if (a->mem || a->local) break;
    if (a->size == 4) w[n++] = (uint64_t)(int64_t)(int32_t)(uint32_t)a->word[0];
    else
      for (size_t k = 0; k < (a->size + 7) / 8 && k < 64 && n < cap; k++) w[n++] = a->word[k];
  }
  return n;
}

/* A non-zero offset and every stride that differs from a contiguous layout
 * must reach some kernel argument next to the tensor's buffer. */
static void check_honoured(state *S, int i) {
  const slot *s = &S->s[i];
  const clattn_tensor *t = s->t;
  const int64_t es = dtype_bytes(t->dtype);
  const uint64_t off = (uint64_t)t->offset / (uint64_t)es;
  int64_t canon_st[CLATTN_MAX_DIMS];
  int64_t st = 1;
  for (int d = s->sndim - 1; d >= 0; d--) canon_st[d] = st, st *= s->sshape[d];
  const clattn_tensor *base = s->run_base >= 0 ? S->s[s->run_base].t : NULL;
  const uint64_t base_off = base ? (uint64_t)base->offset / (uint64_t)es : 0;
  bool seen = false, off_ok = off == 0;
  bool st_ok[CLATTN_MAX_DIMS];
  for (int d = 0; d < s->sndim; d++) st_ok[d] = s->sshape[d] <= 1 || t->stride[d] == canon_st[d];
  for (int ci = 0; ci < fake_ncmds(); ci++) {
    const fake_cmd *c = fake_cmd_at(ci);
    if (c->kind != FAKE_NDRANGE && c->kind != FAKE_GEMM) continue;
    for (int ai = 0; ai < c->nargs; ai++) {
      if (c->args[ai].mem != t->buf) continue;
      seen = true;
      uint64_t w[16];
      const int nw = arg_words(c, ai, w, 16);
      if (nw > 0 && (w[0] == off || w[0] == (uint64_t)t->offset)) off_ok = true; /* in elements or bytes */
      if (base && nw > 0 && w[0] == base_off)
        for (int j = 0; j < c->nargs; j++)
          if (c->args[j].size == 8 && !c->args[j].mem && c->args[j].word[0] == (uint64_t)s->run_spacing) off_ok = true;
      if (c->kind == FAKE_GEMM) { /* CLBlast's matrices: the fake checked their extent */
        for (int d = 0; d < s->sndim; d++) st_ok[d] = true;
        continue;
      }
      for (int d = 0; d < s->sndim; d++)
        for (int k = 0; k < nw; k++)
          if (w[k] == (uint64_t)t->stride[d]) st_ok[d] = true;
    }
    /* Kernels that take their views in one struct (cl/args.clh: decode's
     * clattn_decode_args) pass the offset and strides there, apart from the
     * buffer: any by-value argument of more than 64 bytes of a command that
     * takes the buffer counts. */
    bool takes = false;
    for (int ai = 0; ai < c->nargs; ai++) takes = takes || c->args[ai].mem == t->buf;
    if (!takes) continue;
    for (int ai = 0; ai < c->nargs; ai++) {
      const fake_arg *a = &c->args[ai];
      if (a->mem || a->local || a->size <= 64) continue;
      for (size_t k = 0; k < (a->size + 7) / 8 && k < 64; k++) {
        if (a->word[k] == off || a->word[k] == (uint64_t)t->offset) off_ok = true;
        for (int d = 0; d < s->sndim; d++)
          if (a->word[k] == (uint64_t)t->stride[d]) st_ok[d] = true;
      }
    }
  }
  if (!seen) return; /* not read by any kernel this time (its work is empty) */
  char desc[512];
  describe(s, desc, sizeof desc);
  if (!off_ok)
    fake_fail("honour", "%s: its offset (element %llu) reaches no kernel that takes its buffer", desc,
              (unsigned long long)off);
  for (int d = 0; d < s->sndim; d++)
    if (!st_ok[d])
      fake_fail("honour", "%s: its stride[%d] (%lld, not the contiguous %lld) reaches no kernel that takes its buffer",
                desc, d, (long long)t->stride[d], (long long)canon_st[d]);
}

static void check_slot(state *S, int i) {
  slot *s = &S->s[i];
  const clattn_tensor *t = s->t;
  char desc[512], a[48], b[48];
  describe(s, desc, sizeof desc);
  if (t->ndim != s->sndim) fake_fail("contract", "%s: ndim %d accepted, the operation takes %d", desc, t->ndim, s->sndim);
  if ((unsigned)t->dtype >= 32 || !(s->dtypes & CLATTN_DT(t->dtype)) || dtype_bytes(t->dtype) == 0)
    fake_fail("contract", "%s: dtype %d accepted here", desc, (int)t->dtype);
  if (fake_mem_context(t->buf) != slot_cl(S, i))
    fake_fail("context", "%s: its buffer belongs to another cl_context than the call's", desc);
  for (int d = 0; d < s->sndim; d++)
    if (t->shape[d] != s->sshape[d])
      fake_fail("contract", "%s: shape[%d] is %lld, the operation implies %lld", desc, d, (long long)t->shape[d],
                (long long)s->sshape[d]);
  span sp = view_span(t, s->sndim, s->sshape);
  const size_t size = fake_mem_size(t->buf);
  if (!sp.empty && (sp.lo < 0 || sp.hi > (__int128)size))
    fake_fail("bounds", "%s reaches bytes [%s, %s) of a buffer of %zu bytes", desc, u128s(sp.lo, a), u128s(sp.hi, b),
              size);
  for (int d = 0; d < s->sndim; d++)
    if (!s->big_ok && (t->shape[d] < 0 || t->shape[d] > INT32_MAX))
      fake_fail("dim31", "%s: shape[%d] = %lld accepted (the kernels index dimensions in 32 bits)", desc, d,
                (long long)t->shape[d]);
  if (s->contig && s->sndim > 0 && s->sshape[s->sndim - 1] > 1 && t->stride[s->sndim - 1] != 1)
    fake_fail("contract", "%s: its last dimension must be contiguous (the kernels read it so)", desc);
}

static const char *role_name(int r) {
  return r == R_IN ? "input" : r == R_OUT ? "output" : r == R_WS ? "workspace" : "error flag";
}

static void check_success(state *S) {
  for (int i = 0; i < S->ns; i++) S->s[i].relevant = false, S->s[i].run_base = -1;
  S->work = 0;
  S->max_kernels = 1 << 20;
  S->op->contract(S);
  for (int i = 0; i < S->ns; i++)
    if (S->s[i].relevant && present(S, i)) check_slot(S, i);
  /* outputs overlap nothing else (flags may be shared among themselves) */
  for (int i = 0; i < S->ns; i++) {
    const slot *x = &S->s[i];
    if (!x->relevant || !present(S, i) || x->role == R_IN) continue;
    for (int j = 0; j < S->ns; j++) {
      const slot *y = &S->s[j];
      if (j == i || !y->relevant || !present(S, j) || y->t->buf != x->t->buf) continue;
      if (y->role != R_IN && j < i) continue; /* the pair was seen */
      if (x->role == R_FLAG && y->role == R_FLAG) continue;
      if (same_view_exception(S, x, y)) continue;
      if (overlap(x, y)) {
        char dx[512], dy[512];
        describe(x, dx, sizeof dx);
        describe(y, dy, sizeof dy);
        fake_fail("overlap", "%s %s overlaps %s %s", role_name(x->role), dx, role_name(y->role), dy);
      }
    }
  }
  const int kernels = count_kernels(NULL);
  if (kernels > 0)
    for (int i = 0; i < S->ns; i++)
      if (S->s[i].relevant && present(S, i) && !empty_view(&S->s[i])) check_honoured(S, i);
  if (S->work > 0 && kernels == 0)
    fake_fail("enqueue", "success with %lld output elements but no kernel enqueued", (long long)S->work);
  if (kernels > S->max_kernels)
    fake_fail("enqueue", "%d kernels enqueued, at most %d are plausible", kernels, S->max_kernels);
  /* the event contract */
  if (S->want_event) {
    const int en = fake_event_node(S->event);
    if (en < 0) {
      fake_fail("events", "success without the event asked for");
      return;
    }
    for (int i = 0; i < fake_ncmds(); i++) {
      const fake_cmd *c = fake_cmd_at(i);
      if (c->kind == FAKE_MARKER || c->kind == FAKE_BARRIER) continue; /* they touch no memory */
      if (!fake_depends(en, c->node) && !fake_host_done(c->node, -1))
        fake_fail("events", "the returned event does not wait for command %d (%s)", i,
                  c->kernel[0] ? c->kernel : "marker/barrier/copy");
    }
  }
  for (cl_uint w = 0; w < S->num_wait && !S->bad_wait_list; w++) {
    const int wn = fake_event_node(S->wait[w]);
    for (int i = 0; i < fake_ncmds(); i++) {
      const fake_cmd *c = fake_cmd_at(i);
      if (!fake_depends(c->node, wn) && !fake_host_done(wn, c->node))
        fake_fail("events", "command %d (%s) does not wait for wait_list[%u]", i,
                  c->kernel[0] ? c->kernel : "marker/barrier/copy", w);
    }
  }
}

/* A workspace the call needs at least `need` bytes of. */
void check_workspace(state *S, int i, unsigned __int128 need, const char *why) {
  char a[48], b[48];
  if (need == 0) return;
  if (i >= 0 && present(S, i)) {
    slot *s = &S->s[i];
    const clattn_tensor *t = s->t;
    char desc[512];
    describe(s, desc, sizeof desc);
    const unsigned __int128 have = t->ndim == 1 && (t->shape[0] <= 1 || t->stride[0] == 1) && t->shape[0] > 0
                                       ? (unsigned __int128)t->shape[0] * 4 : (t->ndim == 1 && t->shape[0] > 0 ? 4 : 0);
    if (have < need)
      fake_fail("workspace", "%s: its view holds %s contiguous bytes, the call needs %s (%s)", desc,
                u128s((__int128)have, a), u128s((__int128)need, b), why);
    if ((unsigned __int128)t->offset + need > fake_mem_size(t->buf))
      fake_fail("workspace", "%s: %s bytes from its offset pass the buffer's %zu (%s)", desc,
                u128s((__int128)need, a), fake_mem_size(t->buf), why);
    return;
  }
  /* the library's own buffer */
  size_t most = 0;
  for (int k = 0; k < fake_ncreated(); k++)
    if (fake_mem_size(fake_created_at(k)) > most) most = fake_mem_size(fake_created_at(k));
  if ((unsigned __int128)most < need)
    fake_fail("workspace", "the largest buffer the library made holds %zu bytes, the call needs %s (%s)", most,
              u128s((__int128)need, a), why);
}

/* ------------------------------------------------------------------ one input */

static state the_state;

static void release_harness(state *S) {
  fake_set_harness(true);
  for (int i = 0; i < S->nb; i++)
    if (S->b[i].mem) clReleaseMemObject(S->b[i].mem);
  for (cl_uint i = 0; i < 2; i++)
    if (S->wait[i]) clReleaseEvent(S->wait[i]);
  if (S->event && fake_event_node(S->event) >= 0) clReleaseEvent(S->event);
  fake_set_harness(false);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* hermetic: no kernel folder, tuning file, cache folder or log from outside */
  unsetenv("CLATTN_KERNEL_DIR");
  unsetenv("CLATTN_TUNING_FILE");
  unsetenv("CLATTN_BUILD_OPTIONS");
  unsetenv("CLATTN_LOG");
  unsetenv("CLATTN_DEVICE");
  setenv("CLATTN_CACHE_DIR", "", 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  state *S = &the_state;
  memset(S, 0, sizeof *S);
  cur = S;
  rd r = {data, size, 0};
  const unsigned op = rd_u8(&r), prof = rd_u8(&r), flags = rd_u8(&r), odd = rd_u8(&r);
  maybe_reset_worlds();
  S->op = &ops[op % (unsigned)nops];
  if (skipped("op", S->op->name)) return 0; /* FUZZ_SKIP=op:name leaves an operation out */
  S->profile = (int)(prof % (unsigned)fake_num_profiles());
  S->w = get_world(S->profile);
  clattn_force_path((int)((flags & 3) == 3 ? 0 : flags & 3));
  if (flags & 4) setenv("CLATTN_PORTABLE", "1", 1);
  else unsetenv("CLATTN_PORTABLE");
  S->qcx = CX_A0;
  S->ctx = S->w->cx[CX_A0];
  S->queue = S->w->q[CX_A0][(flags >> 3) & 1];
  const bool pure = S->op->flags & (OP_PURE | OP_NOCTX);
  S->want_event = !pure && ((flags >> 4) & 1);
  const unsigned waits = pure ? 0 : (flags >> 5) & 3;
  S->off_mode = (int)((prof >> 4) & 3);

  fake_call_begin();
  S->op->build(S, &r);
  while (rd_more(&r)) apply_edit(S, &r);

  /* rare oddities of the call itself */
  if ((flags & 0x80) && !(S->op->flags & OP_NOCTX)) {
    switch (odd % 8) {
    case 0: S->ctx = NULL; break;
    case 1: S->null_params = true; break;
    case 2: if (!pure) S->queue = NULL; break;
    case 3: if (!pure) S->queue = S->w->q[CX_B][0]; break;  /* another context's queue */
    case 4: if (!pure) S->queue = S->w->q[CX_A1][0]; break; /* another device's queue */
    case 5: S->ctx = S->w->cx[CX_A1]; break;      /* the other device's clattn context */
    default: break;
    }
  }

  /* the buffers, the wait list */
  fake_set_harness(true);
  for (int i = 0; i < S->nb; i++) {
    cl_int err;
    S->b[i].mem = clCreateBuffer(S->w->cl[S->b[i].cl], CL_MEM_READ_WRITE, S->b[i].size ? S->b[i].size : 1, NULL, &err);
  }
  for (int i = 0; i < S->ns; i++) S->s[i].t->buf = S->s[i].buf >= 0 ? S->b[S->s[i].buf].mem : NULL;
  if (waits == 1 || waits == 2) {
    S->num_wait = waits;
    for (cl_uint i = 0; i < S->num_wait; i++) S->wait[i] = clCreateUserEvent(S->w->cl[0], NULL);
  } else if (waits == 3) {
    S->bad_wait_list = true;
    S->wait[0] = clCreateUserEvent(S->w->cl[0], NULL);
    S->num_wait = (odd & 0x40) ? 1 : 0; /* count and list disagree */
  }
  fake_set_harness(false);
  /* known defect classes a hunt can leave out (see avoid()) */
  for (int i = 0; i < S->ns; i++) {
    const clattn_tensor *t = S->s[i].t;
    if (!t->buf) continue;
    if (avoid("offset_wrap") && t->offset > ((size_t)1 << 48)) S->avoided = true;
    if (avoid("extent_wrap") && t->ndim > 0 && t->ndim <= CLATTN_MAX_DIMS) {
      span sp = view_span(t, t->ndim, t->shape);
      if (!sp.empty && (sp.hi > ((__int128)1 << 63) || sp.lo < -((__int128)1 << 63))) S->avoided = true;
    }
    if (avoid("dim32") && t->ndim > 0 && t->ndim <= CLATTN_MAX_DIMS)
      for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > INT32_MAX) S->avoided = true;
  }
  if (S->avoided) {
    release_harness(S);
    fake_call_finish();
    cur = NULL;
    return 0;
  }
  if (S->op->prepare) S->op->prepare(S);

  /* the call */
  const int cmds_before = fake_ncmds();
  S->in_call = true;
  S->st = S->op->call(S);
  S->in_call = false;
  const int cmds = fake_ncmds() - cmds_before;
  if (S->avoided) {
    release_harness(S);
    fake_call_finish();
    cur = NULL;
    return 0;
  }

  if (S->st == CLATTN_SUCCESS) {
    if (S->bad_wait_list) fake_fail("contract", "accepted a wait list whose count and pointer disagree");
    if (S->null_params || !S->ctx || !S->queue)
      fake_fail("contract", "accepted a NULL %s", S->null_params ? "params" : !S->ctx ? "ctx" : "queue");
    check_success(S);
  } else {
    const char *msg = clattn_last_error();
    if (strcmp(clattn_status_string(S->st), "CLATTN_UNKNOWN_STATUS") == 0)
      fake_fail("status", "returned status %d, not a clattn_status", (int)S->st);
    if (!msg || !*msg) fake_fail("status", "failed with %s but no message", clattn_status_string(S->st));
    if (cmds > 0) {
      const fake_cmd *c = fake_cmd_at(cmds_before);
      fake_fail("enqueue", "failed (%s: %s) after enqueueing %d command(s), the first %s", clattn_status_string(S->st),
                msg, cmds, c->kernel[0] ? c->kernel : "a marker, barrier or copy");
    }
    if (S->event) fake_fail("events", "failed but set *event");
    if (S->op->failed) S->op->failed(S);
  }
  if (getenv("FUZZ_VERBOSE"))
    fprintf(stderr, "fuzz: %s on %s: %s %s (%d commands, %d kernels)\n", S->op->name, fake_profile_at(S->profile)->key,
            clattn_status_string(S->st), S->st ? clattn_last_error() : "", cmds, count_kernels(NULL));
  release_harness(S);
  fake_call_finish();
  cur = NULL;
  return 0;
}
