#define _GNU_SOURCE /* pthread_timedjoin_np: bounded joins */
#include "watchdog.h"

#include <errno.h>
#include <math.h>
#include <time.h>

#include "ring_impl.h"
#include "timing.h"

/* Under mu: whether rank x is blocked in one of the ring's waits. */
static int blocked(const clt_ring *r, int x) {
  const rank_wait *w = &r->waits[x];
  return w->on == WAIT_PROCESSES || (w->on >= 0 && *w->counter < w->target);
}

/* Under mu: whether rank x (thread threads[x]) waits in the barrier. */
static int at_barrier(const clt_ring *r, const pthread_t *threads, int nthreads, int x) {
  for (int k = 0; k < r->barrier_count && x < nthreads; k++) {
    if (pthread_equal(r->barrier_threads[k], threads[x])) return 1;
  }
  return 0;
}

/* Under mu: the rank that rank x waits for, directly or through others: the
 * first along the chain not blocked in the ring itself (WAIT_PROCESSES: the
 * chain ends in another process). */
static int culprit(const clt_ring *r, const pthread_t *threads, int nthreads, int x) {
  for (int hops = 0; hops <= r->n; hops++) {
    int next = WAIT_NONE;
    if (blocked(r, x)) {
      next = r->waits[x].on;
    } else if (at_barrier(r, threads, nthreads, x)) {
      /* Ranks out of the step are at no barrier, and hold up none. */
      for (int y = 0; y < r->n && next == WAIT_NONE; y++) {
        if ((r->members >> y) & 1 && !at_barrier(r, threads, nthreads, y)) next = y;
      }
    }
    if (next == WAIT_NONE || next == WAIT_PROCESSES) return next == WAIT_NONE ? x : next;
    x = next;
  }
  return x; /* a cycle (a bug): the last one looked at */
}

/* Under mu: the rank that a wait of `waited` seconds from rank x is overdue on,
 * or WAIT_NONE. A wait on the other processes is theirs to time out: the
 * cluster's calls are bounded and name the process that stopped answering
 * (cluster.h); the ring's timeout then only backs that up. */
static int overdue_on(const clt_ring *r, const pthread_t *threads, int nthreads, int x,
                      double waited) {
  if (waited <= r->timeout) return WAIT_NONE;
  const int who = culprit(r, threads, nthreads, x);
  const double bound = clt_cluster_bound(r->cluster);
  return who == WAIT_PROCESSES && bound > 0 && waited <= r->timeout + bound ? WAIT_NONE : who;
}

/* Under mu: a rank held up on for longer than the timeout, or WAIT_NONE. */
static int overdue(const clt_ring *r, const pthread_t *threads, int nthreads, double now) {
  for (int x = 0; x < r->n; x++) {
    const int who = blocked(r, x) ? overdue_on(r, threads, nthreads, x, now - r->waits[x].since)
                                  : WAIT_NONE;
    if (who != WAIT_NONE) return who;
  }
  for (int x = 0; x < nthreads && r->barrier_count > 0; x++) {
    const int who = at_barrier(r, threads, nthreads, x)
                        ? overdue_on(r, threads, nthreads, x, now - r->barrier_since)
                        : WAIT_NONE;
    if (who != WAIT_NONE) return who;
  }
  /* Inside the all-reduce and not waiting, yet no progress: stuck in it. */
  for (int x = 0; x < r->n; x++) {
    if (r->entered[x] > 0 && !blocked(r, x) && now - r->progress[x] > r->timeout) return x;
  }
  /* Busy outside the ring (a speed probe) for longer than the timeout. */
  for (int x = 0; x < r->n; x++) {
    if (r->outside[x] > 0 && now - r->outside[x] > r->timeout) return x;
  }
  return WAIT_NONE;
}

/* The error for culprit `who` (under mu). */
static int hang_error(const clt_ring *r, int who, clt_err *e) {
  if (who == WAIT_PROCESSES) {
    return clt_fail(e, CLT_ERR_PEER,
                    "all-reduce step %ld: the other processes did not answer within %g s; "
                    "stopping",
                    (long)r->replicas[0]->step, r->timeout);
  }
  const clt_replica *rep = r->replicas[who];
  if (r->outside[who] > 0) {
    return clt_fail(e, CLT_ERR_DEVICE,
                    "replica %d (device %d, %s): %s did not end within %g s; stopping", rep->index,
                    rep->device.index, rep->device.name, r->outside_what[who], r->timeout);
  }
  return clt_fail(e, CLT_ERR_DEVICE,
                  "all-reduce step %ld: replica %d (device %d, %s) %s %g s; stopping",
                  (long)rep->step, rep->index, rep->device.index, rep->device.name,
                  r->entered[who] > 0 ? "made no progress in it for" : "did not arrive within",
                  r->timeout);
}

/* pthread_join, giving up (ETIMEDOUT) after `seconds`. */
static int join_within(pthread_t t, double seconds) {
  struct timespec at;
  clock_gettime(CLOCK_REALTIME, &at); /* the clock pthread_timedjoin_np reads */
  const long long ns = at.tv_nsec + (long long)((seconds > 0 ? seconds : 0) * 1e9);
  at.tv_sec += (time_t)(ns / 1000000000);
  at.tv_nsec = (long)(ns % 1000000000);
  const int rc = pthread_timedjoin_np(t, NULL, &at);
  return rc == ETIMEDOUT ? ETIMEDOUT : 0; /* another error: nothing left to join */
}

static int join_thread(void *ctx, const pthread_t *threads, int i, double seconds) {
  (void)ctx;
  if (isinf(seconds)) return pthread_join(threads[i], NULL), 0;
  return join_within(threads[i], seconds);
}

int clt_ring_join(clt_ring *r, const pthread_t *threads, int n, clt_err *e) {
  return clt_ring_watch(r, threads, n, join_thread, NULL, e);
}

int clt_ring_watch(clt_ring *r, const pthread_t *threads, int n, clt_ring_wait_fn wait, void *ctx,
                   clt_err *e) {
  if (!r || !(r->timeout > 0)) {
    for (int i = 0; i < n; i++) wait(ctx, threads, i, INFINITY);
    return CLT_OK;
  }
  /* Looks a twentieth of the timeout apart: a hang is seen within 5% of it. */
  double slice = r->timeout / 20;
  slice = slice < 0.01 ? 0.01 : slice > 1 ? 1 : slice;
  int who = WAIT_NONE, status = CLT_OK;
  for (int i = 0; i < n; i++) r->joined[i] = 0;
  for (int i = 0; i < n && who == WAIT_NONE; i++) {
    while (who == WAIT_NONE && wait(ctx, threads, i, slice) == ETIMEDOUT) {
      pthread_mutex_lock(&r->mu);
      const double now = clt_now_seconds();
      if (!r->aborted && (who = overdue(r, threads, n, now)) != WAIT_NONE) {
        status = hang_error(r, who, e);
        ring_abort_locked(r);
      } else if (r->aborted && now - r->aborted_at > r->timeout) {
        who = i; /* did not stop after another rank's failure: that error stands */
      }
      pthread_mutex_unlock(&r->mu);
    }
    r->joined[i] = who == WAIT_NONE;
  }
  if (who == WAIT_NONE) return CLT_OK;
  /* The others get the timeout again to see the abort and return; rank 0 in a
   * call of the MPI library that others do not answer cannot. */
  const int stuck = who == WAIT_PROCESSES ? 0 : who;
  const double deadline = clt_now_seconds() + r->timeout;
  for (int i = 0; i < n; i++) {
    if (r->joined[i]) continue;
    if (i != stuck && wait(ctx, threads, i, deadline - clt_now_seconds()) == 0) continue;
    pthread_detach(threads[i]);
    r->replicas[i]->hung = 1;
    r->hung = 1;
  }
  return status;
}
