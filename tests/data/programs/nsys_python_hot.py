"""Fixture workload ``python_hot``: pure-Python functions with planted shares of the time, for
nsys's samples of the Python threads' stacks (``--python-sampling=true``).

``STEPS`` steps, each an NVTX range ``step`` on the main thread:

* ``parse``: ``PARSE_MS`` of Python bytecode (a loop over a list, the interpreter busy);
* ``pack``: ``PACK_MS`` of the same, called from ``prepare`` (a stack two functions deep);
* ``run_model``: a GEMM on the GPU and ``.item()``, which waits for it (the thread blocked in C).

At the end the program prints, per function, its source line and the time spent in it over the
steps, measured with ``time.perf_counter`` around each call: the ground truth of the samples'
shares (profile.log). ``--slow-parse``: ``parse`` takes twice as long (a planted regression).
"""

from __future__ import annotations

import inspect
import time

import torch

STEPS = 40
PARSE_MS = 8.0
PACK_MS = 4.0


def _spin(ms: float) -> int:
    """Interpret Python bytecode for ``ms`` milliseconds."""
    end, n = time.perf_counter() + ms / 1e3, 0
    while time.perf_counter() < end:
        n += sum(i * i for i in range(64))
    return n


def parse() -> int:
    return _spin(PARSE_MS)


def pack() -> int:
    return _spin(PACK_MS)


def prepare() -> int:
    return pack()


def run_model(x: torch.Tensor, w: torch.Tensor) -> float:
    return (x @ w).relu().sum().item()


def main() -> None:
    x = torch.randn(8192, 8192, device="cuda")
    w = torch.randn(8192, 8192, device="cuda")
    run_model(x, w)  # (cuBLAS's first call: its set-up outside the steps)
    spent = {parse: 0.0, prepare: 0.0, run_model: 0.0}
    for _ in range(STEPS):
        torch.cuda.nvtx.range_push("step")
        for fn, args in ((parse, ()), (prepare, ()), (run_model, (x, w))):
            t0 = time.perf_counter()
            fn(*args)
            spent[fn] += time.perf_counter() - t0
        torch.cuda.nvtx.range_pop()
    for fn, seconds in spent.items():
        lines, first = inspect.getsourcelines(fn)
        print(f"{fn.__name__}: line {first + len(lines) - 1}, {seconds * 1e3:.1f} ms in {STEPS} calls")


if __name__ == "__main__":
    import sys

    if "--slow-parse" in sys.argv[1:]:  # (the planted regression of nsys_python_hot_slow: parse takes twice as long)
        PARSE_MS *= 2
    main()
