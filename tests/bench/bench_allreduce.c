/* All-reduce benchmark: time per ring all-reduce of N floats over every
 * enumerated device, its bus bandwidth as NCCL reports it (2(n-1)/n x bytes /
 * time), and, measured in the same run on the same devices, the plain
 * host<->device copy bandwidth the ring is built from.
 *
 *   bench_allreduce [--floats N] [--repeats R] [--segment S]
 *   POCL_DEVICES="pthread pthread" ./build/tests/bench/bench_allreduce --floats 175514
 *
 * Prints medians over R repetitions (after one warm-up). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "median.h"
#include "ring.h"
#include "timing.h"

typedef struct job {
  clt_ring *ring;
  int rank;
  cl_mem buffer;
  int status;
  clt_err err;
} job;

static void *run(void *arg) {
  job *j = arg;
  j->status = clt_ring_allreduce(j->ring, j->rank, j->buffer, &j->err);
  return NULL;
}

int main(int argc, char **argv) {
  size_t floats = 175514, segment = 0;
  int repeats = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--floats") == 0) floats = strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--repeats") == 0) repeats = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--segment") == 0) segment = strtoull(argv[i + 1], NULL, 10);
    else {
      fprintf(stderr, "bench_allreduce: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (floats == 0 || repeats < 1) {
    fprintf(stderr, "bench_allreduce: --floats and --repeats must be positive\n");
    return 2;
  }
  clt_err e = {0};
  clt_device_list list;
  if (clt_devices_enumerate(&list, &e) || list.count < 1) {
    fprintf(stderr, "bench_allreduce: no OpenCL device %s\n", e.msg);
    return 1;
  }
  int n = list.count > 16 ? 16 : list.count;
  clt_replica *reps[16];
  job jobs[16];
  pthread_t threads[16];
  for (int r = 0; r < n; r++) {
    if (clt_backend_create_replica(&list.devices[r], &reps[r], &e) ||
        clt_replica_alloc(reps[r], floats * sizeof(float), "buffer", &jobs[r].buffer, &e)) {
      fprintf(stderr, "bench_allreduce: %s\n", e.msg);
      return 1;
    }
  }
  const size_t bytes = floats * sizeof(float);
  /* Copy bandwidth: device 0 download + upload of the same bytes, pageable memory
   * from malloc as a user's buffer would be. */
  float *host = malloc(bytes);
  memset(host, 0, bytes);
  double *times = malloc(sizeof(double) * (size_t)(repeats + 1));
  for (int k = 0; k <= repeats; k++) {
    double t0 = clt_now_seconds();
    clEnqueueReadBuffer(reps[0]->queue, jobs[0].buffer, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    clEnqueueWriteBuffer(reps[0]->queue, jobs[0].buffer, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    times[k] = (clt_now_seconds() - t0) / 2;
  }
  double copy = median(times + 1, repeats);
  clt_ring *ring;
  if (clt_ring_create(reps, n, floats, segment, &ring, &e)) {
    fprintf(stderr, "bench_allreduce: %s\n", e.msg);
    return 1;
  }
  for (int k = 0; k <= repeats; k++) {
    double t0 = clt_now_seconds();
    for (int r = 0; r < n; r++) {
      jobs[r].ring = ring;
      jobs[r].rank = r;
      pthread_create(&threads[r], NULL, run, &jobs[r]);
    }
    for (int r = 0; r < n; r++) pthread_join(threads[r], NULL);
    for (int r = 0; r < n; r++) clFinish(reps[r]->queue);
    times[k] = clt_now_seconds() - t0;
    for (int r = 0; r < n; r++) {
      if (jobs[r].status) {
        fprintf(stderr, "bench_allreduce: %s\n", jobs[r].err.msg);
        return 1;
      }
    }
  }
  double t = median(times + 1, repeats);
  double bus = n > 1 ? 2.0 * (n - 1) / n * bytes / t : 0;
  printf("devices %d, floats %zu (%.1f MiB), all-reduce %.3f ms, bus bandwidth %.2f GB/s, "
         "copy bandwidth %.2f GB/s, ratio %.2f\n",
         n, floats, bytes / 1048576.0, t * 1e3, bus / 1e9, bytes / copy / 1e9,
         bus / (bytes / copy));
  clt_ring_destroy(ring);
  for (int r = 0; r < n; r++) {
    clReleaseMemObject(jobs[r].buffer);
    clt_backend_destroy_replica(reps[r]);
  }
  clt_devices_free(&list);
  free(host);
  free(times);
  return 0;
}
