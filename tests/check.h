/* Pass/fail reporting shared by the host-only tests (the device tests have their
 * own in harness.h). Each check prints "ok: <what>" or "FAIL: <what>" and is
 * counted; check_summary prints "N passed, M failed" last and gives main its exit
 * status. */
#ifndef CLT_TEST_CHECK_H
#define CLT_TEST_CHECK_H

/* Counts one check and prints "ok: " or "FAIL: " and the printf-formatted message. */
void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The number of checks failed so far. */
int check_failures(void);

/* Prints "N passed, M failed"; returns 1 if any check failed, else 0. */
int check_summary(void);

#endif
