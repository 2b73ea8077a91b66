/* `cltrain bench allreduce`: times the all-reduce training uses (device buffers of
 * every replica of every process summed: each host's ring, then the ring across
 * processes) against MPI_Allreduce of the same floats alone. On cltrain's
 * internals (the ring and the cluster themselves), not the public API. */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "flags.h"
#include "internals.h"
#include "model.h"
#include "ring.h"
#include "timing.h"
#include "train.h"

#define MAX_SIZES 16

typedef struct bench {
  clt_cluster *cluster;
  int n;     /* this process's replicas */
  int total; /* the run's */
  int base;  /* global index of this process's first */
  clt_replica *replicas[CLT_MAX_SELECTED];
  cl_mem buffers[CLT_MAX_SELECTED];
  float *host; /* the baseline's floats */
  int repeat, warmup;
} bench;

typedef struct job {
  clt_ring *ring;
  clt_replica *replica;
  cl_mem buffer;
  int rank, status;
  clt_err err;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  j->status = clt_ring_allreduce(j->ring, j->rank, j->buffer, &j->err);
  if (!j->status) {
    cl_int rc = clFinish(j->replica->queue);
    if (rc) j->status = clt_fail(&j->err, rc, "clFinish after the all-reduce");
  }
  return NULL;
}

/* One all-reduce of every replica's buffer: a thread per replica, as in training. */
static int allreduce_once(bench *b, clt_ring *ring, clt_err *e) {
  job jobs[CLT_MAX_SELECTED];
  pthread_t th[CLT_MAX_SELECTED];
  int started = 0;
  for (int i = 0; i < b->n; i++) {
    jobs[i] = (job){.ring = ring, .replica = b->replicas[i], .buffer = b->buffers[i], .rank = i};
    if (b->n == 1) break;
    if (pthread_create(&th[i], NULL, run_job, &jobs[i]) != 0) {
      clt_ring_abort(ring);
      jobs[i].status = clt_fail(&jobs[i].err, CLT_ERR_NOMEM, "cannot start a thread");
      break;
    }
    started++;
  }
  if (b->n == 1) run_job(&jobs[0]);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < b->n; i++) {
    if (jobs[i].status) {
      *e = jobs[i].err;
      return jobs[i].status;
    }
  }
  return CLT_OK;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median seconds of `repeat` timed runs of one kind (0: cltrain's all-reduce of
 * device buffers, 1: its cross-process sum of host memory alone, 2:
 * MPI_Allreduce of host memory), after warm-up runs; each run starts together
 * in every process and is checked: replica g contributes g + 1 everywhere. */
static int time_kind(bench *b, clt_ring *ring, size_t floats, int kind, double *median,
                     clt_err *e) {
  double times[1000] = {0};
  const int runs = b->warmup + b->repeat;
  const float expect = (float)b->total * (float)(b->total + 1) / 2.0f;
  const float own = (float)(b->base + 1);
  for (int run = 0; run < runs; run++) {
    int status = CLT_OK;
    /* Contributions: the device buffers, or the host floats of the whole process
     * (its replicas' sum, as the device ring leaves it). */
    for (int i = 0; i < b->n && !status && kind == 0; i++) {
      status = clt_replica_fill(b->replicas[i], b->buffers[i], 0, floats, (float)(b->base + i + 1),
                                "the benchmark buffer", e);
      if (!status && clFinish(b->replicas[i]->queue) != CL_SUCCESS)
        status = clt_fail(e, CLT_ERR_DEVICE, "clFinish");
    }
    if (kind > 0) {
      float mine = 0;
      for (int i = 0; i < b->n; i++) mine += own + (float)i;
      for (size_t k = 0; k < floats; k++) b->host[k] = mine;
    }
    if (!status) status = clt_cluster_barrier(b->cluster, e);
    if (status) return status;
    const double t0 = clt_now_seconds();
    if (kind == 0) status = allreduce_once(b, ring, e);
    else if (kind == 1) status = clt_cluster_sum(b->cluster, b->host, floats, e);
    else status = clt_cluster_mpi_allreduce(b->cluster, b->host, floats, e);
    const double t = clt_now_seconds() - t0;
    if (status) return status;
    if (run >= b->warmup) times[run - b->warmup] = t;
    /* The sums must be right: first, middle and last float of every buffer. */
    const size_t at[3] = {0, floats / 2, floats - 1};
    for (int i = 0; i < (kind == 0 ? b->n : 1); i++) {
      for (int k = 0; k < 3; k++) {
        float v = b->host[at[k]];
        if (kind == 0) {
          cl_int rc = clEnqueueReadBuffer(b->replicas[i]->queue, b->buffers[i], CL_TRUE,
                                          at[k] * sizeof(float), sizeof v, &v, 0, NULL, NULL);
          if (rc) return clt_replica_fail(b->replicas[i], e, rc, "reading the benchmark buffer");
        }
        if (v != expect) {
          return clt_fail(e, CLT_ERR_INTERNAL,
                          "all-reduce of %zu floats gave %g at float %zu of replica %d, not %g",
                          floats, (double)v, at[k], b->base + i, (double)expect);
        }
      }
    }
  }
  qsort(times, (size_t)b->repeat, sizeof times[0], cmp_double);
  *median = b->repeat % 2 ? times[b->repeat / 2]
                          : (times[b->repeat / 2 - 1] + times[b->repeat / 2]) / 2;
  return CLT_OK;
}

/* --floats: a list of sizes, or the reference models' parameter counts. */
static int parse_sizes(const char *spec, size_t *sizes, int *n, clt_err *e) {
  *n = 0;
  if (!spec) {
    static clt_model m; /* large: not on the stack */
    const struct {
      const char *name;
      clt_shape input;
      int classes;
    } models[] = {{"fmnist-cnn", {28, 28, 1}, 10}, {"resnet50", {224, 224, 3}, 5}};
    for (int i = 0; i < 2; i++) {
      int status = clt_model_build(models[i].name, models[i].input, models[i].classes, &m, e);
      if (status) return status;
      sizes[(*n)++] = m.flat_floats;
    }
    return CLT_OK;
  }
  const char *s = spec;
  while (*s) {
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || v < 1 || v > 1ull << 30 || (*end != ',' && *end) || *n == MAX_SIZES) {
      return clt_fail(e, CLT_ERR_ARG,
                      "cltrain bench allreduce: --floats %s: expected up to %d counts in [1, 2^30] "
                      "like 175514,25000000",
                      spec, MAX_SIZES);
    }
    sizes[(*n)++] = (size_t)v;
    s = *end ? end + 1 : end;
  }
  return CLT_OK;
}

static void bench_free(bench *b) {
  for (int i = 0; i < b->n; i++) {
    if (b->buffers[i]) clReleaseMemObject(b->buffers[i]);
    clt_backend_destroy_replica(b->replicas[i]);
  }
  free(b->host);
}

/* This process's replicas and buffers of `floats` floats; the run's layout. */
static int set_up(bench *b, const char *devices, size_t floats, clt_err *e) {
  clt_device_list list = {0};
  const clt_device *chosen[CLT_MAX_SELECTED];
  int n = 0;
  int status = clt_select_process_devices(devices, b->cluster, &list, chosen, &n, e);
  for (int i = 0; i < n && !status; i++) {
    status = clt_backend_create_replica(chosen[i], &b->replicas[i], e);
    if (!status) b->n = i + 1;
    if (!status) {
      status = clt_replica_alloc(b->replicas[i], floats * sizeof(float), "the benchmark buffer",
                                 &b->buffers[i], e);
    }
  }
  clt_devices_free(&list);
  if (!status && !(b->host = malloc((floats ? floats : 1) * sizeof(float))))
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  if ((status = clt_cluster_agree(b->cluster, status, e))) return status;
  int counts[CLT_MAX_SELECTED] = {0};
  if (clt_cluster_size(b->cluster) > CLT_MAX_SELECTED)
    return clt_fail(e, CLT_ERR_ARG, "too many processes");
  if ((status = clt_cluster_allgather(b->cluster, &b->n, sizeof b->n, counts, e))) return status;
  for (int r = 0; r < clt_cluster_size(b->cluster); r++) {
    if (r == clt_cluster_rank(b->cluster)) b->base = b->total;
    b->total += counts[r];
  }
  return CLT_OK;
}

static int run(bench *b, const char *devices, const char *floats_spec, clt_err *e) {
  size_t sizes[MAX_SIZES], largest = 0;
  int nsizes = 0;
  int status = parse_sizes(floats_spec, sizes, &nsizes, e);
  for (int i = 0; i < nsizes; i++) largest = sizes[i] > largest ? sizes[i] : largest;
  if ((status = clt_cluster_agree(b->cluster, status, e))) return status;
  if ((status = set_up(b, devices, largest, e))) return status;
  const int leader = clt_cluster_rank(b->cluster) == 0;
  const int procs = clt_cluster_size(b->cluster);
  if (leader) {
    printf(
        "All-reduce (sum) of %d replica%s in %d process%s: median of %d run%s after %d warm-up\n",
        b->total, b->total == 1 ? "" : "s", procs, procs == 1 ? "" : "es", b->repeat,
        b->repeat == 1 ? "" : "s", b->warmup);
    printf("  cltrain: device buffers -> each process's device ring -> ring across processes "
           "(MPI send/receive of host memory) -> device buffers, as training runs it\n"
           "  host ring: the cross-process ring of host memory alone\n"
           "  MPI_Allreduce: MPI's own all-reduce of the same floats in host memory\n"
           "  GB/s: floats x 4 bytes / time (algorithm bandwidth)\n\n");
    printf("%12s %9s %12s %8s %12s %8s %15s %8s %18s\n", "floats", "MiB", "cltrain ms", "GB/s",
           "host ring ms", "GB/s", "MPI_Allreduce ms", "GB/s", "MPI / cltrain time");
  }
  for (int k = 0; k < nsizes && !status; k++) {
    clt_ring *ring = NULL;
    double t[3] = {0, 0, 0};
    status = clt_ring_create(b->replicas, b->n, sizes[k], 0, &ring, e);
    if (!status) status = clt_ring_span(ring, b->cluster, e);
    if ((status = clt_cluster_agree(b->cluster, status, e))) {
      clt_ring_destroy(ring);
      break;
    }
    for (int kind = 0; kind < 3 && !status; kind++) {
      if (kind > 0 && procs == 1) break; /* nothing crosses processes */
      status = time_kind(b, ring, sizes[k], kind, &t[kind], e);
    }
    clt_ring_destroy(ring);
    if (status || !leader) continue;
    const double bytes = (double)sizes[k] * sizeof(float);
    printf("%12zu %9.2f %12.3f %8.2f", sizes[k], bytes / 1048576.0, t[0] * 1e3, bytes / t[0] / 1e9);
    if (procs > 1) {
      printf(" %12.3f %8.2f %15.3f %8.2f %18.2f\n", t[1] * 1e3, bytes / t[1] / 1e9, t[2] * 1e3,
             bytes / t[2] / 1e9, t[2] / t[0]);
    } else {
      printf(" %12s %8s %15s %8s %18s\n", "-", "-", "-", "-", "-");
    }
    fflush(stdout);
  }
  if (!status && leader && procs == 1) {
    printf("\nOne process: only the device ring ran. Run under mpirun (mpirun -np 2 cltrain bench "
           "allreduce) to time the all-reduce across processes.\n");
  }
  return status;
}

int cmd_bench(int argc, char **argv) {
  clt_err e = {0};
  if (argc < 1 || strcmp(argv[0], "allreduce") != 0) {
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
      printf("usage: cltrain bench allreduce [options]   (see cltrain bench allreduce --help)\n");
      return 0;
    }
    fprintf(stderr, "cltrain: error: cltrain bench: expected 'allreduce' (cltrain bench allreduce "
                    "--help)\n");
    return 2;
  }
  clt_bench_opts o = {0};
  int rc = clt_cli_start(&clt_cmd_bench_allreduce, argc - 1, argv + 1, &o);
  if (rc >= 0) return rc;
  bench b = {.repeat = o.repeat, .warmup = o.warmup};
  if (clt_cli_join(&b.cluster, &e)) return 1;
  int status = run(&b, o.devices, o.floats, &e);
  bench_free(&b);
  return clt_cli_finish(b.cluster, status, &e);
}
