"""Staged and distributed ingest (tracekit.staging, tracekit.distributed) against a
direct serial ingest of the same real captures: every table identical."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _stores import assert_same_stores

import tracekit
from tracekit import staging
from tracekit.cli import main

DATA = Path(__file__).parent / "data"
#: nsys exports, an ncu report, a run folder (nsys + timed requests), the same content twice
MIXED = [DATA / "nsys_hstu_mixed" / "export.sqlite.xz", DATA / "ncu_sections" / "report.ncu-rep.xz",
         DATA / "hstu_capture_nsys", DATA / "nsys_multiproc" / "export.sqlite.xz",
         DATA / "nsys_hstu_mixed" / "export.sqlite.xz", DATA / "nsys_graphs_graph" / "export.sqlite.xz"]


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


@pytest.mark.parametrize("first", [None, DATA / "nsys_many_kernels" / "export.sqlite.xz"],
                         ids=["empty-store", "store-with-names"])
def test_prepare_and_land_equal_a_direct_ingest(tmp_path, first):
    direct = _serial(tmp_path / "direct.duckdb", MIXED, first)
    staged = tracekit.open(tmp_path / "staged.duckdb")
    if first:  # names already in the store: the staged ids are mapped, not copied
        staged.ingest(first)
    results = []
    with staged.one_command(MIXED):
        for f in MIXED:
            s = staging.prepare(f, workdir=tmp_path)
            results.append(staging.land(staged, s))
            s.discard()
    assert [r.skipped for r in results] == [False, False, False, False, True, False]
    assert results[4].run_id == results[0].run_id
    assert_same_stores(direct.con, staged.con)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tracekit-stage-")]


def _stage_land(tk, f, name=None):
    """``f`` prepared and landed as distributed ingest does (the store's hashes known)."""
    s = staging.prepare(f, name=name, known=tk.staging_destination().known_hashes())
    try:
        return staging.land(tk, s)
    finally:
        s.discard()


@pytest.mark.parametrize("order", ["export-then-folder", "folder-then-export"])
def test_landing_a_run_folder_and_its_export_as_a_direct_ingest(tmp_path, order):
    """A run folder whose export was ingested alone takes that run's place; the export
    of a run folder already ingested is that run; a name asked for renames it."""
    folder = DATA / "hstu_capture_nsys"
    export = folder / "nsys.sqlite.xz"
    steps = [(export, None), (folder, None)] if order == "export-then-folder" else [(folder, None), (export, None)]
    steps.append((steps[1][0], "renamed"))
    direct, staged = tracekit.open(tmp_path / "direct.duckdb"), tracekit.open(tmp_path / "staged.duckdb")
    for f, name in steps:
        a, b = direct.ingest(f, name=name), _stage_land(staged, f, name)
        assert (a.run_id, a.name, a.skipped, a.replaced, a.renamed_from) == \
            (b.run_id, b.name, b.skipped, b.replaced, b.renamed_from), (f, name)
    assert staged.con.execute("SELECT count(*), max(name) FROM runs").fetchall() == [(1, "renamed")]
    assert_same_stores(direct.con, staged.con)



def _point_folder(folder: Path, export: str, requests_of: int = 0) -> Path:
    """A run folder at ``folder``: a sweep point's meta.json and requests.csv (point
    ``requests_of`` of the real sweep) beside a real nsys export (none for "")."""
    point = sorted((DATA / "hstu_sweep" / "runs").iterdir())[requests_of]
    folder.mkdir()
    (folder / "meta.json").write_bytes((point / "meta.json").read_bytes())
    (folder / "requests.csv").write_bytes((point / "requests.csv").read_bytes())
    if export:
        (folder / "export.sqlite.xz").write_bytes((DATA / export / "export.sqlite.xz").read_bytes())
    return folder


@pytest.mark.parametrize("how", ["direct", "staged", "threads", "dataset"])
def test_a_run_folder_is_another_folders_run_only_where_it_holds_nothing_else(tmp_path, how):
    """A folder that grew (an export added beside its requests) takes its earlier run's place,
    and the run of that export ingested alone is removed (one capture, one run); a folder that
    shares requests.csv with it but not the export is a run of its own; a copy of either is its
    run, whatever run holds its requests first. A dataset does not rewrite runs: the grown
    folder is its earlier run, with a warning."""
    import warnings

    from tracekit.errors import CaptureWarning

    grown = _point_folder(tmp_path / "grown", "")
    twin = _point_folder(tmp_path / "twin", "nsys_cpu_only_again")
    export = DATA / "nsys_cpu_only" / "export.sqlite.xz"
    if how == "dataset":
        (tmp_path / "ds").mkdir()
    tk = tracekit.open(tmp_path / ("ds" if how == "dataset" else f"{how}.duckdb"))

    def ingest(f):
        if how in ("direct", "dataset"):
            return tk.ingest(f)
        if how == "staged":
            return _stage_land(tk, f)
        from tracekit.parallel import ingest_many

        return ingest_many(tk, [f], workers=2)[0].result

    first = ingest(grown)
    assert not first.skipped and first.kind == "timing"
    alone = ingest(export)
    assert not alone.skipped
    (grown / "export.sqlite.xz").write_bytes(export.read_bytes())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = ingest(grown)
    if how == "dataset":
        assert (again.skipped, again.run_id) == (True, first.run_id)
        assert [str(w.message) for w in caught if w.category is CaptureWarning] == [
            f"{grown}: holds the capture of run {first.run_id} ({first.name}) and what that run lacks (files beside "
            "it, its meta.json's parameters); a dataset's runs are not rewritten, so the rest is not added (a DuckDB "
            "store replaces the run by the folder's: ingest into a store, then export the dataset again)"]
    else:
        assert (again.skipped, again.replaced, again.absorbed, again.run_id, again.name) == (
            False, first.run_id, (alone.run_id,), first.run_id, first.name)
        assert again.kind == "nsys,timing" and again.rows["requests"] > 0 and not caught
    other = ingest(twin)  # the same requests.csv as the grown folder, another capture's export
    assert not other.skipped and other.replaced is None and other.run_id > first.run_id
    for folder, run in ((twin, other), (grown, first)):  # a copy, its meta.json edited: the same run
        copy = shutil.copytree(folder, tmp_path / f"copy-{folder.name}")
        (copy / "meta.json").write_text((copy / "meta.json").read_text().replace('"params"', '"note": "x", "params"'))
        if how == "dataset" and folder == grown:  # (the dataset's run of grown lacks the export: a run of its own)
            continue
        got = ingest(copy)
        assert (got.skipped, got.run_id) == (True, run.run_id), folder
    if how != "dataset":
        runs = tk.sql("SELECT run_id, kind FROM runs ORDER BY run_id").rows()
        assert runs == [(first.run_id, "nsys,timing"), (other.run_id, "nsys,timing")]
        ranges = tk.sql("SELECT run_id, count(*) AS n FROM nvtx_ranges GROUP BY ALL ORDER BY run_id").rows()
        assert [r[0] for r in ranges] == [first.run_id, other.run_id], ranges
    tk.close()

def test_prepare_skips_a_known_hash_without_parsing(tmp_path, monkeypatch):
    tk = _serial(tmp_path / "s.duckdb", MIXED[:1])
    known = frozenset(tk.con.execute("SELECT source_hash FROM runs").fetchall()[0])
    from tracekit.ingest import nsys

    def boom(path):
        raise AssertionError("parsed a known file")

    monkeypatch.setattr(nsys, "read", boom)
    s = staging.prepare(MIXED[0], workdir=tmp_path, known=known)
    assert s.db is None and s.digest in known
    res = staging.land(tk, s)
    assert res.skipped and res.run_id == 1


@pytest.mark.parametrize("workers", [["--workers", "2"], []], ids=["workers", "serial"])
def test_distributed_ingest_equals_serial_and_reports_a_bad_file(tmp_path, capsys, workers):
    """A file that cannot be ingested is reported and the others land, in threads or one
    after another alike."""
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not an export\n")
    files = [*MIXED[:4], bad, *MIXED[4:]]
    direct = _serial(tmp_path / "direct.duckdb", [f for f in files if f != bad])
    direct.close()
    db = tmp_path / "dist.duckdb"
    rc = main(["--db", str(db), "ingest", *map(str, files), *workers])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.splitlines() == [f"tracekit: error: {bad}: not a recognised profile (expected an nsys SQLite export, "
                                "an ncu report or CSV export, a tracekit run folder, a benchmark log: "
                                "benchmark_bs8_nc1024.log, or the JSON of tracekit bench --json)",
                                "tracekit: error: 1 of 7 files not ingested (errors above); the others landed"]
    assert len(out.splitlines()) == 6 and "already ingested as run 1" in out
    direct, dist = tracekit.open(tmp_path / "direct.duckdb"), tracekit.open(db, read_only=True)
    assert_same_stores(direct.con, dist.con)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tracekit-stage-")]


def test_the_first_files_are_ingested_here_while_the_cluster_starts(tmp_path, monkeypatch):
    """This process ingests files itself (directly) until the LocalCluster is up, the
    workers the rest: the store equals a serial ingest, whichever did which file."""
    from tracekit import distributed

    here = []
    direct = staging.StoreDestination.ingest_here
    monkeypatch.setattr(staging.StoreDestination, "ingest_here",
                        lambda self, source, index, **kw: here.append(index) or direct(self, source, index, **kw))
    files = [MIXED[0], MIXED[3], MIXED[5], MIXED[1]]
    tk = tracekit.open(tmp_path / "dist.duckdb")
    outcomes = distributed.ingest_many(tk, files, workers=1)
    tk.close()
    assert [o.error for o in outcomes] == [None] * 4
    assert here and here == list(range(len(here)))  # the first files, in order
    assert [o.result.run_id for o in outcomes] == [1, 2, 3, 4]
    serial = _serial(tmp_path / "serial.duckdb", files)
    assert_same_stores(serial.con, tracekit.open(tmp_path / "dist.duckdb", read_only=True).con)
    here.clear()  # one file: done here before the cluster is up, which is then closed
    outcomes = distributed.ingest_many(tracekit.open(tmp_path / "one.duckdb"), files[:1], workers=1)
    assert here == [0] and outcomes[0].result.run_id == 1


def _reader_pid(fifo: Path) -> int | None:
    """The process holding ``fifo`` open (a Dask worker reading it)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(fifo):
                    return int(pid)
        except OSError:
            continue
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the worker through /proc")
def test_a_worker_killed_in_the_middle_of_a_file(tmp_path):
    """The file whose worker dies is reported failed; the others land; the store is
    consistent (it equals a serial ingest of the others)."""
    fifo = tmp_path / "export.sqlite"  # a worker blocks reading it: in the middle of that file
    os.mkfifo(fifo)
    files = [MIXED[0], fifo, MIXED[3], MIXED[5]]
    killed = {}

    def kill_the_reader():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:  # succeeds once a worker has opened the fifo for reading
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.05)
                continue
            os.write(fd, b"SQLi")  # part of a header: the worker waits for the rest
            pid = None
            while pid is None and time.monotonic() < deadline:
                pid = _reader_pid(fifo)
            killed["pid"] = pid
            os.kill(pid, signal.SIGKILL)
            os.close(fd)
            return

    t = threading.Thread(target=kill_the_reader, daemon=True)
    t.start()
    from tracekit import distributed

    tk = tracekit.open(tmp_path / "dist.duckdb")
    outcomes = distributed.ingest_many(tk, files, workers=2, here=False)  # (the fifo in a worker)
    t.join(5)
    assert killed.get("pid")
    assert [o.error is None for o in outcomes] == [True, False, True, True]
    assert "the worker preparing it died" in outcomes[1].error
    direct = _serial(tmp_path / "direct.duckdb", [MIXED[0], MIXED[3], MIXED[5]])
    assert_same_stores(direct.con, tracekit.open(tmp_path / "dist.duckdb", read_only=True).con)


def test_readers_open_the_store_while_a_worker_is_long_on_a_file(tmp_path, monkeypatch):
    """The store is closed while the next run to land is long in coming (a worker blocked
    on a file): a reader opens it and sees the runs landed so far; runs that land one
    after another do not close it in between."""
    from tracekit import distributed

    pauses = []
    monkeypatch.setattr(staging.StoreDestination, "pause", lambda self: pauses.append(1) or self._release())
    fifo = tmp_path / "slow.sqlite"  # a worker blocks opening it until it is written
    os.mkfifo(fifo)
    db = tmp_path / "dist.duckdb"
    seen, finished = {}, threading.Event()

    def reader():
        deadline = time.monotonic() + 60
        while "runs" not in seen and time.monotonic() < deadline:
            try:
                with tracekit.open(db, read_only=True) as tk:
                    seen["runs"] = tk.runs().get_column("name").to_list()
            except tracekit.TracekitError:  # not created yet, or held by the ingest
                time.sleep(0.05)
        while not finished.is_set():  # then the worker reads the fifo (each time it opens it) and fails
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # (fails while nobody opens it to read)
            except OSError:
                time.sleep(0.02)
                continue
            try:  # one short write, and always closed: a writer left open would keep the
                os.write(fd, b"not an export\n")  # worker's read waiting for more
            except OSError:  # the worker closed its end first
                pass
            finally:
                os.close(fd)
            time.sleep(0.02)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        outcomes = distributed.ingest_many(tracekit.open(db), [MIXED[0], fifo, MIXED[3]], workers=2, here=False)
    finally:
        finished.set()
    t.join(10)
    # MIXED[0] landed (named by its folder: MIXED[3] is an export.sqlite too); the fifo's
    # run, and so MIXED[3]'s, not yet
    assert seen.get("runs") == ["nsys_hstu_mixed/export"]
    assert [o.error is None for o in outcomes] == [True, False, True]
    assert pauses
    pauses.clear()
    monkeypatch.setattr(distributed, "PAUSE_AFTER_S", 600)
    outcomes = distributed.ingest_many(tracekit.open(tmp_path / "other.duckdb"), MIXED[:2], workers=2, here=False)
    assert [o.error is None for o in outcomes] == [True, True] and not pauses


def test_bad_worker_and_scheduler_options(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "ingest", str(MIXED[0]), "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "tracekit: error: --workers 0: give at least 1 worker (or --scheduler ADDRESS)\n"
    t = time.monotonic()
    assert main(["--db", str(db), "ingest", str(MIXED[0]), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'" in err
    assert time.monotonic() - t < 30
    # a scheduler takes no --workers 0 or -1 either (they were ignored)
    for n in ("0", "-1"):
        assert main(["--db", str(db), "ingest", str(MIXED[0]), "--workers", n, "--scheduler", "tcp://127.0.0.1:9"]) == 2
        assert capsys.readouterr().err == f"tracekit: error: --workers {n}: give at least 1 worker process (or --scheduler ADDRESS)\n"
    # an empty address is not "--workers None" (what it said)
    assert main(["--db", str(db), "ingest", str(MIXED[0]), "--scheduler", " "]) == 2
    assert capsys.readouterr().err == "tracekit: error: --scheduler ' ': give the scheduler's address (tcp://HOST:PORT)\n"
    assert not db.exists()


@pytest.mark.parametrize("address", ["garbage", "tcp://[::1", "tcp://127.0.0.1:99999",
                                     # no comm reaches them: a scheme Dask does not know, one for a scheduler in
                                     # this process, TLS without its settings (a traceback at exit, 10 s later)
                                     "http://127.0.0.1:9", "inproc://nothing", "tls://127.0.0.1:9"])
def test_a_malformed_scheduler_address_is_one_line_at_once(tmp_path, address):
    """Checked before a Client is made: one that fails on the address lingers, and the
    process's exit then waited 10 s and printed its traceback."""
    t = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(tmp_path / "s.duckdb"), "ingest",
                          str(MIXED[0]), "--scheduler", address], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr[-1000:]
    assert f"cannot reach the Dask scheduler at {address!r}" in out.stderr
    assert time.monotonic() - t < 8
    assert not (tmp_path / "s.duckdb").exists()


def test_an_address_where_no_scheduler_answers_is_one_line_in_bounded_time(tmp_path, capsys, monkeypatch):
    """A listener that never answers (a web server waiting for its request) and one whose
    banner Dask reads as a frame's length: each one line, exit 2, within the probe's limit."""
    import socket

    from tracekit import distributed

    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT_S", 1)
    silent, banner = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        banner.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = banner.accept()
            except OSError:
                continue
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            conn.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        for sock, said in ((silent, "no answer in 2 s: what listens there is no Dask scheduler"),
                           (banner, "what answers there does not speak Dask's protocol (")):
            address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
            t = time.monotonic()
            assert main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(MIXED[0]), "--scheduler", address]) == 2
            err = capsys.readouterr().err
            assert err.startswith(f"tracekit: error: cannot reach the Dask scheduler at {address!r} ({said}")
            assert err.count("\n") == 1 and err.endswith("); check the address or start one with `dask scheduler`\n")
            assert time.monotonic() - t < 10 and not (tmp_path / "s.duckdb").exists()
    finally:
        stop.set()
        server.join()
        silent.close()
        banner.close()


def test_without_dask_a_scheduler_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    assert main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(MIXED[0]), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'tracekit[dask]'" in err


def test_workers_are_threads_here_without_dask(tmp_path, capsys, monkeypatch):
    """`--workers N` without a scheduler ingests in N threads of this process: no Dask
    imported, the store that of a serial ingest."""
    for mod in [m for m in sys.modules if m == "dask" or m.startswith(("dask.", "distributed"))]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "distributed", None)
    monkeypatch.setitem(sys.modules, "dask", None)
    files = [MIXED[0], MIXED[3]]
    direct = _serial(tmp_path / "direct.duckdb", files)
    assert main(["--db", str(tmp_path / "t.duckdb"), "ingest", *map(str, files), "--workers", "2"]) == 0
    # the line of each file says the rows its run has in the store, every table counted
    tables = [t for (t,) in direct.con.execute(
        "SELECT table_name FROM duckdb_columns() WHERE column_name = 'run_id' AND NOT internal "
        "AND table_name IN (SELECT table_name FROM duckdb_tables()) GROUP BY 1").fetchall() if t not in ("runs", "run_sources")]
    rows = sum(direct.con.execute(f'SELECT count(*) FROM "{t}" WHERE run_id = 2').fetchone()[0] for t in tables)
    assert capsys.readouterr().out.splitlines()[1].endswith(f"run 2 (nsys_multiproc/export, nsys): {rows:,} rows")
    assert_same_stores(direct.con, tracekit.open(tmp_path / "t.duckdb", read_only=True).con)


def test_an_existing_cluster_by_address_or_environment(tmp_path, monkeypatch, capsys):
    """--scheduler ADDRESS and $DASK_SCHEDULER_ADDRESS join a running cluster (left running).
    What a worker's ingest warns of a file (a capture that missed the GPU work) is said here."""
    import dask
    import distributed

    missed = DATA / "nsys_window_missed" / "export.sqlite.xz"
    files = [MIXED[0], missed, MIXED[3]]
    direct = _serial(tmp_path / "direct.duckdb", files)
    direct.close()
    # (its workers without Dask's statistical profiler, as tracekit starts its own: on CPython 3.11 its
    # sampling can deadlock a worker, tracekit.distributed._local_cluster says how; seen here once)
    with dask.config.set({"distributed.worker.profile.enabled": False}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        said = f"tracekit: warning: {missed.resolve()}: nsys traced CUDA but recorded no CUDA event"
        assert main(["--db", str(tmp_path / "a.duckdb"), "ingest", *map(str, files),
                     "--scheduler", cluster.scheduler_address]) == 0
        assert [line[:len(said)] for line in capsys.readouterr().err.splitlines()] == [said]
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster.scheduler_address)
        assert main(["--db", str(tmp_path / "b.duckdb"), "ingest", *map(str, files), "--workers", "1"]) == 0
        assert [line[:len(said)] for line in capsys.readouterr().err.splitlines()] == [said]
        with distributed.Client(cluster.scheduler_address, set_as_default=False) as c:
            assert len(c.scheduler_info()["workers"]) == 1  # still up: not ours to close
            (worker,) = c.scheduler_info()["workers"]
        # a worker's address is not the scheduler's: one line, before a Client exists to linger (whose
        # clean-up at exit waits 10 s and prints a traceback)
        out = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(tmp_path / "w.duckdb"), "ingest",
                              str(MIXED[0]), "--scheduler", worker], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and out.stderr == (f"tracekit: error: cannot reach the Dask scheduler at {worker!r} (a "
                                                      "Dask Worker answers there, not a scheduler); check the address "
                                                      "or start one with `dask scheduler`\n"), out.stderr[-2000:]
    capsys.readouterr()
    for db in ("a.duckdb", "b.duckdb"):
        with tracekit.open(tmp_path / "direct.duckdb", read_only=True) as a, \
                tracekit.open(tmp_path / db, read_only=True) as b:
            assert_same_stores(a.con, b.con)
