"""Compare whole stores: every table, every row (tests of staged, distributed and
dataset ingest against a direct serial ingest)."""

from __future__ import annotations


def store_rows(con, catalog: str | None = None) -> dict[str, list[tuple]]:
    """Every base table of the store (``runs`` without its ingest time), rows sorted."""
    catalog = catalog or con.execute("SELECT current_database()").fetchall()[0][0]
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? ORDER BY 1", [catalog]).fetchall()]
    out = {}
    for t in tables:
        sel = "* EXCLUDE (ingested_at)" if t == "runs" else "*"
        rows = con.execute(f'SELECT {sel} FROM "{catalog}".main."{t}"').fetchall()
        out[t] = sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))
    return out


def assert_same_stores(a, b) -> None:
    ra, rb = store_rows(a), store_rows(b)
    assert sorted(ra) == sorted(rb)
    for t in ra:
        assert len(ra[t]) == len(rb[t]), t
        differ = [(x, y) for x, y in zip(ra[t], rb[t], strict=True) if x != y]
        assert not differ, (t, len(differ), differ[:3])
