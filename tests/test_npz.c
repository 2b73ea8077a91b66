/* Tests for the .npz checkpoint format (src/formats/npz*.c): round trips, byte-for-byte
 * determinism, and clean refusal of truncated, corrupt and foreign archives.
 * test_npz_foreign.c builds, with a small zip writer, the archives that clt_npz_write
 * cannot produce (numpy-style zip64 extra fields, data descriptors, odd .npy headers,
 * deflated members as numpy.savez_compressed writes them, and deflate bombs). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkdtemp, dirent */
#endif

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "npz.h"
#include "test_npz.h"

static char dir[] = "/tmp/test_npz.XXXXXX";

const char *tmp(const char *name) {
  static char paths[8][512];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", dir, name);
  return p;
}

int save(const char *path, const void *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(buf, 1, n, f);
  return fclose(f) == 0 && w == n ? 0 : -1;
}

static unsigned char *load(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *buf = malloc(1 << 20);
  *n = buf ? fread(buf, 1, 1 << 20, f) : 0;
  fclose(f);
  return buf;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
uint64_t rnd(void) { /* xorshift64*: deterministic fuzzing */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

/* An error that names the file first, as every npz error must. */
int names_path(const clt_err *e, const char *path) {
  size_t n = strlen(path);
  return strncmp(e->msg, path, n) == 0 && e->msg[n] == ':' && !strchr(e->msg, '\n');
}

/* Reads path expecting failure with code and a message containing want. */
void expect_error(const char *what, const char *path, int code, const char *want) {
  clt_npz *z = NULL;
  clt_err e = {0};
  int st = clt_npz_read(path, &z, &e);
  int ok = st == code && e.code == code && !z && names_path(&e, path) &&
           (!want || strstr(e.msg, want));
  check(ok, "%s refused (%s)", what, ok ? e.msg : st ? e.msg : "accepted");
  clt_npz_free(z);
}

/* ---- the reference arrays ---- */

static float kernel[3 * 5 * 1 * 7];
static int64_t step = -1234567890123;
static uint64_t seeds[3] = {0, 42, UINT64_MAX};
static float moment[6];
double sums[2][2] = {{1.25, 3}, {-0.5, 64}};
static uint32_t model_buf[64], empty_buf[1];

static int reference(clt_npz_array *a) {
  for (size_t i = 0; i < sizeof kernel / sizeof kernel[0]; i++) {
    uint32_t bits = (uint32_t)rnd();
    memcpy(&kernel[i], &bits, 4); /* any bit pattern, NaNs included, must survive */
  }
  kernel[0] = -0.0f;
  kernel[1] = 1e-45f; /* denormal */
  for (int i = 0; i < 6; i++) moment[i] = (float)i / 7.0f;
  int n = 0;
  a[n] = (clt_npz_array){.name = "conv2d/kernel",
                         .dtype = "<f4",
                         .rank = 4,
                         .dims = {3, 5, 1, 7},
                         .data = kernel,
                         .bytes = sizeof kernel};
  n++;
  a[n] = (clt_npz_array){.name = "step", .dtype = "<i8", .rank = 0, .data = &step, .bytes = 8};
  n++;
  a[n] = (clt_npz_array){.name = "seeds",
                         .dtype = "<u8",
                         .rank = 1,
                         .dims = {3},
                         .data = seeds,
                         .bytes = sizeof seeds};
  n++;
  clt_npz_string(&a[n++], "model", "fashion-cnn \xc3\xa9 \xe2\x9c\x93", model_buf);
  a[n] = (clt_npz_array){
      .name = "empty", .dtype = "<f4", .rank = 2, .dims = {0, 4}, .data = NULL, .bytes = 0};
  n++;
  a[n] = (clt_npz_array){.name = "optimizer/conv2d/kernel/m",
                         .dtype = "<f4",
                         .rank = 1,
                         .dims = {6},
                         .data = moment,
                         .bytes = sizeof moment};
  n++;
  clt_npz_string(&a[n++], "note/\xc3\xa9t\xc3\xa9", "", empty_buf); /* a UTF-8 name */
  a[n] = (clt_npz_array){.name = "data/epoch_sums",
                         .dtype = "<f8",
                         .rank = 2,
                         .dims = {2, 2},
                         .data = sums,
                         .bytes = sizeof sums};
  n++;
  return n;
}

/* Whether z holds exactly a[0..n), in order, bit for bit. */
static int same_content(const clt_npz *z, const clt_npz_array *a, int n) {
  if (clt_npz_count(z) != n) return 0;
  for (int i = 0; i < n; i++) {
    const clt_npz_array *r = clt_npz_at(z, i);
    if (!r || r != clt_npz_find(z, a[i].name) || strcmp(r->name, a[i].name) != 0 ||
        strcmp(r->dtype, a[i].dtype) != 0 || r->rank != a[i].rank || r->bytes != a[i].bytes ||
        (r->bytes && memcmp(r->data, a[i].data, r->bytes) != 0))
      return 0;
    for (int d = 0; d < r->rank; d++)
      if (r->dims[d] != a[i].dims[d]) return 0;
  }
  return 1;
}
/* ---- tests ---- */

static void test_round_trip(void) {
  clt_npz_array a[8];
  int n = reference(a);
  const char *p1 = tmp("a.npz"), *p2 = tmp("b.npz");
  clt_err e = {0};
  int st = clt_npz_write(p1, a, n, &e);
  check(st == CLT_OK, "write %d arrays (%s)", n, st ? e.msg : "");
  clt_npz *z = NULL;
  st = clt_npz_read(p1, &z, &e);
  check(st == CLT_OK && same_content(z, a, n), "round trip is bit for bit (%s)", st ? e.msg : "");
  check(z && clt_npz_find(z, "nope") == NULL && clt_npz_at(z, n) == NULL &&
            clt_npz_at(z, -1) == NULL,
        "find/at of absent members give NULL");

  char text[64];
  const clt_npz_array *s = clt_npz_find(z, "model");
  int r = clt_npz_get_string(s, text, sizeof text);
  check(r == 0 && strcmp(s->dtype, "<U15") == 0 &&
            strcmp(text, "fashion-cnn \xc3\xa9 \xe2\x9c\x93") == 0,
        "string member: dtype %s, text read back as the UTF-8 written", s ? s->dtype : "?");
  r = clt_npz_get_string(s, text, 8);
  check(r == 0 && strcmp(text, "fashion") == 0, "string read into a small buffer is cut to fit");
  r = clt_npz_get_string(s, text, 16);
  check(r == 0 && strcmp(text, "fashion-cnn \xc3\xa9 ") == 0,
        "a character that does not fit is left out whole: %s", text);
  s = clt_npz_find(z, "note/\xc3\xa9t\xc3\xa9");
  r = clt_npz_get_string(s, text, sizeof text);
  check(r == 0 && strcmp(s->dtype, "<U1") == 0 && text[0] == '\0',
        "empty string is '<U1' holding NUL");
  check(clt_npz_get_string(clt_npz_find(z, "step"), text, sizeof text) == -1 &&
            clt_npz_get_string(clt_npz_find(z, "seeds"), text, sizeof text) == -1,
        "get_string refuses non-string members");
  clt_npz_free(z);

  st = clt_npz_write(p2, a, n, &e);
  size_t n1 = 0, n2 = 0;
  unsigned char *b1 = load(p1, &n1), *b2 = load(p2, &n2);
  check(st == CLT_OK && b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0,
        "writing twice gives identical bytes (%zu)", n1);

  /* Every .npy preamble is a multiple of 64 and ends in '\n', as numpy writes. */
  int members = 0, aligned = 0;
  for (size_t i = 0; b1 && i + 10 <= n1; i++)
    if (memcmp(b1 + i, "\x93NUMPY\x01\x00", 8) == 0) {
      size_t pre = 10 + (size_t)(b1[i + 8] | b1[i + 9] << 8);
      members++;
      aligned += pre % 64 == 0 && i + pre <= n1 && b1[i + pre - 1] == '\n';
    }
  check(members == n && aligned == n, ".npy preambles padded to 64 bytes (%d of %d)", aligned,
        members);
  free(b1);
  free(b2);

  const char *p0 = tmp("none.npz");
  st = clt_npz_write(p0, NULL, 0, &e);
  st = st ? st : clt_npz_read(p0, &z, &e);
  check(st == CLT_OK && clt_npz_count(z) == 0, "empty archive round trip (%s)", st ? e.msg : "");
  clt_npz_free(z);
}

static void test_write_validation(void) {
  clt_npz_array a[8];
  int n = reference(a);
  const char *p = tmp("a.npz");
  size_t before = 0, after = 0;
  unsigned char *b0 = load(p, &before);

  clt_err e = {0};
  clt_npz_array b[8];
  const char *names[] = {"empty name",   "unsupported dtype",   "rank 9",
                         "negative dim", "byte count mismatch", "duplicate name",
                         "NULL data",    "name of 128 bytes"};
  for (int k = 0; k < 8; k++) {
    memcpy(b, a, sizeof b);
    switch (k) {
      case 0:
        b[2].name[0] = '\0';
        break;
      case 1:
        strcpy(b[0].dtype, "<f8");
        break;
      case 2:
        b[0].rank = 9;
        break;
      case 3:
        b[0].dims[1] = -5;
        break;
      case 4:
        b[0].bytes -= 4;
        break;
      case 5:
        strcpy(b[3].name, "step");
        break;
      case 6:
        b[5].data = NULL;
        break;
      case 7: {
        char longname[200];
        memset(longname, 'x', 128);
        longname[128] = '\0';
        clt_npz_string(&b[3], longname, "abc", model_buf);
        break;
      }
    }
    int st = clt_npz_write(p, b, n, &e);
    check(st == CLT_ERR_ARG && names_path(&e, p), "write refuses %s (%s)", names[k], e.msg);
  }
  unsigned char *b1 = load(p, &after);
  check(b0 && b1 && before == after && memcmp(b0, b1, before) == 0,
        "refused writes leave the old file alone");
  free(b0);
  free(b1);

  if (access("/dev/full", W_OK) == 0) { /* every write fails there with ENOSPC */
    int st = clt_npz_write("/dev/full", a, n, &e);
    check(st == CLT_ERR_IO && names_path(&e, "/dev/full") && strstr(e.msg, "No space left"),
          "write failure reported (%s)", e.msg);
  }
  const char *q = tmp("no/such/dir.npz");
  int st = clt_npz_write(q, a, n, &e);
  check(st == CLT_ERR_IO && names_path(&e, q), "write into a missing directory (%s)", e.msg);
}

/* Offsets of each member's .npy in an archive that clt_npz_write made (local
 * headers back to back, no extra fields); returns the member count. */
static int members_of(const unsigned char *b, size_t n, size_t *npy_at, size_t *npy_len,
                      size_t *pre_len) {
  int k = 0;
  size_t at = 0;
  while (at + 30 <= n && b[at] == 'P' && b[at + 1] == 'K' && b[at + 2] == 3 && b[at + 3] == 4 &&
         k < 16) {
    size_t len = b[at + 18] | b[at + 19] << 8 | (size_t)b[at + 20] << 16 | (size_t)b[at + 21] << 24;
    size_t nl = b[at + 26] | b[at + 27] << 8;
    npy_at[k] = at + 30 + nl;
    npy_len[k] = len;
    pre_len[k] = 10 + (size_t)(b[npy_at[k] + 8] | b[npy_at[k] + 9] << 8);
    at = npy_at[k] + len;
    k++;
  }
  return k;
}

static void test_corruption(void) {
  clt_npz_array a[8];
  int n = reference(a);
  const char *good = tmp("a.npz"), *bad = tmp("bad.npz");
  clt_err e = {0};
  clt_npz_write(good, a, n, &e);
  size_t size = 0;
  unsigned char *b = load(good, &size), *c = malloc(size + 1);
  if (!b || !c || size == 0) {
    check(0, "cannot load %s", good);
    goto cleanup;
  }

  /* Every prefix of the archive: always a clean error naming the file. */
  int clean = 0, said_truncated = 0;
  for (size_t cut = 0; cut < size; cut++) {
    clt_npz *z = NULL;
    save(bad, b, cut);
    int st = clt_npz_read(bad, &z, &e);
    clean += st == CLT_ERR_FORMAT && !z && names_path(&e, bad);
    said_truncated += strstr(e.msg, "truncated") != NULL;
    clt_npz_free(z);
  }
  check(clean == (int)size, "all %zu truncations refused cleanly (%d)", size, clean);
  check(said_truncated >= (int)size - 2, "truncations are called truncated (%d of %zu)",
        said_truncated, size);
  save(bad, b, size / 2);
  expect_error("archive cut in half", bad, CLT_ERR_FORMAT,
               "truncated: end of central directory record not found");

  /* A flipped byte in each member's data and in each .npy header. */
  size_t at[16], len[16], pre[16];
  int m = members_of(b, size, at, len, pre);
  check(m == n, "found %d members in the archive", m);
  for (int i = 0; i < m; i++) {
    char what[200], want[200];
    snprintf(want, sizeof want, "member %.127s: CRC-32 mismatch (stored 0x", a[i].name);
    if (len[i] > pre[i]) {
      memcpy(c, b, size);
      c[at[i] + pre[i] + (len[i] - pre[i]) / 2] ^= 0x10;
      save(bad, c, size);
      snprintf(what, sizeof what, "flipped data byte in %.127s", a[i].name);
      expect_error(what, bad, CLT_ERR_FORMAT, want);
    }
    memcpy(c, b, size);
    c[at[i] + 13] ^= 0x01; /* inside 'descr' */
    save(bad, c, size);
    snprintf(what, sizeof what, "flipped .npy header byte in %.127s", a[i].name);
    expect_error(what, bad, CLT_ERR_FORMAT, want);
  }

  /* Every single byte inverted: refused cleanly, or harmless (a timestamp, an
   * attribute) and the content is unchanged. Never a crash. */
  int refused = 0, harmless = 0;
  for (size_t i = 0; i < size; i++) {
    clt_npz *z = NULL;
    memcpy(c, b, size);
    c[i] ^= 0xFF;
    save(bad, c, size);
    int st = clt_npz_read(bad, &z, &e);
    if (st) refused += st == CLT_ERR_FORMAT && !z && names_path(&e, bad);
    else harmless += same_content(z, a, n);
    clt_npz_free(z);
  }
  check(refused + harmless == (int)size, "every inverted byte refused (%d) or harmless (%d) of %zu",
        refused, harmless, size);

  /* Random damage: a few random bytes overwritten, or the file cut at a random
   * point, or random bytes appended. */
  int fuzz_ok = 0, fuzz_n = 3000;
  for (int it = 0; it < fuzz_n; it++) {
    clt_npz *z = NULL;
    size_t s = size;
    memcpy(c, b, size);
    int k = 1 + (int)(rnd() % 6);
    for (int j = 0; j < k; j++) c[rnd() % size] = (unsigned char)rnd();
    if (it % 3 == 1) s = rnd() % size;
    if (it % 3 == 2) c[s++] = (unsigned char)rnd();
    save(bad, c, s);
    int st = clt_npz_read(bad, &z, &e);
    fuzz_ok += st ? (st == CLT_ERR_FORMAT && !z && names_path(&e, bad)) : clt_npz_count(z) == n;
    clt_npz_free(z);
  }
  check(fuzz_ok == fuzz_n, "random damage handled cleanly (%d of %d)", fuzz_ok, fuzz_n);

  for (size_t i = 0; i < size; i++) c[i] = (unsigned char)rnd();
  save(bad, c, size);
  expect_error("random bytes", bad, CLT_ERR_FORMAT, "not a zip archive");
  save(bad, "", 0);
  expect_error("empty file", bad, CLT_ERR_FORMAT, "empty file");
  expect_error("missing file", tmp("missing.npz"), CLT_ERR_IO, "cannot open: No such file");
  const char *d = tmp("adir.npz");
  mkdir(d, 0700);
  expect_error("directory", d, CLT_ERR_IO, "is a directory");
cleanup:
  free(b);
  free(c);
}

static void test_finite(void) {
  float f[5] = {1, -2, 0, 3, 4};
  double d[3] = {0.5, 1, 2};
  clt_npz_array a = {
      .name = "dense/bias", .dtype = "<f4", .rank = 1, .dims = {5}, .data = f, .bytes = sizeof f};
  clt_npz_array b = {.name = "data/epoch_sums",
                     .dtype = "<f8",
                     .rank = 1,
                     .dims = {3},
                     .data = d,
                     .bytes = sizeof d};
  clt_err e = {0};
  check(clt_npz_check_finite("x.npz", &a, &e) == CLT_OK &&
            clt_npz_check_finite("x.npz", &b, &e) == CLT_OK,
        "finite float32 and float64 arrays pass");
  const struct {
    float v;
    int at;
    const char *want;
  } cases[] = {{NAN, 3, "x.npz: member dense/bias holds a non-finite value (NaN at index 3)"},
               {-NAN, 4, "x.npz: member dense/bias holds a non-finite value (NaN at index 4)"},
               {INFINITY, 0, "x.npz: member dense/bias holds a non-finite value (+Inf at index 0)"},
               {-INFINITY, 2,
                "x.npz: member dense/bias holds a non-finite value (-Inf at index 2)"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const float saved = f[cases[i].at];
    f[cases[i].at] = cases[i].v;
    const int st = clt_npz_check_finite("x.npz", &a, &e);
    check(st == CLT_ERR_FORMAT && strcmp(e.msg, cases[i].want) == 0, "float32 %s found (%s)",
          cases[i].want + strlen("x.npz: member dense/bias holds a non-finite value ("),
          st ? e.msg : "passed");
    f[cases[i].at] = saved;
  }
  f[1] = NAN;
  f[2] = INFINITY;
  check(clt_npz_check_finite("x.npz", &a, &e) && strstr(e.msg, "(NaN at index 1)"),
        "the first bad value is named (%s)", e.msg);
  d[2] = -INFINITY;
  check(clt_npz_check_finite("x.npz", &b, &e) &&
            strcmp(e.msg, "x.npz: member data/epoch_sums holds a non-finite value (-Inf at index "
                          "2)") == 0,
        "float64 -Inf found (%s)", e.msg);
  int64_t ints[2] = {-1, INT64_MAX};
  clt_npz_array c = {
      .name = "step", .dtype = "<i8", .rank = 1, .dims = {2}, .data = ints, .bytes = sizeof ints};
  check(clt_npz_check_finite("x.npz", &c, &e) == CLT_OK, "integer arrays pass");
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  struct dirent *ent;
  while (d && (ent = readdir(d)) != NULL) {
    if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
    const char *p = tmp(ent->d_name);
    if (unlink(p) != 0) rmdir(p);
  }
  if (d) closedir(d);
  if (rmdir(dir) != 0) fprintf(stderr, "warning: cannot remove %s: %s\n", dir, strerror(errno));
}

int main(void) {
  if (!mkdtemp(dir)) {
    fprintf(stderr, "FAIL: mkdtemp %s: %s\n", dir, strerror(errno));
    return 1;
  }
  test_round_trip();
  test_write_validation();
  test_corruption();
  test_foreign();
  test_unsafe_names();
  test_finite();
  test_deflate();
  remove_dir();
  return check_summary();
}
