/* `cltrain eval`: a checkpoint scored on the selected devices. */
#define _POSIX_C_SOURCE 200809L
#include "train_impl.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "cli.h"
#include "data.h"
#include "files.h"
#include "interrupt.h"
#include "keras.h"
#include "npz.h"
#include "report.h"
#include "timing.h"
#include "trainer.h"
#include "weights.h"

/* The test data: the training run's as the checkpoint records it (state->data;
 * the model fixes the image size), each flag given overriding its record. A
 * checkpoint without records (an older cltrain) takes the flags and their
 * defaults, with a note; its seed is known all the same. Of the training's
 * augmentation only its crops act outside training (resizing the photos decoded
 * at the recorded size to the model's input). */
static clt_data_spec eval_data(const clt_eval_opts *o, const char *path, const clt_model *model,
                               const clt_checkpoint *state) {
  const clt_checkpoint_data *rec = &state->data;
  const int recorded = rec->known;
  clt_augment crops = {0};
  clt_err ignored;
  if (recorded && rec->augment[0] && clt_augment_parse(rec->augment, &crops, &ignored) == CLT_OK)
    clt_augment_only_crops(&crops);
  if (!recorded && clt_cluster_rank(o->cluster) == 0 &&
      !(o->data_given && o->test_limit_given && o->validation_split_given))
    fprintf(stderr,
            "cltrain: note: %s does not record its run's data flags (an older cltrain): --data, "
            "--test-limit and --validation-split are as given or their defaults\n",
            path);
  return (clt_data_spec){
      .dir = o->data_given || !recorded ? o->data_dir : rec->path,
      .test_limit = o->test_limit_given || !recorded ? o->test_limit : rec->test_limit,
      .image_size = crops.n && rec->image_size ? rec->image_size : model->input.h,
      .validation_split = o->validation_split_given || !recorded ? o->validation_split
                                                                 : rec->validation_split,
      .seed = o->seed_given ? o->seed : state->seed,
      .validation_split_given = o->validation_split_given,
      .max_image_pixels = o->max_image_pixels,
      .augment = crops};
}

/* cltrain eval's set-up in each process: the checkpoint, data and devices. */
static int eval_set_up(const clt_eval_opts *o, clt_data *data, clt_model *model,
                       clt_checkpoint *state, char *path, size_t size, clt_device_list *devices,
                       const clt_device **chosen, int *nchosen, clt_err *e) {
  int status = clt_cli_checkpoint(o->checkpoint, o->checkpoint_given, o->best,
                                  clt_cluster_rank(o->cluster), path, size, e);
  if (!status) status = clt_checkpoint_model(path, model, e);
  if (!status) status = clt_checkpoint_load(path, model, 0, state, e);
  if (status) return status;
  const clt_data_spec spec = eval_data(o, path, model, state);
  if ((status = clt_data_open(&spec, data, e))) return status;
  if ((status = clt_data_check_input(data, model->name, model->input.h, model->input.w,
                                     model->input.c, model->classes, e))) {
    return status;
  }
  if ((status = clt_data_check_classes(data, state->class_names, path, e))) return status;
  return clt_select_process_devices(o->devices, o->cluster, devices, chosen, nchosen, e);
}

/* --logits FILE.npy's list of rows: FILE.paths.txt (".npy" replaced, else appended). */
static void paths_name(const char *logits_path, char *out, size_t size) {
  const size_t n = strlen(logits_path);
  const int npy = n > 4 && strcmp(logits_path + n - 4, ".npy") == 0;
  snprintf(out, size, "%.*s.paths.txt", (int)(npy ? n - 4 : n), logits_path);
}

/* The text of --logits' list, one line per logits row: the image's path relative
 * to --data for a photo folder, the example's index in its IDX files for IDX
 * data (the t10k ones, or the training ones for a validation split). A file name holding a line
 * break cannot be listed so and is refused. */
static int paths_text(const clt_data *data, const char *list, char **text, size_t *len,
                      clt_err *e) {
  size_t size = 0;
  for (int i = 0; i < data->ntest; i++) {
    const char *p = clt_source_path(data->test, i);
    if (p && strpbrk(p, "\n\r")) {
      char shown[512];
      clt_npz_printable(shown, sizeof shown, p);
      return clt_fail(e, CLT_ERR_ARG,
                      "%s: %s: a file name with a line break cannot be listed in %s",
                      data->spec.dir, shown, list);
    }
    size += (p ? strlen(p) : 11) + 1;
  }
  char *t = malloc(size + 1);
  if (!t) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for %s", list);
  size_t at = 0;
  for (int i = 0; i < data->ntest; i++) {
    const char *p = clt_source_path(data->test, i);
    at += p ? (size_t)snprintf(t + at, size + 1 - at, "%s\n", p)
            : (size_t)snprintf(t + at, size + 1 - at, "%d\n", data->test_first + i);
  }
  *text = t;
  *len = at;
  return CLT_OK;
}

/* Under MPI each process evaluates its replicas' slices of the test set and
 * process 0 prints the figures (and writes --logits). */
int clt_eval(const clt_eval_opts *o, clt_err *e) {
  int status = CLT_OK;
  clt_cluster *c = o->cluster;
  const int leader = clt_cluster_rank(c) == 0;
  clt_data data = {0};
  clt_device_list devices = {0};
  clt_trainer *t = NULL;
  clt_checkpoint state = {0};
  static clt_model model; /* large: not on the stack */
  const clt_device *chosen[CLT_MAX_REPLICAS];
  int nchosen = 0;
  char path[4096] = "", tmp[4200] = "", list[4200] = "";
  float *logits = NULL;
  char *paths = NULL;
  size_t paths_len = 0;

  /* --logits goes to a temp file renamed into place at the end; made first, so an
   * unwritable path fails before the evaluation rather than after it. */
  if (o->logits_path && leader) {
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", o->logits_path, (long)getpid());
    FILE *f = NULL;
    if ((status = clt_check_replaceable(o->logits_path, "--logits", e))) {
      tmp[0] = '\0';
    } else if (!(f = fopen(tmp, "wb"))) {
      status = clt_fail(e, CLT_ERR_IO, "--logits %s: cannot create: %s", o->logits_path,
                        strerror(errno));
      tmp[0] = '\0';
    } else {
      fclose(f);
      paths_name(o->logits_path, list, sizeof list);
      status = clt_check_output_file(list, "--logits' list of rows", e);
    }
  }
  int replicas = 0;
  if (!status)
    status = eval_set_up(o, &data, &model, &state, path, sizeof path, &devices, chosen, &nchosen,
                         e);
  if (!status && o->logits_path && leader) status = paths_text(&data, list, &paths, &paths_len, e);
  if ((status = clt_cluster_agree(c, status, e))) goto cleanup;
  run_config config = train_config_of(&model, &data, o->batch_per_replica, o->seed, nchosen);
  if ((status = train_same_config(c, &config, &replicas, e))) goto cleanup;
  /* The batches of the training run's evaluation: the same sums, to the last bit. */
  int same_batch;
  const int batch = train_batch_per_replica(o->batch_per_replica, o->batch_per_replica_given,
                                            state.data.global_batch, replicas, &same_batch);
  if ((status = clt_trainer_create_eval(&model, chosen, nchosen, batch, data.test, c, &t, e))) {
    goto cleanup;
  }
  if (o->verbose) clt_report_build_logs(t);
  const size_t bytes = model.flat_floats * sizeof(float);
  if ((status = clt_cluster_bcast(c, state.params, bytes, e))) goto cleanup;
  status = clt_trainer_set_state(t, state.params, NULL, NULL, e);
  if (!status && o->logits_path) {
    /* Every process gathers the logits (the sum over processes needs the space). */
    logits = malloc(((size_t)data.ntest * model.classes + 1) * sizeof *logits);
    if (!logits) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory for --logits");
    else clt_trainer_capture_logits(t, logits);
  }
  if ((status = clt_cluster_agree(c, status, e))) goto cleanup;
  double loss, acc;
  if ((status = clt_trainer_evaluate(t, &loss, &acc, e))) goto cleanup;
  if (o->logits_path && leader) {
    const clt_npz_array a = {.name = "logits",
                             .dtype = "<f4",
                             .rank = 2,
                             .dims = {data.ntest, model.classes},
                             .data = logits,
                             .bytes = (size_t)data.ntest * model.classes * sizeof *logits};
    if ((status = clt_npy_write(tmp, &a, e))) goto cleanup;
    /* The list first: once the logits are in place, their list is too. */
    if ((status = clt_write_atomic(list, paths, paths_len, e))) goto cleanup;
    if (rename(tmp, o->logits_path) != 0) {
      status = clt_fail(e, CLT_ERR_IO, "--logits %s: cannot rename into place: %s", o->logits_path,
                        strerror(errno));
      goto cleanup;
    }
    tmp[0] = '\0';
  }
  if (leader) {
    clt_report_eval(o->out, path, &model, (long long)state.epoch, (long long)state.iterations,
                    data.ntest, replicas, clt_cluster_size(c), acc, loss);
  }
  status = clt_cluster_agree(c, status, e);

cleanup:
  if (tmp[0]) unlink(tmp);
  free(logits);
  free(paths);
  clt_trainer_destroy(t);
  clt_data_close(&data);
  clt_devices_free(&devices);
  clt_checkpoint_free(&state);
  return status;
}
