"""Fixture workload ``ncu_clocks``: the same kernels on random data and on zeros, where the
GPU's own clock (left alone: ``--clock-control none``) differs with the data.

A tensor-core GEMM's power draw depends on the values it multiplies: on zeros it draws
less, so a power-limited GPU runs it at a higher SM clock and it ends sooner in as many
cycles. The code, grid and block are the same; only the clock moved. Inside the NVTX range
``clocks/run`` (``--nvtx --nvtx-include "clocks/"``):

* a bf16 GEMM of 8192 x 8192 x 8192 (cuBLAS; ~1.4 ms, power-limited) and one of 2048^3;
* a memory-bound fp32 add of 2**28 elements (DRAM-bound: its time follows the memory
  clock, not the SM clock), the control that must not move.

Configurations: ``random`` (and ``random_again``, the same program profiled once more: a
noise pair) and ``zeros`` (the GEMMs' inputs all zero). Runs on CPU too (``--device cpu``,
NVTX skipped, small sizes).
"""

import argparse

import torch

CONFIGS = ("random", "random_again", "zeros")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", choices=CONFIGS)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    big, small, n_add = (8192, 2048, 1 << 28) if cuda else (64, 32, 1 << 12)
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)

    def operands(n):
        if args.config == "zeros":
            return torch.zeros(n, n, device=dev, dtype=dtype), torch.zeros(n, n, device=dev, dtype=dtype)
        return torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)

    a_big, b_big = operands(big)
    a_small, b_small = operands(small)
    x, y = torch.randn(n_add, device=dev), torch.randn(n_add, device=dev)
    out = torch.empty_like(x)

    def step():
        torch.matmul(a_big, b_big)
        torch.matmul(a_small, b_small)
        torch.add(x, y, out=out)

    step()  # warm-up: cuBLAS handles and heuristics outside the profiled range
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("clocks")
        torch.cuda.nvtx.range_push("run")
    step()
    if cuda:
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    assert torch.equal(out, x + y)
    print(f"ncu_clocks {args.config} done: GEMMs {big}^3 and {small}^3 ({dtype}), add of {n_add} elements")


if __name__ == "__main__":
    main()
