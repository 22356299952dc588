"""A small torch program for ``tracekit capture -- CMD`` (README, "Your own program"): two warm-up
steps, then ``--steps`` steps of a GEMM, ReLU and softmax, each inside the NVTX push/pop range
``step`` (torch.cuda.nvtx); exits with ``--fail`` (0 by default) to show a failing command."""

import argparse
import sys

import torch


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=2048, help="matrix size")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--fail", type=int, default=0, help="exit status")
    args = p.parse_args()
    x = torch.randn(args.n, args.n, device="cuda")
    w = torch.randn(args.n, args.n, device="cuda")
    for _ in range(2):  # warm-up: cuBLAS handles, the caching allocator
        torch.relu(x @ w)
    torch.cuda.synchronize()
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        z = torch.softmax(torch.relu(x @ w), dim=-1)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"done: {args.steps} steps, checksum {z.sum().item():.3f}")
    if args.fail:
        print(f"failing on purpose with status {args.fail}", file=sys.stderr)
    return args.fail


if __name__ == "__main__":
    sys.exit(main())
