"""Fixture workload ``ncu_shapes``: one Triton kernel at three sizes in one NVTX range,
before and after a change that makes it slower at every size.

``shapes_kernel`` (out = sum over REPEAT shifted reads of x, + y; fp32, memory-bound) is
launched at 2**16, 2**20 and 2**24 elements, the three sizes twice in turn, inside the NVTX
range ``shapes/sum``, so ``--nvtx --nvtx-include "shapes/"`` selects exactly those six
launches: one kernel name and NVTX path whose launches last from a few µs to ~100 µs.
The configuration is chosen on the command line:

* ``a`` (and ``a_again``, ``a_again2``, the same program profiled again: the noise of three
  identical captures): REPEAT=1;
* ``slow``: REPEAT=4, the same kernel name, grid and block: every launch reads x four times
  (shifted, so no read is a repeat of another), the planted regression of a code change;
* ``int``: REPEAT=1 on int32 data, the same kernel name, grid and block: integer adds only, so
  its launches execute no floating-point instruction (a roofline without an FP point).

``--sizes 16,24`` launches only those sizes (log2 of the element count), each twice in the range:
a sweep's grid parameter (tests/data/ncu_source_sweep: ``--grid size=16,24 -- ... --sizes {size}``).

A warm-up launch of each size compiles outside the range. Runs on CPU too (``--device cpu``
with ``TRITON_INTERPRET=1``, NVTX skipped, small sizes).
"""

import argparse

import torch
import triton
import triton.language as tl

CONFIGS = {"a": (1, "float32"), "a_again": (1, "float32"), "a_again2": (1, "float32"), "slow": (4, "float32"),
           "int": (1, "int32")}
BLOCK = 1024


@triton.jit
def shapes_kernel(x_ptr, y_ptr, out_ptr, n, REPEAT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(y_ptr + offs, mask=mask)
    for r in tl.static_range(REPEAT):
        acc += tl.load(x_ptr + (offs + r * 4099) % n, mask=mask)
    tl.store(out_ptr + offs, acc, mask=mask)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", choices=sorted(CONFIGS))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sizes", help="log2 of each size to launch, comma-separated (default: 16,20,24; "
                                    "on CPU 10,11,12)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    repeat, dtype = CONFIGS[args.config]
    dtype = getattr(torch, dtype)
    sizes = [1 << 16, 1 << 20, 1 << 24] if cuda else [1 << 10, 1 << 11, 1 << 12]
    if args.sizes:
        sizes = [1 << int(v) for v in args.sizes.split(",")]
    def rand(n):
        if dtype.is_floating_point:
            return torch.randn(n, device=dev, dtype=dtype)
        return torch.randint(-1000, 1000, (n,), device=dev, dtype=dtype)

    data = {n: (rand(n), rand(n), torch.empty(n, device=dev, dtype=dtype)) for n in sizes}

    def launch(n):
        x, y, out = data[n]
        shapes_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, REPEAT=repeat, BLOCK=BLOCK, num_warps=4)

    for n in sizes:  # warm-up: compiles outside the profiled range
        launch(n)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("shapes")
        torch.cuda.nvtx.range_push("sum")
    for _ in range(2):
        for n in sizes:
            launch(n)
    if cuda:
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    for n in sizes:
        x, y, out = data[n]
        i = torch.arange(n, device=dev)
        want = y + sum(x[(i + r * 4099) % n] for r in range(repeat))
        assert torch.allclose(out, want, atol=1e-5), n
    print(f"ncu_shapes {args.config} done: REPEAT={repeat}, {dtype}, sizes {sizes}, {2 * len(sizes)} launches")


if __name__ == "__main__":
    main()
