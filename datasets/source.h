/* Batch sources: where a pass's examples come from, behind one interface, so the
 * trainer knows no data format.
 *
 * A source is made on the host from one format (IDX files held in memory, a photo
 * folder's file list), attached once to the replicas that will read it, then begun
 * once per pass with the pass's example order; in each step every replica loads its
 * slice of the step's global batch into its own input buffers. Each kind fills in a
 * clt_source_i and the handle dispatches through it (as ggml's backends do); the
 * handle checks every argument first, so a kind sees only valid calls. */
#ifndef CLT_SOURCE_H
#define CLT_SOURCE_H

#include "replica.h"

/* How the uint8 images become the network's input (a model chooses it). */
typedef enum clt_preprocess {
  CLT_PRE_UNIT,  /* x / 255 (the reference CNN) */
  CLT_PRE_CAFFE, /* Keras' ResNet50 preprocess_input: RGB -> BGR, minus ImageNet's channel means */
  CLT_PRE_RAW,   /* the pixel values 0..255 as floats, as Keras' image loaders give them (a
                    model file's own Rescaling layer scales them) */
} clt_preprocess;

typedef struct clt_source clt_source;

/* The host work a kind did to prepare its examples (photo decoding). */
typedef struct clt_source_work {
  long images;        /* prepared for this process's loads: decoded, or taken from a cache */
  long decoded;       /* of those, decoded from files */
  double cpu_seconds; /* host threads' CPU time preparing them (decoding, augmenting) */
} clt_source_work;

typedef struct clt_source_info {
  int count;                      /* examples */
  int height, width, channels;    /* of every image: uint8, NHWC */
  int classes;                    /* labels lie in [0, classes) */
  const char *const *class_names; /* `classes` names, or NULL where the data has none (IDX) */
} clt_source_info;

/* What one kind of source implements; ctx is its own state. */
typedef struct clt_source_i {
  /* Prepares to feed replicas[0..n): device buffers, decoders. Steps are global
   * batches of global_batch examples, of which replica r loads at most
   * max_slice[r]; images become floats by `pre`. */
  int (*attach)(void *ctx, clt_replica *const *replicas, int n, int global_batch,
                const int *max_slice, clt_preprocess pre, clt_err *e);
  /* The pass begun next trains epoch `epoch` (-1: a pass that does not train), for
   * a kind whose images depend on it (augmentation); called before every begin
   * (may be NULL). */
  void (*set_epoch)(void *ctx, int epoch);
  /* Begins a pass over every example, in `order` (info.count indices). */
  int (*begin)(void *ctx, const int *order, clt_err *e);
  /* Enqueues on replica `rank`: examples [first, first + len) of step `step`'s
   * global batch into x (floats, preprocessed) and y (int labels). *waited gets
   * the seconds it blocked waiting for the host. len may be 0: every replica
   * loads every step, so a host-side kind knows when a batch is consumed. */
  int (*load)(void *ctx, int rank, int step, int first, int len, cl_mem x, cl_mem y, double *waited,
              clt_err *e);
  /* This process's replicas load examples [first, first + len) of each full
   * batch and [last_first, last_first + last_len) of the pass's last, partial
   * one, from step `step` on (may be NULL: a kind that prepares nothing ahead). */
  int (*share)(void *ctx, int step, int first, int len, int last_first, int last_len, clt_err *e);
  /* The work so far, since attach (may be NULL: none to report). */
  void (*work)(void *ctx, clt_source_work *w);
  /* Stops the pass after an error elsewhere, so no replica blocks in load (may be NULL). */
  void (*cancel)(void *ctx);
  /* Releases what attach made. */
  void (*detach)(void *ctx);
  /* --trace: record host-side work (decoding) into trace from now on (may be NULL). */
  void (*trace)(void *ctx, clt_trace *trace);
  /* The file example i was read from, relative to the data folder (may be NULL:
   * the kind's examples have no files of their own). */
  const char *(*path)(void *ctx, int i);
  void (*free)(void *ctx);
} clt_source_i;

/* Wraps a kind's state into a handle. Takes ctx over, even on failure. info is
 * copied (class_names must live as long as ctx). */
int clt_source_new(const clt_source_i *iface, void *ctx, const clt_source_info *info,
                   clt_source **out, clt_err *e);
/* Detaches if attached, then frees. NULL is fine. */
void clt_source_free(clt_source *s);

const clt_source_info *clt_source_get_info(const clt_source *s);
int clt_source_count(const clt_source *s);
/* Example i's file relative to the data folder ("class/file.jpg" in a photo
 * folder); NULL where the examples have none (IDX) or i is outside [0, count). */
const char *clt_source_path(const clt_source *s, int i);

/* Attaches to n replicas (see clt_source_i.attach). A source feeds one set of
 * replicas at a time; images with other than 3 channels refuse CLT_PRE_CAFFE. */
int clt_source_attach(clt_source *s, clt_replica *const *replicas, int n, int global_batch,
                      const int *max_slice, clt_preprocess pre, clt_err *e);
/* The replicas s is attached to (0: none). */
int clt_source_attached(const clt_source *s);
/* Releases the device buffers and decoders; the replicas must still exist. */
void clt_source_detach(clt_source *s);

/* Begins a pass: order holds clt_source_count() indices into the examples. The
 * pass has ceil(count / global_batch) steps. Blocking. A pass that does not train:
 * augmentations (photos.h) as at inference. */
int clt_source_begin(clt_source *s, const int *order, clt_err *e);
/* The same for a training pass of epoch `epoch` (>= 0): augmentations draw for it. */
int clt_source_begin_epoch(clt_source *s, const int *order, int epoch, clt_err *e);

/* Loads the slice [first, first + len) of step `step`'s batch into replica
 * rank's x (at least len images of floats) and y (len ints); see
 * clt_source_i.load. The replicas may call it concurrently, each for its rank,
 * each in step order. waited may be NULL. */
int clt_source_load(clt_source *s, int rank, int step, int first, int len, cl_mem x, cl_mem y,
                    double *waited, clt_err *e);

/* The part of each step's batch this process's replicas load, the rest being
 * other processes' (MPI; one process loads the whole batch, the default): examples
 * [first, first + len) of a full batch and [last_first, last_first + last_len) of
 * the pass's last batch where it is partial. A kind that prepares examples ahead
 * (photos) prepares only these. Told before a pass begins, it applies to that pass
 * (and later ones, until told again); told during a pass (--split auto re-splits
 * every step), to its steps from `step` on. Loads outside it still work: it only
 * says what to prepare ahead. Attaching resets it to the whole batch. */
int clt_source_share(clt_source *s, int step, int first, int len, int last_first, int last_len,
                     clt_err *e);
/* The kind's host work so far (since attach); 0 if it reports none (*w zeroed). */
int clt_source_get_work(const clt_source *s, clt_source_work *w);

/* Wakes replicas blocked in load after another one failed (their loads fail). */
void clt_source_cancel(clt_source *s);

/* --trace: the kind's host threads record their work into trace (if it has any). */
void clt_source_trace(clt_source *s, clt_trace *trace);

/* For the kinds: a blocking copy of host memory into a buffer of replica r; the
 * error names the device and `what`. */
int clt_source_upload(clt_replica *r, cl_mem dst, const void *src, size_t bytes, const char *what,
                      clt_err *e);

#endif
