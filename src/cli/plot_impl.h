/* What the two parts of `cltrain plot` share: plot_log.c reads the log into
 * records, plot.c draws them. plot.h is the interface. */
#ifndef CLT_PLOT_IMPL_H
#define CLT_PLOT_IMPL_H

#include <stddef.h>

#include "status.h"

#define NAME_BYTES 128 /* model and device names kept (longer ones are cut) */

typedef struct rep_value {
  int rank; /* -1: a log of one process (no "rank") */
  int index;
  double share; /* percent; NAN: not given */
  char name[NAME_BYTES];
} rep_value;

typedef struct record {
  long line; /* of two records of an epoch, the later line wins */
  int epoch;
  double train_loss, train_acc, test_loss, test_acc, ips; /* NAN: absent or null */
  int processes;
  int nreps;
  rep_value *reps;
  char model[NAME_BYTES];
} record;

typedef struct log_data {
  record *recs;
  int n, cap;
  int replaced; /* records dropped for a later one of the same epoch */
} log_data;

/* Reads the log at path into *d: one record per epoch (the last one logged of
 * each, a --resume repeating epochs), sorted by epoch; at least one. On failure
 * *d holds what was read so far, freed by clt_plot_free_log either way. */
int clt_plot_read_log(const char *path, log_data *d, clt_err *e);
void clt_plot_free_log(log_data *d);
/* Copies src into dst[size], cut at a character boundary of UTF-8 text. */
void clt_plot_copy_name(char *dst, size_t size, const char *src);

#endif
