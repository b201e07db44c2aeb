/*
 * One builder and one contract per public operation. A builder reads the
 * operation's problem bytes and makes a valid call (canonical tensors); a
 * contract, run once the library has accepted a call, says from the
 * header's documentation which tensors the call uses, with which shapes
 * and dtypes, which workspace it needs and how many kernels are plausible.
 * The contracts derive every shape from the operation's primary tensors
 * (q and k for decode, the parts for merge, ...), independently of lib/.
 * The decode family's are in ops_decode.c.
 */
#include "ops.h"

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
      /* a * b * c * 4 without wrapping the oracle's own arithmetic (three
       * 63-bit factors can pass 2^128): saturated at SIZE_MAX + 1 */
      const unsigned __int128 cap = (unsigned __int128)SIZE_MAX + 1;
      unsigned __int128 need = (unsigned __int128)a * (unsigned __int128)b;
      need = need >= cap ? cap : need * (unsigned __int128)c;
      need = need >= cap ? cap : need * 4;
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
