/* The trainer's convolution algorithms (trainer.h): each replica's from its
 * device's tuning results and a checkpoint's record, reserved on its net. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_tuner.h"
#include "layer.h"
#include "text.h"
#include "timing.h"
#include "trainer_impl.h"
#include "tuner.h"

/* The record's lines for replica `index` applied to r (a layer or algorithm
 * this replica cannot run keeps its default). */
static void apply_record(const clt_model *m, clt_replica *r, int index, int batch,
                         const char *record) {
  const char *line;
  size_t len;
  for (const char *p = record; clt_text_line(&p, &line, &len);) {
    char text[256];
    snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1), line);
    int at = -1;
    char layer[64], algo[CLT_CONV_PASSES][16];
    if (sscanf(text, "%d %63s %15s %15s %15s", &at, layer, algo[0], algo[1], algo[2]) != 5 ||
        at != index)
      continue;
    const int i = clt_model_find(m, layer);
    clt_conv_geom g;
    int filters;
    if (i < 0 || !clt_conv2d_tunable(&m->layers[i], batch, &g, &filters)) continue;
    for (int p = 0; p < CLT_CONV_PASSES; p++) {
      clt_err ignored = {0};
      const int a = clt_conv_algo_parse(algo[p]);
      if (a >= 0) (void)clt_conv_choose(r, layer, &g, filters, p, a, &ignored);
    }
  }
}

/* A text grown line by line; failed once out of memory. */
typedef struct text_buf {
  char *s;
  size_t used, size;
  int failed;
} text_buf;

static void text_add(text_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->failed || n < 0) {
    b->failed = 1;
    return;
  }
  if (b->used + (size_t)n + 1 > b->size) {
    const size_t size = 2 * (b->used + (size_t)n + 1) + 256;
    char *grown = realloc(b->s, size);
    if (!grown) {
      b->failed = 1;
      return;
    }
    b->s = grown;
    b->size = size;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->used, b->size - b->used, fmt, ap);
  va_end(ap);
  b->used += (size_t)n;
}

/* The text (never NULL but out of memory), b's to free. */
static char *text_done(text_buf *b) {
  text_add(b, "%s", "");
  if (b->failed) {
    free(b->s);
    return NULL;
  }
  return b->s;
}

/* The line of `text` whose first field is `index` (the record's replica) at or
 * after *from, into out; *from moves past it. 0 when there is none. */
static int next_line(const char *text, int index, const char **from, char *out, size_t size) {
  const char *line;
  size_t len;
  if (!*from) *from = text;
  while (clt_text_line(from, &line, &len)) {
    int at = -1;
    if (sscanf(line, "%d", &at) == 1 && at == index) {
      snprintf(out, size, "%.*s", (int)(len < size ? len : size - 1), line);
      return 1;
    }
  }
  return 0;
}

static int count_lines(const char *text) {
  int n = 0;
  for (const char *p = text; p && *p; p++) n += *p == '\n';
  return n;
}

/* A record's "R RANK HOST BUILD DEVICE" line parsed: 0 when it is not one. */
static int parse_replica(const char *line, int *rank, char *host, char *build, int *name) {
  int at = -1;
  *name = 0;
  return sscanf(line, "%d %d %127s %31s %n", &at, rank, host, build, name) >= 4 && *name;
}

/* The recorded replica whose choices replica `index` (of build `mine`) takes:
 * its own when of the same build, else the first recorded of that build; -1
 * when none. *own gets its own line (empty when the record has none). */
static int donor_of(const char *replicas, int index, const char *mine, char *own, size_t size) {
  char line[512], host[128], build[32];
  const char *from = NULL;
  int rank = -1, name = 0;
  own[0] = '\0';
  if (next_line(replicas, index, &from, line, sizeof line) &&
      parse_replica(line, &rank, host, build, &name)) {
    snprintf(own, size, "%s", line);
    if (strcmp(build, mine) == 0) return index;
  }
  const char *start;
  size_t len;
  for (const char *p = replicas; clt_text_line(&p, &start, &len);) {
    int at = -1;
    snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), start);
    if (sscanf(line, "%d", &at) == 1 && parse_replica(line, &rank, host, build, &name) &&
        strcmp(build, mine) == 0)
      return at;
  }
  return -1;
}

/* Takes every product of r back to its backend's default GEMM. */
static void clear_tilings(clt_replica *r) {
  const clt_gemm_tilings *tt = r->backend->tilings;
  clt_gemm_shape shapes[CLT_GEMM_MAX_SHAPES];
  char names[CLT_GEMM_MAX_SHAPES][CLT_GEMM_TILING_NAME];
  const int n = tt->chosen(r, shapes, names, CLT_GEMM_MAX_SHAPES);
  clt_err ignored = {0};
  for (int i = 0; i < n; i++) (void)tt->choose(r, &shapes[i], NULL, &ignored);
}

/* Replica i's recorded choices (cfg->recorded, cfg->tilings, cfg->replicas)
 * restored on its replica, from the recorded replica donor_of picks: 1 when
 * its tilings are now exactly that replica's, 0 when not (one note on
 * cfg->notes says why and what it takes instead; the algorithms then follow
 * the record of its own index where there is one). */
static int restore_choices(clt_trainer *t, int i, const clt_trainer_tuning *cfg) {
  clt_replica *r = t->local[i].replica;
  const int index = t->base + i;
  const clt_replica_info *info = &t->info[index];
  const char *instead = cfg->tune ? "the tuning cache's (else the defaults)" : "the defaults";
  FILE *notes = cfg->notes;
  clt_tune_ident ident;
  char mine[17] = "";
  clt_err ignored = {0};
  if (clt_tune_ident_of(&r->device, r->defines, &ident, &ignored) == CLT_OK)
    clt_tune_ident_hash(&ident, mine);
  char own[512], host[128] = "", build[32] = "", tiling[512];
  const int donor = donor_of(cfg->replicas, index, mine, own, sizeof own);
  const clt_gemm_tilings *tt = r->backend->tilings;
  if (donor < 0) {
    if (cfg->recorded) apply_record(t->model, r, index, t->local[i].cap, cfg->recorded);
    int rank = -1, name = 0;
    const char *from = NULL;
    if (own[0] && parse_replica(own, &rank, host, build, &name)) {
      if (notes && (tt || next_line(cfg->tilings, index, &from, tiling, sizeof tiling)))
        fprintf(notes,
                "cltrain: note: replica %d: the checkpoint's GEMM tilings were chosen for "
                "another device or build (%s of rank %d on host %s, build %s; here %s, build "
                "%s): its GEMM tilings are %s\n",
                index, own + name, rank, host, build, r->device.name, mine, instead);
    } else if (notes) {
      const int n = count_lines(cfg->replicas);
      fprintf(notes,
              "cltrain: note: replica %d (rank %d, device %d: %s): the checkpoint records no "
              "choices for it or its device and build (its run had %d replica%s): its "
              "algorithms and GEMM tilings are %s\n",
              index, info->rank, r->device.index, r->device.name, n, n == 1 ? "" : "s", instead);
    }
    return 0;
  }
  if (cfg->recorded) apply_record(t->model, r, donor, t->local[i].cap, cfg->recorded);
  if (!tt) return 1; /* the same build: one without tilings */
  const char *from = NULL;
  int at = -1;
  clt_gemm_shape shapes[CLT_GEMM_MAX_SHAPES];
  char names[CLT_GEMM_MAX_SHAPES][CLT_GEMM_TILING_NAME];
  int n = 0;
  while (next_line(cfg->tilings, donor, &from, tiling, sizeof tiling)) {
    clt_gemm_shape *sh = &shapes[n < CLT_GEMM_MAX_SHAPES ? n : 0];
    char *text = names[n < CLT_GEMM_MAX_SHAPES ? n : 0];
    text[0] = '\0';
    memset(sh, 0, sizeof *sh);
    const char *why = NULL;
    if (n == CLT_GEMM_MAX_SHAPES) why = "more tilings than a replica holds";
    else if (sscanf(tiling, "%d tA%d tB%d m%zu n%zu k%zu %63[^\n]", &at, &sh->trans_a, &sh->trans_b,
                    &sh->m, &sh->n, &sh->k, text) != 7 ||
             (sh->trans_a != 0 && sh->trans_a != 1) || (sh->trans_b != 0 && sh->trans_b != 1))
      why = "not a tiling record";
    else if (!tt->valid(r, sh, text)) why = "a tiling this build cannot run there";
    if (why) {
      if (notes)
        fprintf(notes,
                "cltrain: note: replica %d: the checkpoint's GEMM tiling \"%s\" is %s: its GEMM "
                "tilings are %s\n",
                index, tiling, why, instead);
      return 0;
    }
    sh->lda = sh->trans_a ? sh->m : sh->k;
    sh->ldb = sh->trans_b ? sh->k : sh->n;
    sh->ldc = sh->n;
    n++;
  }
  /* Exactly the record's: the table emptied (the defaults), then filled. */
  clear_tilings(r);
  int status = CLT_OK;
  for (int k = 0; k < n && !status; k++) status = tt->choose(r, &shapes[k], names[k], &ignored);
  if (status) {
    clear_tilings(r);
    if (notes)
      fprintf(notes, "cltrain: note: replica %d: the checkpoint's GEMM tilings: %s: they are %s\n",
              index, ignored.msg, instead);
    return 0;
  }
  return 1;
}

/* Copies `from` into `to` (both of its size), enqueued. */
static int copy_buffer(clt_replica *r, cl_mem from, cl_mem to, clt_err *e) {
  size_t bytes = 0;
  cl_int rc = clGetMemObjectInfo(from, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
  if (!rc) rc = clEnqueueCopyBuffer(r->queue, from, to, 0, 0, bytes, 0, NULL, NULL);
  return rc ? clt_replica_fail(r, e, rc, "tuning: copying a batch") : CLT_OK;
}

int clt_trainer_keep_probe_batch(clt_trainer *t, clt_err *e) {
  int status = CLT_OK;
  for (int i = 0; i < t->n && !status; i++) {
    trainer_replica *l = &t->local[i];
    cl_mem from[2] = {l->net->input, l->net->labels}, *to[2] = {&l->probe_input, &l->probe_labels};
    for (int k = 0; k < 2 && !status; k++) {
      size_t bytes = 0;
      if (!*to[k]) {
        cl_int rc = clGetMemObjectInfo(from[k], CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
        status = rc ? clt_replica_fail(l->replica, e, rc, "tuning: a batch's size")
                    : clt_replica_alloc(l->replica, bytes, "the tuning's batch", to[k], e);
      }
      if (!status) status = copy_buffer(l->replica, from[k], *to[k], e);
    }
  }
  return status;
}

static void report_verdict(FILE *out, int replica, const clt_tune_verdict *v, double seconds) {
  if (!out) return;
  if (v->pending)
    fprintf(out,
            "Replica %d: tuning in the step: %s; the algorithms stay until it is done, after "
            "the next epoch (%d probe steps so far, %.1f s)\n",
            replica, v->why, v->all_steps, seconds);
  else if (v->over)
    fprintf(out, "Replica %d: tuning in the step: %s; the algorithms stay (%.1f s)\n", replica,
            v->why, seconds);
  else if (v->probed && v->differs)
    fprintf(out,
            "Replica %d: tuning in the step: step %.2f ms default, %.2f ms tuned: %s (%s; %d "
            "probe steps, %.1f s%s)\n",
            replica, v->default_ms, v->tuned_ms, v->confirmed ? "confirmed" : "kept default",
            v->why, v->all_steps, seconds, v->calls > 1 ? " in this call" : "");
  else if (v->probed)
    fprintf(out, "Replica %d: tuning in the step: kept default (%s; %d probe steps, %.1f s)\n",
            replica, v->why, v->probe_steps, seconds);
}

static int tune_replica(clt_trainer *t, int i, const clt_trainer_tuning *cfg, double budget_s,
                        int *over, clt_err *e) {
  trainer_replica *l = &t->local[i];
  clt_replica *r = l->replica;
  int status = CLT_OK;
  const double start = clt_now_seconds();
  /* The probes run on the kept training batch, whole slices, into the spare
   * metrics slot; the next step loads its own batch over it. */
  const clt_step_opts so = {.count = l->cap,
                            .loss_scale = 1.0f / (float)t->global,
                            .metric_slot = l->net->metric_slots - 1};
  if (cfg->tune) {
    clt_tune_ident ident;
    clt_tune_cache *cache = NULL;
    status = clt_tune_ident_of(&r->device, r->defines, &ident, e);
    if (!status) status = clt_tune_open(NULL, cfg->file, &ident, stderr, &cache, e);
    const int max_lines = CLT_CONV_PASSES * t->model->nlayers + 1;
    clt_tune_line *lines = status ? NULL : malloc((size_t)max_lines * sizeof *lines);
    if (!status && !lines) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
    if (!status && budget_s > 0 && !l->tune_progress &&
        !(l->tune_progress = clt_tune_progress_new()))
      status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory tuning");
    const clt_tuner_opts o = {.batch = l->cap,
                              .tune = budget_s > 0,
                              .budget_s = budget_s,
                              .cache = cache,
                              .progress = l->tune_progress};
    if (!status && o.tune && l->probe_input) {
      status = copy_buffer(r, l->probe_input, l->net->input, e);
      if (!status) status = copy_buffer(r, l->probe_labels, l->net->labels, e);
    }
    int n = 0;
    clt_tune_verdict v;
    const double t0 = clt_now_seconds();
    if (!status) status = clt_tune_net(l->net, &o, &so, lines, max_lines, &n, &v, e);
    if (!status && o.tune) report_verdict(cfg->verbose, t->base + i, &v, clt_now_seconds() - t0);
    if (!status && o.tune && v.over) *over = 1;
    free(lines);
    clt_tune_close(cache);
  }
  /* A checkpoint's algorithms, and its tilings rather than the cache's where
   * the record has a replica of this one's build; an older checkpoint's
   * algorithms by index. */
  int restored = 0;
  if (!status && cfg->replicas) restored = restore_choices(t, i, cfg);
  else if (!status && cfg->recorded) apply_record(t->model, r, t->base + i, l->cap, cfg->recorded);
  if (!status) status = clt_net_prepare(l->net, e);
  /* Then the products' tilings, as the chosen algorithms run them, once those
   * are settled. */
  if (!status && cfg->tune && !restored) {
    /* What the algorithms left of the budget; none left: the cache only. */
    const double left = budget_s > 0 ? budget_s - (clt_now_seconds() - start) : 0;
    const int settled = !clt_tune_progress_pending(l->tune_progress);
    status = clt_gemm_tune_trainer_net(l->net, cfg->file, left > 0 && settled, left, &so,
                                       cfg->verbose, e);
  }
  return status;
}

int clt_trainer_tune(clt_trainer *t, const clt_trainer_tuning *cfg, double budget_s, double *spent,
                     int *over, clt_err *e) {
  const double t0 = clt_now_seconds();
  int status = CLT_OK, ran_over = 0;
  for (int i = 0; i < t->n && !status; i++) {
    /* The budget is the run's: each replica gets what the others left. */
    double left = budget_s > 0 ? budget_s - (clt_now_seconds() - t0) : 0;
    if (budget_s > 0 && left <= 0) left = 1e-9;
    status = tune_replica(t, i, cfg, left, &ran_over, e);
  }
  if (spent) *spent = clt_now_seconds() - t0;
  if (over) *over = ran_over;
  return status;
}

char *clt_trainer_conv_record(const clt_trainer *t) {
  size_t size = 1, used = 0;
  char *out = NULL;
  /* Twice: the size, then the text. */
  for (int round = 0; round < 2; round++) {
    if (round == 1 && !(out = malloc(size))) return NULL;
    for (int i = 0; i < t->n; i++) {
      const clt_replica *r = t->local[i].replica;
      const clt_plan *plan = &t->local[i].net->plan;
      for (int k = 0; k < plan->nsteps; k++) {
        const clt_layer *l = &t->model->layers[plan->steps[k].layer];
        clt_conv_geom g;
        int filters;
        if (plan->steps[k].fusion.pools || !clt_conv2d_tunable(l, t->local[i].cap, &g, &filters))
          continue;
        const clt_conv_algos a = clt_conv_algos_layer(r, l->name, &g, filters);
        char line[256];
        const int n = snprintf(line, sizeof line, "%d %s %s %s %s\n", t->base + i, l->name,
                               clt_conv_algo_name(a.forward), clt_conv_algo_name(a.weight_grad),
                               clt_conv_algo_name(a.input_grad));
        if (n < 0) continue;
        if (round == 0) size += (size_t)n;
        else {
          memcpy(out + used, line, (size_t)n);
          used += (size_t)n;
        }
      }
    }
  }
  out[used] = '\0';
  return out;
}

/* Shapes in a fixed order (the table's order depends on how it was filled). */
static int shape_order(const void *pa, const void *pb) {
  const clt_gemm_shape *a = pa, *b = pb;
  const size_t x[5] = {(size_t)a->trans_a, (size_t)a->trans_b, a->m, a->n, a->k};
  const size_t y[5] = {(size_t)b->trans_a, (size_t)b->trans_b, b->m, b->n, b->k};
  for (int k = 0; k < 5; k++)
    if (x[k] != y[k]) return x[k] < y[k] ? -1 : 1;
  return 0;
}

char *clt_trainer_tiling_record(const clt_trainer *t) {
  text_buf b = {0};
  clt_gemm_shape shapes[CLT_GEMM_MAX_SHAPES], order[CLT_GEMM_MAX_SHAPES];
  char names[CLT_GEMM_MAX_SHAPES][CLT_GEMM_TILING_NAME];
  for (int i = 0; i < t->n; i++) {
    const clt_replica *r = t->local[i].replica;
    const clt_gemm_tilings *tt = r->backend->tilings;
    if (!tt) continue;
    const int n = tt->chosen(r, shapes, names, CLT_GEMM_MAX_SHAPES);
    memcpy(order, shapes, (size_t)n * sizeof order[0]);
    qsort(order, (size_t)n, sizeof order[0], shape_order);
    for (int k = 0; k < n; k++) {
      const clt_gemm_shape *s = &order[k];
      int at = 0;
      while (at < n && shape_order(&shapes[at], s) != 0) at++;
      text_add(&b, "%d tA%d tB%d m%zu n%zu k%zu %s\n", t->base + i, s->trans_a, s->trans_b, s->m,
               s->n, s->k, names[at]);
    }
  }
  return text_done(&b);
}

/* This process's "R RANK HOST BUILD DEVICE" lines. */
static char *replica_record(const clt_trainer *t, clt_err *e) {
  text_buf b = {0};
  for (int i = 0; i < t->n; i++) {
    const clt_replica *r = t->local[i].replica;
    const clt_replica_info *info = &t->info[t->base + i];
    clt_tune_ident ident;
    char build[17];
    if (clt_tune_ident_of(&r->device, r->defines, &ident, e)) {
      free(b.s);
      return NULL;
    }
    clt_tune_ident_hash(&ident, build);
    text_add(&b, "%d %d %s %s %s\n", t->base + i, info->rank, info->host[0] ? info->host : "-",
             build, r->device.name);
  }
  char *text = text_done(&b);
  if (!text) clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  return text;
}

int clt_trainer_choices_gather(clt_trainer *t, clt_trainer_choices *out, clt_err *e) {
  memset(out, 0, sizeof *out);
  char *part[3] = {clt_trainer_conv_record(t), clt_trainer_tiling_record(t), NULL};
  int status = part[0] && part[1] ? CLT_OK : clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  if (!status && !(part[2] = replica_record(t, e))) status = e->code ? e->code : CLT_ERR_NOMEM;
  /* Each process's three texts, NUL-terminated one after another, padded to the longest. */
  const int procs = clt_cluster_size(t->cluster);
  uint64_t mine = 0, longest = 0;
  for (int k = 0; k < 3 && !status; k++) mine += strlen(part[k]) + 1;
  uint64_t *sizes = malloc((size_t)procs * sizeof *sizes);
  if (!status && !sizes) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  /* A process that failed here stops every one before the transfers. */
  status = clt_cluster_agree(t->cluster, status, e);
  if (!status) status = clt_cluster_allgather(t->cluster, &mine, sizeof mine, sizes, e);
  longest = mine; /* this process's own, at least */
  for (int p = 0; p < procs && !status; p++) longest = sizes[p] > longest ? sizes[p] : longest;
  char *buf = status ? NULL : calloc((size_t)longest, 1);
  char *all = status ? NULL : malloc((size_t)longest * (size_t)procs);
  if (!status && (!buf || !all)) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  for (int k = 0, used = 0; k < 3 && !status; k++) {
    const size_t n = strlen(part[k]) + 1;
    memcpy(buf + used, part[k], n);
    used += (int)n;
  }
  if (!status) status = clt_cluster_allgather(t->cluster, buf, (size_t)longest, all, e);
  char **dst[3] = {&out->conv, &out->tilings, &out->replicas};
  for (int k = 0; k < 3 && !status; k++) {
    text_buf b = {0};
    for (int p = 0; p < procs; p++) {
      const char *text = all + (size_t)p * longest;
      for (int skip = 0; skip < k; skip++) text += strlen(text) + 1;
      text_add(&b, "%s", text);
    }
    if (!(*dst[k] = text_done(&b))) status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  }
  free(buf);
  free(all);
  free(sizes);
  for (int k = 0; k < 3; k++) free(part[k]);
  if (status) clt_trainer_choices_free(out);
  return status;
}

void clt_trainer_choices_free(clt_trainer_choices *c) {
  free(c->conv);
  free(c->tilings);
  free(c->replicas);
  memset(c, 0, sizeof *c);
}
