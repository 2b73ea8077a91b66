/* The ring all-reduce against a host sum, on every enumerated device as one
 * replica each (run with POCL_DEVICES="pthread pthread" and "pthread pthread
 * pthread"): sizes 1, 2, N-1, N, primes and large, with segments small enough
 * to pipeline; every replica must end with the same bits, equal to the sum up
 * to float rounding. Repeated calls on the same ring must work too. A ring over
 * subsets (clt_ring_create_subsets) must do the same over its members only,
 * whatever sequence of member sets it is given, and leave the others' buffers
 * untouched. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ring.h"

typedef struct job {
  clt_ring *ring;
  int rank, repeats;
  cl_mem buffer;
  int status;
  clt_err err;
} job;

static void *run(void *arg) {
  job *j = arg;
  for (int r = 0; r < j->repeats && !j->status; r++) {
    j->status = clt_ring_allreduce(j->ring, j->rank, j->buffer, &j->err);
  }
  return NULL;
}

static uint64_t rng = 0x1234;
static float urand(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng >> 40) * 0x1.0p-24) * 2.0f - 1.0f;
}

/* One all-reduce of `floats` random values per replica; `repeats` > 1 runs the
 * collective again on its own result (each run multiplies the sum by n). */
static void check_size(clt_replica **reps, int n, size_t floats, size_t segment, int repeats) {
  char what[200];
  snprintf(what, sizeof what, "%d replicas, %zu floats, segment %zu, %d call%s", n, floats, segment,
           repeats, repeats > 1 ? "s" : "");
  clt_err e = {0};
  clt_ring *ring = NULL;
  if (clt_ring_create(reps, n, floats, segment, &ring, &e)) {
    printf("  %s\n", e.msg);
    check(0, "%s", what);
    return;
  }
  float *host = malloc(floats * n * sizeof(float)), *got = malloc(floats * sizeof(float));
  double *sum = calloc(floats, sizeof(double));
  job jobs[8];
  pthread_t threads[8];
  int ok = 1;
  for (int r = 0; r < n; r++) {
    for (size_t i = 0; i < floats; i++) host[r * floats + i] = urand();
    for (size_t i = 0; i < floats; i++) sum[i] += host[r * floats + i];
    jobs[r] = (job){.ring = ring, .rank = r, .repeats = repeats};
    if (clt_replica_alloc(reps[r], floats * sizeof(float), "test buffer", &jobs[r].buffer, &e) ||
        clEnqueueWriteBuffer(reps[r]->queue, jobs[r].buffer, CL_TRUE, 0, floats * sizeof(float),
                             host + r * floats, 0, NULL, NULL)) {
      ok = 0;
    }
  }
  double scale = pow(n, repeats - 1);
  for (int r = 0; r < n && ok; r++) pthread_create(&threads[r], NULL, run, &jobs[r]);
  for (int r = 0; r < n && ok; r++) pthread_join(threads[r], NULL);
  double worst = 0;
  for (int r = 0; r < n && ok; r++) {
    if (jobs[r].status) {
      printf("  rank %d: %s\n", r, jobs[r].err.msg);
      ok = 0;
      break;
    }
    clEnqueueReadBuffer(reps[r]->queue, jobs[r].buffer, CL_TRUE, 0, floats * sizeof(float), got, 0,
                        NULL, NULL);
    if (r == 0) {
      memcpy(host, got, floats * sizeof(float)); /* replica 0's result, for the bitwise check */
      for (size_t i = 0; i < floats; i++) {
        double err = fabs(got[i] - sum[i] * scale) / (scale * n);
        if (!(err <= worst)) worst = err;
      }
    } else if (memcmp(host, got, floats * sizeof(float)) != 0) {
      printf("  replica %d differs from replica 0\n", r);
      ok = 0;
    }
  }
  /* Inputs in [-1, 1]: the error of a float sum of n terms is a few ulps of n. */
  if (ok && !(worst <= 1e-6)) {
    printf("  max error %.3g\n", worst);
    ok = 0;
  }
  check(ok, "%s", what);
  for (int r = 0; r < n; r++)
    if (jobs[r].buffer) clReleaseMemObject(jobs[r].buffer);
  clt_ring_destroy(ring);
  free(host);
  free(got);
  free(sum);
}

/* A ring over subsets: for each member set in turn (bits of `masks`), one
 * all-reduce of fresh random values over its members, summed against the host;
 * every member's result bitwise equal, the others' buffers untouched. */
static void check_subsets(clt_replica **reps, int n, size_t floats, size_t segment,
                          const unsigned long long *masks, int nmasks) {
  char what[200];
  snprintf(what, sizeof what, "%d replicas, member sets changing %d times, %zu floats, segment %zu",
           n, nmasks, floats, segment);
  clt_err e = {0};
  clt_ring *ring = NULL;
  if (clt_ring_create_subsets(reps, n, floats, segment, &ring, &e)) {
    printf("  %s\n", e.msg);
    check(0, "%s", what);
    return;
  }
  float *host = malloc(floats * n * sizeof(float)), *got = malloc(floats * sizeof(float));
  float *first = malloc(floats * sizeof(float));
  double *sum = malloc(floats * sizeof(double));
  job jobs[8];
  pthread_t threads[8];
  int ok = 1;
  for (int r = 0; r < n; r++) {
    jobs[r] = (job){.ring = ring, .rank = r, .repeats = 1};
    if (clt_replica_alloc(reps[r], floats * sizeof(float), "test buffer", &jobs[r].buffer, &e))
      ok = 0;
  }
  for (int m = 0; m < nmasks && ok; m++) {
    const unsigned long long mask = masks[m];
    if (clt_ring_set_members(ring, mask, &e)) {
      printf("  %s\n", e.msg);
      ok = 0;
      break;
    }
    memset(sum, 0, floats * sizeof(double));
    for (int r = 0; r < n; r++) {
      for (size_t i = 0; i < floats; i++) host[r * floats + i] = urand();
      if ((mask >> r) & 1) {
        for (size_t i = 0; i < floats; i++) sum[i] += host[r * floats + i];
      }
      clEnqueueWriteBuffer(reps[r]->queue, jobs[r].buffer, CL_TRUE, 0, floats * sizeof(float),
                           host + r * floats, 0, NULL, NULL);
    }
    for (int r = 0; r < n; r++) {
      jobs[r].status = 0;
      if ((mask >> r) & 1) pthread_create(&threads[r], NULL, run, &jobs[r]);
    }
    for (int r = 0; r < n; r++) {
      if ((mask >> r) & 1) pthread_join(threads[r], NULL);
    }
    int have_first = 0, members = 0;
    for (int r = 0; r < n && ok; r++) {
      clEnqueueReadBuffer(reps[r]->queue, jobs[r].buffer, CL_TRUE, 0, floats * sizeof(float), got,
                          0, NULL, NULL);
      if (!((mask >> r) & 1)) {
        if (memcmp(got, host + r * floats, floats * sizeof(float)) != 0) {
          printf("  set 0x%llx: rank %d, not a member, was changed\n", mask, r);
          ok = 0;
        }
        continue;
      }
      members++;
      if (jobs[r].status) {
        printf("  set 0x%llx: rank %d: %s\n", mask, r, jobs[r].err.msg);
        ok = 0;
      } else if (!have_first) {
        memcpy(first, got, floats * sizeof(float));
        have_first = 1;
        for (size_t i = 0; i < floats && ok; i++) {
          if (!(fabs(got[i] - sum[i]) <= 1e-6 * members)) {
            printf("  set 0x%llx: element %zu is %g, not %g\n", mask, i, got[i], sum[i]);
            ok = 0;
          }
        }
      } else if (memcmp(first, got, floats * sizeof(float)) != 0) {
        printf("  set 0x%llx: rank %d differs from the first member\n", mask, r);
        ok = 0;
      }
    }
  }
  check(ok, "%s", what);
  for (int r = 0; r < n; r++)
    if (jobs[r].buffer) clReleaseMemObject(jobs[r].buffer);
  clt_ring_destroy(ring);
  free(host);
  free(got);
  free(first);
  free(sum);
}

int main(void) {
  clt_err e = {0};
  clt_device_list list;
  if (clt_devices_enumerate(&list, &e) || list.count < 1) {
    check(0, "no OpenCL device: %s", e.msg);
    return check_summary();
  }
  int n = list.count > 8 ? 8 : list.count;
  clt_replica *reps[8];
  for (int r = 0; r < n; r++) {
    if (clt_replica_create(&list.devices[r], &reps[r], &e)) {
      check(0, "%s", e.msg);
      return check_summary();
    }
  }
  printf("%d device%s\n", n, n == 1 ? "" : "s");
  const size_t sizes[] = {1, 2, (size_t)(n > 1 ? n - 1 : 1), (size_t)n, 7, 13, 1021, 65537, 175514};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) check_size(reps, n, sizes[i], 0, 1);
  check_size(reps, n, 100003, 4093, 1);   /* many uneven segments per chunk */
  check_size(reps, n, 1000003, 65536, 1); /* large */
  check_size(reps, n, 9973, 1000, 3);     /* repeated calls on one ring */
  /* Member sets as the trainer makes them: one leaves, comes back, another
   * leaves; a lone member; everyone. */
  const unsigned long long all = (1ull << n) - 1;
  const unsigned long long masks[] = {
      all, all & ~1ull, all & ~1ull, all, all & ~(1ull << (n - 1)), 1ull << (n - 1),
      1,   all,         all & ~2ull, all};
  const int nmasks = (int)(sizeof masks / sizeof masks[0]);
  check_subsets(reps, n, 175514, 0, masks, nmasks);
  check_subsets(reps, n, 100003, 4093, masks, nmasks); /* many segments, changing chunk counts */
  check_subsets(reps, n, 5, 0, masks, nmasks);         /* fewer floats than some chunk counts */
  {
    clt_ring *fixed = NULL;
    if (!clt_ring_create(reps, n, 100, 0, &fixed, &e)) {
      check(n == 1 || clt_ring_set_members(fixed, 1, &e) == CLT_ERR_INTERNAL,
            "a ring made for all its ranks refuses a subset");
      clt_ring_destroy(fixed);
    }
  }
  for (int r = 0; r < n; r++) clt_replica_destroy(reps[r]);
  clt_devices_free(&list);
  return check_summary();
}
