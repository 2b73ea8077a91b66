#define _POSIX_C_SOURCE 200809L
#include "fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOTE " (injected by CLTRAIN_FAULT)"

/* The parsed variable: written once under pthread_once, read-only afterwards. */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static clt_fault_call want_call = CLT_FAULT_NONE;
static int want_replica = 0;
static long want_step = 0;
static clt_err parse_error;
static atomic_int fired;

static const char *const call_names[] = {"", "enqueue", "read", "map", "alloc", "stall"};

/* A whole decimal number >= 0 of at most max. */
static int parse_count(const char *s, long max, long *out) {
  char *end = NULL;
  errno = 0;
  const long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < 0 || v > max) return -1;
  *out = v;
  return 0;
}

static int parse(const char *v, clt_err *e) {
  char buf[256];
  long replica = 0, step = 0;
  clt_fault_call call = CLT_FAULT_NONE;
  int ok = snprintf(buf, sizeof buf, "%s", v) < (int)sizeof buf;
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); ok && item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) {
      ok = 0;
      break;
    }
    *eq = '\0';
    const char *value = eq + 1;
    if (strcmp(item, "replica") == 0) {
      ok = parse_count(value, 1000000, &replica) == 0;
    } else if (strcmp(item, "step") == 0) {
      ok = parse_count(value, 1L << 40, &step) == 0;
    } else if (strcmp(item, "call") == 0) {
      call = CLT_FAULT_NONE;
      for (int c = CLT_FAULT_ENQUEUE; c <= CLT_FAULT_STALL; c++) {
        if (strcmp(value, call_names[c]) == 0) call = (clt_fault_call)c;
      }
      ok = call != CLT_FAULT_NONE;
    } else {
      ok = 0;
    }
  }
  if (!ok || call == CLT_FAULT_NONE) {
    return clt_fail(e, CLT_ERR_ARG,
                    "CLTRAIN_FAULT=%s: expected replica=R,step=S,call=enqueue|read|map|alloc|stall "
                    "(a test facility, see README)",
                    v);
  }
  if ((call == CLT_FAULT_MAP || call == CLT_FAULT_ALLOC) && step > 0) {
    return clt_fail(e, CLT_ERR_ARG,
                    "CLTRAIN_FAULT=%s: %s happens only at set-up: leave step out or give step=0", v,
                    call_names[call]);
  }
  want_call = call;
  want_replica = (int)replica;
  want_step = step;
  return CLT_OK;
}

/* A fault that never fired would let a test pass for the wrong reason (map with
 * one replica in one process maps nothing): the process says so as it ends. */
static void note_unfired(void) {
  if (atomic_load(&fired)) return;
  fprintf(stderr,
          "cltrain: note: CLTRAIN_FAULT: nothing injected: replica %d made no %s call at step %ld "
          "or later\n",
          want_replica, call_names[want_call], want_step);
}

static void parse_once(void) {
  const char *v = getenv("CLTRAIN_FAULT");
  if (v && *v && parse(v, &parse_error) == CLT_OK) atexit(note_unfired);
}

int clt_fault_check(clt_err *e) {
  pthread_once(&once, parse_once);
  if (parse_error.code) {
    if (e) *e = parse_error;
    return parse_error.code;
  }
  return CLT_OK;
}

int clt_fault_hit(int replica, long step, clt_fault_call call) {
  pthread_once(&once, parse_once);
  if (want_call == CLT_FAULT_NONE || call != want_call || replica != want_replica ||
      step < want_step) {
    return 0;
  }
  return atomic_exchange(&fired, 1) == 0;
}

int clt_fault_mark(clt_err *e) {
  if (!e) return CLT_ERR_INTERNAL;
  const size_t len = strlen(e->msg);
  if (len + sizeof NOTE <= sizeof e->msg) memcpy(e->msg + len, NOTE, sizeof NOTE);
  return e->code;
}
