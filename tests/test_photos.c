/* Tests of photo folders and the decode loader (datasets/photos_*.c) on a folder written
 * here with libjpeg and libpng: odd sizes, every PNG colour type the decoder converts,
 * RGB and grayscale JPEGs, ignored files and directories, validation splits, the
 * loader with two consumers and its cache; test_photos_limits.c adds the bad cases,
 * and memory: a PNG bomb refused from its header (the pixel limit), big JPEGs and PNGs
 * decoded with a bounded peak RSS, progressive and interlaced ones under the decoding
 * budget. Prints "ok: ..." or "FAIL: ..." per check and "N passed, M failed" last;
 * exits non-zero if anything failed. VERBOSE=1 prints each expected error message. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, nanosleep, link */

#include "test_photos.h"
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

int verbose;
static char tmpdir[64];

/* A non-zero status whose message names `needle` (a path, usually). */
void check_err(int rc, const clt_err *e, const char *needle, const char *what) {
  check(rc != CLT_OK, "%s: expected an error, got success", what);
  if (rc != CLT_OK) {
    check(strstr(e->msg, needle) != NULL, "%s: message does not name %s: %s", what, needle, e->msg);
    if (verbose) printf("  expected error (%s): %s\n", what, e->msg);
  }
}

const char *tpath(const char *fmt, ...) {
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

void mkdirs(const char *path) {
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
void mkparent(const char *path) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", path);
  char *slash = strrchr(buf, '/');
  if (slash) {
    *slash = '\0';
    mkdirs(buf);
  }
}

void write_raw(const char *path, const void *p, size_t n) {
  mkparent(path);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n) check(0, "cannot write %s", path);
  if (f) fclose(f);
}

unsigned char *read_raw(const char *path, size_t *n) {
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

void write_png(const char *path, int w, int h, int color_type, int depth, const unsigned char *data,
               const png_color *palette, int npalette) {
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

void write_jpeg(const char *path, int w, int h, int comps, const unsigned char *data, int quality) {
  write_jpeg_ex(path, w, h, comps, data, quality, 0);
}

/* ------------------------------------------------------------------------- */
/* The photo folder                                                          */

/* In the order the folder must list them: (class, directory, strcmp file name). */
const spec specs[] = {
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

void write_spec(const char *path, const spec *s) {
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
    check(strcmp(clt_photos_relative_path(tr, i), specs[i].rel) == 0,
          "example %d's relative path is %s, want %s", i, clt_photos_relative_path(tr, i),
          specs[i].rel);
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

/* Gets examples [first, first + len) of step s (two consumers each get their own
 * slice of every step) and checks them against the images decoded one by one. */
static void get_slice_checked(clt_loader *l, const clt_photos *p, const int *order, int batch,
                              int s, int first, int len, const unsigned char *expect, size_t img,
                              const char *what) {
  clt_err e = {0};
  clt_photo_batch b;
  int rc = clt_loader_get_slice(l, s, first, len, &b, NULL, &e);
  check(rc == CLT_OK && b.count == len, "%s: step %d [%d, +%d): %s (%d images)", what, s, first,
        len, rc ? e.msg : "ok", b.count);
  for (int k = 0; rc == CLT_OK && k < len; k++) {
    const int idx = order[s * batch + first + k];
    check(b.labels[k] == clt_photos_label(p, idx) &&
              memcmp(b.pixels + (size_t)k * img, expect + (size_t)idx * img, img) == 0,
          "%s: step %d position %d (example %d): label or pixels differ", what, s, first + k, idx);
  }
}

/* A process's share of each batch (MPI): only its positions are decoded, the
 * others' never; a slice outside it is decoded when asked; a share changed
 * during a pass applies to the steps decoded ahead. */
static void test_loader_share(void) {
  const int size = 16, n = NSPECS, batch = 4; /* batches of 4, 4, 3 */
  const size_t img = (size_t)size * size * 3;
  clt_photos *p = NULL;
  clt_err e = {0};
  if (clt_photos_open(tpath("photos"), size, 0.0, 1, &p, NULL, &e) != CLT_OK) {
    check(0, "share: open: %s", e.msg);
    return;
  }
  unsigned char *expect = malloc(img * n);
  for (int i = 0; i < n; i++)
    if (clt_photos_decode(p, i, expect + img * i, &e) != CLT_OK)
      check(0, "share: decode %d: %s", i, e.msg);
  int order[NSPECS];
  clt_epoch_order(5, 0, order, n);
  clt_loader *l = NULL;
  int rc = clt_loader_create(p, 2, batch, 2, 2, 0, &l, &e);
  check(rc == CLT_OK, "share: create: %s", e.msg);
  if (rc == CLT_OK) {
    /* Positions 1..2 of a full batch (consumer 0 takes 1, consumer 1 takes 2), 0 of
     * the last (consumer 1 takes none): 5 images of 11. */
    rc = clt_loader_share(l, 0, 1, 2, 0, 1, &e);
    if (rc == CLT_OK) rc = clt_loader_start(l, order, n, batch, &e);
    check(rc == CLT_OK, "share: start: %s", e.msg);
    for (int s = 0; s < 3 && rc == CLT_OK; s++) {
      get_slice_checked(l, p, order, batch, s, s < 2 ? 1 : 0, 1, expect, img, "share");
      get_slice_checked(l, p, order, batch, s, s < 2 ? 2 : 1, s < 2 ? 1 : 0, expect, img, "share");
      clt_loader_put(l, s);
      clt_loader_put(l, s);
    }
    clt_loader_work w;
    clt_loader_get_work(l, &w);
    check(w.decoded == 5 && w.images == 5 && w.cpu_seconds > 0,
          "share: decoded %zu, prepared %zu images (%g s), want 5 and 5 (> 0 s)", w.decoded,
          w.images, w.cpu_seconds);

    /* Outside the share: asked for, decoded, the share kept. */
    rc = clt_loader_start(l, order, n, batch, &e);
    check(rc == CLT_OK, "share: start 2: %s", e.msg);
    for (int s = 0; s < 3 && rc == CLT_OK; s++) {
      get_slice_checked(l, p, order, batch, s, 0, s < 2 ? 4 : 3, expect, img, "whole batch");
      get_slice_checked(l, p, order, batch, s, 0, 0, expect, img, "whole batch");
      clt_loader_put(l, s);
      clt_loader_put(l, s);
    }
    clt_loader_get_work(l, &w);
    check(w.decoded == 5 + (size_t)n, "whole batches asked: decoded %zu, want %d", w.decoded,
          5 + n);

    /* The share moves after step 0 (as --split auto's does): the steps ahead
     * decode the new positions; the old ones are at most decoded ahead. */
    rc = clt_loader_share(l, 0, 0, 2, 0, 2, &e);
    if (rc == CLT_OK) rc = clt_loader_start(l, order, n, batch, &e);
    check(rc == CLT_OK, "share: start 3: %s", e.msg);
    size_t before = w.decoded;
    if (rc == CLT_OK) {
      get_slice_checked(l, p, order, batch, 0, 0, 2, expect, img, "moved");
      get_slice_checked(l, p, order, batch, 0, 2, 0, expect, img, "moved");
      clt_loader_put(l, 0);
      clt_loader_put(l, 0);
      rc = clt_loader_share(l, 1, 2, 2, 1, 2, &e);
      check(rc == CLT_OK, "share: move: %s", e.msg);
    }
    for (int s = 1; s < 3 && rc == CLT_OK; s++) {
      get_slice_checked(l, p, order, batch, s, s < 2 ? 2 : 1, 1, expect, img, "moved");
      get_slice_checked(l, p, order, batch, s, s < 2 ? 3 : 2, 1, expect, img, "moved");
      clt_loader_put(l, s);
      clt_loader_put(l, s);
    }
    clt_loader_get_work(l, &w);
    /* 2 + 2 + 2 wanted; at most the 2 old positions of each step ahead besides. */
    check(w.decoded - before >= 6 && w.decoded - before <= 10,
          "moved share: decoded %zu, want 6 to 10", w.decoded - before);
    check(clt_loader_share(l, 0, -1, 2, 0, 0, &e) == CLT_ERR_ARG, "a negative share accepted");
    clt_loader_destroy(l);
  }
  free(expect);
  clt_photos_free(p);
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
  test_loader_share();
  test_bad();
  test_pixel_limit();
  test_big_images();
  test_budget();
  if (!check_failures()) remove_tree(tmpdir);
  else printf("left the test folder in %s\n", tmpdir);
  return check_summary();
}
