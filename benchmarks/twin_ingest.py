"""What the benchmarks of an optional kind of nsys data share (gpu_metrics_bench.py,
cpu_samples_bench.py, gpu_memory_bench.py): the best of several timed runs, and the ingest of an export beside its
twin without that data, the baseline, each into a fresh store in the same process."""

from __future__ import annotations

import time
from pathlib import Path

import tracekit


def best(fn, repeat: int) -> float:
    """The shortest of ``repeat`` timed calls of ``fn``, s."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def ingest_twins(work: Path, twins: dict[str, Path], repeat: int) -> dict[str, float]:
    """Each export of ``twins`` (label -> path) ingested into a fresh store
    ``work/<its stem>.duckdb``, best of ``repeat``, a line printed each; the times by label."""
    times = {}
    for label, path in twins.items():
        db = work / f"{path.stem}.duckdb"

        def ingest(db=db, path=path) -> None:
            db.unlink(missing_ok=True)
            with tracekit.open(db) as tk:
                tk.ingest(path)

        times[label] = best(ingest, repeat)
        print(f"ingest {label}: {times[label]:.2f} s")
    return times
