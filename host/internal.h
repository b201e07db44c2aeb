/*
 * The library's internal interface between the operations (lib/) and the
 * host layer (host/): errors, tensor checks, device profile and tuning
 * table, kernel programs and launches.
 */
#ifndef CLATTN_INTERNAL_H
#define CLATTN_INTERNAL_H

#include "clattn.h"

#include "args.clh" /* the kernel argument structs, one definition with the kernels' */

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#if defined(__GNUC__)
#define CLATTN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLATTN_PRINTF(a, b)
#endif

/* The smallest power of two >= x (1 for x <= 1). */
static inline int clattn_pow2_at_least(int x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

/* ------------------------------------------------------------------ errors (error.c) */

/* Sets the thread's message and returns status, so callers can write
 * `return clattn_fail(CLATTN_INVALID_SHAPE, "q.shape[3] (%d) ...", d);` */
clattn_status clattn_fail(clattn_status status, const char *fmt, ...) CLATTN_PRINTF(2, 3);
/* An OpenCL call failed: "clEnqueueNDRangeKernel(clattn_decode_partial) failed: CL_INVALID_WORK_GROUP_SIZE (-54)". */
clattn_status clattn_fail_cl(cl_int err, const char *call, const char *what);
const char *clattn_cl_error_name(cl_int err);
void clattn_clear_error(void);

/* Propagate a non-success status. */
#define CLATTN_TRY(expr)                                                                    \
  do {                                                                                      \
    clattn_status clattn_try_s_ = (expr);                                                   \
    if (clattn_try_s_ != CLATTN_SUCCESS) return clattn_try_s_;                              \
  } while (0)

/* ------------------------------------------------------------------ tensors (tensor.c) */

static inline bool clattn_present(const clattn_tensor *t) { return t->buf != NULL; }

/* The largest size of any dimension: the kernels index dimensions in int. */
#define CLATTN_MAX_DIM INT32_MAX

/* Checks that `t` (named `name` in messages) is present, has `ndim` dims, a
 * dtype in `dtype_mask` (bit 1 << dtype), shapes in [0, CLATTN_MAX_DIM],
 * non-negative strides, an offset aligned to its element size, a buffer of
 * ctx's cl_context (ctx NULL: any), and that every element it can reach lies
 * inside its buffer (all of it in checked 64-bit arithmetic). */
clattn_status clattn_check_tensor(const clattn_context *ctx, const clattn_tensor *t,
                                  const char *name, int ndim, unsigned dtype_mask);
/* t->shape[axis] must equal `expect` (`what` names where expect comes from). */
clattn_status clattn_check_dim(const clattn_tensor *t, const char *name, int axis,
                               int64_t expect, const char *what);
/* Elements along axis lie next to each other (stride 1; any stride when the
 * axis has one element): the kernels read it so. why: said in the message. */
clattn_status clattn_check_unit_stride(const clattn_tensor *t, const char *name, int axis,
                                       const char *why);
/* v in [lo, hi], else CLATTN_INVALID_ARGUMENT "what is v, outside [lo, hi]". */
clattn_status clattn_check_range(int64_t v, int64_t lo, int64_t hi, const char *what);
/* Element offset of the view (offset / element size). */
int64_t clattn_elem_offset(const clattn_tensor *t);
/* Bytes [first, end) of its buffer that t can reach (first == end when a dim
 * is 0); false when the arithmetic overflows (never for a checked tensor). */
bool clattn_tensor_bytes(const clattn_tensor *t, uint64_t *first, uint64_t *end);
/* Bytes from the first to one past the last reachable byte, from the offset
 * (UINT64_MAX when it overflows). */
uint64_t clattn_tensor_extent_bytes(const clattn_tensor *t);

/* Aliasing rules (include/clattn.h, "Aliasing"). An output (checked) must
 * not reach one element through two index tuples (no zero or overlapping
 * strides), and must share no byte with another output or an input
 * (sub-buffers compare through their parent, USE_HOST_PTR buffers through
 * their host memory). Absent or NULL entries are skipped. */
typedef struct clattn_named {
  const clattn_tensor *t;
  const char *name;
} clattn_named;
clattn_status clattn_check_output(const clattn_tensor *t, const char *name);
clattn_status clattn_check_apart(const clattn_tensor *a, const char *a_name,
                                 const clattn_tensor *b, const char *b_name);
clattn_status clattn_check_aliasing(const clattn_named *outs, int nout, const clattn_named *ins,
                                    int nin);
/* The same view: buffer, offset, dtype, shape and the strides that step. */
bool clattn_same_view(const clattn_tensor *a, const clattn_tensor *b);

/* maybe_error_flag: absent, or [1] i32 of ctx. */
clattn_status clattn_check_error_flag(const clattn_context *ctx, const clattn_tensor *flag);
/* A caller's workspace: [n] f32, contiguous, at least `bytes` from its offset;
 * `sizer` names the function that tells the size. */
clattn_status clattn_check_workspace(const clattn_context *ctx, const clattn_tensor *w,
                                     size_t bytes, const char *sizer);
/* The workspace of a call: the caller's maybe_workspace (checked against
 * `bytes`) or a temporary buffer of `bytes`; off is in f32 elements. */
typedef struct clattn_workspace {
  cl_mem buf;
  int64_t off;
  bool owned;
} clattn_workspace;
clattn_status clattn_workspace_acquire(clattn_context *ctx, const clattn_tensor *maybe, size_t bytes,
                                       const char *sizer, clattn_workspace *out);
/* Releases a temporary workspace (OpenCL frees it once the commands using it finish). */
void clattn_workspace_release(clattn_workspace *w);

#define CLATTN_DT(d) (1u << (d))
#define CLATTN_FLOAT_DTYPES (CLATTN_DT(CLATTN_F32) | CLATTN_DT(CLATTN_F16) | CLATTN_DT(CLATTN_BF16))

/* Kernel-side name of a dtype for -D options ("f32", "f16", "bf16", "f64"). */
const char *clattn_dtype_cl(clattn_dtype dtype);

/* ------------------------------------------------------------------ tuning (params.c) */

/* Per-device parameters of every kernel family: one list, from which the
 * struct, the override parser, the range checks and the printer come.
 * X(name, lo, hi, pow2, meaning): values in [lo, hi]; pow2: a power of two
 * (or 0 where lo is 0). Correctness never depends on a value in range: only
 * speed does. */
#define CLATTN_TUNING_PARAMS(X)                                                                  \
  /* decode (split-K partial and reduce) */                                                      \
  /* (groups of at most 256: the decode kernels' registers cap them there on sm_90) */       \
  X(decode_wg, 8, 256, 1, "portable decode: work-items per group = keys per tile")               \
  X(decode_splits_per_cu, 1, 64, 0, "work-groups per compute unit the split count aims at")      \
  X(decode_min_keys_per_split, 1, 1 << 20, 0, "fewest keys per split")                           \
  X(decode_max_splits, 1, 65536, 0, "most splits the planner chooses")                           \
  X(decode_lane_keys, 0, 1, 0, "scores with a key's lanes reading it together (cl/lanes.clh)")   \
  X(decode_serial, 0, 1, 0, "the serial form: a work-item per split walks whole token rows (CPUs)") \
  X(decode_kstage, 0, 1, 0, "float K tiles staged in local memory with coalesced loads")         \
  X(decode_kstage_quant, 0, 1, 0, "the same for int4 / fp8 K")                                    \
  X(decode_kq_wide, 0, 2, 0, "portable form, int4 / fp8 K: the score pass reads a row 16 bytes at a time (1: rows on 16 bytes; 2 also rows at any word where the buffer ends on 16 bytes)") \
  X(decode_quant_value_rows, 0, 32, 0, "portable form, int4 / fp8 V: rows in flight per work-item as raw words (0: 8)") \
  X(decode_port_roles, 0, 1, 0, "portable form: the score and value passes by the group's two halves, a tile apart, their loads in flight together (where neither lanes nor staging apply)") \
  X(decode_port_kpre, 0, 1, 0, "portable form: each work-item's K row of the next tile loaded during this tile's values (16-byte aligned float rows, or quantized rows read 16 bytes at a time; not with the halves, lanes or staging)") \
  X(decode_port_waves, 0, 16, 0, "portable form: the fewest warps / wavefronts per SIMD (an NVIDIA SM's quarter) its registers must allow, for more groups per unit (NVIDIA: a PTX register cap; AMD: amdgpu_waves_per_eu; elsewhere none; 0: the compiler's choice)") \
  X(decode_mma, 0, 1, 0, "the tensor-core form where the profile and shape allow")               \
  X(decode_mma_splits_per_cu, 0, 64, 0, "its split target (0: decode_splits_per_cu)")            \
  X(decode_mma_warps_per_cu, 0, 64, 0, "its warps a unit holds at 8 x 128 accumulators a warp: splits fill them once (0: the target above)") \
  X(decode_mma_min_keys, 0, 1 << 20, 0, "its fewest keys per split (0: decode_min_keys_per_split)") \
  X(decode_mma_blocks, 0, 4, 0, "its 16-key blocks in flight per warp (0: 1)")                    \
  X(decode_mma_wg, 0, 256, 1, "tensor cores, float K/V: work-items per group (0: decode_wg)")   \
  X(decode_mma_int4_wg, 0, 1024, 1, "int4 on tensor cores: work-items per group (0: decode_wg)")  \
  X(decode_mma_int4_stages, 0, 6, 0, "int4: a ring of this many blocks per warp (0: none)")       \
  X(decode_mma_int4_heads, 0, 8, 1, "int4 token rows: up to this many KV heads per group (0: off)") \
  X(decode_mma_int4_groups_per_cu, 0, 16, 0, "token rows: groups per compute unit (0: the split target)") \
  X(decode_mma_int4_whole, 0, 1, 0, "token rows: one group of all a token's heads, blocks as they lie") \
  X(decode_mma_whole_min_keys, 0, 1 << 20, 0, "whole token rows: fewest keys per span or split (0: decode_mma_min_keys)") \
  X(decode_mma_fp8_wg, 0, 1024, 1, "fp8 on tensor cores: work-items per group (0: decode_wg)")    \
  X(decode_mma_fp8_stages, 0, 6, 0, "fp8: a ring of this many blocks per warp (0: none)")         \
  X(decode_merge_last, 0, 4096, 0, "most splits times query rows (Mq) a row block's last work-group merges: one launch (0: never)") \
  X(decode_merge_last_max, 0, 1, 0, "that merge's tickets first raised to the call's tag by a 64-bit atom_max (devices with cl_khr_int64_extended_atomics; 0: the compare-exchange loop alone)") \
  X(decode_mma_small_wg, 0, 256, 1, "tensor cores, float K/V, groups <= units / 8: work-items per group (0: off)") \
  X(decode_mma_small_blocks, 0, 4, 0, "that form's 16-key blocks in flight per warp where groups <= units / 8, at up to 8 x 128 accumulators a warp (0: decode_mma_blocks)") \
  X(decode_mma_small_short, 0, 1, 0, "that form also where short keys leave 4-warp groups short of the units, one group per unit") \
  X(decode_mma_wide_wg, 0, 256, 1, "tensor cores, float K/V, a warp's accumulators over 8 x 128 (D > 128 padded, 16 rows) or D padded in registers: work-items per group (0: decode_mma_wg)") \
  /* merge */                                                                                    \
  X(merge_wg, 1, 1024, 1, "merge: work-items per group")                                         \
  /* rerope (forward / backward) */                                                             \
  X(rerope_block_m, 1, 256, 0, "portable ReRoPE: query rows per tile")                           \
  X(rerope_block_n, 1, 256, 0, "portable ReRoPE: keys per tile")                                 \
  X(rerope_wg, 1, 1024, 1, "ReRoPE: work-items per group")                                       \
  X(rerope_use_mma, 0, 1, 0, "ReRoPE on tensor cores where the profile allows")                  \
  X(rerope_stages, 0, 4, 0, "tensor-core forward: key tiles in the ring (>= 2; 0: 2)")          \
  X(rerope_warp_blocks, 0, 2, 0, "tensor-core forward: 16-row query blocks per warp (0: 1)")      \
  X(rerope_mma_block_n, 0, 64, 1, "tensor-core forward: keys per tile (32 or 64; 0: 64)")        \
  X(rerope_wgmma, 0, 2, 0, "tensor-core forward: warpgroup MMA (0: on sm_90 up to D = 128; 1 never; 2 also through the emulation)") \
  X(rerope_wgmma_wg, 0, 256, 1, "warpgroup MMA forward: work-items per group, 128 per 64 query rows (0: 256)") \
  X(rerope_wgmma_block_n, 0, 128, 1, "warpgroup MMA forward: keys per tile (0: 64 where the ring's tiles fit, else 32)") \
  X(rerope_bwd_cols, 0, 256, 0, "tensor-core backward, D > 64: most gradient columns per work-group (0: all)") \
  X(rerope_bwd_phases, 0, 1, 0, "tensor-core backward: 0 the two-phase kernels up to D = 128 where their tiles fit; 1 the one-pass kernels (above D = 64 the rows' fragments from global memory)") \
  X(rerope_bwd_block_m, 0, 64, 1, "two-phase backward: dk/dv's query rows per tile (0: the most the local memory holds, up to 64)") \
  X(rerope_bwd_block_n, 0, 64, 1, "two-phase backward: dq's keys per tile (0: the most the local memory holds, up to 64)") \
  X(rerope_bwd_stages, 0, 2, 0, "two-phase backward: dq's key tiles in the ring (0: 2 where tiles of 64 fit so, else 1; on the fly 1)") \
  X(rerope_bwd_wgmma, 0, 3, 0, "two-phase backward: warpgroup MMA (0: on sm_90 up to D = 64; 1 never; 2 at every D, also through the emulation; 3 on sm_90 at every D)") \
  X(rerope_bwd_qring, 0, 2, 0, "two-phase backward: dk/dv's keys' fragments in registers and its query tiles through a ring of 2 (0: where its tiles would be under 32 rows otherwise; 1 never; 2 always)") \
  X(rerope_wgmma_maxnreg, 0, 255, 0, "warpgroup MMA kernels up to D = 64 (forward, two-phase backward): most registers a work-item holds, through the PTX route's .maxnreg (0: the compiler's choice; below 96 taken as 96: ptxas does not build the D = 64 forward in 64)") \
  /* quantize / dequantize / append */                                                          \
  X(quant_wg, 1, 1024, 1, "K/V cache kernels: work-items per group")                            \
  X(quant_rowwise, 0, 1, 0, "K/V cache kernels: a work-item per row, no barriers (CPUs)")

typedef struct clattn_tuning {
#define CLATTN_TUNING_FIELD(name, lo, hi, pow2, meaning) int name;
  CLATTN_TUNING_PARAMS(CLATTN_TUNING_FIELD)
#undef CLATTN_TUNING_FIELD
} clattn_tuning;

enum {
#define CLATTN_TUNING_INDEX(name, lo, hi, pow2, meaning) CLATTN_TP_##name,
  CLATTN_TUNING_PARAMS(CLATTN_TUNING_INDEX)
#undef CLATTN_TUNING_INDEX
  CLATTN_TUNING_N
};

/* Where each value of a tuning came from, in words (clattn devices --params):
 * its table row ("arch row nvidia-sm9"), "override file", "clamped to the
 * device's max work-group size (was 1024)", "set by clattn_context_set_tuning". */
typedef struct clattn_tuning_origin {
  char of[CLATTN_TUNING_N][80];
  char problems[2048]; /* what was wrong with the override file, a line each ("" = nothing) */
} clattn_tuning_origin;

/* Fills `out` for a profile: the table row (params.c) that matches first in
 * the order device name (substring), architecture (prefix of prof->arch),
 * vendor (prof->arch's first word), the generic row; then the override
 * file at `override_path` (may be NULL; see clattn_tuning_write for its
 * form); then each work-group size halved to the device's limit. A file
 * written for another device or library version is ignored whole; unknown
 * keys and values out of range are ignored line by line; both are reported
 * through log_ctx's log (NULL: silently). `origin` (may be NULL) gets where
 * each value came from. Returns true when the file was read and applied. */
bool clattn_tuning_lookup(const clattn_context *log_ctx, const clattn_device_profile *prof,
                          const char *override_path, clattn_tuning *out, clattn_tuning_origin *origin);
/* Sets field `key` to `value`; false for an unknown key or a value out of
 * its range (the field is then unchanged). */
bool clattn_tuning_set(clattn_tuning *t, const char *key, int value);
/* Writes the file atomically (a temporary beside it, then a rename): a
 * comment, "clattn_version=", "device=" and "arch=" lines naming what it was
 * written for, then every field as "key=value". */
clattn_status clattn_tuning_write(const clattn_tuning *t, const clattn_device_profile *prof,
                                  const char *path);
/* The default override file of a device: <dir>/tuning-<arch>-<name>.txt,
 * the name in lower case with each run of other characters than letters
 * and digits one '-'. */
void clattn_tuning_default_path(const char *dir, const clattn_device_profile *prof, char *out,
                                size_t n);
/* The value of the i-th parameter in list order (clattn_tuning_name names it). */
int clattn_tuning_get(const clattn_tuning *t, size_t i);

/* ------------------------------------------------------------------ context (context.c) */

struct clattn_program_cache;

struct clattn_context {
  cl_context cl;
  cl_device_id device;
  clattn_device_profile profile;
  clattn_tuning tuning;
  clattn_context_options opts;
  char cache_dir[1024]; /* "" = no disk cache */
  char tuning_path[1200]; /* the override file looked for, "" = none (no cache dir) */
  char tuning_file[1200]; /* the override file read, "" = none */
  clattn_tuning_origin tuning_origin; /* where each tuning value came from */
  struct clattn_program_cache *programs; /* created with the context */
  atomic_bool ran_clblast; /* clattn_reference_decode ran here (see clattn_baseline_context_release) */
  bool owns_cl; /* created by clattn_context_create_default */
  cl_mem scratch; /* 4 KiB the kernels may write when the caller passes no error flag */
  _Atomic uint64_t decode_tag; /* decode's one-launch merge: the last call's ticket tag (48 bits) */
  atomic_bool wgmma_failed; /* a program through the PTX route failed to build: plans avoid it */
};

/* A ticket tag no earlier decode call of ctx used: 48 bits, never 0. */
uint64_t clattn_decode_tag(clattn_context *ctx);

void clattn_log(const clattn_context *ctx, clattn_log_level level, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);

/* Vendor feature macros for kernels (-DCLATTN_NV_PTX=1 ...), from the profile. */
void clattn_feature_options(const clattn_context *ctx, char *buf, size_t size);
/* The device's inline PTX fast paths are on (NVIDIA, CLATTN_PORTABLE unset). */
bool clattn_nv_ptx_active(const clattn_context *ctx);
/* The build option (" -D...", or "" where the device takes none or waves
 * is 0) that asks a kernel's register allocation to allow at least `waves`
 * warps / wavefronts per SIMD: NVIDIA's register cap through the PTX route
 * (host/program.c), AMD's amdgpu_waves_per_eu (cl/common.clh CLATTN_REG_CAP). */
void clattn_occupancy_option(const clattn_context *ctx, int waves, char *buf, size_t size);
/* ... and warpgroup MMA through the PTX route (sm_90; cl/wgmma.clh), not
 * found broken on this context's device. */
bool clattn_nv_wgmma_active(const clattn_context *ctx);

/* Test hook (process-wide) for the operations with tensor-core kernels
 * (decode, ReRoPE): 0 auto; 1 portable kernels only; 2 tensor-core kernels,
 * their PTX emulated in local memory off NVIDIA, where the shape allows. */
void clattn_force_path(int path);
/* Test hook: the options decode's partial kernel for params is built with
 * (the plan's choices: -DTOKENS=.., -DTWHOLE=..), without the device's. */
clattn_status clattn_decode_build_options(clattn_context *ctx, const clattn_decode_params *params,
                                          char *buf, size_t size);
int clattn_forced_path(void);

/* ------------------------------------------------------------------ files (program.c) */

/* The PTX route's edit of n bytes of PTX (host/program.c, cl/wgmma.clh): the
 * "// CLATTN_PTX " markers removed, ".target sm_90" raised to sm_90a, and
 * with maxnreg > 0 ".maxnreg maxnreg" (at most 255) put before each entry's
 * body; NUL terminated, the caller frees; NULL when out of memory. */
char *clattn_ptx_patched(const char *ptx, size_t n, int maxnreg);

typedef enum clattn_read_result {
  READ_OK,
  READ_MISSING,   /* nothing at the path */
  READ_DIRECTORY, /* a directory: it cannot be replaced by a file */
  READ_BAD,       /* anything else that is not a readable regular file of at most cap bytes */
} clattn_read_result;

/* Reads a regular file whole, NUL-terminated (caller frees *out). Opened
 * without blocking, so a FIFO in its place returns at once, and checked with
 * fstat before a byte is allocated: a directory, FIFO, socket or device, or
 * a file larger than `cap`, is refused. `why` says what was wrong. */
clattn_read_result clattn_read_regular(const char *path, size_t cap, char **out, size_t *size,
                                       char *why, size_t why_size);

/* ------------------------------------------------------------------ programs (program.c) */

/* Embedded kernel sources (generated from cl/ at build time). */
typedef struct clattn_source {
  const char *name; /* "decode.cl", "common.clh" */
  const char *text;
  size_t size;
} clattn_source;
extern const clattn_source clattn_sources[];
extern const size_t clattn_num_sources;

/* The source of `name` with its #include "x.clh" lines expanded, from
 * $CLATTN_KERNEL_DIR when set, else embedded. Caller frees. */
clattn_status clattn_source_load(const char *name, char **out);

/* Builds (or fetches from the in-memory and on-disk caches) the program of
 * source `file` with `options` (-D ...; the feature options are appended),
 * and creates kernel `kernel_name` from it. The caller releases the kernel.
 * Thread-safe: one build per variant and context (other callers of that
 * variant wait for it), different variants build in parallel. */
clattn_status clattn_kernel_get(clattn_context *ctx, const char *file, const char *options,
                                const char *kernel_name, cl_kernel *out);
/* The context's program cache, created with it and freed by its release. */
clattn_status clattn_program_cache_create(struct clattn_program_cache **out);
void clattn_program_cache_free(struct clattn_program_cache *c);
/* Test hook: writes a disk-cache entry with a valid header for the variant
 * clattn_kernel_get(ctx, file, options, ...) looks up, holding `payload` as
 * its binary (a forged entry); `path` receives the entry's file name. */
clattn_status clattn_program_cache_store(clattn_context *ctx, const char *file, const char *options,
                                         const void *payload, size_t size, char *path,
                                         size_t path_size);

/* Kernel arguments in order, without hand-numbering; the first failure is kept. */
typedef struct clattn_args {
  cl_kernel kernel;
  cl_uint next;
  cl_int err;
  cl_uint failed_at;
} clattn_args;

static inline clattn_args clattn_args_begin(cl_kernel k) {
  clattn_args a = {k, 0, CL_SUCCESS, 0};
  return a;
}
void clattn_arg(clattn_args *a, size_t size, const void *value);
void clattn_arg_mem(clattn_args *a, cl_mem m);  /* NULL allowed: kernels test a flag */
void clattn_arg_int(clattn_args *a, int v);
void clattn_arg_long(clattn_args *a, int64_t v);
void clattn_arg_float(clattn_args *a, float v);
void clattn_arg_local(clattn_args *a, size_t bytes);
/* A tensor as (buffer, element offset as long). */
void clattn_arg_tensor(clattn_args *a, const clattn_tensor *t);
clattn_status clattn_args_end(const clattn_args *a, const char *kernel_name);

/* Checks the local size against the device and kernel limits, then enqueues. */
clattn_status clattn_launch(clattn_context *ctx, cl_command_queue queue, cl_kernel kernel,
                            const char *kernel_name, cl_uint dims, const size_t *global,
                            const size_t *local, cl_uint num_wait, const cl_event *wait,
                            cl_event *event);
/* The end of every kernel call: the arguments' first failure, else the launch;
 * the kernel (a->kernel) is released either way. */
clattn_status clattn_args_launch(clattn_context *ctx, cl_command_queue queue, const clattn_args *a,
                                 const char *kernel_name, cl_uint dims, const size_t *global,
                                 const size_t *local, cl_uint num_wait, const cl_event *wait,
                                 cl_event *event);

/* Common queue checks: queue non-NULL and on ctx's context, wait list consistent. */
clattn_status clattn_check_enqueue(const clattn_context *ctx, cl_command_queue queue,
                                   cl_uint num_wait, const cl_event *wait);

/* A temporary buffer released once the enqueued commands using it finish
 * (OpenCL defers the free until then). */
clattn_status clattn_temp_buffer(clattn_context *ctx, size_t bytes, cl_mem *out);

/* ------------------------------------------------------------------ decode (lib/decode.c, lib/decode_plan.c) */

/* A decode call as validated (every tensor checked against its buffer and
 * ctx, every size in range, the aliasing rules); shared by decode and the
 * unfused reference path. */
typedef struct clattn_decode_problem {
  int B, Mq, Hq, Hkv, D, G;
  int total_q;   /* query rows of q: B * Mq, or varlen's packed rows */
  int kv_cap;    /* keys a sequence can hold (dense Nkv, or max_pages * page_size) */
  int page_size, num_pages, max_pages; /* paged */
  int kv_q, kv_groups, fnuz; /* K/V rows: 0 float, 1 int4 (groups), 2 fp8 (E4M3FNUZ) */
  bool paged, varlen, causal, bias;
  clattn_dtype qdt, kvdt, odt;
  float scale;   /* resolved (0 -> 1/sqrt(D)) */
} clattn_decode_problem;
clattn_status clattn_decode_validate(const clattn_context *ctx, const clattn_decode_params *p,
                                     clattn_decode_problem *out);
/* Everything clattn_decode checks before it enqueues (the caller's workspace
 * size included), without enqueuing: decode_multi checks every shard first. */
clattn_status clattn_decode_check(clattn_context *ctx, const clattn_decode_params *params);

/* ------------------------------------------------------------------ merge (lib/merge.c) */

/* Merges n partial states stored in one f32 buffer, partial i at element
 * offset o_off + i * o_split_stride (o) and lse_off + i * lse_split_stride
 * (lse), each [B, M, H, D] / [B, H, M] with the given strides, into `o`
 * (any float dtype) and optional `lse`. The split-K reduce of decode. */
typedef struct clattn_merge_strided {
  cl_mem part_o, part_lse;
  int64_t part_o_off, part_lse_off;
  int64_t part_o_split_stride, part_lse_split_stride;
  int64_t part_o_stride[4];   /* b, m, h, d */
  int64_t part_lse_stride[3]; /* b, h, m */
  int n;
  int B, M, H, D;
  const clattn_tensor *o;        /* [B, M, H, D] */
  const clattn_tensor *lse;      /* [B, H, M] or NULL/absent */
  /* varlen: when set, [B+1] i32 and M is the largest count; row m of b is
   * packed row q_start[b] + m of o (o then [1, total_q, H, D]); a sequence
   * whose entries are invalid (cl/seq.clh) is skipped. */
  const clattn_tensor *q_start;
  int total_q;
} clattn_merge_strided;

clattn_status clattn_merge_strided_enqueue(clattn_context *ctx, cl_command_queue queue,
                                           const clattn_merge_strided *m, cl_uint num_wait,
                                           const cl_event *wait, cl_event *event);

/* ------------------------------------------------------------------ variants */

/* Every (kernel file, options) variant a family can build, for the offline
 * AMD compile test: each option value of each axis appears at least once.
 * Options are those the family passes to clattn_kernel_get (feature macros
 * are added by the test). */
typedef void (*clattn_variant_fn)(void *priv, const char *file, const char *options);
void clattn_decode_variants(clattn_variant_fn fn, void *priv);
void clattn_kvcache_variants(clattn_variant_fn fn, void *priv);
void clattn_merge_variants(clattn_variant_fn fn, void *priv);
void clattn_rerope_variants(clattn_variant_fn fn, void *priv);
void clattn_baseline_variants(clattn_variant_fn fn, void *priv);

/* ------------------------------------------------------------------ rerope (lib/rerope.c, lib/rerope_bwd.c) */

/* A validated ReRoPE problem, shared by the forward and backward hosts. */
typedef struct clattn_rr_problem {
  int Z, Hq, Hkv, Nq, Nk, D;
  clattn_dtype dtype;
  int rotary;
  clattn_rr_args args;
  const clattn_tensor *q_pos, *k_pos; /* rotary positions, NULL when absent */
  const char *qname, *kname;          /* q1 and k1 as the messages name them ("q", "k" rotary) */
} clattn_rr_problem;

/* The inputs and settings of one ReRoPE call as the kernels take them: the
 * rotary form passes its raw q (k) as both q1 and q2 (k1 and k2), the kernels
 * reading q1 (k1). lse: the forward's maybe_lse, the backward's lse. */
typedef struct clattn_rr_inputs {
  const clattn_tensor *q1, *q2, *k1, *k2, *v, *o, *lse;
  int window, causal, rotary;
  float scale;
} clattn_rr_inputs;

typedef enum clattn_rr_kind { CLATTN_RR_FWD = 0, CLATTN_RR_BWD = 1 } clattn_rr_kind;

/* The kernels and tiles of one call: the planner is the code that launches. */
typedef struct clattn_rr_plan {
  int mma;            /* tensor-core kernels (cl/rerope_mma.clh) */
  int emulate;        /* ... with the PTX emulated (tests on CPUs) */
  int bm, bn, wg, ct; /* tiles (-DBM, -DBN) and work-group */
  int q_rows, k_rows; /* rows per work-group: queries (forward, dq), keys (dk/dv) */
  int stages;         /* tensor-core forward: key tiles in flight + 1 (-DSTAGES), else 0 */
  int mt;             /* tensor-core forward: 16-row blocks per warp (-DMT), else 0 */
  int nsl;            /* tensor-core backward, D > 64: column slices (-DNSL; grid z = Z nsl), else 0 */
  int phased;         /* tensor-core backward, D <= 128: the two-phase kernels (-DPHASED), else 0 */
  int qring;          /* ... their dk/dv with a ring of query tiles (-DQRING) */
  int wgmma;          /* tensor-core forward: warpgroup MMA (-DRR_WG, cl/wgmma.clh) */
  int maxnreg;        /* registers per work-item (-DCLATTN_PTX_MAXNREG, the PTX route), or 0 */
} clattn_rr_plan;

/* Chooses kernels and tiles; `views` are the tensors the kernels read with
 * 16-byte copies on the tensor-core path (their layout decides the path). */
clattn_status clattn_rr_plan_make(const clattn_context *ctx, const clattn_rr_problem *p,
                                  clattn_rr_kind kind, const clattn_tensor *const *views,
                                  int n_views, clattn_rr_plan *out);
void clattn_rr_options(const clattn_rr_problem *p, const clattn_rr_plan *plan, char *buf,
                       size_t size);
/* clattn_rr_plan_make, the plan's options, and its program's kernel
 * kernel_name (the caller releases it, as clattn_kernel_get's). Where the
 * plan takes the PTX route (warpgroup MMA) and its program fails to build,
 * the route is marked broken for the context (clattn_nv_wgmma_active) and
 * the plan made again without it. */
clattn_status clattn_rr_plan_built(clattn_context *ctx, const clattn_rr_problem *p,
                                   clattn_rr_kind kind, const clattn_tensor *const *views,
                                   int n_views, const char *kernel_name, clattn_rr_plan *pl,
                                   char *opts, size_t size, cl_kernel *kernel);
/* A tensor as kernel arguments (buffer or NULL, then its clattn_rr_view). */
void clattn_rr_arg(clattn_args *a, const clattn_tensor *t);
/* Checks t (4-d, named `name`) against `ref`: same shape on the axes in
 * `axes_mask` (bit i = axis i) and the same dtype. */
clattn_status clattn_rr_check_like(const clattn_context *ctx, const clattn_tensor *t, const char *name,
                                   const clattn_tensor *ref, const char *ref_name,
                                   unsigned axes_mask);
/* Checks q1/k1/v-shaped inputs and fills the problem's shape (q: [Z, Hq, Nq, D],
 * k: [Z, Hkv, Nk, D]), window, scale, causal. */
clattn_status clattn_rr_problem_init(const clattn_context *ctx, clattn_rr_problem *p, const clattn_tensor *q,
                                     const char *qname, const clattn_tensor *k,
                                     const char *kname, int window, float scale, int causal);
/* The inputs of every ReRoPE operation, checked, and the problem they pose:
 * q1 and k1 as clattn_rr_problem_init takes them (named q, k in the rotary
 * form), v like k1, o like q1, and for the explicit form q2 like q1 and k2 like
 * k1. lse is the caller's to check. */
clattn_status clattn_rr_inputs_init(const clattn_context *ctx, const clattn_rr_inputs *in,
                                    clattn_rr_problem *p);
/* What every ReRoPE enqueue checks first: the queue and wait list, then the inputs. */
clattn_status clattn_rr_enqueue_init(const clattn_context *ctx, cl_command_queue queue,
                                     cl_uint num_wait, const cl_event *wait,
                                     const clattn_rr_inputs *in, clattn_rr_problem *p);
/* lse (named `name`) is [Z, Hq, Nq] f32 like q's first three axes. */
clattn_status clattn_rr_check_lse(const clattn_context *ctx, const clattn_tensor *lse, const char *name,
                                  const clattn_tensor *q, const char *qname);
/* Rotary settings and positions ([N] or [Z, N] i32, absent allowed). */
clattn_status clattn_rr_rotary_init(const clattn_context *ctx, clattn_rr_problem *p, const clattn_tensor *q_pos,
                                    const clattn_tensor *k_pos, float theta, int layout);


/* ------------------------------------------------------------------ unfused reference (lib/baseline.c) */

/* Floats per staged K/V slab of the CLBlast reference (default 2^28); tests
 * lower it to exercise the rounds over sequences. */
extern int64_t clattn_baseline_stage_limit;

/* Release hook (clattn_context_release, before the cl_context is released):
 * CLBlast keeps every cl_context it ran on in its process-wide program cache,
 * so a context that ran clattn_reference_decode clears that cache
 * (CLBlastClearCache, CLBlast's only way to let go of a context): other
 * CLBlast users in the process then recompile their kernels on their next
 * call. No-op for contexts that never ran it, and without CLBlast. */
void clattn_baseline_context_release(clattn_context *ctx);

#endif /* CLATTN_INTERNAL_H */
