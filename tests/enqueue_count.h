/* The number of OpenCL commands enqueued so far by this process (the test
 * helpers' own reads included): see enqueue_count.c. */
#ifndef CLATTN_TESTS_ENQUEUE_COUNT_H
#define CLATTN_TESTS_ENQUEUE_COUNT_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

long enqueue_count(void);

#endif
