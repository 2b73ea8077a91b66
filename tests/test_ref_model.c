/* test_ref, part 3 (see test_ref.c): the whole reference CNN of tests/ref/ref.c:
 * its parameter count, a hand-computed case, and every parameter's gradient against
 * central finite differences of the loss. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "ref.h"
#include "test_ref.h"

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

void test_model(void) {
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
