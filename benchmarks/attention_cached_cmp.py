# ruff: noqa: B023  (lambdas are timed at once, inside the loop that defines them)
"""The cached kernel of several ``kernels/`` folders side by side, in one process.

    python benchmarks/attention_cached_cmp.py NAME=DIR[:CONFIG],NAME=DIR[:CONFIG],... [--rounds 3]
    python benchmarks/attention_cached_cmp.py SPECS --warm NAME DTYPE

Each DIR is a copy of ``kernels/`` (e.g. main's at a branch point beside this checkout's),
loaded as its own package, so two versions of ``_cached.py`` run in the same process; CONFIG
is an optional Python dict literal passed as ``config=`` (e.g. ``{'DP': False}``). The first
NAME is the baseline. For three cache draws with fixed seeds (the inference workload's
large preset: B=8 users, 1,040 new tokens = 16 history + 1,024 candidates, H=4, d=256,
shuffled pages; two draws of ~2,048 cached tokens each, 1,900..2,200, and one of ~4,096,
3,900..4,200): every version is checked twice (the second call reuses the counters the
first left) against the float32 reference, outputs NaN-poisoned (bf16 and fp16 on the first
draw, bf16 on the last), then timed in interleaved rounds (``triton.testing.do_bench``
median, no L2 flush); the minimum per version and its ratio to the baseline are printed.
``--warm`` only compiles one version for one dtype (Triton's on-disk cache), so parallel
``--warm`` processes can compile every version before the timed process runs.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_gpu import K, _rel, load_package  # noqa: E402  (this checkout's kernels/ as tracekit.kernels: reference, cache)
from attention_tune import _workload  # noqa: E402

DRAWS = (("C2048a", 11, 1900, 2200, 5120, True), ("C2048b", 12, 1900, 2200, 5120, False),
         ("C4096", 13, 3900, 4200, 6144, True))
B, N_NEW, N_TARGETS, H, D = 8, 1040, 1024, 4, 256


def _load(name: str, path: str):
    """``path``'s _cached module, its folder loaded as package ``name``."""
    load_package(name, path)
    return importlib.import_module(name + "._cached")


def versions(specs: str) -> dict:
    out = {}
    for i, item in enumerate(re.split(r",(?![^{]*})", specs)):  # (commas inside a CONFIG dict stay)
        name, _, rest = item.partition("=")
        path, _, cfg = rest.partition(":")
        out[name] = (_load(f"_cmp_kernels{i}", path), ast.literal_eval(cfg) if cfg else None)
    return out


def main() -> None:
    import torch
    import triton

    p = argparse.ArgumentParser()
    p.add_argument("specs")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warm", nargs=2, metavar=("NAME", "DTYPE"))
    a = p.parse_args()
    vs = versions(a.specs)
    if a.warm:
        m, cfg = vs[a.warm[0]]
        w = _workload(B, [2000] * B, N_NEW, N_TARGETS, H, D, getattr(torch, a.warm[1]), 1)
        m.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], w["cache"], max_seq_len=5120, alpha=D**-0.5,
                          num_targets=w["nt"], contextual_seq_len=0, max_attn_len=0, config=cfg)
        torch.cuda.synchronize()
        return
    base = next(iter(vs))
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__, flush=True)
    for tag, seed, clo, chi, msl, check in DRAWS:
        caches = [int(x) for x in torch.randint(clo, chi, (B,), generator=torch.Generator().manual_seed(seed))]
        print(tag, "caches", caches, flush=True)
        kw = dict(max_seq_len=msl, alpha=D**-0.5, contextual_seq_len=0, max_attn_len=0)
        dtypes = ((torch.bfloat16, 2e-2), (torch.float16, 4e-3))[: 2 if tag == DRAWS[0][0] else 1] if check else ()
        for dtype, tol in dtypes:
            w = _workload(B, caches, N_NEW, N_TARGETS, H, D, dtype, int(time.time()) % 10000)
            c = w["cache"]
            c32 = K.PagedKVCache(c.k_cache.float(), c.v_cache.float(), c.page_table, c.cache_lens)
            ref = K.hstu_attention_cached_reference(w["q"].float(), w["k"].float(), w["v"].float(), w["off"], c32,
                                                    max_seq_len=msl, alpha=D**-0.5, num_targets=w["nt"])
            for name, (m, cfg) in vs.items():
                for call in range(2):
                    o = torch.full_like(w["q"], float("nan"))
                    m.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], c, num_targets=w["nt"], config=cfg, out=o,
                                      **kw)
                    e = _rel(o, ref)
                    lk = m.LAST_KERNEL
                    print(f"{'PASS' if e == e and e < tol else 'FAIL'} {tag} {str(dtype)[6:]} {name} call{call}: "
                          f"rel_err={e:.2e} regs {lk.n_regs} spills {lk.n_spills}", flush=True)
            del ref, c32, w
        w = _workload(B, caches, N_NEW, N_TARGETS, H, D, torch.bfloat16, 7)
        flops = 2 * H * 2 * D * w["pairs"]
        times = {name: [] for name in vs}
        for _ in range(a.rounds):
            for name, (m, cfg) in vs.items():
                ms = triton.testing.do_bench(lambda: m.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], w["cache"],
                                                                       num_targets=w["nt"], config=cfg, **kw),
                                             warmup=25, rep=200, return_mode="median")
                times[name].append(ms * 1e3)
        for name, us in times.items():
            print(f"time {tag} {name}: " + " ".join(f"{x:.1f}" for x in us) + f" us  min {min(us):.1f}  "
                  f"{flops / min(us) / 1e6:.0f} TFLOP/s  x{min(times[base]) / min(us):.3f} vs {base}", flush=True)


if __name__ == "__main__":
    main()
