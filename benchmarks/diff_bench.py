"""Benchmark of `tracekit diff` on two 2 M-kernel runs.

Builds the export of benchmarks/ingest_bench.py (the real `many_kernels` capture
replicated to ~2 M kernels and ~4 M CUDA API calls), then a second export from it with
changes a diff must find: one kernel 30 % slower, one kernel renamed (a new name in the
same places), and every launch of a third kernel dropped. The replicas repeat the
fixture's durations exactly, which real runs never do (and which would make the
per-value grouping of the statistics cheap): each export adds its own 0-96 ns of
deterministic jitter to every kernel, so both runs have realistic spreads of values.
Both are ingested into one store (once; reused with --workdir), then `Tracekit.diff(base, new)` over every scope
both runs have is timed (best of N, in this process) along with its parts.

Usage: python benchmarks/diff_bench.py [--copies 77] [--workdir DIR] [--repeat 5]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_bench import build  # noqa: E402


def jitter(path: Path, mult: int) -> None:
    con = sqlite3.connect(path)
    con.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + (rowid * {mult}) % 97")
    con.commit()
    con.close()


def make_changed(src: Path, out: Path) -> dict:
    """A copy of ``src`` with three planted changes; returns what was planted."""
    shutil.copyfile(src, out)
    jitter(src, 2654435761)
    con = sqlite3.connect(out)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + (rowid * 40503) % 97")
    top = con.execute(
        "SELECT demangledName, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY sum(\"end\" - start) DESC"
    ).fetchall()
    slow, renamed, dropped = top[0][0], top[1][0], top[-1][0]
    names = {i: v for i, v in con.execute("SELECT id, value FROM StringIds WHERE id IN (?, ?, ?)", [slow, renamed, dropped])}
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + (\"end\" - start) * 3 / 10 WHERE demangledName = ?", [slow])
    new_id = con.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
    con.execute("INSERT INTO StringIds VALUES (?, ?)", [new_id, names[renamed] + "_v2"])
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = ?, shortName = ? WHERE demangledName = ?",
                [new_id, new_id, renamed])
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName = ?", [dropped])
    con.commit()
    con.close()
    return {"slower": names[slow], "renamed": names[renamed], "dropped": names[dropped]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=77, help="replicas of the fixture (77 -> ~2 M kernels)")
    ap.add_argument("--workdir", type=Path, default=None, help="keeps the store between runs")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="tracekit-diffbench-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "diff.duckdb"
    import tracekit

    if not db.exists():
        a, b = work / "a.sqlite", work / "b.sqlite"
        t = time.perf_counter()
        counts = build(args.copies, a)
        plant = make_changed(a, b)
        print(f"built two exports in {time.perf_counter() - t:.1f} s: {counts}; planted {plant}")
        tk = tracekit.open(db)
        tk.ingest(a, name="base")
        tk.ingest(b, name="new")
        tk.close()
        a.unlink()
        b.unlink()
    tk = tracekit.open(db, read_only=True)
    n = tk.sql("SELECT run_id, count(*) AS kernels FROM _kernels GROUP BY ALL ORDER BY run_id")
    print(f"store {db} ({db.stat().st_size / 1e6:.0f} MB): {n.rows()}; load {os.getloadavg()[0]:.2f}")
    best = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        df = tk.diff("base", "new")
        best = min(best, time.perf_counter() - t)
    print(f"diff base new (every scope): best of {args.repeat}: {best * 1000:.0f} ms, {df.height} rows")
    # baseline, same process: what comparing by hand reads, the twin queries of both runs
    # (top-kernels, api-summary, memcpy-time, nvtx-gpu-projection, gpu-utilization)
    hand = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        for run in ("base", "new"):
            for q in ("top-kernels", "api-summary", "memcpy-time", "nvtx-gpu-projection", "gpu-utilization"):
                tk.query(q, run=run, limit=0)
        hand = min(hand, time.perf_counter() - t)
    print(f"baseline: the five twin queries of both runs: best of {args.repeat}: {hand * 1000:.0f} ms; "
          f"diff / baseline = {best / hand:.2f}")
    import polars as pl

    flagged = df.filter(pl.col("verdict") != "unchanged").select("scope", "key", "metric", "delta_pct", "verdict", "note")
    with pl.Config(tbl_rows=40, fmt_str_lengths=60, tbl_width_chars=200):
        print(flagged)
    for scope in ("kernel", "nvtx", "api", "memcpy", "gpu"):
        b = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            tk.diff("base", "new", by=[scope])
            b = min(b, time.perf_counter() - t)
        print(f"  --by {scope:7s} {b * 1000:6.0f} ms")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
