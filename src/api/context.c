/* cltrain_ctx: the host's devices, the MPI run's processes, stop requests
 * (cltrain.h: the context; stopping). */
#include <stdio.h>
#include <stdlib.h>

#include "api_impl.h"
#include "interrupt.h"

static cltrain_ctx *ctx_new(int verbose) {
  cltrain_ctx *c = calloc(1, sizeof *c);
  if (c) {
    c->h.kind = API_CTX;
    c->verbose = verbose;
  }
  return c;
}

/* Leaves the run (failed: cltrain_abort) and frees the context. */
static void ctx_free(cltrain_ctx **ctx, int failed) {
  if (!ctx || !*ctx || (*ctx)->h.kind != API_CTX) return;
  cltrain_ctx *c = *ctx;
  clt_cluster_leave(c->cluster, failed);
  clt_devices_free(&c->devices);
  c->h.kind = API_FREED;
  free(c);
  *ctx = NULL;
}

/* Joins the run first (as the command always has: MPI is initialised before the
 * OpenCL drivers start their threads), then lists the devices; a process whose
 * listing fails tells the others (clt_cluster_agree), so every one of them fails
 * cleanly rather than wait for it. */
CLTRAIN_API int cltrain_open(const char *options, cltrain_ctx **out) {
  static const char *const known[] = {"verbose", NULL};
  if (!out) return api_fail(NULL, __func__, CLTRAIN_ERR_ARG, "out is NULL");
  *out = NULL;
  api_opts opts;
  long verbose = 0;
  int status = api_opts_parse(NULL, __func__, options, known, &opts);
  if (!status) status = api_opt_long(NULL, __func__, &opts, "verbose", 0, 1, &verbose);
  if (status) return status;
  cltrain_ctx *c = ctx_new((int)verbose);
  if (!c) return api_fail(NULL, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  clt_err e = {0};
  if (clt_cluster_join(&c->cluster, &e)) {
    free(c);
    return api_fail_err(NULL, __func__, &e);
  }
  if (clt_cluster_agree(c->cluster, clt_devices_enumerate(&c->devices, &e), &e)) {
    ctx_free(&c, 1);
    return api_fail_err(NULL, __func__, &e);
  }
  const char *note = clt_cluster_note(c->cluster);
  if (*note) fprintf(stderr, "cltrain: note: %s\n", note);
  *out = c;
  return CLTRAIN_OK;
}

CLTRAIN_API void cltrain_close(cltrain_ctx **ctx) { ctx_free(ctx, 0); }

CLTRAIN_API void cltrain_abort(cltrain_ctx **ctx) { ctx_free(ctx, 1); }

CLTRAIN_API int cltrain_rank(const cltrain_ctx *ctx) {
  if (api_check(ctx, API_CTX, __func__)) return -1;
  return clt_cluster_rank(ctx->cluster);
}

CLTRAIN_API int cltrain_processes(const cltrain_ctx *ctx) {
  if (api_check(ctx, API_CTX, __func__)) return -1;
  return clt_cluster_size(ctx->cluster);
}

CLTRAIN_API int cltrain_built_with_mpi(void) { return clt_cluster_built_with_mpi(); }

/* Device i of ctx, or NULL (recording why on ctx, or the thread for a bad ctx). */
static const clt_device *device_at(const cltrain_ctx *ctx, int i, const char *fn) {
  if (api_check(ctx, API_CTX, fn)) return NULL;
  if (i < 0 || i >= ctx->devices.count) {
    /* The message buffer is the handle's own, writable through a const handle. */
    api_fail((void *)ctx, fn, CLTRAIN_ERR_ARG, "no device %d (the host has %d)", i,
             ctx->devices.count);
    return NULL;
  }
  return &ctx->devices.devices[i];
}

CLTRAIN_API int cltrain_device_count(const cltrain_ctx *ctx) {
  if (api_check(ctx, API_CTX, __func__)) return -1;
  return ctx->devices.count;
}

CLTRAIN_API const char *cltrain_device_name(const cltrain_ctx *ctx, int i) {
  const clt_device *d = device_at(ctx, i, __func__);
  return d ? d->name : NULL;
}

CLTRAIN_API const char *cltrain_device_platform(const cltrain_ctx *ctx, int i) {
  const clt_device *d = device_at(ctx, i, __func__);
  return d ? d->platform_name : NULL;
}

CLTRAIN_API const char *cltrain_device_type(const cltrain_ctx *ctx, int i) {
  const clt_device *d = device_at(ctx, i, __func__);
  if (!d) return NULL;
  /* As clt_device_type_name orders them: a device of several types is its first. */
  if (d->type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (d->type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (d->type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

CLTRAIN_API unsigned cltrain_device_compute_units(const cltrain_ctx *ctx, int i) {
  const clt_device *d = device_at(ctx, i, __func__);
  return d ? (unsigned)d->compute_units : 0;
}

CLTRAIN_API double cltrain_device_memory(const cltrain_ctx *ctx, int i) {
  const clt_device *d = device_at(ctx, i, __func__);
  return d ? (double)d->global_mem_bytes : 0;
}

/* ---- stopping: the command's Ctrl-C path (interrupt.c), which the trainer polls ---- */

CLTRAIN_API void cltrain_request_stop(void) { clt_interrupt_request(); }

CLTRAIN_API int cltrain_stop_requested(void) { return clt_interrupt_signal() != 0; }

CLTRAIN_API int cltrain_stop_signal(void) {
  const int sig = clt_interrupt_signal();
  return sig > 0 ? sig : 0;
}

CLTRAIN_API void cltrain_clear_stop(void) { clt_interrupt_clear(); }

CLTRAIN_API void cltrain_handle_signals(void) {
  static int installed; /* one waiting thread per process */
  if (installed) return;
  installed = 1;
  clt_interrupt_install();
}
