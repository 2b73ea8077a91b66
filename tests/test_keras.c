/* Keras model files against real Keras: each fixture folder of tests/models/
 * (written by tests/models/make_fixtures.py with TensorFlow) holds a model's
 * to_json(), its initial weights, a batch and what Keras computed on it: logits
 * in training and inference mode, the loss and the gradient of every trainable
 * weight (tf.GradientTape). Here the model file is loaded, the weights read both
 * ways --weights takes them (get_weights order and by name), and the device's
 * forward, loss and gradients must match Keras'.
 * usage: test_keras FIXTURE_DIR... */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "keras.h"
#include "net.h"
#include "npz.h"
#include "weights.h"

/* Relative to the largest value of each compared tensor: float32 against float32,
 * summed in other orders (TensorFlow's kernels against cltrain's). */
#define TOL_LOGITS 1e-4
#define TOL_LOSS 1e-5
#define TOL_GRAD 1e-3

static const clt_npz_array *member(const clt_npz *z, const char *name, const char *dtype) {
  const clt_npz_array *a = clt_npz_find(z, name);
  if (!a) {
    report(name, NAN, 0, "missing from the fixture");
    return NULL;
  }
  if (strcmp(a->dtype, dtype) != 0) {
    report(name, NAN, 0, "unexpected dtype in the fixture");
    return NULL;
  }
  return a;
}

/* Element i of a "<f4" member (its data need not be aligned for float). */
static double f4_at(const clt_npz_array *a, size_t i) {
  float f;
  memcpy(&f, (const char *)a->data + i * sizeof f, sizeof f);
  return f;
}

static double *as_doubles(const clt_npz_array *a, size_t *n) {
  *n = a->bytes / sizeof(float);
  double *d = dnew(*n);
  for (size_t i = 0; i < *n; i++) d[i] = f4_at(a, i);
  return d;
}

/* Whether the "<U<n>" list `names` (NULL: none) holds `layer`, or the Keras layer
 * that cltrain layer `layer` comes from ("dense" for "dense/relu"). */
static int listed(const clt_npz_array *names, const char *layer) {
  int chars = 0;
  if (!names || names->rank != 1 || sscanf(names->dtype, "<U%d", &chars) != 1 || chars < 1)
    return 0;
  for (int64_t i = 0; i < names->dims[0]; i++) {
    char name[256];
    int n = 0;
    for (; n < chars && n < (int)sizeof name - 1; n++) {
      uint32_t c;
      memcpy(&c, (const char *)names->data + ((size_t)i * (size_t)chars + (size_t)n) * 4, 4);
      if (c == 0 || c > 127) break;
      name[n] = (char)c;
    }
    name[n] = '\0';
    const size_t len = strlen(name);
    if (strcmp(layer, name) == 0 || (strncmp(layer, name, len) == 0 && layer[len] == '/')) return 1;
  }
  return 0;
}

/* The model with every Dropout's rate set to 0: the fixtures' Keras numbers were
 * computed so (cltrain draws its own masks; test_layer_kinds checks those). */
static int without_dropout(clt_model *m) {
  const size_t size = clt_describe_max(m->nlayers);
  char *text = hnew(size), *out = hnew(size);
  clt_model_describe(m, text, size);
  size_t used = 0;
  for (const char *p = text; *p && used < size - 1;) {
    const char *d = strstr(p, "=Dropout(");
    if (!d) d = p + strlen(p);
    const size_t keep = (size_t)(d - p);
    memcpy(out + used, p, keep);
    used += keep;
    p = d;
    if (!*p) break;
    used += (size_t)snprintf(out + used, size - used, "=Dropout(0");
    p += strlen("=Dropout(");
    while (*p && *p != ',' && *p != ')') p++; /* the rate */
  }
  out[used] = '\0';
  const int softmax = m->softmax_output;
  static clt_model copy; /* large: not on the stack */
  int status = clt_model_copy(&copy, m, &E);
  if (!status)
    status = clt_model_parse(copy.name, copy.input, copy.classes, copy.preprocess, out, m, &E);
  m->softmax_output = softmax;
  /* What the model file said beyond the description: flags, initializers, values. */
  m->nconstants = copy.nconstants;
  memcpy(m->constants, copy.constants, sizeof m->constants);
  for (int i = 0; i < m->nlayers && !status; i++) {
    m->layers[i].frozen = copy.layers[i].frozen;
    m->layers[i].inference = copy.layers[i].inference;
    for (int p = 0; p < m->layers[i].nparams; p++) {
      m->layers[i].params[p].init = copy.layers[i].params[p].init;
      m->layers[i].params[p].values_at = copy.layers[i].params[p].values_at;
      m->layers[i].params[p].keras_config = copy.layers[i].params[p].keras_config;
    }
  }
  if (!status) clt_model_layout(m);
  return status;
}

/* Sets name to "grad/<layer>/<alias>", or to "grad/<layer>/<alias>_<digits>" where the
 * fixture has that instead (Keras 3 numbers the weights it made without a name:
 * "variable", "variable_1", ...). */
static void numbered_grad(const clt_npz *batch, const char *layer, const char *alias, char *name,
                          size_t size) {
  snprintf(name, size, "grad/%s/%s", layer, alias);
  if (clt_npz_find(batch, name)) return;
  const size_t len = strlen(name);
  for (int i = 0; i < clt_npz_count(batch); i++) {
    const char *n = clt_npz_at(batch, i)->name;
    if (strncmp(n, name, len) == 0 && n[len] == '_' && n[len + 1] &&
        strspn(n + len + 1, "0123456789") == strlen(n + len + 1)) {
      snprintf(name, size, "%s", n);
      return;
    }
  }
}

static void test_fixture(const char *dir) {
  char path[1024];
  clt_npz *batch = NULL;
  clt_model *m = hnew(sizeof *m);
  clt_net *net = NULL;
  set_case("%s:", dir);
  snprintf(path, sizeof path, "%s/batch.npz", dir);
  if (api_failed(clt_npz_read(path, &batch, &E), "reading batch.npz")) goto done;
  const clt_npz_array *x = member(batch, "x", "<f4"), *y = member(batch, "y", "<i8");
  const clt_npz_array *logits = member(batch, "logits", "<f4");
  const clt_npz_array *logits_inf = member(batch, "logits_inference", "<f4");
  const clt_npz_array *loss = member(batch, "loss", "<f4");
  if (!x || !y || !logits || !logits_inf || !loss || x->rank != 4 || logits->rank != 2) goto done;
  const int B = (int)x->dims[0], K = (int)logits->dims[1];
  const clt_keras_opts ko = {.data = {(int)x->dims[1], (int)x->dims[2], (int)x->dims[3]},
                             .classes = K,
                             .preprocess = CLT_PRE_RAW,
                             .weights_given = 1};
  snprintf(path, sizeof path, "%s/model.json", dir);
  if (api_failed(clt_keras_load(path, &ko, m, NULL, &E), "loading model.json")) goto done;
  /* Frozen layers and those that run as at inference in training (Keras' lists;
   * absent: none), nested models' passed down to their layers. */
  const clt_npz_array *frozen = clt_npz_find(batch, "frozen_layers");
  const clt_npz_array *inference = clt_npz_find(batch, "inference_layers");
  int wrong_frozen = 0, wrong_inference = 0, bn_inference = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const clt_layer *l = &m->layers[i];
    wrong_frozen += l->frozen != listed(frozen, l->name);
    wrong_inference += l->inference != listed(inference, l->name);
    if (l->inference && !l->frozen && strcmp(l->ops->kind, "BatchNormalization") == 0)
      bn_inference = 1;
  }
  expect("layers frozen as in Keras", (size_t)wrong_frozen, (size_t)m->nlayers);
  expect("layers in inference mode as in Keras", (size_t)wrong_inference, (size_t)m->nlayers);
  const clt_npz_array *dropout = clt_npz_find(batch, "dropout_disabled");
  if (dropout && api_failed(without_dropout(m), "the model without dropout")) goto done;

  /* Weights both ways --weights reads them: the same values. */
  float *flat = hnew(m->flat_floats * sizeof(float)), *named = hnew(m->flat_floats * sizeof(float));
  /* Over the model's own start, as --weights: what the model file gives (a
   * Normalization's mean and variance in its config) is in no weights file. */
  clt_model_init_params(m, 1, flat);
  clt_model_init_params(m, 1, named);
  snprintf(path, sizeof path, "%s/weights.npz", dir);
  if (api_failed(clt_weights_load(m, path, flat, &E), "weights in get_weights order")) goto done;
  snprintf(path, sizeof path, "%s/weights_named.npz", dir);
  if (api_failed(clt_weights_load(m, path, named, &E), "weights by name")) goto done;
  expect("weights by name equal those in get_weights order",
         (size_t)(memcmp(flat, named, m->flat_floats * sizeof(float)) != 0), 1);

  if (api_failed(clt_net_create(m, R, B, 2, &net, &E), "creating the net") ||
      api_failed(clt_net_write_params(net, flat, &E), "uploading the weights"))
    goto done;
  const size_t pixels = clt_shape_size(m->input);
  upload_bytes(net->input, 0, x->data, (size_t)B * pixels * sizeof(float));
  int *labels = inew((size_t)B);
  for (int b = 0; b < B; b++) {
    int64_t v; /* the member's data need not be aligned for int64 */
    memcpy(&v, (const char *)y->data + (size_t)b * sizeof v, sizeof v);
    labels[b] = (int)v;
  }
  upload_bytes(net->labels, 0, labels, (size_t)B * sizeof(int));
  size_t n;
  const int last = m->nlayers - 1;
  double *got = dnew((size_t)B * K);
  if (bn_inference) {
    /* Keras' training step runs these BatchNormalization layers on their moving
     * statistics and trains their gamma and beta (a tf.keras 2.x training=False
     * call on a trainable layer); the engine's training step runs frozen ones so,
     * not these yet. */
    printf("note: %s training mode not compared: BatchNormalization in inference mode\n", dir);
    goto inference;
  }
  clt_net_set_position(net, 1, 0, 0);
  if (api_failed(clt_net_forward_backward(net, B, 1.0f / (float)B, 0, 1, &E), "training step"))
    goto done;
  download(net->act[last], 0, got, (size_t)B * K);
  check("logits (training mode)", got, as_doubles(logits, &n), (size_t)B * K, TOL_LOGITS);
  float metrics[2];
  if (api_failed(clt_net_read_metrics(net, metrics, 1, &E), "reading the loss")) goto done;
  const double want_loss = as_doubles(loss, &n)[0], got_loss = metrics[0] / B;
  report("loss", fabs(got_loss - want_loss) / fabs(want_loss), TOL_LOSS, "");

  /* Every trainable weight's gradient (frozen layers' have none in Keras), by Keras'
   * layer and weight names. Errors are
   * relative to the tensor's largest gradient, but at least to a hundredth of the
   * model's: a bias before a BatchNormalization has a gradient of exactly 0 in exact
   * arithmetic, and both sides hold rounding noise there. */
  float *grads = hnew(m->flat_floats * sizeof(float));
  if (api_failed(clt_net_read_grads(net, grads, &E), "reading gradients")) goto done;
  int compared = 0, trainable = 0;
  double largest = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < m->nlayers; i++) {
      const clt_layer *l = &m->layers[i];
      for (int p = 0; p < l->nparams; p++) {
        const clt_param *q = &l->params[p];
        if (q->non_trainable || l->frozen) continue;
        char name[128];
        snprintf(name, sizeof name, "grad/%s/%s", l->name, q->name);
        if (!clt_npz_find(batch, name) && q->alias[0])
          numbered_grad(batch, l->name, q->alias, name, sizeof name);
        const clt_npz_array *g = clt_npz_find(batch, name);
        if (pass == 0) {
          trainable++;
          if (g && strcmp(g->dtype, "<f4") == 0 && g->bytes == q->size * sizeof(float)) {
            for (size_t j = 0; j < q->size; j++) largest = fmax(largest, fabs(f4_at(g, j)));
          }
          continue;
        }
        if (!(g = member(batch, name, "<f4"))) continue;
        if (g->bytes != q->size * sizeof(float)) {
          report(name, NAN, 0, "size differs from the model's");
          continue;
        }
        /* Read in place: a model has more weights than a case may allocate buffers. */
        double big = 1e-2 * largest, err = 0;
        size_t at = 0;
        for (size_t j = 0; j < q->size; j++) big = fmax(big, fabs(f4_at(g, j)));
        for (size_t j = 0; j < q->size; j++) {
          const double d = fabs((double)grads[q->offset + j] - f4_at(g, j)) / big;
          if (!(d <= err)) err = d, at = j;
        }
        char detail[160];
        snprintf(detail, sizeof detail, " at [%zu]: got %.8g want %.8g", at, grads[q->offset + at],
                 f4_at(g, at));
        report(name, err, TOL_GRAD, detail);
        compared++;
      }
    }
  }
  expect("every trainable weight has a Keras gradient", (size_t)(trainable - compared),
         (size_t)trainable);

  /* Inference: BatchNormalization's moving statistics, Dropout off. */
inference:
  if (api_failed(clt_net_forward_backward(net, B, 1.0f / (float)B, 1, 0, &E), "inference"))
    goto done;
  download(net->act[last], 0, got, (size_t)B * K);
  check("logits (inference mode)", got, as_doubles(logits_inf, &n), (size_t)B * K, TOL_LOGITS);

done:
  clt_net_destroy(net);
  clt_npz_free(batch);
  clt_model_free(m);
  case_end();
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_keras FIXTURE_DIR...\n");
    return 2;
  }
  replica_open();
  for (int i = 1; i < argc; i++) test_fixture(argv[i]);
  replica_close();
  return summary();
}
