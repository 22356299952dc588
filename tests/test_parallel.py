"""Ingest of many files in threads of one process (tracekit.parallel) against a direct
serial ingest of the same real captures: every table identical."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from _stores import assert_same_stores

import tracekit
from tracekit import parallel
from tracekit.ingest.nsys import write

DATA = Path(__file__).parent / "data"
#: nsys exports, an ncu report, a run folder (nsys + timed requests), the same content twice
MIXED = [DATA / "nsys_hstu_mixed" / "export.sqlite.xz", DATA / "ncu_sections" / "report.ncu-rep.xz",
         DATA / "hstu_capture_nsys", DATA / "nsys_multiproc" / "export.sqlite.xz",
         DATA / "nsys_hstu_mixed" / "export.sqlite.xz", DATA / "nsys_graphs_graph" / "export.sqlite.xz",
         DATA / "nsys_many_kernels" / "export.sqlite.xz"]
#: a run folder after its own export ingested alone: the folder's run takes that run's place
FOLDER_AFTER_EXPORT = [DATA / "nsys_multiproc" / "export.sqlite.xz",
                       DATA / "hstu_capture_nsys" / "nsys.sqlite.xz", DATA / "hstu_capture_nsys"]


def _serial(db: Path, files, first=None) -> tracekit.Tracekit:
    """The store ``tracekit ingest FILES`` writes (after ``tracekit ingest FIRST``): one
    command, whose files are named together."""
    tk = tracekit.open(db)
    if first:
        tk.ingest(first)
    with tk.one_command(files):
        for f in files:
            tk.ingest(f)
    return tk


@pytest.fixture(scope="module")
def serial_store(tmp_path_factory):
    """The store a serial ingest of MIXED writes, after ``first`` (None: into a new store);
    built once for each ``first``."""
    built: dict = {}

    def get(first) -> Path:
        if first not in built:
            built[first] = tmp_path_factory.mktemp("serial") / "serial.duckdb"
            _serial(built[first], MIXED, first).close()
        return built[first]

    return get


@pytest.mark.parametrize("first, workers", [(None, 1), (None, 8), (DATA / "nsys_graphs_graph" / "export.sqlite.xz", 3)],
                         ids=["empty-store-1", "empty-store-8", "store-with-names-3"])
def test_threads_equal_a_serial_ingest(tmp_path, serial_store, workers, first):
    """Run ids, name ids, skipped duplicates: those of a serial ingest, however the
    threads interleave (one thread, fewer threads than files, more threads than files;
    into a new store and into one that has some of the names already)."""
    serial = tracekit.open(serial_store(first), read_only=True)
    tk = tracekit.open(tmp_path / "threads.duckdb")
    if first:
        tk.ingest(first)
    seen = []
    outcomes = parallel.ingest_many(tk, MIXED, workers=workers, on_outcome=seen.append)
    tk.close()
    assert [o.error for o in outcomes] == [None] * len(MIXED)
    assert seen == outcomes  # reported in input order
    assert [o.result.skipped for o in outcomes] == [False, False, False, False, True, bool(first), False]
    assert outcomes[4].result.run_id == outcomes[0].result.run_id
    assert_same_stores(serial.con, tracekit.open(tmp_path / "threads.duckdb", read_only=True).con)


def test_names_are_interned_in_a_turn_only_where_the_store_lacks_some(tmp_path, monkeypatch):
    """A file whose names the store has when it is read (the other ranks of a job) takes
    its turn without a transaction of its own; one that brings new names (another
    program) is interned; the store is the serial one either way."""
    ranks = sorted((DATA / "nsys_ranks").glob("rank*/export.sqlite.xz"))
    files = [*ranks[1:], DATA / "nsys_hstu_mixed" / "export.sqlite.xz"]
    interned = []
    call = write.Interns.__call__

    def counted(self, con):
        interned.append(self.raw["kernels"].num_rows)
        return call(self, con)

    tk = tracekit.open(tmp_path / "threads.duckdb")
    tk.ingest(ranks[0])
    monkeypatch.setattr(write.Interns, "__call__", counted)
    outcomes = parallel.ingest_many(tk, files, workers=2)
    tk.close()
    assert [o.error for o in outcomes] == [None] * len(files)
    mixed_kernels = outcomes[-1].result.rows["kernels"]
    assert interned == [mixed_kernels], interned  # the new program's file only
    serial = _serial(tmp_path / "serial.duckdb", files, ranks[0])
    assert_same_stores(serial.con, tracekit.open(tmp_path / "threads.duckdb", read_only=True).con)


def test_a_run_folder_takes_the_place_of_its_export_as_in_a_serial_ingest(tmp_path):
    serial = _serial(tmp_path / "serial.duckdb", FOLDER_AFTER_EXPORT)
    tk = tracekit.open(tmp_path / "threads.duckdb")
    outcomes = parallel.ingest_many(tk, FOLDER_AFTER_EXPORT, workers=3)
    tk.close()
    assert outcomes[2].result.replaced == outcomes[1].result.run_id
    assert_same_stores(serial.con, tracekit.open(tmp_path / "threads.duckdb", read_only=True).con)


def test_a_file_failing_in_its_write_is_reported_and_the_others_land(tmp_path, monkeypatch):
    """A write that fails after the file's turn: reported, nothing of its run written,
    its run id unused (as in a serial ingest); the others land as serially."""
    failing = MIXED[3].resolve()
    load = write.load

    def load_or_fail(con, run_id, raw, plans, memory_limit, **kw):
        if raw["kernels"].num_rows == 176:  # nsys_multiproc's export
            con.execute("SELECT error('disk full (test)')")
        return load(con, run_id, raw=raw, plans=plans, memory_limit=memory_limit, **kw)

    files = [MIXED[0], MIXED[3], MIXED[5]]
    tk = tracekit.open(tmp_path / "threads.duckdb")
    with monkeypatch.context() as m:
        m.setattr(write, "load", load_or_fail)
        outcomes = parallel.ingest_many(tk, files, workers=3)
    tk.close()
    assert [o.error is None for o in outcomes] == [True, False, True]
    assert str(failing) in outcomes[1].error and "disk full (test)" in outcomes[1].error
    assert [o.result.run_id for o in (outcomes[0], outcomes[2])] == [1, 3]
    with tracekit.open(tmp_path / "threads.duckdb", read_only=True) as got:
        assert got.sql("SELECT run_id FROM runs ORDER BY 1")["run_id"].to_list() == [1, 3]
        for table in ("_kernels", "_api_calls", "nvtx_ranges", "run_sources"):
            assert got.sql(f"SELECT count(*) AS n FROM {table} WHERE run_id = 2")["n"][0] == 0
        serial = _serial(tmp_path / "serial.duckdb", [MIXED[0], MIXED[5]])
        for q in ("top-kernels", "api-summary", "nvtx-gpu-projection"):
            assert got.query(q, run=3, limit=0).equals(serial.query(q, run=2, limit=0))


def test_files_in_flight_fit_the_memory_budget(tmp_path, monkeypatch):
    """Files whose estimated needs do not fit the budget together are not ingested at
    once (one at a time here), and the store is still the serial one."""
    from tracekit.ingest import nsys

    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", "2GB")
    monkeypatch.setattr(nsys, "memory_need", lambda path: 1_200_000_000)
    busy, most = [0], [0]
    lock = threading.Lock()
    write_pending = tracekit.Tracekit._write_pending

    def counted(self, *a, **kw):
        with lock:
            busy[0] += 1
            most[0] = max(most[0], busy[0])
        try:
            time.sleep(0.2)  # (room for another file to start, were it let in)
            return write_pending(self, *a, **kw)
        finally:
            with lock:
                busy[0] -= 1

    monkeypatch.setattr(tracekit.Tracekit, "_write_pending", counted)
    files = [MIXED[0], MIXED[3], MIXED[5]]
    tk = tracekit.open(tmp_path / "threads.duckdb")
    outcomes = parallel.ingest_many(tk, files, workers=3)
    tk.close()
    assert [o.error for o in outcomes] == [None] * 3 and most[0] == 1
    serial = _serial(tmp_path / "serial.duckdb", files)
    assert_same_stores(serial.con, tracekit.open(tmp_path / "threads.duckdb", read_only=True).con)


def test_every_file_failing_leaves_no_store(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not an export\n")
    db = tmp_path / "t.duckdb"
    outcomes = parallel.ingest_many(tracekit.open(db), [bad, bad], workers=2)
    assert all("not a recognised profile" in o.error for o in outcomes)
    assert not db.exists()


def test_a_missing_path_among_files_is_reported_and_the_others_land(tmp_path):
    """A path that is not there stopped the whole command before any file was read (the
    serial ingest reports it and lands the others); one path alone is its error alone."""
    gone = tmp_path / "nosuch.sqlite"
    outcomes = parallel.ingest_many(tracekit.open(tmp_path / "t.duckdb"), [MIXED[0], gone, MIXED[3]], workers=2)
    assert [o.error is None for o in outcomes] == [True, False, True]
    assert outcomes[1].error == f"{gone}: no such file or directory"
    with pytest.raises(tracekit.TracekitError, match=f"^{gone}: no such file or directory$"):
        parallel.ingest_many(tracekit.open(tmp_path / "one.duckdb"), [gone], workers=2)
    assert not (tmp_path / "one.duckdb").exists()


def test_bad_workers(tmp_path):
    with pytest.raises(tracekit.TracekitError, match="--workers 0: give at least 1 worker"):
        parallel.ingest_many(tracekit.open(tmp_path / "t.duckdb"), MIXED[:1], workers=0)
    assert not (tmp_path / "t.duckdb").exists()


def test_into_a_dataset_a_bad_file_is_reported_and_the_others_land(tmp_path):
    """Into a dataset each thread prepares its run and writes its partitions: a file
    that fails is reported, the others land with the run ids a serial ingest gives them
    (the failed file takes none) and the store's answers."""
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not an export\n")
    files = [MIXED[0], bad, MIXED[3], MIXED[5]]
    root = tmp_path / "ds"
    root.mkdir()
    outcomes = parallel.ingest_many(tracekit.open(root), files, workers=3)
    assert [o.error is None for o in outcomes] == [True, False, True, True]
    assert f"{bad}: not a recognised profile" in outcomes[1].error
    assert [o.result.run_id for o in outcomes if o.result] == [1, 2, 3]
    serial = _serial(tmp_path / "serial.duckdb", [MIXED[0], MIXED[3], MIXED[5]])
    got = tracekit.open(root)
    assert got.runs().get_column("name").to_list() == serial.runs().get_column("name").to_list()
    assert got.runs()["run_id"].to_list() == serial.runs()["run_id"].to_list()
    for ds_run, store_run in ((1, 1), (2, 2), (3, 3)):
        for q in ("top-kernels", "api-summary", "nvtx-gpu-projection"):
            assert got.query(q, run=ds_run, limit=0).equals(serial.query(q, run=store_run, limit=0))
    assert not [p for p in root.iterdir() if p.name.startswith(".")]


def test_ctrl_c_that_duckdb_turns_into_query_interrupted_is_an_interrupt(tmp_path, monkeypatch):
    """A Ctrl-C that lands in a DuckDB query of this thread reaches us as DuckDB's
    "Query interrupted" (a RuntimeError): it is still the interrupt (Interrupted, one
    line), and a store this ingest created is removed when nothing landed."""
    from tracekit.errors import Interrupted
    from tracekit.store import Tracekit

    note_writer = Tracekit._note_writer

    def slow_query_then_sigint(self, doing=None):
        note_writer(self, doing)
        if doing is not None:  # the ingest's note, after the store is open
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            self.con.execute("SELECT count(*) FROM range(20000000000) t(x) WHERE x % 7 = 3").fetchall()

    monkeypatch.setattr(Tracekit, "_note_writer", slow_query_then_sigint)
    db = tmp_path / "t.duckdb"
    tk = tracekit.open(db)
    with pytest.raises(Interrupted, match="^interrupted; 0 of 2 files are in the store; of the others this ingest wrote nothing$"):
        parallel.ingest_many(tk, MIXED[:2], workers=2)
    tk.close()
    assert not db.exists()


def test_a_new_store_is_created_while_the_first_files_are_read(tmp_path, monkeypatch):
    """Into a store the ingest creates, the files are read while the store is opened:
    its opening finishes only once a file has been read here (it would wait in vain,
    and fail, were the reads waiting for it)."""
    from tracekit.ingest import nsys

    read_one = threading.Event()
    read, setup = nsys.read, tracekit.Tracekit._setup_writer

    def reading(path):
        got = read(path)
        read_one.set()
        return got

    def after_a_read(self, con):
        assert read_one.wait(60), "no file was read while the store was being created"
        return setup(self, con)

    monkeypatch.setattr(nsys, "read", reading)
    monkeypatch.setattr(tracekit.Tracekit, "_setup_writer", after_a_read)
    files = [MIXED[0], MIXED[3]]
    tk = tracekit.open(tmp_path / "threads.duckdb")
    outcomes = parallel.ingest_many(tk, files, workers=2)
    tk.close()
    assert [o.error for o in outcomes] == [None, None]
    monkeypatch.undo()
    serial = _serial(tmp_path / "serial.duckdb", files)
    assert_same_stores(serial.con, tracekit.open(tmp_path / "threads.duckdb", read_only=True).con)


def test_a_new_store_that_does_not_open_is_one_error_and_no_file_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", "lots")
    seen = []
    db = tmp_path / "t.duckdb"
    with pytest.raises(tracekit.TracekitError, match="TRACEKIT_MEMORY_LIMIT='lots'"):
        parallel.ingest_many(tracekit.open(db), MIXED[:3], workers=2, on_outcome=seen.append)
    assert seen == [] and not db.exists()


@pytest.mark.parametrize("raised_at", [2, 4], ids=["before-a-submit", "after-a-submit"])
def test_a_ctrl_c_while_the_files_are_submitted_stops_the_ingest(tmp_path, monkeypatch, raised_at):
    """A Ctrl-C while the files' tasks are submitted (before the new store is opened):
    the ingest stops with its one line. No thread waits for the store's opening, nor for
    the turn or the admission of an earlier file whose task was cancelled (the third
    file's, where the fourth was submitted just as the interrupt came: that task is not
    cancelled, and runs). These waits hung the ingest (seen in CI: `tracekit ingest
    --workers 2` never ending after a Ctrl-C)."""
    from concurrent.futures import ThreadPoolExecutor

    from tracekit.errors import Interrupted

    class InterruptedPool(ThreadPoolExecutor):
        submitted = 0

        def submit(self, *args, **kwargs):
            if InterruptedPool.submitted == raised_at and raised_at == 2:
                raise KeyboardInterrupt
            future = super().submit(*args, **kwargs)
            InterruptedPool.submitted += 1
            if InterruptedPool.submitted == raised_at:  # (submitted, not yet in the ingest's list)
                time.sleep(0.5)  # (the first files read meanwhile)
                raise KeyboardInterrupt
            return future

    monkeypatch.setattr(parallel, "ThreadPoolExecutor", InterruptedPool)
    db = tmp_path / "t.duckdb"
    files = [MIXED[0], MIXED[3], MIXED[5], MIXED[6]]
    raised: list[BaseException] = []

    def ingest():
        with tracekit.open(db) as tk:
            try:
                parallel.ingest_many(tk, files, workers=2)
            except BaseException as err:  # noqa: BLE001 - looked at below
                raised.append(err)

    thread = threading.Thread(target=ingest, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the interrupted ingest hung"
    assert len(raised) == 1 and isinstance(raised[0], Interrupted), raised
    assert str(raised[0]).startswith("interrupted; 0 of 4 files are in the store")
    assert not db.exists()
