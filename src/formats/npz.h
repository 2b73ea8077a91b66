/* NumPy .npz archives (zip, stored members, CRC-32 written and verified), the
 * checkpoint format: `numpy.load(path, allow_pickle=False)` reads them. The
 * reader also takes numpy.savez_compressed's deflated members. */
#ifndef CLT_NPZ_H
#define CLT_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define CLT_NPZ_MAX_RANK 8

/* Supported dtypes: "<f4" (float32), "<f8" (float64), "<i8" (int64), "<u8" (uint64),
 * and "<U<n>" (a unicode string of n characters, stored UTF-32LE as numpy does). */
typedef struct clt_npz_array {
  char name[128]; /* member name without ".npy", e.g. "conv2d/kernel" */
  char dtype[16];
  int rank; /* 0 for a scalar */
  int64_t dims[CLT_NPZ_MAX_RANK];
  const void *data; /* little-endian, C order */
  size_t bytes;     /* must equal product(dims) * itemsize */
} clt_npz_array;

/* Writes the arrays as members "<name>.npy" of a new zip at path (created or
 * truncated), flushes and fsyncs it before closing. Atomic replacement (temp
 * file + rename) is the caller's job. Errors name the path. */
int clt_npz_write(const char *path, const clt_npz_array *arrays, int n, clt_err *e);

/* Writes one array as a plain .npy file at path (created or truncated; flushed and
 * fsynced): `numpy.load(path)` reads it. */
int clt_npy_write(const char *path, const clt_npz_array *a, clt_err *e);

typedef struct clt_npz clt_npz; /* an archive read into memory */

/* Reads the whole archive, verifying the zip structure, each member's CRC-32 and
 * .npy header (dtype among the supported ones, C order, shape matching the data
 * size). Members may be stored or deflated; a deflated one must inflate to
 * exactly the size its zip entry and .npy header declare. Member names with
 * "..", a leading '/' or a backslash are refused (the writer refuses them too).
 * Errors name the path and the member. */
int clt_npz_read(const char *path, clt_npz **out, clt_err *e);
/* The same for an archive already in memory: size bytes, which must outlive the
 * archive (stored members' data point into them); path names it in errors. */
int clt_npz_read_memory(const char *path, const unsigned char *bytes, size_t size, clt_npz **out,
                        clt_err *e);
/* A regular file's bytes into a new buffer *out (free it), *size of them. */
int clt_npz_read_bytes(const char *path, unsigned char **out, size_t *size, clt_err *e);
int clt_npz_count(const clt_npz *z);
const clt_npz_array *clt_npz_at(const clt_npz *z, int i);
/* CLT_OK unless float array a ("<f4" or "<f8"; other dtypes pass) holds a NaN or
 * an infinity: then CLT_ERR_FORMAT with "PATH: member NAME holds a non-finite
 * value (NaN at index 7)" (or +Inf, -Inf), the first one in C order. */
int clt_npz_check_finite(const char *path, const clt_npz_array *a, clt_err *e);
/* NULL if absent. */
const clt_npz_array *clt_npz_find(const clt_npz *z, const char *name);
/* The same, marking the member's index in taken[] (clt_npz_count bytes): readers
 * that must refuse a member they did not expect look for one left unmarked. */
const clt_npz_array *clt_npz_take(const clt_npz *z, const char *name, char *taken);
/* A member name (or any text from a file) for a message: control bytes as '?',
 * cut with "..." to fit size. */
void clt_npz_printable(char *out, size_t size, const char *text);
void clt_npz_free(clt_npz *z);

/* Next code point of UTF-8 text at *s (advanced past it); malformed or
 * overlong sequences and surrogates give U+FFFD and skip one byte, so there
 * are never more code points than bytes. */
uint32_t clt_npz_utf8_next(const unsigned char **s);

/* Convenience for strings: builds a "<U<n>" scalar from UTF-8/ASCII text into
 * buf (4 bytes per character, caller-provided, at least 4*strlen(text) bytes). */
void clt_npz_string(clt_npz_array *a, const char *name, const char *text, uint32_t *buf);
/* Reads a "<U<n>" scalar back into UTF-8 text, cut before the first character
 * that does not fit size (a->bytes + 1 always holds it all: UTF-8 never takes
 * more than the 4 bytes a character takes in the file); returns 0 on success,
 * -1 if the member is not such a string. */
int clt_npz_get_string(const clt_npz_array *a, char *out, size_t size);

#endif
