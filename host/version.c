/* clattn_version: the version this library was built as, from the header it
 * was compiled with (meson.build checks that the header's macros equal the
 * project version, so the string, the macros and clattn.pc agree). */
#include "clattn.h"

#define CLATTN_STR_(x) #x
#define CLATTN_STR(x) CLATTN_STR_(x)

const char *clattn_version(int *major, int *minor, int *patch) {
  if (major) *major = CLATTN_VERSION_MAJOR;
  if (minor) *minor = CLATTN_VERSION_MINOR;
  if (patch) *patch = CLATTN_VERSION_PATCH;
  return CLATTN_STR(CLATTN_VERSION_MAJOR) "." CLATTN_STR(CLATTN_VERSION_MINOR) "." CLATTN_STR(
      CLATTN_VERSION_PATCH);
}
