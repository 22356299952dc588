"""GPU time of each kernel one cached call launches, per configuration (torch.profiler), no GPU sync in between.

    python benchmarks/attention_cached_kernels.py NAME=CONFIG [NAME=CONFIG ...] [--calls 50] [--rounds 3]

For the first cache draw of ``attention_cached_cmp.py`` (C2048a: B=8, ~2,048 cached tokens,
1,040 new, H=4, d=256, bf16, shuffled pages), each configuration (a Python dict literal passed as
``config=`` to this checkout's ``hstu_cached_fwd``; ``{}`` = the default) is called ``--calls``
times back to back under torch.profiler, in interleaved rounds; printed per configuration and
kernel name: the median and minimum of its GPU durations, and the median gap between one call's
kernels (from one kernel's end to the next one's start, the whole call's span included). Shows
where a call's time goes when it launches more than one kernel (the Gluon kernel's planner).
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_cached_cmp import DRAWS, N_NEW, N_TARGETS, B, D, H  # noqa: E402
from attention_gpu import K  # noqa: E402,F401  (loads this checkout's kernels/ as tracekit.kernels)
from attention_tune import _workload  # noqa: E402


def main() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    from tracekit.kernels import _cached

    p = argparse.ArgumentParser()
    p.add_argument("configs", nargs="+")
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    cfgs = {}
    for item in a.configs:
        name, _, cfg = item.partition("=")
        cfgs[name] = ast.literal_eval(cfg) if cfg else {}
    tag, seed, clo, chi, msl, _ = DRAWS[0]
    caches = [int(x) for x in torch.randint(clo, chi, (B,), generator=torch.Generator().manual_seed(seed))]
    w = _workload(B, caches, N_NEW, N_TARGETS, H, D, torch.bfloat16, 7)
    kw = dict(max_seq_len=msl, alpha=D**-0.5, contextual_seq_len=0, max_attn_len=0, num_targets=w["nt"])

    def call(cfg):
        return _cached.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], w["cache"], config=cfg or None, **kw)

    print(torch.cuda.get_device_name(), "torch", torch.__version__, tag, "caches", caches, flush=True)
    for cfg in cfgs.values():
        for _ in range(5):
            call(cfg)
    torch.cuda.synchronize()
    for r in range(a.rounds):
        for name, cfg in cfgs.items():
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(a.calls):
                    call(cfg)
                torch.cuda.synchronize()
            evs = sorted((e for e in prof.events() if e.device_type.name == "CUDA" and "memset" not in e.name.lower()
                          and "Memset" not in e.name), key=lambda e: e.time_range.start)
            per = {}
            for e in evs:
                per.setdefault(e.name.split("(")[0][:48], []).append(e.time_range.elapsed_us())
            span = (evs[-1].time_range.end - evs[0].time_range.start) / a.calls if evs else 0.0
            gaps = [evs[i + 1].time_range.start - evs[i].time_range.end for i in range(len(evs) - 1)]
            print(f"round {r} {name}: {span:.1f} us per call (span), median gap {statistics.median(gaps or [0]):.1f} us; "
                  + "; ".join(f"{k} x{len(v) // a.calls} med {statistics.median(v):.1f} min {min(v):.1f}"
                              for k, v in per.items()), flush=True)


if __name__ == "__main__":
    main()
