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
