"""Imports run one way: capture -> library -> ingest, never back (DESIGN.md, "Data flow")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "tracekit"


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, absolute (relative imports resolved against its package)."""
    package = path.relative_to(LIB.parent).with_suffix("").parts
    package = package[:-1] if package[-1] != "__init__" else package[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out += [mod] + [f"{mod}.{a.name}" for a in node.names]
    return out


@pytest.mark.parametrize("folder, forbidden", [
    ("", ("tracekit.capture",)),  # the library never imports capture
    ("ingest", ("tracekit.store", "tracekit.capture", "tracekit.cli")),  # ingest plugins never import the store
])
def test_imports_run_one_way(folder, forbidden):
    bad = []
    for path in sorted((LIB / folder).rglob("*.py")):
        for mod in _imports(path):
            if any(mod == f or mod.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(LIB.parent)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_the_import_check_sees_relative_imports():
    """The scan resolves relative imports (``from .. import sqlite_ints`` in tracekit/ingest/nsys/)."""
    mods = _imports(LIB / "ingest" / "nsys" / "source.py")
    assert "tracekit.ingest.sqlite_ints" in mods and "tracekit.errors.InputError" in mods


@pytest.mark.parametrize("polars", ["missing", "installed"])
def test_an_nsys_ingest_needs_no_polars(tmp_path, polars):
    """Telling which plugin reads a file imports every plugin: the ncu one imports Polars
    only for the files it reads (ncu_head says what a file is), so an nsys ingest runs
    where Polars is not installed (the GPU machine's image), loads no torch/triton, and
    where Polars is installed does not load it (its text tables are read through ADBC's
    low-level API: the DB-API module imports Polars, 0.1–0.2 s of every ingest command)."""
    import subprocess
    import sys

    export = LIB.parent / "tests" / "data" / "nsys_hstu_mixed" / "export.sqlite.xz"
    code = ("import sys\n"
            + ("sys.modules['polars'] = None  # import polars raises ImportError\n" if polars == "missing" else "")
            + "import tracekit; tk = tracekit.open(sys.argv[1]); print(tk.ingest(sys.argv[2]).kind); "
            "print(sorted(m for m in ('torch', 'triton', 'polars') if sys.modules.get(m)))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.duckdb"), str(export)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["nsys", "[]"]


def test_listing_the_charts_imports_neither_altair_nor_polars():
    """`tracekit charts` only lists names: Altair and Polars (0.27 s) load when a chart is built."""
    import subprocess
    import sys

    code = ("import sys; from tracekit.cli import main; sys.argv = ['tracekit', 'charts']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('altair', 'polars') if m in sys.modules), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "top-kernels" in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "[]"
