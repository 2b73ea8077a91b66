/* What the three sources of test_ref share: reporting, random numbers, the finite
 * differences of one layer with their step and tolerance, and the tests of
 * test_ref_layers.c and test_ref_model.c that main (test_ref.c) runs. */
#ifndef CLT_TEST_REF_H
#define CLT_TEST_REF_H

#include <stddef.h>
#include <stdint.h>

/* ---- reporting (test_ref.c) ------------------------------------------------------ */

/* One check of an error against a tolerance; NaN fails. */
void report(const char *what, double max_err, double tol, const char *detail);
/* A check that passes when cond holds. */
void expect(const char *what, int cond);
/* The larger of two errors, NaN counting as the largest. */
double worse(double a, double b);
/* Relative error with a floor; NaN in, NaN out. */
double rel_err(double a, double b, double floor);
/* Max rel_err over two arrays, the floor 1e-3 of their largest magnitude. */
double max_rel_err(const double *a, const double *b, size_t n);

/* ---- deterministic random numbers and memory (test_ref.c) ------------------------ */

uint64_t splitmix64(uint64_t *s);
/* Uniform in [lo, hi). */
double uniform(uint64_t *s, double lo, double hi);
void fill(uint64_t *s, double *p, size_t n, double lo, double hi);
/* NaN everywhere: a backward's output left unwritten (or accumulated into) fails. */
void poison(double *p, size_t n);
/* Zeroed doubles; aborts when memory is exhausted. */
double *alloc(size_t n);

/* ---- finite differences of one layer (test_ref.c) -------------------------------- */

/* A layer under test: forward() recomputes y (n_y values) from the inputs in ctx, which
 * fd_layer() perturbs in place. unstable(), if set, says whether moving input i by +-h
 * would change a discrete choice (an argmax), making the FD estimate meaningless. */
typedef struct layer {
  void *ctx;
  void (*forward)(void *ctx, double *y);
  size_t n_y;
  int (*unstable)(void *ctx, double *in, size_t i, double h);
} layer;

/* Compares analytic against the FD gradient of L = sum_k dy[k] * y[k] for one input
 * tensor in[0..n) and reports it; inputs unstable() flags are skipped. */
void check_fd(const char *what, const layer *L, double *in, size_t n, const double *dy,
              const double *analytic, double h, double tol);

/* Step and tolerance of every FD check. h = 1e-5 ~ cbrt(machine eps) is the usual
 * optimum for central differences: rounding ~1e-16 * |y| / h ~ 1e-11 * |y|, truncation
 * ~h^2 |f"'| / 6 ~ 1e-11 for the smooth softmax and exactly 0 for the (piecewise)
 * linear layers. It stays below the 1e-4 ReLU kink margin and the 0.01
 * max-pool value spacing. Observed errors are 2e-8 or less, so tol = 1e-6 keeps a
 * margin of 50x, while a wrong index or sign gives errors of O(1). */
#define FD_H 1e-5
#define FD_TOL 1e-6

/* test_ref_layers.c: every layer reference's backward against finite differences. */
void test_conv_fd(void);
void test_pool_fd(void);
void test_relu_fd(void);
void test_dense_fd(void);
void test_xent_fd(void);
void test_kinds_fd(void);

/* test_ref_model.c: the whole reference CNN. */
void test_model(void);

#endif
