"""Host-to-device copies of many sizes, the largest from pinned or (--pageable) pageable memory.

For diff's totals: the same copies, the same count and the same operation name
('[CUDA memcpy Host-to-Device]') in both captures; with --pageable the 4 MiB copies come
from pageable host memory, which the driver stages through a pinned buffer, so they take
longer while staying the longest copies of the run. Each of 40 steps (NVTX "step") copies 24
small tensors (32 B to 256 KiB, pinned in both) and 4 tensors of 4 MiB, then a kernel reads
them all, and the step synchronizes.
"""

import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--pageable", action="store_true", help="the 4 MiB copies from pageable memory")
ap.add_argument("--steps", type=int, default=40)
args = ap.parse_args()

dev = torch.device("cuda")
small = [torch.arange(n, dtype=torch.float32).pin_memory() for n in
         (8, 64, 256, 1024, 4096, 16384, 65536) * 3 + (8192, 32768, 65536)]
large = [torch.arange(1 << 20, dtype=torch.float32) for _ in range(4)]  # 4 MiB each
if not args.pageable:
    large = [t.pin_memory() for t in large]
dst_small = [torch.empty_like(t, device=dev) for t in small]
dst_large = [torch.empty_like(t, device=dev) for t in large]
acc = torch.zeros(1, device=dev)

for _ in range(3):  # warm-up (allocations, the staging buffer, the kernels' first launches)
    for s, d in zip(small + large, dst_small + dst_large):
        d.copy_(s, non_blocking=True)
torch.cuda.synchronize()

for _ in range(args.steps):
    torch.cuda.nvtx.range_push("step")
    for s, d in zip(small + large, dst_small + dst_large):
        d.copy_(s, non_blocking=True)
    for d in dst_small + dst_large:
        acc += d[:1]
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print("done", float(acc))
