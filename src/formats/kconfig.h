/* A Keras layer's "config" object, as a kind's from_keras reads it (src/formats/keras.c
 * implements these over cJSON; kinds never see JSON).
 *
 * Every getter takes the key and a default used when the key is absent or null;
 * a value of the wrong type fails with one line naming the layer, the key and what
 * was expected. Getters record which keys were read: src/formats/keras.c refuses, by
 * name, every key of the config that neither the loader (name, trainable, dtype,
 * initializers, regularizers, constraints) nor the kind read, so an option a kind
 * does not know is never silently ignored. A kind therefore reads every option
 * of its class, checks its value and refuses what it does not implement (e.g.
 * data_format channels_first, dilation_rate 2), or marks it with clt_kc_ignore
 * when it cannot change the result. */
#ifndef CLT_KCONFIG_H
#define CLT_KCONFIG_H

#include <stddef.h>

#include "status.h"

typedef struct clt_keras_config clt_keras_config;

/* The layer's Keras name and class, for messages. */
const char *clt_kc_layer(const clt_keras_config *c);
const char *clt_kc_class(const clt_keras_config *c);

/* A number that must be an integer. */
int clt_kc_int(const clt_keras_config *c, const char *key, int def, int *out, clt_err *e);
/* An integer or a list of n integers (kernel_size 3 or [3, 3]): out[0..n). */
int clt_kc_ints(const clt_keras_config *c, const char *key, int n, int def, int *out, clt_err *e);
int clt_kc_double(const clt_keras_config *c, const char *key, double def, double *out, clt_err *e);
/* true/false. */
int clt_kc_bool(const clt_keras_config *c, const char *key, int def, int *out, clt_err *e);
/* A string (def may be NULL: then the key is required). */
int clt_kc_string(const clt_keras_config *c, const char *key, const char *def, char *buf,
                  size_t size, clt_err *e);
/* Whether the key is present and not null. */
int clt_kc_has(const clt_keras_config *c, const char *key);
/* Nested padding ((top, bottom), (left, right)), or an int, or [h, w]
 * (ZeroPadding2D's three forms): out = top, bottom, left, right. */
int clt_kc_padding4(const clt_keras_config *c, const char *key, int *out, clt_err *e);

/* Marks keys as read without reading them: settings that do not change what the
 * layer computes once trained weights exist (initializers, regularizers are NOT
 * among them; trainable is). NULL-terminated list. */
void clt_kc_ignore(const clt_keras_config *c, const char *const *keys);

/* Fails (CLT_ERR_FORMAT) with "layer NAME (CLASS): MESSAGE", the one-line refusal
 * of an option, e.g. clt_kc_fail(c, e, "dilation_rate %d is not supported (only 1)", d). */
int clt_kc_fail(const clt_keras_config *c, clt_err *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reads "activation" (a string; Keras 3 may also write a registered object) into
 * act: one of relu, relu6, sigmoid, tanh, softmax, linear, swish, silu, hard_sigmoid
 * (hard_sigmoid_k2 in a tf.keras 2.x file), hard_silu, hard_swish, gelu, elu, selu,
 * leaky_relu, else refused. */
int clt_kc_activation(const clt_keras_config *c, char *act, size_t size, clt_err *e);

/* A shape: null (*n = 0), or a list of at most max entries, each null (-1 in out)
 * or a positive integer; *n its length. */
int clt_kc_shape(const clt_keras_config *c, const char *key, int max, int *out, int *n, clt_err *e);

/* Numbers: null (*n = 0), a number (*n = 1, *scalar = 1) or a list of them, which
 * may be nested in lists of one (a broadcast shape (1, ..., n)); each finite in
 * float32. *n gets the count; the first max go to out. */
int clt_kc_floats(const clt_keras_config *c, const char *key, int max, float *out, int *n,
                  int *scalar, clt_err *e);

#endif
