/* cltrain.h: the public C API of libcltrain.
 *
 * Train convolutional networks on every OpenCL device of a host (and across hosts
 * under mpirun) from a C or C++ program: the pieces of a custom training loop
 * (TensorFlow's strategy.run, strategy.reduce, the optimizer's apply and the
 * checkpoint) and the high-level calls the `cltrain` command is built on.
 * docs/api.md is the guide; every function is described here.
 *
 * Conventions
 * - Handles are opaque. Every create function takes the address of the handle to
 *   fill; every free function takes the handle's address and sets it to NULL
 *   (a NULL or already-freed address is a no-op).
 * - Every fallible function returns an int status: CLTRAIN_OK (0) or one of the
 *   CLTRAIN_ERR_* codes. The one-line message of the last failed call on a handle
 *   is cltrain_errmsg(handle); it names the function and the cause. A call that
 *   fails before it has a handle to keep the message on (a NULL handle, a failed
 *   cltrain_open) keeps it for the calling thread: cltrain_errmsg(NULL).
 * - Threads: a handle is used by one thread at a time (the caller serialises);
 *   different handles may be used from different threads, except that a trainer's
 *   model, dataset and context must not be freed while it is in use.
 *   cltrain_request_stop is async-signal-safe and may be called from anywhere.
 * - Options: the functions that take a `const char *options` read settings
 *   written "name=value name=value" (separated by spaces or newlines; a value
 *   with spaces in double quotes; NULL or "" for the defaults). The names are
 *   those of the `cltrain` command's flags (docs/flags.md) and each function lists
 *   the ones it takes; an unknown name or a bad value is refused with a message.
 * - Images are uint8 NHWC (height x width x channels per example, as decoded),
 *   made into the network's input by the model's preprocessing, or float NHWC
 *   already made into it (CLTRAIN_F32). Labels are int32 class indices. */
#ifndef CLTRAIN_H
#define CLTRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CLTRAIN_BUILD) && defined(__GNUC__)
#define CLTRAIN_API __attribute__((visibility("default")))
#else
#define CLTRAIN_API
#endif

#define CLTRAIN_VERSION_MAJOR 0
#define CLTRAIN_VERSION_MINOR 2
#define CLTRAIN_VERSION_PATCH 0
#define CLTRAIN_VERSION "0.2.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if comparisons. */
#define CLTRAIN_VERSION_NUMBER 200

/* The library's version ("0.2.0"): the header a program was built with may be older. */
CLTRAIN_API const char *cltrain_version(void);

/* ---- statuses ---------------------------------------------------------------- */

enum {
  CLTRAIN_OK = 0,
  CLTRAIN_ERR_ARG = 1,      /* a bad argument, option, shape or batch size; a NULL handle */
  CLTRAIN_ERR_STATE = 2,    /* a call out of order (apply before a backward pass) */
  CLTRAIN_ERR_IO = 3,       /* a file cannot be opened, read or written */
  CLTRAIN_ERR_FORMAT = 4,   /* a file's content is not what it claims */
  CLTRAIN_ERR_NOMEM = 5,    /* host or device memory ran out */
  CLTRAIN_ERR_DEVICE = 6,   /* no such device, a device that cannot do it, an OpenCL failure */
  CLTRAIN_ERR_NUMERIC = 7,  /* a non-finite loss or gradient */
  CLTRAIN_ERR_PEER = 8,     /* another process of an MPI run failed, disagrees or is lost */
  CLTRAIN_ERR_STOPPED = 9,  /* stopped by cltrain_request_stop (Ctrl-C): not a failure */
  CLTRAIN_ERR_INTERNAL = 10 /* a bug in cltrain: please report it with the message */
};

/* The message of the last failed call on handle (any cltrain handle), or of the
 * calling thread's last failed call that had no handle (handle NULL); "" if none.
 * Valid until the next call on that handle (or thread). */
CLTRAIN_API const char *cltrain_errmsg(const void *handle);
/* The status's name ("CLTRAIN_ERR_ARG"). */
CLTRAIN_API const char *cltrain_status_name(int status);

/* ---- the context: devices and processes --------------------------------------- */

typedef struct cltrain_ctx cltrain_ctx;

/* Enumerates every OpenCL device of the host, and under mpirun joins the run's
 * processes: if the program has not initialised MPI, cltrain_open does
 * (MPI_THREAD_SERIALIZED: cltrain's threads call MPI one at a time) and
 * cltrain_close finalises it; if it has (at that thread level or above),
 * cltrain uses MPI_COMM_WORLD, with errors returned rather than fatal, and
 * leaves finalising to it. One context per process. A note on how mpirun placed
 * this process (fewer cores than its share of the host) goes to stderr.
 * options: verbose=1 (print the OpenCL compilers' build logs). */
CLTRAIN_API int cltrain_open(const char *options, cltrain_ctx **out);
/* Frees the context (after every handle made from it). Under MPI a process
 * that failed should call cltrain_abort instead, so the others do not wait. */
CLTRAIN_API void cltrain_close(cltrain_ctx **ctx);
/* Ends every process of an MPI run after a failure (a no-op in one process). */
CLTRAIN_API void cltrain_abort(cltrain_ctx **ctx);

/* This process's rank and the run's processes (0 and 1 without MPI). */
CLTRAIN_API int cltrain_rank(const cltrain_ctx *ctx);
CLTRAIN_API int cltrain_processes(const cltrain_ctx *ctx);
/* Whether the library was built with MPI. */
CLTRAIN_API int cltrain_built_with_mpi(void);

/* The host's devices, indexed as `cltrain devices` lists them (-1 on a bad ctx). */
CLTRAIN_API int cltrain_device_count(const cltrain_ctx *ctx);
/* Device i's name, platform name and type ("cpu", "gpu", "accelerator", "other"),
 * owned by ctx; NULL for a bad index. */
CLTRAIN_API const char *cltrain_device_name(const cltrain_ctx *ctx, int i);
CLTRAIN_API const char *cltrain_device_platform(const cltrain_ctx *ctx, int i);
CLTRAIN_API const char *cltrain_device_type(const cltrain_ctx *ctx, int i);
/* Its compute units and global memory in bytes (0 for a bad index). */
CLTRAIN_API unsigned cltrain_device_compute_units(const cltrain_ctx *ctx, int i);
CLTRAIN_API double cltrain_device_memory(const cltrain_ctx *ctx, int i);

/* ---- stopping ----------------------------------------------------------------- */

/* Asks the training in this process to stop: the step in flight finishes (in
 * every replica and, under MPI, every process), then the stepping calls and
 * cltrain_fit return CLTRAIN_ERR_STOPPED; a checkpoint can then be saved.
 * Async-signal-safe: call it from a signal handler. */
CLTRAIN_API void cltrain_request_stop(void);
/* Whether a stop was asked (and not cleared). */
CLTRAIN_API int cltrain_stop_requested(void);
/* The signal that asked (SIGINT, SIGTERM) under cltrain_handle_signals, else 0. */
CLTRAIN_API int cltrain_stop_signal(void);
/* Forgets a stop request, so training can go on. */
CLTRAIN_API void cltrain_clear_stop(void);
/* Installs what the command uses for Ctrl-C and SIGTERM: the first signal calls
 * cltrain_request_stop, a second ends the process. Call it before any thread is
 * started (before cltrain_open). */
CLTRAIN_API void cltrain_handle_signals(void);

/* ---- datasets -------------------------------------------------------------------- */

typedef struct cltrain_dataset cltrain_dataset;

/* Which examples of a dataset: its training set, or its test set (the held-out
 * validation split where one was asked for). */
typedef enum cltrain_part { CLTRAIN_TRAIN = 0, CLTRAIN_TEST = 1 } cltrain_part;

/* Opens a data folder: Fashion-MNIST-style IDX files (train-/t10k-*-ubyte[.gz]) or a
 * photo folder (one subfolder of JPEG/PNG files per class), recognised by content.
 * options: train-limit=N test-limit=N image-size=N validation-split=F seed=N
 * augment=TEXT max-image-pixels=N (as the train command's flags). */
CLTRAIN_API int cltrain_dataset_open(cltrain_ctx *ctx, const char *dir, const char *options,
                                     cltrain_dataset **out);
/* A dataset held in the caller's memory: count uint8 NHWC images and their labels
 * (in [0, classes), classes at most 256), copied (the caller's buffers may be freed
 * after the call); it has a training part only. */
CLTRAIN_API int cltrain_dataset_from_memory(cltrain_ctx *ctx, const uint8_t *images,
                                            const int32_t *labels, int count, int height, int width,
                                            int channels, int classes, cltrain_dataset **out);
CLTRAIN_API void cltrain_dataset_free(cltrain_dataset **d);
/* The part's examples (0 where it has none). */
CLTRAIN_API int cltrain_dataset_count(const cltrain_dataset *d, cltrain_part part);
/* Image shape and classes; a class's name (a photo folder's subfolder) or NULL. */
CLTRAIN_API int cltrain_dataset_shape(const cltrain_dataset *d, int *height, int *width,
                                      int *channels);
CLTRAIN_API int cltrain_dataset_classes(const cltrain_dataset *d);
CLTRAIN_API const char *cltrain_dataset_class_name(const cltrain_dataset *d, int k);

/* ---- models ------------------------------------------------------------------- */

typedef struct cltrain_model cltrain_model;

/* Builds a model: model is a built-in name ("fmnist-cnn", "resnet50", ...), a Keras model
 * file (.json) or a model description (docs/design.md). Its input shape and
 * classes come from data when given, else from options input=HxWxC classes=N.
 * options: weights=FILE.npz (starting weights, else initialised from seed=N),
 * preprocess=raw|unit|caffe (model files), freeze-until=LAYER|none. */
CLTRAIN_API int cltrain_model_create(cltrain_ctx *ctx, const char *model,
                                     const cltrain_dataset *data, const char *options,
                                     cltrain_model **out);
/* The model a checkpoint (a folder: its newest; or a .npz file) was trained,
 * with its trained weights as the starting weights. */
CLTRAIN_API int cltrain_model_from_checkpoint(cltrain_ctx *ctx, const char *checkpoint,
                                              cltrain_model **out);
CLTRAIN_API void cltrain_model_free(cltrain_model **m);
/* Its name, parameter count (Keras' count), input shape and classes. */
CLTRAIN_API const char *cltrain_model_name(const cltrain_model *m);
CLTRAIN_API size_t cltrain_model_param_count(const cltrain_model *m);
CLTRAIN_API int cltrain_model_input(const cltrain_model *m, int *height, int *width, int *channels);
CLTRAIN_API int cltrain_model_classes(const cltrain_model *m);
/* The summary `cltrain train` prints (layers, shapes, parameters) into buf;
 * returns the length it needs (as snprintf), or -1 on a bad handle. */
CLTRAIN_API int cltrain_model_summary(const cltrain_model *m, char *buf, size_t size);

/* ---- the trainer: a model mirrored on devices ---------------------------------- */

typedef struct cltrain_trainer cltrain_trainer;

/* Places a replica of m on each chosen device, with its parameters, gradients
 * and optimizer state, all equal. options:
 *   devices=SPEC           as --devices (default: all; under MPI "A;B;..." one per rank)
 *   batch-per-replica=N    the global batch is N x replicas (default 64)
 *   split=auto|equal|W,W   how a global batch is cut into slices (default auto)
 *   optimizer=adam|sgd|rmsprop lr=F momentum=F nesterov=1 weight-decay=F
 *   lr-schedule=NAME:ARGS  as --lr-schedule
 *   seed=N                 the example order, Dropout's masks (default 42)
 *   allreduce-timeout=S    seconds a replica, or under MPI a process, may hold up the
 *                          all-reduce (0: none)
 *   check-replicas=1       verify identical parameters after every update
 *   wire=fp32|fp16         under MPI, how gradients cross between processes (as
 *                          --wire: fp16 halves the bytes, rounding each partial sum to
 *                          half precision; every process must give the same)
 *   local=1                this process's devices only, even under MPI (e.g. process 0
 *                          evaluating a restored checkpoint alone); otherwise creating a
 *                          trainer is collective: every process of the run must call it
 * The model's weights are copied: m may be freed after the call. */
CLTRAIN_API int cltrain_trainer_create(cltrain_ctx *ctx, const cltrain_model *m,
                                       const char *options, cltrain_trainer **out);
CLTRAIN_API void cltrain_trainer_free(cltrain_trainer **t);
/* The run's replicas (every process's), and the global batch. */
CLTRAIN_API int cltrain_trainer_replicas(const cltrain_trainer *t);
CLTRAIN_API int cltrain_trainer_global_batch(const cltrain_trainer *t);

/* -- stepping through a dataset: the custom loop's pieces --
 *
 * A training step is forward_backward, then allreduce, then apply (or
 * cltrain_trainer_step for the three at once, the fast path: the all-reduce then
 * overlaps the backward pass). allreduce needs a forward_backward since the last
 * allreduce, apply an allreduce since the last forward_backward; otherwise they
 * are refused (CLTRAIN_ERR_STATE). forward_backward overwrites the gradient, so a
 * loop that accumulates reads each summed gradient (get_gradients) and sets the
 * total before apply.
 *
 * A step whose forward_backward (or step) asks for neither figure (loss and
 * correct NULL) does not wait for the devices: the host returns and enqueues the
 * next step while they run this one, as the command's epochs do (so a loop that
 * asks for none runs as fast as `cltrain train`). Its figures are read, waiting
 * for the devices, by the next call that needs them: cltrain_trainer_metrics, a
 * step that asks for figures, evaluate, predict, save, restore, export_onnx,
 * get or set of the parameters or gradients, begin_epoch, and the epoch's last
 * step (or the apply of a caller's batch, which ends its pass). A non-finite
 * loss or gradient in such a step is reported by that call (CLTRAIN_ERR_NUMERIC,
 * naming the first such step, once), which then does nothing else. Under MPI
 * (a trainer over several processes) every step waits, as when figures are
 * asked: their sum across the processes is collective. */

/* Begins epoch `epoch` (0-based) of d's part: its examples in the order of (seed,
 * epoch), as the command's epochs, cut into global batches. *steps gets the
 * number of batches (the last may be short). The part's images are held on t's
 * devices until the epoch's last step has run (or t begins another epoch or is
 * freed): meanwhile d must not be freed, and another trainer cannot use that
 * part (CLTRAIN_ERR_STATE). forward_backward and step, when a stop was asked,
 * return CLTRAIN_ERR_STOPPED without starting the step. */
CLTRAIN_API int cltrain_trainer_begin_epoch(cltrain_trainer *t, cltrain_dataset *d,
                                            cltrain_part part, int epoch, int *steps);
/* Runs the forward and backward passes of the epoch's next global batch, each
 * replica on its slice, with every example's loss divided by the global batch
 * (TensorFlow's compute_average_loss): on return each replica holds the gradient
 * of its slice. *loss gets the batch's mean loss and *correct its correctly
 * classified examples (either may be NULL; both NULL: the figures are read later,
 * see above). Returns CLTRAIN_ERR_STATE when the epoch has no batch left. */
CLTRAIN_API int cltrain_trainer_forward_backward(cltrain_trainer *t, double *loss, int *correct);
/* The same on a batch in the caller's memory: count examples (1 .. the global
 * batch) of the model's input shape, uint8 (format CLTRAIN_U8) or float already
 * preprocessed (CLTRAIN_F32), NHWC; labels: count class indices. Read during the
 * call only. */
typedef enum cltrain_format { CLTRAIN_U8 = 0, CLTRAIN_F32 = 1 } cltrain_format;
CLTRAIN_API int cltrain_trainer_forward_backward_batch(cltrain_trainer *t, const void *images,
                                                       cltrain_format format, const int32_t *labels,
                                                       int count, double *loss, int *correct);
/* Sums the replicas' gradients into every replica (the host-mediated ring, and
 * across processes under MPI): TensorFlow's strategy.reduce(SUM). */
CLTRAIN_API int cltrain_trainer_allreduce(cltrain_trainer *t);
/* Applies the optimizer's update with the summed gradients on every replica
 * (optimizer.apply_gradients), advancing the step count and the schedule. */
CLTRAIN_API int cltrain_trainer_apply(cltrain_trainer *t);
/* The three for the epoch's next batch (loss and correct as forward_backward's). */
CLTRAIN_API int cltrain_trainer_step(cltrain_trainer *t, double *loss, int *correct);

/* The gradient (after allreduce: the summed one) and the parameters, as one flat
 * array of cltrain_trainer_floats floats (the layers' in order, as a checkpoint
 * lists them; that is cltrain_model_param_count). get reads the first replica's;
 * set writes every replica's (set gradients between allreduce and apply, else
 * CLTRAIN_ERR_STATE: clipping, accumulation). n must be the count. The entries
 * of BatchNormalization's moving statistics hold, in the gradient, the batch
 * statistics that apply folds into them (the all-reduce's average); a frozen
 * layer's gradient reads as zeros and is not set. set_params leaves the
 * optimizer's state. Under MPI every process must set the same values. */
CLTRAIN_API size_t cltrain_trainer_floats(const cltrain_trainer *t);
CLTRAIN_API int cltrain_trainer_get_gradients(cltrain_trainer *t, float *out, size_t n);
CLTRAIN_API int cltrain_trainer_set_gradients(cltrain_trainer *t, const float *in, size_t n);
CLTRAIN_API int cltrain_trainer_get_params(cltrain_trainer *t, float *out, size_t n);
CLTRAIN_API int cltrain_trainer_set_params(cltrain_trainer *t, const float *in, size_t n);

/* Optimizer steps applied so far, and the learning rate the next apply uses (the
 * schedule's); set_learning_rate overrides it from the next apply on. */
CLTRAIN_API long cltrain_trainer_steps_done(const cltrain_trainer *t);
CLTRAIN_API double cltrain_trainer_learning_rate(const cltrain_trainer *t);
CLTRAIN_API int cltrain_trainer_set_learning_rate(cltrain_trainer *t, double lr);

/* Polling progress: the current epoch's figures so far (over the steps run since
 * begin_epoch): mean loss per batch, accuracy, examples, and images per second of
 * wall time. Any may be NULL. The figures of steps that asked for none are read
 * first (waiting for the devices; a non-finite one is reported as above). */
CLTRAIN_API int cltrain_trainer_metrics(const cltrain_trainer *t, double *loss, double *accuracy,
                                        long *examples, double *images_per_second);

/* Loss (mean per example) and accuracy on d's part, its batches sliced across the
 * replicas (TensorFlow's distributed test step); d's part is held on the devices
 * during the call only. Not the part of an epoch still being stepped through. */
CLTRAIN_API int cltrain_trainer_evaluate(cltrain_trainer *t, cltrain_dataset *d, cltrain_part part,
                                         double *loss, double *accuracy);
/* The logits of count caller-supplied images (as in forward_backward_batch, any
 * count) into logits (count x classes floats), in inference mode. */
CLTRAIN_API int cltrain_trainer_predict(cltrain_trainer *t, const void *images,
                                        cltrain_format format, int count, float *logits);

/* -- checkpoints: the files the command writes --
 *
 * save writes a checkpoint of the parameters, the optimizer state and the step
 * into folder dir (created if missing; its index names the newest; keep: the
 * newest kept, 0 all), atomically: a crash leaves the previous one intact.
 * epoch: the epochs done, recorded for --resume and eval. Process 0 writes; every
 * process must call it. restore reads a checkpoint (a folder: its newest; or a
 * .npz file) into every replica, with the optimizer state and step count when
 * the checkpoint has them; the model must be the checkpoint's (any devices). */
CLTRAIN_API int cltrain_trainer_save(cltrain_trainer *t, const char *dir, int epoch, int keep);
CLTRAIN_API int cltrain_trainer_restore(cltrain_trainer *t, const char *checkpoint);

/* Writes the current parameters as an ONNX model (inference, as `cltrain export`). */
CLTRAIN_API int cltrain_trainer_export_onnx(cltrain_trainer *t, const char *path);

/* ---- the high-level calls: the command's train, eval, predict and export ---------
 *
 * Each takes the options of the command of the same name, set one by one by flag
 * name (docs/flags.md) or parsed from command-line arguments, and prints what the
 * command prints to `out` (NULL: nothing). */

typedef struct cltrain_options cltrain_options;

/* Options for command "train", "eval", "predict" or "export" (or "devices",
 * which has no flags: parsing gives its --help and refuses arguments). */
CLTRAIN_API int cltrain_options_create(const char *command, cltrain_options **out);
CLTRAIN_API void cltrain_options_free(cltrain_options **o);
/* Sets flag `name` (without "--") to value, checked as the command checks it. A
 * switch such as "resume" takes NULL, "1" or "true" to set it, "0" or "false" to
 * clear it. For predict, name "path" adds one image file or folder (the
 * command's FILE|FOLDER... arguments). value is copied. */
CLTRAIN_API int cltrain_options_set(cltrain_options *o, const char *name, const char *value);
/* Parses command-line arguments (the flags after the command's name) over the
 * values set so far; predict's paths are added to those set. Returns CLTRAIN_OK,
 * an error, or -1 when they asked for --help (printed to out). argv is copied. */
CLTRAIN_API int cltrain_options_parse(cltrain_options *o, int argc, char **argv, FILE *out);

/* model.fit: trains as `cltrain train` does (epochs, evaluation, checkpoints,
 * --resume, schedules, early stopping, logs). CLTRAIN_ERR_STOPPED after a stop
 * request: a checkpoint was saved that --resume continues. */
CLTRAIN_API int cltrain_fit(cltrain_ctx *ctx, cltrain_options *o, FILE *out);
/* model.evaluate on a checkpoint, as `cltrain eval`. */
CLTRAIN_API int cltrain_evaluate(cltrain_ctx *ctx, cltrain_options *o, FILE *out);
/* model.predict on image files, as `cltrain predict`; *skipped gets the images
 * that could not be used (named on stderr). */
CLTRAIN_API int cltrain_predict(cltrain_ctx *ctx, cltrain_options *o, FILE *out, int *skipped);
/* Writes a checkpoint as ONNX, as `cltrain export`. */
CLTRAIN_API int cltrain_export(cltrain_ctx *ctx, cltrain_options *o, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
