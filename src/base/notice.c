#define _POSIX_C_SOURCE 200809L
#include "notice.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct clt_notice {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* on CLOCK_MONOTONIC, like clt_now_seconds */
  pthread_t thread;
  struct timespec due;
  FILE *out;
  int done;
  char text[320];
};

static void *wait_then_print(void *arg) {
  clt_notice *n = arg;
  pthread_mutex_lock(&n->lock);
  int rc = 0;
  while (!n->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&n->cond, &n->lock, &n->due);
  if (!n->done) {
    fprintf(n->out, "%s\n", n->text);
    fflush(n->out);
    n->done = 1;
  }
  pthread_mutex_unlock(&n->lock);
  return NULL;
}

int clt_notice_start(double seconds, FILE *out, const char *text, clt_notice **out_notice,
                     clt_err *e) {
  *out_notice = NULL;
  clt_notice *n = calloc(1, sizeof *n);
  if (!n) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  snprintf(n->text, sizeof n->text, "%s", text);
  n->out = out;
  clock_gettime(CLOCK_MONOTONIC, &n->due);
  const long ns = (long)(seconds * 1e9);
  n->due.tv_sec += ns / 1000000000L + (n->due.tv_nsec + ns % 1000000000L) / 1000000000L;
  n->due.tv_nsec = (n->due.tv_nsec + ns % 1000000000L) % 1000000000L;
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (!rc) rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (!rc) rc = pthread_cond_init(&n->cond, &attr);
  pthread_condattr_destroy(&attr);
  if (rc) {
    free(n);
    return clt_fail(e, CLT_ERR_INTERNAL, "cannot set up a timer: %s", strerror(rc));
  }
  pthread_mutex_init(&n->lock, NULL);
  if ((rc = pthread_create(&n->thread, NULL, wait_then_print, n))) {
    pthread_cond_destroy(&n->cond);
    pthread_mutex_destroy(&n->lock);
    free(n);
    return clt_fail(e, CLT_ERR_INTERNAL, "cannot start a timer thread: %s", strerror(rc));
  }
  *out_notice = n;
  return CLT_OK;
}

void clt_notice_done(clt_notice *n) {
  if (!n) return;
  pthread_mutex_lock(&n->lock);
  n->done = 1;
  pthread_cond_signal(&n->cond);
  pthread_mutex_unlock(&n->lock);
}

void clt_notice_free(clt_notice *n) {
  if (!n) return;
  clt_notice_done(n);
  pthread_join(n->thread, NULL);
  pthread_cond_destroy(&n->cond);
  pthread_mutex_destroy(&n->lock);
  free(n);
}
