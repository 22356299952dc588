"""Fixture workload ``ncu_diff``: one Triton kernel, two launch configurations.

``scale_add_kernel`` (out = a * x + y over 2**26 fp32 elements, memory-bound) is launched
``LAUNCHES`` times inside the NVTX range ``diff/scale_add``, so ``--nvtx --nvtx-include
"diff/"`` selects exactly those launches. The configuration is chosen on the command line:

* ``a``: BLOCK=1024 elements per program, num_warps=4 (grid 65536 x 1 x 1, 128 threads);
* ``b``: BLOCK=256, num_warps=1 (grid 262144 x 1 x 1, 32 threads): the same kernel name
  and work, four times as many blocks of a quarter the size (a lower occupancy limit by
  blocks per SM).

A warm-up launch compiles the kernel outside the range. Runs on CPU too (``--device cpu``
with ``TRITON_INTERPRET=1``, NVTX skipped, a small size).
"""

import argparse

import torch
import triton
import triton.language as tl

LAUNCHES = 3
CONFIGS = {"a": {"BLOCK": 1024, "num_warps": 4}, "b": {"BLOCK": 256, "num_warps": 1}}


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * x + y, mask=mask)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", choices=sorted(CONFIGS))
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    cfg = CONFIGS[args.config]
    n = 1 << 26 if cuda else 1 << 12
    x = torch.randn(n, device=dev)
    y = torch.randn(n, device=dev)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, cfg["BLOCK"]),)

    def launch():
        scale_add_kernel[grid](x, y, out, 0.5, n, BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])

    launch()  # warm-up: compiles outside the profiled range
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("diff")
        torch.cuda.nvtx.range_push("scale_add")
    for _ in range(LAUNCHES):
        launch()
    if cuda:
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    assert torch.allclose(out, 0.5 * x + y)
    print(f"ncu_diff {args.config} done: grid {grid}, block {cfg['num_warps'] * 32} threads, "
          f"{LAUNCHES} launches")


if __name__ == "__main__":
    main()
