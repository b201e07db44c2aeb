/*
 * The fuzzer's shared state (fuzz_ops.c: input decoding, the oracle;
 * ops.c: one builder and one contract per operation).
 *
 * An input is a header (operation, device profile, call flags), a few
 * "problem" bytes the operation's builder turns into a valid call (every
 * tensor contiguous in a buffer of its own, sized to fit), then a list of
 * edits, each changing one field: a tensor's buffer, offset, dtype, ndim,
 * a shape or stride entry, its buffer's size, or an int/float parameter.
 * So a short input is a plausible call and the fuzzer works around it.
 * The format is in tests/fuzz/README.md; tests/fuzz/gen_corpus.py writes the seeds.
 */
#ifndef FUZZ_HARNESS_H
#define FUZZ_HARNESS_H

#include "fake_cl.h"
#include "clattn.h"

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------ input bytes */

typedef struct rd {
  const uint8_t *p;
  size_t n, i;
} rd;

static inline unsigned rd_u8(rd *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static inline bool rd_more(const rd *r) { return r->i < r->n; }

/* ------------------------------------------------------------------ the world */

/* Per profile, made once: context A over the profile's two devices, context
 * B over device 0; clattn contexts A/dev0, A/dev1, B/dev0; an in-order and
 * an out-of-order queue for each. */
enum { CX_A0 = 0, CX_A1 = 1, CX_B = 2, NCX = 3 };
typedef struct world {
  cl_context cl[2];
  clattn_context *cx[NCX];
  cl_command_queue q[NCX][2];
} world;

/* ------------------------------------------------------------------ tensors and buffers */

enum role { R_IN = 1, R_OUT, R_WS, R_FLAG };

#define MAX_SLOTS 320
#define MAX_BUFS 384
#define MAX_SCALARS 48

typedef struct slot {
  char name[48];
  clattn_tensor *t;
  int buf;  /* buffer index, -1: absent */
  int own;  /* the buffer its canonical view was made in (-1: none) */
  int role;
  int cx;   /* the clattn context it belongs to (CX_*) */
  bool ws_auto; /* a workspace sized by the harness from the library's answer */
  bool edited;
  /* the contract, filled after a successful call */
  bool relevant;
  int sndim;
  int64_t sshape[CLATTN_MAX_DIMS];
  unsigned dtypes;
  bool contig; /* the kernels read the last dimension contiguously */
  bool big_ok; /* a dimension may reach 2^31 (workspaces) */
  /* one of a run of views stacked at a constant spacing in one buffer (merge's
   * parts): its offset reaches the kernels as the run's first offset and the
   * spacing (in elements) */
  int run_base;
  int64_t run_spacing;
} slot;

typedef struct bufd {
  int cl;        /* context index into world.cl */
  uint64_t size;
  cl_mem mem;
} bufd;

typedef struct scalar {
  char name[48];
  int *i;
  float *f;
} scalar;

typedef struct state state;
enum { OP_PURE = 1, OP_NOCTX = 2 }; /* no queue, event or wait list; no context at all */
typedef struct opdesc {
  const char *name;
  int flags;
  /* reads the problem bytes, fills the params, registers slots and scalars */
  void (*build)(state *S, rd *r);
  /* after edits and buffers: sizes the auto workspaces (may call the library) */
  void (*prepare)(state *S);
  /* calls the library: the status */
  clattn_status (*call)(state *S);
  /* after success: fills the slots' contracts and checks the op's own rules */
  void (*contract)(state *S);
  /* after a failure: the op's own checks of it (may be NULL) */
  void (*failed)(state *S);
} opdesc;

struct state {
  const opdesc *op;
  int profile;
  world *w;
  int qcx;             /* the clattn context of the call (CX_*) */
  cl_command_queue queue;
  clattn_context *ctx;
  bool null_params;
  cl_uint num_wait;
  cl_event wait[2];
  bool bad_wait_list;  /* num_wait and wait_list disagree: must be refused */
  bool want_event;
  cl_event event;

  slot s[MAX_SLOTS];
  int ns;
  bufd b[MAX_BUFS];
  int nb;
  scalar sc[MAX_SCALARS];
  int nsc;
  int off_mode; /* offsets of the canonical tensors */

  void *params; /* the op's storage (ops.c) */
  /* results the contract uses */
  clattn_status st;
  bool in_call; /* the library is running (prepare and the call) */
  bool avoided; /* FUZZ_SKIP=avoid:...: the input hits a known defect, left out */
  size_t ws_bytes; int ws_splits; clattn_status ws_st; /* workspace-size answers */
  int64_t work;  /* output elements: non-zero means some kernel must run */
  int max_kernels;
};

/* ------------------------------------------------------------------ helpers for ops.c */

int add_slot(state *S, const char *name, clattn_tensor *t, int role, int cx);
/* Makes slot `i` a contiguous view (rows padded by `pad` elements when pad
 * > 0) of a new buffer of its own in its context, at the canonical offset. */
void canon(state *S, int i, clattn_dtype dt, int ndim, const int64_t *shape, int64_t pad);
/* The same with the strides of a permuted physical order: perm[k] is the
 * logical dimension stored k-th (outermost first). */
void canon_perm(state *S, int i, clattn_dtype dt, int ndim, const int64_t *shape,
                const int *perm, int64_t pad);
/* Slots sharing one buffer: places views one after another (each at its
 * canonical size, spaced by `gap` bytes) in a buffer of the first slot's. */
void stack_slots(state *S, const int *slots, int n, uint64_t gap);
/* An optional tensor made canonical, then left absent (an edit can give it back). */
void drop(state *S, int i);
void add_int(state *S, const char *name, int *v);
void add_float(state *S, const char *name, float *v);
/* The buffer of slot i resized to hold its view exactly (+ slack bytes). */
void fit_buffer(state *S, int i, uint64_t slack);

/* The contract: slot i is relevant with this semantic shape and dtypes. */
void expect(state *S, int i, unsigned dtypes, int ndim, const int64_t *shape);
/* A rule of the op's contract, checked after the library accepted the call. */
void rule(state *S, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool present(const state *S, int i);
/* Whether $FUZZ_SKIP asks to leave out inputs of a known defect ("avoid:what"). */
bool avoid(const char *what);
int64_t dtype_bytes(clattn_dtype dt);
cl_context slot_cl(const state *S, int i);

/* Number of recorded kernels (NDRANGE commands) named `name` (NULL: all). */
int count_kernels(const char *name);
/* The workspace a call needs at least (`need` bytes from the view's offset):
 * a caller's workspace slot `i` must hold it; without one, a buffer the
 * library created must. */
void check_workspace(state *S, int i, unsigned __int128 need, const char *why);

/* int64 arithmetic of the contracts that cannot overflow (saturates). */
static inline int64_t sat_mul(int64_t a, int64_t b) {
  const __int128 p = (__int128)a * b;
  return p > INT64_MAX ? INT64_MAX : p < INT64_MIN ? INT64_MIN : (int64_t)p;
}
static inline int64_t sat_add(int64_t a, int64_t b) {
  const __int128 p = (__int128)a + b;
  return p > INT64_MAX ? INT64_MAX : p < INT64_MIN ? INT64_MIN : (int64_t)p;
}

extern const opdesc ops[];
extern const int nops;

#define F32 CLATTN_DT(CLATTN_F32)
#define FLOATS (CLATTN_DT(CLATTN_F32) | CLATTN_DT(CLATTN_F16) | CLATTN_DT(CLATTN_BF16))
#define I32 CLATTN_DT(CLATTN_I32)
#define CLATTN_DT(d) (1u << (d))

#endif /* FUZZ_HARNESS_H */
