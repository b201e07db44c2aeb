/* Helpers shared by the merge suite's files: device views of logical dense
 * data in any layout, with everything outside the view poisoned. */
#ifndef CLATTN_TESTS_TEST_MERGE_H
#define CLATTN_TESTS_TEST_MERGE_H

#include "common.h"

#include <CUnit/CUnit.h>

/* Storage order of the logical axes (perm[0] outermost), the spacing of the
 * innermost storage axis, and elements before the view. */
typedef struct layout {
  int perm[4];
  int spread;
  int pad;
} layout;

extern const layout L_DENSE4, L_BHMD, L_DSTRIDE, L_DENSE3, L_LSE_T;

/* A view of logical dense `x` ([shape], NULL: every element `fill`) stored
 * as `ly` in a new buffer of `cl` (NULL: the fixture's) whose other
 * elements hold NaN. */
clattn_tensor view_make_in(cl_context cl, const double *x, int ndim, const int64_t *shape,
                           const layout *ly, clattn_dtype dt, double fill);
clattn_tensor view_make(const double *x, int ndim, const int64_t *shape, const layout *ly,
                        clattn_dtype dt, double fill);
/* Reads a view back into logical dense `x`; fails the test if an element
 * outside the view lost its NaN (something wrote past the view). */
void view_read(const clattn_tensor *t, double *x, const char *label);
void view_release(clattn_tensor *t);

/* Random partial states: o ~ N(0, 1) rounded to dt, lse ~ U(-3, 3) in f32. */
double *rand_dtype(size_t n, clattn_dtype dt);

void add_merge_multi_tests(CU_pSuite s);
void add_merge_error_tests(CU_pSuite s);

#endif
