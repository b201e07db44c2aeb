"""Speed reference for `clattn run merge` on an NVIDIA GPU: the same merge of
n partial attention states written in PyTorch (eager, and torch.compile),
timed like the CLI (CUDA events, L2 flushed before each run, median) and
reported as the same bandwidth: bytes of partials read + outputs written.

    python3 tools/bench_merge_torch.py --n 8 --batch 64 --m 1 --heads 32 --head-dim 128 --dtype f32
"""
import argparse
import statistics

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def merge(parts_o, parts_lse, out_dtype):
    """o = sum_i exp(lse_i - lse) o_i, lse = logsumexp_i lse_i; parts_o [B, M, H, D], parts_lse [B, H, M]."""
    lse = torch.stack(parts_lse)                                  # [n, B, H, M]
    total = torch.logsumexp(lse, dim=0)                           # [B, H, M]
    w = torch.exp(lse - total).permute(0, 1, 3, 2).unsqueeze(-1)  # [n, B, M, H, 1]
    w = torch.nan_to_num(w, nan=0.0)                              # all -inf rows: o = 0
    o = (torch.stack(parts_o).float() * w).sum(dim=0)
    return o.to(out_dtype), total


def bench(fn, repeat, warmup, flush):
    times = []
    for i in range(warmup + repeat):
        flush.fill_(i)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", default="f32", choices=DTYPES)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    dt = DTYPES[args.dtype]
    B, M, H, D, n = args.batch, args.m, args.heads, args.head_dim, args.n
    parts_o = [torch.randn(B, M, H, D, device="cuda").to(dt) for _ in range(n)]
    parts_lse = [2 * torch.randn(B, H, M, device="cuda") for _ in range(n)]
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # > 2x the H200's L2
    rows = B * M * H
    es = torch.finfo(dt).bits // 8
    nbytes = n * (rows * D * es + rows * 4) + rows * D * es + rows * 4
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: n={n} B={B} M={M} H={H} D={D} {args.dtype}")
    compiled = torch.compile(merge)
    for name, fn in (("eager", merge), ("torch.compile", compiled)):
        ms = bench(lambda: fn(parts_o, parts_lse, dt), args.repeat, args.warmup, flush)
        print(f"{name:14s} {ms:.4f} ms  {nbytes / (ms * 1e6):8.1f} GB/s  ({nbytes / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
