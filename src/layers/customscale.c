/* CustomScaleLayer (Keras' InceptionResNetV2): inputs[0] + inputs[1] * scale, two
 * inputs of one shape and a constant scale.
 * forward:  y = x + scale * x2
 * backward: dx = dy, dx2 = scale * dy. No parameters. Description:
 * CustomScaleLayer(0.17). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer.h"

typedef struct customscale_hp {
  double scale;
} customscale_hp;

static const customscale_hp *hp(const clt_layer *l) { return clt_layer_hp(l, customscale_hp); }

/* "scale" */
static int customscale_parse(clt_layer *l, const char *args, clt_err *e) {
  customscale_hp *h = clt_layer_hp(l, customscale_hp);
  char *end;
  h->scale = strtod(args, &end);
  if (end == args || *end != '\0' || !isfinite(h->scale)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: CustomScaleLayer(%s): expected CustomScaleLayer(scale)",
                    l->name, args);
  }
  return CLT_OK;
}

/* The shortest text that reads back as the scale. */
static void customscale_describe(const clt_layer *l, char *buf, size_t size) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, size, "CustomScaleLayer(%.*g)", prec, hp(l)->scale);
    if (strtod(buf + 17, NULL) == hp(l)->scale) return;
  }
}

static int customscale_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  if (in[0].h != in[1].h || in[0].w != in[1].w || in[0].c != in[1].c) {
    return clt_fail(e, CLT_ERR_ARG, "%s: inputs of different shapes %dx%dx%d and %dx%dx%d", l->name,
                    in[0].h, in[0].w, in[0].c, in[1].h, in[1].w, in[1].c);
  }
  l->in = l->out = in[0];
  l->nparams = 0;
  return CLT_OK;
}

static int customscale_prepare(const clt_layer *l, clt_replica *r, int max_batch,
                               const clt_fusion *f, clt_err *e) {
  (void)l;
  (void)max_batch;
  (void)f;
  return clt_bcast_prepare(r, e);
}

static int customscale_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int hw = l->out.h * l->out.w;
  return clt_bcast_forward(l, io, io->x, 0, io->x2, 0, 0, hw, 0, 1.0f, (float)hp(l)->scale, e);
}

static int customscale_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int hw = l->out.h * l->out.w;
  int status = CLT_OK;
  if (io->dx) status = clt_bcast_grad(l, io, NULL, 0, 0, hw, 0, 1.0f, io->dx, e);
  if (!status && io->dx2)
    status = clt_bcast_grad(l, io, NULL, 0, 0, hw, 0, (float)hp(l)->scale, io->dx2, e);
  return status;
}

static int customscale_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                                  size_t size, clt_err *e) {
  customscale_hp *h = clt_layer_hp(l, customscale_hp);
  if (size) activation[0] = '\0';
  if (!clt_kc_has(c, "scale")) return clt_kc_fail(c, e, "scale: missing");
  return clt_kc_double(c, "scale", 1.0, &h->scale, e);
}

/* x + x2 * scale: Mul by a scalar initializer, then Add. */
static int customscale_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                               const char *output, clt_err *e) {
  const char *ins[2];
  int rank, status = clt_onnx_same_rank(l, g, inputs, ins, &rank, e);
  const float scale = (float)hp(l)->scale;
  const int64_t none[1] = {0};
  const char *mul[2] = {ins[1], clt_onnx_name(g, l, "scale")};
  const char *add[2] = {ins[0], clt_onnx_name(g, l, "scaled")};
  if (!status) status = clt_onnx_tensor(g, mul[1], 0, none, &scale, e);
  if (!status) status = clt_onnx_node(g, "Mul", mul, 2, add[1], NULL, 0, e);
  if (!status) clt_onnx_set_rank(g, add[1], rank);
  if (!status) status = clt_onnx_node(g, "Add", add, 2, output, NULL, 0, e);
  if (!status) clt_onnx_set_rank(g, output, rank);
  return status;
}

#ifdef CLT_REFERENCE
static void customscale_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w;
  clt_bcast_ref_forward(io->x, 0, io->x2, 0, rows, l->out.c, 1, 0, 1, hp(l)->scale, io->y);
}

static void customscale_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w;
  if (io->dx) clt_bcast_ref_grad(io->dy, NULL, 0, rows, l->out.c, 1, 0, 1, io->dx);
  if (io->dx2) clt_bcast_ref_grad(io->dy, NULL, 0, rows, l->out.c, 1, 0, hp(l)->scale, io->dx2);
}
#endif

static const char *const customscale_sources[] = {"broadcast.cl", NULL};

const clt_layer_ops clt_customscale_ops = {
    .kind = "CustomScaleLayer",
    .ninputs = 2,
    .parse = customscale_parse,
    .describe = customscale_describe,
    .setup = customscale_setup,
    .prepare = customscale_prepare,
    .sources = customscale_sources,
    .forward = customscale_forward,
    .backward = customscale_backward,
    .from_keras = customscale_from_keras,
    .to_onnx = customscale_to_onnx,
    .ref_forward = CLT_REF(customscale_ref_forward),
    .ref_backward = CLT_REF(customscale_ref_backward),
};
