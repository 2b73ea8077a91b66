/* Plain-C double-precision references of the layers ResNet50 adds (see ref.h for the
 * conventions): BatchNormalization, Add, GlobalAveragePooling2D and max pooling with
 * zero padding. Activations are NHWC; batch normalization sees them as `rows` =
 * B*H*W rows of C channels and normalises each channel over all rows. */
#ifndef CLT_REF_RESNET_H
#define CLT_REF_RESNET_H

#include <stddef.h>

/* gamma may be NULL (all 1, scale=False), beta NULL (all 0, center=False), and so may
 * dgamma, dbeta below (not written).
 *
 * Training mode (batch statistics), per channel c over the n = rows rows:
 *   mean[c] = sum_r x[r,c] / n;  var[c] = sum_r (x[r,c] - mean[c])^2 / n (biased)
 *   y[r,c]  = gamma[c] * (x[r,c] - mean[c]) / sqrt(var[c] + eps) + beta[c], then ReLU if relu
 * var_unbiased[c] = var[c] * n / (n - 1) (var[c] when n == 1): what TensorFlow's fused
 * batch norm feeds the moving variance. mean, var, var_unbiased may each be NULL. */
void ref_batchnorm_forward_train(const double *x, int rows, int C, const double *gamma,
                                 const double *beta, double eps, int relu, double *y, double *mean,
                                 double *var, double *var_unbiased);

/* Inference mode: y = gamma * (x - moving_mean) / sqrt(moving_var + eps) + beta (+ReLU). */
void ref_batchnorm_forward_infer(const double *x, int rows, int C, const double *gamma,
                                 const double *beta, const double *moving_mean,
                                 const double *moving_var, double eps, int relu, double *y);

/* Gradients of the training-mode forward (the batch statistics depend on x) given dy:
 * with xhat = (x - mean) / sqrt(var + eps) and g = dy masked by (y > 0) if relu,
 *   dbeta = sum_r g;  dgamma = sum_r g * xhat
 *   dx = gamma / sqrt(var + eps) / n * (n * g - dbeta - xhat * dgamma)
 * The statistics are recomputed from x. dx may be NULL. */
void ref_batchnorm_backward(const double *x, int rows, int C, const double *gamma,
                            const double *beta, double eps, int relu, const double *dy, double *dx,
                            double *dgamma, double *dbeta);

/* y = x + x2 over n elements, then ReLU if relu. */
void ref_add(const double *x, const double *x2, size_t n, int relu, double *y);
/* dx = dx2 = dy masked by (y > 0) if relu (y is the output); either may be NULL. */
void ref_add_backward(const double *y, const double *dy, size_t n, int relu, double *dx,
                      double *dx2);

/* y[b,c] = mean over the H*W positions of x[b,h,w,c]. */
void ref_gap_forward(const double *x, int B, int H, int W, int C, double *y);
/* dx[b,h,w,c] = dy[b,c] / (H*W). */
void ref_gap_backward(const double *dy, int B, int H, int W, int C, double *dx);

/* Max pooling over x zero-padded by `pad` on every side (ZeroPadding2D(pad) then
 * MaxPooling2D(pool, stride), valid): padded positions hold 0 and take part in the
 * max. OH = (H + 2*pad - pool) / stride + 1, likewise OW. */
void ref_maxpool_pad_forward(const double *x, int B, int H, int W, int C, int pool, int stride,
                             int pad, int OH, int OW, double *y);
/* Each window's gradient goes to its first maximum in raster order of the padded
 * window, and is dropped when that is a padded position; overlapping windows add. */
void ref_maxpool_pad_backward(const double *x, int B, int H, int W, int C, int pool, int stride,
                              int pad, int OH, int OW, const double *dy, double *dx);

/* The general case: window PH x PW, strides SH x SW, PT rows and PL columns of padding
 * before the input (after it, what OH and OW reach). zero_pad: the padding holds 0
 * and takes part (a folded ZeroPadding2D, as above); else it never wins
 * (TensorFlow's 'same'). The backward's rule is the one above. */
void ref_maxpool2d_forward(const double *x, int B, int H, int W, int C, int PH, int PW, int SH,
                           int SW, int PT, int PL, int zero_pad, int OH, int OW, double *y);
void ref_maxpool2d_backward(const double *x, int B, int H, int W, int C, int PH, int PW, int SH,
                            int SW, int PT, int PL, int zero_pad, int OH, int OW, const double *dy,
                            double *dx);

#endif
