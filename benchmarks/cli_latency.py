"""Wall time of one CLI command, as a user types it: `tracekit query top-kernels` on a
store holding the bundled example run (examples/hstu_bs8_nc1024_nsys) and the full ncu
report; also `runs`, `--version`, `--help`, and (``--heavy-runs`` times) `diff`,
`chart` and `report`, which need Polars, Altair or vl-convert for their work, and the
ingest of a small export into a new store.

Each command runs ``--runs`` times as a fresh process (median and min reported), beside
the floors it cannot go below in the same process: Python's start-up and
``import duckdb``. ``--baseline PYTHON`` runs the same commands with another
interpreter where another tracekit is installed (e.g. a venv with main's checkout
installed; or a script running python with PYTHONPATH set to an old checkout) for a
ratio measured alongside.
The rows alternate between the variants, so load changes hit each alike; the machine's
load average is printed with the results. Target (issue 15): median <= 0.35 s on the
2-core machine.

    python benchmarks/cli_latency.py [--runs 10] [--baseline /tmp/main-venv/bin/python] [--importtime]
"""

from __future__ import annotations

import argparse
import itertools
import lzma
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "hstu_bs8_nc1024_nsys"
COMMANDS = {
    "query top-kernels": ["query", "top-kernels"],
    "query roofline (ncu)": ["query", "roofline"],
    "runs": ["runs"],
    "--version": ["--version"],
    "--help": ["--help"],
}
#: commands that need Polars, Altair or vl-convert for their work: timed ``--heavy-runs`` times
HEAVY = {
    "diff (nsys run vs itself)": ["diff", "1", "1"],
    "chart top-kernels -o .html": ["chart", "top-kernels", "--run", "1", "-o", "{tmp}/c.html"],
    "chart top-kernels -o .json": ["chart", "top-kernels", "--run", "1", "-o", "{tmp}/c.json"],
    "report (nsys run)": ["report", "--run", "1", "-o", "{tmp}/r.html"],
    # a small export (nsys_many_kernels, 94 k rows) into a new store each time
    "ingest (94 k-row export)": ["--db", "{tmp}/ingest-{run}.duckdb", "ingest", "{tmp}/small.sqlite"],
}
SMALL = ROOT / "tests" / "data" / "nsys_many_kernels" / "export.sqlite.xz"


#: bytecode cached as on a user's machine (a PYTHONDONTWRITEBYTECODE environment would
#: recompile every tracekit module on every run); the first, untimed run writes it
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"COLUMNS": "100"}


def _cli(db: Path, args: list[str], python: str = sys.executable) -> list[str]:
    """The command line of ``args`` on ``db`` (unless ``args`` name a store of their own)."""
    return [python, "-m", "tracekit.cli", *(["--db", str(db)] if args[:1] != ["--db"] else []), *args]


def _time(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU (user + system) is less hit by other load."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    # cwd: not a checkout (`python -m` puts the working directory first on sys.path)
    proc = subprocess.run(cmd, env=ENV, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _importtime(db: Path, top: int = 12) -> str:
    """The modules with the largest cumulative import time for `query top-kernels`."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *_cli(db, COMMANDS["query top-kernels"])[1:]],
                          env=ENV, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cum, name = (p.strip() for p in line[len("import time:"):].split("|"))
            if cum.isdigit() and not name.startswith(" "):
                rows.append((int(cum), name))
    top_level = [(c, n) for c, n in rows if "." not in n.strip()]
    return "\n".join(f"  {c / 1000:7.1f} ms  {n}" for c, n in sorted(top_level, reverse=True)[:top])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--heavy-runs", type=int, default=3, help="runs of diff, chart and report (0: none)")
    ap.add_argument("--baseline", help="a Python interpreter with another tracekit installed, to compare with")
    ap.add_argument("--importtime", action="store_true", help="print the largest imports of `query top-kernels`")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tk-cli-bench-") as tmp:
        variants = {"this checkout": sys.executable}
        if args.baseline:
            variants["baseline"] = args.baseline
        # a store per variant, ingested by it: another tracekit may not read this one's schema
        dbs = {python: Path(tmp) / f"example-{i}.duckdb" for i, python in enumerate(variants.values())}
        for python, db in dbs.items():
            for source in (EXAMPLE, ROOT / "tests" / "data" / "ncu_full" / "report.ncu-rep.xz"):
                subprocess.run(_cli(db, ["ingest", str(source)], python), env=ENV, cwd=tmp, check=True,
                               stdout=subprocess.DEVNULL)
        db = dbs[sys.executable]
        with lzma.open(SMALL) as src, open(Path(tmp) / "small.sqlite", "wb") as dst:
            shutil.copyfileobj(src, dst)
        runs = itertools.count()
        floors = {"python -c pass": [sys.executable, "-c", "pass"],
                  "python -c 'import duckdb'": [sys.executable, "-c", "import duckdb"]}
        for python in variants.values():  # warm-up: bytecode written, files in the page cache, caches
            for cli_args in [COMMANDS["query top-kernels"], *(HEAVY.values() if args.heavy_runs else [])]:
                k = next(runs)
                _time(_cli(dbs[python], [a.format(tmp=tmp, run=k) for a in cli_args], python))
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for k in range(max(args.runs, args.heavy_runs)):  # alternate: every variant sees the same load
            if k < args.runs:
                for name, cmd in floors.items():
                    times.setdefault(("floor", name), []).append(_time(cmd))
            for label, python in variants.items():
                todo = {**(COMMANDS if k < args.runs else {}), **(HEAVY if k < args.heavy_runs else {})}
                for name, cli_args in todo.items():  # (each run its own number: a new store per ingest)
                    cli_args = [a.format(tmp=tmp, run=next(runs)) for a in cli_args]
                    times.setdefault((label, name), []).append(_time(_cli(dbs[python], cli_args, python)))
        print(f"{args.runs} runs each ({args.heavy_runs} of diff, chart, report), alternating; "
              f"python {sys.version.split()[0]}")
        print(f"{'variant':16} {'command':28} {'wall median':>11} {'wall min':>8} {'CPU median':>10}")
        med = {k: (statistics.median(w for w, _ in ts), min(w for w, _ in ts), statistics.median(c for _, c in ts))
               for k, ts in times.items()}
        for (label, name), (wall, low, cpu) in med.items():
            print(f"{label:16} {name:28} {wall:11.3f} {low:8.3f} {cpu:10.3f}")
        if args.baseline:
            for name in [*COMMANDS, *HEAVY]:
                if ("this checkout", name) in med and ("baseline", name) in med:
                    new, old = med[("this checkout", name)], med[("baseline", name)]
                    print(f"ratio baseline/this, {name}: wall {old[0] / new[0]:.2f}x, CPU {old[2] / new[2]:.2f}x")
        print(f"load average: {os.getloadavg()[0]:.2f} (1 min)")
        if args.importtime:
            print("largest imports of `query top-kernels` (cumulative):")
            print(_importtime(db))
    return 0


if __name__ == "__main__":
    sys.exit(main())
