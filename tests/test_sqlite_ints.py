"""The page decoder of integer SQLite tables gives exactly what SQLite gives, in both
of its implementations (the compiled ``_pages`` module and NumPy).

On every real export (every table of integer columns), and on files made here for
what real exports rarely hold: every serial type, NULLs, deep B-trees, other page
sizes, deleted rows, and the cases it must decline (overflow, REAL or TEXT values,
short records, WITHOUT ROWID, INTEGER PRIMARY KEY, a truncated file)."""

from __future__ import annotations

import random
import sqlite3

import pyarrow as pa
import pytest
from conftest import NSYS_EXPORTS, compiled_or_numpy

import tracekit
from tracekit.ingest import materialized
from tracekit.ingest import sqlite_ints as si


@pytest.fixture(params=["native", "numpy"])
def decoder(request, monkeypatch):
    """Each test below runs with the compiled decoder and with the NumPy one."""
    return compiled_or_numpy(request, monkeypatch, si, "_native", "tracekit/ingest/_pages.c")


def _sqlite_rows(path, table, cols):
    with sqlite3.connect(path) as con:
        return con.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{table}" ORDER BY rowid').fetchall()


def _decoded_rows(path, table, cols, threads=2):
    t = si.read_int_columns(path, table, cols, threads=threads)
    assert t.column_names == cols and all(ty == pa.int64() for ty in t.schema.types)
    return list(zip(*(t.column(c).to_pylist() for c in cols), strict=True))


@pytest.mark.parametrize("scenario", sorted(NSYS_EXPORTS))
def test_every_integer_table_of_the_real_exports(scenario, monkeypatch, decoder):
    # small chunks: several chunks (and threads) even on the small exports
    monkeypatch.setattr(si, "CHUNK_ROWS", 97)
    with materialized(NSYS_EXPORTS[scenario]) as path, sqlite3.connect(path) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        decoded = set()
        for table in tables:
            info = con.execute(f'PRAGMA table_info("{table}")').fetchall()
            cols = [r[1] for r in info if (r[2] or "").upper() == "INTEGER" and not r[5]]
            if not cols or len(cols) < len(info) - 1:
                continue
            try:
                got = _decoded_rows(path, table, cols)
            except si.Unsupported:
                continue
            assert got == _sqlite_rows(path, table, cols), table
            decoded.add(table)
        # the tables it exists for are decoded, not declined (a capture without CUDA has no CUPTI table)
        want = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API"} & set(tables)
        assert want and want <= decoded


def _make(path, rows, page_size=4096, create="CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER)", shuffle=False):
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA page_size = {page_size}")
    con.execute(create)
    if shuffle:
        rows = [(i, *r) for i, r in enumerate(rows)]
        random.Random(7).shuffle(rows)
        con.executemany("INSERT INTO t (rowid, a, b, c) VALUES (?, ?, ?, ?)", rows)
    else:
        con.executemany("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()


EDGES = [0, 1, -1, 127, 128, -128, -129, 32767, 32768, -32769, 2**23 - 1, -(2**23), 2**23, 2**31 - 1,
         -(2**31), 2**31, 2**47 - 1, -(2**47), 2**47, 2**63 - 1, -(2**63), None]


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
def test_every_serial_type_and_deep_trees(tmp_path, page_size, decoder):
    rng = random.Random(page_size)
    rows = [(EDGES[i % len(EDGES)], rng.choice(EDGES), rng.randrange(-(2**40), 2**40)) for i in range(20000)]
    path = tmp_path / "t.sqlite"
    _make(path, rows, page_size=page_size, shuffle=True)
    for threads in (1, 2):
        assert _decoded_rows(path, "t", ["c", "a", "b"], threads) == _sqlite_rows(path, "t", ["c", "a", "b"])


def test_deleted_rows_and_freed_pages_are_not_read(tmp_path, decoder):
    path = tmp_path / "t.sqlite"
    _make(path, [(i, -i, i * 1000) for i in range(30000)])
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM t WHERE a % 3 = 0 OR (a > 5000 AND a < 20000)")
    assert _decoded_rows(path, "t", ["a", "b", "c"]) == _sqlite_rows(path, "t", ["a", "b", "c"])


def test_table_with_text_columns_reads_its_integer_columns(tmp_path, decoder):
    path = tmp_path / "t.sqlite"
    _make(path, [(i, "x" * (i % 50), i * 7) for i in range(5000)],
          create="CREATE TABLE t (a INTEGER, b TEXT, c INTEGER)")
    assert _decoded_rows(path, "t", ["c", "a"]) == _sqlite_rows(path, "t", ["c", "a"])


def test_record_headers_of_several_bytes_per_column(tmp_path, decoder):
    """Text of 58 bytes or more between the integer columns has a serial type of two
    varint bytes: the compiled decoder reads such headers; NumPy may decline them."""
    path = tmp_path / "t.sqlite"
    _make(path, [(i - 2**40, "y" * (i % 300), i * 3) for i in range(3000)],
          create="CREATE TABLE t (a INTEGER, b TEXT, c INTEGER)")
    try:
        got = _decoded_rows(path, "t", ["c", "a"])
    except si.Unsupported:
        assert decoder == "numpy"
        return
    assert got == _sqlite_rows(path, "t", ["c", "a"])


@pytest.mark.parametrize("case", ["overflow", "overflow_small", "real", "text", "short", "without_rowid", "ipk",
                                  "truncated"])
def test_declines_what_it_cannot_decode(tmp_path, case, decoder):
    path = tmp_path / "t.sqlite"
    cols = ["a", "c"]
    if case == "overflow":
        _make(path, [(1, "y" * 9000, 2)], create="CREATE TABLE t (a INTEGER, b TEXT, c INTEGER)")
    elif case == "overflow_small":  # just past what a 4 KiB page holds locally (usable - 35)
        _make(path, [(1, "y" * 4060, 2)], create="CREATE TABLE t (a INTEGER, b TEXT, c INTEGER)")
    elif case == "real":
        _make(path, [(1, 2, 3), (1.5, 2, 3)])
    elif case == "text":
        _make(path, [(1, 2, 3), ("abc", 2, 3)])
    elif case == "short":
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
            con.execute("INSERT INTO t VALUES (1, 2)")
            con.execute("ALTER TABLE t ADD COLUMN c INTEGER DEFAULT 5")
    elif case == "without_rowid":
        _make(path, [(1, 2, 3)], create="CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER, c INTEGER) WITHOUT ROWID")
    elif case == "ipk":
        _make(path, [(1, 2, 3)], create="CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER, c INTEGER)")
    elif case == "truncated":
        _make(path, [(i, i, i) for i in range(5000)])
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2 + 100])
    with pytest.raises(si.Unsupported):
        si.read_int_columns(path, "t", cols)


def test_declined_tables_are_read_through_sqlite(tmp_path, page_decoder_off, nsys_db):
    """An export the page decoder declines ingests through SQLite to the same store."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["hstu_mixed"], name="hstu_mixed")
        for q in ("top-kernels", "api-summary", "kernel-exec", "nvtx-gpu-projection", "gpu-utilization"):
            assert tk.query(q, limit=0).equals(nsys_db.query(q, run="hstu_mixed", limit=0)), q


def test_corrupted_pages_are_declined_or_read_exactly(tmp_path, decoder):
    """Random bytes overwritten in a real export: the decoder either declines the table
    or gives exactly what SQLite gives (never values SQLite would refuse to read)."""
    cols = ["start", "end", "correlationId", "globalTid", "nameId"]
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    with materialized(NSYS_EXPORTS["hstu_mixed"]) as path:
        data = path.read_bytes()
    rng = random.Random(3)
    outcomes = {"declined": 0, "equal": 0}
    for trial in range(80):
        broken = bytearray(data)
        for _ in range(rng.choice([1, 5, 50])):
            broken[rng.randrange(100, len(broken))] = rng.randrange(256)
        f = tmp_path / f"broken{trial}.sqlite"
        f.write_bytes(broken)
        try:
            got = _decoded_rows(f, table, cols)
        except si.Unsupported:
            outcomes["declined"] += 1
            continue
        assert got == _sqlite_rows(f, table, cols), trial  # SQLite reads it too, the same
        outcomes["equal"] += 1
        f.unlink()
    assert outcomes["declined"] > 5 and outcomes["equal"] > 5, outcomes


#: The parent reads (the module's pool now has threads), forks, and the child reads again:
#: exit 0 when the child read the same rows, 5 when it did not finish.
_FORK_AFTER_A_READ = r"""
import os, sys, time
from tracekit.ingest import sqlite_ints as si
if sys.argv[2] == "numpy":
    si._native = None
si.CHUNK_ROWS = 97  # several chunks: the pool is used
cols = ["start", "end", "correlationId"]

def rows():
    t = si.read_int_columns(sys.argv[1], "CUPTI_ACTIVITY_KIND_KERNEL", cols, threads=2)
    return list(zip(*(t.column(c).to_pylist() for c in cols)))

want = rows()
pid = os.fork()
if pid == 0:
    try:
        os._exit(0 if rows() == want else 3)
    finally:
        os._exit(4)
deadline = time.monotonic() + 60
while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
    time.sleep(0.05)
if done[0] == 0:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    sys.exit(5)
sys.exit(os.waitstatus_to_exitcode(done[1]))
"""


def test_a_forked_child_reads_as_its_parent(decoder):
    """The chunks run on a pool the module keeps; a child forked after a read has none
    of its threads and must read with threads of its own, not wait for them forever.
    (In a fresh interpreter: a test process that has run many tests can be refused the
    fork itself, ENOMEM, by the memory it holds.)"""
    import subprocess
    import sys

    with materialized(NSYS_EXPORTS["many_kernels"]) as path:
        proc = subprocess.run([sys.executable, "-c", _FORK_AFTER_A_READ, str(path), decoder],
                              capture_output=True, text=True, timeout=180)
    assert proc.returncode != 5, "the forked child did not finish its read"
    assert proc.returncode == 0, proc.stderr[-2000:]
