/* The flag tables: each flag's name, kind, range, default and text, from which
 * clt_cli_parse parses, clt_cli_defaults defaults, clt_cli_help prints --help and
 * cltrain_flags_doc (flags_doc.c) writes docs/flags.md and cltrain.1. */
#include "flags.h"

#include "model.h"
#include "photos.h"
#include "predict.h"
#include "ring.h"
#include "train.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* --max-image-pixels' default is 0 (photos.c's limit; any value given counts as
 * given), documented as that limit's value. */
#define MAX_PIXELS_SHOWN "178956970"
_Static_assert(CLT_PHOTOS_MAX_PIXELS == 178956970LL, "MAX_PIXELS_SHOWN: photos.h's limit");

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

/* --checkpoint and --best, as eval, predict and export read a checkpoint (opts:
 * their options struct, with fields checkpoint, checkpoint_given and best). */
#define CHECKPOINT_FLAGS(opts)                                                                   \
  {.name = "checkpoint",                                                                         \
   .type = CLT_FLAG_STRING,                                                                      \
   .offset = offsetof(opts, checkpoint),                                                         \
   .seen = CLT_SEEN(opts, checkpoint_given),                                                     \
   .def_str = "./training_checkpoints",                                                          \
   .meta = "DIR|FILE",                                                                           \
   .help = "a checkpoint folder (its index names the newest) or a .npz; the default is train's " \
           "--checkpoint-dir"},                                                                  \
  {                                                                                              \
    .name = "best", .type = CLT_FLAG_BOOL, .offset = offsetof(opts, best),                       \
    .help = "the folder's best checkpoint, as cltrain train --early-stopping records it, "       \
            "rather than the newest"                                                             \
  }

#define TR(f) offsetof(clt_train_opts, f)
static const clt_flag train_flags[] = {
    {.name = "data",
     .type = CLT_FLAG_STRING,
     .offset = TR(data_dir),
     .seen = CLT_SEEN(clt_train_opts, data_given),
     .def_str = DEFAULT_DATA,
     .meta = "DIR",
     .help = "Fashion-MNIST-style IDX folder (train-/t10k-*-ubyte[.gz]), or a photo folder: one "
             "subfolder of JPEG/PNG files per class"},
    {.name = "image-size",
     .type = CLT_FLAG_INT,
     .offset = TR(image_size),
     .seen = CLT_SEEN(clt_train_opts, image_size_given),
     .min = 8,
     .max = 4096,
     .def = 224,
     .meta = "N",
     .help = "photo folders: resize images to NxN"},
    {.name = "validation-split",
     .type = CLT_FLAG_DOUBLE,
     .offset = TR(validation_split),
     .seen = CLT_SEEN(clt_train_opts, validation_split_given),
     .min = 0,
     .max = 0.99,
     .meta = "F",
     .help = "hold out this fraction of the training examples and evaluate it after each epoch "
             "instead of the test set: a photo folder's chosen by --seed, IDX files' the last "
             "fraction of the training files, as Keras' validation_split takes it"},
    {.name = "max-image-pixels",
     .type = CLT_FLAG_LONG,
     .offset = TR(max_image_pixels),
     .min = 1,
     .max = 1e12,
     .meta = "N",
     .shown = MAX_PIXELS_SHOWN,
     .help = "photo folders: refuse an image of more pixels (width x height), a decompression "
             "bomb's defence"},
    {.name = "augment",
     .type = CLT_FLAG_STRING,
     .offset = TR(augment),
     .seen = CLT_SEEN(clt_train_opts, augment_given),
     .meta = "LIST",
     .help = "photo folders: augment the training images as Keras' RandomFlip, RandomRotation, "
             "RandomZoom, RandomTranslation, RandomCrop, RandomContrast and RandomBrightness do, "
             "e.g. flip=horizontal,rotate=0.1,zoom=0.1,translate=0.1,contrast=0.2 (also "
             "brightness=F, crop=HxW; fill=, fill_value=, interpolation=, value_range= set the "
             "items after them); each image's draw depends on --seed, the epoch and the image "
             "only; evaluation only crops (docs/photos.md)"},
    {.name = "model",
     .type = CLT_FLAG_STRING,
     .offset = TR(model),
     .seen = CLT_SEEN(clt_train_opts, model_given),
     .def_str = "fmnist-cnn",
     .meta = "NAME|FILE.json",
     .shown = "fmnist-cnn; resnet50 for photo folders",
     .help = "%s, or a Keras model file (model.to_json(): Keras 3 or tf.keras 2.x, Sequential or "
             "functional)",
     .insert = &clt_model_names},
    {.name = "weights",
     .type = CLT_FLAG_STRING,
     .offset = TR(weights),
     .meta = "FILE.npz",
     .help = "start from these weights: Keras' get_weights() as np.savez(FILE, *weights) writes "
             "them, or members named <layer>/<weight> (a cltrain checkpoint is such a file)"},
    {.name = "freeze-until",
     .type = CLT_FLAG_STRING,
     .offset = TR(freeze_until),
     .meta = "LAYER",
     .help = "freeze every layer up to and including LAYER (in model order), on top of the "
             "model file's frozen layers: their weights are not trained, a frozen "
             "BatchNormalization normalises with its moving statistics; with --resume it "
             "replaces the checkpoint's freezing; none: every layer trains, the model file's "
             "frozen layers too"},
    {.name = "preprocess",
     .type = CLT_FLAG_STRING,
     .offset = TR(preprocess),
     .meta = "raw|unit|caffe",
     .shown = "raw",
     .help = "model files: what the model is fed: raw pixel values 0..255 as Keras' image "
             "loaders give them, x/255, or ResNet's caffe mode"},
    {.name = "devices",
     .type = CLT_FLAG_STRING,
     .offset = TR(devices),
     .def_str = "all",
     .meta = "SEL",
     .help = "all, cpu, gpu, accelerator or indices like 0,2; I/P splits device I into P "
             "sub-devices, one replica each; under mpirun 'A;B' gives rank 0 A and rank 1 B, and "
             "$CLTRAIN_DEVICES overrides it for one process"},
    {.name = "split",
     .type = CLT_FLAG_STRING,
     .offset = TR(split),
     .def_str = "auto",
     .meta = "auto|equal|W",
     .help = "how each global batch is sliced across devices: auto by measured speed, equal, or "
             "fixed weights like 3,1"},
    {.name = "epochs",
     .type = CLT_FLAG_INT,
     .offset = TR(epochs),
     .min = 1,
     .max = 1000000,
     .def = 10,
     .meta = "N",
     .help = "total epochs (with --resume, the epoch to stop after)"},
    {.name = "early-stopping",
     .type = CLT_FLAG_STRING,
     .offset = TR(early_stopping),
     .meta = "KEY=VALUE,...",
     .help = "stop when the monitored quantity stops improving, by the rules of Keras' "
             "EarlyStopping with these of its arguments (the others at Keras' defaults): "
             "monitor (val_loss, val_accuracy: these need --validation-split; loss, accuracy), "
             "min_delta, patience, mode (auto, min, max), baseline, restore_best_weights (true: "
             "eval, export and predict then use the best epoch's checkpoint), start_from_epoch; "
             "the best epoch's checkpoint is saved when found and kept"},
    {.name = "optimizer",
     .type = CLT_FLAG_STRING,
     .offset = TR(optimizer),
     .seen = CLT_SEEN(clt_train_opts, optimizer_given),
     .def_str = "adam",
     .meta = "NAME",
     .help = "adam, sgd or rmsprop, as Keras defines them (Adam: beta_1 0.9, beta_2 0.999, "
             "epsilon 1e-7; RMSprop: rho 0.9, epsilon 1e-7)"},
    {.name = "lr",
     .type = CLT_FLAG_DOUBLE,
     .offset = TR(lr),
     .min = 1e-12,
     .max = 1e6,
     .meta = "X",
     .shown = "0.01 for sgd, 0.001 for adam and rmsprop: Keras' defaults",
     .help = "learning rate"},
    {.name = "momentum",
     .type = CLT_FLAG_DOUBLE,
     .offset = TR(momentum),
     .seen = CLT_SEEN(clt_train_opts, momentum_given),
     .min = 0,
     .max = 1,
     .meta = "X",
     .help = "sgd and rmsprop: momentum in [0, 1]"},
    {.name = "nesterov",
     .type = CLT_FLAG_BOOL,
     .offset = TR(nesterov),
     .help = "sgd: Nesterov momentum (needs --momentum above 0)"},
    {.name = "weight-decay",
     .type = CLT_FLAG_DOUBLE,
     .offset = TR(weight_decay),
     .seen = CLT_SEEN(clt_train_opts, weight_decay_given),
     .min = 0,
     .max = 1e6,
     .meta = "X",
     .help = "decoupled weight decay before each update, as Keras': w -= w * X * lr"},
    {.name = "lr-schedule",
     .type = CLT_FLAG_STRING,
     .offset = TR(lr_schedule),
     .meta = "NAME:ARGS",
     .help = "a Keras learning-rate schedule over the optimizer's steps, from --lr: cosine "
             "(CosineDecay: decay_steps, alpha, warmup_target, warmup_steps), exponential "
             "(ExponentialDecay: decay_steps, decay_rate, staircase), piecewise "
             "(PiecewiseConstantDecay: boundaries, values, lists as 100/200; --lr is values[0]), "
             "polynomial (PolynomialDecay: decay_steps, end_learning_rate, power, cycle) or "
             "inverse_time (InverseTimeDecay: decay_steps, decay_rate, staircase); ARGS are "
             "name=value,... as in cosine:decay_steps=900,warmup_target=0.01,warmup_steps=100"},
    {.name = "reduce-lr-on-plateau",
     .type = CLT_FLAG_STRING,
     .offset = TR(reduce_lr_on_plateau),
     .meta = "ARGS",
     .help = "Keras' ReduceLROnPlateau after each epoch, name=value,... of monitor (val_loss, "
             "val_accuracy: they need --validation-split; loss, accuracy), factor, patience, "
             "mode, min_delta, cooldown, min_lr; those left out are Keras' defaults "
             "val_loss, 0.1, 10, auto, 1e-4, 0, 0; not with --lr-schedule"},
    {.name = "seed",
     .type = CLT_FLAG_U64,
     .offset = TR(seed),
     .seen = CLT_SEEN(clt_train_opts, seed_given),
     .def = 42,
     .meta = "N",
     .help = "initial weights and data order"},
    {.name = "batch-per-replica",
     .type = CLT_FLAG_INT,
     .offset = TR(batch_per_replica),
     .seen = CLT_SEEN(clt_train_opts, batch_per_replica_given),
     .min = 1,
     .max = 65536,
     .def = 64,
     .meta = "N",
     .shown = "64; with --resume the checkpoint's global batch over the replicas",
     .help = "examples per device per step (the global batch is N x the run's replicas)"},
    {.name = "global-batch",
     .type = CLT_FLAG_INT,
     .offset = TR(global_batch),
     .seen = CLT_SEEN(clt_train_opts, global_batch_given),
     .min = 1,
     .max = 16777216,
     .meta = "N",
     .shown = "--batch-per-replica x the replicas",
     .help = "examples per step over every replica of the run, each replica's share derived from "
             "it (equal slices differ by at most one where N does not divide); with "
             "--batch-per-replica too, the two must agree. A checkpoint records it, so --resume "
             "on more or fewer hosts or devices keeps it"},
    {.name = "train-limit",
     .type = CLT_FLAG_LONG,
     .offset = TR(train_limit),
     .seen = CLT_SEEN(clt_train_opts, train_limit_given),
     .min = 0,
     .max = 2147483647,
     .meta = "N",
     .shown = "0: all",
     .help = "use only the first N training examples"},
    {.name = "test-limit",
     .type = CLT_FLAG_LONG,
     .offset = TR(test_limit),
     .seen = CLT_SEEN(clt_train_opts, test_limit_given),
     .min = 0,
     .max = 2147483647,
     .meta = "N",
     .shown = "0: all",
     .help = "use only the first N test examples"},
    {.name = "log",
     .type = CLT_FLAG_STRING,
     .offset = TR(log_path),
     .meta = "FILE",
     .help = "JSON Lines log, one object per epoch (appended with --resume)"},
    {.name = "checkpoint-dir",
     .type = CLT_FLAG_STRING,
     .offset = TR(checkpoint_dir),
     .def_str = "./training_checkpoints",
     .meta = "DIR",
     .help = "where checkpoints go"},
    {.name = "checkpoint-every",
     .type = CLT_FLAG_INT,
     .offset = TR(checkpoint_every),
     .min = 0,
     .max = 1000000,
     .def = 2,
     .meta = "N",
     .help = "save every N epochs and after the last; 0: never (--early-stopping still saves "
             "the best epoch)"},
    {.name = "keep",
     .type = CLT_FLAG_INT,
     .offset = TR(keep),
     .min = 0,
     .max = 1000000,
     .def = 5,
     .meta = "N",
     .help = "keep the newest N checkpoints, and the best with --early-stopping; 0: all"},
    {.name = "resume",
     .type = CLT_FLAG_BOOL,
     .offset = TR(resume),
     .help = "continue from the newest checkpoint in --checkpoint-dir (weights, optimizer and its "
             "state, epoch, data order) up to --epochs, on the data it records (--data, "
             "--train-limit, --test-limit, --validation-split, --augment, --seed and the global "
             "batch, divided among the replicas: one given with another value is used, with a "
             "note); optimizer flags given must match it, --lr may change the learning rate. "
             "Under mpirun process 0 reads the checkpoint and sends it to the others, so only "
             "its --checkpoint-dir needs to hold it"},
    {.name = "check-replicas",
     .type = CLT_FLAG_BOOL,
     .offset = TR(check_replicas),
     .help = "verify after every step that all replicas hold bitwise-identical parameters (slow; "
             "for testing)"},
    {.name = "tune",
     .type = CLT_FLAG_STRING,
     .offset = TR(tune),
     .seen = CLT_SEEN(clt_train_opts, tune_given),
     .def_str = "auto",
     .meta = "auto|off",
     .shown = "auto; $CLTRAIN_TUNE when set",
     .help = "auto: each replica runs the convolution algorithms its device's tuning results "
             "chose (cltrain tune), and what is not cached is tuned between epochs within "
             "--tune-budget, in probe steps on a training batch that change nothing the run "
             "computes, kept only where whole steps confirm it; off: the backend's defaults. A "
             "resumed run keeps the algorithms its checkpoint records (docs/performance.md, "
             "Tuning)"},
    {.name = "tune-budget",
     .type = CLT_FLAG_DOUBLE,
     .offset = TR(tune_budget),
     .min = 0,
     .max = 86400,
     .def = 10,
     .meta = "SECONDS",
     .help = "with --tune auto: seconds the run may spend tuning between two epochs, each "
             "time; what does not fit goes on after the next epoch where it stopped (0: none; "
             "the first step never waits for it)"},
    {.name = "tune-file",
     .type = CLT_FLAG_STRING,
     .offset = TR(tune_file),
     .meta = "FILE",
     .help = "with --tune auto: read and write this tuning file (as cltrain tune --tune-file "
             "writes it) rather than the cache folder's, so that runs use the same algorithms; "
             "a file of another device is an error"},
    {.name = "profile",
     .type = CLT_FLAG_BOOL,
     .offset = TR(profile),
     .help = "print device time per kernel after each epoch"},
    {.name = "tensorboard",
     .type = CLT_FLAG_STRING,
     .offset = TR(tensorboard_dir),
     .meta = "DIR",
     .help = "write TensorBoard event files: DIR/train and DIR/validation, epoch_loss, "
             "epoch_accuracy (as Keras' callback), learning rate, images/s, all-reduce seconds, "
             "each replica's share and busy fraction per epoch"},
    {.name = "tensorboard-every",
     .type = CLT_FLAG_INT,
     .offset = TR(tensorboard_every),
     .seen = CLT_SEEN(clt_train_opts, tensorboard_every_given),
     .min = 0,
     .max = 100000000,
     .meta = "N",
     .shown = "0: none",
     .help = "with --tensorboard: also the batch loss every N steps"},
    {.name = "trace",
     .type = CLT_FLAG_STRING,
     .offset = TR(trace_path),
     .meta = "FILE.json",
     .help = "write a timeline of the first steps (Chrome trace events, for Perfetto or "
             "chrome://tracing): per replica its host phases, the all-reduce's steps, its kernels "
             "by layer and pass and its copies; the photo decoders"},
    {.name = "trace-steps",
     .type = CLT_FLAG_INT,
     .offset = TR(trace_steps),
     .seen = CLT_SEEN(clt_train_opts, trace_steps_given),
     .min = 1,
     .max = 100000,
     .def = 20,
     .meta = "N",
     .help = "with --trace: the steps the trace covers"},
    {.name = "allreduce-timeout",
     .type = CLT_FLAG_DOUBLE,
     .offset = TR(allreduce_timeout),
     .min = 0,
     .max = 1e6,
     .def = CLT_RING_DEFAULT_TIMEOUT,
     .meta = "S",
     .help = "stop, naming it, when a replica keeps the others waiting in a step longer than S "
             "seconds (a hung device), or under mpirun when a process does (a host that stopped "
             "answering: every other process stops within S seconds naming its rank and host); "
             "0: wait for ever"},
    {.name = "wire",
     .type = CLT_FLAG_STRING,
     .offset = TR(wire),
     .def_str = "fp32",
     .meta = "fp32|fp16",
     .help = "under mpirun, how gradients cross between processes: fp32, or fp16 (Horovod's fp16 "
             "compression: half the bytes, each partial sum rounded to half precision and added "
             "in float32; every process still holds the same bits, but not those of one process "
             "on the whole batch); the same in every process"},
    {.name = "verbose",
     .type = CLT_FLAG_BOOL,
     .offset = TR(verbose),
     .help = "print the OpenCL compilers' build logs (warnings)"},
};

const clt_command clt_cmd_train = {
    .name = "train",
    .summary = "train a model (default: the Fashion-MNIST CNN on all devices)",
    .usage = "cltrain train [options]",
    .text = "Trains a model on the selected OpenCL devices and prints, after each epoch:\n"
            "  Epoch 1, Loss: 0.5123, Accuracy: 81.20, Test Loss: 0.3912, Test Accuracy: 86.02\n",
    .flags = train_flags,
    .nflags = COUNT(train_flags),
};

#define EV(f) offsetof(clt_eval_opts, f)
static const clt_flag eval_flags[] = {
    CHECKPOINT_FLAGS(clt_eval_opts),
    {.name = "data",
     .type = CLT_FLAG_STRING,
     .offset = EV(data_dir),
     .seen = CLT_SEEN(clt_eval_opts, data_given),
     .def_str = DEFAULT_DATA,
     .meta = "DIR",
     .shown = "the checkpoint's; " DEFAULT_DATA " where it records none",
     .help = "Fashion-MNIST-style IDX folder, or a photo folder (images resized to the "
             "checkpoint's size)"},
    {.name = "validation-split",
     .type = CLT_FLAG_DOUBLE,
     .offset = EV(validation_split),
     .seen = CLT_SEEN(clt_eval_opts, validation_split_given),
     .min = 0,
     .max = 0.99,
     .meta = "F",
     .shown = "the checkpoint's; 0, the whole folder, where it records none",
     .help = "evaluate only the fraction held out in training with this value (a photo folder's "
             "chosen with --seed, IDX files' the last of the training files); 0: the test set "
             "(IDX: the t10k files; a photo folder: all of it)"},
    {.name = "seed",
     .type = CLT_FLAG_U64,
     .offset = EV(seed),
     .seen = CLT_SEEN(clt_eval_opts, seed_given),
     .meta = "N",
     .shown = "the checkpoint's",
     .help = "photo folders: the --seed of the training that held --validation-split out"},
    {.name = "max-image-pixels",
     .type = CLT_FLAG_LONG,
     .offset = EV(max_image_pixels),
     .min = 1,
     .max = 1e12,
     .meta = "N",
     .shown = MAX_PIXELS_SHOWN,
     .help = "photo folders: refuse an image of more pixels"},
    {.name = "devices",
     .type = CLT_FLAG_STRING,
     .offset = EV(devices),
     .def_str = "all",
     .meta = "SEL",
     .help = "all, cpu, gpu, accelerator or indices like 0,2; under mpirun 'A;B' per rank, as "
             "for train"},
    {.name = "batch-per-replica",
     .type = CLT_FLAG_INT,
     .offset = EV(batch_per_replica),
     .seen = CLT_SEEN(clt_eval_opts, batch_per_replica_given),
     .min = 1,
     .max = 65536,
     .def = 64,
     .meta = "N",
     .shown = "the checkpoint's global batch over the replicas; 64 where it records none",
     .help = "examples per device per step"},
    {.name = "test-limit",
     .type = CLT_FLAG_LONG,
     .offset = EV(test_limit),
     .seen = CLT_SEEN(clt_eval_opts, test_limit_given),
     .min = 0,
     .max = 2147483647,
     .meta = "N",
     .shown = "the checkpoint's; all where it records none",
     .help = "use only the first N test examples (0: all)"},
    {.name = "logits",
     .type = CLT_FLAG_STRING,
     .offset = EV(logits_path),
     .meta = "FILE.npy",
     .help = "also write every example's logits, float32 (examples, classes), as a NumPy .npy "
             "file, and FILE.paths.txt naming each row's example, one a line: a photo folder's "
             "image path relative to --data (rows by class, then path; a validation split in its "
             "shuffled order), IDX data's index in the t10k files (with a validation split: in "
             "the training files)"},
    {.name = "verbose",
     .type = CLT_FLAG_BOOL,
     .offset = EV(verbose),
     .help = "print the OpenCL compilers' build logs (warnings)"},
};

const clt_command clt_cmd_eval = {
    .name = "eval",
    .summary = "evaluate a checkpoint on the test set",
    .usage = "cltrain eval [--checkpoint DIR|FILE] [--best] [options]",
    .text = "Restores a checkpoint into a fresh model on the selected devices and prints the "
            "test-set accuracy (percent) and mean loss:\n"
            "  Accuracy: 90.12\n"
            "  Loss: 0.2876\n"
            "\n"
            "The test data is by default the training run's, as its checkpoint records it "
            "(--data, --test-limit, --validation-split, --seed, the global batch; the image size "
            "and preprocessing are the model's), so the figures are those training printed for "
            "that epoch (a run with --validation-split: its validation split's; --validation-split "
            "0 scores the test set); flags given override it.\n",
    .flags = eval_flags,
    .nflags = COUNT(eval_flags),
};

#define PR(f) offsetof(clt_predict_opts, f)
static const clt_flag predict_flags[] = {
    CHECKPOINT_FLAGS(clt_predict_opts),
    {.name = "top-k",
     .type = CLT_FLAG_INT,
     .offset = PR(top_k),
     .min = 1,
     .max = 1000000,
     .def = 1,
     .meta = "K",
     .help = "the K most likely classes of each image, most likely first (more than the model "
             "has: all of them)"},
    {.name = "format",
     .type = CLT_FLAG_STRING,
     .offset = PR(format),
     .def_str = "table",
     .meta = "table|csv|jsonl",
     .help = "aligned columns with a header line; CSV with a header line; or one JSON object per "
             "image"},
    {.name = "output",
     .alias = "o",
     .type = CLT_FLAG_STRING,
     .offset = PR(output),
     .meta = "FILE",
     .shown = "standard output",
     .help = "write the predictions to FILE, atomically (replaced if it exists; a link, device "
             "or pipe is written through)"},
    {.name = "devices",
     .type = CLT_FLAG_STRING,
     .offset = PR(devices),
     .def_str = "all",
     .meta = "SEL",
     .help = "all, cpu, gpu, accelerator or indices like 0,2: the images are batched across them"},
    {.name = "batch-per-replica",
     .type = CLT_FLAG_INT,
     .offset = PR(batch_per_replica),
     .min = 1,
     .max = 65536,
     .def = 32,
     .meta = "N",
     .help = "images per device per step"},
    {.name = "max-image-pixels",
     .type = CLT_FLAG_LONG,
     .offset = PR(max_image_pixels),
     .min = 1,
     .max = 1e12,
     .meta = "N",
     .shown = MAX_PIXELS_SHOWN,
     .help = "skip an image of more pixels (width x height), a decompression bomb's defence"},
};

const clt_command clt_cmd_predict = {
    .name = "predict",
    .summary = "say what new images are: a checkpoint's most likely classes",
    .usage = "cltrain predict [--checkpoint DIR|FILE] [--best] FILE|FOLDER... [options]",
    .text =
        "Runs a checkpoint's model on images and prints each one's path and most likely classes "
        "with their probabilities (the softmax of the logits that `cltrain eval --logits` "
        "writes):\n"
        "  path              top 1    prob\n"
        "  new/daisy_01.jpg  daisy  0.9731\n"
        "\n"
        "Each FILE is read whatever its name (JPEG or PNG, told by its content); each FOLDER "
        "gives its .jpg, .jpeg and .png files as training lists a class folder (recursively, "
        "hidden folders skipped, other files ignored), named FOLDER/.../file, by subfolder and "
        "then file name, sorted by byte value. The images come out in that order, the "
        "arguments' order kept. They are decoded and resized as training decodes a photo "
        "folder, to the model's size, and fed with its preprocessing; a grey model (trained on "
        "IDX files, 28x28x1) gets each resized pixel's luma, (19595 R + 38470 G + 7471 B + "
        "32768) >> 16, as Pillow's convert(\"L\"). The class names are the training photo "
        "folder's subfolders, Fashion-MNIST's for a grey 10-class model, else the label's "
        "number.\n"
        "\n"
        "A path that does not exist, a folder without images, or a file that is not an image or "
        "does not decode is named on standard error (cltrain: skipped: ...) and left out; the "
        "others are predicted, and the exit status is then 1. Nothing to predict, or no image "
        "that decodes, is an error that writes nothing. A last line on standard error says how "
        "many images were predicted and how fast. docs/predict.md describes the formats.\n",
    .flags = predict_flags,
    .nflags = COUNT(predict_flags),
    .positional = "FILE|FOLDER...",
    .positional_offset = PR(paths),
    .positional_count = CLT_SEEN(clt_predict_opts, npaths),
};

#define EX(f) offsetof(clt_export_opts, f)
static const clt_flag export_flags[] = {
    CHECKPOINT_FLAGS(clt_export_opts),
    {.name = "onnx",
     .type = CLT_FLAG_STRING,
     .offset = EX(onnx),
     .meta = "FILE",
     .required = 1,
     .help = "the ONNX file to write (replaced if it exists)"},
    {.name = "verbose",
     .type = CLT_FLAG_BOOL,
     .offset = EX(verbose),
     .help = "list the graph's nodes"},
};

const clt_command clt_cmd_export = {
    .name = "export",
    .summary = "write a checkpoint's model as an ONNX file",
    .usage = "cltrain export [--checkpoint DIR|FILE] [--best] --onnx FILE [--verbose]",
    .text = "Writes the checkpoint's model as an ONNX model (opset 13) of its inference graph, "
            "which ONNX Runtime runs to the predictions of `cltrain eval`. Input 'input': float32 "
            "(N, H, W, C), NHWC, of the model's own size: pixel values 0..255 (grey or RGB), a "
            "photo resized as cltrain resizes it (bilinear, half-pixel centres, no antialiasing, "
            "rounded to uint8: docs/onnx.md); the model's preprocessing is inside the graph. "
            "Output 'logits': float32 (N, classes), and 'probabilities' (their softmax) for a "
            "model file that ended in a softmax. The metadata holds the class names, the input's "
            "size and layout, the resize and the preprocessing. Needs no OpenCL device; the file "
            "is written atomically.\n",
    .flags = export_flags,
    .nflags = COUNT(export_flags),
};

/* --output is required too, checked with the log (main.c) in one message. */
static const clt_flag plot_flags[] = {
    {.name = "output",
     .alias = "o",
     .type = CLT_FLAG_STRING,
     .offset = offsetof(clt_plot_opts, output),
     .meta = "FILE.svg",
     .required = 1,
     .help = "the SVG file to write (replaced if it exists)"},
};

const clt_command clt_cmd_plot = {
    .name = "plot",
    .summary = "draw a training log's curves as an SVG picture",
    .usage = "cltrain plot LOG.jsonl -o FILE.svg",
    .text =
        "Draws a `cltrain train --log` file as one SVG picture: loss and accuracy per epoch for "
        "training and test (or validation), training images/s, and each replica's share of "
        "the examples. A log appended by --resume counts each epoch's last record. Needs no "
        "OpenCL device; the file is written atomically.\n",
    .flags = plot_flags,
    .nflags = COUNT(plot_flags),
    .positional = "LOG.jsonl",
    .positional_offset = offsetof(clt_plot_opts, log),
};

const clt_command clt_cmd_devices = {
    .name = "devices",
    .summary = "list the OpenCL devices cltrain can use",
    .usage = "cltrain devices",
    .text = "Lists every OpenCL device: index (as --devices takes it), type, platform, name, "
            "compute units and global memory.\n",
};

#define BE(f) offsetof(clt_bench_opts, f)
static const clt_flag bench_flags[] = {
    {.name = "devices",
     .type = CLT_FLAG_STRING,
     .offset = BE(devices),
     .def_str = "all",
     .meta = "SEL",
     .help = "as for cltrain train ('A;B' per rank)"},
    {.name = "floats",
     .type = CLT_FLAG_STRING,
     .offset = BE(floats),
     .meta = "N,...",
     .shown = "the parameter counts of fmnist-cnn and of resnet50 with 5 classes",
     .help = "buffer sizes in floats"},
    {.name = "repeat",
     .type = CLT_FLAG_INT,
     .offset = BE(repeat),
     .min = 1,
     .max = 1000,
     .def = 10,
     .meta = "N",
     .help = "timed runs per size"},
    {.name = "warmup",
     .type = CLT_FLAG_INT,
     .offset = BE(warmup),
     .min = 0,
     .max = 100,
     .def = 2,
     .meta = "N",
     .help = "untimed runs first"},
};

const clt_command clt_cmd_bench_allreduce = {
    .name = "bench allreduce",
    .summary = "time the all-reduce (cltrain bench allreduce, under mpirun)",
    .usage = "[mpirun -np N] cltrain bench allreduce [options]",
    .text = "Times the all-reduce that training runs after every step: every replica's device "
            "buffer summed by each process's device ring, then a ring across the processes (MPI "
            "send/receive), the total uploaded to every device; beside it the cross-process ring "
            "of host memory alone and MPI_Allreduce of the same floats. Prints median times, "
            "bandwidths and MPI_Allreduce's time over cltrain's; checks every sum.\n",
    .flags = bench_flags,
    .nflags = COUNT(bench_flags),
};

#define TU(f) offsetof(clt_tune_opts, f)
static const clt_flag tune_flags[] = {
    {.name = "model",
     .type = CLT_FLAG_STRING,
     .offset = TU(model),
     .def_str = "fmnist-cnn",
     .meta = "NAME",
     .help = "the model to tune: a built-in one (%s) or a Keras model file (.json)",
     .insert = &clt_model_names},
    {.name = "image-size",
     .type = CLT_FLAG_INT,
     .offset = TU(image_size),
     .seen = CLT_SEEN(clt_tune_opts, image_size_given),
     .min = 8,
     .max = 4096,
     .def = 224,
     .meta = "N",
     .shown = "28 for fmnist-cnn (one channel), a model file's own, else 224 (three)",
     .help = "the images' side"},
    {.name = "batch",
     .type = CLT_FLAG_INT,
     .offset = TU(batch),
     .min = 1,
     .max = 65536,
     .def = 64,
     .meta = "N",
     .help = "examples per device per step, as train's --batch-per-replica (results hold for "
             "the batches of its power-of-two bucket)"},
    {.name = "classes",
     .type = CLT_FLAG_INT,
     .offset = TU(classes),
     .seen = CLT_SEEN(clt_tune_opts, classes_given),
     .min = 2,
     .max = 100000,
     .def = 10,
     .meta = "N",
     .shown = "10; a model file's own",
     .help = "the model's classes"},
    {.name = "devices",
     .type = CLT_FLAG_STRING,
     .offset = TU(devices),
     .def_str = "all",
     .meta = "SEL",
     .help = "as for cltrain train; each device is tuned in turn"},
    {.name = "tune-budget",
     .type = CLT_FLAG_DOUBLE,
     .offset = TU(budget),
     .min = 0,
     .max = 86400,
     .def = 120,
     .meta = "SECONDS",
     .help = "time each device may spend tuning (0: no limit); passes left untuned keep their "
             "default and are not cached"},
    {.name = "tune-file",
     .type = CLT_FLAG_STRING,
     .offset = TU(tune_file),
     .meta = "FILE",
     .help = "read and write this tuning file rather than the cache folder's "
             "($XDG_CACHE_HOME/cltrain/tune, else ~/.cache/cltrain/tune); a file of another "
             "device is an error"},
};

const clt_command clt_cmd_tune = {
    .name = "tune",
    .summary = "choose each convolution's fastest algorithm on each device, ahead of training",
    .usage = "cltrain tune [--model M] [--image-size N] [--batch N] [--devices SEL] "
             "[--tune-budget S] [--tune-file F]",
    .text = "For each pass (forward, weight gradient, input gradient) of each Conv2D of the "
            "model, checks the algorithms that fit its shape on each device (im2col and a GEMM, "
            "the GEMM over the image in place, Winograd F(2x2,3x3) and F(4x4,3x3)) against a "
            "double-precision convolution on two examples (a wrong result never runs), then "
            "times those that pass inside training steps (forward and backward of the model on "
            "a synthetic batch, as cltrain train does between epochs) and picks the fastest in "
            "the step; whole steps of the picked algorithms and of the defaults, alternating, "
            "confirm it, or the defaults are kept. The GEMM tilings are then timed for the picked "
            "algorithms' products (on a CPU cltrain's register tiles, on a GPU cltrain's "
            "local-memory tiles against CLBlast), and one set of steps judges both (the defaults, "
            "the picked algorithms, and those with the tilings, in turn). The verdicts go to "
            "the device's tuning cache, keyed by the device, its kernels and the layer's shape "
            "with the batch bucketed. Prints per layer and pass the chosen algorithm and its "
            "time in the step beside the default's, then the whole step's (\"step: X ms "
            "default, Y ms tuned, Zx\"), then each product's tiling and the tilings' step; a "
            "shape cached already is not timed again. docs/performance.md, Tuning.\n",
    .flags = tune_flags,
    .nflags = COUNT(tune_flags),
};

const clt_command *const clt_commands[] = {
    &clt_cmd_devices,         &clt_cmd_train,  &clt_cmd_eval,
    &clt_cmd_predict,         &clt_cmd_export, &clt_cmd_plot,
    &clt_cmd_bench_allreduce, &clt_cmd_tune,   NULL,
};

const char clt_cltrain_summary[] = "train convolutional networks on every OpenCL device of a host";

const char clt_cltrain_text[] =
    "`cltrain <command> --help` describes a command's options. Under mpirun, train, eval and "
    "bench run as one job across the processes (see README, several hosts).\n";

const clt_doc_item clt_env_vars[] = {
    {"CLTRAIN_DEVICES",
     "a device selection as --devices takes it, for this process alone: it overrides --devices "
     "(under mpirun, for hosts with different devices: mpirun -x CLTRAIN_DEVICES=...)"},
    {"CLTRAIN_KERNELS",
     "cpu, gpu or auto: the kernel variants every device runs (auto, as when unset: by the "
     "device's type); any other value is an error"},
    {"CLTRAIN_WINOGRAD",
     "off, 2 or 4: 3x3 stride-1 Conv2D layers run their forward pass, input gradient and weight "
     "gradient as Winograd F(2x2,3x3) or F(4x4,3x3), fewer multiplies at a rounding error of "
     "their own (unset or off: the direct kernels); any other value is an error"},
    {"CLTRAIN_TUNE",
     "auto or off: cltrain train's --tune where the flag is not given (the tests set off, so "
     "that the cache of the machine they run on does not choose their kernels); any other "
     "value is an error"},
    {"CLTRAIN_CPU_VECTOR_WIDTH",
     "4, 8 or 16: the vector width CPU devices are taken to have, which sets the GEMM's register "
     "tile (for PoCL compiling for a narrower CPU than the host)"},
    {"CLTRAIN_HUGE_PAGES",
     "0: leaves every buffer of a CPU device to the driver rather than on transparent huge pages "
     "of host memory (buffers of 1 MiB and more)"},
    {"CLTRAIN_ALLREDUCE_BUCKETS",
     "N: the least size in floats of the buckets in which the all-reduce overlaps the backward "
     "pass, the sum across processes included; 0: the whole buffer after it (unset: under mpirun "
     "with two processes buckets of 4 MiB, where a process has CPU devices only with --wire "
     "fp16; otherwise buckets of 1 MiB within a process unless a replica of it is a CPU device; "
     "under mpirun process 0's value holds for all)"},
    {"POCL_DEVICES",
     "PoCL's devices: \"pthread pthread\" makes two CPU devices of the host (PoCL's own "
     "variable)"},
    {NULL, NULL},
};

const clt_doc_item clt_exit_statuses[] = {
    {"0", "success, and --help and --version"},
    {"1", "an error, said in one line on standard error (cltrain: error: ...); for predict also "
          "images skipped, each named there (cltrain: skipped: ...), the others predicted"},
    {"2", "no command, an unknown one, or cltrain bench without allreduce"},
    {"128+N",
     "train stopped by signal N (130 for SIGINT, 143 for SIGTERM) at the end of a step, having "
     "saved a checkpoint that --resume continues from (none with --checkpoint-every 0 or during "
     "set-up)"},
    {NULL, NULL},
};
