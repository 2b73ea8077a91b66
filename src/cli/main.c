/* cltrain: train convolutional networks on every OpenCL device of a host. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "device.h"
#include "model.h"
#include "train.h"

static void usage(FILE *f) {
  fprintf(f, "usage: cltrain <command> [options]\n"
             "\n"
             "commands:\n"
             "  devices   list the OpenCL devices cltrain can use\n"
             "  train     train a model (default: the Fashion-MNIST CNN on all devices)\n"
             "  eval      evaluate a checkpoint on the test set\n"
             "\n"
             "`cltrain <command> --help` describes a command's options.\n");
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
  int help = 0;
  const clt_flag flags[] = {
      {"data", CLT_FLAG_STRING, &o.data_dir, 0, 0, NULL},
      {"image-size", CLT_FLAG_INT, &o.image_size, 8, 4096, &o.image_size_given},
      {"validation-split", CLT_FLAG_DOUBLE, &o.validation_split, 0, 0.99,
       &o.validation_split_given},
      {"model", CLT_FLAG_STRING, &o.model, 0, 0, &o.model_given},
      {"devices", CLT_FLAG_STRING, &o.devices, 0, 0, NULL},
      {"split", CLT_FLAG_STRING, &o.split, 0, 0, NULL},
      {"epochs", CLT_FLAG_INT, &o.epochs, 1, 1000000, NULL},
      {"lr", CLT_FLAG_DOUBLE, &o.lr, 1e-12, 1e6, NULL},
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
        "  --model NAME            %s\n"
        "                          [fmnist-cnn; resnet50 for photo folders]\n"
        "  --devices SEL           all, cpu, gpu, accelerator or indices like 0,2; I/P splits\n"
        "                          device I into P sub-devices, one replica each [all]\n"
        "  --split auto|equal|W    how each global batch is sliced across devices: auto by\n"
        "                          measured speed, equal, or fixed weights like 3,1 [auto]\n"
        "  --epochs N              [10]\n"
        "  --lr X                  Adam learning rate [0.001]\n"
        "  --seed N                initial weights and data order [42]\n"
        "  --batch-per-replica N   examples per device per step [64]\n"
        "  --train-limit N         use only the first N training examples\n"
        "  --test-limit N          use only the first N test examples\n"
        "  --log FILE              JSON Lines log, one object per epoch (appended with --resume)\n"
        "  --checkpoint-dir DIR    where checkpoints go [./training_checkpoints]\n"
        "  --checkpoint-every N    save every N epochs and after the last; 0: never [2]\n"
        "  --keep N                keep the newest N checkpoints; 0: all [5]\n"
        "  --resume                continue from the newest checkpoint in --checkpoint-dir\n"
        "                          (weights, optimizer, epoch, data order) up to --epochs\n"
        "  --check-replicas        verify after every step that all replicas hold\n"
        "                          bitwise-identical parameters (slow; for testing)\n"
        "  --profile               print device time per kernel after each epoch\n"
        "  --verbose               print the OpenCL compilers' build logs (warnings)\n",
        clt_model_names);
    return 0;
  }
  o.progress = isatty(STDOUT_FILENO);
  if (clt_train(&o, &e)) {
    if (o.progress) fputc('\n', stdout);
    return report(&e);
  }
  return 0;
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
      {"seed", CLT_FLAG_U64, &o.seed, 0, 0, NULL},
      {"devices", CLT_FLAG_STRING, &o.devices, 0, 0, NULL},
      {"batch-per-replica", CLT_FLAG_INT, &o.batch_per_replica, 1, 65536, NULL},
      {"test-limit", CLT_FLAG_LONG, &o.test_limit, 1, 2147483647, NULL},
      {"verbose", CLT_FLAG_BOOL, &o.verbose, 0, 0, NULL},
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
        "  --devices SEL           all, cpu, gpu, accelerator or indices like 0,2 [all]\n"
        "  --batch-per-replica N   examples per device per step [64]\n"
        "  --test-limit N          use only the first N test examples\n"
        "  --verbose               print the OpenCL compilers' build logs (warnings)\n");
    return 0;
  }
  if (!o.checkpoint) {
    fprintf(stderr, "cltrain: error: cltrain eval: --checkpoint DIR|FILE is required\n");
    return 1;
  }
  if (clt_eval(&o, &e)) return report(&e);
  return 0;
}

int main(int argc, char **argv) {
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
    printf("cltrain %s\n", CLT_VERSION);
    return 0;
  }
  if (strcmp(cmd, "devices") == 0) return cmd_devices(argc - 2, argv + 2);
  if (strcmp(cmd, "train") == 0) return cmd_train(argc - 2, argv + 2);
  if (strcmp(cmd, "eval") == 0) return cmd_eval(argc - 2, argv + 2);
  fprintf(
      stderr,
      "cltrain: error: unknown command '%s' (commands: devices, train, eval; see cltrain --help)\n",
      cmd);
  return 2;
}
