/* Flatten. Activations are NHWC in memory, which is exactly Keras' flatten order,
 * so the layer moves no data: its output is its input buffer seen as (1, 1, h*w*c). */
#include <string.h>

#include "layer.h"

static int flatten_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  (void)e;
  l->in = in;
  l->out = (clt_shape){1, 1, (int)clt_shape_size(in)};
  l->nparams = 0;
  return CLT_OK;
}

static int flatten_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                              size_t size, clt_err *e) {
  (void)l;
  char format[32];
  if (size) activation[0] = '\0';
  if (clt_kc_string(c, "data_format", "channels_last", format, sizeof format, e))
    return CLT_ERR_FORMAT;
  /* channels_first would flatten in another order. */
  if (strcmp(format, "channels_last") != 0)
    return clt_kc_fail(c, e, "data_format %s is not supported (only channels_last)", format);
  return CLT_OK;
}

/* NCHW back to NHWC (perm 0,2,3,1), then Flatten: Keras' order, which the next
 * Dense kernel expects. A rank-2 input is already flat. */
static int flatten_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                           const char *output, clt_err *e) {
  if (clt_onnx_rank(g, inputs[0]) == 2)
    return clt_onnx_node(g, "Identity", inputs, 1, output, NULL, 0, e);
  const clt_onnx_attr perm = CLT_ONNX_INTS("perm", 4, 0, 2, 3, 1);
  const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
  const char *nhwc = clt_onnx_name(g, l, "nhwc");
  int status = clt_onnx_node(g, "Transpose", inputs, 1, nhwc, &perm, 1, e);
  if (!status) status = clt_onnx_node(g, "Flatten", &nhwc, 1, output, &axis, 1, e);
  if (!status) clt_onnx_set_rank(g, output, 2);
  return status;
}

#ifdef CLT_REFERENCE
/* The reference keeps every output in its own array: a copy. */
static void flatten_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  memcpy(io->y, io->x, clt_shape_size(l->out) * io->batch * sizeof *io->y);
}

static void flatten_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (io->dx) memcpy(io->dx, io->dy, clt_shape_size(l->out) * io->batch * sizeof *io->dx);
}
#endif

const clt_layer_ops clt_flatten_ops = {
    .kind = "Flatten",
    .ninputs = 1,
    .aliases_input = 1,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = flatten_setup,
    .from_keras = flatten_from_keras,
    .to_onnx = flatten_to_onnx,
    .ref_forward = CLT_REF(flatten_ref_forward),
    .ref_backward = CLT_REF(flatten_ref_backward),
};
