/* Photo folders (Keras' image_dataset_from_directory): scanning DIR/<class>/... into
 * the sorted list of files, checking every file's magic bytes, and the split into
 * training and validation subsets. See photos.h. */
#define _POSIX_C_SOURCE 200809L /* opendir, strdup */

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "photos_impl.h"
#include "rng.h"

#define MAX_WALK_DEPTH 32 /* also stops symlink loops */

/* ------------------------------------------------------------------------- */
/* Subsets                                                                    */

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
const char *clt_photos_relative_path(const clt_photos *p, int i) {
  return i >= 0 && i < p->count ? p->text + p->path_off[i] + p->root_len : NULL;
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
static int make_subset(const scan *s, size_t root_len, const size_t *class_off, int classes,
                       const int *pick, int n, int image_size, clt_photos **out, clt_err *e) {
  int rc = CLT_OK;
  clt_photos *p = calloc(1, sizeof *p);
  if (!p) goto nomem;
  p->count = n;
  p->classes = classes;
  p->image_size = image_size;
  p->root_len = root_len;
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
  if (clt_photos_sniff(b, got) == KIND_BAD) {
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
                  "file %s: %s (%d of %d file%s in %s %s not readable JPEG or PNG)",
                  s.ents[first_bad].path, first_why, bad, s.n, s.n == 1 ? "" : "s", root,
                  bad == 1 ? "is" : "are");
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
      rc = clt_fail(e, CLT_ERR_ARG, "photo folder %s: validation split %g of %d file%s leaves %s",
                    root, validation_split, n, n == 1 ? "" : "s",
                    nval == 0 ? "no validation file" : "no training file");
      goto cleanup;
    }
  }
  rc = make_subset(&s, strlen(root) + 1, class_off, classes, perm, n - nval, image_size, train, e);
  if (rc != CLT_OK) goto cleanup;
  if (nval > 0) {
    rc = make_subset(&s, strlen(root) + 1, class_off, classes, perm + (n - nval), nval, image_size,
                     validation, e);
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
/* Files to predict                                                           */

/* Adds path as one entry of `label` (its own directory part: none). */
static int add_file(scan *s, const char *path, int label) {
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 256;
    entry *g = realloc(s->ents, (size_t)nc * sizeof *g);
    if (!g) return CLT_ERR_NOMEM;
    s->ents = g;
    s->cap = nc;
  }
  entry *en = &s->ents[s->n];
  if (arena_add(&s->names, path, strlen(path), &en->off) != CLT_OK) return CLT_ERR_NOMEM;
  en->dirlen = 0;
  en->label = label;
  en->path = NULL;
  s->n++;
  return CLT_OK;
}

/* Adds paths[a] (a file, or a folder's image files) with label a; a path that cannot
 * be used is told to skip. Fails only for memory. */
static int add_argument(scan *s, const char *path, int a, clt_photos_skip_fn skip, void *ctx,
                        clt_err *e) {
  clt_err why = {0};
  struct stat st;
  char *root = strdup(path);
  if (!root) return clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory listing it", path);
  for (size_t l = strlen(root); l > 1 && root[l - 1] == '/'; l--) root[l - 1] = '\0';
  int rc = CLT_OK;
  if (stat(root, &st) != 0) {
    clt_fail(&why, CLT_ERR_IO, "%s: %s", path, strerror(errno));
  } else if (S_ISREG(st.st_mode)) {
    if (add_file(s, path, a) != CLT_OK) rc = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", path);
  } else if (!S_ISDIR(st.st_mode)) {
    clt_fail(&why, CLT_ERR_IO, "%s: neither a file nor a folder", path);
  } else {
    const int before = s->n;
    rc = walk(s, root, a, 1, &why);
    if (rc == CLT_ERR_NOMEM) {
      *e = why;
    } else if (rc != CLT_OK) {
      s->n = before; /* a folder is used whole or not at all */
      rc = CLT_OK;
    } else if (s->n == before) {
      clt_fail(&why, CLT_ERR_FORMAT, "%s: a folder holding no .jpg, .jpeg or .png file", path);
    }
  }
  if (why.code && rc == CLT_OK && skip) skip(ctx, a, &why);
  free(root);
  return rc;
}

int clt_photos_open_files(const char *const *paths, int n, int image_size, clt_photos_skip_fn skip,
                          void *ctx, clt_photos **out, clt_err *e) {
  scan s = {0};
  size_t class_off = 0;
  int *pick = NULL, rc = CLT_OK;
  *out = NULL;
  if (image_size < 1 || image_size > CLT_PHOTOS_MAX_SIZE)
    return clt_fail(e, CLT_ERR_ARG, "image size %d outside [1, %d]", image_size,
                    CLT_PHOTOS_MAX_SIZE);
  if (arena_add(&s.names, "images", 6, &class_off) != CLT_OK) goto nomem;
  for (int a = 0; a < n && !rc; a++) rc = add_argument(&s, paths[a], a, skip, ctx, e);
  if (rc) goto cleanup;
  for (int i = 0; i < s.n; i++) s.ents[i].path = s.names.buf + s.ents[i].off;
  if (s.n > 1)
    qsort(s.ents, (size_t)s.n, sizeof *s.ents, cmp_entry); /* by argument, then as Keras lists */
  pick = malloc((size_t)(s.n ? s.n : 1) * sizeof *pick);
  if (!pick) goto nomem;
  for (int i = 0; i < s.n; i++) pick[i] = i;
  rc = make_subset(&s, 0, &class_off, 1, pick, s.n, image_size, out, e);
  for (int i = 0; !rc && i < s.n; i++) (*out)->labels[i] = 0;
  goto cleanup;
nomem:
  rc = clt_fail(e, CLT_ERR_NOMEM, "out of memory listing the images to predict");
cleanup:
  free(pick);
  free(s.ents);
  free(s.names.buf);
  return rc;
}
