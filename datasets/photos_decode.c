/* Decoding one photo (JPEG, PNG) and resizing it as it is decoded, within the
 * pixel limit and the process-wide decoding budget. See photos.h for the pixel
 * semantics and what decoding may take.
 *
 * libjpeg and libpng report errors by calling a handler that must not return
 * (libjpeg's default calls exit(), libpng's longjmps after printing), so each
 * decoder installs handlers that record the message and longjmp back to a setjmp
 * in the same function; nothing that function changes after setjmp is read on the
 * error path except through memory the libraries own (cinfo, png structs), the
 * error record or the job. */
#define _POSIX_C_SOURCE 200809L /* pthreads */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "photos_impl.h"

/* ------------------------------------------------------------------------- */
/* Limits: the pixel limit and the decoding budget                            */

static _Atomic long long max_pixels_setting = CLT_PHOTOS_MAX_PIXELS;

void clt_photos_set_max_pixels(long long max_pixels) {
  atomic_store(&max_pixels_setting, max_pixels > 0 ? max_pixels : CLT_PHOTOS_MAX_PIXELS);
}

long long clt_photos_max_pixels(void) { return atomic_load(&max_pixels_setting); }

/* One budget for every decode of the process, whatever its loader: reservations
 * are served first come first served (a ticket each), so a big image waiting for
 * the budget to drain is not overtaken forever by small ones. Nothing holding a
 * reservation waits for anything else, so waiting cannot deadlock. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  size_t total; /* 0: CLT_PHOTOS_DECODE_BUDGET */
  size_t used;
  unsigned long long next, serving; /* tickets */
} budget = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0};

void clt_photos_set_decode_budget(size_t bytes) {
  pthread_mutex_lock(&budget.mu);
  budget.total = bytes;
  pthread_cond_broadcast(&budget.cv);
  pthread_mutex_unlock(&budget.mu);
}

/* Blocks until `need` bytes fit in the budget, or nothing else is reserved (an
 * image bigger than the whole budget is decoded alone). */
static void budget_reserve(size_t need) {
  pthread_mutex_lock(&budget.mu);
  const unsigned long long ticket = budget.next++;
  for (;;) {
    const size_t total = budget.total ? budget.total : CLT_PHOTOS_DECODE_BUDGET;
    const int fits = budget.used == 0 || (budget.used < total && need <= total - budget.used);
    if (ticket == budget.serving && fits) break;
    pthread_cond_wait(&budget.cv, &budget.mu);
  }
  budget.used += need;
  budget.serving++;
  pthread_cond_broadcast(&budget.cv); /* the next ticket may fit too */
  pthread_mutex_unlock(&budget.mu);
}

static void budget_release(size_t need) {
  if (!need) return;
  pthread_mutex_lock(&budget.mu);
  budget.used -= need;
  pthread_cond_broadcast(&budget.cv);
  pthread_mutex_unlock(&budget.mu);
}

/* ------------------------------------------------------------------------- */
/* Decoding                                                                   */

int clt_photos_sniff(const unsigned char *b, size_t n) {
  static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return KIND_JPEG;
  if (n >= 8 && memcmp(b, png_sig, 8) == 0) return KIND_PNG;
  return KIND_BAD;
}

/* Per-thread buffers. Whatever exceeds SCRATCH_KEEP after a decode is freed
 * before its reservation is returned: a thread does not keep a big image's
 * buffers, which would multiply with the number of threads. */
#define SCRATCH_KEEP ((size_t)1 << 20)
/* Estimates of the decoders' own memory beyond the rows counted exactly:
 * libjpeg's strip buffers (a few MCU rows of every component, upsampling and
 * colour conversion; rows of output_width * 4 bytes) and its tables; libpng's
 * row and transform buffers (per pixel) and zlib's window and state. */
#define JPEG_ROWS_ESTIMATE 64
#define PNG_BYTES_PER_PIXEL_ESTIMATE 16
#define DECODER_FIXED_ESTIMATE ((size_t)1 << 20)
/* glibc raises its mmap threshold to the largest block freed (up to 32 MiB) and
 * then keeps up to twice that free in each thread's arena: what one big image
 * took would stay resident once per thread. After a decode that reserved more
 * than this, the free memory is handed back before the reservation is. */
#define TRIM_AFTER ((size_t)8 << 20)

void clt_photos_scratch_free(scratch *s) {
  free(s->rows);
  free(s->img);
  free(s->ptrs);
  free(s->x0);
  free(s->x1);
  free(s->xl);
  memset(s, 0, sizeof *s);
}

int clt_photos_scratch_init(scratch *s, int image_size) {
  memset(s, 0, sizeof *s);
  s->x0 = malloc((size_t)image_size * sizeof *s->x0);
  s->x1 = malloc((size_t)image_size * sizeof *s->x1);
  s->xl = malloc((size_t)image_size * sizeof *s->xl);
  if (!s->x0 || !s->x1 || !s->xl) {
    clt_photos_scratch_free(s);
    return CLT_ERR_NOMEM;
  }
  return CLT_OK;
}

static void scratch_trim(scratch *s) {
  if (s->rows_cap + s->img_cap + s->ptrs_cap * sizeof *s->ptrs <= SCRATCH_KEEP) return;
  free(s->rows);
  free(s->img);
  free(s->ptrs);
  s->rows = s->img = NULL;
  s->ptrs = NULL;
  s->rows_cap = s->img_cap = s->ptrs_cap = 0;
}

static int grow(unsigned char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return CLT_OK;
  free(*buf); /* the old contents are never needed */
  *buf = malloc(need);
  *cap = *buf ? need : 0;
  return *buf ? CLT_OK : CLT_ERR_NOMEM;
}

/* One image's decode: the file, where its pixels go, and what it reserved. */
typedef struct job {
  FILE *f;
  scratch *s;
  unsigned char *out; /* size x size x 3 */
  int size;
  long long max_pixels;
  size_t reserved; /* bytes of the budget, returned by the caller */
  int refused;     /* over max_pixels: why says so, not "cannot decode" */
  char why[JMSG_LENGTH_MAX + 160];
} job;

/* Pillow's rule, from the header: more than max_pixels pixels is refused before
 * any pixel memory exists. */
static int over_limit(job *j, unsigned long w, unsigned long h) {
  const unsigned long long n = (unsigned long long)w * h;
  if (n <= (unsigned long long)j->max_pixels) return 0;
  snprintf(j->why, sizeof j->why,
           "%lux%lu = %llu pixels exceeds the limit of %lld (a decompression bomb?); raise it with "
           "--max-image-pixels",
           w, h, n, j->max_pixels);
  j->refused = 1;
  return 1;
}

static void reserve(job *j, size_t need) {
  budget_reserve(need);
  j->reserved = need;
}

/* tf.image.resize(method="bilinear"): half-pixel centres, no antialiasing, in
 * float as TensorFlow computes it, then rounded to uint8; fed the source rows top
 * to bottom. Output row y blends source rows floor(f) and ceil(f) (clamped), f =
 * (y + 0.5) * h / size - 0.5: both never decrease with y and differ by at most
 * one, so row y is written as soon as row ceil(f) arrives, from it and the row
 * before it. Same arithmetic as resizing the whole image, so the same pixels. */
typedef struct resizer {
  const scratch *s;
  int w, h, size;
  float sy;
  unsigned char *out;
  int rows_in, next_y;
  const unsigned char *prev, *cur; /* source rows rows_in - 2 and rows_in - 1 */
} resizer;

static void resizer_init(resizer *r, scratch *s, int w, int h, unsigned char *out, int size) {
  *r = (resizer){s, w, h, size, (float)h / (float)size, out, 0, 0, NULL, NULL};
  const float sx = (float)w / (float)size;
  for (int x = 0; x < size; x++) {
    float f = ((float)x + 0.5f) * sx - 0.5f, fl = floorf(f);
    int lo = (int)fl, hi = (int)ceilf(f);
    s->x0[x] = (lo < 0 ? 0 : lo) * 3;
    s->x1[x] = (hi > w - 1 ? w - 1 : hi) * 3;
    s->xl[x] = f - fl;
  }
}

/* Hands the next source row (w * 3 bytes, RGB) over; it, and the one before it,
 * must stay valid until the next call. */
static void resizer_push(resizer *r, const unsigned char *row) {
  const int at = r->rows_in++;
  r->prev = at ? r->cur : row; /* never read for row 0, which has no row before it */
  r->cur = row;
  while (r->next_y < r->size) {
    const int y = r->next_y;
    unsigned char *o = r->out + (size_t)y * r->size * 3;
    if (r->w == r->size && r->h == r->size) { /* same size: a copy */
      memcpy(o, row, (size_t)r->size * 3);
      r->next_y++;
      break;
    }
    float f = ((float)y + 0.5f) * r->sy - 0.5f, fl = floorf(f);
    int lo = (int)fl, hi = (int)ceilf(f);
    lo = lo < 0 ? 0 : lo;
    hi = hi > r->h - 1 ? r->h - 1 : hi;
    if (hi > at) break; /* needs a row still to come */
    const unsigned char *r0 = lo == at ? r->cur : r->prev, *r1 = hi == at ? r->cur : r->prev;
    const float yl = f - fl;
    for (int x = 0; x < r->size; x++) {
      const int a = r->s->x0[x], b = r->s->x1[x];
      const float xl = r->s->xl[x];
      for (int c = 0; c < 3; c++) {
        /* r0, r1: rows pushed, never NULL (the analyzer supposes a grow() of 0 bytes) */
        // NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
        float tl = r0[a + c], tr = r0[b + c], bl = r1[a + c], br = r1[b + c];
        float top = tl + (tr - tl) * xl, bot = bl + (br - bl) * xl;
        float v = top + (bot - top) * yl + 0.5f;
        o[x * 3 + c] = (unsigned char)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
      }
    }
    r->next_y++;
  }
}

struct jerr {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX];
};

static void jpeg_fail_exit(j_common_ptr c) {
  struct jerr *j = (struct jerr *)c->err;
  (*c->err->format_message)(c, j->msg);
  longjmp(j->jb, 1);
}

/* Warnings are ignored (as TensorFlow does: extraneous bytes are common and harmless),
 * except those saying the entropy-coded data stopped early: libjpeg would fill the
 * rest of the image with grey. */
static void jpeg_emit(j_common_ptr c, int level) {
  if (level < 0 && (c->err->msg_code == JWRN_JPEG_EOF || c->err->msg_code == JWRN_HIT_MARKER))
    jpeg_fail_exit(c);
}

/* What jpeg_start_decompress and the scanlines will take: a multi-scan
 * (progressive) file keeps every DCT coefficient of the image (2 bytes a
 * sample) until its last scan; otherwise libjpeg works on strips of rows. */
static size_t jpeg_need(j_decompress_ptr c) {
  size_t need = (size_t)c->output_width * 4 * (JPEG_ROWS_ESTIMATE + 2) + DECODER_FIXED_ESTIMATE;
  if (jpeg_has_multiple_scans(c)) {
    for (int i = 0; i < c->num_components; i++) {
      const jpeg_component_info *ci = &c->comp_info[i];
      const size_t bw = (ci->width_in_blocks + ci->h_samp_factor - 1) / ci->h_samp_factor;
      const size_t bh = (ci->height_in_blocks + ci->v_samp_factor - 1) / ci->v_samp_factor;
      need += bw * ci->h_samp_factor * bh * ci->v_samp_factor * sizeof(JBLOCK);
    }
  }
  return need;
}

/* In place: output pixel i (3 bytes) never overtakes input pixel i (4). */
static void cmyk_to_rgb(unsigned char *px, size_t n, int adobe) {
  for (size_t i = 0; i < n; i++) {
    int c = px[4 * i], m = px[4 * i + 1], y = px[4 * i + 2], k = px[4 * i + 3];
    if (adobe) { /* Adobe writes inverted CMYK */
      px[3 * i] = (unsigned char)(k * c / 255);
      px[3 * i + 1] = (unsigned char)(k * m / 255);
      px[3 * i + 2] = (unsigned char)(k * y / 255);
    } else {
      px[3 * i] = (unsigned char)((255 - k) * (255 - c) / 255);
      px[3 * i + 1] = (unsigned char)((255 - k) * (255 - m) / 255);
      px[3 * i + 2] = (unsigned char)((255 - k) * (255 - y) / 255);
    }
  }
}

/* Decodes a JPEG as RGB (CMYK/YCCK converted like TensorFlow's decoder), scanline
 * by scanline into the resizer. */
static int decode_jpeg(job *j) {
  struct jpeg_decompress_struct cinfo;
  struct jerr je;
  memset(&cinfo, 0, sizeof cinfo);
  cinfo.err = jpeg_std_error(&je.pub);
  je.pub.error_exit = jpeg_fail_exit;
  je.pub.emit_message = jpeg_emit;
  je.msg[0] = '\0';
  if (setjmp(je.jb)) {
    jpeg_destroy_decompress(&cinfo);
    snprintf(j->why, sizeof j->why, "%s", je.msg);
    return CLT_ERR_FORMAT;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, j->f);
  jpeg_read_header(&cinfo, TRUE);
  if (over_limit(j, cinfo.image_width, cinfo.image_height)) {
    jpeg_destroy_decompress(&cinfo);
    return CLT_ERR_FORMAT;
  }
  const int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_calc_output_dimensions(&cinfo);
  const int comps = cinfo.output_components;
  if (comps != 3 && comps != 4) {
    snprintf(je.msg, sizeof je.msg, "unsupported %ux%u image with %d components",
             cinfo.output_width, cinfo.output_height, comps);
    longjmp(je.jb, 1);
  }
  reserve(j, jpeg_need(&cinfo));
  jpeg_start_decompress(&cinfo);
  const size_t stride = (size_t)cinfo.output_width * comps;
  if (grow(&j->s->rows, &j->s->rows_cap, 2 * stride) != CLT_OK) {
    snprintf(je.msg, sizeof je.msg, "out of memory for rows of a %ux%u image", cinfo.output_width,
             cinfo.output_height);
    longjmp(je.jb, 1);
  }
  resizer r;
  resizer_init(&r, j->s, (int)cinfo.output_width, (int)cinfo.output_height, j->out, j->size);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = j->s->rows + stride * (cinfo.output_scanline & 1);
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (comps == 4) cmyk_to_rgb(row, cinfo.output_width, cinfo.saw_Adobe_marker);
    resizer_push(&r, row);
  }
  /* No jpeg_finish_decompress: every row is in; a file cut just before its EOI
   * marker holds the whole image and should not fail. */
  jpeg_destroy_decompress(&cinfo);
  return CLT_OK;
}

struct pngsrc {
  FILE *f;
  char msg[256];
};

static void png_fail(png_structp png, png_const_charp msg) {
  struct pngsrc *src = png_get_error_ptr(png);
  snprintf(src->msg, sizeof src->msg, "%s", msg);
  png_longjmp(png, 1);
}

static void png_quiet(png_structp png, png_const_charp msg) { /* warnings would go to stderr */
  (void)png;
  (void)msg;
}

static void png_read_file(png_structp png, png_bytep out, png_size_t n) {
  struct pngsrc *src = png_get_io_ptr(png);
  if (fread(out, 1, n, src->f) != n)
    png_error(png, ferror(src->f) ? "read error" : "file ends early (truncated)");
}

/* Decodes a PNG as 8-bit RGB, without gamma handling (like TensorFlow): row by row
 * into the resizer, except interlaced files, whose rows are complete only after
 * the last pass. */
static int decode_png(job *j) {
  struct pngsrc src = {j->f, ""};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_quiet);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_read_struct(&png, NULL, NULL);
    snprintf(j->why, sizeof j->why, "out of memory");
    return CLT_ERR_NOMEM;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    snprintf(j->why, sizeof j->why, "%s", src.msg);
    return CLT_ERR_FORMAT;
  }
  png_set_read_fn(png, &src, png_read_file);
  png_read_info(png, info);
  png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  if (over_limit(j, width, height)) {
    png_destroy_read_struct(&png, &info, NULL);
    return CLT_ERR_FORMAT;
  }
  if (width > INT_MAX || height > INT_MAX) png_error(png, "image too large");
  int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_scale_16(png); /* round(v / 257), as TensorFlow */
  /* Palette expansion turns tRNS into alpha too, so strip that as well. */
  if ((type & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS))
    png_set_strip_alpha(png);
  if (!(type & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
  const int interlaced = png_set_interlace_handling(png) > 1;
  const size_t stride = (size_t)width * 3;
  size_t need = (size_t)width * PNG_BYTES_PER_PIXEL_ESTIMATE + 2 * stride + DECODER_FIXED_ESTIMATE;
  if (interlaced) need += (stride + sizeof *j->s->ptrs) * height;
  reserve(j, need);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != stride || png_get_channels(png, info) != 3)
    png_error(png, "unexpected row layout after conversion to RGB");
  resizer r;
  resizer_init(&r, j->s, (int)width, (int)height, j->out, j->size);
  if (interlaced) {
    scratch *s = j->s;
    if (grow(&s->img, &s->img_cap, stride * height) != CLT_OK) png_error(png, "out of memory");
    if (height > s->ptrs_cap) {
      free(s->ptrs);
      s->ptrs_cap = 0;
      if (!(s->ptrs = malloc((size_t)height * sizeof *s->ptrs))) png_error(png, "out of memory");
      s->ptrs_cap = height;
    }
    for (png_uint_32 y = 0; y < height; y++) s->ptrs[y] = s->img + stride * y;
    png_read_image(png, s->ptrs);
    for (png_uint_32 y = 0; y < height; y++) resizer_push(&r, s->ptrs[y]);
  } else {
    if (grow(&j->s->rows, &j->s->rows_cap, 2 * stride) != CLT_OK) png_error(png, "out of memory");
    /* The rows stay in j->s, freed with it (the analyzer loses track of them). */
    // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
    for (png_uint_32 y = 0; y < height; y++) {
      unsigned char *row = j->s->rows + stride * (y & 1);
      png_read_row(png, row, NULL);
      resizer_push(&r, row);
    }
  }
  png_destroy_read_struct(&png, &info, NULL);
  return CLT_OK;
}

int clt_photos_decode_with(const clt_photos *p, int i, scratch *s, unsigned char *rgb, clt_err *e) {
  const char *path = clt_photos_path(p, i);
  if (!path) return clt_fail(e, CLT_ERR_ARG, "photo %d: index outside [0, %d)", i, p->count);
  job j = {.s = s, .out = rgb, .size = p->image_size, .max_pixels = p->max_pixels};
  int rc = CLT_OK;
  unsigned char magic[8];
  size_t got = 0;
  /* Read through stdio, not whole: a file's size costs no memory. */
  if (!(j.f = fopen(path, "rb"))) {
    snprintf(j.why, sizeof j.why, "cannot open: %s", strerror(errno));
    rc = CLT_ERR_IO;
    goto cleanup;
  }
  got = fread(magic, 1, sizeof magic, j.f);
  if (ferror(j.f) || fseek(j.f, 0, SEEK_SET) != 0) {
    snprintf(j.why, sizeof j.why, "read error");
    rc = CLT_ERR_IO;
    goto cleanup;
  }
  switch (clt_photos_sniff(magic, got)) {
    case KIND_JPEG:
      rc = decode_jpeg(&j);
      break;
    case KIND_PNG:
      rc = decode_png(&j);
      break;
    default:
      snprintf(j.why, sizeof j.why, "neither JPEG nor PNG (magic bytes)");
      rc = CLT_ERR_FORMAT;
  }
cleanup:
  if (j.f) fclose(j.f);
  scratch_trim(s); /* before the reservation goes back */
#ifdef __GLIBC__
  if (j.reserved > TRIM_AFTER) malloc_trim(0);
#endif
  budget_release(j.reserved);
  if (rc != CLT_OK && j.refused) return clt_fail(e, rc, "file %s: %s", path, j.why);
  if (rc != CLT_OK) return clt_fail(e, rc, "file %s: cannot decode: %s", path, j.why);
  return CLT_OK;
}

int clt_photos_decode(const clt_photos *p, int i, unsigned char *rgb, clt_err *e) {
  scratch s;
  if (i < 0 || i >= p->count)
    return clt_fail(e, CLT_ERR_ARG, "photo %d: index outside [0, %d)", i, p->count);
  if (clt_photos_scratch_init(&s, p->image_size) != CLT_OK)
    return clt_fail(e, CLT_ERR_NOMEM, "file %s: cannot decode: out of memory",
                    clt_photos_path(p, i));
  int rc = clt_photos_decode_with(p, i, &s, rgb, e);
  clt_photos_scratch_free(&s);
  return rc;
}
