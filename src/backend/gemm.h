/* Row-major SGEMM and convolutions on a replica, run by its backend
 * (backend.h): the cpu backend's float16-tiled kernels of cl/gemm.cl, the gpu
 * backend's CLBlast. Every product's kernels and scratch are reserved once, at
 * set-up, so nothing is compiled or allocated inside the step. */
#ifndef CLT_GEMM_H
#define CLT_GEMM_H

#include "replica.h"

typedef struct clt_gemm_shape {
  int trans_a, trans_b; /* 0 or 1 */
  size_t m, n, k;
  size_t lda, ldb, ldc;
} clt_gemm_shape;

/* Builds shape s's kernels and grows the replica's GEMM scratch to what s needs
 * (CLBlast's temporaries, a transposed operand, split-K partial sums). Call for
 * every shape at its largest batch before the first clt_gemm. */
int clt_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e);

/* C[m x n] = alpha * op(A) op(B) + beta * C, offsets in floats. m or n of 0:
 * nothing is done; k of 0 is an error. The cpu backend takes alpha 1 with
 * beta 0, or beta 1 without A^T (an input gradient added into one that
 * exists: clt_layer_io.dx_accumulate). */
int clt_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off, cl_mem b,
             size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e);

/* A strided batch: `count` products of one shape, product i's A, B and C at
 * their offsets + i times a_stride, b_stride and c_stride floats. */
typedef struct clt_gemm_batch {
  size_t count;
  size_t a_stride, b_stride, c_stride;
} clt_gemm_batch;

/* clt_gemm_reserve for `count` products of shape s run as one batch (scratch
 * for each one's transposed operand; CLBlast's batched program). */
int clt_gemm_batched_reserve(clt_replica *r, const clt_gemm_shape *s, size_t count, clt_err *e);

/* C[i] = alpha * op(A[i]) op(B[i]) + beta * C[i] for i < bt->count, as clt_gemm
 * (same alpha and beta rules) but in one launch where the backend can: each
 * product's sums in the same fixed order. A count of 0 does nothing. */
int clt_gemm_batched(clt_replica *r, const clt_gemm_shape *s, const clt_gemm_batch *bt, float alpha,
                     cl_mem a, size_t a_off, cl_mem b, size_t b_off, float beta, cl_mem c,
                     size_t c_off, clt_err *e);

/* C = op(A) op(B) + bias (bias[bias_offset + n] added to every row), then ReLU
 * when relu: a layer's forward product. */
int clt_gemm_bias_act(clt_replica *r, const clt_gemm_shape *s, cl_mem a, size_t a_off, cl_mem b,
                      size_t b_off, cl_mem c, size_t c_off, cl_mem bias, size_t bias_offset,
                      int relu, clt_err *e);

/* A convolution's geometry: `batch` NHWC images of h x w x c, kh x kw taps with
 * stride `stride` and pad_top/pad_left zeros before the first row/column, oh x
 * ow outputs. */
typedef struct clt_conv_geom {
  int batch, h, w, c, kh, kw, stride, pad_top, pad_left, oh, ow;
} clt_conv_geom;

/* A pass's algorithm: an im2col matrix, a GEMM and, for dx, col2im; a GEMM
 * over the image in place (it reads the image as its column matrix:
 * clt_conv_forward, clt_conv_dw, clt_conv_dx); or Winograd F(2x2,3x3) or
 * F(4x4,3x3) (clt_winograd_*; the value is the tile's side m). */
enum { CLT_CONV_IM2COL = 0, CLT_CONV_IN_PLACE = 1, CLT_CONV_WINOGRAD2 = 2, CLT_CONV_WINOGRAD4 = 4 };

/* Each pass's algorithm (CLT_CONV_*): plain values, so that a choice per layer
 * can be made by whoever knows better (a tuner). */
typedef struct clt_conv_algos {
  int forward, weight_grad, input_grad;
} clt_conv_algos;

/* What r's backend chooses for g's convolution with `filters` outputs: with
 * r->winograd set and a backend that runs them, Winograd for every pass of a
 * 3x3 stride-1 convolution. */
clt_conv_algos clt_conv_algos_for(const clt_replica *r, const clt_conv_geom *g, int filters);

/* A convolution's passes, as clt_conv_choice.algo indexes them. */
enum { CLT_CONV_PASS_FORWARD = 0, CLT_CONV_PASS_WEIGHT_GRAD = 1, CLT_CONV_PASS_INPUT_GRAD = 2 };
#define CLT_CONV_PASSES 3
#define CLT_CONV_MAX_CANDIDATES 4

/* "fwd", "dw", "dx": a pass's name in tuning keys and records. */
const char *clt_conv_pass_name(int pass);

/* "im2col", "in_place", "winograd2", "winograd4" (NULL for another value), and
 * back (-1 for an unknown name). */
const char *clt_conv_algo_name(int algo);
int clt_conv_algo_parse(const char *name);

/* The algorithms r can run pass `pass` of g's convolution with (im2col first,
 * then the in-place product where the backend's default takes it, then
 * Winograd's tiles where the geometry fits and the backend runs them), at most
 * CLT_CONV_MAX_CANDIDATES; returns how many. */
int clt_conv_candidates(const clt_replica *r, const clt_conv_geom *g, int filters, int pass,
                        int *out);

/* Records `algo` for pass `pass` of layer `layer` on r (-1: back to the
 * default). An algorithm r cannot run for g, or a full table, is an error. */
int clt_conv_choose(clt_replica *r, const char *layer, const clt_conv_geom *g, int filters,
                    int pass, int algo, clt_err *e);

/* What layer `layer` runs on r: clt_conv_algos_for, with the passes chosen for
 * the layer (clt_conv_choose) in place of the default, unless $CLTRAIN_WINOGRAD
 * forces every pass of a 3x3 stride-1 layer. */
clt_conv_algos clt_conv_algos_layer(const clt_replica *r, const char *layer, const clt_conv_geom *g,
                                    int filters);

/* Builds the in-place forward's and weight gradient's kernels and grows the
 * GEMM scratch, for g.batch examples at most (the largest slice). */
int clt_conv_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e);

/* y[b*oh*ow][filters] = conv(x) with the kernel w (HWIO: [kh*kw*c][filters] at
 * w_off), + bias[bias_off + n] (bias_off < 0: none), then ReLU when relu. */
int clt_conv_forward(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem w,
                     size_t w_off, cl_mem y, cl_mem bias, long bias_off, int relu, clt_err *e);

/* dw[kh*kw*c][filters] (at dw_off) = the kernel's gradient: col(x)^T * dy. */
int clt_conv_dw(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem x, cl_mem dy, cl_mem dw,
                size_t dw_off, clt_err *e);

/* Builds clt_conv_dx's kernels and grows the GEMM scratch to its flipped kernel. */
int clt_conv_dx_reserve(clt_replica *r, const clt_conv_geom *g, int filters, clt_err *e);

/* dx[b*h*w][c] = the input gradient: dy convolved with the flipped kernel (w at
 * w_off), with no column matrix. */
int clt_conv_dx(clt_replica *r, const clt_conv_geom *g, int filters, cl_mem dy, cl_mem w,
                size_t w_off, cl_mem dx, clt_err *e);

/* ---- Winograd F(m x m, 3x3) (winograd.c, cl/winograd.cl) ------------------------------
 * For 3x3 stride-1 convolutions, any padding: per (m+2)^2 positions of the
 * Winograd domain an independent product over the channels, all of a pass's
 * in one clt_gemm_batched. dx runs as the forward of dy with the kernel flipped and its
 * channels swapped; dW as the forward's transpose: the sum over tiles of the
 * transformed input times the transformed output gradient (a GEMM with A^T),
 * then G^T . G back to 3x3. Sums in a fixed order, as everywhere. */

/* $CLTRAIN_WINOGRAD: 0 (unset, empty or "off"), 2 or 4; -1 for anything else. */
int clt_winograd_env(void);

/* Whether g's convolution can run as Winograd (3x3, stride 1). */
int clt_winograd_fits(const clt_conv_geom *g);

/* Scratch floats the passes of `a` that take Winograd tile m need (0: none). */
size_t clt_winograd_scratch(const clt_conv_geom *g, int filters, const clt_conv_algos *a);

/* Builds the kernels of the passes of `a` that take Winograd and reserves
 * their GEMMs, for g.batch examples at most. */
int clt_winograd_reserve(clt_replica *r, const clt_conv_geom *g, int filters,
                         const clt_conv_algos *a, clt_err *e);

/* y = conv(x) + bias[bias_off + n] (bias_off < 0: none), then ReLU when relu;
 * tile m; scratch holds clt_winograd_scratch's floats. */
int clt_winograd_forward(clt_replica *r, const clt_conv_geom *g, int filters, int m, cl_mem x,
                         cl_mem w, size_t w_off, cl_mem y, cl_mem bias, long bias_off, int relu,
                         cl_mem scratch, clt_err *e);

/* dx = the input gradient (written, not added). */
int clt_winograd_dx(clt_replica *r, const clt_conv_geom *g, int filters, int m, cl_mem dy, cl_mem w,
                    size_t w_off, cl_mem dx, cl_mem scratch, clt_err *e);

/* dw (HWIO at dw_off) = the kernel's gradient. */
int clt_winograd_dw(clt_replica *r, const clt_conv_geom *g, int filters, int m, cl_mem x, cl_mem dy,
                    cl_mem dw, size_t dw_off, cl_mem scratch, clt_err *e);

#endif
