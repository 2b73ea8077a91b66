/* Reading NumPy .npz archives: a zip of .npy members, stored (numpy.savez) or
 * deflated (numpy.savez_compressed).
 *
 * The reader loads the whole file and trusts nothing in it: every offset and
 * size is checked against the buffer before it is used, and each member's
 * CRC-32 is verified. Sizes come from the central directory, so members
 * written with data descriptors or with a zip64 extra field in the local
 * header (numpy.savez always writes one) are accepted; zip64 end records and
 * central-directory extra fields are understood too, for archives over 4 GiB.
 * A deflated member is inflated into a buffer of exactly the size its .npy header
 * and its zip entry both declare, checked before anything that large is
 * allocated and never exceeded (no deflate bomb). Member names that could
 * escape a folder if the archive were extracted ("..", a leading '/', a
 * backslash) are refused outright. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno, fstat */
#endif

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "npz_impl.h"

/* Deflate's largest possible expansion is 1032 bytes out per byte in (zlib's
 * FAQ): a deflated member declaring a larger size lies, and is refused before
 * anything is allocated. */
#define DEFLATE_MAX_RATIO 1032u
/* Bytes of a deflated member inflated first to read its .npy header: the
 * longest version 1.0 header (65535 bytes after a 10-byte preamble) fits. */
#define NPY_PEEK (10 + 0xFFFF)

int clt_npz_read_bytes(const char *path, unsigned char **out, size_t *out_size, clt_err *e) {
  int status = CLT_OK;
  unsigned char *buf = NULL;
  struct stat st;
  FILE *f = fopen(path, "rb");
  if (!f) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    goto cleanup;
  }
  if (fstat(fileno(f), &st) != 0) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    goto cleanup;
  }
  if (!S_ISREG(st.st_mode)) {
    status = clt_fail(e, CLT_ERR_IO, "%s: %s", path,
                      S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    goto cleanup;
  }
  if (st.st_size < 0 || (uint64_t)st.st_size >= SIZE_MAX) {
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: too large to load (%lld bytes)", path,
                      (long long)st.st_size);
    goto cleanup;
  }
  size_t size = (size_t)st.st_size;
  buf = malloc(size + 1); /* + 1: a valid pointer for an empty file */
  if (!buf) {
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory loading %zu bytes", path, size);
    goto cleanup;
  }
  size_t got = fread(buf, 1, size, f);
  if (got != size) {
    status = ferror(f) ? clt_fail(e, CLT_ERR_IO, "%s: read error: %s", path, strerror(errno))
                       : clt_fail(e, CLT_ERR_IO, "%s: file shrank while reading (%zu of %zu bytes)",
                                  path, got, size);
    goto cleanup;
  }
  *out = buf;
  *out_size = size;
  buf = NULL;
cleanup:
  if (f) fclose(f); /* read-only: a close error loses nothing */
  free(buf);
  return status;
}

/* Where the central directory is, as the end records say (zip64 or not). */
typedef struct zip_dir {
  uint64_t offset, size, entries;
  uint64_t limit; /* start of the end records: the directory must end by here */
} zip_dir;

static int find_directory(const char *path, const unsigned char *b, size_t size, zip_dir *dir,
                          clt_err *e) {
  /* The end record is the last 22 bytes plus a comment of up to 64 KiB; scan
   * backwards for a signature whose comment length reaches exactly to the
   * end, which a signature-like byte run inside member data rarely does. */
  size_t pos = SIZE_MAX;
  if (size >= EOCD_LEN) {
    size_t span = size - EOCD_LEN;
    size_t lo = span > MAX_COMMENT ? span - MAX_COMMENT : 0;
    for (size_t p = span + 1; p-- > lo;)
      if (le32(b + p) == SIG_EOCD && p + EOCD_LEN + le16(b + p + 20) == size) {
        pos = p;
        break;
      }
  }
  if (pos == SIZE_MAX) {
    if (size == 0) return clt_fail(e, CLT_ERR_FORMAT, "%s: empty file, not a zip archive", path);
    if (size >= 2 && b[0] == 'P' && b[1] == 'K')
      return clt_fail(
          e, CLT_ERR_FORMAT,
          "%s: truncated: end of central directory record not found (file is %zu bytes)", path,
          size);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: not a zip archive", path);
  }
  const unsigned char *r = b + pos;
  uint64_t disk = le16(r + 4), cd_disk = le16(r + 6), on_disk = le16(r + 8);
  dir->entries = le16(r + 10);
  dir->size = le32(r + 12);
  dir->offset = le32(r + 16);
  dir->limit = pos;
  if (pos >= LOCATOR_LEN && le32(r - LOCATOR_LEN) == SIG_EOCD64_LOCATOR) {
    /* zip64: the real values are in a record the locator points to */
    const unsigned char *loc = r - LOCATOR_LEN;
    uint64_t at = le64(loc + 8);
    if (le32(loc + 4) != 0 || le32(loc + 16) > 1)
      return clt_fail(e, CLT_ERR_FORMAT, "%s: multi-disk (split) archives are not supported", path);
    if (at > pos - LOCATOR_LEN || pos - LOCATOR_LEN - at < EOCD64_LEN || le32(b + at) != SIG_EOCD64)
      return clt_fail(e, CLT_ERR_FORMAT, "%s: corrupt zip64 end of central directory record", path);
    const unsigned char *z = b + at;
    disk = le32(z + 16);
    cd_disk = le32(z + 20);
    on_disk = le64(z + 24);
    dir->entries = le64(z + 32);
    dir->size = le64(z + 40);
    dir->offset = le64(z + 48);
    dir->limit = at;
  }
  if (disk != 0 || cd_disk != 0 || on_disk != dir->entries)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: multi-disk (split) archives are not supported", path);
  if (dir->offset > dir->limit || dir->limit - dir->offset < dir->size)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: truncated or corrupt: central directory (offset %llu, %llu bytes) "
                    "lies outside the file (%zu bytes)",
                    path, (unsigned long long)dir->offset, (unsigned long long)dir->size, size);
  /* also bounds the allocation a corrupt count could ask for */
  if (dir->entries > INT_MAX || dir->entries * CENTRAL_LEN > dir->size)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: corrupt: %llu entries cannot fit a %llu-byte central directory", path,
                    (unsigned long long)dir->entries, (unsigned long long)dir->size);
  return CLT_OK;
}

/* Replaces the 0xFFFFFFFF placeholders of a central directory entry with the
 * values from its zip64 extra field (id 1, values in this fixed order). */
static int zip64_extra(const unsigned char *x, size_t len, uint64_t *usize, uint64_t *csize,
                       uint64_t *offset) {
  while (len >= 4) {
    size_t id = le16(x), n = le16(x + 2);
    if (n > len - 4) return -1;
    if (id == 1) {
      const unsigned char *v = x + 4;
      uint64_t *fields[3] = {usize, csize, offset};
      for (int i = 0; i < 3; i++) {
        if (*fields[i] != 0xFFFFFFFFu) continue;
        if (v + 8 > x + 4 + n) return -1;
        *fields[i] = le64(v);
        v += 8;
      }
      return 0;
    }
    x += 4 + n;
    len -= 4 + n;
  }
  return *usize == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *offset == 0xFFFFFFFFu ? -1 : 0;
}

/* Raw deflate data in[0..in_len) inflated into out[0..out_len). With peeked
 * NULL the stream must end exactly there (out_len is the declared size); else
 * as much as fits is inflated (the header, read first) and *peeked says how
 * much. Nothing is written beyond out: one spare byte shows a longer stream. */
static int inflate_into(const char *path, const char *member, const unsigned char *in,
                        uint64_t in_len, unsigned char *out, size_t out_len, size_t *peeked,
                        clt_err *e) {
  const int partial = peeked != NULL;
  z_stream s;
  memset(&s, 0, sizeof s);
  if (inflateInit2(&s, -MAX_WBITS) != Z_OK) /* raw deflate: zip has no zlib header */
    return clt_fail(e, CLT_ERR_NOMEM, "%s: member %s: cannot start zlib", path, member);
  int rc = Z_OK, probing = 0;
  uint64_t in_left = in_len;
  size_t out_left = out_len;
  unsigned char spare;
  s.next_out = out;
  /* avail_in and avail_out are uInt: feed and drain in pieces */
  while (rc == Z_OK) {
    if (s.avail_in == 0 && in_left > 0) {
      s.next_in = (unsigned char *)(in + (in_len - in_left)); /* zlib never writes input */
      s.avail_in = in_left > CRC_CHUNK ? CRC_CHUNK : (uInt)in_left;
      in_left -= s.avail_in;
    }
    if (s.avail_out == 0) {
      if (out_left > 0) {
        s.avail_out = out_left > CRC_CHUNK ? CRC_CHUNK : (uInt)out_left;
        out_left -= s.avail_out;
      } else if (!partial && !probing) { /* out is full: the stream must end now */
        s.next_out = &spare;
        s.avail_out = 1;
        probing = 1;
      } else {
        break;
      }
    }
    rc = inflate(&s, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR && s.avail_in == 0 && in_left == 0) break; /* input used up */
    if (rc == Z_BUF_ERROR) rc = Z_OK;
  }
  const size_t got = (size_t)s.total_out;
  const char *why = s.msg;
  inflateEnd(&s);
  if (partial) *peeked = got;
  if (rc == Z_STREAM_END && (got == out_len || partial)) return CLT_OK;
  if (rc == Z_MEM_ERROR)
    return clt_fail(e, CLT_ERR_NOMEM, "%s: member %s: out of memory inflating", path, member);
  if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: corrupt deflate data (%s)", path, member,
                    why ? why : zError(rc));
  if (got > out_len)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: inflates to more than the %zu bytes declared; stopped there",
                    path, member, out_len);
  if (got == out_len && partial) return CLT_OK; /* the header was all that was asked for */
  if (got == out_len)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: deflate data does not end after the %zu bytes declared", path,
                    member, out_len);
  if (partial) /* neither the end of the stream nor of out: the input ran out */
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: deflate data is cut short after %zu bytes",
                    path, member, got);
  return clt_fail(e, CLT_ERR_FORMAT,
                  "%s: member %s: deflate data ends after %zu of the %zu bytes declared", path,
                  member, got, out_len);
}

/* Inflates a deflated member (csize bytes at in) whose zip entry declares usize
 * bytes into a new buffer *out: its .npy header is read first from at most
 * NPY_PEEK bytes, and the buffer is allocated only once header and zip entry
 * agree on the size. */
static int inflate_member(const char *path, const char *member, const unsigned char *in,
                          uint64_t csize, uint64_t usize, unsigned char **out, clt_err *e) {
  int status = CLT_OK;
  unsigned char *peek = NULL, *buf = NULL;
  *out = NULL;
  if (usize > (uint64_t)DEFLATE_MAX_RATIO * csize + 64 || usize >= SIZE_MAX) {
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: member %s: declares %llu bytes deflated into %llu, more than deflate "
                      "can expand to",
                      path, member, (unsigned long long)usize, (unsigned long long)csize);
    goto cleanup;
  }
  const size_t n = (size_t)usize, peek_len = n < NPY_PEEK ? n : NPY_PEEK;
  if (!(peek = malloc(peek_len + 1))) {
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: member %s: out of memory", path, member);
    goto cleanup;
  }
  size_t got = 0;
  if ((status = inflate_into(path, member, in, csize, peek, peek_len, &got, e))) goto cleanup;
  clt_npz_array header;
  size_t start = 0, want = 0;
  if ((status = clt_npy_parse_header(path, member, peek, n, got, &header, &start, &want, e))) {
    if (got < peek_len) /* the stream ended inside the header: say that */
      status = clt_fail(e, CLT_ERR_FORMAT,
                        "%s: member %s: deflate data ends after %zu of the %zu bytes declared",
                        path, member, got, n);
    goto cleanup;
  }
  if (n - start != want) {
    char shape[CLT_NPZ_MAX_RANK * 24 + 8];
    clt_npz_format_shape(header.dims, header.rank, shape, sizeof shape);
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: member %s: zip entry declares %zu bytes, the .npy header (shape %s of "
                      "%s) %zu",
                      path, member, n, shape, header.dtype, start + want);
    goto cleanup;
  }
  if (!(buf = malloc(n + 1))) {
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: member %s: out of memory inflating %zu bytes", path,
                      member, n);
    goto cleanup;
  }
  if ((status = inflate_into(path, member, in, csize, buf, n, NULL, e))) goto cleanup;
  *out = buf;
  buf = NULL;
cleanup:
  free(peek);
  free(buf);
  return status;
}

/* Checks central directory entry i at b[*p..dir end) and its member; fills a.
 * A deflated member is inflated into *inflated (a's data then points into it). */
static int read_member(const char *path, const unsigned char *b, const zip_dir *dir, int i,
                       uint64_t *p, clt_npz_array *a, unsigned char **inflated, clt_err *e) {
  uint64_t end = dir->offset + dir->size;
  const unsigned char *c = b + *p;
  if (end - *p < CENTRAL_LEN || le32(c) != SIG_CENTRAL)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: corrupt central directory: entry %d %s", path, i,
                    end - *p < CENTRAL_LEN ? "is cut short" : "has a bad signature");
  uint32_t flags = le16(c + 8), method = le16(c + 10), crc = le32(c + 16);
  uint64_t csize = le32(c + 20), usize = le32(c + 24), offset = le32(c + 42);
  size_t name_len = le16(c + 28), extra_len = le16(c + 30), comment_len = le16(c + 32);
  if (end - *p - CENTRAL_LEN < (uint64_t)name_len + extra_len + comment_len)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: corrupt central directory: entry %d is cut short", path,
                    i);
  const unsigned char *name = c + CENTRAL_LEN;
  *p += CENTRAL_LEN + name_len + extra_len + comment_len;

  char member[160];
  clt_npz_show(member, sizeof member, name, name_len);
  const char *unsafe = clt_npz_unsafe_name((const char *)name, name_len);
  if (unsafe)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: unsafe name (%s)", path, member, unsafe);
  if (name_len < 4 || memcmp(name + name_len - 4, ".npy", 4) != 0)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: not a .npy file (name does not end in .npy)",
                    path, member);
  size_t base_len = name_len - 4;
  clt_npz_show(member, sizeof member, name, base_len); /* named as the array from here on */
  if (base_len == 0 || base_len >= sizeof a->name || memchr(name, '\0', base_len))
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s.npy: array name is empty, longer than %zu bytes or has a NUL",
                    path, member, sizeof a->name - 1);
  if (flags & FLAG_ENCRYPTED)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: encrypted members are not supported", path,
                    member);
  if (method != 0 && method != 8)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: compression method %u is not supported (only stored and "
                    "deflate)",
                    path, member, method);
  if (zip64_extra(name + name_len, extra_len, &usize, &csize, &offset))
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: corrupt zip64 extra field", path, member);
  if (method == 0 && csize != usize)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: stored member has compressed size %llu != size %llu", path,
                    member, (unsigned long long)csize, (unsigned long long)usize);

  /* The local header repeats the name; its extra field may differ (numpy's has
   * zip64 sizes), so only the central directory's sizes are used. Members must
   * lie before the central directory. */
  if (offset > dir->offset || dir->offset - offset < LOCAL_LEN)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: local header offset %llu is outside the data area", path,
                    member, (unsigned long long)offset);
  const unsigned char *l = b + offset;
  if (le32(l) != SIG_LOCAL)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: bad local header signature at offset %llu",
                    path, member, (unsigned long long)offset);
  uint64_t data = offset + LOCAL_LEN + le16(l + 26) + le16(l + 28);
  if (le16(l + 8) != method || le16(l + 26) != name_len || data > dir->offset ||
      memcmp(l + LOCAL_LEN, name, name_len) != 0)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: local header does not match the central directory", path,
                    member);
  if (dir->offset - data < csize)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: data (%llu bytes at offset %llu) runs past the data area", path,
                    member, (unsigned long long)csize, (unsigned long long)data);

  const unsigned char *npy = b + data;
  if (method == 8) {
    int status = inflate_member(path, member, npy, csize, usize, inflated, e);
    if (status) return status;
    npy = *inflated;
  }
  uint32_t got = clt_npz_crc(0, npy, (size_t)usize);
  if (got != crc)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: CRC-32 mismatch (stored 0x%08x, computed 0x%08x)", path, member,
                    (unsigned)crc, (unsigned)got);
  memcpy(a->name, name, base_len);
  a->name[base_len] = '\0';
  return clt_npy_parse(path, member, npy, (size_t)usize, a, e);
}

/* Reads the archive at path (bytes NULL) or in bytes (size of them, the caller's). */
static int read_archive(const char *path, const unsigned char *bytes, size_t size, clt_npz **out,
                        clt_err *e) {
  int status = CLT_OK;
  clt_npz *z = NULL;
  zip_dir dir = {0};

  *out = NULL;
  z = calloc(1, sizeof *z);
  if (!z) {
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  if (!bytes && (status = clt_npz_read_bytes(path, &z->buf, &size, e))) goto cleanup;
  const unsigned char *b = bytes ? bytes : z->buf;
  if ((status = find_directory(path, b, size, &dir, e))) goto cleanup;
  z->arrays = calloc(dir.entries ? (size_t)dir.entries : 1, sizeof *z->arrays);
  z->inflated = calloc(dir.entries ? (size_t)dir.entries : 1, sizeof *z->inflated);
  if (!z->arrays || !z->inflated) {
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory for %llu members", path,
                      (unsigned long long)dir.entries);
    goto cleanup;
  }
  uint64_t p = dir.offset;
  for (int i = 0; i < (int)dir.entries; i++) {
    z->n = i + 1; /* before reading: z->inflated[i] is freed whatever happens */
    if ((status = read_member(path, b, &dir, i, &p, &z->arrays[i], &z->inflated[i], e)))
      goto cleanup;
  }
  if (p != dir.offset + dir.size) {
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: corrupt central directory: %llu stray bytes after %d entries", path,
                      (unsigned long long)(dir.offset + dir.size - p), z->n);
    goto cleanup;
  }
  int nomem;
  const char *dup = clt_npz_duplicate_name(z->arrays, z->n, &nomem);
  if (nomem || dup) {
    char shown[160];
    if (dup) clt_npz_show(shown, sizeof shown, dup, strlen(dup));
    status = nomem ? clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", path)
                   : clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: appears twice", path, shown);
    goto cleanup;
  }
  *out = z;
  z = NULL;
cleanup:
  clt_npz_free(z);
  return status;
}

int clt_npz_read(const char *path, clt_npz **out, clt_err *e) {
  return read_archive(path, NULL, 0, out, e);
}

int clt_npz_read_memory(const char *path, const unsigned char *bytes, size_t size, clt_npz **out,
                        clt_err *e) {
  return read_archive(path, bytes, size, out, e);
}
