"""Ingest of many files at once on this machine: N threads of this process.

Most of an ingest runs in code that lets other threads run (the compiled page decoder
and SQLite reader, DuckDB while it executes, Arrow and NumPy on whole columns), so
threads of one process share the machine's cores without a process start, an import,
a copy of the rows between processes or a second write (docs/performance.md, ninth
session: the Dask processes of ``tracekit.distributed`` cost more CPU per file than a
serial ingest, and their start more than a 16-file ingest takes).

Into a DuckDB store, every thread writes its run through a cursor of the store's one
connection, in a transaction of its own (DuckDB runs concurrent appends without
conflict); a store the ingest creates is created while the threads read the first
files. What decides run ids and name ids is done one file at a time, in input order
(``_Turns``): whether the store holds the content already (waiting for an earlier file
of the same content still being written), the run id, the run's name (``RunNames``:
those of the files before it are taken, written or not), and the names the run adds to
``_strings`` (``Parsed.interns``, committed before the run's own transaction, where the
store lacks any of them once the file is read). So the store is the one a serial ingest
of the same files gives. A file that fails is reported; the others land. A file whose
write fails after its turn leaves its run id unused (as a serial ingest does) and may
leave its new names in ``_strings`` (unused).

Into a Parquet dataset (``--db DIR``), each thread prepares its run and writes its
partitions (``tracekit.dataset.prepare_part``); this thread lands them in input order.

Reading a file waits until the memory the files in flight are estimated to need
(``Parsed.memory_need``: the plugins' estimate from the row counts) fits the ingest's
budget, admitting files in input order: N large files do not run at once where they
would not fit together.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .errors import Interrupted, ParamError, TracekitError, missing
from .interrupts import SigintWatch
from .store import IngestResult, Pending, Tracekit, commit, ingest_memory_limit


@dataclass
class Outcome:
    """One input file: its run (``result``) or why it failed (``error``, one line)."""

    source: str
    result: IngestResult | None = None
    error: str | None = None


def error_line(source: str, err: BaseException) -> str:
    """One line for a file that failed: the error, naming the file once."""
    name = type(err).__name__
    if isinstance(err, TracekitError):
        text = str(err)
        named = text.startswith(source) or text.startswith(str(Path(source).resolve()))
        return text if named else f"{source}: {text}"
    if name == "KilledWorker":
        return f"{source}: the worker preparing it died (killed, or out of memory); nothing was written"
    from .outputs import io_reason, no_room

    if no_room(err):  # (a full disk where its run was being written)
        return f"{source}: cannot write its run ({io_reason(err)}); nothing was written"
    first = (str(err).splitlines() or [""])[0]
    return f"{source}: {name}: {first}" if first else f"{source}: {name}"


def check_one_run(n: int, name: str | None, params: dict | None, held: str | None = None) -> None:
    """``--name`` and ``--param rank=`` name one run, one rank: given to ``n`` inputs, each run
    would be named so (one run per name) or be that rank (one rank's data replacing another's in
    the job's queries). ``held``: how the inputs came (default: N given)."""
    held = held or f"{n} given"
    if name is not None and n > 1:
        raise ParamError(f"--name {name!r} names one run: give it one file or run folder ({held})")
    if params and "rank" in params and n > 1:
        raise ParamError(f"--param rank={params['rank']} names one rank: give it one file or run folder ({held}); "
                         "the ranks of several files come from the environment nsys recorded or their names "
                         "(rank3, _r3_)")


def check_workers(workers: int | None, other: str = "") -> int:
    """``workers``, 1 or more; ``other``: what the command takes instead, where it does."""
    if workers is None or workers < 1:
        raise ParamError(f"--workers {workers}: give at least 1 worker{other}")
    return workers


def ingest_many(tk, files: list[str | os.PathLike], *, workers: int, name: str | None = None,
                params: dict | None = None,
                on_outcome: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Ingest ``files`` into ``tk`` (a store, or a Parquet dataset) in ``workers``
    threads; one ``Outcome`` per file, in input order (``on_outcome`` is called as each
    lands or fails, in input order). The store equals a serial ingest of the files
    that did not fail."""
    from .dataset import Dataset

    workers = check_workers(workers)
    files = [Path(f) for f in files]
    check_one_run(len(files), name, params)
    if len(files) == 1 and not files[0].exists():  # (one file: its error alone; of several, each said as it fails)
        raise ParamError(missing(files[0]))
    # Ctrl-C is recognised by the count of SIGINTs, whatever DuckDB turned it into in this
    # thread ("Query interrupted", a RuntimeError, when it lands in a query)
    with SigintWatch() as sigints, tk.one_command(files):
        if isinstance(tk, Dataset):
            return _into_dataset(tk, files, workers, name, params, on_outcome, sigints)
        return _into_store(tk, files, workers, name, params, on_outcome, sigints)


def _interrupt(err: BaseException, sigints: SigintWatch) -> bool:
    """Whether ``err`` (raised in this thread) is what a Ctrl-C became."""
    return isinstance(err, KeyboardInterrupt) or sigints.count > 0


def interrupted_line(landed: int, n: int, where: str) -> str:
    """What an interrupted ingest of ``n`` files did: ``landed`` of them are in the store
    (written, or found there); of the others it wrote nothing (one the store held before,
    whose turn had not come, it still holds: this ingest does not know it)."""
    if landed == n:
        return f"interrupted; all {n} files are in the {where}"
    return f"interrupted; {landed} of {n} files are in the {where}; of the others this ingest wrote nothing"


def _stopped_line(source: str) -> str:
    """The line of a file a Ctrl-C stopped (not DuckDB's "INTERRUPT Error")."""
    return f"{source}: interrupted; not ingested"


class _Turns:
    """Files take their turn in input order: ``wait(i)`` returns once every file before
    ``i`` has had its turn, ``done(i)`` passes it on (every file's turn must be done,
    whatever happened to it). Once the ingest stops (``stop``), no file waits: a file
    before ``i`` may never have its turn (its task cancelled, or not submitted)."""

    def __init__(self):
        self.next, self.stopped = 0, False
        self.cond = threading.Condition()

    def wait(self, i: int) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.next == i or self.stopped)

    def done(self, i: int) -> None:
        with self.cond:
            if self.next == i:  # (not so only for a file that stopped waiting)
                self.next += 1
                self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


class _Admission:
    """Files start reading in input order, once the memory the files in flight are
    estimated to need leaves room for theirs (the first in flight always starts: the
    store refuses a file that alone does not fit its budget). Once the ingest stops,
    no file waits, and none is admitted."""

    def __init__(self, budget: int | None):
        self.budget, self.used, self.next, self.stopped = budget, 0, 0, False
        self.cond = threading.Condition()

    def enter(self, i: int, need: int) -> bool:
        """Wait for file ``i``'s admission; False where the ingest stopped first."""
        with self.cond:
            self.cond.wait_for(lambda: self.stopped or (self.next == i and (
                self.budget is None or self.used == 0 or self.used + need <= self.budget)))
            if self.stopped:
                return False
            self.used += need
            self.next += 1
            self.cond.notify_all()
            return True

    def leave(self, need: int) -> None:
        with self.cond:
            self.used -= need
            self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


class _Opening:
    """The store's opening, done by the ingest's own thread while the first files are
    read: a cursor waits for it before its first statement (and stops waiting, failing,
    where the ingest stopped before the store was open)."""

    def __init__(self):
        self.event = threading.Event()
        self.failed = False

    def done(self, failed: bool = False) -> None:
        if not self.event.is_set():  # (the first word stands: opened, or failed)
            self.failed = failed
            self.event.set()

    def wait(self) -> None:
        self.event.wait()
        if self.failed:  # (the ingest raises the opening's own error; this file's is not reported)
            raise TracekitError("the store did not open")


class _Cursor(Tracekit):
    """The store ``main`` seen through a cursor of its connection: one thread's ingest.
    It shares the main object's database (and its lock), writes no writer info of its
    own, and reads only after its admission (``_check_need``). Its connection is taken
    at its first statement, once the store is open (``opening``); into a store this
    ingest creates, a file is read before that (nothing is in the store to look up)."""

    def __init__(self, main: Tracekit, index: int, admission: _Admission, opening: _Opening, new_store: bool):
        super().__init__(main.path)
        self.main, self.opening, self.new_store = main, opening, new_store
        self.memory_limit = main.memory_limit or ingest_memory_limit()  # (what the store's opening sets)
        self.run_names = main.run_names  # (names are given in the files' turns, in input order)
        self.index, self.admission, self.need = index, admission, None

    @property
    def con(self):
        if self._con is None:
            self.opening.wait()
            self._con = self.main.con.cursor()
        return self._con

    def _seen_path(self, path: Path) -> bool:
        if self.new_store and not self.skip_hashes:
            return False  # (a store this ingest creates held no run when it began)
        return super()._seen_path(path)

    def _check_need(self, plugin, plain: Path, path: Path) -> int | None:
        need = super()._check_need(plugin, plain, path)
        if not self.admit(need or 0):
            raise Interrupted(_stopped_line(str(path)))  # (the ingest stopped: not read)
        return need

    def admit(self, need: int) -> bool:
        """Take this file's admission (once); False where the ingest stopped first."""
        if self.need is None:
            entered = self.admission.enter(self.index, need)
            self.need = need if entered else 0
            return entered
        return not self.admission.stopped

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        if self.need is not None:
            self.admission.leave(self.need)
            self.need = None


def _into_store(tk: Tracekit, files: list[Path], workers: int, name, params, on_outcome,
                sigints: SigintWatch) -> list[Outcome]:
    from .ingest.budget import setting_bytes, shared

    turns, admission = _Turns(), _Admission(setting_bytes(tk.memory_limit or ingest_memory_limit()))
    in_flight: dict[str, threading.Event] = {}  # content hash -> set when its file is done
    outcomes: list[Outcome | None] = [None] * len(files)
    reported = _InOrder(outcomes, on_outcome, held=True)  # (nothing is said before the store is open)
    # The store is opened here while the threads read the first files (creating one
    # takes a third of a second); into a store that exists they wait for it to look the
    # files up, so that a store another process holds is one error before any read.
    new_store = tk._con is None and str(tk.path) != ":memory:" and not tk.path.exists()
    opening = _Opening()
    stop = threading.Event()
    cursors: dict[int, _Cursor] = {}
    lock = threading.Lock()

    def one(i: int) -> None:
        source = str(files[i])
        cur = _Cursor(tk, i, admission, opening, new_store)
        with lock:
            cursors[i] = cur
        done_event = None
        turn_done = False
        try:
            if stop.is_set():
                raise Interrupted(_stopped_line(source))
            with cur.memory_errors(source):
                got = cur._read_input(files[i], name, params)
                if isinstance(got, Pending):  # (most files of one program bring no new name)
                    got.parsed.interns = [it for it in got.parsed.interns
                                          if not hasattr(it, "missing") or it.missing(cur.con)]
            cur.admit(0)  # (a file skipped before reading: its place in the admission order)
            turns.wait(i)
            try:
                if stop.is_set():  # (read while Ctrl-C came: not written)
                    raise Interrupted(_stopped_line(source))
                if isinstance(got, Pending):
                    with cur.memory_errors(source):
                        got, done_event = _take_turn(cur, got, in_flight)
            finally:
                turn_done = True
                turns.done(i)
            if isinstance(got, tuple):  # (pending, run id): written at once with the others
                pending, run_id = got
                got = cur._write_pending(pending, run_id=run_id)
            reported.put(i, Outcome(source, result=got))
            if not got.skipped:
                tk._created = False  # the store holds a run now: keep it whatever follows
        except BaseException as err:  # noqa: BLE001 - reported per file; the others go on
            if not turn_done:
                cur.admit(0)
                turns.wait(i)
                turns.done(i)
            if isinstance(err, KeyboardInterrupt) or sigints.count:  # (whatever DuckDB made of it)
                stop_all()
            reported.put(i, Outcome(source, error=_stopped_line(source) if stop.is_set() else error_line(source, err)))
        finally:
            if done_event is not None:
                done_event.set()
            cur.close()

    def stop_all() -> None:
        # The files not started never start, none waits for another (or for the store's
        # opening), and those running stop at DuckDB's next check. (In this thread a second
        # Ctrl-C waits until every wait is released: raised halfway, it would leave threads
        # waiting, and the pool's join with them.)
        main = threading.current_thread() is threading.main_thread()
        with sigints.held() if main else contextlib.nullcontext():
            stop.set()
            turns.stop()
            admission.stop()
            opening.done(failed=True)
        with lock:
            for c in cursors.values():
                if c._con is not None:
                    c._con.interrupt()

    def open_store() -> None:  # (a bad store: one error, and no file reported)
        try:
            tk.con  # noqa: B018 - the cursors share its connection
            tk._note_writer(f"`tracekit ingest` of {len(files)} files")
        except BaseException:
            reported.close()
            stop_all()
            raise
        opening.done()
        reported.release()

    pool = None
    try:
        if not new_store:
            open_store()
        with shared(), ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tracekit-ingest") as pool:
            futures = []
            try:  # (a Ctrl-C while the tasks are submitted stops those submitted)
                for i in range(len(files)):
                    futures.append(pool.submit(one, i))
                if new_store:
                    open_store()
                for f in futures:
                    f.result()
            except BaseException:  # (Ctrl-C, or the store that did not open)
                stop_all()
                for f in futures:
                    f.cancel()
                raise
    except BaseException as err:
        if not _interrupt(err, sigints):
            raise
        # Ctrl-C may have come while the threads were being joined: stop those still
        # running and wait for them (what landed is then known), and report nothing
        # after the line that says so
        stop_all()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        reported.close()
        landed = [o.result for o in outcomes if o is not None and o.result is not None]
        if not any(not r.skipped for r in landed):
            tk._discard_if_new()
        raise Interrupted(interrupted_line(len(landed), len(files), "store")) from None
    if all(o is not None and o.result is None for o in outcomes):
        tk._discard_if_new()  # every file failed: a store this ingest created goes
    return outcomes


def _take_turn(cur: _Cursor, pending: Pending, in_flight: dict[str, threading.Event]):
    """This file's turn (input order): wait for an earlier file of the same content
    still being written, decide what the store does with it, and give it its run id
    and names. Returns (the outcome, or (pending, run id) to write), and the event that
    says this file is done (None where it writes nothing)."""
    hashes = [pending.digest, *(h for _, _, h in pending.sources)]
    for h in hashes:
        if (ev := in_flight.get(h)) is not None:
            ev.wait()
    got = cur._decide(pending)
    if isinstance(got, IngestResult):
        return got, None
    con = cur.con
    run_id = got.replace
    if run_id is None:
        run_id = con.execute("SELECT nextval('run_id_seq')").fetchall()[0][0]
    if got.parsed.interns:
        con.execute("BEGIN TRANSACTION")
        try:
            for intern in got.parsed.interns:
                intern(con)
            commit(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
    ev = threading.Event()
    for h in hashes:
        in_flight[h] = ev
    return (got, int(run_id)), ev


class _InOrder:
    """Outcomes kept by file and passed to ``on_outcome`` in input order."""

    def __init__(self, outcomes: list, on_outcome, held: bool = False):
        self.outcomes, self.on_outcome, self.next, self.held = outcomes, on_outcome, 0, held
        self.lock = threading.Lock()

    def put(self, i: int, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes[i] = outcome
            self._pass_on()

    def release(self) -> None:
        """Outcomes held so far (``held``) are passed on, and those to come as they come."""
        with self.lock:
            self.held = False
            self._pass_on()

    def _pass_on(self) -> None:
        while not self.held and self.next < len(self.outcomes) and self.outcomes[self.next] is not None:
            if self.on_outcome is not None:
                self.on_outcome(self.outcomes[self.next])
            self.next += 1

    def close(self) -> None:
        """Outcomes from now on are kept but no longer passed on (an interrupted ingest
        has said what landed; a file still winding down must not print after it)."""
        with self.lock:
            self.on_outcome = None


def _into_dataset(ds, files: list[Path], workers: int, name, params, on_outcome,
                  sigints: SigintWatch) -> list[Outcome]:
    """Each thread prepares its run and writes its partitions; this thread lands them
    (renamed into place, runs.parquet rewritten) in input order."""
    dest = ds.staging_destination()
    threads = max(1, (os.cpu_count() or 1) // workers)  # each run's own DuckDB: the cores shared
    outcomes: list[Outcome] = []
    stage_dir = None
    try:  # (whatever fails from here, the destination is finished: its writer lock let go)
        known = dest.known_hashes()
        stage_dir = Path(tempfile.mkdtemp(prefix=".tracekit-stage-", dir=dest.stage_parent))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tracekit-ingest") as pool:
            futures = []
            try:  # (a Ctrl-C while the tasks are submitted: those submitted never start)
                for i, f in enumerate(files):
                    futures.append(pool.submit(dest.task, str(f.resolve()), i, name=name, params=params,
                                               workdir=str(stage_dir), known=known, threads=threads))
            except BaseException:
                for other in futures:
                    other.cancel()
                raise
            for f, fut in zip(files, futures, strict=True):
                source = str(f)
                try:
                    part = fut.result()
                except KeyboardInterrupt:
                    for other in futures:
                        other.cancel()
                    raise
                except Exception as err:  # noqa: BLE001 - reported per file; the others go on
                    if sigints.count:  # (a worker's statement a Ctrl-C stopped)
                        raise KeyboardInterrupt from err
                    outcome = Outcome(source, error=error_line(source, err))
                else:
                    ds.last_ingest = None
                    try:
                        outcome = Outcome(source, result=dest.land(part))
                    except TracekitError as err:
                        outcome = Outcome(source, error=error_line(source, err))
                    except KeyboardInterrupt:  # (held until the run was in: it counts)
                        if ds.last_ingest is not None:
                            outcomes.append(Outcome(source, result=ds.last_ingest))
                        raise
                    finally:
                        part.discard()
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
    except BaseException as err:
        if not _interrupt(err, sigints):
            raise
        landed = sum(o.result is not None for o in outcomes)
        raise Interrupted(interrupted_line(landed, len(files), "dataset")) from None
    finally:
        dest.finish()
        if stage_dir is not None:
            shutil.rmtree(stage_dir, ignore_errors=True)
    return outcomes
