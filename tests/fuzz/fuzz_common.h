/* Helpers shared by the fuzz targets (tests/fuzz/README.md): a private scratch
 * folder for the readers that take paths, whole-file writes into it, and a check
 * that touches every byte of a buffer a reader returned, so AddressSanitizer sees
 * any that lies outside its allocation.
 *
 * Harness code, not library code: a failure of the harness itself (no scratch
 * folder, a failed write) aborts the run, which libFuzzer reports as a crash with
 * this file in the stack, never as a finding in the reader. */
#ifndef CLT_FUZZ_COMMON_H
#define CLT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* The scratch folder, created on first use (under /dev/shm where writable, so the
 * per-input writes cost no disk I/O; else $TMPDIR or /tmp) and removed with its
 * files at exit. */
const char *fuzz_dir(void);

/* fuzz_dir()/name into buf (size bytes); aborts if it does not fit. */
void fuzz_path(char *buf, size_t size, const char *name);

/* Writes n bytes to path (created or truncated); aborts on failure. */
void fuzz_write(const char *path, const void *data, size_t n);

/* Reads every byte of p[0..n) into a sum the compiler cannot drop. */
void fuzz_touch(const void *p, size_t n);

/* With CLT_FUZZ_VERBOSE set in the environment, prints "what: status message" on
 * stderr: why a seed stops where it does (replaying a corpus: BINARY -runs=0 DIR). */
void fuzz_note(const char *what, int status, const char *msg);

/* Aborts with a message: an invariant of the code under test did not hold. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Little-endian helpers for harnesses that build zip structures. */
void fuzz_put16(unsigned char *p, uint32_t v);
void fuzz_put32(unsigned char *p, uint32_t v);

#endif
