/* Tests for the .npz checkpoint format (src/formats/npz.c): round trips, byte-for-byte
 * determinism, and clean refusal of truncated, corrupt and foreign archives.
 * Archives that clt_npz_write cannot produce (numpy-style zip64 extra fields,
 * data descriptors, odd .npy headers, deflated members as numpy.savez_compressed
 * writes them, and deflate bombs) are built here by a small zip writer. */
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
#include <zlib.h>

#include "check.h"
#include "npz.h"

static char dir[] = "/tmp/test_npz.XXXXXX";

static const char *tmp(const char *name) {
  static char paths[8][512];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", dir, name);
  return p;
}

static int save(const char *path, const void *buf, size_t n) {
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
static uint64_t rnd(void) { /* xorshift64*: deterministic fuzzing */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

/* An error that names the file first, as every npz error must. */
static int names_path(const clt_err *e, const char *path) {
  size_t n = strlen(path);
  return strncmp(e->msg, path, n) == 0 && e->msg[n] == ':' && !strchr(e->msg, '\n');
}

/* Reads path expecting failure with code and a message containing want. */
static void expect_error(const char *what, const char *path, int code, const char *want) {
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
static double sums[2][2] = {{1.25, 3}, {-0.5, 64}};
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

/* ---- a small zip writer for archives clt_npz_write does not produce ---- */

static void put16(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v) {
  put16(p, v);
  put16(p + 2, v >> 16);
}
static void put64(unsigned char *p, uint64_t v) {
  put32(p, (uint32_t)v);
  put32(p + 4, (uint32_t)(v >> 32));
}

enum { PLAIN = 0, NUMPY_ZIP64 = 1, DESCRIPTOR = 2, CENTRAL_ZIP64 = 4 };

typedef struct entry {
  const char *name;
  const unsigned char *data;
  size_t len; /* as stored: deflated for method 8 */
  int method;
  int style;    /* PLAIN or a mix of the other bits */
  size_t usize; /* method 8: the size declared inflated, and its CRC-32 */
  uint32_t crc;
} entry;

/* Stored zip of the entries into out (large enough), with an optional comment,
 * and zip64 end records if zip64_end; returns its size. */
static size_t build_zip(const entry *m, int n, const char *comment, int zip64_end,
                        unsigned char *out) {
  size_t at = 0, offsets[16];
  for (int i = 0; i < n; i++) {
    unsigned char *h = out + at;
    size_t nl = strlen(m[i].name), xl = m[i].style & NUMPY_ZIP64 ? 20 : 0;
    const int deflated = m[i].method == 8;
    const size_t ulen = deflated ? m[i].usize : m[i].len;
    uint32_t crc = deflated ? m[i].crc : (uint32_t)crc32(0, m[i].data, (uInt)m[i].len);
    int desc = m[i].style & DESCRIPTOR;
    offsets[i] = at;
    put32(h, 0x04034b50);
    put16(h + 4, 20);
    put16(h + 6, desc ? 8 : 0);
    put16(h + 8, (uint32_t)m[i].method);
    put32(h + 10, 0x00210000);
    put32(h + 14, desc ? 0 : crc);
    put32(h + 18, desc ? 0 : (uint32_t)m[i].len);
    put32(h + 22, desc ? 0 : (uint32_t)ulen);
    put16(h + 26, (uint32_t)nl);
    put16(h + 28, (uint32_t)xl);
    memcpy(h + 30, m[i].name, nl);
    if (xl) { /* what Python's zipfile writes for numpy.savez (force_zip64) */
      put16(h + 30 + nl, 1);
      put16(h + 32 + nl, 16);
      put64(h + 34 + nl, ulen);
      put64(h + 42 + nl, m[i].len);
    }
    at += 30 + nl + xl;
    memcpy(out + at, m[i].data, m[i].len);
    at += m[i].len;
    if (desc) {
      put32(out + at, 0x08074b50);
      put32(out + at + 4, crc);
      put32(out + at + 8, (uint32_t)m[i].len);
      put32(out + at + 12, (uint32_t)ulen);
      at += 16;
    }
  }
  size_t cd = at;
  for (int i = 0; i < n; i++) {
    unsigned char *h = out + at;
    size_t nl = strlen(m[i].name);
    int z64 = m[i].style & CENTRAL_ZIP64;
    const int deflated = m[i].method == 8;
    const size_t ulen = deflated ? m[i].usize : m[i].len;
    put32(h, 0x02014b50);
    put16(h + 4, 0x0314);
    put16(h + 6, z64 ? 45 : 20);
    put16(h + 8, m[i].style & DESCRIPTOR ? 8 : 0);
    put16(h + 10, (uint32_t)m[i].method);
    put32(h + 12, 0x00210000);
    put32(h + 16, deflated ? m[i].crc : (uint32_t)crc32(0, m[i].data, (uInt)m[i].len));
    put32(h + 20, z64 ? 0xFFFFFFFFu : (uint32_t)m[i].len);
    put32(h + 24, z64 ? 0xFFFFFFFFu : (uint32_t)ulen);
    put16(h + 28, (uint32_t)nl);
    put16(h + 30, z64 ? 28 : 0);
    put16(h + 32, 0);
    memset(h + 34, 0, 8);
    put32(h + 42, z64 ? 0xFFFFFFFFu : (uint32_t)offsets[i]);
    memcpy(h + 46, m[i].name, nl);
    if (z64) {
      put16(h + 46 + nl, 1);
      put16(h + 48 + nl, 24);
      put64(h + 50 + nl, ulen);
      put64(h + 58 + nl, m[i].len);
      put64(h + 66 + nl, offsets[i]);
    }
    at += 46 + nl + (z64 ? 28 : 0);
  }
  size_t cd_size = at - cd;
  if (zip64_end) {
    unsigned char *h = out + at;
    put32(h, 0x06064b50);
    put64(h + 4, 44);
    put16(h + 12, 45);
    put16(h + 14, 45);
    put32(h + 16, 0);
    put32(h + 20, 0);
    put64(h + 24, (uint64_t)n);
    put64(h + 32, (uint64_t)n);
    put64(h + 40, cd_size);
    put64(h + 48, cd);
    put32(h + 56, 0x07064b50);
    put32(h + 60, 0);
    put64(h + 64, at);
    put32(h + 72, 1);
    at += 76;
  }
  unsigned char *h = out + at;
  size_t cl = comment ? strlen(comment) : 0;
  put32(h, 0x06054b50);
  put16(h + 4, 0);
  put16(h + 6, 0);
  put16(h + 8, zip64_end ? 0xFFFF : (uint32_t)n);
  put16(h + 10, zip64_end ? 0xFFFF : (uint32_t)n);
  put32(h + 12, zip64_end ? 0xFFFFFFFFu : (uint32_t)cd_size);
  put32(h + 16, zip64_end ? 0xFFFFFFFFu : (uint32_t)cd);
  put16(h + 20, (uint32_t)cl);
  memcpy(h + 22, comment ? comment : "", cl);
  return at + 22 + cl;
}

/* A .npy file: magic, version major.0, the dict text padded to 64 with '\n',
 * then len bytes of data; returns its size. */
static size_t build_npy(int major, const char *dict, const void *data, size_t len,
                        unsigned char *out) {
  size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
  size_t total = pre + dl + 1;
  total += (64 - total % 64) % 64;
  memcpy(out, "\x93NUMPY", 6);
  out[6] = (unsigned char)major;
  out[7] = 0;
  if (major == 1) put16(out + 8, (uint32_t)(total - pre));
  else put32(out + 8, (uint32_t)(total - pre));
  memcpy(out + pre, dict, dl);
  memset(out + pre + dl, ' ', total - pre - dl - 1);
  out[total - 1] = '\n';
  if (len) memcpy(out + total, data, len); /* data may be NULL when len is 0 */
  return total + len;
}

static unsigned char zbuf[1 << 16], npy[4][4096];

/* Writes a one-member archive with a .npy of the given header to path. */
static void one_member(const char *path, const char *member, int major, const char *dict,
                       const void *data, size_t len, int method, int style) {
  entry m = {member, npy[0], build_npy(major, dict, data, len, npy[0]), method, style, 0, 0};
  save(path, zbuf, build_zip(&m, 1, NULL, 0, zbuf));
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
  check(r == 0 && strcmp(s->dtype, "<U15") == 0 && strcmp(text, "fashion-cnn \xe9 ?") == 0,
        "string member: dtype %s, text read back as Latin-1", s ? s->dtype : "?");
  r = clt_npz_get_string(s, text, 8);
  check(r == 0 && strcmp(text, "fashion") == 0, "string read into a small buffer is cut to fit");
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

static const float six[6] = {1, 2, 3, 4, 5, 6};
/* Whether the n floats at p are bit for bit those of want. */
static int same_bits(const void *p, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t got, bits;
    memcpy(&got, (const unsigned char *)p + i * sizeof got, sizeof got);
    memcpy(&bits, &want[i], sizeof bits);
    if (got != bits) return 0;
  }
  return 1;
}

#define F23 "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"

/* Reads path expecting the one array F23 describes under name. */
static void expect_six(const char *what, const char *path, const char *name) {
  clt_npz *z = NULL;
  clt_err e = {0};
  int st = clt_npz_read(path, &z, &e);
  const clt_npz_array *r = z ? clt_npz_find(z, name) : NULL;
  int ok = st == CLT_OK && clt_npz_count(z) == 1 && r && strcmp(r->dtype, "<f4") == 0 &&
           r->rank == 2 && r->dims[0] == 2 && r->dims[1] == 3 && r->bytes == sizeof six &&
           same_bits(r->data, six, sizeof six / sizeof six[0]);
  check(ok, "%s accepted (%s)", what, st ? e.msg : "");
  clt_npz_free(z);
}

static void test_foreign(void) {
  const char *p = tmp("foreign.npz");

  one_member(p, "w.npy", 1, F23, six, sizeof six, 0, NUMPY_ZIP64);
  expect_six("numpy.savez-style zip64 extra field in local header", p, "w");
  one_member(p, "w.npy", 1, F23, six, sizeof six, 0, DESCRIPTOR);
  expect_six("data descriptor (flag bit 3)", p, "w");
  {
    entry m = {
        "w.npy", npy[0], build_npy(1, F23, six, sizeof six, npy[0]), 0, CENTRAL_ZIP64 | NUMPY_ZIP64,
        0,       0};
    save(p, zbuf, build_zip(&m, 1, NULL, 1, zbuf));
    expect_six("zip64 end records and central directory extra field", p, "w");
    save(p, zbuf, build_zip(&m, 1, "made by hand, PK\x05\x06 inside", 0, zbuf));
    expect_six("zip comment (holding a fake end signature)", p, "w");
  }
  one_member(p, "w.npy", 2, F23, six, sizeof six, 0, PLAIN);
  expect_six(".npy version 2.0", p, "w");
  one_member(p, "a/b.npy", 1, "{ \"shape\" :(2,3,) ,'fortran_order':False,\t'descr' : '<f4' }", six,
             sizeof six, 0, PLAIN);
  expect_six("header keys in another order, odd spacing and quotes", p, "a/b");

  struct {
    const char *what, *member, *dict, *want;
    int major, method, len;
  } bad[] = {
      {"another compression method (bzip2)", "w.npy", F23,
       "member w: compression method 12 is not supported", 1, 12, 24},
      {"member that is not .npy", "readme.txt", F23, "member readme.txt: not a .npy file", 1, 0,
       24},
      {"member named just .npy", ".npy", F23, "array name is empty", 1, 0, 24},
      {"fortran_order True", "w.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
       "member w: fortran_order True is not supported", 1, 0, 24},
      {"<f2", "w.npy", "{'descr': '<f2', 'fortran_order': False, 'shape': (12,), }",
       "member w: unsupported dtype '<f2'", 1, 0, 24},
      {"big-endian >f4", "w.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
       "unsupported dtype '>f4'", 1, 0, 24},
      {"structured dtype", "w.npy",
       "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }",
       "structured dtypes are not supported", 1, 0, 24},
      {"shape not matching the data", "w.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }",
       "member w: data is 24 bytes, shape (5,) of <f4 needs 20", 1, 0, 24},
      {"data cut short", "w.npy", F23, "data is 20 bytes, shape (2, 3) of <f4 needs 24", 1, 0, 20},
      {"shape (6) without comma", "w.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", "bad .npy header", 1, 0, 24},
      {"negative dim", "w.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }",
       "bad .npy header", 1, 0, 24},
      {"overflowing shape", "w.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }",
       "is too large", 1, 0, 24},
      {"dim beyond int64", "w.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
       "bad .npy header", 1, 0, 24},
      {"rank 9", "w.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6), }", "rank exceeds 8",
       1, 0, 24},
      {"missing shape", "w.npy", "{'descr': '<f4', 'fortran_order': False, }", "missing key", 1, 0,
       24},
      {"unknown key", "w.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1, }",
       "unexpected key 'x'", 1, 0, 24},
      {"duplicate key", "w.npy",
       "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", "duplicate key",
       1, 0, 24},
      {"not a dict", "w.npy", "[1, 2, 3]", "bad .npy header: expected '{'", 1, 0, 24},
      {"unterminated string", "w.npy", "{'descr': '<f4", "bad .npy header", 1, 0, 24},
      {"text after the dict", "w.npy", F23 " x", "text after '}'", 1, 0, 24},
      {".npy version 4.0", "w.npy", F23, "unsupported .npy version 4.0", 4, 0, 24},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    one_member(p, bad[i].member, bad[i].major, bad[i].dict, six, (size_t)bad[i].len, bad[i].method,
               PLAIN);
    expect_error(bad[i].what, p, CLT_ERR_FORMAT, bad[i].want);
  }

  size_t n0 = build_npy(1, F23, six, sizeof six, npy[0]);
  memcpy(npy[1], npy[0], n0);
  npy[1][0] = 'X';
  entry bm = {"w.npy", npy[1], n0, 0, PLAIN, 0, 0};
  save(p, zbuf, build_zip(&bm, 1, NULL, 0, zbuf));
  expect_error("bad .npy magic", p, CLT_ERR_FORMAT, "member w: not a .npy file (bad magic)");
  memcpy(npy[1], npy[0], n0);
  npy[1][8] = 0xF0; /* header length far past the member */
  save(p, zbuf, build_zip(&bm, 1, NULL, 0, zbuf));
  expect_error("header length past the member", p, CLT_ERR_FORMAT, "exceeds the member");
  entry dup[2] = {{"w.npy", npy[0], n0, 0, PLAIN, 0, 0}, {"w.npy", npy[0], n0, 0, PLAIN, 0, 0}};
  save(p, zbuf, build_zip(dup, 2, NULL, 0, zbuf));
  expect_error("duplicate member names", p, CLT_ERR_FORMAT, "member w: appears twice");
  /* Consistent but huge sizes or offsets in the central directory entry. */
  size_t zn = build_zip(&bm, 1, NULL, 0, zbuf), cd = zn - 22 - 46 - 5;
  memcpy(npy[1], npy[0], n0);
  zn = build_zip(&bm, 1, NULL, 0, zbuf);
  put32(zbuf + cd + 20, 0x7FFFFFF0u);
  put32(zbuf + cd + 24, 0x7FFFFFF0u);
  save(p, zbuf, zn);
  expect_error("member sizes past the end of the file", p, CLT_ERR_FORMAT,
               "member w: data (2147483632 bytes");
  zn = build_zip(&bm, 1, NULL, 0, zbuf);
  put32(zbuf + cd + 42, 0x7FFFFFF0u);
  save(p, zbuf, zn);
  expect_error("local header offset past the end of the file", p, CLT_ERR_FORMAT,
               "member w: local header offset");
  entry ctl = {"a\nb.npy", npy[0], n0, 0, PLAIN, 0, 0};
  zn = build_zip(&ctl, 1, NULL, 0, zbuf);
  zbuf[zn - 22 - 46 - 7 + 16] ^= 1; /* spoil the CRC so the name shows up in an error */
  save(p, zbuf, zn);
  expect_error("control character in a member name (shown as '?')", p, CLT_ERR_FORMAT,
               "member a?b: CRC-32");
}

/* Member names that could escape a folder if extracted: refused by the reader
 * and the writer alike, whether or not anyone would ask for them. */
static void test_unsafe_names(void) {
  const char *p = tmp("unsafe.npz");
  const struct {
    const char *name, *why;
  } names[] = {{"../evil.npy", "contains '..'"},
               {"sub/../../evil.npy", "contains '..'"},
               {"w..x.npy", "contains '..'"},
               {"/etc/evil.npy", "starts with '/'"},
               {"a\\b.npy", "has a backslash"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    entry m = {names[i].name, npy[0], build_npy(1, F23, six, sizeof six, npy[0]), 0, PLAIN, 0, 0};
    save(p, zbuf, build_zip(&m, 1, NULL, 0, zbuf));
    char what[160], want[160];
    snprintf(what, sizeof what, "member named %s", names[i].name);
    snprintf(want, sizeof want, "member %s: unsafe name (%s)", names[i].name, names[i].why);
    expect_error(what, p, CLT_ERR_FORMAT, want);
    /* the writer takes the array name, without ".npy" */
    clt_npz_array a = {.dtype = "<f4", .rank = 1, .dims = {6}, .data = six, .bytes = sizeof six};
    snprintf(a.name, sizeof a.name, "%.*s", (int)(strlen(names[i].name) - 4), names[i].name);
    clt_err e = {0};
    const char *q = tmp("unsafe_written.npz");
    unlink(q);
    int st = clt_npz_write(q, &a, 1, &e);
    check(st == CLT_ERR_ARG && names_path(&e, q) && strstr(e.msg, "unsafe name") &&
              access(q, F_OK) != 0,
          "writing array %s refused (%s)", a.name, st ? e.msg : "written");
  }
  one_member(p, "a.b/c.d.npy", 1, F23, six, sizeof six, 0, PLAIN);
  expect_six("single dots in a name", p, "a.b/c.d");
}

/* clt_npz_check_finite: the first NaN or infinity of a float array, by index. */
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

/* Raw deflate (as zip stores it) of in[0..n) into out; returns its size. */
static size_t deflate_raw(const void *in, size_t n, unsigned char *out, size_t cap) {
  z_stream s;
  memset(&s, 0, sizeof s);
  if (deflateInit2(&s, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
  s.next_in = (unsigned char *)in;
  s.avail_in = (uInt)n;
  s.next_out = out;
  s.avail_out = (uInt)cap;
  int rc = deflate(&s, Z_FINISH);
  size_t len = s.total_out;
  deflateEnd(&s);
  return rc == Z_STREAM_END ? len : 0;
}

static unsigned char deflated[1 << 16];

/* A one-member archive whose member is `stream` (deflated), declaring usize
 * inflated bytes with CRC-32 crc. */
static void one_deflated(const char *path, const unsigned char *stream, size_t len, size_t usize,
                         uint32_t crc, int style) {
  entry m = {"w.npy", stream, len, 8, style, usize, crc};
  save(path, zbuf, build_zip(&m, 1, NULL, 0, zbuf));
}

/* numpy.savez_compressed's members: inflated into exactly the size declared, no
 * more; every lie about that size refused before or while inflating. */
static void test_deflate(void) {
  const char *p = tmp("deflated.npz");
  const size_t n = build_npy(1, F23, six, sizeof six, npy[0]);
  const uint32_t crc = (uint32_t)crc32(0, npy[0], (uInt)n);
  size_t len = deflate_raw(npy[0], n, deflated, sizeof deflated);
  check(len > 0 && len < n, "deflated a .npy of %zu bytes into %zu", n, len);

  one_deflated(p, deflated, len, n, crc, PLAIN);
  expect_six("deflated member", p, "w");
  one_deflated(p, deflated, len, n, crc, NUMPY_ZIP64 | DESCRIPTOR);
  expect_six("deflated member with numpy's zip64 extra field and a data descriptor", p, "w");
  {
    /* A stored and a deflated member side by side, as tools may mix them. */
    size_t n2 = build_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", sums,
                          sizeof sums, npy[1]);
    entry two[2] = {{"w.npy", deflated, len, 8, PLAIN, n, crc},
                    {"s.npy", npy[1], n2, 0, PLAIN, 0, 0}};
    save(p, zbuf, build_zip(two, 2, NULL, 0, zbuf));
    clt_npz *z = NULL;
    clt_err e = {0};
    int st = clt_npz_read(p, &z, &e);
    const clt_npz_array *w = z ? clt_npz_find(z, "w") : NULL, *sm = z ? clt_npz_find(z, "s") : NULL;
    double back[2][2] = {{0}};
    if (sm && sm->bytes == sizeof back) memcpy(back, sm->data, sizeof back);
    int same = sm && sm->bytes == sizeof sums;
    for (int i = 0; same && i < 4; i++) same = back[i / 2][i % 2] == sums[i / 2][i % 2];
    check(st == CLT_OK && w && same_bits(w->data, six, 6) && same,
          "a deflated and a stored member in one archive (%s)", st ? e.msg : "");
    clt_npz_free(z);
  }

  /* Sizes that lie. The header says 24 data bytes, so the .npy is n bytes. */
  one_deflated(p, deflated, len, n + 100, crc, PLAIN);
  expect_error("deflated member declaring more than its .npy header", p, CLT_ERR_FORMAT,
               "member w: zip entry declares");
  one_deflated(p, deflated, len, n - 4, crc, PLAIN);
  expect_error("deflated member declaring less than its .npy header", p, CLT_ERR_FORMAT,
               "member w: zip entry declares");
  one_deflated(p, deflated, len, (size_t)len * 1032 + 4096, crc, PLAIN);
  expect_error("declared size beyond deflate's 1032:1 ratio (checked before allocating)", p,
               CLT_ERR_FORMAT, "more than deflate can expand to");
  {
    /* A deflate bomb: 20 MB of zeros after a .npy that declares 24 data bytes.
     * Inflating stops one byte past the declared size. */
    const size_t big = 20u << 20;
    unsigned char *bomb = calloc(1, big);
    if (bomb) {
      memcpy(bomb, npy[0], n);
      size_t blen = deflate_raw(bomb, big, deflated, sizeof deflated);
      check(blen > 0, "a 20 MB bomb deflates into %zu bytes", blen);
      one_deflated(p, deflated, blen, n, crc, PLAIN);
      expect_error("deflate bomb", p, CLT_ERR_FORMAT,
                   "member w: inflates to more than the 152 bytes declared; stopped there");
      free(bomb);
    }
  }
  /* A .npy header and zip entry that agree on a huge array, the data absent:
   * refused by the ratio check, so nothing that large is ever allocated. */
  {
    unsigned char huge[256];
    size_t hn = build_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }",
                          "", 0, huge);
    size_t hlen = deflate_raw(huge, hn, deflated, sizeof deflated);
    one_deflated(p, deflated, hlen, hn + 4000000000u, 0, CENTRAL_ZIP64);
    expect_error("deflated header declaring 4 GB", p, CLT_ERR_FORMAT,
                 "more than deflate can expand to");
  }
  len = deflate_raw(npy[0], n, deflated, sizeof deflated);
  one_deflated(p, deflated, len - 3, n, crc, PLAIN);
  expect_error("deflate stream cut short", p, CLT_ERR_FORMAT,
               "member w: deflate data is cut short after");
  {
    /* The stream of the .npy without its last 8 bytes: a clean end, too early. */
    size_t slen = deflate_raw(npy[0], n - 8, deflated, sizeof deflated);
    one_deflated(p, deflated, slen, n, crc, PLAIN);
    expect_error("deflate stream ending early", p, CLT_ERR_FORMAT,
                 "member w: deflate data ends after 144 of the 152 bytes declared");
  }
  len = deflate_raw(npy[0], n, deflated, sizeof deflated);
  one_deflated(p, deflated, len, n, crc ^ 1, PLAIN);
  expect_error("deflated member with a wrong CRC-32", p, CLT_ERR_FORMAT,
               "member w: CRC-32 mismatch");
  memset(deflated, 0xFF, 64); /* an invalid block type */
  one_deflated(p, deflated, 64, n, crc, PLAIN);
  expect_error("corrupt deflate data", p, CLT_ERR_FORMAT, "member w: corrupt deflate data");

  /* Fuzz: random bytes overwritten in the deflated stream are refused cleanly. */
  len = deflate_raw(npy[0], n, deflated, sizeof deflated);
  if (len == 0 || len > 512) return;
  unsigned char stream[512];
  int fuzz_ok = 0, fuzz_n = 2000;
  for (int it = 0; it < fuzz_n; it++) {
    memcpy(stream, deflated, len);
    for (int j = 0; j < 3; j++) stream[rnd() % len] = (unsigned char)rnd();
    one_deflated(p, stream, len, n, crc, PLAIN);
    clt_npz *z = NULL;
    clt_err e = {0};
    int st = clt_npz_read(p, &z, &e);
    fuzz_ok += st ? st == CLT_ERR_FORMAT && !z && names_path(&e, p) : clt_npz_count(z) == 1;
    clt_npz_free(z);
  }
  check(fuzz_ok == fuzz_n, "damaged deflate streams handled cleanly (%d of %d)", fuzz_ok, fuzz_n);
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
