#define _DEFAULT_SOURCE /* madvise, posix_memalign */
#include "replica.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cl_sources.h"
#include "fault.h"
#include "timing.h"

#define MAX_KERNELS_PER_PROGRAM 32

struct clt_program_entry {
  char source[64];
  char options[256];
  int joint; /* one of the sources of a joint program (clt_replica_build_joint) */
  cl_program program;
  int nkernels;
  char kernel_names[MAX_KERNELS_PER_PROGRAM][64];
  cl_kernel kernels[MAX_KERNELS_PER_PROGRAM];
  clt_program_entry *next;
};

struct clt_kernel_info {
  cl_kernel kernel; /* NULL: free slot */
  size_t wg;        /* CL_KERNEL_WORK_GROUP_SIZE */
  size_t multiple;  /* CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE */
};

int clt_replica_fail(clt_replica *r, clt_err *e, int rc, const char *what) {
  return clt_fail(e, rc, "device %d (%s): %s: %s", r->device.index, r->device.name, what,
                  clt_status_name(rc));
}

int clt_replica_fail_injected(clt_replica *r, clt_err *e, int rc, const char *what) {
  clt_replica_fail(r, e, rc, what);
  return clt_fault_mark(e);
}

static void release(clt_replica *r);

int clt_replica_create(const clt_device *device, clt_replica **out, clt_err *e) {
  cl_int rc = CL_SUCCESS;
  *out = NULL;
  int status = clt_fault_check(e); /* a malformed CLTRAIN_FAULT stops the run before it starts */
  if (status) return status;
  clt_replica *r = calloc(1, sizeof *r);
  if (!r) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating a replica");
  r->device = *device;

  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)device->platform, 0};
  r->context = clCreateContext(props, 1, &device->id, NULL, NULL, &rc);
  if (rc != CL_SUCCESS) {
    status = clt_replica_fail(r, e, rc, "clCreateContext");
    goto cleanup;
  }
  /* In-order with profiling: per-kernel busy time comes from the events. */
  r->queue = clCreateCommandQueue(r->context, device->id, CL_QUEUE_PROFILING_ENABLE, &rc);
  if (rc != CL_SUCCESS) {
    status = clt_replica_fail(r, e, rc, "clCreateCommandQueue");
    goto cleanup;
  }
  size_t max_wg = 0;
  clGetDeviceInfo(device->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
  r->max_work_group = max_wg ? max_wg : 1;
  r->group_size = 64; /* until a backend sets its own */
  r->chunk = 1;
  r->variant = "";
  r->tile_wg = 1;
  while (r->tile_wg * 2 <= CLT_WG_MAX && r->tile_wg * 2 <= r->max_work_group) r->tile_wg *= 2;
  cl_device_fp_config fp = 0;
  clGetDeviceInfo(device->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
  r->exact_options = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)
                         ? "-cl-fp32-correctly-rounded-divide-sqrt"
                         : "";
  r->kernel_info = calloc(CLT_KERNEL_INFO_SLOTS, sizeof *r->kernel_info);
  if (!r->kernel_info) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory creating a replica");
    goto cleanup;
  }
  *out = r;
  return CLT_OK;

cleanup:
  release(r);
  return status;
}

void clt_replica_destroy(clt_replica *r) {
  /* A hung replica's thread may still be blocked in its driver (clt_ring_join):
   * its queue may never finish and what it uses must stay. The process is ending. */
  if (r && !r->hung) release(r);
}

static void release(clt_replica *r) {
  if (!r) return;
  if (r->queue) clFinish(r->queue);
  clt_program_entry *p = r->programs;
  while (p) {
    clt_program_entry *next = p->next;
    for (int i = 0; i < p->nkernels; i++) clReleaseKernel(p->kernels[i]);
    if (p->program) clReleaseProgram(p->program);
    free(p);
    p = next;
  }
  free(r->kernel_info);
  free(r->build_log);
  if (r->profile) {
    for (int i = 0; i < r->profile->npending; i++) clReleaseEvent(r->profile->pending[i]);
    free(r->profile);
  }
  free(r->trace_step_span);
  if (r->queue) clReleaseCommandQueue(r->queue);
  if (r->context) clReleaseContext(r->context);
  free(r);
}

/* A successful build's log, when it says anything (warnings), is kept for
 * --verbose rather than printed: a normal run shows no compiler output. */
static void keep_build_log(clt_replica *r, const char *source, const char *opts, const char *log) {
  const char *c = log;
  while (*c == ' ' || *c == '\n' || *c == '\r' || *c == '\t') c++;
  if (!*c) return;
  char head[640];
  int n = snprintf(head, sizeof head, "device %d (%s): cl/%s [%s]:\n", r->device.index,
                   r->device.name, source, opts);
  if (n < 0) return;
  size_t add = (size_t)n + strlen(c) + 2;
  char *grown = realloc(r->build_log, r->build_log_len + add + 1);
  if (!grown) return; /* only a diagnostic: dropping it is harmless */
  r->build_log = grown;
  r->build_log_len += (size_t)snprintf(grown + r->build_log_len, add + 1, "%s%s\n", head, c);
}

/* The most sources one program joins. */
#define MAX_JOINT_SOURCES 32

/* Every program starts with cl/common.cl: the variant's defaults and what
 * several sources share. */
#define COMMON_SOURCE "common.cl"

/* Builds the sources of names[0..n) as one program with options; on failure
 * the error names `label` and carries the build log (newlines folded so the
 * error stays one line). */
static int build_sources(clt_replica *r, const char *const *names, int n, const char *label,
                         const char *options, cl_program *out, clt_err *e) {
  /* Each source after a #line naming it, so a build log's lines are the file's. */
  enum { PARTS = 2 * (MAX_JOINT_SOURCES + 1) };
  const char *text[PARTS];
  size_t len[PARTS];
  char lines[MAX_JOINT_SOURCES + 1][96];
  if (n > MAX_JOINT_SOURCES)
    return clt_fail(e, CLT_ERR_INTERNAL, "too many sources in one program");
  for (size_t i = 0; i <= (size_t)n; i++) {
    const char *name = i ? names[i - 1] : COMMON_SOURCE;
    snprintf(lines[i], sizeof lines[i], "#line 1 \"cl/%s\"\n", name);
    text[2 * i] = lines[i];
    len[2 * i] = strlen(lines[i]);
    text[2 * i + 1] = clt_cl_source(name, &len[2 * i + 1]);
    if (!text[2 * i + 1])
      return clt_fail(e, CLT_ERR_INTERNAL, "no embedded OpenCL source %s", name);
  }
  cl_int rc = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(r->context, 2 * ((cl_uint)n + 1), text, len, &rc);
  if (rc != CL_SUCCESS) return clt_replica_fail(r, e, rc, "clCreateProgramWithSource");
  /* The backend's variant, and the replica's number, so that identical
   * devices' programs hash apart: PoCL 3.1 keeps one process-wide cache of
   * compiled kernels keyed by that hash, and its release of an entry matches
   * fewer properties than its lookup (lib/CL/devices/common.c), so replicas of
   * one hash launching a kernel at different grid widths (uneven slices)
   * released each other's entries and aborted on `found->ref_count > 0`. A
   * second identical device compiles its own copy once. */
  char opts[512];
  snprintf(opts, sizeof opts, "-cl-std=CL1.2 %s -DCLT_REPLICA=%d %s", r->defines, r->index,
           options);
  rc = clBuildProgram(program, 1, &r->device.id, opts, NULL, NULL);
  /* The whole log, however long (a buffer too small for it gets nothing). */
  size_t log_size = 0;
  clGetProgramBuildInfo(program, r->device.id, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
  char *log = calloc(log_size + 1, 1);
  if (log && log_size)
    clGetProgramBuildInfo(program, r->device.id, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
  const char *shown = log ? log : "(out of host memory for it)";
  if (rc != CL_SUCCESS) {
    for (char *c = log; c && *c; c++)
      if (*c == '\n' || *c == '\r') *c = ' ';
    clt_fail(e, rc, "device %d (%s): building cl/%s [%s] failed (%s kernels): %s: build log: %s",
             r->device.index, r->device.name, label, options, r->variant, clt_status_name(rc),
             shown);
    clReleaseProgram(program);
  } else {
    keep_build_log(r, label, opts, shown);
    *out = program;
  }
  free(log);
  return rc == CL_SUCCESS ? CLT_OK : rc;
}

/* A program entry for (source, options) holding a reference to `program`. */
static int add_entry(clt_replica *r, const char *source, const char *options, cl_program program,
                     clt_program_entry **out, clt_err *e) {
  if (strlen(source) >= sizeof((clt_program_entry *)0)->source ||
      strlen(options) >= sizeof((clt_program_entry *)0)->options) {
    return clt_fail(e, CLT_ERR_INTERNAL, "program name or options too long: %s %s", source,
                    options);
  }
  clt_program_entry *p = calloc(1, sizeof *p);
  if (!p) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory building %s", source);
  snprintf(p->source, sizeof p->source, "%s", source);
  snprintf(p->options, sizeof p->options, "%s", options);
  clRetainProgram(program);
  p->program = program;
  p->next = r->programs;
  r->programs = p;
  *out = p;
  return CLT_OK;
}

static clt_program_entry *find_entry(clt_replica *r, const char *source, const char *options) {
  clt_program_entry *p = r->programs;
  while (p && (strcmp(p->source, source) != 0 || strcmp(p->options, options) != 0)) p = p->next;
  return p;
}

void clt_replica_build_joint(clt_replica *r, const char *const *names, int n) {
  const char *todo[MAX_JOINT_SOURCES];
  int count = 0;
  for (int i = 0; i < n && count < MAX_JOINT_SOURCES; i++) {
    int seen = find_entry(r, names[i], "") != NULL;
    for (int j = 0; j < count && !seen; j++) seen = strcmp(todo[j], names[i]) == 0;
    if (!seen) todo[count++] = names[i];
  }
  if (count == 0) return;
  const char *label = "{joint program}";
  clt_err quiet = {0};
  cl_program program = NULL;
  if (build_sources(r, todo, count, label, r->exact_options, &program, &quiet)) {
    keep_build_log(r, label, r->exact_options, quiet.msg); /* for --verbose */
    return;
  }
  clt_program_entry *p = NULL;
  for (int i = 0; i < count; i++) {
    if (add_entry(r, todo[i], "", program, &p, &quiet)) break;
    p->joint = 1;
  }
  clReleaseProgram(program); /* the entries hold it */
}

/* A joint program's entry for source, which serves options "" and the
 * exact_options it was built with; NULL if there is none. */
static clt_program_entry *joint_entry(clt_replica *r, const char *source, const char *options) {
  if (options[0] && strcmp(options, r->exact_options) != 0) return NULL;
  clt_program_entry *p = find_entry(r, source, "");
  return p && p->joint ? p : NULL;
}

/* Builds cl/<source> alone with options. */
static int build_program(clt_replica *r, const char *source, const char *options,
                         clt_program_entry **out, clt_err *e) {
  cl_program program = NULL;
  int status = build_sources(r, &source, 1, source, options, &program, e);
  if (status) return status;
  status = add_entry(r, source, options, program, out, e);
  clReleaseProgram(program); /* the entry holds it */
  return status;
}

int clt_replica_kernel(clt_replica *r, const char *source, const char *options, const char *name,
                       cl_kernel *out, clt_err *e) {
  clt_program_entry *p = find_entry(r, source, options);
  if (!p) p = joint_entry(r, source, options);
  if (!p) {
    int status = build_program(r, source, options, &p, e);
    if (status != CLT_OK) return status;
  }
  for (int i = 0; i < p->nkernels; i++) {
    if (strcmp(p->kernel_names[i], name) == 0) {
      *out = p->kernels[i];
      return CLT_OK;
    }
  }
  if (p->nkernels == MAX_KERNELS_PER_PROGRAM || strlen(name) >= sizeof p->kernel_names[0]) {
    return clt_fail(e, CLT_ERR_INTERNAL, "too many kernels in cl/%s", source);
  }
  cl_int rc = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p->program, name, &rc);
  if (rc != CL_SUCCESS) {
    char what[160];
    snprintf(what, sizeof what, "clCreateKernel %s from cl/%s", name, source);
    return clt_replica_fail(r, e, rc, what);
  }
  snprintf(p->kernel_names[p->nkernels], sizeof p->kernel_names[0], "%s", name);
  p->kernels[p->nkernels++] = k;
  *out = k;
  return CLT_OK;
}

void clt_replica_kernel_names(const clt_replica *r, void (*fn)(const char *name, void *ctx),
                              void *ctx) {
  for (const clt_program_entry *p = r->programs; p; p = p->next)
    for (int i = 0; i < p->nkernels; i++) fn(p->kernel_names[i], ctx);
}

/* The kernel's work-group limits on this device, queried once per handle. */
static const clt_kernel_info *kernel_info(clt_replica *r, cl_kernel k) {
  static const clt_kernel_info fallback = {NULL, 1, 1};
  size_t h = ((uintptr_t)k >> 4) % CLT_KERNEL_INFO_SLOTS;
  for (size_t probe = 0; probe < CLT_KERNEL_INFO_SLOTS; probe++) {
    clt_kernel_info *slot = &r->kernel_info[(h + probe) % CLT_KERNEL_INFO_SLOTS];
    if (slot->kernel == k) return slot;
    if (slot->kernel) continue;
    size_t wg = 0, multiple = 0;
    clGetKernelWorkGroupInfo(k, r->device.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    clGetKernelWorkGroupInfo(k, r->device.id, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                             sizeof multiple, &multiple, NULL);
    *slot = (clt_kernel_info){k, wg ? wg : 1, multiple ? multiple : 1};
    if (slot->wg > r->max_work_group) slot->wg = r->max_work_group;
    return slot;
  }
  return &fallback; /* table full (never with this codebase's kernels): groups of one */
}

size_t clt_replica_local_1d(clt_replica *r, cl_kernel k) {
  const clt_kernel_info *info = kernel_info(r, k);
  size_t l = r->group_size;
  if (l > info->wg) l = info->wg;
  if (l >= info->multiple) l = l / info->multiple * info->multiple;
  return l ? l : 1;
}

size_t clt_replica_local_pow2(clt_replica *r, cl_kernel k) {
  const clt_kernel_info *info = kernel_info(r, k);
  size_t l = 1;
  while (l * 2 <= r->tile_wg && l * 2 <= info->wg) l *= 2;
  return l;
}

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* Frees the host memory behind a CL_MEM_USE_HOST_PTR buffer once the driver
 * has released the buffer. */
static void CL_CALLBACK free_host_memory(cl_mem m, void *host) {
  (void)m;
  free(host);
}

#define HUGE_PAGE ((size_t)2 << 20)

/* A buffer of 1 MiB or more of a CPU device in host memory cltrain allocates
 * itself (CL_MEM_USE_HOST_PTR, which PoCL takes as the buffer's storage), on
 * 2 MiB transparent huge pages (madvise: Debian's default THP setting, under
 * which PoCL's own allocations get 4 KiB pages). Convolutions and
 * BatchNormalization stride through hundreds of MiB of activations and run
 * faster on huge pages, whose first touch costs more set-up instead
 * (docs/performance.md). CLTRAIN_HUGE_PAGES=0 turns it off. NULL where it does not
 * apply or fails: the caller then lets the driver allocate. */
static cl_mem huge_page_buffer(clt_replica *r, size_t bytes, cl_int *rc) {
#ifdef MADV_HUGEPAGE
  const char *off = getenv("CLTRAIN_HUGE_PAGES");
  if (!(r->device.type & CL_DEVICE_TYPE_CPU) || bytes < HUGE_PAGE / 2 || (off && !strcmp(off, "0")))
    return NULL;
  /* Not rounded up to whole huge pages: the tail past the last one gets 4 KiB
   * pages rather than up to 2 MiB of unused memory per buffer. */
  const size_t len = (bytes + 4095) / 4096 * 4096;
  void *host = NULL;
  if (posix_memalign(&host, HUGE_PAGE, len) != 0) return NULL;
  madvise(host, len, MADV_HUGEPAGE);
  cl_mem m = clCreateBuffer(r->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host, rc);
  if (*rc == CL_SUCCESS) *rc = clSetMemObjectDestructorCallback(m, free_host_memory, host);
  if (*rc != CL_SUCCESS) { /* the callback is not set: host is still ours */
    if (m) clReleaseMemObject(m);
    free(host);
    *rc = CL_SUCCESS;
    return NULL;
  }
  return m;
#else
  (void)r;
  (void)bytes;
  (void)rc;
  return NULL;
#endif
}

int clt_replica_alloc(clt_replica *r, size_t bytes, const char *what, cl_mem *out, clt_err *e) {
  *out = NULL;
  if (bytes == 0) bytes = sizeof(float); /* zero-size buffers are invalid in OpenCL */
  if (bytes > r->device.max_alloc_bytes && r->device.max_alloc_bytes) {
    return clt_fail(
        e, CL_MEM_OBJECT_ALLOCATION_FAILURE,
        "device %d (%s): %s needs %.1f MiB, above the device's largest allocation %.1f MiB",
        r->device.index, r->device.name, what, bytes / 1048576.0,
        r->device.max_alloc_bytes / 1048576.0);
  }
  cl_int rc = CL_SUCCESS;
  int injected = clt_fault_hit(r->index, r->step, CLT_FAULT_ALLOC);
  cl_mem m = injected ? NULL : huge_page_buffer(r, bytes, &rc);
  if (!m && !injected) m = clCreateBuffer(r->context, CL_MEM_READ_WRITE, bytes, NULL, &rc);
  if (injected) rc = CL_MEM_OBJECT_ALLOCATION_FAILURE;
  if (rc == CL_SUCCESS) {
    clt_err fill_error = {0};
    int status = clt_replica_fill(r, m, 0, bytes / sizeof(float), 0.0f, what, &fill_error);
    if (status == CLT_OK) status = clFinish(r->queue);
    /* Buffer creation is lazy on many drivers: out-of-memory shows up here. */
    if (status != CLT_OK) {
      clReleaseMemObject(m);
      if (status <= CLT_ERR_ARG) return clt_fail(e, status, "%s", fill_error.msg); /* own code */
      rc = status; /* an OpenCL code: reported below with the sizes */
      injected = strstr(fill_error.msg, "CLTRAIN_FAULT") != NULL; /* its launch's (fault.h) */
    }
  }
  if (rc != CL_SUCCESS) {
    clt_fail(e, rc, "device %d (%s): allocating %s (%.1f MiB, %.1f MiB held already): %s",
             r->device.index, r->device.name, what, bytes / 1048576.0,
             r->allocated_bytes / 1048576.0, clt_status_name(rc));
    return injected ? clt_fault_mark(e) : rc;
  }
  r->allocated_bytes += bytes;
  *out = m;
  return CLT_OK;
}

int clt_replica_fill(clt_replica *r, cl_mem m, size_t offset, size_t n, float value,
                     const char *what, clt_err *e) {
  cl_kernel k;
  int status = clt_replica_kernel(r, "reduce.cl", "", "fill", &k, e);
  if (status) return status;
  cl_ulong off = offset, count = n;
  clt_karg args[] = {CLT_ARG(m), CLT_ARG(off), CLT_ARG(count), CLT_ARG(value)};
  status = clt_launch_elems(r, k, "fill", args, 4, n, e);
  return status ? clt_wrap(e, "filling %s", what) : CLT_OK;
}

/* Sets k's arguments and enqueues it on q, event (or NULL) receiving its event;
 * the fault injection of every launch. */
static int enqueue_kernel(clt_replica *r, cl_command_queue q, cl_kernel k, const char *kname,
                          const clt_karg *args, int nargs, cl_uint dims, const size_t *global,
                          const size_t *local, cl_event *event, clt_err *e) {
  for (int i = 0; i < nargs; i++) {
    cl_int rc = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].ptr);
    if (rc != CL_SUCCESS) {
      char what[128];
      snprintf(what, sizeof what, "setting argument %d of kernel %s", i, kname);
      return clt_replica_fail(r, e, rc, what);
    }
  }
  const int injected = clt_fault_hit(r->index, r->step, CLT_FAULT_ENQUEUE);
  cl_int rc = injected ? CL_OUT_OF_RESOURCES
                       : clEnqueueNDRangeKernel(q, k, dims, NULL, global, local, 0, NULL, event);
  if (rc != CL_SUCCESS) {
    char what[128];
    snprintf(what, sizeof what, "launching kernel %s", kname);
    return injected ? clt_replica_fail_injected(r, e, rc, what) : clt_replica_fail(r, e, rc, what);
  }
  return CLT_OK;
}

int clt_launch(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
               cl_uint dims, const size_t *global, const size_t *local, clt_err *e) {
  int status = enqueue_kernel(r, r->queue, k, kname, args, nargs, dims, global, local,
                              clt_replica_profile_event(r), e);
  if (status == CLT_OK) clt_replica_profile_commit(r, kname);
  return status;
}

int clt_launch_on(clt_replica *r, cl_command_queue q, cl_kernel k, const char *kname,
                  const clt_karg *args, int nargs, cl_uint dims, const size_t *global,
                  const size_t *local, cl_event *event, clt_err *e) {
  return enqueue_kernel(r, q, k, kname, args, nargs, dims, global, local, event, e);
}

int clt_launch1d(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                 size_t n, clt_err *e) {
  if (n == 0) return CLT_OK;
  size_t local = clt_replica_local_1d(r, k);
  size_t global = round_up(n, local);
  return clt_launch(r, k, kname, args, nargs, 1, &global, &local, e);
}

int clt_launch2d(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args, int nargs,
                 size_t n0, size_t n1, clt_err *e) {
  if (n0 == 0 || n1 == 0) return CLT_OK;
  /* A whole channel row per group when it fits (no idle work-items), else
   * groups of the 1-D size with a guarded tail; narrow rows (few channels)
   * stack several positions per group so groups are never tiny. */
  const size_t wg = clt_replica_local_1d(r, k), limit = kernel_info(r, k)->wg;
  size_t l0 = n0 <= limit && n0 <= 256 ? n0 : wg;
  size_t l1 = l0 >= wg ? 1 : wg / l0;
  if (l0 * l1 > limit) l1 = limit / l0 ? limit / l0 : 1;
  size_t global[2] = {round_up(n0, l0), round_up(n1, l1)}, local[2] = {l0, l1};
  return clt_launch(r, k, kname, args, nargs, 2, global, local, e);
}

int clt_launch_elems(clt_replica *r, cl_kernel k, const char *kname, const clt_karg *args,
                     int nargs, size_t n, clt_err *e) {
  return clt_launch1d(r, k, kname, args, nargs, (n + r->chunk - 1) / r->chunk, e);
}

int clt_launch_elems_on(clt_replica *r, cl_command_queue q, cl_kernel k, const char *kname,
                        const clt_karg *args, int nargs, size_t n, cl_event *event, clt_err *e) {
  const size_t items = (n + r->chunk - 1) / r->chunk;
  if (items == 0) return CLT_OK;
  size_t local = clt_replica_local_1d(r, k);
  size_t global = round_up(items, local);
  return enqueue_kernel(r, q, k, kname, args, nargs, 1, &global, &local, event, e);
}

int clt_replica_enable_profiling(clt_replica *r, clt_err *e) {
  if (r->profile) return CLT_OK;
  r->profile = calloc(1, sizeof *r->profile);
  if (!r->profile) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for profiling");
  r->profile->enabled = 1;
  return CLT_OK;
}

cl_event *clt_replica_profile_event(clt_replica *r) {
  clt_profile *p = r->profile;
  if (!p || p->npending == CLT_PROFILE_MAX_PENDING) return NULL;
  p->pending[p->npending] = NULL;
  return &p->pending[p->npending];
}

static void scope_mark(clt_replica *r, const char *what, const char *pass) {
  clt_scope_marks *m = r->marks;
  if (m->n == CLT_SCOPE_MARKS_MAX ||
      clEnqueueMarkerWithWaitList(r->queue, 0, NULL, &m->ev[m->n]) != CL_SUCCESS) {
    m->failed = 1;
    return;
  }
  if (what) snprintf(m->scope[m->n], sizeof m->scope[0], "%s %s", what, pass);
  else m->scope[m->n][0] = '\0';
  m->n++;
  if (m->at_scope) {
    clFlush(r->queue);
    m->at_scope(m->ctx, r, what, pass);
  }
}

void clt_replica_scope(clt_replica *r, const char *what, const char *pass) {
  if (r->marks) scope_mark(r, what, pass);
  if (!r->profile) return;
  if (!what) r->profile->scope[0] = '\0';
  else snprintf(r->profile->scope, sizeof r->profile->scope, "%s %s", what, pass);
}

void clt_replica_submark(clt_replica *r, const char *what, const char *part) {
  if (r->marks) scope_mark(r, what, part);
}

void clt_replica_profile_commit(clt_replica *r, const char *name) {
  clt_profile *p = r->profile;
  if (!p || p->npending == CLT_PROFILE_MAX_PENDING || !p->pending[p->npending]) return;
  char full[sizeof p->names[0]];
  if (p->scope[0]) snprintf(full, sizeof full, "%s: %s", p->scope, name);
  else snprintf(full, sizeof full, "%s", name);
  /* FNV-1a into an open-addressed table: a step launches ~1,000 kernels. */
  uint32_t h = 2166136261u;
  for (const char *c = full; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
  int id = -1;
  for (uint32_t probe = 0; probe < CLT_PROFILE_HASH; probe++) {
    int *slot = &p->hash[(h + probe) % CLT_PROFILE_HASH];
    if (*slot == 0) {
      if (p->nnames == CLT_PROFILE_MAX_NAMES) break;
      snprintf(p->names[p->nnames], sizeof p->names[0], "%s", full);
      snprintf(p->scopes[p->nnames], sizeof p->scopes[0], "%s", p->scope);
      p->kernel_at[p->nnames] = (unsigned char)(p->scope[0] ? strlen(p->scope) + 2 : 0);
      *slot = ++p->nnames;
      id = *slot - 1;
      break;
    }
    if (strcmp(p->names[*slot - 1], full) == 0) {
      id = *slot - 1;
      break;
    }
  }
  if (id < 0) id = CLT_PROFILE_MAX_NAMES - 1; /* full: counted under the last name */
  p->pending_name[p->npending] = id;
  p->pending_kind[p->npending] = (unsigned char)p->kind;
  p->pending_step[p->npending++] = p->step;
}

void clt_replica_profile_kind(clt_replica *r, int kind) {
  if (r->profile) r->profile->kind = kind;
}

/* The host time of a device time. */
static double host_time(const clt_replica *r, cl_ulong device) {
  return (double)device * 1e-9 + r->trace_offset;
}

/* --trace: a collected event of traced step `step` on the device track, and how
 * far that step has run. */
static void trace_kernel(clt_replica *r, int id, int step, cl_ulong start, cl_ulong end) {
  const clt_profile *p = r->profile;
  const double t1 = host_time(r, end);
  clt_trace_step_span(r->trace, r->trace_pid, CLT_TRACE_DEVICE, p->names[id] + p->kernel_at[id],
                      p->scopes[id][0] ? p->scopes[id] : NULL, host_time(r, start), t1, step);
  double *span = r->trace_step_span + 2 * (step - r->trace_first - 1);
  if (t1 > span[1]) span[1] = t1;
}

/* --trace: the traced steps begun so far, each from its first launch to the end
 * of its last, once all their events are in (between steps). */
static void trace_steps_done(clt_replica *r) {
  for (int k = 0; r->trace && k < r->trace_steps; k++) {
    double *span = r->trace_step_span + (size_t)2 * k;
    if (span[0] == 0) continue;
    clt_trace_async_span(r->trace, r->trace_pid, "step", "step: first launch to its end", span[0],
                         span[1] > span[0] ? span[1] : span[0], (int)(r->trace_first + k + 1));
    span[0] = span[1] = 0;
  }
}

int clt_replica_profile_collect(clt_replica *r, clt_err *e) {
  clt_profile *p = r->profile;
  if (!p) return CLT_OK;
  cl_int rc = p->npending ? clWaitForEvents((cl_uint)p->npending, p->pending) : CL_SUCCESS;
  for (int i = 0; i < p->npending; i++) {
    cl_ulong start = 0, end = 0;
    if (rc == CL_SUCCESS) {
      rc = clGetEventProfilingInfo(p->pending[i], CL_PROFILING_COMMAND_START, sizeof start, &start,
                                   NULL);
    }
    if (rc == CL_SUCCESS) {
      rc = clGetEventProfilingInfo(p->pending[i], CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
    }
    if (rc == CL_SUCCESS && end > start) {
      const int id = p->pending_name[i];
      if (!(p->pending_kind[i] & CLT_PROFILE_UNCOUNTED)) {
        const double seconds = (double)(end - start) * 1e-9;
        p->seconds[id] += seconds;
        p->calls[id]++;
        if (p->pending_kind[i] & CLT_PROFILE_COMPUTE) p->compute_seconds += seconds;
      }
      if (r->trace && p->pending_step[i]) trace_kernel(r, id, p->pending_step[i], start, end);
    }
    clReleaseEvent(p->pending[i]);
  }
  p->npending = 0;
  if (rc == CL_SUCCESS) trace_steps_done(r);
  return rc ? clt_replica_fail(r, e, rc, "reading profiling events") : CLT_OK;
}

int clt_replica_trace(clt_replica *r, clt_trace *trace, int pid, const char *label, long first_step,
                      int steps, clt_err *e) {
  free(r->trace_step_span);
  r->trace_step_span = calloc((size_t)2 * (steps > 0 ? steps : 1), sizeof *r->trace_step_span);
  if (!r->trace_step_span) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for --trace");
  r->trace_first = first_step;
  r->trace_steps = steps > 0 ? steps : 0;
  /* The device's clock against the host's: a marker enqueued on an idle queue
   * ends between the two host readings around it; of a few, the one read most
   * tightly (a busy host may take a while to see a marker end). */
  cl_int rc = clFinish(r->queue);
  double window = -1;
  for (int k = 0; k < 5 && rc == CL_SUCCESS; k++) {
    cl_event ev = NULL;
    const double h0 = clt_now_seconds();
    rc = clEnqueueMarkerWithWaitList(r->queue, 0, NULL, &ev);
    if (rc == CL_SUCCESS) rc = clWaitForEvents(1, &ev);
    const double h1 = clt_now_seconds();
    cl_ulong end = 0;
    if (rc == CL_SUCCESS)
      rc = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
    if (ev) clReleaseEvent(ev);
    if (rc == CL_SUCCESS && (window < 0 || h1 - h0 < window)) {
      window = h1 - h0;
      r->trace_offset = (h0 + h1) / 2 - (double)end * 1e-9;
    }
  }
  if (rc) return clt_replica_fail(r, e, rc, "timing a marker for --trace");
  r->trace = trace;
  r->trace_pid = pid;
  clt_trace_name(trace, pid, CLT_TRACE_HOST, label, "host thread");
  clt_trace_name(trace, pid, CLT_TRACE_RING, label, "all-reduce (host side)");
  clt_trace_name(trace, pid, CLT_TRACE_LAYERS, label, "device: layers");
  clt_trace_name(trace, pid, CLT_TRACE_DEVICE, label, "device: kernels and copies");
  return CLT_OK;
}

void clt_replica_trace_step(clt_replica *r, long step) {
  if (!r->profile) return;
  const int traced = r->trace && step > r->trace_first && step <= r->trace_first + r->trace_steps;
  r->profile->step = traced ? (int)step : 0;
  if (traced && r->trace_step_span[2 * (step - r->trace_first - 1)] == 0)
    r->trace_step_span[2 * (step - r->trace_first - 1)] = clt_now_seconds();
}

void clt_replica_trace_span(clt_replica *r, int tid, const char *name, double t0, double t1,
                            int step) {
  if (r->trace) clt_trace_span(r->trace, r->trace_pid, tid, name, NULL, t0, t1, step);
}

void clt_replica_trace_event(clt_replica *r, cl_event ev, const char *name, const char *cat) {
  const int step = r->profile ? r->profile->step : 0;
  if (!r->trace || !ev || !step) return;
  cl_ulong start = 0, end = 0;
  if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL) ||
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL))
    return; /* a span the device does not time is left out */
  clt_trace_step_span(r->trace, r->trace_pid, CLT_TRACE_DEVICE, name, cat, host_time(r, start),
                      host_time(r, end), step);
}
