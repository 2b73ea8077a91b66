/* The all-reduce's watchdog: a replica whose device hangs (a driver call that
 * never returns) must stop the run with an error naming it, not block it for
 * ever. The thread that started a pass's threads joins them here, looking at
 * the ring's state (what each rank waits for, and since when) between bounded
 * joins. */
#ifndef CLT_WATCHDOG_H
#define CLT_WATCHDOG_H

#include <pthread.h>

#include "ring.h"

/* Joins the threads of a pass, threads[i] driving rank i (ring NULL: plain
 * joins). Meanwhile it watches the ring: when a rank has waited longer than
 * the timeout for another (in the all-reduce or a barrier), or has been inside
 * the all-reduce that long without progress (one replica alone, stalled), the
 * rank held up on is declared hung. A thread blocked in a driver can be neither
 * joined nor cancelled, so it is left behind: the ring is aborted, the other
 * threads are given the timeout again to return (any that does not is hung
 * too), the hung ones are detached and their replicas marked hung, after which
 * clt_ring_destroy, clt_net_destroy and clt_backend_destroy_replica release nothing they
 * might still touch; the process is expected to end. Returns the error naming
 * the replica and its device ("all-reduce step 3: replica 1 (device 1, NAME)
 * did not arrive within 60 s; stopping"), or CLT_OK when every thread returned
 * (or a rank had already failed: its error is the run's, the threads that did
 * not stop after it are left behind all the same). */
int clt_ring_join(clt_ring *ring, const pthread_t *threads, int n, clt_err *e);

/* The same for threads that outlive their work (kept from step to step): wait
 * says when thread i's work is done, 0, or ETIMEDOUT after `seconds` (INFINITY:
 * no limit). A hung one is detached all the same; the others stay, idle. */
typedef int (*clt_ring_wait_fn)(void *ctx, const pthread_t *threads, int i, double seconds);
int clt_ring_watch(clt_ring *ring, const pthread_t *threads, int n, clt_ring_wait_fn wait,
                   void *ctx, clt_err *e);

#endif
