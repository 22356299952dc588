"""Nsight Systems SQLite exports -> store tables (the ``nsys`` ingest plugin).

The export is read as Arrow (no DuckDB extension to download, no Python loop per row:
``source``), then reshaped by SQL in the store's own ingest transaction, straight into
the store tables (``write``): names resolved from ``StringIds``, pid/tid decoded from
``globalTid``/``globalPid``, CUDA API ``_vNNNN`` suffixes stripped the way ``nsys
stats`` does (``columns``: one declaration per store column), each GPU op tied to its
launching API call and given its idle time (``launches``), NVTX ranges named, nested
and attributed their GPU work by the ``nvtx_gpu_proj_sum`` rule (``nvtx``), so that the
NVTX queries are plain aggregations.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CaptureWarning, InputError, warn_from_caller
from ...registry import TRACED
from .. import Parsed, sqlite_ints
from ..arrow import from_numpy, scalar
from ..budget import nsys_need
from . import overlap, python, write
from .arrays import small_pages
from .columns import (
    ENUMS,
    GAP_TABLES,
    NVTX_COLUMNS,
    NVTX_PUSHPOP,
    NVTX_REQUIRED,
    NVTX_STARTEND,
    NVTXT_PUSHPOP,
    NVTXT_STARTEND,
    SPECS,
    empty,
    enums_joined,
    plan,
)
from .source import SQLITE_MAGIC, Export

KIND = "nsys"
#: the store tables of CUDA trace events (CUPTI's activity tables: nsys -t cuda), as the
#: queries' @traced check knows them
CUDA_TABLES = tuple(t for t, (what, _) in TRACED.items() if what == "CUDA")
#: what nsys was told to trace (``Export.capture_events``) -> the store tables of those events
TRACED_BY = {"NvtxEvents": ("nvtx_ranges",), "OSRuntime": ("osrt_calls",), "Cuda": CUDA_TABLES,
             "UvmCpuPageFaults": ("um_cpu_faults",), "UvmGpuPageFaults": ("um_gpu_faults",),
             "CpuSamples": ("cpu_samples", "cpu_sample_frames"), "GpuMemoryUsage": ("gpu_memory", "gpu_memory_pools"),
             "CudaBacktraces": ("api_frames",), "PythonSamples": ("python_samples",)}


def sniff(path: Path, head: bytes) -> bool:
    # Any SQLite file is ours to judge: an SQLite file that is not an nsys export gets a
    # precise error from read() rather than "unrecognised".
    return head.startswith(SQLITE_MAGIC)


@small_pages()
def read(path: Path) -> Parsed:
    """Check the export and read the columns we need as Arrow (tables in parallel).

    The reshaping happens in ``write.load`` inside the store's ingest transaction,
    straight into the store tables: no second copy of the rows.
    """
    export = Export(path)
    try:
        return _read(export, path)
    except sqlite_ints.ERRORS as err:
        raise InputError(f"{path}: SQLite error ({sqlite_ints.said(err)}); the export is truncated or corrupt") from err
    finally:
        export.close()


def memory_need(path: Path) -> int | None:
    """The estimated peak memory (bytes) of ingesting the export, from its tables' row
    counts (``max(rowid)``: no scan), before any of its rows is read; None where the file
    cannot tell (``read`` then says what is wrong with it)."""
    try:
        export = Export(path)
    except InputError:
        return None
    try:
        read = {spec.source for spec in SPECS.values()} | {base for base, _ in ENUMS.values()}
        read |= {"StringIds", "TARGET_INFO_CUDA_DEVICE"}
        nvtx, kernels = export.row_estimate("NVTX_EVENTS"), export.row_estimate(SPECS["kernels"].source)
        nccl = export.names_starting(overlap.PREFIX)
        return nsys_need(sum(export.row_estimate(t) for t in read) - kernels, nvtx, kernels, nccl)
    except sqlite_ints.ERRORS:
        return None
    finally:
        export.close()


def _read(export: Export, path: Path) -> Parsed:
    tables = export.tables
    if "META_DATA_EXPORT" not in tables and "StringIds" not in tables:
        raise InputError(f"{path}: SQLite file but not an Nsight Systems export (no META_DATA_EXPORT or StringIds table)")
    meta = export.meta()
    version = meta.get("export_schema_version") or "unknown"
    if "StringIds" not in tables:
        raise InputError(f"{path}: nsys export (schema {version}) without a StringIds table; re-export with `nsys export --type sqlite`")
    lacking = [c for c in ("id", "value") if c not in export.columns("StringIds")]
    if lacking:  # (every name is read from it)
        raise InputError(f"{path}: table StringIds lacks column {lacking[0]} (export schema {version}); the export is "
                         "corrupt")
    # a capture without CUDA (nsys -t nvtx,osrt: a host-side program) ingests; one without
    # any event tracekit reads has nothing to answer
    if not any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables) and not {"NVTX_EVENTS", "OSRT_API"} & set(tables):
        said = [what for event, what in (("Cuda", "CUDA"), ("NvtxEvents", "NVTX"), ("OSRuntime", "OS runtime"))
                if event in export.capture_events()]
        if said:  # told to trace them, nsys recorded none: the profiled processes made no such call
            raise InputError(f"{path}: nsys export without CUDA, NVTX or OS runtime events: nsys traced "
                             f"{', '.join(said)} but recorded none (did the profiled program run its GPU work under "
                             "nsys, in the process tree nsys followed?); nothing to ingest")
        raise InputError(f"{path}: nsys export without CUDA, NVTX or OS runtime events (no CUPTI_ACTIVITY_KIND_*, "
                         "NVTX_EVENTS or OSRT_API table); profile with `nsys profile -t cuda,nvtx,osrt`")

    # what to read: name -> (the export's table, its columns)
    plans = {t: plan(export, path, version, t, spec) for t, spec in SPECS.items()}
    if plans["gpu_metrics"].raw_columns and not plans["gpu_metric_names"].raw_columns:
        # samples of metrics the export does not name: nothing to read them by
        if "TARGET_INFO_GPU_METRICS" not in tables:
            warn_from_caller(CaptureWarning(f"{path}: GPU_METRICS without TARGET_INFO_GPU_METRICS (the metrics' "
                                            "names); the GPU's sampled counters left out"))
        plans["gpu_metrics"] = empty("gpu_metrics", SPECS["gpu_metrics"])
    jobs: dict[str, tuple[str, list[str]]] = {"strings": ("StringIds", ["id", "value"])}
    for alias in enums_joined(plans):
        base = ENUMS[alias][0]
        if base in tables and {"id", "label"} <= export.columns(base):
            jobs[alias.removeprefix("_nsys_")] = (base, ["id", "label"])
    if {"gpuId", "cudaId"} <= export.columns("TARGET_INFO_CUDA_DEVICE"):
        jobs["cuda_device"] = ("TARGET_INFO_CUDA_DEVICE", ["gpuId", "cudaId"])
    elif {"id", "cuDevice"} <= export.columns("TARGET_INFO_GPU"):  # (exports before nsys 2025)
        jobs["cuda_device"] = ("TARGET_INFO_GPU", ["id", "cuDevice"])
    for target, p in plans.items():
        if p.raw_columns:
            jobs[target] = (p.source, p.raw_columns)
    nvtx_present = export.columns("NVTX_EVENTS")
    if nvtx_present:
        missing = [c for c in NVTX_REQUIRED if c not in nvtx_present]
        if missing:
            raise InputError(f"{path}: table NVTX_EVENTS lacks column {missing[0]} (export schema {version})")
        cols = [c for c in NVTX_COLUMNS if c in nvtx_present]
        ints = [c for c in cols if c != "text"]
        if "text" in cols and export.integer_columns("NVTX_EVENTS", ints):
            # the integers through the page decoder, the text alone through SQLite (read
            # whole through SQLite, millions of ranges took 5x longer); joined by position
            jobs["nvtx"], jobs["nvtx_text"] = ("NVTX_EVENTS", ints), ("NVTX_EVENTS", ["text"])
        else:
            jobs["nvtx"] = ("NVTX_EVENTS", cols)

    # the store tables the export has a source for, or whose events nsys was told to trace
    # (it writes no table for a kind of event that never happened): an empty table then
    # means "traced, none happened", not "not traced" (the @traced queries tell the two
    # apart; where the export does not say, a CUPTI table of any kind says CUDA was traced)
    traced = {t for t, p in plans.items() if p.raw_columns} | ({"nvtx_ranges"} if nvtx_present else set())
    events = export.capture_events()
    traced |= {t for event, ts in TRACED_BY.items() if event in events for t in ts}
    if not events:  # (nsys before 2023.3: a kind without a table may have been traced, with none)
        meta["traced_said"] = False
    if traced & set(CUDA_TABLES):
        traced |= set(CUDA_TABLES)
    meta["traced"] = sorted(traced)
    options = export.capture_options()
    if options:  # (diff's setup comparison: --cuda-graph-trace changes what a graph launch records)
        meta["nsys_options"] = options
    raw = export.read(jobs)
    if "Cuda" in events and not any(raw[t].num_rows for t in CUDA_TABLES if t in raw):
        warn_from_caller(CaptureWarning(
            f"{path}: nsys traced CUDA but recorded no CUDA event (no API call, kernel or copy): the capture's window "
            "(nsys --delay, --duration, --capture-range) held none of the program's GPU work, or the work ran in a "
            "process nsys did not follow; its kernel and CUDA API questions will answer no row"))
    stacks = python.read(export, path, raw.get("strings"))
    if stacks is None and "PythonSamples" in events:  # (their frames left out of the export: python.read warned)
        traced.discard("python_samples")
        meta["traced"] = sorted(traced)
    _calls_with_their_backtraces(raw, stacks, "NVTX_PAYLOAD_SCHEMAS" in tables)
    if "cuda_device" in raw:
        raw["cuda_device"] = raw["cuda_device"].rename_columns(["gpuId", "cudaId"])
    if "nvtx_text" in raw:  # both in rowid order: the decoder walks the table's b-tree, SQLite is told to
        text = raw.pop("nvtx_text").column("text")
        if len(text) != raw["nvtx"].num_rows:
            raise InputError(f"{path}: table NVTX_EVENTS read as {raw['nvtx'].num_rows:,} rows and as "
                             f"{len(text):,}; the export is corrupt")
        raw["nvtx"] = raw["nvtx"].append_column("text", text)

    _check_durations(path, raw, meta.get("session_stop_ns"))
    _check_sizes(path, raw)
    _number_memory_events(raw)
    _check_names(path, raw)
    _check_nvtx_times(path, raw, meta.get("session_stop_ns"))
    _check_nvtx_threads(path, raw)
    _cuda_gpus_only(raw)

    gpu_names = []
    if "gpus" in raw and "name" in raw["gpus"].column_names:
        gpu_names = sorted({n for n in raw["gpus"].column("name").to_pylist() if n})
    if gpu_names:
        meta["gpu"] = ", ".join(gpu_names)
    nvtx_rows = raw["nvtx"].num_rows if "nvtx" in raw else 0
    kernel_rows = raw["kernels"].num_rows if "kernels" in raw else 0
    nccl = "strings" in raw and pc.any(pc.starts_with(raw["strings"].column("value"), overlap.PREFIX)).as_py() is True
    parsed = Parsed(kind=KIND, meta=meta, memory_need=nsys_need(
        sum(t.num_rows for t in raw.values()) - nvtx_rows - kernel_rows, nvtx_rows, kernel_rows, nccl))
    interns = write.Interns(raw)
    parsed.loaders.append(functools.partial(write.load, raw=raw, plans=plans, need=parsed.memory_need, interns=interns))
    parsed.interns.append(interns)
    return parsed


def _cuda_gpus_only(raw: dict[str, pa.Table]) -> None:
    """The GPUs of a run are those CUDA can use: a Windows export lists every display
    adapter (a laptop's integrated graphics, the basic render driver), with 0 SMs."""
    import pyarrow.compute as pc

    gpus = raw.get("gpus")
    if gpus is not None and "smCount" in gpus.column_names:
        raw["gpus"] = gpus.filter(pc.fill_null(pc.greater(gpus.column("smCount"), scalar(0)), scalar(True)))


#: how long after the capture stopped (ANALYSIS_DETAILS.stopTime) a row may still end: an hour,
#: or the capture's own length where longer (every real export's rows end before the stop; a
#: later end is a damaged clock value, e.g. INT64_MAX, which top-kernels showed as 292 years)
LATE_NS = 3_600 * 10**9


def _ends_too_late(path: Path, table: str, tbl: pa.Table, stop_ns: int | None, noun: tuple[str, str]) -> None:
    """Refuse ``table`` where a row ends more than ``LATE_NS``, or the capture's length, after
    the capture stopped at ``stop_ns`` (None: the export does not say when)."""
    if stop_ns is None or stop_ns <= 0 or "end" not in tbl.column_names or not len(tbl):
        return  # (no stop, or a damaged one: nothing to bound the ends by)
    limit = min(stop_ns + max(stop_ns, LATE_NS), 2**63 - 1)
    late = pc.fill_null(pc.greater(tbl.column("end"), scalar(limit)), scalar(False))
    _refuse_rows(path, table, late, (*noun, f"ending long after the capture stopped at {stop_ns / 1e9:,.3f} s"),
                 lambda i: f"end {tbl.column('end')[i].as_py()} ns")


def _check_durations(path: Path, raw: dict[str, pa.Table], stop_ns: int | None) -> None:
    """GPU work and CUDA API calls end at or after they start: CUPTI times both ends of
    each, and every time query sums end - start; a row that ends first is a damaged
    export, refused rather than summed into negative totals; so is a row of any timed table
    that ends long after the capture stopped (``stop_ns``, ``_ends_too_late``)."""
    import pyarrow.compute as pc

    for name in (*GAP_TABLES, "api_calls"):
        tbl = raw.get(name)
        if tbl is None or not {"start", "end"} <= set(tbl.column_names):
            continue
        # (nsys times both ends of every row: one without a time would be counted and not summed)
        if tbl.column("start").null_count or tbl.column("end").null_count:
            untimed = pc.or_(pc.is_null(tbl.column("start")), pc.is_null(tbl.column("end")))
            _refuse_rows(path, SPECS[name].source, untimed, ("row", "rows", "without a start or an end time"),
                         lambda i, t=tbl: f"start {_sql(t.column('start')[i])}, end {_sql(t.column('end')[i])}")
        if name == "api_calls" and "globalTid" in tbl.column_names and tbl.column("globalTid").null_count:
            _refuse_rows(path, SPECS[name].source, pc.is_null(tbl.column("globalTid")),  # (a call runs on a thread)
                         ("call", "calls", "without a thread"), lambda i, t=tbl: f"start {_sql(t.column('start')[i])}, "
                                                                           "globalTid NULL")
        back = pc.less(tbl.column("end"), tbl.column("start"))
        n = pc.sum(back).as_py() or 0
        if n:
            first = pc.index(back, scalar(True)).as_py()
            raise InputError(f"{path}: table {SPECS[name].source}: {n:,} row{'s end' if n > 1 else ' ends'} "
                             f"before {'they start' if n > 1 else 'it starts'} (the first: row {first + 1:,}, start {tbl.column('start')[first].as_py()}, "
                             f"end {tbl.column('end')[first].as_py()}); the export is corrupt")
    for name, tbl in raw.items():  # (NVTX's ranges apart: _check_nvtx_times)
        if name != "nvtx" and name in SPECS and {"start", "end"} <= set(tbl.column_names):
            _ends_too_late(path, SPECS[name].source, tbl, stop_ns, ("row", "rows"))


def _check_sizes(path: Path, raw: dict[str, pa.Table]) -> None:
    """GPU memory is allocated and freed in sizes of 0 bytes or more: a negative size is a damaged
    export, refused rather than taken off the memory live (every GPU memory query sums them)."""
    tbl = raw.get("gpu_memory")
    if tbl is None or "bytes" not in tbl.column_names:
        return
    _refuse_rows(path, SPECS["gpu_memory"].source, pc.less(tbl.column("bytes"), scalar(0)),
                 ("row", "rows", "with a negative size"), lambda i: f"{tbl.column('bytes')[i].as_py()} bytes")


def _calls_with_their_backtraces(raw: dict[str, pa.Table], stacks: python.Stacks | None, payloads: bool) -> None:
    """The CUDA API calls without nsys's backtrace events, each call with its stack's id
    (``_tk_callchain``) and its Python stack's (``_tk_python_stack``); the Python stacks'
    frames and the Python samples (``python_frames``, ``python_samples``) beside them.
    nsys --cudabacktrace writes a call it unwound twice in CUPTI_ACTIVITY_KIND_RUNTIME: the
    call, and a "CUDA backtrace" event (eventClass 67: the same thread and correlation id, a
    span around the call's, its name without the _vNNNN) that holds the stack (callchainId,
    CUDA_CALLCHAINS). nsys stats counts both as calls (its cuda_api_sum lists such a call
    twice); tracekit counts the call once. An export whose calls carry their stack themselves
    keeps it. nsys --python-backtrace=cuda writes the call's Python stack as a mark on its
    thread at the backtrace event's start (the call's own, where there is no such event).
    ``payloads``: the export has NVTX payload schemas, where Python stacks could be (the
    column ``_tk_python_stack`` is added then, NULL where none is found)."""
    marks = None
    if stacks is not None:
        raw["python_frames"] = stacks.frames
        kind = stacks.marks.column("kind")
        sampled = stacks.marks.filter(pc.equal(kind, "sample"))
        if sampled.num_rows:  # (numbered in the export's order)
            raw["python_samples"] = sampled.drop_columns(["kind"]).append_column(
                "sample_id", pa.array(np.arange(sampled.num_rows, dtype=np.int64)))
        marks = stacks.marks.filter(pc.equal(kind, "call"))
    api = raw.get("api_calls")
    if api is None:
        return
    # (keys of thread and correlation id, correlation ids being a process's own; and of thread
    # and time, where a Python stack was taken)
    def key(t: pa.Table, col: str) -> pa.Array:
        return pc.binary_join_element_wise(pc.cast(t.column("globalTid"), pa.string()),
                                           pc.cast(t.column(col), pa.string()), ":")

    events = None
    if "eventClass" in api.column_names and "callchainId" in api.column_names:
        backtrace = pc.fill_null(pc.equal(api.column("eventClass"), scalar(67)), scalar(False))
        if pc.any(backtrace).as_py():
            events = api.filter(backtrace)
            api = api.filter(pc.invert(backtrace))
    # each call's row among the backtrace events (None: the calls are their own)
    at = pc.index_in(key(api, "correlationId"), value_set=key(events, "correlationId")) if events is not None else None
    if "callchainId" in api.column_names:
        chain = api.column("callchainId") if at is None else pc.take(events.column("callchainId"), at)
        api = api.append_column("_tk_callchain", pc.cast(chain, pa.int64()))
    if payloads:
        stack = pa.nulls(api.num_rows, pa.int64())
        if marks is not None and marks.num_rows:
            anchors = api if events is None else events
            stack = pc.take(marks.column("stack_id"), pc.index_in(key(anchors, "start"), value_set=key(marks, "start")))
            stack = stack if at is None else pc.take(stack, at)
        api = api.append_column("_tk_python_stack", stack)
    raw["api_calls"] = api


def _number_memory_events(raw: dict[str, pa.Table]) -> None:
    """Each GPU memory event's place in the export (``_tk_row``, read in rowid order): nsys writes
    them in the order they happened, and those before a capture range opened all at its start, at
    time 0, so the order that pairs a free with its allocation where times are equal is this one."""
    tbl = raw.get("gpu_memory")
    if tbl is not None:
        raw["gpu_memory"] = tbl.append_column("_tk_row", pa.array(np.arange(tbl.num_rows, dtype=np.int64)))


def _range_kinds(typ: pa.DataType) -> pa.Array:
    """The NVTX event types of a range, as an array of ``typ`` (made from NumPy: pyarrow imports
    pandas to read a Python list, 0.2-0.5 s a command)."""
    return from_numpy(np.array([NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND], np.int64)).cast(typ)


def _check_nvtx_times(path: Path, raw: dict[str, pa.Table], stop_ns: int | None) -> None:
    """An NVTX range starts, and ends (where it did) no earlier and not long after the capture
    stopped: one without a start, or that ends before it starts or too late, is a damaged
    export, refused as GPU work is (``_check_durations``): its duration would enter every
    range's statistics."""
    tbl = raw.get("nvtx")
    if tbl is None:
        return
    _ends_too_late(path, "NVTX_EVENTS", tbl, stop_ns, ("range", "ranges"))
    # (one pass where the export is whole: the ranges are told from the marks only where needed)
    back = pc.less(tbl.column("end"), tbl.column("start")) if "end" in tbl.column_names else None
    if not tbl.column("start").null_count and (back is None or not pc.any(back).as_py()):
        return
    kinds = _range_kinds(tbl.column("eventType").type)
    ranges = pc.fill_null(pc.is_in(tbl.column("eventType"), value_set=kinds), scalar(False))
    _refuse_rows(path, "NVTX_EVENTS", pc.and_(ranges, pc.is_null(tbl.column("start"))),
                 ("range", "ranges", "without a start time"), lambda i: f"start NULL, end {_sql(tbl.column('end')[i])}")
    if back is not None:
        _refuse_rows(path, "NVTX_EVENTS", pc.fill_null(pc.and_(ranges, back), scalar(False)),
                     ("range", "ranges", "that end before they start"),
                     lambda i: f"start {_sql(tbl.column('start')[i])}, end {_sql(tbl.column('end')[i])}")


def _check_nvtx_threads(path: Path, raw: dict[str, pa.Table]) -> None:
    """An NVTX range opens on a thread (``globalTid``): push/pop ranges nest per thread, and
    so do start/end ranges that end on the thread they started on. One without a thread
    (and not ended on another) is a damaged export, refused rather than failing inside the
    nesting; a mark or a domain's creation without one is kept."""
    tbl = raw.get("nvtx")
    if tbl is None or tbl.column("globalTid").null_count == 0:
        return
    kinds = _range_kinds(tbl.column("eventType").type)
    bad = pc.and_(pc.is_null(tbl.column("globalTid")), pc.is_in(tbl.column("eventType"), value_set=kinds))
    if "endGlobalTid" in tbl.column_names:
        bad = pc.and_(bad, pc.is_null(tbl.column("endGlobalTid")))
    _refuse_rows(path, "NVTX_EVENTS", bad, ("range", "ranges", "without a thread"),
                 lambda i: f"start {tbl.column('start')[i].as_py()}, globalTid NULL")


def _sql(value: pa.Scalar) -> str:
    """A value of a row as a refusal names it: NULL for none."""
    v = value.as_py()
    return "NULL" if v is None else str(v)


def _refuse_rows(path: Path, table: str, bad: pa.ChunkedArray, said: tuple[str, str, str], detail) -> None:
    """A damaged export refused in one line where any row of ``table`` is ``bad``: how many
    (``said``: the noun, its plural, what is wrong) and the first, with ``detail(index)``."""
    n = pc.sum(bad).as_py() or 0
    if n:
        first = pc.index(bad, scalar(True)).as_py()
        raise InputError(f"{path}: table {table}: {n:,} {said[0] if n == 1 else said[1]} {said[2]} (the first: row "
                         f"{first + 1:,}, {detail(first)}); the export is corrupt")


def _check_names(path: Path, raw: dict[str, pa.Table]) -> None:
    """Kernels and API calls name themselves through StringIds: where not one of a table's
    name ids is there (an emptied or damaged StringIds), every name would be NULL and
    every query would lump all of them together; refused. (A few ids missing leave those
    names NULL: nsys versions differ in what they register.)"""
    import pyarrow.compute as pc

    ids = raw["strings"].column("id") if "strings" in raw else pa.nulls(0, pa.int64())
    for name, col in (("kernels", "demangledName"), ("kernels", "shortName"), ("api_calls", "nameId")):
        tbl = raw.get(name)
        if tbl is None or col not in tbl.column_names or tbl.column(col).null_count == tbl.num_rows:
            continue
        if not pc.any(pc.is_in(tbl.column(col), value_set=ids.cast(tbl.column(col).type))).as_py():
            raise InputError(f"{path}: none of the names of table {SPECS[name].source} (column {col}) is in "
                             f"StringIds ({len(ids):,} strings); the export is corrupt")
