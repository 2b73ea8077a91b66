/* Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small
 * valid inputs, and a few near misses, made with cltrain's own writers and
 * libjpeg/libpng, in each target's input format (see the targets' comments).
 *
 *   make_fuzz_corpus OUT_DIR MODELS_DIR
 *
 * OUT_DIR: tests/fuzz/corpus; MODELS_DIR: tests/models (Keras files and a
 * numpy-written .npz are taken from there). The output is the same on every run,
 * so the committed corpus can be regenerated and diffed. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jpeglib.h>
#include <png.h>

#include <cjson/cJSON.h>

#include "checkpoint.h"
#include "keras.h"
#include "model.h"
#include "npz.h"

static const char *out_dir;
static char scratch[256];

static void die(const char *what) {
  fprintf(stderr, "make_fuzz_corpus: %s\n", what);
  exit(1);
}

typedef struct buf {
  unsigned char *p;
  size_t n, cap;
} buf;

static void add(buf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) die("out of memory");
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void add_byte(buf *b, unsigned v) {
  unsigned char c = (unsigned char)v;
  add(b, &c, 1);
}
static void add_str(buf *b, const char *s) { add(b, s, strlen(s)); }
static void add_be32(buf *b, uint32_t v) {
  unsigned char p[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                        (unsigned char)v};
  add(b, p, 4);
}

static void read_file(const char *path, buf *b) {
  FILE *f = fopen(path, "rb");
  if (!f) die(path);
  unsigned char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) add(b, chunk, n);
  fclose(f);
}

/* Writes OUT_DIR/target/name; frees b's content. */
static void seed(const char *target, const char *name, buf *b) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", out_dir, target);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(b->p, 1, b->n, f) != b->n || fclose(f) != 0) die(path);
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* ---- idx: flags, 16-bit images length, images file, labels file ---- */

static void idx_seed(const char *name, unsigned flags, uint32_t count, uint32_t rows, uint32_t cols,
                     int labels, int bad_label) {
  buf img = {0}, b = {0};
  add_be32(&img, 0x803);
  add_be32(&img, count);
  add_be32(&img, rows);
  add_be32(&img, cols);
  for (uint32_t i = 0; i < count * rows * cols; i++) add_byte(&img, (i * 37u) & 0xff);
  add_byte(&b, flags);
  add_byte(&b, img.n & 0xff);
  add_byte(&b, img.n >> 8);
  add(&b, img.p, img.n);
  free(img.p);
  add_be32(&b, 0x801);
  add_be32(&b, (uint32_t)labels);
  for (int i = 0; i < labels; i++) add_byte(&b, i == bad_label ? 10 : (unsigned)(i % 10));
  seed("idx", name, &b);
}

/* A header that claims 2 GiB of pixels over a few bytes: the reader allocated the
 * claim before reading (found by fuzzing; run.sh's -malloc_limit_mb=64 for idx
 * keeps it fixed). */
static void idx_claims_2gib(void) {
  buf b = {0};
  add_byte(&b, 0);
  add_byte(&b, 16 + 8);
  add_byte(&b, 0);
  add_be32(&b, 0x803);
  add_be32(&b, 1);
  add_be32(&b, 46340);
  add_be32(&b, 46340);
  add(&b, "pixels..", 8);
  add_be32(&b, 0x801);
  add_be32(&b, 1);
  add_byte(&b, 0);
  seed("idx", "header_claims_2gib", &b);
}

static void idx_corpus(void) {
  idx_claims_2gib();
  idx_seed("plain", 0, 3, 4, 5, 3, -1);
  idx_seed("gzip", 3, 4, 7, 3, 4, -1);
  idx_seed("gzip_images_plain_labels", 1, 2, 28, 28, 2, -1);
  idx_seed("gzip_no_trailer", 3 | 4, 2, 3, 3, 2, -1);
  idx_seed("gzip_cut_in_half", 1 | 8, 2, 5, 5, 2, -1);
  idx_seed("label_out_of_range", 0, 3, 2, 2, 3, 1);
  idx_seed("counts_differ", 2, 3, 2, 2, 4, -1);
}

/* ---- npz: mode byte, then an .npz file or .npy members ---- */

static void npz_file(const clt_npz_array *a, int n, buf *out) {
  char path[300];
  clt_err e;
  snprintf(path, sizeof path, "%s/x.npz", scratch);
  if (clt_npz_write(path, a, n, &e) != CLT_OK) die(e.msg);
  read_file(path, out);
}

static void npy_file(const clt_npz_array *a, buf *out) {
  char path[300];
  clt_err e;
  snprintf(path, sizeof path, "%s/x.npy", scratch);
  if (clt_npy_write(path, a, &e) != CLT_OK) die(e.msg);
  read_file(path, out);
}

static void npz_corpus(const char *models) {
  static const float f[6] = {1, 2, 3, 4, 5, 6};
  static const int64_t i8 = -7;
  static const uint64_t u8 = 42;
  uint32_t text[16];
  clt_npz_array a[4];
  memset(a, 0, sizeof a);
  snprintf(a[0].name, sizeof a[0].name, "conv2d/kernel");
  snprintf(a[0].dtype, sizeof a[0].dtype, "<f4");
  a[0].rank = 2;
  a[0].dims[0] = 2;
  a[0].dims[1] = 3;
  a[0].data = f;
  a[0].bytes = sizeof f;
  snprintf(a[1].name, sizeof a[1].name, "epoch");
  snprintf(a[1].dtype, sizeof a[1].dtype, "<i8");
  a[1].data = &i8;
  a[1].bytes = 8;
  snprintf(a[2].name, sizeof a[2].name, "data/seed");
  snprintf(a[2].dtype, sizeof a[2].dtype, "<u8");
  a[2].data = &u8;
  a[2].bytes = 8;
  clt_npz_string(&a[3], "metadata", "{\"format\": 1}", text);

  buf b = {0};
  add_byte(&b, 0);
  npz_file(a, 4, &b);
  seed("npz", "cltrain_members", &b);
  add_byte(&b, 0);
  npz_file(a, 0, &b);
  seed("npz", "empty_archive", &b);

  char path[1024];
  snprintf(path, sizeof path, "%s/dw_bn_dropout_k2/weights.npz", models);
  add_byte(&b, 0);
  read_file(path, &b);
  seed("npz", "numpy_savez", &b);

  /* .npy members for the harness to wrap: stored, deflated, with numpy's zip64 field */
  for (unsigned mode = 1; mode <= 5; mode += 2) {
    add_byte(&b, mode);
    npy_file(&a[0], &b);
    add_str(&b, "\n--\n");
    npy_file(&a[3], &b);
    add_str(&b, "\n--\n");
    npy_file(&a[1], &b);
    char name[32];
    snprintf(name, sizeof name, "npy_members_mode%u", mode);
    seed("npz", name, &b);
  }
  /* numpy's other header forms: version 2.0, a Python-2 long, shape (0, 3) */
  add_byte(&b, 1);
  static const char v2[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }";
  add(&b, "\x93NUMPY\x02\x00", 8);
  const uint32_t hl = sizeof v2; /* with the '\n' that replaces the NUL */
  unsigned char le[4] = {(unsigned char)hl, (unsigned char)(hl >> 8), 0, 0};
  add(&b, le, 4);
  add(&b, v2, sizeof v2 - 1);
  add_byte(&b, '\n');
  add_str(&b, "\n--\n");
  static const char v1[] = "{'descr': '<i8', 'fortran_order': False, 'shape': (1L,), }\n";
  add(&b, "\x93NUMPY\x01\x00", 8);
  add_byte(&b, sizeof v1 - 1);
  add_byte(&b, 0);
  add(&b, v1, sizeof v1 - 1);
  add(&b, &i8, 8);
  seed("npz", "npy_v2_and_long", &b);
}

/* ---- checkpoint: flags, index NUL metadata ---- */

/* The metadata cltrain writes for model m (saved for real, then read back). */
static char *metadata_of(const clt_model *m, const clt_optimizer *opt) {
  char dir[300], path[400];
  snprintf(dir, sizeof dir, "%s/ckpt", scratch);
  clt_checkpoint st;
  memset(&st, 0, sizeof st);
  st.params = calloc(m->flat_floats, sizeof(float));
  for (int k = 0; k < CLT_OPT_SLOTS; k++) st.opt_state[k] = calloc(m->flat_floats, sizeof(float));
  st.optimizer = *opt;
  st.seed = 42;
  clt_err e;
  if (clt_checkpoint_save(dir, 0, m, &st, path, sizeof path, &e) != CLT_OK) die(e.msg);
  clt_checkpoint_free(&st);
  clt_npz *z;
  if (clt_npz_read(path, &z, &e) != CLT_OK) die(e.msg);
  static char json[(1 << 19) + 2048];
  if (clt_npz_get_string(clt_npz_find(z, "metadata"), json, sizeof json) != 0) die("metadata");
  clt_npz_free(z);
  unlink(path);
  return strdup(json);
}

static void checkpoint_seed(const char *name, unsigned flags, const char *index, const char *meta) {
  buf b = {0};
  add_byte(&b, flags);
  if (index) {
    add_str(&b, index);
    add_byte(&b, 0);
  }
  add_str(&b, meta);
  seed("checkpoint", name, &b);
}

static void checkpoint_corpus(void) {
  static clt_model m;
  clt_err e;
  clt_optimizer adam = clt_optimizer_defaults(CLT_OPT_ADAM);
  clt_optimizer sgd = clt_optimizer_defaults(CLT_OPT_SGD);
  sgd.momentum = 0.9;
  sgd.nesterov = 1;
  clt_optimizer rms = clt_optimizer_defaults(CLT_OPT_RMSPROP);
  rms.momentum = 0.5;
  rms.weight_decay = 0.01;

  if (clt_model_build("fmnist-cnn", (clt_shape){28, 28, 1}, 10, &m, &e) != CLT_OK) die(e.msg);
  char *meta = metadata_of(&m, &adam);
  checkpoint_seed("fmnist_cnn_adam", 1, NULL, meta);
  checkpoint_seed("fmnist_cnn_eval_custom_index", 0,
                  "model_checkpoint_path: \"ckpt-1\"\nall_model_checkpoint_paths: \"ckpt-1\"\n",
                  meta);
  checkpoint_seed("bad_index", 1, "model_checkpoint_path: ckpt-1", meta);
  free(meta);

  if (clt_model_parse("tiny.json", (clt_shape){8, 8, 1}, 3, CLT_PRE_RAW,
                      "c=Conv2D(2,3x3,s1,valid,relu) p=MaxPooling2D(2,s2) f=Flatten d=Dense(3)", &m,
                      &e) != CLT_OK)
    die(e.msg);
  m.softmax_output = 1;
  meta = metadata_of(&m, &sgd);
  checkpoint_seed("tiny_sgd_nesterov", 1 | 2, NULL, meta);
  checkpoint_seed("tiny_missing_member", 1 | 4 | 0x30, NULL, meta);
  checkpoint_seed("tiny_wrong_shape", 1 | 8 | 0x10, NULL, meta);
  free(meta);

  if (clt_model_parse("branches.json", (clt_shape){6, 6, 3}, 2, CLT_PRE_UNIT,
                      "z=ZeroPadding2D(1) c=Conv2D(4,3x3,s1,valid,nobias) "
                      "b=BatchNormalization(eps0.001,m0.99,relu) "
                      "d=DepthwiseConv2D(3x3,s1,same,m1)<b s=Add<b,d "
                      "g=GlobalAveragePooling2D o=Dense(2)",
                      &m, &e) != CLT_OK)
    die(e.msg);
  meta = metadata_of(&m, &rms);
  checkpoint_seed("branches_rmsprop", 1, NULL, meta);
  free(meta);
}

/* ---- photos: size byte, then the file ---- */

static void jpeg_seed(const char *name, unsigned size_byte, int w, int h, J_COLOR_SPACE space,
                      int comps, int progressive) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  unsigned char *mem = NULL;
  unsigned long len = 0;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &mem, &len);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = comps;
  c.in_color_space = space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 50, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  unsigned char *row = malloc((size_t)w * comps);
  while (c.next_scanline < c.image_height) {
    for (int x = 0; x < w * comps; x++) row[x] = (unsigned char)(x * 29 + c.next_scanline * 71);
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  free(row);
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  buf b = {0};
  add_byte(&b, size_byte);
  add(&b, mem, len);
  free(mem);
  seed("photos", name, &b);
}

static void png_seed(const char *name, unsigned size_byte, int w, int h, int type, int depth,
                     int interlace, int trns) {
  char path[300];
  snprintf(path, sizeof path, "%s/x.png", scratch);
  FILE *f = fopen(path, "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (!f || !png || !info || setjmp(png_jmpbuf(png))) die("png");
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, type,
               interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (type == PNG_COLOR_TYPE_PALETTE) {
    png_color pal[4] = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
    png_set_PLTE(png, info, pal, 4);
  }
  if (trns) {
    png_byte alpha[2] = {0, 128};
    png_color_16 key = {0, 0, 0, 0, 1};
    png_set_tRNS(png, info, alpha, type == PNG_COLOR_TYPE_PALETTE ? 2 : 0,
                 type == PNG_COLOR_TYPE_PALETTE ? NULL : &key);
  }
  png_write_info(png, info);
  const int channels = type == PNG_COLOR_TYPE_RGB         ? 3
                       : type == PNG_COLOR_TYPE_RGB_ALPHA ? 4
                       : type == PNG_COLOR_TYPE_GA        ? 2
                                                          : 1;
  const size_t rowbytes = ((size_t)w * channels * depth + 7) / 8;
  unsigned char *rows = malloc(rowbytes * h);
  png_bytep *ptrs = malloc(sizeof *ptrs * h);
  for (size_t i = 0; i < rowbytes * h; i++) rows[i] = (unsigned char)(i * 53 + 7);
  if (type == PNG_COLOR_TYPE_PALETTE && depth == 8) { /* indices within the 4 colours */
    for (size_t i = 0; i < rowbytes * h; i++) rows[i] &= 3;
  }
  for (int y = 0; y < h; y++) ptrs[y] = rows + rowbytes * y;
  png_write_image(png, ptrs);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(f);
  free(rows);
  free(ptrs);
  buf b = {0};
  add_byte(&b, size_byte);
  read_file(path, &b);
  seed("photos", name, &b);
}

static void photos_corpus(void) {
  jpeg_seed("jpeg_rgb_9x5_to_4", 1, 9, 5, JCS_RGB, 3, 0);
  jpeg_seed("jpeg_grey_3x7_to_17", 2, 3, 7, JCS_GRAYSCALE, 1, 0);
  jpeg_seed("jpeg_progressive_16x16_to_1", 0, 16, 16, JCS_RGB, 3, 1);
  jpeg_seed("jpeg_cmyk_8x8_to_64", 3, 8, 8, JCS_CMYK, 4, 0);
  png_seed("png_rgb_17x17_same_size", 2, 17, 17, PNG_COLOR_TYPE_RGB, 8, 0, 0);
  png_seed("png_rgba_interlaced_5x4", 1, 5, 4, PNG_COLOR_TYPE_RGB_ALPHA, 8, 1, 0);
  png_seed("png_grey1_9x3", 3, 9, 3, PNG_COLOR_TYPE_GRAY, 1, 0, 0);
  png_seed("png_palette_trns_6x6", 1, 6, 6, PNG_COLOR_TYPE_PALETTE, 2, 0, 1);
  png_seed("png_grey_alpha16_3x3", 0, 3, 3, PNG_COLOR_TYPE_GA, 16, 0, 0);
  png_seed("png_rgb16_trns_4x2", 2, 4, 2, PNG_COLOR_TYPE_RGB, 16, 1, 1);
}

/* ---- keras: options byte, then the model file, minified ---- */

/* The options byte (fuzz_keras.c) under which the text reads: the classes its
 * output has and the shape it declares, with the raw pixels Keras' image
 * loaders give. */
static int keras_options(const char *text, unsigned *opt) {
  static clt_model m;
  static const int classes[] = {10, 2, 3, 5, 1, 100, 1000, 4};
  static const clt_shape shapes[] = {{28, 28, 1}, {32, 32, 3}, {16, 16, 3},   {16, 16, 4},
                                     {8, 8, 3},   {1, 1, 1},   {224, 224, 3}, {12, 12, 1}};
  for (unsigned s = 0; s < 8; s++) {
    for (unsigned k = 0; k < 8; k++) {
      clt_keras_opts o = {.data = shapes[s], .classes = classes[k], .preprocess = CLT_PRE_RAW};
      clt_err e;
      const int st = clt_keras_parse("model.json", text, &o, &m, &e);
      /* a bad file: the shape that lets it fail for its own reason */
      if (st != CLT_OK && k == 0 && !strstr(e.msg, "the data's are")) *opt = s << 3 | 2u << 6;
      if (st == CLT_OK) {
        *opt = k | s << 3 | 2u << 6;
        return 0;
      }
    }
  }
  return -1;
}

static void keras_corpus(const char *models) {
  static const char *const files[] = {
      "examples/fmnist_cnn.json",
      "seq_cnn/model.json",
      "seq_cnn_k2/model.json",
      "functional_add_concat/model.json",
      "functional_add_concat_k2/model.json",
      "dw_bn_dropout_k2/model.json",
      "bad/cycle_k2.json",
      "bad/add_shape_mismatch_k2.json",
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[1024], name[128];
    snprintf(path, sizeof path, "%s/%s", models, files[i]);
    buf raw = {0};
    read_file(path, &raw);
    add_byte(&raw, 0);
    cJSON *root = cJSON_Parse((const char *)raw.p);
    free(raw.p);
    if (!root) die(path);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    unsigned opt = 0;
    const int good = keras_options(text, &opt) == 0;
    if (!good && strncmp(files[i], "bad/", 4) != 0) die(path);
    buf b = {0};
    add_byte(&b, opt);
    add_str(&b, text);
    free(text);
    snprintf(name, sizeof name, "%s", files[i]);
    for (char *c = name; *c; c++) {
      if (*c == '/') *c = '_';
    }
    seed("keras", name, &b);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: make_fuzz_corpus OUT_DIR MODELS_DIR\n");
    return 2;
  }
  out_dir = argv[1];
  mkdir(out_dir, 0755);
  snprintf(scratch, sizeof scratch, "%s", "/tmp/cltrain-corpus-XXXXXX");
  if (!mkdtemp(scratch)) die("mkdtemp");
  idx_corpus();
  npz_corpus(argv[2]);
  checkpoint_corpus();
  photos_corpus();
  keras_corpus(argv[2]);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
  return system(cmd) == 0 ? 0 : 1;
}
