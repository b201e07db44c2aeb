#!/usr/bin/env python3
"""Writes the seed corpus of the fuzzer (tests/fuzz/corpus/): for every
operation a few valid calls, in the input format of tests/fuzz/README.md
(the field tables are those of tests/fuzz/ops.c; keep the two in step).

    python3 tests/fuzz/gen_corpus.py [out_dir]
"""
import os
import sys

OPS = ["decode", "decode_workspace_size", "decode_multi", "kv_append", "kv_quantize",
       "kv_dequantize", "merge", "merge_workspace_size", "merge_backward", "rerope_fwd",
       "rerope_bwd", "rerope_rotary_fwd", "rerope_rotary_bwd", "reference_decode", "misc"]
PROFILES = ["h200", "a100", "turing", "gfx90a", "gfx1100", "pocl", "tiny", "intel"]


def ix(table, value):
    return table.index(value)


def header(op, profile, off_mode=0, path=0, portable=0, ooo=0, event=1, waits=0, odd=None):
    flags = path | portable << 2 | ooo << 3 | event << 4 | waits << 5 | (0x80 if odd is not None else 0)
    return bytes([OPS.index(op), PROFILES.index(profile) | off_mode << 4, flags, odd or 0])


# ---------------------------------------------------------------- decode (ops.c: read_common, build_dec)
D_B = [1, 2, 3, 4, 0, 5, 8, 16]
D_M = [1, 1, 2, 3, 4, 8, 0, 16]
D_H = [1, 2, 4, 8]
D_D = [64, 128, 8, 16, 256, 24, 72, 96]
D_QDT = ["f16", "bf16", "f32"]
D_ODT = ["same", "f32", "f16", "bf16"]
D_N = [0, 1, 15, 16, 17, 64, 100, 256, 1000, 4096, 32768, 65536, 1 << 20, 3, 31, 2048]
D_KV = ["same", "f16", "int4", "fp8", "fnuz", "f32", "bf16"]
D_G = [0, 1, 2, 4, 8]
D_LAYOUT = ["tokens", "pad16", "head_major", "pad3"]
D_PAGE = [16, 1, 8, 32, 48, 64, 128, 256]
D_SPLITS = [0, 0, 0, 1, 2, 3, 8, 64]
D_SCALE = [0.0, 0.125, 1.0]


def dec_common(B=2, Mq=1, Hkv=8, G=4, D=128, varlen=0, paged_all=0, causal=0, qdt="f16", odt="same",
               lse=1, batch_set=0, maxq_set=0):
    b0 = ix(D_B, B) | ix(D_M, Mq) << 3 | varlen << 6 | paged_all << 7
    b1 = ix(D_H, Hkv) | ix(D_H, G) << 2 | ix(D_D, D) << 4 | causal << 7
    b2 = ix(D_QDT, qdt) | ix(D_ODT, odt) << 2 | lse << 4 | batch_set << 5 | maxq_set << 6
    return bytes([b0, b1, b2])


def dec_kv(N=4096, kv="same", paged=0, groups=0, layout="tokens", page=16, splits=0, scale=0.0,
           kv_len=0, bias=0, lse=0, flag=0, ws=0, no_ss=0):
    b3 = ix(D_N, N) | ix(D_KV, kv) << 4 | paged << 7
    b4 = ix(D_G, groups) | ix(D_LAYOUT, layout) << 3 | ix(D_PAGE, page) << 5
    b5 = D_SPLITS.index(splits) if splits else 0
    b5 |= ix(D_SCALE, scale) << 3 | kv_len << 5 | bias << 6 | lse << 7
    b6 = flag | ws << 1 | no_ss << 2
    return bytes([b3, b4, b5, b6])


# ---------------------------------------------------------------- kv cache (ops.c: build_kv)
K_B = [1, 2, 3, 0, 4, 8]
K_H = [1, 2, 8, 3]
K_D = [128, 64, 8, 16, 2048, 24, 256, 72]
K_CDT = ["f16", "f32", "bf16", "int4", "fp8", "fnuz"]
K_G = [0, 1, 2, 4, 8, 3]
K_XDT = ["f16", "bf16", "f32"]
K_PS = [16, 1, 32, 48]
K_N = [16, 100, 1024, 0, 1, 4096, 65536, 33]
K_ROWS = [1, 2, 5, 16]


def kv(B=2, H=8, D=128, cdt="f16", G=0, xdt="f16", paged=0, withv=1, varlen=0, flag=0, ps=16, N=1024,
       per=1, start=0, xpad=0, cpad=0, noss=0):
    n = ix(K_N, N)
    b0 = ix(K_B, B) | ix(K_H, H) << 3 | ix(K_D, D) << 5
    b1 = ix(K_CDT, cdt) | ix(K_G, G) << 3 | ix(K_XDT, xdt) << 6
    b2 = paged | withv << 1 | varlen << 2 | flag << 3 | ix(K_PS, ps) << 4 | (n & 3) << 6
    b3 = ix(K_ROWS, per) | start << 2 | xpad << 3 | cpad << 4 | noss << 5 | (n >> 2) << 6
    return bytes([b0, b1, b2, b3])


# ---------------------------------------------------------------- merge (ops.c: build_merge)
M_N = [1, 2, 3, 4, 8, 9, 16, 17, 33, 40, 5, 6, 7, 15, 31, 64]
M_DT = ["f16", "bf16", "f32"]
M_B = [1, 2, 3, 0]
M_M = [1, 2, 4, 7]
M_H = [1, 2, 8, 32]
M_D = [64, 128, 8, 1, 3, 5, 256, 1000]


def merge(n=2, pdt="f32", odt=None, B=2, M=1, H=8, D=128, lse=1, ws=0, stacked=0, pad=0, opt=0, opt2=0):
    o = 0 if odt is None else ix(M_DT, odt) if odt != "f16" else 3  # 0 means "like the parts"
    b0 = ix(M_N, n) | ix(M_DT, pdt) << 4 | o << 6
    b1 = ix(M_B, B) | ix(M_M, M) << 2 | ix(M_H, H) << 4 | opt << 6 | opt2 << 7
    b2 = ix(M_D, D) | lse << 3 | ws << 4 | stacked << 5 | pad << 6
    return bytes([b0, b1, b2])


# ---------------------------------------------------------------- rerope (ops.c: build_rr)
R_Z = [1, 2, 0, 3]
R_H = [1, 2, 4, 8]
R_G = [1, 2, 4, 3]
R_N = [1, 16, 64, 100, 0, 7, 128, 300]
R_THETA = [0.0, 10000.0, 500000.0, 1.0]
R_D = [64, 128, 16, 8, 32, 256, 24, 48]
R_DT = ["f16", "bf16", "f32"]
R_W = [0, 1, 16, 1000]
R_POS = ["none", "n", "zn"]


def rerope(Z=1, Hkv=2, G=2, Nq=128, Nk=128, D=64, dt="f16", bnhd=0, lse=1, ws=0, window=16, causal=1,
           qpos="none", kpos="none", theta=0.0, layout=0):
    b0 = ix(R_Z, Z) | ix(R_H, Hkv) << 2 | ix(R_G, G) << 4
    b1 = ix(R_N, Nq) | ix(R_N, Nk) << 3 | ix(R_THETA, theta) << 6
    b2 = ix(R_D, D) | ix(R_DT, dt) << 3 | bnhd << 5 | lse << 6 | ws << 7
    b3 = ix(R_W, window) | causal << 2 | ix(R_POS, qpos) << 3 | ix(R_POS, kpos) << 5 | layout << 7
    return bytes([b0, b1, b2, b3])


def seeds():
    s = {}
    # decode: the tensor-core forms on NVIDIA, the portable ones elsewhere
    s["decode-f16-h200"] = header("decode", "h200") + dec_common() + dec_kv()
    s["decode-f16-pocl"] = header("decode", "pocl") + dec_common() + dec_kv(N=1000)
    s["decode-bf16-gfx90a"] = header("decode", "gfx90a") + dec_common(qdt="bf16") + dec_kv(N=256, splits=2, ws=1)
    s["decode-f32-turing"] = header("decode", "turing", off_mode=1) + dec_common(qdt="f32", Hkv=2, G=2, D=64) + dec_kv(N=100)
    s["decode-paged-h200"] = header("decode", "h200") + dec_common(B=3) + dec_kv(N=1000, paged=1, page=16, kv_len=1, flag=1)
    s["decode-paged-causal-a100"] = header("decode", "a100", ooo=1) + dec_common(Mq=4, causal=1, qdt="bf16") + \
        dec_kv(N=256, paged=1, page=32, kv_len=1)
    s["decode-varlen-pocl"] = header("decode", "pocl", waits=1) + dec_common(B=3, Mq=3, varlen=1, causal=1, maxq_set=1) + \
        dec_kv(N=64, kv_len=1, bias=1)
    s["decode-varlen-h200"] = header("decode", "h200") + dec_common(B=2, Mq=2, varlen=1, Hkv=2, G=2) + dec_kv(N=256)
    s["decode-int4-h200"] = header("decode", "h200") + dec_common(B=4, odt="f32") + dec_kv(N=32768, kv="int4")
    s["decode-int4g2-paged-h200"] = header("decode", "h200") + dec_common(B=2) + \
        dec_kv(N=4096, kv="int4", groups=2, paged=1, page=16, kv_len=1)
    s["decode-int4g4-a100"] = header("decode", "a100") + dec_common(B=2, Hkv=4) + dec_kv(N=4096, kv="int4", groups=4)
    s["decode-int4-padded-gfx90a"] = header("decode", "gfx90a") + dec_common(B=2) + \
        dec_kv(N=1000, kv="int4", layout="pad16")
    s["decode-fp8-h200"] = header("decode", "h200") + dec_common(B=2) + dec_kv(N=1000, kv="fp8", kv_len=1)
    s["decode-fnuz-gfx90a"] = header("decode", "gfx90a") + dec_common(B=2) + \
        dec_kv(N=256, kv="fnuz", paged=1, page=16)
    s["decode-splits-ws-h200"] = header("decode", "h200", waits=2) + dec_common(B=1, Hkv=2, G=2) + \
        dec_kv(N=32768, splits=8, ws=1, flag=1)
    s["decode-headmajor-pocl"] = header("decode", "pocl", off_mode=2) + dec_common(B=2, D=64, qdt="f32") + \
        dec_kv(N=100, layout="head_major")
    s["decode-forced-mma-pocl"] = header("decode", "pocl", path=2) + dec_common(B=1, Hkv=2, G=2, D=64) + dec_kv(N=64)
    s["decode-intel-f16"] = header("decode", "intel", off_mode=3) + dec_common(B=1, Hkv=4, G=2, D=64) + dec_kv(N=256)
    s["decode-gfx1100-portable"] = header("decode", "gfx1100", portable=1) + dec_common(B=2, D=96) + dec_kv(N=4096)
    s["decode-empty-batch"] = header("decode", "h200") + dec_common(B=0) + dec_kv(N=16)
    s["decode_workspace_size-split"] = header("decode_workspace_size", "h200") + dec_common(B=1) + dec_kv(N=65536)
    s["decode_workspace_size-int4"] = header("decode_workspace_size", "a100") + dec_common(B=3) + dec_kv(N=32768, kv="int4")
    s["reference_decode-f32-pocl"] = header("reference_decode", "pocl") + dec_common(B=2, Hkv=2, G=2, D=64, qdt="f32") + \
        dec_kv(N=100, kv_len=1)
    s["reference_decode-f16-varlen"] = header("reference_decode", "h200") + \
        dec_common(B=2, Mq=2, Hkv=2, G=2, D=64, varlen=1, causal=1) + dec_kv(N=64, bias=1)
    # decode_multi: shards of one context, and one on a second context (through the host)
    c = dec_common(B=2, Hkv=2, G=2, D=64, qdt="f16", odt="f32")
    s["decode_multi-2-same"] = header("decode_multi", "h200") + c + bytes([1 | 0 << 2]) + \
        dec_kv(N=256) + dec_kv(N=100) + b"\x01"
    s["decode_multi-2-other"] = header("decode_multi", "pocl") + c + bytes([1 | 1 << 2]) + \
        dec_kv(N=64) + dec_kv(N=64, kv_len=1) + b"\x01"
    s["decode_multi-3-mixed"] = header("decode_multi", "gfx90a") + c + bytes([2 | 2 << 2 | 1 << 4]) + \
        dec_kv(N=256) + dec_kv(N=100, kv="int4") + dec_kv(N=16, paged=1) + b"\x00"
    # KV cache
    s["kv_append-f16"] = header("kv_append", "pocl") + kv()
    s["kv_append-int4g2-paged"] = header("kv_append", "h200") + kv(cdt="int4", G=2, paged=1, varlen=1, per=5, flag=1)
    s["kv_append-fp8"] = header("kv_append", "gfx90a") + kv(cdt="fp8", xdt="bf16", N=100)
    s["kv_append-fnuz-paged-konly"] = header("kv_append", "a100") + kv(cdt="fnuz", paged=1, withv=0, ps=32)
    s["kv_append-f32-padded"] = header("kv_append", "intel") + kv(cdt="f32", xdt="f32", H=2, D=64, xpad=1, cpad=1)
    s["kv_quantize-int4"] = header("kv_quantize", "h200") + kv(cdt="int4", per=16, start=1)
    s["kv_quantize-fp8-paged"] = header("kv_quantize", "pocl") + kv(cdt="fp8", per=5, paged=1, flag=1)
    s["kv_dequantize-int4g4"] = header("kv_dequantize", "gfx1100") + kv(cdt="int4", G=4, per=16, start=1, xdt="f32")
    s["kv_dequantize-bf16"] = header("kv_dequantize", "tiny") + kv(cdt="bf16", H=1, D=64, per=2)
    # merge
    s["merge-2-f32"] = header("merge", "pocl") + merge()
    s["merge-17-f16-ws"] = header("merge", "gfx1100", off_mode=2) + merge(n=17, pdt="f16", ws=1, H=2, D=64)
    s["merge-40-stacked"] = header("merge", "h200") + merge(n=40, stacked=1, odt="bf16")
    s["merge-9-pad"] = header("merge", "gfx90a") + merge(n=9, pdt="bf16", pad=1, D=3, lse=0)
    s["merge_workspace_size-33"] = header("merge_workspace_size", "gfx90a") + merge(n=33, ws=1)
    s["merge_backward-2"] = header("merge_backward", "pocl") + merge()
    s["merge_backward-9-no-do"] = header("merge_backward", "h200") + merge(n=9, opt=1, opt2=1, D=64)
    s["merge_backward-17-f16"] = header("merge_backward", "tiny") + merge(n=17, pdt="f16", H=2, D=8)
    # ReRoPE
    s["rerope_fwd-f16-h200"] = header("rerope_fwd", "h200") + rerope()
    s["rerope_fwd-f32-pocl"] = header("rerope_fwd", "pocl") + rerope(dt="f32", Nq=16, Nk=64, D=24)
    s["rerope_fwd-bnhd-gfx90a"] = header("rerope_fwd", "gfx90a") + rerope(bnhd=1, Nq=100, Nk=300, D=128, dt="bf16")
    s["rerope_bwd-f16-h200"] = header("rerope_bwd", "h200") + rerope(ws=1)
    s["rerope_bwd-f32-pocl"] = header("rerope_bwd", "pocl") + rerope(dt="f32", Nq=16, Nk=16, D=32, causal=0)
    s["rerope_rotary_fwd-pos"] = header("rerope_rotary_fwd", "a100") + rerope(qpos="n", kpos="zn", theta=500000.0)
    s["rerope_rotary_fwd-interleaved"] = header("rerope_rotary_fwd", "pocl") + rerope(D=16, Nq=7, Nk=100, layout=1)
    s["rerope_rotary_bwd"] = header("rerope_rotary_bwd", "h200") + rerope(qpos="zn", kpos="n", ws=1)
    s["rerope_rotary_bwd-f32"] = header("rerope_rotary_bwd", "intel") + rerope(dt="f32", D=8, Nq=16, Nk=64)
    # pure functions
    s["misc-4d"] = header("misc", "pocl") + bytes([0, 0, 0, 0, 0, 0, 0, 2] + [0, 0, 0, 0, 0, 0, 0, 3] +
                                                 [0, 0, 0, 0, 0, 1, 0, 4] + [0, 0, 0, 0, 0, 0, 0, 8] + [3])
    return s


# ---------------------------------------------------------------- edits (fuzz_ops.c: apply_edit)
SPECIALS = [0, 1, -1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 127, 128, 255, 256, 1023, 1024, 4095,
            4096, 65535, 65536, 1 << 20, 1 << 24, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**32 + 1,
            2**32 + 2, 2**32 + 8, 2**33, 2**36, 2**40 - 256, 2**40, 2**40 + 1, 2**48, 2**62, 2**63 - 1, -2**63,
            -2**31, -2**32, -256, -16, 2**63 - 256, 2**63 // 3, 2**56 + 7]
FIELDS = {"buf": 0, "offset": 1, "dtype": 2, "ndim": 3, "size": 14}
FIELDS.update({f"shape{i}": 4 + i for i in range(5)})
FIELDS.update({f"stride{i}": 9 + i for i in range(5)})
DECODE_SLOTS = ["q", "k", "v", "o", "maybe_lse", "maybe_kv_len", "maybe_bias", "maybe_block_table",
                "maybe_q_start", "maybe_k_scale_shift", "maybe_v_scale_shift", "maybe_error_flag",
                "maybe_workspace"]
DECODE_SCALARS = ["kv_groups", "batch", "max_q_len", "num_splits", "causal", "scale"]


def edit(target, field, value=None, special=None, share=None, buf=None):
    """One edit: target is a slot index (or len(slots) + scalar index); `value`
    sets a small int (-128..127), `special` a value of SPECIALS, `share` gives
    the tensor slot `share`'s buffer, `buf` another buffer choice (0 absent,
    1 its own, 3 a copy in the other context)."""
    f = FIELDS[field] if isinstance(field, str) else field
    if share is not None:
        return bytes([target, 0, 0, 2, share])
    if buf is not None:
        return bytes([target, 0, 0, buf])
    if special is not None:
        return bytes([target, f, 2, SPECIALS.index(special)])
    return bytes([target, f, 0, value & 0xff])


def dslot(name):
    return DECODE_SLOTS.index(name)


def dscalar(name):
    return len(DECODE_SLOTS) + DECODE_SCALARS.index(name)


def findings():
    """Hand-written reproducers of defects the issue lists that a short fuzzing
    run did not reach by itself (tests/fuzz/regressions/FINDINGS.md)."""
    f = {}
    paged = header("decode", "h200") + dec_common(B=3, lse=0) + dec_kv(N=1000, paged=1, page=16, kv_len=1, flag=1)
    varlen = header("decode", "pocl") + dec_common(B=3, Mq=3, varlen=1, causal=1, maxq_set=1, lse=0) + dec_kv(N=64)
    for name in ["maybe_kv_len", "maybe_block_table", "maybe_error_flag"]:
        f[f"decode-offset-ignored-{name}"] = paged + edit(dslot(name), "offset", 64) + edit(dslot(name), "size", special=4096)
    f["decode-offset-ignored-maybe_q_start"] = varlen + edit(dslot("maybe_q_start"), "offset", 64) + \
        edit(dslot("maybe_q_start"), "size", special=4096)
    f["decode-error-flag-shape-0"] = paged + edit(dslot("maybe_error_flag"), "shape0", 0)
    f["decode-output-overlaps-input"] = header("decode", "h200") + dec_common(B=2, lse=0) + dec_kv(N=256) + \
        edit(dslot("o"), "buf", share=dslot("q"))
    f["decode-workspace-stride-0"] = header("decode", "h200") + dec_common(B=1, Hkv=2, G=2, lse=0) + \
        dec_kv(N=32768, splits=8, ws=1) + edit(dslot("maybe_workspace"), "stride0", 0)
    f["decode-num-splits-int-max"] = header("decode", "h200") + dec_common(B=1, Hkv=2, G=2, lse=0) + \
        dec_kv(N=256) + edit(dscalar("num_splits"), 0, special=2**31 - 1)
    # G * Mq: Mq = 2^28 queries of stride 0 (in bounds), G = 8
    f["decode-rows-G-times-Mq-overflow"] = header("decode", "pocl") + dec_common(B=1, Hkv=1, G=8, lse=0) + \
        dec_kv(N=16) + b"".join(bytes([dslot(t), FIELDS["shape1"], 4, 28]) + edit(dslot(t), "stride1", 0)
                                for t in ("q", "o"))  # kind 4: 1 << 28
    # int64 dims cast to int: B = 2^32 + 1 sequences (stride 0) seen as 1
    f["decode-dim-cast-to-int"] = header("decode", "pocl") + dec_common(B=1, lse=0) + dec_kv(N=64) + \
        b"".join(edit(dslot(t), "shape0", special=2**32 + 1) + edit(dslot(t), "stride0", 0) for t in ("q", "o"))
    # the extent wraps: 2^32 + 2 pages of 2^40 - 256 elements reach byte 2^73, the check sees 32 KiB
    f["decode-extent-wraps"] = header("decode", "h200") + dec_common(B=1, Hkv=8, G=1, D=128, lse=0) + \
        dec_kv(N=16, paged=1, page=16) + \
        b"".join(edit(dslot(t), "shape0", special=2**32 + 2) + edit(dslot(t), "stride0", special=2**40 - 256)
                 for t in ("k", "v"))
    # merge: M * H of the parts in int64 (2^40 each, stride 0)
    m = header("merge", "pocl") + merge(n=1, lse=0)
    big = [edit(0, "shape1", special=2**40), edit(0, "stride1", 0), edit(0, "shape2", special=2**40),
           edit(0, "stride2", 0), edit(1, "shape2", special=2**40), edit(1, "stride2", 0),
           edit(1, "shape1", special=2**40), edit(1, "stride1", 0)]
    f["merge-M-times-H-overflow"] = m + b"".join(big)
    # the other operations: an output over an input, a buffer of another context
    kva = header("kv_append", "pocl") + kv()  # slots: new_k, maybe_new_v, k_cache, ...
    f["kv_append-output-overlaps-input"] = kva + edit(0, "buf", share=2)
    f["kv_append-buffer-of-another-context"] = kva + edit(2, "buf", buf=3)
    mg = header("merge", "pocl") + merge()  # slots: parts_o[0], parts_lse[0], parts_o[1], parts_lse[1], o, ...
    f["merge-output-overlaps-input"] = mg + edit(4, "buf", share=0)
    mb = header("merge_backward", "pocl") + merge()  # ..., d_parts_o[0] is slot 8
    f["merge_backward-output-overlaps-input"] = mb + edit(8, "buf", share=0)
    rf = header("rerope_fwd", "pocl") + rerope(dt="f32", Nq=16, Nk=64, D=24)  # q1, q2, k1, k2, v, o
    f["rerope_fwd-buffer-of-another-context"] = rf + edit(2, "buf", buf=3)
    return f


def main():
    args = sys.argv[1:]
    here = os.path.dirname(os.path.abspath(__file__))
    which = seeds
    if args and args[0] == "--findings":
        which = findings
        args = args[1:]
    out = args[0] if args else os.path.join(here, "corpus" if which is seeds else "findings")
    os.makedirs(out, exist_ok=True)
    items = which()
    for name, data in items.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(items)} inputs in {out}")


if __name__ == "__main__":
    main()
