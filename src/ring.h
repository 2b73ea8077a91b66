/* Host-mediated ring all-reduce (sum) of one flat float buffer per replica.
 *
 * Between devices of different vendors there is no peer-to-peer path, so each
 * step moves data device -> host staging -> next device. The buffer is cut into
 * N chunks; N-1 reduce-scatter steps (replica i sends a chunk to i+1, which adds
 * it with a kernel), then N-1 all-gather steps (the complete chunks travel
 * round, copied). All N transfers of a step run at once, each chunk in segments
 * so one device's download overlaps the next device's upload. Every replica
 * ends with the same bits: the summation order of each element is fixed by the
 * ring, so runs repeat exactly.
 *
 * Across processes (clt_ring_span) the all-reduce is hierarchical: the ring over
 * this process's devices, then the first replica's thread downloads the host sum
 * and adds it up with the other processes' (clt_cluster_sum, itself a ring with
 * a fixed order), and every replica uploads the total. */
#ifndef CLT_RING_H
#define CLT_RING_H

#include "cluster.h"
#include "replica.h"

typedef struct clt_ring clt_ring;

/* For n replicas and buffers of `floats` floats. segment_floats: 0 = default. */
int clt_ring_create(clt_replica **replicas, int n, size_t floats, size_t segment_floats,
                    clt_ring **out, clt_err *e);
void clt_ring_destroy(clt_ring *ring);

/* Extends the all-reduce across the processes of c (a no-op for one process):
 * reserves the host buffer and the cluster's scratch memory. */
int clt_ring_span(clt_ring *ring, clt_cluster *c, clt_err *e);

/* Called at the same time by one host thread per replica (its rank), each with
 * its replica's buffer; returns when that buffer holds the element-wise sum over
 * all replicas. If any rank fails or the ring is aborted, every rank returns an
 * error (the others: CLT_ERR_INTERNAL "aborted"). */
int clt_ring_allreduce(clt_ring *ring, int rank, cl_mem buffer, clt_err *e);

/* Wakes and fails every rank waiting in (or later entering) the collective:
 * a worker that fails outside it calls this so the others do not wait forever. */
void clt_ring_abort(clt_ring *ring);

/* A barrier for the ranks, failing (non-zero) once the ring is aborted. */
int clt_ring_barrier(clt_ring *ring);

/* Seconds rank 0 spent in the cross-process part since the last call (0 without
 * clt_ring_span), and resets the count. */
double clt_ring_take_cross_seconds(clt_ring *ring);

#endif
