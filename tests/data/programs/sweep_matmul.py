"""Fixture workload ``sweep``: a program of the user's kind, swept over a grid by
``tracekit sweep --grid m=1024,4096 --grid dtype=fp16,fp32 -- python sweep_matmul.py --m {m}
--dtype {dtype}`` (tests/data/command_sweep).

``STEPS`` steps, each an NVTX range ``step`` ending with a synchronize: a square GEMM of size
``m`` in ``dtype`` (cuBLAS; fp32 without TF32, so that the two dtypes run other kernels), then a
softmax of its rows. Three warm-up steps run first, outside the ranges (cuBLAS picks its
kernels there).

Planted change (``--slow``, the ``slow`` sweep): the softmax runs twice per step, on the GEMM's
output and on its own: the same kernel twice as often at every point, nothing else changed.

Runs on the CPU too (``--device cpu``, NVTX skipped) to check the program's logic.
"""

import argparse
import contextlib

import torch

STEPS = 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, required=True, help="the GEMM's size (m x m x m)")
    ap.add_argument("--dtype", choices=("fp16", "fp32"), required=True)
    ap.add_argument("--slow", action="store_true", help="the softmax twice per step (the planted change)")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = {"fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    gpu = args.device == "cuda"
    gen = torch.Generator(device=args.device).manual_seed(0)
    x = torch.randn(args.m, args.m, device=args.device, dtype=dtype, generator=gen)
    w = torch.randn(args.m, args.m, device=args.device, dtype=dtype, generator=gen) / args.m ** 0.5

    def step() -> torch.Tensor:
        z = (x @ w).softmax(-1)
        if args.slow:
            z = z.softmax(-1)
        return z

    def nvtx(name: str):
        if not gpu:
            return contextlib.nullcontext()
        return torch.cuda.nvtx.range(name)

    for _ in range(3):
        step()
    if gpu:
        torch.cuda.synchronize()
    total = 0.0
    for _ in range(args.steps):
        with nvtx("step"):
            total += float(step()[0, 0])  # (reads back: the step ends when its GPU work does)
    print(f"m={args.m} dtype={args.dtype} slow={args.slow} steps={args.steps} checksum={total:.6f}")


if __name__ == "__main__":
    main()
