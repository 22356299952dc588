"""Compare whole stores: every table, every row (tests of staged, distributed and
dataset ingest against a direct serial ingest)."""

from __future__ import annotations


def _tables(con) -> tuple[str, list[str]]:
    catalog = con.execute("SELECT current_database()").fetchall()[0][0]
    return catalog, [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? ORDER BY 1", [catalog]).fetchall()]


def _select(catalog: str, t: str) -> str:
    """A base table's rows (``runs`` without its ingest time)."""
    sel = "* EXCLUDE (ingested_at)" if t == "runs" else "*"
    return f'SELECT {sel} FROM "{catalog}".main."{t}"'


def store_rows(con) -> dict[str, list[tuple]]:
    """Every base table of the store (``runs`` without its ingest time), rows sorted."""
    catalog, tables = _tables(con)
    out = {}
    for t in tables:
        rows = con.execute(_select(catalog, t)).fetchall()
        out[t] = sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))
    return out


def fingerprints(con) -> dict[str, tuple[int, int]]:
    """Each base table's row count and the sum of its rows' hashes: equal for two tables that
    hold the same rows in any order (a row twice counts twice), computed in DuckDB."""
    catalog, tables = _tables(con)
    return {t: con.execute(f"SELECT count(*), coalesce(sum(hash(r)::HUGEINT), 0) FROM ({_select(catalog, t)}) r"
                           ).fetchall()[0] for t in tables}


def assert_same_stores(a, b) -> None:
    """Every table of ``a`` holds the rows of ``b``'s, in any order. The tables' fingerprints
    decide; where they differ, the rows are compared one by one to say how."""
    if fingerprints(a) == fingerprints(b):
        return
    ra, rb = store_rows(a), store_rows(b)
    assert sorted(ra) == sorted(rb)
    for t in ra:
        assert len(ra[t]) == len(rb[t]), t
        differ = [(x, y) for x, y in zip(ra[t], rb[t], strict=True) if x != y]
        assert not differ, (t, len(differ), differ[:3])
