/* --trace: a timeline of a run's first steps as Chrome trace-event JSON (loads in
 * Perfetto and chrome://tracing).
 *
 * Spans are recorded into memory reserved when the trace is opened (a full
 * buffer drops later spans and says so in the file) and written when it is
 * closed. A span belongs to a track: a process id (one per replica, or the data
 * decoders) and a thread id within it. Times are clt_now_seconds() values; a
 * device's own clock is mapped onto it by the caller. Names and categories must
 * outlive the trace (string literals, or names the replicas keep). Spans of one
 * track are written in time order and clipped so they never overlap, as a
 * timeline of one queue or thread is (async spans excepted). Thread-safe. */
#ifndef CLT_TRACE_H
#define CLT_TRACE_H

#include "status.h"

typedef struct clt_trace clt_trace;

/* The tracks of a replica (its process id: the replica's global index + 1). */
enum {
  CLT_TRACE_HOST = 1,   /* its host thread: load, compute, waits, all-reduce, update */
  CLT_TRACE_RING = 2,   /* the host side of the all-reduce's steps */
  CLT_TRACE_LAYERS = 3, /* its kernels grouped by layer and pass */
  CLT_TRACE_DEVICE = 4, /* its queue: kernels and copies */
};
/* The photo decoders' process id (a thread track per decoder). */
#define CLT_TRACE_DATA_PID 1000

/* Creates path now (so a bad path fails before training), reserves room for
 * max_spans spans, and starts recording. */
int clt_trace_open(const char *path, int max_spans, clt_trace **out, clt_err *e);
/* Names a track (and its process) in the viewer. Names are copied. */
void clt_trace_name(clt_trace *t, int pid, int tid, const char *process, const char *thread);
/* Records a span [t0, t1) while recording; NULL t is fine. arg >= 0 is shown as
 * the span's "step". */
void clt_trace_span(clt_trace *t, int pid, int tid, const char *name, const char *cat, double t0,
                    double t1, int arg);
/* The same for a span of a traced step, taken after the stop too: a device's
 * events of the traced steps are read when the host has moved on, maybe past
 * the last traced step. */
void clt_trace_step_span(clt_trace *t, int pid, int tid, const char *name, const char *cat,
                         double t0, double t1, int step);
/* A span of a traced step that may overlap others of its process (a step from
 * its first launch to its end on the device, while the host enqueues the next):
 * written as a pair of async events ("b" and "e"), shown beside the process's
 * thread tracks. */
void clt_trace_async_span(clt_trace *t, int pid, const char *name, const char *cat, double t0,
                          double t1, int step);
/* Time 0 of the file is now: spans that began earlier are left out. */
void clt_trace_begin(clt_trace *t);
/* Recording is on until clt_trace_stop; spans that began before the stop are
 * still taken (a device's events are read after their step). */
int clt_trace_recording(const clt_trace *t, double start);
void clt_trace_stop(clt_trace *t);
/* Writes the file (atomically) and frees t; NULL is fine. */
int clt_trace_close(clt_trace *t, clt_err *e);

#endif
