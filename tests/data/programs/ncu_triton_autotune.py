"""Fixture workload ``triton_detailed``: a Triton matmul autotuned over 4 configs, then launched by hand.

The autotuner's benchmark is cheap here (one timed launch of each config, not do_bench's
hundreds), so ncu profiles each config once; then the same kernel at two fixed configs, twice
each, beside PyTorch's own kernels (randn, the reference GEMM, the check). Profiled with
``ncu --set detailed`` by ``tests/data/capture_fixtures.sh``. ``--fixed``: the fixed configs
alone (one kernel sequence every run: ncu --replay-mode application).
"""
import sys

import torch
import triton
import triton.language as tl

rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop


@triton.jit
def mm_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    nb = tl.cdiv(N, BN)
    pm, pn = pid // nb, pid % nb
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def one_shot(fn, quantiles=None, **kw):
    fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    t = s.elapsed_time(e)
    return [t, t, t] if quantiles else t


configs = [triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=st)
           for bm, bn, bk, w, st in ((64, 64, 32, 4, 2), (128, 64, 32, 4, 3), (64, 128, 64, 8, 3), (128, 128, 32, 8, 4))]
mm_tuned = triton.autotune(configs, key=["M", "N", "K"], do_bench=one_shot)(mm_kernel)

M = N = K = 1024
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
if "--fixed" not in sys.argv:
    rng("autotune")
    mm_tuned[lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)](a, b, c, M, N, K)
    pop()
    print("best", mm_tuned.best_config)
for bm, bn, w in ((64, 64, 4), (128, 128, 8)):
    rng(f"fixed_{bm}x{bn}")
    for _ in range(2):
        mm_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](a, b, c, M, N, K, BM=bm, BN=bn, BK=32, num_warps=w)
    pop()
torch.cuda.synchronize()
print("triton done", float((c.float() - (a.float() @ b.float())).abs().max()))
