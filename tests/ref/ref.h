/* Plain-C double-precision references of every kernel (llm.c style).
 *
 * They define what the OpenCL kernels must compute; tests compare each kernel
 * against them and check their backward passes by central finite differences.
 * Layouts match the device and Keras: activations NHWC, conv kernels HWIO
 * ([KH][KW][C][CO]), dense kernels [IN][OUT], all row-major. */
#ifndef CLT_REF_H
#define CLT_REF_H

#include <stddef.h>

/* y[b,oy,ox,co] = bias[co] + sum_{ky,kx,c} x[b, oy*stride+ky-pad_top, ox*stride+kx-pad_left, c] *
 * w[ky,kx,c,co] (out-of-range input positions read as 0). OH/OW are given by the caller. */
void ref_conv2d_forward(const double *x, int B, int H, int W, int C, const double *w,
                        const double *bias, int KH, int KW, int CO, int stride, int pad_top,
                        int pad_left, int OH, int OW, double *y);

/* Gradients of the above given dy (B,OH,OW,CO). dx may be NULL (first layer). */
void ref_conv2d_backward(const double *x, int B, int H, int W, int C, const double *w, int KH,
                         int KW, int CO, int stride, int pad_top, int pad_left, int OH, int OW,
                         const double *dy, double *dx, double *dw, double *dbias);

/* Depthwise convolution, depth multiplier M: output channel co = c*M + m of
 * y[b,oy,ox,co] = bias[co] + sum_{ky,kx} x[b, oy*stride+ky-pad_top, ox*stride+kx-pad_left, c]
 * * w[ky,kx,c,m] (w is Keras' (KH, KW, C, M), out-of-range positions read as 0).
 * bias, dbias and dx may be NULL. */
void ref_depthwise_forward(const double *x, int B, int H, int W, int C, int M, const double *w,
                           const double *bias, int KH, int KW, int stride, int pad_top,
                           int pad_left, int OH, int OW, double *y);
void ref_depthwise_backward(const double *x, int B, int H, int W, int C, int M, const double *w,
                            int KH, int KW, int stride, int pad_top, int pad_left, int OH, int OW,
                            const double *dy, double *dx, double *dw, double *dbias);

/* Max pooling, window pool x pool, given stride, no padding ("valid", floor):
 * OH = (H - pool) / stride + 1. Rows/columns past the last window are ignored. */
void ref_maxpool_forward(const double *x, int B, int H, int W, int C, int pool, int stride, int OH,
                         int OW, double *y);

/* Gradient goes to the first maximum of each window in raster order (ky, then kx);
 * inputs no window selects get 0. Windows may overlap (stride < pool): contributions add. */
void ref_maxpool_backward(const double *x, int B, int H, int W, int C, int pool, int stride, int OH,
                          int OW, const double *dy, double *dx);

/* Conv2D (stride 1, no padding) + ReLU + MaxPooling2D(2,s2) as one layer, as
 * cl/conv2d.cl's conv_pool_* compute it: y[b,py,px,co] = max over the 2x2 window at
 * (2py, 2px) of relu(conv + bias), PH = (H-KH+1)/2, PW = (W-KW+1)/2 (floor). bias
 * may be NULL (none). backward: dw and dbias (dbias may be NULL) given the pooled
 * dy; the window's gradient goes to its first maximum (raster order) of the
 * pre-activations when that maximum is > 0. */
void ref_conv_pool_forward(const double *x, int B, int H, int W, int C, const double *w,
                           const double *bias, int KH, int KW, int CO, int PH, int PW, double *y);
void ref_conv_pool_backward(const double *x, int B, int H, int W, int C, const double *w,
                            const double *bias, int KH, int KW, int CO, int PH, int PW,
                            const double *dy, double *dw, double *dbias);

void ref_relu_forward(const double *x, size_t n, double *y);
/* dx = dy where y > 0, else 0 (y is the ReLU output). */
void ref_relu_backward(const double *y, const double *dy, size_t n, double *dx);

/* y[b,o] = bias[o] + sum_i x[b,i] * w[i,o] */
void ref_dense_forward(const double *x, int B, int IN, const double *w, const double *bias, int OUT,
                       double *y);
/* dx may be NULL. */
void ref_dense_backward(const double *x, int B, int IN, const double *w, int OUT, const double *dy,
                        double *dx, double *dw, double *dbias);

/* Softmax cross-entropy from integer labels, per example:
 *   loss[i] = logsumexp(z[i,:]) - z[i,label[i]]
 *   dz[i,k] = (softmax(z[i,:])[k] - (k == label[i])) * scale
 *   correct[i] = (index of the first maximum of z[i,:]) == label[i]
 * Any of loss, dz, correct may be NULL. */
void ref_softmax_xent(const double *z, const int *labels, int B, int K, double scale, double *loss,
                      double *dz, int *correct);

/* One Keras Adam step (step counts from 1):
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
 *   p -= lr * sqrt(1-b2^step) / (1-b1^step) * m / (sqrt(v) + eps) */
void ref_adam(double *p, const double *g, double *m, double *v, size_t n, double lr, double b1,
              double b2, double eps, long step);

/* The reference CNN family (fmnist-cnn is H=W=28, C=1, c1=64, c2=80, dense=64, classes=10):
 * Conv2D(c1,3x3,valid,relu) -> MaxPool(2,2) -> Conv2D(c2,3x3,valid,relu) -> MaxPool(2,2)
 * -> Flatten (NHWC order) -> Dense(dense,relu) -> Dense(classes) -> softmax cross-entropy. */
typedef struct ref_cnn_shape {
  int H, W, C, c1, c2, dense, classes;
} ref_cnn_shape;

/* Parameters packed in Keras get_weights() order: conv2d/kernel (3,3,C,c1), conv2d/bias,
 * conv2d_1/kernel (3,3,c1,c2), conv2d_1/bias, dense/kernel (F,dense) with
 * F = P2H*P2W*c2, dense/bias, dense_1/kernel (dense,classes), dense_1/bias. */
size_t ref_cnn_param_count(const ref_cnn_shape *s);

/* Returns scale * sum_i loss_i over the B examples x (B,H,W,C) with labels; if grad is not
 * NULL fills it (same packed layout) with the gradient of that value. If correct is not
 * NULL, stores the number of correctly classified examples. */
double ref_cnn_loss_grad(const ref_cnn_shape *s, const double *params, const double *x,
                         const int *labels, int B, double scale, double *grad, int *correct);

/* ---- the kinds of Keras model files: Activation, Rescaling, Dropout, Concatenate,
 * AveragePooling2D, GlobalMaxPooling2D ------------------------------------------------ */

#include <stdint.h>

/* y = min(max(x, 0), hi) (hi may be INFINITY); dx = dy where 0 < y < hi, else 0. */
void ref_relu_clip_forward(const double *x, size_t n, double hi, double *y);
void ref_relu_clip_backward(const double *y, const double *dy, size_t n, double hi, double *dx);
/* y = 1 / (1 + exp(-x)); dx = dy * y * (1 - y). */
void ref_sigmoid_forward(const double *x, size_t n, double *y);
void ref_sigmoid_backward(const double *y, const double *dy, size_t n, double *dx);
/* y = tanh(x); dx = dy * (1 - y^2). */
void ref_tanh_forward(const double *x, size_t n, double *y);
void ref_tanh_backward(const double *y, const double *dy, size_t n, double *dx);
/* Per row of C values: y = exp(x - max) / sum exp(x - max);
 * dx = y * (dy - sum_c dy[c] * y[c]). */
void ref_softmax_forward(const double *x, size_t rows, int C, double *y);
void ref_softmax_backward(const double *y, const double *dy, size_t rows, int C, double *dx);
/* y = x * a + b. */
void ref_scale_shift(const double *x, size_t n, double a, double b, double *y);

/* Dropout's counter-based draw: element i of global example `example` is kept when
 * the high 32 bits of ref_dropout_hash(key, example, i) are >= rate * 2^32 (see
 * cl/activation.cl's dropout_apply, which computes the same bits). */
uint64_t ref_dropout_hash(uint64_t key, uint64_t example, uint64_t i);
uint32_t ref_dropout_threshold(double rate);
/* y = x / (1 - rate) where kept, else 0, over B examples of n values each, example b
 * being global example example0 + b. */
void ref_dropout(const double *x, int B, size_t n, uint64_t key, long example0, double rate,
                 double *y);

/* Along the channels: y[r] = (x[r, 0..C1), x2[r, 0..C2)); the backward splits dy (dx
 * or dx2 may be NULL). */
void ref_concat_forward(const double *x, const double *x2, size_t rows, int C1, int C2, double *y);
void ref_concat_backward(const double *dy, size_t rows, int C1, int C2, double *dx, double *dx2);

/* Average pooling, window PH x PW, strides SH, SW, window (oy, ox) starting at input
 * row oy*SH - PT and column ox*SW - PL: the mean over the window's cells inside the
 * image (TensorFlow's 'same' leaves padding out of the count). */
void ref_avgpool_forward(const double *x, int B, int H, int W, int C, int PH, int PW, int SH,
                         int SW, int PT, int PL, int OH, int OW, double *y);
void ref_avgpool_backward(const double *dy, int B, int H, int W, int C, int PH, int PW, int SH,
                          int SW, int PT, int PL, int OH, int OW, double *dx);

/* y[b, c] = max over the HW positions of x[b, p, c]; backward: dy[b, c] to the first
 * maximum (strict '>' in position order), 0 elsewhere. */
void ref_global_maxpool_forward(const double *x, int B, int HW, int C, double *y);
void ref_global_maxpool_backward(const double *x, const double *dy, int B, int HW, int C,
                                 double *dx);

#endif
