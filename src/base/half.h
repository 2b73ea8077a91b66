/* IEEE 754 half precision (binary16) on the host: gradients sent between
 * processes in half the bytes (--wire fp16). Floats round to the nearest half,
 * ties to even, as the F16C instructions do (overflow to infinity, NaN kept
 * quiet with its payload's top bits); halves widen exactly. Where the CPU has
 * F16C it is used, else the same results in integer arithmetic: every host of a
 * run gets the same bits. */
#ifndef CLT_HALF_H
#define CLT_HALF_H

#include <stddef.h>
#include <stdint.h>

uint16_t clt_half_from_float(float f);
float clt_half_to_float(uint16_t h);

/* The same over n values. */
void clt_halves_from_floats(uint16_t *dst, const float *src, size_t n);
void clt_halves_to_floats(float *dst, const uint16_t *src, size_t n);
/* dst[i] = dst[i] + (float)src[i]: a received half added to the float held. */
void clt_halves_add_into(float *dst, const uint16_t *src, size_t n);
/* x[i] = (float)(half)x[i]: each float rounded to the nearest half. */
void clt_floats_round_to_half(float *x, size_t n);

/* 1 when the F16C instructions are used; clt_half_force_portable(1) makes the
 * calls above use the integer code alone (for the tests that compare the two). */
int clt_half_uses_f16c(void);
void clt_half_force_portable(int on);

#endif
