#define _POSIX_C_SOURCE 200809L /* strdup */
#include "data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"
#include "photos.h"

static int limited(int count, long limit) {
  return limit > 0 && limit < count ? (int)limit : count;
}

/* The subsets become sources, which take them over. */
static int open_photos(clt_data *d, clt_err *e) {
  const clt_data_spec *sp = &d->spec;
  clt_photos *a = NULL, *b = NULL, *train = NULL, *test = NULL;
  clt_photos_set_max_pixels(sp->max_image_pixels); /* subsets keep the limit they open with */
  int status = clt_photos_open(sp->dir, sp->image_size, sp->validation_split, sp->seed, &a, &b, e);
  if (status) return status;
  if (sp->with_train) {
    train = a;
    test = b;
  } else {
    test = b ? b : a;
    if (b) clt_photos_free(a);
  }
  d->photos = 1;
  d->validation = b != NULL;
  d->ntrain = train ? limited(clt_photos_count(train), sp->train_limit) : 0;
  d->ntest = test ? limited(clt_photos_count(test), sp->test_limit) : 0;
  clt_augment_out_size(&sp->augment, sp->image_size, sp->image_size, &d->height, &d->width);
  d->channels = 3;
  d->classes = clt_photos_classes(train ? train : test);
  if (train)
    status = clt_photos_source_augmented(train, d->ntrain, &sp->augment, sp->seed, &d->train, e);
  if (test && status) clt_photos_free(test);
  else if (test)
    status = clt_photos_source_augmented(test, d->ntest, &sp->augment, sp->seed, &d->test, e);
  if (status) return status;
  d->class_names = clt_source_get_info(d->train ? d->train : d->test)->class_names;
  return CLT_OK;
}

/* The IDX files: the training ones (when training, or evaluating a validation
 * split of them) and the test ones (unless the validation split stands in). */
static int open_idx(clt_data *d, clt_err *e) {
  const clt_data_spec *sp = &d->spec;
  clt_dataset train = {0}, test = {0};
  const int split = sp->validation_split > 0;
  int status = CLT_OK;
  if ((sp->with_train || split) && (status = clt_idx_load_dir_async(sp->dir, "train", &train, e))) {
    /* Say what else the folder could have been. */
    if (strstr(e->msg, "no such file")) {
      clt_wrap(e, "%s has no class subfolders of photos, nor IDX files", sp->dir);
    }
    goto cleanup;
  }
  if (split) {
    if ((status = clt_dataset_split(&train, sp->validation_split, sp->dir, &test, e))) goto cleanup;
    d->validation = 1;
    d->test_first = train.count;
    if (!sp->with_train) clt_dataset_free(&train);
  } else if ((status = clt_idx_load_dir_async(sp->dir, "t10k", &test, e))) {
    if (!sp->with_train && strstr(e->msg, "no such file")) {
      clt_wrap(e, "%s has no class subfolders of photos, nor IDX files", sp->dir);
    }
    goto cleanup;
  }
  train.count = d->ntrain = limited(train.count, sp->train_limit);
  test.count = d->ntest = limited(test.count, sp->test_limit);
  if (sp->with_train && (test.height != train.height || test.width != train.width)) {
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: test images are %dx%d but training images are %dx%d",
                      sp->dir, test.height, test.width, train.height, train.width);
    goto cleanup;
  }
  d->height = test.height;
  d->width = test.width;
  d->channels = test.channels;
  d->classes = sp->with_train && train.classes > test.classes ? train.classes : test.classes;
  if (sp->with_train && (status = clt_idx_source(&train, &d->train, e))) goto cleanup;
  status = clt_idx_source(&test, &d->test, e);

cleanup:
  clt_dataset_free(&train);
  clt_dataset_free(&test);
  return status;
}

int clt_data_open(const clt_data_spec *spec, clt_data *d, clt_err *e) {
  memset(d, 0, sizeof *d);
  d->spec = *spec;
  int status = clt_photos_is_folder(spec->dir) ? open_photos(d, e) : open_idx(d, e);
  if (!status && !d->photos &&
      (spec->image_size_given || spec->max_image_pixels || spec->augment.n)) {
    /* IDX files come sized: a photo-folder option would be silently ignored. */
    status = clt_fail(e, CLT_ERR_ARG, "%s holds IDX files: --%s applies to photo folders only",
                      spec->dir,
                      spec->image_size_given   ? "image-size"
                      : spec->max_image_pixels ? "max-image-pixels"
                                               : "augment");
  }
  if (status) clt_data_close(d);
  return status;
}

int clt_data_reopen(clt_data *d, int image_size, uint64_t seed, clt_err *e) {
  if (!d->photos || (image_size == d->spec.image_size && seed == d->spec.seed)) return CLT_OK;
  clt_data_spec spec = d->spec;
  spec.image_size = image_size;
  spec.seed = seed;
  clt_data_close(d);
  return clt_data_open(&spec, d, e);
}

int clt_data_set_augment(clt_data *d, const clt_augment *aug, clt_err *e) {
  clt_data_spec spec = d->spec;
  spec.augment = *aug;
  clt_data_close(d);
  return clt_data_open(&spec, d, e);
}

void clt_data_close(clt_data *d) {
  clt_source_free(d->train);
  clt_source_free(d->test);
  d->train = d->test = NULL;
  d->class_names = NULL;
}

int clt_data_check_input(const clt_data *d, const char *model, int height, int width, int channels,
                         int classes, clt_err *e) {
  if (d->height != height || d->width != width || d->channels != channels) {
    /* Only the size of photos can be changed, and only by a flag not already set. */
    const int resizable = d->photos && d->channels == channels && height == width &&
                          !clt_augment_has(&d->spec.augment, CLT_AUG_CROP);
    char hint[64] = "";
    if (resizable && !d->spec.image_size_given)
      snprintf(hint, sizeof hint, " (set --image-size %d)", height);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: images are %dx%dx%d, model %s expects %dx%dx%d%s",
                    d->spec.dir, d->height, d->width, d->channels, model, height, width, channels,
                    hint);
  }
  if (d->classes != classes) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: %d class%s, model has %d output%s", d->spec.dir,
                    d->classes, d->classes == 1 ? "" : "es", classes, classes == 1 ? "" : "s");
  }
  return CLT_OK;
}

/* Joins the class names with `sep`. */
static char *join_names(const clt_data *d, char sep) {
  size_t size = 1;
  for (int c = 0; c < d->classes; c++) size += strlen(d->class_names[c]) + 1;
  char *names = malloc(size), *at = names;
  if (!names) return NULL;
  for (int c = 0; c < d->classes; c++) {
    const size_t len = strlen(d->class_names[c]);
    if (c) *at++ = sep;
    memcpy(at, d->class_names[c], len);
    at += len;
  }
  *at = '\0';
  return names;
}

int clt_data_class_names(const clt_data *d, char **names, clt_err *e) {
  *names = NULL;
  if (!d->class_names) return CLT_OK;
  if (!(*names = join_names(d, '\n'))) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  return CLT_OK;
}

int clt_data_check_classes(const clt_data *d, const char *trained, const char *ckpt, clt_err *e) {
  int status = CLT_OK;
  char *mine = NULL, *want = NULL;
  if (!d->class_names || !trained) return CLT_OK;
  if (!(mine = join_names(d, '\n'))) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  if (strcmp(mine, trained) != 0) {
    /* One line: the names separated by commas. */
    for (char *c = mine; *c; c++) *c = *c == '\n' ? ',' : *c;
    want = strdup(trained);
    for (char *c = want; c && *c; c++) *c = *c == '\n' ? ',' : *c;
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: trained on classes (%s), but %s has (%s)", ckpt,
                      want ? want : "?", d->spec.dir, mine);
  }
  free(mine);
  free(want);
  return status;
}
