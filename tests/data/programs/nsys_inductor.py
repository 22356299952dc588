"""Fixture workload ``inductor``: a transformer block through torch.compile(mode="reduce-overhead").

What the other fixtures lack: Inductor's generated Triton kernels (triton_poi_/triton_per_/
triton_red_fused_...) and the cuBLAS/flash-attention kernels it calls, replayed inside CUDA
graphs that Inductor's cudagraph trees record (a replay also copies the new input into the
graph's static buffer), and a capture that an NVTX range starts: profiled with
``--capture-range=nvtx --nvtx-capture=profile --capture-range-end=stop``, so compilation,
autotuning and graph recording (the first calls, outside the range ``profile``) are not in
the export. Inside ``profile``: STEPS ranges ``step``, each a nested ``forward`` (the
compiled block), an eager ``loss`` (a reduction outside the graph and a synchronising copy of
its value to the host), and every other step an eager ``eager_ref`` (the same block,
uncompiled) for comparison. The NVTX texts are not registered strings, so nsys needs
NSYS_NVTX_PROFILER_REGISTER_ONLY=0 to see the range that starts the capture.
"""

import os

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile workers (child processes)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

STEPS = 8
B, T, D, H = 4, 256, 512, 8
dev = torch.device("cuda")
rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(D)
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.proj = torch.nn.Linear(D, D)
        self.ln2 = torch.nn.LayerNorm(D)
        self.up = torch.nn.Linear(D, 4 * D)
        self.down = torch.nn.Linear(4 * D, D)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


torch.manual_seed(0)
block = Block().to(dev, torch.bfloat16).eval()
compiled = torch.compile(block, mode="reduce-overhead")
xs = [torch.randn(B, T, D, device=dev, dtype=torch.bfloat16) for _ in range(STEPS)]

with torch.no_grad():
    for i in range(3):  # compile, cudagraph trees' warm-up and recording: outside the capture
        torch.compiler.cudagraph_mark_step_begin()
        compiled(xs[i]).float().mean().item()
    torch.cuda.synchronize()

    rng("profile")
    total = 0.0
    err = torch.zeros((), device=dev)
    for i in range(STEPS):
        rng("step")
        torch.compiler.cudagraph_mark_step_begin()
        rng("forward")
        y = compiled(xs[i])
        pop()
        rng("loss")
        total += y.float().pow(2).mean().item()
        pop()
        if i % 2 == 0:
            rng("eager_ref")
            err = torch.maximum(err, (block(xs[i]) - y).abs().max().float())
            pop()
        pop()
    torch.cuda.synchronize()
    pop()
print("inductor done", round(total, 3), float(err))
