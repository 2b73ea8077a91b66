/* The public API's datasets and models (include/cltrain.h; src/api/dataset.c,
 * model.c): a Fashion-MNIST IDX folder and a tiny photo folder opened with the
 * train command's data options, a dataset in the caller's memory loaded onto a
 * replica through its batch source, models built from a built-in name, a model
 * description and a Keras model file with the starting weights the command
 * starts from (clt_model_init_params for the seed, --weights over them), a model
 * read back from a checkpoint, and bad use: each refused with a message that
 * starts with the function's name.
 *   test_api_model MAKE_PHOTOS FASHION_MNIST_DIR MODELS_DIR
 * Prints "ok: ..." or "FAIL: ..." per check and "N passed, M failed" last.
 * VERBOSE=1 prints each expected error message. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"
#include "backend.h"
#include "check.h"
#include "checkpoint.h"
#include "rng.h"
#include "weights.h"

static int verbose;
static char tmpdir[64];
static struct cltrain_ctx ctx_store; /* cltrain_open's part is another file's: made here */
static cltrain_ctx *ctx = &ctx_store;
static const char *fmnist, *models;

/* A refused call: status `want`, and the message on `handle` (and the thread's)
 * starts with "fn: " and contains needle. */
static void check_refused(int status, int want, const void *handle, const char *fn,
                          const char *needle, const char *what) {
  const char *msg = cltrain_errmsg(handle);
  const size_t n = strlen(fn);
  check(status == want, "%s: status %s, expected %s", what, cltrain_status_name(status),
        cltrain_status_name(want));
  check(strncmp(msg, fn, n) == 0 && msg[n] == ':' && strstr(msg, needle) != NULL,
        "%s: message \"%s\" starts with %s: and says \"%s\"", what, msg, fn, needle);
  check(strcmp(cltrain_errmsg(NULL), msg) == 0, "%s: the thread's message is the same", what);
  if (verbose) printf("  expected error (%s): %s\n", what, msg);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    printf("FAIL: out of host memory\n");
    exit(1);
  }
  return p;
}

/* ---- datasets ------------------------------------------------------------------ */

static void test_idx(void) {
  cltrain_dataset *d = NULL;
  int status = cltrain_dataset_open(ctx, fmnist, "train-limit=100 test-limit=50", &d);
  check(status == CLTRAIN_OK && d, "Fashion-MNIST opens: %s", cltrain_errmsg(ctx));
  if (status) return;
  int h = 0, w = 0, c = 0;
  check(cltrain_dataset_count(d, CLTRAIN_TRAIN) == 100 &&
            cltrain_dataset_count(d, CLTRAIN_TEST) == 50,
        "IDX: train-limit and test-limit: %d and %d examples",
        cltrain_dataset_count(d, CLTRAIN_TRAIN), cltrain_dataset_count(d, CLTRAIN_TEST));
  check(cltrain_dataset_shape(d, &h, &w, &c) == CLTRAIN_OK && h == 28 && w == 28 && c == 1 &&
            cltrain_dataset_classes(d) == 10 && cltrain_dataset_class_name(d, 0) == NULL,
        "IDX: 28x28x1 images of 10 unnamed classes (%dx%dx%d, %d)", h, w, c,
        cltrain_dataset_classes(d));
  check(api_dataset_source(d, CLTRAIN_TRAIN) == d->data.train &&
            clt_source_count(api_dataset_source(d, CLTRAIN_TRAIN)) == 100 &&
            clt_source_count(api_dataset_source(d, CLTRAIN_TEST)) == 50,
        "IDX: the parts' batch sources");
  check_refused(cltrain_dataset_count(d, (cltrain_part)2), -1, d, "cltrain_dataset_count", "part 2",
                "a part that does not exist");
  cltrain_dataset_free(&d);
  check(d == NULL, "cltrain_dataset_free sets the handle to NULL");
  cltrain_dataset_free(&d); /* a NULL handle: nothing */
  cltrain_dataset_free(NULL);

  /* Keras' validation_split: the last fifth of the training files held out. */
  status = cltrain_dataset_open(ctx, fmnist, "validation-split=0.2 train-limit=64 seed=3", &d);
  check(status == CLTRAIN_OK && cltrain_dataset_count(d, CLTRAIN_TRAIN) == 64 &&
            cltrain_dataset_count(d, CLTRAIN_TEST) == 12000 && d->data.validation,
        "IDX: validation-split=0.2 holds out 12000 examples (%d and %d): %s",
        cltrain_dataset_count(d, CLTRAIN_TRAIN), cltrain_dataset_count(d, CLTRAIN_TEST),
        cltrain_errmsg(ctx));
  cltrain_dataset_free(&d);
  check_refused(cltrain_dataset_open(ctx, fmnist, "image-size=32", &d), CLTRAIN_ERR_ARG, ctx,
                "cltrain_dataset_open", "photo folders only", "image-size on IDX files");
  check(d == NULL, "a refused open leaves the handle NULL");
}

static void test_photos(const char *make_photos) {
  char dir[128], cmd[512];
  snprintf(dir, sizeof dir, "%s/photos", tmpdir);
  snprintf(cmd, sizeof cmd, "%s %s 3 4 5 >/dev/null", make_photos, dir);
  if (system(cmd) != 0) {
    check(0, "make_photos writes a photo folder");
    return;
  }
  cltrain_dataset *d = NULL;
  int status = cltrain_dataset_open(ctx, dir, "image-size=32 validation-split=0.25 seed=5", &d);
  check(status == CLTRAIN_OK, "photo folder opens: %s", cltrain_errmsg(ctx));
  if (status) return;
  int h = 0, w = 0, c = 0;
  const int ntrain = cltrain_dataset_count(d, CLTRAIN_TRAIN),
            ntest = cltrain_dataset_count(d, CLTRAIN_TEST);
  check(ntrain + ntest == 12 && ntest == 3, "photos: 12 examples, 3 held out (%d and %d)", ntrain,
        ntest);
  check(cltrain_dataset_shape(d, &h, &w, &c) == CLTRAIN_OK && h == 32 && w == 32 && c == 3,
        "photos: image-size=32 gives 32x32x3 (%dx%dx%d)", h, w, c);
  const char *n0 = cltrain_dataset_class_name(d, 0), *n2 = cltrain_dataset_class_name(d, 2);
  check(cltrain_dataset_classes(d) == 3 && n0 && strcmp(n0, "class_0") == 0 && n2 &&
            strcmp(n2, "class_2") == 0 && !cltrain_dataset_class_name(d, 3) &&
            !cltrain_dataset_class_name(d, -1),
        "photos: 3 classes named after their folders (%s, %s)", n0 ? n0 : "NULL", n2 ? n2 : "NULL");
  cltrain_dataset_free(&d);

  /* The augmentation, parsed as --augment: a crop sets the images' size. */
  status = cltrain_dataset_open(ctx, dir, "image-size=40 augment=flip=horizontal,crop=24x20", &d);
  check(status == CLTRAIN_OK && cltrain_dataset_shape(d, &h, &w, &c) == CLTRAIN_OK && h == 24 &&
            w == 20 && d->data.spec.augment.n == 2,
        "photos: augment=flip=horizontal,crop=24x20 crops to 24x20 (%dx%d): %s", h, w,
        cltrain_errmsg(ctx));
  /* A Keras model file on it needs its input: 28x28x1 is refused. */
  char json[512];
  cltrain_model *m = NULL;
  snprintf(json, sizeof json, "%s/seq_cnn/model.json", models);
  check_refused(cltrain_model_create(ctx, json, d, NULL, &m), CLTRAIN_ERR_FORMAT, ctx,
                "cltrain_model_create",
                "the model takes 28x28x1 images (0: any), the data's are 40x40x3",
                "a model of another input shape");
  cltrain_dataset_free(&d);
  /* A model file's augmentation layers: the dataset must be opened with them. */
  snprintf(dir, sizeof dir, "%s/photos5", tmpdir);
  snprintf(cmd, sizeof cmd, "%s %s 5 2 6 >/dev/null", make_photos, dir);
  snprintf(json, sizeof json, "%s/nested_augment/model.json", models);
  check(system(cmd) == 0 && cltrain_dataset_open(ctx, dir, NULL, &d) == CLTRAIN_OK,
        "a photo folder of 5 classes: %s", cltrain_errmsg(ctx));
  check_refused(cltrain_model_create(ctx, json, d, NULL, &m), CLTRAIN_ERR_ARG, ctx,
                "cltrain_model_create",
                "takes 16x16 images: open the photo folder with image-size=16",
                "a model file of another size than the photos'");
  cltrain_dataset_free(&d);
  check(cltrain_dataset_open(ctx, dir, "image-size=16", &d) == CLTRAIN_OK, "photos at 16x16: %s",
        cltrain_errmsg(ctx));
  check_refused(cltrain_model_create(ctx, json, d, NULL, &m), CLTRAIN_ERR_ARG, ctx,
                "cltrain_model_create", "has augmentation layers: open the dataset with augment=",
                "a model file's augmentation layers on a dataset without them");
  char augment[512] = "", opts[600];
  const char *at = strstr(cltrain_errmsg(ctx), "augment="), *end = at ? strchr(at, ' ') : NULL;
  if (at && end) snprintf(augment, sizeof augment, "%.*s", (int)(end - at), at);
  cltrain_dataset_free(&d);
  snprintf(opts, sizeof opts, "image-size=16 %s", augment);
  status = cltrain_dataset_open(ctx, dir, opts, &d);
  if (!status) status = cltrain_model_create(ctx, json, d, NULL, &m);
  check(status == CLTRAIN_OK && cltrain_model_classes(m) == 5,
        "a model file's augmentation layers on a dataset opened with %s: %s", augment,
        cltrain_errmsg(ctx));
  cltrain_model_free(&m);
  cltrain_dataset_free(&d);
  /* The pixel limit applies as the photos are decoded: kept for then. */
  status = cltrain_dataset_open(ctx, dir, "max-image-pixels=100", &d);
  check(status == CLTRAIN_OK && d->data.spec.max_image_pixels == 100,
        "photos: max-image-pixels=100 kept for the decoder: %s", cltrain_errmsg(ctx));
  cltrain_dataset_free(&d);
}

enum { MEM_N = 7, MEM_H = 5, MEM_W = 4, MEM_C = 3, MEM_CLASSES = 4 };

/* A memory dataset's source on a replica of the first device: one pass, the
 * images preprocessed as x / 255 and the labels, in the pass's order. */
static void load_memory_source(cltrain_dataset *d, const uint8_t *images, const int32_t *labels) {
  clt_device_list list = {0};
  clt_err e = {0};
  clt_replica *r = NULL;
  cl_mem x = NULL, y = NULL;
  const int pixels = MEM_H * MEM_W * MEM_C, global = 4;
  int status = clt_devices_enumerate(&list, &e);
  if (!status && list.count < 1) status = clt_fail(&e, CLT_ERR_DEVICE, "no OpenCL device");
  if (!status) status = clt_backend_create_replica(&list.devices[0], &r, &e);
  if (!status) status = clt_replica_alloc(r, (size_t)global * pixels * sizeof(float), "x", &x, &e);
  if (!status) status = clt_replica_alloc(r, (size_t)global * sizeof(int), "y", &y, &e);
  clt_source *s = api_dataset_source(d, CLTRAIN_TRAIN);
  const int max_slice[1] = {global};
  if (!status) status = clt_source_attach(s, &r, 1, global, max_slice, CLT_PRE_UNIT, &e);
  int order[MEM_N];
  clt_epoch_order(9, 0, order, MEM_N);
  if (!status) status = clt_source_begin(s, order, &e);
  int bad_x = 0, bad_y = 0, loaded = 0;
  for (int step = 0; !status && step * global < MEM_N; step++) {
    const int len = MEM_N - step * global < global ? MEM_N - step * global : global;
    float got[4 * MEM_H * MEM_W * MEM_C];
    int got_y[4];
    status = clt_source_load(s, 0, step, 0, len, x, y, NULL, &e);
    if (!status)
      status = clEnqueueReadBuffer(r->queue, x, CL_TRUE, 0, (size_t)len * pixels * sizeof(float),
                                   got, 0, NULL, NULL);
    if (!status)
      status = clEnqueueReadBuffer(r->queue, y, CL_TRUE, 0, (size_t)len * sizeof(int), got_y, 0,
                                   NULL, NULL);
    for (int k = 0; k < len && !status; k++, loaded++) {
      const int i = order[step * global + k];
      bad_y += got_y[k] != labels[i];
      for (int p = 0; p < pixels; p++)
        bad_x += got[k * pixels + p] != (float)images[i * pixels + p] * (1.0f / 255.0f);
    }
  }
  check(status == CLT_OK && loaded == MEM_N && !bad_x && !bad_y,
        "memory: a pass on a replica loads every image and label (%d loaded, %d values and %d "
        "labels differ): %s",
        loaded, bad_x, bad_y, status ? (e.msg[0] ? e.msg : clt_status_name(status)) : "");
  clt_source_detach(s);
  if (x) clReleaseMemObject(x);
  if (y) clReleaseMemObject(y);
  if (r) clt_backend_destroy_replica(r);
  clt_devices_free(&list);
}

static void test_memory(void) {
  enum { BYTES = MEM_N * MEM_H * MEM_W * MEM_C };
  uint8_t images[BYTES], kept[BYTES];
  int32_t labels[MEM_N];
  for (int i = 0; i < BYTES; i++) kept[i] = images[i] = (uint8_t)(i * 37 + 11);
  for (int i = 0; i < MEM_N; i++) labels[i] = (i * 3) % MEM_CLASSES;
  cltrain_dataset *d = NULL;
  const char *fn = "cltrain_dataset_from_memory";
  int status = cltrain_dataset_from_memory(ctx, images, labels, MEM_N, MEM_H, MEM_W, MEM_C,
                                           MEM_CLASSES, &d);
  check(status == CLTRAIN_OK && d, "memory: a dataset of %d images: %s", MEM_N,
        cltrain_errmsg(ctx));
  if (status) return;
  memset(images, 0, BYTES); /* copied: the caller's buffer may change */
  int h = 0, w = 0, c = 0;
  check(cltrain_dataset_count(d, CLTRAIN_TRAIN) == MEM_N &&
            cltrain_dataset_count(d, CLTRAIN_TEST) == 0 && !api_dataset_source(d, CLTRAIN_TEST),
        "memory: a training part only");
  check(cltrain_dataset_shape(d, &h, &w, &c) == CLTRAIN_OK && h == MEM_H && w == MEM_W &&
            c == MEM_C && cltrain_dataset_classes(d) == MEM_CLASSES &&
            !cltrain_dataset_class_name(d, 0),
        "memory: its shape and classes");
  load_memory_source(d, kept, labels);
  /* A model for it: its shape and classes come from the dataset. */
  cltrain_model *m = NULL;
  const char *desc = "flatten=Flatten dense=Dense(4)";
  status = cltrain_model_create(ctx, desc, d, "preprocess=unit", &m);
  check(status == CLTRAIN_OK && m && m->model->input.h == MEM_H && m->model->input.c == MEM_C &&
            cltrain_model_classes(m) == MEM_CLASSES && m->model->preprocess == CLT_PRE_UNIT,
        "memory: a described model takes its input and classes: %s", cltrain_errmsg(ctx));
  cltrain_model_free(&m);
  cltrain_dataset_free(&d);

  check_refused(cltrain_dataset_from_memory(ctx, kept, labels, 0, MEM_H, MEM_W, MEM_C, 4, &d),
                CLTRAIN_ERR_ARG, ctx, fn, "count 0", "count 0");
  check_refused(cltrain_dataset_from_memory(ctx, NULL, labels, MEM_N, MEM_H, MEM_W, MEM_C, 4, &d),
                CLTRAIN_ERR_ARG, ctx, fn, "images are NULL", "NULL images");
  check_refused(cltrain_dataset_from_memory(ctx, kept, NULL, MEM_N, MEM_H, MEM_W, MEM_C, 4, &d),
                CLTRAIN_ERR_ARG, ctx, fn, "labels are NULL", "NULL labels");
  check_refused(cltrain_dataset_from_memory(ctx, kept, labels, MEM_N, 0, MEM_W, MEM_C, 4, &d),
                CLTRAIN_ERR_ARG, ctx, fn, "images of 0x4x3", "a zero height");
  check_refused(cltrain_dataset_from_memory(ctx, kept, labels, MEM_N, MEM_H, MEM_W, MEM_C, 300, &d),
                CLTRAIN_ERR_ARG, ctx, fn, "classes 300", "more classes than bytes hold");
  labels[5] = MEM_CLASSES;
  check_refused(cltrain_dataset_from_memory(ctx, kept, labels, MEM_N, MEM_H, MEM_W, MEM_C, 4, &d),
                CLTRAIN_ERR_ARG, ctx, fn, "label 4 of example 5 is outside [0, 4)",
                "a label past the classes");
  labels[5] = -1;
  check_refused(cltrain_dataset_from_memory(ctx, kept, labels, MEM_N, MEM_H, MEM_W, MEM_C, 4, &d),
                CLTRAIN_ERR_ARG, ctx, fn, "label -1 of example 5", "a negative label");
  check_refused(cltrain_dataset_from_memory(ctx, kept, labels, 1 << 20, 64, 64, 3, 4, &d),
                CLTRAIN_ERR_ARG, ctx, fn, "more than 2147483647 bytes", "more bytes than fit");
  check_refused(cltrain_dataset_from_memory(NULL, kept, labels, 1, 1, 1, 1, 4, &d), CLTRAIN_ERR_ARG,
                NULL, fn, "the context is NULL", "a NULL context");
  check_refused(cltrain_dataset_from_memory(ctx, kept, labels, 1, 1, 1, 1, 4, NULL),
                CLTRAIN_ERR_ARG, ctx, fn, "out is NULL", "a NULL out");
  check(d == NULL, "memory: refused calls leave the handle NULL");
}

static void test_dataset_bad_use(void) {
  const char *fn = "cltrain_dataset_open";
  cltrain_dataset *d = NULL;
  static const struct {
    const char *options, *needle, *what;
  } bad[] = {
      {"colour=1", "unknown option 'colour'", "an unknown option"},
      {"train-limit=-1", "train-limit=-1: expected an integer in [0, 2147483647]",
       "a negative limit"},
      {"test-limit=ten", "test-limit=ten", "a limit that is not a number"},
      {"image-size=4", "image-size=4: expected an integer in [8, 4096]", "a tiny image size"},
      {"validation-split=1", "validation-split=1: expected a number in [0, 0.99]",
       "a split of everything"},
      {"seed=-3", "seed=-3: expected a non-negative integer", "a negative seed"},
      {"max-image-pixels=0", "max-image-pixels=0", "a zero pixel limit"},
      {"augment=wobble=1", "option augment", "an unknown augmentation"},
      {"seed", "'seed' is not name=value", "a name without a value"},
      {"seed=1 seed=2", "given twice", "an option given twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    check_refused(cltrain_dataset_open(ctx, fmnist, bad[i].options, &d), CLTRAIN_ERR_ARG, ctx, fn,
                  bad[i].needle, bad[i].what);
  }
  char missing[128];
  snprintf(missing, sizeof missing, "%s/no-such-folder", tmpdir);
  check_refused(cltrain_dataset_open(ctx, missing, NULL, &d), CLTRAIN_ERR_IO, ctx, fn,
                "no-such-folder", "a missing folder");
  check_refused(cltrain_dataset_open(NULL, fmnist, NULL, &d), CLTRAIN_ERR_ARG, NULL, fn,
                "the context is NULL", "a NULL context");
  check_refused(cltrain_dataset_open(ctx, NULL, NULL, &d), CLTRAIN_ERR_ARG, ctx, fn,
                "no folder given", "a NULL folder");
  check(d == NULL, "refused opens leave the handle NULL");
  /* The accessors on a NULL or foreign handle. */
  cltrain_model *m = NULL;
  cltrain_model_create(ctx, "fmnist-cnn", NULL, "input=28x28x1 classes=10", &m);
  const cltrain_dataset *foreign = (const cltrain_dataset *)(const void *)m;
  int h;
  check_refused(cltrain_dataset_count(NULL, CLTRAIN_TRAIN), -1, NULL, "cltrain_dataset_count",
                "the dataset is NULL", "count of NULL");
  check_refused(cltrain_dataset_count(foreign, CLTRAIN_TRAIN), -1, NULL, "cltrain_dataset_count",
                "not a dataset handle", "count of a model handle");
  check_refused(cltrain_dataset_shape(NULL, &h, &h, &h), CLTRAIN_ERR_ARG, NULL,
                "cltrain_dataset_shape", "the dataset is NULL", "shape of NULL");
  check_refused(cltrain_dataset_classes(NULL), -1, NULL, "cltrain_dataset_classes",
                "the dataset is NULL", "classes of NULL");
  check(cltrain_dataset_class_name(NULL, 0) == NULL, "class_name of NULL is NULL");
  check(cltrain_dataset_class_name(foreign, 0) == NULL, "class_name of a model handle is NULL");
  cltrain_dataset *as_dataset = (cltrain_dataset *)(void *)m;
  cltrain_dataset_free(&as_dataset); /* not a dataset: left alone */
  check(as_dataset != NULL && cltrain_model_classes(m) == 10,
        "cltrain_dataset_free leaves a model handle alone");
  cltrain_model_free(&m);
}

/* ---- models -------------------------------------------------------------------- */

/* The starting weights `cltrain train --model NAME --seed SEED` draws: the model
 * built, laid out, then clt_model_init_params (train_fresh_state). */
static int same_as_fresh(const cltrain_model *m, uint64_t seed) {
  float *want = xmalloc(m->model->flat_floats * sizeof *want);
  clt_model_init_params(m->model, seed, want);
  const int same = memcmp(want, m->weights, m->model->flat_floats * sizeof *want) == 0;
  free(want);
  return same;
}

static void test_builtin(void) {
  cltrain_dataset *d = NULL;
  cltrain_model *m = NULL, *m42 = NULL;
  if (cltrain_dataset_open(ctx, fmnist, "train-limit=64 test-limit=64", &d)) {
    check(0, "Fashion-MNIST opens: %s", cltrain_errmsg(ctx));
    return;
  }
  int status = cltrain_model_create(ctx, "fmnist-cnn", d, "seed=7", &m);
  check(status == CLTRAIN_OK && m, "fmnist-cnn for Fashion-MNIST: %s", cltrain_errmsg(ctx));
  if (status) {
    cltrain_dataset_free(&d);
    return;
  }
  static clt_model built;
  clt_err e = {0};
  int h = 0, w = 0, c = 0;
  status = clt_model_build("fmnist-cnn", (clt_shape){28, 28, 1}, 10, &built, &e);
  check(!status && built.flat_floats == m->model->flat_floats &&
            built.param_count == cltrain_model_param_count(m),
        "fmnist-cnn: the command's model (%zu parameters)", cltrain_model_param_count(m));
  const char *name = cltrain_model_name(m);
  check(name && strcmp(name, "fmnist-cnn") == 0 &&
            cltrain_model_input(m, &h, &w, &c) == CLTRAIN_OK && h == 28 && w == 28 && c == 1 &&
            cltrain_model_classes(m) == 10,
        "fmnist-cnn: name, input 28x28x1 and 10 classes");
  check(m->seed == 7 && same_as_fresh(m, 7),
        "fmnist-cnn seed=7: the command's weights for --seed 7");
  check(cltrain_model_create(ctx, "fmnist-cnn", d, NULL, &m42) == CLTRAIN_OK && m42->seed == 42 &&
            same_as_fresh(m42, 42) &&
            memcmp(m->weights, m42->weights, m->model->flat_floats * sizeof(float)) != 0,
        "fmnist-cnn: seed 42 by default, other weights than seed 7's");

  /* The summary: every layer, snprintf's contract. */
  char small[16], *text = NULL;
  const int len = cltrain_model_summary(m, NULL, 0);
  if (len > 0) text = xmalloc((size_t)len + 1);
  check(len > 0 && cltrain_model_summary(m, text, (size_t)len + 1) == len &&
            strlen(text) == (size_t)len && strncmp(text, "Model fmnist-cnn: ", 18) == 0,
        "summary: %d characters, starting as the command's line", len);
  int every = text != NULL;
  for (int i = 0; i < m->model->nlayers && every; i++)
    every = strstr(text, m->model->layers[i].name) != NULL;
  check(every, "summary: names every layer");
  check(cltrain_model_summary(m, small, sizeof small) == len && strlen(small) == sizeof small - 1 &&
            strncmp(small, text ? text : "", sizeof small - 1) == 0,
        "summary: a short buffer gets the start, the return the length needed");
  if (verbose && text) printf("%s", text);
  free(text);

  /* The same model from its description: the same layers, so the same weights. */
  char *desc = xmalloc(clt_describe_max(m->model->nlayers));
  clt_model_describe(m->model, desc, clt_describe_max(m->model->nlayers));
  cltrain_model *md = NULL;
  status = cltrain_model_create(ctx, desc, NULL, "input=28x28x1 classes=10 seed=7", &md);
  check(status == CLTRAIN_OK && md && strcmp(cltrain_model_name(md), "custom") == 0 &&
            md->model->flat_floats == m->model->flat_floats &&
            memcmp(md->weights, m->weights, m->model->flat_floats * sizeof(float)) == 0,
        "a model description of fmnist-cnn: its weights for seed 7: %s", cltrain_errmsg(ctx));
  cltrain_model_free(&md);
  free(desc);

  /* freeze-until: the layers up to it frozen and laid out after the trained ones. */
  char opts[128];
  const char *first = m->model->layers[0].name;
  snprintf(opts, sizeof opts, "freeze-until=%s seed=7", first);
  status = cltrain_model_create(ctx, "fmnist-cnn", d, opts, &md);
  check(status == CLTRAIN_OK && md->model->layers[0].frozen && !md->model->layers[1].frozen &&
            md->model->trainable_floats < m->model->trainable_floats && same_as_fresh(md, 7),
        "freeze-until=%s: frozen, laid out, the seed's weights: %s", first, cltrain_errmsg(ctx));
  cltrain_model_free(&md);
  check(cltrain_model_create(ctx, "fmnist-cnn", d, "freeze-until=none", &md) == CLTRAIN_OK &&
            md->model->trainable_floats == m->model->trainable_floats,
        "freeze-until=none: every layer trains");
  cltrain_model_free(&md);
  const char *fn = "cltrain_model_create";
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", d, "freeze-until=nowhere", &md),
                CLTRAIN_ERR_ARG, ctx, fn, "nowhere", "freeze-until a layer that does not exist");
  snprintf(opts, sizeof opts, "freeze-until=%s", m->model->layers[m->model->nlayers - 1].name);
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", d, opts, &md), CLTRAIN_ERR_ARG, ctx, fn,
                "nothing to train", "freezing every layer");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", d, "preprocess=caffe", &md),
                CLTRAIN_ERR_ARG, ctx, fn, "built-in model fmnist-cnn has its own",
                "preprocess for a built-in model");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", d, "classes=3", &md), CLTRAIN_ERR_ARG, ctx,
                fn, "the dataset gives them", "classes with a dataset");
  check_refused(cltrain_model_create(ctx, "alexnet", d, NULL, &md), CLTRAIN_ERR_ARG, ctx, fn,
                "unknown model 'alexnet'", "an unknown model");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", NULL, "input=0x0x1 classes=10", &md),
                CLTRAIN_ERR_ARG, ctx, fn, "input=0x0x1: expected HxWxC", "input 0x0x1");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", NULL, "input=28x28 classes=10", &md),
                CLTRAIN_ERR_ARG, ctx, fn, "input=28x28: expected HxWxC", "input without channels");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", NULL, "input=28x28x1x2 classes=10", &md),
                CLTRAIN_ERR_ARG, ctx, fn, "expected HxWxC", "input of four dimensions");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", NULL, "input=28x28x1", &md),
                CLTRAIN_ERR_ARG, ctx, fn, "give option classes=N", "no dataset and no classes");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", NULL, "classes=10", &md), CLTRAIN_ERR_ARG,
                ctx, fn, "give options input=HxWxC", "no dataset and no input");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", d, "seed=x", &md), CLTRAIN_ERR_ARG, ctx, fn,
                "seed=x", "a seed that is not a number");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", d, "epochs=3", &md), CLTRAIN_ERR_ARG, ctx,
                fn, "unknown option 'epochs'", "a training option");
  check_refused(cltrain_model_create(ctx,
                                     "conv=Conv2D(4,30x30,s1,valid) g=GlobalAveragePooling2D "
                                     "dense=Dense(10)",
                                     d, NULL, &md),
                CLTRAIN_ERR_ARG, ctx, fn, "", "a description whose layers do not fit");
  check_refused(cltrain_model_create(ctx, NULL, d, NULL, &md), CLTRAIN_ERR_ARG, ctx, fn,
                "no model given", "a NULL model");
  check_refused(cltrain_model_create(NULL, "fmnist-cnn", d, NULL, &md), CLTRAIN_ERR_ARG, NULL, fn,
                "the context is NULL", "a NULL context");
  check_refused(cltrain_model_create(ctx, "fmnist-cnn", (const cltrain_dataset *)(void *)m, NULL,
                                     &md),
                CLTRAIN_ERR_ARG, ctx, fn, "not a dataset handle", "a model handle as the dataset");
  check(md == NULL, "refused creates leave the handle NULL");

  /* Accessors on a NULL handle. */
  check_refused(cltrain_model_classes(NULL), -1, NULL, "cltrain_model_classes", "the model is NULL",
                "classes of NULL");
  check_refused(cltrain_model_summary(NULL, small, sizeof small), -1, NULL, "cltrain_model_summary",
                "the model is NULL", "summary of NULL");
  check_refused(cltrain_model_input(NULL, &h, &w, &c), CLTRAIN_ERR_ARG, NULL, "cltrain_model_input",
                "the model is NULL", "input of NULL");
  check(cltrain_model_name(NULL) == NULL && cltrain_model_param_count(NULL) == 0,
        "name and parameter count of NULL: NULL and 0");
  cltrain_model_free(&m);
  check(m == NULL, "cltrain_model_free sets the handle to NULL");
  cltrain_model_free(&m);
  cltrain_model_free(NULL);
  cltrain_model_free(&m42);
  cltrain_dataset_free(&d);
}

static void test_keras(void) {
  char json[512], weights[512], opts[600];
  snprintf(json, sizeof json, "%s/seq_cnn/model.json", models);
  snprintf(weights, sizeof weights, "%s/seq_cnn/weights.npz", models);
  cltrain_model *m = NULL, *mw = NULL;
  /* Without a dataset the file gives the input; classes are the option's. */
  int status = cltrain_model_create(ctx, json, NULL, "classes=10 seed=11", &m);
  int h = 0, w = 0, c = 0;
  check(status == CLTRAIN_OK && cltrain_model_input(m, &h, &w, &c) == CLTRAIN_OK && h == 28 &&
            c == 1 && m->keras_json && m->model->preprocess == CLT_PRE_RAW && same_as_fresh(m, 11),
        "Keras file: its input 28x28x1, raw preprocessing, the seed's weights, its text kept: %s",
        cltrain_errmsg(ctx));
  snprintf(opts, sizeof opts, "classes=10 preprocess=unit weights=%s", weights);
  status = cltrain_model_create(ctx, json, NULL, opts, &mw);
  float *want = NULL;
  clt_err e = {0};
  if (!status) {
    want = xmalloc(mw->model->flat_floats * sizeof *want);
    clt_model_init_params(mw->model, 42, want);
    status = clt_weights_load(mw->model, weights, want, &e);
  }
  check(status == CLTRAIN_OK && mw->model->preprocess == CLT_PRE_UNIT &&
            memcmp(want, mw->weights, mw->model->flat_floats * sizeof *want) == 0,
        "Keras file with weights=FILE.npz: the file's weights (as --weights): %s %s",
        cltrain_errmsg(ctx), e.msg);
  free(want);
  cltrain_model_free(&mw);
  cltrain_model_free(&m);
  /* With Fashion-MNIST, the dataset's shape. */
  cltrain_dataset *d = NULL;
  status = cltrain_dataset_open(ctx, fmnist, "train-limit=10 test-limit=10", &d);
  if (!status) status = cltrain_model_create(ctx, json, d, NULL, &m);
  check(status == CLTRAIN_OK && cltrain_model_classes(m) == 10, "Keras file for Fashion-MNIST: %s",
        cltrain_errmsg(ctx));
  cltrain_model_free(&m);
  cltrain_dataset_free(&d);
  const char *fn = "cltrain_model_create";
  snprintf(opts, sizeof opts, "classes=10 weights=%s/no-such.npz", tmpdir);
  check_refused(cltrain_model_create(ctx, json, NULL, opts, &m), CLTRAIN_ERR_IO, ctx, fn,
                "no-such.npz", "a missing weights file");
  check_refused(cltrain_model_create(ctx, json, NULL, "classes=10 preprocess=bgr", &m),
                CLTRAIN_ERR_ARG, ctx, fn, "preprocess=bgr: expected raw, unit or caffe",
                "an unknown preprocessing");
  snprintf(json, sizeof json, "%s/no-such.json", tmpdir);
  check_refused(cltrain_model_create(ctx, json, NULL, "classes=10", &m), CLTRAIN_ERR_IO, ctx, fn,
                "no-such.json", "a missing model file");
}

/* Every parameter of m equal in a and b (the alignment gaps between them aside). */
static int same_params(const clt_model *m, const float *a, const float *b) {
  for (int i = 0; i < m->nlayers; i++) {
    for (int p = 0; p < m->layers[i].nparams; p++) {
      const clt_param *q = &m->layers[i].params[p];
      if (memcmp(a + q->offset, b + q->offset, q->size * sizeof *a) != 0) return 0;
    }
  }
  return 1;
}

static void test_checkpoint(void) {
  cltrain_model *m = NULL, *back = NULL;
  int status = cltrain_model_create(ctx, "fmnist-cnn", NULL,
                                    "input=28x28x1 classes=10 seed=5 freeze-until=conv2d", &m);
  check(status == CLTRAIN_OK, "a model to checkpoint: %s", cltrain_errmsg(ctx));
  if (status) return;
  /* A checkpoint of trained-looking weights, as a run saves it. */
  const size_t n = m->model->flat_floats;
  clt_checkpoint st;
  memset(&st, 0, sizeof st);
  st.params = xmalloc(n * sizeof(float));
  for (int s = 0; s < CLT_OPT_SLOTS; s++) st.opt_state[s] = calloc(n, sizeof(float));
  for (size_t i = 0; i < n; i++) st.params[i] = m->weights[i] * 0.5f + (float)(i % 7) * 1e-3f;
  st.optimizer = clt_optimizer_defaults(CLT_OPT_ADAM);
  st.iterations = 20;
  st.epoch = 2;
  st.seed = 5;
  char dir[128], path[4096];
  clt_err e = {0};
  snprintf(dir, sizeof dir, "%s/ckpt", tmpdir);
  status = clt_checkpoint_save(dir, 0, m->model, &st, path, sizeof path, &e);
  check(status == CLT_OK, "checkpoint saved: %s", e.msg);
  for (int from_file = 0; from_file < 2 && !status; from_file++) {
    const char *what = from_file ? path : dir;
    status = cltrain_model_from_checkpoint(ctx, what, &back);
    check(status == CLTRAIN_OK && back && strcmp(cltrain_model_name(back), "fmnist-cnn") == 0 &&
              back->model->flat_floats == n && back->seed == 5 && back->model->layers[0].frozen &&
              !back->model->layers[1].frozen && same_params(back->model, back->weights, st.params),
          "from_checkpoint(%s): the model, its frozen layer and trained weights: %s",
          from_file ? "its file" : "its folder", cltrain_errmsg(ctx));
    cltrain_model_free(&back);
  }
  clt_checkpoint_free(&st);
  cltrain_model_free(&m);
  const char *fn = "cltrain_model_from_checkpoint";
  snprintf(dir, sizeof dir, "%s/no-such-ckpt", tmpdir);
  check_refused(cltrain_model_from_checkpoint(ctx, dir, &back), CLTRAIN_ERR_IO, ctx, fn,
                "no-such-ckpt", "a missing checkpoint");
  char json[512];
  snprintf(json, sizeof json, "%s/seq_cnn/weights.npz", models);
  check(cltrain_model_from_checkpoint(ctx, json, &back) != CLTRAIN_OK &&
            strncmp(cltrain_errmsg(ctx), fn, strlen(fn)) == 0,
        "from_checkpoint of a weights file that is no checkpoint: %s", cltrain_errmsg(ctx));
  check_refused(cltrain_model_from_checkpoint(NULL, dir, &back), CLTRAIN_ERR_ARG, NULL, fn,
                "the context is NULL", "a NULL context");
  check_refused(cltrain_model_from_checkpoint(ctx, NULL, &back), CLTRAIN_ERR_ARG, ctx, fn,
                "no checkpoint given", "a NULL checkpoint");
  check(back == NULL, "refused checkpoints leave the handle NULL");
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MAKE_PHOTOS FASHION_MNIST_DIR MODELS_DIR\n", argv[0]);
    return 2;
  }
  verbose = getenv("VERBOSE") != NULL;
  fmnist = argv[2];
  models = argv[3];
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cltrain_api_model_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("FAIL: cannot create a temporary folder\n");
    return 1;
  }
  ctx_store.h.kind = API_CTX;
  test_idx();
  test_photos(argv[1]);
  test_memory();
  test_dataset_bad_use();
  test_builtin();
  test_keras();
  test_checkpoint();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) printf("note: could not remove %s\n", tmpdir);
  return check_summary();
}
