/* Host references of the K/V cache codecs (formats and rules in include/clattn.h):
 * fp16 rounding, E4M3FN / E4M3FNUZ encode and decode, int4 and fp8 rows.
 * Written from the definitions in double precision (search, floor, ceil),
 * not from the kernels' bit tricks, so the tests compare two derivations. */
#ifndef CLATTN_TESTS_REF_QUANT_H
#define CLATTN_TESTS_REF_QUANT_H

#include <stdint.h>

/* fp16 bits -> value (exact). */
double ref_half_value(uint16_t h);
/* x rounded to fp16 bits: mode 0 nearest even (overflow: inf), -1 toward -inf,
 * +1 toward +inf (directed results saturate at +-65504). NaN -> 0x7e00. */
uint16_t ref_half_round(double x, int mode);
/* bf16: x rounded to nearest even (NaN stays NaN), and a code's value. */
uint16_t ref_bf16_round(float x);
float ref_bf16_value(uint16_t h);

/* E4M3 (fnuz 0: FN, bias 7, max 448; 1: FNUZ, bias 8, max 240): the value of
 * a code (NaN for the NaN codes), and the code nearest v (ties to the even
 * code, |v| beyond the largest finite saturates, NaN -> the NaN code, FNUZ
 * never returns 0x80 for a value). */
double ref_fp8_decode(uint8_t code, int fnuz);
uint8_t ref_fp8_encode(double v, int fnuz);
/* Half the distance between the E4M3 neighbours around |v| (|v| <= max). */
double ref_fp8_half_spacing(double v, int fnuz);

/* A scale-shift word (fp16 scale low, fp16 shift high). */
void ref_scale_shift(uint32_t w, double *scale, double *shift);

/* One row of D values (floats, as the kernel loads them) quantized the way
 * the kernels do: int4 to G + D/8 words; fp8 to D/4 words + its scale-shift word. */
void ref_int4_quantize_row(const float *x, int D, int G, uint32_t *words);
void ref_fp8_quantize_row(const float *x, int D, int fnuz, uint32_t *words,
                          uint32_t *scale_shift);
/* value = code * scale + shift, exact in double. */
void ref_int4_dequantize_row(const uint32_t *words, int D, int G, double *out);
void ref_fp8_dequantize_row(const uint32_t *words, uint32_t scale_shift, int D, int fnuz,
                            double *out);

/* The documented round-trip bounds of element x given its group's (row's)
 * scale and shift: scale/2 (int4) or scale * half the E4M3 spacing at
 * (x - shift)/scale (fp8), plus 2^-22 (|x| + |shift|) for the f32 rounding of
 * x - shift and of the dequantizing fma. */
double ref_int4_bound(double x, double scale, double shift);
double ref_fp8_bound(double x, double scale, double shift, int fnuz);

#endif
