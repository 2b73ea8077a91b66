/* GlobalAveragePooling2D: y[b, c] = mean of x[b, h, w, c] over the H*W positions;
 * backward dx[b, h, w, c] = dy[b, c] / (H*W). No parameters. */
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref_resnet.h"
#endif

static int gap_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  if (in.h < 1 || in.w < 1 || in.c < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad input shape %dx%dx%d", l->name, in.h, in.w, in.c);
  }
  l->in = in;
  l->out = (clt_shape){1, 1, in.c};
  l->nparams = 0;
  return CLT_OK;
}

static int gap_prepare(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e) {
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"gap_forward", "gap_backward"};
  return clt_layer_build_kernels(r, "norm.cl", names, 2, e);
}

static int gap_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  cl_kernel k;
  int hw = l->in.h * l->in.w, C = l->in.c;
  int status = clt_replica_kernel(io->replica, "norm.cl", "", "gap_forward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(io->batch), CLT_ARG(hw), CLT_ARG(C)};
  /* Column sums, an image per block (GPUs: a local-memory tree over H*W). */
  status = clt_launch_blocks(io->replica, k, "gap_forward", args, 5, (size_t)C, (size_t)io->batch,
                             e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int gap_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  cl_kernel k;
  int hw = l->in.h * l->in.w, C = l->in.c;
  int status = clt_replica_kernel(io->replica, "norm.cl", "", "gap_backward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->dx), CLT_ARG(io->batch), CLT_ARG(hw), CLT_ARG(C)};
  status = clt_launch_rows(io->replica, k, "gap_backward", args, 5, (size_t)C,
                           (size_t)io->batch * hw, 1, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

#ifdef CLT_REFERENCE
static void gap_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  ref_gap_forward(io->x, io->batch, l->in.h, l->in.w, l->in.c, io->y);
}

static void gap_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (io->dx) ref_gap_backward(io->dy, io->batch, l->in.h, l->in.w, l->in.c, io->dx);
}
#endif

const clt_layer_ops clt_gap_ops = {
    .kind = "GlobalAveragePooling2D",
    .ninputs = 1,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = gap_setup,
    .prepare = gap_prepare,
    .forward = gap_forward,
    .backward = gap_backward,
    .ref_forward = CLT_REF(gap_ref_forward),
    .ref_backward = CLT_REF(gap_ref_backward),
};
