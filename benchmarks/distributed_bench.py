"""Ingest of many files at once and the Parquet dataset, benchmarked on exports built from a real fixture.

Builds N exports of about R rows each (kernels + CUDA API calls) by replicating the rows
of the real `many_kernels` capture (H200) with shifted timestamps (ingest_bench.build),
each made distinct by one row of META_DATA_EXPORT (else the content hash would skip
them), then measures in the same run, each in a fresh process:

* `tracekit ingest F1..FN` (serial) against `tracekit ingest F1..FN --workers W` (W
  threads, tracekit.parallel) into a DuckDB store and into a Parquet dataset: wall time
  and CPU time (user + system) of the whole command, and the cores it kept busy; the
  ratio best against best and each round's own; after each round, the machine's speed
  and how many cores it gave W busy processes just then (``core_check``: a slower
  machine, or a neighbour's share, shows here and not as code);
* every named nsys query (best of 5) on the DuckDB store against the same query on a
  Parquet dataset exported from it (`tracekit export parquet`), and their ratio;
* the cost of staging for one large export (ingest_bench's, ~6 M rows): a direct
  ingest against prepare + land (tracekit.staging), each in a fresh process, alternated
  (why a single `tracekit ingest FILE` stays direct).

Usage: python benchmarks/distributed_bench.py [--files 16] [--copies 6] [--workers 2] [--rounds 2]
       [--staged-copies 77] [--no-queries] [--workdir DIR]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_bench import TWINS, best_query_ms, build  # noqa: E402


def make_exports(work: Path, files: int, copies: int) -> tuple[list[Path], dict]:
    base = work / "base.sqlite"
    counts = build(copies, base)
    out = []
    for i in range(files):
        f = work / f"rank{i}.sqlite"
        shutil.copyfile(base, f)
        con = sqlite3.connect(f)
        con.execute("INSERT INTO META_DATA_EXPORT (name, value) VALUES ('BENCH_COPY', ?)", [str(i)])
        con.commit()
        con.close()
        out.append(f)
    base.unlink()
    return out, counts


STAGED_CHILD = r'''
import json, resource, sys, time
from pathlib import Path
import tracekit
from tracekit import staging
export, db, mode = sys.argv[1:4]
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t, c = time.perf_counter(), cpu()
tk = tracekit.open(db)
if mode == "direct":
    tk.ingest(export)
    prep = None
else:
    s = staging.prepare(export, workdir=Path(db).parent)
    prep = cpu() - c
    staging.land(tk, s)
    s.discard()
tk.close()
print(json.dumps({"seconds": time.perf_counter() - t, "cpu_s": cpu() - c, "prepare_cpu_s": prep}))
'''


def staged_cost(work: Path, copies: int, rounds: int) -> dict:
    export = work / "big.sqlite"
    build(copies, export)
    times: dict[str, list[dict]] = {"direct": [], "staged": []}
    for _ in range(rounds):
        for mode in times:
            db = work / f"{mode}.duckdb"
            db.unlink(missing_ok=True)
            out = subprocess.run([sys.executable, "-c", STAGED_CHILD, str(export), str(db), mode],
                                 capture_output=True, text=True, check=True)
            times[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
            db.unlink(missing_ok=True)
    export.unlink()
    d = min(times["direct"], key=lambda r: r["seconds"])
    s = min(times["staged"], key=lambda r: r["seconds"])
    print(f"one export of {copies} copies: direct ingest {d['seconds']:.2f} s (CPU {d['cpu_s']:.2f} s), "
          f"prepare + land {s['seconds']:.2f} s (CPU {s['cpu_s']:.2f} s, prepare {s['prepare_cpu_s']:.2f} s): "
          f"+{s['seconds'] - d['seconds']:.2f} s, {s['seconds'] / d['seconds']:.2f}x; all rounds {times}")
    return times


def run_cli(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of a `tracekit` command in a fresh process."""
    import resource

    def children_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    t, c = time.perf_counter(), children_cpu()
    subprocess.run([sys.executable, "-m", "tracekit.cli", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t, children_cpu() - c


SPIN = "n = 0\nfor i in range(12_000_000):\n    n += i\n"  # a fixed amount of interpreter work


def core_check(n: int) -> tuple[float, float]:
    """The machine just now: the wall seconds of one fixed spin alone (its speed: it drifts,
    2x within minutes on the 2-core box), and how many cores ``n`` spins started together
    got (``n`` times that over their wall time: ``n`` on an idle machine of ``n`` cores).
    The spin is the interpreter's work only: a machine slower in memory or I/O (an ingest's
    page faults and reads) does not show in it."""
    def spins(k: int) -> float:
        t = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-S", "-c", SPIN]) for _ in range(k)]
        for p in procs:
            p.wait()
        return time.perf_counter() - t

    one = spins(1)
    return one, n * one / spins(n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--copies", type=int, default=6, help="replicas of the fixture per export (6 -> ~0.47 M rows)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="alternating serial/distributed rounds")
    ap.add_argument("--staged-copies", type=int, default=77, help="the staging-cost export (0: skip)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--no-queries", action="store_true", help="the ingests only (no query or staging timings)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="tracekit-dist-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    files, counts = make_exports(work, args.files, args.copies)
    rows = counts["CUPTI_ACTIVITY_KIND_KERNEL"] + counts["CUPTI_ACTIVITY_KIND_RUNTIME"]
    print(f"built {len(files)} exports of {rows:,} rows (kernels + API calls) in {time.perf_counter() - t:.1f} s")

    times: dict[str, list[float]] = {"serial": [], "workers": [], "workers-dataset": []}
    cpus: dict[str, list[float]] = {m: [] for m in times}
    checks: list[dict] = []  # the machine's speed and cores after each round (core_check)
    for r in range(args.rounds):
        for mode in times:
            if mode == "workers-dataset":  # the threads write their runs' Parquet files themselves
                db = work / f"dataset{r}"
                shutil.rmtree(db, ignore_errors=True)
                db.mkdir()
            else:
                db = work / f"{mode}{r}.duckdb"
                db.unlink(missing_ok=True)
            extra = ["--workers", str(args.workers)] if mode != "serial" else []
            dt, cpu = run_cli(["--db", str(db), "ingest", *map(str, files), *extra])
            times[mode].append(dt)
            cpus[mode].append(cpu)
            print(f"round {r}: {mode:16s} {dt:6.2f} s  CPU {cpu:6.2f} s ({cpu / dt:.2f} cores)  "
                  f"(load {os.getloadavg()[0]:.1f})")
        one, cores = core_check(args.workers)
        checks.append({"spin_s": one, "cores_given": cores})
        print(f"round {r}: the machine after it: one spin {one:.2f} s, {args.workers} spins got {cores:.2f} cores")
    serial, dist = times["serial"], times["workers"]
    s, d, dd = min(serial), min(dist), min(times["workers-dataset"])
    # each round's own ratio too: the box's speed drifts (2x within minutes on the 2-core
    # box), and a round's commands run seconds apart where the best of each may not
    per_round = [a / b for a, b in zip(serial, dist, strict=True)]
    print(f"serial {s:.2f} s, --workers {args.workers} {d:.2f} s: {s / d:.2f}x; into a dataset {dd:.2f} s: "
          f"{s / dd:.2f}x; per round {' / '.join(f'{r:.2f}' for r in per_round)}x (median "
          f"{statistics.median(per_round):.2f}x); load {os.getloadavg()}")
    if args.no_queries:
        print(json.dumps({"files": len(files), "rows_per_file": rows, "workers": args.workers, "serial_s": serial,
                          "workers_s": dist, "workers_dataset_s": times["workers-dataset"], "cpu_s": cpus,
                          "speedup": s / d, "speedup_per_round": per_round,
                          "machine": checks, "speedup_dataset": s / dd, "load": os.getloadavg()}))
        return

    # the same queries on the store and on a dataset exported from it
    import tracekit

    store_db = work / "serial0.duckdb"
    ds_dir = work / "dataset"
    shutil.rmtree(ds_dir, ignore_errors=True)
    run_cli(["--db", str(store_db), "export", "parquet", "-o", str(ds_dir)])
    results = {}
    for label, path in (("store", store_db), ("dataset", ds_dir)):
        tk = tracekit.open(path, read_only=True) if label == "store" else tracekit.open(path)
        for q, ms in best_query_ms(tk, TWINS).items():
            results.setdefault(q, {})[label] = ms
        tk.close()
    worst = 0.0
    for q, r in results.items():
        ratio = r["dataset"] / r["store"]
        worst = max(worst, ratio)
        print(f"query {q:22s} store {r['store']:7.1f} ms  dataset {r['dataset']:7.1f} ms  {ratio:5.2f}x")
    print(f"worst dataset/store ratio: {worst:.2f}x")
    staged = staged_cost(work, args.staged_copies, args.rounds) if args.staged_copies else None
    print(json.dumps({"staged_cost_s": staged, "files": len(files), "rows_per_file": rows, "workers": args.workers,
                      "serial_s": serial, "workers_s": dist, "workers_dataset_s": times["workers-dataset"],
                      "cpu_s": cpus, "speedup": s / d, "speedup_dataset": s / dd, "query_ms": results,
                      "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
