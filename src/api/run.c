/* cltrain_options and the high-level calls (cltrain.h: the command's train, eval,
 * predict and export): the command's own code (src/app) run with the options of
 * its flag tables (flags.c), in the context's devices and MPI run. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_impl.h"
#include "checkpoint.h"
#include "cli.h"
#include "flags.h"
#include "onnx.h"
#include "predict.h"
#include "train.h"

typedef enum { RUN_TRAIN, RUN_EVAL, RUN_PREDICT, RUN_EXPORT, RUN_DEVICES } run_kind;

static const struct {
  const char *name;
  run_kind kind;
  const clt_command *cmd;
} commands[] = {{"train", RUN_TRAIN, &clt_cmd_train},
                {"eval", RUN_EVAL, &clt_cmd_eval},
                {"predict", RUN_PREDICT, &clt_cmd_predict},
                {"export", RUN_EXPORT, &clt_cmd_export},
                {"devices", RUN_DEVICES, &clt_cmd_devices}};

struct cltrain_options {
  api_handle h;
  run_kind kind;
  const clt_command *cmd;
  /* The command's options struct, at the offsets of its flag table. */
  union {
    clt_train_opts train;
    clt_eval_opts eval;
    clt_predict_opts predict;
    clt_export_opts export_;
  } u;
  /* What the options' strings point into: copies of the values set and the
   * arguments parsed, freed with the options. */
  void **owned;
  int nowned, owned_cap;
  /* predict's images (u.predict.paths points here). */
  char **paths;
  int npaths, paths_cap;
};

/* Grows *list (of *cap entries, elem bytes each) to hold n + 1. */
static int grow(void *list, int n, int *cap, size_t elem) {
  if (n < *cap) return 0;
  const int want = *cap ? 2 * *cap : 16;
  void *p = realloc(*(void **)list, (size_t)want * elem);
  if (!p) return -1;
  *(void **)list = p;
  *cap = want;
  return 0;
}

/* A copy of s kept until the options are freed; NULL when out of memory. */
static char *keep_string(cltrain_options *o, const char *s) {
  if (grow(&o->owned, o->nowned, &o->owned_cap, sizeof *o->owned)) return NULL;
  char *copy = strdup(s);
  if (copy) o->owned[o->nowned++] = copy;
  return copy;
}

static int add_path(cltrain_options *o, char *path) {
  if (grow(&o->paths, o->npaths, &o->paths_cap, sizeof *o->paths)) return -1;
  o->paths[o->npaths++] = path;
  return 0;
}

/* After clt_cli_parse, which points predict's list at its own argv: the paths it
 * found join those given before, and the list is the options' again. */
static int take_paths(cltrain_options *o, const char *fn) {
  /* A parse that failed early left the list as it was. */
  if (o->kind != RUN_PREDICT || o->u.predict.paths == o->paths) return CLTRAIN_OK;
  int status = CLTRAIN_OK;
  for (int i = 0; i < o->u.predict.npaths && !status; i++)
    if (add_path(o, o->u.predict.paths[i]))
      status = api_fail(o, fn, CLTRAIN_ERR_NOMEM, "out of host memory");
  o->u.predict.paths = o->paths;
  o->u.predict.npaths = o->npaths;
  return status;
}

CLTRAIN_API int cltrain_options_create(const char *command, cltrain_options **out) {
  if (!out) return api_fail(NULL, __func__, CLTRAIN_ERR_ARG, "out is NULL");
  *out = NULL;
  int k = -1;
  for (int i = 0; command && i < (int)(sizeof commands / sizeof commands[0]); i++)
    if (strcmp(commands[i].name, command) == 0) k = i;
  if (k < 0)
    return api_fail(NULL, __func__, CLTRAIN_ERR_ARG,
                    "command %s%s%s: expected train, eval, predict, export or devices",
                    command ? "'" : "", command ? command : "NULL", command ? "'" : "");
  cltrain_options *o = calloc(1, sizeof *o);
  if (!o) return api_fail(NULL, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  o->h.kind = API_OPTIONS;
  o->kind = commands[k].kind;
  o->cmd = commands[k].cmd;
  clt_cli_defaults(o->cmd, &o->u);
  *out = o;
  return CLTRAIN_OK;
}

CLTRAIN_API void cltrain_options_free(cltrain_options **o) {
  if (!o || !*o || (*o)->h.kind != API_OPTIONS) return;
  cltrain_options *p = *o;
  for (int i = 0; i < p->nowned; i++) free(p->owned[i]);
  free(p->owned);
  free(p->paths);
  p->h.kind = API_FREED;
  free(p);
  *o = NULL;
}

CLTRAIN_API int cltrain_options_set(cltrain_options *o, const char *name, const char *value) {
  int status = api_check(o, API_OPTIONS, __func__);
  if (status) return status;
  if (!name) return api_fail(o, __func__, CLTRAIN_ERR_ARG, "the name is NULL");
  if (o->kind == RUN_PREDICT && strcmp(name, "path") == 0) {
    if (!value || !*value)
      return api_fail(o, __func__, CLTRAIN_ERR_ARG, "cltrain predict: path: empty value");
    char *copy = keep_string(o, value);
    if (!copy || add_path(o, copy))
      return api_fail(o, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
    o->u.predict.paths = o->paths;
    o->u.predict.npaths = o->npaths;
    return CLTRAIN_OK;
  }
  const clt_flag *f = NULL;
  for (int i = 0; i < o->cmd->nflags; i++)
    if (strcmp(o->cmd->flags[i].name, name) == 0) f = &o->cmd->flags[i];
  if (!f)
    return api_fail(o, __func__, CLTRAIN_ERR_ARG, "cltrain %s: unknown option '%s' (docs/flags.md)",
                    o->cmd->name, name);
  char flag[80];
  snprintf(flag, sizeof flag, "--%s", f->name);
  if (f->type == CLT_FLAG_BOOL && value &&
      (strcmp(value, "0") == 0 || strcmp(value, "false") == 0)) {
    *(int *)((char *)&o->u + f->offset) = 0;
    return CLTRAIN_OK;
  }
  if (f->type == CLT_FLAG_BOOL && value && strcmp(value, "1") != 0 && strcmp(value, "true") != 0)
    return api_fail(o, __func__, CLTRAIN_ERR_ARG,
                    "cltrain %s: --%s is a switch: expected NULL, 1, true, 0 or false, got '%s'",
                    o->cmd->name, f->name, value);
  if (f->type != CLT_FLAG_BOOL && !value)
    return api_fail(o, __func__, CLTRAIN_ERR_ARG, "cltrain %s: --%s needs a value", o->cmd->name,
                    f->name);
  char *args[2] = {flag, NULL};
  if (f->type != CLT_FLAG_BOOL && !(args[1] = keep_string(o, value)))
    return api_fail(o, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  clt_err e = {0};
  int help = 0;
  status = clt_cli_parse(o->cmd, f->type == CLT_FLAG_BOOL ? 1 : 2, args, &o->u, &help, &e);
  const int paths = take_paths(o, __func__);
  if (status) return api_fail_err(o, __func__, &e);
  return paths;
}

CLTRAIN_API int cltrain_options_parse(cltrain_options *o, int argc, char **argv, FILE *out) {
  int status = api_check(o, API_OPTIONS, __func__);
  if (status) return status;
  if (argc < 0 || (argc > 0 && !argv))
    return api_fail(o, __func__, CLTRAIN_ERR_ARG, "argc %d with argv %s", argc,
                    argv ? "given" : "NULL");
  /* The options keep pointers into the arguments (and the list reuses their
   * slots): parse a copy that lives as long as they do. */
  char **args = NULL;
  if (!grow(&o->owned, o->nowned, &o->owned_cap, sizeof *o->owned))
    args = calloc((size_t)argc + 1, sizeof *args);
  if (args) o->owned[o->nowned++] = args;
  for (int i = 0; args && i < argc; i++)
    if (!argv[i] || !(args[i] = keep_string(o, argv[i]))) args = NULL;
  if (!args) {
    for (int i = 0; i < argc; i++)
      if (!argv[i]) return api_fail(o, __func__, CLTRAIN_ERR_ARG, "argv[%d] is NULL", i);
    return api_fail(o, __func__, CLTRAIN_ERR_NOMEM, "out of host memory");
  }
  clt_err e = {0};
  int help = 0;
  status = clt_cli_parse(o->cmd, argc, args, &o->u, &help, &e);
  const int paths = take_paths(o, __func__);
  if (status) return api_fail_err(o, __func__, &e);
  if (paths) return paths;
  if (!help) return CLTRAIN_OK;
  if (out) clt_cli_help(out, o->cmd);
  return -1;
}

/* ---- the high-level calls ---------------------------------------------------- */

/* Checks a call's handles: a live context, and options for `want`. */
static int run_check(const cltrain_ctx *ctx, cltrain_options *o, run_kind want, const char *fn) {
  int status = api_check(ctx, API_CTX, fn);
  if (!status) status = api_check(o, API_OPTIONS, fn);
  if (status) return status;
  if (o->kind != want) {
    const char *names[] = {"train", "eval", "predict", "export", "devices"};
    return api_fail(o, fn, CLTRAIN_ERR_ARG, "options for cltrain %s, not %s", names[o->kind],
                    names[want]);
  }
  return CLTRAIN_OK;
}

/* A failed run's message, on the options and the context alike. */
static int run_fail(cltrain_ctx *ctx, cltrain_options *o, const char *fn, const clt_err *e) {
  const int status = api_fail_err(o, fn, e);
  memcpy(ctx->h.msg, o->h.msg, sizeof ctx->h.msg);
  return status;
}

/* Where a call prints: out, or (NULL) nowhere. */
static FILE *sink_of(FILE *out, clt_err *e) {
  if (out) return out;
  FILE *f = fopen("/dev/null", "w");
  if (!f) clt_fail(e, CLT_ERR_IO, "/dev/null: cannot open: %s", strerror(errno));
  return f;
}

static void sink_close(FILE *sink, FILE *out) {
  if (sink && sink != out) fclose(sink);
}

CLTRAIN_API int cltrain_fit(cltrain_ctx *ctx, cltrain_options *o, FILE *out) {
  int status = run_check(ctx, o, RUN_TRAIN, __func__);
  if (status) return status;
  clt_train_opts t = o->u.train;
  clt_err e = {0};
  if (t.trace_steps_given && !t.trace_path) {
    status = clt_fail(&e, CLT_ERR_ARG, "--trace-steps applies to --trace FILE.json");
  } else if (t.tensorboard_every_given && !t.tensorboard_dir) {
    status = clt_fail(&e, CLT_ERR_ARG, "--tensorboard-every applies to --tensorboard DIR");
  } else if (!(t.out = sink_of(out, &e))) {
    status = CLT_ERR_IO;
  } else {
    t.progress = out && isatty(fileno(out));
    t.verbose = t.verbose || ctx->verbose;
    t.cluster = ctx->cluster;
    status = clt_train(&t, &e);
    if (status && t.progress) fputc('\n', out);
    sink_close(t.out, out);
  }
  return status ? run_fail(ctx, o, __func__, &e) : CLTRAIN_OK;
}

CLTRAIN_API int cltrain_evaluate(cltrain_ctx *ctx, cltrain_options *o, FILE *out) {
  int status = run_check(ctx, o, RUN_EVAL, __func__);
  if (status) return status;
  clt_eval_opts v = o->u.eval;
  clt_err e = {0};
  status = clt_cli_check_required(&clt_cmd_eval, &v, &e);
  if (!status && !(v.out = sink_of(out, &e))) status = CLT_ERR_IO;
  if (!status) {
    v.verbose = v.verbose || ctx->verbose;
    v.cluster = ctx->cluster;
    status = clt_eval(&v, &e);
    sink_close(v.out, out);
  }
  return status ? run_fail(ctx, o, __func__, &e) : CLTRAIN_OK;
}

CLTRAIN_API int cltrain_predict(cltrain_ctx *ctx, cltrain_options *o, FILE *out, int *skipped) {
  int none = 0;
  if (!skipped) skipped = &none;
  *skipped = 0;
  int status = run_check(ctx, o, RUN_PREDICT, __func__);
  if (status) return status;
  clt_predict_opts p = o->u.predict;
  clt_err e = {0};
  if (!(p.out = sink_of(out, &e))) status = CLT_ERR_IO;
  if (!status) {
    status = clt_predict(&p, skipped, &e);
    sink_close(p.out, out);
  }
  return status ? run_fail(ctx, o, __func__, &e) : CLTRAIN_OK;
}

/* `cltrain export`: the checkpoint's model and weights as ONNX, with its class
 * names and the training's image size and crops in the metadata. */
static int export_onnx(const clt_export_opts *x, int rank, FILE *out, clt_err *e) {
  clt_model *model = calloc(1, sizeof *model); /* large: not on the stack */
  clt_checkpoint state = {0};
  char path[4096];
  size_t bytes = 0;
  int status = model ? CLT_OK : clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  if (!status)
    status = clt_cli_checkpoint(x->checkpoint, x->checkpoint_given, x->best, rank, path,
                                sizeof path, e);
  if (!status) status = clt_checkpoint_model(path, model, e);
  if (!status) status = clt_checkpoint_load(path, model, 0, &state, e);
  if (!status) {
    clt_onnx_info info = clt_class_names(model, &state);
    info.augment = state.data.augment; /* the training's, and the size it cropped from */
    info.decoded_size = state.data.image_size;
    status = clt_onnx_export_log(model, state.params, &info, x->onnx, x->verbose ? out : NULL,
                                 &bytes, e);
  }
  if (!status) {
    fprintf(out, "Exported %s (%zu parameters, epoch %lld) from %s to %s: %.1f MiB\n", model->name,
            model->param_count, (long long)state.epoch, path, x->onnx, bytes / 1048576.0);
  }
  clt_checkpoint_free(&state);
  if (model) clt_model_free(model);
  free(model);
  return status;
}

CLTRAIN_API int cltrain_export(cltrain_ctx *ctx, cltrain_options *o, FILE *out) {
  int status = run_check(ctx, o, RUN_EXPORT, __func__);
  if (status) return status;
  clt_err e = {0};
  FILE *sink = NULL;
  status = clt_cli_check_required(&clt_cmd_export, &o->u.export_, &e);
  if (!status && !(sink = sink_of(out, &e))) status = CLT_ERR_IO;
  if (!status) {
    status = export_onnx(&o->u.export_, clt_cluster_rank(ctx->cluster), sink, &e);
    sink_close(sink, out);
  }
  return status ? run_fail(ctx, o, __func__, &e) : CLTRAIN_OK;
}
