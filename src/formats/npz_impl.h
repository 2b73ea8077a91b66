/* What the parts of the .npz code share; npz.h is the interface.
 *   npz.c        helpers of writer and reader, the archive's accessors, strings
 *   npz_npy.c    the .npy format: the preamble written, the header parsed
 *   npz_write.c  writing archives and .npy files
 *   npz_read.c   reading archives: the zip structure, stored and deflated members */
#ifndef CLT_NPZ_IMPL_H
#define CLT_NPZ_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "npz.h"

/* Zip records (PKWARE's APPNOTE): signatures, fixed lengths, the writer's fields. */
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

/* The longest .npy preamble written (rank 8, 19-digit dims) fits; see npz_npy.c. */
#define NPY_PREAMBLE_MAX 384

/* Members larger than this are fed to zlib's crc32 (which takes a uInt) in pieces. */
#define CRC_CHUNK (1u << 30)

struct clt_npz {
  unsigned char *buf; /* the whole file, or NULL when the caller holds it (clt_npz_read_memory);
                         stored arrays' data point into it */
  clt_npz_array *arrays;
  unsigned char **inflated; /* per member: its inflated .npy if deflated, else NULL */
  int n;
};

static inline uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t le64(const unsigned char *p) {
  return le32(p) | (uint64_t)le32(p + 4) << 32;
}
static inline void put16(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static inline void put32(unsigned char *p, uint32_t v) {
  put16(p, v);
  put16(p + 2, v >> 16);
}

/* npz.c (each described where it is defined) */
uint32_t clt_npz_crc(uint32_t crc, const unsigned char *p, size_t n);
size_t clt_npz_itemsize(const char *d, size_t len);
int clt_npz_array_bytes(const int64_t *dims, int rank, size_t itemsize, size_t *bytes);
void clt_npz_format_shape(const int64_t *dims, int rank, char *out, size_t size);
void clt_npz_show(char *out, size_t size, const void *text, size_t len);
const char *clt_npz_unsafe_name(const char *name, size_t len);
const char *clt_npz_duplicate_name(const clt_npz_array *arrays, int n, int *nomem);

/* npz_npy.c: the preamble into out[NPY_PREAMBLE_MAX]; the header, or header and data, of
 * a member's .npy bytes d[0..n) */
size_t clt_npy_preamble(const clt_npz_array *a, unsigned char *out);
int clt_npy_parse_header(const char *path, const char *member, const unsigned char *d, size_t n,
                         size_t avail, clt_npz_array *a, size_t *start, size_t *want, clt_err *e);
int clt_npy_parse(const char *path, const char *member, const unsigned char *d, size_t n,
                  clt_npz_array *a, clt_err *e);

#endif
