#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rng.h"

/* Parameters start on 128-byte boundaries: what OpenCL devices commonly require
 * for sub-buffers, and whole vectors for vectorised kernels. */
#define PARAM_ALIGN_FLOATS 32

const char *const clt_model_names = "fmnist-cnn, resnet50, resnet-small";

/* Appends a layer reading `input` (a layer index, or -1 for the model's input).
 * name: the Keras name; base names (no explicit name) are numbered as Keras
 * numbers repeated layers: conv2d, conv2d_1, ... */
static clt_layer *add_named(clt_model *m, const clt_layer_ops *ops, const char *name, int input) {
  clt_layer *l = &m->layers[m->nlayers++];
  memset(l, 0, sizeof *l);
  l->ops = ops;
  l->ninputs = 1;
  l->inputs[0] = input;
  l->inputs[1] = -1;
  snprintf(l->name, sizeof l->name, "%s", name);
  return l;
}

static clt_layer *add_layer(clt_model *m, const clt_layer_ops *ops, const char *base) {
  int same = 0;
  for (int i = 0; i < m->nlayers; i++) {
    if (m->layers[i].ops == ops) same++;
  }
  char name[32];
  if (same == 0) snprintf(name, sizeof name, "%s", base);
  else snprintf(name, sizeof name, "%s_%d", base, same);
  return add_named(m, ops, name, m->nlayers - 1);
}

static void add_conv(clt_model *m, int filters, int k, int relu) {
  clt_layer *l = add_layer(m, &clt_conv2d_ops, "conv2d");
  l->filters = filters;
  l->kernel_h = l->kernel_w = k;
  l->stride = 1;
  l->relu = relu;
}

static void add_pool(clt_model *m, int pool) {
  clt_layer *l = add_layer(m, &clt_maxpool_ops, "max_pooling2d");
  l->pool = l->pool_stride = pool;
}

static void add_dense(clt_model *m, int units, int relu) {
  clt_layer *l = add_layer(m, &clt_dense_ops, "dense");
  l->units = units;
  l->relu = relu;
}

/* ---- the ResNet family of keras.applications.resnet ----------------------------- */

/* Keras' ResNet50 uses BatchNormalization(epsilon=1.001e-5) with the default momentum. */
#define RESNET_BN_EPSILON 1.001e-5
#define RESNET_BN_MOMENTUM 0.99

/* Conv2D named `name` reading layer `input`; returns its index. */
static int resnet_conv(clt_model *m, const char *name, int input, int filters, int k, int stride,
                       int same) {
  clt_layer *l = add_named(m, &clt_conv2d_ops, name, input);
  l->filters = filters;
  l->kernel_h = l->kernel_w = k;
  l->stride = stride;
  l->pad_same = same;
  return m->nlayers - 1;
}

/* BatchNormalization named `name`, the following Activation('relu') fused in. */
static int resnet_bn(clt_model *m, const char *name, int input, int relu) {
  clt_layer *l = add_named(m, &clt_batchnorm_ops, name, input);
  l->epsilon = RESNET_BN_EPSILON;
  l->momentum = RESNET_BN_MOMENTUM;
  l->relu = relu;
  return m->nlayers - 1;
}

/* keras.applications.resnet.block1: a bottleneck block, 1x1 -> 3x3 -> 1x1 (4x
 * filters), the stride on the first 1x1, a projection shortcut when asked;
 * `name` like "conv2_block1". Returns the index of its output (the Add, ReLU fused). */
static int resnet_block(clt_model *m, int input, int filters, int stride, int conv_shortcut,
                        const char *name) {
  char n[32];
  int shortcut = input;
  if (conv_shortcut) {
    snprintf(n, sizeof n, "%s_0_conv", name);
    shortcut = resnet_conv(m, n, input, 4 * filters, 1, stride, 0);
    snprintf(n, sizeof n, "%s_0_bn", name);
    shortcut = resnet_bn(m, n, shortcut, 0);
  }
  snprintf(n, sizeof n, "%s_1_conv", name);
  int x = resnet_conv(m, n, input, filters, 1, stride, 0);
  snprintf(n, sizeof n, "%s_1_bn", name);
  x = resnet_bn(m, n, x, 1);
  snprintf(n, sizeof n, "%s_2_conv", name);
  x = resnet_conv(m, n, x, filters, 3, 1, 1);
  snprintf(n, sizeof n, "%s_2_bn", name);
  x = resnet_bn(m, n, x, 1);
  snprintf(n, sizeof n, "%s_3_conv", name);
  x = resnet_conv(m, n, x, 4 * filters, 1, 1, 0);
  snprintf(n, sizeof n, "%s_3_bn", name);
  x = resnet_bn(m, n, x, 0);
  snprintf(n, sizeof n, "%s_add", name); /* Add then Activation('relu') "..._out" */
  clt_layer *add = add_named(m, &clt_add_ops, n, shortcut);
  add->ninputs = 2;
  add->inputs[1] = x;
  add->relu = 1;
  return m->nlayers - 1;
}

/* keras.applications.resnet.stack1: `blocks` blocks, the first projecting. */
static int resnet_stack(clt_model *m, int x, int filters, int blocks, int stride1, const char *name) {
  char n[32];
  snprintf(n, sizeof n, "%s_block1", name);
  x = resnet_block(m, x, filters, stride1, 1, n);
  for (int i = 2; i <= blocks; i++) {
    snprintf(n, sizeof n, "%s_block%d", name, i);
    x = resnet_block(m, x, filters, 1, 0, n);
  }
  return x;
}

/* The stem (conv1_pad, conv1_conv 7x7/2, conv1_bn, conv1_relu, pool1_pad,
 * pool1_pool 3x3/2), stacks of bottleneck blocks, avg_pool, predictions. Keras'
 * ResNet50 has filters 64 and blocks {3, 4, 6, 3}. */
static void add_resnet(clt_model *m, int stem_filters, int stem_kernel, const int *filters,
                       const int *blocks, int stacks) {
  int x = resnet_conv(m, "conv1_conv", -1, stem_filters, stem_kernel, 2, 0);
  m->layers[x].pad = stem_kernel / 2;
  snprintf(m->layers[x].pad_name, sizeof m->layers[x].pad_name, "conv1_pad");
  x = resnet_bn(m, "conv1_bn", x, 1);
  clt_layer *pool = add_named(m, &clt_maxpool_ops, "pool1_pool", x);
  pool->pool = 3;
  pool->pool_stride = 2;
  pool->pad = 1;
  snprintf(pool->pad_name, sizeof pool->pad_name, "pool1_pad");
  x = m->nlayers - 1;
  for (int s = 0; s < stacks; s++) {
    char n[16];
    snprintf(n, sizeof n, "conv%d", s + 2);
    x = resnet_stack(m, x, filters[s], blocks[s], s == 0 ? 1 : 2, n);
  }
  add_named(m, &clt_gap_ops, "avg_pool", x);
  clt_layer *d = add_named(m, &clt_dense_ops, "predictions", m->nlayers - 1);
  d->units = m->classes;
}

int clt_model_build(const char *name, clt_shape input, int classes, clt_model *m, clt_err *e) {
  memset(m, 0, sizeof *m);
  if (classes < 2) return clt_fail(e, CLT_ERR_ARG, "model %s: needs at least 2 classes, got %d", name, classes);
  snprintf(m->name, sizeof m->name, "%s", name);
  m->input = input;
  m->classes = classes;
  if (strcmp(name, "fmnist-cnn") == 0) {
    /* The reference CNN of shared/seeds (TensorFlow's custom-training tutorial),
     * defined for Fashion-MNIST's images. */
    if (input.h != 28 || input.w != 28 || input.c != 1) {
      return clt_fail(e, CLT_ERR_FORMAT, "images are %dx%dx%d, model fmnist-cnn expects 28x28x1",
                      input.h, input.w, input.c);
    }
    m->preprocess = CLT_PRE_UNIT;
    add_conv(m, 64, 3, 1);
    add_pool(m, 2);
    add_conv(m, 80, 3, 1);
    add_pool(m, 2);
    add_layer(m, &clt_flatten_ops, "flatten");
    add_dense(m, 64, 1);
    add_dense(m, classes, 0);
  } else if (strcmp(name, "resnet50") == 0 || strcmp(name, "resnet-small") == 0) {
    if (input.c != 3) {
      return clt_fail(e, CLT_ERR_FORMAT, "images have %d channels, model %s expects RGB (3)",
                      input.c, name);
    }
    /* The stem and four stride-2 stages shrink the image 32-fold. */
    if (input.h < 32 || input.w < 32) {
      return clt_fail(e, CLT_ERR_ARG, "images of %dx%d are too small for model %s (at least 32x32)",
                      input.h, input.w, name);
    }
    m->preprocess = CLT_PRE_CAFFE;
    if (name[6] == '5') {
      /* keras.applications.ResNet50(weights=None, include_top=True, classes=C) */
      const int filters[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
      add_resnet(m, 64, 7, filters, blocks, 4);
    } else {
      /* The same design, narrow and shallow, for quick runs and tests. */
      const int filters[] = {8, 16, 16, 32}, blocks[] = {1, 2, 1, 1};
      add_resnet(m, 16, 3, filters, blocks, 4);
    }
  } else {
    return clt_fail(e, CLT_ERR_ARG, "unknown model '%s' (known: %s)", name, clt_model_names);
  }
  /* Shapes, in graph order. */
  for (int i = 0; i < m->nlayers; i++) {
    clt_layer *l = &m->layers[i];
    clt_shape in[2];
    for (int k = 0; k < l->ninputs; k++) {
      in[k] = l->inputs[k] < 0 ? input : m->layers[l->inputs[k]].out;
    }
    int status = l->ops->setup(l, in, e);
    if (status) return clt_wrap(e, "model %s for %dx%dx%d images", name, input.h, input.w, input.c);
  }
  /* The flat layout: trainable parameters first (Adam updates that prefix), then
   * the moving statistics; each starts aligned. */
  size_t offset = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < m->nlayers; i++) {
      clt_layer *l = &m->layers[i];
      for (int p = 0; p < l->nparams; p++) {
        if (l->params[p].non_trainable != pass) continue;
        l->params[p].offset = offset;
        m->param_count += l->params[p].size;
        offset += (l->params[p].size + PARAM_ALIGN_FLOATS - 1) / PARAM_ALIGN_FLOATS * PARAM_ALIGN_FLOATS;
      }
    }
    if (pass == 0) m->trainable_floats = offset;
  }
  m->flat_floats = offset;
  return CLT_OK;
}

void clt_model_init_params(const clt_model *m, uint64_t seed, float *flat) {
  clt_rng rng;
  clt_rng_seed(&rng, seed, 0);
  memset(flat, 0, m->flat_floats * sizeof *flat);
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    for (int p = 0; p < l->nparams; p++) {
      const clt_param *prm = &l->params[p];
      if (prm->glorot_fan_in == 0) {
        /* biases and betas start at 0, gammas and moving variances at 1 */
        for (size_t j = 0; j < prm->size; j++) flat[prm->offset + j] = prm->init_constant;
        continue;
      }
      double limit = sqrt(6.0 / (prm->glorot_fan_in + prm->glorot_fan_out));
      for (size_t j = 0; j < prm->size; j++) {
        flat[prm->offset + j] = (float)((2.0 * clt_rng_uniform(&rng) - 1.0) * limit);
      }
    }
  }
}

size_t clt_model_max_activation(const clt_model *m) {
  size_t best = clt_shape_size(m->input);
  for (int i = 0; i < m->nlayers; i++) {
    size_t s = clt_shape_size(m->layers[i].out);
    if (s > best) best = s;
  }
  return best;
}

void clt_model_describe(const clt_model *m, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < m->nlayers && used < size; i++) {
    const clt_layer *l = &m->layers[i];
    char one[160], pad[48] = "", from[80] = "";
    if (l->pad) snprintf(pad, sizeof pad, "%s=ZeroPadding2D(%d) ", l->pad_name, l->pad);
    /* Inputs are named only where the graph is not a chain. */
    if (l->ninputs > 1 || l->inputs[0] != i - 1) {
      size_t f = (size_t)snprintf(from, sizeof from, "<");
      for (int k = 0; k < l->ninputs && f < sizeof from; k++) {
        f += (size_t)snprintf(from + f, sizeof from - f, "%s%s", k ? "," : "",
                              l->inputs[k] < 0 ? "input" : m->layers[l->inputs[k]].name);
      }
    }
    if (l->ops == &clt_conv2d_ops) {
      snprintf(one, sizeof one, "%s=Conv2D(%d,%dx%d,s%d,%s%s)", l->name, l->filters, l->kernel_h,
               l->kernel_w, l->stride, l->pad_same ? "same" : "valid", l->relu ? ",relu" : "");
    } else if (l->ops == &clt_maxpool_ops) {
      snprintf(one, sizeof one, "%s=MaxPooling2D(%d,s%d)", l->name, l->pool, l->pool_stride);
    } else if (l->ops == &clt_dense_ops) {
      snprintf(one, sizeof one, "%s=Dense(%d%s)", l->name, l->units, l->relu ? ",relu" : "");
    } else if (l->ops == &clt_batchnorm_ops) {
      snprintf(one, sizeof one, "%s=BatchNormalization(eps%g,m%g%s)", l->name, l->epsilon,
               l->momentum, l->relu ? ",relu" : "");
    } else {
      snprintf(one, sizeof one, "%s=%s%s", l->name, l->ops->kind, l->relu ? "(relu)" : "");
    }
    used += (size_t)snprintf(buf + used, size - used, "%s%s%s%s", i ? " " : "", pad, one, from);
    if (used >= size) used = size - 1;
  }
}

int clt_model_find(const clt_model *m, const char *name) {
  for (int i = 0; i < m->nlayers; i++) {
    if (strcmp(m->layers[i].name, name) == 0) return i;
  }
  return -1;
}
