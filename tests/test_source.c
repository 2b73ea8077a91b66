/* The batch-source interface (datasets/source.h) over both kinds, opened from
 * folders as cltrain opens them (datasets/data.h): a tiny IDX folder written here
 * and a tiny photo folder written by make_photos (its path is the argument).
 * Every step of a pass is loaded through the interface by two replicas on PoCL's
 * first device, each its slice of the global batch in a shuffled order, and the
 * floats and labels read back must equal the host data preprocessed on the host
 * (photos: decoded with clt_photos_decode). Then every bad call and bad folder
 * must be refused with a message naming the cause. Prints "ok: ..." or "FAIL: ..."
 * per check and "N passed, M failed" last; exits non-zero if anything failed.
 * VERBOSE=1 prints each expected error message. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "check.h"
#include "data.h"
#include "device.h"
#include "kernels_used.h"
#include "photos.h"
#include "rng.h"
#include "source.h"

enum { REPLICAS = 2, GLOBAL = 4 };

static int verbose;
static char tmpdir[64];
static clt_err E;
static clt_replica *reps[REPLICAS];
static cl_mem xs[REPLICAS], ys[REPLICAS]; /* each replica's input floats and labels */
static size_t x_floats;                   /* their capacity: GLOBAL images of the largest */

/* A non-zero status whose message contains `needle`. */
static void check_err(int rc, const char *needle, const char *what) {
  check(rc != CLT_OK, "%s: expected an error, got success", what);
  if (rc != CLT_OK) {
    check(strstr(E.msg, needle) != NULL, "%s: message lacks \"%s\": %s", what, needle, E.msg);
    if (verbose) printf("  expected error (%s): %s\n", what, E.msg);
  }
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    printf("FAIL: out of host memory\n");
    exit(1);
  }
  return p;
}

/* ---- the tiny IDX folder ------------------------------------------------------------- */

enum { IDX_H = 5, IDX_W = 3, IDX_TRAIN = 11, IDX_TEST = 6 };
static unsigned char idx_pixels[2][IDX_TRAIN * IDX_H * IDX_W], idx_labels[2][IDX_TRAIN];

static void put_be32(FILE *f, unsigned v) {
  const unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                              (unsigned char)(v >> 8), (unsigned char)v};
  fwrite(b, 1, 4, f);
}

static void write_idx(const char *dir, const char *split, const unsigned char *pixels,
                      const unsigned char *labels, int count) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split);
  FILE *f = fopen(path, "wb");
  if (!f) {
    printf("FAIL: cannot write %s\n", path);
    exit(1);
  }
  put_be32(f, 0x803);
  put_be32(f, (unsigned)count);
  put_be32(f, IDX_H);
  put_be32(f, IDX_W);
  fwrite(pixels, 1, (size_t)count * IDX_H * IDX_W, f);
  fclose(f);
  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split);
  if (!(f = fopen(path, "wb"))) {
    printf("FAIL: cannot write %s\n", path);
    exit(1);
  }
  put_be32(f, 0x801);
  put_be32(f, (unsigned)count);
  fwrite(labels, 1, (size_t)count, f);
  fclose(f);
}

static void make_idx_folder(const char *dir) {
  clt_rng rng;
  clt_rng_seed(&rng, 7, 0);
  mkdir(dir, 0755);
  const int counts[2] = {IDX_TRAIN, IDX_TEST};
  for (int s = 0; s < 2; s++) {
    for (int i = 0; i < counts[s] * IDX_H * IDX_W; i++)
      idx_pixels[s][i] = (unsigned char)clt_rng_below(&rng, 256);
    for (int i = 0; i < counts[s]; i++) idx_labels[s][i] = (unsigned char)clt_rng_below(&rng, 10);
  }
  write_idx(dir, "train", idx_pixels[0], idx_labels[0], IDX_TRAIN);
  write_idx(dir, "t10k", idx_pixels[1], idx_labels[1], IDX_TEST);
}

/* ---- loading every step through the interface ------------------------------------------ */

/* The host's view of the examples: the preprocessed image of example i, and its label. */
typedef struct host_data {
  int (*get)(const struct host_data *h, int i, float *x, int *label);
  const unsigned char *pixels, *labels; /* IDX */
  const clt_photos *photos;             /* photo folders */
  int pixels_per_image;
  clt_preprocess pre;
} host_data;

static void preprocess(const unsigned char *image, int n, clt_preprocess pre, float *x) {
  static const float mean[3] = {103.939f, 116.779f, 123.68f}; /* ImageNet's, BGR */
  for (int p = 0; p < n; p++) {
    const int c = p % 3;
    x[p] = pre == CLT_PRE_UNIT ? (float)image[p] * (1.0f / 255.0f)
                               : (float)image[p - c + (2 - c)] - mean[c];
  }
}

static int idx_get(const host_data *h, int i, float *x, int *label) {
  preprocess(h->pixels + (size_t)i * h->pixels_per_image, h->pixels_per_image, h->pre, x);
  *label = h->labels[i];
  return CLT_OK;
}

static int photo_get(const host_data *h, int i, float *x, int *label) {
  unsigned char *rgb = xmalloc((size_t)h->pixels_per_image);
  int status = clt_photos_decode(h->photos, i, rgb, &E);
  if (!status) preprocess(rgb, h->pixels_per_image, h->pre, x);
  *label = clt_photos_label(h->photos, i);
  free(rgb);
  return status;
}

/* One pass through the source by both replicas: replica 0 takes the first half of
 * each global batch (rounded down), replica 1 the rest. Compares every value. */
static void check_pass(clt_source *s, const host_data *h, uint64_t seed, const char *what) {
  const clt_source_info *in = clt_source_get_info(s);
  const int count = in->count, pixels = h->pixels_per_image;
  int *order = xmalloc((size_t)count * sizeof *order);
  float *got = xmalloc(x_floats * sizeof *got), *want = xmalloc((size_t)pixels * sizeof *want);
  int labels[GLOBAL], bad_x = 0, bad_y = 0, loaded = 0;
  clt_epoch_order(seed, 0, order, count);
  int status = clt_source_begin(s, order, &E);
  check(status == CLT_OK, "%s: begin: %s", what, E.msg);
  for (int step = 0; !status && step * GLOBAL < count; step++) {
    const int batch = count - step * GLOBAL < GLOBAL ? count - step * GLOBAL : GLOBAL;
    for (int r = 0; r < REPLICAS && !status; r++) {
      const int first = r ? batch / 2 : 0, len = r ? batch - batch / 2 : batch / 2;
      double waited = -1;
      status = clt_source_load(s, r, step, first, len, xs[r], ys[r], &waited, &E);
      check(status == CLT_OK, "%s: step %d replica %d: %s", what, step, r, E.msg);
      check(status || waited >= 0, "%s: step %d: waited %g s", what, step, waited);
      if (status || !len) continue;
      cl_int rc = clEnqueueReadBuffer(reps[r]->queue, xs[r], CL_TRUE, 0,
                                      (size_t)len * pixels * sizeof(float), got, 0, NULL, NULL);
      if (!rc)
        rc = clEnqueueReadBuffer(reps[r]->queue, ys[r], CL_TRUE, 0, (size_t)len * sizeof(int),
                                 labels, 0, NULL, NULL);
      check(rc == CL_SUCCESS, "%s: reading a batch back: %s", what, clt_status_name(rc));
      for (int k = 0; k < len && !rc; k++) {
        int label;
        const int example = order[step * GLOBAL + first + k];
        if ((status = h->get(h, example, want, &label))) {
          check(0, "%s: host data of example %d: %s", what, example, E.msg);
          break;
        }
        bad_y += labels[k] != label;
        for (int p = 0; p < pixels; p++) bad_x += got[(size_t)k * pixels + p] != want[p];
        loaded++;
      }
    }
  }
  check(loaded == count, "%s: %d of %d examples loaded", what, loaded, count);
  check(bad_x == 0, "%s: %d input values differ from the host's", what, bad_x);
  check(bad_y == 0, "%s: %d labels differ from the host's", what, bad_y);
  free(order);
  free(got);
  free(want);
}

static int attach(clt_source *s, clt_preprocess pre) {
  const int max_slice[REPLICAS] = {GLOBAL, GLOBAL};
  return clt_source_attach(s, reps, REPLICAS, GLOBAL, max_slice, pre, &E);
}

static void test_idx(const char *dir) {
  clt_data d;
  const clt_data_spec spec = {.dir = dir, .with_train = 1, .image_size = 224};
  int status = clt_data_open(&spec, &d, &E);
  check(status == CLT_OK, "IDX folder opens: %s", E.msg);
  if (status) return;
  check(!d.photos && d.ntrain == IDX_TRAIN && d.ntest == IDX_TEST && d.height == IDX_H &&
            d.width == IDX_W && d.channels == 1 && d.classes == 10 && !d.class_names,
        "IDX folder: %d and %d examples of %dx%dx%d, %d classes", d.ntrain, d.ntest, d.height,
        d.width, d.channels, d.classes);
  char *names = NULL;
  check(clt_data_class_names(&d, &names, &E) == CLT_OK && !names, "IDX folder: no class names");
  for (int s = 0; s < 2; s++) {
    clt_source *src = s ? d.test : d.train;
    const host_data h = {.get = idx_get,
                         .pixels = idx_pixels[s],
                         .labels = idx_labels[s],
                         .pixels_per_image = IDX_H * IDX_W,
                         .pre = CLT_PRE_UNIT};
    const char *what = s ? "IDX test set" : "IDX training set";
    if (attach(src, CLT_PRE_UNIT)) {
      check(0, "%s: attach: %s", what, E.msg);
      continue;
    }
    check_pass(src, &h, 3, what);
    check_pass(src, &h, 4, what); /* a second pass: another order */
  }
  /* Bad calls, each refused before it reaches the kind. */
  clt_source *src = d.train;
  int order[IDX_TRAIN];
  for (int i = 0; i < IDX_TRAIN; i++) order[i] = i;
  check_err(attach(src, CLT_PRE_UNIT), "already attached", "attaching twice");
  check_err(clt_source_load(src, 2, 0, 0, 1, xs[0], ys[0], NULL, &E), "replica 2 of 2",
            "a replica that is not attached");
  check_err(clt_source_load(src, 0, 3, 0, 1, xs[0], ys[0], NULL, &E), "step 3 outside the pass",
            "a step past the pass");
  check_err(clt_source_load(src, 0, 2, 2, 2, xs[0], ys[0], NULL, &E), "outside step 2's batch of 3",
            "a slice past the last (short) batch");
  check_err(clt_source_load(src, 0, 0, -1, 1, xs[0], ys[0], NULL, &E), "outside step 0's batch",
            "a negative first example");
  order[5] = IDX_TRAIN;
  check_err(clt_source_begin(src, order, &E), "order[5] = 11 outside [0, 11)",
            "an order naming a missing example");
  check_err(clt_source_load(src, 0, 0, 0, 1, xs[0], ys[0], NULL, &E), "outside a pass",
            "a load after a refused begin");
  clt_source_detach(src);
  check_err(clt_source_begin(src, order, &E), "before attaching", "a pass on a detached source");
  check_err(attach(src, CLT_PRE_CAFFE), "needs RGB images, these have 1 channel",
            "'caffe' preprocessing of grey images");
  const int too_big[REPLICAS] = {GLOBAL + 1, GLOBAL};
  check_err(clt_source_attach(src, reps, REPLICAS, GLOBAL, too_big, CLT_PRE_UNIT, &E),
            "replica 0 slices of 5 examples, global batch 4",
            "slices larger than the global batch");
  const int small[REPLICAS] = {1, 1};
  order[5] = 5;
  status = clt_source_attach(src, reps, REPLICAS, GLOBAL, small, CLT_PRE_UNIT, &E);
  check(status == CLT_OK, "re-attaching a detached source: %s", E.msg);
  if (!status && !clt_source_begin(src, order, &E)) {
    check_err(clt_source_load(src, 1, 0, 0, 2, xs[1], ys[1], NULL, &E),
              "slice of 2 examples for replica 1, which takes 1",
              "a slice over the replica's size");
  }
  /* Folder-level checks: the model's shape and classes, photo-only options. */
  check_err(clt_data_check_input(&d, "m", 28, 28, 1, 10, &E),
            "images are 5x3x1, model m expects 28x28x1", "images of another shape");
  check_err(clt_data_check_input(&d, "m", IDX_H, IDX_W, 1, 3, &E),
            "10 classes, model has 3 outputs", "more classes than outputs");
  check(clt_data_check_input(&d, "m", IDX_H, IDX_W, 1, 10, &E) == CLT_OK, "the right shape passes");
  clt_data_close(&d);
  const clt_data_spec sized = {.dir = dir,
                               .with_train = 1,
                               .image_size = 64,
                               .image_size_given = 1};
  check_err(clt_data_open(&sized, &d, &E),
            "holds IDX files: --image-size applies to photo folders only",
            "--image-size on IDX files");
}

/* --validation-split on IDX files: the last examples of the training files, as
 * Keras' validation_split takes them (floor(11 * 0.7) = 7 train, 4 held out),
 * in training and in evaluation; a split that leaves no training image is refused. */
static void test_idx_split(const char *dir) {
  clt_data d;
  for (int train = 1; train >= 0; train--) {
    const clt_data_spec spec = {.dir = dir,
                                .with_train = train,
                                .validation_split = 0.3,
                                .validation_split_given = 1};
    const char *what = train ? "IDX validation split" : "IDX validation split (evaluation)";
    int status = clt_data_open(&spec, &d, &E);
    check(status == CLT_OK, "%s opens: %s", what, E.msg);
    if (status) return;
    check(d.validation && d.test_first == 7 && d.ntrain == (train ? 7 : 0) && d.ntest == 4 &&
              (d.train != NULL) == train,
          "%s: %d training and %d validation examples from index %d", what, d.ntrain, d.ntest,
          d.test_first);
    for (int s = !train; s < 2; s++) {
      const host_data h = {.get = idx_get,
                           .pixels = idx_pixels[0] + (s ? 7 * IDX_H * IDX_W : 0),
                           .labels = idx_labels[0] + (s ? 7 : 0),
                           .pixels_per_image = IDX_H * IDX_W,
                           .pre = CLT_PRE_UNIT};
      clt_source *src = s ? d.test : d.train;
      if (attach(src, CLT_PRE_UNIT)) {
        check(0, "%s: attach: %s", what, E.msg);
        continue;
      }
      check_pass(src, &h, 5, s ? what : "IDX training part of the split");
    }
    clt_data_close(&d);
  }
  const clt_data_spec most = {.dir = dir, .with_train = 1, .validation_split = 0.95};
  check_err(clt_data_open(&most, &d, &E),
            "validation split 0.95 of 11 training images leaves no training image",
            "an IDX split leaving no training image");
}

static void test_photos(const char *dir) {
  enum { SIZE = 12 };
  clt_data d;
  const clt_data_spec spec = {
      .dir = dir, .with_train = 1, .image_size = SIZE, .validation_split = 0.25, .seed = 5};
  int status = clt_data_open(&spec, &d, &E);
  check(status == CLT_OK, "photo folder opens: %s", E.msg);
  if (status) return;
  check(d.photos && d.ntrain == 12 && d.ntest == 3 && d.height == SIZE && d.width == SIZE &&
            d.channels == 3 && d.classes == 3 && d.class_names,
        "photo folder: %d and %d examples of %dx%dx%d, %d classes", d.ntrain, d.ntest, d.height,
        d.width, d.channels, d.classes);
  char *names = NULL;
  status = clt_data_class_names(&d, &names, &E);
  check(!status && names && strcmp(names, "class_0\nclass_1\nclass_2") == 0, "class names: %s",
        names ? names : E.msg);
  /* The host's copy of the same split. */
  clt_photos *train = NULL, *validation = NULL;
  if ((status = clt_photos_open(dir, SIZE, 0.25, 5, &train, &validation, &E))) {
    check(0, "photo folder opens on the host: %s", E.msg);
  }
  for (int s = 0; s < 2 && !status; s++) {
    clt_source *src = s ? d.test : d.train;
    const host_data h = {.get = photo_get,
                         .photos = s ? validation : train,
                         .pixels_per_image = SIZE * SIZE * 3,
                         .pre = CLT_PRE_CAFFE};
    const char *what = s ? "photo validation set" : "photo training set";
    if (attach(src, CLT_PRE_CAFFE)) {
      check(0, "%s: attach: %s", what, E.msg);
      continue;
    }
    check_pass(src, &h, 3, what);
    check_pass(src, &h, 4, what); /* the second pass decodes nothing: the cache */
  }
  clt_photos_free(train);
  clt_photos_free(validation);
  /* The loader's own refusals come through the interface: a pass while the last
   * is unfinished, and a load after a cancel (which lets a new pass begin). */
  int order[12];
  for (int i = 0; i < 12; i++) order[i] = i;
  if (!clt_source_begin(d.train, order, &E)) {
    check(clt_source_load(d.train, 0, 0, 0, 2, xs[0], ys[0], NULL, &E) == CLT_OK,
          "a first load: %s", E.msg);
    check_err(clt_source_begin(d.train, order, &E), "not consumed",
              "a pass before the last was consumed");
    clt_source_cancel(d.train);
    check(clt_source_begin(d.train, order, &E) == CLT_OK, "a pass after a cancel: %s", E.msg);
    check(clt_source_load(d.train, 0, 0, 0, 2, xs[0], ys[0], NULL, &E) == CLT_OK, "a load: %s",
          E.msg);
    clt_source_cancel(d.train);
    check_err(clt_source_load(d.train, 1, 0, 2, 2, xs[1], ys[1], NULL, &E), "pass cancelled",
              "a load after cancel");
  }
  check_err(clt_data_check_classes(&d, "class_0\nclass_9\nclass_2", "ck.npz", &E),
            "ck.npz: trained on classes (class_0,class_9,class_2)",
            "a checkpoint of other classes");
  check(clt_data_check_classes(&d, names, "ck.npz", &E) == CLT_OK, "the same classes pass");
  check_err(clt_data_check_input(&d, "m", 32, 32, 3, 3, &E), "(set --image-size 32)",
            "photos of another size");
  check(clt_data_check_input(&d, "m", 28, 28, 1, 3, &E) != CLT_OK &&
            strstr(E.msg, "--image-size") == NULL,
        "another channel count: no --image-size hint (%s)", E.msg);
  d.spec.image_size_given = 1;
  check(clt_data_check_input(&d, "m", 32, 32, 3, 3, &E) != CLT_OK &&
            strstr(E.msg, "set --image-size") == NULL,
        "--image-size already set: not asked to set it (%s)", E.msg);
  d.spec.image_size_given = 0;
  /* Another image size (a resumed checkpoint's): the folder opens again. */
  status = clt_data_reopen(&d, 16, 5, &E);
  check(!status && d.height == 16 && clt_source_get_info(d.train)->width == 16,
        "reopened at 16x16: %s", status ? E.msg : "");
  free(names);
  clt_data_close(&d);
  char missing[600];
  snprintf(missing, sizeof missing, "%s/none", tmpdir);
  const clt_data_spec none = {.dir = missing, .with_train = 1, .image_size = SIZE};
  check_err(clt_data_open(&none, &d, &E), missing, "a missing folder");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_source MAKE_PHOTOS\n");
    return 2;
  }
  const char *env = getenv("VERBOSE");
  verbose = env && *env == '1';
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cltsource.XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  char idx_dir[600], photo_dir[600], command[2048];
  snprintf(idx_dir, sizeof idx_dir, "%s/idx", tmpdir);
  snprintf(photo_dir, sizeof photo_dir, "%s/photos", tmpdir);
  make_idx_folder(idx_dir);
  snprintf(command, sizeof command, "'%s' '%s' 3 5 9", argv[1], photo_dir);
  if (system(command) != 0) {
    printf("FAIL: %s\n", command);
    return 1;
  }
  clt_device_list list = {0};
  int status = clt_devices_enumerate(&list, &E);
  if (!status && list.count < 1) status = clt_fail(&E, CLT_ERR_DEVICE, "no OpenCL device");
  /* Two replicas of the first device, as two devices would be. */
  x_floats = (size_t)GLOBAL * 16 * 16 * 3;
  for (int r = 0; r < REPLICAS && !status; r++) {
    status = clt_backend_create_replica(&list.devices[0], &reps[r], &E);
    if (!status)
      status = clt_replica_alloc(reps[r], x_floats * sizeof(float), "inputs", &xs[r], &E);
    if (!status) status = clt_replica_alloc(reps[r], GLOBAL * sizeof(int), "labels", &ys[r], &E);
  }
  if (status) {
    printf("FAIL: replicas: %s\n", E.msg);
    return 1;
  }
  test_idx(idx_dir);
  test_idx_split(idx_dir);
  test_photos(photo_dir);
  for (int r = 0; r < REPLICAS; r++) {
    clReleaseMemObject(xs[r]);
    clReleaseMemObject(ys[r]);
    log_kernels_used(reps[r]);
    clt_backend_destroy_replica(reps[r]);
  }
  clt_devices_free(&list);
  if (!check_failures()) {
    snprintf(command, sizeof command, "rm -rf '%s'", tmpdir);
    if (system(command) != 0) printf("could not remove %s\n", tmpdir);
  } else {
    printf("left the test folder in %s\n", tmpdir);
  }
  return check_summary();
}
