"""Fixture workload ``ncu_occupancy``: two Triton kernels before and after a tuning change that
moves their theoretical occupancy through another limit (what ``tracekit diff`` must explain).

* ``matmul_kernel``: C = A @ B, fp16 4096 x 4096 x 4096, 128 x 128 x 64 tiles, 4 warps. The
  configuration ``a`` pipelines 2 stages of A and B tiles in shared memory, ``b`` 4 stages:
  twice the shared memory per block, so fewer blocks fit an SM.
* ``poly_kernel``: a degree-8 polynomial of every element of 2**24 fp32, 4 warps per block.
  ``a`` gives each block 1,024 elements (8 per thread), ``b`` 8,192 (64 per thread, all live in
  registers at once): more registers per thread, so fewer blocks fit an SM.

Each is launched twice inside the NVTX range ``occ/<kernel>``, after a warm-up launch that
compiles outside it, so ``--nvtx --nvtx-include "occ/"`` selects exactly the four launches.
Runs on CPU too (``--device cpu`` with ``TRITON_INTERPRET=1``, NVTX skipped, small sizes): the
results are checked against PyTorch's.
"""

import argparse

import torch
import triton
import triton.language as tl

LAUNCHES = 2
CONFIGS = {"a": {"stages": 2, "poly_block": 1024}, "b": {"stages": 4, "poly_block": 8192}}
BM, BN, BK = 128, 128, 64
COEFFS = (0.5, -0.25, 0.125, 1.0, -1.5, 0.75, 0.0625, -0.03125, 0.2)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def poly_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = x * 0.5 - 0.25  # Horner's rule over COEFFS
    y = y * x + 0.125
    y = y * x + 1.0
    y = y * x - 1.5
    y = y * x + 0.75
    y = y * x + 0.0625
    y = y * x - 0.03125
    y = y * x + 0.2
    tl.store(out_ptr + offs, y, mask=mask)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", choices=sorted(CONFIGS))
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    cfg = CONFIGS[args.config]
    size, n = (4096, 1 << 24) if cuda else (256, 1 << 14)
    a = torch.randn(size, size, device=dev, dtype=torch.float16)
    b = torch.randn(size, size, device=dev, dtype=torch.float16)
    c = torch.empty(size, size, device=dev, dtype=torch.float16)
    x = torch.rand(n, device=dev) * 2 - 1
    out = torch.empty_like(x)
    launches = {
        "matmul": lambda: matmul_kernel[(size // BM, size // BN)](a, b, c, size, size, size, BM=BM, BN=BN, BK=BK,
                                                                  num_warps=4, num_stages=cfg["stages"]),
        "poly": lambda: poly_kernel[(triton.cdiv(n, cfg["poly_block"]),)](x, out, n, BLOCK=cfg["poly_block"],
                                                                          num_warps=4),
    }
    for launch in launches.values():  # warm-up: compiles outside the profiled range
        launch()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("occ")
    for name, launch in launches.items():
        if cuda:
            torch.cuda.nvtx.range_push(name)
        for _ in range(LAUNCHES):
            launch()
        if cuda:
            torch.cuda.nvtx.range_pop()
    if cuda:
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()

    want = (a.float() @ b.float()).half()
    assert torch.allclose(c.float(), want.float(), rtol=2e-2, atol=0.5), (c.float() - want.float()).abs().max()
    want = torch.full_like(x, COEFFS[0])
    for coeff in COEFFS[1:]:
        want = want * x + coeff
    assert torch.allclose(out, want, atol=1e-5)
    print(f"ncu_occupancy {args.config} done: {2 * LAUNCHES} launches (matmul {size}^3 in {cfg['stages']} stages, "
          f"poly {n} elements {cfg['poly_block']} per block)")


if __name__ == "__main__":
    main()
