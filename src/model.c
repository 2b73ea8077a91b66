#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rng.h"

/* Parameters start on 128-byte boundaries: what OpenCL devices commonly require
 * for sub-buffers, and whole vectors for vectorised kernels. */
#define PARAM_ALIGN_FLOATS 32

const char *const clt_model_names = "fmnist-cnn";

static clt_layer *add_layer(clt_model *m, const clt_layer_ops *ops, const char *base) {
  clt_layer *l = &m->layers[m->nlayers++];
  memset(l, 0, sizeof *l);
  l->ops = ops;
  /* Keras numbers repeated layer names: conv2d, conv2d_1, ... */
  int same = 0;
  for (int i = 0; i < m->nlayers - 1; i++) {
    if (m->layers[i].ops == ops) same++;
  }
  if (same == 0) snprintf(l->name, sizeof l->name, "%s", base);
  else snprintf(l->name, sizeof l->name, "%s_%d", base, same);
  return l;
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
    add_conv(m, 64, 3, 1);
    add_pool(m, 2);
    add_conv(m, 80, 3, 1);
    add_pool(m, 2);
    add_layer(m, &clt_flatten_ops, "flatten");
    add_dense(m, 64, 1);
    add_dense(m, classes, 0);
  } else {
    return clt_fail(e, CLT_ERR_ARG, "unknown model '%s' (known: %s)", name, clt_model_names);
  }
  clt_shape shape = input;
  size_t offset = 0;
  for (int i = 0; i < m->nlayers; i++) {
    clt_layer *l = &m->layers[i];
    int status = l->ops->setup(l, shape, e);
    if (status) return clt_wrap(e, "model %s for %dx%dx%d images", name, input.h, input.w, input.c);
    for (int p = 0; p < l->nparams; p++) {
      l->params[p].offset = offset;
      m->param_count += l->params[p].size;
      offset += (l->params[p].size + PARAM_ALIGN_FLOATS - 1) / PARAM_ALIGN_FLOATS * PARAM_ALIGN_FLOATS;
    }
    shape = l->out;
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
      if (prm->glorot_fan_in == 0) continue; /* biases start at zero */
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
    char one[160];
    if (l->ops == &clt_conv2d_ops) {
      snprintf(one, sizeof one, "%s=Conv2D(%d,%dx%d,s%d,%s%s)", l->name, l->filters, l->kernel_h,
               l->kernel_w, l->stride, l->pad_same ? "same" : "valid", l->relu ? ",relu" : "");
    } else if (l->ops == &clt_maxpool_ops) {
      snprintf(one, sizeof one, "%s=MaxPooling2D(%d,s%d)", l->name, l->pool, l->pool_stride);
    } else if (l->ops == &clt_dense_ops) {
      snprintf(one, sizeof one, "%s=Dense(%d%s)", l->name, l->units, l->relu ? ",relu" : "");
    } else {
      snprintf(one, sizeof one, "%s=%s", l->name, l->ops->kind);
    }
    used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? " " : "", one);
  }
}
