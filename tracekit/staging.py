"""Ingest in two steps: prepare a run outside the store, then land it in one transaction.

``prepare`` parses and derives one export into a private staging database (a DuckDB
file of its own, created with the store's schema by the ordinary ingest), so it needs
no lock on the store and can run in another process or on another machine. ``land``
copies the staged run's rows into the store in one transaction: the run gets the
store's next ``run_id`` and the names it brings get ``_strings`` ids exactly as a
direct ingest would give them (new names after the store's last id, in name order), so
landing staged runs in input order gives the store a direct serial ingest gives.

Distributed ingest (``tracekit.distributed``) prepares in Dask workers and lands in the
main process. A serial ``tracekit ingest FILE`` stays direct: staging writes every row
twice (into the staging database, then into the store), 4.38 against 3.15 CPU-s for an
export of 6 M rows (docs/performance.md), so the single-file ingest would be slower.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from .errors import InputError
from .store import CAPTURE_STATUS, IngestResult, Tracekit, commit

#: A column whose name ends with this holds a ``_strings`` id (schema_nsys.sql):
#: landing maps those ids from the staging database's to the store's.
STRING_ID_SUFFIX = "name_id"
#: Tables that are not per-run rows: the store's own facts and the shared names.
_NOT_RUN_TABLES = ("_store", "runs", "_strings")


@dataclass
class Staged:
    """A run prepared in a staging database (``db``), ready to land, or a source the
    store already holds (``existing``)."""

    source: str                 # the file as given
    db: Path | None             # staging database with one run (run_id 1)
    digest: str | None = None
    name: str | None = None
    kind: str | None = None
    rows: dict[str, int] = field(default_factory=dict)
    asked_name: str | None = None  # the name asked for (None: the source's own)
    asked_params: dict | None = None  # the parameters asked for

    def discard(self) -> None:
        """Delete the staging database (its folder is private to it)."""
        if self.db is not None:
            shutil.rmtree(self.db.parent, ignore_errors=True)
            self.db = None


def prepare(source: str | os.PathLike, *, name: str | None = None, params: dict | None = None,
            workdir: str | os.PathLike | None = None, known: frozenset[str] = frozenset(),
            threads: int | None = None) -> Staged:
    """Parse and derive ``source`` (anything ``tracekit ingest`` takes) into a new
    staging database under ``workdir`` (default: the system's temporary folder).

    ``known`` holds content hashes the destination already has: such a source is not
    parsed (the returned ``Staged`` has no ``db``). ``threads`` caps DuckDB's threads
    (several workers on one machine share its cores)."""
    source = Path(source)
    folder = Path(tempfile.mkdtemp(prefix="tracekit-stage-", dir=workdir))
    db = folder / "run.duckdb"
    try:
        with Tracekit(db) as stage:  # (closed before its folder goes, on an error too)
            res = ingest_into(stage, source, name=name, params=params, known=known, threads=threads)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if res.skipped:  # a hash the destination holds
        shutil.rmtree(folder, ignore_errors=True)
        return Staged(str(source), None, res.digest, asked_name=name, asked_params=params)
    return Staged(str(source), db, res.digest, res.name, res.kind, res.rows, asked_name=name, asked_params=params)


def ingest_into(stage: Tracekit, source: Path, *, name: str | None, params: dict | None,
                known: frozenset[str], threads: int | None) -> IngestResult:
    """Ingest ``source`` into the staging store ``stage`` (a file, or ``:memory:``) as
    ``tracekit ingest`` would; ``known`` hashes skipped."""
    if threads:
        stage.con.execute(f"SET threads = {int(threads)}")
    stage.skip_hashes = known
    return stage.ingest(source, name=name, params=params)


def run_tables(con, catalog: str) -> list[str]:
    """The per-run tables of a database attached as ``catalog`` (views excluded)."""
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
        "ORDER BY table_name", [catalog]).fetchall()
    return [r[0] for r in rows if r[0] not in _NOT_RUN_TABLES]


def string_id_columns(con, catalog: str, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = 'main' "
        "AND table_name = ? ORDER BY column_index", [catalog, table]).fetchall()
    return [r[0] for r in rows if r[0].endswith(STRING_ID_SUFFIX)]


def land(tk: Tracekit, staged: Staged) -> IngestResult:
    """Copy ``staged``'s run into the store ``tk`` in one transaction, as ``tk.ingest``
    would have written it: a source whose content the store holds already (alone, or
    as part of a run folder's run) is that run, renamed if a name was asked for; a run
    folder takes the place of the same capture's earlier run (``Tracekit.folder_place``);
    a new run's name is settled here (``Tracekit.default_name``).
    The staging database is left as it is (``staged.discard()`` deletes it)."""
    if staged.db is None:
        return _existing_or_fail(tk, staged)
    con = tk.con
    tk._note_writer(f"`tracekit ingest {staged.source}`")  # what a reader that meets the lock is told
    if (found := tk._existing(staged.digest)) is not None:
        return tk._renamed(found, staged.asked_name, staged.asked_params, staged.source)
    alias = "_tk_stage"
    con.execute(f"ATTACH '{_sql_path(staged.db)}' AS {alias} (READ_ONLY)")
    try:
        replace, absorbs, name = None, (), None
        hashes = [h for (h,) in con.execute(f"SELECT content_hash FROM {alias}.run_sources ORDER BY rowid").fetchall()]
        same, earlier = tk.folder_place(str(Path(staged.source).resolve()), hashes)
        if same is not None:
            return tk._renamed(same, staged.asked_name, staged.asked_params, staged.source)
        if earlier:
            replace, absorbs = earlier[0].run_id, tuple(r.run_id for r in earlier[1:])
            name = staged.asked_name or earlier[0].name
        if staged.asked_name is not None:
            tk.check_name_free(staged.asked_name, replace, *absorbs)
        if name is None:  # the run's own name (staged alone) unless the store or the command has it
            name = staged.asked_name or tk.default_name(staged.name, staged.source)
        con.execute("BEGIN TRANSACTION")
        try:
            if replace is not None:
                tk._delete_rows(replace, *absorbs)
            result = _copy_run(con, alias, staged, replace, name)
            result.absorbed = absorbs
            commit(con)
            tk._created = False
        except BaseException as err:
            con.execute("ROLLBACK")
            tk._discard_if_new()
            if isinstance(err, duckdb.Error):
                raise InputError(f"{staged.source}: cannot land the prepared run ({str(err).splitlines()[0]}); "
                                 "nothing was written") from err
            raise
    finally:
        if tk._con is not None:
            con.execute(f"DETACH {alias}")
    return result


def _existing_or_fail(tk: Tracekit, staged: Staged) -> IngestResult:
    found = tk._existing(staged.digest) if staged.digest else None
    if found is None:  # known to the caller when it was prepared, gone since
        raise InputError(f"{staged.source}: was skipped as already ingested, but the store no longer holds it; "
                         "ingest it again")
    return tk._renamed(found, staged.asked_name, staged.asked_params, staged.source)


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def _copy_run(con, alias: str, staged: Staged, replace: int | None, name: str | None) -> IngestResult:
    """The staged run's rows as run ``replace`` (its rows deleted already), else as the
    store's next run, named ``name`` if given."""
    run_id = replace if replace is not None else con.execute("SELECT nextval('run_id_seq')").fetchall()[0][0]
    (src_run,) = con.execute(f"SELECT run_id FROM {alias}.runs").fetchall()[0]
    renamed = ", $name AS name" if name is not None else ""
    con.execute(f"INSERT INTO runs BY NAME SELECT * REPLACE ({int(run_id)}::INTEGER AS run_id{renamed}) "
                f"FROM {alias}.runs", {"name": name} if name is not None else None)
    ids = _merge_strings(con, alias)
    have = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'"
    ).fetchall()}
    rows: dict[str, int] = {}
    for table in run_tables(con, alias):
        if table not in have:  # a plugin's table without DDL: as the staging database made it
            con.execute(f'CREATE TABLE "{table}" AS SELECT * FROM {alias}."{table}" LIMIT 0')
        new_cols = [f"{int(run_id)}::INTEGER AS run_id"]
        if ids is not None:
            new_cols += [f'$ids["{c}"] AS "{c}"' for c in string_id_columns(con, alias, table)]
        params = {"ids": ids} if ids is not None and len(new_cols) > 1 else None
        n = con.execute(f'INSERT INTO "{table}" BY NAME SELECT * REPLACE ({", ".join(new_cols)}) '
                        f'FROM {alias}."{table}" WHERE run_id = {int(src_run)}', params).fetchall()
        count = int(n[0][0]) if n else 0
        if count:
            rows[table] = count
    name, kind, source, status, error = con.execute(
        f"SELECT name, kind, source_path, {CAPTURE_STATUS} FROM runs WHERE run_id = ?", [run_id]).fetchall()[0]
    return IngestResult(int(run_id), name, kind, source, False, staged.rows or rows, replaced=replace,
                        digest=staged.digest, status=status, error=error)


def _merge_strings(con, alias: str) -> list[int] | None:
    """Add the staged names the store lacks (ids after the store's last one, in name
    order, as a direct ingest adds them) and return the staged-id -> store-id list
    (``ids[staged_id]``, 1-based), or None where every id maps to itself."""
    if "_strings" not in {r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [alias]).fetchall()}:
        return None
    n, top = con.execute(f"SELECT count(*), coalesce(max(string_id), 0) FROM {alias}._strings").fetchall()[0]
    if n == 0:
        return None
    if n != top:  # a fresh staging database numbers its names 1..n
        raise InputError(f"staging database {alias}: string ids are not 1..{n}")
    con.execute(f"""
        INSERT INTO _strings
        SELECT (SELECT coalesce(max(string_id), 0) FROM _strings) + row_number() OVER (ORDER BY value), value
        FROM {alias}._strings WHERE value NOT IN (SELECT value FROM _strings)
    """)
    ids = con.execute(f"""
        SELECT list(m.string_id ORDER BY s.string_id)
        FROM {alias}._strings s JOIN _strings m USING (value)
    """).fetchall()[0][0]
    if ids == list(range(1, n + 1)):
        return None
    return ids


def prepare_task(source: str, index: int, **kwargs) -> Staged:
    """``prepare`` as a distributed ingest's task (``index``: the file's place in the input)."""
    return prepare(source, **kwargs)


class StoreDestination:
    """Where distributed ingest lands runs: a DuckDB store, held open while prepared
    runs land one after another and closed while the next one is long in coming
    (``pause``, tracekit.distributed.PAUSE_AFTER_S), so that readers can open it and see
    every landed run while the others are being prepared."""

    task = staticmethod(prepare_task)

    def __init__(self, tk: Tracekit):
        self.tk = tk
        self.stage_parent = tk.path.resolve().parent if str(tk.path) != ":memory:" else None

    def known_hashes(self) -> frozenset[str]:
        if str(self.tk.path) != ":memory:" and not self.tk.path.exists():
            return frozenset()
        rows = self.tk.con.execute("SELECT source_hash FROM runs WHERE source_hash IS NOT NULL "
                                   "UNION SELECT content_hash FROM run_sources WHERE content_hash IS NOT NULL").fetchall()
        self._release()
        return frozenset(r[0] for r in rows)

    def land(self, staged: Staged) -> IngestResult:
        return land(self.tk, staged)

    def ingest_here(self, source: str, index: int, *, name=None, params=None, workdir=None,
                    known=frozenset()) -> IngestResult:
        """``source`` ingested straight into the store, as a serial ingest does."""
        return ingest_into(self.tk, Path(source), name=name, params=params, known=frozenset(), threads=None)

    def pause(self) -> None:
        self._release()

    def finish(self) -> None:
        self._release()

    def _release(self) -> None:
        if str(self.tk.path) != ":memory:":
            self.tk._release()
