/* Ctrl-C and SIGTERM while training: the first signal asks the run to stop after
 * the current step (it then saves a checkpoint that --resume continues exactly
 * and exits 130 or 143); a second ends the process at once, as the signal's
 * default action would. */
#ifndef CLT_INTERRUPT_H
#define CLT_INTERRUPT_H

/* Takes over SIGINT and SIGTERM (once per process, before any other thread is
 * started: threads inherit the blocked signal mask). */
void clt_interrupt_install(void);

/* What asked the run to stop: the first signal received (SIGINT or SIGTERM),
 * CLT_STOP_REQUESTED after clt_interrupt_request alone, or 0. */
#define CLT_STOP_REQUESTED (-1)
int clt_interrupt_signal(void);

/* Asks the run to stop as a first signal does, without one (async-signal-safe:
 * the public cltrain_request_stop). A signal received later is still a first
 * one. */
void clt_interrupt_request(void);

/* Forgets the stop asked (by a signal or a request): the next signal is a first. */
void clt_interrupt_clear(void);

/* Test facility: with CLTRAIN_TEST_SIGNAL=N (or N:TERM) in the environment when
 * clt_interrupt_install runs, the trainer sends SIGINT (SIGTERM) at optimizer
 * step N, during the step, as a Ctrl-C at a chosen instant would. Called with
 * each step's number by the trainer. */
void clt_interrupt_step(long step);

#endif
