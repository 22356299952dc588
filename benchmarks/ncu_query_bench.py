"""Benchmark of the ncu named queries and diff's ncu scope on a store of every committed ncu report.

Ingests each real report under tests/data (``report.ncu-rep.xz`` of every ncu fixture and the
HSTU capture's ``ncu.ncu-rep.xz``; once, reused with --workdir), then times, median of --repeat,
each query for the run of fewest launches, the run of most, and ``all``, ``diff`` of
ncu_occupancy_a against _b (``--by ncu``) and, where the code has the source scope, of
ncu_shapes_a against _slow by ncu and by source. The baseline, in the same process: reading the same
run's launches' metrics (the ``ncu_kernel_metrics`` pivot every query starts from), so each figure
is also given as a ratio to it. ``--code DIR`` times another checkout's tracekit (its package and
queries; default: the checkout this script is in, whatever tracekit is installed) on a store of
its own in the work folder: run it with the old and the new code, one after the other, to
compare them.

Usage: python benchmarks/ncu_query_bench.py [--workdir DIR] [--repeat 7] [--code CHECKOUT]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ("roofline", "hierarchical-roofline", "ncu-summary", "occupancy", "speed-of-light")


def use_code(checkout: Path) -> None:
    """Import tracekit, and its named queries, from ``checkout`` instead of this one."""
    sys.path.insert(0, str(checkout))
    spec = importlib.util.spec_from_file_location("tracekit.queries", checkout / "queries" / "__init__.py",
                                                  submodule_search_locations=[str(checkout / "queries")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["tracekit.queries"] = module
    spec.loader.exec_module(module)


def reports() -> list[tuple[str, Path]]:
    found = [(p.parent.name, p) for p in sorted((ROOT / "tests" / "data").glob("ncu_*/report.ncu-rep.xz"))]
    return [*found, ("hstu_capture_ncu", ROOT / "tests" / "data" / "hstu_capture_ncu" / "ncu.ncu-rep.xz")]


def timed(fn, repeat: int) -> float:
    fn()  # (warm: the first call reads the file's pages)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None, help="where the store is kept (default: a new temporary one)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--code", type=Path, default=None,
                    help="a checkout whose tracekit to time (default: the one this script is in)")
    args = ap.parse_args()
    use_code((args.code or ROOT).resolve())
    import tracekit

    work = args.workdir or Path(tempfile.mkdtemp(prefix="ncu_query_bench."))
    work.mkdir(parents=True, exist_ok=True)
    store = work / f"ncu-{'own' if args.code is None else args.code.resolve().name}.duckdb"
    existed = store.exists()
    with tracekit.open(store) as tk:
        have = set(tk.sql("SELECT name FROM runs")["name"].to_list()) if existed else set()
        for name, path in reports():
            if name not in have:
                tk.ingest(path, name=name)
        launches = tk.sql("SELECT r.name, count(*) AS n FROM ncu_kernels k JOIN runs r USING (run_id) "
                          "WHERE k.workload = 'kernel' GROUP BY 1 ORDER BY 2, 1")
        small, large = launches["name"][0], launches["name"][-1]
        print(f"tracekit from {Path(tracekit.__file__).parent.parent}; store {store}: {len(reports())} ncu reports, "
              f"{launches.height} with kernel launches ({int(launches['n'].sum())}); fewest: {small} ({launches['n'][0]}), "
              f"most: {large} ({launches['n'][-1]}); median of {args.repeat}")
        ids = dict(tk.sql("SELECT name, run_id FROM runs").iter_rows())
        for run in (small, large, "all"):
            where = "" if run == "all" else f" WHERE run_id = {ids[run]}"
            base = timed(lambda where=where: tk.sql(f"SELECT * FROM ncu_kernel_metrics{where}"), args.repeat)
            print(f"  {run}: baseline (its launches' metrics) {base:.1f} ms")
            for q in QUERIES:
                try:
                    ms = timed(lambda q=q, run=run: tk.query(q, run=run), args.repeat)
                except tracekit.TracekitError as err:  # (a run the query cannot answer)
                    print(f"    {q}: {str(err).splitlines()[0][:90]}")
                    continue
                print(f"    {q}: {ms:.1f} ms ({ms / base:.2f}x baseline)")
        pair = f"{ids['ncu_occupancy_a']}, {ids['ncu_occupancy_b']}"
        base = timed(lambda: tk.sql(f"SELECT * FROM ncu_kernel_metrics WHERE run_id IN ({pair})"), args.repeat)
        ms = timed(lambda: tk.diff("ncu_occupancy_a", "ncu_occupancy_b", by="ncu"), args.repeat)
        print(f"  diff ncu_occupancy_a ncu_occupancy_b --by ncu: {ms:.1f} ms ({ms / base:.2f}x baseline, "
              f"both runs' metrics {base:.1f} ms)")
        if "source" in getattr(sys.modules.get("tracekit.diff"), "SCOPES", ()):  # (code that has the scope)
            pair = f"{ids['ncu_shapes_a']}, {ids['ncu_shapes_slow']}"
            base = timed(lambda: tk.sql(f"SELECT * FROM ncu_kernel_metrics WHERE run_id IN ({pair})"), args.repeat)
            for by in ("ncu", "source"):
                ms = timed(lambda by=by: tk.diff("ncu_shapes_a", "ncu_shapes_slow", by=by), args.repeat)
                print(f"  diff ncu_shapes_a ncu_shapes_slow --by {by}: {ms:.1f} ms ({ms / base:.2f}x baseline, "
                      f"both runs' metrics {base:.1f} ms)")


if __name__ == "__main__":
    main()
