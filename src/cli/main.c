/* cltrain: train convolutional networks on every OpenCL device of a host.
 *
 * devices, train, eval, predict and export are built on the public API alone
 * (cltrain.h, as any program using libcltrain); bench, plot, tune and the top-level
 * --help are on cltrain's internals (commands.h says why). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cltrain.h"
#include "commands.h"

/* A failed call's message as the command prints it: without the name of the
 * function that the API puts first ("cltrain_fit: "). */
static const char *cause(const char *fn) {
  const char *msg = cltrain_errmsg(NULL);
  const size_t n = strlen(fn);
  if (strncmp(msg, fn, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') return msg + n + 2;
  return msg;
}

static int report(const char *fn) {
  fprintf(stderr, "cltrain: error: %s\n", cause(fn));
  return 1;
}

/* The options of command `name` parsed from argv into *o. Returns -1 when the
 * command goes on, else its exit status: 0 after --help, 1 after an error. */
static int start(const char *name, int argc, char **argv, cltrain_options **o) {
  if (cltrain_options_create(name, o)) return report("cltrain_options_create");
  const int status = cltrain_options_parse(*o, argc, argv, stdout);
  if (status == 0) return -1;
  cltrain_options_free(o);
  return status < 0 ? 0 : report("cltrain_options_parse");
}

/* A command's end: its error (under MPI naming this process) or, after a stop by
 * a signal, where progress was saved; then the context is closed, or on a failure
 * the other processes have not agreed on, the whole run ended (cltrain_abort).
 * Returns the exit status: 1 on failure, 128 + the signal after a stop. */
static int finish(cltrain_ctx **ctx, int status, const char *fn) {
  if (status == CLTRAIN_ERR_STOPPED) {
    /* Every process stopped at the same step (agreed) and process 0 saved: a
     * clean end, with the shell's code for the signal (130 for SIGINT). */
    if (cltrain_rank(*ctx) == 0) fprintf(stderr, "cltrain: %s\n", cause(fn));
    fflush(stderr);
    cltrain_close(ctx);
    return 128 + (cltrain_stop_signal() ? cltrain_stop_signal() : SIGINT);
  }
  if (status && cltrain_processes(*ctx) > 1) {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    fprintf(stderr, "cltrain: error: rank %d of %d (%s): %s\n", cltrain_rank(*ctx),
            cltrain_processes(*ctx), host, cause(fn));
  } else if (status) {
    fprintf(stderr, "cltrain: error: %s\n", cause(fn));
  }
  fflush(stderr);
  if (status) cltrain_abort(ctx);
  else cltrain_close(ctx);
  return status ? 1 : 0;
}

static int cmd_devices(int argc, char **argv) {
  cltrain_options *o = NULL;
  int rc = start("devices", argc, argv, &o);
  if (rc >= 0) return rc;
  cltrain_options_free(&o);
  cltrain_ctx *ctx = NULL;
  if (cltrain_open(NULL, &ctx)) return report("cltrain_open");
  const int n = cltrain_device_count(ctx);
  if (n == 0) {
    fprintf(
        stderr,
        "cltrain: error: no OpenCL device found (is an ICD such as pocl-opencl-icd installed?)\n");
    cltrain_close(&ctx);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    char type[16];
    snprintf(type, sizeof type, "%s", cltrain_device_type(ctx, i));
    for (char *c = type; *c; c++) *c = (char)toupper((unsigned char)*c);
    const unsigned units = cltrain_device_compute_units(ctx, i);
    printf("%d  %-11s  %s  %s  %u compute unit%s  %.1f GiB\n", i, type,
           cltrain_device_platform(ctx, i), cltrain_device_name(ctx, i), units,
           units == 1 ? "" : "s", cltrain_device_memory(ctx, i) / (1024.0 * 1024.0 * 1024.0));
  }
  cltrain_close(&ctx);
  return 0;
}

static int cmd_train(int argc, char **argv) {
  cltrain_options *o = NULL;
  int rc = start("train", argc, argv, &o);
  if (rc >= 0) return rc;
  /* Ctrl-C: finish the step, save, exit 130 (before MPI's and the devices' threads). */
  cltrain_handle_signals();
  cltrain_ctx *ctx = NULL;
  if (cltrain_open(NULL, &ctx)) {
    cltrain_options_free(&o);
    return report("cltrain_open");
  }
  const int status = cltrain_fit(ctx, o, stdout);
  cltrain_options_free(&o);
  return finish(&ctx, status, "cltrain_fit");
}

static int cmd_eval(int argc, char **argv) {
  cltrain_options *o = NULL;
  int rc = start("eval", argc, argv, &o);
  if (rc >= 0) return rc;
  cltrain_ctx *ctx = NULL;
  if (cltrain_open(NULL, &ctx)) {
    cltrain_options_free(&o);
    return report("cltrain_open");
  }
  const int status = cltrain_evaluate(ctx, o, stdout);
  cltrain_options_free(&o);
  return finish(&ctx, status, "cltrain_evaluate");
}

static int cmd_export(int argc, char **argv) {
  cltrain_options *o = NULL;
  int rc = start("export", argc, argv, &o);
  if (rc >= 0) return rc;
  cltrain_ctx *ctx = NULL;
  if (cltrain_open(NULL, &ctx)) {
    cltrain_options_free(&o);
    return report("cltrain_open");
  }
  const int status = cltrain_export(ctx, o, stdout);
  cltrain_options_free(&o);
  if (status) report("cltrain_export");
  if (status) cltrain_abort(&ctx); /* a no-op in one process */
  else cltrain_close(&ctx);
  return status ? 1 : 0;
}

static int cmd_predict(int argc, char **argv) {
  cltrain_options *o = NULL;
  int rc = start("predict", argc, argv, &o);
  if (rc >= 0) return rc;
  cltrain_ctx *ctx = NULL;
  if (cltrain_open(NULL, &ctx)) {
    cltrain_options_free(&o);
    return report("cltrain_open");
  }
  int skipped = 0;
  const int status = cltrain_predict(ctx, o, stdout, &skipped);
  cltrain_options_free(&o);
  if (status) report("cltrain_predict");
  if (status) cltrain_abort(&ctx);
  else cltrain_close(&ctx);
  return status || skipped ? 1 : 0; /* skipped: the others were predicted */
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    cli_usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    cli_usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("cltrain %s (%s MPI)\n", cltrain_version(),
           cltrain_built_with_mpi() ? "with" : "without");
    return 0;
  }
  if (strcmp(cmd, "devices") == 0) return cmd_devices(argc - 2, argv + 2);
  if (strcmp(cmd, "train") == 0) return cmd_train(argc - 2, argv + 2);
  if (strcmp(cmd, "eval") == 0) return cmd_eval(argc - 2, argv + 2);
  if (strcmp(cmd, "export") == 0) return cmd_export(argc - 2, argv + 2);
  if (strcmp(cmd, "predict") == 0) return cmd_predict(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
  if (strcmp(cmd, "plot") == 0) return cmd_plot(argc - 2, argv + 2);
  if (strcmp(cmd, "tune") == 0) return cmd_tune(argc - 2, argv + 2);
  fprintf(
      stderr,
      "cltrain: error: unknown command '%s' (commands: devices, train, eval, predict, export, plot, "
      "bench, tune; "
      "see cltrain --help)\n",
      cmd);
  return 2;
}

int main(int argc, char **argv) {
  int rc = dispatch(argc, argv);
  /* Output to a full disk or a closed pipe fails only at the flush: say so rather
   * than exit 0 with lines lost. */
  if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
    fprintf(stderr, "cltrain: error: standard output: cannot write: %s\n",
            strerror(errno ? errno : EIO));
    rc = 1;
  }
  return rc;
}
