/* Photo folders (Keras' image_dataset_from_directory) and a prefetching decode
 * loader. See photos.h for the layout, the pixel semantics, the bad-file policy and
 * what decoding may take (the pixel limit, the budget).
 *
 * libjpeg and libpng report errors by calling a handler that must not return
 * (libjpeg's default calls exit(), libpng's longjmps after printing), so each
 * decoder installs handlers that record the message and longjmp back to a setjmp
 * in the same function; nothing that function changes after setjmp is read on the
 * error path except through memory the libraries own (cinfo, png structs), the
 * error record or the job. */
#define _POSIX_C_SOURCE 200809L /* opendir, clock_gettime, pthreads */

#include "photos.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "rng.h"
#include "timing.h"

#define MAX_WALK_DEPTH 32 /* also stops symlink loops */

/* ------------------------------------------------------------------------- */
/* Subsets                                                                    */

struct clt_photos {
  int count, classes, image_size;
  long long max_pixels; /* clt_photos_max_pixels() when opened */
  size_t *path_off;     /* count offsets into text */
  int *labels;          /* count */
  size_t *class_off;    /* classes offsets into text */
  char *text;           /* NUL-terminated class names and paths */
};

void clt_photos_free(clt_photos *p) {
  if (!p) return;
  free(p->path_off);
  free(p->labels);
  free(p->class_off);
  free(p->text);
  free(p);
}

int clt_photos_count(const clt_photos *p) { return p->count; }
int clt_photos_classes(const clt_photos *p) { return p->classes; }
const char *clt_photos_class_name(const clt_photos *p, int c) {
  return c >= 0 && c < p->classes ? p->text + p->class_off[c] : NULL;
}
int clt_photos_label(const clt_photos *p, int i) {
  return i >= 0 && i < p->count ? p->labels[i] : -1;
}
const char *clt_photos_path(const clt_photos *p, int i) {
  return i >= 0 && i < p->count ? p->text + p->path_off[i] : NULL;
}
int clt_photos_image_size(const clt_photos *p) { return p->image_size; }

/* ------------------------------------------------------------------------- */
/* Scanning                                                                   */

/* A growing byte arena; strings are referred to by offset since it moves. */
typedef struct arena {
  char *buf;
  size_t len, cap;
} arena;

static int arena_add(arena *a, const char *s, size_t n, size_t *off) {
  if (a->len + n + 1 > a->cap) {
    size_t cap = a->cap ? a->cap : 4096;
    while (a->len + n + 1 > cap) cap *= 2;
    char *b = realloc(a->buf, cap);
    if (!b) return CLT_ERR_NOMEM;
    a->buf = b;
    a->cap = cap;
  }
  memcpy(a->buf + a->len, s, n);
  a->buf[a->len + n] = '\0';
  *off = a->len;
  a->len += n + 1;
  return CLT_OK;
}

typedef struct entry {
  size_t off;    /* full path in the arena */
  size_t dirlen; /* length of its directory part (without the final '/') */
  int label;
  const char *path; /* set once the arena stops moving, for sorting */
} entry;

typedef struct scan {
  arena names; /* class names and paths */
  entry *ents;
  int n, cap;
} scan;

static int is_image_name(const char *name) {
  const char *dot = strrchr(name, '.');
  if (!dot) return 0;
  return strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 ||
         strcasecmp(dot, ".png") == 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Keras orders a class's files by sorted(os.walk()) root, then file name. */
static int cmp_entry(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->label != y->label) return x->label < y->label ? -1 : 1;
  size_t m = x->dirlen < y->dirlen ? x->dirlen : y->dirlen;
  int c = memcmp(x->path, y->path, m);
  if (c) return c;
  if (x->dirlen != y->dirlen) return x->dirlen < y->dirlen ? -1 : 1;
  return strcmp(x->path + x->dirlen + 1, y->path + y->dirlen + 1);
}

/* Reads the names in dir (without "." and ".."), sorted. */
static int list_dir(const char *dir, char ***names_out, int *n_out, clt_err *e) {
  char **names = NULL;
  int n = 0, cap = 0, rc = CLT_OK;
  DIR *d = opendir(dir);
  if (!d) {
    rc = clt_fail(e, CLT_ERR_IO, "photo folder %s: cannot read directory: %s", dir,
                  strerror(errno));
    goto cleanup;
  }
  for (;;) {
    errno = 0;
    struct dirent *de = readdir(d);
    if (!de) {
      if (errno)
        rc = clt_fail(e, CLT_ERR_IO, "photo folder %s: cannot read directory: %s", dir,
                      strerror(errno));
      break;
    }
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (n == cap) {
      int nc = cap ? cap * 2 : 64;
      char **g = realloc(names, (size_t)nc * sizeof *g);
      if (!g) {
        rc = clt_fail(e, CLT_ERR_NOMEM, "photo folder %s: out of memory listing it", dir);
        goto cleanup;
      }
      names = g;
      cap = nc;
    }
    names[n] = strdup(de->d_name);
    if (!names[n]) {
      rc = clt_fail(e, CLT_ERR_NOMEM, "photo folder %s: out of memory listing it", dir);
      goto cleanup;
    }
    n++;
  }
  if (rc == CLT_OK && n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);
cleanup:
  if (d) closedir(d);
  if (rc != CLT_OK) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    names = NULL;
    n = 0;
  }
  *names_out = names;
  *n_out = n;
  return rc;
}

static void free_names(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

static char *join_path(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *p = malloc(la + lb + 2);
  if (!p) return NULL;
  memcpy(p, a, la);
  p[la] = '/';
  memcpy(p + la + 1, b, lb + 1);
  return p;
}

/* Adds the image files under dir (recursively, hidden directories skipped) with `label`. */
static int walk(scan *s, const char *dir, int label, int depth, clt_err *e) {
  char **names = NULL, *child = NULL;
  int n = 0, rc = list_dir(dir, &names, &n, e);
  if (rc != CLT_OK) goto cleanup;
  for (int i = 0; i < n; i++) {
    free(child);
    child = join_path(dir, names[i]);
    if (!child) {
      rc = clt_fail(e, CLT_ERR_NOMEM, "photo folder %s: out of memory", dir);
      goto cleanup;
    }
    struct stat st;
    int isdir = stat(child, &st) == 0 && S_ISDIR(st.st_mode);
    if (isdir) {
      if (names[i][0] == '.') continue;
      if (depth >= MAX_WALK_DEPTH) {
        rc = clt_fail(e, CLT_ERR_FORMAT,
                      "photo folder %s: nested deeper than %d directories (symlink loop?)", child,
                      MAX_WALK_DEPTH);
        goto cleanup;
      }
      rc = walk(s, child, label, depth + 1, e);
      if (rc != CLT_OK) goto cleanup;
      continue;
    }
    /* Unreadable or dangling entries with an image name are kept: the magic-byte
     * check then reports them with their cause. */
    if (!is_image_name(names[i])) continue;
    if (s->n == s->cap) {
      int nc = s->cap ? s->cap * 2 : 256;
      entry *g = realloc(s->ents, (size_t)nc * sizeof *g);
      if (!g) {
        rc = clt_fail(e, CLT_ERR_NOMEM, "photo folder %s: out of memory", dir);
        goto cleanup;
      }
      s->ents = g;
      s->cap = nc;
    }
    if (s->n == INT_MAX - 1) {
      rc = clt_fail(e, CLT_ERR_ARG, "photo folder %s: too many files", dir);
      goto cleanup;
    }
    entry *en = &s->ents[s->n];
    if (arena_add(&s->names, child, strlen(child), &en->off) != CLT_OK) {
      rc = clt_fail(e, CLT_ERR_NOMEM, "photo folder %s: out of memory", dir);
      goto cleanup;
    }
    en->dirlen = strlen(dir);
    en->label = label;
    en->path = NULL;
    s->n++;
  }
cleanup:
  free(child);
  free_names(names, n);
  return rc;
}

/* Copies the given entries (in that order) and the class names into a new subset. */
static int make_subset(const scan *s, const size_t *class_off, int classes, const int *pick, int n,
                       int image_size, clt_photos **out, clt_err *e) {
  int rc = CLT_OK;
  clt_photos *p = calloc(1, sizeof *p);
  if (!p) goto nomem;
  p->count = n;
  p->classes = classes;
  p->image_size = image_size;
  p->max_pixels = clt_photos_max_pixels();
  size_t bytes = 0;
  for (int c = 0; c < classes; c++) bytes += strlen(s->names.buf + class_off[c]) + 1;
  for (int i = 0; i < n; i++) bytes += strlen(s->ents[pick[i]].path) + 1;
  p->text = malloc(bytes ? bytes : 1);
  p->path_off = malloc((size_t)(n ? n : 1) * sizeof *p->path_off);
  p->labels = malloc((size_t)(n ? n : 1) * sizeof *p->labels);
  p->class_off = malloc((size_t)(classes ? classes : 1) * sizeof *p->class_off);
  if (!p->text || !p->path_off || !p->labels || !p->class_off) goto nomem;
  size_t at = 0;
  for (int c = 0; c < classes; c++) {
    const char *name = s->names.buf + class_off[c];
    size_t l = strlen(name) + 1;
    memcpy(p->text + at, name, l);
    p->class_off[c] = at;
    at += l;
  }
  for (int i = 0; i < n; i++) {
    const entry *en = &s->ents[pick[i]];
    size_t l = strlen(en->path) + 1;
    memcpy(p->text + at, en->path, l);
    p->path_off[i] = at;
    p->labels[i] = en->label;
    at += l;
  }
  *out = p;
  return CLT_OK;
nomem:
  rc = clt_fail(e, CLT_ERR_NOMEM, "photo folder: out of memory building a subset of %d files", n);
  clt_photos_free(p);
  *out = NULL;
  return rc;
}

enum { KIND_BAD = 0, KIND_JPEG = 1, KIND_PNG = 2 };

static int sniff(const unsigned char *b, size_t n) {
  static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return KIND_JPEG;
  if (n >= 8 && memcmp(b, png_sig, 8) == 0) return KIND_PNG;
  return KIND_BAD;
}

/* 0 if path starts like a JPEG or PNG, else writes the cause into why. */
static int check_magic(const char *path, char *why, size_t whylen) {
  unsigned char b[8];
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(why, whylen, "cannot open: %s", strerror(errno));
    return -1;
  }
  size_t got = fread(b, 1, sizeof b, f);
  int err = ferror(f);
  fclose(f);
  if (err) {
    snprintf(why, whylen, "cannot read");
    return -1;
  }
  if (sniff(b, got) == KIND_BAD) {
    snprintf(why, whylen,
             got < 3 ? "too short to be an image (%zu bytes)"
                     : "neither JPEG nor PNG (magic bytes)",
             got);
    return -1;
  }
  return 0;
}

int clt_photos_is_folder(const char *dir) {
  char **names = NULL;
  int n = 0, found = 0;
  if (list_dir(dir, &names, &n, NULL) != CLT_OK) return 0;
  for (int i = 0; i < n && !found; i++) {
    if (names[i][0] == '.') continue;
    char *child = join_path(dir, names[i]);
    struct stat st;
    if (child && stat(child, &st) == 0 && S_ISDIR(st.st_mode)) found = 1;
    free(child);
  }
  free_names(names, n);
  return found;
}

int clt_photos_open(const char *dir, int image_size, double validation_split, uint64_t seed,
                    clt_photos **train, clt_photos **validation, clt_err *e) {
  int rc = CLT_OK;
  scan s = {0};
  char *root = NULL, *child = NULL, **names = NULL;
  int nnames = 0, classes = 0;
  size_t *class_off = NULL;
  int *perm = NULL;
  *train = NULL;
  if (validation) *validation = NULL;

  if (image_size < 1 || image_size > CLT_PHOTOS_MAX_SIZE) {
    rc = clt_fail(e, CLT_ERR_ARG, "photo folder %s: image size %d outside [1, %d]", dir, image_size,
                  CLT_PHOTOS_MAX_SIZE);
    goto cleanup;
  }
  if (!(validation_split >= 0.0 && validation_split < 1.0)) {
    rc = clt_fail(e, CLT_ERR_ARG, "photo folder %s: validation split %g outside [0, 1)", dir,
                  validation_split);
    goto cleanup;
  }
  if (validation_split > 0 && !validation) {
    rc = clt_fail(e, CLT_ERR_ARG, "photo folder %s: validation split without a validation subset",
                  dir);
    goto cleanup;
  }
  /* Paths are reported as DIR/class/file without a doubled '/'. */
  root = strdup(dir);
  if (!root) goto nomem;
  for (size_t l = strlen(root); l > 1 && root[l - 1] == '/'; l--) root[l - 1] = '\0';

  struct stat st;
  if (stat(root, &st) != 0) {
    rc = clt_fail(e, CLT_ERR_IO, "photo folder %s: %s", root, strerror(errno));
    goto cleanup;
  }
  if (!S_ISDIR(st.st_mode)) {
    rc = clt_fail(e, CLT_ERR_IO, "photo folder %s: not a directory", root);
    goto cleanup;
  }
  rc = list_dir(root, &names, &nnames, e);
  if (rc != CLT_OK) goto cleanup;

  class_off = malloc((size_t)(nnames ? nnames : 1) * sizeof *class_off);
  if (!class_off) goto nomem;
  for (int i = 0; i < nnames; i++) { /* names are sorted, so labels follow strcmp order */
    if (names[i][0] == '.') continue;
    free(child);
    child = join_path(root, names[i]);
    if (!child) goto nomem;
    if (stat(child, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (arena_add(&s.names, names[i], strlen(names[i]), &class_off[classes]) != CLT_OK) goto nomem;
    int before = s.n;
    rc = walk(&s, child, classes, 1, e);
    if (rc != CLT_OK) goto cleanup;
    if (s.n == before) {
      rc = clt_fail(e, CLT_ERR_FORMAT,
                    "photo folder %s: class directory %s holds no .jpg, .jpeg or .png file", root,
                    names[i]);
      goto cleanup;
    }
    classes++;
  }
  if (classes == 0) {
    rc = clt_fail(e, CLT_ERR_FORMAT,
                  "photo folder %s: no class subdirectory (expected DIR/<class>/<image>.jpg|.png)",
                  root);
    goto cleanup;
  }
  for (int i = 0; i < s.n; i++) s.ents[i].path = s.names.buf + s.ents[i].off;
  qsort(s.ents, (size_t)s.n, sizeof *s.ents, cmp_entry);

  /* Magic bytes of every file, so most bad files surface before training. */
  int bad = 0, first_bad = -1;
  char why[256] = "", first_why[256] = "";
  for (int i = 0; i < s.n; i++) {
    if (check_magic(s.ents[i].path, why, sizeof why) != 0) {
      if (bad++ == 0) {
        first_bad = i;
        memcpy(first_why, why, sizeof why);
      }
    }
  }
  if (bad) {
    rc = clt_fail(e, CLT_ERR_FORMAT,
                  "file %s: %s (%d of %d files in %s are not readable JPEG or PNG)",
                  s.ents[first_bad].path, first_why, bad, s.n, root);
    goto cleanup;
  }

  int n = s.n, nval = 0;
  perm = malloc((size_t)n * sizeof *perm);
  if (!perm) goto nomem;
  for (int i = 0; i < n; i++) perm[i] = i;
  if (validation_split > 0) {
    clt_rng r;
    clt_rng_seed(&r, seed, CLT_PHOTOS_SPLIT_STREAM);
    for (int i = n - 1; i > 0; i--) {
      int j = (int)clt_rng_below(&r, (uint32_t)i + 1);
      int t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    nval = (int)floor(validation_split * n);
    if (nval == 0 || nval >= n) {
      rc = clt_fail(e, CLT_ERR_ARG, "photo folder %s: validation split %g of %d files leaves %s",
                    root, validation_split, n,
                    nval == 0 ? "no validation file" : "no training file");
      goto cleanup;
    }
  }
  rc = make_subset(&s, class_off, classes, perm, n - nval, image_size, train, e);
  if (rc != CLT_OK) goto cleanup;
  if (nval > 0) {
    rc = make_subset(&s, class_off, classes, perm + (n - nval), nval, image_size, validation, e);
    if (rc != CLT_OK) goto cleanup;
  }
  goto cleanup;
nomem:
  rc = clt_fail(e, CLT_ERR_NOMEM, "photo folder %s: out of memory", dir);
cleanup:
  if (rc != CLT_OK) {
    clt_photos_free(*train);
    *train = NULL;
    if (validation) {
      clt_photos_free(*validation);
      *validation = NULL;
    }
  }
  free(perm);
  free(class_off);
  free_names(names, nnames);
  free(child);
  free(root);
  free(s.ents);
  free(s.names.buf);
  return rc;
}

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

static void scratch_free(scratch *s) {
  free(s->rows);
  free(s->img);
  free(s->ptrs);
  free(s->x0);
  free(s->x1);
  free(s->xl);
  memset(s, 0, sizeof *s);
}

static int scratch_init(scratch *s, int image_size) {
  memset(s, 0, sizeof *s);
  s->x0 = malloc((size_t)image_size * sizeof *s->x0);
  s->x1 = malloc((size_t)image_size * sizeof *s->x1);
  s->xl = malloc((size_t)image_size * sizeof *s->xl);
  if (!s->x0 || !s->x1 || !s->xl) {
    scratch_free(s);
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
    for (png_uint_32 y = 0; y < height; y++) {
      unsigned char *row = j->s->rows + stride * (y & 1);
      png_read_row(png, row, NULL);
      resizer_push(&r, row);
    }
  }
  png_destroy_read_struct(&png, &info, NULL);
  return CLT_OK;
}

static int decode_with(const clt_photos *p, int i, scratch *s, unsigned char *rgb, clt_err *e) {
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
  switch (sniff(magic, got)) {
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
  if (scratch_init(&s, p->image_size) != CLT_OK)
    return clt_fail(e, CLT_ERR_NOMEM, "file %s: cannot decode: out of memory",
                    clt_photos_path(p, i));
  int rc = decode_with(p, i, &s, rgb, e);
  scratch_free(&s);
  return rc;
}

/* ------------------------------------------------------------------------- */
/* Loader                                                                     */

/* Ring slot: batch `step` lives in slot step % depth until all consumers put it.
 * Decoders claim images one at a time in pass order, under the mutex; a slot may be
 * claimed for a new step only once its previous step is released. */
typedef struct slot {
  unsigned char *pixels; /* max_batch images */
  int *labels;
  int step; /* -1: never used in this pass */
  int need, filled, puts;
} slot;

typedef struct worker {
  clt_loader *l;
  pthread_t tid;
  scratch s;
  clt_err err;
} worker;

enum { CACHE_EMPTY = 0, CACHE_FILLING = 1, CACHE_READY = 2 };

struct clt_loader {
  const clt_photos *p;
  int consumers, max_batch, depth, nthreads, started;
  size_t img_bytes;
  slot *slots;
  worker *workers;
  pthread_mutex_t mu;
  pthread_cond_t work_cv;  /* decoders: something became claimable, or quit */
  pthread_cond_t ready_cv; /* consumers: a batch completed, failed or was cancelled */
  pthread_cond_t idle_cv;  /* start(): no decoder holds an image of the old pass */
  int sync_ok;
  /* current pass */
  int *order, order_cap;
  int count, batch, nsteps;
  int active, next, released, busy, cancelled, failed, quit;
  int fail_step; /* earliest step with a failed image; steps before it still complete */
  clt_err fail_err;
  /* cache: examples 0..cache_n-1, img_bytes each */
  unsigned char *cache;
  unsigned char *cache_state;
  int cache_n;
  size_t decoded;
  clt_trace *trace; /* --trace: each decode is a span of its decoder's track */
};

static int claimable(const clt_loader *l) {
  if (!l->active || l->cancelled || l->failed || l->next >= l->count) return 0;
  if (l->next % l->batch) return 1; /* its slot was taken by the step's first image */
  const slot *sl = &l->slots[(l->next / l->batch) % l->depth];
  return sl->step < 0 || sl->puts == l->consumers;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  clt_loader *l = w->l;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->quit && !claimable(l)) pthread_cond_wait(&l->work_cv, &l->mu);
    if (l->quit) break;
    int k = l->next++, step = k / l->batch, j = k % l->batch;
    slot *sl = &l->slots[step % l->depth];
    if (j == 0) {
      sl->step = step;
      sl->need = l->count - k < l->batch ? l->count - k : l->batch;
      sl->filled = 0;
      sl->puts = 0;
    }
    int idx = l->order[k], from_cache = 0, to_cache = 0;
    if (idx < l->cache_n) {
      if (l->cache_state[idx] == CACHE_READY) {
        from_cache = 1;
      } else if (l->cache_state[idx] == CACHE_EMPTY) {
        l->cache_state[idx] = CACHE_FILLING; /* a duplicate in flight just decodes uncached */
        to_cache = 1;
      }
    }
    l->busy++;
    clt_trace *trace = l->trace; /* set under the lock by photos_trace */
    pthread_mutex_unlock(&l->mu);

    unsigned char *dst = sl->pixels + (size_t)j * l->img_bytes;
    unsigned char *cached = l->cache ? l->cache + (size_t)idx * l->img_bytes : NULL;
    int rc = CLT_OK;
    const double t0 = trace ? clt_now_seconds() : 0;
    if (from_cache && cached) memcpy(dst, cached, l->img_bytes);
    else rc = decode_with(l->p, idx, &w->s, dst, &w->err);
    if (trace) {
      clt_trace_span(trace, CLT_TRACE_DATA_PID, (int)(w - l->workers) + 1,
                     from_cache ? "copy from cache" : "decode", NULL, t0, clt_now_seconds(), step);
    }
    if (rc == CLT_OK && to_cache && cached) memcpy(cached, dst, l->img_bytes);
    sl->labels[j] = l->p->labels[idx];

    pthread_mutex_lock(&l->mu);
    l->busy--;
    if (to_cache) l->cache_state[idx] = rc == CLT_OK ? CACHE_READY : CACHE_EMPTY;
    if (!from_cache && rc == CLT_OK) l->decoded++;
    if (!l->cancelled) { /* else the pass is over: the image is discarded */
      if (rc != CLT_OK) {
        /* Claims are in order, so every image of an earlier step is already in
         * flight: those steps still complete, and every consumer meets the error
         * at the same step. */
        if (!l->failed || step < l->fail_step) {
          l->failed = 1;
          l->fail_step = step;
          l->fail_err = w->err;
        }
        pthread_cond_broadcast(&l->ready_cv);
      } else if (++sl->filled == sl->need) {
        pthread_cond_broadcast(&l->ready_cv);
      }
    }
    if (l->busy == 0) pthread_cond_broadcast(&l->idle_cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

void clt_loader_destroy(clt_loader *l) {
  if (!l) return;
  if (l->sync_ok) {
    pthread_mutex_lock(&l->mu);
    l->quit = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
    for (int t = 0; t < l->started; t++) pthread_join(l->workers[t].tid, NULL);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->idle_cv);
    pthread_mutex_destroy(&l->mu);
  }
  if (l->workers)
    for (int t = 0; t < l->nthreads; t++) scratch_free(&l->workers[t].s);
  free(l->workers);
  if (l->slots)
    for (int d = 0; d < l->depth; d++) {
      free(l->slots[d].pixels);
      free(l->slots[d].labels);
    }
  free(l->slots);
  free(l->order);
  free(l->cache);
  free(l->cache_state);
  free(l);
}

int clt_loader_create(const clt_photos *p, int consumers, int max_batch, int depth, int threads,
                      size_t cache_bytes, clt_loader **out, clt_err *e) {
  int rc = CLT_OK;
  clt_loader *l = NULL;
  *out = NULL;
  if (!p || consumers < 1 || max_batch < 1 || depth < 1 || threads < 0) {
    rc = clt_fail(e, CLT_ERR_ARG,
                  "photo loader: bad arguments (consumers %d, max batch %d, depth %d, threads %d)",
                  consumers, max_batch, depth, threads);
    goto cleanup;
  }
  l = calloc(1, sizeof *l);
  if (!l) goto nomem;
  l->p = p;
  l->consumers = consumers;
  l->max_batch = max_batch;
  l->depth = depth;
  l->img_bytes = (size_t)p->image_size * p->image_size * 3;
  if ((size_t)max_batch > SIZE_MAX / 2 / l->img_bytes) {
    rc = clt_fail(e, CLT_ERR_ARG, "photo loader: max batch %d too large", max_batch);
    goto cleanup;
  }
  if (threads == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n < 1 ? 1 : n > 256 ? 256 : (int)n;
  }
  if ((long long)threads > (long long)depth * max_batch)
    threads = depth * max_batch; /* more would idle */

  l->slots = calloc((size_t)depth, sizeof *l->slots);
  if (!l->slots) goto nomem;
  for (int d = 0; d < depth; d++) {
    l->slots[d].pixels = malloc((size_t)max_batch * l->img_bytes);
    l->slots[d].labels = malloc((size_t)max_batch * sizeof *l->slots[d].labels);
    l->slots[d].step = -1;
    if (!l->slots[d].pixels || !l->slots[d].labels) goto nomem;
  }
  l->order_cap = p->count > 0 ? p->count : 1;
  l->order = malloc((size_t)l->order_cap * sizeof *l->order);
  if (!l->order) goto nomem;
  size_t fit = cache_bytes / l->img_bytes;
  l->cache_n = fit < (size_t)p->count ? (int)fit : p->count;
  if (l->cache_n > 0) {
    l->cache = malloc((size_t)l->cache_n * l->img_bytes);
    l->cache_state = calloc((size_t)l->cache_n, 1);
    if (!l->cache || !l->cache_state) {
      rc = clt_fail(e, CLT_ERR_NOMEM,
                    "photo loader: cannot allocate a %.1f MiB image cache (lower it)",
                    (double)l->cache_n * l->img_bytes / 1048576.0);
      goto cleanup;
    }
  }
  l->workers = calloc((size_t)threads, sizeof *l->workers);
  if (!l->workers) goto nomem;
  l->nthreads = threads;
  for (int t = 0; t < threads; t++) {
    l->workers[t].l = l;
    if (scratch_init(&l->workers[t].s, p->image_size) != CLT_OK) goto nomem;
  }
  if (pthread_mutex_init(&l->mu, NULL) != 0) goto nomem;
  if (pthread_cond_init(&l->work_cv, NULL) != 0) {
    pthread_mutex_destroy(&l->mu);
    goto nomem;
  }
  if (pthread_cond_init(&l->ready_cv, NULL) != 0) {
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
    goto nomem;
  }
  if (pthread_cond_init(&l->idle_cv, NULL) != 0) {
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
    goto nomem;
  }
  l->sync_ok = 1;
  for (int t = 0; t < threads; t++) {
    int err = pthread_create(&l->workers[t].tid, NULL, worker_main, &l->workers[t]);
    if (err) {
      rc = clt_fail(e, CLT_ERR_NOMEM, "photo loader: cannot start decoding thread %d of %d: %s",
                    t + 1, threads, strerror(err));
      goto cleanup;
    }
    l->started++;
  }
  *out = l;
  l = NULL;
  goto cleanup;
nomem:
  rc = clt_fail(e, CLT_ERR_NOMEM, "photo loader: out of memory (%d slots of %d images of %dx%d)",
                depth, max_batch, p->image_size, p->image_size);
cleanup:
  clt_loader_destroy(l); /* joins any thread already started */
  return rc;
}

int clt_loader_start(clt_loader *l, const int *order, int count, int batch, clt_err *e) {
  int rc = CLT_OK;
  if (count < 0 || batch < 1 || batch > l->max_batch)
    return clt_fail(e, CLT_ERR_ARG, "photo loader: bad pass (count %d, batch %d, max batch %d)",
                    count, batch, l->max_batch);
  for (int i = 0; i < count; i++)
    if (order[i] < 0 || order[i] >= l->p->count)
      return clt_fail(e, CLT_ERR_ARG, "photo loader: order[%d] = %d outside [0, %d)", i, order[i],
                      l->p->count);
  pthread_mutex_lock(&l->mu);
  if (l->active && !l->cancelled && !l->failed && l->released < l->nsteps) {
    rc = clt_fail(e, CLT_ERR_ARG,
                  "photo loader: new pass while %d of %d batches of the last one are not consumed",
                  l->nsteps - l->released, l->nsteps);
    goto cleanup;
  }
  while (l->busy > 0) pthread_cond_wait(&l->idle_cv, &l->mu); /* they still write old slots */
  if (count > l->order_cap) {
    /* count > order_cap >= 0: never a 0-byte realloc */
    // NOLINTNEXTLINE(clang-analyzer-optin.portability.UnixAPI)
    int *g = realloc(l->order, (size_t)count * sizeof *g);
    if (!g) {
      rc = clt_fail(e, CLT_ERR_NOMEM, "photo loader: out of memory for an order of %d", count);
      goto cleanup;
    }
    l->order = g;
    l->order_cap = count;
  }
  if (count) memcpy(l->order, order, (size_t)count * sizeof *order);
  l->count = count;
  l->batch = batch;
  l->nsteps = (count + batch - 1) / batch;
  l->next = l->released = 0;
  l->cancelled = l->failed = 0;
  l->fail_step = INT_MAX;
  for (int d = 0; d < l->depth; d++) {
    l->slots[d].step = -1;
    l->slots[d].need = l->slots[d].filled = l->slots[d].puts = 0;
  }
  l->active = 1;
  pthread_cond_broadcast(&l->work_cv);
cleanup:
  pthread_mutex_unlock(&l->mu);
  return rc;
}

int clt_loader_get(clt_loader *l, int step, clt_photo_batch *out, double *wait_seconds,
                   clt_err *e) {
  int rc = CLT_OK;
  double t0 = 0;
  int waited = 0;
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&l->mu);
  if (!l->active || step < 0 || step >= l->nsteps) {
    rc = clt_fail(e, CLT_ERR_ARG, "photo loader: step %d outside the pass (%d steps)", step,
                  l->active ? l->nsteps : 0);
    goto cleanup;
  }
  for (;;) {
    const slot *sl = &l->slots[step % l->depth];
    if (l->cancelled || l->quit) {
      rc = clt_fail(e, CLT_ERR_ARG, "photo loader: pass cancelled (step %d)", step);
      goto cleanup;
    }
    if (l->failed && step >= l->fail_step) {
      rc = clt_fail(e, l->fail_err.code, "%s", l->fail_err.msg);
      goto cleanup;
    }
    if (sl->step == step && sl->filled == sl->need && sl->puts < l->consumers) {
      out->pixels = sl->pixels;
      out->labels = sl->labels;
      out->count = sl->need;
      goto cleanup;
    }
    if (sl->step > step || (sl->step == step && sl->puts == l->consumers)) {
      rc = clt_fail(e, CLT_ERR_ARG, "photo loader: step %d got after every consumer put it", step);
      goto cleanup;
    }
    if (!waited) {
      waited = 1;
      t0 = clt_now_seconds();
    }
    pthread_cond_wait(&l->ready_cv, &l->mu);
  }
cleanup:
  pthread_mutex_unlock(&l->mu);
  if (wait_seconds) *wait_seconds = waited ? clt_now_seconds() - t0 : 0.0;
  return rc;
}

void clt_loader_put(clt_loader *l, int step) {
  pthread_mutex_lock(&l->mu);
  slot *sl = &l->slots[step >= 0 ? step % l->depth : 0];
  if (l->active && step >= 0 && step < l->nsteps && sl->step == step && sl->puts < l->consumers &&
      ++sl->puts == l->consumers) {
    l->released++;
    pthread_cond_broadcast(&l->work_cv);
  }
  pthread_mutex_unlock(&l->mu);
}

void clt_loader_cancel(clt_loader *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  if (l->active) l->cancelled = 1;
  pthread_cond_broadcast(&l->ready_cv);
  pthread_cond_broadcast(&l->work_cv);
  pthread_mutex_unlock(&l->mu);
}

size_t clt_loader_decoded(const clt_loader *l) {
  clt_loader *m = (clt_loader *)
      l; /* the mutex guards the counter; the loader is logically unchanged */
  pthread_mutex_lock(&m->mu);
  size_t n = m->decoded;
  pthread_mutex_unlock(&m->mu);
  return n;
}

/* ------------------------------------------------------------------------- */
/* The batch source                                                           */

/* Decoded photos kept in host memory across passes (later epochs decode nothing
 * when the set fits), and how many global batches are decoded ahead. */
#define SOURCE_CACHE_BYTES ((size_t)2 << 30)
#define SOURCE_BATCHES_AHEAD 3

typedef struct photo_replica {
  clt_replica *replica;
  cl_mem staging; /* the largest slice, uint8 */
  cl_kernel convert;
} photo_replica;

typedef struct photos_source {
  clt_photos *p;
  int count;
  const char **names; /* classes pointers into p */
  clt_loader *loader;
  photo_replica *reps;
  int n;
  int global;
  int mode; /* clt_preprocess, as the kernel takes it */
} photos_source;

/* Names each decoder's track; the decoders then record every image. */
static void photos_trace(void *ctx, clt_trace *trace) {
  photos_source *s = ctx;
  if (!s->loader) return;
  for (int t = 0; t < s->loader->nthreads; t++) {
    char name[32];
    snprintf(name, sizeof name, "decoder %d", t + 1);
    clt_trace_name(trace, CLT_TRACE_DATA_PID, t + 1, "photo decoding (host threads)", name);
  }
  pthread_mutex_lock(&s->loader->mu);
  s->loader->trace = trace;
  pthread_mutex_unlock(&s->loader->mu);
}

static void photos_detach(void *ctx) {
  photos_source *s = ctx;
  clt_loader_destroy(s->loader);
  s->loader = NULL;
  for (int r = 0; r < s->n; r++) {
    if (s->reps[r].staging) clReleaseMemObject(s->reps[r].staging);
  }
  free(s->reps);
  s->reps = NULL;
  s->n = 0;
}

static int photos_attach(void *ctx, clt_replica *const *replicas, int n, int global_batch,
                         const int *max_slice, clt_preprocess pre, clt_err *e) {
  photos_source *s = ctx;
  const size_t image_bytes = (size_t)s->p->image_size * s->p->image_size * 3;
  int status = clt_loader_create(s->p, n, global_batch, SOURCE_BATCHES_AHEAD, 0, SOURCE_CACHE_BYTES,
                                 &s->loader, e);
  if (status) return status;
  s->reps = calloc((size_t)n, sizeof *s->reps);
  if (!s->reps) {
    photos_detach(s);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory attaching photos");
  }
  s->n = n;
  s->global = global_batch;
  s->mode = (int)pre;
  for (int r = 0; r < n && !status; r++) {
    photo_replica *pr = &s->reps[r];
    pr->replica = replicas[r];
    const size_t bytes = max_slice[r] ? (size_t)max_slice[r] * image_bytes : 1;
    status = clt_replica_alloc(pr->replica, bytes, "input staging", &pr->staging, e);
    if (!status)
      status = clt_replica_kernel(pr->replica, "data.cl", "", "convert_batch", &pr->convert, e);
  }
  if (status) photos_detach(s);
  return status;
}

static int photos_begin(void *ctx, const int *order, clt_err *e) {
  photos_source *s = ctx;
  return clt_loader_start(s->loader, order, s->count, s->global, e);
}

/* Uploads images [first, first + len) of the decoded batch and converts them. The
 * copies are complete when this returns, so the batch may be put. */
static int upload_slice(photos_source *s, photo_replica *pr, const clt_photo_batch *b, int first,
                        int len, cl_mem x, cl_mem y, clt_err *e) {
  if (len == 0) return CLT_OK;
  clt_replica_scope(pr->replica, "input", "batch");
  const size_t image_bytes = (size_t)s->p->image_size * s->p->image_size * 3;
  const size_t bytes = (size_t)len * image_bytes;
  int status = clt_source_upload(pr->replica, pr->staging, b->pixels + first * image_bytes, bytes,
                                 "uploading a batch", e);
  if (!status) {
    status = clt_source_upload(pr->replica, y, b->labels + first, (size_t)len * sizeof(int),
                               "uploading labels", e);
  }
  if (status) return status;
  int n = (int)bytes, channels = 3;
  clt_karg args[] = {CLT_ARG(pr->staging), CLT_ARG(n), CLT_ARG(channels), CLT_ARG(s->mode),
                     CLT_ARG(x)};
  return clt_launch1d(pr->replica, pr->convert, "convert_batch", args, 5, bytes, e);
}

static int photos_load(void *ctx, int rank, int step, int first, int len, cl_mem x, cl_mem y,
                       double *waited, clt_err *e) {
  photos_source *s = ctx;
  clt_photo_batch b;
  int status = clt_loader_get(s->loader, step, &b, waited, e);
  if (status) return status;
  status = upload_slice(s, &s->reps[rank], &b, first, len, x, y, e);
  clt_loader_put(s->loader, step); /* every replica puts every step, failed or not */
  return status;
}

static void photos_cancel(void *ctx) {
  photos_source *s = ctx;
  clt_loader_cancel(s->loader);
}

static void photos_free(void *ctx) {
  photos_source *s = ctx;
  if (!s) return;
  photos_detach(s);
  clt_photos_free(s->p);
  free(s->names);
  free(s);
}

int clt_photos_source(clt_photos *p, int count, clt_source **out, clt_err *e) {
  static const clt_source_i iface = {.attach = photos_attach,
                                     .begin = photos_begin,
                                     .load = photos_load,
                                     .cancel = photos_cancel,
                                     .detach = photos_detach,
                                     .trace = photos_trace,
                                     .free = photos_free};
  *out = NULL;
  if (count < 0 || count > p->count) {
    const int status = clt_fail(e, CLT_ERR_ARG, "photo source: %d of %d examples", count, p->count);
    clt_photos_free(p);
    return status;
  }
  photos_source *s = calloc(1, sizeof *s);
  const char **names = malloc((size_t)p->classes * sizeof *names);
  if (!s || !names) {
    free(s);
    free(names);
    clt_photos_free(p);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for a photo source");
  }
  for (int c = 0; c < p->classes; c++) names[c] = clt_photos_class_name(p, c);
  s->p = p;
  s->count = count;
  s->names = names;
  const clt_source_info info = {.count = count,
                                .height = p->image_size,
                                .width = p->image_size,
                                .channels = 3,
                                .classes = p->classes,
                                .class_names = names};
  return clt_source_new(&iface, s, &info, out, e);
}
