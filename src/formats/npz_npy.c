/* The .npy format inside an archive: the version 1.0 preamble the writer emits
 * and the header parser of the reader, which takes versions 1.0 to 3.0. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "npz_impl.h"

/* numpy pads the preamble (magic .. '\n') to this so the data is aligned in
 * the .npy file. */
#define NPY_ALIGN 64
static const char NPY_MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* The .npy v1.0 preamble: magic, version, header length, then the header dict
 * in numpy's key order, padded with spaces and a final '\n' to NPY_ALIGN. */
size_t clt_npy_preamble(const clt_npz_array *a, unsigned char *out) {
  char shape[CLT_NPZ_MAX_RANK * 24 + 8];
  clt_npz_format_shape(a->dims, a->rank, shape, sizeof shape);
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
int clt_npy_parse_header(const char *path, const char *member, const unsigned char *d, size_t n,
                         size_t avail, clt_npz_array *a, size_t *start, size_t *want, clt_err *e) {
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
      clt_npz_show(k, sizeof k, key, key_len);
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

  size_t itemsize = clt_npz_itemsize((const char *)descr, descr_len);
  if (!itemsize || descr_len >= sizeof a->dtype) {
    char dt[40];
    clt_npz_show(dt, sizeof dt, descr, descr_len);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: unsupported dtype '%s'", path, member, dt);
  }
  if (fortran)
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: fortran_order True is not supported", path,
                    member);
  if (clt_npz_array_bytes(dims, rank, itemsize, want)) {
    char shape[CLT_NPZ_MAX_RANK * 24 + 8];
    clt_npz_format_shape(dims, rank, shape, sizeof shape);
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
int clt_npy_parse(const char *path, const char *member, const unsigned char *d, size_t n,
                  clt_npz_array *a, clt_err *e) {
  size_t start = 0, want = 0;
  int status = clt_npy_parse_header(path, member, d, n, n, a, &start, &want, e);
  if (status) return status;
  if (want != n - start) {
    char shape[CLT_NPZ_MAX_RANK * 24 + 8];
    clt_npz_format_shape(a->dims, a->rank, shape, sizeof shape);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s: data is %zu bytes, shape %s of %s needs %zu",
                    path, member, n - start, shape, a->dtype, want);
  }
  a->data = d + start;
  a->bytes = want;
  return CLT_OK;
}
