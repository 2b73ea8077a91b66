/* Fuzz target: the IDX reader (datasets/idx.c), plain and gzipped, through
 * clt_idx_load_dir as `cltrain train --data DIR` calls it.
 *
 * Input: a flags byte, a little-endian 16-bit length L, then L bytes of the
 * images file and the rest as the labels file (L is cut to what is there).
 * Flags: bit 0 / bit 1 gzip the images / labels file here (so the IDX content
 * behind a gzip stream is fuzzed, not zlib's CRC); bit 2 cuts the gzip trailer's
 * last 4 bytes, bit 3 half of the compressed file (streams that end early). The
 * files are written as DIR/train-images-idx3-ubyte and DIR/train-labels-idx1-ubyte
 * (the reader goes by content, not by name). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_common.h"
#include "idx.h"

/* Gzips data[0..n) into path, then cuts `cut` bytes off its end (bounded by the size). */
static void write_gz(const char *path, const unsigned char *data, size_t n, int cut) {
  size_t cap = compressBound((uLong)n) + 64;
  unsigned char *out = malloc(cap);
  if (!out) fuzz_fail("fuzz_idx: out of memory");
  z_stream z;
  memset(&z, 0, sizeof z);
  /* windowBits 15 + 16: a gzip header and trailer around the deflate stream */
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    fuzz_fail("fuzz_idx: deflateInit2 failed");
  z.next_in = (unsigned char *)(uintptr_t)data;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) fuzz_fail("fuzz_idx: deflate failed");
  size_t len = z.total_out;
  deflateEnd(&z);
  if (cut == 1) len = len > 4 ? len - 4 : 0;
  if (cut == 2) len /= 2;
  fuzz_write(path, out, len);
  free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char images[600], labels[600];
  if (!images[0]) {
    fuzz_path(images, sizeof images, "train-images-idx3-ubyte");
    fuzz_path(labels, sizeof labels, "train-labels-idx1-ubyte");
  }
  if (size < 3) return 0;
  const unsigned flags = data[0];
  size_t ilen = (size_t)data[1] | (size_t)data[2] << 8;
  data += 3;
  size -= 3;
  if (ilen > size) ilen = size;
  const int cut = flags & 4 ? 1 : flags & 8 ? 2 : 0;
  if (flags & 1) write_gz(images, data, ilen, cut);
  else fuzz_write(images, data, ilen);
  if (flags & 2) write_gz(labels, data + ilen, size - ilen, cut);
  else fuzz_write(labels, data + ilen, size - ilen);

  clt_dataset d;
  clt_err e = {0};
  int st = clt_idx_load_dir(fuzz_dir(), "train", &d, &e);
  fuzz_note("load", st, e.msg);
  if (st == CLT_OK) {
    if (d.count <= 0 || d.height <= 0 || d.width <= 0 || d.channels != 1 || d.classes != 10 ||
        !d.pixels || !d.labels)
      fuzz_fail("fuzz_idx: loaded a bad set: %d images of %dx%dx%d", d.count, d.height, d.width,
                d.channels);
    fuzz_touch(d.pixels, (size_t)d.count * d.height * d.width);
    for (int i = 0; i < d.count; i++) {
      if (d.labels[i] >= 10) fuzz_fail("fuzz_idx: label %d out of range", d.labels[i]);
    }
  } else {
    if (!e.msg[0] || memchr(e.msg, '\n', strlen(e.msg)))
      fuzz_fail("fuzz_idx: status %d without a one-line message: '%s'", st, e.msg);
    if (d.pixels || d.labels || d.count) fuzz_fail("fuzz_idx: failed load left data behind");
  }
  clt_dataset_free(&d);
  return 0;
}
