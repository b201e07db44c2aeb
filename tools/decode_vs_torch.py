"""clattn decode against torch SDPA on the same shapes, in one process (one device call).

For each shape, times `clattn run decode ... --repeat R --no-check` (the CLI's median
device time, L2 flushed before each run) and torch 2.x SDPA with `enable_gqa` on the
cuDNN and flash backends (and xformers' Triton split-K where it imports: installed, or its
Python source on PYTHONPATH as DEVELOPERS.md says), each a CUDA-graph replay timed with
CUDA events, the L2 flushed before every replay as the CLI does. Prints the times and
clattn's time over each peer's (below 1: clattn faster).

    python3 tools/decode_vs_torch.py --clattn build-gpubin/new/clattn            # issue #20's table
    python3 tools/decode_vs_torch.py --clattn ./clattn --shape 1/32/8/4096/128   # B/Hq/Hkv/ctx/D

Shapes are B/Hq/Hkv/ctx[/D[/extra clattn flags, comma separated]]. Not used by any test.
"""
import argparse
import re
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

try:
    import xformers  # noqa: F401  (its Triton split-K kernel is a third peer where installed)
    from xformers.ops.fmha import common as xf_common
    # the Triton split-K needs none of the C++ part, which a source tree on
    # PYTHONPATH lacks (the operator then refuses "CUDA" inputs)
    xf_common._built_with_cuda = True
    HAVE_XFORMERS = True
except ImportError:
    HAVE_XFORMERS = False
    print("xformers is not installed: its column stays empty", file=sys.stderr)

ISSUE_SHAPES = [
    "1/32/8/4096", "1/32/8/16384", "1/32/8/32768", "1/32/8/131072", "4/32/8/8192",
    "8/32/8/32768", "16/32/8/8192", "1/32/32/131072", "64/32/8/32768",
    # head dims at B=16 Hkv=8 ctx=8192 (bandwidth against D=128)
    "16/32/8/8192/64", "16/32/8/8192/80", "16/32/8/8192/96", "16/32/8/8192/112",
    "16/32/8/8192/160", "16/32/8/8192/192", "16/32/8/8192/256",
    # quantized and paged, speculative
    "16/32/8/8192/128/--kv-dtype,int4,--paged,--page-size,16", "16/32/8/8192/128/--paged,--page-size,16",
    "16/32/8/8192/128/--q-len,4,--causal",
]


def flush_buffer():
    return torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # > 2x the H200's L2


def time_graph(fn, flush, repeat):
    """Median ms of CUDA-graph replays of fn, the L2 flushed before each."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    times = []
    for i in range(repeat + 3):
        flush.fill_(i & 0xFF)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(a.elapsed_time(b))
    return statistics.median(times)


def torch_times(B, Hq, Hkv, ctx, D, mq, causal, flush, repeat):
    q = torch.randn(B, Hq, mq, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, Hkv, ctx, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, Hkv, ctx, D, device="cuda", dtype=torch.float16)
    out = {}
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        def run(backend=backend):
            with sdpa_kernel(backend):
                # causal over the last mq keys: a bottom-right aligned mask (decode's)
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=False)
        try:
            if causal and mq > 1:
                raise RuntimeError("bottom-right causal is not timed here")
            out[name] = time_graph(run, flush, repeat)
        except Exception as e:  # a backend that does not take the shape
            out[name] = None
            print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", file=sys.stderr)
    try:
        if not HAVE_XFORMERS:
            raise ImportError("not installed")
        from xformers.ops import fmha
        qx = q.transpose(1, 2).reshape(B, mq, Hkv, Hq // Hkv, D)
        kx = k.transpose(1, 2)[:, :, :, None].expand(B, ctx, Hkv, Hq // Hkv, D)
        vx = v.transpose(1, 2)[:, :, :, None].expand(B, ctx, Hkv, Hq // Hkv, D)
        op = fmha.triton_splitk.FwOp
        out["xformers"] = None if causal else time_graph(
            lambda: fmha.memory_efficient_attention_forward(qx, kx, vx, op=op), flush, repeat)
    except Exception as e:
        out["xformers"] = None
        if HAVE_XFORMERS:  # its absence is said once, at the start
            print(f"  xformers: {type(e).__name__}: {str(e).splitlines()[0][:100]}", file=sys.stderr)
    del q, k, v
    return out


def clattn_time(binary, B, Hq, Hkv, ctx, D, extra, repeat):
    cmd = [binary, "run", "decode", "--batch", str(B), "--heads", str(Hq), "--kv-heads", str(Hkv),
           "--ctx", str(ctx), "--head-dim", str(D), "--dtype", "f16", "--repeat", str(repeat), "--no-check"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"^time: ([0-9.]+) ms", r.stdout, re.M)
    form = re.search(r"^kernel: (.*)$", r.stdout, re.M)
    if not m:
        print(f"  clattn failed ({r.returncode}): {(r.stdout + r.stderr).strip()[-300:]}", file=sys.stderr)
        return None, ""
    return float(m.group(1)), form.group(1) if form else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clattn", required=True, help="the clattn CLI binary")
    ap.add_argument("--shape", action="append", help="B/Hq/Hkv/ctx[/D[/flags]] (default: issue #20's)")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    flush = flush_buffer()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; times in us, ratios clattn / peer")
    print(f"{'shape':52s} {'clattn':>8s} {'cudnn':>8s} {'flash':>8s} {'xform':>8s} "
          f"{'/cudnn':>7s} {'/flash':>7s} {'/xform':>7s} {'GB/s':>6s}  kernel")
    for spec in args.shape or ISSUE_SHAPES:
        f = spec.split("/")
        B, Hq, Hkv, ctx = map(int, f[:4])
        D = int(f[4]) if len(f) > 4 else 128
        extra = f[5].split(",") if len(f) > 5 else []
        mq = int(extra[extra.index("--q-len") + 1]) if "--q-len" in extra else 1
        causal = "--causal" in extra
        quant_or_paged = any(x in extra for x in ("--kv-dtype", "--paged"))
        ms, form = clattn_time(args.clattn, B, Hq, Hkv, ctx, D, extra, args.repeat)
        peers = torch_times(B, Hq, Hkv, ctx, D, mq, causal, flush, args.repeat) if not quant_or_paged else {}
        us = lambda x: f"{x * 1e3:8.1f}" if x else f"{'-':>8s}"
        ratio = lambda x: f"{ms / x:7.2f}" if x and ms else f"{'-':>7s}"
        # f16 K/V bytes; quantized rows' packed bytes differ ('-': the CLI prints its own bandwidth)
        gbs = f"{2 * B * Hkv * ctx * D * 2 / (ms * 1e6):6.0f}" if ms and "--kv-dtype" not in extra else f"{'-':>6s}"
        print(f"{spec:52s} {us(ms)} {us(peers.get('cudnn'))} {us(peers.get('flash'))} {us(peers.get('xformers'))} "
              f"{ratio(peers.get('cudnn'))} {ratio(peers.get('flash'))} {ratio(peers.get('xformers'))} "
              f"{gbs}  {form}", flush=True)


if __name__ == "__main__":
    main()
