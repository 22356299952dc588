"""Chrome Trace Event export of an nsys run: the timeline for ui.perfetto.dev and chrome://tracing.

``export_trace(tk, path, run=..., start_ns=..., end_ns=...)`` (or ``nvtx=NAME,
instance=N``) writes a JSON trace, gzip-compressed when the path ends in ``.gz``:

- per process, one track per thread of CUDA API calls (the thread's own tid) and one of
  NVTX push/pop ranges and marks (``NVTX · <thread>``, tid + 2**24: nsys tids are
  24-bit, so it never collides); start/end ranges, which need not nest, are async
  slices of the process; with ``osrt=True`` (``--osrt``) one more per thread of its OS
  runtime calls (``OS runtime · <thread>``, tid + 2 x 2**24: poll, ioctl, pthread waits;
  a call inside another traced call nests under it), left out by default: a CUDA
  program makes several times more of them than CUDA API calls;
- per GPU (a process ``GPU N: <name>``), one track per stream (a process's stream of a
  CUDA context: stream ids of two processes are unrelated) of kernels, copies, memsets
  and whole graph launches, and one per process for its ops on no stream (``No stream``:
  Unified Memory migrations); an op that starts before the previous op of its stream
  ended (XLA's kernels do, by up to a few hundred ns; slices on one track must nest, and
  Perfetto would draw it as a call inside that one) goes on the stream's first track free
  at its start, ``Stream N · overlap K`` (tid + K x 2**24) past the first;
- a flow arrow from each launching API call to the GPU op it launched (when both are in
  the window);
- where the capture traced Unified Memory's page faults (nsys --cuda-um-cpu-page-faults,
  --cuda-um-gpu-page-faults), each group of GPU faults the GPU's handler serviced as an async
  slice of its GPU's process, by access type (``GPU page faults (Read)``: groups overlap, so
  they stack), and each CPU fault an instant event of its process, with the page's address
  and the faulting function;
- where the capture recorded the GPU memory's allocations (nsys --cuda-memory-usage), in each
  allocating process a counter track per device and kind of memory (``GPU 0 Device memory
  [bytes]``): the bytes allocated and not yet freed, stepping at each allocation and free;
- with ``gpu_metrics=True`` (``--gpu-metrics``), in each GPU's process a counter track per
  sampled counter of ``_GPU_METRICS`` (SM clock, SMs active, SM issue, tensor pipes, DRAM
  read and write; nsys --gpu-metrics-devices), a sample written where the value changed (of
  those nsys took before the trace's time 0, the last, at 0: Perfetto drops negative times);
- where the capture sampled the Python threads' stacks (nsys --python-sampling), per sampled
  thread a track of its Python calls (``Python · <thread>``, tid + 3 x 2**24), the samples drawn
  as a flame chart over time (``_PYTHON``): consecutive samples with the same frames from the
  outermost down to a level make one slice of that level's function, from the first's time to
  the last's next sample (a sample stands for the time to the next, up to twice the sampling
  interval: past a longer gap, sampling stopped, one interval); its args the function's file,
  the line the first sample found and the samples it holds. What a sampled stack cannot say,
  the slices do not either: two calls of one function a sample apart are one slice.

With ``ranks=`` (``--ranks all`` or ``0-3,7``) the ranks of the run's job share one trace
(``job_parts``): each rank's processes and GPUs are named ``rank N · ...``, given process ids of
their own (ranks on other hosts may have the same pids), and their times shifted onto one
clock, the earliest rank's session start, by each export's session start (UTC). A --from/--to
window is on the run's clock and checked against every rank's events (``job_span_outside``):
outside them all, an error; before the run's own first event, it may hold another rank's.

Names are the ones nsys prints: demangled kernel names, API names without the _vNNNN
suffix, NVTX ranges as 'domain:text', copies as '[CUDA memcpy Host-to-Device]'.

Exact times: the format's ``ts``/``dur`` are microseconds. They are written as decimal
numbers with exactly three fractional digits, made from the integer nanoseconds (never
through a float), so ``12345678.901`` is 12345678901 ns. Perfetto's JSON importer reads
the number's text digit by digit into integer nanoseconds (``CoerceToTs`` in
trace_processor's json_utils), so no nanosecond is lost whatever the magnitude;
chrome://tracing reads doubles (exact to the ns below ~10^7 s of capture time).
``displayTimeUnit`` is "ns" for chrome://tracing's display. Times are the export's own (ns since
its nsys session's start), except where an event of the run begins before that start: Perfetto
drops events before 0, so the whole run is moved later by as much, and the file's header says by
how many ns (``shift_ns``; ``_from_zero``).

The window keeps every event that overlaps it (``start <= to`` and ``end >= from``;
events are written whole, not clipped). ``--nvtx NAME --instance N`` takes the N-th
range of that name (1 = the first, by start: ``nvtx_instances``, which chart timeline and
the report's typical request number by too) from its start to the later of its end and
the end of the GPU work it launched. The file's size is estimated before anything is written;
above ``max_bytes`` (100 MB of JSON by default) the export is refused with the estimate
unless forced.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ParamError, QueryError, expect
from .outputs import text_file, write_output

#: default size limit of the JSON text (what the viewer parses), bytes
MAX_BYTES = 100_000_000
#: nsys pids and tids are 24-bit: synthetic ids start above them
NVTX_TID_OFFSET = 1 << 24
OSRT_TID_OFFSET = 2 << 24
PYTHON_TID_OFFSET = 3 << 24
GPU_PID_OFFSET = 1 << 24
#: a stream's extra lanes (ops that overlap on it) are tracks track + lane x 2**24 of its GPU
GPU_LANE_TID_OFFSET = 1 << 24
#: event kinds in the file, as their ``cat``
KINDS = ("cuda_api", "nvtx", "nvtx_startend", "nvtx_mark", "osrt", "kernel", "memcpy", "memset", "graph", "flow",
         "gpu_metric", "um_gpu_fault", "um_cpu_fault", "gpu_memory", "python")
#: bytes of one event besides its name, averaged over the fixtures' traces (a start/end
#: range, a flow and a GPU page fault group are two events); tests/test_trace.py checks the
#: estimate within 15 %
_EVENT_BYTES = {"cuda_api": 120, "nvtx": 115, "nvtx_startend": 212, "nvtx_mark": 91, "osrt": 125,
                "kernel": 215, "memcpy": 145, "memset": 141, "graph": 132, "flow": 178, "gpu_metric": 85,
                "um_gpu_fault": 255, "um_cpu_fault": 142, "gpu_memory": 105, "python": 136}
_BATCH = 65536


@dataclass
class Window:
    """The part of a run to export, in the capture's ns (None = unbounded)."""

    start_ns: int | None = None
    end_ns: int | None = None
    label: str = "whole run"


@dataclass
class TraceResult:
    """What an export wrote: the file, the run, the window, events per kind, JSON bytes."""

    path: Path | None
    run_id: int
    window: Window
    counts: dict[str, int] = field(default_factory=dict)
    estimated_bytes: int = 0
    json_bytes: int = 0
    #: what it holds: the run, or the ranks of its job (``ranks=``)
    parts: list = field(default_factory=list)


# -- SQL -------------------------------------------------------------------------


def _us(ns_expr: str) -> str:
    """SQL text of an integer ns expression as µs with exactly three decimals ('-1.500'),
    formatted by DuckDB (vectorized) from the integer: no float on the way."""
    return (f"(CASE WHEN ({ns_expr}) < 0 THEN '-' ELSE '' END || (abs({ns_expr}) // 1000)::VARCHAR || '.' "
            f"|| lpad((abs({ns_expr}) % 1000)::VARCHAR, 3, '0'))")

# $run, $lo, $hi bound; $lo/$hi NULL = unbounded. An event is in the window when it
# overlaps it.
_IN = "($lo IS NULL OR {end} >= $lo) AND ($hi IS NULL OR {start} <= $hi)"

#: the GPU tracks of a run (independent of the window, so a stream keeps its track id);
#: owners: the processes and contexts with streams on the device (ops on no stream have no context)
_STREAMS = """
SELECT device_id, global_pid, context_id, stream_id,
       dense_rank() OVER (PARTITION BY device_id ORDER BY global_pid, context_id, stream_id)::INTEGER AS track,
       count(DISTINCT CASE WHEN context_id IS NOT NULL THEN (global_pid, context_id) END)
           OVER (PARTITION BY device_id) AS owners
FROM (SELECT DISTINCT device_id, global_pid, context_id, stream_id FROM gpu_ops WHERE run_id = $run)
"""

#: GPU ops in the window with their track and launching call (for the flow arrow)
_GPU_OPS = f"""
WITH streams AS ({_STREAMS}),
ops AS (
    SELECT 'kernel' AS kind, n.value AS name, k.start_ns, k.end_ns, k.device_id, k.global_pid, k.context_id,
           k.stream_id, k.correlation_id, k.launch_global_tid, k.api_start_ns, k.api_end_ns,
           k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers_per_thread,
           k.static_smem_bytes + k.dynamic_smem_bytes AS smem_bytes, NULL::BIGINT AS bytes
    FROM _kernels k LEFT JOIN _strings n ON n.string_id = k.name_id
    WHERE k.run_id = $run AND {_IN.format(start='k.start_ns', end='k.end_ns')}
    UNION ALL
    SELECT 'memcpy', operation, start_ns, end_ns, device_id, global_pid, context_id, stream_id, correlation_id,
           launch_global_tid, api_start_ns, api_end_ns, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, bytes
    FROM memcpy WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
    UNION ALL
    SELECT 'memset', operation, start_ns, end_ns, device_id, global_pid, context_id, stream_id, correlation_id,
           launch_global_tid, api_start_ns, api_end_ns, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, bytes
    FROM memset WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
    UNION ALL
    SELECT 'graph', graph_op_name(graph_id), start_ns, end_ns, device_id, global_pid, context_id,
           stream_id, correlation_id, launch_global_tid, api_start_ns, api_end_ns,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
    FROM graph_execs WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
)
SELECT o.kind, o.name, {_us('o.start_ns + $shift')} AS ts, {_us('o.end_ns - o.start_ns')} AS dur, o.device_id, s.track,
       o.correlation_id,
       CASE WHEN o.api_start_ns IS NOT NULL AND {_IN.format(start='o.api_start_ns', end='o.api_end_ns')}
            THEN ((o.launch_global_tid >> 24) & 16777215)::INTEGER END AS launch_pid,
       (o.launch_global_tid & 16777215)::INTEGER AS launch_tid, {_us('o.api_start_ns + $shift')} AS api_ts,
       o.grid_x, o.grid_y, o.grid_z, o.block_x, o.block_y, o.block_z, o.registers_per_thread, o.smem_bytes,
       o.bytes, o.stream_id, o.start_ns, o.end_ns
FROM ops o JOIN streams s ON s.device_id = o.device_id AND s.global_pid = o.global_pid
    AND s.context_id IS NOT DISTINCT FROM o.context_id AND s.stream_id IS NOT DISTINCT FROM o.stream_id
ORDER BY o.device_id, s.track, o.start_ns, o.end_ns DESC
"""

_API = f"""
SELECT name, {_us('start_ns + $shift')} AS ts, {_us('end_ns - start_ns')} AS dur, pid, tid, correlation_id
FROM api_calls WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
ORDER BY pid, tid, start_ns, end_ns DESC
"""

_NVTX = f"""
SELECT name, style, {_us('start_ns + $shift')} AS ts, {_us('end_ns - start_ns')} AS dur,
       {_us('end_ns + $shift')} AS end_ts,
       pid, tid, range_id, ended
FROM nvtx_ranges WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
ORDER BY pid, tid, start_ns, end_ns DESC, range_id
"""

_OSRT = f"""
SELECT name, {_us('start_ns + $shift')} AS ts, {_us('end_ns - start_ns')} AS dur, pid, tid, return_value
FROM osrt_calls WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
ORDER BY pid, tid, start_ns, end_ns DESC
"""

#: Unified Memory page faults: the GPU's fault groups (async slices: they overlap) and the CPU's faults
_UM_GPU = f"""
SELECT device_id, 'GPU page faults (' || coalesce(access_type, 'Unknown') || ')' AS name,
       {_us('start_ns + $shift')} AS ts, {_us('end_ns + $shift')} AS end_ts, faults, hex_address(address) AS address,
       pid, row_number() OVER (ORDER BY device_id, start_ns, end_ns, address) AS n
FROM um_gpu_faults WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
ORDER BY device_id, start_ns, end_ns, address
"""
_UM_CPU = f"""
SELECT pid, {_us('ts_ns + $shift')} AS ts, hex_address(address) AS address, instruction
FROM um_cpu_faults WHERE run_id = $run AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)
ORDER BY pid, ts_ns, address
"""

#: GPU memory live (nsys --cuda-memory-usage): in the allocating process, a counter track per device
#: and kind of memory, the bytes live after each allocation or free (gpu_memory_events); with a
#: window, the level it opens at (the series' last event before it, moved to its start) first
_GPU_MEMORY = f"""
WITH e AS (SELECT * FROM gpu_memory_events($run)),
before AS (SELECT max(seq) AS seq FROM e WHERE $lo IS NOT NULL AND ts_ns < $lo GROUP BY global_pid, device_id, memory_kind)
SELECT pid, device_id, memory_kind, {_us('greatest(ts_ns, coalesce($lo, ts_ns)) + $shift')} AS ts, live_bytes
FROM e
WHERE (($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)) OR seq IN (SELECT seq FROM before)
ORDER BY pid, device_id, memory_kind, seq
"""

_MARKS = f"""
SELECT name, {_us('ts_ns + $shift')} AS ts, pid, tid FROM nvtx_marks
WHERE run_id = $run AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)
ORDER BY pid, tid, ts_ns
"""

#: the GPU's sampled counters shown as counter tracks (``gpu_metrics``): the SM clock, SMs
#: active, SM issue, tensor pipes, DRAM read and write; a sample is written where its value
#: differs from the metric's previous sample (a counter track holds its value until the next).
#: nsys samples from before its session's start (nsys_gpu_metrics: the first, at -15.8 µs);
#: Perfetto drops events before time 0, so of the samples before the trace's 0 ({shift}: the
#: part's shift onto it) the last is written at 0, the value the counter starts the trace at
_GPU_METRICS = """
WITH m AS (
    SELECT DISTINCT device_id, metric_id, metric || coalesce(' [' || unit || ']', '') AS name FROM gpu_metric_names
    WHERE run_id = $run AND gpu_metric_column(metric) IS NOT NULL
), s AS (
    SELECT g.device_id, m.name, g.timestamp_ns, g.value,
           lag(g.value) OVER (PARTITION BY g.device_id, g.metric_id ORDER BY g.timestamp_ns) AS prev
    FROM gpu_metrics g JOIN m USING (device_id, metric_id)
    WHERE g.run_id = $run AND g.value IS NOT NULL AND ($lo IS NULL OR g.timestamp_ns >= $lo)
      AND ($hi IS NULL OR g.timestamp_ns <= $hi)
), changed AS (
    SELECT *, lead(timestamp_ns) OVER (PARTITION BY device_id, name ORDER BY timestamp_ns) AS next_ns
    FROM s WHERE prev IS DISTINCT FROM value
)
SELECT device_id, name, {ts} AS ts, value, timestamp_ns FROM changed WHERE NOT coalesce(next_ns + {shift} <= 0, false)
"""

#: the Python samples as slices of a flame chart over time, per thread: a sample's frames by
#: level (0 the outermost), each with the identity of its frames from the outermost down to it
#: (``prefix``); per thread and level, a run of consecutive samples of one prefix is a slice (a
#: sample continues into the next where the gap is at most twice the sampling interval, and
#: ends at the next; the last, or one before a longer gap, one interval after its time)
_PYTHON = """
WITH iv AS (SELECT round(interval_ns)::BIGINT AS interval_ns FROM python_sample_interval($run)),
s AS (
    SELECT global_tid, pid, tid, ts_ns, stack_id,
           row_number() OVER (PARTITION BY global_tid ORDER BY ts_ns, sample_id) AS seq,
           lead(ts_ns) OVER (PARTITION BY global_tid ORDER BY ts_ns, sample_id) AS next_ts
    FROM python_samples WHERE run_id = $run AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)
),
timed AS (
    SELECT s.*, coalesce(next_ts - ts_ns <= 2 * iv.interval_ns, false) AS goes_on,
           CASE WHEN next_ts - ts_ns <= 2 * iv.interval_ns THEN next_ts ELSE ts_ns + iv.interval_ns END AS end_ns
    FROM s, iv
),
frames AS (
    SELECT stack_id, max(depth) OVER (PARTITION BY stack_id) - depth AS level, function, file, line,
           hash(list(coalesce(function, '?') || chr(0) || coalesce(file, '?'))
                OVER (PARTITION BY stack_id ORDER BY depth DESC ROWS UNBOUNDED PRECEDING)) AS prefix
    FROM python_frames WHERE run_id = $run AND stack_id IN (SELECT stack_id FROM s)
),
runs AS (
    SELECT t.global_tid, t.pid, t.tid, t.seq, t.ts_ns, t.end_ns, f.level, f.function, f.file, f.line,
           CASE WHEN lag(t.seq) OVER w = t.seq - 1 AND lag(f.prefix) OVER w = f.prefix AND lag(t.goes_on) OVER w
                THEN 0 ELSE 1 END AS starts
    FROM timed t JOIN frames f USING (stack_id)
    WINDOW w AS (PARTITION BY t.global_tid, f.level ORDER BY t.seq)
),
slices AS (
    SELECT *, sum(starts) OVER (PARTITION BY global_tid, level ORDER BY seq ROWS UNBOUNDED PRECEDING) AS slice
    FROM runs
)
SELECT pid, tid, any_value(function) AS name, any_value(file) AS file, arg_min(line, seq) AS line,
       min(ts_ns) AS start_ns, max(end_ns) AS end_ns, count(*) AS samples, level
FROM slices GROUP BY global_tid, pid, tid, level, slice
"""

#: events per kind and their summed name lengths, for the size estimate
_SIZE = f"""
WITH streams AS ({_STREAMS})
SELECT 'cuda_api' AS kind, count(*) AS n, coalesce(sum(length(name)), 0) AS name_bytes FROM api_calls
WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
UNION ALL
SELECT CASE style WHEN 'PushPop' THEN 'nvtx' ELSE 'nvtx_startend' END, count(*), coalesce(sum(length(name)), 0)
FROM nvtx_ranges WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')} GROUP BY style
UNION ALL
SELECT 'nvtx_mark', count(*), coalesce(sum(length(name)), 0) FROM nvtx_marks
WHERE run_id = $run AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)
UNION ALL
SELECT op_kind, count(*), coalesce(sum(length(name)), 0) FROM gpu_ops
WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')} GROUP BY op_kind
UNION ALL
SELECT 'osrt', count(*), coalesce(sum(length(name)), 0) FROM osrt_calls
WHERE $osrt AND run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
UNION ALL
SELECT 'um_gpu_fault', count(*), coalesce(sum(length(access_type) + 18), 0) FROM um_gpu_faults
WHERE run_id = $run AND {_IN.format(start='start_ns', end='end_ns')}
UNION ALL
SELECT 'um_cpu_fault', count(*), coalesce(sum(length(instruction)), 0) FROM um_cpu_faults
WHERE run_id = $run AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)
UNION ALL
SELECT 'gpu_memory', count(*), coalesce(sum(length(memory_kind)), 0) FROM gpu_memory
WHERE run_id = $run AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)
"""
_SIZE_GPU_METRICS = f"""
SELECT 'gpu_metric', count(*), coalesce(sum(length(name)), 0) FROM ({_GPU_METRICS.format(ts="NULL", shift="0")})
"""

_THREADS = """
SELECT pid, tid, any_value(name) AS name FROM threads WHERE run_id = $run GROUP BY pid, tid
"""

_GPUS = "SELECT device_id, any_value(name) AS name FROM gpus WHERE run_id = $run GROUP BY device_id"


# -- window ------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """How a command names the window's options in ``resolve_window``'s errors (``EXPORT``:
    ``tracekit export trace``'s flags; tracekit.charts spells ``chart timeline``'s -p
    parameters): ``window`` the from/to pair, ``start``/``end`` one of them with its value,
    ``nvtx`` and ``instance_n`` the range and its number, ``instance`` the number given,
    ``instance_alone`` the number's option named on its own."""

    command: str = "export trace"
    window: str = "--from/--to"
    start: str = "--from {}"
    end: str = "--to {}"
    nvtx: str = "--nvtx NAME"
    instance_n: str = "--instance N"
    instance: str = "--instance {}"
    instance_alone: str = "--instance"


EXPORT = Options()


@dataclass(frozen=True)
class NvtxInstance:
    """One range ``--nvtx NAME --instance N`` takes: its number N, its range id, its name
    as NVTX paths name it (the text; ``domain:text`` in a named domain), its nesting depth
    (None: a start/end range that ended on another thread), its start and end, and the end
    of its window (the later of its end and the end of the GPU work it launched: kernels,
    copies, memsets and CUDA graphs launched whole), ns."""

    instance: int
    range_id: int
    label: str
    depth: int | None
    start_ns: int
    end_ns: int
    window_end_ns: int


#: the ranges ``--nvtx $name`` takes (its text, or its 'domain:text' name) numbered as
#: ``--instance N`` numbers them: by start, ranges that start together by range id, 1 = the first
_INSTANCES = """
SELECT instance, range_id, label, depth, start_ns, end_ns,
       greatest(end_ns, coalesce(proj_end_ns, end_ns),
                -- (a CUDA graph launched whole inside the range on its thread: not in proj_end_ns, as
                -- not in nsys's projection, but GPU work the range launched)
                coalesce((SELECT max(g.end_ns) FROM graph_execs g
                          WHERE g.run_id = $run AND g.launch_global_tid = r.global_tid
                            AND g.api_start_ns >= r.start_ns AND g.api_end_ns <= r.end_ns), end_ns)) AS window_end_ns
FROM (
    SELECT row_number() OVER (ORDER BY start_ns, range_id) AS instance, range_id,
           CASE WHEN coalesce(domain, '') = '' THEN text ELSE name END AS label, depth, start_ns, end_ns,
           proj_end_ns, global_tid
    FROM nvtx_ranges WHERE run_id = $run AND (name = $name OR text = $name)) r
WHERE ($instance IS NULL OR instance = $instance) AND ($depth IS NULL OR coalesce(depth, 0) = $depth)
ORDER BY instance
"""


def nvtx_instances(tk, run_id: int, name: str, instance: int | None = None,
                   depth: int | None = None) -> tuple[int, list[NvtxInstance]]:
    """The instances of the NVTX range ``name`` in the run, numbered as ``--nvtx NAME
    --instance N`` numbers them (what export trace and chart timeline take): how many there
    are, and those asked for, in order: ``instance``, that one only (none past the last);
    ``depth``, those at that nesting depth only (0: the outermost, with the start/end
    ranges that have no depth), each keeping its number among all of them."""
    total = tk.con.execute("SELECT count(*) FROM nvtx_ranges WHERE run_id = ? AND (name = ? OR text = ?)",
                           [run_id, name, name]).fetchall()[0][0]
    if total == 0 or (instance is not None and not 1 <= instance <= total):
        return total, []
    rows = tk.con.execute(_INSTANCES, {"run": run_id, "name": name, "instance": instance, "depth": depth}).fetchall()
    return total, [NvtxInstance(*r) for r in rows]


def resolve_window(tk, run_id: int, start_ns: int | None = None, end_ns: int | None = None,
                   nvtx: str | None = None, instance: int | None = None, options: Options = EXPORT) -> Window:
    """The window to export: --from/--to, or the N-th instance of an NVTX range (the first
    without ``instance``), labelled with the range's name as NVTX paths write it (the
    default domain's ':text' as 'text'); a ParamError or QueryError naming the options as
    ``options`` spells them where they do not name a window of the run."""
    o = options
    if nvtx is not None:
        if start_ns is not None or end_ns is not None:
            raise ParamError(f"{o.command}: give either {o.window} or {o.nvtx} {o.instance_n}, not both")
        n = 1 if instance is None else instance
        if n < 1:
            raise ParamError(f"{o.command}: {o.instance.format(n)}: instances count from 1")
        total, picked = nvtx_instances(tk, run_id, nvtx, instance=n)
        if not picked:
            (run_name,) = tk.con.execute("SELECT name FROM runs WHERE run_id = ?", [run_id]).fetchall()[0]
            if total == 0:
                raise QueryError(f"{o.command}: run {run_id} ({run_name}) has no NVTX range named {nvtx!r} "
                                 f"(`tracekit query nvtx-summary --run {run_id}` lists them)")
            raise QueryError(f"{o.command}: {o.instance.format(n)}: run {run_id} ({run_name}) has {total:,} "
                             f"range(s) named {nvtx!r}")
        r = picked[0]
        return Window(r.start_ns, r.window_end_ns, f"{r.label} instance {n} of {total}")
    if instance is not None:
        raise ParamError(f"{o.command}: {o.instance_alone} needs {o.nvtx} (the range it counts)")
    if start_ns is not None and end_ns is not None and start_ns > end_ns:
        raise ParamError(f"{o.command}: {o.start.format(start_ns)} is after {o.end.format(end_ns)}")
    if start_ns is None and end_ns is None:
        return Window()
    return Window(start_ns, end_ns, f"{'-inf' if start_ns is None else start_ns} to "
                                    f"{'+inf' if end_ns is None else end_ns} ns")


def python_slices(tk, run_id: int, window: Window):
    """The Python samples of the run's window as ``_PYTHON``'s slices (a DataFrame: pid, tid, name,
    file, line, start_ns, end_ns, samples, level; in order of thread, start and level)."""
    return tk.frame(tk.con.sql(f"SELECT * FROM ({_PYTHON}) ORDER BY pid, tid, start_ns, level",
                               params=_params(run_id, window)))


_PYTHON_TABLES = itertools.count()


@contextlib.contextmanager
def _python_tables(tk, parts: list[Part]):
    """Each part's Python slices (``_PYTHON``) computed once, into a temporary table of the store's
    connection (read-only ones too) that the size estimate and the writer both read; their names,
    dropped after."""
    names = [f"_tk_trace_python_{next(_PYTHON_TABLES)}" for _ in parts]
    try:
        for table, part in zip(names, parts, strict=True):
            tk.con.execute(f"CREATE TEMP TABLE {table} AS {_PYTHON}", _params(part.run_id, part.window))
        yield names
    finally:
        for table in names:
            with contextlib.suppress(Exception):  # (never made: a Ctrl-C or an error came first)
                tk.con.execute(f"DROP TABLE IF EXISTS {table}")


def check_in_capture(tk, run_id: int, window: Window, osrt: bool = False) -> None:
    """A one-line error where a --from/--to window lies wholly outside the span of the
    run's events (what the trace would hold: nothing) (``registry.check_window``)."""
    from .registry import check_window

    check_window(tk, "export trace", run_id, window.start_ns, window.end_ns, ("--from {}", "--to {}"), osrt,
                 inclusive=True)


def job_span_outside(parts: list[Part], window: Window, spans: list[tuple[int | None, int | None]],
                     inclusive: bool) -> tuple[int, int] | None:
    """Where ``window``, a --from/--to window on the run's clock, lies wholly outside the
    events of every rank of ``parts`` (``job_parts``: each with that window on its own clock;
    ``spans``: each part's first and last event on its own clock, None where it has none),
    the ranks' events' span on the run's clock; else None. Ranks whose captures began apart
    span other times: a window before the run's own first event may hold another rank's, and
    a window inside the run's capture may hold no rank's at all. ``inclusive``: an event that
    ends at the window's start or starts at its end is in it."""
    bound = window.start_ns if window.start_ns is not None else window.end_ns
    if bound is None:
        return None
    on_run = []  # each part's span moved onto the run's clock
    for part, (first, last) in zip(parts, spans, strict=True):
        if first is None:
            continue
        to_mine = (part.window.start_ns if window.start_ns is not None else part.window.end_ns) - bound
        on_run.append((first - to_mine, last - to_mine))
        lo, hi = part.window.start_ns, part.window.end_ns
        outside = ((hi is not None and hi < first) or (lo is not None and lo > last)) if inclusive else \
            ((hi is not None and hi <= first) or (lo is not None and lo >= last))
        if not outside:
            return None
    if not on_run:  # (no rank has events: the command says what they lack)
        return None
    return min(f for f, _ in on_run), max(t for _, t in on_run)


def check_job_in_capture(tk, run_id: int, window: Window, parts: list[Part], osrt: bool = False) -> None:
    """``check_in_capture`` of a job's timeline (``job_parts``): a one-line error where a
    --from/--to window lies outside every rank's events (``job_span_outside``), giving their
    span on the run's clock."""
    from .names import ranks_text
    from .registry import _SPAN

    spans = [tk.con.execute(_SPAN, {"run": p.run_id, "osrt": osrt}).fetchall()[0] for p in parts]
    span = job_span_outside(parts, window, spans, inclusive=True)
    if span is None:
        return
    asked = " ".join(opt.format(v) for opt, v in (("--from {}", window.start_ns), ("--to {}", window.end_ns))
                     if v is not None)
    raise QueryError(f"export trace: {asked} (ns) is outside the captures of {ranks_text([p.rank for p in parts])} "
                     f"of run {run_id}'s job, whose events span {span[0]} to {span[1]} ns on run {run_id}'s clock; "
                     "choose a window inside it (`tracekit query nvtx-ranges` prints times on this clock)")


def _from_zero(tk, parts: list[Part], osrt: bool) -> tuple[list[Part], int]:
    """``parts`` moved later together so that none of their events begins before the trace's
    0, and by how many ns (0 where none did). An export's times count from its nsys session's
    start, and an event may begin before it; Perfetto drops events before 0 (the GPU's
    sampled counters, which nsys samples from before the start, are written at 0 instead:
    ``_GPU_METRICS``)."""
    from .registry import _SPAN

    firsts = [tk.con.execute(_SPAN, {"run": p.run_id, "osrt": osrt}).fetchall()[0][0] for p in parts]
    early = min((first + p.shift_ns for p, first in zip(parts, firsts, strict=True) if first is not None),
                default=0)
    if early >= 0:
        return parts, 0
    return [replace(p, shift_ns=p.shift_ns - early) for p in parts], -early


def _params(run_id: int, window: Window) -> dict[str, Any]:
    return {"run": run_id, "lo": window.start_ns, "hi": window.end_ns}


def _nsys_run(tk, run: str | int | None) -> int:
    from .registry import resolve_run

    return resolve_run(tk, run, "nsys", "export trace", spans_runs=False)


def estimate(tk, run_id: int, window: Window, python: str, osrt: bool = False,
             gpu_metrics: bool = False) -> tuple[dict[str, int], int]:
    """Events per kind in the window and the estimated size of the JSON text, bytes
    (``python``: the table of its Python slices, ``_python_tables``; ``osrt``: with the OS runtime
    calls; ``gpu_metrics``: with the GPU's counters)."""
    counts = dict.fromkeys(KINDS, 0)
    total = 2000  # header and metadata events
    flows = tk.con.execute(
        f"""SELECT count(*) FROM ({_GPU_OPS}) WHERE launch_pid IS NOT NULL""", {**_params(run_id, window), "shift": 0}
    ).fetchall()[0][0]
    sizes = tk.con.execute(_SIZE, {**_params(run_id, window), "osrt": osrt}).fetchall()
    if gpu_metrics:
        sizes += tk.con.execute(_SIZE_GPU_METRICS, _params(run_id, window)).fetchall()
    sizes += tk.con.execute(f"SELECT 'python', count(*), coalesce(sum(length(name) + length(file)), 0) "
                            f"FROM {python}").fetchall()
    for kind, n, name_bytes in sizes:
        counts[kind] = counts.get(kind, 0) + int(n)
        # a start/end range or a GPU fault group is two events, each with the name
        total += int(n) * _EVENT_BYTES[kind] + int(name_bytes) * (2 if kind in ("nvtx_startend", "um_gpu_fault") else 1)
    counts["flow"] = int(flows)
    total += flows * _EVENT_BYTES["flow"]
    return counts, total


# -- writing -------------------------------------------------------------------------


class _Names:
    """JSON-escaped names, each escaped once."""

    def __init__(self):
        self._cache: dict[str | None, str] = {}

    def __call__(self, s: str | None) -> str:
        out = self._cache.get(s)
        if out is None:
            out = json.dumps(s if s is not None else "?", ensure_ascii=False)
            self._cache[s] = out
        return out


def _batches(con, sql: str, params: dict):
    reader = con.sql(sql, params=params).to_arrow_reader(_BATCH)
    for batch in reader:
        yield batch.to_pydict()


class _Writer:
    """Events joined by ',\\n', written a batch at a time; counts the bytes written."""

    def __init__(self, f):
        self.f = f
        self.first = True
        self.bytes = 0
        self.buf: list[str] = []

    def event(self, text: str) -> None:
        self.buf.append(text)

    def flush(self) -> None:
        if not self.buf:
            return
        text = ",\n".join(self.buf)
        if not self.first:
            text = ",\n" + text
        self.first = False
        self.buf.clear()
        self.f.write(text)
        self.bytes += len(text) if text.isascii() else len(text.encode())

    def raw(self, text: str) -> None:
        self.flush()
        self.f.write(text)
        self.bytes += len(text.encode())


def _meta(w: _Writer, what: str, pid: int, tid: int | None, args: dict) -> None:
    t = "" if tid is None else f',"tid":{tid}'
    w.event(f'{{"ph":"M","name":"{what}","pid":{pid}{t},"args":{json.dumps(args, ensure_ascii=False)}}}')


@dataclass
class Part:
    """One run's part of a trace: the run, its window on its own clock, and, in a job's
    timeline (``ranks=``), its rank and the ns added to its times to put them on the
    trace's clock (its session start's distance from the earliest rank's)."""

    run_id: int
    window: Window
    rank: int | None = None
    shift_ns: int = 0


class _Ids:
    """What the parts of one trace share: process ids (a run's own pids, and
    ``GPU_PID_OFFSET`` + device for its GPUs; in a job's timeline, 1, 2, ... in order of first
    use, each rank's apart: ranks on other hosts may have the same pids and devices), the
    flow arrows' ids, and the processes' order."""

    def __init__(self, dense: bool):
        self.dense = dense
        self.pids: dict[tuple[int, int], int] = {}
        self.flow = 0
        self.sort = 0

    def pid(self, part: int, pid: int) -> int:
        if not self.dense:
            return pid
        out = self.pids.get((part, pid))
        if out is None:
            out = self.pids[(part, pid)] = len(self.pids) + 1
        return out


def _write_events(tk, w: _Writer, part: Part, ids: _Ids, python: str, index: int = 0, osrt: bool = False,
                  gpu_metrics: bool = False) -> dict[str, int]:
    """The events of ``part`` (the ``index``-th of the trace's; ``python``: the table of its Python
    slices, ``_python_tables``) and its tracks' names."""
    run_id, window = part.run_id, part.window
    con = tk.con
    p = {**_params(run_id, window), "shift": part.shift_ns}
    pid_of = (lambda pid: ids.pid(index, pid)) if ids.dense else (lambda pid: pid)  # noqa: E731 (the trace's pid)
    prefix = f"rank {part.rank} · " if part.rank is not None else ""
    async_base = index << 40  # (start/end ranges' ids: each rank's apart)
    name = _Names()
    counts = dict.fromkeys(KINDS, 0)
    threads = {(r[0], r[1]): r[2] for r in con.execute(_THREADS, {"run": run_id}).fetchall()}
    cpu_threads: set[tuple[int, int]] = set()
    nvtx_threads: set[tuple[int, int]] = set()
    osrt_threads: set[tuple[int, int]] = set()
    python_threads: set[tuple[int, int]] = set()
    gpu_tracks: dict[tuple[int, int, int], int] = {}  # (device, stream's track, lane) -> stream id
    lane_ends: dict[tuple[int, int], list[int]] = {}  # (device, stream's track) -> each lane's last end, ns

    # CPU: CUDA API calls on the thread's own track
    for b in _batches(con, _API, p):
        for nm, ts, dur, pid, tid, corr in zip(b["name"], b["ts"], b["dur"], b["pid"], b["tid"],
                                               b["correlation_id"], strict=True):
            w.event(f'{{"ph":"X","cat":"cuda_api","name":{name(nm)},"pid":{pid_of(pid)},"tid":{tid},'
                    f'"ts":{ts},"dur":{dur},"args":{{"correlation_id":{corr if corr is not None else "null"}}}}}')
            cpu_threads.add((pid, tid))
        counts["cuda_api"] += len(b["name"])
        w.flush()
    # NVTX: push/pop ranges nest on their thread's NVTX track; start/end ranges are async
    for b in _batches(con, _NVTX, p):
        for nm, style, ts, dur, end_ts, pid, tid, rid, ended in zip(
                b["name"], b["style"], b["ts"], b["dur"], b["end_ts"], b["pid"], b["tid"], b["range_id"], b["ended"],
                strict=True):
            args = f'"args":{{"range_id":{rid}}}' if ended else f'"args":{{"range_id":{rid},"ended":false}}'
            if style == "PushPop":
                w.event(f'{{"ph":"X","cat":"nvtx","name":{name(nm)},"pid":{pid_of(pid)},"tid":{tid + NVTX_TID_OFFSET},'
                        f'"ts":{ts},"dur":{dur},{args}}}')
                nvtx_threads.add((pid, tid))
                counts["nvtx"] += 1
            else:
                ident, ntid = f'"id":"0x{async_base + rid:x}"', tid + NVTX_TID_OFFSET  # (its thread's NVTX track's)
                w.event(f'{{"ph":"b","cat":"nvtx_startend","name":{name(nm)},{ident},"pid":{pid_of(pid)},"tid":{ntid},'
                        f'"ts":{ts},{args}}}')
                w.event(f'{{"ph":"e","cat":"nvtx_startend","name":{name(nm)},{ident},"pid":{pid_of(pid)},"tid":{ntid},'
                        f'"ts":{end_ts}}}')
                nvtx_threads.add((pid, tid))
                counts["nvtx_startend"] += 1
        w.flush()
    for b in _batches(con, _MARKS, p):
        for nm, ts, pid, tid in zip(b["name"], b["ts"], b["pid"], b["tid"], strict=True):
            w.event(f'{{"ph":"i","s":"t","cat":"nvtx_mark","name":{name(nm)},"pid":{pid_of(pid)},'
                    f'"tid":{tid + NVTX_TID_OFFSET},"ts":{ts}}}')
            nvtx_threads.add((pid, tid))
        counts["nvtx_mark"] += len(b["name"])
        w.flush()
    # OS runtime calls on their thread's OS runtime track (nested calls lie inside their caller)
    for b in _batches(con, _OSRT, p) if osrt else ():
        for nm, ts, dur, pid, tid, ret in zip(b["name"], b["ts"], b["dur"], b["pid"], b["tid"], b["return_value"],
                                              strict=True):
            w.event(f'{{"ph":"X","cat":"osrt","name":{name(nm)},"pid":{pid_of(pid)},"tid":{tid + OSRT_TID_OFFSET},'
                    f'"ts":{ts},"dur":{dur},"args":{{"return_value":{ret if ret is not None else "null"}}}}}')
            osrt_threads.add((pid, tid))
        counts["osrt"] += len(b["name"])
        w.flush()
    # Python: the sampled stacks as a flame chart over time on the thread's Python track
    sql = (f"SELECT name, file, line, {_us('start_ns + $shift')} AS ts, {_us('end_ns - start_ns')} AS dur, samples, "
           f"pid, tid FROM {python} ORDER BY pid, tid, start_ns, level")
    for b in _batches(con, sql, {"shift": part.shift_ns}):
        for nm, file, line, ts, dur, n, pid, tid in zip(b["name"], b["file"], b["line"], b["ts"], b["dur"], b["samples"],
                                                       b["pid"], b["tid"], strict=True):
            w.event(f'{{"ph":"X","cat":"python","name":{name(nm)},"pid":{pid_of(pid)},"tid":{tid + PYTHON_TID_OFFSET},'
                    f'"ts":{ts},"dur":{dur},"args":{{"file":{name(file)},"line":{line if line is not None else "null"},'
                    f'"samples":{n}}}}}')
            python_threads.add((pid, tid))
        counts["python"] += len(b["name"])
        w.flush()
    # GPU: one track per stream, a flow from the launching call when it is in the window
    flows = ids.flow
    for b in _batches(con, _GPU_OPS, p):
        cols = [b[c] for c in ("kind", "name", "ts", "dur", "device_id", "track", "correlation_id",
                               "launch_pid", "launch_tid", "api_ts", "grid_x", "grid_y", "grid_z",
                               "block_x", "block_y", "block_z", "registers_per_thread", "smem_bytes", "bytes",
                               "stream_id", "start_ns", "end_ns")]
        for (kind, nm, ts, dur, dev, track, corr, lpid, ltid, api_ts, gx, gy, gz, bx, by, bz, regs, smem, nbytes,
             sid, start, end) in zip(*cols, strict=True):
            gpid = pid_of(GPU_PID_OFFSET + dev)
            # the stream's first lane free at the op's start (ops come by start): one that starts
            # before the previous op ended goes on a lane of its own, not inside that op
            ends = lane_ends.setdefault((dev, track), [])
            lane = next((i for i, e in enumerate(ends) if e <= start), len(ends))
            if lane == len(ends):
                ends.append(end)
            else:
                ends[lane] = end
            gpu_tracks[(dev, track, lane)] = sid
            track += lane * GPU_LANE_TID_OFFSET  # (the lane's tid)
            sid, corr = ("null" if v is None else v for v in (sid, corr))
            if kind == "kernel":
                args = (f'"grid":[{gx},{gy},{gz}],"block":[{bx},{by},{bz}],"registers_per_thread":{regs},'
                        f'"shared_mem_bytes":{smem},"stream":{sid},"correlation_id":{corr}')
            elif kind == "graph":
                args = f'"stream":{sid},"correlation_id":{corr}'
            else:
                args = f'"bytes":{nbytes},"stream":{sid},"correlation_id":{corr}'
            w.event(f'{{"ph":"X","cat":"{kind}","name":{name(nm)},"pid":{gpid},"tid":{track},'
                    f'"ts":{ts},"dur":{dur},"args":{{{args}}}}}')
            counts[kind] += 1
            if lpid is not None:
                ids.flow += 1
                w.event(f'{{"ph":"s","cat":"launch","name":"launch","id":{ids.flow},"pid":{pid_of(lpid)},"tid":{ltid},'
                        f'"ts":{api_ts}}}')
                w.event(f'{{"ph":"f","bp":"e","cat":"launch","name":"launch","id":{ids.flow},"pid":{gpid},'
                        f'"tid":{track},"ts":{ts}}}')
                cpu_threads.add((lpid, ltid))
        w.flush()
    counts["flow"] = ids.flow - flows
    # the GPU's counters: a counter track per metric in the GPU's process
    metric_gpus: set[int] = set()
    sql = (_GPU_METRICS.format(ts=_us("greatest(timestamp_ns + $shift, 0)"), shift="$shift")
           + " ORDER BY device_id, name, timestamp_ns")
    for b in _batches(con, sql, p) if gpu_metrics else ():
        for dev, nm, ts, value in zip(b["device_id"], b["name"], b["ts"], b["value"], strict=True):
            w.event(f'{{"ph":"C","cat":"gpu_metric","name":{name(nm)},"pid":{pid_of(GPU_PID_OFFSET + dev)},"ts":{ts},'
                    f'"args":{{"value":{value:.6g}}}}}')
            metric_gpus.add(dev)
        counts["gpu_metric"] += len(b["name"])
        w.flush()

    # Unified Memory page faults: the GPU's groups async in its process (they overlap), the CPU's instant
    fault_gpus: set[int] = set()
    for b in _batches(con, _UM_GPU, p):
        for dev, nm, ts, end_ts, faults, address, pid, n in zip(
                b["device_id"], b["name"], b["ts"], b["end_ts"], b["faults"], b["address"], b["pid"], b["n"],
                strict=True):
            gpid, ident = pid_of(GPU_PID_OFFSET + dev), f'"id":"0x{async_base + (1 << 39) + n:x}"'
            w.event(f'{{"ph":"b","cat":"um_gpu_fault","name":{name(nm)},{ident},"pid":{gpid},"tid":0,"ts":{ts},'
                    f'"args":{{"faults":{faults},"address":"{address}","pid":{pid}}}}}')
            w.event(f'{{"ph":"e","cat":"um_gpu_fault","name":{name(nm)},{ident},"pid":{gpid},"tid":0,"ts":{end_ts}}}')
            fault_gpus.add(dev)
        counts["um_gpu_fault"] += len(b["name"])
        w.flush()
    fault_pids: set[int] = set()
    for b in _batches(con, _UM_CPU, p):
        for pid, ts, address, where in zip(b["pid"], b["ts"], b["address"], b["instruction"], strict=True):
            w.event(f'{{"ph":"i","s":"p","cat":"um_cpu_fault","name":"CPU page fault","pid":{pid_of(pid)},'
                    f'"ts":{ts},"args":{{"address":"{address}","instruction":{name(where) if where is not None else "null"}}}}}')
            fault_pids.add(pid)
        counts["um_cpu_fault"] += len(b["pid"])
        w.flush()

    # GPU memory live: a counter track per device and kind of memory in the allocating process
    memory_pids: set[int] = set()
    for b in _batches(con, _GPU_MEMORY, p):
        for pid, dev, kind, ts, live in zip(b["pid"], b["device_id"], b["memory_kind"], b["ts"], b["live_bytes"],
                                            strict=True):
            w.event(f'{{"ph":"C","cat":"gpu_memory","name":{name(f"GPU {dev} {kind} memory [bytes]")},'
                    f'"pid":{pid_of(pid)},"ts":{ts},"args":{{"value":{live}}}}}')
            memory_pids.add(pid)
        counts["gpu_memory"] += len(b["pid"])
        w.flush()

    # track names and order: processes by pid, then the GPUs; in a process, each thread's
    # NVTX track, then its Python track, then its OS runtime track, then its CUDA API track
    threaded = cpu_threads | nvtx_threads | python_threads | osrt_threads
    pids = sorted({p for p, _ in threaded} | fault_pids | memory_pids)
    for pid in pids:
        pname = threads.get((pid, pid)) or "process"
        _meta(w, "process_name", pid_of(pid), None, {"name": f"{prefix}{pname} (pid {pid})"})
        _meta(w, "process_sort_index", pid_of(pid), None, {"sort_index": ids.sort})
        ids.sort += 1
    tracks = ((nvtx_threads, NVTX_TID_OFFSET, "NVTX"), (python_threads, PYTHON_TID_OFFSET, "Python"),
              (osrt_threads, OSRT_TID_OFFSET, "OS runtime"), (cpu_threads, 0, "CUDA API"))
    for i, (pid, tid) in enumerate(sorted(threaded)):
        tname = threads.get((pid, tid)) or "thread"
        for j, (have, offset, what) in enumerate(tracks):
            if (pid, tid) in have:
                _meta(w, "thread_name", pid_of(pid), tid + offset, {"name": f"{what} · {tname} [{tid}]"})
                _meta(w, "thread_sort_index", pid_of(pid), tid + offset, {"sort_index": len(tracks) * i + j})
    gpus = dict(con.execute(_GPUS, {"run": run_id}).fetchall())
    streams = {(r[0], r[4]): r for r in con.execute(_STREAMS, {"run": run_id}).fetchall()}
    for dev in sorted({d for d, _, _ in gpu_tracks} | metric_gpus | fault_gpus):
        gpid = pid_of(GPU_PID_OFFSET + dev)
        _meta(w, "process_name", gpid, None, {"name": f"{prefix}GPU {dev}: {gpus.get(dev) or 'CUDA device'}"})
        _meta(w, "process_sort_index", gpid, None, {"sort_index": ids.sort})
        ids.sort += 1
    for order, ((dev, track, lane), sid) in enumerate(sorted(gpu_tracks.items())):
        _, gpid_raw, ctx, _, _, owners = streams[(dev, track)]
        pid = (gpid_raw >> 24) & 0xFFFFFF
        if sid is None:  # the process's ops on no stream (Unified Memory migrations)
            label = "No stream" + (f" (pid {pid})" if owners > 1 else "")
        else:
            label = f"Stream {sid}" + (f" (pid {pid}, context {ctx})" if owners > 1 else "")
        tid = track + lane * GPU_LANE_TID_OFFSET
        _meta(w, "thread_name", pid_of(GPU_PID_OFFSET + dev), tid,
              {"name": label + (f" · overlap {lane}" if lane else "")})
        _meta(w, "thread_sort_index", pid_of(GPU_PID_OFFSET + dev), tid, {"sort_index": order})
    w.flush()
    return counts


def job_parts(tk, run_id: int, window: Window, ranks: str, onto_run: bool = False,
              said: tuple[str, str] = ("export trace", "--ranks ")) -> list[Part]:
    """The parts of the timeline of run ``run_id``'s job: its ranks ``ranks`` (``all``, or
    numbers and spans, ``0-3,7``), each with its window and its shift onto the trace's clock.
    Each export counts time from its own nsys session's start; the trace's clock is the earliest
    rank's (``onto_run``: run ``run_id``'s), so rank r's times are shifted by its session start
    less that one's (UTC, as nsys recorded them: ranks on one host share its clock; on several
    hosts, their clocks' sync). ``window`` is on run ``run_id``'s clock, and so each rank's is
    its own time over the same span. ``said``: the command and the option, as errors name them."""
    from .names import parse_numbers, ranks_text
    from .registry import job_runs

    command, flag = said
    expect(ranks, str, f"{command}: {flag.strip(' =')}")
    mine = job_runs(tk, run_id)
    if len(mine) < 2:
        name = tk.con.execute("SELECT name FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0]
        why = "has no rank" if not mine else "is the only rank of its job in the store"
        raise QueryError(f"{command}: {flag}{ranks}: run {run_id} ({name}) {why}; give a rank's run of a job of "
                         f"several (`tracekit query jobs`), or leave out {flag.strip(' =')} for the run alone")
    have = {rank: rid for rid, rank, _ in mine}
    wanted = (sorted(have) if ranks.strip().lower() == "all" else
              parse_numbers(ranks, f"{command}: {flag.strip(' =')}"))
    absent = [k for k in wanted if k not in have]
    if absent:
        raise QueryError(f"{command}: {flag}{ranks}: {ranks_text(absent)} not in run {run_id}'s "
                         f"job, which has {ranks_text(sorted(have))}")
    ids = [have[k] for k in wanted]
    starts = dict(tk.con.execute(
        "SELECT run_id, TRY_CAST(json_extract_string(meta, '$.session_start_utc_ns') AS HUGEINT) FROM runs "
        "WHERE run_id IN (SELECT unnest(?::BIGINT[]))", [[*ids, run_id]]).fetchall())
    unknown = [r for r in (*ids, run_id) if starts.get(r) is None]
    if unknown:
        raise QueryError(f"{command}: {flag}{ranks}: run {unknown[0]}'s export records no session start "
                         "(TARGET_INFO_SESSION_START_TIME): its times cannot be put beside the other ranks'")
    first = starts[run_id] if onto_run else min(starts[r] for r in ids)
    out = []
    for k, rid in zip(wanted, ids, strict=True):
        to_mine = int(starts[run_id] - starts[rid])  # (run_id's clock -> rank k's)
        lo = None if window.start_ns is None else window.start_ns + to_mine
        hi = None if window.end_ns is None else window.end_ns + to_mine
        out.append(Part(rid, Window(lo, hi, window.label), k, int(starts[rid] - first)))
    return out


def ranks_that_fit(parts: list[Part], sizes: list[float], bound: float) -> str | None:
    """The first of ``parts``' ranks whose ``sizes`` add up to at most ``bound``, as
    ``--ranks`` and ``-p ranks=`` read them (``0-1``, ``0,2-3``): what to ask for where the
    whole job is too much; None where the first rank alone is past ``bound``."""
    from .names import numbered

    kept, total = [], 0.0
    for part, size in zip(parts, sizes, strict=True):
        if total + size > bound:
            break
        kept.append(part.rank)
        total += size
    return numbered(kept, "", "").replace(" ", "") if kept else None


def export_trace(tk, path: str | os.PathLike, run: str | int | None = None, start_ns: int | None = None,
                 end_ns: int | None = None, nvtx: str | None = None, instance: int | None = None,
                 force: bool = False, max_bytes: int = MAX_BYTES, osrt: bool = False,
                 gpu_metrics: bool = False, ranks: str | None = None) -> TraceResult:
    """Write the run's timeline (or a window of it) as a Chrome Trace Event JSON file;
    gzip-compressed when ``path`` ends in .gz; ``osrt``: with the OS runtime calls,
    ``gpu_metrics``: with counter tracks of the GPU's sampled counters (a run captured
    without them is an error then); ``ranks`` (``all``, or ``0-3,7``): the run's job's
    ranks in one timeline, each rank's processes named ``rank N · ...``, on one clock
    (``job_parts``). Refuses, with the estimate, a file whose JSON would exceed
    ``max_bytes`` unless ``force``. Written through ``write_output`` (a temporary file
    renamed into place, never over the store)."""
    from .outputs import text_output

    path = Path(path)
    gz = text_output(path, "a trace (Chrome Trace Event JSON)", "trace.json")
    run_id = _nsys_run(tk, run)
    window = resolve_window(tk, run_id, start_ns, end_ns, nvtx, instance)
    parts = [Part(run_id, window)] if ranks is None else job_parts(tk, run_id, window, ranks)
    for asked, option, table in ((osrt, "--osrt", "osrt_calls"), (gpu_metrics, "--gpu-metrics", "gpu_metrics")):
        if asked:
            from .registry import check_traced

            for part in parts:
                check_traced(tk, f"export trace {option}", part.run_id, [table], advice=f", or leave out {option}")
    if nvtx is None and ranks is None:  # (an NVTX range's window is in the capture)
        check_in_capture(tk, run_id, window, osrt)
    elif nvtx is None:  # (the ranks' captures: a window outside the run's may hold another rank's events)
        check_job_in_capture(tk, run_id, window, parts, osrt)
    parts, before_zero = _from_zero(tk, parts, osrt)
    with _python_tables(tk, parts) as tables:  # (the Python slices: computed once, counted and written)
        counts, sizes = dict.fromkeys(KINDS, 0), []
        for part, table in zip(parts, tables, strict=True):
            got, size = estimate(tk, part.run_id, part.window, table, osrt, gpu_metrics)
            counts = {k: counts[k] + got[k] for k in KINDS}
            sizes.append(size)
        est = sum(sizes)
        if est > max_bytes and not force:
            what = f"run {run_id}" if ranks is None else f"the {len(parts):,} ranks of run {run_id}'s job"
            fit = ranks_that_fit(parts, sizes, max_bytes) if ranks is not None else None
            raise QueryError(
                f"export trace: the trace of {what} ({window.label}) would be about {est / 1e6:,.0f} MB of JSON "
                f"({sum(v for k, v in counts.items() if k != 'flow'):,} events); choose a window (--from/--to or "
                f"--nvtx NAME --instance N){f' or fewer ranks (--ranks {fit})' if fit else ''} or pass --force")
        header = {"run_id": run_id, "window": window.label, "window_start_ns": window.start_ns,
                  "window_end_ns": window.end_ns, "time_unit": "ts/dur in µs with 3 decimals: exact ns",
                  "source": "tracekit export trace"}
        if ranks is not None:
            header["ranks"] = [{"rank": x.rank, "run_id": x.run_id, "shift_ns": x.shift_ns} for x in parts]
            header["clock"] = ("ns since the earliest rank's nsys session start: each rank's own times plus its "
                               "shift_ns; window_start_ns/window_end_ns on run_id's own clock")
        elif parts[0].shift_ns:
            header["shift_ns"] = parts[0].shift_ns
            header["clock"] = ("ns since the nsys session start plus shift_ns; window_start_ns/window_end_ns on "
                               "the run's own clock")
        if before_zero:
            header["clock"] += (f"; shift_ns includes the {before_zero} ns by which the earliest event began "
                                "before the session start (Perfetto drops events before 0)")
        result = TraceResult(path, run_id, window, estimated_bytes=est)

        def write(f) -> None:
            w = _Writer(f)
            w.raw('{"displayTimeUnit":"ns","otherData":' + json.dumps(header, ensure_ascii=False)
                  + ',"traceEvents":[\n')
            ids = _Ids(dense=ranks is not None)
            result.counts = dict.fromkeys(KINDS, 0)
            for i, part in enumerate(parts):
                got = _write_events(tk, w, part, ids, tables[i], i, osrt, gpu_metrics)
                result.counts = {k: result.counts[k] + got[k] for k in KINDS}
            w.raw("\n]}\n")
            result.json_bytes = w.bytes

        def write_file(tmp: Path) -> None:
            with text_file(tmp, gz, level=3) as f:
                write(f)

        write_output(path, write_file, tk.path)
    result.parts = parts
    return result
