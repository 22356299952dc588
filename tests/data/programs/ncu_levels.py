"""Fixture workload ``ncu_levels``: four Triton kernels, each built to be bound by another level
of the memory hierarchy in ncu's hierarchical roofline (L1, L2, DRAM) or by compute.

Every kernel adds one value per element loaded (fp32, one FLOP per load), so the FLOP count is
the loads' count and each kernel's place on the chart is set by where its loads are served from;
bound means the lowest of the three roofs at the kernel's intensities, not that it runs at it:

* ``dram_kernel``: out = x + y over 2**26 elements (768 MB moved once): every byte from DRAM;
* ``l2_kernel``: 16 reads of a 4 MB array per element, each read 65,537 elements further on, so
  that the lines a block reads are spread over the whole array: larger than any SM's L1, far
  smaller than L2; 16 times the bytes at L1 and L2 than at DRAM;
* ``l1_kernel``: 64 reads per element of an 8 KB window that two neighbouring blocks share (each
  read shifted by 33 elements within it): after the first, the lines are in the SM's L1; about
  32 times the bytes at L1 than at L2 (measured on an H100);
* ``compute_kernel``: fp64, 512 dependent fused multiply-adds per element loaded: right of every
  ridge of FP64's ceiling.

Each is launched once inside the NVTX range ``levels/<level>``, after a warm-up launch that
compiles outside it, so ``--nvtx --nvtx-include "levels/"`` selects exactly the four launches.
Runs on CPU too (``--device cpu`` with ``TRITON_INTERPRET=1``, NVTX skipped, small sizes): the
results are checked against PyTorch's.
"""

import argparse

import torch
import triton
import triton.language as tl

BLOCK = 1024
L2_READS, L2_STRIDE = 16, 65537
L1_READS, L1_WINDOW, L1_SHIFT = 64, 2048, 33
FMAS = 512


@triton.jit
def dram_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def l2_kernel(x_ptr, out_ptr, n, READS: tl.constexpr, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(READS):
        acc += tl.load(x_ptr + (offs + r * STRIDE) % n, mask=mask)
    tl.store(out_ptr + offs, acc, mask=mask)


@triton.jit
def l1_kernel(x_ptr, out_ptr, n, READS: tl.constexpr, WINDOW: tl.constexpr, SHIFT: tl.constexpr,
              BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    lane = tl.arange(0, BLOCK)
    base = (pid * BLOCK) // WINDOW * WINDOW  # the window of the block's elements
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(READS):
        acc += tl.load(x_ptr + base + (lane + pid * BLOCK % WINDOW + r * SHIFT) % WINDOW)
    offs = pid * BLOCK + lane
    tl.store(out_ptr + offs, acc, mask=offs < n)


@triton.jit
def compute_kernel(x_ptr, out_ptr, n, FMAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask)
    acc = v
    for _ in tl.static_range(FMAS):
        acc = acc * 0.999 + v
    tl.store(out_ptr + offs, acc, mask=mask)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    n_dram, n_l2, n_l1, n_fp64 = ((1 << 26, 1 << 20, 1 << 24, 1 << 22) if cuda else (1 << 12, 1 << 11, 1 << 12, 1 << 10))
    x_dram, y_dram = torch.randn(n_dram, device=dev), torch.randn(n_dram, device=dev)
    x_l2, x_l1 = torch.randn(n_l2, device=dev), torch.randn(n_l1, device=dev)
    x_fp64 = torch.rand(n_fp64, device=dev, dtype=torch.float64)
    outs = {k: torch.empty_like(v) for k, v in (("DRAM", x_dram), ("L2", x_l2), ("L1", x_l1), ("compute", x_fp64))}

    launches = {
        "DRAM": lambda: dram_kernel[(triton.cdiv(n_dram, BLOCK),)](x_dram, y_dram, outs["DRAM"], n_dram, BLOCK=BLOCK),
        "L2": lambda: l2_kernel[(triton.cdiv(n_l2, BLOCK),)](x_l2, outs["L2"], n_l2, READS=L2_READS, STRIDE=L2_STRIDE,
                                                              BLOCK=BLOCK),
        "L1": lambda: l1_kernel[(n_l1 // BLOCK,)](x_l1, outs["L1"], n_l1, READS=L1_READS, WINDOW=L1_WINDOW,
                                                  SHIFT=L1_SHIFT, BLOCK=BLOCK),
        "compute": lambda: compute_kernel[(triton.cdiv(n_fp64, BLOCK),)](x_fp64, outs["compute"], n_fp64, FMAS=FMAS,
                                                                         BLOCK=BLOCK),
    }
    for launch in launches.values():  # warm-up: compiles outside the profiled range
        launch()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("levels")
    for level, launch in launches.items():
        if cuda:
            torch.cuda.nvtx.range_push(level)
        launch()
        if cuda:
            torch.cuda.nvtx.range_pop()
    if cuda:
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()

    assert torch.allclose(outs["DRAM"], x_dram + y_dram)
    i = torch.arange(n_l2, device=dev)
    assert torch.allclose(outs["L2"], sum(x_l2[(i + r * L2_STRIDE) % n_l2] for r in range(L2_READS)), atol=1e-4)
    i = torch.arange(n_l1, device=dev)
    base = i // L1_WINDOW * L1_WINDOW
    assert torch.allclose(outs["L1"], sum(x_l1[base + (i % L1_WINDOW + r * L1_SHIFT) % L1_WINDOW]
                                          for r in range(L1_READS)), atol=1e-3)
    want = x_fp64.clone()
    for _ in range(FMAS):
        want = want * 0.999 + x_fp64
    assert torch.allclose(outs["compute"], want)
    print(f"ncu_levels done: 4 launches (DRAM {n_dram}, L2 {n_l2}, L1 {n_l1}, compute {n_fp64} elements)")


if __name__ == "__main__":
    main()
