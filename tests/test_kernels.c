/* Tests of the OpenCL kernels and layers against the double-precision references of
 * tests/ref/ref.c (the ground truth; tests/test_ref.c checks those by finite differences).
 *
 * 1. Conv2D, MaxPooling2D and Dense layers through their ops tables, forward and
 *    backward, at awkward sizes (odd batches, channels and spatial sizes that are not
 *    multiples of the 64-wide work-groups, padding, strides, a 7x7 kernel): this file,
 *    with main.
 * 2. clt_gemm's products, and the loss, metrics, Adam, batch-gather and fused
 *    convolution + pooling (conv_pool_*) kernels, launched directly:
 *    test_kernels_direct.c.
 * 3. The whole fmnist-cnn model through clt_net: gradient, loss, accuracy, one Adam
 *    step, an evaluation-only pass and an empty slice; a program's failed build and
 *    a net's joint program: test_kernels_net.c.
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
#include <time.h>

#include "harness.h"
#include "layer.h"
#include "ref.h"
#include "test_kernels.h"

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
  clt_layer_io io = layer_io(t->B, X, Y, DY, DX, P, G, S, NULL);

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
      /* dW over 128 columns a work-item (CPUs with AVX2's tiles: 8 blocks; AVX-512's
       * take one block in place, and kernels_vs_reference_other_tiles AVX2's), C = 20
       * rows a tap: sub-blocks across two taps, K = 72: a short last chunk. */
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
  clt_layer_io io = layer_io(t->B, X, Y, DY, DX, NULL, NULL, S, NULL);
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
  clt_layer_io io = layer_io(1, X, Y, DY, DX, NULL, NULL, S, NULL);
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
  /* Long sums cost the simulator far more than their multiply-adds suggest (CLBlast's
   * GEMM over K = 2000 above all): in small mode, K <= 256 only. */
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
  clt_layer_io io = layer_io(t->B, X, Y, DY, DX, P, G, S, NULL);
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

/* ---- main -------------------------------------------------------------------------- */

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
  /* B^T laid out as rows (cpu: the transpose kernel): 100 x 70, whole 16 x 16
   * tiles in strips of 64 along K and a shorter strip, and partial tiles at both
   * edges (small enough for Oclgrind). */
  test_gemm_accumulate(3, 70, 100);
  test_gemm_at(602, 261, 530, 0); /* cpu: the A^T kernels, a short last K chunk */
  test_gemm_at(602, 261, 130, 0); /* cpu: K <= 512, A^T transposed, then the plain kernel */
  /* A smaller last batch: reserved with K = 4000, run with 130 (the scratch may
   * not hold A^T: the size check must catch that). */
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
