/* A stand-in for CANN's aicpu_api.h: only the qualifiers of an AICPU kernel, so that
 * aicpu/expand.aicpu compiles with the host C++ compiler (tests/ascend). */
#ifndef WSP_TEST_AICPU_API_H
#define WSP_TEST_AICPU_API_H
#define __global__
#define __aicpu__
#endif
