/* Concatenate (Keras) of two inputs along the channels (axis -1): inputs of the
 * same height and width, C1 and C2 channels, give C1 + C2; backward splits dy
 * into dx and dx2 (either may be NULL). The loader chains three or more inputs
 * into pairs. No parameters. Description: Concatenate. */
#include <stdio.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

static int concat_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  if (in[0].h != in[1].h || in[0].w != in[1].w || in[0].c < 1 || in[1].c < 1) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: inputs %dx%dx%d and %dx%dx%d differ in height or width (Concatenate "
                    "joins the channels)",
                    l->name, in[0].h, in[0].w, in[0].c, in[1].h, in[1].w, in[1].c);
  }
  l->in = in[0];
  l->out = (clt_shape){in[0].h, in[0].w, in[0].c + in[1].c};
  l->nparams = 0;
  return CLT_OK;
}

static int concat_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                          clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"concat_forward", "concat_backward"};
  return clt_layer_build_kernels(r, "concatenate.cl", names, 2, e);
}

/* CPU: a work-item per row; GPU: one per (channel, row) (see activation.cl). */
static int concat_run(const clt_layer *l, const clt_layer_io *io, const char *name, cl_mem a,
                      cl_mem b, cl_mem c, clt_err *e) {
  cl_kernel k;
  int rows = io->batch * l->out.h * l->out.w, C1 = l->in.c, C2 = l->out.c - l->in.c;
  int status = clt_replica_kernel(io->replica, "concatenate.cl", "", name, &k, e);
  if (status) return clt_wrap(e, "%s", l->name);
  clt_karg args[] = {CLT_ARG(a), CLT_ARG(b), CLT_ARG(c), CLT_ARG(rows), CLT_ARG(C1), CLT_ARG(C2)};
  status = clt_launch_positions(io->replica, k, name, args, 6, (size_t)C1 + (size_t)C2,
                                (size_t)rows, 1, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int concat_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return concat_run(l, io, "concat_forward", io->x, io->x2, io->y, e);
}

static int concat_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx && !io->dx2) return CLT_OK;
  return concat_run(l, io, "concat_backward", io->dy, io->dx, io->dx2, e);
}

static int concat_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                             clt_err *e) {
  (void)l;
  int axis = -1;
  if (size) activation[0] = '\0';
  if (clt_kc_int(c, "axis", -1, &axis, e)) return CLT_ERR_FORMAT;
  if (axis != -1 && axis != 3)
    return clt_kc_fail(c, e, "axis %d is not supported (only -1 or 3: the channels)", axis);
  return CLT_OK;
}

/* ONNX: Concat along axis 1 (the channels in NCHW and in (N, C)). An input of rank 4
 * next to one of rank 2 (both 1x1xC here) is flattened first. */
static int concat_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                          const char *output, clt_err *e) {
  const char *ins[2];
  int rank, status = clt_onnx_same_rank(l, g, inputs, ins, &rank, e);
  const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
  if (!status) status = clt_onnx_node(g, "Concat", ins, 2, output, &axis, 1, e);
  if (!status) clt_onnx_set_rank(g, output, rank);
  return status;
}

#ifdef CLT_REFERENCE
static void concat_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w;
  ref_concat_forward(io->x, io->x2, rows, l->in.c, l->out.c - l->in.c, io->y);
}

static void concat_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w;
  ref_concat_backward(io->dy, rows, l->in.c, l->out.c - l->in.c, io->dx, io->dx2);
}
#endif

static const char *const concat_sources[] = {"concatenate.cl", NULL};

const clt_layer_ops clt_concatenate_ops = {
    .kind = "Concatenate",
    .ninputs = 2,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = concat_setup,
    .prepare = concat_prepare,
    .sources = concat_sources,
    .forward = concat_forward,
    .backward = concat_backward,
    .from_keras = concat_from_keras,
    .to_onnx = concat_to_onnx,
    .ref_forward = CLT_REF(concat_ref_forward),
    .ref_backward = CLT_REF(concat_ref_backward),
};
