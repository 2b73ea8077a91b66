/* cltrain_dataset: a data folder opened as `cltrain train` opens --data, or
 * images in the caller's memory behind the same batch-source interface. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"
#include "idx.h"

/* The option names, as the train command's flags. */
static const char *const open_options[] = {"train-limit",      "test-limit", "image-size",
                                           "validation-split", "seed",       "augment",
                                           "max-image-pixels", NULL};

/* The dataset's options into spec, with the ranges of the train command's flag
 * table (src/app/flags.c) and its defaults (image size 224, seed 42). */
static int read_options(cltrain_ctx *d, const char *fn, const api_opts *o, clt_data_spec *spec) {
  long image_size = 224, pixels = 0;
  int status = api_opt_long(d, fn, o, "train-limit", 0, INT_MAX, &spec->train_limit);
  if (!status) status = api_opt_long(d, fn, o, "test-limit", 0, INT_MAX, &spec->test_limit);
  if (!status) status = api_opt_long(d, fn, o, "image-size", 8, 4096, &image_size);
  if (!status)
    status = api_opt_double(d, fn, o, "validation-split", 0, 0.99, &spec->validation_split);
  if (!status) status = api_opt_long(d, fn, o, "max-image-pixels", 1, 1000000000000L, &pixels);
  if (status) return status;
  spec->image_size = (int)image_size;
  spec->image_size_given = api_opt(o, "image-size") != NULL;
  spec->validation_split_given = api_opt(o, "validation-split") != NULL;
  spec->max_image_pixels = pixels;
  spec->seed = 42;
  const char *seed = api_opt(o, "seed");
  if (seed) {
    char *end = NULL;
    spec->seed = strtoull(seed, &end, 10);
    if (!*seed || *seed == '-' || *seed == '+' || *end)
      return api_fail(d, fn, CLTRAIN_ERR_ARG, "option seed=%s: expected a non-negative integer",
                      seed);
  }
  const char *augment = api_opt(o, "augment");
  clt_err e = {0};
  if (augment && clt_augment_parse(augment, &spec->augment, &e)) {
    clt_wrap(&e, "option augment");
    return api_fail_err(d, fn, &e);
  }
  return CLTRAIN_OK;
}

static cltrain_dataset *dataset_new(cltrain_ctx *ctx) {
  cltrain_dataset *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->h.kind = API_DATASET;
  d->ctx = ctx;
  return d;
}

CLTRAIN_API int cltrain_dataset_open(cltrain_ctx *ctx, const char *dir, const char *options,
                                     cltrain_dataset **out) {
  int status = api_check(ctx, API_CTX, __func__);
  if (status) return status;
  if (!out) return api_fail(ctx, __func__, CLTRAIN_ERR_ARG, "out is NULL");
  *out = NULL;
  if (!dir || !*dir) return api_fail(ctx, __func__, CLTRAIN_ERR_ARG, "no folder given");
  cltrain_dataset *d = dataset_new(ctx);
  api_opts *o = malloc(sizeof *o);
  if (!d || !o || !(d->dir = strdup(dir))) {
    status = api_fail(ctx, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
    goto fail;
  }
  clt_data_spec spec = {.dir = d->dir, .with_train = 1};
  if ((status = api_opts_parse(ctx, __func__, options, open_options, o)) ||
      (status = read_options(ctx, __func__, o, &spec)))
    goto fail;
  clt_err e = {0};
  if (clt_data_open(&spec, &d->data, &e)) {
    status = api_fail_err(ctx, __func__, &e);
    goto fail;
  }
  free(o);
  *out = d;
  return CLTRAIN_OK;
fail:
  free(o);
  cltrain_dataset_free(&d);
  return status;
}

CLTRAIN_API int cltrain_dataset_from_memory(cltrain_ctx *ctx, const uint8_t *images,
                                            const int32_t *labels, int count, int height, int width,
                                            int channels, int classes, cltrain_dataset **out) {
  int status = api_check(ctx, API_CTX, __func__);
  if (status) return status;
  const char *fn = __func__;
  if (!out) return api_fail(ctx, fn, CLTRAIN_ERR_ARG, "out is NULL");
  *out = NULL;
  if (!images || !labels)
    return api_fail(ctx, fn, CLTRAIN_ERR_ARG, "the %s are NULL", images ? "labels" : "images");
  if (count < 1) return api_fail(ctx, fn, CLTRAIN_ERR_ARG, "count %d: expected 1 or more", count);
  if (height < 1 || width < 1 || channels < 1 || height > CLT_MODEL_MAX_SIDE ||
      width > CLT_MODEL_MAX_SIDE || channels > CLT_MODEL_MAX_CHANNELS)
    return api_fail(ctx, fn, CLTRAIN_ERR_ARG,
                    "images of %dx%dx%d: each side in [1, %d], channels in [1, %d]", height, width,
                    channels, CLT_MODEL_MAX_SIDE, CLT_MODEL_MAX_CHANNELS);
  /* The labels are held as bytes on the devices, as IDX files' are. */
  if (classes < 1 || classes > 256)
    return api_fail(ctx, fn, CLTRAIN_ERR_ARG, "classes %d: expected 1 to 256", classes);
  /* The device gathers index the images with ints, as IDX files' (whose limit this is). */
  const size_t image = (size_t)height * width * channels;
  if (image * (size_t)count > (size_t)INT_MAX)
    return api_fail(ctx, fn, CLTRAIN_ERR_ARG,
                    "%d images of %dx%dx%d: more than %d bytes (give them in parts: a batch at a "
                    "time to cltrain_trainer_forward_backward_batch)",
                    count, height, width, channels, INT_MAX);
  for (int i = 0; i < count; i++) {
    if (labels[i] < 0 || labels[i] >= classes)
      return api_fail(ctx, fn, CLTRAIN_ERR_ARG, "label %d of example %d is outside [0, %d)",
                      (int)labels[i], i, classes);
  }
  cltrain_dataset *d = dataset_new(ctx);
  clt_dataset set = {.count = count,
                     .height = height,
                     .width = width,
                     .channels = channels,
                     .classes = classes,
                     .pixels = malloc(image * (size_t)count),
                     .labels = malloc((size_t)count)};
  if (d) d->labels = malloc((size_t)count * sizeof *d->labels);
  if (!d || !d->labels || !set.pixels || !set.labels) {
    clt_dataset_free(&set);
    cltrain_dataset_free(&d);
    return api_fail(ctx, fn, CLTRAIN_ERR_NOMEM, "out of host memory for %d images", count);
  }
  memcpy(set.pixels, images, image * (size_t)count);
  memcpy(d->labels, labels, (size_t)count * sizeof *d->labels);
  for (int i = 0; i < count; i++) set.labels[i] = (unsigned char)labels[i];
  d->memory = 1;
  d->images = set.pixels; /* the source's copy from here on */
  clt_err e = {0};
  /* An IDX set's source: uploaded to each replica once, gathered there per step. */
  if (clt_idx_source(&set, &d->data.train, &e)) {
    status = api_fail_err(ctx, fn, &e);
    cltrain_dataset_free(&d);
    return status;
  }
  clt_data *data = &d->data;
  data->spec.dir = "memory";
  data->ntrain = count;
  data->height = height;
  data->width = width;
  data->channels = channels;
  data->classes = classes;
  *out = d;
  return CLTRAIN_OK;
}

CLTRAIN_API void cltrain_dataset_free(cltrain_dataset **d) {
  if (!d || !*d || (*d)->h.kind != API_DATASET) return;
  cltrain_dataset *ds = *d;
  clt_data_close(&ds->data);
  free(ds->labels);
  free(ds->dir);
  ds->h.kind = API_FREED;
  free(ds);
  *d = NULL;
}

clt_source *api_dataset_source(cltrain_dataset *d, cltrain_part part) {
  if (part == CLTRAIN_TRAIN) return d->data.train;
  if (part == CLTRAIN_TEST) return d->data.test;
  return NULL;
}

CLTRAIN_API int cltrain_dataset_count(const cltrain_dataset *d, cltrain_part part) {
  if (api_check(d, API_DATASET, __func__)) return -1;
  if (part != CLTRAIN_TRAIN && part != CLTRAIN_TEST) {
    api_fail((cltrain_dataset *)d, __func__, CLTRAIN_ERR_ARG,
             "part %d: expected CLTRAIN_TRAIN or CLTRAIN_TEST", (int)part);
    return -1;
  }
  return part == CLTRAIN_TRAIN ? d->data.ntrain : d->data.ntest;
}

CLTRAIN_API int cltrain_dataset_shape(const cltrain_dataset *d, int *height, int *width,
                                      int *channels) {
  const int status = api_check(d, API_DATASET, __func__);
  if (status) return status;
  if (height) *height = d->data.height;
  if (width) *width = d->data.width;
  if (channels) *channels = d->data.channels;
  return CLTRAIN_OK;
}

CLTRAIN_API int cltrain_dataset_classes(const cltrain_dataset *d) {
  if (api_check(d, API_DATASET, __func__)) return -1;
  return d->data.classes;
}

CLTRAIN_API const char *cltrain_dataset_class_name(const cltrain_dataset *d, int k) {
  if (api_check(d, API_DATASET, __func__)) return NULL;
  if (!d->data.class_names || k < 0 || k >= d->data.classes) return NULL;
  return d->data.class_names[k];
}
