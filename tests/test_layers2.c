/* Tests of the layers ResNet50 adds: BatchNormalization, Add, GlobalAveragePooling2D
 * and max pooling with zero padding; and of a first Conv2D with the 2x2 max pooling
 * after it, which the model fuses on CPU replicas.
 *
 * 1. References (tests/ref/ref_resnet.c, and tests/ref/ref.c's convolution at the strides and
 *    paddings ResNet uses, and its fused convolution + ReLU + pooling): every
 *    backward against central finite differences of its forward, and hand-computed
 *    padded-pooling ties. Pure C; `--ref-only` runs just this part (cheap enough
 *    for valgrind). In test_layers2_ref.c.
 * 2. Each layer through its ops table (setup, prepare, forward, backward) on ONE
 *    replica (device 0, or $CLT_TEST_DEVICE) against the references at awkward sizes:
 *    C not a multiple of 8 (scalar tails) and a multiple of it, batch 1 and 3, odd
 *    H and W, more rows than one reduction block, a mean far from 0, one row.
 *    BatchNormalization, Add and GlobalAveragePooling2D in this file (with main);
 *    padded max pooling and the Conv2D + MaxPooling2D pair in test_layers2_pool.c.
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
#include "ref.h"
#include "ref_resnet.h"
#include "test_layers2.h"

void distinct_fill(double *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = ((double)i - (double)n / 2 + 0.5) * 0x1.0p-8;
  for (size_t k = n; k > 1; k--) { /* p[k - 1] swaps with one of p[0 .. k - 1] */
    size_t j = rng_next() % k;
    double t = p[k - 1];
    p[k - 1] = p[j];
    p[j] = t;
  }
}

/* ================================================================================== */
/* 2. Device layers against the references                                             */
/* ================================================================================== */

clt_layer new_layer(const char *fmt, ...) {
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
  clt_layer_io io = layer_io(t->B, X, Y, DY, DX, P, G, S, ST);
  io.stat_weight = 0.5f;

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
  clt_layer_io io = layer_io(t->B, X, Y, DY, DX, NULL, NULL, S, NULL);
  io.x2 = X2, io.dx2 = DX2;
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
  /* The gradient plan's in-place form (CLT_FUSE_GRAD_IN_PLACE): dy's buffer is
   * one input's gradient (or both, or one with the other NULL), the other's,
   * when given elsewhere, gets the same values. */
  static const char *const shared[] = {"dx = dy", "dx2 = dy", "dx = dx2 = dy", "dx = dy, dx2 NULL",
                                       "dx2 = dy, dx NULL"};
  for (int form = 0; form < 5; form++) {
    dev_fill(DX, 0, n, GARBAGE);
    dev_fill(DX2, 0, n, GARBAGE);
    upload(DY, 0, dy, n);
    io.dx = form == 0 || form == 2 || form == 3 ? DY : form == 4 ? NULL : DX;
    io.dx2 = form == 1 || form == 2 || form == 4 ? DY : form == 3 ? NULL : DX2;
    char what[96];
    snprintf(what, sizeof what, "backward, %s", shared[form]);
    if (api_failed(l.ops->backward(&l, &io, &E), what)) goto done;
    download(DY, 0, dx, n);
    snprintf(what, sizeof what, "%s: dy's buffer", shared[form]);
    check(what, dx, dx_ref, n, TOL_EXACT);
    cl_mem other = form == 0 ? DX2 : form == 1 ? DX : NULL;
    if (other) {
      download(other, 0, dx2, n);
      snprintf(what, sizeof what, "%s: the other gradient", shared[form]);
      check(what, dx2, dx2_ref, n, TOL_EXACT);
    }
    snprintf(what, sizeof what, "%s: no other buffer written", shared[form]);
    check_untouched(what, other == DX2 ? DX : DX2, 0, n + (other ? 0 : TAIL));
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
  clt_layer_io io = layer_io(B, X, Y, DY, DX, NULL, NULL, S, NULL);
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
  test_bn_backward_fusions();
  test_add_all();
  test_gap(1, 7, 7, 16);
  test_gap(3, 5, 3, 12);
  test_gap(3, 1, 1, 5);
  test_gap(2, 3, 5, 64);
  test_ppool_all();
  test_conv_pool_all();
  test_conv_pool_conditions();
  replica_close();
  return summary();
}
