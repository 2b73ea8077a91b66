#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "idx.h"
#include "timing.h"
#include "trainer.h"

void clt_train_defaults(clt_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->data_dir = "/usr/share/datasets/fashion-mnist";
  o->image_size = 224;
  o->model = "fmnist-cnn";
  o->devices = "all";
  o->split = "auto";
  o->epochs = 10;
  o->lr = 1e-3;
  o->seed = 42;
  o->batch_per_replica = 64;
  o->checkpoint_dir = "./training_checkpoints";
  o->checkpoint_every = 2;
  o->keep = 5;
  o->out = stdout;
}

/* Where the examples come from: IDX files held in memory and uploaded to every
 * device, or a photo folder decoded on host threads while training runs. */
typedef struct data_source {
  const char *dir;
  int photos;
  clt_dataset train, test;    /* IDX */
  clt_photos *ptrain, *ptest; /* photo folder; ptest NULL without a validation split */
  clt_loader *ltrain, *ltest;
  int ntrain, ntest;          /* examples used (after the limits) */
  clt_shape shape;
  int classes;
} data_source;

/* Decoded photos kept in host memory across epochs (later epochs decode nothing
 * when the set fits). */
#define PHOTO_CACHE_BYTES ((size_t)2 << 30)
#define PHOTO_BATCHES_AHEAD 3

static long limited(long count, long limit) { return limit > 0 && limit < count ? limit : count; }

/* Opens dir. with_train 0 (evaluation): the test set is the validation subset of
 * a photo folder if validation_split > 0, else the whole folder. */
static int open_data(const char *dir, int with_train, long train_limit, long test_limit,
                     int image_size, double validation_split, uint64_t seed, data_source *d,
                     clt_err *e) {
  int status = CLT_OK;
  memset(d, 0, sizeof *d);
  d->dir = dir;
  if (clt_photos_is_folder(dir)) {
    d->photos = 1;
    clt_photos *a = NULL, *b = NULL;
    if ((status = clt_photos_open(dir, image_size, validation_split, seed, &a, &b, e))) return status;
    if (with_train) {
      d->ptrain = a;
      d->ptest = b;
    } else {
      d->ptest = b ? b : a;
      if (b) clt_photos_free(a);
    }
    const clt_photos *any = d->ptrain ? d->ptrain : d->ptest;
    d->ntrain = d->ptrain ? (int)limited(clt_photos_count(d->ptrain), train_limit) : 0;
    d->ntest = d->ptest ? (int)limited(clt_photos_count(d->ptest), test_limit) : 0;
    d->shape = (clt_shape){image_size, image_size, 3};
    d->classes = clt_photos_classes(any);
    return CLT_OK;
  }
  if (with_train) {
    if ((status = clt_idx_load_dir(dir, "train", &d->train, e))) {
      /* Say what else the folder could have been. */
      if (strstr(e->msg, "no such file")) clt_wrap(e, "%s has no class subfolders of photos, nor IDX files", dir);
      return status;
    }
    d->train.count = d->ntrain = (int)limited(d->train.count, train_limit);
  }
  if ((status = clt_idx_load_dir(dir, "t10k", &d->test, e))) {
    if (!with_train && strstr(e->msg, "no such file")) {
      clt_wrap(e, "%s has no class subfolders of photos, nor IDX files", dir);
    }
    return status;
  }
  d->test.count = d->ntest = (int)limited(d->test.count, test_limit);
  if (with_train && (d->test.height != d->train.height || d->test.width != d->train.width)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: test images are %dx%d but training images are %dx%d",
                    dir, d->test.height, d->test.width, d->train.height, d->train.width);
  }
  d->shape = (clt_shape){d->test.height, d->test.width, d->test.channels};
  d->classes = d->test.classes;
  if (with_train && d->train.classes > d->classes) d->classes = d->train.classes;
  return CLT_OK;
}

/* Puts the data where the trainer reads it: uploads IDX sets to every device,
 * or starts photo decoders feeding global batches to every replica. */
static int feed_data(data_source *d, clt_trainer *t, clt_err *e) {
  if (!d->photos) {
    return clt_trainer_upload(t, d->ntrain ? &d->train : NULL, &d->test, e);
  }
  const int n = clt_trainer_replicas(t), global = clt_trainer_global_batch(t);
  int status = CLT_OK;
  if (d->ptrain) {
    status = clt_loader_create(d->ptrain, n, global, PHOTO_BATCHES_AHEAD, 0, PHOTO_CACHE_BYTES,
                               &d->ltrain, e);
  }
  if (!status && d->ptest) {
    status = clt_loader_create(d->ptest, n, global, PHOTO_BATCHES_AHEAD, 0, PHOTO_CACHE_BYTES,
                               &d->ltest, e);
  }
  if (!status) clt_trainer_attach_loaders(t, d->ltrain, d->ntrain, d->ltest, d->ntest);
  return status;
}

static void close_data(data_source *d) {
  clt_loader_destroy(d->ltrain);
  clt_loader_destroy(d->ltest);
  clt_photos_free(d->ptrain);
  clt_photos_free(d->ptest);
  clt_dataset_free(&d->train);
  clt_dataset_free(&d->test);
}

/* Images must have the shape the model was built for. */
static int check_input(const clt_model *m, const data_source *d, clt_err *e) {
  if (d->shape.h != m->input.h || d->shape.w != m->input.w || d->shape.c != m->input.c) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: images are %dx%dx%d, model %s expects %dx%dx%d%s", d->dir,
                    d->shape.h, d->shape.w, d->shape.c, m->name, m->input.h, m->input.w, m->input.c,
                    d->photos ? " (set --image-size)" : "");
  }
  if (d->classes != m->classes) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: %d classes, model has %d outputs", d->dir, d->classes,
                    m->classes);
  }
  return CLT_OK;
}

/* A photo folder's class names, one per line (malloc'd), or NULL for IDX data.
 * *status is set on failure. */
static char *class_names(const data_source *d, int *status, clt_err *e) {
  *status = CLT_OK;
  if (!d->photos) return NULL;
  const clt_photos *p = d->ptrain ? d->ptrain : d->ptest;
  size_t size = 1;
  for (int c = 0; c < d->classes; c++) size += strlen(clt_photos_class_name(p, c)) + 1;
  char *names = malloc(size), *at = names;
  if (!names) {
    *status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
    return NULL;
  }
  for (int c = 0; c < d->classes; c++) at += sprintf(at, "%s%s", c ? "\n" : "", clt_photos_class_name(p, c));
  return names;
}

/* A checkpoint trained on a photo folder must meet the same classes, in the
 * same order: the same count with other names would be scored wrongly. */
static int check_classes(const data_source *d, const clt_checkpoint *st, const char *ckpt, clt_err *e) {
  if (!d->photos || !st->class_names) return CLT_OK;
  int status;
  char *names = class_names(d, &status, e);
  if (status) return status;
  if (strcmp(names, st->class_names) != 0) {
    for (char *c = names; *c; c++) *c = *c == '\n' ? ',' : *c;
    char *want = strdup(st->class_names);
    for (char *c = want; c && *c; c++) *c = *c == '\n' ? ',' : *c;
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: trained on classes (%s), but %s has (%s)", ckpt,
                      want ? want : "?", d->dir, names);
    free(want);
  }
  free(names);
  return status;
}

/* The selected devices, in selection order. */
static int select_devices(const char *spec, clt_device_list *list, const clt_device **chosen,
                          int *n, clt_err *e) {
  int status = clt_devices_enumerate(list, e);
  if (status) return status;
  int idx[CLT_MAX_SELECTED];
  if (list->count > (int)(sizeof idx / sizeof idx[0])) {
    return clt_fail(e, CLT_ERR_DEVICE, "%d OpenCL devices: more than cltrain handles", list->count);
  }
  if ((status = clt_devices_select(list, spec, idx, n, e))) return status;
  if (*n > CLT_MAX_REPLICAS) {
    return clt_fail(e, CLT_ERR_DEVICE, "--devices %s selects %d devices; cltrain handles up to %d",
                    spec, *n, CLT_MAX_REPLICAS);
  }
  for (int i = 0; i < *n; i++) chosen[i] = &list->devices[idx[i]];
  return CLT_OK;
}

/* Prints the `top` largest of n (label, seconds, calls) rows. */
static void print_rows(FILE *out, char (*label)[112], const double *sec, const long *calls, int n,
                       int top, double busy) {
  char *done = calloc((size_t)n + 1, 1);
  double rest = 0;
  for (int k = 0; k < n && done; k++) {
    int best = -1;
    for (int i = 0; i < n; i++) {
      if (!done[i] && (best < 0 || sec[i] > sec[best])) best = i;
    }
    done[best] = 1;
    if (k >= top) {
      rest += sec[best];
      continue;
    }
    fprintf(out, "  %8.3fs %5.1f%% %7ld calls  %s\n", sec[best], busy > 0 ? 100.0 * sec[best] / busy : 0.0,
            calls[best], label[best]);
  }
  if (rest > 0) fprintf(out, "  %8.3fs %5.1f%%                the other %d\n", rest, 100.0 * rest / busy, n - top);
  free(done);
}

/* Device time by layer and pass (the scope of each kernel), then by kernel. */
static void print_profile(FILE *out, clt_replica *r, double wall) {
  clt_profile *p = r->profile;
  double busy = 0;
  for (int i = 0; i < p->nnames; i++) busy += p->seconds[i];
  fprintf(out, "  profile of device %d: busy %.2fs of %.2fs (%.0f%% idle)\n", r->device.index, busy,
          wall, wall > 0 ? 100.0 * (1.0 - busy / wall) : 0.0);
  static char label[CLT_PROFILE_MAX_NAMES][112];
  static double sec[CLT_PROFILE_MAX_NAMES];
  static long calls[CLT_PROFILE_MAX_NAMES];
  for (int part = 0; part < 2; part++) {
    /* part 0: the text before ": " (layer and pass); 1: after it (kernel). */
    int n = 0;
    for (int i = 0; i < p->nnames; i++) {
      const char *colon = strstr(p->names[i], ": ");
      char key[112];
      if (!colon) snprintf(key, sizeof key, "%s", p->names[i]);
      else if (part == 0) snprintf(key, sizeof key, "%.*s", (int)(colon - p->names[i]), p->names[i]);
      else snprintf(key, sizeof key, "%s", colon + 2);
      int j = 0;
      while (j < n && strcmp(label[j], key) != 0) j++;
      if (j == n) {
        snprintf(label[n], sizeof label[n], "%s", key);
        sec[n] = 0;
        calls[n++] = 0;
      }
      sec[j] += p->seconds[i];
      calls[j] += p->calls[i];
    }
    fprintf(out, "  by %s:\n", part == 0 ? "layer and pass" : "kernel");
    print_rows(out, label, sec, calls, n, part == 0 ? 30 : 15, busy);
  }
}

/* A replica's own throughput: examples over the time it spent computing them
 * (the epoch's wall time when that was not measured, i.e. with one replica). */
static double replica_rate(const clt_replica_stats *st, double epoch_seconds) {
  double t = st->compute_seconds > 0 ? st->compute_seconds : epoch_seconds;
  return t > 0 ? st->examples / t : 0.0;
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

static void write_log(FILE *log, int epoch, const clt_epoch_result *r, double test_loss,
                      double test_acc, double seconds, long examples, const clt_train_opts *o,
                      clt_trainer *t) {
  if (!log) return;
  char tl[32] = "null", ta[32] = "null"; /* no test set: JSON null, not nan */
  if (!isnan(test_loss)) snprintf(tl, sizeof tl, "%.6f", test_loss);
  if (!isnan(test_acc)) snprintf(ta, sizeof ta, "%.4f", test_acc * 100);
  fprintf(log,
          "{\"epoch\": %d, \"train_loss\": %.6f, \"train_accuracy\": %.4f, \"test_loss\": %s, "
          "\"test_accuracy\": %s, \"seconds\": %.3f, \"train_seconds\": %.3f, "
          "\"images_per_second\": %.1f, \"train_examples\": %ld, \"global_batch\": %d, "
          "\"data_wait_seconds\": %.3f, \"model\": ",
          epoch, r->train_loss, r->train_acc * 100, tl, ta, seconds, r->seconds,
          examples / r->seconds, examples, clt_trainer_global_batch(t), r->data_wait_seconds);
  json_string(log, o->model);
  fprintf(log, ", \"allreduce_seconds\": %.3f, \"replicas\": [", r->allreduce_seconds);
  for (int i = 0; i < clt_trainer_replicas(t); i++) {
    const clt_replica *rep = clt_trainer_replica(t, i);
    fprintf(log, "%s{\"index\": %d, \"device\": ", i ? ", " : "", rep->device.index);
    json_string(log, rep->device.name);
    const clt_replica_stats *st = &r->replicas[i];
    fprintf(log, ", \"examples\": %ld, \"share\": %.4f, \"examples_per_second\": %.1f, "
            "\"busy_seconds\": %.3f, \"compute_seconds\": %.3f}", st->examples,
            (double)st->examples / examples, replica_rate(st, r->seconds), st->busy_seconds,
            st->compute_seconds);
  }
  fprintf(log, "]}\n");
  fflush(log);
}

int clt_train(const clt_train_opts *o, clt_err *e) {
  int status = CLT_OK;
  data_source data = {0};
  clt_device_list devices = {0};
  clt_trainer *t = NULL;
  clt_checkpoint state = {0};
  FILE *log = NULL;
  clt_model model;
  const double t_launch = clt_now_seconds(); /* start-up is timed from here */
  const clt_device *chosen[CLT_MAX_REPLICAS];
  int nchosen = 0;
  char ckpt_path[4096];
  uint64_t seed = o->seed;
  int first_epoch = 0;
  long step = 0;

  if ((status = open_data(o->data_dir, 1, o->train_limit, o->test_limit, o->image_size,
                          o->validation_split, o->seed, &data, e))) {
    goto cleanup;
  }
  if (!data.photos && (o->image_size_given || o->validation_split_given)) {
    /* IDX files come split and sized: a photo-folder option would be silently ignored. */
    status = clt_fail(e, CLT_ERR_ARG, "%s holds IDX files: --%s applies to photo folders only",
                      o->data_dir, o->image_size_given ? "image-size" : "validation-split");
    goto cleanup;
  }
  if (o->resume) {
    /* The model, weights, optimizer, counters and data order come from the checkpoint. */
    if ((status = clt_checkpoint_resolve(o->checkpoint_dir, ckpt_path, sizeof ckpt_path, e))) {
      clt_wrap(e, "--resume");
      goto cleanup;
    }
    if ((status = clt_checkpoint_model(ckpt_path, &model, e))) goto cleanup;
    if (o->model_given && strcmp(o->model, model.name) != 0) {
      status = clt_fail(e, CLT_ERR_ARG, "--resume: %s holds model %s, not --model %s", ckpt_path,
                        model.name, o->model);
      goto cleanup;
    }
    if ((status = clt_checkpoint_load(ckpt_path, &model, 1, &state, e))) goto cleanup;
    if (o->seed_given && o->seed != state.seed) {
      status = clt_fail(e, CLT_ERR_ARG, "--resume: %s was trained with --seed %llu, not %llu",
                        ckpt_path, (unsigned long long)state.seed, (unsigned long long)o->seed);
      goto cleanup;
    }
    seed = state.seed;
    first_epoch = (int)state.epoch;
    step = (long)state.iterations;
    if (data.photos && (seed != o->seed || model.input.h != o->image_size)) {
      /* The split and the image size are the checkpoint's. */
      close_data(&data);
      if ((status = open_data(o->data_dir, 1, o->train_limit, o->test_limit, model.input.h,
                              o->validation_split, seed, &data, e))) {
        goto cleanup;
      }
    }
  } else {
    /* Photo folders default to the second reference workload's model. */
    const char *name = data.photos && !o->model_given ? "resnet50" : o->model;
    if ((status = clt_model_build(name, data.shape, data.classes, &model, e))) {
      if (e->code == CLT_ERR_FORMAT) clt_wrap(e, "%s", o->data_dir);
      goto cleanup;
    }
  }
  if ((status = check_input(&model, &data, e))) goto cleanup;
  if (o->resume && (status = check_classes(&data, &state, ckpt_path, e))) goto cleanup;
  if (!state.class_names && (state.class_names = class_names(&data, &status, e), status)) goto cleanup;
  if ((status = select_devices(o->devices, &devices, chosen, &nchosen, e))) goto cleanup;
  clt_split_mode split;
  double weights[CLT_BALANCE_MAX];
  if ((status = clt_split_parse(o->split, nchosen, &split, weights, e))) goto cleanup;
  if (o->checkpoint_every > 0 && (status = clt_checkpoint_prepare_dir(o->checkpoint_dir, e))) goto cleanup;
  if (o->log_path && !(log = fopen(o->log_path, o->resume ? "a" : "w"))) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot open log for writing: %s", o->log_path, strerror(errno));
    goto cleanup;
  }

  const int global_batch = o->batch_per_replica * nchosen;
  const int steps = (data.ntrain + global_batch - 1) / global_batch;
  fprintf(o->out, "Model %s: %zu parameters, %d layers; %d training and %d %s images of %dx%dx%d\n",
          model.name, model.param_count, model.nlayers, data.ntrain, data.ntest,
          data.photos ? "validation" : "test", model.input.h, model.input.w, model.input.c);
  if (data.photos) {
    fprintf(o->out, "Photos from %s: %d classes (%s", o->data_dir, data.classes,
            clt_photos_class_name(data.ptrain, 0));
    for (int c = 1; c < data.classes; c++) fprintf(o->out, ", %s", clt_photos_class_name(data.ptrain, c));
    fprintf(o->out, ")\n");
  }
  for (int i = 0; i < nchosen; i++) {
    fprintf(o->out, "Replica %d: device %d, %s (%s, %s)\n", i, chosen[i]->index, chosen[i]->name,
            clt_device_type_name(chosen[i]->type), chosen[i]->platform_name);
  }
  fprintf(o->out, "Global batch %d (%d per replica), %d steps per epoch, epochs %d to %d", global_batch,
          o->batch_per_replica, steps, first_epoch + 1, o->epochs);
  if (nchosen > 1) fprintf(o->out, ", --split %s", o->split);
  fprintf(o->out, "\n");
  if (o->resume) {
    fprintf(o->out, "Resuming from %s: %d epochs and %ld steps done\n", ckpt_path, first_epoch, step);
  }
  fflush(o->out);
  if (first_epoch >= o->epochs) {
    fprintf(o->out, "Nothing to do: the checkpoint has %d epochs, --epochs is %d\n", first_epoch, o->epochs);
    goto cleanup;
  }

  double t_setup = clt_now_seconds();
  const int max_examples = data.ntrain > data.ntest ? data.ntrain : data.ntest;
  if ((status = clt_trainer_create(&model, chosen, nchosen, o->batch_per_replica, max_examples, split,
                                   weights, &t, e))) {
    goto cleanup;
  }
  clt_trainer_check_replicas(t, o->check_replicas);
  if (o->progress) clt_trainer_progress(t, o->out);
  if ((status = feed_data(&data, t, e))) goto cleanup;
  if (!o->resume) {
    state.params = malloc(model.flat_floats * sizeof(float));
    state.adam_m = calloc(model.flat_floats, sizeof(float));
    state.adam_v = calloc(model.flat_floats, sizeof(float));
    if (!state.params || !state.adam_m || !state.adam_v) {
      status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
      goto cleanup;
    }
    /* Initialised once on the host, broadcast: every replica starts identical. */
    clt_model_init_params(&model, seed, state.params);
  }
  if ((status = clt_trainer_set_state(t, state.params, state.adam_m, state.adam_v, e))) goto cleanup;
  const double t_ready = clt_now_seconds();
  fprintf(o->out, "Set-up (kernels, buffers, data upload): %.1fs, %.1fs from launch to the first step; "
          "device memory per replica:", t_ready - t_setup, t_ready - t_launch);
  for (int i = 0; i < nchosen; i++) {
    const clt_replica *rep = clt_trainer_replica(t, i);
    fprintf(o->out, "%s %.0f MiB (network %.0f MiB)", i ? "," : "", rep->allocated_bytes / 1048576.0,
            clt_trainer_replica_bytes(t, i) / 1048576.0);
  }
  fprintf(o->out, "\n");
  fflush(o->out);

  const clt_adam adam = {o->lr, 0.9, 0.999, 1e-7};
  int excluded_said[CLT_MAX_REPLICAS] = {0};
  for (int epoch = first_epoch; epoch < o->epochs; epoch++) {
    double t0 = clt_now_seconds();
    clt_epoch_result r;
    if ((status = clt_trainer_epoch(t, seed, epoch, &adam, &step, &r, e))) goto cleanup;
    if (r.bad_step >= 0) {
      status = clt_fail(e, CLT_ERR_NUMERIC,
                        "epoch %d, step %d: non-finite loss or gradient; stopping without saving "
                        "(the newest checkpoint is left as it was; try a lower --lr)",
                        epoch + 1, r.bad_step + 1);
      goto cleanup;
    }
    double test_loss = NAN, test_acc = NAN;
    if (data.ntest && (status = clt_trainer_evaluate(t, &test_loss, &test_acc, e))) goto cleanup;
    double seconds = clt_now_seconds() - t0;
    fprintf(o->out, "Epoch %d, Loss: %.4f, Accuracy: %.2f", epoch + 1, r.train_loss, r.train_acc * 100);
    if (data.ntest) {
      fprintf(o->out, ", %s Loss: %.4f, %s Accuracy: %.2f", data.photos ? "Validation" : "Test",
              test_loss, data.photos ? "Validation" : "Test", test_acc * 100);
    }
    fprintf(o->out, "\n  %.1fs, %.0f images/s training", seconds, data.ntrain / r.seconds);
    if (nchosen > 1) fprintf(o->out, ", all-reduce %.2fs", r.allreduce_seconds);
    if (data.photos) fprintf(o->out, ", waited %.2fs for images", r.data_wait_seconds);
    if (epoch == first_epoch) {
      fprintf(o->out, ", start-up %.1fs (launch to the end of the first step)", r.first_step_done - t_launch);
    }
    fprintf(o->out, "\n");
    for (int i = 0; i < nchosen && nchosen > 1; i++) {
      const clt_replica *rep = clt_trainer_replica(t, i);
      const clt_replica_stats *st = &r.replicas[i];
      fprintf(o->out, "  device %d (%s): share %.1f%%, %ld examples, %.0f images/s, busy %.0f%%\n",
              rep->device.index, rep->device.name, 100.0 * st->examples / data.ntrain, st->examples,
              replica_rate(st, r.seconds), 100.0 * st->busy_seconds / r.seconds);
      if (clt_balancer_excluded(clt_trainer_balancer(t), i) && !excluded_said[i]) {
        excluded_said[i] = 1;
        fprintf(o->out, "  note: --split auto gives device %d no examples: it is so slow that any share "
                "would lengthen the step; it stays in the all-reduce and is re-timed on one example every 64 "
                "steps (force a share with --split weights)\n",
                rep->device.index);
      }
    }
    write_log(log, epoch + 1, &r, test_loss, test_acc, seconds, data.ntrain, o, t);
    if (o->profile) {
      for (int i = 0; i < nchosen; i++) print_profile(o->out, clt_trainer_replica(t, i), r.seconds);
    }
    const int last = epoch + 1 == o->epochs;
    if (o->checkpoint_every > 0 && ((epoch + 1) % o->checkpoint_every == 0 || last)) {
      if ((status = clt_trainer_get_state(t, state.params, state.adam_m, state.adam_v, e))) goto cleanup;
      state.iterations = step;
      state.epoch = epoch + 1;
      state.seed = seed;
      char written[4096];
      if ((status = clt_checkpoint_save(o->checkpoint_dir, o->keep, &model, &state, written,
                                        sizeof written, e))) {
        goto cleanup;
      }
      fprintf(o->out, "  saved %s\n", written);
    }
    fflush(o->out);
  }

cleanup:
  if (log && fclose(log) != 0 && status == CLT_OK) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot write log: %s", o->log_path, strerror(errno));
  }
  clt_trainer_destroy(t);
  close_data(&data);
  clt_devices_free(&devices);
  clt_checkpoint_free(&state);
  return status;
}

int clt_eval(const clt_eval_opts *o, clt_err *e) {
  int status = CLT_OK;
  data_source data = {0};
  clt_device_list devices = {0};
  clt_trainer *t = NULL;
  clt_checkpoint state = {0};
  clt_model model;
  const clt_device *chosen[CLT_MAX_REPLICAS];
  int nchosen = 0;
  char path[4096];

  if ((status = clt_checkpoint_resolve(o->checkpoint, path, sizeof path, e))) goto cleanup;
  if ((status = clt_checkpoint_model(path, &model, e))) goto cleanup;
  if ((status = clt_checkpoint_load(path, &model, 0, &state, e))) goto cleanup;
  if ((status = open_data(o->data_dir, 0, 0, o->test_limit, model.input.h, o->validation_split,
                          o->seed, &data, e))) {
    goto cleanup;
  }
  if (!data.photos && o->validation_split_given) {
    status = clt_fail(e, CLT_ERR_ARG, "%s holds IDX files: --validation-split applies to photo folders only",
                      o->data_dir);
    goto cleanup;
  }
  if ((status = check_input(&model, &data, e))) goto cleanup;
  if ((status = check_classes(&data, &state, path, e))) goto cleanup;
  if ((status = select_devices(o->devices, &devices, chosen, &nchosen, e))) goto cleanup;
  if ((status = clt_trainer_create_eval(&model, chosen, nchosen, o->batch_per_replica, data.ntest,
                                        &t, e))) {
    goto cleanup;
  }
  if ((status = feed_data(&data, t, e))) goto cleanup;
  if ((status = clt_trainer_set_state(t, state.params, NULL, NULL, e))) goto cleanup;
  double loss, acc;
  if ((status = clt_trainer_evaluate(t, &loss, &acc, e))) goto cleanup;
  fprintf(o->out, "Checkpoint %s: model %s, %lld epochs, %lld steps; %d test images on %d device%s\n",
          path, model.name, (long long)state.epoch, (long long)state.iterations, data.ntest, nchosen,
          nchosen == 1 ? "" : "s");
  fprintf(o->out, "Accuracy: %.2f\nLoss: %.4f\n", acc * 100, loss);

cleanup:
  clt_trainer_destroy(t);
  close_data(&data);
  clt_devices_free(&devices);
  clt_checkpoint_free(&state);
  return status;
}
