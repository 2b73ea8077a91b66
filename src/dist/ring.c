#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault.h"
#include "ring_impl.h"
#include "timing.h"

#define DEFAULT_SEGMENT_FLOATS ((size_t)256 * 1024) /* 1 MiB: large copies, still pipelined */

static double default_timeout = CLT_RING_DEFAULT_TIMEOUT;

/* Chunk c of the buffer cut into k (the members of a call). */
static size_t chunk_begin(const clt_ring *r, int k, int c) {
  return (size_t)c * r->floats / (size_t)k;
}

/* Length of segment s of a chunk of len floats (0 past its end). */
static size_t seg_len(const clt_ring *r, size_t len, size_t s) {
  const size_t start = s * r->segment;
  if (start >= len) return 0;
  return len - start < r->segment ? len - start : r->segment;
}

void clt_ring_destroy(clt_ring *r) {
  if (!r) return;
  /* A hung replica's thread may still be inside the ring or its driver: keep
   * everything it could touch (the process is ending, clt_ring_join). */
  if (r->hung) return;
  if (r->overlap) {
    pthread_mutex_lock(&r->mu);
    r->comm_quit = 1; /* between steps it is idle; mid-step it gives up at its next poll */
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->comm, NULL);
  }
  for (int i = 0; i < r->n; i++) {
    /* Transfers may still read staging memory: finish before unmapping. */
    if (r->replicas && r->replicas[i]) clFinish(r->replicas[i]->queue);
  }
  for (int i = 0; i < r->n; i++) {
    clt_replica *rep = r->replicas ? r->replicas[i] : NULL;
    if (r->pinned && r->pinned[i]) {
      if (rep && r->staging[i]) {
        clEnqueueUnmapMemObject(rep->queue, r->pinned[i], r->staging[i], 0, NULL, NULL);
        clFinish(rep->queue);
      }
      clReleaseMemObject(r->pinned[i]);
    }
    if (r->recv && r->recv[i]) clReleaseMemObject(r->recv[i]);
  }
  if (r->host_mem) {
    if (r->host && r->replicas && r->replicas[0]) {
      clEnqueueUnmapMemObject(r->replicas[0]->queue, r->host_mem, r->host, 0, NULL, NULL);
      clFinish(r->replicas[0]->queue);
    }
    clReleaseMemObject(r->host_mem);
  }
  free(r->cross_uploaded);
  free(r->taken);
  free(r->step_first);
  free(r->job_lo);
  free(r->job_hi);
  free(r->job_t0);
  free(r->job_t1);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r->pinned);
  free(r->staging);
  free(r->recv);
  free(r->read_ev);
  free(r->write_ev);
  free(r->produced);
  free(r->consumed);
  free(r->next_base);
  free(r->last_nseg);
  free(r->outside);
  free(r->outside_what);
  free(r->waits);
  free(r->entered);
  free(r->progress);
  free(r->barrier_threads);
  free(r->joined);
  free(r->replicas);
  free(r);
}

/* subsets: any subset of the ranks may be the members, so staging holds the
 * chunks of the fewest that exchange, two. */
static int create(clt_replica **replicas, int n, size_t floats, size_t segment_floats, int subsets,
                  clt_ring **out, clt_err *e) {
  int status = CLT_OK;
  *out = NULL;
  if (n < 1 || n > 64) return clt_fail(e, CLT_ERR_ARG, "a ring of %d ranks (1 to 64)", n);
  clt_ring *r = calloc(1, sizeof *r);
  if (!r) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the ring");
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->n = n;
  r->floats = floats;
  r->subsets = subsets;
  r->members = n == 64 ? ~0ull : (1ull << n) - 1;
  r->nmembers = n;
  const size_t fewest = subsets && n > 2 ? 2 : (size_t)n;
  r->chunk_max = (floats + fewest - 1) / fewest;
  r->segment = segment_floats ? segment_floats : DEFAULT_SEGMENT_FLOATS;
  r->nseg = r->chunk_max ? (r->chunk_max + r->segment - 1) / r->segment : 1;
  r->replicas = calloc((size_t)n, sizeof *r->replicas);
  r->pinned = calloc((size_t)n, sizeof *r->pinned);
  r->staging = calloc((size_t)n, sizeof *r->staging);
  r->recv = calloc((size_t)n, sizeof *r->recv);
  r->read_ev = calloc((size_t)n * r->nseg, sizeof *r->read_ev);
  r->write_ev = calloc((size_t)n * r->nseg, sizeof *r->write_ev);
  r->produced = calloc((size_t)n, sizeof *r->produced);
  r->consumed = calloc((size_t)n, sizeof *r->consumed);
  r->next_base = calloc((size_t)n, sizeof *r->next_base);
  r->last_nseg = calloc((size_t)n, sizeof *r->last_nseg);
  r->outside = calloc((size_t)n, sizeof *r->outside);
  r->outside_what = calloc((size_t)n, sizeof *r->outside_what);
  r->cross_uploaded = calloc((size_t)n, sizeof *r->cross_uploaded);
  r->taken = calloc((size_t)n, sizeof *r->taken);
  r->step_first = calloc((size_t)n, sizeof *r->step_first);
  r->timeout = default_timeout;
  r->waits = calloc((size_t)n, sizeof *r->waits);
  r->entered = calloc((size_t)n, sizeof *r->entered);
  r->progress = calloc((size_t)n, sizeof *r->progress);
  r->barrier_threads = calloc((size_t)n, sizeof *r->barrier_threads);
  r->joined = calloc((size_t)n, sizeof *r->joined);
  if (!r->cross_uploaded || !r->taken || !r->step_first || !r->replicas || !r->pinned ||
      !r->staging || !r->recv || !r->read_ev || !r->write_ev || !r->next_base || !r->last_nseg ||
      !r->produced || !r->consumed || !r->waits || !r->entered || !r->progress ||
      !r->barrier_threads || !r->joined || !r->outside || !r->outside_what) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the ring");
    goto cleanup;
  }
  memcpy(r->replicas, replicas, (size_t)n * sizeof *replicas);
  for (int i = 0; i < n; i++) r->waits[i].on = WAIT_NONE;
  if (n == 1) goto done; /* nothing to exchange */
  const size_t staging_bytes = 2 * r->chunk_max * sizeof(float);
  for (int i = 0; i < n; i++) {
    clt_replica *rep = replicas[i];
    cl_int rc = CL_SUCCESS;
    /* Host memory allocated by the driver is pinned where the device allows,
     * which makes its downloads DMA transfers. */
    if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_ALLOC)) {
      status = clt_replica_fail_injected(rep, e, CL_MEM_OBJECT_ALLOCATION_FAILURE,
                                         "allocating all-reduce staging memory");
      goto cleanup;
    }
    r->pinned[i] = clCreateBuffer(rep->context, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE,
                                  staging_bytes ? staging_bytes : 4, NULL, &rc);
    if (rc != CL_SUCCESS) {
      status = clt_replica_fail(rep, e, rc, "allocating all-reduce staging memory");
      goto cleanup;
    }
    if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_MAP)) {
      status = clt_replica_fail_injected(rep, e, CL_MAP_FAILURE,
                                         "mapping all-reduce staging memory");
      goto cleanup;
    }
    r->staging[i] = clEnqueueMapBuffer(rep->queue, r->pinned[i], CL_TRUE,
                                       CL_MAP_READ | CL_MAP_WRITE, 0,
                                       staging_bytes ? staging_bytes : 4, 0, NULL, NULL, &rc);
    if (rc != CL_SUCCESS) {
      status = clt_replica_fail(rep, e, rc, "mapping all-reduce staging memory");
      goto cleanup;
    }
    if ((status = clt_replica_alloc(rep, r->chunk_max * sizeof(float), "all-reduce receive buffer",
                                    &r->recv[i], e))) {
      goto cleanup;
    }
    cl_kernel k;
    if ((status = clt_replica_kernel(rep, "reduce.cl", "", "add_into", &k, e))) goto cleanup;
  }
done:
  *out = r;
  return CLT_OK;
cleanup:
  clt_ring_destroy(r);
  return status;
}

int clt_ring_create(clt_replica **replicas, int n, size_t floats, size_t segment_floats,
                    clt_ring **out, clt_err *e) {
  return create(replicas, n, floats, segment_floats, 0, out, e);
}

int clt_ring_create_subsets(clt_replica **replicas, int n, size_t floats, size_t segment_floats,
                            clt_ring **out, clt_err *e) {
  return create(replicas, n, floats, segment_floats, 1, out, e);
}

int clt_ring_set_members(clt_ring *r, unsigned long long members, clt_err *e) {
  const unsigned long long all = r->n == 64 ? ~0ull : (1ull << r->n) - 1;
  if (!members || (members & ~all))
    return clt_fail(e, CLT_ERR_INTERNAL, "ring members 0x%llx of %d ranks", members, r->n);
  if (members != all && !r->subsets) {
    return clt_fail(e, CLT_ERR_INTERNAL, "this ring runs over all of its %d ranks, not a subset",
                    r->n);
  }
  pthread_mutex_lock(&r->mu);
  /* No collective is in flight: every member's counters stand at the same unit,
   * where the ranks joining start too. */
  long base = 0;
  for (int i = 0; i < r->n; i++) {
    if ((r->members >> i) & 1 && r->next_base[i] > base) base = r->next_base[i];
  }
  int count = 0;
  for (int i = 0; i < r->n; i++) {
    if (!((members >> i) & 1)) continue;
    count++;
    if ((r->members >> i) & 1) continue;
    r->next_base[i] = r->produced[i] = r->consumed[i] = base;
    r->last_nseg[i] = 0;                   /* its staging is free */
    r->cross_uploaded[i] = r->cross_calls; /* every total so far counts as uploaded */
  }
  r->members = members;
  r->nmembers = count;
  pthread_mutex_unlock(&r->mu);
  return CLT_OK;
}

void clt_ring_outside(clt_ring *r, int rank, const char *what) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->outside[rank] = what ? clt_now_seconds() : 0;
  r->outside_what[rank] = what;
  pthread_mutex_unlock(&r->mu);
}

void ring_abort_locked(clt_ring *r) {
  if (!r->aborted) r->aborted_at = clt_now_seconds();
  r->aborted = 1;
  pthread_cond_broadcast(&r->cv);
}

void clt_ring_abort(clt_ring *r) {
  if (!r) return; /* evaluation-only trainers have no ring */
  pthread_mutex_lock(&r->mu);
  ring_abort_locked(r);
  pthread_mutex_unlock(&r->mu);
}

void clt_ring_set_default_timeout(double seconds) { default_timeout = seconds > 0 ? seconds : 0; }

int clt_ring_barrier(clt_ring *r) {
  pthread_mutex_lock(&r->mu);
  long gen = r->barrier_generation;
  if (!r->aborted && r->barrier_count + 1 >= r->nmembers) {
    r->barrier_count = 0;
    r->barrier_generation++;
    pthread_cond_broadcast(&r->cv);
  } else if (!r->aborted) {
    /* Waiters are known by thread (the barrier takes no rank): clt_ring_join,
     * which started the threads, knows their ranks. */
    if (r->barrier_count == 0) r->barrier_since = clt_now_seconds();
    r->barrier_threads[r->barrier_count++] = pthread_self();
    while (!r->aborted && gen == r->barrier_generation) pthread_cond_wait(&r->cv, &r->mu);
  }
  int aborted = r->aborted;
  pthread_mutex_unlock(&r->mu);
  return aborted ? -1 : 0;
}

/* Rank waits until *counter >= target, which rank `on` (or another process:
 * WAIT_PROCESSES) advances; 0, or -1 if the ring was aborted. */
static int wait_for(clt_ring *r, int rank, int on, const long *counter, long target) {
  pthread_mutex_lock(&r->mu);
  if (!r->aborted && *counter < target) {
    r->waits[rank] = (rank_wait){on, counter, target, clt_now_seconds()};
    while (!r->aborted && *counter < target) pthread_cond_wait(&r->cv, &r->mu);
    r->waits[rank].on = WAIT_NONE;
  }
  r->progress[rank] = clt_now_seconds(); /* a long all-reduce that never waits is not stuck */
  int aborted = r->aborted;
  pthread_mutex_unlock(&r->mu);
  return aborted ? -1 : 0;
}

/* Rank enters (inside = 1) or leaves the all-reduce, or (waiting = 1) starts or
 * ends waiting on the other processes (MPI). */
static void mark(clt_ring *r, int rank, int inside, int waiting) {
  pthread_mutex_lock(&r->mu);
  const double now = clt_now_seconds();
  r->entered[rank] = inside ? now : 0;
  r->progress[rank] = now;
  r->waits[rank] = (rank_wait){waiting ? WAIT_PROCESSES : WAIT_NONE, NULL, 0, now};
  pthread_mutex_unlock(&r->mu);
}

static void publish(clt_ring *r, long *counter, long value) {
  pthread_mutex_lock(&r->mu);
  *counter = value;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static int fail_rank(clt_ring *r, int rank, clt_err *e, cl_int rc, const char *what) {
  clt_ring_abort(r);
  return clt_replica_fail(r->replicas[rank], e, rc, what);
}

/* The error of a rank whose wait was aborted: the cross-process sum's thread's
 * own when it failed (clt_ring_overlap), else another replica's failure. */
static int aborted_error(clt_ring *r, clt_err *e) {
  pthread_mutex_lock(&r->mu);
  const int status = r->comm_status;
  if (status) *e = r->comm_err;
  pthread_mutex_unlock(&r->mu);
  if (status) return status;
  return clt_fail(e, CLT_ERR_INTERNAL, "all-reduce aborted (another replica failed)");
}

/* --trace: a finished transfer on queue q, on the device track when q is the
 * replica's own queue, else on the transfer track (the two run side by side). */
static void trace_copy(clt_replica *rep, cl_command_queue q, cl_event ev, const char *name) {
  if (!rep->trace) return;
  if (q == rep->queue) {
    clt_replica_trace_event(rep, ev, name, "all-reduce");
    return;
  }
  cl_ulong start = 0, end = 0;
  if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL) ||
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL))
    return; /* a span the device does not time is left out */
  clt_trace_span(rep->trace, rep->trace_pid, CLT_TRACE_TRANSFER, name, "all-reduce",
                 (double)start * 1e-9 + rep->trace_offset, (double)end * 1e-9 + rep->trace_offset,
                 -1);
}

/* The receiving add of a reduce-scatter segment on queue q: on the replica's own
 * queue profiled with the step's kernels; on another queue unprofiled (it
 * overlaps the kernels the profile times; --trace shows it on the transfer
 * track). */
static int launch_add(clt_replica *rep, cl_command_queue q, cl_kernel add, cl_mem buffer,
                      int dst_off, cl_mem src, int src_off, int count, clt_err *e) {
  clt_karg args[] = {CLT_ARG(buffer), CLT_ARG(dst_off), CLT_ARG(src), CLT_ARG(src_off),
                     CLT_ARG(count)};
  if (q == rep->queue)
    return clt_launch_elems(rep, add, "all-reduce add", args, 5, (size_t)count, e);
  cl_event ev = NULL;
  int status = clt_launch_elems_on(rep, q, add, "add_into", args, 5, (size_t)count,
                                   rep->trace ? &ev : NULL, e);
  if (ev) {
    /* Traced steps only: wait for it to read its times (it is due before the
     * step's uploads are waited for anyway). */
    if (clWaitForEvents(1, &ev) == CL_SUCCESS) trace_copy(rep, q, ev, "add");
    clReleaseEvent(ev);
  }
  return status;
}

/* The ring over this process's member replicas, over floats [lo, hi) of buffer:
 * chunk c is the whole buffer's chunk c clipped to the range, so each element
 * travels round from the same member, and is summed in the same order, as in a
 * call over the whole buffer. Transfers and adds go on q, the first after `after`. */
static int local_allreduce(clt_ring *r, int rank, cl_mem buffer, size_t lo, size_t hi,
                           cl_command_queue q, cl_event after, clt_err *e) {
  /* The members change only between collectives (clt_ring_set_members). */
  pthread_mutex_lock(&r->mu);
  const unsigned long long members = r->members;
  pthread_mutex_unlock(&r->mu);
  if (!((members >> rank) & 1)) {
    clt_ring_abort(r);
    return clt_fail(e, CLT_ERR_INTERNAL, "all-reduce: rank %d is not a member", rank);
  }
  if (lo > hi || hi > r->floats) {
    clt_ring_abort(r);
    return clt_fail(e, CLT_ERR_INTERNAL, "all-reduce of floats [%zu, %zu) of %zu", lo, hi,
                    r->floats);
  }
  int ranks[64] = {0}, n = 0, pos = 0;
  for (int i = 0; i < r->n; i++) {
    if (!((members >> i) & 1)) continue;
    if (i == rank) pos = n;
    ranks[n++] = i;
  }
  if (n < 2 || lo == hi) return CLT_OK; /* a lone member holds the sum; an empty range is one */
  clt_replica *rep = r->replicas[rank];
  if (!q) q = rep->queue;
  const int prev = ranks[(pos + n - 1) % n], next = ranks[(pos + 1) % n];
  const int steps = 2 * (n - 1);
  /* The chunks' bounds in this range, and the most segments one has. */
  size_t bound[65];
  size_t longest = 0;
  for (int c = 0; c <= n; c++) {
    const size_t b = chunk_begin(r, n, c);
    bound[c] = b < lo ? lo : b > hi ? hi : b;
    if (c > 0 && bound[c] - bound[c - 1] > longest) longest = bound[c] - bound[c - 1];
  }
  const long nseg = (long)((longest + r->segment - 1) / r->segment);
  const long base = r->next_base[rank], before = r->last_nseg[rank];
  r->next_base[rank] += steps * nseg; /* only this rank writes them while it is a member */
  r->last_nseg[rank] = nseg;
  cl_event *read_ev = r->read_ev + (size_t)rank * r->nseg;
  cl_event *write_ev = r->write_ev + (size_t)rank * r->nseg;
  cl_kernel add;
  int status = clt_replica_kernel(rep, "reduce.cl", "", "add_into", &add, e);
  if (status) {
    clt_ring_abort(r);
    return status;
  }
  if (after) {
    cl_int rc = clEnqueueBarrierWithWaitList(q, 1, &after, NULL);
    if (rc) return fail_rank(r, rank, e, rc, "all-reduce: waiting for the gradient");
  }

  for (int g = 0; g < steps; g++) {
    /* Reduce-scatter: send chunk pos-g, add chunk pos-1-g from prev. After it,
     * the member at pos holds the complete chunk pos+1; all-gather passes those
     * round. */
    const int reduce = g < n - 1;
    const double g0 = rep->trace ? clt_now_seconds() : 0;
    const int t = reduce ? g : g - (n - 1);
    const int send = reduce ? ((pos - g) % n + n) % n : ((pos + 1 - t) % n + n) % n;
    const int recv = reduce ? ((pos - 1 - g) % n + 2 * n) % n : ((pos - t) % n + n) % n;
    const size_t slot = (size_t)(g % 2) * r->chunk_max; /* steps alternate staging halves */
    const long unit0 = base + g * nseg;

    for (long k = 0; k < nseg; k++) {
      /* The half used two steps ago must have been uploaded by the successor:
       * in this call, or (first two steps) in this rank's previous one, whose
       * steps had `before` segments. */
      const long used = g >= 2 ? unit0 - 2 * nseg + k + 1
                               : base - (2 - g) * before + (k + 1 < before ? k + 1 : before);
      if (wait_for(r, rank, next, &r->consumed[rank], used)) return aborted_error(r, e);
      size_t len = seg_len(r, bound[send + 1] - bound[send], (size_t)k);
      read_ev[k] = NULL;
      if (!len) continue;
      if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_READ)) {
        clt_ring_abort(r);
        return clt_replica_fail_injected(rep, e, CL_OUT_OF_RESOURCES, "all-reduce download");
      }
      cl_int rc = clEnqueueReadBuffer(q, buffer, CL_FALSE,
                                      (bound[send] + k * r->segment) * sizeof(float),
                                      len * sizeof(float), r->staging[rank] + slot + k * r->segment,
                                      0, NULL, &read_ev[k]);
      if (rc) return fail_rank(r, rank, e, rc, "all-reduce download");
    }
    clFlush(q);
    for (long k = 0; k < nseg; k++) {
      if (read_ev[k]) {
        cl_int rc = clWaitForEvents(1, &read_ev[k]);
        if (rc == CL_SUCCESS) trace_copy(rep, q, read_ev[k], "download");
        clReleaseEvent(read_ev[k]);
        if (rc) return fail_rank(r, rank, e, rc, "all-reduce download");
      }
      publish(r, &r->produced[rank], unit0 + k + 1);
      if (wait_for(r, rank, prev, &r->produced[prev], unit0 + k + 1)) return aborted_error(r, e);
      size_t len = seg_len(r, bound[recv + 1] - bound[recv], (size_t)k);
      write_ev[k] = NULL;
      if (!len) continue;
      const size_t dst = bound[recv] + k * r->segment;
      const float *src = r->staging[prev] + slot + k * r->segment;
      /* Reduce-scatter lands in the receive buffer and is added by a kernel;
       * all-gather copies the complete chunk straight into place. */
      cl_mem to = reduce ? r->recv[rank] : buffer;
      size_t to_off = reduce ? k * r->segment : dst;
      cl_int rc = clEnqueueWriteBuffer(q, to, CL_FALSE, to_off * sizeof(float), len * sizeof(float),
                                       src, 0, NULL, &write_ev[k]);
      if (rc) return fail_rank(r, rank, e, rc, "all-reduce upload");
      if (!reduce) continue;
      if ((status = launch_add(rep, q, add, buffer, (int)dst, r->recv[rank], (int)to_off, (int)len,
                               e))) {
        clt_ring_abort(r);
        return status;
      }
    }
    clFlush(q);
    for (long k = 0; k < nseg; k++) {
      if (write_ev[k]) {
        cl_int rc = clWaitForEvents(1, &write_ev[k]);
        if (rc == CL_SUCCESS) trace_copy(rep, q, write_ev[k], "upload");
        clReleaseEvent(write_ev[k]);
        if (rc) return fail_rank(r, rank, e, rc, "all-reduce upload");
      }
      publish(r, &r->consumed[prev], unit0 + k + 1);
    }
    if (rep->trace) {
      clt_replica_trace_span(rep, CLT_TRACE_RING,
                             reduce ? "reduce-scatter step" : "all-gather step", g0,
                             clt_now_seconds(), -1);
    }
  }
  return CLT_OK;
}

int clt_ring_span(clt_ring *r, clt_cluster *c, clt_err *e) {
  if (clt_cluster_size(c) == 1) return CLT_OK;
  clt_replica *rep = r->replicas[0];
  const size_t bytes = (r->floats ? r->floats : 1) * sizeof(float);
  cl_int rc = CL_SUCCESS;
  if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_ALLOC)) {
    return clt_replica_fail_injected(rep, e, CL_MEM_OBJECT_ALLOCATION_FAILURE,
                                     "allocating the cross-process buffer");
  }
  r->host_mem = clCreateBuffer(rep->context, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, bytes, NULL,
                               &rc);
  if (rc != CL_SUCCESS) return clt_replica_fail(rep, e, rc, "allocating the cross-process buffer");
  if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_MAP))
    return clt_replica_fail_injected(rep, e, CL_MAP_FAILURE, "mapping the cross-process buffer");
  r->host = clEnqueueMapBuffer(rep->queue, r->host_mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                               bytes, 0, NULL, NULL, &rc);
  if (rc != CL_SUCCESS) return clt_replica_fail(rep, e, rc, "mapping the cross-process buffer");
  memset(r->host, 0, bytes); /* first touch now, not in the step loop */
  r->cluster = c;
  return clt_cluster_reserve(c, r->floats, e);
}

double clt_ring_take_cross_seconds(clt_ring *r, double *hidden) {
  if (hidden) *hidden = 0;
  if (!r) return 0;
  pthread_mutex_lock(&r->mu);
  const double s = r->cross_seconds;
  if (hidden) *hidden = r->cross_hidden;
  r->cross_seconds = r->cross_hidden = 0;
  pthread_mutex_unlock(&r->mu);
  return s;
}

int clt_ring_set_wire(clt_ring *r, clt_wire wire, clt_err *e) {
  if (!r->cluster) return CLT_OK;
  r->wire = wire;
  return clt_cluster_reserve_wire(r->cluster, r->floats, wire, e);
}

/* How long the overlapped sum's thread sleeps between polls of the network
 * while the backward pass runs: the receiving socket's buffer holds far more
 * than arrives in that time, so the transfers keep flowing. */
#define NAP_NS 200000L

static int comm_idle(void *arg) {
  clt_ring *r = arg;
  pthread_mutex_lock(&r->mu);
  const int stop = r->aborted || r->comm_quit, hurry = r->hurry;
  pthread_mutex_unlock(&r->mu);
  if (stop) return 1;
  if (!hurry) nanosleep(&(struct timespec){.tv_nsec = NAP_NS}, NULL);
  return 0;
}

/* The overlapped cross-process sum's thread: each job as it comes. */
static void *comm_main(void *arg) {
  clt_ring *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (!r->comm_quit && !r->aborted && r->summed == r->posted)
      pthread_cond_wait(&r->cv, &r->mu);
    if (r->comm_quit || r->aborted) break;
    const long job = r->summed;
    const size_t lo = r->job_lo[job % CLT_RING_MAX_JOBS], hi = r->job_hi[job % CLT_RING_MAX_JOBS];
    pthread_mutex_unlock(&r->mu);
    clt_err err = {0};
    const double t0 = clt_now_seconds();
    const int status = clt_cluster_sum_range(r->cluster, r->host, r->floats, lo, hi, r->wire,
                                             comm_idle, r, &err);
    const double t1 = clt_now_seconds();
    clt_replica_trace_span(r->replicas[0], CLT_TRACE_CROSS, "across processes (MPI)", t0, t1, -1);
    pthread_mutex_lock(&r->mu);
    r->cross_seconds += t1 - t0;
    r->job_t0[job % CLT_RING_MAX_JOBS] = t0;
    r->job_t1[job % CLT_RING_MAX_JOBS] = t1;
    if (status) {
      if (!r->aborted && !r->comm_quit) {
        r->comm_status = status;
        r->comm_err = err;
      }
      ring_abort_locked(r);
      break;
    }
    r->summed = job + 1;
    pthread_cond_broadcast(&r->cv);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

int clt_ring_overlap(clt_ring *r, const size_t *offsets, const size_t *counts, int jobs,
                     clt_err *e) {
  if (!r->cluster || clt_cluster_size(r->cluster) == 1 || r->overlap) return CLT_OK;
  if (jobs < 1 || jobs > CLT_RING_MAX_JOBS)
    return clt_fail(e, CLT_ERR_INTERNAL, "%d ranges a step to sum across processes", jobs);
  r->step_jobs = jobs;
  for (int k = 0; k < jobs; k++) {
    r->range_lo[k] = offsets[k];
    r->range_hi[k] = offsets[k] + counts[k];
  }
  r->job_lo = calloc(CLT_RING_MAX_JOBS, sizeof *r->job_lo);
  r->job_hi = calloc(CLT_RING_MAX_JOBS, sizeof *r->job_hi);
  r->job_t0 = calloc(CLT_RING_MAX_JOBS, sizeof *r->job_t0);
  r->job_t1 = calloc(CLT_RING_MAX_JOBS, sizeof *r->job_t1);
  if (!r->job_lo || !r->job_hi || !r->job_t0 || !r->job_t1)
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for the cross-process sum");
  if (pthread_create(&r->comm, NULL, comm_main, r) != 0)
    return clt_fail(e, CLT_ERR_NOMEM, "cannot start the cross-process sum's thread");
  r->overlap = 1;
  return CLT_OK;
}

int clt_ring_overlapping(const clt_ring *r) { return r && r->overlap; }

/* The lowest member, which takes replica 0's part across processes. The
 * members change only between collectives (clt_ring_set_members). */
static int lead_member(clt_ring *r, unsigned long long *members) {
  pthread_mutex_lock(&r->mu);
  *members = r->members;
  pthread_mutex_unlock(&r->mu);
  int lead = 0;
  while (!((*members >> lead) & 1)) lead++;
  return lead;
}

int clt_ring_cross_begin(clt_ring *r, int rank, clt_err *e) {
  if (!r->overlap) return CLT_OK;
  /* The jobs of a rank's k-th collective are numbered from k * step_jobs (k as
   * its count of totals uploaded, which a rank rejoining the members takes
   * over): only this rank writes its own. */
  r->step_first[rank] = r->taken[rank] = r->cross_uploaded[rank] * r->step_jobs;
  unsigned long long members;
  const int lead = lead_member(r, &members);
  if (rank != lead) return CLT_OK;
  /* Every member must have copied the previous totals before host is reused. */
  const long done = r->cross_uploaded[lead];
  for (int i = lead + 1; i < r->n; i++) {
    if (!((members >> i) & 1)) continue;
    if (wait_for(r, lead, i, &r->cross_uploaded[i], done)) return aborted_error(r, e);
  }
  pthread_mutex_lock(&r->mu);
  r->posted = r->summed = r->step_first[lead]; /* the thread is idle between steps */
  r->hurry = 0;
  pthread_mutex_unlock(&r->mu);
  return CLT_OK;
}

int clt_ring_cross_post(clt_ring *r, int rank, cl_mem buffer, size_t offset, size_t count,
                        cl_command_queue queue, clt_err *e) {
  unsigned long long members;
  if (!r->overlap || rank != lead_member(r, &members)) return CLT_OK;
  clt_replica *rep = r->replicas[rank];
  if (offset > r->floats || count > r->floats - offset ||
      r->posted - r->step_first[rank] >= r->step_jobs) {
    clt_ring_abort(r);
    return clt_fail(e, CLT_ERR_INTERNAL, "cross-process sum of %zu floats at %zu of %zu (job %ld)",
                    count, offset, r->floats, r->posted - r->step_first[rank]);
  }
  if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_READ)) {
    clt_ring_abort(r);
    return clt_replica_fail_injected(rep, e, CL_OUT_OF_RESOURCES, "downloading the host sum");
  }
  cl_int rc = clEnqueueReadBuffer(queue ? queue : rep->queue, buffer, CL_TRUE,
                                  offset * sizeof(float), count * sizeof(float), r->host + offset,
                                  0, NULL, NULL);
  if (rc) return fail_rank(r, rank, e, rc, "downloading the host sum");
  pthread_mutex_lock(&r->mu);
  r->job_lo[r->posted % CLT_RING_MAX_JOBS] = offset;
  r->job_hi[r->posted % CLT_RING_MAX_JOBS] = offset + count;
  r->posted++;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return CLT_OK;
}

/* Enqueues the copies of jobs [taken, until) into the rank's buffer. */
static int upload_jobs(clt_ring *r, int rank, cl_mem buffer, cl_command_queue q, long until,
                       clt_err *e) {
  clt_replica *rep = r->replicas[rank];
  for (; r->taken[rank] < until; r->taken[rank]++) {
    const long j = r->taken[rank] % CLT_RING_MAX_JOBS;
    const size_t lo = r->job_lo[j], hi = r->job_hi[j]; /* set before the job was summed */
    if (hi == lo) continue;
    cl_int rc = clEnqueueWriteBuffer(q ? q : rep->queue, buffer, CL_FALSE, lo * sizeof(float),
                                     (hi - lo) * sizeof(float), r->host + lo, 0, NULL, NULL);
    if (rc) return fail_rank(r, rank, e, rc, "uploading the cross-process sum");
  }
  cl_int rc = clFlush(q ? q : rep->queue);
  return rc ? fail_rank(r, rank, e, rc, "uploading the cross-process sum") : CLT_OK;
}

int clt_ring_cross_take(clt_ring *r, int rank, cl_mem buffer, cl_command_queue queue, int done,
                        clt_err *e) {
  if (!r->overlap) return CLT_OK;
  pthread_mutex_lock(&r->mu);
  const long summed = r->summed;
  pthread_mutex_unlock(&r->mu);
  const long until = r->step_first[rank] + done;
  if (r->taken[rank] >= (summed < until ? summed : until)) return CLT_OK;
  mark(r, rank, 1, 0);
  const int status = upload_jobs(r, rank, buffer, queue, summed < until ? summed : until, e);
  mark(r, rank, 0, 0);
  return status;
}

int clt_ring_cross_finish(clt_ring *r, int rank, cl_mem buffer, cl_command_queue queue, int count,
                          double backward_end, clt_err *e) {
  if (!r->overlap) return CLT_OK;
  clt_replica *rep = r->replicas[rank];
  const double t0 = clt_now_seconds();
  mark(r, rank, 1, 0);
  pthread_mutex_lock(&r->mu);
  r->hurry = 1; /* the backward pass is over here */
  pthread_mutex_unlock(&r->mu);
  const long until = r->step_first[rank] + count;
  /* Each total as it comes: its copy overlaps the next one's sum. */
  int status = CLT_OK;
  while (!status && r->taken[rank] < until) {
    if (wait_for(r, rank, WAIT_PROCESSES, &r->summed, r->taken[rank] + 1)) {
      mark(r, rank, 0, 0);
      return aborted_error(r, e);
    }
    pthread_mutex_lock(&r->mu);
    const long summed = r->summed;
    pthread_mutex_unlock(&r->mu);
    status = upload_jobs(r, rank, buffer, queue, summed < until ? summed : until, e);
  }
  cl_int rc = status ? CL_SUCCESS : clFinish(queue ? queue : rep->queue);
  if (rc) status = fail_rank(r, rank, e, rc, "uploading the cross-process sum");
  mark(r, rank, 0, 0);
  if (status) return status;
  unsigned long long members;
  const long call = r->cross_uploaded[rank] + 1;
  if (rank == lead_member(r, &members)) {
    clt_replica_trace_span(rep, CLT_TRACE_RING, "waiting across processes (MPI)", t0,
                           clt_now_seconds(), -1);
    /* The step's jobs are summed: their times are final. */
    pthread_mutex_lock(&r->mu);
    for (long j = r->step_first[rank]; j < until; j++) {
      const double a = r->job_t0[j % CLT_RING_MAX_JOBS], b = r->job_t1[j % CLT_RING_MAX_JOBS];
      if (a < backward_end) r->cross_hidden += (b < backward_end ? b : backward_end) - a;
    }
    pthread_mutex_unlock(&r->mu);
    publish(r, &r->cross_calls, call); /* the count a rank rejoining takes over */
  }
  publish(r, &r->cross_uploaded[rank], call);
  return CLT_OK;
}

/* The lead member's side: downloads its host's sum, sums it with the other
 * processes', uploads the total. The copies are not overlapped with the
 * transfers chunk by chunk: the host's cores run both the copies and MPI, so
 * that would gain little. */
static int cross_sum(clt_ring *r, int lead, cl_mem buffer, clt_err *e) {
  clt_replica *rep = r->replicas[lead];
  const size_t bytes = r->floats * sizeof(float);
  if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_READ))
    return clt_replica_fail_injected(rep, e, CL_OUT_OF_RESOURCES, "downloading the host sum");
  cl_int rc = clEnqueueReadBuffer(rep->queue, buffer, CL_TRUE, 0, bytes, r->host, 0, NULL, NULL);
  if (rc) return clt_replica_fail(rep, e, rc, "downloading the host sum");
  int status = clt_cluster_sum_range(r->cluster, r->host, r->floats, 0, r->floats, r->wire, NULL,
                                     NULL, e);
  if (status) return status;
  rc = clEnqueueWriteBuffer(rep->queue, buffer, CL_TRUE, 0, bytes, r->host, 0, NULL, NULL);
  return rc ? clt_replica_fail(rep, e, rc, "uploading the cross-process sum") : CLT_OK;
}

/* The lead member (the lowest) sums the host sums of all processes into
 * r->host (and its buffer); then every other member uploads the total into its
 * buffer. */
static int cross_allreduce(clt_ring *r, int rank, cl_mem buffer, clt_err *e) {
  clt_replica *rep = r->replicas[rank];
  const long call = r->cross_uploaded[rank] + 1; /* only this rank writes its count */
  const size_t bytes = r->floats * sizeof(float);
  /* The members change only between collectives (clt_ring_set_members). */
  pthread_mutex_lock(&r->mu);
  const unsigned long long members = r->members;
  pthread_mutex_unlock(&r->mu);
  int lead = 0;
  while (!((members >> lead) & 1)) lead++;
  if (rank == lead) {
    const double t0 = clt_now_seconds();
    /* The previous total must have been uploaded by every member before it is overwritten. */
    for (int i = lead + 1; i < r->n; i++) {
      if (!((members >> i) & 1)) continue;
      if (wait_for(r, lead, i, &r->cross_uploaded[i], call - 1)) return aborted_error(r, e);
    }
    mark(r, lead, 1, 1); /* a long wait here is the other processes' */
    int status = cross_sum(r, lead, buffer, e);
    mark(r, lead, 1, 0);
    if (status) {
      clt_ring_abort(r);
      return status;
    }
    pthread_mutex_lock(&r->mu);
    r->cross_seconds += clt_now_seconds() - t0;
    pthread_mutex_unlock(&r->mu);
    clt_replica_trace_span(rep, CLT_TRACE_RING, "across processes (MPI)", t0, clt_now_seconds(),
                           -1);
    publish(r, &r->cross_calls, call);
  } else {
    if (wait_for(r, rank, lead, &r->cross_calls, call)) return aborted_error(r, e);
    cl_int rc = clEnqueueWriteBuffer(rep->queue, buffer, CL_TRUE, 0, bytes, r->host, 0, NULL, NULL);
    if (rc) return fail_rank(r, rank, e, rc, "uploading the cross-process sum");
  }
  publish(r, &r->cross_uploaded[rank], call);
  return CLT_OK;
}

int clt_ring_allreduce(clt_ring *r, int rank, cl_mem buffer, clt_err *e) {
  clt_replica *rep = r->replicas[rank];
  mark(r, rank, 1, 0);
  if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_STALL)) {
    /* CLTRAIN_FAULT's stall: blocked for good, as in a driver call that never
     * returns; only clt_ring_join's watchdog notices. */
    for (;;) nanosleep(&(struct timespec){.tv_sec = 3600}, NULL);
  }
  int status = local_allreduce(r, rank, buffer, 0, r->floats, NULL, NULL, e);
  if (!status && r->cluster) status = cross_allreduce(r, rank, buffer, e);
  mark(r, rank, 0, 0);
  return status;
}

int clt_ring_allreduce_range(clt_ring *r, int rank, cl_mem buffer, size_t offset, size_t count,
                             cl_command_queue queue, cl_event after, clt_err *e) {
  clt_replica *rep = r->replicas[rank];
  mark(r, rank, 1, 0);
  if (clt_fault_hit(rep->index, rep->step, CLT_FAULT_STALL)) {
    for (;;) nanosleep(&(struct timespec){.tv_sec = 3600}, NULL); /* as clt_ring_allreduce's */
  }
  if (offset > r->floats || count > r->floats - offset) {
    mark(r, rank, 0, 0);
    clt_ring_abort(r);
    return clt_fail(e, CLT_ERR_INTERNAL, "all-reduce of %zu floats at %zu of %zu", count, offset,
                    r->floats);
  }
  int status = local_allreduce(r, rank, buffer, offset, offset + count, queue, after, e);
  mark(r, rank, 0, 0);
  return status;
}

int clt_ring_allreduce_across(clt_ring *r, int rank, cl_mem buffer, clt_err *e) {
  if (!r->cluster) return CLT_OK;
  mark(r, rank, 1, 0);
  int status = cross_allreduce(r, rank, buffer, e);
  mark(r, rank, 0, 0);
  return status;
}

int clt_ring_allreduce_absent(clt_ring *r, clt_err *e) {
  if (!r->cluster) return CLT_OK;
  const double t0 = clt_now_seconds();
  /* No member uploads this total: r->host is free. -0 + x is x for every x
   * (+0 + -0 would be +0), so the others' sum keeps its bits; in half precision
   * too. */
  for (size_t i = 0; i < r->floats; i++) r->host[i] = -0.0f;
  int status = CLT_OK;
  if (!r->overlap) {
    status = clt_cluster_sum_range(r->cluster, r->host, r->floats, 0, r->floats, r->wire, NULL,
                                   NULL, e);
  }
  /* Overlapped, the others sum the step's ranges one by one: so does this. */
  for (int k = 0; k < r->step_jobs && r->overlap && !status; k++) {
    status = clt_cluster_sum_range(r->cluster, r->host, r->floats, r->range_lo[k], r->range_hi[k],
                                   r->wire, NULL, NULL, e);
  }
  pthread_mutex_lock(&r->mu);
  r->cross_seconds += clt_now_seconds() - t0;
  pthread_mutex_unlock(&r->mu);
  return status;
}
