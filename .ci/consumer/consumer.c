/* The consumer's program: merges two partial attention states with
 * clattn_merge on the default device and checks the result against the
 * formula. Exits 1 on any failure. */
#include <clattn.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { H = 4, D = 32 }; /* B = M = 1 */

static int fail(const char *what, clattn_status s) {
  fprintf(stderr, "%s: %s: %s\n", what, clattn_status_string(s), clattn_last_error());
  return 1;
}

int main(void) {
  printf("clattn %s\n", clattn_version(NULL, NULL, NULL));
  clattn_context *attn = NULL;
  clattn_status s = clattn_context_create_default(NULL, &attn);
  if (s != CLATTN_SUCCESS) return fail("clattn_context_create_default", s);
  cl_context cl = clattn_context_cl(attn);
  cl_int err = CL_SUCCESS;
  cl_command_queue queue = clCreateCommandQueue(cl, clattn_context_device(attn), 0, &err);
  if (err != CL_SUCCESS) return fail("clCreateCommandQueue", CLATTN_OPENCL_ERROR);

  /* two parts: o_i[h, d] and lse_i[h] */
  float o[2][H * D], lse[2][H], out[H * D], out_lse[H];
  for (int i = 0; i < 2; i++)
    for (int h = 0; h < H; h++) {
      lse[i][h] = (float)(i + 1) * 0.5f - (float)h * 0.25f;
      for (int d = 0; d < D; d++) o[i][h * D + d] = (float)((i * 31 + h * 7 + d) % 11) / 11.0f - 0.5f;
    }
  cl_mem om[2], lm[2], outm, outl;
  for (int i = 0; i < 2; i++) {
    om[i] = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof o[i], o[i], NULL);
    lm[i] = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof lse[i], lse[i], NULL);
  }
  outm = clCreateBuffer(cl, CL_MEM_WRITE_ONLY, sizeof out, NULL, NULL);
  outl = clCreateBuffer(cl, CL_MEM_WRITE_ONLY, sizeof out_lse, NULL, NULL);

  clattn_tensor parts_o[2], parts_lse[2];
  for (int i = 0; i < 2; i++) {
    parts_o[i] = clattn_tensor_4d(om[i], 0, CLATTN_F32, 1, 1, H, D);
    parts_lse[i] = clattn_tensor_3d(lm[i], 0, CLATTN_F32, 1, H, 1);
  }
  clattn_merge_params p;
  memset(&p, 0, sizeof p);
  p.n = 2;
  p.parts_o = parts_o;
  p.parts_lse = parts_lse;
  p.o = clattn_tensor_4d(outm, 0, CLATTN_F32, 1, 1, H, D);
  p.maybe_lse = clattn_tensor_3d(outl, 0, CLATTN_F32, 1, H, 1);
  s = clattn_merge(attn, queue, &p, 0, NULL, NULL);
  if (s != CLATTN_SUCCESS) return fail("clattn_merge", s);
  clEnqueueReadBuffer(queue, outm, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
  clEnqueueReadBuffer(queue, outl, CL_TRUE, 0, sizeof out_lse, out_lse, 0, NULL, NULL);

  /* o = sum_i exp(lse_i - lse) o_i with lse = log sum_i exp(lse_i) */
  double max_err = 0;
  for (int h = 0; h < H; h++) {
    const double l = log(exp((double)lse[0][h]) + exp((double)lse[1][h]));
    max_err = fmax(max_err, fabs(out_lse[h] - l));
    for (int d = 0; d < D; d++) {
      const double want = exp(lse[0][h] - l) * o[0][h * D + d] + exp(lse[1][h] - l) * o[1][h * D + d];
      max_err = fmax(max_err, fabs(out[h * D + d] - want));
    }
  }
  printf("merge of 2 parts, H=%d D=%d: max abs error %.3g (tolerance 1e-5): %s\n", H, D, max_err,
         max_err <= 1e-5 ? "PASS" : "FAIL");

  for (int i = 0; i < 2; i++) {
    clReleaseMemObject(om[i]);
    clReleaseMemObject(lm[i]);
  }
  clReleaseMemObject(outm);
  clReleaseMemObject(outl);
  clReleaseCommandQueue(queue);
  clattn_context_release(&attn);
  return max_err <= 1e-5 ? 0 : 1;
}
