/* Tests of what the photo folders refuse and what decoding may take: bad folders
 * and files, the pixel limit (a PNG bomb refused from its header), big JPEGs and
 * PNGs decoded with a bounded peak RSS, progressive and interlaced ones under the
 * decoding budget. main is in test_photos.c. */
#define _POSIX_C_SOURCE 200809L /* link */

#include "check.h"
#include "photos.h"
#include "rng.h"
#include "test_photos.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

/* ------------------------------------------------------------------------- */
/* Bad folders                                                               */

void test_bad(void) {
  clt_photos *t = NULL, *v = NULL;
  clt_err e = {0};
  int rc;

  const char *missing = tpath("no_such_dir");
  rc = clt_photos_open(missing, 8, 0.0, 1, &t, &v, &e);
  check_err(rc, &e, missing, "missing dir");
  check(!clt_photos_is_folder(missing), "is_folder(missing)");

  const char *file = tpath("photos/notes.txt");
  rc = clt_photos_open(file, 8, 0.0, 1, &t, &v, &e);
  check_err(rc, &e, file, "regular file as dir");

  const char *empty = tpath("empty");
  mkdirs(empty);
  rc = clt_photos_open(empty, 8, 0.0, 1, &t, &v, &e);
  check_err(rc, &e, empty, "empty dir");
  check(!clt_photos_is_folder(empty), "is_folder(empty)");

  /* Only files at the top: an IDX-style folder, not a photo folder. */
  write_raw(tpath("flat/train-images-idx3-ubyte"), "x", 1);
  check(!clt_photos_is_folder(tpath("flat")), "is_folder(folder of files)");
  rc = clt_photos_open(tpath("flat"), 8, 0.0, 1, &t, &v, &e);
  check_err(rc, &e, tpath("flat"), "folder without class subdirectory");

  write_spec(tpath("noimg/a/x.png"), &specs[0]);
  write_raw(tpath("noimg/b/readme.txt"), "x", 1);
  rc = clt_photos_open(tpath("noimg"), 8, 0.0, 1, &t, &v, &e);
  check_err(rc, &e, "b", "class with no images");
  check(rc == CLT_OK || strstr(e.msg, tpath("noimg")) != NULL,
        "class with no images: no folder path: %s", e.msg);

  /* A single class is allowed here. */
  write_spec(tpath("single/only/x.png"), &specs[0]);
  rc = clt_photos_open(tpath("single"), 8, 0.0, 1, &t, &v, &e);
  check(rc == CLT_OK && clt_photos_classes(t) == 1, "single class: %s",
        rc ? e.msg : "wrong classes");
  clt_photos_free(t);
  t = NULL;

  /* Garbage with an image extension fails at open, naming the first and the count. */
  write_spec(tpath("garbage/a/ok.png"), &specs[0]);
  const char *junk = "this is not a JPEG at all";
  write_raw(tpath("garbage/a/bad.jpg"), junk, strlen(junk));
  write_raw(tpath("garbage/b/bad2.png"), junk, 3);
  rc = clt_photos_open(tpath("garbage"), 8, 0.0, 1, &t, &v, &e);
  check_err(rc, &e, tpath("garbage/a/bad.jpg"), "garbage .jpg");
  check(rc == CLT_OK || strstr(e.msg, "2 of 3") != NULL, "garbage: count of bad files missing: %s",
        e.msg);

  /* Truncated JPEG (valid header, cut in half) and PNG: open passes, decoding fails. */
  {
    int w = 128, h = 96;
    unsigned char *noise = malloc((size_t)w * h * 3);
    clt_rng r;
    clt_rng_seed(&r, 5, 0);
    for (int i = 0; i < w * h * 3; i++) noise[i] = (unsigned char)clt_rng_next(&r);
    write_jpeg(tpath("trunc/a/t.jpg"), w, h, 3, noise, 95);
    write_png(tpath("trunc/a/u.png"), w, h, PNG_COLOR_TYPE_RGB, 8, noise, NULL, 0);
    free(noise);
    size_t len = 0;
    unsigned char *jpg = read_raw(tpath("trunc/a/t.jpg"), &len);
    write_raw(tpath("trunc/a/t.jpg"), jpg, len / 2);
    free(jpg);
    unsigned char *png = read_raw(tpath("trunc/a/u.png"), &len);
    write_raw(tpath("trunc/a/u.png"), png, len / 2);
    free(png);
    write_spec(tpath("trunc/a/ok.png"), &specs[0]);
  }
  rc = clt_photos_open(tpath("trunc"), 8, 0.0, 1, &t, &v, &e);
  check(rc == CLT_OK && clt_photos_count(t) == 3, "truncated files pass open: %s",
        rc ? e.msg : "count");
  if (rc == CLT_OK) {
    unsigned char rgb[8 * 8 * 3];
    /* sorted: ok.png, t.jpg, u.png */
    rc = clt_photos_decode(t, 0, rgb, &e);
    check(rc == CLT_OK, "decode ok.png: %s", e.msg);
    rc = clt_photos_decode(t, 1, rgb, &e);
    check_err(rc, &e, tpath("trunc/a/t.jpg"), "truncated JPEG decode");
    check(rc == CLT_OK || strstr(e.msg, "cannot decode"), "truncated JPEG: message %s", e.msg);
    rc = clt_photos_decode(t, 2, rgb, &e);
    check_err(rc, &e, tpath("trunc/a/u.png"), "truncated PNG decode");

    /* Loader: step 0 (ok.png) arrives, step 1 (t.jpg) fails naming it, for every consumer. */
    clt_loader *l = NULL;
    rc = clt_loader_create(t, 2, 1, 3, 2, 0, &l, &e);
    check(rc == CLT_OK, "loader create (trunc): %s", e.msg);
    if (rc == CLT_OK) {
      int order[3] = {0, 1, 2};
      clt_photo_batch b;
      rc = clt_loader_start(l, order, 3, 1, &e);
      check(rc == CLT_OK, "trunc start: %s", e.msg);
      for (int c = 0; c < 2 && rc == CLT_OK; c++) {
        int r0 = clt_loader_get(l, 0, &b, NULL, &e);
        check(r0 == CLT_OK, "trunc: consumer %d step 0: %s", c, e.msg);
        int r1 = clt_loader_get(l, 1, &b, NULL, &e);
        check_err(r1, &e, tpath("trunc/a/t.jpg"), "loader get of a truncated JPEG");
      }
      clt_loader_destroy(l); /* failed pass, not consumed */
    }
    clt_photos_free(t);
    t = NULL;
  }
}

/* ------------------------------------------------------------------------- */
/* Memory: the pixel limit, big images, the decoding budget                  */

/* Peak RSS is measured from /proc/self/status's VmHWM after resetting it to the
 * current RSS (writing 5 to /proc/self/clear_refs, Linux 4.0 on). Not under
 * AddressSanitizer, whose quarantine keeps freed memory resident, nor under
 * ThreadSanitizer, whose shadow memory grows with what is touched. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_MEASURABLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define RSS_MEASURABLE 0
#endif
#endif
#ifndef RSS_MEASURABLE
#define RSS_MEASURABLE 1
#endif

static long rss_base_kib = -1;

static long status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0) v = atol(line + n);
  if (f) fclose(f);
  return v;
}

static void peak_reset(void) {
  rss_base_kib = -1;
  if (!RSS_MEASURABLE) return;
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return;
  int ok = fputs("5", f) >= 0;
  if (fclose(f) != 0) ok = 0;
  if (ok) rss_base_kib = status_kib("VmRSS:");
}

/* The peak since peak_reset() stayed within limit_mib above the RSS then. */
static void check_peak(const char *what, long limit_mib) {
  long hwm = status_kib("VmHWM:");
  if (rss_base_kib < 0 || hwm < 0) {
    printf("skip: %s: peak RSS not measurable here\n", what);
    return;
  }
  long grew = hwm - rss_base_kib;
  check(grew <= limit_mib * 1024, "%s: peak RSS grew %.1f MiB (limit %ld MiB)", what, grew / 1024.0,
        limit_mib);
}

/* A w x h PNG of zeros, 1-bit grey, written a row at a time: a few KiB on disk
 * for hundreds of MB decoded. */
static void write_blank_png(const char *path, int w, int h) {
  mkparent(path);
  FILE *f = fopen(path, "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  unsigned char *row = calloc((size_t)(w + 7) / 8, 1);
  if (!f || !png || !info || !row || setjmp(png_jmpbuf(png))) {
    check(0, "cannot write PNG %s", path);
    if (png) png_destroy_write_struct(&png, &info);
    if (f) fclose(f);
    free(row);
    return;
  }
  png_init_io(png, f);
  png_set_compression_level(png, 9);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 1, PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; y++) png_write_row(png, row);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(f);
  free(row);
}

/* Big images' pixels: gradients and a 16-pixel checkerboard (edges to resize). */
static unsigned char big_px(int x, int y, int c, int w, int h) {
  switch (c) {
    case 0:
      return (unsigned char)(x * 255L / (w - 1));
    case 1:
      return (unsigned char)(y * 255L / (h - 1));
    default:
      return ((x / 16 + y / 16) & 1) ? 200 : 40;
  }
}

enum { BIG_JPEG, BIG_JPEG_PROGRESSIVE, BIG_PNG, BIG_PNG_INTERLACED };

/* Writes big_px() row by row, never the whole image. */
static void write_big(const char *path, int kind, int w, int h) {
  mkparent(path);
  FILE *f = fopen(path, "wb");
  unsigned char *row = malloc((size_t)w * 3);
  if (!f || !row) {
    check(0, "cannot write %s", path);
    if (f) fclose(f);
    free(row);
    return;
  }
  if (kind == BIG_JPEG || kind == BIG_JPEG_PROGRESSIVE) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    if (kind == BIG_JPEG_PROGRESSIVE) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
      const int y = (int)c.next_scanline;
      for (int x = 0; x < w; x++)
        for (int k = 0; k < 3; k++) row[(size_t)x * 3 + k] = big_px(x, y, k, w, h);
      JSAMPROW r = row;
      jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
  } else {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (!png || !info || setjmp(png_jmpbuf(png))) {
      check(0, "cannot write PNG %s", path);
      if (png) png_destroy_write_struct(&png, &info);
      fclose(f);
      free(row);
      return;
    }
    png_init_io(png, f);
    png_set_compression_level(png, 1);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB,
                 kind == BIG_PNG_INTERLACED ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    const int passes = png_set_interlace_handling(png);
    for (int pass = 0; pass < passes; pass++)
      for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
          for (int k = 0; k < 3; k++) row[(size_t)x * 3 + k] = big_px(x, y, k, w, h);
        png_write_row(png, row);
      }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
  }
  fclose(f);
  free(row);
}

/* The whole image as libjpeg decodes it (as the decoder is set up), for references. */
static unsigned char *full_jpeg(const char *path, int *w, int *h) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  struct jpeg_decompress_struct c;
  struct jpeg_error_mgr jerr;
  c.err = jpeg_std_error(&jerr);
  jpeg_create_decompress(&c);
  jpeg_stdio_src(&c, f);
  jpeg_read_header(&c, TRUE);
  c.out_color_space = JCS_RGB;
  c.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&c);
  *w = (int)c.output_width;
  *h = (int)c.output_height;
  unsigned char *img = malloc((size_t)*w * *h * 3);
  while (img && c.output_scanline < c.output_height) {
    JSAMPROW r = img + (size_t)c.output_scanline * *w * 3;
    jpeg_read_scanlines(&c, &r, 1);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
  fclose(f);
  return img;
}

/* tf.image.resize(bilinear) of a whole image (img, or big_px() when NULL) in
 * double precision, rounded: the full-size reference. */
static void ref_resize_full(const unsigned char *img, int w, int h, int size, unsigned char *out) {
  for (int y = 0; y < size; y++)
    for (int x = 0; x < size; x++)
      for (int c = 0; c < 3; c++) {
        double fx = (x + 0.5) * ((double)w / size) - 0.5, fy = (y + 0.5) * ((double)h / size) - 0.5;
        double flx = floor(fx), fly = floor(fy);
        int x0 = flx < 0 ? 0 : (int)flx, x1 = (int)ceil(fx) > w - 1 ? w - 1 : (int)ceil(fx);
        int y0 = fly < 0 ? 0 : (int)fly, y1 = (int)ceil(fy) > h - 1 ? h - 1 : (int)ceil(fy);
#define PX(xx, yy) (img ? img[((size_t)(yy)*w + (xx)) * 3 + c] : big_px(xx, yy, c, w, h))
        /* img: every row written by full_jpeg (the analyzer supposes none was) */
        // NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Assign)
        double tl = PX(x0, y0), tr = PX(x1, y0), bl = PX(x0, y1), br = PX(x1, y1);
#undef PX
        double top = tl + (tr - tl) * (fx - flx), bot = bl + (br - bl) * (fx - flx);
        double v = floor(top + (bot - top) * (fy - fly) + 0.5);
        out[((size_t)y * size + x) * 3 + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
      }
}

/* Decodes examples [0, n) of p through a loader of `threads` threads, one batch. */
static int load_all(const clt_photos *p, int n, int threads, unsigned char *out, clt_err *e) {
  const size_t img = (size_t)clt_photos_image_size(p) * clt_photos_image_size(p) * 3;
  clt_loader *l = NULL;
  int order[16];
  for (int i = 0; i < n; i++) order[i] = i;
  int rc = clt_loader_create(p, 1, n, 1, threads, 0, &l, e);
  if (rc == CLT_OK) rc = clt_loader_start(l, order, n, n, e);
  clt_photo_batch b;
  if (rc == CLT_OK) rc = clt_loader_get(l, 0, &b, NULL, e);
  if (rc == CLT_OK) {
    memcpy(out, b.pixels, img * n);
    clt_loader_put(l, 0);
  }
  clt_loader_destroy(l);
  return rc;
}

/* Every image of `got` within 1 of the reference (float against double rounding). */
static void check_close(const unsigned char *got, const unsigned char *want, int n, int size,
                        const char *what) {
  int worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < (size_t)n * size * size * 3; i++) {
    int d = abs(got[i] - want[i % ((size_t)size * size * 3)]);
    if (d > worst) worst = d;
    bad += d > 1;
  }
  check(bad == 0, "%s: %zu values more than 1 from the full-size reference (worst %d)", what, bad,
        worst);
}

/* A PNG bomb is refused from its header, naming the file, its size and the limit,
 * with nothing big allocated; the limit is Pillow's, can be raised, is strict (an
 * image of exactly the limit passes) and is kept by a subset from its opening. */
void test_pixel_limit(void) {
  clt_err e = {0};
  clt_photos *p = NULL;
  check(clt_photos_max_pixels() == 178956970LL, "default pixel limit %lld, want 178956970",
        clt_photos_max_pixels());
  write_spec(tpath("bomb/a/ok.png"), &specs[0]);
  const char *bomb = tpath("bomb/b/zbomb.png");
  write_blank_png(bomb, 20000, 10000); /* 600 MB as RGB */
  int rc = clt_photos_open(tpath("bomb"), 16, 0.0, 1, &p, NULL, &e);
  check(rc == CLT_OK && clt_photos_count(p) == 2, "open bomb folder: %s", rc ? e.msg : "count");
  if (rc != CLT_OK) return;
  unsigned char rgb[16 * 16 * 3 * 2];
  char want[512];
  snprintf(want, sizeof want,
           "file %s: 20000x10000 = 200000000 pixels exceeds the limit of 178956970 (a "
           "decompression bomb?); raise it with --max-image-pixels",
           bomb);
  peak_reset();
  rc = clt_photos_decode(p, 1, rgb, &e);
  check(rc == CLT_ERR_FORMAT && strcmp(e.msg, want) == 0, "PNG bomb refused: rc %d, %s", rc,
        rc ? e.msg : "decoded");
  check_peak("refusing a 20000x10000 PNG", 8);
  if (verbose) printf("  expected error (PNG bomb): %s\n", e.msg);

  /* In a pass it stops the pass like a corrupt file: steps before it arrive. */
  clt_loader *l = NULL;
  rc = clt_loader_create(p, 1, 1, 2, 2, 0, &l, &e);
  check(rc == CLT_OK, "loader create (bomb): %s", rc ? e.msg : "created");
  if (rc == CLT_OK) {
    int order[2] = {0, 1};
    clt_photo_batch b;
    rc = clt_loader_start(l, order, 2, 1, &e);
    if (rc == CLT_OK) rc = clt_loader_get(l, 0, &b, NULL, &e);
    check(rc == CLT_OK, "bomb pass: step 0: %s", rc ? e.msg : "arrives");
    rc = clt_loader_get(l, 1, &b, NULL, &e);
    check(rc != CLT_OK && strcmp(e.msg, want) == 0, "bomb pass: step 1 fails: %s",
          rc ? e.msg : "it arrived");
    clt_loader_destroy(l);
  }
  clt_photos_free(p);
  p = NULL;

  /* Raised, the same file decodes: row by row, without its 600 MB. */
  clt_photos_set_max_pixels(200000000);
  rc = clt_photos_open(tpath("bomb"), 16, 0.0, 1, &p, NULL, &e);
  if (rc == CLT_OK) {
    peak_reset();
    rc = clt_photos_decode(p, 1, rgb, &e);
    check_peak("decoding a 20000x10000 PNG under a raised limit", 16);
    int zeros = 1;
    for (int i = 0; i < 16 * 16 * 3; i++) zeros &= rgb[i] == 0;
    check(rc == CLT_OK && zeros, "raised limit: the bomb decodes to black: %s",
          rc ? e.msg : "pixels");
    clt_photos_free(p);
    p = NULL;
  }
  check(rc == CLT_OK, "raised limit: %s", rc ? e.msg : "decoded");

  /* Strict: exactly the limit passes (ok.png is 37x23 = 851), one pixel more does not;
   * JPEGs are checked from their header too (G.JPEG is 128x96). */
  clt_photos_set_max_pixels(851);
  rc = clt_photos_open(tpath("bomb"), 16, 0.0, 1, &p, NULL, &e);
  if (rc == CLT_OK) rc = clt_photos_decode(p, 0, rgb, &e);
  check(rc == CLT_OK, "an image of exactly the limit decodes: %s", rc ? e.msg : "yes");
  clt_photos_free(p);
  p = NULL;
  clt_photos_set_max_pixels(850);
  rc = clt_photos_open(tpath("bomb"), 16, 0.0, 1, &p, NULL, &e);
  clt_photos_set_max_pixels(0); /* the default again; the subset keeps 850 */
  check(clt_photos_max_pixels() == 178956970LL, "set_max_pixels(0) restores the default");
  if (rc == CLT_OK) {
    rc = clt_photos_decode(p, 0, rgb, &e);
    check(rc == CLT_ERR_FORMAT && strstr(e.msg, "37x23 = 851 pixels exceeds the limit of 850"),
          "a subset keeps the limit it was opened with: %s", rc ? e.msg : "decoded");
    clt_photos_free(p);
    p = NULL;
  }
  clt_photos_set_max_pixels(128 * 96 - 1);
  rc = clt_photos_open(tpath("photos"), 16, 0.0, 1, &p, NULL, &e);
  clt_photos_set_max_pixels(0);
  if (rc == CLT_OK) {
    rc = clt_photos_decode(p, 4, rgb, &e); /* banana/G.JPEG */
    check(rc == CLT_ERR_FORMAT && strstr(e.msg, "G.JPEG: 128x96 = 12288 pixels exceeds the "
                                                "limit of 12287 (a decompression bomb?)"),
          "JPEG over the limit refused from its header: %s", rc ? e.msg : "decoded");
    clt_photos_free(p);
  }
}

/* Big JPEGs and PNGs decode a row at a time: four threads decoding four 24 MP
 * images together stay far below one image's 72 MB, and give what resizing the
 * whole image gives. */
void test_big_images(void) {
  const int w = 6000, h = 4000, size = 64, n = 4;
  const size_t img = (size_t)size * size * 3;
  unsigned char *got = malloc(img * n), *want = malloc(img);
  const char *dirs[2] = {"bigjpeg", "bigpng"};
  for (int k = 0; k < 2; k++) {
    const char *first = tpath("%s/a/0.%s", dirs[k], k ? "png" : "jpg");
    write_big(first, k ? BIG_PNG : BIG_JPEG, w, h);
    for (int i = 1; i < n; i++) {
      const char *copy = tpath("%s/a/%d.%s", dirs[k], i, k ? "png" : "jpg");
      if (link(first, copy) != 0) write_big(copy, k ? BIG_PNG : BIG_JPEG, w, h);
    }
    clt_photos *p = NULL;
    clt_err e = {0};
    int rc = clt_photos_open(tpath("%s", dirs[k]), size, 0.0, 1, &p, NULL, &e);
    check(rc == CLT_OK && clt_photos_count(p) == n, "open %s: %s", dirs[k], rc ? e.msg : "count");
    if (rc != CLT_OK) continue;
    char what[96];
    snprintf(what, sizeof what, "four %dx%d %s decoded by four threads", w, h,
             k ? "PNGs" : "JPEGs");
    peak_reset();
    rc = load_all(p, n, 4, got, &e);
    check(rc == CLT_OK, "%s: %s", what, rc ? e.msg : "decoded");
    check_peak(what, 32);
    if (rc == CLT_OK) {
      int fw = w, fh = h;
      unsigned char *full = k ? NULL : full_jpeg(first, &fw, &fh);
      ref_resize_full(full, fw, fh, size, want);
      free(full);
      check_close(got, want, n, size, what);
    }
    clt_photos_free(p);
  }
  free(got);
  free(want);
}

/* Progressive JPEGs and interlaced PNGs need the whole image: under a budget of
 * about one image, four threads decode them one at a time. A budget smaller than
 * any image still decodes everything (each alone). */
void test_budget(void) {
  const int w = 3000, h = 2000, size = 32, n = 6; /* 18 MB a whole image */
  const size_t img = (size_t)size * size * 3;
  unsigned char *got = malloc(img * n), *want = malloc(img * n);
  const char *jpg = tpath("budget/a/0.jpg"), *png = tpath("budget/a/3.png");
  write_big(jpg, BIG_JPEG_PROGRESSIVE, w, h);
  write_big(png, BIG_PNG_INTERLACED, w, h);
  for (int i = 1; i < 3; i++) {
    const char *j = tpath("budget/a/%d.jpg", i), *q = tpath("budget/a/%d.png", 3 + i);
    if (link(jpg, j) != 0) write_big(j, BIG_JPEG_PROGRESSIVE, w, h);
    if (link(png, q) != 0) write_big(q, BIG_PNG_INTERLACED, w, h);
  }
  int fw = w, fh = h;
  unsigned char *full = full_jpeg(jpg, &fw, &fh);
  ref_resize_full(full, fw, fh, size, want);
  free(full);
  ref_resize_full(NULL, w, h, size, want + img);
  clt_photos *p = NULL;
  clt_err e = {0};
  int rc = clt_photos_open(tpath("budget"), size, 0.0, 1, &p, NULL, &e);
  check(rc == CLT_OK && clt_photos_count(p) == n, "open budget: %s", rc ? e.msg : "count");
  if (rc == CLT_OK) {
    clt_photos_set_decode_budget((size_t)24 << 20);
    peak_reset();
    rc = load_all(p, n, 4, got, &e);
    check(rc == CLT_OK, "progressive JPEGs and interlaced PNGs under a 24 MiB budget: %s",
          rc ? e.msg : "decoded");
    check_peak("six 3000x2000 progressive JPEGs and interlaced PNGs, four threads, 24 MiB budget",
               40);
    if (rc == CLT_OK) {
      check_close(got, want, 3, size, "progressive JPEGs under a budget");
      check_close(got + 3 * img, want + img, 3, size, "interlaced PNGs under a budget");
    }
    clt_photos_set_decode_budget(1); /* every image is bigger: each decoded alone */
    rc = load_all(p, n, 4, got, &e);
    check(rc == CLT_OK, "a budget smaller than every image: %s", rc ? e.msg : "decoded");
    if (rc == CLT_OK) check_close(got, want, 3, size, "progressive JPEGs, each alone");
    clt_photos_set_decode_budget(0);
    clt_photos_free(p);
  }
  free(got);
  free(want);
}
