# ruff: noqa: B023  (lambdas are timed at once, inside the loop that defines them)
"""Issue 16's table in one process: dense HSTU attention beside the peer and SDPA.

    python benchmarks/attention_table.py OUTDIR [--T 1024 2048 4096 8192] [--rounds 3]

Per T (B = 32768 / T sequences of T tokens, H=4, d=128, bf16, 256 candidates each): the
public Triton kernel of meta-recsys/generative-recommenders (``peer``, when importable: put a
checkout holding ``generative_recommenders/`` on PYTHONPATH), ``tracekit.kernels.hstu_attention``
called as a new user calls it (``default``: validation on, backend automatic), the same with
``validate=False``, and PyTorch's causal SDPA of the same shape. Timing: median of
``triton.testing.do_bench`` (L2 cleared before each call), the variants interleaved over
``--rounds`` rounds and the median of the rounds' medians reported; TFLOP/s from the exact
valid-pair count (SDPA: its causal pairs). ``kernel_us``: the GPU time of one call's kernels
from torch.profiler (the part of a call that is not host overhead). JSON into OUTDIR.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_gpu import K  # noqa: E402,F401  (loads kernels/ as tracekit.kernels)


def _kernel_us(fn, calls=20):
    import torch

    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = sum(e.self_device_time_total for e in prof.key_averages())
    return total / calls


def main():
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--T", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rep-ms", type=int, default=200)
    a = p.parse_args()
    import torch
    import triton
    from tracekit.kernels.bench import _make_inputs, _variant_fn, parse_config

    names = ["peer", "default", "validate_false", "sdpa"]
    bench_name = {"peer": "peer", "default": "triton_dense_default", "validate_false": "triton_dense",
                  "sdpa": "sdpa"}
    rows = []
    for T in a.T:
        _, cfg = parse_config(f"hstu_T{T}")
        inp = _make_inputs(cfg, torch.bfloat16, "cuda")
        fns = {}
        for n in names:
            try:
                fns[n] = _variant_fn(bench_name[n], cfg, inp)
            except RuntimeError as exc:  # the peer, when not importable
                print(f"T={T} {n}: {exc}", flush=True)
        times = {n: [] for n in fns}
        for _ in range(a.rounds):
            for n, (fn, _pairs) in fns.items():
                times[n].append(triton.testing.do_bench(fn, warmup=25, rep=a.rep_ms, return_mode="median"))
        row = dict(T=T, B=cfg["B"])
        for n, (fn, pairs) in fns.items():
            ms = statistics.median(times[n])
            flops = 2 * cfg["H"] * (cfg["d_qk"] + cfg["d_v"]) * pairs
            row[n] = dict(ms=ms, tflops=flops / ms / 1e9, rounds_ms=times[n], kernel_us=_kernel_us(fn))
        rows.append(row)
        line = "  ".join(f"{n} {row[n]['ms'] * 1e3:.1f} us {row[n]['tflops']:.0f} TF (kern {row[n]['kernel_us']:.0f} us)"
                         for n in fns)
        print(f"T={T} B={cfg['B']}: {line}", flush=True)
    print("\n| T (B) | peer | ours, default call | ours, validate=False | SDPA causal | default/validate=False "
          "| ours/peer | ours/SDPA |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        def tf(n, r=r):
            return r[n]["tflops"] if n in r else float("nan")
        best = max(tf("default"), tf("validate_false"))
        print(f"| {r['T']} ({r['B']}) | {tf('peer'):.0f} | {tf('default'):.0f} | {tf('validate_false'):.0f} | "
              f"{tf('sdpa'):.0f} | {tf('default') / tf('validate_false'):.3f} | {tf('default') / tf('peer'):.2f}x "
              f"| {best / tf('sdpa'):.3f} |")
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.json").write_text(json.dumps(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                                                    triton=triton.__version__, rows=rows), indent=1))


if __name__ == "__main__":
    main()
