/* Leaving and rejoining the step (--split auto in one process; trainer.h): a
 * replica too slow to help is out of the step, its thread sitting on the pass's
 * bench between the members' steps, where it runs the speed probes a step's
 * leader asks of it; when a probe predicts a shorter step with it, it rejoins,
 * taking the state the first member staying hands over. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "timing.h"
#include "trainer_impl.h"

/* Feeds the probes that have ended to the balancer; their ranks may be asked again. */
void trainer_weigh_probes(pass *p) {
  clt_trainer *t = p->t;
  pthread_mutex_lock(&p->mu);
  for (int r = 0; r < t->n; r++) {
    speed_probe *q = &p->ranks[r].probe;
    if (q->state != PROBE_DONE) continue;
    clt_balancer_probed(&t->balancer, r, q->points, q->n, q->secs, q->took, q->end);
    q->state = PROBE_IDLE;
  }
  pthread_mutex_unlock(&p->mu);
}

/* The leader weighs the probes that have ended, then (before a full batch, no
 * stop asked) lets replicas leave or rejoin: returns the members of step s+1,
 * having asked those rejoining to wait for the state at the end of step s. */
unsigned long long trainer_regroup(pass *p, int s, int full) {
  clt_trainer *t = p->t;
  clt_balancer *b = &t->balancer;
  const double now = clt_now_seconds();
  unsigned long long members = t->members[s];
  trainer_weigh_probes(p);
  if (!full || atomic_load(&p->stop_after) >= 0 ||
      !clt_balancer_regroup(b, clt_trainer_global_batch(t), now))
    return members;
  unsigned long long next = 0;
  for (int r = 0; r < t->n; r++) next |= (unsigned long long)clt_balancer_member(b, r) << r;
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
    if ((members >> r) & 1 || q->state != PROBE_IDLE || !clt_balancer_probe_due(b, r, now))
      continue;
    if ((p->steps - s - 1) * step < clt_balancer_time(b, r, 1)) continue;
    q->state = PROBE_ASKED;
    q->more = probe_slice(t, r);
    q->limit = step;
    q->step = p->first_step + s + 1;
  }
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* The state a member holds after its update (parameters, BatchNormalization's
 * statistics among them, and the optimizer's slots): read into t->handoff
 * (take 0, a member handing it over) or written from it (take 1, a rank
 * rejoining, which then holds the members' bits). */
static int move_state(clt_trainer *t, int rank, int take, clt_err *e) {
  clt_net *net = t->local[rank].net;
  const size_t floats = t->model->flat_floats;
  cl_mem bufs[1 + CLT_OPT_SLOTS] = {net->params};
  for (int k = 0; k < CLT_OPT_SLOTS; k++) bufs[1 + k] = net->opt_state[k];
  for (int k = 0; k < 1 + CLT_OPT_SLOTS; k++) {
    /* The slots cover the trained parameters alone. */
    const size_t bytes = (k ? t->model->trainable_floats : floats) * sizeof(float);
    if (!bufs[k] || !bytes) continue;
    float *host = t->handoff + k * floats;
    cl_command_queue q = net->replica->queue;
    cl_int rc = take ? clEnqueueWriteBuffer(q, bufs[k], CL_TRUE, 0, bytes, host, 0, NULL, NULL)
                     : clEnqueueReadBuffer(q, bufs[k], CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    if (rc) {
      return clt_replica_fail(net->replica, e, rc,
                              take ? "writing the state to rejoin"
                                   : "reading the state for a replica rejoining");
    }
  }
  return CLT_OK;
}

/* The end of step s when the members change for step s+1: a rank leaving keeps
 * its figures of the pass on the host; the first rank staying hands the state to
 * those rejoining and re-forms the ring. The ring changes here, after the step's
 * last barrier and before any member reaches the next one (ring.h). */
int trainer_change_members(pass *p, int rank, int s, clt_err *e) {
  clt_trainer *t = p->t;
  if (s + 1 >= p->steps || t->members[s] == t->members[s + 1]) return CLT_OK;
  const unsigned long long now = t->members[s], next = t->members[s + 1];
  if (!((next >> rank) & 1)) return trainer_read_metrics(t, 1ull << rank, s + 1, e);
  if (rank != lowest(now & next)) return CLT_OK;
  int status = next & ~now ? move_state(t, rank, 0, e) : CLT_OK;
  if (!status) status = clt_ring_set_members(t->ring, next, e);
  if (status) return status;
  pthread_mutex_lock(&p->mu);
  p->handed = s;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return CLT_OK;
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
