/* test_layers2, part 1 (see test_layers2.c): the references of tests/ref/ref_resnet.c
 * and tests/ref/ref.c's convolution and fused convolution + ReLU + pooling against
 * central finite differences of their forwards, and hand-computed padded-pooling
 * ties. Pure C: no device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ref.h"
#include "ref_resnet.h"
#include "test_layers2.h"

/* ================================================================================== */
/* 1. References against finite differences                                            */
/* ================================================================================== */

/* The FD objective is L = sum_k w[k] * y[k] for random weights w. forward() recomputes
 * y from the inputs in ctx, which fd_check perturbs in place; unstable(), if set, says
 * whether moving input i by +-h changes a discrete choice (a ReLU's side, a pooling
 * argmax), making the estimate meaningless there: such entries are skipped. */
typedef struct fd_layer {
  void *ctx;
  void (*forward)(void *ctx, double *y);
  size_t n_y;
  int (*unstable)(void *ctx, double *in, size_t i, double h);
} fd_layer;

/* h ~ cbrt(eps): rounding ~1e-16 |y| / h and, for the smooth batch norm, truncation
 * ~h^2 |f'''| are both ~1e-10 relative; the piecewise-linear layers have no truncation
 * error at all. Observed errors are below 1e-8; an indexing or sign bug gives O(1). */
#define FD_H 1e-5
#define FD_TOL 1e-6

/* Relative error with a floor of 1e-3 of the tensor's largest magnitude (the FD
 * rounding scales with the objective, not with each entry; see tests/test_ref.c). */
static void fd_check(const char *what, const fd_layer *L, double *in, size_t n, const double *w,
                     const double *analytic) {
  double *yp = dnew(L->n_y), *ym = dnew(L->n_y), *fd = dnew(n);
  size_t skipped = 0;
  for (size_t i = 0; i < n; i++) {
    if (L->unstable && L->unstable(L->ctx, in, i, FD_H)) {
      fd[i] = analytic[i];
      skipped++;
      continue;
    }
    const double saved = in[i];
    in[i] = saved + FD_H;
    L->forward(L->ctx, yp);
    in[i] = saved - FD_H;
    L->forward(L->ctx, ym);
    in[i] = saved;
    double diff = 0.0;
    for (size_t k = 0; k < L->n_y; k++) diff += w[k] * (yp[k] - ym[k]);
    fd[i] = diff / (2.0 * FD_H);
  }
  double big = 0.0;
  for (size_t i = 0; i < n; i++) big = fmax(big, fmax(fabs(analytic[i]), fabs(fd[i])));
  const double floor = fmax(1e-3 * big, 1e-300);
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    const double err = fabs(analytic[i] - fd[i]) /
                       fmax(fmax(fabs(analytic[i]), fabs(fd[i])), floor);
    if (!isnan(worst) && worse(err, worst) != worst) { /* a NaN, once seen, stays the worst */
      worst = err;
      at = i;
    }
  }
  /* Skipping most entries would make a pass meaningless. */
  if (skipped * 10 > n) worst = worse(worst, 1.0);
  char detail[200], label[96];
  snprintf(detail, sizeof detail, " at [%zu]: analytic %.12g fd %.12g", at, analytic[at], fd[at]);
  snprintf(label, sizeof label, "%s [%zu checked, %zu skipped]", what, n - skipped, skipped);
  report(label, worst, FD_TOL, detail);
}

/* Backwards must overwrite their outputs: NaN-filled, an unwritten one fails. */
static void poison(double *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = NAN;
}

/* ---- batch normalization ----------------------------------------------------------- */

typedef struct bn_ctx {
  int rows, C, relu;
  double eps;
  double *x, *gamma, *beta;
  double *z0, *z1; /* pre-activations, for unstable() */
} bn_ctx;

static void bn_fwd(void *p, double *y) {
  bn_ctx *t = p;
  ref_batchnorm_forward_train(t->x, t->rows, t->C, t->gamma, t->beta, t->eps, t->relu, y, NULL,
                              NULL, NULL);
}

/* With the ReLU: unstable if moving input i by +-h moves any pre-activation across
 * (or within 1e-9 of) the kink. One input moves its whole channel's statistics, so
 * every output is looked at. */
static int bn_unstable(void *p, double *in, size_t i, double h) {
  bn_ctx *t = p;
  if (!t->relu) return 0;
  const size_t n = (size_t)t->rows * t->C;
  const double saved = in[i];
  ref_batchnorm_forward_train(t->x, t->rows, t->C, t->gamma, t->beta, t->eps, 0, t->z0, NULL, NULL,
                              NULL);
  int flips = 0;
  for (int sign = -1; sign <= 1 && !flips; sign += 2) {
    in[i] = saved + sign * h;
    ref_batchnorm_forward_train(t->x, t->rows, t->C, t->gamma, t->beta, t->eps, 0, t->z1, NULL,
                                NULL, NULL);
    for (size_t k = 0; k < n && !flips; k++)
      flips = (t->z0[k] > 0.0) != (t->z1[k] > 0.0) || fabs(t->z1[k]) < 1e-9;
  }
  in[i] = saved;
  return flips;
}

static void test_bn_fd(int B, int H, int W, int C, int relu) {
  set_case("ref batchnorm B%d %dx%d C%d%s:", B, H, W, C, relu ? " relu" : "");
  const int rows = B * H * W;
  const size_t n = (size_t)rows * C;
  double *x = dnew(n), *gamma = dnew((size_t)C), *beta = dnew((size_t)C), *w = dnew(n);
  double *dx = dnew(n), *dg = dnew((size_t)C), *db = dnew((size_t)C);
  double *dg2 = dnew((size_t)C), *db2 = dnew((size_t)C);
  rand_fill(x, n, -1, 1);
  rand_fill(gamma, (size_t)C, 0.5, 1.5);
  rand_fill(beta, (size_t)C, -0.5, 0.5);
  rand_fill(w, n, -1, 1);
  poison(dx, n);
  poison(dg, (size_t)C);
  poison(db, (size_t)C);
  const double eps = 1.001e-5;
  ref_batchnorm_backward(x, rows, C, gamma, beta, eps, relu, w, dx, dg, db);
  bn_ctx ctx = {rows, C, relu, eps, x, gamma, beta, dnew(n), dnew(n)};
  fd_layer L = {&ctx, bn_fwd, n, bn_unstable};
  fd_check("dx", &L, x, n, w, dx);
  fd_check("dgamma", &L, gamma, (size_t)C, w, dg);
  fd_check("dbeta", &L, beta, (size_t)C, w, db);
  poison(dg2, (size_t)C);
  poison(db2, (size_t)C);
  ref_batchnorm_backward(x, rows, C, gamma, beta, eps, relu, w, NULL, dg2, db2);
  expect("dx=NULL gives the same dgamma, dbeta",
         memcmp(dg, dg2, C * sizeof *dg) != 0 || memcmp(db, db2, C * sizeof *db) != 0, 1);
  case_end();
}

/* Statistics and inference mode by hand (eps 0): channel 0 holds 1, 2, 3, 6 (mean 3,
 * biased var 3.5, unbiased 14/3), channel 1 holds 5, 7, 5, 7 (mean 6, var 1, 4/3). */
static void test_bn_hand(void) {
  set_case("ref batchnorm by hand:");
  const double x[8] = {1, 5, 2, 7, 3, 5, 6, 7}, gamma[2] = {2, 1}, beta[2] = {0.5, -1};
  double y[8], mean[2], var[2], varu[2], yi[8];
  ref_batchnorm_forward_train(x, 4, 2, gamma, beta, 0.0, 0, y, mean, var, varu);
  const double s = 1.0 / sqrt(3.5);
  const double want_y[8] = {2 * -2 * s + 0.5, -2, 2 * -1 * s + 0.5, 0, 0.5, -2, 2 * 3 * s + 0.5, 0};
  double d = 0;
  for (int i = 0; i < 8; i++) d = worse(d, fabs(y[i] - want_y[i]));
  d = worse(d, fabs(mean[0] - 3) + fabs(mean[1] - 6) + fabs(var[0] - 3.5) + fabs(var[1] - 1) +
                   fabs(varu[0] - 14.0 / 3) + fabs(varu[1] - 4.0 / 3));
  report("train: y, mean, var, unbiased var", d, 1e-12, "");
  /* Inference with moving mean 1, variance 3 (eps 1): (x - 1) / 2 * gamma + beta, ReLU. */
  const double mm[2] = {1, 1}, mv[2] = {3, 3};
  ref_batchnorm_forward_infer(x, 4, 2, gamma, beta, mm, mv, 1.0, 1, yi);
  const double want_i[8] = {0.5, 1, 1.5, 2, 2.5, 1, 5.5, 2};
  d = 0;
  for (int i = 0; i < 8; i++) d = worse(d, fabs(yi[i] - want_i[i]));
  report("infer: y with ReLU", d, 1e-12, "");
  double one[1] = {7}, g1[1] = {2}, b1[1] = {0.25}, y1[1], v1[1], vu1[1];
  ref_batchnorm_forward_train(one, 1, 1, g1, b1, 1e-3, 0, y1, NULL, v1, vu1);
  report("one row: y = beta, unbiased var = var = 0",
         fabs(y1[0] - 0.25) + fabs(v1[0]) + fabs(vu1[0]), 1e-12, "");
}

/* ---- add --------------------------------------------------------------------------- */

typedef struct add_ctx {
  size_t n;
  int relu;
  double *x, *x2;
} add_ctx;

static void add_fwd(void *p, double *y) {
  add_ctx *t = p;
  ref_add(t->x, t->x2, t->n, t->relu, y);
}

static void test_add_fd(size_t n, int relu) {
  set_case("ref add n%zu%s:", n, relu ? " relu" : "");
  double *x = dnew(n), *x2 = dnew(n), *y = dnew(n), *w = dnew(n), *dx = dnew(n), *dx2 = dnew(n);
  rand_fill(x2, n, -1, 1);
  /* Keep the sums 1e-4 away from the ReLU's kink. */
  for (size_t i = 0; i < n; i++) {
    do x[i] = urand(-1, 1);
    while (fabs(x[i] + x2[i]) < 1e-4);
  }
  rand_fill(w, n, -1, 1);
  ref_add(x, x2, n, relu, y);
  poison(dx, n);
  poison(dx2, n);
  ref_add_backward(y, w, n, relu, dx, dx2);
  add_ctx ctx = {n, relu, x, x2};
  fd_layer L = {&ctx, add_fwd, n, NULL};
  fd_check("dx", &L, x, n, w, dx);
  fd_check("dx2", &L, x2, n, w, dx2);
  case_end();
}

/* ---- global average pooling -------------------------------------------------------- */

typedef struct gap_ctx {
  int B, H, W, C;
  double *x;
} gap_ctx;

static void gap_fwd(void *p, double *y) {
  gap_ctx *t = p;
  ref_gap_forward(t->x, t->B, t->H, t->W, t->C, y);
}

static void test_gap_fd(int B, int H, int W, int C) {
  set_case("ref gap B%d %dx%d C%d:", B, H, W, C);
  const size_t nx = (size_t)B * H * W * C, ny = (size_t)B * C;
  double *x = dnew(nx), *w = dnew(ny), *dx = dnew(nx);
  rand_fill(x, nx, -1, 1);
  rand_fill(w, ny, -1, 1);
  poison(dx, nx);
  ref_gap_backward(w, B, H, W, C, dx);
  gap_ctx ctx = {B, H, W, C, x};
  fd_layer L = {&ctx, gap_fwd, ny, NULL};
  fd_check("dx", &L, x, nx, w, dx);
  case_end();
}

/* ---- max pooling with padding ------------------------------------------------------ */

typedef struct ppool_ctx {
  int B, H, W, C, pool, stride, pad, OH, OW;
  double *x;
  long long *a0, *a1;
} ppool_ctx;

static void ppool_fwd(void *p, double *y) {
  ppool_ctx *t = p;
  ref_maxpool_pad_forward(t->x, t->B, t->H, t->W, t->C, t->pool, t->stride, t->pad, t->OH, t->OW,
                          y);
}

/* The first maximum of every padded window as a tap index (written independently of
 * ref_resnet.c: the window is materialised with its zeros first). */
static void ppool_argmax(const ppool_ctx *t, const double *x, long long *arg) {
  size_t k = 0;
  double win[64] = {0}; /* taps 0 .. pool * pool - 1 are written before they are read */
  for (int b = 0; b < t->B; b++)
    for (int oy = 0; oy < t->OH; oy++)
      for (int ox = 0; ox < t->OW; ox++)
        for (int c = 0; c < t->C; c++) {
          for (int ky = 0; ky < t->pool; ky++)
            for (int kx = 0; kx < t->pool; kx++) {
              int iy = oy * t->stride + ky - t->pad, ix = ox * t->stride + kx - t->pad;
              int in = iy >= 0 && iy < t->H && ix >= 0 && ix < t->W;
              win[ky * t->pool + kx] = in ? x[(((size_t)b * t->H + iy) * t->W + ix) * t->C + c]
                                          : 0.0;
            }
          int best = 0;
          for (int i = 1; i < t->pool * t->pool; i++)
            if (win[i] > win[best]) best = i;
          arg[k++] = best;
        }
}

static int ppool_unstable(void *p, double *in, size_t i, double h) {
  ppool_ctx *t = p;
  const size_t n = (size_t)t->B * t->OH * t->OW * t->C;
  const double saved = in[i];
  ppool_argmax(t, in, t->a0);
  int changed = 0;
  for (int sign = -1; sign <= 1; sign += 2) {
    in[i] = saved + sign * h;
    ppool_argmax(t, in, t->a1);
    changed |= memcmp(t->a0, t->a1, n * sizeof *t->a0) != 0;
  }
  in[i] = saved;
  return changed;
}

static void test_ppool_fd(int B, int H, int W, int C, int pool, int stride, int pad) {
  set_case("ref maxpool %d s%d pad %d B%d %dx%d C%d:", pool, stride, pad, B, H, W, C);
  const int OH = (H + 2 * pad - pool) / stride + 1, OW = (W + 2 * pad - pool) / stride + 1;
  const size_t nx = (size_t)B * H * W * C, ny = (size_t)B * OH * OW * C;
  double *x = dnew(nx), *w = dnew(ny), *dx = dnew(nx);
  /* Distinct values 2^-8 apart around 0: the padding's 0 is the maximum of windows
   * that hold only negatives, and never ties. */
  distinct_fill(x, nx);
  rand_fill(w, ny, -1, 1);
  poison(dx, nx);
  ref_maxpool_pad_backward(x, B, H, W, C, pool, stride, pad, OH, OW, w, dx);
  long long *a0 = calloc(ny, sizeof *a0), *a1 = calloc(ny, sizeof *a1);
  if (!a0 || !a1) fatal("allocating argmax buffers");
  ppool_ctx ctx = {B, H, W, C, pool, stride, pad, OH, OW, x, a0, a1};
  fd_layer L = {&ctx, ppool_fwd, ny, ppool_unstable};
  fd_check("dx", &L, x, nx, w, dx);
  free(a0);
  free(a1);
  case_end();
}

/* Ties with the padding, by hand (1 x 2 x 2 x 1 input, pool 3 stride 2 pad 1: one
 * window, the whole input plus a ring of zeros, raster-first tap a padded corner). */
static void test_ppool_hand(void) {
  set_case("ref maxpool 3 s2 pad 1 by hand:");
  const double dy[1] = {10};
  struct {
    const char *what;
    double x[4], y, dx[4];
  } cases[] = {
      /* all 0: the first maximum is padding, the gradient is dropped */
      {"all zero: gradient dropped", {0, 0, 0, 0}, 0, {0, 0, 0, 0}},
      /* all negative: the max is the padding's 0 */
      {"all negative: y = 0, dropped", {-1, -2, -3, -4}, 0, {0, 0, 0, 0}},
      /* a positive value wins; the equal 2s: the first in raster order */
      {"positive: first of equal maxima", {1, 2, 2, 0}, 2, {0, 10, 0, 0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double y, dx[4];
    ref_maxpool_pad_forward(cases[i].x, 1, 2, 2, 1, 3, 2, 1, 1, 1, &y);
    ref_maxpool_pad_backward(cases[i].x, 1, 2, 2, 1, 3, 2, 1, 1, 1, dy, dx);
    double d = fabs(y - cases[i].y);
    for (int k = 0; k < 4; k++) d = worse(d, fabs(dx[k] - cases[i].dx[k]));
    report(cases[i].what, d, 0.0, "");
  }
  /* Overlapping windows (pool 3 stride 1 pad 1 on 1 x 1 x 3): 3 windows; x = (5, 1, 5).
   * Windows: [0 5 1] -> x0, [5 1 5] -> x0 (first), [1 5 0] -> x2. */
  const double xo[3] = {5, 1, 5}, dyo[3] = {1, 2, 4}, want[3] = {3, 0, 4};
  double dxo[3];
  ref_maxpool_pad_backward(xo, 1, 1, 3, 1, 3, 1, 1, 1, 3, dyo, dxo);
  double d = 0;
  for (int k = 0; k < 3; k++) d = worse(d, fabs(dxo[k] - want[k]));
  report("overlapping windows accumulate", d, 0.0, "");
}

/* ---- convolution at ResNet's strides and paddings (ref.c) -------------------------- */

typedef struct conv_ctx {
  int B, H, W, C, KH, KW, CO, stride, pt, pl, OH, OW;
  double *x, *w, *bias;
} conv_ctx;

static void conv_fwd(void *p, double *y) {
  conv_ctx *t = p;
  ref_conv2d_forward(t->x, t->B, t->H, t->W, t->C, t->w, t->bias, t->KH, t->KW, t->CO, t->stride,
                     t->pt, t->pl, t->OH, t->OW, y);
}

static void test_conv_fd(const char *name, conv_ctx c) {
  set_case("ref conv2d %s:", name);
  const size_t nx = (size_t)c.B * c.H * c.W * c.C, nw = (size_t)c.KH * c.KW * c.C * c.CO;
  const size_t ny = (size_t)c.B * c.OH * c.OW * c.CO;
  c.x = dnew(nx);
  c.w = dnew(nw);
  c.bias = dnew((size_t)c.CO);
  double *wt = dnew(ny), *dx = dnew(nx), *dw = dnew(nw), *db = dnew((size_t)c.CO);
  rand_fill(c.x, nx, -1, 1);
  rand_fill(c.w, nw, -1, 1);
  rand_fill(c.bias, (size_t)c.CO, -1, 1);
  rand_fill(wt, ny, -1, 1);
  poison(dx, nx);
  poison(dw, nw);
  poison(db, (size_t)c.CO);
  ref_conv2d_backward(c.x, c.B, c.H, c.W, c.C, c.w, c.KH, c.KW, c.CO, c.stride, c.pt, c.pl, c.OH,
                      c.OW, wt, dx, dw, db);
  fd_layer L = {&c, conv_fwd, ny, NULL};
  fd_check("dx", &L, c.x, nx, wt, dx);
  fd_check("dw", &L, c.w, nw, wt, dw);
  fd_check("dbias", &L, c.bias, (size_t)c.CO, wt, db);
  case_end();
}

/* ---- Conv2D + ReLU + 2x2 max pooling as one layer (ref.c) -------------------------- */

typedef struct cpool_ctx {
  int B, H, W, C, KH, KW, CO, PH, PW;
  double *x, *w, *bias; /* bias may be NULL */
  int *d0, *d1;         /* per window and channel: the maximum's position, or -1 */
  double *z;            /* the convolution's output */
  double *zeros;        /* CO zeros, ref_conv2d_forward's bias without one */
} cpool_ctx;

static void cpool_fwd(void *p, double *y) {
  cpool_ctx *t = p;
  ref_conv_pool_forward(t->x, t->B, t->H, t->W, t->C, t->w, t->bias, t->KH, t->KW, t->CO, t->PH,
                        t->PW, y);
}

/* Each window's choice, from the full convolution (independent of ref_conv_pool_*):
 * the first maximum's position, or -1 when that maximum is within 1e-9 of the ReLU's
 * kink or below it; -2 where two positions come within 1e-9 of a tie. */
static void cpool_decisions(const cpool_ctx *t, int *d) {
  const int OH = t->H - t->KH + 1, OW = t->W - t->KW + 1;
  double *z = t->z;
  ref_conv2d_forward(t->x, t->B, t->H, t->W, t->C, t->w, t->bias ? t->bias : t->zeros, t->KH, t->KW,
                     t->CO, 1, 0, 0, OH, OW, z);
  size_t k = 0;
  for (int b = 0; b < t->B; b++)
    for (int py = 0; py < t->PH; py++)
      for (int px = 0; px < t->PW; px++)
        for (int co = 0; co < t->CO; co++, k++) {
          double v[4];
          for (int q = 0; q < 4; q++) {
            const int oy = 2 * py + q / 2, ox = 2 * px + q % 2;
            v[q] = z[(((size_t)b * OH + oy) * OW + ox) * t->CO + co];
          }
          int best = 0;
          for (int q = 1; q < 4; q++)
            if (v[q] > v[best]) best = q;
          d[k] = v[best] < 1e-9 ? -1 : best;
          for (int q = 0; q < 4; q++)
            if (q != best && fabs(v[q] - v[best]) < 1e-9) d[k] = -2;
        }
}

static int cpool_unstable(void *p, double *in, size_t i, double h) {
  cpool_ctx *t = p;
  const size_t n = (size_t)t->B * t->PH * t->PW * t->CO;
  const double saved = in[i];
  int changed = 0;
  cpool_decisions(t, t->d0);
  for (int sign = -1; sign <= 1; sign += 2) {
    in[i] = saved + sign * h;
    cpool_decisions(t, t->d1);
    for (size_t k = 0; k < n && !changed; k++) changed = t->d0[k] != t->d1[k] || t->d0[k] == -2;
  }
  in[i] = saved;
  return changed;
}

/* ref_conv_pool_backward by finite differences of its forward, and both against
 * the separate layers' references (conv, ReLU, pooling) they stand for. */
static void test_conv_pool_fd(int B, int H, int W, int C, int KH, int KW, int CO, int bias) {
  set_case("ref conv+relu+maxpool %dx%d B%d %dx%d C%d->%d%s:", KH, KW, B, H, W, C, CO,
           bias ? "" : " nobias");
  const int OH = H - KH + 1, OW = W - KW + 1, PH = OH / 2, PW = OW / 2;
  const size_t nx = (size_t)B * H * W * C, nw = (size_t)KH * KW * C * CO;
  const size_t nz = (size_t)B * OH * OW * CO, ny = (size_t)B * PH * PW * CO;
  cpool_ctx t = {B,        H,        W,        C,
                 KH,       KW,       CO,       PH,
                 PW,       dnew(nx), dnew(nw), bias ? dnew((size_t)CO) : NULL,
                 inew(ny), inew(ny), dnew(nz), dnew((size_t)CO)};
  double *wt = dnew(ny), *dw = dnew(nw), *db = dnew((size_t)CO), *y = dnew(ny);
  rand_fill(t.x, nx, -1, 1);
  rand_fill(t.w, nw, -1, 1);
  if (bias) rand_fill(t.bias, (size_t)CO, -0.5, 0.5);
  rand_fill(wt, ny, -1, 1);
  poison(dw, nw);
  poison(db, (size_t)CO);
  ref_conv_pool_backward(t.x, B, H, W, C, t.w, t.bias, KH, KW, CO, PH, PW, wt, dw,
                         bias ? db : NULL);
  fd_layer L = {&t, cpool_fwd, ny, cpool_unstable};
  fd_check("dw", &L, t.w, nw, wt, dw);
  if (bias) fd_check("dbias", &L, t.bias, (size_t)CO, wt, db);

  /* The separate layers: conv, ReLU, pooling; back through the pooling, the ReLU's
   * mask and the convolution. */
  double *z = dnew(nz), *y2 = dnew(ny), *dz = dnew(nz), *dw2 = dnew(nw), *db2 = dnew((size_t)CO);
  ref_conv_pool_forward(t.x, B, H, W, C, t.w, t.bias, KH, KW, CO, PH, PW, y);
  ref_conv2d_forward(t.x, B, H, W, C, t.w, bias ? t.bias : t.zeros, KH, KW, CO, 1, 0, 0, OH, OW, z);
  ref_relu_forward(z, nz, z);
  ref_maxpool_forward(z, B, OH, OW, CO, 2, 2, PH, PW, y2);
  ref_maxpool_backward(z, B, OH, OW, CO, 2, 2, PH, PW, wt, dz);
  ref_relu_backward(z, dz, nz, dz);
  ref_conv2d_backward(t.x, B, H, W, C, t.w, KH, KW, CO, 1, 0, 0, OH, OW, dz, NULL, dw2, db2);
  double d = 0.0;
  for (size_t i = 0; i < ny; i++) d = worse(d, fabs(y[i] - y2[i]));
  for (size_t i = 0; i < nw; i++) d = worse(d, fabs(dw[i] - dw2[i]));
  for (int i = 0; i < CO && bias; i++) d = worse(d, fabs(db[i] - db2[i]));
  report("y, dw, dbias as conv, relu and maxpool", d, 1e-12, "");
  case_end();
}

void test_references(void) {
  test_bn_hand();
  test_bn_fd(2, 3, 2, 3, 0);
  test_bn_fd(3, 1, 3, 2, 1); /* with the ReLU; 9 rows */
  test_bn_fd(1, 1, 1, 3, 0); /* one row: y = beta, dx = 0 */
  test_add_fd(23, 0);
  test_add_fd(23, 1);
  test_gap_fd(2, 3, 5, 3);
  test_gap_fd(1, 1, 1, 4);
  test_ppool_hand();
  test_ppool_fd(2, 5, 6, 2, 3, 2, 1); /* ResNet's pool1: 3x3/2 after ZeroPadding2D(1) */
  test_ppool_fd(1, 5, 5, 3, 2, 2, 1); /* tiled windows, padding on every side */
  test_ppool_fd(2, 3, 4, 1, 2, 1, 2); /* pad >= pool: windows of padding only */
  /*                                   B  H   W  C KH KW CO S PT PL OH OW */
  test_conv_fd("7x7 s2 pad 3 B1 9x11 C2->3",
               (conv_ctx){1, 9, 11, 2, 7, 7, 3, 2, 3, 3, 5, 6, NULL, NULL, NULL});
  test_conv_fd("1x1 s2 B2 5x6 C3->4",
               (conv_ctx){2, 5, 6, 3, 1, 1, 4, 2, 0, 0, 3, 3, NULL, NULL, NULL});
  test_conv_fd("3x3 same s1 B2 5x4 C3->2",
               (conv_ctx){2, 5, 4, 3, 3, 3, 2, 1, 1, 1, 5, 4, NULL, NULL, NULL});
  test_conv_fd("3x3 same s2 B1 7x6 C2->3",
               (conv_ctx){1, 7, 6, 2, 3, 3, 3, 2, 1, 0, 4, 3, NULL, NULL, NULL});
  /*               B  H  W  C KH KW CO bias */
  test_conv_pool_fd(2, 7, 8, 1, 3, 3, 3, 1); /* 5x6 -> 2x3: an odd row unused */
  test_conv_pool_fd(1, 6, 7, 2, 2, 3, 2, 1); /* 5x5 -> 2x2, KH != KW */
  test_conv_pool_fd(3, 5, 5, 3, 3, 3, 2, 0); /* 3x3 -> 1x1, no bias */
}
