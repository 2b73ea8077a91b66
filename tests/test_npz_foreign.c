/* Tests of archives that clt_npz_write does not produce, built here by a small
 * zip writer: numpy-style zip64 extra fields, data descriptors, odd .npy headers,
 * unsafe member names, deflated members as numpy.savez_compressed writes them, and
 * deflate bombs. main is in test_npz.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "check.h"
#include "npz.h"
#include "test_npz.h"

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

void test_foreign(void) {
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
void test_unsafe_names(void) {
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
void test_deflate(void) {
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
