/* K/V cache kernels: the int4 / fp8 layouts word by word, every fp8 code,
 * encoder ties and saturation, quantize / dequantize round trips within the
 * documented bounds, append into dense and paged caches (bit-exact against a
 * host-built cache, guard bytes around every buffer), out-of-range positions,
 * extreme rows. The error paths are in test_kvcache_errors.c. */
#include "common.h"
#include "internal.h"
#include "ref_quant.h"
#include "test_kvcache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ host-mirrored caches */

void hcache_init(hcache *c, clattn_dtype dt, int G, int D, int H, int64_t S0, int64_t S1,
                 int pad) {
  memset(c, 0, sizeof *c);
  c->dt = dt;
  c->G = G ? G : 1;
  c->D = D;
  c->H = H;
  c->S0 = S0;
  c->S1 = S1;
  c->pad = pad;
  c->X = clattn_kv_row_size(dt, D, G);
  c->es = clattn_dtype_size(dt);
  c->bytes = 2 * KV_GUARD + (size_t)(S0 * S1 * H * (c->X + pad)) * c->es;
  c->host = malloc(c->bytes);
  memset(c->host, 0xff, c->bytes);
  if (dt == CLATTN_FP8 || dt == CLATTN_FP8_FNUZ) {
    c->ss_bytes = 2 * KV_GUARD + (size_t)(S0 * S1 * H) * 4;
    c->ss_host = malloc(c->ss_bytes);
    memset(c->ss_host, 0xff, c->ss_bytes);
  }
}

void hcache_upload(hcache *c) {
  cl_int err = CL_SUCCESS;
  c->buf = clCreateBuffer(fx.cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, c->bytes, c->host,
                          &err);
  CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  if (c->ss_host) {
    c->ss_buf = clCreateBuffer(fx.cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, c->ss_bytes,
                               c->ss_host, &err);
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
  }
}

void hcache_free(hcache *c) {
  buf_release(&c->buf);
  buf_release(&c->ss_buf);
  free(c->host);
  free(c->ss_host);
  c->host = c->ss_host = NULL;
}

clattn_tensor hcache_tensor(const hcache *c) {
  clattn_tensor t = clattn_tensor_4d(c->buf, KV_GUARD, c->dt, c->S0, c->S1, c->H, c->X);
  t.stride[2] = c->X + c->pad;
  t.stride[1] = c->H * t.stride[2];
  t.stride[0] = c->S1 * t.stride[1];
  return t;
}

clattn_tensor hcache_ss_tensor(const hcache *c) {
  clattn_tensor t;
  memset(&t, 0, sizeof t);
  if (c->ss_buf) t = clattn_tensor_3d(c->ss_buf, KV_GUARD, CLATTN_I32, c->S0, c->S1, c->H);
  return t;
}

static size_t row_index(const hcache *c, int64_t o, int64_t i, int h) {
  return (size_t)((o * c->S1 + i) * c->H + h);
}

void hcache_write_row(hcache *c, int64_t o, int64_t i, int h, const float *x) {
  const size_t r = row_index(c, o, i, h);
  uint8_t *p = c->host + KV_GUARD + r * (size_t)(c->X + c->pad) * c->es;
  uint32_t words[2048 / 4 + 8];
  if (c->dt == CLATTN_INT4) {
    ref_int4_quantize_row(x, c->D, c->G, words);
    memcpy(p, words, (size_t)c->X * 4);
  } else if (c->dt == CLATTN_FP8 || c->dt == CLATTN_FP8_FNUZ) {
    uint32_t ss;
    ref_fp8_quantize_row(x, c->D, c->dt == CLATTN_FP8_FNUZ, words, &ss);
    memcpy(p, words, (size_t)c->X * 4);
    memcpy(c->ss_host + KV_GUARD + r * 4, &ss, 4);
  } else {
    double tmp[2048];
    for (int d = 0; d < c->D; d++) tmp[d] = x[d];
    host_pack(tmp, (size_t)c->D, c->dt, p);
  }
}

void hcache_read_row(const hcache *c, int64_t o, int64_t i, int h, double *out) {
  const size_t r = row_index(c, o, i, h);
  const uint8_t *p = c->host + KV_GUARD + r * (size_t)(c->X + c->pad) * c->es;
  uint32_t words[2048 / 4 + 8];
  memcpy(words, p, (size_t)c->X * (c->dt == CLATTN_INT4 || c->dt == CLATTN_FP8 ||
                                           c->dt == CLATTN_FP8_FNUZ
                                       ? 4
                                       : c->es));
  if (c->dt == CLATTN_INT4) {
    ref_int4_dequantize_row(words, c->D, c->G, out);
  } else if (c->dt == CLATTN_FP8 || c->dt == CLATTN_FP8_FNUZ) {
    uint32_t ss;
    memcpy(&ss, c->ss_host + KV_GUARD + r * 4, 4);
    ref_fp8_dequantize_row(words, ss, c->D, c->dt == CLATTN_FP8_FNUZ, out);
  } else {
    host_unpack(p, (size_t)c->D, c->dt, out);
  }
}

static bool same_bytes(cl_mem m, const uint8_t *want, size_t n, const char *label,
                       const char *what) {
  uint8_t *got = malloc(n);
  CU_ASSERT_EQUAL_FATAL(clEnqueueReadBuffer(fx.queue, m, CL_TRUE, 0, n, got, 0, NULL, NULL),
                        CL_SUCCESS);
  size_t first = n;
  for (size_t i = 0; i < n && first == n; i++)
    if (got[i] != want[i]) first = i;
  if (first < n) {
    const size_t w = first / 4 * 4;
    uint32_t g = 0, e = 0;
    memcpy(&g, got + w, n - w >= 4 ? 4 : n - w);
    memcpy(&e, want + w, n - w >= 4 ? 4 : n - w);
    fprintf(stderr, "  %s: %s byte %zu (%s) differs: word got 0x%08x, want 0x%08x\n", label, what,
            first, first < KV_GUARD || first >= n - KV_GUARD ? "guard" : "tensor", g, e);
  }
  free(got);
  return first == n;
}

bool hcache_check(const hcache *c, const char *label) {
  bool ok = same_bytes(c->buf, c->host, c->bytes, label, "cache");
  if (c->ss_buf) ok = same_bytes(c->ss_buf, c->ss_host, c->ss_bytes, label, "scale-shift") && ok;
  CU_ASSERT(ok);
  return ok;
}

/* ------------------------------------------------------------------ positions */

/* Dense (page_size 0: N positions per sequence) or paged with a shuffled table. */
typedef struct layout {
  int B, N, page_size, max_pages, num_pages;
  int32_t *table;
} layout;

static void layout_init(layout *l, int B, int N, int page_size, int share, int bad_entry) {
  memset(l, 0, sizeof *l);
  l->B = B;
  l->N = N;
  l->page_size = page_size;
  if (!page_size) return;
  l->max_pages = (N + page_size - 1) / page_size;
  l->num_pages = B * l->max_pages + 1; /* one spare page nobody maps */
  l->table = malloc(sizeof(int32_t) * (size_t)(B * l->max_pages));
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)l->num_pages);
  for (int i = 0; i < l->num_pages; i++) perm[i] = i;
  for (int i = l->num_pages - 1; i > 0; i--) {
    const int k = rng_int(0, i);
    const int32_t t = perm[i];
    perm[i] = perm[k];
    perm[k] = t;
  }
  memcpy(l->table, perm, sizeof(int32_t) * (size_t)(B * l->max_pages));
  free(perm);
  if (share && B > 1) l->table[l->max_pages] = l->table[0]; /* a shared prefix page */
  if (bad_entry && l->max_pages > 1) l->table[1] = bad_entry == 1 ? -1 : l->num_pages;
}

static bool locate(const layout *l, int b, int64_t j, int64_t *o, int64_t *i) {
  if (!l->page_size) {
    if (j < 0 || j >= l->N) return false;
    *o = b;
    *i = j;
    return true;
  }
  if (j < 0 || j >= (int64_t)l->max_pages * l->page_size) return false;
  const int32_t page = l->table[(size_t)b * l->max_pages + j / l->page_size];
  if (page < 0 || page >= l->num_pages) return false;
  *o = page;
  *i = j % l->page_size;
  return true;
}

static int64_t layout_s0(const layout *l) { return l->page_size ? l->num_pages : l->B; }
static int64_t layout_s1(const layout *l) { return l->page_size ? l->page_size : l->N; }

/* Random rows: each of its own magnitude (10^lo .. 10^hi) and offset, a few
 * outliers, rounded through dt so host and device read the same floats. */
static float *rand_rows(size_t rows, int D, clattn_dtype dt, double lo, double hi) {
  float *x = malloc(sizeof(float) * rows * (size_t)D);
  for (size_t r = 0; r < rows; r++) {
    const double mag = pow(10.0, rng_uniform(lo, hi)), off = mag * rng_uniform(-2, 2);
    for (int d = 0; d < D; d++) {
      double v = off + mag * rng_normal();
      if (rng_int(0, 49) == 0) v *= 8; /* outlier */
      x[r * D + d] = (float)round_dtype(v, dt);
    }
  }
  return x;
}

static cl_mem buf_from_floats(const float *x, size_t n, clattn_dtype dt) {
  double *tmp = malloc(sizeof(double) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) tmp[i] = x[i];
  cl_mem m = buf_from(tmp, n, dt);
  free(tmp);
  return m;
}

/* The flag at VIEW_LEAD (the junk before it, zeros, must stay zeros). */
static int32_t read_flag(cl_mem m) {
  int32_t f[VIEW_LEAD + 1];
  buf_read_i32(m, VIEW_LEAD + 1, f);
  for (int i = 0; i < VIEW_LEAD; i++) CU_ASSERT_EQUAL(f[i], 0);
  return f[VIEW_LEAD];
}

/* ------------------------------------------------------------------ append */

typedef struct acase {
  clattn_dtype in_dt, kv_dt;
  int G, B, H, D;
  int N;                /* positions per sequence: dense N, paged table capacity */
  const int *counts;    /* new rows per sequence; NULL: one each, no new_start */
  const int *pos;       /* first new position of each sequence */
  int page_size, share; /* paged; share: sequences 0 and 1 share page 0 */
  int bad_entry;        /* paged: table[0][1] = -1 (1) or num_pages (2) */
  int no_v, pad;        /* K only; extra cache elements between heads */
} acase;

static void run_append(const acase *c) {
  char name[256];
  CASE_NAME(name, "append in=%s kv=%s G=%d B=%d H=%d D=%d N=%d page=%d%s%s%s%s pad=%d",
            clattn_dtype_name(c->in_dt), clattn_dtype_name(c->kv_dt), c->G, c->B, c->H, c->D,
            c->N, c->page_size, c->share ? " shared" : "", c->bad_entry ? " bad-entry" : "",
            c->counts ? " varlen" : " one-each", c->no_v ? " k-only" : "", c->pad);
  const int B = c->B, H = c->H, D = c->D;
  int32_t *start = calloc((size_t)B + 1, sizeof *start);
  for (int b = 0; b < B; b++) start[b + 1] = start[b] + (c->counts ? c->counts[b] : 1);
  const int T = start[B];
  layout l;
  layout_init(&l, B, c->N, c->page_size, c->share, c->bad_entry);
  float *xk = rand_rows((size_t)T * H, D, c->in_dt, -1, 1);
  float *xv = rand_rows((size_t)T * H, D, c->in_dt, -1, 1);
  hcache kc, vc;
  hcache_init(&kc, c->kv_dt, c->G, D, H, layout_s0(&l), layout_s1(&l), c->pad);
  hcache_init(&vc, c->kv_dt, c->G, D, H, layout_s0(&l), layout_s1(&l), c->pad);
  hcache_upload(&kc); /* the poisoned buffers, before the expected writes */
  hcache_upload(&vc);
  int skipped = 0;
  for (int b = 0; b < B; b++)
    for (int t = start[b]; t < start[b + 1]; t++) {
      int64_t o, i;
      if (!locate(&l, b, (int64_t)c->pos[b] + (t - start[b]), &o, &i)) {
        skipped++;
        continue;
      }
      for (int h = 0; h < H; h++) {
        hcache_write_row(&kc, o, i, h, xk + ((size_t)t * H + h) * D);
        if (!c->no_v) hcache_write_row(&vc, o, i, h, xv + ((size_t)t * H + h) * D);
      }
    }

  clattn_kv_append_params p;
  memset(&p, 0, sizeof p);
  cl_mem xk_m = buf_from_floats(xk, (size_t)T * H * D, c->in_dt);
  cl_mem xv_m = buf_from_floats(xv, (size_t)T * H * D, c->in_dt);
  /* the optional views behind junk (common.h) */
  cl_mem pos_m = buf_from_i32_after(c->pos, (size_t)B, 1 << 20);
  cl_mem start_m = buf_from_i32_after(start, (size_t)B + 1, 1);
  cl_mem table_m = l.table ? buf_from_i32_after(l.table, (size_t)(B * l.max_pages), -7) : NULL;
  static const int32_t zero = 0;
  cl_mem flag_m = buf_from_i32_after(&zero, 1, 0);
  p.new_k = clattn_tensor_3d(xk_m, 0, c->in_dt, T, H, D);
  p.k_cache = hcache_tensor(&kc);
  p.maybe_k_scale_shift = hcache_ss_tensor(&kc);
  if (!c->no_v) {
    p.maybe_new_v = clattn_tensor_3d(xv_m, 0, c->in_dt, T, H, D);
    p.maybe_v_cache = hcache_tensor(&vc);
    p.maybe_v_scale_shift = hcache_ss_tensor(&vc);
  }
  p.pos = clattn_tensor_1d(pos_m, VIEW_LEAD * 4, CLATTN_I32, B);
  if (c->counts) p.maybe_new_start = clattn_tensor_1d(start_m, VIEW_LEAD * 4, CLATTN_I32, B + 1);
  if (table_m) p.maybe_block_table = clattn_tensor_2d(table_m, VIEW_LEAD * 4, CLATTN_I32, B, l.max_pages);
  p.maybe_error_flag = clattn_tensor_1d(flag_m, VIEW_LEAD * 4, CLATTN_I32, 1);
  p.kv_groups = c->G;
  cl_event ev = NULL;
  CHECK_OK(clattn_kv_append(fx.ctx, fx.queue, &p, 0, NULL, &ev));
  CU_ASSERT_EQUAL(clWaitForEvents(1, &ev), CL_SUCCESS);
  clReleaseEvent(ev);

  /* bit-exact: rounding (float caches) or the reference quantizer; guards untouched */
  if (!hcache_check(&kc, name)) fprintf(stderr, "  (K cache)\n");
  if (!hcache_check(&vc, name)) fprintf(stderr, "  (V cache)\n");
  CU_ASSERT_EQUAL(read_flag(flag_m), skipped ? 1 : 0);
  if (read_flag(flag_m) != (skipped ? 1 : 0)) fprintf(stderr, "  %s: error flag\n", name);

  hcache_free(&kc);
  hcache_free(&vc);
  buf_release(&xk_m);
  buf_release(&xv_m);
  buf_release(&pos_m);
  buf_release(&start_m);
  buf_release(&table_m);
  buf_release(&flag_m);
  free(l.table);
  free(xk);
  free(xv);
  free(start);
}

static acase append_base(void) {
  static const int counts[] = {3, 0, 5, 1};
  static const int pos[] = {0, 7, 30, 47};
  acase c;
  memset(&c, 0, sizeof c);
  c.in_dt = CLATTN_F32;
  c.kv_dt = CLATTN_F32;
  c.B = 4;
  c.H = 2;
  c.D = 64;
  c.N = 48;
  c.counts = counts;
  c.pos = pos;
  return c;
}

static void test_append_float_dense(void) {
  static const clattn_dtype dts[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  for (int i = 0; i < 3; i++) {
    acase c = append_base();
    c.kv_dt = dts[i];
    c.in_dt = dts[(i + 1) % 3]; /* a conversion on the way in */
    run_append(&c);
  }
  acase c = append_base();
  c.in_dt = c.kv_dt = CLATTN_F16;
  c.counts = NULL; /* one row per sequence, no new_start */
  c.no_v = 1;
  c.pad = 8;
  c.D = 80;
  run_append(&c);
}

static void test_append_float_paged(void) {
  static const int sizes[] = {1, 16, 48};
  static const int pos[] = {20, 17, 30, 40};
  static const clattn_dtype dts[] = {CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  for (int i = 0; i < 3; i++) {
    acase c = append_base();
    c.page_size = sizes[i];
    c.kv_dt = dts[i];
    c.in_dt = i == 2 ? CLATTN_F32 : dts[i];
    c.N = 50; /* the table's capacity is not a multiple of every page size */
    c.share = i != 2;
    c.pos = pos; /* after the shared prefix page of size 1 and 16 */
    run_append(&c);
  }
}

static void test_append_quant(void) {
  static const int pos16[] = {16, 20, 30, 40};
  /* int4 every G, dense and paged */
  static const int groups[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; i++) {
    acase c = append_base();
    c.kv_dt = CLATTN_INT4;
    c.G = groups[i];
    c.in_dt = i == 1 ? CLATTN_F16 : i == 3 ? CLATTN_BF16 : CLATTN_F32;
    if (i & 1) {
      c.page_size = 16;
      c.share = 1;
      c.pos = pos16;
    }
    c.pad = i == 2 ? 3 : 0;
    run_append(&c);
  }
  acase c = append_base();
  c.kv_dt = CLATTN_FP8;
  run_append(&c);
  c.kv_dt = CLATTN_FP8_FNUZ;
  c.page_size = 16;
  c.pos = pos16;
  c.share = 1;
  c.in_dt = CLATTN_F16;
  run_append(&c);
  c.kv_dt = CLATTN_FP8;
  c.D = 72;
  c.counts = NULL;
  c.no_v = 1;
  run_append(&c);
}

static void test_append_out_of_range(void) {
  /* dense: sequence 0 starts negative (before the buffer's tensor), 2 runs
   * past N, 3 starts at N (past the tensor's end) */
  static const int pos_dense[] = {-2, 7, 45, 48};
  acase c = append_base();
  c.pos = pos_dense;
  run_append(&c);
  c.kv_dt = CLATTN_INT4;
  c.G = 2;
  run_append(&c);
  /* paged: past the table's capacity, and a bad entry (-1, num_pages) on logical page 1 */
  static const int pos_paged[] = {14, 7, 30, 46};
  c = append_base();
  c.page_size = 16;
  c.pos = pos_paged;
  for (int bad = 1; bad <= 2; bad++) {
    c.bad_entry = bad;
    c.kv_dt = bad == 1 ? CLATTN_F16 : CLATTN_FP8;
    run_append(&c);
  }
}

/* ------------------------------------------------------------------ quantize / dequantize */

typedef struct rcase {
  clattn_dtype in_dt, kv_dt, out_dt;
  int G, B, n, H, D;
  int bhsd; /* src and out stored [B, H, n, D], viewed through strides */
  double lo, hi; /* row magnitudes 10^lo .. 10^hi */
} rcase;

static clattn_tensor view_4d(cl_mem m, clattn_dtype dt, int B, int n, int H, int D, int bhsd) {
  clattn_tensor t = clattn_tensor_4d(m, 0, dt, B, n, H, D);
  if (bhsd) {
    t.stride[2] = (int64_t)n * D;
    t.stride[1] = D;
  }
  return t;
}

/* Element (b, i, h, d) of a [B, n, H, D] host array, stored BSHD or BHSD. */
static size_t at(const rcase *c, int b, int i, int h, int d) {
  return c->bhsd ? (((size_t)b * c->H + h) * c->n + i) * c->D + d
                 : (((size_t)b * c->n + i) * c->H + h) * c->D + d;
}

static void run_roundtrip(const rcase *c) {
  char name[256];
  CASE_NAME(name, "round trip in=%s kv=%s out=%s G=%d B=%d n=%d H=%d D=%d%s",
            clattn_dtype_name(c->in_dt), clattn_dtype_name(c->kv_dt),
            clattn_dtype_name(c->out_dt), c->G, c->B, c->n, c->H, c->D, c->bhsd ? " bhsd" : "");
  const size_t rows = (size_t)c->B * c->n * c->H, ne = rows * c->D;
  float *x = rand_rows(rows, c->D, c->in_dt, c->lo, c->hi);
  hcache hc;
  hcache_init(&hc, c->kv_dt, c->G, c->D, c->H, c->B, c->n, 0);
  hcache_upload(&hc);
  /* x is row-major over (b, i, h) in storage order; rows of the reference follow it */
  float *row = malloc(sizeof(float) * c->D);
  for (int b = 0; b < c->B; b++)
    for (int i = 0; i < c->n; i++)
      for (int h = 0; h < c->H; h++) {
        for (int d = 0; d < c->D; d++) row[d] = x[at(c, b, i, h, d)];
        hcache_write_row(&hc, b, i, h, row);
      }
  cl_mem x_m = buf_from_floats(x, ne, c->in_dt);
  cl_mem o_m = buf_poison(ne * clattn_dtype_size(c->out_dt));
  clattn_kv_quantize_params q;
  memset(&q, 0, sizeof q);
  q.src = view_4d(x_m, c->in_dt, c->B, c->n, c->H, c->D, c->bhsd);
  q.cache = hcache_tensor(&hc);
  q.maybe_scale_shift = hcache_ss_tensor(&hc);
  q.kv_groups = c->G;
  CHECK_OK(clattn_kv_quantize(fx.ctx, fx.queue, &q, 0, NULL, NULL));
  clattn_kv_dequantize_params dq;
  memset(&dq, 0, sizeof dq);
  dq.cache = q.cache;
  dq.maybe_scale_shift = q.maybe_scale_shift;
  dq.out = view_4d(o_m, c->out_dt, c->B, c->n, c->H, c->D, c->bhsd);
  dq.kv_groups = c->G;
  CHECK_OK(clattn_kv_dequantize(fx.ctx, fx.queue, &dq, 0, NULL, NULL));
  finish();
  hcache_check(&hc, name); /* the cache equals the reference quantizer's, bit for bit */

  double *got = malloc(sizeof(double) * ne), *want = malloc(sizeof(double) * ne);
  buf_read(o_m, 0, ne, c->out_dt, got);
  double *ref = malloc(sizeof(double) * c->D);
  double worst = 0; /* max error / bound */
  const bool quant = c->kv_dt == CLATTN_INT4 || c->kv_dt >= CLATTN_FP8;
  for (int b = 0; b < c->B; b++)
    for (int i = 0; i < c->n; i++)
      for (int h = 0; h < c->H; h++) {
        hcache_read_row(&hc, b, i, h, ref);
        for (int d = 0; d < c->D; d++) {
          const size_t e = at(c, b, i, h, d);
          want[e] = round_dtype(ref[d], c->out_dt);
          if (!quant || c->out_dt != CLATTN_F32) continue;
          /* the documented round-trip bound, from the row's stored scale and shift */
          double scale, shift, bound;
          if (c->kv_dt == CLATTN_INT4) {
            uint32_t w;
            memcpy(&w, hc.host + KV_GUARD + (row_index(&hc, b, i, h) * hc.X + d / (c->D / c->G)) * 4, 4);
            ref_scale_shift(w, &scale, &shift);
            bound = ref_int4_bound(x[e], scale, shift);
          } else {
            uint32_t w;
            memcpy(&w, hc.ss_host + KV_GUARD + row_index(&hc, b, i, h) * 4, 4);
            ref_scale_shift(w, &scale, &shift);
            bound = ref_fp8_bound(x[e], scale, shift, c->kv_dt == CLATTN_FP8_FNUZ);
          }
          const double err = fabs(got[e] - x[e]);
          if (err > bound) {
            fprintf(stderr, "  %s: (%d,%d,%d,%d) x %.9g read back %.9g: error %.3g > bound %.3g\n",
                    name, b, i, h, d, x[e], got[e], err, bound);
            CU_FAIL("round-trip error beyond the documented bound");
            b = c->B, i = c->n, h = c->H;
            break;
          }
          if (bound > 0 && err / bound > worst) worst = err / bound;
        }
      }
  /* against the reference dequantization: f32 rounding of an exact fma (2^-24
   * relative), or the output's own rounding (f16 2^-11, bf16 2^-8), relative,
   * plus f16's subnormal step */
  const double rtol = c->out_dt == CLATTN_F32 ? 0x1p-23 : c->out_dt == CLATTN_F16 ? 0x1p-10 : 0x1p-7;
  check_close(name, got, want, ne, c->out_dt == CLATTN_F16 ? 0x1p-24 : 0.0, rtol);
  if (getenv("CLATTN_TEST_VERBOSE")) fprintf(stderr, "  %s: worst error/bound %.3f\n", name, worst);
  free(ref);
  free(got);
  free(want);
  free(row);
  free(x);
  hcache_free(&hc);
  buf_release(&x_m);
  buf_release(&o_m);
}

static rcase rt_base(void) {
  rcase c;
  memset(&c, 0, sizeof c);
  c.in_dt = c.out_dt = CLATTN_F32;
  c.B = 2;
  c.n = 33;
  c.H = 3;
  c.D = 128;
  c.lo = -3;
  c.hi = 3;
  return c;
}

static void test_roundtrip_int4(void) {
  static const int G[] = {1, 2, 4, 8, 8, 2};
  static const int D[] = {128, 80, 64, 256, 64, 16};
  for (int i = 0; i < 6; i++) {
    rcase c = rt_base();
    c.kv_dt = CLATTN_INT4;
    c.G = G[i];
    c.D = D[i];
    c.in_dt = i == 1 ? CLATTN_F16 : i == 3 ? CLATTN_BF16 : CLATTN_F32;
    c.bhsd = i == 2;
    run_roundtrip(&c);
  }
}

static void test_roundtrip_fp8(void) {
  for (int v = 0; v < 2; v++) {
    rcase c = rt_base();
    c.kv_dt = v ? CLATTN_FP8_FNUZ : CLATTN_FP8;
    run_roundtrip(&c);
    c.D = 72;
    c.in_dt = CLATTN_BF16;
    c.bhsd = 1;
    run_roundtrip(&c);
  }
}

static void test_dequant_outputs(void) {
  /* f16 / bf16 outputs, and float caches read back (a conversion) */
  rcase c = rt_base();
  c.lo = -2;
  c.hi = 2; /* inside f16's range */
  c.kv_dt = CLATTN_INT4;
  c.G = 4;
  c.out_dt = CLATTN_F16;
  run_roundtrip(&c);
  c.kv_dt = CLATTN_FP8;
  c.G = 0;
  c.out_dt = CLATTN_BF16;
  run_roundtrip(&c);
  c.kv_dt = CLATTN_F16;
  c.out_dt = CLATTN_F32;
  c.in_dt = CLATTN_F16;
  run_roundtrip(&c);
}

/* Dequantize a range of positions of a paged (or dense) cache the host filled. */
static void run_dequant_range(clattn_dtype kv_dt, int G, clattn_dtype out_dt, int page_size) {
  char name[160];
  CASE_NAME(name, "dequantize range kv=%s G=%d out=%s page=%d", clattn_dtype_name(kv_dt), G,
            clattn_dtype_name(out_dt), page_size);
  enum { B = 4, n = 10, H = 2, D = 32, N = 48 };
  static const int32_t start[B] = {3, 40, -1, 0}; /* 1: runs past 48, 2: negative */
  layout l;
  layout_init(&l, B, N, page_size, 0, 0);
  hcache hc;
  hcache_init(&hc, kv_dt, G, D, H, layout_s0(&l), layout_s1(&l), 0);
  float *x = rand_rows((size_t)(hc.S0 * hc.S1 * H), D, CLATTN_F32, -1, 1);
  for (int64_t o = 0; o < hc.S0; o++)
    for (int64_t i = 0; i < hc.S1; i++)
      for (int h = 0; h < H; h++)
        hcache_write_row(&hc, o, i, h, x + (size_t)row_index(&hc, o, i, h) * D);
  hcache_upload(&hc);
  const size_t ne = (size_t)B * n * H * D;
  cl_mem o_m = buf_poison(ne * clattn_dtype_size(out_dt));
  cl_mem s_m = buf_from_i32_after(start, B, 1 << 20);
  cl_mem t_m = l.table ? buf_from_i32_after(l.table, (size_t)(B * l.max_pages), -7) : NULL;
  static const int32_t zero = 0;
  cl_mem f_m = buf_from_i32_after(&zero, 1, 0);
  clattn_kv_dequantize_params p;
  memset(&p, 0, sizeof p);
  p.cache = hcache_tensor(&hc);
  p.maybe_scale_shift = hcache_ss_tensor(&hc);
  p.out = clattn_tensor_4d(o_m, 0, out_dt, B, n, H, D);
  p.maybe_start = clattn_tensor_1d(s_m, VIEW_LEAD * 4, CLATTN_I32, B);
  if (t_m) p.maybe_block_table = clattn_tensor_2d(t_m, VIEW_LEAD * 4, CLATTN_I32, B, l.max_pages);
  p.maybe_error_flag = clattn_tensor_1d(f_m, VIEW_LEAD * 4, CLATTN_I32, 1);
  p.kv_groups = G;
  CHECK_OK(clattn_kv_dequantize(fx.ctx, fx.queue, &p, 0, NULL, NULL));
  double *got = malloc(sizeof(double) * ne), *want = calloc(ne, sizeof(double));
  buf_read(o_m, 0, ne, out_dt, got);
  double ref[D];
  for (int b = 0; b < B; b++)
    for (int i = 0; i < n; i++) {
      int64_t o, r;
      if (!locate(&l, b, (int64_t)start[b] + i, &o, &r)) continue; /* zeros */
      for (int h = 0; h < H; h++) {
        hcache_read_row(&hc, o, r, h, ref);
        for (int d = 0; d < D; d++)
          want[(((size_t)b * n + i) * H + h) * D + d] = round_dtype(ref[d], out_dt);
      }
    }
  /* f32: one rounding of an exact value; f16/bf16: the output's rounding */
  const double rtol = out_dt == CLATTN_F32 ? 0x1p-23 : out_dt == CLATTN_F16 ? 0x1p-10 : 0x1p-7;
  check_close(name, got, want, ne, 0x1p-24, rtol);
  CU_ASSERT_EQUAL(read_flag(f_m), 1);
  free(got);
  free(want);
  free(x);
  free(l.table);
  hcache_free(&hc);
  buf_release(&o_m);
  buf_release(&s_m);
  buf_release(&t_m);
  buf_release(&f_m);
}

static void test_dequant_range(void) {
  run_dequant_range(CLATTN_F16, 0, CLATTN_F32, 16);
  run_dequant_range(CLATTN_INT4, 4, CLATTN_F16, 16);
  run_dequant_range(CLATTN_FP8_FNUZ, 0, CLATTN_BF16, 1);
  run_dequant_range(CLATTN_FP8, 0, CLATTN_F32, 0);
}

/* The K/V cache kernels' other form than the device row's (the lanes of a
 * row in one work-group on GPUs, a work-item per row on CPUs: quant_rowwise)
 * through the same round trips, appends and ranges. */
static void test_other_form(void) {
  const int was = fx.ctx->tuning.quant_rowwise;
  fx.ctx->tuning.quant_rowwise = !was;
  test_roundtrip_int4();
  test_roundtrip_fp8();
  test_dequant_outputs();
  test_dequant_range();
  test_append_float_paged();
  test_append_quant();
  test_append_out_of_range();
  fx.ctx->tuning.quant_rowwise = was;
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("kvcache", fixture_init, fixture_cleanup);
  kvcache_add_format_tests(s);
  CU_add_test(s, "round trip int4 G 1 2 4 8, D 16..256, f32/f16/bf16 in", test_roundtrip_int4);
  CU_add_test(s, "round trip fp8 fnuz, D 128 72, bhsd", test_roundtrip_fp8);
  CU_add_test(s, "dequantize to f16 bf16, float cache read back", test_dequant_outputs);
  CU_add_test(s, "dequantize ranges, paged 1 16, dense, out of range", test_dequant_range);
  CU_add_test(s, "append float caches dense, one row each, padded", test_append_float_dense);
  CU_add_test(s, "append float caches paged 1 16 48, shuffled, shared", test_append_float_paged);
  CU_add_test(s, "append int4 G 1 2 4 8 and fp8 fnuz, dense and paged", test_append_quant);
  CU_add_test(s, "append out of range: dense, paged, bad entries, guards", test_append_out_of_range);
  CU_add_test(s, "the other kernel form (lanes / a work-item per row): round trips, appends", test_other_form);
  kvcache_add_error_tests(s);
  return run_suites();
}
