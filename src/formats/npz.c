/* NumPy .npz archives: a zip of .npy members, stored (numpy.savez) or deflated
 * (numpy.savez_compressed).
 *
 * The writer emits the plainest zip there is (PKZIP 2.0, method 0, sizes and
 * CRC-32 in the local headers, no data descriptors, no zip64, fixed DOS
 * timestamps), so the same arrays always give the same bytes.
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
 * backslash) are refused outright.
 *
 * Arrays returned by the reader point into the archive's single buffer, at
 * whatever offset the member has in the file: data is NOT aligned for its
 * type, so callers must memcpy it out rather than cast the pointer. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno, fsync, fstat */
#endif

#include "npz.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_EOCD64_LOCATOR 0x07064b50u

enum {
  LOCAL_LEN = 30,   /* fixed part of a local file header */
  CENTRAL_LEN = 46, /* fixed part of a central directory header */
  EOCD_LEN = 22,    /* end of central directory record, without comment */
  EOCD64_LEN = 56,  /* zip64 end of central directory record (version 1) */
  LOCATOR_LEN = 20, /* zip64 end of central directory locator */
  MAX_COMMENT = 0xFFFF,
};

enum {
  ZIP_VERSION = 20,                          /* PKZIP 2.0: stored members, nothing newer */
  ZIP_MADE_BY = (3 << 8) | 20,               /* Unix, so unzip restores ext_attr's mode */
  ZIP_EXT_ATTR = 0100644u,                   /* -rw-r--r-- in the high 16 bits */
  DOS_TIME = 0,                              /* 00:00:00 */
  DOS_DATE = (0 << 9) | (1 << 5) | 1,        /* 1980-01-01, the earliest DOS date */
  FLAG_ENCRYPTED = 0x0001 | 0x0040 | 0x2000, /* traditional, strong, masked header */
  FLAG_UTF8 = 0x0800,
};

/* numpy pads the preamble (magic .. '\n') to this so the data is aligned in
 * the .npy file; the longest header we write (rank 8, 19-digit dims) fits. */
#define NPY_ALIGN 64
#define NPY_PREAMBLE_MAX 384
static const char NPY_MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* Members larger than this are fed to zlib's crc32 (which takes a uInt) in pieces. */
#define CRC_CHUNK (1u << 30)

struct clt_npz {
  unsigned char *buf; /* the whole file; stored arrays' data point into it */
  clt_npz_array *arrays;
  unsigned char **inflated; /* per member: its inflated .npy if deflated, else NULL */
  int n;
};

/* Deflate's largest possible expansion is 1032 bytes out per byte in (zlib's
 * FAQ): a deflated member declaring a larger size lies, and is refused before
 * anything is allocated. */
#define DEFLATE_MAX_RATIO 1032u
/* Bytes of a deflated member inflated first to read its .npy header: the
 * longest version 1.0 header (65535 bytes after a 10-byte preamble) fits. */
#define NPY_PEEK (10 + 0xFFFF)

/* ---- helpers shared by writer and reader ---- */

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }
static void put16(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v) {
  put16(p, v);
  put16(p + 2, v >> 16);
}

static uint32_t crc_bytes(uint32_t crc, const unsigned char *p, size_t n) {
  while (n > 0) {
    uInt k = n > CRC_CHUNK ? CRC_CHUNK : (uInt)n;
    crc = (uint32_t)crc32(crc, p, k);
    p += k;
    n -= k;
  }
  return crc;
}

/* Item size of a supported dtype descr (len bytes, not NUL-terminated); 0 if
 * unsupported. "<U<n>" needs a canonical n >= 1, as numpy writes it. */
static size_t dtype_itemsize(const char *d, size_t len) {
  if (len == 3 && memcmp(d, "<f4", 3) == 0) return 4;
  if (len == 3 &&
      (memcmp(d, "<f8", 3) == 0 || memcmp(d, "<i8", 3) == 0 || memcmp(d, "<u8", 3) == 0))
    return 8;
  if (len < 3 || d[0] != '<' || d[1] != 'U' || d[2] == '0') return 0;
  size_t n = 0;
  for (size_t i = 2; i < len; i++) {
    if (d[i] < '0' || d[i] > '9' || n > (SIZE_MAX / 4 - 9) / 10) return 0;
    n = n * 10 + (size_t)(d[i] - '0');
  }
  return 4 * n;
}

/* product(dims) * itemsize into *bytes; -1 if a dim is negative or it overflows. */
static int array_bytes(const int64_t *dims, int rank, size_t itemsize, size_t *bytes) {
  size_t total = itemsize;
  int zero = 0;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return -1;
    if (dims[i] == 0) zero = 1;
  }
  /* a zero dim makes any other dim legal, however large */
  for (int i = 0; i < rank && !zero; i++) {
    if ((uint64_t)dims[i] > SIZE_MAX / total) return -1;
    total *= (size_t)dims[i];
  }
  *bytes = zero ? 0 : total;
  return 0;
}

/* Python's repr of the shape tuple: "()", "(5,)", "(3, 3, 1, 64)". */
static void format_shape(const int64_t *dims, int rank, char *out, size_t size) {
  size_t k = (size_t)snprintf(out, size, "(");
  for (int i = 0; i < rank && k < size; i++)
    k += (size_t)snprintf(out + k, size - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (k < size) snprintf(out + k, size - k, rank == 1 ? ",)" : ")");
}

/* Copies untrusted bytes for an error message: control characters become '?'
 * so the message stays one line; long text is cut with "...". */
static void show(char *out, size_t size, const void *text, size_t len) {
  const unsigned char *s = text;
  size_t k = 0;
  for (; k < len && k + 4 < size; k++) out[k] = (s[k] < 0x20 || s[k] == 0x7f) ? '?' : (char)s[k];
  if (k < len) { /* k + 4 == size here: room for "..." and the NUL */
    memcpy(out + k, "...", 3);
    k += 3;
  }
  out[k] = '\0';
}

/* Why a member name (len bytes) could escape the folder it were extracted to, or
 * NULL if it cannot: cltrain never writes such names and refuses to read them. */
static const char *unsafe_name(const char *name, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (name[i] == '\\') return "has a backslash";
    if (name[i] == '.' && i + 1 < len && name[i + 1] == '.') return "contains '..'";
  }
  if (len > 0 && name[0] == '/') return "starts with '/'";
  return NULL;
}

static int cmp_names(const void *x, const void *y) {
  const clt_npz_array *a = *(const clt_npz_array *const *)x;
  const clt_npz_array *b = *(const clt_npz_array *const *)y;
  return strcmp(a->name, b->name);
}

/* Name repeated by two arrays (names NUL-terminated), or NULL; *nomem on
 * allocation failure. Sorting keeps a corrupt 65535-entry directory cheap. */
static const char *duplicate_name(const clt_npz_array *arrays, int n, int *nomem) {
  const char *dup = NULL;
  *nomem = 0;
  if (n < 2) return NULL;
  const clt_npz_array **order = malloc((size_t)n * sizeof *order);
  if (!order) {
    *nomem = 1;
    return NULL;
  }
  for (int i = 0; i < n; i++) order[i] = &arrays[i];
  qsort(order, (size_t)n, sizeof *order, cmp_names);
  for (int i = 1; i < n && !dup; i++)
    if (strcmp(order[i - 1]->name, order[i]->name) == 0) dup = order[i]->name;
  free(order);
  return dup;
}

/* ---- writer ---- */

typedef struct member_plan {
  unsigned char preamble[NPY_PREAMBLE_MAX];
  size_t preamble_len;
  size_t name_len; /* of "<name>.npy" */
  uint32_t crc;
  uint32_t offset; /* of the local header */
  uint32_t size;   /* preamble + data */
} member_plan;

static int check_array(const char *path, int i, const clt_npz_array *a, clt_err *e) {
  char shown[160], shape[CLT_NPZ_MAX_RANK * 24 + 8];
  if (!memchr(a->name, '\0', sizeof a->name))
    return clt_fail(e, CLT_ERR_ARG, "%s: array %d: name too long (at most %zu bytes)", path, i,
                    sizeof a->name - 1);
  show(shown, sizeof shown, a->name, strlen(a->name));
  if (!a->name[0]) return clt_fail(e, CLT_ERR_ARG, "%s: array %d: empty name", path, i);
  const char *unsafe = unsafe_name(a->name, strlen(a->name));
  if (unsafe)
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: unsafe name (%s)", path, shown, unsafe);
  if (!memchr(a->dtype, '\0', sizeof a->dtype) || !dtype_itemsize(a->dtype, strlen(a->dtype))) {
    char dt[40];
    show(dt, sizeof dt, a->dtype, strnlen(a->dtype, sizeof a->dtype));
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: unsupported dtype '%s'", path, shown, dt);
  }
  if (a->rank < 0 || a->rank > CLT_NPZ_MAX_RANK)
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: rank %d outside 0..%d", path, shown, a->rank,
                    CLT_NPZ_MAX_RANK);
  format_shape(a->dims, a->rank, shape, sizeof shape);
  size_t want;
  if (array_bytes(a->dims, a->rank, dtype_itemsize(a->dtype, strlen(a->dtype)), &want))
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: bad shape %s", path, shown, shape);
  if (want != a->bytes)
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: %zu bytes given, shape %s of %s needs %zu", path,
                    shown, a->bytes, shape, a->dtype, want);
  if (a->bytes && !a->data)
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: data is NULL", path, shown);
  return CLT_OK;
}

/* The .npy v1.0 preamble: magic, version, header length, then the header dict
 * in numpy's key order, padded with spaces and a final '\n' to NPY_ALIGN. */
static size_t npy_preamble(const clt_npz_array *a, unsigned char *out) {
  char shape[CLT_NPZ_MAX_RANK * 24 + 8];
  format_shape(a->dims, a->rank, shape, sizeof shape);
  char *dict = (char *)out + 10;
  int len = snprintf(dict, NPY_PREAMBLE_MAX - 10,
                     "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", a->dtype, shape);
  size_t total = 10 + (size_t)len + 1; /* + '\n' */
  total += (NPY_ALIGN - total % NPY_ALIGN) % NPY_ALIGN;
  memcpy(out, NPY_MAGIC, sizeof NPY_MAGIC);
  out[6] = 1; /* version 1.0 */
  out[7] = 0;
  put16(out + 8, (uint32_t)(total - 10));
  memset(out + 10 + len, ' ', total - 10 - (size_t)len - 1);
  out[total - 1] = '\n';
  return total;
}

/* Non-ASCII names are UTF-8 in cltrain; flag them so, as Python's zipfile does. */
static uint32_t name_flags(const char *name) {
  for (; *name; name++)
    if ((unsigned char)*name >= 0x80) return FLAG_UTF8;
  return 0;
}

static int put(FILE *f, const void *p, size_t n) {
  return n == 0 || fwrite(p, 1, n, f) == n ? 0 : -1;
}

int clt_npz_write(const char *path, const clt_npz_array *arrays, int n, clt_err *e) {
  int status = CLT_OK;
  FILE *f = NULL;
  member_plan *plan = NULL;
  unsigned char h[CENTRAL_LEN];

  if (n < 0 || (n > 0 && !arrays)) {
    status = clt_fail(e, CLT_ERR_ARG, "%s: bad array list (n = %d)", path, n);
    goto cleanup;
  }
  if (n >= 0xFFFF) { /* 0xFFFF in the end record would mean zip64 */
    status = clt_fail(e, CLT_ERR_ARG, "%s: %d arrays; at most 65534 are supported", path, n);
    goto cleanup;
  }
  /* Everything is checked before the file is created, so bad input never
   * truncates an existing file. */
  for (int i = 0; i < n; i++)
    if ((status = check_array(path, i, &arrays[i], e))) goto cleanup;
  int nomem;
  const char *dup = duplicate_name(arrays, n, &nomem);
  if (nomem || dup) {
    char shown[160];
    if (dup) show(shown, sizeof shown, dup, strlen(dup));
    status = nomem ? clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", path)
                   : clt_fail(e, CLT_ERR_ARG, "%s: two arrays named %s", path, shown);
    goto cleanup;
  }

  plan = calloc(n ? (size_t)n : 1, sizeof *plan);
  if (!plan) {
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  /* Sizes and CRCs up front, so local headers carry them and no data
   * descriptors are needed; everything must stay below 4 GiB without zip64. */
  uint64_t offset = 0, central = 0;
  for (int i = 0; i < n; i++) {
    member_plan *m = &plan[i];
    m->preamble_len = npy_preamble(&arrays[i], m->preamble);
    m->name_len = strlen(arrays[i].name) + 4;
    m->offset = (uint32_t)offset;
    if (arrays[i].bytes < 0xFFFFFFFFu) {
      m->size = (uint32_t)(m->preamble_len + arrays[i].bytes);
      offset += LOCAL_LEN + m->name_len + m->preamble_len + arrays[i].bytes;
      central += CENTRAL_LEN + m->name_len;
    }
    /* 0xFFFFFFFF itself would mean "see the zip64 extra field" */
    if (arrays[i].bytes >= 0xFFFFFFFFu || offset + central + EOCD_LEN >= 0xFFFFFFFFu) {
      status = clt_fail(e, CLT_ERR_ARG, "%s: archive would exceed 4 GiB (zip64 is not supported)",
                        path);
      goto cleanup;
    }
  }
  for (int i = 0; i < n; i++)
    plan[i].crc = crc_bytes(crc_bytes(0, plan[i].preamble, plan[i].preamble_len), arrays[i].data,
                            arrays[i].bytes);

  f = fopen(path, "wb");
  if (!f) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    goto cleanup;
  }
  errno = 0;
  for (int i = 0; i < n; i++) {
    const member_plan *m = &plan[i];
    uint32_t flags = name_flags(arrays[i].name);
    put32(h, SIG_LOCAL);
    put16(h + 4, ZIP_VERSION);
    put16(h + 6, flags);
    put16(h + 8, 0); /* stored */
    put16(h + 10, DOS_TIME);
    put16(h + 12, DOS_DATE);
    put32(h + 14, m->crc);
    put32(h + 18, m->size); /* compressed */
    put32(h + 22, m->size); /* uncompressed */
    put16(h + 26, (uint32_t)m->name_len);
    put16(h + 28, 0); /* extra field length */
    if (put(f, h, LOCAL_LEN) || put(f, arrays[i].name, m->name_len - 4) || put(f, ".npy", 4) ||
        put(f, m->preamble, m->preamble_len) || put(f, arrays[i].data, arrays[i].bytes))
      goto write_failed;
  }
  for (int i = 0; i < n; i++) {
    const member_plan *m = &plan[i];
    uint32_t flags = name_flags(arrays[i].name);
    put32(h, SIG_CENTRAL);
    put16(h + 4, ZIP_MADE_BY);
    put16(h + 6, ZIP_VERSION);
    put16(h + 8, flags);
    put16(h + 10, 0);
    put16(h + 12, DOS_TIME);
    put16(h + 14, DOS_DATE);
    put32(h + 16, m->crc);
    put32(h + 20, m->size);
    put32(h + 24, m->size);
    put16(h + 28, (uint32_t)m->name_len);
    put16(h + 30, 0); /* extra field length */
    put16(h + 32, 0); /* comment length */
    put16(h + 34, 0); /* disk number */
    put16(h + 36, 0); /* internal attributes */
    put32(h + 38, (uint32_t)ZIP_EXT_ATTR << 16);
    put32(h + 42, m->offset);
    if (put(f, h, CENTRAL_LEN) || put(f, arrays[i].name, m->name_len - 4) || put(f, ".npy", 4))
      goto write_failed;
  }
  put32(h, SIG_EOCD);
  put16(h + 4, 0); /* this disk */
  put16(h + 6, 0); /* disk with the central directory */
  put16(h + 8, (uint32_t)n);
  put16(h + 10, (uint32_t)n);
  put32(h + 12, (uint32_t)central);
  put32(h + 16, (uint32_t)offset);
  put16(h + 20, 0); /* comment length */
  if (put(f, h, EOCD_LEN) || fflush(f) != 0) goto write_failed;
  /* EINVAL: the file cannot be synced (a device such as /dev/null); nothing to flush */
  if (fsync(fileno(f)) != 0 && errno != EINVAL) {
    status = clt_fail(e, CLT_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    goto cleanup;
  }
  goto cleanup;

write_failed:
  status = clt_fail(e, CLT_ERR_IO, "%s: write failed: %s", path,
                    errno ? strerror(errno) : "I/O error");
cleanup:
  if (f && fclose(f) != 0 && status == CLT_OK)
    status = clt_fail(e, CLT_ERR_IO, "%s: close failed: %s", path, strerror(errno));
  free(plan);
  return status;
}

int clt_npy_write(const char *path, const clt_npz_array *a, clt_err *e) {
  int status = check_array(path, 0, a, e);
  if (status) return status;
  unsigned char preamble[NPY_PREAMBLE_MAX];
  const size_t len = npy_preamble(a, preamble);
  FILE *f = fopen(path, "wb");
  if (!f) return clt_fail(e, CLT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  errno = 0;
  if (put(f, preamble, len) || put(f, a->data, a->bytes) || fflush(f) != 0) {
    status = clt_fail(e, CLT_ERR_IO, "%s: write failed: %s", path,
                      errno ? strerror(errno) : "I/O error");
  } else if (fsync(fileno(f)) != 0 && errno != EINVAL) {
    status = clt_fail(e, CLT_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
  }
  if (fclose(f) != 0 && status == CLT_OK)
    status = clt_fail(e, CLT_ERR_IO, "%s: close failed: %s", path, strerror(errno));
  return status;
}

/* ---- reader ---- */

static int read_whole_file(const char *path, unsigned char **out, size_t *out_size, clt_err *e) {
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

/* A cursor over the .npy header text, a Python dict literal. */
typedef struct hdr {
  const unsigned char *s;
  size_t i, n;
} hdr;

static void hdr_ws(hdr *h) {
  while (h->i < h->n &&
         (h->s[h->i] == ' ' || h->s[h->i] == '\t' || h->s[h->i] == '\n' || h->s[h->i] == '\r'))
    h->i++;
}
static int hdr_char(hdr *h, char c) {
  hdr_ws(h);
  if (h->i >= h->n || h->s[h->i] != (unsigned char)c) return -1;
  h->i++;
  return 0;
}
static int hdr_word(hdr *h, const char *w) {
  size_t len = strlen(w);
  hdr_ws(h);
  if (h->n - h->i < len || memcmp(h->s + h->i, w, len) != 0) return -1;
  h->i += len;
  return 0;
}
/* A quoted string without escapes (none occur in keys or supported descrs). */
static int hdr_string(hdr *h, const unsigned char **str, size_t *len) {
  hdr_ws(h);
  if (h->i >= h->n || (h->s[h->i] != '\'' && h->s[h->i] != '"')) return -1;
  unsigned char q = h->s[h->i++];
  size_t start = h->i;
  while (h->i < h->n && h->s[h->i] != q) {
    if (h->s[h->i] == '\\') return -1;
    h->i++;
  }
  if (h->i >= h->n) return -1;
  *str = h->s + start;
  *len = h->i++ - start;
  return 0;
}
/* A shape tuple of non-negative ints: "()", "(5,)", "(3, 4)", "(3, 4,)"; a
 * bare "(5)" is an int in Python, not a tuple, so it is refused. */
static int hdr_shape(hdr *h, int64_t *dims, int *rank) {
  int comma = 0;
  *rank = 0;
  if (hdr_char(h, '(')) return -1;
  for (;;) {
    hdr_ws(h);
    if (h->i < h->n && h->s[h->i] == ')') break;
    if (*rank == CLT_NPZ_MAX_RANK) return -2;
    if (h->i >= h->n || h->s[h->i] < '0' || h->s[h->i] > '9') return -1;
    int64_t v = 0;
    while (h->i < h->n && h->s[h->i] >= '0' && h->s[h->i] <= '9') {
      int digit = h->s[h->i++] - '0';
      if (v > (INT64_MAX - digit) / 10) return -1;
      v = v * 10 + digit;
    }
    if (h->i < h->n && h->s[h->i] == 'L') h->i++; /* Python 2 longs, in old files */
    dims[(*rank)++] = v;
    comma = hdr_char(h, ',') == 0;
    if (!comma) break;
  }
  if (hdr_char(h, ')') || (*rank == 1 && !comma)) return -1;
  return 0;
}

/* Parses the header of the .npy file d[0..n) (a member's data; only its first
 * `avail` bytes need be there) into a's dtype, rank and dims; *start receives
 * where the data begins and *want the bytes the shape needs. */
static int parse_npy_header(const char *path, const char *member, const unsigned char *d, size_t n,
                            size_t avail, clt_npz_array *a, size_t *start, size_t *want,
                            clt_err *e) {
  if (avail < 10 || memcmp(d, NPY_MAGIC, sizeof NPY_MAGIC) != 0)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: not a .npy file (bad magic)", path, member);
  size_t hlen, hoff;
  if (d[6] == 1 && d[7] == 0) { /* 2.0 and 3.0 (UTF-8 header) have a 4-byte length */
    hlen = le16(d + 8);
    hoff = 10;
  } else if ((d[6] == 2 || d[6] == 3) && d[7] == 0 && avail >= 12) {
    hlen = le32(d + 8);
    hoff = 12;
  } else {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: unsupported .npy version %u.%u", path,
                    member, d[6], d[7]);
  }
  if (hlen > n - hoff)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: .npy header length %zu exceeds the member (%zu bytes)", path,
                    member, hlen, n);
  if (hlen > avail - hoff) /* only for deflated members, whose first NPY_PEEK bytes are read */
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: .npy header of %zu bytes is too long", path,
                    member, hlen);

  hdr h = {d + hoff, 0, hlen};
  const unsigned char *descr = NULL;
  size_t descr_len = 0;
  int fortran = -1, rank = -1, bad = 0;
  int64_t dims[CLT_NPZ_MAX_RANK];
  const char *what = "expected '{'";
  if (hdr_char(&h, '{')) goto bad_header;
  /* numpy writes descr, fortran_order, shape in that order; any order is accepted */
  for (;;) {
    const unsigned char *key;
    size_t key_len;
    hdr_ws(&h);
    if (h.i < h.n && h.s[h.i] == '}') break;
    what = "expected a quoted key";
    if (hdr_string(&h, &key, &key_len)) goto bad_header;
    what = "expected ':'";
    if (hdr_char(&h, ':')) goto bad_header;
    what = "duplicate key";
    if (key_len == 5 && memcmp(key, "descr", 5) == 0) {
      if (descr) goto bad_header;
      what = "descr is not a quoted dtype string (structured dtypes are not supported)";
      if (hdr_string(&h, &descr, &descr_len)) goto bad_header;
    } else if (key_len == 13 && memcmp(key, "fortran_order", 13) == 0) {
      if (fortran >= 0) goto bad_header;
      what = "fortran_order is not True or False";
      if (hdr_word(&h, "True") == 0) {
        fortran = 1;
      } else if (hdr_word(&h, "False") == 0) {
        fortran = 0;
      } else {
        goto bad_header;
      }
    } else if (key_len == 5 && memcmp(key, "shape", 5) == 0) {
      if (rank >= 0) goto bad_header;
      bad = hdr_shape(&h, dims, &rank);
      if (bad == -2)
        return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: rank exceeds %d", path, member,
                        CLT_NPZ_MAX_RANK);
      what = "shape is not a tuple of non-negative integers";
      if (bad) goto bad_header;
    } else {
      char k[40];
      show(k, sizeof k, key, key_len);
      return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: bad .npy header: unexpected key '%s'",
                      path, member, k);
    }
    if (hdr_char(&h, ',')) break;
  }
  what = "expected '}'";
  if (hdr_char(&h, '}')) goto bad_header;
  hdr_ws(&h);
  what = "text after '}'";
  if (h.i != h.n) goto bad_header;
  what = "missing key descr, fortran_order or shape";
  if (!descr || fortran < 0 || rank < 0) goto bad_header;

  size_t itemsize = dtype_itemsize((const char *)descr, descr_len);
  if (!itemsize || descr_len >= sizeof a->dtype) {
    char dt[40];
    show(dt, sizeof dt, descr, descr_len);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: unsupported dtype '%s'", path, member, dt);
  }
  if (fortran)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: fortran_order True is not supported", path,
                    member);
  if (array_bytes(dims, rank, itemsize, want)) {
    char shape[CLT_NPZ_MAX_RANK * 24 + 8];
    format_shape(dims, rank, shape, sizeof shape);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: shape %s is too large", path, member, shape);
  }
  memcpy(a->dtype, descr, descr_len);
  a->dtype[descr_len] = '\0';
  a->rank = rank;
  memcpy(a->dims, dims, (size_t)rank * sizeof dims[0]);
  *start = hoff + hlen;
  return CLT_OK;

bad_header:
  return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: bad .npy header: %s (at byte %zu of %zu)",
                  path, member, what, h.i, hlen);
}

/* Parses the .npy file d[0..n) (a member's data) into a. */
static int parse_npy(const char *path, const char *member, const unsigned char *d, size_t n,
                     clt_npz_array *a, clt_err *e) {
  size_t start = 0, want = 0;
  int status = parse_npy_header(path, member, d, n, n, a, &start, &want, e);
  if (status) return status;
  if (want != n - start) {
    char shape[CLT_NPZ_MAX_RANK * 24 + 8];
    format_shape(a->dims, a->rank, shape, sizeof shape);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: data is %zu bytes, shape %s of %s needs %zu",
                    path, member, n - start, shape, a->dtype, want);
  }
  a->data = d + start;
  a->bytes = want;
  return CLT_OK;
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
  if ((status = parse_npy_header(path, member, peek, n, got, &header, &start, &want, e))) {
    if (got < peek_len) /* the stream ended inside the header: say that */
      status = clt_fail(e, CLT_ERR_FORMAT,
                        "%s: member %s: deflate data ends after %zu of the %zu bytes declared",
                        path, member, got, n);
    goto cleanup;
  }
  if (n - start != want) {
    char shape[CLT_NPZ_MAX_RANK * 24 + 8];
    format_shape(header.dims, header.rank, shape, sizeof shape);
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
  show(member, sizeof member, name, name_len);
  const char *unsafe = unsafe_name((const char *)name, name_len);
  if (unsafe)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: unsafe name (%s)", path, member, unsafe);
  if (name_len < 4 || memcmp(name + name_len - 4, ".npy", 4) != 0)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: not a .npy file (name does not end in .npy)",
                    path, member);
  size_t base_len = name_len - 4;
  show(member, sizeof member, name, base_len); /* named as the array from here on */
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
  uint32_t got = crc_bytes(0, npy, (size_t)usize);
  if (got != crc)
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member %s: CRC-32 mismatch (stored 0x%08x, computed 0x%08x)", path, member,
                    (unsigned)crc, (unsigned)got);
  memcpy(a->name, name, base_len);
  a->name[base_len] = '\0';
  return parse_npy(path, member, npy, (size_t)usize, a, e);
}

int clt_npz_read(const char *path, clt_npz **out, clt_err *e) {
  int status = CLT_OK;
  clt_npz *z = NULL;
  size_t size = 0;
  zip_dir dir = {0};

  *out = NULL;
  z = calloc(1, sizeof *z);
  if (!z) {
    status = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  if ((status = read_whole_file(path, &z->buf, &size, e))) goto cleanup;
  if ((status = find_directory(path, z->buf, size, &dir, e))) goto cleanup;
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
    if ((status = read_member(path, z->buf, &dir, i, &p, &z->arrays[i], &z->inflated[i], e)))
      goto cleanup;
  }
  if (p != dir.offset + dir.size) {
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: corrupt central directory: %llu stray bytes after %d entries", path,
                      (unsigned long long)(dir.offset + dir.size - p), z->n);
    goto cleanup;
  }
  int nomem;
  const char *dup = duplicate_name(z->arrays, z->n, &nomem);
  if (nomem || dup) {
    char shown[160];
    if (dup) show(shown, sizeof shown, dup, strlen(dup));
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

int clt_npz_count(const clt_npz *z) { return z ? z->n : 0; }

int clt_npz_check_finite(const char *path, const clt_npz_array *a, clt_err *e) {
  const int f8 = strcmp(a->dtype, "<f8") == 0;
  if (!f8 && strcmp(a->dtype, "<f4") != 0) return CLT_OK;
  const unsigned char *d = a->data;
  const size_t item = f8 ? 8 : 4, n = a->bytes / item;
  for (size_t i = 0; i < n; i++) {
    /* All exponent bits set: an infinity (zero mantissa) or a NaN. */
    const uint64_t bits = f8 ? le64(d + 8 * i) : le32(d + 4 * i);
    const uint64_t expo = f8 ? 0x7FF0000000000000ull : 0x7F800000u;
    const uint64_t mant = f8 ? 0x000FFFFFFFFFFFFFull : 0x007FFFFFu;
    if ((bits & expo) != expo) continue;
    const int negative = f8 ? (int)(bits >> 63) : (int)(bits >> 31 & 1);
    char shown[160];
    show(shown, sizeof shown, a->name, strnlen(a->name, sizeof a->name));
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s holds a non-finite value (%s at index %zu)",
                    path, shown,
                    bits & mant ? "NaN"
                    : negative  ? "-Inf"
                                : "+Inf",
                    i);
  }
  return CLT_OK;
}

const clt_npz_array *clt_npz_at(const clt_npz *z, int i) {
  return z && i >= 0 && i < z->n ? &z->arrays[i] : NULL;
}

const clt_npz_array *clt_npz_take(const clt_npz *z, const char *name, char *taken) {
  for (int i = 0; i < clt_npz_count(z); i++) {
    if (strcmp(clt_npz_at(z, i)->name, name) == 0) {
      taken[i] = 1;
      return clt_npz_at(z, i);
    }
  }
  return NULL;
}

void clt_npz_printable(char *out, size_t size, const char *text) {
  size_t k = 0;
  for (; text[k] && k + 4 < size; k++)
    out[k] = (unsigned char)text[k] < 0x20 || text[k] == 0x7f ? '?' : text[k];
  if (text[k]) {
    memcpy(out + k, "...", 3);
    k += 3;
  }
  out[k] = '\0';
}

const clt_npz_array *clt_npz_find(const clt_npz *z, const char *name) {
  for (int i = 0; z && name && i < z->n; i++)
    if (strcmp(z->arrays[i].name, name) == 0) return &z->arrays[i];
  return NULL;
}

void clt_npz_free(clt_npz *z) {
  if (!z) return;
  for (int i = 0; z->inflated && i < z->n; i++) free(z->inflated[i]);
  free(z->inflated);
  free(z->arrays);
  free(z->buf);
  free(z);
}

/* ---- strings ---- */

/* Next code point of UTF-8 text at *s (advanced past it); malformed or
 * overlong sequences and surrogates give U+FFFD and skip one byte, so there
 * are never more code points than bytes. */
static uint32_t utf8_next(const unsigned char **s) {
  const unsigned char *p = *s;
  uint32_t cp;
  int more;
  if (p[0] < 0x80) {
    *s = p + 1;
    return p[0];
  }
  if (p[0] >= 0xC2 && p[0] <= 0xDF) {
    cp = p[0] & 0x1F;
    more = 1;
  } else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
    cp = p[0] & 0x0F;
    more = 2;
  } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
    cp = p[0] & 0x07;
    more = 3;
  } else {
    goto bad;
  }
  for (int i = 1; i <= more; i++) { /* stops at the NUL: it is not a continuation byte */
    if ((p[i] & 0xC0) != 0x80) goto bad;
    cp = cp << 6 | (p[i] & 0x3F);
  }
  if ((more == 2 && cp < 0x800) || (more == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    goto bad;
  *s = p + 1 + more;
  return cp;
bad:
  *s = p + 1;
  return 0xFFFD;
}

void clt_npz_string(clt_npz_array *a, const char *name, const char *text, uint32_t *buf) {
  /* numpy stores '' as '<U1' holding one NUL; buf may be empty then */
  static const uint32_t empty = 0;
  size_t name_len = strlen(name), n = 0;
  memset(a, 0, sizeof *a);
  /* an over-long name fills the field without a NUL, which clt_npz_write
   * reports as too long instead of silently writing a shortened name */
  memcpy(a->name, name, name_len < sizeof a->name ? name_len : sizeof a->name);
  unsigned char *out = (unsigned char *)buf;
  for (const unsigned char *s = (const unsigned char *)text; *s; n++) {
    uint32_t cp = utf8_next(&s);
    put32(out + 4 * n, cp); /* UTF-32LE whatever the host order */
  }
  char dtype[32] = {
      0}; /* "<U" and up to 20 digits; more than a dtype holds only for absurd texts */
  snprintf(dtype, sizeof dtype, "<U%zu", n ? n : 1);
  memcpy(a->dtype, dtype, sizeof a->dtype - 1);
  a->rank = 0;
  a->data = n ? (const void *)buf : (const void *)&empty;
  a->bytes = 4 * (n ? n : 1);
}

int clt_npz_get_string(const clt_npz_array *a, char *out, size_t size) {
  if (!a || !out || size == 0 || a->rank != 0 || strncmp(a->dtype, "<U", 2) != 0) return -1;
  size_t itemsize = dtype_itemsize(a->dtype, strnlen(a->dtype, sizeof a->dtype));
  if (!itemsize || a->bytes != itemsize || !a->data) return -1;
  const unsigned char *d = a->data;
  size_t k = 0;
  /* numpy pads with NULs to the dtype's length; the text ends at the first */
  for (size_t i = 0; i < itemsize / 4 && k + 1 < size; i++) {
    uint32_t cp = le32(d + 4 * i);
    if (cp == 0) break;
    out[k++] = cp < 256 ? (char)cp : '?';
  }
  out[k] = '\0';
  return 0;
}
