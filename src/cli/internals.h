/* What bench and plot, the commands on cltrain's internals (commands.h), share:
 * starting from the flag tables, joining an MPI run and ending it. */
#ifndef CLT_CLI_INTERNALS_H
#define CLT_CLI_INTERNALS_H

#include "cli.h"
#include "cluster.h"
#include "status.h"

/* A command's start: sets opts' defaults, parses argv into it and prints --help
 * when asked. Returns -1 when the command goes on, else its exit status: 0 after
 * --help, 1 after an error (printed). */
int clt_cli_start(const clt_command *c, int argc, char **argv, void *opts);

/* Joins the run this process was started in (clt_cluster_join), printing the
 * error, or the cluster's note on stderr. */
int clt_cli_join(clt_cluster **c, clt_err *e);

/* A command's end: prints e's message when status fails (under MPI naming this
 * process), then leaves the cluster (c may be NULL), which ends the whole run on a
 * failure the other processes have not agreed on. Returns the exit status: 1 on
 * failure. */
int clt_cli_finish(clt_cluster *c, int status, const clt_err *e);

#endif
