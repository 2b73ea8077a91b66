#define _GNU_SOURCE      /* sched_getaffinity */
#define CLT_CLUSTER_IMPL /* the definitions below, not cluster.h's analyzer macro */
#include "cluster.h"
#include "cluster_impl.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

/* clang-tidy's MPI checker wants every request completed by an MPI_Wait call.
 * Here every call's requests are polled with MPI_Testall to bound the wait, and
 * a call that a lost process never completes is abandoned for good (MPI is not
 * used again): both by design, so that checker is off for this file. */
// NOLINTBEGIN(clang-analyzer-optin.mpi.MPI-Checker)

/* The size of the run the launcher started, from its environment: OpenMPI's
 * mpirun, MPICH's Hydra and Slurm (PMI), PMIx launchers. 1 when not launched so. */
static int launched_size(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                     "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && atoi(v) > 0) return atoi(v);
  }
  return getenv("PMIX_RANK") ? 2 : 1; /* PMIx without a size: assume several */
}

int clt_cluster_built_with_mpi(void) {
#ifdef CLT_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

#ifdef CLT_HAVE_MPI
int clt_cluster_mpi_fail(clt_err *e, int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
  return clt_fail(e, CLT_ERR_PEER, "MPI %s failed: %s", what, msg);
}
#endif

void clt_cluster_set_timeout(clt_cluster *c, double seconds) {
  if (c) c->timeout = seconds > 0 ? seconds : 0;
}

double clt_cluster_bound(const clt_cluster *c) { return c ? c->timeout : 0; }

void clt_cluster_set_step(clt_cluster *c, long step) {
  if (c) c->step = step;
}

int clt_cluster_lost(const clt_cluster *c) { return c ? c->lost : 0; }

/* This host's first IPv4 address on an interface that is up and not loopback
 * (as a rule the one the other hosts reach it by), or "". */
static void host_address(char *out, size_t size) {
  struct ifaddrs *list = NULL;
  out[0] = '\0';
  if (getifaddrs(&list) != 0) return;
  for (const struct ifaddrs *a = list; a && !out[0]; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP) ||
        (a->ifa_flags & IFF_LOOPBACK))
      continue;
    struct sockaddr_in in;
    memcpy(&in, a->ifa_addr, sizeof in);
    if (!inet_ntop(AF_INET, &in.sin_addr, out, (socklen_t)size)) out[0] = '\0';
  }
  freeifaddrs(list);
}

#ifdef CLT_HAVE_MPI
/* The liveness round's messages (on their own communicator): a question to
 * every rank, carrying the asker's step and the time left of its round, and
 * the answers, carrying the answerer's step. */
enum { TAG_PING = 1, TAG_PONG = 2 };
/* What the round heard from a rank (clt_cluster.heard): it asked, it answered. */
enum { HEARD_ASKED = 1, HEARD_ANSWERED = 2 };

/* A wait tests back to back this long (a fast link's transfers progress only
 * while MPI is called), then naps up to NAP_MAX_NS between tests: a longer wait
 * is for a slower process and need not burn a core. */
#define SPIN_SECONDS 0.05
#define NAP_MIN_NS 20000L
#define NAP_MAX_NS 1000000L
/* Seconds between looks for another process's liveness question. */
#define LOOK_SECONDS 0.01

/* Seconds of the liveness round that ends a call's timeout: long enough for
 * every process still running to reach a wait and answer (each looks every
 * LOOK_SECONDS while it waits), short beside the timeout. */
static double round_seconds(const clt_cluster *c) {
  if (c->timeout <= 0) return 10;
  double s = c->timeout / 5;
  s = s < 0.5 ? 0.5 : s > 10 ? 10 : s;
  return s > c->timeout / 2 ? c->timeout / 2 : s;
}

/* The error every call returns once a process was lost. */
static int lost_error(const clt_cluster *c, clt_err *e) {
  *e = c->lost_err;
  return CLT_ERR_PEER;
}

static void nap(long ns) { nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = ns}, NULL); }

/* Answers the liveness questions that arrived (in the round): a process that
 * asks has given up its call, so it is alive. *step becomes the lowest step
 * heard of and *until the earliest end of a round heard of, so that every
 * process still running ends its round and prints its line at about the same
 * time (mpirun ends the others once one exits). */
static void answer_questions(clt_cluster *c, long *step, double *until) {
  for (;;) {
    int asked = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, c->live, &asked, &st) != MPI_SUCCESS || !asked) return;
    const int from = st.MPI_SOURCE;
    long theirs[2] = {0, 0};
    if (MPI_Recv(theirs, 2, MPI_LONG, from, TAG_PING, c->live, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return;
    MPI_Request req;
    if (MPI_Isend(&c->pong, 1, MPI_LONG, from, TAG_PONG, c->live, &req) == MPI_SUCCESS)
      MPI_Request_free(&req); /* not waited for: the asker may be gone */
    c->heard[from] |= HEARD_ASKED;
    if (theirs[0] < *step) *step = theirs[0];
    const double end = clt_now_seconds() + (double)theirs[1] * 1e-6;
    if (end < *until) *until = end;
  }
}

/* "rank 1 (host h2, 10.0.0.2) and rank 2 (host h3, 10.0.0.3)": the ranks the
 * round heard exactly `heard` from; returns how many. */
static int ranks_heard(const clt_cluster *c, int heard, char *out, size_t size) {
  int count = 0, shown = 0;
  size_t len = 0;
  out[0] = '\0';
  for (int r = 0; r < c->size; r++) count += c->heard[r] == heard;
  for (int r = 0; r < c->size && len < size; r++) {
    if (c->heard[r] != heard) continue;
    const char *sep = shown == 0 ? "" : shown + 1 == count ? " and " : ", ";
    const clt_peer *p = &c->peers[r];
    if (shown == 8) {
      snprintf(out + len, size - len, " and %d more", count - shown);
      break;
    }
    const int w = snprintf(out + len, size - len, "%srank %d (host %s%s%s)", sep, r, p->host,
                           p->addr[0] ? ", " : "", p->addr);
    len += w > 0 ? (size_t)w : 0;
    shown++;
  }
  return count;
}

/* A call did not finish: it timed out (rc MPI_SUCCESS), failed (rc), or another
 * process asked. Asks every rank whether it is there and answers the others'
 * questions for round_seconds (until the earliest round heard of ends; at once
 * when all answer); the cluster is then lost, and the error names the ranks
 * that neither answered nor asked. Every process still running names the same
 * ranks: each waits in a call, so each asks and answers within the round. */
static int liveness_round(clt_cluster *c, const char *what, int rc, clt_err *e) {
  const int n = c->size;
  long step = c->step;
  double until = clt_now_seconds() + round_seconds(c);
  c->ping[0] = c->pong = c->step;
  c->ping[1] = (long)(round_seconds(c) * 1e6);
  c->heard[c->rank] = HEARD_ANSWERED;
  for (int r = 0; r < n; r++) {
    c->round_reqs[r] = MPI_REQUEST_NULL;
    if (r == c->rank) continue;
    if (MPI_Irecv(&c->answers[r], 1, MPI_LONG, r, TAG_PONG, c->live, &c->round_reqs[r]) !=
        MPI_SUCCESS)
      c->round_reqs[r] = MPI_REQUEST_NULL;
    MPI_Request req;
    if (MPI_Isend(c->ping, 2, MPI_LONG, r, TAG_PING, c->live, &req) == MPI_SUCCESS)
      MPI_Request_free(&req); /* not waited for: the rank may be gone */
  }
  for (int missing = n - 1; missing > 0 && clt_now_seconds() < until;) {
    answer_questions(c, &step, &until);
    missing = 0;
    for (int r = 0; r < n; r++) {
      int done = 0;
      if (c->round_reqs[r] != MPI_REQUEST_NULL &&
          MPI_Test(&c->round_reqs[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
        c->heard[r] |= HEARD_ANSWERED;
        if (c->answers[r] < step) step = c->answers[r];
      }
      missing += !c->heard[r];
    }
    if (missing) nap(NAP_MAX_NS);
  }
  /* Receives still posted stay so: MPI is not called again. */
  c->lost = 1;
  char when[48], who[1024];
  if (step > 0) snprintf(when, sizeof when, "step %ld", step);
  else snprintf(when, sizeof when, "before the first step");
  if (ranks_heard(c, 0, who, sizeof who) > 0) {
    char why[MPI_MAX_ERROR_STRING + 64] = "";
    int len = 0;
    char msg[MPI_MAX_ERROR_STRING] = "";
    if (rc != MPI_SUCCESS && MPI_Error_string(rc, msg, &len) == MPI_SUCCESS)
      snprintf(why, sizeof why, " (MPI %s failed: %s)", what, msg);
    else if (c->timeout > 0) snprintf(why, sizeof why, " within %g s", c->timeout);
    clt_fail(&c->lost_err, CLT_ERR_PEER, "%s: %s stopped answering%s; stopping", when, who, why);
  } else if (ranks_heard(c, HEARD_ASKED, who, sizeof who) > 0) {
    /* They gave up on this process (paused, then resumed?) and left. */
    clt_fail(&c->lost_err, CLT_ERR_PEER, "%s: %s stopped waiting for this process; stopping", when,
             who);
  } else if (rc != MPI_SUCCESS) {
    clt_cluster_mpi_fail(&c->lost_err, rc, what);
    clt_wrap(&c->lost_err, "%s", when);
  } else {
    clt_fail(&c->lost_err, CLT_ERR_PEER,
             "%s: %s across processes did not finish within %g s, yet every process answers; "
             "stopping",
             when, what, c->timeout);
  }
  return lost_error(c, e);
}

/* Waits for n requests, within the timeout: when only the liveness round is
 * left of it (or on another process's question, or a failure), the round
 * decides. idle (NULL: none) is called between tests instead of this wait's
 * own spinning and napping; its non-zero gives up. */
static int wait_idle(clt_cluster *c, int n, MPI_Request *reqs, const char *what,
                     clt_cluster_idle_fn idle, void *ctx, clt_err *e) {
  const double t0 = clt_now_seconds(), patience = c->timeout - round_seconds(c);
  double look = t0 + LOOK_SECONDS;
  long ns = 0;
  for (unsigned tries = 0;; tries++) {
    int done = 0;
    const int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return liveness_round(c, what, rc, e);
    if (done) return CLT_OK;
    if (idle && idle(ctx)) return clt_fail(e, CLT_ERR_INTERNAL, "%s was given up", what);
    if (tries < 64 && !idle) continue; /* a fast answer: no clock read */
    const double now = clt_now_seconds();
    if (now >= look) {
      int asked = 0;
      look = now + LOOK_SECONDS;
      MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, c->live, &asked, MPI_STATUS_IGNORE);
      if (asked || (c->timeout > 0 && now - t0 > patience))
        return liveness_round(c, what, MPI_SUCCESS, e);
    }
    if (!idle && now - t0 > SPIN_SECONDS) {
      ns = ns ? (ns * 2 < NAP_MAX_NS ? ns * 2 : NAP_MAX_NS) : NAP_MIN_NS;
      nap(ns);
    }
  }
}

static int wait_for(clt_cluster *c, int n, MPI_Request *reqs, const char *what, clt_err *e) {
  return wait_idle(c, n, reqs, what, NULL, NULL, e);
}

/* A nonblocking call's start: a failure to start is the call's failure. */
static int started(clt_cluster *c, int rc, MPI_Request *reqs, int n, const char *what, clt_err *e) {
  return rc == MPI_SUCCESS ? wait_for(c, n, reqs, what, e) : liveness_round(c, what, rc, e);
}
#endif

/* mpirun binds each process to one core by default when there are few: fine for
 * one process per core, but a lone process per host then runs its devices' host
 * threads (PoCL's CPU device, photo decoding) on one core. */
static void note_binding(clt_cluster *c) {
  cpu_set_t set;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int here = local && atoi(local) > 0 ? atoi(local) : 1;
  if (online < 2 || sched_getaffinity(0, sizeof set, &set) != 0) return;
  const int mine = CPU_COUNT(&set);
  if ((long)mine * here < online) {
    snprintf(c->note, sizeof c->note,
             "rank %d may use %d of this host's %ld cores (%d process%s here): with one process "
             "per host, add --bind-to none to mpirun",
             c->rank, mine, online, here, here == 1 ? "" : "es");
  }
}

/* Every rank's host name and address, which name a rank that stops answering;
 * and the liveness round's memory. */
static int meet(clt_cluster *c, clt_err *e) {
  const size_t n = (size_t)c->size;
  c->peers = calloc(n, sizeof *c->peers);
#ifdef CLT_HAVE_MPI
  c->heard = calloc(n, sizeof *c->heard);
  c->answers = calloc(n, sizeof *c->answers);
  c->round_reqs = calloc(n, sizeof *c->round_reqs);
  if (!c->heard || !c->answers || !c->round_reqs)
    return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
#endif
  if (!c->peers) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  clt_peer mine;
  memset(&mine, 0, sizeof mine);
  snprintf(mine.host, sizeof mine.host, "%.63s", c->host);
  host_address(mine.addr, sizeof mine.addr);
  return clt_cluster_allgather(c, &mine, sizeof mine, c->peers, e);
}

int clt_cluster_join(clt_cluster **out, clt_err *e) {
  *out = NULL;
  const int launched = launched_size();
  clt_cluster *c = calloc(1, sizeof *c);
  if (!c) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  c->size = 1;
  c->timeout = CLT_CLUSTER_DEFAULT_TIMEOUT;
#ifdef CLT_HAVE_MPI
  c->live = MPI_COMM_NULL;
#endif
  if (gethostname(c->host, sizeof c->host - 1) != 0) snprintf(c->host, sizeof c->host, "?");
#ifdef CLT_HAVE_MPI
  /* A program that initialised MPI itself (libcltrain's caller) keeps it: its
   * world is the run, and finalising is the program's. */
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  if (initialised) MPI_Finalized(&finalised);
  if (finalised) {
    free(c);
    return clt_fail(e, CLT_ERR_PEER, "MPI was finalised: it cannot be used again");
  }
  if (launched > 1 || initialised) {
    int provided = 0;
    /* Replica threads call MPI one at a time (the ring's first thread, between
     * barriers), so SERIALIZED suffices. */
    if (initialised) {
      MPI_Query_thread(&provided);
    } else if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      free(c);
      return clt_fail(e, CLT_ERR_PEER, "MPI_Init_thread failed");
    }
    c->mpi = 1;
    c->finalize = !initialised;
    if (provided < MPI_THREAD_SERIALIZED && initialised) {
      clt_cluster_leave(c, 0);
      return clt_fail(e, CLT_ERR_PEER,
                      "the program initialised MPI below MPI_THREAD_SERIALIZED, which cltrain's "
                      "threads need: use MPI_Init_thread");
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      clt_cluster_leave(c, 0);
      return clt_fail(e, CLT_ERR_PEER,
                      "this MPI library does not allow calls from several threads "
                      "(MPI_THREAD_SERIALIZED)");
    }
    /* Errors come back as codes, so they reach the user as one line. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->live) != MPI_SUCCESS) {
      c->live = MPI_COMM_NULL;
      clt_cluster_leave(c, 0);
      return clt_fail(e, CLT_ERR_PEER, "MPI_Comm_dup failed");
    }
  }
#else
  if (launched > 1) {
    free(c);
    return clt_fail(e, CLT_ERR_ARG,
                    "started as one of %d processes (mpirun), but this cltrain was built without "
                    "MPI: install libopenmpi-dev and rebuild to train across processes",
                    launched);
  }
#endif
  if (getenv("OMPI_COMM_WORLD_SIZE")) note_binding(c);
  int status = meet(c, e);
  if (status) {
    clt_cluster_leave(c, 0);
    return status;
  }
  *out = c;
  return CLT_OK;
}

void clt_cluster_leave(clt_cluster *c, int failed) {
  if (!c) return;
#ifdef CLT_HAVE_MPI
  /* After a lost process, MPI is left as it is: aborting or finalising would
   * wait for the lost one. The others still running print their line about
   * now, and mpirun ends them all once one exits: a moment for theirs first. */
  if (c->lost) {
    fflush(stdout);
    fflush(stderr);
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 500000000L}, NULL);
  }
  if (c->mpi && !c->lost) {
    if (c->live != MPI_COMM_NULL) MPI_Comm_free(&c->live);
    if (failed && c->size > 1 && !c->agreed) {
      /* The others may be waiting in a collective for this process: end them all.
       * mpirun forwards output through pipes and may not drain them once the job
       * is aborted: give it a moment to pass this process's error on. */
      fflush(stdout);
      fflush(stderr);
      nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 300000000L}, NULL);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (c->finalize) MPI_Finalize();
  }
#else
  (void)failed;
#endif
#ifdef CLT_HAVE_MPI
  free(c->heard);
  free(c->answers);
  free(c->round_reqs);
#endif
  free(c->peers);
  free(c->scratch);
  free(c->halves);
  free(c);
}

int clt_cluster_rank(const clt_cluster *c) { return c ? c->rank : 0; }
int clt_cluster_size(const clt_cluster *c) { return c ? c->size : 1; }
const char *clt_cluster_host(const clt_cluster *c) { return c ? c->host : ""; }
const char *clt_cluster_note(const clt_cluster *c) { return c ? c->note : ""; }

int clt_cluster_allgather(clt_cluster *c, const void *mine, size_t bytes, void *all, clt_err *e) {
  if (clt_cluster_size(c) == 1) {
    if (all != mine) memmove(all, mine, bytes);
    return CLT_OK;
  }
#ifdef CLT_HAVE_MPI
  if (c->lost) return lost_error(c, e);
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                                MPI_COMM_WORLD, &req);
  return started(c, rc, &req, 1, "all-gather", e);
#else
  (void)e;
  return CLT_OK;
#endif
}

int clt_cluster_any(clt_cluster *c, int *flag, clt_err *e) {
  if (clt_cluster_size(c) == 1) return CLT_OK;
#ifdef CLT_HAVE_MPI
  if (c->lost) return lost_error(c, e);
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, flag, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD, &req);
  return started(c, rc, &req, 1, "all-reduce of a flag", e);
#else
  (void)flag;
  (void)e;
  return CLT_OK;
#endif
}

int clt_cluster_bcast(clt_cluster *c, void *buf, size_t bytes, clt_err *e) {
  if (clt_cluster_size(c) == 1) return CLT_OK;
#ifdef CLT_HAVE_MPI
  if (c->lost) return lost_error(c, e);
  /* In pieces: MPI counts are ints. */
  const size_t piece = (size_t)1 << 30;
  for (size_t off = 0; off < bytes; off += piece) {
    const size_t len = bytes - off < piece ? bytes - off : piece;
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc = MPI_Ibcast((char *)buf + off, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    const int status = started(c, rc, &req, 1, "broadcast", e);
    if (status) return status;
  }
#endif
  (void)buf;
  (void)bytes;
  (void)e;
  return CLT_OK;
}

int clt_cluster_exchange(clt_cluster *c, const void *send, size_t send_bytes, int to, void *recv,
                         size_t recv_bytes, int from, int tag, clt_err *e) {
#ifdef CLT_HAVE_MPI
  if (c->mpi) {
    if (c->lost) return lost_error(c, e);
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, tag, MPI_COMM_WORLD, &reqs[0]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(send, (int)send_bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, &reqs[1]);
    return started(c, rc, reqs, 2, "send/receive", e);
  }
#endif
  (void)send;
  (void)send_bytes;
  (void)to;
  (void)recv;
  (void)recv_bytes;
  (void)from;
  (void)tag;
  (void)c;
  return clt_fail(e, CLT_ERR_INTERNAL, "send/receive outside an MPI run");
}

int clt_cluster_exchange_polled(clt_cluster *c, const void *send, size_t send_bytes, int to,
                                void *recv, size_t recv_bytes, int from, int tag,
                                clt_cluster_idle_fn idle, void *ctx, clt_err *e) {
#ifdef CLT_HAVE_MPI
  if (c->mpi) {
    if (c->lost) return lost_error(c, e);
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, tag, MPI_COMM_WORLD, &reqs[0]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(send, (int)send_bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, &reqs[1]);
    if (rc != MPI_SUCCESS) return liveness_round(c, "send/receive", rc, e);
    return wait_idle(c, 2, reqs, "send/receive", idle, ctx, e);
  }
#endif
  (void)send;
  (void)send_bytes;
  (void)to;
  (void)recv;
  (void)recv_bytes;
  (void)from;
  (void)tag;
  (void)idle;
  (void)ctx;
  (void)c;
  return clt_fail(e, CLT_ERR_INTERNAL, "send/receive outside an MPI run");
}

int clt_cluster_barrier(clt_cluster *c, clt_err *e) {
  if (clt_cluster_size(c) == 1) return CLT_OK;
#ifdef CLT_HAVE_MPI
  if (c->lost) return lost_error(c, e);
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
  return started(c, rc, &req, 1, "barrier", e);
#else
  (void)e;
  return CLT_OK;
#endif
}

/* What each process tells the others in clt_cluster_agree. */
typedef struct verdict {
  int status;
  char msg[1020];
} verdict;

int clt_cluster_agree(clt_cluster *c, int status, clt_err *e) {
  const int n = clt_cluster_size(c);
  if (n == 1) return status;
  verdict mine = {.status = status};
  if (status) snprintf(mine.msg, sizeof mine.msg, "%.1000s", e->msg);
  verdict *all = calloc((size_t)n, sizeof *all);
  if (!all) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  clt_err gather_err = {0};
  int rc = clt_cluster_allgather(c, &mine, sizeof mine, all, &gather_err);
  if (rc) {
    free(all);
    if (!status) *e = gather_err;
    return status ? status : rc;
  }
  int failed = -1;
  for (int r = 0; r < n && failed < 0; r++) {
    if (all[r].status) failed = r;
  }
  if (failed >= 0) {
    c->agreed = 1;
    if (!status) {
      status = clt_fail(e, CLT_ERR_PEER, "stopping because rank %d failed: %s", failed,
                        all[failed].msg);
    }
  }
  free(all);
  return status;
}

void clt_cluster_known(clt_cluster *c) {
  if (c) c->agreed = 1;
}

int clt_cluster_sum_doubles(clt_cluster *c, double *buf, size_t n, clt_err *e) {
  const int size = clt_cluster_size(c);
  if (size == 1 || n == 0) return CLT_OK;
  double *all = calloc((size_t)size * n, sizeof *all);
  if (!all) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  int status = clt_cluster_allgather(c, buf, n * sizeof *buf, all, e);
  if (!status) {
    for (size_t i = 0; i < n; i++) {
      double s = 0;
      for (int r = 0; r < size; r++) s += all[(size_t)r * n + i];
      buf[i] = s;
    }
  }
  free(all);
  return status;
}

int clt_cluster_mpi_allreduce(clt_cluster *c, float *buf, size_t n, clt_err *e) {
  if (clt_cluster_size(c) == 1) return CLT_OK;
#ifdef CLT_HAVE_MPI
  int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return clt_cluster_mpi_fail(e, rc, "MPI_Allreduce");
#endif
  (void)buf;
  (void)n;
  (void)e;
  return CLT_OK;
}
// NOLINTEND(clang-analyzer-optin.mpi.MPI-Checker)
