/* Status codes and error messages.
 *
 * Every fallible function returns an int status: CLT_OK (0), an OpenCL code
 * (-1 .. -72) or a CLBlast code (-1024 .. -2050) passed through unchanged, or
 * one of cltrain's own codes below (-3000 range). The one-line human message
 * is kept in a clt_err that the caller owns, so threads never share it. */
#ifndef CLT_STATUS_H
#define CLT_STATUS_H

#include <stddef.h>

enum {
  CLT_OK = 0,
  CLT_ERR_ARG = -3001,      /* bad flag, value or shape */
  CLT_ERR_IO = -3002,       /* file cannot be opened, read or written */
  CLT_ERR_FORMAT = -3003,   /* file content is not what it claims */
  CLT_ERR_NOMEM = -3004,    /* host allocation failed */
  CLT_ERR_DEVICE = -3005,   /* no such device, or device cannot do it */
  CLT_ERR_NUMERIC = -3006,  /* non-finite loss or gradient */
  CLT_ERR_INTERNAL = -3007, /* a bug: an invariant did not hold */
  CLT_ERR_PEER = -3008,     /* another process of an MPI run failed or disagrees */
  CLT_ERR_STOPPED = -3009,  /* stopped by a signal (Ctrl-C), progress saved: not a failure of
                               the run's own, the message says where it was saved */
};

typedef struct clt_err {
  int code;
  char msg[4096];
} clt_err;

/* Records code and a printf-style message in e (if non-NULL); returns code. */
int clt_fail(clt_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#if defined(__clang_analyzer__) && !defined(CLT_STATUS_IMPL)
/* For clang-tidy's path-sensitive analyzer only: clt_fail returns its code, so
 * `st = clt_fail(e, CLT_ERR_IO, ...)` is a failure. Without this the analyzer,
 * which does not see status.c, explores "st == 0" after every error and reports
 * uses of outputs that the failed call never wrote. */
#define clt_fail(e, code, ...) (clt_fail((e), (code), __VA_ARGS__), (code))
#endif

/* Prefixes the existing message with "what: " (keeps the code). */
int clt_wrap(clt_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Symbolic name of an OpenCL, CLBlast or cltrain code ("CL_OUT_OF_RESOURCES"). */
const char *clt_status_name(int code);

#endif
