"""Benchmark of nsys's Python stacks (--python-sampling=true, exported with --include-blobs): ingest
and queries.

Builds an export from the real `nsys_python_hot` fixture (H200: 4,855 samples of the Python thread's
stack, 1,155 distinct stacks, 40 NVTX ranges over 5 s) whose Python sample marks and NVTX ranges
are replicated ``--copies`` times with shifted timestamps (100 copies: 485 k samples, eight minutes
of one thread sampled at nsys's default 1 kHz), and a twin export without the payload schemas
(NVTX_PAYLOAD_SCHEMAS: its marks read as NVTX events but not decoded), the baseline, ingested in the
same process. Then python-stacks and python-hotspots (all samples; inside the NVTX ranges) on the
large run, and diff's python scope of the run against itself (its nvtx scope the baseline), best of
``--repeat``; and `export trace` of each run (the large one's Python samples as slices of a flame
chart over time, the baseline's without them), per event written.

Usage: python benchmarks/python_stacks_bench.py [--copies 100] [--repeat 3] [--workdir DIR]
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
from tracekit.trace import export_trace

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "data" / "nsys_python_hot" / "export.sqlite.xz"


def build(work: Path, copies: int) -> tuple[Path, Path]:
    """(the export with ``copies`` x the fixture's NVTX events, its Python samples among them, the
    same without the payload schemas)."""
    big, bare = work / "python.sqlite", work / "bare.sqlite"
    con = unpacked(FIXTURE, big)
    lo, hi = con.execute('SELECT min(start), max(coalesce("end", start)) FROM NVTX_EVENTS').fetchone()
    span = hi - lo + 1_000_000
    cols = [r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")]
    last = con.execute("SELECT max(rowid) FROM NVTX_EVENTS").fetchone()[0]
    shifted = {"start": "start + {t}", "end": '"end" + {t}'}
    for i in range(1, copies):
        exprs = ", ".join(shifted.get(c, f'"{c}"').format(t=i * span) for c in cols)
        con.execute(f'INSERT INTO NVTX_EVENTS ({", ".join(chr(34) + c + chr(34) for c in cols)}) '
                    f"SELECT {exprs} FROM NVTX_EVENTS WHERE rowid <= ? AND eventType <> 75", [last])
    con.commit()
    con.close()
    twin_without(big, bare, ("NVTX_PAYLOAD_SCHEMAS",))
    return big, bare


def main() -> None:
    args, work = options(__doc__, 100, "python_bench_")
    big, bare = build(work, args.copies)
    (events,) = row_counts(big, ("NVTX_EVENTS",))
    with tracekit.open(work / "count.duckdb") as tk:  # (the samples as ingest finds them)
        tk.ingest(big)
        samples = tk.sql("SELECT count(*) FROM python_samples").item()
    print(f"export: {events:,} NVTX events, {samples:,} of them Python samples ({big.stat().st_size / 2**20:,.0f} MiB)")

    ingest_ratio(work, bare, big, "Python samples", samples, args.repeat)

    with tracekit.open(work / "python.duckdb", read_only=True) as tk:
        time_queries(tk, [("python-stacks", {"limit": 0}), ("python-stacks", {"range": "step", "limit": 0}),
                          ("python-hotspots", {"limit": 0}), ("python-hotspots", {"range": "step", "limit": 0})],
                     args.repeat)
        for scope in ("nvtx", "python"):  # (the run against itself: the nvtx scope the baseline)
            t = best(lambda tk=tk, scope=scope: tk.diff(1, 1, by=scope), args.repeat)
            print(f"diff --by {scope} (the run against itself): {t * 1e3:,.0f} ms")
    per_event = {}
    for label, db in (("without Python samples (baseline)", "bare"), ("with Python samples", "python")):
        with tracekit.open(work / f"{db}.duckdb", read_only=True) as tk:
            out = work / f"{db}.json.gz"
            t = best(lambda tk=tk, out=out: export_trace(tk, out, run=1, force=True), args.repeat)
            res = export_trace(tk, out, run=1, force=True)
        events = sum(n for k, n in res.counts.items() if k != "flow")
        per_event[label] = t / events
        print(f"export trace {label}: {t:.2f} s, {events:,} events ({res.counts['python']:,} Python slices), "
              f"{res.json_bytes / 2**20:,.0f} MiB of JSON, {t / events * 1e6:.2f} us an event")
    print(f"export trace ratio per event {per_event['with Python samples'] / per_event['without Python samples (baseline)']:.2f}x")
    finish(args, work)


if __name__ == "__main__":
    main()
