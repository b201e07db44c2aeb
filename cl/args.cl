/* The layout probe of the kernel argument structs (args.clh): writes each
 * struct's size, then its fields' offsets, in the order of
 * CLATTN_ARG_STRUCTS, as this device's compiler lays them out. test_host
 * compares them with the host's sizeof and offsetof. */
#include "args.clh"

#define PROBE_FIELD(t, name) out[n++] = (int)((__private char *)&s.name - (__private char *)&s);
#define PROBE(name, FIELDS)                                                                      \
  {                                                                                              \
    name s;                                                                                      \
    out[n++] = (int)sizeof(name);                                                                \
    FIELDS(PROBE_FIELD)                                                                          \
  }

__kernel void clattn_args_layout(__global int *out) {
  if (get_global_id(0) != 0) return;
  int n = 0;
  CLATTN_ARG_STRUCTS(PROBE)
}
