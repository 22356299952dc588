"""Fixture workload ``ranks``: one rank of a data-parallel-like job (RANK, WORLD_SIZE env).

Every rank runs the same ``STEPS`` steps, each an NVTX range ``step`` holding
``forward``, ``exchange`` (a gradient-like tensor copied to the host, all-reduced over
torch.distributed gloo, copied back) and ``backward`` (a chain of GEMM + tanh layers). The
ranks are kept in lock-step by a gloo barrier at the start of every step and by the
all-reduce itself, so step N of every rank is the same step. A warm-up step before the
first barrier (inside an NVTX range ``warmup``) picks the cuBLAS kernels and makes the
process group's first connection.

``forward`` is ``FORWARD_LAYERS`` layers, each a host-side feature transform (a CPU matmul
+ tanh on the rank's one CPU thread, as input preprocessing does) followed by a GPU
GEMM + ReLU, then a synchronize. Its duration is set by each rank's own CPU thread, not by
the one GPU the ranks share: that GPU's contexts are time-sliced, so GPU work of four
processes interleaves, and a straggler whose extra work were GPU kernels only would run
them alone while the others wait (in a first capture, 1.5x the GPU layers made rank 2's
``forward`` only ~10 % longer, and not in every step).

Planted straggler: rank ``STRAGGLER`` runs ``forward`` with 1.5x the layers of the others
(``FORWARD_LAYERS * 3 // 2``: 1.5x the host work and 1.5x the GPU layers), so its
``forward`` is about 1.5x longer and every other rank waits for it inside ``exchange``.

``--backend nccl`` (one GPU per rank: as many GPUs as ranks) all-reduces on the GPU through
NCCL instead: the ranks that reach ``exchange`` first wait inside NCCL's all-reduce kernel
for the straggler, so their GPU shows the wait as NCCL kernel time beside no compute
(``tracekit query comm-overlap``); ``--straggler R`` picks the planted rank.
``--backward-layers N`` changes ``backward``'s work on every rank (a job against a job:
tests/data/nsys_jobs). ``--hold-rank R --hold-mb N``: rank R also allocates N MiB of GPU memory
in its warm-up (inside ``warmup``) and holds it to the end, as a rank that keeps a cache does
(tests/data/nsys_ranks_mem: the rank whose memory stands out). ``--teardown-rank R``: rank R
alone puts its end (the last barrier and the process group's teardown: host work only, no CUDA
call) in an NVTX range ``teardown``, which a capture range can be set on to miss the rank's GPU
work (tests/data/nsys_jobs/missed).

Started by tests/data/capture_fixtures.sh: WORLD_SIZE processes at once, each under its own
``nsys profile``, with MASTER_ADDR/MASTER_PORT for the rendezvous. With ``--device
cuda`` rank r runs on GPU ``r % torch.cuda.device_count()``: all on the one GPU of a
one-GPU machine, spread round-robin over the GPUs of a larger one. Runs on CPU too
(``--device cpu``, NVTX skipped).
"""

import argparse
import contextlib
import os

import torch
import torch.distributed as dist

STEPS = 20
FORWARD_LAYERS = 16
BACKWARD_LAYERS = 32
STRAGGLER = 2
SIZE = 512  # GPU layers: SIZE x SIZE bf16 GEMMs
HOST_ROWS, HOST_SIZE = 256, 256  # the host-side transform per forward layer (fp32, one thread)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    ap.add_argument("--straggler", type=int, default=STRAGGLER)
    ap.add_argument("--backward-layers", type=int, default=BACKWARD_LAYERS)
    ap.add_argument("--hold-rank", type=int, default=-1)
    ap.add_argument("--hold-mb", type=int, default=0)
    ap.add_argument("--teardown-rank", type=int, default=-1)
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    nccl = args.backend == "nccl"
    if nccl and (args.device != "cuda" or torch.cuda.device_count() < world):
        raise SystemExit(f"--backend nccl needs a GPU per rank ({world} ranks, {torch.cuda.device_count()} GPUs)")
    dev = torch.device(args.device)
    if args.device == "cuda":  # round-robin over the machine's GPUs
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    cuda = dev.type == "cuda"
    size = SIZE if cuda else 64
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.set_num_threads(1)  # one CPU thread per rank, as a launcher pins ranks to cores
    if nccl:
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)

    @contextlib.contextmanager
    def rng(name):
        if cuda:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if cuda:
                torch.cuda.nvtx.range_pop()

    g = torch.Generator().manual_seed(0)  # the same weights on every rank
    w = torch.randn(size, size, generator=g).mul_((2 / size) ** 0.5).to(dev, dtype)  # keeps the scale
    x = torch.randn(size, size, generator=torch.Generator().manual_seed(rank)).to(dev, dtype)
    feats = torch.randn(HOST_ROWS, HOST_SIZE, generator=torch.Generator().manual_seed(rank))  # host, fp32
    proj = torch.randn(HOST_SIZE, HOST_SIZE, generator=g).mul_(HOST_SIZE ** -0.5)
    n_forward = FORWARD_LAYERS * 3 // 2 if rank == args.straggler else FORWARD_LAYERS

    def step() -> float:
        h, f = x, feats
        with rng("forward"):
            for _ in range(n_forward):
                f = torch.tanh(f @ proj)  # host-side transform
                h = torch.relu(h @ w)
            if cuda:
                torch.cuda.synchronize()
        with rng("exchange"):
            if nccl:  # on the GPU: the wait for the other ranks is NCCL's kernel
                grad = (h[:64] * 1e-3).float()
                dist.all_reduce(grad)
            else:
                grad = (h[:64] * 1e-3).float().cpu()
                dist.all_reduce(grad)
                grad = grad.to(dev, non_blocking=False)
        with rng("backward"):
            for _ in range(args.backward_layers):
                h = torch.tanh(h @ w.t())
            total = float(h[:4, :4].float().sum()) + float(grad[0, 0]) + float(f[0, 0])
        return total

    held = None
    with rng("warmup"):
        if rank == args.hold_rank and args.hold_mb:
            held = torch.ones(args.hold_mb << 20, dtype=torch.uint8, device=dev)
        step()
    for _ in range(args.steps):
        dist.barrier()
        with rng("step"):
            total = step()
    with rng("teardown") if rank == args.teardown_rank else contextlib.nullcontext():
        dist.barrier()
        dist.destroy_process_group()
    print(f"ranks done: rank {rank}/{world}, {args.steps} steps, forward layers {n_forward}, {total:.4f}"
          + (f", held {held.numel() >> 20} MiB" if held is not None else ""))


if __name__ == "__main__":
    main()
