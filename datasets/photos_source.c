/* The photo folders' batch source: a loader decodes global batches ahead, of each
 * the process's share; each replica uploads its slice into a staging buffer and
 * converts it on the device. */

#include <stdlib.h>

#include "photos_impl.h"

/* Decoded photos kept in host memory across passes (later epochs decode nothing
 * when the set fits), and how many global batches are decoded ahead. */
#define SOURCE_CACHE_BYTES ((size_t)2 << 30)
#define SOURCE_BATCHES_AHEAD 3

typedef struct photo_replica {
  clt_replica *replica;
  cl_mem staging; /* the largest slice, uint8 */
  cl_kernel convert;
  unsigned char *grey; /* grey input: the largest slice converted on the host */
} photo_replica;

typedef struct photos_source {
  clt_photos *p;
  int count;
  const char **names; /* classes pointers into p */
  clt_loader *loader;
  photo_replica *reps;
  int n;
  int global;
  int mode;                /* clt_preprocess, as the kernel takes it */
  int channels;            /* fed to the network: 3 (RGB), or 1 (grey) */
  size_t cache_bytes;      /* decoded images kept across passes */
  clt_photos_skip_fn skip; /* predict: undecodable images are skipped (NULL: fail) */
  void *skip_ctx;
  clt_augment aug;
  uint64_t seed;
  int epoch;     /* the next pass's (set_epoch): -1, not training */
  size_t pixels; /* of an image as the loader gives it: augmented, if so */
} photos_source;

/* Names each decoder's track; the decoders then record every image. */
static void photos_trace(void *ctx, clt_trace *trace) {
  photos_source *s = ctx;
  if (s->loader) clt_loader_trace(s->loader, trace);
}

static void photos_detach(void *ctx) {
  photos_source *s = ctx;
  clt_loader_destroy(s->loader);
  s->loader = NULL;
  for (int r = 0; r < s->n; r++) {
    if (s->reps[r].staging) clReleaseMemObject(s->reps[r].staging);
    free(s->reps[r].grey);
  }
  free(s->reps);
  s->reps = NULL;
  s->n = 0;
}

static int photos_attach(void *ctx, clt_replica *const *replicas, int n, int global_batch,
                         const int *max_slice, clt_preprocess pre, clt_err *e) {
  photos_source *s = ctx;
  const size_t image_bytes = s->pixels * s->channels;
  int status = clt_loader_create_augmented(s->p, &s->aug, s->seed, n, global_batch,
                                           SOURCE_BATCHES_AHEAD, 0, s->cache_bytes, &s->loader, e);
  if (status) return status;
  if (s->skip) clt_loader_skip(s->loader, s->skip, s->skip_ctx);
  s->reps = calloc((size_t)n, sizeof *s->reps);
  if (!s->reps) {
    photos_detach(s);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory attaching photos");
  }
  s->n = n;
  s->global = global_batch;
  s->mode = (int)pre;
  for (int r = 0; r < n && !status; r++) {
    photo_replica *pr = &s->reps[r];
    pr->replica = replicas[r];
    const size_t bytes = max_slice[r] ? (size_t)max_slice[r] * image_bytes : 1;
    status = clt_replica_alloc(pr->replica, bytes, "input staging", &pr->staging, e);
    if (!status && s->channels == 1 && !(pr->grey = malloc(bytes)))
      status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory attaching photos");
    if (!status)
      status = clt_replica_kernel(pr->replica, "data.cl", "", "convert_batch", &pr->convert, e);
  }
  if (status) photos_detach(s);
  return status;
}

static void photos_set_epoch(void *ctx, int epoch) {
  photos_source *s = ctx;
  s->epoch = epoch;
}

static int photos_begin(void *ctx, const int *order, clt_err *e) {
  photos_source *s = ctx;
  const int epoch = s->epoch;
  s->epoch = -1; /* a pass is a training one only when said so */
  return clt_loader_start_epoch(s->loader, order, s->count, s->global, epoch, e);
}

/* rgb's n pixels as BT.601 luma, rounded as Pillow's convert("L") does. */
static void to_grey(const unsigned char *rgb, size_t n, unsigned char *grey) {
  for (size_t i = 0; i < n; i++) {
    const unsigned v = 19595u * rgb[3 * i] + 38470u * rgb[3 * i + 1] + 7471u * rgb[3 * i + 2];
    grey[i] = (unsigned char)((v + 32768u) >> 16);
  }
}

/* Uploads the decoded slice's len images and converts them. The copies are
 * complete when this returns, so the batch may be put. */
static int upload_slice(photos_source *s, photo_replica *pr, const clt_photo_batch *b, int len,
                        cl_mem x, cl_mem y, clt_err *e) {
  if (len == 0) return CLT_OK;
  clt_replica_scope(pr->replica, "input", "batch");
  const size_t pixels = s->pixels;
  const size_t bytes = (size_t)len * pixels * s->channels;
  const unsigned char *from = b->pixels;
  if (s->channels == 1) {
    to_grey(from, (size_t)len * pixels, pr->grey);
    from = pr->grey;
  }
  int status = clt_source_upload(pr->replica, pr->staging, from, bytes, "uploading a batch", e);
  if (!status) {
    status = clt_source_upload(pr->replica, y, b->labels, (size_t)len * sizeof(int),
                               "uploading labels", e);
  }
  if (status) return status;
  int n = (int)bytes, channels = s->channels;
  clt_karg args[] = {CLT_ARG(pr->staging), CLT_ARG(n), CLT_ARG(channels), CLT_ARG(s->mode),
                     CLT_ARG(x)};
  return clt_launch1d(pr->replica, pr->convert, "convert_batch", args, 5, bytes, e);
}

static int photos_load(void *ctx, int rank, int step, int first, int len, cl_mem x, cl_mem y,
                       double *waited, clt_err *e) {
  photos_source *s = ctx;
  clt_photo_batch b;
  int status = clt_loader_get_slice(s->loader, step, first, len, &b, waited, e);
  if (status) return status;
  status = upload_slice(s, &s->reps[rank], &b, len, x, y, e);
  clt_loader_put(s->loader, step); /* every replica puts every step, failed or not */
  return status;
}

static int photos_share(void *ctx, int step, int first, int len, int last_first, int last_len,
                        clt_err *e) {
  photos_source *s = ctx;
  return clt_loader_share(s->loader, step, first, len, last_first, last_len, e);
}

static void photos_work(void *ctx, clt_source_work *w) {
  photos_source *s = ctx;
  clt_loader_work lw;
  clt_loader_get_work(s->loader, &lw);
  w->images = (long)lw.images;
  w->decoded = (long)lw.decoded;
  w->cpu_seconds = lw.cpu_seconds;
}

static void photos_cancel(void *ctx) {
  photos_source *s = ctx;
  clt_loader_cancel(s->loader);
}

static const char *photos_path(void *ctx, int i) {
  const photos_source *s = ctx;
  return clt_photos_relative_path(s->p, i);
}

static void photos_free(void *ctx) {
  photos_source *s = ctx;
  if (!s) return;
  photos_detach(s);
  clt_photos_free(s->p);
  free(s->names);
  free(s);
}

/* A source over examples [0, count) of p feeding `channels`, augmented by aug
 * (NULL: none) with seed's draws; see photos.h. */
static int make_source(clt_photos *p, int count, int channels, size_t cache_bytes,
                       const clt_augment *aug, uint64_t seed, clt_photos_skip_fn skip, void *ctx,
                       clt_source **out, clt_err *e) {
  static const clt_source_i iface = {.attach = photos_attach,
                                     .set_epoch = photos_set_epoch,
                                     .begin = photos_begin,
                                     .load = photos_load,
                                     .share = photos_share,
                                     .work = photos_work,
                                     .cancel = photos_cancel,
                                     .detach = photos_detach,
                                     .trace = photos_trace,
                                     .path = photos_path,
                                     .free = photos_free};
  *out = NULL;
  if (count < 0 || count > p->count) {
    const int status = clt_fail(e, CLT_ERR_ARG, "photo source: %d of %d examples", count, p->count);
    clt_photos_free(p);
    return status;
  }
  photos_source *s = calloc(1, sizeof *s);
  const char **names = malloc((size_t)p->classes * sizeof *names);
  if (!s || !names) {
    free(s);
    free(names);
    clt_photos_free(p);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for a photo source");
  }
  for (int c = 0; c < p->classes; c++) names[c] = clt_photos_class_name(p, c);
  s->p = p;
  s->count = count;
  s->names = names;
  s->channels = channels;
  s->cache_bytes = cache_bytes;
  s->skip = skip;
  s->skip_ctx = ctx;
  if (aug) s->aug = *aug;
  s->seed = seed;
  s->epoch = -1;
  int h, w;
  clt_augment_out_size(&s->aug, p->image_size, p->image_size, &h, &w);
  s->pixels = (size_t)h * w;
  const clt_source_info info = {.count = count,
                                .height = h,
                                .width = w,
                                .channels = channels,
                                .classes = p->classes,
                                .class_names = names};
  return clt_source_new(&iface, s, &info, out, e);
}

int clt_photos_source(clt_photos *p, int count, clt_source **out, clt_err *e) {
  return clt_photos_source_augmented(p, count, NULL, 0, out, e);
}

int clt_photos_source_augmented(clt_photos *p, int count, const clt_augment *aug, uint64_t seed,
                                clt_source **out, clt_err *e) {
  return make_source(p, count, 3, SOURCE_CACHE_BYTES, aug, seed, NULL, NULL, out, e);
}

int clt_photos_predict_source(clt_photos *p, int channels, const clt_augment *crops,
                              clt_photos_skip_fn skip, void *ctx, clt_source **out, clt_err *e) {
  if (channels != 1 && channels != 3) {
    clt_photos_free(p);
    *out = NULL;
    return clt_fail(e, CLT_ERR_ARG, "photo source: %d channels (1 or 3)", channels);
  }
  return make_source(p, p->count, channels, 0, crops, 0, skip, ctx, out, e);
}
