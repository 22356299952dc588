"""HSTU attention benchmark: ``bench_attention`` (library) and ``python -m tracekit.kernels.bench``.

Method (after triton.testing.do_bench and the seeds' pt_bench / BSA benchmark):

- inputs drawn once per configuration (random normal, fixed seed), never zeros;
- one call to compile/warm, a time estimate from 5 calls, then warm-up for ``warmup_ms``;
- ``rep_ms`` of timed calls (at least 10, at most 1000), each preceded by an L2 flush
  (zeroing a 256 MB buffer) and a GPU-side delay (below), and bracketed by CUDA events, with an
  NVTX range ``attention:<variant>:<config>`` around the call so the benchmark can itself be
  captured;
- the host's enqueue time of one call (``host_ms``, median of ``HOST_PROBE_CALLS`` untimed calls
  timed with ``perf_counter``, no synchronisation): where it exceeds ``median_ms``, back-to-back
  calls in real use are bound by the host, not the GPU;
- statistics on the per-call times: median, mean, std, min, max, p95, p99 (ms);
- peak memory allocated (above what was allocated before the call) and reserved;
- TFLOP/s from the exact count of valid (query, key) pairs: 2·H·(d_qk + d_v)·pairs
  (block-sparse: the pairs in the selected blocks plus the compressed pairs; SDPA: its own
  causal pairs), using the median time;
- speedup = median(baseline) / median(variant), both measured in the same process, with a
  95 % interval (``speedup_low``, ``speedup_high``): a percentile bootstrap of both sets of
  per-call times (each resampled with replacement, 2000 times, fixed seed; the ratio of the
  resampled medians). It covers the noise of the timed calls of this run, not drift between
  runs (clocks, other work on the GPU); the per-call times are kept (``samples_ms``, JSON);
- correctness: after timing, the variant's output (one more call of the timed function) is
  compared with the PyTorch reference of its kind (dense, block-sparse, cached) on the same
  inputs computed in float32 on a GPU, float64 on the CPU: ``max_abs_err``, ``rel_err``
  (||out - ref|| / ||ref||, the kernel tests' measure), ``err_tol`` (the tests' tolerance for
  the dtype) and ``matches_reference`` (rel_err < err_tol). A block-sparse output is compared
  on the variant's own block selection (a near tie of two blocks' importances may order them
  differently in bf16 and float32); ``sel_agree`` is the share of (sequence, head, query
  block) rows whose selected blocks are those of the precise reference.

A variant asked for that a configuration cannot run (another kind, or ``sdpa`` on jagged
or d_qk != d_v inputs) is skipped and said on stderr, one line per variant (``skip_lines``: on how
many configurations, of which kinds or why), each pair listed under ``skipped`` in the JSON; none
at all is an error before any timing.

Variants: ``triton_dense`` (``validate=False``), ``triton_dense_default`` (the call as a new
user writes it), the block-sparse and cached kernels, the PyTorch references, PyTorch's
causal ``sdpa`` of the same shape, and ``peer``: generative-recommenders' public Triton HSTU
kernel, measured in the same process when its checkout is on ``PYTHONPATH`` (never shipped).
And yours (``UserVariant``): ``NAME=FILE.py:FUNCTION`` or ``NAME=MODULE:FUNCTION`` among the
variants, called as ``api.hstu_attention`` is, on every configuration, timed and checked as ours
are (``source`` in its rows, ``variant_sources`` in the JSON); it can be the baseline.

GPU time only, whatever the host's overhead: the stream holds flush, start event, call, end
event; where the host's Python wrapper and launches of a call outlast the flush on the GPU, the
GPU reaches the start event first and idles until the call is enqueued, and that idle time is
timed (tiny shapes such as the BSA seeds then time the host's launch: the weakness of
``triton.testing.do_bench`` on short kernels). So after each flush the GPU spins
(``torch.cuda._sleep``) for ``gpu_delay``: ``GPU_DELAY_FACTOR`` times the host's measured time to
enqueue one timed call, within ``GPU_DELAY_FLOOR_MS``..``GPU_DELAY_CAP_MS``, in SM cycles at the
faster of the measured ``_sleep`` rate and the maximum SM clock (a slower clock only lengthens
it), after a one-off lead-in (``GPU_LEAD_FACTOR`` delays, at least 1 ms): the host has enqueued
start, call and end before the GPU reaches start, and then stays ahead. Chosen over a CUDA graph
of the call (``do_bench_cudagraph``): it keeps the flush and NVTX range per call and the call as
users make it, for every variant, also those a graph cannot capture (``validate=True``, the
references). The check: ``late_calls``, the timed calls whose start event the GPU had passed
before the host had enqueued the end event (0 expected: such a time may hold host time); rows
carry ``gpu_delay_ms``, ``gpu_delay_cycles``, ``gpu_lead_ms``, ``sm_cycles_per_ms``.
``gpu_delay=False`` (``--no-gpu-delay``) drops the delay and the lead-in, for comparison (the
probe and the late check stay, so it is not exactly the loop before the delay existed).

GPU clocks are never changed (read them with nvidia-smi and record them).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# ----------------------------------------------------------------------------- configurations


def _seed(i, B, N, H, dq, dv):
    # kind "bsa": the seed times the dense kernel against the block-sparse one on each
    return dict(kind="bsa", B=B, N=N, H=H, d_qk=dq, d_v=dv, targets=0, jagged=False,
                bs=32, counts=4, note=f"BSA seed config {i} (block_size 32, block_counts 4)")


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
_DENSE_VARIANTS = {"triton_dense", "triton_dense_default", "reference", "sdpa", "peer"}
_KIND_VARIANTS = {
    "dense": _DENSE_VARIANTS,
    # block-sparse inputs are dense inputs: every dense variant runs on them too
    "bsa": _DENSE_VARIANTS | {"triton_block_sparse", "reference_block_sparse"},
    "cached": {"triton_cached", "reference_cached", "triton_dense", "reference"},
}


def skip_reason(variant: str, cfg: dict) -> str | None:
    """Why ``variant`` cannot run on configuration ``cfg``, or None if it can (a variant of
    yours, ``UserVariant``, runs on every configuration, as ``triton_dense`` does)."""
    if variant not in VARIANTS:
        return None
    kind = cfg["kind"]
    if variant not in _KIND_VARIANTS[kind]:
        return f"a {kind} configuration runs {', '.join(v for v in VARIANTS if v in _KIND_VARIANTS[kind])}"
    if variant == "sdpa" and (cfg["d_qk"] != cfg["d_v"] or cfg.get("jagged")):
        return "sdpa needs d_qk == d_v and sequences of one length"
    return None


def _plan(names, variants, baseline) -> tuple[list, list[dict]]:
    """The (name, configuration, variants to run) of each configuration asked for, and the
    (configuration, variant) pairs skipped with the reason (``skip_reason``; for the baseline
    when not asked for, that no speedups are given there)."""
    plans, skipped = [], []
    for spec in names:
        name, cfg = parse_config(spec)
        todo = []
        for variant in dict.fromkeys([baseline, *variants]):
            why = skip_reason(variant, cfg)
            if why is None:
                todo.append(variant)
                continue
            if variant not in variants:
                why = f"baseline not run ({why}): no speedups on this configuration"
            skipped.append(dict(config=name, variant=variant, reason=why))
        plans.append((name, cfg, todo))
    return plans, skipped


def _some(names: list[str], k: int = 3) -> str:
    return ", ".join(names[:k]) + (f", +{len(names) - k} more" if len(names) > k else "")


def skip_lines(skipped: list[dict]) -> list[str]:
    """The skipped (configuration, variant) pairs (``_plan``'s list) said in one line per
    variant: on how many configurations, those of kinds it does not run (which, a few names)
    and those it cannot run for another reason (the reason, a few names)."""
    by_variant: dict[str, list[dict]] = {}
    for s in skipped:
        by_variant.setdefault(s["variant"], []).append(s)
    lines = []
    for variant, ss in by_variant.items():
        other_kind: dict[str, list[str]] = {}  # kind -> configurations
        other: dict[str, list[str]] = {}  # reason -> configurations
        for s in ss:
            cfg = parse_config(s["config"])[1]
            if variant not in _KIND_VARIANTS[cfg["kind"]]:
                other_kind.setdefault(cfg["kind"], []).append(s["config"])
            else:
                other.setdefault(skip_reason(variant, cfg) or s["reason"], []).append(s["config"])
        parts = []
        if other_kind:
            names = [c for cs in other_kind.values() for c in cs]
            runs_on = [k for k, vs in _KIND_VARIANTS.items() if variant in vs]
            parts.append(f"{len(names)} of other kinds ({', '.join(other_kind)}: {_some(names)}); it runs on "
                         f"{', '.join(runs_on)} configurations")
        for why, names in other.items():
            parts.append(f"{len(names)} ({_some(names)}): {why}")
        n = len(ss)
        base = " (the baseline, not asked for: no speedups there)" if ss[0]["reason"].startswith("baseline") else ""
        lines.append(f"skipped {variant}{base} on {n} configuration{'s' if n != 1 else ''}: " + "; ".join(parts))
    return lines


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


# the GPU-side delay before each timed call (module docstring)
GPU_DELAY_FACTOR = 2.0
GPU_DELAY_FLOOR_MS = 0.05
GPU_DELAY_CAP_MS = 20.0
GPU_LEAD_FACTOR = 5.0  # the lead-in before the first timed call: this many delays, at least 1 ms
HOST_PROBE_CALLS = 25


def gpu_delay(host_ms, cycles_per_ms: float, factor: float = GPU_DELAY_FACTOR,
              floor_ms: float = GPU_DELAY_FLOOR_MS, cap_ms: float = GPU_DELAY_CAP_MS) -> tuple[float, int]:
    """The delay the GPU spins for before each timed call's start event, as (ms, SM cycles):
    ``factor`` times the median of ``host_ms`` (the host's time to enqueue one timed call:
    start event, NVTX range, the call, end event), at least ``floor_ms``, at most ``cap_ms``;
    cycles at ``cycles_per_ms`` (SM clock in kHz), rounded up."""
    import statistics

    xs = [float(x) for x in host_ms]
    if not xs or not all(math.isfinite(x) and x >= 0 for x in xs):
        raise ValueError(f"host_ms: need finite times >= 0, got {host_ms!r}")
    if not (math.isfinite(cycles_per_ms) and cycles_per_ms > 0):
        raise ValueError(f"cycles_per_ms: need a finite rate > 0, got {cycles_per_ms!r}")
    if not (0 <= floor_ms <= cap_ms and factor > 0):
        raise ValueError(f"need factor > 0 and 0 <= floor_ms <= cap_ms, got {factor}, {floor_ms}, {cap_ms}")
    ms = min(cap_ms, max(floor_ms, factor * statistics.median(xs)))
    return ms, math.ceil(ms * cycles_per_ms)


def _sm_cycles_per_ms(max_khz: float | None = None) -> float:
    """SM cycles per ms for ``torch.cuda._sleep``: its measured rate (about 1 ms of sleep between
    two events, enqueued behind another sleep so that the host is ahead), or the GPU's maximum SM
    clock ``max_khz`` where faster: a clock above the one measured would shorten the delay."""
    import torch

    n = 2_000_000
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(n // 10)
    s.record()
    torch.cuda._sleep(n)
    e.record()
    torch.cuda.synchronize()
    measured = n / max(s.elapsed_time(e), 1e-6)
    return max(measured, max_khz or 0.0)


def _max_sm_khz() -> float | None:
    """The GPU's maximum SM clock in kHz (the device properties, else nvidia-smi), or None."""
    import torch

    khz = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "clock_rate", None)
    if khz:
        return float(khz)
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits",
                              f"--id={torch.cuda.current_device()}"],
                             capture_output=True, text=True, timeout=10).stdout.split()
        return float(out[0]) * 1e3 if out else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _time_cuda(fn, name, warmup_ms, rep_ms, flush, delay: bool = True, max_khz: float | None = None):
    """GPU time per call of ``fn`` (module docstring); ``delay=False``: no GPU-side delay before
    the start events (the GPU's wait for a slow host is then timed too)."""
    import statistics

    import torch

    from tracekit.ingest.bench import time_summary

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
    torch.cuda.synchronize()
    # the host's time to enqueue one timed call (untimed calls, no synchronisation between them)
    host, body = [], []
    for _ in range(HOST_PROBE_CALLS):
        flush.zero_()
        t0 = time.perf_counter()
        s.record()
        torch.cuda.nvtx.range_push(name)
        t1 = time.perf_counter()
        fn()
        t2 = time.perf_counter()
        torch.cuda.nvtx.range_pop()
        e.record()
        t3 = time.perf_counter()
        host.append((t2 - t1) * 1e3)
        body.append((t3 - t0) * 1e3)
    torch.cuda.synchronize()
    cpm = _sm_cycles_per_ms(max_khz)
    delay_ms, cycles = gpu_delay(body, cpm) if delay else (0.0, 0)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    late = 0
    lead_ms = max(1.0, GPU_LEAD_FACTOR * delay_ms) if cycles else 0.0
    if cycles:
        # the GPU, idle after the synchronisation, gets a head start: the first calls cost the
        # host more than the probe's (seen on an H200: the first timed call late in most rows)
        torch.cuda._sleep(math.ceil(lead_ms * cpm))
    for i in range(n_rep):
        flush.zero_()
        if cycles:
            torch.cuda._sleep(cycles)
        starts[i].record()
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.nvtx.range_pop()
        ends[i].record()
        late += starts[i].query()  # the GPU already past the start: the interval may hold host time
    torch.cuda.synchronize()
    samples = [a.elapsed_time(b) for a, b in zip(starts, ends, strict=True)]
    res = time_summary(samples)
    res.update(n_warmup=n_warm, samples_ms=samples, host_ms=statistics.median(host), host_ms_max=max(host),
               gpu_delay_ms=delay_ms, gpu_delay_cycles=cycles, gpu_lead_ms=lead_ms, sm_cycles_per_ms=cpm,
               late_calls=late)
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    res["peak_alloc_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    res["peak_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
    return res


def _time_cpu(fn, warmup_ms, rep_ms):
    from tracekit.ingest.bench import time_summary

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
    res = time_summary(ts)
    res.update(n_warmup=n_warm, samples_ms=ts, peak_alloc_mb=None, peak_reserved_mb=None)
    return res


def speedup_interval(base_ms, variant_ms, level: float = 0.95, n_boot: int = 2000,
                     seed: int = 0) -> tuple[float, float]:
    """A ``level`` interval of median(base_ms) / median(variant_ms): percentile bootstrap, each
    sample set resampled with replacement ``n_boot`` times (fixed ``seed``: the same samples
    give the same interval), the ratio of the resampled medians, its (1-level)/2 and
    (1+level)/2 quantiles. The samples are taken as independent calls of each side."""
    import torch

    g = torch.Generator().manual_seed(seed)
    b = torch.tensor(list(base_ms), dtype=torch.float64)
    v = torch.tensor(list(variant_ms), dtype=torch.float64)
    mb = b[torch.randint(len(b), (n_boot, len(b)), generator=g)].quantile(0.5, dim=1)
    mv = v[torch.randint(len(v), (n_boot, len(v)), generator=g)].quantile(0.5, dim=1)
    qs = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    lo, hi = torch.quantile(mb / mv, qs).tolist()
    return lo, hi


# ----------------------------------------------------------------------------- variants


def _variant_fn(variant, cfg, inp):
    """(callable, valid pairs) for one variant on one configuration, or None if n/a."""
    made = _variant(variant, cfg, inp)
    return None if made is None else (made["fn"], made["pairs"])


def _variant(variant, cfg, inp, user: UserVariant | None = None):
    """One variant on one configuration: ``fn`` (the timed call), ``pairs`` (valid pairs),
    ``ref`` (a call computing the PyTorch reference of the variant's kind on the same inputs
    in float32 on a GPU, float64 on the CPU; None for sdpa), ``ref_key`` (variants sharing a
    key share that reference) and ``sel`` (the block selection of a block-sparse variant,
    the one its output is compared on); None if the variant does not apply. ``user``: the
    variant is yours, called where and as ``triton_dense`` is."""
    import torch

    from . import api, reference

    kind = cfg["kind"]
    q, k, v, off = inp["q"], inp["k"], inp["v"], inp["seq_offsets"]
    kw = dict(max_seq_len=inp["max_seq_len"], alpha=inp["alpha"], num_targets=inp["num_targets"])
    backend = "triton"
    hi = torch.float64 if q.device.type == "cpu" else torch.float32

    def up(*xs):
        return [x.to(hi) for x in xs]

    if kind == "cached" and (user is not None or variant in ("triton_dense", "reference")):
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
        f = user.fn if user is not None else api.hstu_attention if variant == "triton_dense" else \
            reference.hstu_attention_reference
        extra = {} if user is not None else dict(validate=False, backend=backend) if variant == "triton_dense" else \
            dict(validate=False)
        return dict(fn=lambda: f(fq, fk, fv, foff, **kw, **extra), pairs=pairs, ref_key="full",
                    ref=lambda: reference.hstu_attention_reference(*up(fq, fk, fv), foff, validate=False, **kw))
    dense = dict(pairs=dense_valid_pairs(inp["lengths"], inp["nt"]), ref_key="dense",
                 ref=lambda: reference.hstu_attention_reference(*up(q, k, v), off, validate=False, **kw))
    if user is not None:
        return dict(dense, fn=lambda: user.fn(q, k, v, off, **kw))
    if variant == "triton_dense":
        return dict(dense, fn=lambda: api.hstu_attention(q, k, v, off, validate=False, backend=backend, **kw))
    if variant == "triton_dense_default":
        # as a new user calls it: validation on, backend chosen automatically
        return dict(dense, fn=lambda: api.hstu_attention(q, k, v, off, **kw))
    if variant == "peer":
        # the public Triton kernel of meta-recsys/generative-recommenders, when importable
        # (put its checkout on PYTHONPATH); same inputs, same mask, its own autotuning
        try:
            from generative_recommenders.ops.triton.triton_hstu_attention import triton_hstu_mha
        except ImportError as exc:
            raise RuntimeError("generative_recommenders is not importable (add its checkout to PYTHONPATH)") from exc
        N = inp["max_seq_len"]
        return dict(dense, fn=lambda: triton_hstu_mha(N, inp["alpha"], q, k, v, off, inp["num_targets"]))
    if variant == "reference":
        return dict(dense, fn=lambda: reference.hstu_attention_reference(q, k, v, off, validate=False, **kw))
    if variant == "sdpa":
        if cfg["d_qk"] != cfg["d_v"] or cfg.get("jagged"):
            return None
        B, N, H = cfg["B"], cfg["N"], cfg["H"]
        qs, ks, vs = (x.view(B, N, H, -1).transpose(1, 2) for x in (q, k, v))
        fn = lambda: torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True)  # noqa: E731
        return dict(fn=fn, pairs=B * N * (N + 1) // 2, ref=None, ref_key=None)
    bkw = dict(block_size=cfg.get("bs", 32), block_counts=cfg.get("counts", 4))
    if variant in ("triton_block_sparse", "reference_block_sparse"):
        if variant == "triton_block_sparse":
            def fn(**extra):
                return api.hstu_attention_block_sparse(q, k, v, off, validate=False, backend=backend, **kw, **bkw,
                                                       **extra)
        else:
            def fn(**extra):
                return reference.hstu_attention_block_sparse_reference(q, k, v, off, validate=False, **kw, **bkw,
                                                                       **extra)
        _, sel = fn(return_block_indices=True)
        pairs = _bsa_pairs(sel, inp["lengths"], inp["nt"], bkw["block_size"], cfg["H"]) // cfg["H"]
        return dict(fn=fn, pairs=pairs, sel=sel, ref_key=None,
                    ref=lambda: reference.hstu_attention_block_sparse_reference(
                        *up(q, k, v), off, validate=False, block_indices=sel, **kw, **bkw))
    if variant in ("triton_cached", "reference_cached"):
        from .cache import PagedKVCache

        C, n = cfg["cache"], cfg["new"]
        lens = torch.full((cfg["B"],), C + n, dtype=torch.int64)
        pairs = dense_valid_pairs(lens, inp["nt"]) - dense_valid_pairs(torch.full((cfg["B"],), C), torch.zeros(cfg["B"], dtype=torch.int64))
        c = inp["cache"]

        def ref():
            c_hi = PagedKVCache(c.k_cache.to(hi), c.v_cache.to(hi), c.page_table, c.cache_lens, c.page_size)
            return reference.hstu_attention_cached_reference(*up(q, k, v), off, c_hi, validate=False, **kw)

        if variant == "triton_cached":
            return dict(fn=lambda: api.hstu_attention_cached(q, k, v, off, c, validate=False, backend=backend, **kw),
                        pairs=pairs, ref=ref, ref_key="cached")
        return dict(fn=lambda: reference.hstu_attention_cached_reference(q, k, v, off, c, validate=False, **kw),
                    pairs=pairs, ref=ref, ref_key="cached")
    raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")


# ----------------------------------------------------------------------------- your variants


@dataclass(frozen=True)
class UserVariant:
    """A kernel of yours benchmarked beside ours: ``fn`` is called as
    ``tracekit.kernels.api.hstu_attention`` is, ``fn(q, k, v, seq_offsets, max_seq_len=,
    alpha=, num_targets=)`` (q, k [tokens, H, d_qk], v [tokens, H, d_v], a jagged batch;
    ``num_targets`` [B] or None), and returns the output [tokens, H, d_v]. It runs on every
    configuration, as ``triton_dense`` does (a cached one: attention over cache and new tokens
    recomputed), is timed, checked against the dense reference and can be the baseline.
    ``source``: where it came from (``FILE.py:FUNCTION``, ``MODULE:FUNCTION``)."""

    name: str
    fn: Callable
    source: str


#: how a variant of yours is called, in the errors that say it
USER_CALL = "fn(q, k, v, seq_offsets, max_seq_len=, alpha=, num_targets=), as tracekit.kernels.api.hstu_attention"


#: a name of yours: a word (it keys the rows, ``config/variant`` in a diff, and the NVTX range)
_USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def resolve_variants(variants, baseline) -> tuple[list[str], str, dict[str, UserVariant]]:
    """The variants' and the baseline's names, and the variants of yours among them. An item is
    one of ``VARIANTS``, a variant of yours (``NAME=FILE.py:FUNCTION``, ``NAME=MODULE:FUNCTION``
    with MODULE importable, without ``NAME=`` named as its function, or a ``(name, callable)``
    pair), or, for the baseline, also the name of one of yours given in ``variants``. Each of
    yours is named, then loaded, its call checked against ``USER_CALL``: a ``ParamError``
    naming the item, before anything runs. One source given twice is one variant."""
    from tracekit.errors import ParamError

    user: dict[str, UserVariant] = {}
    by_source: dict[str, str] = {}  # (a function given twice, as a variant and as the baseline: one variant)

    def one(item, flag: str) -> str:
        if isinstance(item, str) and (item.strip() in VARIANTS or (flag == "--baseline" and item.strip() in user)):
            return item.strip()
        said = f"{flag} {item!r}"
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and callable(item[1]):
            name, fn = item
            source = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"
        elif isinstance(item, str) and ":" in item:
            name, eq, source = item.partition("=")
            if not eq or any(c in name for c in "/:"):  # (FILE.py:FUNCTION alone, a=b/f.py too: named as its function)
                name, source = item.rpartition(":")[2].rpartition(".")[2], item
            source, fn = source.strip(), None
        else:
            raise ParamError(f"{said}: unknown variant; known: {', '.join(VARIANTS)}; or yours: "
                             "NAME=FILE.py:FUNCTION or NAME=MODULE:FUNCTION")
        name = name.strip()
        if source in by_source:
            return by_source[source]
        if not _USER_NAME.fullmatch(name):
            raise ParamError(f"{said}: the name {name!r} is not a word (letters, digits, _ . -); give "
                             "NAME=FILE.py:FUNCTION")
        if name in VARIANTS or name in user:
            raise ParamError(f"{said}: {name!r} names {'one of ours' if name in VARIANTS else 'another of yours'}"
                             "; give yours another name (NAME=...)")
        fn = fn or _load_user(source, said)
        _check_call(fn, said)
        user[name] = UserVariant(name, fn, source)
        by_source[source] = name
        return name

    names = list(dict.fromkeys(one(v, "--variants") for v in variants))
    return names, one(baseline, "--baseline"), user


def _load_user(target: str, said: str) -> Callable:
    """The function ``target`` names (``FILE.py:FUNCTION`` or ``MODULE:FUNCTION``, MODULE
    importable from ``sys.path``; FUNCTION may be ``Class.method``). A file is run as a module of
    its own with its folder put on ``sys.path`` for the rest of the process (as ``python FILE`` has
    it: what it imports beside it, at load or at a call, is found); one that fails to load leaves
    no module behind."""
    import importlib
    import importlib.util

    from tracekit.errors import ParamError

    where, _, attr = target.rpartition(":")
    if not where or not attr:
        raise ParamError(f"{said}: give FILE.py:FUNCTION or MODULE:FUNCTION")
    try:
        if where.endswith(".py") or "/" in where:
            path = Path(where).expanduser()
            if not path.is_file():
                raise ParamError(f"{said}: {where}: no such file")
            name = f"tracekit_variant_{abs(hash(str(path.resolve())))}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            folder = str(path.resolve().parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            sys.modules[name] = module  # (what the module defines may look itself up: dataclasses, pickle)
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
        else:
            module = importlib.import_module(where)
    except ParamError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module: any failure is said in one line
        raise ParamError(f"{said}: {where} could not be loaded ({_one_line(exc)})") from None
    fn = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise ParamError(f"{said}: {where} has no {attr}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise ParamError(f"{said}: {where}'s {attr} is a {type(fn).__name__}, not a function")
    return fn


def _check_call(fn: Callable, said: str) -> None:
    """That ``fn`` takes ``USER_CALL``'s arguments (where Python can tell: not for every builtin)."""
    import inspect

    from tracekit.errors import ParamError

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(None, None, None, None, max_seq_len=1, alpha=1.0, num_targets=None)
    except TypeError as err:
        raise ParamError(f"{said}: cannot be called as {USER_CALL} is (its arguments: {sig}; {err})") from None


def _tolerance(dtype: str, device: str) -> float:
    """The kernel tests' relative tolerance for a dtype (tests/test_kernels_hstu.py's TOL):
    fp32 is exact to 1e-4 on the CPU, TF32 products on a GPU."""
    if dtype == "fp32":
        return 2e-3 if device == "cuda" else 1e-4
    return {"fp16": 3e-3, "bf16": 2e-2}[dtype]


def _reference_selection(cfg, inp):
    """The block selection of the block-sparse reference computed in float32/float64
    (pool, importances, top-k of ``reference``), [B, H, nqb, block_counts + 1]."""
    import torch

    from . import reference

    q, k, off = inp["q"], inp["k"], inp["seq_offsets"]
    hi = torch.float64 if q.device.type == "cpu" else torch.float32
    bs, counts = cfg.get("bs", 32), cfg.get("counts", 4)
    nb = -(-inp["max_seq_len"] // bs)
    kbar = reference.bsa_pool(k.to(hi), off, bs, nb)
    imp = reference.bsa_importance(q.to(hi), kbar, off, inp["num_targets"], alpha=inp["alpha"], block_size=bs,
                                   n_blocks=nb)[0]
    return reference.bsa_select(imp, inp["lengths"].to(q.device), inp["num_targets"], block_size=bs,
                                block_counts=counts)


def _selection_agreement(sel, ref_sel, lengths, bs: int) -> float:
    """Share of the (sequence, head, query block) rows of real query blocks whose selected
    blocks, as a set, are the reference's."""
    import torch

    a, b = sel.long().sort(dim=-1).values, ref_sel.long().to(sel.device).sort(dim=-1).values
    same = (a == b).all(dim=-1)  # [B, H, nqb]
    nqb = same.shape[2]
    real = (torch.arange(nqb, device=same.device).view(1, 1, -1) * bs
            < lengths.to(same.device).view(-1, 1, 1)).expand_as(same)
    n = int(real.sum())
    return float(same[real].sum()) / n if n else 1.0


def _check(made, out, refs, tol) -> dict:
    """The error columns of one variant's output against its reference (``refs``: the
    references computed so far for this configuration, by key; filled here)."""
    import torch

    key = made.get("ref_key")
    ref = refs.get(key) if key else None
    if ref is None:
        ref = made["ref"]()
        if key:
            refs[key] = ref
    o, r = out.double(), ref.double()
    if not bool(torch.isfinite(o).all()):
        err, rel = math.inf, math.inf
    else:
        den = float(r.norm())
        err = float((o - r).abs().max()) if o.numel() else 0.0
        rel = float((o - r).norm()) / den if den > 0 else float(o.norm())
    return dict(max_abs_err=err, rel_err=rel, err_tol=tol, matches_reference=rel < tol)


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
    on_skip=None,
    gpu_delay: bool = True,
) -> list[dict]:
    """Benchmark HSTU attention variants on named (or inline) configurations.

    Returns one dict per (configuration, variant) measured. A variant that cannot run on a
    configuration (``skip_reason``) is skipped and said before the first measurement:
    ``on_skip(config, variant, reason)`` for each pair, by default one line per variant on
    stderr (``skip_lines``); every pair is listed under ``skipped`` in the JSON. If no variant
    asked for runs on any configuration, that is a ``ParamError``; a kernels' tuning file that
    cannot be read, a ``tiles.TilesFileError``. A variant that fails (e.g. out of memory) gives a row with ``error`` set
    and no timings; a failed correctness check, ``check_error``.

    ``speedup_vs_baseline`` is the baseline's median over the variant's median (same
    configuration, same process), ``speedup_low``/``speedup_high`` its 95 % bootstrap
    interval (``speedup_interval``); the baseline is timed even if absent from ``variants``
    (its rows are then not returned). The error columns (``max_abs_err``, ``rel_err``,
    ``err_tol``, ``matches_reference``, block-sparse ``sel_agree``): see the module's docstring.
    The JSON holds every column, ``samples_ms`` (the per-call times) too; the CSV all but
    ``samples_ms``.

    On a GPU each timed call is preceded by a GPU-side delay (``gpu_delay_ms``; module
    docstring) so that the events time the GPU only; ``gpu_delay=False`` times without it (the
    GPU's wait for a slow host is then timed too), for comparison. ``host_ms`` is the host's
    median enqueue time of one call, ``late_calls`` the timed calls the delay did not cover.
    """
    names = list(configs) if configs else list(DEFAULT_CONFIGS)
    variants, baseline, user = _check_args(names, variants, baseline, dtype, warmup_ms, rep_ms, json_path, csv_path)
    from .tiles import read_file

    read_file()  # (a tuning file the kernels cannot read: refused, not every row's error)
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    _check_interpreted_dtype(device, dtype, variants, baseline)
    plans, skipped = _plan(names, variants, baseline)
    if on_skip is None:
        for line in skip_lines(skipped):
            print(line, file=sys.stderr, flush=True)
    else:
        for s in skipped:
            on_skip(s["config"], s["variant"], s["reason"])

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device=device) if device == "cuda" else None
    tol = _tolerance(dtype, device)
    meta = _environment(device)
    max_khz = None
    if device == "cuda":
        max_khz = _max_sm_khz()
        meta["timing"] = dict(gpu_delay=gpu_delay, delay_factor=GPU_DELAY_FACTOR, delay_floor_ms=GPU_DELAY_FLOOR_MS,
                              delay_cap_ms=GPU_DELAY_CAP_MS, host_probe_calls=HOST_PROBE_CALLS,
                              sm_clock_max_khz=max_khz)
    rows: list[dict] = []
    for name, cfg, todo in plans:
        inp = _make_inputs(cfg, dt, device)
        cfg_rows = {}
        refs: dict = {}  # the precise references of this configuration, by kind
        ref_sel = None
        for variant in todo:
            row = dict(config=name, kind=cfg["kind"], variant=variant, B=cfg["B"], N=cfg["N"], H=cfg["H"],
                       d_qk=cfg["d_qk"], d_v=cfg["d_v"], tokens=int(inp["lengths"].sum()), dtype=dtype,
                       device=meta["device_name"], block_size=cfg.get("bs") if cfg["kind"] == "bsa" else None,
                       block_counts=cfg.get("counts") if cfg["kind"] == "bsa" else None,
                       cache_len=cfg.get("cache"), new_len=cfg.get("new"), error=None,
                       max_abs_err=None, rel_err=None, err_tol=None, matches_reference=None, sel_agree=None,
                       check_error=None, host_ms=None, gpu_delay_ms=None, late_calls=None,
                       **({"source": user[variant].source} if variant in user else {}))
            try:
                made = _variant(variant, cfg, inp, user.get(variant))
                fn, pairs = made["fn"], made["pairs"]
                if device == "cuda":
                    res = _time_cuda(fn, f"attention:{variant}:{name}", warmup_ms, rep_ms, flush,
                                     delay=gpu_delay, max_khz=max_khz)
                else:
                    res = _time_cpu(fn, warmup_ms, rep_ms)
                flops = 2.0 * cfg["H"] * (cfg["d_qk"] + cfg["d_v"]) * pairs
                row.update(res, valid_pairs=pairs, flops=flops, tflops=flops / (res["median_ms"] * 1e-3) / 1e12)
            except Exception as exc:  # noqa: BLE001 - recorded in the row, e.g. out of memory
                row["error"] = _one_line(exc)
                made = None
                if device == "cuda":
                    torch.cuda.empty_cache()
            if made is not None and made.get("ref") is not None:
                # after the timing: one more call of the timed function, against the reference
                try:
                    row.update(_check(made, fn(), refs, tol))
                    if made.get("sel") is not None:
                        if ref_sel is None:
                            ref_sel = _reference_selection(cfg, inp)
                        row["sel_agree"] = _selection_agreement(made["sel"], ref_sel, inp["lengths"], cfg["bs"])
                except Exception as exc:  # noqa: BLE001 - recorded in the row, e.g. out of memory
                    row["check_error"] = _one_line(exc)
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
            if not ok:
                row["speedup_low"] = row["speedup_high"] = None
            elif variant == baseline:
                row["speedup_low"] = row["speedup_high"] = 1.0
            else:
                row["speedup_low"], row["speedup_high"] = speedup_interval(base["samples_ms"], row["samples_ms"])
            if variant in variants:
                rows.append(row)
        del inp, refs, ref_sel
        if device == "cuda":
            torch.cuda.empty_cache()
    from tracekit.outputs import text_file, text_output, write_output

    if json_path:
        sources = {"variant_sources": {n: u.source for n, u in user.items()}} if user else {}
        text = json.dumps(dict(environment=meta, warmup_ms=warmup_ms, rep_ms=rep_ms, baseline=baseline,
                               dtype=dtype, err_tol=tol, skipped=skipped, **sources, results=rows), indent=2)

        def write_json(tmp):
            with text_file(tmp, gz=text_output(json_path, *_JSON)) as f:
                f.write(text)

        write_output(json_path, write_json)
    if csv_path:
        keys = [k for k in dict.fromkeys(k for r in rows for k in r) if k != "samples_ms"]

        def write_csv(tmp):
            with text_file(tmp, gz=text_output(csv_path, *_CSV)) as f:
                w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
                w.writeheader()
                w.writerows(rows)

        write_output(csv_path, write_csv)
    return rows


def _one_line(exc: Exception) -> str:
    text = str(exc).splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


#: what --json and --csv write, and a name for each: gzip-compressed where the name ends in .gz
_JSON = ("the JSON of tracekit bench", "bench.json")
_CSV = ("the CSV of tracekit bench", "bench.csv")


def _check_args(names, variants, baseline, dtype, warmup_ms, rep_ms, json_path, csv_path
                ) -> tuple[list[str], str, dict[str, UserVariant]]:
    """Every argument checked before the first measurement (a run of the standard set
    takes minutes): ``ParamError``, one line naming the value. Returns the variants' and the
    baseline's names and the variants of yours (``resolve_variants``, after every other check:
    it runs their files)."""
    from tracekit.errors import ParamError
    from tracekit.outputs import check_output, text_output

    if not list(variants):
        raise ParamError("--variants: name at least one variant; known: " + ", ".join(VARIANTS))
    if dtype not in ("bf16", "fp16", "fp32"):
        raise ParamError(f"--dtype {dtype!r}: choose bf16, fp16 or fp32")
    for flag, value in (("--warmup-ms", warmup_ms), ("--rep-ms", rep_ms)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value >= 0):
            raise ParamError(f"{flag} {value!r}: must be a finite number of milliseconds >= 0")
    runnable = False
    for spec in names:
        try:
            cfg = parse_config(spec)[1]
            kind = cfg["kind"]
            if kind not in _KIND_VARIANTS:
                raise ValueError(f"kind={kind}: choose {', '.join(_KIND_VARIANTS)}")
        except (ValueError, KeyError) as err:
            what = f"unknown configuration; named ones: {', '.join(CONFIGS)}" if "=" not in spec else \
                f"not an inline configuration ({err!s}); give B=..,N=..[,H=..,d=..]"
            raise ParamError(f"--config {spec!r}: {what}") from None
        runnable |= any(skip_reason(v, cfg) is None for v in variants)  # (one of yours runs on every one)
    if not runnable:
        first = parse_config(names[0])[1]
        raise ParamError(f"--variants {','.join(variants)}: none runs on the configurations asked for "
                         f"({names[0]}: {skip_reason(next(iter(variants)), first)})")
    for path, (what, example) in ((json_path, _JSON), (csv_path, _CSV)):
        if path:
            text_output(path, what, example)  # (a name that says another format is an error)
            check_output(path)
    return resolve_variants(variants, baseline)  # (last: it runs the files of yours)


def _check_interpreted_dtype(device: str, dtype: str, variants, baseline: str) -> None:
    """On the CPU the Triton variants run only in Triton's interpreter (TRITON_INTERPRET=1):
    without it a ParamError, not a table of rows each with that error in its place; and the
    interpreter computes bfloat16 on its bit patterns (a limitation Triton documents; its
    ``tl.dot`` of bfloat16 gives values near 1e10, triton-lang/triton#11584): bf16 there is a
    ParamError, not a table of MISMATCH rows."""
    from tracekit.errors import ParamError

    from ._common import interpret_mode

    triton = [v for v in dict.fromkeys([*variants, baseline]) if v.startswith("triton_") or v == "peer"]
    if device == "cpu" and triton and not interpret_mode():
        raise ParamError(f"--variants: on the CPU, {', '.join(triton)} run only in Triton's interpreter: set "
                         "TRITON_INTERPRET=1 before tracekit starts (a check of the kernels, far slower than a GPU's "
                         "times), run on a GPU, or ask for variants of PyTorch (reference, sdpa)")
    if device == "cpu" and dtype == "bf16" and triton:
        raise ParamError(f"--dtype bf16: on the CPU, {', '.join(triton)} run in Triton's interpreter, which does "
                         "not compute bfloat16 (its results are garbage); give --dtype fp16 or fp32 here, or run on "
                         "a GPU")


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


def _fmt_err(x) -> str:
    return "" if x is None else "inf" if math.isinf(x) else f"{x:.1e}"


def _check_cell(r) -> str:
    """ok / MISMATCH (beyond the dtype's tolerance) / check failed, with the block-sparse
    selection's agreement with the precise reference."""
    if r.get("check_error"):
        return "check failed: " + r["check_error"][:40]
    m = r.get("matches_reference")
    if m is None:
        return ""
    cell = "ok" if m else "MISMATCH"
    if r.get("sel_agree") is not None:
        cell += f" sel {100 * r['sel_agree']:.0f}%"
    return cell


def speedup_summary(results: list[dict], baseline: str) -> list[str]:
    """Per variant other than ``baseline`` timed on more than one configuration: the
    geometric mean of its speedups over them, and its smallest and largest with their
    configurations (the BSA seed's mean, min and max speedup)."""
    per: dict[str, list[tuple[float, str]]] = {}
    for r in results:
        sp = r.get("speedup_vs_baseline")
        if r["variant"] != baseline and sp:
            per.setdefault(r["variant"], []).append((sp, r["config"]))
    lines = []
    for variant, sps in per.items():
        if len(sps) < 2:
            continue
        mean = math.exp(sum(math.log(x) for x, _ in sps) / len(sps))
        (lo, lo_cfg), (hi, hi_cfg) = min(sps), max(sps)
        lines.append(f"{variant} vs {baseline} over {len(sps)} configurations: geometric mean {mean:.2f}x, "
                     f"min {lo:.2f}x ({lo_cfg}), max {hi:.2f}x ({hi_cfg})")
    return lines


def format_table(results: list[dict]) -> str:
    """A fixed-width table: configuration, variant, median/p95 ms, the host's enqueue ms per
    call, TFLOP/s, speedup and its 95 % interval, the errors against the reference, peak MB;
    below it, the rows with late calls (``late_calls``)."""
    head = ["config", "variant", "median_ms", "p95_ms", "host_ms", "TFLOP/s", "speedup", "95%_interval",
            "rel_err", "max_abs_err", "check", "peak_MB"]
    lines = []
    for r in results:
        if r.get("error"):
            lines.append([r["config"], r["variant"], "error: " + r["error"][:60]] + [""] * (len(head) - 3))
            continue
        sp = r.get("speedup_vs_baseline")
        lo, hi = r.get("speedup_low"), r.get("speedup_high")
        pk = r.get("peak_alloc_mb")
        hm = r.get("host_ms")
        lines.append([r["config"], r["variant"], f"{r['median_ms']:.4f}", f"{r['p95_ms']:.4f}",
                      "" if hm is None else f"{hm:.4f}", f"{r['tflops']:.1f}", "" if sp is None else f"{sp:.2f}x",
                      "" if lo is None else f"[{lo:.2f}, {hi:.2f}]", _fmt_err(r.get("rel_err")),
                      _fmt_err(r.get("max_abs_err")), _check_cell(r), "" if pk is None else f"{pk:.0f}"])
    widths = [max(len(h), *(len(str(x[i])) for x in lines)) if lines else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for x in lines:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(x, widths, strict=True)).rstrip())
    yours = {r["variant"]: r["source"] for r in results if r.get("source")}
    if yours:
        out.append("yours: " + ", ".join(f"{name} = {source}" for name, source in yours.items()))
    base = next((r.get("baseline") for r in results if r.get("baseline")), None)
    if base:
        out.append(f"speedup = median({base}) / median(variant), same process; 95% interval: bootstrap of both "
                   "sets of per-call times")
        out += speedup_summary(results, base)
    tol = next((r["err_tol"] for r in results if r.get("err_tol") is not None), None)
    if tol is not None:
        out.append(f"rel_err = ||out - ref|| / ||ref|| against the PyTorch reference of the variant's kind (same "
                   f"inputs, float32 on a GPU, float64 on the CPU); MISMATCH: rel_err >= {tol:g} "
                   f"({results[0]['dtype']}); sel: block selections equal to the reference's")
    if any(r.get("host_ms") is not None for r in results):
        out.append("host_ms: the host's median time to enqueue one call; above median_ms, back-to-back calls "
                   "are bound by the host")
    late = [r for r in results if r.get("late_calls")]
    if late:
        out.append(f"{len(late)} row{'s' if len(late) != 1 else ''} with calls the GPU reached before the host had "
                   "enqueued them (late_calls; their times may hold host time): "
                   + ", ".join(f"{r['config']} {r['variant']} {r['late_calls']}/{r['n_rep']}" for r in late[:6])
                   + (", ..." if len(late) > 6 else ""))
    bad = sum(1 for r in results if r.get("matches_reference") is False or r.get("check_error"))
    if bad:
        out.append(f"{bad} row{'s' if bad != 1 else ''} failed the correctness check")
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
    p.add_argument("--no-gpu-delay", action="store_true", help="no GPU-side delay before each timed call (the "
                   "GPU's wait for a slow host is then timed too; for comparison)")
    p.add_argument("--list", action="store_true", help="list the named configurations and exit")
    a = p.parse_args(argv)
    if a.list:
        for name, cfg in CONFIGS.items():
            print(f"{name:22s} {cfg['kind']:7s} B={cfg['B']} N={cfg['N']} H={cfg['H']} d={cfg['d_qk']}/{cfg['d_v']}"
                  f"  {cfg.get('note', '')}")
        return 0
    from tracekit.errors import ParamError

    configs = [c.strip() for spec in (a.config or []) for c in spec.split(";") if c.strip()]
    if a.config and not configs:  # (an empty value is no configuration, not the standard set)
        raise ParamError(f"--config {a.config[0]!r}: no configuration; name one (--list) or leave --config out for "
                         "the standard set")
    twice = next((c for i, c in enumerate(configs) if c in configs[:i]), None)
    if twice is not None:
        raise ParamError(f"--config: {twice!r} given twice; give each configuration once")
    configs = configs or None
    if a.json and a.csv and os.path.abspath(a.json) == os.path.abspath(a.csv):  # (the CSV would replace the JSON)
        raise ParamError(f"--json and --csv name one file ({a.json}); give each its own")
    rows = bench_attention(configs, variants=tuple(a.variants.split(",")), baseline=a.baseline, dtype=a.dtype,
                           warmup_ms=a.warmup_ms, rep_ms=a.rep_ms, json_path=a.json, csv_path=a.csv,
                           device=a.device, gpu_delay=not a.no_gpu_delay, progress=lambda r: print(f"  {r['config']} {r['variant']}: "
                           + (r['error'] or f"{r['median_ms']:.4f} ms {_check_cell(r)}"), file=sys.stderr,
                           flush=True))
    print(format_table(rows))
    if rows and all(r.get("error") for r in rows):  # (nothing measured: a failure, though each row says why)
        print("tracekit: bench: no measurement succeeded; each row above says why", file=sys.stderr)
        return 1
    return 0


def cli(argv: list[str] | None = None) -> int:
    """``python -m tracekit.kernels.bench``: ``main``, with a bad argument said in one line
    (exit 2) as the tracekit CLI says it (``tracekit bench attention`` calls ``main``)."""
    from tracekit.errors import TracekitError

    try:
        return main(argv)
    except (TracekitError, ValueError) as err:
        print(f"python -m tracekit.kernels.bench: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(cli())
