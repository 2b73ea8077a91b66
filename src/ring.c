#define _POSIX_C_SOURCE 200809L
#include "ring.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

#define DEFAULT_SEGMENT_FLOATS ((size_t)256 * 1024) /* 1 MiB: large copies, still pipelined */

struct clt_ring {
  int n;
  size_t floats, chunk_max, segment, nseg;
  clt_replica **replicas;
  cl_mem *pinned;     /* per rank: 2 * chunk_max floats of host memory, its own context */
  float **staging;    /* their mapped addresses: what rank i sends, double-buffered by step */
  cl_mem *recv;       /* per rank: device buffer receiving a chunk before the add */
  cl_event *read_ev;  /* per rank, per segment */
  cl_event *write_ev; /* per rank, per segment */
  long *calls;        /* per rank: collectives entered */
  /* Progress counters, in units of (call, step, segment): produced[i] = units rank i
   * has staged; consumed[i] = units of rank i's staging its successor has uploaded. */
  long *produced, *consumed;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int aborted;
  int barrier_count;
  long barrier_generation;
  /* Across processes (clt_ring_span): */
  clt_cluster *cluster;
  cl_mem host_mem;      /* floats of host memory in replica 0's context */
  float *host;          /* mapped: the host sum, then the total */
  long cross_calls;     /* collectives whose total is in host */
  long *cross_uploaded; /* per rank: totals it has uploaded */
  double cross_seconds;
};

static size_t chunk_begin(const clt_ring *r, int c) { return (size_t)c * r->floats / (size_t)r->n; }
static size_t chunk_len(const clt_ring *r, int c) {
  return chunk_begin(r, c + 1) - chunk_begin(r, c);
}

/* Length of segment k of chunk c (0 past its end). */
static size_t seg_len(const clt_ring *r, int c, size_t k) {
  size_t len = chunk_len(r, c), start = k * r->segment;
  if (start >= len) return 0;
  return len - start < r->segment ? len - start : r->segment;
}

void clt_ring_destroy(clt_ring *r) {
  if (!r) return;
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
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r->pinned);
  free(r->staging);
  free(r->recv);
  free(r->read_ev);
  free(r->write_ev);
  free(r->calls);
  free(r->produced);
  free(r->consumed);
  free(r->replicas);
  free(r);
}

int clt_ring_create(clt_replica **replicas, int n, size_t floats, size_t segment_floats,
                    clt_ring **out, clt_err *e) {
  int status = CLT_OK;
  *out = NULL;
  clt_ring *r = calloc(1, sizeof *r);
  if (!r) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the ring");
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->n = n;
  r->floats = floats;
  r->chunk_max = (floats + (size_t)n - 1) / (size_t)n;
  r->segment = segment_floats ? segment_floats : DEFAULT_SEGMENT_FLOATS;
  r->nseg = r->chunk_max ? (r->chunk_max + r->segment - 1) / r->segment : 1;
  r->replicas = calloc((size_t)n, sizeof *r->replicas);
  r->pinned = calloc((size_t)n, sizeof *r->pinned);
  r->staging = calloc((size_t)n, sizeof *r->staging);
  r->recv = calloc((size_t)n, sizeof *r->recv);
  r->read_ev = calloc((size_t)n * r->nseg, sizeof *r->read_ev);
  r->write_ev = calloc((size_t)n * r->nseg, sizeof *r->write_ev);
  r->calls = calloc((size_t)n, sizeof *r->calls);
  r->produced = calloc((size_t)n, sizeof *r->produced);
  r->consumed = calloc((size_t)n, sizeof *r->consumed);
  r->cross_uploaded = calloc((size_t)n, sizeof *r->cross_uploaded);
  if (!r->cross_uploaded || !r->replicas || !r->pinned || !r->staging || !r->recv || !r->read_ev ||
      !r->write_ev || !r->calls || !r->produced || !r->consumed) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the ring");
    goto cleanup;
  }
  memcpy(r->replicas, replicas, (size_t)n * sizeof *replicas);
  if (n == 1) goto done; /* nothing to exchange */
  const size_t staging_bytes = 2 * r->chunk_max * sizeof(float);
  for (int i = 0; i < n; i++) {
    clt_replica *rep = replicas[i];
    cl_int rc = CL_SUCCESS;
    /* Host memory allocated by the driver is pinned where the device allows,
     * which makes its downloads DMA transfers. */
    r->pinned[i] = clCreateBuffer(rep->context, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE,
                                  staging_bytes ? staging_bytes : 4, NULL, &rc);
    if (rc == CL_SUCCESS) {
      r->staging[i] = clEnqueueMapBuffer(rep->queue, r->pinned[i], CL_TRUE,
                                         CL_MAP_READ | CL_MAP_WRITE, 0,
                                         staging_bytes ? staging_bytes : 4, 0, NULL, NULL, &rc);
    }
    if (rc != CL_SUCCESS) {
      status = clt_replica_fail(rep, e, rc, "allocating all-reduce staging memory");
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

void clt_ring_abort(clt_ring *r) {
  if (!r) return; /* evaluation-only trainers have no ring */
  pthread_mutex_lock(&r->mu);
  r->aborted = 1;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

int clt_ring_barrier(clt_ring *r) {
  pthread_mutex_lock(&r->mu);
  long gen = r->barrier_generation;
  if (!r->aborted && ++r->barrier_count == r->n) {
    r->barrier_count = 0;
    r->barrier_generation++;
    pthread_cond_broadcast(&r->cv);
  } else {
    while (!r->aborted && gen == r->barrier_generation) pthread_cond_wait(&r->cv, &r->mu);
  }
  int aborted = r->aborted;
  pthread_mutex_unlock(&r->mu);
  return aborted ? -1 : 0;
}

/* Waits until *counter >= target; 0, or -1 if the ring was aborted. */
static int wait_for(clt_ring *r, const long *counter, long target) {
  pthread_mutex_lock(&r->mu);
  while (!r->aborted && *counter < target) pthread_cond_wait(&r->cv, &r->mu);
  int aborted = r->aborted;
  pthread_mutex_unlock(&r->mu);
  return aborted ? -1 : 0;
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

static int aborted_error(clt_err *e) {
  return clt_fail(e, CLT_ERR_INTERNAL, "all-reduce aborted (another replica failed)");
}

/* The ring over this process's replicas. */
static int local_allreduce(clt_ring *r, int rank, cl_mem buffer, clt_err *e) {
  const int n = r->n;
  if (n == 1) return CLT_OK;
  clt_replica *rep = r->replicas[rank];
  const int prev = (rank + n - 1) % n;
  const int steps = 2 * (n - 1);
  const long nseg = (long)r->nseg;
  const long base = r->calls[rank]++ * steps * nseg;
  cl_event *read_ev = r->read_ev + (size_t)rank * r->nseg;
  cl_event *write_ev = r->write_ev + (size_t)rank * r->nseg;
  cl_kernel add;
  int status = clt_replica_kernel(rep, "reduce.cl", "", "add_into", &add, e);
  if (status) {
    clt_ring_abort(r);
    return status;
  }

  for (int g = 0; g < steps; g++) {
    /* Reduce-scatter: send chunk rank-g, add chunk rank-1-g from prev. After it,
     * rank holds the complete chunk rank+1; all-gather passes those round. */
    const int reduce = g < n - 1;
    const double g0 = rep->trace ? clt_now_seconds() : 0;
    const int t = reduce ? g : g - (n - 1);
    const int send = reduce ? ((rank - g) % n + n) % n : ((rank + 1 - t) % n + n) % n;
    const int recv = reduce ? ((rank - 1 - g) % n + 2 * n) % n : ((rank - t) % n + n) % n;
    const size_t slot = (size_t)(g % 2) * r->chunk_max; /* steps alternate staging halves */
    const long unit0 = base + g * nseg;

    for (long k = 0; k < nseg; k++) {
      /* The half used two steps ago must have been uploaded by the successor. */
      if (wait_for(r, &r->consumed[rank], unit0 + k - 2 * nseg + 1)) return aborted_error(e);
      size_t len = seg_len(r, send, (size_t)k);
      read_ev[k] = NULL;
      if (!len) continue;
      cl_int rc = clEnqueueReadBuffer(rep->queue, buffer, CL_FALSE,
                                      (chunk_begin(r, send) + k * r->segment) * sizeof(float),
                                      len * sizeof(float), r->staging[rank] + slot + k * r->segment,
                                      0, NULL, &read_ev[k]);
      if (rc) return fail_rank(r, rank, e, rc, "all-reduce download");
    }
    clFlush(rep->queue);
    for (long k = 0; k < nseg; k++) {
      if (read_ev[k]) {
        cl_int rc = clWaitForEvents(1, &read_ev[k]);
        if (rc == CL_SUCCESS) clt_replica_trace_event(rep, read_ev[k], "download", "all-reduce");
        clReleaseEvent(read_ev[k]);
        if (rc) return fail_rank(r, rank, e, rc, "all-reduce download");
      }
      publish(r, &r->produced[rank], unit0 + k + 1);
      if (wait_for(r, &r->produced[prev], unit0 + k + 1)) return aborted_error(e);
      size_t len = seg_len(r, recv, (size_t)k);
      write_ev[k] = NULL;
      if (!len) continue;
      const size_t dst = chunk_begin(r, recv) + k * r->segment;
      const float *src = r->staging[prev] + slot + k * r->segment;
      /* Reduce-scatter lands in the receive buffer and is added by a kernel;
       * all-gather copies the complete chunk straight into place. */
      cl_mem to = reduce ? r->recv[rank] : buffer;
      size_t to_off = reduce ? k * r->segment : dst;
      cl_int rc = clEnqueueWriteBuffer(rep->queue, to, CL_FALSE, to_off * sizeof(float),
                                       len * sizeof(float), src, 0, NULL, &write_ev[k]);
      if (rc) return fail_rank(r, rank, e, rc, "all-reduce upload");
      if (!reduce) continue;
      int dst_off = (int)dst, src_off = (int)to_off, count = (int)len;
      clt_karg args[] = {CLT_ARG(buffer), CLT_ARG(dst_off), CLT_ARG(r->recv[rank]),
                         CLT_ARG(src_off), CLT_ARG(count)};
      if ((status = clt_launch_elems(rep, add, "all-reduce add", args, 5, len, e))) {
        clt_ring_abort(r);
        return status;
      }
    }
    clFlush(rep->queue);
    for (long k = 0; k < nseg; k++) {
      if (write_ev[k]) {
        cl_int rc = clWaitForEvents(1, &write_ev[k]);
        if (rc == CL_SUCCESS) clt_replica_trace_event(rep, write_ev[k], "upload", "all-reduce");
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
  r->host_mem = clCreateBuffer(rep->context, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, bytes, NULL,
                               &rc);
  if (rc == CL_SUCCESS) {
    r->host = clEnqueueMapBuffer(rep->queue, r->host_mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                 bytes, 0, NULL, NULL, &rc);
  }
  if (rc != CL_SUCCESS) return clt_replica_fail(rep, e, rc, "allocating the cross-process buffer");
  memset(r->host, 0, bytes); /* first touch now, not in the step loop */
  r->cluster = c;
  return clt_cluster_reserve(c, r->floats, e);
}

double clt_ring_take_cross_seconds(clt_ring *r) {
  if (!r) return 0;
  const double s = r->cross_seconds;
  r->cross_seconds = 0;
  return s;
}

/* Replica 0's side: downloads its host's sum, sums it with the other processes',
 * uploads the total. (Overlapping the copies with the transfers chunk by chunk
 * measured no faster on a 2-core host, where copies and MPI share the cores.) */
static int cross_sum(clt_ring *r, cl_mem buffer, clt_err *e) {
  clt_replica *rep = r->replicas[0];
  const size_t bytes = r->floats * sizeof(float);
  cl_int rc = clEnqueueReadBuffer(rep->queue, buffer, CL_TRUE, 0, bytes, r->host, 0, NULL, NULL);
  if (rc) return clt_replica_fail(rep, e, rc, "downloading the host sum");
  int status = clt_cluster_sum(r->cluster, r->host, r->floats, e);
  if (status) return status;
  rc = clEnqueueWriteBuffer(rep->queue, buffer, CL_TRUE, 0, bytes, r->host, 0, NULL, NULL);
  return rc ? clt_replica_fail(rep, e, rc, "uploading the cross-process sum") : CLT_OK;
}

/* Rank 0 sums the host sums of all processes into r->host (and its buffer);
 * then every other rank uploads the total into its buffer. */
static int cross_allreduce(clt_ring *r, int rank, cl_mem buffer, clt_err *e) {
  clt_replica *rep = r->replicas[rank];
  const long call = r->cross_uploaded[rank] + 1; /* only this rank writes its count */
  const size_t bytes = r->floats * sizeof(float);
  if (rank == 0) {
    const double t0 = clt_now_seconds();
    /* The previous total must have been uploaded by every rank before it is overwritten. */
    for (int i = 1; i < r->n; i++) {
      if (wait_for(r, &r->cross_uploaded[i], call - 1)) return aborted_error(e);
    }
    int status = cross_sum(r, buffer, e);
    if (status) {
      clt_ring_abort(r);
      return status;
    }
    r->cross_seconds += clt_now_seconds() - t0;
    clt_replica_trace_span(rep, CLT_TRACE_RING, "across processes (MPI)", t0, clt_now_seconds(),
                           -1);
    publish(r, &r->cross_calls, call);
  } else {
    if (wait_for(r, &r->cross_calls, call)) return aborted_error(e);
    cl_int rc = clEnqueueWriteBuffer(rep->queue, buffer, CL_TRUE, 0, bytes, r->host, 0, NULL, NULL);
    if (rc) return fail_rank(r, rank, e, rc, "uploading the cross-process sum");
  }
  publish(r, &r->cross_uploaded[rank], call);
  return CLT_OK;
}

int clt_ring_allreduce(clt_ring *r, int rank, cl_mem buffer, clt_err *e) {
  int status = local_allreduce(r, rank, buffer, e);
  if (status || !r->cluster) return status;
  return cross_allreduce(r, rank, buffer, e);
}
