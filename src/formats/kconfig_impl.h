/* The loader's side of clt_keras_config (src/formats/keras.c builds one per layer). */
#ifndef CLT_KCONFIG_IMPL_H
#define CLT_KCONFIG_IMPL_H

#include <cjson/cJSON.h>

#include "kconfig.h"

#define CLT_KC_MAX_KEYS 64

struct clt_keras_config {
  const cJSON *obj; /* the layer's "config" object */
  const char *layer, *cls;
  int keras2; /* the file is tf.keras 2.x's (its hard_sigmoid differs from Keras 3's) */
  unsigned char read[CLT_KC_MAX_KEYS]; /* by position among obj's members */
};

/* Marks key read; returns its value, or NULL when absent or null. */
const cJSON *clt_kc_take(const clt_keras_config *c, const char *key);

#endif
