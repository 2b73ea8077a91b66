/* The public API's versions, statuses, messages and option strings (api_impl.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"

static _Thread_local char thread_msg[1024];

CLTRAIN_API const char *cltrain_version(void) { return CLTRAIN_VERSION; }

CLTRAIN_API const char *cltrain_errmsg(const void *handle) {
  if (!handle) return thread_msg;
  const api_handle *h = handle;
  switch (h->kind) {
    case API_CTX:
    case API_DATASET:
    case API_MODEL:
    case API_TRAINER:
    case API_OPTIONS:
      return h->msg;
    default:
      return "cltrain_errmsg: not a live cltrain handle";
  }
}

CLTRAIN_API const char *cltrain_status_name(int status) {
  static const char *const names[] = {"CLTRAIN_OK",          "CLTRAIN_ERR_ARG",
                                      "CLTRAIN_ERR_STATE",   "CLTRAIN_ERR_IO",
                                      "CLTRAIN_ERR_FORMAT",  "CLTRAIN_ERR_NOMEM",
                                      "CLTRAIN_ERR_DEVICE",  "CLTRAIN_ERR_NUMERIC",
                                      "CLTRAIN_ERR_PEER",    "CLTRAIN_ERR_STOPPED",
                                      "CLTRAIN_ERR_INTERNAL"};
  if (status < 0 || status >= (int)(sizeof names / sizeof names[0])) return "CLTRAIN_ERR_UNKNOWN";
  return names[status];
}

static char *msg_of(void *h) { return h ? ((api_handle *)h)->msg : thread_msg; }

int api_check(const void *h, uint32_t kind, const char *fn) {
  static const struct {
    uint32_t kind;
    const char *name;
  } kinds[] = {{API_CTX, "context"},
               {API_DATASET, "dataset"},
               {API_MODEL, "model"},
               {API_TRAINER, "trainer"},
               {API_OPTIONS, "options"}};
  const char *want = "handle";
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].kind == kind) want = kinds[i].name;
  if (!h) return api_fail(NULL, fn, CLTRAIN_ERR_ARG, "the %s is NULL", want);
  const uint32_t got = ((const api_handle *)h)->kind;
  if (got == kind) return CLTRAIN_OK;
  if (got == API_FREED) return api_fail(NULL, fn, CLTRAIN_ERR_STATE, "the %s was freed", want);
  return api_fail(NULL, fn, CLTRAIN_ERR_ARG, "not a %s handle", want);
}

int api_fail(void *h, const char *fn, int status, const char *fmt, ...) {
  char text[sizeof thread_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  char *msg = msg_of(h);
  snprintf(msg, sizeof thread_msg, "%s: %.960s", fn, text);
  if (h) memcpy(thread_msg, msg, sizeof thread_msg); /* the thread's too */
  return status;
}

int api_status(int code) {
  switch (code) {
    case CLT_OK:
      return CLTRAIN_OK;
    case CLT_ERR_ARG:
      return CLTRAIN_ERR_ARG;
    case CLT_ERR_IO:
      return CLTRAIN_ERR_IO;
    case CLT_ERR_FORMAT:
      return CLTRAIN_ERR_FORMAT;
    case CLT_ERR_NOMEM:
      return CLTRAIN_ERR_NOMEM;
    case CLT_ERR_DEVICE:
      return CLTRAIN_ERR_DEVICE;
    case CLT_ERR_NUMERIC:
      return CLTRAIN_ERR_NUMERIC;
    case CLT_ERR_PEER:
      return CLTRAIN_ERR_PEER;
    case CLT_ERR_STOPPED:
      return CLTRAIN_ERR_STOPPED;
    case CLT_ERR_INTERNAL:
      return CLTRAIN_ERR_INTERNAL;
    default:
      /* OpenCL (-1 .. -72: memory codes among them) and CLBlast codes. */
      if (code == -4 /* CL_MEM_OBJECT_ALLOCATION_FAILURE */ ||
          code == -6 /* CL_OUT_OF_HOST_MEMORY */)
        return CLTRAIN_ERR_NOMEM;
      return CLTRAIN_ERR_DEVICE;
  }
}

int api_fail_err(void *h, const char *fn, const clt_err *e) {
  return api_fail(h, fn, api_status(e->code), "%s", e->msg);
}

/* ---- options ------------------------------------------------------------------ */

static int known_name(const char *const *known, const char *name) {
  for (int i = 0; known && known[i]; i++)
    if (strcmp(known[i], name) == 0) return 1;
  return 0;
}

int api_opts_parse(void *h, const char *fn, const char *text, const char *const *known,
                   api_opts *o) {
  memset(o, 0, sizeof *o);
  if (!text) return CLTRAIN_OK;
  if (strlen(text) >= sizeof o->buf)
    return api_fail(h, fn, CLTRAIN_ERR_ARG, "options: longer than %zu characters",
                    sizeof o->buf - 1);
  char *w = o->buf;
  const char *p = text;
  for (;;) {
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    if (!*p) break;
    if (o->n == API_MAX_OPTS)
      return api_fail(h, fn, CLTRAIN_ERR_ARG, "options: more than %d", API_MAX_OPTS);
    o->name[o->n] = w;
    while (*p && *p != '=' && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') *w++ = *p++;
    *w++ = '\0';
    if (*p != '=')
      return api_fail(h, fn, CLTRAIN_ERR_ARG, "options: '%s' is not name=value", o->name[o->n]);
    p++;
    o->value[o->n] = w;
    if (*p == '"') {
      for (p++; *p && *p != '"'; p++) *w++ = *p;
      if (*p != '"')
        return api_fail(h, fn, CLTRAIN_ERR_ARG, "options: %s: unterminated quote", o->name[o->n]);
      p++;
    } else {
      while (*p && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') *w++ = *p++;
    }
    *w++ = '\0';
    if (!known_name(known, o->name[o->n])) {
      char list[512] = "";
      for (int i = 0; known && known[i]; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", known[i]);
      }
      return api_fail(h, fn, CLTRAIN_ERR_ARG, "unknown option '%s' (known: %s)", o->name[o->n],
                      list[0] ? list : "none");
    }
    for (int i = 0; i < o->n; i++)
      if (strcmp(o->name[i], o->name[o->n]) == 0)
        return api_fail(h, fn, CLTRAIN_ERR_ARG, "option '%s' given twice", o->name[i]);
    o->n++;
  }
  return CLTRAIN_OK;
}

const char *api_opt(const api_opts *o, const char *name) {
  for (int i = 0; i < o->n; i++)
    if (strcmp(o->name[i], name) == 0) return o->value[i];
  return NULL;
}

int api_opt_long(void *h, const char *fn, const api_opts *o, const char *name, long min, long max,
                 long *out) {
  const char *v = api_opt(o, name);
  if (!v) return CLTRAIN_OK;
  char *end = NULL;
  errno = 0;
  const long x = strtol(v, &end, 10);
  if (!*v || *end || errno || x < min || x > max)
    return api_fail(h, fn, CLTRAIN_ERR_ARG, "option %s=%s: expected an integer in [%ld, %ld]", name,
                    v, min, max);
  *out = x;
  return CLTRAIN_OK;
}

int api_opt_double(void *h, const char *fn, const api_opts *o, const char *name, double min,
                   double max, double *out) {
  const char *v = api_opt(o, name);
  if (!v) return CLTRAIN_OK;
  char *end = NULL;
  errno = 0;
  const double x = strtod(v, &end);
  if (!*v || *end || errno || !(x >= min && x <= max))
    return api_fail(h, fn, CLTRAIN_ERR_ARG, "option %s=%s: expected a number in [%g, %g]", name, v,
                    min, max);
  *out = x;
  return CLTRAIN_OK;
}
