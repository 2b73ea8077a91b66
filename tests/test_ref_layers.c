/* test_ref, part 1 (see test_ref.c): every backward of tests/ref/ref.c's layers
 * (convolution, max pooling, ReLU, dense, softmax cross-entropy) and of the layer
 * kinds' references, through their ops tables, against central finite differences
 * of its forward. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"
#include "ref.h"
#include "test_ref.h"

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

void test_conv_fd(void) {
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

void test_pool_fd(void) {
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

void test_relu_fd(void) {
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

void test_dense_fd(void) {
  test_dense_case(1, 7, 3, 41);
  test_dense_case(3, 5, 9, 42);
  test_dense_case(2 * 3 * 4, 5, 6, 43); /* Dense on 4-D: 2 examples' 3x4 positions as rows */
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

void test_xent_fd(void) {
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
  /* Parameters (LayerScale's gamma) one after another, and their gradients. */
  size_t np = 0;
  for (int p = 0; p < l.nparams; p++) l.params[p].offset = np, np += l.params[p].size;
  double *params = alloc(np), *grads = alloc(np);
  uint64_t s = seed;
  fill_apart(&s, x, nx, lo, hi);
  fill_apart(&s, x2, nx2, lo, hi);
  fill(&s, dy, ny, -1, 1);
  fill(&s, params, np, -1, 1);
  kind_fd_ctx ctx = {&l,
                     {.batch = B,
                      .train = train,
                      .seed = 11,
                      .step = 3,
                      .example0 = 5,
                      .params = params,
                      .x = x,
                      .x2 = two ? x2 : NULL}};
  kind_fwd(&ctx, y);
  poison(dx, nx);
  poison(dx2, nx2);
  memcpy(dy2, dy, ny * sizeof *dy); /* backwards may overwrite dy */
  clt_ref_io io = ctx.io;
  io.y = y, io.dy = dy2, io.dx = dx, io.dx2 = two ? dx2 : NULL, io.grads = grads;
  poison(grads, np);
  l.ops->ref_backward(&l, &io);
  layer L = {&ctx, kind_fwd, ny, NULL};
  snprintf(what, sizeof what, "%s%s B%d dx", entry, train ? " (train)" : "", B);
  check_fd(what, &L, x, nx, dy, dx, FD_H, FD_TOL);
  if (two) {
    snprintf(what, sizeof what, "%s B%d dx2", entry, B);
    check_fd(what, &L, x2, nx2, dy, dx2, FD_H, FD_TOL);
  }
  if (np) {
    snprintf(what, sizeof what, "%s B%d parameters", entry, B);
    check_fd(what, &L, params, np, dy, grads, FD_H, FD_TOL);
  }
  free(params);
  free(grads);
  free(x);
  free(x2);
  free(y);
  free(dy);
  free(dy2);
  free(dx);
  free(dx2);
}

/* A kind with parameters (`entry`, one input of shape in0): dx and every trained
 * parameter's gradient of its ref_backward against central differences of its
 * ref_forward, parameters in [lo, hi) (variances in [0.5, 1.5)), inputs in [-1, 1). */
static void test_kind_params_fd(const char *entry, int B, clt_shape in0, double lo, double hi,
                                uint64_t seed) {
  clt_layer l;
  clt_err e = {0};
  char what[160];
  const clt_shape in[2] = {in0, in0};
  if (clt_layer_init(&l, entry, &e) || l.ops->setup(&l, in, &e)) {
    snprintf(what, sizeof what, "%s: %.100s", entry, e.msg);
    expect(what, 0);
    return;
  }
  size_t flat = 0;
  for (int p = 0; p < l.nparams; p++) {
    l.params[p].offset = flat;
    flat += l.params[p].size;
  }
  const size_t nx = clt_shape_size(in0) * B, ny = clt_shape_size(l.out) * B;
  double *x = alloc(nx), *y = alloc(ny), *dy = alloc(ny), *dy2 = alloc(ny), *dx = alloc(nx);
  double *params = alloc(flat), *grads = alloc(flat);
  uint64_t s = seed;
  fill(&s, x, nx, -1, 1);
  fill(&s, dy, ny, -1, 1);
  for (int p = 0; p < l.nparams; p++) {
    const int var = strstr(l.params[p].name, "variance") != NULL;
    fill(&s, params + l.params[p].offset, l.params[p].size, var ? 0.5 : lo, var ? 1.5 : hi);
  }
  kind_fd_ctx ctx = {&l, {.batch = B, .x = x, .params = params}};
  kind_fwd(&ctx, y);
  poison(dx, nx);
  poison(grads, flat);
  memcpy(dy2, dy, ny * sizeof *dy);
  clt_ref_io io = ctx.io;
  io.y = y, io.dy = dy2, io.dx = dx, io.grads = grads;
  l.ops->ref_backward(&l, &io);
  layer L = {&ctx, kind_fwd, ny, NULL};
  snprintf(what, sizeof what, "%s B%d dx", entry, B);
  check_fd(what, &L, x, nx, dy, dx, FD_H, FD_TOL);
  for (int p = 0; p < l.nparams; p++) {
    if (l.params[p].non_trainable) continue;
    snprintf(what, sizeof what, "%s B%d d%s", entry, B, l.params[p].name);
    check_fd(what, &L, params + l.params[p].offset, l.params[p].size, dy,
             grads + l.params[p].offset, FD_H, FD_TOL);
  }
  free(x);
  free(y);
  free(dy);
  free(dy2);
  free(dx);
  free(params);
  free(grads);
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

void test_kinds_fd(void) {
  test_avgpool_hand();
  const clt_shape s = {2, 3, 5}, none = {0, 0, 0};
  test_kind_fd("a=Activation(sigmoid)", 2, s, none, -4, 4, 1, 81);
  test_kind_fd("a=Activation(tanh)", 2, s, none, -3, 3, 1, 82);
  test_kind_fd("a=Activation(relu6)", 2, s, none, -8, 8, 1, 83);
  test_kind_fd("a=Activation(relu)", 2, s, none, -1, 1, 1, 84);
  test_kind_fd("a=Activation(linear)", 2, s, none, -1, 1, 1, 85);
  test_kind_fd("a=Activation(softmax)", 2, s, none, -3, 3, 1, 86);
  /* Inputs in [-5, 5]: the hard ones' clipped and linear pieces (a difference
   * across a kink is unlikely at these draws). */
  static const char *const from_x[] = {
      "a=Activation(swish)",      "a=Activation(hard_sigmoid)",  "a=Activation(hard_sigmoid_k2)",
      "a=Activation(hard_silu)",  "a=Activation(gelu)",          "a=Activation(gelu_tanh)",
      "a=Activation(elu)",        "a=Activation(elu,0.5)",       "a=Activation(selu)",
      "a=Activation(leaky_relu)", "a=Activation(leaky_relu,0.3)"};
  for (size_t i = 0; i < sizeof from_x / sizeof from_x[0]; i++)
    test_kind_fd(from_x[i], 2, s, none, -5, 5, 1, 200 + i);
  test_kind_fd("r=ReLU(6)", 2, s, none, -8, 8, 1, 87);
  test_kind_fd("r=ReLU(0.5)", 2, s, none, -1, 1, 1, 88);
  test_kind_fd("r=Rescaling(0.25,-1)", 2, s, none, -1, 1, 1, 89);
  test_kind_fd("d=Dropout(0.4,s3)", 2, s, none, -1, 1, 1, 90);
  test_kind_fd("d=Dropout(0.4,s3)", 2, s, none, -1, 1, 0, 91);
  test_kind_fd("d=Dropout(0.4,s3,noise*x1x1x1)", 2, s, none, -1, 1, 1, 93);
  test_kind_fd("d=Dropout(0.4,s3,noise1x*x1x*)", 2, s, none, -1, 1, 1, 94);
  test_kind_fd("c=Concatenate", 2, (clt_shape){2, 3, 4}, (clt_shape){2, 3, 7}, -1, 1, 1, 92);
  test_kind_fd("m=Multiply", 2, (clt_shape){2, 3, 4}, (clt_shape){2, 3, 4}, -1, 1, 1, 97);
  test_kind_fd("m=Multiply", 2, (clt_shape){3, 2, 4}, (clt_shape){1, 1, 4}, -1, 1, 1, 98);
  test_kind_fd("m=Multiply", 2, (clt_shape){1, 1, 3}, (clt_shape){2, 3, 3}, -1, 1, 1, 99);
  test_kind_fd("s=Subtract", 2, (clt_shape){2, 2, 3}, (clt_shape){1, 1, 3}, -1, 1, 1, 100);
  test_kind_fd("s=Subtract", 2, (clt_shape){1, 1, 3}, (clt_shape){2, 2, 3}, -1, 1, 1, 101);
  test_kind_fd("a=Add", 2, (clt_shape){2, 2, 3}, (clt_shape){1, 1, 3}, -1, 1, 1, 104);
  test_kind_fd("a=Add", 2, (clt_shape){1, 1, 3}, (clt_shape){3, 2, 3}, -1, 1, 1, 105);
  test_kind_fd("l=LayerScale(0.5,3)", 2, (clt_shape){2, 2, 3}, none, -1, 1, 1, 103);
  test_kind_fd("c=CustomScaleLayer(0.17)", 2, (clt_shape){2, 2, 3}, (clt_shape){2, 2, 3}, -1, 1, 1,
               102);
  test_kind_fd("p=AveragePooling2D(3x3,s2,same)", 2, (clt_shape){7, 5, 3}, none, -1, 1, 1, 93);
  test_kind_fd("p=AveragePooling2D(2x2,s2,valid)", 2, (clt_shape){5, 6, 2}, none, -1, 1, 1, 94);
  test_kind_fd("p=AveragePooling2D(3x2,s2x1,same)", 1, (clt_shape){6, 5, 2}, none, -1, 1, 1, 95);
  test_kind_fd("g=GlobalMaxPooling2D", 2, (clt_shape){3, 4, 5}, none, -1, 1, 1, 96);
  test_kind_fd("c=Cropping2D(1,2,0,3)", 2, (clt_shape){5, 6, 3}, none, -1, 1, 1, 97);
  test_kind_params_fd("n=LayerNormalization(eps1e-06)", 2, (clt_shape){2, 3, 7}, -1, 1, 98);
  test_kind_params_fd("n=LayerNormalization(eps0.001,nocenter)", 1, (clt_shape){2, 2, 5}, -1, 1,
                      99);
  test_kind_params_fd("n=LayerNormalization(eps1e-06,nocenter,noscale)", 1, (clt_shape){1, 3, 4},
                      -1, 1, 100);
  test_kind_params_fd("n=Normalization", 2, (clt_shape){2, 3, 5}, -1, 1, 101);
  test_kind_params_fd("c=Conv2D(4,3x3,s1,same,g4)", 2, (clt_shape){4, 3, 4}, -1, 1, 102);
  test_kind_params_fd("c=Conv2D(6,3x3,s2,same,g2)", 1, (clt_shape){5, 4, 4}, -1, 1, 103);
  test_kind_params_fd("c=Conv2D(6,2x2,s1,valid,g3,nobias)", 1, (clt_shape){3, 3, 6}, -1, 1, 104);
}
