/* cltrain_model: a model and its starting weights, made as `cltrain train` makes
 * them for the same --model, --weights, --seed, --preprocess and --freeze-until
 * (src/app/train_setup.c), so a custom loop starts from the command's weights,
 * bit for bit; or a checkpoint's model and trained weights. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"
#include "checkpoint.h"
#include "keras.h"
#include "weights.h"

static const char *const create_options[] = {"input", "classes",      "weights", "preprocess",
                                             "seed",  "freeze-until", NULL};

/* --freeze-until's value that freezes no layer (unless a layer is so named). */
#define FREEZE_NONE "none"

/* What cltrain_model_create reads from its options. */
typedef struct model_opts {
  clt_shape input;
  int input_given;
  long classes;
  const char *weights, *preprocess, *freeze_until;
  uint64_t seed;
} model_opts;

/* "HxWxC" into *s, each dimension within the model's bounds. */
static int parse_input(cltrain_ctx *ctx, const char *fn, const char *v, clt_shape *s) {
  long d[3] = {0, 0, 0};
  const char *p = v;
  for (int i = 0; i < 3; i++) {
    char *end = NULL;
    errno = 0;
    if (*p < '0' || *p > '9') break;
    d[i] = strtol(p, &end, 10);
    if (errno) break;
    p = end;
    if (i < 2 && *p != 'x') break;
    if (i < 2) p++;
    if (i == 2 && *p) d[2] = 0;
  }
  if (d[0] < 1 || d[1] < 1 || d[2] < 1 || d[0] > CLT_MODEL_MAX_SIDE || d[1] > CLT_MODEL_MAX_SIDE ||
      d[2] > CLT_MODEL_MAX_CHANNELS)
    return api_fail(ctx, fn, CLTRAIN_ERR_ARG,
                    "option input=%s: expected HxWxC, sides in [1, %d], channels in [1, %d]", v,
                    CLT_MODEL_MAX_SIDE, CLT_MODEL_MAX_CHANNELS);
  *s = (clt_shape){(int)d[0], (int)d[1], (int)d[2]};
  return CLTRAIN_OK;
}

static int read_options(cltrain_ctx *ctx, const char *fn, const char *text, model_opts *mo) {
  memset(mo, 0, sizeof *mo);
  api_opts *o = malloc(sizeof *o);
  if (!o) return api_fail(ctx, fn, CLTRAIN_ERR_NOMEM, "out of host memory");
  mo->seed = 42; /* the train command's --seed */
  int status = api_opts_parse(ctx, fn, text, create_options, o);
  if (!status) status = api_opt_long(ctx, fn, o, "classes", 1, CLT_MODEL_MAX_CLASSES, &mo->classes);
  const char *input = api_opt(o, "input"), *seed = api_opt(o, "seed");
  if (!status && input) {
    status = parse_input(ctx, fn, input, &mo->input);
    mo->input_given = 1;
  }
  if (!status && seed) {
    char *end = NULL;
    mo->seed = strtoull(seed, &end, 10);
    if (!*seed || *seed == '-' || *seed == '+' || *end)
      status = api_fail(ctx, fn, CLTRAIN_ERR_ARG, "option seed=%s: expected a non-negative integer",
                        seed);
  }
  /* The strings point into o, which the caller keeps: copy them out of it. */
  static const char *const strings[] = {"weights", "preprocess", "freeze-until"};
  const char **into[] = {&mo->weights, &mo->preprocess, &mo->freeze_until};
  for (int i = 0; i < 3 && !status; i++) {
    const char *v = api_opt(o, strings[i]);
    if (v && !*v) status = api_fail(ctx, fn, CLTRAIN_ERR_ARG, "option %s: empty value", strings[i]);
    else if (v && !(*into[i] = strdup(v)))
      status = api_fail(ctx, fn, CLTRAIN_ERR_NOMEM, "out of host memory");
  }
  free(o);
  return status;
}

static void free_options(model_opts *mo) {
  free((char *)mo->weights);
  free((char *)mo->preprocess);
  free((char *)mo->freeze_until);
}

/* preprocess=: a model file's or description's input (built-in models have their own). */
static int parse_preprocess(const char *text, clt_preprocess *pre, clt_err *e) {
  static const char *const names[] = {"unit", "caffe", "raw"}; /* by clt_preprocess */
  *pre = CLT_PRE_RAW;
  if (!text) return CLT_OK;
  for (int p = 0; p < 3; p++) {
    if (strcmp(text, names[p]) == 0) {
      *pre = (clt_preprocess)p;
      return CLT_OK;
    }
  }
  return clt_fail(e, CLT_ERR_ARG, "option preprocess=%s: expected raw, unit or caffe", text);
}

/* The images a model file's input takes: photos as decoded, before any crop. */
static clt_shape decoded_shape(const clt_data *d) {
  if (!d->photos) return (clt_shape){d->height, d->width, d->channels};
  return (clt_shape){d->spec.image_size, d->spec.image_size, d->channels};
}

/* A Keras model file, for data of `shape` (a dataset's as decoded) and classes.
 * Its augmentation layers run in the photo loader where --augment's would: the
 * dataset must have been opened with them (a const dataset cannot be reopened). */
static int keras_model(const char *path, const model_opts *mo, const clt_data *data,
                       clt_shape shape, int classes, clt_model *m, char **json, clt_err *e) {
  clt_preprocess pre;
  int status = parse_preprocess(mo->preprocess, &pre, e);
  if (status) return status;
  clt_shape fixed;
  clt_err ignored = {0};
  /* The command resizes a photo folder to the file's input; a dataset opened
   * already says how to. (A file that does not say: the load below tells.) */
  if (data && data->photos && !data->spec.image_size_given &&
      clt_keras_input_shape(path, &fixed, &ignored) == CLT_OK && fixed.h && fixed.h == fixed.w &&
      fixed.h != data->spec.image_size && (!fixed.c || fixed.c == data->channels)) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s takes %dx%d images: open the photo folder with image-size=%d (it is at "
                    "%d)",
                    path, fixed.h, fixed.w, fixed.h, data->spec.image_size);
  }
  clt_augment layers = {0};
  const clt_keras_opts ko = {.data = shape,
                             .classes = classes,
                             .preprocess = pre,
                             .weights_given = mo->weights != NULL,
                             .augment = &layers};
  if ((status = clt_keras_load(path, &ko, m, json, e))) return status;
  if (!layers.n) return CLT_OK;
  char text[CLT_AUG_TEXT_MAX], had[CLT_AUG_TEXT_MAX];
  clt_augment_format(&layers, text, sizeof text);
  if (!data || !data->photos) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: its augmentation layers (RandomFlip, ...) need a photo folder dataset%s%s",
                    path, data ? "; " : "", data ? "it holds IDX files or memory" : "");
  }
  clt_augment_format(&data->spec.augment, had, sizeof had);
  if (strcmp(text, had) != 0) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s has augmentation layers: open the dataset with augment=%s (it has %s)",
                    path, text, had[0] ? had : "none");
  }
  return CLT_OK;
}

/* The input shape and classes of a model without a dataset: the options', or
 * for a model file the input it declares. */
static int shape_without_data(const char *model, const model_opts *mo, clt_shape *input,
                              int *classes, clt_err *e) {
  *input = mo->input;
  *classes = (int)mo->classes;
  if (!mo->input_given && clt_keras_is_file(model)) {
    int status = clt_keras_input_shape(model, input, e);
    if (status) return status;
    if (!input->h || !input->w || !input->c)
      return clt_fail(e, CLT_ERR_ARG, "%s leaves its input size open: give input=HxWxC", model);
  }
  if (!input->h) return clt_fail(e, CLT_ERR_ARG, "no dataset: give options input=HxWxC");
  if (!*classes) return clt_fail(e, CLT_ERR_ARG, "no dataset: give option classes=N");
  return CLT_OK;
}

/* The model of `model` (a built-in name, a model file or a description) for the
 * data, as train_setup.c's setup_model builds it for a fresh run. */
static int build_model(const char *model, const model_opts *mo, const clt_data *data,
                       cltrain_model *out, clt_err *e) {
  clt_model *m = out->model;
  clt_shape input;
  int classes, status;
  if (data) {
    input = (clt_shape){data->height, data->width, data->channels};
    classes = data->classes;
  } else if ((status = shape_without_data(model, mo, &input, &classes, e))) {
    return status;
  }
  const size_t n = strlen(model);
  const int json = n > 5 && strcmp(model + n - 5, ".json") == 0;
  if (strchr(model, '=') && !json) {
    /* A model description: "name=Kind(args) ..." (a file name has no '='). */
    clt_preprocess pre;
    if (!(status = parse_preprocess(mo->preprocess, &pre, e)))
      status = clt_model_parse("custom", input, classes, pre, model, m, e);
  } else if (clt_keras_is_file(model)) {
    status = keras_model(model, mo, data, data ? decoded_shape(data) : input, classes, m,
                         &out->keras_json, e);
  } else if (!clt_model_is_builtin(model, NULL)) {
    return clt_fail(e, CLT_ERR_ARG,
                    "unknown model '%s': expected a built-in model (%s), a Keras model file "
                    "(.json) or a model description (name=Kind(args) ...)",
                    model, clt_model_names);
  } else if (mo->preprocess) {
    return clt_fail(e, CLT_ERR_ARG,
                    "option preprocess applies to model files; built-in model %s has its own",
                    model);
  } else if ((status = clt_model_build(model, input, classes, m, e)) && e->code == CLT_ERR_FORMAT &&
             data) {
    clt_wrap(e, "%s", data->spec.dir);
  }
  if (status) return status;
  if (data && (status = clt_data_check_input(data, m->name, m->input.h, m->input.w, m->input.c,
                                             m->classes, e)))
    return status;
  return data ? clt_data_class_names(data, &out->class_names, e) : CLT_OK;
}

/* freeze-until (train_setup.c's freeze_until for a fresh run): every layer up to
 * the one it names frozen, on top of a model file's; none unfreezes those; laid out. */
static int freeze_until(const char *until, clt_model *m, clt_err *e) {
  int status = CLT_OK;
  const int none = until && strcmp(until, FREEZE_NONE) == 0 && clt_model_find(m, FREEZE_NONE) < 0;
  for (int i = 0; i < m->nlayers && none; i++) m->layers[i].frozen = 0;
  if (until && !none) status = clt_model_freeze_until(m, until, "option freeze-until", e);
  clt_model_layout(m);
  if (!status && m->trainable_floats == 0) {
    if (until) {
      return clt_fail(e, CLT_ERR_ARG,
                      "option freeze-until=%s freezes every layer of model %s that has weights: "
                      "nothing to train",
                      until, m->name);
    }
    return clt_fail(e, CLT_ERR_ARG,
                    "model %s: every layer that has weights is frozen: nothing to train", m->name);
  }
  return status;
}

static cltrain_model *model_new(cltrain_ctx *ctx) {
  cltrain_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->h.kind = API_MODEL;
  m->ctx = ctx;
  if (!(m->model = calloc(1, sizeof *m->model))) {
    free(m);
    return NULL;
  }
  return m;
}

CLTRAIN_API int cltrain_model_create(cltrain_ctx *ctx, const char *model,
                                     const cltrain_dataset *data, const char *options,
                                     cltrain_model **out) {
  int status = api_check(ctx, API_CTX, __func__);
  if (status) return status;
  if (!out) return api_fail(ctx, __func__, CLTRAIN_ERR_ARG, "out is NULL");
  *out = NULL;
  if (!model || !*model) return api_fail(ctx, __func__, CLTRAIN_ERR_ARG, "no model given");
  if (data && (status = api_check(data, API_DATASET, __func__)))
    return api_fail(ctx, __func__, status, "%s", cltrain_errmsg(NULL) + strlen(__func__) + 2);
  model_opts mo;
  if ((status = read_options(ctx, __func__, options, &mo))) {
    free_options(&mo);
    return status;
  }
  clt_err e = {0};
  cltrain_model *m = NULL;
  if (data && (mo.input_given || mo.classes)) {
    status = api_fail(ctx, __func__, CLTRAIN_ERR_ARG,
                      "options input and classes are for a model without a dataset: the dataset "
                      "gives them");
  } else if (!(m = model_new(ctx))) {
    status = api_fail(ctx, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  } else if (build_model(model, &mo, data ? &data->data : NULL, m, &e) ||
             freeze_until(mo.freeze_until, m->model, &e)) {
    status = api_fail_err(ctx, __func__, &e);
  } else if (!(m->weights = malloc(m->model->flat_floats * sizeof *m->weights))) {
    status = api_fail(ctx, __func__, CLTRAIN_ERR_NOMEM, "out of host memory for %zu weights",
                      m->model->flat_floats);
  } else {
    /* train_fresh_state, then --weights over it. */
    m->seed = mo.seed;
    clt_model_init_params(m->model, mo.seed, m->weights);
    if (mo.weights && clt_weights_load(m->model, mo.weights, m->weights, &e))
      status = api_fail_err(ctx, __func__, &e);
  }
  free_options(&mo);
  if (status) {
    cltrain_model_free(&m);
    return status;
  }
  *out = m;
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_model_from_checkpoint(cltrain_ctx *ctx, const char *checkpoint,
                                              cltrain_model **out) {
  int status = api_check(ctx, API_CTX, __func__);
  if (status) return status;
  if (!out) return api_fail(ctx, __func__, CLTRAIN_ERR_ARG, "out is NULL");
  *out = NULL;
  if (!checkpoint || !*checkpoint)
    return api_fail(ctx, __func__, CLTRAIN_ERR_ARG, "no checkpoint given");
  char path[4096];
  clt_err e = {0};
  clt_checkpoint st;
  memset(&st, 0, sizeof st);
  cltrain_model *m = model_new(ctx);
  if (!m) return api_fail(ctx, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  if (clt_checkpoint_resolve(checkpoint, path, sizeof path, &e) ||
      clt_checkpoint_model(path, m->model, &e) || clt_checkpoint_load(path, m->model, 0, &st, &e)) {
    status = api_fail_err(ctx, __func__, &e);
    clt_checkpoint_free(&st);
    cltrain_model_free(&m);
    return status;
  }
  /* The trained weights, and what a save of this model keeps of the run. */
  m->weights = st.params;
  m->seed = st.seed;
  m->keras_json = st.keras_json;
  m->class_names = st.class_names;
  st.params = NULL;
  st.keras_json = st.class_names = NULL;
  clt_checkpoint_free(&st);
  *out = m;
  return CLTRAIN_OK;
}

CLTRAIN_API void cltrain_model_free(cltrain_model **m) {
  if (!m || !*m || (*m)->h.kind != API_MODEL) return;
  cltrain_model *mm = *m;
  if (mm->model) clt_model_free(mm->model);
  free(mm->model);
  free(mm->weights);
  free(mm->keras_json);
  free(mm->class_names);
  mm->h.kind = API_FREED;
  free(mm);
  *m = NULL;
}

CLTRAIN_API const char *cltrain_model_name(const cltrain_model *m) {
  if (api_check(m, API_MODEL, __func__)) return NULL;
  return m->model->name;
}

CLTRAIN_API size_t cltrain_model_param_count(const cltrain_model *m) {
  if (api_check(m, API_MODEL, __func__)) return 0;
  return m->model->param_count;
}

CLTRAIN_API int cltrain_model_input(const cltrain_model *m, int *height, int *width,
                                    int *channels) {
  const int status = api_check(m, API_MODEL, __func__);
  if (status) return status;
  if (height) *height = m->model->input.h;
  if (width) *width = m->model->input.w;
  if (channels) *channels = m->model->input.c;
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_model_classes(const cltrain_model *m) {
  if (api_check(m, API_MODEL, __func__)) return -1;
  return m->model->classes;
}

/* snprintf into buf at *len, counting what did not fit (as snprintf returns). */
static void put(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t size, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
  va_end(ap);
  if (n > 0) *len += (size_t)n;
}

CLTRAIN_API int cltrain_model_summary(const cltrain_model *m, char *buf, size_t size) {
  if (api_check(m, API_MODEL, __func__)) return -1;
  if (!buf) size = 0;
  if (size) buf[0] = '\0';
  const clt_model *mm = m->model;
  size_t len = 0;
  int frozen = 0;
  size_t frozen_params = 0;
  /* The first line is the one `cltrain train` starts its plan with. */
  put(buf, size, &len, "Model %s: %zu parameters, %d layer%s; input %dx%dx%d, %d classes\n",
      mm->name, mm->param_count, mm->nlayers, mm->nlayers == 1 ? "" : "s", mm->input.h, mm->input.w,
      mm->input.c, mm->classes);
  put(buf, size, &len, "  %-28s %-20s %-16s %s\n", "Layer", "Kind", "Output", "Parameters");
  for (int i = 0; i < mm->nlayers; i++) {
    const clt_layer *l = &mm->layers[i];
    size_t params = 0;
    for (int p = 0; p < l->nparams; p++) params += l->params[p].size;
    char shape[48];
    snprintf(shape, sizeof shape, "%dx%dx%d", l->out.h, l->out.w, l->out.c);
    put(buf, size, &len, "  %-28s %-20s %-16s %zu%s\n", l->name, l->ops->kind, shape, params,
        l->frozen ? " (frozen)" : "");
    frozen += l->frozen;
    if (l->frozen) frozen_params += params;
  }
  if (frozen) {
    put(buf, size, &len, "Frozen: %d of %d layers, %zu of %zu parameters not trained\n", frozen,
        mm->nlayers, frozen_params, mm->param_count);
  }
  return len > (size_t)INT32_MAX ? -1 : (int)len;
}
