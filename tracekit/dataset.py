"""The store as a Parquet dataset: one folder any Parquet engine reads.

Layout (Hive-partitioned by run)::

    DIR/runs.parquet                       the runs table
    DIR/_store.parquet                     the store's facts (schema_version; last_run_id once a run was removed)
    DIR/<table>/run_id=3/part-0.parquet    every per-run table, one file per run (empty
                                           where the run has no rows: each table has
                                           a file for every run)

Name ids (the ``*name_id`` columns, schema_nsys.sql) are made unique per run in a
dataset: ``(slot << 32) + the id the run's store gave it``, where the slot is the run's id
in an export and, in an ingest, a number no run of the dataset has used, given before the run
is prepared (its id is given when it lands, so that a file that fails or is skipped leaves no
gap: the ids of a serial ingest); ``DIR/_strings/run_id=3/`` holds the names run 3 uses. So runs written by different
processes never clash, and a name joins within its run.

``Dataset`` answers every named query read-only in an in-memory DuckDB: the small
tables read into it at open, views on ``read_parquet`` for the others; the same results
as the DuckDB store. Its connection reads only the dataset's folder
(``allowed_directories``; external access otherwise off, configuration locked), and
``sql`` runs only the statements that read (``store._READS``): the tables are an in-memory
catalog DuckDB would let change, and the folder is readable, so DuckDB would also let a
statement write into it.

Ingest into a dataset (``tracekit --db DIR ingest ... [--workers N]``) prepares each run
(``tracekit.staging``), writes its partitions into ``DIR/.tracekit-stage-*/`` from where
it was prepared (a Dask worker), and lands it by renaming them into place and adding
its row to ``runs.parquet``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import duckdb

from .errors import (
    CaptureWarning,
    InputError,
    Interrupted,
    OutputError,
    TracekitError,
    expect,
    warn_from_caller,
)
from .interrupts import SigintWatch, interruptible
from .names import asked_run_name
from .store import (
    CAPTURE_STATUS,
    SCHEMA_VERSION,
    IngestResult,
    Tracekit,
    _macros_sql,
    _schema_sql,
    check_ingest_args,
    one_at_a_time,
    view_sql,
)

RUNS_FILE = "runs.parquet"
#: runs.parquet's params and meta as JSON text: DuckDB writes its JSON type as Parquet's JSON, which
#: Polars reads as bytes; the dataset reads them back as JSON (``_table_sql``: the store's types)
RUNS_FILE_TYPES = {"params": "VARCHAR", "meta": "VARCHAR"}
RUNS_FILE_COLUMNS = "params::VARCHAR AS params, meta::VARCHAR AS meta"
STORE_FILE = "_store.parquet"
PART = "part-0.parquet"
#: Name ids in a dataset: (the run's slot << STRING_ID_SHIFT) + the run's own id (module docstring).
STRING_ID_SHIFT = 32
#: Tables whose files hold this many bytes in all (smallest first) are read into memory
#: when a dataset is opened: the runs, the names and the per-run summaries; the large
#: tables (kernels, API calls, NVTX ranges) stay views over their files.
IN_MEMORY_BYTES = 16 * 2**20


@lru_cache(maxsize=1)
def schema() -> dict[str, list[tuple[str, str]]]:
    """The store's base tables and their (column, type), in the store's column order."""
    con = duckdb.connect()
    try:
        for sql in _schema_sql():
            con.execute(sql)
        rows = con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "AND table_name IN (SELECT table_name FROM duckdb_tables()) ORDER BY table_name, column_index"
        ).fetchall()
    finally:
        con.close()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, col, typ in rows:
        out.setdefault(table, []).append((col, typ))
    return out


def _q(path: Path) -> str:
    return str(path).replace("'", "''")


#: the file a dataset's one writer holds a lock on (flock: let go when its process ends,
#: however it ends)
LOCK_FILE = ".tracekit-writer.lock"
#: the locks this process holds: resolved dataset path -> (open file, holders)
_HELD: dict[Path, list] = {}


@contextlib.contextmanager
def writer_lock(path: Path):
    """The dataset's writer lock for the block (re-entrant in one process): a second
    process writing the dataset (an ingest, a rename, a removal) is refused at once with
    one line. Holding it, a writer may take what no live writer owns for left-overs of an
    ingest that was killed (``_sweep``). The lock file is removed when the lock is let
    go (while still held; a process that locked the removed file sees that it is not
    the file at the path any more and tries again), so a dataset holds no file of it
    between commands."""
    import fcntl

    key = path.resolve()
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    lock = key / LOCK_FILE
    for _ in range(100):
        fh = open(lock, "a+")  # noqa: SIM115 - held past this block's first statement
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise TracekitError(f"{path}: another tracekit process is writing this dataset; "
                                "run again once it has ended") from None
        try:
            if os.fstat(fh.fileno()).st_ino == os.stat(lock).st_ino:
                break
        except FileNotFoundError:
            pass
        fh.close()  # (the file its last holder removed: lock the one at the path now)
    else:
        raise TracekitError(f"{path}: cannot take the dataset's writer lock ({lock})")
    _HELD[key] = [fh, 1]
    try:
        yield
    finally:
        _HELD[key][1] -= 1
        if _HELD[key][1] == 0:
            del _HELD[key]
            lock.unlink(missing_ok=True)
            fh.close()  # (lets go of the lock)


def _sweep(root: Path) -> None:
    """Remove what an ingest killed before its run's row was written left behind (its
    writer lock held): partitions of run ids runs.parquet does not list and no run was
    given, half-written runs.parquet files, staging folders. Without this, the next
    ingest would find its run id's partitions taken."""
    con = duckdb.connect()
    try:
        listed = {r[0] for r in con.execute(f"SELECT run_id FROM read_parquet('{_q(root / RUNS_FILE)}')").fetchall()}
        top = last_run_id(con, root)
    finally:
        con.close()
    for table in root.iterdir():
        if table.name.startswith(".tracekit-stage-") and table.is_dir():
            shutil.rmtree(table, ignore_errors=True)
        elif table.name.startswith(f".{RUNS_FILE}.") and table.name.endswith(".tmp"):
            table.unlink(missing_ok=True)
        elif table.is_dir() and not table.name.startswith("."):
            for part in table.glob("run_id=*"):
                run = part.name.split("=", 1)[1]
                if run.isdigit() and int(run) not in listed and int(run) > top:
                    shutil.rmtree(part, ignore_errors=True)


def _string_cols(con, catalog: str, table: str) -> list[str]:
    from .staging import string_id_columns

    return string_id_columns(con, catalog, table)


def write_run(con, catalog: str, src_run: int, dest: Path, run_id: int) -> dict[str, int]:
    """Write run ``src_run`` of the database attached as ``catalog`` into folder ``dest``
    as dataset files of run ``run_id``: ``dest/<table>/run_id=N/part-0.parquet`` for every
    per-run table, ``dest/_strings/...`` (its names), ``dest/runs/run_id=N/...`` (its row)."""
    from .staging import run_tables

    shift = int(run_id) << STRING_ID_SHIFT
    rows: dict[str, int] = {}
    tables = run_tables(con, catalog)
    used = []
    for table in tables:
        cols = _string_cols(con, catalog, table)
        # Parquet has no 128-bit integer: DuckDB would write a HUGEINT (api_sum.total_ns) as a
        # DOUBLE, a float in every reader; a sum of ns fits 64 bits for 292 years
        wide = [r[0] for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = 'main' "
            "AND table_name = ? AND data_type = 'HUGEINT'", [catalog, table]).fetchall()]
        replace = ", ".join([*(f'"{c}" + {shift} AS "{c}"' for c in cols), *(f'"{c}"::BIGINT AS "{c}"' for c in wide)])
        sel = f'SELECT * EXCLUDE (run_id){f" REPLACE ({replace})" if replace else ""} FROM {catalog}."{table}" ' \
              f"WHERE run_id = {int(src_run)}"
        out = dest / table / f"run_id={int(run_id)}"
        out.mkdir(parents=True, exist_ok=True)
        n = con.execute(f"COPY ({sel}) TO '{_q(out / PART)}' (FORMAT parquet)").fetchall()
        rows[table] = int(n[0][0]) if n else 0
        used += [f'SELECT DISTINCT "{c}" AS id FROM {catalog}."{table}" WHERE run_id = {int(src_run)}' for c in cols]
    out = dest / "_strings" / f"run_id={int(run_id)}"
    out.mkdir(parents=True, exist_ok=True)
    has_strings = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND table_name = '_strings'",
                              [catalog]).fetchall()[0][0]
    if used and has_strings:
        sel = (f"SELECT string_id + {shift} AS string_id, value FROM {catalog}._strings "
               f"WHERE string_id IN ({' UNION '.join(used)}) ORDER BY string_id")
    else:
        sel = "SELECT NULL::BIGINT AS string_id, NULL::VARCHAR AS value WHERE false"
    con.execute(f"COPY ({sel}) TO '{_q(out / PART)}' (FORMAT parquet)")
    out = dest / "runs" / f"run_id={int(run_id)}"
    out.mkdir(parents=True, exist_ok=True)
    con.execute(f"COPY (SELECT * REPLACE ({int(run_id)}::INTEGER AS run_id, {RUNS_FILE_COLUMNS}) FROM {catalog}.runs "
                f"WHERE run_id = {int(src_run)}) TO '{_q(out / PART)}' (FORMAT parquet)")
    return {t: n for t, n in rows.items() if n}


class Dataset(Tracekit):
    """A tracekit Parquet dataset (``tracekit.open(DIR)``): read-only queries (the
    store's sandbox, reading only the dataset's folder), and ingest that adds runs as
    new partitions."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(path, read_only=True)
        self.allowed_directories = (str(self.path),)

    # -- reading ----------------------------------------------------------
    def check(self) -> None:
        """Raise a one-line error unless the folder is a complete tracekit dataset."""
        con = duckdb.connect()
        try:
            self._listing(con)
        finally:
            con.close()

    def _listing(self, con: duckdb.DuckDBPyConnection) -> dict[str, list[Path]]:
        """Check the folder (one-line errors) and list each table's files: the runs'
        partitions of every per-run table (plugins' tables too), in run order."""
        if not self.path.is_dir():
            raise InputError(f"{self.path}: no such dataset folder")
        root = self.path.resolve()
        if not (root / RUNS_FILE).is_file() or not (root / STORE_FILE).is_file():
            raise InputError(f"{self.path}: is a folder but not a tracekit dataset (no {RUNS_FILE} and "
                             f"{STORE_FILE}); name a store's file (--db FILE), or a dataset folder that "
                             "`tracekit export parquet -o DIR` wrote")
        try:
            row = con.execute(f"SELECT value FROM read_parquet('{_q(root / STORE_FILE)}') "
                              "WHERE key = 'schema_version'").fetchall()
        except duckdb.Error as err:
            raise InputError(f"{self.path / STORE_FILE}: not readable ({str(err).splitlines()[0]})") from err
        version = row[0][0] if row else None
        if version != str(SCHEMA_VERSION):
            raise InputError(f"{self.path}: dataset of store schema {version}, this tracekit uses {SCHEMA_VERSION}; "
                             "export it again from a store of this version")
        try:
            listed = {r[0] for r in con.execute(f"SELECT run_id FROM read_parquet('{_q(root / RUNS_FILE)}')").fetchall()}
        except duckdb.Error as err:
            raise InputError(f"{self.path / RUNS_FILE}: not readable ({str(err).splitlines()[0]})") from err
        runs = len(listed)
        files = {"runs": [root / RUNS_FILE], "_store": [root / STORE_FILE]}
        tables = set(schema()) | {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}
        for table in sorted(tables - {"runs", "_store"}):
            # the partitions of the runs runs.parquet lists: a run is in once its row is (one
            # that is landing, or an ingest killed while it landed left, is not read)
            parts = sorted((int(p.parent.name.partition("=")[2]), p) for p in (root / table).glob(f"run_id=*/{PART}")
                           if p.parent.name.partition("=")[2].isdigit() and int(p.parent.name.partition("=")[2]) in listed)
            if runs and not parts and table in schema():
                raise InputError(f"{self.path}: dataset lacks table {table} ({root / table}/run_id=N/{PART}); "
                                 "export it again")
            if table in schema() and len(parts) < runs:  # (every run has a file of every table, an empty
                # one where it has no rows: one gone, its run would answer as if it had none)
                lost = min(listed - {r for r, _ in parts})
                raise InputError(f"{self.path}: dataset lacks run {lost}'s file of table {table} "
                                 f"({root / table}/run_id={lost}/{PART}); copy the dataset again or export it again")
            files[table] = [p for _, p in parts] if runs else []
        return files

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with each table of the dataset, sandboxed like a
        store's read-only connection: the small tables read into memory, the others views
        over their files (``_setup_reader``)."""
        self.check_open()
        if self._con is None:
            con = interruptible(duckdb.connect(config=self._connect_config()))
            try:
                con.execute("SET enable_progress_bar = false")
                # the files' footers read once per connection, not once per query
                con.execute("SET parquet_metadata_cache = true")
                self._files = self._listing(con)
                con.execute(_macros_sql())
                self._setup_reader(con)
                self._sandbox(con)
            except duckdb.Error as err:
                con.close()
                raise InputError(f"{self.path}: cannot read the dataset ({str(err).splitlines()[0]})") from err
            except BaseException:
                con.close()
                raise
            self._con = con
        return self._con

    def _setup_reader(self, con: duckdb.DuckDBPyConnection) -> None:
        """A table per small table (files of IN_MEMORY_BYTES in all, smallest first), read
        once here, and a view over the explicit file list of each other table: the
        connection sees the dataset as it was when it was opened, and a query binds no
        glob and no small table's files (the runs, names and summaries every named
        query joins: ~0.5-1 ms each per query, more than the store takes for a whole
        small query; docs/performance.md)."""
        files = self._files
        sizes = {t: sum(f.stat().st_size for f in fs) for t, fs in files.items()}
        budget = IN_MEMORY_BYTES
        for table in sorted(files, key=lambda t: (sizes[t], t)):
            in_memory = sizes[table] <= budget
            if in_memory:
                budget -= sizes[table]
            con.execute(self._table_sql(table, schema().get(table), files[table], in_memory))
        for sql in view_sql():
            con.execute(sql)

    @staticmethod
    def _table_sql(table: str, cols: list[tuple[str, str]] | None, files: list[Path], in_memory: bool) -> str:
        """The table ``table`` as a view (or, ``in_memory``, a table) over ``files``,
        with the store's column types (``cols``; None: a plugin's table without DDL, as
        the files hold it)."""
        what = "TABLE" if in_memory else "VIEW"
        if not files:  # no run yet: no partition to read
            body = ", ".join(f'NULL::{typ} AS "{c}"' for c, typ in cols or [("run_id", "INTEGER")])
            return f'CREATE {what} "{table}" AS SELECT {body} WHERE false'
        paths = "[" + ", ".join(f"'{_q(f)}'" for f in files) + "]"
        if table in ("runs", "_store"):
            src = f"read_parquet({paths}, hive_partitioning = false)"
        else:
            src = f"read_parquet({paths}, hive_partitioning = true, hive_types = {{'run_id': 'INTEGER'}})"
        body = ", ".join(f'CAST("{c}" AS {typ}) AS "{c}"' for c, typ in cols) if cols else "*"
        return f'CREATE {what} "{table}" AS SELECT {body} FROM {src}'

    # -- managing runs ----------------------------------------------------
    @one_at_a_time
    def rename_run(self, run: str | int, new_name: str) -> tuple[int, str]:
        """Rename a run (its row in runs.parquet); returns (run id, old name)."""
        with writer_lock(self.path):
            run_id, old = self.resolve(run)
            own = self.con.execute("SELECT source_path FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]
            new_name = asked_run_name(new_name, own)  # (its own input's path may name it, as in a store)
            self.check_name_free(new_name, run_id)
            self._rewrite_runs("SELECT * REPLACE (CASE WHEN run_id = $id THEN $name ELSE name END AS name)", "true",
                               {"id": run_id, "name": new_name})
        return run_id, old

    @one_at_a_time
    def remove_run(self, run: str | int) -> tuple[int, str]:
        """Remove a run: its row from runs.parquet first (the run is then gone for every
        reader), then its files from every table; returns (run id, name)."""
        with writer_lock(self.path):
            run_id, name = self.resolve(run)
            self._keep_last_run_id()
            self._rewrite_runs("SELECT *", "run_id <> $id", {"id": run_id})
            for table in self.path.iterdir():
                if table.is_dir() and not table.name.startswith("."):
                    shutil.rmtree(table / f"run_id={run_id}", ignore_errors=True)
        return run_id, name

    def _keep_last_run_id(self) -> None:
        """Note the highest run id given so far in _store.parquet, so that no later
        ingest gives a removed run's id again (a store's sequence does the same): a
        diff or a note naming run 7 never comes to mean another run."""
        self._release()
        facts, tmp = self.path / STORE_FILE, self.path / f".{STORE_FILE}.{os.getpid()}.tmp"
        con = duckdb.connect()
        try:
            last = last_run_id(con, self.path)
            con.execute(f"COPY (SELECT key, value FROM read_parquet('{_q(facts)}') WHERE key <> 'last_run_id' "
                        "UNION ALL SELECT 'last_run_id', $last::VARCHAR) "
                        f"TO '{_q(tmp)}' (FORMAT parquet)", {"last": last})
        finally:
            con.close()
        os.replace(tmp, facts)

    def _rewrite_runs(self, select: str, where: str, params: dict) -> None:
        """runs.parquet as ``select`` over its rows ``where`` (a new file renamed into place)."""
        self._release()
        runs = self.path / RUNS_FILE
        tmp = self.path / f".{RUNS_FILE}.{os.getpid()}.tmp"
        con = duckdb.connect()
        try:
            con.execute(f"COPY ({select} FROM read_parquet('{_q(runs)}') WHERE {where} ORDER BY run_id) "
                        f"TO '{_q(tmp)}' (FORMAT parquet)", params)
        finally:
            con.close()
        os.replace(tmp, runs)

    # -- writing ----------------------------------------------------------
    def _runs_named(self, name: str) -> list[int]:
        """The ids of the dataset's runs named ``name`` (runs.parquet as it is now: the
        reading connection sees the dataset as it was when it was opened)."""
        if not (self.path / RUNS_FILE).is_file():
            return []
        con = duckdb.connect()
        try:
            return [r[0] for r in con.execute(f"SELECT run_id FROM read_parquet('{_q(self.path / RUNS_FILE)}') "
                                              "WHERE name = ? ORDER BY run_id", [name]).fetchall()]
        finally:
            con.close()

    def staging_destination(self) -> DatasetDestination:
        return DatasetDestination(self)

    @one_at_a_time
    def ingest(self, path: str | os.PathLike, name: str | None = None, params: dict | None = None) -> IngestResult:
        """Ingest one source as a new run of the dataset (prepared here, then landed)."""
        name = check_ingest_args(path, name, params)
        self.last_ingest = None
        # Ctrl-C raises Interrupted saying whether the run is in (``land`` notes it when it
        # is), whatever DuckDB made of it in a statement it stopped, as a store's ingest does
        with SigintWatch() as self._sigints:
            try:
                dest = self.staging_destination()
                stage = None
                try:
                    stage = Path(tempfile.mkdtemp(prefix=".tracekit-stage-", dir=dest.stage_parent))
                    part = dest.task(str(path), 0, name=name, params=params, workdir=str(stage),
                                     known=dest.known_hashes())
                    return dest.land(part)
                finally:
                    with self._sigints.held():  # (the staging folder goes whole; the writer lock is let go)
                        if stage is not None:
                            shutil.rmtree(stage, ignore_errors=True)
                        dest.finish()
            except Interrupted:
                raise
            except BaseException as err:
                if not (self._sigints.count or isinstance(err, KeyboardInterrupt)):
                    from .outputs import io_reason, no_room

                    if not isinstance(err, TracekitError) and no_room(err):
                        raise OutputError(f"{self.path}: cannot write the run of {path} ({io_reason(err)}); the "
                                          "dataset is as it was") from err
                    raise
                raise self.interrupted(path) from None


def last_run_id(con, path: Path) -> int:
    """The highest run id the dataset in ``path`` has given: its runs' and the
    last_run_id of _store.parquet (noted when a run is removed)."""
    return con.execute(
        f"SELECT greatest((SELECT coalesce(max(run_id), 0) FROM read_parquet('{_q(path / RUNS_FILE)}')), "
        f"(SELECT coalesce(max(TRY_CAST(value AS BIGINT)), 0) FROM read_parquet('{_q(path / STORE_FILE)}') "
        "WHERE key = 'last_run_id'))").fetchall()[0][0]


def _file_list(files: list[Path]) -> str:
    """SQL of a list of files for read_parquet: each named, never a pattern (a path may hold '[')."""
    return "[" + ", ".join(f"'{_q(f)}'" for f in files) + "]"


def _check_new(path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        what = "a file" if not path.is_dir() else "a folder that is not empty"
        raise InputError(f"{path}: is {what}; write a dataset into a new or empty folder")


def create(path: Path) -> Dataset:
    """A new, empty dataset in ``path`` (a new or empty folder in a folder that exists:
    a mistyped path is refused, as for every other output, not created)."""
    _check_new(path)
    if not path.resolve().parent.is_dir():
        raise InputError(f"{path}: folder {path.parent} does not exist; create it first")
    try:
        path.mkdir(exist_ok=True)
    except OSError as err:  # a read-only or special folder (/proc)
        raise InputError(f"{path}: cannot create the dataset folder ({err.strerror or err})") from err
    con = duckdb.connect()
    try:
        for table in ("runs", "_store"):
            cols = ", ".join(f'NULL::{RUNS_FILE_TYPES.get(c, typ) if table == "runs" else typ} AS "{c}"'
                             for c, typ in schema()[table])
            con.execute(f"COPY (SELECT {cols} WHERE false) TO '{_q(path / (table + '.parquet'))}' (FORMAT parquet)")
        con.execute(f"COPY (SELECT 'schema_version' AS key, '{SCHEMA_VERSION}' AS value) "
                    f"TO '{_q(path / STORE_FILE)}' (FORMAT parquet)")
    finally:
        con.close()
    return Dataset(path)


class _Part:
    """A run written as dataset files under a staging folder, ready to be moved in."""

    def __init__(self, source: str, folder: Path | None, slot: int, digest: str | None,
                 rows: dict[str, int], kind: str | None, name: str | None, asked_name: str | None = None):
        self.source, self.folder, self.slot, self.digest = source, folder, slot, digest
        self.rows, self.kind, self.name = rows, kind, name
        self.asked_name = asked_name  # the name asked for (None: the run's own, settled when it lands)

    def discard(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def prepare_part(source: str, index: int, *, base_slot: int, name=None, params=None,
                 workdir=None, known=frozenset(), threads=None) -> _Part:
    """Distributed ingest's task for a dataset: prepare ``source`` and write it as a run of
    slot ``base_slot + index`` (its partitions named run_id=SLOT until it lands with its id)
    into a folder of its own under ``workdir`` (in the dataset). The run is staged in memory:
    its files are the only thing written (a staging database file would cost a fifth more
    CPU per file)."""
    from .staging import ingest_into

    slot = base_slot + index
    stage = Tracekit(":memory:")
    folder = None
    try:
        if workdir is not None:  # what does not fit in memory spills beside the part, not into the cwd
            stage.con.execute("SET temp_directory = ?", [str(Path(workdir) / f".spill-{slot}")])
        res = ingest_into(stage, Path(source), name=name, params=params, known=known, threads=threads)
        if res.skipped:  # a hash the dataset holds
            return _Part(source, None, slot, res.digest, {}, None, None, asked_name=name)
        folder = Path(tempfile.mkdtemp(prefix=f"slot{slot}-", dir=workdir))
        catalog = stage.con.execute("SELECT current_database()").fetchall()[0][0]
        rows = write_run(stage.con, catalog, res.run_id, folder, slot)
    except BaseException:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        stage.close()
    return _Part(source, folder, slot, res.digest, res.rows or rows, res.kind, res.name, asked_name=name)


class DatasetDestination:
    """Where distributed ingest lands runs when ``--db`` is a dataset folder: each worker
    writes its run's files into the dataset folder; landing renames them into place and
    adds the run's row to runs.parquet (the only file the main process writes)."""

    def __init__(self, ds: Dataset):
        if not (ds.path / RUNS_FILE).exists() and ds.path.is_dir() and any(ds.path.iterdir()):
            ds.check()  # a folder with other files: not a dataset (one line)
        if not (ds.path / RUNS_FILE).exists():
            create(ds.path)
        ds.check()
        ds._release()
        self.ds = ds
        self._lock = writer_lock(ds.path)
        self._lock.__enter__()  # (let go in finish, or here if what follows fails)
        try:
            _sweep(ds.path.resolve())
            self.stage_parent = ds.path.resolve()
            con = duckdb.connect()
            try:
                top = last_run_id(con, ds.path)
                strings = _file_list(sorted((ds.path / "_strings").glob(f"run_id=*/{PART}")))
                used = con.execute(f"SELECT max(string_id) >> {STRING_ID_SHIFT} FROM read_parquet({strings})"
                                   ).fetchall()[0][0] if strings != "[]" else None
            finally:
                con.close()
            self.next_id = int(top) + 1  # the id of the next run that lands
            self.base = max(int(top), int(used or 0)) + 1  # the first slot: past every run's names
        except BaseException:
            self.finish()
            raise

    @property
    def task(self):
        import functools

        return functools.partial(prepare_part, base_slot=self.base)

    def _held(self) -> str:
        """SQL of (run_id, content hash) for every run and every file of a run folder's run."""
        runs = f"read_parquet('{_q(self.ds.path / RUNS_FILE)}')"
        sql = f"SELECT run_id, source_hash AS h FROM {runs} WHERE source_hash IS NOT NULL"
        files = sorted((self.ds.path / "run_sources").glob(f"run_id=*/{PART}"))
        if files:  # (listed here: DuckDB would read a '[' or '?' in the dataset's own path as a pattern)
            sql += (f" UNION ALL SELECT run_id, content_hash FROM read_parquet({_file_list(files)}, "
                    "hive_partitioning = true, hive_types = {'run_id': 'INTEGER'}) WHERE content_hash IS NOT NULL")
        return sql

    def known_hashes(self) -> frozenset[str]:
        con = duckdb.connect()
        try:
            return frozenset(r[0] for r in con.execute(f"SELECT DISTINCT h FROM ({self._held()})").fetchall())
        finally:
            con.close()

    def _holders(self, digests: list[str]) -> dict[str, list[tuple[IngestResult, bool]]]:
        """For each of ``digests``, every run holding it by id: (the run, whether it is that
        file ingested alone), as ``Tracekit._holders`` gives them."""
        con = duckdb.connect()
        try:
            rows = con.execute(f"SELECT DISTINCT s.h, r.run_id, r.name, r.kind, r.source_path, r.source_hash = s.h "
                               f"FROM ({self._held()}) s JOIN read_parquet('{_q(self.ds.path / RUNS_FILE)}') r "
                               "USING (run_id) WHERE s.h IN (SELECT unnest($d)) ORDER BY r.run_id",
                               {"d": digests}).fetchall()
        finally:
            con.close()
        out: dict[str, list[tuple[IngestResult, bool]]] = {h: [] for h in digests}
        for h, *run, alone in rows:
            out[h].append((IngestResult(*run, True, {}, digest=h), bool(alone)))
        return out

    def land(self, part: _Part) -> IngestResult:
        """Move the part's files into the dataset. A source the dataset holds already
        (alone, or in a run folder's run) is that run, and a run folder is placed as in a
        store (``store.place_folder``), except that a dataset's runs are not rewritten: a
        folder that would take the place of the same capture's earlier run (its export
        ingested alone, the folder before it grew) is that run, with a warning that its
        other files are not added. A new run's name is settled here
        (``Tracekit.default_name``)."""
        from .store import place_folder

        found, hashes = None, []
        if part.folder is not None and (src := part.folder / "run_sources" / f"run_id={part.slot}" / PART).exists():
            con = duckdb.connect()
            try:
                hashes = [r[0] for r in con.execute(f"SELECT content_hash FROM read_parquet('{_q(src)}') "
                                                    "WHERE content_hash IS NOT NULL").fetchall()]
            finally:
                con.close()
        held = self._holders([part.digest, *hashes] if part.digest is not None else hashes)
        if part.digest is not None and held[part.digest]:  # this very content
            found = held[part.digest][0][0]
        elif hashes:
            found, earlier = place_folder(str(Path(part.source).resolve()), {h: held[h] for h in hashes})
            if found is None and earlier:
                found = earlier[0]
                warn_from_caller(CaptureWarning(
                    f"{part.source}: holds the capture of run {found.run_id} ({found.name}) and what that run lacks "
                    "(files beside it, its meta.json's parameters); a dataset's runs are not rewritten, so the rest is "
                    "not added (a DuckDB store replaces the run by the folder's: ingest into a store, then export the "
                    "dataset again)"))
        if found is not None:
            part.discard()
            found.digest = part.digest
            if part.asked_name is not None and part.asked_name != found.name:  # renamed, as in a store
                self.ds.rename_run(found.run_id, part.asked_name)
                found.renamed_from, found.name = found.name, part.asked_name
            return found
        if part.folder is None:
            raise InputError(f"{part.source}: was skipped as already ingested, but the dataset no longer holds it")
        if part.asked_name is not None:
            self.ds.check_name_free(part.asked_name)
        name = part.asked_name or self.ds.default_name(part.name, part.source)
        # a Ctrl-C waits for the run to be in whole (its row written) and noted as landed
        # (``last_ingest``: what an interrupted `tracekit ingest` says of it)
        with SigintWatch() as watch, watch.held():
            self.ds.last_ingest = self._move_in(part, name)
            return self.ds.last_ingest

    def _move_in(self, part: _Part, name: str) -> IngestResult:
        """The part's partitions (named by its slot) renamed into place as
        run ``next_id``'s, then its row, with that id and ``name``, added to runs.parquet."""
        root, run_id = self.ds.path, self.next_id
        row_file = part.folder / "runs" / f"run_id={part.slot}" / PART
        for table_dir in sorted(p for p in part.folder.iterdir() if p.name != "runs"):
            target = root / table_dir.name / f"run_id={run_id}"
            if target.exists():
                raise TracekitError(f"{root}: already holds {target.relative_to(root)}; "
                                    "is another ingest writing this dataset?")
            target.parent.mkdir(exist_ok=True)
            os.replace(table_dir / f"run_id={part.slot}", target)
        # runs.parquet last: the run is in the dataset once its row is
        tmp = root / f".{RUNS_FILE}.{os.getpid()}.tmp"
        con = duckdb.connect()
        try:
            con.execute(f"COPY (SELECT * FROM read_parquet('{_q(root / RUNS_FILE)}') UNION ALL BY NAME "
                        f"SELECT * REPLACE ($name AS name, $id::INTEGER AS run_id) FROM read_parquet('{_q(row_file)}', "
                        f"hive_partitioning = false) ORDER BY run_id) TO '{_q(tmp)}' (FORMAT parquet)",
                        {"name": name, "id": run_id})
            kind, source, status, error = con.execute(
                f"SELECT kind, source_path, {CAPTURE_STATUS} FROM read_parquet('{_q(row_file)}', "
                "hive_partitioning = false)").fetchall()[0]
        finally:
            con.close()
        os.replace(tmp, root / RUNS_FILE)
        self.next_id += 1
        part.discard()
        return IngestResult(run_id, name, kind, source, False, part.rows, digest=part.digest, status=status,
                            error=error)

    def ingest_here(self, source: str, index: int, *, name=None, params=None, workdir=None,
                    known=frozenset()) -> IngestResult:
        """``source`` prepared and landed in this process (what a worker and the landing do)."""
        part = self.task(source, index, name=name, params=params, workdir=workdir, known=known)
        try:
            return self.land(part)
        finally:
            part.discard()

    def pause(self) -> None:
        """Nothing held between landings (each rewrites runs.parquet and lets go)."""

    def finish(self) -> None:
        self.ds._release()
        if self._lock is not None:
            lock, self._lock = self._lock, None
            lock.__exit__(None, None, None)


def _write_failed(dest: Path, err: BaseException) -> OutputError | None:
    """The one-line error of an export into ``dest`` that the operating system refused (a full
    disk: DuckDB's IOException carries its errno); None for any other error."""
    from .outputs import io_reason

    reason = None if isinstance(err, TracekitError) else io_reason(err)
    return None if reason is None else OutputError(f"{dest}: cannot write the dataset ({reason}); nothing was left "
                                                   "in it")


def export(tk, dest: str | os.PathLike, run: str | int | None = "all") -> list[int]:
    """Write the store's runs (``run``: an id, a name, or 'all') as a Parquet dataset
    in ``dest`` (a new or empty folder); returns the run ids written (ids kept)."""
    from .registry import resolve_run

    expect(dest, (str, os.PathLike), "export: folder", InputError)
    from .outputs import check_not_store, resolved

    dest = Path(dest)
    if str(tk.path) != ":memory:" and resolved(dest) == Path(tk.path).resolve():
        raise InputError(f"{dest}: is the store itself; export into a new folder")
    check_not_store(dest, tk.path)  # (nor its .wal: a folder there, and DuckDB cannot open the store again)
    _check_new(dest)
    if run is None or str(run).strip().lower() == "all":
        ids = [r[0] for r in tk.con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
    else:
        ids = [resolve_run(tk, run, "runs", "export parquet")]
    con, own, catalog = tk.con, False, None
    if tk.read_only:
        # the store's read-only connections are sandboxed (no file written), and another
        # one to the same file in this process shares that sandboxed instance: read the
        # store attached to a connection of its own instead
        con, own, catalog = duckdb.connect(config=tk._connect_config()), True, "_tk_export"
        try:
            con.execute(f"ATTACH '{_q(Path(tk.path).resolve())}' AS {catalog} (READ_ONLY)")
        except duckdb.Error as err:
            con.close()
            raise InputError(f"{tk.path}: cannot read the store ({str(err).splitlines()[0]})") from err
    catalog = catalog or con.execute("SELECT current_database()").fetchall()[0][0]
    existed = dest.is_dir()
    try:
        create(dest)
    except BaseException as err:
        if own:
            con.close()
        if (full := _write_failed(dest, err)) is not None:
            if not existed:
                shutil.rmtree(dest, ignore_errors=True)
            raise full from err
        raise
    tmp = Path(tempfile.mkdtemp(prefix=".tracekit-export-", dir=dest))
    try:
        for rid in ids:
            write_run(con, catalog, rid, tmp, rid)
        runs_dir = tmp / "runs"
        for table_dir in sorted(p for p in tmp.iterdir() if p.name != "runs"):
            os.replace(table_dir, dest / table_dir.name)
        if ids:
            rows = _file_list(sorted(runs_dir.glob(f"run_id=*/{PART}")))
            con.execute(f"COPY (SELECT * FROM read_parquet({rows}, hive_partitioning = false) ORDER BY run_id) "
                        f"TO '{_q(dest / RUNS_FILE)}' (FORMAT parquet)")
    except BaseException as err:  # the folder as it was, new or empty: no dataset of tables without their runs
        shutil.rmtree(tmp, ignore_errors=True)
        for p in list(dest.iterdir()) if dest.is_dir() else []:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        if not existed:
            with contextlib.suppress(OSError):
                dest.rmdir()
        if (full := _write_failed(dest, err)) is not None:
            raise full from err
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if own:
            con.close()
    return ids
