"""What reading ncu's instruction-level data (the Source page) costs an ncu ingest, and the
ncu-source query's time.

    python benchmarks/ncu_source_bench.py [--baseline TREE] [--rounds 2] [FIXTURE]

FIXTURE (default tests/data/hstu_capture_ncu, the inference capture: 65 launches, an 83 MB
report) is a tracekit run folder with ncu's raw and details pages and the report. Each round
ingests, in a fresh process each, the report alone and the whole run folder into new
stores, with this checkout's tracekit and, given ``--baseline`` (a checkout, e.g. a git
worktree of the commit before), with that one's (its code first on PYTHONPATH, so the
report's child interpreter runs it too), alternating. Then the ncu-source queries on the
last store (best of 5). Prints wall seconds, peak RSS of the ingest process and its
children, and the rows written.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, time
import tracekit
tk = tracekit.open(sys.argv[1])
t = time.perf_counter()
r = tk.ingest(sys.argv[2])
wall = time.perf_counter() - t
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"wall_s": wall, "rss_mb": rss / 1024, "rows": r.rows, "module": tracekit.__file__}))
"""


def ingest(tree: Path | None, db: Path, what: Path) -> dict:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = subprocess.run([sys.executable, "-c", _CHILD, str(db), str(what)], env=env, capture_output=True, cwd=db.parent,
                         text=True, check=True)  # (cwd: not a checkout, whose tracekit would come first)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixture", nargs="?", default=str(ROOT / "tests/data/hstu_capture_ncu"))
    ap.add_argument("--baseline", help="another checkout's root, measured beside this one")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    folder = Path(a.fixture)
    report = next(p for p in sorted(folder.iterdir()) if ".ncu-rep" in p.name)
    trees = [("this", None)] + ([("baseline", Path(a.baseline).resolve())] if a.baseline else [])
    print(f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        last = None
        for rnd in range(a.rounds):
            for label, tree in trees if rnd % 2 == 0 else trees[::-1]:
                for kind, what in (("report", report), ("folder", folder)):
                    db = Path(tmp) / f"{label}-{kind}-{rnd}.duckdb"
                    res = ingest(tree, db, what)
                    src = res["rows"].get("ncu_source", 0)
                    assert Path(res["module"]).parents[1] == (tree or ROOT), res["module"]
                    print(f"round {rnd} {label:8} {kind:6} {res['wall_s']:6.2f} s  peak {res['rss_mb']:6.0f} MB  "
                          f"{sum(res['rows'].values()):>9,} rows ({src:,} instructions)")
                    if label == "this" and kind == "folder":
                        last = db
        import tracekit

        tk = tracekit.open(last)
        for params in ({}, {"by": "instruction"}, {"kernel": "cached", "limit": 20}):
            best = float("inf")
            for _ in range(5):
                t = time.perf_counter()
                n = tk.query("ncu-source", **params).height
                best = min(best, time.perf_counter() - t)
            print(f"ncu-source {json.dumps(params)}: {1e3 * best:.1f} ms, {n:,} rows")
        tk.close()


if __name__ == "__main__":
    main()
