/* `cltrain plot`: one self-contained SVG picture of a training log, four panels
 * over the epochs (loss, accuracy, training images/s, each replica's share of the
 * examples). Needs no OpenCL device; the same log always gives the same bytes. */
#ifndef CLT_PLOT_H
#define CLT_PLOT_H

#include "status.h"

/* Reads a `cltrain train --log` file (JSON Lines, one object per epoch) and writes
 * one SVG picture of it to out_path (atomically: temp file + rename; an existing
 * file is replaced only on success). */
int clt_plot_log(const char *log_path, const char *out_path, clt_err *e);

/* What a plot drew, for the command's "Wrote FILE.svg: N epochs of MODEL". */
typedef struct clt_plot_info {
  int epochs;      /* distinct epochs (a resumed log's repeated epoch counts once) */
  char model[128]; /* "model" of the last epoch's record; "" where the log names none */
} clt_plot_info;

/* clt_plot_log, also filling *info (may be NULL) on success. */
int clt_plot_log_info(const char *log_path, const char *out_path, clt_plot_info *info, clt_err *e);

#endif
