#include "source.h"

#include <stdlib.h>
#include <string.h>

struct clt_source {
  clt_source_i iface;
  void *ctx;
  clt_source_info info;
  int n;          /* replicas attached, 0: detached */
  int global;     /* examples per step */
  int *max_slice; /* per replica */
  int steps;      /* of the current pass; -1: none begun */
};

int clt_source_new(const clt_source_i *iface, void *ctx, const clt_source_info *info,
                   clt_source **out, clt_err *e) {
  *out = NULL;
  if (!iface->attach || !iface->begin || !iface->load || !iface->detach || !iface->free) {
    if (iface->free) iface->free(ctx);
    return clt_fail(e, CLT_ERR_INTERNAL, "batch source: incomplete interface");
  }
  clt_source *s = calloc(1, sizeof *s);
  if (!s) {
    iface->free(ctx);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for a batch source");
  }
  s->iface = *iface;
  s->ctx = ctx;
  s->info = *info;
  s->steps = -1;
  *out = s;
  return CLT_OK;
}

void clt_source_free(clt_source *s) {
  if (!s) return;
  clt_source_detach(s);
  s->iface.free(s->ctx);
  free(s);
}

const clt_source_info *clt_source_get_info(const clt_source *s) { return &s->info; }
int clt_source_count(const clt_source *s) { return s->info.count; }
const char *clt_source_path(const clt_source *s, int i) {
  if (!s->iface.path || i < 0 || i >= s->info.count) return NULL;
  return s->iface.path(s->ctx, i);
}

int clt_source_attach(clt_source *s, clt_replica *const *replicas, int n, int global_batch,
                      const int *max_slice, clt_preprocess pre, clt_err *e) {
  if (s->n) return clt_fail(e, CLT_ERR_ARG, "batch source: already attached to %d replicas", s->n);
  if (n < 1 || global_batch < 1) {
    return clt_fail(e, CLT_ERR_ARG, "batch source: %d replicas, global batch %d", n, global_batch);
  }
  for (int r = 0; r < n; r++) {
    if (max_slice[r] < 0 || max_slice[r] > global_batch) {
      return clt_fail(e, CLT_ERR_ARG,
                      "batch source: replica %d slices of %d examples, global batch %d", r,
                      max_slice[r], global_batch);
    }
  }
  if (pre != CLT_PRE_UNIT && pre != CLT_PRE_CAFFE && pre != CLT_PRE_RAW) {
    return clt_fail(e, CLT_ERR_ARG, "batch source: unknown preprocessing %d", (int)pre);
  }
  if (pre == CLT_PRE_CAFFE && s->info.channels != 3) {
    return clt_fail(e, CLT_ERR_ARG,
                    "batch source: 'caffe' preprocessing needs RGB images, these have %d channel%s",
                    s->info.channels, s->info.channels == 1 ? "" : "s");
  }
  s->max_slice = malloc((size_t)n * sizeof *s->max_slice);
  if (!s->max_slice) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for a batch source");
  memcpy(s->max_slice, max_slice, (size_t)n * sizeof *max_slice);
  int status = s->iface.attach(s->ctx, replicas, n, global_batch, max_slice, pre, e);
  if (status) {
    free(s->max_slice);
    s->max_slice = NULL;
    return status;
  }
  s->n = n;
  s->global = global_batch;
  s->steps = -1;
  return CLT_OK;
}

int clt_source_attached(const clt_source *s) { return s->n; }

void clt_source_detach(clt_source *s) {
  if (!s || !s->n) return;
  s->iface.detach(s->ctx);
  free(s->max_slice);
  s->max_slice = NULL;
  s->n = 0;
  s->steps = -1;
}

int clt_source_begin(clt_source *s, const int *order, clt_err *e) {
  return clt_source_begin_epoch(s, order, -1, e);
}

int clt_source_begin_epoch(clt_source *s, const int *order, int epoch, clt_err *e) {
  if (!s->n) return clt_fail(e, CLT_ERR_ARG, "batch source: a pass begun before attaching");
  s->steps = -1; /* whatever follows, the last pass is over */
  for (int i = 0; i < s->info.count; i++) {
    if (order[i] < 0 || order[i] >= s->info.count) {
      return clt_fail(e, CLT_ERR_ARG, "batch source: order[%d] = %d outside [0, %d)", i, order[i],
                      s->info.count);
    }
  }
  if (s->iface.set_epoch) s->iface.set_epoch(s->ctx, epoch < 0 ? -1 : epoch);
  int status = s->iface.begin(s->ctx, order, e);
  if (!status) s->steps = (s->info.count + s->global - 1) / s->global;
  return status;
}

int clt_source_load(clt_source *s, int rank, int step, int first, int len, cl_mem x, cl_mem y,
                    double *waited, clt_err *e) {
  double ignored;
  if (!waited) waited = &ignored;
  *waited = 0;
  if (s->steps < 0) return clt_fail(e, CLT_ERR_ARG, "batch source: load outside a pass");
  if (rank < 0 || rank >= s->n) {
    return clt_fail(e, CLT_ERR_ARG, "batch source: replica %d of %d", rank, s->n);
  }
  if (step < 0 || step >= s->steps) {
    return clt_fail(e, CLT_ERR_ARG, "batch source: step %d outside the pass (%d steps)", step,
                    s->steps);
  }
  const int rest = s->info.count - step * s->global;
  const int batch = rest < s->global ? rest : s->global;
  if (first < 0 || len < 0 || first > batch - len) {
    return clt_fail(e, CLT_ERR_ARG, "batch source: examples [%d, %d) outside step %d's batch of %d",
                    first, first + len, step, batch);
  }
  if (len > s->max_slice[rank]) {
    return clt_fail(e, CLT_ERR_ARG,
                    "batch source: slice of %d examples for replica %d, which takes %d", len, rank,
                    s->max_slice[rank]);
  }
  return s->iface.load(s->ctx, rank, step, first, len, x, y, waited, e);
}

int clt_source_share(clt_source *s, int step, int first, int len, int last_first, int last_len,
                     clt_err *e) {
  if (!s->n) return clt_fail(e, CLT_ERR_ARG, "batch source: a share before attaching");
  if (step < 0 || first < 0 || len < 0 || first > s->global - len || last_first < 0 ||
      last_len < 0 || last_first > s->global - last_len) {
    return clt_fail(e, CLT_ERR_ARG,
                    "batch source: share [%d, %d) and [%d, %d) from step %d, global batch %d",
                    first, first + len, last_first, last_first + last_len, step, s->global);
  }
  return s->iface.share ? s->iface.share(s->ctx, step, first, len, last_first, last_len, e)
                        : CLT_OK;
}

int clt_source_get_work(const clt_source *s, clt_source_work *w) {
  memset(w, 0, sizeof *w);
  if (!s || !s->n || !s->iface.work) return 0;
  s->iface.work(s->ctx, w);
  return 1;
}

void clt_source_cancel(clt_source *s) {
  if (s && s->n && s->iface.cancel) s->iface.cancel(s->ctx);
}

void clt_source_trace(clt_source *s, clt_trace *trace) {
  if (s && s->iface.trace) s->iface.trace(s->ctx, trace);
}

int clt_source_upload(clt_replica *r, cl_mem dst, const void *src, size_t bytes, const char *what,
                      clt_err *e) {
  cl_int rc = clEnqueueWriteBuffer(r->queue, dst, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
  return rc ? clt_replica_fail(r, e, rc, what) : CLT_OK;
}
