#define _GNU_SOURCE      /* sched_getaffinity */
#define CLT_CLUSTER_IMPL /* the definitions below, not cluster.h's analyzer macro */
#include "cluster.h"
#include "cluster_impl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef CLT_HAVE_MPI
#include <mpi.h>
#endif

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

int clt_cluster_join(clt_cluster **out, clt_err *e) {
  *out = NULL;
  const int launched = launched_size();
  clt_cluster *c = calloc(1, sizeof *c);
  if (!c) return clt_fail(e, CLT_ERR_NOMEM, "out of host memory");
  c->size = 1;
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
  *out = c;
  return CLT_OK;
}

void clt_cluster_leave(clt_cluster *c, int failed) {
  if (!c) return;
#ifdef CLT_HAVE_MPI
  if (c->mpi) {
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
  int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return clt_cluster_mpi_fail(e, rc, "all-gather");
#endif
  (void)e;
  return CLT_OK;
}

int clt_cluster_any(clt_cluster *c, int *flag, clt_err *e) {
  if (clt_cluster_size(c) == 1) return CLT_OK;
#ifdef CLT_HAVE_MPI
  int rc = MPI_Allreduce(MPI_IN_PLACE, flag, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return clt_cluster_mpi_fail(e, rc, "all-reduce of a flag");
#endif
  (void)flag;
  (void)e;
  return CLT_OK;
}

int clt_cluster_bcast(clt_cluster *c, void *buf, size_t bytes, clt_err *e) {
  if (clt_cluster_size(c) == 1) return CLT_OK;
#ifdef CLT_HAVE_MPI
  /* In pieces: MPI counts are ints. */
  const size_t piece = (size_t)1 << 30;
  for (size_t off = 0; off < bytes; off += piece) {
    const size_t len = bytes - off < piece ? bytes - off : piece;
    int rc = MPI_Bcast((char *)buf + off, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return clt_cluster_mpi_fail(e, rc, "broadcast");
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
    int rc = MPI_Sendrecv(send, (int)send_bytes, MPI_BYTE, to, tag, recv, (int)recv_bytes, MPI_BYTE,
                          from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? CLT_OK : clt_cluster_mpi_fail(e, rc, "send/receive");
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
    /* A failure, or giving up, leaves the transfers in flight, unwaited for (the
     * MPI checker's finding): the process is ending (MPI_Abort). */
    // NOLINTBEGIN(clang-analyzer-optin.mpi.MPI-Checker)
    MPI_Request req[2];
    int rc = MPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, tag, MPI_COMM_WORLD, &req[0]);
    if (rc != MPI_SUCCESS) return clt_cluster_mpi_fail(e, rc, "receive");
    rc = MPI_Isend(send, (int)send_bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, &req[1]);
    if (rc != MPI_SUCCESS) return clt_cluster_mpi_fail(e, rc, "send");
    for (int done = 0;;) {
      rc = MPI_Testall(2, req, &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return clt_cluster_mpi_fail(e, rc, "send/receive");
      if (done) break;
      if (idle(ctx)) return clt_fail(e, CLT_ERR_INTERNAL, "the cross-process sum was aborted");
    }
    // NOLINTEND(clang-analyzer-optin.mpi.MPI-Checker)
    /* Both are complete: this returns at once. */
    rc = MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? CLT_OK : clt_cluster_mpi_fail(e, rc, "send/receive");
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
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return clt_cluster_mpi_fail(e, rc, "barrier");
#endif
  (void)e;
  return CLT_OK;
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
