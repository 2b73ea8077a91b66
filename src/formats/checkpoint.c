#define _POSIX_C_SOURCE 200809L
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint_meta.h"
#include "npz.h"

int clt_checkpoint_fail_before_step;

#define INDEX_NAME "checkpoint"
#define BEST_NAME "best_checkpoint"
#define LOCK_NAME ".cltrain.lock"

/* The folder this process holds the lock of (clt_checkpoint_lock), by identity so
 * any spelling of its path matches; fd -1: none. Only the thread that saves uses
 * it (process 0's main thread). */
static struct {
  int fd;
  dev_t dev;
  ino_t ino;
} held = {-1, 0, 0};

/* The injected failure of the test hook, reported like a real one. */
static int injected(int step, const char *path, clt_err *e) {
  if (clt_checkpoint_fail_before_step != step) return CLT_OK;
  return clt_fail(e, CLT_ERR_IO, "%s: injected failure before step %d", path, step);
}

/* fsync of a folder makes a rename in it durable. */
static int sync_dir(const char *dir, clt_err *e) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return clt_fail(e, CLT_ERR_IO, "%s: cannot open folder to sync: %s", dir, strerror(errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  /* Some file systems cannot fsync folders (EINVAL); the rename is then as durable as they allow.
   */
  if (rc != 0 && err != EINVAL) return clt_fail(e, CLT_ERR_IO, "%s: fsync: %s", dir, strerror(err));
  return CLT_OK;
}

/* mkdir -p: the folder and any missing parents. */
static int make_dir(const char *dir, clt_err *e) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
    return clt_fail(e, CLT_ERR_IO, "%s: path too long", dir);
  }
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    struct stat st;
    if (stat(path, &st) != 0) {
      if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        return clt_fail(e, CLT_ERR_IO, "%s: cannot create checkpoint folder: %s", path,
                        strerror(errno));
      }
    } else if (!S_ISDIR(st.st_mode)) {
      return clt_fail(e, CLT_ERR_IO, "%s: exists and is not a folder", path);
    }
    *p = saved;
    if (!saved) break;
  }
  return CLT_OK;
}

int clt_checkpoint_prepare_dir(const char *dir, clt_err *e) {
  int status = make_dir(dir, e);
  if (status) return status;
  if (access(dir, W_OK | X_OK) != 0) {
    return clt_fail(e, CLT_ERR_IO, "%s: checkpoint folder is not writable: %s", dir,
                    strerror(errno));
  }
  return CLT_OK;
}

/* K of "ckpt-K.npz", or 0 if name is not of that form. */
static long ckpt_number(const char *name) {
  if (strncmp(name, "ckpt-", 5) != 0) return 0;
  char *end = NULL;
  long k = strtol(name + 5, &end, 10);
  if (k <= 0 || end == name + 5 || strcmp(end, ".npz") != 0) return 0;
  return k;
}

/* Whether this process holds the lock of dir (clt_checkpoint_lock). */
static int holds_lock(const char *dir) {
  struct stat st;
  return held.fd >= 0 && stat(dir, &st) == 0 && st.st_dev == held.dev && st.st_ino == held.ino;
}

/* Temp files of saves that crashed (".ckpt-K.npz.tmp-PID", ".checkpoint.tmp-PID",
 * ".best_checkpoint.tmp-PID"),
 * never named by the index. This process's own are always safe to remove. Another
 * process's may be a save in flight (a second writer on the folder): removing it
 * would make that save fail, so they are removed only while this process holds
 * the folder's lock. Then no other cltrain can be saving here, and any other
 * temp file is what a dead process (kill -9 mid-save) left behind. */
static void remove_stale_temps(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  const int all = holds_lock(dir);
  const long self = (long)getpid();
  struct dirent *ent;
  while ((ent = readdir(d))) {
    const char *n = ent->d_name;
    const char *tmp = strstr(n, ".tmp-");
    if (!tmp || (strncmp(n, ".ckpt-", 6) != 0 &&
                 strncmp(n, "." INDEX_NAME ".tmp-", strlen(INDEX_NAME) + 6) != 0 &&
                 strncmp(n, "." BEST_NAME ".tmp-", strlen(BEST_NAME) + 6) != 0))
      continue;
    char *end = NULL;
    const long pid = strtol(tmp + 5, &end, 10);
    if (!all && (end == tmp + 5 || *end || pid != self)) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, n);
    unlink(path);
  }
  closedir(d);
}

/* "12345" or "12345 on HOST" when the holder wrote another host's name. */
static void lock_holder(int fd, char *out, size_t size) {
  char text[320] = "", host[256] = "", here[256] = "";
  long pid = 0;
  /* The holder writes its PID just after locking: give it a moment if empty. */
  for (int attempt = 0; attempt < 20; attempt++) {
    const ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    if (sscanf(text, "%ld %255s", &pid, host) >= 1 && pid > 0) break;
    pid = 0;
    struct timespec pause = {0, 10L * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  if (gethostname(here, sizeof here - 1) != 0) here[0] = '\0';
  if (pid <= 0) snprintf(out, size, "pid unknown");
  else if (host[0] && strcmp(host, here) != 0) snprintf(out, size, "pid %ld on %.64s", pid, host);
  else snprintf(out, size, "pid %ld", pid);
}

int clt_checkpoint_lock(const char *dir, int *fd_out, clt_err *e) {
  int status = CLT_OK, fd = -1;
  char path[4096];
  struct stat st;
  *fd_out = -1;
  if (snprintf(path, sizeof path, "%s/%s", dir, LOCK_NAME) >= (int)sizeof path) {
    status = clt_fail(e, CLT_ERR_IO, "%s: path too long", dir);
    goto cleanup;
  }
  /* O_CLOEXEC: a program this process starts must not inherit (and keep) the lock. */
  if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot open lock file: %s", path, strerror(errno));
    goto cleanup;
  }
  /* flock, not fcntl: fcntl locks vanish when any descriptor of the file closes.
   * Either way the kernel releases the lock when the holder dies. */
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      char holder[400];
      lock_holder(fd, holder, sizeof holder);
      status = clt_fail(e, CLT_ERR_IO,
                        "%s: in use by another cltrain (%s); wait for it or choose another "
                        "--checkpoint-dir",
                        dir, holder);
    } else {
      status = clt_fail(e, CLT_ERR_IO, "%s: cannot lock: %s", path, strerror(errno));
    }
    goto cleanup;
  }
  char text[320], host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  const int n = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), host);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n || stat(dir, &st) != 0) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot write lock file: %s", path, strerror(errno));
    goto cleanup;
  }
  held.fd = fd;
  held.dev = st.st_dev;
  held.ino = st.st_ino;
  *fd_out = fd;
  fd = -1;
cleanup:
  if (fd >= 0) close(fd); /* releases a lock taken here */
  return status;
}

void clt_checkpoint_unlock(int fd) {
  if (fd < 0) return;
  if (fd == held.fd) held.fd = -1;
  close(fd); /* the last descriptor of the lock: flock's lock goes with it */
}

/* The checkpoint numbers present in dir, ascending. */
static int list_checkpoints(const char *dir, long **out, int *n, clt_err *e) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return clt_fail(e, CLT_ERR_IO, "%s: cannot list folder: %s", dir, strerror(errno));
  long *ks = NULL;
  int count = 0, cap = 0;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    long k = ckpt_number(ent->d_name);
    if (!k) continue;
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      long *grown = realloc(ks, (size_t)cap * sizeof *ks);
      if (!grown) {
        free(ks);
        closedir(d);
        return clt_fail(e, CLT_ERR_NOMEM, "out of host memory listing %s", dir);
      }
      ks = grown;
    }
    ks[count++] = k;
  }
  closedir(d);
  for (int i = 1; i < count; i++) { /* insertion sort: a handful of files */
    long v = ks[i];
    int j = i - 1;
    while (j >= 0 && ks[j] > v) {
      ks[j + 1] = ks[j];
      j--;
    }
    ks[j + 1] = v;
  }
  *out = ks;
  *n = count;
  return CLT_OK;
}

/* Writes text as dir/name atomically (temp file, fsync, rename, fsync of the
 * folder); `what` names it in errors; step is the test hook's first of its three
 * steps (0: none). */
static int write_text(const char *dir, const char *name, const char *text, const char *what,
                      int step, clt_err *e) {
  char tmp[4096], final[4096];
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%ld", dir, name, (long)getpid());
  snprintf(final, sizeof final, "%s/%s", dir, name);
  int status = step ? injected(step, tmp, e) : CLT_OK;
  if (status) return status;
  FILE *f = fopen(tmp, "w");
  if (!f) return clt_fail(e, CLT_ERR_IO, "%s: cannot write %s: %s", tmp, what, strerror(errno));
  fputs(text, f);
  int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
  int err = errno;
  if (fclose(f) != 0 && !bad) {
    bad = 1;
    err = errno;
  }
  if (bad) {
    unlink(tmp);
    return clt_fail(e, CLT_ERR_IO, "%s: cannot write %s: %s", tmp, what, strerror(err));
  }
  if (step && (status = injected(step + 1, final, e))) {
    unlink(tmp);
    return status;
  }
  if (rename(tmp, final) != 0) {
    err = errno;
    unlink(tmp);
    return clt_fail(e, CLT_ERR_IO, "%s: cannot rename %s into place: %s", final, what,
                    strerror(err));
  }
  if (step && (status = injected(step + 2, dir, e))) return status;
  return sync_dir(dir, e);
}

static int write_index(const char *dir, const long *ks, int n, clt_err *e) {
  /* TensorFlow's CheckpointState text format: newest first, then all in order. */
  const size_t size = (size_t)(n + 1) * 64; /* a line is under 64 characters */
  char *text = malloc(size);
  if (!text) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory writing %s's index", dir);
  size_t len = (size_t)snprintf(text, size, "model_checkpoint_path: \"ckpt-%ld\"\n", ks[n - 1]);
  for (int i = 0; i < n; i++) {
    len += (size_t)snprintf(text + len, size - len, "all_model_checkpoint_paths: \"ckpt-%ld\"\n",
                            ks[i]);
  }
  const int status = write_text(dir, INDEX_NAME, text, "index", 4, e);
  free(text);
  return status;
}

static int write_best(const char *dir, const clt_checkpoint_best *b, clt_err *e) {
  char text[512];
  int len = snprintf(text, sizeof text,
                     "best_checkpoint_path: \"ckpt-%ld\"\nmonitor: \"%s\"\nvalue: %.17g\n"
                     "epoch: %d\n",
                     b->k, b->monitor, b->value, b->epoch);
  if (b->restored_in)
    snprintf(text + len, sizeof text - (size_t)len, "restored_in: \"ckpt-%ld\"\n", b->restored_in);
  return write_text(dir, BEST_NAME, text, "best-checkpoint record", 0, e);
}

/* K of a quoted "ckpt-K" value, or 0. */
static long quoted_ckpt(const char *value) {
  char name[64], file[80];
  int end = 0;
  if (sscanf(value, "\"%58[^\"]\"%n", name, &end) != 1 || value[end]) return 0;
  snprintf(file, sizeof file, "%s.npz", name);
  return ckpt_number(file);
}

int clt_checkpoint_best_read(const char *dir, clt_checkpoint_best *b, int *found, clt_err *e) {
  char path[4096], line[512];
  memset(b, 0, sizeof *b);
  *found = 0;
  snprintf(path, sizeof path, "%s/%s", dir, BEST_NAME);
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return CLT_OK;
    return clt_fail(e, CLT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
  }
  int n = 0, bad = 0, have = 0; /* have: a bit per key read */
  while (!bad && fgets(line, sizeof line, f)) {
    n++;
    line[strcspn(line, "\n")] = '\0';
    char key[32];
    int at = 0;
    if (sscanf(line, "%31[a-z_]: %n", key, &at) != 1 || !at) key[0] = '\0'; /* bad below */
    if (!strcmp(key, "best_checkpoint_path")) {
      bad = !(b->k = quoted_ckpt(line + at));
      have |= 1;
    } else if (!strcmp(key, "monitor")) {
      int end = 0;
      bad = sscanf(line + at, "\"%31[a-z_]\"%n", b->monitor, &end) != 1 || line[at + end];
      have |= 2;
    } else if (!strcmp(key, "value")) {
      char *end = NULL;
      b->value = strtod(line + at, &end);
      bad = end == line + at || *end || !isfinite(b->value);
      have |= 4;
    } else if (!strcmp(key, "epoch")) {
      char *end = NULL;
      const long v = strtol(line + at, &end, 10);
      bad = end == line + at || *end || v < 1 || v > INT_MAX;
      b->epoch = (int)v;
      have |= 8;
    } else if (!strcmp(key, "restored_in")) {
      bad = !(b->restored_in = quoted_ckpt(line + at));
    } else {
      bad = 1;
    }
  }
  const int read_error = ferror(f);
  fclose(f);
  if (read_error) return clt_fail(e, CLT_ERR_IO, "%s: cannot read", path);
  static const char *const required[] = {"best_checkpoint_path", "monitor", "value", "epoch"};
  for (int i = 0; i < 4 && !bad; i++) {
    if (!(have & 1 << i))
      return clt_fail(e, CLT_ERR_FORMAT, "%s: not a best-checkpoint record (no %s line)", path,
                      required[i]);
  }
  if (bad) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: not a best-checkpoint record (line %d; cltrain writes "
                    "best_checkpoint_path: \"ckpt-K\", monitor, value, epoch and restored_in)",
                    path, n);
  }
  *found = 1;
  return CLT_OK;
}

int clt_checkpoint_best_restored(const char *dir, long k, clt_err *e) {
  clt_checkpoint_best b;
  int found = 0;
  int status = clt_checkpoint_best_read(dir, &b, &found, e);
  if (status || !found) return status;
  b.restored_in = k;
  return write_best(dir, &b, e);
}

int clt_checkpoint_best_forget(const char *dir, clt_err *e) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, BEST_NAME);
  if (unlink(path) != 0 && errno != ENOENT)
    return clt_fail(e, CLT_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
  return CLT_OK;
}

/* Member name of parameter p of layer l: the weight ("conv2d/kernel") for slot NULL,
 * else the optimizer's slot variable ("optimizer/conv2d/kernel/m"). */
static void member_name(const clt_layer *l, int p, const char *slot, char *buf, size_t size) {
  if (!slot) snprintf(buf, size, "%s/%s", l->name, l->params[p].name);
  else snprintf(buf, size, "optimizer/%s/%s/%s", l->name, l->params[p].name, slot);
}

static void set_param_array(clt_npz_array *a, const char *name, const clt_param *p,
                            const float *flat) {
  memset(a, 0, sizeof *a);
  snprintf(a->name, sizeof a->name, "%s", name);
  snprintf(a->dtype, sizeof a->dtype, "<f4");
  a->rank = p->rank;
  for (int d = 0; d < p->rank; d++) a->dims[d] = p->dims[d];
  a->data = flat + p->offset;
  a->bytes = p->size * sizeof(float);
}

static void set_scalar(clt_npz_array *a, const char *name, const char *dtype, const void *v) {
  memset(a, 0, sizeof *a);
  snprintf(a->name, sizeof a->name, "%s", name);
  snprintf(a->dtype, sizeof a->dtype, "%s", dtype);
  a->data = v;
  a->bytes = 8;
}

int clt_checkpoint_save(const char *dir, int keep, const clt_model *m, clt_checkpoint *st,
                        char *path_out, size_t path_size, clt_err *e) {
  int status = CLT_OK;
  long *ks = NULL, *kept = NULL;
  int nk = 0;
  clt_npz_array *arrays = NULL;
  uint32_t *meta_text = NULL, *names_text = NULL, *json_text = NULL;
  char *meta = NULL, tmp[4096] = "", final[4096];

  if ((status = make_dir(dir, e))) goto cleanup;
  remove_stale_temps(dir);
  if ((status = list_checkpoints(dir, &ks, &nk, e))) goto cleanup;
  const long k = nk ? ks[nk - 1] + 1 : 1;
  st->save_counter = k;
  /* The best checkpoint stays whatever --keep says: this one, or the one recorded. */
  clt_checkpoint_best best = {0};
  int has_best = 0;
  if (st->best) {
    const clt_early_stop *es = &st->early_stop;
    best = (clt_checkpoint_best){.k = k, .value = es->best, .epoch = es->best_epoch + 1};
    snprintf(best.monitor, sizeof best.monitor, "%s", clt_monitor_name(es->monitor));
    has_best = es->enabled && es->has_best;
    if (!has_best) {
      status = clt_fail(e, CLT_ERR_INTERNAL, "a best checkpoint without early stopping's best");
      goto cleanup;
    }
  } else if ((status = clt_checkpoint_best_read(dir, &best, &has_best, e))) {
    goto cleanup;
  }

  int nparams = 0;
  for (int i = 0; i < m->nlayers; i++) nparams += m->layers[i].nparams;
  const int narrays = (1 + CLT_OPT_SLOTS) * nparams + 9;
  if (st->epoch_step < 0 || (st->epoch_step > 0 && !st->epoch_sums)) {
    status = clt_fail(e, CLT_ERR_INTERNAL, "checkpoint with %lld steps into an epoch and %s sums",
                      (long long)st->epoch_step, st->epoch_sums ? "their" : "no");
    goto cleanup;
  }
  arrays = calloc((size_t)narrays, sizeof *arrays);
  meta = clt_checkpoint_meta_json(m, &st->optimizer, &st->plateau, &st->data, &st->early_stop,
                                  st->conv_algorithms, st->gemm_tilings, st->replicas);
  if (meta) meta_text = calloc(strlen(meta) + 1, sizeof *meta_text);
  if (st->class_names) names_text = calloc(strlen(st->class_names) + 1, sizeof *names_text);
  if (st->keras_json) json_text = calloc(strlen(st->keras_json) + 1, sizeof *json_text);
  if (!arrays || !meta_text || (st->class_names && !names_text) || (st->keras_json && !json_text)) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory saving a checkpoint");
    goto cleanup;
  }
  int a = 0;
  for (int pass = 0; pass <= CLT_OPT_SLOTS; pass++) {
    /* The weights, then each slot variable the optimizer keeps. */
    const char *slot = pass ? clt_optimizer_slot(&st->optimizer, pass - 1) : NULL;
    const float *flat = pass ? st->opt_state[pass - 1] : st->params;
    if (pass && !slot) continue;
    if (!flat) {
      status = clt_fail(e, CLT_ERR_INTERNAL, "checkpoint without %s to save",
                        pass ? "optimizer state" : "parameters");
      goto cleanup;
    }
    for (int i = 0; i < m->nlayers; i++) {
      const clt_layer *l = &m->layers[i];
      for (int p = 0; p < l->nparams; p++) {
        /* The optimizer has no slots for the moving statistics, nor for a frozen layer. */
        if (slot && (l->params[p].non_trainable || l->frozen)) continue;
        char name[128];
        member_name(l, p, slot, name, sizeof name);
        set_param_array(&arrays[a++], name, &l->params[p], flat);
      }
    }
  }
  set_scalar(&arrays[a++], "optimizer/iterations", "<i8", &st->iterations);
  set_scalar(&arrays[a++], "epoch", "<i8", &st->epoch);
  set_scalar(&arrays[a++], "save_counter", "<i8", &st->save_counter);
  set_scalar(&arrays[a++], "data/seed", "<u8", &st->seed);
  clt_npz_string(&arrays[a++], "metadata", meta, meta_text);
  if (st->class_names)
    clt_npz_string(&arrays[a++], "data/class_names", st->class_names, names_text);
  if (st->keras_json) clt_npz_string(&arrays[a++], "model/keras_json", st->keras_json, json_text);
  set_scalar(&arrays[a++], "data/epoch_step", "<i8", &st->epoch_step);
  if (st->epoch_step > 0) {
    clt_npz_array *sums = &arrays[a++];
    memset(sums, 0, sizeof *sums);
    snprintf(sums->name, sizeof sums->name, "data/epoch_sums");
    snprintf(sums->dtype, sizeof sums->dtype, "<f8");
    sums->rank = 2;
    sums->dims[0] = st->epoch_step;
    sums->dims[1] = 2;
    sums->data = st->epoch_sums;
    sums->bytes = (size_t)st->epoch_step * 2 * sizeof(double);
  }

  snprintf(tmp, sizeof tmp, "%s/.ckpt-%ld.npz.tmp-%ld", dir, k, (long)getpid());
  snprintf(final, sizeof final, "%s/ckpt-%ld.npz", dir, k);
  if ((status = injected(1, tmp, e))) goto cleanup;
  if ((status = clt_npz_write(tmp, arrays, a, e))) goto cleanup;
  if ((status = injected(2, final, e))) goto cleanup;
  if (rename(tmp, final) != 0) {
    status = clt_fail(e, CLT_ERR_IO, "%s: cannot rename checkpoint into place: %s", final,
                      strerror(errno));
    goto cleanup;
  }
  tmp[0] = '\0';
  if ((status = injected(3, dir, e))) goto cleanup;
  if ((status = sync_dir(dir, e))) goto cleanup;

  if (st->best && (status = write_best(dir, &best, e))) goto cleanup;

  /* The index lists what remains after pruning, newest last: the newest `keep`
   * and the best. */
  long *all = realloc(ks, (size_t)(nk + 1) * sizeof *ks);
  if (!all || !(kept = malloc((size_t)(nk + 1) * sizeof *kept))) {
    if (all) ks = all;
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory saving a checkpoint");
    goto cleanup;
  }
  ks = all;
  ks[nk++] = k;
  const int first_kept = keep > 0 && nk > keep ? nk - keep : 0;
  int nkept = 0;
  for (int i = 0; i < nk; i++)
    if (i >= first_kept || (has_best && ks[i] == best.k)) kept[nkept++] = ks[i];
  if ((status = write_index(dir, kept, nkept, e))) goto cleanup;
  if ((status = injected(7, dir, e))) goto cleanup;
  for (int i = 0; i < first_kept; i++) {
    if (has_best && ks[i] == best.k) continue;
    char old[4096];
    snprintf(old, sizeof old, "%s/ckpt-%ld.npz", dir, ks[i]);
    if (unlink(old) != 0 && errno != ENOENT) {
      status = clt_fail(e, CLT_ERR_IO, "%s: cannot remove old checkpoint: %s", old,
                        strerror(errno));
      goto cleanup;
    }
  }
  if (path_out) snprintf(path_out, path_size, "%s", final);

cleanup:
  if (tmp[0]) unlink(tmp); /* a failed save leaves no temp file behind */
  free(ks);
  free(kept);
  free(arrays);
  free(meta);
  free(meta_text);
  free(names_text);
  free(json_text);
  return status;
}

int clt_checkpoint_resolve(const char *dir_or_file, char *path, size_t size, clt_err *e) {
  struct stat st;
  if (stat(dir_or_file, &st) != 0) {
    return clt_fail(e, CLT_ERR_IO, "%s: no such checkpoint file or folder", dir_or_file);
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(path, size, "%s", dir_or_file);
    return CLT_OK;
  }
  char index[4096];
  snprintf(index, sizeof index, "%s/%s", dir_or_file, INDEX_NAME);
  FILE *f = fopen(index, "r");
  if (!f) {
    return clt_fail(e, CLT_ERR_IO, "%s: no checkpoint index (%s) in this folder", index,
                    strerror(errno));
  }
  char line[512] = "";
  char *got = fgets(line, sizeof line, f);
  fclose(f);
  char name[256];
  if (!got || sscanf(line, "model_checkpoint_path: \"%255[^\"]\"", name) != 1) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: not a checkpoint index (first line should be "
                    "model_checkpoint_path: \"ckpt-K\")",
                    index);
  }
  /* TensorFlow's index names files of its own folder, and cltrain writes bare
   * "ckpt-K": a name with a '/' (an absolute path, "../x", "sub/../../x") or ".."
   * itself could make eval or --resume read a file elsewhere, so it is refused. */
  if (!name[0] || strchr(name, '/') || strchr(name, '\\') || strcmp(name, ".") == 0 ||
      strcmp(name, "..") == 0) {
    char shown[300];
    clt_npz_printable(shown, sizeof shown, name);
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: the index names \"%s\", which is not a file of this folder (only a "
                    "bare file name, without '/', is accepted)",
                    index, shown);
  }
  snprintf(path, size, "%s/%s.npz", dir_or_file, name);
  if (stat(path, &st) != 0) {
    return clt_fail(e, CLT_ERR_IO, "%s: the index names %s, which does not exist", index, path);
  }
  return CLT_OK;
}

int clt_checkpoint_resolve_model(const char *dir_or_file, int best, char *path, size_t size,
                                 int *is_best, clt_err *e) {
  struct stat st;
  clt_checkpoint_best b;
  int found = 0, status;
  if (is_best) *is_best = 0;
  if (!best && (status = clt_checkpoint_resolve(dir_or_file, path, size, e))) return status;
  if (stat(dir_or_file, &st) != 0) {
    return clt_fail(e, CLT_ERR_IO, "%s: no such checkpoint folder", dir_or_file);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (!best) return CLT_OK;
    return clt_fail(e, CLT_ERR_ARG, "--best: %s is a file; --best takes a checkpoint folder",
                    dir_or_file);
  }
  if ((status = clt_checkpoint_best_read(dir_or_file, &b, &found, e))) return status;
  if (best && !found) {
    return clt_fail(e, CLT_ERR_ARG,
                    "--best: %s records no best checkpoint (cltrain train --early-stopping "
                    "records one, in %s)",
                    dir_or_file, BEST_NAME);
  }
  char newest[4200];
  snprintf(newest, sizeof newest, "%s/ckpt-%ld.npz", dir_or_file, b.restored_in);
  /* Without --best the best only where the run ended restoring its weights into
   * the newest checkpoint, which the index still names. */
  if (!best && !(found && b.restored_in && strcmp(newest, path) == 0)) return CLT_OK;
  snprintf(path, size, "%s/ckpt-%ld.npz", dir_or_file, b.k);
  if (stat(path, &st) != 0) {
    return clt_fail(e, CLT_ERR_IO, "%s/%s names ckpt-%ld, which does not exist", dir_or_file,
                    BEST_NAME, b.k);
  }
  if (is_best) *is_best = 1;
  return CLT_OK;
}

/* The archive at path, or in bytes (NULL: read the file). */
static int open_archive(const char *path, const unsigned char *bytes, size_t size, clt_npz **z,
                        clt_err *e) {
  return bytes ? clt_npz_read_memory(path, bytes, size, z, e) : clt_npz_read(path, z, e);
}

int clt_checkpoint_model(const char *path, clt_model *m, clt_err *e) {
  return clt_checkpoint_model_from(path, NULL, 0, m, e);
}

int clt_checkpoint_model_from(const char *path, const unsigned char *bytes, size_t size,
                              clt_model *m, clt_err *e) {
  clt_npz *z = NULL;
  clt_checkpoint_meta *meta = calloc(1, sizeof *meta);
  if (!meta) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory reading %s", path);
  int status = open_archive(path, bytes, size, &z, e);
  if (!status) status = clt_checkpoint_meta_read(path, z, 0, meta, e);
  if (!status && (status = clt_checkpoint_meta_model(meta, m, e))) clt_wrap(e, "%s", path);
  clt_npz_free(z);
  clt_checkpoint_meta_free(meta);
  free(meta);
  return status;
}

/* Every slot variable name of any optimizer ("m", "v", "momentum", "velocity"),
 * from the optimizers' table; returns how many. */
static int all_slot_names(const char *names[], int max) {
  int n = 0;
  for (int k = 0; k < CLT_OPT_KINDS; k++) {
    for (int s = 0; s < CLT_OPT_SLOTS; s++) {
      const char *slot = clt_optimizer_ops_of((clt_optimizer_kind)k)->slots[s];
      int seen = !slot;
      for (int j = 0; j < n && !seen; j++) seen = strcmp(names[j], slot) == 0;
      if (!seen && n < max) names[n++] = slot;
    }
  }
  return n;
}

/* Checks member `name` against parameter p (dtype, shape, every value finite) and
 * copies it into flat (unless NULL). Absent: an error if required, else CLT_OK. */
static int load_array(const char *path, const clt_npz *z, char *used, const char *name,
                      const clt_param *p, float *flat, int required, clt_err *e) {
  const clt_npz_array *a = clt_npz_take(z, name, used);
  if (!a) return required ? clt_fail(e, CLT_ERR_FORMAT, "%s: missing member %s", path, name) : 0;
  if (strcmp(a->dtype, "<f4") != 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s has dtype %s, expected <f4", path, name,
                    a->dtype);
  }
  int same = a->rank == p->rank;
  for (int d = 0; same && d < p->rank; d++) same = a->dims[d] == p->dims[d];
  if (!same) {
    char want[64] = "", got[64] = "";
    for (int d = 0; d < p->rank; d++) {
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", d ? "," : "", p->dims[d]);
    }
    for (int d = 0; d < a->rank && d < CLT_NPZ_MAX_RANK; d++) {
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "",
               (long long)a->dims[d]);
    }
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s has shape (%s), the model needs (%s)", path,
                    name, got, want);
  }
  /* A NaN or infinity would be trained on or evaluated as if it were a weight. */
  int status = clt_npz_check_finite(path, a, e);
  if (status) return status;
  if (flat) memcpy(flat + p->offset, a->data, p->size * sizeof(float)); /* may be unaligned */
  return CLT_OK;
}

static int load_scalar(const char *path, const clt_npz *z, char *used, const char *name,
                       const char *dtype, int required, void *out, clt_err *e) {
  const clt_npz_array *a = clt_npz_take(z, name, used);
  if (!a) return required ? clt_fail(e, CLT_ERR_FORMAT, "%s: missing member %s", path, name) : 0;
  if (strcmp(a->dtype, dtype) != 0 || a->rank != 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s should be a %s scalar", path, name, dtype);
  }
  memcpy(out, a->data, 8);
  return CLT_OK;
}

/* An optional string member into a new string *out (left NULL when absent). */
static int load_string(const char *path, const clt_npz *z, char *used, const char *name, char **out,
                       clt_err *e) {
  const clt_npz_array *a = clt_npz_take(z, name, used);
  if (!a) return CLT_OK;
  const size_t size = a->bytes + 1; /* at most as many characters as its bytes */
  if (!(*out = malloc(size)))
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory loading %s", path);
  if (clt_npz_get_string(a, *out, size) != 0) {
    return clt_fail(e, CLT_ERR_FORMAT, "%s: member %s is not a string", path, name);
  }
  return CLT_OK;
}

/* data/epoch_sums: epoch_step rows of (summed loss, correct count), finite. */
static int load_epoch_sums(const char *path, const clt_npz *z, char *used, clt_checkpoint *st,
                           clt_err *e) {
  const clt_npz_array *a = clt_npz_take(z, "data/epoch_sums", used);
  if (!a) return clt_fail(e, CLT_ERR_FORMAT, "%s: missing member data/epoch_sums", path);
  if (strcmp(a->dtype, "<f8") != 0 || a->rank != 2 || a->dims[0] != st->epoch_step ||
      a->dims[1] != 2) {
    return clt_fail(e, CLT_ERR_FORMAT,
                    "%s: member data/epoch_sums should be <f8 of shape (%lld, 2), as "
                    "data/epoch_step says",
                    path, (long long)st->epoch_step);
  }
  int status = clt_npz_check_finite(path, a, e);
  if (status) return status;
  if (!(st->epoch_sums = malloc(a->bytes))) {
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory loading %s", path);
  }
  memcpy(st->epoch_sums, a->data, a->bytes);
  return CLT_OK;
}

int clt_checkpoint_extra_member(const clt_model *m, const char *name) {
  static const char *const fixed[] = {"optimizer/iterations",
                                      "epoch",
                                      "save_counter",
                                      "data/seed",
                                      "metadata",
                                      "data/class_names",
                                      "model/keras_json",
                                      "data/epoch_step",
                                      "data/epoch_sums"};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (strcmp(name, fixed[i]) == 0) return 1;
  /* "optimizer/<layer>/<param>/<slot>": a known slot of a trainable parameter. */
  const char *rest = name + 10, *slash = strrchr(name, '/');
  if (strncmp(name, "optimizer/", 10) != 0 || slash < rest) return 0;
  const char *slots[8] = {0};
  int known = 0;
  for (int k = all_slot_names(slots, 8); k-- > 0;) known |= strcmp(slash + 1, slots[k]) == 0;
  const size_t len = (size_t)(slash - rest); /* of "<layer>/<param>" */
  for (int i = 0; i < m->nlayers && known; i++) {
    const clt_layer *l = &m->layers[i];
    const size_t ln = strlen(l->name);
    if (len <= ln || strncmp(rest, l->name, ln) != 0 || rest[ln] != '/') continue;
    for (int p = 0; p < l->nparams; p++) {
      const char *param = l->params[p].name;
      if (!l->params[p].non_trainable && strlen(param) == len - ln - 1 &&
          strncmp(rest + ln + 1, param, len - ln - 1) == 0)
        return 1;
    }
  }
  return 0;
}

int clt_checkpoint_load(const char *path, const clt_model *m, int with_optimizer,
                        clt_checkpoint *st, clt_err *e) {
  return clt_checkpoint_load_from(path, NULL, 0, m, with_optimizer, st, e);
}

int clt_checkpoint_load_from(const char *path, const unsigned char *bytes, size_t size,
                             const clt_model *m, int with_optimizer, clt_checkpoint *st,
                             clt_err *e) {
  int status = CLT_OK;
  clt_npz *z = NULL;
  char *used = NULL; /* per member: one this checkpoint may hold */
  clt_checkpoint_meta *meta = calloc(1, sizeof *meta);
  const size_t arch_size = clt_describe_max(m->nlayers);
  char *arch = malloc(arch_size);
  unsigned char *was_frozen = malloc((size_t)m->nlayers + 1);
  memset(st, 0, sizeof *st);
  if (!meta || !arch || !was_frozen) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory loading %s", path);
    goto cleanup;
  }
  if ((status = open_archive(path, bytes, size, &z, e))) goto cleanup;
  if (!(used = calloc((size_t)clt_npz_count(z) + 1, 1))) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory loading %s", path);
    goto cleanup;
  }
  clt_npz_take(z, "metadata", used);
  if ((status = clt_checkpoint_meta_read(path, z, with_optimizer, meta, e))) goto cleanup;
  clt_model_describe(m, arch, arch_size);
  if (strcmp(meta->model, m->name) != 0 || meta->classes != m->classes ||
      meta->input.h != m->input.h || meta->input.w != m->input.w || meta->input.c != m->input.c) {
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: checkpoint of model %s for %dx%dx%d inputs and %d class%s, not of %s "
                      "for %dx%dx%d and %d class%s",
                      path, meta->model, meta->input.h, meta->input.w, meta->input.c, meta->classes,
                      meta->classes == 1 ? "" : "es", m->name, m->input.h, m->input.w, m->input.c,
                      m->classes, m->classes == 1 ? "" : "es");
    goto cleanup;
  }
  if (strcmp(meta->architecture, arch) != 0) {
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: architecture differs from this cltrain's %s: "
                      "checkpoint has [%s], cltrain builds [%s]",
                      path, m->name, meta->architecture, arch);
    goto cleanup;
  }
  /* The layers the checkpoint's run froze have no slots there. */
  if ((status = clt_checkpoint_meta_frozen(meta, m, was_frozen, e))) {
    clt_wrap(e, "%s", path);
    goto cleanup;
  }
  if (with_optimizer) {
    st->optimizer = meta->optimizer;
    st->plateau = meta->plateau;
  }
  st->data = meta->data;
  st->early_stop = meta->early_stop;
  st->params = calloc(m->flat_floats, sizeof(float));
  int nomem = !st->params;
  if (meta->conv_algorithms[0]) {
    const size_t n = strlen(meta->conv_algorithms) + 1;
    st->conv_algorithms = malloc(n);
    if (st->conv_algorithms) memcpy(st->conv_algorithms, meta->conv_algorithms, n);
    nomem |= !st->conv_algorithms;
  }
  /* Taken over from the metadata, which clt_checkpoint_meta_free then leaves alone. */
  st->gemm_tilings = meta->gemm_tilings;
  st->replicas = meta->replicas;
  meta->gemm_tilings = meta->replicas = NULL;
  for (int k = 0; k < CLT_OPT_SLOTS && with_optimizer; k++) {
    st->opt_state[k] = calloc(m->flat_floats, sizeof(float)); /* zeros where no slot */
    nomem |= !st->opt_state[k];
  }
  if (nomem) {
    status = clt_fail(e, CLT_ERR_NOMEM, "out of host memory loading %s", path);
    goto cleanup;
  }
  /* The weights, then the slot variables: with the optimizer those it keeps, all
   * required but for the layers the checkpoint froze, and loaded where m trains
   * (a layer m freezes keeps none; one m trains and the checkpoint froze starts
   * at zero); without it (evaluation) those of any optimizer, optional and not
   * loaded, but checked when present, so a damaged checkpoint is never taken. */
  const char *slots[8] = {0};
  const int nslots = with_optimizer ? CLT_OPT_SLOTS : all_slot_names(slots, 8);
  for (int pass = 0; pass <= nslots; pass++) {
    const char *slot = !pass            ? NULL
                       : with_optimizer ? clt_optimizer_slot(&st->optimizer, pass - 1)
                                        : slots[pass - 1];
    float *flat = !pass ? st->params : with_optimizer ? st->opt_state[pass - 1] : NULL;
    if (pass && !slot) continue;
    for (int i = 0; i < m->nlayers; i++) {
      const clt_layer *l = &m->layers[i];
      for (int p = 0; p < l->nparams; p++) {
        if (slot && (l->params[p].non_trainable || (with_optimizer && was_frozen[i]))) continue;
        char name[160];
        member_name(l, p, slot, name, sizeof name);
        const int required = !pass || with_optimizer;
        float *into = slot && l->frozen ? NULL : flat;
        if ((status = load_array(path, z, used, name, &l->params[p], into, required, e)))
          goto cleanup;
      }
    }
  }
  if ((status = load_scalar(path, z, used, "optimizer/iterations", "<i8", 1, &st->iterations, e)) ||
      (status = load_scalar(path, z, used, "epoch", "<i8", 1, &st->epoch, e)) ||
      (status = load_scalar(path, z, used, "save_counter", "<i8", 1, &st->save_counter, e)) ||
      (status = load_scalar(path, z, used, "data/seed", "<u8", 1, &st->seed, e)) ||
      (status = load_scalar(path, z, used, "data/epoch_step", "<i8", 0, &st->epoch_step, e)))
    goto cleanup;
  if ((status = load_string(path, z, used, "data/class_names", &st->class_names, e)) ||
      (status = load_string(path, z, used, "model/keras_json", &st->keras_json, e)))
    goto cleanup;
  if (st->iterations < 0 || st->epoch < 0 || st->save_counter < 1) {
    status = clt_fail(e, CLT_ERR_FORMAT, "%s: negative step, epoch or save counter", path);
    goto cleanup;
  }
  if (st->epoch_step < 0 || st->epoch_step > st->iterations) {
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: member data/epoch_step is %lld, outside 0..%lld (the steps taken)", path,
                      (long long)st->epoch_step, (long long)st->iterations);
    goto cleanup;
  }
  if (st->epoch_step > 0 && (status = load_epoch_sums(path, z, used, st, e))) goto cleanup;
  /* Exactly the members expected, as Keras refuses a weights file that does not
   * match: anything else means the file is not what it claims to be. */
  for (int i = 0; i < clt_npz_count(z); i++) {
    if (used[i]) continue;
    char shown[160];
    clt_npz_printable(shown, sizeof shown, clt_npz_at(z, i)->name);
    status = clt_fail(e, CLT_ERR_FORMAT,
                      "%s: unexpected member %s (not part of a checkpoint of model %s%s%s)", path,
                      shown, m->name, with_optimizer ? " trained with " : "",
                      with_optimizer ? clt_optimizer_name(st->optimizer.kind) : "");
    goto cleanup;
  }

cleanup:
  clt_npz_free(z);
  free(used);
  if (meta) clt_checkpoint_meta_free(meta);
  free(meta);
  free(arch);
  free(was_frozen);
  if (status) clt_checkpoint_free(st);
  return status;
}

void clt_checkpoint_free(clt_checkpoint *st) {
  free(st->params);
  st->params = NULL;
  for (int k = 0; k < CLT_OPT_SLOTS; k++) {
    free(st->opt_state[k]);
    st->opt_state[k] = NULL;
  }
  free(st->class_names);
  free(st->keras_json);
  free(st->epoch_sums);
  free(st->conv_algorithms);
  free(st->gemm_tilings);
  free(st->replicas);
  st->class_names = NULL;
  st->keras_json = NULL;
  st->epoch_sums = NULL;
  st->conv_algorithms = NULL;
  st->gemm_tilings = st->replicas = NULL;
}
