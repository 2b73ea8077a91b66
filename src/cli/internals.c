/* The cltrain command's parts on cltrain's internals (commands.h): the top-level
 * --help from the flag tables, `cltrain plot`, and what bench and plot share. */
#include "internals.h"

#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "flags.h"
#include "plot.h"

void cli_usage(FILE *f) {
  fprintf(f, "usage: cltrain <command> [options]\n\ncommands:\n");
  for (int i = 0; clt_commands[i]; i++) {
    const char *name = clt_commands[i]->name; /* "bench allreduce" is listed as bench */
    fprintf(f, "  %-9.*s %s\n", (int)strcspn(name, " "), name, clt_commands[i]->summary);
  }
  fputc('\n', f);
  clt_cli_print_text(f, clt_cltrain_text);
}

int cmd_plot(int argc, char **argv) {
  clt_plot_opts o = {0};
  int rc = clt_cli_start(&clt_cmd_plot, argc, argv, &o);
  if (rc >= 0) return rc;
  if (!o.log || !o.output) {
    fprintf(stderr, "cltrain: error: cltrain plot: expected LOG.jsonl -o FILE.svg\n");
    return 1;
  }
  clt_err e = {0};
  clt_plot_info info;
  if (clt_plot_log_info(o.log, o.output, &info, &e)) {
    fprintf(stderr, "cltrain: error: %s\n", e.msg);
    return 1;
  }
  printf("Wrote %s: %d epoch%s of %s\n", o.output, info.epochs, info.epochs == 1 ? "" : "s",
         info.model[0] ? info.model : "a model");
  return 0;
}

int clt_cli_start(const clt_command *c, int argc, char **argv, void *opts) {
  clt_err e = {0};
  int help = 0;
  clt_cli_defaults(c, opts);
  if (clt_cli_parse(c, argc, argv, opts, &help, &e)) {
    fprintf(stderr, "cltrain: error: %s\n", e.msg);
    return 1;
  }
  if (help) clt_cli_help(stdout, c);
  return help ? 0 : -1;
}

int clt_cli_join(clt_cluster **c, clt_err *e) {
  int status = clt_cluster_join(c, e);
  if (status) {
    fprintf(stderr, "cltrain: error: %s\n", e->msg);
    return status;
  }
  if (*clt_cluster_note(*c)) fprintf(stderr, "cltrain: note: %s\n", clt_cluster_note(*c));
  return CLT_OK;
}

int clt_cli_finish(clt_cluster *c, int status, const clt_err *e) {
  if (status && clt_cluster_size(c) > 1) {
    fprintf(stderr, "cltrain: error: rank %d of %d (%s): %s\n", clt_cluster_rank(c),
            clt_cluster_size(c), clt_cluster_host(c), e->msg);
  } else if (status) {
    fprintf(stderr, "cltrain: error: %s\n", e->msg);
  }
  fflush(stderr);
  clt_cluster_leave(c, status != 0);
  return status ? 1 : 0;
}
