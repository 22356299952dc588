"""The store's nsys columns, one declaration each: the SQL expression over the export's
raw table that gives it, the raw columns it needs, its DuckDB type.

Schemas differ between nsys releases: columns are mapped by presence, never by version
number. A column whose raw inputs are absent becomes NULL of its type; a table that
lacks one of its ``required`` columns is a one-line ``InputError`` naming the table, the
column and the export version; a table the export lacks is an empty store table.
``plan`` turns a table's declarations into the SELECT that reshapes it (run by
``write``, over the raw rows registered as ``_nsys_<target>`` and aliased ``r``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ...errors import CaptureWarning, InputError, warn_from_caller

if TYPE_CHECKING:
    from .source import Export

# NVTX event types (ENUM_NSYS_EVENT_TYPE)
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND, NVTX_DOMAIN = (
    34, 59, 60, 70, 71, 75,
)
#: the NVTX_EVENTS columns read (those an export has); ``NVTX_REQUIRED`` it must have
NVTX_COLUMNS = ["start", "end", "eventType", "text", "textId", "domainId", "globalTid",
                "endGlobalTid", "category", "color"]
NVTX_REQUIRED = ["start", "eventType", "globalTid"]

#: nsys stats strips a trailing _vNNNN from CUDA API names (substr(name, -6, 2) = '_v')
STRIP = "CASE WHEN substr({0}, -6, 2) = '_v' THEN substr({0}, 1, length({0}) - 6) ELSE {0} END"

#: the GPU ops of nsys's reports (its projection of NVTX ranges counts these)
OP_TABLES = ("kernels", "memcpy", "memset")
#: every table of GPU work: also whole CUDA graph executions (--cuda-graph-trace=graph)
GAP_TABLES = (*OP_TABLES, "graph_execs")
#: every table whose rows were made by a CUDA API call (its correlation id): the GPU's work and
#: the GPU memory allocated and freed
CALLED_TABLES = (*GAP_TABLES, "gpu_memory")
#: the raw columns the idle gaps of GPU ops are computed from (launches.idle_gaps)
GAP_INPUTS = ["start", "end", "deviceId", "streamId"]


class Column(NamedTuple):
    """A store column: ``expr`` over the raw table ``r`` (and the joins' aliases), the
    raw columns it needs (``a|b``: either; ``@TABLE``: a table of the export), its type."""

    name: str
    expr: str
    needs: list[str]
    type: str


class Filter(NamedTuple):
    """The rows of a raw table a store table keeps: ``expr`` over ``r``, true to keep; an
    export that lacks one of the raw columns it ``needs`` keeps every row."""

    expr: str
    needs: list[str]


@dataclass
class TableSpec:
    """A store table filled from one raw table of the export."""

    source: str  # the export's table (highest _V<n> version)
    required: list[str]  # raw columns without which the table cannot be ingested
    columns: list[Column]
    joins: dict[str, tuple[str, str]] = field(default_factory=dict)  # alias -> (raw column or @TABLE, JOIN clause)
    table: str | None = None  # the store table written, when not the target's name (a view reads it)
    where: Filter | None = None  # the raw rows kept (default: all)
    # read instead where ``source`` lacks a required column (another nsys version's schema)
    fallback: TableSpec | None = None
    #: a table the export may do without: one that lacks a required column is left out with a
    #: warning (``CaptureWarning``), not the export refused
    optional: bool = False


# an interval's start, end and duration; a thread's global id and its pid and tid
_SPAN = [
    Column("start_ns", "r.start", ["start"], "BIGINT"),
    Column("end_ns", 'r."end"', ["end"], "BIGINT"),
    Column("dur_ns", 'r."end" - r.start', ["start", "end"], "BIGINT"),
]
# a process's global id and its pid (an event of a process, not of a thread)
_PROCESS = [
    Column("global_pid", "r.globalPid", ["globalPid"], "BIGINT"),
    Column("pid", "(r.globalPid >> 24) & 16777215", ["globalPid"], "INTEGER"),
]
# a stream-ordered pool's size (the memory it holds from the device) and its bytes in use, at an event
_POOL_SIZE = [
    Column("pool_reserved_bytes", "r.localMemoryPoolSize", ["localMemoryPoolSize"], "BIGINT"),
    Column("pool_used_bytes", "r.localMemoryPoolUtilizedSize", ["localMemoryPoolUtilizedSize"], "BIGINT"),
]
_THREAD = [
    Column("global_tid", "r.globalTid", ["globalTid"], "BIGINT"),
    Column("pid", "(r.globalTid >> 24) & 16777215", ["globalTid"], "INTEGER"),
    Column("tid", "r.globalTid & 16777215", ["globalTid"], "INTEGER"),
]

# a frame of a call stack nsys unwound (SAMPLING_CALLCHAINS, OSRT_CALLCHAINS): depth 0 the
# instruction, each caller one deeper, the names resolved
_FRAME = [
    Column("depth", "r.stackDepth", ["stackDepth"], "INTEGER"),
    Column("function", "sf.value", ["symbol"], "VARCHAR"),
    Column("module", "sm.value", ["module"], "VARCHAR"),
    Column("unresolved", "r.unresolved <> 0", ["unresolved"], "BOOLEAN"),
    Column("kernel_mode", "r.kernelMode <> 0", ["kernelMode"], "BOOLEAN"),
]
_FRAME_JOINS = {"sf": ("symbol", "LEFT JOIN _nsys_strings sf ON sf.id = r.symbol"),
                "sm": ("module", "LEFT JOIN _nsys_strings sm ON sm.id = r.module")}


def _callchains(source: str) -> TableSpec:
    """The frames of the call stacks of a table of calls (OSRT_CALLCHAINS, CUDA_CALLCHAINS: a
    stack's id, then a row per frame); optional: an odd one leaves the stacks out, not the export
    refused."""
    return TableSpec(source=source, required=["id", "symbol", "stackDepth"], optional=True,
                     columns=[Column("callchain_id", "r.id", ["id"], "BIGINT"), *_FRAME], joins=_FRAME_JOINS)

_GPU_COMMON = [
    *_SPAN,
    Column("device_id", "r.deviceId", ["deviceId"], "BIGINT"),
    # context and stream; NULL for an op on none (Unified Memory migrations: nsys writes 0,
    # CUPTI's ids start at 1, and nsys stats prints no Ctx/Strm for them)
    Column("context_id", "nullif(r.contextId, 0)", ["contextId"], "BIGINT"),
    # green context (CUDA 12.4+ SM partition) the op ran in; NULL outside any (nsys writes 0)
    Column("green_context_id", "nullif(r.greenContextId, 0)", ["greenContextId"], "BIGINT"),
    Column("stream_id", "nullif(r.streamId, 0)", ["streamId"], "BIGINT"),
    Column("correlation_id", "r.correlationId", ["correlationId"], "BIGINT"),
    *_PROCESS,
    Column("graph_node_id", "r.graphNodeId", ["graphNodeId"], "BIGINT"),
]
# idle time before a GPU op on its stream and on its device (launches.idle_gaps)
_GAPS = [
    Column("stream_gap_ns", "r._tk_stream_gap", GAP_INPUTS, "BIGINT"),
    Column("device_gap_ns", "r._tk_device_gap", GAP_INPUTS, "BIGINT"),
]

# The API call that launched a GPU op (same correlation id, same process), found by
# launches.add_launches and carried as ``_tk_api_*`` columns of the raw op tables.
_API = "@CUPTI_ACTIVITY_KIND_RUNTIME"
_LAUNCH = [
    Column("launch_global_tid", "r._tk_api_tid", [_API], "BIGINT"),
    Column("launch_tid", "r._tk_api_tid & 16777215", [_API], "INTEGER"),
    Column("api_start_ns", "r._tk_api_start", [_API], "BIGINT"),
    Column("api_end_ns", "r._tk_api_end", [_API], "BIGINT"),
    Column("api_name", "an.stripped", [_API], "VARCHAR"),
    # innermost push/pop NVTX range around the launch call on its thread (nvtx.Nest.innermost)
    Column("nvtx_range_id", "r._tk_api_range", [_API], "BIGINT"),
]
_LAUNCH_JOINS = {"an": (_API, "LEFT JOIN _nsys_names an ON an.id = r._tk_api_name")}
# kernels keep the launch API's name as a _strings id (see schema_nsys.sql)
_LAUNCH_IDS = [c if c.name != "api_name" else Column("api_name_id", "an.stripped_sid", c.needs, "BIGINT")
               for c in _LAUNCH]

# a GPU's metrics (typeId's low byte: TARGET_INFO_GPU.id) under its CUDA device id: one per GPU
# (the lowest, where processes numbered it apart), the GPU id itself where the export maps none
_GPU_CUDA_JOIN = ("LEFT JOIN (SELECT gpuId, min(cudaId) AS cudaId FROM _nsys_cuda_device WHERE cudaId >= 0 "
                  "GROUP BY gpuId) cd ON cd.gpuId = (r.typeId & 255)")
_GPU_MAPS = "EXISTS (SELECT 1 FROM _nsys_cuda_device WHERE cudaId >= 0)"
_GPU_DEVICE = f"CASE WHEN {_GPU_MAPS} THEN cd.cudaId ELSE r.typeId & 255 END"
_GPU_MAPPED = f"cd.cudaId IS NOT NULL OR NOT {_GPU_MAPS}"
#: a Unified Memory migration: copy kinds Unified Host-to-Device, Device-to-Host and
#: Device-to-Device (nsys's um_sum reads the first two)
_MIGRATION = "r.copyKind IN (11, 12, 13)"

SPECS = {
    "kernels": TableSpec(
        source="CUPTI_ACTIVITY_KIND_KERNEL",
        table="_kernels",
        required=["start", "end", "correlationId", "globalPid"],
        # dur_ns, pid and launch_tid are computed by the kernels view (schema_nsys.sql)
        columns=[c for c in _GPU_COMMON if c.name not in ("dur_ns", "pid")] + [
            Column("name_id", "coalesce(sd.sid, ss.sid)", ["demangledName|shortName"], "BIGINT"),
            Column("short_name_id", "ss.sid", ["shortName"], "BIGINT"),
            Column("grid_x", "r.gridX", ["gridX"], "INTEGER"),
            Column("grid_y", "r.gridY", ["gridY"], "INTEGER"),
            Column("grid_z", "r.gridZ", ["gridZ"], "INTEGER"),
            Column("block_x", "r.blockX", ["blockX"], "INTEGER"),
            Column("block_y", "r.blockY", ["blockY"], "INTEGER"),
            Column("block_z", "r.blockZ", ["blockZ"], "INTEGER"),
            Column("registers_per_thread", "r.registersPerThread", ["registersPerThread"], "INTEGER"),
            Column("static_smem_bytes", "r.staticSharedMemory", ["staticSharedMemory"], "INTEGER"),
            Column("dynamic_smem_bytes", "r.dynamicSharedMemory", ["dynamicSharedMemory"], "INTEGER"),
        ] + [c for c in _LAUNCH_IDS if c.name != "launch_tid"] + _GAPS,
        joins={
            "sd": ("demangledName", "LEFT JOIN _nsys_names sd ON sd.id = r.demangledName"),
            "ss": ("shortName", "LEFT JOIN _nsys_names ss ON ss.id = r.shortName"),
            **_LAUNCH_JOINS,
        },
    ),
    "api_calls": TableSpec(
        source="CUPTI_ACTIVITY_KIND_RUNTIME",
        table="_api_calls",
        required=["start", "end", "globalTid", "correlationId"],
        # dur_ns, global_pid, pid and tid are computed by the api_calls view (schema_nsys.sql)
        columns=[
            Column("start_ns", "r.start", ["start"], "BIGINT"),
            Column("end_ns", 'r."end"', ["end"], "BIGINT"),
            Column("global_tid", "r.globalTid", ["globalTid"], "BIGINT"),
            Column("correlation_id", "r.correlationId", ["correlationId"], "BIGINT"),
            # nsys stats strips a trailing _vNNNN (STRIP)
            Column("name_id", "sn.stripped_sid", ["nameId"], "BIGINT"),
            Column("raw_name_id", "sn.sid", ["nameId"], "BIGINT"),
            Column("return_value", "r.returnValue", ["returnValue"], "BIGINT"),
            # a call that waits for the GPU: the innermost push/pop NVTX range around it
            # (write.with_sync_ranges); NULL for the others
            Column("nvtx_range_id", "r._tk_sync_range", [_API], "BIGINT"),
            # its call stack (api_frames), where nsys unwound one (--cudabacktrace: the id its
            # backtrace event holds, _calls_with_their_backtraces)
            Column("callchain_id", "nullif(r._tk_callchain, 0)", ["@CUDA_CALLCHAINS", "callchainId"], "BIGINT"),
            # its Python stack (python_frames), where nsys took one (--python-backtrace=cuda, exported with
            # --include-blobs=true: _calls_with_their_backtraces)
            Column("python_stack_id", "r._tk_python_stack", ["@NVTX_PAYLOAD_SCHEMAS"], "BIGINT"),
        ],
        joins={"sn": ("nameId", "LEFT JOIN _nsys_names sn ON sn.id = r.nameId")},
        # (nsys --cudabacktrace writes a call's backtrace as an event of the table of its own,
        # eventClass 67, that ingest takes out before: not a call, though nsys stats counts it)
        where=Filter("r.eventClass <> 67", ["@CUDA_CALLCHAINS", "eventClass"]),
    ),
    "memcpy": TableSpec(
        source="CUPTI_ACTIVITY_KIND_MEMCPY",
        required=["start", "end", "correlationId", "globalPid"],
        columns=_GPU_COMMON + [
            Column("bytes", "r.bytes", ["bytes"], "BIGINT"),
            Column("copy_kind", "r.copyKind", ["copyKind"], "INTEGER"),
            Column("operation", "'[CUDA memcpy ' || ek.label || ']'", ["copyKind"], "VARCHAR"),
            Column("src_kind", "es.label", ["srcKind"], "VARCHAR"),
            Column("dst_kind", "ed.label", ["dstKind"], "VARCHAR"),
            Column("src_device_id", "r.srcDeviceId", ["srcDeviceId"], "BIGINT"),
            Column("dst_device_id", "r.dstDeviceId", ["dstDeviceId"], "BIGINT"),
            # (the export records a Unified Memory migration's address and cause, 0 for other copies)
            Column("virtual_address", f"CASE WHEN {_MIGRATION} THEN r.virtualAddress END",
                   ["virtualAddress", "copyKind"], "BIGINT"),
            Column("migration_cause", f"CASE WHEN {_MIGRATION} THEN mc.label END", ["migrationCause", "copyKind"],
                   "VARCHAR"),
        ] + _LAUNCH + _GAPS,
        joins={
            **_LAUNCH_JOINS,
            "ek": ("copyKind", "LEFT JOIN _nsys_enum_memcpy ek ON ek.id = r.copyKind"),
            "mc": ("migrationCause", "LEFT JOIN _nsys_enum_migration mc ON mc.id = r.migrationCause"),
            "es": ("srcKind", "LEFT JOIN _nsys_enum_memkind es ON es.id = r.srcKind"),
            "ed": ("dstKind", "LEFT JOIN _nsys_enum_memkind ed ON ed.id = r.dstKind"),
        },
    ),
    "memset": TableSpec(
        source="CUPTI_ACTIVITY_KIND_MEMSET",
        required=["start", "end", "correlationId", "globalPid"],
        columns=_GPU_COMMON + [
            Column("bytes", "r.bytes", ["bytes"], "BIGINT"),
            Column("value", "r.value", ["value"], "INTEGER"),
            Column("operation", "'[CUDA memset]'", [], "VARCHAR"),
            Column("mem_kind", "em.label", ["memKind"], "VARCHAR"),
        ] + _LAUNCH + _GAPS,
        joins={"em": ("memKind", "LEFT JOIN _nsys_enum_memkind em ON em.id = r.memKind"), **_LAUNCH_JOINS},
    ),
    # a CUDA graph launch traced as one GPU op (nsys --cuda-graph-trace=graph, the default):
    # its kernels, copies and memsets are not recorded one by one
    "graph_execs": TableSpec(
        source="CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        required=["start", "end", "correlationId", "globalPid"],
        columns=[c for c in _GPU_COMMON if c.name != "graph_node_id"] + [
            Column("graph_id", "r.graphId", ["graphId"], "BIGINT"),
            Column("graph_exec_id", "r.graphExecId", ["graphExecId"], "BIGINT"),
        ] + _LAUNCH + _GAPS,
        joins=dict(_LAUNCH_JOINS),
    ),
    "syncs": TableSpec(
        source="CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        required=["start", "end"],
        columns=[c for c in _GPU_COMMON if c.name != "graph_node_id"] + [
            Column("sync_type", "et.label", ["syncType"], "VARCHAR"),
            Column("event_id", "r.eventId", ["eventId"], "BIGINT"),
        ],
        joins={"et": ("syncType", "LEFT JOIN _nsys_enum_sync et ON et.id = r.syncType")},
    ),
    # OS runtime library calls (nsys -t osrt: poll, read, ioctl, pthread_cond_wait, ...);
    # the table's other event classes (31, 32) are zero-length start/finish markers
    "osrt_calls": TableSpec(
        source="OSRT_API",
        # (an export whose OS runtime table lacks a column still ingests: that column NULL)
        required=["start", "end"],
        columns=[
            *_SPAN,
            *_THREAD,
            Column("name", "sn.value", ["nameId"], "VARCHAR"),
            Column("return_value", "r.returnValue", ["returnValue"], "BIGINT"),
            Column("nesting_level", "r.nestingLevel", ["nestingLevel"], "INTEGER"),
            # its call stack (osrt_frames), where nsys unwound one (calls past its backtrace
            # threshold, 80 us by default; 0: none)
            Column("callchain_id", "nullif(r.callchainId, 0)", ["callchainId"], "BIGINT"),
        ],
        joins={"sn": ("nameId", "LEFT JOIN _nsys_names sn ON sn.id = r.nameId")},
        where=Filter("r.eventClass = 27", ["eventClass"]),
    ),
    "osrt_frames": _callchains("OSRT_CALLCHAINS"),
    # the call stacks of CUDA API calls (nsys --cudabacktrace, with the CPU sampled)
    "api_frames": _callchains("CUDA_CALLCHAINS"),
    # Unified Memory page faults (nsys --cuda-um-cpu-page-faults / --cuda-um-gpu-page-faults)
    "um_cpu_faults": TableSpec(
        source="CUDA_UM_CPU_PAGE_FAULT_EVENTS",
        required=["start", "address"],
        columns=[
            Column("ts_ns", "r.start", ["start"], "BIGINT"),
            *_PROCESS,
            Column("address", "r.address", ["address"], "BIGINT"),
            Column("instruction", "fi.value", ["CpuInstruction"], "VARCHAR"),
            Column("module", "fm.value", ["module"], "VARCHAR"),
            Column("pc", "r.originalFaultPc", ["originalFaultPc"], "BIGINT"),
            Column("source_file", "ff.value", ["sourceFile"], "VARCHAR"),
            Column("source_line", "r.sourceLine", ["sourceLine"], "INTEGER"),
        ],
        joins={"fi": ("CpuInstruction", "LEFT JOIN _nsys_strings fi ON fi.id = r.CpuInstruction"),
               "fm": ("module", "LEFT JOIN _nsys_strings fm ON fm.id = r.module"),
               "ff": ("sourceFile", "LEFT JOIN _nsys_strings ff ON ff.id = r.sourceFile")},
    ),
    "um_gpu_faults": TableSpec(
        source="CUDA_UM_GPU_PAGE_FAULT_EVENTS",
        required=["start", "end", "address"],
        columns=[
            *_SPAN,
            *_PROCESS,
            Column("device_id", "r.deviceId", ["deviceId"], "BIGINT"),
            Column("address", "r.address", ["address"], "BIGINT"),
            Column("faults", "r.numberOfPageFaults", ["numberOfPageFaults"], "BIGINT"),
            Column("access_type", "ea.label", ["faultAccessType"], "VARCHAR"),
        ],
        joins={"ea": ("faultAccessType", "LEFT JOIN _nsys_enum_um_access ea ON ea.id = r.faultAccessType")},
    ),
    # the GPU memory the CUDA runtime allocated and freed (nsys --cuda-memory-usage=true): one row
    # per allocation or free of device, pinned, managed or static memory, with the API call that
    # made it (a module's static memory has none: nsys records it when the module loads)
    "gpu_memory": TableSpec(
        source="CUDA_GPU_MEMORY_USAGE_EVENTS",
        required=["start", "globalPid", "address", "bytes", "memoryOperationType"],
        optional=True,
        columns=[
            Column("ts_ns", "r.start", ["start"], "BIGINT"),
            Column("event_index", "r._tk_row", ["start"], "BIGINT"),
            *_PROCESS,
            Column("device_id", "r.deviceId", ["deviceId"], "BIGINT"),
            Column("context_id", "nullif(r.contextId, 0)", ["contextId"], "BIGINT"),
            Column("operation", "CASE r.memoryOperationType WHEN 0 THEN 'allocation' WHEN 1 THEN 'free' END",
                   ["memoryOperationType"], "VARCHAR"),
            # (a kind the export's enum does not name: Unknown, as nsys calls the kinds it cannot tell)
            Column("memory_kind", "coalesce(em.label, 'Unknown')", ["memKind"], "VARCHAR"),
            Column("address", "r.address", ["address"], "BIGINT"),
            Column("bytes", "r.bytes", ["bytes"], "BIGINT"),
            Column("name", "nullif(r.name, '')", ["name"], "VARCHAR"),
            Column("correlation_id", "nullif(r.correlationId, 0)", ["correlationId"], "BIGINT"),
            Column("stream_id", "nullif(r.streamId, 0)", ["streamId"], "BIGINT"),
            # the stream-ordered pool it came from (cudaMallocAsync), and the pool's size then
            Column("pool_address", "nullif(r.localMemoryPoolAddress, 0)", ["localMemoryPoolAddress"], "BIGINT"),
            *_POOL_SIZE,
        ] + _LAUNCH,
        joins={"em": ("memKind", "LEFT JOIN _nsys_enum_memkind em ON em.id = r.memKind"), **_LAUNCH_JOINS},
    ),
    # the stream-ordered memory pools (cudaMallocAsync): created, trimmed, destroyed, with their
    # size after
    "gpu_memory_pools": TableSpec(
        source="CUDA_GPU_MEMORY_POOL_EVENTS",
        required=["start", "globalPid", "address", "operationType"],
        optional=True,
        columns=[
            Column("ts_ns", "r.start", ["start"], "BIGINT"),
            *_PROCESS,
            Column("device_id", "r.deviceId", ["deviceId"], "BIGINT"),
            Column("pool_address", "r.address", ["address"], "BIGINT"),
            Column("operation", "po.label", ["operationType"], "VARCHAR"),
            Column("pool_type", "pt.label", ["poolType"], "VARCHAR"),
            Column("correlation_id", "nullif(r.correlationId, 0)", ["correlationId"], "BIGINT"),
            *_POOL_SIZE,
            Column("release_threshold_bytes", "r.localMemoryPoolReleaseThreshold",
                   ["localMemoryPoolReleaseThreshold"], "BIGINT"),
        ],
        joins={"po": ("operationType", "LEFT JOIN _nsys_enum_mempool_op po ON po.id = r.operationType"),
               "pt": ("poolType", "LEFT JOIN _nsys_enum_mempool_type pt ON pt.id = r.poolType")},
    ),
    # the CPU's samples and their call stacks (nsys --sample=process-tree); optional: an odd
    # sampling table leaves the samples out, not the export refused
    "cpu_samples": TableSpec(
        source="COMPOSITE_EVENTS",
        required=["id", "start", "globalTid"],
        optional=True,
        columns=[
            Column("sample_id", "r.id", ["id"], "BIGINT"),
            Column("ts_ns", "r.start", ["start"], "BIGINT"),
            *_THREAD,
            Column("cpu", "r.cpu", ["cpu"], "INTEGER"),
            Column("thread_state", "ts.label", ["threadState"], "VARCHAR"),
        ],
        joins={"ts": ("threadState", "LEFT JOIN _nsys_enum_thread_state ts ON ts.id = r.threadState")},
    ),
    # the threads' scheduling on the CPUs (nsys --cpuctxsw=process-tree, which --sample=process-tree
    # comes with by default): each time a thread was put on a CPU and taken off it
    "thread_sched": TableSpec(
        source="SCHED_EVENTS",
        required=["start", "globalTid", "isSchedIn"],
        optional=True,
        columns=[
            Column("ts_ns", "r.start", ["start"], "BIGINT"),
            *_THREAD,
            Column("cpu", "r.cpu", ["cpu"], "INTEGER"),
            Column("sched_in", "r.isSchedIn <> 0", ["isSchedIn"], "BOOLEAN"),
            Column("thread_state", "ts.label", ["threadState"], "VARCHAR"),
        ],
        joins={"ts": ("threadState", "LEFT JOIN _nsys_enum_thread_state ts ON ts.id = r.threadState")},
    ),
    "cpu_sample_frames": TableSpec(
        source="SAMPLING_CALLCHAINS",
        required=["id", "symbol", "stackDepth"],
        optional=True,
        columns=[Column("sample_id", "r.id", ["id"], "BIGINT"), *_FRAME],
        joins=_FRAME_JOINS,
    ),
    # time nsys spent on a profiled thread (flushing CUPTI's buffers, initializing, ...)
    "profiler_overhead": TableSpec(
        source="PROFILER_OVERHEAD",
        required=["start", "end"],
        optional=True,  # (read by nsys's rules alone: an odd one leaves them without it, not the export refused)
        columns=[*_SPAN, *_THREAD, Column("name", "sn.value", ["nameId"], "VARCHAR")],
        joins={"sn": ("nameId", "LEFT JOIN _nsys_names sn ON sn.id = r.nameId")},
    ),
    "gpus": TableSpec(
        source="TARGET_INFO_GPU",
        required=["id"],
        columns=[
            Column("device_id", "coalesce(cd.cudaId, r.id)", ["id"], "BIGINT"),
            Column("name", "r.name", ["name"], "VARCHAR"),
            Column("chip_name", "r.chipName", ["chipName"], "VARCHAR"),
            Column("bus_location", "r.busLocation", ["busLocation"], "VARCHAR"),
            Column("uuid", "r.uuid", ["uuid"], "VARCHAR"),
            Column("sm_count", "r.smCount", ["smCount"], "INTEGER"),
            Column("cc_major", "r.computeMajor", ["computeMajor"], "INTEGER"),
            Column("cc_minor", "r.computeMinor", ["computeMinor"], "INTEGER"),
            Column("memory_bytes", "r.totalMemory", ["totalMemory"], "BIGINT"),
            Column("memory_bandwidth_bytes_per_s", "r.memoryBandwidth", ["memoryBandwidth"], "BIGINT"),
            Column("l2_bytes", "r.l2CacheSize", ["l2CacheSize"], "BIGINT"),
            Column("clock_hz", "r.clockRate", ["clockRate"], "BIGINT"),
            Column("max_warps_per_sm", "r.maxWarpsPerSm", ["maxWarpsPerSm"], "INTEGER"),
        ],
        joins={"cd": ("@TARGET_INFO_CUDA_DEVICE", "LEFT JOIN (SELECT DISTINCT gpuId, cudaId FROM _nsys_cuda_device WHERE cudaId >= 0) cd ON cd.gpuId = r.id")},
        # nsys before 2022: the GPU table has only the CUDA device id, name and bus
        fallback=TableSpec(
            source="TARGET_INFO_GPU",
            required=["deviceId"],
            columns=[
                Column("device_id", "r.deviceId", ["deviceId"], "BIGINT"),
                Column("name", "r.name", ["name"], "VARCHAR"),
                Column("bus_location", "r.busLocation", ["busLocation"], "VARCHAR"),
            ],
        ),
    ),
    # the GPU's sampled counters (nsys --gpu-metrics-devices): typeId's low byte is the GPU
    # (TARGET_INFO_GPU.id); a clock is recorded in Hz under a name that says MHz. Where the
    # export maps GPUs to CUDA devices, a GPU no profiled process used as one is left out:
    # taking its GPU id for a CUDA device id would mix two GPUs under one device.
    "gpu_metrics": TableSpec(
        source="GPU_METRICS",
        required=["timestamp", "typeId", "metricId", "value"],
        optional=True,
        columns=[
            Column("device_id", _GPU_DEVICE, ["typeId"], "BIGINT"),
            Column("metric_id", "r.metricId", ["metricId"], "BIGINT"),
            Column("timestamp_ns", 'r."timestamp"', ["timestamp"], "BIGINT"),
            Column("value", "CASE WHEN (mn.metricName LIKE '%[MHz]' OR mn.metricName ILIKE '%clock%') "
                            "AND r.value >= 100000 THEN r.value / 1e6 ELSE r.value END", ["value"], "DOUBLE"),
        ],
        joins={
            "cd": ("@TARGET_INFO_CUDA_DEVICE", _GPU_CUDA_JOIN),
            "mn": ("@TARGET_INFO_GPU_METRICS", "LEFT JOIN (SELECT DISTINCT typeId, metricId, metricName "
                                               "FROM _nsys_gpu_metric_names) mn "
                                               "ON mn.typeId = r.typeId AND mn.metricId = r.metricId"),
        },
        where=Filter(_GPU_MAPPED, ["typeId"]),
    ),
    "gpu_metric_names": TableSpec(
        source="TARGET_INFO_GPU_METRICS",
        required=["typeId", "metricId", "metricName"],
        optional=True,
        columns=[
            Column("device_id", _GPU_DEVICE, ["typeId"], "BIGINT"),
            Column("metric_id", "r.metricId", ["metricId"], "BIGINT"),
            Column("metric", r"regexp_replace(r.metricName, '\s*\[[^\]]*\]$', '')", ["metricName"], "VARCHAR"),
            Column("unit", r"nullif(regexp_extract(r.metricName, '\[([^\]]*)\]$', 1), '')", ["metricName"], "VARCHAR"),
            Column("nsys_name", "r.metricName", ["metricName"], "VARCHAR"),
        ],
        joins={"cd": ("@TARGET_INFO_CUDA_DEVICE", _GPU_CUDA_JOIN)},
        where=Filter(_GPU_MAPPED, ["typeId"]),
    ),
    "streams": TableSpec(
        source="TARGET_INFO_CUDA_STREAM",
        required=["streamId"],
        columns=[
            Column("stream_id", "r.streamId", ["streamId"], "BIGINT"),
            Column("pid", "r.processId", ["processId"], "INTEGER"),
            Column("context_id", "r.contextId", ["contextId"], "BIGINT"),
            Column("priority", "r.priority", ["priority"], "BIGINT"),
            Column("flag", "r.flag", ["flag"], "BIGINT"),
        ],
    ),
    "threads": TableSpec(
        source="ThreadNames",
        required=["globalTid"],
        columns=[
            *_THREAD,
            Column("name", "tn.value", ["nameId"], "VARCHAR"),
            Column("priority", "r.priority", ["priority"], "BIGINT"),
        ],
        joins={"tn": ("nameId", "LEFT JOIN _nsys_strings tn ON tn.id = r.nameId")},
    ),
}

#: alias -> the export's enum table, and its labels by id where an export has no such
#: table (older nsys versions: the ids are CUPTI's, the labels nsys 2025.3's)
ENUMS = {
    "_nsys_enum_memcpy": ("ENUM_CUDA_MEMCPY_OPER", [
        "Unknown", "Host-to-Device", "Device-to-Host", "Host-to-Array", "Array-to-Host", "Array-to-Array",
        "Array-to-Device", "Device-to-Array", "Device-to-Device", "Host-to-Host", "Peer-to-Peer",
        "Unified Host-to-Device", "Unified Device-to-Host", "Unified Device-to-Device"]),
    "_nsys_enum_memkind": ("ENUM_CUDA_MEM_KIND", [
        "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static", "Unknown"]),
    "_nsys_enum_sync": ("ENUM_CUPTI_SYNC_TYPE", [
        "Unknown", "Event sync", "Stream wait sync", "Stream sync", "Context sync"]),
    "_nsys_enum_migration": ("ENUM_CUDA_UNIF_MEM_MIGRATION", [
        "Unknown", "User prefetch", "Page fault", "Speculative prefecth", "Eviction", "Access counters"]),
    "_nsys_enum_um_access": ("ENUM_CUDA_UNIF_MEM_ACCESS_TYPE", ["Unknown", "Read", "Write", "Atomic", "Prefetch"]),
    "_nsys_enum_mempool_op": ("ENUM_CUDA_MEMPOOL_OPER", ["Invalid", "Created", "Destroyed", "Trimmed"]),
    "_nsys_enum_mempool_type": ("ENUM_CUDA_MEMPOOL_TYPE", ["Invalid", "Local", "Imported"]),
    "_nsys_enum_thread_state": ("ENUM_SAMPLING_THREAD_STATE", [
        "Unknown", "Running", "Interruptible", "Uninterruptible", "Stopped", "Terminated", "Unscheduled", "Waiting",
        "OS runtime", "Initialized", "Transition"]),
}
#: an ``ENUMS`` alias where a SELECT names it
_ENUM_NAME = re.compile(r"\b_nsys_enum_\w+")


def enums_joined(plans: dict[str, Plan]) -> list[str]:
    """The ``ENUMS`` aliases that the plans of tables with rows to read join: the enum
    tables an ingest reads (or makes, where the export has none); the others it leaves."""
    named = set(_ENUM_NAME.findall(" ".join(p.select for p in plans.values() if p.raw_columns)))
    return [a for a in ENUMS if a in named]


def empty(target: str, spec: TableSpec) -> Plan:
    """The plan of a table the export does not fill: its columns, no rows."""
    cols = ", ".join(f"CAST(NULL AS {c.type}) AS {c.name}" for c in spec.columns)
    return Plan(f"SELECT {cols} LIMIT 0", [], spec.source)


class Plan(NamedTuple):
    """How a store table is filled: the SELECT over ``_nsys_<target>``, the raw columns
    to read for it (none: the export lacks the table; the SELECT gives no rows) and the
    export's table they are read from."""

    select: str
    raw_columns: list[str]
    source: str


def plan(export: Export, path: Path, version: str, target: str, spec: TableSpec) -> Plan:
    """The SELECT that maps the raw table to ``target`` and the raw columns it reads."""
    present = export.columns(spec.source)
    if present:
        missing = [c for c in spec.required if c not in present]
        fallback = spec.fallback
        if missing and fallback is not None and set(fallback.required) <= export.columns(fallback.source):
            return plan(export, path, version, target, fallback)
        if missing and spec.optional:
            warn_from_caller(CaptureWarning(f"{path}: table {export.tables[spec.source]} lacks column {missing[0]} "
                                            f"(export schema {version}); left out"))
            return empty(target, spec)
        if missing:
            raise InputError(
                f"{path}: table {export.tables[spec.source]} lacks column {missing[0]} "
                f"(export schema {version}); this nsys version's export is not supported"
            )

    def available(need: list[str]) -> bool:
        for n in need:
            if n.startswith("@"):
                if n[1:] not in export.tables:
                    return False
            elif not any(alt in present for alt in n.split("|")):
                return False
        return True

    select, raw_cols, aliases = [], set(spec.required) if present else set(), set()
    for col in spec.columns:
        expr = col.expr
        if present and available(col.needs):
            for alias, (raw, _) in spec.joins.items():
                if re.search(rf"\b{alias}\.", expr):
                    if raw.startswith("@") or raw in present:
                        aliases.add(alias)
                    else:  # a coalesce over alternatives names only the columns that exist
                        expr = re.sub(rf"\b{alias}\.\w+", "NULL", expr)
            raw_cols.update(c for n in col.needs if not n.startswith("@") for c in n.split("|") if c in present)
            select.append(f"CAST({expr} AS {col.type}) AS {col.name}")
        else:
            select.append(f"CAST(NULL AS {col.type}) AS {col.name}")
    for alias in aliases:
        raw = spec.joins[alias][0]
        if not raw.startswith("@"):
            raw_cols.add(raw)
    if not present:
        return Plan(f"SELECT {', '.join(select)} LIMIT 0", [], spec.source)
    joins = " ".join(spec.joins[a][1] for a in sorted(aliases))
    where = ""
    if spec.where is not None and available(spec.where.needs):
        raw_cols.update(n for n in spec.where.needs if not n.startswith("@"))
        where = f" WHERE {spec.where.expr}"
    return Plan(f"SELECT {', '.join(select)} FROM _nsys_{target} r {joins}{where}", sorted(raw_cols), spec.source)
