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
#include "interrupt.h"
#include "model.h"
#include "onnx.h"
#include "plot.h"
#include "train.h"

static void usage(FILE *f) {
  fprintf(f, "usage: cltrain <command> [options]\n"
             "\n"
             "commands:\n"
             "  devices   list the OpenCL devices cltrain can use\n"
             "  train     train a model (default: the Fashion-MNIST CNN on all devices)\n"
             "  eval      evaluate a checkpoint on the test set\n"
             "  export    write a checkpoint's model as an ONNX file\n"
             "  plot      draw a training log's curves as an SVG picture\n"
             "  bench     time the all-reduce (cltrain bench allreduce, under mpirun)\n"
             "\n"
             "`cltrain <command> --help` describes a command's options. Under mpirun, train,\n"
             "eval and bench run as one job across the processes (see README, several hosts).\n");
}

static int report(const clt_err *e) {
  fprintf(stderr, "cltrain: error: %s\n", e->msg);
  return 1;
}

static int cmd_devices(int argc, char **argv) {
  clt_err e = {0};
  int help = 0;
  if (clt_cli_parse("cltrain devices", argc, argv, NULL, 0, &help, &e)) return report(&e);
  if (help) {
    printf("usage: cltrain devices\n\n"
           "Lists every OpenCL device: index (as --devices takes it), type, platform, name,\n"
           "compute units and global memory.\n");
    return 0;
  }
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
    printf("%d  %-11s  %s  %s  %u compute units  %.1f GiB\n", d->index,
           clt_device_type_name(d->type), d->platform_name, d->name, d->compute_units,
           d->global_mem_bytes / (1024.0 * 1024.0 * 1024.0));
  }
  clt_devices_free(&list);
  return 0;
}

static int cmd_train(int argc, char **argv) {
  clt_err e = {0};
  clt_train_opts o;
  clt_train_defaults(&o);
  int help = 0, trace_steps_given = 0, every_given = 0;
  const clt_flag flags[] = {
      {"data", CLT_FLAG_STRING, &o.data_dir, 0, 0, NULL},
      {"image-size", CLT_FLAG_INT, &o.image_size, 8, 4096, &o.image_size_given},
      {"validation-split", CLT_FLAG_DOUBLE, &o.validation_split, 0, 0.99,
       &o.validation_split_given},
      {"max-image-pixels", CLT_FLAG_LONG, &o.max_image_pixels, 1, 1e12, NULL},
      {"model", CLT_FLAG_STRING, &o.model, 0, 0, &o.model_given},
      {"weights", CLT_FLAG_STRING, &o.weights, 0, 0, NULL},
      {"preprocess", CLT_FLAG_STRING, &o.preprocess, 0, 0, NULL},
      {"devices", CLT_FLAG_STRING, &o.devices, 0, 0, NULL},
      {"split", CLT_FLAG_STRING, &o.split, 0, 0, NULL},
      {"epochs", CLT_FLAG_INT, &o.epochs, 1, 1000000, NULL},
      {"optimizer", CLT_FLAG_STRING, &o.optimizer, 0, 0, &o.optimizer_given},
      {"lr", CLT_FLAG_DOUBLE, &o.lr, 1e-12, 1e6, NULL},
      {"momentum", CLT_FLAG_DOUBLE, &o.momentum, 0, 1, &o.momentum_given},
      {"nesterov", CLT_FLAG_BOOL, &o.nesterov, 0, 0, NULL},
      {"weight-decay", CLT_FLAG_DOUBLE, &o.weight_decay, 0, 1e6, &o.weight_decay_given},
      {"seed", CLT_FLAG_U64, &o.seed, 0, 0, &o.seed_given},
      {"batch-per-replica", CLT_FLAG_INT, &o.batch_per_replica, 1, 65536, NULL},
      {"train-limit", CLT_FLAG_LONG, &o.train_limit, 1, 2147483647, NULL},
      {"test-limit", CLT_FLAG_LONG, &o.test_limit, 1, 2147483647, NULL},
      {"log", CLT_FLAG_STRING, &o.log_path, 0, 0, NULL},
      {"checkpoint-dir", CLT_FLAG_STRING, &o.checkpoint_dir, 0, 0, NULL},
      {"checkpoint-every", CLT_FLAG_INT, &o.checkpoint_every, 0, 1000000, NULL},
      {"keep", CLT_FLAG_INT, &o.keep, 0, 1000000, NULL},
      {"resume", CLT_FLAG_BOOL, &o.resume, 0, 0, NULL},
      {"check-replicas", CLT_FLAG_BOOL, &o.check_replicas, 0, 0, NULL},
      {"profile", CLT_FLAG_BOOL, &o.profile, 0, 0, NULL},
      {"verbose", CLT_FLAG_BOOL, &o.verbose, 0, 0, NULL},
      {"trace", CLT_FLAG_STRING, &o.trace_path, 0, 0, NULL},
      {"trace-steps", CLT_FLAG_INT, &o.trace_steps, 1, 100000, &trace_steps_given},
      {"tensorboard", CLT_FLAG_STRING, &o.tensorboard_dir, 0, 0, NULL},
      {"tensorboard-every", CLT_FLAG_INT, &o.tensorboard_every, 0, 100000000, &every_given},
      {"allreduce-timeout", CLT_FLAG_DOUBLE, &o.allreduce_timeout, 0, 1e6, NULL},
  };
  if (clt_cli_parse("cltrain train", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]),
                    &help, &e)) {
    return report(&e);
  }
  if (help) {
    printf(
        "usage: cltrain train [options]\n"
        "\n"
        "Trains a model on the selected OpenCL devices and prints, after each epoch:\n"
        "  Epoch 1, Loss: 0.5123, Accuracy: 81.20, Test Loss: 0.3912, Test Accuracy: 86.02\n"
        "\n"
        "options:\n"
        "  --data DIR              Fashion-MNIST-style IDX folder (train-/t10k-*-ubyte[.gz]),\n"
        "                          or a photo folder: one subfolder of JPEG/PNG files per class\n"
        "                          [/usr/share/datasets/fashion-mnist]\n"
        "  --image-size N          photo folders: resize images to NxN [224]\n"
        "  --validation-split F    photo folders: hold out this fraction (chosen by --seed)\n"
        "                          and evaluate it after each epoch [0]\n"
        "  --max-image-pixels N    photo folders: refuse an image of more pixels (width x\n"
        "                          height), a decompression bomb's defence [178956970]\n"
        "  --model NAME|FILE.json  %s, or a Keras model file\n"
        "                          (model.to_json(): Keras 3 or tf.keras 2.x, Sequential or\n"
        "                          functional) [fmnist-cnn; resnet50 for photo folders]\n"
        "  --weights FILE.npz      start from these weights: Keras' get_weights() as\n"
        "                          np.savez(FILE, *weights) writes them, or members named\n"
        "                          <layer>/<weight> (a cltrain checkpoint is such a file)\n"
        "  --preprocess raw|unit|caffe  model files: what the model is fed: raw pixel values\n"
        "                          0..255 as Keras' image loaders give them, x/255, or\n"
        "                          ResNet's caffe mode [raw]\n"
        "  --devices SEL           all, cpu, gpu, accelerator or indices like 0,2; I/P splits\n"
        "                          device I into P sub-devices, one replica each; under\n"
        "                          mpirun 'A;B' gives rank 0 A and rank 1 B, and\n"
        "                          $CLTRAIN_DEVICES overrides it for one process [all]\n"
        "  --split auto|equal|W    how each global batch is sliced across devices: auto by\n"
        "                          measured speed, equal, or fixed weights like 3,1 [auto]\n"
        "  --epochs N              [10]\n"
        "  --optimizer NAME        adam, sgd or rmsprop, as Keras defines them (Adam: beta_1\n"
        "                          0.9, beta_2 0.999, epsilon 1e-7; RMSprop: rho 0.9,\n"
        "                          epsilon 1e-7) [adam]\n"
        "  --lr X                  learning rate [Keras' default: 0.01 for sgd, 0.001 for\n"
        "                          adam and rmsprop]\n"
        "  --momentum X            sgd and rmsprop: momentum in [0, 1] [0]\n"
        "  --nesterov              sgd: Nesterov momentum (needs --momentum above 0)\n"
        "  --weight-decay X        decoupled weight decay before each update, as Keras':\n"
        "                          w -= w * X * lr [0]\n"
        "  --seed N                initial weights and data order [42]\n"
        "  --batch-per-replica N   examples per device per step [64]\n"
        "  --train-limit N         use only the first N training examples\n"
        "  --test-limit N          use only the first N test examples\n"
        "  --log FILE              JSON Lines log, one object per epoch (appended with --resume)\n"
        "  --checkpoint-dir DIR    where checkpoints go [./training_checkpoints]\n"
        "  --checkpoint-every N    save every N epochs and after the last; 0: never [2]\n"
        "  --keep N                keep the newest N checkpoints; 0: all [5]\n"
        "  --resume                continue from the newest checkpoint in --checkpoint-dir\n"
        "                          (weights, optimizer and its state, epoch, data order) up to\n"
        "                          --epochs; optimizer flags given must match it, --lr may\n"
        "                          change the learning rate\n"
        "  --check-replicas        verify after every step that all replicas hold\n"
        "                          bitwise-identical parameters (slow; for testing)\n"
        "  --profile               print device time per kernel after each epoch\n"
        "  --tensorboard DIR       write TensorBoard event files: DIR/train and\n"
        "                          DIR/validation, epoch_loss, epoch_accuracy (as Keras'\n"
        "                          callback), learning rate, images/s, all-reduce seconds,\n"
        "                          each replica's share and busy fraction per epoch\n"
        "  --tensorboard-every N   ... and the batch loss every N steps [0: none]\n"
        "  --trace FILE.json       write a timeline of the first steps (Chrome trace events,\n"
        "                          for Perfetto or chrome://tracing): per replica its host\n"
        "                          phases, the all-reduce's steps, its kernels by layer and\n"
        "                          pass and its copies; the photo decoders\n"
        "  --trace-steps N         steps the trace covers [20]\n"
        "  --allreduce-timeout S   stop, naming it, when a replica keeps the others waiting\n"
        "                          in a step longer than S seconds (a hung device); 0: wait\n"
        "                          for ever [300]\n"
        "  --verbose               print the OpenCL compilers' build logs (warnings)\n",
        clt_model_names);
    return 0;
  }
  if (trace_steps_given && !o.trace_path) {
    fprintf(stderr, "cltrain: error: --trace-steps applies to --trace FILE.json\n");
    return 1;
  }
  if (every_given && !o.tensorboard_dir) {
    fprintf(stderr, "cltrain: error: --tensorboard-every applies to --tensorboard DIR\n");
    return 1;
  }
  o.progress = isatty(STDOUT_FILENO);
  clt_interrupt_install(); /* Ctrl-C: finish the step, save, exit 130 (before MPI's threads) */
  if (clt_cli_join(&o.cluster, &e)) return 1;
  int status = clt_train(&o, &e);
  if (status && o.progress) fputc('\n', stdout);
  return clt_cli_finish(o.cluster, status, &e);
}

static int cmd_eval(int argc, char **argv) {
  clt_err e = {0};
  clt_eval_opts o = {.checkpoint = NULL,
                     .data_dir = "/usr/share/datasets/fashion-mnist",
                     .devices = "all",
                     .batch_per_replica = 64,
                     .seed = 42,
                     .out = stdout};
  int help = 0;
  const clt_flag flags[] = {
      {"checkpoint", CLT_FLAG_STRING, &o.checkpoint, 0, 0, NULL},
      {"data", CLT_FLAG_STRING, &o.data_dir, 0, 0, NULL},
      {"validation-split", CLT_FLAG_DOUBLE, &o.validation_split, 0, 0.99,
       &o.validation_split_given},
      {"max-image-pixels", CLT_FLAG_LONG, &o.max_image_pixels, 1, 1e12, NULL},
      {"seed", CLT_FLAG_U64, &o.seed, 0, 0, NULL},
      {"devices", CLT_FLAG_STRING, &o.devices, 0, 0, NULL},
      {"batch-per-replica", CLT_FLAG_INT, &o.batch_per_replica, 1, 65536, NULL},
      {"test-limit", CLT_FLAG_LONG, &o.test_limit, 1, 2147483647, NULL},
      {"verbose", CLT_FLAG_BOOL, &o.verbose, 0, 0, NULL},
      {"logits", CLT_FLAG_STRING, &o.logits_path, 0, 0, NULL},
  };
  if (clt_cli_parse("cltrain eval", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), &help,
                    &e)) {
    return report(&e);
  }
  if (help) {
    printf(
        "usage: cltrain eval --checkpoint DIR|FILE [options]\n"
        "\n"
        "Restores a checkpoint into a fresh model on the selected devices and prints the\n"
        "test-set accuracy (percent) and mean loss:\n"
        "  Accuracy: 90.12\n"
        "  Loss: 0.2876\n"
        "\n"
        "options:\n"
        "  --checkpoint DIR|FILE   a checkpoint folder (its index names the newest) or a .npz\n"
        "  --data DIR              Fashion-MNIST-style IDX folder [/usr/share/datasets/fashion-mnist],\n"
        "                          or a photo folder (images resized to the checkpoint's size)\n"
        "  --validation-split F    photo folders: evaluate only the fraction held out in\n"
        "  --seed N                training with these values [0: the whole folder; 42]\n"
        "  --max-image-pixels N    photo folders: refuse an image of more pixels [178956970]\n"
        "  --devices SEL           all, cpu, gpu, accelerator or indices like 0,2; under\n"
        "                          mpirun 'A;B' per rank, as for train [all]\n"
        "  --batch-per-replica N   examples per device per step [64]\n"
        "  --test-limit N          use only the first N test examples\n"
        "  --logits FILE.npy       also write every example's logits, float32 (examples,\n"
        "                          classes) in test-set order, as a NumPy .npy file\n"
        "  --verbose               print the OpenCL compilers' build logs (warnings)\n");
    return 0;
  }
  if (!o.checkpoint) {
    fprintf(stderr, "cltrain: error: cltrain eval: --checkpoint DIR|FILE is required\n");
    return 1;
  }
  if (clt_cli_join(&o.cluster, &e)) return 1;
  return clt_cli_finish(o.cluster, clt_eval(&o, &e), &e);
}

static int cmd_export(int argc, char **argv) {
  clt_err e = {0};
  const char *checkpoint = NULL, *onnx = NULL;
  int help = 0, verbose = 0;
  const clt_flag flags[] = {
      {"checkpoint", CLT_FLAG_STRING, &checkpoint, 0, 0, NULL},
      {"onnx", CLT_FLAG_STRING, &onnx, 0, 0, NULL},
      {"verbose", CLT_FLAG_BOOL, &verbose, 0, 0, NULL},
  };
  if (clt_cli_parse("cltrain export", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]),
                    &help, &e)) {
    return report(&e);
  }
  if (help) {
    printf("usage: cltrain export --checkpoint DIR|FILE --onnx FILE [--verbose]\n"
           "\n"
           "Writes the checkpoint's model as an ONNX model (opset 13) of its inference graph,\n"
           "which ONNX Runtime runs to the predictions of `cltrain eval`. Input 'input':\n"
           "float32 (N, H, W, C), NHWC, the pixel values 0..255 as stored (grey or RGB); the\n"
           "model's preprocessing is inside the graph. Output 'logits': float32 (N, classes),\n"
           "and 'probabilities' (their softmax) for a model file that ended in a softmax.\n"
           "Needs no OpenCL device; the file is written atomically.\n"
           "\n"
           "options:\n"
           "  --checkpoint DIR|FILE   a checkpoint folder (its index names the newest) or a .npz\n"
           "  --onnx FILE             the ONNX file to write (replaced if it exists)\n"
           "  --verbose               list the graph's nodes\n");
    return 0;
  }
  if (!checkpoint || !onnx) {
    fprintf(stderr, "cltrain: error: cltrain export: --checkpoint DIR|FILE and --onnx FILE are "
                    "required\n");
    return 1;
  }
  static clt_model model; /* large: not on the stack */
  clt_checkpoint state = {0};
  char path[4096];
  size_t bytes = 0;
  int status = clt_checkpoint_resolve(checkpoint, path, sizeof path, &e);
  if (!status) status = clt_checkpoint_model(path, &model, &e);
  if (!status) status = clt_checkpoint_load(path, &model, 0, &state, &e);
  if (!status)
    status = clt_onnx_export_log(&model, state.params, onnx, verbose ? stdout : NULL, &bytes, &e);
  if (!status) {
    printf("Exported %s (%zu parameters, epoch %lld) from %s to %s: %.1f MiB\n", model.name,
           model.param_count, (long long)state.epoch, path, onnx, bytes / 1048576.0);
  }
  clt_checkpoint_free(&state);
  return status ? report(&e) : 0;
}

static int cmd_plot(int argc, char **argv) {
  clt_err e = {0};
  const char *out = NULL, *log = NULL;
  int help = 0;
  const clt_flag flags[] = {{"output", CLT_FLAG_STRING, &out, 0, 0, NULL}};
  /* The log is the one argument that is not a flag: take it out first. */
  char *rest[64];
  int nrest = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else if (argv[i][0] != '-' && !log) {
      log = argv[i];
    } else if (nrest < 64) {
      rest[nrest++] = argv[i];
    }
  }
  if (clt_cli_parse("cltrain plot", nrest, rest, flags, (int)(sizeof flags / sizeof flags[0]),
                    &help, &e)) {
    return report(&e);
  }
  if (help) {
    printf("usage: cltrain plot LOG.jsonl -o FILE.svg\n"
           "\n"
           "Draws a `cltrain train --log` file as one SVG picture: loss and accuracy per epoch\n"
           "for training and test (or validation), training images/s, and each replica's\n"
           "share of the examples. A log appended by --resume counts each epoch's last\n"
           "record. Needs no OpenCL device; the file is written atomically.\n");
    return 0;
  }
  if (!log || !out) {
    fprintf(stderr, "cltrain: error: cltrain plot: expected LOG.jsonl -o FILE.svg\n");
    return 1;
  }
  clt_plot_info info;
  if (clt_plot_log_info(log, out, &info, &e)) return report(&e);
  printf("Wrote %s: %d epoch%s of %s\n", out, info.epochs, info.epochs == 1 ? "" : "s",
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
  if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
  if (strcmp(cmd, "plot") == 0) return cmd_plot(argc - 2, argv + 2);
  fprintf(
      stderr,
      "cltrain: error: unknown command '%s' (commands: devices, train, eval, export, plot, bench; "
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
