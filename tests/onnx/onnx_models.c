/* Exports models to ONNX without an OpenCL device, for tests/onnx/test_onnx_models.sh
 * to run in ONNX Runtime (check_onnx.py) against numbers cltrain did not make:
 *
 *   onnx_models keras DIR OUT.onnx
 *     DIR/model.json (a Keras fixture of tests/models) with DIR/weights.npz, for
 *     the input and classes of DIR/batch.npz; raw preprocessing. The fixture's
 *     batch.npz holds Keras' own logits on its input (x, logits_inference).
 *   onnx_models builtin NAME H W C CLASSES OUTDIR COUNT
 *     built-in model NAME with random weights (biases and BatchNormalization's
 *     parameters and statistics too) and COUNT random images: OUTDIR/model.onnx,
 *     OUTDIR/images.npy (float32 pixel values 0..255) and OUTDIR/logits.npy, the
 *     double-precision reference interpreter's logits (each kind's ref_forward on
 *     the preprocessed images, as cl/data.cl preprocesses them). NAME may also be a
 *     model description (raw pixels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keras.h"
#include "model.h"
#include "npz.h"
#include "onnx.h"
#include "weights.h"

static int fail(const clt_err *e) {
  fprintf(stderr, "onnx_models: %s\n", e->msg);
  return 1;
}

static int keras(const char *dir, const char *out) {
  static clt_model m;
  clt_err e = {0};
  char path[4096];
  clt_npz *batch = NULL;
  float *flat = NULL;
  snprintf(path, sizeof path, "%s/batch.npz", dir);
  int status = clt_npz_read(path, &batch, &e);
  const clt_npz_array *x = status ? NULL : clt_npz_find(batch, "x");
  const clt_npz_array *logits = status ? NULL : clt_npz_find(batch, "logits_inference");
  if (!status && (!x || !logits || x->rank != 4 || logits->rank != 2))
    status = clt_fail(&e, CLT_ERR_FORMAT, "%s: no x (B,H,W,C) or logits_inference (B,K)", path);
  if (!status) {
    const clt_keras_opts ko = {.data = {(int)x->dims[1], (int)x->dims[2], (int)x->dims[3]},
                               .classes = (int)logits->dims[1],
                               .preprocess = CLT_PRE_RAW,
                               .weights_given = 1};
    snprintf(path, sizeof path, "%s/model.json", dir);
    status = clt_keras_load(path, &ko, &m, NULL, &e);
  }
  if (!status && !(flat = calloc(m.flat_floats, sizeof *flat)))
    status = clt_fail(&e, CLT_ERR_NOMEM, "out of memory");
  /* What the model file gives (a Normalization's constants) is in no weights file. */
  if (!status) clt_model_init_params(&m, 1, flat);
  snprintf(path, sizeof path, "%s/weights.npz", dir);
  if (!status) status = clt_weights_load(&m, path, flat, &e);
  if (!status) status = clt_onnx_export(&m, flat, out, &e);
  free(flat);
  clt_npz_free(batch);
  if (status) return fail(&e);
  printf("%s: %d layers exported to %s\n", dir, m.nlayers, out);
  return 0;
}

static uint64_t state = 0x9e3779b97f4a7c15u;
static double uniform(void) { /* [0, 1) */
  state = state * 6364136223846793005u + 1442695040888963407u;
  return (double)(state >> 11) / 9007199254740992.0;
}

/* One random pixel of `channels` (at most 4) values: its float pixel values into
 * image, and cl/data.cl's preprocessing of them into x. */
static void random_pixel(clt_preprocess pre, int channels, float *image, double *x) {
  static const float means[3] = {103.939f, 116.779f, 123.68f}; /* BGR */
  unsigned char v[4] = {0};
  for (int c = 0; c < channels && c < 4; c++) {
    v[c] = (unsigned char)(256 * uniform());
    image[c] = v[c];
  }
  for (int c = 0; c < channels && c < 4; c++) {
    if (pre == CLT_PRE_UNIT) x[c] = (float)v[c] * (1.0f / 255.0f);
    if (pre == CLT_PRE_RAW) x[c] = (float)v[c];
    if (pre == CLT_PRE_CAFFE) x[c] = c < 3 ? (float)v[2 - c] - means[c] : 0;
  }
}

static int save(const char *dir, const char *name, const float *data, int rank, const int64_t *dims,
                clt_err *e) {
  char path[4096];
  clt_npz_array a = {.name = "x", .dtype = "<f4", .rank = rank, .data = data, .bytes = 4};
  for (int d = 0; d < rank; d++) a.dims[d] = dims[d], a.bytes *= (size_t)dims[d];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return clt_npy_write(path, &a, e);
}

static int builtin(const char *name, clt_shape in, int classes, const char *dir, int count) {
  static clt_model m;
  clt_err e = {0};
  char path[4096];
  /* A description ("a=Conv2D(...) ...") of raw images, or a built-in model's name. */
  if (strchr(name, '(') ? clt_model_parse("described", in, classes, CLT_PRE_RAW, name, &m, &e)
                        : clt_model_build(name, in, classes, &m, &e))
    return fail(&e);
  const size_t pixels = clt_shape_size(in) * (size_t)count;
  float *flat = calloc(m.flat_floats, sizeof *flat), *images = malloc(pixels * sizeof *images);
  float *logits = malloc((size_t)count * classes * sizeof *logits);
  double *params = malloc(m.flat_floats * sizeof *params), *x = malloc(pixels * sizeof *x);
  double **act = calloc((size_t)m.nlayers, sizeof *act);
  int status = flat && images && logits && params && x && act
                   ? CLT_OK
                   : clt_fail(&e, CLT_ERR_NOMEM, "out of memory");
  if (!status) {
    clt_model_init_params(&m, 1, flat);
    /* Constant-initialised parameters (biases, BatchNormalization's) made random. */
    for (int i = 0; i < m.nlayers; i++)
      for (int p = 0; p < m.layers[i].nparams; p++) {
        const clt_param *q = &m.layers[i].params[p];
        if (q->glorot_fan_in != 0) continue;
        for (size_t j = 0; j < q->size; j++)
          flat[q->offset + j] = q->init_constant + (float)(0.4 * uniform() - 0.2);
      }
    for (size_t j = 0; j < m.flat_floats; j++) params[j] = flat[j];
    for (size_t j = 0; j < pixels; j += (size_t)in.c)
      random_pixel(m.preprocess, in.c, images + j, x + j);
    for (int i = 0; i < m.nlayers && !status; i++) {
      const clt_layer *l = &m.layers[i];
      if (!(act[i] = malloc(clt_shape_size(l->out) * (size_t)count * sizeof(double)))) {
        status = clt_fail(&e, CLT_ERR_NOMEM, "out of memory");
        break;
      }
      clt_ref_io io = {.batch = count, .params = params, .y = act[i]};
      io.x = l->inputs[0] < 0 ? x : act[l->inputs[0]];
      if (l->ninputs > 1) io.x2 = l->inputs[1] < 0 ? x : act[l->inputs[1]];
      l->ops->ref_forward(l, &io);
    }
  }
  if (!status) {
    for (size_t j = 0; j < (size_t)count * classes; j++) logits[j] = (float)act[m.nlayers - 1][j];
    const int64_t idims[4] = {count, in.h, in.w, in.c}, ldims[2] = {count, classes};
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    status = clt_onnx_export(&m, flat, path, &e);
    if (!status) status = save(dir, "images.npy", images, 4, idims, &e);
    if (!status) status = save(dir, "logits.npy", logits, 2, ldims, &e);
  }
  for (int i = 0; act && i < m.nlayers; i++) free(act[i]);
  free(act);
  free(x);
  free(params);
  free(logits);
  free(images);
  free(flat);
  if (status) return fail(&e);
  printf("%s %dx%dx%d: %d layers exported to %s/model.onnx\n", name, in.h, in.w, in.c, m.nlayers,
         dir);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "keras") == 0) return keras(argv[2], argv[3]);
  if (argc == 9 && strcmp(argv[1], "builtin") == 0) {
    const clt_shape in = {atoi(argv[3]), atoi(argv[4]), atoi(argv[5])};
    return builtin(argv[2], in, atoi(argv[6]), argv[7], atoi(argv[8]));
  }
  fprintf(stderr, "usage: onnx_models keras DIR OUT.onnx\n"
                  "       onnx_models builtin NAME H W C CLASSES OUTDIR COUNT\n");
  return 2;
}
