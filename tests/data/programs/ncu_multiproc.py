"""Fixture workload for Nsight Compute: kernels in three processes (``--target-processes all``).

The parent launches one kernel, then starts two child processes one after the other
(fork + exec of this file), each launching its own kernels; every profiled launch is in an
NVTX push/pop range ``mp/<process>/<kernel>``, so ``--nvtx --nvtx-include "mp/"`` selects
exactly these launches (4 results: parent mul, child0 add, child1 sum and mul) and leaves
out the warm-up and the host copies. The children run one at a time, so the report's
order is fixed.
"""

import subprocess
import sys

import torch

rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop


def launch(who: str, kernels: list[str]) -> float:
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    y = torch.ones_like(x)
    (x * y).sum()  # warm-up: module load, outside the ranges
    torch.cuda.synchronize()
    outs = []
    rng("mp")
    rng(who)
    for k in kernels:
        rng(k)
        if k == "mul":
            z = x * 3.0
        elif k == "add":
            z = x + y
        else:
            z = x.sum()
        pop()
        outs.append(z)
    pop()
    pop()
    return sum(float(z.double().sum()) for z in outs)  # (after the ranges: not profiled)


if len(sys.argv) > 1 and sys.argv[1] == "child":
    idx = int(sys.argv[2])
    kernels = ["add"] if idx == 0 else ["sum", "mul"]
    print(f"child{idx}", launch(f"child{idx}", kernels))
    sys.exit(0)

print("parent", launch("parent", ["mul"]))
for i in range(2):
    subprocess.run([sys.executable, __file__, "child", str(i)], check=True)
print("ncu_multiproc done")
