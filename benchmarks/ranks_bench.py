"""A job of many ranks: ingest, the job's queries, charts and report, on exports built from a real capture.

Builds N rank exports from the real 4-rank job tests/data/nsys_ranks (rank 2 planted as a
straggler): rank i is a copy of that job's rank i % 4 whose launcher environment (as nsys
recorded it) says RANK=i and WORLD_SIZE=N, made distinct by one row of META_DATA_EXPORT
(else the content hash would take the copies for one run). Then, each command in a fresh
process (`python -m tracekit.cli`), wall and CPU time (user + system):

* `tracekit ingest rank*/export.sqlite --workers W` into a new store (and serially with
  --serial: the per-file cost of small exports);
* the job's named queries (jobs, rank-summary, stragglers, rank-ranges), the three rank
  charts and the report of one rank, which opens with the job's views;
* in one process, each query's best of 5 (the query alone, no start-up).

``--diff``: two jobs of N ranks instead, built the same way from tests/data/nsys_jobs's
base_again and after (the second with backward heavier on every rank and the straggler
moved), ingested into one store, then `tracekit diff --jobs` of the two (the command, and in
one process the library's best of 3 with the rank pairs in threads, the default, and one
after another, alternated; the time per rank pair). Then the one-command form, `tracekit diff
--jobs BEFORE_FOLDER AFTER_FOLDER` into a new store (the exports ingested one after another in
one transaction, the pairs compared in its connection), and again with `--workers W` (the exports
ingested W at once, each run committed, the pairs compared in threads), against the two steps above
(`ingest --workers W`, then `diff --jobs` of the jobs' runs), and whether all wrote the same CSV.

Usage: python benchmarks/ranks_bench.py [--ranks 128] [--workers 2] [--serial] [--diff] [--workdir DIR]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from distributed_bench import run_cli  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
JOB = DATA / "nsys_ranks"
JOBS = (DATA / "nsys_jobs" / "base_again", DATA / "nsys_jobs" / "after")  # --diff
QUERIES = ("jobs", "rank-summary", "stragglers", "rank-ranges")
CHARTS = ("rank-summary", "stragglers", "rank-heatmap")


def make_job(work: Path, ranks: int, job: Path = JOB, name: str = "job") -> list[Path]:
    """``ranks`` exports work/NAME/rank{i}/export.sqlite from ``job`` (the module's docstring)."""
    plant = json.loads((job / "plant.json").read_text())
    bases = []
    for v in sorted(plant["ranks"].values(), key=lambda v: v["rank"]):
        base = work / f"base{v['rank']}.sqlite"
        with lzma.open(job / v["export"]) as src, open(base, "wb") as dst:
            shutil.copyfileobj(src, dst)
        bases.append(base)
    out = []
    for i in range(ranks):
        f = work / name / f"rank{i}" / "export.sqlite"
        f.parent.mkdir(parents=True)
        shutil.copyfile(bases[i % len(bases)], f)
        con = sqlite3.connect(f)
        said = con.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE value LIKE 'RANK=%'", [f'RANK="{i}"']).rowcount
        con.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE value LIKE 'WORLD_SIZE=%'",
                    [f'WORLD_SIZE="{ranks}"'])
        con.execute("INSERT INTO META_DATA_EXPORT (name, value) VALUES ('BENCH_RANK', ?)", [f"{name} {i}"])
        con.commit()
        con.close()
        if said != 1:
            raise SystemExit(f"{f}: expected one RANK= in META_DATA_CAPTURE, found {said}")
        out.append(f)
    for b in bases:
        b.unlink()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--serial", action="store_true", help="also ingest them one after another")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--diff", action="store_true", help="two jobs of --ranks ranks, compared by diff --jobs")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="tracekit-ranks-bench-"))
    for name in ("job", "before", "after"):
        shutil.rmtree(work / name, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    if args.diff:
        diff_jobs(work, args.ranks, args.workers)
        return
    t = time.perf_counter()
    files = make_job(work, args.ranks)
    size = sum(f.stat().st_size for f in files)
    print(f"built {len(files)} rank exports, {size / 2**20:,.0f} MiB, in {time.perf_counter() - t:.1f} s")
    out: dict = {"ranks": len(files), "workers": args.workers, "mib": size / 2**20}

    def timed(label: str, cli: list[str]) -> None:
        dt, cpu = run_cli(cli)
        out[label] = {"s": dt, "cpu_s": cpu}
        print(f"{label:32s} {dt:7.2f} s  CPU {cpu:7.2f} s  (load {os.getloadavg()[0]:.1f})")

    modes = [("workers", ["--workers", str(args.workers)])] + ([("serial", [])] if args.serial else [])
    for mode, extra in modes:
        db = work / f"{mode}.duckdb"
        db.unlink(missing_ok=True)
        timed(f"ingest ({mode})", ["--db", str(db), "ingest", *map(str, files), *extra])
    db = work / "workers.duckdb"
    for q in QUERIES:
        timed(f"query {q}", ["--db", str(db), "query", q, "-f", "csv", "-o", str(work / f"{q}.csv")])
    for c in CHARTS:
        timed(f"chart {c}", ["--db", str(db), "chart", c, "-o", str(work / f"{c}.html")])
    timed("report (rank 0)", ["--db", str(db), "report", "--run", "rank0/export", "-o", str(work / "report.html")])

    import tracekit

    with tracekit.open(db, read_only=True) as tk:
        for q in QUERIES:
            best = float("inf")
            for _ in range(5):
                t = time.perf_counter()
                tk.query(q, limit=0)
                best = min(best, time.perf_counter() - t)
            out[f"in-process {q} ms"] = best * 1e3
            print(f"in one process: {q:14s} best of 5 {best * 1e3:7.1f} ms")
        rows = tk.sql("SELECT sum(n) AS n FROM (SELECT count(*) AS n FROM _kernels UNION ALL "
                      "SELECT count(*) FROM _api_calls UNION ALL SELECT count(*) FROM nvtx_ranges)")["n"][0]
    out["rows"] = int(rows)
    out["load"] = os.getloadavg()
    print(json.dumps(out))


def diff_jobs(work: Path, ranks: int, workers: int) -> None:
    """``--diff``: two jobs of ``ranks`` ranks, ingested, then compared rank by rank."""
    t = time.perf_counter()
    files = [f for job, name in zip(JOBS, ("before", "after"), strict=True) for f in make_job(work, ranks, job, name)]
    print(f"built {len(files)} rank exports in {time.perf_counter() - t:.1f} s")
    db = work / "jobs.duckdb"
    db.unlink(missing_ok=True)
    ingest_s, cpu = run_cli(["--db", str(db), "ingest", *map(str, files), "--workers", str(workers)])
    print(f"ingest --workers {workers}: {ingest_s:.1f} s, CPU {cpu:.1f} s")
    out: dict = {"ranks": ranks, "ingest_s": ingest_s}
    dt, cpu = run_cli(["--db", str(db), "diff", "--jobs", "1", str(ranks + 1), "-f", "csv", "-o", str(work / "d.csv")])
    out["command_s"], out["command_cpu_s"] = dt, cpu
    print(f"diff --jobs (command): {dt:.2f} s, CPU {cpu:.2f} s (load {os.getloadavg()[0]:.1f})")
    import tracekit
    from tracekit import job_diff

    threads = job_diff.MAX_THREADS
    with tracekit.open(db, read_only=True) as tk:
        best = {"threads": float("inf"), "one thread": float("inf")}
        for _ in range(3):  # alternated: the rank pairs in threads (the default), then one after another
            for mode, n in (("threads", threads), ("one thread", 1)):
                job_diff.MAX_THREADS = n
                t = time.perf_counter()
                df = tk.diff_jobs("1", str(ranks + 1))
                best[mode] = min(best[mode], time.perf_counter() - t)
        job_diff.MAX_THREADS = threads
        t = time.perf_counter()
        tk.diff("1", str(ranks + 1))
        one = time.perf_counter() - t
    folders = work / "folders.duckdb"
    folders.unlink(missing_ok=True)
    dt, cpu = run_cli(["--db", str(folders), "diff", "--jobs", str(work / "before"), str(work / "after"), "-f", "csv",
                       "-o", str(work / "f.csv")])
    same = (work / "f.csv").read_bytes() == (work / "d.csv").read_bytes()
    out.update({"folders_command_s": dt, "folders_command_cpu_s": cpu, "folders_same_csv": same})
    print(f"diff --jobs of the two folders into a new store: {dt:.2f} s, CPU {cpu:.2f} s, against the two steps "
          f"{ingest_s + out['command_s']:.2f} s (ingest --workers {workers} {ingest_s:.2f} s + diff --jobs "
          f"{out['command_s']:.2f} s): {dt / (ingest_s + out['command_s']):.2f}x; the same CSV: {same}")
    folders.unlink(missing_ok=True)
    dt_w, cpu = run_cli(["--db", str(folders), "diff", "--jobs", str(work / "before"), str(work / "after"),
                         "--workers", str(workers), "-f", "csv", "-o", str(work / "w.csv")])
    same = (work / "w.csv").read_bytes() == (work / "d.csv").read_bytes()
    out.update({"folders_workers_command_s": dt_w, "folders_workers_command_cpu_s": cpu, "folders_workers_same_csv": same})
    print(f"the same with --workers {workers}: {dt_w:.2f} s, CPU {cpu:.2f} s: {dt / dt_w:.2f}x faster than one "
          f"after another, {dt_w / (ingest_s + out['command_s']):.2f}x the two steps; the same CSV: {same}")
    out.update({"library_best_s": best["threads"], "one_thread_best_s": best["one thread"],
                "per_rank_pair_ms": best["threads"] / ranks * 1e3, "one_diff_ms": one * 1e3,
                "rows": df.height, "regressed": df.filter(df["verdict"] == "regressed").height})
    print(f"in one process, best of 3 alternated: diff_jobs {best['threads']:.2f} s in threads "
          f"({best['threads'] / ranks * 1e3:.0f} ms a rank pair), {best['one thread']:.2f} s one pair after "
          f"another: {best['one thread'] / best['threads']:.2f}x; one run's diff {one * 1e3:.0f} ms")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
