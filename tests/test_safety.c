/* The catalogue of bad inputs: for every public operation, a valid call and
 * a table of mutations of it (a field NULL, a shape, stride, offset, dtype
 * or buffer wrong, an output over an input, an int out of range). Each bad
 * case must return its status with a message naming the argument and the
 * dimension, and enqueue nothing (enqueue_count.c counts every clEnqueue*
 * call); every buffer sits between guard bytes (common.c) that must stay
 * untouched, and each operation's valid call must still succeed at the
 * end. (Bad data on the device that the kernels must bound: varlen starts
 * in test_decode_errors.c, block-table entries and lengths in test_decode.c.) */
#include "common.h"
#include "enqueue_count.h"
#include "internal.h"
#include "ref.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the calls and their state */

#define NPARTS 3
typedef struct state {
  clattn_decode_params dec;
  clattn_decode_multi_params mul;
  clattn_decode_shard shards[2];
  clattn_kv_append_params app;
  clattn_kv_quantize_params qnt;
  clattn_kv_dequantize_params deq;
  clattn_merge_params mrg;
  clattn_merge_backward_params mbw;
  clattn_tensor parts_o[NPARTS], parts_lse[NPARTS], d_parts_o[NPARTS], d_parts_lse[NPARTS];
  clattn_rerope_params rr;
  clattn_rerope_bwd_params rrb;
  clattn_rerope_rotary_params rot;
  clattn_rerope_rotary_bwd_params rotb;
} state;

/* The pointers inside a state point into that state (it is copied per case). */
static void fixup(state *s) {
  s->mul.shards = s->shards;
  s->mrg.parts_o = s->mbw.parts_o = s->parts_o;
  s->mrg.parts_lse = s->mbw.parts_lse = s->parts_lse;
  s->mbw.d_parts_o = s->d_parts_o;
  s->mbw.d_parts_lse = s->d_parts_lse;
}

typedef enum opid {
  DECODE, DECODE_FP8_PAGED, DECODE_INT4_VARLEN, DECODE_SIZE, REFERENCE, MULTI, APPEND, QUANTIZE,
  DEQUANTIZE, MERGE, MERGE_SIZE, MERGE_BWD, RR_FWD, RR_BWD, ROT_FWD, ROT_BWD, NOPS
} opid;
static const char *op_names[NOPS] = {
    "decode", "decode fp8 paged", "decode int4 varlen", "decode_workspace_size",
    "reference_decode", "decode_multi", "kv_append", "kv_quantize", "kv_dequantize", "merge",
    "merge_workspace_size", "merge_backward", "rerope_fwd", "rerope_bwd", "rerope_rotary_fwd",
    "rerope_rotary_bwd"};

static clattn_status call(opid op, state *s, cl_event *ev) {
  fixup(s);
  size_t bytes = 0;
  switch (op) {
  case DECODE:
  case DECODE_FP8_PAGED:
  case DECODE_INT4_VARLEN: return clattn_decode(fx.ctx, fx.queue, &s->dec, 0, NULL, ev);
  case DECODE_SIZE: return clattn_decode_workspace_size(fx.ctx, &s->dec, &bytes, NULL);
  case REFERENCE: return clattn_reference_decode(fx.ctx, fx.queue, &s->dec, 0, NULL, ev);
  case MULTI: return clattn_decode_multi(&s->mul, 0, NULL, ev);
  case APPEND: return clattn_kv_append(fx.ctx, fx.queue, &s->app, 0, NULL, ev);
  case QUANTIZE: return clattn_kv_quantize(fx.ctx, fx.queue, &s->qnt, 0, NULL, ev);
  case DEQUANTIZE: return clattn_kv_dequantize(fx.ctx, fx.queue, &s->deq, 0, NULL, ev);
  case MERGE: return clattn_merge(fx.ctx, fx.queue, &s->mrg, 0, NULL, ev);
  case MERGE_SIZE: return clattn_merge_workspace_size(fx.ctx, &s->mrg, &bytes);
  case MERGE_BWD: return clattn_merge_backward(fx.ctx, fx.queue, &s->mbw, 0, NULL, ev);
  case RR_FWD: return clattn_rerope_fwd(fx.ctx, fx.queue, &s->rr, 0, NULL, ev);
  case RR_BWD: return clattn_rerope_bwd(fx.ctx, fx.queue, &s->rrb, 0, NULL, ev);
  case ROT_FWD: return clattn_rerope_rotary_fwd(fx.ctx, fx.queue, &s->rot, 0, NULL, ev);
  case ROT_BWD: return clattn_rerope_rotary_bwd(fx.ctx, fx.queue, &s->rotb, 0, NULL, ev);
  default: return CLATTN_INVALID_ARGUMENT;
  }
}

/* ------------------------------------------------------------------ fields by name */

typedef struct field {
  const char *name;
  size_t off;
  char kind; /* 't' tensor, 'i' int, 'f' float */
} field;
#define T(path, name) {name, offsetof(state, path), 't'}
#define I(path, name) {name, offsetof(state, path), 'i'}
#define F(path, name) {name, offsetof(state, path), 'f'}

/* Field names are the ones the messages use; "dec." etc. select the struct. */
static const field fields[] = {
    T(dec.q, "dec.q"), T(dec.k, "dec.k"), T(dec.v, "dec.v"), T(dec.o, "dec.o"),
    T(dec.maybe_lse, "dec.maybe_lse"), T(dec.maybe_kv_len, "dec.maybe_kv_len"),
    T(dec.maybe_bias, "dec.maybe_bias"), T(dec.maybe_block_table, "dec.maybe_block_table"),
    T(dec.maybe_q_start, "dec.maybe_q_start"), T(dec.maybe_k_scale_shift, "dec.maybe_k_scale_shift"),
    T(dec.maybe_v_scale_shift, "dec.maybe_v_scale_shift"),
    T(dec.maybe_error_flag, "dec.maybe_error_flag"), T(dec.maybe_workspace, "dec.maybe_workspace"),
    I(dec.kv_groups, "dec.kv_groups"), I(dec.batch, "dec.batch"), I(dec.max_q_len, "dec.max_q_len"),
    F(dec.scale, "dec.scale"), I(dec.num_splits, "dec.num_splits"),
    I(mul.n, "mul.n"), T(mul.o, "mul.o"), T(mul.maybe_lse, "mul.maybe_lse"),
    T(shards[0].params.o, "s0.o"), T(shards[0].params.q, "s0.q"),
    T(shards[0].params.maybe_lse, "s0.maybe_lse"), T(shards[1].params.k, "s1.k"), T(shards[1].params.v, "s1.v"),
    T(shards[1].params.q, "s1.q"), T(shards[1].params.o, "s1.o"),
    T(shards[1].params.maybe_lse, "s1.maybe_lse"),
    T(shards[1].params.maybe_workspace, "s1.maybe_workspace"),
    I(shards[1].params.num_splits, "s1.num_splits"),
    T(app.new_k, "app.new_k"), T(app.maybe_new_v, "app.maybe_new_v"), T(app.k_cache, "app.k_cache"),
    T(app.maybe_v_cache, "app.maybe_v_cache"), T(app.maybe_k_scale_shift, "app.maybe_k_scale_shift"),
    T(app.pos, "app.pos"), T(app.maybe_new_start, "app.maybe_new_start"),
    T(app.maybe_error_flag, "app.maybe_error_flag"), I(app.kv_groups, "app.kv_groups"),
    T(qnt.src, "qnt.src"), T(qnt.cache, "qnt.cache"), T(qnt.maybe_scale_shift, "qnt.maybe_scale_shift"),
    T(qnt.maybe_start, "qnt.maybe_start"), T(qnt.maybe_block_table, "qnt.maybe_block_table"),
    I(qnt.kv_groups, "qnt.kv_groups"),
    T(deq.cache, "deq.cache"), T(deq.maybe_scale_shift, "deq.maybe_scale_shift"),
    T(deq.out, "deq.out"), T(deq.maybe_start, "deq.maybe_start"),
    T(deq.maybe_error_flag, "deq.maybe_error_flag"),
    I(mrg.n, "mrg.n"), T(mrg.o, "mrg.o"), T(mrg.maybe_lse, "mrg.maybe_lse"),
    T(mrg.maybe_workspace, "mrg.maybe_workspace"),
    T(parts_o[0], "parts_o[0]"), T(parts_o[1], "parts_o[1]"), T(parts_o[2], "parts_o[2]"),
    T(parts_lse[0], "parts_lse[0]"), T(parts_lse[1], "parts_lse[1]"),
    T(d_parts_o[0], "d_parts_o[0]"), T(d_parts_o[1], "d_parts_o[1]"), T(d_parts_o[2], "d_parts_o[2]"),
    T(d_parts_lse[0], "d_parts_lse[0]"),
    I(mbw.n, "mbw.n"), T(mbw.o, "mbw.o"), T(mbw.lse, "mbw.lse"), T(mbw.maybe_do, "mbw.maybe_do"),
    T(mbw.maybe_dlse, "mbw.maybe_dlse"),
    T(rr.q1, "rr.q1"), T(rr.q2, "rr.q2"), T(rr.k1, "rr.k1"), T(rr.k2, "rr.k2"), T(rr.v, "rr.v"),
    T(rr.o, "rr.o"), T(rr.maybe_lse, "rr.maybe_lse"), I(rr.window, "rr.window"),
    F(rr.scale, "rr.scale"),
    T(rrb.q1, "rrb.q1"), T(rrb.v, "rrb.v"), T(rrb.lse, "rrb.lse"), T(rrb.dout, "rrb.dout"),
    T(rrb.dq1, "rrb.dq1"), T(rrb.dq2, "rrb.dq2"), T(rrb.dk1, "rrb.dk1"), T(rrb.dk2, "rrb.dk2"),
    T(rrb.dv, "rrb.dv"), T(rrb.maybe_workspace, "rrb.maybe_workspace"),
    T(rot.q, "rot.q"), T(rot.k, "rot.k"), T(rot.o, "rot.o"), T(rot.maybe_q_pos, "rot.maybe_q_pos"),
    T(rot.maybe_k_pos, "rot.maybe_k_pos"), F(rot.rope_theta, "rot.rope_theta"),
    I(rot.rope_layout, "rot.rope_layout"),
    T(rotb.q, "rotb.q"), T(rotb.k, "rotb.k"), T(rotb.lse, "rotb.lse"), T(rotb.dq, "rotb.dq"),
    T(rotb.dk, "rotb.dk"), T(rotb.dv, "rotb.dv"), T(rotb.maybe_k_pos, "rotb.maybe_k_pos"),
};
#undef T
#undef I
#undef F

static const field *field_of(const char *name) {
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (strcmp(fields[i].name, name) == 0) return &fields[i];
  fprintf(stderr, "test_safety: no field %s\n", name);
  abort();
}

/* ------------------------------------------------------------------ mutations */

typedef enum mkind {
  M_END, M_SHAPE, M_STRIDE, M_OFFSET, M_DTYPE, M_NDIM, M_NULL, M_FOREIGN, M_SMALL, M_ALIAS,
  M_COPY, M_INT, M_FLOAT
} mkind;
typedef struct mut {
  const char *field;
  mkind kind;
  int axis;
  int64_t v;
  const char *other; /* M_ALIAS: field's bytes start v bytes into other's; M_COPY: other's view */
  double fv;
} mut;
#define SH(f, a, x) {f, M_SHAPE, a, x, NULL, 0}
#define ST(f, a, x) {f, M_STRIDE, a, x, NULL, 0}
#define OFF(f, x) {f, M_OFFSET, 0, x, NULL, 0}
#define DT(f, x) {f, M_DTYPE, 0, x, NULL, 0}
#define ND(f, x) {f, M_NDIM, 0, x, NULL, 0}
#define NUL(f) {f, M_NULL, 0, 0, NULL, 0}
#define FOREIGN(f) {f, M_FOREIGN, 0, 0, NULL, 0}
#define SMALL(f) {f, M_SMALL, 0, 0, NULL, 0}
#define ALIAS(f, o, d) {f, M_ALIAS, 0, d, o, 0}
#define COPY(f, o) {f, M_COPY, 0, 0, o, 0}
#define INT(f, x) {f, M_INT, 0, x, NULL, 0}
#define FLT(f, x) {f, M_FLOAT, 0, 0, NULL, x}

typedef struct bad {
  opid op;
  mut m[10];
  clattn_status status;
  const char *needle[2]; /* the argument and the dimension / what is wrong */
} bad;

#define INV CLATTN_INVALID_ARGUMENT
#define SHP CLATTN_INVALID_SHAPE
#define UNS CLATTN_UNSUPPORTED
#define OOB CLATTN_OUT_OF_BOUNDS
#define HUGE_OFF ((int64_t)-256) /* as size_t: 2^64 - 256 */
#define BIG32 (((int64_t)1 << 32) + 2)

static const bad cases[] = {
    /* ---- decode, f32 dense with every optional tensor */
    {DECODE, {NUL("dec.q")}, INV, {"q.buf is NULL", ""}},
    {DECODE, {NUL("dec.k")}, INV, {"k.buf is NULL", ""}},
    {DECODE, {NUL("dec.v")}, INV, {"v.buf is NULL", ""}},
    {DECODE, {NUL("dec.o")}, INV, {"o.buf is NULL", ""}},
    {DECODE, {ND("dec.q", 3)}, SHP, {"q.ndim is 3", "expected 4"}},
    {DECODE, {ND("dec.o", 5)}, SHP, {"o.ndim is 5", ""}},
    {DECODE, {DT("dec.q", CLATTN_I32)}, UNS, {"q.dtype i32", ""}},
    {DECODE, {DT("dec.q", 99)}, UNS, {"q.dtype unknown", ""}},
    {DECODE, {DT("dec.o", CLATTN_INT4)}, UNS, {"o.dtype int4", ""}},
    {DECODE, {SH("dec.q", 3, 60), SH("dec.o", 3, 60)}, UNS, {"q.shape[3]", "D = 60"}},
    {DECODE, {SH("dec.q", 3, 264), SH("dec.o", 3, 264)}, UNS, {"q.shape[3]", "D = 264"}},
    {DECODE, {SH("dec.q", 3, 0), SH("dec.o", 3, 0)}, UNS, {"q.shape[3]", "D = 0"}},
    {DECODE, {SH("dec.q", 2, 3), SH("dec.o", 2, 3)}, SHP, {"q.shape[2] (Hq = 3)", "k.shape[2] (Hkv = 2)"}},
    {DECODE, {SH("dec.k", 0, 1), SH("dec.v", 0, 1)}, SHP, {"k.shape[0] is 1", "expected 2 (batch B)"}},
    {DECODE, {SH("dec.k", 0, 1)}, SHP, {"k.shape[0] is 1", "expected 2 (batch B)"}},
    {DECODE, {SH("dec.v", 1, 16)}, SHP, {"v.shape[1] is 16", "expected 32"}},
    {DECODE, {SH("dec.v", 2, 1)}, SHP, {"v.shape[2] is 1", "expected 2"}},
    {DECODE, {DT("dec.v", CLATTN_F16)}, INV, {"v.dtype (f16)", "differs from k.dtype (f32)"}},
    {DECODE, {ST("dec.k", 3, 2), SH("dec.k", 1, 8), SH("dec.v", 1, 8), SH("dec.maybe_bias", 3, 8)},
     UNS, {"k.stride[3] is 2", "contiguous"}},
    {DECODE, {SH("dec.k", 3, 32)}, SHP, {"k.shape[3] is 32", "expected 64 (head dim D of q)"}},
    {DECODE, {SH("dec.o", 2, 2)}, SHP, {"o.shape[2] is 2", "expected 4"}},
    {DECODE, {SH("dec.o", 1, 2)}, SHP, {"o.shape[1] is 2", "expected 1"}},
    {DECODE, {SH("dec.q", 1, -1), SH("dec.o", 1, -1)}, SHP, {"q.shape[1] is negative", "(-1)"}},
    {DECODE, {ST("dec.k", 0, -64)}, SHP, {"k.stride[0] is negative", ""}},
    {DECODE, {ST("dec.o", 2, 0)}, INV, {"o.stride[2] (0)", "overlap"}},
    {DECODE, {ST("dec.o", 0, 0)}, INV, {"o.stride[0] (0)", "overlap"}},
    {DECODE, {ST("dec.o", 2, 32)}, INV, {"o.stride[2] (32)", "overlap"}},
    {DECODE, {ALIAS("dec.o", "dec.k", 0)}, INV, {"o overlaps k", ""}},
    {DECODE, {ALIAS("dec.o", "dec.v", 1024)}, INV, {"o overlaps v", ""}},
    {DECODE, {ALIAS("dec.o", "dec.q", 4)}, INV, {"o overlaps q", ""}},
    {DECODE, {ALIAS("dec.o", "dec.maybe_bias", 0)}, INV, {"o overlaps maybe_bias", ""}},
    {DECODE, {ALIAS("dec.maybe_lse", "dec.o", 0)}, INV, {"overlaps", "maybe_lse"}},
    {DECODE, {ALIAS("dec.maybe_lse", "dec.maybe_kv_len", 0)}, INV, {"maybe_lse overlaps maybe_kv_len", ""}},
    {DECODE, {COPY("dec.o", "dec.q"), ALIAS("dec.maybe_lse", "dec.q", 0)}, INV, {"overlaps", "maybe_lse"}},
    {DECODE, {SH("dec.maybe_lse", 2, 2)}, SHP, {"maybe_lse.shape[2] is 2", "expected 1"}},
    {DECODE, {SH("dec.maybe_lse", 1, 8)}, SHP, {"maybe_lse.shape[1] is 8", "expected 4 (Hq)"}},
    {DECODE, {DT("dec.maybe_lse", CLATTN_F16)}, UNS, {"maybe_lse.dtype f16", ""}},
    {DECODE, {ST("dec.maybe_lse", 1, 0)}, INV, {"maybe_lse.stride[1] (0)", "overlap"}},
    {DECODE, {SH("dec.maybe_kv_len", 0, 3)}, SHP, {"maybe_kv_len.shape[0] is 3", "expected 2"}},
    {DECODE, {DT("dec.maybe_kv_len", CLATTN_F32)}, UNS, {"maybe_kv_len.dtype f32", ""}},
    {DECODE, {OFF("dec.maybe_kv_len", 2)}, INV, {"maybe_kv_len.offset (2 bytes)", "multiple of its element size"}},
    {DECODE, {OFF("dec.maybe_kv_len", 1 << 20)}, OOB, {"maybe_kv_len: shape [2]", "offset 1048576"}},
    {DECODE, {FOREIGN("dec.maybe_kv_len")}, INV, {"maybe_kv_len.buf belongs to another cl_context", ""}},
    {DECODE, {ST("dec.maybe_kv_len", 0, 0)}, UNS, {"maybe_kv_len.stride[0] is 0", "must be 1"}},
    {DECODE, {SH("dec.maybe_error_flag", 0, 0)}, SHP, {"maybe_error_flag.shape[0] is 0", "expected 1"}},
    {DECODE, {SH("dec.maybe_error_flag", 0, 2)}, SHP, {"maybe_error_flag.shape[0] is 2", "expected 1"}},
    {DECODE, {DT("dec.maybe_error_flag", CLATTN_F32)}, UNS, {"maybe_error_flag.dtype f32", ""}},
    {DECODE, {ALIAS("dec.maybe_error_flag", "dec.maybe_kv_len", 4)}, INV, {"maybe_error_flag overlaps maybe_kv_len", ""}},
    {DECODE, {FOREIGN("dec.maybe_error_flag")}, INV, {"maybe_error_flag.buf belongs to another", ""}},
    {DECODE, {SH("dec.maybe_bias", 3, 31)}, SHP, {"maybe_bias.shape[3] is 31", "expected 32 (keys per sequence)"}},
    {DECODE, {SH("dec.maybe_bias", 1, 2)}, SHP, {"maybe_bias.shape[1] is 2", "expected 4 (Hq)"}},
    {DECODE, {DT("dec.maybe_bias", CLATTN_F16)}, UNS, {"maybe_bias.dtype f16", ""}},
    {DECODE, {SMALL("dec.maybe_bias")}, OOB, {"maybe_bias: shape [2, 4, 1, 32]", "the buffer holds 16 bytes"}},
    {DECODE, {COPY("dec.maybe_q_start", "dec.maybe_kv_len")}, SHP, {"q.shape[0] is 2", "expected 1 (varlen q"}},
    {DECODE, {INT("dec.kv_groups", 3)}, INV, {"kv_groups is 3", "int4 K/V only"}},
    {DECODE, {INT("dec.kv_groups", 2)}, INV, {"kv_groups is 2", "int4 K/V only"}},
    {DECODE, {INT("dec.num_splits", -1)}, INV, {"num_splits is -1", "[0, 65536]"}},
    {DECODE, {INT("dec.num_splits", INT_MAX)}, INV, {"num_splits is 2147483647", "[0, 65536]"}},
    {DECODE, {INT("dec.num_splits", 65537)}, INV, {"num_splits is 65537", ""}},
    {DECODE, {FLT("dec.scale", NAN)}, INV, {"scale (nan)", "finite and >= 0"}},
    {DECODE, {FLT("dec.scale", -1.0)}, INV, {"scale (-1)", "finite and >= 0"}},
    {DECODE, {FLT("dec.scale", INFINITY)}, INV, {"scale (inf)", ""}},
    {DECODE, {INT("dec.batch", 3)}, SHP, {"batch (3) differs from q.shape[0] (2)", ""}},
    {DECODE, {OFF("dec.q", HUGE_OFF)}, OOB, {"q: shape [2, 1, 4, 64]", "reaches beyond 2^64"}},
    {DECODE, {OFF("dec.o", HUGE_OFF)}, OOB, {"o: shape [2, 1, 4, 64]", "reaches beyond 2^64"}},
    {DECODE, {OFF("dec.maybe_lse", HUGE_OFF)}, OOB, {"maybe_lse: shape", "offset 18446744073709551360"}},
    {DECODE, {SH("dec.k", 1, BIG32), SH("dec.v", 1, BIG32), ST("dec.k", 0, ((int64_t)1 << 40) - 256)},
     UNS, {"k.shape[1] (4294967298)", "exceeds 2^31 - 1"}},
    {DECODE, {ST("dec.k", 0, ((int64_t)1 << 40) - 256)}, OOB, {"k: shape [2, 32, 2, 64]", "strides [1099511627520"}},
    {DECODE, {ST("dec.q", 0, 100000)}, OOB, {"q: shape [2, 1, 4, 64] with strides [100000", ""}},
    {DECODE, {OFF("dec.v", 1 << 20)}, OOB, {"v: shape [2, 32, 2, 64]", "offset 1048576"}},
    {DECODE, {OFF("dec.o", 2)}, INV, {"o.offset (2 bytes)", ""}},
    {DECODE, {FOREIGN("dec.q")}, INV, {"q.buf belongs to another cl_context", ""}},
    {DECODE, {FOREIGN("dec.k")}, INV, {"k.buf belongs to another cl_context", ""}},
    {DECODE, {FOREIGN("dec.v")}, INV, {"v.buf belongs to another cl_context", ""}},
    {DECODE, {FOREIGN("dec.o")}, INV, {"o.buf belongs to another cl_context", ""}},
    {DECODE, {FOREIGN("dec.maybe_lse")}, INV, {"maybe_lse.buf belongs to another cl_context", ""}},
    {DECODE, {FOREIGN("dec.maybe_bias")}, INV, {"maybe_bias.buf belongs to another cl_context", ""}},
    {DECODE, {FOREIGN("dec.maybe_workspace")}, INV, {"maybe_workspace.buf belongs to another", ""}},
    {DECODE, {INT("dec.num_splits", 4), SH("dec.maybe_workspace", 0, 4)}, OOB,
     {"maybe_workspace.shape[0] is 4 floats", "clattn_decode_workspace_size"}},
    {DECODE, {INT("dec.num_splits", 4), ST("dec.maybe_workspace", 0, 0)}, INV,
     {"maybe_workspace.stride[0] is 0", "contiguous"}},
    {DECODE, {DT("dec.maybe_workspace", CLATTN_F16)}, UNS, {"maybe_workspace.dtype f16", ""}},
    {DECODE, {ND("dec.maybe_workspace", 2)}, SHP, {"maybe_workspace.ndim is 2", "expected 1"}},
    {DECODE, {INT("dec.num_splits", 4), ALIAS("dec.maybe_workspace", "dec.o", 0), SH("dec.maybe_workspace", 0, 512)},
     INV, {"overlaps", "maybe_workspace"}},
    {DECODE, {ALIAS("dec.maybe_workspace", "dec.k", 0)}, INV, {"maybe_workspace overlaps k", ""}},
    {DECODE, {INT("dec.num_splits", 4), OFF("dec.maybe_workspace", 1 << 20)}, OOB, {"maybe_workspace: shape", "offset 1048576"}},
    {DECODE, {COPY("dec.maybe_k_scale_shift", "dec.maybe_lse")}, INV, {"maybe_k_scale_shift is only for fp8 K/V", "f32"}},
    {DECODE, {COPY("dec.maybe_block_table", "dec.maybe_bias")}, SHP, {"maybe_block_table.ndim is 4", "expected 2"}},

    /* ---- decode, fp8 K/V in pages of 16 */
    {DECODE_FP8_PAGED, {NUL("dec.maybe_k_scale_shift")}, INV, {"maybe_k_scale_shift.buf is NULL", "fp8 K/V need it"}},
    {DECODE_FP8_PAGED, {NUL("dec.maybe_v_scale_shift")}, INV, {"maybe_v_scale_shift.buf is NULL", ""}},
    {DECODE_FP8_PAGED, {SH("dec.maybe_k_scale_shift", 1, 8)}, SHP, {"maybe_k_scale_shift.shape[1] is 8", "expected 16 (k's rows)"}},
    {DECODE_FP8_PAGED, {DT("dec.maybe_v_scale_shift", CLATTN_F32)}, UNS, {"maybe_v_scale_shift.dtype f32", ""}},
    {DECODE_FP8_PAGED, {SH("dec.maybe_block_table", 0, 1)}, SHP, {"maybe_block_table.shape[0] is 1", "expected 2 (batch B)"}},
    {DECODE_FP8_PAGED, {ST("dec.maybe_block_table", 1, 2), ST("dec.maybe_block_table", 0, 1)}, UNS,
     {"maybe_block_table.stride[1] is 2", "must be 1"}},
    {DECODE_FP8_PAGED, {DT("dec.maybe_block_table", CLATTN_F32)}, UNS, {"maybe_block_table.dtype f32", ""}},
    {DECODE_FP8_PAGED, {OFF("dec.maybe_block_table", HUGE_OFF)}, OOB, {"maybe_block_table: shape [2, 2]", "offset 18446744073709551360"}},
    {DECODE_FP8_PAGED,
     {SH("dec.k", 1, 1 << 30), SH("dec.v", 1, 1 << 30), ST("dec.k", 1, 0), ST("dec.v", 1, 0),
      SH("dec.maybe_k_scale_shift", 1, 1 << 30), SH("dec.maybe_v_scale_shift", 1, 1 << 30),
      ST("dec.maybe_k_scale_shift", 1, 0), ST("dec.maybe_v_scale_shift", 1, 0), NUL("dec.maybe_bias")},
     UNS, {"max_pages 2 * page_size 1073741824", "exceeds 2^30 keys"}},
    {DECODE_FP8_PAGED, {SH("dec.k", 1, 0), SH("dec.v", 1, 0), SH("dec.maybe_k_scale_shift", 1, 0),
                        SH("dec.maybe_v_scale_shift", 1, 0)},
     SHP, {"k.shape[1] (page_size) is 0", ""}},
    {DECODE_FP8_PAGED, {INT("dec.kv_groups", 2)}, INV, {"kv_groups is 2", "(k is fp8"}},
    {DECODE_FP8_PAGED, {SH("dec.k", 3, 64), SH("dec.v", 3, 64)}, SHP, {"k.shape[3] is 64", "expected 16 (fp8 row: D/4 words)"}},
    {DECODE_FP8_PAGED, {ALIAS("dec.o", "dec.maybe_k_scale_shift", 0)}, INV, {"o overlaps maybe_k_scale_shift", ""}},
    {DECODE_FP8_PAGED, {ALIAS("dec.maybe_lse", "dec.maybe_block_table", 0)}, INV, {"maybe_lse overlaps maybe_block_table", ""}},
    {DECODE_FP8_PAGED, {FOREIGN("dec.maybe_block_table")}, INV, {"maybe_block_table.buf belongs to another", ""}},
    {DECODE_FP8_PAGED, {FOREIGN("dec.maybe_v_scale_shift")}, INV, {"maybe_v_scale_shift.buf belongs to another", ""}},
    {DECODE_FP8_PAGED, {SH("dec.maybe_bias", 3, 31)}, SHP, {"maybe_bias.shape[3] is 31", "expected 32"}},

    /* ---- decode, int4 K/V, varlen queries */
    {DECODE_INT4_VARLEN, {INT("dec.batch", 0)}, INV, {"batch is 0", "varlen decode needs"}},
    {DECODE_INT4_VARLEN, {INT("dec.batch", -1)}, INV, {"batch is -1", ""}},
    {DECODE_INT4_VARLEN, {INT("dec.batch", INT_MAX)}, INV, {"batch is 2147483647", ""}},
    {DECODE_INT4_VARLEN, {INT("dec.max_q_len", 4)}, INV, {"max_q_len (4)", "outside [0, total_q = 3]"}},
    {DECODE_INT4_VARLEN, {INT("dec.max_q_len", -1)}, INV, {"max_q_len (-1)", ""}},
    {DECODE_INT4_VARLEN, {SH("dec.maybe_q_start", 0, 2)}, SHP, {"maybe_q_start.shape[0] is 2", "expected 3 (batch + 1)"}},
    {DECODE_INT4_VARLEN, {ST("dec.maybe_q_start", 0, 0)}, UNS, {"maybe_q_start.stride[0] is 0", "must be 1"}},
    {DECODE_INT4_VARLEN, {DT("dec.maybe_q_start", CLATTN_F32)}, UNS, {"maybe_q_start.dtype f32", ""}},
    {DECODE_INT4_VARLEN, {FOREIGN("dec.maybe_q_start")}, INV, {"maybe_q_start.buf belongs to another", ""}},
    {DECODE_INT4_VARLEN, {OFF("dec.maybe_q_start", 1)}, INV, {"maybe_q_start.offset (1 bytes)", ""}},
    {DECODE_INT4_VARLEN, {INT("dec.kv_groups", 3)}, INV, {"kv_groups is 3", "1, 2, 4 or 8 groups"}},
    {DECODE_INT4_VARLEN, {INT("dec.kv_groups", 16)}, INV, {"kv_groups is 16", ""}},
    {DECODE_INT4_VARLEN, {INT("dec.kv_groups", 2)}, SHP, {"k.shape[3] is 9", "expected 10 (int4 row"}},
    {DECODE_INT4_VARLEN, {SH("dec.q", 0, 2), SH("dec.o", 0, 2)}, SHP, {"q.shape[0] is 2", "expected 1 (varlen q"}},
    {DECODE_INT4_VARLEN, {SH("dec.maybe_lse", 0, 2)}, SHP, {"maybe_lse.shape[0] is 2", "expected 1"}},
    {DECODE_INT4_VARLEN, {SH("dec.maybe_lse", 2, 2)}, SHP, {"maybe_lse.shape[2] is 2", "expected 3 (q.shape[1])"}},
    {DECODE_INT4_VARLEN, {ALIAS("dec.o", "dec.maybe_q_start", 0)}, INV, {"o overlaps maybe_q_start", ""}},
    {DECODE_INT4_VARLEN, {SH("dec.k", 2, 3), SH("dec.v", 2, 3)}, SHP, {"q.shape[2] (Hq = 4)", "k.shape[2] (Hkv = 3)"}},

    /* ---- clattn_decode_workspace_size: the same checks, nothing enqueued either */
    {DECODE_SIZE, {SH("dec.k", 0, 1)}, SHP, {"k.shape[0] is 1", "expected 2"}},
    {DECODE_SIZE, {INT("dec.num_splits", 70000)}, INV, {"num_splits is 70000", ""}},
    {DECODE_SIZE, {ALIAS("dec.o", "dec.k", 0)}, INV, {"o overlaps k", ""}},
    {DECODE_SIZE, {FOREIGN("dec.v")}, INV, {"v.buf belongs to another", ""}},

    /* ---- the CLBlast reference */
    {REFERENCE, {COPY("dec.maybe_block_table", "dec.maybe_bias")}, UNS, {"maybe_block_table", "dense K/V only"}},
    {REFERENCE, {DT("dec.k", CLATTN_INT4), DT("dec.v", CLATTN_INT4)}, UNS, {"k.dtype int4", "f32, f16 or bf16 K/V only"}},
    {REFERENCE, {SH("dec.k", 0, 1)}, SHP, {"k.shape[0] is 1", "expected 2"}},
    {REFERENCE, {ALIAS("dec.o", "dec.v", 0)}, INV, {"o overlaps v", ""}},
    {REFERENCE, {OFF("dec.maybe_kv_len", HUGE_OFF)}, OOB, {"maybe_kv_len: shape [2]", "offset 18446744073709551360"}},
    {REFERENCE, {FOREIGN("dec.maybe_lse")}, INV, {"maybe_lse.buf belongs to another", ""}},

    /* ---- decode_multi: every shard and the merge are checked before anything is enqueued */
    {MULTI, {INT("mul.n", 0)}, INV, {"n is 0", "at least one shard"}},
    {MULTI, {SH("s1.k", 0, 1), SH("s1.v", 0, 1)}, SHP, {"shards[1]: k.shape[0] is 1", "expected 2"}},
    {MULTI, {INT("s1.num_splits", 4), SH("s1.maybe_workspace", 0, 4)}, OOB,
     {"shards[1]: maybe_workspace.shape[0] is 4 floats", ""}},
    {MULTI, {NUL("s1.maybe_lse")}, INV, {"shards[1].params.maybe_lse is absent", ""}},
    {MULTI, {DT("s1.o", CLATTN_F16)}, UNS, {"shards[1].params.o.dtype (f16)", "differs from shards[0]'s (f32)"}},
    {MULTI, {ALIAS("mul.o", "s0.o", 0)}, INV, {"o overlaps parts_o[0]", ""}},
    {MULTI, {ALIAS("mul.maybe_lse", "s1.maybe_lse", 0)}, INV, {"maybe_lse overlaps parts_lse[1]", ""}},
    {MULTI, {FOREIGN("s1.q")}, INV, {"shards[1]: q.buf belongs to another cl_context", ""}},
    {MULTI, {ALIAS("s1.o", "s1.k", 0)}, INV, {"shards[1]: o overlaps k", ""}},
    /* shards of one context may run at once: one's outputs apart from the other's tensors */
    {MULTI, {ALIAS("s1.o", "s0.q", 0)}, INV, {"shards[1].params.o overlaps shards[0].params.q", ""}},
    {MULTI, {ALIAS("s1.o", "s0.o", 0)}, INV, {"shards[0].params.o overlaps shards[1].params.o", ""}},
    {MULTI, {ALIAS("s0.maybe_lse", "s1.maybe_lse", 0)}, INV,
     {"shards[0].params.maybe_lse overlaps shards[1].params.maybe_lse", ""}},
    {MULTI, {SH("mul.o", 2, 2)}, SHP, {"o.shape[2] is 2", "expected 4"}},

    /* ---- kv_append: f32 rows into an f16 cache, three rows of two sequences */
    {APPEND, {NUL("app.new_k")}, INV, {"new_k.buf is NULL", ""}},
    {APPEND, {NUL("app.pos")}, INV, {"pos.buf is NULL", ""}},
    {APPEND, {NUL("app.k_cache")}, INV, {"k_cache.buf is NULL", ""}},
    {APPEND, {SH("app.new_k", 2, 60), SH("app.maybe_new_v", 2, 60)}, UNS, {"new_k.shape[2] (60)", "multiple of 8"}},
    {APPEND, {DT("app.new_k", CLATTN_INT4)}, UNS, {"new_k.dtype int4", ""}},
    {APPEND, {DT("app.pos", CLATTN_F32)}, UNS, {"pos.dtype f32", ""}},
    {APPEND, {SH("app.maybe_new_start", 0, 2)}, SHP, {"maybe_new_start.shape[0] is 2", "expected 3"}},
    {APPEND, {NUL("app.maybe_new_v")}, INV, {"maybe_v_cache is given but maybe_new_v.buf is NULL", ""}},
    {APPEND, {SH("app.k_cache", 2, 3)}, SHP, {"k_cache.shape[2] is 3", "expected 2"}},
    {APPEND, {SH("app.k_cache", 3, 32)}, SHP, {"k_cache.shape[3] is 32", "expected 64"}},
    {APPEND, {ST("app.k_cache", 3, 2), SH("app.k_cache", 1, 8)}, SHP, {"k_cache.stride[3] (2) must be 1", ""}},
    {APPEND, {INT("app.kv_groups", 2)}, INV, {"kv_groups (2) applies to int4 caches only", ""}},
    {APPEND, {ALIAS("app.new_k", "app.k_cache", 0)}, INV, {"k_cache overlaps new_k", ""}},
    {APPEND, {ST("app.k_cache", 1, 0)}, INV, {"k_cache.stride[1] (0)", "overlap"}},
    {APPEND, {ALIAS("app.maybe_v_cache", "app.k_cache", 128)}, INV, {"overlaps", "k_cache"}},
    {APPEND, {ALIAS("app.pos", "app.maybe_v_cache", 64)}, INV, {"maybe_v_cache overlaps pos", ""}},
    {APPEND, {FOREIGN("app.k_cache")}, INV, {"k_cache.buf belongs to another", ""}},
    {APPEND, {FOREIGN("app.maybe_new_start")}, INV, {"maybe_new_start.buf belongs to another", ""}},
    {APPEND, {SH("app.maybe_error_flag", 0, 0)}, SHP, {"maybe_error_flag.shape[0] is 0", "expected 1"}},
    {APPEND, {COPY("app.maybe_k_scale_shift", "app.pos")}, INV, {"maybe_k_scale_shift is only for fp8 caches", ""}},
    {APPEND, {DT("app.maybe_v_cache", CLATTN_BF16)}, UNS, {"maybe_v_cache.dtype bf16", "differs from k_cache.dtype f16"}},
    {APPEND, {OFF("app.k_cache", HUGE_OFF)}, OOB, {"k_cache: shape [2, 32, 2, 64]", "beyond 2^64"}},
    {APPEND, {SH("app.new_k", 0, BIG32), SH("app.maybe_new_v", 0, BIG32)}, UNS, {"new_k.shape[0] (4294967298)", "exceeds"}},

    /* ---- kv_quantize: f32 rows into an int4 cache */
    {QUANTIZE, {INT("qnt.kv_groups", 3)}, INV, {"kv_groups (3) must be 1, 2, 4 or 8", ""}},
    {QUANTIZE, {SH("qnt.cache", 3, 10)}, SHP, {"cache.shape[3] is 10", "expected 9"}},
    {QUANTIZE, {SH("qnt.maybe_start", 0, 3)}, SHP, {"maybe_start.shape[0] is 3", "expected 2"}},
    {QUANTIZE, {ALIAS("qnt.cache", "qnt.src", 0)}, INV, {"cache overlaps src", ""}},
    {QUANTIZE, {COPY("qnt.maybe_scale_shift", "qnt.maybe_start")}, INV, {"maybe_scale_shift is only for fp8", ""}},
    {QUANTIZE, {SH("qnt.src", 3, 12)}, UNS, {"src.shape[3] (12)", ""}},
    {QUANTIZE, {FOREIGN("qnt.cache")}, INV, {"cache.buf belongs to another", ""}},
    {QUANTIZE, {ST("qnt.cache", 0, 0)}, INV, {"cache.stride[0] (0)", "overlap"}},
    {QUANTIZE, {COPY("qnt.maybe_block_table", "qnt.maybe_start")}, SHP, {"maybe_block_table.ndim is 1", ""}},

    /* ---- kv_dequantize: an fp8 cache back to f32 */
    {DEQUANTIZE, {NUL("deq.maybe_scale_shift")}, INV, {"maybe_scale_shift.buf is NULL", "fp8 cache needs"}},
    {DEQUANTIZE, {SH("deq.maybe_scale_shift", 2, 1)}, SHP, {"maybe_scale_shift.shape[2] is 1", "expected 2"}},
    {DEQUANTIZE, {ALIAS("deq.out", "deq.cache", 0)}, INV, {"out overlaps cache", ""}},
    {DEQUANTIZE, {ST("deq.out", 1, 0)}, INV, {"out.stride[1] (0)", "overlap"}},
    {DEQUANTIZE, {DT("deq.out", CLATTN_INT4)}, UNS, {"out.dtype int4", ""}},
    {DEQUANTIZE, {SH("deq.out", 2, 3)}, SHP, {"cache.shape[2] is 2", "expected 3"}},
    {DEQUANTIZE, {FOREIGN("deq.maybe_scale_shift")}, INV, {"maybe_scale_shift.buf belongs to another", ""}},
    {DEQUANTIZE, {DT("deq.maybe_start", CLATTN_F32)}, UNS, {"maybe_start.dtype f32", ""}},
    {DEQUANTIZE, {ALIAS("deq.maybe_error_flag", "deq.out", 0)}, INV, {"overlaps", "maybe_error_flag"}},
    {DEQUANTIZE, {OFF("deq.out", HUGE_OFF)}, OOB, {"out: shape [2, 4, 2, 64]", "beyond 2^64"}},

    /* ---- merge: three parts */
    {MERGE, {INT("mrg.n", 0)}, INV, {"n is 0", "at least one part"}},
    {MERGE, {SH("parts_o[1]", 3, 8)}, SHP, {"parts_o[1].shape[3] is 8", "expected 16"}},
    {MERGE, {DT("parts_o[2]", CLATTN_F16)}, UNS, {"parts_o[2].dtype (f16)", "differs from parts_o[0].dtype (f32)"}},
    {MERGE, {SH("parts_lse[1]", 1, 3)}, SHP, {"parts_lse[1].shape[1] is 3", "expected 4"}},
    {MERGE, {DT("parts_lse[0]", CLATTN_F16)}, UNS, {"parts_lse[0].dtype f16", ""}},
    {MERGE, {SH("mrg.o", 0, 1)}, SHP, {"o.shape[0] is 1", "expected 2"}},
    {MERGE, {ALIAS("mrg.o", "parts_o[1]", 0)}, INV, {"o overlaps parts_o[1]", ""}},
    {MERGE, {ALIAS("mrg.maybe_lse", "parts_lse[0]", 4)}, INV, {"maybe_lse overlaps parts_lse[0]", ""}},
    {MERGE, {ALIAS("mrg.maybe_lse", "mrg.o", 0)}, INV, {"overlaps", "maybe_lse"}},
    {MERGE, {ST("mrg.o", 3, 0)}, INV, {"o.stride[3] (0)", "overlap"}},
    {MERGE, {FOREIGN("mrg.maybe_lse")}, INV, {"maybe_lse.buf belongs to another cl_context", ""}},
    {MERGE, {FOREIGN("parts_o[2]")}, INV, {"parts_o[2].buf belongs to another cl_context", ""}},
    {MERGE, {OFF("parts_o[1]", HUGE_OFF)}, OOB, {"parts_o[1]: shape [2, 1, 4, 16]", "beyond 2^64"}},
    {MERGE, {ALIAS("mrg.maybe_workspace", "parts_o[0]", 0)}, INV, {"maybe_workspace overlaps parts_o[0]", ""}},
    {MERGE_SIZE, {ALIAS("mrg.o", "parts_o[2]", 0)}, INV, {"o overlaps parts_o[2]", ""}},
    {MERGE_SIZE, {SH("parts_lse[1]", 2, 2)}, SHP, {"parts_lse[1].shape[2] is 2", "expected 1"}},

    /* ---- merge_backward */
    {MERGE_BWD, {ALIAS("d_parts_o[0]", "parts_o[1]", 0)}, INV, {"d_parts_o[0] overlaps parts_o[1]", ""}},
    {MERGE_BWD, {ALIAS("d_parts_o[1]", "d_parts_o[2]", 64)}, INV, {"overlaps", "d_parts_o["}},
    {MERGE_BWD, {ALIAS("d_parts_lse[0]", "mbw.lse", 0)}, INV, {"d_parts_lse[0] overlaps lse", ""}},
    {MERGE_BWD, {ALIAS("d_parts_o[2]", "mbw.maybe_do", 0)}, INV, {"d_parts_o[2] overlaps maybe_do", ""}},
    {MERGE_BWD, {NUL("mbw.o")}, INV, {"o.buf is NULL", "needed with maybe_do"}},
    {MERGE_BWD, {SH("d_parts_o[1]", 1, 2)}, SHP, {"d_parts_o[1].shape[1] is 2", "expected 1"}},
    {MERGE_BWD, {NUL("mbw.lse")}, INV, {"lse.buf is NULL", ""}},
    {MERGE_BWD, {SH("mbw.maybe_dlse", 2, 2)}, SHP, {"maybe_dlse.shape[2] is 2", "expected 1"}},
    {MERGE_BWD, {DT("d_parts_o[1]", CLATTN_F16)}, UNS, {"d_parts_o[1].dtype (f16)", "differs from d_parts_o[0].dtype (f32)"}},
    {MERGE_BWD, {ST("d_parts_o[0]", 2, 0)}, INV, {"d_parts_o[0].stride[2] (0)", "overlap"}},
    {MERGE_BWD, {FOREIGN("d_parts_lse[0]")}, INV, {"d_parts_lse[0].buf belongs to another", ""}},

    /* ---- ReRoPE forward */
    {RR_FWD, {INT("rr.window", -1)}, INV, {"window (-1) is negative", ""}},
    {RR_FWD, {FLT("rr.scale", NAN)}, INV, {"scale (nan)", "must be finite"}},
    {RR_FWD, {FLT("rr.scale", -INFINITY)}, INV, {"scale (-inf)", "must be finite"}},
    {RR_FWD, {SH("rr.q2", 2, 8)}, SHP, {"q2.shape[2] is 8", "expected 16"}},
    {RR_FWD, {SH("rr.k1", 1, 3), SH("rr.k2", 1, 3), SH("rr.v", 1, 3)}, SHP, {"k1.shape[1] (Hkv = 3)", "q1.shape[1] (Hq = 4)"}},
    {RR_FWD, {DT("rr.v", CLATTN_F16)}, INV, {"v.dtype (f16)", "differs from k1.dtype (f32)"}},
    {RR_FWD, {ALIAS("rr.o", "rr.q1", 0)}, INV, {"o overlaps q1", ""}},
    {RR_FWD, {ALIAS("rr.o", "rr.v", 256)}, INV, {"o overlaps v", ""}},
    {RR_FWD, {ALIAS("rr.maybe_lse", "rr.o", 0)}, INV, {"overlaps", "maybe_lse"}},
    {RR_FWD, {ST("rr.o", 2, 0)}, INV, {"o.stride[2] (0)", "overlap"}},
    {RR_FWD, {SH("rr.q1", 3, 12)}, SHP, {"k1.shape[3] is 32", "expected 12 (q1.shape[3])"}},
    {RR_FWD, {SH("rr.q1", 3, 12), SH("rr.q2", 3, 12), SH("rr.k1", 3, 12), SH("rr.k2", 3, 12), SH("rr.v", 3, 12),
              SH("rr.o", 3, 12)}, UNS, {"q1.shape[3]", "D = 12"}},
    {RR_FWD, {FOREIGN("rr.k2")}, INV, {"k2.buf belongs to another", ""}},
    {RR_FWD, {OFF("rr.q1", HUGE_OFF)}, OOB, {"q1: shape [1, 4, 16, 32]", "beyond 2^64"}},
    {RR_FWD, {SH("rr.maybe_lse", 2, 15)}, SHP, {"maybe_lse.shape[2] is 15", "expected 16"}},

    /* ---- ReRoPE backward */
    {RR_BWD, {ALIAS("rrb.dq1", "rrb.dq2", 0)}, INV, {"overlaps", "dq"}},
    {RR_BWD, {ALIAS("rrb.dk1", "rrb.v", 0)}, INV, {"dk1 overlaps v", ""}},
    {RR_BWD, {ALIAS("rrb.dv", "rrb.dout", 0)}, INV, {"dv overlaps dout", ""}},
    {RR_BWD, {ALIAS("rrb.dk2", "rrb.dk1", 128)}, INV, {"overlaps", "dk"}},
    {RR_BWD, {SH("rrb.dq1", 2, 8)}, SHP, {"dq1.shape[2] is 8", "expected 16"}},
    {RR_BWD, {SH("rrb.lse", 1, 2)}, SHP, {"lse.shape[1] is 2", "expected 4"}},
    {RR_BWD, {SH("rrb.maybe_workspace", 0, 4)}, OOB, {"maybe_workspace.shape[0] is 4 floats", "clattn_rerope_bwd_workspace_size"}},
    {RR_BWD, {ST("rrb.maybe_workspace", 0, 0)}, INV, {"maybe_workspace.stride[0] is 0", ""}},
    {RR_BWD, {ALIAS("rrb.maybe_workspace", "rrb.dq1", 0)}, INV, {"overlaps", "maybe_workspace"}},
    {RR_BWD, {ST("rrb.dv", 3, 0)}, INV, {"dv.stride[3] (0)", "overlap"}},
    {RR_BWD, {FOREIGN("rrb.dout")}, INV, {"dout.buf belongs to another", ""}},

    /* ---- the rotary variant */
    {ROT_FWD, {FLT("rot.rope_theta", 0.5)}, INV, {"rope_theta (0.5)", "finite and > 1"}},
    {ROT_FWD, {INT("rot.rope_layout", 7)}, INV, {"rope_layout (7)", ""}},
    {ROT_FWD, {SH("rot.maybe_q_pos", 0, 8)}, SHP, {"maybe_q_pos.shape[0] is 8", "expected 16"}},
    {ROT_FWD, {DT("rot.maybe_k_pos", CLATTN_F32)}, UNS, {"maybe_k_pos.dtype f32", ""}},
    {ROT_FWD, {ALIAS("rot.maybe_q_pos", "rot.o", 4)}, INV, {"o overlaps maybe_q_pos", ""}},
    {ROT_FWD, {ALIAS("rot.o", "rot.k", 0)}, INV, {"o overlaps k", ""}},
    {ROT_FWD, {FOREIGN("rot.maybe_k_pos")}, INV, {"maybe_k_pos.buf belongs to another", ""}},
    {ROT_BWD, {ALIAS("rotb.dq", "rotb.dk", 0)}, INV, {"overlaps", "d"}},
    {ROT_BWD, {ALIAS("rotb.dk", "rotb.k", 0)}, INV, {"dk overlaps k", ""}},
    {ROT_BWD, {SH("rotb.dv", 2, 8)}, SHP, {"dv.shape[2] is 8", "expected 16"}},
    {ROT_BWD, {NUL("rotb.lse")}, INV, {"lse.buf is NULL", ""}},
    {ROT_BWD, {ALIAS("rotb.maybe_k_pos", "rotb.dq", 0)}, INV, {"dq overlaps maybe_k_pos", ""}},
};

/* ------------------------------------------------------------------ valid calls */

#define B 2
#define HQ 4
#define HKV 2
#define D 64
#define N 32

static cl_context other_cl; /* a second context on the fixture's device */

/* Every buffer of the valid calls holds twice its view plus 4 KiB: a case's
 * larger shape or alias then meets the check it is about, not the end of
 * the buffer (that has cases of its own). */
static size_t slack(size_t bytes) { return 2 * bytes + 4096; }

static cl_mem rand_buf(size_t n, clattn_dtype dt) {
  n = slack(n * clattn_dtype_size(dt)) / clattn_dtype_size(dt);
  double *x = rand_tensor(n, dt, 1.0);
  cl_mem m = buf_from(x, n, dt);
  free(x);
  return m;
}
/* i32 values behind `lead` junk elements (so an ignored offset shows). */
static cl_mem ints(const int32_t *x, int n, int lead) {
  const size_t total = slack((size_t)(n + lead) * 4) / 4;
  int32_t *tmp = calloc(total, 4);
  for (int i = 0; i < lead; i++) tmp[i] = 1 << 20;
  memcpy(tmp + lead, x, sizeof(int32_t) * (size_t)n);
  cl_mem m = buf_from_i32(tmp, total);
  free(tmp);
  return m;
}
static cl_mem words(size_t n, uint32_t w) {
  n = slack(n * 4) / 4;
  uint32_t *x = malloc(4 * (n ? n : 1));
  for (size_t i = 0; i < n; i++) x[i] = w;
  cl_mem m = buf_from_i32((const int32_t *)x, n);
  free(x);
  return m;
}

static cl_mem bufs[512];
static int nbufs;
static cl_mem keep(cl_mem m) {
  CU_ASSERT_FATAL(nbufs < (int)(sizeof bufs / sizeof bufs[0]));
  bufs[nbufs++] = m;
  return m;
}

static void make_decode(state *s) {
  static const int32_t lens[2] = {32, 5};
  clattn_decode_params *p = &s->dec;
  p->q = clattn_tensor_4d(keep(rand_buf(B * HQ * D, CLATTN_F32)), 0, CLATTN_F32, B, 1, HQ, D);
  p->k = clattn_tensor_4d(keep(rand_buf(B * N * HKV * D, CLATTN_F32)), 0, CLATTN_F32, B, N, HKV, D);
  p->v = clattn_tensor_4d(keep(rand_buf(B * N * HKV * D, CLATTN_F32)), 0, CLATTN_F32, B, N, HKV, D);
  p->o = clattn_tensor_4d(keep(buf_poison(slack(B * HQ * D * 4))), 0, CLATTN_F32, B, 1, HQ, D);
  p->maybe_lse = clattn_tensor_3d(keep(buf_poison(slack(16 * 4))), 4, CLATTN_F32, B, HQ, 1);
  p->maybe_kv_len = clattn_tensor_1d(keep(ints(lens, 2, 1)), 4, CLATTN_I32, B);
  p->maybe_bias = clattn_tensor_4d(keep(rand_buf(2 + B * HQ * N, CLATTN_F32)), 8, CLATTN_F32, B, HQ, 1, N);
  p->maybe_error_flag = clattn_tensor_1d(keep(buf_zeros(slack(16))), 4, CLATTN_I32, 1);
  p->maybe_workspace = clattn_tensor_1d(keep(buf_zeros(slack(8192 * 4))), 16, CLATTN_F32, 8188);
}

static void make_decode_fp8_paged(state *s) {
  static const int32_t table[4] = {3, 0, 1, 2}, lens[2] = {32, 20};
  clattn_decode_params *p = &s->dec;
  p->q = clattn_tensor_4d(keep(rand_buf(B * HQ * D, CLATTN_F16)), 0, CLATTN_F16, B, 1, HQ, D);
  p->o = clattn_tensor_4d(keep(buf_poison(slack(B * HQ * D * 2))), 0, CLATTN_F16, B, 1, HQ, D);
  p->k = clattn_tensor_4d(keep(words(5 * 16 * HKV * 16, 0x38302820u)), 0, CLATTN_FP8, 5, 16, HKV, 16);
  p->v = clattn_tensor_4d(keep(words(5 * 16 * HKV * 16, 0x30283820u)), 0, CLATTN_FP8, 5, 16, HKV, 16);
  p->maybe_k_scale_shift = clattn_tensor_3d(keep(words(5 * 16 * HKV, 0x3c00u)), 0, CLATTN_I32, 5, 16, HKV);
  p->maybe_v_scale_shift = clattn_tensor_3d(keep(words(5 * 16 * HKV, 0x3c00u)), 0, CLATTN_I32, 5, 16, HKV);
  p->maybe_block_table = clattn_tensor_2d(keep(ints(table, 4, 1)), 4, CLATTN_I32, B, 2);
  p->maybe_kv_len = clattn_tensor_1d(keep(ints(lens, 2, 2)), 8, CLATTN_I32, B);
  p->maybe_lse = clattn_tensor_3d(keep(buf_poison(slack(B * HQ * 4))), 0, CLATTN_F32, B, HQ, 1);
  p->maybe_bias = clattn_tensor_4d(keep(rand_buf(B * HQ * N, CLATTN_F32)), 0, CLATTN_F32, B, HQ, 1, N);
}

static void make_decode_int4_varlen(state *s) {
  static const int32_t starts[3] = {0, 2, 3};
  clattn_decode_params *p = &s->dec;
  p->q = clattn_tensor_4d(keep(rand_buf(3 * HQ * D, CLATTN_F16)), 0, CLATTN_F16, 1, 3, HQ, D);
  p->o = clattn_tensor_4d(keep(buf_poison(slack(3 * HQ * D * 2))), 0, CLATTN_F16, 1, 3, HQ, D);
  p->k = clattn_tensor_4d(keep(words(B * N * HKV * 9, 0x76543210u)), 0, CLATTN_INT4, B, N, HKV, 9);
  p->v = clattn_tensor_4d(keep(words(B * N * HKV * 9, 0x01234567u)), 0, CLATTN_INT4, B, N, HKV, 9);
  p->maybe_q_start = clattn_tensor_1d(keep(ints(starts, 3, 3)), 12, CLATTN_I32, 3);
  p->maybe_lse = clattn_tensor_3d(keep(buf_poison(slack(HQ * 3 * 4))), 0, CLATTN_F32, 1, HQ, 3);
  p->batch = B;
  p->max_q_len = 2;
  p->kv_groups = 1;
  p->causal = 1;
}

static void make_multi(state *s) {
  make_decode(s);
  static const int32_t lens0[2] = {16, 16}, lens1[2] = {16, 0};
  const clattn_decode_params *whole = &s->dec;
  for (int j = 0; j < 2; j++) {
    clattn_decode_shard *sh = &s->shards[j];
    sh->ctx = fx.ctx;
    sh->queue = fx.queue;
    clattn_decode_params *p = &sh->params;
    memset(p, 0, sizeof *p);
    p->q = whole->q;
    p->k = whole->k;
    p->v = whole->v;
    p->k.shape[1] = p->v.shape[1] = 16;
    p->k.offset = p->v.offset = (size_t)j * 16 * HKV * D * 4;
    p->o = clattn_tensor_4d(keep(buf_poison(slack(B * HQ * D * 4))), 0, CLATTN_F32, B, 1, HQ, D);
    p->maybe_lse = clattn_tensor_3d(keep(buf_poison(slack(B * HQ * 4))), 0, CLATTN_F32, B, HQ, 1);
    p->maybe_kv_len = clattn_tensor_1d(keep(ints(j ? lens1 : lens0, 2, 0)), 0, CLATTN_I32, B);
  }
  s->shards[1].params.maybe_workspace = clattn_tensor_1d(keep(buf_zeros(slack(8192 * 4))), 0, CLATTN_F32, 8192);
  s->mul.n = 2;
  s->mul.o = clattn_tensor_4d(keep(buf_poison(slack(B * HQ * D * 4))), 0, CLATTN_F32, B, 1, HQ, D);
  s->mul.maybe_lse = clattn_tensor_3d(keep(buf_poison(slack(B * HQ * 4))), 0, CLATTN_F32, B, HQ, 1);
}

static void make_append(state *s) {
  static const int32_t pos[2] = {0, 3}, start[3] = {0, 2, 3};
  clattn_kv_append_params *p = &s->app;
  p->new_k = clattn_tensor_3d(keep(rand_buf(3 * HKV * D, CLATTN_F32)), 0, CLATTN_F32, 3, HKV, D);
  p->maybe_new_v = clattn_tensor_3d(keep(rand_buf(3 * HKV * D, CLATTN_F32)), 0, CLATTN_F32, 3, HKV, D);
  p->k_cache = clattn_tensor_4d(keep(buf_poison(slack(B * N * HKV * D * 2))), 0, CLATTN_F16, B, N, HKV, D);
  p->maybe_v_cache = clattn_tensor_4d(keep(buf_poison(slack(B * N * HKV * D * 2))), 0, CLATTN_F16, B, N, HKV, D);
  p->pos = clattn_tensor_1d(keep(ints(pos, 2, 1)), 4, CLATTN_I32, B);
  p->maybe_new_start = clattn_tensor_1d(keep(ints(start, 3, 2)), 8, CLATTN_I32, 3);
  p->maybe_error_flag = clattn_tensor_1d(keep(buf_zeros(slack(8))), 4, CLATTN_I32, 1);
}

static void make_quantize(state *s) {
  static const int32_t start[2] = {0, 10};
  clattn_kv_quantize_params *p = &s->qnt;
  p->src = clattn_tensor_4d(keep(rand_buf(B * 4 * HKV * D, CLATTN_F32)), 0, CLATTN_F32, B, 4, HKV, D);
  p->cache = clattn_tensor_4d(keep(buf_poison(slack(B * N * HKV * 9 * 4))), 0, CLATTN_INT4, B, N, HKV, 9);
  p->maybe_start = clattn_tensor_1d(keep(ints(start, 2, 1)), 4, CLATTN_I32, B);
}

static void make_dequantize(state *s) {
  static const int32_t start[2] = {0, 5};
  clattn_kv_dequantize_params *p = &s->deq;
  p->cache = clattn_tensor_4d(keep(words(B * N * HKV * 16, 0x38302820u)), 0, CLATTN_FP8, B, N, HKV, 16);
  p->maybe_scale_shift = clattn_tensor_3d(keep(words(B * N * HKV, 0x3c00u)), 0, CLATTN_I32, B, N, HKV);
  p->out = clattn_tensor_4d(keep(buf_poison(slack(B * 4 * HKV * D * 4))), 0, CLATTN_F32, B, 4, HKV, D);
  p->maybe_start = clattn_tensor_1d(keep(ints(start, 2, 1)), 4, CLATTN_I32, B);
  p->maybe_error_flag = clattn_tensor_1d(keep(buf_zeros(slack(4))), 0, CLATTN_I32, 1);
}

#define MD 16
static void make_merge(state *s) {
  for (int i = 0; i < NPARTS; i++) {
    s->parts_o[i] = clattn_tensor_4d(keep(rand_buf(B * HQ * MD, CLATTN_F32)), 0, CLATTN_F32, B, 1, HQ, MD);
    s->parts_lse[i] = clattn_tensor_3d(keep(rand_buf(B * HQ, CLATTN_F32)), 0, CLATTN_F32, B, HQ, 1);
    s->d_parts_o[i] = clattn_tensor_4d(keep(buf_poison(slack(B * HQ * MD * 4))), 0, CLATTN_F32, B, 1, HQ, MD);
    s->d_parts_lse[i] = clattn_tensor_3d(keep(buf_poison(slack(B * HQ * 4))), 0, CLATTN_F32, B, HQ, 1);
  }
  s->mrg.n = NPARTS;
  s->mrg.o = clattn_tensor_4d(keep(buf_poison(slack(B * HQ * MD * 4))), 0, CLATTN_F32, B, 1, HQ, MD);
  s->mrg.maybe_lse = clattn_tensor_3d(keep(buf_poison(slack(B * HQ * 4))), 0, CLATTN_F32, B, HQ, 1);
  s->mrg.maybe_workspace = clattn_tensor_1d(keep(buf_zeros(slack(1024 * 4))), 0, CLATTN_F32, 1024);
  s->mbw.n = NPARTS;
  s->mbw.o = clattn_tensor_4d(keep(rand_buf(B * HQ * MD, CLATTN_F32)), 0, CLATTN_F32, B, 1, HQ, MD);
  s->mbw.lse = clattn_tensor_3d(keep(rand_buf(B * HQ, CLATTN_F32)), 0, CLATTN_F32, B, HQ, 1);
  s->mbw.maybe_do = clattn_tensor_4d(keep(rand_buf(B * HQ * MD, CLATTN_F32)), 0, CLATTN_F32, B, 1, HQ, MD);
  s->mbw.maybe_dlse = clattn_tensor_3d(keep(rand_buf(B * HQ, CLATTN_F32)), 0, CLATTN_F32, B, HQ, 1);
}

#define RN 16
#define RD 32
static clattn_tensor rq(cl_mem m) { return clattn_tensor_4d(m, 0, CLATTN_F32, 1, HQ, RN, RD); }
static clattn_tensor rk(cl_mem m) { return clattn_tensor_4d(m, 0, CLATTN_F32, 1, HKV, RN, RD); }

static void make_rerope(state *s) {
  const size_t nq = HQ * RN * RD, nk = HKV * RN * RD;
  clattn_rerope_params *f = &s->rr;
  f->q1 = rq(keep(rand_buf(nq, CLATTN_F32)));
  f->q2 = rq(keep(rand_buf(nq, CLATTN_F32)));
  f->k1 = rk(keep(rand_buf(nk, CLATTN_F32)));
  f->k2 = rk(keep(rand_buf(nk, CLATTN_F32)));
  f->v = rk(keep(rand_buf(nk, CLATTN_F32)));
  f->o = rq(keep(buf_poison(slack(nq * 4))));
  f->maybe_lse = clattn_tensor_3d(keep(buf_poison(slack(HQ * RN * 4))), 0, CLATTN_F32, 1, HQ, RN);
  f->window = 5;
  clattn_rerope_bwd_params *b = &s->rrb;
  b->q1 = f->q1, b->q2 = f->q2, b->k1 = f->k1, b->k2 = f->k2, b->v = f->v;
  b->o = rq(keep(rand_buf(nq, CLATTN_F32)));
  b->lse = clattn_tensor_3d(keep(rand_buf(HQ * RN, CLATTN_F32)), 0, CLATTN_F32, 1, HQ, RN);
  b->dout = rq(keep(rand_buf(nq, CLATTN_F32)));
  b->dq1 = rq(keep(buf_poison(slack(nq * 4))));
  b->dq2 = rq(keep(buf_poison(slack(nq * 4))));
  b->dk1 = rk(keep(buf_poison(slack(nk * 4))));
  b->dk2 = rk(keep(buf_poison(slack(nk * 4))));
  b->dv = rk(keep(buf_poison(slack(nk * 4))));
  b->maybe_workspace = clattn_tensor_1d(keep(buf_zeros(slack(256 * 4))), 0, CLATTN_F32, 256);
  b->window = 5;
  int32_t pos[RN];
  for (int i = 0; i < RN; i++) pos[i] = 3 * i;
  clattn_rerope_rotary_params *r = &s->rot;
  r->q = f->q1, r->k = f->k1, r->v = f->v;
  r->o = rq(keep(buf_poison(slack(nq * 4))));
  r->maybe_lse = clattn_tensor_3d(keep(buf_poison(slack(HQ * RN * 4))), 0, CLATTN_F32, 1, HQ, RN);
  r->maybe_q_pos = clattn_tensor_1d(keep(ints(pos, RN, 1)), 4, CLATTN_I32, RN);
  r->maybe_k_pos = clattn_tensor_1d(keep(ints(pos, RN, 0)), 0, CLATTN_I32, RN);
  r->window = 7;
  clattn_rerope_rotary_bwd_params *rb = &s->rotb;
  rb->q = r->q, rb->k = r->k, rb->v = r->v, rb->o = b->o, rb->lse = b->lse, rb->dout = b->dout;
  rb->dq = rq(keep(buf_poison(slack(nq * 4))));
  rb->dk = rk(keep(buf_poison(slack(nk * 4))));
  rb->dv = rk(keep(buf_poison(slack(nk * 4))));
  rb->maybe_k_pos = r->maybe_k_pos;
  rb->window = 7;
}

static void make_state(opid op, state *s) {
  memset(s, 0, sizeof *s);
  switch (op) {
  case DECODE:
  case DECODE_SIZE:
  case REFERENCE: make_decode(s); break;
  case DECODE_FP8_PAGED: make_decode_fp8_paged(s); break;
  case DECODE_INT4_VARLEN: make_decode_int4_varlen(s); break;
  case MULTI: make_multi(s); break;
  case APPEND: make_append(s); break;
  case QUANTIZE: make_quantize(s); break;
  case DEQUANTIZE: make_dequantize(s); break;
  case MERGE:
  case MERGE_SIZE:
  case MERGE_BWD: make_merge(s); break;
  default: make_rerope(s); break;
  }
}

/* ------------------------------------------------------------------ the runner */

static cl_mem small_buf, foreign[6];
static int nforeign;

static void apply(state *s, const mut *m) {
  const field *f = field_of(m->field);
  char *at = (char *)s + f->off;
  if (f->kind == 'i') {
    *(int *)at = (int)m->v;
    return;
  }
  if (f->kind == 'f') {
    *(float *)at = (float)m->fv;
    return;
  }
  clattn_tensor *t = (clattn_tensor *)at;
  const clattn_tensor *o = m->other ? (const clattn_tensor *)((char *)s + field_of(m->other)->off) : NULL;
  switch (m->kind) {
  case M_SHAPE: t->shape[m->axis] = m->v; break;
  case M_STRIDE: t->stride[m->axis] = m->v; break;
  case M_OFFSET: t->offset = (size_t)m->v; break;
  case M_DTYPE: t->dtype = (clattn_dtype)m->v; break;
  case M_NDIM: t->ndim = (int)m->v; break;
  case M_NULL: t->buf = NULL; break;
  case M_SMALL: t->buf = small_buf; break;
  case M_FOREIGN: {
    size_t size = 0;
    clGetMemObjectInfo(t->buf, CL_MEM_SIZE, sizeof size, &size, NULL);
    t->buf = foreign[nforeign++] = buf_in(other_cl, size, NULL);
    break;
  }
  case M_ALIAS:
    t->buf = o->buf;
    t->offset = o->offset + (size_t)m->v;
    break;
  case M_COPY: *t = *o; break;
  default: break;
  }
}

static void test_catalogue(void) {
  cl_int err = CL_SUCCESS;
  other_cl = clCreateContext(NULL, 1, &fx.dev, NULL, NULL, &err);
  CU_ASSERT_FATAL(err == CL_SUCCESS);
  small_buf = keep(buf_zeros(16)); /* no slack: the cases that need a small buffer */
  state *base = calloc(NOPS, sizeof *base);
  for (int op = 0; op < NOPS; op++) make_state((opid)op, &base[op]);
  finish();

  /* Without CLBlast the reference path has nothing to validate. */
  state probe = base[REFERENCE];
  const bool have_reference = call(REFERENCE, &probe, NULL) != CLATTN_UNSUPPORTED ||
                              !strstr(clattn_last_error(), "without CLBlast");
  finish();

  int ran = 0, skipped = 0, per_op[NOPS] = {0};
  const size_t ncases = sizeof cases / sizeof cases[0];
  for (size_t i = 0; i < ncases; i++) {
    const bad *c = &cases[i];
    if (c->op == REFERENCE && !have_reference) {
      skipped++;
      continue;
    }
    state s = base[c->op];
    nforeign = 0;
    for (int j = 0; j < 10 && c->m[j].field; j++) apply(&s, &c->m[j]);
    const long before = enqueue_count();
    cl_event ev = NULL;
    const clattn_status st = call(c->op, &s, &ev);
    const long after = enqueue_count();
    const char *msg = clattn_last_error();
    const bool named = strstr(msg, c->needle[0]) && strstr(msg, c->needle[1]);
    if (st != c->status || !named || after != before || ev) {
      fprintf(stderr, "  case %zu (%s, %s): %s \"%s\" and %ld enqueued; want %s mentioning \"%s\", \"%s\"\n", i,
              op_names[c->op], c->m[0].field, clattn_status_string(st), msg, after - before,
              clattn_status_string(c->status), c->needle[0], c->needle[1]);
    }
    CU_ASSERT_EQUAL(st, c->status);
    CU_ASSERT(named);
    CU_ASSERT_EQUAL(after, before); /* nothing enqueued */
    CU_ASSERT_PTR_NULL(ev);
    if (ev) clReleaseEvent(ev);
    for (int j = 0; j < nforeign; j++) buf_release(&foreign[j]);
    ran++;
    per_op[c->op]++;
  }
  /* every operation's valid call runs (its inputs were valid all along) */
  for (int op = 0; op < NOPS; op++) {
    if (op == REFERENCE && !have_reference) continue;
    state s = base[op];
    cl_event ev = NULL;
    const long before = enqueue_count();
    const clattn_status st = call((opid)op, &s, (op == DECODE_SIZE || op == MERGE_SIZE) ? NULL : &ev);
    if (st != CLATTN_SUCCESS) fprintf(stderr, "  valid %s: %s\n", op_names[op], clattn_last_error());
    CU_ASSERT_EQUAL(st, CLATTN_SUCCESS);
    if (op != DECODE_SIZE && op != MERGE_SIZE) {
      CU_ASSERT(enqueue_count() > before);
      CU_ASSERT_PTR_NOT_NULL(ev);
    }
    if (ev) {
      CU_ASSERT_EQUAL(clWaitForEvents(1, &ev), CL_SUCCESS);
      clReleaseEvent(ev);
    }
  }
  finish();
  fprintf(stderr, "  catalogue: %d bad inputs over %d operations (", ran, NOPS);
  for (int op = 0; op < NOPS; op++) fprintf(stderr, "%s%s %d", op ? ", " : "", op_names[op], per_op[op]);
  fprintf(stderr, ")%s\n", skipped ? "; the reference path's cases not run: built without CLBlast" : "");
  CU_ASSERT(ran >= 150);
  free(base);
  for (int i = 0; i < nbufs; i++) buf_release(&bufs[i]); /* checks every guard */
  nbufs = 0;
  clReleaseContext(other_cl);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("safety", fixture_init, fixture_cleanup);
  CU_add_test(s, "catalogue of bad inputs: status, message, nothing enqueued, guards", test_catalogue);
  return run_suites();
}
