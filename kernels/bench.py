"""HSTU attention benchmark: ``bench_attention`` (library) and ``python -m tracekit.kernels.bench``.

Method (after triton.testing.do_bench and the seeds' pt_bench / BSA benchmark):

- inputs drawn once per configuration (random normal, fixed seed), never zeros;
- one call to compile/warm, a time estimate from 5 calls, then warm-up for ``warmup_ms``;
- ``rep_ms`` of timed calls (at least 10, at most 1000), each preceded by an L2 flush
  (zeroing a 256 MB buffer) and bracketed by CUDA events, with an NVTX range
  ``attention:<variant>:<config>`` around the call so the benchmark can itself be captured;
- statistics on the per-call times: median, mean, std, min, max, p95, p99 (ms);
- peak memory allocated (above what was allocated before the call) and reserved;
- TFLOP/s from the exact count of valid (query, key) pairs: 2·H·(d_qk + d_v)·pairs
  (block-sparse: the pairs in the selected blocks plus the compressed pairs; SDPA: its own
  causal pairs), using the median time;
- speedup = median(baseline) / median(variant), both measured in the same process.

Variants: ``triton_dense`` (``validate=False``), ``triton_dense_default`` (the call as a new
user writes it), the block-sparse and cached kernels, the PyTorch references, PyTorch's
causal ``sdpa`` of the same shape, and ``peer``: generative-recommenders' public Triton HSTU
kernel, measured in the same process when its checkout is on ``PYTHONPATH`` (never shipped).

GPU clocks are never changed (read them with nvidia-smi and record them).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from typing import Any

# ----------------------------------------------------------------------------- configurations


def _seed(i, B, N, H, dq, dv):
    return dict(kind="dense", B=B, N=N, H=H, d_qk=dq, d_v=dv, targets=0, jagged=False,
                bs=32, counts=4, note=f"BSA seed config {i}")


CONFIGS: dict[str, dict[str, Any]] = {
    # the five configurations of the BSA seed benchmark (B, N, H, ATTN_DIM, LINEAR_DIM)
    "seed1": _seed(1, 1, 64, 4, 16, 32),
    "seed2": _seed(2, 2, 128, 8, 32, 64),
    "seed3": _seed(3, 4, 256, 8, 32, 64),
    "seed4": _seed(4, 8, 512, 8, 32, 64),
    "seed5": _seed(5, 16, 1024, 8, 32, 64),
}
for _T, _B in ((512, 64), (1024, 32), (2048, 16), (4096, 8), (8192, 4)):
    CONFIGS[f"hstu_T{_T}"] = dict(kind="dense", B=_B, N=_T, H=4, d_qk=128, d_v=128, targets=256,
                                  jagged=False, note="full-length sequences, 256 candidates")
    CONFIGS[f"hstu_T{_T}_d256"] = dict(kind="dense", B=_B, N=_T, H=4, d_qk=256, d_v=256, targets=256,
                                       jagged=False, note="full-length, d=256, 256 candidates")
CONFIGS["hstu_T8192_B8"] = dict(kind="dense", B=8, N=8192, H=4, d_qk=128, d_v=128, targets=256, jagged=False,
                                note="full-length sequences, 256 candidates")
for _T, _B in ((2048, 32), (4096, 16), (8192, 8)):
    CONFIGS[f"jagged_T{_T}"] = dict(kind="dense", B=_B, N=_T, H=4, d_qk=128, d_v=128, targets=256, jagged=True,
                                    note="lengths log-uniform in [T/16, T], 256 candidates (fewer if short)")
CONFIGS["bsa_T4096"] = dict(kind="bsa", B=8, N=4096, H=4, d_qk=128, d_v=128, targets=256, jagged=False,
                            bs=64, counts=8, note="block_size*block_counts = T/8")
CONFIGS["bsa_T8192"] = dict(kind="bsa", B=4, N=8192, H=4, d_qk=128, d_v=128, targets=256, jagged=False,
                            bs=64, counts=16, note="block_size*block_counts = T/8")
CONFIGS["bsa_T8192_sparse"] = dict(kind="bsa", B=4, N=8192, H=4, d_qk=128, d_v=128, targets=256, jagged=False,
                                   bs=64, counts=8, note="block_size*block_counts = T/16")
for _C in (0, 1024, 2048, 4096, 8192):
    CONFIGS[f"cached_C{_C}_n256"] = dict(kind="cached", B=8, N=_C + 256, H=4, d_qk=128, d_v=128, cache=_C, new=256,
                                         targets=256, jagged=False, note="256 new candidates vs C cached tokens")
for _n in (64, 512, 1024):
    CONFIGS[f"cached_C4096_n{_n}"] = dict(kind="cached", B=8, N=4096 + _n, H=4, d_qk=128, d_v=128, cache=4096,
                                          new=_n, targets=_n, jagged=False, note=f"{_n} new candidates vs 4096 cached")
# the capture workload's large preset (capture/config.py): 8 users, ~2048 cached history tokens,
# 16 new history tokens + 1024 candidates per request, 4 heads x 256, max_seq_len 4096 + 1024
CONFIGS["cached_workload_large"] = dict(kind="cached", B=8, N=5120, H=4, d_qk=256, d_v=256, cache=2048, new=1040,
                                        targets=1024, jagged=False,
                                        note="inference workload (large preset): 16 history + 1024 candidates "
                                             "vs 2048 cached")

DEFAULT_CONFIGS = ["seed1", "seed2", "seed3", "seed4", "seed5", "hstu_T512", "hstu_T1024", "hstu_T2048",
                   "hstu_T4096", "hstu_T8192", "hstu_T4096_d256", "jagged_T4096", "jagged_T8192",
                   "bsa_T4096", "bsa_T8192", "cached_C0_n256", "cached_C1024_n256", "cached_C2048_n256",
                   "cached_C4096_n256", "cached_C8192_n256", "cached_C4096_n64", "cached_C4096_n1024",
                   "cached_workload_large"]

VARIANTS = ("triton_dense", "triton_dense_default", "triton_block_sparse", "triton_cached", "reference",
            "reference_block_sparse", "reference_cached", "sdpa", "peer")
_KIND_VARIANTS = {
    "dense": {"triton_dense", "triton_dense_default", "reference", "sdpa", "peer"},
    "bsa": {"triton_block_sparse", "reference_block_sparse", "triton_dense", "reference"},
    "cached": {"triton_cached", "reference_cached", "triton_dense", "reference"},
}


def parse_config(spec: str) -> tuple[str, dict[str, Any]]:
    """A named configuration, or an inline one: ``B=2,N=64,H=2,d=32[,dv=..,targets=..,
    jagged=1,kind=bsa|cached,bs=..,counts=..,cache=..,new=..]``."""
    if spec in CONFIGS:
        return spec, dict(CONFIGS[spec])
    if "=" not in spec:
        raise ValueError(f"unknown configuration {spec!r}; named ones: {', '.join(CONFIGS)}")
    kv = {}
    for part in spec.split(","):
        key, _, val = part.partition("=")
        kv[key.strip()] = val.strip()
    d = int(kv.get("d", 64))
    cfg = dict(kind=kv.get("kind", "dense"), B=int(kv["B"]), N=int(kv["N"]), H=int(kv.get("H", 4)),
               d_qk=d, d_v=int(kv.get("dv", d)), targets=int(kv.get("targets", 0)),
               jagged=kv.get("jagged", "0") not in ("0", "false", ""), bs=int(kv.get("bs", 32)),
               counts=int(kv.get("counts", 4)), note="inline")
    if cfg["kind"] == "cached":
        cfg["cache"] = int(kv.get("cache", cfg["N"] // 2))
        cfg["new"] = int(kv.get("new", cfg["N"] - cfg["cache"]))
    return spec, cfg


# ----------------------------------------------------------------------------- inputs, FLOPs


def _lengths(cfg, g):
    import torch

    B, N = cfg["B"], cfg["N"]
    if cfg.get("kind") == "cached":
        return torch.full((B,), cfg["new"], dtype=torch.int64)
    if not cfg.get("jagged"):
        return torch.full((B,), N, dtype=torch.int64)
    u = torch.rand(B, generator=g)
    return torch.exp(math.log(N / 16) + u * math.log(16)).long().clamp(1, N)


def _make_inputs(cfg, dtype, device):
    import torch

    from .cache import build_paged_kv_cache

    g = torch.Generator().manual_seed(2026)
    lengths = _lengths(cfg, g)
    H, dq, dv = cfg["H"], cfg["d_qk"], cfg["d_v"]
    L = int(lengths.sum())
    off = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    off[1:] = lengths.cumsum(0)
    nt = torch.minimum(torch.full_like(lengths, cfg.get("targets", 0)), lengths)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    inp = dict(q=rnd(L, H, dq), k=rnd(L, H, dq), v=rnd(L, H, dv), seq_offsets=off.to(device),
               num_targets=nt.to(device) if cfg.get("targets", 0) else None, lengths=lengths, nt=nt,
               alpha=1.0 / math.sqrt(dq), max_seq_len=cfg["N"])
    if cfg.get("kind") == "cached":
        C = cfg["cache"]
        hoff = torch.arange(cfg["B"] + 1, dtype=torch.int64) * C
        kh, vh = rnd(C * cfg["B"], H, dq), rnd(C * cfg["B"], H, dv)
        inp["cache"] = build_paged_kv_cache(kh, vh, hoff.to(device), max_len=C + cfg["new"])
        inp["kh"], inp["vh"] = kh, vh
    return inp


def dense_valid_pairs(lengths, nt) -> int:
    """Valid pairs of the default HSTU mask: causal history plus candidates seeing the
    history and themselves."""
    total = 0
    for T, n in zip(lengths.tolist(), nt.tolist(), strict=True):
        hl = T - n
        total += hl * (hl + 1) // 2 + n * hl + n
    return total


def _bsa_pairs(sel, lengths, nt, bs: int, H: int) -> int:
    """Pairs in the selected blocks under the HSTU mask, plus the compressed pairs (query,
    pooled block), summed over heads."""
    import torch

    dev = sel.device
    total = 0
    ar = torch.arange(bs, device=dev)
    for b in range(sel.shape[0]):
        T, hl = int(lengths[b]), int(lengths[b] - nt[b])
        s = sel[b].long()  # [H, nqb, K+1]
        qb = torch.arange(s.shape[1], device=dev).view(1, -1, 1, 1, 1)
        i = qb * bs + ar.view(1, 1, 1, bs, 1)
        j = s.clamp(min=0).view(H, -1, s.shape[2], 1, 1) * bs + ar.view(1, 1, 1, 1, bs)
        valid = (((j <= i) & (j < hl)) | (i == j)) & (i < T) & (j < T) & (s >= 0).view(H, -1, s.shape[2], 1, 1)
        total += int(valid.sum())
        e = torch.minimum(torch.arange(T, device=dev) + 1, torch.tensor(hl, device=dev))
        total += H * int((e // bs).sum())
    return total


# ----------------------------------------------------------------------------- timing


def _stats(times_ms: list[float]) -> dict[str, float]:
    import statistics

    xs = sorted(times_ms)

    def q(p):
        k = (len(xs) - 1) * p
        lo, hi = math.floor(k), math.ceil(k)
        return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

    return dict(median_ms=q(0.5), mean_ms=statistics.fmean(xs),
                std_ms=statistics.stdev(xs) if len(xs) > 1 else 0.0, min_ms=xs[0], max_ms=xs[-1],
                p95_ms=q(0.95), p99_ms=q(0.99), n_rep=len(xs))


def _time_cuda(fn, name, warmup_ms, rep_ms, flush):
    import torch

    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(5):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 5, 1e-3)
    n_warm = max(1, int(warmup_ms / est))
    n_rep = min(1000, max(10, int(rep_ms / est)))
    for _ in range(n_warm):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        flush.zero_()
        starts[i].record()
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.nvtx.range_pop()
        ends[i].record()
    torch.cuda.synchronize()
    res = _stats([a.elapsed_time(b) for a, b in zip(starts, ends, strict=True)])
    res["n_warmup"] = n_warm
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    res["peak_alloc_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    res["peak_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
    return res


def _time_cpu(fn, warmup_ms, rep_ms):
    t0 = time.perf_counter()
    fn()
    est = max((time.perf_counter() - t0) * 1e3, 1e-3)
    n_warm = max(1, int(warmup_ms / est)) if warmup_ms > 0 else 0
    for _ in range(n_warm):
        fn()
    n_rep = min(1000, max(3, int(rep_ms / est)))
    ts = []
    for _ in range(n_rep):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    res = _stats(ts)
    res.update(n_warmup=n_warm, peak_alloc_mb=None, peak_reserved_mb=None)
    return res


# ----------------------------------------------------------------------------- variants


def _variant_fn(variant, cfg, inp):
    """(callable, valid pairs) for one variant on one configuration, or None if n/a."""
    import torch

    from . import api, reference

    kind = cfg["kind"]
    q, k, v, off = inp["q"], inp["k"], inp["v"], inp["seq_offsets"]
    kw = dict(max_seq_len=inp["max_seq_len"], alpha=inp["alpha"], num_targets=inp["num_targets"])
    backend = "triton"
    if kind == "cached" and variant in ("triton_dense", "reference"):
        # full recompute over cache ++ new tokens, the alternative to caching
        B, C, n = cfg["B"], cfg["cache"], cfg["new"]
        H, dq, dv = cfg["H"], cfg["d_qk"], cfg["d_v"]
        kh, vh = inp["kh"].view(B, C, H, dq), inp["vh"].view(B, C, H, dv)
        fq = torch.cat([kh, q.view(B, n, H, dq)], 1).reshape(B * (C + n), H, dq)
        fk = torch.cat([kh, k.view(B, n, H, dq)], 1).reshape(B * (C + n), H, dq)
        fv = torch.cat([vh, v.view(B, n, H, dv)], 1).reshape(B * (C + n), H, dv)
        foff = torch.arange(B + 1, device=q.device) * (C + n)
        lens = torch.full((B,), C + n, dtype=torch.int64)
        pairs = dense_valid_pairs(lens, inp["nt"])
        f = api.hstu_attention if variant == "triton_dense" else reference.hstu_attention_reference
        extra = dict(backend=backend) if variant == "triton_dense" else {}
        return (lambda: f(fq, fk, fv, foff, validate=False, **kw, **extra)), pairs
    if variant == "triton_dense":
        return (lambda: api.hstu_attention(q, k, v, off, validate=False, backend=backend, **kw)), \
            dense_valid_pairs(inp["lengths"], inp["nt"])
    if variant == "triton_dense_default":
        # as a new user calls it: validation on, backend chosen automatically
        return (lambda: api.hstu_attention(q, k, v, off, **kw)), dense_valid_pairs(inp["lengths"], inp["nt"])
    if variant == "peer":
        # the public Triton kernel of meta-recsys/generative-recommenders, when importable
        # (put its checkout on PYTHONPATH); same inputs, same mask, its own autotuning
        try:
            from generative_recommenders.ops.triton.triton_hstu_attention import triton_hstu_mha
        except ImportError as exc:
            raise RuntimeError("generative_recommenders is not importable (add its checkout to PYTHONPATH)") from exc
        N = inp["max_seq_len"]
        return (lambda: triton_hstu_mha(N, inp["alpha"], q, k, v, off, inp["num_targets"])), \
            dense_valid_pairs(inp["lengths"], inp["nt"])
    if variant == "reference":
        return (lambda: reference.hstu_attention_reference(q, k, v, off, validate=False, **kw)), \
            dense_valid_pairs(inp["lengths"], inp["nt"])
    if variant == "sdpa":
        if cfg["d_qk"] != cfg["d_v"] or cfg.get("jagged"):
            return None
        B, N, H = cfg["B"], cfg["N"], cfg["H"]
        qs, ks, vs = (x.view(B, N, H, -1).transpose(1, 2) for x in (q, k, v))
        fn = lambda: torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True)  # noqa: E731
        return fn, B * N * (N + 1) // 2
    bkw = dict(block_size=cfg.get("bs", 32), block_counts=cfg.get("counts", 4))
    if variant == "triton_block_sparse":
        _, sel = api.hstu_attention_block_sparse(q, k, v, off, validate=False, backend=backend,
                                                 return_block_indices=True, **kw, **bkw)
        pairs = _bsa_pairs(sel, inp["lengths"], inp["nt"], bkw["block_size"], cfg["H"]) // cfg["H"]
        return (lambda: api.hstu_attention_block_sparse(q, k, v, off, validate=False, backend=backend,
                                                        **kw, **bkw)), pairs
    if variant == "reference_block_sparse":
        _, sel = reference.hstu_attention_block_sparse_reference(q, k, v, off, validate=False,
                                                                 return_block_indices=True, **kw, **bkw)
        pairs = _bsa_pairs(sel, inp["lengths"], inp["nt"], bkw["block_size"], cfg["H"]) // cfg["H"]
        return (lambda: reference.hstu_attention_block_sparse_reference(q, k, v, off, validate=False,
                                                                        **kw, **bkw)), pairs
    if variant in ("triton_cached", "reference_cached"):
        C, n = cfg["cache"], cfg["new"]
        lens = torch.full((cfg["B"],), C + n, dtype=torch.int64)
        pairs = dense_valid_pairs(lens, inp["nt"]) - dense_valid_pairs(torch.full((cfg["B"],), C), torch.zeros(cfg["B"], dtype=torch.int64))
        if variant == "triton_cached":
            return (lambda: api.hstu_attention_cached(q, k, v, off, inp["cache"], validate=False,
                                                      backend=backend, **kw)), pairs
        return (lambda: reference.hstu_attention_cached_reference(q, k, v, off, inp["cache"], validate=False,
                                                                  **kw)), pairs
    raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")


# ----------------------------------------------------------------------------- entry points


def bench_attention(
    configs: list[str] | None = None,
    variants=("triton_dense", "triton_block_sparse", "triton_cached", "reference", "sdpa"),
    baseline: str = "reference",
    dtype: str = "bf16",
    warmup_ms: float = 100.0,
    rep_ms: float = 500.0,
    json_path=None,
    csv_path=None,
    device: str | None = None,
    progress=None,
) -> list[dict]:
    """Benchmark HSTU attention variants on named (or inline) configurations.

    Returns one dict per (configuration, variant) measured; variants that do not apply
    to a configuration's kind are skipped; a variant that fails (e.g. out of memory) gives
    a row with ``error`` set and no timings. ``speedup_vs_baseline`` is the baseline's
    median over the variant's median (same configuration, same process); the baseline is
    timed even if absent from ``variants`` (its rows are then not returned).
    """
    names = list(configs) if configs else list(DEFAULT_CONFIGS)
    _check_args(names, variants, baseline, dtype, warmup_ms, rep_ms, json_path, csv_path)
    import torch

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device=device) if device == "cuda" else None
    meta = _environment(device)
    rows: list[dict] = []
    for spec in names:
        name, cfg = parse_config(spec)
        inp = _make_inputs(cfg, dt, device)
        todo = [x for x in dict.fromkeys([baseline, *variants]) if x in _KIND_VARIANTS[cfg["kind"]]]
        cfg_rows = {}
        for variant in todo:
            row = dict(config=name, kind=cfg["kind"], variant=variant, B=cfg["B"], N=cfg["N"], H=cfg["H"],
                       d_qk=cfg["d_qk"], d_v=cfg["d_v"], tokens=int(inp["lengths"].sum()), dtype=dtype,
                       device=meta["device_name"], block_size=cfg.get("bs") if cfg["kind"] == "bsa" else None,
                       block_counts=cfg.get("counts") if cfg["kind"] == "bsa" else None,
                       cache_len=cfg.get("cache"), new_len=cfg.get("new"), error=None)
            try:
                made = _variant_fn(variant, cfg, inp)
                if made is None:
                    continue
                fn, pairs = made
                if device == "cuda":
                    res = _time_cuda(fn, f"attention:{variant}:{name}", warmup_ms, rep_ms, flush)
                else:
                    res = _time_cpu(fn, warmup_ms, rep_ms)
                flops = 2.0 * cfg["H"] * (cfg["d_qk"] + cfg["d_v"]) * pairs
                row.update(res, valid_pairs=pairs, flops=flops, tflops=flops / (res["median_ms"] * 1e-3) / 1e12)
            except Exception as exc:  # noqa: BLE001 - recorded in the row, e.g. out of memory
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                if device == "cuda":
                    torch.cuda.empty_cache()
            cfg_rows[variant] = row
            if progress:
                progress(row)
        base = cfg_rows.get(baseline)
        for variant, row in cfg_rows.items():
            ok = base is not None and base.get("error") is None and row.get("error") is None
            row["baseline"] = baseline
            row["speedup_vs_baseline"] = base["median_ms"] / row["median_ms"] if ok else None
            if variant in variants:
                rows.append(row)
        del inp
        if device == "cuda":
            torch.cuda.empty_cache()
    from tracekit.outputs import write_output

    if json_path:
        text = json.dumps(dict(environment=meta, warmup_ms=warmup_ms, rep_ms=rep_ms, baseline=baseline,
                               dtype=dtype, results=rows), indent=2)
        write_output(json_path, lambda tmp: tmp.write_text(text))
    if csv_path:
        keys = list(dict.fromkeys(k for r in rows for k in r))

        def write_csv(tmp):
            with open(tmp, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=keys)
                w.writeheader()
                w.writerows(rows)

        write_output(csv_path, write_csv)
    return rows


def _check_args(names, variants, baseline, dtype, warmup_ms, rep_ms, json_path, csv_path) -> None:
    """Every argument checked before the first measurement (a run of the standard set
    takes minutes): ``ParamError``, one line naming the value."""
    from tracekit.errors import ParamError
    from tracekit.outputs import check_output

    if not list(variants):
        raise ParamError("--variants: name at least one variant; known: " + ", ".join(VARIANTS))
    for flag, vname in [*(("--variants", v) for v in variants), ("--baseline", baseline)]:
        if vname not in VARIANTS:
            raise ParamError(f"{flag} {vname!r}: unknown variant; known: {', '.join(VARIANTS)}")
    if dtype not in ("bf16", "fp16", "fp32"):
        raise ParamError(f"--dtype {dtype!r}: choose bf16, fp16 or fp32")
    for flag, value in (("--warmup-ms", warmup_ms), ("--rep-ms", rep_ms)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value >= 0):
            raise ParamError(f"{flag} {value!r}: must be a finite number of milliseconds >= 0")
    for spec in names:
        try:
            kind = parse_config(spec)[1]["kind"]
            if kind not in _KIND_VARIANTS:
                raise ValueError(f"kind={kind}: choose {', '.join(_KIND_VARIANTS)}")
        except (ValueError, KeyError) as err:
            what = f"unknown configuration; named ones: {', '.join(CONFIGS)}" if "=" not in spec else \
                f"not an inline configuration ({err!s}); give B=..,N=..[,H=..,d=..]"
            raise ParamError(f"--config {spec!r}: {what}") from None
    for path in (json_path, csv_path):
        if path:
            check_output(path)


def _environment(device: str) -> dict:
    import platform

    import torch

    meta = dict(torch=torch.__version__, python=platform.python_version(),
                date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), device_name="cpu")
    try:
        import triton

        meta["triton"] = triton.__version__
    except ImportError:
        meta["triton"] = None
    if device == "cuda":
        meta["device_name"] = torch.cuda.get_device_name()
        try:
            import subprocess

            meta["clocks"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            meta["clocks"] = None
    return meta


def format_table(results: list[dict]) -> str:
    """A fixed-width table: configuration, variant, median/p95 ms, TFLOP/s, speedup, peak MB."""
    head = ["config", "variant", "median_ms", "p95_ms", "TFLOP/s", "speedup", "peak_MB"]
    lines = []
    for r in results:
        if r.get("error"):
            lines.append([r["config"], r["variant"], "error: " + r["error"][:60], "", "", "", ""])
            continue
        sp = r.get("speedup_vs_baseline")
        pk = r.get("peak_alloc_mb")
        lines.append([r["config"], r["variant"], f"{r['median_ms']:.4f}", f"{r['p95_ms']:.4f}",
                      f"{r['tflops']:.1f}", "" if sp is None else f"{sp:.2f}x", "" if pk is None else f"{pk:.0f}"])
    widths = [max(len(h), *(len(str(x[i])) for x in lines)) if lines else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    for x in lines:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(x, widths, strict=True)))
    base = next((r.get("baseline") for r in results if r.get("baseline")), None)
    if base:
        out.append(f"speedup = median({base}) / median(variant), same process")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tracekit.kernels.bench", description=__doc__.splitlines()[0])
    p.add_argument("--config", action="append", help="named or inline configuration (repeatable, or comma-free "
                   "names separated by ';'); default: the standard set")
    p.add_argument("--variants", default="triton_dense,triton_block_sparse,triton_cached,reference,sdpa")
    p.add_argument("--baseline", default="reference")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--warmup-ms", type=float, default=100.0)
    p.add_argument("--rep-ms", type=float, default=500.0)
    p.add_argument("--json")
    p.add_argument("--csv")
    p.add_argument("--device")
    p.add_argument("--list", action="store_true", help="list the named configurations and exit")
    a = p.parse_args(argv)
    if a.list:
        for name, cfg in CONFIGS.items():
            print(f"{name:22s} {cfg['kind']:7s} B={cfg['B']} N={cfg['N']} H={cfg['H']} d={cfg['d_qk']}/{cfg['d_v']}"
                  f"  {cfg.get('note', '')}")
        return 0
    configs = [c for spec in (a.config or []) for c in spec.split(";") if c] or None
    rows = bench_attention(configs, variants=tuple(a.variants.split(",")), baseline=a.baseline, dtype=a.dtype,
                           warmup_ms=a.warmup_ms, rep_ms=a.rep_ms, json_path=a.json, csv_path=a.csv,
                           device=a.device, progress=lambda r: print(f"  {r['config']} {r['variant']}: "
                           + (r['error'] or f"{r['median_ms']:.4f} ms"), file=sys.stderr, flush=True))
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
