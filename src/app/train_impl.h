/* What the train and eval commands' files share (train_setup.c: everything
 * before the first step, and what every process must agree on; train.c: the
 * epochs, saves and stops; eval.c). */
#ifndef CLT_TRAIN_IMPL_H
#define CLT_TRAIN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"
#include "data.h"
#include "notice.h"
#include "report.h"
#include "trace.h"
#include "train.h"

/* What every process of a run must share: the same model, data, batch, seed,
 * epochs, starting point and optimizer. */
typedef struct run_config {
  uint64_t model_hash;
  char model[80];
  int ntrain, ntest, height, width, channels, classes;
  int batch_per_replica;
  int global_batch; /* --global-batch (0: not given) */
  int batch_given;  /* --batch-per-replica given */
  uint64_t seed;
  int epochs, first_epoch;
  long long step;
  int optimizer, nesterov;
  double lr, momentum, weight_decay;
  /* --lr-schedule's and --reduce-lr-on-plateau's arguments. */
  char lr_control[1536];
  char split[64];
  uint64_t augment_hash; /* of the augmentation's text */
  char early_stop[256];  /* --early-stopping's arguments in effect ("" without) */
  int wire;              /* --wire (clt_wire) */
  int replicas;          /* this process's: summed, not compared */
} run_config;

/* This process's run_config (the optimizer and epoch fields are the caller's). */
run_config train_config_of(const clt_model *m, const clt_data *d, int batch_per_replica,
                           uint64_t seed, int replicas);
/* Compares every process's configuration with process 0's; *replicas gets the
 * run's replicas. */
int train_same_config(clt_cluster *c, const run_config *mine, int *replicas, clt_err *e);
/* The replica lines of every process, in rank order, into a new string. */
int train_replica_lines(clt_cluster *c, const clt_device *const *devices, int n, char **out,
                        clt_err *e);
/* A fresh run's state: weights from the seed, zero optimizer state. */
int train_fresh_state(const clt_model *model, uint64_t seed, clt_checkpoint *state, clt_err *e);
/* The checkpoint --resume continues: process 0's newest, in every process. */
typedef struct train_resume_file {
  char path[4096];      /* the file in process 0's --checkpoint-dir (for messages) */
  unsigned char *bytes; /* all of it */
  size_t size;
} train_resume_file;

/* --resume (train_resume.c): process 0 finds and reads the newest checkpoint of its
 * --checkpoint-dir and sends it to every process, which checks its hash; every
 * process returns the same verdict. */
int train_fetch_checkpoint(const clt_train_opts *o, train_resume_file *f, clt_err *e);
void train_resume_file_free(train_resume_file *f);

/* Everything before the first step that each process does by itself: the
 * optimizer, data, model, devices and (process 0) the checkpoint folder and log;
 * with --resume from the checkpoint in `resume` (its path into ckpt_path). */
int train_set_up(const clt_train_opts *o, const train_resume_file *resume, clt_data *data,
                 clt_model *model, clt_checkpoint *state, char *ckpt_path, size_t path_size,
                 clt_optimizer *opt, clt_device_list *devices, const clt_device **chosen,
                 int *nchosen, clt_report *rep, clt_trace **trace, int *lock_fd, clt_err *e);
/* The batch per replica of a run on `replicas` replicas that continues (or
 * evaluates) a checkpoint whose run took `recorded` examples a step (0: not
 * recorded): --batch-per-replica's `flag` when `given` or nothing is recorded,
 * else recorded / replicas (at least 1). *same gets whether the run's global
 * batch is the recorded one (1 when nothing is recorded). */
int train_batch_per_replica(int flag, int given, int recorded, int replicas, int *same);
/* The global batch of a train run on `replicas` replicas (recorded: the
 * checkpoint's with --resume, 0 if none): --global-batch, else
 * --batch-per-replica x replicas when given, else the recorded one, else
 * --batch-per-replica's default x replicas. The two flags given must agree, and
 * every replica needs an example. */
int train_global_batch(const clt_train_opts *o, int recorded, int replicas, int *global,
                       clt_err *e);
/* Starts the line "compiling kernels for device 0 (NAME) ..." due in a second. */
int train_compiling_notice(const clt_device *const *chosen, int n, clt_notice **out, clt_err *e);

#endif
