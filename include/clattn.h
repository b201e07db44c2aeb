/*
 * clattn: portable OpenCL attention kernels.
 *
 * The one public header. Every operation enqueues on the caller's
 * cl_command_queue, reads and writes the caller's cl_mem buffers in place
 * (a tensor is a buffer + byte offset + dtype + shape + strides), takes an
 * event wait list and can return an event. Nothing blocks the host unless
 * the caller waits on that event.
 *
 * Errors: every function returns a clattn_status; clattn_last_error() gives
 * a message for the calling thread naming the argument, the dimension, the
 * OpenCL call and its code, or the kernel build log. Bad input never
 * enqueues anything, and no input makes a kernel read or write outside the
 * views it was given: every view's offset, shape and strides are checked
 * against its buffer (and its buffer against the context) in checked 64-bit
 * arithmetic before anything is enqueued, and indices that come from device
 * data (kv lengths, block tables, varlen starts, positions) are bounded in
 * the kernels (see each operation for what happens to a bad entry).
 *
 * Aliasing: an output may share no element with an input or with another
 * output, and may not reach one element twice (no zero or overlapping
 * strides); views into one buffer are fine where their bytes are disjoint,
 * or where two views of one layout (dtype, shape, strides) interleave
 * without meeting (K and V caches interleaved per token). Sub-buffers count
 * as their parent's bytes. The one exception: the o of clattn_decode (and
 * of clattn_reference_decode, clattn_decode_multi and its shards) may be q
 * itself (the same view). Violations return CLATTN_INVALID_ARGUMENT naming
 * both tensors.
 *
 * Lifetimes: a clattn_context is created from the caller's cl_context and
 * cl_device_id (retained, not owned) and may be used from several threads at
 * once, each with its own queue. Parameter structs need to live only until
 * the call returns.
 */
#ifndef CLATTN_H
#define CLATTN_H

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(CLATTN_BUILDING)
#define CLATTN_API __declspec(dllexport)
#elif defined(__GNUC__) && defined(CLATTN_BUILDING)
#define CLATTN_API __attribute__((visibility("default")))
#else
#define CLATTN_API
#endif

#define CLATTN_VERSION_MAJOR 0
#define CLATTN_VERSION_MINOR 1
#define CLATTN_VERSION_PATCH 0

/* The version of the library that is running, "MAJOR.MINOR.PATCH" (static);
 * the macros above are the header's, which a program was compiled against:
 * with a shared library the two can differ. Any out-pointer may be NULL. */
CLATTN_API const char *clattn_version(int *major, int *minor, int *patch);

/* ------------------------------------------------------------------ status */

typedef enum clattn_status {
  CLATTN_SUCCESS = 0,
  CLATTN_INVALID_ARGUMENT = 1, /* a NULL or out-of-range argument */
  CLATTN_INVALID_SHAPE = 2,    /* dimensions or strides inconsistent */
  CLATTN_UNSUPPORTED = 3,      /* valid but not supported (dtype, head dim, device) */
  CLATTN_OUT_OF_BOUNDS = 4,    /* shape and strides reach past a buffer's end */
  CLATTN_OPENCL_ERROR = 5,     /* an OpenCL call failed; the message names it */
  CLATTN_BUILD_ERROR = 6,      /* a kernel failed to build; the message holds the log */
  CLATTN_OUT_OF_MEMORY = 7,
  CLATTN_NO_DEVICE = 8,        /* no OpenCL device found or selected */
} clattn_status;

/* A static name for a status ("CLATTN_INVALID_SHAPE"). */
CLATTN_API const char *clattn_status_string(clattn_status status);

/* The calling thread's message about its last failed call ("" if none).
 * Valid until that thread's next clattn call. */
CLATTN_API const char *clattn_last_error(void);

/* ------------------------------------------------------------------ tensors */

typedef enum clattn_dtype {
  CLATTN_F32 = 0,
  CLATTN_F16 = 1,
  CLATTN_BF16 = 2,
  CLATTN_F64 = 3,   /* only where the device has cl_khr_fp64 */
  CLATTN_I32 = 4,   /* lengths, block tables, packed quantized rows */
  CLATTN_INT4 = 5,  /* K/V cache: int32 words, see clattn_kv_quant */
  CLATTN_FP8 = 6,   /* K/V cache: OCP E4M3FN bytes packed in int32 words */
  CLATTN_FP8_FNUZ = 7, /* K/V cache: E4M3FNUZ (AMD's variant) */
} clattn_dtype;

#define CLATTN_MAX_DIMS 5

/* A view of a cl_mem. Strides are in elements of the dtype (in int32 words
 * for the packed quantized dtypes), non-negative; every dimension at most
 * 2^31 - 1; the offset a multiple of the element size. Every view's offset is
 * honoured, optional ones included. A tensor with buf == NULL is absent
 * (used for the optional inputs named maybe_*). */
typedef struct clattn_tensor {
  cl_mem buf;
  size_t offset; /* bytes from the buffer's start */
  clattn_dtype dtype;
  int ndim;
  int64_t shape[CLATTN_MAX_DIMS];
  int64_t stride[CLATTN_MAX_DIMS];
} clattn_tensor;

/* A contiguous (row-major) view: clattn_tensor_4d(buf, 0, CLATTN_F16, B, S, H, D). */
CLATTN_API clattn_tensor clattn_tensor_1d(cl_mem buf, size_t offset, clattn_dtype dtype,
                                          int64_t d0);
CLATTN_API clattn_tensor clattn_tensor_2d(cl_mem buf, size_t offset, clattn_dtype dtype,
                                          int64_t d0, int64_t d1);
CLATTN_API clattn_tensor clattn_tensor_3d(cl_mem buf, size_t offset, clattn_dtype dtype,
                                          int64_t d0, int64_t d1, int64_t d2);
CLATTN_API clattn_tensor clattn_tensor_4d(cl_mem buf, size_t offset, clattn_dtype dtype,
                                          int64_t d0, int64_t d1, int64_t d2, int64_t d3);

/* Bytes of one element ("word" for the packed dtypes); 0 for an unknown dtype. */
CLATTN_API size_t clattn_dtype_size(clattn_dtype dtype);
CLATTN_API const char *clattn_dtype_name(clattn_dtype dtype);

/* ------------------------------------------------------------------ context */

typedef struct clattn_context clattn_context;

typedef enum clattn_log_level {
  CLATTN_LOG_ERROR = 0,
  CLATTN_LOG_INFO = 1,
  CLATTN_LOG_DEBUG = 2,
} clattn_log_level;

/* Called from whichever thread made the call that logs, possibly from several at once. */
typedef void (*clattn_log_fn)(void *priv, clattn_log_level level, const char *msg);

typedef struct clattn_context_options {
  clattn_log_fn log; /* NULL: silent */
  void *log_priv;
  clattn_log_level log_level;
  /* Folder of the on-disk program cache; NULL: $CLATTN_CACHE_DIR, else
   * $XDG_CACHE_HOME/clattn or ~/.cache/clattn; "" disables it. */
  const char *cache_dir;
} clattn_context_options;

/* Wraps the caller's context and device (both retained, and released by
 * clattn_context_release). opts may be NULL. */
CLATTN_API clattn_status clattn_context_create(cl_context cl_ctx, cl_device_id device,
                                               const clattn_context_options *opts,
                                               clattn_context **out);

/* Creates a cl_context on the default device: $CLATTN_DEVICE (an index in
 * the order clattn_list_devices prints, or a substring of the device or
 * platform name), else the first GPU, else the first device of any type. */
CLATTN_API clattn_status clattn_context_create_default(const clattn_context_options *opts,
                                                       clattn_context **out);

/* Like clattn_context_create_default with an explicit selector (NULL: default). */
CLATTN_API clattn_status clattn_context_create_selected(const char *selector,
                                                        const clattn_context_options *opts,
                                                        clattn_context **out);

/* Releases the context and its cached programs; sets *ctx to NULL. NULL is fine.
 * A context that ran clattn_reference_decode also clears CLBlast's
 * process-wide program cache (CLBlast's only way to let go of a cl_context):
 * other CLBlast users in the process recompile on their next call. */
CLATTN_API void clattn_context_release(clattn_context **ctx);

CLATTN_API cl_context clattn_context_cl(const clattn_context *ctx);
CLATTN_API cl_device_id clattn_context_device(const clattn_context *ctx);

/* What the library knows of a device. */
typedef struct clattn_device_profile {
  char name[256];
  char vendor[128];
  char platform[128];
  char driver_version[64];
  char arch[64];           /* normalised architecture key, e.g. "nvidia-sm90", "pocl-cpu" */
  cl_uint vendor_id;
  cl_device_type type;
  cl_uint compute_units;
  cl_uint simd_width;       /* warp / wavefront width the kernels assume */
  cl_ulong local_mem_bytes;
  cl_ulong global_mem_bytes;
  cl_ulong max_alloc_bytes;
  size_t max_work_group_size;
  int has_fp16, has_fp64, has_subgroups;
  int has_nv_ptx;           /* inline PTX usable (NVIDIA) */
  int has_amd_builtins;     /* AMD GCN/CDNA/RDNA builtins usable */
  int has_int64_atomics;    /* 1: cl_khr_int64_base_atomics (decode's one-launch merge); 2: also
                               cl_khr_int64_extended_atomics (its tickets' atom_max) */
  int has_cpu_prefetch;     /* __builtin_prefetch in kernels (PoCL's CPU device: clang, flat memory) */
  int has_f32_denormals;    /* f32 denormals kept (CL_FP_DENORM): fp8 decoded by one multiply */
} clattn_device_profile;

CLATTN_API clattn_status clattn_context_profile(const clattn_context *ctx,
                                                clattn_device_profile *out);
CLATTN_API clattn_status clattn_device_profile_query(cl_device_id device,
                                                     clattn_device_profile *out);

/* Device enumeration in the order CLATTN_DEVICE indices refer to. */
CLATTN_API clattn_status clattn_device_count(cl_uint *count);
CLATTN_API clattn_status clattn_device_get(cl_uint index, cl_device_id *device);
/* The device a selector names: an index in that order, or a case-insensitive
 * substring of "platform device"; NULL or "": the first GPU, else the first
 * device ($CLATTN_DEVICE is read by clattn_context_create_default, not here). */
CLATTN_API clattn_status clattn_device_select(const char *selector, cl_device_id *device);

/* The tuning a context runs with: its device's row of the table
 * (host/params.c; rows keyed by device name, then architecture, then
 * vendor, then the generic row), then the override file, which the context
 * reads once when created ($CLATTN_TUNING_FILE, else
 * <cache dir>/tuning-<arch>-<device name>.txt; `clattn tune` writes it),
 * then each work-group size clamped to the device's limit. A file written
 * for another device or library version, unknown keys and bad values are
 * reported through the log and ignored. Parameters are numbered 0 to
 * clattn_tuning_count() - 1; `clattn devices --params` prints them all.
 * Only speed depends on them, never correctness. */
typedef struct clattn_tuning_param {
  const char *name;    /* the override file's key */
  const char *meaning; /* one line */
  int lo, hi;          /* its range */
  int pow2;            /* a power of two (or 0) */
} clattn_tuning_param;
CLATTN_API size_t clattn_tuning_count(void);
CLATTN_API const char *clattn_tuning_name(size_t i); /* NULL past the end */
CLATTN_API const clattn_tuning_param *clattn_tuning_param_info(size_t i); /* NULL past the end */
CLATTN_API int clattn_context_tuning_value(const clattn_context *ctx, size_t i); /* 0 past the end */
/* Where the value came from, in words: "arch row nvidia-sm9", "override
 * file", "clamped to the device's max work-group size (was 1024)", "set by
 * clattn_context_set_tuning". NULL past the end. */
CLATTN_API const char *clattn_context_tuning_origin(const clattn_context *ctx, size_t i);
/* The override file the context read, "" when there was none to read. */
CLATTN_API const char *clattn_context_tuning_file(const clattn_context *ctx);
/* What was wrong with the override file when the context read it (a file of
 * another device or version, unknown keys, bad values; each also logged),
 * a line each; "" when nothing was. */
CLATTN_API const char *clattn_context_tuning_problems(const clattn_context *ctx);
/* The override file the context looked for (where `clattn tune` writes),
 * "" when it looked for none (no cache directory, no $CLATTN_TUNING_FILE). */
CLATTN_API const char *clattn_context_tuning_path(const clattn_context *ctx);
/* Sets one parameter for the operations enqueued after it (a tuner's hook):
 * CLATTN_INVALID_ARGUMENT naming the parameter for an unknown name or a
 * value out of its range on this device. Not while other threads enqueue
 * on ctx. */
CLATTN_API clattn_status clattn_context_set_tuning(clattn_context *ctx, const char *name, int value);
/* Writes the context's tuning as an override file for its device and this
 * library version, atomically (a temporary file, then a rename). */
CLATTN_API clattn_status clattn_context_write_tuning(const clattn_context *ctx, const char *path);

/* ------------------------------------------------------------------ decode */

/* Split-K decode attention.
 *
 *   o[b, m, h] = softmax_j(scale * q[b, m, h] . k[b, j, h / G] + bias[b, h, m, j]) v[b, j, h / G]
 *
 * with G = Hq / Hkv, j < kv_len[b] (and j <= kv_len[b] - Mq + m when causal).
 * A sequence of length 0 gives o = 0 and lse = -inf.
 *
 * Paged caches: key j of sequence b is row j % page_size of page
 * block_table[b, j / page_size]. An entry outside [0, num_pages) or a
 * kv_len beyond max_pages * page_size is never read: those keys are skipped
 * (as if masked) and maybe_error_flag, when given, is set to 1. A kv_len
 * above the cache's capacity (Nkv, or max_pages * page_size) is clamped to
 * it and also sets the flag; a negative kv_len counts as 0.
 *
 * Varlen: q is [1, total_q, Hq, D], batch gives B and maybe_q_start the
 * packed rows of each sequence; causal applies per sequence. */
typedef struct clattn_decode_params {
  clattn_tensor q; /* [B, Mq, Hq, D] f32/f16/bf16; varlen: [1, total_q, Hq, D] */
  clattn_tensor k; /* dense [B, Nkv, Hkv, D]; paged [num_pages, page_size, Hkv, D];
                    * at most 2^30 keys per sequence (Nkv, or max_pages * page_size) */
  clattn_tensor v; /* like k */
  clattn_tensor o; /* like q, f32/f16/bf16 */
  clattn_tensor maybe_lse;    /* [B, Hq, Mq] f32, natural log; varlen: [1, Hq, total_q] */
  clattn_tensor maybe_kv_len; /* [B] i32, stride 1; absent: every sequence has Nkv keys */
  clattn_tensor maybe_bias;   /* [B, Hq, Mq, Nkv] f32 additive, any strides */
  /* Paged cache: [B, max_pages] i32 physical page of each logical page. */
  clattn_tensor maybe_block_table;
  /* Varlen queries: [B + 1] i32, stride 1; sequence b owns packed queries q_start[b]..q_start[b+1]-1.
   * A sequence whose entries are negative, decreasing, past total_q or more
   * than max_q_len apart is skipped (its rows of o and lse are not written)
   * and maybe_error_flag is set. */
  clattn_tensor maybe_q_start;
  /* fp8 K/V: [.., N, Hkv] i32 per row (fp16 scale low, fp16 shift high), indexed like k/v rows. */
  clattn_tensor maybe_k_scale_shift;
  clattn_tensor maybe_v_scale_shift;
  /* Optional [1] i32 flag set to 1 by the kernel when a block-table entry was
   * out of range (that page is skipped, nothing is read outside the cache),
   * a kv_len exceeded the cache or a varlen range was invalid. Never cleared. */
  clattn_tensor maybe_error_flag;
  int kv_groups;  /* int4 quantization groups per row (1, 2, 4, 8); 0 = 1; int4 only */
  int batch;      /* B; required with varlen, else 0 = from q */
  int max_q_len;  /* varlen: the largest q_start[b+1] - q_start[b] (0 = total_q) */
  float scale;    /* > 0, finite; 0: 1/sqrt(D) */
  int causal;     /* query m of Mq sits at position kv_len - Mq + m */
  int num_splits; /* 0: chosen per device; 1 .. 65536 fixes the split-K count */
  /* Optional [n] f32 contiguous workspace for split-K partials, at least
   * clattn_decode_workspace_size bytes from its offset; absent: allocated per
   * call and released once the kernels have finished. Its content before a
   * call does not matter (the one-launch merge's tickets carry a tag of the
   * call), and it may be reused for anything once the call has finished. */
  clattn_tensor maybe_workspace;
} clattn_decode_params;

/* Enqueues decode attention: one split-K kernel; where the keys are split
 * into more parts than the device's tuning merges in that kernel (or the
 * device lacks 64-bit atomics), a merge kernel follows. Any float q/o, any
 * K/V format above. clattn_decode_kernels says which kernels run.
 * Fast path: on NVIDIA (sm_80+), D a multiple of 8 (fp8: 16; padded to 64
 * in registers), q f16/bf16 with K/V of its dtype or q f16 with int4 or fp8
 * K/V, rows 16-byte aligned: tensor cores. There the weights p (times V's
 * scale for one-group int4, whose codes are centred on 8, and fp8) are
 * rounded to the 16-bit dtype for the P V product (2^-12 relative for f16,
 * 2^-9 for bf16) and int4 rows of 2, 4 or 8 groups are dequantized to f16
 * values; scores, sums and lse stay f32. Elsewhere, and with
 * CLATTN_PORTABLE=1, all arithmetic is f32 after loading. CPUs take a
 * serial form: one work-item per split reads each key's rows of every KV
 * head in memory order. Which cache layouts read fastest, and why:
 * tools/FAST_PATHS.md. */
CLATTN_API clattn_status clattn_decode(clattn_context *ctx, cl_command_queue queue,
                                       const clattn_decode_params *params,
                                       cl_uint num_wait, const cl_event *wait_list,
                                       cl_event *event);

/* Bytes of workspace clattn_decode needs for these params (0 when S = 1),
 * and the split count it will use. Either out pointer may be NULL. */
CLATTN_API clattn_status clattn_decode_workspace_size(clattn_context *ctx,
                                                      const clattn_decode_params *params,
                                                      size_t *bytes, int *num_splits);

/* Which kernels clattn_decode runs for these params, in words: the form
 * ("tensor cores", "tensor cores, token rows", "portable", "serial ..."; "(emulated)"
 * where CLATTN_FORCE_MMA=1 takes the tensor-core form off NVIDIA), the split
 * count and how the splits merge ("one launch": the last work-group of each
 * row block merges them; "two launches": a merge kernel follows). The text
 * lives until this thread's next call; NULL, the reason in
 * clattn_last_error, when params fail decode's checks. */
CLATTN_API const char *clattn_decode_kernels(clattn_context *ctx, const clattn_decode_params *params);

/* ------------------------------------------------------------------ KV cache: append, quantize, dequantize */

/* The K/V cache a backend owns and appends to every step.
 *
 * A cache tensor is dense [B, N, Hkv, X] (position j of sequence b is row
 * [b, j]) or paged [num_pages, page_size, Hkv, X] with an i32 block table
 * [B, max_pages] (position j of sequence b is row j % page_size of page
 * table[b, j / page_size]); its last dimension is contiguous (stride 1).
 * X depends on the cache dtype (clattn_kv_row_size computes it):
 *   f32, f16, bf16: X = D values.
 *   CLATTN_INT4: X = G + D/8 i32 words for G = kv_groups groups of D/G values:
 *     word g < G holds group g's fp16 scale (low 16 bits) and fp16 shift
 *     (high 16 bits); element d is bits 4*(d%8)..4*(d%8)+3 of word G + d/8;
 *     value = scale * code + shift.
 *   CLATTN_FP8, CLATTN_FP8_FNUZ: X = D/4 words, element d is byte d%4 of word
 *     d/4 (little-endian), an OCP E4M3FN code (bias 7, max 448, NaN S.1111.111,
 *     -0 = 0x80) or an E4M3FNUZ code (bias 8, max 240, NaN 0x80, no -0); each
 *     row's (fp16 scale low, fp16 shift high) word is in a separate i32
 *     scale-shift tensor [B, N, Hkv] or [num_pages, page_size, Hkv], indexed
 *     like the rows; value = fp8 * scale + shift.
 * D is a multiple of 8, at most 2048; int4 needs G in {1, 2, 4, 8} and D % (8 G) == 0.
 *
 * Quantization, bit for bit the same on every device:
 *   int4 group of minimum mn, maximum mx: shift = the largest fp16 <= mn,
 *     scale = the smallest fp16 with 15 scale >= mx - shift, code = the integer
 *     nearest (x - shift) / scale (ties to even). Round trip: |x - x'| <=
 *     scale / 2, plus the f32 rounding of x - shift and of the dequantization.
 *   fp8 row: shift = the fp16 nearest (mx + mn) / 2, scale = the smallest
 *     power of two with max |x - shift| <= 448 scale (FNUZ: 240 scale), code =
 *     the E4M3 value nearest (x - shift) / scale (ties to even). Round trip:
 *     scale times half the E4M3 spacing at |x - shift| / scale.
 *   A group (int4) or row (fp8) holding an inf or NaN stores NaN scale and
 *   shift and codes 0: all of it reads back as NaN. A group equal to one fp16
 *   value v stores scale 0 and shift v. Zeros (-0 too) read back as +0.
 *   Beyond fp16's range values saturate (finite but inexact): |shift| <=
 *   65504, int4 scale <= 65504, fp8 scale in [2^-24, 2^15].
 *
 * Out-of-range positions: a position outside the cache (dense: outside
 * [0, N); paged: at or beyond max_pages * page_size, or on a block-table entry
 * outside [0, num_pages)) is skipped: nothing is written or read there, and
 * maybe_error_flag[0] is set to 1 when the flag is given (it is never cleared:
 * zero it beforehand). Two rows written to the same position: either wins. */

/* Appends new K (and V) rows: row r of sequence b goes to position pos[b] + r
 * of the caches. Float caches store the rows rounded to their dtype; int4 and
 * fp8 caches quantize them (and fp8 writes the scale-shift words alongside). */
typedef struct clattn_kv_append_params {
  clattn_tensor new_k;       /* [total_new, Hkv, D] f32/f16/bf16, any strides */
  clattn_tensor maybe_new_v; /* like new_k, same dtype; absent: only K is appended */
  clattn_tensor k_cache;     /* dense [B, N, Hkv, X] or paged [num_pages, page_size, Hkv, X] */
  clattn_tensor maybe_v_cache;       /* like k_cache (same dtype and shape); with maybe_new_v */
  clattn_tensor maybe_k_scale_shift; /* fp8 only: [B, N, Hkv] or [num_pages, page_size, Hkv] i32 */
  clattn_tensor maybe_v_scale_shift; /* fp8 only, with maybe_v_cache */
  clattn_tensor pos;                 /* [B] i32: position of sequence b's first new row */
  /* [B + 1] i32, non-decreasing: sequence b owns new rows new_start[b] ..
   * new_start[b+1] - 1 (rows in no sequence are ignored). Absent: one new row
   * per sequence, row b for sequence b (total_new == B). */
  clattn_tensor maybe_new_start;
  clattn_tensor maybe_block_table; /* paged: [B, max_pages] i32 */
  clattn_tensor maybe_error_flag;  /* [1] i32: set to 1 when a row was out of range */
  int kv_groups;                   /* int4 groups per row (1, 2, 4, 8); 0 = 1 */
} clattn_kv_append_params;

CLATTN_API clattn_status clattn_kv_append(clattn_context *ctx, cl_command_queue queue,
                                          const clattn_kv_append_params *params,
                                          cl_uint num_wait, const cl_event *wait_list,
                                          cl_event *event);

/* Writes a range of positions of a cache: src[b, i] goes to position
 * start[b] + i. Into an int4 / fp8 cache this quantizes (the append kernel),
 * into a float cache it converts. */
typedef struct clattn_kv_quantize_params {
  clattn_tensor src;   /* [B, n, Hkv, D] f32/f16/bf16, any strides */
  clattn_tensor cache; /* dense [B, N, Hkv, X] or paged [num_pages, page_size, Hkv, X] */
  clattn_tensor maybe_scale_shift; /* fp8 only: [B, N, Hkv] or [num_pages, page_size, Hkv] i32 */
  clattn_tensor maybe_start;       /* [B] i32 first position of each sequence; absent: 0 */
  clattn_tensor maybe_block_table; /* paged: [B, max_pages] i32 */
  clattn_tensor maybe_error_flag;  /* [1] i32: set to 1 when a row was out of range */
  int kv_groups;                   /* int4 groups per row (1, 2, 4, 8); 0 = 1 */
} clattn_kv_quantize_params;

CLATTN_API clattn_status clattn_kv_quantize(clattn_context *ctx, cl_command_queue queue,
                                            const clattn_kv_quantize_params *params,
                                            cl_uint num_wait, const cl_event *wait_list,
                                            cl_event *event);

/* Reads a range of positions of a cache back to floats: out[b, i] = the row
 * at position start[b] + i, dequantized (int4 / fp8) or converted. A position
 * outside the cache gives a row of zeros (and sets the error flag). */
typedef struct clattn_kv_dequantize_params {
  clattn_tensor cache; /* dense [B, N, Hkv, X] or paged [num_pages, page_size, Hkv, X] */
  clattn_tensor maybe_scale_shift; /* fp8 only: [B, N, Hkv] or [num_pages, page_size, Hkv] i32 */
  clattn_tensor out;               /* [B, n, Hkv, D] f32/f16/bf16, any strides */
  clattn_tensor maybe_start;       /* [B] i32 first position of each sequence; absent: 0 */
  clattn_tensor maybe_block_table; /* paged: [B, max_pages] i32 */
  clattn_tensor maybe_error_flag;  /* [1] i32: set to 1 when a row was out of range */
  int kv_groups;                   /* int4 groups per row (1, 2, 4, 8); 0 = 1 */
} clattn_kv_dequantize_params;

CLATTN_API clattn_status clattn_kv_dequantize(clattn_context *ctx, cl_command_queue queue,
                                              const clattn_kv_dequantize_params *params,
                                              cl_uint num_wait, const cl_event *wait_list,
                                              cl_event *event);

/* X, the last dimension of a cache tensor of `dtype` for head dim D: D for
 * f32/f16/bf16, kv_groups + D/8 words for int4 (kv_groups 0 = 1), D/4 words
 * for fp8. 0 when the combination is invalid (D not a multiple of 8, ...). */
CLATTN_API int64_t clattn_kv_row_size(clattn_dtype dtype, int head_dim, int kv_groups);


/* ------------------------------------------------------------------ merging attention states */

/* Merges n partial attention states of the same queries over disjoint sets
 * of keys (split-K chunks, a shared prefix and a per-request suffix,
 * sequence shards on several devices), in f32:
 *
 *   lse = log sum_i exp(lse_i),   o = sum_i exp(lse_i - lse) o_i
 *
 * Special values, row by row:
 *   - a part with lse_i = -inf (no keys) contributes nothing and its o_i is
 *     not read (it may hold garbage or NaN); all parts -inf gives o = 0,
 *     lse = -inf. A part whose weight underflows to 0 is not read either;
 *   - lse_i = NaN or +inf in any part gives o = NaN and lse = NaN;
 *   - NaN or inf inside an o_i of non-zero weight reaches o; lse stays finite.
 * Each part is its own view (buffer, offset, strides); parts stacked in one
 * buffer at a constant spacing are merged in one launch however many there
 * are, otherwise up to 8 or 16 per launch (by the device's kernel-argument
 * space) and longer lists in chunks through an f32 workspace.
 * The outputs must not overlap the inputs. */
typedef struct clattn_merge_params {
  int n;                          /* number of parts, >= 1 */
  const clattn_tensor *parts_o;   /* n views [B, M, H, D] f32/f16/bf16, one dtype for all */
  const clattn_tensor *parts_lse; /* n views [B, H, M] f32, natural log */
  clattn_tensor o;                /* [B, M, H, D] f32/f16/bf16 (may differ from the parts') */
  clattn_tensor maybe_lse;        /* [B, H, M] f32 */
  /* f32 workspace for lists longer than one launch takes (see
   * clattn_merge_workspace_size); absent: allocated per call. */
  clattn_tensor maybe_workspace;
} clattn_merge_params;

CLATTN_API clattn_status clattn_merge(clattn_context *ctx, cl_command_queue queue,
                                      const clattn_merge_params *params, cl_uint num_wait,
                                      const cl_event *wait_list, cl_event *event);

/* Bytes of workspace clattn_merge needs for these params (0: none). */
CLATTN_API clattn_status clattn_merge_workspace_size(clattn_context *ctx,
                                                     const clattn_merge_params *params,
                                                     size_t *bytes);

/* Backward of clattn_merge. With w_i = exp(lse_i - lse):
 *
 *   do_i = w_i do,   dlse_i = w_i (dlse + sum_d do (o_i - o))
 *
 * A part with w_i = 0 (lse_i = -inf) gets do_i = 0 and dlse_i = 0 and its
 * o_i is not read; an empty row (lse = -inf) gives zeros. NaN in any input
 * of a row reaches that row's gradients. The outputs must not overlap the
 * inputs. */
typedef struct clattn_merge_backward_params {
  int n;
  const clattn_tensor *parts_o;   /* n views [B, M, H, D] f32/f16/bf16, one dtype */
  const clattn_tensor *parts_lse; /* n views [B, H, M] f32 */
  clattn_tensor o;                /* the forward's o [B, M, H, D]; needed only with maybe_do */
  clattn_tensor lse;              /* the forward's lse [B, H, M] f32 */
  clattn_tensor maybe_do;         /* [B, M, H, D] f32/f16/bf16; absent: 0 */
  clattn_tensor maybe_dlse;       /* [B, H, M] f32; absent: 0 */
  const clattn_tensor *d_parts_o;   /* n outputs [B, M, H, D] f32/f16/bf16, one dtype */
  const clattn_tensor *d_parts_lse; /* n outputs [B, H, M] f32 */
} clattn_merge_backward_params;

CLATTN_API clattn_status clattn_merge_backward(clattn_context *ctx, cl_command_queue queue,
                                               const clattn_merge_backward_params *params,
                                               cl_uint num_wait, const cl_event *wait_list,
                                               cl_event *event);

/* Sequence-parallel decode over several devices: one long KV cache is cut
 * along the sequence, each device holds its range in its own buffers and
 * runs clattn_decode on it; the partial (o, lse) come to the first device
 * and clattn_merge combines them.
 *
 * Recipe for shard j of a cache cut at positions s_0 = 0 < s_1 < ... < s_n:
 *   params.q        a copy of q on that device (the same queries everywhere);
 *   params.k, v     its keys [B, s_{j+1} - s_j, Hkv, D] (or its pages);
 *   params.maybe_kv_len  min(max(len_b - s_j, 0), s_{j+1} - s_j) per sequence
 *                   (an empty shard gives lse = -inf: it adds nothing);
 *   params.o, maybe_lse  the shard's partial output on its device, any float
 *                   dtype for o (f32 keeps the merge exact), lse required;
 *   params.causal   (Mq > 1) only on the shard where the sequences end; the
 *                   others see all their keys, which holds when that last
 *                   shard has at least Mq - 1 keys of every sequence.
 * Shards whose context is the first shard's (one context over several
 * devices, or one device listed twice) hand their partials over through
 * events, without the host. Shards of other contexts are read back to host
 * memory and copied to the first device: the call then waits on the host
 * for those shards (and for wait_list before starting them).
 * Shards of one context may run at once: what a shard writes (o, lse,
 * workspace) shares no element with another shard's tensors, and the
 * result (o, lse) none with a shard's inputs or workspace (o may be their q). */
typedef struct clattn_decode_shard {
  clattn_context *ctx;        /* this device */
  cl_command_queue queue;     /* a queue of ctx */
  clattn_decode_params params; /* this device's part, as above */
} clattn_decode_shard;

typedef struct clattn_decode_multi_params {
  int n;                             /* shards, >= 1 */
  const clattn_decode_shard *shards; /* shards[0] is the device the result lands on */
  clattn_tensor o;                   /* [B, Mq, Hq, D] f32/f16/bf16 on shards[0]'s context */
  clattn_tensor maybe_lse;           /* [B, Hq, Mq] f32 */
} clattn_decode_multi_params;

/* wait_list: events of shards[0]'s context. event: the merge on shards[0].queue. */
CLATTN_API clattn_status clattn_decode_multi(const clattn_decode_multi_params *params,
                                             cl_uint num_wait, const cl_event *wait_list,
                                             cl_event *event);


/* ------------------------------------------------------------------ ReRoPE windowed attention */

/* ReRoPE windowed attention (https://kexue.fm/archives/9708):
 *
 *   s_ij = scale * (|p_i - p_j| < window ? q1_i . k1_j : q2_i . k2_j)
 *   o_i  = sum_j softmax_j(s_ij) v_j,   lse_i = log sum_j exp(s_ij)
 *
 * over keys j with p_j <= p_i when causal. Query i sits at position
 * p_i = Nk - Nq + i (bottom-right aligned), key j at p_j = j. GQA: query head h
 * reads KV head h / (Hq / Hkv). A row without visible keys gives o = 0 and
 * lse = -inf (and no gradient). Storage f32, f16 or bf16 (one dtype for every
 * tensor but lse), f32 accumulation; head dims: multiples of 8 up to 256.
 * With window >= N this is plain (flash) attention.
 * Speed: tiles wholly inside or outside the window compute one product, only
 * band-edge tiles both. On NVIDIA, f16/bf16 inputs with a contiguous head dim
 * and 16-byte aligned rows (offsets and strides multiples of 8 elements, row
 * strides below 2^23 elements) run on tensor cores (head dims multiple of 16
 * up to 256; the on-the-fly rotary backward up to 128); everything else on
 * the portable kernels. */
typedef struct clattn_rerope_params {
  clattn_tensor q1;        /* [Z, Hq, Nq, D] queries for pairs inside the window */
  clattn_tensor q2;        /* [Z, Hq, Nq, D] queries for pairs outside */
  clattn_tensor k1;        /* [Z, Hkv, Nk, D] keys inside the window */
  clattn_tensor k2;        /* [Z, Hkv, Nk, D] keys outside */
  clattn_tensor v;         /* [Z, Hkv, Nk, D] */
  clattn_tensor o;         /* [Z, Hq, Nq, D] output */
  clattn_tensor maybe_lse; /* [Z, Hq, Nq] f32 natural log (the backward needs it) */
  int window;              /* W >= 0 */
  float scale;             /* finite, any sign (a negative one flips the logits); 0: 1/sqrt(D) */
  int causal;
} clattn_rerope_params;

CLATTN_API clattn_status clattn_rerope_fwd(clattn_context *ctx, cl_command_queue queue,
                                           const clattn_rerope_params *params,
                                           cl_uint num_wait, const cl_event *wait_list,
                                           cl_event *event);

/* Backward of clattn_rerope_fwd: given dout, the gradients of q1..v. dk1, dk2
 * and dv are summed over the query heads of each group. Deterministic (no
 * float atomics). Every output element is written. */
typedef struct clattn_rerope_bwd_params {
  clattn_tensor q1, q2;    /* [Z, Hq, Nq, D] as in the forward */
  clattn_tensor k1, k2, v; /* [Z, Hkv, Nk, D] */
  clattn_tensor o;         /* [Z, Hq, Nq, D] the forward's output */
  clattn_tensor lse;       /* [Z, Hq, Nq] f32, the forward's lse */
  clattn_tensor dout;      /* [Z, Hq, Nq, D] gradient of o */
  clattn_tensor dq1, dq2;  /* [Z, Hq, Nq, D] outputs */
  clattn_tensor dk1, dk2, dv; /* [Z, Hkv, Nk, D] outputs */
  /* Optional f32 workspace of clattn_rerope_bwd_workspace_size bytes (delta = rowsum(o * dout));
   * absent: allocated per call and released once the kernels have finished. */
  clattn_tensor maybe_workspace;
  int window;
  float scale; /* 0: 1/sqrt(D) */
  int causal;
} clattn_rerope_bwd_params;

CLATTN_API clattn_status clattn_rerope_bwd(clattn_context *ctx, cl_command_queue queue,
                                           const clattn_rerope_bwd_params *params,
                                           cl_uint num_wait, const cl_event *wait_list,
                                           cl_event *event);

/* Bytes of f32 workspace the backward needs for Z * Hq * Nq rows (0 when one is not
 * positive, SIZE_MAX when the product overflows). */
CLATTN_API size_t clattn_rerope_bwd_workspace_size(int64_t Z, int64_t Hq, int64_t Nq);

/* Which kernels clattn_rerope_fwd (backward = 0) or clattn_rerope_bwd
 * (backward = 1, with dout laid out like o) runs for these tensors:
 * "tensor cores", "tensor cores (warpgroup MMA)" (sm_90's asynchronous
 * warpgroup instructions, where the tuning enables them: rerope_wgmma for
 * the forward, rerope_bwd_wgmma for the backward) or
 * "portable"; NULL, the reason in clattn_last_error, when
 * params fail the forward's shape and dtype checks. */
CLATTN_API const char *clattn_rerope_kernels(clattn_context *ctx, const clattn_rerope_params *params,
                                             int backward);

/* On-the-fly rotary variant: the caller holds raw q and k only; the kernels
 * compute q1 = RoPE(q, p_i), k1 = RoPE(k, p_j), q2 = RoPE(q, window), k2 = k,
 * so the logit outside the window is the rotation by exactly `window` (ReRoPE).
 * Positions are int32 [N] (shared by the batch) or [Z, N]; absent: the
 * defaults above. Pair i of the head dim turns by p * theta^(-2i/D). */
typedef enum clattn_rope_layout {
  CLATTN_ROPE_NEOX = 0,        /* pairs (i, i + D/2) (GPT-NeoX, Llama in HF) */
  CLATTN_ROPE_INTERLEAVED = 1, /* pairs (2i, 2i + 1) (GPT-J, original Llama) */
} clattn_rope_layout;

typedef struct clattn_rerope_rotary_params {
  clattn_tensor q;           /* [Z, Hq, Nq, D] raw (unrotated) queries */
  clattn_tensor k;           /* [Z, Hkv, Nk, D] raw keys */
  clattn_tensor v;           /* [Z, Hkv, Nk, D] */
  clattn_tensor o;           /* [Z, Hq, Nq, D] output */
  clattn_tensor maybe_lse;   /* [Z, Hq, Nq] f32 */
  clattn_tensor maybe_q_pos; /* [Nq] or [Z, Nq] i32; absent: Nk - Nq + i */
  clattn_tensor maybe_k_pos; /* [Nk] or [Z, Nk] i32; absent: j */
  int window;
  float scale;               /* 0: 1/sqrt(D) */
  int causal;                /* with positions: key j visible when p_j <= p_i */
  float rope_theta;          /* RoPE base; 0: 10000 */
  clattn_rope_layout rope_layout;
} clattn_rerope_rotary_params;

CLATTN_API clattn_status clattn_rerope_rotary_fwd(clattn_context *ctx, cl_command_queue queue,
                                                  const clattn_rerope_rotary_params *params,
                                                  cl_uint num_wait, const cl_event *wait_list,
                                                  cl_event *event);

/* clattn_rerope_kernels for the rotary variant: "tensor cores" or "portable"
 * for clattn_rerope_rotary_fwd (backward = 0) or clattn_rerope_rotary_bwd
 * (backward = 1) on these tensors; NULL, the reason in clattn_last_error,
 * when params fail the forward's checks. */
CLATTN_API const char *clattn_rerope_rotary_kernels(clattn_context *ctx,
                                                    const clattn_rerope_rotary_params *params,
                                                    int backward);

/* Backward of the rotary variant: dq, dk (through the rotations) and dv. */
typedef struct clattn_rerope_rotary_bwd_params {
  clattn_tensor q;    /* [Z, Hq, Nq, D] raw, as in the forward */
  clattn_tensor k, v; /* [Z, Hkv, Nk, D] */
  clattn_tensor o;    /* [Z, Hq, Nq, D] the forward's output */
  clattn_tensor lse;  /* [Z, Hq, Nq] f32, the forward's lse */
  clattn_tensor dout; /* [Z, Hq, Nq, D] gradient of o */
  clattn_tensor dq;   /* [Z, Hq, Nq, D] output */
  clattn_tensor dk, dv; /* [Z, Hkv, Nk, D] outputs, summed over each group's query heads */
  clattn_tensor maybe_q_pos, maybe_k_pos; /* as in the forward */
  clattn_tensor maybe_workspace;          /* as in clattn_rerope_bwd_params */
  int window;
  float scale;
  int causal;
  float rope_theta;
  clattn_rope_layout rope_layout;
} clattn_rerope_rotary_bwd_params;

CLATTN_API clattn_status clattn_rerope_rotary_bwd(clattn_context *ctx, cl_command_queue queue,
                                                  const clattn_rerope_rotary_bwd_params *params,
                                                  cl_uint num_wait, const cl_event *wait_list,
                                                  cl_event *event);

/* ------------------------------------------------------------------ unfused reference (CLBlast) */

/* The unfused path on the GPU: the baseline the CLI measures against, and a
 * fast check for shapes too large for a CPU reference. It computes the same
 * as clattn_decode for dense float K/V (all of clattn_decode_params except
 * the block table, the quantized dtypes and the workspace) in three steps:
 * CLBlast's batched SGEMM S = scale Q K^T, a softmax kernel (bias, kv_len
 * and causal masking, lse), and SGEMM O = P V, in f32. f16/bf16 inputs are
 * first staged to f32 (CLBlast's half GEMM needs cl_khr_fp16); batches are
 * processed in chunks so each staged K/V slab stays under 2^28 floats. Keys
 * past kv_len are still read by the GEMMs, so they must hold finite values.
 * Needs an in-order queue. Temporary buffers are allocated per call. A
 * maybe_error_flag is checked but not written: bad varlen ranges are skipped
 * as clattn_decode skips them, without the flag.
 * Built without CLBlast it returns CLATTN_UNSUPPORTED. */
CLATTN_API clattn_status clattn_reference_decode(clattn_context *ctx, cl_command_queue queue,
                                                 const clattn_decode_params *params,
                                                 cl_uint num_wait, const cl_event *wait_list,
                                                 cl_event *event);

#ifdef __cplusplus
}
#endif
#endif /* CLATTN_H */
