/* TensorBoard event files: TFRecords of tensorboard.Event protobufs (see tensorboard.h). */
#define _POSIX_C_SOURCE 200809L /* mkdir, gethostname, fdopen, clock_gettime, strdup */
#include "tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pb.h"

#define FILE_VERSION "brain.Event:2"
#define MAX_SUFFIX 1000 /* an existing name gets .1 up to .999 */

/* Field numbers of tensorboard/compat/proto/event.proto and summary.proto (the same
 * as TensorFlow's tensorflow/core/util/event.proto and framework/summary.proto). */
enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5 };
enum { SUMMARY_VALUE = 1 };
enum { VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2 };

struct clt_tb_writer {
  FILE *f;
  char *path;   /* the event file */
  clt_pb event; /* the event being encoded; its buffer is reused */
  int errnum;   /* errno of the first failed write, 0 while none failed */
};

/* CRC-32C's table: entry i is the CRC of byte i (reflected polynomial 0x82F63B78). */
static const uint32_t crc_table[256] = {
    0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c, 0x26a1e7e8, 0xd4ca64eb,
    0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b, 0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24,
    0x105ec76f, 0xe235446c, 0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
    0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc, 0xbc267848, 0x4e4dfb4b,
    0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a, 0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35,
    0xaa64d611, 0x580f5512, 0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
    0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad, 0x1642ae59, 0xe4292d5a,
    0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a, 0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595,
    0x417b1dbc, 0xb3109ebf, 0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
    0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f, 0xed03a29b, 0x1f682198,
    0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927, 0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38,
    0xdbfc821c, 0x2997011f, 0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
    0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e, 0x4767748a, 0xb50cf789,
    0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859, 0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46,
    0x7198540d, 0x83f3d70e, 0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
    0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de, 0xdde0eb2a, 0x2f8b6829,
    0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c, 0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93,
    0x082f63b7, 0xfa44e0b4, 0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
    0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b, 0xb4091bff, 0x466298fc,
    0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c, 0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033,
    0xa24bb5a6, 0x502036a5, 0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
    0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975, 0x0e330a81, 0xfc588982,
    0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d, 0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622,
    0x38cc2a06, 0xcaa7a905, 0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
    0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8, 0xe52cc12c, 0x1747422f,
    0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff, 0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0,
    0xd3d3e1ab, 0x21b862a8, 0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
    0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78, 0x7fab5e8c, 0x8dc0dd8f,
    0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee, 0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1,
    0x69e9f0d5, 0x9b8273d6, 0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
    0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69, 0xd5cf889d, 0x27a40b9e,
    0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e, 0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

uint32_t clt_crc32c(const void *p, size_t n) {
  const unsigned char *s = p;
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ s[i]) & 0xffu] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t clt_tb_masked_crc(const void *p, size_t n) {
  const uint32_t crc = clt_crc32c(p, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_u32(unsigned char *out, uint32_t v) {
  for (int i = 0; i < 4; i++) out[i] = (unsigned char)(v >> (8 * i));
}

/* a + "/" + b, malloc'ed (NULL when out of memory). */
static char *join(const char *a, const char *b) {
  const size_t n = strlen(a) + strlen(b) + 2;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s/%s", a, b);
  return s;
}

/* Creates the folder path and its missing parents, as mkdir -p. */
static int make_dirs(const char *path, clt_err *e) {
  int st = CLT_OK;
  char *p = strdup(path);
  if (!p) {
    st = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  /* Each prefix ending before a '/' (the first character is never one: "/" exists),
   * then the whole path. */
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0') continue;
    const char c = *s;
    *s = '\0';
    if (mkdir(p, 0777) != 0) {
      const int err = errno;
      struct stat sb;
      if (stat(p, &sb) != 0) {
        st = clt_fail(e, CLT_ERR_IO, "%s: cannot create folder: %s", p, strerror(err));
        goto cleanup;
      }
      if (!S_ISDIR(sb.st_mode)) {
        st = clt_fail(e, CLT_ERR_IO, "%s: exists and is not a folder", p);
        goto cleanup;
      }
    }
    *s = c;
    if (c == '\0') break;
  }

cleanup:
  free(p);
  return st;
}

/* Records the first failed write of w (errno, or EIO where stdio left none) and
 * reports it. */
static int write_failed(clt_tb_writer *w, clt_err *e) {
  if (!w->errnum) w->errnum = errno ? errno : EIO;
  return clt_fail(e, CLT_ERR_IO, "%s: cannot write: %s", w->path, strerror(w->errnum));
}

/* A write that failed before is reported again: the file is incomplete. */
static int failed_before(const clt_tb_writer *w, clt_err *e) {
  return clt_fail(e, CLT_ERR_IO, "%s: an earlier write failed: %s", w->path, strerror(w->errnum));
}

/* Appends w->event as one TFRecord. */
static int write_record(clt_tb_writer *w, clt_err *e) {
  if (clt_pb_failed(&w->event))
    return clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory encoding an event", w->path);
  const size_t n = w->event.len;
  unsigned char head[12], tail[4];
  for (int i = 0; i < 8; i++) head[i] = (unsigned char)((uint64_t)n >> (8 * i));
  put_u32(head + 8, clt_tb_masked_crc(head, 8));
  put_u32(tail, clt_tb_masked_crc(w->event.data, n));
  errno = 0;
  if (fwrite(head, 1, sizeof head, w->f) != sizeof head || fwrite(w->event.data, 1, n, w->f) != n ||
      fwrite(tail, 1, sizeof tail, w->f) != sizeof tail || ferror(w->f))
    return write_failed(w, e);
  return CLT_OK;
}

int clt_tb_open(const char *dir, const char *run, clt_tb_writer **out, clt_err *e) {
  int st = CLT_OK, fd = -1, created = 0;
  char *folder = NULL;
  clt_tb_writer *w = NULL;
  if (out) *out = NULL;
  if (!dir || !dir[0] || !out) {
    st = clt_fail(e, CLT_ERR_ARG, "TensorBoard log: no folder given");
    goto cleanup;
  }
  folder = run && run[0] ? join(dir, run) : strdup(dir);
  w = calloc(1, sizeof *w);
  if (!folder || !w) {
    st = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", dir);
    goto cleanup;
  }
  clt_pb_init(&w->event);
  if ((st = make_dirs(folder, e))) goto cleanup;

  /* The name TensorFlow's writer gives: creation time and host. */
  struct timespec now;
  if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
    now.tv_sec = time(NULL);
    now.tv_nsec = 0;
  }
  char host[256];
  if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = '\0';
  for (char *c = host; *c; c++)
    if (*c == '/') *c = '_';
  const size_t n = strlen(folder) + strlen(host) + 64;
  w->path = malloc(n);
  if (!w->path) {
    st = clt_fail(e, CLT_ERR_NOMEM, "%s: out of memory", folder);
    goto cleanup;
  }
  for (int k = 0; k < MAX_SUFFIX && fd < 0; k++) {
    const int len = snprintf(w->path, n, "%s/events.out.tfevents.%lld.%s", folder,
                             (long long)now.tv_sec, host);
    if (k > 0) snprintf(w->path + len, n - (size_t)len, ".%d", k);
    fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) {
      st = clt_fail(e, CLT_ERR_IO, "%s: cannot create: %s", w->path, strerror(errno));
      goto cleanup;
    }
  }
  if (fd < 0) {
    st = clt_fail(e, CLT_ERR_IO,
                  "%s: cannot create: this name and those without suffix or with .1 to .%d exist",
                  w->path, MAX_SUFFIX - 2);
    goto cleanup;
  }
  created = 1;
  w->f = fdopen(fd, "wb");
  if (!w->f) {
    st = clt_fail(e, CLT_ERR_IO, "%s: cannot open: %s", w->path, strerror(errno));
    goto cleanup;
  }
  fd = -1; /* the stream owns it */

  clt_pb_double(&w->event, EVENT_WALL_TIME, (double)now.tv_sec + 1e-9 * (double)now.tv_nsec);
  clt_pb_string(&w->event, EVENT_FILE_VERSION, FILE_VERSION);
  if ((st = write_record(w, e)) || (st = clt_tb_flush(w, e))) goto cleanup;
  *out = w;
  w = NULL;

cleanup:
  if (fd >= 0) close(fd);
  if (w) {
    if (w->f) fclose(w->f);
    if (created) remove(w->path);
    clt_pb_free(&w->event);
    free(w->path);
    free(w);
  }
  free(folder);
  return st;
}

const char *clt_tb_path(const clt_tb_writer *w) { return w ? w->path : NULL; }

int clt_tb_scalar(clt_tb_writer *w, const char *tag, int64_t step, double wall_time, float value,
                  clt_err *e) {
  if (!w || !tag || !tag[0])
    return clt_fail(e, CLT_ERR_ARG, "TensorBoard scalar: no writer or tag");
  if (w->errnum) return failed_before(w, e);
  clt_pb *b = &w->event;
  b->len = 0;
  clt_pb_double(b, EVENT_WALL_TIME, wall_time);
  if (step != 0) clt_pb_int(b, EVENT_STEP, step); /* proto3 leaves defaults out */
  const size_t summary = clt_pb_begin(b, EVENT_SUMMARY);
  const size_t entry = clt_pb_begin(b, SUMMARY_VALUE);
  clt_pb_string(b, VALUE_TAG, tag);
  clt_pb_float(b, VALUE_SIMPLE_VALUE, value);
  clt_pb_end(b, entry);
  clt_pb_end(b, summary);
  return write_record(w, e);
}

int clt_tb_flush(clt_tb_writer *w, clt_err *e) {
  if (!w) return clt_fail(e, CLT_ERR_ARG, "TensorBoard flush: no writer");
  if (w->errnum) return failed_before(w, e);
  errno = 0;
  if (fflush(w->f) != 0) return write_failed(w, e);
  return CLT_OK;
}

int clt_tb_close(clt_tb_writer *w, clt_err *e) {
  if (!w) return CLT_OK;
  int st = clt_tb_flush(w, e);
  errno = 0;
  if (fclose(w->f) != 0 && st == CLT_OK) st = write_failed(w, e);
  clt_pb_free(&w->event);
  free(w->path);
  free(w);
  return st;
}
