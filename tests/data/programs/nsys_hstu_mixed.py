"""Fixture workload ``hstu_mixed``: a small HSTU-shaped inference loop on the GPU.

Captured under ``nsys profile -t cuda,nvtx,osrt --cuda-graph-trace=node`` by
``tests/data/capture_fixtures.sh``. It exercises what the analysis layer must get
right: nested push/pop NVTX ranges (default domain and a named domain with a
registered string), start/end ranges, marks, several CUDA streams, pageable and
pinned host<->device copies, a device-to-device copy, a memset, a Triton kernel and
a CUDA-graph replay.
"""

import torch
import triton
import triton.language as tl

try:  # named domain + registered strings; optional (the `nvtx` package)
    import nvtx

    # messages in a named domain are sent as registered strings (textId)
except Exception:  # pragma: no cover - the fixture still works without it
    nvtx = None

rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    out = x * tl.sigmoid(x) * y
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_mul(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    silu_mul_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out


D, H, LAYERS, L = 256, 4, 3, 2048
dev = torch.device("cuda")
torch.manual_seed(0)
weights = [
    (torch.randn(D, 4 * D, device=dev, dtype=torch.bfloat16) * 0.02,
     torch.randn(D, D, device=dev, dtype=torch.bfloat16) * 0.02)
    for _ in range(LAYERS)
]
emb = torch.randn(50_000, D, device=dev, dtype=torch.bfloat16)
copy_stream = torch.cuda.Stream()
aux_stream = torch.cuda.Stream()


def layer(x, w_uvqk, w_out, i):
    rng(f"hstu.layer{i}")
    rng("input_norm")
    h = torch.nn.functional.layer_norm(x, (D,))
    pop()
    rng("uvqk_linear")
    u, v, q, k = (h @ w_uvqk).split(D, dim=-1)
    pop()
    rng("hstu_attention")
    qh, kh, vh = (t.view(L, H, D // H).transpose(0, 1) for t in (q, k, v))
    s = torch.nn.functional.silu(qh @ kh.transpose(1, 2)) / L
    a = (s @ vh).transpose(0, 1).reshape(L, D)
    pop()
    rng("norm_mul")
    y = silu_mul(torch.nn.functional.layer_norm(a, (D,)), u)
    pop()
    rng("output_linear")
    out = x + y @ w_out
    pop()
    pop()
    return out


def request(step, ids_cpu, static=None):
    rng("hstu.request")
    rng("hstu.embedding")
    with torch.cuda.stream(copy_stream):
        ids = ids_cpu.to(dev, non_blocking=True)  # pinned H2D on a side stream
    torch.cuda.current_stream().wait_stream(copy_stream)
    x = emb[ids]
    pop()
    for i, (w1, w2) in enumerate(weights):
        x = layer(x, w1, w2, i)
    rng("hstu.candidate_scoring")
    scores = x[-256:].float().sum(-1)
    host = scores.cpu()  # D2H, synchronous
    pop()
    pop()
    return host


ids_pinned = torch.randint(0, 50_000, (L,), dtype=torch.int64).pin_memory()
ids_pageable = torch.randint(0, 50_000, (L,), dtype=torch.int64)

# warm-up (Triton compile, cuBLAS handles)
for _ in range(2):
    request(-1, ids_pinned)
torch.cuda.synchronize()

torch.cuda.nvtx.mark("steady_state")
for step in range(4):
    rng(f"step {step}")
    request(step, ids_pinned if step % 2 else ids_pageable)
    # device-to-device copy and a memset on an auxiliary stream
    with torch.cuda.stream(aux_stream):
        buf = torch.empty(1 << 22, device=dev, dtype=torch.uint8)
        try:
            import cupy

            cupy.cuda.runtime.memsetAsync(buf.data_ptr(), 0, buf.numel(), aux_stream.cuda_stream)
        except Exception:
            buf.zero_()
        buf2 = buf.clone()  # D2D
        del buf2
    pop()

if nvtx is not None:
    with nvtx.annotate("registered.section", domain="tracekit"):
        with nvtx.annotate("named.inner", domain="tracekit"):
            request(99, ids_pinned)
    nvtx.mark("named.mark", domain="tracekit")

# start/end range spanning the graph section
rid = torch.cuda.nvtx.range_start("graph.section")
static_x = emb[ids_pinned.to(dev)].clone()
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    layer(static_x, *weights[0], 0)  # warm the graph's stream
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    static_out = layer(static_x, *weights[0], 0)
for rep in range(3):
    rng("graph.replay")
    g.replay()
    pop()
torch.cuda.synchronize()
torch.cuda.nvtx.range_end(rid)
print("hstu_mixed done", static_out.float().abs().sum().item())
