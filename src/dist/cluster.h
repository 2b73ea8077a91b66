/* The processes of one run: several hosts (or several processes on one host)
 * started by `mpirun`, each driving its own devices, or just this process.
 *
 * Under mpirun (recognised by the launcher's environment) the cluster is MPI's
 * world; otherwise, and in a build without MPI, it is a cluster of one and every
 * call below is a copy or nothing. A build without MPI refuses to run as one of
 * several processes rather than train N unrelated models.
 *
 * Failures: set-up ends in clt_cluster_agree, which tells every process whether
 * any failed and why, so all stop cleanly with the failing rank named. A failure
 * the others cannot hear of (a device error mid-step, while they wait in a
 * collective) ends the run with clt_cluster_leave(c, failed), which aborts every
 * process (MPI_Abort) instead of leaving them waiting.
 *
 * A process that stops answering (a paused or frozen process, a cut link): no
 * call below waits longer than the cluster's timeout. Its last part is a short
 * liveness round in which the processes still running ask each other who
 * answers (every process waiting in a call here answers), so each of them names
 * the same lost ranks: "step 37: rank 1 (host h2, 10.0.0.2) stopped answering
 * within 20 s; stopping". From then on every call fails at once with that
 * error, and leaving neither aborts nor finalises (either would wait for the
 * lost process): the process just ends. */
#ifndef CLT_CLUSTER_H
#define CLT_CLUSTER_H

#include <stddef.h>

#include "status.h"

typedef struct clt_cluster clt_cluster;

/* Joins the run this process was started in. */
int clt_cluster_join(clt_cluster **out, clt_err *e);
/* Leaves it: failed and not agreed by clt_cluster_agree aborts every process;
 * otherwise finalises. NULL is fine. */
void clt_cluster_leave(clt_cluster *c, int failed);

/* The longest a call waits for the others, in seconds (0: for ever); the
 * default is CLT_CLUSTER_DEFAULT_TIMEOUT, the ring's (ring.h): long enough for a
 * first step's compilation. */
#define CLT_CLUSTER_DEFAULT_TIMEOUT 300.0
void clt_cluster_set_timeout(clt_cluster *c, double seconds);
/* How long a call may wait for processes that stopped answering before it
 * fails (0: for ever). */
double clt_cluster_bound(const clt_cluster *c);
/* The optimizer step under way, which a lost process's message names. */
void clt_cluster_set_step(clt_cluster *c, long step);
/* 1 once a process stopped answering (every call fails from then on). */
int clt_cluster_lost(const clt_cluster *c);

/* 1 when this build can run under mpirun. */
int clt_cluster_built_with_mpi(void);

int clt_cluster_rank(const clt_cluster *c); /* 0 for NULL */
int clt_cluster_size(const clt_cluster *c); /* 1 for NULL */
const char *clt_cluster_host(const clt_cluster *c);
/* A word for the user on how the launcher placed this process (mpirun pinned it
 * to fewer cores than its share of the host), or "". */
const char *clt_cluster_note(const clt_cluster *c);

/* Every process contributes `bytes` bytes; all[r * bytes ...] gets rank r's. */
int clt_cluster_allgather(clt_cluster *c, const void *mine, size_t bytes, void *all, clt_err *e);
/* *flag becomes 1 in every process if it is non-zero in any (no allocation: it
 * runs every step). */
int clt_cluster_any(clt_cluster *c, int *flag, clt_err *e);
/* Rank 0's `bytes` bytes at buf go to every process. */
int clt_cluster_bcast(clt_cluster *c, void *buf, size_t bytes, clt_err *e);

/* Every process passes its status (and e with its message when failing); all
 * return CLT_OK if all succeeded, else fail: a failing process keeps its own
 * error, the others get CLT_ERR_PEER naming the first failing rank and its
 * message. Marks the failure as known to all, so leaving does not abort. */
int clt_cluster_agree(clt_cluster *c, int status, clt_err *e);

#if defined(__clang_analyzer__) && !defined(CLT_CLUSTER_IMPL)
/* For clang-tidy's analyzer, which does not see cluster.c: a failing status comes
 * back as it went in (as status.h tells it of clt_fail). */
#define clt_cluster_agree(c, status, e) \
  ((status) ? (status) : clt_cluster_agree((c), (status), (e)))
#endif

/* Declares the current failure one that every process found by itself (the same
 * figures everywhere), so leaving does not abort. */
void clt_cluster_known(clt_cluster *c);

/* How gradients cross between processes (--wire): as floats, or as halves
 * (Horovod's fp16 compression: each process's floats are rounded to half
 * precision first, each partial sum is rounded to half precision before it is
 * sent and added in float to the receiver's; each complete sum is rounded to
 * half precision, in its owner too, before it is passed round, so every process
 * still ends with the same bits, though not those of one process on the whole
 * batch). */
typedef enum clt_wire { CLT_WIRE_FP32, CLT_WIRE_FP16 } clt_wire;
/* "fp32" or "fp16" (what --wire takes); parse fails naming `what` and the value. */
const char *clt_wire_name(clt_wire wire);
int clt_wire_parse(const char *text, const char *what, clt_wire *out, clt_err *e);

/* Reserves the host memory that clt_cluster_sum needs for buffers of up to
 * `floats` floats (once, before the step loop); clt_cluster_reserve_wire also
 * what `wire` needs. */
int clt_cluster_reserve(clt_cluster *c, size_t floats, clt_err *e);
int clt_cluster_reserve_wire(clt_cluster *c, size_t floats, clt_wire wire, clt_err *e);
/* Element-wise sum over the processes, in place: a ring (reduce-scatter, then
 * all-gather) over MPI in chunks like clt_ring's, so every process ends with the
 * same bits and the summation order is fixed by the layout alone. */
int clt_cluster_sum(clt_cluster *c, float *buf, size_t n, clt_err *e);

/* Called between the polls of a transfer in flight: it may sleep, leaving the
 * core to other threads; non-zero gives up (the sum fails). */
typedef int (*clt_cluster_idle_fn)(void *ctx);
/* clt_cluster_sum over floats [lo, hi) of buf's n only (a bucket of a gradient),
 * with the bits of the whole-buffer call (every process summing the same
 * ranges in the same order): two processes cut the range in halves of its own
 * (a float is then the sum of the same two floats, and that sum does not
 * depend on their order), so both directions of the link carry half of it at
 * each step; more cut it where the whole buffer's chunks are, to sum each float
 * in the same order (a range inside one chunk then goes one way round at a
 * time). idle (NULL: none) is called between the polls of each transfer
 * (clt_cluster_exchange_polled). */
int clt_cluster_sum_range(clt_cluster *c, float *buf, size_t n, size_t lo, size_t hi, clt_wire wire,
                          clt_cluster_idle_fn idle, void *ctx, clt_err *e);
/* The same for doubles (figures, not gradients): gathered, summed in rank order. */
int clt_cluster_sum_doubles(clt_cluster *c, double *buf, size_t n, clt_err *e);
/* MPI_Allreduce(MPI_SUM) alone, as `cltrain bench allreduce`'s baseline. */
int clt_cluster_mpi_allreduce(clt_cluster *c, float *buf, size_t n, clt_err *e);
/* Blocks until every process has called it. */
int clt_cluster_barrier(clt_cluster *c, clt_err *e);

#endif
