#define _POSIX_C_SOURCE 200809L
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int clt_write_atomic(const char *path, const void *data, size_t n, clt_err *e) {
  char dir[4096], tmp[4200];
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
