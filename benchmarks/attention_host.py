"""Host time of the KV-cached attention call, before and after a change, in one process.

    python benchmarks/attention_host.py OUTDIR [--before MODULE_FILE] [--configs a,b,c]

Per configuration (tracekit.kernels.bench's cached ones) and side, on the GPU:
- host_us: CPU time per call of 150 back-to-back calls queued behind a long GPU sleep
  (``torch.cuda._sleep``), so the GPU never waits for the host and never blocks it: the
  launch path alone (checks, buffers, launches), for the default call and validate=False;
- do_bench_ms: ``triton.testing.do_bench`` median of the default call (host-bound when the
  call's host time exceeds its GPU time);
- gpu_ms: the median GPU time per call with an L2 flush before each (bench.py's method).
Sides: ``after`` (this checkout), ``alloc_per_call`` (this kernel with its split workspace and
counters allocated and filled on every call, as before the persistent buffers), ``before``
(``--before``: another copy of kernels/_cached.py, e.g. main's at the branch point, loaded as
tracekit.kernels._cached_before, with this checkout's other modules) and ``before_old_tiles``
(the same, its tile lookup building the tuning file's path on every call as it used to).
Sides alternate per configuration, several rounds.
Results: OUTDIR/host.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_gpu  # noqa: E402  (loads kernels/ as tracekit.kernels)

K = attention_gpu.K


def _host_us(fn, n=150):
    import torch

    torch.cuda.synchronize()
    torch.cuda._sleep(int(4e8))  # ~0.2 s at 1.98 GHz: the queue never drains while we time
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    import torch
    import triton

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--before", default=None)
    ap.add_argument("--configs", default="cached_C0_n256,cached_C4096_n256,cached_workload_large")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from tracekit.kernels import _cached, api, bench, tiles

    mods = {"after": _cached}
    if a.before:
        spec = importlib.util.spec_from_file_location("tracekit.kernels._cached_before", a.before)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        mods["before"] = mod

    def per_call(device, ws_numel, cnt_numel):
        return (torch.empty(ws_numel, dtype=torch.float32, device=device),
                torch.zeros(cnt_numel, dtype=torch.int32, device=device))

    def old_lookup(*args, _lookup=tiles.lookup):
        tiles.tiles_path()  # the tiles' memo key built the tuning file's path per call before
        return _lookup(*args)

    sides = ["after", "alloc_per_call"] + (["before", "before_old_tiles"] if a.before else [])
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    rows = []
    for name in a.configs.split(","):
        _, cfg = bench.parse_config(name)
        inp = bench._make_inputs(cfg, torch.bfloat16, "cuda")
        args = (inp["q"], inp["k"], inp["v"], inp["seq_offsets"], inp["cache"])
        kw = dict(max_seq_len=inp["max_seq_len"], alpha=inp["alpha"], num_targets=inp["num_targets"])
        fd = functools.partial(api.hstu_attention_cached, *args, **kw)
        fn = functools.partial(api.hstu_attention_cached, *args, validate=False, **kw)
        res = {s: dict(host_us_default=[], host_us_novalidate=[], do_bench_ms=[], gpu_ms=[]) for s in sides}
        for _ in range(a.rounds):
            for side in sides:
                mod = mods["before"] if side.startswith("before") else _cached
                orig_fwd, orig_buf, orig_lookup = _cached.hstu_cached_fwd, _cached._split_buffers, tiles.lookup
                _cached.hstu_cached_fwd = mod.hstu_cached_fwd
                if side == "alloc_per_call":
                    _cached._split_buffers = per_call
                if side == "before_old_tiles":
                    tiles.lookup = old_lookup
                _cached.release_split_buffers()
                try:
                    fd(), fn()
                    torch.cuda.synchronize()
                    r = res[side]
                    r["host_us_default"].append(_host_us(fd))
                    r["host_us_novalidate"].append(_host_us(fn))
                    r["do_bench_ms"].append(triton.testing.do_bench(fd, warmup=25, rep=200, return_mode="median"))
                    r["gpu_ms"].append(bench._time_cuda(fn, f"host:{side}:{name}", 50, 300, flush)["median_ms"])
                finally:
                    _cached.hstu_cached_fwd, _cached._split_buffers, tiles.lookup = orig_fwd, orig_buf, orig_lookup
        for side in sides:
            row = dict(config=name, side=side, **{k2: statistics.median(v2) for k2, v2 in res[side].items()},
                       rounds={k2: v2 for k2, v2 in res[side].items()})
            rows.append(row)
            print(f"{name:24s} {side:15s} host default {row['host_us_default']:6.1f} us  "
                  f"validate=False {row['host_us_novalidate']:6.1f} us  do_bench {row['do_bench_ms']:.4f} ms  "
                  f"gpu {row['gpu_ms']:.4f} ms", flush=True)
        del inp, args, fd, fn
        torch.cuda.empty_cache()
    (out / "host.json").write_text(json.dumps(dict(environment=bench._environment("cuda"), results=rows), indent=2))


if __name__ == "__main__":
    main()
