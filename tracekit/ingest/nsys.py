"""Nsight Systems SQLite exports -> store tables.

The export is read as Arrow (no DuckDB extension to download, no Python loop per row):
the big all-integer tables decoded from the file's pages with NumPy (``sqlite_ints``),
the others through ADBC's SQLite driver, concurrently; then reshaped by SQL in
the store's own ingest transaction, straight into the store tables: names
resolved from ``StringIds``, pid/tid decoded from ``globalTid``/``globalPid``, CUDA
API ``_vNNNN`` suffixes stripped the way ``nsys stats`` does, NVTX domains resolved,
NVTX nesting (depth, parent) computed, and every GPU operation attributed to the
NVTX ranges that enclose its launching API call on the same thread (the
``nvtx_gpu_proj_sum`` rule), so that the NVTX queries are plain aggregations.

Schemas differ between nsys releases: columns are mapped by presence, never by
version number. A missing optional column becomes NULL; a missing required column
is a one-line ``InputError`` naming the table, the column and the export version.
Tables are created lazily by nsys: a missing table means an empty store table.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import InputError
from . import Parsed, containers, sqlite_ints

KIND = "nsys"

SQLITE_MAGIC = b"SQLite format 3\x00"

#: tables with more rows than this are read in parallel parts (integer columns only)
SPLIT_ROWS = 500_000

try:  # the nesting of NVTX ranges in C (optional, like the page decoder)
    from tracekit.ingest import _nest as _nest_native
except ImportError:  # not built: NumPy does it
    _nest_native = None

# NVTX event types (ENUM_NSYS_EVENT_TYPE)
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND, NVTX_DOMAIN = (
    34, 59, 60, 70, 71, 75,
)

# nsys stats strips a trailing _vNNNN from CUDA API names (substr(name, -6, 2) = '_v')
_STRIP = "CASE WHEN substr({0}, -6, 2) = '_v' THEN substr({0}, 1, length({0}) - 6) ELSE {0} END"

#: the raw columns the idle gaps of GPU ops are computed from; a stream is the process's
#: (globalPid) stream of a context (either read as 0 where a table lacks it), a device is
#: shared by every process
_GAP_INPUTS = ["start", "end", "deviceId", "streamId"]
_GAP_SCOPE = ("deviceId", "globalPid", "contextId", "streamId")
#: the GPU ops of nsys's reports (its projection of NVTX ranges counts these)
_OP_TABLES = ("kernels", "memcpy", "memset")
#: a missing first op start / last op end in the NumPy arrays of the NVTX projection
#: (the extremes, so that min and max pass over them; NULL once written)
_NO_START, _NO_END = np.iinfo(np.int64).max, np.iinfo(np.int64).min
#: every table of GPU work: also whole CUDA graph executions (--cuda-graph-trace=graph)
_GAP_TABLES = (*_OP_TABLES, "graph_execs")

# (target column, SQL expression over the raw table `r`, raw columns it needs, DuckDB type)
# A column whose raw inputs are absent becomes NULL of its type; `required` lists the
# raw columns without which the table cannot be ingested at all.
_GPU_COMMON = [
    ("start_ns", "r.start", ["start"], "BIGINT"),
    ("end_ns", 'r."end"', ["end"], "BIGINT"),
    ("dur_ns", 'r."end" - r.start', ["start", "end"], "BIGINT"),
    ("device_id", "r.deviceId", ["deviceId"], "BIGINT"),
    ("context_id", "r.contextId", ["contextId"], "BIGINT"),
    ("stream_id", "r.streamId", ["streamId"], "BIGINT"),
    ("correlation_id", "r.correlationId", ["correlationId"], "BIGINT"),
    ("global_pid", "r.globalPid", ["globalPid"], "BIGINT"),
    ("pid", "(r.globalPid >> 24) & 16777215", ["globalPid"], "INTEGER"),
    ("graph_node_id", "r.graphNodeId", ["graphNodeId"], "BIGINT"),
]
# idle time before a GPU op on its stream and on its device (computed by _idle_gaps)
_GAPS = [
    ("stream_gap_ns", "r._tk_stream_gap", _GAP_INPUTS, "BIGINT"),
    ("device_gap_ns", "r._tk_device_gap", _GAP_INPUTS, "BIGINT"),
]

# The API call that launched a GPU op (same correlation id, same process), found by
# _add_launches and carried as ``_tk_api_*`` columns of the raw op tables.
_API = "@CUPTI_ACTIVITY_KIND_RUNTIME"
_LAUNCH = [
    ("launch_global_tid", "r._tk_api_tid", [_API], "BIGINT"),
    ("launch_tid", "r._tk_api_tid & 16777215", [_API], "INTEGER"),
    ("api_start_ns", "r._tk_api_start", [_API], "BIGINT"),
    ("api_end_ns", "r._tk_api_end", [_API], "BIGINT"),
    ("api_name", "an.stripped", [_API], "VARCHAR"),
    # innermost push/pop NVTX range around the launch call on its thread (_innermost_ranges)
    ("nvtx_range_id", "r._tk_api_range", [_API], "BIGINT"),
]
_LAUNCH_JOINS = {"an": (_API, "LEFT JOIN _nsys_names an ON an.id = r._tk_api_name")}
# kernels keep the launch API's name as a _strings id (see schema_nsys.sql)
_LAUNCH_IDS = [c if c[0] != "api_name" else ("api_name_id", "an.stripped_sid", c[2], "BIGINT") for c in _LAUNCH]

SPECS = {
    "kernels": dict(
        source="CUPTI_ACTIVITY_KIND_KERNEL",
        table="_kernels",
        required=["start", "end", "correlationId", "globalPid"],
        # dur_ns, pid and launch_tid are computed by the kernels view (schema_nsys.sql)
        columns=[c for c in _GPU_COMMON if c[0] not in ("dur_ns", "pid")] + [
            ("name_id", "coalesce(sd.sid, ss.sid)", ["demangledName|shortName"], "BIGINT"),
            ("short_name_id", "ss.sid", ["shortName"], "BIGINT"),
            ("grid_x", "r.gridX", ["gridX"], "INTEGER"),
            ("grid_y", "r.gridY", ["gridY"], "INTEGER"),
            ("grid_z", "r.gridZ", ["gridZ"], "INTEGER"),
            ("block_x", "r.blockX", ["blockX"], "INTEGER"),
            ("block_y", "r.blockY", ["blockY"], "INTEGER"),
            ("block_z", "r.blockZ", ["blockZ"], "INTEGER"),
            ("registers_per_thread", "r.registersPerThread", ["registersPerThread"], "INTEGER"),
            ("static_smem_bytes", "r.staticSharedMemory", ["staticSharedMemory"], "INTEGER"),
            ("dynamic_smem_bytes", "r.dynamicSharedMemory", ["dynamicSharedMemory"], "INTEGER"),
        ] + [c for c in _LAUNCH_IDS if c[0] != "launch_tid"] + _GAPS,
        joins={
            "sd": ("demangledName", "LEFT JOIN _nsys_names sd ON sd.id = r.demangledName"),
            "ss": ("shortName", "LEFT JOIN _nsys_names ss ON ss.id = r.shortName"),
            **_LAUNCH_JOINS,
        },
    ),
    "api_calls": dict(
        source="CUPTI_ACTIVITY_KIND_RUNTIME",
        table="_api_calls",
        required=["start", "end", "globalTid", "correlationId"],
        # dur_ns, global_pid, pid and tid are computed by the api_calls view (schema_nsys.sql)
        columns=[
            ("start_ns", "r.start", ["start"], "BIGINT"),
            ("end_ns", 'r."end"', ["end"], "BIGINT"),
            ("global_tid", "r.globalTid", ["globalTid"], "BIGINT"),
            ("correlation_id", "r.correlationId", ["correlationId"], "BIGINT"),
            # nsys stats strips a trailing _vNNNN (substr(name, -6, 2) = '_v')
            ("name_id", "sn.stripped_sid", ["nameId"], "BIGINT"),
            ("raw_name_id", "sn.sid", ["nameId"], "BIGINT"),
            ("return_value", "r.returnValue", ["returnValue"], "BIGINT"),
        ],
        joins={"sn": ("nameId", "LEFT JOIN _nsys_names sn ON sn.id = r.nameId")},
    ),
    "memcpy": dict(
        source="CUPTI_ACTIVITY_KIND_MEMCPY",
        required=["start", "end", "correlationId", "globalPid"],
        columns=_GPU_COMMON + [
            ("bytes", "r.bytes", ["bytes"], "BIGINT"),
            ("copy_kind", "r.copyKind", ["copyKind"], "INTEGER"),
            ("operation", "'[CUDA memcpy ' || ek.label || ']'", ["copyKind"], "VARCHAR"),
            ("src_kind", "es.label", ["srcKind"], "VARCHAR"),
            ("dst_kind", "ed.label", ["dstKind"], "VARCHAR"),
        ] + _LAUNCH + _GAPS,
        joins={
            **_LAUNCH_JOINS,
            "ek": ("copyKind", "LEFT JOIN _nsys_enum_memcpy ek ON ek.id = r.copyKind"),
            "es": ("srcKind", "LEFT JOIN _nsys_enum_memkind es ON es.id = r.srcKind"),
            "ed": ("dstKind", "LEFT JOIN _nsys_enum_memkind ed ON ed.id = r.dstKind"),
        },
    ),
    "memset": dict(
        source="CUPTI_ACTIVITY_KIND_MEMSET",
        required=["start", "end", "correlationId", "globalPid"],
        columns=_GPU_COMMON + [
            ("bytes", "r.bytes", ["bytes"], "BIGINT"),
            ("value", "r.value", ["value"], "INTEGER"),
            ("operation", "'[CUDA memset]'", [], "VARCHAR"),
            ("mem_kind", "em.label", ["memKind"], "VARCHAR"),
        ] + _LAUNCH + _GAPS,
        joins={"em": ("memKind", "LEFT JOIN _nsys_enum_memkind em ON em.id = r.memKind"), **_LAUNCH_JOINS},
    ),
    # a CUDA graph launch traced as one GPU op (nsys --cuda-graph-trace=graph, the default):
    # its kernels, copies and memsets are not recorded one by one
    "graph_execs": dict(
        source="CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        required=["start", "end", "correlationId", "globalPid"],
        columns=[c for c in _GPU_COMMON if c[0] != "graph_node_id"] + [
            ("graph_id", "r.graphId", ["graphId"], "BIGINT"),
            ("graph_exec_id", "r.graphExecId", ["graphExecId"], "BIGINT"),
        ] + _LAUNCH + _GAPS,
        joins=dict(_LAUNCH_JOINS),
    ),
    "syncs": dict(
        source="CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        required=["start", "end"],
        columns=[c for c in _GPU_COMMON if c[0] != "graph_node_id"] + [
            ("sync_type", "et.label", ["syncType"], "VARCHAR"),
            ("event_id", "r.eventId", ["eventId"], "BIGINT"),
        ],
        joins={"et": ("syncType", "LEFT JOIN _nsys_enum_sync et ON et.id = r.syncType")},
    ),
    "gpus": dict(
        source="TARGET_INFO_GPU",
        required=["id"],
        columns=[
            ("device_id", "coalesce(cd.cudaId, r.id)", ["id"], "BIGINT"),
            ("name", "r.name", ["name"], "VARCHAR"),
            ("chip_name", "r.chipName", ["chipName"], "VARCHAR"),
            ("bus_location", "r.busLocation", ["busLocation"], "VARCHAR"),
            ("uuid", "r.uuid", ["uuid"], "VARCHAR"),
            ("sm_count", "r.smCount", ["smCount"], "INTEGER"),
            ("cc_major", "r.computeMajor", ["computeMajor"], "INTEGER"),
            ("cc_minor", "r.computeMinor", ["computeMinor"], "INTEGER"),
            ("memory_bytes", "r.totalMemory", ["totalMemory"], "BIGINT"),
            ("memory_bandwidth_bytes_per_s", "r.memoryBandwidth", ["memoryBandwidth"], "BIGINT"),
            ("l2_bytes", "r.l2CacheSize", ["l2CacheSize"], "BIGINT"),
            ("clock_hz", "r.clockRate", ["clockRate"], "BIGINT"),
            ("max_warps_per_sm", "r.maxWarpsPerSm", ["maxWarpsPerSm"], "INTEGER"),
        ],
        joins={"cd": ("@TARGET_INFO_CUDA_DEVICE", "LEFT JOIN (SELECT DISTINCT gpuId, cudaId FROM _nsys_cuda_device) cd ON cd.gpuId = r.id")},
    ),
    "streams": dict(
        source="TARGET_INFO_CUDA_STREAM",
        required=["streamId"],
        columns=[
            ("stream_id", "r.streamId", ["streamId"], "BIGINT"),
            ("pid", "r.processId", ["processId"], "INTEGER"),
            ("context_id", "r.contextId", ["contextId"], "BIGINT"),
            ("priority", "r.priority", ["priority"], "BIGINT"),
            ("flag", "r.flag", ["flag"], "BIGINT"),
        ],
        joins={},
    ),
    "threads": dict(
        source="ThreadNames",
        required=["globalTid"],
        columns=[
            ("global_tid", "r.globalTid", ["globalTid"], "BIGINT"),
            ("pid", "(r.globalTid >> 24) & 16777215", ["globalTid"], "INTEGER"),
            ("tid", "r.globalTid & 16777215", ["globalTid"], "INTEGER"),
            ("name", "tn.value", ["nameId"], "VARCHAR"),
            ("priority", "r.priority", ["priority"], "BIGINT"),
        ],
        joins={"tn": ("nameId", "LEFT JOIN _nsys_strings tn ON tn.id = r.nameId")},
    ),
}

# alias -> the export's enum table, and its labels by id where an export has no such
# table (older nsys versions: the ids are CUPTI's, the labels nsys 2025.3's)
_ENUMS = {
    "_nsys_enum_memcpy": ("ENUM_CUDA_MEMCPY_OPER", [
        "Unknown", "Host-to-Device", "Device-to-Host", "Host-to-Array", "Array-to-Host", "Array-to-Array",
        "Array-to-Device", "Device-to-Array", "Device-to-Device", "Host-to-Host", "Peer-to-Peer",
        "Unified Host-to-Device", "Unified Device-to-Host", "Unified Device-to-Device"]),
    "_nsys_enum_memkind": ("ENUM_CUDA_MEM_KIND", [
        "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static", "Unknown"]),
    "_nsys_enum_sync": ("ENUM_CUPTI_SYNC_TYPE", [
        "Unknown", "Event sync", "Stream wait sync", "Stream sync", "Context sync"]),
}

_NVTX_COLUMNS = ["start", "end", "eventType", "text", "textId", "domainId", "globalTid",
                 "endGlobalTid", "category", "color"]


def sniff(path: Path, head: bytes) -> bool:
    if not head.startswith(SQLITE_MAGIC):
        return False
    # Any SQLite file is ours to judge: an SQLite file that is not an nsys export gets a
    # precise error from read() rather than "unrecognised".
    return True


def _resolve_tables(names: list[str]) -> dict[str, str]:
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


class _Reader:
    """Reads SQLite tables as Arrow through ADBC's SQLite driver, one connection per read."""

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
            rows = self.sq.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        except sqlite3.DatabaseError as err:
            raise InputError(f"{path}: not a readable SQLite database ({err}); the file is truncated or corrupt") from err
        self.tables = _resolve_tables([r[0] for r in rows])

    def columns(self, base: str) -> set[str]:
        actual = self.tables.get(base)
        if actual is None:
            return set()
        return {r[1] for r in self.sq.execute(f'PRAGMA table_info("{actual}")')}

    def row_estimate(self, base: str) -> int:
        actual = self.tables.get(base)
        if actual is None:
            return 0
        row = self.sq.execute(f'SELECT max(rowid) FROM "{actual}"').fetchone()
        return row[0] or 0

    def integer_columns(self, base: str, cols: list[str]) -> bool:
        """Whether every column in ``cols`` is declared INTEGER (safe to read in parts)."""
        actual = self.tables[base]
        types = {r[1]: (r[2] or "").upper() for r in self.sq.execute(f'PRAGMA table_info("{actual}")')}
        return all(types.get(c) == "INTEGER" for c in cols)

    def arrow(self, base: str, cols: list[str], rowids: tuple[int, int] | None = None) -> pa.Table:
        """Read columns of a table (rows with rowid in [lo, hi) if given) as Arrow, on a
        connection of its own (thread-safe)."""
        import adbc_driver_sqlite.dbapi as adbc

        actual = self.tables[base]
        sql = f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{actual}"'
        if rowids is not None:
            sql += f" WHERE rowid >= {int(rowids[0])} AND rowid < {int(rowids[1])}"
        sql += " ORDER BY rowid"  # the table's own order (a scan of an index could differ)
        try:
            # immutable: see __init__
            with adbc.connect(f"file:{self.path}?mode=ro&immutable=1") as conn:
                cur = conn.cursor()
                # The driver infers each column's type from its first batch: a column that is
                # NULL throughout that batch and text later (NVTX text after registered
                # strings) fails with "type mismatch". One batch holding the whole table
                # (read whole anyway) makes inference see every row.
                cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": "2000000000"})
                cur.execute(sql)
                tbl = cur.fetch_arrow_table()
                cur.close()
            return tbl
        except Exception as err:  # ADBC raises its own DatabaseError types
            raise InputError(f"{self.path}: cannot read table {actual} ({str(err).splitlines()[0]}); the export is truncated or corrupt") from err

    def close(self):
        self.sq.close()


def _meta(rd: _Reader) -> dict:
    meta: dict = {}
    if "META_DATA_EXPORT" in rd.tables:
        rows = dict(rd.sq.execute(f'SELECT name, value FROM "{rd.tables["META_DATA_EXPORT"]}"').fetchall())
        meta["export_schema_version"] = rows.get("EXPORT_SCHEMA_VERSION")
        meta["tool_version"] = rows.get("EXPORT_PRODUCT_VERSION")
        meta["export"] = {k: v for k, v in rows.items() if not k.startswith("EXPORT_PARAM")}
    if "TARGET_INFO_SESSION_START_TIME" in rd.tables:
        row = rd.sq.execute(f'SELECT * FROM "{rd.tables["TARGET_INFO_SESSION_START_TIME"]}"').fetchone()
        if row:
            meta["session_start_utc_ns"] = row[0]
    return meta


_PAGES_LOCK = threading.Lock()
_pages_users = [0, None]  # ingests in progress, NumPy's advice before the first of them


@contextlib.contextmanager
def _small_pages():
    """NumPy without its huge-page advice while any ingest runs in this process
    (restored after the last one). NumPy advises transparent huge pages for every array
    of 4 MB or more; where the kernel's THP defrag setting is ``madvise`` (a common
    default), each such fault may compact memory first, and an ingest allocates a few
    GB of fresh arrays. On the 2-core development VM the benchmark ingest ran in 3.77 s
    instead of 4.40 s (medians of 8 alternating pairs; docs/performance.md, step 17)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # NumPy 1.x
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            _set_madvise_hugepage = None
    if _set_madvise_hugepage is None:
        yield
        return
    with _PAGES_LOCK:
        if _pages_users[0] == 0:
            _pages_users[1] = _set_madvise_hugepage(False)
        _pages_users[0] += 1
    try:
        yield
    finally:
        with _PAGES_LOCK:
            _pages_users[0] -= 1
            if _pages_users[0] == 0:
                _set_madvise_hugepage(_pages_users[1])


@_small_pages()
def read(path: Path) -> Parsed:
    """Check the export and read the columns we need as Arrow (tables in parallel).

    The reshaping happens in ``_load`` inside the store's ingest transaction, straight
    into the store tables: no second copy of the rows.
    """
    rd = _Reader(path)
    try:
        return _read(rd, path)
    except sqlite3.DatabaseError as err:
        raise InputError(f"{path}: SQLite error ({err}); the export is truncated or corrupt") from err
    finally:
        rd.close()


def _plan(rd: _Reader, path: Path, version: str, target: str, spec: dict) -> tuple[str, list[str]]:
    """The SELECT that maps the raw table to ``target`` and the raw columns it reads."""
    present = rd.columns(spec["source"])
    if present:
        missing = [c for c in spec["required"] if c not in present]
        if missing:
            raise InputError(
                f"{path}: table {rd.tables[spec['source']]} lacks column {missing[0]} "
                f"(export schema {version}); this nsys version's export is not supported"
            )

    def available(need: list[str]) -> bool:
        for n in need:
            if n.startswith("@"):
                if n[1:] not in rd.tables:
                    return False
            elif not any(alt in present for alt in n.split("|")):
                return False
        return True

    select, raw_cols, aliases = [], set(spec["required"]) if present else set(), set()
    for name, expr, need, typ in spec["columns"]:
        if present and available(need):
            for alias, (col, _) in spec["joins"].items():
                if re.search(rf"\b{alias}\.", expr):
                    if col.startswith("@") or col in present:
                        aliases.add(alias)
                    else:  # a coalesce over alternatives names only the columns that exist
                        expr = re.sub(rf"\b{alias}\.\w+", "NULL", expr)
            raw_cols.update(c for n in need if not n.startswith("@") for c in n.split("|") if c in present)
            select.append(f"CAST({expr} AS {typ}) AS {name}")
        else:
            select.append(f"CAST(NULL AS {typ}) AS {name}")
    for alias in aliases:
        col = spec["joins"][alias][0]
        if not col.startswith("@"):
            raw_cols.add(col)
    if not present:
        return f"SELECT {', '.join(select)} LIMIT 0", []
    joins = " ".join(spec["joins"][a][1] for a in sorted(aliases))
    return f"SELECT {', '.join(select)} FROM _nsys_{target} r {joins}", sorted(raw_cols)


def _read(rd: _Reader, path: Path) -> Parsed:
    if "META_DATA_EXPORT" not in rd.tables and "StringIds" not in rd.tables:
        raise InputError(f"{path}: SQLite file but not an Nsight Systems export (no META_DATA_EXPORT or StringIds table)")
    meta = _meta(rd)
    version = meta.get("export_schema_version") or "unknown"
    if "StringIds" not in rd.tables:
        raise InputError(f"{path}: nsys export (schema {version}) without a StringIds table; re-export with `nsys export --type sqlite`")
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in rd.tables and "CUPTI_ACTIVITY_KIND_RUNTIME" not in rd.tables:
        raise InputError(f"{path}: nsys export without CUDA data (no CUPTI_ACTIVITY_KIND_KERNEL table); profile with `nsys profile --trace=cuda,...`")

    plans = {t: _plan(rd, path, version, t, spec) for t, spec in SPECS.items()}
    jobs: dict[str, tuple[str, list[str]]] = {"strings": ("StringIds", ["id", "value"])}
    for alias, (base, _) in _ENUMS.items():
        if base in rd.tables and {"id", "label"} <= rd.columns(base):
            jobs[alias.removeprefix("_nsys_")] = (base, ["id", "label"])
    if {"gpuId", "cudaId"} <= rd.columns("TARGET_INFO_CUDA_DEVICE"):
        jobs["cuda_device"] = ("TARGET_INFO_CUDA_DEVICE", ["gpuId", "cudaId"])
    for target, (_, cols) in plans.items():
        if cols:
            jobs[target] = (SPECS[target]["source"], cols)
    nvtx_present = rd.columns("NVTX_EVENTS")
    if nvtx_present:
        missing = [c for c in ("start", "eventType", "globalTid") if c not in nvtx_present]
        if missing:
            raise InputError(f"{path}: table NVTX_EVENTS lacks column {missing[0]} (export schema {version})")
        cols = [c for c in _NVTX_COLUMNS if c in nvtx_present]
        ints = [c for c in cols if c != "text"]
        if "text" in cols and rd.integer_columns("NVTX_EVENTS", ints):
            # the integers through the page decoder, the text alone through SQLite (read
            # whole through SQLite, millions of ranges took 5x longer); joined by position
            jobs["nvtx"], jobs["nvtx_text"] = ("NVTX_EVENTS", ints), ("NVTX_EVENTS", ["text"])
        else:
            jobs["nvtx"] = ("NVTX_EVENTS", cols)

    # The big tables (kernels, API calls) dominate, and they hold integers only: those
    # are decoded from the file's pages with NumPy (sqlite_ints; several times faster
    # than a library call per value), chunks on every core. Tables with text, and any
    # table that decoder declines, go through SQLite (ADBC: each read on a connection of
    # its own; it releases the GIL while it reads).
    workers = min(4, os.cpu_count() or 2)

    def decode(base: str, cols: list[str]) -> pa.Table | None:
        try:
            return sqlite_ints.read_int_columns(path, rd.tables[base], cols, threads=workers)
        except sqlite_ints.Unsupported:
            return None
        except sqlite_ints.Changed as err:
            raise InputError(f"{path}: {err}; ingest it again once nothing writes to it") from err

    pieces: dict[str, list[pa.Table]] = {}
    biggest_first = sorted(jobs.items(), key=lambda j: -rd.row_estimate(j[1][0]))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # every table at once, biggest first: the decoder's threads and the SQLite
        # readers keep all cores busy between the decoder's Python steps
        futures = [(name, base, cols, pool.submit(decode, base, cols) if rd.integer_columns(base, cols)
                    else pool.submit(rd.arrow, base, cols)) for name, (base, cols) in biggest_first]
        declined = []
        for name, base, cols, fut in futures:
            if (tbl := fut.result()) is not None:
                pieces[name] = [tbl]
            else:
                declined.append((name, base, cols))
        # integer tables the decoder declined: through SQLite, as parallel rowid ranges
        parts = []
        for name, base, cols in declined:
            n = rd.row_estimate(base)
            if n <= SPLIT_ROWS:
                parts.append((name, pool.submit(rd.arrow, base, cols)))
                continue
            step = n // workers + 1
            parts += [(name, pool.submit(rd.arrow, base, cols, (i * step, (i + 1) * step))) for i in range(workers)]
        for name, fut in parts:
            pieces.setdefault(name, []).append(fut.result())
    _check_types(rd, path, pieces, jobs)
    raw = {}
    for name, ts in pieces.items():
        nonempty = [t for t in ts if t.num_rows] or ts[:1]
        raw[name] = nonempty[0] if len(nonempty) == 1 else pa.concat_tables(nonempty, promote_options="default")
    if "nvtx_text" in raw:  # both in rowid order: the decoder walks the table's b-tree, SQLite is told to
        text = raw.pop("nvtx_text").column("text")
        if len(text) != raw["nvtx"].num_rows:
            raise InputError(f"{path}: table NVTX_EVENTS read as {raw['nvtx'].num_rows:,} rows and as "
                             f"{len(text):,}; the export is corrupt")
        raw["nvtx"] = raw["nvtx"].append_column("text", text)

    gpu_names = []
    if "gpus" in raw and "name" in raw["gpus"].column_names:
        gpu_names = sorted({n for n in raw["gpus"].column("name").to_pylist() if n})
    if gpu_names:
        meta["gpu"] = ", ".join(gpu_names)
    parsed = Parsed(kind=KIND, meta=meta)
    parsed.loaders.append(lambda con, run_id: _load(con, run_id, raw, plans))
    return parsed


#: a column's declared type -> the Arrow types SQLite's reader gives for the values nsys writes
_DECLARED = {"INTEGER": pa.types.is_integer, "TEXT": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)}


def _check_types(rd: _Reader, path: Path, pieces: dict[str, list[pa.Table]], jobs: dict[str, tuple[str, list[str]]]) -> None:
    """Every column came back with the type the export declares (or NULL throughout).
    SQLite keeps a value of another type written into a column (nsys never writes one);
    the page decoder declines such a table, and SQLite's reader types the column by it."""
    for name, tbls in pieces.items():
        base, cols = jobs[name]
        declared = {r[1]: (r[2] or "").upper() for r in rd.sq.execute(f'PRAGMA table_info("{rd.tables[base]}")')}
        for tbl, col in ((t, c) for t in tbls for c in cols):
            typ, fits = tbl.schema.field(col).type, _DECLARED.get(declared.get(col))
            if fits and not fits(typ) and tbl.column(col).null_count < tbl.num_rows:
                what = ("integers" if pa.types.is_integer(typ) else "real numbers" if pa.types.is_floating(typ)
                        else "text" if pa.types.is_string(typ) or pa.types.is_large_string(typ) else "blobs")
                raise InputError(f"{path}: table {rd.tables[base]} column {col} holds {what} where nsys writes "
                                 f"{'integers' if declared[col] == 'INTEGER' else 'text'}; the export is corrupt")


def _idle_gaps(raw: dict[str, pa.Table]) -> dict[str, list[pa.Array]]:
    """The idle time before each GPU op on its stream and on its device (columns
    ``_tk_stream_gap`` and ``_tk_device_gap`` of the raw op tables; NULL where the op
    does not start an idle gap), so that gpu-utilization is a plain aggregation.

    In time order, an op ends an idle gap when it starts after every earlier op of its
    scope has ended; the gap runs from that latest end to its start. Ops of all three
    tables share the scopes. One time sort for all ops (inputs come nearly sorted), a
    stable sort by scope only when there is more than one, a running max per scope."""
    tables = [t for t in _GAP_TABLES if t in raw and set(_GAP_INPUTS) <= set(raw[t].column_names)]
    if sum(raw[t].num_rows for t in tables) == 0:
        return {t: [pa.nulls(0, pa.int64())] * 2 for t in tables}
    import pyarrow.compute as pc

    def values(t, c):  # NULL (or a column the table lacks) as 0
        if c not in raw[t].column_names:
            return np.zeros(raw[t].num_rows, np.int64)
        return _values(raw[t].column(c))[0]

    def column(c):  # all ops' values (a copy only where there are several tables)
        parts = [values(t, c) for t in tables if raw[t].num_rows]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def one_value(c):  # every op has the same value, as column() reads it (then no key array is made)
        seen = set()
        for t in (t for t in tables if raw[t].num_rows):
            col = raw[t].column(c) if c in raw[t].column_names else None
            if col is None or col.null_count:
                seen.add(0)
            if col is not None and col.null_count < len(col):
                mm = pc.min_max(col)
                seen.update((mm["min"].as_py(), mm["max"].as_py()))
        return len(seen) == 1

    start, end = column("start"), column("end")
    by_time = np.argsort(start, kind="stable")

    def gaps_in(order, key):
        # ``order``: every op, scope by scope, in time order within its scope. Few large
        # arrays, updated in place (each new one costs its first touch of memory).
        s, latest = start[order], end[order]
        firsts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key is not None else np.array([0])
        for lo, hi in zip(firsts, np.r_[firsts[1:], len(s)], strict=True):
            np.maximum.accumulate(latest[lo:hi], out=latest[lo:hi])
        s[1:] -= latest[:-1]
        s[firsts] = 0  # the first op of a scope follows no idle time
        out = np.empty_like(s)
        out[order] = s
        return out

    def scoped(key):  # stable: time order kept within each scope
        order = by_time[np.argsort(key[by_time], kind="stable")]
        return gaps_in(order, key[order])

    # a stream: (device, process, context, stream); only the columns that vary make the key
    varying = [c for c in _GAP_SCOPE if not one_value(c)]
    if not varying:  # one scope: both gaps in time order
        gaps = [gaps_in(by_time, None)] * 2
    else:
        gaps = [scoped(_scope_key([column(c) for c in varying])),
                scoped(column("deviceId")) if "deviceId" in varying else gaps_in(by_time, None)]
    out, at = {}, 0
    for t in tables:
        n = raw[t].num_rows
        out[t] = [pa.array(g[at:at + n], mask=g[at:at + n] <= 0) for g in gaps]
        at += n
    return out


def _scope_key(cols: list[np.ndarray]) -> np.ndarray:
    """One int64 per row that is equal where every column is: the columns' offsets from
    their minimum packed side by side (process ids, contexts, streams and devices are
    small numbers), or the rows' rank among the distinct tuples where they do not fit."""
    if len(cols) == 1:
        return cols[0]
    lows = [int(c.min()) for c in cols]
    bits = [max(int(c.max()) - lo, 0).bit_length() for c, lo in zip(cols, lows, strict=True)]
    if sum(bits) > 63:
        return np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    key = np.zeros(len(cols[0]), np.int64)
    for c, lo, b in zip(cols, lows, bits, strict=True):
        key <<= b
        key |= c - lo
    return key


def _values(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | None]:
    """An integer column as int64 NumPy values (NULLs as 0; no copy when there are none
    and it is one chunk) and its validity (None: no NULLs)."""
    import pyarrow.compute as pc

    if col.null_count == 0:
        arr = col.chunk(0) if col.num_chunks == 1 else pa.concat_arrays(col.chunks)
        return arr.to_numpy().astype(np.int64, copy=False), None
    return pc.fill_null(col, 0).to_numpy().astype(np.int64, copy=False), col.is_valid().to_numpy(zero_copy_only=False)


class _LaunchIndex:
    """The CUDA API calls by (process, correlation id): the key that ties a GPU op to the
    call that launched it (the process: the ``globalPid`` bits of the call's ``globalTid``).

    Correlation ids are small counters: with one process they index a lookup table
    directly; otherwise (or where ids are sparse or repeat) the keys are sorted once and
    each op found by binary search. A repeated key resolves to its first call either way."""

    def __init__(self, api: pa.Table):
        corr, ok = _values(api.column("correlationId"))
        tid, tok = _values(api.column("globalTid"))
        if tok is not None:  # a call without a thread matches nothing, as in SQL
            ok = tok if ok is None else ok & tok
        self.rows = np.flatnonzero(ok) if ok is not None else None
        if self.rows is not None:
            corr, tid = corr[self.rows], tid[self.rows]
        self.empty = len(corr) == 0
        if self.empty:
            return
        # the process: the globalPid bits of globalTid (clearing the low bits keeps the
        # order, so one process is min == max, found without a pass over every call)
        mask = -16777216
        one = int(tid.min()) & mask == int(tid.max()) & mask
        proc = None if one else tid & mask
        self.procs = np.array([int(tid[0]) & mask]) if one else np.unique(proc)
        self.lo, hi = int(corr.min()), int(corr.max())
        self.width = hi - self.lo + 1
        if self.width * len(self.procs) >= 2**62:
            raise InputError(f"correlation ids from {self.lo} to {hi} in {len(self.procs)} processes: too wide to match")
        key = corr - self.lo
        if len(self.procs) > 1:
            key += np.searchsorted(self.procs, proc) * self.width
        n = len(key)
        span = self.width * len(self.procs)
        self.table = None
        if span <= 4 * n + (1 << 20):  # dense: a direct lookup table
            table = np.full(span, -1, np.int32 if n < 2**31 else np.int64)
            table[key] = np.arange(n, dtype=table.dtype)
            if np.count_nonzero(table >= 0) == n:  # n slots filled: no repeated key
                self.table = table
        if self.table is None:
            self.order = np.argsort(key, kind="stable")
            self.sorted = key[self.order]

    def find(self, ops: pa.Table) -> np.ndarray:
        """Row of each op's launching call in the API table; -1 where there is none."""
        corr, ok = _values(ops.column("correlationId"))
        proc, pok = _values(ops.column("globalPid"))
        if self.empty:
            return np.full(len(corr), -1, np.int64)
        valid = (corr >= self.lo) & (corr < self.lo + self.width)
        for v in (ok, pok):
            if v is not None:
                valid &= v
        key = corr - self.lo
        if len(self.procs) == 1:
            valid &= proc == self.procs[0]
        else:
            pi = np.minimum(np.searchsorted(self.procs, proc), len(self.procs) - 1)
            valid &= self.procs[pi] == proc
            key += pi * self.width
        key[~valid] = 0
        if self.table is not None:
            found = self.table[key].astype(np.int64)
            found[~valid] = -1
        else:
            at = np.minimum(np.searchsorted(self.sorted, key), len(self.order) - 1)
            found = np.where(valid & (self.sorted[at] == key), self.order[at], -1)
        if self.rows is not None:  # back to rows of the whole table
            found = np.where(found >= 0, self.rows[np.maximum(found, 0)], -1)
        return found


def _launch_rows(api: pa.Table, ops: pa.Table) -> np.ndarray:
    """Row in ``api`` of each op's launching call (-1: none)."""
    return _LaunchIndex(api).find(ops)


def _add_launches(ops: pa.Table, api: pa.Table, index: _LaunchIndex,
                  nest: _Nest) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """``ops`` with its launching calls' thread, start, end, name id and innermost NVTX
    range as ``_tk_api_*`` columns (NULL where no call matches): one Arrow take, then
    the range of each launching call (only those: most calls launch nothing). Also
    each op's row in ``api`` and its range id (-1: none)."""
    rows = index.find(ops)
    names = {"globalTid": "_tk_api_tid", "start": "_tk_api_start", "end": "_tk_api_end", "nameId": "_tk_api_name"}
    picked = api.select([c for c in names if c in api.column_names]).take(pa.array(rows, mask=rows < 0))
    for src, name in names.items():
        ops = ops.append_column(name, picked.column(src) if src in picked.column_names
                                else pa.nulls(ops.num_rows, pa.int64()))
    inner = _innermost_ranges(nest, picked.column("globalTid"), picked.column("start"))
    if inner is None:
        inner = np.full(ops.num_rows, -1, np.int64)
    ops = ops.append_column("_tk_api_range", pa.array(inner, mask=inner < 0))
    return ops, rows, inner


def _range_totals(ranges: list[np.ndarray], ops: list[pa.Table], calls: list[np.ndarray],
                  n_calls: int) -> tuple[np.ndarray, ...]:
    """Per innermost push/pop range of the GPU ops' launching calls: the first op start,
    the last op end and the number of launching calls (nsys counts a range's GPU ops
    by distinct correlation id: one per launching call, as a call has one id and every
    op of a call has the call's range). ``ranges``: each op's range id (-1: none, as
    _add_launches gives it); ``calls``: each op's row in the API table. NumPy over the
    Arrow rows, before they are written: no pass over the store."""
    rng, start, end, call = [], [], [], []
    for r, tbl, c in zip(ranges, ops, calls, strict=True):
        keep = np.flatnonzero(r >= 0)
        rng.append(r[keep])
        call.append(c[keep])
        for col, out, fill in (("start", start, _NO_START), ("end", end, _NO_END)):
            v, vok = _values(tbl.column(col))
            out.append(v[keep] if vok is None else np.where(vok[keep], v[keep], fill))
    rng, start, end, call = (np.concatenate(a) if a else np.zeros(0, np.int64) for a in (rng, start, end, call))
    if len(rng) == 0:
        return (np.zeros(0, np.int64),) * 4
    size = int(rng.max()) + 1
    s = np.full(size, _NO_START)
    e = np.full(size, _NO_END)
    np.minimum.at(s, rng, start)
    np.maximum.at(e, rng, end)
    owner = np.full(n_calls, -1, np.int64)  # one op of each call counts it
    at = np.arange(len(call))
    owner[call] = at
    n = np.bincount(rng, weights=owner[call] == at, minlength=size).astype(np.int64)
    ids = np.flatnonzero(np.bincount(rng, minlength=size))
    return ids, s[ids], e[ids], n[ids]


# Statistics that named queries read instead of aggregating millions of rows at query
# time (exact medians and quantiles take longer than a query may on 2 cores): summary
# table -> SELECT over the run's rows ({run}), computed at ingest after the rows.
_EXEC_STATS = ", ".join(
    f"avg({m}_ns) AS {m}_avg_ns, median({m}_ns) AS {m}_med_ns, min({m}_ns) AS {m}_min_ns, "
    f"max({m}_ns) AS {m}_max_ns, coalesce(stddev_samp({m}_ns), 0) AS {m}_stddev_ns"
    for m in ("total", "api", "queue", "kernel"))
_SUMMARIES = {
    # kernel-exec: cuda_kern_exec_sum's launch/queue/kernel/total time statistics per
    # (process, thread, device, launch API, kernel), four exact medians
    "kernel_exec_sum": f"""
        WITH k AS (
            SELECT ((global_pid >> 24) & 16777215)::INTEGER AS pid, (launch_global_tid & 16777215)::INTEGER AS tid,
                   device_id, api_name_id, name_id, api_end_ns - api_start_ns AS api_ns,
                   CASE WHEN start_ns - api_end_ns >= 0 THEN start_ns - api_end_ns END AS queue_ns,
                   end_ns - start_ns AS kernel_ns, greatest(api_end_ns, end_ns) - api_start_ns AS total_ns
            FROM _kernels WHERE run_id = {{run}} AND api_start_ns IS NOT NULL
        )
        SELECT pid, tid, device_id, api_name_id, name_id, count(*) AS launches, count(queue_ns) AS queued,
               {_EXEC_STATS}
        FROM k GROUP BY pid, tid, device_id, api_name_id, name_id
    """,
    # launch-overhead: per kernel, the latency from the start of the launching call to
    # the kernel's start (graph kernels: from cudaGraphLaunch), its exact median, p90 and
    # p99 (one quantile state), the call's median duration, the median queue time
    "launch_latency_sum": """
        WITH l AS (
            SELECT name_id, api_name_id, api_end_ns - api_start_ns AS api_ns, start_ns - api_start_ns AS latency_ns,
                   CASE WHEN start_ns > api_end_ns THEN start_ns - api_end_ns END AS queue_ns
            FROM _kernels WHERE run_id = {run} AND api_start_ns IS NOT NULL
        ), s AS (
            SELECT name_id, count(*) AS launches, mode(api_name_id) AS api_name_id, median(api_ns) AS api_med_ns,
                   min(latency_ns) AS latency_min_ns, quantile_cont(latency_ns, [0.5, 0.9, 0.99]) AS q,
                   max(latency_ns) AS latency_max_ns, median(queue_ns) AS queue_med_ns,
                   sum(latency_ns)::BIGINT AS total_latency_ns
            FROM l GROUP BY name_id
        )
        SELECT name_id, launches, api_name_id, api_med_ns, latency_min_ns, q[1] AS latency_med_ns,
               q[2] AS latency_p90_ns, q[3] AS latency_p99_ns, latency_max_ns, queue_med_ns, total_latency_ns
        FROM s
    """,
    # api-summary: cuda_api_sum's statistics per recorded API name, exact median and
    # sample stddev over every call
    "api_sum": """
        SELECT raw_name_id, any_value(name_id) AS name_id, count(*) AS calls, sum(dur_ns) AS total_ns,
               avg(dur_ns) AS avg_ns, median(dur_ns) AS med_ns, min(dur_ns) AS min_ns,
               max(dur_ns) AS max_ns, coalesce(stddev_samp(dur_ns), 0) AS stddev_ns
        FROM (SELECT raw_name_id, name_id, end_ns - start_ns AS dur_ns FROM _api_calls WHERE run_id = {run})
        GROUP BY raw_name_id
    """,
}


_TEMPS = ["api_names", "names", "ev", "rng", "bands",
          *(a.removeprefix("_nsys_") for a in _ENUMS)]  # (an enum table made for an export without it)

#: What DuckDB may use, beyond what it holds already, while the activity rows are written
#: (when the configured limit is higher). Those inserts stream Arrow rows into row groups
#: that go to disk as they fill and need little memory, but under a high limit DuckDB
#: keeps what it wrote cached: in the 6 M-row benchmark 1.35-1.43 GB peak RSS without
#: the lower limit, 1.20-1.21 GB with it, same time (docs/performance.md, step 24; the
#: idle gaps computed beside the API insert later added 0.05 GB). What it holds already (the
#: NVTX tables, millions of rows in a large export) stays: evicting it to meet a lower
#: limit took seconds.
WRITING_MEMORY_MARGIN = 500 * 10**6
_SIZE_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}


@contextlib.contextmanager
def _writing_memory(con):
    """DuckDB's memory limit at most what it uses now plus WRITING_MEMORY_MARGIN inside;
    the store's configured limit (``store.ingest_memory_limit``) set back after."""
    from tracekit.store import ingest_memory_limit

    shown = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]  # e.g. '11.1 GiB'
    used = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()[0][0] or 0
    target = int(used) + WRITING_MEMORY_MARGIN
    number, _, unit = shown.partition(" ")
    if unit not in _SIZE_UNITS or float(number) * _SIZE_UNITS[unit] <= target:
        yield  # already that low (or a form we do not read): left as it is
        return
    con.execute(f"SET memory_limit = '{target // 10**6}MB'")
    try:
        yield
    finally:
        con.execute(f"SET memory_limit = '{ingest_memory_limit()}'")


def _write_activity(con, run_id: int, raw: dict[str, pa.Table], plans: dict, names: list[str], nest: _Nest,
                    rows: dict[str, int]) -> tuple[np.ndarray, ...]:
    """Write the API calls and GPU ops (counts into ``rows``), then free their Arrow
    copies; returns the per-range op totals of the NVTX projection (_range_totals).

    The API calls are written by DuckDB on a side thread, which then computes the GPU
    ops' idle gaps, while the GPU ops find their launching calls in NumPy here (the
    two take about as long); the connection is not touched here until that insert is
    done."""
    with ThreadPoolExecutor(max_workers=1) as side:
        api_insert = side.submit(_insert, con, "_api_calls", run_id, plans["api_calls"][0])
        gaps = side.submit(_idle_gaps, {t: raw[t] for t in _GAP_TABLES if t in raw})
        try:
            launched, calls, ranges = {}, {}, {}
            totals = (np.zeros(0, np.int64),) * 4
            if "api_calls" in raw:
                api = raw["api_calls"]
                index = _LaunchIndex(api)
                for t in _GAP_TABLES:
                    if t in raw:
                        launched[t], calls[t], ranges[t] = _add_launches(raw[t], api, index, nest)
                proj = [t for t in _OP_TABLES if t in launched]  # as nsys: not whole graph executions
                totals = _range_totals([ranges[t] for t in proj], [launched[t] for t in proj],
                                       [calls[t] for t in proj], api.num_rows)
                del api, index, calls, ranges
        finally:
            rows["api_calls"] = api_insert.result()
            gaps = gaps.result()
    for t in [t for t in _GAP_TABLES if t in raw]:
        tbl = launched.pop(t, raw[t])
        for name, arr in zip(("_tk_stream_gap", "_tk_device_gap"), gaps[t], strict=True) if t in gaps else ():
            tbl = tbl.append_column(name, arr)  # (none for a table without the columns gaps need)
        raw[t] = tbl  # one reference only: freed with raw[t] below
        con.register(f"_nsys_{t}", tbl)
    for target, (select, _) in plans.items():
        if target != "api_calls":
            rows[target] = _insert(con, SPECS[target].get("table", target), run_id, select)
    # the activity rows are in the store now: free their Arrow copies before the NVTX work
    for name in [n for n in raw if n not in ("nvtx", "strings")]:
        con.unregister(f"_nsys_{name}")
        names.remove(f"_nsys_{name}")
        del raw[name]
    return totals


@_small_pages()
def _load(con, run_id: int, raw: dict[str, pa.Table], plans: dict) -> dict[str, int]:
    """Reshape the raw Arrow tables into the store tables, in the caller's transaction."""
    names = []
    for name, tbl in raw.items():
        con.register(f"_nsys_{name}", tbl)
        names.append(f"_nsys_{name}")
    for alias, (_, labels) in _ENUMS.items():
        if alias.removeprefix("_nsys_") not in raw:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {alias} (id BIGINT, label VARCHAR)")
            con.executemany(f"INSERT INTO {alias} VALUES (?, ?)", list(enumerate(labels)))
    rows: dict[str, int] = {}
    try:
        _names(con, raw)
        # NVTX nesting first: the op inserts take each launch's innermost range
        names += ["_nsys_ev", "_nsys_named"]  # (registered by _nvtx_prepare: unregistered here on error too)
        nest = _nvtx_prepare(con, raw.get("nvtx"))
        if "nvtx" in raw:  # named and nested: its Arrow rows are not read again
            con.unregister("_nsys_nvtx")
            names.remove("_nsys_nvtx")
            del raw["nvtx"]
        with _writing_memory(con):
            totals = _write_activity(con, run_id, raw, plans, names, nest, rows)
        rows.update(_nvtx_finish(con, run_id, nest, totals))
        for table, select in _SUMMARIES.items():
            rows[table] = _insert(con, table, run_id, select.format(run=int(run_id)))
    except BaseException:
        # the transaction is aborted: the caller rolls back, which drops the temp tables
        for n in names:
            try:
                con.unregister(n)
            except Exception:  # noqa: S110 - nothing more to clean in an aborted transaction
                pass
        raise
    for n in names:
        con.unregister(n)
    for t in _TEMPS:
        con.execute(f"DROP TABLE IF EXISTS _nsys_{t}")
    return rows


def _names(con, raw: dict[str, pa.Table]) -> None:
    """``_nsys_names``: each export string with nsys's API-name suffix rule applied once
    per string (not once per call), and the store-wide ``_strings`` ids of both forms,
    after adding the kernel and API names this export brings that the store lacks."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _nsys_api_names AS "
                f"SELECT id, value, {_STRIP.format('value')} AS stripped FROM _nsys_strings")
    used = [f'SELECT "{c}" AS id, {api} AS api FROM _nsys_{t}'
            for t, cols, api in (("kernels", ("demangledName", "shortName"), "false"), ("api_calls", ("nameId",), "true"))
            if t in raw for c in cols if c in raw[t].column_names]
    if used:
        con.execute(f"""
            INSERT INTO _strings
            WITH u AS (SELECT DISTINCT id, api FROM ({' UNION ALL '.join(used)}))
            -- ids in name order after the store's last one: the same export always gets
            -- the same ids in a fresh store
            SELECT (SELECT coalesce(max(string_id), 0) FROM _strings) + row_number() OVER (ORDER BY v), v FROM (
                SELECT DISTINCT v FROM (
                    SELECT n.value AS v FROM _nsys_api_names n JOIN u USING (id)
                    UNION ALL
                    SELECT n.stripped FROM _nsys_api_names n JOIN u USING (id) WHERE u.api
                ) WHERE v IS NOT NULL AND v NOT IN (SELECT value FROM _strings)
            )
        """)
    con.execute("""
        CREATE OR REPLACE TEMP TABLE _nsys_names AS
        SELECT n.id, n.value, n.stripped, s.string_id AS sid, t.string_id AS stripped_sid
        FROM _nsys_api_names n LEFT JOIN _strings s ON s.value = n.value LEFT JOIN _strings t ON t.value = n.stripped
    """)


def _insert(con, table: str, run_id: int, select: str) -> int:
    n = con.execute(f"INSERT INTO {table} BY NAME SELECT {int(run_id)}::INTEGER AS run_id, * FROM ({select})").fetchall()
    return int(n[0][0]) if n else 0


def _enclosing(end: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For ranges in (thread, start, -end) order, the position of each one's innermost
    enclosing range: the nearest earlier range of its thread that ends no earlier
    (-1: none). ``first`` marks each thread's first range.

    Every earlier range of the thread starts no later, so it encloses the range exactly
    when it ends no earlier; the nearest such one opened last. Found by pointer jumping,
    all ranges at once: a candidate that ends too early is replaced by its own
    candidate, since every range between the two ends earlier still (the invariant
    that keeps the answer exact). Converged ranges stop; rounds grow with the nesting
    depth and the logarithm of the run of siblings, not with the number of ranges."""
    n = len(end)
    idx = np.int32 if n < 2**31 else np.int64
    cand = np.arange(-1, n - 1, dtype=idx)
    cand[first] = -1
    at = np.flatnonzero(cand >= 0).astype(idx, copy=False)  # unresolved ranges,
    e, c = end[at], cand[at]  # their ends and candidates, kept compact
    while at.size:
        short = end[c] < e
        at, e, c = at[short], e[short], cand[c[short]]
        cand[at] = c
        more = c >= 0
        if not more.all():
            at, e, c = at[more], e[more], c[more]
    return cand.astype(np.int64)


def _enclosing_depth(end: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_enclosing and the depth along it (_chain_length): in one sequential pass where
    the compiled helper is built (_nest.c), else by NumPy's pointer jumping."""
    if _nest_native is None:
        parent = _enclosing(end, first)
        return parent, _chain_length(parent)
    parent, depth = np.empty(len(end), np.int64), np.empty(len(end), np.int64)
    _nest_native.enclosing(np.ascontiguousarray(end, np.int64), np.ascontiguousarray(first, np.bool_).view(np.uint8),
                           parent, depth)
    return parent, depth


def _chain_length(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each node of a forest given by ``parent`` (-1: root), by
    pointer doubling: log2(depth) rounds."""
    depth = (parent >= 0).astype(np.int64)
    up = parent.copy()
    active = np.flatnonzero(up >= 0)
    while active.size:
        u = up[active]
        depth[active] += depth[u]
        up[active] = up[u]
        active = active[up[active] >= 0]
    return depth


class _Nest:
    """Parent, depth, path and push/pop parent of every range that nests (same-thread
    ranges), by range id; and the push/pop chains for the GPU projection."""

    def __init__(self, range_id, parent, pp_parent, depth, pp_depth, ranges, label):
        # push/pop ranges by thread and start (range order), each with the position of
        # its enclosing push/pop range among them: what _innermost_ranges searches
        tid, start, end, is_pp = ranges
        at = np.flatnonzero(is_pp)
        pos = np.full(len(range_id), -1, np.int64)
        pos[at] = np.arange(len(at))
        up = pp_parent[at]
        self.open = (tid[at], start[at], end[at], range_id[at], np.where(up >= 0, pos[np.maximum(up, 0)], -1))

        # every nesting range's depth, parent (range id, -1: none) and path: what
        # nvtx_ranges stores
        self.range_id, self.depth = range_id, depth
        self.named: pa.Table | None = None  # the named ranges (_nvtx_prepare sets them)
        self.parent = np.where(parent >= 0, range_id[np.maximum(parent, 0)], -1)
        self.path = _paths(parent, depth, label)
        # push/pop ranges with their enclosing push/pop range, deepest first
        pp = np.flatnonzero(pp_parent >= 0)
        level = pp_depth[pp]
        top = int(level.max(initial=0))
        level = (top - level).astype(np.int16) if top < 2**15 else -level  # (16 bits: a radix sort)
        pp = pp[np.argsort(level, kind="stable")]
        self.pp_child, self.pp_up, self.pp_level = range_id[pp], range_id[pp_parent[pp]], pp_depth[pp]

    @property
    def tree(self) -> pa.Table:
        """range_id, depth, parent_id and path of every nesting range, as a table."""
        return pa.table({"range_id": self.range_id, "depth": self.depth,
                         "parent_id": pa.array(self.parent, mask=self.parent < 0), "path": self.path})

    def roll_up(self, range_id, start, end, ops):
        """Per-range GPU projection (first op start, last op end, op count) from the
        innermost ranges' own figures, summed up the push/pop chains: each range takes
        its descendants' ops. Returns the ranges that have any, with those three
        (_NO_START / _NO_END where no op had one)."""
        size = int(max(range_id.max(initial=-1), self.pp_up.max(initial=-1), self.pp_child.max(initial=-1))) + 1
        s = np.full(size, _NO_START)
        e = np.full(size, _NO_END)
        n = np.zeros(size, np.int64)
        s[range_id], e[range_id], n[range_id] = start, end, ops
        has = np.zeros(size, bool)
        has[range_id] = True
        # one level at a time, deepest first: a level's totals are complete before they
        # are passed up
        bounds = np.flatnonzero(np.r_[True, self.pp_level[1:] != self.pp_level[:-1], True])
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            child, up = self.pp_child[lo:hi], self.pp_up[lo:hi]
            keep = has[child]
            child, up = child[keep], up[keep]
            np.minimum.at(s, up, s[child])
            np.maximum.at(e, up, e[child])
            np.add.at(n, up, n[child])
            has[up] = True
        ids = np.flatnonzero(has)
        return ids, s[ids], e[ids], n[ids]


def _paths(parent: np.ndarray, depth: np.ndarray, label: pa.ChunkedArray) -> pa.DictionaryArray:
    """Each node's labels from its root down, '/'-separated ('hstu.request/hstu.layer0/
    hstu_attention'), as a dictionary array. ``parent``: positions (-1: a root),
    ``depth``: ancestors. Paths are interned level by level, a node's path being its
    parent's path and its own label: only the distinct ones become strings (a run
    repeats a few paths millions of times)."""
    import pyarrow.compute as pc

    n = len(parent)
    if n == 0:
        return pa.DictionaryArray.from_arrays(pa.array([], pa.int64()), pa.array([], pa.string()))
    enc = pc.dictionary_encode(label).combine_chunks()
    lab = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    words = enc.dictionary.to_pylist()
    width = max(len(words), 1)
    path = np.empty(n, np.int64)
    texts: list[str] = []
    levels = depth.astype(np.int16) if depth.max() < 2**15 else depth  # 16 bits: a radix sort
    order = np.argsort(levels, kind="stable")
    cuts = np.flatnonzero(np.r_[True, np.diff(levels[order]) != 0, True])
    above, count = 0, 0  # the level above: its paths are ids above .. above + count - 1
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        at = order[lo:hi]
        root = depth[at[0]] == 0
        key = lab[at] if root else (path[parent[at]] - above) * width + lab[at]
        distinct, index = _distinct(key, width if root else count * width)
        first = len(texts)
        if root:
            texts += [words[k] for k in distinct.tolist()]
        else:
            texts += [f"{texts[above + k // width]}/{words[k % width]}" for k in distinct.tolist()]
        path[at] = first + index
        above, count = first, len(distinct)
    return pa.DictionaryArray.from_arrays(pa.array(path, pa.int64()), pa.array(texts, pa.string()))


def _distinct(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``key`` (in 0 .. size - 1), sorted, and each key's index
    among them: a pass over a table of ``size`` flags where that is small."""
    if size > 4 * len(key) + (1 << 20):
        distinct, index = np.unique(key, return_inverse=True)
        return distinct, index.reshape(-1)
    seen = np.zeros(size, bool)
    seen[key] = True
    return np.flatnonzero(seen), (np.cumsum(seen) - 1)[key]


def _nest(con) -> _Nest:
    """Nesting of the same-thread ranges (``_nsys_rng``): each range's tightest
    container of any style (containers.tightest: nsys's rule where start/end ranges
    cross push/pop ones), its depth (ancestors along that chain), and its innermost
    enclosing push/pop range (push/pop ranges only; this chain carries the GPU
    projection and the launch segments).

    Range ids follow (start, thread, -end), so by thread and id the ranges come in
    (start, -end) order, every range after those that enclose it."""
    r = con.sql("SELECT range_id, global_tid, start_ns, end_ns, style = 'PushPop' AS pp, label FROM _nsys_rng "
                "ORDER BY global_tid, range_id").to_arrow_table()

    def values(c, dtype):
        return np.asarray(r.column(c).to_numpy(), dtype=dtype)

    range_id, tid, start, end = (values(c, np.int64) for c in ("range_id", "global_tid", "start_ns", "end_ns"))
    is_pp = values("pp", bool)
    label = r.column("label")

    def firsts(t):
        return np.r_[True, t[1:] != t[:-1]] if len(t) else np.zeros(0, bool)

    if is_pp.all():  # push/pop ranges only (the usual case): they nest, the last opened is the tightest
        parent, depth = _enclosing_depth(end, firsts(tid))
        return _Nest(range_id, parent, parent, depth, depth, (tid, start, end, is_pp), label)
    pp = np.flatnonzero(is_pp)
    pp_in, pp_in_depth = _enclosing_depth(end[pp], firsts(tid[pp]))  # push/pop ranges among themselves
    pp_parent = np.full(len(range_id), -1, np.int64)
    pp_parent[pp] = np.where(pp_in >= 0, pp[np.maximum(pp_in, 0)], -1)
    pp_depth = np.zeros(len(range_id), np.int64)
    pp_depth[pp] = pp_in_depth
    parent, depth = containers.tightest(start, end, firsts(tid), is_pp, pp_parent)
    return _Nest(range_id, parent, pp_parent, depth, pp_depth, (tid, start, end, is_pp), label)


def _nvtx_prepare(con, nvtx: pa.Table | None) -> _Nest:
    """NVTX ranges named (``_nsys_named``, an Arrow table also kept as ``_Nest.named``)
    and nested (``_Nest``: the nesting arrays; temp tables ``_nsys_rng`` and
    ``_nsys_bands`` for the start/end projection) from the raw NVTX_EVENTS rows ``nvtx``
    (None: the export has none)."""
    # the events as DuckDB reads them: the raw Arrow rows with their row numbers, and the
    # columns this export lacks as NULLs (not copied into a temp table, whose memory a
    # transaction would hold to its end)
    n = 0 if nvtx is None else nvtx.num_rows
    have = set() if nvtx is None else set(nvtx.column_names)
    ev = pa.table({**{c: nvtx.column(c) if c in have else pa.nulls(n, pa.string() if c == "text" else pa.int64())
                      for c in _NVTX_COLUMNS}, "_row": np.arange(n, dtype=np.int64)})
    if not pa.types.is_string(ev.schema.field("text").type):
        # SQLite types a column by its values: text NULL in every row (every name a
        # registered string, through textId) reads as integers; as SQLite prints values
        ev = ev.set_column(ev.schema.get_field_index("text"), "text", ev.column("text").cast(pa.string()))
    con.register("_nsys_ev", ev)
    # Same naming as nsys stats: domain name from the NvtxDomainCreate event of that
    # domain in that process, range text inline or registered; "domain:text".
    # (an Arrow table: the nvtx_ranges rows are this table with the nesting and
    # projection columns added; Arrow memory is freed when dropped, a temp table's only
    # at the transaction's end)
    named = con.sql(f"""
        WITH domains AS (
            SELECT e.domainId AS id, e.globalTid & 1099494850560 AS proc,
                   arg_min(coalesce(s.value, e.text), e.start) AS name
            FROM _nsys_ev e LEFT JOIN _nsys_strings s ON s.id = e.textId
            WHERE e.eventType = {NVTX_DOMAIN}
            GROUP BY 1, 2
        ), maxts AS (SELECT greatest(max(start), max("end")) AS m FROM _nsys_ev
        ), ord AS (
            -- range ids in (start, thread, -end) order; numbered over the row ids alone,
            -- as a window that carries every column (text among them) costs 4x more
            SELECT _row AS r,
                   row_number() OVER (ORDER BY start, globalTid, coalesce("end", (SELECT m FROM maxts)) DESC) - 1
                       AS range_id
            FROM _nsys_ev
            WHERE eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTXT_PUSHPOP}, {NVTXT_STARTEND}, {NVTX_MARK})
        )
        SELECT o.range_id,
               e.start AS start_ns,
               coalesce(e."end", (SELECT m FROM maxts)) AS end_ns,
               e."end" IS NOT NULL AS ended,
               CAST(CASE WHEN e.eventType IN ({NVTX_PUSHPOP}, {NVTXT_PUSHPOP}) THEN 'PushPop'
                         WHEN e.eventType IN ({NVTX_STARTEND}, {NVTXT_STARTEND}) THEN 'StartEnd'
                         ELSE 'Mark' END AS ENUM('PushPop', 'StartEnd', 'Mark')) AS style,
               e.domainId AS domain_id,
               coalesce(d.name, '') AS domain,
               coalesce(s.value, e.text, '') AS text,  -- (name: domain || ':' || text, made where written)
               e.globalTid AS global_tid,
               e.endGlobalTid AS end_global_tid,
               e.category AS category,
               e.color AS color
        FROM _nsys_ev e
        JOIN ord o ON o.r = e._row
        LEFT JOIN _nsys_strings s ON s.id = e.textId
        LEFT JOIN domains d ON d.id = e.domainId AND d.proc = (e.globalTid & 1099494850560)
    """).to_arrow_table()
    con.unregister("_nsys_ev")
    del ev
    con.register("_nsys_named", named)
    # Nesting: the parent of a range is the shortest range on the same thread that
    # contains it (start <= start, end >= end); ranges that end on another thread take
    # no part. Computed in NumPy by _nest (no join of every range with its ancestors);
    # the bands put each thread's ranges in a time band of their own for the start/end
    # projection join of _nvtx_finish.
    con.execute("""
        CREATE TEMP TABLE _nsys_bands AS
        SELECT global_tid, dense_rank() OVER (ORDER BY global_tid) AS band,
               min(min(start_ns)) OVER () AS t0
        FROM _nsys_named WHERE style <> 'Mark' AND end_global_tid IS NULL GROUP BY global_tid
    """)
    con.execute("""
        CREATE TEMP TABLE _nsys_rng AS
        SELECT n.range_id, n.global_tid, n.start_ns, n.end_ns, n.style,
               CASE WHEN n.domain = '' THEN n.text ELSE n.domain || ':' || n.text END AS label,
               b.band::HUGEINT * 18446744073709551616 + (n.start_ns - b.t0)::HUGEINT AS k0,
               b.band::HUGEINT * 18446744073709551616 + (n.end_ns - b.t0)::HUGEINT AS k1
        FROM _nsys_named n JOIN _nsys_bands b USING (global_tid)
        WHERE n.style <> 'Mark' AND n.end_global_tid IS NULL
    """)
    nest = _nest(con)
    nest.named = named
    return nest


def _innermost_ranges(nest: _Nest, tid: pa.ChunkedArray, start: pa.ChunkedArray) -> np.ndarray | None:
    """The id of the innermost push/pop range open on thread ``tid`` at time ``start``
    (the launching calls of the GPU ops; a range is open from its start up to, not
    including, its end; -1 outside every range and where either is NULL); None without
    push/pop ranges.

    Push/pop ranges nest, so the ranges open at a time are the last range of the thread
    to start by then and its enclosing ranges: one binary search per call, then up the
    chain past the ranges that ended. Each GPU op gets it from its launching call
    (_add_launches), so no launch is sorted or joined for NVTX."""
    r_tid, r_start, r_end, r_id, r_up = nest.open
    if len(tid) == 0 or len(r_start) == 0:
        return None
    g, gok = _values(tid)
    t, tok = _values(start)
    tids, first = np.unique(r_tid, return_index=True)
    # one search for all threads: each thread's range starts shifted into a time band of
    # its own (call times clamped to the starts' span, which keeps every answer)
    t0, t1 = int(r_start.min()), int(r_start.max())
    width = t1 - t0 + 2
    if width * len(tids) >= 2**62:
        raise InputError(f"NVTX ranges spanning {width} ns on {len(tids)} threads: too long to attribute")
    r_band = np.repeat(np.arange(len(tids), dtype=np.int64), np.diff(np.append(first, len(r_start))))
    keys = r_band * width + (r_start - t0)
    q = np.clip(t, t0 - 1, t1)
    q -= t0
    if len(tids) == 1:
        band, hit = None, g == tids[0]
    else:
        band = np.searchsorted(tids, g)
        np.minimum(band, len(tids) - 1, out=band)
        hit = tids[band] == g
        q += band * width
    for ok in (gok, tok):
        if ok is not None:
            hit &= ok
    i = np.searchsorted(keys, q, side="right")
    i -= 1
    hit &= i >= 0
    if band is not None:
        hit &= r_band[np.maximum(i, 0)] == band
    i[~hit] = -1
    # up the chain while the candidate ended at or before the call's start
    todo = np.flatnonzero(hit)
    while todo.size:
        c = i[todo]
        ended = r_end[c] <= t[todo]
        todo = todo[ended]
        i[todo] = r_up[c[ended]]
        todo = todo[i[todo] >= 0]
    return np.where(i >= 0, r_id[np.maximum(i, 0)], -1)


def _range_columns(nest: _Nest, pushpop: tuple[np.ndarray, ...], startend: pa.Table, order: np.ndarray) -> pa.Table:
    """Per range id in ``order``: depth, parent, path (NULL for ranges that do not nest:
    marks, ranges ended on another thread), the GPU projection (push/pop and start/end
    ranges: first op start, last op end, ops) and the children with GPU work (nsys "Num
    Child": direct children in the nesting that have a projection). ``pushpop``: the
    push/pop ranges' projection as _Nest.roll_up gives it; ``startend``: the start/end
    ranges' as a table of those columns."""
    import pyarrow.compute as pc

    size = int(max(order.max(initial=-1), nest.range_id.max(initial=-1))) + 1
    depth = np.full(size, -1, np.int64)
    parent = np.full(size, -1, np.int64)
    path = np.full(size, -1, np.int64)
    depth[nest.range_id], parent[nest.range_id] = nest.depth, nest.parent
    path[nest.range_id] = nest.path.indices.to_numpy()
    first = np.full(size, _NO_START)
    last = np.full(size, _NO_END)
    ops = np.zeros(size, np.int64)
    has = np.zeros(size, bool)
    se = tuple(np.asarray(pc.fill_null(startend.column(c), none).to_numpy(), dtype=np.int64) for c, none in (
        ("range_id", -1), ("proj_start_ns", _NO_START), ("proj_end_ns", _NO_END), ("gpu_ops", 0)))
    for at, f, la, n in (pushpop, se):
        has[at], first[at], last[at], ops[at] = True, f, la, n
    kids = np.flatnonzero(has & (parent >= 0))
    children = np.bincount(parent[kids], minlength=size)
    d, p, pth, f, la = depth[order], parent[order], path[order], first[order], last[order]
    return pa.table({
        "range_id": order,
        "depth": pa.array(d.astype(np.int32), mask=d < 0),
        "parent_id": pa.array(p, mask=p < 0),
        "path": pa.DictionaryArray.from_arrays(pa.array(pth, mask=pth < 0), nest.path.dictionary),
        "children": children[order].astype(np.int32),
        "proj_start_ns": pa.array(f, mask=f == _NO_START),
        "proj_end_ns": pa.array(la, mask=la == _NO_END),
        "gpu_ops": ops[order].astype(np.int32),
    })


def _nvtx_finish(con, run_id: int, nest: _Nest, totals: tuple[np.ndarray, ...]) -> dict[str, int]:
    """NVTX ranges with depth, parent, path and GPU projection; marks; kernel time per
    innermost range. Runs after the op tables are written (their ``nvtx_range_id``)."""
    # GPU projection. A GPU op (kernel, memcpy, memset) belongs to a range when the API
    # call that launched it (same correlation id, same process; stored with the op)
    # lies inside the range on the range's thread: push/pop ranges through the op's
    # innermost range (``totals``, from _range_totals) and its enclosing ranges
    # (_Nest.roll_up), start/end ranges by an inequality join.
    ops = " UNION ALL ".join(
        f"SELECT correlation_id, start_ns, end_ns, launch_global_tid, api_start_ns, api_end_ns "
        f"FROM {SPECS[t].get('table', t)} WHERE run_id = {int(run_id)}" for t in _OP_TABLES)
    pushpop = nest.roll_up(*totals)
    startend = con.sql(f"""
        WITH ops AS ({ops}), startend AS (
            SELECT r.range_id, r.k0, r.k1 FROM _nsys_rng r WHERE r.style = 'StartEnd'
        ), keyed AS (
            SELECT o.correlation_id, o.start_ns, o.end_ns,
                   b.band::HUGEINT * 18446744073709551616 + (o.api_start_ns - b.t0)::HUGEINT AS k0,
                   b.band::HUGEINT * 18446744073709551616 + (o.api_end_ns - b.t0)::HUGEINT AS k1
            FROM ops o JOIN _nsys_bands b ON b.global_tid = o.launch_global_tid
            WHERE EXISTS (SELECT 1 FROM startend)
        )
        SELECT r.range_id, min(l.start_ns) AS proj_start_ns, max(l.end_ns) AS proj_end_ns,
               count(DISTINCT l.correlation_id) AS gpu_ops
        FROM startend r JOIN keyed l ON r.k0 <= l.k0 AND r.k1 >= l.k1
        GROUP BY r.range_id
    """).to_arrow_table()
    # the named ranges with their nesting and projection columns (by the range ids of
    # its rows): one table, written by a plain scan
    named = nest.named
    extra = _range_columns(nest, pushpop, startend, np.asarray(named.column("range_id").to_numpy(), dtype=np.int64))
    for name in extra.column_names[1:]:
        named = named.append_column(name, extra.column(name))
    del extra
    con.register("_nsys_ranges", named)
    try:
        rows = {}
        rows["nvtx_ranges"] = _insert(con, "nvtx_ranges", run_id, """
            SELECT range_id, style, domain_id, domain, text, domain || ':' || text AS name,
                   start_ns, end_ns, end_ns - start_ns AS dur_ns, ended,
                   global_tid, (global_tid >> 24) & 16777215 AS pid, global_tid & 16777215 AS tid,
                   end_global_tid, CAST(end_global_tid & 16777215 AS INTEGER) AS end_tid,
                   depth, parent_id, path, children, proj_start_ns, proj_end_ns,
                   proj_end_ns - proj_start_ns AS proj_dur_ns, gpu_ops, category, color
            FROM _nsys_ranges
            WHERE style <> 'Mark'
        """)
    finally:
        con.unregister("_nsys_ranges")
    rows["nvtx_marks"] = _insert(con, "nvtx_marks", run_id, """
        SELECT start_ns AS ts_ns, domain, text, domain || ':' || text AS name, global_tid,
               CAST((global_tid >> 24) & 16777215 AS INTEGER) AS pid, CAST(global_tid & 16777215 AS INTEGER) AS tid,
               category, color
        FROM _nsys_named WHERE style = 'Mark'
    """)
    # kernel time per (innermost push/pop range, kernel): what kernels-by-nvtx sums along
    # range paths. Kernels launched outside every range have no range.
    rows["nvtx_kernel_sum"] = _insert(con, "nvtx_kernel_sum", run_id, f"""
        SELECT k.nvtx_range_id, n.value AS name, k.launches, k.total_ns, k.min_ns, k.max_ns
        FROM (SELECT nvtx_range_id, name_id, count(*) AS launches, sum(dur_ns)::BIGINT AS total_ns,
                     min(dur_ns) AS min_ns, max(dur_ns) AS max_ns
              FROM (SELECT nvtx_range_id, name_id, end_ns - start_ns AS dur_ns
                    FROM _kernels WHERE run_id = {int(run_id)})
              GROUP BY nvtx_range_id, name_id) k
        LEFT JOIN _strings n ON n.string_id = k.name_id
    """)
    return rows
