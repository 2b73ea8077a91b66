/* A pass over a dataset (a training epoch or an evaluation): one host thread per
 * replica runs the steps (run_step reads as the step does, top to bottom), each
 * with its slice of every global batch; see trainer.h. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interrupt.h"
#include "timing.h"
#include "trainer_impl.h"
#include "watchdog.h"

/* One replica's part of one step. */
typedef struct step {
  int s;           /* the step's index in the pass */
  int lead;        /* the step's leader: its first member, which decides for all */
  int batch_first; /* its global batch: examples [batch_first, batch_first + batch) */
  int batch;
  int first, len; /* this replica's slice of it: [first, first + len) */
} step;

/* Examples [first, first + len) of a batch. */
typedef struct range {
  int first, len;
} range;

static int barrier(clt_trainer *t, clt_err *e) {
  return clt_ring_barrier(t->ring) ? clt_fail(e, CLT_ERR_INTERNAL, "aborted") : CLT_OK;
}

int trainer_finish_queue(clt_replica *rep, clt_err *e) {
  cl_int rc = clFinish(rep->queue);
  return rc ? clt_replica_fail(rep, e, rc, "clFinish") : CLT_OK;
}

/* Step s's global batch and this replica's slice of it. */
static step slice_step(const pass *p, int rank, int s) {
  const int global = clt_trainer_global_batch(p->t);
  step st = {.s = s, .lead = lowest(members_of(p, s)), .batch_first = s * global};
  st.batch = p->count - st.batch_first < global ? p->count - st.batch_first : global;
  const int *slices = p->dynamic ? p->next : st.batch == global ? p->full : p->tail;
  const int g = p->t->base + rank; /* slices are the run's, over every process */
  for (int r = 0; r < g; r++) st.first += slices[r];
  st.len = slices[g];
  return st;
}

/* Busy time comes from the events of earlier steps; collecting them waits for
 * those steps, so it is done only when the pending list might not hold another
 * step's (the most a step of this pass has launched, at least 256), not every step. */
static int collect_profile(pass_rank *me, clt_replica *rep, clt_err *e) {
  const int pending = rep->profile->npending;
  if (pending - me->pending_before > me->step_launches)
    me->step_launches = pending - me->pending_before;
  if (me->step_launches < 256) me->step_launches = 256;
  me->pending_before = pending;
  if (pending + me->step_launches <= CLT_PROFILE_MAX_PENDING) return CLT_OK;
  me->pending_before = 0;
  return clt_replica_profile_collect(rep, e);
}

static int load_slice(pass *p, int rank, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  clt_net *net = t->local[rank].net;
  double waited = 0;
  if (p->host) return trainer_load_host(p, rank, st->batch_first + st->first, st->len, e);
  /* A resumed epoch's source was begun at its first remaining example (see
   * clt_trainer_epoch): its steps count from there. */
  int status = clt_source_load(p->source, rank, st->s - p->skip, st->first, st->len, net->input,
                               net->labels, &waited, e);
  if (rank != st->lead) return status;
  p->data_wait_seconds += waited;
  /* Every rank loads every step (a photo source frees a batch once all have):
   * the leader loads the empty slices of the ranks out of the step, whose
   * threads may be busy re-timing their devices. An empty load touches no device. */
  const unsigned long long out = all_ranks(t) & ~members_of(p, st->s);
  for (int r = 0; r < t->n && !status; r++) {
    if ((out >> r) & 1) {
      status = clt_source_load(p->source, r, st->s - p->skip, 0, 0, t->local[r].net->input,
                               t->local[r].net->labels, NULL, e);
    }
  }
  return status;
}

/* A training step whose all-reduce overlaps the backward pass (trainer.h): the
 * markers of its buckets on the replica's queue, and the host times. */
typedef struct overlap {
  cl_event done[CLT_MAX_BUCKETS]; /* bucket b's gradient is final on this replica */
  double c0;                      /* when the forward pass began to be enqueued */
} overlap;

static void release_marks(const clt_trainer *t, overlap *ov) {
  for (int b = 0; ov && b < t->nbuckets; b++) {
    if (ov->done[b]) clReleaseEvent(ov->done[b]);
    ov->done[b] = NULL;
  }
}

/* Host seconds minus the device clock's, read from a marker on the idle queue
 * (NAN when the device does not time markers): the backward pass's end is read
 * from its marker's profiling event, as the host thread may be in the
 * all-reduce of an earlier bucket at that moment. */
static double clock_offset(clt_replica *rep) {
  cl_event ev = NULL;
  cl_ulong end = 0;
  double offset = NAN;
  if (clFinish(rep->queue) != CL_SUCCESS) return offset;
  const double h0 = clt_now_seconds();
  cl_int rc = clEnqueueMarkerWithWaitList(rep->queue, 0, NULL, &ev);
  if (rc == CL_SUCCESS) rc = clWaitForEvents(1, &ev);
  const double h1 = clt_now_seconds();
  if (rc == CL_SUCCESS &&
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) == CL_SUCCESS &&
      end > 0)
    offset = (h0 + h1) / 2 - (double)end * 1e-9;
  if (ev) clReleaseEvent(ev);
  return offset;
}

/* An evaluation's launches are left out of the profile's sums, which are the
 * training pass's (a report of the epoch reads them after the evaluation). */
static int uncounted(const pass *p) { return p->train ? 0 : CLT_PROFILE_UNCOUNTED; }

/* Forward (and in training backward) on the slice; in training also times this
 * replica's compute for the balancer, after the load so a wait is not counted.
 * ov (overlapped steps): the backward pass marks its buckets and is not waited
 * for here (the compute time is taken at its end, in hidden_buckets). */
static int forward_backward(pass *p, int rank, const step *st, overlap *ov, clt_err *e) {
  clt_trainer *t = p->t;
  const trainer_replica *l = &t->local[rank];
  pass_rank *me = &p->ranks[rank];
  const double c0 = clt_now_seconds();
  clt_net_set_position(l->net, p->seed, p->first_step + st->s, st->first);
  /* Its launches' device time is the replica's compute time (compute_seconds). */
  clt_replica_profile_kind(l->replica, uncounted(p) | CLT_PROFILE_COMPUTE);
  /* Losses are divided by the actual global batch, the last partial one included. */
  int status = ov ? clt_net_forward_backward_marked(l->net, st->len, 1.0f / st->batch, st->s,
                                                    t->buckets, t->nbuckets, ov->done, e)
                  : clt_net_forward_backward(l->net, st->len, 1.0f / st->batch, st->s, p->train, e);
  clt_replica_profile_kind(l->replica, uncounted(p));
  if (status) return status;
  const int g = t->base + rank;
  me->examples += st->len;
  if (!p->train) {
    /* Evaluation runs the examples in order: the slice's global index is its place. */
    if (!t->logits) return CLT_OK;
    float *out = t->logits + (size_t)(st->batch_first + st->first) * t->model->classes;
    return clt_net_read_logits(l->net, st->len, out, e);
  }
  if (ov) {
    ov->c0 = c0;
    return CLT_OK;
  }
  /* Waiting for the backward pass first keeps compute out of the all-reduce's time
   * (its first download would wait for it anyway) and times this replica's work. */
  if (t->total > 1 && (status = trainer_finish_queue(l->replica, e))) return status;
  if (st->len) me->slowed += trainer_slow_down(t, g, p->first_step + st->s + 1);
  p->compute[g] = st->len ? clt_now_seconds() - c0 : 0.0;
  return CLT_OK;
}

/* --trace: the phase that began at *t0 as a span of the replica's host thread;
 * *t0 moves to now. Nothing when not tracing. */
static void mark(pass *p, int rank, int s, const char *what, double *t0) {
  clt_replica *rep = p->t->local[rank].replica;
  if (!rep->trace || !p->train) return;
  if (p->first_step + s - p->t->trace_first >= p->t->trace_steps)
    return; /* past the traced steps */
  const double now = clt_now_seconds();
  clt_replica_trace_span(rep, CLT_TRACE_HOST, what, *t0, now, (int)(p->first_step + s + 1));
  *t0 = now;
}

/* An overlapped step (trainer.h), while the replica's queue runs the backward
 * pass: the all-reduce of every bucket but the last on the transfer queue, each
 * as soon as its gradient is final here (the other members' copies of it arrive
 * as theirs are), and across processes (clt_ring_overlap) each handed to the
 * cross-process sum once this process's sum is in, its total copied back as it
 * is ready; then the backward pass's end, which times the compute. */
static int hidden_buckets(pass *p, int rank, const step *st, overlap *ov, clt_err *e) {
  clt_trainer *t = p->t;
  const trainer_replica *l = &t->local[rank];
  clt_replica *rep = l->replica;
  pass_rank *me = &p->ranks[rank];
  const int g = t->base + rank, last = t->nbuckets - 1;
  double from[CLT_MAX_BUCKETS], to[CLT_MAX_BUCKETS];
  int status = CLT_OK;
  /* The ring changes members between steps, by the first member staying
   * (change_members), maybe after the others have begun this step: they wait
   * for it at a barrier before their first collective, as the whole-buffer
   * all-reduce's barrier makes them do. */
  if (t->leave && st->s > p->skip && t->members[st->s - 1] != t->members[st->s] &&
      (status = barrier(t, e)))
    return status;
  if ((status = clt_ring_cross_begin(t->ring, rank, e))) return status;
  clt_replica_scope(rep, "all-reduce", "gradients");
  for (int b = 0; b <= last; b++) {
    cl_int rc = clWaitForEvents(1, &ov->done[b]);
    if (rc) {
      clt_ring_abort(t->ring);
      return clt_replica_fail(rep, e, rc, "the backward pass");
    }
    if (b == last) break; /* the last bucket goes after the barrier (all_reduce) */
    from[b] = clt_now_seconds();
    const clt_bucket *k = &t->buckets[b];
    status = clt_ring_allreduce_range(t->ring, rank, l->net->grads, k->offset, k->count,
                                      l->transfer, ov->done[b], e);
    if (!status)
      status = clt_ring_cross_post(t->ring, rank, l->net->grads, k->offset, k->count, l->transfer,
                                   e);
    if (!status) status = clt_ring_cross_take(t->ring, rank, l->net->grads, l->transfer, b + 1, e);
    to[b] = clt_now_seconds();
    if (status) return status;
  }
  /* The backward pass ended at its last marker's end on the device, unless the
   * device does not say: then when this thread saw it. */
  const double seen = clt_now_seconds();
  double end = seen;
  cl_ulong device_end = 0;
  if (isfinite(me->clock_offset) &&
      clGetEventProfilingInfo(ov->done[last], CL_PROFILING_COMMAND_END, sizeof device_end,
                              &device_end, NULL) == CL_SUCCESS) {
    end = (double)device_end * 1e-9 + me->clock_offset;
    end = end < ov->c0 ? ov->c0 : end > seen ? seen : end;
  }
  me->backward_end = end;
  const double slept = st->len ? trainer_slow_down(t, g, p->first_step + st->s + 1) : 0.0;
  me->slowed += slept;
  p->compute[g] = st->len ? end - ov->c0 + slept : 0.0;
  /* Each bucket's all-reduce is hidden as far as it ran before that end. */
  double spent = 0;
  for (int b = 0; b < last; b++) {
    spent += to[b] - from[b];
    if (from[b] < end) me->ring_hidden += (to[b] < end ? to[b] : end) - from[b];
  }
  me->ring_seconds += spent;
  me->ring_calls += last;
  if (rank == st->lead) p->allreduce_seconds += spent;
  return CLT_OK;
}

/* The replica's queue waits for what its transfer queue has enqueued. */
static int join_queues(clt_replica *rep, cl_command_queue transfer, clt_err *e) {
  cl_event ev = NULL;
  cl_int rc = clEnqueueMarkerWithWaitList(transfer, 0, NULL, &ev);
  if (rc == CL_SUCCESS) rc = clFlush(transfer);
  if (rc == CL_SUCCESS) rc = clEnqueueBarrierWithWaitList(rep->queue, 1, &ev, NULL);
  if (ev) clReleaseEvent(ev);
  return rc ? clt_replica_fail(rep, e, rc, "ordering the update after the all-reduce") : CLT_OK;
}

/* *t0: --trace's phase clock (the wait for the slowest replica is its own span).
 * ov: an overlapped step, whose last bucket (the first layers') is left. */
static int all_reduce(pass *p, int rank, const step *st, overlap *ov, double *t0, clt_err *e) {
  clt_trainer *t = p->t;
  const trainer_replica *l = &t->local[rank];
  clt_replica *rep = l->replica;
  cl_mem grads = l->net->grads;
  /* All replicas done: what follows is the all-reduce alone, not waiting for a
   * slower replica's backward pass. */
  int status = t->n > 1 ? barrier(t, e) : CLT_OK;
  if (status) return status;
  if (t->n > 1) mark(p, rank, st->s, "wait for the slowest replica", t0);
  const double a0 = clt_now_seconds();
  clt_replica_scope(rep, "all-reduce", "gradients");
  if (ov) {
    /* The last bucket goes on the replica's own queue, idle now (the backward
     * pass is done): no second queue to wait on. That queue's next commands
     * (the update and its gradient check) read the other buckets too, so they wait
     * for the transfer queue's (done by now: each collective waits for its copies). */
    const clt_bucket *b = &t->buckets[t->nbuckets - 1];
    status = join_queues(rep, l->transfer, e);
    if (!status)
      status = clt_ring_allreduce_range(t->ring, rank, grads, b->offset, b->count, NULL, NULL, e);
    if (clt_ring_overlapping(t->ring)) {
      /* The other buckets' totals are in, or being summed: the last one's too,
       * then every total copied in. */
      if (!status) status = clt_ring_cross_post(t->ring, rank, grads, b->offset, b->count, NULL, e);
      if (!status)
        status = clt_ring_cross_finish(t->ring, rank, grads, NULL, t->nbuckets,
                                       p->ranks[rank].backward_end, e);
    } else if (!status) {
      status = clt_ring_allreduce_across(t->ring, rank, grads, e);
    }
    if (status) clt_ring_abort(t->ring);
  } else {
    status = clt_ring_allreduce(t->ring, rank, grads, e);
  }
  if (status) return status;
  const double spent = clt_now_seconds() - a0;
  p->ranks[rank].ring_seconds += spent;
  p->ranks[rank].ring_calls++;
  if (rank == st->lead) p->allreduce_seconds += spent;
  return CLT_OK;
}

/* Process 0's slices (of the run's replicas) to every process. */
static int share_slices(clt_trainer *t, int *slices, clt_err *e) {
  return clt_cluster_bcast(t->cluster, slices, (size_t)t->total * sizeof *slices, e);
}

/* Where this process's replicas' slices lie in a batch split into `slices`: one
 * after another, from its first replica's. */
static range own_part(const clt_trainer *t, const int *slices) {
  range part = {0, 0};
  for (int g = 0; g < t->base; g++) part.first += slices[g];
  for (int r = 0; r < t->n; r++) part.len += slices[t->base + r];
  return part;
}

/* Tells the pass's source which examples of its batches this process loads, from
 * step s of the pass on (full: the slices of a full batch; last: of the pass's
 * last, partial one), so that it decodes photos for this process's slices alone. */
static int tell_share(const pass *p, int s, const int *full, const int *last, clt_err *e) {
  if (!p->source) return CLT_OK;
  const range a = own_part(p->t, full), b = own_part(p->t, last);
  /* The source counts a resumed epoch's steps from its first remaining one. */
  return clt_source_share(p->source, s - p->skip, a.first, a.len, b.first, b.len, e);
}

int trainer_plan_next(pass *p, int s, clt_err *e) {
  clt_trainer *t = p->t;
  int status = CLT_OK;
  if (t->leave) {
    status = trainer_take_figures(p, 1, e);
  } else if (clt_cluster_size(t->cluster) > 1) {
    double mine[CLT_MAX_REPLICAS] = {0};
    memcpy(mine, p->compute + t->base, (size_t)t->n * sizeof *mine);
    status = trainer_gather(t, mine, sizeof mine[0], p->compute, e);
  }
  if (status) return status;
  const int global = clt_trainer_global_batch(t);
  clt_balancer_observe(&t->balancer, p->next, p->compute);
  const int next_first = (s + 1) * global;
  const int next_batch = p->count - next_first < global ? p->count - next_first : global;
  if (next_batch <= 0) return CLT_OK;
  unsigned long long members = all_ranks(t);
  if (t->leave) members = t->members[s + 1] = trainer_regroup(p, s, next_batch == global);
  clt_balancer_split(&t->balancer, next_batch, p->next);
  status = share_slices(t, p->next, e);
  /* Decoding ahead goes on with this split until the next one. */
  if (!status) status = tell_share(p, s + 1, p->next, p->next, e);
  if (!status && t->leave && atomic_load(&p->stop_after) < 0) trainer_ask_probes(p, s, members);
  return status;
}

/* Every replica's time of this step is in: the leader re-balances the next step
 * while the others wait (a short computation beside a step). Across
 * processes, every process's leader gets every replica's time; process 0's
 * split goes to the others. */
static int rebalance(pass *p, int rank, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  int status = barrier(t, e);
  if (status) return status;
  if (rank == st->lead) status = trainer_plan_next(p, st->s, e);
  if (status) {
    clt_ring_abort(t->ring);
    return status;
  }
  return barrier(t, e);
}

/* The optimizer's update, its kernel counting the reduced gradient's non-finite
 * values into the step's check slot (read after the epoch). */
static int update(pass *p, int rank, int s, clt_err *e) {
  clt_net *net = p->t->local[rank].net;
  int status = clt_net_update_checked(net, p->opt, p->first_step + s + 1, s, e);
  /* Step-wise: the step's figures are read as soon as its check is final. */
  if (!status && p->read_back)
    status = clt_net_read_slot(net, s, p->t->metrics + ((size_t)rank * p->t->slots + s) * 2,
                               p->t->checks + (size_t)rank * p->t->slots + s,
                               &p->ranks[rank].read_done, e);
  if (status) return status;
  cl_int rc = clFlush(net->replica->queue);
  return rc ? clt_replica_fail(net->replica, e, rc, "clFlush") : CLT_OK;
}

/* --check-replicas across processes: a hash of the parameters each process's
 * members hold (params: its leader's; NULL: none of its replicas is in the
 * step), and each one's own verdict, so every process reaches the same one. */
static int check_across(pass *p, int s, const float *params, clt_err *e) {
  clt_trainer *t = p->t;
  uint64_t mine[3] = {1469598103934665603ull, (uint64_t)(p->mismatch_step >= 0), params != NULL};
  uint64_t all[3 * CLT_MAX_REPLICAS];
  const unsigned char *b = (const unsigned char *)params;
  for (size_t i = 0; params && i < t->model->flat_floats * sizeof(float); i++)
    mine[0] = (mine[0] ^ b[i]) * 1099511628211ull;
  int status = clt_cluster_allgather(t->cluster, mine, sizeof mine, all, e);
  int first = -1;
  for (int r = 0; r < clt_cluster_size(t->cluster) && !status; r++) {
    const uint64_t *x = all + (size_t)3 * r;
    if (x[2] && first < 0) first = r;
    const int differs = x[2] && x[0] != all[(size_t)3 * first];
    if ((differs || x[1]) && p->mismatch_step < 0) p->mismatch_step = s;
  }
  if (!status && p->mismatch_step >= 0) clt_cluster_known(t->cluster);
  return status;
}

/* --check-replicas: every member's parameters must equal the leader's bit for bit. */
static int check_identical(pass *p, int rank, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  const int s = st->s;
  const size_t floats = t->model->flat_floats;
  int status = clt_net_read_params(t->local[rank].net, t->check_params + rank * floats, e);
  if (!status) status = barrier(t, e);
  if (status) return status;
  if (rank == st->lead) {
    const unsigned long long members = members_of(p, s);
    const float *mine = t->check_params + (size_t)st->lead * floats;
    for (int r = 0; r < t->n; r++) {
      if ((members >> r) & 1 &&
          memcmp(mine, t->check_params + r * floats, floats * sizeof(float)) != 0 &&
          p->mismatch_step < 0) {
        p->mismatch_step = s;
      }
    }
  }
  if (rank == st->lead && clt_cluster_size(t->cluster) > 1) {
    status = check_across(p, s, t->check_params + (size_t)st->lead * floats, e);
    if (status) clt_ring_abort(t->ring);
  }
  if (status || (status = barrier(t, e))) return status;
  if (p->mismatch_step >= 0) {
    return clt_fail(e, CLT_ERR_NUMERIC,
                    "--check-replicas: replicas hold different parameters after step %d",
                    p->mismatch_step + 1);
  }
  return CLT_OK;
}

/* After the update: --check-replicas, and the end of start-up. */
static int check_step(pass *p, int rank, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  const int s = st->s;
  int status = t->check_replicas ? check_identical(p, rank, st, e) : CLT_OK;
  if (status || rank != st->lead) return status;
  if (t->step_time) t->step_time[s] = clt_now_seconds();
  if (t->trace && p->first_step + s + 1 - t->trace_first >= t->trace_steps)
    clt_trace_stop(t->trace);
  if (t->first_step_done != 0) return CLT_OK;
  /* Start-up ends when the first step has run (PoCL compiles kernels at their
   * first launch, so this includes that): one wait in the trainer's life. */
  if ((status = trainer_finish_queue(t->local[rank].replica, e))) return status;
  t->first_step_done = clt_now_seconds();
  clt_notice_done(t->first_step_notice);
  return CLT_OK;
}

/* The leader redraws the progress bar with the running loss and accuracy. */
static int show_progress(pass *p, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  /* Across processes the running figures would need a collective per draw: no bar. */
  if (!t->progress.out || clt_cluster_size(t->cluster) > 1 ||
      !clt_progress_due(&t->progress, st->s + 1, p->steps))
    return CLT_OK;
  const double elapsed = clt_now_seconds() - p->t0;
  /* Not the ranks out: their threads may be probing (their figures of the steps
   * they were in were read when they left). */
  int status = trainer_read_metrics(t, members_of(p, st->s), st->s + 1, e);
  if (!status)
    status = trainer_step_sums(t, p->skip, st->s + 1, t->leave ? t->members : NULL, t->train_sums,
                               e);
  if (status) return status;
  double mean_loss, example_loss, acc;
  trainer_sum_metrics(t, t->train_sums, st->s + 1, st->batch_first + st->batch, &mean_loss,
                      &example_loss, &acc);
  clt_progress_draw(&t->progress, st->s + 1, p->steps, elapsed, mean_loss, acc);
  return CLT_OK;
}

int trainer_end_pass(pass *p, int rank, int status, clt_err *e) {
  clt_replica *rep = p->t->local[rank].replica;
  trainer_close_bench(p);
  if (!status) status = trainer_finish_queue(rep, e);
  cl_command_queue transfer = p->t->local[rank].transfer;
  if (!status && transfer) {
    cl_int rc = clFinish(transfer);
    if (rc) status = clt_replica_fail(rep, e, rc, "clFinish (the transfer queue)");
  }
  clt_replica_trace_step(rep, 0);
  if (!status) status = clt_replica_profile_collect(rep, e);
  clt_replica_profile_kind(rep, 0);
  if (status) {
    clt_ring_abort(p->t->ring);
    clt_source_cancel(p->source);
  }
  return status;
}

/* The leader asks, before step s's all-reduce, whether to stop after this step: a
 * signal was received (in any process of an MPI run: one sum per step). The
 * all-reduce's barrier then shows every rank the answer. */
static int stop_vote(pass *p, int s, clt_err *e) {
  clt_interrupt_step(p->first_step + s + 1);
  clt_cluster_set_step(p->t->cluster, p->first_step + s + 1); /* named if a process is lost */
  int asked = clt_interrupt_signal() != 0;
  int status = clt_cluster_any(p->t->cluster, &asked, e);
  if (status) {
    clt_ring_abort(p->t->ring);
    return status;
  }
  if (asked && atomic_load(&p->stop_after) < 0) atomic_store(&p->stop_after, s);
  return CLT_OK;
}

/* Whether training steps overlap the all-reduce with the backward pass. */
static int overlapped(const pass *p) { return p->train && p->t->nbuckets > 0; }

/* A step's first part: its slice loaded, the forward and backward passes (with
 * ov, the buckets' all-reduce beside the backward pass). *t0: --trace's clock. */
static int step_forward(pass *p, int rank, const step *st, overlap *ov, double *t0, clt_err *e) {
  clt_replica *rep = p->t->local[rank].replica;
  if (p->train) rep->step = p->first_step + st->s + 1; /* for CLTRAIN_FAULT */
  int status = collect_profile(&p->ranks[rank], rep, e);
  /* --trace: the step's launches from here on carry its number. */
  clt_replica_trace_step(rep, p->train ? p->first_step + st->s + 1 : 0);
  if (!status) status = load_slice(p, rank, st, e);
  mark(p, rank, st->s, "load", t0);
  if (!status) status = forward_backward(p, rank, st, ov, e);
  /* Across processes, overlapped: the stop vote goes before the buckets, which
   * another thread then sums over MPI until the all-reduce's end. */
  if (!status && ov && rank == st->lead && clt_ring_overlapping(p->t->ring))
    status = stop_vote(p, st->s, e);
  if (!status && ov) status = hidden_buckets(p, rank, st, ov, e);
  mark(p, rank, st->s, "forward and backward", t0);
  return status;
}

/* Its second: the stop vote, the all-reduce (releasing ov's markers) and the
 * re-balance. */
static int step_reduce(pass *p, int rank, const step *st, overlap *ov, double *t0, clt_err *e) {
  const int voted = ov && clt_ring_overlapping(p->t->ring); /* in step_forward */
  int status = rank == st->lead && !voted ? stop_vote(p, st->s, e) : CLT_OK;
  if (!status) status = all_reduce(p, rank, st, ov, t0, e);
  release_marks(p->t, ov);
  mark(p, rank, st->s, "all-reduce", t0);
  if (!status && p->dynamic) status = rebalance(p, rank, st, e);
  if (p->dynamic) mark(p, rank, st->s, "re-balance", t0);
  return status;
}

/* Its last: the update, the checks, the progress bar and the members' change. */
static int step_update(pass *p, int rank, const step *st, double *t0, clt_err *e) {
  int status = update(p, rank, st->s, e);
  if (!status) status = check_step(p, rank, st, e);
  mark(p, rank, st->s, "update and checks", t0);
  if (!status && rank == st->lead) status = show_progress(p, st, e);
  if (!status && p->t->leave) status = trainer_change_members(p, rank, st->s, e);
  return status;
}

int trainer_hollow_step(pass *p, int s, clt_err *e) {
  clt_trainer *t = p->t;
  int status = CLT_OK;
  /* Every rank loads every step (load_slice): here the empty slices of all. */
  for (int r = 0; r < t->n && !status; r++) {
    status = clt_source_load(p->source, r, s - p->skip, 0, 0, t->local[r].net->input,
                             t->local[r].net->labels, NULL, e);
  }
  if (!status) status = stop_vote(p, s, e);
  if (!status) status = clt_ring_allreduce_absent(t->ring, e);
  if (!status) status = trainer_plan_next(p, s, e);
  if (!status && t->check_replicas) {
    status = check_across(p, s, NULL, e);
    if (!status && p->mismatch_step >= 0) {
      status = clt_fail(e, CLT_ERR_NUMERIC,
                        "--check-replicas: replicas hold different parameters after step %d",
                        p->mismatch_step + 1);
    }
  }
  if (status) return status;
  const double now = clt_now_seconds();
  if (t->step_time) t->step_time[s] = now;
  if (t->first_step_done == 0) {
    t->first_step_done = now;
    clt_notice_done(t->first_step_notice);
  }
  atomic_store(&p->done, s + 1);
  return trainer_hollow_change(p, s, e);
}

/* A member's step s; *stop: the pass stops after it. */
static int run_step(pass *p, int rank, int s, int *stop, clt_err *e) {
  const step st = slice_step(p, rank, s);
  double t0 = p->t->local[rank].replica->trace ? clt_now_seconds() : 0;
  overlap marks = {0};
  overlap *ov = overlapped(p) ? &marks : NULL;
  int status = step_forward(p, rank, &st, ov, &t0, e);
  if (status || !p->train) {
    release_marks(p->t, ov);
    return status;
  }
  status = step_reduce(p, rank, &st, ov, &t0, e);
  if (!status) status = step_update(p, rank, &st, &t0, e);
  *stop = atomic_load(&p->stop_after) == s;
  return status;
}

int trainer_step_part(pass *p, int rank, int s, trainer_part part, clt_err *e) {
  const step st = slice_step(p, rank, s);
  double t0 = p->t->local[rank].replica->trace ? clt_now_seconds() : 0;
  int stop = 0;
  switch (part) {
    case TRAINER_FORWARD:
      return step_forward(p, rank, &st, NULL, &t0, e);
    case TRAINER_REDUCE:
      return step_reduce(p, rank, &st, NULL, &t0, e);
    case TRAINER_UPDATE:
      return step_update(p, rank, &st, &t0, e);
    default:
      return run_step(p, rank, s, &stop, e);
  }
}

static int run_worker(pass *p, int rank, clt_err *e) {
  int status = CLT_OK, stop = 0;
  for (int s = p->skip; s < p->steps && !status && !stop;) {
    if (!is_member(p, rank, s)) {
      clt_replica_trace_step(p->t->local[rank].replica, 0); /* a speed probe is no step's */
      status = trainer_sit_out(p, rank, &s, e);
      continue;
    }
    status = run_step(p, rank, s, &stop, e);
    atomic_store(&p->done, ++s);
  }
  return trainer_end_pass(p, rank, status, e);
}

static void *worker(void *arg) {
  trainer_thread_arg *w = arg;
  w->p->ranks[w->rank].status = run_worker(w->p, w->rank, &w->p->ranks[w->rank].err);
  return NULL;
}

int trainer_begin_pass(pass *p, clt_err *e) {
  clt_trainer *t = p->t;
  const int global = clt_trainer_global_batch(t);
  const int last = p->count % global ? p->count % global : global;
  p->dynamic = p->train && t->total > 1 && t->balancer.mode == CLT_SPLIT_AUTO;
  int status = CLT_OK;
  if (p->dynamic) {
    const int left = p->count - p->skip * global; /* a resumed epoch starts at step skip */
    clt_balancer_split(&t->balancer, left < global ? left : global, p->next);
    status = share_slices(t, p->next, e);
  } else {
    /* Fixed for the pass; evaluation under auto uses the latest estimates (and
     * gives the replicas out of the step, which hold an old state, nothing). */
    clt_balancer_split(&t->balancer, global, p->full);
    clt_balancer_split(&t->balancer, last, p->tail);
    if (t->balancer.mode == CLT_SPLIT_AUTO) clt_balancer_split(&t->balancer, global, p->full);
    status = share_slices(t, p->full, e);
    if (!status) status = share_slices(t, p->tail, e);
  }
  if (status) return status;
  if (p->train && t->leave) {
    /* The members at the start: the balancer's, and the ring runs over them. */
    unsigned long long members = 0;
    for (int r = 0; r < t->n; r++)
      members |= (unsigned long long)clt_balancer_member(&t->balancer, t->base + r) << r;
    for (int s = p->skip; s < p->steps; s++) t->members[s] = members;
    /* None (under MPI): the ring waits for the first to rejoin. */
    if (members && (status = clt_ring_set_members(t->ring, members, e))) return status;
  }
  /* A pass over the caller's memory (p->host) has no source; else the one
   * given, or the trainer's training or test source. */
  if (!p->host && !p->source) p->source = t->source[p->train ? 0 : 1];
  if (!p->host && !p->source)
    return clt_fail(e, CLT_ERR_ARG, "no %s set", p->train ? "training" : "test");
  status = p->dynamic ? tell_share(p, p->skip, p->next, p->next, e)
                      : tell_share(p, p->skip, p->full, p->tail, e);
  if (status) return status;
  if (p->source &&
      (status = clt_source_begin_epoch(p->source, t->order, p->train ? p->epoch : -1, e)))
    return status;
  t->progress.last_draw = 0;
  p->t0 = clt_now_seconds();
  p->mismatch_step = -1;
  p->handed = -1;
  p->settled = p->skip;
  p->carry_at = -1;
  atomic_init(&p->done, p->skip);
  for (int r = 0; r < t->n; r++) {
    p->ranks[r].rejoin_at = -1;
    clt_replica *rep = t->local[r].replica;
    if (overlapped(p)) p->ranks[r].clock_offset = clock_offset(rep);
    clt_replica_profile_kind(rep, uncounted(p));
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  return CLT_OK;
}

int trainer_join_pass(pass *p, const pthread_t *threads, int started, clt_err *e) {
  return trainer_watch_pass(p, threads, started, NULL, NULL, e);
}

int trainer_watch_pass(pass *p, const pthread_t *threads, int started, clt_ring_wait_fn wait,
                       void *ctx, clt_err *e) {
  clt_trainer *t = p->t;
  /* Joined under the all-reduce's watchdog, which leaves a hung replica's thread
   * behind (watchdog.h); so one replica has a thread of its own too. */
  int status = wait ? clt_ring_watch(t->ring, threads, started, wait, ctx, e)
                    : clt_ring_join(t->ring, threads, started, e);
  if (status) return status; /* a thread may be left behind */
  int chosen = -1;
  for (int r = 0; r < t->n; r++) {
    if (!p->ranks[r].status) continue;
    if (chosen < 0 || (p->ranks[chosen].err.code == CLT_ERR_INTERNAL &&
                       p->ranks[r].err.code != CLT_ERR_INTERNAL)) {
      chosen = r;
    }
  }
  if (chosen < 0) return CLT_OK;
  *e = p->ranks[chosen].err;
  return p->ranks[chosen].status;
}

int trainer_start_threads(pass *p, void *(*fn)(void *), trainer_thread_arg *args,
                          pthread_t *threads, int *started) {
  clt_trainer *t = p->t;
  *started = 0;
  for (int r = 0; r < t->n; r++) {
    p->ranks[r].status = CLT_OK;
    if (pthread_create(&threads[r], NULL, fn, &args[r]) != 0) {
      clt_ring_abort(t->ring);
      trainer_close_bench(p);
      p->ranks[r].status = clt_fail(&p->ranks[r].err, CLT_ERR_NOMEM,
                                    "cannot start a host thread for replica %d", r);
      return p->ranks[r].status;
    }
    (*started)++;
  }
  return CLT_OK;
}

/* Runs a pass on every replica; on failure reports the first error that is not
 * merely another rank's abort. */
int trainer_run_pass(pass *p, clt_err *e) {
  clt_trainer *t = p->t;
  pthread_t threads[CLT_MAX_REPLICAS];
  trainer_thread_arg args[CLT_MAX_REPLICAS];
  int started = 0;
  int status = trainer_begin_pass(p, e);
  if (status) return status;
  for (int r = 0; r < t->n; r++) args[r] = (trainer_thread_arg){p, r, 0, TRAINER_STEP};
  /* Under MPI a process none of whose ranks is in a step still takes part in
   * its collectives: the stand-in does (leave.c). */
  pthread_t stand_in;
  int with_stand_in = 0;
  if (!trainer_start_threads(p, worker, args, threads, &started) && p->train && t->leave &&
      clt_cluster_size(t->cluster) > 1) {
    with_stand_in = pthread_create(&stand_in, NULL, trainer_stand_in, p) == 0;
    if (!with_stand_in) {
      clt_ring_abort(t->ring);
      trainer_close_bench(p);
      p->stand_in_status = clt_fail(&p->stand_in_err, CLT_ERR_NOMEM,
                                    "cannot start a host thread for the stand-in");
    }
  }
  status = trainer_join_pass(p, threads, started, e);
  int hung = 0;
  for (int r = 0; r < t->n; r++) hung |= t->local[r].replica->hung;
  /* The stand-in returns once the bench is closed and its step's collectives
   * are done; with a thread left behind, hung, it is left too. */
  if (with_stand_in && hung) pthread_detach(stand_in);
  else if (with_stand_in) pthread_join(stand_in, NULL);
  if (status) return status; /* a thread may be left behind: the bench stays */
  if (p->stand_in_status) {
    *e = p->stand_in_err;
    return p->stand_in_status;
  }
  /* A probe that ended after the last step's re-balance counts all the same. */
  if (p->train && t->leave && (status = trainer_end_leave(p, e))) return status;
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  return CLT_OK;
}
