"""Timing of end-to-end requests and their summary statistics.

``run_requests`` follows ``triton.testing.do_bench``: warm-up by a time budget that starts
once the first request (the cache-miss prefill, the kernels' compilation) is done, with at
least two more (steady-state requests, out of the timed set), an L2 flush before every request outside the timed window, CUDA events
around each request on a GPU (``time.perf_counter`` on CPU), then ``iters`` timed
requests. Peak memory is reset before and read after each request (GPU only).
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracekit.numbers import quantile

REQUEST_COLUMNS = ("request_idx", "phase", "bs", "nc", "kv_caches", "candidate_embeddings",
                   "latency_ms", "peak_mem_allocated_mb", "peak_mem_reserved_mb", "model_flop", "attention_flop")
L2_FLUSH_BYTES = 256 << 20


@dataclass
class RequestRow:
    request_idx: int
    phase: str  # 'warmup' | 'timed'
    bs: int
    nc: int
    kv_caches: int
    candidate_embeddings: int
    latency_ms: float
    peak_mem_allocated_mb: float | None  # None on CPU (not tracked)
    peak_mem_reserved_mb: float | None
    model_flop: int | None = None  # the request's floating-point work (model.request_flop)
    attention_flop: int | None = None  # its attention's part

    def as_csv(self) -> list[str]:
        def num(x):
            return "" if x is None else repr(float(x))

        return [str(self.request_idx), self.phase, str(self.bs), str(self.nc), str(self.kv_caches),
                str(self.candidate_embeddings), repr(float(self.latency_ms)),
                num(self.peak_mem_allocated_mb), num(self.peak_mem_reserved_mb),
                "" if self.model_flop is None else str(self.model_flop),
                "" if self.attention_flop is None else str(self.attention_flop)]


class RequestsCsv:
    """``requests.csv`` written row by row and flushed, so an interrupted run keeps its rows."""

    def __init__(self, path: Path):
        self._f = open(path, "w", newline="", encoding="utf-8")
        self._w = csv.writer(self._f)
        self._w.writerow(REQUEST_COLUMNS)
        self._f.flush()

    def write(self, row: RequestRow) -> None:
        self._w.writerow(row.as_csv())
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def latency_stats(latencies_ms: list[float]) -> dict[str, float | int]:
    xs = sorted(latencies_ms)
    n = len(xs)
    return {
        "requests": n,
        "median_ms": quantile(xs, 0.5),
        "p95_ms": quantile(xs, 0.95),
        "p99_ms": quantile(xs, 0.99),
        "mean_ms": sum(xs) / n if n else math.nan,
        "min_ms": xs[0] if n else math.nan,
        "max_ms": xs[-1] if n else math.nan,
    }


#: warm-up requests after the first, whatever the budget
MIN_WARMUP_AFTER_FIRST = 2


def run_requests(workload, *, warmup_ms: float, iters: int, flush_l2: bool = True,
                 on_row: Callable[[RequestRow, str], None] | None = None,
                 before_timed: Callable[[], None] | None = None,
                 after_timed: Callable[[], None] | None = None,
                 between: Callable[[int], None] | None = None) -> list[RequestRow]:
    """Warm up, then time ``iters`` requests of ``workload``; returns every row. Warm-up is
    the first request, then requests until ``warmup_ms`` has passed since it ended (at least
    ``MIN_WARMUP_AFTER_FIRST``).

    ``on_row(row, line)`` sees each request as it finishes (``line`` is the seed's log
    line); ``before_timed``/``after_timed`` bracket the timed requests (profiler
    start/stop); ``between(one)`` runs after warm-up, before the timed requests, and may
    call ``one(phase)`` to run extra requests (the ncu-profiled request, inside its NVTX
    range, recorded as phase ``warmup`` so it never enters the timed statistics).
    """
    import torch

    cuda = workload.device.type == "cuda"
    flush_buf = (torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=workload.device)
                 if cuda and flush_l2 else None)
    rows: list[RequestRow] = []

    def one(phase: str) -> RequestRow:
        if flush_buf is not None:
            flush_buf.zero_()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            res = workload.request()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
            alloc = torch.cuda.max_memory_allocated() / 2**20
            reserved = torch.cuda.max_memory_reserved() / 2**20
        else:
            t0 = time.perf_counter()
            res = workload.request()
            ms = (time.perf_counter() - t0) * 1e3
            alloc = reserved = None
        row = RequestRow(len(rows), phase, workload.bs, workload.nc, res.kv_caches,
                         res.candidate_embeddings, ms, alloc, reserved, res.model_flop, res.attention_flop)
        rows.append(row)
        if on_row is not None:
            on_row(row, res.line(ms))
        return row

    # The budget counts from the end of the first request, which compiles the kernels (Triton's
    # JIT, cuBLAS's heuristics) and makes the first allocations: a first request longer than the
    # budget left one more before the timed requests, a GPU still at its idle clock.
    one("warmup")
    t0 = time.perf_counter()
    while len(rows) < 1 + MIN_WARMUP_AFTER_FIRST or (time.perf_counter() - t0) * 1e3 < warmup_ms:
        one("warmup")
    if between is not None:
        between(one)
    if before_timed is not None:
        before_timed()
    try:
        for _ in range(iters):
            one("timed")
    finally:
        if after_timed is not None:
            after_timed()
    return rows
