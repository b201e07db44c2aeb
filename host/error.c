/* Status names and the thread-local error message. */
#include "internal.h"

#include <stdio.h>

#if defined(_MSC_VER)
#define CLATTN_THREAD_LOCAL __declspec(thread)
#else
#define CLATTN_THREAD_LOCAL _Thread_local
#endif

/* Large enough for a kernel build log excerpt. */
static CLATTN_THREAD_LOCAL char last_error[16384];

const char *clattn_status_string(clattn_status status) {
  switch (status) {
  case CLATTN_SUCCESS: return "CLATTN_SUCCESS";
  case CLATTN_INVALID_ARGUMENT: return "CLATTN_INVALID_ARGUMENT";
  case CLATTN_INVALID_SHAPE: return "CLATTN_INVALID_SHAPE";
  case CLATTN_UNSUPPORTED: return "CLATTN_UNSUPPORTED";
  case CLATTN_OUT_OF_BOUNDS: return "CLATTN_OUT_OF_BOUNDS";
  case CLATTN_OPENCL_ERROR: return "CLATTN_OPENCL_ERROR";
  case CLATTN_BUILD_ERROR: return "CLATTN_BUILD_ERROR";
  case CLATTN_OUT_OF_MEMORY: return "CLATTN_OUT_OF_MEMORY";
  case CLATTN_NO_DEVICE: return "CLATTN_NO_DEVICE";
  }
  return "CLATTN_UNKNOWN_STATUS";
}

const char *clattn_last_error(void) { return last_error; }

void clattn_clear_error(void) { last_error[0] = '\0'; }

clattn_status clattn_fail(clattn_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

const char *clattn_cl_error_name(cl_int err) {
  switch (err) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
    E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
    E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
    E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
    E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
    E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS) E(CL_INVALID_LINKER_OPTIONS)
    E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
  }
  return "CL_UNKNOWN_ERROR";
}

clattn_status clattn_fail_cl(cl_int err, const char *call, const char *what) {
  clattn_status s = (err == CL_OUT_OF_HOST_MEMORY || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                     err == CL_OUT_OF_RESOURCES)
                        ? CLATTN_OUT_OF_MEMORY
                        : CLATTN_OPENCL_ERROR;
  return clattn_fail(s, "%s(%s) failed: %s (%d)", call, what ? what : "", clattn_cl_error_name(err),
                     (int)err);
}
