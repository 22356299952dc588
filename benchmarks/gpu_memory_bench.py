"""Benchmark of nsys's GPU memory usage events (nsys --cuda-memory-usage=true): ingest and queries.

Builds an export from the real `nsys_mem` fixture (H200: 59 allocations and frees of device,
pinned, managed and static memory, 10 pool events, 130 CUDA API calls, 26 NVTX ranges over 37 ms)
whose memory events, pool events, API calls and NVTX ranges are replicated ``--copies`` times with
shifted timestamps and correlation ids (10,000 copies: 590 k memory events, the allocations of a
program that calls cudaMalloc and cudaMallocAsync thousands of times a second for minutes), and a
twin export without the memory tables: the baseline, ingested in the same process. Then gpu-memory,
gpu-memory-live (at the peak and at the end), nvtx-memory, gpu-memory-timeline (every event) and
diff's memory scope on the large run, best of ``--repeat``.

Usage: python benchmarks/gpu_memory_bench.py [--copies 10000] [--repeat 3] [--workdir DIR]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

from pathlib import Path

from twin_ingest import (
    best,
    finish,
    ingest_ratio,
    options,
    row_counts,
    time_queries,
    twin_without,
    unpacked,
)

import tracekit
from tracekit import diff as D

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "data" / "nsys_mem" / "export.sqlite.xz"
MEMORY_TABLES = ("CUDA_GPU_MEMORY_USAGE_EVENTS", "CUDA_GPU_MEMORY_POOL_EVENTS")


def _copy_rows(con, table: str, shifted: dict[str, str], copies: int, span: int, corr: int) -> None:
    """``table``'s rows ``copies - 1`` times more, each copy's ``shifted`` columns moved on (an
    expression of the column, ``{t}``: the copy's time shift, ``{c}``: its correlation id shift)."""
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    last = con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    for i in range(1, copies):
        exprs = ", ".join(shifted.get(c, f'"{c}"').format(t=i * span, c=i * corr) for c in cols)
        con.execute(f'INSERT INTO {table} ({", ".join(chr(34) + c + chr(34) for c in cols)}) '
                    f"SELECT {exprs} FROM {table} WHERE rowid <= ?", [last])


def build(work: Path, copies: int) -> tuple[Path, Path]:
    """(the export with ``copies`` x the fixture's memory events, API calls and NVTX ranges, the
    same without the memory tables)."""
    big, bare = work / "memory.sqlite", work / "bare.sqlite"
    con = unpacked(FIXTURE, big)
    lo, hi = con.execute('SELECT min(start), max(coalesce("end", start)) FROM (SELECT start, "end" FROM NVTX_EVENTS '
                         'UNION ALL SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL SELECT start, start '
                         "FROM CUDA_GPU_MEMORY_USAGE_EVENTS)").fetchone()
    corr = con.execute("SELECT max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
    span = hi - lo + 1_000_000
    timed = {"start": "start + {t}", "end": '"end" + {t}'}
    called = {**timed, "correlationId": "CASE WHEN correlationId > 0 THEN correlationId + {c} ELSE 0 END"}
    _copy_rows(con, "CUDA_GPU_MEMORY_USAGE_EVENTS", called, copies, span, corr)
    _copy_rows(con, "CUDA_GPU_MEMORY_POOL_EVENTS", called, copies, span, corr)
    _copy_rows(con, "CUPTI_ACTIVITY_KIND_RUNTIME", called, copies, span, corr)
    _copy_rows(con, "NVTX_EVENTS", timed, copies, span, corr)
    con.commit()
    con.close()
    twin_without(big, bare, MEMORY_TABLES)
    return big, bare


def main() -> None:
    args, work = options(__doc__, 10_000, "memory_bench_")
    big, bare = build(work, args.copies)
    events, pools, calls, ranges = row_counts(big, (*MEMORY_TABLES, "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"))
    print(f"export: {events:,} memory events, {pools:,} pool events, {calls:,} CUDA API calls, {ranges:,} NVTX events "
          f"({big.stat().st_size / 2**20:,.0f} MiB)")

    ingest_ratio(work, bare, big, "memory events", events + pools, args.repeat)

    with tracekit.open(work / "memory.duckdb", read_only=True) as tk:
        time_queries(tk, [("gpu-memory", {}), ("gpu-memory-live", {}), ("gpu-memory-live", {"at": "end"}),
                          ("nvtx-memory", {}), ("gpu-memory-timeline", {"limit": 0})], args.repeat)
        t = best(lambda: D._memory_scope(tk.con, {"base": 1, "new": 1}, 5.0), args.repeat)
        print(f"diff's memory scope (the large run against itself): {t * 1e3:,.0f} ms")
    finish(args, work)


if __name__ == "__main__":
    main()
