"""Valid exports in the states SQLite leaves them in are read as SQLite reads them, and
files SQLite would not read are refused, never read differently (issue 13, points 3-6).

Every case starts from a real export (tests/data) changed the way a user's tools change
one: opened and edited by sqlite3 in WAL mode, left with a hot journal, names registered
through StringIds, pages corrupted, truncated while tracekit reads it."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import NSYS_EXPORTS, compiled_or_numpy

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
