/* Half precision on the host (src/base/half.h), as --wire fp16 sends gradients:
 * known values; every half widens exactly and narrows back to itself; floats
 * round to the nearest half, ties to even, checked against the two neighbours
 * of the result over a sample of every float's bit patterns and every tie; and
 * the integer code gives the same bits as the F16C instructions (where the CPU
 * has them) for all of those, through the array functions. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "half.h"

static float bits_float(uint32_t x) {
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static uint32_t float_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

/* Whether h is f rounded to the nearest half, ties to even (finite f). */
static int nearest(float f, uint16_t h) {
  const double v = f, got = clt_half_to_float(h);
  if ((h & 0x7fff) == 0x7c00) return fabs(v) >= 65520.0; /* infinity: from the halfway point up */
  if (fabs(v) >= 65520.0) return 0;
  const double err = fabs(got - v);
  /* The neighbours on the same side of zero (h - 1 below the smallest magnitude
   * is the other zero, as far away as h + 1 from there: fine for the check). */
  for (int d = -1; d <= 1; d += 2) {
    const uint16_t m = h & 0x7fff;
    if ((m == 0 && d < 0) || (m == 0x7bff && d > 0)) continue;
    const uint16_t other = (uint16_t)((h & 0x8000) | (m + d));
    const double oerr = fabs((double)clt_half_to_float(other) - v);
    if (oerr < err) return 0;
    if (oerr == err && (h & 1)) return 0; /* a tie goes to the even one */
  }
  return 1;
}

int main(void) {
  struct {
    float f;
    uint16_t h;
  } known[] = {{0.0f, 0x0000},
               {-0.0f, 0x8000},
               {1.0f, 0x3c00},
               {-2.0f, 0xc000},
               {65504.0f, 0x7bff},
               {65519.0f, 0x7bff},
               {65520.0f, 0x7c00},
               {1e9f, 0x7c00},
               {-INFINITY, 0xfc00},
               {0x1p-14f, 0x0400},
               {0x1p-24f, 0x0001},
               {0x1p-25f, 0x0000},
               {0x1.8p-25f, 0x0001},
               {0x1.8p-24f, 0x0002},
               {0x1p-26f, 0x0000},
               {0.1f, 0x2e66},
               {1.0f + 0x1p-11f, 0x3c00},
               {1.0f + 0x1.8p-10f, 0x3c02}};
  int bad = 0;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (clt_half_from_float(known[i].f) != known[i].h) {
      check(0, "%a -> 0x%04x (expected 0x%04x)", (double)known[i].f,
            clt_half_from_float(known[i].f), known[i].h);
      bad++;
    }
  }
  check(!bad, "known floats round to their halves");
  const uint16_t qnan = clt_half_from_float(NAN);
  check((qnan & 0x7c00) == 0x7c00 && (qnan & 0x200) && isnan(clt_half_to_float(qnan)),
        "NaN stays a quiet NaN (0x%04x)", qnan);

  /* Every half widens exactly and narrows back to itself (NaNs to quiet NaNs). */
  bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    const float f = clt_half_to_float((uint16_t)h);
    const int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (is_nan ? !isnan(f) || clt_half_from_float(f) != (h | 0x200) : clt_half_from_float(f) != h)
      bad++;
  }
  check(!bad, "every half narrows back to itself after widening (%d did not)", bad);

  /* A sample of all float bit patterns, and every tie between two halves and
   * its two float neighbours. */
  enum { STRIDE = 4099 };
  const size_t nsample = (size_t)(0x100000000ull / STRIDE) + 1, nties = (size_t)3 * 2 * 0x7c00;
  const size_t n = nsample + nties;
  float *f = malloc(n * sizeof *f), *back = malloc(n * sizeof *back);
  float *sum = malloc(n * sizeof *sum), *round = malloc(n * sizeof *round);
  uint16_t *h = malloc(n * sizeof *h), *hp = malloc(n * sizeof *hp);
  if (!f || !back || !sum || !round || !h || !hp) {
    check(0, "out of memory");
    return check_summary();
  }
  size_t k = 0;
  for (uint64_t x = 0; x < 0x100000000ull; x += STRIDE) f[k++] = bits_float((uint32_t)x);
  for (uint32_t m = 0; m < 0x7c00; m++) {
    for (int s = 0; s < 2; s++) {
      const uint16_t a = (uint16_t)(m | (s ? 0x8000 : 0));
      const float lo = clt_half_to_float(a), hi = clt_half_to_float((uint16_t)(a + 1));
      const float mid = (float)(((double)lo + (double)hi) / 2); /* exact: 11 bits + 1 */
      f[k++] = mid;
      f[k++] = nextafterf(mid, 0.0f);
      f[k++] = nextafterf(mid, s ? -INFINITY : INFINITY);
    }
  }
  bad = 0;
  for (size_t i = 0; i < k; i++) {
    if (!isnan(f[i]) && !nearest(f[i], clt_half_from_float(f[i]))) {
      if (bad++ < 5)
        check(0, "%a (0x%08x) -> 0x%04x is not the nearest half", (double)f[i], float_bits(f[i]),
              clt_half_from_float(f[i]));
    }
  }
  check(!bad, "%zu floats round to the nearest half, ties to even (%d did not)", k, bad);

  /* The array functions: the F16C instructions where present, against the
   * integer code. */
  clt_half_force_portable(1);
  clt_halves_from_floats(hp, f, k);
  clt_half_force_portable(0);
  clt_halves_from_floats(h, f, k);
  const int f16c = clt_half_uses_f16c();
  check(memcmp(h, hp, k * sizeof *h) == 0, "narrowing %zu floats: %s", k,
        f16c ? "F16C gives the integer code's bits" : "no F16C here: the integer code alone");
  for (size_t i = 0; i < k; i++) {
    sum[i] = isnan(f[i]) ? 0.0f : f[i] / 4;
    round[i] = f[i];
  }
  clt_halves_to_floats(back, h, k);
  clt_halves_add_into(sum, h, k);
  clt_floats_round_to_half(round, k);
  bad = 0;
  for (size_t i = 0; i < k; i++) {
    const float w = clt_half_to_float(h[i]);
    const float s = (isnan(f[i]) ? 0.0f : f[i] / 4) + w;
    if (float_bits(back[i]) != float_bits(w) || float_bits(round[i]) != float_bits(w) ||
        (float_bits(sum[i]) != float_bits(s) && !(isnan(sum[i]) && isnan(s))))
      bad++;
  }
  check(!bad, "widening, adding and rounding arrays match the single-value functions (%d not)",
        bad);
  /* Every half through the array function, against the single-value one. */
  for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  clt_halves_to_floats(back, h, 65536);
  bad = 0;
  for (uint32_t i = 0; i < 65536; i++) {
    const float w = clt_half_to_float((uint16_t)i);
    if (float_bits(back[i]) != float_bits(w)) bad++;
  }
  check(!bad, "every half widens alike through the array function (%d did not)", bad);
  free(f);
  free(back);
  free(sum);
  free(round);
  free(h);
  free(hp);
  return check_summary();
}
