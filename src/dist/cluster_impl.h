/* What cluster.c and cluster_sum.c share of a cluster: its fields and the
 * point-to-point exchange the cross-process sum is built on. */
#ifndef CLT_CLUSTER_IMPL_H
#define CLT_CLUSTER_IMPL_H

#include "cluster.h"

#include <stdint.h>

#ifdef CLT_HAVE_MPI
#include <mpi.h>
#endif

/* A process as the others name it: its host's name and network address. */
typedef struct clt_peer {
  char host[64];
  char addr[48];
} clt_peer;

struct clt_cluster {
  int rank, size;
  int mpi;      /* MPI is in use */
  int finalize; /* ... and was initialised here: leaving finalises it */
  int agreed;   /* a failure every process knows of */
  char host[256];
  char note[256]; /* a word on how the launcher placed this process, or "" */
  float *scratch; /* clt_cluster_sum's receive buffer */
  size_t scratch_floats;
  uint16_t *halves; /* --wire fp16: a chunk sent and one received, as halves */
  size_t halves_chunk;
  double timeout;   /* seconds a call may wait for the others (0: for ever) */
  long step;        /* the step under way, for messages */
  clt_peer *peers;  /* every rank's, from join */
  int lost;         /* a process stopped answering: MPI is not used again */
  clt_err lost_err; /* ... and what every call then fails with */
#ifdef CLT_HAVE_MPI
  MPI_Comm live;           /* the liveness round's messages, apart from the run's */
  unsigned char *heard;    /* per rank: answered or asked in the liveness round */
  long *answers;           /* per rank: the step its answer carries */
  MPI_Request *round_reqs; /* per rank: the receive of its answer */
  long ping[2];            /* the round's question: the step, microseconds left of the round */
  long pong;               /* its answer: the step (both kept while sends are in flight) */
#endif
};

#ifdef CLT_HAVE_MPI
/* An MPI call's failure as a cltrain error. */
int clt_cluster_mpi_fail(clt_err *e, int rc, const char *what);
#endif

/* Sends send_bytes bytes to rank `to` while receiving recv_bytes from rank
 * `from`, both with `tag` (as MPI_Sendrecv), bounded by the cluster's timeout
 * as every call here is. */
int clt_cluster_exchange(clt_cluster *c, const void *send, size_t send_bytes, int to, void *recv,
                         size_t recv_bytes, int from, int tag, clt_err *e);

/* clt_cluster_exchange (bounded by the cluster's timeout as it is) with
 * idle(ctx) called between polls of the transfers in place of the wait's own
 * spinning and napping: idle may sleep, leaving the core to other threads, and
 * its non-zero gives up (CLT_ERR_INTERNAL), leaving the transfers in flight
 * (the process is ending). */
int clt_cluster_exchange_polled(clt_cluster *c, const void *send, size_t send_bytes, int to,
                                void *recv, size_t recv_bytes, int from, int tag,
                                clt_cluster_idle_fn idle, void *ctx, clt_err *e);

#endif
