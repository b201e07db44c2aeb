/* Test helpers shared by every suite: the OpenCL fixture, host buffers in
 * any dtype, random data, comparisons with named tolerances. */
#ifndef CLATTN_TESTS_COMMON_H
#define CLATTN_TESTS_COMMON_H

#include "clattn.h"

#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The device every suite runs on ($CLATTN_DEVICE, else the default). A
 * missing device fails the suite: CI must not pass by skipping. */
typedef struct fixture {
  clattn_context *ctx;
  cl_context cl;
  cl_device_id dev;
  cl_command_queue queue;
} fixture;

extern fixture fx;
int fixture_init(void);    /* CUnit suite init: 0 on success */
int fixture_cleanup(void); /* CUnit suite cleanup */

/* ---------------------------------------------------------------- host conversions */
/* x rounded through dtype (what storing then loading gives). */
double round_dtype(double x, clattn_dtype dt);

/* ---------------------------------------------------------------- random */
void rng_seed(uint64_t seed);
uint64_t rng_u64(void);
double rng_uniform(double lo, double hi); /* [lo, hi) */
int rng_int(int lo, int hi);              /* [lo, hi] */
double rng_normal(void);
/* n random normal values times scale, rounded through dt so host and device see the same numbers (malloc). */
double *rand_tensor(size_t n, clattn_dtype dt, double scale);

/* ---------------------------------------------------------------- device buffers */
/* Every buffer below is a sub-buffer of exactly the asked size between guard
 * bytes of a larger one (ggml's sentinels): buf_release checks that nothing
 * was written outside it, and fixture_cleanup checks those still held. */
/* A guarded buffer of `bytes` on context cl, initialised from host (NULL: guard pattern). */
cl_mem buf_in(cl_context cl, size_t bytes, const void *host);
/* Checks the guards of every guarded buffer alive (fails the test on a change). */
void guards_check_all(void);
/* A buffer of n doubles' worth of `dt` elements, written from `host` (rounded to dt). */
cl_mem buf_from(const double *host, size_t n, clattn_dtype dt);
cl_mem buf_from_i32(const int32_t *host, size_t n);
/* Optional tensors in the tests are views VIEW_LEAD elements into their
 * buffers, behind values that would break the result were the offset
 * ignored: buf_from_i32_after puts VIEW_LEAD copies of `junk` before host's n
 * values (the view: offset VIEW_LEAD * 4 bytes). */
#define VIEW_LEAD 3
cl_mem buf_from_i32_after(const int32_t *host, size_t n, int32_t junk);
cl_mem buf_zeros(size_t bytes);
/* Buffer filled with a NaN-like pattern (0xFF bytes), to catch unwritten outputs. */
cl_mem buf_poison(size_t bytes);
/* Reads n elements of dt at element offset `off` into doubles. */
void buf_read(cl_mem m, size_t off, size_t n, clattn_dtype dt, double *host);
void buf_read_i32(cl_mem m, size_t n, int32_t *host);
void buf_release(cl_mem *m);
/* Writes doubles to host bytes of dtype dt (f32/f16/bf16/f64). */
void host_pack(const double *src, size_t n, clattn_dtype dt, void *dst);
void host_unpack(const void *src, size_t n, clattn_dtype dt, double *dst);
/* Runs clFinish on the fixture queue and fails the test on error. */
void finish(void);

/* ---------------------------------------------------------------- checks */
/* Per-dtype tolerance of an attention output: the rounding of q/k/v and o
 * storage (f16: 2^-11 relative, bf16: 2^-8) times a small growth factor,
 * relative to the output's scale. f32 stores: float accumulation error only. */
double tol_for(clattn_dtype dt);

/* Compares got[i] with want[i] for i < n: |got - want| <= atol + rtol * |want|,
 * with NaN only where want is NaN and inf only where want is the same inf.
 * Prints the first failure with `label`, returns the max abs error (or +inf). */
double check_close(const char *label, const double *got, const double *want, size_t n, double atol,
                   double rtol);

/* Asserts a status and prints the message for failures. */
#define CHECK_OK(expr)                                                                       \
  do {                                                                                       \
    clattn_status s_ = (expr);                                                               \
    if (s_ != CLATTN_SUCCESS)                                                                \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,                   \
              clattn_status_string(s_), clattn_last_error());                                 \
    CU_ASSERT_EQUAL_FATAL(s_, CLATTN_SUCCESS);                                               \
  } while (0)

/* Asserts a failure status and that the message mentions `needle`. */
#define CHECK_FAILS(expr, status, needle)                                                    \
  do {                                                                                       \
    clattn_status s_ = (expr);                                                               \
    if (s_ != (status) || !strstr(clattn_last_error(), (needle)))                           \
      fprintf(stderr, "%s:%d: %s -> %s \"%s\", expected %s mentioning \"%s\"\n", __FILE__,  \
              __LINE__, #expr, clattn_status_string(s_), clattn_last_error(),                \
              clattn_status_string(status), needle);                                          \
    CU_ASSERT_EQUAL(s_, (status));                                                           \
    CU_ASSERT_PTR_NOT_NULL(strstr(clattn_last_error(), (needle)));                           \
  } while (0)

/* Runs the registered suites, returns the process exit code. */
int run_suites(void);

/* Case table helper: name a case from its parameters. */
#define CASE_NAME(buf, ...) snprintf((buf), sizeof(buf), __VA_ARGS__)

#endif
