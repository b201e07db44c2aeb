/* The decode family's builders and contracts (see ops.c). */
#include "ops.h"

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


void dec_build(state *S, rd *r) {
  dec_common c;
  read_common(r, &c);
  build_dec(S, r, &g_dec, &c, CX_A0, "");
  S->params = &g_dec;
}
void dec_prepare(state *S) { prepare_dec(S, &g_dec); }
clattn_status dec_call(state *S) {
  if (dec_avoided(&g_dec.p)) return S->avoided = true, CLATTN_SUCCESS;
  g_dec.ws_st = clattn_decode_workspace_size(S->ctx, S->null_params ? NULL : &g_dec.p, &g_dec.ws_bytes, &g_dec.ws_splits);
  return clattn_decode(S->ctx, S->queue, S->null_params ? NULL : &g_dec.p, S->num_wait, wait_list(S), out_event(S));
}
void dec_contract(state *S) { contract_dec(S, &g_dec, false); }

/* A split count past one key per split asks for a workspace of nothing but
 * empty partials: the call must name num_splits, not fail in clCreateBuffer. */
void dec_failed(state *S) {
  const clattn_decode_params *p = &g_dec.p;
  const int64_t keys = present(S, g_dec.bt) && p->maybe_block_table.ndim == 2
                           ? sat_mul(p->maybe_block_table.shape[1], p->k.shape[1]) : p->k.shape[1];
  if (S->st == CLATTN_OPENCL_ERROR && fake_refused_allocs() > 0 && p->num_splits > 1 && p->num_splits > keys)
    fake_fail("named", "num_splits %d for %lld keys: the workspace it asks for reached OpenCL (%s) instead of the "
              "message naming num_splits", p->num_splits, (long long)keys, clattn_last_error());
}

/* clattn_decode_workspace_size alone: it never enqueues, and its answer
 * holds what the plan needs. */
clattn_status decws_call(state *S) {
  if (dec_avoided(&g_dec.p)) return S->avoided = true, CLATTN_SUCCESS;
  g_dec.ws_st = clattn_decode_workspace_size(S->ctx, S->null_params ? NULL : &g_dec.p, &g_dec.ws_bytes, &g_dec.ws_splits);
  return g_dec.ws_st;
}
void decws_contract(state *S) {
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

clattn_status ref_call(state *S) {
  if (dec_avoided(&g_dec.p)) return S->avoided = true, CLATTN_SUCCESS;
  return clattn_reference_decode(S->ctx, S->queue, S->null_params ? NULL : &g_dec.p, S->num_wait, wait_list(S),
                                 out_event(S));
}
void ref_contract(state *S) { contract_dec(S, &g_dec, true); }

/* ================================================================== decode_multi */

#define MAX_SHARDS 4
typedef struct multi {
  clattn_decode_multi_params p;
  clattn_decode_shard sh[MAX_SHARDS];
  dec d[MAX_SHARDS];
  int o, lse;
} multi;
static multi g_multi;

void multi_build(state *S, rd *r) {
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
void multi_prepare(state *S) {
  for (int j = 0; j < g_multi.p.n && j < MAX_SHARDS; j++) prepare_dec(S, &g_multi.d[j]);
}
clattn_status multi_call(state *S) {
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
void multi_contract(state *S) {
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
