/* ReRoPE windowed attention, backward (cl/rerope_bwd.cl): validation, the
 * delta workspace, and the three launches (delta, dk/dv over key blocks, dq
 * over query blocks). Deterministic: no float atomics anywhere. */
#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

size_t clattn_rerope_bwd_workspace_size(int64_t Z, int64_t Hq, int64_t Nq) {
  if (Z <= 0 || Hq <= 0 || Nq <= 0) return 0;
  size_t n;
  if (__builtin_mul_overflow((size_t)Z, (size_t)Hq, &n) || __builtin_mul_overflow(n, (size_t)Nq, &n) ||
      __builtin_mul_overflow(n, sizeof(float), &n))
    return SIZE_MAX; /* no buffer holds it: the backward's checks refuse such shapes first */
  return n;
}

/* The tensors of one backward call: the forward's inputs (in.lse required), the
 * gradients; the rotary variant passes dq, dk as dq1/dq2, dk1/dk2. */
typedef struct bwd_tensors {
  clattn_rr_inputs in;
  const clattn_tensor *dout, *dq1, *dq2, *dk1, *dk2, *dv, *ws;
} bwd_tensors;

/* Outputs (the gradients, a caller's workspace) share no element with each
 * other or the inputs. */
static clattn_status check_bwd_aliasing(const clattn_named *outs, int nout, const bwd_tensors *t,
                                        const clattn_rr_problem *p) {
  const clattn_named ins[] = {{t->in.q1, "q1"},    {t->in.q2, "q2"},   {t->in.k1, "k1"},
                              {t->in.k2, "k2"},    {t->in.v, "v"},     {t->in.o, "o"},
                              {t->in.lse, "lse"},  {t->dout, "dout"}, {p->q_pos, "maybe_q_pos"},
                              {p->k_pos, "maybe_k_pos"}};
  return clattn_check_aliasing(outs, nout, ins, 10);
}

/* Marks the delta workspace's place in an argument list (NULL means an absent tensor). */
static const clattn_tensor delta_slot;

static clattn_status enqueue(clattn_context *ctx, cl_command_queue queue, const char *file,
                             const char *opts, const char *name, cl_kernel k,
                             const clattn_tensor *const *ts, int nts, const clattn_rr_view *extra,
                             cl_mem extra_mem, const clattn_rr_problem *p, const size_t *global,
                             const size_t *local, cl_uint num_wait, const cl_event *wait,
                             cl_event *event) {
  if (!k) CLATTN_TRY(clattn_kernel_get(ctx, file, opts, name, &k)); /* (k: the caller's, fetched) */
  clattn_args a = clattn_args_begin(k);
  for (int i = 0; i < nts; i++) {
    if (ts[i] == &delta_slot) {
      clattn_arg_mem(&a, extra_mem);
      clattn_arg(&a, sizeof *extra, extra);
    } else {
      clattn_rr_arg(&a, ts[i]);
    }
  }
  clattn_arg(&a, sizeof p->args, &p->args);
  return clattn_args_launch(ctx, queue, &a, name, 3, global, local, num_wait, wait, event);
}

static clattn_status run_bwd(clattn_context *ctx, cl_command_queue queue,
                             const clattn_rr_problem *p, const bwd_tensors *t, cl_uint num_wait,
                             const cl_event *wait, cl_event *event) {
  const clattn_tensor *views[] = {t->in.q1, t->in.q2, t->in.k1, t->in.k2, t->in.v, t->dout};
  clattn_rr_plan pl;
  char opts[256];
  cl_kernel pre = NULL; /* the first kernel, fetched with the plan */
  CLATTN_TRY(clattn_rr_plan_built(ctx, p, CLATTN_RR_BWD, views, 6, "clattn_rerope_bwd_pre", &pl,
                                  opts, sizeof opts, &pre));

  /* Empty sides need no special case: with Nq = 0 the dk/dv kernel finds no
   * query tiles and writes zeros, with Nk = 0 the dq kernel does. */
  clattn_workspace w = {NULL, 0, false};
  const size_t ws_bytes = clattn_rerope_bwd_workspace_size(p->Z, p->Hq, p->Nq);
  if (ws_bytes || clattn_present(t->ws)) {
    const clattn_status ws_s =
        clattn_workspace_acquire(ctx, t->ws, ws_bytes, "clattn_rerope_bwd_workspace_size", &w);
    if (ws_s != CLATTN_SUCCESS) {
      clReleaseKernel(pre);
      return ws_s;
    }
  }
  const cl_mem ws = w.buf;
  const size_t slices = pl.nsl ? (size_t)pl.nsl : 1; /* wide heads: a work-group per column slice */
  /* delta laid out [Z, Hq, Nq] contiguous */
  const clattn_rr_view dv = {w.off, (cl_long)p->Hq * p->Nq, p->Nq, 1, 0};

  cl_event ev_pre = NULL, ev_dkdv = NULL;
  clattn_status s;
  {
    const clattn_tensor *ts[] = {t->in.o, t->dout, &delta_slot};
    size_t local[3] = {64, 1, 1};
    size_t global[3] = {((size_t)p->Nq + 63) / 64 * 64, (size_t)p->Hq, (size_t)p->Z};
    s = enqueue(ctx, queue, "rerope_bwd.cl", opts, "clattn_rerope_bwd_pre", pre, ts, 3, &dv, ws, p,
                global, local, num_wait, wait, &ev_pre);
  }
  if (s == CLATTN_SUCCESS) {
    const clattn_tensor *ts[] = {t->in.q1,       t->in.q2,  t->in.k1,  t->in.k2, t->in.v,     t->dout, t->in.lse,
                                 &delta_slot, t->dk1, t->dk2, t->dv, p->q_pos, p->k_pos};
    size_t local[3] = {(size_t)pl.wg, 1, 1};
    size_t global[3] = {((size_t)p->Nk + pl.k_rows - 1) / pl.k_rows * pl.wg, (size_t)p->Hkv,
                        (size_t)p->Z * slices};
    s = enqueue(ctx, queue, "rerope_bwd.cl", opts, "clattn_rerope_bwd_dkdv", NULL, ts, 13, &dv, ws, p,
                global, local, 1, &ev_pre, &ev_dkdv);
  }
  if (s == CLATTN_SUCCESS) {
    const clattn_tensor *ts[] = {t->in.q1,  t->in.q2,       t->in.k1,  t->in.k2,  t->in.v,     t->dout,
                                 t->in.lse, &delta_slot, t->dq1, t->dq2, p->q_pos, p->k_pos};
    size_t local[3] = {(size_t)pl.wg, 1, 1};
    size_t global[3] = {((size_t)p->Nq + pl.q_rows - 1) / pl.q_rows * pl.wg, (size_t)p->Hq,
                        (size_t)p->Z * slices};
    /* dq depends only on delta; ordering after dkdv keeps one final event on in-order and
     * out-of-order queues alike. */
    s = enqueue(ctx, queue, "rerope_bwd.cl", opts, "clattn_rerope_bwd_dq", NULL, ts, 12, &dv, ws, p,
                global, local, 1, &ev_dkdv, event);
  }
  if (ev_pre) clReleaseEvent(ev_pre);
  if (ev_dkdv) clReleaseEvent(ev_dkdv);
  clattn_workspace_release(&w);
  return s;
}

/* Both backward forms: the checks, then the kernels. rot: the rotary form's
 * settings (its q, k, dq, dk named so, no q2, k2, dq2, dk2 of their own),
 * NULL for the explicit form. */
static clattn_status bwd_checked(clattn_context *ctx, cl_command_queue queue, const bwd_tensors *t,
                                 const clattn_rerope_rotary_bwd_params *rot, cl_uint num_wait,
                                 const cl_event *wait, cl_event *event) {
  clattn_rr_problem pr;
  CLATTN_TRY(clattn_rr_enqueue_init(ctx, queue, num_wait, wait, &t->in, &pr));
  const char *qn = pr.qname, *kn = pr.kname;
  CLATTN_TRY(clattn_rr_check_lse(ctx, t->in.lse, "lse", t->in.q1, qn));
  CLATTN_TRY(clattn_rr_check_like(ctx, t->dout, "dout", t->in.q1, qn, 0xfu));
  /* the gradients, shaped like q (the first two) or k; the outputs, in this order */
  const clattn_named grads[] = {{t->dq1, rot ? "dq" : "dq1"}, {rot ? NULL : t->dq2, "dq2"},
                                {t->dk1, rot ? "dk" : "dk1"}, {rot ? NULL : t->dk2, "dk2"},
                                {t->dv, "dv"}};
  clattn_named outs[6];
  int nout = 0;
  for (int i = 0; i < 5; i++) {
    if (!grads[i].t) continue;
    CLATTN_TRY(clattn_rr_check_like(ctx, grads[i].t, grads[i].name, i < 2 ? t->in.q1 : t->in.k1,
                                    i < 2 ? qn : kn, 0xfu));
    outs[nout++] = grads[i];
  }
  if (rot)
    CLATTN_TRY(clattn_rr_rotary_init(ctx, &pr, &rot->maybe_q_pos, &rot->maybe_k_pos,
                                     rot->rope_theta, rot->rope_layout));
  if (clattn_present(t->ws)) /* its size: run_bwd */
    CLATTN_TRY(clattn_check_workspace(ctx, t->ws, 0, "clattn_rerope_bwd_workspace_size"));
  outs[nout++] = (clattn_named){t->ws, "maybe_workspace"};
  CLATTN_TRY(check_bwd_aliasing(outs, nout, t, &pr));
  return run_bwd(ctx, queue, &pr, t, num_wait, wait, event);
}

clattn_status clattn_rerope_bwd(clattn_context *ctx, cl_command_queue queue,
                                const clattn_rerope_bwd_params *params, cl_uint num_wait,
                                const cl_event *wait_list, cl_event *event) {
  if (!params) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  const clattn_rerope_bwd_params *p = params;
  const bwd_tensors t = {{&p->q1, &p->q2, &p->k1, &p->k2, &p->v, &p->o, &p->lse, p->window,
                          p->causal, 0, p->scale},
                         &p->dout, &p->dq1, &p->dq2, &p->dk1, &p->dk2, &p->dv, &p->maybe_workspace};
  return bwd_checked(ctx, queue, &t, NULL, num_wait, wait_list, event);
}

clattn_status clattn_rerope_rotary_bwd(clattn_context *ctx, cl_command_queue queue,
                                       const clattn_rerope_rotary_bwd_params *params,
                                       cl_uint num_wait, const cl_event *wait_list,
                                       cl_event *event) {
  if (!params) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  const clattn_rerope_rotary_bwd_params *p = params;
  /* raw q, k travel as q1/q2 and k1/k2; dq, dk come back through dq1 / dk1 */
  const bwd_tensors t = {{&p->q, &p->q, &p->k, &p->k, &p->v, &p->o, &p->lse, p->window,
                          p->causal, 1, p->scale},
                         &p->dout, &p->dq, &p->dq, &p->dk, &p->dk, &p->dv, &p->maybe_workspace};
  return bwd_checked(ctx, queue, &t, p, num_wait, wait_list, event);
}
