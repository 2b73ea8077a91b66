/* Photo folders, read like Keras' image_dataset_from_directory(labels="inferred"),
 * and a pool of threads that decodes batches ahead of training.
 *
 * Layout: DIR/<class>/.../<file>.{jpg,jpeg,png} (extension case-insensitive). Classes
 * are DIR's subdirectories (not hidden ones), sorted by strcmp; label = rank. Files
 * are found recursively under each class directory (as Keras does; hidden directories
 * skipped), ordered by (directory, file name) as Keras' sorted(os.walk()) does. Other
 * files are ignored, including .bmp and .gif, which Keras would also load.
 *
 * Policy on bad files. Problems should surface before training starts, so
 * clt_photos_open reads the first 8 bytes of every file and fails if any is
 * unreadable or is neither JPEG (FF D8 FF) nor PNG (89 'PNG' 0D 0A 1A 0A), naming the
 * first such file and how many there are. The format is taken from those bytes, not
 * the extension. A file that passes that check but cannot be decoded (corrupt,
 * truncated: libjpeg's "premature end of data" counts as an error, since the image
 * would be half grey) aborts the pass with "file PATH: cannot decode: <cause>":
 * training stops with a non-zero exit; checkpoints already written stay. Nothing is
 * skipped silently, so every epoch sees the same examples. An image of more than
 * clt_photos_max_pixels() pixels (width * height) is refused the same way, from its
 * header, before any pixel memory is allocated: "file PATH: WxH = N pixels exceeds the
 * limit of L (a decompression bomb?); raise it with --max-image-pixels" (a 730 KiB PNG
 * of zeros can hold 16000x16000 pixels).
 *
 * Memory. Files are read through stdio, never whole. JPEG scanlines and PNG rows are
 * resized as they arrive, keeping two rows, so an image needs memory in proportion to
 * its width; only a multi-scan (progressive) JPEG, whose DCT coefficients libjpeg keeps
 * whole (2 bytes a sample), and an interlaced PNG (3 bytes a pixel) need the whole
 * image. Each decode first reserves its estimated need from one budget shared by every
 * decoding thread of the process (clt_photos_set_decode_budget), waiting its turn while
 * the budget is taken; an image needing more than the whole budget is decoded alone. A
 * thread keeps at most 1 MiB of buffers between images, and after a big one glibc is
 * made to hand freed memory back (malloc_trim) before the reservation is returned. So
 * decoding takes about the budget or the largest single image, whichever is more,
 * however many threads decode.
 *
 * Pixels: decoded to 8-bit RGB (grayscale expanded, palette expanded, 16-bit scaled
 * to 8 with rounding, alpha dropped without compositing, CMYK/YCCK JPEGs converted
 * as TensorFlow does; no gamma or ICC handling, like tf.io.decode_image), then resized
 * to image_size x image_size like tf.image.resize(method="bilinear") (half-pixel
 * centres, no antialiasing, aspect ratio not kept), computed in float as TensorFlow
 * does and rounded to uint8 (Keras would keep the floats). The resize runs on rows as
 * they arrive (Memory above) with the arithmetic of a whole-image resize: the same
 * pixels. libjpeg's reduced-size decoding (1/2 to 1/8) is not used: it would save time
 * on big JPEGs but no memory (two rows either way; a progressive file's coefficients
 * are full size at any scale), and would give other pixels than Keras' loaders. */
#ifndef CLT_PHOTOS_H
#define CLT_PHOTOS_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "source.h"
#include "status.h"

typedef struct clt_photos clt_photos; /* opaque: one subset (training or validation) */

/* True when dir looks like a photo folder: it holds at least one (non-hidden)
 * subdirectory (as opposed to IDX files). False if dir cannot be read. */
int clt_photos_is_folder(const char *dir);

/* Scans dir (see above). Files are listed in (class, path) order, then, if
 * validation_split > 0, shuffled with `seed` (clt_rng stream CLT_PHOTOS_SPLIT_STREAM,
 * Fisher-Yates) and split: the last floor(validation_split * n) go to *validation, the
 * rest to *train (Keras' rule). validation_split must be in [0, 1); if 0, *validation
 * is set to NULL (validation itself may then be NULL). image_size in [1, CLT_PHOTOS_MAX_SIZE].
 * Errors (one line naming the path and the cause): dir missing / not a directory / unreadable; no
 * class subdirectory; a class subdirectory with no image files; bad magic bytes (see the policy
 * above); a split leaving an empty training or validation subset. A single class is allowed here
 * (the model decides). On error *train and *validation are NULL. */
int clt_photos_open(const char *dir, int image_size, double validation_split, uint64_t seed,
                    clt_photos **train, clt_photos **validation, clt_err *e);
void clt_photos_free(clt_photos *p);

#define CLT_PHOTOS_MAX_SIZE 8192
/* Where Pillow raises DecompressionBombError: 2 * Image.MAX_IMAGE_PIXELS (1 GiB / 4 / 3,
 * where it only warns). */
#define CLT_PHOTOS_MAX_PIXELS 178956970LL
#define CLT_PHOTOS_DECODE_BUDGET ((size_t)1 << 30)

/* The pixel limit (see above), process-wide like Pillow's Image.MAX_IMAGE_PIXELS; a
 * subset keeps the value in force when it was opened, so set it first. Below 1: the
 * default. Thread-safe. */
void clt_photos_set_max_pixels(long long max_pixels);
long long clt_photos_max_pixels(void);
/* The bytes all decodes of the process may reserve together (see Memory above); 0: the
 * default, CLT_PHOTOS_DECODE_BUDGET. Applies to the reservations that follow. */
void clt_photos_set_decode_budget(size_t bytes);
/* The validation split's random stream, "SPLIT": apart from weights (0) and epochs (1+). */
#define CLT_PHOTOS_SPLIT_STREAM 0x53504c4954ull

/* What cltrain predict does with an input it cannot use: told of it, with i the
 * argument (clt_photos_open_files) or the example (clt_photos_predict_source). */
typedef void (*clt_photos_skip_fn)(void *ctx, int i, const clt_err *e);

/* The images to predict, one subset of one class (labels 0) holding, in argument
 * order, each of paths[0..n) that is a file (whatever its name or content: decoding
 * tells) and the image files of each that is a folder, listed as a class directory
 * is above (recursively, hidden directories skipped, only .jpg, .jpeg and .png
 * names, by (directory, file name)) and named FOLDER/.../file (FOLDER as given,
 * without a trailing '/'). Nothing is read but folders. A path that does not exist,
 * a folder that cannot be read or holds no image file is told to skip(ctx, arg, e)
 * ("PATH: cause") and left out; only running out of memory fails. The subset may be
 * empty. */
int clt_photos_open_files(const char *const *paths, int n, int image_size, clt_photos_skip_fn skip,
                          void *ctx, clt_photos **out, clt_err *e);

int clt_photos_count(const clt_photos *p);
int clt_photos_classes(const clt_photos *p);
const char *clt_photos_class_name(const clt_photos *p, int c);
int clt_photos_label(const clt_photos *p, int i);
const char *clt_photos_path(const clt_photos *p, int i);
/* The same path relative to the folder opened ("class/.../file"). */
const char *clt_photos_relative_path(const clt_photos *p, int i);
int clt_photos_image_size(const clt_photos *p);

/* Decodes example i into rgb (image_size*image_size*3 bytes, HWC, RGB). Thread-safe
 * (allocates its own scratch per call; the loader keeps scratch per thread). Fails with
 * "file PATH: cannot decode: <cause>" (CLT_ERR_FORMAT; CLT_ERR_IO if unreadable), or
 * the pixel limit's message (CLT_ERR_FORMAT). */
int clt_photos_decode(const clt_photos *p, int i, unsigned char *rgb, clt_err *e);

/* A pool of host threads that decode batches ahead of the consumers. Slots (depth of
 * them, max_batch images each) are filled in step order; batch s lives in slot
 * s % depth until every consumer has put it. Of each batch only this process's
 * share is decoded (clt_loader_share; by default the whole batch), and whatever
 * slice a consumer asks for beyond it. */
typedef struct clt_loader clt_loader;
typedef struct clt_photo_batch {
  const unsigned char *pixels; /* count * image_size^2 * 3, RGB uint8, in `order` order */
  const int *labels;           /* count */
  int count;
} clt_photo_batch;

/* consumers: how many threads will each get()/put() every batch (one per replica);
 * depth: batches decoded ahead; threads: decoding threads (0: number of online CPUs);
 * cache_bytes: decoded images kept in RAM across passes (examples 0..K-1 of the subset
 * where K images fit: if the whole subset fits, later passes decode nothing; 0
 * disables). Every buffer is allocated here (the cache too), none per batch; per-thread
 * decode scratch grows only when a wider image arrives, and what a big image needed is
 * freed after it (see Memory above). */
int clt_loader_create(const clt_photos *p, int consumers, int max_batch, int depth, int threads,
                      size_t cache_bytes, clt_loader **out, clt_err *e);
/* The same, each image augmented by aug (copied; NULL or n 0: none) after its decode,
 * with the draws of (seed, the pass's epoch, the image's index in p): the batches
 * hold clt_augment_out_size's images. The cache keeps the decoded images. */
int clt_loader_create_augmented(const clt_photos *p, const clt_augment *aug, uint64_t seed,
                                int consumers, int max_batch, int depth, int threads,
                                size_t cache_bytes, clt_loader **out, clt_err *e);
/* Begins a pass: batch s holds examples order[s*batch .. min(count, (s+1)*batch)).
 * The previous pass must have been fully consumed (every step put by every consumer),
 * cancelled or failed. The order array is copied. 1 <= batch <= max_batch. */
int clt_loader_start(clt_loader *l, const int *order, int count, int batch, clt_err *e);
/* The same for a training pass of epoch `epoch` (the augmentations' draws); epoch
 * < 0, as clt_loader_start: not training, augmentations as at inference. */
int clt_loader_start_epoch(clt_loader *l, const int *order, int count, int batch, int epoch,
                           clt_err *e);
/* Blocks until batch `step` of the current pass is decoded; *wait_seconds (if not
 * NULL) gets the time spent blocked. Steps are got in increasing order by each
 * consumer; the batch stays valid until this consumer puts it. A decode failure
 * of a wanted image returns its error (naming the file) to every get() of that
 * step and later ones; a cancelled pass returns CLT_ERR_ARG "photo loader: pass
 * cancelled". */
int clt_loader_get(clt_loader *l, int step, clt_photo_batch *out, double *wait_seconds, clt_err *e);
/* The same for examples [first, first + len) of the batch alone (len < 0: to its
 * end): out holds those len images. A consumer with nothing to load gets len 0
 * (and puts the step all the same). */
int clt_loader_get_slice(clt_loader *l, int step, int first, int len, clt_photo_batch *out,
                         double *wait_seconds, clt_err *e);
/* The examples this process needs of each batch, the others being other
 * processes' (MPI): [first, first + len) of a full batch, [last_first, last_first
 * + last_len) of a pass's last batch where it is partial (lengths clipped to the
 * batch). Kept across passes until changed; at creation the whole batch. Called
 * during a pass it applies to its steps from from_step on, those decoded ahead
 * included: positions no longer wanted are not decoded, or not waited for. The
 * share decides what is decoded ahead; a get() outside it still gets its images. */
int clt_loader_share(clt_loader *l, int from_step, int first, int len, int last_first, int last_len,
                     clt_err *e);
/* The consumer is done with batch `step`; when all consumers have put it, its slot is reused. */
void clt_loader_put(clt_loader *l, int step);
/* Stops the current pass (after an error elsewhere): wakes blocked get()s, which
 * return an error; images being decoded are finished and discarded. */
void clt_loader_cancel(clt_loader *l);
/* Stops and joins the threads, frees everything. No consumer may be inside get()
 * (cancel first and let them return). NULL is fine. */
void clt_loader_destroy(clt_loader *l);
/* Images decoded from files so far (cache hits not counted). */
size_t clt_loader_decoded(const clt_loader *l);
/* The loader's work so far. */
typedef struct clt_loader_work {
  size_t images;      /* put into batches: decoded, or copied from the cache (then augmented) */
  size_t decoded;     /* of those, decoded from files */
  double cpu_seconds; /* the decoding threads' CPU time preparing them (decoding, augmenting) */
} clt_loader_work;
void clt_loader_get_work(const clt_loader *l, clt_loader_work *w);

/* A batch source over examples [0, count) of p (count <= its size): attaching
 * starts a loader for the replicas (global batches decoded ahead on host threads,
 * of each the process's share (clt_source_share), decoded images cached up to 2
 * GiB) and a uint8 staging buffer per replica; each load waits for its slice,
 * uploads it and converts it on the device. Takes p over, even on failure. */
int clt_photos_source(clt_photos *p, int count, clt_source **out, clt_err *e);
/* The same, its images augmented by aug (copied; NULL: none) with seed's draws in
 * training passes (clt_source_begin_epoch) and as at inference in the others: the
 * source's images have clt_augment_out_size's size. */
int clt_photos_source_augmented(clt_photos *p, int count, const clt_augment *aug, uint64_t seed,
                                clt_source **out, clt_err *e);

/* A batch source for one pass over every example of p for cltrain predict: as
 * clt_photos_source, without the cache, and an image that cannot be decoded does
 * not end the pass: it is fed as black pixels and skip(ctx, i, e) is told (from a
 * decoding thread, before the batch holding it is loaded). channels 1 feeds grey
 * images: each resized RGB pixel becomes (19595 R + 38470 G + 7471 B + 32768) >> 16,
 * ITU-R BT.601's luma as Pillow's convert("L") computes it; 3 feeds RGB. crops (NULL:
 * none) are the training's augmentation as it acts outside training (augment.h):
 * each image is resized to their size after its decode. Takes p over, even on failure. */
int clt_photos_predict_source(clt_photos *p, int channels, const clt_augment *crops,
                              clt_photos_skip_fn skip, void *ctx, clt_source **out, clt_err *e);

#endif
