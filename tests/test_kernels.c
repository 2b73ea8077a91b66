/* Tests of the OpenCL kernels and layers against the double-precision references of
 * tests/ref/ref.c (the ground truth; tests/test_ref.c checks those by finite differences).
 *
 * 1. Conv2D, MaxPooling2D and Dense layers through their ops tables, forward and
 *    backward, at awkward sizes (odd batches, channels and spatial sizes that are not
 *    multiples of the 64-wide work-groups, padding, strides, a 7x7 kernel).
 * 2. The loss, metrics, Adam, batch-gather and fused convolution + pooling
 *    (conv_pool_*) kernels, launched directly.
 * 3. The whole fmnist-cnn model through clt_net: gradient, loss, accuracy, one Adam
 *    step, an evaluation-only pass and an empty slice.
 *
 * Everything runs on ONE replica (PoCL compiles each program once per replica): device
 * 0 of clt_devices_enumerate, or the index in $CLT_TEST_DEVICE. With no OpenCL device
 * the test fails, so it can never pass vacuously.
 *
 * Inputs are drawn in double, rounded to float, and the references are computed on the
 * rounded values, so the only differences left are the device's float arithmetic.
 * Error measure: max |dev - ref| / max(max |ref|, 1e-6) over a tensor. Outputs, the
 * gradient buffer and scratch are pre-filled with GARBAGE, so an entry a kernel fails
 * to write (or accumulates into) shows up as a huge error, and regions a layer must
 * not touch (the alignment gaps of the flat buffers, the tail past the last work-item)
 * are checked to still hold it.
 *
 * Prints "ok: ..." per passed check, "FAIL: <what> max_err=..." per failed one, and
 * "N passed, M failed" last; exits non-zero if anything failed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm.h"
#include "harness.h"
#include "idx.h"
#include "layer.h"
#include "model.h"
#include "net.h"
#include "ref.h"

/* Tolerances (relative to the largest |ref| of the tensor). Observed errors on PoCL are
 * in brackets; an indexing, padding or tie-rule bug gives errors of O(1).
 * - GEMM paths (conv, dense): float sums of up to 2000 products [<= 1.3e-6].
 * - exp/log kernels (softmax cross-entropy, metrics): a few float roundings [<= 2e-7].
 * - copies and max (pooling, gather): exact up to the float rounding of the input
 *   [<= 1e-7; the pooling gradient of overlapping windows adds two floats].
 * - the whole model: float accumulation through four layers [<= 2.2e-6]; the margin
 *   leaves room for a ReLU or max-pool choice within rounding of a tie flipping on
 *   another device. */
#define TOL_GEMM 1e-4
#define TOL_ELEMWISE 1e-5
#define TOL_EXACT 1e-6
#define TOL_MODEL 1e-3
/* Adam runs in float with beta2 = 0.999f, whose 1 - beta2 is 1.3e-5 off 0.001: v (and,
 * through sqrt(v), the step) carries that relative error, as TensorFlow's float32 Adam
 * does. A wrong bias correction or eps placement gives errors of 1e-1 to O(1). */
#define TOL_ADAM 1e-4

/* ---- helpers of this test ------------------------------------------------------------ */

/* A layer's outputs and scratch must end where they are declared to end. */
static void check_tails(cl_mem y, size_t ny, cl_mem dx, size_t nx, cl_mem scratch, size_t ns) {
  check_untouched("y tail", y, ny, TAIL);
  check_untouched("dx tail", dx, nx, TAIL);
  check_untouched("scratch tail", scratch, ns, TAIL);
}

/* n distinct values, exact in float (n < 2^24), in random order: no max-pool ties. */
static void distinct_fill(double *p, size_t n) {
  int *perm = malloc(n * sizeof *perm);
  if (!perm) fatal("allocating a permutation");
  for (size_t i = 0; i < n; i++) perm[i] = (int)i;
  shuffle(perm, (int)n);
  for (size_t i = 0; i < n; i++) p[i] = ((double)perm[i] - (double)n / 2) * 0x1.0p-12;
  free(perm);
}

/* ---- 1. Conv2D ----------------------------------------------------------------------- */

typedef struct conv_case {
  int B, H, W, C, CO, KH, KW, stride, pad_same, relu;
  int split_k; /* exercises cltrain's CPU GEMM's split K: kept in small mode on CPUs */
} conv_case;

/* TensorFlow's output size and top/left padding, computed independently of the layer. */
static void tf_out_pad(int in, int k, int s, int same, int *out, int *before) {
  if (!same) {
    *out = (in - k) / s + 1;
    *before = 0;
    return;
  }
  *out = (in + s - 1) / s;
  int total = (*out - 1) * s + k - in;
  *before = total > 0 ? total / 2 : 0;
}

static void test_conv(const conv_case *t) {
  set_case("conv2d %dx%d s%d %s%s C%d->%d %dx%d B%d:", t->KH, t->KW, t->stride,
           t->pad_same ? "same" : "valid", t->relu ? " relu" : "", t->C, t->CO, t->H, t->W, t->B);
  clt_layer l;
  char spec[96];
  snprintf(spec, sizeof spec, "conv_under_test=Conv2D(%d,%dx%d,s%d,%s%s)", t->CO, t->KH, t->KW,
           t->stride, t->pad_same ? "same" : "valid", t->relu ? ",relu" : "");
  if (api_failed(clt_layer_init(&l, spec, &E), "init")) goto done;
  if (api_failed(l.ops->setup(&l, &(clt_shape){t->H, t->W, t->C}, &E), "setup")) goto done;

  int OH, OW, pt, pl;
  tf_out_pad(t->H, t->KH, t->stride, t->pad_same, &OH, &pt);
  tf_out_pad(t->W, t->KW, t->stride, t->pad_same, &OW, &pl);
  const double work = (double)t->B * OH * OW * t->KH * t->KW * t->C * t->CO;
  if (skip_above(work, t->split_k && R->backend == &clt_backend_cpu ? 2e5 : 45000.0)) goto done;
  expect("setup: output shape and padding as TensorFlow",
         (l.out.h != OH) + (l.out.w != OW) + (l.out.c != t->CO) + (l.pad_top != pt) +
             (l.pad_left != pl),
         5);
  if (l.out.h != OH || l.out.w != OW || l.out.c != t->CO) goto done;
  const size_t flat = place_params(&l);
  if (api_failed(clt_layer_prepare(&l, R, t->B, NULL, &E), "prepare")) goto done;

  const size_t nx = (size_t)t->B * t->H * t->W * t->C, ny = (size_t)t->B * OH * OW * t->CO;
  const size_t nw = l.params[0].size, nb = l.params[1].size;
  const size_t koff = l.params[0].offset, boff = l.params[1].offset;
  double *x = dnew(nx), *w = dnew(nw), *bias = dnew(nb), *dy = dnew(ny);
  double *y_ref = dnew(ny), *dx_ref = dnew(nx), *dw_ref = dnew(nw), *db_ref = dnew(nb);
  double *y = dnew(ny), *dx = dnew(nx), *dw = dnew(nw), *db = dnew(nb);
  double *dw2 = dnew(nw), *db2 = dnew(nb);
  const double wscale = sqrt(3.0 / ((double)t->KH * t->KW * t->C)); /* keeps y ~ O(1) */
  rand_fill(x, nx, -1, 1);
  rand_fill(w, nw, -wscale, wscale);
  rand_fill(bias, nb, -0.5, 0.5);
  rand_fill(dy, ny, -1, 1);

  const size_t ns = clt_layer_scratch_floats(&l, t->B);
  cl_mem X = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny), DX = dev_new(nx + TAIL);
  cl_mem P = dev_new(flat), G = dev_new(flat), S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(P, koff, w, nw);
  upload(P, boff, bias, nb);
  upload(DY, 0, dy, ny);
  clt_layer_io io = {.replica = R,
                     .batch = t->B,
                     .x = X,
                     .y = Y,
                     .dy = DY,
                     .dx = DX,
                     .params = P,
                     .grads = G,
                     .scratch = S};

  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  download(Y, 0, y, ny);
  ref_conv2d_forward(x, t->B, t->H, t->W, t->C, w, bias, t->KH, t->KW, t->CO, t->stride, pt, pl, OH,
                     OW, y_ref);
  if (t->relu) ref_relu_forward(y_ref, ny, y_ref);
  check("y", y, y_ref, ny, TOL_GEMM);

  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  download(DX, 0, dx, nx);
  download(G, koff, dw, nw);
  download(G, boff, db, nb);
  if (t->relu) relu_mask(dy, y, ny);
  ref_conv2d_backward(x, t->B, t->H, t->W, t->C, w, t->KH, t->KW, t->CO, t->stride, pt, pl, OH, OW,
                      dy, dx_ref, dw_ref, db_ref);
  check("dx", dx, dx_ref, nx, TOL_GEMM);
  check("dW", dw, dw_ref, nw, TOL_GEMM);
  check("dbias", db, db_ref, nb, TOL_GEMM);
  check_flat("grads: gaps untouched", G, &l, flat, 0, 1);
  check_tails(Y, ny, DX, nx, S, ns);

  /* As the first layer (dx = NULL): the same dW and dbias, written afresh. dy is
   * uploaded again because the fused ReLU's backward masks it in place. */
  upload(DY, 0, dy, ny);
  dev_fill(G, 0, flat, GARBAGE);
  io.dx = NULL;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward with dx = NULL")) goto done;
  download(G, koff, dw2, nw);
  download(G, boff, db2, nb);
  check("dx=NULL: dW unchanged", dw2, dw, nw, TOL_EXACT);
  check("dx=NULL: dbias unchanged", db2, db, nb, TOL_EXACT);
done:
  case_end();
}

static void test_conv_all(void) {
  static const conv_case cases[] = {
      /* B, H, W, C, CO, KH, KW, stride, same, relu */
      {3, 28, 28, 1, 64, 3, 3, 1, 0, 1, 0},  /* fmnist-cnn's first conv */
      {5, 13, 13, 64, 80, 3, 3, 1, 0, 1, 0}, /* its second (K = 576) */
      {1, 7, 9, 3, 5, 3, 3, 1, 0, 0, 0},
      {3, 13, 11, 33, 31, 1, 1, 1, 0, 1, 0},  /* 1x1 */
      {3, 12, 11, 5, 33, 3, 3, 2, 1, 1, 0},   /* same, s2: padding 0 top / 1 left (uneven) */
      {3, 15, 14, 5, 64, 7, 7, 2, 1, 0, 0},   /* 7x7 same s2: padding 3 top, 2 left */
      {5, 10, 9, 31, 33, 3, 3, 2, 0, 0, 0},   /* valid s2: the last input row is never read */
      {1, 7, 9, 5, 3, 2, 3, 1, 1, 1, 0},      /* even, non-square kernel, same */
      {1, 9, 7, 80, 64, 3, 3, 1, 1, 1, 0},    /* C = 80 (vectorised im2col), same s1 */
      {2, 8, 9, 12, 16, 3, 3, 1, 1, 1, 0},    /* C = 12, same s1, batch 2 */
      {2, 6, 5, 1, 4, 3, 3, 1, 0, 1, 0},      /* C = 1 at small mode's size (im2col_rows) */
      {1, 5, 6, 8, 16, 3, 3, 1, 1, 0, 0},     /* N = 16 at small mode's size (cltrain's GEMM) */
      {4, 18, 18, 1, 16, 3, 3, 1, 0, 0, 1},   /* dW: 9 x 16 outputs, K = 1024: split K (CPUs) */
      {2, 5, 4, 6, 7, 1, 1, 1, 0, 1, 0},      /* 1x1 at small mode's size (no im2col) */
      {2, 3, 3, 144, 1024, 1, 1, 1, 0, 0, 0}, /* B rows 4 KiB apart: K in chunks of 128 (CPUs) */
      {2, 4, 4, 128, 32, 1, 1, 1, 0, 1, 0},   /* dx's transposed B padded to 144 floats a row */
      {2, 6, 5, 16, 16, 2, 2, 1, 1, 1, 0},    /* dx as a convolution of dy (CPUs): even, same */
      {1, 8, 7, 32, 48, 5, 5, 1, 1, 0, 0},    /* the same with 5x5 taps, padding 2 */
      /* dW over 128 columns a work-item (CPUs: 8 blocks with AVX2's tiles, 2 with
       * AVX-512's), C = 20 rows a tap: sub-blocks across two taps, K = 72: a short
       * last chunk. */
      {2, 6, 6, 20, 512, 3, 3, 1, 1, 0, 0},
      /* dW of 441 rows and 32 columns, K = 1: the copying A^T kernel (CPUs with
       * AVX2's tiles and Oclgrind's: 2 column blocks of 4 row blocks) at small
       * mode's size. */
      {1, 3, 3, 49, 32, 3, 3, 1, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_conv(&cases[i]);
}

/* ---- 2. MaxPooling2D ----------------------------------------------------------------- */

typedef struct pool_case {
  int B, H, W, C, pool, stride;
  int ties; /* values from {0, 1, 2}: most windows hold equal maxima */
} pool_case;

static void test_pool(const pool_case *t) {
  set_case("maxpool %d s%d C%d %dx%d B%d%s:", t->pool, t->stride, t->C, t->H, t->W, t->B,
           t->ties ? " with ties" : "");
  clt_layer l;
  char spec[64];
  snprintf(spec, sizeof spec, "pool_under_test=MaxPooling2D(%d,s%d)", t->pool, t->stride);
  if (api_failed(clt_layer_init(&l, spec, &E), "init")) goto done;
  if (api_failed(l.ops->setup(&l, &(clt_shape){t->H, t->W, t->C}, &E), "setup")) goto done;
  const int OH = (t->H - t->pool) / t->stride + 1, OW = (t->W - t->pool) / t->stride + 1;
  expect("setup: output shape", (l.out.h != OH) + (l.out.w != OW) + (l.out.c != t->C), 3);
  if (l.out.h != OH || l.out.w != OW || l.out.c != t->C) goto done;
  if (skip_large((double)t->B * t->H * t->W * t->C)) goto done;
  if (api_failed(clt_layer_prepare(&l, R, t->B, NULL, &E), "prepare")) goto done;

  const size_t nx = (size_t)t->B * t->H * t->W * t->C, ny = (size_t)t->B * OH * OW * t->C;
  double *x = dnew(nx), *dy = dnew(ny), *y = dnew(ny), *dx = dnew(nx);
  double *y_ref = dnew(ny), *dx_ref = dnew(nx);
  if (t->ties) {
    for (size_t i = 0; i < nx; i++) x[i] = irand(3);
  } else {
    distinct_fill(x, nx);
  }
  rand_fill(dy, ny, -1, 1);
  const size_t ns = clt_layer_scratch_floats(&l, t->B);
  cl_mem X = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny);
  cl_mem DX = dev_new(nx + TAIL), S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(DY, 0, dy, ny);
  /* dx starts as 7.0 everywhere: inputs no window selects (the last row and column of
   * an odd size) must be overwritten with 0, not left alone. */
  dev_fill(DX, 0, nx, 7.0f);
  clt_layer_io io = {.replica = R, .batch = t->B, .x = X, .y = Y, .dy = DY, .dx = DX, .scratch = S};
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  download(Y, 0, y, ny);
  download(DX, 0, dx, nx);
  ref_maxpool_forward(x, t->B, t->H, t->W, t->C, t->pool, t->stride, OH, OW, y_ref);
  ref_maxpool_backward(x, t->B, t->H, t->W, t->C, t->pool, t->stride, OH, OW, dy, dx_ref);
  check("y", y, y_ref, ny, TOL_EXACT);
  check("dx", dx, dx_ref, nx, TOL_EXACT);
  check_tails(Y, ny, DX, nx, S, ns);
done:
  case_end();
}

/* TensorFlow's rule by hand, independent of ref.c: each window's gradient goes to its
 * first maximum in raster order. x is 1 x H x W x 1. */
static void test_pool_tie_by_hand(int pool, int stride, int H, int W, const double *x,
                                  const double *dy, const double *dx_expected) {
  set_case("maxpool %d s%d %dx%d explicit ties:", pool, stride, H, W);
  clt_layer l;
  char spec[64];
  snprintf(spec, sizeof spec, "pool_under_test=MaxPooling2D(%d,s%d)", pool, stride);
  if (api_failed(clt_layer_init(&l, spec, &E), "init")) goto done;
  if (api_failed(l.ops->setup(&l, &(clt_shape){H, W, 1}, &E), "setup")) goto done;
  if (api_failed(clt_layer_prepare(&l, R, 1, NULL, &E), "prepare")) goto done;
  const size_t nx = (size_t)H * W, ny = (size_t)l.out.h * l.out.w;
  double *dx = dnew(nx);
  cl_mem X = dev_new(nx), Y = dev_new(ny), DY = dev_new(ny), DX = dev_new(nx), S = dev_new(1);
  upload(X, 0, x, nx);
  upload(DY, 0, dy, ny);
  clt_layer_io io = {.replica = R, .batch = 1, .x = X, .y = Y, .dy = DY, .dx = DX, .scratch = S};
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  download(DX, 0, dx, nx);
  check("dx to the first maximum", dx, dx_expected, nx, TOL_EXACT);
done:
  case_end();
}

static void test_pool_all(void) {
  static const pool_case cases[] = {
      /* B, H, W, C, pool, stride, ties */
      {3, 26, 26, 64, 2, 2, 0}, /* fmnist-cnn's first pool: exact tiling */
      {2, 8, 10, 12, 2, 2, 0},  /* C = 12, batch 2 */
      {5, 11, 11, 80, 2, 2, 0}, /* its second: 11 -> 5, last row/col unused */
      {1, 13, 11, 5, 2, 2, 0},
      {3, 7, 9, 33, 3, 3, 0},   /* tiled with pool 3, uncovered row and column */
      {3, 13, 11, 31, 3, 2, 0}, /* overlapping windows: the other kernel */
      {5, 12, 10, 3, 3, 2, 0},  /* overlapping, last row/col unused */
      {3, 11, 11, 5, 2, 2, 1},
      {3, 12, 10, 33, 3, 2, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_pool(&cases[i]);

  /* Tiled: window 0 is all 3s -> its top-left; window 1 has 5 at (0,3), (1,2), (1,3)
   * -> (0,3). A last-maximum rule would pick (1,1) and (1,3). */
  const double xt[] = {3, 3, 0, 5, /**/ 3, 3, 5, 5}, dyt[] = {10, 20};
  const double dxt[] = {10, 0, 0, 20, /**/ 0, 0, 0, 0};
  test_pool_tie_by_hand(2, 2, 2, 4, xt, dyt, dxt);
  /* Overlapping (pool 2, stride 1): both windows' first maximum is (0,1), so it gets
   * both gradients; the equal 4s at (1,0) and (1,2) get nothing. */
  const double xo[] = {1, 4, 4, /**/ 4, 2, 4}, dyo[] = {10, 20};
  const double dxo[] = {0, 30, 0, /**/ 0, 0, 0};
  test_pool_tie_by_hand(2, 1, 2, 3, xo, dyo, dxo);
}

/* ---- 3. Dense ------------------------------------------------------------------------ */

typedef struct dense_case {
  int B, IN, OUT, relu;
} dense_case;

static void test_dense(const dense_case *t) {
  set_case("dense %d->%d%s B%d:", t->IN, t->OUT, t->relu ? " relu" : "", t->B);
  clt_layer l;
  char spec[64];
  snprintf(spec, sizeof spec, "dense_under_test=Dense(%d%s)", t->OUT, t->relu ? ",relu" : "");
  if (api_failed(clt_layer_init(&l, spec, &E), "init")) goto done;
  if (api_failed(l.ops->setup(&l, &(clt_shape){1, 1, t->IN}, &E), "setup")) goto done;
  /* Long sums cost the simulator far more than their multiply-adds suggest (55 s
   * for 1 x 2000 x 10 in CLBlast's GEMM there): in small mode, K <= 256 only. */
  if (skip_large(t->IN > 256 ? 1e12 : (double)t->B * t->IN * t->OUT)) goto done;
  const size_t flat = place_params(&l);
  if (api_failed(clt_layer_prepare(&l, R, t->B, NULL, &E), "prepare")) goto done;

  const size_t nx = (size_t)t->B * t->IN, ny = (size_t)t->B * t->OUT;
  const size_t nw = (size_t)t->IN * t->OUT, nb = (size_t)t->OUT;
  const size_t koff = l.params[0].offset, boff = l.params[1].offset;
  double *x = dnew(nx), *w = dnew(nw), *bias = dnew(nb), *dy = dnew(ny);
  double *y_ref = dnew(ny), *dx_ref = dnew(nx), *dw_ref = dnew(nw), *db_ref = dnew(nb);
  double *y = dnew(ny), *dx = dnew(nx), *dw = dnew(nw), *db = dnew(nb);
  const double wscale = sqrt(3.0 / t->IN);
  rand_fill(x, nx, -1, 1);
  rand_fill(w, nw, -wscale, wscale);
  rand_fill(bias, nb, -0.5, 0.5);
  rand_fill(dy, ny, -1, 1);

  const size_t ns = clt_layer_scratch_floats(&l, t->B);
  cl_mem X = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny), DX = dev_new(nx + TAIL);
  cl_mem P = dev_new(flat), G = dev_new(flat), S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(P, koff, w, nw);
  upload(P, boff, bias, nb);
  upload(DY, 0, dy, ny);
  clt_layer_io io = {.replica = R,
                     .batch = t->B,
                     .x = X,
                     .y = Y,
                     .dy = DY,
                     .dx = DX,
                     .params = P,
                     .grads = G,
                     .scratch = S};
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  download(Y, 0, y, ny);
  download(DX, 0, dx, nx);
  download(G, koff, dw, nw);
  download(G, boff, db, nb);
  ref_dense_forward(x, t->B, t->IN, w, bias, t->OUT, y_ref);
  if (t->relu) ref_relu_forward(y_ref, ny, y_ref);
  if (t->relu) relu_mask(dy, y, ny);
  ref_dense_backward(x, t->B, t->IN, w, t->OUT, dy, dx_ref, dw_ref, db_ref);
  check("y", y, y_ref, ny, TOL_GEMM);
  check("dx", dx, dx_ref, nx, TOL_GEMM);
  check("dW", dw, dw_ref, nw, TOL_GEMM);
  check("dbias", db, db_ref, nb, TOL_GEMM);
  check_flat("grads: gaps untouched", G, &l, flat, 0, 1);
  check_tails(Y, ny, DX, nx, S, ns);
done:
  case_end();
}

static void test_dense_all(void) {
  static const int batches[] = {1, 3, 65}, ins[] = {1, 33, 2000};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      /* OUT and relu alternate so that each appears with every batch and width. */
      dense_case c = {batches[i], ins[j], (i + j) % 2 ? 64 : 10, (i + 2 * j) % 3 != 0};
      test_dense(&c);
    }
  dense_case model_head = {65, 64, 10, 0}; /* fmnist-cnn's last layer */
  test_dense(&model_head);
  /* 37 = 2 x 16 + 5 columns (cpu: gemm16 and gemm_tail, bias and ReLU in both);
   * the input gradient's N = 33 (a transposed B with a partial tile). */
  dense_case wide_tail = {3, 33, 37, 1};
  test_dense(&wide_tail);
  /* The input gradient's transposed B: rows of 256 floats padded to 272 (CPUs). */
  dense_case padded_rows = {5, 256, 48, 0};
  test_dense(&padded_rows);
}

/* clt_gemm on shape s with alpha 1 and the given beta (0 or 1), C starting from
 * random values, against a double-precision product. */
/* reserve_k: the K the shape is reserved with (0: its own; larger: a slice smaller
 * than the batch the layer was prepared for). */
static void check_gemm(const clt_gemm_shape *s, float beta, size_t reserve_k) {
  const size_t M = s->m, N = s->n, K = s->k;
  if (skip_large((double)M * N * K)) return;
  double *a = dnew(M * K), *b = dnew(N * K), *c = dnew(M * N);
  double *want = dnew(M * N), *got = dnew(M * N);
  rand_fill(a, M * K, -1, 1);
  rand_fill(b, N * K, -1, 1);
  rand_fill(c, M * N, -4, 4);
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      double sum = beta * c[i * N + j];
      for (size_t k = 0; k < K; k++)
        sum += a[s->trans_a ? k * M + i : i * K + k] * b[s->trans_b ? j * K + k : k * N + j];
      want[i * N + j] = sum;
    }
  cl_mem A = dev_new(M * K), B = dev_new(N * K), C = dev_new(M * N + TAIL);
  upload(A, 0, a, M * K);
  upload(B, 0, b, N * K);
  upload(C, 0, c, M * N);
  clt_gemm_shape reserved = *s;
  if (reserve_k) reserved.k = reserve_k;
  if (!api_failed(clt_gemm_reserve(R, &reserved, &E), "reserve") &&
      !api_failed(clt_gemm(R, s, 1.0f, A, 0, B, 0, beta, C, 0, &E), "gemm")) {
    download(C, 0, got, M * N);
    check("C", got, want, M * N, TOL_GEMM);
    check_untouched("C tail", C, M * N, TAIL);
  }
}

/* clt_gemm's C += A B^T (beta 1: a pointwise convolution's input gradient added into
 * one that exists), over 2 x 16 + 5 columns (cpu: gemm16 and gemm_tail both start
 * from C) and 12 columns (gemm_tail alone). */
static void test_gemm_accumulate(int M, int N, int K) {
  set_case("gemm C += A B^T %dx%dx%d:", M, N, K);
  const clt_gemm_shape s = {0, 1, (size_t)M, (size_t)N, (size_t)K, (size_t)K, (size_t)K, (size_t)N};
  check_gemm(&s, 1.0f, 0);
  case_end();
}

/* clt_gemm's C = A^T B (a weight gradient's product): 602 rows (a partial sub-block),
 * 2 x 128 + 5 columns (cpu: 128 columns a work-item, and gemm_tail), K = 530 (a
 * short last chunk) or 130 (cpu: A^T laid out as rows, then the forward kernel);
 * and a long K that splits (cpu), with C's previous values to be overwritten
 * (beta 0). */
static void test_gemm_at(int M, int N, int K, int reserve_k) {
  set_case("gemm C = A^T B %dx%dx%d%s:", M, N, K, reserve_k ? " (reserved for a longer K)" : "");
  const clt_gemm_shape s = {1, 0, (size_t)M, (size_t)N, (size_t)K, (size_t)M, (size_t)N, (size_t)N};
  check_gemm(&s, 0.0f, reserve_k);
  case_end();
}

/* ---- 4. Loss, metrics, Adam, gather, conv_pool kernels ------------------------------- */

static cl_kernel get_kernel(const char *source, const char *name) {
  cl_kernel k = NULL;
  if (clt_replica_kernel(R, source, "", name, &k, &E)) fatal("building a kernel");
  return k;
}

/* Logits for n examples of K classes, built to hit the awkward cases:
 * row 0: logits +100 and -100 (exp() of the raw logits would overflow a float) with the
 *        label on the -100 (loss 200); row 1: two equal maxima, label on the
 *        second (tf.argmax picks the first: wrong); row 2: the same, label on the first
 *        (right); other rows: +-3 with random labels. */
static void make_logits(double *z, int *labels, int n, int K) {
  for (int i = 0; i < n; i++) {
    double *zi = z + (size_t)i * K;
    rand_fill(zi, (size_t)K, i == 0 ? -100 : -3, i == 0 ? 100 : 3);
    labels[i] = irand(K);
    if (i == 0) {
      int hi = irand(K), lo = (hi + 1 + irand(K - 1)) % K; /* lo != hi */
      zi[hi] = 100.0;
      zi[lo] = -100.0;
      labels[i] = lo;
    } else if (i <= 2) {
      int a = irand(K - 1), b = a + 1 + irand(K - 1 - a); /* a < b */
      zi[a] = zi[b] = 4.0;
      labels[i] = i == 1 ? b : a;
    }
  }
}

static void test_softmax(int n, int K, int with_dz) {
  set_case("softmax_xent n%d K%d%s:", n, K, with_dz ? "" : " (no dz)");
  const float scale = 0.25f; /* not 1, so a missing scale shows */
  const size_t nz = (size_t)n * K;
  double *z = dnew(nz), *dz = dnew(nz), *loss = dnew((size_t)n), *corr = dnew((size_t)n);
  double *dz_ref = dnew(nz), *loss_ref = dnew((size_t)n), *corr_ref = dnew((size_t)n);
  int *labels = inew((size_t)n), *ok_ref = inew((size_t)n);
  make_logits(z, labels, n, K);
  ref_softmax_xent(z, labels, n, K, scale, loss_ref, dz_ref, ok_ref);
  for (int i = 0; i < n; i++) corr_ref[i] = ok_ref[i];

  cl_mem Z = dev_new(nz), L = dev_new((size_t)n), DZ = dev_new(nz + TAIL);
  cl_mem LOSS = dev_new((size_t)n + TAIL), CORR = dev_new((size_t)n + TAIL);
  cl_mem DZARG = with_dz ? DZ : NULL; /* eval passes no gradient buffer */
  upload(Z, 0, z, nz);
  upload_bytes(L, 0, labels, (size_t)n * sizeof(int));
  cl_kernel kx = get_kernel("loss.cl", "softmax_xent");
  clt_karg args[] = {CLT_ARG(Z),     CLT_ARG(L),     CLT_ARG(n),    CLT_ARG(K),
                     CLT_ARG(scale), CLT_ARG(DZARG), CLT_ARG(LOSS), CLT_ARG(CORR)};
  if (api_failed(clt_launch1d(R, kx, "softmax_xent", args, 8, (size_t)n, &E), "launch")) goto done;
  download(LOSS, 0, loss, (size_t)n);
  download(CORR, 0, corr, (size_t)n);
  check("loss", loss, loss_ref, (size_t)n, TOL_ELEMWISE);
  check("correct (first maximum)", corr, corr_ref, (size_t)n, 0.0);
  check_untouched("loss/correct tail", LOSS, (size_t)n, TAIL);
  if (with_dz) {
    download(DZ, 0, dz, nz);
    check("dz", dz, dz_ref, nz, TOL_ELEMWISE);
    check_untouched("dz tail", DZ, nz, TAIL);
  }

  /* metrics_accumulate into slot 2 of 4: sums of the per-example values. */
  cl_mem M = dev_new(8);
  int slot = 2;
  cl_kernel km = get_kernel("loss.cl", "metrics_accumulate");
  clt_karg margs[] = {CLT_ARG(LOSS), CLT_ARG(CORR), CLT_ARG(n), CLT_ARG(M), CLT_ARG(slot)};
  if (api_failed(clt_launch1d(R, km, "metrics_accumulate", margs, 5, 1, &E), "metrics")) goto done;
  double m[2], m_ref[2] = {0, 0};
  download(M, 4, m, 2);
  for (int i = 0; i < n; i++) {
    m_ref[0] += loss_ref[i];
    m_ref[1] += corr_ref[i];
  }
  check("metrics loss sum", &m[0], &m_ref[0], 1, TOL_ELEMWISE);
  check("metrics correct count", &m[1], &m_ref[1], 1, 0.0);
  check_untouched("metrics slots 0 and 1 untouched", M, 0, 4);
  check_untouched("metrics slot 3 untouched", M, 6, 2);
done:
  case_end();
}

/* Gradients of every magnitude, from 1 down to 1e-8 and exact zeros, so that eps's
 * place (sqrt(v) + eps, uncorrected) matters for some entries. */
static void adam_gradient(double *g, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int decade = irand(10);
    g[i] = decade == 9 ? 0.0 : urand(-1, 1) * pow(10.0, -decade);
    g[i] = (float)g[i];
  }
}

static void test_adam(void) {
  const int n = 1000;
  const clt_optimizer opt = clt_optimizer_defaults(CLT_OPT_ADAM);
  set_case("adam_update n%d:", n);
  double *p = dnew((size_t)n), *g = dnew((size_t)n), *m = dnew((size_t)n), *v = dnew((size_t)n);
  double *p0 = dnew((size_t)n), *pd = dnew((size_t)n), *md = dnew((size_t)n);
  double *vd = dnew((size_t)n), *dp = dnew((size_t)n), *dp_ref = dnew((size_t)n);
  rand_fill(p, (size_t)n, -0.1, 0.1); /* weights' scale: their float ulp << lr */
  memcpy(p0, p, (size_t)n * sizeof *p);
  cl_mem P = dev_new((size_t)n + TAIL), G = dev_new((size_t)n), M = dev_new((size_t)n);
  cl_mem V = dev_new((size_t)n);
  upload(P, 0, p, (size_t)n);
  dev_fill(M, 0, (size_t)n, 0.0f);
  dev_fill(V, 0, (size_t)n, 0.0f);
  cl_kernel k = get_kernel("optimizer.cl", "adam_update");
  float b1 = (float)opt.beta1, b2 = (float)opt.beta2, eps = (float)opt.epsilon;
  for (long step = 1; step <= 3; step++) {
    adam_gradient(g, (size_t)n);
    upload(G, 0, g, (size_t)n);
    /* As clt_net_update: both bias corrections folded into alpha, in double. */
    float alpha = (float)(opt.lr * sqrt(1.0 - pow(opt.beta2, (double)step)) /
                          (1.0 - pow(opt.beta1, (double)step)));
    clt_karg args[] = {CLT_ARG(P),  CLT_ARG(G),  CLT_ARG(M),   CLT_ARG(V),    CLT_ARG(n),
                       CLT_ARG(b1), CLT_ARG(b2), CLT_ARG(eps), CLT_ARG(alpha)};
    if (api_failed(clt_launch1d(R, k, "adam_update", args, 9, (size_t)n, &E), "launch")) goto done;
    ref_adam(p, g, m, v, (size_t)n, opt.lr, opt.beta1, opt.beta2, opt.epsilon, step);
  }
  download(P, 0, pd, (size_t)n);
  download(M, 0, md, (size_t)n);
  download(V, 0, vd, (size_t)n);
  /* Parameters move by ~lr per step: compare the moves, not the O(1) values. */
  for (int i = 0; i < n; i++) {
    dp[i] = pd[i] - p0[i];
    dp_ref[i] = p[i] - p0[i];
  }
  check("3 steps: parameter change", dp, dp_ref, (size_t)n, TOL_ADAM);
  check("3 steps: m", md, m, (size_t)n, TOL_ELEMWISE);
  check("3 steps: v", vd, v, (size_t)n, TOL_ADAM);
  check_untouched("tail", P, (size_t)n, TAIL);
done:
  case_end();
}

/* gather_batch: x[i] = preprocess(images[order[first + i]]), y[i] = labels[...];
 * mode 0: / 255; mode 1 (ResNet50's 'caffe'): RGB -> BGR minus ImageNet's BGR means. */
static void test_gather(int count_images, int pixels, int first, int count, int mode) {
  set_case("gather_batch mode %d, %d of %d images, %d pixels, from %d:", mode, count, count_images,
           pixels, first);
  const size_t npix = (size_t)count_images * pixels, nx = (size_t)count * pixels;
  unsigned char *images = hnew(npix), *labels = hnew((size_t)count_images);
  int *order = inew((size_t)count_images), *y = inew((size_t)count + 1);
  double *x = dnew(nx), *x_ref = dnew(nx);
  for (size_t i = 0; i < npix; i++) images[i] = (unsigned char)irand(256);
  images[0] = 255; /* the extremes, wherever order puts them */
  images[1] = 0;
  images[npix - 1] = 255;
  for (int i = 0; i < count_images; i++) {
    labels[i] = (unsigned char)irand(10);
    order[i] = i;
  }
  shuffle(order, count_images);
  cl_mem IMG = dev_new(npix / 4 + 1), LAB = dev_new((size_t)count_images / 4 + 1);
  cl_mem ORD = dev_new((size_t)count_images), X = dev_new(nx + TAIL),
         Y = dev_new((size_t)count + 1);
  upload_bytes(IMG, 0, images, npix);
  upload_bytes(LAB, 0, labels, (size_t)count_images);
  upload_bytes(ORD, 0, order, (size_t)count_images * sizeof(int));
  cl_kernel k = get_kernel("data.cl", "gather_batch");
  clt_karg args[] = {CLT_ARG(IMG),    CLT_ARG(LAB),  CLT_ARG(ORD), CLT_ARG(first), CLT_ARG(count),
                     CLT_ARG(pixels), CLT_ARG(mode), CLT_ARG(X),   CLT_ARG(Y)};
  if (api_failed(clt_launch1d(R, k, "gather_batch", args, 9, nx, &E), "launch")) goto done;
  download(X, 0, x, nx);
  download_bytes(Y, 0, y, ((size_t)count + 1) * sizeof(int));
  size_t bad_labels = 0;
  for (int i = 0; i < count; i++) {
    const int src = order[first + i];
    const unsigned char *img = images + (size_t)src * pixels;
    static const double bgr_mean[3] = {103.939, 116.779, 123.68};
    for (int p = 0; p < pixels; p++) {
      const int c = p % 3;
      x_ref[(size_t)i * pixels + p] = mode == 0 ? img[p] / 255.0 : img[p - c + 2 - c] - bgr_mean[c];
    }
    bad_labels += y[i] != labels[src];
  }
  check(mode == 0 ? "pixels / 255" : "caffe preprocessing", x, x_ref, nx, TOL_EXACT);
  expect("labels", bad_labels, (size_t)count);
  check_untouched("x tail", X, nx, TAIL);
  check_untouched("labels tail", Y, (size_t)count, 1);
done:
  case_end();
}

/* conv2d.cl's conv_pool_forward and conv_pool_backward launched directly, as the
 * Conv2D layer launches them on CPU replicas (which tests/test_layers2 runs through
 * the ops tables), on either backend: the GPU variant is the same code. The partial
 * sums are added on the host. Weights and bias at offsets of 16 floats past a
 * multiple of 32 (the kernels' float16 accesses need 16). */
static void test_conv_pool_kernels(int B, int H, int W, int C, int KH, int KW, int CO, int per) {
  set_case("conv_pool kernels %dx%d C%d->%d %dx%d B%d, %d rows a block:", KH, KW, C, CO, H, W, B,
           per);
  const int PH = (H - KH + 1) / 2, PW = (W - KW + 1) / 2, K = KH * KW * C;
  const int nblocks = (B * PH + per - 1) / per;
  const size_t nx = (size_t)B * H * W * C, nw = (size_t)K * CO, ny = (size_t)B * PH * PW * CO;
  const size_t npart = (size_t)nblocks * (K + 1) * CO;
  int w_off = 16, b_off = 16 + (int)nw + 32;
  double *x = dnew(nx), *w = dnew(nw), *bias = dnew((size_t)CO), *dy = dnew(ny);
  double *y = dnew(ny), *y_ref = dnew(ny), *part = dnew(npart);
  double *dw = dnew(nw), *dw_ref = dnew(nw), *db = dnew((size_t)CO), *db_ref = dnew((size_t)CO);
  rand_fill(x, nx, -1, 1);
  rand_fill(w, nw, -sqrt(3.0 / K), sqrt(3.0 / K));
  rand_fill(bias, (size_t)CO, -0.5, 0.5);
  rand_fill(dy, ny, -1, 1);
  cl_mem X = dev_new(nx), P = dev_new((size_t)b_off + CO), Y = dev_new(ny + TAIL);
  cl_mem DY = dev_new(ny), S = dev_new(npart + TAIL);
  upload(X, 0, x, nx);
  upload(P, (size_t)w_off, w, nw);
  upload(P, (size_t)b_off, bias, (size_t)CO);
  upload(DY, 0, dy, ny);
  /* The layer's choice (src/layers/conv2d.c): 3x3 taps of one channel unrolled. */
  const int k331 = KH == 3 && KW == 3 && C == 1;
  cl_kernel kf = get_kernel("conv2d.cl", k331 ? "conv_pool_forward_3x3c1" : "conv_pool_forward");
  cl_kernel kb = get_kernel("conv2d.cl", k331 ? "conv_pool_backward_3x3c1" : "conv_pool_backward");
  clt_karg fargs[] = {CLT_ARG(X),  CLT_ARG(P),  CLT_ARG(w_off), CLT_ARG(b_off), CLT_ARG(Y),
                      CLT_ARG(B),  CLT_ARG(H),  CLT_ARG(W),     CLT_ARG(C),     CLT_ARG(KH),
                      CLT_ARG(KW), CLT_ARG(CO), CLT_ARG(PH),    CLT_ARG(PW)};
  if (api_failed(clt_launch1d(R, kf, "conv_pool_forward", fargs, 14, (size_t)B * PH, &E),
                 "forward"))
    goto done;
  clt_karg bargs[] = {CLT_ARG(X),  CLT_ARG(P),  CLT_ARG(w_off), CLT_ARG(b_off),
                      CLT_ARG(DY), CLT_ARG(S),  CLT_ARG(B),     CLT_ARG(H),
                      CLT_ARG(W),  CLT_ARG(C),  CLT_ARG(KH),    CLT_ARG(KW),
                      CLT_ARG(CO), CLT_ARG(PH), CLT_ARG(PW),    CLT_ARG(per)};
  const size_t global[2] = {(size_t)nblocks, (size_t)CO / 16}, local[2] = {1, 1};
  if (api_failed(clt_launch(R, kb, "conv_pool_backward", bargs, 16, 2, global, local, &E),
                 "backward"))
    goto done;
  download(Y, 0, y, ny);
  download(S, 0, part, npart);
  for (int blk = 0; blk < nblocks; blk++) {
    for (size_t i = 0; i < nw; i++) dw[i] += part[(size_t)blk * nw + i];
    for (int c = 0; c < CO; c++) db[c] += part[(size_t)nblocks * nw + (size_t)blk * CO + c];
  }
  ref_conv_pool_forward(x, B, H, W, C, w, bias, KH, KW, CO, PH, PW, y_ref);
  ref_conv_pool_backward(x, B, H, W, C, w, bias, KH, KW, CO, PH, PW, dy, dw_ref, db_ref);
  check("y", y, y_ref, ny, TOL_GEMM);
  check("dW (partial sums added)", dw, dw_ref, nw, TOL_GEMM);
  check("dbias (partial sums added)", db, db_ref, (size_t)CO, TOL_GEMM);
  check_untouched("y tail", Y, ny, TAIL);
  check_untouched("partial sums tail", S, npart, TAIL);
done:
  case_end();
}

static void test_kernels_all(void) {
  static const int ns[] = {1, 3, 65}, ks[] = {10, 3};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) test_softmax(ns[i], ks[j], 1);
  test_softmax(65, 10, 0);
  test_adam();
  test_gather(7, 13 * 11, 2, 3, 0);
  test_gather(7, 5 * 7 * 3, 1, 4, 1);
  test_gather(9, 28 * 28, 4, 5, 0); /* up to the end of the order */
  /* The 3x3x1 taps (unrolled) and others; odd sizes, blocks with a short last one. */
  test_conv_pool_kernels(3, 9, 8, 1, 3, 3, 16, 2);
  test_conv_pool_kernels(2, 7, 6, 3, 2, 3, 32, 3);
  if (!small_mode()) test_conv_pool_kernels(5, 27, 27, 1, 3, 3, 64, 7);
}

/* ---- 5. The whole model -------------------------------------------------------------- */

/* Copies between the model's aligned flat layout and ref_cnn_loss_grad's packed one
 * (the same tensors in the same order, without gaps). */
static void flat_to_packed(const clt_model *m, const float *flat, double *packed) {
  size_t at = 0;
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      for (size_t j = 0; j < prm->size; j++) packed[at++] = flat[prm->offset + j];
    }
}

/* Compares each parameter tensor of a flat (device) vector with a packed (reference). */
static void check_tensors(const clt_model *m, const char *what, const double *flat,
                          const double *packed, double tol) {
  size_t at = 0;
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      char name[96];
      snprintf(name, sizeof name, "%s %s/%s", what, m->layers[i].name, prm->name);
      check(name, flat + prm->offset, packed + at, prm->size, tol);
      at += prm->size;
    }
}

/* Zeroes the Adam moves (device: flat, reference: packed) of the entries whose reference
 * gradient is below ADAM_G_MIN, where Adam magnifies rounding (see test_model). Returns
 * how many. */
#define ADAM_G_MIN 1e-4
static size_t skip_small_gradients(const clt_model *m, const double *grad_ref, double *flat,
                                   double *packed) {
  size_t at = 0, skipped = 0;
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      for (size_t j = 0; j < prm->size; j++, at++) {
        if (fabs(grad_ref[at]) >= ADAM_G_MIN) continue;
        flat[prm->offset + j] = packed[at] = 0.0;
        skipped++;
      }
    }
  return skipped;
}

/* Number of flat entries outside every tensor that do not hold `value`. */
static size_t gaps_not(const clt_model *m, const float *flat, float value) {
  char *inside = calloc(m->flat_floats, 1);
  if (!inside) fatal("allocating a mask");
  for (int i = 0; i < m->nlayers; i++)
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *prm = &m->layers[i].params[p];
      memset(inside + prm->offset, 1, prm->size);
    }
  size_t bad = 0;
  for (size_t i = 0; i < m->flat_floats; i++) bad += !inside[i] && flat[i] != value;
  free(inside);
  return bad;
}

static void test_model(void) {
  /* fmnist-cnn itself; in small mode the same architecture at 10x10 with 4, 5 and 6
   * units and 3 classes (8x8, 4x4, 2x2, 1x1: every layer still there). */
  const int small = small_mode();
  const int B = small ? 3 : 5, CLASSES = small ? 3 : 10, HW = small ? 100 : 784;
  const ref_cnn_shape shape = small ? (ref_cnn_shape){10, 10, 1, 4, 5, 6, 3}
                                    : (ref_cnn_shape){28, 28, 1, 64, 80, 64, 10};
  set_case("%s B%d:", small ? "fmnist-cnn architecture, small" : "fmnist-cnn", B);
  static clt_model model; /* large: not on the stack */
  clt_net *net = NULL;
  clt_source *source = NULL;
  const clt_shape input = {shape.H, shape.W, 1};
  const int built =
      small ? clt_model_parse("small-cnn", input, CLASSES, CLT_PRE_UNIT,
                              "conv2d=Conv2D(4,3x3,s1,valid,relu) max_pooling2d=MaxPooling2D(2,s2) "
                              "conv2d_1=Conv2D(5,3x3,s1,valid,relu) "
                              "max_pooling2d_1=MaxPooling2D(2,s2) flatten=Flatten "
                              "dense=Dense(6,relu) dense_1=Dense(3)",
                              &model, &E)
            : clt_model_build("fmnist-cnn", input, CLASSES, &model, &E);
  if (api_failed(built, "building the model")) goto done;
  const size_t nflat = model.flat_floats, npacked = ref_cnn_param_count(&shape);
  expect("parameter count matches the reference's", model.param_count != npacked, 1);
  if (model.param_count != npacked) goto done;
  if (api_failed(clt_net_create(&model, R, B, 4, &net, &E), "clt_net_create")) goto done;

  /* Glorot kernels, and biases made non-zero so a bias bug cannot hide. */
  float *flat = hnew(nflat * sizeof(float)), *back = hnew(nflat * sizeof(float));
  clt_model_init_params(&model, 42, flat);
  for (int i = 0; i < model.nlayers; i++)
    for (int p = 0; p < model.layers[i].nparams; p++) {
      const clt_param *prm = &model.layers[i].params[p];
      if (prm->glorot_fan_in != 0) continue;
      for (size_t j = 0; j < prm->size; j++) flat[prm->offset + j] = (float)urand(-0.05, 0.05);
    }
  double *params = dnew(npacked), *grad_ref = dnew(npacked), *x = dnew((size_t)B * HW);
  double *grad = dnew(nflat), *p_after = dnew(nflat), *p_before = dnew(nflat);
  flat_to_packed(&model, flat, params);
  for (size_t i = 0; i < nflat; i++) p_before[i] = flat[i];

  unsigned char *pixels = hnew((size_t)B * HW), *labels = hnew((size_t)B);
  int *ilabels = inew((size_t)B), *order = inew((size_t)B);
  for (int i = 0; i < B * HW; i++) {
    pixels[i] = (unsigned char)irand(256);
    x[i] = pixels[i] / 255.0;
  }
  for (int i = 0; i < B; i++) {
    labels[i] = (unsigned char)irand(CLASSES);
    ilabels[i] = labels[i];
    order[i] = i;
  }
  const double scale = 1.0 / B;
  int correct_ref = 0;
  const double loss_ref = ref_cnn_loss_grad(&shape, params, x, ilabels, B, scale, grad_ref,
                                            &correct_ref);

  if (api_failed(clt_net_write_params(net, flat, &E), "clt_net_write_params")) goto done;
  /* The batch through the device-resident IDX source, as training loads it. */
  clt_dataset set = {.count = B,
                     .height = shape.H,
                     .width = shape.W,
                     .channels = 1,
                     .classes = CLASSES,
                     .pixels = malloc((size_t)B * HW),
                     .labels = malloc((size_t)B)};
  if (!set.pixels || !set.labels) fatal("allocating a dataset");
  memcpy(set.pixels, pixels, (size_t)B * HW);
  memcpy(set.labels, labels, (size_t)B);
  const int max_slice = B;
  if (api_failed(clt_idx_source(&set, &source, &E), "clt_idx_source")) goto done;
  if (api_failed(clt_source_attach(source, &R, 1, B, &max_slice, model.preprocess, &E),
                 "clt_source_attach"))
    goto done;
  if (api_failed(clt_source_begin(source, order, &E), "clt_source_begin")) goto done;
  if (api_failed(clt_source_load(source, 0, 0, 0, B, net->input, net->labels, NULL, &E),
                 "clt_source_load"))
    goto done;
  /* Every gradient entry must be written, not accumulated, and the gaps left alone. */
  dev_fill(net->grads, 0, nflat, GARBAGE);

  /* Evaluation only (slot 1): metrics, and no gradient written. */
  if (api_failed(clt_net_forward_backward(net, B, (float)scale, 1, 0, &E), "evaluation pass"))
    goto done;
  if (api_failed(clt_net_read_grads(net, back, &E), "clt_net_read_grads")) goto done;
  size_t touched = 0;
  for (size_t i = 0; i < nflat; i++) touched += back[i] != GARBAGE;
  expect("evaluation writes no gradient", touched, nflat);

  if (api_failed(clt_net_forward_backward(net, B, (float)scale, 0, 1, &E), "training pass"))
    goto done;
  if (api_failed(clt_net_read_grads(net, back, &E), "clt_net_read_grads")) goto done;
  for (size_t i = 0; i < nflat; i++) grad[i] = back[i];
  check_tensors(&model, "gradient", grad, grad_ref, TOL_MODEL);
  expect("gradient gaps untouched", gaps_not(&model, back, GARBAGE), nflat - model.param_count);
  /* The non-finite count over the whole gradient buffer (the trainer's guard), slot 0. */
  if (api_failed(clt_net_check_grads(net, 0, &E), "clt_net_check_grads")) goto done;

  float metrics[4];
  if (api_failed(clt_net_read_metrics(net, metrics, 2, &E), "clt_net_read_metrics")) goto done;
  double loss_sum[2] = {metrics[0], metrics[2]}, want = loss_ref / scale;
  check("loss sum (training slot)", &loss_sum[0], &want, 1, TOL_ELEMWISE * 10);
  check("loss sum (evaluation slot)", &loss_sum[1], &want, 1, TOL_ELEMWISE * 10);
  expect("correct count (both slots)",
         (metrics[1] != (float)correct_ref) + (metrics[3] != (float)correct_ref), 2);

  /* One Adam step from zero moments. Against ref_adam on the device's own gradient the
   * update must match tightly, everywhere. Against ref_adam on the reference gradient
   * it is compared where |g| >= ADAM_G_MIN only: step 1 moves by lr * g / (|g| + 3.2e-6),
   * which near g = 0 magnifies a gradient error d to lr * d / 3.2e-6 (a 1e-8 rounding
   * difference of a tiny g shows as 3e-3 of lr), while above ADAM_G_MIN it shrinks it
   * to at most lr * 300 * d. Most entries below it are exact zeros (dead ReLU units). */
  const clt_optimizer opt = clt_optimizer_defaults(CLT_OPT_ADAM);
  for (size_t i = 0; i < nflat; i++) grad[i] = back[i];
  if (api_failed(clt_net_update(net, &opt, 1, &E), "clt_net_update")) goto done;
  if (api_failed(clt_net_read_params(net, back, &E), "clt_net_read_params")) goto done;
  double *m0 = dnew(nflat), *v0 = dnew(nflat), *p_dev_ref = dnew(nflat);
  memcpy(p_dev_ref, p_before, nflat * sizeof *p_dev_ref);
  ref_adam(p_dev_ref, grad, m0, v0, nflat, opt.lr, opt.beta1, opt.beta2, opt.epsilon, 1);
  for (size_t i = 0; i < nflat; i++) {
    p_after[i] = (double)back[i] - p_before[i]; /* device's move */
    p_dev_ref[i] -= p_before[i];                /* reference move from the same gradient */
  }
  check("adam step (device gradient): parameter change", p_after, p_dev_ref, nflat, TOL_ADAM);
  double *m1 = dnew(npacked), *v1 = dnew(npacked), *p_ref = dnew(npacked);
  memcpy(p_ref, params, npacked * sizeof *p_ref);
  ref_adam(p_ref, grad_ref, m1, v1, npacked, opt.lr, opt.beta1, opt.beta2, opt.epsilon, 1);
  for (size_t i = 0; i < npacked; i++) p_ref[i] -= params[i];
  size_t skipped = skip_small_gradients(&model, grad_ref, p_after, p_ref);
  char what[96];
  snprintf(what, sizeof what,
           "adam step (reference gradient, the %zu of %zu with |g| >= %g):", npacked - skipped,
           npacked, ADAM_G_MIN);
  check_tensors(&model, what, p_after, p_ref, TOL_ADAM);

  /* An empty slice: zero gradient everywhere and a zeroed metrics slot 0; slot 1 kept. */
  if (api_failed(clt_net_forward_backward(net, 0, 1.0f, 0, 1, &E), "empty slice")) goto done;
  if (api_failed(clt_net_read_grads(net, back, &E), "clt_net_read_grads")) goto done;
  if (api_failed(clt_net_read_metrics(net, metrics, 2, &E), "clt_net_read_metrics")) goto done;
  size_t nonzero = 0;
  for (size_t i = 0; i < nflat; i++) nonzero += back[i] != 0.0f;
  expect("empty slice: gradient all zero", nonzero, nflat);
  expect("empty slice: metrics slot zeroed, other slot kept",
         (metrics[0] != 0.0f) + (metrics[1] != 0.0f) + (metrics[3] != (float)correct_ref), 3);

  /* A NaN at the first entry, -inf inside the first 8-float lane group and +inf at
   * the last entry (the partial blocks' edges, the scalar tail when nflat % 8 != 0)
   * are counted into slot 1; slot 0 kept the count of the finite training gradient. */
  const float bad[3] = {NAN, -INFINITY, INFINITY};
  upload_bytes(net->grads, 0, &bad[0], sizeof bad[0]);
  upload_bytes(net->grads, 5 * sizeof(float), &bad[1], sizeof bad[1]);
  upload_bytes(net->grads, (nflat - 1) * sizeof(float), &bad[2], sizeof bad[2]);
  if (api_failed(clt_net_check_grads(net, 1, &E), "clt_net_check_grads")) goto done;
  float counts[2];
  if (api_failed(clt_net_read_grad_checks(net, counts, 2, &E), "clt_net_read_grad_checks"))
    goto done;
  expect("gradient check: 0 non-finite in training, then NaN, -inf and inf counted",
         (counts[0] != 0.0f) + (counts[1] != 3.0f), 2);
done:
  clt_source_free(source);
  clt_net_destroy(net);
  case_end();
}

/* ---- main -------------------------------------------------------------------------- */

/* A program that fails to compile must name the device and carry the build log;
 * the same source with good options must still build (the failure is not cached). */
static void test_build_failure(void) {
  set_case("build failure:");
  cl_kernel k;
  clt_err err = {0};
  /* Redefining float breaks every declaration in optimizer.cl. */
  int status = clt_replica_kernel(R, "optimizer.cl", "-Dfloat=no_such_type", "adam_update", &k,
                                  &err);
  char device[300];
  snprintf(device, sizeof device, "(%s)", R->device.name);
  expect("status is CL_BUILD_PROGRAM_FAILURE", status != CL_BUILD_PROGRAM_FAILURE, 1);
  expect("message names the device", strstr(err.msg, device) == NULL, 1);
  expect("message names the source and options",
         strstr(err.msg, "building cl/optimizer.cl [-Dfloat=no_such_type] failed") == NULL, 1);
  expect("message carries the build log",
         strstr(err.msg, "build log: ") == NULL || strstr(err.msg, "no_such_type") == NULL, 1);
  expect("message is one line", strchr(err.msg, '\n') != NULL, 1);
  status = clt_replica_kernel(R, "optimizer.cl", "", "adam_update", &k, &err);
  expect("good options still build", status != CLT_OK, 1);
  status = clt_replica_kernel(R, "no_such.cl", "", "x", &k, &err);
  expect("unknown source is an error", status == CLT_OK, 1);
}

/* The program kernel k came from. */
static cl_program program_of(cl_kernel k) {
  cl_program p = NULL;
  clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof p, &p, NULL);
  return p;
}

/* A net builds the sources its model's layer kinds, its backend and the network
 * use as one program, on a fresh replica: kernels of those files come from the
 * same cl_program, a source no kind of the model uses is not in it, and a file
 * built with other options is a program of its own. */
static void test_joint_program(void) {
  set_case("joint program:");
  static clt_model m; /* large: not on the stack */
  clt_replica *r = NULL;
  clt_net *net = NULL;
  clt_err err = {0};
  int status = clt_model_build("fmnist-cnn", (clt_shape){28, 28, 1}, 10, &m, &err);
  if (!status) status = clt_backend_create_replica(&R->device, &r, &err);
  if (!status) status = clt_net_create(&m, r, 4, 1, &net, &err);
  expect("a fmnist-cnn net on a fresh replica", status != CLT_OK, 1);
  if (status) {
    printf("  %s\n", err.msg);
    goto done;
  }
  static const char *const used[][2] = {
      {"conv2d.cl", "im2col"},     {"maxpool.cl", "maxpool_forward"}, {"bias.cl", "bias_act"},
      {"loss.cl", "softmax_xent"}, {"reduce.cl", "count_final"},      {"data.cl", "gather_batch"}};
  cl_kernel k;
  cl_program joint = NULL;
  for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
    status = clt_replica_kernel(r, used[i][0], "", used[i][1], &k, &err);
    if (status) break;
    if (!joint) joint = program_of(k);
    expect(used[i][0], program_of(k) != joint, 1);
  }
  if (!status)
    status = clt_replica_kernel(r, "optimizer.cl", r->exact_options, "adam_update", &k, &err);
  expect("the optimizers' source, with the exact options, in it too",
         status != CLT_OK || program_of(k) != joint, 1);
  if (!status) status = clt_replica_kernel(r, "depthwise.cl", "", "depthwise_forward", &k, &err);
  expect("a source the model does not use: a program of its own",
         status != CLT_OK || program_of(k) == joint, 1);
  if (!status)
    status = clt_replica_kernel(r, "reduce.cl", "-DCLT_TEST_OWN=1", "count_final", &k, &err);
  expect("other options: a program of its own", status != CLT_OK || program_of(k) == joint, 1);
  if (status) printf("  %s\n", err.msg);
done:
  clt_net_destroy(net);
  clt_backend_destroy_replica(r);
}

int main(void) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  setvbuf(stdout, NULL, _IOLBF, 0);
  rng_seed(0x5eed);
  replica_open();

  test_conv_all();
  test_pool_all();
  test_dense_all();
  test_gemm_accumulate(7, 37, 40);
  test_gemm_accumulate(5, 12, 33);
  test_gemm_at(602, 261, 530, 0); /* cpu: the A^T kernels, a short last K chunk */
  test_gemm_at(602, 261, 130, 0); /* cpu: K <= 512, A^T transposed, then the plain kernel */
  /* A smaller last batch: reserved with K = 4000, run with 130 (the scratch may
   * not hold A^T: it overflowed into the host heap before the size check). */
  test_gemm_at(40000, 32, 130, 4000);
  test_gemm_at(100, 128, 2100, 0);
  test_gemm_at(433, 32, 3, 0); /* small mode's (Oclgrind) */
  test_kernels_all();
  test_model();
  test_build_failure();
  test_joint_program();

  replica_close();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("time: %.1f s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
  return summary();
}
