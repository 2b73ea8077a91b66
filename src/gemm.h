/* Row-major SGEMM on a replica: on GPUs CLBlast, with a scratch buffer reserved
 * once (its plain entry point allocates temporaries on every call); on CPU
 * devices cl/gemm.cl's explicitly vectorised kernels, tiled for the device's
 * vector registers, for every shape. */
#ifndef CLT_GEMM_H
#define CLT_GEMM_H

#include "replica.h"

typedef struct clt_gemm_shape {
  int trans_a, trans_b; /* 0 or 1 */
  size_t m, n, k;
  size_t lda, ldb, ldc;
} clt_gemm_shape;

/* Builds shape s's kernels and grows the replica's GEMM scratch to what s needs
 * (CLBlast's temporaries, a transposed B, split-K partial sums). Call for every
 * shape at its largest batch before the first clt_gemm. */
int clt_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e);

/* C[m x n] = alpha * op(A) op(B) + beta * C, offsets in floats. m, n or k of 0:
 * C is scaled by beta (k = 0) or nothing is done (m or n = 0). */
int clt_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off, cl_mem b,
             size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e);

/* C = op(A) op(B) + bias (bias[bias_offset + n] added to every row), then ReLU
 * when relu: a layer's forward product. Fused into the GEMM where cltrain's own
 * kernel runs; otherwise a CLBlast GEMM and cl/conv.cl's bias_act. */
int clt_gemm_bias_act(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                      size_t b_off, cl_mem c, size_t c_off, cl_mem bias, size_t bias_offset,
                      int relu, clt_err *e);

#endif
