/* Tests of the layers ResNet50 adds: BatchNormalization, Add, GlobalAveragePooling2D
 * and max pooling with zero padding; and of a first Conv2D with the 2x2 max pooling
 * after it, which the model fuses on CPU replicas.
 *
 * 1. References (tests/ref/ref_resnet.c, and tests/ref/ref.c's convolution at the strides and
 *    paddings ResNet uses, and its fused convolution + ReLU + pooling): every
 *    backward against central finite differences of its forward, and hand-computed
 *    padded-pooling ties. Pure C; `--ref-only` runs just this part (cheap enough
 *    for valgrind).
 * 2. Each layer through its ops table (setup, prepare, forward, backward) on ONE
 *    replica (device 0, or $CLT_TEST_DEVICE) against the references at awkward sizes:
 *    C not a multiple of 8 (scalar tails) and a multiple of it, batch 1 and 3, odd
 *    H and W, more rows than one reduction block, a mean far from 0, one row.
 *
 * Conventions as tests/test_kernels.c: inputs are drawn in double and rounded to float
 * so the references see the device's inputs; outputs, gradients, state and scratch
 * are pre-filled with GARBAGE so an unwritten or accumulated entry shows, and the
 * floats past their ends (and the gaps between parameters) must keep it. Error:
 * max |dev - ref| / max(max |ref|, 1e-6) over a tensor. A failure prints the case,
 * the tensor, the worst index and the values there. Prints "N passed, M failed" last
 * and exits non-zero if anything failed; with no OpenCL device part 2 fails. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer.h"
#include "model.h"
#include "plan.h"
#include "ref.h"
#include "ref_resnet.h"

/* Device tolerances, relative to the tensor's largest |ref|. An indexing, padding,
 * tie or statistics bug gives errors of O(1) (a one-pass variance of the mean-100
 * case errs by ~1e-2).
 * - reductions over rows in float (batch norm, average pooling) and the float
 *   arithmetic after them, incl. dx's cancellation: TOL_REDUCE.
 * - elementwise sums and max pooling (exact up to the rounding of one add): TOL_EXACT. */
#define TOL_REDUCE 1e-4
#define TOL_EXACT 1e-6

/* n distinct values 2^-8 apart, none 0 (which would tie with the padding), shuffled. */
static void distinct_fill(double *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = ((double)i - (double)n / 2 + 0.5) * 0x1.0p-8;
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = rng_next() % (i + 1);
    double t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

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

static void test_references(void) {
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

/* ================================================================================== */
/* 2. Device layers against the references                                             */
/* ================================================================================== */

/* A fresh layer from its description entry ("name=Kind(args)"); fatal if refused. */
static clt_layer new_layer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static clt_layer new_layer(const char *fmt, ...) {
  char entry[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(entry, sizeof entry, fmt, ap);
  va_end(ap);
  clt_layer l;
  if (clt_layer_init(&l, entry, &E)) fatal(E.msg);
  return l;
}

/* ---- BatchNormalization ------------------------------------------------------------ */

typedef struct bn_case {
  int B, H, W, C, relu;
  double center; /* inputs are center + U(-1, 1) */
} bn_case;

static void test_bn(const bn_case *t) {
  set_case("batchnorm B%d %dx%d C%d%s%s:", t->B, t->H, t->W, t->C, t->relu ? " relu" : "",
           t->center != 0 ? " mean 100" : "");
  clt_layer l = new_layer("bn_under_test=BatchNormalization(eps1.001e-05,m0.99%s)",
                          t->relu ? ",relu" : "");
  const double eps = 1.001e-5;
  const clt_shape in = {t->H, t->W, t->C};
  if (api_failed(l.ops->setup(&l, &in, &E), "setup")) goto done;
  /* Seven passes over the activations (statistics, apply, gradient sums, dx). */
  if (skip_large(8.0 * t->B * t->H * t->W * t->C)) goto done;
  static const char *const names[] = {"gamma", "beta", "moving_mean", "moving_variance"};
  static const float inits[] = {1, 0, 0, 1};
  size_t bad = (l.out.h != t->H) + (l.out.w != t->W) + (l.out.c != t->C) + (l.nparams != 4) +
               (!l.ops->state_floats || l.ops->state_floats(&l) != 2 * (size_t)t->C);
  for (int i = 0; i < 4 && l.nparams == 4; i++) {
    const clt_param *p = &l.params[i];
    bad += strcmp(p->name, names[i]) != 0 || p->rank != 1 || p->dims[0] != t->C ||
           p->size != (size_t)t->C || p->glorot_fan_in != 0 || p->glorot_fan_out != 0 ||
           p->init_constant != inits[i] || p->non_trainable != (i >= 2);
  }
  expect("setup: shape, state, parameters as Keras", bad, 5);
  if (bad) goto done;
  const size_t flat = place_params(&l);
  if (api_failed(clt_layer_prepare(&l, R, t->B, NULL, &E), "prepare")) goto done;

  const int rows = t->B * t->H * t->W, C = t->C;
  const size_t n = (size_t)rows * C, nc = (size_t)C;
  const size_t go = l.params[0].offset, bo = l.params[1].offset;
  const size_t mo = l.params[2].offset, vo = l.params[3].offset;
  double *x = dnew(n), *gamma = dnew(nc), *beta = dnew(nc), *mm = dnew(nc), *mv = dnew(nc);
  double *dy = dnew(n), *y = dnew(n), *y_ref = dnew(n), *dx = dnew(n), *dx_ref = dnew(n);
  double *mean = dnew(nc), *var = dnew(nc), *varu = dnew(nc), *got = dnew(nc), *want = dnew(nc);
  double *dg = dnew(nc), *db = dnew(nc), *dg_ref = dnew(nc), *db_ref = dnew(nc);
  rand_fill(x, n, -1, 1);
  for (size_t i = 0; i < n; i++) x[i] = (float)(x[i] + t->center);
  rand_fill(gamma, nc, 0.5, 1.5);
  rand_fill(beta, nc, -0.5, 0.5);
  rand_fill(mm, nc, -0.5, 0.5);
  rand_fill(mv, nc, 0.5, 2.0);
  rand_fill(dy, n, -1, 1);
  for (size_t i = 0; i < nc; i++) mm[i] = (float)(mm[i] + t->center);

  const size_t ns = clt_layer_scratch_floats(&l, t->B), nst = 2 * nc;
  cl_mem X = dev_new(n), Y = dev_new(n + TAIL), DY = dev_new(n), DX = dev_new(n + TAIL);
  cl_mem P = dev_new(flat), G = dev_new(flat), S = dev_new(ns + TAIL), ST = dev_new(nst + TAIL);
  upload(X, 0, x, n);
  upload(P, go, gamma, nc);
  upload(P, bo, beta, nc);
  upload(P, mo, mm, nc);
  upload(P, vo, mv, nc);
  upload(DY, 0, dy, n);
  clt_layer_io io = {.replica = R,
                     .batch = t->B,
                     .train = 1,
                     .stat_weight = 0.5f,
                     .x = X,
                     .y = Y,
                     .dy = DY,
                     .dx = DX,
                     .params = P,
                     .grads = G,
                     .scratch = S,
                     .state = ST};

  /* Training forward. */
  if (api_failed(l.ops->forward(&l, &io, &E), "forward (train)")) goto done;
  download(Y, 0, y, n);
  ref_batchnorm_forward_train(x, rows, C, gamma, beta, eps, t->relu, y_ref, mean, var, varu);
  check("train: y", y, y_ref, n, TOL_REDUCE);
  download(ST, 0, got, nc);
  check("train: state mean", got, mean, nc, TOL_REDUCE);
  download(ST, nc, got, nc);
  for (int c = 0; c < C; c++) want[c] = 1.0 / sqrt(var[c] + eps);
  check("train: state 1/sqrt(var+eps)", got, want, nc, TOL_REDUCE);
  download(G, mo, got, nc);
  for (int c = 0; c < C; c++) want[c] = 0.5 * mean[c];
  check("train: moving_mean slot = 0.5 * mean", got, want, nc, TOL_REDUCE);
  download(G, vo, got, nc);
  for (int c = 0; c < C; c++) want[c] = 0.5 * varu[c];
  check("train: moving_variance slot = 0.5 * unbiased var", got, want, nc, TOL_REDUCE);
  check_flat("train: no other gradient entry written", G, &l, flat, 2, 3);
  check_untouched("train: y tail", Y, n, TAIL);
  check_untouched("train: state tail", ST, nst, TAIL);
  check_untouched("train: scratch tail", S, ns, TAIL);

  /* Repeatable bit for bit (fixed reduction order). */
  {
    float *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    float *s1 = malloc(nst * sizeof *s1), *s2 = malloc(nst * sizeof *s2);
    if (!y1 || !y2 || !s1 || !s2) fatal("allocating staging buffers");
    download_f(Y, 0, y1, n);
    download_f(ST, 0, s1, nst);
    int fail = api_failed(l.ops->forward(&l, &io, &E), "forward (train, again)");
    if (!fail) {
      download_f(Y, 0, y2, n);
      download_f(ST, 0, s2, nst);
      expect("train again: same bits",
             memcmp(y1, y2, n * sizeof *y1) != 0 || memcmp(s1, s2, nst * sizeof *s1) != 0, 1);
    }
    free(y1);
    free(y2);
    free(s1);
    free(s2);
    if (fail) goto done;
  }

  /* Backward. */
  float *stats_before = malloc(2 * nc * sizeof *stats_before);
  float *stats_after = malloc(2 * nc * sizeof *stats_after);
  if (!stats_before || !stats_after) fatal("allocating staging buffers");
  download_f(G, mo, stats_before, nc);
  download_f(G, vo, stats_before + nc, nc);
  int fail = api_failed(l.ops->backward(&l, &io, &E), "backward");
  if (!fail) {
    download_f(G, mo, stats_after, nc);
    download_f(G, vo, stats_after + nc, nc);
    expect("backward leaves the moving-statistics slots alone",
           memcmp(stats_before, stats_after, 2 * nc * sizeof(float)) != 0, 1);
  }
  free(stats_before);
  free(stats_after);
  if (fail) goto done;
  double *dym = dnew(n);
  memcpy(dym, dy, n * sizeof *dy);
  if (t->relu) relu_mask(dym, y, n);
  ref_batchnorm_backward(x, rows, C, gamma, beta, eps, 0, dym, dx_ref, dg_ref, db_ref);
  download(DX, 0, dx, n);
  download(G, go, dg, nc);
  download(G, bo, db, nc);
  check("backward: dx", dx, dx_ref, n, TOL_REDUCE);
  check("backward: dgamma", dg, dg_ref, nc, TOL_REDUCE);
  check("backward: dbeta", db, db_ref, nc, TOL_REDUCE);
  check_flat("backward: gaps untouched", G, &l, flat, 0, 3);
  check_untouched("backward: dx tail", DX, n, TAIL);
  check_untouched("backward: scratch tail", S, ns, TAIL);

  /* dx = NULL: the same dgamma, dbeta, written afresh, and still no moving-stat slot. */
  upload(DY, 0, dy, n);
  dev_fill(G, 0, flat, GARBAGE);
  io.dx = NULL;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward with dx = NULL")) goto done;
  double *dg2 = dnew(nc), *db2 = dnew(nc);
  download(G, go, dg2, nc);
  download(G, bo, db2, nc);
  check("dx=NULL: dgamma unchanged", dg2, dg, nc, 0.0);
  check("dx=NULL: dbeta unchanged", db2, db, nc, 0.0);
  check_flat("dx=NULL: nothing else written", G, &l, flat, 0, 1);

  /* Inference: moving statistics, no state needed, no gradient written. */
  dev_fill(G, 0, flat, GARBAGE);
  dev_fill(Y, 0, n, GARBAGE);
  io.train = 0;
  io.state = NULL;
  if (api_failed(l.ops->forward(&l, &io, &E), "forward (inference)")) goto done;
  download(Y, 0, y, n);
  ref_batchnorm_forward_infer(x, rows, C, gamma, beta, mm, mv, eps, t->relu, y_ref);
  check("inference: y", y, y_ref, n, TOL_REDUCE);
  check_flat("inference: no gradient written", G, &l, flat, 0, -1);
  check_untouched("inference: y tail", Y, n, TAIL);
  check_untouched("inference: scratch tail", S, ns, TAIL);
done:
  case_end();
}

static void test_bn_all(void) {
  static const bn_case cases[] = {
      /* B, H, W, C, relu, center */
      {3, 9, 7, 5, 1, 0},     /* C < 8: the scalar path only; 189 rows, 2 blocks */
      {1, 13, 11, 12, 0, 0},  /* one float8 chunk and a scalar tail of 4 */
      {3, 5, 7, 16, 1, 0},    /* float8 only */
      {2, 9, 9, 64, 1, 0},    /* 162 rows x 64 */
      {3, 7, 5, 24, 0, 100},  /* mean 100, spread 0.58: a one-pass variance cancels */
      {3, 11, 9, 24, 0, 100}, /* the same over 297 rows: 3 blocks combined (CPUs; last short) */
      {1, 1, 1, 8, 0, 0},     /* one row: var 0, y = beta, dx = 0 */
      {4, 1, 1, 2048, 0, 0},  /* ResNet50 conv5 at 32x32: few rows, many channels */
      {2, 9, 8, 300, 1, 0}, /* CPU sums: items of 256 and 44 channels (float8, tail 4), 2 blocks */
      {4, 2, 2, 256, 1, 0},   {4, 16, 16, 64, 1, 0}, /* ResNet50 conv1 at 32x32: 8 blocks */
      {4, 8, 8, 256, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_bn(&cases[i]);
}

/* ---- Add --------------------------------------------------------------------------- */

typedef struct add_case {
  int B, H, W, C, relu;
} add_case;

static void test_add(const add_case *t) {
  set_case("add B%d %dx%d C%d%s:", t->B, t->H, t->W, t->C, t->relu ? " relu" : "");
  clt_layer l = new_layer("add_under_test=Add%s", t->relu ? "(relu)" : "");
  const clt_shape in[2] = {{t->H, t->W, t->C}, {t->H, t->W, t->C}};
  if (api_failed(l.ops->setup(&l, in, &E), "setup")) goto done;
  expect("setup: ninputs 2, output shape, no parameters",
         (l.ops->ninputs != 2) + (l.out.h != t->H) + (l.out.w != t->W) + (l.out.c != t->C) +
             (l.nparams != 0),
         5);
  if (api_failed(clt_layer_prepare(&l, R, t->B, NULL, &E), "prepare")) goto done;
  const size_t n = (size_t)t->B * t->H * t->W * t->C;
  double *x = dnew(n), *x2 = dnew(n), *dy = dnew(n), *y = dnew(n), *y_ref = dnew(n);
  double *dx = dnew(n), *dx2 = dnew(n), *dx_ref = dnew(n), *dx2_ref = dnew(n);
  rand_fill(x, n, -1, 1);
  rand_fill(x2, n, -1, 1);
  rand_fill(dy, n, -1, 1);
  const size_t ns = clt_layer_scratch_floats(&l, t->B);
  cl_mem X = dev_new(n), X2 = dev_new(n), Y = dev_new(n + TAIL), DY = dev_new(n);
  cl_mem DX = dev_new(n + TAIL), DX2 = dev_new(n + TAIL), S = dev_new(ns + TAIL);
  upload(X, 0, x, n);
  upload(X2, 0, x2, n);
  upload(DY, 0, dy, n);
  clt_layer_io io = {.replica = R,
                     .batch = t->B,
                     .train = 1,
                     .x = X,
                     .x2 = X2,
                     .y = Y,
                     .dy = DY,
                     .dx = DX,
                     .dx2 = DX2,
                     .scratch = S};
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  download(Y, 0, y, n);
  ref_add(x, x2, n, t->relu, y_ref);
  check("y", y, y_ref, n, TOL_EXACT);
  check_untouched("y tail", Y, n, TAIL);

  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  download(DX, 0, dx, n);
  download(DX2, 0, dx2, n);
  ref_add_backward(y, dy, n, t->relu, dx_ref, dx2_ref); /* the device's y: its ReLU mask */
  check("dx", dx, dx_ref, n, TOL_EXACT);
  check("dx2", dx2, dx2_ref, n, TOL_EXACT);
  check_untouched("dx tail", DX, n, TAIL);
  check_untouched("dx2 tail", DX2, n, TAIL);

  /* One gradient at a time: the other NULL, the given one written afresh. */
  for (int which = 0; which < 2; which++) {
    cl_mem keep = which == 0 ? DX : DX2;
    dev_fill(DX, 0, n, GARBAGE);
    dev_fill(DX2, 0, n, GARBAGE);
    upload(DY, 0, dy, n);
    io.dx = which == 0 ? DX : NULL;
    io.dx2 = which == 1 ? DX2 : NULL;
    if (api_failed(l.ops->backward(&l, &io, &E),
                   which ? "backward, dx NULL" : "backward, dx2 NULL"))
      goto done;
    download(keep, 0, which == 0 ? dx : dx2, n);
    check(which == 0 ? "dx2=NULL: dx" : "dx=NULL: dx2", which == 0 ? dx : dx2,
          which == 0 ? dx_ref : dx2_ref, n, TOL_EXACT);
    check_untouched(which == 0 ? "dx2=NULL: dx2 buffer untouched" : "dx=NULL: dx buffer untouched",
                    which == 0 ? DX2 : DX, 0, n);
  }
  io.dx = io.dx2 = NULL;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward, both NULL")) goto done;
  expect("backward with both gradients NULL", 0, 1);
done:
  case_end();
}

static void test_add_all(void) {
  static const add_case cases[] = {
      {3, 5, 7, 5, 1},  /* 525 floats: a tail of 5 past the last float8 */
      {1, 4, 4, 16, 0}, /* a multiple of 8 */
      {3, 3, 3, 12, 1}, /* 324: a tail of 4 */
      {1, 1, 1, 3, 0},  /* fewer than 8 floats in all */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_add(&cases[i]);

  set_case("add shape mismatch:");
  clt_layer l = new_layer("conv2_block1_add=Add");
  const clt_shape in[2] = {{3, 5, 7}, {3, 5, 8}};
  clt_err err = {0};
  int status = l.ops->setup(&l, in, &err);
  expect("setup refuses with CLT_ERR_ARG", status != CLT_ERR_ARG, 1);
  expect("the message names the layer and both shapes",
         !strstr(err.msg, "conv2_block1_add") || !strstr(err.msg, "3x5x7") ||
             !strstr(err.msg, "3x5x8"),
         1);
  printf("      message: %s\n", err.msg);
}

/* ---- GlobalAveragePooling2D -------------------------------------------------------- */

static void test_gap(int B, int H, int W, int C) {
  set_case("gap B%d %dx%d C%d:", B, H, W, C);
  clt_layer l = new_layer("gap_under_test=GlobalAveragePooling2D");
  const clt_shape in = {H, W, C};
  if (api_failed(l.ops->setup(&l, &in, &E), "setup")) goto done;
  if (skip_large((double)B * H * W * C)) goto done;
  expect("setup: output 1x1xC, no parameters",
         (l.out.h != 1) + (l.out.w != 1) + (l.out.c != C) + (l.nparams != 0), 4);
  if (api_failed(clt_layer_prepare(&l, R, B, NULL, &E), "prepare")) goto done;
  const size_t nx = (size_t)B * H * W * C, ny = (size_t)B * C;
  double *x = dnew(nx), *dy = dnew(ny), *y = dnew(ny), *y_ref = dnew(ny);
  double *dx = dnew(nx), *dx_ref = dnew(nx);
  rand_fill(x, nx, -1, 1);
  rand_fill(dy, ny, -1, 1);
  const size_t ns = clt_layer_scratch_floats(&l, B);
  cl_mem X = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny), DX = dev_new(nx + TAIL);
  cl_mem S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(DY, 0, dy, ny);
  clt_layer_io io = {
      .replica = R, .batch = B, .train = 1, .x = X, .y = Y, .dy = DY, .dx = DX, .scratch = S};
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  download(Y, 0, y, ny);
  download(DX, 0, dx, nx);
  ref_gap_forward(x, B, H, W, C, y_ref);
  ref_gap_backward(dy, B, H, W, C, dx_ref);
  check("y", y, y_ref, ny, TOL_REDUCE);
  check("dx", dx, dx_ref, nx, TOL_EXACT);
  check_untouched("y tail", Y, ny, TAIL);
  check_untouched("dx tail", DX, nx, TAIL);
  io.dx = NULL;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward, dx NULL")) goto done;
  expect("backward with dx NULL", 0, 1);
done:
  case_end();
}

/* ---- max pooling with padding ------------------------------------------------------ */

typedef struct ppool_case {
  int B, H, W, C, pool, stride, pad;
  int mode; /* 0: distinct values around 0; 1: ReLU outputs (many 0s: ties with the
               padding); 2: values from {0, 1, 2} (ties everywhere) */
} ppool_case;

static void test_ppool(const ppool_case *t) {
  static const char *const modes[] = {"distinct", "relu-like", "ties"};
  set_case("maxpool %d s%d pad %d C%d %dx%d B%d %s:", t->pool, t->stride, t->pad, t->C, t->H, t->W,
           t->B, modes[t->mode]);
  clt_layer l = new_layer("pool_under_test=MaxPooling2D(%d,s%d)", t->pool, t->stride);
  l.pad = (clt_pad){t->pad, t->pad, t->pad, t->pad};
  const clt_shape in = {t->H, t->W, t->C};
  if (api_failed(l.ops->setup(&l, &in, &E), "setup")) goto done;
  if (skip_large((double)t->B * t->H * t->W * t->C * t->pool * t->pool)) goto done;
  const int OH = (t->H + 2 * t->pad - t->pool) / t->stride + 1;
  const int OW = (t->W + 2 * t->pad - t->pool) / t->stride + 1;
  expect("setup: output shape", (l.out.h != OH) + (l.out.w != OW) + (l.out.c != t->C), 3);
  if (l.out.h != OH || l.out.w != OW || l.out.c != t->C) goto done;
  if (api_failed(clt_layer_prepare(&l, R, t->B, NULL, &E), "prepare")) goto done;
  const size_t nx = (size_t)t->B * t->H * t->W * t->C, ny = (size_t)t->B * OH * OW * t->C;
  double *x = dnew(nx), *dy = dnew(ny), *y = dnew(ny), *y_ref = dnew(ny);
  double *dx = dnew(nx), *dx_ref = dnew(nx);
  if (t->mode == 0) distinct_fill(x, nx);
  for (size_t i = 0; i < nx && t->mode == 1; i++) x[i] = fmax(0.0, urand(-1, 1));
  for (size_t i = 0; i < nx && t->mode == 2; i++) x[i] = (double)(rng_next() % 3);
  rand_fill(dy, ny, -1, 1);
  const size_t ns = clt_layer_scratch_floats(&l, t->B);
  cl_mem X = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny), DX = dev_new(nx + TAIL);
  cl_mem S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(DY, 0, dy, ny);
  /* dx starts as 7: inputs no window selects must be overwritten with 0. */
  dev_fill(DX, 0, nx, 7.0f);
  clt_layer_io io = {
      .replica = R, .batch = t->B, .train = 1, .x = X, .y = Y, .dy = DY, .dx = DX, .scratch = S};
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  download(Y, 0, y, ny);
  download(DX, 0, dx, nx);
  ref_maxpool_pad_forward(x, t->B, t->H, t->W, t->C, t->pool, t->stride, t->pad, OH, OW, y_ref);
  ref_maxpool_pad_backward(x, t->B, t->H, t->W, t->C, t->pool, t->stride, t->pad, OH, OW, dy,
                           dx_ref);
  check("y", y, y_ref, ny, TOL_EXACT);
  check("dx", dx, dx_ref, nx, TOL_EXACT);
  check_untouched("y tail", Y, ny, TAIL);
  check_untouched("dx tail", DX, nx, TAIL);
done:
  case_end();
}

static void test_ppool_all(void) {
  static const ppool_case cases[] = {
      /* B, H, W, C, pool, stride, pad, mode */
      {3, 9, 7, 5, 3, 2, 1, 0},  /* ResNet's pool1 shape of window; scalar channels */
      {1, 8, 8, 16, 3, 2, 1, 1}, /* after a ReLU: zeros tie with the padding */
      {3, 7, 6, 12, 3, 2, 1, 2}, /* ties; float8 and a scalar tail */
      {1, 5, 5, 64, 3, 2, 1, 0}, {3, 6, 5, 3, 2, 2, 1, 0}, /* tiled windows with padding */
      {1, 3, 4, 8, 2, 1, 3, 1}, /* pad >= pool: windows of padding only (y = 0) */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_ppool(&cases[i]);

  set_case("maxpool bad padding:");
  clt_layer l = new_layer("pool1_pool=MaxPooling2D(3,s2)");
  l.pad = (clt_pad){-1, -1, -1, -1};
  clt_err err = {0};
  const clt_shape in = {5, 5, 3};
  expect("negative padding refused", l.ops->setup(&l, &in, &err) != CLT_ERR_ARG, 1);
}

/* ---- Conv2D + MaxPooling2D, fused on the cpu backend --------------------------------- */

typedef struct cpool_case {
  int B, H, W, C, KH, KW, CO, bias;
} cpool_case;

/* The pair as the replica's plan runs it (fused where the backend fuses_conv_pool,
 * as two layers elsewhere) against ref_conv_pool_*: the conv's forward, the
 * pooling's forward, the pooling's backward, the conv's backward (no input gradient:
 * it reads the model's input), with the buffers src/engine/net.c gives them. */
static void test_conv_pool(const cpool_case *t) {
  set_case("conv+maxpool %dx%d C%d->%d %dx%d B%d%s (%s):", t->KH, t->KW, t->C, t->CO, t->H, t->W,
           t->B, t->bias ? "" : " nobias", R->backend == &clt_backend_cpu ? "fused" : "not fused");
  static clt_model m; /* large: not on the stack */
  char desc[160];
  snprintf(desc, sizeof desc,
           "conv=Conv2D(%d,%dx%d,s1,valid%s,relu) pool=MaxPooling2D(2,s2) flat=Flatten d=Dense(2)",
           t->CO, t->KH, t->KW, t->bias ? "" : ",nobias");
  if (api_failed(clt_model_parse("pair", (clt_shape){t->H, t->W, t->C}, 2, CLT_PRE_UNIT, desc, &m,
                                 &E),
                 "model"))
    goto done;
  clt_layer conv = m.layers[0], pool = m.layers[1];
  static clt_plan plan;
  clt_plan_build(&m, R->backend->name, R->backend->fuses_conv_pool, &plan);
  const int fused = plan.steps[0].fusion.pools;
  expect("the plan fuses the pair where the backend does",
         (fused != R->backend->fuses_conv_pool) + (plan.nsteps != m.nlayers - fused), 2);
  const int OH = t->H - t->KH + 1, OW = t->W - t->KW + 1, PH = OH / 2, PW = OW / 2;
  const int K = t->KH * t->KW * t->C;
  if (skip_large((double)t->B * OH * OW * K * t->CO)) goto done;
  const size_t flat = place_params(&conv);
  if (api_failed(clt_layer_prepare(&conv, R, t->B, &plan.steps[0].fusion, &E), "conv prepare") ||
      (!fused &&
       api_failed(clt_layer_prepare(&pool, R, t->B, &plan.steps[1].fusion, &E), "pool prepare")))
    goto done;
  const size_t nx = (size_t)t->B * t->H * t->W * t->C, nz = (size_t)t->B * OH * OW * t->CO;
  const size_t ny = (size_t)t->B * PH * PW * t->CO, nw = conv.params[0].size;
  const size_t koff = conv.params[0].offset, boff = conv.params[1].offset;
  double *x = dnew(nx), *w = dnew(nw), *bias = dnew((size_t)t->CO), *dy = dnew(ny);
  double *y = dnew(ny), *y_ref = dnew(ny), *dw = dnew(nw), *dw_ref = dnew(nw);
  double *db = dnew((size_t)t->CO), *db_ref = dnew((size_t)t->CO);
  rand_fill(x, nx, -1, 1);
  rand_fill(w, nw, -sqrt(3.0 / K), sqrt(3.0 / K));
  if (t->bias) rand_fill(bias, (size_t)t->CO, -0.5, 0.5);
  rand_fill(dy, ny, -1, 1);
  size_t ns = clt_layer_scratch_floats(&conv, t->B);
  if (clt_layer_scratch_floats(&pool, t->B) > ns) ns = clt_layer_scratch_floats(&pool, t->B);
  cl_mem X = dev_new(nx), YC = dev_new(nz + TAIL), YP = dev_new(ny + TAIL), DYP = dev_new(ny);
  cl_mem DYC = dev_new(nz + TAIL), P = dev_new(flat), G = dev_new(flat), S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(P, koff, w, nw);
  if (t->bias) upload(P, boff, bias, (size_t)t->CO);
  upload(DYP, 0, dy, ny);
  clt_layer_io io = {.replica = R,
                     .batch = t->B,
                     .train = 1,
                     .params = P,
                     .grads = G,
                     .scratch = S,
                     .fusion = plan.steps[0].fusion};
  /* As the net runs them: fused, the conv writes the pooling's output and reads
   * its output gradient, and the pooling's passes do not run. */
  io.x = X, io.y = fused ? YP : YC;
  if (api_failed(conv.ops->forward(&conv, &io, &E), "conv forward")) goto done;
  io.x = YC, io.y = YP, io.fusion = plan.steps[fused ? 0 : 1].fusion;
  if (!fused && api_failed(pool.ops->forward(&pool, &io, &E), "pool forward")) goto done;
  io.dy = DYP, io.dx = DYC;
  if (!fused && api_failed(pool.ops->backward(&pool, &io, &E), "pool backward")) goto done;
  io.x = X, io.y = fused ? YP : YC, io.dy = fused ? DYP : DYC, io.dx = NULL;
  io.fusion = plan.steps[0].fusion;
  if (api_failed(conv.ops->backward(&conv, &io, &E), "conv backward")) goto done;
  download(YP, 0, y, ny);
  download(G, koff, dw, nw);
  download(G, boff, db, (size_t)t->CO);
  ref_conv_pool_forward(x, t->B, t->H, t->W, t->C, w, t->bias ? bias : NULL, t->KH, t->KW, t->CO,
                        PH, PW, y_ref);
  ref_conv_pool_backward(x, t->B, t->H, t->W, t->C, w, t->bias ? bias : NULL, t->KH, t->KW, t->CO,
                         PH, PW, dy, dw_ref, db_ref);
  check("y", y, y_ref, ny, TOL_REDUCE);
  check("dW", dw, dw_ref, nw, TOL_REDUCE);
  if (t->bias) check("dbias", db, db_ref, (size_t)t->CO, TOL_REDUCE);
  check_flat("grads: gaps untouched", G, &conv, flat, 0, t->bias ? 1 : 0);
  check_untouched("pooled output tail", YP, ny, TAIL);
  check_untouched("conv output tail", YC, nz, TAIL);
  check_untouched("conv gradient tail", DYC, nz, TAIL);
  check_untouched("scratch tail", S, ns, TAIL);
done:
  case_end();
}

/* Where the plan must keep the layers apart, on a backend that fuses the pair
 * (fused or not, the results are the same: this guards the conditions). */
static void test_conv_pool_conditions(void) {
  set_case("conv+maxpool fusing conditions:");
  static clt_model m;
  static const struct {
    const char *desc, *what;
    int fused;
  } cases[] = {
      {"c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "fused", 1},
      {"c=Conv2D(16,3x3,s1,valid) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "no ReLU", 0},
      {"c=Conv2D(24,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)",
       "filters not a multiple of 16", 0},
      {"c=Conv2D(16,3x3,s1,same,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "padding", 0},
      {"c=Conv2D(16,3x3,s2,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "stride 2", 0},
      {"c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(3,s2) f=Flatten d=Dense(2)", "pool 3", 0},
      {"c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(2,s1) f=Flatten d=Dense(2)", "stride 1 pool",
       0},
      {"c=Conv2D(16,7x7,s1,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "49 taps", 0},
      {"a=Conv2D(16,1x1,s1,valid) c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) "
       "f=Flatten d=Dense(2)",
       "input not the model's (its gradient is needed)", 0},
      {"c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) q=MaxPooling2D(2,s2)<c f=Flatten<p "
       "g=Flatten<q s=Concatenate<f,g d=Dense(2)",
       "output read twice", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (clt_model_parse("pair", (clt_shape){10, 10, 1}, 2, CLT_PRE_UNIT, cases[i].desc, &m, &E)) {
      report(cases[i].what, 1.0, 0.0, E.msg);
      continue;
    }
    static clt_plan plan;
    clt_plan_build(&m, "cpu", 1, &plan);
    const int c = clt_model_find(&m, "c"), p = clt_model_find(&m, "p");
    int pools = 0, pool_runs = 0;
    for (int k = 0; k < plan.nsteps; k++) {
      pools += plan.steps[k].layer == c && plan.steps[k].fusion.pools;
      pool_runs += plan.steps[k].layer == p;
    }
    expect(cases[i].what, (pools != cases[i].fused) + (pool_runs == cases[i].fused), 2);
  }
}

/* ---- main -------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const int ref_only = argc > 1 && strcmp(argv[1], "--ref-only") == 0;
  if (argc > 1 && !ref_only) {
    fprintf(stderr, "usage: %s [--ref-only]\n", argv[0]);
    return 2;
  }
  rng_seed(0x1a7e25);
  test_references();
  if (ref_only) return summary();

  replica_open();
  test_bn_all();
  test_add_all();
  test_gap(1, 7, 7, 16);
  test_gap(3, 5, 3, 12);
  test_gap(3, 1, 1, 5);
  test_gap(2, 3, 5, 64);
  test_ppool_all();
  static const cpool_case cpool_cases[] = {
      /* B, H, W, C, KH, KW, CO, bias */
      {5, 28, 28, 1, 3, 3, 64, 1}, /* fmnist-cnn's first layer: 26 -> 13 */
      {3, 27, 27, 1, 3, 3, 16, 1}, /* 25 -> 12: the last row and column in no window */
      {7, 27, 27, 3, 3, 3, 64, 1}, /* RGB, K = 27 (the generic tap loops) */
      {1, 9, 8, 1, 3, 3, 16, 0},   /* no bias; small mode's size */
      {3, 7, 8, 2, 2, 3, 32, 1},   /* KH != KW, C = 2; small mode's size */
  };
  for (size_t i = 0; i < sizeof cpool_cases / sizeof cpool_cases[0]; i++)
    test_conv_pool(&cpool_cases[i]);
  test_conv_pool_conditions();
  replica_close();
  return summary();
}
