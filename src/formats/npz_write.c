/* Writing NumPy .npz archives (numpy.savez's form) and .npy files.
 *
 * The writer emits the plainest zip there is (PKZIP 2.0, method 0, sizes and
 * CRC-32 in the local headers, no data descriptors, no zip64, fixed DOS
 * timestamps), so the same arrays always give the same bytes. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno, fsync */
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npz_impl.h"

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
  clt_npz_show(shown, sizeof shown, a->name, strlen(a->name));
  if (!a->name[0]) return clt_fail(e, CLT_ERR_ARG, "%s: array %d: empty name", path, i);
  const char *unsafe = clt_npz_unsafe_name(a->name, strlen(a->name));
  if (unsafe)
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: unsafe name (%s)", path, shown, unsafe);
  if (!memchr(a->dtype, '\0', sizeof a->dtype) || !clt_npz_itemsize(a->dtype, strlen(a->dtype))) {
    char dt[40];
    clt_npz_show(dt, sizeof dt, a->dtype, strnlen(a->dtype, sizeof a->dtype));
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: unsupported dtype '%s'", path, shown, dt);
  }
  if (a->rank < 0 || a->rank > CLT_NPZ_MAX_RANK)
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: rank %d outside 0..%d", path, shown, a->rank,
                    CLT_NPZ_MAX_RANK);
  clt_npz_format_shape(a->dims, a->rank, shape, sizeof shape);
  size_t want;
  if (clt_npz_array_bytes(a->dims, a->rank, clt_npz_itemsize(a->dtype, strlen(a->dtype)), &want))
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: bad shape %s", path, shown, shape);
  if (want != a->bytes)
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: %zu bytes given, shape %s of %s needs %zu", path,
                    shown, a->bytes, shape, a->dtype, want);
  if (a->bytes && !a->data)
    return clt_fail(e, CLT_ERR_ARG, "%s: array %s: data is NULL", path, shown);
  return CLT_OK;
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
  const char *dup = clt_npz_duplicate_name(arrays, n, &nomem);
  if (nomem || dup) {
    char shown[160];
    if (dup) clt_npz_show(shown, sizeof shown, dup, strlen(dup));
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
    m->preamble_len = clt_npy_preamble(&arrays[i], m->preamble);
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
    plan[i].crc = clt_npz_crc(clt_npz_crc(0, plan[i].preamble, plan[i].preamble_len),
                              arrays[i].data, arrays[i].bytes);

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
  const size_t len = clt_npy_preamble(a, preamble);
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
