"""The export's tables as Arrow, behind one interface (``Export``): the integer tables
decoded from the SQLite file's pages (``tracekit.ingest.sqlite_ints``: compiled, or its
NumPy twin where the compiled module is not built), everything else and whatever the
decoder declines through SQLite (ADBC's driver). Both give the same values; every
column must come back with the type the export declares, or the export is refused.
Nothing here knows what the tables mean."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa

from ...errors import InputError
from ...names import sql_ident
from .. import sqlite_ints
from ..arrow import strings

SQLITE_MAGIC = b"SQLite format 3\x00"

#: Every table's name, and every ordinary table's columns with their declared types, each
#: in one result row of SQL literals. Python's sqlite3 gives up the interpreter lock around
#: each step of a statement; with several ingests in threads, each step then waits to take
#: it back (8 threads: most of their waits for the lock were here when this took a step per
#: column, docs/performance.md, thirty-third session).
_TABLES_SQL = "SELECT group_concat(quote(name), ',') FROM sqlite_master WHERE type = 'table'"
_COLUMNS_SQL = """
    SELECT group_concat(quote(m.name) || ',' || quote(p.name) || ',' || quote(coalesce(p.type, '')), ',')
    FROM sqlite_master AS m, pragma_table_info(m.name) AS p
    WHERE m.type = 'table' AND m.sql NOT LIKE 'CREATE VIRTUAL TABLE%'
"""
_LITERAL = re.compile(r"'((?:[^']|'')*)'")

#: tables with more rows than this are read through SQLite in parallel parts (integer
#: columns only: where the page decoder declines them)
SPLIT_ROWS = 500_000

#: a column's declared type -> the Arrow types SQLite's reader gives for the values nsys writes
_DECLARED = {"INTEGER": pa.types.is_integer, "TEXT": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)}


def resolve_tables(names: list[str]) -> dict[str, str]:
    """Map base table name -> actual name, taking the highest ``_V<n>`` suffix.

    ``MEMCPY2``-style names are different tables, not versions: only an explicit
    ``_V<digits>`` suffix is a version.
    """
    best: dict[str, tuple[int, str]] = {}
    for name in names:
        m = re.fullmatch(r"(.+)_V(\d+)", name)
        base, ver = (m.group(1), int(m.group(2))) if m else (name, 1)
        if base not in best or ver > best[base][0]:
            best[base] = (ver, name)
    return {base: actual for base, (_, actual) in best.items()}


class Export:
    """An nsys SQLite export, opened read-only: its tables by base name (``tables``), their
    columns, and ``read``, which reads many tables' columns as Arrow at once."""

    def __init__(self, path: Path):
        self.path = path
        pending = sqlite_ints.pending_changes(path)
        if pending:
            raise InputError(f"{path}: beside it is {pending}; open it once with sqlite3, which settles "
                             f"them (sqlite3 {path} 'PRAGMA journal_mode=DELETE'), then ingest again")
        try:
            # immutable (as every read of the export): no locks, no -wal/-shm files created
            # beside the input, no journal looked for (pending_changes found none)
            self.sq = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        except sqlite_ints.ERRORS as err:
            raise InputError(f"{path}: not a readable SQLite database ({sqlite_ints.said(err)}); the file is truncated or corrupt") from err
        try:
            # (text nsys copied from the system as it was: a Windows user name in its code page)
            self.sq.text_factory = lambda b: b.decode("utf-8", "replace")
            names = _literals(self.sq.execute(_TABLES_SQL).fetchone()[0])
            found = _literals(self.sq.execute(_COLUMNS_SQL).fetchone()[0])
        except sqlite_ints.ERRORS as err:
            # (closed here, not by the garbage collector: sqlite_ints._schema says why)
            self.sq.close()
            raise InputError(f"{path}: not a readable SQLite database ({sqlite_ints.said(err)}); the file is truncated or corrupt") from err
        self.tables = resolve_tables(names)
        #: actual table name -> {column: declared type, upper case}; a virtual table's are
        #: read when first asked for
        self._types: dict[str, dict[str, str]] = {}
        for table, col, typ in zip(found[0::3], found[1::3], found[2::3], strict=True):
            self._types.setdefault(table, {})[col] = typ.upper()
        self._rows: dict[str, int | None] | None = None  # actual table name -> max(rowid), once asked
        self._settings: list[tuple[str, str]] | None = None  # META_DATA_CAPTURE's (name, value), once asked

    def _declared(self, actual: str) -> dict[str, str]:
        types = self._types.get(actual)
        if types is None:
            types = {r[1]: (r[2] or "").upper() for r in self.sq.execute(f'PRAGMA table_info({sql_ident(actual)})')}
            self._types[actual] = types
        return types

    def columns(self, base: str) -> set[str]:
        actual = self.tables.get(base)
        if actual is None:
            return set()
        return set(self._declared(actual))

    def declared_types(self, base: str) -> dict[str, str]:
        """Each column's declared type, upper case ('' where none is declared)."""
        return dict(self._declared(self.tables[base]))

    def row_estimate(self, base: str) -> int:
        actual = self.tables.get(base)
        if actual is None:
            return 0
        if self._rows is None:  # every ordinary table's at once, in one step (see _TABLES_SQL)
            tables = sorted(self._types)
            sql = "SELECT " + ", ".join(f'(SELECT max(rowid) FROM {sql_ident(t)})' for t in tables)
            try:
                self._rows = dict(zip(tables, self.sq.execute(sql).fetchone(), strict=True)) if tables else {}
            except sqlite3.Error:  # (a table without rowids: each asked for alone)
                self._rows = {}
        if actual not in self._rows:
            self._rows[actual] = self.sq.execute(f'SELECT max(rowid) FROM {sql_ident(actual)}').fetchone()[0]
        return self._rows[actual] or 0

    def names_starting(self, prefix: str) -> bool:
        """Whether a string of StringIds starts with ``prefix`` (case-sensitive; a scan, no read)."""
        actual = self.tables.get("StringIds")
        if actual is None:
            return False
        glob = "".join(f"[{c}]" if c in "*?[" else c for c in prefix) + "*"
        return self.sq.execute(f'SELECT 1 FROM "{actual}" WHERE value GLOB ? LIMIT 1', [glob]).fetchone() is not None

    def integer_columns(self, base: str, cols: list[str]) -> bool:
        """Whether every column in ``cols`` is declared INTEGER (safe to read in parts)."""
        types = self.declared_types(base)
        return all(types.get(c) == "INTEGER" for c in cols)

    def meta(self) -> dict:
        """The export's META_DATA_EXPORT (EXPORT_META_DATA before nsys 2023: schema and
        product versions, the rest as ``export``), session start time and when the capture
        stopped."""
        meta: dict = {}
        table = next((t for t in ("META_DATA_EXPORT", "EXPORT_META_DATA") if t in self.tables), None)  # (before 2023)
        if table is not None and {"name", "value"} <= self.columns(table):
            rows = dict(self.sq.execute(f'SELECT name, value FROM "{self.tables[table]}"').fetchall())
            meta["export_schema_version"] = rows.get("EXPORT_SCHEMA_VERSION")
            meta["tool_version"] = rows.get("EXPORT_PRODUCT_VERSION")
            meta["export"] = {k: v for k, v in rows.items() if not k.startswith("EXPORT_PARAM")}
        if "TARGET_INFO_SESSION_START_TIME" in self.tables:
            row = self.sq.execute(f'SELECT * FROM {sql_ident(self.tables["TARGET_INFO_SESSION_START_TIME"])}').fetchone()
            if row:
                meta["session_start_utc_ns"] = row[0]
        if "ANALYSIS_DETAILS" in self.tables and "stopTime" in self.columns("ANALYSIS_DETAILS"):
            # when the capture stopped, ns since the session's start: with the start, the span of
            # time the capture ran (schema_runs.sql's rank_captures tells captures of a job apart by it)
            row = self.sq.execute(f'SELECT max(stopTime) FROM {sql_ident(self.tables["ANALYSIS_DETAILS"])}').fetchone()
            if row and isinstance(row[0], int):
                meta["session_stop_ns"] = row[0]
        return meta

    def _capture_settings(self, name: str, like: bool = False) -> list[str]:
        """The values of META_DATA_CAPTURE's settings named ``name`` (``like``: matching it as
        SQL's LIKE does: ``%`` any run, ``_`` one character, case-insensitive), in the table's
        order; the table is read once. Empty where the export has no such table (older nsys)."""
        if self._settings is None:
            meta = self.tables.get("META_DATA_CAPTURE")
            self._settings = [] if meta is None or not {"name", "value"} <= self.columns("META_DATA_CAPTURE") else [
                (str(n), str(v)) for n, v in self.sq.execute(f'SELECT name, value FROM "{meta}"').fetchall()]
        if not like:
            return [v for n, v in self._settings if n == name]
        pattern = re.compile("".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in name), re.I)
        return [v for n, v in self._settings if pattern.fullmatch(n)]

    def capture_events(self) -> set[str]:
        """The kinds of event nsys was told to trace (META_DATA_CAPTURE's
        CAPTURE_EVENT_TYPE rows: Cuda, NvtxEvents, OSRuntime, ...), UvmCpuPageFaults /
        UvmGpuPageFaults where a profiled process collected Unified Memory page faults
        (PROCESS_<n>:COLLECT_UVM_CPU_PAGE_FAULTS true, ...), CpuSamples where nsys sampled
        the CPU (LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES true), GpuMemoryUsage where a
        process recorded its GPU memory's allocations (PROCESS_<n>:COLLECT_GPU_MEMORY_USAGE true),
        CudaBacktraces where it unwound CUDA API calls (--cudabacktrace:
        PROCESS_<n>:CUDA_BACKTRACE_OPTIONS:COLLECT_<kind>_BACKTRACES true, with the CPU sampled)
        and PythonSamples where it sampled the Python threads' stacks (--python-sampling:
        PYTHON_BACKTRACE_SAMPLING_OPTIONS:COLLECT_SAMPLES true);
        empty where the export does not say (older nsys versions)."""
        said = set(self._capture_settings("CAPTURE_EVENT_TYPE"))
        if not said:  # (the kinds of event say whether the export tells what was traced)
            return said
        for side in ("CPU", "GPU"):
            if "true" in self._capture_settings(f"PROCESS%:COLLECT_UVM_{side}_PAGE_FAULTS", like=True):
                said.add(f"Uvm{side.title()}PageFaults")
        if "true" in self._capture_settings("LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES"):
            said.add("CpuSamples")
        if "true" in self._capture_settings("PROCESS%:COLLECT_GPU_MEMORY_USAGE", like=True):
            said.add("GpuMemoryUsage")
        if ("CpuSamples" in said
                and "true" in self._capture_settings("PROCESS%:CUDA_BACKTRACE_OPTIONS:COLLECT_%_BACKTRACES", like=True)):
            said.add("CudaBacktraces")  # (nsys unwinds CUDA API calls only where it samples the CPU)
        if "true" in self._capture_settings("PYTHON_BACKTRACE_SAMPLING_OPTIONS:COLLECT_SAMPLES"):
            said.add("PythonSamples")
        return said

    def capture_options(self) -> dict[str, str]:
        """The capture options that change what an export records, as META_DATA_CAPTURE says
        them (empty where it does not): ``--cuda-graph-trace``, nsys's --cuda-graph-trace (Graph:
        a graph launch is one op; Node: each of its kernels and copies), and
        ``--cuda-um-cpu-page-faults`` / ``--cuda-um-gpu-page-faults`` (true: each Unified Memory
        page fault recorded, which slows the faults down) and ``--cuda-memory-usage`` (true: each
        allocation and free of GPU memory recorded), the processes' values joined where they
        differ, and ``--sample`` (process-tree or system-wide: the CPU sampled, with its
        stacks unwound, which costs host time; none), where the export says what was traced."""
        out = {}
        events = self.capture_events()
        if events:  # (nsys writes its sampling settings only where it sampled)
            modes = [{"ProcessTree": "process-tree", "SystemWide": "system-wide"}.get(v, v)
                     for v in self._capture_settings("LINUX_PERF_OPTIONS:COLLECTION_MODE")]
            out["--sample"] = ", ".join(modes) if "CpuSamples" in events and modes else "none"
        for option, name in (("--cuda-graph-trace", "%CUDA_GRAPH_TRACE_OPTIONS:MODE"),
                             ("--cuda-um-cpu-page-faults", "PROCESS%:COLLECT_UVM_CPU_PAGE_FAULTS"),
                             ("--cuda-um-gpu-page-faults", "PROCESS%:COLLECT_UVM_GPU_PAGE_FAULTS"),
                             ("--cuda-memory-usage", "PROCESS%:COLLECT_GPU_MEMORY_USAGE")):
            values = sorted(set(self._capture_settings(name, like=True)))
            if values:
                out[option] = ", ".join(values)
        return out

    def arrow(self, base: str, cols: list[str], rowids: tuple[int, int] | None = None) -> pa.Table:
        """Read columns of a table (rows with rowid in [lo, hi) if given) through SQLite
        as Arrow, on a connection of its own (thread-safe)."""
        actual = self.tables[base]
        sql = f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{actual}"'
        if rowids is not None:
            sql += f" WHERE rowid >= {int(rowids[0])} AND rowid < {int(rowids[1])}"
        sql += " ORDER BY rowid"  # the table's own order (a scan of an index could differ)
        return self.query(sql, actual)

    def query(self, sql: str, table: str) -> pa.Table:
        """The rows of a SELECT over the export (of ``table``, as errors name it) as Arrow,
        through SQLite on a connection of its own (thread-safe)."""
        # ADBC's low-level API: its DB-API module imports pandas and Polars where installed
        # (0.14–0.19 s of every ingest command's start), and nothing of it is needed here
        import adbc_driver_manager as adm
        import adbc_driver_sqlite

        try:
            # immutable: see __init__
            with contextlib.ExitStack() as opened:
                db = opened.enter_context(adbc_driver_sqlite.connect(f"file:{self.path}?mode=ro&immutable=1"))
                conn = opened.enter_context(adm.AdbcConnection(db))
                stmt = opened.enter_context(adm.AdbcStatement(conn))
                # The driver infers each column's type from its first batch: a column that is
                # NULL throughout that batch and text later (NVTX text after registered
                # strings) fails with "type mismatch". One batch holding the whole table
                # (read whole anyway) makes inference see every row.
                stmt.set_options(**{"adbc.sqlite.query.batch_rows": "2000000000"})
                stmt.set_sql_query(sql)
                stream, _ = stmt.execute_query()
                return _valid_text(pa.RecordBatchReader.from_stream(stream).read_all())
        except Exception as err:  # ADBC raises its own DatabaseError types
            raise InputError(f"{self.path}: cannot read table {table} ({str(err).splitlines()[0]}); the export is truncated or corrupt") from err

    def read(self, jobs: dict[str, tuple[str, list[str]]]) -> dict[str, pa.Table]:
        """Read ``jobs`` (name -> (base table, columns)) as Arrow tables by name, each in
        the table's rowid order, every table at once.

        The big tables (kernels, API calls) dominate, and they hold integers only: those
        are decoded from the file's pages (several times faster than SQLite's call per
        value), chunks on every core. Tables with text, and any table that decoder
        declines, go through SQLite (each read on a connection of its own; ADBC
        releases the GIL while it reads); a declined big table as parallel rowid ranges."""
        path, workers = self.path, min(4, os.cpu_count() or 2)
        # numpy imports numpy.ma on first use of the attribute, which Arrow's conversions look
        # up; two threads doing that at once recurse in numpy's __getattr__ (RecursionError
        # seen once in the suite): imported here, before the threads
        import numpy.ma  # noqa: F401

        def decode(base: str, cols: list[str]) -> pa.Table | None:
            try:
                return sqlite_ints.read_int_columns(path, self.tables[base], cols, threads=workers)
            except sqlite_ints.Unsupported:
                return None
            except sqlite_ints.Changed as err:
                raise InputError(f"{path}: {err}; ingest it again once nothing writes to it") from err

        pieces: dict[str, list[pa.Table]] = {}
        biggest_first = sorted(jobs.items(), key=lambda j: -self.row_estimate(j[1][0]))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            # every table at once, biggest first: the decoder's threads and the SQLite
            # readers keep all cores busy between the decoder's Python steps
            futures = [(name, base, cols, pool.submit(decode, base, cols) if self.integer_columns(base, cols)
                        else pool.submit(self.arrow, base, cols)) for name, (base, cols) in biggest_first]
            declined = []
            for name, base, cols, fut in futures:
                if (tbl := fut.result()) is not None:
                    pieces[name] = [tbl]
                else:
                    declined.append((name, base, cols))
            parts = []
            for name, base, cols in declined:
                n = self.row_estimate(base)
                if n <= SPLIT_ROWS:
                    parts.append((name, pool.submit(self.arrow, base, cols)))
                    continue
                step = n // workers + 1
                parts += [(name, pool.submit(self.arrow, base, cols, (i * step, (i + 1) * step)))
                          for i in range(workers)]
            for name, fut in parts:
                pieces.setdefault(name, []).append(fut.result())
        self._check_types(pieces, jobs)
        out = {}
        for name, ts in pieces.items():
            nonempty = [t for t in ts if t.num_rows] or ts[:1]
            out[name] = nonempty[0] if len(nonempty) == 1 else pa.concat_tables(nonempty, promote_options="default")
        return out

    def _check_types(self, pieces: dict[str, list[pa.Table]], jobs: dict[str, tuple[str, list[str]]]) -> None:
        """Every column came back with the type the export declares; one NULL throughout
        (an empty table: SQLite's reader then guesses a type) is given that type.
        SQLite keeps a value of another type written into a column (nsys never writes one);
        the page decoder declines such a table, and SQLite's reader types the column by it."""
        for name, tbls in pieces.items():
            base, cols = jobs[name]
            declared = self.declared_types(base)
            for i, col in ((i, c) for i in range(len(tbls)) for c in cols):
                tbl = tbls[i]
                typ, fits = tbl.schema.field(col).type, _DECLARED.get(declared.get(col))
                if fits and not fits(typ) and tbl.column(col).null_count == tbl.num_rows:
                    want = pa.int64() if declared[col] == "INTEGER" else pa.string()
                    tbls[i] = tbl.set_column(tbl.schema.get_field_index(col), pa.field(col, want),
                                             pa.nulls(tbl.num_rows, want))
                elif fits and not fits(typ):
                    what = ("integers" if pa.types.is_integer(typ) else "real numbers" if pa.types.is_floating(typ)
                            else "text" if pa.types.is_string(typ) or pa.types.is_large_string(typ) else "blobs")
                    raise InputError(f"{self.path}: table {self.tables[base]} column {col} holds {what} where nsys "
                                     f"writes {'integers' if declared[col] == 'INTEGER' else 'text'}; the export "
                                     "is corrupt")

    def close(self):
        self.sq.close()


def _literals(text: str | None) -> list[str]:
    """The values of a list of SQL string literals (``'a','it''s'``; None: none)."""
    return [m.replace("''", "'") for m in _LITERAL.findall(text or "")]


def _valid_text(tbl: pa.Table) -> pa.Table:
    """``tbl`` with every text column valid UTF-8. SQLite stores the bytes it is given: a
    program that names NVTX ranges through the ASCII API in another encoding (Latin-1)
    leaves bytes that are not UTF-8, which Arrow's readers pass on and DuckDB refuses.
    Such bytes become U+FFFD, as Python's ``errors="replace"`` decodes them; valid
    columns are only checked."""
    for i, field in enumerate(tbl.schema):
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            continue
        chunks, bad = [], False
        for chunk in tbl.column(i).chunks:
            try:
                chunk.validate(full=True)
                chunks.append(chunk)
            except pa.ArrowInvalid:
                bad = True
                raw = chunk.cast(pa.large_binary() if pa.types.is_large_string(field.type) else pa.binary())
                chunks.append(strings([None if b is None else b.decode("utf-8", "replace") for b in raw.to_pylist()])
                              .cast(field.type))
        if bad:
            tbl = tbl.set_column(i, field, pa.chunked_array(chunks, field.type))
    return tbl
