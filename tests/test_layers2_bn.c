/* BatchNormalization's backward as the plan runs it in ResNets (part of test_layers2):
 *
 * - The fused ReLU's mask comes from x and the statistics, recomputed as the forward
 *   computed y, not from y: the backward of BatchNormalization(relu) must give the
 *   same bits as that of BatchNormalization without a ReLU fed dy masked by the
 *   device's own y > 0 (which is what the backward computed when it read y), while
 *   y's buffer holds something else. Inputs with ties (outputs exactly 0) included,
 *   training and frozen (the moving statistics).
 * - fusion.sums_input_bias: the dx pass also writes the bias gradient of the Conv2D
 *   before it (the column sums of dx). Against today's path, the plain backward and
 *   then clt_bias_grad over dx (the Conv2D's own pass): dx, dgamma, dbeta and the
 *   bias gradient the same bits; the bias gradient against the double reference's
 *   column sums of dx; nothing else written; without dx it is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer.h"
#include "ref_resnet.h"
#include "test_layers2.h"

#define BN_EPS 1.001e-5

/* Whether floats [off, off + n) of a and b hold the same bits. */
static int same_bits(cl_mem a, size_t a_off, cl_mem b, size_t b_off, size_t n) {
  float *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
  if (!p || !q) fatal("allocating staging buffers");
  download_f(a, a_off, p, n);
  download_f(b, b_off, q, n);
  const int same = memcmp(p, q, n * sizeof *p) == 0;
  free(p);
  free(q);
  return same;
}

/* The parameters' values: gamma in [0.5, 1.5], moving variance in [0.5, 2]; beta and
 * the moving mean in [-0.5, 0.5], or 0 with ties (outputs exactly 0 then). */
static void fill_params(const clt_layer *l, cl_mem P, int C, int ties) {
  double *v = dnew((size_t)C);
  for (int i = 0; i < 4; i++) {
    if (i == 0 || i == 3) rand_fill(v, (size_t)C, 0.5, i == 0 ? 1.5 : 2.0);
    else if (ties) memset(v, 0, (size_t)C * sizeof *v);
    else rand_fill(v, (size_t)C, -0.5, 0.5);
    upload(P, l->params[i].offset, v, (size_t)C);
  }
}

/* x in [-1, 1], or with ties from {-1, -0.5, 0, 0.5, 1} evenly per channel. */
static void fill_x(double *x, int rows, int C, int ties) {
  if (!ties) {
    rand_fill(x, (size_t)rows * C, -1, 1);
    return;
  }
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < C; c++) x[(size_t)r * C + c] = 0.5 * ((r + c) % 5 - 2);
}

typedef struct mask_case {
  int B, H, W, C, frozen, ties;
} mask_case;

static void test_mask(const mask_case *t) {
  set_case("batchnorm relu mask from x B%d %dx%d C%d%s%s:", t->B, t->H, t->W, t->C,
           t->frozen ? " frozen" : "", t->ties ? " ties" : "");
  clt_layer lr = new_layer("bn_relu=BatchNormalization(eps1.001e-05,m0.99,relu)");
  clt_layer lp = new_layer("bn_plain=BatchNormalization(eps1.001e-05,m0.99)");
  const clt_shape in = {t->H, t->W, t->C};
  if (api_failed(lr.ops->setup(&lr, &in, &E), "setup") ||
      api_failed(lp.ops->setup(&lp, &in, &E), "setup"))
    goto done;
  if (skip_large(8.0 * t->B * t->H * t->W * t->C)) goto done;
  lr.frozen = lp.frozen = t->frozen;
  const size_t flat = place_params(&lr);
  if (place_params(&lp) != flat) fatal("the two layers' layouts differ");
  if (api_failed(clt_layer_prepare(&lr, R, t->B, NULL, &E), "prepare") ||
      api_failed(clt_layer_prepare(&lp, R, t->B, NULL, &E), "prepare"))
    goto done;
  const int rows = t->B * t->H * t->W, C = t->C;
  const size_t n = (size_t)rows * C, ns = clt_layer_scratch_floats(&lr, t->B);
  double *x = dnew(n), *dy = dnew(n), *y = dnew(n);
  fill_x(x, rows, C, t->ties);
  rand_fill(dy, n, -1, 1);
  cl_mem X = dev_new(n), Y = dev_new(n), DY = dev_new(n), DX = dev_new(n), DX2 = dev_new(n);
  cl_mem P = dev_new(flat), G = dev_new(flat), G2 = dev_new(flat), S = dev_new(ns);
  cl_mem ST = dev_new(2 * (size_t)C);
  upload(X, 0, x, n);
  upload(DY, 0, dy, n);
  fill_params(&lr, P, C, t->ties);
  clt_layer_io io = layer_io(t->B, X, Y, DY, DX, P, G, S, ST);
  if (api_failed(lr.ops->forward(&lr, &io, &E), "forward")) goto done;
  download(Y, 0, y, n);
  /* Frozen with ties: x = the moving mean (0) and beta 0 give outputs exactly 0. */
  size_t kinks = 0, bad = 0;
  for (size_t i = 0; i < n; i++) {
    kinks += x[i] == 0;
    bad += x[i] == 0 && y[i] != 0;
  }
  /* y's buffer negative: a backward that read it would mask everything. */
  dev_fill(Y, 0, n, -1.0f);
  if (api_failed(lr.ops->backward(&lr, &io, &E), "backward (relu)")) goto done;
  /* Today's: dy masked by y > 0, into the layer without a ReLU. */
  relu_mask(dy, y, n);
  upload(DY, 0, dy, n);
  io.dx = DX2;
  io.grads = G2;
  if (api_failed(lp.ops->backward(&lp, &io, &E), "backward (masked dy, no relu)")) goto done;
  expect("dx: the same bits as from dy masked by y > 0", !same_bits(DX, 0, DX2, 0, n), 1);
  for (int p = 0; p < 2 && !t->frozen; p++) {
    const clt_param *q = &lr.params[p];
    expect(p ? "dbeta: the same bits" : "dgamma: the same bits",
           !same_bits(G, q->offset, G2, q->offset, q->size), 1);
  }
  if (t->ties && t->frozen) expect("ties: outputs exactly 0 where x is the mean", bad, kinks);
done:
  case_end();
}

typedef struct sums_case {
  int B, H, W, C, relu, frozen;
} sums_case;

static void test_sums(const sums_case *t) {
  set_case("batchnorm dx sums as the conv's bias gradient B%d %dx%d C%d%s%s:", t->B, t->H, t->W,
           t->C, t->relu ? " relu" : "", t->frozen ? " frozen" : "");
  clt_layer l = new_layer("bn_sums=BatchNormalization(eps1.001e-05,m0.99%s)",
                          t->relu ? ",relu" : "");
  const clt_shape in = {t->H, t->W, t->C};
  if (api_failed(l.ops->setup(&l, &in, &E), "setup")) goto done;
  if (skip_large(8.0 * t->B * t->H * t->W * t->C)) goto done;
  l.frozen = t->frozen;
  const int rows = t->B * t->H * t->W, C = t->C;
  const size_t flat = place_params(&l), nc = (size_t)C, n = (size_t)rows * C;
  /* The Conv2D's bias gradient after the layer's own entries. */
  const clt_fusion sums = {.sums_input_bias = 1, .input_bias = flat};
  if (api_failed(clt_layer_prepare(&l, R, t->B, &sums, &E), "prepare")) goto done;
  const size_t ns = clt_layer_scratch_floats(&l, t->B);
  double *x = dnew(n), *dy = dnew(n), *y = dnew(n), *dx = dnew(n), *dx_ref = dnew(n);
  double *gamma = dnew(nc), *beta = dnew(nc), *mv = dnew(nc), *dg = dnew(nc), *db = dnew(nc);
  double *bias = dnew(nc), *want = dnew(nc), *scale = dnew(nc);
  rand_fill(x, n, -1, 1);
  rand_fill(dy, n, -1, 1);
  cl_mem X = dev_new(n), Y = dev_new(n), DY = dev_new(n), DX = dev_new(n + TAIL);
  cl_mem P = dev_new(flat), G = dev_new(flat + nc + TAIL), S = dev_new(ns + TAIL);
  cl_mem DXU = dev_new(n), GU = dev_new(flat + nc), ST = dev_new(2 * nc);
  upload(X, 0, x, n);
  upload(DY, 0, dy, n);
  fill_params(&l, P, C, 0);
  download(P, l.params[0].offset, gamma, nc);
  download(P, l.params[1].offset, beta, nc);
  download(P, l.params[3].offset, mv, nc);
  clt_layer_io io = layer_io(t->B, X, Y, DY, DXU, P, GU, S, ST);
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  download(Y, 0, y, n);
  /* Today's path: the backward alone, then the Conv2D's pass over dx. */
  if (api_failed(l.ops->backward(&l, &io, &E), "backward (unfused)") ||
      api_failed(clt_bias_grad(&io, DXU, NULL, S, 0, rows, C, flat, &E), "clt_bias_grad"))
    goto done;
  dev_fill(S, 0, ns + TAIL, GARBAGE);
  io.fusion = sums;
  io.dx = DX;
  io.grads = G;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward (sums)")) goto done;
  expect("dx: the same bits as unfused", !same_bits(DX, 0, DXU, 0, n), 1);
  expect("bias gradient: the same bits as clt_bias_grad's", !same_bits(G, flat, GU, flat, nc), 1);
  if (!t->frozen) {
    for (int p = 0; p < 2; p++) {
      const clt_param *q = &l.params[p];
      expect(p ? "dbeta: the same bits" : "dgamma: the same bits",
             !same_bits(G, q->offset, GU, q->offset, q->size), 1);
    }
  }
  check_flat("no other entry of the layer's written", G, &l, flat, 0, t->frozen ? -1 : 1);
  check_untouched("past the bias gradient", G, flat + nc, TAIL);
  check_untouched("dx tail", DX, n, TAIL);
  check_untouched("scratch tail", S, ns, TAIL);

  /* Against the double reference: the column sums of its dx, on the scale of the
   * sums of |dx| (training's are 0 up to rounding). */
  if (t->relu) relu_mask(dy, y, n);
  if (t->frozen) {
    for (int c = 0; c < C; c++) scale[c] = gamma[c] / sqrt(mv[c] + BN_EPS);
    for (size_t i = 0; i < n; i++) dx_ref[i] = dy[i] * scale[i % nc];
  } else {
    ref_batchnorm_backward(x, rows, C, gamma, beta, BN_EPS, 0, dy, dx_ref, dg, db);
  }
  download(DX, 0, dx, n);
  download(G, flat, bias, nc);
  check("dx", dx, dx_ref, n, TOL_REDUCE);
  double worst = 0;
  for (int c = 0; c < C; c++) {
    double s = 0, mag = 0;
    for (int r = 0; r < rows; r++) {
      s += dx_ref[(size_t)r * C + c];
      mag += fabs(dx_ref[(size_t)r * C + c]);
    }
    want[c] = s;
    worst = worse(worst, fabs(bias[c] - s) / (mag > 1e-30 ? mag : 1e-30));
  }
  report("bias gradient = column sums of dx (error / sum |dx|)", worst, 1e-5, "");

  /* Without dx there is nothing to sum: refused. */
  io.dx = NULL;
  const int st = l.ops->backward(&l, &io, &E);
  expect("without dx: refused", st != CLT_ERR_INTERNAL, 1);
  E = (clt_err){0};
done:
  case_end();
}

void test_bn_backward_fusions(void) {
  static const mask_case masks[] = {
      /* B, H, W, C, frozen, ties */
      {3, 9, 7, 5, 0, 0},   /* scalar channels only */
      {2, 9, 9, 20, 0, 1},  /* float8 and a tail of 4, ties */
      {2, 9, 8, 300, 0, 0}, /* CPU items of 256 and 44 channels */
      {3, 5, 7, 16, 1, 1},  /* frozen: the moving statistics, ties */
      {2, 13, 11, 12, 1, 0},
  };
  for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) test_mask(&masks[i]);
  static const sums_case sums[] = {
      /* B, H, W, C, relu, frozen */
      {3, 9, 7, 5, 1, 0},     /* 189 rows: one block, scalar channels */
      {2, 13, 11, 12, 0, 0},  /* 286 rows: a block and a short one; float8 and a tail */
      {2, 16, 16, 64, 1, 0},  /* 512 rows: two full blocks */
      {4, 10, 10, 300, 1, 0}, /* CPU items of 256 and 44 channels, 2 blocks */
      {4, 3, 3, 2048, 0, 0},  /* few rows, many channels (ResNet50's conv5) */
      {3, 9, 7, 24, 1, 1},    /* frozen: dx = g * gamma * inv_std */
      {2, 13, 11, 16, 0, 1},
  };
  for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++) test_sums(&sums[i]);
}
