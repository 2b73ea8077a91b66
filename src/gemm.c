#include "gemm.h"

#include <clblast_c.h>
#include <stdio.h>

static CLBlastTranspose tr(int t) { return t ? CLBlastTransposeYes : CLBlastTransposeNo; }

int clt_gemm_reserve(clt_replica *r, const clt_gemm_shape *s, clt_err *e) {
  if (s->m == 0 || s->n == 0 || s->k == 0) return CLT_OK;
  size_t bytes = 0;
  CLBlastStatusCode rc = CLBlastSGemmTempBufferSize(
      CLBlastLayoutRowMajor, tr(s->trans_a), tr(s->trans_b), s->m, s->n, s->k, 0, s->lda, 0,
      s->ldb, 0, s->ldc, &r->queue, &bytes);
  if (rc != CLBlastSuccess) {
    return clt_fail(e, rc, "device %d (%s): CLBlast GEMM %zux%zux%zu: %s", r->device.index,
                    r->device.name, s->m, s->n, s->k, clt_status_name(rc));
  }
  if (bytes <= r->gemm_temp_bytes) return CLT_OK;
  if (r->gemm_temp) {
    clReleaseMemObject(r->gemm_temp);
    r->allocated_bytes -= r->gemm_temp_bytes;
    r->gemm_temp = NULL;
    r->gemm_temp_bytes = 0;
  }
  int status = clt_replica_alloc(r, bytes, "GEMM scratch", &r->gemm_temp, e);
  if (status == CLT_OK) r->gemm_temp_bytes = bytes;
  return status;
}

int clt_gemm(clt_replica *r, const clt_gemm_shape *s, float alpha, cl_mem a, size_t a_off,
             cl_mem b, size_t b_off, float beta, cl_mem c, size_t c_off, clt_err *e) {
  if (s->m == 0 || s->n == 0) return CLT_OK;
  if (s->k == 0) return clt_fail(e, CLT_ERR_INTERNAL, "GEMM with k = 0");
  CLBlastStatusCode rc;
  if (r->gemm_temp) {
    rc = CLBlastSgemmWithTempBuffer(CLBlastLayoutRowMajor, tr(s->trans_a), tr(s->trans_b), s->m,
                                    s->n, s->k, alpha, a, a_off, s->lda, b, b_off, s->ldb, beta,
                                    c, c_off, s->ldc, &r->queue, clt_replica_profile_event(r),
                                    r->gemm_temp);
  } else {
    /* Shapes whose kernels need no scratch (CLBlast's direct path). */
    rc = CLBlastSgemm(CLBlastLayoutRowMajor, tr(s->trans_a), tr(s->trans_b), s->m, s->n, s->k,
                      alpha, a, a_off, s->lda, b, b_off, s->ldb, beta, c, c_off, s->ldc,
                      &r->queue, clt_replica_profile_event(r));
  }
  if (rc == CLBlastSuccess && r->profile) {
    char name[48];
    snprintf(name, sizeof name, "gemm %zux%zux%zu%s%s", s->m, s->n, s->k, s->trans_a ? " At" : "",
             s->trans_b ? " Bt" : "");
    clt_replica_profile_commit(r, name);
  }
  if (rc != CLBlastSuccess) {
    return clt_fail(e, rc, "device %d (%s): CLBlast GEMM %zux%zux%zu%s%s: %s", r->device.index,
                    r->device.name, s->m, s->n, s->k, s->trans_a ? " A^T" : "",
                    s->trans_b ? " B^T" : "", clt_status_name(rc));
  }
  return CLT_OK;
}
