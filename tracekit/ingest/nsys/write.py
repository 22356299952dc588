"""Writing an export's rows into the store, inside the store's ingest transaction.

``load`` is the loader ``read`` hands the store: the raw Arrow tables registered as
``_nsys_<name>``, reshaped by each table's SELECT (``columns.plan``) straight into the
store tables, in this order: names (``_strings``), NVTX naming and nesting (each launch
needs its innermost range), API calls and GPU ops with their launching calls and idle
gaps, NVTX ranges with their projection, marks, kernel time per range, and the
summaries the named queries read. Arrow copies are freed as soon as their rows are in.
The store's memory limit, handed in, is a budget of the whole process: DuckDB is given,
phase by phase, what the arrays leave of it (``tracekit.ingest.budget``).
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow import from_numpy, scalar, to_numpy
from ..budget import WRITING_MEMORY_MARGIN, MemoryBudget
from . import nvtx, overlap, python
from .arrays import small_pages
from .columns import CALLED_TABLES, ENUMS, GAP_TABLES, OP_TABLES, SPECS, STRIP, Plan, enums_joined
from .launches import LaunchIndex, add_launches, idle_gaps

# Statistics that named queries read instead of aggregating millions of rows at query
# time (exact medians and quantiles take longer than a query may on 2 cores): summary
# table -> SELECT over the run's rows ({run}), computed at ingest after the rows.
_EXEC_STATS = ", ".join(
    f"avg({m}_ns) AS {m}_avg_ns, median({m}_ns) AS {m}_med_ns, min({m}_ns) AS {m}_min_ns, "
    f"max({m}_ns) AS {m}_max_ns, coalesce(stddev_samp({m}_ns), 0) AS {m}_stddev_ns"
    for m in ("total", "api", "queue", "kernel"))
SUMMARIES = {
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

#: the Python stacks' tables (python.read), from their raw tables
_PYTHON = {
    "python_frames": "SELECT stack_id, depth, function, file, line FROM _nsys_python_frames",
    "python_samples": "SELECT sample_id, start AS ts_ns, globalTid AS global_tid, CAST((globalTid >> 24) & 16777215 AS INTEGER) "
                      "AS pid, CAST(globalTid & 16777215 AS INTEGER) AS tid, thread_state, stack_id "
                      "FROM _nsys_python_samples",
}

_TEMPS = ["api_names", "names", "ev", "bands", "cuda_device"]  # (cuda_device: made for an export without it)

_FLUSH_SETTINGS = ("allocator_flush_threshold", "allocator_bulk_deallocation_flush_threshold")


_FLUSH_LOCK = threading.Lock()
_flushing = [0, None]  # ingests inside _flushing_allocator (of any connection), the settings before


@contextlib.contextmanager
def _flushing_allocator(con):
    """DuckDB's allocator gives what a query frees back to the system at once inside
    (its defaults keep up to 128 MB a thread, 512 MB after a bulk free, for the next
    query): the NVTX naming query of a large export frees GBs that the NumPy nesting
    after it needs (12 M ranges: 0.8 GB lower peak RSS). Not for the whole ingest: the
    activity inserts would pay for it in page faults (docs/performance.md); nor for an
    export too small to matter (``MemoryBudget.large``). The settings
    are the DuckDB instance's: where several ingests share one (tracekit.parallel), the
    first in sets them and the last out sets them back."""
    with _FLUSH_LOCK:
        if _flushing[0] == 0:
            # (read from the table of settings: asking a DuckDB without them for them would
            # fail, and a failed statement aborts the ingest's transaction)
            held = dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE list_contains(?, name)",
                                    [list(_FLUSH_SETTINGS)]).fetchall())
            _flushing[1] = [held[s] for s in _FLUSH_SETTINGS] if len(held) == len(_FLUSH_SETTINGS) else None
        _flushing[0] += 1
        if _flushing[1] is not None:
            for name in _FLUSH_SETTINGS:
                con.execute(f"SET {name} = '0MB'")
    failed = True
    try:
        yield
        failed = False
    finally:
        with _FLUSH_LOCK:
            _flushing[0] -= 1
            if _flushing[0] == 0 and _flushing[1] is not None:
                for name, value in zip(_FLUSH_SETTINGS, _flushing[1], strict=True):
                    # after a failure the transaction is aborted and refuses the SET (the settings
                    # are kept: that costs only time); after success its error is raised, or the
                    # COMMIT would drop the run
                    with contextlib.suppress(Exception) if failed else contextlib.nullcontext():
                        con.execute(f"SET {name} = '{value}'")


def insert(con, table: str, run_id: int, select: str) -> int:
    """INSERT the rows of ``select`` into ``table`` with ``run_id``; the number of rows."""
    n = con.execute(f"INSERT INTO {table} BY NAME SELECT {int(run_id)}::INTEGER AS run_id, * FROM ({select})").fetchall()
    return int(n[0][0]) if n else 0


def with_sync_ranges(api: pa.Table, strings: pa.Table | None, nest: nvtx.Nest) -> pa.Table:
    """``api`` with ``_tk_sync_range``: for the calls that wait for the GPU (a name with
    "synchronize" in it, any case: cudaStreamSynchronize, cuCtxSynchronize, ...) the
    innermost push/pop NVTX range open on their thread at their start, NULL for the
    others (a launching call's range is its GPU op's). Few calls: one lookup for them."""
    found = np.full(api.num_rows, -1, np.int64)
    ids = (strings.column("id").filter(pc.match_substring(strings.column("value"), "synchronize", ignore_case=True))
           if strings is not None else [])
    if len(ids) and "nameId" in api.column_names:
        # (a null nameId is in no set: is_in gives false, never null)
        rows = np.flatnonzero(to_numpy(pc.is_in(api.column("nameId"), value_set=ids)))
        if len(rows):
            picked = api.select(["globalTid", "start"]).take(from_numpy(rows))
            inner = nest.innermost(picked.column("globalTid"), picked.column("start"))
            if inner is not None:
                found[rows] = inner
    return api.append_column("_tk_sync_range", from_numpy(found, mask=found < 0))


def _write_activity(con, run_id: int, raw: dict[str, pa.Table], plans: dict[str, Plan], names: list[str],
                    nest: nvtx.Nest, rows: dict[str, int]) -> nvtx.Projection:
    """Write the API calls and GPU ops (counts into ``rows``), then free their Arrow
    copies; returns the innermost ranges' GPU op totals (nvtx.range_totals).

    The API calls are written by DuckDB on a side thread, which then computes the GPU
    ops' idle gaps, while the GPU ops find their launching calls in NumPy here (the
    two take about as long); the connection is not touched here until that insert is
    done."""
    if "api_calls" in raw:
        raw["api_calls"] = with_sync_ranges(raw["api_calls"], raw.get("strings"), nest)
        con.register("_nsys_api_calls", raw["api_calls"])
    with ThreadPoolExecutor(max_workers=1) as side:
        api_insert = side.submit(insert, con, "_api_calls", run_id, plans["api_calls"].select)
        gaps = side.submit(idle_gaps, {t: raw[t] for t in GAP_TABLES if t in raw})
        try:
            launched, calls, ranges = {}, {}, {}
            totals = nvtx.Projection.empty()
            if "api_calls" in raw:
                api = raw["api_calls"]
                index = LaunchIndex(api)
                for t in CALLED_TABLES:
                    if t in raw:
                        launched[t], calls[t], ranges[t] = add_launches(raw[t], api, index, nest)
                nest.launches_matched()
                proj = [t for t in OP_TABLES if t in launched]  # as nsys: not whole graph executions
                totals = nvtx.range_totals([ranges[t] for t in proj], [launched[t] for t in proj],
                                           [calls[t] for t in proj], api.num_rows)
                del api, index, calls, ranges
        finally:
            rows["api_calls"] = api_insert.result()
            gaps = gaps.result()
    for t in [t for t in CALLED_TABLES if t in raw]:
        tbl = launched.pop(t, raw[t])
        for name, arr in zip(("_tk_stream_gap", "_tk_device_gap"), gaps[t], strict=True) if t in gaps else ():
            tbl = tbl.append_column(name, arr)  # (none for a table without the columns gaps need)
        raw[t] = tbl  # one reference only: freed with raw[t] below
        con.register(f"_nsys_{t}", tbl)
    for target, plan in plans.items():
        if target != "api_calls":  # (a table the export lacks: no rows, no statement)
            rows[target] = insert(con, SPECS[target].table or target, run_id, plan.select) if plan.raw_columns else 0
    for target, select in _PYTHON.items():
        if target in raw:
            rows[target] = insert(con, target, run_id, select)
    # the activity rows are in the store now: free their Arrow copies before the NVTX work
    for name in [n for n in raw if n not in ("nvtx", "strings")]:
        con.unregister(f"_nsys_{name}")
        names.remove(f"_nsys_{name}")
        del raw[name]
    return totals


#: nvtx_ranges rows written per INSERT: the range columns are made for one batch at a
#: time (a few row groups) instead of for every range at once
RANGE_BATCH = 1 << 20


def _write_nvtx(con, run_id: int, named: pa.Table, cols: nvtx.RangeColumns, budget: MemoryBudget,
                traced: bool) -> dict[str, int]:
    """NVTX ranges (``named``, with the nesting and projection columns of ``cols``,
    nvtx.project, added a batch at a time, each under DuckDB's writing share of the
    ``budget``); marks; kernel time per innermost range and per range path; the range
    kernel summary (``_range_kernels``). Runs after the op tables are
    written (their ``nvtx_range_id``). ``traced``: the export has NVTX events at all (else,
    as nsys, no range kernel summary: not one row per kernel saying "no range")."""
    rows = {"nvtx_ranges": 0}
    for lo in range(0, named.num_rows, RANGE_BATCH):
        budget.share(WRITING_MEMORY_MARGIN)
        part = named.slice(lo, RANGE_BATCH)
        extra = cols.take(to_numpy(part.column("range_id")))
        for name in nvtx.RangeColumns.NAMES:
            part = part.append_column(name, extra.pop(name))
        con.register("_nsys_ranges", part)
        try:
            rows["nvtx_ranges"] += insert(con, "nvtx_ranges", run_id, f"""
                SELECT range_id, style, domain_id, domain, text, domain || ':' || text AS name,
                       start_ns, end_ns, end_ns - start_ns AS dur_ns, ended,
                       global_tid, (global_tid >> 24) & 16777215 AS pid, global_tid & 16777215 AS tid,
                       end_global_tid, CAST(end_global_tid & 16777215 AS INTEGER) AS end_tid,
                       depth, parent_id, path, children, proj_start_ns, proj_end_ns,
                       proj_end_ns - proj_start_ns AS proj_dur_ns, gpu_ops, category, color
                FROM ({nvtx.with_nulls('_nsys_ranges', part.column_names)})
                WHERE style <> 'Mark'
            """)
        finally:
            con.unregister("_nsys_ranges")
        del part, extra
    # (the marks nsys writes Python stacks in are python_frames and python_samples, not marks)
    rows["nvtx_marks"] = insert(con, "nvtx_marks", run_id, f"""
        SELECT start_ns AS ts_ns, domain, text, domain || ':' || text AS name, global_tid,
               CAST((global_tid >> 24) & 16777215 AS INTEGER) AS pid, CAST(global_tid & 16777215 AS INTEGER) AS tid,
               category, color
        FROM _nsys_named WHERE style = 'Mark' AND domain NOT IN ({", ".join(f"'{d}'" for d in python.DOMAINS)})
    """)
    # kernel time per (innermost push/pop range, kernel): what kernels-by-nvtx sums along
    # range paths. Kernels launched outside every range have no range.
    rows["nvtx_kernel_sum"] = insert(con, "nvtx_kernel_sum", run_id, f"""
        SELECT k.nvtx_range_id, n.value AS name, k.launches, k.total_ns, k.min_ns, k.max_ns
        FROM (SELECT nvtx_range_id, name_id, count(*) AS launches, sum(dur_ns)::BIGINT AS total_ns,
                     min(dur_ns) AS min_ns, max(dur_ns) AS max_ns
              FROM (SELECT nvtx_range_id, name_id, end_ns - start_ns AS dur_ns
                    FROM _kernels WHERE run_id = {int(run_id)})
              GROUP BY nvtx_range_id, name_id) k
        LEFT JOIN _strings n ON n.string_id = k.name_id
    """)
    # the same by the ranges' paths (kernels-by-nvtx): the paths of the ranges with kernels
    # from the range columns, not a join with every range written
    with_kernels = con.execute(f"SELECT DISTINCT nvtx_range_id FROM nvtx_kernel_sum WHERE run_id = {int(run_id)} "
                               "AND nvtx_range_id IS NOT NULL").fetchnumpy()["nvtx_range_id"]
    ids = np.asarray(with_kernels, dtype=np.int64)
    con.register("_nsys_kernel_paths", pa.table({"range_id": from_numpy(ids), "path": cols.paths(ids)}))
    try:
        rows["nvtx_path_kernel_sum"] = insert(con, "nvtx_path_kernel_sum", run_id, f"""
            SELECT p.path, s.name, sum(s.launches)::BIGINT AS launches, sum(s.total_ns)::BIGINT AS total_ns
            FROM nvtx_kernel_sum s LEFT JOIN _nsys_kernel_paths p ON p.range_id = s.nvtx_range_id
            WHERE s.run_id = {int(run_id)}
            GROUP BY p.path, s.name
        """)
    finally:
        con.unregister("_nsys_kernel_paths")
    cols.release()
    rows["nvtx_range_kernel_sum"] = _range_kernels(con, run_id, named, cols) if traced else 0
    return rows


def _range_kernels(con, run_id: int, named: pa.Table, cols: nvtx.RangeColumns) -> int:
    """``nvtx_range_kernel_sum``: nsys's NVTX range kernel summary. A kernel belongs to every
    range of its launching thread that contains the launch call: its innermost push/pop
    range and the push/pop ranges around that (``pushpop_containers``), and the start/end
    ranges around the call (a join of time bands, as the start/end projection). Kernels in
    no range (or with no launching call) make rows without a range. The (range, kernel)
    pairs are grouped by integer keys (the range's domain and text as dictionary codes),
    then named."""
    # each range's group key: its name (domain and text codes) and style; -1: no range
    text = pc.dictionary_encode(named.column("text")).combine_chunks()
    domain = pc.dictionary_encode(named.column("domain")).combine_chunks()
    startend = pc.equal(named.column("style").cast(pa.string()), scalar("StartEnd")).combine_chunks()
    n_dom = max(len(domain.dictionary), 1)
    key_type = np.int32 if 2 * len(text.dictionary) * n_dom < 2**31 else np.int64
    group_of = np.full(len(cols.pp_parent), -1, key_type)
    group_of[to_numpy(named.column("range_id"))] = (
        (to_numpy(text.indices).astype(key_type) * n_dom + to_numpy(domain.indices).astype(key_type)) * 2
        + to_numpy(startend).astype(key_type))
    text_words, domain_words = text.dictionary, domain.dictionary
    del text, domain
    any_startend = pc.any(startend).as_py() or False
    del startend
    k = con.sql(f"SELECT coalesce(nvtx_range_id, -1) AS r, coalesce(launch_global_tid, -1) AS gtid, name_id, "
                f"end_ns - start_ns AS dur{', api_start_ns AS s, api_end_ns AS e' if any_startend else ''} "
                f"FROM _kernels WHERE run_id = {int(run_id)}").fetchnumpy()
    r0 = np.asarray(k.pop("r"), dtype=np.int64)
    pos, rid, repeat = cols.pushpop_containers(r0, group_of)
    alone = r0 < 0  # kernels in no range: one pair each, without a range
    del r0
    if any_startend:
        # a start/end range's key differs from every push/pop range's (its style): a
        # repeat is another start/end range of the kernel with the same name
        con.register("_nsys_launches", pa.table({"k": from_numpy(np.arange(len(alone), dtype=np.int64)),
                                                 "gtid": from_numpy(k["gtid"]), "s": from_numpy(k.pop("s")),
                                                 "e": from_numpy(k.pop("e"))}))
        try:
            se = con.sql(f"SELECT k, range_id FROM ({nvtx.startend_around('SELECT * FROM _nsys_launches')})").fetchnumpy()
        finally:
            con.unregister("_nsys_launches")
        se_k, se_r = (np.asarray(se[c], dtype=np.int64) for c in ("k", "range_id"))
        del se
        se_repeat = nvtx.repeated(se_k, group_of[se_r])
        alone[se_k] = False
        pos, rid, repeat = (np.concatenate(a) for a in ((pos, se_k), (rid, se_r), (repeat, se_repeat)))
        del se_k, se_r, se_repeat
    at = np.flatnonzero(alone)
    del alone
    group = np.concatenate([group_of[rid], np.full(len(at), -1, group_of.dtype)])
    rid = np.concatenate([rid, np.full(len(at), -1, np.int64)]).astype(cols.pp_parent.dtype)
    pos = np.concatenate([pos, at]).astype(np.int32 if len(pos) + len(at) < 2**31 else np.int64)
    first = np.concatenate([~repeat, np.ones(len(at), bool)])  # a kernel counts once in a group
    del at, group_of, repeat
    pairs = pa.table({"g": from_numpy(group), "r": from_numpy(rid), "first": from_numpy(first),
                      **{c: from_numpy(np.asarray(k[c])[pos]) for c in ("gtid", "name_id", "dur")}})
    del k, pos, rid, group, first
    con.register("_nsys_range_kernels", pairs)
    try:
        sums = con.sql("""
            SELECT g, gtid, name_id, count(DISTINCT r) FILTER (WHERE r >= 0) AS range_instances,
                   count(*) FILTER (WHERE first) AS kernel_instances, sum(dur)::BIGINT AS total_ns,
                   avg(dur) AS avg_ns, median(dur) AS med_ns, min(dur) AS min_ns, max(dur) AS max_ns,
                   coalesce(stddev_samp(dur), 0) AS stddev_ns
            FROM _nsys_range_kernels GROUP BY g, gtid, name_id
        """).to_arrow_table()
    finally:
        con.unregister("_nsys_range_kernels")
    del pairs
    g = to_numpy(sums.column("g")).astype(np.int64, copy=False)
    has = g >= 0
    gg = np.where(has, g, 0)
    t_idx, d_idx = (gg // 2) // n_dom, (gg // 2) % n_dom
    if has.any():
        rng = pc.binary_join_element_wise(domain_words.take(from_numpy(d_idx)), text_words.take(from_numpy(t_idx)),
                                          scalar(":"))
    else:  # (an export whose NVTX events hold no range: a domain registered, threads named)
        rng = pa.nulls(len(gg), pa.string())
    named_group, no_name = from_numpy(has), scalar(None, pa.string())
    names = pa.table({
        "range": pc.if_else(named_group, rng, no_name),
        "style": pc.if_else(named_group, pc.if_else(from_numpy(gg % 2 == 1), scalar("StartEnd"), scalar("PushPop")),
                            no_name),
        **{c: sums.column(c) for c in sums.column_names if c != "g"}})
    con.register("_nsys_range_kernel_sums", names)
    try:
        return insert(con, "nvtx_range_kernel_sum", run_id, """
            SELECT p.range, p.style, CASE WHEN p.gtid >= 0 THEN CAST((p.gtid >> 24) & 16777215 AS INTEGER) END AS pid,
                   CASE WHEN p.gtid >= 0 THEN CAST(p.gtid & 16777215 AS INTEGER) END AS tid, p.range_instances, p.kernel_instances, p.total_ns,
                   p.avg_ns, p.med_ns, p.min_ns, p.max_ns, p.stddev_ns, s.value AS name
            FROM _nsys_range_kernel_sums p LEFT JOIN _strings s ON s.string_id = p.name_id
        """)
    finally:
        con.unregister("_nsys_range_kernel_sums")


@small_pages()
def load(con, run_id: int, raw: dict[str, pa.Table], plans: dict[str, Plan], memory_limit: str,
         need: int | None = None, interns: Interns | None = None) -> dict[str, int]:
    """Reshape the raw Arrow tables into the store tables, in the caller's transaction;
    ``memory_limit``: the store's memory limit, a budget of the whole process
    (``budget.MemoryBudget``: DuckDB's share set at each phase, the limit set back
    after); ``need``: the ingest's estimated peak memory; ``interns``: the export's
    ``Interns``. Returns the rows written per table."""
    budget = MemoryBudget(con, memory_limit, need)
    names = []
    for name, tbl in raw.items():
        con.register(f"_nsys_{name}", tbl)
        names.append(f"_nsys_{name}")
    made = [a for a in enums_joined(plans) if a.removeprefix("_nsys_") not in raw]  # (an older export's)
    for alias in made:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {alias} (id BIGINT, label VARCHAR)")
        con.executemany(f"INSERT INTO {alias} VALUES (?, ?)", list(enumerate(ENUMS[alias][1])))
    if "cuda_device" not in raw:  # (an export that does not say a GPU's CUDA device: its id is taken)
        con.execute("CREATE OR REPLACE TEMP TABLE _nsys_cuda_device (gpuId BIGINT, cudaId BIGINT)")
    rows: dict[str, int] = {}
    try:
        budget.share()
        _names(con, raw, interns is not None and interns.present)
        # NVTX nesting first: the op inserts take each launch's innermost range
        names += ["_nsys_ev", "_nsys_named_rows"]  # (registered by nvtx.prepare: unregistered here on error too)
        traced = "nvtx" in raw
        if traced:  # read by nvtx.prepare alone, which frees its Arrow rows once named
            con.unregister("_nsys_nvtx")
            names.remove("_nsys_nvtx")
        with _flushing_allocator(con) if budget.large else contextlib.nullcontext():
            nest = nvtx.prepare(con, raw)
        with budget.writing():
            totals = _write_activity(con, run_id, raw, plans, names, nest, rows)
        ops = " UNION ALL ".join(
            f"SELECT correlation_id, start_ns, end_ns, launch_global_tid, api_start_ns, api_end_ns "
            f"FROM {SPECS[t].table or t} WHERE run_id = {int(run_id)}" for t in OP_TABLES)
        named, nest.named = nest.named, None
        top = pc.max(named.column("range_id")).as_py()
        size = 0 if top is None else int(top) + 1
        cols = nvtx.project(con, ops, nest, totals, size)  # (frees the nesting arrays as it goes)
        del nest, totals
        rows.update(_write_nvtx(con, run_id, named, cols, budget, traced))
        del named, cols
        budget.share()
        for table, select in SUMMARIES.items():
            rows[table] = insert(con, table, run_id, select.format(run=int(run_id)))
        rows.update(overlap.write(con, run_id))
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
    con.execute("DROP VIEW IF EXISTS _nsys_rng")
    con.execute("DROP VIEW IF EXISTS _nsys_named")
    for t in [*_TEMPS, *(a.removeprefix("_nsys_") for a in made)]:
        con.execute(f"DROP TABLE IF EXISTS _nsys_{t}")
    budget.restore()
    return rows


#: each export string and its API-name form (nsys's suffix rule applied once per string)
_API_NAMES = f"SELECT id, value, {STRIP.format('value')} AS stripped FROM _nsys_strings"


def _new_names(raw: dict[str, pa.Table], api_names: str) -> str | None:
    """The SELECT of the kernel and API names (``v``) the export's rows refer to that the
    store's ``_strings`` lacks, from ``api_names`` (a table of ``_API_NAMES``); None where
    its rows refer to no name. Reads the raw tables registered as ``_nsys_<name>``."""
    used = [f'SELECT "{c}" AS id, {api} AS api FROM _nsys_{t}'
            for t, cols, api in (("kernels", ("demangledName", "shortName"), "false"), ("api_calls", ("nameId",), "true"))
            if t in raw for c in cols if c in raw[t].column_names]
    if not used:
        return None
    return f"""
        WITH u AS (SELECT DISTINCT id, api FROM ({' UNION ALL '.join(used)}))
        SELECT DISTINCT v FROM (
            SELECT n.value AS v FROM {api_names} n JOIN u USING (id)
            UNION ALL
            SELECT n.stripped FROM {api_names} n JOIN u USING (id) WHERE u.api
        ) WHERE v IS NOT NULL AND v NOT IN (SELECT value FROM _strings)
    """


def _add_names(con, raw: dict[str, pa.Table], present: bool = False) -> None:
    """``_nsys_api_names`` (``_API_NAMES``), and the kernel and API names this export
    brings that the store lacks added to ``_strings``: ids after the store's last one, in
    name order (the raw tables registered as ``_nsys_<name>``); ``present``: the store
    has them all (``Interns.present``)."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _nsys_api_names AS {_API_NAMES}")
    new = None if present else _new_names(raw, "_nsys_api_names")
    if new is not None:
        # ids in name order after the store's last one: the same export always gets the
        # same ids in a fresh store
        con.execute(f"INSERT INTO _strings SELECT (SELECT coalesce(max(string_id), 0) FROM _strings) "
                    f"+ row_number() OVER (ORDER BY v), v FROM ({new})")


class Interns:
    """The ``interns`` of an export's ``Parsed``: called (``con``), adds the names its rows
    will refer to to the store's ``_strings``, in the caller's transaction, before
    ``load``, whose own names step then finds them there. ``missing(con)``: whether the
    store lacks any of them now (a read: names are only ever added, so a store that has
    them all keeps them, and the call can be left out). ``present``: the store has been
    seen to have them all, by either (``load`` then adds none)."""

    _TABLES = ("strings", "kernels", "api_calls")

    def __init__(self, raw: dict[str, pa.Table]):
        self.raw = raw
        self.present = False

    @contextlib.contextmanager
    def _registered(self, con):
        tables = [t for t in self._TABLES if t in self.raw]
        for t in tables:
            con.register(f"_nsys_{t}", self.raw[t])
        try:
            yield
        finally:
            for t in tables:
                con.unregister(f"_nsys_{t}")

    def missing(self, con) -> bool:
        new = _new_names(self.raw, f"({_API_NAMES})")
        if new is None:
            return False
        with self._registered(con):
            missing = bool(con.execute(f"SELECT EXISTS ({new})").fetchall()[0][0])
        self.present = not missing
        return missing

    def __call__(self, con) -> None:
        with self._registered(con):
            try:
                _add_names(con, self.raw)
            finally:
                con.execute("DROP TABLE IF EXISTS _nsys_api_names")
        self.present = True  # (once the caller commits: load runs after that)


def _names(con, raw: dict[str, pa.Table], present: bool) -> None:
    """``_nsys_names``: each export string with nsys's API-name suffix rule applied once
    per string (not once per call), and the store-wide ``_strings`` ids of both forms,
    after adding the kernel and API names this export brings that the store lacks
    (``present``: none)."""
    _add_names(con, raw, present)
    con.execute("""
        CREATE OR REPLACE TEMP TABLE _nsys_names AS
        SELECT n.id, n.value, n.stripped, s.string_id AS sid, t.string_id AS stripped_sid
        FROM _nsys_api_names n LEFT JOIN _strings s ON s.value = n.value LEFT JOIN _strings t ON t.value = n.stripped
    """)
