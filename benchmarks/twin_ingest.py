"""What the benchmarks of an optional kind of nsys data share (gpu_metrics_bench.py,
cpu_samples_bench.py, gpu_memory_bench.py): their options and work folder, the export's twin
without that data (the baseline), both ingested into fresh stores in the same process, and the
queries timed on the large run, each the best of several timed runs."""

from __future__ import annotations

import argparse
import lzma
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import tracekit


def options(doc: str, copies: int, prefix: str, more=None) -> tuple[argparse.Namespace, Path]:
    """The benchmark's options (``--copies``, default ``copies``; ``--repeat``; ``--workdir``; and
    what ``more(parser)`` adds) and its work folder: ``--workdir``, or a new temporary one."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--copies", type=int, default=copies)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    if more is not None:
        more(ap)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return args, work


def finish(args: argparse.Namespace, work: Path) -> None:
    """The temporary work folder removed (one given by --workdir is kept)."""
    if args.workdir is None:
        shutil.rmtree(work)


def unpacked(fixture: Path, big: Path) -> sqlite3.Connection:
    """The compressed export ``fixture`` written out to ``big``, and a connection to it (for the
    rows replicated into it)."""
    with lzma.open(fixture) as src, open(big, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return sqlite3.connect(big)


def twin_without(big: Path, bare: Path, tables: tuple[str, ...]) -> None:
    """``bare``: a copy of the export ``big`` without ``tables``, VACUUMed."""
    shutil.copyfile(big, bare)
    con = sqlite3.connect(bare)
    for t in tables:
        con.execute(f"DROP TABLE {t}")
    con.commit()
    con.execute("VACUUM")
    con.close()


def row_counts(path: Path, tables: tuple[str, ...]) -> list[int]:
    con = sqlite3.connect(path)
    try:
        return [con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables]
    finally:
        con.close()


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


def ingest_ratio(work: Path, bare: Path, big: Path, what: str, rows: int, repeat: int) -> None:
    """The twins ingested (``ingest_twins``) and the ratio printed, with the rate of the ``rows``
    of ``what`` on top of the baseline."""
    base, full = f"without {what} (baseline)", f"with {what}"
    times = ingest_twins(work, {base: bare, full: big}, repeat)
    extra = times[full] - times[base]
    print(f"ingest ratio {times[full] / times[base]:.2f}x; the {what} {rows / max(extra, 1e-9) / 1e6:,.1f} M rows/s "
          "on top")


def time_queries(tk, queries, repeat: int) -> None:
    """Each (query, params) of ``queries`` on run 1, best of ``repeat``, a line printed each."""
    for q, params in queries:
        t = best(lambda q=q, params=params: tk.query(q, run=1, **params), repeat)
        print(f"query {q} {params or ''}: {t * 1e3:,.0f} ms")
