/* Writes a synthetic photo folder for tests and benchmarks:
 *   make_photos DIR CLASSES PER_CLASS [SEED [SIDE]]
 * or one black PNG of W x H pixels, 1-bit grey, a few KiB however big (a
 * decompression bomb, or a big image, for the pixel limit's tests):
 *   make_photos --blank FILE.png W H
 * DIR/class_K/img_N.{jpg,png}: odd sizes (between 40 and 150 pixels a side; with
 * SIDE, between 4/15 of it and SIDE, as big as photos get for a benchmark),
 * every other file a PNG (RGB, or RGBA for some), the rest JPEG (a few grey).
 * Classes are learnable: class K's images are stripes at an angle and in a
 * colour of its own, under noise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include <png.h>

#include "rng.h"

static int write_png(const char *path, const unsigned char *rgb, int w, int h, int alpha) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fclose(f);
    return -1;
  }
  png_init_io(png, f);
  const int ch = alpha ? 4 : 3;
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8,
               alpha ? PNG_COLOR_TYPE_RGBA : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  unsigned char *row = malloc((size_t)w * ch);
  for (int y = 0; y < h && row; y++) {
    for (int x = 0; x < w; x++) {
      memcpy(row + (size_t)x * ch, rgb + ((size_t)y * w + x) * 3, 3);
      if (alpha) row[(size_t)x * ch + 3] = (unsigned char)(128 + x % 128);
    }
    png_write_row(png, row);
  }
  free(row);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return fclose(f);
}

static int write_jpeg(const char *path, const unsigned char *rgb, int w, int h, int grey) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = grey ? 1 : 3;
  c.in_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  unsigned char *row = malloc((size_t)w * 3);
  while (row && c.next_scanline < c.image_height) {
    const unsigned char *src = rgb + (size_t)c.next_scanline * w * 3;
    if (grey) {
      for (int x = 0; x < w; x++)
        row[x] = (unsigned char)((src[3 * (size_t)x] + src[3 * (size_t)x + 1] +
                                  src[3 * (size_t)x + 2]) /
                                 3);
    } else {
      memcpy(row, src, (size_t)w * 3);
    }
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  free(row);
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return fclose(f);
}

static int write_blank(const char *path, long w, long h) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  unsigned char *row = calloc((size_t)(w + 7) / 8, 1);
  if (!png || !info || !row || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    free(row);
    fclose(f);
    return -1;
  }
  png_init_io(png, f);
  png_set_compression_level(png, 9);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 1, PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (long y = 0; y < h; y++) png_write_row(png, row);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  free(row);
  return fclose(f);
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "--blank") == 0) {
    const long w = atol(argv[3]), h = atol(argv[4]);
    if (w < 1 || h < 1 || w > 1000000 || h > 1000000 || write_blank(argv[2], w, h) != 0) {
      fprintf(stderr, "make_photos: cannot write a %ldx%ld PNG to %s\n", w, h, argv[2]);
      return 1;
    }
    return 0;
  }
  if (argc < 4) {
    fprintf(stderr,
            "usage: make_photos DIR CLASSES PER_CLASS [SEED [SIDE]] | --blank FILE.png W H\n");
    return 2;
  }
  const char *dir = argv[1];
  const int classes = atoi(argv[2]), per_class = atoi(argv[3]);
  clt_rng rng;
  clt_rng_seed(&rng, argc > 4 ? strtoull(argv[4], NULL, 10) : 1, 0);
  const int side = argc > 5 ? atoi(argv[5]) : 150;
  if (side < 15 || side > 8192) {
    fprintf(stderr, "make_photos: SIDE %s outside [15, 8192]\n", argv[5]);
    return 2;
  }
  const int least = side * 4 / 15, spread = side * 2 / 3; /* 40 and 100 for 150 */
  mkdir(dir, 0755);
  unsigned char *rgb = malloc((size_t)(side + 1) * (side + 1) * 3);
  char path[4096];
  for (int k = 0; k < classes; k++) {
    snprintf(path, sizeof path, "%s/class_%d", dir, k);
    if (mkdir(path, 0755) != 0) {
      perror(path);
      free(rgb);
      return 1;
    }
    const double angle = 3.14159265 * k / classes, period = 6 + 3 * (k % 3);
    const double colour[3] = {k % 2 ? 220 : 40, k % 3 ? 60 : 200, (k / 2) % 2 ? 210 : 70};
    for (int n = 0; n < per_class; n++) {
      const int w = (least + (int)(clt_rng_uniform(&rng) * spread)) | 1;
      const int h = (least + (int)(clt_rng_uniform(&rng) * spread)) | 1;
      const double phase = clt_rng_uniform(&rng) * period;
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          const double t = (x * cos(angle) + y * sin(angle) + phase) / period;
          const double s = 0.5 + 0.5 * sin(2 * 3.14159265 * t);
          for (int c = 0; c < 3; c++) {
            double v = colour[c] * s + 30 * (clt_rng_uniform(&rng) - 0.5);
            rgb[((size_t)y * w + x) * 3 + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
          }
        }
      int rc;
      if (n % 2) {
        snprintf(path, sizeof path, "%s/class_%d/img_%03d.png", dir, k, n);
        rc = write_png(path, rgb, w, h, n % 6 == 1);
      } else {
        snprintf(path, sizeof path, "%s/class_%d/img_%03d.jpg", dir, k, n);
        rc = write_jpeg(path, rgb, w, h, n % 10 == 4);
      }
      if (rc) {
        fprintf(stderr, "make_photos: cannot write %s\n", path);
        free(rgb);
        return 1;
      }
    }
  }
  free(rgb);
  return 0;
}
