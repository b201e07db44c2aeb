/*
 * One builder and one contract per public operation. A builder reads the
 * operation's problem bytes and makes a valid call (canonical tensors); a
 * contract, run once the library has accepted a call, says from the
 * header's documentation which tensors the call uses, with which shapes
 * and dtypes, which workspace it needs and how many kernels are plausible.
 * The contracts derive every shape from the operation's primary tensors
 * (q and k for decode, the parts for merge, ...), independently of lib/.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cl_event *wait_list(const state *S) {
  if (S->bad_wait_list) return S->num_wait ? NULL : S->wait;
  return S->num_wait ? S->wait : NULL;
}
static cl_event *out_event(state *S) { return S->want_event ? &S->event : NULL; }

/* Resizes the buffer of slot i (after the buffers were made). */
static void remake_buffer(state *S, int i, uint64_t size) {
  slot *s = &S->s[i];
  if (s->buf < 0) return;
  bufd *b = &S->b[s->buf];
  fake_set_harness(true);
  if (b->mem) clReleaseMemObject(b->mem);
  cl_int err;
  b->size = size ? size : 4;
  b->mem = clCreateBuffer(S->w->cl[b->cl], CL_MEM_READ_WRITE, b->size, NULL, &err);
  fake_set_harness(false);
  for (int j = 0; j < S->ns; j++)
    if (S->s[j].buf == s->buf) S->s[j].t->buf = b->mem;
}

/* A workspace slot sized from the library's own answer (`bytes`). */
static void size_workspace(state *S, int i, size_t bytes) {
  slot *s = &S->s[i];
  if (i < 0 || !s->ws_auto || s->edited || s->buf < 0) return;
  const int64_t n = (int64_t)(bytes / 4) > 0 ? (int64_t)(bytes / 4) : 1;
  s->t->shape[0] = n; /* its stride stays as given (an edit may have changed it) */
  remake_buffer(S, i, s->t->offset + (uint64_t)n * 4);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* 4 bytes times the factors, saturated at 2^100 (negative factors count 0). */
static unsigned __int128 need_bytes(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  const int64_t f[5] = {a, b, c, d, e};
  unsigned __int128 p = 4;
  for (int i = 0; i < 5; i++) {
    if (f[i] <= 0) return 0;
    p *= (unsigned __int128)f[i];
    if (p > ((unsigned __int128)1 << 100)) return (unsigned __int128)1 << 100;
  }
  return p;
}

/* Elements of a semantic shape, saturated (a contract's "work"). */
static int64_t elems(const slot *s) {
  __int128 p = 1;
  for (int i = 0; i < s->sndim; i++) {
    if (s->sshape[i] <= 0) return 0;
    p *= s->sshape[i];
    if (p > INT64_MAX / 2) return INT64_MAX / 2;
  }
  return (int64_t)p;
}

static const clattn_dtype float_dt[4] = {CLATTN_F16, CLATTN_BF16, CLATTN_F32, CLATTN_F16};

/* ================================================================== decode */

typedef struct dec {
  clattn_decode_params p;
  int q, k, v, o, lse, kv_len, bias, bt, q_start, kss, vss, flag, ws;
  int cx;
  size_t ws_bytes;
  int ws_splits;
  clattn_status ws_st;
} dec;

/* What a decode call shares with the other shards of a decode_multi. */
typedef struct dec_common {
  int B, Mq, Hkv, G, D;
  bool varlen, causal, batch_set, maxq_set, lse, paged_all;
  clattn_dtype qdt, odt;
} dec_common;

static void read_common(rd *r, dec_common *c) {
  static const int Bs[8] = {1, 2, 3, 4, 0, 5, 8, 16}, Ms[8] = {1, 1, 2, 3, 4, 8, 0, 16};
  static const int Hs[4] = {1, 2, 4, 8}, Ds[8] = {64, 128, 8, 16, 256, 24, 72, 96};
  const unsigned b0 = rd_u8(r), b1 = rd_u8(r), b2 = rd_u8(r);
  c->B = Bs[b0 & 7];
  c->Mq = Ms[(b0 >> 3) & 7];
  c->varlen = (b0 >> 6) & 1;
  c->paged_all = (b0 >> 7) & 1;
  c->Hkv = Hs[b1 & 3];
  c->G = Hs[(b1 >> 2) & 3];
  c->D = Ds[(b1 >> 4) & 7];
  c->causal = (b1 >> 7) & 1;
  c->qdt = float_dt[b2 & 3];
  static const int osel[4] = {-1, CLATTN_F32, CLATTN_F16, CLATTN_BF16};
  c->odt = osel[(b2 >> 2) & 3] < 0 ? c->qdt : (clattn_dtype)osel[(b2 >> 2) & 3];
  c->lse = (b2 >> 4) & 1;
  c->batch_set = (b2 >> 5) & 1;
  c->maxq_set = (b2 >> 6) & 1;
}

/* A decode call over common c; the K/V side from 4 bytes. Optional tensors
 * are made canonical and dropped unless asked for: an edit can restore them. */
static void build_dec(state *S, rd *r, dec *d, const dec_common *c, int cx, const char *pre) {
  static const int Ns[16] = {0, 1, 15, 16, 17, 64, 100, 256, 1000, 4096, 32768, 65536, 1 << 20, 3, 31, 2048};
  static const clattn_dtype kvs[8] = {(clattn_dtype)-1, CLATTN_F16, CLATTN_INT4, CLATTN_FP8,
                                      CLATTN_FP8_FNUZ, CLATTN_F32, CLATTN_BF16, CLATTN_INT4};
  static const int groups[8] = {0, 1, 2, 4, 8, 0, 0, 3}, pages[8] = {16, 1, 8, 32, 48, 64, 128, 256};
  static const int splits[8] = {0, 0, 0, 1, 2, 3, 8, 64};
  static const float scales[4] = {0.0f, 0.125f, 1.0f, 0.0f};
  const unsigned b3 = rd_u8(r), b4 = rd_u8(r), b5 = rd_u8(r), b6 = rd_u8(r);
  clattn_decode_params *p = &d->p;
  memset(p, 0, sizeof *p);
  d->cx = cx;
  const int B = c->B, Mq = c->Mq, Hkv = c->Hkv, Hq = c->G * c->Hkv, D = c->D;
  const int N = Ns[b3 & 15];
  const clattn_dtype kvdt = kvs[(b3 >> 4) & 7] == (clattn_dtype)-1 ? c->qdt : kvs[(b3 >> 4) & 7];
  const bool paged = c->paged_all || (b3 >> 7);
  p->kv_groups = groups[b4 & 7];
  const int layout = (b4 >> 3) & 3;
  const int ps = pages[(b4 >> 5) & 7];
  p->num_splits = splits[b5 & 7];
  p->scale = scales[(b5 >> 3) & 3];
  const bool kv_len = (b5 >> 5) & 1, bias = (b5 >> 6) & 1, lse = c->lse || ((b5 >> 7) & 1);
  const bool flag = b6 & 1, ws = (b6 >> 1) & 1, no_ss = (b6 >> 2) & 1;
  p->causal = c->causal;
  const int G1 = p->kv_groups ? p->kv_groups : 1;
  const int64_t X = kvdt == CLATTN_INT4 ? G1 + D / 8 : (kvdt == CLATTN_FP8 || kvdt == CLATTN_FP8_FNUZ) ? D / 4 : D;
  const int64_t total_q = (int64_t)B * Mq;
  const int64_t Mq_eff = c->varlen ? (c->maxq_set ? Mq : total_q) : Mq;
  char nm[48];
#define SLOT(field, pfield, name, role) \
  (snprintf(nm, sizeof nm, "%s%s", pre, name), d->field = add_slot(S, nm, &p->pfield, role, cx))
  SLOT(q, q, "q", R_IN);
  if (c->varlen) {
    canon(S, d->q, c->qdt, 4, SHAPE(1, total_q, Hq, D), 0);
    p->batch = B;
    p->max_q_len = c->maxq_set ? Mq : 0;
  } else {
    canon(S, d->q, c->qdt, 4, SHAPE(B, Mq, Hq, D), 0);
    p->batch = c->batch_set ? B : 0;
  }
  int64_t kshape[4], keys;
  const int max_pages = (N + ps - 1) / ps > 0 ? (N + ps - 1) / ps : 1;
  if (paged) {
    kshape[0] = (int64_t)B * max_pages + 1, kshape[1] = ps, kshape[2] = Hkv, kshape[3] = X;
    keys = (int64_t)max_pages * ps;
  } else {
    kshape[0] = B, kshape[1] = N, kshape[2] = Hkv, kshape[3] = X;
    keys = N;
  }
  static const int head_major[4] = {0, 2, 1, 3};
  const int64_t pad = layout == 1 ? 4 : layout == 3 ? 3 : 0;
  SLOT(k, k, "k", R_IN);
  canon_perm(S, d->k, kvdt, 4, kshape, layout == 2 ? head_major : NULL, pad);
  SLOT(v, v, "v", R_IN);
  canon_perm(S, d->v, kvdt, 4, kshape, layout == 2 ? head_major : NULL, pad);
  SLOT(o, o, "o", R_OUT);
  canon(S, d->o, c->odt, 4, S->s[d->q].t->shape, 0);
  SLOT(lse, maybe_lse, "maybe_lse", R_OUT);
  canon(S, d->lse, CLATTN_F32, 3, c->varlen ? SHAPE(1, Hq, total_q) : SHAPE(B, Hq, Mq), 0);
  if (!lse) drop(S, d->lse);
  SLOT(kv_len, maybe_kv_len, "maybe_kv_len", R_IN);
  canon(S, d->kv_len, CLATTN_I32, 1, SHAPE(B), 0);
  if (!kv_len) drop(S, d->kv_len);
  SLOT(bias, maybe_bias, "maybe_bias", R_IN);
  canon(S, d->bias, CLATTN_F32, 4, SHAPE(B, Hq, Mq_eff, keys), 0);
  if (!bias) drop(S, d->bias);
  SLOT(bt, maybe_block_table, "maybe_block_table", R_IN);
  canon(S, d->bt, CLATTN_I32, 2, SHAPE(B, max_pages), 0);
  if (!paged) drop(S, d->bt);
  SLOT(q_start, maybe_q_start, "maybe_q_start", R_IN);
  canon(S, d->q_start, CLATTN_I32, 1, SHAPE(B + 1), 0);
  if (!c->varlen) drop(S, d->q_start);
  SLOT(kss, maybe_k_scale_shift, "maybe_k_scale_shift", R_IN);
  SLOT(vss, maybe_v_scale_shift, "maybe_v_scale_shift", R_IN);
  canon(S, d->kss, CLATTN_I32, 3, kshape, 0);
  canon(S, d->vss, CLATTN_I32, 3, kshape, 0);
  if (!(kvdt == CLATTN_FP8 || kvdt == CLATTN_FP8_FNUZ) || no_ss) drop(S, d->kss), drop(S, d->vss);
  SLOT(flag, maybe_error_flag, "maybe_error_flag", R_FLAG);
  canon(S, d->flag, CLATTN_I32, 1, SHAPE(1), 0);
  if (!flag) drop(S, d->flag);
  SLOT(ws, maybe_workspace, "maybe_workspace", R_WS);
  canon(S, d->ws, CLATTN_F32, 1, SHAPE(1), 0);
  S->s[d->ws].ws_auto = true;
  if (!ws) drop(S, d->ws);
#undef SLOT
  snprintf(nm, sizeof nm, "%skv_groups", pre);
  add_int(S, nm, &p->kv_groups);
  snprintf(nm, sizeof nm, "%sbatch", pre);
  add_int(S, nm, &p->batch);
  snprintf(nm, sizeof nm, "%smax_q_len", pre);
  add_int(S, nm, &p->max_q_len);
  snprintf(nm, sizeof nm, "%snum_splits", pre);
  add_int(S, nm, &p->num_splits);
  snprintf(nm, sizeof nm, "%scausal", pre);
  add_int(S, nm, &p->causal);
  snprintf(nm, sizeof nm, "%sscale", pre);
  add_float(S, nm, &p->scale);
}

/* Known defects a hunt can leave out (FUZZ_SKIP=avoid:...), so the fuzzer
 * gets past them; the committed default avoids nothing. */
static bool dec_avoided(const clattn_decode_params *p) {
  const bool int4 = p->k.dtype == CLATTN_INT4;
  if (avoid("kv_groups") && !int4 && p->kv_groups != 0 && p->kv_groups != 1) return true;
  if (avoid("num_splits") && p->num_splits > (1 << 16)) return true;
  return false;
}

static void prepare_dec(state *S, dec *d) {
  if (dec_avoided(&d->p)) return;
  clattn_context *ctx = S->w->cx[d->cx];
  size_t bytes = 0;
  if (present(S, d->ws) && S->s[d->ws].ws_auto && clattn_decode_workspace_size(ctx, &d->p, &bytes, NULL) == CLATTN_SUCCESS)
    size_workspace(S, d->ws, bytes);
}

/* The decode contract (clattn.h, "decode"); `reference`: the CLBlast path's subset. */
static void contract_dec(state *S, dec *d, bool reference) {
  const clattn_decode_params *p = &d->p;
  const clattn_tensor *q = &p->q, *k = &p->k;
  const bool varlen = present(S, d->q_start), paged = present(S, d->bt);
  rule(S, present(S, d->q) && present(S, d->k) && present(S, d->v) && present(S, d->o), "q, k, v or o is absent");
  rule(S, q->ndim == 4 && k->ndim == 4, "q.ndim %d, k.ndim %d (4-d tensors)", q->ndim, k->ndim);
  const int64_t Hq = q->shape[2], D = q->shape[3], Hkv = k->shape[2];
  int64_t B, Mq;
  if (varlen) {
    rule(S, p->batch > 0, "batch %d with varlen queries", p->batch);
    rule(S, p->max_q_len >= 0 && p->max_q_len <= q->shape[1], "max_q_len %d outside [0, total_q %lld]", p->max_q_len,
         (long long)q->shape[1]);
    B = p->batch;
    Mq = p->max_q_len ? p->max_q_len : q->shape[1];
  } else {
    B = q->shape[0];
    Mq = q->shape[1];
    rule(S, p->batch == 0 || p->batch == B, "batch %d with q.shape[0] %lld", p->batch, (long long)B);
  }
  expect(S, d->q, FLOATS, 4, SHAPE(varlen ? 1 : B, q->shape[1], Hq, D));
  rule(S, Hkv > 0 && Hq % Hkv == 0, "Hq %lld is not a multiple of Hkv %lld", (long long)Hq, (long long)Hkv);
  const clattn_dtype kvdt = k->dtype;
  const int kvq = kvdt == CLATTN_INT4 ? 1 : (kvdt == CLATTN_FP8 || kvdt == CLATTN_FP8_FNUZ) ? 2 : 0;
  const int64_t G = p->kv_groups ? p->kv_groups : 1;
  if (kvq == 1)
    rule(S, (G == 1 || G == 2 || G == 4 || G == 8) && D % (8 * G) == 0, "kv_groups %d with int4 K/V of head dim %lld",
         p->kv_groups, (long long)D);
  else
    rule(S, G == 1, "kv_groups %d with %s K/V (groups are int4's)", p->kv_groups, clattn_dtype_name(kvdt));
  rule(S, D > 0 && D % 8 == 0, "head dim %lld", (long long)D);
  const int64_t X = kvq == 1 ? sat_add(G, D / 8) : kvq == 2 ? D / 4 : D;
  int64_t keys;
  int64_t kshape[4];
  if (paged) {
    rule(S, k->shape[1] >= 1, "page size %lld", (long long)k->shape[1]);
    kshape[0] = k->shape[0], kshape[1] = k->shape[1];
    keys = p->maybe_block_table.ndim == 2 ? sat_mul(p->maybe_block_table.shape[1], k->shape[1]) : 0;
    expect(S, d->bt, I32, 2, SHAPE(B, p->maybe_block_table.shape[1]));
    S->s[d->bt].contig = true;
  } else {
    kshape[0] = B, kshape[1] = k->shape[1];
    keys = k->shape[1];
  }
  kshape[2] = Hkv, kshape[3] = X;
  const unsigned kvdts = FLOATS | CLATTN_DT(CLATTN_INT4) | CLATTN_DT(CLATTN_FP8) | CLATTN_DT(CLATTN_FP8_FNUZ);
  expect(S, d->k, kvdts, 4, kshape);
  expect(S, d->v, (unsigned)kvdt < 32 ? CLATTN_DT(kvdt) & kvdts : 0, 4, kshape);
  S->s[d->k].contig = S->s[d->v].contig = !reference; /* the reference stages K/V of any strides */
  expect(S, d->o, FLOATS, 4, q->shape);
  if (present(S, d->lse)) expect(S, d->lse, F32, 3, varlen ? SHAPE(1, Hq, q->shape[1]) : SHAPE(B, Hq, Mq));
  if (present(S, d->kv_len)) expect(S, d->kv_len, I32, 1, SHAPE(B));
  if (present(S, d->bias)) expect(S, d->bias, F32, 4, SHAPE(B, Hq, Mq, keys));
  if (varlen) expect(S, d->q_start, I32, 1, SHAPE(sat_add(B, 1)));
  if (kvq == 2) {
    rule(S, present(S, d->kss) && present(S, d->vss), "fp8 K/V without both scale-shift tensors");
    expect(S, d->kss, I32, 3, kshape);
    expect(S, d->vss, I32, 3, kshape);
  }
  if (present(S, d->flag) && !reference) expect(S, d->flag, I32, 1, SHAPE(1)); /* the reference has no pages to flag */
  if (reference) {
    rule(S, !paged && kvq == 0, "a paged or quantized cache in the reference path");
    S->max_kernels = (int)(B > 0 ? 8 * B + 8 : 8);
  } else {
    if (d->ws_st != CLATTN_SUCCESS)
      fake_fail("contract", "clattn_decode succeeded where clattn_decode_workspace_size failed (%s)",
                clattn_status_string(d->ws_st));
    S->max_kernels = 2;
    if (d->ws_st == CLATTN_SUCCESS && d->ws_splits > 1) {
      const unsigned __int128 need = need_bytes(d->ws_splits, B, Hq, Mq, sat_add(D, 1));
      char a[64];
      if ((unsigned __int128)d->ws_bytes < need) {
        unsigned __int128 u = need;
        int n = 0;
        char tmp[48];
        do tmp[n++] = (char)('0' + (int)(u % 10)), u /= 10; while (u);
        for (int i = 0; i < n; i++) a[i] = tmp[n - 1 - i];
        a[n] = '\0';
        fake_fail("workspace", "clattn_decode_workspace_size reports %zu bytes for %d splits of B=%lld Hq=%lld Mq=%lld D=%lld, which need %s",
                  d->ws_bytes, d->ws_splits, (long long)B, (long long)Hq, (long long)Mq, (long long)D, a);
      }
      if (present(S, d->ws)) {
        expect(S, d->ws, F32, 1, SHAPE(p->maybe_workspace.shape[0]));
        S->s[d->ws].big_ok = true;
      }
      if (count_kernels(NULL) > 0) check_workspace(S, d->ws, need, "decode's split-K partials");
    } else if (d->ws_st == CLATTN_SUCCESS && d->ws_splits < 1) {
      fake_fail("contract", "clattn_decode_workspace_size reports %d splits", d->ws_splits);
    }
  }
  S->work += elems(&S->s[d->o]);
}

static dec g_dec;


static void dec_build(state *S, rd *r) {
  dec_common c;
  read_common(r, &c);
  build_dec(S, r, &g_dec, &c, CX_A0, "");
  S->params = &g_dec;
}
static void dec_prepare(state *S) { prepare_dec(S, &g_dec); }
static clattn_status dec_call(state *S) {
  if (dec_avoided(&g_dec.p)) return S->avoided = true, CLATTN_SUCCESS;
  g_dec.ws_st = clattn_decode_workspace_size(S->ctx, S->null_params ? NULL : &g_dec.p, &g_dec.ws_bytes, &g_dec.ws_splits);
  return clattn_decode(S->ctx, S->queue, S->null_params ? NULL : &g_dec.p, S->num_wait, wait_list(S), out_event(S));
}
static void dec_contract(state *S) { contract_dec(S, &g_dec, false); }

/* A split count past one key per split asks for a workspace of nothing but
 * empty partials: the call must name num_splits, not fail in clCreateBuffer. */
static void dec_failed(state *S) {
  const clattn_decode_params *p = &g_dec.p;
  const int64_t keys = present(S, g_dec.bt) && p->maybe_block_table.ndim == 2
                           ? sat_mul(p->maybe_block_table.shape[1], p->k.shape[1]) : p->k.shape[1];
  if (S->st == CLATTN_OPENCL_ERROR && fake_refused_allocs() > 0 && p->num_splits > 1 && p->num_splits > keys)
    fake_fail("named", "num_splits %d for %lld keys: the workspace it asks for reached OpenCL (%s) instead of the "
              "message naming num_splits", p->num_splits, (long long)keys, clattn_last_error());
}

/* clattn_decode_workspace_size alone: it never enqueues, and its answer
 * holds what the plan needs. */
static clattn_status decws_call(state *S) {
  if (dec_avoided(&g_dec.p)) return S->avoided = true, CLATTN_SUCCESS;
  g_dec.ws_st = clattn_decode_workspace_size(S->ctx, S->null_params ? NULL : &g_dec.p, &g_dec.ws_bytes, &g_dec.ws_splits);
  return g_dec.ws_st;
}
static void decws_contract(state *S) {
  const clattn_decode_params *p = &g_dec.p;
  if (g_dec.ws_splits > 1) {
    const int64_t B = present(S, g_dec.q_start) ? p->batch : p->q.shape[0];
    const int64_t Mq = present(S, g_dec.q_start) ? (p->max_q_len ? p->max_q_len : p->q.shape[1]) : p->q.shape[1];
    const unsigned __int128 need = need_bytes(g_dec.ws_splits, B, p->q.shape[2], Mq, sat_add(p->q.shape[3], 1));
    if ((unsigned __int128)g_dec.ws_bytes < need)
      fake_fail("workspace", "clattn_decode_workspace_size reports %zu bytes for %d splits, short of the partials",
                g_dec.ws_bytes, g_dec.ws_splits);
  }
  if (g_dec.ws_splits < 1) fake_fail("contract", "clattn_decode_workspace_size reports %d splits", g_dec.ws_splits);
  S->max_kernels = 0;
}

static clattn_status ref_call(state *S) {
  if (dec_avoided(&g_dec.p)) return S->avoided = true, CLATTN_SUCCESS;
  return clattn_reference_decode(S->ctx, S->queue, S->null_params ? NULL : &g_dec.p, S->num_wait, wait_list(S),
                                 out_event(S));
}
static void ref_contract(state *S) { contract_dec(S, &g_dec, true); }

/* ================================================================== decode_multi */

#define MAX_SHARDS 4
typedef struct multi {
  clattn_decode_multi_params p;
  clattn_decode_shard sh[MAX_SHARDS];
  dec d[MAX_SHARDS];
  int o, lse;
} multi;
static multi g_multi;

static void multi_build(state *S, rd *r) {
  multi *m = &g_multi;
  memset(m, 0, sizeof *m);
  dec_common c;
  read_common(r, &c);
  c.lse = true; /* every shard's partial needs its lse */
  const unsigned b = rd_u8(r);
  m->p.n = 1 + (int)(b & 3);
  static const int cxs[4] = {CX_A0, CX_B, CX_A1, CX_A0};
  for (int j = 0; j < m->p.n; j++) {
    const int cx = j == 0 ? CX_A0 : cxs[(b >> (2 + 2 * (j - 1))) & 3];
    char pre[24];
    snprintf(pre, sizeof pre, "shards[%d].", j);
    build_dec(S, r, &m->d[j], &c, cx, pre);
    m->sh[j].ctx = S->w->cx[cx];
    m->sh[j].queue = S->w->q[cx][0];
  }
  m->o = add_slot(S, "o", &m->p.o, R_OUT, CX_A0);
  canon(S, m->o, c.odt, 4, g_multi.d[0].p.o.shape, 0);
  m->lse = add_slot(S, "maybe_lse", &m->p.maybe_lse, R_OUT, CX_A0);
  canon(S, m->lse, CLATTN_F32, 3, g_multi.d[0].p.maybe_lse.shape, 0);
  if (!(rd_u8(r) & 1)) drop(S, m->lse);
  add_int(S, "n", &m->p.n);
  S->params = m;
}
static void multi_prepare(state *S) {
  for (int j = 0; j < g_multi.p.n && j < MAX_SHARDS; j++) prepare_dec(S, &g_multi.d[j]);
}
static clattn_status multi_call(state *S) {
  multi *m = &g_multi;
  /* shard 0 is the call's context and queue (with the header's oddities) */
  m->sh[0].ctx = S->ctx;
  m->sh[0].queue = S->queue;
  const int n = m->p.n < 0 ? 0 : m->p.n > MAX_SHARDS ? MAX_SHARDS : m->p.n;
  for (int j = 0; j < n; j++) {
    if (dec_avoided(&m->d[j].p)) return S->avoided = true, CLATTN_SUCCESS;
    const int64_t *os = m->d[j].p.o.shape;
    if (avoid("multi_empty") && m->d[j].cx == CX_B && (os[0] == 0 || os[1] == 0 || os[2] == 0 || os[3] == 0))
      return S->avoided = true, CLATTN_SUCCESS;
  }
  for (int j = 0; j < n; j++) {
    m->sh[j].params = m->d[j].p;
    m->d[j].ws_st = clattn_decode_workspace_size(m->sh[j].ctx, &m->d[j].p, &m->d[j].ws_bytes, &m->d[j].ws_splits);
  }
  m->p.shards = m->sh;
  /* n beyond the shards given would read past the array: the caller's bug, not the library's */
  const int keep = m->p.n;
  if (m->p.n > MAX_SHARDS) m->p.n = MAX_SHARDS;
  clattn_status s = clattn_decode_multi(S->null_params ? NULL : &m->p, S->num_wait, wait_list(S), out_event(S));
  m->p.n = keep;
  return s;
}
/* Every shard a decode of its own, their partials one merge. */
static void multi_contract(state *S) {
  multi *m = &g_multi;
  const int n = m->p.n > MAX_SHARDS ? MAX_SHARDS : m->p.n < 0 ? 0 : m->p.n;
  rule(S, m->p.n >= 1, "n = %d shards", m->p.n);
  int kernels = 0;
  const clattn_tensor *o0 = &m->d[0].p.o;
  for (int j = 0; j < n; j++) {
    contract_dec(S, &m->d[j], false);
    rule(S, present(S, m->d[j].lse), "shards[%d] without maybe_lse", j);
    rule(S, m->d[j].p.o.dtype == o0->dtype, "shards[%d].params.o.dtype differs from shards[0]'s", j);
    for (int i = 0; i < 4; i++)
      rule(S, m->d[j].p.o.shape[i] == o0->shape[i], "shards[%d].params.o.shape[%d] differs from shards[0]'s", j, i);
    kernels += 2;
  }
  expect(S, m->o, FLOATS, 4, o0->shape);
  if (present(S, m->lse)) expect(S, m->lse, F32, 3, SHAPE(o0->shape[0], o0->shape[2], o0->shape[1]));
  S->work = elems(&S->s[m->o]);
  S->max_kernels = kernels + n + 2;
}

/* ================================================================== merge and its backward */

#define MAX_PARTS 64
typedef struct mrg {
  clattn_merge_params p;
  clattn_merge_backward_params bp;
  clattn_tensor po[MAX_PARTS], pl[MAX_PARTS], dpo[MAX_PARTS], dpl[MAX_PARTS];
  int spo[MAX_PARTS], spl[MAX_PARTS], sdpo[MAX_PARTS], sdpl[MAX_PARTS];
  int o, lse, ws, blse, bo, bdo, bdlse;
  int n;
  size_t ws_bytes;
  clattn_status ws_st;
} mrg;
static mrg g_mrg;

/* n parts [B, M, H, D] and their lse; `grads` adds the backward's tensors. */
static void build_merge(state *S, rd *r, bool grads) {
  mrg *m = &g_mrg;
  memset(m, 0, sizeof *m);
  static const int ns[16] = {1, 2, 3, 4, 8, 9, 16, 17, 33, 40, 5, 6, 7, 15, 31, 64};
  static const int Bs[4] = {1, 2, 3, 0}, Ms[4] = {1, 2, 4, 7}, Hs[4] = {1, 2, 8, 32};
  static const int Ds[8] = {64, 128, 8, 1, 3, 5, 256, 1000};
  const unsigned b0 = rd_u8(r), b1 = rd_u8(r), b2 = rd_u8(r);
  const int n = ns[b0 & 15];
  const clattn_dtype pdt = float_dt[(b0 >> 4) & 3];
  const clattn_dtype odt = (b0 >> 6) ? float_dt[(b0 >> 6) & 3] : pdt;
  const int B = Bs[b1 & 3], M = Ms[(b1 >> 2) & 3], H = Hs[(b1 >> 4) & 3];
  const int D = Ds[b2 & 7];
  const bool lse = (b2 >> 3) & 1, ws = (b2 >> 4) & 1, stacked = (b2 >> 5) & 1, pad = (b2 >> 6) & 1;
  const bool opt = (b1 >> 6) & 1, opt2 = (b1 >> 7) & 1;
  m->n = n;
  char nm[48];
  for (int i = 0; i < n; i++) {
    snprintf(nm, sizeof nm, "parts_o[%d]", i);
    m->spo[i] = add_slot(S, nm, &m->po[i], R_IN, CX_A0);
    canon(S, m->spo[i], pdt, 4, SHAPE(B, M, H, D), pad ? 4 : 0);
    snprintf(nm, sizeof nm, "parts_lse[%d]", i);
    m->spl[i] = add_slot(S, nm, &m->pl[i], R_IN, CX_A0);
    canon(S, m->spl[i], CLATTN_F32, 3, SHAPE(B, H, M), 0);
  }
  if (stacked) { /* one buffer, a constant spacing: the strided run */
    stack_slots(S, m->spo, n, 0);
    stack_slots(S, m->spl, n, 0);
  }
  if (!grads) {
    m->o = add_slot(S, "o", &m->p.o, R_OUT, CX_A0);
    canon(S, m->o, odt, 4, SHAPE(B, M, H, D), 0);
    m->lse = add_slot(S, "maybe_lse", &m->p.maybe_lse, R_OUT, CX_A0);
    canon(S, m->lse, CLATTN_F32, 3, SHAPE(B, H, M), 0);
    if (!lse) drop(S, m->lse);
    m->ws = add_slot(S, "maybe_workspace", &m->p.maybe_workspace, R_WS, CX_A0);
    canon(S, m->ws, CLATTN_F32, 1, SHAPE(1), 0);
    S->s[m->ws].ws_auto = true;
    if (!ws) drop(S, m->ws);
    m->p.n = n;
    m->p.parts_o = m->po;
    m->p.parts_lse = m->pl;
    add_int(S, "n", &m->p.n);
  } else {
    clattn_merge_backward_params *bp = &m->bp;
    m->bo = add_slot(S, "o", &bp->o, R_IN, CX_A0);
    canon(S, m->bo, odt, 4, SHAPE(B, M, H, D), 0);
    if (!(opt || !opt2)) drop(S, m->bo);
    m->blse = add_slot(S, "lse", &bp->lse, R_IN, CX_A0);
    canon(S, m->blse, CLATTN_F32, 3, SHAPE(B, H, M), 0);
    m->bdo = add_slot(S, "maybe_do", &bp->maybe_do, R_IN, CX_A0);
    canon(S, m->bdo, odt, 4, SHAPE(B, M, H, D), 0);
    if (opt2) drop(S, m->bdo);
    m->bdlse = add_slot(S, "maybe_dlse", &bp->maybe_dlse, R_IN, CX_A0);
    canon(S, m->bdlse, CLATTN_F32, 3, SHAPE(B, H, M), 0);
    if (!lse) drop(S, m->bdlse);
    const clattn_dtype ddt = ws ? CLATTN_F32 : pdt;
    for (int i = 0; i < n; i++) {
      snprintf(nm, sizeof nm, "d_parts_o[%d]", i);
      m->sdpo[i] = add_slot(S, nm, &m->dpo[i], R_OUT, CX_A0);
      canon(S, m->sdpo[i], ddt, 4, SHAPE(B, M, H, D), 0);
      snprintf(nm, sizeof nm, "d_parts_lse[%d]", i);
      m->sdpl[i] = add_slot(S, nm, &m->dpl[i], R_OUT, CX_A0);
      canon(S, m->sdpl[i], CLATTN_F32, 3, SHAPE(B, H, M), 0);
    }
    bp->n = n;
    bp->parts_o = m->po;
    bp->parts_lse = m->pl;
    bp->d_parts_o = m->dpo;
    bp->d_parts_lse = m->dpl;
    add_int(S, "n", &bp->n);
  }
  S->params = m;
}

static void merge_build(state *S, rd *r) { build_merge(S, r, false); }
static void merge_prepare(state *S) {
  size_t bytes = 0;
  if (g_mrg.ws >= 0 && S->s[g_mrg.ws].ws_auto && clattn_merge_workspace_size(S->ctx ? S->ctx : S->w->cx[0], &g_mrg.p, &bytes) == CLATTN_SUCCESS)
    size_workspace(S, g_mrg.ws, bytes);
}
/* n past the arrays would read past them: the caller's bug, not the library's */
static int clamp_n(int n) { return n > MAX_PARTS ? MAX_PARTS : n; }
static clattn_status merge_call(state *S) {
  mrg *m = &g_mrg;
  const int keep = m->p.n;
  m->p.n = clamp_n(keep) > m->n ? m->n : clamp_n(keep);
  m->ws_st = clattn_merge_workspace_size(S->ctx, S->null_params ? NULL : &m->p, &m->ws_bytes);
  clattn_status s = clattn_merge(S->ctx, S->queue, S->null_params ? NULL : &m->p, S->num_wait, wait_list(S), out_event(S));
  if (s == CLATTN_SUCCESS) m->n = m->p.n;
  m->p.n = keep;
  return s;
}
static clattn_status mergews_call(state *S) {
  mrg *m = &g_mrg;
  const int keep = m->p.n;
  m->p.n = clamp_n(keep) > m->n ? m->n : clamp_n(keep);
  m->ws_st = clattn_merge_workspace_size(S->ctx, S->null_params ? NULL : &m->p, &m->ws_bytes);
  if (m->ws_st == CLATTN_SUCCESS) m->n = m->p.n;
  m->p.n = keep;
  return m->ws_st;
}

static void contract_parts(state *S, const int *so, const int *sl, const clattn_tensor *po, int n, const int64_t *shape) {
  for (int i = 0; i < n; i++) {
    expect(S, so[i], (unsigned)po[0].dtype < 32 ? CLATTN_DT(po[0].dtype) & FLOATS : 0, 4, shape);
    expect(S, sl[i], F32, 3, SHAPE(shape[0], shape[2], shape[1]));
  }
}

/* The header: parts stacked in one buffer at a constant spacing (one layout)
 * merge in one launch; their offsets reach the kernel as the first part's
 * and the spacing. Marks such a leading run of parts (o and lse alike). */
static void mark_run(state *S, const int *so, const int *sl, const clattn_tensor *po, const clattn_tensor *pl, int n) {
  if (n < 2 || po[1].buf != po[0].buf || pl[1].buf != pl[0].buf) return;
  const int64_t eo = dtype_bytes(po[0].dtype), el = 4;
  if (eo == 0) return;
  const int64_t so1 = (int64_t)(uint64_t)(po[1].offset / (size_t)eo - po[0].offset / (size_t)eo);
  const int64_t sl1 = (int64_t)(uint64_t)(pl[1].offset / (size_t)el - pl[0].offset / (size_t)el);
  for (int r = 1; r < n; r++) {
    if (po[r].buf != po[0].buf || pl[r].buf != pl[0].buf ||
        (__int128)(po[r].offset / (size_t)eo) != (__int128)(po[0].offset / (size_t)eo) + (__int128)r * so1 ||
        (__int128)(pl[r].offset / (size_t)el) != (__int128)(pl[0].offset / (size_t)el) + (__int128)r * sl1 ||
        memcmp(po[r].stride, po[0].stride, 4 * sizeof po[0].stride[0]) ||
        memcmp(pl[r].stride, pl[0].stride, 3 * sizeof pl[0].stride[0]))
      break;
    S->s[so[r]].run_base = so[0], S->s[so[r]].run_spacing = so1;
    S->s[sl[r]].run_base = sl[0], S->s[sl[r]].run_spacing = sl1;
  }
}

static void merge_contract_common(state *S, bool call) {
  mrg *m = &g_mrg;
  const int n = m->n;
  rule(S, n >= 1, "n = %d parts", n);
  const int64_t *sh = m->po[0].shape;
  contract_parts(S, m->spo, m->spl, m->po, n, sh);
  mark_run(S, m->spo, m->spl, m->po, m->pl, n);
  if (!call) {
    S->max_kernels = 0;
    return;
  }
  expect(S, m->o, FLOATS, 4, sh);
  if (present(S, m->lse)) expect(S, m->lse, F32, 3, SHAPE(sh[0], sh[2], sh[1]));
  const int launches = count_kernels("clattn_merge");
  if (m->ws_st != CLATTN_SUCCESS)
    fake_fail("contract", "clattn_merge succeeded where clattn_merge_workspace_size failed (%s)", clattn_status_string(m->ws_st));
  if (launches > 1) {
    const unsigned __int128 need = need_bytes(launches > 2 ? 2 : launches - 1, sh[0], sh[1], sh[2], sat_add(sh[3], 1));
    if ((unsigned __int128)m->ws_bytes < need)
      fake_fail("workspace", "clattn_merge_workspace_size reports %zu bytes, %d launches need more", m->ws_bytes, launches);
    if (present(S, m->ws)) {
      expect(S, m->ws, F32, 1, SHAPE(m->p.maybe_workspace.shape[0]));
      S->s[m->ws].big_ok = true;
    }
    check_workspace(S, m->ws, need, "merge's running results");
  }
  S->work = elems(&S->s[m->o]);
  S->max_kernels = n + 1;
}
static void merge_contract(state *S) { merge_contract_common(S, true); }
static void mergews_contract(state *S) { merge_contract_common(S, false); }

static void mbwd_build(state *S, rd *r) { build_merge(S, r, true); }
static clattn_status mbwd_call(state *S) {
  mrg *m = &g_mrg;
  const int keep = m->bp.n;
  m->bp.n = clamp_n(keep) > m->n ? m->n : clamp_n(keep);
  clattn_status s = clattn_merge_backward(S->ctx, S->queue, S->null_params ? NULL : &m->bp, S->num_wait, wait_list(S), out_event(S));
  if (s == CLATTN_SUCCESS) m->n = m->bp.n;
  m->bp.n = keep;
  return s;
}
static void mbwd_contract(state *S) {
  mrg *m = &g_mrg;
  const int n = m->n;
  rule(S, n >= 1, "n = %d parts", n);
  const int64_t *sh = m->po[0].shape;
  contract_parts(S, m->spo, m->spl, m->po, n, sh);
  contract_parts(S, m->sdpo, m->sdpl, m->dpo, n, sh);
  if (present(S, m->bdo)) {
    rule(S, present(S, m->bo), "maybe_do without the forward's o");
    expect(S, m->bdo, FLOATS, 4, sh);
  }
  if (present(S, m->bo)) expect(S, m->bo, FLOATS, 4, sh);
  rule(S, present(S, m->blse), "no lse");
  expect(S, m->blse, F32, 3, SHAPE(sh[0], sh[2], sh[1]));
  if (present(S, m->bdlse)) expect(S, m->bdlse, F32, 3, SHAPE(sh[0], sh[2], sh[1]));
  int64_t w = 0;
  for (int i = 0; i < n; i++) w += elems(&S->s[m->sdpo[i]]) + elems(&S->s[m->sdpl[i]]);
  S->work = w;
  S->max_kernels = n;
}

/* ================================================================== ReRoPE */

typedef struct rr {
  clattn_rerope_params f;
  clattn_rerope_bwd_params b;
  clattn_rerope_rotary_params rf;
  clattn_rerope_rotary_bwd_params rb;
  int kind; /* 0 fwd, 1 bwd, 2 rotary fwd, 3 rotary bwd */
  int q1, q2, k1, k2, v, o, lse, dout, dq1, dq2, dk1, dk2, dv, ws, qpos, kpos;
} rr;
static rr g_rr;

static void build_rr(state *S, rd *r, int kind) {
  rr *x = &g_rr;
  memset(x, 0, sizeof *x);
  x->kind = kind;
  static const int Zs[4] = {1, 2, 0, 3}, Hs[4] = {1, 2, 4, 8}, Gs[4] = {1, 2, 4, 3};
  static const int Ns[8] = {1, 16, 64, 100, 0, 7, 128, 300};
  static const int Ds[8] = {64, 128, 16, 8, 32, 256, 24, 48};
  static const int Ws[4] = {0, 1, 16, 1000};
  static const float thetas[4] = {0.0f, 10000.0f, 500000.0f, 1.0f};
  const unsigned b0 = rd_u8(r), b1 = rd_u8(r), b2 = rd_u8(r), b3 = rd_u8(r);
  const int Z = Zs[b0 & 3], Hkv = Hs[(b0 >> 2) & 3], G = Gs[(b0 >> 4) & 3], Hq = Hkv * G;
  const int Nq = Ns[b1 & 7], Nk = Ns[(b1 >> 3) & 7];
  const int D = Ds[b2 & 7];
  const clattn_dtype dt = float_dt[(b2 >> 3) & 3];
  const bool bnhd = (b2 >> 5) & 1, lse = (b2 >> 6) & 1, ws = (b2 >> 7) & 1;
  const int window = Ws[b3 & 3];
  const int causal = (b3 >> 2) & 1;
  const int qpos = (b3 >> 3) & 3, kpos = (b3 >> 5) & 3; /* 0 absent, 1 [N], 2 [Z, N], 3 absent */
  const float theta = thetas[(b1 >> 6) & 3];
  const int layout = (b3 >> 7) & 1;
  static const int perm[4] = {0, 2, 1, 3}; /* [Z, N, H, D] in memory */
  const int *pm = bnhd ? perm : NULL;
  const int64_t qs[4] = {Z, Hq, Nq, D}, ks[4] = {Z, Hkv, Nk, D}, ls[3] = {Z, Hq, Nq};
  clattn_tensor *T[16];
  int *window_p, *causal_p;
  float *scale_p;
  const bool bwd = kind == 1 || kind == 3, rot = kind >= 2;
  if (kind == 0) {
    clattn_rerope_params *p = &x->f;
    T[0] = &p->q1, T[1] = &p->q2, T[2] = &p->k1, T[3] = &p->k2, T[4] = &p->v, T[5] = &p->o, T[6] = &p->maybe_lse;
    window_p = &p->window, causal_p = &p->causal, scale_p = &p->scale;
  } else if (kind == 1) {
    clattn_rerope_bwd_params *p = &x->b;
    T[0] = &p->q1, T[1] = &p->q2, T[2] = &p->k1, T[3] = &p->k2, T[4] = &p->v, T[5] = &p->o, T[6] = &p->lse;
    T[7] = &p->dout, T[8] = &p->dq1, T[9] = &p->dq2, T[10] = &p->dk1, T[11] = &p->dk2, T[12] = &p->dv;
    T[13] = &p->maybe_workspace;
    window_p = &p->window, causal_p = &p->causal, scale_p = &p->scale;
  } else if (kind == 2) {
    clattn_rerope_rotary_params *p = &x->rf;
    T[0] = &p->q, T[2] = &p->k, T[4] = &p->v, T[5] = &p->o, T[6] = &p->maybe_lse;
    T[14] = &p->maybe_q_pos, T[15] = &p->maybe_k_pos;
    window_p = &p->window, causal_p = &p->causal, scale_p = &p->scale;
    p->rope_theta = theta;
    p->rope_layout = (clattn_rope_layout)layout;
    add_float(S, "rope_theta", &p->rope_theta);
    add_int(S, "rope_layout", (int *)&p->rope_layout);
  } else {
    clattn_rerope_rotary_bwd_params *p = &x->rb;
    T[0] = &p->q, T[2] = &p->k, T[4] = &p->v, T[5] = &p->o, T[6] = &p->lse, T[7] = &p->dout;
    T[8] = &p->dq, T[10] = &p->dk, T[12] = &p->dv, T[13] = &p->maybe_workspace;
    T[14] = &p->maybe_q_pos, T[15] = &p->maybe_k_pos;
    window_p = &p->window, causal_p = &p->causal, scale_p = &p->scale;
    p->rope_theta = theta;
    p->rope_layout = (clattn_rope_layout)layout;
    add_float(S, "rope_theta", &p->rope_theta);
    add_int(S, "rope_layout", (int *)&p->rope_layout);
  }
  *window_p = window;
  *causal_p = causal;
  *scale_p = 0.0f;
  add_int(S, "window", window_p);
  add_int(S, "causal", causal_p);
  add_float(S, "scale", scale_p);
  x->q1 = add_slot(S, rot ? "q" : "q1", T[0], R_IN, CX_A0);
  canon_perm(S, x->q1, dt, 4, qs, pm, 0);
  x->q2 = x->k2 = x->dq2 = x->dk2 = x->dout = x->dq1 = x->dk1 = x->dv = x->ws = x->qpos = x->kpos = -1;
  if (!rot) {
    x->q2 = add_slot(S, "q2", T[1], R_IN, CX_A0);
    canon_perm(S, x->q2, dt, 4, qs, pm, 0);
  }
  x->k1 = add_slot(S, rot ? "k" : "k1", T[2], R_IN, CX_A0);
  canon_perm(S, x->k1, dt, 4, ks, pm, 0);
  if (!rot) {
    x->k2 = add_slot(S, "k2", T[3], R_IN, CX_A0);
    canon_perm(S, x->k2, dt, 4, ks, pm, 0);
  }
  x->v = add_slot(S, "v", T[4], R_IN, CX_A0);
  canon_perm(S, x->v, dt, 4, ks, pm, 0);
  x->o = add_slot(S, "o", T[5], bwd ? R_IN : R_OUT, CX_A0);
  canon_perm(S, x->o, dt, 4, qs, pm, 0);
  x->lse = add_slot(S, bwd ? "lse" : "maybe_lse", T[6], bwd ? R_IN : R_OUT, CX_A0);
  canon(S, x->lse, CLATTN_F32, 3, ls, 0);
  if (!(bwd || lse)) drop(S, x->lse);
  if (bwd) {
    x->dout = add_slot(S, "dout", T[7], R_IN, CX_A0);
    canon_perm(S, x->dout, dt, 4, qs, pm, 0);
    x->dq1 = add_slot(S, rot ? "dq" : "dq1", T[8], R_OUT, CX_A0);
    canon_perm(S, x->dq1, dt, 4, qs, pm, 0);
    if (!rot) {
      x->dq2 = add_slot(S, "dq2", T[9], R_OUT, CX_A0);
      canon_perm(S, x->dq2, dt, 4, qs, pm, 0);
    }
    x->dk1 = add_slot(S, rot ? "dk" : "dk1", T[10], R_OUT, CX_A0);
    canon_perm(S, x->dk1, dt, 4, ks, pm, 0);
    if (!rot) {
      x->dk2 = add_slot(S, "dk2", T[11], R_OUT, CX_A0);
      canon_perm(S, x->dk2, dt, 4, ks, pm, 0);
    }
    x->dv = add_slot(S, "dv", T[12], R_OUT, CX_A0);
    canon_perm(S, x->dv, dt, 4, ks, pm, 0);
    x->ws = add_slot(S, "maybe_workspace", T[13], R_WS, CX_A0);
    canon(S, x->ws, CLATTN_F32, 1, SHAPE((int64_t)Z * Hq * Nq > 0 ? (int64_t)Z * Hq * Nq : 1), 0);
    if (!ws) drop(S, x->ws);
  }
  if (rot) {
    x->qpos = add_slot(S, "maybe_q_pos", T[14], R_IN, CX_A0);
    if (qpos == 2) canon(S, x->qpos, CLATTN_I32, 2, SHAPE(Z, Nq), 0);
    else canon(S, x->qpos, CLATTN_I32, 1, SHAPE(Nq), 0);
    if (qpos == 0 || qpos == 3) drop(S, x->qpos);
    x->kpos = add_slot(S, "maybe_k_pos", T[15], R_IN, CX_A0);
    if (kpos == 2) canon(S, x->kpos, CLATTN_I32, 2, SHAPE(Z, Nk), 0);
    else canon(S, x->kpos, CLATTN_I32, 1, SHAPE(Nk), 0);
    if (kpos == 0 || kpos == 3) drop(S, x->kpos);
  }
  S->params = x;
}

static void rrf_build(state *S, rd *r) { build_rr(S, r, 0); }
static void rrb_build(state *S, rd *r) { build_rr(S, r, 1); }
static void rrrf_build(state *S, rd *r) { build_rr(S, r, 2); }
static void rrrb_build(state *S, rd *r) { build_rr(S, r, 3); }

static clattn_status rr_call(state *S) {
  rr *x = &g_rr;
  const cl_event *wl = wait_list(S);
  switch (x->kind) {
  case 0: return clattn_rerope_fwd(S->ctx, S->queue, S->null_params ? NULL : &x->f, S->num_wait, wl, out_event(S));
  case 1: return clattn_rerope_bwd(S->ctx, S->queue, S->null_params ? NULL : &x->b, S->num_wait, wl, out_event(S));
  case 2:
    return clattn_rerope_rotary_fwd(S->ctx, S->queue, S->null_params ? NULL : &x->rf, S->num_wait, wl, out_event(S));
  default:
    return clattn_rerope_rotary_bwd(S->ctx, S->queue, S->null_params ? NULL : &x->rb, S->num_wait, wl, out_event(S));
  }
}

static void rr_contract(state *S) {
  rr *x = &g_rr;
  const clattn_tensor *q = S->s[x->q1].t, *k = S->s[x->k1].t;
  const bool bwd = x->kind == 1 || x->kind == 3;
  rule(S, q->ndim == 4 && k->ndim == 4, "q.ndim %d, k.ndim %d", q->ndim, k->ndim);
  const int64_t Z = q->shape[0], Hq = q->shape[1], Nq = q->shape[2], D = q->shape[3];
  const int64_t Hkv = k->shape[1], Nk = k->shape[2];
  const unsigned dt = (unsigned)q->dtype < 32 ? CLATTN_DT(q->dtype) & FLOATS : 0;
  rule(S, Hkv == 0 ? Hq == 0 : Hkv > 0 && Hq % Hkv == 0, "Hkv %lld does not divide Hq %lld", (long long)Hkv, (long long)Hq);
  const int64_t qs[4] = {Z, Hq, Nq, D}, ks[4] = {Z, Hkv, Nk, D}, ls[3] = {Z, Hq, Nq};
  expect(S, x->q1, dt, 4, qs);
  expect(S, x->q2, dt, 4, qs);
  expect(S, x->k1, dt, 4, ks);
  expect(S, x->k2, dt, 4, ks);
  expect(S, x->v, dt, 4, ks);
  expect(S, x->o, dt, 4, qs);
  if (bwd) rule(S, present(S, x->lse), "no lse for the backward");
  if (present(S, x->lse)) expect(S, x->lse, F32, 3, ls);
  if (bwd) {
    expect(S, x->dout, dt, 4, qs);
    expect(S, x->dq1, dt, 4, qs);
    expect(S, x->dq2, dt, 4, qs);
    expect(S, x->dk1, dt, 4, ks);
    expect(S, x->dk2, dt, 4, ks);
    expect(S, x->dv, dt, 4, ks);
    const unsigned __int128 need = need_bytes(1, Z, Hq, Nq, 1);
    if (present(S, x->ws)) {
      expect(S, x->ws, F32, 1, SHAPE(S->s[x->ws].t->shape[0]));
      S->s[x->ws].big_ok = true;
    }
    if (count_kernels(NULL) > 0) check_workspace(S, x->ws, need, "the backward's delta rows");
    S->work = elems(&S->s[x->dq1]) + elems(&S->s[x->dk1]);
    S->max_kernels = 3;
  } else {
    S->work = elems(&S->s[x->o]);
    S->max_kernels = 1;
  }
  for (int i = 0; i < 2; i++) {
    const int sl = i ? x->kpos : x->qpos;
    if (sl < 0 || !present(S, sl)) continue;
    const clattn_tensor *t = S->s[sl].t;
    const int64_t n = i ? Nk : Nq;
    if (t->ndim == 1) expect(S, sl, I32, 1, SHAPE(n));
    else expect(S, sl, I32, 2, SHAPE(Z, n));
  }
}

/* ================================================================== KV cache */

typedef struct kv {
  clattn_kv_append_params a;
  clattn_kv_quantize_params q;
  clattn_kv_dequantize_params d;
  int kind; /* 0 append, 1 quantize, 2 dequantize */
  int x, xv, cache, vcache, ss, vss, pos, start, bt, flag;
} kv;
static kv g_kv;

static const clattn_dtype cache_dt[8] = {CLATTN_F16, CLATTN_F32, CLATTN_BF16, CLATTN_INT4,
                                         CLATTN_FP8, CLATTN_FP8_FNUZ, CLATTN_INT4, CLATTN_F16};

static int64_t row_size(clattn_dtype dt, int64_t D, int64_t G) {
  if (dt == CLATTN_INT4) return sat_add(G, D / 8);
  if (dt == CLATTN_FP8 || dt == CLATTN_FP8_FNUZ) return D / 4;
  return D;
}

static void build_kv(state *S, rd *r, int kind) {
  kv *k = &g_kv;
  memset(k, 0, sizeof *k);
  k->kind = kind;
  static const int Bs[8] = {1, 2, 3, 0, 4, 8, 1, 2}, Hs[4] = {1, 2, 8, 3};
  static const int Ds[8] = {128, 64, 8, 16, 2048, 24, 256, 72};
  static const int Gs[8] = {0, 1, 2, 4, 8, 3, 0, 0}, Ns[8] = {16, 100, 1024, 0, 1, 4096, 65536, 33};
  static const int ps_[4] = {16, 1, 32, 48}, rows[4] = {1, 2, 5, 16};
  const unsigned b0 = rd_u8(r), b1 = rd_u8(r), b2 = rd_u8(r), b3 = rd_u8(r);
  const int B = Bs[b0 & 7], H = Hs[(b0 >> 3) & 3], D = Ds[(b0 >> 5) & 7];
  const clattn_dtype cdt = cache_dt[b1 & 7];
  const int G = Gs[(b1 >> 3) & 7];
  const clattn_dtype xdt = float_dt[(b1 >> 6) & 3];
  const bool paged = b2 & 1, withv = (b2 >> 1) & 1, varlen = (b2 >> 2) & 1, flag = (b2 >> 3) & 1;
  const int ps = ps_[(b2 >> 4) & 3];
  const int N = Ns[(b2 >> 6) | (((b3 >> 6) & 1) << 2)];
  const int per = rows[b3 & 3];
  const bool start = (b3 >> 2) & 1, xpad = (b3 >> 3) & 1, cpad = (b3 >> 4) & 1, noss = (b3 >> 5) & 1;
  const int64_t X = row_size(cdt, D, G ? G : 1);
  const int max_pages = paged ? ((N + ps - 1) / ps > 0 ? (N + ps - 1) / ps : 1) : 0;
  int64_t cs[4];
  if (paged) cs[0] = (int64_t)B * max_pages + 1, cs[1] = ps;
  else cs[0] = B, cs[1] = N;
  cs[2] = H, cs[3] = X;
  const bool fp8 = cdt == CLATTN_FP8 || cdt == CLATTN_FP8_FNUZ;
  clattn_tensor *xs = NULL, *xvs = NULL, *cache, *vcache = NULL, *ss, *vss = NULL, *posv, *startv = NULL, *bt, *fl;
  int *groups;
  if (kind == 0) {
    clattn_kv_append_params *p = &k->a;
    xs = &p->new_k, xvs = &p->maybe_new_v, cache = &p->k_cache, vcache = &p->maybe_v_cache;
    ss = &p->maybe_k_scale_shift, vss = &p->maybe_v_scale_shift, posv = &p->pos, startv = &p->maybe_new_start;
    bt = &p->maybe_block_table, fl = &p->maybe_error_flag, groups = &p->kv_groups;
  } else if (kind == 1) {
    clattn_kv_quantize_params *p = &k->q;
    xs = &p->src, cache = &p->cache, ss = &p->maybe_scale_shift, posv = &p->maybe_start;
    bt = &p->maybe_block_table, fl = &p->maybe_error_flag, groups = &p->kv_groups;
  } else {
    clattn_kv_dequantize_params *p = &k->d;
    xs = &p->out, cache = &p->cache, ss = &p->maybe_scale_shift, posv = &p->maybe_start;
    bt = &p->maybe_block_table, fl = &p->maybe_error_flag, groups = &p->kv_groups;
  }
  *groups = G;
  add_int(S, "kv_groups", groups);
  k->xv = k->vcache = k->vss = k->start = -1;
  const int64_t T = varlen ? (int64_t)B * per : B;
  if (kind == 0) {
    k->x = add_slot(S, "new_k", xs, R_IN, CX_A0);
    canon(S, k->x, xdt, 3, SHAPE(T, H, D), xpad ? 8 : 0);
    k->xv = add_slot(S, "maybe_new_v", xvs, R_IN, CX_A0);
    canon(S, k->xv, xdt, 3, SHAPE(T, H, D), 0);
    if (!withv) drop(S, k->xv);
  } else {
    k->x = add_slot(S, kind == 1 ? "src" : "out", xs, kind == 1 ? R_IN : R_OUT, CX_A0);
    canon(S, k->x, xdt, 4, SHAPE(B, per, H, D), xpad ? 8 : 0);
  }
  k->cache = add_slot(S, kind == 0 ? "k_cache" : "cache", cache, kind == 2 ? R_IN : R_OUT, CX_A0);
  canon(S, k->cache, cdt, 4, cs, cpad ? 4 : 0);
  k->ss = add_slot(S, kind == 0 ? "maybe_k_scale_shift" : "maybe_scale_shift", ss, kind == 2 ? R_IN : R_OUT, CX_A0);
  canon(S, k->ss, CLATTN_I32, 3, cs, 0);
  if (!fp8 || noss) drop(S, k->ss);
  if (kind == 0) {
    k->vcache = add_slot(S, "maybe_v_cache", vcache, R_OUT, CX_A0);
    canon(S, k->vcache, cdt, 4, cs, cpad ? 4 : 0);
    if (!withv) drop(S, k->vcache);
    k->vss = add_slot(S, "maybe_v_scale_shift", vss, R_OUT, CX_A0);
    canon(S, k->vss, CLATTN_I32, 3, cs, 0);
    if (!(withv && fp8 && !noss)) drop(S, k->vss);
    k->pos = add_slot(S, "pos", posv, R_IN, CX_A0);
    canon(S, k->pos, CLATTN_I32, 1, SHAPE(B), 0);
    k->start = add_slot(S, "maybe_new_start", startv, R_IN, CX_A0);
    canon(S, k->start, CLATTN_I32, 1, SHAPE(B + 1), 0);
    if (!varlen) drop(S, k->start);
  } else {
    k->pos = add_slot(S, "maybe_start", posv, R_IN, CX_A0);
    canon(S, k->pos, CLATTN_I32, 1, SHAPE(B), 0);
    if (!start) drop(S, k->pos);
  }
  k->bt = add_slot(S, "maybe_block_table", bt, R_IN, CX_A0);
  canon(S, k->bt, CLATTN_I32, 2, SHAPE(B, max_pages > 0 ? max_pages : 1), 0);
  if (!paged) drop(S, k->bt);
  k->flag = add_slot(S, "maybe_error_flag", fl, R_FLAG, CX_A0);
  canon(S, k->flag, CLATTN_I32, 1, SHAPE(1), 0);
  if (!flag) drop(S, k->flag);
  S->params = k;
}

static void kva_build(state *S, rd *r) { build_kv(S, r, 0); }
static void kvq_build(state *S, rd *r) { build_kv(S, r, 1); }
static void kvd_build(state *S, rd *r) { build_kv(S, r, 2); }

static clattn_status kv_call(state *S) {
  kv *k = &g_kv;
  const cl_event *wl = wait_list(S);
  switch (k->kind) {
  case 0: return clattn_kv_append(S->ctx, S->queue, S->null_params ? NULL : &k->a, S->num_wait, wl, out_event(S));
  case 1: return clattn_kv_quantize(S->ctx, S->queue, S->null_params ? NULL : &k->q, S->num_wait, wl, out_event(S));
  default: return clattn_kv_dequantize(S->ctx, S->queue, S->null_params ? NULL : &k->d, S->num_wait, wl, out_event(S));
  }
}

/* The cache contract (clattn.h, "KV cache"): dense [B, N, Hkv, X] or paged. */
static void contract_cache(state *S, int c, int ss, int bt, int64_t B, int64_t H, int64_t D, int G0, const clattn_tensor *like) {
  const clattn_tensor *t = S->s[c].t;
  const clattn_dtype dt = t->dtype;
  const int64_t G = G0 ? G0 : 1;
  const bool fp8 = dt == CLATTN_FP8 || dt == CLATTN_FP8_FNUZ;
  if (dt == CLATTN_INT4)
    rule(S, (G == 1 || G == 2 || G == 4 || G == 8) && D % (8 * G) == 0, "kv_groups %d for int4 rows of D = %lld", G0, (long long)D);
  else
    rule(S, G == 1, "kv_groups %d for a %s cache", G0, clattn_dtype_name(dt));
  rule(S, D > 0 && D % 8 == 0 && D <= 2048, "head dim %lld", (long long)D);
  const int64_t X = row_size(dt, D, G);
  int64_t cs[4];
  if (present(S, bt)) {
    const clattn_tensor *b = S->s[bt].t;
    rule(S, t->shape[1] >= 1, "page size %lld", (long long)t->shape[1]);
    expect(S, bt, I32, 2, SHAPE(B, b->shape[1]));
    S->s[bt].contig = true;
    cs[0] = t->shape[0], cs[1] = t->shape[1];
  } else {
    cs[0] = B, cs[1] = t->shape[1];
  }
  cs[2] = H, cs[3] = X;
  if (like) cs[0] = like->shape[0], cs[1] = like->shape[1];
  const unsigned cdts = FLOATS | CLATTN_DT(CLATTN_INT4) | CLATTN_DT(CLATTN_FP8) | CLATTN_DT(CLATTN_FP8_FNUZ);
  expect(S, c, like ? ((unsigned)like->dtype < 32 ? CLATTN_DT(like->dtype) & cdts : 0) : cdts, 4, cs);
  S->s[c].contig = true;
  if (fp8) {
    rule(S, present(S, ss), "an fp8 cache without its scale-shift tensor");
    expect(S, ss, I32, 3, cs);
  }
}

static void kv_contract(state *S) {
  kv *k = &g_kv;
  const clattn_tensor *x = S->s[k->x].t;
  if (k->kind == 0) {
    rule(S, x->ndim == 3, "new_k.ndim %d", x->ndim);
    const int64_t T = x->shape[0], H = x->shape[1], D = x->shape[2];
    const clattn_tensor *pos = S->s[k->pos].t;
    rule(S, present(S, k->pos) && pos->ndim == 1, "pos absent or not 1-d");
    const int64_t B = pos->shape[0];
    expect(S, k->x, FLOATS, 3, SHAPE(T, H, D));
    expect(S, k->pos, I32, 1, SHAPE(B));
    if (present(S, k->start)) expect(S, k->start, I32, 1, SHAPE(sat_add(B, 1)));
    else rule(S, T == B, "new_k.shape[0] %lld rows for %lld sequences without maybe_new_start", (long long)T, (long long)B);
    rule(S, present(S, k->xv) == present(S, k->vcache), "maybe_new_v and maybe_v_cache not given together");
    contract_cache(S, k->cache, k->ss, k->bt, B, H, D, k->a.kv_groups, NULL);
    if (present(S, k->xv)) {
      expect(S, k->xv, (unsigned)x->dtype < 32 ? CLATTN_DT(x->dtype) & FLOATS : 0, 3, SHAPE(T, H, D));
      contract_cache(S, k->vcache, k->vss, k->bt, B, H, D, k->a.kv_groups, &k->a.k_cache);
    }
    S->work = T > 0 && H > 0 && D > 0 ? sat_mul(sat_mul(T, H), D) : 0;
  } else {
    rule(S, x->ndim == 4, "%s.ndim %d", S->s[k->x].name, x->ndim);
    const int64_t B = x->shape[0], n = x->shape[1], H = x->shape[2], D = x->shape[3];
    expect(S, k->x, FLOATS, 4, SHAPE(B, n, H, D));
    if (present(S, k->pos)) expect(S, k->pos, I32, 1, SHAPE(B));
    const int G = k->kind == 1 ? k->q.kv_groups : k->d.kv_groups;
    contract_cache(S, k->cache, k->ss, k->bt, B, H, D, G, NULL);
    S->work = elems(&S->s[k->x]);
  }
  if (present(S, k->flag)) expect(S, k->flag, I32, 1, SHAPE(1));
  S->max_kernels = 1;
}

/* ================================================================== pure functions */

static uint8_t g_misc[64];
static size_t g_misc_n;

static void misc_build(state *S, rd *r) {
  g_misc_n = 0;
  while (rd_more(r) && g_misc_n < sizeof g_misc) g_misc[g_misc_n++] = (uint8_t)rd_u8(r);
  S->params = g_misc;
}

static int64_t misc_i64(size_t at) {
  uint64_t x = 0;
  for (int i = 0; i < 8; i++) x = (x << 8) | (at + (size_t)i < g_misc_n ? g_misc[at + (size_t)i] : 0);
  return (int64_t)x;
}

/* One of: a tensor constructor, the dtype and status names, clattn_kv_row_size
 * or the backward's workspace size, against the header, on any values. */
static clattn_status misc_call(state *S) {
  (void)S;
  const int64_t a = misc_i64(0), b = misc_i64(8), c = misc_i64(16), d = misc_i64(24);
  const int sel = g_misc_n > 32 ? g_misc[32] % 8 : 0;
  if (sel < 4) {
    clattn_tensor t;
    if (sel == 0) t = clattn_tensor_1d(NULL, 0, CLATTN_F32, b);
    else if (sel == 1) t = clattn_tensor_2d(NULL, 0, CLATTN_F16, b, c);
    else if (sel == 2) t = clattn_tensor_3d(NULL, 0, CLATTN_BF16, b, c, d);
    else t = clattn_tensor_4d(NULL, 0, CLATTN_F32, a, b, c, d);
    (void)t;
  } else if (sel == 4) {
    const clattn_dtype dt = (clattn_dtype)(int)(int8_t)(b & 0xff);
    const int hd = (int)(int32_t)(c >> 8), g = (int)(int8_t)(d & 0xff);
    const int64_t x = clattn_kv_row_size(dt, hd, g);
    if (x != 0) {
      const int G = g ? g : 1;
      const bool ok = hd > 0 && hd % 8 == 0 && hd <= 2048 &&
                      ((dt == CLATTN_INT4 && (G == 1 || G == 2 || G == 4 || G == 8) && hd % (8 * G) == 0 && x == G + hd / 8) ||
                       ((dt == CLATTN_F32 || dt == CLATTN_F16 || dt == CLATTN_BF16) && G == 1 && x == hd) ||
                       ((dt == CLATTN_FP8 || dt == CLATTN_FP8_FNUZ) && G == 1 && x == hd / 4));
      if (!ok) fake_fail("contract", "clattn_kv_row_size(%d, %d, %d) = %lld", (int)dt, hd, g, (long long)x);
    }
  } else if (sel == 5) {
    const size_t w = clattn_rerope_bwd_workspace_size(a, b, c);
    if (a > 0 && b > 0 && c > 0) {
      const unsigned __int128 need = (unsigned __int128)a * (unsigned __int128)b * (unsigned __int128)c * 4;
      if (need <= SIZE_MAX && w != (size_t)need)
        fake_fail("workspace", "clattn_rerope_bwd_workspace_size(%lld, %lld, %lld) = %zu", (long long)a, (long long)b,
                  (long long)c, w);
      if (need > SIZE_MAX && w != 0 && w != SIZE_MAX)
        fake_fail("workspace", "clattn_rerope_bwd_workspace_size(%lld, %lld, %lld) wraps to %zu", (long long)a,
                  (long long)b, (long long)c, w);
    }
  } else {
    const clattn_dtype dt = (clattn_dtype)(int)(int32_t)(uint32_t)(uint64_t)b;
    (void)clattn_dtype_size(dt);
    if (!clattn_dtype_name(dt)) fake_fail("contract", "clattn_dtype_name(%d) is NULL", (int)dt);
    if (!clattn_status_string((clattn_status)(int)(int32_t)(uint32_t)(uint64_t)c))
      fake_fail("contract", "clattn_status_string is NULL");
  }
  return CLATTN_SUCCESS;
}
static void misc_contract(state *S) { (void)S; }

/* ================================================================== the table */

const opdesc ops[] = {
    {"decode", 0, dec_build, dec_prepare, dec_call, dec_contract, dec_failed},
    {"decode_workspace_size", OP_PURE, dec_build, dec_prepare, decws_call, decws_contract, NULL},
    {"decode_multi", 0, multi_build, multi_prepare, multi_call, multi_contract, NULL},
    {"kv_append", 0, kva_build, NULL, kv_call, kv_contract, NULL},
    {"kv_quantize", 0, kvq_build, NULL, kv_call, kv_contract, NULL},
    {"kv_dequantize", 0, kvd_build, NULL, kv_call, kv_contract, NULL},
    {"merge", 0, merge_build, merge_prepare, merge_call, merge_contract, NULL},
    {"merge_workspace_size", OP_PURE, merge_build, merge_prepare, mergews_call, mergews_contract, NULL},
    {"merge_backward", 0, mbwd_build, NULL, mbwd_call, mbwd_contract, NULL},
    {"rerope_fwd", 0, rrf_build, NULL, rr_call, rr_contract, NULL},
    {"rerope_bwd", 0, rrb_build, NULL, rr_call, rr_contract, NULL},
    {"rerope_rotary_fwd", 0, rrrf_build, NULL, rr_call, rr_contract, NULL},
    {"rerope_rotary_bwd", 0, rrrb_build, NULL, rr_call, rr_contract, NULL},
    {"reference_decode", 0, dec_build, NULL, ref_call, ref_contract, NULL},
    {"misc", OP_NOCTX, misc_build, NULL, misc_call, misc_contract, NULL},
};
const int nops = (int)(sizeof ops / sizeof ops[0]);
