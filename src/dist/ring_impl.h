/* The ring's insides, shared by ring.c (the all-reduce) and watchdog.c (which
 * reads the ring's state to find a replica that holds up the others). */
#ifndef CLT_RING_IMPL_H
#define CLT_RING_IMPL_H

#include <pthread.h>

#include "ring.h"

enum { WAIT_NONE = -1, WAIT_PROCESSES = -2 };

/* What a rank is blocked on, for the watchdog (clt_ring_join). */
typedef struct rank_wait {
  int on;              /* the rank it waits for, WAIT_PROCESSES (MPI) or WAIT_NONE */
  const long *counter; /* a rank: blocked while *counter < target */
  long target;
  double since; /* clt_now_seconds() when the wait began */
} rank_wait;

struct clt_ring {
  int n;
  /* chunk_max: the largest chunk staging holds (the fewest ranks that exchange);
   * nseg: the most segments a chunk has. */
  size_t floats, chunk_max, segment, nseg;
  int subsets;                /* clt_ring_create_subsets: members may be any subset */
  unsigned long long members; /* bit per rank taking part (clt_ring_set_members) */
  int nmembers;
  clt_replica **replicas;
  cl_mem *pinned;     /* per rank: 2 * chunk_max floats of host memory, its own context */
  float **staging;    /* their mapped addresses: what rank i sends, double-buffered by step */
  cl_mem *recv;       /* per rank: device buffer receiving a chunk before the add */
  cl_event *read_ev;  /* per rank, per segment */
  cl_event *write_ev; /* per rank, per segment */
  /* Progress counters, in units of (call, step, segment): produced[i] = units rank i
   * has staged; consumed[i] = units of rank i's staging its successor has uploaded;
   * next_base[i]: the first unit of rank i's next collective (the same for every
   * member of a call, aligned when the members change). A call has as many
   * segments per step as its longest chunk needs (ranges differ): last_nseg[i]
   * is rank i's previous call's, which its first two steps' staging follows. */
  long *produced, *consumed, *next_base, *last_nseg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int aborted;
  int barrier_count;
  long barrier_generation;
  /* The watchdog's view, under mu (clt_ring_join): */
  double timeout;             /* seconds; 0: none */
  double aborted_at;          /* when the ring was aborted */
  rank_wait *waits;           /* per rank */
  double *entered;            /* per rank: when it entered the all-reduce it is in, or 0 */
  double *progress;           /* per rank: when it last got past a wait in it */
  double *outside;            /* per rank: when its work outside the ring began, or 0 */
  const char **outside_what;  /* ... and what it is (clt_ring_outside) */
  pthread_t *barrier_threads; /* the barrier_count threads waiting in the barrier */
  double barrier_since;       /* when the first of them arrived */
  int *joined;                /* per rank: clt_ring_join's */
  int hung;                   /* a replica was left hung: nothing is released */
  /* Across processes (clt_ring_span): */
  clt_cluster *cluster;
  cl_mem host_mem;      /* floats of host memory in replica 0's context */
  float *host;          /* mapped: the host sum, then the total */
  long cross_calls;     /* collectives whose total is in host */
  long *cross_uploaded; /* per rank: totals it has uploaded */
  double cross_seconds;
  clt_wire wire;
  /* ... overlapped (clt_ring_overlap): a thread of its own sums the ranges the
   * lowest member hands it (jobs, numbered from k * step_jobs in a member's k-th
   * collective; the ranges of job j at j % CLT_RING_MAX_JOBS) as it gets them. */
  int overlap;   /* the thread runs */
  int step_jobs; /* the ranges a collective hands it ... */
  size_t range_lo[CLT_RING_MAX_JOBS], range_hi[CLT_RING_MAX_JOBS]; /* ... in this order */
  pthread_t comm;                                                  /* ... this one */
  int comm_quit;                                                   /* it is to end */
  size_t *job_lo, *job_hi;                                         /* the jobs' floats [lo, hi) */
  long posted, summed;     /* jobs handed to the thread; of those, summed (the totals in host) */
  double *job_t0, *job_t1; /* when the thread summed them (clt_now_seconds) */
  double cross_hidden;     /* of cross_seconds, before the backward pass ended */
  long *taken;             /* per rank: jobs whose totals it has enqueued into its buffer */
  long *step_first;        /* per rank: the first job of its current step */
  int hurry;               /* the ranks wait for the thread: it polls without napping */
  int comm_status;         /* the thread's failure, and its message */
  clt_err comm_err;
};

/* Under mu: marks the ring aborted and wakes every rank waiting in it. */
void ring_abort_locked(clt_ring *r);

#endif
