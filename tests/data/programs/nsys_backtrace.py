"""Fixture workload ``backtrace``: CUDA API calls made from known Python functions, for nsys's
backtraces of CUDA API calls (``--cudabacktrace``, ``--python-backtrace=cuda``).

``STEPS`` steps, each an NVTX range ``step``:

* ``upload`` (before the steps): two 1024 x 1024 float32 matrices copied to the GPU from pinned
  memory (``cudaMemcpyAsync``);
* ``forward``, every step: ``relu(x @ w)`` (a cuBLAS GEMM and an elementwise kernel launched);
* ``read_loss``, every ``READ_EVERY``-th step: ``y.sum().item()``, the device-to-host copy of the
  loss that waits for the GPU (the synchronization a training loop's logging makes).

At the end the program prints, per function, its source line and how many times it ran: the
ground truth of the call stacks (profile.log).
"""

from __future__ import annotations

import inspect

import torch

STEPS = 20
READ_EVERY = 5


def upload(n: int) -> torch.Tensor:
    return torch.randn(n, n).pin_memory().to("cuda", non_blocking=True)


def forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w)


def read_loss(y: torch.Tensor) -> float:
    return y.sum().item()


def main() -> None:
    x, w = upload(1024), upload(1024)
    reads = 0
    for step in range(STEPS):
        torch.cuda.nvtx.range_push("step")
        y = forward(x, w)
        if step % READ_EVERY == 0:
            read_loss(y)
            reads += 1
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    for fn, calls in ((upload, 2), (forward, STEPS), (read_loss, reads)):
        lines, first = inspect.getsourcelines(fn)
        print(f"{fn.__name__}: line {first + len(lines) - 1}, {calls} calls")


if __name__ == "__main__":
    main()
