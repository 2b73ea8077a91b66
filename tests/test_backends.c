/* The backend tables (src/backend/backend.h): complete, and chosen by device
 * type or $CLTRAIN_KERNELS. What each backend computes is checked against the
 * references by the device tests, which run once per backend
 * (the *_gpu_variants tests force the gpu backend on PoCL). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"

static void test_table(const clt_backend *b) {
  check(b->name && b->summary && b->sources, "%s: name, summary and sources", b->name);
  check(b->attach && b->release, "%s: attach and release", b->name);
  check(b->launch_rows && b->launch_row_chunks && b->launch_blocks && b->launch_row_blocks &&
            b->launch_columns && b->launch_positions && b->launch_matrix && b->launch_elements &&
            b->launch_groups && b->launch_single_group && b->sum_block_rows,
        "%s: every launch shape", b->name);
  check(b->gemm_reserve && b->gemm && b->gemm_bias_act, "%s: GEMM", b->name);
  check(b->gemm_batched_reserve && b->gemm_batched, "%s: strided-batched GEMM", b->name);
  const int in_place = (b->conv_algos != NULL) + (b->conv_reserve != NULL) +
                       (b->conv_forward != NULL) + (b->conv_dw != NULL) +
                       (b->conv_dx_reserve != NULL) + (b->conv_dx != NULL);
  check(in_place == 0 || in_place == 6, "%s: in-place convolutions all or none (%d of 6)", b->name,
        in_place);
  check(b->winograd, "%s: runs the Winograd passes (CLTRAIN_WINOGRAD)", b->name);
  const clt_gemm_tilings *t = b->tilings;
  check(!t || (t->shapes && t->shapes_clear && t->tunable && t->candidates && t->valid &&
               t->choose && t->chosen),
        "%s: GEMM tilings none or complete", b->name);
  check(t != NULL, "%s: GEMM tilings for the tuner", b->name);
}

/* The backend a device of `type` gets with CLTRAIN_KERNELS=value (NULL: unset). */
static int choose(cl_device_type type, const char *value, const clt_backend **out, clt_err *e) {
  clt_device d;
  memset(&d, 0, sizeof d);
  d.type = type;
  if (value) setenv("CLTRAIN_KERNELS", value, 1);
  else unsetenv("CLTRAIN_KERNELS");
  *out = NULL;
  return clt_backend_for(&d, out, e);
}

static void test_choice(void) {
  const clt_backend *b;
  clt_err e = {0};
  check(!choose(CL_DEVICE_TYPE_CPU, NULL, &b, &e) && b == &clt_backend_cpu, "a CPU gets cpu");
  check(!choose(CL_DEVICE_TYPE_GPU, NULL, &b, &e) && b == &clt_backend_gpu, "a GPU gets gpu");
  check(!choose(CL_DEVICE_TYPE_ACCELERATOR, "auto", &b, &e) && b == &clt_backend_gpu,
        "an accelerator gets gpu (auto)");
  check(!choose(CL_DEVICE_TYPE_CPU, "gpu", &b, &e) && b == &clt_backend_gpu,
        "CLTRAIN_KERNELS=gpu forces gpu on a CPU");
  check(!choose(CL_DEVICE_TYPE_GPU, "cpu", &b, &e) && b == &clt_backend_cpu,
        "CLTRAIN_KERNELS=cpu forces cpu on a GPU");
  const int status = choose(CL_DEVICE_TYPE_CPU, "fpga", &b, &e);
  check(status == CLT_ERR_ARG && !b && strstr(e.msg, "CLTRAIN_KERNELS=fpga") &&
            !strchr(e.msg, '\n'),
        "an unknown CLTRAIN_KERNELS is a one-line error naming it: %s", e.msg);
  unsetenv("CLTRAIN_KERNELS");
}

int main(void) {
  test_table(&clt_backend_cpu);
  test_table(&clt_backend_gpu);
  check(strcmp(clt_backend_cpu.name, clt_backend_gpu.name) != 0, "backend names differ");
  test_choice();
  return check_summary();
}
