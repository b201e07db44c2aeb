/* Parts of a suite, so that meson runs them side by side: `test_<suite> +A
 * +B` keeps the tests whose names contain A or B, `test_<suite> -A -B` those
 * whose names contain neither. tests/meson.build gives a suite's +parts and
 * its one -part from the same list of words, so each test runs in exactly one
 * part. No argument: every test (CLATTN_TEST_ONLY still applies on top). */
#ifndef CLATTN_TESTS_PART_H
#define CLATTN_TESTS_PART_H

#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* After the tests are registered; false (and a message) for a malformed
 * list or a word that names no test (a renamed test would otherwise drop out
 * of every +part and silently into the -part). */
static bool select_part(int argc, char **argv) {
  if (argc < 2) return true;
  const char sign = argv[1][0];
  for (int i = 1; i < argc; i++) {
    bool used = false;
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
      for (CU_pTest t = s->pTest; t; t = t->pNext) used |= strstr(t->pName, argv[i] + 1) != NULL;
    if ((argv[i][0] != '+' && argv[i][0] != '-') || argv[i][0] != sign || !argv[i][1] || !used) {
      fprintf(stderr, "part: \"%s\" is not +WORD or -WORD (all of one sign) naming a test\n", argv[i]);
      return false;
    }
  }
  CU_set_fail_on_inactive(CU_FALSE); /* the other parts' tests are not failures */
  for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
    for (CU_pTest t = s->pTest; t; t = t->pNext) {
      bool named = false;
      for (int i = 1; i < argc; i++) named |= strstr(t->pName, argv[i] + 1) != NULL;
      CU_set_test_active(t, named == (sign == '+') ? CU_TRUE : CU_FALSE);
    }
  return true;
}

#endif
