/* Fuzz target: the Keras model-file reader (src/formats/keras.c, the kinds' from_keras
 * through src/formats/kconfig.c, cJSON) and what a model read from a file goes through
 * next: its description read back by clt_model_parse (src/engine/model.c) and the ONNX
 * export (src/formats/onnx.c, src/formats/pb.c).
 *
 * Input: an options byte, then the model file's text. Options: bits 0-2 the
 * data's classes (10, 2, 3, 5, 1, 100, 1000, 4), bits 3-5 the images' shape
 * (28x28x1, 32x32x3, 16x16x3, 16x16x4, 8x8x3, 1x1x1, 224x224x3, 12x12x1), bits 6-7
 * the preprocessing (unit, caffe, raw; 3: raw with --weights given). The text goes
 * to clt_keras_parse, what clt_keras_load does after reading the file: reading
 * through the file would cost two 16 MiB buffers per input (clt_keras_load's and
 * clt_keras_input_shape's), which under AddressSanitizer cut the rate tenfold;
 * clt_keras_input_shape takes the file for 1 input in 64 (classes bits 7, shape
 * bits 7). A model read must describe itself as text that clt_model_parse reads
 * back into the same description; one of at most 2^18 values is then exported to
 * ONNX with Keras' initial weights. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "keras.h"
#include "model.h"
#include "onnx.h"

#define EXPORT_MAX_FLOATS ((size_t)1 << 18)

static clt_model model, again;
static char desc[1 << 20], desc2[1 << 20]; /* a description of any model here */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const int classes[] = {10, 2, 3, 5, 1, 100, 1000, 4};
  static const clt_shape shapes[] = {{28, 28, 1}, {32, 32, 3}, {16, 16, 3},   {16, 16, 4},
                                     {8, 8, 3},   {1, 1, 1},   {224, 224, 3}, {12, 12, 1}};
  static char path[600], onnx[600];
  if (!path[0]) {
    fuzz_path(path, sizeof path, "model.json");
    fuzz_path(onnx, sizeof onnx, "model.onnx");
  }
  if (size < 1) return 0;
  const unsigned opt = data[0];
  /* The text, NUL-terminated; one with a NUL inside is cut there, as a file would
   * be refused. */
  char *text = malloc(size);
  if (!text) fuzz_fail("fuzz_keras: out of memory");
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  clt_keras_opts o = {.data = shapes[opt >> 3 & 7],
                      .classes = classes[opt & 7],
                      .preprocess = (clt_preprocess)((opt >> 6) % 3),
                      .weights_given = (opt >> 6) == 3};
  clt_err e = {0};
  if ((opt & 0x3f) == 0x3f) {
    fuzz_write(path, data + 1, size - 1);
    clt_shape declared;
    const int st = clt_keras_input_shape(path, &declared, &e);
    fuzz_note("input_shape", st, e.msg);
    if (st == CLT_OK && (declared.h < 0 || declared.w < 0 || declared.c < 0))
      fuzz_fail("fuzz_keras: negative input shape %dx%dx%d", declared.h, declared.w, declared.c);
  }

  memset(&e, 0, sizeof e);
  const int st = clt_keras_parse("fuzz/model.json", text, &o, &model, &e);
  free(text);
  fuzz_note("parse", st, e.msg);
  if (st != CLT_OK) {
    if (!e.msg[0]) fuzz_fail("fuzz_keras: status %d without a message", st);
    return 0;
  }
  if (model.nlayers < 1 || model.classes != o.classes)
    fuzz_fail("fuzz_keras: %d layers, %d classes", model.nlayers, model.classes);

  /* The description is the model as data (checkpoints keep it): it must read back. */
  clt_model_describe(&model, desc, sizeof desc);
  memset(&e, 0, sizeof e);
  if (clt_model_parse(model.name, model.input, model.classes, model.preprocess, desc, &again, &e) !=
      CLT_OK)
    fuzz_fail("fuzz_keras: description does not read back: %s\n  description: %s", e.msg, desc);
  clt_model_describe(&again, desc2, sizeof desc2);
  if (strcmp(desc, desc2) != 0 || again.flat_floats != model.flat_floats)
    fuzz_fail("fuzz_keras: description changes when read back:\n  %s\n  %s", desc, desc2);

  if (model.flat_floats <= EXPORT_MAX_FLOATS) {
    float *flat = malloc((model.flat_floats ? model.flat_floats : 1) * sizeof *flat);
    if (!flat) fuzz_fail("fuzz_keras: out of memory");
    clt_model_init_params(&model, 1, flat);
    memset(&e, 0, sizeof e);
    const int xs = clt_onnx_export(&model, flat, onnx, &e);
    fuzz_note("export", xs, e.msg);
    if (xs != CLT_OK && !e.msg[0]) fuzz_fail("fuzz_keras: export status %d without a message", xs);
    free(flat);
  }
  return 0;
}
