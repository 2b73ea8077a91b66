/* Normalization (Keras' preprocessing layer) over the channels, its statistics as
 * weights: y = (x - mean[c]) / max(sqrt(variance[c]), eps), eps = 1e-7 (Keras'
 * backend epsilon); backward dx = dy / the same. Its weights are Keras' own, in
 * get_weights' order: mean (C), variance (C) and count (a scalar Keras keeps for
 * older files; unused here), zeros, ones and 0 when built but not adapted; a
 * Keras file that gives mean and variance in the config as constants (Keras then
 * has no weights) gives them their values instead (norm_keras_values). They
 * are non-trainable moving statistics whose moving average keeps them as they are
 * (momentum 1): a training forward reports the weights themselves as its batch
 * statistics, so the step's update and the all-reduce leave them unchanged.
 * cl/normalization.cl. Description: Normalization (no arguments). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

/* Keras' backend epsilon, the divisor's floor. */
#define NORM_EPS 1e-7
/* Positions per work-item of the CPU kernel (8 channels each). */
#define NORM_ROWS_PER_ITEM 4

enum { NORM_MEAN, NORM_VAR, NORM_COUNT };

static int norm_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  (void)e;
  const int C = ins[0].c;
  l->in = l->out = ins[0];
  l->params[NORM_MEAN] = (clt_param){.name = "mean",
                                     .rank = 1,
                                     .dims = {C},
                                     .size = (size_t)C,
                                     .non_trainable = 1,
                                     .moving_momentum = 1.0};
  l->params[NORM_VAR] = l->params[NORM_MEAN];
  snprintf(l->params[NORM_VAR].name, sizeof l->params[NORM_VAR].name, "variance");
  l->params[NORM_VAR].init_constant = 1.0f;
  l->params[NORM_COUNT] = (clt_param){
      .name = "count", .rank = 0, .size = 1, .non_trainable = 1, .moving_momentum = 1.0};
  l->nparams = 3;
  return CLT_OK;
}

static int norm_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                        clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"normalization_apply"};
  return clt_layer_build_kernels(r, "normalization.cl", names, 1, e);
}

/* normalization_apply from `in` to `out`; mean: subtract the mean (forward);
 * stats: also report the statistics (a training forward of a layer not frozen). */
static int norm_run(const clt_layer *l, const clt_layer_io *io, cl_mem in, cl_mem out, int mean,
                    int stats, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "normalization.cl", "", "normalization_apply", &k,
                                  e);
  if (status) return status;
  int m = mean ? (int)l->params[NORM_MEAN].offset : -1, v = (int)l->params[NORM_VAR].offset;
  int rows = io->batch * l->in.h * l->in.w, at = stats ? (int)l->params[NORM_COUNT].offset : -1;
  int per_item = NORM_ROWS_PER_ITEM;
  float eps = (float)NORM_EPS, w = io->stat_weight;
  clt_karg args[] = {CLT_ARG(in),        CLT_ARG(out),  CLT_ARG(io->params), CLT_ARG(m),
                     CLT_ARG(v),         CLT_ARG(rows), CLT_ARG(l->in.c),    CLT_ARG(eps),
                     CLT_ARG(io->grads), CLT_ARG(at),   CLT_ARG(w),          CLT_ARG(per_item)};
  status = clt_launch_rows(io->replica, k, "normalization_apply", args, 12, (size_t)l->in.c,
                           (size_t)rows, NORM_ROWS_PER_ITEM, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int norm_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  return norm_run(l, io, io->x, io->y, 1, io->train && !l->frozen, e);
}

static int norm_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  return norm_run(l, io, io->dy, io->dx, 0, 0, e);
}

/* Keras Normalization: axis -1 (or the last axis, 3) only, invert false; mean and
 * variance from the weights (get_weights: the adapted layer's), or both from the
 * config as constants, which norm_keras_values reads once the channels are known. */
static int norm_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                           clt_err *e) {
  (void)l;
  if (size) activation[0] = '\0';
  int axis = -1, invert = 0;
  int status = clt_kc_ints(c, "axis", 1, -1, &axis, e);
  if (!status && axis != -1 && axis != 3)
    status = clt_kc_fail(c, e, "axis %d is not supported (only the channels, -1)", axis);
  if (!status) status = clt_kc_bool(c, "invert", 0, &invert, e);
  if (!status && invert) status = clt_kc_fail(c, e, "invert true is not supported");
  if (!status && clt_kc_has(c, "mean") != clt_kc_has(c, "variance"))
    status = clt_kc_fail(c, e, "%s without %s in the config (Keras takes both or neither)",
                         clt_kc_has(c, "mean") ? "mean" : "variance",
                         clt_kc_has(c, "mean") ? "variance" : "mean");
  static const char *const later[] = {"mean", "variance", NULL};
  if (!status) clt_kc_ignore(c, later); /* norm_keras_values reads them */
  return status;
}

/* The config's mean and variance, each a number (every channel's) or one per
 * channel, become the values of the mean and variance weights; Keras then has no
 * weights for the layer, so none of the three is among get_weights. */
static int norm_keras_values(clt_layer *l, const clt_keras_config *c, float *pool, size_t room,
                             size_t *used, clt_err *e) {
  if (!clt_kc_has(c, "mean")) return CLT_OK; /* adapted: the weights hold them */
  const int C = l->in.c;
  static const char *const keys[2] = {"mean", "variance"};
  if (room - *used < 2 * (size_t)C)
    return clt_kc_fail(c, e, "mean and variance: the model's constants take more than %zu values",
                       room);
  for (int k = 0; k < 2; k++) {
    float *v = pool + *used;
    int n, scalar;
    int status = clt_kc_floats(c, keys[k], C, v, &n, &scalar, e);
    if (status) return status;
    if (!scalar && n != C)
      return clt_kc_fail(c, e, "%s has %d values, the input has %d channels", keys[k], n, C);
    for (int i = 1; scalar && i < C; i++) v[i] = v[0];
    for (int i = 0; k == NORM_VAR && i < C; i++) {
      if (v[i] < 0)
        return clt_kc_fail(c, e, "variance %g of channel %d is negative", (double)v[i], i);
    }
    l->params[k].init = (clt_init){.kind = CLT_INIT_VALUES};
    l->params[k].values_at = *used;
    *used += (size_t)C;
  }
  for (int p = 0; p < l->nparams; p++) l->params[p].keras_config = 1;
  return CLT_OK;
}

/* Sub of the mean and Div by the divisor, as (1, C, 1, 1) initializers. */
static int norm_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                        const char *output, clt_err *e) {
  const int C = l->in.c;
  const int64_t dims[4] = {1, C, 1, 1};
  const float *var = clt_onnx_param(g, l, NORM_VAR);
  float *div = malloc((size_t)C * sizeof *div);
  if (!div) return clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory", l->name);
  for (int c = 0; c < C; c++) div[c] = fmaxf(sqrtf(var[c]), (float)NORM_EPS);
  const char *sub[2] = {inputs[0], clt_onnx_name(g, l, "mean")};
  const char *dv[2] = {clt_onnx_name(g, l, "centred"), clt_onnx_name(g, l, "divisor")};
  int status = clt_onnx_tensor(g, sub[1], 4, dims, clt_onnx_param(g, l, NORM_MEAN), e);
  if (!status) status = clt_onnx_tensor(g, dv[1], 4, dims, div, e);
  free(div);
  if (!status) status = clt_onnx_node(g, "Sub", sub, 2, dv[0], NULL, 0, e);
  if (!status) status = clt_onnx_node(g, "Div", dv, 2, output, NULL, 0, e);
  return status;
}

#ifdef CLT_REFERENCE
/* The divisor of channel c in double precision, of the float variance. */
static double norm_div(const clt_layer *l, const double *params, int c) {
  return fmax(sqrt(params[l->params[NORM_VAR].offset + c]), NORM_EPS);
}

static void norm_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const int C = l->in.c;
  const size_t rows = (size_t)io->batch * l->in.h * l->in.w;
  for (size_t r = 0; r < rows; r++)
    for (int c = 0; c < C; c++)
      io->y[r * C + c] = (io->x[r * C + c] - io->params[l->params[NORM_MEAN].offset + c]) /
                         norm_div(l, io->params, c);
  if (!io->train || !io->grads || l->frozen) return;
  for (int p = 0; p < l->nparams; p++)
    for (size_t i = 0; i < l->params[p].size; i++)
      io->grads[l->params[p].offset + i] = io->stat_weight * io->params[l->params[p].offset + i];
}

static void norm_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const int C = l->in.c;
  const size_t rows = (size_t)io->batch * l->in.h * l->in.w;
  if (!io->dx) return;
  for (size_t r = 0; r < rows; r++)
    for (int c = 0; c < C; c++) io->dx[r * C + c] = io->dy[r * C + c] / norm_div(l, io->params, c);
}
#endif

static const char *const norm_sources[] = {"normalization.cl", NULL};

const clt_layer_ops clt_normalization_ops = {
    .kind = "Normalization",
    .ninputs = 1,
    .parse = clt_layer_parse_none,
    .describe = clt_layer_describe_none,
    .setup = norm_setup,
    .prepare = norm_prepare,
    .sources = norm_sources,
    .forward = norm_forward,
    .backward = norm_backward,
    .from_keras = norm_from_keras,
    .keras_values = norm_keras_values,
    .to_onnx = norm_to_onnx,
    .ref_forward = CLT_REF(norm_ref_forward),
    .ref_backward = CLT_REF(norm_ref_backward),
};
