/* Creating and destroying a trainer, its public API (trainer.h), and its epochs
 * and evaluations, each a pass (pass.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "timing.h"
#include "trainer_impl.h"
#include "tuner.h"

/* What create makes: a trainer for training (else evaluation only), one that
 * lets replicas leave the step where the split allows it. */
enum { CREATE_TRAIN = 1, CREATE_LEAVE = 2 };

static int create(const clt_model *m, const clt_device *const *devices, int n,
                  int batch_per_replica, int global_batch, clt_split_mode split,
                  const double *weights, clt_source *train, clt_source *test, clt_cluster *cluster,
                  int how, clt_trainer **out, clt_err *e);

int clt_trainer_create(const clt_model *m, const clt_device *const *devices, int n,
                       int global_batch, clt_split_mode split, const double *weights,
                       clt_source *train, clt_source *test, clt_cluster *cluster, clt_trainer **out,
                       clt_err *e) {
  if (!train) return clt_fail(e, CLT_ERR_ARG, "training needs a training set");
  if (global_batch < 1) return clt_fail(e, CLT_ERR_ARG, "a global batch of %d", global_batch);
  return create(m, devices, n, 0, global_batch, split, weights, train, test, cluster,
                CREATE_TRAIN | CREATE_LEAVE, out, e);
}

int clt_trainer_create_steps(const clt_model *m, const clt_device *const *devices, int n,
                             int batch_per_replica, clt_split_mode split, const double *weights,
                             clt_cluster *cluster, clt_trainer **out, clt_err *e) {
  return create(m, devices, n, batch_per_replica, 0, split, weights, NULL, NULL, cluster,
                CREATE_TRAIN, out, e);
}

int clt_trainer_create_eval(const clt_model *m, const clt_device *const *devices, int n,
                            int batch_per_replica, clt_source *test, clt_cluster *cluster,
                            clt_trainer **out, clt_err *e) {
  return create(m, devices, n, batch_per_replica, 0, CLT_SPLIT_EQUAL, NULL, NULL, test, cluster, 0,
                out, e);
}

/* Examples in the training (which 0) or test (1) set. */
static int set_count(const clt_trainer *t, int which) {
  return t->source[which] ? clt_source_count(t->source[which]) : 0;
}

/* The sources must hold what the model reads: its input shape, and labels it has
 * outputs for. */
static int check_source(const clt_model *m, const clt_source *s, clt_err *e) {
  const clt_source_info *in = clt_source_get_info(s);
  if (in->height != m->input.h || in->width != m->input.w || in->channels != m->input.c) {
    return clt_fail(e, CLT_ERR_ARG, "images of %dx%dx%d for model %s, which takes %dx%dx%d",
                    in->height, in->width, in->channels, m->name, m->input.h, m->input.w,
                    m->input.c);
  }
  if (in->classes > m->classes) {
    return clt_fail(e, CLT_ERR_ARG, "labels of %d class%s for model %s, which has %d output%s",
                    in->classes, in->classes == 1 ? "" : "es", m->name, m->classes,
                    m->classes == 1 ? "" : "s");
  }
  return CLT_OK;
}

/* A network uses at most this share of a device's memory, so the dataset and
 * driver fit beside it. */
#define NET_SHARE 0.7

double clt_trainer_device_need(const clt_model *m) {
  return (double)clt_net_bytes(m, 1, 1) / NET_SHARE;
}

/* Equal slices never exceed batch_per_replica (the largest equal slice of the
 * global batch); other splits may hand one replica the whole global batch, as far
 * as its memory allows (using at most 70% of it for activations, so the
 * parameters, dataset and driver fit beside them). */
static int slice_caps(const clt_model *m, const clt_device *const *devices, int n, int total,
                      int batch_per_replica, int global, clt_split_mode split, int train, int *caps,
                      clt_err *e) {
  for (int i = 0; i < n; i++) {
    if (split == CLT_SPLIT_EQUAL || total == 1) {
      caps[i] = batch_per_replica;
      continue;
    }
    const double fixed = (double)clt_net_bytes(m, 0, train);
    const double per_example = (double)(clt_net_bytes(m, 2, train) - clt_net_bytes(m, 1, train));
    double fit = (NET_SHARE * (double)devices[i]->global_mem_bytes - fixed) / per_example;
    caps[i] = fit < global ? (int)fit : global;
    if (caps[i] < 1) {
      return clt_fail(e, CLT_ERR_DEVICE,
                      "device %d (%s): %.0f MiB cannot hold even one example "
                      "of model %s",
                      devices[i]->index, devices[i]->name, devices[i]->global_mem_bytes / 1048576.0,
                      m->name);
    }
  }
  return CLT_OK;
}

/* Buckets of at least this many floats by default: 1 MiB, the size of PyTorch
 * DDP's first bucket and of a ring segment; overlapped across processes 4 MiB,
 * as each bucket's sum there costs a few of the network's latencies. */
#define DEFAULT_BUCKET_FLOATS 262144
#define DEFAULT_CROSS_BUCKET_FLOATS 1048576

/* plan[1] of bucket_plan: the cross-process sum overlaps the backward pass
 * (OVERLAP), or does once the wire is fp16 (OVERLAP_FP16: clt_trainer_set_wire). */
enum { OVERLAP = 1, OVERLAP_FP16 = 2 };

/* The all-reduce's buckets (trainer.h) as this process would have them:
 * plan[0] their least size in floats (0: none), plan[1] whether the
 * cross-process sum overlaps the backward pass too (0, OVERLAP, OVERLAP_FP16).
 * $CLTRAIN_ALLREDUCE_BUCKETS sets the size, 0 for the whole buffer after the
 * backward pass, and overlaps across processes whatever their number. Unset:
 * under mpirun with two processes buckets of 4 MiB, overlapped across them,
 * where the process has a CPU device only with --wire fp16 (the overlap's
 * copies, sums and network stack run on the cores of the backward pass: it pays
 * where the sum fits in the backward pass); with more processes (where a
 * bucket's sum goes one way round at a time: cluster.h) and in one, buckets of
 * 1 MiB within the process unless a replica of it is a CPU device. */
static int bucket_plan(const clt_trainer *t, long plan[2], clt_err *e) {
  const int procs = clt_cluster_size(t->cluster);
  int cpu = 0;
  for (int i = 0; i < t->n; i++)
    cpu |= (t->local[i].replica->device.type & CL_DEVICE_TYPE_CPU) != 0;
  plan[0] = DEFAULT_BUCKET_FLOATS;
  plan[1] = 0;
  const char *v = getenv("CLTRAIN_ALLREDUCE_BUCKETS");
  if (v && *v) {
    char *end = NULL;
    plan[0] = strtol(v, &end, 10);
    if (*end || plan[0] < 0)
      return clt_fail(e, CLT_ERR_ARG, "CLTRAIN_ALLREDUCE_BUCKETS=%s: expected floats >= 0", v);
    plan[1] = procs > 1 ? OVERLAP : 0;
  } else if (procs == 2) {
    plan[0] = DEFAULT_CROSS_BUCKET_FLOATS;
    plan[1] = cpu ? OVERLAP_FP16 : OVERLAP;
  } else if (cpu) {
    plan[0] = 0;
  }
  return CLT_OK;
}

/* Cuts the buckets (of at least min_floats; 0: none) and makes what they need:
 * the transfer queues and, with `across`, the cross-process sum's thread. One
 * replica in one process, or in each without the overlap across them,
 * exchanges nothing during the backward pass: no buckets. */
static int cut_buckets(clt_trainer *t, long min_floats, int across, clt_err *e) {
  int status = CLT_OK;
  t->nbuckets = 0;
  if ((t->n < 2 && !across) || min_floats == 0) return CLT_OK;
  t->nbuckets = clt_net_buckets(t->model, (size_t)min_floats, t->buckets);
  if (t->nbuckets < 2) t->nbuckets = 0; /* one bucket: nothing to overlap */
  if (t->nbuckets && across) {
    size_t offsets[CLT_MAX_BUCKETS], counts[CLT_MAX_BUCKETS];
    for (int b = 0; b < t->nbuckets; b++) {
      offsets[b] = t->buckets[b].offset;
      counts[b] = t->buckets[b].count;
    }
    if ((status = clt_ring_overlap(t->ring, offsets, counts, t->nbuckets, e))) return status;
  }
  for (int i = 0; i < t->n && t->nbuckets; i++) {
    clt_replica *rep = t->local[i].replica;
    cl_int rc = CL_SUCCESS;
    if (t->local[i].transfer) continue;
    t->local[i].transfer = clCreateCommandQueue(rep->context, rep->device.id,
                                                CL_QUEUE_PROFILING_ENABLE, &rc);
    if (rc) return clt_replica_fail(rep, e, rc, "creating the all-reduce's transfer queue");
  }
  return CLT_OK;
}

/* Called by every process (collective) with its own plan (bucket_plan): process
 * 0's holds for all, as every process must cut the same buckets. */
static int plan_buckets(clt_trainer *t, long plan[2], clt_err *e) {
  int status = clt_cluster_bcast(t->cluster, plan, 2 * sizeof plan[0], e);
  if (status) return status;
  /* Overlapped once the wire is fp16: until then, as without buckets. */
  t->fp16_bucket_floats = plan[1] == OVERLAP_FP16 ? plan[0] : 0;
  return cut_buckets(t, plan[1] == OVERLAP_FP16 ? 0 : plan[0], plan[1] == OVERLAP, e);
}

/* Learns how many replicas every process has (the run's layout). */
static int share_layout(clt_trainer *t, clt_err *e) {
  const int procs = clt_cluster_size(t->cluster);
  if (procs > CLT_MAX_REPLICAS) {
    return clt_fail(e, CLT_ERR_ARG, "%d processes; cltrain handles up to %d", procs,
                    CLT_MAX_REPLICAS);
  }
  int status = clt_cluster_allgather(t->cluster, &t->n, sizeof t->n, t->rank_n, e);
  if (status) return status;
  t->total = 0;
  for (int r = 0; r < procs; r++) {
    t->rank_base[r] = t->total;
    t->total += t->rank_n[r];
  }
  t->base = t->rank_base[clt_cluster_rank(t->cluster)];
  if (t->total < 1 || t->total > CLT_MAX_REPLICAS) {
    return clt_fail(e, CLT_ERR_ARG, "%d replicas in all processes; cltrain handles up to %d",
                    t->total, CLT_MAX_REPLICAS);
  }
  return CLT_OK;
}

int trainer_gather(clt_trainer *t, const void *mine, size_t bytes, void *all, clt_err *e) {
  const int procs = clt_cluster_size(t->cluster);
  /* Step-loop calls (a double per replica) use the buffer reserved at creation. */
  const size_t need = (size_t)procs * CLT_MAX_REPLICAS * bytes;
  char *buf = need <= t->gather_bytes ? t->gather : malloc(need);
  if (!buf) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  int status = clt_cluster_allgather(t->cluster, mine, CLT_MAX_REPLICAS * bytes, buf, e);
  for (int r = 0; r < procs && !status; r++) {
    memcpy((char *)all + (size_t)t->rank_base[r] * bytes,
           buf + (size_t)r * CLT_MAX_REPLICAS * bytes, (size_t)t->rank_n[r] * bytes);
  }
  if (buf != t->gather) free(buf);
  return status;
}

/* What reports say of every replica of the run. */
static int share_info(clt_trainer *t, const clt_device *const *devices, clt_err *e) {
  clt_replica_info mine[CLT_MAX_REPLICAS];
  memset(mine, 0, sizeof mine);
  for (int i = 0; i < t->n; i++) {
    mine[i].rank = clt_cluster_rank(t->cluster);
    mine[i].device = devices[i]->index;
    snprintf(mine[i].name, sizeof mine[i].name, "%.119s", devices[i]->name);
    snprintf(mine[i].host, sizeof mine[i].host, "%.63s", clt_cluster_host(t->cluster));
    mine[i].alloc_bytes = (double)t->local[i].replica->allocated_bytes;
    mine[i].net_bytes = (double)t->local[i].net->device_bytes;
  }
  return trainer_gather(t, mine, sizeof mine[0], t->info, e);
}

/* This process's replicas and networks, local[i].cap examples each. */
static int create_replicas(clt_trainer *t, const clt_device *const *devices, int training,
                           clt_err *e) {
  for (int i = 0; i < t->n; i++) {
    trainer_replica *l = &t->local[i];
    int status = clt_backend_create_replica(devices[i], &l->replica, e);
    if (!status) l->replica->index = t->base + i; /* the run's numbering (CLTRAIN_FAULT) */
    /* Busy time per replica comes from profiling events. */
    if (!status) status = clt_replica_enable_profiling(l->replica, e);
    if (status) return status;
    const clt_model *m = t->model;
    /* One metric slot more than a pass has steps: the speed probes'. */
    status = training ? clt_net_create(m, l->replica, l->cap, t->slots + 1, &l->net, e)
                      : clt_net_create_inference(m, l->replica, l->cap, t->slots + 1, &l->net, e);
    if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES ||
        status == CL_OUT_OF_HOST_MEMORY) {
      clt_wrap(e, "slices of up to %d examples do not fit; try a smaller --batch-per-replica",
               l->cap);
    }
    if (status) return status;
  }
  return CLT_OK;
}

/* Every process must reach each collective (the layout, caps and info exchanges)
 * or none: each is preceded by clt_cluster_agree over what came before. The
 * global batch is global_batch, or (0) batch_per_replica on every replica. */
static int create(const clt_model *m, const clt_device *const *devices, int n,
                  int batch_per_replica, int global_batch, clt_split_mode split,
                  const double *weights, clt_source *train, clt_source *test, clt_cluster *cluster,
                  int how, clt_trainer **out, clt_err *e) {
  int status = CLT_OK;
  const int training = (how & CREATE_TRAIN) != 0;
  clt_source *sources[2] = {train, test};
  clt_trainer *t = NULL;
  *out = NULL;
  if (n < 1 || n > CLT_MAX_REPLICAS) {
    status = clt_fail(e, CLT_ERR_ARG, "%d devices selected; cltrain handles 1 to %d", n,
                      CLT_MAX_REPLICAS);
  }
  for (int k = 0; k < 2 && !status; k++) {
    if (sources[k]) status = check_source(m, sources[k], e);
  }
  if (!status && !(t = calloc(1, sizeof *t))) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the trainer");
  }
  if ((status = clt_cluster_agree(cluster, status, e))) goto cleanup;
  if (!t) return clt_fail(e, CLT_ERR_INTERNAL, "no trainer after its allocation");
  t->model = m;
  t->n = n;
  t->cluster = cluster;
  if ((status = share_layout(t, e))) goto cleanup;
  const int global = global_batch > 0 ? global_batch : batch_per_replica * t->total;
  t->global = global;
  t->batch_per_replica = (global + t->total - 1) / t->total;
  const int ntrain = train ? clt_source_count(train) : 0, ntest = test ? clt_source_count(test) : 0;
  const int max_examples = ntrain > ntest ? ntrain : ntest;
  t->slots = (max_examples + global - 1) / global;
  if (t->slots < 1) t->slots = 1;
  t->order_cap = (size_t)(max_examples ? max_examples : 1);
  t->order = malloc(t->order_cap * sizeof *t->order);
  t->metrics = malloc((size_t)n * 2 * t->slots * sizeof *t->metrics);
  t->checks = malloc((size_t)n * t->slots * sizeof *t->checks);
  t->eval_sums = malloc((size_t)2 * t->slots * sizeof *t->eval_sums);
  t->step_time = calloc((size_t)t->slots, sizeof *t->step_time);
  t->train_sums = calloc((size_t)2 * t->slots, sizeof *t->train_sums);
  /* The step loop's gathers: a double per replica, or its figures (leave.c). */
  t->gather_bytes = (size_t)clt_cluster_size(cluster) * CLT_MAX_REPLICAS * sizeof(trainer_figures);
  t->gather = calloc(t->gather_bytes, 1);
  t->members = calloc((size_t)t->slots, sizeof *t->members);
  if (!t->order || !t->metrics || !t->checks || !t->eval_sums || !t->gather || !t->step_time ||
      !t->train_sums || !t->members) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the trainer");
  }
  if (!status) status = trainer_parse_slow(t, e);
  int caps[CLT_MAX_REPLICAS] = {0}, all_caps[CLT_MAX_REPLICAS] = {0};
  if (!status)
    status = slice_caps(m, devices, n, t->total, t->batch_per_replica, global, split, training,
                        caps, e);
  if ((status = clt_cluster_agree(cluster, status, e))) goto cleanup;
  if ((status = trainer_gather(t, caps, sizeof caps[0], all_caps, e))) goto cleanup;
  clt_balancer_init(&t->balancer, t->total, t->total == 1 ? CLT_SPLIT_EQUAL : split, weights,
                    all_caps);
  for (int i = 0; i < n; i++) t->local[i].cap = caps[i];
  /* A replica too slow to help leaves the step. */
  t->leave = (how & CREATE_LEAVE) && training && t->balancer.mode == CLT_SPLIT_AUTO;
  if (t->leave) {
    clt_balancer_leave(&t->balancer);
    t->handoff = malloc((size_t)(1 + CLT_OPT_SLOTS) * m->flat_floats * sizeof *t->handoff);
    if (!t->handoff) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the trainer");
  }
  if (!status) status = create_replicas(t, devices, training, e);
  /* The ring and the sources keep lists of their own. */
  clt_replica *replicas[CLT_MAX_REPLICAS] = {0};
  for (int i = 0; i < n && !status; i++) replicas[i] = t->local[i].replica;
  if (!status && training) {
    /* The gradient buffer: frozen layers send nothing. */
    status = t->leave ? clt_ring_create_subsets(replicas, n, m->grad_floats, 0, &t->ring, e)
                      : clt_ring_create(replicas, n, m->grad_floats, 0, &t->ring, e);
  }
  if (!status && training) status = clt_ring_span(t->ring, cluster, e);
  /* The state handed across processes (leave.c) is summed as gradients are. */
  if (!status && t->leave) status = clt_cluster_reserve(cluster, m->flat_floats, e);
  long plan[2] = {0, 0};
  if (!status && training) status = bucket_plan(t, plan, e);
  for (int k = 0; k < 2 && !status; k++) {
    if (!sources[k]) continue;
    status = clt_source_attach(sources[k], replicas, n, global, caps, m->preprocess, e);
    if (!status) t->source[k] = sources[k]; /* attached: detached with the trainer */
  }
  if ((status = clt_cluster_agree(cluster, status, e))) goto cleanup;
  if (training) {
    status = plan_buckets(t, plan, e);
    if ((status = clt_cluster_agree(cluster, status, e))) goto cleanup;
  }
  if (training && t->balancer.mode == CLT_SPLIT_AUTO && (status = trainer_setup_probe(t, e)))
    goto cleanup;
  if ((status = share_info(t, devices, e))) goto cleanup;
  *out = t;
  return CLT_OK;

cleanup:
  clt_trainer_destroy(t);
  return status;
}

void clt_trainer_destroy(clt_trainer *t) {
  if (!t) return;
  clt_err ignored;
  clt_trainer_end_steps(t, &ignored);
  trainer_stop_workers(t);
  free(t->steps);
  free(t->host_pass);
  trainer_release_host(t);
  for (int k = 0; k < 2; k++) clt_source_detach(t->source[k]);
  /* The transfer queues may still copy into the ring's staging memory. */
  for (int i = 0; i < t->n; i++) {
    const trainer_replica *l = &t->local[i];
    if (l->transfer && !l->replica->hung) clFinish(l->transfer);
  }
  clt_ring_destroy(t->ring);
  for (int i = 0; i < t->n; i++) {
    const trainer_replica *l = &t->local[i];
    if (l->transfer && !l->replica->hung) clReleaseCommandQueue(l->transfer);
    clt_net_destroy(l->net);
    if (l->probe_input && !l->replica->hung) clReleaseMemObject(l->probe_input);
    if (l->probe_labels && !l->replica->hung) clReleaseMemObject(l->probe_labels);
    clt_tune_progress_free(l->tune_progress);
    clt_backend_destroy_replica(l->replica);
  }
  free(t->order);
  free(t->metrics);
  free(t->eval_sums);
  free(t->step_time);
  free(t->train_sums);
  free(t->gather);
  free(t->checks);
  free(t->check_params);
  free(t->members);
  free(t->handoff);
  free(t);
}

int clt_trainer_replicas(const clt_trainer *t) { return t->n; }
int clt_trainer_total_replicas(const clt_trainer *t) { return t->total; }
const clt_replica_info *clt_trainer_replica_info(const clt_trainer *t, int g) {
  return &t->info[g];
}
int clt_trainer_processes(const clt_trainer *t) { return clt_cluster_size(t->cluster); }
const double *clt_trainer_step_times(const clt_trainer *t) { return t->step_time; }
const double *clt_trainer_step_sums(const clt_trainer *t) { return t->train_sums; }

int clt_trainer_trace(clt_trainer *t, clt_trace *trace, int steps, long first_step, clt_err *e) {
  for (int i = 0; i < t->n; i++) {
    const int g = t->base + i;
    char label[200];
    snprintf(label, sizeof label, "replica %d: device %d, %s", g, t->info[g].device,
             t->info[g].name);
    int status = clt_replica_trace(t->local[i].replica, trace, g + 1, label, first_step, steps, e);
    if (status) return status;
    /* The overlapped all-reduce's copies and adds run beside the kernels. */
    if (t->local[i].transfer)
      clt_trace_name(trace, g + 1, CLT_TRACE_TRANSFER, label, "device: all-reduce transfer queue");
    if (i == 0 && clt_ring_overlapping(t->ring))
      clt_trace_name(trace, g + 1, CLT_TRACE_CROSS, label, "host: the cross-process sum's thread");
  }
  t->trace = trace;
  t->trace_steps = steps;
  t->trace_first = first_step;
  for (int k = 0; k < 2; k++) {
    if (t->source[k]) clt_source_trace(t->source[k], trace);
  }
  clt_trace_begin(trace);
  return CLT_OK;
}
const clt_balancer *clt_trainer_balancer(const clt_trainer *t) { return &t->balancer; }
clt_replica *clt_trainer_replica(const clt_trainer *t, int i) { return t->local[i].replica; }
int clt_trainer_global_batch(const clt_trainer *t) { return t->global; }
void clt_trainer_check_replicas(clt_trainer *t, int on) { t->check_replicas = on; }
void clt_trainer_progress(clt_trainer *t, FILE *out) { t->progress.out = out; }
void clt_trainer_first_step_notice(clt_trainer *t, clt_notice *n) { t->first_step_notice = n; }
void clt_trainer_capture_logits(clt_trainer *t, float *out) { t->logits = out; }

/* Bytes of the state's buffer k: the parameters, then the optimizer's slots (of
 * the trained parameters alone). */
static size_t state_bytes(const clt_model *m, int k) {
  return (k ? m->trainable_floats : m->flat_floats) * sizeof(float);
}

int clt_trainer_set_state(clt_trainer *t, const float *params, const float *slot0,
                          const float *slot1, clt_err *e) {
  for (int i = 0; i < t->n; i++) {
    clt_net *net = t->local[i].net;
    const void *src[3] = {params, slot0, slot1};
    cl_mem dst[3] = {net->params, net->opt_state[0], net->opt_state[1]};
    for (int k = 0; k < 3; k++) {
      const size_t bytes = state_bytes(t->model, k);
      cl_int rc = CL_SUCCESS;
      if (!dst[k] || !bytes) continue; /* an inference-only net has no optimizer state */
      if (src[k]) {
        rc = clEnqueueWriteBuffer(net->replica->queue, dst[k], CL_TRUE, 0, bytes, src[k], 0, NULL,
                                  NULL);
      } else if (k > 0) { /* fresh optimizer state */
        int status = clt_replica_fill(net->replica, dst[k], 0, bytes / sizeof(float), 0.0f,
                                      "the optimizer state", e);
        if (status) return status;
      }
      if (rc) return clt_replica_fail(net->replica, e, rc, "writing the training state");
    }
  }
  return CLT_OK;
}

/* The first of this process's replicas that takes part in the steps (they hold
 * the current state; one out of the step holds an old one). */
static int first_member(const clt_trainer *t) {
  for (int r = 0; r < t->n; r++) {
    if (clt_balancer_member(&t->balancer, t->base + r)) return r;
  }
  return 0;
}

int clt_trainer_get_state(clt_trainer *t, float *params, float *slot0, float *slot1, clt_err *e) {
  clt_net *net = t->local[first_member(t)].net;
  void *dst[3] = {params, slot0, slot1};
  cl_mem src[3] = {net->params, net->opt_state[0], net->opt_state[1]};
  for (int k = 0; k < 3; k++) {
    const size_t bytes = state_bytes(t->model, k);
    if (!dst[k] || !bytes) continue;
    cl_int rc = clEnqueueReadBuffer(net->replica->queue, src[k], CL_TRUE, 0, bytes, dst[k], 0, NULL,
                                    NULL);
    if (rc) return clt_replica_fail(net->replica, e, rc, "reading the training state");
  }
  return CLT_OK;
}

double clt_trainer_probe_seconds(const clt_trainer *t) { return t->probe_seconds; }
int clt_trainer_buckets(const clt_trainer *t) { return t->nbuckets; }

int clt_trainer_set_wire(clt_trainer *t, clt_wire wire, clt_err *e) {
  if (!t->ring) return CLT_OK;
  int status = clt_ring_set_wire(t->ring, wire, e);
  if (!status && wire == CLT_WIRE_FP16 && t->fp16_bucket_floats && !clt_ring_overlapping(t->ring))
    status = cut_buckets(t, t->fp16_bucket_floats, 1, e);
  return status;
}

/* Reverses a[from, to). */
static void reverse(int *a, int from, int to) {
  for (int i = from, j = to - 1; i < j; i++, j--) {
    const int x = a[i];
    a[i] = a[j];
    a[j] = x;
  }
}

int trainer_prepare_training(clt_trainer *t, clt_err *e) {
  if (t->check_replicas && !t->check_params) {
    t->check_params = malloc((size_t)t->n * t->model->flat_floats * sizeof(float));
    if (!t->check_params)
      return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for --check-replicas");
  }
  /* The profile's sums are the pass's: what ran before it (set-up, the last
   * evaluation) is collected and dropped first. */
  int status = CLT_OK;
  for (int r = 0; r < t->n && !status; r++) {
    clt_replica *rep = t->local[r].replica;
    status = clt_replica_profile_collect(rep, e);
    clt_profile *prof = rep->profile;
    for (int i = 0; i < prof->nnames; i++) prof->seconds[i] = 0, prof->calls[i] = 0;
    prof->compute_seconds = 0;
  }
  return status;
}

/* Grows *a to n elements of `size` bytes, zeroed (the old content is dropped). */
static int regrow(void **a, size_t n, size_t size) {
  void *fresh = calloc(n, size);
  if (!fresh) return 0;
  free(*a);
  *a = fresh;
  return 1;
}

int trainer_reserve(clt_trainer *t, int examples, clt_err *e) {
  if (examples < 0) return clt_fail(e, CLT_ERR_INTERNAL, "%d examples", examples);
  const int global = clt_trainer_global_batch(t);
  const int slots = (examples + global - 1) / global;
  if ((size_t)examples > t->order_cap) {
    if (!regrow((void **)&t->order, (size_t)examples, sizeof *t->order))
      return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for an example order");
    t->order_cap = (size_t)examples;
  }
  if (slots <= t->slots) return CLT_OK;
  const size_t n = (size_t)t->n, k = (size_t)slots;
  if (!regrow((void **)&t->metrics, n * 2 * k, sizeof *t->metrics) ||
      !regrow((void **)&t->checks, n * k, sizeof *t->checks) ||
      !regrow((void **)&t->eval_sums, 2 * k, sizeof *t->eval_sums) ||
      !regrow((void **)&t->step_time, k, sizeof *t->step_time) ||
      !regrow((void **)&t->train_sums, 2 * k, sizeof *t->train_sums) ||
      !regrow((void **)&t->members, k, sizeof *t->members))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for %d steps' metrics", slots);
  /* The arrays above are the trainer's now; the replicas' slots follow (one
   * more: the speed probes'). */
  t->slots = slots;
  for (int r = 0; r < t->n; r++) {
    int status = clt_net_set_metric_slots(t->local[r].net, slots + 1, e);
    if (status) return status;
  }
  return CLT_OK;
}

int clt_trainer_use_source(clt_trainer *t, int which, clt_source *s, clt_err *e) {
  if (which < 0 || which > 1) return clt_fail(e, CLT_ERR_INTERNAL, "source %d", which);
  if (t->source[which] == s) return CLT_OK;
  if (s && s == t->source[1 - which]) {
    /* Attached already, in the other place. */
    t->source[1 - which] = NULL;
    t->source[which] = s;
    return CLT_OK;
  }
  clt_source_detach(t->source[which]);
  t->source[which] = NULL;
  if (!s) return CLT_OK;
  int status = check_source(t->model, s, e);
  if (!status) status = trainer_reserve(t, clt_source_count(s), e);
  clt_replica *replicas[CLT_MAX_REPLICAS] = {0};
  int caps[CLT_MAX_REPLICAS] = {0};
  for (int i = 0; i < t->n; i++) {
    replicas[i] = t->local[i].replica;
    caps[i] = t->local[i].cap;
  }
  if (!status)
    status = clt_source_attach(s, replicas, t->n, clt_trainer_global_batch(t), caps,
                               t->model->preprocess, e);
  if (!status) t->source[which] = s;
  return status;
}

clt_source *clt_trainer_source(const clt_trainer *t, int which) { return t->source[which]; }

void clt_trainer_resume_epoch(clt_trainer *t, int steps_done, const double *sums) {
  t->resume_skip = steps_done;
  t->resume_sums = (double *)sums;
}

/* The first of steps [from, to) of training pass p whose loss or reduced
 * gradient had a non-finite value, or -1. The gradient's check is the step's
 * leader's, the same in every member; under MPI, a process none of whose
 * replicas was in a step has no check of it, and takes the others'. */
static int bad_step(clt_trainer *t, const pass *p, int from, int to, int *bad, clt_err *e) {
  const int across = t->leave && clt_cluster_size(t->cluster) > 1;
  double *flags = calloc(to > from ? (size_t)(to - from) : 1, sizeof *flags);
  if (!flags) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  for (int s = from; s < to; s++) {
    const unsigned long long members = members_of(p, s);
    if (members) flags[s - from] = t->checks[(size_t)lowest(members) * t->slots + s] != 0;
  }
  int status = across ? clt_cluster_sum_doubles(t->cluster, flags, (size_t)(to - from), e) : CLT_OK;
  *bad = -1;
  for (int s = from; s < to && *bad < 0 && !status; s++) {
    if (!isfinite(t->train_sums[(size_t)2 * s]) || flags[s - from] != 0) *bad = s;
  }
  free(flags);
  return status;
}

int clt_trainer_epoch(clt_trainer *t, uint64_t seed, int epoch, const clt_optimizer *opt,
                      long *step, clt_epoch_result *res, clt_err *e) {
  memset(res, 0, sizeof *res);
  res->bad_step = -1;
  const int count = set_count(t, 0);
  const int global = clt_trainer_global_batch(t);
  const int skip = t->resume_skip;
  const double *skipped_sums = t->resume_sums;
  t->resume_skip = 0;
  t->resume_sums = NULL;
  pass *p = calloc(1, sizeof *p);
  if (!p) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  p->t = t;
  p->train = 1;
  p->epoch = epoch;
  p->count = count;
  p->steps = (count + global - 1) / global;
  p->opt = opt;
  p->seed = seed;
  atomic_init(&p->stop_after, -1);
  if (skip < 0 || skip >= p->steps) {
    const int steps = p->steps;
    free(p);
    return clt_fail(e, CLT_ERR_ARG, "cannot resume epoch %d at step %d: it has %d step%s",
                    epoch + 1, skip + 1, steps, steps == 1 ? "" : "s");
  }
  p->skip = skip;
  p->first_step = *step - skip; /* the optimizer step of the epoch's step 0 */
  int status = trainer_prepare_training(t, e);
  if (status) {
    free(p);
    return status;
  }
  clt_epoch_order(seed, epoch, t->order, count);
  if (skip) {
    /* The source is begun at the first example not yet trained on, the rest
     * after it (never reached: the pass ends first and cancels the source): a
     * rotation, by three reversals. */
    const int head = skip * global;
    reverse(t->order, 0, head);
    reverse(t->order, head, count);
    reverse(t->order, 0, count);
    memcpy(t->train_sums, skipped_sums, (size_t)2 * skip * sizeof *t->train_sums);
  }
  clt_source_work w0, w1;
  clt_source_get_work(t->source[0], &w0);
  status = trainer_run_pass(p, e);
  res->seconds = clt_now_seconds() - p->t0;
  clt_source_get_work(t->source[0], &w1);
  p->work = (clt_source_work){.images = w1.images - w0.images,
                              .decoded = w1.decoded - w0.decoded,
                              .cpu_seconds = w1.cpu_seconds - w0.cpu_seconds};
  /* A pass that did not run to the source's end leaves it mid-pass. */
  const int done = atomic_load(&p->done);
  if (!status && (skip || done < p->steps)) clt_source_cancel(p->source);
  if (!status) status = trainer_read_metrics(t, all_ranks(t), done, e);
  for (int r = 0; r < t->n && !status; r++) {
    status = clt_net_read_grad_checks(t->local[r].net, t->checks + (size_t)r * t->slots, done, e);
  }
  if (!status)
    status = trainer_step_sums(t, skip, done, t->leave ? t->members : NULL, t->train_sums, e);
  if (!status) status = trainer_replica_stats(t, p, res, e);
  if (!status) {
    double example_loss;
    trainer_sum_metrics(t, t->train_sums, done, count, &res->train_loss, &example_loss,
                        &res->train_acc);
    status = bad_step(t, p, skip, done, &res->bad_step, e);
  }
  if (!status) {
    res->allreduce_seconds = p->allreduce_seconds;
    res->cross_seconds = clt_ring_take_cross_seconds(t->ring, &res->cross_hidden_seconds);
    res->data_wait_seconds = p->data_wait_seconds;
    res->first_step_done = t->first_step_done;
    res->skipped_steps = skip;
    res->steps_done = done;
    res->steps = p->steps;
    for (int g = 0; g < t->total; g++) res->examples += res->replicas[g].examples;
    *step += done - skip;
  }
  free(p);
  return status;
}

/* Every process's test source work between w0 and w1 (its own), into t->test_work. */
static int share_test_work(clt_trainer *t, const clt_source_work *w0, const clt_source_work *w1,
                           clt_err *e) {
  enum { FIELDS = 3 };
  double v[FIELDS * CLT_MAX_REPLICAS] = {0};
  const int procs = clt_cluster_size(t->cluster);
  double *x = v + (size_t)FIELDS * clt_cluster_rank(t->cluster);
  x[0] = (double)(w1->images - w0->images);
  x[1] = (double)(w1->decoded - w0->decoded);
  x[2] = w1->cpu_seconds - w0->cpu_seconds;
  int status = clt_cluster_sum_doubles(t->cluster, v, (size_t)FIELDS * procs, e);
  for (int r = 0; r < procs && !status; r++) {
    const double *y = v + (size_t)FIELDS * r;
    t->test_work[r] = (clt_source_work){(long)y[0], (long)y[1], y[2]};
  }
  return status;
}

const clt_source_work *clt_trainer_test_work(const clt_trainer *t) { return t->test_work; }

/* An evaluation of the test source, or of the caller's batch `host`. */
static int evaluate(clt_trainer *t, const clt_host_batch *host, double *loss, double *acc,
                    clt_err *e) {
  if (t->unread) /* the pass would reuse their metric slots */
    return clt_fail(e, CLT_ERR_INTERNAL, "the figures of earlier steps are unread (settle first)");
  const int count = host ? host->count : set_count(t, 1);
  const int global = clt_trainer_global_batch(t);
  int status = trainer_reserve(t, count, e);
  if (status) return status;
  pass *p = calloc(1, sizeof *p);
  if (!p) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  p->t = t;
  p->host = host;
  p->count = count;
  p->steps = (count + global - 1) / global;
  for (int i = 0; i < count; i++) t->order[i] = i;
  const int cluster = clt_cluster_size(t->cluster) > 1;
  const size_t logit_floats = (size_t)count * t->model->classes;
  if (t->logits && cluster) {
    /* Each process fills in its replicas' examples; the sum gives everyone all. */
    memset(t->logits, 0, logit_floats * sizeof *t->logits);
    status = clt_cluster_reserve(t->cluster, logit_floats, e);
  }
  clt_source_work w0, w1;
  clt_source_get_work(t->source[1], &w0);
  if (!status) status = trainer_run_pass(p, e);
  clt_source_get_work(t->source[1], &w1);
  if (!status && !host) status = share_test_work(t, &w0, &w1, e);
  if (!status) status = trainer_read_metrics(t, all_ranks(t), p->steps, e);
  if (!status) status = trainer_step_sums(t, 0, p->steps, NULL, t->eval_sums, e);
  if (!status && t->logits && cluster)
    status = clt_cluster_sum(t->cluster, t->logits, logit_floats, e);
  if (!status) {
    double mean_batch_loss;
    trainer_sum_metrics(t, t->eval_sums, p->steps, count, &mean_batch_loss, loss, acc);
  }
  free(p);
  return status;
}

int clt_trainer_evaluate(clt_trainer *t, double *loss, double *acc, clt_err *e) {
  return evaluate(t, NULL, loss, acc, e);
}

int clt_trainer_predict_host(clt_trainer *t, const clt_host_batch *b, float *logits, clt_err *e) {
  double loss, acc;
  float *kept = t->logits;
  t->logits = logits;
  int status = evaluate(t, b, &loss, &acc, e);
  t->logits = kept;
  return status;
}
