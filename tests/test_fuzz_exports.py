"""Mutated real exports: tracekit answers what SQLite answers, or refuses (issue 13).

Each case takes a real nsys export from tests/data and changes it the way a damaged
disk, a cut download or another program changes one: bytes in B-tree pages, cell
pointers and counts, varints, serial types, child page numbers, the file header,
truncations (also of the export VACUUMed to 512-byte pages); and valid files SQLite
writes: page sizes from 512 to 65536 (VACUUM), auto_vacuum, WAL mode with and without
frames not yet checkpointed, hot rollback journals. For every file, with the compiled
page decoder and with its NumPy twin, the outcome must be one of:

* the ingest succeeds and every table's row count and sums of its timestamps equal
  what SQLite reads from the same file (SQLite itself must be able to read them), or
* the ingest is refused with a one-line ``TracekitError`` (the CLI's exit 2), and the
  store is byte for byte what it was.

A valid file is read, except one with a ``-wal`` holding frames or a hot ``-journal``
beside it: SQLite would apply those first, tracekit refuses it and names the file.

Never a different answer, an internal error (exit 1) or a signal (the subprocess
cases). Seeded: every run mutates the same bytes; a failure names its case.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NSYS_EXPORTS, compiled_or_numpy

import tracekit
from tracekit.errors import TracekitError
from tracekit.ingest import materialized
from tracekit.ingest import sqlite_ints as si

#: about a minute on the 2-core machine; runs by default (``-m "not slow"`` leaves it out)
pytestmark = pytest.mark.slow

#: store table -> (export table, its rows that the store table holds, (export column,
#: store column) of the timestamps summed)
_SPAN = (("start", "start_ns"), ("end", "end_ns"))
CHECKED = {
    "kernels": ("CUPTI_ACTIVITY_KIND_KERNEL", "", _SPAN),
    "api_calls": ("CUPTI_ACTIVITY_KIND_RUNTIME", "", _SPAN),
    "memcpy": ("CUPTI_ACTIVITY_KIND_MEMCPY", "", _SPAN),
    "memset": ("CUPTI_ACTIVITY_KIND_MEMSET", "", _SPAN),
    "syncs": ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "", _SPAN),
    "nvtx_ranges": ("NVTX_EVENTS", "WHERE eventType IN (59, 60, 70, 71)", (("start", "start_ns"),)),
    "nvtx_marks": ("NVTX_EVENTS", "WHERE eventType = 34", (("start", "ts_ns"),)),
    "cpu_samples": ("COMPOSITE_EVENTS", "", (("start", "ts_ns"),)),
    "cpu_sample_frames": ("SAMPLING_CALLCHAINS", "", (("id", "sample_id"),)),
    "thread_sched": ("SCHED_EVENTS", "", (("start", "ts_ns"),)),
}
#: the exports mutated: three real ones (cpu_hot: with the CPU's samples), and the first
#: VACUUMed to 512-byte pages (deeper trees, more interior pages, records near a page's end)
BASES = ["hstu_mixed", "odd_nvtx", "cpu_hot", "hstu_mixed_512"]
#: mutation kind -> cases of it per base export (case k takes variant k of the kind,
#: cycling, at positions drawn from its seed)
DAMAGE = {"byte": 4, "cell_pointer": 3, "cell_count": 4, "varint": 4, "serial_type": 5, "child": 4,
          "header": 6, "truncate": 3}
#: valid files SQLite writes: tracekit must read these, except that a write-ahead log
#: holding frames or a hot journal beside the export is refused (READ_OR_REFUSE)
REWRITES = {"page_size": 3, "auto_vacuum": 2, "wal_clean": 1, "wal_frames": 1, "wal_checkpointed": 1,
            "hot_journal": 1}
REFUSED = {"wal_frames": "-wal", "wal_checkpointed": "-wal", "hot_journal": "-journal"}
KINDS = {**DAMAGE, **REWRITES}
CASES = [(base, kind, k) for base in BASES for kind, n in KINDS.items() for k in range(n)
         if not (base.endswith("_512") and kind in REWRITES)]


@pytest.fixture(params=["native", "numpy"])
def decoder(request, monkeypatch):
    return compiled_or_numpy(request, monkeypatch, si, "_native", "tracekit/ingest/_pages.c")


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("originals")
    out = {}
    for base in BASES:
        if base.endswith("_512"):
            continue
        with materialized(NSYS_EXPORTS[base]) as src:
            out[base] = folder / f"{base}.sqlite"
            shutil.copy(src, out[base])
    for base in BASES:
        if base.endswith("_512"):
            out[base] = folder / f"{base}.sqlite"
            shutil.copy(out[base.removesuffix("_512")], out[base])
            with sqlite3.connect(out[base], isolation_level=None) as con:
                con.execute("PRAGMA page_size = 512")
                con.execute("VACUUM")
                assert con.execute("PRAGMA page_size").fetchone()[0] == 512
    return out


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, bytes]:
    """A store holding one run, and its bytes."""
    db = tmp_path_factory.mktemp("pristine") / "store.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(NSYS_EXPORTS["multithread"])
    return db, db.read_bytes()


# --- the mutations -------------------------------------------------------------------

def _pages(path: Path) -> list[tuple[str, int, str]]:
    """(table, page number, 'leaf' | 'internal') of every page of the checked tables."""
    tables = sorted({t for t, _, _ in CHECKED.values()})
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as con:
        return con.execute(f"SELECT name, pageno, pagetype FROM dbstat WHERE name IN ({', '.join('?' * len(tables))}) "
                           "AND pagetype IN ('leaf', 'internal') ORDER BY name, pageno", tables).fetchall()


def _varint_len(data: bytes | bytearray, at: int) -> int:
    n = 1
    while n < 9 and data[at + n - 1] >= 0x80:
        n += 1
    return n


def _mutate(src: Path, dst: Path, kind: str, k: int, rng: random.Random) -> None:
    """Write the mutated copy of ``src`` to ``dst`` (and files beside it)."""
    if kind in ("page_size", "auto_vacuum", "wal_clean", "wal_frames", "wal_checkpointed", "hot_journal"):
        _rewrite(src, dst, kind, k, rng)
        return
    data = bytearray(src.read_bytes())
    ps = int.from_bytes(data[16:18], "big")
    pages = _pages(src)
    leaves = [p for _, p, t in pages if t == "leaf"]
    internal = [p for _, p, t in pages if t == "internal"]
    if kind == "truncate":
        cut = [rng.randrange(100, len(data)), rng.randrange(1, len(data) // ps) * ps, len(data) - 1][k % 3]
        dst.write_bytes(bytes(data[:cut]))
        return
    if kind == "header":  # page size, write and read versions, reserved bytes, fixed bytes, page count
        at, width = [(16, 2), (18, 1), (19, 1), (20, 1), (21, 3), (28, 4)][k % 6]
        data[at:at + width] = rng.randbytes(width)
        dst.write_bytes(bytes(data))
        return
    page = rng.choice(internal if kind == "child" and internal else leaves)
    base = (page - 1) * ps
    h = base + (100 if page == 1 else 0)
    ncell = int.from_bytes(data[h + 3:h + 5], "big")
    first_ptr = h + (12 if data[h] == 0x05 else 8)
    cell_of = [base + int.from_bytes(data[first_ptr + 2 * i:first_ptr + 2 * i + 2], "big") for i in range(ncell)]
    if kind == "byte":
        for _ in range([1, 2, 4, 8][k % 4]):
            data[base + rng.randrange(ps)] = rng.randrange(256)
    elif kind == "cell_pointer":  # anywhere, a few bytes off, another cell's
        i = rng.randrange(ncell)
        ptr = int.from_bytes(data[first_ptr + 2 * i:first_ptr + 2 * i + 2], "big")
        new = [rng.randrange(65536), ptr + rng.choice([-3, -1, 1, 2, 5]), cell_of[rng.randrange(ncell)] - base][k % 3]
        data[first_ptr + 2 * i:first_ptr + 2 * i + 2] = (new % 65536).to_bytes(2, "big")
    elif kind == "cell_count":
        new = [0, ncell - 1, ncell + 1, rng.randrange(65536)][k % 4]
        data[h + 3:h + 5] = (new % 65536).to_bytes(2, "big")
    elif kind == "varint":  # the payload size or the rowid: longer, or another value
        cell = rng.choice(cell_of)
        at = cell + (0 if k % 2 == 0 else _varint_len(data, cell))
        data[at] = 0x80 | data[at] if k % 4 < 2 else rng.randrange(256)
    elif kind == "serial_type":  # NULL, integers, constants, REAL, reserved, blob/text, two-byte
        cell = rng.choice(cell_of)
        rec = cell + _varint_len(data, cell)
        rec += _varint_len(data, rec)
        col = rng.randrange(1, max(2, data[rec]))  # a serial type inside the record header
        data[rec + col] = rng.choice([[0, 8, 9], [1, 2, 3, 4, 5, 6], [7, 10, 11], [12, 13, 14, 25], [0x81, 0xFF]][k % 5])
    elif kind == "child":  # any page, a leaf of a checked table, page 1, the page itself (a cycle)
        if data[h] == 0x05:
            i = rng.randrange(ncell + 1)  # a cell's child or the right-most pointer
            at = h + 8 if i == ncell else cell_of[i]
            new = [rng.randrange(1, len(data) // ps + 5), rng.choice(leaves), 1, page][k % 4]
            data[at:at + 4] = new.to_bytes(4, "big")
        else:  # a one-page table: its root's type byte
            data[h] = [0x05, 0x02, 0x0A, 0x00][k % 4]
    dst.write_bytes(bytes(data))


def _rewrite(src: Path, dst: Path, kind: str, k: int, rng: random.Random) -> None:
    """Valid files SQLite writes: page sizes, auto_vacuum, WAL mode, journals."""
    work = dst.parent.parent / "work.sqlite"
    shutil.copy(src, work)
    con = sqlite3.connect(work, isolation_level=None)
    try:
        if kind == "page_size":
            size = [512, 65536][k] if k < 2 else rng.choice([1024, 2048, 8192, 16384, 32768])
            con.execute(f"PRAGMA page_size = {size}")
            con.execute("VACUUM")
            assert con.execute("PRAGMA page_size").fetchone()[0] == size
        elif kind == "auto_vacuum":
            con.execute(f"PRAGMA auto_vacuum = {['FULL', 'INCREMENTAL'][k % 2]}")
            con.execute("VACUUM")
            con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid % 3 = 0")
        elif kind == "wal_clean":
            con.execute("PRAGMA journal_mode = WAL")
        elif kind in ("wal_frames", "wal_checkpointed"):
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA wal_autocheckpoint = 0")
            con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 2 = 0")
            con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = start + 1")
            if kind == "wal_checkpointed":
                con.execute("PRAGMA wal_checkpoint(PASSIVE)")
            shutil.copy(work, dst)
            shutil.copy(f"{work}-wal", f"{dst}-wal")
            return
        elif kind == "hot_journal":
            con.execute("PRAGMA cache_size = 1")
            con.execute("BEGIN")
            con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
            con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME")
            shutil.copy(work, dst)
            shutil.copy(f"{work}-journal", f"{dst}-journal")
            con.execute("ROLLBACK")
            return
    finally:
        con.close()
    shutil.copy(work, dst)


# --- the two sides -------------------------------------------------------------------

def _sqlite_answer(path: Path, scratch: Path) -> dict | str:
    """Per store table: (rows, sums of its timestamp columns) as SQLite reads the file
    (on a copy with what lies beside it: SQLite rolls back journals and makes -shm
    files), or why SQLite cannot answer."""
    scratch.mkdir()
    for f in path.parent.glob(path.name + "*"):
        shutil.copy(f, scratch / f.name)
    out = {}
    try:
        with sqlite3.connect(scratch / path.name) as con:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for store_table, (table, where, cols) in CHECKED.items():
                if table not in tables:
                    out[store_table] = (0, *(0 for _ in cols))
                    continue
                rows = con.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c, _ in cols)} FROM "{table}" {where}').fetchall()
                values = [v for r in rows for v in r if v is not None]
                if any(not isinstance(v, int) for v in values):
                    return f"{table} holds values that are not integers"
                out[store_table] = (len(rows), *(sum(r[i] for r in rows if r[i] is not None) for i in range(len(cols))))
    except sqlite3.Error as err:
        return f"SQLite: {err}"
    return out


def _store_answer(tk, run_id: int) -> dict:
    out = {}
    for store_table, (_, _, cols) in CHECKED.items():
        sums = ", ".join(f"coalesce(sum({c}), 0)" for _, c in cols)
        row = tk.con.execute(f"SELECT count(*), {sums} FROM {store_table} WHERE run_id = ?", [run_id]).fetchone()
        out[store_table] = tuple(int(v) for v in row)
    return out


def _case_file(originals, tmp_path: Path, base: str, kind: str, k: int) -> Path:
    path = tmp_path / "case" / "export.sqlite"
    path.parent.mkdir()
    _mutate(originals[base], path, kind, k, random.Random(f"{base}/{kind}/{k}"))
    return path


#: (case, decoder): every case with the compiled page decoder; with its NumPy twin (the
#: fallback where no C compiler built it), every valid rewrite and every other case of each
#: kind of damage (even k), for the suite's time
DECODED = [(c, "native") for c in CASES] + [(c, "numpy") for c in CASES if c[1] in REWRITES or c[2] % 2 == 0]


@pytest.mark.parametrize(("case", "decoder"), DECODED, indirect=["decoder"],
                         ids=["-".join(map(str, (*c, d))) for c, d in DECODED])
def test_mutated_export(case, decoder, originals, pristine, tmp_path):
    base, kind, k = case
    path = _case_file(originals, tmp_path, base, kind, k)
    expected = _sqlite_answer(path, tmp_path / "sqlite")
    db = tmp_path / "store.duckdb"
    shutil.copy(pristine[0], db)
    beside = sorted(p.name for p in path.parent.iterdir())
    tk = tracekit.open(db)
    try:
        res = tk.ingest(path, name="case")
    except TracekitError as err:
        tk.close()
        assert "\n" not in str(err), str(err)
        assert db.read_bytes() == pristine[1], f"{case}: the store changed although the ingest was refused ({err})"
        assert kind in DAMAGE or REFUSED.get(kind, "?") in str(err), f"{case}: a valid export refused ({err})"
    else:
        got = _store_answer(tk, res.run_id)
        tk.close()
        assert kind not in REFUSED, f"{case}: read although SQLite would apply the {REFUSED[kind]} file beside it"
        assert isinstance(expected, dict), f"{case}: tracekit answered where SQLite does not ({expected})"
        assert got == expected, case
    assert sorted(p.name for p in path.parent.iterdir()) == beside, f"{case}: files created beside the export"


#: cases run in a subprocess of the CLI: a crash in the readers is a signal there
SUBPROCESS_CASES = [("hstu_mixed", "cell_pointer", 0), ("hstu_mixed", "serial_type", 1),
                    ("odd_nvtx", "child", 0), ("hstu_mixed", "truncate", 0)]


@pytest.mark.parametrize("page_decoder", ["native", "numpy"])
@pytest.mark.parametrize("case", SUBPROCESS_CASES, ids=["-".join(map(str, c)) for c in SUBPROCESS_CASES])
def test_mutated_export_in_the_cli(case, page_decoder, originals, pristine, tmp_path):
    path = _case_file(originals, tmp_path, *case)
    expected = _sqlite_answer(path, tmp_path / "sqlite")
    db = tmp_path / "store.duckdb"
    shutil.copy(pristine[0], db)
    env = {"TRACEKIT_PAGE_DECODER": "numpy"} if page_decoder == "numpy" else {}
    proc = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(db), "ingest", str(path), "--name", "case"],
                          capture_output=True, text=True, env={**os.environ, **env})
    assert proc.returncode in (0, 2), (case, proc.returncode, proc.stderr)  # never 1, never a signal
    if proc.returncode == 2:
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert db.read_bytes() == pristine[1]
    else:
        assert isinstance(expected, dict), f"{case}: tracekit answered where SQLite does not ({expected})"
        with tracekit.open(db) as tk:
            run_id = tk.con.execute("SELECT run_id FROM runs WHERE name = 'case'").fetchone()[0]
            assert _store_answer(tk, run_id) == expected
