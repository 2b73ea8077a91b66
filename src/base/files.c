#define _POSIX_C_SOURCE 200809L
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int clt_check_replaceable(const char *path, const char *what, clt_err *e) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return clt_fail(e, CLT_ERR_IO,
                    "%s (%s): not a regular file (a device or pipe); cltrain writes this output "
                    "whole and renames it into place",
                    path, what);
  return CLT_OK;
}

int clt_write_atomic(const char *path, const void *data, size_t n, clt_err *e) {
  char dir[4096], tmp[4200];
  /* Never rename over a device or pipe (as root, over /dev/null). */
  int status = clt_check_replaceable(path, "output", e);
  if (status) return status;
  const char *slash = strrchr(path, '/');
  if (!path[0] || (slash && !slash[1])) return clt_fail(e, CLT_ERR_IO, "%s: not a file name", path);
  if (slash && slash - path >= (long)sizeof dir)
    return clt_fail(e, CLT_ERR_IO, "%s: too long", path);
  if (slash) {
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  } else {
    snprintf(dir, sizeof dir, ".");
  }
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%ld", dir, slash ? slash + 1 : path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return clt_fail(e, CLT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  int bad = fwrite(data, 1, n, f) != n || fflush(f) != 0 || fsync(fileno(f)) != 0;
  int err = errno;
  if (fclose(f) != 0 && !bad) bad = 1, err = errno;
  if (bad) {
    unlink(tmp);
    return clt_fail(e, CLT_ERR_IO, "%s: cannot write: %s", path, strerror(err));
  }
  if (rename(tmp, path) != 0) {
    err = errno;
    unlink(tmp);
    return clt_fail(e, CLT_ERR_IO, "%s: cannot rename into place: %s", path, strerror(err));
  }
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    /* Some file systems cannot fsync folders; the rename is then as durable as they allow. */
    (void)fsync(fd);
    close(fd);
  }
  return CLT_OK;
}

/* path's folder ("." without a slash) into dir. */
static void parent_of(const char *path, char *dir, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, size, ".");
  else snprintf(dir, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

static int writable_dir(const char *dir, const char *path, const char *what, clt_err *e) {
  struct stat st;
  if (stat(dir, &st) != 0)
    return clt_fail(e, CLT_ERR_IO, "%s (%s): folder %s: %s", path, what, dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return clt_fail(e, CLT_ERR_IO, "%s (%s): %s is not a folder", path, what, dir);
  if (access(dir, W_OK | X_OK) != 0)
    return clt_fail(e, CLT_ERR_IO, "%s (%s): folder %s is not writable: %s", path, what, dir,
                    strerror(errno));
  return CLT_OK;
}

int clt_check_output_file(const char *path, const char *what, clt_err *e) {
  struct stat st;
  if (!path[0]) return clt_fail(e, CLT_ERR_IO, "%s: an empty file name", what);
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return clt_fail(e, CLT_ERR_IO, "%s (%s): is a folder, not a file", path, what);
    if (access(path, W_OK) != 0)
      return clt_fail(e, CLT_ERR_IO, "%s (%s): not writable: %s", path, what, strerror(errno));
    return CLT_OK;
  }
  char dir[4096];
  parent_of(path, dir, sizeof dir);
  return writable_dir(dir, path, what, e);
}

int clt_check_output_dir(const char *path, const char *what, clt_err *e) {
  char dir[4096];
  if (!path[0]) return clt_fail(e, CLT_ERR_IO, "%s: an empty folder name", what);
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
    return clt_fail(e, CLT_ERR_IO, "%s (%s): path too long", path, what);
  for (;;) {
    struct stat st;
    if (stat(dir, &st) == 0) return writable_dir(dir, path, what, e);
    if (errno != ENOENT)
      return clt_fail(e, CLT_ERR_IO, "%s (%s): %s: %s", path, what, dir, strerror(errno));
    /* Missing: it will be created inside its nearest existing ancestor. */
    char up[4096];
    parent_of(dir, up, sizeof up);
    if (strcmp(up, dir) == 0) return writable_dir(dir, path, what, e);
    snprintf(dir, sizeof dir, "%s", up);
  }
}
