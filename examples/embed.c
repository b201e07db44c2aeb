/* Embedding clattn in an engine that already owns its OpenCL objects: the
 * engine's context, queue and KV-cache buffers are wrapped, never copied.
 * Build: cc embed.c $(pkg-config --cflags --libs clattn); it compiles as C++ too. */
#include <clattn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, HQ = 8, HKV = 2, D = 64, CTX = 256 }; /* f32 q/o and K/V, one query per sequence */

typedef struct engine { /* stands for the host application's state */
  cl_context cl;
  cl_device_id dev;
  cl_command_queue queue;
  cl_mem k_cache, v_cache, q, o;
} engine;

static cl_mem make(engine *e, size_t n, float value) {
  float *host = (float *)malloc(n * sizeof *host);
  for (size_t i = 0; i < n; i++) host[i] = value * (float)((i * 7919) % 13) / 13.0f;
  cl_mem m = clCreateBuffer(e->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *host, host, NULL);
  free(host);
  return m;
}

static int fail(const char *what, clattn_status s) {
  fprintf(stderr, "%s: %s: %s\n", what, clattn_status_string(s), clattn_last_error());
  return 1;
}

int main(void) {
  engine e;
  memset(&e, 0, sizeof e); /* not `= {0}`: C++ warns about the fields it leaves out */
  printf("clattn %s\n", clattn_version(NULL, NULL, NULL)); /* the library running, not the header */
  cl_platform_id plat;
  if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &e.dev, NULL) != CL_SUCCESS) {
    fprintf(stderr, "no OpenCL device\n");
    return 1;
  }
  e.cl = clCreateContext(NULL, 1, &e.dev, NULL, NULL, NULL);
  e.queue = clCreateCommandQueue(e.cl, e.dev, 0, NULL);
  e.k_cache = make(&e, (size_t)B * CTX * HKV * D, 1.0f);
  e.v_cache = make(&e, (size_t)B * CTX * HKV * D, 2.0f);
  e.q = make(&e, (size_t)B * HQ * D, 1.0f);
  e.o = make(&e, (size_t)B * HQ * D, 0.0f);

  /* once, at engine start: wrap the engine's context and device (retained, not owned) */
  clattn_context *attn = NULL;
  clattn_status s = clattn_context_create(e.cl, e.dev, NULL, &attn);
  if (s != CLATTN_SUCCESS) return fail("clattn_context_create", s);

  /* every step: describe the engine's buffers and enqueue on its queue */
  clattn_decode_params p;
  memset(&p, 0, sizeof p); /* every optional input absent */
  p.q = clattn_tensor_4d(e.q, 0, CLATTN_F32, B, 1, HQ, D);
  p.k = clattn_tensor_4d(e.k_cache, 0, CLATTN_F32, B, CTX, HKV, D);
  p.v = clattn_tensor_4d(e.v_cache, 0, CLATTN_F32, B, CTX, HKV, D);
  p.o = clattn_tensor_4d(e.o, 0, CLATTN_F32, B, 1, HQ, D);
  cl_event done = NULL;
  s = clattn_decode(attn, e.queue, &p, 0, NULL, &done);
  if (s != CLATTN_SUCCESS) return fail("clattn_decode", s);

  /* the engine decides when to wait; here, before reading the result */
  float out[4];
  clEnqueueReadBuffer(e.queue, e.o, CL_TRUE, 0, sizeof out, out, 1, &done, NULL);
  clReleaseEvent(done);
  printf("o[0, 0, 0, 0:4] = %.4f %.4f %.4f %.4f\n", out[0], out[1], out[2], out[3]);

  /* a bad call fails with a message and enqueues nothing */
  p.k.shape[3] = 32;
  s = clattn_decode(attn, e.queue, &p, 0, NULL, NULL);
  printf("with a wrong k: %s: %s\n", clattn_status_string(s), clattn_last_error());

  clattn_context_release(&attn);
  cl_mem bufs[] = {e.k_cache, e.v_cache, e.q, e.o};
  for (int i = 0; i < 4; i++) clReleaseMemObject(bufs[i]);
  clReleaseCommandQueue(e.queue);
  clReleaseContext(e.cl);
  return 0;
}
