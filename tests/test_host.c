/* Host layer: device selection, profile, tuning table, program cache, errors. */
#include "common.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static void test_status_strings(void) {
  CU_ASSERT_STRING_EQUAL(clattn_status_string(CLATTN_SUCCESS), "CLATTN_SUCCESS");
  CU_ASSERT_STRING_EQUAL(clattn_status_string(CLATTN_OUT_OF_BOUNDS), "CLATTN_OUT_OF_BOUNDS");
  CU_ASSERT_STRING_EQUAL(clattn_status_string((clattn_status)99), "CLATTN_UNKNOWN_STATUS");
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("host", fixture_init, fixture_cleanup);
  CU_add_test(s, "status strings", test_status_strings);
  return run_suites();
}
