/* GlobalAveragePooling2D: y[b, c] = mean of x[b, h, w, c] over the H*W positions
 * (Keras' keepdims or not: 1x1xC here); backward dx[b, h, w, c] = dy[b, c] / (H*W).
 * No parameters. */
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref_resnet.h"
#endif

static int gap_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                       clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"gap_forward", "gap_backward"};
  return clt_layer_build_kernels(r, "gap.cl", names, 2, e);
}

static int gap_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  cl_kernel k;
  int hw = l->in.h * l->in.w, C = l->in.c;
  int status = clt_replica_kernel(io->replica, "gap.cl", "", "gap_forward", &k, e);
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
  int status = clt_replica_kernel(io->replica, "gap.cl", "", "gap_backward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->dx), CLT_ARG(io->batch), CLT_ARG(hw), CLT_ARG(C)};
  status = clt_launch_rows(io->replica, k, "gap_backward", args, 5, (size_t)C,
                           (size_t)io->batch * hw, 1, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int gap_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *output, clt_err *e) {
  return clt_global_pool_to_onnx(l, g, "GlobalAveragePool", inputs[0], output, e);
}

#ifdef CLT_REFERENCE
static void gap_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  ref_gap_forward(io->x, io->batch, l->in.h, l->in.w, l->in.c, io->y);
}

static void gap_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (io->dx) ref_gap_backward(io->dy, io->batch, l->in.h, l->in.w, l->in.c, io->dx);
}
#endif

static const char *const gap_sources[] = {"gap.cl", NULL};

const clt_layer_ops clt_gap_ops = {
    .kind = "GlobalAveragePooling2D",
    .ninputs = 1,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = clt_global_pool_setup,
    .prepare = gap_prepare,
    .sources = gap_sources,
    .forward = gap_forward,
    .backward = gap_backward,
    .from_keras = clt_global_pool_from_keras,
    .to_onnx = gap_to_onnx,
    .ref_forward = CLT_REF(gap_ref_forward),
    .ref_backward = CLT_REF(gap_ref_backward),
};
