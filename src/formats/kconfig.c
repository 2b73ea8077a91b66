/* Keras layer configs over cJSON: typed getters that remember which keys were read,
 * so the loader can refuse every option nobody read (see kconfig.h). */
#include "kconfig.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kconfig_impl.h"

const char *clt_kc_layer(const clt_keras_config *c) { return c->layer; }
const char *clt_kc_class(const clt_keras_config *c) { return c->cls; }

const cJSON *clt_kc_take(const clt_keras_config *c, const char *key) {
  clt_keras_config *m = (clt_keras_config *)c; /* the read set is bookkeeping */
  int i = 0;
  for (const cJSON *it = c->obj ? c->obj->child : NULL; it; it = it->next, i++) {
    if (it->string && strcmp(it->string, key) == 0) {
      if (i < CLT_KC_MAX_KEYS) m->read[i] = 1;
      return cJSON_IsNull(it) ? NULL : it;
    }
  }
  return NULL;
}

int clt_kc_fail(const clt_keras_config *c, clt_err *e, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return clt_fail(e, CLT_ERR_FORMAT, "layer %s (%s): %s", c->layer, c->cls, msg);
}

int clt_kc_has(const clt_keras_config *c, const char *key) { return clt_kc_take(c, key) != NULL; }

static int as_int(const clt_keras_config *c, const char *key, const cJSON *v, int *out,
                  clt_err *e) {
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 1e9) {
    return clt_kc_fail(c, e, "%s: expected an integer", key);
  }
  *out = (int)v->valuedouble;
  return CLT_OK;
}

int clt_kc_int(const clt_keras_config *c, const char *key, int def, int *out, clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  if (!v) {
    *out = def;
    return CLT_OK;
  }
  return as_int(c, key, v, out, e);
}

int clt_kc_ints(const clt_keras_config *c, const char *key, int n, int def, int *out, clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  if (!v) {
    for (int i = 0; i < n; i++) out[i] = def;
    return CLT_OK;
  }
  if (cJSON_IsNumber(v)) {
    int x = 0;
    if (as_int(c, key, v, &x, e)) return CLT_ERR_FORMAT;
    for (int i = 0; i < n; i++) out[i] = x;
    return CLT_OK;
  }
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n)
    return clt_kc_fail(c, e, "%s: expected an integer or a list of %d integers", key, n);
  int i = 0;
  for (const cJSON *it = v->child; it; it = it->next, i++) {
    if (as_int(c, key, it, &out[i], e)) return CLT_ERR_FORMAT;
  }
  return CLT_OK;
}

int clt_kc_double(const clt_keras_config *c, const char *key, double def, double *out, clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  if (!v) {
    *out = def;
    return CLT_OK;
  }
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
    return clt_kc_fail(c, e, "%s: expected a number", key);
  *out = v->valuedouble;
  return CLT_OK;
}

int clt_kc_bool(const clt_keras_config *c, const char *key, int def, int *out, clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  if (!v) {
    *out = def;
    return CLT_OK;
  }
  if (!cJSON_IsBool(v)) return clt_kc_fail(c, e, "%s: expected true or false", key);
  *out = cJSON_IsTrue(v) ? 1 : 0;
  return CLT_OK;
}

int clt_kc_string(const clt_keras_config *c, const char *key, const char *def, char *buf,
                  size_t size, clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  if (!v) {
    if (!def) return clt_kc_fail(c, e, "%s: missing", key);
    snprintf(buf, size, "%s", def);
    return CLT_OK;
  }
  if (!cJSON_IsString(v)) return clt_kc_fail(c, e, "%s: expected a string", key);
  if (strlen(v->valuestring) >= size) return clt_kc_fail(c, e, "%s: value too long", key);
  snprintf(buf, size, "%s", v->valuestring);
  return CLT_OK;
}

int clt_kc_padding4(const clt_keras_config *c, const char *key, int *out, clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  if (!v) {
    for (int i = 0; i < 4; i++) out[i] = 1; /* ZeroPadding2D's default (1, 1) */
    return CLT_OK;
  }
  if (cJSON_IsNumber(v)) {
    if (as_int(c, key, v, &out[0], e)) return CLT_ERR_FORMAT;
    out[1] = out[2] = out[3] = out[0];
  } else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2) {
    for (int k = 0; k < 2; k++) {
      const cJSON *it = cJSON_GetArrayItem(v, k);
      int *side = out + (ptrdiff_t)2 * k; /* top, bottom or left, right */
      if (cJSON_IsNumber(it)) {
        if (as_int(c, key, it, &side[0], e)) return CLT_ERR_FORMAT;
        side[1] = side[0];
      } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2) {
        if (as_int(c, key, cJSON_GetArrayItem(it, 0), &side[0], e) ||
            as_int(c, key, cJSON_GetArrayItem(it, 1), &side[1], e))
          return CLT_ERR_FORMAT;
      } else {
        goto bad;
      }
    }
  } else {
    goto bad;
  }
  for (int i = 0; i < 4; i++) {
    if (out[i] < 0) return clt_kc_fail(c, e, "%s: negative padding %d", key, out[i]);
  }
  return CLT_OK;
bad:
  return clt_kc_fail(c, e, "%s: expected p, [ph, pw] or [[top, bottom], [left, right]]", key);
}

void clt_kc_ignore(const clt_keras_config *c, const char *const *keys) {
  for (int i = 0; keys[i]; i++) (void)clt_kc_take(c, keys[i]);
}

int clt_kc_activation(const clt_keras_config *c, char *act, size_t size, clt_err *e) {
  static const char *const known[] = {"relu",         "relu6",     "sigmoid",    "tanh",
                                      "softmax",      "linear",    "swish",      "silu",
                                      "hard_sigmoid", "hard_silu", "hard_swish", "gelu",
                                      "elu",          "selu",      "leaky_relu"};
  const cJSON *v = clt_kc_take(c, "activation");
  const char *name = "linear";
  if (cJSON_IsString(v)) {
    name = v->valuestring;
  } else if (cJSON_IsObject(v)) {
    /* Keras 3 may serialise a built-in activation as {"class_name": "function",
     * "config": "relu", ...}. */
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(v, "config");
    if (!cJSON_IsString(cfg)) return clt_kc_fail(c, e, "activation: a custom object");
    name = cfg->valuestring;
  } else if (v) {
    return clt_kc_fail(c, e, "activation: expected a name");
  }
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (strcmp(name, known[i]) == 0) {
      /* tf.keras 2.x's hard_sigmoid is clip(0.2x + 0.5, 0, 1), Keras 3's relu6(x + 3)/6. */
      if (c->keras2 && strcmp(name, "hard_sigmoid") == 0) name = "hard_sigmoid_k2";
      snprintf(act, size, "%s", name);
      return CLT_OK;
    }
  }
  return clt_kc_fail(c, e,
                     "activation '%s' is not supported (supported: relu, relu6, sigmoid, tanh, "
                     "softmax, linear, swish, silu, hard_sigmoid, hard_silu, hard_swish, gelu, "
                     "elu, selu, leaky_relu)",
                     name);
}

int clt_kc_shape(const clt_keras_config *c, const char *key, int max, int *out, int *n,
                 clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  *n = 0;
  if (!v) return CLT_OK;
  const int len = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
  if (len < 0 || len > max)
    return clt_kc_fail(c, e, "%s: expected null or a list of at most %d entries", key, max);
  for (int i = 0; i < len; i++) {
    const cJSON *d = cJSON_GetArrayItem(v, i);
    if (cJSON_IsNull(d)) {
      out[i] = -1;
    } else if (cJSON_IsNumber(d) && d->valuedouble >= 1 && d->valuedouble <= (double)(1 << 30) &&
               d->valuedouble == (double)(int)d->valuedouble) {
      out[i] = (int)d->valuedouble;
    } else {
      return clt_kc_fail(c, e, "%s entry %d: expected null or a positive integer", key, i);
    }
  }
  *n = len;
  return CLT_OK;
}

int clt_kc_floats(const clt_keras_config *c, const char *key, int max, float *out, int *n,
                  int *scalar, clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  *n = *scalar = 0;
  if (!v) return CLT_OK;
  /* A broadcast shape's leading axes of one, as Keras writes an array of shape
   * (1, 1, 1, C): [[[[a, b, c]]]]. */
  while (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 && cJSON_IsArray(v->child)) v = v->child;
  if (cJSON_IsNumber(v)) {
    if (!isfinite(v->valuedouble) || fabs(v->valuedouble) > 3.4e38)
      return clt_kc_fail(c, e, "%s: not a finite float32 number", key);
    if (max > 0) out[0] = (float)v->valuedouble;
    *n = *scalar = 1;
    return CLT_OK;
  }
  if (!cJSON_IsArray(v))
    return clt_kc_fail(c, e, "%s: expected a number or a list of numbers", key);
  int i = 0;
  for (const cJSON *it = v->child; it; it = it->next, i++) {
    if (!cJSON_IsNumber(it))
      return clt_kc_fail(c, e, "%s: expected a number or a list of numbers", key);
    if (!isfinite(it->valuedouble) || fabs(it->valuedouble) > 3.4e38)
      return clt_kc_fail(c, e, "%s entry %d: not a finite float32 number", key, i);
    if (i < max) out[i] = (float)it->valuedouble;
  }
  *n = i;
  return CLT_OK;
}
