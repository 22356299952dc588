"""Fixture workload ``multiproc``: GPU work and NVTX ranges in three processes, two GPUs.

The parent launches two child processes (fork + exec, both traced by nsys) that push the
same range names and launch the same kernels, so every per-name summary must merge rows
from several processes while kernel-exec keeps them apart by PID. Where the host has two
GPUs, the second child and part of the parent's work run on ``cuda:1`` and the parent
copies between the devices (peer-to-peer memcpy).
"""

import subprocess
import sys

import torch

rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop


def work(dev, steps, tag):
    a = torch.randn(768, 768, device=dev)
    for i in range(steps):
        rng("step")
        rng("compute")
        for _ in range(3):
            a = torch.relu(a @ a * 1e-3)
        pop()
        rng("readback")
        host = a[:4].cpu()
        pop()
        pop()
    torch.cuda.synchronize(dev)
    return float(host.sum())


if len(sys.argv) > 1 and sys.argv[1] == "child":
    idx = int(sys.argv[2])
    dev = torch.device("cuda", idx % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    rng(f"child{idx}")
    print("child", idx, dev, work(dev, 4 + idx, f"child{idx}"))
    pop()
    sys.exit(0)

n_dev = torch.cuda.device_count()
rng("parent")
children = [subprocess.Popen([sys.executable, __file__, "child", str(i)]) for i in range(2)]
print("parent", work(torch.device("cuda", 0), 3, "parent"))
if n_dev > 1:
    rng("peer")
    x = torch.randn(1 << 22, device="cuda:0")
    for _ in range(3):
        y = x.to("cuda:1")  # device-to-device across GPUs
        x = (y * 0.5).to("cuda:0")
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    pop()
    work(torch.device("cuda", 1), 2, "parent-dev1")
for c in children:
    assert c.wait() == 0
pop()
print("multiproc done, devices:", n_dev)
