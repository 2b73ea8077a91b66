/* Protobuf wire-format encoding into a growable buffer (see pb.h). */
#include "pb.h"

#include <stdlib.h>
#include <string.h>

#define VARINT_MAX 10 /* bytes of the longest varint (a 64-bit value) */

void clt_pb_init(clt_pb *b) { memset(b, 0, sizeof *b); }

void clt_pb_free(clt_pb *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

/* Room for n more bytes; 0 on success. */
static int reserve(clt_pb *b, size_t n) {
  if (b->failed) return -1;
  if (n <= b->cap - b->len) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < n) {
    if (cap > SIZE_MAX / 2) {
      b->failed = 1;
      return -1;
    }
    cap *= 2;
  }
  unsigned char *p = realloc(b->data, cap);
  if (!p) {
    b->failed = 1;
    return -1;
  }
  b->data = p;
  b->cap = cap;
  return 0;
}

void clt_pb_raw(clt_pb *b, const void *p, size_t n) {
  if (n == 0 || reserve(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static size_t put_varint(unsigned char *out, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  out[n++] = (unsigned char)v;
  return n;
}

size_t clt_pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

void clt_pb_varint(clt_pb *b, uint64_t v) {
  if (reserve(b, VARINT_MAX)) return;
  b->len += put_varint(b->data + b->len, v);
}

void clt_pb_tag(clt_pb *b, int field, int wire_type) {
  clt_pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire_type);
}

void clt_pb_int(clt_pb *b, int field, int64_t v) {
  clt_pb_tag(b, field, CLT_PB_VARINT);
  clt_pb_varint(b, (uint64_t)v);
}

static void put_float(unsigned char *out, float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  for (int i = 0; i < 4; i++) out[i] = (unsigned char)(u >> (8 * i));
}

void clt_pb_float(clt_pb *b, int field, float v) {
  clt_pb_tag(b, field, CLT_PB_FIXED32);
  if (reserve(b, 4)) return;
  put_float(b->data + b->len, v);
  b->len += 4;
}

void clt_pb_double(clt_pb *b, int field, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  clt_pb_tag(b, field, CLT_PB_FIXED64);
  if (reserve(b, 8)) return;
  for (int i = 0; i < 8; i++) b->data[b->len + i] = (unsigned char)(u >> (8 * i));
  b->len += 8;
}

void clt_pb_bytes(clt_pb *b, int field, const void *p, size_t n) {
  clt_pb_tag(b, field, CLT_PB_LEN);
  clt_pb_varint(b, n);
  clt_pb_raw(b, p, n);
}

void clt_pb_string(clt_pb *b, int field, const char *s) { clt_pb_bytes(b, field, s, strlen(s)); }

void clt_pb_packed_int64(clt_pb *b, int field, const int64_t *v, size_t n) {
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++) bytes += clt_pb_varint_size((uint64_t)v[i]);
  clt_pb_tag(b, field, CLT_PB_LEN);
  clt_pb_varint(b, bytes);
  for (size_t i = 0; i < n; i++) clt_pb_varint(b, (uint64_t)v[i]);
}

void clt_pb_packed_float(clt_pb *b, int field, const float *v, size_t n) {
  clt_pb_tag(b, field, CLT_PB_LEN);
  clt_pb_varint(b, 4 * (uint64_t)n);
  if (n == 0 || n > SIZE_MAX / 4 || reserve(b, 4 * n)) return;
  for (size_t i = 0; i < n; i++) put_float(b->data + b->len + 4 * i, v[i]);
  b->len += 4 * n;
}

size_t clt_pb_begin(clt_pb *b, int field) {
  clt_pb_tag(b, field, CLT_PB_LEN);
  const size_t mark = b->len;
  /* Room for the longest length prefix; end shrinks it to the real one. */
  if (!reserve(b, VARINT_MAX)) b->len += VARINT_MAX;
  return mark;
}

void clt_pb_end(clt_pb *b, size_t mark) {
  if (b->failed) return;
  const size_t body = mark + VARINT_MAX, n = b->len - body;
  const size_t k = put_varint(b->data + mark, n);
  memmove(b->data + mark + k, b->data + body, n);
  b->len = mark + k + n;
}
