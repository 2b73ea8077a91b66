/* `cltrain plot`: reading the training log (JSON Lines, one object per epoch) into
 * records, checking every field it draws. */
#define _POSIX_C_SOURCE 200809L /* getline */

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "plot_impl.h"

void clt_plot_free_log(log_data *d) {
  for (int i = 0; i < d->n; i++) free(d->recs[i].reps);
  free(d->recs);
  d->recs = NULL;
  d->n = d->cap = 0;
}

void clt_plot_copy_name(char *dst, size_t size, const char *src) {
  size_t n = strlen(src);
  if (n >= size) {
    n = size - 1;
    while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--;
  }
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* An optional number: absent or null gives NAN; any other non-number, or a
 * non-finite one (1e999 reads as infinity), is an error naming the line. */
static int opt_number(const cJSON *obj, const char *key, double *out, const char *path, long line,
                      clt_err *e) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NAN;
  if (!it || cJSON_IsNull(it)) return CLT_OK;
  if (!cJSON_IsNumber(it))
    return clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: \"%s\" is not a number", path, line, key);
  if (!isfinite(it->valuedouble))
    return clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: \"%s\" is not finite", path, line, key);
  *out = it->valuedouble;
  return CLT_OK;
}

/* A required number: as opt_number, and absence or null is an error. */
static int req_number(const cJSON *obj, const char *key, double *out, const char *path, long line,
                      clt_err *e) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!it) return clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: no \"%s\"", path, line, key);
  int status = opt_number(obj, key, out, path, line, e);
  if (!status && isnan(*out))
    status = clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: \"%s\" is null", path, line, key);
  return status;
}

/* A whole number in [lo, hi], or def where absent. */
static int opt_int(const cJSON *obj, const char *key, int def, int lo, int hi, int *out,
                   const char *path, long line, clt_err *e) {
  double v;
  int status = opt_number(obj, key, &v, path, line, e);
  if (status) return status;
  if (isnan(v)) {
    *out = def;
    return CLT_OK;
  }
  if (v != floor(v) || v < lo || v > hi) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s:%ld: \"%s\": expected a whole number in [%d, %d], got %g", path, line, key,
                    lo, hi, v);
  }
  *out = (int)v;
  return CLT_OK;
}

/* An optional string into dst ("" where absent or null). */
static int opt_string(const cJSON *obj, const char *key, char *dst, size_t size, const char *path,
                      long line, clt_err *e) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  dst[0] = '\0';
  if (!it || cJSON_IsNull(it)) return CLT_OK;
  if (!cJSON_IsString(it) || !it->valuestring)
    return clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: \"%s\" is not a string", path, line, key);
  clt_plot_copy_name(dst, size, it->valuestring);
  return CLT_OK;
}

/* The "replicas" list: each one's rank, device index, name and share of the
 * epoch's examples (from "examples" where a log has no "share"). */
static int parse_replicas(const cJSON *root, record *r, const char *path, long line, clt_err *e) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "replicas");
  if (!list || cJSON_IsNull(list)) return CLT_OK;
  if (!cJSON_IsArray(list))
    return clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: \"replicas\" is not a list", path, line);
  const int n = cJSON_GetArraySize(list);
  if (n == 0) return CLT_OK;
  r->reps = calloc((size_t)n, sizeof *r->reps);
  if (!r->reps) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", path);
  int status = CLT_OK;
  double examples_sum = 0, *examples = calloc((size_t)n, sizeof *examples);
  if (!examples) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", path);
    goto cleanup;
  }
  int i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, list) {
    rep_value *v = &r->reps[i];
    if (!cJSON_IsObject(it)) {
      status = clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: \"replicas\" item %d is not an object", path,
                        line, i);
      goto cleanup;
    }
    status = opt_int(it, "rank", -1, 0, 1 << 24, &v->rank, path, line, e);
    if (!status) status = opt_int(it, "index", i, 0, 1 << 24, &v->index, path, line, e);
    if (!status) status = opt_string(it, "device", v->name, sizeof v->name, path, line, e);
    if (!status) status = opt_number(it, "share", &v->share, path, line, e);
    if (!status) status = opt_number(it, "examples", &examples[i], path, line, e);
    if (status) goto cleanup;
    v->share *= 100;
    examples_sum += isnan(examples[i]) ? NAN : examples[i];
    i++;
  }
  r->nreps = i;
  for (i = 0; i < r->nreps; i++) {
    if (isnan(r->reps[i].share) && examples_sum > 0)
      r->reps[i].share = 100 * examples[i] / examples_sum;
  }
cleanup:
  free(examples);
  return status;
}

/* One line's object into *r (r->reps owned by r, also after a failure). */
static int parse_record(const cJSON *root, record *r, const char *path, long line, clt_err *e) {
  double epoch = NAN; /* set when status is CLT_OK */
  int status = req_number(root, "epoch", &epoch, path, line, e);
  if (!status && (epoch != floor(epoch) || epoch < 0 || epoch > 1e9)) {
    status = clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: \"epoch\": expected a whole number, got %g", path,
                      line, epoch);
  }
  if (!status) status = req_number(root, "train_loss", &r->train_loss, path, line, e);
  if (!status) status = opt_number(root, "train_accuracy", &r->train_acc, path, line, e);
  if (!status) status = opt_number(root, "test_loss", &r->test_loss, path, line, e);
  if (!status) status = opt_number(root, "test_accuracy", &r->test_acc, path, line, e);
  if (!status) status = opt_number(root, "images_per_second", &r->ips, path, line, e);
  if (!status) status = opt_int(root, "processes", 1, 1, 1 << 24, &r->processes, path, line, e);
  if (!status) status = opt_string(root, "model", r->model, sizeof r->model, path, line, e);
  if (!status) status = parse_replicas(root, r, path, line, e);
  if (!status) {
    r->epoch = (int)epoch;
    r->line = line;
  }
  return status;
}

static int blank(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
  return *s == '\0';
}

/* The later line first among records of one epoch: the first of each run is kept. */
static int by_epoch_latest(const void *a, const void *b) {
  const record *x = a, *y = b;
  if (x->epoch != y->epoch) return x->epoch < y->epoch ? -1 : 1;
  return x->line > y->line ? -1 : x->line < y->line;
}

/* Sorts by epoch and keeps the last-logged record of each (a --resume repeats epochs). */
static void keep_last_of_epochs(log_data *d) {
  qsort(d->recs, (size_t)d->n, sizeof *d->recs, by_epoch_latest);
  int kept = 0;
  for (int i = 0; i < d->n; i++) {
    if (kept > 0 && d->recs[kept - 1].epoch == d->recs[i].epoch) {
      free(d->recs[i].reps);
      d->replaced++;
      continue;
    }
    d->recs[kept++] = d->recs[i];
  }
  d->n = kept;
}

int clt_plot_read_log(const char *path, log_data *d, clt_err *e) {
  int status = CLT_OK;
  char *line = NULL;
  size_t cap = 0;
  cJSON *root = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return clt_fail(e, CLT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  long lineno = 0;
  ssize_t len;
  errno = 0;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if (blank(line)) continue;
    /* Whole line one object: a NUL byte or text after the object is not JSON. */
    root = strlen(line) == (size_t)len ? cJSON_ParseWithOpts(line, NULL, 1) : NULL;
    if (!cJSON_IsObject(root)) {
      status = clt_fail(e, CLT_ERR_FORMAT, "%s:%ld: not a JSON object", path, lineno);
      goto cleanup;
    }
    if (d->n == d->cap) {
      const int cap2 = d->cap ? 2 * d->cap : 64;
      record *grown = d->cap < (1 << 28) ? realloc(d->recs, (size_t)cap2 * sizeof *grown) : NULL;
      if (!grown) {
        status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", path);
        goto cleanup;
      }
      d->recs = grown;
      d->cap = cap2;
    }
    record *r = &d->recs[d->n++];
    memset(r, 0, sizeof *r);
    status = parse_record(root, r, path, lineno, e);
    if (status) goto cleanup;
    cJSON_Delete(root);
    root = NULL;
    errno = 0;
  }
  if (ferror(f)) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
  } else if (d->n == 0) {
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: empty: no epoch records to plot", path);
  }
  if (!status) keep_last_of_epochs(d);
cleanup:
  cJSON_Delete(root);
  free(line);
  fclose(f);
  return status;
}
