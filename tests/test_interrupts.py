"""Ctrl-C and failures while ingesting: the first error is the one shown, exit 130 or 2
with one line, and the store holds the whole run or nothing of it."""

from __future__ import annotations

import contextlib
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import tracekit
from tracekit.cli import main as cli_main

DATA = Path(__file__).parent / "data"
#: the largest nsys fixture: long enough an ingest to interrupt at several moments
EXPORT = DATA / "nsys_many_kernels" / "export.sqlite.xz"
#: runs the CLI as its entry point does and says "ready" once its imports are done (a
#: Ctrl-C before that is Python's)
RUNNER = ("import sys; from tracekit.cli import main; print('ready', file=sys.stderr, flush=True); "
          "sys.exit(main())")


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "many.sqlite"
    with lzma.open(EXPORT) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@pytest.fixture(scope="module")
def reference_store(export, tmp_path_factory) -> Path:
    """The store an uninterrupted ingest of ``export`` writes."""
    db = tmp_path_factory.mktemp("ref") / "ref.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(export)
    return db


@pytest.fixture(scope="module")
def reference(reference_store) -> dict[str, int]:
    """Row counts of every table after an uninterrupted ingest (the one run)."""
    return _counts(reference_store)


def _counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY 1").fetchall()]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in tables}
    finally:
        con.close()


def _run_cli(args: list[str], fsize: int | None = None, sigint_after: float | None = None):
    # A file-size limit through prlimit(1), not preexec_fn: that forks this (large)
    # process, which fails with ENOMEM when the machine's memory is committed elsewhere.
    limit = ["prlimit", f"--fsize={fsize}", "--"] if fsize is not None else []
    proc = subprocess.Popen([*limit, sys.executable, "-c", RUNNER, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "ready"
    start = time.monotonic()
    if sigint_after is not None:
        time.sleep(sigint_after)
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err, time.monotonic() - start


@pytest.mark.parametrize("existing", [False, True], ids=["new-store", "store-with-runs"])
def test_ctrl_c_at_many_moments_of_an_ingest(export, reference, small_store, existing):
    db = small_store if existing else small_store.with_name("fresh.duckdb")
    before = _counts(small_store)
    pristine = small_store.read_bytes()
    code, _, err, full = _run_cli(["--db", str(db), "ingest", str(export)])
    assert code == 0, err
    outcomes = set()
    for frac in (0.1, 0.3, 0.5, 0.7, 0.85, 0.95, 1.1) if not existing else (0.3, 0.6, 0.9):
        for f in db.parent.glob(db.name + "*"):
            f.unlink()
        if existing:
            small_store.write_bytes(pristine)
        code, out, err, _ = _run_cli(["--db", str(db), "ingest", str(export)], sigint_after=frac * full)
        lines = err.strip().splitlines()
        assert code in (0, 130, -signal.SIGINT), (frac, code, err)  # never 1 or 2
        if code in (0, -signal.SIGINT):  # finished before the signal (or it came as Python exited)
            assert " rows" in out and err == "", (frac, code, out, err)
            outcome = "finished"
        else:
            assert len(lines) == 1 and "interrupted" in lines[0], (frac, err)
            assert "internal error" not in lines[0] and "Traceback" not in err
            # (its result line printed: the run was committed, the signal came as the command ended)
            outcome = "committed" if "is in the store as run" in lines[0] or " rows" in out else "not committed"
            assert outcome == "committed" or "not ingested" in lines[0] or lines[0] == "tracekit: interrupted"
            assert not lines[0].startswith("tracekit: error:")  # a Ctrl-C is no error
        outcomes.add(outcome)
        # the store holds the whole run or nothing of it
        if outcome == "not committed":
            if existing:
                assert _counts(db) == before, (frac, lines)
            else:
                assert not db.exists() or _counts(db).get("runs", 0) == 0, (frac, lines, out)
                assert not db.exists()  # a store the interrupted ingest created is not left behind
        else:
            got = _counts(db)
            # (what a failure needs to be understood: a run printed as committed once read back as
            # the schema alone; whether a log was left beside the store tells where it went)
            files = {f.name: f.stat().st_size for f in sorted(db.parent.glob(db.name + "*"))}
            said = f"frac {frac} exit {code} out {out!r} err {err!r} files {files} got {got} before {before}"
            assert (got["runs"] == before["runs"] + 1) if existing else (got == reference), said
            for table, n in reference.items():
                if table not in ("runs", "_store", "_strings"):
                    assert got[table] == n + (before.get(table, 0) if existing else 0), table
    assert "not committed" in outcomes  # the interrupt did land during the ingest


class _SigintDuringCommit:
    """A DuckDB connection that receives a real SIGINT (Ctrl-C) while its COMMIT runs,
    the moment that used to report "cannot rollback" or lose the run's outcome."""

    def __init__(self, con):
        self._con = con

    def execute(self, sql, *args, **kwargs):
        if sql.strip().upper() == "COMMIT":
            os.kill(os.getpid(), signal.SIGINT)
        return self._con.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._con, name)


def _ingest_through(store: Path, wrap, error: type[BaseException] = tracekit.TracekitError):
    """Ingest the small nsys export into ``store`` as run "again" with the store's connection
    replaced by ``wrap(con)`` (a stand-in that acts at some statement), expecting ``error``:
    its ExceptionInfo and the Tracekit (closed, its connection given back)."""
    tk = tracekit.open(store)
    real = tk.con
    tk._con = wrap(real)
    try:
        with pytest.raises(error) as info:
            tk.ingest(DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz", name="again")
    finally:
        tk._con = real
        tk.close()
    return info, tk


@pytest.mark.parametrize("when", ["ended", "starting"])
def test_a_ctrl_c_the_command_did_not_catch_is_one_line_or_nothing(small_store, when):
    """A Ctrl-C that lands once the command has ended (here: as the process puts its signal
    handlers back, before it ignores SIGINT) changes nothing: the command's output and exit
    code, no traceback (it printed one, exit -2, where an ingest's 90 % moment fell there), and
    SIGTERM's handler put back all the same. One that lands before the command catches them is
    the interrupted line and 130."""
    at = "tracekit.interrupts.stop_at_once" if when == "ended" else "tracekit.cli._debug_first"
    runner = ("import os, signal, sys, tracekit.cli, tracekit.interrupts\n"
              f"mod, name = '{at}'.rsplit('.', 1)\n"
              "mod = sys.modules[mod]; real = getattr(mod, name); sent = []\n"
              "def once(*args):\n"
              "    if not sent:\n"
              "        sent.append(1)\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "    return real(*args)\n"
              "setattr(mod, name, once)\n"
              "tracekit.cli.stop_at_once = tracekit.interrupts.stop_at_once\n"
              "code = tracekit.cli.main()\n"
              "print('handlers put back:', signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n"
              "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", runner, "--db", str(small_store), "runs"], capture_output=True,
                          text=True, timeout=120)
    put_back = "handlers put back: True\n"  # (SIGTERM's own, as stop_as_ctrl_c found it)
    assert proc.stdout.endswith(put_back), proc
    out = proc.stdout.removesuffix(put_back)
    if when == "ended":
        assert (proc.returncode, proc.stderr) == (0, "") and "nsys" in out, proc
    else:
        assert (proc.returncode, out) == (130, "") and proc.stderr == "tracekit: interrupted\n", proc


DEAF = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # (as a shell script's background job is started)
sys.path.insert(0, sys.argv[1])
from tracekit.interrupts import SigintWatch, stop_as_ctrl_c, terminated
stop_as_ctrl_c()
said = []
os.kill(os.getpid(), signal.SIGINT)  # (a Ctrl-C at the terminal: not for a background job)
time.sleep(0.2)
child = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
try:
    with SigintWatch() as watch:
        if sys.argv[2] == "import":
            import tk_deaf_import  # sends itself a SIGTERM as it initialises
            said.append("imported")
            time.sleep(5)
        said.append(f"ignoring {signal.getsignal(signal.SIGINT) is signal.SIG_IGN}")
        said.append("child ignoring " + subprocess.run([sys.executable, "-c", child], capture_output=True,
                                                       text=True).stdout.strip())
        with watch.held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # (a second: the command is stopping already)
            time.sleep(0.2)
            said.append("block ended")
        said.append("not reached")
except KeyboardInterrupt:
    said.append(f"interrupted, counted {watch.count}, terminated {terminated()}")
print("; ".join(said))
"""


@pytest.mark.parametrize("during", ["held", "import"])
def test_a_background_job_ignores_ctrl_c_and_is_interrupted_by_sigterm(tmp_path, during):
    """A process started ignoring SIGINT (a shell script's background job) keeps ignoring it,
    and so do the programs it starts; a SIGTERM there is a KeyboardInterrupt counted as a
    Ctrl-C, raised where the ``held`` block under way ends, a second one not counted; one
    during an import is raised once the import is done (DuckDB's module would abort). It used
    to end the process at once, whatever it was doing."""
    (tmp_path / "tk_deaf_import.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\n"
        "for _ in range(20):\n    time.sleep(0.005)\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", DEAF, str(Path(tracekit.__file__).parents[1]), during],
                          capture_output=True, text=True, timeout=60, env=env)
    said = {"held": r"ignoring True; child ignoring True; block ended; interrupted, counted 1, terminated True\n",
            # (sent again every 50 ms until the import is done, as a Ctrl-C is)
            "import": r"imported; interrupted, counted [2-9], terminated True\n"}[during]
    assert (proc.returncode, proc.stderr) == (0, "") and re.fullmatch(said, proc.stdout), proc


DEAF_STATEMENT = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # (as a shell script's background job is started)
sys.path.insert(0, sys.argv[1])
import duckdb
from tracekit.interrupts import SigintWatch, interruptible, stop_as_ctrl_c
stop_as_ctrl_c()
con = interruptible(duckdb.connect())
start = time.monotonic()
try:
    with SigintWatch() as watch:
        import tk_deaf_quick_import  # sends itself a SIGTERM as it initialises: sent again 50 ms later
        con.execute("SELECT count(*) FROM range(5000000000) t(x) WHERE x % 7 = 3").fetchall()
except BaseException as err:
    print(type(err).__name__, "counted" if watch.count else "not counted", "after",
          "less than 10 s" if time.monotonic() - start < 10 else "10 s or more")
"""


def test_a_sigterm_during_an_import_stops_the_statement_after_it(tmp_path):
    """A background job's SIGTERM that lands during an import is sent again once the import is
    done, and stops the statement that started meanwhile at once, as a Ctrl-C does elsewhere
    (the waker took only the first SIGTERM: the statement ran to its end, a review found in 13
    of 80 runs of `tracekit sql` signalled 0.2-0.7 s after it started)."""
    (tmp_path / "tk_deaf_quick_import.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(0.01)\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", DEAF_STATEMENT, str(Path(tracekit.__file__).parents[1])],
                          capture_output=True, text=True, timeout=180, env=env)
    # (the statement's own error, "Query interrupted" in one class or another, counted as the
    # interrupt: what the CLI exits 130 on)
    assert (proc.returncode, proc.stderr) == (0, "") and re.fullmatch(
        r"(InterruptException|RuntimeError|KeyboardInterrupt) counted after less than 10 s\n", proc.stdout), proc


def test_sigterm_stops_a_long_statement_of_a_background_job_at_once(small_store):
    """A background job's long query (the process started ignoring SIGINT) stops at once on a
    SIGTERM, as on a Ctrl-C elsewhere: the waker interrupts the statement."""
    from conftest import store_state

    before = store_state(small_store)
    query = "SELECT count(*) FROM range(5000000000) t(x) WHERE x % 7 = 3"  # about a minute on 2 cores
    proc = subprocess.Popen([sys.executable, "-c", "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                             + RUNNER, "--db", str(small_store), "sql", query], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "ready"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)  # (ignored)
    time.sleep(1.0)
    assert proc.poll() is None
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out, err.strip().splitlines()) == (130, "", ["tracekit: interrupted"]), err[-500:]
    assert time.monotonic() - start < 11
    assert store_state(small_store) == before


def test_ctrl_c_during_the_commit_keeps_and_reports_the_run(small_store):
    info, _ = _ingest_through(small_store, _SigintDuringCommit)
    assert info.value.exit_code == 130
    assert "interrupted after the commit: it is in the store as run 3 (again)" in str(info.value)
    con = duckdb.connect(str(small_store), read_only=True)
    assert con.execute("SELECT run_id, name FROM runs ORDER BY 1").fetchall() == [
        (1, "nsys_run"), (2, "ncu_run"), (3, "again")]
    con.close()


def test_ctrl_c_before_the_commit_leaves_the_store_as_it_was(small_store):
    """The same SIGINT as the run's rows are inserted: nothing of the run is kept."""
    before = _counts(small_store)

    class SigintOnLastInsert(_SigintDuringCommit):
        def execute(self, sql, *args, **kwargs):
            if sql.strip().upper() == "COMMIT":
                raise AssertionError("COMMIT reached: the interrupt did not stop the ingest")
            if sql.startswith("INSERT INTO"):
                os.kill(os.getpid(), signal.SIGINT)
            return self._con.execute(sql, *args, **kwargs)

    info, _ = _ingest_through(small_store, SigintOnLastInsert)
    assert info.value.exit_code == 130
    assert "interrupted; not ingested, nothing of it is in the store" in str(info.value)
    assert _counts(small_store) == before


class _AfterTheLoader(_SigintDuringCommit):
    """A DuckDB connection on which ``act(con)`` runs in place of the ingest's last
    statement before its COMMIT: the memory limit set back once the nsys loader has
    dropped its temporary tables."""

    def __init__(self, con, act):
        super().__init__(con)
        self._act, self._dropped = act, False

    def execute(self, sql, *args, **kwargs):
        self._dropped = self._dropped or sql.startswith("DROP TABLE IF EXISTS _nsys_")
        if self._dropped and sql.startswith("SET memory_limit"):
            self._dropped = False
            return self._act(self._con)
        return self._con.execute(sql, *args, **kwargs)


def test_ctrl_c_stopping_the_last_statement_before_the_commit_is_no_commit(small_store):
    """A Ctrl-C that stops the statement before the COMMIT (the waker stops it; Python's
    handler, running as its error is handled, raises nothing more): the run is not said
    to be in the store. The loader used to pass over that statement's error, and DuckDB's
    COMMIT of the aborted transaction rolled the run back while the ingest reported its rows
    (a new store read back as the schema alone, CI on 2026-12-05)."""
    from tracekit import interrupts

    def stopped_by_ctrl_c(con):
        done = threading.Event()

        def waker():
            # what the waker does on SIGINT, again until it lands (DuckDB forgets an interrupt
            # that comes before the statement starts)
            while not done.wait(0.2):
                interrupts._interrupt_statements()

        thread = threading.Thread(target=waker)
        thread.start()
        try:
            return con.execute("SELECT count(*) FROM range(10000000000000)").fetchall()
        finally:
            done.set()
            thread.join()

    before = _counts(small_store)
    info, _ = _ingest_through(small_store, lambda con: _AfterTheLoader(con, stopped_by_ctrl_c))
    assert info.value.exit_code == 130
    assert "interrupted; not ingested, nothing of it is in the store" in str(info.value)
    assert _counts(small_store) == before


def test_an_error_passed_over_inside_the_ingest_is_no_commit(small_store):
    """Whatever statement failed inside the ingest's transaction with its error caught and
    passed over, the COMMIT that DuckDB would turn into a rollback is refused: an error, not
    rows reported and lost."""

    def failed_and_passed_over(con):
        with contextlib.suppress(duckdb.Error):
            con.execute("SELECT error('a clean-up failed')").fetchall()

    before = _counts(small_store)
    info, tk = _ingest_through(small_store, lambda con: _AfterTheLoader(con, failed_and_passed_over), RuntimeError)
    info.match("nothing was committed")
    assert tk.last_ingest is None
    assert _counts(small_store) == before


def test_a_conversion_error_is_shown_not_the_aborted_transaction(small_store, monkeypatch, capsys):
    """A value the store's column cannot take: the conversion error is the message (a
    cleanup after it used to replace it with "Current transaction is aborted")."""
    from tracekit.ingest import ncu

    real_read = ncu.read

    def read_with_a_bad_value(path):
        parsed = real_read(path)
        m = parsed.tables["ncu_metrics"]
        ids = pa.array([f"k{v}" for v in m["kernel_id"].to_pylist()])
        parsed.tables["ncu_metrics"] = m.set_column(m.schema.get_field_index("kernel_id"), "kernel_id", ids)
        return parsed

    monkeypatch.setattr(ncu, "read", read_with_a_bad_value)
    before = _counts(small_store)
    code = cli_main(["--db", str(small_store), "ingest", str(DATA / "ncu_full" / "report.ncu-rep.xz")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and "Conversion Error" in err[0] and "'k" in err[0], err
    assert "transaction" not in err[0].lower()
    assert _counts(small_store) == before


def _fails_cleanly_or_finishes(code: int, err: str, db: Path, before: dict | None, reference: dict) -> str:
    """What an ingest under a file-size limit may do: fail with the write error as its
    one line, the store as it was (``before``; None: no store), or finish whole (DuckDB
    leaves in the WAL what a checkpoint at close could not write)."""
    lines = err.strip().splitlines()
    if code == 0:
        got = _counts(db)
        for table, n in reference.items():
            if table not in ("runs", "_store", "_strings"):
                assert got[table] == n + (before or {}).get(table, 0), table
        return "finished"
    assert code == 2 and len(lines) == 1, err
    assert "File too large" in lines[0], lines[0]
    assert "aborted" not in lines[0] and "rollback" not in lines[0], lines[0]
    if before is None:
        assert not db.exists() and not db.with_name(db.name + ".wal").exists()
    else:
        assert _counts(db) == before
    return "failed"


def test_a_full_disk_is_the_error_shown(export, reference_store, reference, small_store):
    """File-size limits (ulimit -f) at shares of the size the store reaches: a write that
    fails says "File too large" (EFBIG, what ENOSPC of a full disk is to DuckDB), not
    "transaction is aborted" or "cannot rollback", and the store is as it was."""
    size = reference_store.stat().st_size
    seen = set()
    for share in (0.03, 0.15, 0.5):
        fresh = small_store.with_name("fresh.duckdb")
        code, _, err, _ = _run_cli(["--db", str(fresh), "ingest", str(export)],
                                   fsize=int(share * size))
        seen.add(_fails_cleanly_or_finishes(code, err, fresh, None, reference))
        for f in small_store.parent.glob("fresh.duckdb*"):
            f.unlink()
    # a store that holds runs keeps them
    before = _counts(small_store)
    pristine = small_store.read_bytes()
    for share in (0.03, 0.15):
        small_store.write_bytes(pristine)
        code, _, err, _ = _run_cli(["--db", str(small_store), "ingest", str(export)],
                                   fsize=len(pristine) + int(share * size))
        seen.add(_fails_cleanly_or_finishes(code, err, small_store, before, reference))
    assert "failed" in seen


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs, the real thing where this machine lets us mount one (root, CAP_SYS_ADMIN);
    unmounted after the test."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_no_space_left_on_a_small_filesystem(export, small_disk):
    db = small_disk / "store.duckdb"
    code, _, err, _ = _run_cli(["--db", str(db), "ingest", str(export)])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "No space left on device" in lines[0] and "aborted" not in lines[0], lines[0]
    assert list(small_disk.iterdir()) == []


def test_outputs_and_datasets_on_a_full_disk_are_one_line(reference_store, tmp_path, small_disk):
    """A full disk under the outputs Polars, DuckDB and openpyxl write (Parquet from `sql` and
    `query`, `export parquet`, a run added to a dataset, with --workers too): their own
    exceptions were internal errors, and a workbook's zip file printed a traceback as Python
    collected it. Each is one line naming the file and the full disk, exit 2, nothing left."""
    mnt = small_disk
    outside = tmp_path / "ds"
    assert _run_cli(["--db", str(reference_store), "export", "parquet", "-o", str(outside)])[0] == 0
    shutil.copytree(outside, mnt / "ds")  # (a dataset of one run on the small disk)
    before = sorted((p.relative_to(mnt), p.read_bytes()) for p in (mnt / "ds").rglob("*") if p.is_file())
    with open(mnt / "fill", "wb", buffering=0) as f, contextlib.suppress(OSError):  # the rest of the disk taken
        while True:
            f.write(b"\0" * 4096)
    other = DATA / "nsys_diff_base_b" / "export.sqlite.xz"
    cases = [
        (["sql", "SELECT * FROM kernels", "-o", str(mnt / "k.parquet")], f"{mnt / 'k.parquet'}: cannot write "
         "(no space left on device); nothing was written"),
        (["query", "gpu-trace", "--limit", "0", "-o", str(mnt / "t.xlsx")], f"{mnt / 't.xlsx'}: cannot write "
         "(no space left on device); nothing was written"),
        (["export", "parquet", "-o", str(mnt / "new")], f"{mnt / 'new'}: cannot write the dataset (no space "
         "left on device); nothing was left in it"),
    ]
    for args, said in cases:
        code, _, err, _ = _run_cli(["--db", str(reference_store), *args])
        assert (code, err.splitlines()) == (2, [f"tracekit: error: {said}"]), (args, err)
    code, _, err, _ = _run_cli(["--db", f"{mnt / 'ds'}/", "ingest", str(other)])
    assert (code, err.splitlines()) == (2, [f"tracekit: error: {mnt / 'ds'}: cannot write the run of {other} (no "
                                            "space left on device); the dataset is as it was"]), err
    code, _, err, _ = _run_cli(["--db", f"{mnt / 'ds'}/", "ingest", str(other), "--workers", "2"])
    assert code == 2 and err.splitlines()[0] == (f"tracekit: error: {other}: cannot write its run (no space left "
                                                 "on device); nothing was written"), err
    assert sorted(p.name for p in mnt.iterdir()) == ["ds", "fill"]
    after = sorted((p.relative_to(mnt), p.read_bytes()) for p in (mnt / "ds").rglob("*") if p.is_file())
    assert after == before


@pytest.mark.parametrize("older", [True, False], ids=["over-older", "new"])
def test_a_sweep_exported_as_csv_on_a_full_disk_is_both_files_or_neither(tmp_path, small_disk, older):
    """`export sweep -o S.csv` writes two files, the results and S-summary.csv: where the
    second cannot be written, neither is (the first was left, replacing an older pair's), and
    the full disk is said in words."""
    db = tmp_path / "sweep.duckdb"
    assert _run_cli(["--db", str(db), "ingest", str(DATA / "sweep_pair" / "c")])[0] == 0
    mnt = small_disk
    if older:
        (mnt / "s.csv").write_text("the older results\n")
        (mnt / "s-summary.csv").write_text("the older summary\n")
    with open(mnt / "fill", "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
    # room for the results (13.7 kB, 4 pages of 4 kB), not the summary too (1.3 kB); beside an older pair, less
    os.truncate(mnt / "fill", (mnt / "fill").stat().st_size - (8192 if older else 16384))
    code, _, err, _ = _run_cli(["--db", str(db), "export", "sweep", "-o", str(mnt / "s.csv")])
    assert (code, err.splitlines()) == (2, [f"tracekit: error: {mnt / 's.csv'}: cannot write (no space left on "
                                            "device); nothing was written"]), err
    assert sorted(p.name for p in mnt.iterdir()) == ["fill", "s-summary.csv", "s.csv"] if older else ["fill"]
    if older:
        assert (mnt / "s.csv").read_text() == "the older results\n"
        assert (mnt / "s-summary.csv").read_text() == "the older summary\n"


def test_removing_a_run_on_a_full_disk_keeps_it(reference_store, tmp_path):
    """`runs rm` whose commit cannot be written: the write error as one line, exit 2, the
    run still there (a ROLLBACK after DuckDB ended the transaction replaced it with
    "cannot rollback - no transaction is active", an internal error)."""
    from conftest import store_state

    outcomes = set()
    for limit_kb in (128, 256, 512):
        db = tmp_path / f"rm{limit_kb}.duckdb"
        shutil.copyfile(reference_store, db)
        before = store_state(db)
        code, out, err, _ = _run_cli(["--db", str(db), "runs", "rm", "1"],
                                     fsize=limit_kb * 1024)
        lines = err.strip().splitlines()
        if code == 0:
            assert out.startswith("removed run 1"), out
            outcomes.add("removed")
            continue
        assert code == 2 and len(lines) == 1 and "File too large" in lines[0], err
        assert "rollback" not in lines[0] and "aborted" not in lines[0], lines[0]
        assert store_state(db) == before
        outcomes.add("cannot remove run 1" in lines[0] and "failed")
    assert "failed" in outcomes


def test_renaming_a_run_on_a_full_disk_keeps_its_name(reference_store, tmp_path):
    """`runs rename` whose change cannot be written (a 120 kB name under file-size limits
    below it): one line, exit 2, the old name kept (it was an internal error)."""
    from conftest import store_state

    for limit_kb in (16, 64, 104):
        db = tmp_path / f"rename{limit_kb}.duckdb"
        shutil.copyfile(reference_store, db)
        before = store_state(db)
        code, _, err, _ = _run_cli(["--db", str(db), "runs", "rename", "1", "x" * 120_000],
                                   fsize=limit_kb * 1024)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "File too large" in lines[0], err[:500]
        assert "cannot rename run 1" in lines[0] and "the store is unchanged" in lines[0], lines[0][:300]
        assert store_state(db) == before


def test_ctrl_c_stops_a_long_statement_at_once(small_store):
    """Ctrl-C during a long query: exit 130 with one line, at once. DuckDB alone looks for
    the interrupt only between the tasks of the calling thread: on several threads such a
    scan ran to its end (minutes), or came back as an internal error ("Query interrupted")."""
    from conftest import store_state

    before = store_state(small_store)
    query = "SELECT count(*) FROM range(5000000000) t(x) WHERE x % 7 = 3"  # about a minute on 2 cores
    for _ in range(3):
        code, out, err, took = _run_cli(["--db", str(small_store), "sql", query], sigint_after=1.0)
        assert (code, out, err.strip().splitlines()) == (130, "", ["tracekit: interrupted"]), (code, err[-500:])
        assert took < 11, took
    assert store_state(small_store) == before


LIBRARY = """
import os, signal, sys, threading, time
import tracekit
tk = tracekit.open(sys.argv[1], read_only=True)
for call in (lambda: tk.sql(sys.argv[2]), lambda: tk.query("top-kernels", limit=0),
             lambda: tk.diff("1", "1", by="kernel")):
    call()  # (imports done, as in a notebook)
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    tk.sql(sys.argv[3])
except BaseException as err:
    print(type(err).__name__, round(time.monotonic() - start, 1))
print(tk.query("top-kernels", limit=1).height)  # the store still answers
"""


def test_ctrl_c_in_the_library_is_keyboard_interrupt_at_once(small_store):
    """In Python (a notebook's interrupt button sends the same SIGINT) a long statement stops
    at once and raises KeyboardInterrupt, not DuckDB's "Query interrupted" RuntimeError."""
    long = "SELECT count(*) FROM range(5000000000) t(x) WHERE x % 7 = 3"
    out = subprocess.run([sys.executable, "-c", LIBRARY, str(small_store), "SELECT 1", long],
                         capture_output=True, text=True, timeout=120)
    kind, took = out.stdout.split()[:2]
    assert (out.returncode, kind, out.stdout.split()[2]) == (0, "KeyboardInterrupt", "1"), out.stderr[-800:]
    assert float(took) < 10


def test_a_statement_stopped_by_ctrl_c_raises_once_and_every_watch_counts_it():
    """The waker stops the statement of a registered connection; the statement's error is the
    interrupt (no KeyboardInterrupt raised again in the code handling it), and the outer watch
    knows of it although the inner one's handler ran."""
    import threading

    from tracekit.interrupts import SigintWatch, interruptible

    con = interruptible(duckdb.connect())
    start = time.monotonic()
    with SigintWatch() as outer:
        with SigintWatch() as inner:
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
            with pytest.raises((duckdb.InterruptException, RuntimeError)):
                con.execute("SELECT count(*) FROM range(5000000000) t(x) WHERE x % 7 = 3").fetchall()
            for _ in range(100):  # the code that handles it runs on, uninterrupted
                time.sleep(0.001)
        assert inner.count == 1 and outer.count == 1
    assert time.monotonic() - start < 10
    # a watch counts only while it is active: not one never entered (a store's before its
    # ingest), not one that ended before
    idle, ended = SigintWatch(), SigintWatch()
    with ended:
        pass
    with SigintWatch() as active:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises((duckdb.InterruptException, RuntimeError)):
            con.execute("SELECT count(*) FROM range(5000000000) t(x) WHERE x % 7 = 3").fetchall()
    assert (active.count, idle.count, ended.count, outer.count) == (1, 0, 0, 1)
    con.close()


def test_what_counts_as_a_statement_stopped_by_an_interrupt():
    """The rule the watch's handler uses not to raise a second interrupt: the exception being
    handled is DuckDB's interrupt (a statement stopped by ``interrupt()``), or came from one
    through its causes or contexts (a replacement scan wraps it); any other error, none, or
    a loop of contexts is not one."""
    from tracekit.interrupts import _stopped_statement

    con = duckdb.connect()
    timer = threading.Timer(0.3, con.interrupt)
    timer.start()
    try:
        con.execute("SELECT count(*) FROM range(5000000000) t(x) WHERE x % 7 = 3").fetchall()
    except Exception as stopped:  # noqa: BLE001
        assert _stopped_statement()
        try:
            raise duckdb.InvalidInputException("replacement scan failed") from stopped
        except duckdb.InvalidInputException:
            assert _stopped_statement()
        try:
            raise ValueError("while handling it")
        except ValueError:
            assert _stopped_statement()  # (its context is the interrupt)
    else:
        pytest.fail("the statement ran to its end")
    finally:
        timer.cancel()
        con.close()
    assert not _stopped_statement()
    try:
        raise RuntimeError("Query failed: not an interrupt")
    except RuntimeError:
        assert not _stopped_statement()
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    try:
        raise a
    except ValueError:
        assert not _stopped_statement()


def test_a_ctrl_c_during_an_import_waits_until_the_import_is_done(tmp_path, monkeypatch):
    """DuckDB's compiled module aborts the process ("Critical nanobind error", SIGABRT) when
    a KeyboardInterrupt is raised while it initialises: the watch lets every import finish
    and raises the interrupt right after it."""
    from tracekit.interrupts import SigintWatch

    (tmp_path / "tk_slow_import.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\n"
        "for _ in range(20):\n    time.sleep(0.005)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tk_slow_import", raising=False)
    raised_after = None
    with pytest.raises(KeyboardInterrupt), SigintWatch() as watch:
        import tk_slow_import  # noqa: F401
        raised_after = "import"
        time.sleep(5)  # the interrupt is delivered again here
        raised_after = "sleep"
    assert raised_after == "import" and sys.modules["tk_slow_import"].DONE
    assert watch.count >= 2


def test_a_ctrl_c_during_an_import_at_the_end_of_a_block_is_raised_at_its_end(tmp_path, monkeypatch):
    """An interrupt that came during an import is delivered again 50 ms later; where the
    block ended meanwhile, the watch raises it as it exits, not later under another handler
    (seen: `tracekit ingest` printed a KeyboardInterrupt traceback after its result, exit -2,
    the interrupt having come while the end of the command imported a module)."""
    from tracekit.interrupts import SigintWatch

    (tmp_path / "tk_import_at_end.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tk_import_at_end", raising=False)
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), SigintWatch() as watch:
        import tk_import_at_end  # noqa: F401
    assert watch.count == 1 and signal.getsignal(signal.SIGINT) is before
    time.sleep(0.3)  # (the interrupt sent again would come here, past the watch)


@pytest.mark.parametrize("after", [0.2, 0.6, 1.2])
def test_ctrl_c_during_an_ingest_in_threads(export, tmp_path, after):
    """Ctrl-C while `--workers 2` ingests several files: exit 130 (or 0 if it finished
    first) with one line saying how many files are in the store; each run in the store
    is whole, and no row belongs to a run the store does not hold."""
    files = [export, DATA / "nsys_hstu_mixed" / "export.sqlite.xz", DATA / "nsys_multiproc" / "export.sqlite.xz",
             DATA / "nsys_graphs_graph" / "export.sqlite.xz"]
    whole = {}
    for i, f in enumerate(files):
        with tracekit.open(tmp_path / f"{i}.duckdb") as tk:
            source = tk.ingest(f).source
        whole[source] = _counts(tmp_path / f"{i}.duckdb")["_kernels"]
    db = tmp_path / "t.duckdb"
    code, out, err, _ = _run_cli(["--db", str(db), "ingest", *map(str, files), "--workers", "2"], sigint_after=after)
    assert code in (0, 130, -signal.SIGINT), (code, err)
    if code != 0:
        assert err.strip().splitlines()[-1].startswith("tracekit: interrupted"), err
    if not db.exists():
        return
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = dict(con.execute("SELECT run_id, source_path FROM runs").fetchall())
        kernels = dict(con.execute("SELECT run_id, count(*) FROM _kernels GROUP BY run_id").fetchall())
    finally:
        con.close()
    assert set(kernels) <= set(runs)
    for run_id, source in runs.items():
        assert kernels.get(run_id, 0) == whole[source], (run_id, source)


def test_ctrl_c_during_a_comparison_of_job_folders_in_threads(tmp_path):
    """Ctrl-C while `diff --jobs A B --workers 2` ingests the folders' exports (each run
    committed as it lands) or compares their ranks: exit 130 (0 where it finished first)
    with one line, and the store holds what it held (the runs landed are removed again)."""
    from _stores import assert_same_stores

    jobs = DATA / "nsys_jobs"
    db, snap = tmp_path / "j.duckdb", tmp_path / "snap.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(jobs / "base" / "rank0" / "export.sqlite.xz")
    shutil.copy(db, snap)
    args = ["--db", str(db), "diff", "--jobs", str(jobs / "base_again"), str(jobs / "after"), "--workers", "2"]
    code, out, err, full = _run_cli([*args, "-f", "csv"])
    assert code == 0 and out.count("\n") > 100, err
    outcomes = set()
    for frac in (0.15, 0.4, 0.8):
        shutil.copy(snap, db)
        code, out, err, _ = _run_cli(args, sigint_after=frac * full)
        assert code in (0, 130, -signal.SIGINT), (frac, code, err)  # never 1 or 2
        if code == 130:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("tracekit: interrupted"), (frac, err)
            with duckdb.connect(str(db), read_only=True) as now, duckdb.connect(str(snap), read_only=True) as was:
                if "after the comparison" in lines[0]:  # (once it was done, on a busy machine: its runs kept)
                    assert lines[0].startswith(f"tracekit: interrupted after the comparison; the 8 runs it "
                                               f"ingested are kept in {db} (runs 2-9;"), lines
                    assert now.execute("SELECT count(*) FROM runs").fetchone()[0] == 9
                else:
                    assert_same_stores(now, was)
        outcomes.add(code)
    assert 130 in outcomes  # the interrupt did land during the command


def test_ctrl_c_once_a_comparison_is_done_says_the_runs_it_kept(tmp_path, monkeypatch, capsys):
    """A Ctrl-C while a comparison's rows are written (after the comparison, which ingested
    its files and kept them): exit 130, one line that names the runs kept, which the store
    holds; one after another, with --workers, of two jobs' folders, and in compare. A Ctrl-C
    during the comparison says nothing of runs kept (none are)."""
    from tracekit import cli, job_diff

    a, b = DATA / "nsys_diff_base_a" / "export.sqlite.xz", DATA / "nsys_diff_regressed" / "export.sqlite.xz"
    jobs = DATA / "nsys_jobs"

    def stopped(*_args, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_diff_out", stopped)
    monkeypatch.setattr(cli, "_show", stopped)  # (compare's table)
    cases = [(["diff", str(a), str(b)], 2), (["diff", str(a), str(b), "--workers", "2"], 2),
             (["compare", str(a), str(b), "--workers", "2"], 2),
             (["diff", "--jobs", str(jobs / "base_again"), str(jobs / "after"), "--workers", "2"], 8)]
    for i, (args, n) in enumerate(cases):
        db = tmp_path / f"s{i}.duckdb"
        assert cli_main(["--db", str(db), *args]) == 130
        err = capsys.readouterr().err
        assert err == (f"tracekit: interrupted after the comparison; the {n} runs it ingested are kept in {db} "
                       f"(runs 1-{n}; tracekit runs rm removes them)\n"), err
        with tracekit.open(db, read_only=True) as tk:
            assert tk.runs().height == n
    # (stopped during the comparison: nothing kept, nothing said of it)
    monkeypatch.setattr(job_diff, "diff_jobs", stopped)
    db = tmp_path / "j.duckdb"
    assert cli_main(["--db", str(db), *cases[-1][0]]) == 130
    err = capsys.readouterr().err
    assert err.startswith("tracekit: interrupted; the store this comparison created is removed"), err
    assert not db.exists()


def test_ctrl_c_in_a_finalizer_prints_no_traceback(tmp_path, monkeypatch, capsys):
    """A Ctrl-C whose KeyboardInterrupt lands in a finalizer (where Python cannot raise it:
    seen at the end of a real `diff --jobs` as "Exception ignored in: 'cpu'"): no traceback
    on stderr; the command goes on and ends as it would have."""
    from tracekit import cli

    class Finalized:
        def __del__(self):
            raise KeyboardInterrupt

    real = cli._diff_out

    def out_with_a_finalizer(*args, **kw):
        Finalized()  # (collected at once: its __del__ raises)
        return real(*args, **kw)

    said = []  # (Python's hook, which would print the traceback)
    monkeypatch.setattr(sys, "unraisablehook", lambda u: said.append(u.exc_value))
    monkeypatch.setattr(cli, "_diff_out", out_with_a_finalizer)
    a = DATA / "nsys_diff_base_a" / "export.sqlite.xz"
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "diff", str(a), str(a), "-f", "csv"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("scope,key,metric") and said == [], (err, said)


def test_ctrl_c_once_an_ingest_in_threads_is_done_says_the_files_are_in(tmp_path, monkeypatch, capsys):
    """A Ctrl-C after `ingest --workers 2` landed every file (while it prints what it did, or
    closes the store) said a bare "tracekit: interrupted": now how many files are in the
    store, which holds them; the serial ingest says its last file is in, and how many of the
    files are."""
    from tracekit import cli

    def stopped(*_args, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_say_captures", stopped)
    files = [DATA / "nsys_hstu_mixed" / "export.sqlite.xz", DATA / "nsys_multiproc" / "export.sqlite.xz"]
    for i, workers in enumerate((["--workers", "2"], [])):
        db = tmp_path / f"s{i}.duckdb"
        assert cli_main(["--db", str(db), "ingest", *map(str, files), *workers]) == 130
        err = capsys.readouterr().err.splitlines()
        assert err == (["tracekit: interrupted; all 2 files are in the store"] if workers else
                       [f"tracekit: {files[1]}: interrupted after the commit: it is in the store as run 2 "
                        "(nsys_multiproc/export); 2 of the 2 files are in the store"]), err
        with tracekit.open(db, read_only=True) as tk:
            assert tk.runs().height == 2


def test_ctrl_c_in_the_middle_of_a_serial_ingest_of_files_counts_those_in(tmp_path, monkeypatch, capsys):
    """A Ctrl-C during the second of three files: that file is not in the store, and the line
    says how many of the files are (the first, committed before)."""
    from tracekit.store import Tracekit

    real, calls = Tracekit.ingest, []

    def second_stopped(self, path, *args, **kw):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, path, *args, **kw)

    monkeypatch.setattr(Tracekit, "ingest", second_stopped)
    files = [DATA / d / "export.sqlite.xz" for d in ("nsys_hstu_mixed", "nsys_multiproc", "nsys_diff_base_a")]
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", *map(str, files)]) == 130
    assert capsys.readouterr().err.splitlines() == [
        f"tracekit: {files[1]}: interrupted; not ingested, nothing of it is in the store; 1 of the 3 files are "
        "in the store"]
    with tracekit.open(db, read_only=True) as tk:
        assert tk.runs()["name"].to_list() == ["nsys_hstu_mixed/export"]
