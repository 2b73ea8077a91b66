/* The decoding threads: batches decoded ahead into a ring of slots, decoded images
 * cached across passes, each image augmented after its decode. See photos.h. */
#define _POSIX_C_SOURCE 200809L /* pthreads, sysconf */

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "photos_impl.h"
#include "timing.h"

/* Ring slot: batch `step` lives in slot step % depth until all consumers put it.
 * Decoders claim images one at a time in pass order, under the mutex; a slot may be
 * claimed for a new step only once its previous step is released. */
typedef struct slot {
  unsigned char *pixels; /* max_batch images */
  int *labels;
  int step; /* -1: never used in this pass */
  int need, filled, puts;
} slot;

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
  pthread_cond_t ready_cv; /* consumers: a batch completed, failed or was cancelled */
  pthread_cond_t idle_cv;  /* start(): no decoder holds an image of the old pass */
  int sync_ok;
  /* current pass */
  int *order, order_cap;
  int count, batch, nsteps;
  int epoch; /* the draws' epoch; -1: not training (augmentations as at inference) */
  int active, next, released, busy, cancelled, failed, quit;
  int fail_step; /* earliest step with a failed image; steps before it still complete */
  clt_err fail_err;
  /* cache: examples 0..cache_n-1, img_bytes each */
  unsigned char *cache;
  unsigned char *cache_state;
  int cache_n;
  size_t decoded;
  clt_trace *trace;        /* --trace: each decode is a span of its decoder's track */
  clt_photos_skip_fn skip; /* NULL: a decode failure fails the pass */
  void *skip_ctx;
};

static int claimable(const clt_loader *l) {
  if (!l->active || l->cancelled || l->failed || l->next >= l->count) return 0;
  if (l->next % l->batch) return 1; /* its slot was taken by the step's first image */
  const slot *sl = &l->slots[(l->next / l->batch) % l->depth];
  return sl->step < 0 || sl->puts == l->consumers;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  clt_loader *l = w->l;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->quit && !claimable(l)) pthread_cond_wait(&l->work_cv, &l->mu);
    if (l->quit) break;
    int k = l->next++, step = k / l->batch, j = k % l->batch;
    slot *sl = &l->slots[step % l->depth];
    if (j == 0) {
      sl->step = step;
      sl->need = l->count - k < l->batch ? l->count - k : l->batch;
      sl->filled = 0;
      sl->puts = 0;
    }
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

    pthread_mutex_lock(&l->mu);
    l->busy--;
    if (to_cache) l->cache_state[idx] = rc == CLT_OK ? CACHE_READY : CACHE_EMPTY;
    if (!from_cache && rc == CLT_OK) l->decoded++;
    if (!l->cancelled) { /* else the pass is over: the image is discarded */
      if (failed) {
        /* Claims are in order, so every image of an earlier step is already in
         * flight: those steps still complete, and every consumer meets the error
         * at the same step. */
        if (!l->failed || step < l->fail_step) {
          l->failed = 1;
          l->fail_step = step;
          l->fail_err = w->err;
        }
        pthread_cond_broadcast(&l->ready_cv);
      } else if (++sl->filled == sl->need) {
        pthread_cond_broadcast(&l->ready_cv);
      }
    }
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
    l->slots[d].step = -1;
    if (!l->slots[d].pixels || !l->slots[d].labels) goto nomem;
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
  l->next = l->released = 0;
  l->cancelled = l->failed = 0;
  l->fail_step = INT_MAX;
  for (int d = 0; d < l->depth; d++) {
    l->slots[d].step = -1;
    l->slots[d].need = l->slots[d].filled = l->slots[d].puts = 0;
  }
  l->active = 1;
  pthread_cond_broadcast(&l->work_cv);
cleanup:
  pthread_mutex_unlock(&l->mu);
  return rc;
}

int clt_loader_get(clt_loader *l, int step, clt_photo_batch *out, double *wait_seconds,
                   clt_err *e) {
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
  for (;;) {
    const slot *sl = &l->slots[step % l->depth];
    if (l->cancelled || l->quit) {
      rc = clt_fail(e, CLT_ERR_ARG, "photo loader: pass cancelled (step %d)", step);
      goto cleanup;
    }
    if (l->failed && step >= l->fail_step) {
      rc = clt_fail(e, l->fail_err.code, "%s", l->fail_err.msg);
      goto cleanup;
    }
    if (sl->step == step && sl->filled == sl->need && sl->puts < l->consumers) {
      out->pixels = sl->pixels;
      out->labels = sl->labels;
      out->count = sl->need;
      goto cleanup;
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
  clt_loader *m = (clt_loader *)
      l; /* the mutex guards the counter; the loader is logically unchanged */
  pthread_mutex_lock(&m->mu);
  size_t n = m->decoded;
  pthread_mutex_unlock(&m->mu);
  return n;
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
