#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idx.h"
#include "net.h"
#include "rng.h"

void clt_train_defaults(clt_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->data_dir = "/usr/share/datasets/fashion-mnist";
  o->model = "fmnist-cnn";
  o->devices = "all";
  o->epochs = 10;
  o->lr = 1e-3;
  o->seed = 42;
  o->batch_per_replica = 64;
  o->checkpoint_dir = "./training_checkpoints";
  o->checkpoint_every = 2;
  o->out = stdout;
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Keras-style progress line, redrawn in place:
 *  312/938 [=========>....................] - 12s 38ms/step - loss: 0.6123 - accuracy: 0.7712 */
static void draw_progress(FILE *out, int step, int steps, double elapsed, double loss, double acc,
                          int done) {
  const int width = 30;
  int filled = steps ? (int)((double)step / steps * width) : width;
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : '.';
  if (filled < width && filled > 0) bar[filled - 1] = '>';
  bar[width] = '\0';
  fprintf(out, "\r%*d/%d [%s] - %.0fs %.0fms/step - loss: %.4f - accuracy: %.4f%s", 5, step, steps,
          bar, elapsed, step ? elapsed / step * 1e3 : 0.0, loss, acc, done ? "\n" : "");
  fflush(out);
}

/* Per-epoch figures, all global. */
typedef struct epoch_stats {
  double train_loss, train_acc, test_loss, test_acc, train_seconds, seconds;
  long train_examples;
} epoch_stats;

/* Sums per-batch metrics: mean of per-batch mean losses (what the reference
 * prints), accuracy over examples. */
static void sum_metrics(const float *metrics, int batches, int total, int global_batch,
                        double *mean_batch_loss, double *example_loss, double *acc) {
  double loss_of_batches = 0, loss_sum = 0, correct = 0;
  for (int b = 0; b < batches; b++) {
    int n = total - b * global_batch < global_batch ? total - b * global_batch : global_batch;
    loss_sum += metrics[2 * b];
    loss_of_batches += metrics[2 * b] / n;
    correct += metrics[2 * b + 1];
  }
  *mean_batch_loss = batches ? loss_of_batches / batches : 0;
  *example_loss = total ? loss_sum / total : 0;
  *acc = total ? correct / total : 0;
}

/* Prints device time per kernel for the epoch, largest first, and resets it. */
static void print_profile(FILE *out, clt_replica *r, double wall) {
  clt_profile *p = r->profile;
  double busy = 0;
  for (int i = 0; i < p->nnames; i++) busy += p->seconds[i];
  fprintf(out, "  profile: device busy %.2fs of %.2fs wall (%.0f%% idle)\n", busy, wall,
          wall > 0 ? 100.0 * (1.0 - busy / wall) : 0.0);
  int done[CLT_PROFILE_MAX_NAMES] = {0};
  for (int k = 0; k < p->nnames; k++) {
    int best = -1;
    for (int i = 0; i < p->nnames; i++) {
      if (!done[i] && (best < 0 || p->seconds[i] > p->seconds[best])) best = i;
    }
    done[best] = 1;
    fprintf(out, "  %8.3fs %5.1f%% %7ld calls  %s\n", p->seconds[best],
            busy > 0 ? 100.0 * p->seconds[best] / busy : 0.0, p->calls[best], p->names[best]);
    p->seconds[best] = 0;
    p->calls[best] = 0;
  }
}

static int evaluate(clt_net *net, const clt_device_data *test, int batch, float *metrics,
                    int *identity, double *loss, double *acc, clt_err *e) {
  const int steps = (test->count + batch - 1) / batch;
  int status = clt_net_set_order(net, identity, test->count, e);
  for (int s = 0; s < steps && !status; s++) {
    int first = s * batch;
    int n = test->count - first < batch ? test->count - first : batch;
    status = clt_net_gather(net, test, first, n, e);
    if (!status) status = clt_net_forward_backward(net, n, 1.0f, s, 0, e);
  }
  if (!status) status = clt_net_read_metrics(net, metrics, steps, e);
  if (status) return status;
  double unused;
  sum_metrics(metrics, steps, test->count, batch, &unused, loss, acc);
  return CLT_OK;
}

static void write_log(FILE *log, int epoch, const epoch_stats *s, const clt_train_opts *o,
                      const char *device) {
  if (!log) return;
  fprintf(log,
          "{\"epoch\": %d, \"train_loss\": %.6f, \"train_accuracy\": %.4f, \"test_loss\": %.6f, "
          "\"test_accuracy\": %.4f, \"seconds\": %.3f, \"train_seconds\": %.3f, "
          "\"images_per_second\": %.1f, \"train_examples\": %ld, \"global_batch\": %d, "
          "\"model\": \"%s\", \"device\": \"",
          epoch, s->train_loss, s->train_acc * 100, s->test_loss, s->test_acc * 100, s->seconds,
          s->train_seconds, s->train_examples / s->train_seconds, s->train_examples,
          o->batch_per_replica, o->model);
  for (const char *c = device; *c; c++) {
    if (*c == '"' || *c == '\\') fputc('\\', log);
    if ((unsigned char)*c >= 0x20) fputc(*c, log);
  }
  fprintf(log, "\"}\n");
  fflush(log);
}

int clt_train(const clt_train_opts *o, clt_err *e) {
  int status = CLT_OK;
  clt_dataset train = {0}, test = {0};
  clt_device_list devices = {0};
  clt_replica *replica = NULL;
  clt_net *net = NULL;
  clt_device_data dtrain = {0}, dtest = {0};
  int *order = NULL, *chosen = NULL;
  float *flat = NULL, *metrics = NULL;
  FILE *log = NULL;
  clt_model model;

  if ((status = clt_idx_load_dir(o->data_dir, "train", &train, e))) goto cleanup;
  if ((status = clt_idx_load_dir(o->data_dir, "t10k", &test, e))) goto cleanup;
  if (o->train_limit > 0 && o->train_limit < train.count) train.count = (int)o->train_limit;
  if (o->test_limit > 0 && o->test_limit < test.count) test.count = (int)o->test_limit;
  if (test.height != train.height || test.width != train.width) {
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: test images are %dx%d but training images are %dx%d",
                      o->data_dir, test.height, test.width, train.height, train.width);
    goto cleanup;
  }
  clt_shape input = {train.height, train.width, train.channels};
  if ((status = clt_model_build(o->model, input, train.classes, &model, e))) goto cleanup;
  if (strcmp(o->model, "fmnist-cnn") == 0 && (input.h != 28 || input.w != 28 || input.c != 1)) {
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: images are %dx%dx%d, model fmnist-cnn expects 28x28x1",
                      o->data_dir, input.h, input.w, input.c);
    goto cleanup;
  }

  if ((status = clt_devices_enumerate(&devices, e))) goto cleanup;
  chosen = calloc(devices.count ? devices.count : 1, sizeof *chosen);
  if (!chosen) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
    goto cleanup;
  }
  int nchosen = 0;
  if ((status = clt_devices_select(&devices, o->devices, chosen, &nchosen, e))) goto cleanup;
  const clt_device *dev = &devices.devices[chosen[0]];
  if (o->log_path && !(log = fopen(o->log_path, "w"))) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot open log for writing: %s", o->log_path, strerror(errno));
    goto cleanup;
  }

  const int global_batch = o->batch_per_replica;
  const int steps = (train.count + global_batch - 1) / global_batch;
  const int test_steps = (test.count + global_batch - 1) / global_batch;
  const int slots = steps > test_steps ? steps : test_steps;
  fprintf(o->out, "Model %s: %zu parameters, %d layers; %d training and %d test images of %dx%dx%d\n",
          model.name, model.param_count, model.nlayers, train.count, test.count, input.h, input.w,
          input.c);
  fprintf(o->out, "Device %d: %s (%s, %s)\n", dev->index, dev->name,
          clt_device_type_name(dev->type), dev->platform_name);
  if (nchosen > 1) {
    fprintf(o->out, "note: %d devices selected; training uses the first one only "
                    "(multi-replica training is not implemented yet)\n", nchosen);
  }
  if (o->checkpoint_flags_given) {
    fprintf(o->out, "note: --checkpoint-dir/--checkpoint-every are accepted but checkpoints "
                    "are not written yet\n");
  }
  fprintf(o->out, "Batch %d, %d steps per epoch, %d epochs\n", global_batch, steps, o->epochs);
  fflush(o->out);

  double t_setup = now_seconds();
  if ((status = clt_replica_create(dev, &replica, e))) goto cleanup;
  if (o->profile && (status = clt_replica_enable_profiling(replica, e))) goto cleanup;
  int order_len = train.count > test.count ? train.count : test.count;
  if ((status = clt_net_create(&model, replica, global_batch, slots, order_len, &net, e))) goto cleanup;
  if ((status = clt_net_upload_data(net, train.pixels, train.labels, train.count, &dtrain, e))) goto cleanup;
  if ((status = clt_net_upload_data(net, test.pixels, test.labels, test.count, &dtest, e))) goto cleanup;
  flat = malloc(model.flat_floats * sizeof *flat);
  order = malloc((size_t)order_len * sizeof *order);
  metrics = malloc(2 * (size_t)slots * sizeof *metrics);
  if (!flat || !order || !metrics) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
    goto cleanup;
  }
  clt_model_init_params(&model, o->seed, flat);
  if ((status = clt_net_write_params(net, flat, e))) goto cleanup;
  fprintf(o->out, "Set-up (kernels, buffers, data upload): %.1fs, %.1f MiB on the device\n",
          now_seconds() - t_setup, replica->allocated_bytes / 1048576.0);
  fflush(o->out);

  const clt_adam adam = {o->lr, 0.9, 0.999, 1e-7};
  long step = 0;
  for (int epoch = 0; epoch < o->epochs; epoch++) {
    epoch_stats st = {0};
    double t0 = now_seconds();
    clt_epoch_order(o->seed, epoch, order, train.count);
    if ((status = clt_net_set_order(net, order, train.count, e))) goto cleanup;
    double last_draw = 0;
    for (int s = 0; s < steps; s++) {
      int first = s * global_batch;
      int n = train.count - first < global_batch ? train.count - first : global_batch;
      /* The loss is divided by the actual batch size, the last partial batch included. */
      if ((status = clt_net_gather(net, &dtrain, first, n, e))) goto cleanup;
      if ((status = clt_net_forward_backward(net, n, 1.0f / n, s, 1, e))) goto cleanup;
      if ((status = clt_net_adam(net, &adam, ++step, e))) goto cleanup;
      cl_int flushed = clFlush(replica->queue);
      if (flushed) {
        status = clt_replica_fail(replica, e, flushed, "clFlush");
        goto cleanup;
      }
      if (o->profile && s % 32 == 31 && (status = clt_replica_profile_collect(replica, e))) goto cleanup;
      double t = now_seconds();
      if (o->progress && (t - last_draw > 0.25 || s == steps - 1)) {
        /* A blocking read drains the queue: done a few times a second only. */
        if ((status = clt_net_read_metrics(net, metrics, s + 1, e))) goto cleanup;
        double mean_loss, ex_loss, acc;
        sum_metrics(metrics, s + 1, first + n, global_batch, &mean_loss, &ex_loss, &acc);
        draw_progress(o->out, s + 1, steps, now_seconds() - t0, mean_loss, acc, s == steps - 1);
        last_draw = now_seconds();
      }
    }
    if ((status = clt_net_read_metrics(net, metrics, steps, e))) goto cleanup;
    st.train_seconds = now_seconds() - t0;
    st.train_examples = train.count;
    double ex_loss;
    sum_metrics(metrics, steps, train.count, global_batch, &st.train_loss, &ex_loss, &st.train_acc);
    if (!isfinite(st.train_loss)) {
      status = clt_fail(e, CLT_ERR_NUMERIC,
                        "epoch %d: training loss is not finite (%g); stopping (try a lower --lr)",
                        epoch + 1, st.train_loss);
      goto cleanup;
    }
    for (int i = 0; i < test.count; i++) order[i] = i;
    if ((status = evaluate(net, &dtest, global_batch, metrics, order, &st.test_loss, &st.test_acc, e))) goto cleanup;
    st.seconds = now_seconds() - t0;
    fprintf(o->out, "Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f\n",
            epoch + 1, st.train_loss, st.train_acc * 100, st.test_loss, st.test_acc * 100);
    fprintf(o->out, "  %.1fs (%.0f images/s training)\n", st.seconds,
            st.train_examples / st.train_seconds);
    fflush(o->out);
    write_log(log, epoch + 1, &st, o, dev->name);
    if (o->profile) {
      if ((status = clt_replica_profile_collect(replica, e))) goto cleanup;
      print_profile(o->out, replica, st.seconds);
    }
  }

cleanup:
  if (log && fclose(log) != 0 && status == CLT_OK) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot write log: %s", o->log_path, strerror(errno));
  }
  clt_device_data_release(&dtrain);
  clt_device_data_release(&dtest);
  clt_net_destroy(net);
  clt_replica_destroy(replica);
  clt_devices_free(&devices);
  clt_dataset_free(&train);
  clt_dataset_free(&test);
  free(order);
  free(chosen);
  free(flat);
  free(metrics);
  return status;
}
