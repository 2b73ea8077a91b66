/* Subtract (Keras) of two inputs of one shape, or of (H, W, C) and (1, 1, C) in either
 * order (the row broadcast over the other's positions).
 * forward:  y = x - x2
 * backward: dx = dy, dx2 = -dy for full-shape inputs; a broadcast input's the sum over
 *           its example's positions, in order. No parameters. */
#include "layer.h"

typedef struct subtract_hp {
  int bcast; /* setup: 0 equal shapes, 1 input 0 is (1, 1, C), 2 input 1 is */
} subtract_hp;

static const subtract_hp *hp(const clt_layer *l) { return clt_layer_hp(l, subtract_hp); }

static int subtract_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  return clt_bcast_setup(l, in, &clt_layer_hp(l, subtract_hp)->bcast, e);
}

static int subtract_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                            clt_err *e) {
  (void)l;
  (void)max_batch;
  (void)f;
  return clt_bcast_prepare(r, e);
}

static int subtract_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int b = hp(l)->bcast, hw = l->out.h * l->out.w;
  return clt_bcast_forward(l, io, io->x, b == 1, io->x2, 0, b == 2, hw, 0, 1.0f, -1.0f, e);
}

static int subtract_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int b = hp(l)->bcast, hw = l->out.h * l->out.w;
  const float sign[2] = {1.0f, -1.0f};
  cl_mem d[2] = {io->dx, io->dx2};
  for (int k = 0; k < 2; k++) {
    if (!d[k]) continue;
    int status = b == k + 1 ? clt_bcast_grad_sum(l, io, NULL, hw, 0, sign[k], d[k], 0, e)
                            : clt_bcast_grad(l, io, NULL, 0, 0, hw, 0, sign[k], d[k], e);
    if (status) return status;
  }
  return CLT_OK;
}

static int subtract_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                            const char *output, clt_err *e) {
  return clt_bcast_to_onnx(l, g, hp(l)->bcast, "Sub", inputs, output, e);
}

#ifdef CLT_REFERENCE
static void subtract_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const int b = hp(l)->bcast;
  const size_t hw = (size_t)l->out.h * l->out.w;
  clt_bcast_ref_forward(io->x, b == 1, io->x2, b == 2, hw * io->batch, l->out.c, hw, 0, 1, -1,
                        io->y);
}

static void subtract_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const int b = hp(l)->bcast;
  const size_t hw = (size_t)l->out.h * l->out.w, rows = hw * io->batch;
  double *d[2] = {io->dx, io->dx2};
  for (int k = 0; k < 2; k++) {
    if (!d[k]) continue;
    if (b == k + 1) clt_bcast_ref_grad_sum(io->dy, NULL, rows, l->out.c, hw, 0, k ? -1 : 1, d[k]);
    else clt_bcast_ref_grad(io->dy, NULL, 0, rows, l->out.c, hw, 0, k ? -1 : 1, d[k]);
  }
}
#endif

static const char *const subtract_sources[] = {"broadcast.cl", NULL};

const clt_layer_ops clt_subtract_ops = {
    .kind = "Subtract",
    .ninputs = 2,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = subtract_setup,
    .prepare = subtract_prepare,
    .sources = subtract_sources,
    .forward = subtract_forward,
    .backward = subtract_backward,
    .from_keras = clt_bcast_from_keras,
    .to_onnx = subtract_to_onnx,
    .ref_forward = CLT_REF(subtract_ref_forward),
    .ref_backward = CLT_REF(subtract_ref_backward),
};
