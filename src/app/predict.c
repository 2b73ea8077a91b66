/* `cltrain predict`: a checkpoint's most likely classes for new images, decoded
 * and resized as training decodes a photo folder, batched across the selected
 * devices by the trainer's evaluation pass (the logits of `cltrain eval --logits`),
 * written as a table, CSV or JSON Lines. */
#define _POSIX_C_SOURCE 200809L /* open_memstream, strdup */
#include "predict.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "files.h"
#include "photos.h"
#include "timing.h"
#include "train.h"
#include "trainer.h"

clt_onnx_info clt_class_names(const clt_model *m, const clt_checkpoint *state) {
  if (state->class_names) {
    return (clt_onnx_info){.class_names = state->class_names,
                           .class_names_source =
                               "the photo folder's class subfolders, sorted by byte value"};
  }
  if (m->input.c == 1 && m->classes == 10) {
    return (clt_onnx_info){
        .class_names = "T-shirt/top\nTrouser\nPullover\nDress\nCoat\nSandal\nShirt\nSneaker\n"
                       "Bag\nAnkle boot\n",
        .class_names_source = "Fashion-MNIST's names of the IDX labels 0 to 9 (IDX files carry no "
                              "names; for MNIST, label k is the digit k)"};
  }
  return (clt_onnx_info){.class_names = NULL};
}

enum { FORMAT_TABLE, FORMAT_CSV, FORMAT_JSONL };

/* What the pass leaves behind: per example, why it was skipped (NULL: it was not). */
typedef struct predict_run {
  char **why;
  int count;
  int skipped_paths; /* arguments left out before the pass */
} predict_run;

/* A path given that cannot be used: said at once, before the pass. */
static void skip_path(void *ctx, int arg, const clt_err *e) {
  (void)arg;
  predict_run *r = ctx;
  fprintf(stderr, "cltrain: skipped: %s\n", e->msg);
  r->skipped_paths++;
}

/* Marks an image skipped whose message could not be kept. */
static char no_memory[] = "";

/* An image that did not decode (from a decoding thread; each example once). */
static void skip_example(void *ctx, int i, const clt_err *e) {
  predict_run *r = ctx;
  if (i < 0 || i >= r->count || r->why[i]) return;
  r->why[i] = strdup(e->msg);
  if (!r->why[i]) r->why[i] = no_memory;
}

static void free_run(predict_run *r) {
  for (int i = 0; r->why && i < r->count; i++) {
    if (r->why[i] != no_memory) free(r->why[i]);
  }
  free(r->why);
}

/* The model's class names, one per class: the checkpoint's (or Fashion-MNIST's),
 * else the label's number. *text holds them. */
static int class_list(const clt_model *m, const clt_checkpoint *state, const char *path,
                      char **text, const char ***names, clt_err *e) {
  const clt_onnx_info info = clt_class_names(m, state);
  const int n = m->classes;
  const size_t known = info.class_names ? strlen(info.class_names) : 0;
  *names = malloc((size_t)n * sizeof **names);
  *text = malloc(known + (size_t)n * 12 + 1);
  if (!*names || !*text) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory for class names");
  char *at = *text;
  if (info.class_names) { /* one a line, the last line's '\n' optional */
    memcpy(at, info.class_names, known + 1);
    int c = 0;
    while (*at && c < n) {
      char *nl = strchr(at, '\n');
      (*names)[c++] = at;
      at = nl ? nl + 1 : at + strlen(at);
      if (nl) *nl = '\0';
    }
    if (c < n || *at) {
      return clt_fail(e, CLT_ERR_FORMAT, "%s: %s class names for a model of %d classes", path,
                      c < n ? "fewer" : "more", n);
    }
    return CLT_OK;
  }
  for (int c = 0; c < n; c++) {
    (*names)[c] = at;
    at += sprintf(at, "%d", c) + 1;
  }
  return CLT_OK;
}

/* Characters of s as a terminal shows them (UTF-8: one per leading byte). */
static int width(const char *s) {
  int w = 0;
  for (; *s; s++) w += ((unsigned char)*s & 0xc0) != 0x80;
  return w;
}

static void csv_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* s as a JSON string; bytes from 0x80 up are written as they are (UTF-8 names
 * stay UTF-8). */
static void json_field(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    const unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch == '\n') fputs("\\n", f);
    else if (ch == '\t') fputs("\\t", f);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

/* The softmax of n logits into p (in double, summed in class order), and the k
 * most likely classes into top: by probability, the lower class first on ties. */
static void rank_classes(const float *logits, int n, int k, double *p, int *top) {
  double max = logits[0], sum = 0;
  for (int c = 1; c < n; c++) max = logits[c] > max ? logits[c] : max;
  for (int c = 0; c < n; c++) sum += p[c] = exp((double)logits[c] - max);
  for (int c = 0; c < n; c++) p[c] /= sum;
  for (int r = 0; r < k; r++) {
    int best = -1;
    for (int c = 0; c < n; c++) {
      int taken = 0;
      for (int q = 0; q < r && !taken; q++) taken = top[q] == c;
      if (!taken && (best < 0 || p[c] > p[best] || (isnan(p[best]) && !isnan(p[c])))) best = c;
    }
    top[r] = best;
  }
}

/* What there is to write: the predicted examples' paths and logits. */
typedef struct predictions {
  const clt_source *src; /* the paths */
  char *const *why;      /* skipped examples: non-NULL */
  const float *logits;   /* count x classes */
  int count, classes, k;
  const char *const *names; /* classes */
} predictions;

/* A probability as the formats write it: a table to 4 places; CSV and JSON with 9
 * significant digits (a float32 round trip), JSON's null for a non-finite one. */
static void probability(FILE *f, int format, double p) {
  if (format == FORMAT_TABLE) fprintf(f, "%6.4f", p);
  else if (!isfinite(p) && format == FORMAT_JSONL) fputs("null", f);
  else fprintf(f, "%.9g", p);
}

/* Every predicted example into f; scratch: classes doubles and ints. */
static void write_predictions(FILE *f, int format, const predictions *r, double *p, int *top) {
  char top_k[32];
  int path_w = 4, class_w = snprintf(top_k, sizeof top_k, "top %d", r->k);
  for (int i = 0; i < r->count; i++) {
    const int w = r->why[i] ? 0 : width(clt_source_path(r->src, i));
    path_w = w > path_w ? w : path_w;
  }
  for (int c = 0; c < r->classes; c++) {
    const int w = width(r->names[c]);
    class_w = w > class_w ? w : class_w;
  }
  if (format == FORMAT_TABLE) {
    fprintf(f, "%-*s", path_w, "path");
    for (int q = 0; q < r->k; q++) fprintf(f, "  top %-*d  %s", class_w - 4, q + 1, "  prob");
    fputc('\n', f);
  } else if (format == FORMAT_CSV) {
    fputs("path", f);
    for (int q = 0; q < r->k; q++) fprintf(f, ",class_%d,probability_%d", q + 1, q + 1);
    fputs("\r\n", f);
  }
  for (int i = 0; i < r->count; i++) {
    if (r->why[i]) continue;
    const char *path = clt_source_path(r->src, i);
    rank_classes(r->logits + (size_t)i * r->classes, r->classes, r->k, p, top);
    if (format == FORMAT_TABLE) {
      fprintf(f, "%s%*s", path, path_w - width(path), "");
      for (int q = 0; q < r->k; q++) {
        const char *name = r->names[top[q]];
        fprintf(f, "  %s%*s  ", name, class_w - width(name), "");
        probability(f, format, p[top[q]]);
      }
      fputc('\n', f);
    } else if (format == FORMAT_CSV) {
      csv_field(f, path);
      for (int q = 0; q < r->k; q++) {
        fputc(',', f);
        csv_field(f, r->names[top[q]]);
        fputc(',', f);
        probability(f, format, p[top[q]]);
      }
      fputs("\r\n", f);
    } else {
      fputs("{\"path\": ", f);
      json_field(f, path);
      fputs(", \"top\": [", f);
      for (int q = 0; q < r->k; q++) {
        fputs(q ? ", {\"class\": " : "{\"class\": ", f);
        json_field(f, r->names[top[q]]);
        fputs(", \"probability\": ", f);
        probability(f, format, p[top[q]]);
        fputc('}', f);
      }
      fputs("]}\n", f);
    }
  }
}

static int parse_format(const char *s, int *format, clt_err *e) {
  static const char *const names[] = {"table", "csv", "jsonl"};
  for (int i = 0; i < 3; i++) {
    if (strcmp(s, names[i]) == 0) {
      *format = i;
      return CLT_OK;
    }
  }
  return clt_fail(e, CLT_ERR_ARG,
                  "cltrain predict: --format: expected table, csv or jsonl, got '%s'", s);
}

/* The checkpoint's model must take images predict can feed: square, grey or RGB. */
static int check_input(const clt_model *m, const char *path, clt_err *e) {
  if (m->input.h != m->input.w || (m->input.c != 1 && m->input.c != 3)) {
    return clt_fail(e, CLT_ERR_ARG,
                    "%s: model %s takes %dx%dx%d input; cltrain predict feeds square images of 1 "
                    "or 3 channels",
                    path, m->name, m->input.h, m->input.w, m->input.c);
  }
  return CLT_OK;
}

/* --output: a new or regular file is replaced atomically; anything else there (a
 * link, a device, a pipe: /dev/stdout, /dev/null) is written through, never replaced. */
static int write_file(const char *path, const char *text, size_t len, clt_err *e) {
  struct stat st;
  if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) return clt_write_atomic(path, text, len, e);
  FILE *f = fopen(path, "w");
  if (!f) return clt_fail(e, CLT_ERR_IO, "%s (--output): cannot open: %s", path, strerror(errno));
  const int failed = fwrite(text, 1, len, f) != len;
  if (fclose(f) != 0 || failed)
    return clt_fail(e, CLT_ERR_IO, "%s (--output): cannot write: %s", path, strerror(errno));
  return CLT_OK;
}

/* The output, built in memory (a failure leaves nothing half-written), then
 * written to --output atomically or to o->out. */
static int write_output(const clt_predict_opts *o, int format, const predictions *r, clt_err *e) {
  char *text = NULL;
  size_t len = 0;
  double *p = malloc((size_t)r->classes * sizeof *p);
  int *top = malloc((size_t)r->classes * sizeof *top);
  FILE *f = p && top ? open_memstream(&text, &len) : NULL;
  int status = CLT_OK;
  if (!f) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory for the predictions");
  } else {
    write_predictions(f, format, r, p, top);
    if (fclose(f) != 0)
      status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory for the predictions");
  }
  if (!status && o->output) status = write_file(o->output, text, len, e);
  else if (!status && fwrite(text, 1, len, o->out) != len)
    status = clt_fail(e, CLT_ERR_IO, "cannot write the predictions: %s", strerror(errno));
  free(text);
  free(p);
  free(top);
  return status;
}

int clt_predict(const clt_predict_opts *o, int *skipped, clt_err *e) {
  static clt_model model; /* large: not on the stack */
  clt_checkpoint state = {0};
  clt_device_list devices = {0};
  const clt_device *chosen[CLT_MAX_REPLICAS];
  int nchosen = 0, format = FORMAT_TABLE;
  char path[4096];
  char *names_text = NULL;
  const char **names = NULL;
  clt_photos *photos = NULL;
  clt_source *src = NULL;
  clt_trainer *t = NULL;
  float *logits = NULL;
  predict_run run = {0};
  *skipped = 0;

  int status = parse_format(o->format, &format, e);
  if (!status && o->npaths == 0)
    status = clt_fail(e, CLT_ERR_ARG,
                      "cltrain predict: expected the images to predict, FILE|FOLDER... (see "
                      "cltrain predict --help)");
  if (!status && o->output) status = clt_check_output_file(o->output, "--output", e);
  if (!status)
    status = clt_cli_checkpoint(o->checkpoint, o->checkpoint_given, o->best, 0, path, sizeof path,
                                e);
  if (!status) status = clt_checkpoint_model(path, &model, e);
  if (!status) status = clt_checkpoint_load(path, &model, 0, &state, e);
  if (!status) status = check_input(&model, path, e);
  if (!status) status = class_list(&model, &state, path, &names_text, &names, e);
  if (status) goto cleanup;
  clt_photos_set_max_pixels(o->max_image_pixels);
  /* A training that cropped: photos decoded at its size, then resized to the crop as
   * Keras' RandomCrop outside training. */
  clt_augment crops = {0};
  clt_err ignored;
  if (state.data.augment[0] && clt_augment_parse(state.data.augment, &crops, &ignored) == CLT_OK)
    clt_augment_only_crops(&crops);
  const int size = crops.n && state.data.image_size ? state.data.image_size : model.input.h;
  if ((status = clt_photos_open_files((const char *const *)o->paths, o->npaths, size, skip_path,
                                      &run, &photos, e)))
    goto cleanup;
  run.count = clt_photos_count(photos);
  if (run.count == 0) {
    status = clt_fail(e, CLT_ERR_ARG, "no image to predict%s",
                      run.skipped_paths ? " (every path given was skipped)" : "");
    goto cleanup;
  }
  run.why = calloc((size_t)run.count, sizeof *run.why);
  logits = malloc((size_t)run.count * model.classes * sizeof *logits);
  if (!run.why || !logits) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory for %d images' predictions", run.count);
    goto cleanup;
  }
  status = clt_photos_predict_source(photos, model.input.c, &crops, skip_example, &run, &src, e);
  photos = NULL; /* the source's now */
  if (!status) status = clt_select_process_devices(o->devices, NULL, &devices, chosen, &nchosen, e);
  if (!status)
    status = clt_trainer_create_eval(&model, chosen, nchosen, o->batch_per_replica, src, NULL, &t,
                                     e);
  if (!status) status = clt_trainer_set_state(t, state.params, NULL, NULL, e);
  if (status) goto cleanup;
  clt_trainer_capture_logits(t, logits);
  const double t0 = clt_now_seconds();
  double loss, acc;
  if ((status = clt_trainer_evaluate(t, &loss, &acc, e))) goto cleanup;
  const double seconds = clt_now_seconds() - t0;

  int failed = 0;
  for (int i = 0; i < run.count; i++) {
    if (!run.why[i]) continue;
    if (run.why[i] == no_memory)
      fprintf(stderr,
              "cltrain: skipped: file %s: cannot decode (out of host memory for the cause)\n",
              clt_source_path(src, i));
    else fprintf(stderr, "cltrain: skipped: %s\n", run.why[i]);
    failed++;
  }
  *skipped = run.skipped_paths + failed;
  if (failed == run.count) {
    status = clt_fail(e, CLT_ERR_FORMAT, "none of the %d image%s could be predicted", run.count,
                      run.count == 1 ? "" : "s");
    goto cleanup;
  }
  const int k = o->top_k < model.classes ? o->top_k : model.classes;
  const predictions r = {src, run.why, logits, run.count, model.classes, k, names};
  if ((status = write_output(o, format, &r, e))) goto cleanup;
  /* The pass read every file, the skipped ones too. */
  const int replicas = clt_trainer_replicas(t);
  fprintf(stderr, "cltrain: predicted %d of %d image%s in %.2f s: %.1f images/s on %d replica%s\n",
          run.count - failed, run.count + run.skipped_paths,
          run.count + run.skipped_paths == 1 ? "" : "s", seconds, run.count / seconds, replicas,
          replicas == 1 ? "" : "s");

cleanup:
  clt_trainer_destroy(t);
  clt_source_free(src);
  clt_photos_free(photos);
  free_run(&run);
  free(logits);
  free(names);
  free(names_text);
  clt_devices_free(&devices);
  clt_checkpoint_free(&state);
  return status;
}
