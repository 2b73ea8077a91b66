/* TensorBoard event files (src/formats/tensorboard.c): CRC-32C and its masking against
 * known values; scalars written into a temporary log folder and read back here
 * (every record's length and CRCs, every event decoded); existing names kept; bad
 * folders and failed writes reported with the path; and the files read by
 * TensorBoard's own reader (tests/tensorboard/read_events.py) where $PYTHON
 * (default /usr/bin/python3) imports tensorboard: skipped otherwise, failed under
 * CI=true (.ci/setup installs it). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, gethostname, setrlimit, sigaction */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pb.h"
#include "tensorboard.h"

#define EVENT_PREFIX "events.out.tfevents."

/* Seconds on the clock the writer reads. time() reads the kernel's coarse clock, which
 * can differ from CLOCK_REALTIME by a second near a second's turn. */
static time_t wall_seconds(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return time(NULL);
  return ts.tv_sec;
}

/* --- a minimal reader of the records and events --------------------------------- */

typedef struct event {
  double wall_time;
  int64_t step;
  char file_version[64];
  int values; /* Summary.Value entries */
  char tag[128];
  float value;
} event;

typedef struct reader {
  const unsigned char *p, *end;
} reader;

static uint64_t get_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static int get_varint(reader *r, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64 && r->p < r->end; shift += 7) {
    const unsigned char c = *r->p++;
    *v |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) return 0;
  }
  return -1;
}

/* The next field's number, wire type and (for LEN) its bytes; -1 at a malformed one. */
static int get_field(reader *r, int *field, int *wire, reader *sub) {
  uint64_t key, n;
  if (get_varint(r, &key)) return -1;
  *field = (int)(key >> 3);
  *wire = (int)(key & 7);
  if (*wire == CLT_PB_LEN) {
    if (get_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return -1;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
  }
  return 0;
}

static int get_fixed(reader *r, int n, uint64_t *v) {
  if (r->end - r->p < n) return -1;
  *v = get_le(r->p, n);
  r->p += n;
  return 0;
}

/* Summary.Value: tag = 1, simple_value = 2; anything else is an error. */
static int decode_value(reader r, event *ev) {
  while (r.p < r.end) {
    int field, wire;
    reader sub;
    uint64_t u;
    if (get_field(&r, &field, &wire, &sub)) return -1;
    if (field == 1 && wire == CLT_PB_LEN && (size_t)(sub.end - sub.p) < sizeof ev->tag) {
      memcpy(ev->tag, sub.p, (size_t)(sub.end - sub.p));
      ev->tag[sub.end - sub.p] = '\0';
    } else if (field == 2 && wire == CLT_PB_FIXED32 && !get_fixed(&r, 4, &u)) {
      const uint32_t bits = (uint32_t)u;
      memcpy(&ev->value, &bits, sizeof bits);
    } else {
      return -1;
    }
  }
  return 0;
}

/* Event: wall_time = 1, step = 2, file_version = 3, summary = 5 (Summary: value = 1). */
static int decode_event(reader r, event *ev) {
  memset(ev, 0, sizeof *ev);
  while (r.p < r.end) {
    int field, wire;
    reader sub;
    uint64_t u;
    if (get_field(&r, &field, &wire, &sub)) return -1;
    if (field == 1 && wire == CLT_PB_FIXED64 && !get_fixed(&r, 8, &u)) {
      memcpy(&ev->wall_time, &u, sizeof u);
    } else if (field == 2 && wire == CLT_PB_VARINT && !get_varint(&r, &u)) {
      ev->step = (int64_t)u;
    } else if (field == 3 && wire == CLT_PB_LEN &&
               (size_t)(sub.end - sub.p) < sizeof ev->file_version) {
      memcpy(ev->file_version, sub.p, (size_t)(sub.end - sub.p));
      ev->file_version[sub.end - sub.p] = '\0';
    } else if (field == 5 && wire == CLT_PB_LEN) {
      while (sub.p < sub.end) {
        reader val;
        if (get_field(&sub, &field, &wire, &val) || field != 1 || wire != CLT_PB_LEN) return -1;
        if (decode_value(val, ev)) return -1;
        ev->values++;
      }
    } else {
      return -1;
    }
  }
  return 0;
}

/* Reads path's records into ev (up to max); returns their count, or -1 (printing
 * why) at a bad length, CRC or event, or bytes left over. */
static int read_events(const char *path, event *ev, int max) {
  int count = -1;
  unsigned char *buf = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("  %s: %s\n", path, strerror(errno));
    goto cleanup;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !(buf = malloc((size_t)sb.st_size + 1)) ||
      fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
    printf("  %s: cannot read\n", path);
    goto cleanup;
  }
  const unsigned char *p = buf, *end = buf + sb.st_size;
  int n = 0;
  for (; p < end; n++) {
    if (end - p < 12) {
      printf("  record %d: truncated header\n", n);
      goto cleanup;
    }
    const uint64_t len = get_le(p, 8);
    if ((uint32_t)get_le(p + 8, 4) != clt_tb_masked_crc(p, 8)) {
      printf("  record %d: length CRC differs\n", n);
      goto cleanup;
    }
    p += 12;
    if ((uint64_t)(end - p) < len + 4) {
      printf("  record %d: truncated data\n", n);
      goto cleanup;
    }
    if ((uint32_t)get_le(p + len, 4) != clt_tb_masked_crc(p, (size_t)len)) {
      printf("  record %d: data CRC differs\n", n);
      goto cleanup;
    }
    if (n >= max || decode_event((reader){p, p + len}, &ev[n])) {
      printf("  record %d: not an expected event\n", n);
      goto cleanup;
    }
    p += len + 4;
  }
  count = n;

cleanup:
  if (f) fclose(f);
  free(buf);
  return count;
}

/* --- helpers ----------------------------------------------------------------------- */

static char tmp[64];

static void path_of(char *out, size_t n, const char *rel) { snprintf(out, n, "%s/%s", tmp, rel); }

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* Whether path holds exactly text. */
static int holds(const char *path, const char *text) {
  char buf[256] = {0};
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  return n == strlen(text) && memcmp(buf, text, n) == 0;
}

/* The names starting with EVENT_PREFIX in folder: their count, the last into name. */
static int event_files(const char *folder, char *name, size_t n) {
  int count = 0;
  DIR *d = opendir(folder);
  if (!d) return -1;
  for (const struct dirent *de; (de = readdir(d));) {
    if (strncmp(de->d_name, EVENT_PREFIX, strlen(EVENT_PREFIX)) != 0) continue;
    snprintf(name, n, "%s", de->d_name);
    count++;
  }
  closedir(d);
  return count;
}

/* The host part of the names, as the writer makes it. */
static void host_name(char *host, size_t n) {
  if (gethostname(host, n) != 0 || !host[0]) snprintf(host, n, "localhost");
  host[n - 1] = '\0';
  for (char *c = host; *c; c++)
    if (*c == '/') *c = '_';
}

static void remove_tree(const char *path) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  if (system(cmd) != 0) printf("  could not remove %s\n", path);
}

/* --- the checks ---------------------------------------------------------------------- */

static void crc(void) {
  check(clt_crc32c("123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = 0xE3069283");
  check(clt_crc32c("", 0) == 0, "crc32c of nothing = 0");
  /* RFC 3720 (iSCSI), B.4: 32 bytes of zeros, of ones, ascending. */
  unsigned char b[32];
  memset(b, 0, sizeof b);
  check(clt_crc32c(b, 32) == 0x8A9136AAu, "crc32c of 32 zero bytes = 0x8A9136AA");
  memset(b, 0xff, sizeof b);
  check(clt_crc32c(b, 32) == 0x62A8AB43u, "crc32c of 32 0xff bytes = 0x62A8AB43");
  for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
  check(clt_crc32c(b, 32) == 0x46DD794Eu, "crc32c of bytes 0..31 = 0x46DD794E");
  /* Masked, as tensorboard's masked_crc32c gives them. */
  check(clt_tb_masked_crc("123456789", 9) == 0xC78AB0E5u,
        "masked crc32c(\"123456789\") = 0xC78AB0E5");
  memset(b, 0, 8);
  check(clt_tb_masked_crc(b, 8) == 0x07980329u, "masked crc32c of a zero length = 0x07980329");
  b[0] = 24;
  check(clt_tb_masked_crc(b, 8) == 0x224B7FA3u, "masked crc32c of the length 24 = 0x224B7FA3");

  clt_pb pb;
  clt_pb_init(&pb);
  clt_pb_double(&pb, 1, 1.0);
  const unsigned char one[] = {0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f};
  check(!clt_pb_failed(&pb) && pb.len == sizeof one && memcmp(pb.data, one, sizeof one) == 0,
        "clt_pb_double: field 1 = 1.0: 09 00 00 00 00 00 00 f0 3f");
  clt_pb_free(&pb);
}

typedef struct scalar {
  const char *run, *tag;
  int64_t step;
  float value;
} scalar;

/* Written in this order, one writer per run; their wall times are 1.7e9 + i/4. */
static const scalar scalars[] = {
    {"train", "epoch_loss", 1, 0.5123f},
    {"train", "epoch_accuracy", 1, 0.75f},
    {"train", "epoch_loss", 2, 0.25f},
    {"train", "epoch_accuracy", 2, 0.875f},
    {"train", "epoch_loss", 3, 0.125f},
    {"train", "epoch_accuracy", 3, 0.9375f},
    {"train", "learning_rate", 5000000000, 1e-7f},
    {"validation", "epoch_loss", 1, 0.625f},
    {"validation", "epoch_loss", 2, 3.0f},
};
#define NSCALARS (int)(sizeof scalars / sizeof scalars[0])

/* What read_events.py prints for them: sorted by run, tag, step. */
static const char expected_lines[] = "train epoch_accuracy 1 0.75\n"
                                     "train epoch_accuracy 2 0.875\n"
                                     "train epoch_accuracy 3 0.9375\n"
                                     "train epoch_loss 1 0.5123\n"
                                     "train epoch_loss 2 0.25\n"
                                     "train epoch_loss 3 0.125\n"
                                     "train learning_rate 5000000000 1e-07\n"
                                     "validation epoch_loss 1 0.625\n"
                                     "validation epoch_loss 2 3.0\n";

/* Writes the scalars into LOGDIR/train and LOGDIR/validation (LOGDIR = tmp/logs/nested,
 * created with its parent) and reads them back. */
static void write_and_read(const char *logdir) {
  clt_err e = {0};
  clt_tb_writer *train = NULL, *val = NULL;
  const time_t t0 = wall_seconds();
  int st = clt_tb_open(logdir, "train", &train, &e);
  if (!st) st = clt_tb_open(logdir, "validation", &val, &e);
  check(st == CLT_OK && train && val, "open two runs in a new log folder%s%s", st ? ": " : "",
        st ? e.msg : "");
  if (st) goto cleanup;
  char train_path[512];
  snprintf(train_path, sizeof train_path, "%s", clt_tb_path(train));
  for (int i = 0; i < NSCALARS && !st; i++) {
    const scalar *s = &scalars[i];
    st = clt_tb_scalar(strcmp(s->run, "train") != 0 ? val : train, s->tag, s->step, 1.7e9 + i / 4.0,
                       s->value, &e);
  }
  check(st == CLT_OK, "write %d scalars%s%s", NSCALARS, st ? ": " : "", st ? e.msg : "");
  st = clt_tb_flush(train, &e);
  check(st == CLT_OK, "flush");
  st = clt_tb_close(train, &e);
  train = NULL;
  check(st == CLT_OK, "close%s%s", st ? ": " : "", st ? e.msg : "");
  st = clt_tb_close(val, &e);
  val = NULL;
  check(st == CLT_OK, "close the second run");
  const time_t t1 = wall_seconds();

  /* The file's name: events.out.tfevents.<seconds>.<host>, alone in the run's folder. */
  char folder[512], name[256], host[128], want[1024];
  host_name(host, sizeof host);
  snprintf(folder, sizeof folder, "%s/train", logdir);
  const int files = event_files(folder, name, sizeof name);
  long long secs = -1;
  int used = 0;
  const int fields = sscanf(name, EVENT_PREFIX "%lld.%n", &secs, &used);
  check(files == 1 && fields == 1 && used > 0 && strcmp(name + used, host) == 0 && secs >= t0 &&
            secs <= t1,
        "one file named " EVENT_PREFIX "<seconds>.%s in %s (%d files, %s)", host, folder, files,
        files > 0 ? name : "none");
  snprintf(want, sizeof want, "%s/%s", folder, name);
  check(strcmp(want, train_path) == 0, "clt_tb_path gives it: %s", train_path);

  /* Its records: the file_version event, then train's scalars in order. */
  event ev[16];
  const int n = read_events(want, ev, 16);
  check(n == 8, "8 records, lengths and CRCs right, each an Event (got %d)", n);
  if (n < 1) goto cleanup;
  check(strcmp(ev[0].file_version, "brain.Event:2") == 0 && ev[0].step == 0 && ev[0].values == 0 &&
            ev[0].wall_time >= (double)t0 && ev[0].wall_time < t1 + 1.0,
        "record 0: file_version \"brain.Event:2\", wall time now (%s, %.3f)", ev[0].file_version,
        ev[0].wall_time);
  for (int i = 0, k = 1; i < NSCALARS && k < n; i++) {
    const scalar *s = &scalars[i];
    if (strcmp(s->run, "train") != 0) continue;
    const event *v = &ev[k];
    check(v->values == 1 && strcmp(v->tag, s->tag) == 0 && v->step == s->step &&
              v->value == s->value && v->wall_time == 1.7e9 + i / 4.0 && !v->file_version[0],
          "record %d: %s at step %lld = %g, wall time %.2f (got %s, %lld, %g, %.2f)", k, s->tag,
          (long long)s->step, s->value, 1.7e9 + i / 4.0, v->tag, (long long)v->step, v->value,
          v->wall_time);
    k++;
  }

cleanup:
  clt_tb_close(train, NULL);
  clt_tb_close(val, NULL);
}

/* An existing name is never overwritten: with NAME and NAME.1 there, NAME.2. */
static void existing_names(void) {
  char folder[256], host[128], name[512];
  path_of(folder, sizeof folder, "suffix");
  mkdir(folder, 0777);
  host_name(host, sizeof host);
  const time_t t0 = wall_seconds();
  for (time_t t = t0; t <= t0 + 10; t++) {
    snprintf(name, sizeof name, "%s/" EVENT_PREFIX "%lld.%s", folder, (long long)t, host);
    write_file(name, "keep");
    snprintf(name, sizeof name, "%s/" EVENT_PREFIX "%lld.%s.1", folder, (long long)t, host);
    write_file(name, "keep");
  }
  clt_err e = {0};
  clt_tb_writer *w = NULL;
  int st = clt_tb_open(folder, NULL, &w, &e);
  char path[512] = "";
  if (!st) snprintf(path, sizeof path, "%s", clt_tb_path(w));
  const size_t len = strlen(path);
  if (!st) st = clt_tb_close(w, &e);
  check(st == CLT_OK && len > 2 && strcmp(path + len - 2, ".2") == 0 &&
            strncmp(path, folder, strlen(folder)) == 0,
        "a run of NULL writes into DIR; NAME and NAME.1 exist: NAME.2 (%s)", st ? e.msg : path);
  int kept = 1;
  for (time_t t = t0; t <= t0 + 10; t++) {
    snprintf(name, sizeof name, "%s/" EVENT_PREFIX "%lld.%s", folder, (long long)t, host);
    kept = kept && holds(name, "keep");
    snprintf(name, sizeof name, "%s/" EVENT_PREFIX "%lld.%s.1", folder, (long long)t, host);
    kept = kept && holds(name, "keep");
  }
  check(kept, "the existing files are untouched");
  event ev[2];
  check(!st && read_events(path, ev, 2) == 1 && strcmp(ev[0].file_version, "brain.Event:2") == 0,
        "the new file holds the file_version event");
}

/* clt_tb_open fails, naming want in its message, and leaves *out NULL. */
static void open_fails(const char *dir, const char *run, const char *want, const char *what) {
  clt_err e = {0};
  clt_tb_writer *w = (clt_tb_writer *)&e; /* not NULL: open must clear it */
  const int st = clt_tb_open(dir, run, &w, &e);
  check(st == CLT_ERR_IO && !w && strstr(e.msg, want), "%s: refused: %s", what, e.msg);
  clt_tb_close(st ? NULL : w, NULL);
}

static void bad_folders(void) {
  char file[256], logs[256], sub[256], want[256];
  path_of(file, sizeof file, "a_file");
  write_file(file, "x");
  open_fails(file, "train", file, "DIR is a file");
  path_of(sub, sizeof sub, "a_file/below");
  open_fails(sub, "train", file, "DIR below a file");
  path_of(logs, sizeof logs, "logs2");
  mkdir(logs, 0777);
  path_of(want, sizeof want, "logs2/run_file");
  write_file(want, "x");
  open_fails(logs, "run_file", want, "DIR/RUN is a file");
  check(holds(want, "x"), "the file in the way is untouched");

  if (geteuid() != 0) {
    char ro[256];
    path_of(ro, sizeof ro, "read_only");
    mkdir(ro, 0555);
    path_of(want, sizeof want, "read_only/train");
    open_fails(ro, "train", want, "a read-only DIR");
    open_fails(ro, NULL, ro, "a read-only DIR, no run");
    chmod(ro, 0755);
  } else {
    printf("skip: read-only folders (running as root, which may write there)\n");
  }

  clt_err e = {0};
  clt_tb_writer *w = NULL;
  check(clt_tb_open(NULL, "train", &w, &e) == CLT_ERR_ARG && !w, "no DIR: %s", e.msg);
  check(clt_tb_open("", "train", &w, &e) == CLT_ERR_ARG && !w, "an empty DIR: %s", e.msg);
  check(clt_tb_close(NULL, &e) == CLT_OK, "closing NULL");
}

/* A failed write (the file-size limit: EFBIG) is reported with the path, again by
 * every later call, and by close. */
static void failed_write(void) {
  char dir[256];
  path_of(dir, sizeof dir, "limited");
  clt_err e = {0};
  clt_tb_writer *w = NULL;
  int st = clt_tb_open(dir, "run", &w, &e);
  check(st == CLT_OK, "open%s%s", st ? ": " : "", st ? e.msg : "");
  if (st) return;
  char path[512], want[600];
  snprintf(path, sizeof path, "%s", clt_tb_path(w));

  struct rlimit old, lim;
  struct sigaction ign = {0}, old_sig;
  ign.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ign, &old_sig);
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 1024;
  setrlimit(RLIMIT_FSIZE, &lim);
  st = CLT_OK;
  int i = 0;
  for (; i < 1000 && !st; i++) st = clt_tb_scalar(w, "epoch_loss", i, 1.7e9, 0.5f, &e);
  if (!st) st = clt_tb_flush(w, &e);
  setrlimit(RLIMIT_FSIZE, &old);
  sigaction(SIGXFSZ, &old_sig, NULL);

  snprintf(want, sizeof want, "%s: cannot write: %s", path, strerror(EFBIG));
  check(st == CLT_ERR_IO && strcmp(e.msg, want) == 0, "a write past the limit fails: %s", e.msg);
  st = clt_tb_scalar(w, "epoch_loss", 0, 1.7e9, 0.5f, &e);
  check(st == CLT_ERR_IO && strstr(e.msg, path) && strstr(e.msg, "an earlier write failed"),
        "the next scalar reports it: %s", e.msg);
  st = clt_tb_flush(w, &e);
  check(st == CLT_ERR_IO && strstr(e.msg, path), "flush reports it");
  st = clt_tb_close(w, &e);
  check(st == CLT_ERR_IO && strstr(e.msg, path), "close reports it: %s", e.msg);
  check(clt_tb_scalar(NULL, "x", 0, 0, 0, &e) == CLT_ERR_ARG, "a scalar without writer: %s", e.msg);
}

/* --- TensorBoard's reader ---------------------------------------------------------- */

/* Runs read_events.py on dir (with --expect-json json unless NULL); its exit status,
 * stdout into out, stderr into err. */
static int read_with_tensorboard(const char *py, const char *dir, const char *json, char *out,
                                 size_t nout, char *err, size_t nerr) {
  char cmd[2048], out_path[256], err_path[256];
  path_of(out_path, sizeof out_path, "stdout.txt");
  path_of(err_path, sizeof err_path, "stderr.txt");
  snprintf(cmd, sizeof cmd, "'%s' '%s/tensorboard/read_events.py' '%s'%s%s%s >'%s' 2>'%s'", py,
           CLT_TESTS_DIR, dir, json ? " --expect-json '" : "", json ? json : "", json ? "'" : "",
           out_path, err_path);
  const int rc = system(cmd);
  const char *paths[2] = {out_path, err_path};
  char *bufs[2] = {out, err};
  const size_t sizes[2] = {nout, nerr};
  for (int i = 0; i < 2; i++) {
    bufs[i][0] = '\0';
    FILE *f = fopen(paths[i], "r");
    if (!f) continue;
    const size_t n = fread(bufs[i], 1, sizes[i] - 1, f);
    bufs[i][n] = '\0';
    fclose(f);
  }
  return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The JSON expected by read_events.py; change, when not NULL, replaces its first
 * occurrence of a string. */
static void write_json(const char *path, const char *from, const char *to) {
  char json[1024] = "{\"train/epoch_loss\": [[1, 0.5123], [2, 0.25], [3, 0.125]],\n"
                    " \"train/epoch_accuracy\": [[3, 0.9375], [1, 0.75], [2, 0.875]],\n"
                    " \"train/learning_rate\": [[5000000000, 1e-7]],\n"
                    " \"validation/epoch_loss\": [[1, 0.625], [2, 3]]}\n";
  char *at = from ? strstr(json, from) : NULL;
  if (at) {
    char rest[1024];
    snprintf(rest, sizeof rest, "%s", at + strlen(from));
    snprintf(at, sizeof json - (size_t)(at - json), "%s%s", to, rest);
  }
  write_file(path, json);
}

static void tensorboard_reader(const char *logdir) {
  const char *py = getenv("PYTHON");
  if (!py || !py[0]) py = "/usr/bin/python3";
  char cmd[3072];
  snprintf(cmd, sizeof cmd,
           "'%s' -c 'import tensorboard.backend.event_processing.event_accumulator' "
           ">/dev/null 2>&1",
           py);
  if (system(cmd) != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0)
      check(0, "tensorboard importable by %s (.ci/setup installs it)", py);
    else
      printf("skip: TensorBoard's reader: tensorboard not importable by %s (.ci/setup installs "
             "it: pip install tensorboard)\n",
             py);
    return;
  }
  char out[4096], err[4096], json[256];
  int rc = read_with_tensorboard(py, logdir, NULL, out, sizeof out, err, sizeof err);
  check(rc == 0 && strcmp(out, expected_lines) == 0,
        "TensorBoard's EventAccumulator reads every scalar (exit %d):\n%s%s", rc, out, err);

  path_of(json, sizeof json, "expect.json");
  write_json(json, NULL, NULL);
  rc = read_with_tensorboard(py, logdir, json, out, sizeof out, err, sizeof err);
  check(rc == 0, "read_events.py --expect-json: all match (exit %d) %s", rc, err);

  static const struct {
    const char *from, *to, *want, *what;
  } wrong[] = {
      {"[2, 0.25]", "[2, 0.2500003]", "train/epoch_loss: step 2: value 0.25, expected 0.2500003",
       "a value off by 1.2e-6"},
      {"[[5000000000, 1e-7]]", "[[5000000000, 1e-7], [5000000001, 1]]",
       "train/learning_rate: step 5000000001 missing", "a step missing"},
      {"[[1, 0.625], [2, 3]]", "[[1, 0.625]]", "validation/epoch_loss: step 2 in the event files",
       "a step not expected"},
      {" \"train/learning_rate\": [[5000000000, 1e-7]],\n", "",
       "train/learning_rate: in the event files, not in", "a tag not expected"},
      {"{", "{\"train/epoch_auc\": [[1, 0.5]], ", "train/epoch_auc: missing", "a tag missing"},
  };
  for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
    write_json(json, wrong[i].from, wrong[i].to);
    rc = read_with_tensorboard(py, logdir, json, out, sizeof out, err, sizeof err);
    check(rc == 1 && strstr(err, wrong[i].want), "--expect-json, %s: exit 1 naming it (exit %d) %s",
          wrong[i].what, rc, err);
  }
  /* Each record as TensorBoard's own writer (EventFileWriter) would write that Event:
   * the protobuf's serialization and TensorBoard's masked CRC-32C. */
  char script[256], file[1024], name[256], folder[512];
  path_of(script, sizeof script, "reencode.py");
  write_file(script,
             "import struct, sys\n"
             "from tensorboard.compat.proto import event_pb2\n"
             "from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c\n"
             "b = open(sys.argv[1], 'rb').read()\n"
             "i = n = 0\n"
             "while i < len(b):\n"
             "    k = struct.unpack('<Q', b[i:i + 8])[0]\n"
             "    data = event_pb2.Event.FromString(b[i + 12:i + 12 + k]).SerializeToString()\n"
             "    head = struct.pack('<Q', len(data))\n"
             "    rec = head + struct.pack('<I', masked_crc32c(head)) + data\n"
             "    rec += struct.pack('<I', masked_crc32c(data))\n"
             "    if rec != b[i:i + 16 + k]:\n"
             "        sys.exit(f'record {n} differs: {b[i:i + 16 + k].hex()} {rec.hex()}')\n"
             "    i += 16 + k\n"
             "    n += 1\n"
             "print(n)\n");
  snprintf(folder, sizeof folder, "%s/train", logdir);
  if (event_files(folder, name, sizeof name) == 1) {
    snprintf(file, sizeof file, "%s/%s", folder, name);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' >'%s/stdout.txt' 2>&1", py, script, file, tmp);
    rc = system(cmd);
    path_of(script, sizeof script, "stdout.txt");
    check(rc == 0 && holds(script, "8\n"),
          "every record is byte for byte TensorBoard's own serialization and CRCs");
  } else {
    check(0, "one event file in %s", folder);
  }

  /* A damaged copy of train: the reader's CRC check finds it. */
  char bad[256];
  path_of(bad, sizeof bad, "damaged/train");
  snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s'/train/" EVENT_PREFIX "* '%s'", bad, logdir,
           bad);
  if (system(cmd) == 0 && event_files(bad, name, sizeof name) == 1) {
    snprintf(file, sizeof file, "%s/%s", bad, name);
    FILE *f = fopen(file, "r+b");
    if (f && fseek(f, 40, SEEK_SET) == 0) {
      const int c = fgetc(f);
      fseek(f, 40, SEEK_SET);
      fputc(c ^ 1, f);
    }
    if (f) fclose(f);
    path_of(bad, sizeof bad, "damaged");
    rc = read_with_tensorboard(py, bad, NULL, out, sizeof out, err, sizeof err);
    check(rc == 1 && strstr(err, "crc32 check"), "a damaged record: exit 1 naming it (exit %d) %s",
          rc, err);
  } else {
    check(0, "copy the run to damage it");
  }
  path_of(bad, sizeof bad, "suffix/none");
  mkdir(bad, 0777);
  rc = read_with_tensorboard(py, bad, NULL, out, sizeof out, err, sizeof err);
  check(rc == 1 && strstr(err, "no event files"), "a folder without event files: exit 1 (%d) %s",
        rc, err);
}

int main(void) {
  snprintf(tmp, sizeof tmp, "/tmp/clt_tb_XXXXXX");
  if (!mkdtemp(tmp)) {
    printf("FAIL: cannot create a temporary folder: %s\n", strerror(errno));
    return 1;
  }
  crc();
  char logdir[256];
  path_of(logdir, sizeof logdir, "logs/nested");
  write_and_read(logdir);
  existing_names();
  bad_folders();
  failed_write();
  tensorboard_reader(logdir);
  if (check_failures() == 0) remove_tree(tmp);
  else printf("kept %s\n", tmp);
  return check_summary();
}
