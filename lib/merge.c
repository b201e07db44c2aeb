/* Merging attention states (cl/merge.cl): the split-K reduce of decode. */
#include "internal.h"

#include <stdio.h>

clattn_status clattn_merge_strided_enqueue(clattn_context *ctx, cl_command_queue queue,
                                           const clattn_merge_strided *m, cl_uint num_wait,
                                           const cl_event *wait, cl_event *event) {
  char opts[128];
  snprintf(opts, sizeof opts, "-DO_DT=%s", clattn_dtype_cl(m->o->dtype));
  static const char *name = "clattn_merge_strided";
  cl_kernel k = NULL;
  CLATTN_TRY(clattn_kernel_get(ctx, "merge.cl", opts, name, &k));
  const clattn_tensor *lse = (m->lse && clattn_present(m->lse)) ? m->lse : NULL;
  clattn_args a = clattn_args_begin(k);
  clattn_arg_mem(&a, m->part_o);
  clattn_arg_long(&a, m->part_o_off);
  clattn_arg_long(&a, m->part_o_split_stride);
  for (int i = 0; i < 4; i++) clattn_arg_long(&a, m->part_o_stride[i]);
  clattn_arg_mem(&a, m->part_lse);
  clattn_arg_long(&a, m->part_lse_off);
  clattn_arg_long(&a, m->part_lse_split_stride);
  for (int i = 0; i < 3; i++) clattn_arg_long(&a, m->part_lse_stride[i]);
  clattn_arg_int(&a, m->n);
  clattn_arg_int(&a, m->M);
  clattn_arg_int(&a, m->H);
  clattn_arg_int(&a, m->D);
  clattn_arg_tensor(&a, m->o);
  for (int i = 0; i < 4; i++) clattn_arg_long(&a, m->o->stride[i]);
  clattn_arg_mem(&a, lse ? lse->buf : NULL);
  clattn_arg_long(&a, lse ? clattn_elem_offset(lse) : 0);
  for (int i = 0; i < 3; i++) clattn_arg_long(&a, lse ? lse->stride[i] : 0);
  clattn_arg_mem(&a, m->q_start);
  clattn_status s = clattn_args_end(&a, name);
  if (s == CLATTN_SUCCESS) {
    size_t wg = (size_t)ctx->tuning.merge_wg;
    while (wg > 32 && wg / 2 >= (size_t)m->D) wg /= 2; /* no idle lanes for small D */
    size_t local[3] = {wg, 1, 1};
    size_t global[3] = {wg, (size_t)m->M * (size_t)m->H, (size_t)m->B};
    s = clattn_launch(ctx, queue, k, name, 3, global, local, num_wait, wait, event);
  }
  clReleaseKernel(k);
  return s;
}
