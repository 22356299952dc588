"""Fixture workload ``nccl``: data-parallel training over NCCL, one process per GPU, one nsys.

What the other fixtures lack: NCCL's kernels (ncclDevKernel_...) on NCCL's own streams,
overlapping the backward pass's GEMMs (DistributedDataParallel all-reduces its gradient
buckets while backward runs), NCCL's own NVTX ranges (its domain, with payloads) beside the
program's, and several processes on several GPUs in one export: the parent starts
``WORLD`` = every visible GPU (2 on a 2-GPU machine; 1 elsewhere) workers with
torch.multiprocessing (spawn), each on its own GPU, all traced by the one ``nsys profile``.

Each worker runs STEPS steps, each an NVTX range ``step`` holding ``forward``,
``backward`` (with DDP's bucketed all-reduces) and ``optimizer``, and every other step a
``collectives`` range with an explicit all_reduce, broadcast and all_gather.
"""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 6
rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop


def worker(rank: int, world: int) -> None:
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    torch.manual_seed(rank)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
                                torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
    ddp = DDP(model, device_ids=[rank], bucket_cap_mb=8)  # several buckets: all-reduces during backward
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(256, 1024, device=dev)
    target = torch.randn(256, 1024, device=dev)
    extra = torch.full((1 << 20,), float(rank), device=dev)
    gathered = [torch.empty(1 << 16, device=dev) for _ in range(world)]

    def step(i: int) -> float:
        rng("step")
        rng("forward")
        loss = torch.nn.functional.mse_loss(ddp(x), target)
        pop()
        rng("backward")
        loss.backward()
        pop()
        rng("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        pop()
        if i % 2 == 0:
            rng("collectives")
            dist.all_reduce(extra)
            dist.broadcast(extra, src=0)
            dist.all_gather(gathered, extra[: 1 << 16])
            pop()
        value = loss.item()
        pop()
        return value

    rng("warmup")
    step(0)
    torch.cuda.synchronize()
    pop()
    for i in range(STEPS):
        last = step(i)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}/{world} done, loss {last:.4f}, extra {float(extra[0]):.1f}")


if __name__ == "__main__":
    world = max(1, torch.cuda.device_count())
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    mp.spawn(worker, args=(world,), nprocs=world)
