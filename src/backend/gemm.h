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

/* A convolution's geometry: `batch` NHWC images of h x w x c, kh x kw taps with
 * stride `stride` and pad_top/pad_left zeros before the first row/column, oh x
 * ow outputs. */
typedef struct clt_conv_geom {
  int batch, h, w, c, kh, kw, stride, pad_top, pad_left, oh, ow;
} clt_conv_geom;

/* Whether r runs convolutions as GEMMs over the image in place (cl/gemm.cl's
 * conv16, conv16_dw: CPU devices), with no im2col matrix. */
int clt_conv_implicit(const clt_replica *r);

/* Builds g's kernels and grows the GEMM scratch for its weight gradient's split
 * K, for g.batch examples at most (the largest slice). */
int clt_conv_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e);

/* y[b*oh*ow][filters] = conv(x) with the kernel w (HWIO: [kh*kw*c][filters] at
 * w_off), + bias[bias_off + n] (bias_off < 0: none), then ReLU when relu. */
int clt_conv_forward(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem w,
                     size_t w_off, cl_mem y, cl_mem bias, long bias_off, int relu, clt_err *e);

/* Whether dx of g's convolution runs as clt_conv_dx (CPU devices: stride 1, C a
 * multiple of 16, a kernel larger than 1x1). */
int clt_conv_dx_implicit(const clt_replica *r, const clt_conv_geom *g);

/* Builds clt_conv_dx's kernels and grows the GEMM scratch to its flipped kernel. */
int clt_conv_dx_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e);

/* dx[b*h*w][c] = the input gradient: dy convolved with the flipped kernel (w at
 * w_off), with no column matrix (see gemm.c). */
int clt_conv_dx(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem dy, cl_mem w,
                size_t w_off, cl_mem dx, clt_err *e);

/* dw[kh*kw*c][filters] (at dw_off) = the kernel's gradient: col(x)^T * dy. */
int clt_conv_dw(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem dy, cl_mem dw,
                size_t dw_off, clt_err *e);

#endif
