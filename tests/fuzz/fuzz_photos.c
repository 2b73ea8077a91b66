/* Fuzz target: the photo decoders (datasets/photos_decode.c): JPEG through libjpeg-turbo,
 * PNG through libpng, and the bilinear resize after them, through
 * clt_photos_decode as the loader's threads call it.
 *
 * Input: a byte choosing the image size (1, 4, 17 or 64: down- and up-scaling,
 * odd ratios, a single pixel), then the file's bytes. A folder DIR/c/x.png is
 * opened once per size; each input overwrites x.png (the decoder goes by the
 * magic bytes it reads, so JPEG and PNG both come through). A decode must fill
 * exactly size*size*3 bytes or fail with a one-line message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "photos.h"

static const int sizes[] = {1, 4, 17, 64};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static clt_photos *subsets[NSIZES];
static char file[600];

static void open_once(void) {
  char folder[600], cls[600];
  fuzz_path(folder, sizeof folder, "photos");
  snprintf(cls, sizeof cls, "%s/c", folder);
  snprintf(file, sizeof file, "%s/x.png", cls);
  if (mkdir(folder, 0700) != 0 || mkdir(cls, 0700) != 0) fuzz_fail("fuzz_photos: mkdir failed");
  /* Opening checks only the magic bytes; each input replaces the file after. */
  static const unsigned char png_magic[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  fuzz_write(file, png_magic, sizeof png_magic);
  for (int s = 0; s < NSIZES; s++) {
    clt_err e = {0};
    if (clt_photos_open(folder, sizes[s], 0, 1, &subsets[s], NULL, &e) != CLT_OK)
      fuzz_fail("fuzz_photos: cannot open the folder: %s", e.msg);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!subsets[0]) open_once();
  if (size < 1) return 0;
  const int s = data[0] % NSIZES, n = sizes[s];
  fuzz_write(file, data + 1, size - 1);
  /* Exactly the image: AddressSanitizer reports any write past it. */
  const size_t bytes = (size_t)n * n * 3;
  unsigned char *rgb = malloc(bytes);
  if (!rgb) fuzz_fail("fuzz_photos: out of memory");
  clt_err e = {0};
  const int st = clt_photos_decode(subsets[s], 0, rgb, &e);
  fuzz_note("decode", st, e.msg);
  if (st == CLT_OK) {
    fuzz_touch(rgb, bytes);
  } else if (!e.msg[0] || strchr(e.msg, '\n')) {
    fuzz_fail("fuzz_photos: status %d without a one-line message: '%s'", st, e.msg);
  }
  free(rgb);
  return 0;
}
