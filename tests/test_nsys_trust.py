"""Valid exports in the states SQLite leaves them in are read as SQLite reads them, and
files SQLite would not read are refused, never read differently (issue 13, points 3-6).

Every case starts from a real export (tests/data) changed the way a user's tools change
one: opened and edited by sqlite3 in WAL mode, left with a hot journal, names registered
through StringIds, pages corrupted, truncated while tracekit reads it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import NSYS_EXPORTS, compiled_or_numpy, store_state

import tracekit
from tracekit.errors import InputError
from tracekit.ingest import materialized
from tracekit.ingest import sqlite_ints as si

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.fixture(params=["native", "numpy"])
def decoder(request, monkeypatch):
    """Each test below runs with the compiled page decoder and with the NumPy one."""
    return compiled_or_numpy(request, monkeypatch, si, "_native", "tracekit/ingest/_pages.c")


@pytest.fixture(params=["decoder", "sqlite"])
def reader(request, monkeypatch):
    """Each test below runs with the page decoder and with every table read through SQLite."""
    if request.param == "sqlite":
        monkeypatch.setattr(si, "read_int_columns", lambda *a, **k: (_ for _ in ()).throw(si.Unsupported("off")))
    return request.param


def _plain(tmp_path: Path, scen: str = "hstu_mixed", name: str = "export.sqlite") -> Path:
    out = tmp_path / name
    with materialized(NSYS_EXPORTS[scen]) as src:
        shutil.copy(src, out)
    return out


def _count(path: Path, table: str = KERNELS) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]


def _ingested_kernels(store: Path, path: Path) -> int:
    with tracekit.open(store) as tk:
        tk.ingest(path)
        return tk.sql("SELECT count(*) AS n FROM kernels")["n"][0]


def _refused(tmp_path: Path, *statements: str) -> str:
    """The one-line error of ingesting the hstu_mixed export after ``statements``."""
    path = _plain(tmp_path)
    with sqlite3.connect(path) as con:
        for stmt in statements:
            con.execute(stmt)
    with pytest.raises(InputError) as err:
        _ingested_kernels(tmp_path / "s.duckdb", path)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


# --- point 3: WAL mode and journals ---------------------------------------------------

def _wal_with_frames(tmp_path: Path) -> tuple[Path, int]:
    """A real export switched to WAL mode, half its kernels deleted in a committed
    transaction that is still in the -wal file (copied while the writer is open)."""
    work = _plain(tmp_path, name="work.sqlite")
    con = sqlite3.connect(work)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute(f"DELETE FROM {KERNELS} WHERE rowid % 2 = 0")
    con.commit()
    left = con.execute(f"SELECT count(*) FROM {KERNELS}").fetchone()[0]
    folder = tmp_path / "wal"
    folder.mkdir()
    shutil.copy(work, folder / "export.sqlite")
    shutil.copy(f"{work}-wal", folder / "export.sqlite-wal")
    con.close()
    return folder / "export.sqlite", left


def test_wal_with_committed_frames_is_refused_and_nothing_is_created(tmp_path, reader):
    path, left = _wal_with_frames(tmp_path)
    assert _count(path.parent / "export.sqlite") == left  # what SQLite reads (on a copy made below)
    for f in path.parent.glob("*-shm"):
        f.unlink()
    before = sorted(os.listdir(path.parent))
    with pytest.raises(InputError) as err:
        _ingested_kernels(tmp_path / "s.duckdb", path)
    msg = str(err.value)
    assert "write-ahead log" in msg and "export.sqlite-wal" in msg and "\n" not in msg
    assert sorted(os.listdir(path.parent)) == before  # no -shm, no -wal touched


def test_wal_mode_file_without_a_log_is_read_and_left_alone(tmp_path, reader):
    path = _plain(tmp_path)
    original = _ingested_kernels(tmp_path / "a.duckdb", path)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()  # the last connection checkpoints and deletes the -wal and -shm files
    assert path.read_bytes()[18:20] == b"\x02\x02"
    before = sorted(os.listdir(tmp_path))
    assert _ingested_kernels(tmp_path / "b.duckdb", path) == original
    assert sorted(os.listdir(tmp_path)) == sorted([*before, "b.duckdb"])
    assert original == _count(path)  # (SQLite itself makes -wal and -shm files here)


def test_hot_journal_is_refused(tmp_path, reader):
    """A writer stopped mid-transaction: its changes partly in the file, the rollback
    journal beside it (SQLite would roll them back before reading)."""
    work = _plain(tmp_path, name="work.sqlite")
    con = sqlite3.connect(work, isolation_level=None)
    con.execute("PRAGMA cache_size=1")  # dirty pages spill into the file before the commit
    con.execute("BEGIN")
    con.execute(f"DELETE FROM {KERNELS}")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    folder = tmp_path / "hot"
    folder.mkdir()
    shutil.copy(work, folder / "export.sqlite")
    shutil.copy(f"{work}-journal", folder / "export.sqlite-journal")
    con.execute("ROLLBACK")
    con.close()
    path = folder / "export.sqlite"
    with pytest.raises(InputError) as err:
        _ingested_kernels(tmp_path / "s.duckdb", path)
    assert "rollback journal" in str(err.value) and "export.sqlite-journal" in str(err.value)
    # a journal whose header is zeroed (journal_mode=PERSIST after a commit) is not hot
    (folder / "export.sqlite-journal").write_bytes(bytes(512))
    shutil.copy(work, path)
    assert _ingested_kernels(tmp_path / "s.duckdb", path) == _count(work)


# --- point 4: NVTX names registered through StringIds only -----------------------------

def _registered(src: Path, dst: Path) -> Path:
    """The export with every NVTX text (range and domain names) moved to StringIds and
    referenced by textId, as nvtx3 registered strings are: NVTX_EVENTS.text NULL throughout."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    base = con.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
    texts = [r[0] for r in con.execute("SELECT DISTINCT text FROM NVTX_EVENTS WHERE text IS NOT NULL ORDER BY 1")]
    for i, text in enumerate(texts):
        con.execute("INSERT INTO StringIds VALUES (?, ?)", (base + i, text))
        con.execute("UPDATE NVTX_EVENTS SET textId = ?, text = NULL WHERE text = ?", (base + i, text))
    con.commit()
    assert con.execute("SELECT count(text) FROM NVTX_EVENTS").fetchone()[0] == 0
    con.close()
    return dst


@pytest.mark.parametrize("scen", ["hstu_mixed", "multithread"])
def test_registered_nvtx_names_only(tmp_path, scen, reader, nsys_db):
    path = _registered(_plain(tmp_path, scen), tmp_path / "registered.sqlite")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(path, name=scen)
        for q in ("nvtx-summary", "nvtx-gpu-projection", "nvtx-ranges", "kernels-by-nvtx"):
            assert tk.query(q, limit=0).equals(nsys_db.query(q, run=scen, limit=0)), q


# --- point 5: the page decoder never answers where SQLite would not --------------------

def _leaf_pages(path: Path, table: str) -> list[int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return [r[0] for r in con.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' "
                                          "ORDER BY path", [table])]


def _poke(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def test_leaf_page_without_cells_is_not_read_as_empty(tmp_path, decoder):
    """A leaf page whose cell count is 0 is corrupt to SQLite ("database disk image is
    malformed"); the decoder lost its rows silently (52,023 API calls of 52,127)."""
    path = _plain(tmp_path)
    table, cols = "CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "correlationId"]
    leaf = _leaf_pages(path, table)[3]
    _poke(path, (leaf - 1) * 4096 + 3, b"\x00\x00")
    with sqlite3.connect(path) as con, pytest.raises(sqlite3.DatabaseError, match="malformed"):
        con.execute(f"SELECT * FROM {table}").fetchall()
    with pytest.raises(si.Unsupported):
        si.read_int_columns(path, table, cols)
    with pytest.raises(InputError) as err:
        _ingested_kernels(tmp_path / "s.duckdb", path)
    assert "malformed" in str(err.value) and table in str(err.value)
    assert not (tmp_path / "s.duckdb").exists()


def test_record_with_bytes_past_its_values_is_declined(tmp_path, decoder):
    """A record whose header ends with the last column read but whose payload is longer
    than its values: SQLite reading that column reports corruption; the decoder declines."""
    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [(i, 7) for i in range(200)])
    (leaf,) = _leaf_pages(path, "t")
    page = bytearray(path.read_bytes()[(leaf - 1) * 4096:leaf * 4096])
    cell = int.from_bytes(page[8 + 2 * 100:10 + 2 * 100], "big")  # row 101: payload 5, rowid 101
    assert page[cell:cell + 7] == bytes([5, 101, 3, 1, 1, 100, 7])  # header (3 bytes), a, b
    page[cell + 4] = 9  # b: the constant 1 (no bytes), so one payload byte is left over
    _poke(path, (leaf - 1) * 4096, bytes(page))
    with sqlite3.connect(path) as con, pytest.raises(sqlite3.DatabaseError, match="malformed"):
        con.execute("SELECT a, b FROM t").fetchall()
    with pytest.raises(si.Unsupported):
        si.read_int_columns(path, "t", ["a", "b"])
    assert si.read_int_columns(path, "t", ["a"]).column("a").to_pylist() == list(range(200))  # SQLite reads it too
    with sqlite3.connect(path) as con:
        assert [r[0] for r in con.execute("SELECT a FROM t")] == list(range(200))


@pytest.mark.parametrize("value", ["'x'", "x'00ff'", '"end" + 0.5'])
def test_value_of_another_type_in_an_integer_column(tmp_path, value, reader):
    """SQLite keeps TEXT, BLOB or REAL written into an INTEGER column; nsys never writes
    one. One line, exit 2 (it was an internal ArrowInvalid error)."""
    msg = _refused(tmp_path, f'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = {value} WHERE rowid = 5')
    assert "CUPTI_ACTIVITY_KIND_RUNTIME column end holds" in msg and "\n" not in msg


def test_text_that_is_not_utf8_is_read_with_replacement_characters(tmp_path, reader):
    """A program that names NVTX ranges through the ASCII API in Latin-1 (or a tool that
    wrote other bytes) leaves text that is not UTF-8: ingested with U+FFFD in their place
    (it was an internal UnicodeDecodeError, or DuckDB refusing the insert)."""
    path = _plain(tmp_path, "odd_nvtx")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE TARGET_INFO_GPU SET name = CAST(x'41ff42' AS TEXT)")
        sid = con.execute(f"SELECT demangledName FROM {KERNELS} LIMIT 1").fetchone()[0]
        con.execute("UPDATE StringIds SET value = CAST(x'6b65726e656cff' AS TEXT) WHERE id = ?", [sid])
        con.execute("UPDATE NVTX_EVENTS SET text = CAST(x'72e96e6765' AS TEXT) "
                    "WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS WHERE text IS NOT NULL)")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(path)
        assert tk.runs()["gpu"][0] == "A\ufffdB"
        assert "kernel\ufffd" in tk.query("top-kernels", limit=0)["name"].to_list()
        assert tk.sql("SELECT count(*) AS n FROM nvtx_ranges WHERE text = 'r\ufffdnge'")["n"][0] == 1


@pytest.mark.parametrize("table", [KERNELS, "CUPTI_ACTIVITY_KIND_RUNTIME"])
def test_work_that_ends_before_it_starts_is_refused(tmp_path, table, reader):
    """A kernel or API call whose end precedes its start would sum into negative totals
    and shares: the export is refused, naming the table and the first such row."""
    msg = _refused(tmp_path, f'UPDATE {table} SET "end" = start - 1000 WHERE rowid IN (3, 7)')
    assert f"table {table}: 2 rows end before they start (the first: row 3," in msg and "\n" not in msg
    assert not (tmp_path / "s.duckdb").exists()


@pytest.mark.parametrize(("table", "where"), [
    (KERNELS, "rowid = 4"),
    ("OSRT_API", "rowid = 2"),
    ("NVTX_EVENTS", "rowid = (SELECT min(rowid) FROM NVTX_EVENTS WHERE eventType = 59)"),
])
def test_work_that_ends_long_after_the_capture_stopped_is_refused(tmp_path, table, where):
    """An end of INT64_MAX (a damaged clock value) was ingested: top-kernels then showed a
    kernel of 292 years. No row of the 64 real exports ends after ANALYSIS_DETAILS.stopTime;
    one that ends more than an hour (or the capture's length) after it is refused, naming the
    table, the row and when the capture stopped. An hour late is still read."""
    msg = _refused(tmp_path, f'UPDATE {table} SET "end" = 9223372036854775807 WHERE {where}')
    noun = "range" if table == "NVTX_EVENTS" else "row"
    assert re.search(rf"table {table}: 1 {noun} ending long after the capture stopped at \d\.\d{{3}} s \(the first: "
                     r"row [\d,]+, end 9223372036854775807 ns\); the export is corrupt$", msg), msg
    assert not (tmp_path / "s.duckdb").exists()
    path = _plain(tmp_path, name="late.sqlite")
    with sqlite3.connect(path) as con:
        stop = con.execute("SELECT max(stopTime) FROM ANALYSIS_DETAILS").fetchone()[0]
        con.execute(f'UPDATE {table} SET "end" = {stop} + 3600 * 1000000000 WHERE {where}')
    with tracekit.open(tmp_path / "ok.duckdb") as tk:
        tk.ingest(path)


def test_a_capture_longer_than_an_hour_bounds_ends_by_its_own_length(tmp_path):
    """The bound is the capture's length where that is longer than an hour: a capture that
    stopped at 2 h takes an end at 3.5 h and refuses one at 4.5 h."""
    hour = 3600 * 10**9
    path = _plain(tmp_path, name="long.sqlite")
    with sqlite3.connect(path) as con:
        con.execute(f"UPDATE ANALYSIS_DETAILS SET stopTime = {2 * hour}")
        con.execute(f'UPDATE {KERNELS} SET "end" = {7 * hour // 2} WHERE rowid = 4')
    with tracekit.open(tmp_path / "ok.duckdb") as tk:
        tk.ingest(path)
    msg = _refused(tmp_path, f"UPDATE ANALYSIS_DETAILS SET stopTime = {2 * hour}",
                   f'UPDATE {KERNELS} SET "end" = {9 * hour // 2} WHERE rowid = 4')
    assert f"table {KERNELS}: 1 row ending long after the capture stopped at 7,200.000 s" in msg


def _nullable(table: str) -> list[str]:
    """Statements that drop ``table``'s NOT NULL constraints (a damaged export may lack them)."""
    return ["PRAGMA writable_schema = ON",
            f"UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE name = '{table}'"]


@pytest.mark.parametrize(("table", "statement", "said"), [
    (KERNELS, f"UPDATE {KERNELS} SET start = NULL WHERE rowid % 7 = 0",
     f"table {KERNELS}: {{n}} rows without a start or an end time (the first: row 7, start NULL, end "),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", 'UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET "end" = NULL WHERE rowid % 5 = 0',
     "table CUPTI_ACTIVITY_KIND_MEMCPY: {n} rows without a start or an end time (the first: row 5, start "),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL WHERE rowid % 5 = 0",
     "table CUPTI_ACTIVITY_KIND_RUNTIME: {n} calls without a thread (the first: row 5, start "),
    ("NVTX_EVENTS", "UPDATE NVTX_EVENTS SET start = NULL WHERE eventType = 59 AND rowid % 11 = 0",
     "table NVTX_EVENTS: {n} ranges without a start time (the first: row "),
    ("NVTX_EVENTS", 'UPDATE NVTX_EVENTS SET "end" = start - 5 WHERE eventType = 59 AND rowid % 13 = 0',
     "table NVTX_EVENTS: {n} ranges that end before they start (the first: row "),
])
def test_rows_without_their_times_or_ending_first_are_refused(tmp_path, reader, table, statement, said):
    """Kernels, copies or API calls without a start or an end were ingested without a word:
    counted by top-kernels and left out of its sums (2,400 instances over 2,058 timed ones),
    and `export trace` failed with an internal error; API calls without a thread, and NVTX
    ranges without a start or that end first (a negative min_ns in nvtx-summary) likewise.
    Refused, as kernels that end before they start are."""
    path = _plain(tmp_path)
    con = sqlite3.connect(path, isolation_level=None)
    for stmt in _nullable(table):
        con.execute(stmt)
    con.close()  # (the schema read again: the constraints gone)
    con = sqlite3.connect(path, isolation_level=None)
    n = con.execute(statement).rowcount
    con.close()
    with pytest.raises(InputError) as err:
        _ingested_kernels(tmp_path / "s.duckdb", path)
    msg = str(err.value)
    assert said.format(n=f"{n:,}") in msg and msg.endswith("; the export is corrupt") and "\n" not in msg, msg
    assert not (tmp_path / "s.duckdb").exists()


@pytest.mark.parametrize("statements", [
    ["DELETE FROM NVTX_EVENTS"],
    ["DELETE FROM NVTX_EVENTS WHERE rowid > 1", "UPDATE NVTX_EVENTS SET eventType = 75, \"end\" = NULL, "
                                                "text = 'mydomain'"],
])
def test_an_export_whose_nvtx_events_hold_no_range_ingests(tmp_path, reader, statements):
    """A program whose libraries only registered an NVTX domain (or named threads): NVTX traced,
    no range. The ingest failed with an internal error (the ranges' names taken of an empty
    list); its kernels are each in no range."""
    path = _plain(tmp_path)
    with sqlite3.connect(path) as con:
        for stmt in statements:
            con.execute(stmt)
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(path)
        assert tk.sql("SELECT count(*) AS n FROM nvtx_ranges")["n"][0] == 0
        (path_row,) = tk.query("kernels-by-nvtx").iter_rows(named=True)
        assert path_row["path"] == "(no range)" and path_row["launches"] == _count(path)


def test_an_nvtx_range_without_a_thread_is_refused(tmp_path, reader):
    """A push/pop range whose globalTid is NULL cannot be nested on its thread: a one-line
    refusal naming the table and the first such row, not an internal error inside the
    nesting; marks without a thread still ingest."""
    msg = _refused(tmp_path, "UPDATE NVTX_EVENTS SET globalTid = NULL WHERE rowid = "
                   "(SELECT min(rowid) FROM NVTX_EVENTS WHERE eventType = 59)")
    assert "table NVTX_EVENTS: 1 range without a thread (the first: row " in msg and ", globalTid NULL)" in msg
    assert not (tmp_path / "s.duckdb").exists()
    path = _plain(tmp_path, "odd_nvtx", "marks.sqlite")
    with sqlite3.connect(path) as con:
        assert con.execute("UPDATE NVTX_EVENTS SET globalTid = NULL WHERE eventType = 34").rowcount == 2
    with tracekit.open(tmp_path / "marks.duckdb") as tk:
        tk.ingest(path)
        assert tk.sql("SELECT count(*) AS n FROM nvtx_marks")["n"][0] == 2


def test_a_string_table_without_its_values_is_refused(tmp_path, reader):
    """(A KeyError of pyarrow's, an internal error.)"""
    msg = _refused(tmp_path, "ALTER TABLE StringIds RENAME COLUMN value TO v")
    assert re.search(r": table StringIds lacks column value \(export schema [0-9.]+\); the export is corrupt$", msg), msg


def test_an_emptied_string_table_is_refused(tmp_path, reader):
    """Every kernel's name id dangling (StringIds emptied): refused, not every kernel
    ingested under one NULL name (it was DuckDB's binder error on the empty table)."""
    msg = _refused(tmp_path, "DELETE FROM StringIds")
    assert f"none of the names of table {KERNELS} (column demangledName) is in StringIds (0 strings)" in msg


def test_database_size_in_the_header_is_obeyed(tmp_path, decoder):
    """Pages past the page count in the file's header do not exist for SQLite (a table
    that reaches one is corrupt to it), whatever the file's size."""
    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [(i, -i) for i in range(5000)])
    last = max(_leaf_pages(path, "t"))
    data = path.read_bytes()
    assert data[24:28] == data[92:96] and last == len(data) // 4096  # the count is valid
    _poke(path, 28, (last - 1).to_bytes(4, "big"))
    with sqlite3.connect(path) as con, pytest.raises(sqlite3.DatabaseError, match="malformed"):
        con.execute("SELECT a FROM t").fetchall()
    with pytest.raises(si.Unsupported):
        si.read_int_columns(path, "t", ["a", "b"])


# --- point 6: the input changed while it is read ---------------------------------------

def test_file_truncated_after_opening_is_reported_not_read(tmp_path, decoder):
    path = _plain(tmp_path, "many_kernels")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", [KERNELS]).fetchone()[0]
    f = si._File(path)
    try:
        leaves = si._leaves(f, root)
        os.truncate(path, (int(leaves[len(leaves) // 2]) - 1) * 4096)
        with pytest.raises(si.Changed, match="while it was read"):
            f.headers(leaves, threads=2)
    finally:
        f.close()


def test_file_truncated_between_the_headers_and_the_rows_is_reported(tmp_path, decoder, monkeypatch):
    """The rows' pages are read again after the header pass: a file that shrinks in
    between is reported as changed, not decoded from what is left."""
    path = _plain(tmp_path, "many_kernels")
    headers = si._File.headers

    def then_truncate(f, pages, threads):
        out = headers(f, pages, threads)
        os.truncate(path, (int(pages[len(pages) // 2]) - 1) * 4096)
        return out

    monkeypatch.setattr(si._File, "headers", then_truncate)
    with pytest.raises(si.Changed, match="while it was read"):
        si.read_int_columns(path, KERNELS, ["start", "end"], threads=2)


def _grown(tmp_path: Path) -> Path:
    """A real export with its kernels and API calls copied 8 times over (34 MB): reading
    it takes long enough to be cut short."""
    path = _plain(tmp_path, "many_kernels", "grown.sqlite")
    with sqlite3.connect(path) as con:
        for _ in range(3):
            for table in (KERNELS, "CUPTI_ACTIVITY_KIND_RUNTIME"):
                con.execute(f"INSERT INTO {table} SELECT * FROM {table}")
    return path


def test_a_refused_export_leaves_the_store_byte_for_byte(tmp_path):
    """An export refused after the store was opened for writing (cut short, damaged)
    leaves the store's file exactly as it was, not only its content; the schema is
    not re-created on every open."""
    from tracekit.cli import main as cli_main

    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(NSYS_EXPORTS["multiproc"])
    whole = _plain(tmp_path, "multiproc", "whole.sqlite")
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 3])
    before = db.read_bytes()
    for bad in (cut, cut, whole.with_name("nothing.sqlite")):
        assert cli_main(["--db", str(db), "ingest", str(bad)]) == 2
        assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("s.duckdb")) == ["s.duckdb"]


@pytest.mark.slow
def test_export_truncated_while_ingest_reads_it(tmp_path):
    """Another process truncates the export while `tracekit ingest` reads it (as soon as
    the ingest maps the file, or some time after it opens it): never a signal (it was
    SIGBUS, exit 135), exit 2 with one line and the store unchanged, or exit 0 with
    every row when the reading was done before the cut."""
    grown = _grown(tmp_path)
    expected = _count(grown)
    pristine, db = tmp_path / "pristine.duckdb", tmp_path / "s.duckdb"
    with tracekit.open(pristine) as tk:
        tk.ingest(NSYS_EXPORTS["multithread"])
    before = store_state(pristine)
    outcomes = []
    for delay in (0.0, 0.1, 0.3):
        shutil.copy(pristine, db)
        path = tmp_path / "cut.sqlite"
        shutil.copy(grown, path)
        target = str(path.resolve())
        proc = subprocess.Popen([sys.executable, "-m", "tracekit.cli", "--db", str(db), "ingest", str(path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        opened = cut = None
        while proc.poll() is None and cut is None:
            try:
                maps = Path(f"/proc/{proc.pid}/maps").read_text()
                fds = [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{proc.pid}/fd")]
            except OSError:
                continue
            if opened is None and target in fds:
                opened = time.monotonic()
            if target in maps or (opened is not None and time.monotonic() - opened >= delay):
                os.truncate(path, path.stat().st_size // 2 + 1000)
                cut = proc.poll() is None
            time.sleep(0.0005)
        out, err = proc.communicate()
        assert proc.returncode in (0, 2), (delay, proc.returncode, err)
        if proc.returncode == 2:
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
            assert store_state(db) == before
        else:  # read whole before the cut
            with tracekit.open(db) as tk:
                assert tk.sql("SELECT count(*) AS n FROM kernels JOIN runs USING (run_id) "
                              "WHERE runs.name = 'cut'")["n"][0] == expected
        outcomes.append((cut, proc.returncode))
    assert any(cut for cut, _ in outcomes), outcomes  # at least one cut while the ingest ran


def test_an_export_s_tables_are_what_sqlite_says_they_are(tmp_path):
    """The export's table names, columns, declared types and row counts are read in a few
    statements of one result row each (source.py); they equal SQLite's own answers table
    by table (sqlite_master, PRAGMA table_info, max(rowid)) on real exports, and on one
    with odd tables added: quotes and commas in names, no rowids, a virtual table."""
    from tracekit.ingest.nsys.source import Export, resolve_tables

    odd = tmp_path / "odd.sqlite"
    with materialized(NSYS_EXPORTS["many_kernels"]) as path:
        shutil.copy(path, odd)
    name = 'it\'s, "odd"'
    quoted = '"' + name.replace('"', '""') + '"'
    con = sqlite3.connect(odd)
    con.execute(f"""CREATE TABLE {quoted} ("a,b" INTEGER, "c'd" text, e)""")
    con.execute(f"INSERT INTO {quoted} VALUES (1, 'x', 2.5), (2, NULL, NULL)")
    con.execute("CREATE TABLE no_rowids (k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID")
    con.execute("INSERT INTO no_rowids VALUES ('a', 1)")
    con.execute("CREATE VIRTUAL TABLE boxes USING rtree(id, x0, x1)")
    con.commit()
    con.close()
    checked = 0
    for scen in ("many_kernels", "hstu_capture", "registered_nvtx", "multiproc", "cpu_only", None):
        with materialized(NSYS_EXPORTS[scen]) if scen else contextlib.nullcontext(odd) as path:
            export, ref = Export(Path(path)), sqlite3.connect(path)
            try:
                names = [r[0] for r in ref.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                assert export.tables == resolve_tables(names)
                for base, actual in export.tables.items():
                    q = actual.replace('"', '""')
                    want = {r[1]: (r[2] or "").upper() for r in ref.execute(f'PRAGMA table_info("{q}")')}
                    assert export.declared_types(base) == want and export.columns(base) == set(want), actual
                    if actual != "no_rowids":
                        rows = ref.execute(f'SELECT max(rowid) FROM "{q}"').fetchone()[0] or 0
                        assert export.row_estimate(base) == rows, actual
                    checked += 1
                if scen is None:
                    assert {name, "no_rowids", "boxes"} <= set(export.tables)
                    assert export.columns(name) == {"a,b", "c'd", "e"} and export.row_estimate(name) == 2
            finally:
                export.close()
                ref.close()
    assert checked > 100
    # and the export with the odd tables beside nsys's ingests as the export without them
    tk = tracekit.open(tmp_path / "s.duckdb")
    tk.ingest(odd, name="odd")
    with materialized(NSYS_EXPORTS["many_kernels"]) as path:
        tk.ingest(path, name="plain")
    counts = tk.sql("SELECT run_id, count(*) AS n FROM kernels GROUP BY run_id ORDER BY run_id")["n"].to_list()
    assert len(counts) == 2 and counts[0] == counts[1] > 0
    tk.close()
