/* Keras' initializers (clt_init, layer.h): the values a parameter starts from,
 * drawn from a seeded generator, so they depend on the seed alone. */
#ifndef CLT_INIT_H
#define CLT_INIT_H

#include <stddef.h>

#include "layer.h"
#include "rng.h"

/* Keras' fans of a parameter of shape dims[0 .. rank) (compute_fans): a vector's
 * length both; a matrix's rows and columns; a kernel's (..., in, out) in and out
 * channels times the product of the leading (receptive field) dimensions. */
void clt_init_fans(int rank, const int *dims, double *fan_in, double *fan_out);

/* Fills out[0 .. n) as `init` says for a parameter of shape dims[0 .. rank),
 * drawing from rng (CLT_INIT_DEFAULT: Glorot uniform on the shape's fans). */
void clt_init_fill(const clt_init *init, int rank, const int *dims, clt_rng *rng, float *out,
                   size_t n);

/* What VarianceScaling draws from for a parameter of those fans: the standard
 * deviation of its normal (truncated at 2 of them where truncated), or the
 * bound of its uniform. */
double clt_init_scaling_width(const clt_init *init, double fan_in, double fan_out);

#endif
