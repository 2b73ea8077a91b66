#define _POSIX_C_SOURCE 200809L
#include "trainer.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"
#include "timing.h"

struct clt_trainer {
  const clt_model *model;
  int n;
  int batch_per_replica;
  int max_examples;
  int slots; /* metric slots: steps of the longest pass */
  clt_replica *replicas[CLT_MAX_REPLICAS];
  clt_net *nets[CLT_MAX_REPLICAS];
  clt_device_data train[CLT_MAX_REPLICAS], test[CLT_MAX_REPLICAS];
  clt_loader *loader[2];  /* streamed training and test sets, or NULL */
  int loader_count[2];
  clt_ring *ring;
  clt_balancer balancer;
  int *order;      /* host copy of the current example order */
  float *metrics;  /* 2 * slots per replica, read back after a pass */
  float *checks;   /* slots per replica */
  float *check_params; /* flat_floats per replica, for --check-replicas */
  int check_replicas;
  FILE *progress;
  double first_step_done; /* when the trainer's first step had run (0: not yet) */
};

static int create(const clt_model *m, const clt_device *const *devices, int n,
                  int batch_per_replica, int max_examples, clt_split_mode split,
                  const double *weights, int train, clt_trainer **out, clt_err *e);

int clt_trainer_create(const clt_model *m, const clt_device *const *devices, int n,
                       int batch_per_replica, int max_examples, clt_split_mode split,
                       const double *weights, clt_trainer **out, clt_err *e) {
  return create(m, devices, n, batch_per_replica, max_examples, split, weights, 1, out, e);
}

int clt_trainer_create_eval(const clt_model *m, const clt_device *const *devices, int n,
                            int batch_per_replica, int max_examples, clt_trainer **out, clt_err *e) {
  return create(m, devices, n, batch_per_replica, max_examples, CLT_SPLIT_EQUAL, NULL, 0, out, e);
}

static int create(const clt_model *m, const clt_device *const *devices, int n,
                  int batch_per_replica, int max_examples, clt_split_mode split,
                  const double *weights, int train, clt_trainer **out, clt_err *e) {
  int status = CLT_OK;
  *out = NULL;
  if (n < 1 || n > CLT_MAX_REPLICAS) {
    return clt_fail(e, CLT_ERR_ARG, "%d devices selected; cltrain handles 1 to %d", n, CLT_MAX_REPLICAS);
  }
  clt_trainer *t = calloc(1, sizeof *t);
  if (!t) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the trainer");
  t->model = m;
  t->n = n;
  t->batch_per_replica = batch_per_replica;
  t->max_examples = max_examples;
  const int global = batch_per_replica * n;
  t->slots = (max_examples + global - 1) / global;
  if (t->slots < 1) t->slots = 1;
  t->order = malloc((size_t)(max_examples ? max_examples : 1) * sizeof *t->order);
  t->metrics = malloc((size_t)n * 2 * t->slots * sizeof *t->metrics);
  t->checks = malloc((size_t)n * t->slots * sizeof *t->checks);
  if (!t->order || !t->metrics || !t->checks) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating the trainer");
    goto cleanup;
  }
  /* Equal slices never exceed batch_per_replica; other splits may hand one replica
   * the whole global batch, as far as its memory allows (using at most 70% of it
   * for activations, so the parameters, dataset and driver fit beside them). */
  int caps[CLT_MAX_REPLICAS] = {0};
  for (int i = 0; i < n; i++) {
    if (split == CLT_SPLIT_EQUAL || n == 1) {
      caps[i] = batch_per_replica;
      continue;
    }
    const double fixed = (double)clt_net_bytes(m, 0, train);
    const double per_example = (double)(clt_net_bytes(m, 2, train) - clt_net_bytes(m, 1, train));
    double fit = (0.7 * (double)devices[i]->global_mem_bytes - fixed) / per_example;
    caps[i] = fit < global ? (int)fit : global;
    if (caps[i] < 1) {
      status = clt_fail(e, CLT_ERR_DEVICE, "device %d (%s): %.0f MiB cannot hold even one example "
                        "of model %s", devices[i]->index, devices[i]->name,
                        devices[i]->global_mem_bytes / 1048576.0, m->name);
      goto cleanup;
    }
  }
  clt_balancer_init(&t->balancer, n, n == 1 ? CLT_SPLIT_EQUAL : split, weights, caps);
  for (int i = 0; i < n; i++) {
    if ((status = clt_replica_create(devices[i], &t->replicas[i], e))) goto cleanup;
    /* Busy time per replica comes from profiling events. */
    if ((status = clt_replica_enable_profiling(t->replicas[i], e))) goto cleanup;
    status = train ? clt_net_create(m, t->replicas[i], caps[i], t->slots, max_examples, &t->nets[i], e)
                   : clt_net_create_inference(m, t->replicas[i], caps[i], t->slots, max_examples,
                                              &t->nets[i], e);
    if (status) {
      if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES ||
          status == CL_OUT_OF_HOST_MEMORY) {
        clt_wrap(e, "slices of up to %d examples do not fit; try a smaller --batch-per-replica", caps[i]);
      }
      goto cleanup;
    }
  }
  if (train && (status = clt_ring_create(t->replicas, n, m->flat_floats, 0, &t->ring, e))) goto cleanup;
  *out = t;
  return CLT_OK;

cleanup:
  clt_trainer_destroy(t);
  return status;
}

void clt_trainer_destroy(clt_trainer *t) {
  if (!t) return;
  clt_ring_destroy(t->ring);
  for (int i = 0; i < t->n; i++) {
    clt_device_data_release(&t->train[i]);
    clt_device_data_release(&t->test[i]);
    clt_net_destroy(t->nets[i]);
    clt_replica_destroy(t->replicas[i]);
  }
  free(t->order);
  free(t->metrics);
  free(t->checks);
  free(t->check_params);
  free(t);
}

int clt_trainer_replicas(const clt_trainer *t) { return t->n; }
const clt_balancer *clt_trainer_balancer(const clt_trainer *t) { return &t->balancer; }
clt_replica *clt_trainer_replica(const clt_trainer *t, int i) { return t->replicas[i]; }
int clt_trainer_global_batch(const clt_trainer *t) { return t->batch_per_replica * t->n; }
void clt_trainer_check_replicas(clt_trainer *t, int on) { t->check_replicas = on; }
void clt_trainer_progress(clt_trainer *t, FILE *out) { t->progress = out; }
size_t clt_trainer_replica_bytes(const clt_trainer *t, int i) { return t->nets[i]->device_bytes; }

void clt_trainer_attach_loaders(clt_trainer *t, clt_loader *train, int train_count,
                                clt_loader *test, int test_count) {
  t->loader[0] = train;
  t->loader[1] = test;
  t->loader_count[0] = train ? train_count : 0;
  t->loader_count[1] = test ? test_count : 0;
}

/* Examples in the training (which 0) or test (1) set, wherever it is held. */
static int set_count(const clt_trainer *t, int which) {
  if (t->loader[which]) return t->loader_count[which];
  return which == 0 ? t->train[0].count : t->test[0].count;
}

int clt_trainer_upload(clt_trainer *t, const clt_dataset *train, const clt_dataset *test, clt_err *e) {
  const clt_dataset *sets[2] = {train, test};
  for (int s = 0; s < 2; s++) {
    if (!sets[s]) continue;
    if (sets[s]->count > t->max_examples) {
      return clt_fail(e, CLT_ERR_INTERNAL, "dataset of %d > %d examples", sets[s]->count, t->max_examples);
    }
    for (int i = 0; i < t->n; i++) {
      clt_device_data *d = s == 0 ? &t->train[i] : &t->test[i];
      clt_device_data_release(d);
      int status = clt_net_upload_data(t->nets[i], sets[s]->pixels, sets[s]->labels,
                                       sets[s]->count, d, e);
      if (status) return status;
    }
  }
  return CLT_OK;
}

int clt_trainer_set_state(clt_trainer *t, const float *params, const float *adam_m,
                          const float *adam_v, clt_err *e) {
  const size_t bytes = t->model->flat_floats * sizeof(float);
  for (int i = 0; i < t->n; i++) {
    clt_net *net = t->nets[i];
    const void *src[3] = {params, adam_m, adam_v};
    cl_mem dst[3] = {net->params, net->adam_m, net->adam_v};
    for (int k = 0; k < 3; k++) {
      cl_int rc = CL_SUCCESS;
      if (!dst[k]) continue; /* an inference-only net has no optimizer state */
      if (src[k]) {
        rc = clEnqueueWriteBuffer(net->replica->queue, dst[k], CL_TRUE, 0, bytes, src[k], 0, NULL, NULL);
      } else if (k > 0) {
        const float zero = 0.0f; /* fresh optimizer state */
        rc = clEnqueueFillBuffer(net->replica->queue, dst[k], &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
      }
      if (rc) return clt_replica_fail(net->replica, e, rc, "writing the training state");
    }
  }
  return CLT_OK;
}

int clt_trainer_get_state(clt_trainer *t, float *params, float *adam_m, float *adam_v, clt_err *e) {
  clt_net *net = t->nets[0];
  const size_t bytes = t->model->flat_floats * sizeof(float);
  void *dst[3] = {params, adam_m, adam_v};
  cl_mem src[3] = {net->params, net->adam_m, net->adam_v};
  for (int k = 0; k < 3; k++) {
    if (!dst[k]) continue;
    cl_int rc = clEnqueueReadBuffer(net->replica->queue, src[k], CL_TRUE, 0, bytes, dst[k], 0, NULL, NULL);
    if (rc) return clt_replica_fail(net->replica, e, rc, "reading the training state");
  }
  return CLT_OK;
}

/* ---- passes over a dataset, one host thread per replica ------------------------ */

typedef struct pass {
  clt_trainer *t;
  int train;            /* 1: training epoch, 0: evaluation */
  int count;            /* examples in the pass */
  int steps;
  const clt_adam *adam;
  long first_step;      /* Adam steps taken before the pass */
  double t0;
  double allreduce_seconds; /* rank 0's time inside the all-reduce */
  double data_wait_seconds; /* rank 0's time waiting for decoded images */
  clt_loader *loader;       /* streamed set of this pass, or NULL */
  int status[CLT_MAX_REPLICAS];
  clt_err err[CLT_MAX_REPLICAS];
  long examples[CLT_MAX_REPLICAS];
  int mismatch_step;    /* --check-replicas: first step where replicas differed */
  int dynamic;          /* slices re-balanced every step (auto split, training) */
  int full[CLT_MAX_REPLICAS], tail[CLT_MAX_REPLICAS]; /* fixed slices: full and last batch */
  int next[CLT_MAX_REPLICAS];                          /* dynamic: slices of the coming step */
  double compute[CLT_MAX_REPLICAS];                    /* this step's forward+backward seconds */
  double compute_total[CLT_MAX_REPLICAS];
} pass;

typedef struct worker_arg {
  pass *p;
  int rank;
} worker_arg;

/* Sums a replica-major metrics array (2 floats per slot) of `steps` batches. */
static void sum_metrics(const clt_trainer *t, int steps, int count, double *mean_batch_loss,
                        double *example_loss, double *acc) {
  const int global = clt_trainer_global_batch(t);
  double batch_losses = 0, loss = 0, correct = 0;
  for (int s = 0; s < steps; s++) {
    double l = 0;
    for (int r = 0; r < t->n; r++) {
      const float *m = t->metrics + ((size_t)r * t->slots + s) * 2;
      l += m[0];
      correct += m[1];
    }
    const int n = count - s * global < global ? count - s * global : global;
    loss += l;
    batch_losses += l / n;
  }
  *mean_batch_loss = steps ? batch_losses / steps : 0;
  *example_loss = count ? loss / count : 0;
  *acc = count ? correct / count : 0;
}

static int read_all_metrics(clt_trainer *t, int steps, clt_err *e) {
  for (int r = 0; r < t->n; r++) {
    int status = clt_net_read_metrics(t->nets[r], t->metrics + (size_t)r * t->slots * 2, steps, e);
    if (status) return status;
  }
  return CLT_OK;
}

static void draw_progress(FILE *out, int step, int steps, double elapsed, double loss, double acc,
                          int done) {
  const int width = 30;
  int filled = steps ? (int)((double)step / steps * width) : width;
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : '.';
  if (filled < width && filled > 0) bar[filled - 1] = '>';
  bar[width] = '\0';
  fprintf(out, "\r%*d/%d [%s] - %.0fs %.0fms/step - loss: %.4f - accuracy: %.4f%s", 5, step, steps,
          bar, elapsed, step ? elapsed / step * 1e3 : 0.0, loss, acc, done ? "\n" : "");
  fflush(out);
}

/* --check-replicas: every replica's parameters must equal replica 0's bit for bit. */
static int check_identical(pass *p, int rank, int step, clt_err *e) {
  clt_trainer *t = p->t;
  const size_t floats = t->model->flat_floats;
  int status = clt_net_read_params(t->nets[rank], t->check_params + rank * floats, e);
  if (status) return status;
  if (clt_ring_barrier(t->ring)) return clt_fail(e, CLT_ERR_INTERNAL, "aborted");
  if (rank == 0) {
    for (int r = 1; r < t->n; r++) {
      if (memcmp(t->check_params, t->check_params + r * floats, floats * sizeof(float)) != 0 &&
          p->mismatch_step < 0) {
        p->mismatch_step = step;
      }
    }
  }
  if (clt_ring_barrier(t->ring)) return clt_fail(e, CLT_ERR_INTERNAL, "aborted");
  if (p->mismatch_step >= 0) {
    return clt_fail(e, CLT_ERR_NUMERIC, "--check-replicas: replicas hold different parameters after step %d",
                    p->mismatch_step + 1);
  }
  return CLT_OK;
}

static int run_worker(pass *p, int rank, clt_err *e) {
  clt_trainer *t = p->t;
  clt_net *net = t->nets[rank];
  clt_replica *rep = t->replicas[rank];
  const clt_device_data *data = p->train ? &t->train[rank] : &t->test[rank];
  const int global = clt_trainer_global_batch(t);
  int status = p->loader ? CLT_OK : clt_net_set_order(net, t->order, p->count, e);
  double last_draw = 0;
  for (int s = 0; s < p->steps && !status; s++) {
    const int batch_first = s * global;
    const int batch = p->count - batch_first < global ? p->count - batch_first : global;
    const int *slices = p->dynamic ? p->next : batch == global ? p->full : p->tail;
    int first = 0, len = slices[rank];
    for (int r = 0; r < rank; r++) first += slices[r];
    double c0 = clt_now_seconds();
    /* Busy time comes from the events of earlier steps; collecting them waits for
     * those steps, so it is done only when the pending list fills up (a step
     * enqueues a few dozen), not every step. */
    if (rep->profile->npending > CLT_PROFILE_MAX_PENDING - 256 &&
        (status = clt_replica_profile_collect(rep, e))) {
      break;
    }
    if (p->loader) {
      /* Every replica takes its slice of the decoded global batch. */
      clt_photo_batch b;
      double waited = 0;
      if ((status = clt_loader_get(p->loader, s, &b, &waited, e))) break;
      if (rank == 0) p->data_wait_seconds += waited;
      status = clt_net_load(net, b.pixels + (size_t)first * clt_shape_size(t->model->input),
                            b.labels + first, len, e);
      clt_loader_put(p->loader, s);
      if (status) break;
      c0 = clt_now_seconds(); /* the compute time excludes the wait */
    } else if (len && (status = clt_net_gather(net, data, batch_first + first, len, e))) {
      break;
    }
    /* Losses are divided by the actual global batch, the last partial one included. */
    if ((status = clt_net_forward_backward(net, len, 1.0f / batch, s, p->train, e))) break;
    p->examples[rank] += len;
    if (!p->train) continue;
    /* Waiting for the backward pass first keeps compute out of the all-reduce's time
     * (its first download would wait for it anyway) and times this replica's work. */
    cl_int rc = t->n > 1 ? clFinish(rep->queue) : CL_SUCCESS;
    if (rc) {
      status = clt_replica_fail(rep, e, rc, "clFinish");
      break;
    }
    double c1 = clt_now_seconds();
    p->compute[rank] = len ? c1 - c0 : 0.0;
    p->compute_total[rank] += p->compute[rank];
    /* All replicas done: what follows is the all-reduce alone, not waiting for a
     * slower replica's backward pass. */
    if (t->n > 1 && clt_ring_barrier(t->ring)) {
      status = clt_fail(e, CLT_ERR_INTERNAL, "aborted");
      break;
    }
    double a0 = clt_now_seconds();
    clt_replica_scope(rep, "all-reduce", "gradients");
    if ((status = clt_ring_allreduce(t->ring, rank, net->grads, e))) break;
    if (rank == 0) p->allreduce_seconds += clt_now_seconds() - a0;
    if (p->dynamic) {
      /* Every replica's time of this step is in: rank 0 re-balances the next step
       * while the others wait (microseconds against a step's milliseconds). */
      if (clt_ring_barrier(t->ring)) {
        status = clt_fail(e, CLT_ERR_INTERNAL, "aborted");
        break;
      }
      if (rank == 0) {
        clt_balancer_observe(&t->balancer, p->next, p->compute);
        const int next_first = batch_first + global;
        const int next_batch = p->count - next_first < global ? p->count - next_first : global;
        if (next_batch > 0) clt_balancer_split(&t->balancer, next_batch, p->next);
      }
      if (clt_ring_barrier(t->ring)) {
        status = clt_fail(e, CLT_ERR_INTERNAL, "aborted");
        break;
      }
    }
    if ((status = clt_net_check_grads(net, s, e))) break;
    if ((status = clt_net_adam(net, p->adam, p->first_step + s + 1, e))) break;
    rc = clFlush(rep->queue);
    if (rc) {
      status = clt_replica_fail(rep, e, rc, "clFlush");
      break;
    }
    if (t->check_replicas && (status = check_identical(p, rank, s, e))) break;
    if (rank == 0 && t->first_step_done == 0) {
      /* Start-up ends when the first step has run (PoCL compiles kernels at their
       * first launch, so this includes that): one wait in the trainer's life. */
      rc = clFinish(rep->queue);
      if (rc) {
        status = clt_replica_fail(rep, e, rc, "clFinish");
        break;
      }
      t->first_step_done = clt_now_seconds();
    }
    if (rank == 0 && t->progress) {
      double now = clt_now_seconds();
      if (now - last_draw > 0.25 || s == p->steps - 1) {
        /* Blocking reads drain the queues: a few times a second only. */
        if ((status = read_all_metrics(t, s + 1, e))) break;
        double mean_loss, ex_loss, acc;
        sum_metrics(t, s + 1, batch_first + batch, &mean_loss, &ex_loss, &acc);
        draw_progress(t->progress, s + 1, p->steps, now - p->t0, mean_loss, acc, s == p->steps - 1);
        last_draw = clt_now_seconds();
      }
    }
  }
  if (!status) {
    cl_int rc = clFinish(rep->queue);
    if (rc) status = clt_replica_fail(rep, e, rc, "clFinish");
  }
  if (!status) status = clt_replica_profile_collect(rep, e);
  if (status) {
    clt_ring_abort(t->ring);
    if (p->loader) clt_loader_cancel(p->loader);
  }
  return status;
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
  p->dynamic = p->train && t->n > 1 && t->balancer.mode == CLT_SPLIT_AUTO;
  if (p->dynamic) {
    clt_balancer_split(&t->balancer, p->count < global ? p->count : global, p->next);
  } else {
    /* Fixed for the pass; evaluation under auto uses the latest estimates. */
    clt_balancer_split(&t->balancer, global, p->full);
    clt_balancer_split(&t->balancer, last, p->tail);
    if (t->balancer.mode == CLT_SPLIT_AUTO) clt_balancer_split(&t->balancer, global, p->full);
  }
  p->loader = t->loader[p->train ? 0 : 1];
  if (p->loader) {
    int status = clt_loader_start(p->loader, t->order, p->count, global, e);
    if (status) return status;
  }
  p->t0 = clt_now_seconds();
  p->mismatch_step = -1;
  for (int r = 0; r < t->n; r++) {
    args[r] = (worker_arg){p, r};
    if (t->n == 1) break; /* one replica: the calling thread runs it */
    if (pthread_create(&threads[r], NULL, worker, &args[r]) != 0) {
      clt_ring_abort(t->ring);
      p->status[r] = clt_fail(&p->err[r], CLT_ERR_NOMEM, "cannot start a host thread for replica %d", r);
      break;
    }
    started++;
  }
  if (t->n == 1) worker(&args[0]);
  for (int r = 0; r < started; r++) pthread_join(threads[r], NULL);
  int chosen = -1;
  for (int r = 0; r < t->n; r++) {
    if (!p->status[r]) continue;
    if (chosen < 0 || (p->err[chosen].code == CLT_ERR_INTERNAL && p->err[r].code != CLT_ERR_INTERNAL)) {
      chosen = r;
    }
  }
  if (chosen < 0) return CLT_OK;
  *e = p->err[chosen];
  return p->status[chosen];
}

int clt_trainer_epoch(clt_trainer *t, uint64_t seed, int epoch, const clt_adam *adam, long *step,
                      clt_epoch_result *res, clt_err *e) {
  memset(res, 0, sizeof *res);
  res->bad_step = -1;
  const int count = set_count(t, 0);
  const int global = clt_trainer_global_batch(t);
  pass *p = calloc(1, sizeof *p);
  if (!p) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  p->t = t;
  p->train = 1;
  p->count = count;
  p->steps = (count + global - 1) / global;
  p->adam = adam;
  p->first_step = *step;
  if (t->check_replicas && !t->check_params) {
    t->check_params = malloc((size_t)t->n * t->model->flat_floats * sizeof(float));
    if (!t->check_params) {
      free(p);
      return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for --check-replicas");
    }
  }
  clt_epoch_order(seed, epoch, t->order, count);
  for (int r = 0; r < t->n; r++) {
    clt_profile *prof = t->replicas[r]->profile;
    for (int i = 0; i < prof->nnames; i++) prof->seconds[i] = 0, prof->calls[i] = 0;
  }
  int status = run_pass(p, e);
  res->seconds = clt_now_seconds() - p->t0;
  if (!status) status = read_all_metrics(t, p->steps, e);
  for (int r = 0; r < t->n && !status; r++) {
    status = clt_net_read_grad_checks(t->nets[r], t->checks + (size_t)r * t->slots, p->steps, e);
  }
  if (!status) {
    double example_loss;
    sum_metrics(t, p->steps, count, &res->train_loss, &example_loss, &res->train_acc);
    for (int s = 0; s < p->steps && res->bad_step < 0; s++) {
      double l = 0;
      for (int r = 0; r < t->n; r++) l += t->metrics[((size_t)r * t->slots + s) * 2];
      if (!isfinite(l) || t->checks[s] != 0) res->bad_step = s; /* reduced gradient: replica 0's */
    }
    res->allreduce_seconds = p->allreduce_seconds;
    res->data_wait_seconds = p->data_wait_seconds;
    res->first_step_done = t->first_step_done;
    for (int r = 0; r < t->n; r++) {
      const clt_profile *prof = t->replicas[r]->profile;
      res->replicas[r].examples = p->examples[r];
      res->replicas[r].compute_seconds = p->compute_total[r];
      for (int i = 0; i < prof->nnames; i++) res->replicas[r].busy_seconds += prof->seconds[i];
    }
    *step += p->steps;
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
  int status = run_pass(p, e);
  if (!status) status = read_all_metrics(t, p->steps, e);
  if (!status) {
    double mean_batch_loss;
    sum_metrics(t, p->steps, count, &mean_batch_loss, loss, acc);
  }
  free(p);
  return status;
}
