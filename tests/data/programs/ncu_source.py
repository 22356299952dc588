"""Fixture workload ``ncu_source``: one Triton kernel whose cost sits on known source lines.

``planted_kernel`` reads ``x`` twice and writes ``out``; each line below marked PLANT is a
hot spot an instruction-level profile must attribute to that line:

* ``gather``: ``x[(offs * STRIDE) % n]`` with STRIDE = 32 fp32 elements, so each of a warp's
  32 threads reads its own 32-byte sector of which it uses 4 bytes: ncu's excess L2 sectors
  for the kernel are all on this line (the other accesses are contiguous);
* ``chain``: a dependent chain of ``CHAIN`` multiply-adds and sines per element, math-bound
  work on one line;
* the contiguous load (``coalesced``) and the store: whole sectors, no excess.

It is launched ``LAUNCHES`` times inside the NVTX range ``src/planted``, so ``--nvtx
--nvtx-include "src/"`` selects exactly those launches; a warm-up launch compiles the kernel
outside the range. Capture with ``--import-source yes`` so the report carries this file's
text. Runs on CPU too (``--device cpu`` with ``TRITON_INTERPRET=1``, NVTX skipped, a small size).
"""

import argparse

import torch
import triton
import triton.language as tl

LAUNCHES = 2
STRIDE = 32
CHAIN = 24


@triton.jit
def planted_kernel(x_ptr, out_ptr, n, STRIDE: tl.constexpr, CHAIN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x_ptr + offs, mask=mask, other=0.0)  # PLANT coalesced
    b = tl.load(x_ptr + (offs * STRIDE) % n, mask=mask, other=0.0)  # PLANT gather
    for _ in tl.static_range(CHAIN):
        a = a * 0.999 + tl.sin(a)  # PLANT chain
    tl.store(out_ptr + offs, a + b, mask=mask)


def reference(x: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    offs = torch.arange(n, device=x.device)
    a, b = x.clone(), x[(offs * STRIDE) % n]
    for _ in range(CHAIN):
        a = a * 0.999 + torch.sin(a)
    return a + b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    n = 1 << 24 if cuda else 1 << 12
    block = 1024
    x = torch.randn(n, device=dev)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, block),)

    def launch():
        planted_kernel[grid](x, out, n, STRIDE=STRIDE, CHAIN=CHAIN, BLOCK=block, num_warps=4)

    launch()  # warm-up: compiles outside the profiled range
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("src")
        torch.cuda.nvtx.range_push("planted")
    for _ in range(LAUNCHES):
        launch()
    if cuda:
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    torch.testing.assert_close(out, reference(x), rtol=1e-4, atol=1e-4)
    print(f"ncu_source done: grid {grid}, {LAUNCHES} launches")


if __name__ == "__main__":
    main()
