/* Tests of the double-precision references in tests/ref/ref.c.
 *
 * 1. Every backward against central finite differences of its forward.
 * 2. Forwards and the documented tie rules against hand-computed tiny cases.
 * 3. The whole reference CNN's gradient against finite differences of its loss.
 *
 * Prints "FAIL: <what> max_rel_err=..." per failed check, "ok: ..." per passed one,
 * and "N passed, M failed" at the end; exits non-zero if anything failed.
 *
 * Error measure (all FD checks): err_i = |a_i - f_i| / max(|a_i|, |f_i|, floor) with
 * a the analytic and f the FD gradient, and floor = 1e-3 * (largest |a| or |f| in the
 * tensor). The FD rounding error scales with the size of the objective, not with each
 * entry, so an entry 1000x below the tensor's largest cannot be resolved relatively;
 * it is held to an absolute error of tol * floor instead. Tolerances are given where
 * they are used; any indexing mistake produces O(1) errors, far above them. */
#include "ref.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer.h"

/* ---- reporting --------------------------------------------------------------------- */

/* NaN counts as a failure: `!(err <= tol)`. */
static void report(const char *what, double max_err, double tol, const char *detail) {
  check(max_err <= tol, "%s max_rel_err=%.3g (tol %.0e)%s", what, max_err, tol, detail);
}

static void expect(const char *what, int cond) { report(what, cond ? 0.0 : 1.0, 0.0, ""); }

/* The larger of two errors, NaN counting as the largest (fmax would drop it). */
static double worse(double a, double b) { return isnan(a) || a > b ? a : b; }

/* Relative error with a floor; NaN in, NaN out (so it fails). */
static double rel_err(double a, double b, double floor) {
  double d = fmax(fmax(fabs(a), fabs(b)), floor);
  return fabs(a - b) / d;
}

/* Max rel_err over two arrays, floor = 1e-3 of their largest magnitude (see top). */
static double max_rel_err(const double *a, const double *b, size_t n) {
  double big = 0.0;
  for (size_t i = 0; i < n; i++) big = fmax(big, fmax(fabs(a[i]), fabs(b[i])));
  double floor = fmax(1e-3 * big, 1e-300), worst = 0.0;
  for (size_t i = 0; i < n; i++) worst = worse(worst, rel_err(a[i], b[i], floor));
  return worst;
}

/* ---- deterministic random numbers (splitmix64) ------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static double uniform(uint64_t *s, double lo, double hi) {
  return lo + (hi - lo) * (double)(splitmix64(s) >> 11) * 0x1.0p-53;
}

static void fill(uint64_t *s, double *p, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; i++) p[i] = uniform(s, lo, hi);
}

/* Backwards must overwrite their outputs: prefill them with NaN so that one left
 * unwritten (or accumulated into) fails. */
static void poison(double *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = NAN;
}

static double *alloc(size_t n) {
  double *p = calloc(n ? n : 1, sizeof *p);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    abort();
  }
  return p;
}

/* ---- finite differences of one layer ----------------------------------------------- */

/* A layer under test: forward() recomputes y (n_y values) from the inputs in ctx, which
 * fd_layer() perturbs in place. unstable(), if set, says whether moving input i by +-h
 * would change a discrete choice (an argmax), making the FD estimate meaningless. */
typedef struct layer {
  void *ctx;
  void (*forward)(void *ctx, double *y);
  size_t n_y;
  int (*unstable)(void *ctx, double *in, size_t i, double h);
} layer;

/* FD gradient of L = sum_k dy[k] * y[k] with respect to in[0..n): fills fd, returns the
 * number of skipped (unstable) entries, which get fd = analytic so they never fail.
 * L(+h) - L(-h) is formed as sum_k dy[k] * (y+[k] - y-[k]) rather than as a difference
 * of two large sums: mathematically the same, but it avoids cancelling O(|L|) rounding
 * errors. The layers here are linear or piecewise linear in each input (softmax aside),
 * so with no kink inside +-h the only FD error is that rounding, ~1e-16 * |y| / h. */
static size_t fd_layer(const layer *L, double *in, size_t n, const double *dy,
                       const double *analytic, double h, double *fd) {
  double *yp = alloc(L->n_y), *ym = alloc(L->n_y);
  size_t skipped = 0;
  for (size_t i = 0; i < n; i++) {
    if (L->unstable && L->unstable(L->ctx, in, i, h)) {
      fd[i] = analytic[i];
      skipped++;
      continue;
    }
    double saved = in[i];
    in[i] = saved + h;
    L->forward(L->ctx, yp);
    in[i] = saved - h;
    L->forward(L->ctx, ym);
    in[i] = saved;
    double diff = 0.0;
    for (size_t k = 0; k < L->n_y; k++) diff += dy[k] * (yp[k] - ym[k]);
    fd[i] = diff / (2.0 * h);
  }
  free(yp);
  free(ym);
  return skipped;
}

/* Compares analytic against FD for one input tensor and reports it. */
static void check_fd(const char *what, const layer *L, double *in, size_t n, const double *dy,
                     const double *analytic, double h, double tol) {
  double *fd = alloc(n);
  size_t skipped = fd_layer(L, in, n, dy, analytic, h, fd);
  char detail[96];
  snprintf(detail, sizeof detail, " [%zu checked, %zu skipped]", n - skipped, skipped);
  double err = max_rel_err(analytic, fd, n);
  /* Skipping most entries would make a pass meaningless. */
  if (skipped * 10 > n) err = worse(err, 1.0);
  report(what, err, tol, detail);
  free(fd);
}

/* Step and tolerance of every FD check. h = 1e-5 ~ cbrt(machine eps) is the usual
 * optimum for central differences: rounding ~1e-16 * |y| / h ~ 1e-11 * |y|, truncation
 * ~h^2 |f"'| / 6 ~ 1e-11 for the smooth softmax and exactly 0 for the (piecewise)
 * linear layers. It stays below the 1e-4 ReLU kink margin and the 0.01
 * max-pool value spacing. Observed errors are 2e-8 or less, so tol = 1e-6 keeps a
 * margin of 50x, while a wrong index or sign gives errors of O(1). */
#define FD_H 1e-5
#define FD_TOL 1e-6

/* ---- conv2d ------------------------------------------------------------------------ */

typedef struct conv_case {
  const char *name;
  int B, H, W, C, KH, KW, CO, stride, pad_top, pad_left, OH, OW;
} conv_case;

typedef struct conv_ctx {
  const conv_case *c;
  double *x, *w, *bias;
} conv_ctx;

static void conv_fwd(void *p, double *y) {
  conv_ctx *t = p;
  const conv_case *c = t->c;
  ref_conv2d_forward(t->x, c->B, c->H, c->W, c->C, t->w, t->bias, c->KH, c->KW, c->CO, c->stride,
                     c->pad_top, c->pad_left, c->OH, c->OW, y);
}

/* TensorFlow 'same' padding: out = ceil(in / stride), and the total padding
 * max((out - 1) * stride + k - in, 0) is split with the smaller half on top/left. */
static void same_padding(int in, int k, int stride, int *out, int *pad_before) {
  *out = (in + stride - 1) / stride;
  int total = (*out - 1) * stride + k - in;
  if (total < 0) total = 0;
  *pad_before = total / 2;
}

static void test_conv_case(conv_case c, uint64_t seed) {
  uint64_t s = seed;
  size_t nx = (size_t)c.B * c.H * c.W * c.C, nw = (size_t)c.KH * c.KW * c.C * c.CO;
  size_t ny = (size_t)c.B * c.OH * c.OW * c.CO;
  double *x = alloc(nx), *w = alloc(nw), *bias = alloc(c.CO), *dy = alloc(ny);
  double *dx = alloc(nx), *dw = alloc(nw), *db = alloc(c.CO);
  double *dw2 = alloc(nw), *db2 = alloc(c.CO);
  fill(&s, x, nx, -1, 1);
  fill(&s, w, nw, -1, 1);
  fill(&s, bias, c.CO, -1, 1);
  fill(&s, dy, ny, -1, 1); /* L = sum dy*y: every output gets its own weight */
  poison(dx, nx);
  poison(dw, nw);
  poison(db, c.CO);
  ref_conv2d_backward(x, c.B, c.H, c.W, c.C, w, c.KH, c.KW, c.CO, c.stride, c.pad_top, c.pad_left,
                      c.OH, c.OW, dy, dx, dw, db);

  conv_ctx ctx = {&c, x, w, bias};
  layer L = {&ctx, conv_fwd, ny, NULL};
  char what[160];
  snprintf(what, sizeof what, "conv2d %s dx", c.name);
  check_fd(what, &L, x, nx, dy, dx, FD_H, FD_TOL);
  snprintf(what, sizeof what, "conv2d %s dw", c.name);
  check_fd(what, &L, w, nw, dy, dw, FD_H, FD_TOL);
  snprintf(what, sizeof what, "conv2d %s dbias", c.name);
  check_fd(what, &L, bias, c.CO, dy, db, FD_H, FD_TOL);

  /* dx == NULL (first layer) must not change dw or dbias. */
  poison(dw2, nw);
  poison(db2, c.CO);
  ref_conv2d_backward(x, c.B, c.H, c.W, c.C, w, c.KH, c.KW, c.CO, c.stride, c.pad_top, c.pad_left,
                      c.OH, c.OW, dy, NULL, dw2, db2);
  snprintf(what, sizeof what, "conv2d %s dx=NULL gives same dw, dbias", c.name);
  expect(what, memcmp(dw, dw2, nw * sizeof *dw) == 0 && memcmp(db, db2, c.CO * sizeof *db) == 0);

  free(x);
  free(w);
  free(bias);
  free(dy);
  free(dx);
  free(dw);
  free(db);
  free(dw2);
  free(db2);
}

static void test_conv_fd(void) {
  /* TF 'same' for the 3x3 stride-2 case below: 7 rows -> 4 outputs, total padding
   * (4-1)*2+3-7 = 2, so 1 on top (and 1 at the bottom); 6 columns -> 3 outputs, total
   * (3-1)*2+3-6 = 1, so 0 on the left (and 1 on the right). */
  int oh, top, ow, left;
  same_padding(7, 3, 2, &oh, &top);
  same_padding(6, 3, 2, &ow, &left);
  expect("same_padding 7->4 top 1, 6->3 left 0", oh == 4 && top == 1 && ow == 3 && left == 0);

  static const conv_case cases[] = {
      /* name                          B  H   W  C KH KW CO  S PT PL OH OW */
      /* 1x1 kernel, batch 3, H != W, odd channels. */
      {"1x1 B3 5x4 C3->5", 3, 5, 4, 3, 1, 1, 5, 1, 0, 0, 5, 4},
      /* 3x3 valid stride 1. */
      {"3x3 valid B1 6x7 C5->3", 1, 6, 7, 5, 3, 3, 3, 1, 0, 0, 4, 5},
      /* 3x3 valid stride 2 on even sizes: the last row and column are never read, so
       * their dx must be exactly 0. */
      {"3x3 valid s2 B2 6x8 C1->3", 2, 6, 8, 1, 3, 3, 3, 2, 0, 0, 2, 3},
      /* 3x3 stride 2 'same' (asymmetric padding, see above). */
      {"3x3 same s2 B3 7x6 C3->5", 3, 7, 6, 3, 3, 3, 5, 2, 1, 0, 4, 3},
      /* 7x7 stride 2 pad 3 (the ResNet stem): most taps read padding. */
      {"7x7 s2 p3 B1 9x11 C1->3", 1, 9, 11, 1, 7, 7, 3, 2, 3, 3, 5, 6},
      /* Non-square kernel, padding on top only. */
      {"3x1 s1 p(1,0) B3 5x3 C5->1", 3, 5, 3, 5, 3, 1, 1, 1, 1, 0, 5, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_conv_case(cases[i], 11 + i);
}

/* ---- max pooling ------------------------------------------------------------------- */

typedef struct pool_ctx {
  int B, H, W, C, pool, stride, OH, OW;
  double *x;
} pool_ctx;

static void pool_fwd(void *p, double *y) {
  pool_ctx *t = p;
  ref_maxpool_forward(t->x, t->B, t->H, t->W, t->C, t->pool, t->stride, t->OH, t->OW, y);
}

/* The first-max position of every window (written independently of ref.c). */
static void pool_argmax(const pool_ctx *t, const double *x, size_t *arg) {
  size_t n = 0;
  for (int b = 0; b < t->B; b++)
    for (int oy = 0; oy < t->OH; oy++)
      for (int ox = 0; ox < t->OW; ox++)
        for (int c = 0; c < t->C; c++) {
          size_t best = 0;
          double m = -INFINITY;
          for (int ky = 0; ky < t->pool; ky++)
            for (int kx = 0; kx < t->pool; kx++) {
              size_t i = (((size_t)b * t->H + (size_t)oy * t->stride + ky) * t->W +
                          (size_t)ox * t->stride + kx) *
                             t->C +
                         c;
              if (x[i] > m) {
                m = x[i];
                best = i;
              }
            }
          arg[n++] = best;
        }
}

/* Unstable if moving x[i] by +h or -h changes which element any window selects. */
static int pool_unstable(void *p, double *in, size_t i, double h) {
  pool_ctx *t = p;
  size_t n = (size_t)t->B * t->OH * t->OW * t->C;
  size_t *a0 = malloc(n * sizeof *a0), *a1 = malloc(n * sizeof *a1);
  if (!a0 || !a1) abort();
  double saved = in[i];
  pool_argmax(t, in, a0);
  int changed = 0;
  for (int sign = -1; sign <= 1; sign += 2) {
    in[i] = saved + sign * h;
    pool_argmax(t, in, a1);
    if (memcmp(a0, a1, n * sizeof *a0) != 0) changed = 1;
  }
  in[i] = saved;
  free(a0);
  free(a1);
  return changed;
}

static void test_pool_case(const char *name, pool_ctx t, uint64_t seed) {
  uint64_t s = seed;
  size_t nx = (size_t)t.B * t.H * t.W * t.C, ny = (size_t)t.B * t.OH * t.OW * t.C;
  double *x = alloc(nx), *dy = alloc(ny), *dx = alloc(nx);
  /* Distinct values (a shuffled grid 0.01 apart) so no window has a tie. */
  for (size_t i = 0; i < nx; i++) x[i] = 0.01 * ((double)i - nx / 2.0);
  for (size_t i = nx - 1; i > 0; i--) {
    size_t j = splitmix64(&s) % (i + 1);
    double tmp = x[i];
    x[i] = x[j];
    x[j] = tmp;
  }
  fill(&s, dy, ny, -1, 1);
  poison(dx, nx);
  ref_maxpool_backward(x, t.B, t.H, t.W, t.C, t.pool, t.stride, t.OH, t.OW, dy, dx);
  t.x = x;
  layer L = {&t, pool_fwd, ny, pool_unstable};
  char what[160];
  snprintf(what, sizeof what, "maxpool %s dx", name);
  check_fd(what, &L, x, nx, dy, dx, FD_H, FD_TOL);
  free(x);
  free(dy);
  free(dx);
}

static void test_pool_fd(void) {
  /* 2x2/2 on odd sizes: the last row and column belong to no window (dx = 0 there). */
  test_pool_case("2x2/2 B2 5x7 C3", (pool_ctx){2, 5, 7, 3, 2, 2, 2, 3, NULL}, 21);
  /* 3x3/2: neighbouring windows share a row/column, so one input can collect twice. */
  test_pool_case("3x3/2 B1 7x6 C2", (pool_ctx){1, 7, 6, 2, 3, 2, 3, 2, NULL}, 22);
  /* 3x3/1: heavy overlap. */
  test_pool_case("3x3/1 B2 5x4 C1", (pool_ctx){2, 5, 4, 1, 3, 1, 3, 2, NULL}, 23);
}

/* ---- relu -------------------------------------------------------------------------- */

typedef struct relu_ctx {
  double *x;
  size_t n;
} relu_ctx;

static void relu_fwd(void *p, double *y) {
  relu_ctx *t = p;
  ref_relu_forward(t->x, t->n, y);
}

static void test_relu_fd(void) {
  uint64_t s = 31;
  const size_t n = 37;
  double *x = alloc(n), *y = alloc(n), *dy = alloc(n), *dx = alloc(n);
  /* Stay 1e-4 away from the kink at 0 so +-h never crosses it. */
  for (size_t i = 0; i < n; i++) {
    do x[i] = uniform(&s, -1, 1);
    while (fabs(x[i]) < 1e-4);
  }
  fill(&s, dy, n, -1, 1);
  ref_relu_forward(x, n, y);
  poison(dx, n);
  ref_relu_backward(y, dy, n, dx);
  relu_ctx ctx = {x, n};
  layer L = {&ctx, relu_fwd, n, NULL};
  check_fd("relu dx", &L, x, n, dy, dx, FD_H, FD_TOL);
  free(x);
  free(y);
  free(dy);
  free(dx);
}

/* ---- dense ------------------------------------------------------------------------- */

typedef struct dense_ctx {
  int B, IN, OUT;
  double *x, *w, *bias;
} dense_ctx;

static void dense_fwd(void *p, double *y) {
  dense_ctx *t = p;
  ref_dense_forward(t->x, t->B, t->IN, t->w, t->bias, t->OUT, y);
}

static void test_dense_case(int B, int IN, int OUT, uint64_t seed) {
  uint64_t s = seed;
  size_t nx = (size_t)B * IN, nw = (size_t)IN * OUT, ny = (size_t)B * OUT;
  double *x = alloc(nx), *w = alloc(nw), *bias = alloc(OUT), *dy = alloc(ny);
  double *dx = alloc(nx), *dw = alloc(nw), *db = alloc(OUT);
  double *dw2 = alloc(nw), *db2 = alloc(OUT);
  fill(&s, x, nx, -1, 1);
  fill(&s, w, nw, -1, 1);
  fill(&s, bias, OUT, -1, 1);
  fill(&s, dy, ny, -1, 1);
  poison(dx, nx);
  poison(dw, nw);
  poison(db, OUT);
  ref_dense_backward(x, B, IN, w, OUT, dy, dx, dw, db);
  dense_ctx ctx = {B, IN, OUT, x, w, bias};
  layer L = {&ctx, dense_fwd, ny, NULL};
  char what[160];
  snprintf(what, sizeof what, "dense B%d %d->%d dx", B, IN, OUT);
  check_fd(what, &L, x, nx, dy, dx, FD_H, FD_TOL);
  snprintf(what, sizeof what, "dense B%d %d->%d dw", B, IN, OUT);
  check_fd(what, &L, w, nw, dy, dw, FD_H, FD_TOL);
  snprintf(what, sizeof what, "dense B%d %d->%d dbias", B, IN, OUT);
  check_fd(what, &L, bias, OUT, dy, db, FD_H, FD_TOL);
  poison(dw2, nw);
  poison(db2, OUT);
  ref_dense_backward(x, B, IN, w, OUT, dy, NULL, dw2, db2);
  snprintf(what, sizeof what, "dense B%d %d->%d dx=NULL gives same dw, dbias", B, IN, OUT);
  expect(what, memcmp(dw, dw2, nw * sizeof *dw) == 0 && memcmp(db, db2, OUT * sizeof *db) == 0);
  free(x);
  free(w);
  free(bias);
  free(dy);
  free(dx);
  free(dw);
  free(db);
  free(dw2);
  free(db2);
}

static void test_dense_fd(void) {
  test_dense_case(1, 7, 3, 41);
  test_dense_case(3, 5, 9, 42);
}

/* ---- softmax cross-entropy --------------------------------------------------------- */

typedef struct xent_ctx {
  int B, K;
  double scale;
  double *z;
  const int *labels;
} xent_ctx;

/* y = scale * loss, so with dy = 1 the FD objective is scale * sum(loss). */
static void xent_fwd(void *p, double *y) {
  xent_ctx *t = p;
  ref_softmax_xent(t->z, t->labels, t->B, t->K, 1.0, y, NULL, NULL);
  for (int b = 0; b < t->B; b++) y[b] *= t->scale;
}

static void test_xent_fd(void) {
  uint64_t s = 51;
  enum { B = 3, K = 5 };
  const int labels[B] = {4, 0, 2};
  double z[B * K], dz[B * K], ones[B] = {1, 1, 1};
  fill(&s, z, (size_t)B * K, -3, 3);
  poison(dz, (size_t)B * K);
  ref_softmax_xent(z, labels, B, K, 1.0 / B, NULL, dz, NULL);
  xent_ctx ctx = {B, K, 1.0 / B, z, labels};
  layer L = {&ctx, xent_fwd, B, NULL};
  /* Smooth: truncation error ~h^2 * |f'''| ~ 1e-12 on top of the rounding. */
  check_fd("softmax_xent B3 K5 dz", &L, z, (size_t)B * K, ones, dz, FD_H, FD_TOL);
}

/* ---- hand-computed forwards and tie rules ------------------------------------------ */

/* Exact small-integer arithmetic, so these compare with a tiny tolerance. */
static double max_abs_diff(const double *a, const double *b, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) worst = worse(worst, fabs(a[i] - b[i]));
  return worst;
}

static void test_hand_cases(void) {
  /* x = [[1,2,3],[4,5,6],[7,8,9]], k = [[1,2],[3,4]], bias 0.5, valid:
   * y00 = 1*1+2*2+4*3+5*4 = 37, y01 = 2+6+15+24 = 47, y10 = 4+10+21+32 = 67,
   * y11 = 5+12+24+36 = 77. */
  {
    const double x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, k[4] = {1, 2, 3, 4}, bias[1] = {0.5};
    const double want[4] = {37.5, 47.5, 67.5, 77.5};
    double y[4];
    ref_conv2d_forward(x, 1, 3, 3, 1, k, bias, 2, 2, 1, 1, 0, 0, 2, 2, y);
    report("conv2d hand 1x3x3x1 * 2x2 valid", max_abs_diff(y, want, 4), 1e-12, "");
  }
  /* Same x, 3x3 ones kernel, stride 2, pad 1 ('same'): each output sums the 2x2 corner
   * block that lies inside: 1+2+4+5 = 12, 2+3+5+6 = 16, 4+5+7+8 = 24, 5+6+8+9 = 28. */
  {
    const double x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, bias[1] = {0};
    double k[9], y[4];
    const double want[4] = {12, 16, 24, 28};
    for (int i = 0; i < 9; i++) k[i] = 1;
    ref_conv2d_forward(x, 1, 3, 3, 1, k, bias, 3, 3, 1, 2, 1, 1, 2, 2, y);
    report("conv2d hand 3x3 s2 pad 1", max_abs_diff(y, want, 4), 1e-12, "");
  }
  /* Non-square 2x1 kernel (ky = 0 weighs 1, ky = 1 weighs 10) with padding only on
   * top, so swapping KH/KW or pad_top/pad_left changes the numbers:
   * row 0 sees [pad, x row 0] = 10 * [1,2,3]; row 1: [1,2,3] + 10 * [4,5,6];
   * row 2: [4,5,6] + 10 * [7,8,9]. */
  {
    const double x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, k[2] = {1, 10}, bias[1] = {0};
    const double want[9] = {10, 20, 30, 41, 52, 63, 74, 85, 96};
    double y[9];
    ref_conv2d_forward(x, 1, 3, 3, 1, k, bias, 2, 1, 1, 1, 1, 0, 3, 3, y);
    report("conv2d hand 2x1 kernel, pad top only", max_abs_diff(y, want, 9), 1e-12, "");
  }
  /* HWIO channel order: 1x1 kernel with w[c][co] = [[1,2],[3,4]] on x = [10,100]:
   * y0 = 10*1 + 100*3 = 310, y1 = 10*2 + 100*4 = 420 (HWOI would give 210, 430). */
  {
    const double x[2] = {10, 100}, k[4] = {1, 2, 3, 4}, bias[2] = {0, 0}, want[2] = {310, 420};
    double y[2];
    ref_conv2d_forward(x, 1, 1, 1, 2, k, bias, 1, 1, 2, 1, 0, 0, 1, 1, y);
    report("conv2d hand HWIO channel order", max_abs_diff(y, want, 2), 1e-12, "");
  }
  /* Dense [IN][OUT]: x = [1,2], w = [[1,2,3],[4,5,6]], bias = [0.25,0,-1]:
   * y = [1+8, 2+10, 3+12] + bias = [9.25, 12, 14]. */
  {
    const double x[2] = {1, 2}, w[6] = {1, 2, 3, 4, 5, 6}, bias[3] = {0.25, 0, -1};
    const double want[3] = {9.25, 12, 14};
    double y[3];
    ref_dense_forward(x, 1, 2, w, bias, 3, y);
    report("dense hand 2->3", max_abs_diff(y, want, 3), 1e-12, "");
  }
  /* Max pool 2x2/2 on a 5x5 with two channels: the 9s in the last row and column
   * belong to no window and must not show up. Channel 1 is channel 0 negated. Most
   * windows hold equal maxima, so the backward shows which one gets the gradient. */
  {
    const double c0[25] = {5, 5, 2, 3, 9, 1, 5, 3, 1, 9, 0, 7, 4,
                           4, 9, 6, 7, 4, 4, 9, 9, 9, 9, 9, 9};
    double x[50], y[8], dx[50], dy[8];
    for (int i = 0; i < 25; i++) {
      x[2 * (size_t)i] = c0[i];
      x[2 * i + 1] = -c0[i];
    }
    ref_maxpool_forward(x, 1, 5, 5, 2, 2, 2, 2, 2, y);
    /* (oy,ox,c): c0 maxima 5, 3, 7, 4; c1 maxima -1, -1, 0, -4. */
    const double want_y[8] = {5, -1, 3, -1, 7, 0, 4, -4};
    report("maxpool hand forward 2x2/2 5x5 C2", max_abs_diff(y, want_y, 8), 0.0, "");
    for (int i = 0; i < 8; i++) dy[i] = i + 1; /* distinct, to see where each goes */
    poison(dx, 50);
    ref_maxpool_backward(x, 1, 5, 5, 2, 2, 2, 2, 2, dy, dx);
    double want_dx[50] = {0};
    /* c0: window (0,0) ties 5,5,5 -> (0,0); (0,1) ties 3,3 -> (0,3); (1,0) ties 7,7 ->
     * (2,1); (1,1) all 4 -> (2,2). c1 (negated): (0,0) = [[-5,-5],[-1,-5]] -> (1,0);
     * (0,1) = [[-2,-3],[-3,-1]] -> (1,3); (1,0) = [[0,-7],[-6,-7]] -> (2,0);
     * (1,1) all -4 -> (2,2). */
    want_dx[2 * (0 * 5 + 0) + 0] = 1;
    want_dx[2 * (0 * 5 + 3) + 0] = 3;
    want_dx[2 * (2 * 5 + 1) + 0] = 5;
    want_dx[2 * (2 * 5 + 2) + 0] = 7;
    want_dx[2 * (1 * 5 + 0) + 1] = 2;
    want_dx[2 * (1 * 5 + 3) + 1] = 4;
    want_dx[2 * (2 * 5 + 0) + 1] = 6;
    want_dx[2 * (2 * 5 + 2) + 1] = 8;
    report("maxpool hand tie rule: first max in raster order", max_abs_diff(dx, want_dx, 50), 0.0,
           "");
  }
  /* Overlapping 3x3/2 windows on a 3x5 (columns 0-2 and 2-4): the single maximum sits
   * in the shared column at (1,2), so both windows send their gradient there and the
   * two add: 1.5 + 2.25 = 3.75. */
  {
    double x[15], y[2], dx[15], dy[2] = {1.5, 2.25};
    for (int i = 0; i < 15; i++) x[i] = 1;
    x[1 * 5 + 2] = 3;
    ref_maxpool_forward(x, 1, 3, 5, 1, 3, 2, 1, 2, y);
    poison(dx, 15);
    ref_maxpool_backward(x, 1, 3, 5, 1, 3, 2, 1, 2, dy, dx);
    double want[15] = {0};
    want[1 * 5 + 2] = 3.75;
    expect("maxpool hand overlapping windows add",
           y[0] == 3 && y[1] == 3 && max_abs_diff(dx, want, 15) == 0.0);
  }
  /* Softmax cross-entropy: z = [0,0] gives loss log 2 and softmax [1/2,1/2]; the first
   * maximum is index 0, so label 0 is correct and label 1 is not. */
  {
    const double z[4] = {0, 0, 0, 0};
    const int labels[2] = {0, 1};
    double loss[2], dz[4];
    int correct[2];
    ref_softmax_xent(z, labels, 2, 2, 0.5, loss, dz, correct);
    const double want_loss[2] = {log(2.0), log(2.0)};
    const double want_dz[4] = {-0.25, 0.25, 0.25, -0.25}; /* (p - onehot) * 0.5 */
    report("softmax_xent hand z=[0,0] loss", max_abs_diff(loss, want_loss, 2), 1e-15, "");
    report("softmax_xent hand z=[0,0] dz", max_abs_diff(dz, want_dz, 4), 1e-15, "");
    expect("softmax_xent hand z=[0,0] correct uses first max", correct[0] == 1 && correct[1] == 0);
  }
  /* Large logits must not overflow: z = [1000, 0, -1000]; label 0 loses ~e^-1000 = 0,
   * label 2 loses 2000. NULL outputs are allowed. */
  {
    const double z[6] = {1000, 0, -1000, 1000, 0, -1000};
    const int labels[2] = {0, 2};
    double loss[2], dz[6];
    ref_softmax_xent(z, labels, 2, 3, 1.0, loss, NULL, NULL);
    ref_softmax_xent(z, labels, 2, 3, 1.0, NULL, dz, NULL);
    const double want_loss[2] = {0, 2000}, want_dz[6] = {0, 0, 0, 1, 0, -1};
    report("softmax_xent large logits loss", max_abs_diff(loss, want_loss, 2), 1e-12, "");
    report("softmax_xent large logits dz", max_abs_diff(dz, want_dz, 6), 1e-12, "");
  }
  /* ReLU: 0 maps to 0 and passes no gradient. */
  {
    const double x[4] = {-2, 0, 0.5, 3}, dy[4] = {1, 1, 1, 1};
    double y[4], dx[4];
    ref_relu_forward(x, 4, y);
    ref_relu_backward(y, dy, 4, dx);
    expect("relu hand", y[0] == 0 && y[1] == 0 && y[2] == 0.5 && y[3] == 3 && dx[0] == 0 &&
                            dx[1] == 0 && dx[2] == 1 && dx[3] == 1);
  }
}

/* Adam with a constant gradient g, from m = v = 0: after t steps m = (1-b1^t) g and
 * v = (1-b2^t) g^2, so the update lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)
 * simplifies to lr * g / (|g| + eps / sqrt(1-b2^t)): about lr * sign(g). */
static void test_adam(void) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  const double g[4] = {0.5, -2, 0, 3e-6}; /* the last one is where eps matters */
  double p[4] = {1, -1, 0.25, 0}, m[4] = {0}, v[4] = {0}, want[4];
  double worst = 0.0;
  for (long t = 1; t <= 2; t++) {
    for (int i = 0; i < 4; i++)
      want[i] = p[i] - lr * g[i] / (fabs(g[i]) + eps / sqrt(1 - pow(b2, (double)t)));
    ref_adam(p, g, m, v, 4, lr, b1, b2, eps, t);
    for (int i = 0; i < 4; i++) {
      worst = worse(worst, rel_err(p[i], want[i], 1e-300));
      worst = worse(worst, rel_err(m[i], (1 - pow(b1, (double)t)) * g[i], 1e-300));
      worst = worse(worst, rel_err(v[i], (1 - pow(b2, (double)t)) * g[i] * g[i], 1e-300));
    }
  }
  report("adam two steps from m=v=0 (closed form)", worst, 1e-12, "");
}

/* ---- the whole model --------------------------------------------------------------- */

static void init_model(uint64_t *s, const ref_cnn_shape *sh, double *p, size_t n) {
  /* Weights uniform with variance 2/fan_in (He). The pooled features are all >= 0, so a
   * dense unit's sign hardly varies across examples; biases in [0,1) keep more units
   * alive for some example, so fewer gradients are trivially 0. Packed layout:
   * k1, b1, k2, b2, k3, b3, k4, b4 (ref.h). */
  int P1H = (sh->H - 2 - 2) / 2 + 1, P1W = (sh->W - 2 - 2) / 2 + 1; /* conv, pool */
  int P2H = (P1H - 2 - 2) / 2 + 1, P2W = (P1W - 2 - 2) / 2 + 1;
  size_t F = (size_t)P2H * P2W * sh->c2;
  size_t sizes[8] = {(size_t)9 * sh->C * sh->c1,
                     (size_t)sh->c1,
                     (size_t)9 * sh->c1 * sh->c2,
                     (size_t)sh->c2,
                     F * sh->dense,
                     (size_t)sh->dense,
                     (size_t)sh->dense * sh->classes,
                     (size_t)sh->classes};
  double fan_in[4] = {9.0 * sh->C, 9.0 * sh->c1, (double)F, (double)sh->dense};
  size_t off = 0;
  for (int t = 0; t < 8; t++) {
    if (t % 2 == 0) {
      double a = sqrt(6.0 / fan_in[t / 2]);
      fill(s, p + off, sizes[t], -a, a);
    } else {
      fill(s, p + off, sizes[t], 0.0, 1.0);
    }
    off += sizes[t];
  }
  if (off != n) check(0, "init_model layout %zu != param count %zu", off, n);
}

/* Every parameter's gradient against central differences of the loss. The loss is
 * piecewise smooth: ReLU and max-pool switch pieces where a pre-activation crosses 0 or
 * a window's argmax changes. If such a kink lies within +-h of the parameter, the FD
 * straddles it and estimates a mix of the two one-sided slopes whose weights depend on
 * h, so FD(h) and FD(h/2) disagree at O(1); away from kinks both are within ~1e-9 of
 * the true slope. Parameters whose two estimates differ by more than 1e-3 relative are
 * therefore skipped (and at most 10% may be). */
static void test_model_case(const char *name, ref_cnn_shape sh, int B, uint64_t seed) {
  uint64_t s = seed;
  size_t n = ref_cnn_param_count(&sh), nx = (size_t)B * sh.H * sh.W * sh.C;
  double *p = alloc(n), *grad = alloc(n), *fd = alloc(n), *x = alloc(nx);
  int *labels = malloc((size_t)B * sizeof *labels);
  if (!labels) abort();
  init_model(&s, &sh, p, n);
  fill(&s, x, nx, 0, 1); /* like scaled pixels */
  for (int b = 0; b < B; b++) labels[b] = (int)(splitmix64(&s) % (uint64_t)sh.classes);
  const double scale = 1.0 / B;
  poison(grad, n);
  int correct = -1;
  double loss = ref_cnn_loss_grad(&sh, p, x, labels, B, scale, grad, &correct);
  char what[160];
  snprintf(what, sizeof what, "cnn %s loss finite, correct in [0,B]", name);
  expect(what, isfinite(loss) && correct >= 0 && correct <= B);

  /* The loss is O(1), so the FD rounding error is ~1e-16 / h ~ 1e-11 (see FD_H). */
  const double h = FD_H;
  size_t skipped = 0;
  for (size_t i = 0; i < n; i++) {
    double saved = p[i], L[4];
    const double steps[4] = {h, -h, h / 2, -h / 2};
    for (int k = 0; k < 4; k++) {
      p[i] = saved + steps[k];
      L[k] = ref_cnn_loss_grad(&sh, p, x, labels, B, scale, NULL, NULL);
    }
    p[i] = saved;
    double fd_h = (L[0] - L[1]) / (2 * h), fd_h2 = (L[2] - L[3]) / h;
    if (rel_err(fd_h, fd_h2, 1e-6) > 1e-3) {
      fd[i] = grad[i];
      skipped++;
    } else {
      fd[i] = fd_h;
    }
  }
  double err = max_rel_err(grad, fd, n);
  if (skipped * 10 > n) err = worse(err, 1.0);
  size_t zeros = 0; /* dead units and unselected pool inputs: checked, but weakly */
  for (size_t i = 0; i < n; i++) zeros += grad[i] == 0.0;
  char detail[96];
  snprintf(detail, sizeof detail, " [%zu params, %zu skipped at kinks, %zu exactly 0]", n, skipped,
           zeros);
  snprintf(what, sizeof what, "cnn %s gradient vs FD", name);
  /* Rounding of the loss difference ~1e-16 / 1e-5 = 1e-11 absolute, against gradients
   * of ~1e-2..1 and a floor of 1e-3 * the largest; observed errors are ~1e-8. */
  report(what, err, 1e-6, detail);

  /* grad == NULL must give the same loss. */
  double loss2 = ref_cnn_loss_grad(&sh, p, x, labels, B, scale, NULL, NULL);
  snprintf(what, sizeof what, "cnn %s loss same without grad", name);
  expect(what, loss2 == loss);
  free(p);
  free(grad);
  free(fd);
  free(x);
  free(labels);
}

/* With every parameter 0 except the output bias c, each logit vector is c, so
 * loss = scale * sum_b (logsumexp(c) - c[label_b]), the gradient is zero except
 * d/dc = scale * sum_b (softmax(c) - onehot(label_b)), and the prediction is argmax c.
 * This pins the output bias to the end of the packed vector. */
static void test_model_output_bias(void) {
  ref_cnn_shape sh = {10, 10, 1, 3, 4, 5, 4};
  size_t n = ref_cnn_param_count(&sh);
  double *p = alloc(n), *grad = alloc(n), x[2 * 100];
  const int labels[2] = {3, 1};
  const double c[4] = {0.3, -0.2, 0.1, 0.5};
  for (size_t i = 0; i < n; i++) p[i] = 0;
  for (int k = 0; k < 4; k++) p[n - 4 + k] = c[k];
  for (int i = 0; i < 200; i++) x[i] = i % 7;
  int correct = -1;
  poison(grad, n);
  double loss = ref_cnn_loss_grad(&sh, p, x, labels, 2, 0.5, grad, &correct);
  double lse = log(exp(c[0]) + exp(c[1]) + exp(c[2]) + exp(c[3]));
  double want_loss = 0.5 * ((lse - c[3]) + (lse - c[1]));
  double worst = rel_err(loss, want_loss, 1e-300);
  for (size_t i = 0; i < n - 4; i++) worst = worse(worst, fabs(grad[i]));
  for (int k = 0; k < 4; k++) {
    double want = 0.5 * (2 * exp(c[k] - lse) - (k == 3) - (k == 1));
    worst = worse(worst, rel_err(grad[n - 4 + k], want, 1e-300));
  }
  report("cnn hand: only output bias set", worst, 1e-14, "");
  expect("cnn hand: correct counts argmax(c) = 3", correct == 1);
  free(p);
  free(grad);
}

static void test_model(void) {
  /* fmnist-cnn: 28 -conv-> 26 -pool-> 13 -conv-> 11 -pool-> 5, F = 5*5*80 = 2000. */
  ref_cnn_shape fm = {28, 28, 1, 64, 80, 64, 10};
  size_t want = (3 * 3 * 1 * 64 + 64) + (3 * 3 * 64 * 80 + 80) + (2000 * 64 + 64) +
                (64 * 10 + 10); /* 640 + 46160 + 128064 + 650 */
  char what[160];
  snprintf(what, sizeof what, "param count fmnist-cnn %zu == %zu", ref_cnn_param_count(&fm), want);
  expect(what, ref_cnn_param_count(&fm) == want && want == 175514);
  /* Too small to survive both stages. */
  ref_cnn_shape tiny = {9, 12, 1, 2, 2, 2, 2};
  expect("param count 0 for a shape too small (H=9)", ref_cnn_param_count(&tiny) == 0);

  /* The real shape runs end to end (one example, small random weights). */
  {
    uint64_t s = 61;
    size_t n = ref_cnn_param_count(&fm);
    double *p = alloc(n), *grad = alloc(n), *x = alloc((size_t)28 * 28);
    init_model(&s, &fm, p, n);
    fill(&s, x, (size_t)28 * 28, 0, 1);
    int label = 7, correct = -1;
    double loss = ref_cnn_loss_grad(&fm, p, x, &label, 1, 1.0, grad, &correct);
    int finite = isfinite(loss) && (correct == 0 || correct == 1);
    for (size_t i = 0; i < n; i++) finite = finite && isfinite(grad[i]);
    expect("cnn fmnist-cnn shape B1 runs, loss and grad finite", finite);
    free(p);
    free(grad);
    free(x);
  }

  test_model_output_bias();
  test_model_case("10x10 C1 3-4-5-4 B2", (ref_cnn_shape){10, 10, 1, 3, 4, 5, 4}, 2, 71);
  /* H != W, C > 1, pool1 drops a column (9 -> 4) and pool2 gives 2x1. */
  test_model_case("14x11 C2 3-5-6-3 B3", (ref_cnn_shape){14, 11, 2, 3, 5, 6, 3}, 3, 72);
  /* Bigger: 16 -> 14 -> 7 -> 5 -> 2 by 15 -> 13 -> 6 -> 4 -> 2, so F = 2*2*6. */
  test_model_case("16x15 C3 4-6-8-5 B5", (ref_cnn_shape){16, 15, 3, 4, 6, 8, 5}, 5, 73);
}

/* ---- the references of the layer kinds, through their ops tables --------------------- */

typedef struct kind_fd_ctx {
  const clt_layer *l;
  clt_ref_io io; /* x, x2 point at the arrays fd_layer perturbs */
} kind_fd_ctx;

static void kind_fwd(void *p, double *y) {
  kind_fd_ctx *t = p;
  clt_ref_io io = t->io;
  io.y = y;
  t->l->ops->ref_forward(t->l, &io);
}

/* n values in [lo, hi), each at least 1e-3 from the others and from the kinks at 0,
 * 0.5 and 6 (ReLU's, ReLU(0.5)'s and relu6's): +-h crosses no kink, changes no
 * maximum. */
static void fill_apart(uint64_t *s, double *p, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; i++) {
    int near;
    do {
      p[i] = uniform(s, lo, hi);
      near = fabs(p[i]) < 1e-3 || fabs(p[i] - 0.5) < 1e-3 || fabs(p[i] - 6.0) < 1e-3;
      for (size_t j = 0; j < i && !near; j++) near = fabs(p[i] - p[j]) < 1e-3;
    } while (near);
  }
}

/* dx (and dx2) of the kind `entry`'s ref_backward against central differences of
 * its ref_forward, inputs in [lo, hi); train: a training-mode pass (Dropout's mask). */
static void test_kind_fd(const char *entry, int B, clt_shape in0, clt_shape in1, double lo,
                         double hi, int train, uint64_t seed) {
  clt_layer l;
  clt_err e = {0};
  char what[160];
  const clt_shape in[2] = {in0, in1};
  if (clt_layer_init(&l, entry, &e) || l.ops->setup(&l, in, &e)) {
    snprintf(what, sizeof what, "%s: %.100s", entry, e.msg);
    expect(what, 0);
    return;
  }
  const int two = l.ninputs > 1;
  const size_t nx = clt_shape_size(in0) * B, nx2 = two ? clt_shape_size(in1) * B : 0;
  const size_t ny = clt_shape_size(l.out) * B;
  double *x = alloc(nx), *x2 = alloc(nx2), *y = alloc(ny), *dy = alloc(ny), *dy2 = alloc(ny);
  double *dx = alloc(nx), *dx2 = alloc(nx2);
  uint64_t s = seed;
  fill_apart(&s, x, nx, lo, hi);
  fill_apart(&s, x2, nx2, lo, hi);
  fill(&s, dy, ny, -1, 1);
  kind_fd_ctx ctx = {&l,
                     {.batch = B,
                      .train = train,
                      .seed = 11,
                      .step = 3,
                      .example0 = 5,
                      .x = x,
                      .x2 = two ? x2 : NULL}};
  kind_fwd(&ctx, y);
  poison(dx, nx);
  poison(dx2, nx2);
  memcpy(dy2, dy, ny * sizeof *dy); /* backwards may overwrite dy */
  clt_ref_io io = ctx.io;
  io.y = y, io.dy = dy2, io.dx = dx, io.dx2 = two ? dx2 : NULL;
  l.ops->ref_backward(&l, &io);
  layer L = {&ctx, kind_fwd, ny, NULL};
  snprintf(what, sizeof what, "%s%s B%d dx", entry, train ? " (train)" : "", B);
  check_fd(what, &L, x, nx, dy, dx, FD_H, FD_TOL);
  if (two) {
    snprintf(what, sizeof what, "%s B%d dx2", entry, B);
    check_fd(what, &L, x2, nx2, dy, dx2, FD_H, FD_TOL);
  }
  free(x);
  free(x2);
  free(y);
  free(dy);
  free(dy2);
  free(dx);
  free(dx2);
}

/* TensorFlow's 'same' average pooling by hand, x = 1..9 in a 3x3 image: 2x2/2 pads
 * one row and column after (windows of 4, 2, 2 and 1 cells); 3x3/1 pads one on every
 * side (corners average 4 cells, the centre all 9). */
static void test_avgpool_hand(void) {
  double x[9], y[9];
  for (int i = 0; i < 9; i++) x[i] = i + 1;
  clt_layer l;
  const clt_shape in[2] = {{3, 3, 1}, {3, 3, 1}};
  const double want2[4] = {3, 4.5, 7.5, 9}, want3[9] = {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7};
  int ok = clt_layer_init(&l, "p=AveragePooling2D(2x2,s2,same)", NULL) == CLT_OK &&
           l.ops->setup(&l, in, NULL) == CLT_OK && l.out.h == 2 && l.out.w == 2 && l.pad_top == 0 &&
           l.pad_left == 0;
  clt_ref_io io = {.batch = 1, .x = x, .y = y};
  if (ok) l.ops->ref_forward(&l, &io);
  for (int i = 0; ok && i < 4; i++) ok = y[i] == want2[i];
  expect("avgpool 2x2/2 same on 3x3 = TensorFlow's [[3, 4.5], [7.5, 9]]", ok);
  ok = clt_layer_init(&l, "p=AveragePooling2D(3x3,s1,same)", NULL) == CLT_OK &&
       l.ops->setup(&l, in, NULL) == CLT_OK && l.out.h == 3 && l.pad_top == 1 && l.pad_left == 1;
  if (ok) l.ops->ref_forward(&l, &io);
  for (int i = 0; ok && i < 9; i++) ok = fabs(y[i] - want3[i]) < 1e-15;
  expect("avgpool 3x3/1 same on 3x3: padding left out of the count", ok);
}

static void test_kinds_fd(void) {
  test_avgpool_hand();
  const clt_shape s = {2, 3, 5}, none = {0, 0, 0};
  test_kind_fd("a=Activation(sigmoid)", 2, s, none, -4, 4, 1, 81);
  test_kind_fd("a=Activation(tanh)", 2, s, none, -3, 3, 1, 82);
  test_kind_fd("a=Activation(relu6)", 2, s, none, -8, 8, 1, 83);
  test_kind_fd("a=Activation(relu)", 2, s, none, -1, 1, 1, 84);
  test_kind_fd("a=Activation(linear)", 2, s, none, -1, 1, 1, 85);
  test_kind_fd("a=Activation(softmax)", 2, s, none, -3, 3, 1, 86);
  test_kind_fd("r=ReLU(6)", 2, s, none, -8, 8, 1, 87);
  test_kind_fd("r=ReLU(0.5)", 2, s, none, -1, 1, 1, 88);
  test_kind_fd("r=Rescaling(0.25,-1)", 2, s, none, -1, 1, 1, 89);
  test_kind_fd("d=Dropout(0.4,s3)", 2, s, none, -1, 1, 1, 90);
  test_kind_fd("d=Dropout(0.4,s3)", 2, s, none, -1, 1, 0, 91);
  test_kind_fd("c=Concatenate", 2, (clt_shape){2, 3, 4}, (clt_shape){2, 3, 7}, -1, 1, 1, 92);
  test_kind_fd("p=AveragePooling2D(3x3,s2,same)", 2, (clt_shape){7, 5, 3}, none, -1, 1, 1, 93);
  test_kind_fd("p=AveragePooling2D(2x2,s2,valid)", 2, (clt_shape){5, 6, 2}, none, -1, 1, 1, 94);
  test_kind_fd("p=AveragePooling2D(3x2,s2x1,same)", 1, (clt_shape){6, 5, 2}, none, -1, 1, 1, 95);
  test_kind_fd("g=GlobalMaxPooling2D", 2, (clt_shape){3, 4, 5}, none, -1, 1, 1, 96);
}

int main(void) {
  test_conv_fd();
  test_pool_fd();
  test_relu_fd();
  test_dense_fd();
  test_xent_fd();
  test_hand_cases();
  test_adam();
  test_model();
  test_kinds_fd();
  return check_summary();
}
