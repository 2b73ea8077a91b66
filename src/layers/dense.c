/* Dense with an optional bias and fused ReLU, as GEMMs of the replica's backend.
 * forward:  y = x W + bias (W is [IN, OUT]), then ReLU
 * backward: dy *= (y > 0); dbias = column sums of dy; dW = x^T dy; dx = dy W^T
 * The rows of x are the examples of a flat input (1x1xIN), or, as Keras applies
 * Dense to the last axis of a 4-D input, every position of every example of an
 * HxWxIN input (the output HxWxOUT: a pointwise product over the channels).
 * Without a bias (use_bias=False) the ReLU's backward still runs through the
 * bias-gradient pass, its sums going to scratch.
 * Scratch: the bias-gradient partial sums [, OUT sums without a bias]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

typedef struct dense_hp {
  int units;
  int relu;   /* fused activation */
  int nobias; /* use_bias=False */
} dense_hp;

static const dense_hp *hp(const clt_layer *l) { return clt_layer_hp(l, dense_hp); }

/* "64,relu", "10" or "10,nobias" */
static int dense_parse(clt_layer *l, const char *args, clt_err *e) {
  dense_hp *h = clt_layer_hp(l, dense_hp);
  int used = 0;
  h->nobias = 0;
  if (sscanf(args, "%d%n", &h->units, &used) == 1 && strncmp(args + used, ",nobias", 7) == 0) {
    h->nobias = 1;
    used += 7;
  }
  if (used == 0 || clt_parse_relu_tail(args + used, &h->relu) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: Dense(%s): expected Dense(units[,nobias][,relu])",
                    l->name, args);
  }
  return CLT_OK;
}

static void dense_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "Dense(%d%s%s)", hp(l)->units, hp(l)->nobias ? ",nobias" : "",
           hp(l)->relu ? ",relu" : "");
}

static int dense_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  const int units = hp(l)->units;
  if (units < 1) return clt_fail(e, CLT_ERR_ARG, "%s: bad units %d", l->name, units);
  if (in.h < 1 || in.w < 1 || in.c < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad input shape %dx%dx%d", l->name, in.h, in.w, in.c);
  }
  l->in = in;
  l->out = (clt_shape){in.h, in.w, units};
  l->params[0] = (clt_param){.name = "kernel",
                             .rank = 2,
                             .dims = {in.c, units},
                             .size = (size_t)in.c * units,
                             .glorot_fan_in = in.c,
                             .glorot_fan_out = units};
  l->params[1] = (clt_param){.name = "bias", .rank = 1, .dims = {units}, .size = (size_t)units};
  l->nparams = hp(l)->nobias ? 1 : 2;
  return CLT_OK;
}

/* The bias parameter, or NULL without one. */
static const clt_param *dense_bias(const clt_layer *l) {
  return hp(l)->nobias ? NULL : &l->params[1];
}

/* The rows of the products: the examples, times the positions of a 4-D input. */
static int rows_of(const clt_layer *l, int batch) { return batch * l->in.h * l->in.w; }

static size_t dense_scratch(const clt_layer *l, int batch) {
  return clt_bias_relu_scratch(rows_of(l, batch), hp(l)->units,
                               clt_layer_trained(l, dense_bias(l)));
}

static clt_gemm_shape fwd_shape(const clt_layer *l, int batch) {
  size_t in = (size_t)l->in.c, out = (size_t)hp(l)->units, rows = (size_t)rows_of(l, batch);
  return (clt_gemm_shape){0, 0, rows, out, in, in, out, out};
}
static clt_gemm_shape dw_shape(const clt_layer *l, int batch) {
  size_t in = (size_t)l->in.c, out = (size_t)hp(l)->units, rows = (size_t)rows_of(l, batch);
  return (clt_gemm_shape){1, 0, in, out, rows, in, out, out};
}
static clt_gemm_shape dx_shape(const clt_layer *l, int batch) {
  size_t in = (size_t)l->in.c, out = (size_t)hp(l)->units, rows = (size_t)rows_of(l, batch);
  return (clt_gemm_shape){0, 1, rows, in, out, out, out, in};
}

static int dense_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                         clt_err *e) {
  (void)f;
  clt_gemm_shape shapes[3] = {fwd_shape(l, max_batch), dw_shape(l, max_batch),
                              dx_shape(l, max_batch)};
  for (int i = 0; i < 3; i++) {
    int status = clt_gemm_reserve(r, &shapes[i], e);
    if (status) return status;
  }
  return CLT_OK;
}

static int dense_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_gemm_shape fwd = fwd_shape(l, io->batch);
  return clt_gemm_bias_relu(io, &fwd, io->x, &l->params[0], dense_bias(l), hp(l)->relu, e);
}

static int dense_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  /* The ReLU's backward (dy *= y > 0) is fused into the bias gradient's pass; a
   * frozen layer computes no weight gradient. */
  int status = clt_bias_relu_grad(io, hp(l)->relu, clt_layer_trained(l, dense_bias(l)), 0,
                                  rows_of(l, io->batch), hp(l)->units, e);
  if (!status && !l->frozen) {
    const clt_gemm_shape dw = dw_shape(l, io->batch);
    status = clt_gemm(io->replica, &dw, 1.0f, io->x, 0, io->dy, 0, 0.0f, io->grads,
                      l->params[0].offset, e);
  }
  if (!status && io->dx) {
    const clt_gemm_shape dx = dx_shape(l, io->batch);
    status = clt_gemm(io->replica, &dx, 1.0f, io->dy, 0, io->params, l->params[0].offset, 0.0f,
                      io->dx, 0, e);
  }
  return status;
}

#ifdef CLT_REFERENCE
static void dense_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const int rows = rows_of(l, io->batch);
  const size_t n = (size_t)rows * hp(l)->units;
  /* Without a bias the reference adds zeros. */
  double *zeros = hp(l)->nobias ? calloc((size_t)hp(l)->units, sizeof *zeros) : NULL;
  if (hp(l)->nobias && !zeros) return;
  ref_dense_forward(io->x, rows, l->in.c, io->params + l->params[0].offset,
                    hp(l)->nobias ? zeros : io->params + l->params[1].offset, hp(l)->units, io->y);
  if (hp(l)->relu) ref_relu_forward(io->y, n, io->y);
  free(zeros);
}

static void dense_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const int rows = rows_of(l, io->batch);
  const size_t n = (size_t)rows * hp(l)->units;
  /* Without a bias its gradient goes to a scratch, dropped. */
  double *dbias = hp(l)->nobias ? malloc((size_t)hp(l)->units * sizeof *dbias)
                                : io->grads + l->params[1].offset;
  if (!dbias) return;
  if (hp(l)->relu) ref_relu_backward(io->y, io->dy, n, io->dy);
  ref_dense_backward(io->x, rows, l->in.c, io->params + l->params[0].offset, hp(l)->units, io->dy,
                     io->dx, io->grads + l->params[0].offset, dbias);
  if (hp(l)->nobias) free(dbias);
}
#endif

/* Keras Dense: units, activation (relu fused, linear none, others back to the
 * loader), use_bias; LoRA refused. */
static int dense_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                            clt_err *e) {
  dense_hp *h = clt_layer_hp(l, dense_hp);
  int use_bias = 1, lora = 0;
  char act[16];
  memset(h, 0, sizeof *h);
  int status = clt_kc_int(c, "units", 0, &h->units, e);
  if (!status) status = clt_kc_bool(c, "use_bias", 1, &use_bias, e);
  if (!status) status = clt_kc_int(c, "lora_rank", 0, &lora, e);
  if (!status) status = clt_kc_activation(c, act, sizeof act, e);
  /* Keras 3's quantized layers (null when not quantized). */
  if (!status && clt_kc_has(c, "quantization_config"))
    status = clt_kc_fail(c, e, "quantization_config is not supported (only none)");
  if (status) return status;
  if (h->units < 1) return clt_kc_fail(c, e, "units: expected a positive integer");
  if (lora) return clt_kc_fail(c, e, "lora_rank %d is not supported (only none)", lora);
  h->relu = strcmp(act, "relu") == 0;
  h->nobias = !use_bias;
  snprintf(activation, size, "%s", h->relu || strcmp(act, "linear") == 0 ? "" : act);
  return CLT_OK;
}

/* On HxW positions (H or W > 1): NCHW to NHWC, MatMul by the kernel, Add the bias,
 * Relu when fused, back to NCHW; the output is rank 4. */
static int dense_spatial_onnx(const clt_layer *l, clt_onnx *g, const char *input,
                              const char *output, clt_err *e) {
  const int64_t wdims[2] = {l->in.c, hp(l)->units}, bdims[1] = {hp(l)->units};
  const clt_onnx_attr to_nhwc = CLT_ONNX_INTS("perm", 4, 0, 2, 3, 1);
  const clt_onnx_attr to_nchw = CLT_ONNX_INTS("perm", 4, 0, 3, 1, 2);
  const char *nhwc = clt_onnx_name(g, l, "nhwc"), *kernel = clt_onnx_name(g, l, "kernel");
  const char *prod = clt_onnx_name(g, l, "matmul"), *ins[2] = {nhwc, kernel};
  int status = clt_onnx_node(g, "Transpose", &input, 1, nhwc, &to_nhwc, 1, e);
  if (!status) status = clt_onnx_tensor(g, kernel, 2, wdims, clt_onnx_param(g, l, 0), e);
  if (!status) status = clt_onnx_node(g, "MatMul", ins, 2, prod, NULL, 0, e);
  if (!status && !hp(l)->nobias) {
    const char *bias = clt_onnx_name(g, l, "bias"), *sum = clt_onnx_name(g, l, "sum");
    const char *add[2] = {prod, bias};
    status = clt_onnx_tensor(g, bias, 1, bdims, clt_onnx_param(g, l, 1), e);
    if (!status) status = clt_onnx_node(g, "Add", add, 2, sum, NULL, 0, e);
    prod = sum;
  }
  if (!status && hp(l)->relu) {
    const char *relu = clt_onnx_name(g, l, "relu");
    status = clt_onnx_node(g, "Relu", &prod, 1, relu, NULL, 0, e);
    prod = relu;
  }
  if (!status) status = clt_onnx_node(g, "Transpose", &prod, 1, output, &to_nchw, 1, e);
  if (!status) clt_onnx_set_rank(g, output, 4);
  return status;
}

/* ONNX Gemm on (N, IN) (a Flatten first if the input is 4-D, N x C x 1 x 1), then
 * Relu when fused; the output is rank 2. */
static int dense_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                         const char *output, clt_err *e) {
  if (l->in.h > 1 || l->in.w > 1) return dense_spatial_onnx(l, g, inputs[0], output, e);
  const int64_t wdims[2] = {l->in.c, hp(l)->units}, bdims[1] = {hp(l)->units};
  const char *names[3] = {inputs[0], clt_onnx_name(g, l, "kernel"), ""};
  int status = CLT_OK;
  if (clt_onnx_rank(g, inputs[0]) != 2) {
    names[0] = clt_onnx_name(g, l, "flat");
    const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
    status = clt_onnx_node(g, "Flatten", inputs, 1, names[0], &axis, 1, e);
    clt_onnx_set_rank(g, names[0], 2);
  }
  if (!status) status = clt_onnx_tensor(g, names[1], 2, wdims, clt_onnx_param(g, l, 0), e);
  if (!status && !hp(l)->nobias) {
    names[2] = clt_onnx_name(g, l, "bias");
    status = clt_onnx_tensor(g, names[2], 1, bdims, clt_onnx_param(g, l, 1), e);
  }
  const char *gemm_out = hp(l)->relu ? clt_onnx_name(g, l, "gemm") : output;
  if (!status)
    status = clt_onnx_node(g, "Gemm", names, hp(l)->nobias ? 2 : 3, gemm_out, NULL, 0, e);
  if (!status) clt_onnx_set_rank(g, gemm_out, 2);
  if (!status && hp(l)->relu) status = clt_onnx_node(g, "Relu", &gemm_out, 1, output, NULL, 0, e);
  if (!status) clt_onnx_set_rank(g, output, 2);
  return status;
}

static const char *const dense_sources[] = {"bias.cl", NULL};

const clt_layer_ops clt_dense_ops = {
    .kind = "Dense",
    .ninputs = 1,
    .parse = dense_parse,
    .describe = dense_describe,
    .setup = dense_setup,
    .scratch_floats = dense_scratch,
    .prepare = dense_prepare,
    .sources = dense_sources,
    .forward = dense_forward,
    .backward = dense_backward,
    .from_keras = dense_from_keras,
    .to_onnx = dense_to_onnx,
    .ref_forward = CLT_REF(dense_ref_forward),
    .ref_backward = CLT_REF(dense_ref_backward),
};
