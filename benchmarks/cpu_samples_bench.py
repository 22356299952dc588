"""Benchmark of nsys's CPU samples (nsys --sample=process-tree): ingest and queries.

Builds an export from the real `nsys_cpu_hot` fixture (H200: 2,487 samples on 4 threads over
4.2 s, 5,968 stack frames, 2,832 schedulings, 2,400 NVTX ranges) whose COMPOSITE_EVENTS,
SAMPLING_CALLCHAINS, SCHED_EVENTS and NVTX_EVENTS are replicated ``--copies`` times with shifted
timestamps and fresh sample ids (400 copies: ~1 M samples and 2.4 M frames, half an hour of one
busy thread at nsys's default 2 ms), and a twin export without the sampling and scheduling
tables: the baseline, ingested in the same process. Then
cpu-hotspots (bottom-up, callers first, one thread, one NVTX range), cpu-threads, cpu-stacks
(every stack), nvtx-cpu, diff's cpu scope and its NVTX paths' samples on the large run, best of
``--repeat``.

Usage: python benchmarks/cpu_samples_bench.py [--copies 400] [--repeat 3] [--workdir DIR]
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

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "data" / "nsys_cpu_hot" / "export.sqlite.xz"


def build(work: Path, copies: int) -> tuple[Path, Path]:
    """(the export with ``copies`` x the fixture's samples and NVTX ranges, the same without samples)."""
    big, bare = work / "sampled.sqlite", work / "bare.sqlite"
    con = unpacked(FIXTURE, big)
    lo, hi = con.execute("SELECT min(start), max(start) FROM (SELECT start FROM COMPOSITE_EVENTS UNION ALL "
                         "SELECT start FROM SCHED_EVENTS UNION ALL SELECT coalesce(\"end\", start) FROM NVTX_EVENTS)"
                         ).fetchone()
    top = con.execute("SELECT max(id) FROM COMPOSITE_EVENTS").fetchone()[0]
    last = {t: con.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] for t in ("SCHED_EVENTS", "NVTX_EVENTS")}
    span = hi - lo + 10_000_000  # (each copy after the last: no range of one copy around another's samples)
    for i in range(1, copies):
        con.execute("INSERT INTO COMPOSITE_EVENTS (id, start, cpu, threadState, globalTid, cpuCycles) "
                    "SELECT id + ?, start + ?, cpu, threadState, globalTid, cpuCycles FROM COMPOSITE_EVENTS "
                    "WHERE id <= ?", [i * top, i * span, top])
        con.execute("INSERT INTO SAMPLING_CALLCHAINS (id, symbol, module, kernelMode, thumbCode, unresolved, "
                    "specialEntry, originalIP, unwindMethod, stackDepth) SELECT id + ?, symbol, module, kernelMode, "
                    "thumbCode, unresolved, specialEntry, originalIP, unwindMethod, stackDepth FROM SAMPLING_CALLCHAINS "
                    "WHERE id <= ?", [i * top, top])
        con.execute("INSERT INTO SCHED_EVENTS (start, cpu, isSchedIn, globalTid, threadState, threadBlock) "
                    "SELECT start + ?, cpu, isSchedIn, globalTid, threadState, threadBlock FROM SCHED_EVENTS "
                    "WHERE rowid <= ?", [i * span, last["SCHED_EVENTS"]])
        con.execute('INSERT INTO NVTX_EVENTS (start, "end", eventType, rangeId, category, color, text, globalTid, '
                    'endGlobalTid, textId, domainId, uint64Value, int64Value, doubleValue, uint32Value, int32Value, '
                    'floatValue, jsonTextId, jsonText, binaryData) SELECT start + ?, "end" + ?, eventType, rangeId, '
                    'category, color, text, globalTid, endGlobalTid, textId, domainId, uint64Value, int64Value, '
                    'doubleValue, uint32Value, int32Value, floatValue, jsonTextId, jsonText, binaryData '
                    'FROM NVTX_EVENTS WHERE rowid <= ?', [i * span, i * span, last["NVTX_EVENTS"]])
    con.commit()
    con.close()
    twin_without(big, bare, ("COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS", "SCHED_EVENTS"))
    return big, bare


def main() -> None:
    args, work = options(__doc__, 400, "cpu_bench_")
    big, bare = build(work, args.copies)
    samples, frames, sched, ranges = row_counts(big, ("COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS", "SCHED_EVENTS",
                                                      "NVTX_EVENTS"))
    print(f"export: {samples:,} samples, {frames:,} frames, {sched:,} schedulings, {ranges:,} NVTX events "
          f"({big.stat().st_size / 2**20:,.0f} MiB)")

    ingest_ratio(work, bare, big, "samples", samples + frames + sched, args.repeat)

    with tracekit.open(work / "sampled.duckdb", read_only=True) as tk:
        time_queries(tk, [("cpu-hotspots", {}), ("cpu-hotspots", {"order": "total"}),
                          ("cpu-hotspots", {"thread": "hasher"}), ("cpu-hotspots", {"range": "prepare"}),
                          ("cpu-threads", {}), ("cpu-stacks", {"limit": 0}), ("nvtx-cpu", {})], args.repeat)
        t = best(lambda: D._cpu_scope(tk.con, {"base": 1, "new": 1}, 5.0), args.repeat)
        print(f"diff's cpu scope (the large run against itself): {t * 1e3:,.0f} ms")
        t = best(lambda: D._sampled(tk.con, D._sql("samples_nvtx_cpu"), {"base": 1, "new": 1}), args.repeat)
        print(f"diff's NVTX paths' CPU samples (the large run against itself): {t * 1e3:,.0f} ms")
    finish(args, work)


if __name__ == "__main__":
    main()
