/* What the parts of the photo folders' code share; photos.h is the interface.
 *   photos_folder.c  scanning a folder into subsets (training, validation)
 *   photos_decode.c  decoding one image (JPEG, PNG) and resizing it, within the
 *                    pixel limit and the process's decoding budget
 *   photos_loader.c  the decoding threads: batches decoded ahead, the image cache
 *   photos_source.c  the batch source that uploads the loader's batches */
#ifndef CLT_PHOTOS_IMPL_H
#define CLT_PHOTOS_IMPL_H

#include <stddef.h>

#include "photos.h"
#include "trace.h"

struct clt_photos {
  int count, classes, image_size;
  long long max_pixels; /* clt_photos_max_pixels() when opened */
  size_t *path_off;     /* count offsets into text */
  int *labels;          /* count */
  size_t *class_off;    /* classes offsets into text */
  char *text;           /* NUL-terminated class names and paths */
  size_t root_len;      /* a path's first root_len bytes are the folder and its '/' */
};

/* The format of a file, from its first bytes (the extension does not count). */
enum { KIND_BAD = 0, KIND_JPEG = 1, KIND_PNG = 2 };
int clt_photos_sniff(const unsigned char *b, size_t n);

/* A decoding thread's buffers, kept between its images (see photos_decode.c). */
typedef struct scratch {
  unsigned char *rows; /* two source rows, 4 bytes a pixel (CMYK before conversion) */
  size_t rows_cap;
  unsigned char *img; /* interlaced PNGs only: the whole image, RGB */
  size_t img_cap;
  unsigned char **ptrs; /* its row pointers */
  size_t ptrs_cap;      /* entries */
  int *x0, *x1;         /* resize tables, image_size entries */
  float *xl;
} scratch;

int clt_photos_scratch_init(scratch *s, int image_size);
void clt_photos_scratch_free(scratch *s);
/* clt_photos_decode with the calling thread's scratch. */
int clt_photos_decode_with(const clt_photos *p, int i, scratch *s, unsigned char *rgb, clt_err *e);

/* From the next pass on, an image that cannot be decoded does not fail the pass:
 * it is left black and fn(ctx, example, e) is told (from its decoding thread). */
void clt_loader_skip(clt_loader *l, clt_photos_skip_fn fn, void *ctx);

/* Names each decoding thread's track in trace; the threads then record every image. */
void clt_loader_trace(clt_loader *l, clt_trace *trace);

#endif
