/* `cltrain train`: the epochs around the trainer, saves and stops. */
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
#include "data.h"
#include "files.h"
#include "interrupt.h"
#include "keras.h"
#include "npz.h"
#include "report.h"
#include "text.h"
#include "timing.h"
#include "trainer.h"
#include "weights.h"

/* Trains epoch rec->epoch and evaluates the test set, if any; a non-finite loss
 * or gradient stops training before anything is saved. */
static int run_epoch(clt_trainer *t, const clt_data *data, uint64_t seed, const clt_optimizer *opt,
                     long *step, clt_epoch_record *rec, int keep_batch, clt_cluster *c,
                     clt_err *e) {
  const double t0 = clt_now_seconds();
  int status = clt_trainer_epoch(t, seed, rec->epoch - 1, opt, step, &rec->train, e);
  /* The tuning after the epoch probes with a training batch. */
  if (!status && keep_batch) status = clt_trainer_keep_probe_batch(t, e);
  if (status) return status;
  rec->test_loss = rec->test_acc = NAN;
  if (rec->train.bad_step >= 0) {
    clt_cluster_known(c); /* the summed loss and reduced gradient: the same in every process */
    return clt_fail(e, CLT_ERR_NUMERIC,
                    "epoch %d, step %d: non-finite loss or gradient; stopping without saving "
                    "(the newest checkpoint is left as it was; try a lower --lr)",
                    rec->epoch, rec->train.bad_step + 1);
  }
  if (rec->train.steps_done < rec->train.steps) return CLT_OK; /* stopped by a signal */
  if (data->ntest && (status = clt_trainer_evaluate(t, &rec->test_loss, &rec->test_acc, e))) {
    return status;
  }
  rec->seconds = clt_now_seconds() - t0;
  return CLT_OK;
}

/* Saves the trainer's state after `step` optimizer steps: epochs_done whole
 * epochs and, when the run was stopped mid-epoch, rec's first steps of the next
 * (their per-step sums too, so the resumed epoch reports the whole epoch). */
/* --tune, or $CLTRAIN_TUNE where the flag is not given: *tune 1 for auto. */
static int tune_mode(const clt_train_opts *o, int *tune, clt_err *e) {
  const char *env = getenv("CLTRAIN_TUNE");
  const int from_env = !o->tune_given && env && *env;
  const char *mode = from_env ? env : o->tune ? o->tune : "auto";
  if (strcmp(mode, "auto") != 0 && strcmp(mode, "off") != 0)
    return clt_fail(e, CLT_ERR_ARG, "%s%s: expected auto or off",
                    from_env ? "CLTRAIN_TUNE=" : "--tune ", mode);
  *tune = strcmp(mode, "auto") == 0;
  return CLT_OK;
}

/* --verbose: each replica's algorithm per convolution pass, then its GEMM
 * tilings other than the defaults. */
static int report_conv_algorithms(const clt_trainer *t, FILE *out, clt_err *e) {
  char *record = clt_trainer_conv_record(t);
  char *tilings = clt_trainer_tiling_record(t);
  if (!record || !tilings) {
    free(record);
    free(tilings);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  }
  const char *line;
  size_t len;
  for (const char *p = record; clt_text_line(&p, &line, &len);) {
    int replica = 0;
    char layer[64], a[3][16];
    if (sscanf(line, "%d %63s %15s %15s %15s", &replica, layer, a[0], a[1], a[2]) == 5)
      fprintf(out, "Replica %d: %s: forward %s, weight gradient %s, input gradient %s\n", replica,
              layer, a[0], a[1], a[2]);
  }
  for (const char *p = tilings; clt_text_line(&p, &line, &len);) {
    const int n = (int)len;
    const char *shape = strchr(line, ' ');
    if (shape && shape < line + n)
      fprintf(out, "Replica %.*s: GEMM %.*s\n", (int)(shape - line), line,
              n - (int)(shape + 1 - line), shape + 1);
  }
  free(record);
  free(tilings);
  return CLT_OK;
}

/* The run's choices now (every process's) into state, which saves record them. */
static int record_choices(clt_trainer *t, clt_checkpoint *state, clt_err *e) {
  clt_trainer_choices now;
  const int status = clt_trainer_choices_gather(t, &now, e);
  if (status) return status;
  free(state->conv_algorithms);
  free(state->gemm_tilings);
  free(state->replicas);
  state->conv_algorithms = now.conv;
  state->gemm_tilings = now.tilings;
  state->replicas = now.replicas;
  return CLT_OK;
}

static int save_now(const clt_train_opts *o, clt_trainer *t, const clt_model *model,
                    int epochs_done, const clt_epoch_record *rec, long step, uint64_t seed,
                    clt_checkpoint *state, const clt_report *rep, char *written, size_t size,
                    clt_err *e) {
  int status = clt_trainer_get_state(t, state->params, state->opt_state[0], state->opt_state[1], e);
  if (status) return status;
  state->iterations = step;
  state->epoch = epochs_done;
  state->seed = seed;
  state->epoch_step = 0;
  const int partial = rec && rec->train.steps_done < rec->train.steps;
  if (partial) {
    const size_t doubles = (size_t)2 * rec->train.steps_done;
    free(state->epoch_sums);
    if (!(state->epoch_sums = malloc(doubles * sizeof(double))))
      return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
    memcpy(state->epoch_sums, clt_trainer_step_sums(t), doubles * sizeof(double));
    state->epoch_step = rec->train.steps_done;
  }
  status = clt_checkpoint_save(o->checkpoint_dir, o->keep, model, state, written, size, e);
  if (!status) clt_report_saved(rep, written);
  return status;
}

/* Saves every --checkpoint-every epochs and after the last (the run's last, or
 * the epoch early stopping stopped at), and the best epoch so far of early
 * stopping whatever the period; written gets the file ("" when not saved). */
static int save(const clt_train_opts *o, clt_trainer *t, const clt_model *model, int epoch,
                int last, int best, long step, uint64_t seed, clt_checkpoint *state,
                const clt_report *rep, char *written, size_t size, clt_err *e) {
  written[0] = '\0';
  const int every = o->checkpoint_every;
  if (!best && (every <= 0 || ((epoch + 1) % every != 0 && !last))) return CLT_OK;
  state->best = best;
  const int status = save_now(o, t, model, epoch + 1, NULL, step, seed, state, rep, written, size,
                              e);
  state->best = 0;
  return status;
}

/* The quantity early stopping monitors in epoch rec: accuracy as a fraction, as
 * Keras logs it. */
static double monitored(const clt_early_stop *es, const clt_epoch_record *rec) {
  switch (es->monitor) {
    case CLT_MONITOR_VAL_LOSS:
      return rec->test_loss;
    case CLT_MONITOR_VAL_ACCURACY:
      return rec->test_acc;
    case CLT_MONITOR_LOSS:
      return rec->train.train_loss;
    default:
      return rec->train.train_acc;
  }
}

/* Process 0 after the run's last epoch (stopped early or not): one line saying
 * why it stopped and which checkpoint is the best; with restore_best_weights the
 * best record then says that the run's model is the best's (eval, export and
 * predict take it), as Keras restores them into the model at the end of fit. */
static int early_stop_end(const clt_train_opts *o, const clt_early_stop *es, long last_saved,
                          FILE *out, clt_err *e) {
  const char *name = clt_monitor_name(es->monitor);
  char best_path[4200] = "", base[64] = "";
  clt_checkpoint_best b;
  int found = 0;
  int status = clt_checkpoint_best_read(o->checkpoint_dir, &b, &found, e);
  if (status) return status;
  if (found) snprintf(best_path, sizeof best_path, "%s/ckpt-%ld.npz", o->checkpoint_dir, b.k);
  if (!es->has_best) {
    fprintf(out, "Early stopping: no epoch was monitored (start_from_epoch=%d): no best\n",
            es->start_from_epoch);
    return CLT_OK;
  }
  if (es->stopped_epoch) {
    if (es->has_baseline) snprintf(base, sizeof base, ", baseline %g", es->baseline);
    fprintf(out,
            "Early stopping at epoch %d: %s did not improve (min_delta %g%s) for %d epoch%s; best "
            "%.4f at epoch %d",
            es->stopped_epoch + 1, name, fabs(es->min_delta), base, es->wait,
            es->wait == 1 ? "" : "s", es->best, es->best_epoch + 1);
  } else {
    fprintf(out, "Best epoch %d: %s %.4f", es->best_epoch + 1, name, es->best);
  }
  if (es->restore_best_weights) fprintf(out, "; restored its weights");
  fprintf(out, "%s%s%s\n", found ? ": " : "", best_path,
          found && !es->restore_best_weights ? " (--best)" : "");
  fflush(out);
  if (!es->restore_best_weights || !found || !last_saved || last_saved == b.k) return CLT_OK;
  return clt_checkpoint_best_restored(o->checkpoint_dir, last_saved, e);
}

/* What asked the run to stop, for its message: a signal, or a program's
 * cltrain_request_stop. */
static const char *stop_cause(void) {
  const int sig = clt_interrupt_signal();
  return sig == SIGTERM ? "SIGTERM" : sig == CLT_STOP_REQUESTED ? "a stop request" : "SIGINT";
}

/* Whether a signal asked the run to stop (in any process: every one answers the same). */
static int stop_asked(clt_cluster *c, clt_err *e, int *status) {
  int asked = clt_interrupt_signal() != 0;
  *status = clt_cluster_any(c, &asked, e);
  return !*status && asked;
}

/* Process 0 after a signal: saves where the run stands (mid-epoch: `rec`, the
 * epoch stopped early; at an epoch's end: NULL, and `saved` names the file if
 * that epoch's save just wrote it) and returns CLT_ERR_STOPPED with the message
 * main prints. */
static int stop_run(const clt_train_opts *o, clt_trainer *t, const clt_model *model,
                    int epochs_done, const clt_epoch_record *rec, const char *saved, long step,
                    uint64_t seed, clt_checkpoint *state, const clt_report *rep, clt_err *e) {
  const char *name = stop_cause();
  char where[96];
  if (rec && rec->train.steps_done < rec->train.steps)
    snprintf(where, sizeof where, "epoch %d, step %d of %d", epochs_done + 1, rec->train.steps_done,
             rec->train.steps);
  else snprintf(where, sizeof where, "the end of epoch %d", epochs_done);
  char written[4096];
  snprintf(written, sizeof written, "%s", saved);
  if (o->checkpoint_every <= 0) {
    return clt_fail(e, CLT_ERR_STOPPED, "stopped by %s at %s; nothing saved (--checkpoint-every 0)",
                    name, where);
  }
  if (!written[0]) {
    int status = save_now(o, t, model, epochs_done, rec, step, seed, state, rep, written,
                          sizeof written, e);
    if (status) return status;
  }
  return clt_fail(e, CLT_ERR_STOPPED,
                  "stopped by %s at %s; saved %s: continue with `cltrain train --resume` (and "
                  "the same --checkpoint-dir)",
                  name, where, written);
}

/* The schedule's and the plateau's arguments, which every process must share. */
static void lr_control_text(const clt_optimizer *opt, const clt_plateau *plateau, char *buf,
                            size_t size) {
  char schedule[1024] = "", args[512] = "";
  if (opt->schedule.kind != CLT_SCHED_NONE)
    clt_schedule_format(&opt->schedule, schedule, sizeof schedule);
  if (plateau->active) clt_plateau_format(plateau, args, sizeof args);
  snprintf(buf, size, "%s|%s", schedule, args);
}

/* Process 0's starting state to every process, so all replicas start identical
 * whatever each host's floating-point library. */
static int share_state(clt_cluster *c, const clt_model *model, clt_checkpoint *state, clt_err *e) {
  const size_t bytes = model->flat_floats * sizeof(float);
  int status = clt_cluster_bcast(c, state->params, bytes, e);
  for (int k = 0; k < CLT_OPT_SLOTS && !status; k++) {
    status = clt_cluster_bcast(c, state->opt_state[k], bytes, e);
  }
  return status;
}

/* Under MPI every process runs this; process 0 alone prints, logs and saves.
 * Set-up failures are agreed on (every process stops, naming the failing rank);
 * a failure inside an epoch returns to the caller, which ends the run
 * (clt_cluster_leave) since the others may be waiting in a collective. */
int clt_train(const clt_train_opts *o, clt_err *e) {
  int status = CLT_OK;
  clt_cluster *c = o->cluster;
  const int leader = clt_cluster_rank(c) == 0;
  clt_data data = {0};
  clt_device_list devices = {0};
  clt_trainer *t = NULL;
  clt_checkpoint state = {0};
  clt_report rep = {.out = o->out,
                    .profile = o->profile,
                    .verbose = o->verbose,
                    .launch = clt_now_seconds() /* start-up is timed from here */};
  static clt_model model; /* large: not on the stack */
  const clt_device *chosen[CLT_MAX_REPLICAS];
  int nchosen = 0, replicas = 0;
  char ckpt_path[4096];
  char *replica_lines = NULL;
  clt_optimizer opt = {0};
  clt_trace *trace = NULL;
  int lock_fd = -1; /* the checkpoint folder's lock (process 0) */
  clt_notice *notice = NULL;

  /* Process 0's checkpoint, sent to every process: only its folder needs it. */
  train_resume_file resume = {0};
  if (o->resume && (status = train_fetch_checkpoint(o, &resume, e))) goto cleanup;
  status = train_set_up(o, &resume, &data, &model, &state, ckpt_path, sizeof ckpt_path, &opt,
                        &devices, chosen, &nchosen, &rep, &trace, &lock_fd, e);
  train_resume_file_free(&resume); /* loaded */
  if ((status = clt_cluster_agree(c, status, e))) goto cleanup;
  int tune = 0;
  if ((status = tune_mode(o, &tune, e))) goto cleanup;
  const uint64_t seed = o->resume ? state.seed : o->seed;
  const int first_epoch = o->resume ? (int)state.epoch : 0;
  long step = o->resume ? (long)state.iterations : 0;
  run_config config = train_config_of(&model, &data, o->batch_per_replica, seed, nchosen);
  config.global_batch = o->global_batch_given ? o->global_batch : 0;
  /* With --resume a flag given overrides the checkpoint's batch, one left out does not. */
  config.batch_given = o->resume && o->batch_per_replica_given;
  config.epochs = o->epochs;
  config.first_epoch = first_epoch;
  config.step = step;
  config.optimizer = (int)opt.kind;
  config.nesterov = opt.nesterov;
  config.lr = opt.lr;
  config.momentum = opt.momentum;
  config.weight_decay = opt.weight_decay;
  snprintf(config.split, sizeof config.split, "%s", o->split);
  clt_wire wire = CLT_WIRE_FP32;
  clt_err checked; /* by train_set_up */
  if (clt_wire_parse(o->wire, "--wire", &wire, &checked)) wire = CLT_WIRE_FP32;
  config.wire = (int)wire;
  lr_control_text(&opt, &state.plateau, config.lr_control, sizeof config.lr_control);
  if (state.early_stop.enabled)
    clt_early_stop_describe(&state.early_stop, config.early_stop, sizeof config.early_stop);
  if ((status = train_same_config(c, &config, &replicas, e))) goto cleanup;
  /* The global batch: the flags', or with --resume the checkpoint's whatever
   * the replicas (0 recorded for a fresh run, or a checkpoint without records). */
  const int recorded = o->resume ? state.data.global_batch : 0;
  int global = 0;
  status = train_global_batch(o, recorded, replicas, &global, e);
  if (status) {
    clt_cluster_known(c); /* the same flags and count everywhere */
    goto cleanup;
  }
  if (leader && recorded > 0 && global != recorded && o->global_batch_given) {
    fprintf(stderr,
            "cltrain: note: --global-batch %d differs from the checkpoint's %d; the run "
            "continues but is no longer exact\n",
            global, recorded);
  } else if (leader && recorded > 0 && global != recorded) {
    fprintf(stderr,
            "cltrain: note: --batch-per-replica %d on %d replica%s makes a global batch of %d, "
            "not the checkpoint's %d; the run continues but is no longer exact\n",
            o->batch_per_replica, replicas, replicas == 1 ? "" : "s", global, recorded);
  }
  state.data.global_batch = global;
  clt_split_mode split;
  double weights[CLT_BALANCE_MAX];
  status = clt_split_parse(o->split, replicas, &split, weights, e);
  if (status) clt_cluster_known(c); /* the same flag and count everywhere */
  if (!status) status = train_replica_lines(c, chosen, nchosen, &replica_lines, e);
  if (status) goto cleanup;

  rep.model = &model;
  rep.data = &data;
  rep.rate_varies = opt.schedule.kind != CLT_SCHED_NONE || state.plateau.active;
  rep.plateau = &state.plateau;
  const clt_run_plan plan = {.replica_lines = replica_lines,
                             .replicas = replicas,
                             .processes = clt_cluster_size(c),
                             .global_batch = global,
                             .split = o->split,
                             .first_epoch = first_epoch,
                             .epochs = o->epochs,
                             .resumed_from = o->resume ? ckpt_path : NULL,
                             .steps_done = step,
                             .optimizer = &opt,
                             .plateau = &state.plateau};
  clt_early_stop *es = &state.early_stop;
  if (es->enabled && es->stopped_epoch) {
    if (leader)
      fprintf(rep.out,
              "%s: training stopped early at epoch %d (--early-stopping); nothing to do (a new "
              "run can start from its weights: --weights FILE)\n",
              ckpt_path, es->stopped_epoch + 1);
    goto cleanup;
  }
  if (first_epoch >= o->epochs) {
    if (leader) clt_report_nothing_to_do(&rep, ckpt_path, first_epoch, o->epochs);
    goto cleanup;
  }
  if (leader) clt_report_plan(&rep, &plan);
  if (leader && es->enabled) {
    char args[512];
    clt_early_stop_describe(es, args, sizeof args);
    fprintf(rep.out, "Early stopping: %s", args);
    if (es->has_best)
      fprintf(rep.out, "; best so far %.4f at epoch %d, %d epoch%s since", es->best,
              es->best_epoch + 1, es->wait, es->wait == 1 ? "" : "s");
    fprintf(rep.out, "\n");
  }

  const double t_setup = clt_now_seconds();
  clt_ring_set_default_timeout(o->allreduce_timeout);
  clt_cluster_set_timeout(c, o->allreduce_timeout);
  /* A first run on a device (an empty driver cache) compiles for seconds
   * before the first step: say so on a terminal's standard error if it takes
   * over a second (scripts and logs keep their output). */
  if (leader && isatty(STDERR_FILENO) &&
      (status = train_compiling_notice(chosen, nchosen, &notice, e)))
    goto cleanup;
  if ((status = clt_trainer_create(&model, chosen, nchosen, global, split, weights, data.train,
                                   data.test, c, &t, e))) {
    goto cleanup;
  }
  clt_trainer_check_replicas(t, o->check_replicas);
  status = clt_trainer_set_wire(t, wire, e);
  clt_trainer_first_step_notice(t, notice);
  if (o->progress && leader) clt_trainer_progress(t, o->out);
  if (!status && !o->resume) status = train_fresh_state(&model, seed, &state, e);
  if (!status && o->weights) status = clt_weights_load(&model, o->weights, state.params, e);
  if ((status = clt_cluster_agree(c, status, e))) goto cleanup;
  if ((status = share_state(c, &model, &state, e))) goto cleanup;
  status = clt_trainer_set_state(t, state.params, state.opt_state[0], state.opt_state[1], e);
  if (!status && trace) status = clt_trainer_trace(t, trace, o->trace_steps, step, e);
  /* The convolutions' algorithms: the tuning results cached for each device (no
   * timing before the first step), then a resumed checkpoint's record. */
  clt_trainer_tuning tuning = {.tune = tune,
                               .file = o->tune_file,
                               .recorded = o->resume ? state.conv_algorithms : NULL,
                               .tilings = o->resume ? state.gemm_tilings : NULL,
                               .replicas = o->resume ? state.replicas : NULL,
                               .verbose = o->verbose || o->profile ? stderr : NULL,
                               .notes = stderr};
  if (!status && leader && o->resume && !tuning.replicas)
    fprintf(stderr,
            "cltrain: note: %s records no GEMM tilings%s (an older cltrain's checkpoint): the "
            "replicas' are %s; the run may differ from the one that saved it at rounding level\n",
            ckpt_path, tuning.recorded ? "" : " or convolution algorithms",
            tune ? "the tuning cache's (else the defaults)" : "the defaults");
  const int restoring = tuning.recorded || tuning.replicas;
  if (!status && (tune || restoring)) status = clt_trainer_tune(t, &tuning, 0, NULL, NULL, e);
  if (!status && (o->verbose || o->profile)) status = report_conv_algorithms(t, stderr, e);
  if ((status = clt_cluster_agree(c, status, e))) goto cleanup;
  /* What every process's replicas run, for the log and the checkpoints. */
  if ((status = record_choices(t, &state, e))) goto cleanup;
  /* The record is applied: later tuning starts from what runs. */
  tuning.recorded = tuning.tilings = tuning.replicas = NULL;
  /* Timed between epochs, within the budget each time; a resumed run keeps its
   * record. */
  const double tune_budget = tune && !restoring ? o->tune_budget : 0;
  const double t_ready = clt_now_seconds();
  rep.trainer = t;
  if (leader) clt_report_ready(&rep, t_ready - t_setup, t_ready - rep.launch);

  /* A signal during set-up (a long first compile): nothing trained, nothing to save. */
  if (stop_asked(c, e, &status) || status) {
    if (!status)
      status = clt_fail(e, CLT_ERR_STOPPED, "stopped by %s before the first step; nothing changed",
                        stop_cause());
    goto cleanup;
  }
  /* A checkpoint saved mid-epoch (by a signal) continues that epoch where it stopped. */
  if (o->resume && state.epoch_step > 0)
    clt_trainer_resume_epoch(t, (int)state.epoch_step, state.epoch_sums);

  long last_saved = 0; /* this run's newest checkpoint: ckpt-K */
  int stop = 0;
  for (int epoch = first_epoch; epoch < o->epochs && !stop; epoch++) {
    clt_epoch_record rec = {.epoch = epoch + 1, .first = epoch == first_epoch};
    const long epoch_first_step = step;
    const int keep = tune_budget > 0 && epoch + 1 < o->epochs;
    if ((status = run_epoch(t, &data, seed, &opt, &step, &rec, keep, c, e))) goto cleanup;
    char written[4096] = "";
    if (rec.train.steps_done < rec.train.steps) {
      /* Stopped mid-epoch by a signal, in every process at the same step. */
      status = leader ? stop_run(o, t, &model, epoch, &rec, "", step, seed, &state, &rep, e)
                      : clt_fail(e, CLT_ERR_STOPPED, "stopped by a signal");
      clt_cluster_agree(c, status, e);
      goto cleanup;
    }
    /* What the epoch ran, for the log; then, before the save (which records
     * what runs next), what is not cached is tuned within the budget left. */
    rec.conv_algorithms = strdup(state.conv_algorithms ? state.conv_algorithms : "");
    rec.gemm_tilings = strdup(state.gemm_tilings ? state.gemm_tilings : "");
    if (!rec.conv_algorithms || !rec.gemm_tilings)
      status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
    if (!status && tune_budget > 0 && epoch + 1 < o->epochs) {
      /* What does not fit goes on after the next epoch, where it stopped. */
      status = clt_trainer_tune(t, &tuning, tune_budget, NULL, NULL, e);
      if (!status && (o->verbose || o->profile)) status = report_conv_algorithms(t, stderr, e);
    }
    /* Every process, every epoch (tuning may have run in some alone). */
    if (!(status = clt_cluster_agree(c, status, e))) status = record_choices(t, &state, e);
    if (status) {
      free(rec.conv_algorithms);
      free(rec.gemm_tilings);
      goto cleanup;
    }
    /* After the epoch, before its save: ReduceLROnPlateau (in every process, on
     * the same figures). */
    rec.learning_rate = clt_optimizer_rate(&opt, step);
    if (state.plateau.active) {
      const double figures[CLT_Q_COUNT] = {rec.train.train_loss, rec.train.train_acc, rec.test_loss,
                                           rec.test_acc};
      if (clt_plateau_epoch_end(&state.plateau,
                                clt_cb_monitor_pick(&state.plateau.monitor, figures), &opt.lr))
        rec.reduced_to = opt.lr;
      state.optimizer.lr = opt.lr;
    }
    /* Every process decides alike: the figures are the same in each. */
    int best = 0;
    if (es->enabled) stop = clt_early_stop_update(es, epoch, monitored(es, &rec), &best);
    if (leader) {
      /* A log or event file that cannot be written stops the run, but only after
       * this epoch's checkpoint is saved: its work is kept. */
      clt_err out_err = {0};
      int out_status = clt_report_epoch(&rep, &rec, &out_err);
      if (!out_status) out_status = clt_report_tensorboard(&rep, &rec, epoch_first_step, &out_err);
      const int last = epoch + 1 == o->epochs || stop;
      status = save(o, t, &model, epoch, last, best, step, seed, &state, &rep, written,
                    sizeof written, e);
      if (!status && written[0]) last_saved = (long)state.save_counter;
      if (!status && out_status) {
        *e = out_err;
        status = out_status;
      }
    }
    free(rec.conv_algorithms);
    free(rec.gemm_tilings);
    rec.conv_algorithms = rec.gemm_tilings = NULL;
    /* Process 0's save (a full disk...) stops every process. */
    if ((status = clt_cluster_agree(c, status, e))) goto cleanup;
    /* A signal during the evaluation or the save: stop at this epoch's end. */
    if (epoch + 1 < o->epochs && !stop && (stop_asked(c, e, &status) || status)) {
      if (!status)
        status = leader
                     ? stop_run(o, t, &model, epoch + 1, NULL, written, step, seed, &state, &rep, e)
                     : clt_fail(e, CLT_ERR_STOPPED, "stopped by a signal");
      clt_cluster_agree(c, status, e);
      goto cleanup;
    }
  }

  if (es->enabled) {
    status = leader ? early_stop_end(o, es, last_saved, rep.out, e) : CLT_OK;
    status = clt_cluster_agree(c, status, e);
  }

cleanup:
  if (rep.log && fclose(rep.log) != 0 && status == CLT_OK) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot write log: %s", o->log_path, strerror(errno));
  }
  for (int k = 0; k < 2; k++) {
    clt_tb_writer *w = k ? rep.tb_validation : rep.tb_train;
    if (clt_tb_close(w, status ? NULL : e) && status == CLT_OK) status = CLT_ERR_IO;
  }
  /* The trace of a failed run is written too: it may show why. */
  if (clt_trace_close(trace, status ? NULL : e) && status == CLT_OK) status = CLT_ERR_IO;
  free(replica_lines);
  clt_notice_free(notice);
  clt_trainer_destroy(t);
  clt_data_close(&data);
  clt_devices_free(&devices);
  clt_checkpoint_free(&state);
  clt_checkpoint_unlock(lock_fd);
  return status;
}
