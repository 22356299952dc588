"""Fixture workload ``many_kernels``: a very large number of tiny kernels.

About 24k launches of a handful of elementwise kernels, in NVTX ranges per
iteration, to check grouping, medians and stddev at scale and launch overhead.
"""

import torch

dev = torch.device("cuda")
x = torch.ones(256, device=dev)
y = torch.ones(256, device=dev)
for _ in range(50):  # warm-up
    x.add_(1.0)
torch.cuda.synchronize()

for it in range(8):
    torch.cuda.nvtx.range_push(f"iter {it}")
    torch.cuda.nvtx.range_push("adds")
    for _ in range(1500):
        x.add_(y)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("muls")
    for _ in range(1000):
        x.mul_(0.5)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("mixed")
    for _ in range(250):
        y = torch.sin(x) + y
        x = x * 0.999
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("many_kernels done", x.sum().item())
