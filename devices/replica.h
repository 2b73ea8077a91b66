/* A replica: one device with its own context, in-order queue, compiled
 * programs and memory. Everything a layer enqueues goes through here.
 *
 * A replica knows nothing of the kernels' variants or of GEMM libraries: its
 * backend (src/backend) sets the options every program is built with, the
 * work-group size 1-D launches aim for, and keeps its own state beside it. */
#ifndef CLT_REPLICA_H
#define CLT_REPLICA_H

#include "device.h"
#include "trace.h"

typedef struct clt_program_entry clt_program_entry;

#define CLT_PROFILE_MAX_NAMES 2048 /* ResNet50: about 1,000 (layer, pass, kernel) names */
#define CLT_PROFILE_HASH 4096
#define CLT_PROFILE_MAX_PENDING 4096

/* What a launch is, for the sums (clt_replica_profile_kind): */
enum {
  CLT_PROFILE_COMPUTE = 1,   /* part of a forward or backward pass (compute_seconds) */
  CLT_PROFILE_UNCOUNTED = 2, /* left out of the sums (an evaluation's launches) */
};

/* Device time per "scope: kernel" name (scope: the layer and pass the kernel ran
 * for, set by clt_replica_scope), from OpenCL profiling events. */
typedef struct clt_profile {
  int enabled;
  int nnames;
  char names[CLT_PROFILE_MAX_NAMES][112];
  double seconds[CLT_PROFILE_MAX_NAMES];
  long calls[CLT_PROFILE_MAX_NAMES];
  int hash[CLT_PROFILE_HASH]; /* name index + 1, or 0: free */
  /* Per name: its scope alone, and where the kernel's name starts in names[] (for
   * --trace, which shows kernels grouped by scope). */
  char scopes[CLT_PROFILE_MAX_NAMES][64];
  unsigned char kernel_at[CLT_PROFILE_MAX_NAMES];
  char scope[64];
  int npending;
  cl_event pending[CLT_PROFILE_MAX_PENDING];
  int pending_name[CLT_PROFILE_MAX_PENDING];
  /* What the following launches are (CLT_PROFILE_* flags) and the traced step
   * they belong to (0: none), and the same for each pending event: */
  int kind, step;
  unsigned char pending_kind[CLT_PROFILE_MAX_PENDING];
  int pending_step[CLT_PROFILE_MAX_PENDING];
  double compute_seconds; /* the counted events of kind CLT_PROFILE_COMPUTE */
} clt_profile;

/* Largest work-group the GPU variants' local-memory tiles are sized for
 * (-DCLT_WG): a power of two, at most this and the device's maximum. */
#define CLT_WG_MAX 256

struct clt_backend; /* src/backend/backend.h: what differs between device kinds */

typedef struct clt_kernel_info clt_kernel_info;
#define CLT_KERNEL_INFO_SLOTS 1024

/* One convolution layer's algorithm per pass (forward, weight gradient, input
 * gradient: gemm.h's CLT_CONV_*, -1 for the backend's default), as a tuner, a
 * tuning file or a checkpoint chose it for this replica (gemm.h's
 * clt_conv_choose). */
#define CLT_MAX_CONV_CHOICES 512
typedef struct clt_conv_choice {
  char layer[64];
  int algo[3];
} clt_conv_choice;

/* In-step timing (the tuner, tuner.h): while a replica holds one, each
 * clt_replica_scope call enqueues a marker and keeps its event and scope, so
 * the device time of a scope in place is the span between its marker's end
 * and the next one's. at_scope (tests) is called after each marker, flushed. */
#define CLT_SCOPE_MARKS_MAX 4096
struct clt_replica;
typedef struct clt_scope_marks {
  int n;
  int failed; /* a marker could not be enqueued, or more than the table holds */
  cl_event ev[CLT_SCOPE_MARKS_MAX];
  char scope[CLT_SCOPE_MARKS_MAX][80]; /* "layer pass", "" for a (NULL, NULL) call */
  void (*at_scope)(void *ctx, struct clt_replica *r, const char *what, const char *pass);
  void *ctx;
} clt_scope_marks;

typedef struct clt_replica {
  clt_device device; /* copy of the enumerated description */
  /* Set by the backend when it takes the replica (clt_backend_create_replica): */
  const struct clt_backend *backend;
  void *backend_state; /* the backend's own (GEMM scratch, ...) */
  const char *variant; /* the backend's name, for messages ("cpu", "gpu") */
  char defines[96];    /* options every program is built with (the kernels' variant) */
  size_t group_size;   /* the work-group 1-D launches aim for */
  size_t chunk;        /* floats per work-item of the elementwise kernels (clt_launch_elems) */
  int winograd;        /* Winograd tile (0: none, 2, 4) of 3x3 stride-1 convolutions:
                          $CLTRAIN_WINOGRAD, which forces it over any choice below */
  int nconv_choices;   /* the layers chosen for (the others take the default) */
  clt_conv_choice conv_choices[CLT_MAX_CONV_CHOICES];
  cl_context context;
  cl_command_queue queue;      /* in order, profiling enabled */
  clt_program_entry *programs; /* built once per (source, options) */
  size_t max_work_group;       /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  size_t tile_wg;              /* -DCLT_WG: power of two <= CLT_WG_MAX, max_work_group */
  const char *exact_options;   /* "-cl-fp32-correctly-rounded-divide-sqrt" where supported */
  /* Per kernel: CL_KERNEL_WORK_GROUP_SIZE and the preferred multiple, by handle. */
  clt_kernel_info *kernel_info; /* CLT_KERNEL_INFO_SLOTS, open addressing */
  char *build_log;              /* warnings of successful builds, for --verbose */
  size_t build_log_len;
  size_t allocated_bytes; /* device memory this replica holds */
  clt_profile *profile;   /* NULL unless profiling */
  clt_scope_marks *marks; /* NULL unless the tuner times scopes in place */
  clt_trace *trace;       /* --trace: where this replica's spans go, or NULL */
  int trace_pid;          /* its process in the trace */
  double trace_offset;    /* host seconds = device seconds + this */
  /* The traced optimizer steps, trace_first + 1 to trace_first + trace_steps, and
   * for each one not yet written, when its first launch was enqueued and when its
   * last ended (host seconds; 0: not yet). */
  long trace_first;
  int trace_steps;
  double *trace_step_span; /* 2 * trace_steps */
  /* Set by the trainer, for CLTRAIN_FAULT (fault.h) and the all-reduce's watchdog: */
  int index;         /* the replica's index in the run ("Replica N:") */
  _Atomic long step; /* the optimizer step its thread is on (1-based; 0: set-up) */
  int hung;          /* declared hung (clt_ring_join): its thread may still be in the
                        driver, so destroying it releases nothing */
} clt_replica;

int clt_replica_create(const clt_device *device, clt_replica **out, clt_err *e);

/* Names what the following launches are for in the profile, e.g. ("conv2d_1",
 * "backward"); (NULL, NULL) clears it. */
void clt_replica_scope(clt_replica *r, const char *what, const char *pass);
/* For in-step timing alone (nothing unless the replica holds marks): where a
 * part of the current scope begins, e.g. ("conv2d_1", "input gradient") in its
 * backward, timed apart by the tuner; the profile's scope stays. */
void clt_replica_submark(clt_replica *r, const char *what, const char *part);
void clt_replica_destroy(clt_replica *r);

/* Returns the kernel `name` of embedded source `source` ("conv.cl") built with
 * `options` (may be ""). The program is built at most once per replica and
 * options; the kernel object is cached too and owned by the replica. A failed
 * build reports the device and the build log. */
int clt_replica_kernel(clt_replica *r, const char *source, const char *options, const char *name,
                       cl_kernel *out, clt_err *e);

/* Builds sources names[0..n) as one program (with exact_options): later
 * clt_replica_kernel calls for any of them, with options "" or exact_options,
 * take their kernels from it. PoCL builds one program at a time, each with a
 * fixed cost beyond its sources' own, so a run's start builds what its model
 * uses as one program. A source already built is left out. A failed joint
 * build is not an error: each source is then built alone on first use, so a
 * compile error names its own file and line (the joint build's log is kept
 * for --verbose). */
void clt_replica_build_joint(clt_replica *r, const char *const *names, int n);

/* Allocates a zero-filled device buffer; `what` names it in errors. */
int clt_replica_alloc(clt_replica *r, size_t bytes, const char *what, cl_mem *out, clt_err *e);

/* Sets floats [offset, offset + n) of m to value (cl/reduce.cl's fill kernel). */
int clt_replica_fill(clt_replica *r, cl_mem m, size_t offset, size_t n, float value,
                     const char *what, clt_err *e);

/* One kernel argument: its size and address (local memory: ptr NULL). */
typedef struct clt_karg {
  size_t size;
  const void *ptr;
} clt_karg;
#define CLT_ARG(x) ((clt_karg){sizeof(x), &(x)})

/* Elementwise kernels over n floats (a work-item takes `chunk` of them):
 * ceil(n / chunk) work-items, on the replica's queue or, unprofiled, on
 * another in-order queue q of its context (event, or NULL, receiving the
 * launch's event: the overlapped all-reduce's adds). */
int clt_launch_elems(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                     int nargs, size_t n, clt_err *e);
int clt_launch_elems_on(clt_replica *r, cl_command_queue q, cl_kernel k, const char *kname,
                        const clt_karg *args, int nargs, size_t n, cl_event *event, clt_err *e);

/* Sets the arguments and enqueues a 1-D launch of at least n work-items
 * (rounded up to a work-group the kernel allows on this device, aiming at the
 * backend's group_size; kernels guard the tail). n == 0 enqueues nothing. */
int clt_launch1d(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                 size_t n, clt_err *e);

/* A launch with explicit global and local sizes (local may be NULL). */
int clt_launch(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
               cl_uint dims, const size_t *global, const size_t *local, clt_err *e);

/* The same on another in-order queue q of the replica's context, unprofiled,
 * event (or NULL) receiving its event. */
int clt_launch_on(clt_replica *r, cl_command_queue q, cl_kernel k, const char *kname,
                  const clt_karg *args, int nargs, cl_uint dims, const size_t *global,
                  const size_t *local, cl_event *event, clt_err *e);

/* 2-D launch over (n0, n1) work-items, n0 the fastest-varying (channels);
 * kernels guard the tail. */
int clt_launch2d(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                 size_t n0, size_t n1, clt_err *e);

/* The 1-D work-group clt_launch1d uses for k, and the largest power of two
 * <= min(tile_wg, the kernel's limit) (what local-memory trees need). */
size_t clt_replica_local_1d(clt_replica *r, cl_kernel k);
size_t clt_replica_local_pow2(clt_replica *r, cl_kernel k);

/* Calls fn(name, ctx) for each kernel this replica has created (tests check
 * every kernel of cl/ ran). */
void clt_replica_kernel_names(const clt_replica *r, void (*fn)(const char *name, void *ctx),
                              void *ctx);

/* Turns per-kernel profiling on (allocates the table once). */
int clt_replica_enable_profiling(clt_replica *r, clt_err *e);
/* Returns an event slot to pass to an enqueue when profiling, else NULL; after the
 * enqueue call clt_replica_profile_commit(r, name). */
cl_event *clt_replica_profile_event(clt_replica *r);
void clt_replica_profile_commit(clt_replica *r, const char *name);
/* What the following launches are: CLT_PROFILE_* flags (0: counted in the busy
 * time only). */
void clt_replica_profile_kind(clt_replica *r, int kind);
/* Waits for pending events and adds their device time to the table; with
 * --trace, their spans, and the spans of the traced steps whose launches were
 * all pending (call it between steps). */
int clt_replica_profile_collect(clt_replica *r, clt_err *e);

/* --trace: this replica's spans go to `trace` as process `pid` (named after the
 * replica), its device's clock mapped onto the host's by a timed marker; the
 * optimizer steps first_step + 1 to first_step + steps are traced. Kernel spans
 * come from the profiling events (clt_replica_profile_collect). */
int clt_replica_trace(clt_replica *r, clt_trace *trace, int pid, const char *label, long first_step,
                      int steps, clt_err *e);
/* The launches that follow belong to optimizer step `step` (0: none, as between
 * steps); a traced step's first call notes its start, now. */
void clt_replica_trace_step(clt_replica *r, long step);
/* A host span of this replica on thread track tid (CLT_TRACE_HOST, CLT_TRACE_RING). */
void clt_replica_trace_span(clt_replica *r, int tid, const char *name, double t0, double t1,
                            int step);
/* A finished, profiled transfer event (the ring's copies) of the current step on
 * the device track. */
void clt_replica_trace_event(clt_replica *r, cl_event ev, const char *name, const char *cat);

/* Error for a failed OpenCL call on this replica: "<device>: <what>: CL_…". */
int clt_replica_fail(clt_replica *r, clt_err *e, int rc, const char *what);
/* The same for a call that CLTRAIN_FAULT made fail (fault.h): rc is the code
 * that stands for it, and the message says it was injected. */
int clt_replica_fail_injected(clt_replica *r, clt_err *e, int rc, const char *what);

#endif
