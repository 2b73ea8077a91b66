/* What the three sources of test_layers2 share: the device tolerances, the input
 * and layer helpers, and the tests of test_layers2_ref.c and test_layers2_pool.c
 * that main (test_layers2.c) runs. */
#ifndef CLT_TEST_LAYERS2_H
#define CLT_TEST_LAYERS2_H

#include <stddef.h>

#include "layer.h"

/* Device tolerances, relative to the tensor's largest |ref|. An indexing, padding,
 * tie or statistics bug gives errors of O(1) (a one-pass variance of the mean-100
 * case errs by ~1e-2).
 * - reductions over rows in float (batch norm, average pooling) and the float
 *   arithmetic after them, incl. dx's cancellation: TOL_REDUCE.
 * - elementwise sums and max pooling (exact up to the rounding of one add): TOL_EXACT. */
#define TOL_REDUCE 1e-4
#define TOL_EXACT 1e-6

/* n distinct values 2^-8 apart, none 0 (which would tie with the padding), shuffled. */
void distinct_fill(double *p, size_t n);

/* A fresh layer from its description entry ("name=Kind(args)"); fatal if refused. */
clt_layer new_layer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* test_layers2_ref.c: the references against finite differences (part 1). */
void test_references(void);

/* test_layers2_pool.c: max pooling with padding, and Conv2D + MaxPooling2D as the
 * plan runs them. */
void test_ppool_all(void);
void test_conv_pool_all(void);
void test_conv_pool_conditions(void);

/* test_layers2_bn.c: BatchNormalization's backward with the ReLU's mask from x and
 * with its input's bias gradient summed in the dx pass. */
void test_bn_backward_fusions(void);

#endif
