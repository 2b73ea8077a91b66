/* Add (Keras) of two inputs of the same shape, with an optional fused ReLU (ResNet's
 * "_out" activation after each block's sum).
 * forward:  y = x + x2, then ReLU
 * backward: dx = dx2 = dy masked by (y > 0); either may be NULL. No parameters. */
#include "layer.h"

#define ADD_CHUNK 8 /* floats per work-item (float8), as CH in norm.cl */

static int add_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  if (in[0].h != in[1].h || in[0].w != in[1].w || in[0].c != in[1].c) {
    return clt_fail(e, CLT_ERR_ARG, "%s: inputs of different shapes %dx%dx%d and %dx%dx%d",
                    l->name, in[0].h, in[0].w, in[0].c, in[1].h, in[1].w, in[1].c);
  }
  l->in = in[0];
  l->out = in[0];
  l->nparams = 0;
  return CLT_OK;
}

static size_t add_scratch(const clt_layer *l, int batch) {
  (void)l;
  (void)batch;
  return 0;
}

static int add_prepare(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e) {
  (void)l;
  (void)max_batch;
  cl_kernel k;
  int status = clt_replica_kernel(r, "norm.cl", "", "add_forward", &k, e);
  if (!status) status = clt_replica_kernel(r, "norm.cl", "", "add_backward", &k, e);
  return status;
}

/* Work-items of add_forward/add_backward: one per 8 floats, one more for the rest. */
static size_t add_items(size_t n) { return (n + ADD_CHUNK - 1) / ADD_CHUNK; }

static int add_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  cl_kernel k;
  const size_t total = (size_t)io->batch * clt_shape_size(l->out);
  int n = (int)total, relu = l->relu;
  int status = clt_replica_kernel(io->replica, "norm.cl", "", "add_forward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->x2), CLT_ARG(io->y), CLT_ARG(n), CLT_ARG(relu)};
  status = clt_launch1d(io->replica, k, "add_forward", args, 5, add_items(total), e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int add_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx && !io->dx2) return CLT_OK;
  cl_kernel k;
  const size_t total = (size_t)io->batch * clt_shape_size(l->out);
  int n = (int)total, relu = l->relu;
  int status = clt_replica_kernel(io->replica, "norm.cl", "", "add_backward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx), CLT_ARG(io->dx2),
                     CLT_ARG(n), CLT_ARG(relu)};
  status = clt_launch1d(io->replica, k, "add_backward", args, 6, add_items(total), e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

const clt_layer_ops clt_add_ops = {
    .kind = "Add",
    .setup = add_setup,
    .scratch_floats = add_scratch,
    .prepare = add_prepare,
    .forward = add_forward,
    .backward = add_backward,
    .ninputs = 2,
};
