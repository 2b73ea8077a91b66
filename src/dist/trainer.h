/* Synchronous data parallelism over replicas (MirroredStrategy without CUDA).
 *
 * Every replica holds the whole model and its own flat parameter/gradient/optimizer
 * buffers, and loads its examples from a batch source. Each global batch (of
 * a size the caller gives, or batch_per_replica x N) is sliced across replicas
 * as evenly as possible; each computes the gradient of its examples' losses
 * divided by the *global* batch size, the gradients are summed by the ring
 * all-reduce, and every replica applies the same optimizer update, so all
 * replicas hold the same bits and N replicas compute what one device computes
 * on the whole batch. One host thread per replica drives it.
 *
 * Under MPI (a cluster of several processes) the replicas of all processes form
 * one run: replica indices are global (process 0's first, then process 1's...),
 * the global batch is over all replicas, the split is chosen by
 * process 0 from every replica's timings, the all-reduce spans the processes
 * (ring.h), and figures and metrics are summed over them, so every process holds
 * the same numbers.
 *
 * With --split auto every replica is timed before the first step (a warm-up run
 * and one example, and a full slice when that is cheap, on all replicas at once)
 * so the first split already follows the devices' speeds. A replica so slow
 * that any share would lengthen the step leaves it: it gets no examples and
 * takes no part in the all-reduce, the barriers or the update, and its
 * process's ring runs over the others (the members). Its thread re-times it
 * between the members' steps, off their critical path (clt_balancer_probe_due
 * paces it), on whatever old batch and state it holds; when a probe predicts a
 * shorter step with it, it rejoins: at the end of a step the first member
 * staying reads its parameters (BatchNormalization's statistics among them) and
 * optimizer slots, the replica rejoining writes them into its own and takes
 * part from the next step (whose number gives the optimizer's step count), so
 * every member holds the same bits. Under MPI every process decides the same
 * members from the same figures (every replica's times, gathered each step); a
 * process none of whose replicas is in a step takes part in its collectives all
 * the same (a stand-in thread; it adds negative zeros to the cross-process sum),
 * and a replica rejoining there gets the state from the process of the run's
 * first member (leave.c). A trainer driven a step at a time keeps every replica
 * in the step (one with no examples re-timed on one example every 64 steps).
 *
 * The all-reduce overlaps the backward pass, as PyTorch DDP's does: the gradient
 * is cut at layer boundaries into buckets (clt_net_buckets), from the last
 * layers' down, the order the backward pass completes them in; each replica's
 * thread enqueues the whole forward and backward pass with a marker after each
 * bucket's last layer, and as each marker completes it runs that bucket's ring
 * all-reduce (clt_ring_allreduce_range) on a second in-order queue of its own,
 * while its first queue goes on with the backward pass. Every member reduces the
 * buckets in the same order; the ring cuts them where it cuts the whole buffer,
 * so the sums, and so the bits, are those of the whole-buffer all-reduce. The
 * last bucket (the first layers') goes after the barrier that ends the
 * backward passes, on the replica's own queue; the update (and its gradient
 * check) waits for the second queue. A replica's compute time for the balancer runs to its backward
 * pass's end (its last marker's end on the device), not to the end of the
 * buckets' all-reduce. $CLTRAIN_ALLREDUCE_BUCKETS sets the buckets' least size in
 * floats (0: the whole gradient after the backward pass, as with one replica in
 * a process); unset, buckets of at least 1 MiB, except where a replica of the
 * process is a CPU device: there the copies and adds run on the cores that run
 * the backward pass, so overlapping them would only slow it down.
 *
 * Across two processes (MPI) the buckets are on by default, of at least 4 MiB
 * (where a process has CPU devices, only with --wire fp16: clt_trainer_set_wire),
 * and with $CLTRAIN_ALLREDUCE_BUCKETS across any number (process 0's value
 * holds for all); the cross-process sum then overlaps the backward pass too
 * (clt_ring_overlap): as each bucket's host sum
 * is in, replica 0's thread hands it to a thread of the process that sums it
 * with the other processes', and every replica copies each total back as it is
 * ready; the last bucket's follows the barrier. That thread is the process's
 * one caller of MPI during the buckets: the leader's stop vote goes before the
 * first. Otherwise the cross-process sum (MPI) runs over the whole buffer after
 * the device ring.
 *
 * CLTRAIN_TEST_SLOW="replica=R,from=S,to=T,ms=M" is a test facility: replica R's
 * forward and backward passes (and its speed probes) take M ms longer at
 * optimizer steps S to T, so that tests can make a device leave and rejoin.
 *
 * trainer_impl.h lists the files that make up the trainer, by concern. */
#ifndef CLT_TRAINER_H
#define CLT_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "balance.h"
#include "cluster.h"
#include "device.h"
#include "net.h"
#include "notice.h"
#include "ring.h"
#include "source.h"

#define CLT_MAX_REPLICAS 64

typedef struct clt_replica_stats {
  long examples; /* training examples this replica processed in the epoch */
  /* Device time from profiling events, within the epoch's training pass: */
  double busy_seconds;    /* of every kernel its queue ran (load, passes, all-reduce, update) */
  double compute_seconds; /* of those of its forward and backward passes (<= busy_seconds) */
  /* Leaving the step (one process, --split auto): */
  int member;                  /* in the step at the end of the epoch */
  int left, joined;            /* times it left and rejoined the step in the epoch */
  long left_step, joined_step; /* the optimizer step it was first out, back in (latest; 0: none) */
  int probes;                  /* speed probes it ran while out */
  double probe_seconds;        /* ... and their time */
  /* The all-reduce (several replicas in a process): */
  double allreduce_seconds;        /* its time in the collectives */
  double allreduce_hidden_seconds; /* ... of which while its backward pass still ran */
  long allreduce_calls;            /* the collectives: one per bucket (overlapped) or step */
} clt_replica_stats;

/* A replica of the run, possibly of another process (for reports). */
typedef struct clt_replica_info {
  int rank;           /* the process driving it */
  int device;         /* its device's index in that process's `cltrain devices` */
  char name[120];     /* the device's name */
  char host[64];      /* the process's host name */
  double alloc_bytes; /* device memory the replica holds */
  double net_bytes;   /* ... of which its network's */
} clt_replica_info;

typedef struct clt_epoch_result {
  double train_loss; /* mean of per-batch mean losses (the reference's figure) */
  double train_acc;  /* fraction correct */
  double seconds;    /* wall time of the training pass */
  /* The steps' leaders' time in the all-reduce (with buckets, the part hidden
   * behind the backward pass too), and of that, across processes: */
  double allreduce_seconds;
  double cross_seconds;        /* ... of which across processes (MPI; this process's view) */
  double cross_hidden_seconds; /* ... of that, hidden behind the backward pass (overlapped) */
  double data_wait_seconds;    /* time replica 0 waited for the source (decoded photos) */
  double first_step_done;      /* CLOCK_MONOTONIC seconds when the first step had finished */
  int bad_step;                /* first step (0-based) with a non-finite loss or gradient, or -1 */
  /* The epoch's steps: `steps` in all; this pass ran [skipped_steps, steps_done).
   * steps_done < steps: stopped early (a signal, clt_interrupt_signal). */
  int skipped_steps, steps_done, steps;
  long examples; /* trained on in this pass (the epoch's count unless resumed or stopped) */
  clt_replica_stats replicas[CLT_MAX_REPLICAS]; /* every replica of the run (global index) */
  /* Every process's (by rank) host work preparing the pass's examples (photos: its
   * replicas' slices decoded and augmented), as its training source reports it. */
  clt_source_work processes[CLT_MAX_REPLICAS];
} clt_epoch_result;

typedef struct clt_trainer clt_trainer;

/* Creates a replica and network on each chosen device, builds every kernel,
 * allocates every buffer and attaches the training and test sources (either may
 * be NULL; they must outlive the trainer, which detaches them when destroyed) for
 * global batches of global_batch examples over every replica of the run, split by
 * `split` (weights: one per device, for CLT_SPLIT_WEIGHTS). With equal slices
 * each replica holds global_batch / replicas examples, rounded up (slices differ
 * by at most one where it does not divide); otherwise as many as the global batch
 * or its memory allows. cluster: the processes of the run (NULL: this one);
 * weights then has one per replica of the run. */
int clt_trainer_create(const clt_model *m, const clt_device *const *devices, int n,
                       int global_batch, clt_split_mode split, const double *weights,
                       clt_source *train, clt_source *test, clt_cluster *cluster, clt_trainer **out,
                       clt_err *e);
/* Device memory a replica of model m needs to train on one example: its network
 * takes at most 70% of a device's memory. A device with less cannot train m. */
double clt_trainer_device_need(const clt_model *m);

/* The same for evaluation only (cltrain eval): inference-only networks, which
 * keep an activation only until it has been read, and no all-reduce ring. */
int clt_trainer_create_eval(const clt_model *m, const clt_device *const *devices, int n,
                            int batch_per_replica, clt_source *test, clt_cluster *cluster,
                            clt_trainer **out, clt_err *e);
void clt_trainer_destroy(clt_trainer *t);

/* This process's replicas (clt_trainer_replica(t, 0 .. n-1)). */
int clt_trainer_replicas(const clt_trainer *t);
/* Every process's: the run's replicas. */
int clt_trainer_total_replicas(const clt_trainer *t);
const clt_replica_info *clt_trainer_replica_info(const clt_trainer *t, int global_index);
int clt_trainer_processes(const clt_trainer *t);
/* Seconds the set-up speed probe took (--split auto; 0: none). */
double clt_trainer_probe_seconds(const clt_trainer *t);
/* The buckets a training step's all-reduce overlaps the backward pass with
 * (0: the whole gradient after the backward pass; see the top of this file). */
int clt_trainer_buckets(const clt_trainer *t);
/* The batch balancer (its estimates and latest split), for reporting. */
const clt_balancer *clt_trainer_balancer(const clt_trainer *t);
clt_replica *clt_trainer_replica(const clt_trainer *t, int i);
int clt_trainer_global_batch(const clt_trainer *t);

/* --trace: records the host phases of each replica's steps, its kernels and the
 * all-reduce's copies (and the photo decoders) into trace, from optimizer step
 * first_step for `steps` steps, then stops recording. */
int clt_trainer_trace(clt_trainer *t, clt_trace *trace, int steps, long first_step, clt_err *e);

/* The latest training pass, per step (index = step in the pass): when it ended on
 * replica 0's thread (clt_now_seconds), and its loss summed over the run's
 * examples and correct count (2 doubles). */
const double *clt_trainer_step_times(const clt_trainer *t);
const double *clt_trainer_step_sums(const clt_trainer *t);

/* How gradients cross between processes (cluster.h; CLT_WIRE_FP32 unless set):
 * the same in every process, set before the first step (by every process: with
 * CPU devices, fp16 turns the overlap across two processes on). */
int clt_trainer_set_wire(clt_trainer *t, clt_wire wire, clt_err *e);
/* Verifies after every step that all replicas hold bitwise-identical parameters. */
void clt_trainer_check_replicas(clt_trainer *t, int on);
/* Draws a Keras-style progress bar on `out` during training epochs (NULL: none). */
void clt_trainer_progress(clt_trainer *t, FILE *out);
/* n (notice.h) is marked done when the first step has run: the caller's "compiling
 * kernels" line then never appears on a warm start. The caller frees n. */
void clt_trainer_first_step_notice(clt_trainer *t, clt_notice *n);

/* Writes the same parameters and optimizer slot variables (optimizer.h; NULL: zeros)
 * to every replica (of this process: the caller makes them the same everywhere), or reads them
 * (those not NULL) from the first replica in the step. Flat arrays of model->flat_floats;
 * the slots' values past model->trainable_floats (frozen layers') are neither
 * written nor read. */
int clt_trainer_set_state(clt_trainer *t, const float *params, const float *slot0,
                          const float *slot1, clt_err *e);
int clt_trainer_get_state(clt_trainer *t, float *params, float *slot0, float *slot1, clt_err *e);

/* One training epoch over the training source in the order of (seed, epoch), each
 * step updating by opt. *step counts optimizer steps and is advanced. After a
 * signal (clt_interrupt_signal) it stops when the current step is done, in every
 * replica and process alike: res->steps_done < res->steps. */
int clt_trainer_epoch(clt_trainer *t, uint64_t seed, int epoch, const clt_optimizer *opt,
                      long *step, clt_epoch_result *res, clt_err *e);

/* Makes the next clt_trainer_epoch continue an epoch stopped after steps_done
 * steps (a checkpoint's data/epoch_step), whose per-step loss and correct sums
 * (2 per step, over the run) were `sums` (read during that call). */
void clt_trainer_resume_epoch(clt_trainer *t, int steps_done, const double *sums);
/* Loss (mean per example) and accuracy on the test source, its batches sliced
 * across replicas like training batches. */
int clt_trainer_evaluate(clt_trainer *t, double *loss, double *acc, clt_err *e);
/* Every process's (by rank) host work preparing the latest clt_trainer_evaluate's
 * examples, as its test source reports it (zeros before any). */
const clt_source_work *clt_trainer_test_work(const clt_trainer *t);

/* Makes later evaluations also store every test example's logits into out (test-set
 * order, count x classes floats; NULL: don't); under MPI every process gets all. */
void clt_trainer_capture_logits(clt_trainer *t, float *out);

/* ---- training a step at a time (the public API's custom loop; steps.c) -------- */

/* A batch in the caller's memory: count examples of the model's input shape,
 * NHWC, uint8 (made into the input by the model's preprocessing) or floats
 * already made into it, and their labels (NULL: zeros, for logits alone). */
typedef struct clt_host_batch {
  const void *images;
  int floats; /* 1: float images, 0: uint8 */
  const int32_t *labels;
  int count;
} clt_host_batch;

/* A trainer as clt_trainer_create makes one, but without sources (attached later
 * by clt_trainer_use_source) and in which no replica leaves the step (--split
 * auto re-balances the slices every step all the same). */
int clt_trainer_create_steps(const clt_model *m, const clt_device *const *devices, int n,
                             int batch_per_replica, clt_split_mode split, const double *weights,
                             clt_cluster *cluster, clt_trainer **out, clt_err *e);

/* Attaches s as the training (which 0) or test (1) source, in place of the one
 * there (detached); NULL detaches. s must be attached to no other trainer. */
int clt_trainer_use_source(clt_trainer *t, int which, clt_source *s, clt_err *e);
clt_source *clt_trainer_source(const clt_trainer *t, int which);

/* Begins epoch `epoch` of the training source, its examples in the order of
 * (seed, epoch) as clt_trainer_epoch's, to be run a step at a time; *steps gets
 * its global batches. Ends a step-wise pass in progress (clt_trainer_end_steps). */
int clt_trainer_begin_steps(clt_trainer *t, uint64_t seed, int epoch, int *steps, clt_err *e);
/* The epoch's steps whose forward pass has not run yet. */
int clt_trainer_steps_left(const clt_trainer *t);

/* What a step (or its forward pass) gives: its batch's loss summed over its
 * examples (unscaled), the correctly classified ones, the examples, and (after
 * the update) whether its loss or reduced gradient had a non-finite value. */
typedef struct clt_step_result {
  double loss_sum, correct;
  int examples;
  int bad;
} clt_step_result;

/* A training step in three parts, each run by one host thread per replica as a
 * pass's steps are: the forward and backward passes of the epoch's next batch
 * (batch NULL) or of the caller's batch (at most the global batch; read during
 * the call only); the all-reduce; the update by opt. `step` counts the optimizer
 * steps taken before this one (the update is step + 1; Dropout's masks use it).
 * clt_trainer_one_step runs the three on the epoch's next batch as
 * clt_trainer_epoch's steps are run (the all-reduce overlapping the backward
 * pass): the parts and the whole give the same bits. reduce and update act on
 * the batch of the latest forward, in that order; the caller keeps the order.
 * After a failure other than CLT_ERR_NUMERIC the trainer cannot step again.
 * r NULL (forward, update and one_step alike for a step): the call does not wait
 * for the devices and the step's figures are left for clt_trainer_settle, which
 * must run before another pass (an evaluation, a new epoch, another caller's
 * batch) reuses their slots. */
int clt_trainer_forward(clt_trainer *t, const clt_host_batch *batch, long step, clt_step_result *r,
                        clt_err *e);
int clt_trainer_reduce(clt_trainer *t, clt_err *e);
int clt_trainer_update(clt_trainer *t, const clt_optimizer *opt, long step, clt_step_result *r,
                       clt_err *e);
int clt_trainer_one_step(clt_trainer *t, const clt_optimizer *opt, long step, clt_step_result *r,
                         clt_err *e);
/* The figures of the steps run with r NULL, read back (waiting for the devices)
 * and handed to each(ctx, ...) in step order: `step` is the optimizer step the
 * update makes (1-based), forward 1 where the step's forward part had run
 * unread (r's loss and correct are new), updated 1 where its update had (r->bad
 * is its verdict). Nothing to read: returns at once. */
typedef void (*clt_step_fn)(void *ctx, long step, int forward, int updated,
                            const clt_step_result *r);
int clt_trainer_settle(clt_trainer *t, clt_step_fn each, void *ctx, clt_err *e);
/* Ends the step-wise passes (waits for the replicas' work). */
int clt_trainer_end_steps(clt_trainer *t, clt_err *e);

/* Writes the gradient buffer (grad_floats) of every replica, or reads the first's. */
int clt_trainer_set_grads(clt_trainer *t, const float *grads, clt_err *e);
int clt_trainer_get_grads(clt_trainer *t, float *grads, clt_err *e);
/* Writes the parameters (flat_floats) of every replica, leaving the optimizer's state. */
int clt_trainer_set_params(clt_trainer *t, const float *params, clt_err *e);

/* The logits of the caller's batch b (any count; labels may be NULL) into
 * logits (count x classes floats), in inference mode, its batches sliced across
 * the replicas as an evaluation's. */
int clt_trainer_predict_host(clt_trainer *t, const clt_host_batch *b, float *logits, clt_err *e);

/* ---- the convolutions' algorithms (src/engine/tuner.h) ------------------------------ */

typedef struct clt_trainer_tuning {
  int tune;             /* 0 (--tune off): no tuning results are read or timed */
  const char *file;     /* --tune-file: this file rather than the cache folder's */
  const char *recorded; /* a checkpoint's record (clt_trainer_conv_record), or NULL */
  /* A checkpoint's GEMM tilings and replicas (clt_trainer_choices), or NULL:
   * none recorded (then the tilings come from the cache, as for a new run). */
  const char *tilings, *replicas;
  FILE *verbose; /* each replica's in-step verdict goes here, or NULL */
  FILE *notes;   /* a record that cannot be restored is said here, or NULL */
} clt_trainer_tuning;

/* Chooses the convolution algorithms of each replica of this process: its
 * device's tuning results (with tune), then the recorded choices of the same
 * replica index (a resumed run keeps what it ran), and reserves the kernels and
 * scratch they run. Then its GEMM tilings: with replicas recorded, a replica
 * takes the algorithms and exactly the tilings of the recorded replica of its
 * index when that one has its build identity (tune.h's clt_tune_ident_hash:
 * device, driver, options, kernel sources), else of the first recorded one
 * that has, whatever the cache or tune says; one with neither, and one whose
 * recorded tiling this build cannot run, gets one note and the cache's
 * tilings (with tune; else the defaults). With budget_s > 0 the passes not
 * yet cached are tuned first in the step (tuner.h's clt_tune_net, on the batch
 * clt_trainer_keep_probe_batch kept; nothing the run computes changes), within
 * budget_s seconds in all (between epochs, the replicas idle); tuning that does
 * not fit goes on at the next call where it stopped (tuner.h's progress), the
 * tilings once the algorithms are settled. *spent gets the seconds taken and
 * *over whether a replica's tuning did not fit what was left of the budget
 * (either may be NULL). */
int clt_trainer_tune(clt_trainer *t, const clt_trainer_tuning *cfg, double budget_s, double *spent,
                     int *over, clt_err *e);

/* Keeps a copy of each replica's latest training batch (call it after a
 * training pass, before an evaluation loads its own): the in-step tuning's
 * probe steps run on it. */
int clt_trainer_keep_probe_batch(clt_trainer *t, clt_err *e);

/* What each replica of this process runs for each convolution with a choice of
 * algorithm, a line each: "R LAYER FWD DW DX" (R the run's replica index, the
 * passes' gemm.h names); a new string, NULL when out of host memory. */
char *clt_trainer_conv_record(const clt_trainer *t);

/* The GEMM tilings each cpu-backend replica of this process takes, a line
 * each: "R tA0 tB0 mM nN kK TILING" (the tiled shape, its batch's dimension
 * standing for its bucket; TILING as cpu.h's clt_cpu_gemm_tiling_name); a
 * replica on the defaults has none. A new string, NULL when out of memory. */
char *clt_trainer_tiling_record(const clt_trainer *t);

/* Every replica's choices in the run, all processes' in rank order: conv
 * (clt_trainer_conv_record's lines), tilings (clt_trainer_tiling_record's)
 * and replicas, a line each: "R RANK HOST BUILD DEVICE" (BUILD the device's
 * clt_tune_ident_hash, DEVICE its name, to the line's end). */
typedef struct clt_trainer_choices {
  char *conv, *tilings, *replicas;
} clt_trainer_choices;

/* Gathers them: every process calls it at the same point (a collective). */
int clt_trainer_choices_gather(clt_trainer *t, clt_trainer_choices *out, clt_err *e);
void clt_trainer_choices_free(clt_trainer_choices *c);

#endif
