/* Fuzz target: the .npz reader and its .npy parser (src/formats/npz_read.c and
 * npz_npy.c), through clt_npz_read as checkpoints, --weights files and the tests
 * read archives.
 *
 * Input: a mode byte, then bytes. Mode bit 0 clear: the bytes are the .npz file
 * as it is (zip structure, end records, zip64, CRC checks). Bit 0 set: the bytes
 * are .npy members, split at each "\n--\n", which the harness wraps in a valid zip
 * (names a.npy, b.npy, ..., correct CRC-32 and sizes), so that mutations reach the
 * .npy header parser instead of dying at the CRC check; bit 1 then stores them
 * deflated (method 8) instead of stored, bit 2 puts numpy's zip64 extra field in
 * the local headers. Every array read is then checked against what the reader
 * promises: a dtype of numpy's form, bytes = product(dims) * itemsize, data inside
 * the file, found by its name; clt_npz_check_finite and clt_npz_get_string then
 * read it within bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_common.h"
#include "npz.h"

#define MAX_MEMBERS 8

typedef struct zbuf {
  unsigned char *p;
  size_t n, cap;
} zbuf;

static void zb_add(zbuf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = (b->n + n) * 2 + 256;
    unsigned char *q = realloc(b->p, cap);
    if (!q) fuzz_fail("fuzz_npz: out of memory");
    b->p = q;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, p, n);
  b->n += n;
}

/* Raw deflate of d[0..n) into out (malloc'ed); its length into *len. */
static unsigned char *deflate_raw(const unsigned char *d, size_t n, size_t *len) {
  size_t cap = compressBound((uLong)n) + 64;
  unsigned char *out = malloc(cap);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (!out || deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    fuzz_fail("fuzz_npz: deflate set-up failed");
  z.next_in = (unsigned char *)(uintptr_t)d;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) fuzz_fail("fuzz_npz: deflate failed");
  *len = z.total_out;
  deflateEnd(&z);
  return out;
}

/* A zip of the members d[start[i] .. start[i] + len[i]) as the mode says. */
static void wrap(zbuf *zip, const unsigned char *d, const size_t *start, const size_t *len, int n,
                 unsigned mode) {
  zbuf central = {0};
  const int deflated = (mode & 2) != 0, zip64 = (mode & 4) != 0;
  for (int i = 0; i < n; i++) {
    const unsigned char *m = d + start[i];
    const uint32_t crc = (uint32_t)crc32(0, m, (uInt)len[i]);
    size_t clen = len[i];
    unsigned char *packed = deflated ? deflate_raw(m, len[i], &clen) : NULL;
    const char name[6] = {(char)('a' + i), '.', 'n', 'p', 'y', 0};
    unsigned char h[46], x[20];
    const uint32_t offset = (uint32_t)zip->n;
    /* local header */
    memset(h, 0, sizeof h);
    fuzz_put32(h, 0x04034b50u);
    fuzz_put16(h + 4, zip64 ? 45 : 20);
    fuzz_put16(h + 8, deflated ? 8 : 0);
    fuzz_put32(h + 14, crc);
    fuzz_put32(h + 18, zip64 ? 0xFFFFFFFFu : (uint32_t)clen);
    fuzz_put32(h + 22, zip64 ? 0xFFFFFFFFu : (uint32_t)len[i]);
    fuzz_put16(h + 26, 5);
    fuzz_put16(h + 28, zip64 ? 20 : 0);
    zb_add(zip, h, 30);
    zb_add(zip, name, 5);
    if (zip64) { /* what numpy.savez writes: uncompressed, then compressed size */
      memset(x, 0, sizeof x);
      fuzz_put16(x, 1);
      fuzz_put16(x + 2, 16);
      fuzz_put32(x + 4, (uint32_t)len[i]);
      fuzz_put32(x + 12, (uint32_t)clen);
      zb_add(zip, x, sizeof x);
    }
    zb_add(zip, packed ? packed : m, clen);
    free(packed);
    /* central directory entry */
    memset(h, 0, sizeof h);
    fuzz_put32(h, 0x02014b50u);
    fuzz_put16(h + 4, 20);
    fuzz_put16(h + 6, 20);
    fuzz_put16(h + 10, deflated ? 8 : 0);
    fuzz_put32(h + 16, crc);
    fuzz_put32(h + 20, (uint32_t)clen);
    fuzz_put32(h + 24, (uint32_t)len[i]);
    fuzz_put16(h + 28, 5);
    fuzz_put32(h + 42, offset);
    zb_add(&central, h, 46);
    zb_add(&central, name, 5);
  }
  unsigned char end[22];
  memset(end, 0, sizeof end);
  fuzz_put32(end, 0x06054b50u);
  fuzz_put16(end + 8, (uint32_t)n);
  fuzz_put16(end + 10, (uint32_t)n);
  fuzz_put32(end + 12, (uint32_t)central.n);
  fuzz_put32(end + 16, (uint32_t)zip->n);
  zb_add(zip, central.p, central.n);
  zb_add(zip, end, sizeof end);
  free(central.p);
}

/* Item size of a little-endian numpy dtype: "<f4" 4, "<U3" 12 (UTF-32); 0 if it is
 * not of that form. The reader decides which of them it supports. */
static size_t itemsize(const char *dtype) {
  if (dtype[0] != '<' || !dtype[1] || dtype[2] < '1' || dtype[2] > '9') return 0;
  char *end = NULL;
  const size_t n = strtoull(dtype + 2, &end, 10);
  if (*end) return 0;
  return dtype[1] == 'U' ? 4 * n : n;
}

static void check(const clt_npz *z) {
  for (int i = 0; i < clt_npz_count(z); i++) {
    const clt_npz_array *a = clt_npz_at(z, i);
    if (!a || !memchr(a->name, '\0', sizeof a->name) || !memchr(a->dtype, '\0', sizeof a->dtype))
      fuzz_fail("fuzz_npz: array %d: unterminated name or dtype", i);
    const size_t item = itemsize(a->dtype);
    if (!item || a->rank < 0 || a->rank > CLT_NPZ_MAX_RANK)
      fuzz_fail("fuzz_npz: array %s: dtype '%s', rank %d", a->name, a->dtype, a->rank);
    size_t want = item;
    for (int d = 0; d < a->rank; d++) {
      if (a->dims[d] < 0) fuzz_fail("fuzz_npz: array %s: negative dim", a->name);
      want = a->dims[d] == 0 ? 0 : want * (size_t)a->dims[d];
      if (want == 0) break;
    }
    if (want != a->bytes)
      fuzz_fail("fuzz_npz: array %s: %zu bytes for a shape that needs %zu", a->name, a->bytes,
                want);
    fuzz_touch(a->data, a->bytes);
    if (clt_npz_find(z, a->name) != a) fuzz_fail("fuzz_npz: array %s: find gives another", a->name);
    clt_err e = {0};
    if (clt_npz_check_finite("fuzz.npz", a, &e) != CLT_OK && !e.msg[0])
      fuzz_fail("fuzz_npz: array %s: check_finite failed without a message", a->name);
    char text[64];
    if (clt_npz_get_string(a, text, sizeof text) == 0 && strlen(text) >= sizeof text)
      fuzz_fail("fuzz_npz: array %s: string overruns", a->name);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[600];
  if (!path[0]) fuzz_path(path, sizeof path, "fuzz.npz");
  if (size < 1) return 0;
  const unsigned mode = data[0];
  data++;
  size--;
  zbuf zip = {0};
  if (mode & 1) {
    size_t start[MAX_MEMBERS], len[MAX_MEMBERS];
    int n = 0;
    size_t at = 0;
    while (n < MAX_MEMBERS) {
      const unsigned char *sep = NULL;
      for (size_t k = at; k + 4 <= size && !sep; k++) {
        if (memcmp(data + k, "\n--\n", 4) == 0) sep = data + k;
      }
      start[n] = at;
      len[n] = (sep ? (size_t)(sep - data) : size) - at;
      n++;
      if (!sep) break;
      at = (size_t)(sep - data) + 4;
    }
    wrap(&zip, data, start, len, n, mode);
  } else {
    zb_add(&zip, data, size);
  }
  fuzz_write(path, zip.p, zip.n);

  clt_npz *z = NULL;
  clt_err e = {0};
  const int st = clt_npz_read(path, &z, &e);
  fuzz_note("read", st, e.msg);
  if (st == CLT_OK) {
    if (!z) fuzz_fail("fuzz_npz: success without an archive");
    check(z);
  } else if (z || !e.msg[0]) {
    fuzz_fail("fuzz_npz: failure %d left an archive or no message", st);
  }
  clt_npz_free(z);
  free(zip.p);
  return 0;
}
