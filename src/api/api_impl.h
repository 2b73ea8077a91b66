/* What the files of the public API (cltrain.h) share: the handles' common
 * header, recording a failed call's message, and reading "name=value" options.
 *   api.c       versions, statuses, messages, option strings (this header's functions)
 *   context.c   cltrain_ctx: devices, MPI, stop requests
 *   dataset.c   cltrain_dataset: data folders and the caller's memory
 *   model.c     cltrain_model
 *   trainer.c   cltrain_trainer: the custom loop's pieces, checkpoints, evaluation
 *   run.c       cltrain_options and the high-level calls (the command's) */
#ifndef CLT_API_IMPL_H
#define CLT_API_IMPL_H

#include <stdint.h>

#include "cltrain.h"
#include "cluster.h"
#include "data.h"
#include "device.h"
#include "model.h"
#include "status.h"

/* Every handle starts with this: its kind (a magic number, so a freed or foreign
 * pointer is refused where it can be told) and its last failed call's message. */
enum {
  API_CTX = 0x43545831,     /* "CTX1" */
  API_DATASET = 0x44415431, /* "DAT1" */
  API_MODEL = 0x4d444c31,   /* "MDL1" */
  API_TRAINER = 0x54524e31, /* "TRN1" */
  API_OPTIONS = 0x4f505431, /* "OPT1" */
  API_FREED = 0x46524545,   /* "FREE": written by a free function before it frees */
};

typedef struct api_handle {
  uint32_t kind;
  char msg[1024];
} api_handle;

/* The handles (each file owns its own struct's fields; trainer.c's and run.c's
 * structs are theirs alone). */
struct cltrain_ctx {
  api_handle h;
  clt_device_list devices; /* every device of the host, as `cltrain devices` lists them */
  clt_cluster *cluster;    /* the MPI run's processes, or NULL: this one alone */
  int verbose;             /* print the OpenCL compilers' build logs */
};

struct cltrain_dataset {
  api_handle h;
  cltrain_ctx *ctx;
  int memory;      /* from the caller's memory (the fields below), else a folder (data) */
  clt_data data;   /* a folder's sources; for memory, its train source and fields */
  char *dir;       /* a folder: its path as given (data.spec.dir points here) */
  uint8_t *images; /* memory: the copied images (owned by data.train, an IDX set's source) */
  int32_t *labels; /* memory: the copied labels (owned here) */
};

/* A dataset part's batch source, or NULL where it has none (a memory dataset's
 * test part). */
clt_source *api_dataset_source(cltrain_dataset *d, cltrain_part part);

struct cltrain_model {
  api_handle h;
  cltrain_ctx *ctx;
  clt_model *model;  /* heap: the struct is large; laid out with its frozen layers */
  float *weights;    /* model->flat_floats starting parameters */
  uint64_t seed;     /* the seed the weights were drawn from (no weights file) */
  char *keras_json;  /* a model file's text, which checkpoints keep (or NULL) */
  char *class_names; /* the data's class names one per line, which checkpoints keep (or NULL) */
};

/* Checks that h is a live handle of `kind` for function fn; if not, records why
 * (on the thread: a NULL or wrong handle has no message of its own) and returns
 * CLTRAIN_ERR_ARG (CLTRAIN_ERR_STATE for a freed one). */
int api_check(const void *h, uint32_t kind, const char *fn);

/* Records "fn: message" on h (NULL: the thread's) and returns status. */
int api_fail(void *h, const char *fn, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Records an engine error (clt_err) on h as "fn: msg" and returns its public status. */
int api_fail_err(void *h, const char *fn, const clt_err *e);
/* The public status of an engine code (CLT_ERR_*, OpenCL and CLBlast codes). */
int api_status(int clt_code);

/* "name=value ..." options (cltrain.h: Options). api_opts_parse splits text into
 * pairs, refusing a name not in `known` (NULL-ended) with a message naming fn. */
#define API_MAX_OPTS 32
typedef struct api_opts {
  int n;
  char *name[API_MAX_OPTS], *value[API_MAX_OPTS];
  char buf[4096];
} api_opts;
int api_opts_parse(void *h, const char *fn, const char *text, const char *const *known,
                   api_opts *o);
/* The value of option name, or NULL when not given. */
const char *api_opt(const api_opts *o, const char *name);
/* Typed reads: *out keeps def when the option is not given; a value out of
 * [min, max] or not a number is refused. */
int api_opt_long(void *h, const char *fn, const api_opts *o, const char *name, long min, long max,
                 long *out);
int api_opt_double(void *h, const char *fn, const api_opts *o, const char *name, double min,
                   double max, double *out);

#endif
