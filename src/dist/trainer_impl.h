/* The trainer's insides, shared by the files that make it up:
 *   trainer.c  creating and destroying a trainer, its public API, epochs and evaluation
 *   pass.c     a pass over a dataset: one host thread per replica running the steps
 *   leave.c    leaving and rejoining the step (--split auto), and the stand-in
 *              that takes a process's part in a step none of its replicas is in
 *   stats.c    the metrics' sums and each replica's statistics
 *   probe.c    timing the devices (before the first step, and for replicas out of
 *              the step), and the CLTRAIN_TEST_SLOW test knob that slows one
 *   steps.c    a training epoch driven a step, or a part of one, at a time (the
 *              public API's custom loop), and batches in the caller's memory
 * trainer.h describes what the trainer does. */
#ifndef CLT_TRAINER_IMPL_H
#define CLT_TRAINER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "progress.h"
#include "trainer.h"
#include "watchdog.h"

/* One of this process's replicas and what the trainer keeps beside it. */
typedef struct trainer_replica {
  clt_replica *replica;      /* the device's context, queue and programs */
  clt_net *net;              /* the model on it */
  cl_command_queue transfer; /* the overlapped all-reduce's second queue (trainer.h), or NULL */
  int cap;                   /* the largest slice it holds */
  /* Batches in the caller's memory (steps.c), made at their first use: uint8
   * images staged for the preprocessing kernel. */
  cl_mem host_images;
  cl_kernel convert;
  /* In-step tuning (tuning.c): a copy of the latest training step's batch,
   * and the work a budget cut short, for the next epoch's (or NULL). */
  cl_mem probe_input, probe_labels;
  struct clt_tune_progress *tune_progress;
} trainer_replica;

struct clt_trainer {
  const clt_model *model;
  int n;      /* this process's replicas */
  int total;  /* the run's, in all processes */
  int base;   /* the global index of this process's first replica */
  int global; /* examples per step, over every replica of the run */
  clt_cluster *cluster;
  int rank_base[CLT_MAX_REPLICAS], rank_n[CLT_MAX_REPLICAS]; /* per process */
  clt_replica_info info[CLT_MAX_REPLICAS];                   /* per replica of the run */
  int batch_per_replica;                   /* the largest equal slice of the global batch */
  int slots;                               /* metric slots: steps of the longest pass */
  trainer_replica local[CLT_MAX_REPLICAS]; /* this process's replicas, by rank */
  clt_source *source[2];                   /* training and test examples, or NULL */
  clt_ring *ring;
  clt_balancer balancer;
  int *order;        /* host copy of the current example order */
  float *metrics;    /* 2 * slots per local replica (rank-major), read back after a pass */
  double *eval_sums; /* 2 * slots: each evaluation step's loss and correct count */
  char *gather;      /* trainer_gather's buffer for a double per replica of the run */
  size_t gather_bytes;
  float *checks;       /* slots per local replica: its reduced gradient's checks */
  float *check_params; /* flat_floats per local replica, for --check-replicas */
  int check_replicas;
  clt_progress progress;
  clt_notice *first_step_notice; /* the caller's; done at the first step's end */
  double first_step_done;        /* when the trainer's first step had run (0: not yet) */
  float *logits;                 /* evaluation's logits go here (test-set order), or NULL */
  clt_source_work test_work[CLT_MAX_REPLICAS]; /* per process: the latest evaluation's */
  double *step_time;  /* slots: when each step of the latest training pass ended */
  double *train_sums; /* ... of each step of the latest training pass, over the run */
  clt_trace *trace;   /* --trace, or NULL */
  int trace_steps;    /* ... of this many steps */
  long trace_first;   /* ... from this optimizer step */
  /* clt_trainer_resume_epoch: the next training pass starts at this step of its
   * epoch, those before it having summed to resume_sums (2 per step). */
  int resume_skip;
  double *resume_sums;
  /* Leaving the step (--split auto; see trainer.h): */
  int leave;
  unsigned long long *members; /* slots: the local ranks (bit per rank) taking part in each
                                  step of the latest training pass (0: none of them, under
                                  MPI) */
  float *handoff;              /* 1 + CLT_OPT_SLOTS flat arrays: the state a member hands a
                                  replica rejoining (across processes too) */
  double probe_seconds;        /* the set-up speed probe's wall time */
  /* CLTRAIN_TEST_SLOW (trainer.h): replica slow_replica's passes take slow_seconds
   * longer at optimizer steps slow_from to slow_to. */
  int slow_replica;
  long slow_from, slow_to;
  double slow_seconds;
  /* The all-reduce overlapping the backward pass (trainer.h): the gradient's
   * buckets (none: the whole buffer after the backward pass). */
  int nbuckets;
  long fp16_bucket_floats; /* buckets, overlapped across processes, once the wire is fp16 */
  clt_bucket buckets[CLT_MAX_BUCKETS];
  size_t order_cap; /* ints that order holds */
  /* A training pass driven a step at a time (steps.c), or NULL, and the pass of
   * a batch in the caller's memory (made at its first use). */
  struct pass *steps;
  struct pass *host_pass;
  struct pass *cur; /* the pass of the latest forward part, and its step */
  int cur_step;
  int next_step; /* the epoch's next step (steps) */
  /* Steps run without their figures read (clt_trainer_settle): of pass unread,
   * steps [fig_from, fig_to) ran their forward part, [chk_from, chk_to) their
   * update (empty ranges: from == to). */
  struct pass *unread;
  int fig_from, fig_to, chk_from, chk_to;
  struct step_workers *workers; /* steps.c: the parts' threads, made at the first part */
};

/* ---- a pass over a dataset -------------------------------------------------- */

/* A speed probe of a rank out of the step: asked by a step's leader, run by the
 * rank's thread, weighed by a later leader. */
enum { PROBE_IDLE, PROBE_ASKED, PROBE_RUNNING, PROBE_DONE };

typedef struct speed_probe {
  int state;    /* PROBE_* */
  int more;     /* asked: examples of a second timing (0: none) ... */
  double limit; /* ... taken if one example took less than this */
  long step;    /* asked at this optimizer step */
  int points;   /* done: its timings, of n[k] examples in secs[k] */
  int n[2];
  double secs[2];
  double took, end; /* its wall time, and when it ended */
} speed_probe;

/* What a process tells the others of one of its replicas at a re-balance when
 * replicas may leave the step (leave.c): its compute time of the step, and a
 * speed probe that has ended (points 0: none), so every process feeds its
 * balancer the same figures and decides the same members. */
typedef struct trainer_figures {
  double compute;
  double points, n[2], secs[2], took, end;
} trainer_figures;

/* What a pass tracks of one of this process's replicas (its rank). */
typedef struct pass_rank {
  int status; /* its thread's outcome */
  clt_err err;
  long examples; /* examples it processed in the pass */
  double slowed; /* CLTRAIN_TEST_SLOW's delays of its passes: device time they stand for */
  /* The profile's pending events when its latest step began, and the most a
   * step of the pass has added (collect_profile). */
  int pending_before, step_launches;
  /* The all-reduce: its time in it, the part of that while its own backward pass
   * still ran (overlapped buckets), and its collectives. */
  double ring_seconds, ring_hidden;
  long ring_calls;
  double clock_offset; /* host seconds - device seconds (overlapped steps) */
  double backward_end; /* overlapped steps: when this step's backward pass ended (host clock) */
  cl_event read_done;  /* steps.c: the step's figures read back (pass.read_back), or NULL */
  /* Leaving and rejoining, under the pass's mu: */
  int rejoin_at; /* the step at which it rejoins, or -1 */
  speed_probe probe;
  /* ... and for the epoch's report: */
  int left, joined, probes;
  long left_step, joined_step;
  double probe_seconds;
} pass_rank;

typedef struct pass {
  clt_trainer *t;
  clt_source *source;         /* set by the caller, or the trainer's (trainer_begin_pass) */
  const clt_host_batch *host; /* or a batch in the caller's memory */
  int train;                  /* 1: training epoch, 0: evaluation */
  int epoch;                  /* training: the epoch (its augmentations' draws) */
  int count;                  /* examples in the pass */
  int steps;
  const clt_optimizer *opt;
  long first_step; /* optimizer steps taken before the pass's step 0 */
  int skip;        /* steps of the epoch done before this pass (a resumed epoch) */
  atomic_int done; /* steps of the epoch done when the pass ended */
  /* A stop asked for (Ctrl-C): the step after which every replica stops, or -1.
   * Set once, by the step's leader before its barrier, so every rank sees it there. */
  atomic_int stop_after;
  uint64_t seed; /* the run's: Dropout's masks derive from it */
  double t0;
  double allreduce_seconds; /* the leaders' time inside the all-reduce */
  double data_wait_seconds; /* the leaders' time waiting for the source */
  clt_source_work work;     /* the source's host work in the pass (clt_trainer_epoch) */
  int mismatch_step;        /* --check-replicas: first step where replicas differed */
  int dynamic;              /* slices re-balanced every step (auto split, training) */
  /* The slices of the run's replicas (global index: a process's base + its rank): */
  int full[CLT_MAX_REPLICAS], tail[CLT_MAX_REPLICAS]; /* fixed slices: full and last batch */
  int next[CLT_MAX_REPLICAS];                         /* dynamic: slices of the coming step */
  double compute[CLT_MAX_REPLICAS];                   /* this step's forward+backward seconds */
  pass_rank ranks[CLT_MAX_REPLICAS];                  /* this process's replicas, by rank */
  /* Leaving and rejoining (t->leave in a training pass). t->members[s]: the
   * local ranks in step s, written by step s-1's leader before the barrier that
   * ends its re-balance. Ranks out of the step wait on this bench, under mu: */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int over;   /* the pass has ended (or failed): ranks out return */
  int handed; /* the state after this step is in t->handoff (-1: none) */
  /* Leaving across processes (leave.c): */
  int settled;    /* this process has taken its part in the collectives of the steps before
                     this one (the stand-in runs it when none of its ranks is in it) */
  int carry_at;   /* at the end of this step a process with no member gets the state for
                     a replica rejoining (-1: none) ... */
  int carry_from; /* ... from this process */
  int stand_in_status;
  clt_err stand_in_err;
  int begun;     /* steps.c: begun (trainer_begin_pass), not yet ended */
  int read_back; /* steps.c: the update reads the step's figures back (ranks' read_done) */
} pass;

static inline unsigned long long all_ranks(const clt_trainer *t) {
  return t->n >= 64 ? ~0ull : (1ull << t->n) - 1;
}

/* The local ranks taking part in step s (every one, but in a training pass that
 * lets replicas leave). */
static inline unsigned long long members_of(const pass *p, int s) {
  return p->train && p->t->leave ? p->t->members[s] : all_ranks(p->t);
}

/* The lowest rank in mask (0 for none). */
static inline int lowest(unsigned long long mask) {
  int r = 0;
  while (mask && !(mask & 1)) {
    mask >>= 1;
    r++;
  }
  return r;
}

static inline int is_member(const pass *p, int rank, int s) {
  return (int)((members_of(p, s) >> rank) & 1);
}

/* The examples of a speed probe's second timing: an equal split's slice, as far as
 * the replica holds one. */
static inline int probe_slice(const clt_trainer *t, int rank) {
  const int cap = t->local[rank].cap;
  return cap < t->batch_per_replica ? cap : t->batch_per_replica;
}

/* trainer.c: gathers each process's per-replica records (`bytes` each, n of them
 * at mine) into all[global index]. */
int trainer_gather(clt_trainer *t, const void *mine, size_t bytes, void *all, clt_err *e);

/* pass.c: runs a pass on every replica; on failure reports the first error that
 * is not merely another rank's abort. */
int trainer_run_pass(pass *p, clt_err *e);
/* Its pieces, for steps.c: what comes before the threads start (the slices, the
 * source begun, the members); starting one thread per rank (on failure the
 * ring is aborted and the rank's status says why); joining them under the
 * watchdog, with the first error that is not merely another rank's abort; and
 * each rank's end of the pass (its queues finished and profile collected; on
 * failure, wakes the others wherever they wait). */
int trainer_begin_pass(pass *p, clt_err *e);
typedef enum trainer_part {
  TRAINER_FORWARD, /* loading the slice, the forward and backward passes */
  TRAINER_REDUCE,  /* the stop vote, the all-reduce, the re-balance */
  TRAINER_UPDATE,  /* the update and the checks */
  TRAINER_STEP     /* the three, the all-reduce overlapping the backward pass */
} trainer_part;
typedef struct trainer_thread_arg {
  pass *p;
  int rank;
  int s;             /* the step (steps.c) */
  trainer_part part; /* ... and what of it */
} trainer_thread_arg;
int trainer_start_threads(pass *p, void *(*fn)(void *), trainer_thread_arg *args,
                          pthread_t *threads, int *started);
int trainer_join_pass(pass *p, const pthread_t *threads, int started, clt_err *e);
/* The same for threads kept between parts (steps.c): wait as clt_ring_watch's. */
int trainer_watch_pass(pass *p, const pthread_t *threads, int started, clt_ring_wait_fn wait,
                       void *ctx, clt_err *e);
int trainer_end_pass(pass *p, int rank, int status, clt_err *e);
/* Rank's part `part` of step s of a training pass (as the pass's own threads run
 * the steps; TRAINER_STEP: the whole of it). */
int trainer_step_part(pass *p, int rank, int s, trainer_part part, clt_err *e);
/* Waits for the replica's queue. */
int trainer_finish_queue(clt_replica *rep, clt_err *e);

/* pass.c: the leader's part of the re-balance at the end of step s (the
 * stand-in's, in a process none of whose ranks is in the step): every
 * replica's time and the probes in, the members and slices of step s+1, the
 * probes asked. */
int trainer_plan_next(pass *p, int s, clt_err *e);
/* pass.c: step s of a training pass in a process none of whose ranks is in it
 * (the stand-in's): its part in the step's collectives, with nothing to add. */
int trainer_hollow_step(pass *p, int s, clt_err *e);

/* leave.c: the leader's part at the end of step s, in the re-balance: the
 * figures in (trainer_take_figures: every replica's compute time of the step,
 * with_compute, and the probes that have ended, from every process), the
 * members of step s+1 (trainer_regroup), the probes it asks of the ranks out
 * (trainer_ask_probes). */
int trainer_take_figures(pass *p, int with_compute, clt_err *e);
unsigned long long trainer_regroup(pass *p, int s, int full);
void trainer_ask_probes(pass *p, int s, unsigned long long members);
/* The end of step s: every member's part when the members change, and across
 * processes the state handed to a process with no member (trainer_hollow_change:
 * the stand-in's part). */
int trainer_change_members(pass *p, int rank, int s, clt_err *e);
int trainer_hollow_change(pass *p, int s, clt_err *e);
/* The stand-in's thread (arg: the pass). */
void *trainer_stand_in(void *arg);
/* After a training pass: the probes that ended after the last re-balance
 * weighed, and under MPI the state given to the first replica of a process
 * with no member (so that it holds the trained state). */
int trainer_end_leave(pass *p, clt_err *e);
/* A rank out of step *s waits here (*s: the step it rejoins at, or p->steps). */
int trainer_sit_out(pass *p, int rank, int *s, clt_err *e);
/* Ends the bench: ranks out of the step return once their probe is done. */
void trainer_close_bench(pass *p);

/* trainer.c: makes room for passes over `examples` examples: the example order
 * and every step's metric slots (growing the replicas' buffers: not within a pass). */
int trainer_reserve(clt_trainer *t, int examples, clt_err *e);
/* Before a training pass: --check-replicas' buffer, and the profile's sums reset. */
int trainer_prepare_training(clt_trainer *t, clt_err *e);

/* steps.c: loads examples [first, first + len) of the caller's batch p->host into
 * rank's input; releases what the caller's batches took on the replicas. */
int trainer_load_host(pass *p, int rank, int first, int len, clt_err *e);
void trainer_release_host(clt_trainer *t);
/* steps.c: ends the parts' threads (not a hung replica's: watchdog.h). */
void trainer_stop_workers(clt_trainer *t);

/* stats.c: the metrics read back from the replicas, and what is made of them. */
int trainer_read_metrics(clt_trainer *t, unsigned long long ranks, int steps, clt_err *e);
int trainer_step_sums(clt_trainer *t, int from, int steps, const unsigned long long *members,
                      double *out, clt_err *e);
void trainer_sum_metrics(const clt_trainer *t, const double *sums, int steps, int count,
                         double *mean_batch_loss, double *example_loss, double *acc);
int trainer_replica_stats(clt_trainer *t, const pass *p, clt_epoch_result *res, clt_err *e);

/* probe.c: timing the devices, and the test knob that slows one. */
int trainer_time_examples(clt_trainer *t, int rank, int n, const clt_optimizer *opt, long step,
                          double *seconds, clt_err *e);
int trainer_setup_probe(clt_trainer *t, clt_err *e);
int trainer_parse_slow(clt_trainer *t, clt_err *e);
double trainer_slow_down(const clt_trainer *t, int g, long step);

#endif
