"""The DuckDB store: one file, many runs, every table keyed by ``run_id``.

``Tracekit`` is the library façade: it parses once (ingest) and delegates analyses to
named queries that return Polars data frames. Ingest parses the whole source before
it touches the database and then writes in one transaction, so a bad input leaves the
database exactly as it was (and a database that did not exist is not created).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import functools
import json
import os
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from . import ranks
from .errors import (
    InputError,
    Interrupted,
    ParamError,
    QueryError,
    StoreBusy,
    TracekitError,
    expect,
    missing,
)
from .interrupts import SigintWatch, interruptible, stoppable
from .jsonfile import load_json
from .names import RUN_ID, RunNames, asked_run_name, check_run_name, derived_run_name, sql_ident
from .numbers import check_counts

if TYPE_CHECKING:  # imported where used: `tracekit query` needs neither Polars nor Arrow
    import polars as pl
    import pyarrow as pa

    from . import ingest as _ingest

DEFAULT_DB = "tracekit.duckdb"
#: rows of a result read at a time where it is written whole (``Tracekit.sql_each``): a few
#: tens of MB of a dozen columns
SQL_BATCH_ROWS = 1 << 17
SCHEMA_FILES = ["schema_core.sql", "schema_nsys.sql", "schema_ncu.sql", "schema_runs.sql", "schema_bench.sql"]
#: Version of the store's tables, kept in _store; a store of another version is refused
#: with a message rather than read wrong. 2: kernel and API names as _strings ids;
#: 3: kernel_exec_sum computed at ingest; 4: launch_latency_sum computed at ingest;
#: 5: api_sum computed at ingest, _strings ids in name order; 6: content hashes are
#: XXH3-128; 7: the derived columns of _kernels and _api_calls are computed by their views;
#: 8: graph_execs (whole CUDA graph launches), gpu_ops with context_id and graph launches;
#: 9: nvtx_path_kernel_sum computed at ingest; a range's parent is its tightest container
#: (nsys's rule; a store of 8 can hold another parent_id where start/end ranges cross);
#: 10: green_context_id of kernels, copies, memsets and graph launches; 11: osrt_calls;
#: 12: nvtx_range_kernel_sum computed at ingest; 13: ncu_rules; 14: ncu_source, ncu_source_stalls,
#: ncu_source_lines; 15: context_id and stream_id of GPU ops NULL where the op runs on none
#: (Unified Memory migrations: the export's 0); 16: ncu_kernels.workload (kernel, range, graph) and
#: ncu_source.function (the function of an instruction of a range or a graph, which run several);
#: 17: gpu_metrics and gpu_metric_names (nsys --gpu-metrics-devices); 18: nccl_overlap_sum and
#: comm_overlap_sum (NCCL against compute, computed at ingest); 19: profiler_overhead, the source
#: and destination devices of copies and the NVTX range of the API calls that synchronize (nsys's
#: expert rules read them); a job named by its path without the export's suffix; 20: um_cpu_faults,
#: um_gpu_faults and the virtual address and cause of Unified Memory migrations; 21: cpu_samples,
#: cpu_sample_frames and thread_sched (nsys's CPU sampling and the threads' scheduling), the call
#: stacks of OS runtime calls (osrt_frames, osrt_calls.callchain_id); 22: gpu_memory and
#: gpu_memory_pools (nsys --cuda-memory-usage: GPU memory allocated and freed); 23: gpu_memory.event_index
#: (the events' order where their times are equal); 24: api_frames and api_calls.callchain_id (nsys
#: --cudabacktrace: the CUDA API calls' stacks); 25: python_frames, python_samples and
#: api_calls.python_stack_id (nsys --python-backtrace=cuda and --python-sampling: Python stacks);
#: 26: bench_results and bench_samples (the JSON of `tracekit bench`); 27: requests.model_flop and
#: attention_flop (each request's floating-point work); 28: bench_results.peak_reserved_mb.
SCHEMA_VERSION = 28


def ingest_memory_limit() -> str:
    """The memory budget of an ingest process: ``$TRACEKIT_MEMORY_LIMIT``, or half the
    machine's memory, at least 800 MB. Handed to the plugins' loaders, which give DuckDB
    what their Arrow and NumPy arrays leave of it, phase by phase (``ingest.budget``;
    DuckDB spills its joins to disk past its share): 12 M NVTX ranges under 4GB peak at
    4.3 GB of resident memory (docs/performance.md). An ingest estimated to need more is
    refused before it writes anything, with the setting it needs."""
    limit = os.environ.get("TRACEKIT_MEMORY_LIMIT")
    if limit:
        if limit.strip().startswith("-"):  # (DuckDB would read a negative limit as none at all)
            raise TracekitError(f"TRACEKIT_MEMORY_LIMIT={limit!r}: a memory limit is a size of 0 or more "
                                "(e.g. 4GB); unset it for half the machine's memory")
        return limit
    import psutil

    return f"{max(800, psutil.virtual_memory().total // 2 // 2**20)}MB"


def _default_db() -> str:
    """The store when none is named: $TRACEKIT_DB as written (a trailing / kept), else DEFAULT_DB.
    ``:memory:`` there is an error: a store the environment names is one that lasts (an
    in-memory store is asked for by name, ``tracekit.open(":memory:")``)."""
    env = os.environ.get("TRACEKIT_DB")
    if env is not None and env.strip() == ":memory:":
        from .cli_params import IN_MEMORY_ERROR

        raise ParamError(f"TRACEKIT_DB={env!r}: {IN_MEMORY_ERROR}")
    return env or DEFAULT_DB


def default_db_path() -> Path:
    return Path(_default_db())


def _tool_version(folder_meta: dict) -> str | None:
    """The profiler's version as the capture recorded it (``meta.json`` versions[tool],
    ``ncu --version``'s line): ``2025.3.1.0 (build 36398880)``, or None."""
    from .ingest import tool_version

    return tool_version((folder_meta.get("versions") or {}).get(folder_meta.get("tool") or ""))



def place_folder(source: str, holders: dict[str, list[tuple[IngestResult, bool]]]
                 ) -> tuple[IngestResult | None, list[IngestResult]]:
    """Where a run folder goes: ``(same, earlier)`` from ``holders``, for each of its files'
    content hashes every run holding it, with whether that run is the file ingested alone.

    - ``same``: a run folder's run holds every file (the lowest such run): the folder is
      that run (a copy, compressed, its meta.json edited, a file taken out).
    - ``earlier``: the runs of the same capture whose place the folder's run takes: the run
      of this folder's path (``source``) before it grew (files added beside its export), and
      each run that is one of its files ingested alone. The first (the folder's own, else
      the lowest id) keeps its id and name; the others are removed.

    A folder that shares some files with another folder's run and adds its own is a run of
    its own: a file two captures share (the same requests.csv) does not make them one."""
    common: set[int] | None = None
    for runs in holders.values():
        ids = {run.run_id for run, alone in runs if not alone}
        common = ids if common is None else common & ids
    if common:
        first = min(common)
        return next(run for runs in holders.values() for run, _ in runs if run.run_id == first), []
    earlier: dict[int, IngestResult] = {}
    for runs in holders.values():
        for run, alone in runs:
            if alone or run.source == source:
                earlier.setdefault(run.run_id, run)
    return None, sorted(earlier.values(), key=lambda r: (r.source != source, r.run_id))


@dataclass
class Pending:
    """An input read and hashed, not yet written (``Tracekit._decide`` settles its name
    and whether it takes the place of a run)."""

    parsed: _ingest.Parsed
    digest: str
    source: str                      # the input's resolved path
    name: str | None                 # the name asked for
    default_name: str                # its own name (own_run_name): the name it gets otherwise, unless taken
    params: dict
    extra_meta: dict
    sources: list[tuple[str, str, str]]  # (kind, path, content hash) of each file read
    folder: bool = False             # a run folder
    replace: int | None = None       # the run whose place it takes
    absorbs: tuple[int, ...] = ()    # other runs of the same capture it takes the place of too (removed)
    asked_params: dict | None = None  # the parameters asked for (``params`` adds what was found)


@dataclass
class IngestResult:
    """Outcome of ingesting one source: the run id, and whether it was already there."""

    run_id: int
    name: str
    kind: str
    source: str
    skipped: bool
    rows: dict[str, int]
    renamed_from: str | None = None  # skipped, and renamed to the name asked for
    replaced: int | None = None  # a run folder that took the place of the same capture's run (folder_place)
    absorbed: tuple[int, ...] = ()  # other runs of that capture it took the place of (removed)
    digest: str | None = None  # the source's content hash
    status: str | None = None  # the capture's status its run folder recorded (ok, failed; None: a bare export)
    error: str | None = None  # and why it failed, as recorded


#: a ``runs`` row's capture status and error, as its run folder's meta.json recorded them
#: (read back where the run was written elsewhere: staged, or into a dataset)
CAPTURE_STATUS = "json_extract_string(meta, '$.status') AS status, json_extract_string(meta, '$.error') AS error"


def _capture_status(meta: dict) -> dict[str, str | None]:
    """CAPTURE_STATUS of the meta a run is written with, without reading it back."""
    return {k: None if meta.get(k) is None else str(meta[k]) for k in ("status", "error")}


def _schema_sql() -> list[str]:
    out = []
    root = resources.files("tracekit")
    for fname in SCHEMA_FILES:
        f = root / fname
        if f.is_file():
            out.append(f.read_text())
    return out


def _macros_sql() -> str:
    return (resources.files("tracekit") / "macros.sql").read_text()


@functools.lru_cache(maxsize=1)
def schema_digest() -> str:
    """The hash of the schema's text, kept in the store that text set up (``_store``)."""
    import xxhash

    return xxhash.xxh3_128("\n".join(_schema_sql()).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def view_sql() -> tuple[str, ...]:
    """The schema's views and macros (what changes with the code under one schema
    version), each statement without its leading comment lines."""
    out = []
    for text in _schema_sql():
        for st in duckdb.extract_statements(text):
            lines = st.query.strip().splitlines()
            while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
                lines.pop(0)
            q = "\n".join(lines)
            if " ".join(q.split()[:4]).upper() in ("CREATE OR REPLACE VIEW", "CREATE OR REPLACE MACRO"):
                out.append(q)
    return tuple(out)


def _temp_view_sql() -> list[str]:
    """``view_sql`` as TEMP views and macros: on a connection, they stand in front of
    the store's own of the same names."""
    return [re.sub(r"^CREATE\s+OR\s+REPLACE\s+", "CREATE OR REPLACE TEMP ", q, count=1, flags=re.I)
            for q in view_sql()]


#: Statement kinds ``sql`` runs on a store whose tables are files (a Parquet dataset): its
#: connection is an in-memory database DuckDB lets write, and the folder it reads is one DuckDB
#: may write files in (COPY ... TO, EXPORT DATABASE, ATTACH of a new database file), so every
#: other kind (INSERT, DELETE, CREATE, DROP, ...) is refused, as a read-only store refuses them.
_READS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL", "TRANSACTION", "SET", "VARIABLE_SET", "MULTI"})


_LEAD = r"\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*"  # (blanks and comments before a statement's first word)
_EXPLAINED = re.compile(_LEAD + r"EXPLAIN\s*(?:(?:\([^)]*\)|ANALY[SZ]E\b)\s*)*(.*)", re.IGNORECASE | re.DOTALL)
_IMPORT = re.compile(_LEAD + r"IMPORT\b", re.IGNORECASE)


def _statement_kind(con, stmt) -> str:
    """``stmt``'s kind (DuckDB's statement type), for an EXPLAIN that of the statement it
    explains (``EXPLAIN ANALYZE`` runs it: a COPY ... TO writes its file), or "EXPLAIN
    ANALYZE" where that cannot be told; IMPORT DATABASE (DuckDB's type: PRAGMA) runs the
    folder's SQL; a kind this DuckDB's Python module cannot name is "UNKNOWN"."""
    try:
        kind = stmt.type.name
    except ValueError:  # (UPDATE EXTENSIONS: 29 is not a valid StatementType)
        return "UNKNOWN"
    if kind == "PRAGMA" and _IMPORT.match(stmt.query):
        return "IMPORT DATABASE"
    if kind != "EXPLAIN":
        return kind
    m = _EXPLAINED.fullmatch(stmt.query)
    try:
        inner = con.extract_statements(m.group(1)) if m else []
    except duckdb.Error:
        inner = []
    return _statement_kind(con, inner[0]) if len(inner) == 1 else "EXPLAIN ANALYZE"


@functools.cache
def _scratch() -> str:
    """A new private folder (``$TMPDIR/tracekit-*``, mode 0700) for the process's sandboxed
    connections to spill to, removed when the process exits: one for all of them, as readers
    of one store share DuckDB's database and its setting."""
    folder = tempfile.mkdtemp(prefix="tracekit-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _resolves(path: Path) -> bool:
    """Whether ``path``'s symbolic links lead somewhere (existing or not), not round a loop."""
    try:
        path.resolve()
    except (RuntimeError, OSError):  # (a loop of links: RuntimeError before Python 3.13, OSError since)
        return False
    return True


def _first_error(err: BaseException) -> BaseException:
    """The error that started a failure: a statement run after a failed one (a cleanup
    in a ``finally``) meets "Current transaction is aborted", and Python keeps the
    failed one as that error's ``__context__``."""
    while (isinstance(err, duckdb.TransactionException) and "transaction is aborted" in str(err)
           and err.__context__ is not None):
        err = err.__context__
    return err


def commit(con) -> None:
    """COMMIT the connection's transaction, or raise where a statement of it failed.
    DuckDB's COMMIT of a transaction a failed statement aborted rolls it back and returns
    as a commit does: an error caught and passed over inside the transaction (a clean-up's,
    or a statement Ctrl-C stopped) would drop every row written while the caller reports
    them stored."""
    try:
        con.execute("SELECT 1").fetchall()  # (in an aborted transaction: "Current transaction is aborted")
    except duckdb.TransactionException as err:
        raise RuntimeError("a statement of the transaction failed and its error was not raised; "
                           "nothing was committed") from err
    con.execute("COMMIT")


def writer_info_path(db: str | os.PathLike) -> Path:
    """The small file beside a store that says who writes it (pid, what, since when) while a
    read-write connection holds DuckDB's lock: readers that meet the lock name the writer."""
    db = Path(db)
    return db.with_name(db.name + ".writer.json")


def _drop_writer_info(db: Path, pid: int) -> None:
    """Remove the writer info file beside ``db`` if it is process ``pid``'s."""
    info = writer_info_path(db)
    try:
        if json.loads(info.read_text()).get("pid") == pid:
            info.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _busy_error(db: Path, duckdb_message: str) -> StoreBusy:
    """The error for DuckDB's "Could not set lock": the writer named from its info file
    when that file is the lock holder's (same pid, alive), else the holder DuckDB names."""
    m = re.search(r"lock is held in (.*?) \(PID (\d+)\)", duckdb_message)
    program, holder = (m[1], int(m[2])) if m else (None, None)
    try:
        info = json.loads(writer_info_path(db).read_text())
        pid, what, since = int(info["pid"]), str(info["what"]), str(info["since"])
    except (OSError, ValueError, KeyError, TypeError):
        info = None
    if info is not None and (holder is None or holder == pid) and _alive(pid):
        return StoreBusy(f"{db}: the store is being written by {what} (pid {pid}, since {since}); "
                         "try again when it finishes")
    who = f"pid {holder}, {program}" if holder is not None else "another process"
    return StoreBusy(f"{db}: the store is in use by another process ({who}); try again when it finishes")


def _check_unread(f: Path) -> None:
    """InputError for a file of a run folder that no plugin reads but that must be read:
    requests.csv, nsys exports (.sqlite) and ncu reports (.ncu-rep), compressed or not: the
    run would lack its timed requests or a profile without a word."""
    from .ingest import uncompressed_name

    name = uncompressed_name(f)
    if name == "requests.csv":
        raise InputError(f"{f}: not the requests CSV tracekit capture writes (its header begins "
                         "request_idx,phase,bs); fix it or remove it from the run folder")
    if name.endswith((".sqlite", ".ncu-rep")):
        raise InputError(f"{f}: neither an nsys SQLite export nor an ncu report; replace it or remove it from the "
                         "run folder")


def check_ingest_args(path: Any, name: Any, params: Any) -> str | None:
    """The arguments of an ingest, of the kinds it takes (a one-line error otherwise):
    returns ``name`` checked (``asked_run_name``), or None."""
    expect(path, (str, os.PathLike), "ingest: path", InputError)
    expect(params, (dict, type(None)), "ingest: params")
    check_utf8_path(path)
    return None if name is None else asked_run_name(name, path)


def check_utf8_path(path: str | os.PathLike) -> None:
    """A path DuckDB can be given: its bytes UTF-8 (a name of other bytes reaches Python as
    surrogates, which DuckDB cannot encode: an internal error, or a file blamed as corrupt)."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{os.fspath(path)!r}: a path whose name is not UTF-8, which tracekit "
                         "cannot hand to DuckDB; rename it (or link to it by a UTF-8 name)") from None


def _folder_names(path: str | os.PathLike) -> list[str]:
    """The names of the folders ``path`` is in, nearest first (``RunNames``)."""
    return [p.name for p in Path(os.path.realpath(path)).parents][:RunNames.MAX_FOLDERS]  # (a link loop: no error)


def own_run_name(path: Path) -> str:
    """The name a run of ``path`` gets when none is asked for and no other run has it: a
    file's stem (``file_stem``; its name uncompressed where ``--run`` would read the stem
    as something else: ``3.sqlite``), a run folder's name as its meta.json says, else the
    folder's own name."""
    if not path.is_dir():
        from .ingest import file_stem, uncompressed_name

        return derived_run_name(file_stem(path), uncompressed_name(path))
    try:
        return check_run_name(load_json(path / "meta.json")["name"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, QueryError):  # no name there, or a bad one
        return derived_run_name(path.resolve().name)


def one_at_a_time(method):
    """A public method of ``Tracekit`` run by one thread at a time: the object's one DuckDB
    connection refuses a second call while one runs (ResourceInUseException), so a store
    shared by threads (a notebook's background jobs) serializes their calls instead. On a
    closed object it is an error (``check_open``), not a silent reopening."""
    @functools.wraps(method)
    def locked(self, /, *args, **kwargs):  # (positional only: a query parameter may be named self)
        with self._lock:
            self.check_open()
            return method(self, *args, **kwargs)
    return locked


def _check_point(parsed, params: dict, path: Path, asked: dict | None, own: str) -> None:
    """A run's requests ran at the point its parameters name (bs, nc): an InputError where
    they did not (a requests.csv copied into another point's folder, or a --param that
    names another point), as a benchmark log's lines must match its name; the sweep
    queries would file its latencies under the wrong point. ``own``: how the parameters
    not asked for with --param (``asked``) are named."""
    import pyarrow.compute as pc

    requests = parsed.tables.get("requests")
    for key in ("bs", "nc") if requests is not None else ():
        if key not in params:
            continue
        ran = sorted(v for v in pc.unique(requests.column(key)).to_pylist() if v is not None)
        if ran and ran != [int(params[key])]:
            said = "--param " if key in (asked or {}) else own
            raise InputError(f"{said}{key}={params[key]}: the requests of {path} ran at {key}="
                             f"{', '.join(map(str, ran))}; a run is one point: each point's requests.csv in its own "
                             "run folder, with the point's parameters")


def _check_timed(parsed, folder_meta: dict, path: Path) -> None:
    """A run folder's requests.csv holds the timed requests its meta.json counts: a capture that
    finished ok timed at least one (``--iters`` is 1 or more) and recorded how many
    (``latency.requests``). Fewer, or none, is a file cut or edited, or two captures' files in one
    folder: its point would read another latency, or none at all without a word."""
    requests = parsed.tables.get("requests")
    if requests is None or folder_meta.get("status", "ok") != "ok":
        return
    timed = requests.column("phase").to_pylist().count("timed")  # (a few thousand rows; no pyarrow scalar: pandas)
    latency = folder_meta.get("latency")
    counted = latency.get("requests") if isinstance(latency, dict) else None
    if timed == 0 or (isinstance(counted, int) and not isinstance(counted, bool) and counted != timed):
        said = f"its meta.json counts {counted}" if isinstance(counted, int) else "its capture finished ok"
        raise InputError(f"{path}: its requests.csv holds {timed} timed request{'s' if timed != 1 else ''}, but "
                         f"{said}: the file was cut or edited, or is another capture's; capture the point again")


class Tracekit:
    """A tracekit database. ``tracekit.open(path)`` returns one. Its methods may be called
    from several threads: they run one at a time (``one_at_a_time``)."""

    def __init__(self, db: str | os.PathLike | None = None, read_only: bool = False):
        self.path = Path(db) if db is not None else default_db_path()
        self.read_only = read_only
        self._con: duckdb.DuckDBPyConnection | None = None
        self._temp_views = False  # the connection's TEMP views stand in front of an older store's
        self._lock = threading.RLock()  # held by the method under way (one_at_a_time)
        self._closed = False  # close() was called: no method may use the object again
        self._created = False  # this object created the store and committed nothing yet
        #: inside ``one_transaction``: ingests write without committing, the block commits
        self._one_transaction = False
        #: DuckDB's memory limit for ingest (``ingest_memory_limit``, set when a writable
        #: connection opens), handed to the loaders of the sources ingested
        self.memory_limit: str | None = None
        self._sigints = SigintWatch()  # the Ctrl-Cs of the ingest under way
        #: The run the latest ``ingest`` committed or found already there; set together
        #: with the COMMIT, so that after a Ctrl-C at any moment it says whether that
        #: input is in the store. A caller ingesting several inputs may reset it to None
        #: before each one.
        self.last_ingest: IngestResult | None = None
        #: What this object writes, as the writer info file shows it to blocked readers.
        self._doing = "a tracekit process"
        self._writer_since: str | None = None  # the writer info file is ours (and its time)
        #: content hashes held elsewhere (the store a staged run lands in, tracekit.staging):
        #: a source with one of them is skipped (run_id 0) without being parsed
        self.skip_hashes: frozenset[str] = frozenset()
        #: the names the inputs of the command under way get (``one_command``); None: one
        #: input at a time, named against the store's runs alone
        self.run_names: RunNames | None = None
        #: the runs of the files a comparison ingested first, in threads (``_comparing``),
        #: by resolved path: its references to those files are these runs (``landed_run``)
        self._landed: dict[str, IngestResult] = {}
        #: the runs the last comparison ingested and kept, once it ended well (``_comparing``):
        #: what a Ctrl-C after it (its rows being written, the store closed) leaves
        self.comparison_kept: list[int] = []

    # -- connection -------------------------------------------------------
    #: Folders a read-only connection may read files under although external access is
    #: off (DuckDB's ``allowed_directories``): none for a DuckDB store; a store whose
    #: tables are files (a Parquet dataset) names its own folder here. DuckDB lets such
    #: a folder be written too, so ``sql`` then runs only the statements that read
    #: (``_READS``).
    allowed_directories: tuple[str, ...] = ()

    def _connect_config(self) -> dict[str, Any]:
        """Settings DuckDB takes when the database is opened: never an extension
        installed or loaded behind our back (nothing downloads at run time; an SQLite
        file given as the store is refused rather than read through sqlite_scanner)."""
        return {"autoinstall_known_extensions": False, "autoload_known_extensions": False}

    def _setup_reader(self, con: duckdb.DuckDBPyConnection) -> None:
        """What a read-only connection needs before it is sandboxed (views, macros and
        settings of a store kind go here); user SQL runs only after it."""

    def _sandbox(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make a read-only connection, the one every query and ``tracekit sql`` run on,
        read the store and nothing else: external access off (no file read or written,
        no ATTACH, COPY, EXPORT, INSTALL/LOAD, persistent secrets) except under
        ``allowed_directories``, then the configuration locked so that no SET, RESET
        or PRAGMA can undo it. (DuckDB takes allowed_directories only once the
        database is open and only while external access is on: hence this order.)
        A second reader of the same file in this process shares DuckDB's database
        instance, already sandboxed and locked by the first: nothing left to set."""
        if self._locked(con):
            return
        if self.allowed_directories:
            dirs = [str(Path(d).resolve()) + os.sep for d in self.allowed_directories]
            con.execute("SET allowed_directories = ?", [dirs])
        # DuckDB lets SQL read and write its temporary directory whatever the rest: by default
        # STORE.tmp beside the store, which anyone may have made or pointed elsewhere (a
        # symbolic link); the process's private folder instead (``_scratch``)
        con.execute("SET temp_directory = ?", [_scratch()])
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")

    @staticmethod
    def _locked(con: duckdb.DuckDBPyConnection) -> bool:
        # fetchall: a fetchone() result stays open and DuckDB 2 refuses the next statement
        return bool(con.execute("SELECT current_setting('lock_configuration')").fetchall()[0][0])

    def check_open(self) -> None:
        """An error once ``close()`` was called: a closed object does not open the store again
        behind the caller's back (a store closed to let another process write it, or to
        release its lock, would be taken again)."""
        if self._closed:
            raise TracekitError(f"{self.path}: this Tracekit is closed; open the store again with "
                                "tracekit.open(...)")

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection (opened, and the schema created, on first use)."""
        self.check_open()
        if self._con is None:
            if self.read_only and not self.path.exists() and str(self.path) != ":memory:":
                if self.path.is_symlink() and not _resolves(self.path):
                    self._check_file()  # (a loop of links is said to be one)
                raise TracekitError(f"{self.path}: no such database; ingest a capture first (tracekit ingest FILE)")
            existed = self.path.exists() or str(self.path) == ":memory:"
            self._check_file()
            # a store this opening creates is removed again if its setup does not finish
            self._created = not existed and not self.read_only
            self._con = interruptible(self._connect(self.read_only))
            if not self.read_only and str(self.path) != ":memory:":
                # a store never closed (``tracekit.open(db).ingest(f)``): its info file goes
                # when the object does, or when the interpreter exits (set before the file is
                # written: a Ctrl-C while it is leaves an object that closes)
                self._drop_info = weakref.finalize(self, _drop_writer_info, self.path, os.getpid())
                self._writer_since = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
                self._note_writer()
            if not self._locked(self._con):
                self._con.execute("SET enable_progress_bar = false")  # no bars mixed into our output
            self._check_schema()
            self._con.execute(_macros_sql())  # TEMP macros: read-only connections get them too
            if self.read_only:
                if self._stored_schema_hash(self._con) != schema_digest():
                    # written by a tracekit whose views or macros differ (the tables are
                    # the same: the schema version says so): this one's stand in front
                    # of them on this connection, the file untouched
                    for sql in _temp_view_sql():
                        self._con.execute(sql)
                    self._temp_views = True
                self._setup_reader(self._con)
                self._sandbox(self._con)
            else:
                try:
                    self._setup_writer(self._con)
                except BaseException:
                    self._discard_if_new()
                    self._release()  # (an existing store: its lock, and no half-set-up connection kept)
                    raise
        return self._con

    def thread_connection(self) -> duckdb.DuckDBPyConnection:
        """A connection for another thread to read the store through while this one
        waits (a cursor of the store's connection: DuckDB runs the threads' queries at
        once), with what the store's connection holds of its own: the TEMP macros, and the
        TEMP views standing in front of an older store's. The caller closes it."""
        con = interruptible(self.con.cursor())  # (Ctrl-C stops its statement as the store's)
        try:
            con.execute(_macros_sql())
            if self._temp_views:
                for sql in _temp_view_sql():
                    con.execute(sql)
        except BaseException:
            con.close()
            raise
        return con

    def _connect(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        """DuckDB's connection to the store file; a store locked by another process is
        ``StoreBusy``, any other failure one line naming the file."""
        try:
            return duckdb.connect(str(self.path), read_only=read_only, config=self._connect_config())
        except duckdb.Error as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            if "Could not set lock" in first:
                raise _busy_error(self.path, first) from None
            if "different configuration" in first:  # (DuckDB: one process opens a file one way at a time)
                raise TracekitError(
                    f"{self.path}: cannot open database {'read-only' if read_only else 'for writing'}: this process "
                    "has it open already another way (another tracekit.open or duckdb.connect of it, read-only where "
                    "this is not or the other way round, or with other settings); use that one, or close it first "
                    "(tk.close(), or open it in a with block)") from None
            raise TracekitError(f"{self.path}: cannot open database ({first})") from err

    def _setup_writer(self, con: duckdb.DuckDBPyConnection) -> None:
        """The ingest connection's settings, and the schema (created where missing)."""
        # bounded memory for ingest: DuckDB spills its joins to disk past this
        from .ingest.budget import duckdb_setting

        limit = self.memory_limit = ingest_memory_limit()
        try:
            con.execute(f"SET memory_limit = '{duckdb_setting(limit)}'")
        except duckdb.Error as err:
            raise TracekitError(f"TRACEKIT_MEMORY_LIMIT={limit!r}: {str(err).splitlines()[0]}") from err
        # Bit-packing is the costliest compression to analyse when row groups are
        # written: without it the 6 M-row benchmark spends ~0.8 core-s (a quarter of
        # its write CPU) less, for a store 3.8x larger (215 MB instead of 57 MB for
        # a 325 MB export: timestamps stored plain; docs/performance.md).
        # (a DuckDB without the setting keeps its defaults: asked of the table of settings, not
        # by a SET whose error is passed over, which would pass over a Ctrl-C that stopped it too)
        if con.execute("SELECT count(*) FROM duckdb_settings() WHERE name = 'disabled_compression_methods'"
                       ).fetchall()[0][0]:
            con.execute("SET disabled_compression_methods = 'bitpacking'")
        # The schema is (re)created only where the store lacks it or holds another text
        # of it (views and macros change with the code): a store that a refused input
        # opened for writing stays byte for byte as it was.
        digest = schema_digest()
        try:
            if self._stored_schema_hash(con) == digest:
                return
            # one transaction: a store is set up whole or not at all, and its statements are
            # written together, not synced one at a time
            con.execute("BEGIN TRANSACTION")
            try:
                for sql in _schema_sql():
                    con.execute(sql)
                con.execute("INSERT OR IGNORE INTO _store VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
                con.execute("INSERT OR REPLACE INTO _store VALUES ('schema_hash', ?)", [digest])
                con.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise
        except duckdb.Error as err:  # e.g. out of memory under a tiny TRACEKIT_MEMORY_LIMIT, a full disk
            hint = f" (memory limit {limit})" if isinstance(err, duckdb.OutOfMemoryException) else ""
            raise TracekitError(f"{self.path}: cannot set up the store{hint}: {str(err).splitlines()[0]}") from err

    @staticmethod
    def _stored_schema_hash(con: duckdb.DuckDBPyConnection) -> str | None:
        """The hash of the schema text that created the store's tables and views, if any."""
        if not con.execute("SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() "
                           "AND table_name = '_store'").fetchall():
            return None
        row = con.execute("SELECT value FROM _store WHERE key = 'schema_hash'").fetchall()
        return row[0][0] if row else None

    def _discard_if_new(self) -> None:
        """Let go of the store, and delete its file if this object created it and has not
        committed a run to it yet: a failed first ingest leaves no empty store behind (the
        object stays usable: its next call opens, or creates, the store again)."""
        if not self._created:
            return
        self._release()
        for f in (self.path, self.path.with_name(self.path.name + ".wal")):
            f.unlink(missing_ok=True)
        self._created = False

    def _check_file(self) -> None:
        """Refuse, before DuckDB opens it, a path that is no DuckDB file: a folder, or an
        SQLite database (DuckDB would try to load its sqlite extension for it); a new store
        whose folder is missing (its link's target's, for a link)."""
        if str(self.path) == ":memory:":
            return
        if not self.path.exists():
            try:
                target = self.path.resolve()
            except RuntimeError:  # (Python's word for a loop of links)
                raise InputError(f"{self.path}: a loop of symbolic links, leading to no file; name the store's "
                                 "file (--db FILE)") from None
            if not target.parent.is_dir():
                link = f" (a link to {target})" if self.path.is_symlink() else ""
                raise InputError(f"{self.path}{link}: folder {target.parent} does not exist; create it, "
                                 "or name a store in a folder that does (--db FILE)")
            return
        if self.path.is_dir():
            raise InputError(f"{self.path}: is a folder, not a tracekit store; name the store's file (--db FILE)")
        try:
            with self.path.open("rb") as f:
                head = f.read(16)
        except OSError as err:
            raise InputError(f"{self.path}: cannot read the store ({err.strerror or err})") from err
        if head == b"SQLite format 3\x00":
            raise InputError(f"{self.path}: an SQLite database, not a tracekit store (an nsys export? ingest it: "
                             f"tracekit ingest {self.path})")
        if len(head) < 12:  # (DuckDB's own words for it: "exists, but it is not a valid DuckDB database file")
            what = "an empty file" if not head else f"a file of {len(head)} bytes"
            raise InputError(f"{self.path}: {what}, not a tracekit store; name the store's file (--db FILE), or "
                             "remove it for a new store there")
        if head[8:12] != b"DUCK":
            # DuckDB opens some other files (a Parquet file: an in-memory database over it) without a
            # word: an ingest "into" it would land nowhere
            what = " (a Parquet file)" if head[:4] == b"PAR1" else ""
            raise InputError(f"{self.path}: not a valid DuckDB database file{what}, so not a tracekit store; "
                             "name the store's file (--db FILE)")

    def _check_schema(self) -> None:
        try:
            self._check_tables()
        except duckdb.Error as err:
            self._release()  # (the next call checks it again and says so again)
            raise self.db_error(err, str(self.path)) from err
        except TracekitError:
            self._release()
            raise

    def _check_tables(self) -> None:
        con = self._con
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()}
        if "runs" not in tables:
            if tables:
                raise InputError(f"{self.path}: a DuckDB database but not a tracekit store (no runs table); "
                                 "name another --db")
            if self.read_only:
                raise InputError(f"{self.path}: an empty database; ingest a capture first (tracekit ingest FILE)")
            return  # a new store
        version: int | str = 1
        if "_store" in tables:
            row = con.execute("SELECT value FROM _store WHERE key = 'schema_version'").fetchall()
            version = row[0][0] if row else 1
        try:
            version = int(version)
        except (TypeError, ValueError):
            raise InputError(f"{self.path}: store schema version {version!r} is not a number: not a store "
                             "tracekit wrote, or a damaged one; ingest your captures into a new database "
                             "(--db NEW.duckdb)") from None
        if version != SCHEMA_VERSION:
            newer = "a newer" if version > SCHEMA_VERSION else "an older"
            raise TracekitError(f"{self.path}: written by {newer} tracekit (store schema {version}, this one uses "
                                f"{SCHEMA_VERSION}); ingest your captures into a new database (--db NEW.duckdb)")

    def db_error(self, err: duckdb.Error, context: str) -> TracekitError:
        """The one-line error for a DuckDB error met while reading: a store file that
        cannot be read (truncated, damaged) names the store; anything else is a
        ``QueryError`` prefixed with ``context`` (the query's name), once. The text of
        an ``error(...)`` raised by a query or a macro of the store is shown without
        DuckDB's class prefix."""
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        # (an IO error naming files none of which is the store's: a file the SQL asked for)
        others = [f for f in re.findall(r'"([^"]+)"', first)
                  if Path(f).name not in (self.path.name, self.path.name + ".wal")] \
            if isinstance(err, duckdb.IOException) and re.search(r'\bfile "', first) else []
        if (isinstance(err, duckdb.IOException | duckdb.SerializationException) or "Corrupt" in first) and not others:
            return InputError(f"{self.path}: the store cannot be read, it is truncated or damaged ({first}); "
                              "ingest your captures into a new database (--db NEW.duckdb)")
        own = first.removeprefix("Invalid Input Error: ")
        return QueryError(own if own.startswith(f"{context}: ") else f"{context}: {own}")

    def _note_writer(self, doing: str | None = None) -> None:
        """Say in the writer info file what this read-write connection is doing (written
        whole: a temporary file renamed). Best effort: the store is written either way."""
        if doing is not None:
            self._doing = doing
            self._check_writable()
        if self._writer_since is None:
            return
        info = writer_info_path(self.path)
        tmp = info.with_name(f".{info.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"pid": os.getpid(), "what": self._doing, "since": self._writer_since}))
            os.replace(tmp, info)
        except OSError:
            tmp.unlink(missing_ok=True)

    def _check_can_write(self, doing: str) -> None:
        """A store opened read-only refuses a write (``doing`` says which) before it begins."""
        if self.read_only:
            raise TracekitError(f"{self.path}: {doing}: the store is open read-only; open it with "
                                "tracekit.open(db, read_only=False) to write it")

    def _check_writable(self) -> None:
        """Before a write: the folder the store writes in (DuckDB's log, ``NAME.wal``, goes
        beside the file) must be writable, or the write fails only at its commit."""
        if self.read_only or str(self.path) == ":memory:":
            return
        folder = self.path if self.path.is_dir() else self.path.parent
        if folder.exists() and not os.access(folder, os.W_OK):
            raise TracekitError(f"{self.path}: cannot write the store: its folder {folder} is not writable "
                                f"(DuckDB writes its log, {self.path.name}.wal, beside it); nothing was written")

    def close(self) -> None:
        """Close the store: its connection and lock are released, and the object is done
        with (a later call is an error; closing again does nothing)."""
        with self._lock:
            self._release()
            self._closed = True

    def _release(self) -> None:
        """Let go of the connection (and with it the store's lock); the next use opens it
        again. What the library does between steps that another connection must see."""
        if self._con is not None:
            self._con.close()
            self._con = None
        if self._writer_since is not None:  # the lock is released: so is its info file
            self._writer_since = None
            self._drop_info.detach()  # (a later writer object of this process may write it again)
            _drop_writer_info(self.path, os.getpid())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- ingest -----------------------------------------------------------
    @one_at_a_time
    def ingest(self, path: str | os.PathLike, name: str | None = None, params: dict | None = None, *,
               check: Callable[[str, dict, str, str | None], None] | None = None) -> IngestResult:
        """Ingest a profiler output (nsys SQLite export, ncu report/CSV, possibly compressed)
        or a tracekit run folder as one run. The same content again is the same run,
        however it is reached (a run folder's export ingested alone is part of the
        folder's run): nothing is written, and the run is renamed to ``name`` if given.
        A run folder whose export was ingested alone before, or that grew since it was
        ingested, takes that run's place (``folder_place``).
        ``check(kind, params, name, status)`` (the capture's status, as its run folder
        recorded it; None: a bare export), where given, is called once the input is read and
        before anything is written: an error it raises leaves the store as it was (a
        command that ingests a file only to ask a question of it refuses a question the
        run cannot answer first). Ctrl-C raises ``Interrupted`` saying whether the run
        was committed; the store holds the whole run or nothing of it."""
        name = check_ingest_args(path, name, params)
        self._check_can_write(f"cannot ingest {path}")
        self.last_ingest = None
        self._note_writer(f"`tracekit ingest {path}`")
        with SigintWatch() as self._sigints:
            try:
                return self._ingest(Path(path), name, params, check)
            except Interrupted:  # raised by _write, which knows whether it committed
                raise
            except BaseException as err:
                if not (self._sigints.count or isinstance(err, KeyboardInterrupt)):
                    raise
                raise self.interrupted(path) from None

    def interrupted(self, path: str | os.PathLike) -> Interrupted:
        """The error for a Ctrl-C during the ingest of ``path`` (or just after it): whether
        the run is in the store (``last_ingest``; inside ``one_transaction`` a run written
        is not committed, and the block rolls it back). A store this object created for an
        ingest that committed nothing is removed."""
        res = self.last_ingest
        if res is None or (self._one_transaction and not res.skipped):
            self._discard_if_new()
            if self._one_transaction:  # (the block rolls back every input it ingested)
                return Interrupted(f"{path}: interrupted; not ingested, nor is any file this command ingested "
                                   "before it kept")
            return Interrupted(f"{path}: interrupted; not ingested, nothing of it is in the store")
        if res.skipped:
            return Interrupted(f"{path}: interrupted; it was already in the store as run {res.run_id} ({res.name})")
        return Interrupted(f"{path}: interrupted after the commit: it is in the store as run {res.run_id} "
                           f"({res.name})")

    def _ingest(self, path: Path, name: str | None, params: dict | None,
                check: Callable[[str, dict, str, str | None], None] | None = None) -> IngestResult:
        with self.memory_errors(str(path)):
            got = self._read_input(path, name, params)
            if isinstance(got, IngestResult):
                return got
            got = self._decide(got)
        if isinstance(got, IngestResult):
            return got
        if check is not None:
            status = _capture_status({**got.parsed.meta, **got.extra_meta})["status"]  # (as _write records it)
            check(got.parsed.kind, got.params, got.name, status)
        return self._write_pending(got)

    @contextlib.contextmanager
    def memory_errors(self, source: str, need: int | None = None):
        """Running out of memory in the block (DuckDB's limit or Python's) raised as the one
        line that says how much ``source`` needs: ``need``, the estimate, or more than the limit
        where the estimate fell short or was not made yet."""
        try:
            yield
        except (duckdb.OutOfMemoryException, MemoryError) as err:
            raise self._shortage(source, need) from err

    def _shortage(self, source: str, need: int | None) -> InputError:
        from .ingest.budget import setting_bytes, shortage

        budget = setting_bytes(self.memory_limit) or 0  # what the user sets (a phase may have run under less)
        return InputError(shortage(source, max(need or 0, int(budget * 1.5)), self.memory_limit))

    def _read_input(self, path: Path, name: str | None, params: dict | None) -> Pending | IngestResult:
        """``path`` read (parsed) and hashed; or, where the store holds its content
        already (seen before reading it), that run."""
        if not path.exists():
            raise InputError(missing(path))
        try:
            return self._read_path(path, name, params)
        except OSError as err:  # unreadable (permissions), a folder where a file belongs, ...
            if err.filename is None:
                raise
            raise InputError(f"{err.filename}: {err.strerror or type(err).__name__}") from err

    def _read_path(self, path: Path, name: str | None, params: dict | None) -> Pending | IngestResult:
        from . import ingest as _ingest

        asked_params = params
        for check in (check_counts, ranks.check_params):
            check(params or {}, "--param ")
        if path.is_dir():
            folder_meta, digest, chosen = self._plan_folder(path)
            for check in (check_counts, ranks.check_params):
                check(folder_meta.get("params", {}), f"{path / 'meta.json'}: 'params' ", InputError)
            existing = self._existing(digest)
            if existing is not None:
                return self._renamed(existing, name, params, path)
            parsed, sources = self._read_folder(path, chosen)
            params = ranks.identify(path, None, {**folder_meta.get("params", {}), **(params or {})})
            _check_point(parsed, params, path, asked_params, f"{path / 'meta.json'}: 'params' ")
            _check_timed(parsed, folder_meta, path)
            extra_meta = {k: v for k, v in folder_meta.items() if k not in ("name", "params")}
            if not parsed.meta.get("tool_version"):  # (ncu's CSV pages do not say; the capture asked ncu --version)
                parsed.meta["tool_version"] = _tool_version(folder_meta)
            return Pending(parsed, digest, str(path.resolve()), name, own_run_name(path),
                           params, extra_meta, sources, folder=True, asked_params=asked_params)
        with _ingest.materialized(path) as plain:
            plugin = _ingest.detect(plain)
            with ThreadPoolExecutor(max_workers=1) as pool:
                hashing = pool.submit(_ingest.file_hash, plain)
                # A path ingested before is most likely the same file again: wait for
                # the hash and skip it if known. A new file is hashed while it is
                # parsed (a core would idle otherwise).
                if self._seen_path(path) and (existing := self._existing(hashing.result())) is not None:
                    return self._renamed(existing, name, params, path)
                self._check_need(plugin, plain, path)
                parsed = plugin.read(plain)
                digest = hashing.result()
            params = ranks.identify(path, plain if plugin.KIND == "nsys" else None, {**parsed.params, **(params or {})})
            _check_point(parsed, params, path, asked_params, "")
        return Pending(parsed, digest, str(path.resolve()), name, own_run_name(path),
                       params, {}, [(parsed.kind, str(path.resolve()), digest)], asked_params=asked_params)

    def _decide(self, p: Pending) -> Pending | IngestResult:
        """What the store does with a read input: nothing where it holds the content
        already (the run, renamed if a name is asked for); a run folder takes the place
        (``replace``) and name of the same capture's earlier run (``folder_place``); a new
        run without a name asked for is named by ``default_name``."""
        existing = self._existing(p.digest)
        if existing is not None:  # the same content under another path
            return self._renamed(existing, p.name, p.asked_params, p.source)
        if p.folder:
            same, earlier = self.folder_place(p.source, [h for _, _, h in p.sources])
            if same is not None:
                return self._renamed(same, p.name, p.asked_params, p.source)
            if earlier:
                p.replace, p.absorbs = earlier[0].run_id, tuple(r.run_id for r in earlier[1:])
                p.name = p.name or earlier[0].name
        if p.name is not None:  # asked for (or the replaced run's): no other run may have it
            self.check_name_free(p.name, p.replace, *p.absorbs)
        p.name = p.name or self.default_name(p.default_name, p.source)
        return p

    def default_name(self, own: str, source: str | os.PathLike) -> str:
        """The name of a new run of ``source`` without a name asked for: ``own``, unless a
        run of the store or another input of the command (``one_command``) has it; then
        qualified by the folders ``source`` is in (``RunNames``)."""
        names = self.run_names if self.run_names is not None else RunNames()
        return names.choose(own, _folder_names(source), self._name_taken)

    def _name_taken(self, name: str) -> bool:
        return bool(self._runs_named(name))

    def _runs_named(self, name: str) -> list[int]:
        """The ids of the runs named ``name``."""
        if not self.path.exists() and str(self.path) != ":memory:":
            return []  # nothing ingested yet (and no database created before the input is written)
        return [r[0] for r in self.con.execute("SELECT run_id FROM runs WHERE name = ? ORDER BY run_id",
                                               [name]).fetchall()]

    def check_name_free(self, name: str, *run_ids: int | None) -> None:
        """A one-line error where a run other than ``run_ids`` is named ``name``. A name
        asked for (``runs rename``, ``ingest --name``) names one run: two runs of one name
        would make ``--run NAME`` pick the latest of them, not necessarily the one just
        named, and ``runs rename``/``runs rm NAME`` refuse it."""
        others = [i for i in self._runs_named(name) if i not in run_ids]
        if others:
            other = others[0]
            raise QueryError(f"run name {name!r} is taken by run {other}; choose another name, or rename or "
                             f"remove run {other} first (tracekit runs rename {other} NEW, tracekit runs rm {other})")

    @contextlib.contextmanager
    def one_command(self, inputs):
        """The ingests inside the block as one command's, of ``inputs`` (paths): a name
        that several inputs would have (``a/export.sqlite``, ``b/export.sqlite``) is
        qualified for each of them, and every new run gets a name no other run has. An input
        given twice (``d/x.csv ./d/x.csv``) is one input: its run keeps its own name."""
        before = self.run_names
        once = {os.path.realpath(f): Path(f) for f in inputs}.values()  # (realpath: a link loop is no error here)
        self.run_names = RunNames((own_run_name(f), _folder_names(f)) for f in once)
        try:
            yield
        finally:
            self.run_names = before

    def _write_pending(self, p: Pending, run_id: int | None = None) -> IngestResult:
        return self._write(p.parsed, p.digest, p.source, p.name, p.params, p.extra_meta, p.sources, p.replace,
                           absorbs=p.absorbs,
                           run_id=run_id)

    def _check_need(self, plugin, plain: Path, path: Path) -> int | None:
        """Refuse an export whose estimated memory (the plugin's ``memory_need``, from
        its row counts) does not fit the ingest's budget, before its rows are read: read
        first, they alone could take more than the budget. Returns the estimate (None:
        the plugin gives none)."""
        from .ingest.budget import fits, shortage

        estimate = getattr(plugin, "memory_need", None)
        if estimate is None:
            return None
        limit = self.memory_limit or ingest_memory_limit()  # (no connection yet to a new store)
        need = estimate(plain)
        if not fits(need, limit):
            raise InputError(shortage(str(path), need, limit))  # (the file as given, as other errors name it)
        return need

    def _renamed(self, existing: IngestResult, name: str | None, params: dict | None = None,
                 source: str | os.PathLike | None = None) -> IngestResult:
        """An already-ingested run, renamed to ``name`` when one is asked for (a run held
        elsewhere, ``skip_hashes``, is renamed where it lands). Parameters asked for must be
        the run's own: a run's parameters (its rank, its sweep point) are set when it lands."""
        with self._sigints.held():
            if params and existing.run_id:
                self._check_same_params(existing, params, source or existing.source)
            if name is not None and name != existing.name and existing.run_id:
                self.rename_run(existing.run_id, name)
                existing.renamed_from, existing.name = existing.name, name
            self.last_ingest = existing
        return existing

    def _check_same_params(self, existing: IngestResult, params: dict, source: str | os.PathLike) -> None:
        held = json.loads(self.con.execute("SELECT params FROM runs WHERE run_id = ?",
                                           [existing.run_id]).fetchall()[0][0] or "{}")
        for key, value in params.items():
            if key not in held or str(held[key]) != str(value):
                has = f"{key}={held[key]}" if key in held else f"no {key}"
                raise InputError(f"{source}: already ingested as run {existing.run_id} ({existing.name}) "
                                 f"with {has}, not {key}={value}: a run's parameters are set when it is ingested; "
                                 f"remove it first (tracekit runs rm {existing.run_id}) to ingest it with others")

    def folder_place(self, source: str, hashes: list[str]) -> tuple[IngestResult | None, list[IngestResult]]:
        """Where a run folder (resolved path ``source``, its files' content hashes) goes,
        from the runs that hold its files (``place_folder``)."""
        return place_folder(source, {h: self._holders(h) for h in hashes})

    def _holders(self, digest: str) -> list[tuple[IngestResult, bool]]:
        """Every run holding this content, by id: (the run, whether it is this file ingested alone)."""
        if not self.path.exists() and str(self.path) != ":memory:":
            return []
        rows = self.con.execute(
            "SELECT run_id, name, kind, source_path, source_hash = $h FROM runs WHERE source_hash = $h "
            "OR run_id IN (SELECT run_id FROM run_sources WHERE content_hash = $h) ORDER BY run_id",
            {"h": digest}).fetchall()
        return [(IngestResult(r[0], r[1], r[2], r[3], True, {}, digest=digest), bool(r[4])) for r in rows]

    def _plan_folder(self, folder: Path) -> tuple[dict, str, dict]:
        """A run folder's meta.json, its content hash, and for each kind its exports
        (from each file's first bytes), best-ranked first: the plugin reads the first,
        and a plugin with ``read_exports`` takes from the others what the first lacks."""
        import xxhash

        from . import ingest as _ingest

        meta_file = folder / "meta.json"
        if not meta_file.exists():
            raise InputError(_ingest.not_a_run_folder(folder))
        try:
            folder_meta = load_json(meta_file)
        except ValueError as err:  # (an OSError is said as every unreadable file's: PATH: why)
            raise InputError(f"{meta_file}: invalid JSON ({err}); fix it, or remove the run folder") from None
        if not isinstance(folder_meta, dict):
            raise InputError(f"{meta_file}: not a JSON object; a run folder's meta.json holds {{\"name\": ..., "
                             "\"params\": {...}}")
        for key, kind in (("params", dict), ("name", str)):
            if key in folder_meta and not isinstance(folder_meta[key], kind):
                raise InputError(f"{meta_file}: {key!r} must be a JSON {'object' if kind is dict else 'string'}, "
                                 f"not {json.dumps(folder_meta[key])[:60]}")
        if "name" in folder_meta:
            try:
                folder_meta["name"] = check_run_name(folder_meta["name"])
            except QueryError as err:
                raise InputError(f"{meta_file}: 'name': {err}") from None
        found: dict[str, list[tuple[int, Path, object]]] = {}
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            if _ingest.not_read(f):
                continue
            head = _ingest.head_of(f)
            mod = _ingest.plugin_for(f, head)
            if mod is None:
                _check_unread(f)  # (other files, e.g. ncu pages tracekit does not read, stay beside the run)
                continue
            rank = getattr(mod, "rank", lambda p, h: 0)(f, head)
            found.setdefault(mod.KIND, []).append((rank, f, mod))
        if not found:
            raise InputError(f"{folder}: run folder holds no profile or requests.csv to ingest")
        chosen = {}
        for kind, exports in found.items():
            exports.sort(key=lambda e: e[0])  # (stable: equal ranks in path order)
            mod = exports[0][2]
            alike = [f.relative_to(folder).as_posix() for r, f, _ in exports if r == exports[0][0]]
            if len(alike) > 1 and not hasattr(mod, "read_exports"):  # which is the capture's is unknown
                raise InputError(f"{folder}: the run folder holds {len(alike)} {kind} files ({', '.join(alike[:4])}"
                                 f"{', ...' if len(alike) > 4 else ''}); a run is one capture: move the others "
                                 "out, or ingest a file by itself")
            chosen[kind] = ([f for _, f, _ in exports] if hasattr(mod, "read_exports") else [exports[0][1]], mod)
        h = xxhash.xxh3_128(meta_file.read_bytes())
        for kind in sorted(chosen):
            for f in chosen[kind][0]:
                h.update(f.relative_to(folder).as_posix().encode())
                h.update(_ingest.file_hash(f).encode())
        return folder_meta, h.hexdigest(), chosen

    def _read_folder(self, folder: Path, chosen: dict) -> tuple[_ingest.Parsed, list[tuple[str, str, str]]]:
        """The folder's exports read into one run, and (kind, path, content hash) of each:
        the hash of the decompressed content, as a file ingested alone has."""
        from contextlib import ExitStack

        from . import ingest as _ingest

        merged = _ingest.Parsed(kind=",".join(sorted(chosen)), meta={}, tables={})
        sources = []
        for kind in sorted(chosen):
            files, mod = chosen[kind]
            with ExitStack() as stack, ThreadPoolExecutor(max_workers=1) as pool:
                plain = [stack.enter_context(_ingest.materialized(f)) for f in files]
                hashing = [pool.submit(_ingest.file_hash, p) for p in plain]
                self._check_need(mod, plain[0], files[0])
                p = mod.read_exports(plain) if len(plain) > 1 else mod.read(plain[0])
                sources += [(kind, str(f.resolve()), h.result()) for f, h in zip(files, hashing, strict=True)]
            merged.meta.update({k: v for k, v in p.meta.items() if v is not None})
            merged.tables.update(p.tables)
            merged.loaders.extend(p.loaders)
            merged.interns.extend(p.interns)
            if p.memory_need is not None:  # (read one after the other: the largest counts)
                merged.memory_need = max(merged.memory_need or 0, p.memory_need)
        return merged, sources

    def _seen_path(self, path: Path) -> bool:
        if self.skip_hashes:
            return True  # check the hash before parsing
        if not self.path.exists() and str(self.path) != ":memory:":
            return False  # nothing ingested yet (and no database created before the input is read)
        rows = self.con.execute("SELECT 1 FROM runs WHERE source_path = ? LIMIT 1", [str(path.resolve())]).fetchall()
        return bool(rows)

    def _existing(self, digest: str) -> IngestResult | None:
        """The run of this content hash, or the run it is part of (None: not held); a
        hash in ``skip_hashes`` is a run elsewhere (run_id 0)."""
        if digest in self.skip_hashes:
            return IngestResult(0, "", "", "", True, {}, digest=digest)
        held = self._holders(digest)
        if not held:
            return None
        return next((run for run, alone in held if alone), held[0][0])  # the run itself, else the first it is part of

    def _write(self, parsed, digest, source, name, params, extra_meta, sources, replace=None,
               run_id: int | None = None, absorbs: tuple[int, ...] = ()) -> IngestResult:
        """The run's rows in one transaction; ``run_id``: the id given to it already
        (several inputs written at once, tracekit.parallel), else the store's next;
        ``replace``: the run whose place (id) it takes, ``absorbs`` the others it removes."""
        from .ingest.budget import fits, shortage

        con = self.con
        meta = {k: v for k, v in parsed.meta.items() if k not in ("tool_version", "export_schema_version", "gpu")}
        meta.update(extra_meta)
        rows: dict[str, int] = {}
        try:
            if not fits(parsed.memory_need, self.memory_limit):  # refused before anything is written
                raise InputError(shortage(source, parsed.memory_need, self.memory_limit))
            if not self._one_transaction:
                con.execute("BEGIN TRANSACTION")
            if replace is not None:
                self._delete_rows(replace, *absorbs)
                run_id = replace
            elif run_id is None:
                run_id = con.execute("SELECT nextval('run_id_seq')").fetchall()[0][0]
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, name, parsed.kind, source, digest, parsed.meta.get("tool_version"),
                 parsed.meta.get("export_schema_version"), parsed.meta.get("gpu"),
                 json.dumps(params, default=str), json.dumps(meta, default=str),
                 _dt.datetime.now(_dt.UTC).replace(tzinfo=None)],
            )
            con.executemany("INSERT INTO run_sources VALUES (?, ?, ?, ?)",
                            [[run_id, kind, path, h] for kind, path, h in sources])
            for table, data in parsed.tables.items():
                rows[table] = self._insert(table, run_id, data)
            for load in parsed.loaders:
                rows.update(load(con, run_id, memory_limit=self.memory_limit))
            with self._sigints.held():
                if not self._one_transaction:  # (else the block commits)
                    commit(con)
                    self._created = False  # the store holds a run now: keep it whatever follows
                self.last_ingest = IngestResult(run_id, name, parsed.kind, source, False, rows, replaced=replace,
                                                absorbed=tuple(absorbs),
                                                digest=digest, **_capture_status(meta))
            return self.last_ingest
        except BaseException as err:
            out = self._failed_write(err, source, parsed.memory_need)
            if out is err:
                raise
            if out is _first_error(err):
                raise out from None
            raise out from _first_error(err)

    def _failed_write(self, err: BaseException, source: str, need: int | None) -> BaseException:
        """End the ingest transaction after ``err`` and return the error to raise: the
        first error (not a "transaction is aborted" from a statement after it) as one
        line; running out of memory as the line that says how much is needed (``need``,
        the estimate, or more than the limit where the estimate fell short); Ctrl-C as
        ``Interrupted`` saying whether the run was committed (it may arrive as COMMIT
        returns)."""
        from .ingest.budget import duckdb_setting

        con = self._con
        first = _first_error(err)
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:  # no transaction open: COMMIT went through, or DuckDB ended it on failing
            pass
        try:  # a plugin that lowered the limit for a phase could not set it back in the aborted transaction
            con.execute(f"SET memory_limit = '{duckdb_setting(self.memory_limit)}'")
        except duckdb.Error:
            pass
        if self._sigints.count or isinstance(first, KeyboardInterrupt | duckdb.InterruptException):
            return self.interrupted(source)
        if self.last_ingest is not None:  # committed: what failed after it is not about the store
            return err
        out: BaseException = first
        if isinstance(first, duckdb.OutOfMemoryException | MemoryError):
            out = self._shortage(source, need)
        elif isinstance(first, duckdb.Error):  # data the reshaping SQL could not take, a full disk: one line
            out = InputError(f"{source}: cannot ingest ({str(first).splitlines()[0]}); nothing was written")
        self._discard_if_new()
        return out

    def _insert(self, table: str, run_id: int, data: pa.Table) -> int:
        con = self.con
        con.register("_tk_in", data)
        try:
            exists = con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]
            ).fetchall()[0][0]
            if not exists:  # a plugin's table without DDL: take the Arrow schema
                con.execute(f'CREATE TABLE "{table}" AS SELECT 0::INTEGER AS run_id, * FROM _tk_in LIMIT 0')
            con.execute(f'INSERT INTO "{table}" BY NAME SELECT {int(run_id)}::INTEGER AS run_id, * FROM _tk_in')
        finally:
            con.unregister("_tk_in")
        return data.num_rows

    @contextlib.contextmanager
    def one_transaction(self):
        """The ingests inside the block and the block's own statements as one transaction:
        committed when the block ends, rolled back when it raises (and a store this object
        created then removed). A command that ingests files only to ask a question of them
        leaves the store as it was when the question fails: ``diff A.sqlite B.sqlite`` with
        B truncated, or not comparable with A, does not keep A."""
        con = self.con
        con.execute("BEGIN TRANSACTION")
        self._one_transaction = True
        try:
            yield
            with self._sigints.held():
                commit(con)
                self._created = False
        except BaseException:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:  # ended already: a failed ingest rolled back, or its new store was removed
                pass
            self.last_ingest = None
            self._discard_if_new()
            raise
        finally:
            self._one_transaction = False

    # -- managing runs ----------------------------------------------------
    def resolve(self, run: str | int) -> tuple[int, str]:
        """(run id, name) of a run given by id or by name; a name two runs share is an error."""
        expect(run, (str, int), "run", QueryError)
        if not self.path.exists() and str(self.path) != ":memory:":
            raise TracekitError(f"{self.path}: no such database; ingest a capture first (tracekit ingest FILE)")
        text = str(run).strip()
        if RUN_ID.fullmatch(text):
            rows = self.con.execute("SELECT run_id, name FROM runs WHERE run_id = ?", [int(text)]).fetchall()
            if rows:
                return rows[0]
        rows = self.con.execute("SELECT run_id, name FROM runs WHERE name = ? ORDER BY run_id", [text]).fetchall()
        if not rows:
            raise QueryError(f"no run {text!r} in {self.path}; see `tracekit runs`")
        if len(rows) > 1:
            ids = ", ".join(str(r[0]) for r in rows)
            raise QueryError(f"run name {text!r} is shared by runs {ids}; give a run id")
        return rows[0]

    @one_at_a_time
    def rename_run(self, run: str | int, new_name: str) -> tuple[int, str]:
        """Rename a run; returns (run id, old name)."""
        run_id, old = self.resolve(run)
        own = self.con.execute("SELECT source_path FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]
        new_name = asked_run_name(new_name, own)
        self.check_name_free(new_name, run_id)
        self._check_can_write(f"cannot rename run {run_id} ({old})")
        try:
            self.con.execute("UPDATE runs SET name = ? WHERE run_id = ?", [new_name, run_id])
        except duckdb.Error as err:  # e.g. a full disk: the run keeps its name
            raise TracekitError(f"{self.path}: cannot rename run {run_id} ({str(err).splitlines()[0]}); "
                                "the store is unchanged") from err
        return run_id, old

    @one_at_a_time
    def remove_run(self, run: str | int) -> tuple[int, str]:
        """Remove a run and its rows from every table, in one transaction; returns (run id, name)."""
        run_id, name = self.resolve(run)
        self._check_can_write(f"cannot remove run {run_id} ({name})")
        self._note_writer(f"`tracekit runs rm {run}`")
        con = self.con
        try:
            con.execute("BEGIN TRANSACTION")
            self._delete_rows(run_id)
            commit(con)
        except BaseException as err:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:  # DuckDB ended the transaction itself (a COMMIT that failed)
                pass
            first = _first_error(err)
            if isinstance(first, duckdb.Error):  # e.g. a full disk: the store keeps the run
                raise TracekitError(f"{self.path}: cannot remove run {run_id} ({str(first).splitlines()[0]}); "
                                    "the store is unchanged") from first
            raise
        return run_id, name

    def _delete_rows(self, *run_ids: int) -> None:
        """Delete the runs' rows from every table that has a run_id (inside the caller's transaction)."""
        tables = [r[0] for r in self.con.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() WHERE database_name = current_database() "
            "AND column_name = 'run_id' AND table_name IN (SELECT table_name FROM duckdb_tables() "
            "WHERE database_name = current_database())").fetchall()]
        ids = ", ".join(str(int(r)) for r in run_ids)
        for table in sorted(tables, key=lambda t: t == "runs"):  # runs last
            self.con.execute(f'DELETE FROM "{table}" WHERE run_id IN ({ids})')

    def staging_destination(self):
        """Where distributed ingest (tracekit.distributed) lands the runs it prepares."""
        from .staging import StoreDestination

        return StoreDestination(self)

    # -- reading ----------------------------------------------------------
    def runs(self) -> pl.DataFrame:
        """All runs, newest last, with their parameters."""
        return self.query("runs", limit=0)

    @one_at_a_time
    def query(self, name: str, /, **params: Any) -> pl.DataFrame:
        """Run the named query ``name`` with bound parameters; returns a Polars DataFrame."""
        from .registry import get_registry

        with stoppable():
            return get_registry().run(self, name, **params)

    @one_at_a_time
    def diff(self, base: Any, new: Any, by: list[str] | str | None = None, threshold_pct: float = 5.0,
             repeats: list[Any] | None = None, workers: int | None = None, on_file: Any = None) -> pl.DataFrame:
        """Compare run (or sweep) ``new`` against ``base``: run ids, names, sweep ids or
        files (ingested first). One row per scope, key and metric with a noise-aware
        verdict; ``by`` picks scopes (kernel, nvtx, api, memcpy, gpu, um, cpu, python, memory, ncu, source, bench,
        sweep; default: every scope both have, source only when asked). ``repeats``: captures of the base again, whose largest
        change (to the far end of its interval) measures the noise a change must pass
        (``noise_pct``; as ``compare`` judges). ``workers``: the files (a sweep's folder: its run folders) are ingested
        that many at once, each run committed as it lands (``on_file(done, total)``
        called as each does), and removed again where the comparison fails
        (``_landed_first``). Without ``repeats``, a sweep named by its id that was taken again
        (``tracekit sweep --repeat``), or a run that is one point of it, has its repeats in the store as its ``repeats``
        (``stored_repeats``, a warning naming them); an empty ``repeats`` asks for none. See
        ``tracekit.diff``."""
        repeats = self.repeats_asked(base, [new], "diff", repeats)
        if repeats is not None:
            from .compare import diff_with_repeats

            with stoppable():
                return diff_with_repeats(self, base, new, repeats, by=by, threshold_pct=threshold_pct,
                                         workers=workers, on_file=on_file)
        import warnings

        from .diff import _is_file, diff
        from .errors import CaptureWarning
        from .ingest import run_folders

        files = [str(r).strip() for r in (base, new) if _is_file(r)] if not self.read_only else []
        with warnings.catch_warnings():  # (resolve says it, where the folder is ingested)
            warnings.simplefilter("ignore", CaptureWarning)
            # (a sweep's folder: its run folders, named as one command's inputs)
            files = [str(p) for p in run_folders([Path(f) for f in files])]
        with stoppable(), self._comparing(files, workers, on_file):
            return diff(self, base, new, by=by, threshold_pct=threshold_pct)

    @contextlib.contextmanager
    def _comparing(self, files: list, workers: int | None = None, on_file: Any = None):
        """A comparison whose ``files`` (none: runs in the store) are ingested first, named
        as one command's inputs, in one transaction: a comparison that fails keeps none of
        them, and a store opened to ingest them, left empty, is removed. Inside a caller's
        transaction (tracekit report --vs FILE's), the caller's is the one. ``workers``:
        the files are ingested that many at once instead (``_landed_first``; ``on_file(done,
        total)`` called as each lands)."""
        own = bool(files) and not self._one_transaction
        self.comparison_kept = []
        before = self._run_ids() if own else set()
        if own and workers is not None:
            first = self._landed_first(files, workers, on_file, before)
        else:
            first = self.one_transaction() if own else contextlib.nullcontext()
        try:
            with first, self.one_command(files):
                yield
        except TracekitError:
            if not self._one_transaction:
                self._discard_if_new()
            raise
        if own:
            self.comparison_kept = sorted(self._run_ids() - before)

    def _run_ids(self) -> set[int]:
        """The store's run ids (none: a store not created yet, which this does not create)."""
        if self._con is None and str(self.path) != ":memory:" and not self.path.exists():
            return set()
        return {r for (r,) in self.con.execute("SELECT run_id FROM runs").fetchall()}

    @contextlib.contextmanager
    def _landed_first(self, files: list, workers: int, on_file: Any, before: set[int]):
        """The block, after ``files`` are ingested ``workers`` at once (``tracekit.parallel``:
        threads, each run committed as it lands, so that the comparison's own threads read
        them too). Where a file fails, the block fails or Ctrl-C comes, the runs this
        ingest added (those not in ``before``, the store's run ids) are removed again (and a
        store it created, left empty): the store holds what it held before, though its file
        is not byte for byte the one it was, and a process killed meanwhile leaves the runs
        that landed (each one whole)."""
        from .parallel import check_workers, ingest_many

        check_workers(workers)
        self._check_can_write(f"cannot ingest {files[0]}")
        if self._con is None and str(self.path) != ":memory:" and not self.path.exists():
            strings, created = -1, True  # (the ingest creates it while it reads the first files)
        else:
            created = self._created
            strings = self.con.execute("SELECT coalesce(max(string_id), -1) FROM _strings").fetchall()[0][0]
        with SigintWatch() as sigints:
            try:
                done = iter(range(1, len(files) + 1))
                outcomes = ingest_many(self, files, workers=workers, on_outcome=None if on_file is None else
                                       lambda _: on_file(next(done), len(files)))
                failed = [o.error for o in outcomes if o.error is not None]
                if failed:
                    more = f" (and {len(failed) - 1} more of the {len(files)} files)" if len(failed) > 1 else ""
                    raise InputError(f"{failed[0]}{more}")
                self._landed = {str(Path(o.source).resolve()): o.result for o in outcomes}
                yield
            except BaseException as err:
                stopped = isinstance(err, (KeyboardInterrupt, Interrupted)) or sigints.count > 0
                with sigints.held():
                    self._remove_added(before, strings, created)
                if stopped:
                    raise Interrupted("interrupted; the store this comparison created is removed" if created else
                                      "interrupted; the store holds what it held (the runs this comparison "
                                      "ingested are removed)") from None
                raise
            finally:
                self._landed = {}

    def _remove_added(self, before: set[int], strings: int, created: bool) -> None:
        """Remove the runs not in ``before`` and the names past ``strings`` they brought to
        ``_strings`` (no run of ``before`` refers to one), in one transaction; a store this
        object ``created`` is removed whole."""
        if created:
            self._created = True
            self._discard_if_new()
            return
        added = sorted(self._run_ids() - before)
        if not added:
            return
        con = self.con
        try:
            con.execute("BEGIN TRANSACTION")
            self._delete_rows(*added)
            con.execute("DELETE FROM _strings WHERE string_id > ?", [strings])
            commit(con)
        except BaseException as err:
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            first = _first_error(err)
            raise TracekitError(f"{self.path}: cannot remove the {len(added)} runs this comparison ingested "
                                f"({str(first).splitlines()[0] if str(first) else type(first).__name__}); "
                                "remove them with tracekit runs rm") from first

    @property
    def provisional(self) -> bool:
        """Whether a run ingested now is the command's until it ends: inside one transaction
        (rolled back where the command fails), or landed first for a comparison
        (``_landed_first``: removed where it fails). A comparison names such a run by its
        file, as given."""
        return self._one_transaction or bool(self._landed)

    def landed_run(self, path: str | os.PathLike, check: Callable[[str, dict, str, str | None], None] | None = None
                   ) -> IngestResult:
        """The run of a file a comparison names: the one ingested for it first
        (``_landed_first``), else ``ingest(path, check=check)``. ``check`` is called of a
        landed run as ``ingest`` calls it of a new one (where it raises, ``_landed_first``
        removes the runs again)."""
        landed = self._landed.get(str(Path(path).resolve()))
        if landed is None:
            return self.ingest(path, check=check)
        if check is not None and not landed.skipped:
            kind, params, name, status = self.con.execute(
                "SELECT kind, params, name, json_extract_string(meta, '$.status') FROM runs WHERE run_id = ?",
                [landed.run_id]).fetchall()[0]
            check(kind, json.loads(params) if params else {}, name, status)
        return landed

    @one_at_a_time
    def diff_jobs(self, base: Any, new: Any, by: list[str] | str | None = None, threshold_pct: float = 5.0,
                  per_rank: bool = False, on_rank: Any = None, repeats: list[Any] | None = None,
                  workers: int | None = None, on_file: Any = None) -> pl.DataFrame:
        """Compare multi-rank job ``new`` against job ``base`` (each named by any rank's
        run, id or name, or by the job): rank r against rank r by ``diff``'s rules, one row
        per scope, key and metric for the job (the ranks' values summed, or their median's
        for a median; the job's verdict from the ranks', harm first; how many ranks moved,
        the rank that moved most), and the ``job`` scope: per NVTX path, the job's time,
        its slowest rank's per instance. ``per_rank``: the ranks' own rows, with ``rank``;
        ``on_rank(done, total)``: called as each rank pair is compared. A job named by the
        folder of its exports has them ingested first, as ``diff`` ingests a file (a
        comparison that fails keeps none of them). ``repeats``: captures of the base job
        again, whose change on each rank measures the noise a change of that rank must pass
        (``noise_pct``, as ``diff --repeat`` judges runs). ``workers``: a folder's exports
        are ingested that many at once, each run committed as it lands (``on_file(done,
        total)`` called as each does), and removed again where the comparison fails
        (``Tracekit._landed_first``). See ``tracekit.job_diff``."""
        from .job_diff import diff_jobs, is_job_folder, job_exports

        if repeats is not None:
            from .compare import diff_with_repeats, jobs_with_repeats

            with stoppable():
                if per_rank:
                    return jobs_with_repeats(self, base, new, repeats, by=by, threshold_pct=threshold_pct,
                                             workers=workers, on_file=on_file)[1]
                return diff_with_repeats(self, base, new, repeats, by=by, threshold_pct=threshold_pct, jobs=True,
                                         workers=workers, on_file=on_file)

        folders = [Path(str(r).strip()) for r in (base, new) if is_job_folder(r)] if not self.read_only else []
        files = [f for folder in folders for f in job_exports(folder)]
        with stoppable(), self._comparing(files, workers, on_file):
            return diff_jobs(self, base, new, by=by, threshold_pct=threshold_pct, per_rank=per_rank, on_rank=on_rank)

    def compare(self, base: Any, runs: list[Any], by: list[str] | str | None = None,
                threshold_pct: float = 5.0, repeats: list[Any] | None = None, jobs: bool = False,
                workers: int | None = None, on_file: Any = None) -> pl.DataFrame:
        """Each of ``runs`` against ``base`` by ``diff``'s rules, side by side: one row per
        scope, key, metric and run; ``repeats`` of the base measure the noise a change must
        pass. ``jobs``: they are multi-rank jobs, each against the base job by ``diff_jobs``'s
        rules. ``workers``, ``on_file``: as ``diff`` ingests files (``diff_jobs`` a job's
        folder). Without ``repeats``, those of a sweep taken again, as ``diff`` finds them. See
        ``tracekit.compare``."""
        from .compare import compare

        repeats = (repeats or None) if jobs else self.repeats_asked(base, list(runs), "compare", repeats)
        with stoppable():
            return compare(self, base, runs, by=by, threshold_pct=threshold_pct, repeats=repeats, jobs=jobs,
                           workers=workers, on_file=on_file)

    def repeats_asked(self, base: Any, compared: list[Any], said: str, repeats: list[Any] | None = None
                      ) -> list[Any] | None:
        """The repeats that measure the noise of a comparison of ``compared`` with ``base``:
        ``repeats`` where given; none where they are an empty list (``--no-repeats``); else
        those the store holds of the base (``stored_repeats``, a warning naming them, ``said``
        the command). None where there are none. A caller that labels the runs compared
        resolves them first, so that it knows which of ``compare``'s runs are repeats."""
        if repeats is None:
            return self.stored_repeats(base, compared, said) or None
        return list(repeats) or None

    def stored_repeats(self, base: Any, compared: list[Any], said: str, quiet: bool = False) -> list[str]:
        """The captures of the store taken as repeats of ``base`` (``tracekit sweep --repeat``: a
        first sweep and those whose runs' ``sweep_repeat_of`` is its id, in the order they ran):
        where ``base`` is a sweep's id, those sweeps; where it is a run (id or name) that is a
        point of such a sweep, the same point's run of the same kind in each of them; the
        base's own sweep and the sweeps of the ``compared`` left out. A ``CaptureWarning``
        names them (``said``: the command). Empty for anything else (a run outside any sweep, a
        file, a sweep without repeats). ``quiet``: no warning."""
        from .errors import CaptureWarning, warn_from_caller
        from .names import RUN_ID
        from .registry import resolve_sweep

        text = str(base).strip() if isinstance(base, str | int) else ""
        if not text:
            return []
        sweep_of = "json_extract_string(params, '$.sweep')"
        point = None  # (base a point of a sweep: its run id, grid point and kind)
        found = self.con.execute(  # (no row: base is no sweep's id)
            f"SELECT any_value(json_extract_string(params, '$.sweep_repeat_of')) FROM runs WHERE {sweep_of} = ? "
            "HAVING count(*) > 0", [text]).fetchall()
        if found:
            sweep = text
        else:
            got = self.con.execute(
                f"SELECT run_id, {sweep_of}, json_extract_string(params, '$.sweep_repeat_of'), grid_point(params), "
                "kind FROM runs WHERE " + ("run_id = $t::BIGINT" if RUN_ID.fullmatch(text) else "name = $t")
                + " ORDER BY run_id DESC LIMIT 1", {"t": text}).fetchall()  # (as diff resolves a run)
            if not got or not got[0][1] or got[0][3] is None:
                return []
            run_id, sweep, first, grid, kind = got[0]
            found, point = [(first,)], (run_id, grid, kind)
        first = found[0][0] or sweep
        others = set()  # (the sweeps compared: a run of one names it)
        for c in compared:
            try:
                others.add(resolve_sweep(self, c, said))
            except TracekitError:  # (a file not ingested yet: no sweep of the store)
                continue
        group = [s for (s,) in self.con.execute(
            f"SELECT {sweep_of} AS sweep FROM runs WHERE {sweep_of} = $first "
            "OR json_extract_string(params, '$.sweep_repeat_of') = $first GROUP BY sweep "
            "ORDER BY min(run_captured_us(meta)) NULLS LAST, min(run_id)",
            {"first": first}).fetchall() if s != sweep and s not in others]
        if point is None:
            if group and not quiet:
                warn_from_caller(CaptureWarning(
                    f"{said}: sweep {text} was taken again (tracekit sweep --repeat): its repeats {', '.join(group)} "
                    "measure the noise between processes a change must pass, as --repeat gives them"))
            return group
        run_id, grid, kind = point
        runs = [(s, r) for s in group for (r,) in self.con.execute(  # (a point ingested twice: its latest captured run)
            f"SELECT run_id FROM runs WHERE {sweep_of} = ? AND grid_point(params) = ? AND kind = ? "
            "AND coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok' "
            "ORDER BY run_captured_us(meta) DESC NULLS LAST, run_id DESC LIMIT 1", [s, grid, kind]).fetchall()]
        if runs and not quiet:
            warn_from_caller(CaptureWarning(
                f"{said}: run {run_id} is point {grid} of sweep {sweep}, which was taken again (tracekit sweep "
                f"--repeat): that point's runs in its repeats ({', '.join(f'run {r} of {s}' for s, r in runs)}) "
                "measure the noise between processes a change must pass, as --repeat gives them"))
        return [str(r) for _, r in runs]

    @one_at_a_time
    def sql(self, text: str, params: dict | list | None = None) -> pl.DataFrame:
        """Run ad-hoc SQL against the store and return a Polars DataFrame (the last
        statement's result). On a read-only store (``open(db, read_only=True)``, what
        ``tracekit sql`` uses) it reads the store's tables and nothing else."""
        return self.sql_head(text, params)[0]

    def sql_head(self, text: str, params: dict | list | None = None,
                 rows: int | None = None) -> tuple[pl.DataFrame, int]:
        """``sql``'s result, its first ``rows`` rows only where given (what a terminal shows:
        the rest is counted, never held, so a result larger than memory is no out-of-memory
        kill), and how many rows it has in all."""
        expect(rows, (int, type(None)), "sql: rows")
        if rows is not None and rows < 0:
            raise ParamError(f"sql: rows {rows}: a number of rows >= 0")
        with self._sql_errors(text, params):
            return self._sql(text, params, rows)

    @one_at_a_time
    def sql_each(self, text: str, each: Callable[[pl.DataFrame], None], params: dict | list | None = None,
                 batch_rows: int | None = None) -> None:
        """``sql``'s result handed to ``each`` as it is read, in DataFrames of at most
        ``batch_rows`` rows (``SQL_BATCH_ROWS`` by default): what a file of all of it is
        written from, never held whole, so a result larger than memory is no out-of-memory
        kill. Its values read as ``frame``'s; ``each`` gets one empty DataFrame for a result
        without rows, and one without columns where the last statement returns no result set.
        ``each`` must not query this store meanwhile (its connection is reading the result)."""
        if not callable(each):
            raise ParamError(f"sql_each: each {each!r:.60}: a function of one DataFrame")
        expect(batch_rows, (int, type(None)), "sql_each: batch_rows")
        if batch_rows is not None and batch_rows < 1:
            raise ParamError(f"sql_each: batch_rows {batch_rows}: a number of rows >= 1")
        with self._sql_errors(text, params):
            rel = self._relation(text, params)
            if rel is None:
                each(_no_result())
                return
            for df in _frames(rel, batch_rows or SQL_BATCH_ROWS):
                each(df)

    @contextlib.contextmanager
    def _sql_errors(self, text: str, params: dict | list | None):
        """``sql``'s arguments checked, Ctrl-C stopping the statement, and DuckDB's errors
        as one line."""
        expect(text, str, "sql: the SQL text", QueryError)
        expect(params, (list, tuple, dict, type(None)), "sql: params", QueryError)
        try:
            with stoppable():
                yield
        except duckdb.Error as err:
            out = self.db_error(err, "SQL error")
            if self.read_only and isinstance(err, duckdb.PermissionException | duckdb.InvalidInputException) \
                    and ("disabled" in str(err) or "locked" in str(err)):
                out = QueryError(f"{out} (tracekit sql reads the store and nothing else: no files, extensions "
                                 "or settings)")
            raise out from err

    def _sql(self, text: str, params: dict | list | None, rows: int | None) -> tuple[pl.DataFrame, int]:
        rel = self._relation(text, params)
        if rel is None:
            return _no_result(), 0
        df = self.frame(rel if rows is None else rel.limit(rows + 1))
        if rows is None or df.height <= rows:
            return df, df.height
        return df.head(rows), rel.aggregate("count(*)").fetchall()[0][0]

    def _relation(self, text: str, params: dict | list | None) -> duckdb.DuckDBPyRelation | None:
        """The last statement's result of ``text`` as a relation (the statements before it
        run), None where it returns no result set; statements that would download or write
        files are refused first."""
        statements = self.con.extract_statements(text)
        if not statements:
            raise QueryError("SQL error: no statement given (only blanks or comments); e.g. "
                             "tracekit sql \"SELECT * FROM runs\"")
        kinds = [_statement_kind(self.con, stmt) for stmt in statements]
        if any(kind in ("LOAD", "UNKNOWN") for kind in kinds):
            # INSTALL, LOAD and UPDATE EXTENSIONS (a kind DuckDB's module cannot name): DuckDB would download
            raise QueryError("SQL error: INSTALL, LOAD and UPDATE EXTENSIONS statements are refused: tracekit "
                             "installs no DuckDB extension (nothing downloads at run time)")
        if self.read_only and self.allowed_directories:
            for kind in kinds:
                if kind not in _READS:
                    raise QueryError(f"SQL error: {kind} statements are refused: tracekit sql "
                                     "reads the store and writes nothing")
        rel = self.con.sql(text, params=params)
        if rel is not None and statements[-1].type.name not in ("SELECT", "PRAGMA", "EXPLAIN") \
                and rel.columns in (["Success"], ["Count"]) and not rel.limit(1).fetchall():
            return None  # (DuckDB's stand-in for no result set, of CHECKPOINT, BEGIN, CREATE, ...)
        return rel

    def frame(self, rel: duckdb.DuckDBPyRelation) -> pl.DataFrame:
        """``rel``'s rows (a relation of this store's connection) as a Polars DataFrame
        whose every value reads as DuckDB's: a column of a type Polars cannot import
        (``_AS_TEXT``), and a date, time or timestamp column holding a value Python cannot
        hold (``_OUT_OF_RANGE``: DuckDB's infinities, years before 1 or past 9999, 24:00:00),
        which Polars shows wrong or panics on, is read as DuckDB's text of its values."""
        import polars as pl

        names = _unique_names(rel.columns)
        if names != rel.columns:  # a join's columns of one name: numbered first (a, a_1), as DuckDB's .pl() does
            rel = self.con.from_arrow(rel.to_arrow_table().rename_columns(names))
        rel = _as_text(rel, {c for c, t in zip(rel.columns, rel.types, strict=True) if _AS_TEXT.search(str(t))})
        dated = {c: str(t) for c, t in zip(rel.columns, rel.types, strict=True) if _DATED.search(str(t))}
        if not dated:
            return rel.pl()
        table = rel.to_arrow_table()  # (the SQL runs once; its rows are read again from Arrow)
        rows = self.con.from_arrow(table)
        found = rows.aggregate(", ".join(f"bool_or({_out_of_range(sql_ident(c), t)})" for c, t in dated.items()))
        text = {c for c, hit in zip(dated, found.fetchall()[0], strict=True) if hit}
        return pl.from_arrow(_as_text(rows, text).to_arrow_table() if text else table)


def _no_result() -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame()


def _frames(rel: duckdb.DuckDBPyRelation, batch_rows: int):
    """``rel``'s rows as DataFrames of at most ``batch_rows`` rows, read as DuckDB streams
    them, their values read as ``Tracekit.frame`` reads them: columns named once each, and
    those of a type Polars cannot import, or dated with a value Python cannot hold, as
    DuckDB's text (decided for the whole column: where the result has dated columns, the SQL
    runs once more, first, to find such values; a part of a second run that disagrees, SQL of
    random values, is an error, not a part written otherwise). At least one, empty where no
    rows. DuckDB's errors met after the first part (pyarrow's OSError) are DuckDB's again."""
    import polars as pl

    types = [str(t) for t in rel.types]
    text = {i for i, t in enumerate(types) if _AS_TEXT.search(t)}
    dated = [i for i, t in enumerate(types) if i not in text and _DATED.search(t)]
    if dated:
        found = rel.aggregate(", ".join(f"bool_or({_out_of_range(f'#{i + 1}', types[i])})" for i in dated))
        text |= {i for i, hit in zip(dated, found.fetchall()[0], strict=True) if hit}
    names = _unique_names(rel.columns)
    if text or names != rel.columns:
        rel = rel.project(", ".join(f"{f'CAST(#{i + 1} AS VARCHAR)' if i in text else f'#{i + 1}'} AS {sql_ident(n)}"
                                    for i, n in enumerate(names)))
    kept = [i for i in dated if i not in text]  # (typed: a part must hold no value Python cannot hold)
    check = ", ".join(f"bool_or({_out_of_range(f'#{i + 1}', types[i])})" for i in kept)
    parts = duckdb.connect() if kept else None  # (the store's connection is busy with the result)
    reader = rel.to_arrow_reader(batch_rows)
    empty = True
    try:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except OSError as err:  # (DuckDB's error, through pyarrow's reader)
                raise _duckdb_error(str(err)) from err
            if parts is not None and batch.num_rows and any(parts.from_arrow(batch).aggregate(check).fetchall()[0]):
                raise QueryError("SQL error: the result differs from one read to the next (random values?): a date "
                                 "or time column that held none Python cannot hold now holds one; CAST it to VARCHAR")
            if batch.num_rows or empty:
                yield pl.from_arrow(batch)
                empty = False
    finally:
        if parts is not None:
            parts.close()
    if empty:
        yield pl.from_arrow(rel.limit(0).to_arrow_table())


def _duckdb_error(text: str) -> duckdb.Error:
    """DuckDB's error of the text it says (``Invalid Input Error: ...`` an
    ``InvalidInputException``, ``IO Error: ...`` an ``IOException``), else a plain ``duckdb.Error``."""
    prefix = text.split(": ", 1)[0].removesuffix(" Error").replace(" ", "").lower()
    for name in dir(duckdb):
        kind = getattr(duckdb, name)
        if name.lower() == f"{prefix}exception" and isinstance(kind, type) and issubclass(kind, duckdb.Error):
            return kind(text)
    return duckdb.Error(text)


def _as_text(rel: duckdb.DuckDBPyRelation, columns: set[str]) -> duckdb.DuckDBPyRelation:
    """``rel`` with ``columns`` read as DuckDB's text of their values (``rel`` where none)."""
    if not columns:
        return rel
    return rel.project(", ".join(f"CAST({sql_ident(c)} AS VARCHAR) AS {sql_ident(c)}" if c in columns else sql_ident(c)
                                 for c in rel.columns))


def _unique_names(names: list[str]) -> list[str]:
    """``names`` with each one taken before numbered (``a, a, a`` -> ``a, a_1, a_2``)."""
    out: list[str] = []
    for name in names:
        unique, k = name, 0
        while unique in out:
            k += 1
            unique = f"{name}_{k}"
        out.append(unique)
    return out


#: DuckDB types of a result column that Polars cannot import (intervals, unions: an error or
#: a panic, nested ones too) or reads as something else (BIT and VARINT as raw bytes, a time
#: with its time zone without it, a UHUGEINT of 2^127 or more as a negative number, through
#: Arrow's signed 128-bit decimal): the column is read as DuckDB's text of its values
_AS_TEXT = re.compile(r"\b(INTERVAL|UNION|BIT|VARINT|BIGNUM|UHUGEINT)\b|TIME WITH TIME ZONE")
#: DuckDB types of dates, times and timestamps (alone, or in a list or struct), whose values
#: may lie beyond Python's (``_out_of_range``)
_DATED = re.compile(r"\b(DATE|TIME|TIME_NS|TIMESTAMP|TIMESTAMP_S|TIMESTAMP_MS|TIMESTAMP_NS)\b")


def _out_of_range(col: str, typ: str) -> str:
    """SQL true where the value of ``col`` (of DuckDB type ``typ``) is one Python's date,
    time and datetime cannot hold: Polars panics turning it into a Python object or text
    (an infinite timestamp, a year past 262143), fails (a year past 9999 or before 1), or
    shows another value (infinity as TIMESTAMP_NS is 2262-04-11, as TIMESTAMP_S 1969-12-31;
    24:00:00 is null). A list or struct of them: its text spells such a value."""
    if typ in ("TIME", "TIME_NS"):
        return f"hour({col}) > 23"
    if typ == "DATE":
        return f"NOT isfinite({col}) OR {col} NOT BETWEEN DATE '0001-01-01' AND DATE '9999-12-31'"
    if typ == "TIMESTAMP WITH TIME ZONE":  # (shown in a time zone: a day's margin)
        return (f"NOT isfinite({col}) OR {col} NOT BETWEEN TIMESTAMPTZ '0001-01-02 00:00:00+00' "
                "AND TIMESTAMPTZ '9999-12-30 00:00:00+00'")
    if typ in ("TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"):
        return (f"NOT isfinite({col}) OR CAST({col} AS TIMESTAMP) NOT BETWEEN TIMESTAMP '0001-01-01' "
                "AND TIMESTAMP '9999-12-31 23:59:59.999999'")
    return rf"regexp_matches(CAST({col} AS VARCHAR), 'infinity|\(BC\)|\d{{5,}}-\d\d-\d\d|\b24:00:00')"


def check_ingest_target(db: str | os.PathLike | None = None) -> None:
    """Raise now the one-line error an ingest into ``db`` would meet on opening it (not a
    store, another store schema, a folder that is not a dataset, a missing or read-only
    folder), writing nothing: for commands that ingest only after minutes of work
    (``tracekit capture``, ``tracekit sweep``). A store busy with another ingest passes:
    that one may be done by then."""
    path = _db_path(db)
    if str(path) == ":memory:":
        return
    if path.is_dir():
        from .dataset import Dataset

        if any(path.iterdir()):  # (an empty folder becomes a dataset at the first ingest)
            Dataset(path).check()
        return
    if not path.exists() and not path.parent.is_dir():
        raise InputError(f"{path}: cannot create the store: folder {path.parent} does not exist")
    probe = Tracekit(path)
    probe._check_writable()
    if not path.exists():
        return
    probe._check_file()
    try:
        probe._con = probe._connect(read_only=True)
    except StoreBusy:
        return
    try:
        probe._check_schema()  # (as a writer would: an empty DuckDB file is a new store)
    finally:
        probe.close()


def open(db: str | os.PathLike | None = None, read_only: bool = False):  # noqa: A001
    """Open (or lazily create) a tracekit database; ``db`` defaults to $TRACEKIT_DB or
    ./tracekit.duckdb. A folder is a Parquet dataset (tracekit.dataset): read-only
    queries, ingest adds runs as partitions."""
    expect(db, (str, os.PathLike, type(None)), "open: db")
    expect(read_only, bool, "open: read_only")
    path = _db_path(db)
    if path.is_dir():
        from .dataset import Dataset

        return Dataset(path)
    return Tracekit(path, read_only=read_only)


def _db_path(db: str | os.PathLike | None) -> Path:
    """The path of ``db`` (default: $TRACEKIT_DB, else ./tracekit.duckdb). One written as a
    folder (a trailing /) must be one: Path drops the slash, and a store file of that name
    would be made where a dataset was asked for; an empty one names nothing."""
    raw = os.fspath(db) if db is not None else _default_db()
    if not str(raw).strip():
        raise ParamError("--db '': name a store file (FILE.duckdb) or a dataset folder")
    if "\0" in str(raw):
        raise ParamError(f"--db {str(raw)!r}: a path holds no NUL character")
    check_utf8_path(raw)
    path = Path(raw)
    if str(raw).endswith(("/", os.sep)) and not path.is_dir():
        what = "not a folder" if path.exists() else "no such folder"
        raise InputError(f"{raw}: {what}; a Parquet dataset is a folder that exists (mkdir {path}), "
                         "a DuckDB store a file (--db FILE.duckdb)")
    return path
