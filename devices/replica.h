/* A replica: one device with its own context, in-order queue, compiled
 * programs and memory. Everything a layer enqueues goes through here. */
#ifndef CLT_REPLICA_H
#define CLT_REPLICA_H

#include "device.h"

typedef struct clt_program_entry clt_program_entry;

#define CLT_PROFILE_MAX_NAMES 2048 /* ResNet50: about 1,000 (layer, pass, kernel) names */
#define CLT_PROFILE_HASH 4096
#define CLT_PROFILE_MAX_PENDING 4096

/* Device time per "scope: kernel" name (scope: the layer and pass the kernel ran
 * for, set by clt_replica_scope), from OpenCL profiling events. */
typedef struct clt_profile {
  int enabled;
  int nnames;
  char names[CLT_PROFILE_MAX_NAMES][112];
  double seconds[CLT_PROFILE_MAX_NAMES];
  long calls[CLT_PROFILE_MAX_NAMES];
  int hash[CLT_PROFILE_HASH]; /* name index + 1, or 0: free */
  char scope[64];
  int npending;
  cl_event pending[CLT_PROFILE_MAX_PENDING];
  int pending_name[CLT_PROFILE_MAX_PENDING];
} clt_profile;

typedef struct clt_replica {
  clt_device device; /* copy of the enumerated description */
  cl_context context;
  cl_command_queue queue;      /* in order, profiling enabled */
  clt_program_entry *programs; /* built once per (source, options) */
  size_t work_group;           /* preferred 1-D work-group size for elementwise kernels */
  size_t max_work_group;       /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  cl_mem gemm_temp;            /* CLBlast scratch, sized once by clt_gemm_reserve */
  size_t gemm_temp_bytes;      /* its size */
  size_t allocated_bytes;      /* device memory this replica holds */
  clt_profile *profile;        /* NULL unless profiling */
} clt_replica;

int clt_replica_create(const clt_device *device, clt_replica **out, clt_err *e);

/* Names what the following launches are for in the profile, e.g. ("conv2d_1",
 * "backward"); (NULL, NULL) clears it. */
void clt_replica_scope(clt_replica *r, const char *what, const char *pass);
void clt_replica_destroy(clt_replica *r);

/* Returns the kernel `name` of embedded source `source` ("conv.cl") built with
 * `options` (may be ""). The program is built at most once per replica and
 * options; the kernel object is cached too and owned by the replica. A failed
 * build reports the device and the build log. */
int clt_replica_kernel(clt_replica *r, const char *source, const char *options, const char *name,
                       cl_kernel *out, clt_err *e);

/* Allocates a zero-filled device buffer; `what` names it in errors. */
int clt_replica_alloc(clt_replica *r, size_t bytes, const char *what, cl_mem *out, clt_err *e);

/* One kernel argument: its size and address (local memory: ptr NULL). */
typedef struct clt_karg {
  size_t size;
  const void *ptr;
} clt_karg;
#define CLT_ARG(x) ((clt_karg){sizeof(x), &(x)})

/* Sets the arguments and enqueues a 1-D launch of at least n work-items
 * (rounded up to the replica's work-group; kernels guard the tail).
 * n == 0 enqueues nothing. */
int clt_launch1d(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                 size_t n, clt_err *e);

/* A launch with explicit global and local sizes (local may be NULL). */
int clt_launch(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
               cl_uint dims, const size_t *global, const size_t *local, clt_err *e);

/* 2-D launch over (n0, n1) work-items, n0 the fastest-varying (channels):
 * work-groups of (n0 rounded to a divisor-friendly size, 1); kernels guard the tail. */
int clt_launch2d(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                 size_t n0, size_t n1, clt_err *e);

/* Turns per-kernel profiling on (allocates the table once). */
int clt_replica_enable_profiling(clt_replica *r, clt_err *e);
/* Returns an event slot to pass to an enqueue when profiling, else NULL; after the
 * enqueue call clt_replica_profile_commit(r, name). */
cl_event *clt_replica_profile_event(clt_replica *r);
void clt_replica_profile_commit(clt_replica *r, const char *name);
/* Waits for pending events and adds their device time to the table. */
int clt_replica_profile_collect(clt_replica *r, clt_err *e);

/* Error for a failed OpenCL call on this replica: "<device>: <what>: CL_…". */
int clt_replica_fail(clt_replica *r, clt_err *e, int rc, const char *what);

#endif
