/* Plain-C double-precision references of the ResNet layers (see ref_resnet.h).
 * Written for obviousness, not speed. */
#include "ref_resnet.h"

#include <math.h>
#include <stdlib.h>

static size_t nhwc(int b, int y, int x, int c, int H, int W, int C) {
  return (((size_t)b * H + y) * W + x) * C + c;
}

/* ---- batch normalization ----------------------------------------------------------- */

/* gamma[c], 1 without one (scale=False); beta[c], 0 without one (center=False). */
static double at_or(const double *p, int c, double absent) { return p ? p[c] : absent; }

/* Per-channel mean and biased variance, two-pass. */
static void bn_stats(const double *x, int rows, int C, int c, double *mean, double *var) {
  double s = 0.0;
  for (int r = 0; r < rows; r++) s += x[(size_t)r * C + c];
  const double m = s / rows;
  double q = 0.0;
  for (int r = 0; r < rows; r++) {
    const double d = x[(size_t)r * C + c] - m;
    q += d * d;
  }
  *mean = m;
  *var = q / rows;
}

void ref_batchnorm_forward_train(const double *x, int rows, int C, const double *gamma,
                                 const double *beta, double eps, int relu, double *y, double *mean,
                                 double *var, double *var_unbiased) {
  for (int c = 0; c < C; c++) {
    double m, v;
    bn_stats(x, rows, C, c, &m, &v);
    const double inv_std = 1.0 / sqrt(v + eps);
    for (int r = 0; r < rows; r++) {
      const size_t i = (size_t)r * C + c;
      const double z = at_or(gamma, c, 1.0) * (x[i] - m) * inv_std + at_or(beta, c, 0.0);
      y[i] = relu && !(z > 0.0) ? 0.0 : z;
    }
    if (mean) mean[c] = m;
    if (var) var[c] = v;
    if (var_unbiased) var_unbiased[c] = rows > 1 ? v * rows / (rows - 1) : v;
  }
}

void ref_batchnorm_forward_infer(const double *x, int rows, int C, const double *gamma,
                                 const double *beta, const double *moving_mean,
                                 const double *moving_var, double eps, int relu, double *y) {
  for (int c = 0; c < C; c++) {
    const double inv_std = 1.0 / sqrt(moving_var[c] + eps);
    for (int r = 0; r < rows; r++) {
      const size_t i = (size_t)r * C + c;
      const double z = at_or(gamma, c, 1.0) * (x[i] - moving_mean[c]) * inv_std +
                       at_or(beta, c, 0.0);
      y[i] = relu && !(z > 0.0) ? 0.0 : z;
    }
  }
}

void ref_batchnorm_backward(const double *x, int rows, int C, const double *gamma,
                            const double *beta, double eps, int relu, const double *dy, double *dx,
                            double *dgamma, double *dbeta) {
  for (int c = 0; c < C; c++) {
    double m, v;
    bn_stats(x, rows, C, c, &m, &v);
    const double inv_std = 1.0 / sqrt(v + eps);
    /* g: dy through the ReLU, decided by the recomputed pre-activation's sign. */
    double db = 0.0, dg = 0.0;
    for (int r = 0; r < rows; r++) {
      const size_t i = (size_t)r * C + c;
      const double xhat = (x[i] - m) * inv_std;
      const double z = at_or(gamma, c, 1.0) * xhat + at_or(beta, c, 0.0);
      const double g = relu && !(z > 0.0) ? 0.0 : dy[i];
      db += g;
      dg += g * xhat;
    }
    if (dbeta) dbeta[c] = db;
    if (dgamma) dgamma[c] = dg;
    if (!dx) continue;
    for (int r = 0; r < rows; r++) {
      const size_t i = (size_t)r * C + c;
      const double xhat = (x[i] - m) * inv_std;
      const double z = at_or(gamma, c, 1.0) * xhat + at_or(beta, c, 0.0);
      const double g = relu && !(z > 0.0) ? 0.0 : dy[i];
      dx[i] = at_or(gamma, c, 1.0) * inv_std / rows * (rows * g - db - xhat * dg);
    }
  }
}

/* ---- add --------------------------------------------------------------------------- */

void ref_add(const double *x, const double *x2, size_t n, int relu, double *y) {
  for (size_t i = 0; i < n; i++) {
    const double z = x[i] + x2[i];
    y[i] = relu && !(z > 0.0) ? 0.0 : z;
  }
}

void ref_add_backward(const double *y, const double *dy, size_t n, int relu, double *dx,
                      double *dx2) {
  for (size_t i = 0; i < n; i++) {
    const double g = relu && !(y[i] > 0.0) ? 0.0 : dy[i];
    if (dx) dx[i] = g;
    if (dx2) dx2[i] = g;
  }
}

/* ---- global average pooling -------------------------------------------------------- */

void ref_gap_forward(const double *x, int B, int H, int W, int C, double *y) {
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      double s = 0.0;
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) s += x[nhwc(b, h, w, c, H, W, C)];
      y[(size_t)b * C + c] = s / ((double)H * W);
    }
}

void ref_gap_backward(const double *dy, int B, int H, int W, int C, double *dx) {
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int w = 0; w < W; w++)
        for (int c = 0; c < C; c++)
          dx[nhwc(b, h, w, c, H, W, C)] = dy[(size_t)b * C + c] / ((double)H * W);
}

/* ---- max pooling with zero padding ------------------------------------------------- */

/* Value of padded-window tap (ky, kx) of output (oy, ox); *at = its index in x, or -1
 * for a padded position (which holds 0). */
static double pad_tap(const double *x, int b, int oy, int ox, int ky, int kx, int c, int H, int W,
                      int C, int stride, int pad, long long *at) {
  const int iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
  if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
    *at = -1;
    return 0.0;
  }
  *at = (long long)nhwc(b, iy, ix, c, H, W, C);
  return x[*at];
}

void ref_maxpool_pad_forward(const double *x, int B, int H, int W, int C, int pool, int stride,
                             int pad, int OH, int OW, double *y) {
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int c = 0; c < C; c++) {
          double m = -INFINITY;
          long long at;
          for (int ky = 0; ky < pool; ky++)
            for (int kx = 0; kx < pool; kx++) {
              const double v = pad_tap(x, b, oy, ox, ky, kx, c, H, W, C, stride, pad, &at);
              if (v > m) m = v;
            }
          y[nhwc(b, oy, ox, c, OH, OW, C)] = m;
        }
}

void ref_maxpool_pad_backward(const double *x, int B, int H, int W, int C, int pool, int stride,
                              int pad, int OH, int OW, const double *dy, double *dx) {
  for (size_t i = 0; i < (size_t)B * H * W * C; i++) dx[i] = 0.0;
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int c = 0; c < C; c++) {
          /* Strict '>' in raster order keeps the first of equal maxima, padding included. */
          long long best_at, at;
          double best = pad_tap(x, b, oy, ox, 0, 0, c, H, W, C, stride, pad, &best_at);
          for (int ky = 0; ky < pool; ky++)
            for (int kx = 0; kx < pool; kx++) {
              const double v = pad_tap(x, b, oy, ox, ky, kx, c, H, W, C, stride, pad, &at);
              if (v > best) {
                best = v;
                best_at = at;
              }
            }
          if (best_at >= 0) dx[best_at] += dy[nhwc(b, oy, ox, c, OH, OW, C)];
        }
}

/* ---- max pooling, the general case ------------------------------------------------- */

/* Whether tap (ky, kx) of window (oy, ox) is a candidate, its value in *v and its
 * index in x in *at (-1 for padding, a candidate holding 0 only when zero_pad). */
static int tap2d(const double *x, int b, int oy, int ox, int ky, int kx, int c, int H, int W, int C,
                 int SH, int SW, int PT, int PL, int zero_pad, double *v, long long *at) {
  const int iy = oy * SH + ky - PT, ix = ox * SW + kx - PL;
  if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
    *at = -1;
    *v = 0.0;
    return zero_pad;
  }
  *at = (long long)nhwc(b, iy, ix, c, H, W, C);
  *v = x[*at];
  return 1;
}

void ref_maxpool2d_forward(const double *x, int B, int H, int W, int C, int PH, int PW, int SH,
                           int SW, int PT, int PL, int zero_pad, int OH, int OW, double *y) {
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int c = 0; c < C; c++) {
          double m = -INFINITY, v;
          long long at;
          for (int ky = 0; ky < PH; ky++)
            for (int kx = 0; kx < PW; kx++) {
              if (tap2d(x, b, oy, ox, ky, kx, c, H, W, C, SH, SW, PT, PL, zero_pad, &v, &at) &&
                  v > m)
                m = v;
            }
          y[nhwc(b, oy, ox, c, OH, OW, C)] = m;
        }
}

void ref_maxpool2d_backward(const double *x, int B, int H, int W, int C, int PH, int PW, int SH,
                            int SW, int PT, int PL, int zero_pad, int OH, int OW, const double *dy,
                            double *dx) {
  for (size_t i = 0; i < (size_t)B * H * W * C; i++) dx[i] = 0.0;
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int c = 0; c < C; c++) {
          /* Strict '>' in raster order keeps the first of equal maxima. */
          long long best_at = -1, at;
          double best = 0.0, v;
          int found = 0;
          for (int ky = 0; ky < PH; ky++)
            for (int kx = 0; kx < PW; kx++) {
              if (!tap2d(x, b, oy, ox, ky, kx, c, H, W, C, SH, SW, PT, PL, zero_pad, &v, &at))
                continue;
              if (!found || v > best) {
                best = v;
                best_at = at;
                found = 1;
              }
            }
          if (best_at >= 0) dx[best_at] += dy[nhwc(b, oy, ox, c, OH, OW, C)];
        }
}
