/* Plain-C double-precision references (see ref.h). Written for obviousness, not
 * speed: each function is the loop nest of the formula in its header comment. */
#include "ref.h"

#include <math.h>
#include <stdlib.h>

/* Flat index of element (b, y, x, c) of an NHWC tensor of shape (B, H, W, C).
 * size_t arithmetic so that large batches cannot overflow int. */
static size_t nhwc(int b, int y, int x, int c, int H, int W, int C) {
  return (((size_t)b * H + y) * W + x) * C + c;
}

/* Flat index of w[ky, kx, c, co] in an HWIO kernel of shape (KH, KW, C, CO). */
static size_t hwio(int ky, int kx, int c, int co, int KW, int C, int CO) {
  return (((size_t)ky * KW + kx) * C + c) * CO + co;
}

static void zero(double *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = 0.0;
}

/* ---- convolution ------------------------------------------------------------------- */

void ref_conv2d_forward(const double *x, int B, int H, int W, int C, const double *w,
                        const double *bias, int KH, int KW, int CO, int stride, int pad_top,
                        int pad_left, int OH, int OW, double *y) {
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int co = 0; co < CO; co++) {
          double sum = bias[co];
          for (int ky = 0; ky < KH; ky++) {
            int iy = oy * stride + ky - pad_top;
            if (iy < 0 || iy >= H) continue; /* zero padding */
            for (int kx = 0; kx < KW; kx++) {
              int ix = ox * stride + kx - pad_left;
              if (ix < 0 || ix >= W) continue;
              for (int c = 0; c < C; c++)
                sum += x[nhwc(b, iy, ix, c, H, W, C)] * w[hwio(ky, kx, c, co, KW, C, CO)];
            }
          }
          y[nhwc(b, oy, ox, co, OH, OW, CO)] = sum;
        }
}

/* Each product x*w in the forward sum sends dy*w to dx and dy*x to dw; walking the
 * same loop nest as the forward makes the correspondence obvious. */
void ref_conv2d_backward(const double *x, int B, int H, int W, int C, const double *w, int KH,
                         int KW, int CO, int stride, int pad_top, int pad_left, int OH, int OW,
                         const double *dy, double *dx, double *dw, double *dbias) {
  if (dx) zero(dx, (size_t)B * H * W * C);
  zero(dw, (size_t)KH * KW * C * CO);
  zero(dbias, (size_t)CO);
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int co = 0; co < CO; co++) {
          double g = dy[nhwc(b, oy, ox, co, OH, OW, CO)];
          dbias[co] += g;
          for (int ky = 0; ky < KH; ky++) {
            int iy = oy * stride + ky - pad_top;
            if (iy < 0 || iy >= H) continue; /* padding has no gradient */
            for (int kx = 0; kx < KW; kx++) {
              int ix = ox * stride + kx - pad_left;
              if (ix < 0 || ix >= W) continue;
              for (int c = 0; c < C; c++) {
                size_t xi = nhwc(b, iy, ix, c, H, W, C);
                size_t wi = hwio(ky, kx, c, co, KW, C, CO);
                dw[wi] += x[xi] * g;
                if (dx) dx[xi] += w[wi] * g;
              }
            }
          }
        }
}

/* ---- depthwise convolution --------------------------------------------------------- */

void ref_depthwise_forward(const double *x, int B, int H, int W, int C, int M, const double *w,
                           const double *bias, int KH, int KW, int stride, int pad_top,
                           int pad_left, int OH, int OW, double *y) {
  const int CO = C * M;
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int c = 0; c < C; c++)
          for (int m = 0; m < M; m++) {
            const int co = c * M + m;
            double sum = bias ? bias[co] : 0.0;
            for (int ky = 0; ky < KH; ky++) {
              const int iy = oy * stride + ky - pad_top;
              if (iy < 0 || iy >= H) continue; /* zero padding */
              for (int kx = 0; kx < KW; kx++) {
                const int ix = ox * stride + kx - pad_left;
                if (ix < 0 || ix >= W) continue;
                sum += x[nhwc(b, iy, ix, c, H, W, C)] * w[((size_t)ky * KW + kx) * CO + co];
              }
            }
            y[nhwc(b, oy, ox, co, OH, OW, CO)] = sum;
          }
}

void ref_depthwise_backward(const double *x, int B, int H, int W, int C, int M, const double *w,
                            int KH, int KW, int stride, int pad_top, int pad_left, int OH, int OW,
                            const double *dy, double *dx, double *dw, double *dbias) {
  const int CO = C * M;
  if (dx) zero(dx, (size_t)B * H * W * C);
  zero(dw, (size_t)KH * KW * CO);
  if (dbias) zero(dbias, (size_t)CO);
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int co = 0; co < CO; co++) {
          const double g = dy[nhwc(b, oy, ox, co, OH, OW, CO)];
          if (dbias) dbias[co] += g;
          for (int ky = 0; ky < KH; ky++) {
            const int iy = oy * stride + ky - pad_top;
            if (iy < 0 || iy >= H) continue;
            for (int kx = 0; kx < KW; kx++) {
              const int ix = ox * stride + kx - pad_left;
              if (ix < 0 || ix >= W) continue;
              const size_t xi = nhwc(b, iy, ix, co / M, H, W, C);
              const size_t wi = ((size_t)ky * KW + kx) * CO + co;
              dw[wi] += x[xi] * g;
              if (dx) dx[xi] += w[wi] * g;
            }
          }
        }
}

/* ---- max pooling ------------------------------------------------------------------- */

void ref_maxpool_forward(const double *x, int B, int H, int W, int C, int pool, int stride, int OH,
                         int OW, double *y) {
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int c = 0; c < C; c++) {
          double m = -INFINITY;
          for (int ky = 0; ky < pool; ky++)
            for (int kx = 0; kx < pool; kx++) {
              double v = x[nhwc(b, oy * stride + ky, ox * stride + kx, c, H, W, C)];
              if (v > m) m = v;
            }
          y[nhwc(b, oy, ox, c, OH, OW, C)] = m;
        }
}

void ref_maxpool_backward(const double *x, int B, int H, int W, int C, int pool, int stride, int OH,
                          int OW, const double *dy, double *dx) {
  zero(dx, (size_t)B * H * W * C);
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int c = 0; c < C; c++) {
          /* Strict '>' in raster order keeps the first of equal maxima. */
          size_t best = nhwc(b, oy * stride, ox * stride, c, H, W, C);
          for (int ky = 0; ky < pool; ky++)
            for (int kx = 0; kx < pool; kx++) {
              size_t i = nhwc(b, oy * stride + ky, ox * stride + kx, c, H, W, C);
              if (x[i] > x[best]) best = i;
            }
          dx[best] += dy[nhwc(b, oy, ox, c, OH, OW, C)]; /* += : windows may overlap */
        }
}

/* ---- Conv2D + ReLU + 2x2 max pooling ------------------------------------------------ */

/* The pre-activations of window (b, py, px), channel co: z[q], q = dy*2 + dx. */
static void conv_pool_window(const double *x, int b, int py, int px, int co, int H, int W, int C,
                             const double *w, const double *bias, int KH, int KW, int CO,
                             double z[4]) {
  for (int q = 0; q < 4; q++) {
    const int oy = 2 * py + q / 2, ox = 2 * px + q % 2;
    double s = bias ? bias[co] : 0.0;
    for (int ky = 0; ky < KH; ky++)
      for (int kx = 0; kx < KW; kx++)
        for (int c = 0; c < C; c++)
          s += x[nhwc(b, oy + ky, ox + kx, c, H, W, C)] * w[((ky * KW + kx) * C + c) * CO + co];
    z[q] = s;
  }
}

void ref_conv_pool_forward(const double *x, int B, int H, int W, int C, const double *w,
                           const double *bias, int KH, int KW, int CO, int PH, int PW, double *y) {
  for (int b = 0; b < B; b++)
    for (int py = 0; py < PH; py++)
      for (int px = 0; px < PW; px++)
        for (int co = 0; co < CO; co++) {
          double z[4], m = 0.0; /* the ReLU: a maximum below 0 is 0 */
          conv_pool_window(x, b, py, px, co, H, W, C, w, bias, KH, KW, CO, z);
          for (int q = 0; q < 4; q++)
            if (z[q] > m) m = z[q];
          y[nhwc(b, py, px, co, PH, PW, CO)] = m;
        }
}

void ref_conv_pool_backward(const double *x, int B, int H, int W, int C, const double *w,
                            const double *bias, int KH, int KW, int CO, int PH, int PW,
                            const double *dy, double *dw, double *dbias) {
  zero(dw, (size_t)KH * KW * C * CO);
  if (dbias) zero(dbias, (size_t)CO);
  for (int b = 0; b < B; b++)
    for (int py = 0; py < PH; py++)
      for (int px = 0; px < PW; px++)
        for (int co = 0; co < CO; co++) {
          double z[4];
          conv_pool_window(x, b, py, px, co, H, W, C, w, bias, KH, KW, CO, z);
          int best = 0;
          for (int q = 1; q < 4; q++)
            if (z[q] > z[best]) best = q;
          if (!(z[best] > 0.0)) continue; /* the ReLU passes nothing back */
          const double g = dy[nhwc(b, py, px, co, PH, PW, CO)];
          const int oy = 2 * py + best / 2, ox = 2 * px + best % 2;
          if (dbias) dbias[co] += g;
          for (int ky = 0; ky < KH; ky++)
            for (int kx = 0; kx < KW; kx++)
              for (int c = 0; c < C; c++)
                dw[((ky * KW + kx) * C + c) * CO + co] += g *
                                                          x[nhwc(b, oy + ky, ox + kx, c, H, W, C)];
        }
}

/* ---- ReLU -------------------------------------------------------------------------- */

void ref_relu_forward(const double *x, size_t n, double *y) {
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0 ? x[i] : 0.0;
}

void ref_relu_backward(const double *y, const double *dy, size_t n, double *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0 ? dy[i] : 0.0;
}

/* ---- dense ------------------------------------------------------------------------- */

void ref_dense_forward(const double *x, int B, int IN, const double *w, const double *bias, int OUT,
                       double *y) {
  for (int b = 0; b < B; b++)
    for (int o = 0; o < OUT; o++) {
      double sum = bias[o];
      for (int i = 0; i < IN; i++) sum += x[(size_t)b * IN + i] * w[(size_t)i * OUT + o];
      y[(size_t)b * OUT + o] = sum;
    }
}

void ref_dense_backward(const double *x, int B, int IN, const double *w, int OUT, const double *dy,
                        double *dx, double *dw, double *dbias) {
  if (dx) zero(dx, (size_t)B * IN);
  zero(dw, (size_t)IN * OUT);
  zero(dbias, (size_t)OUT);
  for (int b = 0; b < B; b++)
    for (int o = 0; o < OUT; o++) {
      double g = dy[(size_t)b * OUT + o];
      dbias[o] += g;
      for (int i = 0; i < IN; i++) {
        dw[(size_t)i * OUT + o] += x[(size_t)b * IN + i] * g;
        if (dx) dx[(size_t)b * IN + i] += w[(size_t)i * OUT + o] * g;
      }
    }
}

/* ---- softmax cross-entropy --------------------------------------------------------- */

void ref_softmax_xent(const double *z, const int *labels, int B, int K, double scale, double *loss,
                      double *dz, int *correct) {
  for (int b = 0; b < B; b++) {
    const double *zb = z + (size_t)b * K;
    /* First maximum: the prediction, and the shift that keeps exp() from overflowing. */
    int arg = 0;
    for (int k = 1; k < K; k++)
      if (zb[k] > zb[arg]) arg = k;
    double sum = 0.0;
    for (int k = 0; k < K; k++) sum += exp(zb[k] - zb[arg]);
    // cppcheck-suppress invalidFunctionArg ; sum >= 1: its term at k == arg is exp(0)
    double lse = zb[arg] + log(sum);
    int label = labels[b];
    if (loss) loss[b] = lse - zb[label];
    if (dz)
      for (int k = 0; k < K; k++)
        dz[(size_t)b * K + k] = (exp(zb[k] - lse) - (k == label ? 1.0 : 0.0)) * scale;
    if (correct) correct[b] = arg == label;
  }
}

/* ---- Adam -------------------------------------------------------------------------- */

void ref_adam(double *p, const double *g, double *m, double *v, size_t n, double lr, double b1,
              double b2, double eps, long step) {
  /* Keras folds both bias corrections into the step size; eps stays uncorrected. */
  double lr_t = lr * sqrt(1.0 - pow(b2, (double)step)) / (1.0 - pow(b1, (double)step));
  for (size_t i = 0; i < n; i++) {
    m[i] = b1 * m[i] + (1.0 - b1) * g[i];
    v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
    p[i] -= lr_t * m[i] / (sqrt(v[i]) + eps);
  }
}

/* ---- the reference CNN ------------------------------------------------------------- */

/* Every size the model derives from its shape. */
typedef struct cnn_dims {
  int H1, W1;   /* conv1 output (3x3 valid) */
  int P1H, P1W; /* pool1 output (2x2 stride 2, floor) */
  int H2, W2;   /* conv2 output */
  int P2H, P2W; /* pool2 output */
  int F;        /* flattened features */
  /* Offsets of the eight parameter tensors in the packed vector, and its length. */
  size_t k1, b1, k2, b2, k3, b3, k4, b4, count;
} cnn_dims;

/* Returns 0 if the shape is too small to survive both conv/pool stages. */
static int cnn_dims_of(const ref_cnn_shape *s, cnn_dims *d) {
  if (s->C < 1 || s->c1 < 1 || s->c2 < 1 || s->dense < 1 || s->classes < 1) return 0;
  d->H1 = s->H - 2;
  d->W1 = s->W - 2;
  if (d->H1 < 2 || d->W1 < 2) return 0;
  d->P1H = (d->H1 - 2) / 2 + 1;
  d->P1W = (d->W1 - 2) / 2 + 1;
  d->H2 = d->P1H - 2;
  d->W2 = d->P1W - 2;
  if (d->H2 < 2 || d->W2 < 2) return 0;
  d->P2H = (d->H2 - 2) / 2 + 1;
  d->P2W = (d->W2 - 2) / 2 + 1;
  d->F = d->P2H * d->P2W * s->c2;
  d->k1 = 0;
  d->b1 = d->k1 + (size_t)3 * 3 * s->C * s->c1;
  d->k2 = d->b1 + (size_t)s->c1;
  d->b2 = d->k2 + (size_t)3 * 3 * s->c1 * s->c2;
  d->k3 = d->b2 + (size_t)s->c2;
  d->b3 = d->k3 + (size_t)d->F * s->dense;
  d->k4 = d->b3 + (size_t)s->dense;
  d->b4 = d->k4 + (size_t)s->dense * s->classes;
  d->count = d->b4 + (size_t)s->classes;
  return 1;
}

size_t ref_cnn_param_count(const ref_cnn_shape *s) {
  cnn_dims d;
  return cnn_dims_of(s, &d) ? d.count : 0;
}

double ref_cnn_loss_grad(const ref_cnn_shape *s, const double *params, const double *x,
                         const int *labels, int B, double scale, double *grad, int *correct) {
  cnn_dims d;
  if (!cnn_dims_of(s, &d) || B < 1) return NAN;
  const int C = s->C, c1 = s->c1, c2 = s->c2, D = s->dense, K = s->classes;
  const size_t n_a1 = (size_t)B * d.H1 * d.W1 * c1, n_p1 = (size_t)B * d.P1H * d.P1W * c1;
  const size_t n_a2 = (size_t)B * d.H2 * d.W2 * c2, n_p2 = (size_t)B * d.F;
  const size_t n_h = (size_t)B * D, n_z = (size_t)B * K;

  /* Forward activations, kept for the backward pass, and their gradients, carved from
   * one allocation. Flatten is a no-op: p2 in NHWC order already is the (B, F) input
   * of the first dense layer. */
  const size_t n_buf = 2 * (n_a1 + n_p1 + n_a2 + n_p2 + n_h + n_z) + (size_t)B; /* +loss */
  double *buf = malloc(n_buf * sizeof *buf);
  int *ok = malloc((size_t)B * sizeof *ok);
  if (!buf || !ok) {
    free(buf);
    free(ok);
    return NAN;
  }
  double *a1 = buf, *p1 = a1 + n_a1, *a2 = p1 + n_p1, *p2 = a2 + n_a2, *h = p2 + n_p2;
  double *z = h + n_h, *da1 = z + n_z, *dp1 = da1 + n_a1, *da2 = dp1 + n_p1;
  double *dp2 = da2 + n_a2, *dh = dp2 + n_p2, *dz = dh + n_h, *loss = dz + n_z;

  const double *P = params;
  ref_conv2d_forward(x, B, s->H, s->W, C, P + d.k1, P + d.b1, 3, 3, c1, 1, 0, 0, d.H1, d.W1, a1);
  ref_relu_forward(a1, n_a1, a1); /* in place: backward only needs the ReLU output */
  ref_maxpool_forward(a1, B, d.H1, d.W1, c1, 2, 2, d.P1H, d.P1W, p1);
  ref_conv2d_forward(p1, B, d.P1H, d.P1W, c1, P + d.k2, P + d.b2, 3, 3, c2, 1, 0, 0, d.H2, d.W2,
                     a2);
  ref_relu_forward(a2, n_a2, a2);
  ref_maxpool_forward(a2, B, d.H2, d.W2, c2, 2, 2, d.P2H, d.P2W, p2);
  ref_dense_forward(p2, B, d.F, P + d.k3, P + d.b3, D, h);
  ref_relu_forward(h, n_h, h);
  ref_dense_forward(h, B, D, P + d.k4, P + d.b4, K, z);
  ref_softmax_xent(z, labels, B, K, scale, loss, dz, ok);

  double total = 0.0;
  int n_correct = 0;
  for (int b = 0; b < B; b++) {
    total += loss[b];
    n_correct += ok[b];
  }
  if (correct) *correct = n_correct;

  if (grad) {
    /* The forward in reverse; the relu backwards work in place on the gradient. */
    double *G = grad;
    ref_dense_backward(h, B, D, P + d.k4, K, dz, dh, G + d.k4, G + d.b4);
    ref_relu_backward(h, dh, n_h, dh);
    ref_dense_backward(p2, B, d.F, P + d.k3, D, dh, dp2, G + d.k3, G + d.b3);
    ref_maxpool_backward(a2, B, d.H2, d.W2, c2, 2, 2, d.P2H, d.P2W, dp2, da2);
    ref_relu_backward(a2, da2, n_a2, da2);
    ref_conv2d_backward(p1, B, d.P1H, d.P1W, c1, P + d.k2, 3, 3, c2, 1, 0, 0, d.H2, d.W2, da2, dp1,
                        G + d.k2, G + d.b2);
    ref_maxpool_backward(a1, B, d.H1, d.W1, c1, 2, 2, d.P1H, d.P1W, dp1, da1);
    ref_relu_backward(a1, da1, n_a1, da1);
    ref_conv2d_backward(x, B, s->H, s->W, C, P + d.k1, 3, 3, c1, 1, 0, 0, d.H1, d.W1, da1, NULL,
                        G + d.k1, G + d.b1);
  }
  free(buf);
  free(ok);
  return scale * total;
}

/* ---- the kinds of Keras model files ------------------------------------------------ */

void ref_relu_clip_forward(const double *x, size_t n, double hi, double *y) {
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0 ? (x[i] < hi ? x[i] : hi) : 0.0;
}

void ref_relu_clip_backward(const double *y, const double *dy, size_t n, double hi, double *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0 && y[i] < hi ? dy[i] : 0.0;
}

void ref_sigmoid_forward(const double *x, size_t n, double *y) {
  for (size_t i = 0; i < n; i++) y[i] = 1.0 / (1.0 + exp(-x[i]));
}

void ref_sigmoid_backward(const double *y, const double *dy, size_t n, double *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * y[i] * (1.0 - y[i]);
}

void ref_tanh_forward(const double *x, size_t n, double *y) {
  for (size_t i = 0; i < n; i++) y[i] = tanh(x[i]);
}

void ref_tanh_backward(const double *y, const double *dy, size_t n, double *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0 - y[i] * y[i]);
}

void ref_softmax_forward(const double *x, size_t rows, int C, double *y) {
  for (size_t r = 0; r < rows; r++) {
    const double *xr = x + r * C;
    double *yr = y + r * C, m = -INFINITY, sum = 0.0;
    for (int c = 0; c < C; c++) m = xr[c] > m ? xr[c] : m;
    for (int c = 0; c < C; c++) sum += exp(xr[c] - m);
    for (int c = 0; c < C; c++) yr[c] = exp(xr[c] - m) / sum;
  }
}

void ref_softmax_backward(const double *y, const double *dy, size_t rows, int C, double *dx) {
  for (size_t r = 0; r < rows; r++) {
    const double *yr = y + r * C, *gr = dy + r * C;
    double dot = 0.0;
    for (int c = 0; c < C; c++) dot += gr[c] * yr[c];
    for (int c = 0; c < C; c++) dx[r * C + c] = yr[c] * (gr[c] - dot);
  }
}

void ref_scale_shift(const double *x, size_t n, double a, double b, double *y) {
  for (size_t i = 0; i < n; i++) y[i] = x[i] * a + b;
}

/* splitmix64's finaliser. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

uint64_t ref_dropout_hash(uint64_t key, uint64_t example, uint64_t i) {
  return mix64(mix64(key ^ (example * 0x9e3779b97f4a7c15u)) + i * 0xd1b54a32d192ed03u);
}

uint32_t ref_dropout_threshold(double rate) {
  const double t = rate * 4294967296.0;
  return t <= 0.0 ? 0u : t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

void ref_dropout(const double *x, int B, size_t n, uint64_t key, long example0, double rate,
                 double *y) {
  const uint32_t thr = ref_dropout_threshold(rate);
  for (int b = 0; b < B; b++)
    for (size_t i = 0; i < n; i++) {
      const uint64_t h = ref_dropout_hash(key, (uint64_t)(example0 + b), i);
      const size_t at = (size_t)b * n + i;
      y[at] = (uint32_t)(h >> 32) >= thr ? x[at] / (1.0 - rate) : 0.0;
    }
}

void ref_concat_forward(const double *x, const double *x2, size_t rows, int C1, int C2, double *y) {
  for (size_t r = 0; r < rows; r++) {
    for (int c = 0; c < C1; c++) y[r * (C1 + C2) + c] = x[r * C1 + c];
    for (int c = 0; c < C2; c++) y[r * (C1 + C2) + C1 + c] = x2[r * C2 + c];
  }
}

void ref_concat_backward(const double *dy, size_t rows, int C1, int C2, double *dx, double *dx2) {
  for (size_t r = 0; r < rows; r++) {
    for (int c = 0; dx && c < C1; c++) dx[r * C1 + c] = dy[r * (C1 + C2) + c];
    for (int c = 0; dx2 && c < C2; c++) dx2[r * C2 + c] = dy[r * (C1 + C2) + C1 + c];
  }
}

/* The part of window start..start+P-1 inside 0..N-1: [*lo, *hi). */
static void clip_window(int start, int P, int N, int *lo, int *hi) {
  *lo = start < 0 ? 0 : start;
  *hi = start + P > N ? N : start + P;
}

void ref_avgpool_forward(const double *x, int B, int H, int W, int C, int PH, int PW, int SH,
                         int SW, int PT, int PL, int OH, int OW, double *y) {
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++) {
        int y0, y1, x0, x1;
        clip_window(oy * SH - PT, PH, H, &y0, &y1);
        clip_window(ox * SW - PL, PW, W, &x0, &x1);
        for (int c = 0; c < C; c++) {
          double sum = 0.0;
          for (int iy = y0; iy < y1; iy++)
            for (int ix = x0; ix < x1; ix++) sum += x[nhwc(b, iy, ix, c, H, W, C)];
          y[nhwc(b, oy, ox, c, OH, OW, C)] = sum / ((y1 - y0) * (x1 - x0));
        }
      }
}

void ref_avgpool_backward(const double *dy, int B, int H, int W, int C, int PH, int PW, int SH,
                          int SW, int PT, int PL, int OH, int OW, double *dx) {
  zero(dx, (size_t)B * H * W * C);
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++) {
        int y0, y1, x0, x1;
        clip_window(oy * SH - PT, PH, H, &y0, &y1);
        clip_window(ox * SW - PL, PW, W, &x0, &x1);
        const int count = (y1 - y0) * (x1 - x0);
        for (int c = 0; c < C; c++) {
          const double g = dy[nhwc(b, oy, ox, c, OH, OW, C)] / count;
          for (int iy = y0; iy < y1; iy++)
            for (int ix = x0; ix < x1; ix++) dx[nhwc(b, iy, ix, c, H, W, C)] += g;
        }
      }
}

void ref_global_maxpool_forward(const double *x, int B, int HW, int C, double *y) {
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      double m = x[(size_t)b * HW * C + c];
      for (int p = 1; p < HW; p++) {
        const double v = x[((size_t)b * HW + p) * C + c];
        if (v > m) m = v;
      }
      y[(size_t)b * C + c] = m;
    }
}

void ref_global_maxpool_backward(const double *x, const double *dy, int B, int HW, int C,
                                 double *dx) {
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      int arg = 0;
      for (int p = 1; p < HW; p++) {
        if (x[((size_t)b * HW + p) * C + c] > x[((size_t)b * HW + arg) * C + c]) arg = p;
      }
      for (int p = 0; p < HW; p++)
        dx[((size_t)b * HW + p) * C + c] = p == arg ? dy[(size_t)b * C + c] : 0.0;
    }
}
