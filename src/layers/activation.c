/* Activation (Keras' Activation layer): relu, relu6, sigmoid, tanh, softmax (over
 * the channels, Keras' last axis) or linear, and Keras 3's swish (silu),
 * hard_sigmoid, hard_silu (hard_swish), gelu (exact), gelu_tanh (gelu with
 * approximate=True), elu, selu and leaky_relu; elementwise except softmax; no
 * parameters. hard_sigmoid_k2 is tf.keras 2.x's hard_sigmoid (the loader picks it
 * for files tf.keras 2.x wrote). Backwards from the output y: sigmoid dy*y*(1-y),
 * tanh dy*(1-y^2), relu and relu6 dy where 0 < y (< 6), softmax y*(dy - sum(dy*y))
 * per row of channels. Backwards from the input x (kept by the network for every
 * layer's backward), with s = sigmoid(x):
 *   swish         y = x*s                        dx = dy*s*(1 + x*(1-s))
 *   hard_sigmoid  y = min(max(x+3, 0), 6)/6      dx = dy/6 where -3 < x < 3
 *   hard_sig._k2  y = min(max(0.2x+0.5, 0), 1)   dx = dy*0.2 where 0 <= 0.2x+0.5 <= 1
 *   hard_silu     y = x*hard_sigmoid(x)          dx = dy*(hard_sigmoid(x) + x/6 where -3 < x < 3)
 *   gelu          y = x*P(x), P(x) = (1 + erf(x/sqrt 2))/2
 *                                                dx = dy*(P(x) + x*exp(-x^2/2)/sqrt(2 pi))
 *   gelu_tanh     y = x*(1 + t)/2, t = tanh(u), u = sqrt(2/pi)*(x + 0.044715x^3)
 *                                                dx = dy*((1+t)/2 + x*(1-t^2)/2*du/dx)
 *   elu(a)        y = x if x > 0, else a*(exp(x) - 1)      dx = dy (x > 0), dy*a*exp(x)
 *   selu          y = scale*elu(x, alpha), Keras' alpha and scale
 *   leaky_relu(a) y = x if x >= 0, else a*x      dx = dy (x > 0), dy*a
 * elu's alpha (1) and leaky_relu's negative slope (0.2, Keras 3's activation) may be
 * given. The loader also places one after a layer whose activation it does not fuse.
 * Description: Activation(sigmoid), Activation(leaky_relu,0.3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

#ifdef CLT_REFERENCE
#include "ref.h"
#endif

typedef enum act_fn {
  ACT_LINEAR,
  ACT_RELU,
  ACT_RELU6,
  ACT_SIGMOID,
  ACT_TANH,
  ACT_SOFTMAX,
  /* Computed from the input x (actx_forward, actx_backward; in this order, the
   * kernels' XOP_*). */
  ACT_SWISH,
  ACT_HARD_SIGMOID,
  ACT_HARD_SIGMOID_K2,
  ACT_HARD_SILU,
  ACT_GELU,
  ACT_GELU_TANH,
  ACT_ELU,
  ACT_SELU,
  ACT_LEAKY_RELU
} act_fn;
static const char *const act_names[] = {"linear",    "relu",         "relu6",
                                        "sigmoid",   "tanh",         "softmax",
                                        "swish",     "hard_sigmoid", "hard_sigmoid_k2",
                                        "hard_silu", "gelu",         "gelu_tanh",
                                        "elu",       "selu",         "leaky_relu"};
#define NFN (int)(sizeof act_names / sizeof act_names[0])

/* Keras' other names for them. */
static const struct {
  const char *alias, *name;
} act_aliases[] = {{"silu", "swish"}, {"hard_swish", "hard_silu"}};

/* SELU's constants (Keras, Klambauer et al.). */
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946
/* sqrt(2/pi) (gelu_tanh) and 1/sqrt(2 pi) (gelu's density). */
#define SQRT_2_PI 0.79788456080286535587989211986876
#define RSQRT_2PI 0.39894228040143267793994605993438

/* activation.cl's act_forward ops (OP_CLIP, OP_SIGMOID, OP_TANH). */
enum { ACT_OP_CLIP = 0, ACT_OP_SIGMOID = 1, ACT_OP_TANH = 2 };

typedef struct act_hp {
  int fn;   /* act_fn */
  double a; /* elu's alpha, leaky_relu's negative slope */
} act_hp;

static act_fn fn(const clt_layer *l) { return (act_fn)clt_layer_hp(l, act_hp)->fn; }
static double param(const clt_layer *l) { return clt_layer_hp(l, act_hp)->a; }

static int fn_by_name(const char *name) {
  for (size_t i = 0; i < sizeof act_aliases / sizeof act_aliases[0]; i++) {
    if (strcmp(name, act_aliases[i].alias) == 0) name = act_aliases[i].name;
  }
  for (int i = 0; i < NFN; i++) {
    if (strcmp(name, act_names[i]) == 0) return i;
  }
  return -1;
}

/* The parameter's default: elu's alpha 1, Keras 3's leaky_relu slope 0.2. */
static double default_param(act_fn f) { return f == ACT_LEAKY_RELU ? 0.2 : 1.0; }

static int has_param(act_fn f) { return f == ACT_ELU || f == ACT_LEAKY_RELU; }

/* "name" or "name,a" (elu, leaky_relu). */
static int act_parse(clt_layer *l, const char *args, clt_err *e) {
  char name[32];
  const char *comma = strchr(args, ',');
  const size_t len = comma ? (size_t)(comma - args) : strlen(args);
  int f = -1;
  if (len < sizeof name) {
    memcpy(name, args, len);
    name[len] = '\0';
    f = fn_by_name(name);
  }
  double a = f >= 0 ? default_param((act_fn)f) : 0.0;
  if (f >= 0 && comma) {
    char *end;
    a = strtod(comma + 1, &end);
    if (!has_param((act_fn)f) || end == comma + 1 || *end != '\0' || !isfinite(a) ||
        (f == ACT_ELU && a <= 0.0)) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: Activation(%s): only elu (alpha > 0) and leaky_relu take a number",
                      l->name, args);
    }
  }
  if (f < 0) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: Activation(%s): expected Activation(relu|relu6|sigmoid|tanh|softmax|"
                    "linear|swish|silu|hard_sigmoid|hard_sigmoid_k2|hard_silu|hard_swish|gelu|"
                    "gelu_tanh|elu[,alpha]|selu|leaky_relu[,slope])",
                    l->name, args);
  }
  clt_layer_hp(l, act_hp)->fn = f;
  clt_layer_hp(l, act_hp)->a = a;
  return CLT_OK;
}

static void act_describe(const clt_layer *l, char *buf, size_t size) {
  const act_fn f = fn(l);
  if (has_param(f) && param(l) != default_param(f))
    snprintf(buf, size, "Activation(%s,%.9g)", act_names[f], param(l));
  else snprintf(buf, size, "Activation(%s)", act_names[f]);
}

static int act_setup(clt_layer *l, const clt_shape *in, clt_err *e) {
  if (in[0].h < 1 || in[0].w < 1 || in[0].c < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad input shape %dx%dx%d", l->name, in[0].h, in[0].w,
                    in[0].c);
  }
  l->in = l->out = in[0];
  l->nparams = 0;
  return CLT_OK;
}

/* The kernels of each function: forward, backward. */
static void kernel_names(act_fn f, const char *names[2]) {
  switch (f) {
    case ACT_LINEAR:
      names[0] = names[1] = "scale_shift";
      break;
    case ACT_RELU:
      names[0] = "relu_forward", names[1] = "relu_backward";
      break;
    case ACT_SOFTMAX:
      names[0] = "softmax_forward", names[1] = "softmax_backward";
      break;
    case ACT_RELU6:
    case ACT_SIGMOID:
    case ACT_TANH:
      names[0] = "act_forward", names[1] = "act_backward";
      break;
    default:
      names[0] = "actx_forward", names[1] = "actx_backward";
  }
}

static int act_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                       clt_err *e) {
  (void)f;
  (void)max_batch;
  const char *names[2];
  kernel_names(fn(l), names);
  return clt_layer_build_kernels(r, "activation.cl", names, 2, e);
}

/* act_forward's op and clip for the elementwise functions. */
static int kernel_op(act_fn f, float *hi) {
  *hi = 6.0f;
  return f == ACT_SIGMOID ? ACT_OP_SIGMOID : f == ACT_TANH ? ACT_OP_TANH : ACT_OP_CLIP;
}

/* Runs activation.cl's `name`: over n floats (elementwise), or over the rows of C
 * channels (softmax). */
static int run(const clt_layer *l, const clt_layer_io *io, int backward, const clt_karg *args,
               int nargs, clt_err *e) {
  const char *names[2];
  kernel_names(fn(l), names);
  const char *name = names[backward];
  cl_kernel k;
  int status = clt_replica_kernel(io->replica, "activation.cl", "", name, &k, e);
  if (status) return clt_wrap(e, "%s", l->name);
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w;
  if (fn(l) == ACT_SOFTMAX) status = clt_launch_groups(io->replica, k, name, args, nargs, rows, e);
  else status = clt_launch_elems(io->replica, k, name, args, nargs, rows * l->out.c, e);
  return status ? clt_wrap(e, "%s", l->name) : CLT_OK;
}

static int act_forward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  const int rows = io->batch * l->out.h * l->out.w, C = l->out.c, n = rows * C;
  float hi, one = 1.0f, zero = 0.0f;
  int op = kernel_op(fn(l), &hi);
  switch (fn(l)) {
    case ACT_LINEAR: {
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n), CLT_ARG(one), CLT_ARG(zero)};
      return run(l, io, 0, args, 5, e);
    }
    case ACT_RELU: {
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n)};
      return run(l, io, 0, args, 3, e);
    }
    case ACT_SOFTMAX: {
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(rows), CLT_ARG(C)};
      return run(l, io, 0, args, 4, e);
    }
    case ACT_RELU6:
    case ACT_SIGMOID:
    case ACT_TANH: {
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n), CLT_ARG(op), CLT_ARG(hi)};
      return run(l, io, 0, args, 5, e);
    }
    default: {
      const int xop = (int)fn(l) - ACT_SWISH;
      const float a = (float)param(l);
      clt_karg args[] = {CLT_ARG(io->x), CLT_ARG(io->y), CLT_ARG(n), CLT_ARG(xop), CLT_ARG(a)};
      return run(l, io, 0, args, 5, e);
    }
  }
}

static int act_backward(const clt_layer *l, const clt_layer_io *io, clt_err *e) {
  if (!io->dx) return CLT_OK;
  const int rows = io->batch * l->out.h * l->out.w, C = l->out.c, n = rows * C;
  float hi, one = 1.0f, zero = 0.0f;
  int op = kernel_op(fn(l), &hi);
  switch (fn(l)) {
    case ACT_LINEAR: {
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->dx), CLT_ARG(n), CLT_ARG(one), CLT_ARG(zero)};
      return run(l, io, 1, args, 5, e);
    }
    case ACT_RELU: {
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx), CLT_ARG(n)};
      return run(l, io, 1, args, 4, e);
    }
    case ACT_SOFTMAX: {
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx), CLT_ARG(rows),
                         CLT_ARG(C)};
      return run(l, io, 1, args, 5, e);
    }
    case ACT_RELU6:
    case ACT_SIGMOID:
    case ACT_TANH: {
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->y), CLT_ARG(io->dx),
                         CLT_ARG(n),      CLT_ARG(op),    CLT_ARG(hi)};
      return run(l, io, 1, args, 6, e);
    }
    default: {
      const int xop = (int)fn(l) - ACT_SWISH;
      const float a = (float)param(l);
      clt_karg args[] = {CLT_ARG(io->dy), CLT_ARG(io->x), CLT_ARG(io->dx),
                         CLT_ARG(n),      CLT_ARG(xop),   CLT_ARG(a)};
      return run(l, io, 1, args, 6, e);
    }
  }
}

/* Keras' LeakyReLU(negative_slope; alpha in tf.keras 2.x) and ELU(alpha), which
 * the loader runs as this kind. */
static int standalone_from_keras(clt_layer *l, const clt_keras_config *c, clt_err *e) {
  act_hp *h = clt_layer_hp(l, act_hp);
  if (strcmp(clt_kc_class(c), "ELU") == 0) {
    h->fn = ACT_ELU;
    if (clt_kc_double(c, "alpha", 1.0, &h->a, e)) return CLT_ERR_FORMAT;
    if (!(h->a > 0.0)) return clt_kc_fail(c, e, "alpha %g is not supported (only > 0)", h->a);
    return CLT_OK;
  }
  /* Keras 3's layer default is 0.3, as tf.keras 2.x's alpha. */
  h->fn = ACT_LEAKY_RELU;
  const char *key = clt_kc_has(c, "alpha") ? "alpha" : "negative_slope";
  if (clt_kc_double(c, key, 0.3, &h->a, e)) return CLT_ERR_FORMAT;
  if (!isfinite(h->a)) return clt_kc_fail(c, e, "%s is not finite", key);
  return CLT_OK;
}

static int act_from_keras(clt_layer *l, const clt_keras_config *c, char *activation, size_t size,
                          clt_err *e) {
  char name[16];
  if (size) activation[0] = '\0';
  if (strcmp(clt_kc_class(c), "Activation") != 0) return standalone_from_keras(l, c, e);
  if (clt_kc_activation(c, name, sizeof name, e)) return CLT_ERR_FORMAT;
  const int f = fn_by_name(name);
  if (f < 0) return clt_kc_fail(c, e, "activation '%s' is not supported", name);
  clt_layer_hp(l, act_hp)->fn = f;
  clt_layer_hp(l, act_hp)->a = default_param((act_fn)f);
  return CLT_OK;
}

/* Clip(x, 0, hi) (ONNX opset 13 takes the bounds as scalar inputs). */
static int onnx_clip(const clt_layer *l, clt_onnx *g, const char *in, float hi, const char *out,
                     clt_err *e) {
  const float lo = 0.0f;
  const int64_t none[1] = {0};
  const char *ins[3] = {in, clt_onnx_name(g, l, "clip_min"), clt_onnx_name(g, l, "clip_max")};
  int status = clt_onnx_tensor(g, ins[1], 0, none, &lo, e);
  if (!status) status = clt_onnx_tensor(g, ins[2], 0, none, &hi, e);
  if (!status) status = clt_onnx_node(g, "Clip", ins, 3, out, NULL, 0, e);
  return status;
}

/* A float scalar initializer "<layer>/<suffix>" of value v; its name. */
static const char *onnx_scalar(const clt_layer *l, clt_onnx *g, const char *suffix, float v,
                               int *status, clt_err *e) {
  const int64_t none[1] = {0};
  const char *name = clt_onnx_name(g, l, suffix);
  if (!*status) *status = clt_onnx_tensor(g, name, 0, none, &v, e);
  return name;
}

/* A binary node op(a, b) to "<layer>/<suffix>" (or to out when suffix is NULL). */
static const char *onnx_binary(const clt_layer *l, clt_onnx *g, const char *op, const char *a,
                               const char *b, const char *suffix, const char *out, int *status,
                               clt_err *e) {
  const char *ins[2] = {a, b};
  const char *name = suffix ? clt_onnx_name(g, l, suffix) : out;
  if (!*status) *status = clt_onnx_node(g, op, ins, 2, name, NULL, 0, e);
  return name;
}

/* x * gate(x), gate one ONNX node of x (Sigmoid; HardSigmoid(1/6, 0.5)). */
static int onnx_gated(const clt_layer *l, clt_onnx *g, const char *x, const char *gate,
                      const clt_onnx_attr *attrs, int nattrs, const char *out, clt_err *e) {
  const char *s = clt_onnx_name(g, l, "gate");
  int status = clt_onnx_node(g, gate, &x, 1, s, attrs, nattrs, e);
  (void)onnx_binary(l, g, "Mul", x, s, NULL, out, &status, e);
  return status;
}

/* GELU in opset 13's operators: x*(1 + Erf(x/sqrt 2))/2, or the tanh form
 * x*(1 + Tanh(sqrt(2/pi)*(x + 0.044715*x^3)))/2. */
static int onnx_gelu(const clt_layer *l, clt_onnx *g, const char *x, int tanh_form, const char *out,
                     clt_err *e) {
  int status = CLT_OK;
  const char *inner;
  if (tanh_form) {
    const char *x2 = onnx_binary(l, g, "Mul", x, x, "x2", NULL, &status, e);
    const char *x3 = onnx_binary(l, g, "Mul", x2, x, "x3", NULL, &status, e);
    const char *k = onnx_scalar(l, g, "k", 0.044715f, &status, e);
    const char *kx3 = onnx_binary(l, g, "Mul", x3, k, "kx3", NULL, &status, e);
    const char *u0 = onnx_binary(l, g, "Add", x, kx3, "u0", NULL, &status, e);
    const char *c = onnx_scalar(l, g, "c", (float)SQRT_2_PI, &status, e);
    const char *u = onnx_binary(l, g, "Mul", u0, c, "u", NULL, &status, e);
    inner = clt_onnx_name(g, l, "tanh");
    if (!status) status = clt_onnx_node(g, "Tanh", &u, 1, inner, NULL, 0, e);
  } else {
    const char *r = onnx_scalar(l, g, "rsqrt2", (float)(1.0 / sqrt(2.0)), &status, e);
    const char *u = onnx_binary(l, g, "Mul", x, r, "u", NULL, &status, e);
    inner = clt_onnx_name(g, l, "erf");
    if (!status) status = clt_onnx_node(g, "Erf", &u, 1, inner, NULL, 0, e);
  }
  const char *one = onnx_scalar(l, g, "one", 1.0f, &status, e);
  const char *half = onnx_scalar(l, g, "half", 0.5f, &status, e);
  const char *p1 = onnx_binary(l, g, "Add", inner, one, "p1", NULL, &status, e);
  const char *hx = onnx_binary(l, g, "Mul", x, half, "hx", NULL, &status, e);
  (void)onnx_binary(l, g, "Mul", hx, p1, NULL, out, &status, e);
  return status;
}

static int act_to_onnx(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *output, clt_err *e) {
  switch (fn(l)) {
    case ACT_LINEAR:
      return clt_onnx_node(g, "Identity", inputs, 1, output, NULL, 0, e);
    case ACT_RELU:
      return clt_onnx_node(g, "Relu", inputs, 1, output, NULL, 0, e);
    case ACT_RELU6:
      return onnx_clip(l, g, inputs[0], 6.0f, output, e);
    case ACT_SIGMOID:
      return clt_onnx_node(g, "Sigmoid", inputs, 1, output, NULL, 0, e);
    case ACT_TANH:
      return clt_onnx_node(g, "Tanh", inputs, 1, output, NULL, 0, e);
    case ACT_SOFTMAX: {
      /* Channels are axis 1 in NCHW and in (N, C). */
      const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
      return clt_onnx_node(g, "Softmax", inputs, 1, output, &axis, 1, e);
    }
    case ACT_SWISH:
      return onnx_gated(l, g, inputs[0], "Sigmoid", NULL, 0, output, e);
    case ACT_HARD_SIGMOID:
    case ACT_HARD_SIGMOID_K2: {
      const clt_onnx_attr ab[2] = {CLT_ONNX_FLOAT("alpha",
                                                  fn(l) == ACT_HARD_SIGMOID ? 1.0f / 6.0f : 0.2f),
                                   CLT_ONNX_FLOAT("beta", 0.5f)};
      return clt_onnx_node(g, "HardSigmoid", inputs, 1, output, ab, 2, e);
    }
    case ACT_HARD_SILU: {
      const clt_onnx_attr ab[2] = {CLT_ONNX_FLOAT("alpha", 1.0f / 6.0f),
                                   CLT_ONNX_FLOAT("beta", 0.5f)};
      return onnx_gated(l, g, inputs[0], "HardSigmoid", ab, 2, output, e);
    }
    case ACT_GELU:
    case ACT_GELU_TANH:
      return onnx_gelu(l, g, inputs[0], fn(l) == ACT_GELU_TANH, output, e);
    case ACT_ELU: {
      const clt_onnx_attr alpha = CLT_ONNX_FLOAT("alpha", (float)param(l));
      return clt_onnx_node(g, "Elu", inputs, 1, output, &alpha, 1, e);
    }
    case ACT_SELU: {
      const clt_onnx_attr ag[2] = {CLT_ONNX_FLOAT("alpha", (float)SELU_ALPHA),
                                   CLT_ONNX_FLOAT("gamma", (float)SELU_SCALE)};
      return clt_onnx_node(g, "Selu", inputs, 1, output, ag, 2, e);
    }
    case ACT_LEAKY_RELU: {
      const clt_onnx_attr alpha = CLT_ONNX_FLOAT("alpha", (float)param(l));
      return clt_onnx_node(g, "LeakyRelu", inputs, 1, output, &alpha, 1, e);
    }
  }
  return clt_fail(e, CLT_ERR_INTERNAL, "%s: unknown activation", l->name);
}

#ifdef CLT_REFERENCE
/* The functions computed from x, and their derivatives, in doubles. */
static double ref_gelu_tanh_u(double x) { return SQRT_2_PI * (x + 0.044715 * x * x * x); }

static double ref_actx(act_fn f, double a, double x) {
  const double s = 1.0 / (1.0 + exp(-x)), hs = fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
  switch (f) {
    case ACT_SWISH:
      return x * s;
    case ACT_HARD_SIGMOID:
      return hs;
    case ACT_HARD_SIGMOID_K2:
      return fmin(fmax(0.2 * x + 0.5, 0.0), 1.0);
    case ACT_HARD_SILU:
      return x * hs;
    case ACT_GELU:
      return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case ACT_GELU_TANH:
      return 0.5 * x * (1.0 + tanh(ref_gelu_tanh_u(x)));
    case ACT_ELU:
      return x > 0.0 ? x : a * expm1(x);
    case ACT_SELU:
      return SELU_SCALE * (x > 0.0 ? x : SELU_ALPHA * expm1(x));
    case ACT_LEAKY_RELU:
      return x >= 0.0 ? x : a * x;
    default:
      return 0.0;
  }
}

static double ref_dactx(act_fn f, double a, double x) {
  const double s = 1.0 / (1.0 + exp(-x)), inside = x > -3.0 && x < 3.0;
  switch (f) {
    case ACT_SWISH:
      return s * (1.0 + x * (1.0 - s));
    case ACT_HARD_SIGMOID:
      return inside / 6.0;
    case ACT_HARD_SIGMOID_K2: {
      const double v = 0.2 * x + 0.5;
      return v >= 0.0 && v <= 1.0 ? 0.2 : 0.0;
    }
    case ACT_HARD_SILU:
      return fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0 + x * inside / 6.0;
    case ACT_GELU:
      return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) * RSQRT_2PI;
    case ACT_GELU_TANH: {
      const double t = tanh(ref_gelu_tanh_u(x));
      const double du = SQRT_2_PI * (1.0 + 3.0 * 0.044715 * x * x);
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
    }
    case ACT_ELU:
      return x > 0.0 ? 1.0 : a * exp(x);
    case ACT_SELU:
      return SELU_SCALE * (x > 0.0 ? 1.0 : SELU_ALPHA * exp(x));
    case ACT_LEAKY_RELU:
      return x > 0.0 ? 1.0 : a;
    default:
      return 0.0;
  }
}

static void act_ref_forward(const clt_layer *l, const clt_ref_io *io) {
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w, n = rows * l->out.c;
  switch (fn(l)) {
    case ACT_LINEAR:
      memcpy(io->y, io->x, n * sizeof *io->y);
      break;
    case ACT_RELU:
      ref_relu_forward(io->x, n, io->y);
      break;
    case ACT_RELU6:
      ref_relu_clip_forward(io->x, n, 6.0, io->y);
      break;
    case ACT_SIGMOID:
      ref_sigmoid_forward(io->x, n, io->y);
      break;
    case ACT_TANH:
      ref_tanh_forward(io->x, n, io->y);
      break;
    case ACT_SOFTMAX:
      ref_softmax_forward(io->x, rows, l->out.c, io->y);
      break;
    default:
      for (size_t i = 0; i < n; i++) io->y[i] = ref_actx(fn(l), param(l), io->x[i]);
  }
}

static void act_ref_backward(const clt_layer *l, const clt_ref_io *io) {
  if (!io->dx) return;
  const size_t rows = (size_t)io->batch * l->out.h * l->out.w, n = rows * l->out.c;
  switch (fn(l)) {
    case ACT_LINEAR:
      memcpy(io->dx, io->dy, n * sizeof *io->dx);
      break;
    case ACT_RELU:
      ref_relu_backward(io->y, io->dy, n, io->dx);
      break;
    case ACT_RELU6:
      ref_relu_clip_backward(io->y, io->dy, n, 6.0, io->dx);
      break;
    case ACT_SIGMOID:
      ref_sigmoid_backward(io->y, io->dy, n, io->dx);
      break;
    case ACT_TANH:
      ref_tanh_backward(io->y, io->dy, n, io->dx);
      break;
    case ACT_SOFTMAX:
      ref_softmax_backward(io->y, io->dy, rows, l->out.c, io->dx);
      break;
    default:
      for (size_t i = 0; i < n; i++) io->dx[i] = io->dy[i] * ref_dactx(fn(l), param(l), io->x[i]);
  }
}
#endif

static const char *const act_sources[] = {"activation.cl", NULL};

const clt_layer_ops clt_activation_ops = {
    .kind = "Activation",
    .ninputs = 1,
    .parse = act_parse,
    .describe = act_describe,
    .setup = act_setup,
    .prepare = act_prepare,
    .sources = act_sources,
    .forward = act_forward,
    .backward = act_backward,
    .from_keras = act_from_keras,
    .to_onnx = act_to_onnx,
    .ref_forward = CLT_REF(act_ref_forward),
    .ref_backward = CLT_REF(act_ref_backward),
};
