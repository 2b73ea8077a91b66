/* Half precision on the host (half.h): the integer code, and the F16C
 * instructions where the CPU has them. */
#include "half.h"

#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_F16C_CODE 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static int portable_only;

void clt_half_force_portable(int on) { portable_only = on; }

uint16_t clt_half_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN, quiet */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* 65520 and up round to infinity */
  if (a >= 0x38800000u) {                                  /* a normal half: 2^-14 and up */
    const uint32_t h = (a - 0x38000000u) >> 13, rest = a & 0x1fffu;
    return (uint16_t)(sign | (h + (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))));
  }
  if (a <= 0x33000000u) return sign; /* 2^-25 and below: zero (a tie goes to the even 0) */
  /* A subnormal half: the value in units of 2^-24, rounded to nearest, ties to even. */
  const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
  const uint32_t h = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  return (uint16_t)(sign | (h + (rest > half || (rest == half && (h & 1u)))));
}

float clt_half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0x1f) {
    x = sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u); /* a NaN comes out quiet */
  } else if (e == 0) {
    const float v = (float)m * 0x1p-24f; /* zero or subnormal: exact */
    return sign ? -v : v;
  } else {
    x = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

#ifdef HAVE_F16C_CODE
__attribute__((target("avx,f16c"))) static size_t f16c_from(uint16_t *dst, const float *src,
                                                            size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128((__m128i *)(dst + i), h);
  }
  return i;
}

__attribute__((target("avx,f16c"))) static size_t f16c_to(float *dst, const uint16_t *src,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  return i;
}

__attribute__((target("avx,f16c"))) static size_t f16c_add(float *dst, const uint16_t *src,
                                                           size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), v));
  }
  return i;
}

__attribute__((target("avx,f16c"))) static size_t f16c_round(float *x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
  }
  return i;
}

/* CPUID: F16C and AVX, and the OS saving the AVX registers (XGETBV). */
static int have_f16c(void) {
  static int known = -1;
  if (known < 0) {
    unsigned a = 0, b = 0, c = 0, d = 0, lo = 0, hi = 0;
    const int listed = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && (c & bit_AVX) &&
                       (c & bit_OSXSAVE);
    if (listed) __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    known = listed && (lo & 6u) == 6u; /* the XMM and YMM state */
  }
  return known;
}
#endif

int clt_half_uses_f16c(void) {
#ifdef HAVE_F16C_CODE
  return !portable_only && have_f16c();
#else
  return 0;
#endif
}

/* Each function below runs the F16C loop over the whole groups of 8 it can, and
 * the integer code over the rest (the same results). */
void clt_halves_from_floats(uint16_t *dst, const float *src, size_t n) {
  size_t i = 0;
#ifdef HAVE_F16C_CODE
  if (clt_half_uses_f16c()) i = f16c_from(dst, src, n);
#endif
  for (; i < n; i++) dst[i] = clt_half_from_float(src[i]);
}

void clt_halves_to_floats(float *dst, const uint16_t *src, size_t n) {
  size_t i = 0;
#ifdef HAVE_F16C_CODE
  if (clt_half_uses_f16c()) i = f16c_to(dst, src, n);
#endif
  for (; i < n; i++) dst[i] = clt_half_to_float(src[i]);
}

void clt_halves_add_into(float *dst, const uint16_t *src, size_t n) {
  size_t i = 0;
#ifdef HAVE_F16C_CODE
  if (clt_half_uses_f16c()) i = f16c_add(dst, src, n);
#endif
  for (; i < n; i++) dst[i] += clt_half_to_float(src[i]);
}

void clt_floats_round_to_half(float *x, size_t n) {
  size_t i = 0;
#ifdef HAVE_F16C_CODE
  if (clt_half_uses_f16c()) i = f16c_round(x, n);
#endif
  for (; i < n; i++) x[i] = clt_half_to_float(clt_half_from_float(x[i]));
}
