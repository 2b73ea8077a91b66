#define _POSIX_C_SOURCE 200809L
#include "interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The signals are blocked in every thread and taken by one waiting thread
 * (sigwait) rather than by a handler: a handler would run in whichever thread
 * the kernel picks, and LLVM, which PoCL runs in-process to compile kernels,
 * installs its own handler that deletes the compiler's temporary files and so
 * fails the build in flight. Blocked everywhere, the signal reaches only the
 * waiting thread. */
static volatile sig_atomic_t received; /* what clt_interrupt_signal answers */
static long test_step = -1;            /* CLTRAIN_TEST_SIGNAL */
static int test_signal = SIGINT;

static void *wait_signals(void *arg) {
  const sigset_t *set = arg;
  for (;;) {
    int sig = 0;
    if (sigwait(set, &sig) != 0) continue;
    if (received > 0) {
      /* The second: the signal's default action, now (the process ends by it). */
      signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, NULL);
      raise(sig);
      _exit(128 + sig); /* not reached */
    }
    received = sig;
    static const char msg[] = "\ncltrain: stopping after the current step to save a checkpoint "
                              "(signal again to abort at once)\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
  }
  return NULL;
}

void clt_interrupt_install(void) {
  static sigset_t set; /* the waiting thread's, for the life of the process */
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  /* Threads created from now on (the replicas', PoCL's, decoders', MPI's)
   * inherit the blocked mask. */
  if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return;
  pthread_t waiter;
  if (pthread_create(&waiter, NULL, wait_signals, &set) != 0) {
    pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* no waiter: keep the default action */
    return;
  }
  pthread_detach(waiter);
  const char *at = getenv("CLTRAIN_TEST_SIGNAL");
  if (at && *at) {
    char *end = NULL;
    test_step = strtol(at, &end, 10);
    test_signal = strcmp(end, ":TERM") == 0 ? SIGTERM : SIGINT;
  }
}

int clt_interrupt_signal(void) { return received; }

void clt_interrupt_request(void) {
  if (!received) received = CLT_STOP_REQUESTED;
}

void clt_interrupt_clear(void) { received = 0; }

void clt_interrupt_step(long step) {
  if (step != test_step) return;
  /* To the process, as kill(1) sends it, and waited for: the test knows the step. */
  kill(getpid(), test_signal);
  for (int i = 0; i < 2000 && !received; i++) nanosleep(&(struct timespec){0, 1000000}, NULL);
}
