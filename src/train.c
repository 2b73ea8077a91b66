#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "data.h"
#include "report.h"
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

/* Opens --data for training: the photo-folder options and limits apply. */
static int open_train_data(const clt_train_opts *o, clt_data *d, clt_err *e) {
  const clt_data_spec spec = {.dir = o->data_dir,
                              .with_train = 1,
                              .train_limit = o->train_limit,
                              .test_limit = o->test_limit,
                              .image_size = o->image_size,
                              .validation_split = o->validation_split,
                              .seed = o->seed,
                              .image_size_given = o->image_size_given,
                              .validation_split_given = o->validation_split_given};
  return clt_data_open(&spec, d, e);
}

/* --resume: the model, weights, optimizer state, counters and data order come
 * from the newest checkpoint; flags that contradict it are refused. */
static int resume(const clt_train_opts *o, char *path, size_t size, clt_model *model,
                  clt_checkpoint *state, clt_err *e) {
  int status = clt_checkpoint_resolve(o->checkpoint_dir, path, size, e);
  if (status) {
    clt_wrap(e, "--resume");
    return status;
  }
  if ((status = clt_checkpoint_model(path, model, e))) return status;
  if (o->model_given && strcmp(o->model, model->name) != 0) {
    return clt_fail(e, CLT_ERR_ARG, "--resume: %s holds model %s, not --model %s", path,
                    model->name, o->model);
  }
  if ((status = clt_checkpoint_load(path, model, 1, state, e))) return status;
  if (o->seed_given && o->seed != state->seed) {
    return clt_fail(e, CLT_ERR_ARG, "--resume: %s was trained with --seed %llu, not %llu", path,
                    (unsigned long long)state->seed, (unsigned long long)o->seed);
  }
  return CLT_OK;
}

/* The model: the checkpoint's with --resume (and its state, counters and data
 * order, the data reopened with its split and image size), else built for the
 * data; either way checked against the data, and the class names kept. */
static int setup_model(const clt_train_opts *o, clt_data *data, clt_model *model,
                       clt_checkpoint *state, char *ckpt_path, size_t size, clt_err *e) {
  int status = CLT_OK;
  if (o->resume) {
    if ((status = resume(o, ckpt_path, size, model, state, e))) return status;
    if ((status = clt_data_reopen(data, model->input.h, state->seed, e))) return status;
  } else {
    /* Photo folders default to the second reference workload's model. */
    const char *name = data->photos && !o->model_given ? "resnet50" : o->model;
    const clt_shape input = {data->height, data->width, data->channels};
    if ((status = clt_model_build(name, input, data->classes, model, e))) {
      if (e->code == CLT_ERR_FORMAT) clt_wrap(e, "%s", o->data_dir);
      return status;
    }
  }
  if ((status = clt_data_check_input(data, model->name, model->input.h, model->input.w,
                                     model->input.c, model->classes, e))) {
    return status;
  }
  if (o->resume && (status = clt_data_check_classes(data, state->class_names, ckpt_path, e))) {
    return status;
  }
  if (!state->class_names) status = clt_data_class_names(data, &state->class_names, e);
  return status;
}

/* A fresh run's state: weights initialised once on the host from the seed and
 * broadcast, so every replica starts identical; zero Adam moments. */
static int fresh_state(const clt_model *model, uint64_t seed, clt_checkpoint *state, clt_err *e) {
  state->params = malloc(model->flat_floats * sizeof(float));
  state->adam_m = calloc(model->flat_floats, sizeof(float));
  state->adam_v = calloc(model->flat_floats, sizeof(float));
  if (!state->params || !state->adam_m || !state->adam_v) {
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  }
  clt_model_init_params(model, seed, state->params);
  return CLT_OK;
}

/* Trains epoch rec->epoch and evaluates the test set, if any; a non-finite loss
 * or gradient stops training before anything is saved. */
static int run_epoch(clt_trainer *t, const clt_data *data, uint64_t seed, const clt_adam *adam,
                     long *step, clt_epoch_record *rec, clt_err *e) {
  const double t0 = clt_now_seconds();
  int status = clt_trainer_epoch(t, seed, rec->epoch - 1, adam, step, &rec->train, e);
  if (status) return status;
  if (rec->train.bad_step >= 0) {
    return clt_fail(e, CLT_ERR_NUMERIC,
                    "epoch %d, step %d: non-finite loss or gradient; stopping without saving "
                    "(the newest checkpoint is left as it was; try a lower --lr)",
                    rec->epoch, rec->train.bad_step + 1);
  }
  rec->test_loss = rec->test_acc = NAN;
  if (data->ntest && (status = clt_trainer_evaluate(t, &rec->test_loss, &rec->test_acc, e))) {
    return status;
  }
  rec->seconds = clt_now_seconds() - t0;
  return CLT_OK;
}

/* Saves every --checkpoint-every epochs and after the last. */
static int save(const clt_train_opts *o, clt_trainer *t, const clt_model *model, int epoch,
                long step, uint64_t seed, clt_checkpoint *state, const clt_report *rep,
                clt_err *e) {
  const int last = epoch + 1 == o->epochs;
  if (o->checkpoint_every <= 0 || ((epoch + 1) % o->checkpoint_every != 0 && !last)) return CLT_OK;
  int status = clt_trainer_get_state(t, state->params, state->adam_m, state->adam_v, e);
  if (status) return status;
  state->iterations = step;
  state->epoch = epoch + 1;
  state->seed = seed;
  char written[4096];
  status = clt_checkpoint_save(o->checkpoint_dir, o->keep, model, state, written, sizeof written,
                               e);
  if (!status) clt_report_saved(rep, written);
  return status;
}

int clt_train(const clt_train_opts *o, clt_err *e) {
  int status = CLT_OK;
  clt_data data = {0};
  clt_device_list devices = {0};
  clt_trainer *t = NULL;
  clt_checkpoint state = {0};
  clt_report rep = {.out = o->out,
                    .profile = o->profile,
                    .verbose = o->verbose,
                    .launch = clt_now_seconds() /* start-up is timed from here */};
  clt_model model;
  const clt_device *chosen[CLT_MAX_REPLICAS];
  int nchosen = 0;
  char ckpt_path[4096];

  if ((status = open_train_data(o, &data, e))) goto cleanup;
  if ((status = setup_model(o, &data, &model, &state, ckpt_path, sizeof ckpt_path, e)))
    goto cleanup;
  const uint64_t seed = o->resume ? state.seed : o->seed;
  const int first_epoch = o->resume ? (int)state.epoch : 0;
  long step = o->resume ? (long)state.iterations : 0;
  if ((status = select_devices(o->devices, &devices, chosen, &nchosen, e))) goto cleanup;
  clt_split_mode split;
  double weights[CLT_BALANCE_MAX];
  if ((status = clt_split_parse(o->split, nchosen, &split, weights, e))) goto cleanup;
  if (o->checkpoint_every > 0 && (status = clt_checkpoint_prepare_dir(o->checkpoint_dir, e)))
    goto cleanup;
  if (o->log_path && !(rep.log = fopen(o->log_path, o->resume ? "a" : "w"))) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot open log for writing: %s", o->log_path,
                      strerror(errno));
    goto cleanup;
  }

  rep.model = &model;
  rep.data = &data;
  const clt_plan plan = {.devices = chosen,
                         .ndevices = nchosen,
                         .batch_per_replica = o->batch_per_replica,
                         .split = o->split,
                         .first_epoch = first_epoch,
                         .epochs = o->epochs,
                         .resumed_from = o->resume ? ckpt_path : NULL,
                         .steps_done = step};
  clt_report_plan(&rep, &plan);
  if (first_epoch >= o->epochs) {
    clt_report_nothing_to_do(&rep, first_epoch, o->epochs);
    goto cleanup;
  }

  const double t_setup = clt_now_seconds();
  if ((status = clt_trainer_create(&model, chosen, nchosen, o->batch_per_replica, split, weights,
                                   data.train, data.test, &t, e))) {
    goto cleanup;
  }
  clt_trainer_check_replicas(t, o->check_replicas);
  if (o->progress) clt_trainer_progress(t, o->out);
  if (!o->resume && (status = fresh_state(&model, seed, &state, e))) goto cleanup;
  if ((status = clt_trainer_set_state(t, state.params, state.adam_m, state.adam_v, e)))
    goto cleanup;
  const double t_ready = clt_now_seconds();
  rep.trainer = t;
  clt_report_ready(&rep, t_ready - t_setup, t_ready - rep.launch);

  clt_adam adam = CLT_ADAM_DEFAULTS;
  adam.lr = o->lr;
  for (int epoch = first_epoch; epoch < o->epochs; epoch++) {
    clt_epoch_record rec = {.epoch = epoch + 1, .first = epoch == first_epoch};
    if ((status = run_epoch(t, &data, seed, &adam, &step, &rec, e))) goto cleanup;
    clt_report_epoch(&rep, &rec);
    if ((status = save(o, t, &model, epoch, step, seed, &state, &rep, e))) goto cleanup;
  }

cleanup:
  if (rep.log && fclose(rep.log) != 0 && status == CLT_OK) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot write log: %s", o->log_path, strerror(errno));
  }
  clt_trainer_destroy(t);
  clt_data_close(&data);
  clt_devices_free(&devices);
  clt_checkpoint_free(&state);
  return status;
}

int clt_eval(const clt_eval_opts *o, clt_err *e) {
  int status = CLT_OK;
  clt_data data = {0};
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
  const clt_data_spec spec = {.dir = o->data_dir,
                              .test_limit = o->test_limit,
                              .image_size = model.input.h,
                              .validation_split = o->validation_split,
                              .seed = o->seed,
                              .validation_split_given = o->validation_split_given};
  if ((status = clt_data_open(&spec, &data, e))) goto cleanup;
  if ((status = clt_data_check_input(&data, model.name, model.input.h, model.input.w, model.input.c,
                                     model.classes, e))) {
    goto cleanup;
  }
  if ((status = clt_data_check_classes(&data, state.class_names, path, e))) goto cleanup;
  if ((status = select_devices(o->devices, &devices, chosen, &nchosen, e))) goto cleanup;
  if ((status = clt_trainer_create_eval(&model, chosen, nchosen, o->batch_per_replica, data.test,
                                        &t, e))) {
    goto cleanup;
  }
  if (o->verbose) clt_report_build_logs(t);
  if ((status = clt_trainer_set_state(t, state.params, NULL, NULL, e))) goto cleanup;
  double loss, acc;
  if ((status = clt_trainer_evaluate(t, &loss, &acc, e))) goto cleanup;
  clt_report_eval(o->out, path, &model, (long long)state.epoch, (long long)state.iterations,
                  data.ntest, nchosen, acc, loss);

cleanup:
  clt_trainer_destroy(t);
  clt_data_close(&data);
  clt_devices_free(&devices);
  clt_checkpoint_free(&state);
  return status;
}
