"""Fixture workload ``multithread``: NVTX ranges pushed from several threads.

Three worker threads, each with its own CUDA stream, push nested ranges and launch
work; the main thread holds a range that spans their work but launches little itself
(so its GPU projection must not include the workers' kernels); one start/end range
begins on one thread and ends on another (excluded from nvtx_gpu_proj_sum).
"""

import threading

import torch

dev = torch.device("cuda")
torch.zeros(1, device=dev)
started = {}


def worker(idx, barrier):
    torch.cuda.set_device(0)
    stream = torch.cuda.Stream()
    a = torch.randn(512, 512, device=dev)
    with torch.cuda.stream(stream):
        barrier.wait()
        if idx == 0:
            started["rid"] = torch.cuda.nvtx.range_start("cross.thread")
        for it in range(5):
            torch.cuda.nvtx.range_push(f"worker{idx}.iter")
            torch.cuda.nvtx.range_push("matmul")
            for _ in range(4):
                a = torch.tanh(a @ a * 0.01)
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_push("host_copy")
            host = a[:8].cpu()
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()
        stream.synchronize()
    return host


barrier = threading.Barrier(3)
torch.cuda.nvtx.range_push("main.spanning")
torch.cuda.nvtx.range_push("main.own_work")
b = torch.randn(1024, 1024, device=dev)
c = b @ b
torch.cuda.nvtx.range_pop()
threads = [threading.Thread(target=worker, args=(i, barrier)) for i in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
torch.cuda.nvtx.range_end(started["rid"])  # ends on the main thread
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
print("multithread done", c.sum().item())
