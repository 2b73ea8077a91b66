/* IDX image/label files (the MNIST family), gzipped or plain, read through zlib. */
#ifndef CLT_IDX_H
#define CLT_IDX_H

#include "source.h"
#include "status.h"

/* A labelled image set held in host memory. */
typedef struct clt_dataset {
  int count; /* number of examples */
  int height, width, channels;
  int classes;                     /* labels are in [0, classes) */
  unsigned char *pixels;           /* count * height * width * channels bytes, NHWC */
  unsigned char *labels;           /* count bytes */
  struct clt_idx_pending *pending; /* pixels still being read (clt_idx_load_dir_async) */
} clt_dataset;

/* Loads an IDX3 ubyte image file and an IDX1 ubyte label file (each may be gzip
 * compressed or plain; detected from content, not the name). Every label must be
 * below `classes`. On error fills e with one line naming the file and the cause and
 * leaves *out zeroed. */
int clt_idx_load(const char *images_path, const char *labels_path, int classes, clt_dataset *out,
                 clt_err *e);

/* Loads split "train" or "t10k" of a Fashion-MNIST-style folder: DIR/<split>-images-idx3-ubyte
 * and DIR/<split>-labels-idx1-ubyte, each with or without ".gz" (".gz" preferred when both
 * exist). classes = 10. */
int clt_idx_load_dir(const char *dir, const char *split, clt_dataset *out, clt_err *e);

/* clt_idx_load_dir with the pixels read in a thread, so a run compiles its
 * kernels while the images inflate.
 * The headers and labels are read and checked before it returns; the pixels'
 * errors (a truncated file) come from clt_dataset_wait, which the batch source
 * calls before its upload (clt_source_attach). */
int clt_idx_load_dir_async(const char *dir, const char *split, clt_dataset *out, clt_err *e);

/* Waits for d's pixels (nothing to wait for after clt_idx_load_dir): CLT_OK, or
 * the reader's error naming the file; d->pixels then stays NULL. */
int clt_dataset_wait(clt_dataset *d, clt_err *e);

/* Splits `all` as Keras' validation_split does: its last examples, from
 * floor(count * (1 - fraction)) on, move to *tail (new arrays; all keeps the
 * others). Waits for all's pixels. Fails, naming `dir`, when either part would
 * be empty. */
int clt_dataset_split(clt_dataset *all, double fraction, const char *dir, clt_dataset *tail,
                      clt_err *e);

/* Frees d's arrays (waiting for its reader first). */
void clt_dataset_free(clt_dataset *d);

/* A batch source over a set held in memory: attaching uploads the images and
 * labels to every replica once, as bytes, and every load gathers its slice there
 * through the pass's order (uploaded once per pass), so a step moves nothing from
 * the host. Takes the set's arrays over (*set is left zeroed), even on failure. */
int clt_idx_source(clt_dataset *set, clt_source **out, clt_err *e);

#endif
