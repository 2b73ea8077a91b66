/* cltrain: train convolutional networks on every OpenCL device of a host. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "checkpoint.h"
#include "cli.h"
#include "cluster.h"
#include "device.h"
#include "flags.h"
#include "interrupt.h"
#include "model.h"
#include "onnx.h"
#include "plot.h"
#include "predict.h"
#include "train.h"

static void usage(FILE *f) {
  fprintf(f, "usage: cltrain <command> [options]\n\ncommands:\n");
  for (int i = 0; clt_commands[i]; i++) {
    const char *name = clt_commands[i]->name; /* "bench allreduce" is listed as bench */
    fprintf(f, "  %-9.*s %s\n", (int)strcspn(name, " "), name, clt_commands[i]->summary);
  }
  fputc('\n', f);
  clt_cli_print_text(f, clt_cltrain_text);
}

static int report(const clt_err *e) {
  fprintf(stderr, "cltrain: error: %s\n", e->msg);
  return 1;
}

static int cmd_devices(int argc, char **argv) {
  int rc = clt_cli_start(&clt_cmd_devices, argc, argv, NULL);
  if (rc >= 0) return rc;
  clt_err e = {0};
  clt_device_list list;
  if (clt_devices_enumerate(&list, &e)) return report(&e);
  if (list.count == 0) {
    fprintf(
        stderr,
        "cltrain: error: no OpenCL device found (is an ICD such as pocl-opencl-icd installed?)\n");
    return 1;
  }
  for (int i = 0; i < list.count; i++) {
    const clt_device *d = &list.devices[i];
    printf("%d  %-11s  %s  %s  %u compute unit%s  %.1f GiB\n", d->index,
           clt_device_type_name(d->type), d->platform_name, d->name, d->compute_units,
           d->compute_units == 1 ? "" : "s", d->global_mem_bytes / (1024.0 * 1024.0 * 1024.0));
  }
  clt_devices_free(&list);
  return 0;
}

static int cmd_train(int argc, char **argv) {
  clt_train_opts o = {.out = stdout};
  int rc = clt_cli_start(&clt_cmd_train, argc, argv, &o);
  if (rc >= 0) return rc;
  if (o.trace_steps_given && !o.trace_path) {
    fprintf(stderr, "cltrain: error: --trace-steps applies to --trace FILE.json\n");
    return 1;
  }
  if (o.tensorboard_every_given && !o.tensorboard_dir) {
    fprintf(stderr, "cltrain: error: --tensorboard-every applies to --tensorboard DIR\n");
    return 1;
  }
  o.progress = isatty(STDOUT_FILENO);
  clt_interrupt_install(); /* Ctrl-C: finish the step, save, exit 130 (before MPI's threads) */
  clt_err e = {0};
  if (clt_cli_join(&o.cluster, &e)) return 1;
  int status = clt_train(&o, &e);
  if (status && o.progress) fputc('\n', stdout);
  return clt_cli_finish(o.cluster, status, &e);
}

static int cmd_eval(int argc, char **argv) {
  clt_eval_opts o = {.out = stdout};
  int rc = clt_cli_start(&clt_cmd_eval, argc, argv, &o);
  if (rc >= 0) return rc;
  clt_err e = {0};
  if (clt_cli_check_required(&clt_cmd_eval, &o, &e)) return report(&e);
  if (clt_cli_join(&o.cluster, &e)) return 1;
  return clt_cli_finish(o.cluster, clt_eval(&o, &e), &e);
}

static int cmd_export(int argc, char **argv) {
  clt_export_opts o = {0};
  int rc = clt_cli_start(&clt_cmd_export, argc, argv, &o);
  if (rc >= 0) return rc;
  clt_err e = {0};
  if (clt_cli_check_required(&clt_cmd_export, &o, &e)) return report(&e);
  static clt_model model; /* large: not on the stack */
  clt_checkpoint state = {0};
  char path[4096];
  size_t bytes = 0;
  int status = clt_cli_checkpoint(o.checkpoint, o.checkpoint_given, o.best, path, sizeof path, &e);
  if (!status) status = clt_checkpoint_model(path, &model, &e);
  if (!status) status = clt_checkpoint_load(path, &model, 0, &state, &e);
  if (!status) {
    clt_onnx_info info = clt_class_names(&model, &state);
    info.augment = state.data.augment; /* the training's, and the size it cropped from */
    info.decoded_size = state.data.image_size;
    status = clt_onnx_export_log(&model, state.params, &info, o.onnx, o.verbose ? stdout : NULL,
                                 &bytes, &e);
  }
  if (!status) {
    printf("Exported %s (%zu parameters, epoch %lld) from %s to %s: %.1f MiB\n", model.name,
           model.param_count, (long long)state.epoch, path, o.onnx, bytes / 1048576.0);
  }
  clt_checkpoint_free(&state);
  return status ? report(&e) : 0;
}

static int cmd_predict(int argc, char **argv) {
  clt_predict_opts o = {0};
  int rc = clt_cli_start(&clt_cmd_predict, argc, argv, &o);
  if (rc >= 0) return rc;
  clt_err e = {0};
  int skipped = 0;
  if (clt_predict(&o, &skipped, &e)) return report(&e);
  return skipped ? 1 : 0; /* the others were predicted */
}

static int cmd_plot(int argc, char **argv) {
  clt_plot_opts o = {0};
  int rc = clt_cli_start(&clt_cmd_plot, argc, argv, &o);
  if (rc >= 0) return rc;
  if (!o.log || !o.output) {
    fprintf(stderr, "cltrain: error: cltrain plot: expected LOG.jsonl -o FILE.svg\n");
    return 1;
  }
  clt_err e = {0};
  clt_plot_info info;
  if (clt_plot_log_info(o.log, o.output, &info, &e)) return report(&e);
  printf("Wrote %s: %d epoch%s of %s\n", o.output, info.epochs, info.epochs == 1 ? "" : "s",
         info.model[0] ? info.model : "a model");
  return 0;
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("cltrain %s (%s MPI)\n", CLT_VERSION, clt_cluster_built_with_mpi() ? "with" : "without");
    return 0;
  }
  if (strcmp(cmd, "devices") == 0) return cmd_devices(argc - 2, argv + 2);
  if (strcmp(cmd, "train") == 0) return cmd_train(argc - 2, argv + 2);
  if (strcmp(cmd, "eval") == 0) return cmd_eval(argc - 2, argv + 2);
  if (strcmp(cmd, "export") == 0) return cmd_export(argc - 2, argv + 2);
  if (strcmp(cmd, "predict") == 0) return cmd_predict(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
  if (strcmp(cmd, "plot") == 0) return cmd_plot(argc - 2, argv + 2);
  fprintf(
      stderr,
      "cltrain: error: unknown command '%s' (commands: devices, train, eval, predict, export, plot, "
      "bench; "
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
