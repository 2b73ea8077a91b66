#define _POSIX_C_SOURCE 200809L
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text.h"
#include "timing.h"

void clt_report_replica_lines(const clt_device *const *devices, int n, int first, int rank,
                              const char *host, int processes, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && len < size; i++) {
    const clt_device *dev = devices[i];
    const clt_backend *backend = NULL;
    clt_err ignored = {0}; /* a bad $CLTRAIN_KERNELS fails the replica's creation next */
    char where[200] = "";
    if (processes > 1) snprintf(where, sizeof where, "rank %d on %s, ", rank, host);
    len += (size_t)snprintf(buf + len, size - len, "Replica %d: %sdevice %d, %s (%s, %s)",
                            first + i, where, dev->index, dev->name,
                            clt_device_type_name(dev->type), dev->platform_name);
    if (len < size && clt_backend_for(dev, &backend, &ignored) == CLT_OK)
      len += (size_t)snprintf(buf + len, size - len, "; %s", backend->summary);
    if (len < size) len += (size_t)snprintf(buf + len, size - len, "\n");
  }
}

void clt_report_plan(const clt_report *r, const clt_run_plan *plan) {
  const clt_model *m = r->model;
  const clt_data *d = r->data;
  const int global = plan->global_batch;
  const int steps = (d->ntrain + global - 1) / global;
  fprintf(r->out,
          "Model %s: %zu parameters, %d layer%s; %d training and %d %s image%s of %dx%dx%d\n",
          m->name, m->param_count, m->nlayers, m->nlayers == 1 ? "" : "s", d->ntrain, d->ntest,
          d->validation ? "validation" : "test", d->ntest == 1 ? "" : "s", m->input.h, m->input.w,
          m->input.c);
  int frozen = 0;
  size_t frozen_params = 0;
  for (int i = 0; i < m->nlayers; i++) {
    frozen += m->layers[i].frozen;
    for (int p = 0; p < m->layers[i].nparams && m->layers[i].frozen; p++)
      frozen_params += m->layers[i].params[p].size;
  }
  if (frozen) {
    fprintf(r->out, "Frozen: %d of %d layers, %zu of %zu parameters not trained\n", frozen,
            m->nlayers, frozen_params, m->param_count);
  }
  if (d->class_names) {
    fprintf(r->out, "Photos from %s: %d class%s (%s", d->spec.dir, d->classes,
            d->classes == 1 ? "" : "es", d->class_names[0]);
    for (int c = 1; c < d->classes; c++) fprintf(r->out, ", %s", d->class_names[c]);
    fprintf(r->out, ")\n");
  }
  if (d->spec.augment.n) {
    char text[CLT_AUG_TEXT_MAX];
    clt_augment_format(&d->spec.augment, text, sizeof text);
    fprintf(
        r->out,
        "Augmentation of the training images (each drawn from --seed, the epoch and the image): %s\n",
        text);
    if (clt_augment_has(&d->spec.augment, CLT_AUG_CROP))
      fprintf(r->out,
              "Photos decoded at %dx%d, cropped to %dx%d (the validation images resized to it)\n",
              d->spec.image_size, d->spec.image_size, d->height, d->width);
  }
  fputs(plan->replica_lines, r->out);
  if (plan->processes > 1) {
    fprintf(r->out,
            "%d processes (MPI): %d replicas; all-reduce: each host's ring, then a ring "
            "across the processes\n",
            plan->processes, plan->replicas);
  }
  /* Equal slices differ by one where the replicas do not divide the batch. */
  const int least = global / plan->replicas;
  if (global % plan->replicas)
    fprintf(r->out, "Global batch %d (%d or %d per replica), ", global, least + 1, least);
  else fprintf(r->out, "Global batch %d (%d per replica), ", global, least);
  fprintf(r->out, "%d step%s per epoch, ", steps, steps == 1 ? "" : "s");
  if (plan->epochs == plan->first_epoch + 1) fprintf(r->out, "epoch %d", plan->epochs);
  else fprintf(r->out, "epochs %d to %d", plan->first_epoch + 1, plan->epochs);
  if (plan->replicas > 1) fprintf(r->out, ", --split %s", plan->split);
  fprintf(r->out, "\n");
  const clt_optimizer *o = plan->optimizer;
  if (o) {
    char hypers[256];
    clt_optimizer_describe(o, hypers, sizeof hypers);
    fprintf(r->out, "Optimizer %s: %s\n", clt_optimizer_name(o->kind), hypers);
  }
  if (o && o->schedule.kind != CLT_SCHED_NONE) {
    char text[1024];
    clt_schedule_format(&o->schedule, text, sizeof text);
    fprintf(r->out, "Learning-rate schedule %s (Keras' %s)", text,
            clt_schedule_class(o->schedule.kind));
    if (o->schedule.kind != CLT_SCHED_PIECEWISE) fprintf(r->out, " from %g", o->lr);
    fprintf(r->out, "\n");
  }
  const clt_plateau *p = plan->plateau;
  if (p && p->active) {
    char text[512];
    clt_plateau_format(p, text, sizeof text);
    fprintf(r->out, "ReduceLROnPlateau %s", text);
    if (p->monitor.has_best)
      fprintf(r->out, "; best %s %.6g, wait %d, cooldown %d",
              clt_cb_quantity_name(p->monitor.quantity), p->monitor.best, p->wait,
              p->cooldown_counter);
    fprintf(r->out, "\n");
  }
  if (plan->resumed_from) {
    fprintf(r->out, "Resuming from %s: %d epoch%s and %ld step%s done\n", plan->resumed_from,
            plan->first_epoch, plan->first_epoch == 1 ? "" : "s", plan->steps_done,
            plan->steps_done == 1 ? "" : "s");
  }
  fflush(r->out);
}

void clt_report_nothing_to_do(const clt_report *r, const char *path, int epochs_done, int epochs) {
  fprintf(r->out,
          "Nothing to train: %s has %d epoch%s done and --epochs is %d, the epoch to stop after; "
          "give --epochs %d or more to continue\n",
          path, epochs_done, epochs_done == 1 ? "" : "s", epochs, epochs_done + 1);
  fflush(r->out);
}

void clt_report_build_logs(const clt_trainer *t) {
  for (int i = 0; i < clt_trainer_replicas(t); i++) {
    const clt_replica *rep = clt_trainer_replica(t, i);
    if (rep->build_log) fputs(rep->build_log, stderr);
  }
  fflush(stderr);
}

void clt_report_ready(const clt_report *r, double setup_seconds, double launch_seconds) {
  if (r->verbose) clt_report_build_logs(r->trainer);
  const double probe = clt_trainer_probe_seconds(r->trainer);
  char what[64] = "kernels, buffers, data upload";
  if (probe > 0)
    snprintf(what + strlen(what), sizeof what - strlen(what), ", speed probe %.1fs", probe);
  fprintf(r->out,
          "Set-up (%s): %.1fs, %.1fs from launch to the first step; device memory per replica:",
          what, setup_seconds, launch_seconds);
  for (int i = 0; i < clt_trainer_total_replicas(r->trainer); i++) {
    const clt_replica_info *info = clt_trainer_replica_info(r->trainer, i);
    fprintf(r->out, "%s %.0f MiB (network %.0f MiB)", i ? "," : "", info->alloc_bytes / 1048576.0,
            info->net_bytes / 1048576.0);
  }
  fprintf(r->out, "\n");
  fflush(r->out);
}

/* A replica's own throughput: examples over the time it spent computing them
 * (the epoch's wall time when that was not measured, i.e. with one replica). */
static double replica_rate(const clt_replica_stats *st, double epoch_seconds) {
  double t = st->compute_seconds > 0 ? st->compute_seconds : epoch_seconds;
  return t > 0 ? st->examples / t : 0.0;
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

/* ", "key": [...]": a record's lines as an array of strings. */
static void json_lines(FILE *log, const char *key, const char *record) {
  fprintf(log, ", \"%s\": [", key);
  const char *line;
  size_t n;
  for (const char *p = record; clt_text_line(&p, &line, &n);) {
    char text[256];
    snprintf(text, sizeof text, "%.*s", (int)(n < sizeof text ? n : sizeof text - 1), line);
    fprintf(log, "%s", line == record ? "" : ", ");
    json_string(log, text);
  }
  fprintf(log, "]");
}

static int write_log(const clt_report *r, const clt_epoch_record *rec, clt_err *e) {
  FILE *log = r->log;
  const clt_epoch_result *res = &rec->train;
  const long examples = r->data->ntrain;
  const double trained = (double)res->examples; /* fewer in a resumed epoch's pass */
  char tl[32] = "null", ta[32] = "null";        /* no test set: JSON null, not nan */
  if (!isnan(rec->test_loss)) snprintf(tl, sizeof tl, "%.6f", rec->test_loss);
  if (!isnan(rec->test_acc)) snprintf(ta, sizeof ta, "%.4f", rec->test_acc * 100);
  fprintf(log,
          "{\"epoch\": %d, \"train_loss\": %.6f, \"train_accuracy\": %.4f, \"test_loss\": %s, "
          "\"test_accuracy\": %s, \"seconds\": %.3f, \"train_seconds\": %.3f, "
          "\"images_per_second\": %.1f, \"train_examples\": %ld, \"global_batch\": %d, "
          "\"data_wait_seconds\": %.3f, \"model\": ",
          rec->epoch, res->train_loss, res->train_acc * 100, tl, ta, rec->seconds, res->seconds,
          trained / res->seconds, examples, clt_trainer_global_batch(r->trainer),
          res->data_wait_seconds);
  json_string(log, r->model->name);
  fprintf(log, ", \"learning_rate\": %.9g", rec->learning_rate);
  const int processes = clt_trainer_processes(r->trainer);
  if (processes > 1) {
    fprintf(log,
            ", \"processes\": %d, \"allreduce_cross_seconds\": %.3f, "
            "\"allreduce_cross_hidden_seconds\": %.3f",
            processes, res->cross_seconds, res->cross_hidden_seconds);
  }
  fprintf(log, ", \"allreduce_seconds\": %.3f", res->allreduce_seconds);
  if (r->data->photos) {
    fprintf(log, ", \"decoding\": [");
    for (int k = 0; k < processes; k++) {
      const clt_source_work *w = &res->processes[k];
      fprintf(log, "%s{\"rank\": %d, \"images\": %ld, \"decoded\": %ld, \"cpu_seconds\": %.3f",
              k ? ", " : "", k, w->images, w->decoded, w->cpu_seconds);
      if (!isnan(rec->test_loss)) {
        const clt_source_work *v = &clt_trainer_test_work(r->trainer)[k];
        fprintf(log, ", \"test_images\": %ld, \"test_decoded\": %ld, \"test_cpu_seconds\": %.3f",
                v->images, v->decoded, v->cpu_seconds);
      }
      fprintf(log, "}");
    }
    fprintf(log, "]");
  }
  fprintf(log, ", \"replicas\": [");
  for (int i = 0; i < clt_trainer_total_replicas(r->trainer); i++) {
    const clt_replica_info *info = clt_trainer_replica_info(r->trainer, i);
    fprintf(log, "%s{", i ? ", " : "");
    if (processes > 1) {
      fprintf(log, "\"rank\": %d, \"host\": ", info->rank);
      json_string(log, info->host);
      fprintf(log, ", ");
    }
    fprintf(log, "\"index\": %d, \"device\": ", info->device);
    json_string(log, info->name);
    const clt_replica_stats *st = &res->replicas[i];
    fprintf(log,
            ", \"examples\": %ld, \"share\": %.4f, \"examples_per_second\": %.1f, "
            "\"busy_seconds\": %.3f, \"compute_seconds\": %.3f, \"in_step\": %s, \"left\": %d, "
            "\"left_at_step\": %ld, \"joined\": %d, \"joined_at_step\": %ld, \"probes\": %d, "
            "\"probe_seconds\": %.3f}",
            st->examples, st->examples / trained, replica_rate(st, res->seconds), st->busy_seconds,
            st->compute_seconds, st->member ? "true" : "false", st->left, st->left_step, st->joined,
            st->joined_step, st->probes, st->probe_seconds);
  }
  fprintf(log, "]");
  if (rec->conv_algorithms && *rec->conv_algorithms)
    json_lines(log, "conv_algorithms", rec->conv_algorithms);
  if (rec->gemm_tilings) json_lines(log, "gemm_tilings", rec->gemm_tilings);
  fprintf(log, "}\n");
  /* A full disk or /dev/full shows only here: the stream's error flag or the flush. */
  if (fflush(log) != 0 || ferror(log)) {
    return clt_fail(e, CLT_ERR_IO, "%s: cannot write log: %s", r->log_path,
                    strerror(errno ? errno : EIO));
  }
  return CLT_OK;
}

/* Prints the `top` largest of n (label, seconds, calls) rows. */
static void print_rows(FILE *out, char (*label)[112], const double *sec, const long *calls, int n,
                       int top, double busy) {
  char *done = calloc((size_t)n + 1, 1);
  double rest = 0;
  for (int k = 0; k < n && done; k++) {
    int best = -1;
    for (int i = 0; i < n; i++) {
      if (!done[i] && (best < 0 || sec[i] > sec[best])) best = i;
    }
    done[best] = 1;
    if (calls[best] == 0) continue; /* named in an earlier epoch, idle in this one */
    if (k >= top) {
      rest += sec[best];
      continue;
    }
    fprintf(out, "  %8.3fs %5.1f%% %7ld calls  %s\n", sec[best],
            busy > 0 ? 100.0 * sec[best] / busy : 0.0, calls[best], label[best]);
  }
  if (rest > 0)
    fprintf(out, "  %8.3fs %5.1f%%                the other %d\n", rest, 100.0 * rest / busy,
            n - top);
  free(done);
}

/* The replica's time in the all-reduce, and how much of it the backward pass hid:
 * the buckets' collectives that ran while its own backward pass still ran. */
static void print_allreduce(FILE *out, const clt_trainer *t, const clt_replica_stats *st) {
  const double total = st->allreduce_seconds, hidden = st->allreduce_hidden_seconds;
  const int buckets = clt_trainer_buckets(t);
  fprintf(out, "  all-reduce: %.3fs in %ld collectives", total, st->allreduce_calls);
  if (!buckets) {
    fprintf(out, " (the whole gradient after the backward pass), none hidden\n");
    return;
  }
  fprintf(out,
          " (%d bucket%s a step, from the last layers' down), %.3fs of it (%.0f%%) hidden behind "
          "the backward pass, %.3fs after it\n",
          buckets, buckets == 1 ? "" : "s", hidden, total > 0 ? 100.0 * hidden / total : 0.0,
          total - hidden);
}

/* Process 0's time summing across processes, and how much of it the backward
 * pass hid (the buckets handed to the cross-process sum's thread as they were
 * ready). */
static void print_cross(FILE *out, const clt_trainer *t, const clt_epoch_result *res) {
  const double total = res->cross_seconds, hidden = res->cross_hidden_seconds;
  const int buckets = clt_trainer_buckets(t);
  fprintf(out, "  across processes: %.3fs", total);
  if (!buckets) {
    fprintf(out, " (the whole gradient after the backward pass), none hidden\n");
    return;
  }
  fprintf(out,
          " (%d bucket%s a step, each summed as it was ready), %.3fs of it (%.0f%%) hidden "
          "behind the backward pass, %.3fs after it\n",
          buckets, buckets == 1 ? "" : "s", hidden, total > 0 ? 100.0 * hidden / total : 0.0,
          total - hidden);
}

/* Device time by layer and pass (the scope of each kernel), then by kernel; with
 * several replicas (st not NULL), the replica's all-reduce first. */
static void print_profile(FILE *out, const clt_trainer *t, const clt_replica *r,
                          const clt_replica_stats *st, double wall) {
  const clt_profile *p = r->profile;
  double busy = 0;
  for (int i = 0; i < p->nnames; i++) busy += p->seconds[i];
  fprintf(out, "  profile of device %d: busy %.2fs of %.2fs (%.0f%% idle)\n", r->device.index, busy,
          wall, wall > 0 ? 100.0 * (1.0 - busy / wall) : 0.0);
  if (st) print_allreduce(out, t, st);
  static char label[CLT_PROFILE_MAX_NAMES][112];
  static double sec[CLT_PROFILE_MAX_NAMES];
  static long calls[CLT_PROFILE_MAX_NAMES];
  for (int part = 0; part < 2; part++) {
    /* part 0: the text before ": " (layer and pass); 1: after it (kernel). */
    int n = 0;
    for (int i = 0; i < p->nnames; i++) {
      const char *colon = strstr(p->names[i], ": ");
      char key[112];
      if (!colon) snprintf(key, sizeof key, "%s", p->names[i]);
      else if (part == 0)
        snprintf(key, sizeof key, "%.*s", (int)(colon - p->names[i]), p->names[i]);
      else snprintf(key, sizeof key, "%s", colon + 2);
      int j = 0;
      while (j < n && strcmp(label[j], key) != 0) j++;
      if (j == n) {
        snprintf(label[n], sizeof label[n], "%s", key);
        sec[n] = 0;
        calls[n++] = 0;
      }
      sec[j] += p->seconds[i];
      calls[j] += p->calls[i];
    }
    fprintf(out, "  by %s:\n", part == 0 ? "layer and pass" : "kernel");
    print_rows(out, label, sec, calls, n, part == 0 ? 30 : 15, busy);
  }
}

/* What the epoch did to a replica's place in the step ("; left the step at step
 * N, rejoined at step M" for the latest of each, "; out of the step" when it was
 * out throughout) and the speed probes it ran while out. */
static void print_membership(const clt_report *r, const clt_replica_stats *st) {
  if (st->left && st->joined) {
    if (st->left_step < st->joined_step)
      fprintf(r->out, "; left the step at step %ld, rejoined at step %ld", st->left_step,
              st->joined_step);
    else
      fprintf(r->out, "; rejoined the step at step %ld, left at step %ld", st->joined_step,
              st->left_step);
  } else if (st->left) {
    fprintf(r->out, "; left the step at step %ld", st->left_step);
  } else if (st->joined) {
    fprintf(r->out, "; rejoined the step at step %ld", st->joined_step);
  } else if (!st->member) {
    fprintf(r->out, "; out of the step");
  }
  if (st->probes)
    fprintf(r->out, "; %d speed probe%s (%.2fs)", st->probes, st->probes == 1 ? "" : "s",
            st->probe_seconds);
}

/* Each device's share, rate and busy time (with several), and the balancer's
 * note the first time it leaves a device out. */
static void print_devices(clt_report *r, const clt_epoch_result *res) {
  const int n = clt_trainer_total_replicas(r->trainer);
  const int processes = clt_trainer_processes(r->trainer);
  for (int i = 0; i < n && n > 1; i++) {
    const clt_replica_info *info = clt_trainer_replica_info(r->trainer, i);
    const clt_replica_stats *st = &res->replicas[i];
    char rank[32] = "";
    if (processes > 1) snprintf(rank, sizeof rank, "rank %d ", info->rank);
    fprintf(r->out, "  %sdevice %d (%s): share %.1f%%, %ld example%s, %.0f images/s, busy %.0f%%",
            rank, info->device, info->name, 100.0 * st->examples / res->examples, st->examples,
            st->examples == 1 ? "" : "s", replica_rate(st, res->seconds),
            100.0 * st->busy_seconds / res->seconds);
    print_membership(r, st);
    fprintf(r->out, "\n");
    const clt_balancer *b = clt_trainer_balancer(r->trainer);
    if (clt_balancer_excluded(b, i) && !r->excluded_said[i]) {
      r->excluded_said[i] = 1;
      if (b->leave) {
        fprintf(r->out,
                "  note: --split auto left device %d out of the step: it is so slow that any "
                "share would lengthen the step; while out it takes no part in the all-reduce or "
                "the update, and it is re-timed between steps to rejoin (with the current state) "
                "if it speeds up (force a share with --split weights)\n",
                info->device);
      } else {
        fprintf(r->out,
                "  note: --split auto gives device %d no examples: it is so slow that any share "
                "would lengthen the step; it stays in the all-reduce and is re-timed on one "
                "example every 64 steps (force a share with --split weights)\n",
                info->device);
      }
    }
  }
}

/* --profile: each process's photo decoding for its replicas' slices. */
static void print_decoding(const clt_report *r, const clt_epoch_result *res) {
  const int processes = clt_trainer_processes(r->trainer);
  for (int k = 0; k < processes; k++) {
    const clt_source_work *w = &res->processes[k];
    char rank[32] = "";
    if (processes > 1) snprintf(rank, sizeof rank, " of rank %d", k);
    fprintf(r->out,
            "  photo decoding%s: %ld image%s (%ld decoded from files, the rest from the cache), "
            "%.2fs of CPU time\n",
            rank, w->images, w->images == 1 ? "" : "s", w->decoded, w->cpu_seconds);
  }
}

int clt_report_epoch(clt_report *r, const clt_epoch_record *rec, clt_err *e) {
  const clt_epoch_result *res = &rec->train;
  const clt_data *d = r->data;
  const int n = clt_trainer_total_replicas(r->trainer);
  fprintf(r->out, "Epoch %d, Loss: %.4f, Accuracy: %.2f", rec->epoch, res->train_loss,
          res->train_acc * 100);
  if (d->ntest) {
    const char *set = d->validation ? "Validation" : "Test";
    fprintf(r->out, ", %s Loss: %.4f, %s Accuracy: %.2f", set, rec->test_loss, set,
            rec->test_acc * 100);
  }
  fprintf(r->out, "\n  %.1fs, %.0f images/s training", rec->seconds, res->examples / res->seconds);
  if (n > 1) fprintf(r->out, ", all-reduce %.2fs", res->allreduce_seconds);
  if (clt_trainer_processes(r->trainer) > 1)
    fprintf(r->out, " (%.2fs across processes)", res->cross_seconds);
  if (d->photos) fprintf(r->out, ", waited %.2fs for images", res->data_wait_seconds);
  if (rec->first) {
    fprintf(r->out, ", start-up %.1fs (launch to the end of the first step)",
            res->first_step_done - r->launch);
  }
  if (r->rate_varies && (rec->first || rec->learning_rate != r->rate_shown)) {
    fprintf(r->out, ", learning rate %.4g", rec->learning_rate);
    r->rate_shown = rec->learning_rate;
  }
  fprintf(r->out, "\n");
  if (rec->reduced_to > 0 && r->plateau) {
    const int epochs = r->plateau->patience > 0 ? r->plateau->patience : 1;
    fprintf(r->out,
            "  ReduceLROnPlateau: %s has not improved in %d epoch%s: learning rate %.4g -> %.4g\n",
            clt_cb_quantity_name(r->plateau->monitor.quantity), epochs, epochs == 1 ? "" : "s",
            rec->learning_rate, rec->reduced_to);
  }
  print_devices(r, res);
  if (r->profile && clt_trainer_processes(r->trainer) > 1) print_cross(r->out, r->trainer, res);
  if (r->profile && d->photos) print_decoding(r, res);
  for (int i = 0; i < clt_trainer_replicas(r->trainer) && r->profile; i++) {
    /* This process's replicas: their events are here. */
    const clt_replica *rep = clt_trainer_replica(r->trainer, i);
    print_profile(r->out, r->trainer, rep, n > 1 ? &res->replicas[rep->index] : NULL, res->seconds);
  }
  fflush(r->out);
  return r->log ? write_log(r, rec, e) : CLT_OK;
}

/* Seconds since the Unix epoch (TensorBoard's wall_time). */
static double unix_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The batch loss of every r->tb_every-th optimizer step of the pass just run, at
 * the wall time each step ended. */
static int tensorboard_batches(clt_report *r, const clt_epoch_result *res, long first_step,
                               clt_err *e) {
  const double *sums = clt_trainer_step_sums(r->trainer);
  const double *times = clt_trainer_step_times(r->trainer);
  const int global = clt_trainer_global_batch(r->trainer), count = r->data->ntrain;
  const double to_unix = unix_now() - clt_now_seconds();
  /* A resumed epoch's pass began at step skipped_steps (optimizer step first_step + 1). */
  for (int s = res->skipped_steps; s < res->steps_done; s++) {
    const long step = first_step + (s - res->skipped_steps) + 1;
    if (step % r->tb_every) continue;
    const int batch = count - s * global < global ? count - s * global : global;
    int status = clt_tb_scalar(r->tb_train, "batch_loss", step, times[s] + to_unix,
                               (float)(sums[(size_t)2 * s] / batch), e);
    if (status) return status;
  }
  return CLT_OK;
}

int clt_report_tensorboard(clt_report *r, const clt_epoch_record *rec, long first_step,
                           clt_err *e) {
  if (!r->tb_train) return CLT_OK;
  const clt_epoch_result *res = &rec->train;
  const double now = unix_now();
  const int epoch = rec->epoch;
  clt_tb_writer *w = r->tb_train;
  int status = r->tb_every > 0 ? tensorboard_batches(r, res, first_step, e) : CLT_OK;
  const struct {
    const char *tag;
    double value;
  } train[] = {{"epoch_loss", res->train_loss},
               {"epoch_accuracy", res->train_acc},
               {"epoch_learning_rate", rec->learning_rate},
               {"epoch_images_per_second", res->examples / res->seconds},
               {"epoch_allreduce_seconds", res->allreduce_seconds}};
  for (size_t i = 0; i < sizeof train / sizeof train[0] && !status; i++) {
    status = clt_tb_scalar(w, train[i].tag, epoch, now, (float)train[i].value, e);
  }
  for (int i = 0; i < clt_trainer_total_replicas(r->trainer) && !status; i++) {
    const clt_replica_stats *st = &res->replicas[i];
    char tag[64];
    snprintf(tag, sizeof tag, "replica_%d/share", i);
    status = clt_tb_scalar(w, tag, epoch, now, (float)((double)st->examples / res->examples), e);
    snprintf(tag, sizeof tag, "replica_%d/busy", i);
    if (!status)
      status = clt_tb_scalar(w, tag, epoch, now, (float)(st->busy_seconds / res->seconds), e);
  }
  if (!status) status = clt_tb_flush(w, e);
  if (!status && r->data->ntest) {
    status = clt_tb_scalar(r->tb_validation, "epoch_loss", epoch, now, (float)rec->test_loss, e);
    if (!status)
      status = clt_tb_scalar(r->tb_validation, "epoch_accuracy", epoch, now, (float)rec->test_acc,
                             e);
    if (!status) status = clt_tb_flush(r->tb_validation, e);
  }
  return status;
}

void clt_report_saved(const clt_report *r, const char *path) {
  fprintf(r->out, "  saved %s\n", path);
  fflush(r->out);
}

void clt_report_eval(FILE *out, const char *checkpoint, const clt_model *m, long long epochs,
                     long long steps, int examples, int devices, int processes, double acc,
                     double loss) {
  fprintf(out, "Checkpoint %s: model %s, %lld epoch%s, %lld step%s; %d test image%s on %d device%s",
          checkpoint, m->name, epochs, epochs == 1 ? "" : "s", steps, steps == 1 ? "" : "s",
          examples, examples == 1 ? "" : "s", devices, devices == 1 ? "" : "s");
  if (processes > 1) fprintf(out, " in %d processes", processes);
  fprintf(out, "\n");
  fprintf(out, "Accuracy: %.2f\nLoss: %.4f\n", acc * 100, loss);
}
