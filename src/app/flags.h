/* cltrain's commands and their flags, one table each (flags.c): the single
 * source of parsing, defaults, --help, docs/flags.md and the man page. */
#ifndef CLT_FLAGS_H
#define CLT_FLAGS_H

#include "cli.h"

/* The options of the commands that have no struct elsewhere (train and eval:
 * train.h). */
typedef struct clt_export_opts {
  const char *checkpoint; /* folder or .npz */
  const char *onnx;       /* the file to write */
  int verbose;            /* list the graph's nodes */
  int checkpoint_given;   /* --checkpoint was given (not the default) */
  int best;               /* --best: the folder's best checkpoint */
} clt_export_opts;

typedef struct clt_plot_opts {
  const char *log;    /* the training log (the one argument that is not a flag) */
  const char *output; /* the SVG file */
} clt_plot_opts;

typedef struct clt_bench_opts {
  const char *devices;
  const char *floats; /* buffer sizes "N,..."; NULL: the reference models' */
  int repeat, warmup;
} clt_bench_opts;

typedef struct clt_tune_opts {
  const char *model, *devices, *tune_file;
  int image_size, image_size_given, batch, classes, classes_given;
  double budget;
} clt_tune_opts;

extern const clt_command clt_cmd_devices, clt_cmd_train, clt_cmd_eval, clt_cmd_predict,
    clt_cmd_export, clt_cmd_plot, clt_cmd_bench_allreduce, clt_cmd_tune;

/* Every command, in `cltrain --help`'s order; NULL-ended. */
extern const clt_command *const clt_commands[];

/* cltrain as a whole: its one-line summary, and what `cltrain --help` says after
 * the commands (as clt_command.text). */
extern const char clt_cltrain_summary[];
extern const char clt_cltrain_text[];

/* A term and what it means, for the docs' and man page's lists. */
typedef struct clt_doc_item {
  const char *name, *text;
} clt_doc_item;

/* The environment variables users set for cltrain; NULL-ended. */
extern const clt_doc_item clt_env_vars[];

/* The exit statuses ("0", "128+N") and their meaning; NULL-ended. */
extern const clt_doc_item clt_exit_statuses[];

#endif
