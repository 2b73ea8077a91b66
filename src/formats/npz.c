/* NumPy .npz archives: what writer and reader share, the accessors of an archive
 * read, and strings ("<U<n>" scalars). See npz_impl.h for the other parts.
 *
 * Arrays returned by the reader point into the archive's single buffer, at
 * whatever offset the member has in the file: data is NOT aligned for its
 * type, so callers must memcpy it out rather than cast the pointer. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strnlen */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "npz_impl.h"

/* ---- helpers shared by writer and reader ---- */

uint32_t clt_npz_crc(uint32_t crc, const unsigned char *p, size_t n) {
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
size_t clt_npz_itemsize(const char *d, size_t len) {
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
int clt_npz_array_bytes(const int64_t *dims, int rank, size_t itemsize, size_t *bytes) {
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
void clt_npz_format_shape(const int64_t *dims, int rank, char *out, size_t size) {
  size_t k = (size_t)snprintf(out, size, "(");
  for (int i = 0; i < rank && k < size; i++)
    k += (size_t)snprintf(out + k, size - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (k < size) snprintf(out + k, size - k, rank == 1 ? ",)" : ")");
}

/* Copies untrusted bytes for an error message: control characters become '?'
 * so the message stays one line; long text is cut with "...". */
void clt_npz_show(char *out, size_t size, const void *text, size_t len) {
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
const char *clt_npz_unsafe_name(const char *name, size_t len) {
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
const char *clt_npz_duplicate_name(const clt_npz_array *arrays, int n, int *nomem) {
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

/* ---- an archive read ---- */

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
    clt_npz_show(shown, sizeof shown, a->name, strnlen(a->name, sizeof a->name));
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

uint32_t clt_npz_utf8_next(const unsigned char **s) {
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
    uint32_t cp = clt_npz_utf8_next(&s);
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

/* Code point cp as UTF-8 into out (room: the bytes left); returns the bytes
 * written, 0 when it does not fit. Surrogates and values past U+10FFFF, which
 * UTF-8 cannot carry, become U+FFFD. */
static size_t put_utf8(uint32_t cp, char *out, size_t room) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
  const size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  if (n > room) return 0;
  if (n == 1) {
    out[0] = (char)cp;
    return 1;
  }
  static const unsigned char lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (size_t i = n - 1; i > 0; i--, cp >>= 6) out[i] = (char)(0x80 | (cp & 0x3F));
  out[0] = (char)(lead[n] | cp);
  return n;
}

int clt_npz_get_string(const clt_npz_array *a, char *out, size_t size) {
  if (!a || !out || size == 0 || a->rank != 0 || strncmp(a->dtype, "<U", 2) != 0) return -1;
  size_t itemsize = clt_npz_itemsize(a->dtype, strnlen(a->dtype, sizeof a->dtype));
  if (!itemsize || a->bytes != itemsize || !a->data) return -1;
  const unsigned char *d = a->data;
  size_t k = 0;
  /* numpy pads with NULs to the dtype's length; the text ends at the first.
   * A character that does not fit ends the text whole, never cut mid-sequence. */
  for (size_t i = 0; i < itemsize / 4; i++) {
    uint32_t cp = le32(d + 4 * i);
    if (cp == 0) break;
    const size_t n = put_utf8(cp, out + k, size - 1 - k);
    if (!n) break;
    k += n;
  }
  out[k] = '\0';
  return 0;
}
