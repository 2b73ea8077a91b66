/* Add (Keras) of two inputs of the same shape, with an optional fused ReLU (ResNet's
 * "_out" activation after each block's sum), or of (H, W, C) and (1, 1, C) in either
 * order, without the ReLU (cl/broadcast.cl, see multiply.c).
 * forward:  y = x + x2, then ReLU
 * backward: dx = dx2 = dy masked by (y > 0); either may be NULL; a broadcast input's
 *           the sum over its example's positions, in order. No parameters. */
#include <stdio.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref_resnet.h"
#endif

typedef struct add_hp {
  int relu;  /* fused activation */
  int bcast; /* setup: 0 equal shapes, 1 input 0 is (1, 1, C), 2 input 1 is */
} add_hp;

static const add_hp *hp(const clt_layer *l) { return clt_layer_hp(l, add_hp); }

/* "relu" or nothing */
static int add_parse(clt_layer *l, const char *args, clt_err *e) {
  if (clt_parse_relu_tail(args, &clt_layer_hp(l, add_hp)->relu) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: Add(%s): expected Add or Add(relu)", l->name, args);
  }
  return CLT_OK;
}

static void add_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "Add%s", hp(l)->relu ? "(relu)" : "");
}

static int add_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  add_hp *h = clt_layer_hp(l, add_hp);
  int status = clt_bcast_setup(l, in, &h->bcast, e);
  if (!status && h->bcast && h->relu) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: Add(relu) of inputs %dx%dx%d and %dx%dx%d: the fused ReLU needs equal "
                    "shapes",
                    l->name, in[0].h, in[0].w, in[0].c, in[1].h, in[1].w, in[1].c);
  }
  return status;
}

static int add_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                       clt_err *e) {
  (void)f;
  (void)max_batch;
  if (hp(l)->bcast) return clt_bcast_prepare(r, e);
  static const char *const names[] = {"add_forward", "add_backward", "add_backward_in_place"};
  return clt_layer_build_kernels(r, "add.cl", names, 3, e);
}

static int add_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int b = hp(l)->bcast;
  if (b) {
    return clt_bcast_forward(l, io, io->x, b == 1, io->x2, 0, b == 2, l->out.h * l->out.w, 0, 1.0f,
                             1.0f, e);
  }
  cl_kernel k;
  const size_t total = (size_t)io->batch * clt_shape_size(l->out);
  int n = (int)total, relu = hp(l)->relu;
  int status = clt_replica_kernel(io->replica, "add.cl", "", "add_forward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->x2), CLT_ARG(io->y), CLT_ARG(n), CLT_ARG(relu)};
  status = clt_launch_elems(io->replica, k, "add_forward", args, 5, total, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

/* Backward where an input's gradient is dy's own buffer (the gradient plan's
 * CLT_FUSE_GRAD_IN_PLACE): dy masked in place by the ReLU, and copied to the
 * other input's gradient where that lives elsewhere. Without a ReLU and a
 * second buffer there is nothing to do. */
static int add_backward_in_place(const clt_layer *l, const clt_layer_io *io, size_t total,
                                 clt_err *e) {
  cl_mem other = io->dx == io->dy ? io->dx2 : io->dx, none = NULL;
  if (other == io->dy) other = NULL;
  int n = (int)total, relu = hp(l)->relu, status;
  cl_kernel k;
  if (!relu && !other) return CLT_OK;
  if (!relu) {
    /* The other gradient is dy as it is (add_backward without its ReLU). */
    status = clt_replica_kernel(io->replica, "add.cl", "", "add_backward", &k, e);
    clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(other),
                       CLT_ARG(none),   CLT_ARG(n),     CLT_ARG(relu)};
    if (!status) status = clt_launch_elems(io->replica, k, "add_backward", args, 6, total, e);
  } else {
    status = clt_replica_kernel(io->replica, "add.cl", "", "add_backward_in_place", &k, e);
    clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(other), CLT_ARG(n)};
    if (!status)
      status = clt_launch_elems(io->replica, k, "add_backward_in_place", args, 4, total, e);
  }
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int add_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx && !io->dx2) return CLT_OK;
  const int b = hp(l)->bcast, hw = l->out.h * l->out.w;
  if (b) {
    cl_mem d[2] = {io->dx, io->dx2};
    for (int j = 0; j < 2; j++) {
      if (!d[j]) continue;
      int status = b == j + 1 ? clt_bcast_grad_sum(l, io, NULL, hw, 0, 1.0f, d[j], 0, e)
                              : clt_bcast_grad(l, io, NULL, 0, 0, hw, 0, 1.0f, d[j], e);
      if (status) return status;
    }
    return CLT_OK;
  }
  cl_kernel k;
  const size_t total = (size_t)io->batch * clt_shape_size(l->out);
  int n = (int)total, relu = hp(l)->relu;
  if (io->dx == io->dy || io->dx2 == io->dy) return add_backward_in_place(l, io, total, e);
  int status = clt_replica_kernel(io->replica, "add.cl", "", "add_backward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->dy),  CLT_ARG(io->y), CLT_ARG(io->dx),
                     CLT_ARG(io->dx2), CLT_ARG(n),     CLT_ARG(relu)};
  status = clt_launch_elems(io->replica, k, "add_backward", args, 6, total, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

/* Keras' Add has no options of its own; a ReLU after it is fused by the loader. */
static int add_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                          clt_err *e) {
  (void)c;
  (void)e;
  if (size) activation[0] = '\0';
  clt_layer_hp(l, add_hp)->relu = 0;
  return CLT_OK;
}

/* Add, then Relu for the fused form. Inputs of ranks 4 and 2 (both 1x1xC here)
 * meet as (N, C). */
static int add_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *output, clt_err *e) {
  if (hp(l)->bcast) return clt_bcast_to_onnx(l, g, hp(l)->bcast, "Add", inputs, output, e);
  const char *ins[2];
  int rank, status = clt_onnx_same_rank(l, g, inputs, ins, &rank, e);
  const char *sum = hp(l)->relu ? clt_onnx_name(g, l, "sum") : output;
  if (!status) status = clt_onnx_node(g, "Add", ins, 2, sum, NULL, 0, e);
  if (!status && hp(l)->relu) {
    clt_onnx_set_rank(g, sum, rank);
    status = clt_onnx_node(g, "Relu", &sum, 1, output, NULL, 0, e);
  }
  if (!status) clt_onnx_set_rank(g, output, rank);
  return status;
}

#ifdef CLT_REFERENCE
static void add_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const int b = hp(l)->bcast;
  const size_t hw = (size_t)l->out.h * l->out.w;
  if (b) {
    clt_bcast_ref_forward(io->x, b == 1, io->x2, b == 2, hw * io->batch, l->out.c, hw, 0, 1, 1,
                          io->y);
    return;
  }
  ref_add(io->x, io->x2, clt_shape_size(l->out) * io->batch, hp(l)->relu, io->y);
}

static void add_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const int b = hp(l)->bcast;
  const size_t hw = (size_t)l->out.h * l->out.w;
  double *d[2] = {io->dx, io->dx2};
  for (int j = 0; b && j < 2; j++) {
    if (!d[j]) continue;
    if (b == j + 1) clt_bcast_ref_grad_sum(io->dy, NULL, hw * io->batch, l->out.c, hw, 0, 1, d[j]);
    else clt_bcast_ref_grad(io->dy, NULL, 0, hw * io->batch, l->out.c, hw, 0, 1, d[j]);
  }
  if (b) return;
  ref_add_backward(io->y, io->dy, clt_shape_size(l->out) * io->batch, hp(l)->relu, io->dx, io->dx2);
}
#endif

/* A sum whose producer of one input can do it in its own forward (fusion.adds),
 * and whose inputs' gradients can share its output gradient's buffer. */
static unsigned add_fusions(const clt_layer *l) {
  if (hp(l)->bcast) return 0u;
  return CLT_FUSE_SUM | CLT_FUSE_GRAD_IN_PLACE | (hp(l)->relu ? CLT_FUSE_SUM_RELU : 0u);
}

static const char *const add_sources[] = {"add.cl", "broadcast.cl", NULL};

const clt_layer_ops clt_add_ops = {
    .kind = "Add",
    .ninputs = 2,
    .parse = add_parse,
    .describe = add_describe,
    .setup = add_setup,
    .prepare = add_prepare,
    .sources = add_sources,
    .forward = add_forward,
    .backward = add_backward,
    .fusions = add_fusions,
    .from_keras = add_from_keras,
    .to_onnx = add_to_onnx,
    .ref_forward = CLT_REF(add_ref_forward),
    .ref_backward = CLT_REF(add_ref_backward),
};
