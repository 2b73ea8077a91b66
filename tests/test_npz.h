/* What the two sources of test_npz share: the scratch folder, file helpers, the
 * deterministic fuzzing generator, the error check, a reference array, and the
 * tests of test_npz_foreign.c that main runs. */
#ifndef CLT_TEST_NPZ_H
#define CLT_TEST_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* name's path in the scratch folder (one of 8 rotating buffers). */
const char *tmp(const char *name);
int save(const char *path, const void *buf, size_t n);
uint64_t rnd(void);
/* An error that names the file first, as every npz error must. */
int names_path(const clt_err *e, const char *path);
/* Reads path expecting failure with code and a message containing want. */
void expect_error(const char *what, const char *path, int code, const char *want);

extern double sums[2][2]; /* the reference archive's float64 array */

/* test_npz_foreign.c */
void test_foreign(void);
void test_unsafe_names(void);
void test_deflate(void);

#endif
