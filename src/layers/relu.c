/* ReLU (Keras' ReLU layer with its defaults): y = max(x, 0), elementwise; backward
 * dx = dy where y > 0. No parameters. A ReLU that follows Conv2D, Dense,
 * BatchNormalization or Add is better fused into that layer (its ",relu"); this
 * kind is for a ReLU anywhere else. */
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

static int relu_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  (void)e;
  l->in = l->out = in[0];
  l->nparams = 0;
  return CLT_OK;
}

static int relu_prepare(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e) {
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"relu_forward", "relu_backward"};
  return clt_layer_build_kernels(r, "activation.cl", names, 2, e);
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
  clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n)};
  return relu_run(l, io, "relu_forward", args, 3, e);
}

static int relu_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  int n = io->batch * (int)clt_shape_size(l->out);
  clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx), CLT_ARG(n)};
  return relu_run(l, io, "relu_backward", args, 4, e);
}

#ifdef CLT_REFERENCE
static void relu_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  ref_relu_forward(io->x, clt_shape_size(l->out) * io->batch, io->y);
}

static void relu_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (io->dx) ref_relu_backward(io->y, io->dy, clt_shape_size(l->out) * io->batch, io->dx);
}
#endif

const clt_layer_ops clt_relu_ops = {
    .kind = "ReLU",
    .ninputs = 1,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = relu_setup,
    .prepare = relu_prepare,
    .forward = relu_forward,
    .backward = relu_backward,
    .ref_forward = CLT_REF(relu_ref_forward),
    .ref_backward = CLT_REF(relu_ref_backward),
};
