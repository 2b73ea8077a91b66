/* Keras' image augmentation layers on the host (augment.h). */
#include "augment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

static const char *const kind_names[] = {"flip", "rotate",   "zoom",      "translate",
                                         "crop", "contrast", "brightness"};
static const char *const fill_names[] = {"reflect", "wrap", "constant", "nearest"};
static const char *const flip_names[] = {"", "horizontal", "vertical", "horizontal_and_vertical"};

clt_aug_stage clt_aug_stage_default(clt_aug_kind kind) {
  clt_aug_stage s;
  memset(&s, 0, sizeof s);
  s.kind = kind;
  s.flip = CLT_FLIP_HORIZONTAL | CLT_FLIP_VERTICAL;
  s.fill = CLT_FILL_REFLECT;
  s.vmax = 255;
  return s;
}

/* ---- checking ---------------------------------------------------------------------- */

/* A range [lo, hi] within [min, max] (min itself excluded when open). */
static int check_range(double lo, double hi, double min, double max, int open, const char *what,
                       clt_err *e) {
  if (!(lo <= hi)) {
    return clt_fail(e, CLT_ERR_ARG, "%s: lower bound %g above upper bound %g", what, lo, hi);
  }
  const double bad = !(hi <= max) ? hi : lo; /* a single F gives [-|F|, |F|]: name F */
  if (!(open ? lo > min : lo >= min) || !(hi <= max)) {
    return clt_fail(e, CLT_ERR_ARG, "%s %g outside %s%g, %g]", what, bad, open ? "(" : "[", min,
                    max);
  }
  return CLT_OK;
}

int clt_augment_add(clt_augment *a, const clt_aug_stage *s, clt_err *e) {
  int status = CLT_OK;
  if (a->n == CLT_AUG_MAX_STAGES)
    return clt_fail(e, CLT_ERR_ARG, "more than %d augmentation stages", CLT_AUG_MAX_STAGES);
  switch (s->kind) {
    case CLT_AUG_FLIP:
      if (s->flip < 1 || s->flip > 3) status = clt_fail(e, CLT_ERR_ARG, "flip mode %d", s->flip);
      break;
    case CLT_AUG_ROTATE:
      status = check_range(s->lo, s->hi, -1, 1, 0, "factor (fractions of a full turn)", e);
      break;
    case CLT_AUG_ZOOM:
      status = check_range(s->lo, s->hi, -1, 1, 1, "height_factor", e);
      if (!status && s->width_given)
        status = check_range(s->wlo, s->whi, -1, 1, 1, "width_factor", e);
      break;
    case CLT_AUG_TRANSLATE:
      status = check_range(s->lo, s->hi, -1, 1, 0, "height_factor", e);
      if (!status) status = check_range(s->wlo, s->whi, -1, 1, 0, "width_factor", e);
      break;
    case CLT_AUG_CROP:
      if (s->height < 1 || s->height > CLT_AUG_MAX_SIDE || s->width < 1 ||
          s->width > CLT_AUG_MAX_SIDE) {
        status = clt_fail(e, CLT_ERR_ARG, "crop size %dx%d outside 1x1 to %dx%d", s->height,
                          s->width, CLT_AUG_MAX_SIDE, CLT_AUG_MAX_SIDE);
      }
      break;
    case CLT_AUG_CONTRAST:
      status = check_range(s->lo, s->hi, 0, 1, 0, "factor", e);
      break;
    case CLT_AUG_BRIGHTNESS:
      status = check_range(s->lo, s->hi, -1, 1, 0, "factor", e);
      break;
    default:
      status = clt_fail(e, CLT_ERR_ARG, "augmentation kind %d", (int)s->kind);
  }
  const int geometric = s->kind == CLT_AUG_ROTATE || s->kind == CLT_AUG_ZOOM ||
                        s->kind == CLT_AUG_TRANSLATE;
  if (!status && geometric && (s->fill < CLT_FILL_REFLECT || s->fill > CLT_FILL_NEAREST))
    status = clt_fail(e, CLT_ERR_ARG, "fill mode %d", (int)s->fill);
  /* The images are uint8: values outside [0, 255] could not be kept. */
  if (!status && geometric && !(s->fill_value >= 0 && s->fill_value <= 255)) {
    status = clt_fail(e, CLT_ERR_ARG,
                      "fill_value %g outside [0, 255] (cltrain augments the uint8 pixels)",
                      s->fill_value);
  }
  if (!status && (s->kind == CLT_AUG_CONTRAST || s->kind == CLT_AUG_BRIGHTNESS) &&
      !(s->vmin >= 0 && s->vmin < s->vmax && s->vmax <= 255)) {
    status = clt_fail(e, CLT_ERR_ARG,
                      "value_range [%g, %g] is not within [0, 255] with low below high (cltrain "
                      "augments the uint8 pixels, before the model's other layers)",
                      s->vmin, s->vmax);
  }
  if (!status) a->stage[a->n++] = *s;
  return status;
}

/* ---- parsing ------------------------------------------------------------------------- */

/* A whole number text [at, end) into *v: no trailing characters, finite. */
static int number(const char *at, const char *end, double *v) {
  char buf[64];
  const size_t n = (size_t)(end - at);
  if (n == 0 || n >= sizeof buf) return 0;
  memcpy(buf, at, n);
  buf[n] = '\0';
  char *stop;
  *v = strtod(buf, &stop);
  return *stop == '\0' && isfinite(*v) && !strpbrk(buf, "xXnNiI"); /* no hex, nan, inf */
}

/* F (the range [-|F|, |F|]) or LO:HI (sorted, as Keras sorts a pair); *pair says which. */
static int range(const char *at, const char *end, double *lo, double *hi, int *pair) {
  const char *colon = memchr(at, ':', (size_t)(end - at));
  *pair = colon != NULL;
  if (!colon) {
    double f;
    if (!number(at, end, &f)) return 0;
    *lo = -fabs(f);
    *hi = fabs(f);
    return 1;
  }
  if (!number(at, colon, lo) || !number(colon + 1, end, hi)) return 0;
  if (*lo > *hi) { /* Keras sorts a pair */
    const double t = *lo;
    *lo = *hi;
    *hi = t;
  }
  return 1;
}

typedef struct options {
  clt_aug_fill fill;
  int nearest;
  double fill_value, vmin, vmax;
  const char *pending; /* the last option's item, until a stage takes it */
  size_t pending_len;
} options;

static int item_fail(clt_err *e, const char *item, size_t len, const char *fmt, const char *what) {
  return clt_fail(e, CLT_ERR_ARG, "%.*s: %s%s", (int)len, item, fmt, what);
}

/* One item [item, item + len). */
static int parse_item(const char *item, size_t len, options *o, clt_augment *a, clt_err *e) {
  const char *end = item + len, *eq = memchr(item, '=', len);
  const size_t name_len = eq ? (size_t)(eq - item) : len;
  const char *val = eq ? eq + 1 : end;
  char name[32];
  if (name_len == 0 || name_len >= sizeof name)
    return item_fail(e, item, len, "not an augmentation", " (expected NAME or NAME=VALUE)");
  memcpy(name, item, name_len);
  name[name_len] = '\0';
  const int has_value = eq != NULL && val < end;
  /* Options for the stages after them. */
  if (strcmp(name, "fill") == 0 || strcmp(name, "interpolation") == 0 ||
      strcmp(name, "fill_value") == 0 || strcmp(name, "value_range") == 0) {
    o->pending = item;
    o->pending_len = len;
    if (strcmp(name, "fill") == 0) {
      for (int f = 0; f < 4; f++) {
        if (has_value && strlen(fill_names[f]) == (size_t)(end - val) &&
            strncmp(val, fill_names[f], (size_t)(end - val)) == 0) {
          o->fill = (clt_aug_fill)f;
          return CLT_OK;
        }
      }
      return item_fail(e, item, len, "expected fill=reflect, wrap, constant or nearest", "");
    }
    if (strcmp(name, "interpolation") == 0) {
      const size_t n = (size_t)(end - val);
      if (has_value && n == 8 && strncmp(val, "bilinear", 8) == 0) o->nearest = 0;
      else if (has_value && n == 7 && strncmp(val, "nearest", 7) == 0) o->nearest = 1;
      else return item_fail(e, item, len, "expected interpolation=bilinear or nearest", "");
      return CLT_OK;
    }
    if (strcmp(name, "fill_value") == 0) {
      double v;
      if (!has_value || !number(val, end, &v) || !(v >= 0 && v <= 255))
        return item_fail(e, item, len, "expected a number from 0 to 255", "");
      o->fill_value = v;
      return CLT_OK;
    }
    double lo, hi;
    int pair;
    if (!has_value || !range(val, end, &lo, &hi, &pair) || !pair || !(lo >= 0 && hi <= 255) ||
        !(lo < hi))
      return item_fail(e, item, len, "expected LO:HI within 0:255, LO below HI", "");
    o->vmin = lo;
    o->vmax = hi;
    return CLT_OK;
  }
  int kind = -1;
  for (int k = 0; k < (int)(sizeof kind_names / sizeof kind_names[0]); k++)
    if (strcmp(name, kind_names[k]) == 0) kind = k;
  if (kind < 0) {
    return item_fail(e, item, len,
                     "unknown augmentation (known: flip, rotate, zoom, translate, crop, "
                     "contrast, brightness; options fill, fill_value, interpolation, "
                     "value_range)",
                     "");
  }
  clt_aug_stage s = clt_aug_stage_default((clt_aug_kind)kind);
  s.fill = o->fill;
  s.nearest = o->nearest;
  s.fill_value = o->fill_value;
  s.vmin = o->vmin;
  s.vmax = o->vmax;
  if (kind != CLT_AUG_FLIP && !has_value) {
    static const char *const forms[] = {"",
                                        "rotate=F or rotate=LO:HI",
                                        "zoom=F, zoom=LO:HI or zoom=H/W",
                                        "translate=F, translate=LO:HI or translate=H/W",
                                        "crop=HxW",
                                        "contrast=F or contrast=LO:HI",
                                        "brightness=F or brightness=LO:HI"};
    return item_fail(e, item, len, "needs a value: ", forms[kind]);
  }
  int pair = 0, ok = 1;
  const char *slash = has_value ? memchr(val, '/', (size_t)(end - val)) : NULL;
  switch ((clt_aug_kind)kind) {
    case CLT_AUG_FLIP:
      if (has_value) {
        s.flip = 0;
        for (int f = 1; f <= 3; f++) {
          if (strlen(flip_names[f]) == (size_t)(end - val) &&
              strncmp(val, flip_names[f], (size_t)(end - val)) == 0)
            s.flip = f;
        }
        if (!s.flip)
          return item_fail(e, item, len, "expected horizontal, vertical or horizontal_and_vertical",
                           "");
      } else if (eq) {
        ok = 0;
      }
      break;
    case CLT_AUG_ZOOM:
    case CLT_AUG_TRANSLATE:
      ok = range(val, slash ? slash : end, &s.lo, &s.hi, &pair);
      if (ok && slash) ok = range(slash + 1, end, &s.wlo, &s.whi, &pair);
      else if (ok && kind == CLT_AUG_TRANSLATE) s.wlo = s.lo, s.whi = s.hi;
      s.width_given = slash != NULL && kind == CLT_AUG_ZOOM;
      break;
    case CLT_AUG_CROP: {
      const char *x = memchr(val, 'x', (size_t)(end - val));
      double h, w;
      ok = x && number(val, x, &h) && number(x + 1, end, &w) && h == floor(h) && w == floor(w) &&
           h >= 1 && w >= 1 && h <= CLT_AUG_MAX_SIDE && w <= CLT_AUG_MAX_SIDE;
      if (!ok) {
        return clt_fail(e, CLT_ERR_ARG, "%.*s: expected crop=HxW, each from 1 to %d", (int)len,
                        item, CLT_AUG_MAX_SIDE);
      }
      s.height = (int)h;
      s.width = (int)w;
      break;
    }
    case CLT_AUG_CONTRAST:
      ok = !slash && range(val, end, &s.lo, &s.hi, &pair);
      if (ok && !pair) s.lo = s.hi; /* [1 - F, 1 + F], as Keras documents */
      break;
    default: /* rotate, brightness */
      ok = !slash && range(val, end, &s.lo, &s.hi, &pair);
  }
  if (!ok) return item_fail(e, item, len, "malformed (numbers like 0.1, or LO:HI)", "");
  int status = clt_augment_add(a, &s, e);
  if (status) return clt_wrap(e, "%.*s", (int)len, item);
  o->pending = NULL;
  return CLT_OK;
}

int clt_augment_parse(const char *text, clt_augment *a, clt_err *e) {
  memset(a, 0, sizeof *a);
  options o = {CLT_FILL_REFLECT, 0, 0, 0, 255, NULL, 0};
  if (!text || !*text)
    return clt_fail(e, CLT_ERR_ARG, "empty (expected items like flip,rotate=0.1)");
  for (const char *at = text;;) {
    const size_t len = strcspn(at, ",");
    if (len == 0) {
      memset(a, 0, sizeof *a);
      return clt_fail(e, CLT_ERR_ARG, "an empty item (two commas, or one at an end)");
    }
    int status = parse_item(at, len, &o, a, e);
    if (status) {
      memset(a, 0, sizeof *a);
      return status;
    }
    if (!at[len]) break;
    at += len + 1;
  }
  int status = CLT_OK;
  if (o.pending) {
    status = clt_fail(e, CLT_ERR_ARG,
                      "%.*s: an option applies to the augmentations after it, and none that takes "
                      "it follows (put it first)",
                      (int)o.pending_len, o.pending);
  } else if (a->n == 0) {
    status = clt_fail(e, CLT_ERR_ARG, "no augmentation in it, only options");
  }
  if (status) memset(a, 0, sizeof *a);
  return status;
}

/* ---- formatting ------------------------------------------------------------------------ */

/* v as the shortest of %.15g and %.17g that reads back as v. */
static void put_number(char *buf, size_t size, double v) {
  snprintf(buf, size, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, size, "%.17g", v);
}

/* "F" where the range is [-F, F] (or [F, F] when point), else "LO:HI". */
static void put_range(char *buf, size_t size, double lo, double hi, int point) {
  char a[32], b[32];
  put_number(b, sizeof b, hi);
  if (point ? lo == hi : lo == -hi && hi >= 0) {
    snprintf(buf, size, "%s", b);
    return;
  }
  put_number(a, sizeof a, lo);
  snprintf(buf, size, "%s:%s", a, b);
}

typedef struct writer {
  char *buf;
  size_t size, used;
} writer;

static void put(writer *w, const char *text) {
  const int n = snprintf(w->buf + w->used, w->size - w->used, "%s%s", w->used ? "," : "", text);
  if (n > 0) w->used = w->used + (size_t)n < w->size ? w->used + (size_t)n : w->size - 1;
}

void clt_augment_format(const clt_augment *a, char *buf, size_t size) {
  if (!size) return;
  buf[0] = '\0';
  writer w = {buf, size, 0};
  options o = {CLT_FILL_REFLECT, 0, 0, 0, 255, NULL, 0};
  char item[192], r1[72], r2[72];
  for (int i = 0; i < a->n; i++) {
    const clt_aug_stage *s = &a->stage[i];
    const int geometric = s->kind == CLT_AUG_ROTATE || s->kind == CLT_AUG_ZOOM ||
                          s->kind == CLT_AUG_TRANSLATE;
    if (geometric && s->fill != o.fill) {
      snprintf(item, sizeof item, "fill=%s", fill_names[s->fill]);
      put(&w, item);
      o.fill = s->fill;
    }
    if (geometric && s->nearest != o.nearest) {
      put(&w, s->nearest ? "interpolation=nearest" : "interpolation=bilinear");
      o.nearest = s->nearest;
    }
    if (geometric && s->fill_value != o.fill_value) {
      put_number(r1, sizeof r1, s->fill_value);
      snprintf(item, sizeof item, "fill_value=%s", r1);
      put(&w, item);
      o.fill_value = s->fill_value;
    }
    if ((s->kind == CLT_AUG_CONTRAST || s->kind == CLT_AUG_BRIGHTNESS) &&
        (s->vmin != o.vmin || s->vmax != o.vmax)) {
      put_number(r1, sizeof r1, s->vmin);
      put_number(r2, sizeof r2, s->vmax);
      snprintf(item, sizeof item, "value_range=%s:%s", r1, r2);
      put(&w, item);
      o.vmin = s->vmin;
      o.vmax = s->vmax;
    }
    switch (s->kind) {
      case CLT_AUG_FLIP:
        snprintf(item, sizeof item, "flip=%s", flip_names[s->flip & 3]);
        break;
      case CLT_AUG_ZOOM:
      case CLT_AUG_TRANSLATE:
        put_range(r1, sizeof r1, s->lo, s->hi, 0);
        put_range(r2, sizeof r2, s->wlo, s->whi, 0);
        if (s->kind == CLT_AUG_ZOOM ? !s->width_given : s->wlo == s->lo && s->whi == s->hi)
          snprintf(item, sizeof item, "%s=%s", kind_names[s->kind], r1);
        else snprintf(item, sizeof item, "%s=%s/%s", kind_names[s->kind], r1, r2);
        break;
      case CLT_AUG_CROP:
        snprintf(item, sizeof item, "crop=%dx%d", s->height, s->width);
        break;
      case CLT_AUG_CONTRAST:
        put_range(r1, sizeof r1, s->lo, s->hi, 1);
        snprintf(item, sizeof item, "contrast=%s", r1);
        break;
      default:
        put_range(r1, sizeof r1, s->lo, s->hi, 0);
        snprintf(item, sizeof item, "%s=%s", kind_names[s->kind], r1);
    }
    put(&w, item);
  }
}

void clt_augment_only_crops(clt_augment *a) {
  int kept = 0;
  for (int i = 0; i < a->n; i++)
    if (a->stage[i].kind == CLT_AUG_CROP) a->stage[kept++] = a->stage[i];
  a->n = kept;
}

int clt_augment_has(const clt_augment *a, clt_aug_kind kind) {
  for (int i = 0; a && i < a->n; i++)
    if (a->stage[i].kind == kind) return 1;
  return 0;
}

void clt_augment_out_size(const clt_augment *a, int h, int w, int *oh, int *ow) {
  for (int i = 0; a && i < a->n; i++) {
    if (a->stage[i].kind == CLT_AUG_CROP) {
      h = a->stage[i].height;
      w = a->stage[i].width;
    }
  }
  *oh = h;
  *ow = w;
}

size_t clt_augment_work_floats(const clt_augment *a, int h, int w, int c) {
  size_t most = (size_t)h * w;
  for (int i = 0; a && i < a->n; i++) {
    if (a->stage[i].kind != CLT_AUG_CROP) continue;
    const size_t n = (size_t)a->stage[i].height * a->stage[i].width;
    if (n > most) most = n;
  }
  return 2 * most * (size_t)c;
}

/* ---- draws ------------------------------------------------------------------------------- */

void clt_augment_rng(clt_rng *r, uint64_t seed, int epoch, int example) {
  clt_rng_seed(r, seed, CLT_AUGMENT_STREAM ^ ((uint64_t)(uint32_t)epoch << 32 | (uint32_t)example));
}

/* Uniform in [lo, hi], as Keras' random.uniform(minval, maxval) in float32. */
static float uniform(clt_rng *r, double lo, double hi) {
  const float min = (float)lo, max = (float)hi;
  return min + (max - min) * (float)clt_rng_uniform(r);
}

void clt_augment_draw(const clt_aug_stage *s, clt_rng *r, int h, int w, clt_aug_draw *d) {
  memset(d, 0, sizeof *d);
  switch (s->kind) {
    case CLT_AUG_FLIP:
      d->flip = clt_rng_uniform(r) < 0.5;
      break;
    case CLT_AUG_ROTATE:
      d->a = uniform(r, s->lo * 360.0, s->hi * 360.0);
      break;
    case CLT_AUG_ZOOM: {
      const float zh = uniform(r, 1.0 + s->lo, 1.0 + s->hi);
      const float zw = uniform(r, 1.0 + s->wlo, 1.0 + s->whi);
      d->b = zh;
      d->a = s->width_given ? zw : zh;
      break;
    }
    case CLT_AUG_TRANSLATE:
      d->b = uniform(r, s->lo, s->hi) * (float)h;
      d->a = uniform(r, s->wlo, s->whi) * (float)w;
      break;
    case CLT_AUG_CROP:
      if (h >= s->height && w >= s->width) {
        d->y0 = (int)clt_rng_below(r, (uint32_t)(h - s->height + 1));
        d->x0 = (int)clt_rng_below(r, (uint32_t)(w - s->width + 1));
      } else {
        d->y0 = d->x0 = -1;
      }
      break;
    case CLT_AUG_CONTRAST:
      d->a = uniform(r, 1.0 - s->lo, 1.0 + s->hi);
      break;
    case CLT_AUG_BRIGHTNESS:
      d->a = uniform(r, s->lo, s->hi) * (float)(s->vmax - s->vmin);
      break;
  }
}

/* ---- the transforms ----------------------------------------------------------------------- */

/* TensorFlow's MapCoordinate: an input coordinate outside [0, len - 1] brought
 * inside by the fill mode (constant leaves it outside), in its arithmetic. */
static float map_coord(clt_aug_fill fill, float in, long long len) {
  switch (fill) {
    case CLT_FILL_REFLECT:
      if (in < 0) {
        if (len <= 1) {
          in = 0;
        } else {
          const long long sz2 = 2 * len;
          if (in < (float)sz2) in = (float)(sz2 * (long long)(-in / (float)sz2)) + in;
          in = in < (float)-len ? in + (float)sz2 : -in - 1;
        }
      } else if (in > (float)(len - 1)) {
        if (len <= 1) {
          in = 0;
        } else {
          const long long sz2 = 2 * len;
          in -= (float)(sz2 * (long long)(in / (float)sz2));
          if (in >= (float)len) in = (float)sz2 - in - 1;
        }
      }
      break;
    case CLT_FILL_WRAP:
      if (in < 0) {
        if (len <= 1) in = 0;
        else in += (float)(len * ((long long)(-in / (float)(len - 1)) + 1));
      } else if (in > (float)(len - 1)) {
        if (len <= 1) in = 0;
        else in -= (float)(len * (long long)(in / (float)(len - 1)));
      }
      break;
    case CLT_FILL_CONSTANT:
      return in;
    case CLT_FILL_NEAREST:
      break;
  }
  return in < 0 ? 0.0f : in > (float)(len - 1) ? (float)(len - 1) : in;
}

/* floorf for the coordinates (well inside long long's range), without a libm call. */
static float floor_of(float v) {
  const float t = (float)(long long)v;
  return t > v ? t - 1 : t;
}

/* Pixel (y, x) of in (h x w x c), or NULL outside it, where TensorFlow's
 * read_with_fill_value reads the fill value. */
static const float *pixel(const float *in, long long h, long long w, int c, long long y,
                          long long x) {
  return y >= 0 && y < h && x >= 0 && x < w ? in + (y * w + x) * c : NULL;
}

/* ImageProjectiveTransformV3 with an affine transform t (output x, y to input
 * t[0] x + t[1] y + t[2], t[3] x + t[4] y + t[5]), output the input's size. */
static void affine(const clt_aug_stage *s, const float t[6], const float *in, int h, int w, int c,
                   float *out) {
  const float fill = (float)s->fill_value;
  for (int y = 0; y < h; y++) {
    for (int x = 0; x < w; x++) {
      float *o = out + ((size_t)y * w + x) * c;
      const float ix = t[0] * (float)x + t[1] * (float)y + t[2];
      const float iy = t[3] * (float)x + t[4] * (float)y + t[5];
      if (!s->nearest && ix >= 0 && iy >= 0 && ix < (float)(w - 1) && iy < (float)(h - 1)) {
        /* Inside, with all four neighbours (most pixels): no fill mode to apply. */
        const float yf = floor_of(iy), xf = floor_of(ix), yc = yf + 1, xc = xf + 1;
        const float *p0 = in + ((size_t)yf * w + (size_t)xf) * c, *p1 = p0 + (size_t)w * c;
        const float wx0 = xc - ix, wx1 = ix - xf, wy0 = yc - iy, wy1 = iy - yf;
        for (int ch = 0; ch < c; ch++) {
          const float top = wx0 * p0[ch] + wx1 * p0[c + ch];
          const float bottom = wx0 * p1[ch] + wx1 * p1[c + ch];
          o[ch] = wy0 * top + wy1 * bottom;
        }
        continue;
      }
      /* Constant fill leaves them outside: the neighbours there read the fill value. */
      const float mx = map_coord(s->fill, ix, w), my = map_coord(s->fill, iy, h);
      if (s->nearest) {
        const float *p = pixel(in, h, w, c, (long long)roundf(my), (long long)roundf(mx));
        /* out: the caller's workspace, never NULL (the analyzer supposes a NULL one) */
        // NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
        for (int ch = 0; ch < c; ch++) o[ch] = p ? p[ch] : fill;
        continue;
      }
      const float yf = floor_of(my), xf = floor_of(mx), yc = yf + 1, xc = xf + 1;
      const long long y0 = (long long)yf, x0 = (long long)xf, y1 = (long long)yc,
                      x1 = (long long)xc;
      const float *p00 = pixel(in, h, w, c, y0, x0), *p01 = pixel(in, h, w, c, y0, x1);
      const float *p10 = pixel(in, h, w, c, y1, x0), *p11 = pixel(in, h, w, c, y1, x1);
      const float wx0 = xc - mx, wx1 = mx - xf, wy0 = yc - my, wy1 = my - yf;
      for (int ch = 0; ch < c; ch++) {
        const float top = wx0 * (p00 ? p00[ch] : fill) + wx1 * (p01 ? p01[ch] : fill);
        const float bottom = wx0 * (p10 ? p10[ch] : fill) + wx1 * (p11 ? p11[ch] : fill);
        // NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
        o[ch] = wy0 * top + wy1 * bottom;
      }
    }
  }
}

/* tf.image.resize(method="bilinear") of the window [y0, y0 + wh) x [x0, x0 + ww) of
 * in (h x w) to oh x ow: half-pixel centres, no antialiasing. */
static void resize(const float *in, int w, int c, int y0, int x0, int wh, int ww, float *out,
                   int oh, int ow) {
  const float sy = (float)wh / (float)oh, sx = (float)ww / (float)ow;
  for (int y = 0; y < oh; y++) {
    const float fy = ((float)y + 0.5f) * sy - 0.5f, fly = floorf(fy), ly = fy - fly;
    int ylo = (int)fly, yhi = (int)ceilf(fy);
    ylo = ylo < 0 ? 0 : ylo;
    yhi = yhi > wh - 1 ? wh - 1 : yhi;
    const float *r0 = in + ((size_t)(y0 + ylo) * w + x0) * c;
    const float *r1 = in + ((size_t)(y0 + yhi) * w + x0) * c;
    for (int x = 0; x < ow; x++) {
      const float fx = ((float)x + 0.5f) * sx - 0.5f, flx = floorf(fx), lx = fx - flx;
      int xlo = (int)flx, xhi = (int)ceilf(fx);
      xlo = xlo < 0 ? 0 : xlo;
      xhi = xhi > ww - 1 ? ww - 1 : xhi;
      float *o = out + ((size_t)y * ow + x) * c;
      for (int ch = 0; ch < c; ch++) {
        const float tl = r0[xlo * c + ch], tr = r0[xhi * c + ch];
        const float bl = r1[xlo * c + ch], br = r1[xhi * c + ch];
        const float top = tl + (tr - tl) * lx, bottom = bl + (br - bl) * lx;
        o[ch] = top + (bottom - top) * ly;
      }
    }
  }
}

void clt_augment_crop_window(int h, int w, int th, int tw, int *y0, int *x0, int *wh, int *ww) {
  /* smart_resize's arithmetic: the window's sides through float32, truncated. */
  int ch = (int)((float)((long long)w * th) / (float)tw);
  int cw = (int)((float)((long long)h * tw) / (float)th);
  ch = ch > h ? h : ch < 1 ? 1 : ch;
  cw = cw > w ? w : cw < 1 ? 1 : cw;
  *y0 = (int)((float)(h - ch) / 2);
  *x0 = (int)((float)(w - cw) / 2);
  *wh = ch;
  *ww = cw;
}

/* RandomCrop: the window at (y0, x0), or (d NULL, or the image smaller than the
 * target) Keras' inference path, smart_resize: the largest centred window of the
 * target's aspect ratio, resized. */
static void crop(const clt_aug_stage *s, const clt_aug_draw *d, const float *in, int h, int w,
                 int c, float *out) {
  const int th = s->height, tw = s->width;
  if (d && d->y0 >= 0) {
    for (int y = 0; y < th; y++)
      memcpy(out + (size_t)y * tw * c, in + ((size_t)(d->y0 + y) * w + d->x0) * c,
             (size_t)tw * c * sizeof *out);
    return;
  }
  int y0, x0, wh, ww;
  clt_augment_crop_window(h, w, th, tw, &y0, &x0, &wh, &ww);
  resize(in, w, c, y0, x0, wh, ww, out, th, tw);
}

/* RandomContrast: (x - mean) * factor + mean per channel (the mean over the image),
 * clipped to the value range. */
static void contrast(const clt_aug_stage *s, float factor, const float *in, int h, int w, int c,
                     float *out) {
  const size_t n = (size_t)h * w;
  const float lo = (float)s->vmin, hi = (float)s->vmax;
  for (int ch = 0; ch < c; ch++) {
    double sum = 0;
    for (size_t p = 0; p < n; p++) sum += in[p * c + ch];
    const float mean = (float)(sum / (double)n);
    for (size_t p = 0; p < n; p++) {
      const float v = (in[p * c + ch] - mean) * factor + mean;
      out[p * c + ch] = v < lo ? lo : v > hi ? hi : v;
    }
  }
}

void clt_augment_stage(const clt_aug_stage *s, const clt_aug_draw *d, const float *in, int h, int w,
                       int c, float *out, int *oh, int *ow) {
  const size_t n = (size_t)h * w * c;
  *oh = h;
  *ow = w;
  if (s->kind == CLT_AUG_CROP) {
    crop(s, d, in, h, w, c, out);
    *oh = s->height;
    *ow = s->width;
    return;
  }
  if (!d) {
    memcpy(out, in, n * sizeof *out);
    return;
  }
  switch (s->kind) {
    case CLT_AUG_FLIP: {
      const int fx = d->flip && (s->flip & CLT_FLIP_HORIZONTAL);
      const int fy = d->flip && (s->flip & CLT_FLIP_VERTICAL);
      for (int y = 0; y < h; y++) {
        const int sy = fy ? h - 1 - y : y;
        for (int x = 0; x < w; x++) {
          const int sx = fx ? w - 1 - x : x;
          memcpy(out + ((size_t)y * w + x) * c, in + ((size_t)sy * w + sx) * c,
                 (size_t)c * sizeof *out);
        }
      }
      break;
    }
    case CLT_AUG_ROTATE: {
      /* Keras' _compute_affine_matrix: about the centre, no shear, scale 1. */
      const float rad = d->a * (float)(PI / 180.0), cos_t = cosf(rad), sin_t = sinf(rad);
      const float cx = 0.5f * ((float)w - 1), cy = 0.5f * ((float)h - 1);
      const float t[6] = {cos_t, -sin_t, cx - cx * cos_t - cy * -sin_t,
                          sin_t, cos_t,  cy - cx * sin_t - cy * cos_t};
      affine(s, t, in, h, w, c, out);
      break;
    }
    case CLT_AUG_ZOOM: {
      const float t[6] = {d->a, 0,    (((float)w - 1.0f) / 2.0f) * (1.0f - d->a),
                          0,    d->b, (((float)h - 1.0f) / 2.0f) * (1.0f - d->b)};
      affine(s, t, in, h, w, c, out);
      break;
    }
    case CLT_AUG_TRANSLATE: {
      const float t[6] = {1, 0, -d->a, 0, 1, -d->b};
      affine(s, t, in, h, w, c, out);
      break;
    }
    case CLT_AUG_CONTRAST:
      contrast(s, d->a, in, h, w, c, out);
      break;
    case CLT_AUG_BRIGHTNESS: {
      const float lo = (float)s->vmin, hi = (float)s->vmax;
      for (size_t i = 0; i < n; i++) {
        const float v = in[i] + d->a;
        out[i] = v < lo ? lo : v > hi ? hi : v;
      }
      break;
    }
    default:
      memcpy(out, in, n * sizeof *out);
  }
}

void clt_augment_image(const clt_augment *a, uint64_t seed, int epoch, int example,
                       const unsigned char *in, int h, int w, int c, unsigned char *out,
                       float *work) {
  const int training = epoch >= 0;
  if (!training && !clt_augment_has(a, CLT_AUG_CROP)) {
    memcpy(out, in, (size_t)h * w * c);
    return;
  }
  const size_t half = clt_augment_work_floats(a, h, w, c) / 2;
  float *cur = work, *next = work + half;
  for (size_t i = 0; i < (size_t)h * w * c; i++) cur[i] = in[i];
  clt_rng r;
  if (training) clt_augment_rng(&r, seed, epoch, example);
  for (int i = 0; i < a->n; i++) {
    const clt_aug_stage *s = &a->stage[i];
    clt_aug_draw d;
    if (training) clt_augment_draw(s, &r, h, w, &d);
    if (!training && s->kind != CLT_AUG_CROP) continue;           /* the identity */
    if (training && s->kind == CLT_AUG_FLIP && !d.flip) continue; /* not drawn */
    int oh, ow;
    clt_augment_stage(s, training ? &d : NULL, cur, h, w, c, next, &oh, &ow);
    float *t = cur;
    cur = next;
    next = t;
    h = oh;
    w = ow;
  }
  for (size_t i = 0; i < (size_t)h * w * c; i++) {
    const float v = cur[i] + 0.5f;
    out[i] = (unsigned char)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
  }
}
