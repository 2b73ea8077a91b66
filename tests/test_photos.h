/* What the two sources of test_photos share: the test folder's paths, the image
 * writers, the reference folder's specification, and the tests of
 * test_photos_limits.c that main runs. */
#ifndef CLT_TEST_PHOTOS_H
#define CLT_TEST_PHOTOS_H

#include <stddef.h>

#include <png.h>

#include "status.h"

extern int verbose; /* VERBOSE=1: print each expected error message */

/* A non-zero status whose message names `needle` (a path, usually). */
void check_err(int rc, const clt_err *e, const char *needle, const char *what);
/* The printf-formatted path under the test folder (one of 64 rotating buffers). */
const char *tpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mkdirs(const char *path);
/* Creates the parent directory of path. */
void mkparent(const char *path);
void write_raw(const char *path, const void *p, size_t n);
unsigned char *read_raw(const char *path, size_t *n);
/* data: rows of w * channels samples, 8-bit (or 16-bit big-endian when depth 16). */
void write_png(const char *path, int w, int h, int color_type, int depth, const unsigned char *data,
               const png_color *palette, int npalette);
/* comps 1 (gray), 3 (RGB) or 4 (CMYK, written with libjpeg's Adobe marker). */
void write_jpeg(const char *path, int w, int h, int comps, const unsigned char *data, int quality);

enum { PNG_RGB, PNG_RGBA, PNG_GRAY, PNG_PAL, PNG_RGB16, PNG_GRAY16, JPG_RGB, JPG_GRAY };

typedef struct spec {
  const char *rel; /* under photos/ */
  int kind, w, h;
  int grad; /* 1: gradient (PNG_RGB only), else constant rgb */
  unsigned char rgb[3];
  int label;
} spec;

/* The reference folder's files, in the order it must list them. */
extern const spec specs[];
void write_spec(const char *path, const spec *s);

/* test_photos_limits.c */
void test_bad(void);
void test_pixel_limit(void);
void test_big_images(void);
void test_budget(void);

#endif
