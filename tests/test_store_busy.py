"""A store another process holds: DuckDB's lock error becomes one line naming the holder
(the ingest under way, from the writer info file beside the store), exit 2."""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tracekit
from tracekit.store import writer_info_path

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "many.sqlite"
    with lzma.open(DATA / "nsys_many_kernels" / "export.sqlite.xz") as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracekit.cli", *args], capture_output=True, text=True, timeout=120)


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, "the ingest ended before it took the store's lock"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)


def test_a_reader_during_an_ingest_is_told_which_ingest_holds_the_store(small_store, export):
    info = writer_info_path(small_store)
    ingest = subprocess.Popen([sys.executable, "-m", "tracekit.cli", "--db", str(small_store), "ingest", str(export)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(info, ingest)
        os.kill(ingest.pid, signal.SIGSTOP)  # the ingest holds the lock for as long as the readers need
        try:
            assert json.loads(info.read_text())["pid"] == ingest.pid
            for args in (["query", "top-kernels"], ["sql", "SELECT count(*) FROM runs"], ["runs"],
                         ["ingest", str(DATA / "ncu_sections" / "report.ncu-rep.xz")]):
                res = _cli("--db", str(small_store), *args)
                lines = res.stderr.strip().splitlines()
                assert res.returncode == 2 and len(lines) == 1, (args, res.stderr)
                assert f"the store is being written by `tracekit ingest {export}` (pid {ingest.pid}, since " \
                    in lines[0], lines[0]
                assert lines[0].endswith("try again when it finishes"), lines[0]
        finally:
            os.kill(ingest.pid, signal.SIGCONT)
        out, err = ingest.communicate(timeout=120)
    finally:
        if ingest.poll() is None:
            ingest.kill()
    assert ingest.returncode == 0 and "run 3 (many, nsys)" in out, err
    assert not info.exists()  # removed with the lock
    res = _cli("--db", str(small_store), "runs")
    assert res.returncode == 0 and "many" in res.stdout, res.stderr


def test_another_program_holding_the_store_is_named_and_a_stale_info_file_is_not_believed(small_store):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    writer_info_path(small_store).write_text(json.dumps(
        {"pid": dead.pid, "what": "`tracekit ingest old.sqlite`", "since": "2026-01-01 00:00:00 UTC"}))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; con = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
         "sys.stdin.read()", str(small_store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        res = _cli("--db", str(small_store), "query", "top-kernels")
    finally:
        holder.communicate("", timeout=60)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert f"the store is in use by another process (pid {holder.pid}, " in lines[0], lines[0]
    assert "old.sqlite" not in lines[0] and lines[0].endswith("try again when it finishes")


def test_a_store_never_closed_leaves_no_writer_info(tmp_path):
    """``tracekit.open(db).ingest(f)`` without close: the writer info file goes when the
    interpreter exits (no stale file beside the store)."""
    db = tmp_path / "s.duckdb"
    export = DATA / "nsys_hstu_mixed" / "export.sqlite.xz"
    code = ("import sys, tracekit; tk = tracekit.open(sys.argv[1]); tk.ingest(sys.argv[2]); "
            "from tracekit.store import writer_info_path; print(writer_info_path(sys.argv[1]).exists())")
    out = subprocess.run([sys.executable, "-c", code, str(db), str(export)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"  # while the store is open
    assert not writer_info_path(db).exists()
    with tracekit.open(db, read_only=True) as tk:
        assert len(tk.runs()) == 1


def test_a_writer_that_fails_to_set_up_lets_the_store_go(tmp_path, monkeypatch):
    """An ingest into an existing store whose writer setup fails (a bad
    TRACEKIT_MEMORY_LIMIT) keeps neither the store's lock nor its half-set-up connection:
    another program can write the store meanwhile, and the same object's next ingest sets
    the writer up in full (tracekit's memory limit, not DuckDB's default)."""
    from tracekit.ingest.budget import duckdb_setting
    from tracekit.store import ingest_memory_limit

    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz")
    tk = tracekit.open(db)
    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", "bogus")
    with pytest.raises(tracekit.TracekitError, match="TRACEKIT_MEMORY_LIMIT='bogus'"):
        tk.ingest(DATA / "nsys_many_kernels" / "export.sqlite.xz")
    monkeypatch.delenv("TRACEKIT_MEMORY_LIMIT")
    out = _cli("--db", str(db), "runs")  # another process: not told the store is busy
    assert out.returncode == 0 and "1 row" in out.stdout, out.stderr
    assert tk.ingest(DATA / "nsys_many_kernels" / "export.sqlite.xz").run_id == 2
    got = tk.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]  # e.g. '11.2 GiB'
    want = duckdb_setting(ingest_memory_limit())  # e.g. '12052MB'
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}

    def size(text: str) -> float:
        number, unit = re.fullmatch(r"([0-9.]+)\s*([A-Za-z]+)", text.strip()).groups()
        return float(number) * units[unit]

    assert size(got) == pytest.approx(size(want), rel=0.01), (got, want)
    tk.close()


def test_a_store_open_one_way_in_this_process_is_not_opened_another(tmp_path):
    """DuckDB opens a file one way at a time in a process: a read-only tracekit.open of a
    store this process writes (and the other way round) is one line that says so and what to
    do, not DuckDB's "different configuration"; once the first is closed, it opens."""
    db = tmp_path / "s.duckdb"
    tk = tracekit.open(db)
    tk.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz")
    with pytest.raises(tracekit.TracekitError, match=r"s\.duckdb: cannot open database read-only: this process has "
                                                     r"it open already another way \(another tracekit\.open or "
                                                     r"duckdb\.connect of it, .*\); use that one, or close it"):
        tracekit.open(db, read_only=True).runs()
    tk.close()
    reader = tracekit.open(db, read_only=True)
    assert len(reader.runs()) == 1
    with pytest.raises(tracekit.TracekitError, match="cannot open database for writing: this process has it open "
                                                     "already another way"):
        tracekit.open(db).ingest(DATA / "nsys_many_kernels" / "export.sqlite.xz")
    reader.close()
