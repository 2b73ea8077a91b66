/* Flatten. Activations are NHWC in memory, which is exactly Keras' flatten order,
 * so the layer moves no data: its output is its input buffer seen as (1, 1, h*w*c). */
#include "layer.h"

static int flatten_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  (void)e;
  l->in = in;
  l->out = (clt_shape){1, 1, (int)clt_shape_size(in)};
  l->nparams = 0;
  return CLT_OK;
}

static size_t flatten_scratch(const clt_layer *l, int batch) {
  (void)l;
  (void)batch;
  return 0;
}

static int flatten_prepare(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e) {
  (void)l;
  (void)r;
  (void)max_batch;
  (void)e;
  return CLT_OK;
}

static int flatten_pass(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  (void)l;
  (void)io;
  (void)e;
  return CLT_OK;
}

const clt_layer_ops clt_flatten_ops = {
    .kind = "Flatten",
    .setup = flatten_setup,
    .scratch_floats = flatten_scratch,
    .prepare = flatten_prepare,
    .forward = flatten_pass,
    .backward = flatten_pass,
    .aliases_input = 1,
};
