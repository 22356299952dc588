"""Where the Gluon cached call's host time goes (GPU, Triton 3.6): the pieces of launching it.

    python benchmarks/attention_cached_gluon_host.py

Each piece timed alone (median of 300 repetitions, µs) after warm calls of ``tracekit.kernels``'
Gluon kernel on ``attention_cached_cmp.py``'s first draw (C2048a, bf16): building the three
``TensorDescriptor`` objects (what the JIT path did per call), Triton's launcher encoding them
(``make_tensordesc_arg``, per launch on that path), ``cuTensorMapEncodeTiled`` alone, the cached
tensor maps (``_encoded``), the specialisation key of 38 arguments, two ``torch.empty``, the whole
call. Beside ``attention_cached_launch.py``, which times whole calls of several versions.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
import triton  # noqa: E402
from attention_cached_cmp import DRAWS, N_NEW, N_TARGETS, B, D, H  # noqa: E402
from attention_tune import _workload  # noqa: E402
from tracekit.kernels import _cached, _launch  # noqa: E402
from tracekit.kernels import _cached_gluon as G  # noqa: E402
from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST, make_tensordesc_arg  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402

tag, seed, clo, chi, msl, _ = DRAWS[0]
caches = [int(x) for x in torch.randint(clo, chi, (B,), generator=torch.Generator().manual_seed(seed))]
w = _workload(B, caches, N_NEW, N_TARGETS, H, D, torch.bfloat16, 7)
kw = dict(max_seq_len=msl, alpha=D**-0.5, contextual_seq_len=0, max_attn_len=0, num_targets=w["nt"])
for _ in range(3):
    _cached.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], w["cache"], config={"GLUON": True}, **kw)
torch.cuda.synchronize()
h = next(x for x in G._HANDLES.values() if x is not None)
q, kc, vc = w["q"], w["cache"].k_cache, w["cache"].v_cache
L = q.shape[0]
mats = ((kc, kc.shape[0] * kc.shape[1], 32), (vc, vc.shape[0] * vc.shape[1], 32), (q, L, 128))


def med(f, n=300):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return 1e6 * ts[n // 2]


def objs():
    return [TensorDescriptor(t, [r, H * D], [H * D, 1], [br, D], gl.NVMMASharedLayout.get_default_for([br, D], gl.bfloat16))
            for t, r, br in mats]


ds = objs()
fill = triton.runtime.driver.active.utils.fill_tma_descriptor
args = [q, q, q, kc, vc, kc, vc, q, w["cache"].page_table, w["cache"].cache_lens, q, w["off"], w["nt"]] + [1024] * 15 \
    + [q, q, q, q, 300, 0.1, 0.2, 8, 8, 1]
print("3 TensorDescriptor objects (layout + object):", round(med(objs), 1), "us")
print("3 make_tensordesc_arg (encode, as the launcher does per launch):",
      round(med(lambda: [make_tensordesc_arg(d, m) for d, m in zip(ds, h.metas, strict=True)]), 1), "us")
print("3 fill_tma_descriptor alone (cuTensorMapEncodeTiled):",
      round(med(lambda: [fill(t.data_ptr(), m["swizzle"], m["elem_size"], TMA_DTYPE_DEVICE_TO_HOST[m["elem_type"]],
                              m["block_size"], [r, H * D], [H * D, 1], 0) for (t, r, br), m in zip(mats, h.metas, strict=True)]), 1),
      "us")
print("3 cached tensor maps (_encoded, hits):",
      round(med(lambda: [G._encoded(t, r, H * D, br, D, m) for (t, r, br), m in zip(mats, h.metas, strict=True)]), 1), "us")
print("the key (spec of 38 args):", round(med(lambda: tuple(_launch.spec(a) for a in args)), 1), "us")
print("torch.empty x2 (the plan buffers as allocated before):",
      round(med(lambda: (torch.empty(1 << 20, dtype=torch.int32, device="cuda"),
                         torch.empty(132, dtype=torch.int32, device="cuda"))), 1), "us")
print("whole call, GLUON:", round(med(lambda: _cached.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], w["cache"],
                                                                     config={"GLUON": True}, **kw), 100), 1), "us")
torch.cuda.synchronize()
