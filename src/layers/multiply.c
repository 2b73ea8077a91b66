/* Multiply (Keras) of two inputs of one shape, or of (H, W, C) and (1, 1, C) in either
 * order (squeeze-and-excitation: the per-channel row multiplies every position).
 * forward:  y = x * x2
 * backward: dx = dy * x2 for a full-shape input; for the broadcast one the sum over
 *           its example's positions, in order, of dy * the other. No parameters.
 * Also the shared passes of the kinds over cl/broadcast.cl (layer.h: clt_bcast_*). */
#include <stdio.h>

#include "layer.h"

typedef struct multiply_hp {
  int bcast; /* setup: 0 equal shapes, 1 input 0 is (1, 1, C), 2 input 1 is */
} multiply_hp;

static const multiply_hp *hp(const clt_layer *l) { return clt_layer_hp(l, multiply_hp); }

int clt_bcast_setup(clt_layer *l, const clt_shape *in, int *bcast, clt_err *e) {
  const clt_shape a = in[0], b = in[1];
  const int same = a.h == b.h && a.w == b.w && a.c == b.c;
  const int a1 = a.h == 1 && a.w == 1, b1 = b.h == 1 && b.w == 1;
  if (!same && (a.c != b.c || (!a1 && !b1))) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: inputs of shapes %dx%dx%d and %dx%dx%d (expected equal shapes, or one "
                    "1x1xC broadcast over the other's positions)",
                    l->name, a.h, a.w, a.c, b.h, b.w, b.c);
  }
  *bcast = same ? 0 : a1 ? 1 : 2;
  l->in = a;
  l->out = *bcast == 1 ? b : a;
  l->nparams = 0;
  return CLT_OK;
}

int clt_bcast_prepare(clt_replica *r, clt_err *e) {
  static const char *const names[] = {"bcast_forward", "bcast_grad", "bcast_grad_sum"};
  return clt_layer_build_kernels(r, "broadcast.cl", names, 3, e);
}

int clt_bcast_forward(const clt_layer *l, const clt_layer_io *io, cl_mem x, int bx, cl_mem x2,
                      int off2, int bx2, int g, int mul, float a, float b, clt_err *e) {
  cl_kernel k;
  int C = l->out.c, rows = io->batch * l->out.h * l->out.w;
  int status = clt_replica_kernel(io->replica, "broadcast.cl", "", "bcast_forward", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(x),   CLT_ARG(x2),   CLT_ARG(off2), CLT_ARG(io->y),
                     CLT_ARG(C),   CLT_ARG(rows), CLT_ARG(g),    CLT_ARG(bx),
                     CLT_ARG(bx2), CLT_ARG(mul),  CLT_ARG(a),    CLT_ARG(b)};
  status = clt_launch_elements(io->replica, k, "bcast_forward", args, 12, (size_t)C, (size_t)rows,
                               e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

int clt_bcast_grad(const clt_layer *l, const clt_layer_io *io, cl_mem other, int off, int bother,
                   int g, int mul, float a, cl_mem dx, clt_err *e) {
  cl_kernel k;
  int C = l->out.c, rows = io->batch * l->out.h * l->out.w;
  int status = clt_replica_kernel(io->replica, "broadcast.cl", "", "bcast_grad", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(other), CLT_ARG(off),    CLT_ARG(dx),  CLT_ARG(C),
                     CLT_ARG(rows),   CLT_ARG(g),     CLT_ARG(bother), CLT_ARG(mul), CLT_ARG(a)};
  status = clt_launch_elements(io->replica, k, "bcast_grad", args, 10, (size_t)C, (size_t)rows, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

int clt_bcast_grad_sum(const clt_layer *l, const clt_layer_io *io, cl_mem other, int g, int mul,
                       float a, cl_mem ds, int off, clt_err *e) {
  cl_kernel k;
  int C = l->out.c, groups = io->batch * l->out.h * l->out.w / g;
  int status = clt_replica_kernel(io->replica, "broadcast.cl", "", "bcast_grad_sum", &k, e);
  if (status) return status;
  clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(other), CLT_ARG(ds),  CLT_ARG(off), CLT_ARG(C),
                     CLT_ARG(groups), CLT_ARG(g),     CLT_ARG(mul), CLT_ARG(a)};
  status = clt_launch_elements(io->replica, k, "bcast_grad_sum", args, 9, (size_t)C, (size_t)groups,
                               e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

int clt_bcast_to_onnx(const clt_layer *l, clt_onnx *g, int bcast, const char *op,
                      const char *const *inputs, const char *output, clt_err *e) {
  const char *ins[2];
  int rank, status;
  if (bcast == 0) {
    status = clt_onnx_same_rank(l, g, inputs, ins, &rank, e);
  } else {
    const int k = bcast - 1;
    ins[0] = inputs[0];
    ins[1] = inputs[1];
    rank = 4;
    if (clt_onnx_rank(g, inputs[k]) == 2) {
      const int64_t dims[1] = {4}, shape[4] = {0, l->out.c, 1, 1};
      const char *rs[2] = {inputs[k], clt_onnx_name(g, l, "nc11_shape")};
      ins[k] = clt_onnx_name(g, l, "nc11");
      status = clt_onnx_tensor_i64(g, rs[1], 1, dims, shape, e);
      if (!status) status = clt_onnx_node(g, "Reshape", rs, 2, ins[k], NULL, 0, e);
      if (!status) clt_onnx_set_rank(g, ins[k], 4);
    } else {
      status = CLT_OK;
    }
  }
  if (!status) status = clt_onnx_node(g, op, ins, 2, output, NULL, 0, e);
  if (!status) clt_onnx_set_rank(g, output, rank);
  return status;
}

#ifdef CLT_REFERENCE
void clt_bcast_ref_forward(const double *x, int bx, const double *x2, int bx2, size_t rows, int c,
                           size_t g, int mul, double a, double b, double *y) {
  for (size_t r = 0; r < rows; r++) {
    for (int j = 0; j < c; j++) {
      const double u = x[(bx ? r / g : r) * c + j], v = x2[(bx2 ? r / g : r) * c + j];
      y[r * c + j] = mul ? u * v : a * u + b * v;
    }
  }
}

void clt_bcast_ref_grad(const double *dy, const double *other, int bother, size_t rows, int c,
                        size_t g, int mul, double a, double *dx) {
  for (size_t r = 0; r < rows; r++) {
    for (int j = 0; j < c; j++) {
      const size_t i = r * c + j;
      dx[i] = mul ? dy[i] * other[(bother ? r / g : r) * c + j] : a * dy[i];
    }
  }
}

void clt_bcast_ref_grad_sum(const double *dy, const double *other, size_t rows, int c, size_t g,
                            int mul, double a, double *ds) {
  for (size_t grp = 0; grp < rows / g; grp++) {
    for (int j = 0; j < c; j++) {
      double s = 0.0;
      for (size_t r = grp * g; r < (grp + 1) * g; r++)
        s += mul ? dy[r * c + j] * other[r * c + j] : dy[r * c + j];
      ds[grp * c + j] = mul ? s : a * s;
    }
  }
}
#endif

static int multiply_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  return clt_bcast_setup(l, in, &clt_layer_hp(l, multiply_hp)->bcast, e);
}

static int multiply_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                            clt_err *e) {
  (void)l;
  (void)max_batch;
  (void)f;
  return clt_bcast_prepare(r, e);
}

static int multiply_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int b = hp(l)->bcast, hw = l->out.h * l->out.w;
  return clt_bcast_forward(l, io, io->x, b == 1, io->x2, 0, b == 2, hw, 1, 0.0f, 0.0f, e);
}

/* Input k's gradient (into dx) from the other input. */
static int multiply_input_grad(const clt_layer *l, const clt_layer_io *io, int k, cl_mem other,
                               cl_mem dx, clt_err *e) {
  const int b = hp(l)->bcast, hw = l->out.h * l->out.w;
  if (!dx) return CLT_OK;
  if (b == k + 1) return clt_bcast_grad_sum(l, io, other, hw, 1, 1.0f, dx, 0, e);
  return clt_bcast_grad(l, io, other, 0, b != 0, hw, 1, 1.0f, dx, e);
}

static int multiply_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  int status = multiply_input_grad(l, io, 0, io->x2, io->dx, e);
  return status ? status : multiply_input_grad(l, io, 1, io->x, io->dx2, e);
}

/* Keras' Multiply and Subtract have no options of their own. */
int clt_bcast_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                         clt_err *e) {
  (void)l;
  (void)c;
  (void)e;
  if (size) activation[0] = '\0';
  return CLT_OK;
}

static int multiply_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                            const char *output, clt_err *e) {
  return clt_bcast_to_onnx(l, g, hp(l)->bcast, "Mul", inputs, output, e);
}

#ifdef CLT_REFERENCE
static void multiply_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const int b = hp(l)->bcast;
  const size_t hw = (size_t)l->out.h * l->out.w;
  clt_bcast_ref_forward(io->x, b == 1, io->x2, b == 2, hw * io->batch, l->out.c, hw, 1, 0, 0,
                        io->y);
}

static void multiply_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const int b = hp(l)->bcast;
  const size_t hw = (size_t)l->out.h * l->out.w, rows = hw * io->batch;
  const double *other[2] = {io->x2, io->x};
  double *d[2] = {io->dx, io->dx2};
  for (int k = 0; k < 2; k++) {
    if (!d[k]) continue;
    if (b == k + 1) clt_bcast_ref_grad_sum(io->dy, other[k], rows, l->out.c, hw, 1, 1, d[k]);
    else clt_bcast_ref_grad(io->dy, other[k], b != 0, rows, l->out.c, hw, 1, 1, d[k]);
  }
}
#endif

static const char *const multiply_sources[] = {"broadcast.cl", NULL};

const clt_layer_ops clt_multiply_ops = {
    .kind = "Multiply",
    .ninputs = 2,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = multiply_setup,
    .prepare = multiply_prepare,
    .sources = multiply_sources,
    .forward = multiply_forward,
    .backward = multiply_backward,
    .from_keras = clt_bcast_from_keras,
    .to_onnx = multiply_to_onnx,
    .ref_forward = CLT_REF(multiply_ref_forward),
    .ref_backward = CLT_REF(multiply_ref_backward),
};
