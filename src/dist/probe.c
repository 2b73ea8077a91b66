/* Timing the devices: the set-up probe that times every replica before the first
 * step (--split auto), the timing a speed probe runs (also for replicas out of
 * the step, leave.c), and the CLTRAIN_TEST_SLOW test knob that slows one replica. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"
#include "trainer_impl.h"

/* CLTRAIN_TEST_SLOW="replica=R,from=S,to=T,ms=M" (trainer.h); unset: none. */
int trainer_parse_slow(clt_trainer *t, clt_err *e) {
  t->slow_replica = -1;
  const char *v = getenv("CLTRAIN_TEST_SLOW");
  if (!v || !*v) return CLT_OK;
  long replica = -1, from = -1, to = -1;
  double ms = -1;
  const char *q = v;
  while (*q) {
    char key[16];
    double value;
    int used = 0;
    if (sscanf(q, "%15[a-z]=%lf%n", key, &value, &used) != 2) break;
    if (strcmp(key, "replica") == 0) replica = (long)value;
    else if (strcmp(key, "from") == 0) from = (long)value;
    else if (strcmp(key, "to") == 0) to = (long)value;
    else if (strcmp(key, "ms") == 0) ms = value;
    else break;
    q += used;
    if (*q == ',') q++;
    else if (*q) break;
  }
  if (*q || replica < 0 || from < 0 || to < from || !(ms >= 0)) {
    return clt_fail(e, CLT_ERR_ARG, "CLTRAIN_TEST_SLOW=%s: expected replica=R,from=S,to=T,ms=M", v);
  }
  t->slow_replica = (int)replica;
  t->slow_from = from;
  t->slow_to = to;
  t->slow_seconds = ms / 1000;
  return CLT_OK;
}

/* The test knob's delay, if it applies to global replica g at optimizer step
 * `step`; returns the seconds it took (0: none). */
double trainer_slow_down(const clt_trainer *t, int g, long step) {
  if (g != t->slow_replica || step < t->slow_from || step > t->slow_to) return 0;
  const double s = t->slow_seconds, t0 = clt_now_seconds();
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
  return clt_now_seconds() - t0;
}

/* Times forward, backward and update of n examples on local replica `rank`, on
 * whatever its input holds (an old batch, or zeros): only its speed matters, and
 * the state it changes is replaced before the replica next trains. `step`: the
 * optimizer step, for the test knob. */
int trainer_time_examples(clt_trainer *t, int rank, int n, const clt_optimizer *opt, long step,
                          double *seconds, clt_err *e) {
  clt_net *net = t->local[rank].net;
  const double t0 = clt_now_seconds();
  clt_net_set_position(net, 0, 0, 0);
  int status = clt_net_forward_backward(net, n, 1.0f / (float)n, t->slots, 1, e);
  if (!status) status = clt_net_update(net, opt, 1, e);
  if (!status) status = trainer_finish_queue(net->replica, e);
  if (!status) trainer_slow_down(t, t->base + rank, step);
  *seconds = clt_now_seconds() - t0;
  return status;
}

/* ---- timing the devices before the first step --------------------------------- */

typedef struct probe_job {
  clt_trainer *t;
  int rank;
  int points, n[2];
  double seconds[2];
  int status;
  clt_err err;
} probe_job;

/* A set-up probe takes a second timing on a full slice when that is predicted
 * to take at most this long. */
#define SETUP_PROBE_BUDGET 1.0

/* One replica's set-up probe: a warm-up run of one example (drivers such as PoCL
 * compile a kernel at its first launch), then one example timed, then (when
 * cheap) a warm-up and a timing of a full slice. Adam's update: the costliest. */
static void *setup_probe_thread(void *arg) {
  probe_job *j = arg;
  clt_trainer *t = j->t;
  const clt_optimizer adam = clt_optimizer_defaults(CLT_OPT_ADAM);
  double ignored;
  const int more = probe_slice(t, j->rank);
  clt_replica *rep = t->local[j->rank].replica;
  clt_replica_scope(rep, "speed probe", "set-up");
  j->status = trainer_time_examples(t, j->rank, 1, &adam, 0, &ignored, &j->err);
  if (!j->status)
    j->status = trainer_time_examples(t, j->rank, 1, &adam, 0, &j->seconds[0], &j->err);
  j->n[0] = 1;
  j->points = 1;
  if (!j->status && more > 1 && j->seconds[0] * more <= SETUP_PROBE_BUDGET) {
    j->status = trainer_time_examples(t, j->rank, more, &adam, 0, &ignored, &j->err);
    if (!j->status)
      j->status = trainer_time_examples(t, j->rank, more, &adam, 0, &j->seconds[1], &j->err);
    j->n[1] = more;
    j->points = 2;
  }
  if (!j->status) j->status = clt_replica_profile_collect(rep, &j->err);
  return NULL;
}

/* Times every replica (all at once, as they train) before the first step, so
 * --split auto starts from their speeds instead of equal slices, and a replica
 * too slow to help is out of the step from the first one. The state the probes
 * change is set afterwards (clt_trainer_set_state). Collective under MPI. */
int trainer_setup_probe(clt_trainer *t, clt_err *e) {
  const double t0 = clt_now_seconds();
  probe_job jobs[CLT_MAX_REPLICAS];
  pthread_t threads[CLT_MAX_REPLICAS];
  int started = 0, status = CLT_OK;
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < t->n; r++) {
    jobs[r].t = t;
    jobs[r].rank = r;
    if (pthread_create(&threads[r], NULL, setup_probe_thread, &jobs[r]) != 0) {
      status = clt_fail(e, CLT_ERR_NOMEM, "cannot start a host thread for replica %d", r);
      break;
    }
    started++;
  }
  for (int r = 0; r < started; r++) pthread_join(threads[r], NULL);
  for (int r = 0; r < started && !status; r++) {
    if (jobs[r].status) {
      *e = jobs[r].err;
      status = jobs[r].status;
    }
  }
  if ((status = clt_cluster_agree(t->cluster, status, e))) return status;
  /* Every process feeds the same timings to its balancer. */
  double mine[5 * CLT_MAX_REPLICAS] = {0}, all[5 * CLT_MAX_REPLICAS] = {0};
  for (int r = 0; r < t->n; r++) {
    const double x[5] = {jobs[r].points, jobs[r].n[0], jobs[r].n[1], jobs[r].seconds[0],
                         jobs[r].seconds[1]};
    memcpy(mine + (size_t)5 * (t->base + r), x, sizeof x);
  }
  if ((status = clt_cluster_sum_doubles(t->cluster, mine, (size_t)5 * t->total, e))) return status;
  memcpy(all, mine, sizeof all);
  const double now = clt_now_seconds();
  for (int g = 0; g < t->total; g++) {
    const double *x = all + (size_t)5 * g;
    const int n[2] = {(int)x[1], (int)x[2]};
    clt_balancer_probed(&t->balancer, g, (int)x[0], n, x + 3, 0, now);
  }
  if (t->leave) clt_balancer_regroup(&t->balancer, clt_trainer_global_batch(t), now);
  t->probe_seconds = clt_now_seconds() - t0;
  return CLT_OK;
}
