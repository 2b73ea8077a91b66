/* What every layer kind shares: the lookup of kinds by name, the description
 * entries "name=Kind(args)", and the bias-gradient kernels (ReLU backward fused in);
 * and what families of kinds share: the convolutions' hyper-parameters, window and
 * ONNX Conv, the global poolings', the GEMM layers' bias and fused ReLU. */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

const clt_layer_ops *clt_layer_kind(const char *kind) {
  for (int i = 0; clt_layer_kinds[i]; i++) {
    if (strcmp(clt_layer_kinds[i]->kind, kind) == 0) return clt_layer_kinds[i];
  }
  return NULL;
}

/* The kinds' names, for errors: "Add, BatchNormalization, ...". */
static void kind_names(char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; clt_layer_kinds[i] && used < size; i++) {
    used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                             clt_layer_kinds[i]->kind);
  }
}

int clt_layer_init(clt_layer *l, const char *entry, clt_err *e) {
  memset(l, 0, sizeof *l);
  l->ninputs = 1;
  l->inputs[0] = l->inputs[1] = -1;
  const char *eq = strchr(entry, '=');
  const size_t name_len = eq ? (size_t)(eq - entry) : 0;
  if (name_len == 0 || name_len >= sizeof l->name) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "layer '%s': expected name=Kind(arguments), with a name of 1 to %zu "
                    "characters",
                    entry, sizeof l->name - 1);
  }
  memcpy(l->name, entry, name_len);
  const char *kind = eq + 1, *open = strchr(kind, '(');
  char kname[48], args[128] = "";
  const size_t kind_len = open ? (size_t)(open - kind) : strlen(kind);
  if (kind_len == 0 || kind_len >= sizeof kname) {
    return clt_fail(e, CLT_ERR_FORMAT, "layer %s: bad kind in '%s'", l->name, entry);
  }
  memcpy(kname, kind, kind_len);
  kname[kind_len] = '\0';
  if (open) {
    const size_t args_len = strlen(open + 1);
    if (args_len == 0 || open[args_len] != ')' || args_len > sizeof args) {
      return clt_fail(e, CLT_ERR_FORMAT, "layer %s: bad arguments in '%s'", l->name, entry);
    }
    memcpy(args, open + 1, args_len - 1);
    args[args_len - 1] = '\0';
  }
  if (!(l->ops = clt_layer_kind(kname))) {
    char known[512];
    kind_names(known, sizeof known);
    return clt_fail(e, CLT_ERR_FORMAT, "layer %s: unknown kind %s (cltrain knows %s)", l->name,
                    kname, known);
  }
  l->ninputs = l->ops->ninputs;
  return l->ops->parse(l, args, e);
}

int clt_layer_build_kernels(clt_replica *r, const char *file, const char *const *names, int n,
                            clt_err *e) {
  cl_kernel k;
  int status = CLT_OK;
  for (int i = 0; i < n && !status; i++) status = clt_replica_kernel(r, file, "", names[i], &k, e);
  return status;
}

size_t clt_layer_scratch_floats(const clt_layer *l, int batch) {
  return l->ops->scratch_floats ? l->ops->scratch_floats(l, batch) : 0;
}

int clt_layer_prepare(const clt_layer *l, clt_replica *r, int max_batch, const clt_fusion *f,
                      clt_err *e) {
  const clt_fusion alone = {0};
  return l->ops->prepare ? l->ops->prepare(l, r, max_batch, f ? f : &alone, e) : CLT_OK;
}

unsigned clt_layer_fusions(const clt_layer *l) { return l->ops->fusions ? l->ops->fusions(l) : 0; }

size_t clt_layer_state_floats(const clt_layer *l) {
  return l->ops->state_floats ? l->ops->state_floats(l) : 0;
}

int clt_layer_parse_none(clt_layer *l, const char *args, clt_err *e) {
  if (args[0] == '\0') return CLT_OK;
  return clt_fail(e, CLT_ERR_FORMAT, "%s: %s takes no arguments, got (%s)", l->name, l->ops->kind,
                  args);
}

void clt_layer_describe_none(const clt_layer *l, char *buf, size_t size) {
  snprintf(buf, size, "%s", l->ops->kind);
}

int clt_parse_relu_tail(const char *rest, int *relu) {
  *relu = 0;
  if (*rest == ',') rest++;
  else if (*rest == '\0') return 0;
  if (strcmp(rest, "relu") != 0) return -1;
  *relu = 1;
  return 0;
}

static const clt_conv_hp *conv_hp(const clt_layer *l) { return clt_layer_hp(l, clt_conv_hp); }

int clt_conv_parse(clt_layer *l, const char *args, clt_conv_hp kind, clt_err *e) {
  clt_conv_hp *h = clt_layer_hp(l, clt_conv_hp);
  char padding[8] = "";
  int used = 0, n = 0, ok;
  *h = kind;
  h->mult = kind.has_mult;
  h->groups = 1;
  if (kind.has_filters) {
    ok = sscanf(args, "%d,%dx%d,s%d,%7[a-z]%n", &h->filters, &h->kernel_h, &h->kernel_w, &h->stride,
                padding, &used) == 5;
  } else {
    ok = sscanf(args, "%dx%d,s%d,%7[a-z]%n", &h->kernel_h, &h->kernel_w, &h->stride, padding,
                &used) == 4;
  }
  if (ok) {
    if (kind.has_mult && sscanf(args + used, ",m%d%n", &h->mult, &n) == 1) used += n;
    if (kind.has_groups && sscanf(args + used, ",g%d%n", &h->groups, &n) == 1) used += n;
    if (strncmp(args + used, ",nobias", 7) == 0) {
      h->nobias = 1;
      used += 7;
    }
  }
  if (!ok || (strcmp(padding, "same") != 0 && strcmp(padding, "valid") != 0) ||
      clt_parse_relu_tail(args + used, &h->relu) != 0) {
    const char *kind_name = l->ops->kind;
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: %s(%s): expected %s(%sKHxKW,sSTRIDE,same|valid%s%s[,nobias][,relu])",
                    l->name, kind_name, args, kind_name, kind.has_filters ? "filters," : "",
                    kind.has_mult ? "[,mMULTIPLIER]" : "", kind.has_groups ? "[,gGROUPS]" : "");
  }
  h->pad_same = padding[0] == 's';
  return CLT_OK;
}

void clt_conv_describe(const clt_layer *l, char *buf, size_t size) {
  const clt_conv_hp *h = conv_hp(l);
  char filters[16] = "", mult[16] = "", groups[16] = "";
  if (h->has_filters) snprintf(filters, sizeof filters, "%d,", h->filters);
  if (h->has_mult && h->mult != 1) snprintf(mult, sizeof mult, ",m%d", h->mult);
  if (h->has_groups && h->groups > 1) snprintf(groups, sizeof groups, ",g%d", h->groups);
  snprintf(buf, size, "%s(%s%dx%d,s%d,%s%s%s%s%s)", l->ops->kind, filters, h->kernel_h, h->kernel_w,
           h->stride, h->pad_same ? "same" : "valid", mult, groups, h->nobias ? ",nobias" : "",
           h->relu ? ",relu" : "");
}

int clt_conv_window(clt_layer *l, clt_shape in, clt_err *e) {
  const clt_conv_hp *h = conv_hp(l);
  const int kh = h->kernel_h, kw = h->kernel_w, s = h->stride;
  const clt_pad p = l->pad;
  if (p.top < 0 || p.bottom < 0 || p.left < 0 || p.right < 0)
    return clt_fail(e, CLT_ERR_ARG, "%s: negative padding", l->name);
  if (h->pad_same && clt_pad_any(p)) {
    return clt_fail(e, CLT_ERR_ARG, "%s: 'same' padding and a folded ZeroPadding2D %s", l->name,
                    l->pad_name);
  }
  l->in = in;
  if (h->pad_same) {
    /* TensorFlow's 'same': out = ceil(in / s), the extra row or column after. */
    l->out.h = (in.h + s - 1) / s;
    l->out.w = (in.w + s - 1) / s;
    const int pad_h = (l->out.h - 1) * s + kh - in.h, pad_w = (l->out.w - 1) * s + kw - in.w;
    l->pad_top = pad_h > 0 ? pad_h / 2 : 0;
    l->pad_left = pad_w > 0 ? pad_w / 2 : 0;
    return CLT_OK;
  }
  const int ph = in.h + p.top + p.bottom, pw = in.w + p.left + p.right;
  if (ph < kh || pw < kw) {
    return clt_fail(e, CLT_ERR_ARG, "%s: %sinput %dx%d is smaller than its %dx%d kernel", l->name,
                    clt_pad_any(p) ? "padded " : "", ph, pw, kh, kw);
  }
  l->out.h = (ph - kh) / s + 1;
  l->out.w = (pw - kw) / s + 1;
  l->pad_top = p.top;
  l->pad_left = p.left;
  return CLT_OK;
}

int clt_conv_from_keras(clt_layer *l, const clt_keras_config *c, clt_conv_hp kind, char *activation,
                        size_t size, clt_err *e) {
  clt_conv_hp *o = clt_layer_hp(l, clt_conv_hp);
  int k[2] = {0, 0}, s[2] = {1, 1}, d[2] = {1, 1}, groups = 1, use_bias = 1, lora = 0;
  char padding[16], format[32], act[16];
  *o = kind;
  int status = o->has_filters ? clt_kc_int(c, "filters", 0, &o->filters, e) : CLT_OK;
  if (!status) status = clt_kc_ints(c, "kernel_size", 2, 0, k, e);
  if (!status) status = clt_kc_ints(c, "strides", 2, 1, s, e);
  if (!status) status = clt_kc_string(c, "padding", "valid", padding, sizeof padding, e);
  if (!status) status = clt_kc_string(c, "data_format", "channels_last", format, sizeof format, e);
  if (!status) status = clt_kc_ints(c, "dilation_rate", 2, 1, d, e);
  if (!status) status = clt_kc_int(c, "groups", 1, &groups, e);
  if (!status && o->has_mult) status = clt_kc_int(c, "depth_multiplier", 1, &o->mult, e);
  if (!status) status = clt_kc_bool(c, "use_bias", 1, &use_bias, e);
  if (!status && o->has_lora) status = clt_kc_int(c, "lora_rank", 0, &lora, e);
  if (!status) status = clt_kc_activation(c, act, sizeof act, e);
  /* Keras 3's quantized layers (null when not quantized). */
  if (!status && clt_kc_has(c, "quantization_config"))
    status = clt_kc_fail(c, e, "quantization_config is not supported (only none)");
  if (status) return status;
  if (o->has_filters && o->filters < 1)
    return clt_kc_fail(c, e, "filters: expected a positive integer");
  if (k[0] < 1 || k[1] < 1) return clt_kc_fail(c, e, "kernel_size %dx%d", k[0], k[1]);
  if (s[0] < 1 || s[0] != s[1])
    return clt_kc_fail(c, e, "strides (%d, %d) are not supported (only equal ones)", s[0], s[1]);
  if (strcmp(padding, "same") != 0 && strcmp(padding, "valid") != 0)
    return clt_kc_fail(c, e, "padding '%s' is not supported (only same, valid)", padding);
  if (strcmp(format, "channels_last") != 0)
    return clt_kc_fail(c, e, "data_format %s is not supported (only channels_last)", format);
  if (d[0] != 1 || d[1] != 1)
    return clt_kc_fail(c, e, "dilation_rate (%d, %d) is not supported (only 1)", d[0], d[1]);
  if (groups < 1 || (groups != 1 && !o->has_groups))
    return clt_kc_fail(c, e, "groups %d is not supported (only 1)", groups);
  o->groups = groups;
  if (o->has_mult && o->mult < 1)
    return clt_kc_fail(c, e, "depth_multiplier %d: must be positive", o->mult);
  if (lora) return clt_kc_fail(c, e, "lora_rank %d is not supported (only none)", lora);
  o->kernel_h = k[0];
  o->kernel_w = k[1];
  o->stride = s[0];
  o->pad_same = padding[0] == 's';
  o->nobias = !use_bias;
  o->relu = strcmp(act, "relu") == 0;
  snprintf(activation, size, "%s", o->relu || strcmp(act, "linear") == 0 ? "" : act);
  return CLT_OK;
}

/* The padding after the last row (column) a window of `out` windows reaches, ONNX's
 * end pad: rows that floor leaves unread are not padded. */
static int end_pad(int in, int out, int k, int s, int begin) {
  const int end = (out - 1) * s + k - in - begin;
  return end > 0 ? end : 0;
}

int clt_onnx_conv(const clt_layer *l, clt_onnx *g, const char *input, int kernel, const char *name,
                  const int64_t dims[4], int bias, int stride, int group, int relu,
                  const char *output, clt_err *e) {
  const int co = (int)dims[0], ci = (int)dims[1], kh = (int)dims[2], kw = (int)dims[3];
  const float *hwio = clt_onnx_param(g, l, kernel);
  float *oihw = malloc((size_t)kh * kw * ci * co * sizeof *oihw);
  if (!hwio || !oihw) {
    free(oihw);
    return clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory for the ONNX kernel", l->name);
  }
  for (int y = 0; y < kh; y++)
    for (int x = 0; x < kw; x++)
      for (int i = 0; i < ci; i++)
        for (int o = 0; o < co; o++)
          oihw[(((size_t)o * ci + i) * kh + y) * kw + x] =
              hwio[(((size_t)y * kw + x) * ci + i) * co + o];
  const char *names[3] = {input, clt_onnx_name(g, l, name), ""};
  int status = clt_onnx_tensor(g, names[1], 4, dims, oihw, e);
  free(oihw);
  if (!status && clt_onnx_rank(g, input) == 2) {
    /* A (N, C) input (a global pooling's, 1x1xC here) as (N, C, 1, 1). */
    const int64_t one[1] = {4}, shape[4] = {0, l->in.c, 1, 1};
    const char *rs[2] = {input, clt_onnx_name(g, l, "nc11_shape")};
    names[0] = clt_onnx_name(g, l, "nc11");
    status = clt_onnx_tensor_i64(g, rs[1], 1, one, shape, e);
    if (!status) status = clt_onnx_node(g, "Reshape", rs, 2, names[0], NULL, 0, e);
    if (!status) clt_onnx_set_rank(g, names[0], 4);
  }
  if (!status && bias >= 0) {
    names[2] = clt_onnx_name(g, l, "bias");
    status = clt_onnx_tensor(g, names[2], 1, dims, clt_onnx_param(g, l, bias), e);
  }
  const clt_onnx_attr attrs[] = {CLT_ONNX_INTS("kernel_shape", 2, kh, kw),
                                 CLT_ONNX_INTS("strides", 2, stride, stride),
                                 CLT_ONNX_INTS("pads", 4, l->pad_top, l->pad_left,
                                               end_pad(l->in.h, l->out.h, kh, stride, l->pad_top),
                                               end_pad(l->in.w, l->out.w, kw, stride, l->pad_left)),
                                 CLT_ONNX_INT("group", group)};
  const char *conv_out = relu ? clt_onnx_name(g, l, "conv") : output;
  if (!status) {
    status = clt_onnx_node(g, "Conv", names, bias >= 0 ? 3 : 2, conv_out, attrs, stride ? 4 : 1, e);
  }
  if (!status && relu) status = clt_onnx_node(g, "Relu", &conv_out, 1, output, NULL, 0, e);
  return status;
}

size_t clt_bias_grad_scratch(int rows, int cols) {
  return (size_t)((rows + CLT_BIAS_GRAD_ROWS_PER_BLOCK - 1) / CLT_BIAS_GRAD_ROWS_PER_BLOCK) * cols;
}

int clt_bias_grad_final(const clt_layer_io *io, cl_mem scratch, size_t scratch_offset, int rows,
                        int cols, size_t grad_offset, clt_err *e) {
  cl_kernel kf;
  int status = clt_replica_kernel(io->replica, "bias.cl", "", "bias_grad_final", &kf, e);
  if (status) return status;
  int part = (int)scratch_offset, off = (int)grad_offset;
  int nblocks = (rows + CLT_BIAS_GRAD_ROWS_PER_BLOCK - 1) / CLT_BIAS_GRAD_ROWS_PER_BLOCK;
  clt_karg fargs[] = {CLT_ARG(scratch), CLT_ARG(part),      CLT_ARG(nblocks),
                      CLT_ARG(cols),    CLT_ARG(io->grads), CLT_ARG(off)};
  return clt_launch_columns(io->replica, kf, "bias_grad_final", fargs, 6, (size_t)cols, e);
}

int clt_bias_grad(const clt_layer_io *io, cl_mem dy, cl_mem relu_y, cl_mem scratch,
                  size_t scratch_offset, int rows, int cols, size_t grad_offset, clt_err *e) {
  cl_kernel kp;
  int status = clt_replica_kernel(io->replica, "bias.cl", "", "bias_grad_partial", &kp, e);
  if (status) return status;
  int per_block = CLT_BIAS_GRAD_ROWS_PER_BLOCK;
  int nblocks = (rows + per_block - 1) / per_block;
  int part = (int)scratch_offset, relu = relu_y != NULL;
  cl_mem y = relu ? relu_y : dy; /* any valid buffer when unused */
  clt_karg pargs[] = {CLT_ARG(dy),   CLT_ARG(y),         CLT_ARG(relu),    CLT_ARG(rows),
                      CLT_ARG(cols), CLT_ARG(per_block), CLT_ARG(scratch), CLT_ARG(part)};
  /* CPU: a work-item per (CG columns, block); GPU: (LC, LR) groups per block. */
  status = clt_launch_row_blocks(io->replica, kp,
                                 relu ? "relu and bias gradient" : "bias_grad_partial", pargs, 8,
                                 (size_t)cols, (size_t)nblocks, e);
  if (status) return status;
  return clt_bias_grad_final(io, scratch, scratch_offset, rows, cols, grad_offset, e);
}

int clt_global_pool_setup(clt_layer *l, const clt_shape *ins, clt_err *e) {
  const clt_shape in = ins[0];
  if (in.h < 1 || in.w < 1 || in.c < 1) {
    return clt_fail(e, CLT_ERR_ARG, "%s: bad input shape %dx%dx%d", l->name, in.h, in.w, in.c);
  }
  l->in = in;
  l->out = (clt_shape){1, 1, in.c};
  l->nparams = 0;
  return CLT_OK;
}

int clt_global_pool_from_keras(clt_layer *l, const clt_keras_config *c, char *activation,
                               size_t size, clt_err *e) {
  (void)l;
  char format[32];
  int keepdims = 0;
  if (size) activation[0] = '\0';
  if (clt_kc_string(c, "data_format", "channels_last", format, sizeof format, e) ||
      clt_kc_bool(c, "keepdims", 0, &keepdims, e))
    return CLT_ERR_FORMAT;
  if (strcmp(format, "channels_last") != 0)
    return clt_kc_fail(c, e, "data_format %s is not supported (only channels_last)", format);
  return CLT_OK;
}

int clt_global_pool_to_onnx(const clt_layer *l, clt_onnx *g, const char *op, const char *input,
                            const char *output, clt_err *e) {
  if (clt_onnx_rank(g, input) == 2)
    return clt_onnx_node(g, "Identity", &input, 1, output, NULL, 0, e);
  const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
  const char *pooled = clt_onnx_name(g, l, "pooled");
  int status = clt_onnx_node(g, op, &input, 1, pooled, NULL, 0, e);
  if (!status) status = clt_onnx_node(g, "Flatten", &pooled, 1, output, &axis, 1, e);
  if (!status) clt_onnx_set_rank(g, output, 2);
  return status;
}

int clt_onnx_same_rank(const clt_layer *l, clt_onnx *g, const char *const *inputs,
                       const char *ins[2], int *rank, clt_err *e) {
  const int r0 = clt_onnx_rank(g, inputs[0]), r1 = clt_onnx_rank(g, inputs[1]);
  int status = CLT_OK;
  ins[0] = inputs[0];
  ins[1] = inputs[1];
  *rank = r0 < r1 ? r0 : r1;
  if (r0 != r1) {
    const int k = r0 == 4 ? 0 : 1;
    const clt_onnx_attr axis = CLT_ONNX_INT("axis", 1);
    ins[k] = clt_onnx_name(g, l, k ? "flat_input_1" : "flat_input_0");
    status = clt_onnx_node(g, "Flatten", &inputs[k], 1, ins[k], &axis, 1, e);
    if (!status) clt_onnx_set_rank(g, ins[k], 2);
  }
  return status;
}

int clt_gemm_bias_relu(const clt_layer_io *io, const clt_gemm_shape *s, cl_mem a,
                       const clt_param *kernel, const clt_param *bias, int relu, clt_err *e) {
  if (bias) {
    return clt_gemm_bias_act(io->replica, s, a, 0, io->params, kernel->offset, io->y, 0, io->params,
                             bias->offset, relu, e);
  }
  int status = clt_gemm(io->replica, s, 1.0f, a, 0, io->params, kernel->offset, 0.0f, io->y, 0, e);
  if (status || !relu) return status;
  cl_kernel k;
  if ((status = clt_replica_kernel(io->replica, "bias.cl", "", "bias_act", &k, e))) return status;
  int off = -1, rows = (int)s->m, cols = (int)s->n, on = 1;
  clt_karg args[] = {CLT_ARG(io->y), CLT_ARG(io->params), CLT_ARG(off),
                     CLT_ARG(rows),  CLT_ARG(cols),       CLT_ARG(on)};
  return clt_launch_matrix(io->replica, k, "relu", args, 6, s->n, s->m, e);
}

size_t clt_bias_relu_scratch(int rows, int cols, const clt_param *bias) {
  return clt_bias_grad_scratch(rows, cols) + (bias ? 0 : (size_t)cols);
}

int clt_bias_relu_grad(const clt_layer_io *io, int relu, const clt_param *bias, size_t at, int rows,
                       int cols, clt_err *e) {
  if (bias) {
    return clt_bias_grad(io, io->dy, relu ? io->y : NULL, io->scratch, at, rows, cols, bias->offset,
                         e);
  }
  if (!relu) return CLT_OK;
  clt_layer_io sums = *io;
  sums.grads = io->scratch;
  return clt_bias_grad(&sums, io->dy, io->y, io->scratch, at, rows, cols,
                       at + clt_bias_grad_scratch(rows, cols), e);
}
