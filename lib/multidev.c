/* Sequence-parallel decode over several devices (clattn_decode_multi):
 * every shard decodes its range of the KV cache on its own device, the
 * partial (o, lse) come to the first shard's device, clattn_merge combines
 * them. Within one cl_context the hand-over is events only; across contexts
 * the partials go through host memory. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Re-raises the thread's last failure with "shards[j]: " in front. */
static clattn_status in_shard(clattn_status s, int j) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", clattn_last_error());
  return clattn_fail(s, "shards[%d]: %s", j, msg);
}

static clattn_status check_shard(const clattn_decode_multi_params *p, int j) {
  const clattn_decode_shard *sh = &p->shards[j];
  if (!sh->ctx) return clattn_fail(CLATTN_INVALID_ARGUMENT, "shards[%d].ctx is NULL", j);
  clattn_status s = clattn_check_enqueue(sh->ctx, sh->queue, 0, NULL);
  if (s == CLATTN_SUCCESS) s = clattn_decode_check(sh->ctx, &sh->params);
  if (s != CLATTN_SUCCESS) return in_shard(s, j);
  if (!clattn_present(&sh->params.maybe_lse))
    return clattn_fail(CLATTN_INVALID_ARGUMENT,
                       "shards[%d].params.maybe_lse is absent: every shard's partial needs its lse",
                       j);
  const clattn_tensor *o0 = &p->shards[0].params.o;
  if (sh->params.o.dtype != o0->dtype)
    return clattn_fail(CLATTN_UNSUPPORTED,
                       "shards[%d].params.o.dtype (%s) differs from shards[0]'s (%s): the partials "
                       "share one dtype",
                       j, clattn_dtype_name(sh->params.o.dtype), clattn_dtype_name(o0->dtype));
  for (int i = 0; i < 4; i++)
    if (sh->params.o.shape[i] != o0->shape[i])
      return clattn_fail(CLATTN_INVALID_SHAPE,
                         "shards[%d].params.o.shape[%d] is %lld, expected %lld (shards[0]'s)", j, i,
                         (long long)sh->params.o.shape[i], (long long)o0->shape[i]);
  return CLATTN_SUCCESS;
}

/* Copies a view's bytes from its device (after `ready`) into a new buffer
 * of `to`, as the same view at offset 0. Blocks the host for the read. */
static clattn_status stage(const clattn_decode_shard *sh, const clattn_tensor *t, cl_event ready,
                           cl_context to, clattn_tensor *out) {
  const size_t bytes = (size_t)clattn_tensor_extent_bytes(t);
  void *host = malloc(bytes ? bytes : 4);
  if (!host) return clattn_fail(CLATTN_OUT_OF_MEMORY, "host staging of %zu bytes", bytes);
  /* an empty partial has no bytes to read, but its decode must still be done
   * before the call's event completes */
  cl_int err = bytes ? clEnqueueReadBuffer(sh->queue, t->buf, CL_TRUE, t->offset, bytes, host, 1,
                                           &ready, NULL)
                     : clWaitForEvents(1, &ready);
  if (err != CL_SUCCESS) {
    free(host);
    return clattn_fail_cl(err, bytes ? "clEnqueueReadBuffer" : "clWaitForEvents", "a shard's partial");
  }
  cl_mem m = clCreateBuffer(to, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes ? bytes : 4, host, &err);
  free(host); /* COPY_HOST_PTR has taken its copy */
  if (err != CL_SUCCESS) return clattn_fail_cl(err, "clCreateBuffer", "staged partial");
  *out = *t;
  out->buf = m;
  out->offset = 0;
  return CLATTN_SUCCESS;
}

/* Shard j's inputs, named as the caller wrote them. */
enum { SHARD_INS = 9 };
static void shard_inputs(const clattn_decode_multi_params *p, int j, char names[SHARD_INS][48],
                         clattn_named ins[SHARD_INS]) {
  const clattn_decode_params *sp = &p->shards[j].params;
  static const char *what[SHARD_INS] = {"q", "k", "v", "maybe_k_scale_shift",
                                        "maybe_v_scale_shift", "maybe_kv_len", "maybe_bias",
                                        "maybe_block_table", "maybe_q_start"};
  const clattn_tensor *ts[SHARD_INS] = {&sp->q, &sp->k, &sp->v, &sp->maybe_k_scale_shift,
                                        &sp->maybe_v_scale_shift, &sp->maybe_kv_len, &sp->maybe_bias,
                                        &sp->maybe_block_table, &sp->maybe_q_start};
  for (int i = 0; i < SHARD_INS; i++) {
    snprintf(names[i], sizeof names[i], "shards[%d].params.%s", j, what[i]);
    ins[i] = (clattn_named){ts[i], names[i]};
  }
}

/* The result (o, lse) shares no element with a shard's inputs, its error
 * flag or its workspace in its context (o may be the shards' q itself, as
 * decode's o may be its q: the merge writes it after every decode has read
 * it). */
static clattn_status check_result_apart(const clattn_decode_multi_params *p, int j) {
  char names[SHARD_INS + 2][48];
  clattn_named ins[SHARD_INS + 2];
  shard_inputs(p, j, names, ins);
  snprintf(names[SHARD_INS], sizeof names[0], "shards[%d].params.maybe_error_flag", j);
  ins[SHARD_INS] = (clattn_named){&p->shards[j].params.maybe_error_flag, names[SHARD_INS]};
  snprintf(names[SHARD_INS + 1], sizeof names[0], "shards[%d].params.maybe_workspace", j);
  ins[SHARD_INS + 1] = (clattn_named){&p->shards[j].params.maybe_workspace, names[SHARD_INS + 1]};
  const clattn_tensor *q = ins[0].t;
  if (clattn_same_view(&p->o, q)) ins[0].t = NULL;
  const clattn_named outs[2] = {{&p->o, "o"}, {&p->maybe_lse, "maybe_lse"}};
  CLATTN_TRY(clattn_check_aliasing(outs, 2, ins, SHARD_INS + 2));
  return clattn_check_apart(&p->maybe_lse, "maybe_lse", q, names[0]);
}

/* Shards of one context may run at once (on several queues): what shard j
 * writes (o, lse, workspace, its error flag) shares no element with anything
 * shard i reads or writes, but for shard i's error flag (both may set one
 * flag). */
static clattn_status check_shards_apart(const clattn_decode_multi_params *p, int j, int i) {
  char names[SHARD_INS + 3][48];
  clattn_named ins[SHARD_INS + 3];
  shard_inputs(p, i, names, ins);
  const clattn_decode_params *si = &p->shards[i].params, *sj = &p->shards[j].params;
  const clattn_tensor *others[3] = {&si->o, &si->maybe_lse, &si->maybe_workspace};
  static const char *what[4] = {"o", "maybe_lse", "maybe_workspace", "maybe_error_flag"};
  char outn[4][48];
  clattn_named outs[4];
  const clattn_tensor *mine[4] = {&sj->o, &sj->maybe_lse, &sj->maybe_workspace, &sj->maybe_error_flag};
  for (int k = 0; k < 4; k++) {
    if (k < 3) {
      snprintf(names[SHARD_INS + k], sizeof names[0], "shards[%d].params.%s", i, what[k]);
      ins[SHARD_INS + k] = (clattn_named){others[k], names[SHARD_INS + k]};
    }
    snprintf(outn[k], sizeof outn[k], "shards[%d].params.%s", j, what[k]);
    outs[k] = (clattn_named){mine[k], outn[k]};
  }
  return clattn_check_aliasing(outs, 4, ins, SHARD_INS + 3);
}

clattn_status clattn_decode_multi(const clattn_decode_multi_params *p, cl_uint num_wait,
                                  const cl_event *wait_list, cl_event *event) {
  clattn_clear_error();
  if (!p) return clattn_fail(CLATTN_INVALID_ARGUMENT, "params is NULL");
  if (p->n < 1) return clattn_fail(CLATTN_INVALID_ARGUMENT, "n is %d: at least one shard", p->n);
  if (!p->shards) return clattn_fail(CLATTN_INVALID_ARGUMENT, "shards is NULL");
  const int n = p->n;
  for (int j = 0; j < n; j++) CLATTN_TRY(check_shard(p, j));
  clattn_context *ctx0 = p->shards[0].ctx;
  cl_command_queue q0 = p->shards[0].queue;
  CLATTN_TRY(clattn_check_enqueue(ctx0, q0, num_wait, wait_list));

  clattn_tensor *parts = calloc((size_t)n * 2, sizeof *parts);
  cl_event *ev = calloc((size_t)n, sizeof *ev);
  bool *same = calloc((size_t)n, sizeof *same);
  if (!parts || !ev || !same) {
    free(parts), free(ev), free(same);
    return clattn_fail(CLATTN_OUT_OF_MEMORY, "decode_multi bookkeeping");
  }
  clattn_tensor *po = parts, *pl = parts + n;
  clattn_merge_params mp;
  memset(&mp, 0, sizeof mp);
  mp.n = n;
  mp.parts_o = po;
  mp.parts_lse = pl;
  mp.o = p->o;
  mp.maybe_lse = p->maybe_lse;

  /* Validate the merge before anything is enqueued: shards of other
   * contexts stand in as shard 0's partials (their shapes were checked). */
  bool any_other = false;
  for (int j = 0; j < n; j++) {
    same[j] = p->shards[j].ctx->cl == ctx0->cl;
    any_other = any_other || !same[j];
    const clattn_decode_shard *sh = same[j] ? &p->shards[j] : &p->shards[0];
    po[j] = sh->params.o;
    pl[j] = sh->params.maybe_lse;
  }
  clattn_status s = clattn_merge_workspace_size(ctx0, &mp, NULL);
  for (int j = 0; j < n && s == CLATTN_SUCCESS; j++)
    if (same[j]) s = check_result_apart(p, j);
  for (int j = 0; j < n && s == CLATTN_SUCCESS; j++)
    for (int i = 0; i < n && s == CLATTN_SUCCESS; i++)
      if (i != j && p->shards[i].ctx->cl == p->shards[j].ctx->cl) s = check_shards_apart(p, j, i);

  /* Shards of other contexts cannot wait on our events: the host waits. */
  if (s == CLATTN_SUCCESS && any_other && num_wait) {
    cl_int err = clWaitForEvents(num_wait, wait_list);
    if (err != CL_SUCCESS) s = clattn_fail_cl(err, "clWaitForEvents", "wait_list");
  }
  /* Every device starts before any partial is read back. */
  for (int j = 0; j < n && s == CLATTN_SUCCESS; j++) {
    const clattn_decode_shard *sh = &p->shards[j];
    s = clattn_decode(sh->ctx, sh->queue, &sh->params, same[j] ? num_wait : 0,
                      same[j] ? wait_list : NULL, &ev[j]);
    if (s != CLATTN_SUCCESS) s = in_shard(s, j);
    else if (!same[j]) clFlush(sh->queue);
  }
  int staged = 0;
  for (int j = 0; j < n && s == CLATTN_SUCCESS; j++) {
    if (same[j]) continue;
    const clattn_decode_shard *sh = &p->shards[j];
    s = stage(sh, &sh->params.o, ev[j], ctx0->cl, &po[j]);
    if (s == CLATTN_SUCCESS) {
      s = stage(sh, &sh->params.maybe_lse, ev[j], ctx0->cl, &pl[j]);
      if (s != CLATTN_SUCCESS) clReleaseMemObject(po[j].buf);
    }
    if (s == CLATTN_SUCCESS) staged = j + 1;
  }
  if (s == CLATTN_SUCCESS) {
    /* the merge waits on the decodes of our context; the others are done */
    cl_event *wait = calloc((size_t)n, sizeof *wait);
    cl_uint nw = 0;
    for (int j = 0; j < n; j++)
      if (same[j]) wait[nw++] = ev[j];
    s = wait ? clattn_merge(ctx0, q0, &mp, nw, wait, event)
             : clattn_fail(CLATTN_OUT_OF_MEMORY, "decode_multi events");
    free(wait);
  }
  for (int j = 0; j < staged; j++)
    if (!same[j]) {
      clReleaseMemObject(po[j].buf); /* freed once the merge has read it */
      clReleaseMemObject(pl[j].buf);
    }
  for (int j = 0; j < n; j++)
    if (ev[j]) clReleaseEvent(ev[j]);
  free(parts), free(ev), free(same);
  return s;
}
