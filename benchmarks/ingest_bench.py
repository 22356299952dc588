"""Ingest and query benchmark on a large nsys export built from a real fixture.

Builds an export of about 2 M kernels and 4 M CUDA API calls by replicating the rows of
the real `many_kernels` capture (H200) with shifted timestamps and fresh correlation
ids, then measures, each in the same run:

* ingest time, rows/s, CPU time and peak RSS of a fresh process ingesting it, and the
  same for two baseline processes: one that reads every table through SQLite (ADBC)
  instead of the page decoder, one with the page decoder's NumPy implementation
  instead of the compiled one;
* every nsys-stats twin query, and every nsys analyze rule's, after ingest (best of 5, ms);
* top-kernels against SQLite running the equivalent GROUP BY on the same export file.

Usage: python benchmarks/ingest_bench.py [--copies 77] [--workdir DIR] [--nvtx-per-call K] [--no-baseline]
Results go to stdout as a table; record them in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "nsys_many_kernels" / "export.sqlite.xz"
# (gpu-trace is left out: with limit 0 it returns every GPU op, 2 M rows, which measures
# the size of the answer; docs/performance.md has its figures by page)
TWINS = ["top-kernels", "api-summary", "memcpy-time", "memcpy-size", "nvtx-summary",
         "nvtx-gpu-projection", "kernel-exec", "gpu-utilization", "kernels-by-nvtx", "launch-overhead",
         "nvtx-ranges", "gpu-summary", "osrt-summary", "nvtx-kernels", "kernel-grids",
         # nsys analyze's rules
         "sync-apis", "async-pageable-copies", "sync-copies", "sync-memsets", "gpu-gaps", "low-gpu-utilization",
         "nsys-rules"]


def best_query_ms(tk, names: list[str], rounds: int = 5) -> dict[str, float]:
    """Each named query's best time of ``rounds`` on ``tk``, every row (limit 0), ms."""
    out = {}
    for q in names:
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            tk.query(q, limit=0)
            best = min(best, time.perf_counter() - t)
        out[q] = best * 1000
    return out


def build(copies: int, out: Path, nvtx_per_call: int = 0) -> dict:
    with lzma.open(FIXTURE) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(out)
    span = con.execute(
        "SELECT max(\"end\") - min(start) + 1000 FROM (SELECT start, \"end\" FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT start, \"end\" FROM CUPTI_ACTIVITY_KIND_RUNTIME)").fetchone()[0]
    corr = con.execute("SELECT max(correlationId) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    con.execute("CREATE TEMP TABLE c AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) SELECT i FROM c", [copies - 1])
    for table, has_corr in (("CUPTI_ACTIVITY_KIND_KERNEL", True), ("CUPTI_ACTIVITY_KIND_RUNTIME", True),
                            ("NVTX_EVENTS", False)):
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        sel = []
        for col in cols:
            if col in ("start", "end"):
                sel.append(f'"{col}" + c.i * {span}')
            elif col == "correlationId" and has_corr:
                sel.append(f"correlationId + c.i * {corr}")
            else:
                sel.append(f'"{col}"')
        where = "WHERE t.eventType <> 75" if table == "NVTX_EVENTS" else ""
        con.execute(f"INSERT INTO {table} ({', '.join(chr(34) + c + chr(34) for c in cols)}) "
                    f"SELECT {', '.join(sel)} FROM {table} t CROSS JOIN c {where}")
    # NVTX at scale (what per-op ranges such as PyTorch's emit_nvtx produce): k nested
    # push/pop ranges around every CUDA API call, on the call's thread
    for k in range(nvtx_per_call):
        pad = nvtx_per_call - k
        con.execute(f"INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid, domainId) "
                    f"SELECT start - {pad}, \"end\" + {pad}, 59, 'call.level{k}', globalTid, 0 "
                    f"FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    con.commit()
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")}
    con.close()
    return counts


INGEST_CHILD = """
import json, resource, sys, time, tracekit
from tracekit.ingest import sqlite_ints
if sys.argv[3] == "sqlite":  # baseline: every table read through SQLite (ADBC), as before the page decoder
    def decline(*args, **kwargs):
        raise sqlite_ints.Unsupported("baseline")
    sqlite_ints.read_int_columns = decline
t = time.perf_counter()
res = tracekit.open(sys.argv[2]).ingest(sys.argv[1])
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": dt, "rows": res.rows, "maxrss_kb": ru.ru_maxrss, "user_s": ru.ru_utime, "sys_s": ru.ru_stime}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=77, help="replicas of the fixture (77 -> ~2 M kernels)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--nvtx-per-call", type=int, default=0,
                    help="nested push/pop NVTX ranges added around every API call (NVTX at scale)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the two baseline ingests")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="tracekit-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    export, db = work / "big.sqlite", work / "big.duckdb"
    db.unlink(missing_ok=True)
    t = time.perf_counter()
    counts = build(args.copies, export, args.nvtx_per_call)
    print(f"built {export} in {time.perf_counter() - t:.1f} s: {counts}")

    def ingest(dest: Path, mode: str, **env) -> dict:  # in a fresh process
        base_env = {k: v for k, v in os.environ.items() if k != "TRACEKIT_PAGE_DECODER"}
        out = subprocess.run([sys.executable, "-c", INGEST_CHILD, str(export), str(dest), mode],
                             capture_output=True, text=True, check=True, env={**base_env, **env})
        return json.loads(out.stdout.strip().splitlines()[-1])

    # baselines first (same export, same run): every table through SQLite, then the
    # page decoder's NumPy implementation
    base = numpy_ing = None
    if not args.no_baseline:
        base_db = work / "base.duckdb"
        base_db.unlink(missing_ok=True)
        base = ingest(base_db, "sqlite")
        base_db.unlink(missing_ok=True)
        numpy_ing = ingest(base_db, "pages", TRACEKIT_PAGE_DECODER="numpy")
        base_db.unlink(missing_ok=True)
    ing = ingest(db, "pages")
    rows = sum(ing["rows"].values())
    print(f"ingest: {ing['seconds']:.2f} s, {rows:,} rows, {rows / ing['seconds'] / 1e6:.2f} M rows/s, "
          f"peak RSS {ing['maxrss_kb'] / 1024:.0f} MB, CPU user {ing['user_s']:.2f} s sys {ing['sys_s']:.2f} s "
          f"(process, imports included), store {db.stat().st_size / 1e6:.0f} MB "
          f"(export {export.stat().st_size / 1e6:.0f} MB)")
    if base:
        print(f"baseline ingest (every table through SQLite/ADBC): {base['seconds']:.2f} s, CPU user {base['user_s']:.2f} s "
              f"sys {base['sys_s']:.2f} s; the page decoder is {base['seconds'] / ing['seconds']:.2f}x faster")
        print(f"baseline ingest (the page decoder's NumPy implementation): {numpy_ing['seconds']:.2f} s, "
              f"CPU user {numpy_ing['user_s']:.2f} s sys {numpy_ing['sys_s']:.2f} s, peak RSS "
              f"{numpy_ing['maxrss_kb'] / 1024:.0f} MB; the compiled one is {numpy_ing['seconds'] / ing['seconds']:.2f}x faster")

    import tracekit

    tk = tracekit.open(db, read_only=True)
    times = best_query_ms(tk, TWINS)
    for q, ms in times.items():
        print(f"query {q:22s} {ms:8.1f} ms")

    con = sqlite3.connect(export)
    sq = ("SELECT s.value, count(*), sum(k.\"end\" - k.start), avg(k.\"end\" - k.start), "
          "min(k.\"end\" - k.start), max(k.\"end\" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
          "JOIN StringIds s ON s.id = k.demangledName GROUP BY 1 ORDER BY 3 DESC")
    best_sq = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        con.execute(sq).fetchall()
        best_sq = min(best_sq, time.perf_counter() - t)
    ratio = best_sq * 1000 / times["top-kernels"]
    print(f"sqlite GROUP BY (same aggregation, no median/stddev): {best_sq * 1000:.1f} ms; "
          f"top-kernels is {ratio:.1f}x faster")
    print(json.dumps({"counts": counts, "ingest": ing, "baseline_ingest": base, "numpy_ingest": numpy_ing, "query_ms": times, "sqlite_ms": best_sq * 1000,
                      "ratio_top_kernels_vs_sqlite": ratio}))
    if args.workdir is None:  # (a folder of its own: 2 GB of export and store, not kept)
        tk.close()
        con.close()
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
