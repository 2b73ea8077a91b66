/* The protobuf encoder (src/formats/pb.c) against bytes computed by hand, among them the
 * examples of protobuf's encoding guide (protobuf.dev/programming-guides/encoding). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pb.h"

/* Whether b holds exactly the n bytes `want`; prints both on a mismatch. */
static int same(const clt_pb *b, const unsigned char *want, size_t n) {
  if (!clt_pb_failed(b) && b->len == n && memcmp(b->data, want, n) == 0) return 1;
  printf("  got (%zu):", b->len);
  for (size_t i = 0; i < b->len && i < 48; i++) printf(" %02x", b->data[i]);
  printf("\n  want (%zu):", n);
  for (size_t i = 0; i < n && i < 48; i++) printf(" %02x", want[i]);
  printf("\n");
  return 0;
}

#define SAME(b, ...) \
  same((b), (const unsigned char[]){__VA_ARGS__}, sizeof((const unsigned char[]){__VA_ARGS__}))

static void guide_examples(void) {
  clt_pb b;
  clt_pb_init(&b);
  clt_pb_int(&b, 1, 150);
  check(SAME(&b, 0x08, 0x96, 0x01), "field 1 = 150: 08 96 01");
  clt_pb_free(&b);

  clt_pb_string(&b, 2, "testing");
  check(SAME(&b, 0x12, 0x07, 0x74, 0x65, 0x73, 0x74, 0x69, 0x6e, 0x67),
        "field 2 = \"testing\": 12 07 74 65 73 74 69 6e 67");
  clt_pb_free(&b);

  /* Test3 { Test1 c = 3; } with c.a = 150 */
  size_t mark = clt_pb_begin(&b, 3);
  clt_pb_int(&b, 1, 150);
  clt_pb_end(&b, mark);
  check(SAME(&b, 0x1a, 0x03, 0x08, 0x96, 0x01), "nested message: 1a 03 08 96 01");
  clt_pb_free(&b);

  /* repeated int32 f = 6 [packed = true]: 3, 270, 86942 */
  const int64_t v[] = {3, 270, 86942};
  clt_pb_packed_int64(&b, 6, v, 3);
  check(SAME(&b, 0x32, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05),
        "packed 3, 270, 86942: 32 06 03 8e 02 9e a7 05");
  clt_pb_free(&b);
}

static void varints(void) {
  clt_pb b;
  clt_pb_init(&b);
  clt_pb_varint(&b, 0);
  check(SAME(&b, 0x00), "varint 0");
  clt_pb_free(&b);
  clt_pb_varint(&b, 300);
  check(SAME(&b, 0xac, 0x02), "varint 300: ac 02");
  clt_pb_free(&b);
  clt_pb_varint(&b, 1u << 28);
  check(SAME(&b, 0x80, 0x80, 0x80, 0x80, 0x01), "varint 2^28: 80 80 80 80 01");
  clt_pb_free(&b);
  clt_pb_varint(&b, UINT64_MAX);
  check(SAME(&b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
        "varint 2^64-1: ten bytes, ff x9 01");
  clt_pb_free(&b);
  clt_pb_int(&b, 3, -1);
  check(SAME(&b, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
        "int64 field 3 = -1: two's complement, 10 bytes");
  clt_pb_free(&b);
  clt_pb_int(&b, 1, INT64_MAX);
  check(SAME(&b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
        "int64 field 1 = 2^63-1: ff x8 7f");
  clt_pb_free(&b);
  /* ONNX's AttributeProto.type is field 20: a two-byte tag */
  clt_pb_int(&b, 20, 7);
  check(SAME(&b, 0xa0, 0x01, 0x07), "field 20 = 7: a0 01 07");
  clt_pb_free(&b);
  const uint64_t sizes[][2] = {{0, 1},     {127, 1},   {128, 2},
                               {16383, 2}, {16384, 3}, {UINT64_MAX, 10}};
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= clt_pb_varint_size(sizes[i][0]) == sizes[i][1];
  check(ok, "varint sizes at the 7-bit boundaries");
}

static void floats(void) {
  clt_pb b;
  clt_pb_init(&b);
  clt_pb_float(&b, 2, 1.0f);
  check(SAME(&b, 0x15, 0x00, 0x00, 0x80, 0x3f), "float field 2 = 1.0: 15 00 00 80 3f");
  clt_pb_free(&b);
  clt_pb_float(&b, 2, -2.5f);
  check(SAME(&b, 0x15, 0x00, 0x00, 0x20, 0xc0), "float field 2 = -2.5: 15 00 00 20 c0");
  clt_pb_free(&b);
  const float f[] = {1.0f, -2.0f};
  clt_pb_packed_float(&b, 4, f, 2);
  check(SAME(&b, 0x22, 0x08, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0),
        "packed floats 1, -2: 22 08 00 00 80 3f 00 00 00 c0");
  clt_pb_free(&b);
  clt_pb_packed_float(&b, 4, f, 0);
  check(SAME(&b, 0x22, 0x00), "packed floats, none: 22 00");
  clt_pb_free(&b);
}

static void nesting(void) {
  clt_pb b;
  clt_pb_init(&b);
  size_t m = clt_pb_begin(&b, 5);
  clt_pb_end(&b, m);
  check(SAME(&b, 0x2a, 0x00), "empty nested message: 2a 00");
  clt_pb_free(&b);

  /* Three levels; the middle one's body is 203 bytes (two-byte length prefix). */
  char text[201];
  memset(text, 'x', 200);
  text[200] = '\0';
  clt_pb_int(&b, 1, 1);
  size_t outer = clt_pb_begin(&b, 2);
  size_t inner = clt_pb_begin(&b, 3);
  size_t leaf = clt_pb_begin(&b, 4);
  clt_pb_int(&b, 1, 150);
  clt_pb_end(&b, leaf);
  clt_pb_string(&b, 2, text);
  clt_pb_end(&b, inner);
  clt_pb_int(&b, 9, 2);
  clt_pb_end(&b, outer);
  /* leaf: 22 03 08 96 01 (5); string: 12 c8 01 + 200 (203); inner body 208: 1a d0 01;
   * outer body: 3 + 208 + 2 (48 02) = 213: 12 d5 01 */
  unsigned char want[3 + 3 + 3 + 5 + 203 + 2];
  size_t n = 0;
  const unsigned char head[] = {0x08, 0x01, 0x12, 0xd5, 0x01, 0x1a, 0xd0, 0x01,
                                0x22, 0x03, 0x08, 0x96, 0x01, 0x12, 0xc8, 0x01};
  memcpy(want, head, sizeof head);
  n = sizeof head;
  memset(want + n, 'x', 200);
  n += 200;
  want[n++] = 0x48;
  want[n++] = 0x02;
  check(same(&b, want, n), "three nested levels, a two-byte length in between (%zu bytes)", n);
  clt_pb_free(&b);

  /* Bytes fields, empty and long. */
  clt_pb_bytes(&b, 9, NULL, 0);
  check(SAME(&b, 0x4a, 0x00), "empty bytes field 9: 4a 00");
  clt_pb_free(&b);
}

/* Growth: a megabyte of fields inside a nested message. */
static void growth(void) {
  clt_pb b;
  clt_pb_init(&b);
  size_t m = clt_pb_begin(&b, 1);
  for (int i = 0; i < 500000; i++) clt_pb_int(&b, 1, 1);
  clt_pb_end(&b, m);
  /* body 1,000,000 bytes: length varint c0 84 3d */
  int ok = !clt_pb_failed(&b) && b.len == 1000004 && b.data[0] == 0x0a && b.data[1] == 0xc0 &&
           b.data[2] == 0x84 && b.data[3] == 0x3d && b.data[4] == 0x08 && b.data[5] == 0x01 &&
           b.data[b.len - 2] == 0x08 && b.data[b.len - 1] == 0x01;
  check(ok, "1,000,000-byte nested message: 0a c0 84 3d, then 08 01 x 500000 (%zu bytes)", b.len);
  clt_pb_free(&b);
}

int main(void) {
  guide_examples();
  varints();
  floats();
  nesting();
  growth();
  return check_summary();
}
