"""Fixture workload ``window_missed``: a capture whose window holds none of the GPU work.

Profiled with ``--capture-range=nvtx --nvtx-capture=host``, the window a user might set on the
wrong range: the program runs its GEMMs first (in the NVTX range "gpu"), then a host-only
phase in the range "host" (ten "step" ranges, each a read of /proc/self/status and a 10 ms
sleep). The capture opens at "host" and closes at its end, so the export has NVTX ranges and
OS runtime calls, CUDA traced, and no CUDA event at all.
"""

import time

import torch

nvtx = torch.cuda.nvtx
a = torch.randn(1024, 1024, device="cuda")
with nvtx.range("gpu"):
    for _ in range(20):
        a = torch.tanh(a @ a)
    torch.cuda.synchronize()

nvtx.range_push("host")
for _ in range(10):
    nvtx.range_push("step")
    with open("/proc/self/status") as f:
        f.read()
    time.sleep(0.01)
    nvtx.range_pop()
nvtx.range_pop()
time.sleep(0.2)  # (after the window: nsys has closed the capture)
