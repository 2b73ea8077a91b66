/* The tuner's cache (tune.h): one JSON file per device identity. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cl_sources.h"
#include "files.h"
#include "tune.h"

/* What the files say they are; a file without it is foreign. */
#define TUNE_FORMAT "cltrain tuning results 1"

struct clt_tune_cache {
  clt_tune_ident ident;
  char path[4096];
  char lock[4200];
  FILE *notes;
  int persistent;
  int pinned;    /* --tune-file: no folder to create */
  cJSON *result; /* key -> {"variant", "ms", "default_ms"} */
};

uint64_t clt_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

void clt_tune_sources_hash(char out[17]) {
  uint64_t h = CLT_FNV_START;
  for (size_t i = 0; i < clt_cl_source_count(); i++) {
    const char *name = "";
    size_t len = 0;
    const char *text = clt_cl_source_at(i, &name, &len);
    h = clt_fnv1a(h, name, strlen(name) + 1);
    h = clt_fnv1a(h, text, len);
  }
  snprintf(out, 17, "%016llx", (unsigned long long)h);
}

int clt_tune_batch_bucket(int batch) {
  int b = 1;
  while (b < batch && b < (1 << 30)) b *= 2;
  return b;
}

/* /proc/cpuinfo's first "model name", or "" where there is none. */
static void cpu_model(char *out, size_t size) {
  out[0] = '\0';
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *colon = strchr(line, ':');
    if (!colon) continue;
    colon++;
    while (*colon == ' ' || *colon == '\t') colon++;
    snprintf(out, size, "%s", colon);
    out[strcspn(out, "\n")] = '\0';
    break;
  }
  fclose(f);
}

static int device_string(const clt_device *d, cl_device_info what, const char *label, char *out,
                         size_t size, clt_err *e) {
  cl_int rc = clGetDeviceInfo(d->id, what, size, out, NULL);
  if (rc != CL_SUCCESS)
    return clt_fail(e, rc, "device %d (%s): cannot read its %s: %s", d->index, d->name, label,
                    clt_status_name(rc));
  out[size - 1] = '\0';
  return CLT_OK;
}

int clt_tune_ident_of(const clt_device *d, const char *options, clt_tune_ident *out, clt_err *e) {
  memset(out, 0, sizeof *out);
  int status = device_string(d, CL_DEVICE_VENDOR, "vendor", out->vendor, sizeof out->vendor, e);
  if (!status)
    status = device_string(d, CL_DRIVER_VERSION, "driver version", out->driver, sizeof out->driver,
                           e);
  if (status) return status;
  snprintf(out->name, sizeof out->name, "%s", d->name);
  if (d->type & CL_DEVICE_TYPE_CPU) cpu_model(out->cpu_model, sizeof out->cpu_model);
  out->compute_units = d->compute_units;
  snprintf(out->options, sizeof out->options, "%s", options ? options : "");
  out->vector_width = d->float_vector_width;
  const char *cpu = getenv("POCL_LLVM_CPU_NAME"), *lib = getenv("POCL_KERNELLIB_NAME");
  snprintf(out->isa, sizeof out->isa, "%s/%s", cpu ? cpu : "", lib ? lib : "");
  clt_tune_sources_hash(out->sources);
  return CLT_OK;
}

int clt_tune_default_dir(char *out, size_t size, clt_err *e) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n;
  if (xdg && *xdg) n = snprintf(out, size, "%s/cltrain/tune", xdg);
  else if (home && *home) n = snprintf(out, size, "%s/.cache/cltrain/tune", home);
  else return clt_fail(e, CLT_ERR_ARG, "tuning cache: neither XDG_CACHE_HOME nor HOME is set");
  if (n < 0 || (size_t)n >= size)
    return clt_fail(e, CLT_ERR_ARG, "tuning cache: folder name too long");
  return CLT_OK;
}

static cJSON *ident_json(const clt_tune_ident *id) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "vendor", id->vendor);
  cJSON_AddStringToObject(o, "name", id->name);
  cJSON_AddStringToObject(o, "cpu_model", id->cpu_model);
  cJSON_AddNumberToObject(o, "compute_units", id->compute_units);
  cJSON_AddStringToObject(o, "driver", id->driver);
  cJSON_AddStringToObject(o, "options", id->options);
  cJSON_AddNumberToObject(o, "vector_width", id->vector_width);
  cJSON_AddStringToObject(o, "isa", id->isa);
  cJSON_AddStringToObject(o, "sources", id->sources);
  return o;
}

/* The identity's hash, naming its file. */
static uint64_t ident_hash(const clt_tune_ident *id) {
  cJSON *o = ident_json(id);
  char *text = o ? cJSON_PrintUnformatted(o) : NULL;
  const uint64_t h = text ? clt_fnv1a(CLT_FNV_START, text, strlen(text)) : 0;
  cJSON_free(text);
  cJSON_Delete(o);
  return h;
}

void clt_tune_ident_hash(const clt_tune_ident *id, char out[17]) {
  snprintf(out, 17, "%016llx", (unsigned long long)ident_hash(id));
}

static void note(clt_tune_cache *c, const char *fmt, const char *a, const char *b) {
  if (c->notes) {
    fprintf(c->notes, fmt, a, b);
    fputc('\n', c->notes);
  }
}

/* Reads path: 1 with *results set (owned by the caller) when it holds c's
 * identity; 0 when there is no file; -1 when it is corrupt or foreign, *why
 * saying which. */
static int read_file(const clt_tune_cache *c, const char *path, cJSON **results, const char **why) {
  *results = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  char *text = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? 2 * cap : 8192;
      char *grown = realloc(text, cap);
      if (!grown) break;
      text = grown;
    }
    const size_t n = fread(text + len, 1, cap - len - 1, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  if (!text) {
    *why = "cannot be read";
    return -1;
  }
  text[len] = '\0';
  cJSON *doc = cJSON_ParseWithLength(text, len);
  free(text);
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(doc, "format");
  cJSON *ident = cJSON_GetObjectItemCaseSensitive(doc, "ident");
  cJSON *res = cJSON_GetObjectItemCaseSensitive(doc, "results");
  cJSON *ours = ident_json(&c->ident);
  int rc = 1;
  if (!doc || !cJSON_IsObject(doc) || !cJSON_IsObject(res)) {
    *why = "is not a tuning file (corrupt)";
    rc = -1;
  } else if (!cJSON_IsString(format) || strcmp(format->valuestring, TUNE_FORMAT) != 0) {
    *why = "is of another format";
    rc = -1;
  } else if (!ident || !ours || !cJSON_Compare(ident, ours, 1)) {
    *why = "holds another device's or build's results";
    rc = -1;
  }
  /* Entries that are not {"variant": string, ...} make the file corrupt. */
  const cJSON *entry;
  const cJSON *checked = rc == 1 ? res : NULL;
  cJSON_ArrayForEach(entry, checked) {
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(entry, "variant"))) {
      *why = "is not a tuning file (corrupt)";
      rc = -1;
    }
  }
  if (rc == 1) *results = cJSON_DetachItemViaPointer(doc, res);
  cJSON_Delete(ours);
  cJSON_Delete(doc);
  return rc;
}

int clt_tune_open(const char *dir, const char *path, const clt_tune_ident *ident, FILE *notes,
                  clt_tune_cache **out, clt_err *e) {
  *out = NULL;
  clt_tune_cache *c = calloc(1, sizeof *c);
  if (!c) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory opening the tuning cache");
  c->ident = *ident;
  c->notes = notes;
  c->persistent = 1;
  c->pinned = path != NULL;
  int status = CLT_OK;
  if (path) {
    snprintf(c->path, sizeof c->path, "%s", path);
  } else {
    char folder[3800];
    if (dir) snprintf(folder, sizeof folder, "%s", dir);
    else status = clt_tune_default_dir(folder, sizeof folder, e);
    if (!status)
      snprintf(c->path, sizeof c->path, "%s/%016llx.json", folder,
               (unsigned long long)ident_hash(ident));
  }
  snprintf(c->lock, sizeof c->lock, "%s.lock", c->path);
  if (status) {
    free(c);
    return status;
  }
  const char *why = "";
  const int rc = read_file(c, c->path, &c->result, &why);
  if (rc < 0 && c->pinned) {
    free(c);
    return clt_fail(e, CLT_ERR_FORMAT, "--tune-file %s: %s", path, why);
  }
  if (rc < 0) note(c, "tuning cache %s %s: ignored, and rewritten with new results", c->path, why);
  if (!c->result && !(c->result = cJSON_CreateObject())) {
    free(c);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory opening the tuning cache");
  }
  *out = c;
  return CLT_OK;
}

void clt_tune_close(clt_tune_cache *c) {
  if (!c) return;
  cJSON_Delete(c->result);
  free(c);
}

const char *clt_tune_path(const clt_tune_cache *c) { return c->path; }

int clt_tune_persistent(const clt_tune_cache *c) { return c->persistent; }

const char *clt_tune_get(const clt_tune_cache *c, const char *key, double *ms, double *default_ms) {
  const cJSON *entry = cJSON_GetObjectItemCaseSensitive(c->result, key);
  const cJSON *variant = cJSON_GetObjectItemCaseSensitive(entry, "variant");
  if (!cJSON_IsString(variant)) return NULL;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(entry, "ms");
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(entry, "default_ms");
  if (ms) *ms = cJSON_IsNumber(t) ? t->valuedouble : 0.0;
  if (default_ms) *default_ms = cJSON_IsNumber(d) ? d->valuedouble : 0.0;
  return variant->valuestring;
}

/* Creates folder `path` and its missing parents. */
static int make_dirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Merges the file's entries that c lacks (another process's), then writes c's
 * entries atomically; the caller holds the lock. */
static int write_merged(clt_tune_cache *c, clt_err *e) {
  cJSON *disk = NULL;
  const char *why = "";
  if (read_file(c, c->path, &disk, &why) == 1) {
    cJSON *entry = disk->child;
    while (entry) {
      cJSON *next = entry->next;
      if (!cJSON_GetObjectItemCaseSensitive(c->result, entry->string))
        cJSON_AddItemToObject(c->result, entry->string, cJSON_Duplicate(entry, 1));
      entry = next;
    }
  }
  cJSON_Delete(disk);
  cJSON *doc = cJSON_CreateObject();
  cJSON *results = cJSON_Duplicate(c->result, 1);
  if (doc) {
    cJSON_AddStringToObject(doc, "format", TUNE_FORMAT);
    cJSON_AddItemToObject(doc, "ident", ident_json(&c->ident));
    if (results) cJSON_AddItemToObject(doc, "results", results);
  }
  char *text = doc && results ? cJSON_Print(doc) : NULL;
  if (!doc || !results) cJSON_Delete(results);
  cJSON_Delete(doc);
  if (!text) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory writing %s", c->path);
  const int status = clt_write_atomic(c->path, text, strlen(text), e);
  cJSON_free(text);
  return status;
}

const char *clt_tune_get_decision(const clt_tune_cache *c, const char *key, double *step_ms,
                                  double *default_step_ms) {
  const cJSON *entry = cJSON_GetObjectItemCaseSensitive(c->result, key);
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(entry, "decision");
  if (!cJSON_IsString(d)) return NULL;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(entry, "step_ms");
  const cJSON *u = cJSON_GetObjectItemCaseSensitive(entry, "default_step_ms");
  if (step_ms) *step_ms = cJSON_IsNumber(t) ? t->valuedouble : 0.0;
  if (default_step_ms) *default_step_ms = cJSON_IsNumber(u) ? u->valuedouble : 0.0;
  return d->valuestring;
}

static int put_entry(clt_tune_cache *c, const char *key, cJSON *entry, clt_err *e);

int clt_tune_put(clt_tune_cache *c, const char *key, const char *variant, double ms,
                 double default_ms, clt_err *e) {
  cJSON *entry = cJSON_CreateObject();
  if (!entry || !cJSON_AddStringToObject(entry, "variant", variant) ||
      !cJSON_AddNumberToObject(entry, "ms", ms) ||
      !cJSON_AddNumberToObject(entry, "default_ms", default_ms)) {
    cJSON_Delete(entry);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory recording a tuning result");
  }
  return put_entry(c, key, entry, e);
}

int clt_tune_put_step(clt_tune_cache *c, const char *key, const char *variant, double ms,
                      double default_ms, const char *decision, const char *why, double step_ms,
                      double default_step_ms, clt_err *e) {
  cJSON *entry = cJSON_CreateObject();
  if (!entry || !cJSON_AddStringToObject(entry, "variant", variant) ||
      !cJSON_AddNumberToObject(entry, "ms", ms) ||
      !cJSON_AddNumberToObject(entry, "default_ms", default_ms) ||
      !cJSON_AddStringToObject(entry, "method", "in step") ||
      !cJSON_AddStringToObject(entry, "decision", decision) ||
      !cJSON_AddStringToObject(entry, "why", why) ||
      !cJSON_AddNumberToObject(entry, "step_ms", step_ms) ||
      !cJSON_AddNumberToObject(entry, "default_step_ms", default_step_ms)) {
    cJSON_Delete(entry);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory recording a tuning result");
  }
  return put_entry(c, key, entry, e);
}

int clt_tune_put_list(clt_tune_cache *c, const char *key, const char *variant, const long *v, int n,
                      clt_err *e) {
  cJSON *entry = cJSON_CreateObject();
  int ok = entry && cJSON_AddStringToObject(entry, "variant", variant);
  cJSON *list = ok ? cJSON_AddArrayToObject(entry, "list") : NULL;
  ok = list != NULL;
  for (int i = 0; i < n && ok; i++) {
    cJSON *item = cJSON_CreateNumber((double)v[i]);
    ok = item && cJSON_AddItemToArray(list, item);
  }
  if (!ok) {
    cJSON_Delete(entry);
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory recording a tuning result");
  }
  return put_entry(c, key, entry, e);
}

int clt_tune_get_list(const clt_tune_cache *c, const char *key, long *v, int max) {
  const cJSON *entry = cJSON_GetObjectItemCaseSensitive(c->result, key);
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(entry, "list");
  if (!cJSON_IsArray(list)) return -1;
  int n = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, list) {
    if (n == max || !cJSON_IsNumber(item)) return -1;
    v[n++] = (long)item->valuedouble;
  }
  return n;
}

/* Records entry (taken) under key and writes the file. */
static int put_entry(clt_tune_cache *c, const char *key, cJSON *entry, clt_err *e) {
  if (cJSON_GetObjectItemCaseSensitive(c->result, key))
    cJSON_ReplaceItemInObjectCaseSensitive(c->result, key, entry);
  else cJSON_AddItemToObject(c->result, key, entry);
  if (!c->persistent) return CLT_OK;

  char folder[4096];
  snprintf(folder, sizeof folder, "%s", c->path);
  char *slash = strrchr(folder, '/');
  if (slash) *slash = '\0';
  clt_err werr = {0};
  int status = CLT_OK;
  if (!c->pinned && slash && make_dirs(folder) != 0)
    status = clt_fail(&werr, CLT_ERR_IO, "cannot create %s: %s", folder, strerror(errno));
  const int fd = status ? -1 : open(c->lock, O_RDWR | O_CREAT, 0644);
  if (!status && fd < 0)
    status = clt_fail(&werr, CLT_ERR_IO, "cannot create %s: %s", c->lock, strerror(errno));
  if (!status && flock(fd, LOCK_EX) != 0)
    status = clt_fail(&werr, CLT_ERR_IO, "cannot lock %s: %s", c->lock, strerror(errno));
  if (!status) status = write_merged(c, &werr);
  if (fd >= 0) close(fd); /* releases the lock */
  if (status == CLT_ERR_NOMEM) return clt_fail(e, status, "%s", werr.msg);
  if (status) {
    c->persistent = 0;
    note(c, "tuning cache: %s%s; tuning results stay in memory", werr.msg, "");
  }
  return CLT_OK;
}

void clt_tune_conv_key(const char *pass, int h, int w, int c, int kh, int kw, int stride,
                       int pad_top, int pad_left, int oh, int ow, int filters, int batch, char *out,
                       size_t size) {
  snprintf(out, size, "conv %s %dx%dx%d k%dx%d s%d p%d,%d o%dx%d f%d b%d", pass, h, w, c, kh, kw,
           stride, pad_top, pad_left, oh, ow, filters, clt_tune_batch_bucket(batch));
}
