#define _POSIX_C_SOURCE 200809L
#include "trainer.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interrupt.h"
#include "progress.h"
#include "rng.h"
#include "timing.h"
#include "watchdog.h"

struct clt_trainer {
  const clt_model *model;
  int n;     /* this process's replicas */
  int total; /* the run's, in all processes */
  int base;  /* the global index of this process's first replica */
  clt_cluster *cluster;
  int rank_base[CLT_MAX_REPLICAS], rank_n[CLT_MAX_REPLICAS]; /* per process */
  clt_replica_info info[CLT_MAX_REPLICAS];                   /* per replica of the run */
  int batch_per_replica;
  int slots; /* metric slots: steps of the longest pass */
  clt_replica *replicas[CLT_MAX_REPLICAS];
  clt_net *nets[CLT_MAX_REPLICAS];
  clt_source *source[2]; /* training and test examples, or NULL */
  clt_ring *ring;
  clt_balancer balancer;
  int *order;        /* host copy of the current example order */
  float *metrics;    /* 2 * slots per replica, read back after a pass */
  double *eval_sums; /* 2 * slots: each evaluation step's loss and correct count */
  char *gather;      /* gather_replicas' buffer for a double per replica of the run */
  size_t gather_bytes;
  float *checks;       /* slots per replica */
  float *check_params; /* flat_floats per replica, for --check-replicas */
  int check_replicas;
  clt_progress progress;
  clt_notice *first_step_notice; /* the caller's; done at the first step's end */
  double first_step_done;        /* when the trainer's first step had run (0: not yet) */
  float *logits;                 /* evaluation's logits go here (test-set order), or NULL */
  double *step_time;             /* slots: when each step of the latest training pass ended */
  double *train_sums;            /* ... of each step of the latest training pass, over the run */
  clt_trace *trace;              /* --trace, or NULL */
  int trace_steps;               /* ... of this many steps */
  long trace_first;              /* ... from this optimizer step */
  /* clt_trainer_resume_epoch: the next training pass starts at this step of its
   * epoch, those before it having summed to resume_sums (2 per step). */
  int resume_skip;
  double *resume_sums;
  /* Leaving the step (--split auto in one process; see trainer.h): */
  int leave;
  int caps[CLT_MAX_REPLICAS];  /* the largest slice each local replica holds */
  unsigned long long *members; /* slots: the local ranks (bit per rank) taking part in each
                                  step of the latest training pass */
  float *handoff;              /* 1 + CLT_OPT_SLOTS flat arrays: the state a member hands a
                                  replica rejoining */
  double probe_seconds;        /* the set-up speed probe's wall time */
  /* CLTRAIN_TEST_SLOW (trainer.h): replica slow_replica's passes take slow_seconds
   * longer at optimizer steps slow_from to slow_to. */
  int slow_replica;
  long slow_from, slow_to;
  double slow_seconds;
  /* The all-reduce overlapping the backward pass (trainer.h): the gradient's
   * buckets (none: the whole buffer after the backward pass), and per local
   * replica the second in-order queue its bucket transfers run on. */
  int nbuckets;
  clt_bucket buckets[CLT_MAX_BUCKETS];
  cl_command_queue transfer[CLT_MAX_REPLICAS];
};

static int setup_probe(clt_trainer *t, clt_err *e);

static int create(const clt_model *m, const clt_device *const *devices, int n,
                  int batch_per_replica, clt_split_mode split, const double *weights,
                  clt_source *train, clt_source *test, clt_cluster *cluster, clt_trainer **out,
                  clt_err *e);

int clt_trainer_create(const clt_model *m, const clt_device *const *devices, int n,
                       int batch_per_replica, clt_split_mode split, const double *weights,
                       clt_source *train, clt_source *test, clt_cluster *cluster, clt_trainer **out,
                       clt_err *e) {
  if (!train) return clt_fail(e, CLT_ERR_ARG, "training needs a training set");
  return create(m, devices, n, batch_per_replica, split, weights, train, test, cluster, out, e);
}

int clt_trainer_create_eval(const clt_model *m, const clt_device *const *devices, int n,
                            int batch_per_replica, clt_source *test, clt_cluster *cluster,
                            clt_trainer **out, clt_err *e) {
  return create(m, devices, n, batch_per_replica, CLT_SPLIT_EQUAL, NULL, NULL, test, cluster, out,
                e);
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
    return clt_fail(e, CLT_ERR_ARG, "labels of %d classes for model %s, which has %d outputs",
                    in->classes, m->name, m->classes);
  }
  return CLT_OK;
}

/* A network uses at most this share of a device's memory, so the dataset and
 * driver fit beside it. */
#define NET_SHARE 0.7

double clt_trainer_device_need(const clt_model *m) {
  return (double)clt_net_bytes(m, 1, 1) / NET_SHARE;
}

/* Equal slices never exceed batch_per_replica; other splits may hand one replica
 * the whole global batch, as far as its memory allows (using at most 70% of it
 * for activations, so the parameters, dataset and driver fit beside them). */
static int slice_caps(const clt_model *m, const clt_device *const *devices, int n, int total,
                      int batch_per_replica, clt_split_mode split, int train, int *caps,
                      clt_err *e) {
  const int global = batch_per_replica * total;
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

/* CLTRAIN_TEST_SLOW="replica=R,from=S,to=T,ms=M" (trainer.h); unset: none. */
static int parse_slow(clt_trainer *t, clt_err *e) {
  t->slow_replica = -1;
  const char *v = getenv("CLTRAIN_TEST_SLOW");
  if (!v || !*v) return CLT_OK;
  long replica = -1, from = -1, to = -1;
  double ms = -1;
  const char *q = v;
  while (*q) {
    char key[16];
    double value;
    int used = 0;
    if (sscanf(q, "%15[a-z]=%lf%n", key, &value, &used) != 2) break;
    if (strcmp(key, "replica") == 0) replica = (long)value;
    else if (strcmp(key, "from") == 0) from = (long)value;
    else if (strcmp(key, "to") == 0) to = (long)value;
    else if (strcmp(key, "ms") == 0) ms = value;
    else break;
    q += used;
    if (*q == ',') q++;
    else if (*q) break;
  }
  if (*q || replica < 0 || from < 0 || to < from || !(ms >= 0)) {
    return clt_fail(e, CLT_ERR_ARG, "CLTRAIN_TEST_SLOW=%s: expected replica=R,from=S,to=T,ms=M", v);
  }
  t->slow_replica = (int)replica;
  t->slow_from = from;
  t->slow_to = to;
  t->slow_seconds = ms / 1000;
  return CLT_OK;
}

/* Buckets of at least this many floats by default: 1 MiB, the size of PyTorch
 * DDP's first bucket and of a ring segment. */
#define DEFAULT_BUCKET_FLOATS 262144

/* The all-reduce's buckets (trainer.h): $CLTRAIN_ALLREDUCE_BUCKETS sets their
 * least size in floats, 0 for the whole buffer after the backward pass; unset,
 * buckets unless a replica of this process is a CPU device. One replica in this
 * process exchanges nothing here: no buckets. */
static int plan_buckets(clt_trainer *t, clt_err *e) {
  long min_floats = DEFAULT_BUCKET_FLOATS;
  const char *v = getenv("CLTRAIN_ALLREDUCE_BUCKETS");
  if (v && *v) {
    char *end = NULL;
    min_floats = strtol(v, &end, 10);
    if (*end || min_floats < 0)
      return clt_fail(e, CLT_ERR_ARG, "CLTRAIN_ALLREDUCE_BUCKETS=%s: expected floats >= 0", v);
  } else {
    for (int i = 0; i < t->n; i++) {
      if (t->replicas[i]->device.type & CL_DEVICE_TYPE_CPU) min_floats = 0;
    }
  }
  t->nbuckets = 0;
  if (t->n < 2 || min_floats == 0) return CLT_OK;
  t->nbuckets = clt_net_buckets(t->model, (size_t)min_floats, t->buckets);
  if (t->nbuckets < 2) t->nbuckets = 0; /* one bucket: nothing to overlap */
  for (int i = 0; i < t->n && t->nbuckets; i++) {
    clt_replica *rep = t->replicas[i];
    cl_int rc = CL_SUCCESS;
    t->transfer[i] = clCreateCommandQueue(rep->context, rep->device.id, CL_QUEUE_PROFILING_ENABLE,
                                          &rc);
    if (rc) return clt_replica_fail(rep, e, rc, "creating the all-reduce's transfer queue");
  }
  return CLT_OK;
}

/* The test knob's delay, if it applies to global replica g at optimizer step `step`. */
static void slow_down(const clt_trainer *t, int g, long step) {
  if (g != t->slow_replica || step < t->slow_from || step > t->slow_to) return;
  const double s = t->slow_seconds;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
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

/* Gathers each process's per-replica records (`bytes` each, n of them at mine)
 * into all[global index]. */
static int gather_replicas(clt_trainer *t, const void *mine, size_t bytes, void *all, clt_err *e) {
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
    mine[i].alloc_bytes = (double)t->replicas[i]->allocated_bytes;
    mine[i].net_bytes = (double)t->nets[i]->device_bytes;
  }
  return gather_replicas(t, mine, sizeof mine[0], t->info, e);
}

/* This process's replicas and networks, caps[i] examples each. */
static int create_replicas(clt_trainer *t, const clt_device *const *devices, const int *caps,
                           int training, clt_err *e) {
  for (int i = 0; i < t->n; i++) {
    int status = clt_replica_create(devices[i], &t->replicas[i], e);
    if (!status) t->replicas[i]->index = t->base + i; /* the run's numbering (CLTRAIN_FAULT) */
    /* Busy time per replica comes from profiling events. */
    if (!status) status = clt_replica_enable_profiling(t->replicas[i], e);
    if (status) return status;
    const clt_model *m = t->model;
    /* One metric slot more than a pass has steps: the speed probes'. */
    status = training ? clt_net_create(m, t->replicas[i], caps[i], t->slots + 1, &t->nets[i], e)
                      : clt_net_create_inference(m, t->replicas[i], caps[i], t->slots + 1,
                                                 &t->nets[i], e);
    if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES ||
        status == CL_OUT_OF_HOST_MEMORY) {
      clt_wrap(e, "slices of up to %d examples do not fit; try a smaller --batch-per-replica",
               caps[i]);
    }
    if (status) return status;
  }
  return CLT_OK;
}

/* Every process must reach each collective (the layout, caps and info exchanges)
 * or none: each is preceded by clt_cluster_agree over what came before. */
static int create(const clt_model *m, const clt_device *const *devices, int n,
                  int batch_per_replica, clt_split_mode split, const double *weights,
                  clt_source *train, clt_source *test, clt_cluster *cluster, clt_trainer **out,
                  clt_err *e) {
  int status = CLT_OK;
  const int training = train != NULL;
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
  t->batch_per_replica = batch_per_replica;
  if ((status = share_layout(t, e))) goto cleanup;
  const int global = batch_per_replica * t->total;
  const int ntrain = train ? clt_source_count(train) : 0, ntest = test ? clt_source_count(test) : 0;
  const int max_examples = ntrain > ntest ? ntrain : ntest;
  t->slots = (max_examples + global - 1) / global;
  if (t->slots < 1) t->slots = 1;
  t->order = malloc((size_t)(max_examples ? max_examples : 1) * sizeof *t->order);
  t->metrics = malloc((size_t)n * 2 * t->slots * sizeof *t->metrics);
  t->checks = malloc((size_t)n * t->slots * sizeof *t->checks);
  t->eval_sums = malloc((size_t)2 * t->slots * sizeof *t->eval_sums);
  t->step_time = calloc((size_t)t->slots, sizeof *t->step_time);
  t->train_sums = calloc((size_t)2 * t->slots, sizeof *t->train_sums);
  t->gather_bytes = (size_t)clt_cluster_size(cluster) * CLT_MAX_REPLICAS * sizeof(double);
  t->gather = calloc(t->gather_bytes, 1);
  t->members = calloc((size_t)t->slots, sizeof *t->members);
  if (!t->order || !t->metrics || !t->checks || !t->eval_sums || !t->gather || !t->step_time ||
      !t->train_sums || !t->members) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the trainer");
  }
  if (!status) status = parse_slow(t, e);
  int caps[CLT_MAX_REPLICAS] = {0}, all_caps[CLT_MAX_REPLICAS] = {0};
  if (!status)
    status = slice_caps(m, devices, n, t->total, batch_per_replica, split, training, caps, e);
  if ((status = clt_cluster_agree(cluster, status, e))) goto cleanup;
  if ((status = gather_replicas(t, caps, sizeof caps[0], all_caps, e))) goto cleanup;
  clt_balancer_init(&t->balancer, t->total, t->total == 1 ? CLT_SPLIT_EQUAL : split, weights,
                    all_caps);
  memcpy(t->caps, caps, sizeof t->caps);
  /* A replica too slow to help leaves the step: decided within one process (the
   * ring across processes keeps every replica). */
  t->leave = training && t->balancer.mode == CLT_SPLIT_AUTO && clt_cluster_size(cluster) == 1;
  if (t->leave) {
    clt_balancer_leave(&t->balancer);
    t->handoff = malloc((size_t)(1 + CLT_OPT_SLOTS) * m->flat_floats * sizeof *t->handoff);
    if (!t->handoff) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the trainer");
  }
  if (!status) status = create_replicas(t, devices, caps, training, e);
  if (!status && training) {
    status = t->leave ? clt_ring_create_subsets(t->replicas, n, m->flat_floats, 0, &t->ring, e)
                      : clt_ring_create(t->replicas, n, m->flat_floats, 0, &t->ring, e);
  }
  if (!status && training) status = clt_ring_span(t->ring, cluster, e);
  if (!status && training) status = plan_buckets(t, e);
  for (int k = 0; k < 2 && !status; k++) {
    if (!sources[k]) continue;
    status = clt_source_attach(sources[k], t->replicas, n, global, caps, m->preprocess, e);
    if (!status) t->source[k] = sources[k]; /* attached: detached with the trainer */
  }
  if ((status = clt_cluster_agree(cluster, status, e))) goto cleanup;
  if (training && t->balancer.mode == CLT_SPLIT_AUTO && (status = setup_probe(t, e))) goto cleanup;
  if ((status = share_info(t, devices, e))) goto cleanup;
  *out = t;
  return CLT_OK;

cleanup:
  clt_trainer_destroy(t);
  return status;
}

void clt_trainer_destroy(clt_trainer *t) {
  if (!t) return;
  for (int k = 0; k < 2; k++) clt_source_detach(t->source[k]);
  /* The transfer queues may still copy into the ring's staging memory. */
  for (int i = 0; i < t->n; i++) {
    if (t->transfer[i] && !t->replicas[i]->hung) clFinish(t->transfer[i]);
  }
  clt_ring_destroy(t->ring);
  for (int i = 0; i < t->n; i++) {
    if (t->transfer[i] && !t->replicas[i]->hung) clReleaseCommandQueue(t->transfer[i]);
    clt_net_destroy(t->nets[i]);
    clt_replica_destroy(t->replicas[i]);
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
    int status = clt_replica_trace(t->replicas[i], trace, g + 1, label, e);
    if (status) return status;
    /* The overlapped all-reduce's copies and adds run beside the kernels. */
    if (t->transfer[i])
      clt_trace_name(trace, g + 1, CLT_TRACE_TRANSFER, label, "device: all-reduce transfer queue");
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
clt_replica *clt_trainer_replica(const clt_trainer *t, int i) { return t->replicas[i]; }
int clt_trainer_global_batch(const clt_trainer *t) { return t->batch_per_replica * t->total; }
void clt_trainer_check_replicas(clt_trainer *t, int on) { t->check_replicas = on; }
void clt_trainer_progress(clt_trainer *t, FILE *out) { t->progress.out = out; }
void clt_trainer_first_step_notice(clt_trainer *t, clt_notice *n) { t->first_step_notice = n; }
void clt_trainer_capture_logits(clt_trainer *t, float *out) { t->logits = out; }

int clt_trainer_set_state(clt_trainer *t, const float *params, const float *slot0,
                          const float *slot1, clt_err *e) {
  const size_t bytes = t->model->flat_floats * sizeof(float);
  for (int i = 0; i < t->n; i++) {
    clt_net *net = t->nets[i];
    const void *src[3] = {params, slot0, slot1};
    cl_mem dst[3] = {net->params, net->opt_state[0], net->opt_state[1]};
    for (int k = 0; k < 3; k++) {
      cl_int rc = CL_SUCCESS;
      if (!dst[k]) continue; /* an inference-only net has no optimizer state */
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
  clt_net *net = t->nets[first_member(t)];
  const size_t bytes = t->model->flat_floats * sizeof(float);
  void *dst[3] = {params, slot0, slot1};
  cl_mem src[3] = {net->params, net->opt_state[0], net->opt_state[1]};
  for (int k = 0; k < 3; k++) {
    if (!dst[k]) continue;
    cl_int rc = clEnqueueReadBuffer(net->replica->queue, src[k], CL_TRUE, 0, bytes, dst[k], 0, NULL,
                                    NULL);
    if (rc) return clt_replica_fail(net->replica, e, rc, "reading the training state");
  }
  return CLT_OK;
}

/* ---- passes over a dataset, one host thread per replica ------------------------ */

/* A probe of a replica out of the step: asked by the leader, run by the replica's
 * thread, weighed by a later leader. */
enum { PROBE_IDLE, PROBE_ASKED, PROBE_RUNNING, PROBE_DONE };

typedef struct pass {
  clt_trainer *t;
  clt_source *source;
  int train; /* 1: training epoch, 0: evaluation */
  int count; /* examples in the pass */
  int steps;
  const clt_optimizer *opt;
  long first_step; /* optimizer steps taken before the pass's step 0 */
  int skip;        /* steps of the epoch done before this pass (a resumed epoch) */
  atomic_int done; /* steps of the epoch done when the pass ended */
  /* A stop asked for (Ctrl-C): the step after which every replica stops, or -1.
   * Set once, by the step's leader before its barrier, so every rank sees it there. */
  atomic_int stop_after;
  uint64_t seed; /* the run's: Dropout's masks derive from it */
  double t0;
  double allreduce_seconds; /* the leaders' time inside the all-reduce */
  double data_wait_seconds; /* the leaders' time waiting for the source */
  int status[CLT_MAX_REPLICAS];
  clt_err err[CLT_MAX_REPLICAS];
  /* Indexed by the replica's global index (its process's base + its rank): */
  long examples[CLT_MAX_REPLICAS];
  int mismatch_step; /* --check-replicas: first step where replicas differed */
  int dynamic;       /* slices re-balanced every step (auto split, training) */
  int full[CLT_MAX_REPLICAS], tail[CLT_MAX_REPLICAS]; /* fixed slices: full and last batch */
  int next[CLT_MAX_REPLICAS];                         /* dynamic: slices of the coming step */
  double compute[CLT_MAX_REPLICAS];                   /* this step's forward+backward seconds */
  double compute_total[CLT_MAX_REPLICAS];
  /* The all-reduce, per replica: its time in it, the part of that while its own
   * backward pass still ran (overlapped buckets), and its collectives. */
  double ring_seconds[CLT_MAX_REPLICAS], ring_hidden[CLT_MAX_REPLICAS];
  long ring_calls[CLT_MAX_REPLICAS];
  double clock_offset[CLT_MAX_REPLICAS]; /* per local rank: host seconds - device seconds */
  /* Leaving and rejoining (t->leave in a training pass). t->members[s]: the
   * local ranks in step s, written by step s-1's leader before the barrier that
   * ends its re-balance. Ranks out of the step wait on this bench, under mu: */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int over;                             /* the pass has ended (or failed): ranks out return */
  int rejoin_at[CLT_MAX_REPLICAS];      /* the step at which rank rejoins, or -1 */
  int handed;                           /* the state after this step is in t->handoff (-1: none) */
  int probe[CLT_MAX_REPLICAS];          /* PROBE_* */
  int probe_more[CLT_MAX_REPLICAS];     /* asked: examples of a second timing (0: none) ... */
  double probe_limit[CLT_MAX_REPLICAS]; /* ... taken if one example took less than this */
  long probe_step[CLT_MAX_REPLICAS];    /* asked at this optimizer step */
  int probe_points[CLT_MAX_REPLICAS];   /* done: its timings */
  int probe_n[CLT_MAX_REPLICAS][2];
  double probe_secs[CLT_MAX_REPLICAS][2];
  double probe_took[CLT_MAX_REPLICAS], probe_end[CLT_MAX_REPLICAS];
  /* Per local rank, for the epoch's report: */
  int left[CLT_MAX_REPLICAS], joined[CLT_MAX_REPLICAS], probes[CLT_MAX_REPLICAS];
  long left_step[CLT_MAX_REPLICAS], joined_step[CLT_MAX_REPLICAS];
  double probe_seconds[CLT_MAX_REPLICAS];
} pass;

typedef struct worker_arg {
  pass *p;
  int rank;
} worker_arg;

/* One replica's part of one step. */
typedef struct step {
  int s;           /* the step's index in the pass */
  int lead;        /* the step's leader: its first member, which decides for all */
  int batch_first; /* its global batch: examples [batch_first, batch_first + batch) */
  int batch;
  int first, len; /* this replica's slice of it: [first, first + len) */
} step;

static unsigned long long all_ranks(const clt_trainer *t) {
  return t->n >= 64 ? ~0ull : (1ull << t->n) - 1;
}

/* The local ranks taking part in step s (every one, but in a training pass that
 * lets replicas leave). */
static unsigned long long members_of(const pass *p, int s) {
  return p->train && p->t->leave ? p->t->members[s] : all_ranks(p->t);
}

static int lowest(unsigned long long mask) {
  int r = 0;
  while (mask && !(mask & 1)) {
    mask >>= 1;
    r++;
  }
  return r;
}

static int is_member(const pass *p, int rank, int s) {
  return (int)((members_of(p, s) >> rank) & 1);
}

/* Each step's summed loss and correct count over the run's replicas, from the
 * replica-major metrics array (2 floats per slot) of `steps` batches, into
 * out; members (NULL: every replica) says which replicas took part in each step
 * (the slots of one out of it hold older figures). */
static int step_sums(clt_trainer *t, int from, int steps, const unsigned long long *members,
                     double *out, clt_err *e) {
  for (int s = from; s < steps; s++) {
    double l = 0, correct = 0;
    for (int r = 0; r < t->n; r++) {
      if (members && !((members[s] >> r) & 1)) continue;
      const float *m = t->metrics + ((size_t)r * t->slots + s) * 2;
      l += m[0];
      correct += m[1];
    }
    out[(size_t)2 * s] = l;
    out[(size_t)2 * s + 1] = correct;
  }
  return steps > from ? clt_cluster_sum_doubles(t->cluster, out + (size_t)2 * from,
                                                (size_t)2 * (steps - from), e)
                      : CLT_OK;
}

/* The figures of a pass of `steps` batches from its step sums. */
static void sum_metrics(const clt_trainer *t, const double *sums, int steps, int count,
                        double *mean_batch_loss, double *example_loss, double *acc) {
  const int global = clt_trainer_global_batch(t);
  double batch_losses = 0, loss = 0, correct = 0;
  for (int s = 0; s < steps; s++) {
    const double l = sums[(size_t)2 * s];
    correct += sums[(size_t)2 * s + 1];
    const int n = count - s * global < global ? count - s * global : global;
    loss += l;
    batch_losses += l / n;
  }
  *mean_batch_loss = steps ? batch_losses / steps : 0;
  *example_loss = count ? loss / count : 0;
  *acc = count ? correct / count : 0;
}

/* Reads the metrics of slots [0, steps) of the ranks in `ranks`. */
static int read_metrics(clt_trainer *t, unsigned long long ranks, int steps, clt_err *e) {
  for (int r = 0; r < t->n; r++) {
    if (!((ranks >> r) & 1)) continue;
    int status = clt_net_read_metrics(t->nets[r], t->metrics + (size_t)r * t->slots * 2, steps, e);
    if (status) return status;
  }
  return CLT_OK;
}

static int barrier(clt_trainer *t, clt_err *e) {
  return clt_ring_barrier(t->ring) ? clt_fail(e, CLT_ERR_INTERNAL, "aborted") : CLT_OK;
}

static int finish_queue(clt_replica *rep, clt_err *e) {
  cl_int rc = clFinish(rep->queue);
  return rc ? clt_replica_fail(rep, e, rc, "clFinish") : CLT_OK;
}

/* Step s's global batch and this replica's slice of it. */
static step slice_step(const pass *p, int rank, int s) {
  const int global = clt_trainer_global_batch(p->t);
  step st = {.s = s, .lead = lowest(members_of(p, s)), .batch_first = s * global};
  st.batch = p->count - st.batch_first < global ? p->count - st.batch_first : global;
  const int *slices = p->dynamic ? p->next : st.batch == global ? p->full : p->tail;
  const int g = p->t->base + rank; /* slices are the run's, over every process */
  for (int r = 0; r < g; r++) st.first += slices[r];
  st.len = slices[g];
  return st;
}

/* Busy time comes from the events of earlier steps; collecting them waits for
 * those steps, so it is done only when the pending list fills up (a step enqueues
 * a few dozen), not every step. */
static int collect_profile(clt_replica *rep, clt_err *e) {
  if (rep->profile->npending <= CLT_PROFILE_MAX_PENDING - 256) return CLT_OK;
  return clt_replica_profile_collect(rep, e);
}

static int load_slice(pass *p, int rank, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  clt_net *net = t->nets[rank];
  double waited = 0;
  /* A resumed epoch's source was begun at its first remaining example (see
   * clt_trainer_epoch): its steps count from there. */
  int status = clt_source_load(p->source, rank, st->s - p->skip, st->first, st->len, net->input,
                               net->labels, &waited, e);
  if (rank != st->lead) return status;
  p->data_wait_seconds += waited;
  /* Every rank loads every step (a photo source frees a batch once all have):
   * the leader loads the empty slices of the ranks out of the step, whose
   * threads may be busy re-timing their devices. An empty load touches no device. */
  const unsigned long long out = all_ranks(t) & ~members_of(p, st->s);
  for (int r = 0; r < t->n && !status; r++) {
    if ((out >> r) & 1) {
      status = clt_source_load(p->source, r, st->s - p->skip, 0, 0, t->nets[r]->input,
                               t->nets[r]->labels, NULL, e);
    }
  }
  return status;
}

/* A training step whose all-reduce overlaps the backward pass (trainer.h): the
 * markers of its buckets on the replica's queue, and the host times. */
typedef struct overlap {
  cl_event done[CLT_MAX_BUCKETS]; /* bucket b's gradient is final on this replica */
  double c0;                      /* when the forward pass began to be enqueued */
} overlap;

static void release_marks(const clt_trainer *t, overlap *ov) {
  for (int b = 0; ov && b < t->nbuckets; b++) {
    if (ov->done[b]) clReleaseEvent(ov->done[b]);
    ov->done[b] = NULL;
  }
}

/* Host seconds minus the device clock's, read from a marker on the idle queue
 * (NAN when the device does not time markers): the backward pass's end is read
 * from its marker's profiling event, as the host thread may be in the
 * all-reduce of an earlier bucket at that moment. */
static double clock_offset(clt_replica *rep) {
  cl_event ev = NULL;
  cl_ulong end = 0;
  double offset = NAN;
  if (clFinish(rep->queue) != CL_SUCCESS) return offset;
  const double h0 = clt_now_seconds();
  cl_int rc = clEnqueueMarkerWithWaitList(rep->queue, 0, NULL, &ev);
  if (rc == CL_SUCCESS) rc = clWaitForEvents(1, &ev);
  const double h1 = clt_now_seconds();
  if (rc == CL_SUCCESS &&
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) == CL_SUCCESS &&
      end > 0)
    offset = (h0 + h1) / 2 - (double)end * 1e-9;
  if (ev) clReleaseEvent(ev);
  return offset;
}

/* Forward (and in training backward) on the slice; in training also times this
 * replica's compute for the balancer, after the load so a wait is not counted.
 * ov (overlapped steps): the backward pass marks its buckets and is not waited
 * for here (the compute time is taken at its end, in hidden_buckets). */
static int forward_backward(pass *p, int rank, const step *st, overlap *ov, clt_err *e) {
  clt_trainer *t = p->t;
  const double c0 = clt_now_seconds();
  clt_net_set_position(t->nets[rank], p->seed, p->first_step + st->s, st->first);
  /* Losses are divided by the actual global batch, the last partial one included. */
  int status = ov ? clt_net_forward_backward_marked(t->nets[rank], st->len, 1.0f / st->batch, st->s,
                                                    t->buckets, t->nbuckets, ov->done, e)
                  : clt_net_forward_backward(t->nets[rank], st->len, 1.0f / st->batch, st->s,
                                             p->train, e);
  if (status) return status;
  const int g = t->base + rank;
  p->examples[g] += st->len;
  if (!p->train) {
    /* Evaluation runs the examples in order: the slice's global index is its place. */
    if (!t->logits) return CLT_OK;
    float *out = t->logits + (size_t)(st->batch_first + st->first) * t->model->classes;
    return clt_net_read_logits(t->nets[rank], st->len, out, e);
  }
  if (ov) {
    ov->c0 = c0;
    return CLT_OK;
  }
  /* Waiting for the backward pass first keeps compute out of the all-reduce's time
   * (its first download would wait for it anyway) and times this replica's work. */
  if (t->total > 1 && (status = finish_queue(t->replicas[rank], e))) return status;
  if (st->len) slow_down(t, g, p->first_step + st->s + 1);
  p->compute[g] = st->len ? clt_now_seconds() - c0 : 0.0;
  p->compute_total[g] += p->compute[g];
  return CLT_OK;
}

/* --trace: the phase that began at *t0 as a span of the replica's host thread;
 * *t0 moves to now. Nothing when not tracing. */
static void mark(pass *p, int rank, int s, const char *what, double *t0) {
  clt_replica *rep = p->t->replicas[rank];
  if (!rep->trace || !p->train) return;
  if (p->first_step + s - p->t->trace_first >= p->t->trace_steps)
    return; /* past the traced steps */
  const double now = clt_now_seconds();
  clt_replica_trace_span(rep, CLT_TRACE_HOST, what, *t0, now, (int)(p->first_step + s + 1));
  *t0 = now;
}

/* An overlapped step (trainer.h), while the replica's queue runs the backward
 * pass: the all-reduce of every bucket but the last on the transfer queue, each
 * as soon as its gradient is final here (the other members' copies of it arrive
 * as theirs are); then the backward pass's end, which times the compute. */
static int hidden_buckets(pass *p, int rank, const step *st, overlap *ov, clt_err *e) {
  clt_trainer *t = p->t;
  clt_replica *rep = t->replicas[rank];
  clt_net *net = t->nets[rank];
  const int g = t->base + rank, last = t->nbuckets - 1;
  double from[CLT_MAX_BUCKETS], to[CLT_MAX_BUCKETS];
  int status = CLT_OK;
  /* The ring changes members between steps, by the first member staying
   * (change_members), maybe after the others have begun this step: they wait
   * for it at a barrier before their first collective, as the whole-buffer
   * all-reduce's barrier makes them do. */
  if (t->leave && st->s > p->skip && t->members[st->s - 1] != t->members[st->s] &&
      (status = barrier(t, e)))
    return status;
  clt_replica_scope(rep, "all-reduce", "gradients");
  for (int b = 0; b <= last; b++) {
    cl_int rc = clWaitForEvents(1, &ov->done[b]);
    if (rc) {
      clt_ring_abort(t->ring);
      return clt_replica_fail(rep, e, rc, "the backward pass");
    }
    if (b == last) break; /* the last bucket goes after the barrier (all_reduce) */
    from[b] = clt_now_seconds();
    status = clt_ring_allreduce_range(t->ring, rank, net->grads, t->buckets[b].offset,
                                      t->buckets[b].count, t->transfer[rank], ov->done[b], e);
    to[b] = clt_now_seconds();
    if (status) return status;
  }
  /* The backward pass ended at its last marker's end on the device, unless the
   * device does not say: then when this thread saw it. */
  const double seen = clt_now_seconds();
  double end = seen;
  cl_ulong device_end = 0;
  if (isfinite(p->clock_offset[rank]) &&
      clGetEventProfilingInfo(ov->done[last], CL_PROFILING_COMMAND_END, sizeof device_end,
                              &device_end, NULL) == CL_SUCCESS) {
    end = (double)device_end * 1e-9 + p->clock_offset[rank];
    end = end < ov->c0 ? ov->c0 : end > seen ? seen : end;
  }
  double slept = 0;
  if (st->len) {
    const double z0 = clt_now_seconds();
    slow_down(t, g, p->first_step + st->s + 1);
    slept = clt_now_seconds() - z0;
  }
  p->compute[g] = st->len ? end - ov->c0 + slept : 0.0;
  p->compute_total[g] += p->compute[g];
  /* Each bucket's all-reduce is hidden as far as it ran before that end. */
  double spent = 0;
  for (int b = 0; b < last; b++) {
    spent += to[b] - from[b];
    if (from[b] < end) p->ring_hidden[g] += (to[b] < end ? to[b] : end) - from[b];
  }
  p->ring_seconds[g] += spent;
  p->ring_calls[g] += last;
  if (rank == st->lead) p->allreduce_seconds += spent;
  return CLT_OK;
}

/* The replica's queue waits for what its transfer queue has enqueued. */
static int join_queues(clt_replica *rep, cl_command_queue transfer, clt_err *e) {
  cl_event ev = NULL;
  cl_int rc = clEnqueueMarkerWithWaitList(transfer, 0, NULL, &ev);
  if (rc == CL_SUCCESS) rc = clFlush(transfer);
  if (rc == CL_SUCCESS) rc = clEnqueueBarrierWithWaitList(rep->queue, 1, &ev, NULL);
  if (ev) clReleaseEvent(ev);
  return rc ? clt_replica_fail(rep, e, rc, "ordering the update after the all-reduce") : CLT_OK;
}

/* *t0: --trace's phase clock (the wait for the slowest replica is its own span).
 * ov: an overlapped step, whose last bucket (the first layers') is left. */
static int all_reduce(pass *p, int rank, const step *st, overlap *ov, double *t0, clt_err *e) {
  clt_trainer *t = p->t;
  clt_replica *rep = t->replicas[rank];
  cl_mem grads = t->nets[rank]->grads;
  const int g = t->base + rank;
  /* All replicas done: what follows is the all-reduce alone, not waiting for a
   * slower replica's backward pass. */
  int status = t->n > 1 ? barrier(t, e) : CLT_OK;
  if (status) return status;
  if (t->n > 1) mark(p, rank, st->s, "wait for the slowest replica", t0);
  const double a0 = clt_now_seconds();
  clt_replica_scope(rep, "all-reduce", "gradients");
  if (ov) {
    /* The last bucket goes on the replica's own queue, idle now (the backward
     * pass is done): no second queue to wait on. That queue's next commands
     * (the gradient check, the update) read the other buckets too, so they wait
     * for the transfer queue's (done by now: each collective waits for its copies). */
    const clt_bucket *b = &t->buckets[t->nbuckets - 1];
    status = join_queues(rep, t->transfer[rank], e);
    if (!status)
      status = clt_ring_allreduce_range(t->ring, rank, grads, b->offset, b->count, NULL, NULL, e);
    if (!status) status = clt_ring_allreduce_across(t->ring, rank, grads, e);
    if (status) clt_ring_abort(t->ring);
  } else {
    status = clt_ring_allreduce(t->ring, rank, grads, e);
  }
  if (status) return status;
  const double spent = clt_now_seconds() - a0;
  p->ring_seconds[g] += spent;
  p->ring_calls[g]++;
  if (rank == st->lead) p->allreduce_seconds += spent;
  return CLT_OK;
}

/* Process 0's slices (of the run's replicas) to every process. */
static int share_slices(clt_trainer *t, int *slices, clt_err *e) {
  return clt_cluster_bcast(t->cluster, slices, (size_t)t->total * sizeof *slices, e);
}

/* The leader weighs the probes that have ended, then (before a full batch, no
 * stop asked) lets replicas leave or rejoin: returns the members of step s+1,
 * having asked those rejoining to wait for the state at the end of step s. */
static unsigned long long regroup(pass *p, int s, int full) {
  clt_trainer *t = p->t;
  clt_balancer *b = &t->balancer;
  const double now = clt_now_seconds();
  unsigned long long members = t->members[s];
  pthread_mutex_lock(&p->mu);
  for (int r = 0; r < t->n; r++) {
    if (p->probe[r] != PROBE_DONE) continue;
    clt_balancer_probed(b, r, p->probe_points[r], p->probe_n[r], p->probe_secs[r], p->probe_took[r],
                        p->probe_end[r]);
    p->probe[r] = PROBE_IDLE;
  }
  pthread_mutex_unlock(&p->mu);
  if (!full || atomic_load(&p->stop_after) >= 0 ||
      !clt_balancer_regroup(b, clt_trainer_global_batch(t), now))
    return members;
  unsigned long long next = 0;
  for (int r = 0; r < t->n; r++) next |= (unsigned long long)clt_balancer_member(b, r) << r;
  const long first_out = p->first_step + s + 2; /* the optimizer step of step s+1 */
  pthread_mutex_lock(&p->mu);
  for (int r = 0; r < t->n; r++) {
    const unsigned long long bit = 1ull << r;
    if ((next & bit) && !(members & bit)) {
      p->rejoin_at[r] = s + 1;
      p->joined[r]++;
      p->joined_step[r] = first_out;
    } else if (!(next & bit) && (members & bit)) {
      p->left[r]++;
      p->left_step[r] = first_out;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return next;
}

/* The leader asks the ranks out of step s+1 that are due to be re-timed for a
 * probe, when the pass has time left for one (the pass's end waits for it):
 * one example, and a slice of the members' size too when one example takes less
 * than the members' predicted step (else it cannot get even one). */
static void ask_probes(pass *p, int s, unsigned long long members) {
  clt_trainer *t = p->t;
  clt_balancer *b = &t->balancer;
  const double now = clt_now_seconds(), step = clt_balancer_predict(b, p->next);
  pthread_mutex_lock(&p->mu);
  for (int r = 0; r < t->n; r++) {
    if ((members >> r) & 1 || p->probe[r] != PROBE_IDLE || !clt_balancer_probe_due(b, r, now))
      continue;
    if ((p->steps - s - 1) * step < clt_balancer_time(b, r, 1)) continue;
    p->probe[r] = PROBE_ASKED;
    p->probe_more[r] = t->caps[r] < t->batch_per_replica ? t->caps[r] : t->batch_per_replica;
    p->probe_limit[r] = step;
    p->probe_step[r] = p->first_step + s + 1;
  }
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* Every replica's time of this step is in: the leader re-balances the next step
 * while the others wait (microseconds against a step's milliseconds). Across
 * processes, process 0 decides from every replica's time and tells the others. */
static int rebalance(pass *p, int rank, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  int status = barrier(t, e);
  if (status) return status;
  if (rank == st->lead && clt_cluster_size(t->cluster) > 1) {
    double mine[CLT_MAX_REPLICAS] = {0};
    memcpy(mine, p->compute + t->base, (size_t)t->n * sizeof *mine);
    status = gather_replicas(t, mine, sizeof mine[0], p->compute, e);
  }
  if (rank == st->lead && !status) {
    const int global = clt_trainer_global_batch(t);
    clt_balancer_observe(&t->balancer, p->next, p->compute);
    const int next_first = st->batch_first + global;
    const int next_batch = p->count - next_first < global ? p->count - next_first : global;
    if (next_batch > 0) {
      unsigned long long members = all_ranks(t);
      if (t->leave) members = t->members[st->s + 1] = regroup(p, st->s, next_batch == global);
      clt_balancer_split(&t->balancer, next_batch, p->next);
      status = share_slices(t, p->next, e);
      if (t->leave && atomic_load(&p->stop_after) < 0) ask_probes(p, st->s, members);
    }
  }
  if (status) {
    clt_ring_abort(t->ring);
    return status;
  }
  return barrier(t, e);
}

/* Counts the reduced gradient's non-finite values (read after the epoch), then
 * the optimizer's update. */
static int update(pass *p, int rank, int s, clt_err *e) {
  clt_net *net = p->t->nets[rank];
  int status = clt_net_check_grads(net, s, e);
  if (!status) status = clt_net_update(net, p->opt, p->first_step + s + 1, e);
  if (status) return status;
  cl_int rc = clFlush(net->replica->queue);
  return rc ? clt_replica_fail(net->replica, e, rc, "clFlush") : CLT_OK;
}

/* --check-replicas: every member's parameters must equal the leader's bit for bit. */
static int check_identical(pass *p, int rank, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  const int s = st->s;
  const size_t floats = t->model->flat_floats;
  int status = clt_net_read_params(t->nets[rank], t->check_params + rank * floats, e);
  if (!status) status = barrier(t, e);
  if (status) return status;
  if (rank == st->lead) {
    const unsigned long long members = members_of(p, s);
    const float *mine = t->check_params + (size_t)st->lead * floats;
    for (int r = 0; r < t->n; r++) {
      if ((members >> r) & 1 &&
          memcmp(mine, t->check_params + r * floats, floats * sizeof(float)) != 0 &&
          p->mismatch_step < 0) {
        p->mismatch_step = s;
      }
    }
  }
  if (rank == st->lead && clt_cluster_size(t->cluster) > 1) {
    /* Across processes: a hash of the parameters each holds, and each one's own
     * verdict, so every process reaches the same one. */
    uint64_t mine[2] = {1469598103934665603ull, (uint64_t)(p->mismatch_step >= 0)};
    uint64_t all[2 * CLT_MAX_REPLICAS];
    const unsigned char *b = (const unsigned char *)(t->check_params + (size_t)st->lead * floats);
    for (size_t i = 0; i < floats * sizeof(float); i++)
      mine[0] = (mine[0] ^ b[i]) * 1099511628211ull;
    status = clt_cluster_allgather(t->cluster, mine, sizeof mine, all, e);
    for (int r = 0; r < clt_cluster_size(t->cluster) && !status; r++) {
      if ((all[(size_t)2 * r] != all[0] || all[(size_t)2 * r + 1]) && p->mismatch_step < 0)
        p->mismatch_step = s;
    }
    if (status) clt_ring_abort(t->ring);
    else if (p->mismatch_step >= 0) clt_cluster_known(t->cluster);
  }
  if (status || (status = barrier(t, e))) return status;
  if (p->mismatch_step >= 0) {
    return clt_fail(e, CLT_ERR_NUMERIC,
                    "--check-replicas: replicas hold different parameters after step %d",
                    p->mismatch_step + 1);
  }
  return CLT_OK;
}

/* After the update: --check-replicas, and the end of start-up. */
static int check_step(pass *p, int rank, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  const int s = st->s;
  int status = t->check_replicas ? check_identical(p, rank, st, e) : CLT_OK;
  if (status || rank != st->lead) return status;
  if (t->step_time) t->step_time[s] = clt_now_seconds();
  if (t->trace && p->first_step + s + 1 - t->trace_first >= t->trace_steps)
    clt_trace_stop(t->trace);
  if (t->first_step_done != 0) return CLT_OK;
  /* Start-up ends when the first step has run (PoCL compiles kernels at their
   * first launch, so this includes that): one wait in the trainer's life. */
  if ((status = finish_queue(t->replicas[rank], e))) return status;
  t->first_step_done = clt_now_seconds();
  clt_notice_done(t->first_step_notice);
  return CLT_OK;
}

/* The leader redraws the progress bar with the running loss and accuracy. */
static int show_progress(pass *p, const step *st, clt_err *e) {
  clt_trainer *t = p->t;
  /* Across processes the running figures would need a collective per draw: no bar. */
  if (!t->progress.out || clt_cluster_size(t->cluster) > 1 ||
      !clt_progress_due(&t->progress, st->s + 1, p->steps))
    return CLT_OK;
  const double elapsed = clt_now_seconds() - p->t0;
  /* Not the ranks out: their threads may be probing (their figures of the steps
   * they were in were read when they left). */
  int status = read_metrics(t, members_of(p, st->s), st->s + 1, e);
  if (!status)
    status = step_sums(t, p->skip, st->s + 1, t->leave ? t->members : NULL, t->train_sums, e);
  if (status) return status;
  double mean_loss, example_loss, acc;
  sum_metrics(t, t->train_sums, st->s + 1, st->batch_first + st->batch, &mean_loss, &example_loss,
              &acc);
  clt_progress_draw(&t->progress, st->s + 1, p->steps, elapsed, mean_loss, acc);
  return CLT_OK;
}

/* The state a member holds after its update (parameters, BatchNormalization's
 * statistics among them, and the optimizer's slots): read into t->handoff
 * (take 0, a member handing it over) or written from it (take 1, a rank
 * rejoining, which then holds the members' bits). */
static int move_state(clt_trainer *t, int rank, int take, clt_err *e) {
  clt_net *net = t->nets[rank];
  const size_t floats = t->model->flat_floats, bytes = floats * sizeof(float);
  cl_mem bufs[1 + CLT_OPT_SLOTS] = {net->params};
  for (int k = 0; k < CLT_OPT_SLOTS; k++) bufs[1 + k] = net->opt_state[k];
  for (int k = 0; k < 1 + CLT_OPT_SLOTS; k++) {
    if (!bufs[k]) continue;
    float *host = t->handoff + k * floats;
    cl_command_queue q = net->replica->queue;
    cl_int rc = take ? clEnqueueWriteBuffer(q, bufs[k], CL_TRUE, 0, bytes, host, 0, NULL, NULL)
                     : clEnqueueReadBuffer(q, bufs[k], CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    if (rc) {
      return clt_replica_fail(net->replica, e, rc,
                              take ? "writing the state to rejoin"
                                   : "reading the state for a replica rejoining");
    }
  }
  return CLT_OK;
}

/* The end of step s when the members change for step s+1: a rank leaving keeps
 * its figures of the pass on the host; the first rank staying hands the state to
 * those rejoining and re-forms the ring. The ring changes here, after the step's
 * last barrier and before any member reaches the next one (ring.h). */
static int change_members(pass *p, int rank, int s, clt_err *e) {
  clt_trainer *t = p->t;
  if (s + 1 >= p->steps || t->members[s] == t->members[s + 1]) return CLT_OK;
  const unsigned long long now = t->members[s], next = t->members[s + 1];
  if (!((next >> rank) & 1)) return read_metrics(t, 1ull << rank, s + 1, e);
  if (rank != lowest(now & next)) return CLT_OK;
  int status = next & ~now ? move_state(t, rank, 0, e) : CLT_OK;
  if (!status) status = clt_ring_set_members(t->ring, next, e);
  if (status) return status;
  pthread_mutex_lock(&p->mu);
  p->handed = s;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return CLT_OK;
}

/* Times forward, backward and update of n examples on local replica `rank`, on
 * whatever its input holds (an old batch, or zeros): only its speed matters, and
 * the state it changes is replaced before the replica next trains. `step`: the
 * optimizer step, for the test knob. */
static int time_examples(clt_trainer *t, int rank, int n, const clt_optimizer *opt, long step,
                         double *seconds, clt_err *e) {
  clt_net *net = t->nets[rank];
  const double t0 = clt_now_seconds();
  clt_net_set_position(net, 0, 0, 0);
  int status = clt_net_forward_backward(net, n, 1.0f / (float)n, t->slots, 1, e);
  if (!status) status = clt_net_update(net, opt, 1, e);
  if (!status) status = finish_queue(net->replica, e);
  if (!status) slow_down(t, t->base + rank, step);
  *seconds = clt_now_seconds() - t0;
  return status;
}

/* A rank out of the step re-times its device as the leader asked, between the
 * members' steps. */
static int run_probe(pass *p, int rank, clt_err *e) {
  clt_trainer *t = p->t;
  clt_replica *rep = t->replicas[rank];
  const double t0 = clt_now_seconds();
  int points = 1, n[2] = {1, p->probe_more[rank]};
  double secs[2] = {0, 0};
  clt_ring_outside(t->ring, rank, "a speed probe");
  clt_replica_scope(rep, "speed probe", "out of the step");
  int status = time_examples(t, rank, 1, p->opt, p->probe_step[rank], &secs[0], e);
  if (!status && n[1] > 1 && secs[0] < p->probe_limit[rank]) {
    status = time_examples(t, rank, n[1], p->opt, p->probe_step[rank], &secs[1], e);
    points = 2;
  }
  if (!status) status = clt_replica_profile_collect(rep, e);
  clt_ring_outside(t->ring, rank, NULL);
  const double t1 = clt_now_seconds();
  if (rep->trace && p->probe_step[rank] - t->trace_first <= t->trace_steps)
    clt_replica_trace_span(rep, CLT_TRACE_HOST, "speed probe (out of the step)", t0, t1,
                           (int)p->probe_step[rank]);
  pthread_mutex_lock(&p->mu);
  p->probe[rank] = PROBE_DONE;
  p->probe_points[rank] = points;
  memcpy(p->probe_n[rank], n, sizeof n);
  memcpy(p->probe_secs[rank], secs, sizeof secs);
  p->probe_took[rank] = t1 - t0;
  p->probe_end[rank] = t1;
  p->probes[rank]++;
  p->probe_seconds[rank] += t1 - t0;
  pthread_mutex_unlock(&p->mu);
  return status;
}

/* Rank is out of step *s: it waits here for a probe to run, for its re-admission
 * (then *s is the step it rejoins at, its state received), or for the pass to end
 * (*s = p->steps). */
static int sit_out(pass *p, int rank, int *s, clt_err *e) {
  clt_trainer *t = p->t;
  int status = CLT_OK;
  pthread_mutex_lock(&p->mu);
  while (!p->over && !status) {
    if (p->probe[rank] == PROBE_ASKED) {
      p->probe[rank] = PROBE_RUNNING;
      pthread_mutex_unlock(&p->mu);
      status = run_probe(p, rank, e);
      pthread_mutex_lock(&p->mu);
    } else if (p->rejoin_at[rank] >= 0 && p->handed == p->rejoin_at[rank] - 1) {
      const int at = p->rejoin_at[rank];
      p->rejoin_at[rank] = -1;
      pthread_mutex_unlock(&p->mu);
      clt_ring_outside(t->ring, rank, "taking the state to rejoin");
      status = move_state(t, rank, 1, e);
      clt_ring_outside(t->ring, rank, NULL);
      *s = at;
      return status;
    } else {
      pthread_cond_wait(&p->cv, &p->mu);
    }
  }
  pthread_mutex_unlock(&p->mu);
  *s = p->steps;
  return status;
}

/* Ends the bench: ranks out of the step return once their probe is done. */
static void close_bench(pass *p) {
  pthread_mutex_lock(&p->mu);
  p->over = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* Waits for the replica's work and collects its profile; on failure wakes the
 * other replicas wherever they wait. */
static int end_pass(pass *p, int rank, int status, clt_err *e) {
  clt_replica *rep = p->t->replicas[rank];
  close_bench(p);
  if (!status) status = finish_queue(rep, e);
  cl_command_queue transfer = p->t->transfer[rank];
  if (!status && transfer) {
    cl_int rc = clFinish(transfer);
    if (rc) status = clt_replica_fail(rep, e, rc, "clFinish (the transfer queue)");
  }
  if (!status) status = clt_replica_profile_collect(rep, e);
  if (status) {
    clt_ring_abort(p->t->ring);
    clt_source_cancel(p->source);
  }
  return status;
}

/* The leader asks, before step s's all-reduce, whether to stop after this step: a
 * signal was received (in any process of an MPI run: one sum per step). The
 * all-reduce's barrier then shows every rank the answer. */
static int stop_vote(pass *p, int s, clt_err *e) {
  clt_interrupt_step(p->first_step + s + 1);
  int asked = clt_interrupt_signal() != 0;
  int status = clt_cluster_any(p->t->cluster, &asked, e);
  if (status) {
    clt_ring_abort(p->t->ring);
    return status;
  }
  if (asked && atomic_load(&p->stop_after) < 0) atomic_store(&p->stop_after, s);
  return CLT_OK;
}

/* Whether training steps overlap the all-reduce with the backward pass. */
static int overlapped(const pass *p) { return p->train && p->t->nbuckets > 0; }

/* A member's step s; *stop: the pass stops after it. */
static int run_step(pass *p, int rank, int s, int *stop, clt_err *e) {
  clt_trainer *t = p->t;
  const step st = slice_step(p, rank, s);
  if (p->train) t->replicas[rank]->step = p->first_step + s + 1; /* for CLTRAIN_FAULT */
  double t0 = t->replicas[rank]->trace ? clt_now_seconds() : 0;
  overlap marks = {0};
  overlap *ov = overlapped(p) ? &marks : NULL;
  int status = collect_profile(t->replicas[rank], e);
  if (!status) status = load_slice(p, rank, &st, e);
  mark(p, rank, s, "load", &t0);
  if (!status) status = forward_backward(p, rank, &st, ov, e);
  if (!status && ov) status = hidden_buckets(p, rank, &st, ov, e);
  mark(p, rank, s, "forward and backward", &t0);
  if (status || !p->train) {
    release_marks(t, ov);
    return status;
  }
  if (rank == st.lead) status = stop_vote(p, s, e);
  if (!status) status = all_reduce(p, rank, &st, ov, &t0, e);
  release_marks(t, ov);
  mark(p, rank, s, "all-reduce", &t0);
  if (!status && p->dynamic) status = rebalance(p, rank, &st, e);
  if (p->dynamic) mark(p, rank, s, "re-balance", &t0);
  if (!status) status = update(p, rank, s, e);
  if (!status) status = check_step(p, rank, &st, e);
  mark(p, rank, s, "update and checks", &t0);
  if (!status && rank == st.lead) status = show_progress(p, &st, e);
  if (!status && t->leave) status = change_members(p, rank, s, e);
  *stop = atomic_load(&p->stop_after) == s;
  return status;
}

static int run_worker(pass *p, int rank, clt_err *e) {
  int status = CLT_OK, stop = 0;
  if (overlapped(p)) p->clock_offset[rank] = clock_offset(p->t->replicas[rank]);
  for (int s = p->skip; s < p->steps && !status && !stop;) {
    if (!is_member(p, rank, s)) {
      status = sit_out(p, rank, &s, e);
      continue;
    }
    status = run_step(p, rank, s, &stop, e);
    atomic_store(&p->done, ++s);
  }
  return end_pass(p, rank, status, e);
}

static void *worker(void *arg) {
  worker_arg *w = arg;
  w->p->status[w->rank] = run_worker(w->p, w->rank, &w->p->err[w->rank]);
  return NULL;
}

/* Runs a pass on every replica; on failure reports the first error that is not
 * merely another rank's abort. */
static int run_pass(pass *p, clt_err *e) {
  clt_trainer *t = p->t;
  pthread_t threads[CLT_MAX_REPLICAS];
  worker_arg args[CLT_MAX_REPLICAS];
  int started = 0;
  const int global = clt_trainer_global_batch(t);
  const int last = p->count % global ? p->count % global : global;
  p->dynamic = p->train && t->total > 1 && t->balancer.mode == CLT_SPLIT_AUTO;
  int status = CLT_OK;
  if (p->dynamic) {
    const int left = p->count - p->skip * global; /* a resumed epoch starts at step skip */
    clt_balancer_split(&t->balancer, left < global ? left : global, p->next);
    status = share_slices(t, p->next, e);
  } else {
    /* Fixed for the pass; evaluation under auto uses the latest estimates (and
     * gives the replicas out of the step, which hold an old state, nothing). */
    clt_balancer_split(&t->balancer, global, p->full);
    clt_balancer_split(&t->balancer, last, p->tail);
    if (t->balancer.mode == CLT_SPLIT_AUTO) clt_balancer_split(&t->balancer, global, p->full);
    status = share_slices(t, p->full, e);
    if (!status) status = share_slices(t, p->tail, e);
  }
  if (status) return status;
  if (p->train && t->leave) {
    /* The members at the start: the balancer's, and the ring runs over them. */
    unsigned long long members = 0;
    for (int r = 0; r < t->n; r++)
      members |= (unsigned long long)clt_balancer_member(&t->balancer, r) << r;
    for (int s = p->skip; s < p->steps; s++) t->members[s] = members;
    if ((status = clt_ring_set_members(t->ring, members, e))) return status;
  }
  p->source = t->source[p->train ? 0 : 1];
  if (!p->source) return clt_fail(e, CLT_ERR_ARG, "no %s set", p->train ? "training" : "test");
  if ((status = clt_source_begin(p->source, t->order, e))) return status;
  t->progress.last_draw = 0;
  p->t0 = clt_now_seconds();
  p->mismatch_step = -1;
  p->handed = -1;
  atomic_init(&p->done, p->skip);
  for (int r = 0; r < t->n; r++) p->rejoin_at[r] = -1;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  for (int r = 0; r < t->n; r++) {
    args[r] = (worker_arg){p, r};
    if (pthread_create(&threads[r], NULL, worker, &args[r]) != 0) {
      clt_ring_abort(t->ring);
      close_bench(p);
      p->status[r] = clt_fail(&p->err[r], CLT_ERR_NOMEM,
                              "cannot start a host thread for replica %d", r);
      break;
    }
    started++;
  }
  /* Joined under the all-reduce's watchdog, which leaves a hung replica's thread
   * behind (watchdog.h); so one replica has a thread of its own too. */
  status = clt_ring_join(t->ring, threads, started, e);
  if (status) return status; /* a thread may be left behind: the bench stays */
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  for (int r = 0; r < t->n; r++) {
    /* A probe that ended after the last step's re-balance counts all the same. */
    if (p->train && t->leave && p->probe[r] == PROBE_DONE) {
      clt_balancer_probed(&t->balancer, r, p->probe_points[r], p->probe_n[r], p->probe_secs[r],
                          p->probe_took[r], p->probe_end[r]);
    }
  }
  int chosen = -1;
  for (int r = 0; r < t->n; r++) {
    if (!p->status[r]) continue;
    if (chosen < 0 ||
        (p->err[chosen].code == CLT_ERR_INTERNAL && p->err[r].code != CLT_ERR_INTERNAL)) {
      chosen = r;
    }
  }
  if (chosen < 0) return CLT_OK;
  *e = p->err[chosen];
  return p->status[chosen];
}

/* Per replica of the run, summed over the processes: examples, compute and busy
 * time, and the leaving and probing figures. */
enum { STAT_FIELDS = 13 };

/* Each replica's examples and times in res, over every process. */
static int replica_stats(clt_trainer *t, const pass *p, clt_epoch_result *res, clt_err *e) {
  double v[STAT_FIELDS * CLT_MAX_REPLICAS] = {0};
  for (int r = 0; r < t->n; r++) {
    const int g = t->base + r;
    const clt_profile *prof = t->replicas[r]->profile;
    double *x = v + (size_t)STAT_FIELDS * g;
    x[0] = (double)p->examples[g];
    x[1] = p->compute_total[g];
    for (int i = 0; i < prof->nnames; i++) x[2] += prof->seconds[i];
    x[3] = clt_balancer_member(&t->balancer, g);
    x[4] = p->left[r];
    x[5] = p->joined[r];
    x[6] = (double)p->left_step[r];
    x[7] = (double)p->joined_step[r];
    x[8] = p->probes[r];
    x[9] = p->probe_seconds[r];
    x[10] = p->ring_seconds[g];
    x[11] = p->ring_hidden[g];
    x[12] = (double)p->ring_calls[g];
  }
  int status = clt_cluster_sum_doubles(t->cluster, v, (size_t)STAT_FIELDS * t->total, e);
  for (int g = 0; g < t->total && !status; g++) {
    const double *x = v + (size_t)STAT_FIELDS * g;
    clt_replica_stats *st = &res->replicas[g];
    st->examples = (long)x[0];
    st->compute_seconds = x[1];
    st->busy_seconds = x[2];
    st->member = x[3] != 0;
    st->left = (int)x[4];
    st->joined = (int)x[5];
    st->left_step = (long)x[6];
    st->joined_step = (long)x[7];
    st->probes = (int)x[8];
    st->probe_seconds = x[9];
    st->allreduce_seconds = x[10];
    st->allreduce_hidden_seconds = x[11];
    st->allreduce_calls = (long)x[12];
  }
  return status;
}

/* ---- timing the devices before the first step --------------------------------- */

typedef struct probe_job {
  clt_trainer *t;
  int rank;
  int points, n[2];
  double seconds[2];
  int status;
  clt_err err;
} probe_job;

/* A set-up probe takes a second timing on a full slice when that is predicted
 * to take at most this long. */
#define SETUP_PROBE_BUDGET 1.0

/* One replica's set-up probe: a warm-up run of one example (drivers such as PoCL
 * compile a kernel at its first launch), then one example timed, then (when
 * cheap) a warm-up and a timing of a full slice. Adam's update: the costliest. */
static void *setup_probe_thread(void *arg) {
  probe_job *j = arg;
  clt_trainer *t = j->t;
  const clt_optimizer adam = clt_optimizer_defaults(CLT_OPT_ADAM);
  double ignored;
  const int more = t->caps[j->rank] < t->batch_per_replica ? t->caps[j->rank]
                                                           : t->batch_per_replica;
  clt_replica_scope(t->replicas[j->rank], "speed probe", "set-up");
  j->status = time_examples(t, j->rank, 1, &adam, 0, &ignored, &j->err);
  if (!j->status) j->status = time_examples(t, j->rank, 1, &adam, 0, &j->seconds[0], &j->err);
  j->n[0] = 1;
  j->points = 1;
  if (!j->status && more > 1 && j->seconds[0] * more <= SETUP_PROBE_BUDGET) {
    j->status = time_examples(t, j->rank, more, &adam, 0, &ignored, &j->err);
    if (!j->status) j->status = time_examples(t, j->rank, more, &adam, 0, &j->seconds[1], &j->err);
    j->n[1] = more;
    j->points = 2;
  }
  if (!j->status) j->status = clt_replica_profile_collect(t->replicas[j->rank], &j->err);
  return NULL;
}

/* Times every replica (all at once, as they train) before the first step, so
 * --split auto starts from their speeds instead of equal slices, and a replica
 * too slow to help is out of the step from the first one. The state the probes
 * change is set afterwards (clt_trainer_set_state). Collective under MPI. */
static int setup_probe(clt_trainer *t, clt_err *e) {
  const double t0 = clt_now_seconds();
  probe_job jobs[CLT_MAX_REPLICAS];
  pthread_t threads[CLT_MAX_REPLICAS];
  int started = 0, status = CLT_OK;
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < t->n; r++) {
    jobs[r].t = t;
    jobs[r].rank = r;
    if (pthread_create(&threads[r], NULL, setup_probe_thread, &jobs[r]) != 0) {
      status = clt_fail(e, CLT_ERR_NOMEM, "cannot start a host thread for replica %d", r);
      break;
    }
    started++;
  }
  for (int r = 0; r < started; r++) pthread_join(threads[r], NULL);
  for (int r = 0; r < started && !status; r++) {
    if (jobs[r].status) {
      *e = jobs[r].err;
      status = jobs[r].status;
    }
  }
  if ((status = clt_cluster_agree(t->cluster, status, e))) return status;
  /* Every process feeds the same timings to its balancer. */
  double mine[5 * CLT_MAX_REPLICAS] = {0}, all[5 * CLT_MAX_REPLICAS] = {0};
  for (int r = 0; r < t->n; r++) {
    const double x[5] = {jobs[r].points, jobs[r].n[0], jobs[r].n[1], jobs[r].seconds[0],
                         jobs[r].seconds[1]};
    memcpy(mine + (size_t)5 * (t->base + r), x, sizeof x);
  }
  if ((status = clt_cluster_sum_doubles(t->cluster, mine, (size_t)5 * t->total, e))) return status;
  memcpy(all, mine, sizeof all);
  const double now = clt_now_seconds();
  for (int g = 0; g < t->total; g++) {
    const double *x = all + (size_t)5 * g;
    const int n[2] = {(int)x[1], (int)x[2]};
    clt_balancer_probed(&t->balancer, g, (int)x[0], n, x + 3, 0, now);
  }
  if (t->leave) clt_balancer_regroup(&t->balancer, clt_trainer_global_batch(t), now);
  t->probe_seconds = clt_now_seconds() - t0;
  return CLT_OK;
}

double clt_trainer_probe_seconds(const clt_trainer *t) { return t->probe_seconds; }
int clt_trainer_buckets(const clt_trainer *t) { return t->nbuckets; }

/* Reverses a[from, to). */
static void reverse(int *a, int from, int to) {
  for (int i = from, j = to - 1; i < j; i++, j--) {
    const int x = a[i];
    a[i] = a[j];
    a[j] = x;
  }
}

void clt_trainer_resume_epoch(clt_trainer *t, int steps_done, const double *sums) {
  t->resume_skip = steps_done;
  t->resume_sums = (double *)sums;
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
  p->count = count;
  p->steps = (count + global - 1) / global;
  p->opt = opt;
  p->seed = seed;
  atomic_init(&p->stop_after, -1);
  if (skip < 0 || skip >= p->steps) {
    const int steps = p->steps;
    free(p);
    return clt_fail(e, CLT_ERR_ARG, "cannot resume epoch %d at step %d: it has %d steps", epoch + 1,
                    skip + 1, steps);
  }
  p->skip = skip;
  p->first_step = *step - skip; /* the optimizer step of the epoch's step 0 */
  if (t->check_replicas && !t->check_params) {
    t->check_params = malloc((size_t)t->n * t->model->flat_floats * sizeof(float));
    if (!t->check_params) {
      free(p);
      return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for --check-replicas");
    }
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
  for (int r = 0; r < t->n; r++) {
    clt_profile *prof = t->replicas[r]->profile;
    for (int i = 0; i < prof->nnames; i++) prof->seconds[i] = 0, prof->calls[i] = 0;
  }
  int status = run_pass(p, e);
  res->seconds = clt_now_seconds() - p->t0;
  /* A pass that did not run to the source's end leaves it mid-pass. */
  const int done = atomic_load(&p->done);
  if (!status && (skip || done < p->steps)) clt_source_cancel(p->source);
  if (!status) status = read_metrics(t, all_ranks(t), done, e);
  for (int r = 0; r < t->n && !status; r++) {
    status = clt_net_read_grad_checks(t->nets[r], t->checks + (size_t)r * t->slots, done, e);
  }
  if (!status) status = step_sums(t, skip, done, t->leave ? t->members : NULL, t->train_sums, e);
  if (!status) status = replica_stats(t, p, res, e);
  if (!status) {
    double example_loss;
    sum_metrics(t, t->train_sums, done, count, &res->train_loss, &example_loss, &res->train_acc);
    for (int s = skip; s < done && res->bad_step < 0; s++) {
      /* The reduced gradient's check is the step's leader's, the same in every
       * process (and every member). */
      const float check = t->checks[(size_t)lowest(members_of(p, s)) * t->slots + s];
      if (!isfinite(t->train_sums[(size_t)2 * s]) || check != 0) res->bad_step = s;
    }
    res->allreduce_seconds = p->allreduce_seconds;
    res->cross_seconds = clt_ring_take_cross_seconds(t->ring);
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

int clt_trainer_evaluate(clt_trainer *t, double *loss, double *acc, clt_err *e) {
  const int count = set_count(t, 1);
  const int global = clt_trainer_global_batch(t);
  pass *p = calloc(1, sizeof *p);
  if (!p) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  p->t = t;
  p->count = count;
  p->steps = (count + global - 1) / global;
  for (int i = 0; i < count; i++) t->order[i] = i;
  const int cluster = clt_cluster_size(t->cluster) > 1;
  const size_t logit_floats = (size_t)count * t->model->classes;
  int status = CLT_OK;
  if (t->logits && cluster) {
    /* Each process fills in its replicas' examples; the sum gives everyone all. */
    memset(t->logits, 0, logit_floats * sizeof *t->logits);
    status = clt_cluster_reserve(t->cluster, logit_floats, e);
  }
  if (!status) status = run_pass(p, e);
  if (!status) status = read_metrics(t, all_ranks(t), p->steps, e);
  if (!status) status = step_sums(t, 0, p->steps, NULL, t->eval_sums, e);
  if (!status && t->logits && cluster)
    status = clt_cluster_sum(t->cluster, t->logits, logit_floats, e);
  if (!status) {
    double mean_batch_loss;
    sum_metrics(t, t->eval_sums, p->steps, count, &mean_batch_loss, loss, acc);
  }
  free(p);
  return status;
}
