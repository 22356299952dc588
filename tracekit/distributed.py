"""Distributed ingest: each export prepared in a Dask worker, landed in the main process.

``ingest_many`` submits one task per file to a Dask ``distributed`` cluster (a
``LocalCluster`` of N worker processes, or an existing scheduler) that prepares the run
(``tracekit.staging.prepare``: parse and derive into a staging database beside the
destination). The main process lands the runs in input order, each as soon as it and
every file before it are done, one transaction per run, so run ids and name ids are
those a serial ingest gives. While a LocalCluster starts, the main process ingests the
first files itself, directly. The store stays open between landings and is closed
while the next run is long in coming (``PAUSE_AFTER_S``), for readers. A file that
fails (bad input, a worker that died) is reported with its error; the others land. What
a worker's ingest warns of a file (``CaptureWarning``) is said here as its run lands.

`tracekit ingest --scheduler ADDRESS` (or ``$DASK_SCHEDULER_ADDRESS``) comes here;
``--workers N`` alone ingests in threads of this process (``tracekit.parallel``), which
costs less CPU per file and starts nothing (docs/performance.md, ninth session).
``ingest_many(..., workers=N)`` without an address still starts a LocalCluster.

Dask is optional (``pip install 'tracekit[dask]'``) and imported only here.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .errors import (
    CaptureWarning,
    Interrupted,
    ParamError,
    TracekitError,
    missing,
    warn_from_caller,
)
from .parallel import Outcome, check_one_run, error_line

#: The environment variable naming an existing scheduler (as ``nsys recipe --mode dask-futures``).
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
#: How long to wait for a scheduler given by address, seconds.
CONNECT_TIMEOUT_S = 5
#: How long the store stays open while the next prepared run is awaited, seconds: past
#: it, the store is closed until that run lands (readers may open it meanwhile). Closing
#: checkpoints the store (0.1-0.5 s on the 2-core box), so a store closed after every
#: landing made a 16-file ingest ~20 % slower (docs/performance.md).
PAUSE_AFTER_S = 1.0


def _dask():
    try:
        import distributed
    except ImportError as err:
        raise TracekitError("--workers and --scheduler need Dask: pip install 'tracekit[dask]' "
                            "(or ingest without them, one file after another)") from err
    return distributed


@contextmanager
def client_for(workers: int | None = None, scheduler: str | None = None):
    """A Dask client: on ``scheduler`` (or $DASK_SCHEDULER_ADDRESS) if given, else on a
    new LocalCluster of ``workers`` single-threaded processes (closed on exit)."""
    address = _check_options(workers, scheduler)
    if address is not None:
        client = _connect(address)
        try:
            yield client
        finally:
            client.close()
        return
    cluster, client = _local_cluster(workers)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _check_options(workers: int | None, scheduler: str | None) -> str | None:
    """The scheduler's address (None: a LocalCluster of ``workers``); one-line errors for
    options that cannot work, and for Dask missing."""
    if scheduler is not None and not scheduler.strip():
        raise ParamError(f"--scheduler {scheduler!r}: give the scheduler's address (tcp://HOST:PORT)")
    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if (address is None and workers is None) or (workers is not None and workers < 1):
        raise ParamError(f"--workers {workers}: give at least 1 worker process (or --scheduler ADDRESS)")
    _dask()
    return address


def _connect(address: str):
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        # a malformed address checked first: a Client that fails on it lingers, and its
        # clean-up at exit waits 10 s and prints a traceback
        scheme, location = parse_address(address)
        if scheme in ("tcp", "tls", "ws", "wss"):
            _, port = parse_host_port(location)
            if port is None or not 0 < int(port) < 65536:
                raise ValueError(f"port {port} out of range")
        # so is any address no comm can reach (an unknown scheme, inproc, TLS without its settings), and
        # one where something else answers (a worker, a web server, a banner read as a frame's length)
        _probe(address)
        return _dask().Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except Exception as err:  # (whatever the comm raised: the address is the problem, said in one line)
        raise TracekitError(f"cannot reach the Dask scheduler at {address!r} "
                            f"({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
                            "check the address or start one with `dask scheduler`") from err


def _probe(address: str) -> None:
    """Ask ``address`` who it is over one comm, as the client would connect (its security
    settings), within twice ``CONNECT_TIMEOUT_S`` in all (Dask bounds the connection, not
    the wait for the handshake): what fails here fails before a ``Client`` exists to linger.
    Anything but a Dask scheduler's answer is refused."""
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    async def once() -> Any:
        comm = await connect(address, timeout=CONNECT_TIMEOUT_S, **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "n_workers": 0, "reply": True})  # (not every worker's)
            return await comm.read()
        finally:
            comm.abort()

    async def bounded() -> Any:
        limit = 2 * CONNECT_TIMEOUT_S
        try:
            return await asyncio.wait_for(once(), limit)
        except TimeoutError:
            raise TimeoutError(f"no answer in {limit:g} s: what listens there is no Dask scheduler") from None
        except (OSError, ValueError):  # (refused, unreachable, a malformed address: said as the comm says it)
            raise
        except Exception as err:  # (bytes that are no Dask message: a banner read as a frame's length)
            raise ValueError(f"what answers there does not speak Dask's protocol ({type(err).__name__})") from None

    # on a thread of its own: the caller may be inside a running event loop (a notebook)
    with ThreadPoolExecutor(max_workers=1) as pool:
        who = pool.submit(asyncio.run, bounded()).result()
    kind = who.get("type") if isinstance(who, dict) else None
    if isinstance(kind, str) and kind.endswith("Scheduler"):
        return
    if isinstance(who, dict) and who.get("status") in ("error", "uncaught-error"):
        # a worker or a nanny: its identity takes no n_workers ("Worker.identity() got an unexpected ...")
        m = re.search(r"(\w+)\.identity\(", str(who.get("exception_text", "")))
        kind = m[1] if m else "server"
    raise ValueError(f"a Dask {kind} answers there, not a scheduler" if isinstance(kind, str) else
                     "what answers there is no Dask scheduler")


def _local_cluster(workers: int):
    """A new LocalCluster of ``workers`` single-threaded processes and its client."""
    import logging

    import dask

    distributed = _dask()
    # a task whose worker dies fails at once (reported, not retried on the others); no
    # dashboard, no logs mixed into our output; no statistical profiler in the workers: it
    # samples every thread's stack through sys._current_frames() every 10 ms, which on
    # CPython 3.11 deadlocks a process where a thread exits while a garbage collection inside
    # it runs a finalizer that gives up the interpreter lock (seen: a worker hung for good,
    # its main thread in _PyThread_CurrentFrames -> gc -> sqlite3 connection_close)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                          "distributed.worker.daemon": False,
                          "distributed.worker.profile.enabled": False,
                          "distributed.admin.log-length": 0}):
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=logging.CRITICAL)
    try:
        return cluster, distributed.Client(cluster, set_as_default=False)
    except BaseException:
        cluster.close()
        raise


def ingest_many(tk, files: list[str | os.PathLike], *, workers: int | None = None, scheduler: str | None = None,
                name: str | None = None, params: dict | None = None,
                on_outcome: Callable[[Outcome], None] | None = None, here: bool = True) -> list[Outcome]:
    """Ingest ``files`` into ``tk`` (a store, or a Parquet dataset opened for writing)
    through Dask; one ``Outcome`` per file, in input order (``on_outcome`` is called as
    each is landed or fails).

    While a LocalCluster starts (its worker processes' start and imports: 0.9 s on the
    2-core box, 4.7 s on the GPU machine's, docs/performance.md) this process ingests
    the first files itself, directly (``here``; False: every file in a worker); the files
    after them go to the workers as soon as they are up."""
    files = [Path(f) for f in files]
    check_one_run(len(files), name, params)
    if len(files) == 1 and not files[0].exists():  # (one file: its error alone; of several, each said as it fails)
        raise ParamError(missing(files[0]))
    address = _check_options(workers, scheduler)
    with tk.one_command(files):
        return _through_dask(tk, files, address, workers, name, params, on_outcome, here)


def _through_dask(tk, files: list[Path], address: str | None, workers: int | None, name: str | None,
                  params: dict | None, on_outcome: Callable[[Outcome], None] | None, here: bool) -> list[Outcome]:
    distributed = _dask()
    dest = tk.staging_destination()
    outcomes: list[Outcome | None] = [None] * len(files)

    def report(i: int, outcome: Outcome) -> None:
        outcomes[i] = outcome
        if on_outcome is not None:
            on_outcome(outcome)

    stage_dir = None
    lock = threading.Lock()
    futures: dict = {}  # in flight -> the file's index
    state = {"next": 0, "up": False, "client": None, "running": None}
    starter = None
    try:  # (whatever fails from here, the destination is finished: a dataset's writer lock let go)
        stage_dir = Path(tempfile.mkdtemp(prefix=".tracekit-stage-", dir=dest.stage_parent))
        known = dest.known_hashes()

        def submit_next() -> None:
            # as many tasks in flight as the cluster has threads: a worker never holds a
            # queued task, so one that dies fails only the file it was preparing (under lock)
            client = state["client"]
            window = max(1, sum(client.nthreads().values()))
            while len(futures) < window and state["next"] < len(files):
                i = state["next"]
                state["next"] += 1
                fut = client.submit(_saying, dest.task, str(files[i].resolve()), i, name=name, params=params,
                                    workdir=str(stage_dir), known=known, threads=state["threads"],
                                    key=f"tracekit-prepare-{i}-{os.urandom(4).hex()}", pure=False)
                futures[fut] = i
                state["running"].add(fut)

        def up(client):  # the cluster's first tasks, as soon as it is there
            with lock:
                state["client"] = client  # (closed at the end whatever follows)
                state.update(threads=_threads_per_task(client), up=True, first=state["next"],
                             running=distributed.as_completed([], loop=client.loop))
                submit_next()

        if address is not None:  # an existing cluster: joined at once (an unreachable one writes nothing)
            up(_connect(address))
        else:
            starter = ThreadPoolExecutor(max_workers=1)
            starting = starter.submit(lambda: up(_local_cluster(workers)[1]))
            while here and (i := _claim(lock, state, len(files))) is not None:  # meanwhile: the first files here
                report(i, _here(dest, str(files[i]), i, name=name, params=params, workdir=stage_dir, known=known))
            if here and state["next"] >= len(files) and not state["up"]:
                return outcomes  # every file done here (the cluster is closed below)
            starting.result()  # (its start's error, if it failed)
        done: dict[int, tuple] = {}  # index -> (prepared run, or None; its error, or None)
        nxt = state["first"]
        for fut in state["running"]:
            with lock:
                i = futures.pop(fut)
            try:
                done[i] = (*fut.result(), None)
            except Exception as err:  # reported per file; the others go on
                done[i] = (None, [], err)
            fut.release()
            with lock:
                submit_next()
            while nxt in done:
                staged, said, err = done.pop(nxt)
                for text in said:  # (what the worker said of the file, said here as it lands)
                    warn_from_caller(CaptureWarning(text))
                report(nxt, _land(dest, str(files[nxt]), staged, err))
                nxt += 1
            if futures and not state["running"].has_ready() and not _next_within(futures, PAUSE_AFTER_S):
                dest.pause()  # a long wait for a worker: readers may open the store
    finally:
        try:
            dest.finish()
            if stage_dir is not None:
                shutil.rmtree(stage_dir, ignore_errors=True)
        finally:
            _close(state, starter)
    return outcomes


#: per thread of a worker: the texts of the CaptureWarnings its task said (``_saying``)
_SAID: ContextVar[list[str] | None] = ContextVar("said", default=None)
_HOOK_LOCK = threading.Lock()


def _saying(task, *args, **kwargs) -> tuple:
    """``task`` run in a worker, with the texts of the ``CaptureWarning``s it said (a capture
    that missed the GPU work, a run folder's failed status...), which the worker's process
    would print to a terminal no one reads or drop: said in this process as the run lands.
    Collected per thread (a worker may run several tasks at once)."""
    _collect_warnings()
    said: list[str] = []
    token = _SAID.set(said)
    try:
        return task(*args, **kwargs), said
    finally:
        _SAID.reset(token)


def _collect_warnings() -> None:
    """Once per worker process: each ``CaptureWarning`` shown (every time: ``always``) in a
    thread running ``_saying`` goes to its list; every other warning as before."""
    with _HOOK_LOCK:
        shown = warnings.showwarning
        if getattr(shown, "tracekit_collects", False):
            return

        def show(message, category, filename, lineno, file=None, line=None):
            said = _SAID.get()
            if said is not None and issubclass(category, CaptureWarning):
                said.append(str(message))
            else:
                shown(message, category, filename, lineno, file, line)

        show.tracekit_collects = True
        warnings.showwarning = show
        warnings.filterwarnings("always", category=CaptureWarning)


def _claim(lock, state: dict, n: int) -> int | None:
    """The next file for this process to ingest while the cluster starts (None: the
    cluster is up, or no file is left)."""
    with lock:
        if state["up"] or state["next"] >= n:
            return None
        state["next"] += 1
        return state["next"] - 1


def _here(dest, source: str, index: int, **kwargs) -> Outcome:
    """``source`` ingested in this process (its outcome; a Ctrl-C goes up)."""
    try:
        return Outcome(source, result=dest.ingest_here(source, index, **kwargs))
    except Interrupted:
        raise
    except TracekitError as err:
        return Outcome(source, error=error_line(source, err))


def _close(state: dict, starter) -> None:
    """Close the client and, for a LocalCluster (``starter``: its start, waited for
    here), the cluster."""
    if starter is not None:
        starter.shutdown(wait=True)  # the cluster is there, or its start failed
    client = state.get("client")
    if client is None:
        return
    cluster = client.cluster if starter is not None else None
    client.close()
    if cluster is not None:
        cluster.close()


def _next_within(futures, seconds: float) -> bool:
    """Whether one of ``futures`` is done within ``seconds`` (looked at every 20 ms)."""
    deadline = time.monotonic() + seconds
    while not any(f.done() for f in futures):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _land(dest, source: str, staged, err: BaseException | None) -> Outcome:
    if err is not None:
        return Outcome(source, error=error_line(source, err))
    try:
        return Outcome(source, result=dest.land(staged))
    except TracekitError as e:
        return Outcome(source, error=error_line(source, e))
    finally:
        staged.discard()


def _threads_per_task(client) -> int | None:
    """DuckDB threads per task where workers share one machine: its cores over the
    workers on it (None: DuckDB's default)."""
    try:
        info = client.scheduler_info()["workers"]
    except Exception:  # noqa: BLE001 - a scheduler that will not say: DuckDB's default
        return None
    hosts: dict[str, int] = {}
    for w in info.values():
        host = w.get("host", "")
        hosts[host] = hosts.get(host, 0) + 1
    per_host = max(hosts.values(), default=1)
    return max(1, (os.cpu_count() or 1) // per_host)
