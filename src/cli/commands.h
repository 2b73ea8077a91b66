/* The parts of the cltrain command that main.c calls but that are built on
 * cltrain's internals rather than on the public API (cltrain.h): `cltrain bench`
 * (the ring all-reduce and MPI themselves: bench.c), `cltrain plot` (a training
 * log drawn, no training: plot*.c, internals.c), `cltrain tune` (the tuner on
 * each device's replica: tune.c) and the top-level --help, which
 * lists every command from the flag tables (internals.c). The commands that list
 * devices, train, evaluate, predict and export are main.c's, on the public API
 * alone (tests/test_cli_headers.sh checks the includes). */
#ifndef CLT_CLI_COMMANDS_H
#define CLT_CLI_COMMANDS_H

#include <stdio.h>

/* `cltrain bench ...` and `cltrain plot ...` (argv: the words after the command's
 * name); each returns its exit status. */
int cmd_bench(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_tune(int argc, char **argv);

/* `cltrain --help`: the commands and their one-line summaries. */
void cli_usage(FILE *f);

#endif
