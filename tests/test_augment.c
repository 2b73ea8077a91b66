/* Augmentation (datasets/augment.h):
 *   - each stage with fixed parameters computes what Keras 3's layer computes
 *     (tests/augment/cases.npz, made by make_fixtures.py): the floats within
 *     TOL of Keras' (2e-5 of the value range, 255), the rounded uint8 image
 *     within one level of Keras' floats rounded;
 *   - the draws: flip rate, angle, zoom, shift, contrast, brightness and crop
 *     offsets over many examples lie in their ranges and spread over them;
 *     they depend on (seed, epoch, example) only;
 *   - --augment's text: canonical round trips, and each malformed or out-of-range
 *     item refused with one line naming it;
 *   - a photo folder's batch source augments its training passes with those
 *     draws, the same images for one replica or two, and its other passes
 *     (evaluation) only crop.
 *   test_augment CASES.npz MAKE_PHOTOS */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "augment.h"
#include "backend.h"
#include "check.h"
#include "data.h"
#include "device.h"
#include "npz.h"
#include "photos.h"
#include "source.h"

#define TOL (2e-5 * 255)

static clt_err E;

static void *xmalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) {
    printf("FAIL: out of host memory\n");
    exit(1);
  }
  return p;
}

/* ---- the fixtures --------------------------------------------------------------------- */

static const clt_npz_array *member(const clt_npz *z, const char *name, const char *part) {
  char full[160];
  snprintf(full, sizeof full, "%s/%s", name, part);
  return clt_npz_find(z, full);
}

/* Whether a and b hold the same n values. */
static int same_floats(const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

/* Largest |got - want| over n floats. */
static double max_diff(const float *got, const float *want, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; i++) {
    const double x = fabs((double)got[i] - want[i]);
    d = x > d ? x : d;
  }
  return d;
}

static void check_case(const clt_npz *z, const char *name, const float *input, int h, int w) {
  char spec[256];
  const clt_npz_array *s = member(z, name, "spec"), *dr = member(z, name, "draw"),
                      *o = member(z, name, "output");
  if (!s || !dr || !o || clt_npz_get_string(s, spec, sizeof spec) || o->rank != 3 ||
      dr->dims[0] != 5) {
    check(0, "%s: a malformed case in the fixtures", name);
    return;
  }
  clt_augment a;
  if (clt_augment_parse(spec, &a, &E)) {
    check(0, "%s: spec %s: %s", name, spec, E.msg);
    return;
  }
  const float *want = o->data, *dv = dr->data;
  const int oh = (int)o->dims[0], ow = (int)o->dims[1];
  const size_t n = (size_t)oh * ow * 3, most = clt_augment_work_floats(&a, h, w, 3);
  float *work = xmalloc(most * sizeof *work), *got = work;
  const int chain = strncmp(name, "chain", 5) == 0;
  if (!chain) {
    /* The stage with the fixture's draw; where the range fixes it, the draw equals it. */
    const clt_aug_draw fixed = {(int)dv[0], dv[1], dv[2], (int)dv[3], (int)dv[4]};
    const clt_aug_stage *st = &a.stage[0];
    if (st->kind != CLT_AUG_FLIP && st->kind != CLT_AUG_CROP && st->kind != CLT_AUG_CONTRAST) {
      clt_rng r;
      clt_rng_seed(&r, 1, 2);
      clt_aug_draw d;
      clt_augment_draw(st, &r, h, w, &d);
      check(a.n == 1 && d.a == fixed.a && d.b == fixed.b,
            "%s: the draw of a one-value range is Keras' (%.9g, %.9g vs %.9g, %.9g)", name, d.a,
            d.b, fixed.a, fixed.b);
    }
    int gh, gw;
    clt_augment_stage(st, fixed.y0 < 0 && st->kind == CLT_AUG_CROP ? NULL : &fixed, input, h, w, 3,
                      got, &gh, &gw);
    check(gh == oh && gw == ow, "%s: output %dx%d, Keras' %dx%d", name, gh, gw, oh, ow);
  } else {
    /* Every stage in turn, each drawing from its one-value range. */
    clt_rng r;
    clt_rng_seed(&r, 1, 2);
    float *cur = work + most / 2;
    memcpy(cur, input, (size_t)h * w * 3 * sizeof *cur);
    int ch = h, cw = w;
    for (int i = 0; i < a.n; i++) {
      clt_aug_draw d;
      clt_augment_draw(&a.stage[i], &r, ch, cw, &d);
      clt_augment_stage(&a.stage[i], &d, cur, ch, cw, 3, got, &ch, &cw);
      memcpy(cur, got, (size_t)ch * cw * 3 * sizeof *cur);
    }
  }
  const double d = max_diff(got, want, n);
  check(d <= TOL, "%s: floats within %.3g of Keras' (largest difference %.3g)", name, TOL, d);
  /* The whole image path: uint8 in, uint8 out, within one level of Keras' rounded. */
  const int training = !(dv[3] < 0);
  unsigned char *in8 = xmalloc((size_t)h * w * 3), *out8 = xmalloc(n);
  for (size_t i = 0; i < (size_t)h * w * 3; i++) in8[i] = (unsigned char)input[i];
  int levels = -1;
  if (chain || (a.stage[0].kind != CLT_AUG_FLIP && a.stage[0].kind != CLT_AUG_CONTRAST &&
                !(a.stage[0].kind == CLT_AUG_CROP && training))) {
    clt_augment_image(&a, 7, training ? 0 : -1, 3, in8, h, w, 3, out8, work);
    levels = 0;
    for (size_t i = 0; i < n; i++) {
      const int k = (int)floorf(want[i] + 0.5f), g = out8[i];
      levels = abs(k - g) > levels ? abs(k - g) : levels;
    }
    check(levels <= 1, "%s: uint8 image within one level of Keras' rounded (largest %d)", name,
          levels);
  }
  free(in8);
  free(out8);
  free(work);
}

static void test_fixtures(const char *path) {
  clt_npz *z = NULL;
  if (clt_npz_read(path, &z, &E)) {
    check(0, "fixtures: %s", E.msg);
    return;
  }
  const clt_npz_array *in = clt_npz_find(z, "input");
  if (!in || in->rank != 3 || in->dims[2] != 3) {
    check(0, "fixtures: no 3-channel input");
    clt_npz_free(z);
    return;
  }
  int cases = 0;
  for (int i = 0; i < clt_npz_count(z); i++) {
    const clt_npz_array *a = clt_npz_at(z, i);
    const size_t n = strlen(a->name);
    if (n < 7 || strcmp(a->name + n - 7, "/output") != 0) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(n - 7), a->name);
    check_case(z, name, in->data, (int)in->dims[0], (int)in->dims[1]);
    cases++;
  }
  check(cases >= 20, "fixtures: %d cases", cases);
  clt_npz_free(z);
}

/* ---- the draws --------------------------------------------------------------------------- */

enum { DRAWS = 20000, BINS = 10 };

/* Every bin within 12% of its share (4 standard deviations and more at these counts). */
static int even(const int *bins, int nbins, int total) {
  for (int b = 0; b < nbins; b++)
    if (fabs(bins[b] - (double)total / nbins) > 0.12 * total / nbins) return 0;
  return 1;
}

static void test_draws(void) {
  clt_augment a;
  const char *spec =
      "flip=horizontal,rotate=0.1,zoom=0.2/-0.1:0.3,translate=0.1/0.25,crop=20x17,contrast=0.2,"
      "brightness=0.1";
  if (clt_augment_parse(spec, &a, &E)) {
    check(0, "draws: %s: %s", spec, E.msg);
    return;
  }
  const int h = 24, w = 20;
  int flips = 0, angle_bins[BINS] = {0}, zoom_bins[BINS] = {0}, y_bins[5] = {0}, x_bins[4] = {0};
  float lo[8], hi[8];
  for (int k = 0; k < 8; k++) lo[k] = INFINITY, hi[k] = -INFINITY;
  double angle_sum = 0;
  for (int i = 0; i < DRAWS; i++) {
    clt_rng r;
    clt_augment_rng(&r, 42, 3, i);
    clt_aug_draw d[7] = {{0}};
    for (int s = 0; s < a.n; s++) clt_augment_draw(&a.stage[s], &r, h, w, &d[s]);
    flips += d[0].flip;
    const float v[8] = {d[1].a, d[2].b, d[2].a, d[3].b, d[3].a, d[5].a, d[6].a, 0};
    for (int k = 0; k < 7; k++) {
      lo[k] = v[k] < lo[k] ? v[k] : lo[k];
      hi[k] = v[k] > hi[k] ? v[k] : hi[k];
    }
    angle_sum += d[1].a;
    angle_bins[(int)((d[1].a + 36) / 72 * BINS) % BINS]++;
    zoom_bins[(int)((d[2].b - 0.8f) / 0.4f * BINS) % BINS]++;
    y_bins[d[4].y0]++;
    x_bins[d[4].x0]++;
  }
  const double rate = (double)flips / DRAWS;
  check(fabs(rate - 0.5) < 0.015, "flip rate %.4f within 0.015 of 0.5", rate);
  check(lo[0] >= -36 && hi[0] <= 36 && lo[0] < -35.9 && hi[0] > 35.9,
        "rotate=0.1: angles in [-36, 36] degrees, reaching both ends (%.3f to %.3f)", lo[0], hi[0]);
  check(even(angle_bins, BINS, DRAWS) && fabs(angle_sum / DRAWS) < 0.6,
        "rotate=0.1: angles spread evenly (mean %.3f)", angle_sum / DRAWS);
  check(lo[1] >= 0.8f && hi[1] <= 1.2f && lo[1] < 0.801f && hi[1] > 1.199f &&
            even(zoom_bins, BINS, DRAWS),
        "zoom=0.2: height zoom in [0.8, 1.2], spread evenly (%.4f to %.4f)", lo[1], hi[1]);
  check(lo[2] >= 0.9f && hi[2] <= 1.3f && lo[2] < 0.901f && hi[2] > 1.299f,
        "zoom=.../-0.1:0.3: width zoom drawn apart in [0.9, 1.3] (%.4f to %.4f)", lo[2], hi[2]);
  check(lo[3] >= -2.4f && hi[3] <= 2.4f && lo[4] >= -5 && hi[4] <= 5 && hi[4] > 4.99f,
        "translate=0.1/0.25: shifts within 0.1 x 24 rows and 0.25 x 20 columns (%.3f..%.3f, "
        "%.3f..%.3f)",
        lo[3], hi[3], lo[4], hi[4]);
  check(even(y_bins, 5, DRAWS) && even(x_bins, 4, DRAWS),
        "crop=20x17 of 24x20: every offset, evenly (rows 0-4, columns 0-3)");
  check(lo[5] >= 0.8f && hi[5] <= 1.2f && lo[5] < 0.801f && hi[5] > 1.199f,
        "contrast=0.2: factor in [0.8, 1.2] (%.4f to %.4f)", lo[5], hi[5]);
  check(lo[6] >= -25.5f && hi[6] <= 25.5f && lo[6] < -25.4f && hi[6] > 25.4f,
        "brightness=0.1: shift in [-25.5, 25.5] (%.3f to %.3f)", lo[6], hi[6]);
  /* The same (seed, epoch, example): the same draws; another epoch: others. */
  clt_rng r1, r2, r3;
  clt_augment_rng(&r1, 42, 3, 17);
  clt_augment_rng(&r2, 42, 3, 17);
  clt_augment_rng(&r3, 42, 4, 17);
  const uint64_t v1 = clt_rng_next(&r1), v2 = clt_rng_next(&r2), v3 = clt_rng_next(&r3);
  check(v1 == v2 && v1 != v3, "draws depend on (seed, epoch, example) only");
}

/* ---- the text ------------------------------------------------------------------------------ */

static void round_trip(const char *text, const char *canonical) {
  clt_augment a, b;
  char out[CLT_AUG_TEXT_MAX], again[CLT_AUG_TEXT_MAX] = "";
  if (clt_augment_parse(text, &a, &E)) {
    check(0, "%s: %s", text, E.msg);
    return;
  }
  clt_augment_format(&a, out, sizeof out);
  const int parsed = clt_augment_parse(out, &b, &E) == CLT_OK;
  if (parsed) clt_augment_format(&b, again, sizeof again);
  int same = parsed && a.n == b.n;
  for (int i = 0; same && i < a.n; i++) {
    const clt_aug_stage *x = &a.stage[i], *y = &b.stage[i];
    same = x->kind == y->kind && x->flip == y->flip && x->lo == y->lo && x->hi == y->hi &&
           x->wlo == y->wlo && x->whi == y->whi && x->width_given == y->width_given &&
           x->height == y->height && x->width == y->width && x->fill == y->fill &&
           x->nearest == y->nearest && x->fill_value == y->fill_value && x->vmin == y->vmin &&
           x->vmax == y->vmax;
  }
  check(strcmp(out, canonical) == 0 && same && strcmp(out, again) == 0,
        "%s: canonical %s (want %s), read back the same", text, out, canonical);
}

static void refused(const char *text, const char *needle) {
  clt_augment a;
  const int rc = clt_augment_parse(text, &a, &E);
  check(rc == CLT_ERR_ARG && strstr(E.msg, needle) && !strchr(E.msg, '\n') && a.n == 0,
        "'%s' refused: %s", text, rc ? E.msg : "(accepted)");
}

static void test_text(void) {
  round_trip("flip,rotate=0.1,zoom=0.1,translate=0.1,contrast=0.2",
             "flip=horizontal_and_vertical,rotate=0.1,zoom=0.1,translate=0.1,contrast=0.2");
  round_trip("flip=horizontal,rotate=-0.05:0.2,zoom=0.2/0.1,translate=0.1/-0.2:0.3",
             "flip=horizontal,rotate=-0.05:0.2,zoom=0.2/0.1,translate=0.1/-0.2:0.3");
  round_trip("rotate=0.3:-0.1,crop=80x64,brightness=-0.2",
             "rotate=-0.1:0.3,crop=80x64,brightness=0.2");
  round_trip("fill=constant,fill_value=7,interpolation=nearest,rotate=0.1,fill=reflect,zoom=0.1",
             "fill=constant,interpolation=nearest,fill_value=7,rotate=0.1,fill=reflect,zoom=0.1");
  round_trip("value_range=0:1,contrast=0:0.2,brightness=0.1",
             "value_range=0:1,contrast=0:0.2,brightness=0.1");
  round_trip("flip=vertical,flip=vertical", "flip=vertical,flip=vertical");
  round_trip("translate=0.1/0.1,zoom=0.1/0.1", "translate=0.1,zoom=0.1/0.1");
  refused("blur=3", "blur=3: unknown augmentation (known: flip, rotate");
  refused("rotate=2", "rotate=2: factor (fractions of a full turn) 2 outside [-1, 1]");
  refused("rotate=0.1,zoom=-1", "zoom=-1: height_factor -1 outside (-1, 1]");
  refused("zoom=0.1/1.5", "zoom=0.1/1.5: width_factor 1.5 outside (-1, 1]");
  refused("translate=1.2", "translate=1.2: height_factor 1.2 outside [-1, 1]");
  refused("contrast=1.5", "contrast=1.5: factor 1.5 outside [0, 1]");
  refused("brightness=-0.5:1.01", "brightness=-0.5:1.01: factor 1.01 outside [-1, 1]");
  refused("rotate", "rotate: needs a value: rotate=F or rotate=LO:HI");
  refused("rotate=abc", "rotate=abc: malformed");
  refused("rotate=0.1:", "rotate=0.1:: malformed");
  refused("rotate=nan", "rotate=nan: malformed");
  refused("rotate=0x10", "rotate=0x10: malformed");
  refused("contrast=0.1/0.2", "contrast=0.1/0.2: malformed");
  refused("crop=8", "crop=8: expected crop=HxW, each from 1 to 8192");
  refused("crop=0x4", "crop=0x4: expected crop=HxW");
  refused("crop=4.5x4", "crop=4.5x4: expected crop=HxW");
  refused("flip=diagonal",
          "flip=diagonal: expected horizontal, vertical or horizontal_and_vertical");
  refused("flip=", "flip=: malformed");
  refused("fill=mirror,rotate=0.1",
          "fill=mirror: expected fill=reflect, wrap, constant or nearest");
  refused("interpolation=cubic,rotate=0.1", "interpolation=cubic: expected interpolation=bilinear");
  refused("fill_value=300,rotate=0.1", "fill_value=300: expected a number from 0 to 255");
  refused("value_range=0:300,contrast=0.1", "value_range=0:300: expected LO:HI within 0:255");
  refused("rotate=0.1,fill=constant",
          "fill=constant: an option applies to the augmentations after it");
  refused("fill=constant", "fill=constant: an option applies");
  refused("", "empty");
  refused("flip,,rotate=0.1", "an empty item");
  refused("flip,", "an empty item");
  refused("=3", "=3: not an augmentation");
  char many[400] = "flip";
  for (int i = 0; i < CLT_AUG_MAX_STAGES; i++) {
    const size_t len = strlen(many);
    snprintf(many + len, sizeof many - len, ",flip");
  }
  refused(many, "flip: more than 16 augmentation stages");
}

/* ---- through a photo folder's batch source ------------------------------------------------- */

enum { SIZE = 12, GLOBAL = 4, COUNT = 9, OUT_H = 10, OUT_W = 9 };

/* Loads one pass (training for epoch >= 0) through n replicas, replica 0 taking
 * the first half of each step; x gets every example's floats, in example order. */
static int load_pass(clt_source *src, clt_replica **reps, cl_mem *xs, cl_mem *ys, int n, int epoch,
                     float *x) {
  const size_t per = (size_t)OUT_H * OUT_W * 3;
  const int max_slice[2] = {GLOBAL, GLOBAL};
  int order[COUNT], status = clt_source_attach(src, reps, n, GLOBAL, max_slice, CLT_PRE_RAW, &E);
  clt_epoch_order(5, epoch < 0 ? 0 : epoch, order, COUNT);
  if (!status) status = clt_source_begin_epoch(src, order, epoch, &E);
  for (int step = 0; !status && step * GLOBAL < COUNT; step++) {
    const int batch = COUNT - step * GLOBAL < GLOBAL ? COUNT - step * GLOBAL : GLOBAL;
    for (int r = 0; r < n && !status; r++) {
      const int first = n == 1 ? 0 : r ? batch / 2 : 0;
      const int len = n == 1 ? batch : r ? batch - batch / 2 : batch / 2;
      status = clt_source_load(src, r, step, first, len, xs[r], ys[r], NULL, &E);
      if (status || !len) continue;
      float *got = xmalloc((size_t)len * per * sizeof *got);
      const cl_int rc = clEnqueueReadBuffer(reps[r]->queue, xs[r], CL_TRUE, 0,
                                            (size_t)len * per * sizeof *got, got, 0, NULL, NULL);
      if (rc) status = clt_fail(&E, CLT_ERR_DEVICE, "reading back: %s", clt_status_name(rc));
      for (int k = 0; k < len && !status; k++)
        memcpy(x + (size_t)order[step * GLOBAL + first + k] * per, got + (size_t)k * per,
               per * sizeof *got);
      free(got);
    }
  }
  clt_source_detach(src);
  return status;
}

static void test_source(const char *make_photos) {
  char dir[64] = "/tmp/cltaugment.XXXXXX", command[512];
  if (!mkdtemp(dir)) {
    check(0, "a temporary folder");
    return;
  }
  snprintf(command, sizeof command, "'%s' '%s/ph' 3 3 4 >/dev/null", make_photos, dir);
  snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/ph");
  if (system(command) != 0) {
    check(0, "make_photos");
    return;
  }
  clt_device_list list = {0};
  clt_replica *reps[2] = {NULL, NULL};
  cl_mem xs[2] = {NULL, NULL}, ys[2] = {NULL, NULL};
  const size_t per = (size_t)OUT_H * OUT_W * 3, all = COUNT * per;
  int status = clt_devices_enumerate(&list, &E);
  if (!status && list.count < 1) status = clt_fail(&E, CLT_ERR_DEVICE, "no OpenCL device");
  for (int r = 0; r < 2 && !status; r++) {
    status = clt_backend_create_replica(&list.devices[0], &reps[r], &E);
    if (!status)
      status = clt_replica_alloc(reps[r], GLOBAL * per * sizeof(float), "inputs", &xs[r], &E);
    if (!status) status = clt_replica_alloc(reps[r], GLOBAL * sizeof(int), "labels", &ys[r], &E);
  }
  clt_data d = {0};
  clt_data_spec spec = {.dir = dir, .with_train = 1, .image_size = SIZE, .seed = 5};
  const char *text = "flip,rotate=0.1,zoom=0.1,translate=0.1,contrast=0.2,brightness=0.1,crop=10x9";
  if (!status) status = clt_augment_parse(text, &spec.augment, &E);
  if (!status) status = clt_data_open(&spec, &d, &E);
  check(!status && d.height == OUT_H && d.width == OUT_W && d.ntrain == COUNT,
        "a photo folder with --augment %s opens to %dx%d images: %s", text, d.height, d.width,
        status ? E.msg : "");
  float *one = xmalloc(all * sizeof *one), *two = xmalloc(all * sizeof *two);
  float *other = xmalloc(all * sizeof *other), *eval = xmalloc(all * sizeof *eval);
  if (!status) status = load_pass(d.train, reps, xs, ys, 1, 2, one);
  if (!status) status = load_pass(d.train, reps, xs, ys, 2, 2, two);
  if (!status) status = load_pass(d.train, reps, xs, ys, 2, 3, other);
  if (!status) status = load_pass(d.train, reps, xs, ys, 2, -1, eval);
  check(!status, "passes through the source: %s", status ? E.msg : "");
  if (!status) {
    check(same_floats(one, two, all),
          "epoch 2: one replica and two load the same augmented images");
    check(!same_floats(one, other, all), "epoch 3 draws other images than epoch 2");
    /* The host: decode, then clt_augment_image with the example's draws. */
    clt_photos *p = NULL;
    status = clt_photos_open(dir, SIZE, 0, 5, &p, NULL, &E);
    unsigned char *img = xmalloc((size_t)SIZE * SIZE * 3), *aug = xmalloc(per);
    float *work = xmalloc(clt_augment_work_floats(&spec.augment, SIZE, SIZE, 3) * sizeof *work);
    int bad_train = 0, bad_eval = 0, changed = 0;
    for (int i = 0; i < COUNT && !status; i++) {
      if ((status = clt_photos_decode(p, i, img, &E))) break;
      clt_augment_image(&spec.augment, 5, 2, i, img, SIZE, SIZE, 3, aug, work);
      for (size_t k = 0; k < per; k++) bad_train += one[i * per + k] != (float)aug[k];
      clt_augment_image(&spec.augment, 5, -1, i, img, SIZE, SIZE, 3, aug, work);
      for (size_t k = 0; k < per; k++) bad_eval += eval[i * per + k] != (float)aug[k];
      /* Evaluation is the crop's resize only: the 12x12 image scaled to 10x9. */
      changed += !same_floats(one + i * per, eval + i * per, per);
    }
    check(!status && bad_train == 0,
          "training images are the host's decode augmented with (seed, epoch, example)'s "
          "draws (%d values differ) %s",
          bad_train, status ? E.msg : "");
    check(!status && bad_eval == 0,
          "evaluation images are only resized to the crop (%d values differ)", bad_eval);
    check(changed == COUNT, "every training image differs from its evaluation image (%d of %d)",
          changed, COUNT);
    free(img);
    free(aug);
    free(work);
    clt_photos_free(p);
  }
  clt_data_close(&d);
  free(one);
  free(two);
  free(other);
  free(eval);
  for (int r = 0; r < 2; r++) {
    if (xs[r]) clReleaseMemObject(xs[r]);
    if (ys[r]) clReleaseMemObject(ys[r]);
    if (reps[r]) clt_backend_destroy_replica(reps[r]);
  }
  clt_devices_free(&list);
  snprintf(command, sizeof command, "rm -rf '%.*s'", (int)(strlen(dir) - 3), dir);
  if (system(command) != 0) printf("could not remove %s\n", dir);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_augment CASES.npz MAKE_PHOTOS\n");
    return 2;
  }
  test_fixtures(argv[1]);
  test_draws();
  test_text();
  test_source(argv[2]);
  return check_summary();
}
