"""Nsight Systems SQLite exports -> store tables.

The export is read through Arrow (ADBC's SQLite driver: no DuckDB extension to
download, no Python loop per row), then reshaped in an in-memory DuckDB: names
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

import re
import sqlite3
from pathlib import Path

import duckdb
import pyarrow as pa

from ..errors import InputError
from . import Parsed

KIND = "nsys"

SQLITE_MAGIC = b"SQLite format 3\x00"

# NVTX event types (ENUM_NSYS_EVENT_TYPE)
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND, NVTX_DOMAIN = (
    34, 59, 60, 70, 71, 75,
)

# (target column, SQL expression over the raw table `r`, raw columns it needs, DuckDB type)
# A column whose raw inputs are absent becomes NULL of its type; `required` lists the
# raw columns without which the table cannot be ingested at all.
_GPU_COMMON = [
    ("start_ns", "r.start", ["start"], "BIGINT"),
    ("end_ns", 'r."end"', ["end"], "BIGINT"),
    ("dur_ns", 'r."end" - r.start', ["start", "end"], "BIGINT"),
    ("device_id", "r.deviceId", ["deviceId"], "INTEGER"),
    ("context_id", "r.contextId", ["contextId"], "INTEGER"),
    ("stream_id", "r.streamId", ["streamId"], "INTEGER"),
    ("correlation_id", "r.correlationId", ["correlationId"], "BIGINT"),
    ("global_pid", "r.globalPid", ["globalPid"], "BIGINT"),
    ("pid", "(r.globalPid >> 24) & 16777215", ["globalPid"], "INTEGER"),
    ("graph_node_id", "r.graphNodeId", ["graphNodeId"], "BIGINT"),
]

SPECS = {
    "kernels": dict(
        source="CUPTI_ACTIVITY_KIND_KERNEL",
        required=["start", "end", "correlationId", "globalPid"],
        columns=_GPU_COMMON + [
            ("name", "coalesce(sd.value, ss.value)", ["demangledName|shortName"], "VARCHAR"),
            ("short_name", "ss.value", ["shortName"], "VARCHAR"),
            ("mangled_name", "sm.value", ["mangledName"], "VARCHAR"),
            ("grid_x", "r.gridX", ["gridX"], "INTEGER"),
            ("grid_y", "r.gridY", ["gridY"], "INTEGER"),
            ("grid_z", "r.gridZ", ["gridZ"], "INTEGER"),
            ("block_x", "r.blockX", ["blockX"], "INTEGER"),
            ("block_y", "r.blockY", ["blockY"], "INTEGER"),
            ("block_z", "r.blockZ", ["blockZ"], "INTEGER"),
            ("registers_per_thread", "r.registersPerThread", ["registersPerThread"], "INTEGER"),
            ("static_smem_bytes", "r.staticSharedMemory", ["staticSharedMemory"], "INTEGER"),
            ("dynamic_smem_bytes", "r.dynamicSharedMemory", ["dynamicSharedMemory"], "INTEGER"),
            ("local_mem_per_thread_bytes", "r.localMemoryPerThread", ["localMemoryPerThread"], "INTEGER"),
            ("launch_type", "r.launchType", ["launchType"], "INTEGER"),
            ("grid_id", "r.gridId", ["gridId"], "BIGINT"),
        ],
        joins={
            "sd": ("demangledName", "LEFT JOIN strings sd ON sd.id = r.demangledName"),
            "ss": ("shortName", "LEFT JOIN strings ss ON ss.id = r.shortName"),
            "sm": ("mangledName", "LEFT JOIN strings sm ON sm.id = r.mangledName"),
        },
    ),
    "api_calls": dict(
        source="CUPTI_ACTIVITY_KIND_RUNTIME",
        required=["start", "end", "globalTid", "correlationId"],
        columns=[
            ("start_ns", "r.start", ["start"], "BIGINT"),
            ("end_ns", 'r."end"', ["end"], "BIGINT"),
            ("dur_ns", 'r."end" - r.start', ["start", "end"], "BIGINT"),
            ("global_tid", "r.globalTid", ["globalTid"], "BIGINT"),
            ("global_pid", "r.globalTid & -16777216", ["globalTid"], "BIGINT"),
            ("pid", "(r.globalTid >> 24) & 16777215", ["globalTid"], "INTEGER"),
            ("tid", "r.globalTid & 16777215", ["globalTid"], "INTEGER"),
            ("correlation_id", "r.correlationId", ["correlationId"], "BIGINT"),
            # nsys stats strips a trailing _vNNNN (substr(name, -6, 2) = '_v')
            ("name", "CASE WHEN substr(sn.value, -6, 2) = '_v' THEN substr(sn.value, 1, length(sn.value) - 6) ELSE sn.value END", ["nameId"], "VARCHAR"),
            ("raw_name", "sn.value", ["nameId"], "VARCHAR"),
            ("return_value", "r.returnValue", ["returnValue"], "BIGINT"),
            ("event_class", "r.eventClass", ["eventClass"], "INTEGER"),
        ],
        joins={"sn": ("nameId", "LEFT JOIN strings sn ON sn.id = r.nameId")},
    ),
    "memcpy": dict(
        source="CUPTI_ACTIVITY_KIND_MEMCPY",
        required=["start", "end", "correlationId", "globalPid"],
        columns=_GPU_COMMON + [
            ("bytes", "r.bytes", ["bytes"], "BIGINT"),
            ("copy_kind", "r.copyKind", ["copyKind"], "INTEGER"),
            ("operation", "'[CUDA memcpy ' || ek.label || ']'", ["copyKind", "@ENUM_CUDA_MEMCPY_OPER"], "VARCHAR"),
            ("src_kind", "es.label", ["srcKind", "@ENUM_CUDA_MEM_KIND"], "VARCHAR"),
            ("dst_kind", "ed.label", ["dstKind", "@ENUM_CUDA_MEM_KIND"], "VARCHAR"),
        ],
        joins={
            "ek": ("copyKind", "LEFT JOIN enum_memcpy ek ON ek.id = r.copyKind"),
            "es": ("srcKind", "LEFT JOIN enum_memkind es ON es.id = r.srcKind"),
            "ed": ("dstKind", "LEFT JOIN enum_memkind ed ON ed.id = r.dstKind"),
        },
    ),
    "memset": dict(
        source="CUPTI_ACTIVITY_KIND_MEMSET",
        required=["start", "end", "correlationId", "globalPid"],
        columns=_GPU_COMMON + [
            ("bytes", "r.bytes", ["bytes"], "BIGINT"),
            ("value", "r.value", ["value"], "INTEGER"),
            ("operation", "'[CUDA memset]'", [], "VARCHAR"),
            ("mem_kind", "em.label", ["memKind", "@ENUM_CUDA_MEM_KIND"], "VARCHAR"),
        ],
        joins={"em": ("memKind", "LEFT JOIN enum_memkind em ON em.id = r.memKind")},
    ),
    "syncs": dict(
        source="CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        required=["start", "end"],
        columns=[c for c in _GPU_COMMON if c[0] != "graph_node_id"] + [
            ("sync_type", "et.label", ["syncType", "@ENUM_CUPTI_SYNC_TYPE"], "VARCHAR"),
            ("event_id", "r.eventId", ["eventId"], "BIGINT"),
        ],
        joins={"et": ("syncType", "LEFT JOIN enum_sync et ON et.id = r.syncType")},
    ),
    "gpus": dict(
        source="TARGET_INFO_GPU",
        required=["id"],
        columns=[
            ("device_id", "coalesce(cd.cudaId, r.id)", ["id"], "INTEGER"),
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
        joins={"cd": ("@TARGET_INFO_CUDA_DEVICE", "LEFT JOIN (SELECT DISTINCT gpuId, cudaId FROM cuda_device) cd ON cd.gpuId = r.id")},
    ),
    "streams": dict(
        source="TARGET_INFO_CUDA_STREAM",
        required=["streamId"],
        columns=[
            ("stream_id", "r.streamId", ["streamId"], "INTEGER"),
            ("pid", "r.processId", ["processId"], "INTEGER"),
            ("context_id", "r.contextId", ["contextId"], "INTEGER"),
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
        joins={"tn": ("nameId", "LEFT JOIN strings tn ON tn.id = r.nameId")},
    ),
}

_ENUMS = {
    "enum_memcpy": "ENUM_CUDA_MEMCPY_OPER",
    "enum_memkind": "ENUM_CUDA_MEM_KIND",
    "enum_sync": "ENUM_CUPTI_SYNC_TYPE",
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
    """Reads SQLite tables as Arrow through ADBC (falls back to sqlite3 if ADBC is absent)."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.sq = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            rows = self.sq.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        except sqlite3.DatabaseError as err:
            raise InputError(f"{path}: not a readable SQLite database ({err}); the file is truncated or corrupt") from err
        self.tables = _resolve_tables([r[0] for r in rows])
        self._adbc = None

    def columns(self, base: str) -> set[str]:
        actual = self.tables.get(base)
        if actual is None:
            return set()
        return {r[1] for r in self.sq.execute(f'PRAGMA table_info("{actual}")')}

    def arrow(self, base: str, cols: list[str], where: str = "") -> pa.Table:
        actual = self.tables[base]
        collist = ", ".join(f'"{c}"' for c in cols)
        sql = f'SELECT {collist} FROM "{actual}" {where}'
        try:
            if self._adbc is None:
                import adbc_driver_sqlite.dbapi as adbc

                self._adbc = adbc.connect(f"file:{self.path}?mode=ro")
            cur = self._adbc.cursor()
            # type inference looks at the first batch only: make it large
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": "1000000"})
            cur.execute(sql)
            tbl = cur.fetch_arrow_table()
            cur.close()
            return tbl
        except ImportError:  # pragma: no cover - adbc is a core dependency
            cur = self.sq.execute(sql)
            names = [d[0] for d in cur.description]
            data = list(zip(*cur.fetchall(), strict=False)) or [[] for _ in names]
            return pa.table({n: list(v) for n, v in zip(names, data, strict=False)})
        except Exception as err:  # ADBC raises its own DatabaseError types
            raise InputError(f"{self.path}: cannot read table {actual} ({str(err).splitlines()[0]}); the export is truncated or corrupt") from err

    def close(self):
        self.sq.close()
        if self._adbc is not None:
            self._adbc.close()


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


def read(path: Path) -> Parsed:
    rd = _Reader(path)
    try:
        return _read(rd, path)
    except sqlite3.DatabaseError as err:
        raise InputError(f"{path}: SQLite error ({err}); the export is truncated or corrupt") from err
    finally:
        rd.close()


def _read(rd: _Reader, path: Path) -> Parsed:
    if "META_DATA_EXPORT" not in rd.tables and "StringIds" not in rd.tables:
        raise InputError(f"{path}: SQLite file but not an Nsight Systems export (no META_DATA_EXPORT or StringIds table)")
    meta = _meta(rd)
    version = meta.get("export_schema_version") or "unknown"
    if "StringIds" not in rd.tables:
        raise InputError(f"{path}: nsys export (schema {version}) without a StringIds table; re-export with `nsys export --type sqlite`")
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in rd.tables and "CUPTI_ACTIVITY_KIND_RUNTIME" not in rd.tables:
        raise InputError(f"{path}: nsys export without CUDA data (no CUPTI_ACTIVITY_KIND_KERNEL table); profile with `nsys profile --trace=cuda,...`")

    con = duckdb.connect()
    try:
        con.register("strings", rd.arrow("StringIds", ["id", "value"]))
        for alias, base in _ENUMS.items():
            if base in rd.tables and {"id", "label"} <= rd.columns(base):
                con.register(alias, rd.arrow(base, ["id", "label"]))
            else:
                con.execute(f"CREATE TEMP TABLE {alias} (id BIGINT, label VARCHAR)")
        if "TARGET_INFO_CUDA_DEVICE" in rd.tables and {"gpuId", "cudaId"} <= rd.columns("TARGET_INFO_CUDA_DEVICE"):
            con.register("cuda_device", rd.arrow("TARGET_INFO_CUDA_DEVICE", ["gpuId", "cudaId"]))

        tables: dict[str, pa.Table] = {}
        for target, spec in SPECS.items():
            tables[target] = _map_table(con, rd, path, version, target, spec)
        tables.update(_nvtx(con, rd, path, version, tables))
        gpus = tables["gpus"]
        if gpus.num_rows:
            names = sorted({n for n in gpus.column("name").to_pylist() if n})
            meta["gpu"] = ", ".join(names)
        return Parsed(kind=KIND, meta=meta, tables=tables)
    finally:
        con.close()


def _map_table(con, rd: _Reader, path: Path, version: str, target: str, spec: dict) -> pa.Table:
    present = rd.columns(spec["source"])
    if not present:
        present_table = False
    else:
        present_table = True
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

    select, raw_cols, aliases = [], set(), set()
    for name, expr, need, typ in spec["columns"]:
        if present_table and available(need):
            # a coalesce over alternatives only names the columns that exist
            for alias, (col, _) in spec["joins"].items():
                if re.search(rf"\b{alias}\.", expr):
                    if col.startswith("@") or col in present:
                        aliases.add(alias)
                    else:
                        expr = re.sub(rf"\b{alias}\.value\b", "NULL", expr)
            raw_cols.update(c for n in need if not n.startswith("@") for c in n.split("|") if c in present)
            select.append(f"CAST({expr} AS {typ}) AS {name}")
        else:
            select.append(f"CAST(NULL AS {typ}) AS {name}")
    if not present_table:
        return con.sql(f"SELECT {', '.join(select)} LIMIT 0").to_arrow_table()
    for alias in aliases:
        col = spec["joins"][alias][0]
        if not col.startswith("@"):
            raw_cols.add(col)
    raw = rd.arrow(spec["source"], sorted(raw_cols | set(spec["required"])))
    con.register("r_raw", raw)
    joins = " ".join(spec["joins"][a][1] for a in sorted(aliases))
    out = con.sql(f"SELECT {', '.join(select)} FROM r_raw r {joins}").to_arrow_table()
    con.unregister("r_raw")
    return out


def _nvtx(con, rd: _Reader, path: Path, version: str, tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """NVTX ranges with names, depth, parent, path and their GPU projection; marks."""
    present = rd.columns("NVTX_EVENTS")
    if present:
        missing = [c for c in ("start", "eventType", "globalTid") if c not in present]
        if missing:
            raise InputError(f"{path}: table NVTX_EVENTS lacks column {missing[0]} (export schema {version})")
        cols = [c for c in _NVTX_COLUMNS if c in present]
        con.register("nvtx_raw", rd.arrow("NVTX_EVENTS", cols))
        fill = ", ".join(f"NULL::{'VARCHAR' if c == 'text' else 'BIGINT'} AS \"{c}\"" for c in _NVTX_COLUMNS if c not in present)
        con.execute(f"CREATE TEMP VIEW ev AS SELECT *{', ' + fill if fill else ''} FROM nvtx_raw")
    else:
        con.execute(
            "CREATE TEMP TABLE ev (start BIGINT, \"end\" BIGINT, eventType BIGINT, text VARCHAR, textId BIGINT, "
            "domainId BIGINT, globalTid BIGINT, endGlobalTid BIGINT, category BIGINT, color BIGINT)"
        )

    # Same naming as nsys stats: domain name from the NvtxDomainCreate event of that
    # domain in that process, range text inline or registered; "domain:text".
    con.execute(f"""
        CREATE TEMP TABLE named AS
        WITH domains AS (
            SELECT e.domainId AS id, e.globalTid & 1099494850560 AS proc,
                   arg_min(coalesce(s.value, e.text), e.start) AS name
            FROM ev e LEFT JOIN strings s ON s.id = e.textId
            WHERE e.eventType = {NVTX_DOMAIN}
            GROUP BY 1, 2
        ), maxts AS (SELECT greatest(max(start), max("end")) AS m FROM ev)
        SELECT row_number() OVER (ORDER BY e.start, e.globalTid, e."end" DESC) - 1 AS range_id,
               e.start AS start_ns,
               coalesce(e."end", (SELECT m FROM maxts)) AS end_ns,
               e."end" IS NOT NULL AS ended,
               e.eventType AS event_type,
               CASE WHEN e.eventType IN ({NVTX_PUSHPOP}, {NVTXT_PUSHPOP}) THEN 'PushPop'
                    WHEN e.eventType IN ({NVTX_STARTEND}, {NVTXT_STARTEND}) THEN 'StartEnd'
                    ELSE 'Mark' END AS style,
               e.domainId AS domain_id,
               coalesce(d.name, '') AS domain,
               coalesce(s.value, e.text, '') AS text,
               coalesce(d.name, '') || ':' || coalesce(s.value, e.text, '') AS name,
               e.globalTid AS global_tid,
               e.endGlobalTid AS end_global_tid,
               e.category AS category,
               e.color AS color
        FROM ev e
        LEFT JOIN strings s ON s.id = e.textId
        LEFT JOIN domains d ON d.id = e.domainId AND d.proc = (e.globalTid & 1099494850560)
        WHERE e.eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTXT_PUSHPOP}, {NVTXT_STARTEND}, {NVTX_MARK})
    """)

    # Nesting, as nsys computes it: the parent of a range is the tightest range on the
    # same thread that contains it (start <= start, end >= end). Ranges that end on
    # another thread take no part. Evaluated as one inequality join (DuckDB IEJoin:
    # sort-based, bounded memory) on keys that put each thread in its own time band.
    con.execute("""
        CREATE TEMP TABLE rng AS
        SELECT n.*, CASE WHEN n.domain = '' THEN n.text ELSE n.name END AS label,
               (dense_rank() OVER (ORDER BY global_tid))::HUGEINT * 18446744073709551616
                 + (start_ns - min(start_ns) OVER ())::HUGEINT AS k0,
               (dense_rank() OVER (ORDER BY global_tid))::HUGEINT * 18446744073709551616
                 + (end_ns - min(start_ns) OVER ())::HUGEINT AS k1
        FROM named n
        WHERE style <> 'Mark' AND end_global_tid IS NULL
    """)
    con.execute("""
        CREATE TEMP TABLE anc AS
        SELECT c.range_id, p.range_id AS ancestor_id,
               (c.start_ns - p.start_ns) + (p.end_ns - c.end_ns) AS tightness
        FROM rng c JOIN rng p
          ON p.k0 <= c.k0 AND p.k1 >= c.k1 AND p.range_id <> c.range_id
    """)
    con.execute("""
        CREATE TEMP TABLE parent AS
        SELECT range_id, arg_min(ancestor_id, tightness) AS parent_id
        FROM anc GROUP BY range_id
    """)
    # depth = length of the parent chain (nsys's "level"); path = range texts along it
    # ('hstu.request/hstu.layer0/hstu_attention'; a named domain's ranges as 'domain:text')
    con.execute("""
        CREATE TEMP TABLE tree AS
        WITH RECURSIVE t(range_id, depth, path, ids) AS (
            SELECT r.range_id, 0, r.label, [r.range_id]
            FROM rng r LEFT JOIN parent p USING (range_id) WHERE p.parent_id IS NULL
            UNION ALL
            SELECT p.range_id, t.depth + 1, t.path || '/' || r.label, list_append(t.ids, p.range_id)
            FROM t JOIN parent p ON p.parent_id = t.range_id JOIN rng r ON r.range_id = p.range_id
            WHERE NOT list_contains(t.ids, p.range_id)
        )
        SELECT range_id, max(depth) AS depth, arg_max(path, depth) AS path FROM t GROUP BY range_id
    """)

    # GPU projection: GPU ops (kernels, memcpy, memset) whose launching API call (same
    # correlationId, same process) lies inside the range on the same thread.
    for name in ("kernels", "memcpy", "memset", "api_calls"):
        con.register(f"t_{name}", tables[name])
    con.execute("""
        CREATE TEMP TABLE ops AS
        SELECT correlation_id, global_pid, start_ns, end_ns FROM t_kernels
        UNION ALL SELECT correlation_id, global_pid, start_ns, end_ns FROM t_memcpy
        UNION ALL SELECT correlation_id, global_pid, start_ns, end_ns FROM t_memset
    """)
    # Only launches from threads that have ranges can project; one inequality join gives
    # every (launch, enclosing range) pair, from which both the per-range projection and
    # each launch's innermost range follow.
    con.execute("""
        CREATE TEMP TABLE bands AS
        SELECT global_tid, dense_rank() OVER (ORDER BY global_tid) AS band
        FROM (SELECT DISTINCT global_tid FROM rng)
    """)
    con.execute("""
        CREATE TEMP TABLE launches AS
        SELECT a.correlation_id, a.global_tid, a.start_ns, a.end_ns,
               min(o.start_ns) AS op_start, max(o.end_ns) AS op_end
        FROM t_api_calls a
        JOIN bands b ON b.global_tid = a.global_tid
        JOIN ops o ON o.correlation_id = a.correlation_id AND o.global_pid = a.global_pid
        GROUP BY ALL
    """)
    con.execute("""
        CREATE TEMP TABLE pairs AS
        WITH z AS (SELECT min(start_ns) AS m FROM rng),
        keyed AS (
            SELECT l.*, b.band::HUGEINT * 18446744073709551616 + (l.start_ns - z.m)::HUGEINT AS k0,
                        b.band::HUGEINT * 18446744073709551616 + (l.end_ns - z.m)::HUGEINT AS k1
            FROM launches l JOIN bands b USING (global_tid) CROSS JOIN z
        )
        SELECT r.range_id, r.style, l.correlation_id, l.global_tid, l.op_start, l.op_end
        FROM rng r JOIN keyed l ON r.k0 <= l.k0 AND r.k1 >= l.k1
    """)
    con.execute("""
        CREATE TEMP TABLE proj AS
        SELECT range_id, min(op_start) AS proj_start_ns, max(op_end) AS proj_end_ns,
               count(DISTINCT correlation_id) AS gpu_ops
        FROM pairs GROUP BY range_id
    """)
    ranges = con.sql("""
        SELECT n.range_id, n.style, n.domain_id, n.domain, n.text, n.name,
               n.start_ns, n.end_ns, n.end_ns - n.start_ns AS dur_ns, n.ended,
               n.global_tid, (n.global_tid >> 24) & 16777215 AS pid, n.global_tid & 16777215 AS tid,
               n.end_global_tid, CAST(n.end_global_tid & 16777215 AS INTEGER) AS end_tid,
               CAST(t.depth AS INTEGER) AS depth, p.parent_id, t.path,
               CAST(coalesce(c.children, 0) AS INTEGER) AS children,
               j.proj_start_ns, j.proj_end_ns, j.proj_end_ns - j.proj_start_ns AS proj_dur_ns,
               CAST(coalesce(j.gpu_ops, 0) AS INTEGER) AS gpu_ops,
               n.category, n.color
        FROM named n
        LEFT JOIN tree t USING (range_id)
        LEFT JOIN parent p USING (range_id)
        LEFT JOIN (SELECT parent_id, count(*) AS children FROM parent JOIN proj USING (range_id) GROUP BY 1) c
               ON c.parent_id = n.range_id
        LEFT JOIN proj j USING (range_id)
        WHERE n.style <> 'Mark'
        ORDER BY n.range_id
    """).to_arrow_table()
    marks = con.sql("""
        SELECT start_ns AS ts_ns, domain, text, name, global_tid,
               CAST((global_tid >> 24) & 16777215 AS INTEGER) AS pid, CAST(global_tid & 16777215 AS INTEGER) AS tid,
               category, color
        FROM named WHERE style = 'Mark' ORDER BY start_ns
    """).to_arrow_table()
    # innermost push/pop range of each GPU op's launch: lets kernels-by-nvtx group by path
    innermost = con.sql("""
        SELECT p.correlation_id, (p.global_tid & -16777216) AS global_pid,
               arg_max(p.range_id, t.depth) AS nvtx_range_id
        FROM pairs p JOIN tree t USING (range_id)
        WHERE p.style = 'PushPop'
        GROUP BY 1, 2
    """).to_arrow_table()
    return {"nvtx_ranges": ranges, "nvtx_marks": marks, "gpu_op_ranges": innermost}
