/* Host references of the K/V cache codecs (see ref_quant.h). */
#include "ref_quant.h"

#include <string.h>

#include <math.h>
#include <stdbool.h>

#define SCALE_SHIFT_NAN 0x7e007e00u

/* ------------------------------------------------------------------ fp16 */

double ref_half_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp(m, -24);
  else
    v = ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* Bits of a finite fp16 magnitude a (an exact fp16 value). */
static uint16_t half_bits_of(double a) {
  if (a < 0x1p-14) return (uint16_t)(a * 0x1p24);
  int E;
  frexp(a, &E); /* a = f 2^E, f in [0.5, 1): exponent E - 1 */
  const int e = E - 1;
  return (uint16_t)(((e + 15) << 10) + (int)(ldexp(a, 10 - e) - 1024));
}

uint16_t ref_half_round(double x, int mode) {
  if (isnan(x)) return 0x7e00;
  const bool neg = signbit(x);
  const uint16_t sign = neg ? 0x8000 : 0;
  const double a = fabs(x);
  /* the magnitude's rounding: toward +inf raises positive magnitudes, lowers negative ones */
  const int up = mode == 0 ? 0 : ((mode > 0) != neg ? 1 : -1);
  /* fp16's quantum at a: 2^-24 below 2^-14, else 2^(e - 10) */
  double q = 0x1p-24;
  if (a >= 0x1p-14) {
    int E;
    frexp(a, &E);
    q = ldexp(1.0, E - 11);
  }
  double m = a / q; /* exact: q is a power of two */
  m = up == 0 ? nearbyint(m) : up > 0 ? ceil(m) : floor(m);
  const double r = m * q;
  if (r > 65504.0) return (uint16_t)(sign | (mode == 0 || isinf(x) ? 0x7c00 : 0x7bff));
  return (uint16_t)(sign | half_bits_of(r));
}

uint16_t ref_bf16_round(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float ref_bf16_value(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t saturate(uint16_t h) {
  return ((h & 0x7fff) == 0x7c00) ? (uint16_t)((h & 0x8000) | 0x7bff) : h;
}

void ref_scale_shift(uint32_t w, double *scale, double *shift) {
  *scale = ref_half_value((uint16_t)(w & 0xffff));
  *shift = ref_half_value((uint16_t)(w >> 16));
}

/* ------------------------------------------------------------------ E4M3 */

static int fp8_bias(int fnuz) { return fnuz ? 8 : 7; }
static int fp8_max_code(int fnuz) { return fnuz ? 0x7f : 0x7e; }

double ref_fp8_decode(uint8_t code, int fnuz) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (fnuz ? code == 0x80 : (e == 15 && m == 7)) return NAN;
  const int bias = fp8_bias(fnuz);
  const double v = e == 0 ? ldexp(m, 1 - bias - 3) : ldexp(8 + m, e - bias - 3);
  return (code & 0x80) ? -v : v;
}

uint8_t ref_fp8_encode(double v, int fnuz) {
  if (isnan(v)) return fnuz ? 0x80 : 0x7f;
  const double a = fabs(v);
  /* magnitudes grow with the code: find the last code <= a, then its neighbour */
  int lo = 0, hi = fp8_max_code(fnuz);
  if (a >= ref_fp8_decode((uint8_t)hi, fnuz)) {
    lo = hi;
  } else {
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (ref_fp8_decode((uint8_t)mid, fnuz) <= a) lo = mid;
      else hi = mid;
    }
    const double dl = a - ref_fp8_decode((uint8_t)lo, fnuz);
    const double dh = ref_fp8_decode((uint8_t)hi, fnuz) - a;
    if (dh < dl || (dh == dl && (hi & 1) == 0)) lo = hi;
  }
  if (lo == 0 && fnuz) return 0;
  return (uint8_t)(lo | (signbit(v) ? 0x80 : 0));
}

double ref_fp8_half_spacing(double v, int fnuz) {
  const double a = fabs(v);
  const int bias = fp8_bias(fnuz);
  if (a < ldexp(1.0, 1 - bias)) return ldexp(1.0, 1 - bias - 3) / 2;
  int E;
  frexp(a, &E);
  return ldexp(1.0, E - 1 - 3) / 2;
}

/* ------------------------------------------------------------------ rows */

/* min and max of n floats; false when one is inf or NaN */
static bool min_max(const float *x, int n, float *mn, float *mx) {
  *mn = INFINITY;
  *mx = -INFINITY;
  for (int i = 0; i < n; i++) {
    if (!isfinite(x[i])) return false;
    if (x[i] < *mn) *mn = x[i];
    if (x[i] > *mx) *mx = x[i];
  }
  *mn += 0.0f; /* -0 -> +0, as the kernel does */
  *mx += 0.0f;
  return true;
}

void ref_int4_quantize_row(const float *x, int D, int G, uint32_t *words) {
  const int gs = D / G;
  for (int i = 0; i < D / 8; i++) words[G + i] = 0;
  for (int g = 0; g < G; g++) {
    float mn, mx;
    if (!min_max(x + g * gs, gs, &mn, &mx)) {
      words[g] = SCALE_SHIFT_NAN;
      continue;
    }
    const uint16_t shift_h = ref_half_round(mn, -1);
    const float shift = (float)ref_half_value(shift_h);
    const float diff = mx - shift; /* f32, as the kernel computes it */
    uint16_t scale_h = 0;
    if (diff > 0.0f) {
      /* the smallest fp16 s with 15 s >= diff */
      scale_h = ref_half_round((double)diff / 15.0, +1);
      if (15.0 * ref_half_value(scale_h) < diff && scale_h < 0x7bff) scale_h++;
      while (scale_h > 0 && 15.0 * ref_half_value((uint16_t)(scale_h - 1)) >= diff) scale_h--;
    }
    const double scale = ref_half_value(scale_h);
    words[g] = scale_h | ((uint32_t)shift_h << 16);
    for (int d = g * gs; d < (g + 1) * gs; d++) {
      const float y = x[d] - shift;
      double c = scale > 0 ? nearbyint((double)y / scale) : 0.0;
      c = c < 0 ? 0 : c > 15 ? 15 : c;
      words[G + d / 8] |= (uint32_t)c << (4 * (d % 8));
    }
  }
}

void ref_int4_dequantize_row(const uint32_t *words, int D, int G, double *out) {
  for (int d = 0; d < D; d++) {
    double scale, shift;
    ref_scale_shift(words[d / (D / G)], &scale, &shift);
    out[d] = ((words[G + d / 8] >> (4 * (d % 8))) & 15) * scale + shift;
  }
}

void ref_fp8_quantize_row(const float *x, int D, int fnuz, uint32_t *words,
                          uint32_t *scale_shift) {
  for (int i = 0; i < D / 4; i++) words[i] = 0;
  float mn, mx;
  if (!min_max(x, D, &mn, &mx)) {
    *scale_shift = SCALE_SHIFT_NAN;
    return;
  }
  const uint16_t shift_h = saturate(ref_half_round(0.5f * mx + 0.5f * mn, 0));
  const float shift = (float)ref_half_value(shift_h);
  const float R = fmaxf(mx - shift, shift - mn);
  if (!(R > 0.0f)) {
    *scale_shift = (uint32_t)shift_h << 16;
    return;
  }
  const double maxf = fnuz ? 240.0 : 448.0;
  int k = -24;
  while (k < 15 && R > maxf * ldexp(1.0, k)) k++;
  *scale_shift = ref_half_round(ldexp(1.0, k), 0) | ((uint32_t)shift_h << 16);
  for (int d = 0; d < D; d++) {
    const float y = x[d] - shift;
    words[d / 4] |= (uint32_t)ref_fp8_encode(ldexp((double)y, -k), fnuz) << (8 * (d % 4));
  }
}

void ref_fp8_dequantize_row(const uint32_t *words, uint32_t scale_shift, int D, int fnuz,
                            double *out) {
  double scale, shift;
  ref_scale_shift(scale_shift, &scale, &shift);
  for (int d = 0; d < D; d++)
    out[d] = ref_fp8_decode((uint8_t)(words[d / 4] >> (8 * (d % 4))), fnuz) * scale + shift;
}

double ref_int4_bound(double x, double scale, double shift) {
  return scale / 2 + 0x1p-22 * (fabs(x) + fabs(shift));
}

double ref_fp8_bound(double x, double scale, double shift, int fnuz) {
  const double v = scale > 0 ? (x - shift) / scale : 0.0;
  return scale * ref_fp8_half_spacing(v, fnuz) + 0x1p-22 * (fabs(x) + fabs(shift));
}
