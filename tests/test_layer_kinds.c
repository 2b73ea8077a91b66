/* Every layer kind on the device against its own reference passes (ops->ref_forward,
 * ops->ref_backward), through nothing but its ops table: outputs, input gradients and
 * every parameter slot, in training and inference mode. A kind without a case here
 * fails the test, so a new kind is tested from the day it is added: give it a line
 * in `cases` (the per-kind tests, test_kernels and test_layers2, go further). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* Relative to the largest reference value (see check()): float kernels against
 * double references over sums of at most a few hundred terms. */
#define TOL 2e-5
#define TOL_BN 1e-4 /* batch normalization divides by a batch's standard deviation */

typedef struct kind_case {
  const char *entry; /* "name=Kind(args)", or "p=ZeroPadding2D(t,b,l,r) name=Kind(args)"
                        for other folded padding than pad */
  int pad;           /* a folded ZeroPadding2D of pad on every side */
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
    /* Keras' layers of MobileNet-like models: asymmetric folded padding (0, 1, 0, 1);
     * no bias (with a ReLU: bias_act without a bias and the ReLU's sums to scratch;
     * no N % 16 == 0: Oclgrind's --uninitialized fails in cltrain's float16 GEMM, see
     * tests/oclgrind.sh); BatchNormalization without beta, gamma or both
     * (float8 and a tail); 'same' and non-square max pooling; depthwise convolutions
     * (float8 channels with M = 1, M = 2, two blocks of weight-gradient sums),
     * separable ones; a ZeroPadding2D of its own. */
    {"p=ZeroPadding2D(0,1,0,1) conv_asym=Conv2D(4,3x3,s2,valid)", 0, 2, 6, 7, 3},
    {"conv_nb=Conv2D(6,3x3,s1,same,nobias,relu)", 0, 2, 5, 5, 4},
    {"conv_nb1x1=Conv2D(12,1x1,s1,valid,nobias)", 0, 2, 3, 3, 5},
    {"dense_nb=Dense(5,nobias,relu)", 0, 3, 1, 1, 10},
    {"dense_nb12=Dense(12,nobias)", 0, 2, 1, 1, 6},
    {"bn_nc=BatchNormalization(eps0.001,m0.99,nocenter)", 0, 2, 3, 3, 9},
    {"bn_ns=BatchNormalization(eps0.001,m0.99,noscale,relu)", 0, 2, 3, 3, 5},
    {"bn_none=BatchNormalization(eps0.001,m0.99,nocenter,noscale)", 0, 2, 2, 3, 12},
    {"pool_same=MaxPooling2D(3,s2,same)", 0, 2, 7, 5, 9},
    {"pool_same2=MaxPooling2D(2,s2,same)", 0, 1, 5, 5, 3},
    {"pool_rect=MaxPooling2D(2x3,s1x2)", 0, 2, 5, 7, 4},
    {"p=ZeroPadding2D(0,1,0,1) pool_asym=MaxPooling2D(3,s2)", 0, 2, 6, 6, 8},
    {"dw=DepthwiseConv2D(3x3,s1,same)", 0, 2, 5, 6, 8},
    {"dw_m2=DepthwiseConv2D(3x3,s2,valid,m2,relu)", 0, 2, 7, 7, 3},
    {"p=ZeroPadding2D(0,1,0,1) dw_asym=DepthwiseConv2D(3x3,s2,valid,nobias)", 0, 2, 6, 6, 10},
    {"dw_blocks=DepthwiseConv2D(3x3,s1,same,relu)", 0, 2, 17, 17, 3},
    {"dw_m2nb=DepthwiseConv2D(2x3,s1,valid,m2,nobias,relu)", 0, 1, 4, 5, 2},
    {"sep=SeparableConv2D(5,3x3,s1,same)", 0, 2, 5, 6, 4},
    {"sep_m2=SeparableConv2D(12,3x3,s2,valid,m2,nobias,relu)", 0, 2, 7, 7, 3},
    {"p=ZeroPadding2D(0,1,0,1) sep_asym=SeparableConv2D(6,3x3,s2,valid,relu)", 0, 2, 6, 6, 8},
    {"zpad=ZeroPadding2D(1,2,0,3)", 0, 2, 3, 4, 9},
    {"zpad1=ZeroPadding2D(1)", 0, 1, 2, 2, 3},
    /* The kinds of Keras model files (more in test_more_kinds): elementwise ones over
     * a float8 tail; softmax over 10 channels and over 300 (more than a GPU group);
     * ReLU(0.5) clips inputs in [-1, 1]; Dropout in training (and inference). */
    {"act_sigmoid=Activation(sigmoid)", 0, 2, 3, 5, 7},
    {"act_tanh=Activation(tanh)", 0, 2, 3, 3, 5},
    {"act_relu6=Activation(relu6)", 0, 2, 3, 3, 5},
    {"act_relu=Activation(relu)", 0, 2, 2, 3, 5},
    {"act_linear=Activation(linear)", 0, 2, 2, 3, 5},
    {"act_softmax=Activation(softmax)", 0, 2, 2, 3, 10},
    {"act_softmax300=Activation(softmax)", 0, 3, 1, 1, 300},
    {"relu6=ReLU(6)", 0, 2, 3, 5, 7},
    {"relu_half=ReLU(0.5)", 0, 2, 3, 5, 7},
    {"rescaling=Rescaling(0.00392156862745098,-0.5)", 0, 2, 3, 5, 7},
    {"dropout=Dropout(0.25,s7)", 0, 2, 3, 5, 7},
    {"dropout_0=Dropout(0,s0)", 0, 2, 2, 3, 5},
    {"concat=Concatenate", 0, 2, 3, 3, 5},
    {"avgpool=AveragePooling2D(2x2,s2,valid)", 0, 2, 5, 6, 3},
    {"avgpool_same=AveragePooling2D(3x3,s2,same)", 0, 2, 7, 5, 10},
    {"avgpool_rect=AveragePooling2D(3x2,s2x1,same)", 0, 1, 6, 5, 9},
    {"avgpool_overlap=AveragePooling2D(3x2,s1x2,valid)", 0, 2, 5, 6, 8},
    {"gmp=GlobalMaxPooling2D", 0, 2, 3, 4, 11},
    {"mul=Multiply", 0, 2, 3, 3, 5},
    {"sub=Subtract", 0, 2, 3, 2, 6},
    {"reshape=Reshape(3,-1,2)", 0, 2, 2, 3, 4},
    {"cscale=CustomScaleLayer(0.17)", 0, 2, 3, 3, 5},
    {"lscale=LayerScale(1e-06,11)", 0, 2, 3, 2, 11},
    /* Issue 38's normalizations and cropping: LayerNormalization over 96 channels
     * (GPU groups striding them) and 5, with and without gamma and beta;
     * Normalization with a float8 tail; Cropping2D on uneven sides. */
    {"ln=LayerNormalization(eps1e-06)", 0, 2, 3, 2, 96},
    {"ln5=LayerNormalization(eps0.001)", 0, 2, 3, 3, 5},
    {"ln_nc=LayerNormalization(eps1e-06,nocenter)", 0, 1, 2, 3, 9},
    {"ln_none=LayerNormalization(eps1e-06,nocenter,noscale)", 0, 2, 2, 2, 4},
    {"norm=Normalization", 0, 2, 3, 4, 11},
    {"crop=Cropping2D(1,2,0,3)", 0, 2, 5, 6, 9},
    {"crop1=Cropping2D(1)", 0, 1, 4, 4, 3},
    /* Conv2D with groups: groups == channels == filters (the depthwise passes, with a
     * ReLU and without a bias), and 2 or 3 groups of several channels and filters (338
     * positions: two blocks of the kernel gradient's partial sums). */
    {"gconv_dw=Conv2D(6,3x3,s1,same,g6,relu)", 0, 2, 5, 6, 6},
    {"gconv_dw7=Conv2D(9,7x7,s1,same,g9,nobias)", 0, 1, 8, 8, 9},
    {"gconv_g2=Conv2D(6,3x3,s2,same,g2,relu)", 0, 2, 7, 6, 4},
    {"gconv_g3=Conv2D(6,2x3,s1,valid,g3,nobias)", 1, 2, 5, 5, 9},
    {"gconv_blocks=Conv2D(4,3x3,s1,same,g2)", 0, 2, 13, 13, 4},
    /* Activations computed from the input x (wider inputs in test_more_kinds). */
    {"act_swish=Activation(swish)", 0, 2, 3, 5, 7},
    {"act_hsig=Activation(hard_sigmoid)", 0, 2, 3, 5, 7},
    {"act_hsig_k2=Activation(hard_sigmoid_k2)", 0, 2, 3, 5, 7},
    {"act_hsilu=Activation(hard_silu)", 0, 2, 3, 5, 7},
    {"act_gelu=Activation(gelu)", 0, 2, 3, 5, 7},
    {"act_gelu_tanh=Activation(gelu_tanh)", 0, 2, 3, 5, 7},
    {"act_elu=Activation(elu)", 0, 2, 3, 5, 7},
    {"act_elu_half=Activation(elu,0.5)", 0, 1, 2, 3, 5},
    {"act_selu=Activation(selu)", 0, 2, 3, 5, 7},
    {"act_leaky=Activation(leaky_relu)", 0, 2, 3, 5, 7},
    {"act_leaky_03=Activation(leaky_relu,0.3)", 0, 1, 2, 3, 5},
    /* Dense on 4-D inputs: every position's channels (Keras' last axis). */
    {"dense4d=Dense(6)", 0, 2, 3, 4, 5},
    {"dense4d_relu_nb=Dense(9,nobias,relu)", 0, 2, 2, 3, 12},
    /* Dropout with Keras' noise_shape: one draw per example (drop-connect), per
     * channel, shared by the batch, per channel of a flat input. */
    {"dropout_dc=Dropout(0.5,s7,noise*x1x1x1)", 0, 4, 3, 5, 7},
    {"dropout_hw=Dropout(0.4,s2,noise*x1x1x*)", 0, 2, 3, 5, 7},
    {"dropout_b=Dropout(0.4,s3,noise1x*x5x1)", 0, 2, 3, 5, 7},
    {"dropout_flat=Dropout(0.3,s4,noise*x1)", 0, 3, 1, 1, 10},
};
#define NCASES (sizeof cases / sizeof cases[0])

static void test_case(const kind_case *t) {
  set_case("%s pad %d B%d %dx%dx%d:", t->entry, t->pad, t->B, t->H, t->W, t->C);
  clt_layer l;
  clt_pad pad = {t->pad, t->pad, t->pad, t->pad};
  const char *entry = t->entry, *space = strchr(entry, ' '), *open = strchr(entry, '(');
  if (space) {
    /* "p=ZeroPadding2D(t,b,l,r) layer": those sides folded into the layer. */
    char args[32];
    snprintf(args, sizeof args, "%.*s", (int)(space - open - 2), open + 1);
    expect("folded padding parses", clt_pad_parse(args, &pad) != 0, 1);
    entry = space + 1;
  }
  if (api_failed(clt_layer_init(&l, entry, &E), "init")) goto done;
  l.pad = pad;
  const clt_shape in[2] = {{t->H, t->W, t->C}, {t->H, t->W, t->C}};
  if (api_failed(l.ops->setup(&l, in, &E), "setup")) goto done;
  const int B = t->B;
  const size_t nx = clt_shape_size(l.in) * B, ny = clt_shape_size(l.out) * B;
  const size_t flat = place_params(&l);
  double *params = dnew(flat), *grads_ref = dnew(flat), *grads = dnew(flat);
  for (int p = 0; p < l.nparams; p++) {
    const int variance = strcmp(l.params[p].name, "moving_variance") == 0 ||
                         strcmp(l.params[p].name, "variance") == 0;
    rand_fill(params + l.params[p].offset, l.params[p].size, variance ? 0.5 : -1.0,
              variance ? 1.5 : 1.0);
  }
  double *x = dnew(nx), *x2 = dnew(nx), *y = dnew(ny), *y_ref = dnew(ny), *dy = dnew(ny);
  double *dy_ref = dnew(ny), *dx = dnew(nx), *dx2 = dnew(nx), *dx_ref = dnew(nx),
         *dx2_ref = dnew(nx);
  rand_fill(x, nx, -1, 1);
  rand_fill(x2, nx, -1, 1);
  rand_fill(dy, ny, -1, 1);
  const double tol = strcmp(l.ops->kind, "BatchNormalization") == 0 ? TOL_BN : TOL;
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

  if (api_failed(clt_layer_prepare(&l, R, B, NULL, &E), "prepare")) goto done;
  const size_t ns = clt_layer_scratch_floats(&l, B), nst = clt_layer_state_floats(&l);
  cl_mem X = dev_new(nx), X2 = dev_new(nx), Y = dev_new(ny + TAIL), DY = dev_new(ny);
  cl_mem DX = dev_new(nx + TAIL), DX2 = dev_new(nx + TAIL), P = dev_new(flat), G = dev_new(flat);
  cl_mem S = dev_new(ns + TAIL), ST = nst ? dev_new(nst) : NULL;
  upload(X, 0, x, nx);
  upload(X2, 0, x2, nx);
  upload(P, 0, params, flat);
  upload(DY, 0, dy, ny);
  clt_layer_io io = layer_io(B, X, Y, DY, DX, P, G, S, ST);
  io.stat_weight = (float)stat_weight;
  io.x2 = l.ninputs > 1 ? X2 : NULL, io.dx2 = l.ninputs > 1 ? DX2 : NULL;
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

/* One kind without parameters on the device against its reference, for inputs of
 * any two shapes and range (test_case's are equal, in [-1, 1]): training forward and
 * backward, then inference. */
static void run_kind(const char *entry, int B, clt_shape in0, clt_shape in1, double lo, double hi) {
  set_case("%s B%d %dx%dx%d, %dx%dx%d, x in [%g, %g]:", entry, B, in0.h, in0.w, in0.c, in1.h, in1.w,
           in1.c, lo, hi);
  clt_layer l;
  const clt_shape in[2] = {in0, in1};
  if (api_failed(clt_layer_init(&l, entry, &E), "init")) goto done;
  if (api_failed(l.ops->setup(&l, in, &E), "setup")) goto done;
  const int two = l.ninputs > 1;
  const size_t nx = clt_shape_size(in0) * B, nx2 = two ? clt_shape_size(in1) * B : 1;
  const size_t ny = clt_shape_size(l.out) * B;
  double *x = dnew(nx), *x2 = dnew(nx2), *y = dnew(ny), *y_ref = dnew(ny), *dy = dnew(ny);
  double *dy_ref = dnew(ny), *dx = dnew(nx), *dx2 = dnew(nx2), *dx_ref = dnew(nx);
  double *dx2_ref = dnew(nx2);
  rand_fill(x, nx, lo, hi);
  rand_fill(x2, nx2, lo, hi);
  rand_fill(dy, ny, -1, 1);
  if (api_failed(clt_layer_prepare(&l, R, B, NULL, &E), "prepare")) goto done;
  cl_mem X = dev_new(nx), X2 = dev_new(nx2), Y = dev_new(ny + TAIL), DY = dev_new(ny);
  cl_mem DX = dev_new(nx + TAIL), DX2 = dev_new(nx2 + TAIL), P = dev_new(1), G = dev_new(1);
  cl_mem S = dev_new(clt_layer_scratch_floats(&l, B) + TAIL);
  upload(X, 0, x, nx);
  upload(X2, 0, x2, nx2);
  upload(DY, 0, dy, ny);
  clt_layer_io io = layer_io(B, X, Y, DY, DX, P, G, S, NULL);
  io.x2 = two ? X2 : NULL, io.dx2 = two ? DX2 : NULL;
  clt_ref_io ref = {.batch = B, .train = 1, .stat_weight = 1.0, .x = x, .x2 = two ? x2 : NULL};
  ref.y = y_ref;
  l.ops->ref_forward(&l, &ref);
  if (api_failed(l.ops->forward(&l, &io, &E), "forward (train)")) goto done;
  download(Y, 0, y, ny);
  check("y (train)", y, y_ref, ny, TOL);
  check_untouched("y tail", Y, ny, TAIL);
  if (api_failed(l.ops->backward(&l, &io, &E), "backward")) goto done;
  memcpy(dy_ref, dy, ny * sizeof *dy);
  ref.y = y, ref.dy = dy_ref, ref.dx = dx_ref, ref.dx2 = two ? dx2_ref : NULL;
  l.ops->ref_backward(&l, &ref);
  download(DX, 0, dx, nx);
  check("dx", dx, dx_ref, nx, TOL);
  check_untouched("dx tail", DX, nx, TAIL);
  if (two) {
    download(DX2, 0, dx2, nx2);
    check("dx2", dx2, dx2_ref, nx2, TOL);
    check_untouched("dx2 tail", DX2, nx2, TAIL);
  }
  io.train = ref.train = 0;
  ref.y = y_ref;
  l.ops->ref_forward(&l, &ref);
  if (api_failed(l.ops->forward(&l, &io, &E), "forward (inference)")) goto done;
  download(Y, 0, y, ny);
  check("y (inference)", y, y_ref, ny, TOL);
done:
  case_end();
}

/* Runs Dropout `l` forward over examples [first, first + count) of the global batch x
 * (n floats each) as one slice, writing that part of y; likewise backward from dy
 * into dx. */
static void dropout_slice(const clt_layer *l, const double *x, const double *dy, size_t n,
                          int first, int count, int train, double *y, double *dx) {
  const size_t m = n * count, at = n * first;
  cl_mem X = dev_new(m), Y = dev_new(m), DY = dev_new(m), DX = dev_new(m);
  upload(X, 0, x + at, m);
  upload(DY, 0, dy + at, m);
  clt_layer_io io = {.replica = R,
                     .batch = count,
                     .train = train,
                     .x = X,
                     .y = Y,
                     .dy = DY,
                     .dx = DX,
                     .seed = 0x5eed,
                     .step = 41,
                     .example0 = first};
  if (api_failed(l->ops->forward(l, &io, &E), "forward") ||
      api_failed(l->ops->backward(l, &io, &E), "backward"))
    return;
  download(Y, 0, y + at, m);
  download(DX, 0, dx + at, m);
}

/* Dropout's mask depends on nothing but (seed, layer, step, global example, element):
 * one global batch of 4 examples run as (4), (1, 3) and (2, 2) slices gives the same
 * outputs and gradients, equal to the reference's; about 1 - rate of the values are
 * kept, scaled by 1 / (1 - rate); inference is the identity. */
static void test_dropout_slices(void) {
  set_case("dropout slices:");
  clt_layer l;
  const double rate = 0.3;
  /* ~10^5 values; 8 * 10^3 in small mode (Oclgrind), where 3% is still 6 sigmas. */
  const clt_shape shape = small_mode() ? (clt_shape){4, 4, 128} : (clt_shape){10, 10, 250};
  const int B = 4;
  if (api_failed(clt_layer_init(&l, "drop=Dropout(0.3,s5)", &E), "init") ||
      api_failed(l.ops->setup(&l, &shape, &E), "setup") ||
      api_failed(clt_layer_prepare(&l, R, B, NULL, &E), "prepare"))
    goto done;
  const size_t n = clt_shape_size(shape), total = n * B;
  double *x = dnew(total), *dy = dnew(total), *y[3], *dx[3];
  rand_fill(x, total, 0.5, 1.5); /* never 0: a 0 in y is a dropped value */
  rand_fill(dy, total, 0.5, 1.5);
  static const int splits[3][3] = {{4, 0, 0}, {1, 3, 0}, {2, 2, 0}};
  for (int s = 0; s < 3; s++) {
    y[s] = dnew(total), dx[s] = dnew(total);
    for (int k = 0, first = 0; splits[s][k]; first += splits[s][k++])
      dropout_slice(&l, x, dy, n, first, splits[s][k], 1, y[s], dx[s]);
  }
  size_t differ = 0, kept = 0, bad_scale = 0, bad_grad = 0;
  for (size_t i = 0; i < total; i++) {
    differ += y[1][i] != y[0][i] || y[2][i] != y[0][i] || dx[1][i] != dx[0][i] ||
              dx[2][i] != dx[0][i];
    kept += y[0][i] != 0.0;
    bad_scale += y[0][i] != 0.0 && fabs(y[0][i] - x[i] / (1 - rate)) > 1e-6 * y[0][i];
    bad_grad += (dx[0][i] != 0.0) != (y[0][i] != 0.0);
  }
  expect("(4), (1, 3) and (2, 2) slices give the same y and dx", differ, total);
  expect("kept values scaled by 1 / (1 - rate)", bad_scale, total);
  expect("dx has y's mask", bad_grad, total);
  const double frac = (double)kept / (double)total, tol = small_mode() ? 0.03 : 0.01;
  report("kept fraction against 1 - rate", fabs(frac - (1 - rate)), tol, "");
  /* The reference draws the same mask. */
  double *y_ref = dnew(total);
  clt_ref_io ref = {.batch = B, .train = 1, .seed = 0x5eed, .step = 41, .x = x, .y = y_ref};
  l.ops->ref_forward(&l, &ref);
  size_t mask_differs = 0;
  for (size_t i = 0; i < total; i++) mask_differs += (y_ref[i] != 0.0) != (y[0][i] != 0.0);
  expect("the reference's mask", mask_differs, total);
  check("y against the reference", y[0], y_ref, total, TOL);
  /* Another step draws another mask. */
  ref.step = 42;
  l.ops->ref_forward(&l, &ref);
  mask_differs = 0;
  for (size_t i = 0; i < total; i++) mask_differs += (y_ref[i] != 0.0) != (y[0][i] != 0.0);
  expect("the next step's mask differs", mask_differs == 0, 1);
  /* Inference: the identity, as one slice and as two. */
  dropout_slice(&l, x, dy, n, 0, 1, 0, y[1], dx[1]);
  dropout_slice(&l, x, dy, n, 1, 3, 0, y[1], dx[1]);
  size_t not_identity = 0;
  for (size_t i = 0; i < total; i++)
    not_identity += y[1][i] != (double)(float)x[i] || dx[1][i] != (double)(float)dy[i];
  expect("inference is the identity", not_identity, total);
done:
  case_end();
}

/* Dropout with a noise_shape: drop-connect (one draw per example) and one draw per
 * channel of each example, a global batch of 16 as (16), (5, 11) and (8, 8) slices:
 * the same outputs and gradients; each example (each channel of an example) wholly
 * kept or wholly dropped, some of each. */
static void test_dropout_noise_slices(const char *entry, int per_channel) {
  set_case("dropout noise slices %s:", entry);
  clt_layer l;
  const clt_shape shape = {3, 4, 5};
  enum { B = 16 };
  if (api_failed(clt_layer_init(&l, entry, &E), "init") ||
      api_failed(l.ops->setup(&l, &shape, &E), "setup") ||
      api_failed(clt_layer_prepare(&l, R, B, NULL, &E), "prepare"))
    goto done;
  const size_t n = clt_shape_size(shape), total = n * B;
  double *x = dnew(total), *dy = dnew(total), *y[3], *dx[3];
  rand_fill(x, total, 0.5, 1.5); /* never 0: a 0 in y is a dropped value */
  rand_fill(dy, total, 0.5, 1.5);
  static const int splits[3][3] = {{16, 0, 0}, {5, 11, 0}, {8, 8, 0}};
  for (int s = 0; s < 3; s++) {
    y[s] = dnew(total), dx[s] = dnew(total);
    for (int k = 0, first = 0; splits[s][k]; first += splits[s][k++])
      dropout_slice(&l, x, dy, n, first, splits[s][k], 1, y[s], dx[s]);
  }
  size_t differ = 0, mixed = 0, cells = 0, kept = 0;
  for (size_t i = 0; i < total; i++)
    differ += y[1][i] != y[0][i] || y[2][i] != y[0][i] || dx[1][i] != dx[0][i] ||
              dx[2][i] != dx[0][i];
  /* The noise cells: an example, or an example's channel. */
  const int C = shape.c, ncells = per_channel ? C : 1;
  for (int b = 0; b < B; b++)
    for (int k = 0; k < ncells; k++, cells++) {
      size_t in = 0, count = 0;
      for (size_t r = 0; r < n; r++) {
        if (per_channel && (int)(r % (size_t)C) != k) continue;
        in += y[0][(size_t)b * n + r] != 0.0;
        count++;
      }
      mixed += in != 0 && in != count;
      kept += in == count;
    }
  expect("(16), (5, 11) and (8, 8) slices give the same y and dx", differ, total);
  expect("each noise cell wholly kept or wholly dropped", mixed, cells);
  expect("some cells kept, some dropped", kept == 0 || kept == cells, 1);
done:
  case_end();
}

/* What test_case's equal shapes and [-1, 1] inputs cannot reach: Concatenate of
 * different channel counts (float8 runs and tails), relu6 clipping at 6, the hard
 * activations' clipping and the others' tails in [-6, 6], Dropout across replica
 * layouts. */
static void test_more_kinds(void) {
  run_kind("concat_5_11=Concatenate", 2, (clt_shape){3, 3, 5}, (clt_shape){3, 3, 11}, -1, 1);
  run_kind("concat_8_3=Concatenate", 2, (clt_shape){2, 3, 8}, (clt_shape){2, 3, 3}, -1, 1);
  /* Squeeze-and-excitation's broadcast: (1, 1, C) in either order. */
  run_kind("mul_se=Multiply", 2, (clt_shape){4, 3, 5}, (clt_shape){1, 1, 5}, -1, 1);
  run_kind("mul_se1=Multiply", 3, (clt_shape){1, 1, 9}, (clt_shape){2, 5, 9}, -1, 1);
  run_kind("add_se=Add", 2, (clt_shape){3, 2, 6}, (clt_shape){1, 1, 6}, -1, 1);
  run_kind("add_se1=Add", 2, (clt_shape){1, 1, 6}, (clt_shape){2, 3, 6}, -1, 1);
  run_kind("sub_se=Subtract", 2, (clt_shape){3, 3, 4}, (clt_shape){1, 1, 4}, -1, 1);
  run_kind("sub_se1=Subtract", 2, (clt_shape){1, 1, 4}, (clt_shape){3, 2, 4}, -1, 1);
  run_kind("act_relu6_wide=Activation(relu6)", 2, (clt_shape){3, 5, 7}, (clt_shape){0, 0, 0}, -9,
           9);
  run_kind("relu6_wide=ReLU(6)", 2, (clt_shape){3, 5, 7}, (clt_shape){0, 0, 0}, -9, 9);
  static const char *const wide[] = {"act_swish_wide=Activation(swish)",
                                     "act_hsig_wide=Activation(hard_sigmoid)",
                                     "act_hsig_k2_wide=Activation(hard_sigmoid_k2)",
                                     "act_hsilu_wide=Activation(hard_silu)",
                                     "act_gelu_wide=Activation(gelu)",
                                     "act_gelu_tanh_wide=Activation(gelu_tanh)",
                                     "act_elu_wide=Activation(elu)",
                                     "act_selu_wide=Activation(selu)"};
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
    run_kind(wide[i], 2, (clt_shape){3, 5, 7}, (clt_shape){0, 0, 0}, -6, 6);
  test_dropout_slices();
  test_dropout_noise_slices("drop=Dropout(0.5,s5,noise*x1x1x1)", 0);
  test_dropout_noise_slices("drop=Dropout(0.5,s5,noise*x1x1x*)", 1);
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
  test_more_kinds();
  replica_close();
  return summary();
}
