/* The ring all-reduce against a host sum, on every enumerated device as one
 * replica each (run with POCL_DEVICES="pthread pthread" and "pthread pthread
 * pthread"): sizes 1, 2, N-1, N, primes and large, with segments small enough
 * to pipeline; every replica must end with the same bits, equal to the sum up
 * to float rounding. Repeated calls on the same ring must work too. A ring over
 * subsets (clt_ring_create_subsets) must do the same over its members only,
 * whatever sequence of member sets it is given, and leave the others' buffers
 * untouched. The range variant (the trainer's buckets, on a second queue after an
 * event) must give the whole-buffer call's bits exactly, whatever the ranges,
 * their segments and the member set. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
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

/* Buckets: ranks call clt_ring_allreduce_range over the ranges [cuts[i], cuts[i+1])
 * from the last down (the order a backward pass completes them in), each on a
 * second in-order queue after a marker on the replica's own, and the whole-buffer
 * call on a copy of the same values; `rounds` times over, the calls of one round
 * interleaved with the other's so consecutive calls differ in segments. Every
 * member's ranges must equal the whole-buffer result bit for bit (the same sums
 * in the same order), and that the host sum; ranks out of `mask` keep theirs. */
typedef struct range_job {
  clt_ring *ring;
  int rank, rounds, ncuts;
  const size_t *cuts;
  cl_mem whole, ranges;
  cl_command_queue own, transfer;
  int status;
  clt_err err;
} range_job;

static void *run_ranges(void *arg) {
  range_job *j = arg;
  for (int round = 0; round < j->rounds && !j->status; round++) {
    j->status = clt_ring_allreduce(j->ring, j->rank, j->whole, &j->err);
    for (int i = j->ncuts - 2; i >= 0 && !j->status; i--) {
      /* What a backward pass's bucket marker is: the range waits for it. */
      cl_event after = NULL;
      if (clEnqueueMarkerWithWaitList(j->own, 0, NULL, &after) || clFlush(j->own)) {
        j->status = clt_fail(&j->err, CLT_ERR_INTERNAL, "marker");
        break;
      }
      j->status = clt_ring_allreduce_range(j->ring, j->rank, j->ranges, j->cuts[i],
                                           j->cuts[i + 1] - j->cuts[i], j->transfer, after,
                                           &j->err);
      clReleaseEvent(after);
    }
  }
  return NULL;
}

/* Values of every magnitude from 2^-10 to 2^10 with full mantissas: their sums
 * round, so summing them in another order gives other bits. */
static float wild(void) { return urand() * powf(2.0f, 20.0f * urand()); }

static void check_ranges(clt_replica **reps, int n, size_t floats, size_t segment,
                         const size_t *cuts, int ncuts, unsigned long long mask, int rounds) {
  char what[240];
  snprintf(what, sizeof what,
           "%d replicas (members 0x%llx), %zu floats in %d ranges, segment %zu, %d round%s: "
           "ranges on a second queue = the whole buffer, bit for bit",
           n, mask, floats, ncuts - 1, segment, rounds, rounds > 1 ? "s" : "");
  clt_err e = {0};
  clt_ring *ring = NULL;
  const unsigned long long all = (1ull << n) - 1;
  int status = mask == all ? clt_ring_create(reps, n, floats, segment, &ring, &e)
                           : clt_ring_create_subsets(reps, n, floats, segment, &ring, &e);
  if (!status && mask != all) status = clt_ring_set_members(ring, mask, &e);
  if (status) {
    printf("  %s\n", e.msg);
    check(0, "%s", what);
    clt_ring_destroy(ring);
    return;
  }
  float *host = malloc(floats * n * sizeof(float)), *got = malloc(floats * sizeof(float));
  float *want = malloc(floats * sizeof(float));
  double *sum = calloc(floats, sizeof(double)), *mag = calloc(floats, sizeof(double));
  range_job jobs[8];
  pthread_t threads[8];
  int ok = 1, members = 0;
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < n; r++) {
    cl_int rc = CL_SUCCESS;
    for (size_t i = 0; i < floats; i++) host[r * floats + i] = wild();
    if ((mask >> r) & 1) {
      members++;
      for (size_t i = 0; i < floats; i++) sum[i] += host[r * floats + i];
      for (size_t i = 0; i < floats; i++) mag[i] += fabs(host[r * floats + i]);
    }
    jobs[r] = (range_job){.ring = ring,
                          .rank = r,
                          .rounds = rounds,
                          .ncuts = ncuts,
                          .cuts = cuts,
                          .own = reps[r]->queue};
    jobs[r].transfer = clCreateCommandQueue(reps[r]->context, reps[r]->device.id,
                                            CL_QUEUE_PROFILING_ENABLE, &rc);
    if (rc || clt_replica_alloc(reps[r], floats * sizeof(float), "whole", &jobs[r].whole, &e) ||
        clt_replica_alloc(reps[r], floats * sizeof(float), "ranges", &jobs[r].ranges, &e) ||
        clEnqueueWriteBuffer(reps[r]->queue, jobs[r].whole, CL_TRUE, 0, floats * sizeof(float),
                             host + r * floats, 0, NULL, NULL) ||
        clEnqueueWriteBuffer(reps[r]->queue, jobs[r].ranges, CL_TRUE, 0, floats * sizeof(float),
                             host + r * floats, 0, NULL, NULL)) {
      ok = 0;
    }
  }
  for (int r = 0; r < n && ok; r++) {
    if ((mask >> r) & 1) pthread_create(&threads[r], NULL, run_ranges, &jobs[r]);
  }
  for (int r = 0; r < n && ok; r++) {
    if ((mask >> r) & 1) pthread_join(threads[r], NULL);
  }
  const double scale = pow(members, rounds - 1);
  int have_want = 0;
  for (int r = 0; r < n && ok; r++) {
    if (jobs[r].status) {
      printf("  rank %d: %s\n", r, jobs[r].err.msg);
      ok = 0;
      break;
    }
    clFinish(jobs[r].transfer);
    if (!((mask >> r) & 1)) {
      for (int k = 0; k < 2 && ok; k++) {
        clEnqueueReadBuffer(reps[r]->queue, k ? jobs[r].ranges : jobs[r].whole, CL_TRUE, 0,
                            floats * sizeof(float), got, 0, NULL, NULL);
        if (memcmp(got, host + r * floats, floats * sizeof(float)) != 0) {
          printf("  rank %d, not a member, was changed\n", r);
          ok = 0;
        }
      }
      continue;
    }
    if (!have_want) {
      clEnqueueReadBuffer(reps[r]->queue, jobs[r].whole, CL_TRUE, 0, floats * sizeof(float), want,
                          0, NULL, NULL);
      have_want = 1;
      for (size_t i = 0; i < floats && ok; i++) {
        if (!(fabs(want[i] - sum[i] * scale) <= 1e-6 * mag[i] * scale * members)) {
          printf("  element %zu is %g, not %g\n", i, want[i], sum[i] * scale);
          ok = 0;
        }
      }
    }
    for (int k = 0; k < 2 && ok; k++) {
      clEnqueueReadBuffer(reps[r]->queue, k ? jobs[r].ranges : jobs[r].whole, CL_TRUE, 0,
                          floats * sizeof(float), got, 0, NULL, NULL);
      size_t differ = 0, first = 0;
      for (size_t i = 0; i < floats; i++) {
        uint32_t a, b; /* bits, not values: -0 and 0, or two NaNs, must match too */
        memcpy(&a, &got[i], sizeof a);
        memcpy(&b, &want[i], sizeof b);
        if (a != b && differ++ == 0) first = i;
      }
      if (differ) {
        printf("  rank %d's %s: %zu elements differ from the whole-buffer result, the first %zu "
               "(%.9g, not %.9g)\n",
               r, k ? "ranges" : "whole buffer", differ, first, got[first], want[first]);
        ok = 0;
      }
    }
  }
  check(ok, "%s", what);
  for (int r = 0; r < n; r++) {
    if (jobs[r].whole) clReleaseMemObject(jobs[r].whole);
    if (jobs[r].ranges) clReleaseMemObject(jobs[r].ranges);
  }
  clt_ring_destroy(ring);
  for (int r = 0; r < n; r++)
    if (jobs[r].transfer) clReleaseCommandQueue(jobs[r].transfer);
  free(host);
  free(got);
  free(want);
  free(sum);
  free(mag);
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
    if (clt_backend_create_replica(&list.devices[r], &reps[r], &e)) {
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
    /* Ranges as the trainer's buckets cut a gradient: a large one at the top, layers
     * of every size, an empty one, some shorter than the ranks and not aligned to
     * the chunks; segments small enough that consecutive calls differ in them. */
    const size_t floats = 100003;
    const size_t cuts[] = {0, 1, 2, 320, 4093, 4093, 18819, 33333, 33334, 66669, 70001, floats};
    const int ncuts = (int)(sizeof cuts / sizeof cuts[0]);
    check_ranges(reps, n, floats, 1000, cuts, ncuts, all, 3);
    check_ranges(reps, n, floats, 0, cuts, ncuts, all, 1);
    const size_t two[] = {0, 175514 - 1010 - 155000, 175514};
    check_ranges(reps, n, 175514, 0, two, 3, all, 2); /* fmnist-cnn: dense layers, the rest */
    if (n > 2) check_ranges(reps, n, floats, 1000, cuts, ncuts, all & ~2ull, 2);
  }
  {
    clt_ring *fixed = NULL;
    if (!clt_ring_create(reps, n, 100, 0, &fixed, &e)) {
      check(n == 1 || clt_ring_set_members(fixed, 1, &e) == CLT_ERR_INTERNAL,
            "a ring made for all its ranks refuses a subset");
      clt_ring_destroy(fixed);
    }
  }
  for (int r = 0; r < n; r++) clt_backend_destroy_replica(reps[r]);
  clt_devices_free(&list);
  return check_summary();
}
