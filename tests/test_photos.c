/* Tests of photo folders and the decode loader (datasets/photos.c) on a folder written
 * here with libjpeg and libpng: odd sizes, every PNG colour type the decoder converts,
 * RGB and grayscale JPEGs, ignored files and directories, validation splits, the
 * loader with two consumers and its cache, the bad cases, and memory: a PNG bomb
 * refused from its header (the pixel limit), big JPEGs and PNGs decoded with a bounded
 * peak RSS, progressive and interlaced ones under the decoding budget. Prints "ok: ..."
 * or "FAIL: ..." per check and "N passed, M failed" last; exits non-zero if anything
 * failed. VERBOSE=1 prints each expected error message. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, nanosleep, link */

#include "check.h"
#include "photos.h"
#include "rng.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

static int verbose;
static char tmpdir[64];

/* A non-zero status whose message names `needle` (a path, usually). */
static void check_err(int rc, const clt_err *e, const char *needle, const char *what) {
  check(rc != CLT_OK, "%s: expected an error, got success", what);
  if (rc != CLT_OK) {
    check(strstr(e->msg, needle) != NULL, "%s: message does not name %s: %s", what, needle, e->msg);
    if (verbose) printf("  expected error (%s): %s\n", what, e->msg);
  }
}

static const char *tpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *tpath(const char *fmt, ...) {
  static char bufs[64][512];
  static int next;
  char *b = bufs[next++ % 64];
  char rel[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rel, sizeof rel, fmt, ap);
  va_end(ap);
  snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, rel);
  return b;
}

static void mkdirs(const char *path) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *c = buf + 1; *c; c++)
    if (*c == '/') {
      *c = '\0';
      mkdir(buf, 0755);
      *c = '/';
    }
  mkdir(buf, 0755);
}

/* Creates the parent directory of path. */
static void mkparent(const char *path) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", path);
  char *slash = strrchr(buf, '/');
  if (slash) {
    *slash = '\0';
    mkdirs(buf);
  }
}

static void write_raw(const char *path, const void *p, size_t n) {
  mkparent(path);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n) check(0, "cannot write %s", path);
  if (f) fclose(f);
}

static unsigned char *read_raw(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)len);
  *n = fread(p, 1, (size_t)len, f);
  fclose(f);
  return p;
}

/* data: rows of w * channels samples, 8-bit (or 16-bit big-endian when depth 16). */
static void write_png_ex(const char *path, int w, int h, int color_type, int depth,
                         const unsigned char *data, const png_color *palette, int npalette,
                         int interlace) {
  mkparent(path);
  FILE *f = fopen(path, "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (!f || !png || !info || setjmp(png_jmpbuf(png))) {
    check(0, "cannot write PNG %s", path);
    if (png) png_destroy_write_struct(&png, &info);
    if (f) fclose(f);
    return;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color_type,
               interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (palette) {
    png_set_PLTE(png, info, palette, npalette);
    png_byte trans[1] = {0}; /* entry 0 transparent: a tRNS chunk to drop */
    png_set_tRNS(png, info, trans, 1, NULL);
  }
  png_write_info(png, info);
  int passes = png_set_interlace_handling(png);
  int ch = color_type == PNG_COLOR_TYPE_RGB          ? 3
           : color_type == PNG_COLOR_TYPE_RGBA       ? 4
           : color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                     : 1;
  size_t stride = ((size_t)w * ch * depth + 7) / 8;
  for (int pass = 0; pass < passes; pass++)
    for (int y = 0; y < h; y++) png_write_row(png, data + stride * y);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(f);
}

static void write_png(const char *path, int w, int h, int color_type, int depth,
                      const unsigned char *data, const png_color *palette, int npalette) {
  write_png_ex(path, w, h, color_type, depth, data, palette, npalette, 0);
}

/* comps 1 (gray), 3 (RGB) or 4 (CMYK, written with libjpeg's Adobe marker). */
static void write_jpeg_ex(const char *path, int w, int h, int comps, const unsigned char *data,
                          int quality, int progressive) {
  mkparent(path);
  FILE *f = fopen(path, "wb");
  if (!f) {
    check(0, "cannot write JPEG %s", path);
    return;
  }
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr jerr;
  c.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = comps;
  c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(data + (size_t)c.next_scanline * w * comps);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  fclose(f);
}

static void write_jpeg(const char *path, int w, int h, int comps, const unsigned char *data,
                       int quality) {
  write_jpeg_ex(path, w, h, comps, data, quality, 0);
}

/* ------------------------------------------------------------------------- */
/* The photo folder                                                          */

enum { PNG_RGB, PNG_RGBA, PNG_GRAY, PNG_PAL, PNG_RGB16, PNG_GRAY16, JPG_RGB, JPG_GRAY };

typedef struct spec {
  const char *rel; /* under photos/ */
  int kind, w, h;
  int grad; /* 1: gradient (PNG_RGB only), else constant rgb */
  unsigned char rgb[3];
  int label;
} spec;

/* In the order the folder must list them: (class, directory, strcmp file name). */
static const spec specs[] = {
    {"apple/a_const.png", PNG_RGB, 37, 23, 0, {200, 30, 90}, 0},
    {"apple/b_gray.jpg", JPG_GRAY, 5, 61, 0, {77, 77, 77}, 0},
    {"apple/c_grad.png", PNG_RGB, 37, 23, 1, {0, 0, 0}, 0},
    {"apple/d_rgba.png", PNG_RGBA, 128, 96, 0, {10, 220, 130}, 0},
    {"banana/G.JPEG", JPG_RGB, 128, 96, 0, {40, 120, 250}, 1},
    {"banana/e_pal.png", PNG_PAL, 5, 61, 0, {12, 34, 56}, 1},
    {"banana/f16.png", PNG_RGB16, 37, 23, 0, {250, 5, 128}, 1},
    {"cherry/h.jpg", JPG_RGB, 37, 23, 0, {90, 90, 200}, 2},
    {"cherry/i_gray.png", PNG_GRAY, 128, 96, 0, {180, 180, 180}, 2},
    {"cherry/t_grad.png", PNG_RGB, 5, 61, 1, {0, 0, 0}, 2},
    {"cherry/sub/k.png", PNG_GRAY16, 37, 23, 0, {33, 33, 33}, 2},
};
#define NSPECS ((int)(sizeof specs / sizeof specs[0]))
static const char *class_names[] = {"apple", "banana", "cherry"};

static unsigned char grad_px(int x, int y, int c, int w, int h) {
  switch (c) {
    case 0:
      return (unsigned char)(w > 1 ? x * 255 / (w - 1) : 0);
    case 1:
      return (unsigned char)(h > 1 ? y * 255 / (h - 1) : 0);
    default:
      return (unsigned char)((x * 13 + y * 7) % 256);
  }
}

static void write_spec(const char *path, const spec *s) {
  int w = s->w, h = s->h;
  unsigned char *d = malloc((size_t)w * h * 8);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      size_t i = (size_t)y * w + x;
      switch (s->kind) {
        case PNG_RGB:
        case JPG_RGB:
          for (int c = 0; c < 3; c++) d[i * 3 + c] = s->grad ? grad_px(x, y, c, w, h) : s->rgb[c];
          break;
        case PNG_RGBA:
          for (int c = 0; c < 3; c++) d[i * 4 + c] = s->rgb[c];
          d[i * 4 + 3] = (unsigned char)(x * 2); /* alpha varies; must be dropped, not composited */
          break;
        case PNG_GRAY:
        case JPG_GRAY:
          d[i] = s->rgb[0];
          break;
        case PNG_PAL:
          d[i] = 1;
          break;
        case PNG_RGB16:
          for (int c = 0; c < 3; c++) {
            unsigned v = s->rgb[c] * 257u; /* scales back to exactly rgb[c] */
            d[(size_t)i * 6 + (size_t)c * 2] = (unsigned char)(v >> 8);
            d[(size_t)i * 6 + (size_t)c * 2 + 1] = (unsigned char)v;
          }
          break;
        case PNG_GRAY16: {
          unsigned v = s->rgb[0] * 257u;
          d[i * 2] = (unsigned char)(v >> 8);
          d[i * 2 + 1] = (unsigned char)v;
          break;
        }
      }
    }
  png_color pal[3] = {{255, 0, 0}, {s->rgb[0], s->rgb[1], s->rgb[2]}, {0, 0, 255}};
  switch (s->kind) {
    case PNG_RGB:
      write_png(path, w, h, PNG_COLOR_TYPE_RGB, 8, d, NULL, 0);
      break;
    case PNG_RGBA:
      write_png(path, w, h, PNG_COLOR_TYPE_RGBA, 8, d, NULL, 0);
      break;
    case PNG_GRAY:
      write_png(path, w, h, PNG_COLOR_TYPE_GRAY, 8, d, NULL, 0);
      break;
    case PNG_PAL:
      write_png(path, w, h, PNG_COLOR_TYPE_PALETTE, 8, d, pal, 3);
      break;
    case PNG_RGB16:
      write_png(path, w, h, PNG_COLOR_TYPE_RGB, 16, d, NULL, 0);
      break;
    case PNG_GRAY16:
      write_png(path, w, h, PNG_COLOR_TYPE_GRAY, 16, d, NULL, 0);
      break;
    case JPG_RGB:
      write_jpeg(path, w, h, 3, d, 95);
      break;
    case JPG_GRAY:
      write_jpeg(path, w, h, 1, d, 95);
      break;
  }
  free(d);
}

static void make_folder(void) {
  for (int i = 0; i < NSPECS; i++) write_spec(tpath("photos/%s", specs[i].rel), &specs[i]);
  const char *txt = "not an image\n";
  write_raw(tpath("photos/notes.txt"), txt, strlen(txt));        /* top-level file: ignored */
  write_raw(tpath("photos/apple/readme.txt"), txt, strlen(txt)); /* non-image: ignored */
  write_raw(tpath("photos/banana/photo.bmp"), txt,
            strlen(txt));                                     /* unsupported extension: ignored */
  write_spec(tpath("photos/.hidden_class/x.png"), &specs[0]); /* hidden class: ignored */
  write_spec(tpath("photos/cherry/.ipynb_checkpoints/y.png"),
             &specs[0]); /* hidden subdir: ignored */
}

/* tf.image.resize(bilinear, half_pixel_centers) in double precision, rounded. */
static int ref_resize(int x, int y, int c, int w, int h, int size) {
  double fx = (x + 0.5) * ((double)w / size) - 0.5, fy = (y + 0.5) * ((double)h / size) - 0.5;
  double flx = floor(fx), fly = floor(fy);
  int x0 = flx < 0 ? 0 : (int)flx, x1 = (int)ceil(fx) > w - 1 ? w - 1 : (int)ceil(fx);
  int y0 = fly < 0 ? 0 : (int)fly, y1 = (int)ceil(fy) > h - 1 ? h - 1 : (int)ceil(fy);
  double xl = fx - flx, yl = fy - fly;
  double tl = grad_px(x0, y0, c, w, h), tr = grad_px(x1, y0, c, w, h);
  double bl = grad_px(x0, y1, c, w, h), br = grad_px(x1, y1, c, w, h);
  double top = tl + (tr - tl) * xl, bot = bl + (br - bl) * xl;
  return (int)floor(top + (bot - top) * yl + 0.5);
}

static int spec_of(const char *path) {
  for (int i = 0; i < NSPECS; i++) {
    size_t lp = strlen(path), ls = strlen(specs[i].rel);
    if (lp > ls && strcmp(path + lp - ls, specs[i].rel) == 0 && path[lp - ls - 1] == '/') return i;
  }
  return -1;
}

static void test_listing(void) {
  clt_photos *tr = NULL, *va = NULL;
  clt_err e = {0};
  int rc = clt_photos_open(tpath("photos/"), 16, 0.0, 1, &tr, &va, &e); /* trailing '/' is fine */
  check(rc == CLT_OK, "open photos: %s", e.msg);
  if (rc != CLT_OK) return;
  check(va == NULL, "validation subset without a split");
  check(clt_photos_classes(tr) == 3, "classes %d, want 3", clt_photos_classes(tr));
  for (int c = 0; c < 3 && c < clt_photos_classes(tr); c++)
    check(strcmp(clt_photos_class_name(tr, c), class_names[c]) == 0, "class %d is %s, want %s", c,
          clt_photos_class_name(tr, c), class_names[c]);
  check(clt_photos_count(tr) == NSPECS, "count %d, want %d", clt_photos_count(tr), NSPECS);
  check(clt_photos_image_size(tr) == 16, "image size %d", clt_photos_image_size(tr));
  for (int i = 0; i < NSPECS && i < clt_photos_count(tr); i++) {
    const char *want = tpath("photos/%s", specs[i].rel);
    check(strcmp(clt_photos_path(tr, i), want) == 0, "example %d is %s, want %s", i,
          clt_photos_path(tr, i), want);
    check(clt_photos_label(tr, i) == specs[i].label, "example %d label %d, want %d", i,
          clt_photos_label(tr, i), specs[i].label);
  }
  check(clt_photos_is_folder(tpath("photos")), "is_folder(photos) false");
  clt_photos_free(tr);
}

static void test_pixels(int size) {
  clt_photos *tr = NULL;
  clt_err e = {0};
  int rc = clt_photos_open(tpath("photos"), size, 0.0, 1, &tr, NULL, &e);
  check(rc == CLT_OK, "open photos at %d: %s", size, e.msg);
  if (rc != CLT_OK) return;
  unsigned char *rgb = malloc((size_t)size * size * 3);
  for (int i = 0; i < clt_photos_count(tr); i++) {
    const spec *s = &specs[i];
    rc = clt_photos_decode(tr, i, rgb, &e);
    check(rc == CLT_OK, "decode %s at %d: %s", s->rel, size, e.msg);
    if (rc != CLT_OK) continue;
    int tol = s->kind == JPG_RGB || s->kind == JPG_GRAY ? 3 : 0, bad = 0, first = -1, got = 0,
        want = 0;
    for (int y = 0; y < size; y++)
      for (int x = 0; x < size; x++)
        for (int c = 0; c < 3; c++) {
          int v = rgb[((size_t)y * size + x) * 3 + c];
          int w = s->grad ? ref_resize(x, y, c, s->w, s->h, size) : s->rgb[c];
          int t = s->grad ? 1 : tol;
          if (abs(v - w) > t && bad++ == 0) {
            first = (y * size + x) * 3 + c;
            got = v;
            want = w;
          }
        }
    check(
        bad == 0,
        "%s (%dx%d) at %dx%d: %d values off, first at y %d x %d c %d: got %d want %d (tolerance %d)",
        s->rel, s->w, s->h, size, size, bad, first / 3 / size, first / 3 % size, first % 3, got,
        want, s->grad ? 1 : tol);
  }
  free(rgb);
  clt_photos_free(tr);
}

static void test_split(void) {
  clt_photos *a = NULL, *av = NULL, *b = NULL, *bv = NULL, *c = NULL, *cv = NULL;
  clt_err e = {0};
  int rc = clt_photos_open(tpath("photos"), 8, 0.3, 7, &a, &av, &e);
  check(rc == CLT_OK, "split 0.3 seed 7: %s", e.msg);
  rc |= clt_photos_open(tpath("photos"), 8, 0.3, 7, &b, &bv, &e);
  check(rc == CLT_OK, "split 0.3 seed 7 again: %s", e.msg);
  rc |= clt_photos_open(tpath("photos"), 8, 0.3, 8, &c, &cv, &e);
  check(rc == CLT_OK, "split 0.3 seed 8: %s", e.msg);
  if (rc == CLT_OK) {
    int nv = (int)floor(0.3 * NSPECS);
    check(clt_photos_count(av) == nv && clt_photos_count(a) == NSPECS - nv,
          "split sizes %d + %d, want %d + %d", clt_photos_count(a), clt_photos_count(av),
          NSPECS - nv, nv);
    check(clt_photos_classes(av) == 3 && strcmp(clt_photos_class_name(av, 2), "cherry") == 0,
          "validation subset keeps all class names");
    int same = 1, differs = 0, seen[NSPECS] = {0};
    for (int i = 0; i < NSPECS; i++) {
      const clt_photos *x = i < clt_photos_count(a) ? a : av, *y = i < clt_photos_count(b) ? b : bv;
      const clt_photos *z = i < clt_photos_count(c) ? c : cv;
      int k = i < clt_photos_count(a) ? i : i - clt_photos_count(a);
      same &= strcmp(clt_photos_path(x, k), clt_photos_path(y, k)) == 0;
      differs |= strcmp(clt_photos_path(x, k), clt_photos_path(z, k)) != 0;
      int sp = spec_of(clt_photos_path(x, k));
      check(sp >= 0, "split lists an unknown file %s", clt_photos_path(x, k));
      if (sp < 0) continue;
      seen[sp]++;
      check(clt_photos_label(x, k) == specs[sp].label, "split: %s has label %d, want %d",
            specs[sp].rel, clt_photos_label(x, k), specs[sp].label);
    }
    check(same, "same seed gave a different split");
    check(differs, "seeds 7 and 8 gave the same order");
    for (int i = 0; i < NSPECS; i++)
      check(seen[i] == 1, "split: %s appears %d times across training and validation", specs[i].rel,
            seen[i]);
  }
  clt_photos_free(a);
  clt_photos_free(av);
  clt_photos_free(b);
  clt_photos_free(bv);
  clt_photos_free(c);
  clt_photos_free(cv);

  /* floor(0.05 * 11) = 0: an empty validation subset. */
  clt_photos *t = NULL, *v = NULL;
  rc = clt_photos_open(tpath("photos"), 8, 0.05, 7, &t, &v, &e);
  check_err(rc, &e, "photos", "split leaving no validation file");
  check(t == NULL && v == NULL, "failed open left subsets");
  rc = clt_photos_open(tpath("photos"), 8, 1.0, 7, &t, &v, &e);
  check_err(rc, &e, "photos", "split 1.0");
  rc = clt_photos_open(tpath("photos"), 8, -0.1, 7, &t, &v, &e);
  check_err(rc, &e, "photos", "split -0.1");
  rc = clt_photos_open(tpath("photos"), 0, 0.0, 7, &t, &v, &e);
  check_err(rc, &e, "photos", "image size 0");
  rc = clt_photos_open(tpath("photos"), 8, 0.99, 7, &t, &v,
                       &e); /* floor(10.89) = 10: one left to train */
  check(rc == CLT_OK && clt_photos_count(t) == 1 && clt_photos_count(v) == NSPECS - 1,
        "split 0.99: %s", rc ? e.msg : "wrong sizes");
  clt_photos_free(t);
  clt_photos_free(v);
}

/* Less common encodings, in their own folder: CMYK JPEG (Adobe, inverted), progressive
 * JPEG, interlaced PNG, 1-bit grayscale PNG. */
static void test_extra_formats(void) {
  const int w = 29, h = 17, size = 12;
  unsigned char *d = malloc((size_t)w * h * 4);
  for (int i = 0; i < w * h; i++)
    memcpy(d + (size_t)i * 4, (unsigned char[4]){200, 100, 50, 230}, 4);
  write_jpeg_ex(tpath("extra/a/1_cmyk.jpg"), w, h, 4, d, 95, 0);
  for (int i = 0; i < w * h; i++) memcpy(d + (size_t)i * 3, (unsigned char[3]){20, 200, 140}, 3);
  write_jpeg_ex(tpath("extra/a/2_progressive.jpg"), w, h, 3, d, 95, 1);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++) d[((size_t)y * w + x) * 3 + c] = grad_px(x, y, c, w, h);
  write_png_ex(tpath("extra/a/3_interlaced.png"), w, h, PNG_COLOR_TYPE_RGB, 8, d, NULL, 0, 1);
  memset(d, 0xff, (size_t)w * h); /* 1 bit per pixel, all set: white */
  write_png(tpath("extra/a/4_gray1.png"), w, h, PNG_COLOR_TYPE_GRAY, 1, d, NULL, 0);
  free(d);

  clt_photos *p = NULL;
  clt_err e = {0};
  int rc = clt_photos_open(tpath("extra"), size, 0.0, 1, &p, NULL, &e);
  check(rc == CLT_OK && clt_photos_count(p) == 4, "open extra: %s", rc ? e.msg : "count");
  if (rc != CLT_OK) return;
  /* Adobe CMYK is stored inverted: r = k * c / 255 (as TensorFlow converts it). */
  const int want[4][3] = {{200 * 230 / 255, 100 * 230 / 255, 50 * 230 / 255},
                          {20, 200, 140},
                          {-1},
                          {255, 255, 255}};
  const int tol[4] = {4, 3, 1, 0};
  unsigned char rgb[12 * 12 * 3];
  for (int i = 0; i < 4 && i < clt_photos_count(p); i++) {
    rc = clt_photos_decode(p, i, rgb, &e);
    check(rc == CLT_OK, "decode %s: %s", clt_photos_path(p, i), e.msg);
    if (rc != CLT_OK) continue;
    int bad = 0, got = 0, exp = 0;
    for (int y = 0; y < size; y++)
      for (int x = 0; x < size; x++)
        for (int c = 0; c < 3; c++) {
          int v = rgb[(y * size + x) * 3 + c],
              t = want[i][0] < 0 ? ref_resize(x, y, c, w, h, size) : want[i][c];
          if (abs(v - t) > tol[i] && bad++ == 0) {
            got = v;
            exp = t;
          }
        }
    check(bad == 0, "%s: %d values off (first: got %d want %d)", clt_photos_path(p, i), bad, got,
          exp);
  }
  clt_photos_free(p);
}

/* ------------------------------------------------------------------------- */
/* Loader                                                                     */

typedef struct consumer_arg {
  clt_loader *l;
  const clt_photos *p;
  const int *order;
  int count, batch;
  const unsigned char *expect; /* count of p images, decoded one by one */
  size_t img;
  int bad, rc;
  char msg[512];
} consumer_arg;

static void *consume_pass(void *arg) {
  consumer_arg *a = arg;
  clt_err e = {0};
  int steps = (a->count + a->batch - 1) / a->batch;
  for (int s = 0; s < steps; s++) {
    clt_photo_batch b;
    double waited = -1;
    int rc = clt_loader_get(a->l, s, &b, &waited, &e);
    if (rc != CLT_OK) {
      a->rc = rc;
      snprintf(a->msg, sizeof a->msg, "step %d: %.480s", s, e.msg);
      return NULL;
    }
    int want = a->count - s * a->batch < a->batch ? a->count - s * a->batch : a->batch;
    if (b.count != want || waited < 0) {
      a->bad++;
      snprintf(a->msg, sizeof a->msg, "step %d: %d images, want %d (waited %g)", s, b.count, want,
               waited);
    }
    for (int k = 0; k < b.count && k < want; k++) {
      int idx = a->order[s * a->batch + k];
      if (b.labels[k] != clt_photos_label(a->p, idx) ||
          memcmp(b.pixels + (size_t)k * a->img, a->expect + (size_t)idx * a->img, a->img) != 0) {
        a->bad++;
        snprintf(a->msg, sizeof a->msg,
                 "step %d image %d (example %d): label %d want %d, or pixels differ", s, k, idx,
                 b.labels[k], clt_photos_label(a->p, idx));
      }
    }
    clt_loader_put(a->l, s);
  }
  return NULL;
}

static void run_pass(clt_loader *l, const clt_photos *p, const int *order, int count, int batch,
                     const unsigned char *expect, int consumers, const char *what) {
  clt_err e = {0};
  int rc = clt_loader_start(l, order, count, batch, &e);
  check(rc == CLT_OK, "%s: start: %s", what, e.msg);
  if (rc != CLT_OK) return;
  consumer_arg args[4];
  pthread_t tids[4];
  size_t size = (size_t)clt_photos_image_size(p);
  for (int c = 0; c < consumers; c++) {
    args[c] = (consumer_arg){l, p, order, count, batch, expect, size * size * 3, 0, 0, ""};
    pthread_create(&tids[c], NULL, consume_pass, &args[c]);
  }
  for (int c = 0; c < consumers; c++) {
    pthread_join(tids[c], NULL);
    check(args[c].rc == CLT_OK && args[c].bad == 0, "%s: consumer %d: %s", what, c, args[c].msg);
  }
}

typedef struct blocked_arg {
  clt_loader *l;
  int step, rc, done;
  char msg[512];
} blocked_arg;

static void *get_blocked(void *arg) {
  blocked_arg *a = arg;
  clt_err e = {0};
  clt_photo_batch b;
  a->rc = clt_loader_get(a->l, a->step, &b, NULL, &e);
  snprintf(a->msg, sizeof a->msg, "%.500s", e.msg);
  __atomic_store_n(&a->done, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

static void test_loader(void) {
  const int size = 16, n = NSPECS;
  const size_t img = (size_t)size * size * 3;
  clt_photos *p = NULL;
  clt_err e = {0};
  if (clt_photos_open(tpath("photos"), size, 0.0, 1, &p, NULL, &e) != CLT_OK) {
    check(0, "loader: open: %s", e.msg);
    return;
  }
  unsigned char *expect = malloc(img * n);
  for (int i = 0; i < n; i++)
    if (clt_photos_decode(p, i, expect + img * i, &e) != CLT_OK)
      check(0, "loader: decode %d: %s", i, e.msg);
  int order1[NSPECS], order2[NSPECS];
  clt_epoch_order(3, 0, order1, n);
  clt_epoch_order(3, 1, order2, n);

  /* Whole subset cached: the second pass decodes nothing. Batch 4 of 11: 4, 4, 3. */
  clt_loader *l = NULL;
  int rc = clt_loader_create(p, 2, 4, 2, 2, img * n, &l, &e);
  check(rc == CLT_OK, "loader create: %s", e.msg);
  if (rc == CLT_OK) {
    run_pass(l, p, order1, n, 4, expect, 2, "pass 1 (batch 4, 2 consumers)");
    check(clt_loader_decoded(l) == (size_t)n, "pass 1 decoded %zu images, want %d",
          clt_loader_decoded(l), n);
    run_pass(l, p, order2, n, 3, expect, 2, "pass 2 (batch 3, cached)");
    check(clt_loader_decoded(l) == (size_t)n,
          "pass 2 decoded %zu more images, want 0 (cache holds all)", clt_loader_decoded(l) - n);
    /* A pass that is not consumed blocks the next start, until cancelled. */
    rc = clt_loader_start(l, order1, n, 4, &e);
    clt_photo_batch b;
    if (rc == CLT_OK) rc = clt_loader_get(l, 0, &b, NULL, &e);
    check(rc == CLT_OK, "pass 3 start/get: %s", e.msg);
    rc = clt_loader_start(l, order1, n, 4, &e);
    check(rc != CLT_OK, "start while a pass is unconsumed succeeded");
    clt_loader_cancel(l);
    run_pass(l, p, order1, n, 4, expect, 2, "pass after cancel");
    clt_loader_destroy(l);
  }

  /* A cache for 5 images holds examples 0..4: the second pass decodes the other 6. */
  l = NULL;
  rc = clt_loader_create(p, 1, 4, 3, 0, img * 5 + img / 2, &l, &e);
  check(rc == CLT_OK, "loader create (partial cache): %s", e.msg);
  if (rc == CLT_OK) {
    run_pass(l, p, order1, n, 4, expect, 1, "partial cache pass 1");
    run_pass(l, p, order2, n, 4, expect, 1, "partial cache pass 2");
    check(clt_loader_decoded(l) == (size_t)(2 * n - 5), "partial cache: decoded %zu, want %d",
          clt_loader_decoded(l), 2 * n - 5);
    clt_loader_destroy(l);
  }

  /* Cancel wakes a consumer blocked on a step whose slot is still held (depth 1,
   * step 0 got and never put); destroy with a pass in progress does not hang. */
  l = NULL;
  rc = clt_loader_create(p, 1, 2, 1, 2, 0, &l, &e);
  check(rc == CLT_OK, "loader create (cancel): %s", e.msg);
  if (rc == CLT_OK) {
    clt_photo_batch b;
    rc = clt_loader_start(l, order1, n, 2, &e);
    if (rc == CLT_OK) rc = clt_loader_get(l, 0, &b, NULL, &e);
    check(rc == CLT_OK, "cancel test: start/get 0: %s", e.msg);
    blocked_arg ba = {l, 1, 0, 0, ""};
    pthread_t tid;
    pthread_create(&tid, NULL, get_blocked, &ba);
    struct timespec ts = {0, 100L * 1000 * 1000};
    nanosleep(&ts, NULL);
    check(!__atomic_load_n(&ba.done, __ATOMIC_SEQ_CST),
          "get(1) returned while step 0 was held (depth 1)");
    clt_loader_cancel(l);
    pthread_join(tid, NULL);
    check(ba.rc != CLT_OK && strstr(ba.msg, "cancel"), "blocked get after cancel: rc %d, %s", ba.rc,
          ba.msg);
    rc = clt_loader_get(l, 0, &b, NULL, &e);
    check(rc != CLT_OK, "get after cancel succeeded");
    rc = clt_loader_start(l, order2, n, 2, &e);
    if (rc == CLT_OK) rc = clt_loader_get(l, 0, &b, NULL, &e);
    check(rc == CLT_OK && b.count == 2 && memcmp(b.pixels, expect + img * order2[0], img) == 0,
          "pass after cancel: %s", rc ? e.msg : "wrong batch");
    clt_loader_destroy(l); /* step 0 not put, decoders waiting for the slot */
  }
  free(expect);
  clt_photos_free(p);
}

/* ------------------------------------------------------------------------- */
/* Bad folders                                                               */

static void test_bad(void) {
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
static void test_pixel_limit(void) {
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
static void test_big_images(void) {
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
static void test_budget(void) {
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

/* ------------------------------------------------------------------------- */

static void remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char child[1024];
      snprintf(child, sizeof child, "%s/%s", path, de->d_name);
      remove_tree(child);
    }
    if (d) closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

int main(void) {
  const char *v = getenv("VERBOSE"), *tmp = getenv("TMPDIR");
  verbose = v && *v == '1';
  const char *base = tmp ? tmp : "/tmp";
  snprintf(tmpdir, sizeof tmpdir, "%s/cltphotos.XXXXXX", base);
  if (strlen(base) > 40 || !mkdtemp(tmpdir)) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cltphotos.XXXXXX");
    if (!mkdtemp(tmpdir)) {
      perror("mkdtemp");
      return 1;
    }
  }
  make_folder();
  test_listing();
  test_pixels(16); /* down- and up-scaling: 37x23, 5x61, 128x96 */
  test_pixels(50);
  test_pixels(1);
  test_extra_formats();
  test_split();
  test_loader();
  test_bad();
  test_pixel_limit();
  test_big_images();
  test_budget();
  if (!check_failures()) remove_tree(tmpdir);
  else printf("left the test folder in %s\n", tmpdir);
  return check_summary();
}
