/* The decoding threads: batches decoded ahead into a ring of slots, decoded images
 * cached across passes, each image augmented after its decode; of each batch only
 * the positions this process needs (its share, clt_loader_share). See photos.h. */
#define _POSIX_C_SOURCE 200809L /* pthreads, sysconf, clock_gettime */

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "photos_impl.h"
#include "timing.h"

/* Ring slot: batch `step` lives in slot step % depth until all consumers put it.
 * Images sit at their position in the step's batch; only the positions wanted (the
 * share's, and any a consumer asks for) are decoded. Decoders claim wanted
 * positions one at a time, earliest step first, under the mutex; a slot may be
 * opened for a new step only once its previous step is released and no decoder
 * still writes into it. */
enum { POS_FREE = 0, POS_BUSY = 1, POS_DONE = 2 };

typedef struct slot {
  unsigned char *pixels; /* max_batch images */
  int *labels;
  unsigned char *state; /* max_batch POS_* */
  unsigned char *want;  /* max_batch: the position is needed here */
  int step;             /* -1: never used in this pass */
  int size;             /* the step's batch */
  int todo;             /* positions wanted and free */
  int busy;             /* positions being decoded */
  int scan;             /* no position below it is wanted and free */
  int puts;
} slot;

/* Examples [first, first + len) of a batch (len clipped to the batch). */
typedef struct range {
  int first, len;
} range;

typedef struct worker {
  clt_loader *l;
  pthread_t tid;
  scratch s;
  unsigned char *decoded; /* augmenting: the image before its augmentation */
  float *work;            /* augmenting: clt_augment_image's workspace */
  clt_err err;
} worker;

enum { CACHE_EMPTY = 0, CACHE_FILLING = 1, CACHE_READY = 2 };

struct clt_loader {
  const clt_photos *p;
  int consumers, max_batch, depth, nthreads, started;
  size_t img_bytes;     /* an image in a slot: augmented, if so */
  size_t decoded_bytes; /* an image decoded (image_size square), as the cache keeps it */
  clt_augment aug;      /* n 0: none */
  uint64_t seed;        /* the draws' */
  slot *slots;
  worker *workers;
  pthread_mutex_t mu;
  pthread_cond_t work_cv;  /* decoders: something became claimable, or quit */
  pthread_cond_t ready_cv; /* consumers: a wanted image is done, a slot opened, a failure */
  pthread_cond_t idle_cv;  /* start(): no decoder holds an image of the old pass */
  int sync_ok;
  range share, share_last; /* of full batches, and of a last partial one (clt_loader_share) */
  /* current pass */
  int *order, order_cap;
  int count, batch, nsteps;
  int epoch; /* the draws' epoch; -1: not training (augmentations as at inference) */
  int active, opened, released, busy, cancelled, failed, quit;
  int fail_step; /* earliest step with a failed image; steps before it still complete */
  clt_err fail_err;
  /* cache: examples 0..cache_n-1, img_bytes each */
  unsigned char *cache;
  unsigned char *cache_state;
  int cache_n;
  size_t decoded, images;  /* decoded from files; put into slots (decoded or from the cache) */
  double cpu_seconds;      /* the decoders' CPU time preparing them */
  clt_trace *trace;        /* --trace: each decode is a span of its decoder's track */
  clt_photos_skip_fn skip; /* NULL: a decode failure fails the pass */
  void *skip_ctx;
};

/* Wants positions [first, first + len) of sl (clipped to its batch); 1 if one was
 * not wanted before. */
static int want_range(slot *sl, int first, int len) {
  const int end = len > sl->size - first ? sl->size : first + len;
  int added = 0;
  for (int j = first < 0 ? 0 : first; j < end; j++) {
    if (sl->want[j]) continue;
    sl->want[j] = 1;
    added = 1;
    if (sl->state[j] == POS_FREE) {
      sl->todo++;
      if (j < sl->scan) sl->scan = j;
    }
  }
  return added;
}

/* The share of sl's step: a partial batch is the pass's last. */
static range share_of(const clt_loader *l, const slot *sl) {
  return sl->size < l->batch ? l->share_last : l->share;
}

/* The share changed: sl wants its new share's positions instead. Positions no
 * longer wanted that are being decoded finish (and are not waited for). */
static void replan(const clt_loader *l, slot *sl) {
  for (int j = 0; j < sl->size; j++) {
    if (sl->want[j] && sl->state[j] == POS_FREE) sl->todo--;
    sl->want[j] = 0;
  }
  const range r = share_of(l, sl);
  want_range(sl, r.first, r.len);
}

static void open_slot(clt_loader *l, slot *sl, int step) {
  sl->step = step;
  sl->size = l->count - step * l->batch < l->batch ? l->count - step * l->batch : l->batch;
  sl->todo = sl->busy = sl->puts = 0;
  sl->scan = sl->size;
  memset(sl->state, POS_FREE, (size_t)sl->size);
  memset(sl->want, 0, (size_t)sl->size);
  const range r = share_of(l, sl);
  want_range(sl, r.first, r.len);
  pthread_cond_broadcast(&l->ready_cv); /* a consumer of an empty share waits for the opening */
}

/* The next image to decode: a wanted free position of the earliest open step not
 * yet released, opening slots as they free up (a step may want nothing here); NULL
 * when there is none now. After a failure, only steps before the failed one. */
static slot *find_work(clt_loader *l, int *pos) {
  if (!l->active || l->cancelled || l->quit) return NULL;
  const int stop = l->failed ? l->fail_step : l->nsteps;
  for (;;) {
    for (int s = l->opened > l->depth ? l->opened - l->depth : 0; s < l->opened && s < stop; s++) {
      slot *sl = &l->slots[s % l->depth];
      if (sl->step != s || sl->todo == 0 || sl->puts == l->consumers) continue;
      while (!sl->want[sl->scan] || sl->state[sl->scan] != POS_FREE) sl->scan++;
      *pos = sl->scan;
      return sl;
    }
    if (l->opened >= stop) return NULL;
    slot *sl = &l->slots[l->opened % l->depth];
    if (sl->step >= 0 && (sl->puts < l->consumers || sl->busy)) return NULL;
    open_slot(l, sl, l->opened++);
  }
}

static double thread_cpu_seconds(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  clt_loader *l = w->l;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    slot *sl = NULL;
    int j = 0;
    while (!l->quit && !(sl = find_work(l, &j))) pthread_cond_wait(&l->work_cv, &l->mu);
    if (l->quit) break;
    const int step = sl->step, k = step * l->batch + j;
    sl->state[j] = POS_BUSY;
    sl->todo--;
    sl->busy++;
    const int idx = l->order[k], epoch = l->epoch;
    int from_cache = 0, to_cache = 0;
    if (idx < l->cache_n) {
      if (l->cache_state[idx] == CACHE_READY) {
        from_cache = 1;
      } else if (l->cache_state[idx] == CACHE_EMPTY) {
        l->cache_state[idx] = CACHE_FILLING; /* a duplicate in flight just decodes uncached */
        to_cache = 1;
      }
    }
    l->busy++;
    clt_trace *trace = l->trace; /* set under the lock by clt_loader_trace */
    const clt_photos_skip_fn skip = l->skip;
    pthread_mutex_unlock(&l->mu);

    unsigned char *dst = sl->pixels + (size_t)j * l->img_bytes;
    unsigned char *cached = l->cache ? l->cache + (size_t)idx * l->decoded_bytes : NULL;
    /* Augmented (training, or a crop's inference resize) from the decoded image. */
    const int augment = l->aug.n && (epoch >= 0 || clt_augment_has(&l->aug, CLT_AUG_CROP));
    const unsigned char *decoded = augment && from_cache && cached ? cached : dst;
    int rc = CLT_OK;
    const double cpu0 = thread_cpu_seconds();
    const double t0 = trace ? clt_now_seconds() : 0;
    if (!(from_cache && cached)) {
      decoded = augment ? w->decoded : dst;
      rc = clt_photos_decode_with(l->p, idx, &w->s, augment ? w->decoded : dst, &w->err);
    } else if (!augment) {
      memcpy(dst, cached, l->img_bytes);
    }
    const double t1 = trace ? clt_now_seconds() : 0;
    if (trace && !(augment && from_cache)) {
      clt_trace_span(trace, CLT_TRACE_DATA_PID, (int)(w - l->workers) + 1,
                     from_cache ? "copy from cache" : "decode", NULL, t0, t1, step);
    }
    if (rc == CLT_OK && to_cache && cached) memcpy(cached, decoded, l->decoded_bytes);
    if (rc == CLT_OK && augment) {
      const int size = l->p->image_size;
      clt_augment_image(&l->aug, l->seed, epoch, idx, decoded, size, size, 3, dst, w->work);
      if (trace) {
        clt_trace_span(trace, CLT_TRACE_DATA_PID, (int)(w - l->workers) + 1, "augment", NULL, t1,
                       clt_now_seconds(), step);
      }
    }
    sl->labels[j] = l->p->labels[idx];
    /* A skipped image is fed black; the pass goes on. */
    const int failed = rc != CLT_OK && !skip;
    if (rc != CLT_OK && skip) {
      memset(dst, 0, l->img_bytes);
      skip(l->skip_ctx, idx, &w->err);
    }

    const double cpu = thread_cpu_seconds() - cpu0;

    pthread_mutex_lock(&l->mu);
    l->busy--;
    sl->busy--;
    sl->state[j] = POS_DONE;
    l->cpu_seconds += cpu;
    if (to_cache) l->cache_state[idx] = rc == CLT_OK ? CACHE_READY : CACHE_EMPTY;
    if (!from_cache && rc == CLT_OK) l->decoded++;
    if (rc == CLT_OK || !failed) l->images++;
    /* Else the pass is over, or the image is no longer wanted: it is discarded
     * (a failure too: where the image is wanted, it fails there). */
    if (!l->cancelled && sl->want[j]) {
      if (failed) {
        /* Claims are earliest step first, so an earlier step's images are in
         * flight or are still claimed after this: those steps complete, and
         * every consumer meets the error at the same step. */
        if (!l->failed || step < l->fail_step) {
          l->failed = 1;
          l->fail_step = step;
          l->fail_err = w->err;
        }
      }
      pthread_cond_broadcast(&l->ready_cv); /* a consumer's slice may be complete */
    }
    if (!sl->busy && sl->puts == l->consumers) pthread_cond_broadcast(&l->work_cv);
    if (l->busy == 0) pthread_cond_broadcast(&l->idle_cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

void clt_loader_destroy(clt_loader *l) {
  if (!l) return;
  if (l->sync_ok) {
    pthread_mutex_lock(&l->mu);
    l->quit = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
    for (int t = 0; t < l->started; t++) pthread_join(l->workers[t].tid, NULL);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->idle_cv);
    pthread_mutex_destroy(&l->mu);
  }
  if (l->workers) {
    for (int t = 0; t < l->nthreads; t++) {
      clt_photos_scratch_free(&l->workers[t].s);
      free(l->workers[t].decoded);
      free(l->workers[t].work);
    }
  }
  free(l->workers);
  if (l->slots)
    for (int d = 0; d < l->depth; d++) {
      free(l->slots[d].pixels);
      free(l->slots[d].labels);
      free(l->slots[d].state);
      free(l->slots[d].want);
    }
  free(l->slots);
  free(l->order);
  free(l->cache);
  free(l->cache_state);
  free(l);
}

int clt_loader_create(const clt_photos *p, int consumers, int max_batch, int depth, int threads,
                      size_t cache_bytes, clt_loader **out, clt_err *e) {
  return clt_loader_create_augmented(p, NULL, 0, consumers, max_batch, depth, threads, cache_bytes,
                                     out, e);
}

int clt_loader_create_augmented(const clt_photos *p, const clt_augment *aug, uint64_t seed,
                                int consumers, int max_batch, int depth, int threads,
                                size_t cache_bytes, clt_loader **out, clt_err *e) {
  int rc = CLT_OK;
  clt_loader *l = NULL;
  *out = NULL;
  if (!p || consumers < 1 || max_batch < 1 || depth < 1 || threads < 0) {
    rc = clt_fail(e, CLT_ERR_ARG,
                  "photo loader: bad arguments (consumers %d, max batch %d, depth %d, threads %d)",
                  consumers, max_batch, depth, threads);
    goto cleanup;
  }
  l = calloc(1, sizeof *l);
  if (!l) goto nomem;
  l->p = p;
  l->consumers = consumers;
  l->max_batch = max_batch;
  l->depth = depth;
  l->decoded_bytes = (size_t)p->image_size * p->image_size * 3;
  if (aug) l->aug = *aug;
  l->seed = seed;
  l->epoch = -1;
  l->share = l->share_last = (range){0, INT_MAX};
  int out_h, out_w;
  clt_augment_out_size(&l->aug, p->image_size, p->image_size, &out_h, &out_w);
  l->img_bytes = (size_t)out_h * out_w * 3;
  if ((size_t)max_batch > SIZE_MAX / 2 / l->img_bytes) {
    rc = clt_fail(e, CLT_ERR_ARG, "photo loader: max batch %d too large", max_batch);
    goto cleanup;
  }
  if (threads == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n < 1 ? 1 : n > 256 ? 256 : (int)n;
  }
  if ((long long)threads > (long long)depth * max_batch)
    threads = depth * max_batch; /* more would idle */

  l->slots = calloc((size_t)depth, sizeof *l->slots);
  if (!l->slots) goto nomem;
  for (int d = 0; d < depth; d++) {
    l->slots[d].pixels = malloc((size_t)max_batch * l->img_bytes);
    l->slots[d].labels = malloc((size_t)max_batch * sizeof *l->slots[d].labels);
    l->slots[d].state = malloc((size_t)max_batch);
    l->slots[d].want = malloc((size_t)max_batch);
    l->slots[d].step = -1;
    if (!l->slots[d].pixels || !l->slots[d].labels || !l->slots[d].state || !l->slots[d].want)
      goto nomem;
  }
  l->order_cap = p->count > 0 ? p->count : 1;
  l->order = malloc((size_t)l->order_cap * sizeof *l->order);
  if (!l->order) goto nomem;
  size_t fit = cache_bytes / l->decoded_bytes;
  l->cache_n = fit < (size_t)p->count ? (int)fit : p->count;
  if (l->cache_n > 0) {
    l->cache = malloc((size_t)l->cache_n * l->decoded_bytes);
    l->cache_state = calloc((size_t)l->cache_n, 1);
    if (!l->cache || !l->cache_state) {
      rc = clt_fail(e, CLT_ERR_NOMEM,
                    "photo loader: cannot allocate a %.1f MiB image cache (lower it)",
                    (double)l->cache_n * l->decoded_bytes / 1048576.0);
      goto cleanup;
    }
  }
  l->workers = calloc((size_t)threads, sizeof *l->workers);
  if (!l->workers) goto nomem;
  l->nthreads = threads;
  for (int t = 0; t < threads; t++) {
    l->workers[t].l = l;
    if (clt_photos_scratch_init(&l->workers[t].s, p->image_size) != CLT_OK) goto nomem;
    if (l->aug.n) {
      l->workers[t].decoded = malloc(l->decoded_bytes);
      l->workers[t].work = malloc(
          clt_augment_work_floats(&l->aug, p->image_size, p->image_size, 3) * sizeof(float));
      if (!l->workers[t].decoded || !l->workers[t].work) goto nomem;
    }
  }
  if (pthread_mutex_init(&l->mu, NULL) != 0) goto nomem;
  if (pthread_cond_init(&l->work_cv, NULL) != 0) {
    pthread_mutex_destroy(&l->mu);
    goto nomem;
  }
  if (pthread_cond_init(&l->ready_cv, NULL) != 0) {
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
    goto nomem;
  }
  if (pthread_cond_init(&l->idle_cv, NULL) != 0) {
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
    goto nomem;
  }
  l->sync_ok = 1;
  for (int t = 0; t < threads; t++) {
    int err = pthread_create(&l->workers[t].tid, NULL, worker_main, &l->workers[t]);
    if (err) {
      rc = clt_fail(e, CLT_ERR_NOMEM, "photo loader: cannot start decoding thread %d of %d: %s",
                    t + 1, threads, strerror(err));
      goto cleanup;
    }
    l->started++;
  }
  *out = l;
  l = NULL;
  goto cleanup;
nomem:
  rc = clt_fail(e, CLT_ERR_NOMEM, "photo loader: out of memory (%d slots of %d images of %dx%d)",
                depth, max_batch, p->image_size, p->image_size);
cleanup:
  clt_loader_destroy(l); /* joins any thread already started */
  return rc;
}

int clt_loader_start(clt_loader *l, const int *order, int count, int batch, clt_err *e) {
  return clt_loader_start_epoch(l, order, count, batch, -1, e);
}

int clt_loader_start_epoch(clt_loader *l, const int *order, int count, int batch, int epoch,
                           clt_err *e) {
  int rc = CLT_OK;
  if (count < 0 || batch < 1 || batch > l->max_batch)
    return clt_fail(e, CLT_ERR_ARG, "photo loader: bad pass (count %d, batch %d, max batch %d)",
                    count, batch, l->max_batch);
  for (int i = 0; i < count; i++)
    if (order[i] < 0 || order[i] >= l->p->count)
      return clt_fail(e, CLT_ERR_ARG, "photo loader: order[%d] = %d outside [0, %d)", i, order[i],
                      l->p->count);
  pthread_mutex_lock(&l->mu);
  if (l->active && !l->cancelled && !l->failed && l->released < l->nsteps) {
    rc = clt_fail(e, CLT_ERR_ARG,
                  "photo loader: new pass while %d of %d batches of the last one are not consumed",
                  l->nsteps - l->released, l->nsteps);
    goto cleanup;
  }
  while (l->busy > 0) pthread_cond_wait(&l->idle_cv, &l->mu); /* they still write old slots */
  if (count > l->order_cap) {
    /* count > order_cap >= 0: never a 0-byte realloc */
    // NOLINTNEXTLINE(clang-analyzer-optin.portability.UnixAPI)
    int *g = realloc(l->order, (size_t)count * sizeof *g);
    if (!g) {
      rc = clt_fail(e, CLT_ERR_NOMEM, "photo loader: out of memory for an order of %d", count);
      goto cleanup;
    }
    l->order = g;
    l->order_cap = count;
  }
  if (count) memcpy(l->order, order, (size_t)count * sizeof *order);
  l->count = count;
  l->batch = batch;
  l->epoch = epoch < 0 ? -1 : epoch;
  l->nsteps = (count + batch - 1) / batch;
  l->opened = l->released = 0;
  l->cancelled = l->failed = 0;
  l->fail_step = INT_MAX;
  for (int d = 0; d < l->depth; d++) {
    l->slots[d].step = -1;
    l->slots[d].size = l->slots[d].todo = l->slots[d].busy = l->slots[d].puts = 0;
  }
  l->active = 1;
  pthread_cond_broadcast(&l->work_cv);
cleanup:
  pthread_mutex_unlock(&l->mu);
  return rc;
}

int clt_loader_get(clt_loader *l, int step, clt_photo_batch *out, double *wait_seconds,
                   clt_err *e) {
  return clt_loader_get_slice(l, step, 0, -1, out, wait_seconds, e);
}

/* Whether positions [first, first + len) of sl are decoded. */
static int slice_done(const slot *sl, int first, int len) {
  for (int j = first; j < first + len; j++)
    if (sl->state[j] != POS_DONE) return 0;
  return 1;
}

int clt_loader_get_slice(clt_loader *l, int step, int first, int len, clt_photo_batch *out,
                         double *wait_seconds, clt_err *e) {
  int rc = CLT_OK;
  double t0 = 0;
  int waited = 0;
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&l->mu);
  if (!l->active || step < 0 || step >= l->nsteps) {
    rc = clt_fail(e, CLT_ERR_ARG, "photo loader: step %d outside the pass (%d steps)", step,
                  l->active ? l->nsteps : 0);
    goto cleanup;
  }
  const int size = l->count - step * l->batch < l->batch ? l->count - step * l->batch : l->batch;
  if (len < 0) len = size - (first < 0 ? 0 : first);
  if (first < 0 || len < 0 || first > size - len) {
    rc = clt_fail(e, CLT_ERR_ARG, "photo loader: examples [%d, %d) outside step %d's batch of %d",
                  first, first + len, step, size);
    goto cleanup;
  }
  for (;;) {
    slot *sl = &l->slots[step % l->depth];
    if (l->cancelled || l->quit) {
      rc = clt_fail(e, CLT_ERR_ARG, "photo loader: pass cancelled (step %d)", step);
      goto cleanup;
    }
    if (l->failed && step >= l->fail_step) {
      rc = clt_fail(e, l->fail_err.code, "%s", l->fail_err.msg);
      goto cleanup;
    }
    if (sl->step == step && sl->puts < l->consumers) {
      /* A slice outside the share is decoded now (the share only decodes ahead). */
      if (want_range(sl, first, len)) pthread_cond_broadcast(&l->work_cv);
      if (slice_done(sl, first, len)) {
        out->pixels = sl->pixels + (size_t)first * l->img_bytes;
        out->labels = sl->labels + first;
        out->count = len;
        goto cleanup;
      }
    }
    if (sl->step > step || (sl->step == step && sl->puts == l->consumers)) {
      rc = clt_fail(e, CLT_ERR_ARG, "photo loader: step %d got after every consumer put it", step);
      goto cleanup;
    }
    if (!waited) {
      waited = 1;
      t0 = clt_now_seconds();
    }
    pthread_cond_wait(&l->ready_cv, &l->mu);
  }
cleanup:
  pthread_mutex_unlock(&l->mu);
  if (wait_seconds) *wait_seconds = waited ? clt_now_seconds() - t0 : 0.0;
  return rc;
}

int clt_loader_share(clt_loader *l, int from_step, int first, int len, int last_first, int last_len,
                     clt_err *e) {
  if (from_step < 0 || first < 0 || len < 0 || last_first < 0 || last_len < 0)
    return clt_fail(e, CLT_ERR_ARG,
                    "photo loader: bad share (from step %d, [%d, +%d), last [%d, +%d))", from_step,
                    first, len, last_first, last_len);
  pthread_mutex_lock(&l->mu);
  l->share = (range){first, len};
  l->share_last = (range){last_first, last_len};
  if (l->active) {
    for (int d = 0; d < l->depth; d++) {
      slot *sl = &l->slots[d];
      if (sl->step >= from_step && sl->puts < l->consumers) replan(l, sl);
    }
    pthread_cond_broadcast(&l->work_cv);
  }
  pthread_mutex_unlock(&l->mu);
  return CLT_OK;
}

void clt_loader_put(clt_loader *l, int step) {
  pthread_mutex_lock(&l->mu);
  slot *sl = &l->slots[step >= 0 ? step % l->depth : 0];
  if (l->active && step >= 0 && step < l->nsteps && sl->step == step && sl->puts < l->consumers &&
      ++sl->puts == l->consumers) {
    l->released++;
    pthread_cond_broadcast(&l->work_cv);
  }
  pthread_mutex_unlock(&l->mu);
}

void clt_loader_cancel(clt_loader *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  if (l->active) l->cancelled = 1;
  pthread_cond_broadcast(&l->ready_cv);
  pthread_cond_broadcast(&l->work_cv);
  pthread_mutex_unlock(&l->mu);
}

size_t clt_loader_decoded(const clt_loader *l) {
  clt_loader_work w;
  clt_loader_get_work(l, &w);
  return w.decoded;
}

void clt_loader_get_work(const clt_loader *l, clt_loader_work *w) {
  clt_loader *m = (clt_loader *)
      l; /* the mutex guards the counters; the loader is logically unchanged */
  pthread_mutex_lock(&m->mu);
  w->images = m->images;
  w->decoded = m->decoded;
  w->cpu_seconds = m->cpu_seconds;
  pthread_mutex_unlock(&m->mu);
}

void clt_loader_trace(clt_loader *l, clt_trace *trace) {
  for (int t = 0; t < l->nthreads; t++) {
    char name[32];
    snprintf(name, sizeof name, "decoder %d", t + 1);
    clt_trace_name(trace, CLT_TRACE_DATA_PID, t + 1, "photo decoding (host threads)", name);
  }
  pthread_mutex_lock(&l->mu);
  l->trace = trace;
  pthread_mutex_unlock(&l->mu);
}

void clt_loader_skip(clt_loader *l, clt_photos_skip_fn fn, void *ctx) {
  pthread_mutex_lock(&l->mu);
  l->skip = fn;
  l->skip_ctx = ctx;
  pthread_mutex_unlock(&l->mu);
}
