"""Shared fixtures: real captures under tests/data/, ingested once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
NSYS_SCENARIOS = ["hstu_mixed", "many_kernels", "multithread"]


@pytest.fixture(scope="session")
def nsys_db(tmp_path_factory):
    """A store with every nsys fixture ingested, one run per scenario (named after it)."""
    import tracekit

    db = tmp_path_factory.mktemp("store") / "nsys.duckdb"
    tk = tracekit.open(db)
    for scen in NSYS_SCENARIOS:
        tk.ingest(DATA / f"nsys_{scen}" / "export.sqlite.xz", name=scen)
    yield tk
    tk.close()
