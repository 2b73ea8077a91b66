/* Ctrl-C and SIGTERM while training: the first signal asks the run to stop after
 * the current step (it then saves a checkpoint that --resume continues exactly
 * and exits 130 or 143); a second ends the process at once, as the signal's
 * default action would. */
#ifndef CLT_INTERRUPT_H
#define CLT_INTERRUPT_H

/* Takes over SIGINT and SIGTERM (once per process, before any other thread is
 * started: threads inherit the blocked signal mask). */
void clt_interrupt_install(void);

/* The first signal received (SIGINT or SIGTERM), or 0. */
int clt_interrupt_signal(void);

/* Test facility: with CLTRAIN_TEST_SIGNAL=N (or N:TERM) in the environment when
 * clt_interrupt_install runs, the trainer sends SIGINT (SIGTERM) at optimizer
 * step N, during the step, as a Ctrl-C at a chosen instant would. Called with
 * each step's number by the trainer. */
void clt_interrupt_step(long step);

#endif
