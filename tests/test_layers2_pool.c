/* test_layers2, part 2 (see test_layers2.c): MaxPooling2D with zero padding, and a
 * Conv2D with the 2x2 max pooling after it as the replica's plan runs them (fused on
 * the cpu backend), through their ops tables against the references; and the
 * conditions under which the plan fuses the pair. */
#include <math.h>
#include <stdio.h>

#include "harness.h"
#include "layer.h"
#include "model.h"
#include "plan.h"
#include "ref.h"
#include "ref_resnet.h"
#include "test_layers2.h"

/* ---- max pooling with padding ------------------------------------------------------ */

typedef struct ppool_case {
  int B, H, W, C, pool, stride, pad;
  int mode; /* 0: distinct values around 0; 1: ReLU outputs (many 0s: ties with the
               padding); 2: values from {0, 1, 2} (ties everywhere) */
} ppool_case;

static void test_ppool(const ppool_case *t) {
  static const char *const modes[] = {"distinct", "relu-like", "ties"};
  set_case("maxpool %d s%d pad %d C%d %dx%d B%d %s:", t->pool, t->stride, t->pad, t->C, t->H, t->W,
           t->B, modes[t->mode]);
  clt_layer l = new_layer("pool_under_test=MaxPooling2D(%d,s%d)", t->pool, t->stride);
  l.pad = (clt_pad){t->pad, t->pad, t->pad, t->pad};
  const clt_shape in = {t->H, t->W, t->C};
  if (api_failed(l.ops->setup(&l, &in, &E), "setup")) goto done;
  if (skip_large((double)t->B * t->H * t->W * t->C * t->pool * t->pool)) goto done;
  const int OH = (t->H + 2 * t->pad - t->pool) / t->stride + 1;
  const int OW = (t->W + 2 * t->pad - t->pool) / t->stride + 1;
  expect("setup: output shape", (l.out.h != OH) + (l.out.w != OW) + (l.out.c != t->C), 3);
  if (l.out.h != OH || l.out.w != OW || l.out.c != t->C) goto done;
  if (api_failed(clt_layer_prepare(&l, R, t->B, NULL, &E), "prepare")) goto done;
  const size_t nx = (size_t)t->B * t->H * t->W * t->C, ny = (size_t)t->B * OH * OW * t->C;
  double *x = dnew(nx), *dy = dnew(ny), *y = dnew(ny), *y_ref = dnew(ny);
  double *dx = dnew(nx), *dx_ref = dnew(nx);
  if (t->mode == 0) distinct_fill(x, nx);
  for (size_t i = 0; i < nx && t->mode == 1; i++) x[i] = fmax(0.0, urand(-1, 1));
  for (size_t i = 0; i < nx && t->mode == 2; i++) x[i] = (double)(rng_next() % 3);
  rand_fill(dy, ny, -1, 1);
  const size_t ns = clt_layer_scratch_floats(&l, t->B);
  cl_mem X = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny), DX = dev_new(nx + TAIL);
  cl_mem S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(DY, 0, dy, ny);
  /* dx starts as 7: inputs no window selects must be overwritten with 0. */
  dev_fill(DX, 0, nx, 7.0f);
  clt_layer_io io = layer_io(t->B, X, Y, DY, DX, NULL, NULL, S, NULL);
  if (api_failed(l.ops->forward(&l, &io, &E), "forward")) goto done;
  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  download(Y, 0, y, ny);
  download(DX, 0, dx, nx);
  ref_maxpool_pad_forward(x, t->B, t->H, t->W, t->C, t->pool, t->stride, t->pad, OH, OW, y_ref);
  ref_maxpool_pad_backward(x, t->B, t->H, t->W, t->C, t->pool, t->stride, t->pad, OH, OW, dy,
                           dx_ref);
  check("y", y, y_ref, ny, TOL_EXACT);
  check("dx", dx, dx_ref, nx, TOL_EXACT);
  check_untouched("y tail", Y, ny, TAIL);
  check_untouched("dx tail", DX, nx, TAIL);
done:
  case_end();
}

void test_ppool_all(void) {
  static const ppool_case cases[] = {
      /* B, H, W, C, pool, stride, pad, mode */
      {3, 9, 7, 5, 3, 2, 1, 0},  /* ResNet's pool1 shape of window; scalar channels */
      {1, 8, 8, 16, 3, 2, 1, 1}, /* after a ReLU: zeros tie with the padding */
      {3, 7, 6, 12, 3, 2, 1, 2}, /* ties; float8 and a scalar tail */
      {1, 5, 5, 64, 3, 2, 1, 0}, {3, 6, 5, 3, 2, 2, 1, 0}, /* tiled windows with padding */
      {1, 3, 4, 8, 2, 1, 3, 1}, /* pad >= pool: windows of padding only (y = 0) */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_ppool(&cases[i]);

  set_case("maxpool bad padding:");
  clt_layer l = new_layer("pool1_pool=MaxPooling2D(3,s2)");
  l.pad = (clt_pad){-1, -1, -1, -1};
  clt_err err = {0};
  const clt_shape in = {5, 5, 3};
  expect("negative padding refused", l.ops->setup(&l, &in, &err) != CLT_ERR_ARG, 1);
}

/* ---- Conv2D + MaxPooling2D, fused on the cpu backend --------------------------------- */

typedef struct cpool_case {
  int B, H, W, C, KH, KW, CO, bias;
} cpool_case;

/* The pair as the replica's plan runs it (fused where the backend fuses_conv_pool,
 * as two layers elsewhere) against ref_conv_pool_*: the conv's forward, the
 * pooling's forward, the pooling's backward, the conv's backward (no input gradient:
 * it reads the model's input), with the buffers src/engine/net.c gives them. */
static void test_conv_pool(const cpool_case *t) {
  set_case("conv+maxpool %dx%d C%d->%d %dx%d B%d%s (%s):", t->KH, t->KW, t->C, t->CO, t->H, t->W,
           t->B, t->bias ? "" : " nobias", R->backend == &clt_backend_cpu ? "fused" : "not fused");
  static clt_model m; /* large: not on the stack */
  char desc[160];
  snprintf(desc, sizeof desc,
           "conv=Conv2D(%d,%dx%d,s1,valid%s,relu) pool=MaxPooling2D(2,s2) flat=Flatten d=Dense(2)",
           t->CO, t->KH, t->KW, t->bias ? "" : ",nobias");
  if (api_failed(clt_model_parse("pair", (clt_shape){t->H, t->W, t->C}, 2, CLT_PRE_UNIT, desc, &m,
                                 &E),
                 "model"))
    goto done;
  clt_layer conv = m.layers[0], pool = m.layers[1];
  static clt_plan plan;
  if (api_failed(clt_plan_build(&m, R->backend->name, R->backend->fuses_conv_pool, &plan, &E),
                 "plan"))
    goto done;
  const int fused = plan.steps[0].fusion.pools;
  expect("the plan fuses the pair where the backend does",
         (fused != R->backend->fuses_conv_pool) + (plan.nsteps != m.nlayers - fused), 2);
  const int OH = t->H - t->KH + 1, OW = t->W - t->KW + 1, PH = OH / 2, PW = OW / 2;
  const int K = t->KH * t->KW * t->C;
  if (skip_large((double)t->B * OH * OW * K * t->CO)) goto done;
  const size_t flat = place_params(&conv);
  if (api_failed(clt_layer_prepare(&conv, R, t->B, &plan.steps[0].fusion, &E), "conv prepare") ||
      (!fused &&
       api_failed(clt_layer_prepare(&pool, R, t->B, &plan.steps[1].fusion, &E), "pool prepare")))
    goto done;
  const size_t nx = (size_t)t->B * t->H * t->W * t->C, nz = (size_t)t->B * OH * OW * t->CO;
  const size_t ny = (size_t)t->B * PH * PW * t->CO, nw = conv.params[0].size;
  const size_t koff = conv.params[0].offset, boff = conv.params[1].offset;
  double *x = dnew(nx), *w = dnew(nw), *bias = dnew((size_t)t->CO), *dy = dnew(ny);
  double *y = dnew(ny), *y_ref = dnew(ny), *dw = dnew(nw), *dw_ref = dnew(nw);
  double *db = dnew((size_t)t->CO), *db_ref = dnew((size_t)t->CO);
  rand_fill(x, nx, -1, 1);
  rand_fill(w, nw, -sqrt(3.0 / K), sqrt(3.0 / K));
  if (t->bias) rand_fill(bias, (size_t)t->CO, -0.5, 0.5);
  rand_fill(dy, ny, -1, 1);
  size_t ns = clt_layer_scratch_floats(&conv, t->B);
  if (clt_layer_scratch_floats(&pool, t->B) > ns) ns = clt_layer_scratch_floats(&pool, t->B);
  cl_mem X = dev_new(nx), YC = dev_new(nz + TAIL), YP = dev_new(ny + TAIL), DYP = dev_new(ny);
  cl_mem DYC = dev_new(nz + TAIL), P = dev_new(flat), G = dev_new(flat), S = dev_new(ns + TAIL);
  upload(X, 0, x, nx);
  upload(P, koff, w, nw);
  if (t->bias) upload(P, boff, bias, (size_t)t->CO);
  upload(DYP, 0, dy, ny);
  clt_layer_io io = {.replica = R,
                     .batch = t->B,
                     .train = 1,
                     .params = P,
                     .grads = G,
                     .scratch = S,
                     .fusion = plan.steps[0].fusion};
  /* As the net runs them: fused, the conv writes the pooling's output and reads
   * its output gradient, and the pooling's passes do not run. */
  io.x = X, io.y = fused ? YP : YC;
  if (api_failed(conv.ops->forward(&conv, &io, &E), "conv forward")) goto done;
  io.x = YC, io.y = YP, io.fusion = plan.steps[fused ? 0 : 1].fusion;
  if (!fused && api_failed(pool.ops->forward(&pool, &io, &E), "pool forward")) goto done;
  io.dy = DYP, io.dx = DYC;
  if (!fused && api_failed(pool.ops->backward(&pool, &io, &E), "pool backward")) goto done;
  io.x = X, io.y = fused ? YP : YC, io.dy = fused ? DYP : DYC, io.dx = NULL;
  io.fusion = plan.steps[0].fusion;
  if (api_failed(conv.ops->backward(&conv, &io, &E), "conv backward")) goto done;
  download(YP, 0, y, ny);
  download(G, koff, dw, nw);
  download(G, boff, db, (size_t)t->CO);
  ref_conv_pool_forward(x, t->B, t->H, t->W, t->C, w, t->bias ? bias : NULL, t->KH, t->KW, t->CO,
                        PH, PW, y_ref);
  ref_conv_pool_backward(x, t->B, t->H, t->W, t->C, w, t->bias ? bias : NULL, t->KH, t->KW, t->CO,
                         PH, PW, dy, dw_ref, db_ref);
  check("y", y, y_ref, ny, TOL_REDUCE);
  check("dW", dw, dw_ref, nw, TOL_REDUCE);
  if (t->bias) check("dbias", db, db_ref, (size_t)t->CO, TOL_REDUCE);
  check_flat("grads: gaps untouched", G, &conv, flat, 0, t->bias ? 1 : 0);
  check_untouched("pooled output tail", YP, ny, TAIL);
  check_untouched("conv output tail", YC, nz, TAIL);
  check_untouched("conv gradient tail", DYC, nz, TAIL);
  check_untouched("scratch tail", S, ns, TAIL);
done:
  case_end();
}

void test_conv_pool_all(void) {
  static const cpool_case cases[] = {
      /* B, H, W, C, KH, KW, CO, bias */
      {5, 28, 28, 1, 3, 3, 64, 1}, /* fmnist-cnn's first layer: 26 -> 13 */
      {3, 27, 27, 1, 3, 3, 16, 1}, /* 25 -> 12: the last row and column in no window */
      {7, 27, 27, 3, 3, 3, 64, 1}, /* RGB, K = 27 (the generic tap loops) */
      {1, 9, 8, 1, 3, 3, 16, 0},   /* no bias; small mode's size */
      {3, 7, 8, 2, 2, 3, 32, 1},   /* KH != KW, C = 2; small mode's size */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_conv_pool(&cases[i]);
}

/* Where the plan must keep the layers apart, on a backend that fuses the pair
 * (fused or not, the results are the same: this guards the conditions). */
void test_conv_pool_conditions(void) {
  set_case("conv+maxpool fusing conditions:");
  static clt_model m;
  static const struct {
    const char *desc, *what;
    int fused;
  } cases[] = {
      {"c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "fused", 1},
      {"c=Conv2D(16,3x3,s1,valid) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "no ReLU", 0},
      {"c=Conv2D(24,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)",
       "filters not a multiple of 16", 0},
      {"c=Conv2D(16,3x3,s1,same,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "padding", 0},
      {"c=Conv2D(16,3x3,s2,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "stride 2", 0},
      {"c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(3,s2) f=Flatten d=Dense(2)", "pool 3", 0},
      {"c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(2,s1) f=Flatten d=Dense(2)", "stride 1 pool",
       0},
      {"c=Conv2D(16,7x7,s1,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(2)", "49 taps", 0},
      {"a=Conv2D(16,1x1,s1,valid) c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) "
       "f=Flatten d=Dense(2)",
       "input not the model's (its gradient is needed)", 0},
      {"c=Conv2D(16,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) q=MaxPooling2D(2,s2)<c f=Flatten<p "
       "g=Flatten<q s=Concatenate<f,g d=Dense(2)",
       "output read twice", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (clt_model_parse("pair", (clt_shape){10, 10, 1}, 2, CLT_PRE_UNIT, cases[i].desc, &m, &E)) {
      report(cases[i].what, 1.0, 0.0, E.msg);
      continue;
    }
    static clt_plan plan;
    if (clt_plan_build(&m, "cpu", 1, &plan, &E)) continue;
    const int c = clt_model_find(&m, "c"), p = clt_model_find(&m, "p");
    int pools = 0, pool_runs = 0;
    for (int k = 0; k < plan.nsteps; k++) {
      pools += plan.steps[k].layer == c && plan.steps[k].fusion.pools;
      pool_runs += plan.steps[k].layer == p;
    }
    expect(cases[i].what, (pools != cases[i].fused) + (pool_runs == cases[i].fused), 2);
  }
}
