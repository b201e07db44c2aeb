"""clattn ReRoPE (forward, backward) against torch SDPA's plain attention, in one process.

For each shape, times `clattn run rerope ... --backward --repeat R --no-check` (the CLI's
median device times) and torch SDPA on the cuDNN and flash backends: the forward as a
CUDA-graph replay, forward+backward as eager calls timed with CUDA events (both the L2
flushed first). torch runs plain (causal) attention, ReRoPE's W >= N case: it is the
floor a ReRoPE kernel is held to. Prints ms and clattn's time over each peer's.

    python3 tools/rerope_vs_torch.py --clattn build-gpubin/new/clattn
    python3 tools/rerope_vs_torch.py --clattn ./clattn --shape 1/32/8192/128/2048/causal

Shapes are Z/H/N/D/W[/causal]. Not used by any test.
"""
import argparse
import re
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from decode_vs_torch import flush_buffer, time_graph

ISSUE_SHAPES = [
    "1/32/8192/64/2048/causal", "1/32/8192/64/2048", "1/32/8192/128/2048/causal",
    "1/32/8192/128/8192/causal", "1/32/8192/128/2048", "1/32/8192/256/2048/causal",
]


def time_eager(fn, flush, repeat):
    times = []
    for i in range(repeat + 2):
        flush.fill_(i & 0xFF)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        if i >= 2:
            times.append(a.elapsed_time(b))
    return statistics.median(times)


def torch_times(Z, H, N, D, causal, flush, repeat):
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16, requires_grad=True)
               for _ in range(3))
    do = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    out = {}
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        def fwd(backend=backend):
            with sdpa_kernel(backend), torch.no_grad():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def fwd_bwd(backend=backend):
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.autograd.grad(o, (q, k, v), do)
        try:
            out[name] = (time_graph(fwd, flush, repeat), time_eager(fwd_bwd, flush, repeat))
        except Exception as e:  # a backend that does not take the shape
            out[name] = (None, None)
            print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", file=sys.stderr)
    return out


def clattn_times(binary, Z, H, N, D, W, causal, repeat):
    cmd = [binary, "run", "rerope", "--z", str(Z), "--heads", str(H), "--n", str(N), "--head-dim", str(D),
           "--window", str(W), "--dtype", "f16", "--backward", "--repeat", str(repeat), "--no-check"]
    if causal:
        cmd.append("--causal")
    r = subprocess.run(cmd, capture_output=True, text=True)
    f = re.search(r"forward\s+([0-9.]+) ms", r.stdout)
    b = re.search(r"backward\s+([0-9.]+) ms", r.stdout)
    kern = re.search(r"kernels?:? (.*)$", r.stdout, re.M)
    if not (f and b):
        print(f"  clattn failed ({r.returncode}): {(r.stdout + r.stderr).strip()[-300:]}", file=sys.stderr)
        return None, None, ""
    return float(f.group(1)), float(b.group(1)), kern.group(1) if kern else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clattn", required=True, help="the clattn CLI binary")
    ap.add_argument("--shape", action="append", help="Z/H/N/D/W[/causal] (default: issue #21's)")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    flush = flush_buffer()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; ms; ratios clattn / peer "
          "(torch: plain attention)")
    print(f"{'shape':28s} {'fwd':>7s} {'bwd':>7s} {'f+b':>7s} {'bwdTF':>6s} {'cudnn f':>8s} {'f+b':>7s} "
          f"{'flash f':>8s} {'f+b':>7s} {'f/cud':>6s} {'fb/cud':>6s}  kernels")
    for spec in args.shape or ISSUE_SHAPES:
        f = spec.split("/")
        Z, H, N, D, W = map(int, f[:5])
        causal = len(f) > 5 and f[5] == "causal"
        tf, tb, kern = clattn_times(args.clattn, Z, H, N, D, W, causal, args.repeat)
        peers = torch_times(Z, H, N, D, causal, flush, args.repeat)
        ms = lambda x: f"{x:7.3f}" if x else f"{'-':>7s}"
        cf, cfb = peers.get("cudnn", (None, None))
        ff, ffb = peers.get("flash", (None, None))
        flops = 4.0 * Z * H * N * N * D * (0.5 if causal else 1.0)
        tflops = 2.5 * flops / (tb * 1e9) if tb else 0
        fb = tf + tb if tf and tb else None
        r = lambda a, b: f"{a / b:6.2f}" if a and b else f"{'-':>6s}"
        print(f"{spec:28s} {ms(tf)} {ms(tb)} {ms(fb)} {tflops:6.0f} {ms(cf):>8s} {ms(cfb)} {ms(ff):>8s} {ms(ffb)} "
              f"{r(tf, cf)} {r(fb, cfb)}  {kern}", flush=True)


if __name__ == "__main__":
    main()
