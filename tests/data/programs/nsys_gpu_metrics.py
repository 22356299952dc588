"""Fixture workload ``gpu_metrics``: phases the GPU's sampled metrics tell apart, captured
with ``--gpu-metrics-devices=all`` (nsys samples the GPU's counters: clocks, SMs active,
tensor pipes, DRAM bandwidth, PCIe).

Inside ``cudaProfilerStart``/``Stop`` (``--capture-range=cudaProfilerApi``: the warm-up and
the start of the program are not sampled), one NVTX range ``metrics`` holding, in turn:

* ``gemm``: ``GEMMS`` bf16 GEMMs of 8192^3 (cuBLAS; tensor pipes busy, power-limited);
* ``copy``: ``ADDS`` fp32 adds of 2**28 elements (DRAM-bound: 3 GiB moved each);
* ``idle``: the host sleeps ``IDLE_S`` with nothing on the GPU.

Each phase ends with a synchronize. Configurations: ``base`` (and ``again``, the same
program captured once more: a noise pair) and ``zeros`` (the GEMMs' inputs all zero: the
same kernels draw less power and run at a higher SM clock, in as many cycles). Runs on
CPU too (``--device cpu``, NVTX and the profiler calls skipped, small sizes).
"""

import argparse
import contextlib
import time

import torch

CONFIGS = ("base", "again", "zeros")
GEMMS = 100
ADDS = 200
IDLE_S = 0.1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", choices=CONFIGS)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    n, n_add, dtype = (8192, 1 << 28, torch.bfloat16) if cuda else (64, 1 << 12, torch.float32)
    torch.manual_seed(0)
    make = torch.zeros if args.config == "zeros" else torch.randn
    a, b = make(n, n, device=dev, dtype=dtype), make(n, n, device=dev, dtype=dtype)
    x, y = torch.randn(n_add, device=dev), torch.randn(n_add, device=dev)
    c, out = torch.empty(n, n, device=dev, dtype=dtype), torch.empty_like(x)

    @contextlib.contextmanager
    def rng(name: str):
        if cuda:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()

    gemms, adds = (GEMMS, ADDS) if cuda else (2, 2)
    torch.matmul(a, b, out=c)  # warm-up: cuBLAS handles and heuristics before the capture
    torch.add(x, y, out=out)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    with rng("metrics"):
        with rng("gemm"):
            for _ in range(gemms):
                torch.matmul(a, b, out=c)
        with rng("copy"):
            for _ in range(adds):
                torch.add(x, y, out=out)
        with rng("idle"):
            time.sleep(IDLE_S if cuda else 0)
    if cuda:
        torch.cuda.profiler.stop()
    assert torch.equal(out, x + y)
    print(f"gpu_metrics {args.config} done: {gemms} GEMMs of {n}^3 ({dtype}), {adds} adds of {n_add} elements")


if __name__ == "__main__":
    main()
