/* IDX image/label files (the MNIST family), gzipped or plain, read through zlib.
 *
 * gzread reads plain files as well as gzip ones, but it reports a gzip stream
 * that ends early as a short read plus a non-fatal Z_BUF_ERROR ("unexpected end
 * of file"), so every read here is followed by a gzerror check: a cut-off .gz
 * file must fail, not yield fewer images. After the declared data one more byte
 * is read: that makes zlib reach and verify the gzip trailer (CRC-32 and length)
 * and lets extra bytes in a plain file be reported as trailing data. Bytes after
 * a complete gzip member that are not another gzip member are skipped by zlib
 * itself and so are ignored. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* stat */
#endif

#include "idx.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

enum {
  IDX_MAGIC_IMAGES = 0x00000803, /* unsigned byte, 3 dimensions */
  IDX_MAGIC_LABELS = 0x00000801, /* unsigned byte, 1 dimension */
};

/* Largest payload accepted: keeps every size an int (clt_dataset uses int) and
 * rejects absurd headers before they turn into a huge malloc. */
#define IDX_MAX_BYTES ((uint64_t)INT_MAX)

/* One gzread call at most this large; gzread takes an unsigned and returns an int. */
#define IDX_READ_CHUNK (1u << 30)

/* The images' buffer starts this large and doubles (read_growing). */
#define IDX_FIRST_CHUNK ((size_t)1 << 20)

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* zlib's gzerror text is "<path>: <cause>"; the caller adds the path itself. */
static const char *gz_cause(gzFile gz, const char *path, int *errnum) {
  const char *m = gzerror(gz, errnum);
  size_t pl = strlen(path);
  if (strncmp(m, path, pl) == 0 && m[pl] == ':' && m[pl + 1] == ' ') m += pl + 2;
  return m;
}

/* Reads up to n bytes into buf, *got = bytes read. A clean end of a plain file or a
 * gzip stream cut short (*trunc_gz = 1) return CLT_OK with *got < n so that the
 * caller can say what was missing; read errors and corrupt gzip data fail here. */
static int read_full(gzFile gz, const char *path, unsigned char *buf, size_t n, size_t *got,
                     int *trunc_gz, clt_err *e) {
  *got = 0;
  *trunc_gz = 0;
  while (*got < n) {
    size_t want = n - *got;
    if (want > IDX_READ_CHUNK) want = IDX_READ_CHUNK;
    int r = gzread(gz, buf + *got, (unsigned)want);
    if (r > 0) *got += (size_t)r;
    int errnum;
    const char *cause = gz_cause(gz, path, &errnum);
    if (errnum == Z_BUF_ERROR) {
      *trunc_gz = 1;
      return CLT_OK;
    }
    if (errnum == Z_DATA_ERROR) {
      /* zlib says "incorrect data check" for a CRC-32 mismatch; name it plainly */
      if (strcmp(cause, "incorrect data check") == 0)
        return clt_fail(e, CLT_ERR_FORMAT, "%s: corrupt gzip data (CRC-32 mismatch: %s)", path,
                        cause);
      return clt_fail(e, CLT_ERR_FORMAT, "%s: corrupt gzip data (%s)", path, cause);
    }
    if (errnum == Z_MEM_ERROR)
      return clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory while decompressing", path);
    if (errnum != Z_OK || r < 0) return clt_fail(e, CLT_ERR_IO, "%s: read error: %s", path, cause);
    if (r == 0) break; /* clean end of file */
  }
  return CLT_OK;
}

static const char *trunc_word(int trunc_gz) {
  return trunc_gz ? "truncated gzip stream (unexpected end of file)" : "truncated";
}

static int open_gz(const char *path, gzFile *gz, clt_err *e) {
  errno = 0;
  *gz = gzopen(path, "rb");
  if (!*gz) {
    /* gzopen leaves errno 0 when only its own allocation failed */
    if (errno == 0) return clt_fail(e, CLT_ERR_NOMEM, "%s: cannot open: out of memory", path);
    return clt_fail(e, CLT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  }
  /* Large buffer: the train images are 47 MB and are read in a few big calls. */
  if (gzbuffer(*gz, 1u << 20) != 0) {
    gzclose(*gz);
    *gz = NULL;
    return clt_fail(e, CLT_ERR_INTERNAL, "%s: gzbuffer failed", path);
  }
  return CLT_OK;
}

/* Reads the 4-byte magic and `ndims` big-endian dimensions. */
static int read_header(gzFile gz, const char *path, uint32_t magic_want, const char *kind,
                       uint32_t *dims, int ndims, clt_err *e) {
  unsigned char h[16];
  size_t n = 4 + 4 * (size_t)ndims, got;
  int tgz;
  int st = read_full(gz, path, h, 4, &got, &tgz, e);
  if (st) return st;
  if (got < 4)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: %s: file holds %zu bytes, too short for an IDX header",
                    path, trunc_word(tgz), got);
  uint32_t magic = be32(h);
  if (magic != magic_want) {
    const char *hint = "";
    if (magic == IDX_MAGIC_LABELS) hint = "; this looks like a labels file";
    if (magic == IDX_MAGIC_IMAGES) hint = "; this looks like an images file";
    return clt_fail(e, CLT_ERR_FORMAT, "%s: not an %s file (magic 0x%08x, expected 0x%08x%s)", path,
                    kind, (unsigned)magic, (unsigned)magic_want, hint);
  }
  st = read_full(gz, path, h + 4, n - 4, &got, &tgz, e);
  if (st) return st;
  if (got < n - 4)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: %s: header needs %zu bytes but file holds %zu", path,
                    trunc_word(tgz), n, 4 + got);
  for (int i = 0; i < ndims; i++) dims[i] = be32(h + 4 + 4 * (size_t)i);
  return CLT_OK;
}

/* After the declared data the stream must end: reading one more byte also makes
 * zlib check the gzip trailer, which a payload-sized read may never reach. items:
 * the singular noun of what the data holds. */
static int expect_end(gzFile gz, const char *path, uint32_t count, const char *items, clt_err *e) {
  unsigned char extra;
  size_t got;
  int tgz;
  int st = read_full(gz, path, &extra, 1, &got, &tgz, e);
  if (st) return st;
  if (tgz)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: truncated gzip stream (unexpected end of file) after all %u %s%s; "
                    "gzip trailer missing",
                    path, (unsigned)count, items, count == 1 ? "" : "s");
  if (got)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: trailing data after %u %s%s", path, (unsigned)count,
                    items, count == 1 ? "" : "s");
  return CLT_OK;
}

/* Reads up to n bytes into *buf (malloc'ed here), like read_full. The size is
 * the header's claim: the buffer grows as the data arrives, doubling from
 * IDX_FIRST_CHUNK, so a short file (or a header that lies) costs what the file
 * holds, not the up to 2 GiB it may claim, and fails as truncated, not as out
 * of memory. */
static int read_growing(gzFile gz, const char *path, size_t n, unsigned char **buf, size_t *got,
                        int *trunc_gz, clt_err *e) {
  size_t cap = 0;
  *got = 0;
  *trunc_gz = 0;
  while (*got < n) {
    const size_t grow = cap < IDX_FIRST_CHUNK ? IDX_FIRST_CHUNK : cap;
    const size_t next = n - cap < grow ? n : cap + grow;
    unsigned char *b = realloc(*buf, next);
    if (!b)
      return clt_fail(e, CLT_ERR_NOMEM, "%s: cannot allocate %zu bytes for the images", path, next);
    *buf = b;
    size_t part;
    int st = read_full(gz, path, b + cap, next - cap, &part, trunc_gz, e);
    cap = next;
    *got += part;
    if (st || *got < cap) return st;
  }
  return CLT_OK;
}

/* Opens an IDX3 image file and reads its header: gz positioned at the pixels,
 * dims = count, rows, cols, checked. */
static int open_images(const char *path, gzFile *gz, uint32_t *dims, clt_err *e) {
  int st = open_gz(path, gz, e);
  if (!st) st = read_header(*gz, path, IDX_MAGIC_IMAGES, "IDX3 image", dims, 3, e);
  if (st) return st;
  uint32_t count = dims[0], rows = dims[1], cols = dims[2];
  if (count == 0 || rows == 0 || cols == 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: header says %u image%s of %ux%u; zero %s", path,
                    (unsigned)count, count == 1 ? "" : "s", (unsigned)rows, (unsigned)cols,
                    count == 0  ? "images"
                    : rows == 0 ? "rows"
                                : "cols");
  }
  /* Each factor is below 2^32, so check after every multiply to stay within 64 bits. */
  uint64_t image = (uint64_t)rows * cols;
  if (image > IDX_MAX_BYTES || image * count > IDX_MAX_BYTES) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: header says %u images of %ux%u, too large (limit %llu bytes)", path,
                    (unsigned)count, (unsigned)rows, (unsigned)cols,
                    (unsigned long long)IDX_MAX_BYTES);
  }
  return CLT_OK;
}

/* The pixels after open_images' header, checked to end where it says. */
static int read_pixels(gzFile gz, const char *path, const uint32_t *dims, unsigned char **out,
                       clt_err *e) {
  const uint32_t count = dims[0], rows = dims[1], cols = dims[2];
  const size_t bytes = (size_t)count * rows * cols;
  unsigned char *px = NULL;
  size_t got;
  int tgz;
  int st = read_growing(gz, path, bytes, &px, &got, &tgz, e);
  if (!st && got < bytes) {
    st = clt_fail(e, CLT_ERR_FORMAT,
                  "%s: %s: header says %u image%s of %ux%u but file holds %zu bytes of pixel data",
                  path, trunc_word(tgz), (unsigned)count, count == 1 ? "" : "s", (unsigned)rows,
                  (unsigned)cols, got);
  }
  if (!st) st = expect_end(gz, path, count, "image", e);
  if (st) {
    free(px);
    return st;
  }
  *out = px;
  return CLT_OK;
}

static void set_dims(clt_dataset *d, const uint32_t *dims) {
  d->count = (int)dims[0];
  d->height = (int)dims[1];
  d->width = (int)dims[2];
  d->channels = 1;
}

static int load_images(const char *path, clt_dataset *d, clt_err *e) {
  gzFile gz = NULL;
  uint32_t dims[3];
  int st = open_images(path, &gz, dims, e);
  if (!st) st = read_pixels(gz, path, dims, &d->pixels, e);
  if (!st) set_dims(d, dims);
  if (gz) gzclose(gz);
  return st;
}

/* Pixels arriving in a thread (clt_idx_load_dir_async): the file is open at
 * them, and the thread leaves them, or its error, here. */
struct clt_idx_pending {
  pthread_t thread;
  gzFile gz;
  char path[4096];
  uint32_t dims[3];
  unsigned char *pixels;
  int status;
  clt_err err;
};

static void *pending_run(void *arg) {
  struct clt_idx_pending *p = arg;
  p->status = read_pixels(p->gz, p->path, p->dims, &p->pixels, &p->err);
  gzclose(p->gz);
  p->gz = NULL;
  return NULL;
}

static int load_labels(const char *path, const char *images_path, int count, int classes,
                       unsigned char **out, clt_err *e) {
  gzFile gz = NULL;
  unsigned char *lb = NULL;
  uint32_t n = 0;
  int st = open_gz(path, &gz, e);
  if (st) goto cleanup;
  st = read_header(gz, path, IDX_MAGIC_LABELS, "IDX1 label", &n, 1, e);
  if (st) goto cleanup;
  if (n != (uint32_t)count) {
    st = clt_fail(e, CLT_ERR_FORMAT,
                  "images file %s has %d image%s but labels file %s has %u label%s", images_path,
                  count, count == 1 ? "" : "s", path, (unsigned)n, n == 1 ? "" : "s");
    goto cleanup;
  }
  lb = malloc((size_t)count);
  if (!lb) {
    st = clt_fail(e, CLT_ERR_NOMEM, "%s: cannot allocate %d bytes for labels", path, count);
    goto cleanup;
  }
  size_t got;
  int tgz;
  st = read_full(gz, path, lb, (size_t)count, &got, &tgz, e);
  if (st) goto cleanup;
  if (got < (size_t)count) {
    st = clt_fail(e, CLT_ERR_FORMAT, "%s: %s: header says %d labels but file holds %zu", path,
                  trunc_word(tgz), count, got);
    goto cleanup;
  }
  st = expect_end(gz, path, (uint32_t)count, "label", e);
  if (st) goto cleanup;
  for (int i = 0; i < count; i++) {
    if (lb[i] >= classes) {
      st = clt_fail(e, CLT_ERR_FORMAT, "%s: label %d at index %d is out of range [0,%d)", path,
                    lb[i], i, classes);
      goto cleanup;
    }
  }
  *out = lb;
  lb = NULL;
cleanup:
  free(lb);
  if (gz) gzclose(gz);
  return st;
}

/* clt_idx_load, the pixels read in a thread with `async`. */
static int load(const char *images_path, const char *labels_path, int classes, int async,
                clt_dataset *out, clt_err *e) {
  clt_dataset d = {0};
  struct clt_idx_pending *p = NULL;
  int st = CLT_OK;
  if (!out) return clt_fail(e, CLT_ERR_ARG, "clt_idx_load: out is NULL");
  memset(out, 0, sizeof *out);
  if (!images_path || !labels_path) {
    st = clt_fail(e, CLT_ERR_ARG, "clt_idx_load: NULL path");
    goto cleanup;
  }
  if (classes <= 0) {
    st = clt_fail(e, CLT_ERR_ARG, "%s: classes must be positive, got %d", labels_path, classes);
    goto cleanup;
  }
  if (!async) {
    st = load_images(images_path, &d, e);
  } else if (!(p = calloc(1, sizeof *p))) {
    st = clt_fail(e, CLT_ERR_NOMEM, "%s: out of host memory", images_path);
  } else if (snprintf(p->path, sizeof p->path, "%s", images_path) >= (int)sizeof p->path) {
    st = clt_fail(e, CLT_ERR_ARG, "%s: path too long", images_path);
  } else if (!(st = open_images(images_path, &p->gz, p->dims, e))) {
    set_dims(&d, p->dims);
  }
  if (st) goto cleanup;
  st = load_labels(labels_path, images_path, d.count, classes, &d.labels, e);
  if (st) goto cleanup;
  if (p && pthread_create(&p->thread, NULL, pending_run, p) != 0) {
    st = clt_fail(e, CLT_ERR_INTERNAL, "%s: cannot start a thread to read it", images_path);
    goto cleanup;
  }
  d.pending = p;
  p = NULL;
  d.classes = classes;
  *out = d;
  memset(&d, 0, sizeof d);
cleanup:
  if (p && p->gz) gzclose(p->gz);
  free(p);
  clt_dataset_free(&d);
  return st;
}

int clt_idx_load(const char *images_path, const char *labels_path, int classes, clt_dataset *out,
                 clt_err *e) {
  return load(images_path, labels_path, classes, 0, out, e);
}

int clt_dataset_wait(clt_dataset *d, clt_err *e) {
  struct clt_idx_pending *p = d->pending;
  if (!p) return CLT_OK;
  pthread_join(p->thread, NULL);
  d->pending = NULL;
  int st = p->status;
  if (st) {
    *e = p->err;
  } else {
    d->pixels = p->pixels;
  }
  free(p);
  return st;
}

/* Picks DIR/NAME.gz if it exists, else DIR/NAME; fails naming both when neither does. */
static int pick_path(const char *dir, const char *name, char *buf, size_t cap, clt_err *e) {
  size_t dl = strlen(dir);
  const char *sep = (dl > 0 && dir[dl - 1] == '/') ? "" : "/";
  struct stat sb;
  int len = snprintf(buf, cap, "%s%s%s.gz", dir, sep, name);
  if (len < 0 || (size_t)len >= cap)
    return clt_fail(e, CLT_ERR_ARG, "%s: dataset directory path too long", dir);
  if (stat(buf, &sb) == 0) return CLT_OK;
  buf[len - 3] = '\0'; /* drop ".gz" */
  if (stat(buf, &sb) == 0) return CLT_OK;
  return clt_fail(e, CLT_ERR_IO, "%s[.gz]: no such file", buf);
}

static int load_dir(const char *dir, const char *split, int async, clt_dataset *out, clt_err *e) {
  char img[4096], lab[4096], name[256];
  struct stat sb;
  int st = CLT_OK;
  if (!out) return clt_fail(e, CLT_ERR_ARG, "clt_idx_load_dir: out is NULL");
  memset(out, 0, sizeof *out);
  if (!dir || !split || !*split) {
    st = clt_fail(e, CLT_ERR_ARG, "clt_idx_load_dir: missing directory or split name");
    goto cleanup;
  }
  /* Check the folder first so a wrong --data path is reported as such, not as a missing file. */
  if (stat(dir, &sb) != 0) {
    st = clt_fail(e, CLT_ERR_IO, "%s: cannot open dataset directory: %s", dir, strerror(errno));
    goto cleanup;
  }
  if (!S_ISDIR(sb.st_mode)) {
    st = clt_fail(e, CLT_ERR_IO, "%s: dataset path is not a directory", dir);
    goto cleanup;
  }
  int len = snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
  if (len < 0 || (size_t)len >= sizeof name) {
    st = clt_fail(e, CLT_ERR_ARG, "%s: split name too long", split);
    goto cleanup;
  }
  st = pick_path(dir, name, img, sizeof img, e);
  if (st) goto cleanup;
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split); /* shorter than the above */
  st = pick_path(dir, name, lab, sizeof lab, e);
  if (st) goto cleanup;
  st = load(img, lab, 10, async, out, e);
cleanup:
  return st;
}

int clt_idx_load_dir(const char *dir, const char *split, clt_dataset *out, clt_err *e) {
  return load_dir(dir, split, 0, out, e);
}

int clt_idx_load_dir_async(const char *dir, const char *split, clt_dataset *out, clt_err *e) {
  return load_dir(dir, split, 1, out, e);
}

int clt_dataset_split(clt_dataset *all, double fraction, const char *dir, clt_dataset *tail,
                      clt_err *e) {
  memset(tail, 0, sizeof *tail);
  const int n = all->count, at = (int)floor(n * (1.0 - fraction));
  if (at <= 0 || at >= n) {
    return clt_fail(e, CLT_ERR_ARG, "%s: validation split %g of %d training image%s leaves %s", dir,
                    fraction, n, n == 1 ? "" : "s",
                    at <= 0 ? "no training image" : "no validation image");
  }
  int status = clt_dataset_wait(all, e);
  if (status) return status;
  const size_t image = (size_t)all->height * all->width * all->channels;
  *tail = *all;
  tail->count = n - at;
  tail->pixels = malloc(image * (size_t)tail->count);
  tail->labels = malloc((size_t)tail->count);
  if (!tail->pixels || !tail->labels) {
    clt_dataset_free(tail);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for %s's validation split", dir);
  }
  memcpy(tail->pixels, all->pixels + image * at, image * (size_t)tail->count);
  memcpy(tail->labels, all->labels + at, (size_t)tail->count);
  all->count = at;
  return CLT_OK;
}

void clt_dataset_free(clt_dataset *d) {
  if (!d) return;
  clt_err ignored;
  clt_dataset_wait(d, &ignored); /* the thread writes into memory freed here */
  free(d->pixels);
  free(d->labels);
  memset(d, 0, sizeof *d);
}

/* ---- the device-resident batch source ------------------------------------------- */

typedef struct idx_replica {
  clt_replica *replica;
  cl_mem images, labels; /* the whole set, uint8 */
  cl_mem order;          /* the pass's order, count ints */
  cl_kernel gather;
} idx_replica;

typedef struct idx_source {
  clt_dataset set;
  idx_replica *reps;
  int n;
  int global;
  int mode; /* clt_preprocess, as the kernel takes it */
} idx_source;

static void idx_detach(void *ctx) {
  idx_source *s = ctx;
  for (int r = 0; r < s->n; r++) {
    cl_mem *all[] = {&s->reps[r].images, &s->reps[r].labels, &s->reps[r].order};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
      if (*all[i]) clReleaseMemObject(*all[i]);
    }
  }
  free(s->reps);
  s->reps = NULL;
  s->n = 0;
}

static int idx_attach(void *ctx, clt_replica *const *replicas, int n, int global_batch,
                      const int *max_slice, clt_preprocess pre, clt_err *e) {
  (void)max_slice; /* gathered straight into the input: no staging to size */
  idx_source *s = ctx;
  const clt_dataset *d = &s->set;
  int status = clt_dataset_wait(&s->set, e); /* pixels read in the background: here by now */
  if (status) return status;
  const size_t bytes = (size_t)d->count * d->height * d->width * d->channels;
  const size_t count = d->count > 0 ? (size_t)d->count : 1; /* no empty buffers in OpenCL */
  s->reps = calloc((size_t)n, sizeof *s->reps);
  if (!s->reps) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory attaching a dataset");
  s->n = n;
  s->global = global_batch;
  s->mode = (int)pre;
  for (int r = 0; r < n && !status; r++) {
    idx_replica *ir = &s->reps[r];
    ir->replica = replicas[r];
    status = clt_replica_alloc(ir->replica, bytes ? bytes : 1, "dataset images", &ir->images, e);
    if (!status) status = clt_replica_alloc(ir->replica, count, "dataset labels", &ir->labels, e);
    if (!status) {
      status = clt_replica_alloc(ir->replica, count * sizeof(int), "example order", &ir->order, e);
    }
    if (!status && bytes)
      status = clt_source_upload(ir->replica, ir->images, d->pixels, bytes, "uploading images", e);
    if (!status && d->count) {
      status = clt_source_upload(ir->replica, ir->labels, d->labels, (size_t)d->count,
                                 "uploading labels", e);
    }
    if (!status)
      status = clt_replica_kernel(ir->replica, "data.cl", "", "gather_batch", &ir->gather, e);
  }
  if (status) idx_detach(s);
  return status;
}

static int idx_begin(void *ctx, const int *order, clt_err *e) {
  idx_source *s = ctx;
  int status = CLT_OK;
  for (int r = 0; r < s->n && !status && s->set.count; r++) {
    status = clt_source_upload(s->reps[r].replica, s->reps[r].order, order,
                               (size_t)s->set.count * sizeof *order, "uploading example order", e);
  }
  return status;
}

static int idx_load(void *ctx, int rank, int step, int first, int len, cl_mem x, cl_mem y,
                    double *waited, clt_err *e) {
  (void)waited; /* on the device already: nothing to wait for */
  idx_source *s = ctx;
  idx_replica *ir = &s->reps[rank];
  if (len == 0) return CLT_OK;
  clt_replica_scope(ir->replica, "input", "batch");
  int at = step * s->global + first, pixels = s->set.height * s->set.width * s->set.channels;
  clt_karg args[] = {CLT_ARG(ir->images), CLT_ARG(ir->labels), CLT_ARG(ir->order),
                     CLT_ARG(at),         CLT_ARG(len),        CLT_ARG(pixels),
                     CLT_ARG(s->mode),    CLT_ARG(x),          CLT_ARG(y)};
  return clt_launch1d(ir->replica, ir->gather, "gather_batch", args, 9, (size_t)len * pixels, e);
}

static void idx_free(void *ctx) {
  idx_source *s = ctx;
  if (!s) return;
  idx_detach(s);
  clt_dataset_free(&s->set);
  free(s);
}

int clt_idx_source(clt_dataset *set, clt_source **out, clt_err *e) {
  static const clt_source_i iface = {.attach = idx_attach,
                                     .begin = idx_begin,
                                     .load = idx_load,
                                     .detach = idx_detach,
                                     .free = idx_free};
  *out = NULL;
  idx_source *s = calloc(1, sizeof *s);
  if (!s) {
    clt_dataset_free(set);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for a dataset source");
  }
  s->set = *set;
  memset(set, 0, sizeof *set);
  const clt_source_info info = {.count = s->set.count,
                                .height = s->set.height,
                                .width = s->set.width,
                                .channels = s->set.channels,
                                .classes = s->set.classes};
  return clt_source_new(&iface, s, &info, out, e);
}
