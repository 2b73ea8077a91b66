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

/* Max pooling, window pool x pool, given stride, no padding ("valid", floor):
 * OH = (H - pool) / stride + 1. Rows/columns past the last window are ignored. */
void ref_maxpool_forward(const double *x, int B, int H, int W, int C, int pool, int stride, int OH,
                         int OW, double *y);

/* Gradient goes to the first maximum of each window in raster order (ky, then kx);
 * inputs no window selects get 0. Windows may overlap (stride < pool): contributions add. */
void ref_maxpool_backward(const double *x, int B, int H, int W, int C, int pool, int stride, int OH,
                          int OW, const double *dy, double *dx);

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

#endif
