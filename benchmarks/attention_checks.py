# ruff: noqa: B023  (lambdas are timed at once, inside the loop that defines them)
"""What the default call's value checks cost (``validate=True`` vs ``validate=False``), in one process.

    python benchmarks/attention_checks.py OUTDIR [--configs hstu_T1024,hstu_T2048,...] [--rounds 3]

Per configuration (tracekit.kernels.bench's) and side, on the GPU, sides interleaved per round:
- ``validate_false``: ``validate=False``;
- ``default``: the default call (dense: checks fused into the attention kernel; cached and
  block-sparse: the separate check kernel queued first);
- ``separate`` (dense only): the separate check kernel (``_checks.check_on_device``) queued
  before a ``validate=False`` call, i.e. the default call's path before the checks were fused.
Metrics: ``host_us``, the CPU time per call of 150 back-to-back calls queued behind a long GPU
sleep (``torch.cuda._sleep``: the GPU never waits for the host, nor the host for the GPU);
``do_bench_ms``, ``triton.testing.do_bench``'s median (L2 cleared before each call);
``kernel_us``, the GPU time of one call's kernels from torch.profiler. The host of the GPU machine
is noisy (one side's rounds differ by up to 2x): noise only adds, so compare the rounds'
minima (``host_us_min``) as well as their medians. Then a cProfile of 300
calls of each dense side (``--profile``), and the registers and spills of each compiled dense
kernel. Results: OUTDIR/checks.json, OUTDIR/profile_*.txt and a table on stdout.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_gpu  # noqa: E402,F401  (loads kernels/ as tracekit.kernels)
from attention_host import _host_us  # noqa: E402
from attention_table import _kernel_us  # noqa: E402


def _sides(cfg, inp):
    from tracekit.kernels import api
    from tracekit.kernels._checks import check_on_device

    q, k, v, off = inp["q"], inp["k"], inp["v"], inp["seq_offsets"]
    kw = dict(max_seq_len=inp["max_seq_len"], alpha=inp["alpha"], num_targets=inp["num_targets"])
    if cfg["kind"] == "dense":
        f = api.hstu_attention
        args = (q, k, v, off)

        def separate():
            check_on_device(off, q.shape[0], kw["max_seq_len"], kw["num_targets"])
            return f(*args, validate=False, **kw)

        extra = {"separate": separate}
    elif cfg["kind"] == "cached":
        f, args, extra = api.hstu_attention_cached, (q, k, v, off, inp["cache"]), {}
    else:
        f, args, extra = api.hstu_attention_block_sparse, (q, k, v, off), {}
        kw.update(block_size=cfg.get("bs", 32), block_counts=cfg.get("counts", 4))
    return {"validate_false": lambda: f(*args, validate=False, **kw), "default": lambda: f(*args, **kw), **extra}


def _profile(fn, n=300) -> str:
    import torch

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
    return s.getvalue()


def main():
    import torch
    import triton
    from tracekit.kernels import _dense, bench

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--configs", default="hstu_T1024,hstu_T2048,cached_workload_large,bsa_T4096")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", default="hstu_T1024", help="dense configuration to profile ('' = none)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in a.configs.split(","):
        _, cfg = bench.parse_config(name)
        inp = bench._make_inputs(cfg, torch.bfloat16, "cuda")
        sides = _sides(cfg, inp)
        res = {s: dict(host_us=[], do_bench_ms=[]) for s in sides}
        for fn in sides.values():
            fn()
        torch.cuda.synchronize()
        for _ in range(a.rounds):
            for s, fn in sides.items():
                res[s]["host_us"].append(_host_us(fn))
                res[s]["do_bench_ms"].append(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))
        base = None
        for s, fn in sides.items():
            row = dict(config=name, side=s, host_us=statistics.median(res[s]["host_us"]),
                       host_us_min=min(res[s]["host_us"]),
                       do_bench_ms=statistics.median(res[s]["do_bench_ms"]), kernel_us=_kernel_us(fn), rounds=res[s])
            base = base or row
            rows.append(row)
            print(f"{name:22s} {s:15s} host {row['host_us']:6.1f} us (min {row['host_us_min']:6.1f})  do_bench {row['do_bench_ms'] * 1e3:7.1f} us "
                  f"({base['do_bench_ms'] / row['do_bench_ms']:.3f} of validate=False)  kernels {row['kernel_us']:6.1f} us"
                  f"  rounds host {[round(x, 1) for x in res[s]['host_us']]}"
                  f" do_bench {[round(x * 1e3, 1) for x in res[s]['do_bench_ms']]}", flush=True)
        if name == a.profile:
            for s, fn in sides.items():
                (out / f"profile_{name}_{s}.txt").write_text(_profile(fn))
        del inp, sides
        torch.cuda.empty_cache()
    kernels = [dict(consts=list(key[1]), n_regs=c.n_regs, n_spills=c.n_spills) for key, c in _dense._HANDLES.items()]
    for kern in kernels:
        print("dense kernel", kern, flush=True)
    (out / "checks.json").write_text(json.dumps(dict(environment=bench._environment("cuda"), results=rows,
                                                     dense_kernels=kernels), indent=1))


if __name__ == "__main__":
    main()
