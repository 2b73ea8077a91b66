/* The checkpoint's metadata JSON (checkpoint_meta.h), written and read with cJSON. */
#include "checkpoint_meta.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "text.h"

/* The metadata's names of the preprocessing modes, by clt_preprocess value. */
static const char *const preprocess_names[] = {"unit", "caffe", "raw"};

/* ---- writing ---- */

/* v as the shortest of %.15g and %.17g that reads back as v: exact, and 0.9 stays
 * "0.9". A raw item, as cJSON's own printing may keep 15 digits of a number that
 * differs from them in the last bit. */
static cJSON *number(double v) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  return cJSON_CreateRaw(buf);
}

/* Adds item to obj under key; 0 (item freed) when either is missing or out of memory. */
static int add(cJSON *obj, const char *key, cJSON *item) {
  if (obj && item && cJSON_AddItemToObject(obj, key, item)) return 1;
  cJSON_Delete(item);
  return 0;
}

/* The optimizer's entry: its name, then each hyper-parameter its kind uses under
 * Keras get_config's name and in its order. */
static int add_optimizer(cJSON *root, const clt_optimizer *opt) {
  const clt_optimizer_ops *ops = clt_optimizer_ops_of(opt->kind);
  cJSON *o = cJSON_CreateObject();
  int ok = add(root, "optimizer", o) && ops && add(o, "name", cJSON_CreateString(ops->name));
  for (int i = 0; ok && i < ops->nhypers; i++) {
    const clt_hyper h = ops->hypers[i];
    const double v = clt_optimizer_get(opt, h);
    ok = add(o, clt_hypers[h].key, clt_hypers[h].flag ? cJSON_CreateBool(v != 0) : number(v));
  }
  if (ok && opt->schedule.kind != CLT_SCHED_NONE) {
    char text[1024];
    clt_schedule_format(&opt->schedule, text, sizeof text);
    ok = add(o, "learning_rate_schedule", cJSON_CreateString(text));
  }
  return ok;
}

/* A number JSON cannot hold as one, as the string Python's json writes for it. */
static cJSON *any_number(double v) {
  if (isfinite(v)) return number(v);
  return cJSON_CreateString(isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
}

/* ReduceLROnPlateau's entry: its arguments as --reduce-lr-on-plateau takes them
 * and its state (best: null before the first epoch). */
static int add_plateau(cJSON *root, const clt_plateau *p) {
  char text[512];
  clt_plateau_format(p, text, sizeof text);
  cJSON *o = cJSON_CreateObject();
  return add(root, "reduce_lr_on_plateau", o) && add(o, "config", cJSON_CreateString(text)) &&
         add(o, "wait", cJSON_CreateNumber(p->wait)) &&
         add(o, "cooldown_counter", cJSON_CreateNumber(p->cooldown_counter)) &&
         add(o, "best", p->monitor.has_best ? any_number(p->monitor.best) : cJSON_CreateNull());
}

/* The data's entry: where the examples come from and the limits and split that
 * select them; the augmentation and the size it crops from where there are any. */
static int add_data(cJSON *root, const clt_checkpoint_data *d) {
  cJSON *o = cJSON_CreateObject();
  return add(root, "data", o) && add(o, "path", cJSON_CreateString(d->path)) &&
         add(o, "train_limit", cJSON_CreateNumber((double)d->train_limit)) &&
         add(o, "test_limit", cJSON_CreateNumber((double)d->test_limit)) &&
         add(o, "validation_split", number(d->validation_split)) &&
         add(o, "global_batch", cJSON_CreateNumber(d->global_batch)) &&
         (!d->augment[0] || add(o, "augment", cJSON_CreateString(d->augment))) &&
         (!d->image_size || add(o, "image_size", cJSON_CreateNumber(d->image_size)));
}

/* `key`: the record's lines as an array of strings ("": an empty array). */
static int add_lines(cJSON *root, const char *key, const char *record) {
  cJSON *list = cJSON_CreateArray();
  if (!add(root, key, list)) return 0;
  const char *line;
  size_t n;
  for (const char *p = record; clt_text_line(&p, &line, &n);) {
    char *text = malloc(n + 1);
    if (!text) return 0;
    memcpy(text, line, n);
    text[n] = '\0';
    const int ok = cJSON_AddItemToArray(list, cJSON_CreateString(text));
    free(text);
    if (!ok) return 0;
  }
  return 1;
}

/* "frozen": the names of the frozen layers, in model order; left out when none
 * is (as older checkpoints, which trained every layer). */
static int add_frozen(cJSON *root, const clt_model *m) {
  cJSON *list = NULL;
  for (int i = 0; i < m->nlayers; i++) {
    if (!m->layers[i].frozen) continue;
    if (!list && !add(root, "frozen", list = cJSON_CreateArray())) return 0;
    if (!cJSON_AddItemToArray(list, cJSON_CreateString(m->layers[i].name))) return 0;
  }
  return 1;
}

/* Early stopping's entry: Keras' arguments, then its state, epochs numbered from 1
 * as the epoch lines number them (best_epoch 0 while there is no best,
 * stopped_epoch 0 while not stopped). */
static int add_early_stop(cJSON *root, const clt_early_stop *es) {
  cJSON *o = cJSON_CreateObject();
  return add(root, "early_stopping", o) &&
         add(o, "monitor", cJSON_CreateString(clt_monitor_name(es->monitor))) &&
         add(o, "min_delta", number(es->min_delta)) &&
         add(o, "patience", cJSON_CreateNumber(es->patience)) &&
         add(o, "mode", cJSON_CreateString(clt_es_mode_name(es->mode))) &&
         add(o, "baseline", es->has_baseline ? number(es->baseline) : cJSON_CreateNull()) &&
         add(o, "restore_best_weights", cJSON_CreateBool(es->restore_best_weights)) &&
         add(o, "start_from_epoch", cJSON_CreateNumber(es->start_from_epoch)) &&
         add(o, "wait", cJSON_CreateNumber(es->wait)) &&
         add(o, "best", es->has_best ? number(es->best) : cJSON_CreateNull()) &&
         add(o, "best_epoch", cJSON_CreateNumber(es->has_best ? es->best_epoch + 1 : 0)) &&
         add(o, "stopped_epoch", cJSON_CreateNumber(es->stopped_epoch ? es->stopped_epoch + 1 : 0));
}

/* Writes the JSON escape of code point cp (a backslash, 'u' and 4 hex digits; a
 * surrogate pair of them above U+FFFF) at out + n (when out is not NULL);
 * returns its length. */
static size_t escape(uint32_t cp, char *out, size_t n) {
  char buf[16];
  const unsigned hi = 0xD800 + ((cp - 0x10000) >> 10), lo = 0xDC00 + ((cp - 0x10000) & 0x3FF);
  int len = cp > 0xFFFF ? snprintf(buf, sizeof buf, "\\u%04x\\u%04x", hi, lo)
                        : snprintf(buf, sizeof buf, "\\u%04x", (unsigned)cp);
  if (out) memcpy(out + n, buf, (size_t)len + 1);
  return (size_t)len;
}

/* Writes compact JSON text with a space after each ',' and ':' outside strings,
 * and characters beyond ASCII escaped (json.dumps' ensure_ascii: npz strings
 * read back as Latin-1, see npz.h), into out (when not NULL); returns the length. */
static size_t spaced(const char *compact, char *out) {
  size_t n = 0;
  int in_string = 0;
  for (const char *c = compact; *c; c++) {
    if ((unsigned char)*c >= 0x80) {
      const unsigned char *at = (const unsigned char *)c;
      n += escape(clt_npz_utf8_next(&at), out, n);
      c = (const char *)at - 1;
      continue;
    }
    if (out) out[n] = *c;
    n++;
    if (in_string && *c == '\\' && c[1]) {
      c++;
      if (out) out[n] = *c;
      n++;
    } else if (*c == '"') {
      in_string = !in_string;
    } else if (!in_string && (*c == ',' || *c == ':')) {
      if (out) out[n] = ' ';
      n++;
    }
  }
  if (out) out[n] = '\0';
  return n;
}

/* A built-in model is rebuilt by name, so its checkpoints need no "preprocess"; any
 * other model is rebuilt from its architecture and carries it. The layout is
 * Python json.dumps' (", " and ": ", ASCII). */
char *clt_checkpoint_meta_json(const clt_model *m, const clt_optimizer *opt,
                               const clt_plateau *plateau, const clt_checkpoint_data *data,
                               const clt_early_stop *es, const char *conv_algorithms,
                               const char *gemm_tilings, const char *replicas) {
  const size_t arch_size = clt_describe_max(m->nlayers);
  char *arch = malloc(arch_size);
  const int input[3] = {m->input.h, m->input.w, m->input.c};
  char *compact = NULL, *text = NULL;
  if (!arch) return NULL;
  clt_model_describe(m, arch, arch_size);
  cJSON *root = cJSON_CreateObject();
  int ok = add(root, "format", cJSON_CreateNumber(CLT_CHECKPOINT_FORMAT)) &&
           add(root, "model", cJSON_CreateString(m->name)) &&
           add(root, "input", cJSON_CreateIntArray(input, 3)) &&
           add(root, "classes", cJSON_CreateNumber(m->classes));
  if (ok && !clt_model_is_builtin(m->name, NULL)) {
    ok = add(root, "preprocess", cJSON_CreateString(preprocess_names[m->preprocess])) &&
         (!m->softmax_output || add(root, "output", cJSON_CreateString("softmax")));
  }
  ok = ok && add(root, "architecture", cJSON_CreateString(arch));
  free(arch);
  if (ok) ok = add_frozen(root, m);
  if (ok && opt->lr > 0) ok = add_optimizer(root, opt);
  if (ok && opt->lr > 0 && plateau && plateau->active) ok = add_plateau(root, plateau);
  if (ok && data && data->known) ok = add_data(root, data);
  if (ok && es && es->enabled) ok = add_early_stop(root, es);
  if (ok && conv_algorithms && *conv_algorithms)
    ok = add_lines(root, "conv_algorithms", conv_algorithms);
  if (ok && gemm_tilings) ok = add_lines(root, "gemm_tilings", gemm_tilings);
  if (ok && replicas) ok = add_lines(root, "replicas", replicas);
  ok = ok && add(root, "cltrain_version", cJSON_CreateString(CLT_VERSION));
  if (ok && (compact = cJSON_PrintUnformatted(root)) && (text = malloc(spaced(compact, NULL) + 1)))
    spaced(compact, text);
  cJSON_free(compact);
  cJSON_Delete(root);
  return text;
}

/* ---- reading ---- */

static const char *type_name(const cJSON *v) {
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsObject(v)) return "an object";
  return "null";
}

/* Where an error is found: the file, and the object's name as a key prefix
 * ("" at the top, "optimizer." inside the optimizer's entry). */
typedef struct place {
  const char *path, *prefix;
} place;

/* Member key of obj into *out when it is of the wanted cJSON type (a mask of
 * cJSON_String, cJSON_Number, ...; `what` names it); absent: NULL, an error if
 * required. */
static int lookup(place at, const cJSON *obj, const char *key, int type, const char *what,
                  int required, const cJSON **out, clt_err *e) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!v) {
    if (!required) return CLT_OK;
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata lacks key %s%s", at.path, at.prefix, key);
  }
  if (!(v->type & type)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key %s%s is %s, not %s", at.path, at.prefix,
                    key, type_name(v), what);
  }
  *out = v;
  return CLT_OK;
}

/* A string member into dst (left "" when absent and not required). */
static int get_string(place at, const cJSON *obj, const char *key, int required, char *dst,
                      size_t size, clt_err *e) {
  const cJSON *v;
  int status = lookup(at, obj, key, cJSON_String, "a string", required, &v, e);
  dst[0] = '\0';
  if (status || !v) return status;
  if (strlen(v->valuestring) >= size) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key %s%s is longer than %zu characters",
                    at.path, at.prefix, key, size - 1);
  }
  /* Names end up in messages, which stay one line. */
  for (const char *c = v->valuestring; *c; c++) {
    if ((unsigned char)*c < 0x20 || *c == 0x7f) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key %s%s holds a control character", at.path,
                      at.prefix, key);
    }
  }
  memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
  return CLT_OK;
}

/* A number as text, exactly as it reads back. */
static void show_number(double v, char *buf, size_t size) {
  snprintf(buf, size, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, size, "%.17g", v);
}

static int is_int(const cJSON *v) {
  const double d = v->valuedouble;
  return cJSON_IsNumber(v) && d >= INT_MIN && d <= INT_MAX && (double)(int)d == d;
}

/* "format": this cltrain's version, or an error saying which it reads. */
static int get_format(place at, const cJSON *root, int *format, clt_err *e) {
  const cJSON *v;
  int status = lookup(at, root, "format", cJSON_Number, "a number", 1, &v, e);
  if (status) return status;
  if (!is_int(v)) {
    char shown[40];
    show_number(v->valuedouble, shown, sizeof shown);
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: checkpoint format %s is not a number this cltrain reads (it reads %d)",
                    at.path, shown, CLT_CHECKPOINT_FORMAT);
  }
  *format = v->valueint;
  if (*format != CLT_CHECKPOINT_FORMAT) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: unknown checkpoint format version %d (this cltrain reads %d)", at.path,
                    *format, CLT_CHECKPOINT_FORMAT);
  }
  return CLT_OK;
}

/* "input": [height, width, channels] and "classes", integers (the model's
 * builder checks their ranges). */
static int get_shape(place at, const cJSON *root, clt_checkpoint_meta *meta, clt_err *e) {
  const cJSON *input, *classes;
  int status = lookup(at, root, "input", cJSON_Array, "an array", 1, &input, e);
  if (!status) status = lookup(at, root, "classes", cJSON_Number, "a number", 1, &classes, e);
  if (status) return status;
  int dims[3], n = 0;
  const cJSON *d;
  cJSON_ArrayForEach(d, input) {
    if (n == 3 || !is_int(d)) break;
    dims[n++] = d->valueint;
  }
  if (n != 3 || d) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: metadata key input is not [height, width, channels], 3 integers", at.path);
  }
  if (!is_int(classes)) {
    char shown[40];
    show_number(classes->valuedouble, shown, sizeof shown);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key classes is %s, not an integer", at.path,
                    shown);
  }
  /* 0 would let the model's last layer say (clt_model_parse): a checkpoint states it. */
  if (classes->valueint < 1) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key classes is %d, not a class count", at.path,
                    classes->valueint);
  }
  meta->input = (clt_shape){dims[0], dims[1], dims[2]};
  meta->classes = classes->valueint;
  return CLT_OK;
}

/* The optimizer's entry into o: its kind by name, then each hyper-parameter the
 * kind uses, checked against its range; learning_rate is required, the others
 * default to Keras'. Keys the kind does not use are ignored, as Keras' own
 * get_config holds more than cltrain reads. */
static int get_optimizer(const char *path, const cJSON *entry, clt_optimizer *o, clt_err *e) {
  const place at = {path, "optimizer."};
  const cJSON *name;
  clt_optimizer_kind kind;
  int status = lookup(at, entry, "name", cJSON_String, "a string", 1, &name, e);
  if (status) return status;
  if (!clt_optimizer_find(name->valuestring, &kind)) {
    char shown[64], known[64];
    clt_npz_printable(shown, sizeof shown, name->valuestring);
    clt_optimizer_list(CLT_HP_COUNT, "or", known, sizeof known);
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: metadata names no optimizer cltrain knows: \"%s\" (it knows %s)", path,
                    shown, known);
  }
  const clt_optimizer_ops *ops = clt_optimizer_ops_of(kind);
  *o = ops->defaults;
  for (int i = 0; i < ops->nhypers; i++) {
    const clt_hyper h = ops->hypers[i];
    const clt_hyper_info *info = &clt_hypers[h];
    const cJSON *v;
    status = lookup(at, entry, info->key, info->flag ? cJSON_True | cJSON_False : cJSON_Number,
                    info->flag ? "true or false" : "a number", h == CLT_HP_LEARNING_RATE, &v, e);
    if (status) return status;
    if (!v) continue;
    const double d = info->flag ? cJSON_IsTrue(v) : v->valuedouble;
    if (!clt_hyper_valid(h, d)) {
      char shown[40], range[64];
      show_number(d, shown, sizeof shown);
      clt_hyper_range(h, range, sizeof range);
      return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key optimizer.%s is %s, outside %s", path,
                      info->key, shown, range);
    }
    clt_optimizer_set(o, h, d);
  }
  const cJSON *schedule;
  if ((status = lookup(at, entry, "learning_rate_schedule", cJSON_String, "a string", 0, &schedule,
                       e)) ||
      !schedule)
    return status;
  char flag[4200];
  snprintf(flag, sizeof flag, "%s: metadata key optimizer.learning_rate_schedule", path);
  status = clt_schedule_parse(schedule->valuestring, flag, &o->schedule, e);
  if (status) e->code = status = CLT_ERR_FORMAT; /* the file's fault, not a flag's */
  return status;
}

/* A member of the data's entry that is an integer from min to INT_MAX. */
static int get_count(place at, const cJSON *obj, const char *key, int min, long *out, clt_err *e) {
  const cJSON *v;
  int status = lookup(at, obj, key, cJSON_Number, "a number", 1, &v, e);
  if (status) return status;
  if (!is_int(v) || v->valueint < min) {
    char shown[40];
    show_number(v->valuedouble, shown, sizeof shown);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key %s%s is %s, not an integer of at least %d",
                    at.path, at.prefix, key, shown, min);
  }
  *out = v->valueint;
  return CLT_OK;
}

/* The data's entry into d: every key required, as one cltrain writes them all,
 * but augment and image_size (an older cltrain's, or a run without augmentation). */
static int get_data(const char *path, const cJSON *entry, clt_checkpoint_data *d, clt_err *e) {
  const place at = {path, "data."};
  const cJSON *split, *size;
  long batch = 0;
  int status;
  if ((status = get_string(at, entry, "path", 1, d->path, sizeof d->path, e)) ||
      (status = get_count(at, entry, "train_limit", 0, &d->train_limit, e)) ||
      (status = get_count(at, entry, "test_limit", 0, &d->test_limit, e)) ||
      (status = lookup(at, entry, "validation_split", cJSON_Number, "a number", 1, &split, e)) ||
      (status = get_count(at, entry, "global_batch", 1, &batch, e)) ||
      (status = get_string(at, entry, "augment", 0, d->augment, sizeof d->augment, e)) ||
      (status = lookup(at, entry, "image_size", cJSON_Number, "a number", 0, &size, e)))
    return status;
  clt_augment aug;
  if (d->augment[0] && clt_augment_parse(d->augment, &aug, e)) {
    clt_wrap(e, "%s: metadata key data.augment", path);
    if (e) e->code = CLT_ERR_FORMAT;
    return CLT_ERR_FORMAT;
  }
  if (size && (!is_int(size) || size->valueint < 1 || size->valueint > CLT_AUG_MAX_SIDE)) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: metadata key data.image_size is not an integer from 1 to %d", path,
                    CLT_AUG_MAX_SIDE);
  }
  d->image_size = size ? size->valueint : 0;
  if (!d->path[0]) return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key data.path is empty", path);
  /* The range --validation-split takes. */
  if (!(split->valuedouble >= 0 && split->valuedouble <= 0.99)) {
    char shown[40];
    show_number(split->valuedouble, shown, sizeof shown);
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: metadata key data.validation_split is %s, outside [0, 0.99]", path, shown);
  }
  d->validation_split = split->valuedouble;
  d->global_batch = (int)batch;
  d->known = 1;
  return CLT_OK;
}

/* A counter of the plateau's state: an integer of at least 0. */
static int get_counter(place at, const cJSON *obj, const char *key, int *out, clt_err *e) {
  long v = 0;
  int status = get_count(at, obj, key, 0, &v, e);
  *out = (int)v;
  return status;
}

/* ReduceLROnPlateau's entry into p: its arguments read as the flag's, its state. */
static int get_plateau(const char *path, const cJSON *entry, clt_plateau *p, clt_err *e) {
  const place at = {path, "reduce_lr_on_plateau."};
  const cJSON *config, *best;
  int status = lookup(at, entry, "config", cJSON_String, "a string", 1, &config, e);
  if (!status)
    status = lookup(at, entry, "best", cJSON_Number | cJSON_String | cJSON_NULL, "a number or null",
                    1, &best, e);
  if (status) return status;
  char flag[4200];
  snprintf(flag, sizeof flag, "%s: metadata key reduce_lr_on_plateau.config", path);
  if (clt_plateau_parse(config->valuestring, flag, p, e))
    return e->code = CLT_ERR_FORMAT; /* the file's fault, not a flag's */
  if ((status = get_counter(at, entry, "wait", &p->wait, e)) ||
      (status = get_counter(at, entry, "cooldown_counter", &p->cooldown_counter, e)))
    return status;
  p->monitor.has_best = !cJSON_IsNull(best);
  if (cJSON_IsNumber(best)) {
    p->monitor.best = best->valuedouble;
  } else if (cJSON_IsString(best)) {
    const char *t = best->valuestring;
    if (strcmp(t, "NaN") != 0 && strcmp(t, "Infinity") != 0 && strcmp(t, "-Infinity") != 0)
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: metadata key reduce_lr_on_plateau.best is a string other than NaN, "
                      "Infinity or -Infinity",
                      path);
    p->monitor.best = t[0] == 'N' ? NAN : t[0] == '-' ? -INFINITY : INFINITY;
  }
  return CLT_OK;
}

/* "conv_algorithms" (optional): an array of strings, joined by newlines. */
static int get_conv_algorithms(place at, const cJSON *root, clt_checkpoint_meta *meta, clt_err *e) {
  const cJSON *list = NULL;
  int status = lookup(at, root, "conv_algorithms", cJSON_Array, "an array", 0, &list, e);
  size_t used = 0;
  meta->conv_algorithms[0] = '\0';
  const cJSON *line = NULL;
  cJSON_ArrayForEach(line, list) {
    if (status) break;
    const size_t n = cJSON_IsString(line) ? strlen(line->valuestring) : 0;
    if (!cJSON_IsString(line) || used + n + 2 > sizeof meta->conv_algorithms)
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: metadata key conv_algorithms holds %s, not lines of at most %zu "
                      "characters in all",
                      at.path, cJSON_IsString(line) ? "too much" : type_name(line),
                      sizeof meta->conv_algorithms - 1);
    memcpy(meta->conv_algorithms + used, line->valuestring, n);
    used += n;
    meta->conv_algorithms[used++] = '\n';
    meta->conv_algorithms[used] = '\0';
  }
  return status;
}

/* `key` (optional): an array of strings into *out, allocated, each followed by a
 * newline; *out stays NULL when the key is absent. */
static int get_lines(place at, const cJSON *root, const char *key, char **out, clt_err *e) {
  const cJSON *list = NULL, *line = NULL;
  int status = lookup(at, root, key, cJSON_Array, "an array", 0, &list, e);
  if (status || !list) return status;
  size_t size = 1;
  cJSON_ArrayForEach(line, list) {
    if (!cJSON_IsString(line) || strchr(line->valuestring, '\n'))
      return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key %s holds %s, not lines", at.path, key,
                      cJSON_IsString(line) ? "a string of several lines" : type_name(line));
    size += strlen(line->valuestring) + 1;
  }
  if (!(*out = malloc(size)))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", at.path);
  size_t used = 0;
  cJSON_ArrayForEach(line, list) {
    const size_t n = strlen(line->valuestring);
    memcpy(*out + used, line->valuestring, n);
    used += n;
    (*out)[used++] = '\n';
  }
  (*out)[used] = '\0';
  return CLT_OK;
}

/* "frozen" (optional): an array of layer names; clt_checkpoint_meta_model checks
 * that each names a layer. */
static int get_frozen(place at, const cJSON *root, clt_checkpoint_meta *meta, clt_err *e) {
  const cJSON *list, *name;
  int status = lookup(at, root, "frozen", cJSON_Array, "an array", 0, &list, e);
  if (status || !list) return status;
  const int n = cJSON_GetArraySize(list);
  if (n && !(meta->frozen = malloc((size_t)n * sizeof *meta->frozen)))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", at.path);
  cJSON_ArrayForEach(name, list) {
    char *dst = meta->frozen[meta->nfrozen++];
    if (!cJSON_IsString(name) || strlen(name->valuestring) >= sizeof meta->frozen[0]) {
      return clt_fail(e, CLT_ERR_FORMAT,
                      "%s: metadata key frozen holds %s, not a layer name (a string of at most "
                      "%zu characters)",
                      at.path, cJSON_IsString(name) ? "a longer string" : type_name(name),
                      sizeof meta->frozen[0] - 1);
    }
    memcpy(dst, name->valuestring, strlen(name->valuestring) + 1);
  }
  return CLT_OK;
}

/* An entry's member that is an integer from min to max (a count or an epoch). */
static int get_int(place at, const cJSON *obj, const char *key, int min, int max, int *out,
                   clt_err *e) {
  const cJSON *v;
  int status = lookup(at, obj, key, cJSON_Number, "a number", 1, &v, e);
  if (status) return status;
  if (!is_int(v) || v->valueint < min || v->valueint > max) {
    char shown[40];
    show_number(v->valuedouble, shown, sizeof shown);
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key %s%s is %s, not an integer in [%d, %d]",
                    at.path, at.prefix, key, shown, min, max);
  }
  *out = v->valueint;
  return CLT_OK;
}

/* An entry's member that is a number or null (*has 0). */
static int get_optional_number(place at, const cJSON *obj, const char *key, int *has, double *out,
                               clt_err *e) {
  const cJSON *v;
  int status = lookup(at, obj, key, cJSON_Number | cJSON_NULL, "a number or null", 1, &v, e);
  if (status) return status;
  *has = cJSON_IsNumber(v);
  *out = *has ? v->valuedouble : 0;
  return CLT_OK;
}

/* A string member that must be one of names[0..n): its index into *out. */
static int get_choice(place at, const cJSON *obj, const char *key, const char *const *names, int n,
                      int *out, clt_err *e) {
  char text[64];
  int status = get_string(at, obj, key, 1, text, sizeof text, e);
  for (int i = 0; i < n && !status; i++) {
    if (strcmp(text, names[i]) == 0) {
      *out = i;
      return CLT_OK;
    }
  }
  if (status) return status;
  char shown[80];
  clt_npz_printable(shown, sizeof shown, text);
  return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key %s%s is \"%s\", which cltrain does not know",
                  at.path, at.prefix, key, shown);
}

/* Early stopping's entry into es: every key required, as one cltrain writes them all. */
static int get_early_stop(const char *path, const cJSON *entry, clt_early_stop *es, clt_err *e) {
  const char *monitors[CLT_MONITOR_COUNT], *modes[CLT_ES_MODE_COUNT];
  for (int i = 0; i < CLT_MONITOR_COUNT; i++) monitors[i] = clt_monitor_name((clt_monitor)i);
  for (int i = 0; i < CLT_ES_MODE_COUNT; i++) modes[i] = clt_es_mode_name((clt_es_mode)i);
  const place at = {path, "early_stopping."};
  const cJSON *delta, *restore;
  int monitor = 0, mode = 0, best_epoch = 0, stopped_epoch = 0, status;
  memset(es, 0, sizeof *es);
  if ((status = get_choice(at, entry, "monitor", monitors, CLT_MONITOR_COUNT, &monitor, e)) ||
      (status = lookup(at, entry, "min_delta", cJSON_Number, "a number", 1, &delta, e)) ||
      (status = get_int(at, entry, "patience", 0, 1000000, &es->patience, e)) ||
      (status = get_choice(at, entry, "mode", modes, CLT_ES_MODE_COUNT, &mode, e)) ||
      (status = get_optional_number(at, entry, "baseline", &es->has_baseline, &es->baseline, e)))
    return status;
  es->min_delta = delta->valuedouble;
  if ((status = lookup(at, entry, "restore_best_weights", cJSON_True | cJSON_False, "true or false",
                       1, &restore, e)) ||
      (status = get_int(at, entry, "start_from_epoch", 0, 1000000, &es->start_from_epoch, e)) ||
      (status = get_int(at, entry, "wait", 0, INT_MAX, &es->wait, e)) ||
      (status = get_optional_number(at, entry, "best", &es->has_best, &es->best, e)) ||
      (status = get_int(at, entry, "best_epoch", es->has_best, INT_MAX, &best_epoch, e)) ||
      (status = get_int(at, entry, "stopped_epoch", 0, INT_MAX, &stopped_epoch, e)))
    return status;
  /* Epoch 1 never stops (Keras' rule); no best, no best epoch. */
  if (stopped_epoch == 1 || (!es->has_best && best_epoch != 0)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata key early_stopping.%s is %d, impossible", path,
                    stopped_epoch == 1 ? "stopped_epoch" : "best_epoch",
                    stopped_epoch == 1 ? stopped_epoch : best_epoch);
  }
  es->monitor = (clt_monitor)monitor;
  es->mode = (clt_es_mode)mode;
  es->restore_best_weights = cJSON_IsTrue(restore);
  es->best_epoch = best_epoch ? best_epoch - 1 : 0;
  es->stopped_epoch = stopped_epoch ? stopped_epoch - 1 : 0;
  es->enabled = 1;
  return CLT_OK;
}

/* "architecture": the model's description, a string of any length. */
static int get_architecture(place at, const cJSON *root, clt_checkpoint_meta *meta, clt_err *e) {
  const cJSON *v;
  int status = lookup(at, root, "architecture", cJSON_String, "a string", 1, &v, e);
  if (status) return status;
  const size_t len = strlen(v->valuestring);
  if (!(meta->architecture = malloc(len + 1)))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", at.path);
  memcpy(meta->architecture, v->valuestring, len + 1);
  return get_string(at, root, "architecture", 1, meta->architecture, len + 1, e);
}

static int parse(const char *path, const cJSON *root, int with_optimizer, clt_checkpoint_meta *meta,
                 clt_err *e) {
  const place at = {path, ""};
  const cJSON *output, *optimizer, *data, *plateau, *early;
  int status;
  if (!cJSON_IsObject(root)) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: metadata is %s, not a JSON object", path,
                    type_name(root));
  }
  if ((status = get_format(at, root, &meta->format, e)) ||
      (status = get_string(at, root, "model", 1, meta->model, sizeof meta->model, e)) ||
      (status = get_shape(at, root, meta, e)) || (status = get_architecture(at, root, meta, e)) ||
      (status = get_string(at, root, "preprocess", 0, meta->preprocess, sizeof meta->preprocess,
                           e)) ||
      (status = get_frozen(at, root, meta, e)) ||
      (status = get_conv_algorithms(at, root, meta, e)) ||
      (status = get_lines(at, root, "gemm_tilings", &meta->gemm_tilings, e)) ||
      (status = get_lines(at, root, "replicas", &meta->replicas, e)) ||
      (status = lookup(at, root, "output", cJSON_String, "a string", 0, &output, e)) ||
      (status = lookup(at, root, "optimizer", cJSON_Object, "an object", 0, &optimizer, e)) ||
      (status = lookup(at, root, "data", cJSON_Object, "an object", 0, &data, e)) ||
      (status = lookup(at, root, "reduce_lr_on_plateau", cJSON_Object, "an object", 0, &plateau,
                       e)) ||
      (data && (status = get_data(path, data, &meta->data, e))) ||
      (status = lookup(at, root, "early_stopping", cJSON_Object, "an object", 0, &early, e)) ||
      (early && (status = get_early_stop(path, early, &meta->early_stop, e))))
    return status;
  meta->softmax_output = output && strcmp(output->valuestring, "softmax") == 0;
  /* No optimizer recorded: an older cltrain's checkpoint, holding Adam's state. */
  meta->optimizer = clt_optimizer_defaults(CLT_OPT_ADAM);
  meta->optimizer.lr = 0;
  if (with_optimizer && optimizer && (status = get_optimizer(path, optimizer, &meta->optimizer, e)))
    return status;
  if (with_optimizer && plateau) return get_plateau(path, plateau, &meta->plateau, e);
  return CLT_OK;
}

int clt_checkpoint_meta_read(const char *path, const clt_npz *z, int with_optimizer,
                             clt_checkpoint_meta *meta, clt_err *e) {
  const clt_npz_array *a = clt_npz_find(z, "metadata");
  int status = CLT_OK;
  char *text = NULL;
  cJSON *root = NULL;
  memset(meta, 0, sizeof *meta);
  if (!a) return clt_fail(e, CLT_ERR_FORMAT, "%s: missing member metadata", path);
  if (!(text = malloc(a->bytes + 1))) { /* at most as many characters as its bytes */
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory loading %s", path);
    goto cleanup;
  }
  if (clt_npz_get_string(a, text, a->bytes + 1) != 0) {
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: member metadata is not a string", path);
    goto cleanup;
  }
  const char *end = NULL;
  if (!(root = cJSON_ParseWithOpts(text, &end, 1))) {
    while (end && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end && *end) {
      char shown[24];
      clt_npz_printable(shown, sizeof shown, end);
      status = clt_fail(e, CLT_ERR_FORMAT, "%s: metadata is not valid JSON (at character %ld: %s)",
                        path, (long)(end - text) + 1, shown);
    } else {
      status = clt_fail(e, CLT_ERR_FORMAT, "%s: metadata is not valid JSON (it ends early)", path);
    }
    goto cleanup;
  }
  status = parse(path, root, with_optimizer, meta, e);

cleanup:
  cJSON_Delete(root);
  free(text);
  return status;
}

/* A built-in model is built as this cltrain defines it (clt_checkpoint_load then
 * refuses a checkpoint whose architecture differs); any other model is rebuilt
 * from the architecture the checkpoint stores. */
int clt_checkpoint_meta_frozen(const clt_checkpoint_meta *meta, const clt_model *m,
                               unsigned char *frozen, clt_err *e) {
  memset(frozen, 0, (size_t)m->nlayers);
  for (int k = 0; k < meta->nfrozen; k++) {
    const int i = clt_model_find(m, meta->frozen[k]);
    if (i < 0) {
      char shown[80];
      clt_npz_printable(shown, sizeof shown, meta->frozen[k]);
      return clt_fail(e, CLT_ERR_FORMAT, "metadata key frozen names no layer of model %s: \"%s\"",
                      m->name, shown);
    }
    frozen[i] = 1;
  }
  return CLT_OK;
}

/* The model as built, then its frozen layers. */
static int build(const clt_checkpoint_meta *meta, clt_model *m, clt_err *e) {
  if (clt_model_is_builtin(meta->model, NULL) || !meta->preprocess[0]) {
    return clt_model_build(meta->model, meta->input, meta->classes, m, e);
  }
  for (size_t p = 0; p < sizeof preprocess_names / sizeof preprocess_names[0]; p++) {
    if (strcmp(meta->preprocess, preprocess_names[p]) == 0) {
      int status = clt_model_parse(meta->model, meta->input, meta->classes, (clt_preprocess)p,
                                   meta->architecture, m, e);
      if (!status) m->softmax_output = meta->softmax_output;
      return status;
    }
  }
  char shown[80];
  clt_npz_printable(shown, sizeof shown, meta->preprocess);
  return clt_fail(e, CLT_ERR_FORMAT, "unknown preprocessing '%s' of model %s", shown, meta->model);
}

void clt_checkpoint_meta_free(clt_checkpoint_meta *meta) {
  free(meta->architecture);
  free(meta->frozen);
  free(meta->gemm_tilings);
  free(meta->replicas);
  memset(meta, 0, sizeof *meta);
}

int clt_checkpoint_meta_model(const clt_checkpoint_meta *meta, clt_model *m, clt_err *e) {
  int status = build(meta, m, e);
  if (status || !meta->nfrozen) return status;
  unsigned char *frozen = malloc((size_t)m->nlayers + 1);
  if (!frozen) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  status = clt_checkpoint_meta_frozen(meta, m, frozen, e);
  for (int i = 0; i < m->nlayers && !status; i++) m->layers[i].frozen = frozen[i];
  free(frozen);
  if (!status) clt_model_layout(m);
  return status;
}
