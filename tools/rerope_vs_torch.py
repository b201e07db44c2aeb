"""clattn ReRoPE (forward, backward) against torch SDPA's plain attention and the ReRoPE seed, in one process.

For each shape, times `clattn run rerope ... --backward --repeat R --no-check` (the CLI's
median device times), torch SDPA on the cuDNN and flash backends, and the ReRoPE seed's
Triton kernel (tools/rerope_seed.py): the forward as a CUDA-graph replay (the seed's falls
back to eager calls if capture fails), forward+backward as eager calls timed with CUDA
events (the L2 flushed first in every case). torch runs plain (causal) attention, ReRoPE's
W >= N case: it is the floor a ReRoPE kernel is held to. The seed runs ReRoPE itself
(q1, q2, k1, k2, v randn * 0.5, sm_scale 1/sqrt(D), window W) where it applies: D in
{16, 32, 64, 128} and N % 128 == 0; its forward+backward at min(R, 3) repeats (slow at
D = 128; --seed-bwd-max-d skips it above a head dim). Prints ms and clattn's time over
each peer's; '-' where a peer does not apply or raised (the reason goes to stderr).

    python3 tools/rerope_vs_torch.py --clattn build-gpubin/new/clattn
    python3 tools/rerope_vs_torch.py --clattn ./clattn --shape 1/32/8192/128/2048/causal
    python3 tools/rerope_vs_torch.py --clattn ./clattn --no-seed          # without Triton

Shapes are Z/H/N/D/W[/causal]. Without triton the seed's columns are '-' (a note on stderr).
Not used by any test.
"""
import argparse
import math
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


SEED_HEAD_DIMS = (16, 32, 64, 128)


def first_line(e):
    """An exception as 'Type: first line[ ... last line]' (Triton's errors end with the cause)."""
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    text = lines[0][:100] if lines else ""
    if len(lines) > 1:
        text += " ... " + lines[-1][:100]
    return f"{type(e).__name__}: {text}"


def time_eager(fn, flush, repeat):
    """Median ms of eager calls of fn timed with CUDA events, the L2 flushed before each."""
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


def load_seed():
    """The seed's seed_attention, or None (with a note) where triton or the module does not import."""
    try:
        from rerope_seed import seed_attention
    except Exception as e:  # ImportError without triton
        print(f"note: the ReRoPE seed is not timed: {first_line(e)}", file=sys.stderr)
        return None
    return seed_attention


def seed_times(seed, Z, H, N, D, W, causal, flush, repeat, bwd_max_d):
    """The seed's forward (graph replay, else eager) and forward+backward (eager) ms; None where n/a."""
    if seed is None or D not in SEED_HEAD_DIMS or N % 128:
        return None, None
    q1, q2, k1, k2, v = ((torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) * 0.5).requires_grad_()
                         for _ in range(5))
    do = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    sm_scale = 1.0 / math.sqrt(D)

    def fwd():
        with torch.no_grad():
            return seed(q1, q2, k1, k2, v, causal, sm_scale, W)

    def fwd_bwd():
        o = seed(q1, q2, k1, k2, v, causal, sm_scale, W)
        torch.autograd.grad(o, (q1, q2, k1, k2, v), do)
    tf = tfb = None
    try:
        try:
            tf = time_graph(fwd, flush, repeat)
        except Exception as e:  # capture refused: time the launches eagerly
            print(f"  seed graph: {first_line(e)}; timing eagerly", file=sys.stderr)
            torch.cuda.synchronize()
            tf = time_eager(fwd, flush, repeat)
    except Exception as e:
        print(f"  seed f: {first_line(e)}", file=sys.stderr)
    if D <= bwd_max_d:
        try:
            tfb = time_eager(fwd_bwd, flush, min(repeat, 3))
        except Exception as e:
            print(f"  seed f+b: {first_line(e)}", file=sys.stderr)
    del q1, q2, k1, k2, v, do
    return tf, tfb


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
    ap.add_argument("--no-seed", action="store_true", help="do not time the ReRoPE seed (Triton)")
    ap.add_argument("--seed-bwd-max-d", type=int, default=128,
                    help="time the seed's forward+backward only up to this head dim (default 128)")
    args = ap.parse_args()
    flush = flush_buffer()
    seed = None if args.no_seed else load_seed()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; ms; ratios clattn / peer "
          "(torch: plain attention; seed: tools/rerope_seed.py, Triton ReRoPE)")
    print(f"{'shape':28s} {'fwd':>7s} {'bwd':>7s} {'f+b':>7s} {'bwdTF':>6s} {'cudnn f':>8s} {'f+b':>7s} "
          f"{'flash f':>8s} {'f+b':>7s} {'seed f':>8s} {'f+b':>7s} {'f/cud':>6s} {'fb/cud':>6s} "
          f"{'f/sd':>6s} {'fb/sd':>6s}  kernels")
    for spec in args.shape or ISSUE_SHAPES:
        f = spec.split("/")
        Z, H, N, D, W = map(int, f[:5])
        causal = len(f) > 5 and f[5] == "causal"
        tf, tb, kern = clattn_times(args.clattn, Z, H, N, D, W, causal, args.repeat)
        peers = torch_times(Z, H, N, D, causal, flush, args.repeat)
        sf, sfb = seed_times(seed, Z, H, N, D, W, causal, flush, args.repeat, args.seed_bwd_max_d)
        ms = lambda x: f"{x:7.3f}" if x else f"{'-':>7s}"
        cf, cfb = peers.get("cudnn", (None, None))
        ff, ffb = peers.get("flash", (None, None))
        flops = 4.0 * Z * H * N * N * D * (0.5 if causal else 1.0)
        tflops = 2.5 * flops / (tb * 1e9) if tb else 0
        fb = tf + tb if tf and tb else None
        r = lambda a, b: f"{a / b:6.2f}" if a and b else f"{'-':>6s}"
        print(f"{spec:28s} {ms(tf)} {ms(tb)} {ms(fb)} {tflops:6.0f} {ms(cf):>8s} {ms(cfb)} {ms(ff):>8s} {ms(ffb)} "
              f"{ms(sf):>8s} {ms(sfb)} {r(tf, cf)} {r(fb, cfb)} {r(tf, sf)} {r(fb, sfb)}  {kern}", flush=True)


if __name__ == "__main__":
    main()
