/* Keras' initializers (src/engine/init.c): each one's samples on a large tensor
 * against its formula: mean, variance, bounds and truncation; Keras' fans of a
 * vector, a matrix and a convolution kernel; the same seed drawing the same
 * values, another seed others.
 *
 * Prints "ok: ..." per check, "FAIL: ..." with the numbers, "N passed, M failed"
 * last, and exits non-zero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "init.h"

/* A 3x3 kernel of 256 input and 512 output channels: Keras' fans 2304 and 4608. */
static const int dims[4] = {3, 3, 256, 512};
#define N ((size_t)3 * 3 * 256 * 512)

typedef struct moments {
  double mean, var, min, max, beyond2; /* beyond2: fraction beyond 2 stddev of the mean */
} moments;

static moments draw(const clt_init *init, uint64_t seed, float *v) {
  clt_rng rng;
  clt_rng_seed(&rng, seed, 0);
  clt_init_fill(init, 4, dims, &rng, v, N);
  moments m = {0, 0, v[0], v[0], 0};
  for (size_t i = 0; i < N; i++) {
    m.mean += v[i];
    if (v[i] < m.min) m.min = v[i];
    if (v[i] > m.max) m.max = v[i];
  }
  m.mean /= N;
  for (size_t i = 0; i < N; i++) m.var += (v[i] - m.mean) * (v[i] - m.mean);
  m.var /= N - 1;
  for (size_t i = 0; i < N; i++) m.beyond2 += fabs(v[i] - m.mean) > 2 * sqrt(m.var);
  m.beyond2 /= N;
  return m;
}

/* The mean within 6 standard errors and the variance within 1.5% of the formula's. */
static int close_moments(const moments *m, double mean, double var) {
  return fabs(m->mean - mean) <= 6 * sqrt(var / N) && fabs(m->var - var) <= 0.015 * var;
}

/* A normal's share beyond 2 stddev is 4.55%; a truncated one has none beyond 2 of
 * its base stddev, which is 1 / 0.8796 of its own: the share between 2 of its own
 * (1.76 base) and 2 base lies beyond 2 of its own stddev. */
static void check_normal(const char *what, const clt_init *init, double mean, double sd,
                         int truncated, float *v) {
  const moments m = draw(init, 7, v);
  const double var = truncated ? sd * sd * 0.87962566103423978 * 0.87962566103423978 : sd * sd;
  check(close_moments(&m, mean, var), "%s: mean %.5f (formula %.5f), variance %.6g (formula %.6g)",
        what, m.mean, mean, m.var, var);
  if (truncated) {
    const double lo = mean - 2 * sd, hi = mean + 2 * sd;
    check(m.min >= lo - 1e-6 && m.max <= hi + 1e-6 && m.min < lo + 0.01 * sd &&
              m.max > hi - 0.01 * sd,
          "%s: values within [%.4f, %.4f] (2 stddev), reaching both ends: [%.4f, %.4f]", what, lo,
          hi, m.min, m.max);
    const double own = 2 * 0.87962566103423978, inside = erf(2 / sqrt(2.0));
    const double share = (inside - erf(own / sqrt(2.0))) / inside;
    check(fabs(m.beyond2 - share) < 0.002,
          "%s: %.4f beyond 2 of its own stddev (a truncated normal's %.4f)", what, m.beyond2,
          share);
  } else {
    check(fabs(m.beyond2 - 0.0455) < 0.002, "%s: %.4f beyond 2 stddev (a normal's 0.0455)", what,
          m.beyond2);
  }
}

static void check_uniform(const char *what, const clt_init *init, double lo, double hi, float *v) {
  const moments m = draw(init, 7, v);
  const double w = hi - lo;
  check(close_moments(&m, (lo + hi) / 2, w * w / 12),
        "%s: mean %.5f (formula %.5f), variance %.6g (formula %.6g)", what, m.mean, (lo + hi) / 2,
        m.var, w * w / 12);
  check(m.min >= lo - 1e-6 && m.max <= hi + 1e-6 && m.min < lo + 1e-3 * w && m.max > hi - 1e-3 * w,
        "%s: values within [%.5f, %.5f], reaching both ends: [%.5f, %.5f]", what, lo, hi, m.min,
        m.max);
}

/* Whether a and b hold the same N values. */
static int same(const float *a, const float *b) {
  for (size_t i = 0; i < N; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

int main(void) {
  float *v = malloc(N * sizeof *v), *w = malloc(N * sizeof *w);
  if (!v || !w) {
    fprintf(stderr, "out of memory\n");
    free(v);
    free(w);
    return 1;
  }
  double fi, fo;
  clt_init_fans(4, dims, &fi, &fo);
  check(fi == 2304 && fo == 4608, "a 3x3x256x512 kernel's fans: %g and %g (2304, 4608)", fi, fo);
  clt_init_fans(2, (const int[]){100, 10}, &fi, &fo);
  check(fi == 100 && fo == 10, "a 100x10 matrix's fans: %g and %g", fi, fo);
  clt_init_fans(1, (const int[]){7}, &fi, &fo);
  check(fi == 7 && fo == 7, "a vector of 7's fans: %g and %g", fi, fo);

  const clt_init constant = {CLT_INIT_CONSTANT, 0.25, 0, 0, 0};
  moments m = draw(&constant, 7, v);
  check(m.min == 0.25f && m.max == 0.25f, "Constant(0.25): every value 0.25");

  check_normal("RandomNormal(0.5, 2)", &(clt_init){CLT_INIT_NORMAL, 0.5, 2, 0, 0}, 0.5, 2, 0, v);
  check_normal("TruncatedNormal(0.1, 0.5)", &(clt_init){CLT_INIT_TRUNCATED, 0.1, 0.5, 0, 0}, 0.1,
               0.5, 1, v);
  check_uniform("RandomUniform(-0.3, 0.7)", &(clt_init){CLT_INIT_UNIFORM, -0.3, 0.7, 0, 0}, -0.3,
                0.7, v);

  /* VarianceScaling in every mode and distribution: a variance of scale / fan. */
  static const char *const modes[] = {"fan_in", "fan_out", "fan_avg"};
  static const char *const dists[] = {"truncated_normal", "untruncated_normal", "uniform"};
  const double fans[] = {2304, 4608, 3456};
  for (int mode = 0; mode < 3; mode++) {
    for (int dist = 0; dist < 3; dist++) {
      const double scale = 2.0 / (1 + mode);
      const clt_init vs = {CLT_INIT_SCALING, scale, 0, mode, dist};
      char what[96];
      snprintf(what, sizeof what, "VarianceScaling(%g, %s, %s)", scale, modes[mode], dists[dist]);
      const double var = scale / fans[mode];
      if (dist == CLT_DIST_UNIFORM) {
        check_uniform(what, &vs, -sqrt(3 * var), sqrt(3 * var), v);
      } else {
        /* Keras widens the truncated normal so that its variance is scale / fan */
        const double sd = dist == CLT_DIST_TRUNCATED ? sqrt(var) / 0.87962566103423978 : sqrt(var);
        check_normal(what, &vs, 0, sd, dist == CLT_DIST_TRUNCATED, v);
        m = draw(&vs, 7, v);
        check(fabs(m.var - var) <= 0.015 * var, "%s: variance %.6g is scale / fan %.6g", what,
              m.var, var);
      }
    }
  }
  /* A fan below 1 counts as 1. */
  const clt_init tiny = {CLT_INIT_SCALING, 1, 0, CLT_FAN_IN, CLT_DIST_UNIFORM};
  check(fabs(clt_init_scaling_width(&tiny, 0.5, 4) - sqrt(3.0)) < 1e-12,
        "VarianceScaling on a fan of 0.5 scales by 1");

  /* Repeatable from the seed alone. */
  const clt_init he = {CLT_INIT_SCALING, 2, 0, CLT_FAN_IN, CLT_DIST_TRUNCATED};
  draw(&he, 11, v);
  draw(&he, 11, w);
  check(same(v, w), "the same seed draws the same values");
  draw(&he, 12, w);
  check(!same(v, w), "another seed draws others");
  free(v);
  free(w);
  return check_summary();
}
