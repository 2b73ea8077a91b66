#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>
#include "checkpoint.h"

/* --help's layout: lines up to WIDTH columns, each flag's text from COLUMN. */
enum { WIDTH = 80, COLUMN = 26 };

static void *field(void *opts, size_t offset) { return (char *)opts + offset; }

void clt_cli_range(const clt_flag *f, char *buf, size_t size) {
  switch (f->type) {
    case CLT_FLAG_INT:
    case CLT_FLAG_LONG:
      snprintf(buf, size, "an integer in [%.0f, %.0f]", f->min, f->max);
      break;
    case CLT_FLAG_DOUBLE:
      snprintf(buf, size, "a number in [%g, %g]", f->min, f->max);
      break;
    case CLT_FLAG_U64:
      snprintf(buf, size, "a non-negative integer");
      break;
    default:
      snprintf(buf, size, "%s", "");
  }
}

void clt_cli_default(const clt_flag *f, char *buf, size_t size) {
  if (f->shown) snprintf(buf, size, "%s", f->shown);
  else if (f->type == CLT_FLAG_STRING) snprintf(buf, size, "%s", f->def_str ? f->def_str : "");
  else if (f->type == CLT_FLAG_BOOL) snprintf(buf, size, "%s", "");
  else if (f->type == CLT_FLAG_DOUBLE) snprintf(buf, size, "%g", f->def);
  else snprintf(buf, size, "%.0f", f->def);
}

void clt_cli_flag_help(const clt_flag *f, char *buf, size_t size) {
  const char *at = f->insert ? strstr(f->help, "%s") : NULL;
  if (!at) {
    snprintf(buf, size, "%s", f->help);
    return;
  }
  snprintf(buf, size, "%.*s%s%s", (int)(at - f->help), f->help, *f->insert, at + 2);
}

void clt_cli_defaults(const clt_command *c, void *opts) {
  for (int i = 0; i < c->nflags; i++) {
    const clt_flag *f = &c->flags[i];
    void *p = field(opts, f->offset);
    switch (f->type) {
      case CLT_FLAG_INT:
      case CLT_FLAG_BOOL:
        *(int *)p = (int)f->def;
        break;
      case CLT_FLAG_LONG:
        *(long *)p = (long)f->def;
        break;
      case CLT_FLAG_DOUBLE:
        *(double *)p = f->def;
        break;
      case CLT_FLAG_U64:
        *(uint64_t *)p = (uint64_t)f->def;
        break;
      case CLT_FLAG_STRING:
        *(const char **)p = f->def_str;
        break;
    }
  }
}

static int parse_value(const char *who, const clt_flag *f, const char *v, void *opts, clt_err *e) {
  void *target = field(opts, f->offset);
  char range[64];
  char *end = NULL;
  errno = 0;
  switch (f->type) {
    case CLT_FLAG_STRING:
      if (!*v) return clt_fail(e, CLT_ERR_ARG, "%s: --%s: empty value", who, f->name);
      *(const char **)target = v;
      return CLT_OK;
    case CLT_FLAG_DOUBLE: {
      double d = strtod(v, &end);
      if (!*v || *end || errno || !isfinite(d) || d < f->min || d > f->max) goto bad;
      *(double *)target = d;
      return CLT_OK;
    }
    default: {
      if (*v == '-' && f->min >= 0) goto bad; /* strtoull would wrap "-1" */
      long long x = f->type == CLT_FLAG_U64 ? (long long)strtoull(v, &end, 10)
                                            : strtoll(v, &end, 10);
      if (!*v || *end || errno) goto bad;
      if (f->type != CLT_FLAG_U64 && ((double)x < f->min || (double)x > f->max)) goto bad;
      if (f->type == CLT_FLAG_INT) *(int *)target = (int)x;
      else if (f->type == CLT_FLAG_LONG) *(long *)target = (long)x;
      else *(uint64_t *)target = strtoull(v, NULL, 10);
      return CLT_OK;
    }
  }
bad:
  clt_cli_range(f, range, sizeof range);
  return clt_fail(e, CLT_ERR_ARG, "%s: --%s: expected %s, got '%s'", who, f->name, range, v);
}

/* The flag arg names: "--name", "--name=value" or "-alias"; NULL if none. */
static const clt_flag *find_flag(const clt_command *c, const char *arg, size_t *len) {
  if (strncmp(arg, "--", 2) == 0) {
    const char *name = arg + 2, *eq = strchr(name, '=');
    *len = eq ? (size_t)(eq - name) : strlen(name);
    for (int j = 0; j < c->nflags; j++) {
      const char *n = c->flags[j].name;
      if (strlen(n) == *len && strncmp(n, name, *len) == 0) return &c->flags[j];
    }
    return NULL;
  }
  for (int j = 0; j < c->nflags && arg[0] == '-'; j++) {
    if (c->flags[j].alias && strcmp(c->flags[j].alias, arg + 1) == 0) return &c->flags[j];
  }
  return NULL;
}

int clt_cli_parse(const clt_command *c, int argc, char **argv, void *opts, int *help, clt_err *e) {
  char who[64];
  snprintf(who, sizeof who, "cltrain %s", c->name);
  int positional_taken = 0;
  *help = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      *help = 1;
      continue;
    }
    size_t len = 0;
    const clt_flag *f = find_flag(c, arg, &len);
    if (!f && strncmp(arg, "--", 2) == 0) {
      return clt_fail(e, CLT_ERR_ARG, "%s: unknown option --%.*s (see %s --help)", who, (int)len,
                      arg + 2, who);
    }
    if (!f) {
      if (c->positional && (c->positional_count || !positional_taken) && arg[0] != '-') {
        /* The list reuses slots already read: positional_taken <= i. */
        if (c->positional_count) argv[positional_taken] = argv[i];
        else *(const char **)field(opts, c->positional_offset) = arg;
        positional_taken++;
        continue;
      }
      return clt_fail(e, CLT_ERR_ARG, "%s: unexpected argument '%s' (see %s --help)", who, arg,
                      who);
    }
    const char *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
    if (f->type == CLT_FLAG_BOOL) {
      if (eq) return clt_fail(e, CLT_ERR_ARG, "%s: --%s takes no value", who, f->name);
      *(int *)field(opts, f->offset) = 1;
      if (f->seen) *(int *)field(opts, f->seen - 1) = 1;
      continue;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!value) {
      if (i + 1 >= argc) return clt_fail(e, CLT_ERR_ARG, "%s: %s needs a value", who, arg);
      value = argv[++i];
    }
    int status = parse_value(who, f, value, opts, e);
    if (status) return status;
    if (f->seen) *(int *)field(opts, f->seen - 1) = 1;
  }
  if (c->positional_count) {
    *(char ***)field(opts, c->positional_offset) = argv;
    *(int *)field(opts, c->positional_count - 1) = positional_taken;
  }
  return CLT_OK;
}

int clt_cli_check_required(const clt_command *c, const void *opts, clt_err *e) {
  char names[512] = "";
  int missing = 0, count = 0, total = 0;
  for (int i = 0; i < c->nflags; i++) total += c->flags[i].required;
  for (int i = 0; i < c->nflags; i++) {
    const clt_flag *f = &c->flags[i];
    if (!f->required) continue;
    if (!*(const char *const *)((const char *)opts + f->offset)) missing = 1;
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s--%s %s",
             count == 0 ? "" : (count == total - 1 ? " and " : ", "), f->name, f->meta);
    count++;
  }
  if (!missing) return CLT_OK;
  return clt_fail(e, CLT_ERR_ARG, "cltrain %s: %s %s required", c->name, names,
                  total > 1 ? "are" : "is");
}

/* Writes the words of s[0..n) from column col, breaking lines before WIDTH and
 * starting each new one at column indent, and ends the line. */
static void wrap(FILE *f, const char *s, size_t n, int col, int indent) {
  const char *end = s + n;
  for (int first = 1; s < end; first = 0) {
    while (s < end && *s == ' ') s++;
    int len = 0;
    while (s + len < end && s[len] != ' ') len++;
    if (!len) break;
    if (!first && col + 1 + len > WIDTH) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (!first) {
      fputc(' ', f);
      col++;
    }
    fprintf(f, "%.*s", len, s);
    col += len;
    s += len;
  }
  fputc('\n', f);
}

void clt_cli_print_text(FILE *f, const char *text) {
  while (*text) {
    size_t len = strcspn(text, "\n");
    if (len == 0 || strncmp(text, "  ", 2) == 0) fprintf(f, "%.*s\n", (int)len, text);
    else wrap(f, text, len, 0, 0);
    text += len + (text[len] == '\n');
  }
}

void clt_cli_help(FILE *f, const clt_command *c) {
  fprintf(f, "usage: %s\n", c->usage);
  if (c->text && *c->text) {
    fputc('\n', f);
    clt_cli_print_text(f, c->text);
  }
  if (c->nflags) fprintf(f, "\noptions:\n");
  for (int i = 0; i < c->nflags; i++) {
    const clt_flag *fl = &c->flags[i];
    char left[128], text[2048], def[512];
    int n = snprintf(left, sizeof left, "  %s%s%s--%s%s%s", fl->alias ? "-" : "",
                     fl->alias ? fl->alias : "", fl->alias ? ", " : "", fl->name,
                     fl->meta ? " " : "", fl->meta ? fl->meta : "");
    clt_cli_flag_help(fl, text, sizeof text);
    clt_cli_default(fl, def, sizeof def);
    if (*def) {
      size_t used = strlen(text);
      snprintf(text + used, sizeof text - used, " [%s]", def);
    }
    fprintf(f, "%s%*s", left, n + 2 > COLUMN ? 2 : COLUMN - n, "");
    wrap(f, text, strlen(text), n + 2 > COLUMN ? n + 2 : COLUMN, COLUMN);
  }
}

int clt_cli_checkpoint(const char *checkpoint, int given, int best, int rank, char *path,
                       size_t size, clt_err *e) {
  int chosen_best = 0;
  const int status = clt_checkpoint_resolve_model(checkpoint, best, path, size, &chosen_best, e);
  if (status && !given && access(checkpoint, F_OK) != 0) {
    return clt_fail(e, CLT_ERR_IO,
                    "%s: no such checkpoint folder (the default --checkpoint, where cltrain "
                    "train saves; give --checkpoint DIR|FILE)",
                    checkpoint);
  }
  if (!status && chosen_best && !best && rank == 0) {
    fprintf(stderr,
            "cltrain: note: %s: its run ended restoring its best epoch's weights "
            "(--early-stopping restore_best_weights=true): using the best checkpoint, %s\n",
            checkpoint, path);
  }
  return status;
}
