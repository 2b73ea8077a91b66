/* GlobalMaxPooling2D (Keras): y[b, c] = max of x[b, h, w, c] over the H*W
 * positions (keepdims or not, the shape here is 1x1xC); backward routes dy[b, c]
 * to the first maximum in position order (TensorFlow's rule), 0 elsewhere. No
 * parameters. Description: GlobalMaxPooling2D. */
#include <stdio.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

static int gmp_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                       clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"gmp_forward", "gmp_backward"};
  return clt_layer_build_kernels(r, "globalmaxpool.cl", names, 2, e);
}

/* clt_launch_rows over (C, B): CPU 8 channels of an image, GPU one channel. */
static int gmp_run(const clt_layer *l, const clt_layer_io *io, const char *name,
                   const clt_karg *args, int nargs, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "globalmaxpool.cl", "", name, &k, e);
  if (!status)
    status = clt_launch_rows(io->replica, k, name, args, nargs, (size_t)l->in.c, (size_t)io->batch,
                             1, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int gmp_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  int hw = l->in.h * l->in.w, C = l->in.c;
  clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(io->batch), CLT_ARG(hw), CLT_ARG(C)};
  return gmp_run(l, io, "gmp_forward", args, 5, e);
}

static int gmp_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  int hw = l->in.h * l->in.w, C = l->in.c;
  clt_karg args[] = {CLT_ARG(io->x),     CLT_ARG(io->dy), CLT_ARG(io->dx),
                     CLT_ARG(io->batch), CLT_ARG(hw),     CLT_ARG(C)};
  return gmp_run(l, io, "gmp_backward", args, 6, e);
}

static int gmp_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *output, clt_err *e) {
  return clt_global_pool_to_onnx(l, g, "GlobalMaxPool", inputs[0], output, e);
}

#ifdef CLT_REFERENCE
static void gmp_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  ref_global_maxpool_forward(io->x, io->batch, l->in.h * l->in.w, l->in.c, io->y);
}

static void gmp_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (io->dx)
    ref_global_maxpool_backward(io->x, io->dy, io->batch, l->in.h * l->in.w, l->in.c, io->dx);
}
#endif

static const char *const gmp_sources[] = {"globalmaxpool.cl", NULL};

const clt_layer_ops clt_globalmaxpool_ops = {
    .kind = "GlobalMaxPooling2D",
    .ninputs = 1,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = clt_global_pool_setup,
    .prepare = gmp_prepare,
    .sources = gmp_sources,
    .forward = gmp_forward,
    .backward = gmp_backward,
    .from_keras = clt_global_pool_from_keras,
    .to_onnx = gmp_to_onnx,
    .ref_forward = CLT_REF(gmp_ref_forward),
    .ref_backward = CLT_REF(gmp_ref_backward),
};
