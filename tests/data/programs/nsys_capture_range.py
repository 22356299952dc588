"""Fixture workload ``capture_range``: a capture that starts and stops mid-program.

Profiled with ``--capture-range=cudaProfilerApi``: cudaProfilerStart is called while a
push range and a start/end range are open, and cudaProfilerStop while others are open,
so the export holds ranges cut by the capture's edges and work outside it is absent.
"""

import torch

rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop
dev = torch.device("cuda")
a = torch.randn(512, 512, device=dev)
for _ in range(3):  # before the capture
    a = torch.tanh(a @ a)
torch.cuda.synchronize()

rng("spans.start")
early = torch.cuda.nvtx.range_start("startend.spans.start")
torch.cuda.profiler.start()
a = a @ a
pop()
torch.cuda.nvtx.range_end(early)
for i in range(5):
    rng("inside")
    a = torch.tanh(a @ a)
    host = a[:2].cpu()
    pop()
rng("spans.stop")
late = torch.cuda.nvtx.range_start("startend.spans.stop")
a = a @ a
torch.cuda.synchronize()
torch.cuda.profiler.stop()
pop()
torch.cuda.nvtx.range_end(late)
for _ in range(3):  # after the capture
    a = torch.tanh(a @ a)
torch.cuda.synchronize()
print("capture_range done", float(host.sum()))
