/* Dense with bias and optional fused ReLU; the GEMMs run in CLBlast.
 * forward:  y = x W + bias (W is [IN, OUT]), then ReLU
 * backward: dy *= (y > 0); dbias = column sums of dy; dW = x^T dy; dx = dy W^T
 * Scratch: the bias-gradient partial sums. */
#include <stdio.h>

#include "gemm.h"
#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

typedef struct dense_hp {
  int units;
  int relu; /* fused activation */
} dense_hp;

static const dense_hp *hp(const clt_layer *l) { return clt_layer_hp(l, dense_hp); }

/* "64,relu" or "10" */
static int dense_parse(clt_layer *l, const char *args, clt_err *e) {
  dense_hp *h = clt_layer_hp(l, dense_hp);
  int used = 0;
  if (sscanf(args, "%d%n", &h->units, &used) != 1 ||
      clt_parse_relu_tail(args + used, &h->relu) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: Dense(%s): expected Dense(units[,relu])", l->name,
                    args);
  }
  return CLT_OK;
}

static void dense_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "Dense(%d%s)", hp(l)->units, hp(l)->relu ? ",relu" : "");
}

static int dense_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  const int units = hp(l)->units;
  if (units < 1) return clt_fail(e, CLT_ERR_ARG, "%s: bad units %d", l->name, units);
  if (in.h != 1 || in.w != 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: expects a flat input, got %dx%dx%d (add a Flatten)",
                    l->name, in.h, in.w, in.c);
  }
  l->in = in;
  l->out = (clt_shape){1, 1, units};
  l->params[0] = (clt_param){.name = "kernel",
                             .rank = 2,
                             .dims = {in.c, units},
                             .size = (size_t)in.c * units,
                             .glorot_fan_in = in.c,
                             .glorot_fan_out = units};
  l->params[1] = (clt_param){.name = "bias", .rank = 1, .dims = {units}, .size = (size_t)units};
  l->nparams = 2;
  return CLT_OK;
}

static size_t dense_scratch(const clt_layer *l, int batch) {
  return clt_bias_grad_scratch(batch, hp(l)->units);
}

static clt_gemm_shape fwd_shape(const clt_layer *l, int batch) {
  size_t in = (size_t)l->in.c, out = (size_t)hp(l)->units;
  return (clt_gemm_shape){0, 0, (size_t)batch, out, in, in, out, out};
}
static clt_gemm_shape dw_shape(const clt_layer *l, int batch) {
  size_t in = (size_t)l->in.c, out = (size_t)hp(l)->units;
  return (clt_gemm_shape){1, 0, in, out, (size_t)batch, in, out, out};
}
static clt_gemm_shape dx_shape(const clt_layer *l, int batch) {
  size_t in = (size_t)l->in.c, out = (size_t)hp(l)->units;
  return (clt_gemm_shape){0, 1, (size_t)batch, in, out, out, out, in};
}

static int dense_prepare(const clt_layer *l, clt_replica *r, int max_batch, clt_err *e) {
  clt_gemm_shape shapes[3] = {fwd_shape(l, max_batch), dw_shape(l, max_batch),
                              dx_shape(l, max_batch)};
  for (int i = 0; i < 3; i++) {
    int status = clt_gemm_reserve(r, &shapes[i], e);
    if (status) return status;
  }
  return CLT_OK;
}

static int dense_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_gemm_shape fwd = fwd_shape(l, io->batch);
  int status = clt_gemm_bias_act(io->replica, &fwd, io->x, 0, io->params, l->params[0].offset,
                                 io->y, 0, io->params, l->params[1].offset, hp(l)->relu, e);
  return status;
}

static int dense_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  /* The ReLU's backward (dy *= y > 0) is fused into the bias gradient's pass. */
  int status = clt_bias_grad(io, io->dy, hp(l)->relu ? io->y : NULL, io->scratch, 0, io->batch,
                             hp(l)->units, l->params[1].offset, e);
  if (!status) {
    const clt_gemm_shape dw = dw_shape(l, io->batch);
    status = clt_gemm(io->replica, &dw, 1.0f, io->x, 0, io->dy, 0, 0.0f, io->grads,
                      l->params[0].offset, e);
  }
  if (!status && io->dx) {
    const clt_gemm_shape dx = dx_shape(l, io->batch);
    status = clt_gemm(io->replica, &dx, 1.0f, io->dy, 0, io->params, l->params[0].offset, 0.0f,
                      io->dx, 0, e);
  }
  return status;
}

#ifdef CLT_REFERENCE
static void dense_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const size_t n = (size_t)io->batch * hp(l)->units;
  ref_dense_forward(io->x, io->batch, (int)clt_shape_size(l->in), io->params + l->params[0].offset,
                    io->params + l->params[1].offset, hp(l)->units, io->y);
  if (hp(l)->relu) ref_relu_forward(io->y, n, io->y);
}

static void dense_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const size_t n = (size_t)io->batch * hp(l)->units;
  if (hp(l)->relu) ref_relu_backward(io->y, io->dy, n, io->dy);
  ref_dense_backward(io->x, io->batch, (int)clt_shape_size(l->in), io->params + l->params[0].offset,
                     hp(l)->units, io->dy, io->dx, io->grads + l->params[0].offset,
                     io->grads + l->params[1].offset);
}
#endif

const clt_layer_ops clt_dense_ops = {
    .kind = "Dense",
    .ninputs = 1,
    .parse = dense_parse,
    .describe = dense_describe,
    .setup = dense_setup,
    .scratch_floats = dense_scratch,
    .prepare = dense_prepare,
    .forward = dense_forward,
    .backward = dense_backward,
    .ref_forward = CLT_REF(dense_ref_forward),
    .ref_backward = CLT_REF(dense_ref_backward),
};
