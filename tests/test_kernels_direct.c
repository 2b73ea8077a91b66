/* test_kernels, part 2 (see test_kernels.c): clt_gemm's products, and the loss,
 * metrics, Adam, batch-gather and fused convolution + pooling kernels launched
 * directly, against the references. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "gemm.h"
#include "harness.h"
#include "optimizer.h"
#include "ref.h"
#include "test_kernels.h"

/* ---- 4. clt_gemm --------------------------------------------------------------------- */

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
void test_gemm_accumulate(int M, int N, int K) {
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
void test_gemm_at(int M, int N, int K, int reserve_k) {
  set_case("gemm C = A^T B %dx%dx%d%s:", M, N, K, reserve_k ? " (reserved for a longer K)" : "");
  const clt_gemm_shape s = {1, 0, (size_t)M, (size_t)N, (size_t)K, (size_t)M, (size_t)N, (size_t)N};
  check_gemm(&s, 0.0f, reserve_k);
  case_end();
}

/* ---- 5. Loss, metrics, Adam, gather, conv_pool kernels ------------------------------- */

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
  cl_mem V = dev_new((size_t)n),
         partial = dev_new(((size_t)n + CLT_CHECK_BLOCK - 1) / CLT_CHECK_BLOCK);
  const int block = CLT_CHECK_BLOCK;
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
    clt_karg args[] = {CLT_ARG(P),     CLT_ARG(G),  CLT_ARG(M),     CLT_ARG(V),
                       CLT_ARG(n),     CLT_ARG(b1), CLT_ARG(b2),    CLT_ARG(eps),
                       CLT_ARG(alpha), CLT_ARG(n),  CLT_ARG(block), CLT_ARG(partial)};
    const size_t nblocks = ((size_t)n + block - 1) / block;
    if (api_failed(clt_launch_groups(R, k, "adam_update", args, 12, nblocks, &E), "launch"))
      goto done;
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

void test_kernels_all(void) {
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
