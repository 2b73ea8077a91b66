/* What `cltrain train` and `cltrain eval` print: the set-up lines, one record
 * per epoch (the epoch lines, the JSON Lines log, --profile) and the terminal
 * progress bar. */
#ifndef CLT_REPORT_H
#define CLT_REPORT_H

#include <stdio.h>

#include "data.h"
#include "model.h"
#include "tensorboard.h"
#include "trainer.h"

typedef struct clt_report {
  FILE *out;            /* the lines */
  FILE *log;            /* JSON Lines, one object per epoch, or NULL */
  const char *log_path; /* its name, for errors */
  int profile;          /* --profile: device time by layer and kernel per epoch */
  int verbose;          /* --verbose: the build logs of the replicas' programs, on stderr */
  double launch;        /* clt_now_seconds() at launch: start-up counts from it */
  const clt_model *model;
  const clt_data *data;                /* a validation split is named so, and a photo
                                          folder's waits for decoded images are reported */
  const clt_trainer *trainer;          /* once created */
  int excluded_said[CLT_MAX_REPLICAS]; /* the balancer's exclusion note is said once */
  /* --tensorboard: event files of the training and validation (test) runs, and the
   * batch loss every tb_every steps (0: none). */
  clt_tb_writer *tb_train, *tb_validation;
  int tb_every;
  /* A schedule or ReduceLROnPlateau (its own, for the note of a reduction):
   * the epoch lines show the rate when it changes, rate_shown the last shown. */
  int rate_varies;
  double rate_shown;
  const clt_plateau *plateau;
} clt_report;

/* The run before anything is built. */
typedef struct clt_run_plan {
  const char *replica_lines; /* clt_report_replica_lines of every process */
  int replicas;              /* in all processes */
  int processes;
  int global_batch;         /* examples per step over all replicas */
  const char *split;        /* --split, named with several devices */
  int first_epoch, epochs;  /* epochs first_epoch + 1 .. epochs run */
  const char *resumed_from; /* the checkpoint resumed from, or NULL */
  long steps_done;          /* its steps */
  /* The update every step applies, or NULL; its schedule, ReduceLROnPlateau (or NULL). */
  const clt_optimizer *optimizer;
  const clt_plateau *plateau;
} clt_run_plan;

/* One epoch, as the epoch lines and the log report it. */
typedef struct clt_epoch_record {
  int epoch;                  /* 1-based */
  int first;                  /* the run's first epoch: the start-up time is reported */
  clt_epoch_result train;     /* the training pass */
  double test_loss, test_acc; /* NAN without a test set */
  double seconds;             /* the whole epoch, evaluation included */
  double learning_rate;       /* the rate of its last step */
  double reduced_to;          /* > 0: ReduceLROnPlateau lowered the rate to it after the epoch */
  char *conv_algorithms;      /* what the epoch's convolutions ran (clt_trainer_conv_record),
                                 or NULL */
  char *gemm_tilings;         /* ... and its GEMMs' tilings (clt_trainer_tiling_record), or
                                 NULL */
} clt_epoch_record;

/* --verbose: the OpenCL compilers' logs of the replicas' successful builds
 * (warnings), on stderr; a normal run shows none. */
void clt_report_build_logs(const clt_trainer *t);

/* "Replica i: device ..." lines of n devices, numbered from `first`, into buf;
 * with several processes each names the process's rank and host. */
void clt_report_replica_lines(const clt_device *const *devices, int n, int first, int rank,
                              const char *host, int processes, char *buf, size_t size);
/* The model, data, replica and batch lines (and "Resuming from ..."). */
void clt_report_plan(const clt_report *r, const clt_run_plan *plan);
/* The checkpoint (path) has all the epochs asked for: one line instead of the plan. */
void clt_report_nothing_to_do(const clt_report *r, const char *path, int epochs_done, int epochs);
/* The set-up line: times and each replica's device memory (r->trainer is set). */
void clt_report_ready(const clt_report *r, double setup_seconds, double launch_seconds);
/* The epoch lines, --profile and the log object; fails only when the log cannot
 * be written (full disk...), after the lines are out. */
int clt_report_epoch(clt_report *r, const clt_epoch_record *rec, clt_err *e);
void clt_report_saved(const clt_report *r, const char *path);
/* --tensorboard: the epoch's scalars, and the batch loss of every tb_every-th step
 * of its training pass (rec's epoch, steps first_step + 1 ...), as Keras' TensorBoard
 * callback names them: epoch_loss and epoch_accuracy under train/ and validation/,
 * batch_loss, and cltrain's own epoch_learning_rate (the rate of the epoch's last
 * step), epoch_images_per_second,
 * epoch_allreduce_seconds, replica_<i>/share and replica_<i>/busy. */
int clt_report_tensorboard(clt_report *r, const clt_epoch_record *rec, long first_step, clt_err *e);
/* cltrain eval's lines. */
void clt_report_eval(FILE *out, const char *checkpoint, const clt_model *m, long long epochs,
                     long long steps, int examples, int devices, int processes, double acc,
                     double loss);

#endif
