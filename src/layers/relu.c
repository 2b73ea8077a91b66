/* ReLU (Keras' ReLU layer): y = max(x, 0), or min(max(x, 0), max_value) with a
 * max_value (ReLU(6): relu6), elementwise; backward dx = dy where 0 < y
 * (< max_value). No parameters. A ReLU that follows Conv2D, Dense,
 * BatchNormalization or Add is better fused into that layer (its ",relu"); this
 * kind is for a ReLU anywhere else. Description: ReLU, or ReLU(6). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

#define ACT_OP_CLIP 0 /* activation.cl's act_forward op OP_CLIP */

typedef struct relu_hp {
  int clip;         /* a max_value */
  double max_value; /* >= 0 */
} relu_hp;

static const relu_hp *hp(const clt_layer *l) { return clt_layer_hp(l, relu_hp); }

/* Shortest text that reads back as v, so a description keeps Keras' value. */
static void format_double(char *buf, size_t size, double v) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* "" or the max_value: "6" */
static int relu_parse(clt_layer *l, const char *args, clt_err *e) {
  relu_hp *h = clt_layer_hp(l, relu_hp);
  h->clip = args[0] != '\0';
  h->max_value = 0.0;
  if (!h->clip) return CLT_OK;
  char *end;
  h->max_value = strtod(args, &end);
  if (end == args || *end != '\0' || !isfinite(h->max_value) || h->max_value < 0.0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: ReLU(%s): expected ReLU or ReLU(max_value >= 0)",
                    l->name, args);
  }
  return CLT_OK;
}

static void relu_describe(const clt_layer *l, char *buf, size_t size) {
  if (!hp(l)->clip) {
    snprintf(buf, size, "ReLU");
    return;
  }
  char v[32];
  format_double(v, sizeof v, hp(l)->max_value);
  snprintf(buf, size, "ReLU(%s)", v);
}

static int relu_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  (void)e;
  l->in = l->out = in[0];
  l->nparams = 0;
  return CLT_OK;
}

static int relu_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                        clt_err *e) {
  (void)f;
  (void)max_batch;
  static const char *const names[] = {"relu_forward", "relu_backward"};
  static const char *const clip_names[] = {"act_forward", "act_backward"};
  return clt_layer_build_kernels(r, "activation.cl", hp(l)->clip ? clip_names : names, 2, e);
}

/* Runs activation.cl's `name` over the layer's n = batch * size floats. */
static int relu_run(const clt_layer *l, const clt_layer_io *io, const char *name,
                    const clt_karg *args, int nargs, clt_err *e) {
  cl_kernel k;
  const size_t n = (size_t)io->batch * clt_shape_size(l->out);
  int status = clt_replica_kernel(io->replica, "activation.cl", "", name, &k, e);
  if (!status) status = clt_launch_elems(io->replica, k, name, args, nargs, n, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int relu_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  int n = io->batch * (int)clt_shape_size(l->out);
  if (hp(l)->clip) {
    int op = ACT_OP_CLIP;
    float hi = (float)hp(l)->max_value;
    clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n), CLT_ARG(op), CLT_ARG(hi)};
    return relu_run(l, io, "act_forward", args, 5, e);
  }
  clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n)};
  return relu_run(l, io, "relu_forward", args, 3, e);
}

static int relu_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  int n = io->batch * (int)clt_shape_size(l->out);
  if (hp(l)->clip) {
    int op = ACT_OP_CLIP;
    float hi = (float)hp(l)->max_value;
    clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx),
                       CLT_ARG(n),      CLT_ARG(op),    CLT_ARG(hi)};
    return relu_run(l, io, "act_backward", args, 6, e);
  }
  clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx), CLT_ARG(n)};
  return relu_run(l, io, "relu_backward", args, 4, e);
}

/* Keras' ReLU(max_value=None, negative_slope=0, threshold=0). */
static int relu_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                           clt_err *e) {
  relu_hp *h = clt_layer_hp(l, relu_hp);
  double slope = 0.0, threshold = 0.0;
  if (size) activation[0] = '\0';
  h->clip = clt_kc_has(c, "max_value");
  if (clt_kc_double(c, "max_value", 0.0, &h->max_value, e) ||
      clt_kc_double(c, "negative_slope", 0.0, &slope, e) ||
      clt_kc_double(c, "threshold", 0.0, &threshold, e))
    return CLT_ERR_FORMAT;
  if (h->clip && h->max_value < 0.0)
    return clt_kc_fail(c, e, "max_value %g is negative", h->max_value);
  if (slope != 0.0) return clt_kc_fail(c, e, "negative_slope %g is not supported (only 0)", slope);
  if (threshold != 0.0)
    return clt_kc_fail(c, e, "threshold %g is not supported (only 0)", threshold);
  return CLT_OK;
}

static int relu_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                        const char *output, clt_err *e) {
  if (!hp(l)->clip) return clt_onnx_node(g, "Relu", inputs, 1, output, NULL, 0, e);
  /* Clip(x, 0, max_value): opset 13 takes the bounds as scalar inputs. */
  const float lo = 0.0f, hi = (float)hp(l)->max_value;
  const int64_t none[1] = {0};
  const char *ins[3] = {inputs[0], clt_onnx_name(g, l, "clip_min"),
                        clt_onnx_name(g, l, "clip_max")};
  int status = clt_onnx_tensor(g, ins[1], 0, none, &lo, e);
  if (!status) status = clt_onnx_tensor(g, ins[2], 0, none, &hi, e);
  if (!status) status = clt_onnx_node(g, "Clip", ins, 3, output, NULL, 0, e);
  return status;
}

#ifdef CLT_REFERENCE
/* The device clips at max_value in float, as Keras computes. */
static double clip_value(const clt_layer *l) { return (float)hp(l)->max_value; }

static void relu_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const size_t n = clt_shape_size(l->out) * io->batch;
  if (hp(l)->clip) ref_relu_clip_forward(io->x, n, clip_value(l), io->y);
  else ref_relu_forward(io->x, n, io->y);
}

static void relu_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const size_t n = clt_shape_size(l->out) * io->batch;
  if (!io->dx) return;
  if (hp(l)->clip) ref_relu_clip_backward(io->y, io->dy, n, clip_value(l), io->dx);
  else ref_relu_backward(io->y, io->dy, n, io->dx);
}
#endif

static const char *const relu_sources[] = {"activation.cl", NULL};

const clt_layer_ops clt_relu_ops = {
    .kind = "ReLU",
    .ninputs = 1,
    .parse = relu_parse,
    .describe = relu_describe,
    .setup = relu_setup,
    .prepare = relu_prepare,
    .sources = relu_sources,
    .forward = relu_forward,
    .backward = relu_backward,
    .from_keras = relu_from_keras,
    .to_onnx = relu_to_onnx,
    .ref_forward = CLT_REF(relu_ref_forward),
    .ref_backward = CLT_REF(relu_ref_backward),
};
