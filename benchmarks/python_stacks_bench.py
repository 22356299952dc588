"""Benchmark of nsys's Python stacks (--python-sampling=true, exported with --include-blobs): ingest
and queries.

Builds an export from the real `nsys_python_hot` fixture (H200: 4,855 samples of the Python thread's
stack, 1,155 distinct stacks, 40 NVTX ranges over 5 s) whose Python sample marks and NVTX ranges
are replicated ``--copies`` times with shifted timestamps (100 copies: 485 k samples, eight minutes
of one thread sampled at nsys's default 1 kHz), and a twin export without the payload schemas
(NVTX_PAYLOAD_SCHEMAS: its marks read as NVTX events but not decoded), the baseline, ingested in the
same process. Then python-stacks (every stack; inside the NVTX ranges) on the large run, best of
``--repeat``.

Usage: python benchmarks/python_stacks_bench.py [--copies 100] [--repeat 3] [--workdir DIR]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

from pathlib import Path

from twin_ingest import (
    finish,
    ingest_ratio,
    options,
    row_counts,
    time_queries,
    twin_without,
    unpacked,
)

import tracekit

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
        time_queries(tk, [("python-stacks", {"limit": 0}), ("python-stacks", {"range": "step", "limit": 0})],
                     args.repeat)
    finish(args, work)


if __name__ == "__main__":
    main()
