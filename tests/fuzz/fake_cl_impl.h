/* The fake OpenCL runtime's objects and the helpers its two files share
 * (fake_cl.c: objects, the command log, platforms to buffers; fake_cl_exec.c:
 * programs, kernels, events, enqueues, CLBlast). Not part of fake_cl.h:
 * the harness sees only handles. */
#ifndef FAKE_CL_IMPL_H
#define FAKE_CL_IMPL_H

#include "fake_cl.h"

#ifndef CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
#define CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#endif

enum kind { K_PLATFORM = 1, K_DEVICE, K_CONTEXT, K_QUEUE, K_MEM, K_PROGRAM, K_KERNEL, K_EVENT };
#define MAGIC 0xC1A77E57u

typedef struct obj {
  uint32_t magic;
  enum kind kind;
  int refs;
  bool harness; /* made in the harness phase */
  bool counted; /* made by the library during the current call */
  struct obj *next;
} obj;

struct _cl_platform_id {
  obj o;
  int profile;
};
struct _cl_device_id {
  obj o;
  int profile;
  cl_platform_id platform;
};
struct _cl_context {
  obj o;
  cl_uint ndev;
  cl_device_id dev[4];
};
struct _cl_command_queue {
  obj o;
  cl_context ctx;
  cl_device_id dev;
  cl_command_queue_properties props;
  int last;          /* the call's last node on this queue (-1 none) */
  int barrier;       /* out-of-order: the last barrier's node (-1 none) */
};
struct _cl_mem {
  obj o;
  cl_context ctx;
  size_t size;
  cl_mem_flags flags;
};
typedef struct kinfo {
  char name[64];
  long reqd; /* reqd_work_group_size(X, 1, 1), 0 if none or unknown */
} kinfo;
struct _cl_program {
  obj o;
  cl_context ctx;
  char *source; /* until built */
  char *options;
  bool built;
  int nk;
  kinfo k[16];
};
#define MAX_ARGS 512
struct _cl_kernel {
  obj o;
  cl_program prog;
  kinfo info;
  int nset; /* one past the highest argument set */
  bool set[MAX_ARGS];
  fake_arg arg[MAX_ARGS];
};
struct _cl_event {
  obj o;
  cl_context ctx;
  cl_command_queue queue; /* NULL for a user event */
  int node;
  cl_int status;
};

/* An API call's handle check: NULL or not a live object of kind k returns err. */
#define CHECK(h, k, err)                                                 \
  do {                                                                   \
    if (!(h)) return (err);                                              \
    if (!fk_valid((h), (k), __func__, #h)) return (err);                 \
  } while (0)
/* A clGet*Info answer of a value, or of a string */
#define INFO(x) fk_copy_info(param_value_size, param_value, param_value_size_ret, &(x), sizeof(x))
#define INFO_STR(s) fk_copy_info(param_value_size, param_value, param_value_size_ret, (s), strlen(s) + 1)

/* fake_cl.c's, for fake_cl_exec.c */
extern fake_cmd *fk_cmds; /* the call's command log */
extern int fk_ncmds, fk_cap_cmds;
extern long fk_seq; /* the clock of the graph's nodes */
extern int fk_live_programs;
void *fk_new_obj(size_t size, enum kind k);
bool fk_known_has(const void *p);
bool fk_valid(const void *h, enum kind k, const char *fn, const char *what);
cl_int fk_retain(void *h, enum kind k, const char *fn);
cl_int fk_release(void *h, enum kind k, const char *fn);
cl_int fk_misuse(cl_int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cl_int fk_copy_info(size_t size, void *value, size_t *ret, const void *src, size_t n);
void *fk_grow(void *p, int *cap, int need, size_t elem);
int fk_new_node(void);
void fk_add_dep(int n, int d);
void fk_mark_done(int n, long t);
bool fk_ctx_has(cl_context c, cl_device_id d);

#endif
