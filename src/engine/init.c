#include "init.h"

#include <math.h>

void clt_init_fans(int rank, const int *dims, double *fan_in, double *fan_out) {
  if (rank < 1) {
    *fan_in = *fan_out = 1;
  } else if (rank == 1) {
    *fan_in = *fan_out = dims[0];
  } else if (rank == 2) {
    *fan_in = dims[0];
    *fan_out = dims[1];
  } else {
    double receptive = 1;
    for (int i = 0; i < rank - 2; i++) receptive *= dims[i];
    *fan_in = dims[rank - 2] * receptive;
    *fan_out = dims[rank - 1] * receptive;
  }
}

/* Uniform in (0, 1] with 53 random bits. */
static double uniform53(clt_rng *rng) {
  return ((double)(clt_rng_next(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* A standard normal value (Box-Muller, one value per pair of uniforms). */
static double normal(clt_rng *rng) {
  const double r = sqrt(-2.0 * log(uniform53(rng)));
  return r * cos(6.283185307179586 * uniform53(rng));
}

/* A standard normal value redrawn until within 2 (TensorFlow's truncated_normal). */
static double truncated(clt_rng *rng) {
  for (;;) {
    const double v = normal(rng);
    if (fabs(v) <= 2.0) return v;
  }
}

double clt_init_scaling_width(const clt_init *init, double fan_in, double fan_out) {
  const double fan = init->mode == CLT_FAN_IN    ? fan_in
                     : init->mode == CLT_FAN_OUT ? fan_out
                                                 : (fan_in + fan_out) / 2.0;
  const double scale = init->a / (fan > 1.0 ? fan : 1.0);
  /* 0.8796...: the standard deviation of a standard normal truncated at 2 */
  if (init->distribution == CLT_DIST_TRUNCATED) return sqrt(scale) / 0.87962566103423978;
  if (init->distribution == CLT_DIST_NORMAL) return sqrt(scale);
  return sqrt(3.0 * scale);
}

void clt_init_fill(const clt_init *init, int rank, const int *dims, clt_rng *rng, float *out,
                   size_t n) {
  double fan_in, fan_out;
  clt_init_fans(rank, dims, &fan_in, &fan_out);
  switch (init->kind) {
    case CLT_INIT_CONSTANT:
      for (size_t j = 0; j < n; j++) out[j] = (float)init->a;
      return;
    case CLT_INIT_NORMAL:
      for (size_t j = 0; j < n; j++) out[j] = (float)(init->a + init->b * normal(rng));
      return;
    case CLT_INIT_TRUNCATED:
      for (size_t j = 0; j < n; j++) out[j] = (float)(init->a + init->b * truncated(rng));
      return;
    case CLT_INIT_UNIFORM:
      for (size_t j = 0; j < n; j++)
        out[j] = (float)(init->a + (init->b - init->a) * clt_rng_uniform(rng));
      return;
    case CLT_INIT_SCALING: {
      const double w = clt_init_scaling_width(init, fan_in, fan_out);
      for (size_t j = 0; j < n; j++) {
        out[j] = (float)(init->distribution == CLT_DIST_TRUNCATED ? w * truncated(rng)
                         : init->distribution == CLT_DIST_NORMAL
                             ? w * normal(rng)
                             : w * (2.0 * clt_rng_uniform(rng) - 1.0));
      }
      return;
    }
    default: { /* Glorot uniform, as the kinds' default */
      const double limit = sqrt(6.0 / (fan_in + fan_out));
      for (size_t j = 0; j < n; j++) out[j] = (float)((2.0 * clt_rng_uniform(rng) - 1.0) * limit);
      return;
    }
  }
}
