/* Files written whole and atomically: a temp file beside the target, fsync,
 * rename, fsync of the folder. A failure leaves no temp file and keeps an
 * existing file, so a reader sees the old content or the new, never half. */
#ifndef CLT_FILES_H
#define CLT_FILES_H

#include <stddef.h>

#include "status.h"

/* Writes n bytes of data to path through a temporary file renamed into place;
 * errors name path and the cause ("cannot create", "cannot write", "cannot
 * rename into place", a device or pipe at path: clt_check_replaceable). */
int clt_write_atomic(const char *path, const void *data, size_t n, clt_err *e);

/* Fails when path is there as something other than a regular file or folder (a
 * device, a pipe): outputs replaced by a rename must never replace those. */
int clt_check_replaceable(const char *path, const char *what, clt_err *e);

/* Whether path can be created or overwritten as a file, checked before a run
 * creates anything (so a bad output flag does not leave a new folder behind):
 * not a folder, its folder existing and writable. `what` names the flag. */
int clt_check_output_file(const char *path, const char *what, clt_err *e);

/* The same for a folder that will be created if missing: an existing path must
 * be a writable folder; otherwise its nearest existing ancestor must be one. */
int clt_check_output_dir(const char *path, const char *what, clt_err *e);

#endif
