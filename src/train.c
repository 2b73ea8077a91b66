#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "idx.h"
#include "trainer.h"

void clt_train_defaults(clt_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->data_dir = "/usr/share/datasets/fashion-mnist";
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

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Loads the train (optional) and test splits, applying the limits. */
static int load_data(const char *dir, long train_limit, long test_limit, clt_dataset *train,
                     clt_dataset *test, clt_err *e) {
  int status = CLT_OK;
  if (train) {
    if ((status = clt_idx_load_dir(dir, "train", train, e))) return status;
    if (train_limit > 0 && train_limit < train->count) train->count = (int)train_limit;
  }
  if ((status = clt_idx_load_dir(dir, "t10k", test, e))) return status;
  if (test_limit > 0 && test_limit < test->count) test->count = (int)test_limit;
  if (train && (test->height != train->height || test->width != train->width)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: test images are %dx%d but training images are %dx%d",
                    dir, test->height, test->width, train->height, train->width);
  }
  return CLT_OK;
}

/* Images must have the shape the model was built for. */
static int check_input(const clt_model *m, const clt_dataset *d, const char *dir, clt_err *e) {
  if (d->height != m->input.h || d->width != m->input.w || d->channels != m->input.c) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: images are %dx%dx%d, model %s expects %dx%dx%d", dir,
                    d->height, d->width, d->channels, m->name, m->input.h, m->input.w, m->input.c);
  }
  if (d->classes != m->classes) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: %d classes, model has %d outputs", dir, d->classes, m->classes);
  }
  return CLT_OK;
}

/* The selected devices, in selection order. */
static int select_devices(const char *spec, clt_device_list *list, const clt_device **chosen,
                          int *n, clt_err *e) {
  int status = clt_devices_enumerate(list, e);
  if (status) return status;
  int idx[CLT_MAX_REPLICAS * 4];
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

static void print_profile(FILE *out, clt_replica *r, double wall) {
  clt_profile *p = r->profile;
  double busy = 0;
  for (int i = 0; i < p->nnames; i++) busy += p->seconds[i];
  fprintf(out, "  profile of device %d: busy %.2fs of %.2fs (%.0f%% idle)\n", r->device.index, busy,
          wall, wall > 0 ? 100.0 * (1.0 - busy / wall) : 0.0);
  int done[CLT_PROFILE_MAX_NAMES] = {0};
  for (int k = 0; k < p->nnames; k++) {
    int best = -1;
    for (int i = 0; i < p->nnames; i++) {
      if (!done[i] && (best < 0 || p->seconds[i] > p->seconds[best])) best = i;
    }
    done[best] = 1;
    fprintf(out, "  %8.3fs %5.1f%% %7ld calls  %s\n", p->seconds[best],
            busy > 0 ? 100.0 * p->seconds[best] / busy : 0.0, p->calls[best], p->names[best]);
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
  fprintf(log,
          "{\"epoch\": %d, \"train_loss\": %.6f, \"train_accuracy\": %.4f, \"test_loss\": %.6f, "
          "\"test_accuracy\": %.4f, \"seconds\": %.3f, \"train_seconds\": %.3f, "
          "\"images_per_second\": %.1f, \"train_examples\": %ld, \"global_batch\": %d, "
          "\"model\": ",
          epoch, r->train_loss, r->train_acc * 100, test_loss, test_acc * 100, seconds, r->seconds,
          examples / r->seconds, examples, clt_trainer_global_batch(t));
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
  clt_dataset train = {0}, test = {0};
  clt_device_list devices = {0};
  clt_trainer *t = NULL;
  clt_checkpoint state = {0};
  FILE *log = NULL;
  clt_model model;
  const clt_device *chosen[CLT_MAX_REPLICAS];
  int nchosen = 0;
  char ckpt_path[4096];
  uint64_t seed = o->seed;
  int first_epoch = 0;
  long step = 0;

  if ((status = load_data(o->data_dir, o->train_limit, o->test_limit, &train, &test, e))) goto cleanup;
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
  } else {
    clt_shape input = {train.height, train.width, train.channels};
    if ((status = clt_model_build(o->model, input, train.classes, &model, e))) {
      if (e->code == CLT_ERR_FORMAT) clt_wrap(e, "%s", o->data_dir);
      goto cleanup;
    }
  }
  if ((status = check_input(&model, &train, o->data_dir, e))) goto cleanup;
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
  const int steps = (train.count + global_batch - 1) / global_batch;
  fprintf(o->out, "Model %s: %zu parameters, %d layers; %d training and %d test images of %dx%dx%d\n",
          model.name, model.param_count, model.nlayers, train.count, test.count, model.input.h,
          model.input.w, model.input.c);
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

  double t_setup = now_seconds();
  const int max_examples = train.count > test.count ? train.count : test.count;
  if ((status = clt_trainer_create(&model, chosen, nchosen, o->batch_per_replica, max_examples, split,
                                   weights, &t, e))) {
    goto cleanup;
  }
  clt_trainer_check_replicas(t, o->check_replicas);
  if (o->progress) clt_trainer_progress(t, o->out);
  if ((status = clt_trainer_upload(t, &train, &test, e))) goto cleanup;
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
  size_t device_bytes = 0;
  for (int i = 0; i < nchosen; i++) device_bytes += clt_trainer_replica(t, i)->allocated_bytes;
  fprintf(o->out, "Set-up (kernels, buffers, data upload): %.1fs, %.1f MiB of device memory per replica\n",
          now_seconds() - t_setup, device_bytes / 1048576.0 / nchosen);
  fflush(o->out);

  const clt_adam adam = {o->lr, 0.9, 0.999, 1e-7};
  int excluded_said[CLT_MAX_REPLICAS] = {0};
  for (int epoch = first_epoch; epoch < o->epochs; epoch++) {
    double t0 = now_seconds();
    clt_epoch_result r;
    if ((status = clt_trainer_epoch(t, seed, epoch, &adam, &step, &r, e))) goto cleanup;
    if (r.bad_step >= 0) {
      status = clt_fail(e, CLT_ERR_NUMERIC,
                        "epoch %d, step %d: non-finite loss or gradient; stopping without saving "
                        "(the newest checkpoint is left as it was; try a lower --lr)",
                        epoch + 1, r.bad_step + 1);
      goto cleanup;
    }
    double test_loss, test_acc;
    if ((status = clt_trainer_evaluate(t, &test_loss, &test_acc, e))) goto cleanup;
    double seconds = now_seconds() - t0;
    fprintf(o->out, "Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f\n",
            epoch + 1, r.train_loss, r.train_acc * 100, test_loss, test_acc * 100);
    fprintf(o->out, "  %.1fs, %.0f images/s training", seconds, train.count / r.seconds);
    if (nchosen > 1) fprintf(o->out, ", all-reduce %.2fs", r.allreduce_seconds);
    fprintf(o->out, "\n");
    for (int i = 0; i < nchosen && nchosen > 1; i++) {
      const clt_replica *rep = clt_trainer_replica(t, i);
      const clt_replica_stats *st = &r.replicas[i];
      fprintf(o->out, "  device %d (%s): share %.1f%%, %ld examples, %.0f images/s, busy %.0f%%\n",
              rep->device.index, rep->device.name, 100.0 * st->examples / train.count, st->examples,
              replica_rate(st, r.seconds), 100.0 * st->busy_seconds / r.seconds);
      if (clt_balancer_excluded(clt_trainer_balancer(t), i) && !excluded_said[i]) {
        excluded_said[i] = 1;
        fprintf(o->out, "  note: --split auto gives device %d no examples: it is so slow that any share "
                "would lengthen the step; it stays in the all-reduce (force it with --split weights)\n",
                rep->device.index);
      }
    }
    write_log(log, epoch + 1, &r, test_loss, test_acc, seconds, train.count, o, t);
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
  clt_devices_free(&devices);
  clt_dataset_free(&train);
  clt_dataset_free(&test);
  clt_checkpoint_free(&state);
  return status;
}

int clt_eval(const clt_eval_opts *o, clt_err *e) {
  int status = CLT_OK;
  clt_dataset test = {0};
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
  if ((status = load_data(o->data_dir, 0, o->test_limit, NULL, &test, e))) goto cleanup;
  if ((status = check_input(&model, &test, o->data_dir, e))) goto cleanup;
  if ((status = select_devices(o->devices, &devices, chosen, &nchosen, e))) goto cleanup;
  if ((status = clt_trainer_create(&model, chosen, nchosen, o->batch_per_replica, test.count,
                                   CLT_SPLIT_EQUAL, NULL, &t, e))) {
    goto cleanup;
  }
  if ((status = clt_trainer_upload(t, NULL, &test, e))) goto cleanup;
  if ((status = clt_trainer_set_state(t, state.params, NULL, NULL, e))) goto cleanup;
  double loss, acc;
  if ((status = clt_trainer_evaluate(t, &loss, &acc, e))) goto cleanup;
  fprintf(o->out, "Checkpoint %s: model %s, %lld epochs, %lld steps; %d test images on %d device%s\n",
          path, model.name, (long long)state.epoch, (long long)state.iterations, test.count, nchosen,
          nchosen == 1 ? "" : "s");
  fprintf(o->out, "Accuracy: %.2f\nLoss: %.4f\n", acc * 100, loss);

cleanup:
  clt_trainer_destroy(t);
  clt_devices_free(&devices);
  clt_dataset_free(&test);
  clt_checkpoint_free(&state);
  return status;
}
