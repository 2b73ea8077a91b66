/* Models as data: a model is its description text (see clt_model_parse); the
 * built-in models are functions that write a description. Nothing here knows a
 * layer kind: the kinds' ops tables parse, describe and shape each layer. */
#define _POSIX_C_SOURCE 200809L
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "init.h"
#include "rng.h"

/* Parameters start on 128-byte boundaries: what OpenCL devices commonly require
 * for sub-buffers, and whole vectors for vectorised kernels. */
#define PARAM_ALIGN_FLOATS 32

/* The name of the model's input in descriptions. */
#define INPUT_NAME "input"

/* Room for a built-in model's description (the largest, ResNet50's, is about
 * 10 KB). */
#define BUILTIN_DESCRIBE_MAX ((size_t)1 << 20)

/* ---- writing descriptions ------------------------------------------------------- */

/* Appends entries to a description; an entry names its inputs only where the graph
 * is not a chain, as clt_model_describe does. */
typedef struct desc_writer {
  char *buf;
  size_t size, used;
  char last[64]; /* the previous entry's layer name */
} desc_writer;

static void emit_entry(desc_writer *w, const char *name, const char *kind, const char *in1,
                       const char *in2, int name_input) {
  char from[160] = "";
  if (in2) snprintf(from, sizeof from, "<%s,%s", in1, in2);
  else if (name_input || strcmp(in1, w->last) != 0) snprintf(from, sizeof from, "<%s", in1);
  if (w->used < w->size) {
    w->used += (size_t)snprintf(w->buf + w->used, w->size - w->used, "%s%s=%s%s",
                                w->used ? " " : "", name, kind, from);
  }
  snprintf(w->last, sizeof w->last, "%s", name);
}

static void emit(desc_writer *w, const char *name, const char *kind, const char *in1,
                 const char *in2) {
  emit_entry(w, name, kind, in1, in2, 0);
}

/* A ZeroPadding2D folded into the entry that follows: it names no inputs (the next
 * entry names them) and is not an entry of its own for the chain. */
static void emit_pad(desc_writer *w, const char *name, clt_pad pad) {
  char args[64];
  clt_pad_describe(pad, args, sizeof args);
  if (w->used < w->size) {
    w->used += (size_t)snprintf(w->buf + w->used, w->size - w->used, "%s%s=ZeroPadding2D(%s)",
                                w->used ? " " : "", name, args);
  }
}

static clt_pad pad_all(int p) { return (clt_pad){p, p, p, p}; }

/* The reference CNN of shared/seeds (TensorFlow's custom-training tutorial), defined
 * for Fashion-MNIST's images. */
static int describe_fmnist_cnn(clt_shape input, int classes, desc_writer *w, clt_err *e) {
  if (input.h != 28 || input.w != 28 || input.c != 1) {
    return clt_fail(e, CLT_ERR_FORMAT, "images are %dx%dx%d, model fmnist-cnn expects 28x28x1",
                    input.h, input.w, input.c);
  }
  char dense[32];
  snprintf(dense, sizeof dense, "Dense(%d)", classes);
  emit(w, "conv2d", "Conv2D(64,3x3,s1,valid,relu)", w->last, NULL);
  emit(w, "max_pooling2d", "MaxPooling2D(2,s2)", w->last, NULL);
  emit(w, "conv2d_1", "Conv2D(80,3x3,s1,valid,relu)", w->last, NULL);
  emit(w, "max_pooling2d_1", "MaxPooling2D(2,s2)", w->last, NULL);
  emit(w, "flatten", "Flatten", w->last, NULL);
  emit(w, "dense", "Dense(64,relu)", w->last, NULL);
  emit(w, "dense_1", dense, w->last, NULL);
  return CLT_OK;
}

/* ---- the ResNet family of keras.applications.resnet ----------------------------- */

/* Keras' ResNet50 uses BatchNormalization(epsilon=1.001e-5) with the default momentum;
 * each BatchNormalization's following Activation('relu') is fused in. */
#define RESNET_BN(relu)                                   \
  ((relu) ? "BatchNormalization(eps1.001e-05,m0.99,relu)" \
          : "BatchNormalization(eps1.001e-05,m0.99)")

/* Conv2D then BatchNormalization, "<name>_conv" and "<name>_bn"; the latter's name
 * goes to out (which may be the buffer `input` points to). */
static void conv_bn(desc_writer *w, const char *name, const char *input, int filters, int k,
                    int stride, int same, int relu, char *out, size_t size) {
  char n[64], kind[48];
  snprintf(n, sizeof n, "%s_conv", name);
  snprintf(kind, sizeof kind, "Conv2D(%d,%dx%d,s%d,%s)", filters, k, k, stride,
           same ? "same" : "valid");
  emit(w, n, kind, input, NULL);
  snprintf(out, size, "%s_bn", name);
  emit(w, out, RESNET_BN(relu), n, NULL);
}

/* keras.applications.resnet.block1: a bottleneck block, 1x1 -> 3x3 -> 1x1 (4x
 * filters), the stride on the first 1x1, a projection shortcut when asked; `name`
 * like "conv2_block1". Its output, the Add (ReLU fused), goes to `out`. */
static void resnet_block(desc_writer *w, const char *input, int filters, int stride,
                         int conv_shortcut, const char *name, char *out, size_t size) {
  char n[48], shortcut[64], x[64];
  snprintf(shortcut, sizeof shortcut, "%s", input);
  if (conv_shortcut) {
    snprintf(n, sizeof n, "%s_0", name);
    conv_bn(w, n, input, 4 * filters, 1, stride, 0, 0, shortcut, sizeof shortcut);
  }
  snprintf(n, sizeof n, "%s_1", name);
  conv_bn(w, n, input, filters, 1, stride, 0, 1, x, sizeof x);
  snprintf(n, sizeof n, "%s_2", name);
  conv_bn(w, n, x, filters, 3, 1, 1, 1, x, sizeof x);
  snprintf(n, sizeof n, "%s_3", name);
  conv_bn(w, n, x, 4 * filters, 1, 1, 0, 0, x, sizeof x);
  snprintf(out, size, "%s_add", name); /* Add then Activation('relu') "..._out" */
  emit(w, out, "Add(relu)", shortcut, x);
}

/* The stem (conv1_pad, conv1_conv 7x7/2, conv1_bn, conv1_relu, pool1_pad,
 * pool1_pool 3x3/2), stacks of keras.applications.resnet.stack1 (the first block
 * projecting), avg_pool, predictions. */
static void write_resnet(desc_writer *w, int classes, int stem_filters, int stem_kernel,
                         const int *filters, const int *blocks, int stacks) {
  char x[64], kind[48];
  emit_pad(w, "conv1_pad", pad_all(stem_kernel / 2));
  conv_bn(w, "conv1", INPUT_NAME, stem_filters, stem_kernel, 2, 0, 1, x, sizeof x);
  emit_pad(w, "pool1_pad", pad_all(1));
  emit(w, "pool1_pool", "MaxPooling2D(3,s2)", x, NULL);
  snprintf(x, sizeof x, "pool1_pool");
  for (int s = 0; s < stacks; s++) {
    for (int b = 1; b <= blocks[s]; b++) {
      char name[32];
      snprintf(name, sizeof name, "conv%d_block%d", s + 2, b);
      resnet_block(w, x, filters[s], b == 1 && s > 0 ? 2 : 1, b == 1, name, x, sizeof x);
    }
  }
  emit(w, "avg_pool", "GlobalAveragePooling2D", x, NULL);
  snprintf(kind, sizeof kind, "Dense(%d)", classes);
  emit(w, "predictions", kind, "avg_pool", NULL);
}

static int resnet_check(const char *name, clt_shape input, clt_err *e) {
  if (input.c != 3) {
    return clt_fail(e, CLT_ERR_FORMAT, "images have %d channels, model %s expects RGB (3)", input.c,
                    name);
  }
  /* The stem and four stride-2 stages shrink the image 32-fold. */
  if (input.h < 32 || input.w < 32) {
    return clt_fail(e, CLT_ERR_ARG, "images of %dx%d are too small for model %s (at least 32x32)",
                    input.h, input.w, name);
  }
  return CLT_OK;
}

/* keras.applications.ResNet50(weights=None, include_top=True, classes=C) */
static int describe_resnet50(clt_shape input, int classes, desc_writer *w, clt_err *e) {
  const int filters[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  int status = resnet_check("resnet50", input, e);
  if (!status) write_resnet(w, classes, 64, 7, filters, blocks, 4);
  return status;
}

/* The same design, narrow and shallow, for quick runs and tests. */
static int describe_resnet_small(clt_shape input, int classes, desc_writer *w, clt_err *e) {
  const int filters[] = {8, 16, 16, 32}, blocks[] = {1, 2, 1, 1};
  int status = resnet_check("resnet-small", input, e);
  if (!status) write_resnet(w, classes, 16, 3, filters, blocks, 4);
  return status;
}

static const struct builtin {
  const char *name;
  clt_preprocess preprocess;
  int (*describe)(clt_shape input, int classes, desc_writer *w, clt_err *e);
} builtins[] = {
    {"fmnist-cnn", CLT_PRE_UNIT, describe_fmnist_cnn},
    {"resnet50", CLT_PRE_CAFFE, describe_resnet50},
    {"resnet-small", CLT_PRE_CAFFE, describe_resnet_small},
};

const char *const clt_model_names = "fmnist-cnn, resnet50, resnet-small";

static const struct builtin *find_builtin(const char *name) {
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
    if (strcmp(builtins[i].name, name) == 0) return &builtins[i];
  }
  return NULL;
}

int clt_model_is_builtin(const char *name, clt_preprocess *preprocess) {
  const struct builtin *b = find_builtin(name);
  if (b && preprocess) *preprocess = b->preprocess;
  return b != NULL;
}

int clt_model_build(const char *name, clt_shape input, int classes, clt_model *m, clt_err *e) {
  const struct builtin *b = find_builtin(name);
  if (!b) return clt_fail(e, CLT_ERR_ARG, "unknown model '%s' (known: %s)", name, clt_model_names);
  if (classes < 2)
    return clt_fail(e, CLT_ERR_ARG, "model %s: needs at least 2 classes, got %d", name, classes);
  char *text = malloc(BUILTIN_DESCRIBE_MAX);
  if (!text) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory building model %s", name);
  desc_writer w = {.buf = text, .size = BUILTIN_DESCRIBE_MAX, .last = INPUT_NAME};
  text[0] = '\0';
  int status = b->describe(input, classes, &w, e);
  if (!status && w.used >= w.size) {
    status = clt_fail(e, CLT_ERR_INTERNAL, "model %s: description longer than %zu bytes", name,
                      BUILTIN_DESCRIBE_MAX);
  }
  if (!status) status = clt_model_parse(name, input, classes, b->preprocess, text, m, e);
  free(text);
  return status;
}

/* ---- reading descriptions ------------------------------------------------------- */

/* Index of the layer named `name` among the first n of m, -1 for the model's input,
 * or -2 if there is none. */
static int input_index(const clt_model *m, int n, const char *name) {
  if (strcmp(name, INPUT_NAME) == 0) return -1;
  for (int i = n - 1; i >= 0; i--) {
    if (strcmp(m->layers[i].name, name) == 0) return i;
  }
  return -2;
}

/* Sets layer i's inputs from the text after its entry's '<' ("a" or "a,b"; NULL: the
 * entry before). */
static int parse_inputs(clt_model *m, int i, char *from, clt_err *e) {
  clt_layer *l = &m->layers[i];
  if (!from) {
    if (l->ninputs != 1) {
      return clt_fail(e, CLT_ERR_FORMAT, "layer %s: %s takes %d inputs; name them (%s=%s<a,b)",
                      l->name, l->ops->kind, l->ninputs, l->name, l->ops->kind);
    }
    l->inputs[0] = i - 1;
    return CLT_OK;
  }
  int k = 0;
  for (char *save = NULL, *name = strtok_r(from, ",", &save); name;
       name = strtok_r(NULL, ",", &save)) {
    if (k == 2) return clt_fail(e, CLT_ERR_FORMAT, "layer %s: more than 2 inputs", l->name);
    const int t = input_index(m, i, name);
    if (t == -2) {
      return clt_fail(e, CLT_ERR_FORMAT, "layer %s: input %s is not an earlier layer", l->name,
                      name);
    }
    l->inputs[k++] = t;
  }
  if (k != l->ninputs) {
    return clt_fail(e, CLT_ERR_FORMAT, "layer %s: %s takes %d input%s, the description names %d",
                    l->name, l->ops->kind, l->ninputs, l->ninputs == 1 ? "" : "s", k);
  }
  return CLT_OK;
}

/* A folded ZeroPadding2D entry's padding from its argument text "p" or "t,b,l,r". */
static int parse_folded_pad(const char *entry, const char *args, clt_pad *p, clt_err *e) {
  if (clt_pad_parse(args, p) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: expected ZeroPadding2D(p) or ZeroPadding2D(top,bottom,left,right)", entry);
  }
  if (!strchr(args, ',') && p->top < 1)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: padding must be at least 1", entry);
  if (!clt_pad_any(*p))
    return clt_fail(e, CLT_ERR_FORMAT, "%s: padding must not be 0 on every side", entry);
  return CLT_OK;
}

/* Adds one description entry (modified in place) as layer m->nlayers. An entry
 * "name=ZeroPadding2D(...)" without inputs is folded: left in *pad and *pad_name for
 * the next entry; with "<input" it is a layer of its own. */
static int parse_entry(clt_model *m, char *entry, clt_pad *pad, char *pad_name, size_t pad_size,
                       clt_err *e) {
  static const char zp[] = "ZeroPadding2D(";
  char *from = strchr(entry, '<');
  if (from) *from++ = '\0';
  const char *eq = strchr(entry, '=');
  const size_t len = strlen(entry);
  if (eq && !from && strncmp(eq + 1, zp, sizeof zp - 1) == 0 && entry[len - 1] == ')') {
    char args[64];
    snprintf(args, sizeof args, "%.*s", (int)(entry + len - 1 - (eq + sizeof zp)), eq + sizeof zp);
    clt_pad p;
    int status = parse_folded_pad(entry, args, &p, e);
    if (status) return status;
    if (clt_pad_any(*pad))
      return clt_fail(e, CLT_ERR_FORMAT, "%s follows ZeroPadding2D %s: fold both into one", entry,
                      pad_name);
    *pad = p;
    snprintf(pad_name, pad_size, "%.*s", (int)(eq - entry), entry);
    return CLT_OK; /* its input is the next layer's: the entry before */
  }
  if (m->nlayers == m->room) {
    const int room = m->room < 64 ? 64 : m->room < INT_MAX / 2 ? 2 * m->room : INT_MAX;
    clt_layer *more = m->nlayers == INT_MAX ? NULL
                                            : realloc(m->layers, (size_t)room * sizeof *more);
    if (!more)
      return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for %d layers", m->nlayers + 1);
    m->layers = more;
    m->room = room;
  }
  clt_layer *l = &m->layers[m->nlayers];
  int status = clt_layer_init(l, entry, e);
  if (status) return status;
  if (input_index(m, m->nlayers, l->name) != -2) {
    return clt_fail(e, CLT_ERR_FORMAT, "layer name %s is used twice", l->name);
  }
  if (clt_pad_any(*pad)) {
    if (!l->ops->folds_padding) {
      return clt_fail(e, CLT_ERR_FORMAT, "layer %s: %s cannot follow ZeroPadding2D %s", l->name,
                      l->ops->kind, pad_name);
    }
    l->pad = *pad;
    snprintf(l->pad_name, sizeof l->pad_name, "%s", pad_name);
    *pad = (clt_pad){0, 0, 0, 0};
  }
  if ((status = parse_inputs(m, m->nlayers, from, e))) return status;
  m->nlayers++;
  return CLT_OK;
}

/* Shapes in graph order, then the flat layout (clt_model_layout). */
static int place_layers(clt_model *m, clt_err *e) {
  for (int i = 0; i < m->nlayers; i++) {
    clt_layer *l = &m->layers[i];
    clt_shape in[2];
    for (int k = 0; k < l->ninputs; k++)
      in[k] = l->inputs[k] < 0 ? m->input : m->layers[l->inputs[k]].out;
    int status = l->ops->setup(l, in, e);
    if (status) return status;
    const clt_shape o = l->out;
    if (o.h < 1 || o.w < 1 || o.c < 1 || o.h > CLT_MODEL_MAX_SIDE || o.w > CLT_MODEL_MAX_SIDE ||
        (int64_t)o.h * o.w * o.c > CLT_MODEL_MAX_VALUES) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: output %dx%dx%d is outside what cltrain handles (sides 1 to %d, at "
                      "most %lld values per example)",
                      l->name, o.h, o.w, o.c, CLT_MODEL_MAX_SIDE, (long long)CLT_MODEL_MAX_VALUES);
    }
  }
  clt_model_layout(m);
  return CLT_OK;
}

/* Three groups, each in model order: the trained parameters (the optimizer
 * updates that prefix), the moving statistics of layers not frozen (their
 * gradient slots carry batch statistics), then every frozen layer's parameters
 * (neither gradient nor optimizer slot). With nothing frozen the last is empty. */
void clt_model_layout(clt_model *m) {
  size_t offset = 0;
  m->param_count = 0;
  for (int group = 0; group < 3; group++) {
    for (int i = 0; i < m->nlayers; i++) {
      clt_layer *l = &m->layers[i];
      for (int p = 0; p < l->nparams; p++) {
        if ((l->frozen ? 2 : l->params[p].non_trainable != 0) != group) continue;
        l->params[p].offset = offset;
        m->param_count += l->params[p].size;
        offset += (l->params[p].size + PARAM_ALIGN_FLOATS - 1) / PARAM_ALIGN_FLOATS *
                  PARAM_ALIGN_FLOATS;
      }
    }
    if (group == 0) m->trainable_floats = offset;
    if (group == 1) m->grad_floats = offset;
  }
  m->flat_floats = offset;
}

int clt_model_parse(const char *name, clt_shape input, int classes, clt_preprocess preprocess,
                    const char *description, clt_model *m, clt_err *e) {
  int status = CLT_OK;
  clt_pad pad = {0, 0, 0, 0};
  char pad_name[CLT_LAYER_NAME_SIZE] = "";
  clt_layer *layers = m->layers;
  const int room = m->room;
  memset(m, 0, sizeof *m);
  m->layers = layers;
  m->room = room;
  /* A description read from a file (a checkpoint's metadata) may say anything:
   * sizes out of range would wrap every size computed from them. */
  if (input.h < 1 || input.w < 1 || input.c < 1 || input.h > CLT_MODEL_MAX_SIDE ||
      input.w > CLT_MODEL_MAX_SIDE || input.c > CLT_MODEL_MAX_CHANNELS) {
    return clt_fail(e, CLT_ERR_FORMAT, "model %s: input %dx%dx%d is outside 1x1x1 .. %dx%dx%d",
                    name, input.h, input.w, input.c, CLT_MODEL_MAX_SIDE, CLT_MODEL_MAX_SIDE,
                    CLT_MODEL_MAX_CHANNELS);
  }
  if (classes < 0 || classes > CLT_MODEL_MAX_CLASSES) {
    return clt_fail(e, CLT_ERR_FORMAT, "model %s: %d classes is outside 1 .. %d", name, classes,
                    CLT_MODEL_MAX_CLASSES);
  }
  snprintf(m->name, sizeof m->name, "%s", name);
  m->input = input;
  m->classes = classes;
  m->preprocess = preprocess;
  char *text = strdup(description);
  if (!text) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading model %s", name);
  for (char *save = NULL, *entry = strtok_r(text, " ", &save); entry && !status;
       entry = strtok_r(NULL, " ", &save)) {
    status = parse_entry(m, entry, &pad, pad_name, sizeof pad_name, e);
  }
  if (!status && clt_pad_any(pad))
    status = clt_fail(e, CLT_ERR_FORMAT, "ZeroPadding2D %s ends the model", pad_name);
  if (!status && m->nlayers == 0) status = clt_fail(e, CLT_ERR_FORMAT, "no layers");
  if (!status) status = place_layers(m, e);
  if (!status) {
    const clt_shape out = m->layers[m->nlayers - 1].out;
    if (classes == 0 && out.h == 1 && out.w == 1 && out.c <= CLT_MODEL_MAX_CLASSES)
      m->classes = classes = out.c;
    if (classes == 0) {
      status = clt_fail(e, CLT_ERR_FORMAT, "the last layer outputs %dx%dx%d, not class logits",
                        out.h, out.w, out.c);
    } else if (out.h != 1 || out.w != 1 || out.c != classes) {
      status = clt_fail(e, CLT_ERR_FORMAT,
                        "the last layer outputs %dx%dx%d, not the %d class logits", out.h, out.w,
                        out.c, classes);
    }
  }
  free(text);
  if (status) clt_wrap(e, "model %s for %dx%dx%d images", name, input.h, input.w, input.c);
  return status;
}

/* ---- using a model ---------------------------------------------------------------- */

void clt_model_free(clt_model *m) {
  free(m->layers);
  memset(m, 0, sizeof *m);
}

int clt_model_copy(clt_model *dst, const clt_model *src, clt_err *e) {
  clt_layer *layers = dst->layers;
  if (dst->room < src->nlayers) {
    free(layers);
    layers = src->nlayers ? malloc((size_t)src->nlayers * sizeof *layers) : NULL;
    if (src->nlayers && !layers) {
      memset(dst, 0, sizeof *dst);
      return clt_fail(e, CLT_ERR_NOMEM, "out of host memory copying model %s", src->name);
    }
  }
  const int room = dst->room < src->nlayers ? src->nlayers : dst->room;
  *dst = *src;
  dst->layers = layers;
  dst->room = room;
  if (src->nlayers) memcpy(layers, src->layers, (size_t)src->nlayers * sizeof *layers);
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
      if (prm->init.kind == CLT_INIT_VALUES) {
        memcpy(flat + prm->offset, m->constants + prm->values_at, prm->size * sizeof *flat);
        continue;
      }
      if (prm->init.kind != CLT_INIT_DEFAULT) {
        clt_init_fill(&prm->init, prm->rank, prm->dims, &rng, flat + prm->offset, prm->size);
        continue;
      }
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
  desc_writer w = {.buf = buf, .size = size, .last = INPUT_NAME};
  buf[0] = '\0';
  for (int i = 0; i < m->nlayers && w.used < size; i++) {
    const clt_layer *l = &m->layers[i];
    char kind[160];
    if (clt_pad_any(l->pad)) emit_pad(&w, l->pad_name, l->pad);
    l->ops->describe(l, kind, sizeof kind);
    /* A ZeroPadding2D layer of its own always names its input: without, it folds. */
    const int standalone_pad = strcmp(l->ops->kind, "ZeroPadding2D") == 0;
    emit_entry(&w, l->name, kind, l->inputs[0] < 0 ? INPUT_NAME : m->layers[l->inputs[0]].name,
               l->ninputs > 1 ? m->layers[l->inputs[1]].name : NULL, standalone_pad);
  }
  if (w.used >= size) buf[size - 1] = '\0';
}

int clt_model_find(const clt_model *m, const char *name) {
  for (int i = 0; i < m->nlayers; i++) {
    if (strcmp(m->layers[i].name, name) == 0) return i;
  }
  return -1;
}

/* Edits (insertions, deletions, substitutions) between a and b, at most 64
 * characters of each. */
static int edit_distance(const char *a, const char *b) {
  int row[65];
  const int la = (int)strnlen(a, 64), lb = (int)strnlen(b, 64);
  for (int j = 0; j <= lb; j++) row[j] = j;
  for (int i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= lb; j++) {
      const int up = row[j];
      const int sub = diag + (a[i - 1] != b[j - 1]);
      row[j] = sub < up + 1 ? sub : up + 1;
      if (row[j - 1] + 1 < row[j]) row[j] = row[j - 1] + 1;
      diag = up;
    }
  }
  return row[lb];
}

/* How close layer name `layer` is to `name`, smaller is closer: edits, then the
 * longer common prefix first (conv5_block3_1_bn before conv2_block3_add for
 * conv5_block3_out); -1 when it is not close (more edits than a third of name,
 * at least 2, and not containing it). */
static int closeness(const char *name, const char *layer) {
  const int len = (int)strlen(name), limit = len / 3 > 2 ? len / 3 : 2;
  const int d = edit_distance(name, layer);
  if (d > limit && !(len >= 3 && strstr(layer, name))) return -1;
  int common = 0;
  while (common < 63 && name[common] && name[common] == layer[common]) common++;
  return d * 64 + (63 - common);
}

/* Up to four layer names close to `name`, closest first, as ", "-separated text;
 * "" when none is. */
static void close_names(const clt_model *m, const char *name, char *buf, size_t size) {
  enum { MAX = 4 };
  int best[MAX], score[MAX], n = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const int d = closeness(name, m->layers[i].name);
    if (d < 0) continue;
    int at = n < MAX ? n++ : MAX;
    while (at > 0 && score[at - 1] > d) {
      if (at < MAX) best[at] = best[at - 1], score[at] = score[at - 1];
      at--;
    }
    if (at < MAX) best[at] = i, score[at] = d;
  }
  buf[0] = '\0';
  for (int k = 0; k < n && strlen(buf) + 1 < size; k++) {
    const size_t used = strlen(buf);
    snprintf(buf + used, size - used, "%s%s", k ? ", " : "", m->layers[best[k]].name);
  }
}

int clt_model_freeze_until(clt_model *m, const char *name, const char *flag, clt_err *e) {
  const int last = clt_model_find(m, name);
  if (last < 0) {
    char close[160];
    close_names(m, name, close, sizeof close);
    return clt_fail(e, CLT_ERR_ARG, "%s %s: model %s has no layer of that name%s%s%s", flag, name,
                    m->name, close[0] ? " (close: " : "", close, close[0] ? ")" : "");
  }
  for (int i = 0; i <= last; i++) m->layers[i].frozen = 1;
  clt_model_layout(m);
  return CLT_OK;
}

void clt_model_grads_needed(const clt_model *m, unsigned char *needed) {
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    int need = 0;
    for (int p = 0; p < l->nparams && !l->frozen; p++) need |= !l->params[p].non_trainable;
    for (int k = 0; k < l->ninputs; k++) need |= l->inputs[k] >= 0 && needed[l->inputs[k]];
    needed[i] = (unsigned char)need;
  }
}
