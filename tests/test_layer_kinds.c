/* Every layer kind on the device against its own reference passes (ops->ref_forward,
 * ops->ref_backward), through nothing but its ops table: outputs, input gradients and
 * every parameter slot, in training and inference mode. A kind without a case here
 * fails the test, so a new kind is tested from the day it is added: give it a line
 * in `cases` (the per-kind tests, test_kernels and test_layers2, go further). */
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* Relative to the largest reference value (see check()): float kernels against
 * double references over sums of at most a few hundred terms. */
#define TOL 2e-5
#define TOL_BN 1e-4 /* batch normalization divides by a batch's standard deviation */

typedef struct kind_case {
  const char *entry; /* "name=Kind(args)" */
  int pad;           /* a folded ZeroPadding2D */
  int B, H, W, C;
} kind_case;

static const kind_case cases[] = {
    {"conv=Conv2D(5,3x3,s2,same,relu)", 0, 2, 7, 6, 3},
    {"conv_pad=Conv2D(4,3x3,s1,valid)", 1, 2, 5, 5, 2},
    {"pool=MaxPooling2D(2,s2)", 0, 2, 5, 6, 3},
    {"pool_pad=MaxPooling2D(3,s2)", 1, 2, 6, 6, 4},
    {"dense=Dense(7,relu)", 0, 3, 1, 1, 12},
    {"flatten=Flatten", 0, 2, 2, 3, 4},
    {"bn=BatchNormalization(eps0.001,m0.99,relu)", 0, 2, 3, 3, 5},
    {"add=Add(relu)", 0, 2, 2, 3, 9},
    {"gap=GlobalAveragePooling2D", 0, 2, 3, 2, 11},
    {"relu=ReLU", 0, 2, 3, 5, 7},
    /* More paths of the same kinds at sizes Oclgrind runs quickly (tests/oclgrind.sh
     * needs every kernel of cl/ to run): im2col with C >= 4, vector and scalar; one
     * channel over 578 rows (im2col_rows, three blocks of bias sums); 17 filters;
     * overlapping windows without padding; tiled windows of 3; a padded pool with
     * 8 channels and a tail. */
    {"conv_c4=Conv2D(5,3x3,s1,valid,relu)", 0, 2, 6, 6, 4},
    {"conv_s2=Conv2D(3,3x3,s2,same)", 0, 2, 7, 7, 5},
    {"conv_c1=Conv2D(4,2x2,s1,valid,relu)", 0, 2, 18, 18, 1},
    {"conv_17=Conv2D(17,3x3,s1,same,relu)", 0, 1, 5, 5, 9},
    {"pool_overlap=MaxPooling2D(3,s2)", 0, 2, 7, 7, 5},
    {"pool_3s3=MaxPooling2D(3,s3)", 0, 1, 7, 9, 4},
    {"pool_pad12=MaxPooling2D(3,s2)", 1, 2, 6, 6, 12},
};
#define NCASES (sizeof cases / sizeof cases[0])

static void test_case(const kind_case *t) {
  set_case("%s pad %d B%d %dx%dx%d:", t->entry, t->pad, t->B, t->H, t->W, t->C);
  clt_layer l;
  if (api_failed(clt_layer_init(&l, t->entry, &E), "init")) goto done;
  l.pad = t->pad;
  const clt_shape in[2] = {{t->H, t->W, t->C}, {t->H, t->W, t->C}};
  if (api_failed(l.ops->setup(&l, in, &E), "setup")) goto done;
  const int B = t->B;
  const size_t nx = clt_shape_size(l.in) * B, ny = clt_shape_size(l.out) * B;
  const size_t flat = place_params(&l);
  double *params = dnew(flat), *grads_ref = dnew(flat), *grads = dnew(flat);
  for (int p = 0; p < l.nparams; p++) {
    const int variance = strcmp(l.params[p].name, "moving_variance") == 0;
    rand_fill(params + l.params[p].offset, l.params[p].size, variance ? 0.5 : -1.0,
              variance ? 1.5 : 1.0);
  }
  double *x = dnew(nx), *x2 = dnew(nx), *y = dnew(ny), *y_ref = dnew(ny), *dy = dnew(ny);
  double *dy_ref = dnew(ny), *dx = dnew(nx), *dx2 = dnew(nx), *dx_ref = dnew(nx),
         *dx2_ref = dnew(nx);
  rand_fill(x, nx, -1, 1);
  rand_fill(x2, nx, -1, 1);
  rand_fill(dy, ny, -1, 1);
  const double tol = l.nparams == 4 ? TOL_BN : TOL;
  const double stat_weight = 0.5;

  /* The reference's forward, training mode. */
  clt_ref_io ref = {.batch = B,
                    .train = 1,
                    .stat_weight = stat_weight,
                    .params = params,
                    .grads = grads_ref,
                    .x = x,
                    .x2 = l.ninputs > 1 ? x2 : NULL,
                    .y = y_ref};
  l.ops->ref_forward(&l, &ref);
  if (l.ops->aliases_input) {
    /* Moves no data on the device: the reference must be the identity both ways. */
    check("y is x", y_ref, x, nx, 0);
    memcpy(dy_ref, dy, ny * sizeof *dy);
    ref.dy = dy_ref, ref.dx = dx_ref;
    l.ops->ref_backward(&l, &ref);
    check("dx is dy", dx_ref, dy, nx, 0);
    goto done;
  }

  if (l.ops->prepare && api_failed(l.ops->prepare(&l, R, B, &E), "prepare")) goto done;
  const size_t ns = clt_layer_scratch_floats(&l, B), nst = clt_layer_state_floats(&l);
  cl_mem X = dev_new(nx), X2 = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny);
  cl_mem DX = dev_new(nx + TAIL), DX2 = dev_new(nx + TAIL), P = dev_new(flat), G = dev_new(flat);
  cl_mem S = dev_new(ns + TAIL), ST = nst ? dev_new(nst) : NULL;
  upload(X, 0, x, nx);
  upload(X2, 0, x2, nx);
  upload(P, 0, params, flat);
  upload(DY, 0, dy, ny);
  clt_layer_io io = {.replica = R,
                     .batch = B,
                     .train = 1,
                     .stat_weight = (float)stat_weight,
                     .x = X,
                     .x2 = l.ninputs > 1 ? X2 : NULL,
                     .y = Y,
                     .dy = DY,
                     .dx = DX,
                     .dx2 = l.ninputs > 1 ? DX2 : NULL,
                     .params = P,
                     .grads = G,
                     .scratch = S,
                     .state = ST};
  if (api_failed(l.ops->forward(&l, &io, &E), "forward (train)")) goto done;
  download(Y, 0, y, ny);
  check("y (train)", y, y_ref, ny, tol);
  check_untouched("y tail", Y, ny, TAIL);

  /* Backward; the reference masks fused ReLUs by the device's y (see relu_mask). */
  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  memcpy(dy_ref, dy, ny * sizeof *dy);
  ref.y = y, ref.dy = dy_ref, ref.dx = dx_ref, ref.dx2 = l.ninputs > 1 ? dx2_ref : NULL;
  l.ops->ref_backward(&l, &ref);
  download(DX, 0, dx, nx);
  check("dx", dx, dx_ref, nx, tol);
  check_untouched("dx tail", DX, nx, TAIL);
  if (l.ninputs > 1) {
    download(DX2, 0, dx2, nx);
    check("dx2", dx2, dx2_ref, nx, tol);
  }
  download(G, 0, grads, flat);
  for (int p = 0; p < l.nparams; p++) {
    char what[64];
    snprintf(what, sizeof what, "gradient slot of %s", l.params[p].name);
    check(what, grads + l.params[p].offset, grads_ref + l.params[p].offset, l.params[p].size, tol);
  }
  if (l.nparams)
    check_flat("no write outside the parameters' slots", G, &l, flat, 0, l.nparams - 1);

  /* Inference mode. */
  io.train = 0;
  ref.train = 0, ref.grads = NULL, ref.y = y_ref;
  if (api_failed(l.ops->forward(&l, &io, &E), "forward (inference)")) goto done;
  l.ops->ref_forward(&l, &ref);
  download(Y, 0, y, ny);
  check("y (inference)", y, y_ref, ny, tol);
done:
  case_end();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  rng_seed(0x6b1d5);
  replica_open();
  for (int k = 0; clt_layer_kinds[k]; k++) {
    int n = 0;
    for (size_t i = 0; i < NCASES; i++) {
      clt_layer l;
      n += clt_layer_init(&l, cases[i].entry, NULL) == CLT_OK && l.ops == clt_layer_kinds[k];
    }
    set_case("kind %s:", clt_layer_kinds[k]->kind);
    expect("has a case in test_layer_kinds.c", n == 0, 1);
  }
  for (size_t i = 0; i < NCASES; i++) test_case(&cases[i]);
  replica_close();
  return summary();
}
