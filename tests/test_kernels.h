/* What the three sources of test_kernels share: the tolerances, and the tests of
 * test_kernels_direct.c and test_kernels_net.c that main (test_kernels.c) runs. */
#ifndef CLT_TEST_KERNELS_H
#define CLT_TEST_KERNELS_H

/* Tolerances (relative to the largest |ref| of the tensor). Observed errors on PoCL are
 * in brackets; an indexing, padding or tie-rule bug gives errors of O(1).
 * - GEMM paths (conv, dense): float sums of up to 2000 products [<= 1.3e-6].
 * - exp/log kernels (softmax cross-entropy, metrics): a few float roundings [<= 2e-7].
 * - copies and max (pooling, gather): exact up to the float rounding of the input
 *   [<= 1e-7; the pooling gradient of overlapping windows adds two floats].
 * - the whole model: float accumulation through four layers [<= 2.2e-6]; the margin
 *   leaves room for a ReLU or max-pool choice within rounding of a tie flipping on
 *   another device. */
#define TOL_GEMM 1e-4
#define TOL_ELEMWISE 1e-5
#define TOL_EXACT 1e-6
#define TOL_MODEL 1e-3
/* Adam runs in float with beta2 = 0.999f, whose 1 - beta2 is 1.3e-5 off 0.001: v (and,
 * through sqrt(v), the step) carries that relative error, as TensorFlow's float32 Adam
 * does. A wrong bias correction or eps placement gives errors of 1e-1 to O(1). */
#define TOL_ADAM 1e-4

/* test_kernels_direct.c: clt_gemm, and the loss, metrics, Adam, gather and conv_pool
 * kernels launched directly. */
void test_gemm_accumulate(int M, int N, int K);
void test_gemm_at(int M, int N, int K, int reserve_k);
void test_kernels_all(void);

/* test_kernels_net.c: the whole fmnist-cnn net, and the programs a replica builds. */
void test_model(void);
void test_build_failure(void);
void test_joint_program(void);

#endif
