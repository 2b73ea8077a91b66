/* Training a step, or a part of one, at a time (the public API's custom loop;
 * trainer.h): the pass of an epoch (or of a batch in the caller's memory) is
 * begun as clt_trainer_epoch begins its own, then each call runs one part of a
 * step (pass.c's, trainer_step_part) on one host thread per replica (kept from
 * call to call), waited for under the all-reduce's watchdog; the step's figures
 * are read back at once, or (no result asked) left on the devices for
 * clt_trainer_settle, so that the host enqueues the next step while the devices
 * run this one. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"
#include "trainer_impl.h"

/* Rank's part of a step, as its thread runs it. */
static void run_rank_part(const trainer_thread_arg *a) {
  pass *p = a->p;
  pass_rank *me = &p->ranks[a->rank];
  me->status = trainer_step_part(p, a->rank, a->s, a->part, &me->err);
  if (me->status) {
    /* The others may wait for this rank in a barrier or the all-reduce. */
    clt_ring_abort(p->t->ring);
    clt_source_cancel(p->source);
  }
}

/* The parts' threads: one per replica, kept for the trainer's life (a part is
 * a fraction of a step: a thread made and joined per part would cost more than
 * handing it over), each running the parts it is handed. */
typedef struct step_workers {
  pthread_mutex_t mu;
  pthread_cond_t work, done; /* a part handed out; a rank's part done */
  long posted;               /* parts handed out so far */
  long finished[CLT_MAX_REPLICAS];
  int quit;
  trainer_thread_arg args[CLT_MAX_REPLICAS]; /* the latest part, by rank */
  pthread_t threads[CLT_MAX_REPLICAS];
  int started;
  struct worker_self {
    struct step_workers *w;
    int rank;
  } self[CLT_MAX_REPLICAS];
} step_workers;

static void *worker_loop(void *arg) {
  const struct worker_self *me = arg;
  step_workers *w = me->w;
  long seen = 0;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->quit && w->posted == seen) pthread_cond_wait(&w->work, &w->mu);
    if (w->quit) break;
    seen = w->posted;
    const trainer_thread_arg a = w->args[me->rank];
    pthread_mutex_unlock(&w->mu);
    run_rank_part(&a);
    pthread_mutex_lock(&w->mu);
    w->finished[me->rank] = seen;
    pthread_cond_broadcast(&w->done);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* clt_ring_watch's wait: rank i's latest part done. */
static int part_done(void *ctx, const pthread_t *threads, int i, double seconds) {
  (void)threads;
  step_workers *w = ctx;
  struct timespec at;
  clock_gettime(CLOCK_REALTIME, &at); /* the condition variable's clock */
  if (!isinf(seconds)) {
    const long long ns = at.tv_nsec + (long long)((seconds > 0 ? seconds : 0) * 1e9);
    at.tv_sec += (time_t)(ns / 1000000000);
    at.tv_nsec = (long)(ns % 1000000000);
  }
  int rc = 0;
  pthread_mutex_lock(&w->mu);
  while (w->finished[i] != w->posted && rc != ETIMEDOUT)
    rc = isinf(seconds) ? pthread_cond_wait(&w->done, &w->mu)
                        : pthread_cond_timedwait(&w->done, &w->mu, &at);
  const int done = w->finished[i] == w->posted;
  pthread_mutex_unlock(&w->mu);
  return done ? 0 : ETIMEDOUT;
}

void trainer_stop_workers(clt_trainer *t) {
  step_workers *w = t->workers;
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->quit = 1;
  pthread_cond_broadcast(&w->work);
  pthread_mutex_unlock(&w->mu);
  int hung = 0;
  for (int r = 0; r < w->started; r++) {
    /* A hung replica's thread was detached, and may yet touch w: w stays. */
    if (t->local[r].replica->hung) hung = 1;
    else pthread_join(w->threads[r], NULL);
  }
  t->workers = NULL;
  if (hung) return;
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->work);
  pthread_cond_destroy(&w->done);
  free(w);
}

/* The parts' threads, made at the first part. */
static int start_workers(clt_trainer *t, clt_err *e) {
  if (t->workers) return CLT_OK;
  step_workers *w = calloc(1, sizeof *w);
  if (!w) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->work, NULL);
  pthread_cond_init(&w->done, NULL);
  t->workers = w;
  for (int r = 0; r < t->n; r++) {
    w->self[r] = (struct worker_self){w, r};
    if (pthread_create(&w->threads[r], NULL, worker_loop, &w->self[r]) != 0) {
      trainer_stop_workers(t);
      return clt_fail(e, CLT_ERR_NOMEM, "cannot start a host thread for replica %d", r);
    }
    w->started++;
  }
  return CLT_OK;
}

/* Part `part` of step s of pass p on every replica, by the replicas' threads,
 * waited for under the all-reduce's watchdog. */
static int run_part(pass *p, int s, trainer_part part, clt_err *e) {
  clt_trainer *t = p->t;
  int status = start_workers(t, e);
  if (status) return status;
  step_workers *w = t->workers;
  pthread_mutex_lock(&w->mu);
  for (int r = 0; r < t->n; r++) {
    p->ranks[r].status = CLT_OK;
    w->args[r] = (trainer_thread_arg){p, r, s, part};
  }
  w->posted++;
  pthread_cond_broadcast(&w->work);
  pthread_mutex_unlock(&w->mu);
  return trainer_watch_pass(p, w->threads, t->n, part_done, w, e);
}

/* Ends pass p if it was begun: every replica's work waited for, the source
 * (mid-pass, if not all its steps were loaded) cancelled. */
static int end_pass(clt_trainer *t, pass *p, clt_err *e) {
  if (!p || !p->begun) return CLT_OK;
  p->begun = 0;
  if (t->cur == p) t->cur = NULL;
  int status = CLT_OK;
  for (int r = 0; r < t->n; r++) {
    if (p->ranks[r].read_done) clReleaseEvent(p->ranks[r].read_done); /* a failed step's */
    p->ranks[r].read_done = NULL;
  }
  for (int r = 0; r < t->n; r++) {
    if (t->local[r].replica->hung) return CLT_OK; /* nothing may touch it (watchdog.h) */
  }
  for (int r = 0; r < t->n; r++) {
    clt_err err;
    const int st = trainer_end_pass(p, r, CLT_OK, &err);
    if (st && !status) {
      *e = err;
      status = st;
    }
  }
  if (p->source && p == t->steps && t->next_step < p->steps) clt_source_cancel(p->source);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  return status;
}

int clt_trainer_end_steps(clt_trainer *t, clt_err *e) {
  int status = end_pass(t, t->steps, e);
  clt_err err;
  const int host = end_pass(t, t->host_pass, &err);
  if (host && !status) {
    *e = err;
    status = host;
  }
  return status;
}

int clt_trainer_steps_left(const clt_trainer *t) {
  return t->steps && t->steps->begun ? t->steps->steps - t->next_step : 0;
}

/* A pass for step-wise driving, reused: *slot is allocated at its first use. */
static int fresh_pass(clt_trainer *t, pass **slot, clt_err *e) {
  if (!*slot && !(*slot = malloc(sizeof **slot)))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  memset(*slot, 0, sizeof **slot);
  (*slot)->t = t;
  (*slot)->train = 1;
  (*slot)->read_back = 1;
  atomic_init(&(*slot)->stop_after, -1);
  return CLT_OK;
}

/* Step s of pass p left unread: its forward part's figures, its update's verdict. */
static void leave_unread(clt_trainer *t, pass *p, int s, int forward, int updated) {
  if (t->unread != p) {
    t->unread = p;
    t->fig_from = t->fig_to = t->chk_from = t->chk_to = s;
  }
  if (forward) {
    if (t->fig_from == t->fig_to) t->fig_from = s;
    t->fig_to = s + 1;
  }
  if (updated) {
    if (t->chk_from == t->chk_to) t->chk_from = s;
    t->chk_to = s + 1;
  }
}

/* A pass would reuse the metric slots of steps not yet read. */
static int unread_left(clt_err *e) {
  return clt_fail(e, CLT_ERR_INTERNAL, "the figures of earlier steps are unread (settle first)");
}

int clt_trainer_begin_steps(clt_trainer *t, uint64_t seed, int epoch, int *steps, clt_err *e) {
  if (t->unread) return unread_left(e);
  int status = clt_trainer_end_steps(t, e);
  if (status) return status;
  clt_source *src = t->source[0];
  if (!src) return clt_fail(e, CLT_ERR_ARG, "no training set");
  const int count = clt_source_count(src), global = clt_trainer_global_batch(t);
  if ((status = trainer_reserve(t, count, e)) || (status = fresh_pass(t, &t->steps, e)))
    return status;
  pass *p = t->steps;
  p->source = src;
  p->epoch = epoch;
  p->count = count;
  p->steps = (count + global - 1) / global;
  p->seed = seed;
  clt_epoch_order(seed, epoch, t->order, count);
  if ((status = trainer_prepare_training(t, e))) return status;
  if ((status = trainer_begin_pass(p, e))) return status;
  p->begun = 1;
  t->next_step = 0;
  *steps = p->steps;
  return CLT_OK;
}

/* Step s's figures from its sums (trainer_step_sums) and its check. */
static void step_figures(const clt_trainer *t, const pass *p, int s, clt_step_result *res) {
  const int global = clt_trainer_global_batch(t);
  const int rest = p->count - s * global;
  res->loss_sum = t->train_sums[(size_t)2 * s];
  res->correct = t->train_sums[(size_t)2 * s + 1];
  res->examples = rest < global ? rest : global;
  /* The reduced gradient's check is the same on every replica (and process). */
  res->bad = !isfinite(res->loss_sum) || t->checks[s] != 0;
}

/* Step s's figures: its metric slot (and gradient check) read back from every
 * replica, summed over the run. */
static int read_step(clt_trainer *t, pass *p, int s, clt_step_result *res, clt_err *e) {
  int status = CLT_OK;
  for (int r = 0; r < t->n; r++) {
    /* After an update: read back already (enqueued before it), else now. */
    cl_event *done = &p->ranks[r].read_done;
    if (*done) {
      const cl_int rc = clWaitForEvents(1, done);
      clReleaseEvent(*done);
      *done = NULL;
      if (rc && !status) status = clt_replica_fail(t->local[r].replica, e, rc, "reading metrics");
    } else if (!status) {
      status = clt_net_read_slot(t->local[r].net, s, t->metrics + ((size_t)r * t->slots + s) * 2,
                                 t->checks + (size_t)r * t->slots + s, NULL, e);
    }
  }
  if (!status) status = trainer_step_sums(t, s, s + 1, NULL, t->train_sums, e);
  if (status) return status;
  step_figures(t, p, s, res);
  return CLT_OK;
}

int clt_trainer_settle(clt_trainer *t, clt_step_fn each, void *ctx, clt_err *e) {
  pass *p = t->unread;
  if (!p) return CLT_OK;
  t->unread = NULL;
  const int fig = t->fig_to > t->fig_from, chk = t->chk_to > t->chk_from;
  const int from = !chk || (fig && t->fig_from < t->chk_from) ? t->fig_from : t->chk_from;
  const int to = t->fig_to > t->chk_to ? t->fig_to : t->chk_to;
  for (int r = 0; r < t->n; r++) {
    if (t->local[r].replica->hung) return CLT_OK; /* nothing may touch it (watchdog.h) */
  }
  int status = CLT_OK;
  /* Blocking reads: each waits for what its queue holds before it. */
  for (int r = 0; r < t->n && !status; r++) {
    clt_net *net = t->local[r].net;
    status = clt_net_read_metrics(net, t->metrics + (size_t)r * t->slots * 2, to, e);
    if (!status && chk)
      status = clt_net_read_grad_checks(net, t->checks + (size_t)r * t->slots, to, e);
  }
  if (!status) status = trainer_step_sums(t, from, to, NULL, t->train_sums, e);
  if (status) return status;
  for (int s = from; s < to; s++) {
    clt_step_result res;
    step_figures(t, p, s, &res);
    each(ctx, p->first_step + s + 1, s >= t->fig_from && s < t->fig_to,
         s >= t->chk_from && s < t->chk_to, &res);
  }
  return CLT_OK;
}

int clt_trainer_forward(clt_trainer *t, const clt_host_batch *batch, long step, clt_step_result *r,
                        clt_err *e) {
  pass *p = t->steps;
  int s = 0, status = CLT_OK;
  if (t->unread && (r || batch || t->unread != p)) return unread_left(e);
  if (batch) {
    const int global = clt_trainer_global_batch(t);
    if (batch->count < 1 || batch->count > global)
      return clt_fail(e, CLT_ERR_ARG, "a batch of %d examples; the global batch is %d",
                      batch->count, global);
    if ((status = end_pass(t, t->host_pass, e)) || (status = fresh_pass(t, &t->host_pass, e)))
      return status;
    p = t->host_pass;
    p->host = batch;
    p->count = batch->count;
    p->steps = 1;
    p->seed = 0;
    if ((status = trainer_begin_pass(p, e))) return status;
    p->begun = 1;
  } else {
    if (!p || !p->begun || t->next_step >= p->steps)
      return clt_fail(e, CLT_ERR_ARG, "no step left in the epoch");
    s = t->next_step++;
  }
  p->first_step = step - s;
  t->cur = NULL;
  status = run_part(p, s, TRAINER_FORWARD, e);
  if (!status && r) status = read_step(t, p, s, r, e);
  if (status) return status;
  if (!r) leave_unread(t, p, s, 1, 0);
  t->cur = p;
  t->cur_step = s;
  return CLT_OK;
}

int clt_trainer_reduce(clt_trainer *t, clt_err *e) {
  if (!t->cur) return clt_fail(e, CLT_ERR_INTERNAL, "an all-reduce without a forward pass");
  return run_part(t->cur, t->cur_step, TRAINER_REDUCE, e);
}

/* After a step's update: the epoch's last step, or a caller's batch, ends its pass. */
static int after_update(clt_trainer *t, pass *p, clt_err *e) {
  if (p == t->host_pass || t->next_step >= p->steps) return end_pass(t, p, e);
  return CLT_OK;
}

int clt_trainer_update(clt_trainer *t, const clt_optimizer *opt, long step, clt_step_result *r,
                       clt_err *e) {
  pass *p = t->cur;
  if (!p) return clt_fail(e, CLT_ERR_INTERNAL, "an update without a forward pass");
  const int s = t->cur_step;
  if (t->unread && (r || t->unread != p)) return unread_left(e);
  p->opt = opt;
  p->first_step = step - s;
  p->read_back = r != NULL;
  int status = run_part(p, s, TRAINER_UPDATE, e);
  if (!status && r) status = read_step(t, p, s, r, e);
  if (!status && !r) leave_unread(t, p, s, 0, 1);
  t->cur = NULL;
  if (!status) status = after_update(t, p, e);
  return status;
}

int clt_trainer_one_step(clt_trainer *t, const clt_optimizer *opt, long step, clt_step_result *r,
                         clt_err *e) {
  pass *p = t->steps;
  if (!p || !p->begun || t->next_step >= p->steps)
    return clt_fail(e, CLT_ERR_ARG, "no step left in the epoch");
  if (t->unread && (r || t->unread != p)) return unread_left(e);
  const int s = t->next_step++;
  p->opt = opt;
  p->first_step = step - s;
  p->read_back = r != NULL;
  t->cur = NULL;
  int status = run_part(p, s, TRAINER_STEP, e);
  if (!status && r) status = read_step(t, p, s, r, e);
  if (!status && !r) leave_unread(t, p, s, 1, 1);
  if (!status) status = after_update(t, p, e);
  return status;
}

int clt_trainer_set_grads(clt_trainer *t, const float *grads, clt_err *e) {
  for (int r = 0; r < t->n; r++) {
    int status = clt_net_write_grads(t->local[r].net, grads, e);
    if (status) return status;
  }
  return CLT_OK;
}

int clt_trainer_set_params(clt_trainer *t, const float *params, clt_err *e) {
  for (int r = 0; r < t->n; r++) {
    int status = clt_net_write_params(t->local[r].net, params, e);
    if (status) return status;
  }
  return CLT_OK;
}

int clt_trainer_get_grads(clt_trainer *t, float *grads, clt_err *e) {
  return clt_net_read_grads(t->local[0].net, grads, e);
}

/* ---- batches in the caller's memory ------------------------------------------- */

void trainer_release_host(clt_trainer *t) {
  for (int r = 0; r < t->n; r++) {
    trainer_replica *l = &t->local[r];
    if (l->host_images && !l->replica->hung) clReleaseMemObject(l->host_images);
    l->host_images = NULL;
  }
}

int trainer_load_host(pass *p, int rank, int first, int len, clt_err *e) {
  clt_trainer *t = p->t;
  trainer_replica *l = &t->local[rank];
  clt_replica *rep = l->replica;
  const clt_host_batch *b = p->host;
  const clt_model *m = t->model;
  int pixels = m->input.h * m->input.w * m->input.c;
  int status = CLT_OK;
  if (len == 0) return CLT_OK;
  clt_replica_scope(rep, "input", "batch");
  if (b->floats) {
    status = clt_source_upload(rep, l->net->input,
                               (const float *)b->images + (size_t)first * pixels,
                               (size_t)len * pixels * sizeof(float), "uploading a batch", e);
  } else {
    /* Staged as bytes (made once, for the largest slice), then preprocessed. */
    if (!l->host_images)
      status = clt_replica_alloc(rep, (size_t)l->cap * pixels, "a caller's batch", &l->host_images,
                                 e);
    if (!status && !l->convert)
      status = clt_replica_kernel(rep, "data.cl", "", "convert_batch", &l->convert, e);
    if (!status)
      status = clt_source_upload(rep, l->host_images,
                                 (const uint8_t *)b->images + (size_t)first * pixels,
                                 (size_t)len * pixels, "uploading a batch", e);
    int n = len * pixels, channels = m->input.c, mode = (int)m->preprocess;
    clt_karg args[] = {CLT_ARG(l->host_images), CLT_ARG(n), CLT_ARG(channels), CLT_ARG(mode),
                       CLT_ARG(l->net->input)};
    if (!status) status = clt_launch1d(rep, l->convert, "convert_batch", args, 5, (size_t)n, e);
  }
  if (status) return status;
  if (b->labels)
    return clt_source_upload(rep, l->net->labels, b->labels + first, (size_t)len * sizeof(int32_t),
                             "uploading labels", e);
  return clt_replica_fill(rep, l->net->labels, 0, (size_t)len, 0.0f, "labels", e);
}
