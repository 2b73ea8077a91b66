/* Rescaling (Keras): y = x * scale + offset, scalars (Keras' per-channel lists are
 * refused); backward dx = dy * scale. No parameters. Description:
 * Rescaling(0.00392156862745098,0) (scale, offset). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

typedef struct rescaling_hp {
  double scale, offset;
} rescaling_hp;

static const rescaling_hp *hp(const clt_layer *l) { return clt_layer_hp(l, rescaling_hp); }

/* Shortest text that reads back as v, so a description keeps Keras' value. */
static void format_double(char *buf, size_t size, double v) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* "scale,offset" */
static int rescaling_parse(clt_layer *l, const char *args, clt_err *e) {
  rescaling_hp *h = clt_layer_hp(l, rescaling_hp);
  char *end, *end2 = NULL;
  h->scale = strtod(args, &end);
  if (end != args && *end == ',') h->offset = strtod(end + 1, &end2);
  if (end == args || *end != ',' || end2 == end + 1 || *end2 != '\0' || !isfinite(h->scale) ||
      !isfinite(h->offset)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: Rescaling(%s): expected Rescaling(scale,offset)",
                    l->name, args);
  }
  return CLT_OK;
}

static void rescaling_describe(const clt_layer *l, char *buf, size_t size) {
  char s[32], o[32];
  format_double(s, sizeof s, hp(l)->scale);
  format_double(o, sizeof o, hp(l)->offset);
  snprintf(buf, size, "Rescaling(%s,%s)", s, o);
}

static int rescaling_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  (void)e;
  l->in = l->out = in[0];
  l->nparams = 0;
  return CLT_OK;
}

static int rescaling_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                             clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"scale_shift"};
  return clt_layer_build_kernels(r, "activation.cl", names, 1, e);
}

/* out = in * a + b over the layer's floats. */
static int scale_shift(const clt_layer *l, const clt_layer_io *io, cl_mem in, cl_mem out, float a,
                       float b, clt_err *e) {
  cl_kernel k;
  const size_t total = (size_t)io->batch * clt_shape_size(l->out);
  int n = (int)total;
  int status = clt_replica_kernel(io->replica, "activation.cl", "", "scale_shift", &k, e);
  clt_karg args[] = {CLT_ARG(in), CLT_ARG(out), CLT_ARG(n), CLT_ARG(a), CLT_ARG(b)};
  if (!status) status = clt_launch_elems(io->replica, k, "scale_shift", args, 5, total, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int rescaling_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return scale_shift(l, io, io->x, io->y, (float)hp(l)->scale, (float)hp(l)->offset, e);
}

static int rescaling_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  return scale_shift(l, io, io->dy, io->dx, (float)hp(l)->scale, 0.0f, e);
}

static int rescaling_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                                size_t size, clt_err *e) {
  rescaling_hp *h = clt_layer_hp(l, rescaling_hp);
  if (size) activation[0] = '\0';
  if (!clt_kc_has(c, "scale")) return clt_kc_fail(c, e, "scale: missing");
  /* Non-numbers here are Keras' per-channel lists (or garbage). */
  if (clt_kc_double(c, "scale", 1.0, &h->scale, e))
    return clt_kc_fail(c, e, "scale must be one number (per-channel lists are not supported)");
  if (clt_kc_double(c, "offset", 0.0, &h->offset, e))
    return clt_kc_fail(c, e, "offset must be one number (per-channel lists are not supported)");
  return CLT_OK;
}

/* Mul and Add with scalar initializers (broadcast). */
static int rescaling_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                             const char *output, clt_err *e) {
  const float scale = (float)hp(l)->scale, offset = (float)hp(l)->offset;
  const int64_t none[1] = {0};
  const char *mul[2] = {inputs[0], clt_onnx_name(g, l, "scale")};
  const char *add[2] = {clt_onnx_name(g, l, "scaled"), clt_onnx_name(g, l, "offset")};
  int status = clt_onnx_tensor(g, mul[1], 0, none, &scale, e);
  if (!status) status = clt_onnx_tensor(g, add[1], 0, none, &offset, e);
  if (!status) status = clt_onnx_node(g, "Mul", mul, 2, add[0], NULL, 0, e);
  if (!status) status = clt_onnx_node(g, "Add", add, 2, output, NULL, 0, e);
  return status;
}

#ifdef CLT_REFERENCE
static void rescaling_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  ref_scale_shift(io->x, clt_shape_size(l->out) * io->batch, hp(l)->scale, hp(l)->offset, io->y);
}

static void rescaling_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (io->dx)
    ref_scale_shift(io->dy, clt_shape_size(l->out) * io->batch, hp(l)->scale, 0.0, io->dx);
}
#endif

static const char *const rescaling_sources[] = {"activation.cl", NULL};

const clt_layer_ops clt_rescaling_ops = {
    .kind = "Rescaling",
    .ninputs = 1,
    .parse = rescaling_parse,
    .describe = rescaling_describe,
    .setup = rescaling_setup,
    .prepare = rescaling_prepare,
    .sources = rescaling_sources,
    .forward = rescaling_forward,
    .backward = rescaling_backward,
    .from_keras = rescaling_from_keras,
    .to_onnx = rescaling_to_onnx,
    .ref_forward = CLT_REF(rescaling_ref_forward),
    .ref_backward = CLT_REF(rescaling_ref_backward),
};
