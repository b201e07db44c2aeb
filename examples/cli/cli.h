/* The clattn command-line tool: shared plumbing for its subcommands. */
#ifndef CLATTN_CLI_H
#define CLATTN_CLI_H

#include "clattn.h"

#include <stdbool.h>
#include <stdint.h>

/* An open device: context and a profiling queue. */
typedef struct cli_env {
  clattn_context *ctx;
  cl_command_queue queue;
  clattn_device_profile profile;
} cli_env;

/* Opens the device named by `selector` (index or name substring; NULL:
 * $CLATTN_DEVICE, else the default). Prints the error and returns false. */
bool cli_open(const char *selector, cli_env *env);
void cli_close(cli_env *env);

/* Flags: --name VALUE (or --name=VALUE); bools take no value. */
typedef enum cli_flag_type { FLAG_INT, FLAG_BOOL, FLAG_STR, FLAG_DOUBLE } cli_flag_type;
typedef struct cli_flag {
  const char *name; /* without the leading "--" */
  cli_flag_type type;
  void *ptr;        /* int*, bool*, const char**, double* */
  const char *help;
} cli_flag;

/* Parses argv (after the subcommand words). Returns 0 to go on, 1 when
 * --help was printed (exit 0), 2 after printing a one-line error (exit 2). */
int cli_parse(const char *usage, int argc, char **argv, const cli_flag *flags, int nflags);

/* Parses a dtype name (f32, f16, bf16, int4, int4g2, int4g4, int4g8, fp8, fp8fnuz);
 * *groups gets the int4 group count (1 otherwise). false for an unknown name. */
bool cli_dtype(const char *name, clattn_dtype *dt, int *groups);

/* Kernel time of a finished event from its profiling info, in ms. */
double cli_event_ms(cl_event e);
/* Median of n values (sorts v). */
double cli_median(double *v, int n);
/* A progress line on stderr ("\r[label] i/n") when stderr is a terminal or
 * the run is long; cli_progress_done ends the line. */
void cli_progress(const char *label, int i, int n);
void cli_progress_done(void);

/* Timed runs of fn, `warmup` then `repeat` of them, with a progress line
 * (label, also naming a failure). Each is held when `gated` (so host
 * overhead stays out; not for operations that block the host) behind a
 * kernel that spins on the device for about a millisecond while the rest is
 * enqueued (with CLATTN_CLI_HOLD=event behind a user event instead, as
 * before: NVIDIA's driver then kept the commands until the event completed,
 * and an empty kernel took 12.6 us from the end of the one before to its own
 * end against 4.4 us from the device's queue; H100, tools/launch_floor.c,
 * tools/PERF.md session 36), a write over `flush` (flush_n words; NULL:
 * none) to evict the cache, a tick kernel, then fn.
 * Returns the median ms from the tick's end to the end of fn's event, NaN on
 * error; *last_median (when not NULL) gets the median of that event's own
 * START to END (of the whole operation where it is one kernel: no launch gap). */
typedef clattn_status (*cli_enqueue_fn)(void *priv, cl_event *done);
double cli_time_median(cli_env *env, cl_mem flush, size_t flush_n, int warmup, int repeat,
                       bool gated, cli_enqueue_fn fn, void *priv, const char *label,
                       double *last_median);
/* A buffer twice the device's cache (8 MiB .. 512 MiB) for cli_time_median's
 * flush; *words gets its size in 4-byte words. NULL after printing an error. */
cl_mem cli_flush_buffer(cli_env *env, size_t *words);

/* Prints "clattn: <what>: <status>: <message>" to stderr; returns 1. */
int cli_fail(const char *what, clattn_status s);

/* Synthetic data, generated on the device from a hash of (seed, index) so
 * that huge caches need no host copy (timing on zeros would flatter the
 * kernels). cli_fill_random writes n elements of dtype dt (f32/f16/bf16/f64)
 * from element offset `off`: normal values times `scale`. cli_fill_quant
 * writes `rows` quantized K/V rows of head dim d: int4 (dt CLATTN_INT4,
 * `groups` scale-shift words then d/8 code words per row) or fp8 (d/4 words
 * per row, finite codes only). cli_fill_scale_shift writes n fp8 scale-shift
 * words (fp16 scale low, fp16 shift high). All print the error and return false. */
bool cli_fill_random(cli_env *env, cl_mem buf, clattn_dtype dt, size_t off, size_t n,
                     uint64_t seed, float scale);
bool cli_fill_quant(cli_env *env, cl_mem buf, clattn_dtype dt, int groups, int d, size_t rows,
                    uint64_t seed);
bool cli_fill_scale_shift(cli_env *env, cl_mem buf, size_t n, uint64_t seed);
/* Enqueues a no-op kernel; its end timestamp opens a timed region (see decode.c). */
bool cli_tick(cli_env *env, cl_event *e);
/* A buffer of `bytes` (printing the error and returning NULL on failure). */
cl_mem cli_buffer(cli_env *env, size_t bytes, const char *what);

/* Reads n elements of dt from element offset off into doubles (f32/f16/bf16/f64/i32). */
bool cli_read(cli_env *env, cl_mem buf, clattn_dtype dt, size_t off, size_t n, double *out);
/* Prints "key":"v" for a JSON object (quotes and backslashes escaped, a
 * newline as \n, other control characters dropped), then a comma when asked. */
void cli_json_str(const char *key, const char *v, bool comma);
/* A JSON boolean's text: "true" or "false". */
const char *cli_json_bool(bool v);
/* Monotonic wall clock in seconds. */
double cli_now(void);

/* The tuner's cases (tune.c): synthetic data of one shape on the device,
 * kept across candidates, each family's in its command's file. make: NULL
 * after printing the error (env is borrowed: it outlives the case); check:
 * one run with the context's tuning as it is now against the CPU reference,
 * false (why says why) on an error or a value out of tolerance; time: the
 * median device ms of `repeat` runs after `warmup`, NaN on error; kernels:
 * which kernels run, in words (NULL where the family has one kind). */
typedef struct cli_case_ops {
  void *(*make)(cli_env *env, const void *shape);
  bool (*check)(void *c, char *why, size_t n);
  double (*time)(void *c, int warmup, int repeat);
  void (*release)(void *c);
  void (*describe)(const void *shape, char *buf, size_t n);
  const char *(*kernels)(void *c);
} cli_case_ops;

/* decode.c: clattn_decode, checked on sequences 0 and B - 1 (cold L2) */
typedef struct cli_decode_shape {
  int batch, q_len, heads, kv_heads, head_dim, ctx, page_size;
  const char *dtype, *kv_dtype; /* kv_dtype NULL: dtype */
  bool paged, causal;
} cli_decode_shape;
extern const cli_case_ops cli_decode_cases;
/* quant.c: quantize + dequantize, against the reference codecs, timed as the sum */
typedef struct cli_quant_shape {
  int rows, heads, head_dim;
  const char *kv_dtype, *dtype;
} cli_quant_shape;
extern const cli_case_ops cli_quant_cases;
/* merge.c: n partial states of [batch, 1, heads, head_dim] in separate buffers */
typedef struct cli_merge_shape {
  int n, batch, heads, head_dim;
  const char *dtype;
} cli_merge_shape;
extern const cli_case_ops cli_merge_cases;
/* rerope.c: the forward, Z = 1, Nq = Nk = n, checked in full when small, else on sampled rows */
typedef struct cli_rerope_shape {
  int heads, kv_heads, n, head_dim, window; /* kv_heads 0: heads */
  const char *dtype;
  bool causal;
} cli_rerope_shape;
extern const cli_case_ops cli_rerope_cases;
/* The backward on the same shapes: each candidate checked in full on a small
 * problem of the same head dim, dtype and mask, then the backward timed. */
extern const cli_case_ops cli_rerope_bwd_cases;

/* Subcommands: each returns the process exit code (0 ok, 1 check failed or
 * runtime error, 2 bad usage). */
int cli_devices(int argc, char **argv);
int cli_run_decode(int argc, char **argv);
int cli_run_merge(int argc, char **argv);
int cli_run_rerope(int argc, char **argv);
int cli_run_quant(int argc, char **argv);
int cli_tune(int argc, char **argv);

#endif
