"""Benchmark of the GPU's sampled counters (nsys --gpu-metrics-devices): ingest and queries.

Builds an export from the real `nsys_gpu_metrics` fixture (H200, 22 metrics at 10 kHz, 92,444
samples over 0.42 s) whose GPU_METRICS table is replicated ``--copies`` times with shifted
timestamps (110 copies: ~10 M samples, a 46 s capture at nsys's default rate), and a twin
export without the GPU metrics tables: the baseline, ingested in the same process. Then the
gpu-metrics and nvtx-gpu-metrics queries and the clock lookup of ``tracekit diff``
(queries/_diff/kernel_clocks.sql, for every kernel and NVTX path) on the large run, best of
``--repeat``; then that lookup on the run with ``--kernels`` synthetic kernels added over the
samples' span (its worst case: every launch read).

Usage: python benchmarks/gpu_metrics_bench.py [--copies 110] [--repeat 3] [--kernels 2000000] [--workdir DIR]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
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

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "data" / "nsys_gpu_metrics" / "export.sqlite.xz"


def build(work: Path, copies: int) -> tuple[Path, Path]:
    """(the export with ``copies`` x the fixture's samples, the same export without GPU metrics)."""
    big, bare = work / "metrics.sqlite", work / "bare.sqlite"
    con = unpacked(FIXTURE, big)
    lo, hi = con.execute("SELECT min(timestamp), max(timestamp) FROM GPU_METRICS").fetchone()
    span = hi - lo + 100_000
    for i in range(1, copies):
        con.execute("INSERT INTO GPU_METRICS (rawTimestamp, timestamp, typeId, metricId, value) "
                    "SELECT rawTimestamp + ?, timestamp + ?, typeId, metricId, value FROM GPU_METRICS "
                    "WHERE timestamp <= ?", [i * span, i * span, hi])
    con.commit()
    con.close()
    twin_without(big, bare, ("GPU_METRICS", "TARGET_INFO_GPU_METRICS"))
    return big, bare


def main() -> None:
    args, work = options(__doc__, 110, "gm_bench_", lambda ap: ap.add_argument(
        "--kernels", type=int, default=2_000_000, help="kernels of the lookup's worst case (0: skip)"))
    big, bare = build(work, args.copies)
    (samples,) = row_counts(big, ("GPU_METRICS",))
    print(f"export: {samples:,} GPU metric samples ({big.stat().st_size / 2**20:,.0f} MiB)")

    ingest_ratio(work, bare, big, "metrics", samples, args.repeat)

    with tracekit.open(work / "metrics.duckdb", read_only=True) as tk:
        time_queries(tk, [("gpu-metrics", {}), ("gpu-metrics", {"range": "gemm"}), ("nvtx-gpu-metrics", {})],
                     args.repeat)
        con = tk.con
        keys = [r[0] for r in con.execute("SELECT DISTINCT name_id FROM _kernels").fetchall()]
        con.register("_diff_keymap", pl.DataFrame({"side": [], "name_id": [], "key": []}, schema=D._KEYMAP))
        con.register("_diff_clock_keys", pl.DataFrame({"key": keys}, schema={"key": pl.Int64}))
        paths = [r[0] for r in con.execute("SELECT DISTINCT path FROM nvtx_ranges WHERE path IS NOT NULL").fetchall()]
        con.register("_diff_clock_paths", pl.DataFrame({"path": paths}, schema={"path": pl.Utf8}))
        t = best(lambda: con.execute(D._sql("kernel_clocks"), {"base": 1, "new": 1, "device": True}).fetchall(), args.repeat)
        print(f"diff's clock lookup (both sides the large run; every kernel and NVTX path): {t * 1e3:,.0f} ms")
    if args.kernels:
        # the worst case of diff's lookup: a run of many kernels (synthetic: 5 names, back to back over
        # the samples' span) whose every kernel and device clock is asked for, or one name's
        many = work / "many.duckdb"
        shutil.copyfile(work / "metrics.duckdb", many)
        with tracekit.open(many) as tk:
            con = tk.con
            lo, hi = con.execute("SELECT min(timestamp_ns), max(timestamp_ns) FROM gpu_metrics").fetchone()
            step = (hi - lo) // args.kernels
            first = con.execute("SELECT min(name_id) FROM _kernels").fetchone()[0]
            con.execute(f"INSERT INTO _kernels (run_id, start_ns, end_ns, device_id, name_id, stream_id) "
                        f"SELECT 1, {lo} + i * {step}, {lo} + i * {step} + {step * 4 // 5}, 0, {first} + i % 5, 7 "
                        f"FROM range({args.kernels}) t(i)")
            keys = [r[0] for r in con.execute("SELECT DISTINCT name_id FROM _kernels").fetchall()]
            con.register("_diff_keymap", pl.DataFrame({"side": [], "name_id": [], "key": []}, schema=D._KEYMAP))
            con.register("_diff_clock_paths", pl.DataFrame({"path": []}, schema={"path": pl.Utf8}))
            for label, asked, device in (("every kernel and the device", keys, True), ("one kernel", [first], False)):
                con.register("_diff_clock_keys", pl.DataFrame({"key": asked}, schema={"key": pl.Int64}))
                t = best(lambda device=device: con.execute(D._sql("kernel_clocks"),
                                                           {"base": 1, "new": 1, "device": device}).fetchall(),
                         args.repeat)
                print(f"diff's clock lookup, {args.kernels:,} kernels a side, {label}: {t * 1e3:,.0f} ms")
    finish(args, work)


if __name__ == "__main__":
    main()
