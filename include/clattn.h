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
 * enqueues anything.
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
 * for the packed quantized dtypes). A tensor with buf == NULL is absent
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

/* Releases the context and its cached programs; sets *ctx to NULL. NULL is fine. */
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
} clattn_device_profile;

CLATTN_API clattn_status clattn_context_profile(const clattn_context *ctx,
                                                clattn_device_profile *out);
CLATTN_API clattn_status clattn_device_profile_query(cl_device_id device,
                                                     clattn_device_profile *out);

/* Device enumeration in the order CLATTN_DEVICE indices refer to. */
CLATTN_API clattn_status clattn_device_count(cl_uint *count);
CLATTN_API clattn_status clattn_device_get(cl_uint index, cl_device_id *device);

/* ------------------------------------------------------------------ decode */

/* Split-K decode attention.
 *
 *   o[b, m, h] = softmax_j(scale * q[b, m, h] . k[b, j, h / G] + bias[b, h, m, j]) v[b, j, h / G]
 *
 * with G = Hq / Hkv, j < kv_len[b] (and j <= kv_len[b] - Mq + m when causal).
 * A sequence of length 0 gives o = 0 and lse = -inf. */
typedef struct clattn_decode_params {
  clattn_tensor q; /* [B, Mq, Hq, D] f32/f16/bf16; varlen: [1, total_q, Hq, D] */
  clattn_tensor k; /* dense [B, Nkv, Hkv, D]; paged [num_pages, page_size, Hkv, D] */
  clattn_tensor v; /* like k */
  clattn_tensor o; /* like q, f32/f16/bf16 */
  clattn_tensor maybe_lse;    /* [B, Hq, Mq] f32, natural log; varlen: [1, Hq, total_q] */
  clattn_tensor maybe_kv_len; /* [B] i32; absent: every sequence has Nkv keys */
  clattn_tensor maybe_bias;   /* [B, Hq, Mq, Nkv] f32 additive, any strides */
  /* Paged cache: [B, max_pages] i32 physical page of each logical page. */
  clattn_tensor maybe_block_table;
  /* Varlen queries: [B + 1] i32, sequence b owns packed queries q_start[b]..q_start[b+1]-1. */
  clattn_tensor maybe_q_start;
  /* fp8 K/V: [.., N, Hkv] i32 per row (fp16 scale low, fp16 shift high), indexed like k/v rows. */
  clattn_tensor maybe_k_scale_shift;
  clattn_tensor maybe_v_scale_shift;
  /* Optional [1] i32 flag set to 1 by the kernel when a block-table entry was
   * out of range (that page is skipped, nothing is read outside the cache). */
  clattn_tensor maybe_error_flag;
  int kv_groups;  /* int4 quantization groups per row (1, 2, 4, 8); 0 = 1 */
  int batch;      /* B; required with varlen, else 0 = from q */
  int max_q_len;  /* varlen: the largest q_start[b+1] - q_start[b] (0 = total_q) */
  float scale;    /* 0: 1/sqrt(D) */
  int causal;     /* query m of Mq sits at position kv_len - Mq + m */
  int num_splits; /* 0: chosen per device; >= 1 fixes the split-K count */
  /* Optional f32 workspace for split-K partials (see clattn_decode_workspace_size);
   * absent: allocated per call and released once the kernels have finished. */
  clattn_tensor maybe_workspace;
} clattn_decode_params;

CLATTN_API clattn_status clattn_decode(clattn_context *ctx, cl_command_queue queue,
                                       const clattn_decode_params *params,
                                       cl_uint num_wait, const cl_event *wait_list,
                                       cl_event *event);

/* Paged caches: key j of sequence b is row j % page_size of page
 * block_table[b, j / page_size]. An entry outside [0, num_pages) or a
 * kv_len beyond max_pages * page_size is never read: those keys are skipped
 * (as if masked) and maybe_error_flag, when given, is set to 1. A kv_len
 * above the cache's capacity (Nkv, or max_pages * page_size) is clamped to
 * it and also sets the flag; a negative kv_len counts as 0.
 *
 * Varlen: q is [1, total_q, Hq, D], batch gives B and maybe_q_start the
 * packed rows of each sequence; causal applies per sequence. */

/* Bytes of workspace clattn_decode needs for these params (0 when S = 1),
 * and the split count it will use. Either out pointer may be NULL. */
CLATTN_API clattn_status clattn_decode_workspace_size(clattn_context *ctx,
                                                      const clattn_decode_params *params,
                                                      size_t *bytes, int *num_splits);

/* ------------------------------------------------------------------ KV cache: append, quantize, dequantize */

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
 * for those shards (and for wait_list before starting them). */
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
 * Needs an in-order queue. Temporary buffers are allocated per call.
 * Built without CLBlast it returns CLATTN_UNSUPPORTED. */
CLATTN_API clattn_status clattn_reference_decode(clattn_context *ctx, cl_command_queue queue,
                                                 const clattn_decode_params *params,
                                                 cl_uint num_wait, const cl_event *wait_list,
                                                 cl_event *event);

#ifdef __cplusplus
}
#endif
#endif /* CLATTN_H */
