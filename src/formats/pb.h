/* A small protobuf encoder (wire format only: varint, fixed32, fixed64,
 * length-delimited), enough to write ONNX models (src/formats/onnx.c) and TensorBoard
 * event files (src/formats/tensorboard.c) without libprotobuf.
 *
 * Fields are appended to a growable byte buffer. A nested message is written in
 * place between clt_pb_begin and clt_pb_end: begin leaves room for the largest
 * length prefix, end writes the real length and moves the body up to it. An
 * allocation failure is sticky: later writes do nothing and clt_pb_failed tells,
 * so a writer checks once at the end. */
#ifndef CLT_PB_H
#define CLT_PB_H

#include <stddef.h>
#include <stdint.h>

/* Wire types. */
enum { CLT_PB_VARINT = 0, CLT_PB_FIXED64 = 1, CLT_PB_LEN = 2, CLT_PB_FIXED32 = 5 };

typedef struct clt_pb {
  unsigned char *data;
  size_t len, cap;
  int failed; /* an allocation failed: the content is incomplete */
} clt_pb;

void clt_pb_init(clt_pb *b);
void clt_pb_free(clt_pb *b);
static inline int clt_pb_failed(const clt_pb *b) { return b->failed; }

/* Raw pieces. */
void clt_pb_raw(clt_pb *b, const void *p, size_t n);
void clt_pb_varint(clt_pb *b, uint64_t v); /* base-128, least significant group first */
void clt_pb_tag(clt_pb *b, int field, int wire_type);
/* Bytes a varint of v takes (1 to 10). */
size_t clt_pb_varint_size(uint64_t v);

/* Fields. int64 values are varints of their two's complement (a negative one
 * takes 10 bytes), as protobuf's int64 and int32 are (not sint64's zigzag). */
void clt_pb_int(clt_pb *b, int field, int64_t v);
void clt_pb_float(clt_pb *b, int field, float v); /* fixed32, little-endian IEEE 754 */
/* fixed64, little-endian IEEE 754 */
void clt_pb_double(clt_pb *b, int field, double v);
void clt_pb_bytes(clt_pb *b, int field, const void *p, size_t n);
void clt_pb_string(clt_pb *b, int field, const char *s);
/* Packed repeated fields: one length-delimited field holding the values. */
void clt_pb_packed_int64(clt_pb *b, int field, const int64_t *v, size_t n);
void clt_pb_packed_float(clt_pb *b, int field, const float *v, size_t n);

/* A nested message as field `field`: its fields are written after begin; end
 * closes it. Returns the mark to pass to end. Messages nest. */
size_t clt_pb_begin(clt_pb *b, int field);
void clt_pb_end(clt_pb *b, size_t mark);

#endif
