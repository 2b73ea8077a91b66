/* Keras' augmentation layers' configs as augment.h stages (keras_augment.h). The
 * options are Keras 3's and tf.keras 2.x's (which writes rng_type, and a single
 * number where Keras 3 writes a pair). */
#include "keras_augment.h"

#include <string.h>

#include "kconfig_impl.h"

static const char *const classes[] = {"RandomFlip",        "RandomRotation", "RandomZoom",
                                      "RandomTranslation", "RandomCrop",     "RandomContrast",
                                      "RandomBrightness"}; /* by clt_aug_kind */

int clt_keras_is_augmentation(const char *cls) {
  for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++)
    if (strcmp(cls, classes[k]) == 0) return 1;
  return 0;
}

/* A factor: a number F, the range [-|F|, |F|] (*single set), or a pair [a, b], sorted
 * as Keras sorts it. Required unless optional (then *given tells). */
static int factor(const clt_keras_config *c, const char *key, int optional, double *lo, double *hi,
                  int *single, int *given, clt_err *e) {
  const cJSON *v = clt_kc_take(c, key);
  if (given) *given = v != NULL;
  if (!v) return optional ? CLT_OK : clt_kc_fail(c, e, "%s is missing", key);
  if (cJSON_IsNumber(v)) {
    const double f = v->valuedouble < 0 ? -v->valuedouble : v->valuedouble;
    *lo = -f;
    *hi = f;
    if (single) *single = 1;
    return CLT_OK;
  }
  const cJSON *a = cJSON_GetArrayItem(v, 0), *b = cJSON_GetArrayItem(v, 1);
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b))
    return clt_kc_fail(c, e, "%s: expected a number or a list of two", key);
  *lo = a->valuedouble < b->valuedouble ? a->valuedouble : b->valuedouble;
  *hi = a->valuedouble < b->valuedouble ? b->valuedouble : a->valuedouble;
  if (single) *single = 0;
  return CLT_OK;
}

/* fill_mode, interpolation and fill_value of the geometric layers. */
static int sampling(const clt_keras_config *c, clt_aug_stage *s, clt_err *e) {
  static const char *const fills[] = {"reflect", "wrap", "constant", "nearest"};
  char fill[32], interpolation[32];
  int status = clt_kc_string(c, "fill_mode", "reflect", fill, sizeof fill, e);
  if (!status)
    status = clt_kc_string(c, "interpolation", "bilinear", interpolation, sizeof interpolation, e);
  if (!status) status = clt_kc_double(c, "fill_value", 0, &s->fill_value, e);
  if (status) return status;
  int f = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(fill, fills[i]) == 0) f = i;
  if (f < 0)
    return clt_kc_fail(c, e, "fill_mode %s is not supported (reflect, wrap, constant, nearest)",
                       fill);
  s->fill = (clt_aug_fill)f;
  if (strcmp(interpolation, "bilinear") != 0 && strcmp(interpolation, "nearest") != 0)
    return clt_kc_fail(c, e, "interpolation %s is not supported (bilinear, nearest)",
                       interpolation);
  s->nearest = interpolation[0] == 'n';
  return CLT_OK;
}

/* value_range of the colour layers: [0, 255] when absent. */
static int value_range(const clt_keras_config *c, clt_aug_stage *s, clt_err *e) {
  double lo = 0, hi = 255;
  const cJSON *v = clt_kc_take(c, "value_range");
  if (v) {
    const cJSON *a = cJSON_GetArrayItem(v, 0), *b = cJSON_GetArrayItem(v, 1);
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b))
      return clt_kc_fail(c, e, "value_range: expected a list of two numbers");
    lo = a->valuedouble < b->valuedouble ? a->valuedouble : b->valuedouble;
    hi = a->valuedouble < b->valuedouble ? b->valuedouble : a->valuedouble;
  }
  s->vmin = lo;
  s->vmax = hi;
  return CLT_OK;
}

int clt_keras_augment_stage(const clt_keras_config *c, clt_augment *a, clt_err *e) {
  int kind = -1, status = CLT_OK;
  for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++)
    if (strcmp(c->cls, classes[k]) == 0) kind = (int)k;
  if (kind < 0) return clt_kc_fail(c, e, "not an augmentation layer");
  clt_aug_stage s = clt_aug_stage_default((clt_aug_kind)kind);
  char format[32];
  /* The draws are cltrain's own (augment.h): the seed cannot change what is learnt. */
  clt_kc_take(c, "seed");
  clt_kc_take(c, "rng_type");
  status = clt_kc_string(c, "data_format", "channels_last", format, sizeof format, e);
  if (!status && strcmp(format, "channels_last") != 0)
    return clt_kc_fail(c, e, "data_format %s is not supported (only channels_last)", format);
  if (!status && clt_kc_take(c, "bounding_box_format"))
    return clt_kc_fail(c, e, "bounding_box_format is not supported (images only)");
  int single = 0, given = 0;
  switch ((clt_aug_kind)kind) {
    case CLT_AUG_FLIP: {
      char mode[32];
      if (!status)
        status = clt_kc_string(c, "mode", "horizontal_and_vertical", mode, sizeof mode, e);
      if (status) return status;
      s.flip = strcmp(mode, "horizontal") == 0 ? CLT_FLIP_HORIZONTAL
               : strcmp(mode, "vertical") == 0 ? CLT_FLIP_VERTICAL
               : strcmp(mode, "horizontal_and_vertical") == 0
                   ? CLT_FLIP_HORIZONTAL | CLT_FLIP_VERTICAL
                   : 0;
      if (!s.flip)
        return clt_kc_fail(
            c, e, "mode %s is not supported (horizontal, vertical, horizontal_and_vertical)", mode);
      break;
    }
    case CLT_AUG_ROTATE:
      if (!status) status = factor(c, "factor", 0, &s.lo, &s.hi, NULL, NULL, e);
      if (!status) status = sampling(c, &s, e);
      break;
    case CLT_AUG_ZOOM:
      if (!status) status = factor(c, "height_factor", 0, &s.lo, &s.hi, NULL, NULL, e);
      if (!status) status = factor(c, "width_factor", 1, &s.wlo, &s.whi, NULL, &s.width_given, e);
      if (!status) status = sampling(c, &s, e);
      break;
    case CLT_AUG_TRANSLATE:
      if (!status) status = factor(c, "height_factor", 0, &s.lo, &s.hi, NULL, NULL, e);
      if (!status) status = factor(c, "width_factor", 0, &s.wlo, &s.whi, NULL, NULL, e);
      if (!status) status = sampling(c, &s, e);
      break;
    case CLT_AUG_CROP:
      if (!status && (!clt_kc_has(c, "height") || !clt_kc_has(c, "width")))
        return clt_kc_fail(c, e, "height and width are required");
      if (!status) status = clt_kc_int(c, "height", 0, &s.height, e);
      if (!status) status = clt_kc_int(c, "width", 0, &s.width, e);
      break;
    case CLT_AUG_CONTRAST:
      if (!status) status = factor(c, "factor", 0, &s.lo, &s.hi, &single, &given, e);
      /* A number F: [1 - F, 1 + F], as Keras documents (and tf.keras computes). */
      if (!status && single) s.lo = s.hi;
      if (!status) status = value_range(c, &s, e);
      break;
    case CLT_AUG_BRIGHTNESS:
      if (!status) status = factor(c, "factor", 0, &s.lo, &s.hi, NULL, NULL, e);
      if (!status) status = value_range(c, &s, e);
      break;
  }
  if (status) return status;
  if (clt_augment_add(a, &s, e)) return clt_kc_fail(c, e, "%s", e->msg);
  return CLT_OK;
}
