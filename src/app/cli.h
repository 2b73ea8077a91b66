/* Command-line flags: a table per command, "--name value" or "--name=value". */
#ifndef CLT_CLI_H
#define CLT_CLI_H

#include <stdint.h>

#include "cluster.h"
#include "status.h"

/* CLT_FLAG_BOOL takes no value: its presence sets the int target to 1. */
typedef enum {
  CLT_FLAG_INT,
  CLT_FLAG_LONG,
  CLT_FLAG_DOUBLE,
  CLT_FLAG_U64,
  CLT_FLAG_STRING,
  CLT_FLAG_BOOL
} clt_flag_type;

typedef struct clt_flag {
  const char *name; /* without the leading "--" */
  clt_flag_type type;
  void *target;
  double min, max; /* inclusive range for numbers */
  int *seen;       /* optional: set to 1 when given */
} clt_flag;

/* Parses argv[0..argc) against flags. "--help"/"-h" sets *help. Errors name the
 * command and the flag: "cltrain train: --epochs: expected an integer in [1, 1000000], got 'x'". */
int clt_cli_parse(const char *command, int argc, char **argv, const clt_flag *flags, int nflags,
                  int *help, clt_err *e);

/* Joins the run this process was started in (clt_cluster_join), printing the
 * error, or the cluster's note on stderr. */
int clt_cli_join(clt_cluster **c, clt_err *e);

/* A command's end: prints e's message when status fails (under MPI naming this
 * process), then leaves the cluster (c may be NULL), which ends the whole run on a
 * failure the other processes have not agreed on. Returns the exit status: 1 on
 * failure; 128 + the signal after a stop by a signal (CLT_ERR_STOPPED, whose
 * message says where progress was saved). */
int clt_cli_finish(clt_cluster *c, int status, const clt_err *e);

#endif
