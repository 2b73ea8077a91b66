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
 * a fixed order), and every replica uploads the total.
 *
 * The ring can run over a subset of its ranks, the members
 * (clt_ring_set_members): the buffer is then cut into as many chunks as there
 * are members, each passing to the next member; ranks out of it take part in
 * neither the collectives nor the barriers. Across processes the lowest member
 * takes replica 0's part; a process with no member adds nothing to the sum
 * (clt_ring_allreduce_absent). */
#ifndef CLT_RING_H
#define CLT_RING_H

#include "cluster.h"
#include "replica.h"

typedef struct clt_ring clt_ring;

/* The most ranges a collective hands to the thread of clt_ring_overlap. */
#define CLT_RING_MAX_JOBS 64

/* For n replicas and buffers of `floats` floats. segment_floats: 0 = default. */
int clt_ring_create(clt_replica **replicas, int n, size_t floats, size_t segment_floats,
                    clt_ring **out, clt_err *e);
/* The same, able to run over any subset of the ranks (clt_ring_set_members):
 * staging is sized for the fewest ranks that exchange, two. */
int clt_ring_create_subsets(clt_replica **replicas, int n, size_t floats, size_t segment_floats,
                            clt_ring **out, clt_err *e);
void clt_ring_destroy(clt_ring *ring);

/* The ranks taking part from now on (bit i: rank i; at least one): the next
 * collectives run over them in rank order and the barriers count them. Called
 * by one thread while no collective is in flight: by no rank of the old set
 * that is waiting in a barrier (so the one being filled completes by the new
 * count), and none of a rank leaving after its last barrier. A ring made by
 * clt_ring_create takes only every rank. */
int clt_ring_set_members(clt_ring *ring, unsigned long long members, clt_err *e);

/* Marks rank as busy outside the collectives (what != NULL: "a speed probe"),
 * or no longer (NULL): the watchdog (watchdog.h) bounds that work by the
 * timeout too. */
void clt_ring_outside(clt_ring *ring, int rank, const char *what);

/* Extends the all-reduce across the processes of c (a no-op for one process):
 * reserves the host buffer and the cluster's scratch memory. */
int clt_ring_span(clt_ring *ring, clt_cluster *c, clt_err *e);

/* The wire of the cross-process part (cluster.h), the same in every process;
 * reserves what it needs. Set before training; a no-op without clt_ring_span. */
int clt_ring_set_wire(clt_ring *ring, clt_wire wire, clt_err *e);

/* Overlapping the cross-process part with the backward pass (after
 * clt_ring_span; a no-op for one process): starts a thread that sums, with the
 * other processes, each range of the buffer the lowest member hands it
 * (clt_ring_cross_post), in the order handed; the members copy the totals into
 * their buffers as they are ready (clt_ring_cross_take, clt_ring_cross_finish).
 * Every collective hands over the `jobs` ranges [offsets[k], offsets[k] +
 * counts[k]) in that order, in every process (a process with no member sums
 * them so too: clt_ring_allreduce_absent), so the bits are those of
 * clt_ring_allreduce. While the backward pass runs, the thread naps between its
 * polls of the network (the cores are the backward pass's); once a member waits
 * in clt_ring_cross_finish, it polls without napping. It is the process's one
 * caller of MPI from a collective's first clt_ring_cross_post to its
 * clt_ring_cross_finish: other collectives go before or after. */
int clt_ring_overlap(clt_ring *ring, const size_t *offsets, const size_t *counts, int jobs,
                     clt_err *e);
/* 1 once clt_ring_overlap has started the thread. */
int clt_ring_overlapping(const clt_ring *ring);

/* An overlapped collective's start, by every member before its first range:
 * the lowest member first waits for every member to have copied the previous
 * totals (their host memory is reused). */
int clt_ring_cross_begin(clt_ring *ring, int rank, clt_err *e);
/* The lowest member (the others: nothing): floats [offset, offset + count) of
 * its buffer hold this process's sum (the range's local part is done, on queue,
 * NULL: the replica's own): downloads them, in order on that queue, and hands
 * the range to the thread. */
int clt_ring_cross_post(clt_ring *ring, int rank, cl_mem buffer, size_t offset, size_t count,
                        cl_command_queue queue, clt_err *e);
/* Enqueues on queue (NULL: the replica's own), without waiting, the copies into
 * buffer of the totals ready among the step's first `done` ranges: those whose
 * local part this rank has done (a total copied earlier would be overwritten). */
int clt_ring_cross_take(clt_ring *ring, int rank, cl_mem buffer, cl_command_queue queue, int done,
                        clt_err *e);
/* The collective's end: waits for the totals of all `count` ranges, copies
 * them in on queue and waits for that queue. backward_end: when the rank's
 * backward pass ended (clt_now_seconds), for the lowest member to count the
 * time the thread summed before it (clt_ring_take_cross_seconds). */
int clt_ring_cross_finish(clt_ring *ring, int rank, cl_mem buffer, cl_command_queue queue,
                          int count, double backward_end, clt_err *e);

/* Called at the same time by one host thread per member replica (its rank),
 * each with its replica's buffer; returns when that buffer holds the element-wise
 * sum over the members. If any rank fails or the ring is aborted, every rank returns an
 * error (the others: CLT_ERR_INTERNAL "aborted"). CLTRAIN_FAULT's stall
 * (fault.h) blocks the rank's thread here for good. */
int clt_ring_allreduce(clt_ring *ring, int rank, cl_mem buffer, clt_err *e);

/* A process none of whose ranks is a member takes its part in the
 * cross-process sum of a collective that the other processes' members run
 * (clt_ring_allreduce, or clt_ring_allreduce_across): it adds negative zeros,
 * which leave the others' sum bit for bit as it is. Called by one thread while
 * no rank of this process is in a collective; a no-op without clt_ring_span. */
int clt_ring_allreduce_absent(clt_ring *ring, clt_err *e);

/* The local part of clt_ring_allreduce over floats [offset, offset + count) of
 * the buffer only (a bucket of a gradient, DDP-style): the range is cut where the
 * whole buffer's chunks are, so every element is summed in the order the
 * whole-buffer call sums it and the bits are the same whether a buffer is
 * reduced whole or in ranges (each rank calling the same ranges in the same
 * order). Its copies and adds are enqueued on `queue` (NULL: the replica's
 * own), the first of them after event `after` (NULL: none), so a second
 * in-order queue on the replica's context can run them while the replica's
 * queue is still busy with the backward pass; they are complete when it
 * returns. The caller finishes such a queue before clt_ring_destroy. Not across
 * processes: after the last range, clt_ring_allreduce_across does that part. */
int clt_ring_allreduce_range(clt_ring *ring, int rank, cl_mem buffer, size_t offset, size_t count,
                             cl_command_queue queue, cl_event after, clt_err *e);
/* The cross-process part of clt_ring_allreduce (a no-op without clt_ring_span),
 * over the whole buffer, on the replica's own queue: after the ranges. */
int clt_ring_allreduce_across(clt_ring *ring, int rank, cl_mem buffer, clt_err *e);

/* --trace: the track (thread id of the replica's process) of the copies and adds
 * enqueued on a queue other than the replica's own (clt_ring_allreduce_range). */
#define CLT_TRACE_TRANSFER 5
/* ... and of the overlapped cross-process sum's thread (clt_ring_overlap), on
 * the first replica's process track. */
#define CLT_TRACE_CROSS 6

/* Wakes and fails every rank waiting in (or later entering) the collective:
 * a worker that fails outside it calls this so the others do not wait forever. */
void clt_ring_abort(clt_ring *ring);

/* A barrier for the member ranks, failing (non-zero) once the ring is aborted. */
int clt_ring_barrier(clt_ring *ring);

/* The all-reduce timeout the watchdog (watchdog.h) applies, in seconds (0:
 * none), of rings created from now on: process-wide, set once before training.
 * The default is generous because it must never stop a healthy run: the ranks'
 * wait for the slowest replica's step counts, and a first step includes the
 * kernels' compilation (PoCL compiles at first launch, which takes long for
 * large models and cold caches); a device that hangs still stops the run within
 * minutes, not never. */
#define CLT_RING_DEFAULT_TIMEOUT 300.0
void clt_ring_set_default_timeout(double seconds);

/* Seconds this process spent in the cross-process part since the last call (0
 * without clt_ring_span; overlapped, the thread's time summing), and resets the
 * count; *hidden (may be NULL) gets the part of it before the backward pass
 * ended (overlapped steps). */
double clt_ring_take_cross_seconds(clt_ring *ring, double *hidden);

#endif
