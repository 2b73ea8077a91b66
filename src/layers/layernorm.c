/* LayerNormalization over the channels of each position (Keras' axis -1, ConvNeXt's
 * epsilon 1e-6): y = (x - mean) / sqrt(var + eps) * gamma + beta, mean and var
 * (biased) over the position's C channels, gamma and beta per channel (scale=False:
 * no gamma, center=False: no beta).
 *
 * forward:  a pass per position (cl/layernorm.cl);
 * backward: a pass per position recomputes mean and 1/std from x and writes dx and
 *           dy * xhat (into scratch), whose column sums are gamma's gradient; dy's
 *           column sums are beta's (bias.cl's column sums, fixed order).
 * Scratch: [dy * xhat: rows*C][column sums' partials]. Description:
 * LayerNormalization(eps1e-06[,nocenter][,noscale]). */
#include <stdio.h>
#include <string.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include <math.h>
#endif

typedef struct ln_hp {
  double epsilon;
  int nocenter; /* center=False: no beta */
  int noscale;  /* scale=False: no gamma */
} ln_hp;

static const ln_hp *hp(const clt_layer *l) { return clt_layer_hp(l, ln_hp); }

/* Indices of gamma and beta in l->params, -1 when absent (Keras' order: gamma first). */
static int ln_gamma(const clt_layer *l) { return hp(l)->noscale ? -1 : 0; }
static int ln_beta(const clt_layer *l) { return hp(l)->nocenter ? -1 : !hp(l)->noscale; }

/* A parameter's offset, -1 when absent. */
static int ln_offset(const clt_layer *l, int index) {
  return index < 0 ? -1 : (int)l->params[index].offset;
}

/* "eps1e-06", "eps0.001,nocenter,noscale" */
static int ln_parse(clt_layer *l, const char *args, clt_err *e) {
  ln_hp *h = clt_layer_hp(l, ln_hp);
  int used = 0;
  h->nocenter = h->noscale = 0;
  if (sscanf(args, "eps%lf%n", &h->epsilon, &used) == 1) {
    if (strncmp(args + used, ",nocenter", 9) == 0) {
      h->nocenter = 1;
      used += 9;
    }
    if (strncmp(args + used, ",noscale", 8) == 0) {
      h->noscale = 1;
      used += 8;
    }
  }
  if (used == 0 || args[used] != '\0' || !(h->epsilon > 0.0)) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: LayerNormalization(%s): expected "
                    "LayerNormalization(epsEPSILON[,nocenter][,noscale]), EPSILON > 0",
                    l->name, args);
  }
  return CLT_OK;
}

static void ln_describe(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "LayerNormalization(eps%.9g%s%s)", hp(l)->epsilon,
           hp(l)->nocenter ? ",nocenter" : "", hp(l)->noscale ? ",noscale" : "");
}

static int ln_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  if (in.h < 1 || in.w < 1 || in.c < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad input shape %dx%dx%d", l->name, in.h, in.w, in.c);
  }
  l->in = l->out = in;
  l->nparams = 0;
  const clt_param one = {.rank = 1, .dims = {in.c}, .size = (size_t)in.c};
  if (!hp(l)->noscale) {
    l->params[l->nparams] = one;
    l->params[l->nparams].init_constant = 1.0f;
    snprintf(l->params[l->nparams++].name, sizeof one.name, "gamma");
  }
  if (!hp(l)->nocenter) {
    l->params[l->nparams] = one;
    snprintf(l->params[l->nparams++].name, sizeof one.name, "beta");
  }
  return CLT_OK;
}

static int ln_rows(const clt_layer *l, int batch) { return batch * l->in.h * l->in.w; }

static size_t ln_scratch(const clt_layer *l, int batch) {
  const int rows = ln_rows(l, batch);
  return (size_t)rows * l->in.c + clt_bias_grad_scratch(rows, l->in.c);
}

static int ln_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                      clt_err *e) {
  (void)f;
  (void)l;
  (void)max_batch;
  static const char *const names[] = {"layernorm_forward", "layernorm_backward"};
  static const char *const sums[] = {"bias_grad_partial", "bias_grad_final"};
  int status = clt_layer_build_kernels(r, "layernorm.cl", names, 2, e);
  if (!status) status = clt_layer_build_kernels(r, "bias.cl", sums, 2, e);
  return status;
}

static int ln_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "layernorm.cl", "", "layernorm_forward", &k, e);
  if (status) return status;
  int g = ln_offset(l, ln_gamma(l)), b = ln_offset(l, ln_beta(l)), rows = ln_rows(l, io->batch);
  float eps = (float)hp(l)->epsilon;
  clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->params), CLT_ARG(g),       CLT_ARG(b),
                     CLT_ARG(io->y), CLT_ARG(rows),       CLT_ARG(l->in.c), CLT_ARG(eps)};
  status = clt_launch_groups(io->replica, k, "layernorm_forward", args, 8, (size_t)rows, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int ln_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int rows = ln_rows(l, io->batch), C = l->in.c;
  const int gamma = l->frozen ? -1 : ln_gamma(l), beta = l->frozen ? -1 : ln_beta(l);
  int want_dx = io->dx != NULL, want_gx = gamma >= 0;
  if (!want_dx && !want_gx && beta < 0) return CLT_OK;
  cl_kernel k;
  int status = CLT_OK;
  if (want_dx || want_gx) {
    status = clt_replica_kernel(io->replica, "layernorm.cl", "", "layernorm_backward", &k, e);
    if (status) return status;
    int g = ln_offset(l, ln_gamma(l));
    float eps = (float)hp(l)->epsilon;
    cl_mem dx = want_dx ? io->dx : io->dy; /* any valid buffer when unused */
    clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->dy),  CLT_ARG(io->params),  CLT_ARG(g),
                       CLT_ARG(dx),    CLT_ARG(want_dx), CLT_ARG(io->scratch), CLT_ARG(want_gx),
                       CLT_ARG(rows),  CLT_ARG(C),       CLT_ARG(eps)};
    status = clt_launch_groups(io->replica, k, "layernorm_backward", args, 11, (size_t)rows, e);
  }
  const size_t part = (size_t)rows * C;
  if (!status && gamma >= 0)
    status = clt_bias_grad(io, io->scratch, NULL, io->scratch, part, rows, C,
                           l->params[gamma].offset, e);
  if (!status && beta >= 0)
    status = clt_bias_grad(io, io->dy, NULL, io->scratch, part, rows, C, l->params[beta].offset, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

/* Keras LayerNormalization (Keras 3 and tf.keras 2.x): axis (only the channels),
 * epsilon, center, scale; rms_scaling (deprecated in Keras 3) refused. */
static int ln_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                         clt_err *e) {
  ln_hp *h = clt_layer_hp(l, ln_hp);
  int axis = -1, center = 1, scale = 1, rms = 0;
  if (size) activation[0] = '\0';
  memset(h, 0, sizeof *h);
  int status = clt_kc_ints(c, "axis", 1, -1, &axis, e);
  if (!status && axis != -1 && axis != 3)
    status = clt_kc_fail(c, e, "axis %d is not supported (only -1 or 3, the channels)", axis);
  if (!status) status = clt_kc_double(c, "epsilon", 0.001, &h->epsilon, e);
  if (!status && !(h->epsilon > 0.0))
    status = clt_kc_fail(c, e, "epsilon %g: must be positive", h->epsilon);
  if (!status) status = clt_kc_bool(c, "center", 1, &center, e);
  if (!status) status = clt_kc_bool(c, "scale", 1, &scale, e);
  if (!status) status = clt_kc_bool(c, "rms_scaling", 0, &rms, e);
  if (!status && rms) status = clt_kc_fail(c, e, "rms_scaling true is not supported");
  h->nocenter = !center;
  h->noscale = !scale;
  return status;
}

/* Opset 13 has no LayerNormalization: ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt,
 * Div over the channels (axis 1 of NCHW, and of a pooled (N, C) tensor), then Mul
 * by gamma and Add of beta as (1, C, 1, 1) initializers, or (1, C) on (N, C):
 * broadcasting a 4-D one would make (N, C) 4-D. */
static int ln_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                      const char *output, clt_err *e) {
  const int64_t dims[4] = {1, l->in.c, 1, 1}, none[1] = {0};
  const int rank = clt_onnx_rank(g, inputs[0]) == 2 ? 2 : 4;
  const float eps = (float)hp(l)->epsilon;
  const clt_onnx_attr mean_attrs[2] = {CLT_ONNX_INTS("axes", 1, 1), CLT_ONNX_INT("keepdims", 1)};
  const int gi = ln_gamma(l), bi = ln_beta(l);
  const char *x = inputs[0], *mean = clt_onnx_name(g, l, "mean"), *d = clt_onnx_name(g, l, "d");
  const char *d2 = clt_onnx_name(g, l, "d2"), *var = clt_onnx_name(g, l, "var");
  const char *eps_name = clt_onnx_name(g, l, "epsilon"), *ve = clt_onnx_name(g, l, "var_eps");
  const char *sd = clt_onnx_name(g, l, "std");
  const char *xh = gi < 0 && bi < 0 ? output : clt_onnx_name(g, l, "xhat");
  const char *scaled = bi < 0 ? output : clt_onnx_name(g, l, "scaled");
  const char *sub[2] = {x, mean}, *sq[2] = {d, d}, *add[2] = {var, eps_name}, *div[2] = {d, sd};
  int status = clt_onnx_tensor(g, eps_name, 0, none, &eps, e);
  if (!status) status = clt_onnx_node(g, "ReduceMean", &x, 1, mean, mean_attrs, 2, e);
  if (!status) status = clt_onnx_node(g, "Sub", sub, 2, d, NULL, 0, e);
  if (!status) status = clt_onnx_node(g, "Mul", sq, 2, d2, NULL, 0, e);
  if (!status) status = clt_onnx_node(g, "ReduceMean", &d2, 1, var, mean_attrs, 2, e);
  if (!status) status = clt_onnx_node(g, "Add", add, 2, ve, NULL, 0, e);
  if (!status) status = clt_onnx_node(g, "Sqrt", &ve, 1, sd, NULL, 0, e);
  if (!status) status = clt_onnx_node(g, "Div", div, 2, xh, NULL, 0, e);
  const char *last = xh;
  if (!status && gi >= 0) {
    const char *mul[2] = {xh, clt_onnx_name(g, l, "gamma")};
    status = clt_onnx_tensor(g, mul[1], rank, dims, clt_onnx_param(g, l, gi), e);
    if (!status) status = clt_onnx_node(g, "Mul", mul, 2, scaled, NULL, 0, e);
    last = scaled;
  }
  if (!status && bi >= 0) {
    const char *sum[2] = {last, clt_onnx_name(g, l, "beta")};
    status = clt_onnx_tensor(g, sum[1], rank, dims, clt_onnx_param(g, l, bi), e);
    if (!status) status = clt_onnx_node(g, "Add", sum, 2, output, NULL, 0, e);
  }
  return status;
}

#ifdef CLT_REFERENCE
/* Position r's mean and 1/std. */
static void ln_ref_stats(const double *x, int C, double eps, double *mean, double *inv) {
  double s = 0.0, v = 0.0;
  for (int c = 0; c < C; c++) s += x[c];
  *mean = s / C;
  for (int c = 0; c < C; c++) v += (x[c] - *mean) * (x[c] - *mean);
  *inv = 1.0 / sqrt(v / C + eps);
}

static void ln_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const int C = l->in.c, rows = ln_rows(l, io->batch), gi = ln_gamma(l), bi = ln_beta(l);
  for (int r = 0; r < rows; r++) {
    const double *x = io->x + (size_t)r * C;
    double mean, inv;
    ln_ref_stats(x, C, hp(l)->epsilon, &mean, &inv);
    for (int c = 0; c < C; c++) {
      const double gamma = gi >= 0 ? io->params[l->params[gi].offset + c] : 1.0;
      const double beta = bi >= 0 ? io->params[l->params[bi].offset + c] : 0.0;
      io->y[(size_t)r * C + c] = (x[c] - mean) * inv * gamma + beta;
    }
  }
}

static void ln_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  const int C = l->in.c, rows = ln_rows(l, io->batch), gi = ln_gamma(l), bi = ln_beta(l);
  const int grads = !l->frozen && io->grads;
  for (int c = 0; c < C && grads; c++) {
    if (gi >= 0) io->grads[l->params[gi].offset + c] = 0.0;
    if (bi >= 0) io->grads[l->params[bi].offset + c] = 0.0;
  }
  for (int r = 0; r < rows; r++) {
    const double *x = io->x + (size_t)r * C, *dy = io->dy + (size_t)r * C;
    double mean, inv, m1 = 0.0, m2 = 0.0;
    ln_ref_stats(x, C, hp(l)->epsilon, &mean, &inv);
    for (int c = 0; c < C; c++) {
      const double gamma = gi >= 0 ? io->params[l->params[gi].offset + c] : 1.0;
      const double xh = (x[c] - mean) * inv;
      m1 += dy[c] * gamma;
      m2 += dy[c] * gamma * xh;
      if (grads && gi >= 0) io->grads[l->params[gi].offset + c] += dy[c] * xh;
      if (grads && bi >= 0) io->grads[l->params[bi].offset + c] += dy[c];
    }
    m1 /= C;
    m2 /= C;
    for (int c = 0; c < C && io->dx; c++) {
      const double gamma = gi >= 0 ? io->params[l->params[gi].offset + c] : 1.0;
      const double xh = (x[c] - mean) * inv;
      io->dx[(size_t)r * C + c] = inv * (dy[c] * gamma - m1 - xh * m2);
    }
  }
}
#endif

static const char *const ln_sources[] = {"layernorm.cl", "bias.cl", NULL};

const clt_layer_ops clt_layernorm_ops = {
    .kind = "LayerNormalization",
    .ninputs = 1,
    .parse = ln_parse,
    .describe = ln_describe,
    .setup = ln_setup,
    .scratch_floats = ln_scratch,
    .prepare = ln_prepare,
    .sources = ln_sources,
    .forward = ln_forward,
    .backward = ln_backward,
    .from_keras = ln_from_keras,
    .to_onnx = ln_to_onnx,
    .ref_forward = CLT_REF(ln_ref_forward),
    .ref_backward = CLT_REF(ln_ref_backward),
};
