/* The quantized formats themselves: hand-built int4 and fp8 rows checked word
 * by word against the layout of include/clattn.h, all 256 fp8 codes of both
 * variants decoded by the kernel and re-encoded, rounding ties, saturation,
 * and extreme rows (constant, huge, tiny, -0, inf / NaN). */
#include "internal.h"
#include "ref_quant.h"
#include "test_kvcache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Quantizes `rows` rows of D f32 values into a dense [1, rows, 1, X] cache,
 * checks it bit for bit against the host reference, and returns its words
 * (rows * X), its scale-shift words (fp8: rows) and the values read back
 * (rows * D, f32). Any output pointer may be NULL. */
static void device_quantize(const char *label, clattn_dtype dt, int G, int D, int rows,
                            const float *x, uint32_t *words, uint32_t *ss, double *deq) {
  hcache hc;
  hcache_init(&hc, dt, G, D, 1, 1, rows, 0);
  hcache_upload(&hc);
  for (int r = 0; r < rows; r++) hcache_write_row(&hc, 0, r, 0, x + (size_t)r * D);
  const size_t n = (size_t)rows * D;
  cl_mem x_m = buf_zeros(n * 4);
  CU_ASSERT_EQUAL_FATAL(
      clEnqueueWriteBuffer(fx.queue, x_m, CL_TRUE, 0, n * 4, x, 0, NULL, NULL), CL_SUCCESS);
  cl_mem o_m = buf_poison(n * 4);
  clattn_kv_quantize_params q;
  memset(&q, 0, sizeof q);
  q.src = clattn_tensor_4d(x_m, 0, CLATTN_F32, 1, rows, 1, D);
  q.cache = hcache_tensor(&hc);
  q.maybe_scale_shift = hcache_ss_tensor(&hc);
  q.kv_groups = G;
  CHECK_OK(clattn_kv_quantize(fx.ctx, fx.queue, &q, 0, NULL, NULL));
  clattn_kv_dequantize_params d;
  memset(&d, 0, sizeof d);
  d.cache = q.cache;
  d.maybe_scale_shift = q.maybe_scale_shift;
  d.out = clattn_tensor_4d(o_m, 0, CLATTN_F32, 1, rows, 1, D);
  d.kv_groups = G;
  CHECK_OK(clattn_kv_dequantize(fx.ctx, fx.queue, &d, 0, NULL, NULL));
  finish();
  hcache_check(&hc, label);
  const size_t nw = (size_t)rows * hc.X;
  if (words)
    CU_ASSERT_EQUAL(clEnqueueReadBuffer(fx.queue, hc.buf, CL_TRUE, KV_GUARD, nw * 4, words, 0,
                                        NULL, NULL),
                    CL_SUCCESS);
  if (ss && hc.ss_buf)
    CU_ASSERT_EQUAL(clEnqueueReadBuffer(fx.queue, hc.ss_buf, CL_TRUE, KV_GUARD,
                                        (size_t)rows * 4, ss, 0, NULL, NULL),
                    CL_SUCCESS);
  if (deq) buf_read(o_m, 0, n, CLATTN_F32, deq);
  hcache_free(&hc);
  buf_release(&x_m);
  buf_release(&o_m);
}

static void expect_words(const char *label, const uint32_t *got, const uint32_t *want, int n) {
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) {
      fprintf(stderr, "  %s: word %d is 0x%08x, want 0x%08x\n", label, i, got[i], want[i]);
      CU_FAIL("word differs from the documented layout");
    }
}

/* ------------------------------------------------------------------ layouts */

static void test_layout_int4(void) {
  /* G = 1: x_d = d gives shift 0, scale 1 (15 * 1 >= 15), codes d */
  float x[32];
  for (int d = 0; d < 16; d++) x[d] = (float)d;
  uint32_t w[8];
  double deq[32];
  device_quantize("int4 G=1 D=16 layout", CLATTN_INT4, 1, 16, 1, x, w, NULL, deq);
  const uint32_t want1[] = {0x00003c00u /* scale 1.0, shift 0 */, 0x76543210u, 0xfedcba98u};
  expect_words("int4 G=1 D=16 layout", w, want1, 3);
  for (int d = 0; d < 16; d++) CU_ASSERT_EQUAL(deq[d], (double)d);

  /* G = 4: group g has scale 0.25 (g+1), shift g - 1.5 and codes including 0
   * and 15, so its min and max give back exactly that scale and shift */
  static const int codes[4][8] = {{0, 15, 1, 2, 3, 4, 5, 6},
                                  {15, 0, 7, 8, 9, 10, 11, 12},
                                  {0, 15, 4, 1, 5, 9, 2, 6},
                                  {13, 14, 15, 0, 8, 8, 7, 7}};
  for (int g = 0; g < 4; g++)
    for (int k = 0; k < 8; k++) x[g * 8 + k] = (g - 1.5f) + 0.25f * (g + 1) * codes[g][k];
  device_quantize("int4 G=4 D=32 layout", CLATTN_INT4, 4, 32, 1, x, w, NULL, deq);
  const uint32_t want4[] = {
      0xbe003400u, /* scale 0.25 (0x3400), shift -1.5 (0xbe00) */
      0xb8003800u, /* 0.5, -0.5 */
      0x38003a00u, /* 0.75, 0.5 */
      0x3e003c00u, /* 1.0, 1.5 */
      0x654321f0u, 0xcba9870fu, 0x629514f0u, 0x77880fedu, /* element k at bits 4k */
  };
  expect_words("int4 G=4 D=32 layout", w, want4, 8);
  for (int d = 0; d < 32; d++) CU_ASSERT_EQUAL(deq[d], (double)x[d]);
}

static void test_layout_fp8(void) {
  /* max |x| = 1.75 around shift 0: FN scale 2^-8 (1.75 = 448 / 256), FNUZ
   * 2^-7 (1.75 <= 240 / 128); the scaled values then encode as below in both */
  const float x[8] = {1.75f, -1.75f, 0.0f, 1.0f, -0.5f, 0.25f, 3.0f / 256, 5 * 0x1p-17f};
  for (int fnuz = 0; fnuz < 2; fnuz++) {
    const char *label = fnuz ? "fp8fnuz layout" : "fp8 layout";
    uint32_t w[2], ss = 0;
    double deq[8];
    device_quantize(label, fnuz ? CLATTN_FP8_FNUZ : CLATTN_FP8, 0, 8, 1, x, w, &ss, deq);
    /* FN: 448 0x7e, -448 0xfe, 0, 256 0x78, -128 0xf0, 64 0x68, 3 0x44, 5*2^-9 0x05;
     * FNUZ: 224 0x7e, -224 0xfe, 0, 128 0x78, -64 0xf0, 32 0x68, 1.5 0x44, 5*2^-10 0x05.
     * Element d is byte d % 4 of word d / 4. */
    const uint32_t want[] = {0x7800fe7eu, 0x054468f0u};
    expect_words(label, w, want, 2);
    const uint32_t want_ss = fnuz ? 0x00002000u /* 2^-7 */ : 0x00001c00u /* 2^-8 */;
    expect_words(label, &ss, &want_ss, 1);
    for (int d = 0; d < 8; d++) CU_ASSERT_EQUAL(deq[d], (double)x[d]);
  }
}

/* ------------------------------------------------------------------ fp8 codes */

static void test_fp8_all_codes(void) {
  /* the host table, from the format definitions, at its landmarks */
  CU_ASSERT_EQUAL(ref_fp8_decode(0x7e, 0), 448.0);
  CU_ASSERT(isnan(ref_fp8_decode(0x7f, 0)) && isnan(ref_fp8_decode(0xff, 0)));
  CU_ASSERT_EQUAL(ref_fp8_decode(0x38, 0), 1.0);
  CU_ASSERT_EQUAL(ref_fp8_decode(0x08, 0), 0x1p-6);
  CU_ASSERT_EQUAL(ref_fp8_decode(0x01, 0), 0x1p-9);
  CU_ASSERT(ref_fp8_decode(0x80, 0) == 0.0 && signbit(ref_fp8_decode(0x80, 0)));
  CU_ASSERT_EQUAL(ref_fp8_decode(0x7f, 1), 240.0);
  CU_ASSERT_EQUAL(ref_fp8_decode(0xff, 1), -240.0);
  CU_ASSERT(isnan(ref_fp8_decode(0x80, 1)));
  CU_ASSERT_EQUAL(ref_fp8_decode(0x40, 1), 1.0);
  CU_ASSERT_EQUAL(ref_fp8_decode(0x08, 1), 0x1p-7);
  CU_ASSERT_EQUAL(ref_fp8_decode(0x01, 1), 0x1p-10);

  for (int fnuz = 0; fnuz < 2; fnuz++) {
    const clattn_dtype dt = fnuz ? CLATTN_FP8_FNUZ : CLATTN_FP8;
    const char *label = fnuz ? "fp8fnuz all codes" : "fp8 all codes";
    /* decode: a crafted cache of 16 rows of D = 16 holding codes 0..255, scale
     * 1 and shift -0 (so that -0 + -0 keeps the sign of a negative zero) */
    hcache hc;
    hcache_init(&hc, dt, 0, 16, 1, 1, 16, 0);
    for (int i = 0; i < 256; i++) hc.host[KV_GUARD + i] = (uint8_t)i;
    for (int r = 0; r < 16; r++) {
      const uint32_t ss = 0x80003c00u;
      memcpy(hc.ss_host + KV_GUARD + r * 4, &ss, 4);
    }
    hcache_upload(&hc);
    cl_mem o_m = buf_poison(256 * 4);
    clattn_kv_dequantize_params d;
    memset(&d, 0, sizeof d);
    d.cache = hcache_tensor(&hc);
    d.maybe_scale_shift = hcache_ss_tensor(&hc);
    d.out = clattn_tensor_4d(o_m, 0, CLATTN_F32, 1, 16, 1, 16);
    CHECK_OK(clattn_kv_dequantize(fx.ctx, fx.queue, &d, 0, NULL, NULL));
    double got[256];
    buf_read(o_m, 0, 256, CLATTN_F32, got);
    int nans = 0;
    for (int c = 0; c < 256; c++) {
      const double want = ref_fp8_decode((uint8_t)c, fnuz);
      const bool ok = isnan(want) ? isnan(got[c])
                                  : got[c] == want && !signbit(got[c]) == !signbit(want);
      nans += isnan(want);
      if (!ok) {
        fprintf(stderr, "  %s: code 0x%02x decodes to %.9g, want %.9g\n", label, c, got[c], want);
        CU_FAIL("fp8 decode differs from the format");
      }
    }
    CU_ASSERT_EQUAL(nans, fnuz ? 1 : 2);
    hcache_free(&hc);
    buf_release(&o_m);

    /* encode: a row of every code's value (NaN codes replaced by the maximum)
     * spans +-max around 0, so scale 1 and shift 0: each value is its code */
    float x[256];
    uint8_t want_bytes[256];
    const uint8_t max_code = fnuz ? 0x7f : 0x7e;
    for (int c = 0; c < 256; c++) {
      const double v = ref_fp8_decode((uint8_t)c, fnuz);
      want_bytes[c] = isnan(v) ? max_code : (uint8_t)c;
      x[c] = (float)(isnan(v) ? ref_fp8_decode(max_code, fnuz) : v);
    }
    uint32_t w[64], ss = 0;
    device_quantize(label, dt, 0, 256, 1, x, w, &ss, NULL);
    CU_ASSERT_EQUAL(ss, 0x00003c00u);
    CU_ASSERT_EQUAL(memcmp(w, want_bytes, 256), 0);
  }
}

/* ------------------------------------------------------------------ scalar codecs */

/* quant.clh's scalar functions (what decode may call one by one), run
 * directly on the device over every fp8 code and many floats: fp8_decode and
 * fp8_encode (both variants through FP8_FNUZ), the fp16 roundings. */
static const char *codec_src =
    "__kernel void codec(__global const float *x, __global uint *o) {\n"
    "  const uint i = get_global_id(0);\n"
    "  const float v = x[i];\n"
    "  o[6 * i + 0] = fp8_encode(v);\n"
    "  o[6 * i + 1] = as_uint(fp8_decode(i & 255u));\n"
    "  o[6 * i + 2] = half_bits_rne(v);\n"
    "  o[6 * i + 3] = isfinite(v) ? half_bits_down(v) : 0u;\n"
    "  o[6 * i + 4] = isfinite(v) ? half_bits_up(v) : 0u;\n"
    "  o[6 * i + 5] = as_uint(fp8_decode4(((i & 255u) << 24) | (i * 2654435761u & 0xffffffu)).w);\n"
    "}\n";

static void test_scalar_codecs(void) {
  /* inputs: every fp8 value of both variants, the midpoints between
   * neighbours and the floats just around them, f16 boundaries, random floats
   * from 2^-40 to 2^40 (no f32 subnormals: a device may flush them) */
  enum { N = 4096 };
  float *x = malloc(sizeof(float) * N);
  int n = 0;
  for (int fnuz = 0; fnuz < 2; fnuz++)
    for (int c = 0; c < 0x7f; c++) {
      const double a = ref_fp8_decode((uint8_t)c, fnuz), b = ref_fp8_decode((uint8_t)(c + 1), fnuz);
      if (isnan(a) || isnan(b)) continue;
      const float mid = (float)((a + b) / 2);
      const float v[] = {(float)a, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
      for (int k = 0; k < 4; k++) {
        x[n++] = v[k];
        x[n++] = -v[k];
      }
    }
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 448, 464, 465, 500, 240, 248,
                           65504, 65519.99f, 65520, -65520, 1e30f, -1e30f, 0x1p-24f, 0x1p-25f,
                           0x1.8p-25f, -0x1p-25f, 0x1p-14f, 0x1.ffcp-15f, 1e-20f, -1e-20f};
  for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) x[n++] = special[k];
  while (n < N) x[n++] = (float)(ldexp(rng_uniform(1, 2), rng_int(-40, 40)) * (rng_int(0, 1) ? 1 : -1));

  char *quant = NULL;
  CHECK_OK(clattn_source_load("quant.clh", &quant));
  cl_mem x_m = buf_zeros(sizeof(float) * N), o_m = buf_zeros(sizeof(uint32_t) * 6 * N);
  CU_ASSERT_EQUAL_FATAL(clEnqueueWriteBuffer(fx.queue, x_m, CL_TRUE, 0, sizeof(float) * N, x, 0,
                                             NULL, NULL),
                        CL_SUCCESS);
  uint32_t *o = malloc(sizeof(uint32_t) * 6 * N);
  for (int fnuz = 0; fnuz < 2; fnuz++) {
    const char *texts[2] = {quant, codec_src};
    cl_int err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithSource(fx.cl, 2, texts, NULL, &err);
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
    char opts[64];
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 -DFP8_FNUZ=%d", fnuz);
    err = clBuildProgram(prog, 1, &fx.dev, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
      char log[4096] = "";
      clGetProgramBuildInfo(prog, fx.dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
      fprintf(stderr, "  codec kernel build failed:\n%s\n", log);
    }
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
    cl_kernel k = clCreateKernel(prog, "codec", &err);
    CU_ASSERT_EQUAL_FATAL(err, CL_SUCCESS);
    clSetKernelArg(k, 0, sizeof x_m, &x_m);
    clSetKernelArg(k, 1, sizeof o_m, &o_m);
    const size_t global = N;
    CU_ASSERT_EQUAL(clEnqueueNDRangeKernel(fx.queue, k, 1, NULL, &global, NULL, 0, NULL, NULL),
                    CL_SUCCESS);
    buf_read_i32(o_m, 6 * N, (int32_t *)o);
    int bad = 0;
    for (int i = 0; i < N && bad < 10; i++) {
      const double v = x[i];
      float dec;
      memcpy(&dec, &o[6 * i + 1], 4);
      const double want_dec = ref_fp8_decode((uint8_t)(i & 255), fnuz);
      float dec4;
      memcpy(&dec4, &o[6 * i + 5], 4);
      const double want_dec4 = want_dec; /* byte 3 holds the same code */
      const uint32_t want[6] = {ref_fp8_encode(v, fnuz), 0, ref_half_round(v, 0),
                                isfinite(v) ? ref_half_round(v, -1) : 0u,
                                isfinite(v) ? ref_half_round(v, +1) : 0u, 0};
      const bool dec_ok = isnan(want_dec) ? isnan(dec)
                                          : dec == want_dec && !signbit(dec) == !signbit(want_dec);
      const bool dec4_ok = isnan(want_dec4) ? isnan(dec4) : dec4 == want_dec4;
      const char *what = o[6 * i] != want[0]       ? "fp8_encode"
                         : !dec_ok                 ? "fp8_decode"
                         : o[6 * i + 2] != want[2] ? "half_bits_rne"
                         : o[6 * i + 3] != want[3] ? "half_bits_down"
                         : o[6 * i + 4] != want[4] ? "half_bits_up"
                         : !dec4_ok                ? "fp8_decode4"
                                                   : NULL;
      if (what) {
        fprintf(stderr, "  scalar codecs %s: %s(%.9g) (i %d): got 0x%x 0x%x 0x%x 0x%x 0x%x, want 0x%x %.9g 0x%x 0x%x 0x%x\n",
                fnuz ? "fnuz" : "fn", what, v, i, o[6 * i], o[6 * i + 1], o[6 * i + 2], o[6 * i + 3],
                o[6 * i + 4], want[0], want_dec, want[2], want[3], want[4]);
        bad++;
      }
    }
    CU_ASSERT_EQUAL(bad, 0);
    clReleaseKernel(k);
    clReleaseProgram(prog);
  }
  free(o);
  free(x);
  free(quant);
  buf_release(&x_m);
  buf_release(&o_m);
}

/* ------------------------------------------------------------------ ties and saturation */

static void test_ties_saturation(void) {
  /* fp8 FN at scale 1 (the row spans +-448): ties to the even code */
  const float fn[16] = {448, -448, 1.0625f, 1.1875f, -1.1875f, 0x1p-10f, 3 * 0x1p-10f,
                        7.5f * 0x1p-9f, 432, -0x1p-12f, 0, 0, 0, 0, 0, 0};
  /* 1.0625: 1 | 1.125 -> 0x38; 1.1875: 1.125 | 1.25 -> 0x3a; 2^-10: 0 | 2^-9 -> 0;
   * 3*2^-10 -> 2*2^-9 (0x02); 7.5*2^-9: 7*2^-9 | 2^-6 -> 0x08; 432: 416 | 448 -> 0x7e;
   * -2^-12 -> -0 (0x80) */
  const uint32_t want_fn[4] = {0x3a38fe7eu, 0x080200bau, 0x0000807eu, 0};
  uint32_t w[4], ss;
  device_quantize("fp8 ties", CLATTN_FP8, 0, 16, 1, fn, w, &ss, NULL);
  expect_words("fp8 ties", w, want_fn, 4);
  CU_ASSERT_EQUAL(ss, 0x00003c00u);

  /* FNUZ at scale 1 (+-240): 232: 224 | 240 -> 0x7e; 2^-11: 0 | 2^-10 -> 0, and
   * -2^-11 -> 0 too (no -0); 3*2^-11 -> 0x02; -2^-12 -> 0; 1.0625: 1 | 1.125 -> 0x40 */
  const float fnuz[16] = {240, -240, 232, 0x1p-11f, -0x1p-11f, 3 * 0x1p-11f, -0x1p-12f, 1.0625f};
  const uint32_t want_fnuz[4] = {0x007eff7fu, 0x40000200u, 0, 0};
  device_quantize("fp8fnuz ties", CLATTN_FP8_FNUZ, 0, 16, 1, fnuz, w, &ss, NULL);
  expect_words("fp8fnuz ties", w, want_fnuz, 4);
  CU_ASSERT_EQUAL(ss, 0x00003c00u);

  /* int4 at scale 1, shift 0: 2.5 -> 2, 3.5 -> 4, 14.5 -> 14, 0.5 -> 0, 1.5 -> 2 */
  const float i4[8] = {0, 15, 2.5f, 3.5f, 14.5f, 0.5f, 1.5f, 7};
  const uint32_t want_i4[2] = {0x00003c00u, 0x720e42f0u};
  device_quantize("int4 ties", CLATTN_INT4, 1, 8, 1, i4, w, NULL, NULL);
  expect_words("int4 ties", w, want_i4, 2);

  /* fp8 saturation: a range beyond 448 * 2^15 keeps scale 2^15 (fp16 0x7800)
   * and clamps the codes to +-448 */
  const float big[8] = {1e9f, -1e9f, 470 * 32768.0f, -470 * 32768.0f, 448 * 32768.0f, 0, 1,
                        1e8f};
  const uint32_t want_big[2] = {0xfe7efe7eu, 0x7e00007eu};
  double deq[8];
  device_quantize("fp8 saturation", CLATTN_FP8, 0, 8, 1, big, w, &ss, deq);
  expect_words("fp8 saturation", w, want_big, 2);
  CU_ASSERT_EQUAL(ss, 0x00007800u);
  CU_ASSERT_EQUAL(deq[0], 448.0 * 32768);

  /* int4 saturation: shift -65504 (0xfbff), scale 65504 (0x7bff); codes clamp */
  const float wide[8] = {-1e6f, 1e6f, 0, 65504, -65504, 1, -1, 5e5f};
  const uint32_t want_wide[2] = {0xfbff7bffu, 0x911021f0u};
  device_quantize("int4 saturation", CLATTN_INT4, 1, 8, 1, wide, w, NULL, deq);
  expect_words("int4 saturation", w, want_wide, 2);
  for (int d = 0; d < 8; d++) CU_ASSERT(isfinite(deq[d]));
}

/* ------------------------------------------------------------------ extreme rows */

static void test_extreme_rows(void) {
  enum { D = 16, R = 8 };
  float x[R * D];
  for (int d = 0; d < D; d++) {
    x[0 * D + d] = 3.5f;                                /* constant, an fp16 value */
    x[1 * D + d] = 0.1f;                                /* constant, not an fp16 value */
    x[2 * D + d] = (d & 1 ? -1e30f : 1e30f) * (1 + d);  /* huge */
    x[3 * D + d] = (d & 1 ? -1e-30f : 1e-30f) * (1 + d); /* tiny */
    x[4 * D + d] = -0.0f;                               /* negative zero */
    x[5 * D + d] = 0.25f * d - 1;                       /* NaN in element 3 (int4 group 0) */
    x[6 * D + d] = 2.0f - 0.5f * d;                     /* +inf in element 12 (group 1) */
    x[7 * D + d] = (d & 1) ? 0.0f : -0.0f;              /* mixed zeros, -inf in element 0 */
  }
  x[5 * D + 3] = NAN;
  x[6 * D + 12] = INFINITY;
  x[7 * D + 0] = -INFINITY;
  for (int v = 0; v < 2; v++) {
    const clattn_dtype dt = v ? CLATTN_FP8 : CLATTN_INT4;
    const char *label = v ? "fp8 extreme rows" : "int4 G=2 extreme rows";
    const int X = v ? D / 4 : 2 + D / 8;
    uint32_t w[R * 8], ss[R];
    double deq[R * D];
    device_quantize(label, dt, v ? 0 : 2, D, R, x, w, ss, deq);
    /* scale-shift word of element d of row r */
    uint32_t sw[R][D];
    for (int r = 0; r < R; r++)
      for (int d = 0; d < D; d++) sw[r][d] = v ? ss[r] : w[r * X + d / (D / 2)];
    /* constant fp16 value: scale 0, shift 3.5 (0x4300), codes 0, exact */
    for (int d = 0; d < D; d++) {
      CU_ASSERT_EQUAL(sw[0][d], 0x43000000u);
      CU_ASSERT_EQUAL(deq[0 * D + d], 3.5);
    }
    /* other rows: within the bound; huge rows saturate (finite), tiny ones read ~0 */
    for (int r = 1; r <= 3; r++)
      for (int d = 0; d < D; d++) {
        double scale, shift;
        ref_scale_shift(sw[r][d], &scale, &shift);
        const double xv = x[r * D + d], got = deq[r * D + d];
        CU_ASSERT(isfinite(got));
        if (r == 2) continue; /* beyond fp16: saturated, documented as inexact */
        const double bound = v ? ref_fp8_bound(xv, scale, shift, 0) : ref_int4_bound(xv, scale, shift);
        if (fabs(got - xv) > bound) {
          fprintf(stderr, "  %s: row %d elt %d: %.9g read back %.9g (bound %.3g)\n", label, r, d,
                  xv, got, bound);
          CU_FAIL("extreme row beyond its bound");
        }
      }
    CU_ASSERT(fabs(deq[1 * D] - 0.1f) < 1e-6); /* a tiny scale repairs the fp16 shift */
    /* zeros (-0 too) read back as +0 */
    for (int d = 0; d < D; d++) {
      CU_ASSERT(deq[4 * D + d] == 0.0 && !signbit(deq[4 * D + d]));
      if (d > 0 && (v == 0 && d >= D / 2))
        CU_ASSERT(deq[7 * D + d] == 0.0 && !signbit(deq[7 * D + d]));
    }
    /* non-finite inputs: NaN scale and shift and codes 0 for the group (int4)
     * or the row (fp8); the other int4 group is unaffected */
    for (int r = 5; r <= 7; r++) {
      const int bad_group = r == 6 ? 1 : 0;
      for (int d = 0; d < D; d++) {
        const bool hit = v || d / (D / 2) == bad_group;
        if (hit) {
          CU_ASSERT_EQUAL(sw[r][d], 0x7e007e00u);
          CU_ASSERT(isnan(deq[r * D + d]));
        } else {
          CU_ASSERT(isfinite(deq[r * D + d]));
        }
      }
      for (int k = v ? 0 : 2; k < X; k++) {
        const uint32_t word = w[r * X + k];
        const int first = v ? k * 4 : (k - 2) * 8; /* first element of this code word */
        if (v || first / (D / 2) == bad_group) CU_ASSERT_EQUAL(word, 0u);
      }
    }
  }
}

/* The same through the K/V cache kernels' other form (quant_rowwise): the
 * row-wise form's codecs are the straight ones (QUANT_STRAIGHT, cl/quant.clh),
 * the lane form's the per-element ones, each checked on every code. */
static void test_fp8_all_codes_other_form(void) {
  const int was = fx.ctx->tuning.quant_rowwise;
  fx.ctx->tuning.quant_rowwise = !was;
  test_fp8_all_codes();
  test_extreme_rows();
  fx.ctx->tuning.quant_rowwise = was;
}

void kvcache_add_format_tests(CU_pSuite s) {
  CU_add_test(s, "layout int4 G=1 D=16 and G=4 D=32, word by word", test_layout_int4);
  CU_add_test(s, "layout fp8 and fp8fnuz D=8, word by word", test_layout_fp8);
  CU_add_test(s, "fp8 and fp8fnuz: all 256 codes decode and re-encode", test_fp8_all_codes);
  CU_add_test(s, "fp8 all 256 codes and extreme rows, the other kernel form", test_fp8_all_codes_other_form);
  CU_add_test(s, "scalar codecs: fp8 encode decode, fp16 roundings, on the device", test_scalar_codecs);
  CU_add_test(s, "encoder ties to even and saturation, int4 fp8 fnuz", test_ties_saturation);
  CU_add_test(s, "extreme rows: constant huge tiny -0 inf NaN, int4 G=2 fp8", test_extreme_rows);
}
