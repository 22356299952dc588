"""Fixture workload ``graphs``: CUDA graphs replayed from two threads and two streams.

Captured twice by ``capture_fixtures.sh``: ``graphs_node`` (``--cuda-graph-trace=node``,
every kernel and copy of a replay is its own GPU row) and ``graphs_graph`` (the
default, ``--cuda-graph-trace=graph``: a replay is recorded as one graph execution and
its kernels are not traced one by one). Each graph holds kernels, a device-to-device
copy node and a memset node (CuPy, when present); replays sit inside NVTX ranges, some
nested, one thread's replays inside a range pushed on another thread.
"""

import threading

import torch

rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop
dev = torch.device("cuda")
try:
    import cupy
except Exception:  # pragma: no cover
    cupy = None


def build(n):
    x = torch.randn(n, n, device=dev)
    buf = torch.empty(1 << 20, device=dev, dtype=torch.uint8)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            (torch.tanh(x @ x) * 0.5).sum()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.tanh(x @ x) * 0.5
        z = y.clone()  # D2D copy node
        if cupy is not None:
            cupy.cuda.runtime.memsetAsync(buf.data_ptr(), 0, buf.numel(),
                                          torch.cuda.current_stream().cuda_stream)
        out = (z + y).sum()
    return g, out


g1, out1 = build(512)
g2, out2 = build(256)
torch.cuda.synchronize()


def replayer(stream, barrier):
    with torch.cuda.stream(stream):
        barrier.wait()
        for _ in range(3):
            rng("thread.replay")
            g2.replay()
            pop()
        stream.synchronize()


rng("graphs.main")
for i in range(4):
    rng("replay.outer")
    rng("replay.inner")
    g1.replay()
    pop()
    pop()
barrier = threading.Barrier(2)
t = threading.Thread(target=replayer, args=(torch.cuda.Stream(), barrier))
t.start()
rng("main.waits")  # a range on this thread while the other thread replays
barrier.wait()
t.join()
pop()
torch.cuda.synchronize()
pop()
print("graphs done", out1.item(), out2.item())
