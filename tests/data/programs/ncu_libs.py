"""Fixture workload for Nsight Compute: library and compiler kernels the other ncu fixtures lack.

Five launches, each inside an ``lib/<kind>`` push/pop range so ``--nvtx --nvtx-include lib/``
selects exactly these (warm-up, compilation and autotuning run before, outside every range):
  linear_bf16     F.linear with a bias in bf16 (M=2048, N=K=4096): cuBLASLt with a bias epilogue
  scaled_mm_fp8   torch._scaled_mm of float8_e4m3fn operands with per-tensor scales (M=N=K=4096)
                  to bf16: Hopper's FP8 tensor cores (QGMMA)
  sdpa_flash      scaled_dot_product_attention through the flash backend (bf16, causal,
                  B=4, H=16, T=1024, d=64): a long templated kernel name
  inductor_norm   torch.compile (default mode) of a layernorm + GELU + residual: one Inductor
                  Triton kernel (a persistent reduction, triton_per_fused_... or _red_)
  index_add       index_add_ with atomics into a small table (a contended-atomics kernel)
"""

import os

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile workers (child processes)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

dev = torch.device("cuda")
torch.manual_seed(0)
bf = torch.bfloat16
x = torch.randn(2048, 4096, device=dev, dtype=bf)
w = torch.randn(4096, 4096, device=dev, dtype=bf) * 0.02
bias = torch.randn(4096, device=dev, dtype=bf)
a8 = torch.randn(4096, 4096, device=dev).to(torch.float8_e4m3fn)
b8 = torch.randn(4096, 4096, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
sa = torch.tensor(0.5, device=dev)
sb = torch.tensor(2.0, device=dev)
q, k, v = (torch.randn(4, 16, 1024, 64, device=dev, dtype=bf) for _ in range(3))
h = torch.randn(8192, 1024, device=dev)
g = torch.randn(1024, device=dev)
idx = torch.randint(0, 256, (1 << 22,), device=dev)
src = torch.randn(1 << 22, 64, device=dev)[:, 0].contiguous()
table = torch.zeros(256, device=dev)


@torch.compile
def norm_gelu(t, gamma):
    return t + F.gelu(F.layer_norm(t, (t.shape[-1],), gamma))


def run():
    out = {}
    torch.cuda.nvtx.range_push("linear_bf16")
    out["linear"] = F.linear(x, w, bias)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("scaled_mm_fp8")
    out["fp8"] = torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=bf)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("sdpa_flash")
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out["sdpa"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("inductor_norm")
    out["norm"] = norm_gelu(h, g)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("index_add")
    out["table"] = table.index_add(0, idx, src)
    torch.cuda.nvtx.range_pop()
    return out


run()  # warm-up: cuBLASLt heuristics, Inductor compile
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("lib")
out = run()
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("ncu_libs done", {name: round(float(t.float().abs().mean()), 4) for name, t in out.items()})
