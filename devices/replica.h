/* A replica: one device with its own context, in-order queue, compiled
 * programs and memory. Everything a layer enqueues goes through here. */
#ifndef CLT_REPLICA_H
#define CLT_REPLICA_H

#include "device.h"
#include "trace.h"

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
  /* Per name: its scope alone, and where the kernel's name starts in names[] (for
   * --trace, which shows kernels grouped by scope). */
  char scopes[CLT_PROFILE_MAX_NAMES][64];
  unsigned char kernel_at[CLT_PROFILE_MAX_NAMES];
  char scope[64];
  int npending;
  cl_event pending[CLT_PROFILE_MAX_PENDING];
  int pending_name[CLT_PROFILE_MAX_PENDING];
} clt_profile;

/* Which variant of each kernel a replica builds (-DCLT_GPU=0|1, see cl/): CPU
 * devices get a work-item per row or chunk of 8 channels with explicit float8
 * vectors (PoCL does not vectorise across work-items) and cltrain's float16
 * GEMM; GPUs and accelerators get a work-item per element along the
 * contiguous channel dimension (coalesced), local-memory tree reductions, and
 * CLBlast's GEMM with its tuned database. $CLTRAIN_KERNELS=cpu|gpu|auto forces
 * one on every device (gpu on PoCL runs the GPU code paths in tests). */
typedef enum clt_kernel_flavor { CLT_KERNELS_CPU = 0, CLT_KERNELS_GPU = 1 } clt_kernel_flavor;

/* The flavor `device` gets: from $CLTRAIN_KERNELS, else from its type. An
 * unknown value of the variable is an error. */
int clt_kernel_flavor_for(const clt_device *device, clt_kernel_flavor *out, clt_err *e);
/* "cpu" or "gpu"; and a short description of the kernels and GEMM it means. */
const char *clt_kernel_flavor_name(clt_kernel_flavor f);
const char *clt_kernel_flavor_summary(clt_kernel_flavor f);

/* Largest work-group the GPU variants' local-memory tiles are sized for
 * (-DCLT_WG): a power of two, at most this and the device's maximum. */
#define CLT_WG_MAX 256

typedef struct clt_kernel_info clt_kernel_info;
#define CLT_KERNEL_INFO_SLOTS 1024

typedef struct clt_replica {
  clt_device device; /* copy of the enumerated description */
  clt_kernel_flavor flavor;
  cl_context context;
  cl_command_queue queue;      /* in order, profiling enabled */
  clt_program_entry *programs; /* built once per (source, options) */
  int joint_tried;             /* bit g: joint group g (replica.c) was built or failed */
  size_t max_work_group;       /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  size_t tile_wg;              /* -DCLT_WG: power of two <= CLT_WG_MAX, max_work_group */
  const char *exact_options;   /* "-cl-fp32-correctly-rounded-divide-sqrt" where supported */
  /* Per kernel: CL_KERNEL_WORK_GROUP_SIZE and the preferred multiple, by handle. */
  clt_kernel_info *kernel_info; /* CLT_KERNEL_INFO_SLOTS, open addressing */
  char *build_log;              /* warnings of successful builds, for --verbose */
  size_t build_log_len;
  cl_mem gemm_temp;       /* CLBlast scratch, sized once by clt_gemm_reserve */
  size_t gemm_temp_bytes; /* its size */
  cl_mem gemm_zeros;      /* zeros the padded convolution reads for taps outside the image */
  size_t gemm_zeros_floats;
  size_t allocated_bytes; /* device memory this replica holds */
  clt_profile *profile;   /* NULL unless profiling */
  clt_trace *trace;       /* --trace: where this replica's spans go, or NULL */
  int trace_pid;          /* its process in the trace */
  double trace_offset;    /* host seconds = device seconds + this */
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
void clt_replica_destroy(clt_replica *r);

/* Returns the kernel `name` of embedded source `source` ("conv.cl") built with
 * `options` (may be ""). The program is built at most once per replica and
 * options; the kernel object is cached too and owned by the replica. A failed
 * build reports the device and the build log. */
int clt_replica_kernel(clt_replica *r, const char *source, const char *options, const char *name,
                       cl_kernel *out, clt_err *e);

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

/* Sets the arguments and enqueues a 1-D launch of at least n work-items
 * (rounded up to a work-group the kernel allows on this device; kernels guard
 * the tail). n == 0 enqueues nothing. */
int clt_launch1d(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                 size_t n, clt_err *e);

/* Elementwise kernels over n floats: ceil(n/8) work-items of a float8 each on
 * the CPU flavor, n work-items on the GPU flavor (cl/ kernels written with
 * CLT_CHUNK). */
int clt_launch_elems(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                     int nargs, size_t n, clt_err *e);
/* The same on another in-order queue q of the replica's context, unprofiled,
 * event (or NULL) receiving its event: the overlapped all-reduce's adds. */
int clt_launch_elems_on(clt_replica *r, cl_command_queue q, cl_kernel k, const char *kname,
                        const clt_karg *args, int nargs, size_t n, cl_event *event, clt_err *e);

/* Kernels over a [rows][cols] matrix (cols contiguous: channels), per flavor:
 * CPU: range (ceil(cols/8), ceil(rows/rows_per_item)), a work-item takes 8
 *      channels of rows_per_item rows;
 * GPU: range (cols, rows) in work-groups (LC, LR), LC consecutive channels
 *      (coalesced) by LR rows, LC*LR a power of two <= CLT_WG. */
int clt_launch_rows(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                    size_t cols, size_t rows, size_t rows_per_item, clt_err *e);

/* Column sums over blocks of rows (partial[blk][c], see cl/): CPU: range
 * (ceil(cols/8), nblocks), a work-item sums its block's rows for 8 channels;
 * GPU: range (cols, nblocks * LR) in work-groups (LC, LR): the LR rows of a
 * group stride through the block and meet in a local-memory tree
 * (get_local_size(1) is a power of two). */
int clt_launch_blocks(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                      int nargs, size_t cols, size_t nblocks, clt_err *e);

/* Passes over blocks of rows written for long CPU work-items (the column sums
 * of bias_grad_partial and BatchNormalization, which also launches its CPU
 * elementwise passes this way): GPU as clt_launch_blocks; CPU: range
 * (ceil(cols / CLT_CPU_BLOCK_COLS), nblocks) in groups of one, a work-item
 * reads its block's rows CLT_CPU_BLOCK_COLS floats at a time, runs the
 * prefetchers follow (every program is built with -DCLT_CPU_BLOCK_COLS). */
#define CLT_CPU_BLOCK_COLS 256
int clt_launch_row_blocks(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                          int nargs, size_t cols, size_t nblocks, clt_err *e);

/* One work-group per block (GPU: a power of two <= CLT_WG work-items striding
 * through the block into a local-memory tree), one work-item per block (CPU):
 * kernels written with get_group_id(0) on GPUs, get_global_id(0) on CPUs. */
int clt_launch_groups(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                      int nargs, size_t nblocks, clt_err *e);

/* A reduction by one work-group (GPU: a local-memory tree; CPU: one work-item
 * loops): range of one group of a power-of-two size. */
int clt_launch_single_group(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                            int nargs, clt_err *e);

/* A launch with explicit global and local sizes (local may be NULL). */
int clt_launch(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
               cl_uint dims, const size_t *global, const size_t *local, clt_err *e);

/* 2-D launch over (n0, n1) work-items, n0 the fastest-varying (channels);
 * kernels guard the tail. */
int clt_launch2d(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                 size_t n0, size_t n1, clt_err *e);

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
/* Waits for pending events and adds their device time to the table. */
int clt_replica_profile_collect(clt_replica *r, clt_err *e);

/* --trace: this replica's spans go to `trace` as process `pid` (named after the
 * replica), its device's clock mapped onto the host's by a timed marker. Kernel
 * spans come from the profiling events (clt_replica_profile_collect). */
int clt_replica_trace(clt_replica *r, clt_trace *trace, int pid, const char *label, clt_err *e);
/* A host span of this replica on thread track tid (CLT_TRACE_HOST, CLT_TRACE_RING). */
void clt_replica_trace_span(clt_replica *r, int tid, const char *name, double t0, double t1,
                            int step);
/* A finished, profiled transfer event (the ring's copies) on the device track. */
void clt_replica_trace_event(clt_replica *r, cl_event ev, const char *name, const char *cat);

/* Error for a failed OpenCL call on this replica: "<device>: <what>: CL_…". */
int clt_replica_fail(clt_replica *r, clt_err *e, int rc, const char *what);
/* The same for a call that CLTRAIN_FAULT made fail (fault.h): rc is the code
 * that stands for it, and the message says it was injected. */
int clt_replica_fail_injected(clt_replica *r, clt_err *e, int rc, const char *what);

#endif
