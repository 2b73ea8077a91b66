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
    .ref_forward = CLT_REF(flatten_ref_forward),
    .ref_backward = CLT_REF(flatten_ref_backward),
};
