/* LayerScale (Keras' ConvNeXt): a trainable per-channel scale, y = x * gamma, gamma of
 * (C) initialised to init_values (Keras names the weight "variable"; cltrain
 * "gamma" with that alias).
 * backward: dx = dy * gamma; dgamma[c] = the sum over the batch's positions, in
 * order, of dy * x. Description: LayerScale(1e-06,96) (init_values, projection_dim). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer.h"

typedef struct layerscale_hp {
  double init;
  int dim; /* projection_dim: the channels */
} layerscale_hp;

static const layerscale_hp *hp(const clt_layer *l) { return clt_layer_hp(l, layerscale_hp); }

/* "init_values,projection_dim" */
static int layerscale_parse(clt_layer *l, const char *args, clt_err *e) {
  layerscale_hp *h = clt_layer_hp(l, layerscale_hp);
  char *end, *end2 = NULL;
  long dim = 0;
  h->init = strtod(args, &end);
  if (end != args && *end == ',') dim = strtol(end + 1, &end2, 10);
  if (end == args || *end != ',' || end2 == end + 1 || *end2 != '\0' || !isfinite(h->init) ||
      dim < 1 || dim > (1L << 30)) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: LayerScale(%s): expected LayerScale(init_values,projection_dim)", l->name,
                    args);
  }
  h->dim = (int)dim;
  return CLT_OK;
}

/* The shortest text that reads back as init_values. */
static void layerscale_describe(const clt_layer *l, char *buf, size_t size) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, size, "LayerScale(%.*g,%d)", prec, hp(l)->init, hp(l)->dim);
    if (strtod(buf + 11, NULL) == hp(l)->init) return;
  }
}

static int layerscale_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  if (in[0].c != hp(l)->dim) {
    return clt_fail(e, CLT_ERR_ARG, "%s: projection_dim %d but the input has %d channels", l->name,
                    hp(l)->dim, in[0].c);
  }
  l->in = l->out = in[0];
  l->nparams = 1;
  clt_param *p = &l->params[0];
  *p = (clt_param){.rank = 1,
                   .dims = {in[0].c},
                   .size = (size_t)in[0].c,
                   .init_constant = (float)hp(l)->init};
  snprintf(p->name, sizeof p->name, "gamma");
  snprintf(p->alias, sizeof p->alias, "variable");
  return CLT_OK;
}

static int layerscale_prepare(const clt_layer *l, clt_replica *r, int max_batch,
                              const clt_fusion *f, clt_err *e) {
  (void)l;
  (void)max_batch;
  (void)f;
  return clt_bcast_prepare(r, e);
}

/* gamma is one row broadcast over all the batch's rows. */
static int rows(const clt_layer *l, int batch) { return batch * l->out.h * l->out.w; }

static int layerscale_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return clt_bcast_forward(l, io, io->x, 0, io->params, (int)l->params[0].offset, 1,
                           rows(l, io->batch), 1, 0.0f, 0.0f, e);
}

static int layerscale_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const clt_param *gamma = clt_layer_trained(l, &l->params[0]);
  const int n = rows(l, io->batch);
  int status = CLT_OK;
  if (gamma)
    status = clt_bcast_grad_sum(l, io, io->x, n, 1, 1.0f, io->grads, (int)gamma->offset, e);
  if (!status && io->dx)
    status = clt_bcast_grad(l, io, io->params, (int)l->params[0].offset, 1, n, 1, 1.0f, io->dx, e);
  return status;
}

static int layerscale_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                                 size_t size, clt_err *e) {
  layerscale_hp *h = clt_layer_hp(l, layerscale_hp);
  if (size) activation[0] = '\0';
  if (!clt_kc_has(c, "init_values")) return clt_kc_fail(c, e, "init_values: missing");
  if (!clt_kc_has(c, "projection_dim")) return clt_kc_fail(c, e, "projection_dim: missing");
  int status = clt_kc_double(c, "init_values", 0.0, &h->init, e);
  if (!status) status = clt_kc_int(c, "projection_dim", 0, &h->dim, e);
  if (!status && h->dim < 1) return clt_kc_fail(c, e, "projection_dim %d", h->dim);
  return status;
}

/* Mul by gamma as (1, C, 1, 1) (or (C) for a rank-2 input). */
static int layerscale_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                              const char *output, clt_err *e) {
  const int rank = clt_onnx_rank(g, inputs[0]);
  const int64_t c = l->out.c, dims4[4] = {1, c, 1, 1}, dims1[1] = {c};
  const char *mul[2] = {inputs[0], clt_onnx_name(g, l, "gamma")};
  int status = clt_onnx_tensor(g, mul[1], rank == 2 ? 1 : 4, rank == 2 ? dims1 : dims4,
                               clt_onnx_param(g, l, 0), e);
  if (!status) status = clt_onnx_node(g, "Mul", mul, 2, output, NULL, 0, e);
  if (!status) clt_onnx_set_rank(g, output, rank);
  return status;
}

#ifdef CLT_REFERENCE
static void layerscale_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const size_t n = (size_t)rows(l, io->batch);
  clt_bcast_ref_forward(io->x, 0, io->params + l->params[0].offset, 1, n, l->out.c, n, 1, 0, 0,
                        io->y);
}

static void layerscale_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const size_t n = (size_t)rows(l, io->batch);
  const double *gamma = io->params + l->params[0].offset;
  if (io->grads && clt_layer_trained(l, &l->params[0]))
    clt_bcast_ref_grad_sum(io->dy, io->x, n, l->out.c, n, 1, 1, io->grads + l->params[0].offset);
  if (io->dx) clt_bcast_ref_grad(io->dy, gamma, 1, n, l->out.c, n, 1, 1, io->dx);
}
#endif

static const char *const layerscale_sources[] = {"broadcast.cl", NULL};

const clt_layer_ops clt_layerscale_ops = {
    .kind = "LayerScale",
    .ninputs = 1,
    .parse = layerscale_parse,
    .describe = layerscale_describe,
    .setup = layerscale_setup,
    .prepare = layerscale_prepare,
    .sources = layerscale_sources,
    .forward = layerscale_forward,
    .backward = layerscale_backward,
    .from_keras = layerscale_from_keras,
    .to_onnx = layerscale_to_onnx,
    .ref_forward = CLT_REF(layerscale_ref_forward),
    .ref_backward = CLT_REF(layerscale_ref_backward),
};
