/* Activation (Keras' Activation layer): relu, relu6, sigmoid, tanh, softmax (over
 * the channels, Keras' last axis) or linear, elementwise except softmax; no
 * parameters. Backwards work from the output y: sigmoid dy*y*(1-y), tanh
 * dy*(1-y^2), relu and relu6 dy where 0 < y (< 6), softmax y*(dy - sum(dy*y)) per
 * row of channels. The loader also places one after a layer whose activation
 * it does not fuse. Description: Activation(sigmoid). */
#include <stdio.h>
#include <string.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

typedef enum act_fn { ACT_LINEAR, ACT_RELU, ACT_RELU6, ACT_SIGMOID, ACT_TANH, ACT_SOFTMAX } act_fn;
static const char *const act_names[] = {"linear", "relu", "relu6", "sigmoid", "tanh", "softmax"};
#define NFN (int)(sizeof act_names / sizeof act_names[0])

/* activation.cl's act_forward ops (OP_CLIP, OP_SIGMOID, OP_TANH). */
enum { ACT_OP_CLIP = 0, ACT_OP_SIGMOID = 1, ACT_OP_TANH = 2 };

typedef struct act_hp {
  int fn; /* act_fn */
} act_hp;

static act_fn fn(const clt_layer *l) { return (act_fn)clt_layer_hp(l, act_hp)->fn; }

static int fn_by_name(const char *name) {
  for (int i = 0; i < NFN; i++) {
    if (strcmp(name, act_names[i]) == 0) return i;
  }
  return -1;
}

static int act_parse(clt_layer *l, const char *args, clt_err *e) {
  const int f = fn_by_name(args);
  if (f < 0) {
    return clt_fail(
        e, CLT_ERR_FORMAT,
        "%s: Activation(%s): expected Activation(relu|relu6|sigmoid|tanh|softmax|linear)", l->name,
        args);
  }
  clt_layer_hp(l, act_hp)->fn = f;
  return CLT_OK;
}

static void act_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "Activation(%s)", act_names[fn(l)]);
}

static int act_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  if (in[0].h < 1 || in[0].w < 1 || in[0].c < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad input shape %dx%dx%d", l->name, in[0].h, in[0].w,
                    in[0].c);
  }
  l->in = l->out = in[0];
  l->nparams = 0;
  return CLT_OK;
}

/* The kernels of each function: forward, backward. */
static void kernel_names(act_fn f, const char *names[2]) {
  switch (f) {
    case ACT_LINEAR:
      names[0] = names[1] = "scale_shift";
      break;
    case ACT_RELU:
      names[0] = "relu_forward", names[1] = "relu_backward";
      break;
    case ACT_SOFTMAX:
      names[0] = "softmax_forward", names[1] = "softmax_backward";
      break;
    default:
      names[0] = "act_forward", names[1] = "act_backward";
  }
}

static int act_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                       clt_err *e) {
  (void)f;
  (void)max_batch;
  const char *names[2];
  kernel_names(fn(l), names);
  return clt_layer_build_kernels(r, "activation.cl", names, 2, e);
}

/* act_forward's op and clip for the elementwise functions. */
static int kernel_op(act_fn f, float *hi) {
  *hi = 6.0f;
  return f == ACT_SIGMOID ? ACT_OP_SIGMOID : f == ACT_TANH ? ACT_OP_TANH : ACT_OP_CLIP;
}

/* Runs activation.cl's `name`: over n floats (elementwise), or over the rows of C
 * channels (softmax). */
static int run(const clt_layer *l, const clt_layer_io *io, int backward, const clt_karg *args,
               int nargs, clt_err *e) {
  const char *names[2];
  kernel_names(fn(l), names);
  const char *name = names[backward];
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "activation.cl", "", name, &k, e);
  if (status) return clt_wrap(e, "%s", l->name);
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w;
  if (fn(l) == ACT_SOFTMAX) status = clt_launch_groups(io->replica, k, name, args, nargs, rows, e);
  else status = clt_launch_elems(io->replica, k, name, args, nargs, rows * l->out.c, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int act_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int rows = io->batch * l->out.h * l->out.w, C = l->out.c, n = rows * C;
  float hi, one = 1.0f, zero = 0.0f;
  int op = kernel_op(fn(l), &hi);
  switch (fn(l)) {
    case ACT_LINEAR: {
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n), CLT_ARG(one), CLT_ARG(zero)};
      return run(l, io, 0, args, 5, e);
    }
    case ACT_RELU: {
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n)};
      return run(l, io, 0, args, 3, e);
    }
    case ACT_SOFTMAX: {
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(rows), CLT_ARG(C)};
      return run(l, io, 0, args, 4, e);
    }
    default: {
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n), CLT_ARG(op), CLT_ARG(hi)};
      return run(l, io, 0, args, 5, e);
    }
  }
}

static int act_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  const int rows = io->batch * l->out.h * l->out.w, C = l->out.c, n = rows * C;
  float hi, one = 1.0f, zero = 0.0f;
  int op = kernel_op(fn(l), &hi);
  switch (fn(l)) {
    case ACT_LINEAR: {
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->dx), CLT_ARG(n), CLT_ARG(one), CLT_ARG(zero)};
      return run(l, io, 1, args, 5, e);
    }
    case ACT_RELU: {
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx), CLT_ARG(n)};
      return run(l, io, 1, args, 4, e);
    }
    case ACT_SOFTMAX: {
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx), CLT_ARG(rows),
                         CLT_ARG(C)};
      return run(l, io, 1, args, 5, e);
    }
    default: {
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx),
                         CLT_ARG(n),      CLT_ARG(op),    CLT_ARG(hi)};
      return run(l, io, 1, args, 6, e);
    }
  }
}

static int act_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                          clt_err *e) {
  char name[16];
  if (size) activation[0] = '\0';
  if (clt_kc_activation(c, name, sizeof name, e)) return CLT_ERR_FORMAT;
  const int f = fn_by_name(name);
  if (f < 0) return clt_kc_fail(c, e, "activation '%s' is not supported", name);
  clt_layer_hp(l, act_hp)->fn = f;
  return CLT_OK;
}

/* Clip(x, 0, hi) (ONNX opset 13 takes the bounds as scalar inputs). */
static int onnx_clip(const clt_layer *l, clt_onnx *g, const char *in, float hi, const char *out,
                     clt_err *e) {
  const float lo = 0.0f;
  const int64_t none[1] = {0};
  const char *ins[3] = {in, clt_onnx_name(g, l, "clip_min"), clt_onnx_name(g, l, "clip_max")};
  int status = clt_onnx_tensor(g, ins[1], 0, none, &lo, e);
  if (!status) status = clt_onnx_tensor(g, ins[2], 0, none, &hi, e);
  if (!status) status = clt_onnx_node(g, "Clip", ins, 3, out, NULL, 0, e);
  return status;
}

static int act_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *output, clt_err *e) {
  switch (fn(l)) {
    case ACT_LINEAR:
      return clt_onnx_node(g, "Identity", inputs, 1, output, NULL, 0, e);
    case ACT_RELU:
      return clt_onnx_node(g, "Relu", inputs, 1, output, NULL, 0, e);
    case ACT_RELU6:
      return onnx_clip(l, g, inputs[0], 6.0f, output, e);
    case ACT_SIGMOID:
      return clt_onnx_node(g, "Sigmoid", inputs, 1, output, NULL, 0, e);
    case ACT_TANH:
      return clt_onnx_node(g, "Tanh", inputs, 1, output, NULL, 0, e);
    case ACT_SOFTMAX: {
      /* Channels are axis 1 in NCHW and in (N, C). */
      const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
      return clt_onnx_node(g, "Softmax", inputs, 1, output, &axis, 1, e);
    }
  }
  return clt_fail(e, CLT_ERR_INTERNAL, "%s: unknown activation", l->name);
}

#ifdef CLT_REFERENCE
static void act_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w, n = rows * l->out.c;
  switch (fn(l)) {
    case ACT_LINEAR:
      memcpy(io->y, io->x, n * sizeof *io->y);
      break;
    case ACT_RELU:
      ref_relu_forward(io->x, n, io->y);
      break;
    case ACT_RELU6:
      ref_relu_clip_forward(io->x, n, 6.0, io->y);
      break;
    case ACT_SIGMOID:
      ref_sigmoid_forward(io->x, n, io->y);
      break;
    case ACT_TANH:
      ref_tanh_forward(io->x, n, io->y);
      break;
    case ACT_SOFTMAX:
      ref_softmax_forward(io->x, rows, l->out.c, io->y);
      break;
  }
}

static void act_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (!io->dx) return;
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w, n = rows * l->out.c;
  switch (fn(l)) {
    case ACT_LINEAR:
      memcpy(io->dx, io->dy, n * sizeof *io->dx);
      break;
    case ACT_RELU:
      ref_relu_backward(io->y, io->dy, n, io->dx);
      break;
    case ACT_RELU6:
      ref_relu_clip_backward(io->y, io->dy, n, 6.0, io->dx);
      break;
    case ACT_SIGMOID:
      ref_sigmoid_backward(io->y, io->dy, n, io->dx);
      break;
    case ACT_TANH:
      ref_tanh_backward(io->y, io->dy, n, io->dx);
      break;
    case ACT_SOFTMAX:
      ref_softmax_backward(io->y, io->dy, rows, l->out.c, io->dx);
      break;
  }
}
#endif

static const char *const act_sources[] = {"activation.cl", NULL};

const clt_layer_ops clt_activation_ops = {
    .kind = "Activation",
    .ninputs = 1,
    .parse = act_parse,
    .describe = act_describe,
    .setup = act_setup,
    .prepare = act_prepare,
    .sources = act_sources,
    .forward = act_forward,
    .backward = act_backward,
    .from_keras = act_from_keras,
    .to_onnx = act_to_onnx,
    .ref_forward = CLT_REF(act_ref_forward),
    .ref_backward = CLT_REF(act_ref_backward),
};
