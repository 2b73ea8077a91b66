/* Leaving and rejoining the step (--split auto; trainer.h): a replica too slow
 * to help is out of the step, its thread sitting on the pass's bench between
 * the members' steps, where it runs the speed probes a step's leader asks of
 * it; when a probe predicts a shorter step with it, it rejoins, taking the state
 * the first member staying hands over.
 *
 * Under MPI every process decides the same members: each step's leader gathers
 * every replica's figures from every process (trainer_take_figures) and feeds
 * its balancer the same ones. A process none of whose replicas is in a step
 * still takes part in its collectives: a stand-in thread runs its part
 * (trainer_hollow_step), adding negative zeros to the cross-process sum, and a
 * replica rejoining there gets the state from the process of the run's first
 * member (carry_state). */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "timing.h"
#include "trainer_impl.h"

/* Feeds this process's probes that have ended to the balancer; their ranks may
 * be asked again. */
static void weigh_probes(pass *p) {
  clt_trainer *t = p->t;
  pthread_mutex_lock(&p->mu);
  for (int r = 0; r < t->n; r++) {
    speed_probe *q = &p->ranks[r].probe;
    if (q->state != PROBE_DONE) continue;
    clt_balancer_probed(&t->balancer, t->base + r, q->points, q->n, q->secs, q->took, q->end);
    q->state = PROBE_IDLE;
  }
  pthread_mutex_unlock(&p->mu);
}

/* Under MPI: every process's figures (trainer_figures) to every process, fed to
 * the balancer in the run's replica order. A probe's end is its own process's
 * clock: only that process paces the probes of its replicas with it
 * (trainer_ask_probes), and the members do not depend on it. */
static int share_figures(pass *p, int with_compute, clt_err *e) {
  clt_trainer *t = p->t;
  trainer_figures mine[CLT_MAX_REPLICAS], all[CLT_MAX_REPLICAS];
  memset(mine, 0, sizeof mine);
  pthread_mutex_lock(&p->mu);
  for (int r = 0; r < t->n; r++) {
    speed_probe *q = &p->ranks[r].probe;
    trainer_figures *f = &mine[r];
    f->compute = p->compute[t->base + r];
    if (q->state != PROBE_DONE) continue;
    f->points = q->points;
    f->n[0] = q->n[0];
    f->n[1] = q->n[1];
    f->secs[0] = q->secs[0];
    f->secs[1] = q->secs[1];
    f->took = q->took;
    f->end = q->end;
    q->state = PROBE_IDLE;
  }
  pthread_mutex_unlock(&p->mu);
  int status = trainer_gather(t, mine, sizeof mine[0], all, e);
  for (int g = 0; g < t->total && !status; g++) {
    const trainer_figures *f = &all[g];
    if (with_compute) p->compute[g] = f->compute;
    if (f->points <= 0) continue;
    const int n[2] = {(int)f->n[0], (int)f->n[1]};
    clt_balancer_probed(&t->balancer, g, (int)f->points, n, f->secs, f->took, f->end);
  }
  return status;
}

int trainer_take_figures(pass *p, int with_compute, clt_err *e) {
  if (clt_cluster_size(p->t->cluster) > 1) return share_figures(p, with_compute, e);
  weigh_probes(p); /* the compute times are this process's already */
  return CLT_OK;
}

/* The run's members, a bit per replica of the run, as the balancer has them. */
static unsigned long long run_members(const clt_trainer *t) {
  unsigned long long m = 0;
  for (int g = 0; g < t->total; g++)
    m |= (unsigned long long)clt_balancer_member(&t->balancer, g) << g;
  return m;
}

/* The bits of process q's replicas in the run's. */
static unsigned long long process_bits(const clt_trainer *t, int q) {
  const int n = t->rank_n[q];
  return (n >= 64 ? ~0ull : (1ull << n) - 1) << t->rank_base[q];
}

/* The process holding replica g of the run. */
static int process_of(const clt_trainer *t, int g) {
  for (int q = 0; q < clt_cluster_size(t->cluster); q++) {
    if (g >= t->rank_base[q] && g < t->rank_base[q] + t->rank_n[q]) return q;
  }
  return 0;
}

/* Whether some process has no replica in `members` (bits of the run's). */
static int process_without(const clt_trainer *t, unsigned long long members) {
  for (int q = 0; q < clt_cluster_size(t->cluster); q++) {
    if (!(members & process_bits(t, q))) return 1;
  }
  return 0;
}

/* The leader (before a full batch, no stop asked) lets replicas leave or
 * rejoin: returns the local members of step s+1, having asked those rejoining
 * to wait for the state at the end of step s. Every process runs it on the same
 * figures and so decides the same. */
unsigned long long trainer_regroup(pass *p, int s, int full) {
  clt_trainer *t = p->t;
  clt_balancer *b = &t->balancer;
  const double now = clt_now_seconds();
  const unsigned long long members = t->members[s], before = run_members(t);
  if (!full || atomic_load(&p->stop_after) >= 0 ||
      !clt_balancer_regroup(b, clt_trainer_global_batch(t), now))
    return members;
  const unsigned long long after = run_members(t);
  const unsigned long long next = (after >> t->base) & all_ranks(t);
  const long first_out = p->first_step + s + 2; /* the optimizer step of step s+1 */
  pthread_mutex_lock(&p->mu);
  for (int r = 0; r < t->n; r++) {
    const unsigned long long bit = 1ull << r;
    pass_rank *pr = &p->ranks[r];
    if ((next & bit) && !(members & bit)) {
      pr->rejoin_at = s + 1;
      pr->joined++;
      pr->joined_step = first_out;
    } else if (!(next & bit) && (members & bit)) {
      pr->left++;
      pr->left_step = first_out;
    }
  }
  /* A replica rejoins in a process none of whose replicas was in step s: it
   * gets the state from the process of the run's first member. */
  for (int q = 0; q < clt_cluster_size(t->cluster); q++) {
    if ((before & process_bits(t, q)) || !(after & process_bits(t, q))) continue;
    p->carry_at = s;
    p->carry_from = process_of(t, lowest(before));
  }
  pthread_mutex_unlock(&p->mu);
  return next;
}

/* The leader asks the ranks out of step s+1 that are due to be re-timed for a
 * probe, when the pass has time left for one (the pass's end waits for it):
 * one example, and a slice of the members' size too when one example takes less
 * than the members' predicted step (else it cannot get even one). */
void trainer_ask_probes(pass *p, int s, unsigned long long members) {
  clt_trainer *t = p->t;
  clt_balancer *b = &t->balancer;
  const double now = clt_now_seconds(), step = clt_balancer_predict(b, p->next);
  pthread_mutex_lock(&p->mu);
  for (int r = 0; r < t->n; r++) {
    speed_probe *q = &p->ranks[r].probe;
    const int g = t->base + r;
    if ((members >> r) & 1 || q->state != PROBE_IDLE || !clt_balancer_probe_due(b, g, now))
      continue;
    if ((p->steps - s - 1) * step < clt_balancer_time(b, g, 1)) continue;
    q->state = PROBE_ASKED;
    q->more = probe_slice(t, r);
    q->limit = step;
    q->step = p->first_step + s + 1;
  }
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* Floats of the state's part k: the parameters (BatchNormalization's
 * statistics among them), then the optimizer's slots, which cover the trained
 * parameters alone (0: the optimizer has no such slot). */
static size_t state_floats(const clt_trainer *t, int k) {
  if (!k) return t->model->flat_floats;
  return t->local[0].net->opt_state[k - 1] ? t->model->trainable_floats : 0;
}

/* The state a member holds after its update: read into t->handoff (take 0, a
 * member handing it over) or written from it (take 1, a rank rejoining, which
 * then holds the members' bits). */
static int move_state(clt_trainer *t, int rank, int take, clt_err *e) {
  clt_net *net = t->local[rank].net;
  const size_t floats = t->model->flat_floats;
  for (int k = 0; k < 1 + CLT_OPT_SLOTS; k++) {
    const size_t bytes = state_floats(t, k) * sizeof(float);
    if (!bytes) continue;
    cl_mem buf = k ? net->opt_state[k - 1] : net->params;
    float *host = t->handoff + k * floats;
    cl_command_queue q = net->replica->queue;
    cl_int rc = take ? clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL)
                     : clEnqueueReadBuffer(q, buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    if (rc) {
      return clt_replica_fail(net->replica, e, rc,
                              take ? "writing the state to rejoin"
                                   : "reading the state for a replica rejoining");
    }
  }
  return CLT_OK;
}

/* Every process's part in handing the state to a process with no member (one
 * of its replicas rejoins, or the pass has ended): a sum over the processes into
 * t->handoff, to which process p->carry_from adds the state (rank: its replica
 * holding it) and the others negative zeros, which leave every value as it is
 * (-0 and NaN included). */
static int carry_state(pass *p, int rank, clt_err *e) {
  clt_trainer *t = p->t;
  const int from = clt_cluster_rank(t->cluster) == p->carry_from;
  int status = from ? move_state(t, rank, 0, e) : CLT_OK;
  for (int k = 0; k < 1 + CLT_OPT_SLOTS && !status; k++) {
    const size_t n = state_floats(t, k);
    float *h = t->handoff + k * t->model->flat_floats;
    for (size_t i = 0; !from && i < n; i++) h[i] = -0.0f;
    if (n) status = clt_cluster_sum(t->cluster, h, n, e);
  }
  return status;
}

/* This process has taken its part in the collectives of the steps before `s`. */
static void settle(pass *p, int s) {
  pthread_mutex_lock(&p->mu);
  p->settled = s;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* The ring re-formed over `next`, and those rejoining told that the state after
 * step s is in t->handoff. */
static int hand_over(pass *p, int s, unsigned long long next, clt_err *e) {
  int status = clt_ring_set_members(p->t->ring, next, e);
  if (status) return status;
  pthread_mutex_lock(&p->mu);
  p->handed = s;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return CLT_OK;
}

/* The end of step s: the step's leader takes this process's part in handing
 * the state to another process, if one needs it. When the members change for
 * step s+1, a rank leaving keeps its figures of the pass on the host; the first
 * rank staying hands the state to those rejoining and re-forms the ring (when
 * every rank leaves, the ring waits for the next to rejoin). The ring changes
 * here, after the step's last barrier and before any member reaches the next
 * one (ring.h). */
int trainer_change_members(pass *p, int rank, int s, clt_err *e) {
  clt_trainer *t = p->t;
  const unsigned long long now = t->members[s];
  const unsigned long long next = s + 1 < p->steps ? t->members[s + 1] : now;
  const int lead = rank == lowest(now);
  int status = lead && p->carry_at == s ? carry_state(p, rank, e) : CLT_OK;
  if (!status && now != next) {
    if (!((next >> rank) & 1)) {
      status = trainer_read_metrics(t, 1ull << rank, s + 1, e);
    } else if (rank == lowest(now & next)) {
      if (next & ~now) status = move_state(t, rank, 0, e);
      if (!status) status = hand_over(p, s, next, e);
    }
  }
  if (lead) settle(p, s + 1);
  return status;
}

int trainer_hollow_change(pass *p, int s, clt_err *e) {
  clt_trainer *t = p->t;
  int status = p->carry_at == s ? carry_state(p, -1, e) : CLT_OK;
  const unsigned long long next = s + 1 < p->steps ? t->members[s + 1] : 0;
  if (!status && next) status = hand_over(p, s, next, e);
  settle(p, s + 1);
  return status;
}

/* A rank out of the step re-times its device as the leader asked, between the
 * members' steps. */
static int run_probe(pass *p, int rank, clt_err *e) {
  clt_trainer *t = p->t;
  clt_replica *rep = t->local[rank].replica;
  pass_rank *me = &p->ranks[rank];
  speed_probe *q = &me->probe;
  const double t0 = clt_now_seconds();
  int points = 1, n[2] = {1, q->more};
  double secs[2] = {0, 0};
  clt_ring_outside(t->ring, rank, "a speed probe");
  clt_replica_scope(rep, "speed probe", "out of the step");
  int status = trainer_time_examples(t, rank, 1, p->opt, q->step, &secs[0], e);
  if (!status && n[1] > 1 && secs[0] < q->limit) {
    status = trainer_time_examples(t, rank, n[1], p->opt, q->step, &secs[1], e);
    points = 2;
  }
  if (!status) status = clt_replica_profile_collect(rep, e);
  clt_ring_outside(t->ring, rank, NULL);
  const double t1 = clt_now_seconds();
  if (rep->trace && q->step - t->trace_first <= t->trace_steps)
    clt_replica_trace_span(rep, CLT_TRACE_HOST, "speed probe (out of the step)", t0, t1,
                           (int)q->step);
  pthread_mutex_lock(&p->mu);
  q->state = PROBE_DONE;
  q->points = points;
  memcpy(q->n, n, sizeof n);
  memcpy(q->secs, secs, sizeof secs);
  q->took = t1 - t0;
  q->end = t1;
  me->probes++;
  me->probe_seconds += t1 - t0;
  pthread_mutex_unlock(&p->mu);
  return status;
}

/* Rank is out of step *s: it waits here for a probe to run, for its re-admission
 * (then *s is the step it rejoins at, its state received), or for the pass to end
 * (*s = p->steps). */
int trainer_sit_out(pass *p, int rank, int *s, clt_err *e) {
  clt_trainer *t = p->t;
  pass_rank *me = &p->ranks[rank];
  int status = CLT_OK;
  pthread_mutex_lock(&p->mu);
  while (!p->over && !status) {
    if (me->probe.state == PROBE_ASKED) {
      me->probe.state = PROBE_RUNNING;
      pthread_mutex_unlock(&p->mu);
      status = run_probe(p, rank, e);
      pthread_mutex_lock(&p->mu);
    } else if (me->rejoin_at >= 0 && p->handed == me->rejoin_at - 1) {
      const int at = me->rejoin_at;
      me->rejoin_at = -1;
      pthread_mutex_unlock(&p->mu);
      clt_ring_outside(t->ring, rank, "taking the state to rejoin");
      status = move_state(t, rank, 1, e);
      clt_ring_outside(t->ring, rank, NULL);
      *s = at;
      return status;
    } else {
      pthread_cond_wait(&p->cv, &p->mu);
    }
  }
  pthread_mutex_unlock(&p->mu);
  *s = p->steps;
  return status;
}

/* Ends the bench: ranks out of the step return once their probe is done. */
void trainer_close_bench(pass *p) {
  pthread_mutex_lock(&p->mu);
  p->over = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

void *trainer_stand_in(void *arg) {
  pass *p = arg;
  const clt_trainer *t = p->t;
  int status = CLT_OK, ended = 0;
  pthread_mutex_lock(&p->mu);
  while (!p->over && !status && !ended) {
    const int s = p->settled;
    if (s >= p->steps || t->members[s]) {
      pthread_cond_wait(&p->cv, &p->mu);
      continue;
    }
    pthread_mutex_unlock(&p->mu);
    status = trainer_hollow_step(p, s, &p->stand_in_err);
    ended = s + 1 >= p->steps || atomic_load(&p->stop_after) == s;
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  if (status) {
    clt_ring_abort(t->ring);
    clt_source_cancel(p->source);
  }
  p->stand_in_status = status;
  /* The pass ended in a step none of this process's ranks was in, or failed:
   * the ranks out of it return. */
  if (ended || status) trainer_close_bench(p);
  return NULL;
}

int trainer_end_leave(pass *p, clt_err *e) {
  clt_trainer *t = p->t;
  int status = trainer_take_figures(p, 0, e);
  const unsigned long long run = run_members(t);
  if (status || clt_cluster_size(t->cluster) == 1 || !process_without(t, run)) return status;
  const unsigned long long mine = (run >> t->base) & all_ranks(t);
  p->carry_from = process_of(t, lowest(run));
  status = carry_state(p, mine ? lowest(mine) : -1, e);
  if (!status && !mine) status = move_state(t, 0, 1, e);
  return status;
}
