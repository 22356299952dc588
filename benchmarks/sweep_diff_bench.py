"""Two sweeps' folders compared in one command: `tracekit diff SWEEP_A/ SWEEP_B/`, serially and with --workers.

Builds two sweep folders as `tracekit sweep --tool nsys --out` writes them (runs/<point>/ with
meta.json, requests.csv and the nsys export) of P points each (bs x nc), from the real
capture pair tests/data/hstu_capture_pair (base, base_again: the same program captured twice
on an H200, bs 8 x nc 1024, large preset). Point i of sweep A is a copy of base, of sweep B a
copy of base_again, with its own bs, nc and sweep id in meta.json and requests.csv, its export
made distinct by one row of META_DATA_EXPORT and its requests' latencies scaled by 1 + i x 1e-6 (else the
content hashes would take the copies for one run). Then, each command in a fresh process
(`python -m tracekit.cli`) into a new store, alternated over rounds: `diff A/ B/ -f csv` (the
run folders ingested one after another in one transaction) and the same with `--workers W`
(W at once, each run committed as it lands); wall and CPU time (user + system), and whether
both wrote the same CSV.

Usage: python benchmarks/sweep_diff_bench.py [--points 16] [--workers 2] [--rounds 3] [--workdir DIR]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import lzma
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from distributed_bench import run_cli  # noqa: E402

PAIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "hstu_capture_pair"
GRID_BS = (1, 2, 4, 8)
GRID_NC = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def make_sweep(work: Path, capture: Path, sweep: str, points: int) -> Path:
    """``points`` run folders work/SWEEP/runs/<stamp>-bs{b}-nc{n}-nsys from ``capture``."""
    base = work / f"{capture.name}.sqlite"
    if not base.exists():
        with lzma.open(capture / "nsys.sqlite.xz") as src, open(base, "wb") as dst:
            shutil.copyfileobj(src, dst)
    meta = json.loads((capture / "meta.json").read_text())
    grid = [(b, n) for n in GRID_NC for b in GRID_BS][:points]
    if len(grid) < points:
        raise SystemExit(f"--points {points}: at most {len(GRID_BS) * len(GRID_NC)}")
    for i, (b, n) in enumerate(grid):
        run = work / sweep / "runs" / f"20261202T{i:06d}.000Z-bs{b}-nc{n}-nsys"
        run.mkdir(parents=True)
        shutil.copy(base, run / "nsys.sqlite")
        con = sqlite3.connect(run / "nsys.sqlite")
        con.execute("INSERT INTO META_DATA_EXPORT (name, value) VALUES ('BENCH_POINT', ?)", [f"{sweep} {i}"])
        con.commit()
        con.close()
        # a run folder is known by its requests too (a copy of a capture is that capture): each
        # point's latencies scaled by 1 + i x 1e-6, so that every point is a run of its own
        with open(capture / "requests.csv", newline="") as src:
            rows = list(csv.DictReader(src))
        for r in rows:  # (and at the point's bs and nc: a run's requests ran at its params' point)
            r.update(latency_ms=repr(float(r["latency_ms"]) * (1 + i * 1e-6)), bs=b, nc=n)
        with open(run / "requests.csv", "w", newline="") as dst:
            w = csv.DictWriter(dst, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        point = json.loads(json.dumps(meta))
        point["name"] = run.name
        point["params"].update(bs=b, nc=n, sweep=sweep)
        (run / "meta.json").write_text(json.dumps(point, indent=2))
    return work / sweep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sweep_diff_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    a, b = (work / "sweep-a", work / "sweep-b")
    if not a.exists():
        make_sweep(work, PAIR / "base", "sweep-a", args.points)
        make_sweep(work, PAIR / "base_again", "sweep-b", args.points)
    exports = sorted(a.glob("runs/*/nsys.sqlite")) + sorted(b.glob("runs/*/nsys.sqlite"))
    print(f"{len(exports)} run folders, {sum(p.stat().st_size for p in exports) / 1e6:.0f} MB of exports; "
          f"{os.cpu_count()} cores; workdir {work}")
    forms = {"one transaction": [], f"--workers {args.workers}": []}
    for r in range(args.rounds):
        for form, times in forms.items():
            db, out = work / "s.duckdb", work / ("serial.csv" if form == "one transaction" else "workers.csv")
            for p in (db, Path(f"{db}.wal")):
                p.unlink(missing_ok=True)
            extra = form.split() if form.startswith("--") else []
            wall, cpu = run_cli(["--db", str(db), "diff", str(a), str(b), "-f", "csv", "-o", str(out), *extra])
            times.append(wall)
            print(f"round {r} {form:>16}: {wall:6.2f} s wall, {cpu:6.2f} CPU-s")
    csvs = [work / "serial.csv", work / "workers.csv"]
    same = csvs[0].read_bytes() == csvs[1].read_bytes()
    meds = [statistics.median(t) for t in forms.values()]
    print(f"medians: {meds[0]:.2f} s -> {meds[1]:.2f} s ({meds[0] / meds[1]:.2f}x); same CSV: {same}")
    if not same:
        raise SystemExit("the two forms wrote different CSVs")


if __name__ == "__main__":
    main()
