#define CLT_STATUS_IMPL /* the definitions below, not status.h's analyzer macro */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int clt_fail(clt_err *e, int code, const char *fmt, ...) {
  if (!e) return code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  e->code = code;
  return code;
}

int clt_wrap(clt_err *e, const char *fmt, ...) {
  if (!e) return CLT_ERR_INTERNAL;
  char prefix[256], old[sizeof e->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, e->msg, sizeof old);
  snprintf(e->msg, sizeof e->msg, "%s: %.*s", prefix, (int)(sizeof e->msg - sizeof prefix - 4),
           old);
  return e->code;
}

const char *clt_status_name(int code) {
  switch (code) {
    /* A table, two entries a line. */
    /* clang-format off */
#define N(c, s) case c: return s;
    N(0, "CL_SUCCESS")
    N(-1, "CL_DEVICE_NOT_FOUND") N(-2, "CL_DEVICE_NOT_AVAILABLE")
    N(-3, "CL_COMPILER_NOT_AVAILABLE") N(-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE")
    N(-5, "CL_OUT_OF_RESOURCES") N(-6, "CL_OUT_OF_HOST_MEMORY")
    N(-7, "CL_PROFILING_INFO_NOT_AVAILABLE") N(-8, "CL_MEM_COPY_OVERLAP")
    N(-9, "CL_IMAGE_FORMAT_MISMATCH") N(-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED")
    N(-11, "CL_BUILD_PROGRAM_FAILURE") N(-12, "CL_MAP_FAILURE")
    N(-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET")
    N(-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST")
    N(-15, "CL_COMPILE_PROGRAM_FAILURE") N(-16, "CL_LINKER_NOT_AVAILABLE")
    N(-17, "CL_LINK_PROGRAM_FAILURE") N(-18, "CL_DEVICE_PARTITION_FAILED")
    N(-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE")
    N(-30, "CL_INVALID_VALUE") N(-31, "CL_INVALID_DEVICE_TYPE")
    N(-32, "CL_INVALID_PLATFORM") N(-33, "CL_INVALID_DEVICE")
    N(-34, "CL_INVALID_CONTEXT") N(-35, "CL_INVALID_QUEUE_PROPERTIES")
    N(-36, "CL_INVALID_COMMAND_QUEUE") N(-37, "CL_INVALID_HOST_PTR")
    N(-38, "CL_INVALID_MEM_OBJECT") N(-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR")
    N(-40, "CL_INVALID_IMAGE_SIZE") N(-41, "CL_INVALID_SAMPLER")
    N(-42, "CL_INVALID_BINARY") N(-43, "CL_INVALID_BUILD_OPTIONS")
    N(-44, "CL_INVALID_PROGRAM") N(-45, "CL_INVALID_PROGRAM_EXECUTABLE")
    N(-46, "CL_INVALID_KERNEL_NAME") N(-47, "CL_INVALID_KERNEL_DEFINITION")
    N(-48, "CL_INVALID_KERNEL") N(-49, "CL_INVALID_ARG_INDEX")
    N(-50, "CL_INVALID_ARG_VALUE") N(-51, "CL_INVALID_ARG_SIZE")
    N(-52, "CL_INVALID_KERNEL_ARGS") N(-53, "CL_INVALID_WORK_DIMENSION")
    N(-54, "CL_INVALID_WORK_GROUP_SIZE") N(-55, "CL_INVALID_WORK_ITEM_SIZE")
    N(-56, "CL_INVALID_GLOBAL_OFFSET") N(-57, "CL_INVALID_EVENT_WAIT_LIST")
    N(-58, "CL_INVALID_EVENT") N(-59, "CL_INVALID_OPERATION")
    N(-60, "CL_INVALID_GL_OBJECT") N(-61, "CL_INVALID_BUFFER_SIZE")
    N(-62, "CL_INVALID_MIP_LEVEL") N(-63, "CL_INVALID_GLOBAL_WORK_SIZE")
    N(-64, "CL_INVALID_PROPERTY") N(-65, "CL_INVALID_IMAGE_DESCRIPTOR")
    N(-66, "CL_INVALID_COMPILER_OPTIONS") N(-67, "CL_INVALID_LINKER_OPTIONS")
    N(-68, "CL_INVALID_DEVICE_PARTITION_COUNT")
    N(-1001, "CL_PLATFORM_NOT_FOUND_KHR")
    N(-1024, "CLBlastNotImplemented") N(-1022, "CLBlastInvalidMatrixA")
    N(-1021, "CLBlastInvalidMatrixB") N(-1020, "CLBlastInvalidMatrixC")
    N(-1019, "CLBlastInvalidVectorX") N(-1018, "CLBlastInvalidVectorY")
    N(-1017, "CLBlastInvalidDimension") N(-1016, "CLBlastInvalidLeadDimA")
    N(-1015, "CLBlastInvalidLeadDimB") N(-1014, "CLBlastInvalidLeadDimC")
    N(-1013, "CLBlastInvalidIncrementX") N(-1012, "CLBlastInvalidIncrementY")
    N(-1011, "CLBlastInsufficientMemoryA") N(-1010, "CLBlastInsufficientMemoryB")
    N(-1009, "CLBlastInsufficientMemoryC") N(-1008, "CLBlastInsufficientMemoryX")
    N(-1007, "CLBlastInsufficientMemoryY")
    N(-2050, "CLBlastInsufficientMemoryTemp") N(-2049, "CLBlastInvalidBatchCount")
    N(-2048, "CLBlastInvalidOverrideKernel") N(-2047, "CLBlastMissingOverrideParameter")
    N(-2046, "CLBlastInvalidLocalMemUsage") N(-2045, "CLBlastNoHalfPrecision")
    N(-2044, "CLBlastNoDoublePrecision") N(-2043, "CLBlastInvalidVectorScalar")
    N(-2042, "CLBlastInsufficientMemoryScalar") N(-2041, "CLBlastDatabaseError")
    N(-2040, "CLBlastUnknownError") N(-2039, "CLBlastUnexpectedError")
    N(CLT_ERR_ARG, "CLT_ERR_ARG") N(CLT_ERR_IO, "CLT_ERR_IO")
    N(CLT_ERR_FORMAT, "CLT_ERR_FORMAT") N(CLT_ERR_NOMEM, "CLT_ERR_NOMEM")
    N(CLT_ERR_DEVICE, "CLT_ERR_DEVICE") N(CLT_ERR_NUMERIC, "CLT_ERR_NUMERIC")
    N(CLT_ERR_INTERNAL, "CLT_ERR_INTERNAL") N(CLT_ERR_PEER, "CLT_ERR_PEER")
    N(CLT_ERR_STOPPED, "CLT_ERR_STOPPED")
#undef N
    default: return "unknown status";
  }
  /* clang-format on */
}
