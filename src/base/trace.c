#define _POSIX_C_SOURCE 200809L
#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "timing.h"

typedef struct span {
  const char *name, *cat;
  double t0, t1;
  int pid, tid, arg;
  int async; /* written as a pair of async events, free to overlap */
} span;

typedef struct track_name {
  int pid, tid;
  char process[128], thread[64];
} track_name;

#define MAX_TRACKS 512

struct clt_trace {
  char path[4096], tmp[4200];
  pthread_mutex_t mu;
  span *spans;
  int nspans, cap, dropped;
  track_name tracks[MAX_TRACKS];
  int ntracks;
  double origin;    /* time 0 of the file */
  double stop_time; /* 0: still recording */
};

int clt_trace_open(const char *path, int max_spans, clt_trace **out, clt_err *e) {
  *out = NULL;
  clt_trace *t = calloc(1, sizeof *t);
  if (!t) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for --trace");
  snprintf(t->path, sizeof t->path, "%s", path);
  snprintf(t->tmp, sizeof t->tmp, "%s.tmp-%ld", path, (long)getpid());
  FILE *f = fopen(t->tmp, "w");
  if (!f) {
    int status = clt_fail(e, CLT_ERR_IO, "--trace %s: cannot create: %s", path, strerror(errno));
    free(t);
    return status;
  }
  fclose(f);
  t->cap = max_spans > 0 ? max_spans : 1;
  t->spans = calloc((size_t)t->cap, sizeof *t->spans); /* touched now, not in the steps */
  if (!t->spans) {
    unlink(t->tmp);
    free(t);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for --trace");
  }
  pthread_mutex_init(&t->mu, NULL);
  t->origin = clt_now_seconds();
  *out = t;
  return CLT_OK;
}

void clt_trace_name(clt_trace *t, int pid, int tid, const char *process, const char *thread) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  if (t->ntracks < MAX_TRACKS) {
    track_name *n = &t->tracks[t->ntracks++];
    n->pid = pid;
    n->tid = tid;
    snprintf(n->process, sizeof n->process, "%s", process);
    snprintf(n->thread, sizeof n->thread, "%s", thread);
  }
  pthread_mutex_unlock(&t->mu);
}

int clt_trace_recording(const clt_trace *t, double start) {
  return t && start >= t->origin && (t->stop_time == 0 || start < t->stop_time);
}

void clt_trace_begin(clt_trace *t) {
  if (t) t->origin = clt_now_seconds();
}

void clt_trace_stop(clt_trace *t) {
  if (t && t->stop_time == 0) t->stop_time = clt_now_seconds();
}

static void add(clt_trace *t, span s) {
  if (s.t1 < s.t0) s.t1 = s.t0;
  pthread_mutex_lock(&t->mu);
  if (t->nspans < t->cap) t->spans[t->nspans++] = s;
  else t->dropped++;
  pthread_mutex_unlock(&t->mu);
}

void clt_trace_span(clt_trace *t, int pid, int tid, const char *name, const char *cat, double t0,
                    double t1, int arg) {
  if (clt_trace_recording(t, t0)) add(t, (span){name, cat, t0, t1, pid, tid, arg, 0});
}

void clt_trace_step_span(clt_trace *t, int pid, int tid, const char *name, const char *cat,
                         double t0, double t1, int step) {
  if (t && t0 >= t->origin) add(t, (span){name, cat, t0, t1, pid, tid, step, 0});
}

void clt_trace_async_span(clt_trace *t, int pid, const char *name, const char *cat, double t0,
                          double t1, int step) {
  if (t && t0 >= t->origin) add(t, (span){name, cat, t0, t1, pid, CLT_TRACE_HOST, step, 1});
}

/* Async spans after the tracks' spans. */
static int by_track_then_time(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->async != y->async) return x->async < y->async ? -1 : 1;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return (x->t0 > y->t0) - (x->t0 < y->t0);
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

/* One span as a complete event, or an async one as its begin and end, told
 * apart from the file's other async spans by id. */
static void write_span(FILE *f, const clt_trace *t, const span *s, int id, int *first) {
  for (int part = 0; part < (s->async ? 2 : 1); part++) {
    const char *ph = !s->async ? "X" : part ? "e" : "b";
    fprintf(f, "%s\n{\"ph\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, ", *first ? "" : ",",
            ph, s->pid, s->tid, ((part ? s->t1 : s->t0) - t->origin) * 1e6);
    if (s->async) fprintf(f, "\"id\": %d, ", id);
    else fprintf(f, "\"dur\": %.3f, ", (s->t1 - s->t0) * 1e6);
    fprintf(f, "\"name\": ");
    json_string(f, s->name);
    if (s->cat) {
      fprintf(f, ", \"cat\": ");
      json_string(f, s->cat);
    }
    if (s->arg >= 0 && part == 0) fprintf(f, ", \"args\": {\"step\": %d}", s->arg);
    fputc('}', f);
    *first = 0;
  }
}

/* The spans in track order, clipped so one track's never overlap; the device
 * tracks' kernels also grouped into their layer and pass (the category) on the
 * track before them (tid - 1). */
static void write_events(FILE *f, clt_trace *t) {
  int first = 1;
  for (int i = 0; i < t->ntracks; i++) {
    const track_name *n = &t->tracks[i];
    int named = 0; /* the process by an earlier track */
    for (int j = 0; j < i && !named; j++) named = t->tracks[j].pid == n->pid;
    if (!named) {
      fprintf(f,
              "%s\n{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_name\", \"args\": {\"name\": ",
              first ? "" : ",", n->pid);
      json_string(f, n->process);
      fprintf(f,
              "}},\n{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_sort_index\", "
              "\"args\": {\"sort_index\": %d}}",
              n->pid, n->pid);
      first = 0;
    }
    fprintf(f,
            "%s\n{\"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"name\": \"thread_name\", "
            "\"args\": {\"name\": ",
            first ? "" : ",", n->pid, n->tid);
    json_string(f, n->thread);
    fprintf(f, "}}");
    first = 0;
  }
  qsort(t->spans, (size_t)t->nspans, sizeof *t->spans, by_track_then_time);
  span group = {0};
  int grouping = 0;
  for (int i = 0; i < t->nspans; i++) {
    span *s = &t->spans[i];
    if (i > 0 && !s->async && s->pid == s[-1].pid && s->tid == s[-1].tid && s->t0 < s[-1].t1) {
      s->t0 = s[-1].t1; /* one queue or thread: clip what the clocks made overlap */
      if (s->t1 < s->t0) s->t1 = s->t0;
    }
    write_span(f, t, s, i, &first);
    if (s->async || s->tid != CLT_TRACE_DEVICE) continue;
    /* A layer span covers a run of kernels of one scope; an unscoped one stands alone. */
    if (grouping && group.pid == s->pid && s->cat && group.name &&
        strcmp(group.name, s->cat) == 0) {
      group.t1 = s->t1;
      continue;
    }
    if (grouping) write_span(f, t, &group, -1, &first);
    group = (span){s->cat ? s->cat : s->name, NULL,   s->t0, s->t1, s->pid,
                   CLT_TRACE_LAYERS,          s->arg, 0};
    grouping = 1;
  }
  if (grouping) write_span(f, t, &group, -1, &first);
}

int clt_trace_close(clt_trace *t, clt_err *e) {
  if (!t) return CLT_OK;
  int status = CLT_OK;
  FILE *f = fopen(t->tmp, "w");
  if (!f) {
    status = clt_fail(e, CLT_ERR_IO, "--trace %s: cannot write: %s", t->path, strerror(errno));
    goto cleanup;
  }
  fprintf(f,
          "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"spans\": %d, \"dropped\": %d}, "
          "\"traceEvents\": [",
          t->nspans, t->dropped);
  write_events(f, t);
  fprintf(f, "\n]}\n");
  if (ferror(f) | (fclose(f) != 0)) {
    status = clt_fail(e, CLT_ERR_IO, "--trace %s: cannot write: %s", t->path, strerror(errno));
  } else if (rename(t->tmp, t->path) != 0) {
    status = clt_fail(e, CLT_ERR_IO, "--trace %s: cannot rename into place: %s", t->path,
                      strerror(errno));
  }
cleanup:
  if (status) unlink(t->tmp);
  pthread_mutex_destroy(&t->mu);
  free(t->spans);
  free(t);
  return status;
}
