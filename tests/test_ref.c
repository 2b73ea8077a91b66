/* Tests of the double-precision references in tests/ref/ref.c.
 *
 * 1. Every backward against central finite differences of its forward, the layer
 *    kinds' references (through their ops tables) among them: test_ref_layers.c.
 * 2. Forwards and the documented tie rules against hand-computed tiny cases, and
 *    Adam's closed form: this file, with main and the helpers test_ref.h declares.
 * 3. The whole reference CNN's gradient against finite differences of its loss:
 *    test_ref_model.c.
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

#include "check.h"
#include "test_ref.h"

/* ---- reporting --------------------------------------------------------------------- */

/* NaN counts as a failure: `!(err <= tol)`. */
void report(const char *what, double max_err, double tol, const char *detail) {
  check(max_err <= tol, "%s max_rel_err=%.3g (tol %.0e)%s", what, max_err, tol, detail);
}

void expect(const char *what, int cond) { report(what, cond ? 0.0 : 1.0, 0.0, ""); }

/* The larger of two errors, NaN counting as the largest (fmax would drop it). */
double worse(double a, double b) { return isnan(a) || a > b ? a : b; }

/* Relative error with a floor; NaN in, NaN out (so it fails). */
double rel_err(double a, double b, double floor) {
  double d = fmax(fmax(fabs(a), fabs(b)), floor);
  return fabs(a - b) / d;
}

/* Max rel_err over two arrays, floor = 1e-3 of their largest magnitude (see top). */
double max_rel_err(const double *a, const double *b, size_t n) {
  double big = 0.0;
  for (size_t i = 0; i < n; i++) big = fmax(big, fmax(fabs(a[i]), fabs(b[i])));
  double floor = fmax(1e-3 * big, 1e-300), worst = 0.0;
  for (size_t i = 0; i < n; i++) worst = worse(worst, rel_err(a[i], b[i], floor));
  return worst;
}

/* ---- deterministic random numbers (splitmix64) ------------------------------------- */

uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
double uniform(uint64_t *s, double lo, double hi) {
  return lo + (hi - lo) * (double)(splitmix64(s) >> 11) * 0x1.0p-53;
}

void fill(uint64_t *s, double *p, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; i++) p[i] = uniform(s, lo, hi);
}

/* Backwards must overwrite their outputs: prefill them with NaN so that one left
 * unwritten (or accumulated into) fails. */
void poison(double *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = NAN;
}

double *alloc(size_t n) {
  double *p = calloc(n ? n : 1, sizeof *p);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    abort();
  }
  return p;
}

/* ---- finite differences of one layer ----------------------------------------------- */

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
void check_fd(const char *what, const layer *L, double *in, size_t n, const double *dy,
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
