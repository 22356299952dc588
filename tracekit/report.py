"""``tracekit report``: one self-contained HTML file per run, readable offline.

A report is sections of named-query results: a table (sortable in the page) and, where a
chart exists for that query, the chart of tracekit/charts.py built from the same result.
Which sections a run gets follows its kind:

- nsys: top kernels and their launch durations, kernel time by NVTX path, NVTX ranges on
  the GPU, GPU utilization and the longest idle gaps, what nsys's expert rules find (nsys
  analyze: host-blocking calls, idle and underused stretches), launch overhead, CUDA API calls,
  memory operations by memory kind, OS runtime calls, and the timeline of one typical
  request (charts.timeline: the NVTX ranges and the GPU's work of charts.typical_instance,
  the median instance of the program's most repeated outermost NVTX range, or of the most
  repeated one a few nesting levels down where no outermost one repeats; the whole run
  where it has none); the
  sections about events the capture did not trace (CUDA, with `nsys -t nvtx,osrt`; NVTX,
  with `nsys -t cuda`) are left out and the header says which and why;
- ncu: roofline, the roofline by memory level, occupancy with the binding limit, speed of light, memory workload,
  ncu's rule results (what it suggests), warp stalls;
- a point of a sweep (its capture parameters name the sweep): that sweep's bs x nc latency
  grid as a heatmap and as lines, the latency table, top kernels per point, where its
  points timed requests (the HSTU workload's), and the kernel time per point where they were
  captured under nsys (a program's sweep too), what ncu profiled there where they were
  captured under ncu (the sweep queries asked with ``sweep=`` the run: never another
  sweep's points);
- an nsys run that is one rank of a job of several (tracekit/ranks.py): first the job's
  ranks side by side (rank-summary), its stragglers and the rank x NVTX path heatmap,
  then the rank's own sections; where a rank did not trace what one of them reads, the
  header names that rank and the sections left out;
- with ``vs=BASE`` (``--vs``), first a "Compared with BASE" section: ``tk.diff(BASE,
  run)`` as a sortable table with coloured verdicts (every row that changed, then the
  largest unchanged ones, up to ``DIFF_ROWS``) and the diff chart of tracekit/charts.py;
  where BASE and the run are ranks of two jobs of several ranks, then the jobs compared
  rank by rank (``tk.diff_jobs``: its table and the job-diff chart); then the two runs drawn
  (``_compared_charts``): two ncu runs on one roofline (charts.diff_roofline), two nsys
  runs' typical requests on one time axis (charts.diff_timeline_data); then, of two ncu runs
  that hold Source Counters with line information, their kernels line by line
  (``_compared_lines``: ``tk.diff(BASE, run, by="source")``'s table);
- several runs (``build_many``, ``--run A --run B``: an experiment's runs timed, under nsys
  and under ncu): each run's header and sections, one run after the other; with ``--vs
  BASE`` (``_compared_many``), first their comparison with BASE (``tk.compare``: its table,
  each run's cell coloured by its verdict, and the compare chart); where BASE and the runs are
  ranks of jobs of several ranks, then the jobs compared side by side (``tk.compare(jobs=True)``,
  ``_jobs_compared``); then the runs drawn against it (``_compared_runs_charts``: ncu runs on one roofline, charts.compare_roofline; nsys runs'
  requests on one time axis, charts.compare_timeline_data).

The header is the run-info query (GPU, driver and clocks as recorded, tool versions,
capture parameters). Vega, Vega-Lite and Vega-Embed are inlined from vl-convert's
bundle, the chart specs are inlined JSON: the file opens from disk, an e-mail or a CI
artifact with no network. A section whose question the run cannot answer (a roofline
from a report without its metrics) shows the reason instead of failing the report.

The page reports its own rendering on ``window.tracekitReport`` (charts, charts
rendered, data marks per chart, errors) and on each chart's element (``data-marks``),
which the browser test reads.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import re
import shlex
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from . import vega
from .errors import (
    CaptureWarning,
    NoneRecorded,
    ParamError,
    QueryError,
    TracekitError,
    warn_from_caller,
)
from .table import fixed_time, prefixed_scale


@dataclass(frozen=True)
class Section:
    """One named query's result in the report: a table of ``columns`` and the chart
    ``chart`` (a name in charts.CHARTS whose query is ``query``); without a query, the
    chart alone, of its own data (charts.ChartSpec.data), drawn for the run with the
    parameters ``chart_params`` computes."""

    key: str
    title: str
    query: str | None
    params: dict[str, Any] = field(default_factory=dict)
    chart: str | None = None
    columns: tuple[str, ...] | None = None
    intro: str = ""
    per_run: bool = True  # the query takes --run
    #: a run whose capture did not trace what it reads leaves it out without a word (an
    #: option few captures use: a line in every other report would be noise)
    optional: bool = False
    #: a table that must hold rows of the run for the section to be shown (NCCL's sums: a
    #: run without NCCL kernels leaves it out without a word, as ``optional``)
    needs: str | None = None
    #: where given, the section is shown only where this says so of the run, ``(tk, run id) ->
    #: bool``: what no run of its kind may have (a sweep's kernels, where no point of the sweep
    #: was captured under nsys), left out without a word, as ``needs``
    shown_if: Callable[[Any, int], bool] | None = None
    #: (tk, run id) -> (the chart's parameters for the run, a caption saying what they chose)
    chart_params: Callable[[Any, int], tuple[dict[str, Any], str]] | None = None
    #: (tk, run id) -> the query's parameters beside the run that follow from it (a second run),
    #: or None, which leaves the section out without a word, as ``needs``
    run_params: Callable[[Any, int], dict[str, Any] | None] | None = None


def sweep_profiled(tk, run_id: int) -> bool:
    """Whether a point of the sweep of run ``run_id`` (the runs outside any sweep, for a run
    outside one) has kernels captured under nsys: what sweep-points and sweep-kernels read."""
    return bool(tk.con.execute(
        "SELECT 1 FROM runs s, runs p WHERE s.run_id = ? AND json_extract_string(p.params, '$.tool') = 'nsys' "
        "AND json_extract_string(p.params, '$.sweep') IS NOT DISTINCT FROM json_extract_string(s.params, '$.sweep') "
        "AND p.run_id IN (SELECT DISTINCT run_id FROM kernels) LIMIT 1", [run_id]).fetchall())


def sweep_timed(tk, run_id: int) -> bool:
    """Whether a point of the sweep of run ``run_id`` has an ok run that timed requests (the
    HSTU workload's sweep; a program's, `tracekit sweep --grid ... -- CMD`, has none): what
    the latency sections read (sweep_runs)."""
    return bool(tk.con.execute(
        "SELECT 1 FROM runs s, sweep_runs p WHERE s.run_id = ? "
        "AND json_extract_string(p.params, '$.sweep') IS NOT DISTINCT FROM json_extract_string(s.params, '$.sweep') "
        "LIMIT 1", [run_id]).fetchall())


def ncu_of_the_workload(tk, run_id: int) -> dict[str, Any] | None:
    """kernel-headroom's ``ncu`` for an nsys run: the latest ok ncu run of its workload
    (``diff.same_workload``); None where the store has none."""
    from .diff import same_workload

    ncu = same_workload(tk.con, run_id, "ncu")
    return None if ncu is None else {"ncu": ncu}


def sweep_ncu_profiled(tk, run_id: int) -> bool:
    """Whether a point of the sweep of run ``run_id`` has kernels profiled by ncu: what
    sweep-ncu reads."""
    return bool(tk.con.execute(
        "SELECT 1 FROM runs s, runs p WHERE s.run_id = ? "
        "AND json_extract_string(p.params, '$.sweep') IS NOT DISTINCT FROM json_extract_string(s.params, '$.sweep') "
        "AND p.run_id IN (SELECT DISTINCT run_id FROM ncu_kernels) LIMIT 1", [run_id]).fetchall())


def typical_request(tk, run_id: int) -> tuple[dict[str, Any], str]:
    """The timeline's window for the report: the run's typical request
    (charts.typical_instance: the median instance of its most repeated NVTX range, the
    outermost where one repeats), or, where it has no NVTX range, the whole run, or its
    middle GPU ops (charts.middle_stretch) where the whole run is more than a timeline
    draws; and the caption that says which and why, and how to have it in Perfetto."""
    from .charts import TIMELINE_BARS, TYPICAL_DEPTHS, middle_stretch, typical_instance

    pick = typical_instance(tk, run_id)
    if pick is None:
        whole = f"`tracekit export trace --run {run_id} -o run.json` writes the whole run for ui.perfetto.dev."
        stretch = middle_stretch(tk, run_id)
        if stretch is None or stretch.total <= TIMELINE_BARS:
            return {}, f"Shown: the whole run (it has no NVTX range to pick a request from). {whole}"
        return {"from_ns": stretch.start_ns, "to_ns": stretch.end_ns}, (
            f"Shown: {stretch.said()}, {(stretch.end_ns - stretch.start_ns) / 1e6:,.3f} ms from {stretch.start_ns} ns "
            f"(the run has more GPU ops than the {TIMELINE_BARS:,} a timeline draws, and no NVTX range to pick a "
            f"request from). `tracekit export trace --run {run_id} --from {stretch.start_ns} --to {stretch.end_ns} "
            f"-o window.json` writes it for ui.perfetto.dev; `tracekit chart timeline --run {run_id} -p from_ns=START "
            f"-p to_ns=END` draws another window; {whole}")
    nvtx, param = shlex.quote(pick.name), shlex.quote(f"nvtx={pick.name}")  # (a name with a space, for the shell)
    shown = f"{pick.name} instance {pick.instance} of {pick.instances:,}"
    dur = f"{pick.dur_ns / 1e6:,.3f} ms"
    libraries = "a library" if len(pick.left_aside) == 1 else "libraries"
    aside = f"; the ranges of {' and '.join(pick.left_aside)}, {libraries}, left aside" if pick.left_aside else ""
    if not pick.repeated:
        depths = "depth 0" if TYPICAL_DEPTHS == 1 else f"depths 0 to {TYPICAL_DEPTHS - 1}"
        none = f"no NVTX range occurs twice at nesting {depths}{aside}"
        which = (f"{shown}, the run's only outermost NVTX range ({none})" if pick.among == 1 else
                 f"{shown}, one of the run's {pick.among:,} outermost NVTX ranges: its duration, {dur}, is their "
                 f"median ({none})")
    else:
        of = (f"the {pick.among:,}" if pick.among == pick.instances else
              f"its {pick.among:,} {'outermost instances' if pick.depth == 0 else 'instances at that depth'}")
        if pick.depth == 0:
            why = f"{pick.name} is the outermost NVTX range with the most instances{aside}"
        else:
            above = "outermost range" if pick.depth == 1 else f"range at nesting depths 0 to {pick.depth - 1}"
            why = (f"{pick.name} is the most repeated NVTX range at nesting depth {pick.depth}: no {above} "
                   f"occurs twice{aside}")
        which = f"{shown}: its duration, {dur}, is the median of {of} ({why})"
    return {"nvtx": pick.name, "instance": pick.instance}, (
        f"Shown: {which}. `tracekit export trace --run {run_id} --nvtx {nvtx} --instance {pick.instance} "
        f"-o request.json` writes it for ui.perfetto.dev; `tracekit chart timeline --run {run_id} "
        f"-p {param} -p instance=N` draws another.")


#: the most ranks the job's timeline draws; a larger job shows the run's rank and the slowest
#: and fastest ranks of the step
JOB_TIMELINE_RANKS = 8


def typical_step(tk, run_id: int) -> tuple[dict[str, Any], str]:
    """The job timeline's window and ranks: the run's typical request (``typical_request``)
    over every rank of its job, or, beyond ``JOB_TIMELINE_RANKS`` ranks, over the run's rank
    and the ranks whose range of that name took longest and shortest over the same span
    (``_slowest_and_fastest``); and the caption that says which."""
    from .names import ranks_text
    from .registry import job_runs

    params, caption = typical_request(tk, run_id)
    runs = job_runs(tk, run_id)
    ranks = [k for _, k, _ in runs]
    own = next((k for rid, k, _ in runs if rid == run_id), None)  # (None: a run the same capture superseded)
    nvtx, instance = params.get("nvtx"), params.get("instance")
    if len(ranks) <= JOB_TIMELINE_RANKS:
        chosen, which = ranks, f"every rank of the job ({ranks_text(ranks)})"
    else:
        chosen, said = {own} - {None}, [f"this run's rank {own}"] if own is not None else []
        extremes = _slowest_and_fastest(tk, run_id, nvtx, instance) if nvtx is not None else None
        if extremes is not None:
            slow, fast = extremes
            chosen |= {slow, fast}
            said += [f"rank {slow}, whose {nvtx} there took longest", f"rank {fast}, shortest"]
        chosen = sorted(chosen) or ranks[:JOB_TIMELINE_RANKS]
        which = f"{', '.join(said) or ranks_text(chosen)} (of the job's {len(ranks):,} ranks)"
    spec = "all" if chosen == ranks else ",".join(map(str, chosen))
    window = (f" --nvtx {shlex.quote(nvtx)} --instance {instance}" if nvtx is not None else "")
    return {**params, "ranks": spec}, (
        f"{caption.split('. `tracekit export trace')[0]}; on {which}, each over the same span of time (each rank's "
        f"times set by its capture's start). `tracekit export trace --run {run_id} --ranks {spec}{window} "
        "-o step.json` writes it for ui.perfetto.dev.")


def _slowest_and_fastest(tk, run_id: int, nvtx: str, instance: int) -> tuple[int, int] | None:
    """The ranks of run ``run_id``'s job whose range named ``nvtx`` over the span of the run's
    ``instance``-th one (each rank's own: the range of that name that overlaps the span most)
    lasted longest and shortest; None where the span or the ranks' clocks cannot be had."""
    from .trace import job_parts, resolve_window

    try:
        window = resolve_window(tk, run_id, nvtx=nvtx, instance=instance)
        parts = job_parts(tk, run_id, window, "all", onto_run=True)
    except QueryError:
        return None
    rows = tk.con.execute(
        "WITH w AS (SELECT unnest($runs) AS run_id, unnest($ranks) AS rank, unnest($lo) AS lo, unnest($hi) AS hi) "
        "SELECT w.rank, arg_max(r.end_ns - r.start_ns, least(r.end_ns, w.hi) - greatest(r.start_ns, w.lo)) AS dur "
        "FROM w JOIN nvtx_ranges r ON r.run_id = w.run_id AND (r.name = $name OR r.text = $name) "
        "AND r.start_ns < w.hi AND r.end_ns > w.lo GROUP BY w.rank ORDER BY dur DESC, w.rank",
        {"runs": [x.run_id for x in parts], "ranks": [x.rank for x in parts], "name": nvtx,
         "lo": [x.window.start_ns for x in parts], "hi": [x.window.end_ns for x in parts]}).fetchall()
    return (int(rows[0][0]), int(rows[-1][0])) if rows else None


NSYS = (
    Section("top-kernels", "Top kernels", "top-kernels", {"limit": 20}, "top-kernels",
            ("name", "instances", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns", "time_pct"),
            "GPU kernels by total time (the numbers of nsys stats -r cuda_gpu_kern_sum)."),
    Section("kernel-durations", "Kernel durations", "top-kernels", {"limit": 20}, "kernel-durations", None,
            "How each kernel's launches spread: the same kernel at several sizes, a cold first launch, or a clock "
            "that moved shows as a long line or a wide bar (percentiles in `tracekit query top-kernels "
            "--all-columns`; -p skip=N leaves out each kernel's first N launches)."),
    Section("kernel-headroom", "Where tuning can save time", "kernel-headroom", {"limit": 15}, "kernel-headroom",
            ("name", "time_pct", "total_ns", "profiled", "sol_pct", "bottleneck", "achieved_occupancy_pct",
             "headroom_ns", "headroom_pct", "ncu_estimate_ns", "ncu_rule"),
            "Each kernel's time in this run beside what the latest ncu run of the same workload measured for it: "
            "sol_pct is its busiest unit's throughput (ncu's speed of light), headroom the time beyond what that "
            "unit at its peak would take, the most tuning can save at the same work; bottleneck reads the "
            "throughputs as ncu's SOLBottleneck rule does. ncu_estimate is ncu's own estimate, from its rule with "
            "the largest speedup. A kernel ncu did not profile has profiled 0.",
            optional=True, run_params=ncu_of_the_workload),
    Section("kernels-by-nvtx", "Kernel time by NVTX path", "kernels-by-nvtx", {"limit": 25}, "kernels-by-nvtx",
            ("path", "launches", "distinct_kernels", "total_ns", "avg_ns", "time_pct", "top_kernel"),
            "Each kernel is counted under the innermost NVTX push/pop range around the call that launched it."),
    Section("nvtx-gpu", "NVTX ranges on the GPU", "nvtx-gpu-projection", {"limit": 20}, None,
            ("range", "style", "instances", "range_total_ns", "proj_total_ns", "proj_avg_ns", "proj_med_ns",
             "gpu_ops"),
            "Wall time of each range against the GPU time of the work it launched (nsys stats -r nvtx_gpu_proj_sum)."),
    Section("gpu-utilization", "GPU utilization", "gpu-utilization", {"limit": 0}, None,
            ("device_id", "pid", "stream_id", "ops", "span_ns", "busy_ns", "idle_ns", "utilization_pct", "gaps",
             "max_gap_ns"),
            "Busy and idle time per device (pid empty), per stream, and per process for its ops on no stream "
            "(Unified Memory migrations: stream empty); gaps: idle stretches of 10 µs or more."),
    Section("comm-overlap", "Communication and computation", "comm-overlap", {}, None,
            ("pid", "device_id", "nccl_kernels", "nccl_ns", "compute_ns", "overlap_ns", "exposed_nccl_ns",
             "overlap_pct", "busy_ns"),
            "Per process and GPU: the time NCCL's kernels ran, the time other kernels ran, both at once, and the "
            "NCCL time nothing else ran beside (exposed communication, which a step waits for).",
            needs="comm_overlap_sum"),
    Section("nccl-overlap", "Overlap by kernel", "nccl-overlap", {"limit": 15}, None,
            ("name", "kind", "instances", "total_ns", "comm_overlap_pct", "compute_overlap_pct"),
            "How much of each kernel's time its GPU also ran NCCL kernels or compute kernels (the numbers of "
            "nsys recipe nccl_gpu_overlap_trace).", needs="nccl_overlap_sum"),
    Section("idle-gaps", "Longest idle gaps", "idle-gaps", {"limit": 10}, None,
            ("device_id", "gap_ns", "start_ns", "end_ns", "next_op_kind", "next_op", "pid", "stream_id"),
            "Stretches with nothing running on the GPU, and the op that ended each; every stretch between two "
            "ops is one, however short (GPU utilization's gaps count those of 10 µs or more)."),
    Section("nsys-rules", "What nsys analyze finds", "nsys-rules", {}, None,
            ("finding", "cases", "total_ns", "longest_ns", "longest_start_ns", "advice", "query"),
            "NVIDIA's expert rules (nsys analyze) on the run: the CUDA calls that hold the host thread "
            "(synchronizations, copies and memsets that block it) and the stretches where a process left the GPU "
            "idle or busy less than half the time. The total adds up the cases: host time blocked, GPU time of "
            "the copies, idle time, stretch lengths; `tracekit query QUERY` lists each case, with the NVTX range "
            "it was in."),
    Section("launch-overhead", "Launch overhead", "launch-overhead", {"limit": 15}, None,
            ("name", "launches", "api_name", "api_med_ns", "latency_med_ns", "latency_p90_ns", "latency_p99_ns",
             "queue_med_ns", "total_latency_ns"),
            "From the start of the launching API call to the kernel's start on the GPU."),
    Section("api", "CUDA API calls", "api-summary", {"limit": 15}, "api-summary",
            ("name", "calls", "total_ns", "avg_ns", "med_ns", "max_ns", "time_pct"),
            "Where the CPU threads spent their time in CUDA (nsys stats -r cuda_api_sum): launches, copies, and "
            "the synchronizations that wait for the GPU. Threads that call at the same time each count."),
    Section("api-stacks", "Where the CUDA API calls come from", "api-stacks", {"limit": 10}, None,
            ("name", "calls", "total_ns", "med_ns", "max_ns", "stack"),
            "The CUDA API calls nsys unwound (nsys --cudabacktrace, the CPU sampled; tracekit capture "
            "--cuda-backtrace), by the call stack that made them, outermost caller first: the code that "
            "synchronizes (a PyTorch .item() is _local_scalar_dense), copies or launches. Where nsys took the "
            "Python stacks too, the Python lines come first, then the C++ they called.", optional=True),
    Section("memcpy", "Memory operations", "memcpy-throughput", {"limit": 10}, None,
            ("operation", "src_kind", "dst_kind", "count", "total_bytes", "total_ns", "throughput_bytes_per_s",
             "med_throughput_bytes_per_s", "time_pct"),
            "Copies and sets by direction and by the memory on each side: a copy from pageable host memory goes "
            "through a staging buffer and moves several times slower than one from pinned memory."),
    Section("unified-memory", "Unified Memory", "um-summary", {"limit": 10}, None,
            ("address", "htod_bytes", "dtoh_bytes", "cpu_faults", "gpu_faults", "throughput_bytes_per_s"),
            "The managed-memory addresses that migrated most, fastest first (nsys stats -r um_sum; needs nsys "
            "--cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true): pages that fault on both sides or "
            "migrate both ways bounce between CPU and GPU, which cudaMemPrefetchAsync or cudaMemAdvise avoids. "
            "tracekit query um-totals sums them up; um-cpu-faults names the host code that faulted.", optional=True),
    Section("gpu-memory", "GPU memory", "gpu-memory", {"limit": 10}, None,
            ("device_id", "memory_kind", "allocations", "allocated_bytes", "largest_bytes", "peak_bytes",
             "peak_nvtx_path", "live_at_end_bytes", "unfreed", "pool_reserved_max_bytes"),
            "The memory the CUDA runtime allocated (nsys --cuda-memory-usage=true; tracekit capture "
            "--cuda-memory-usage), by kind: the most that was live at once, where it peaked, and what was never "
            "freed. The chart draws it over time. tracekit query gpu-memory-live lists the allocations live at the "
            "peak (-p at=end: those never freed), nvtx-memory what each NVTX range allocated and left.",
            optional=True),
    Section("gpu-memory-timeline", "GPU memory over time", "gpu-memory-timeline", {"limit": 0}, "gpu-memory", None,
            "The same memory allocated and not yet freed, by kind, over the capture: a step up at each allocation, "
            "down at each free; a line that never comes back down is memory kept, or leaked.", optional=True),
    Section("osrt", "OS runtime calls", "osrt-summary", {"limit": 10}, None,
            ("name", "calls", "threads", "total_ns", "avg_ns", "med_ns", "max_ns", "time_pct"),
            "Where the CPU threads waited outside CUDA: libc and system calls (nsys stats -r osrt_sum; "
            "needs nsys -t osrt). Threads that wait at the same time each count."),
    Section("osrt-stacks", "Where the long OS runtime calls come from", "osrt-stacks", {"limit": 10}, None,
            ("name", "calls", "total_ns", "med_ns", "max_ns", "stack"),
            "The OS runtime calls longer than nsys's backtrace threshold (80 us by default), by the call stack that "
            "made them, outermost caller first: the code that blocks the host (a synchronize in the driver's ioctl, "
            "a queue's condition variable, a sleep)."),
    Section("cpu-hotspots", "CPU time by function", "cpu-hotspots", {"limit": 15}, "cpu-hotspots",
            ("self_pct", "self_ns", "total_pct", "total_ns", "threads", "function", "module"),
            "Where the host's threads spend their CPU time, from nsys's CPU samples (nsys profile "
            "--sample=process-tree, its default): the time in each function itself, and with the functions it called. "
            "A launch-bound loop shows here what its host code does between launches. tracekit query cpu-threads "
            "splits it by thread, cpu-stacks gives the call stacks, and tracekit export stacks writes them for a "
            "flame graph.", optional=True),
    Section("nvtx-cpu", "CPU time by NVTX range", "nvtx-cpu", {"limit": 15}, None,
            ("path", "samples", "cpu_ns", "cpu_pct", "top_function", "top_function_pct"),
            "The CPU time inside each NVTX range, from the same samples, nested ranges included: the host work of "
            "each stage of a request, which its wall time (paced by the GPU's waits and the host) hides.",
            optional=True),
    Section("cpu-flame", "CPU call stacks", "cpu-stacks", {"limit": 0}, "cpu-flame", None,
            "The sampled call stacks as a flame graph, callers on top: each function under the one that called it, as "
            "wide as its share of the samples nsys unwound (one in four by default). tracekit chart cpu-flame -p "
            "thread=NAME or -p range=NVTX draws one thread's or one range's.", optional=True),
    Section("python-hotspots", "Python time by function", "python-hotspots", {"limit": 15}, None,
            ("self_pct", "self_ns", "running_pct", "total_pct", "total_ns", "threads", "function", "file"),
            "Where the Python threads' time goes, from nsys's Python samples (nsys --python-sampling=true; "
            "tracekit capture --python-samples): the wall time in each function itself, and with the functions it "
            "called, and how much of its own found the thread running rather than waiting in the kernel.",
            optional=True),
    Section("gpu-idle-python", "Python running while the GPU sat idle", "gpu-idle-python", {"limit": 15}, None,
            ("device_id", "self_pct", "self_ns", "total_pct", "total_ns", "idle_share_pct", "function", "file"),
            "The Python code the samples found running inside each GPU's idle gaps (between its first op and its "
            "last): what the host does instead of launching work. idle_share_pct is the share of a function's own "
            "time the GPU was idle: near 100 for code that never overlaps GPU work.", optional=True),
    Section("python-flame", "Python call stacks", "python-stacks", {"limit": 0}, "python-flame", None,
            "The Python threads' sampled stacks as a flame graph (nsys --python-sampling=true, 1,000 samples a "
            "second; tracekit capture --python-samples), callers on top: each function at a line under the one "
            "that called it, as wide as its share of the samples. tracekit query python-stacks lists them; "
            "tracekit export stacks --python writes them for a flame-graph tool.", optional=True),
    Section("gpu-metrics", "GPU counters by NVTX range", "nvtx-gpu-metrics", {"limit": 20}, None,
            ("range", "device_id", "instances", "window_ns", "sm_clock_mhz", "sms_active_pct", "sm_issue_pct",
             "tensor_active_pct", "dram_read_pct", "dram_write_pct"),
            "The GPU's sampled counters inside each NVTX range's GPU work (nsys --gpu-metrics-devices; "
            "tracekit capture --gpu-metrics): the SM clock it ran at, how busy the SMs, the tensor pipes and "
            "the DRAM were.", optional=True),
    Section("timeline", "Timeline", None, chart="timeline", chart_params=typical_request,
            intro="The run's typical request, or the whole run where it has no NVTX range (its middle GPU ops where "
            "it has more than a timeline draws; the caption says which), as "
            "nsys draws it: the NVTX ranges per thread and nesting depth, then the GPU's "
            "kernels, copies, memsets and CUDA graph launches per device and stream, on one time axis; the gaps are the time the GPU "
            "waited. Hover for each one's numbers; scroll or drag to zoom, double-click to reset."),
)

NCU = (
    Section("roofline", "Roofline", "roofline", {"limit": 0}, "roofline",
            ("kernel_id", "name", "nvtx_range", "duration_ns", "precision", "flops_per_s", "dram_bytes_per_s",
             "ai_dram", "roof_pct", "bound"),
            "Each profiled launch against its ceilings: roof_pct against those at its own measured clocks "
            "(the chart's subtitle says which clocks its lines are drawn at)."),
    Section("hierarchical-roofline", "Roofline by memory level", "hierarchical-roofline", {"limit": 0},
            "hierarchical-roofline",
            ("kernel_id", "name", "nvtx_range", "precision", "limiter", "roof_pct", "l1_roof_pct", "l2_roof_pct",
             "dram_roof_pct"),
            "Each launch's FLOP/s in its precision at its arithmetic intensity at L1, L2 and DRAM, as ncu's "
            "hierarchical rooflines draw it: the level whose roof is lowest is the one that bounds it (limiter; "
            "roof_pct against it), a kernel far below the DRAM roof may be at the L2 roof (tracekit query "
            "hierarchical-roofline -p precision=fp32: one precision's work against its ceiling)."),
    Section("occupancy", "Occupancy", "occupancy", {"limit": 0}, "occupancy",
            ("kernel_id", "name", "theoretical_occupancy_pct", "achieved_occupancy_pct", "limiter",
             "next_occupancy_pct", "next_needs", "registers_per_thread", "block_size", "best_block_size",
             "best_block_occupancy_pct", "grid_size", "waves_per_sm"),
            "Theoretical and achieved occupancy per launch; limiter: the per-SM block limit that binds "
            "(none at 100 % theoretical occupancy, where no limit holds it back); next_needs: what one block "
            "more per SM needs (fewer registers, less shared memory, a larger carveout) or why none fits, and "
            "next_occupancy_pct the occupancy then; best_block_size: the block size at which the SM would hold "
            "the most warps with the launch's registers and shared memory per block at the SM's largest carveout "
            "(its own where none holds more), best_block_occupancy_pct the occupancy there; by the rules of NVIDIA's occupancy calculator."),
    Section("speed-of-light", "Speed of light", "speed-of-light", {"limit": 0}, None,
            ("kernel_id", "name", "duration_ns", "sm_throughput_pct", "memory_throughput_pct",
             "dram_throughput_pct", "l1_throughput_pct", "l2_throughput_pct"),
            "Throughputs in % of peak sustained (ncu's GPU Speed Of Light Throughput section)."),
    Section("memory-workload", "Memory workload", "memory-workload", {"limit": 0}, None,
            ("kernel_id", "name", "duration_ns", "dram_bytes_per_s", "dram_read_bytes", "dram_write_bytes",
             "l1_hit_rate_pct", "l2_hit_rate_pct", "mem_busy_pct", "max_bandwidth_pct", "local_spilling_requests"),
            "DRAM traffic and how much of it the caches catch (ncu's Memory Workload Analysis section; needs "
            "ncu --section MemoryWorkloadAnalysis)."),
    Section("compute-workload", "Compute workload", "compute-workload", {"limit": 0}, None,
            ("kernel_id", "name", "executed_ipc_active", "issue_slots_busy_pct", "sm_busy_pct", "top_pipe",
             "top_pipe_pct", "no_eligible_pct", "eligible_warps_per_scheduler", "active_warps_per_scheduler"),
            "How busy the instruction pipelines and warp schedulers were: the busiest pipe near its peak is what "
            "the kernel is bound by; most cycles with no eligible warp is latency (ncu's Compute Workload Analysis "
            "and Scheduler Statistics sections; needs --section ComputeWorkloadAnalysis --section SchedulerStats)."),
    Section("ncu-rules", "What ncu suggests", "ncu-rules", {"type": "OPT,WRN,ERR", "group": "kernel", "limit": 15},
            None, ("name", "nvtx_range", "launches", "rule_type", "speedup_pct", "speedup_type", "est_saved_ns",
                   "message"),
            "Nsight Compute's rule results (its guided analysis) per kernel and NVTX range, optimisations and "
            "warnings by the time they would save over the kernel's launches: a global speedup is a share of a "
            "launch's duration, a local one of the part the rule looks at (no time saved given); speedup: the "
            "median over the launches, message: the launch that would save most."),
    Section("warp-stalls", "Warp stalls", "warp-stalls", {"limit": 0}, "warp-stalls", None,
            "Where a warp's cycles between two issued instructions go, by stall reason (ncu's Warp State "
            "Statistics; needs ncu --section WarpStateStats)."),
    Section("ncu-source", "Source hot spots", "ncu-source", {"limit": 15}, "ncu-source",
            ("name", "file", "line", "source", "samples", "samples_pct", "top_stalls", "inst_executed",
             "threads_per_inst", "l2_excess_sectors", "shared_excess_wavefronts"),
            "The source lines where warps waited most, summed over each kernel's launches (ncu's Source page; "
            "needs ncu --section SourceCounters): why they waited, what ran there, and the L2 sectors of "
            "uncoalesced global accesses and shared-memory wavefronts of bank conflicts beyond the ideal."),
)

BENCH = (
    Section("bench-results", "Benchmark results", "bench-results", {"limit": 0}, "bench-results",
            ("config", "variant", "calls", "median_ms", "p95_ms", "tflops", "speedup_vs_baseline", "speedup_low",
             "speedup_high", "matches_reference", "rel_err", "host_ms", "late_calls", "source", "error"),
            "Per configuration and variant, as `tracekit bench` timed them (GPU time per call, CUDA events): the "
            "speedup against the baseline with its 95 % bootstrap interval, timed in the same process, and the "
            "output's check against the reference. late_calls: the timed calls the GPU reached before the host had "
            "enqueued them, whose times may hold the host's (0 expected); source: where a variant of yours came "
            "from."),
)

SWEEP = (
    Section("sweep-grid", "Latency over the sweep grid", "sweep-latency", {"limit": 0}, "sweep-heatmap", None,
            "Median end-to-end request latency at each (batch size, candidates) point.", per_run=False,
            shown_if=sweep_timed),
    Section("sweep-lines", "Latency against batch size", "sweep-latency", {"limit": 0}, "sweep-latency",
            ("preset", "tool", "bs", "nc", "requests", "median_ms", "p95_ms", "p99_ms", "min_ms", "max_ms"),
            "Timed requests only; a run under a profiler is listed under its tool.", per_run=False,
            shown_if=sweep_timed),
    Section("sweep-kernels", "Top kernels per sweep point", "sweep-kernels", {"limit": 5}, None,
            ("point", "rank", "name", "instances", "total_ns", "per_request_us", "time_pct"),
            "The five kernels with the most time at each point captured under nsys.", per_run=False,
            shown_if=sweep_profiled),
    Section("sweep-points", "Kernel time per sweep point", "sweep-points", {}, "sweep-points",
            ("point", "run", "kernels", "launches", "kernel_total_ns", "kernel_med_ns", "vs_first", "top_kernel",
             "top_kernel_pct"),
            "Every kernel each point's nsys run recorded, against the sweep's first point "
            "(tracekit query sweep-points -p name=TEXT: one kernel across the points).", per_run=False,
            shown_if=sweep_profiled),
    Section("sweep-ncu", "ncu's kernels per sweep point", "sweep-ncu", {}, None,
            ("point", "name", "launches", "duration_ns", "vs_first", "sm_throughput_pct", "dram_throughput_pct",
             "achieved_occupancy_pct", "registers_per_thread"),
            "The kernels ncu profiled at each point: median duration against the kernel family's at the first "
            "point, throughputs and occupancy (tracekit query sweep-ncu -p kernel=TEXT: one kernel).",
            per_run=False, shown_if=sweep_ncu_profiled),
    Section("sweep-roofline", "Roofline per sweep point", None, chart="sweep-roofline", shown_if=sweep_ncu_profiled,
            intro="Every launch ncu profiled at each point of the sweep against the ceilings, a colour per point; a "
            "line joins a kernel family's launches from point to point: how a kernel moves under the roofs as the "
            "grid's values grow (tracekit chart sweep-roofline -p kernel=TEXT: one kernel)."),
)

RANKS = (
    Section("rank-summary", "Ranks of the job", "rank-summary", {"limit": 0}, "rank-summary",
            ("rank", "host", "gpus", "kernel_ns", "gpu_busy_ns", "gpu_busy_pct", "nvtx_ns", "kernel_vs_median_pct",
             "busy_vs_median_pct", "top_kernel_pct", "top_kernel"),
            "This run is one rank of a multi-rank job: every rank's GPU busy time, kernel time and time in its "
            "outermost NVTX ranges, against the median rank."),
    Section("stragglers", "Stragglers", "stragglers", {"limit": 20}, "stragglers",
            ("path", "instance", "ranks", "min_ns", "med_ns", "max_ns", "skew_ns", "slowest_lag_pct", "slowest_rank",
             "fastest_rank"),
            "Each NVTX range instance across the ranks (the n-th range of a path on every rank: the same step "
            "where the ranks run in lock-step), the largest spread between the slowest and the fastest rank "
            "first."),
    Section("rank-heatmap", "Time per rank and NVTX path", "rank-ranges", {"limit": 0}, "rank-heatmap", None,
            "Each rank's summed time in each NVTX path against the median rank's (the numbers: `tracekit query "
            "rank-ranges`)."),
    Section("job-timeline", "The job's timeline", None, chart="timeline", chart_params=typical_step,
            intro="This run's typical request on the job's ranks, one above the other on one time axis (the caption "
            "says which ranks): where one rank still computes while the others wait, in a collective on their GPUs "
            "or on their hosts, is the straggler."),
)


# -- values -> text ---------------------------------------------------------------

_TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))
_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _si(v: float, unit: str) -> str:
    for scale, prefix in _SI:
        if abs(v) >= scale:
            return f"{v / scale:,.3g} {prefix}{unit}"
    return f"{v:,.3g} {unit}"


def _number(v: float) -> str:
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v):,}"
    a = abs(v)
    return f"{v:,.0f}" if a >= 100 else f"{v:,.2f}" if a >= 1 else f"{v:.3g}"


class _Column:
    """How one column reads: its header with unit and each value's text."""

    def __init__(self, name: str, series: pl.Series):
        self.name = name
        self.numeric = series.dtype.is_numeric()
        self.header = name
        self.fmt = lambda v: html.escape(str(v))
        if not self.numeric:
            return
        values = [abs(v) for v in series.drop_nulls().to_list() if isinstance(v, int | float) and math.isfinite(v)]
        top = max(values) if values else 0
        if name.endswith("_ns"):
            unit, scale = next(((u, s) for u, s in _TIME_UNITS if top >= 10 * s), ("ns", 1.0))
            self.header = f"{name[:-3]} [{unit}]"
            # (a time too small for the column's unit reads <0.001, not zero: table.fixed_time)
            self.fmt = (lambda v: f"{v:z,.0f}") if scale == 1 else (lambda v, s=scale: html.escape(fixed_time(v / s, 3)))
        elif name.endswith("_pct"):
            self.header = f"{name[:-4]} [%]"
            self.fmt = lambda v: f"{v:z.1f}"  # (z: a value that rounds to zero reads 0.0, not -0.0)
        elif name.endswith("_ms"):
            self.header = f"{name[:-3]} [ms]"
            self.fmt = lambda v: f"{v:z,.3f}"
        elif name.endswith("_us"):
            self.header = f"{name[:-3]} [µs]"
            self.fmt = lambda v: f"{v:z,.1f}"
        elif name.endswith("_bytes_per_s"):
            self.header = name[: -len("_bytes_per_s")]
            self.fmt = lambda v: _si(v, "B/s")
        elif name.endswith("flops_per_s"):
            self.header = name[: -len("_per_s")]
            scale = prefixed_scale(name, "flops_per_s")  # (model_tflops_per_s: in TFLOP/s)
            self.fmt = lambda v, s=scale: _si(v * s, "FLOP/s")
        elif name.endswith("_bytes"):
            self.header = name[: -len("_bytes")]
            self.fmt = lambda v: _si(v, "B")
        elif name.endswith("_mhz"):
            self.header = f"{name[:-4]} [MHz]"
            self.fmt = lambda v: f"{v:z,.0f}"
        elif name.endswith("_hz"):
            self.header = name[:-3]
            self.fmt = lambda v: _si(v, "Hz")
        elif name.endswith("_id"):
            self.fmt = lambda v: str(v)
        else:
            self.fmt = _number

    def cell(self, v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return '<td class="null"></td>'
        if self.numeric:
            return f'<td class="num" data-v="{v!r}">{self.fmt(v)}</td>'
        return f"<td>{self.fmt(v)}</td>"


_NAME_COLUMNS = {"name", "top_kernel", "next_op"}
#: text columns of sentences (ncu's rule messages, the advice of nsys's rules): wrapped, not cut
_PROSE_COLUMNS = {"message", "advice"}


def _short_names(names: list[str | None]) -> list[str]:
    """Kernel names as the charts and terminal tables shorten them (``names.short_name``),
    two distinct names never reading alike."""
    from .names import distinct_labels, short_name

    return distinct_labels(names, 60, short_name)


def table_html(df: pl.DataFrame, columns: tuple[str, ...] | None, total: int | None = None) -> str:
    """A sortable HTML table of ``columns`` (those the result has a value in) of ``df``; ``total``: the
    rows the query has without its limit, when more than shown."""
    if df.is_empty():
        return '<p class="empty">no rows</p>'
    # (a column without a value in any row, as the terminal's table leaves it out: per_request_us
    # of a program's sweep, which times no request)
    cols = [c for c in (columns or df.columns) if c in df.columns and df[c].null_count() < df.height]
    fmt = {c: _Column(c, df[c]) for c in cols}
    shown = {c: _short_names(df[c].to_list()) for c in cols if c in _NAME_COLUMNS and df[c].dtype == pl.Utf8}
    head = "".join(
        f'<th scope="col" class="{"num" if fmt[c].numeric else "text"}" title="{html.escape(c)}">'
        f"{html.escape(fmt[c].header)}</th>" for c in cols)
    rows = []
    for i, r in enumerate(df.select(cols).iter_rows()):
        cells = []
        for c, v in zip(cols, r, strict=True):
            if c in shown and v is not None:
                cells.append(f'<td class="name" title="{html.escape(v)}">{html.escape(shown[c][i])}</td>')
            elif c in _PROSE_COLUMNS and v is not None:
                cells.append(f'<td class="prose">{html.escape(str(v))}</td>')
            else:
                cells.append(fmt[c].cell(v))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    foot = ""
    if total is not None and total > df.height:
        foot = f'<p class="more">{df.height:,} of {total:,} rows (<code>tracekit query</code> with --limit 0 for all)</p>'
    wide = " prose" if _PROSE_COLUMNS & set(cols) else ""  # as wide as the page: its sentences wrap
    return (f'<div class="scroll"><table class="sortable{wide}"><thead><tr>{head}</tr></thead><tbody>'
            + "\n".join(rows) + f"</tbody></table></div>{foot}")


#: rows of the comparison table: every changed row, then the largest unchanged ones
DIFF_ROWS = 200


def diff_table_html(df: pl.DataFrame, limit: int = DIFF_ROWS) -> str:
    """The rows of a diff (``tk.diff``'s result) as a sortable table, in the diff's
    order: every row whose verdict is not ``unchanged``, then unchanged rows up to
    ``limit`` rows in all. Values read in the units of their metric (the terminal
    table's cells, ``diff.display``); numeric cells sort by their exact value
    (``data-v``)."""
    from . import diff as _diff

    def interval(r: dict, t: dict) -> str:
        lo, hi = r["delta_pct_low"], r["delta_pct_high"]
        return f"<td>{'' if lo is None or hi is None else f'{lo:+z.1f} … {hi:+z.1f}'}</td>"

    return _comparison_html(df, limit, _diff.display, [
        ("interval", "interval [%]", False, interval),
        ("verdict", "verdict", False, _verdict_cell),
        ("p_value", "p", True, lambda r, t: _num_cell(r["p_value"], t["p"]))], "tracekit diff")


def compare_table_html(df: pl.DataFrame, limit: int = DIFF_ROWS) -> str:
    """Several runs against one base (``tk.compare``'s long form) as a sortable table: a row
    per key and metric (every key changed in any run, then the largest unchanged ones, up to
    ``limit`` keys: ``compare.changed_first``), the base's value, then each run's value with
    its change and verdict as ``tracekit compare``'s table words it (``compare.wide``),
    coloured by its verdict and sorting by its change (``data-v``)."""
    from .compare import changed_first, runs_of, wide
    from .diff import shown_verdicts

    if df.is_empty():
        return '<p class="empty">no rows</p>'
    shown = changed_first(df, limit)
    text = wide(shown, df)
    keys = ["scope", "key", "metric"]
    cell = {(*k, run): (v, d) for (*k, run), v, d in zip(
        shown.select(*keys, "run").iter_rows(), shown_verdicts(shown), shown["delta_pct"], strict=True)}
    base: dict[tuple, float] = {}  # (its number, for sorting: the same in every run's comparison)
    for *k, b in shown.select(*keys, "base").drop_nulls("base").iter_rows():
        base.setdefault(tuple(k), b)
    runs = runs_of(shown)
    cols = text.columns
    head = "".join(f'<th scope="col" class="text" title="{html.escape(c)}">{html.escape(c)}</th>' for c in cols)
    rows = []
    for k, t in zip(shown.select(keys).unique(maintain_order=True).iter_rows(), text.iter_rows(named=True), strict=True):
        cells = [f"<td>{html.escape(k[0])}</td>",
                 f'<td class="key" title="{html.escape(k[1])}">{html.escape(t["key"])}</td>',
                 f"<td>{html.escape(k[2])}</td>", _num_cell(base.get(k), t[cols[3]])]
        for run, col in zip(runs, cols[4:], strict=True):
            verdict, delta = cell.get((*k, run), (None, None))
            cls = f' class="verdict v-{verdict.replace(" ", "-")}"' if verdict else ""
            v = "" if delta is None or math.isnan(delta) else f' data-v="{delta!r}"'
            cells.append(f"<td{cls}{v}>{html.escape(t[col])}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    total = df.select(keys).unique().height
    foot = ""
    if len(rows) < total:
        foot = (f'<p class="more">{len(rows):,} of {total:,} rows: every change, then the largest unchanged '
                "rows (<code>tracekit compare</code> with --limit 0 for all)</p>")
    return (f'<div class="scroll"><table class="sortable diff"><thead><tr>{head}</tr></thead><tbody>'
            + "\n".join(rows) + f"</tbody></table></div>{foot}")


def job_table_html(df: pl.DataFrame, limit: int = DIFF_ROWS) -> str:
    """The rows of a job against a job (``tk.diff_jobs``'s result) as ``diff_table_html``
    shows a diff's, with the ranks judged as the row's verdict and the rank that moved most."""
    from . import job_diff

    return _comparison_html(df, limit, job_diff.display, [
        ("verdict", "verdict", False, _verdict_cell),
        ("ranks", "ranks", False, lambda r, t: f"<td>{html.escape(t['ranks'])}</td>"),
        ("top_rank", "rank that moved most", False, lambda r, t: f"<td>{html.escape(t['top_rank'])}</td>")],
        "tracekit diff --jobs")


def _comparison_html(df: pl.DataFrame, limit: int, display: Callable[..., pl.DataFrame],
                     extra: list[tuple[str, str, bool, Callable[[dict, dict], str]]], command: str) -> str:
    """A comparison's rows as a sortable table: every change, then unchanged rows up to
    ``limit``; scope, key, metric, base, new and the change, then ``extra``'s columns
    (name, heading, numeric, its cell from the row and its ``display`` text), then the note."""
    from . import diff as _diff

    if df.is_empty():
        return '<p class="empty">no rows</p>'
    shown = _diff.changes_first(df, limit)
    text = display(shown, df)  # (keys told apart from every key of the comparison)
    cols = [("scope", "scope", False), ("key", "key", False), ("metric", "metric", False), ("base", "base", True),
            ("new", "new", True), ("delta_pct", "change [%]", True), *(c[:3] for c in extra),
            ("note", "note", False)]
    head = "".join(f'<th scope="col" class="{"num" if num else "text"}" title="{c}">{html.escape(h)}</th>'
                   for c, h, num in cols)
    rows = []
    for r, t in zip(shown.iter_rows(named=True), text.iter_rows(named=True), strict=True):
        rows.append("<tr>" + "".join((
            f"<td>{html.escape(r['scope'])}</td>",
            f'<td class="key" title="{html.escape(r["key"])}">{html.escape(t["key"])}</td>',
            f"<td>{html.escape(r['metric'])}</td>",
            _num_cell(r["base"], t["base"]), _num_cell(r["new"], t["new"]), _num_cell(r["delta_pct"], t["delta"]),
            *(cell(r, t) for *_, cell in extra),
            f'<td class="note">{html.escape(r["note"] or "")}</td>',
        )) + "</tr>")
    foot = ""
    if shown.height < df.height:
        foot = (f'<p class="more">{shown.height:,} of {df.height:,} rows: every change, then the largest '
                f"unchanged rows (<code>{command}</code> with --limit 0 for all)</p>")
    return (f'<div class="scroll"><table class="sortable diff"><thead><tr>{head}</tr></thead><tbody>'
            + "\n".join(rows) + f"</tbody></table></div>{foot}")


def _verdict_counts(df: pl.DataFrame) -> str:
    """How many rows each verdict has, as diff's table counts them (``tracekit.diff.verdict_counts``)."""
    from .diff import verdict_counts

    return ", ".join(f"{n:,} {v}" for v, n in verdict_counts(df))


def _num_cell(v: Any, shown_text: str) -> str:
    """A numeric cell: its text, sorting by its exact value (``data-v``)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return '<td class="null"></td>'
    return f'<td class="num" data-v="{v!r}">{html.escape(shown_text)}</td>'


def _verdict_cell(r: dict, t: dict) -> str:
    """The verdict as diff's table shows it (``not judged`` where the note says so)."""
    return f'<td class="verdict v-{t["verdict"].replace(" ", "-")}">{t["verdict"]}</td>'


# -- assembling ----------------------------------------------------------------------


@dataclass
class Report:
    """The parts of a report before they become HTML."""

    title: str
    header: list[tuple[str, str]]
    sections: list[tuple[Section, str, str | None, str | None]] = field(default_factory=list)
    #: (section, table html, chart spec JSON or None, note)
    run: tuple[int, str] | None = None  # (id, name) of the run reported


def _run_info(tk, run_id: int) -> dict[str, Any]:
    return tk.query("run-info", run=run_id).row(0, named=True)


def _header(info: dict[str, Any]) -> list[tuple[str, str]]:
    def js(text):
        try:
            d = json.loads(text) if text else {}
        except json.JSONDecodeError:
            return text
        return " · ".join(f"{k} {v}" for k, v in d.items() if v is not None) if isinstance(d, dict) else text

    params = ""
    if info["params"]:
        try:
            params = " · ".join(f"{k}={v}" for k, v in json.loads(info["params"]).items())
        except json.JSONDecodeError:
            params = info["params"]
    clocks = []
    for label, col in (("SM", "sm_clock_mhz"), ("SM max", "max_sm_clock_mhz"), ("memory", "mem_clock_mhz")):
        if info.get(col) is not None:
            clocks.append(f"{label} {info[col]:,.0f} MHz")
    gpu = info["gpu"] or "?"
    if info.get("sm_count"):
        gpu += f" · {info['sm_count']} SMs"
    if info.get("gpu_memory_bytes"):
        gpu += f" · {_si(info['gpu_memory_bytes'], 'B')}"
    latency = ""
    if info.get("requests"):
        latency = (f"{info['requests']} timed requests · median {info['median_ms']:,.3f} ms · "
                   f"p95 {info['p95_ms']:,.3f} ms")
    rows = [
        ("run", f"{info['run_id']}: {info['name']} ({info['kind']})"),
        ("GPU", gpu),
        ("driver", info.get("driver") or ""),
        ("clocks (as recorded)", " · ".join(clocks)),
        ("profiler", " · ".join(x for x in (info.get("tool_version") and f"version {info['tool_version']}",
                                            info.get("export_schema_version")
                                            and f"export schema {info['export_schema_version']}") if x)),
        ("software", js(info.get("versions"))),
        ("capture parameters", params),
        ("requests", latency),
        ("command", info.get("command") or ""),
        ("status", info.get("status") or ""),
        ("captured", info.get("started_at") or ""),
        ("source", info.get("source_path") or ""),
    ]
    return [(k, v) for k, v in rows if v]


def _section(tk, sec: Section, run_id: int) -> tuple[str, str | None, str | None] | None:
    """One section of the run: (table HTML, chart spec, note); None where the run has no
    rows in the table the section ``needs``."""
    from . import charts
    from .registry import get_registry

    if sec.shown_if is not None and not sec.shown_if(tk, run_id):
        return None
    if sec.query is None:
        return _chart_section(tk, sec, run_id)
    q = get_registry().get(sec.query)
    if sec.needs is not None and not tk.con.execute(
            f"SELECT 1 FROM {sec.needs} WHERE run_id = ? LIMIT 1", [run_id]).fetchall():
        return None
    params = dict(sec.params)
    if sec.run_params is not None:
        more = sec.run_params(tk, run_id)
        if more is None:
            return None
        params.update(more)
    if sec.per_run:
        params["run"] = run_id
    elif "sweep" in q.params:  # a sweep query: the sweep this run is a point of, not the latest sweep
        params["sweep"] = run_id
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", NoneRecorded)
            df = tk.query(sec.query, **params)
    except QueryError as err:
        return "", None, str(err)
    # an empty section says why where the run holds none of its events (its note, not a line
    # on the terminal as well); the other warnings are passed on
    none = next((str(w.message) for w in caught if issubclass(w.category, NoneRecorded)), None)
    for w in caught:
        if not issubclass(w.category, NoneRecorded):
            warn_from_caller(w.message, at=(w.filename, w.lineno))
    total = None
    if "limit" in q.params and params.get("limit"):
        if df.height == params["limit"]:
            total = tk.query(sec.query, **{**params, "limit": 0}).height
    table = table_html(df, sec.columns, total) if sec.columns else ""
    spec = None
    note = None
    if sec.chart is not None:
        cs = charts.CHARTS[sec.chart]
        if cs.query != sec.query:
            raise QueryError(f"report section {sec.key}: chart {sec.chart} is drawn from {cs.query}, not {sec.query}")
        try:
            spec = json.dumps(charts.spec(cs.build(df)), separators=(",", ":"), default=str)
        except QueryError as err:
            note = str(err)
    if none:  # (of a job's comparison too: a rank without GPU work, which its rows would not say)
        note = note or none
    if df.is_empty() and not sec.columns:
        note = note or "no rows"
        spec = None
    return table, spec, note


def _chart_section(tk, sec: Section, run_id: int) -> tuple[str, str | None, str | None]:
    """A section that is a chart of its own data: (its caption, the chart spec, None), or
    where the chart cannot be drawn for the run ("", None, the reason)."""
    from . import charts

    try:
        params, caption = sec.chart_params(tk, run_id) if sec.chart_params else ({}, "")
        spec = json.dumps(charts.spec(charts.chart(tk, sec.chart, run=run_id, **params)), separators=(",", ":"),
                          default=str)
    except QueryError as err:
        return "", None, str(err)
    caption = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(caption))
    return (f'<p class="caption">{caption}</p>' if caption else ""), spec, None


def _left_out(tk, run_id: int, sections: list[Section]) -> tuple[list[Section], list[tuple[str, str]]]:
    """The sections whose query the run can answer, and a header line per kind of event
    (what, nsys option) that leaves the others out: those about events the run's capture
    did not trace (its ``@traced`` tables), and those over the run's job where a rank's
    capture did not, naming the other ranks (what the queries would refuse); and one line
    for the sections about CUDA events of a run that traced CUDA and holds none at all (a
    capture's window that missed the GPU work: empty tables, and findings of nothing)."""
    from .registry import (
        CUDA_EVENTS,
        NO_CUDA_EVENT,
        get_registry,
        no_cuda_event,
        retell,
        traced_said,
        untraced,
        untraced_ranks,
        untraced_words,
    )

    kept: list[Section] = []
    missed: list[Section] = []  # (about CUDA events, of a run that holds none)
    cuda_missed = no_cuda_event(tk, run_id)  # (the run's: asked once, not a section at a time)
    out: dict[tuple[str, str], tuple[list[tuple[int, int]], list[Section]]] = {}  # kind -> (other ranks, sections)
    for sec in sections:
        if sec.query is None:  # (a chart of its own data says itself what the run lacks)
            kept.append(sec)
            continue
        q = get_registry().get(sec.query)
        missing = untraced_ranks(tk, run_id, q.traced) if q.spans_job else {k: [] for k in untraced(tk, run_id, q.traced)}
        none = not missing and not q.spans_job and cuda_missed and bool(set(q.traced) & set(CUDA_EVENTS))
        if not missing and not none:
            kept.append(sec)
            continue
        if sec.optional or sec.needs is not None:  # (about what few runs have: no line for it)
            continue
        if none:
            missed.append(sec)
            continue
        kind, ranks = next(iter(missing.items()))
        others, secs = out.setdefault(kind, ([], []))
        others += [r for r in ranks if r[0] != run_id and r not in others]
        secs.append(sec)
    own, told = set(untraced(tk, run_id)), traced_said(tk, run_id)
    lines = []
    for (what, option), (others, secs) in out.items():
        said = [untraced_words(what, told, verb=False)] if (what, option) in own else []
        others_told = traced_said(tk, *(rid for rid, _ in others))
        if others:
            named = ", ".join(f"{k} (run {rid})" for rid, k in others[:8])
            more = f" and {len(others) - 8:,} more" if len(others) > 8 else ""
            said.append(f"{'rank' if len(others) == 1 else 'ranks'} {named}{more} of its job "
                        f"{untraced_words(what, others_told, many=len(others) > 1)}")
        named_runs = [rid for rid, _ in others] + ([run_id] if (what, option) in own else [])  # (the line speaks of)
        again = retell(traced_said(tk, *named_runs), many=len(named_runs) > 1)
        lines.append((f"no {what} trace" if (what, option) in own else f"ranks without {what} trace",
                      f"{'; '.join(said)} (capture {'every rank ' if others else ''}with {option}{again}); "
                      f"left out: {', '.join(s.title for s in secs)}"))
    if missed:
        lines.append(("no CUDA event", f"the run {NO_CUDA_EVENT}; left out: {', '.join(s.title for s in missed)}"))
    return kept, lines


def _job(tk, run_id: int) -> tuple[list[Section], list[tuple[str, str]]]:
    """For a run that is a rank of a job: the job's sections (``RANKS``, where the job has
    two ranks or more) and the header line that places the run in its job: the job's name, its
    rank, the ranks ingested, those missing (the jobs query: profiling a subset of the ranks is
    common, so it is said, not refused), and the later run that took its place where the
    same capture was ingested again (the job's views read each capture's latest run)."""
    from .registry import job_runs

    got = tk.con.execute("SELECT rank, job FROM rank_captures WHERE run_id = ?", [run_id]).fetchall()
    if not got or got[0][0] is None:
        return [], []
    rank, job = got[0]
    row = tk.query("jobs").filter(pl.col("job") == job).row(0, named=True)
    text = f"{job}: rank {rank}"  # (the job's name as `tracekit query jobs` gives it: a store may hold several)
    latest = [rid for rid, k, _ in job_runs(tk, run_id) if k == rank]
    if latest and latest[0] != run_id:
        text += f" (superseded by run {latest[0]}, the same capture ingested later: the job's sections read that run)"
    text += ("; the only rank of its job ingested" if row["ranks"] == 1 else
             f" of {row['ranks']:,} ranks ingested, {row['first_rank']} to {row['last_rank']}")
    if row["missing"]:
        which = (f"{'rank' if row['missing'] == 1 else 'ranks'} {row['missing_ranks']}" if row["missing_ranks"]
                 else f"{row['missing']:,} ranks")
        size = f", world size {row['world_size']:,}" if row["world_size"] is not None else ""
        text += f"; {which} not ingested{size}"
    return (list(RANKS) if row["ranks"] > 1 else []), [("job", text)]


def _comparison(tk, run_id: int, vs: str | int, threshold: float,
                repeats: list | None = None) -> tuple[tuple[str, str], list[tuple]]:
    """The header line and the sections of ``tk.diff(vs, run, threshold_pct=threshold,
    repeats=repeats)``: the diff, and where two runs are compared (``_compared_charts``), their
    roofline (ncu) or their typical requests' timelines (nsys)."""
    from . import charts
    from . import diff as _diff
    from .compare import as_command

    # a file is ingested by the comparison (the store must be writable; write_report's transaction
    # keeps it only when the report is written), which names the file where it fails
    with warnings.catch_warnings(record=True) as caught:  # (shown in the section, and passed on)
        warnings.simplefilter("always", CaptureWarning)
        df = as_command("report --vs", tk.diff, vs, run_id, None, threshold, repeats or [])
    base = _diff.resolve(tk, vs)  # (a file is the run just ingested)
    new = _diff.resolve(tk, str(run_id))
    at, _ = _diff._at_the_runs_point(tk.con, base, new)
    label = base.label if at is base else f"{at.label}, this point of {base.label}"  # (a program's sweep)
    held = _diff.held_by_repeats(df).removeprefix("; ")
    df = df.drop("noise_pct", strict=False)  # (said in the intro; the table and chart are diff's)
    partial = [str(w.message) for w in caught if issubclass(w.category, CaptureWarning)]
    for w in caught:
        warn_from_caller(w.message, at=(w.filename, w.lineno))
    counts = _verdict_counts(df)
    table = diff_table_html(df)
    chart = charts.diff_rows(df, threshold, 20)
    spec = json.dumps(charts.spec(charts.diff(chart)), separators=(",", ":"), default=str)
    rules = _rules(set(df["scope"]), threshold)
    moved = _diff.moved(df)
    sec = Section("diff", f"Compared with {label}", "diff", intro=(
        f"This run against {label}: {counts}."
        + (f" What moved: {'. '.join(moved)}." if moved else "")
        + " A change is regressed or improved only beyond "
        f"{threshold:g} % and real" + (f" ({'; '.join(rules)})" if rules else "") + ". "
        + (f"Repeats of the base ({', '.join(map(str, repeats))}) measured the noise: a change no larger "
           f"than a repeat's is not judged ({held}). " if repeats else "")
        + "The note says how a key was matched or why a verdict was held back. Bars: each key's time "
        "(kernels, memory ops, GPUs: total; NVTX: kernel time, or wall time without kernels; ncu: "
        "duration; request latency: its median) with its interval."
        + "".join(f" Warning: {m.removeprefix('diff: ')}." for m in partial)))
    command = shlex.join(["tracekit", "diff", str(base.ref), str(run_id), *_repeat_options(tk, vs, [run_id], repeats)])
    line = ("compared with", f"{label} ({command})")
    return line, [(sec, table, spec, None), *_compared_charts(tk, df, at, new, label, threshold, repeats),
                  *_compared_lines(tk, df, at, new, label, threshold, repeats)]


def _rules(scopes: set[str], threshold: float) -> list[str]:
    """How a change is judged, for the scopes a comparison has, in a sentence each."""
    from . import diff as _diff

    rules = []  # how a change is judged, for the scopes this comparison has
    if scopes & set(_diff.NSYS_SCOPES):
        rules.append(f"nsys: significant (Mann-Whitney U on the per-instance times, p < {_diff.ALPHA:g}; a changed count is "
                     f"real; a total also when it moved beyond its spread; a memory operation's time beyond "
                     f"{max(threshold, _diff.COPY_NOISE_PCT):g} %); host-timed values (CUDA API "
                     "durations, NVTX wall time and projection) of runs that traced CUDA are shown, not "
                     f"judged, and NVTX wall time where neither run traced CUDA counts beyond "
                     f"{max(threshold, _diff.HOST_NOISE_PCT):g} %")
    if "ncu" in scopes:
        rules.append("ncu: the launches moved one way, each against its counterpart in the other report "
                     f"(a sign test from {_diff.SIGN_MIN} launches; where they cannot be paired, the launches of "
                     "the two reports do not overlap), and a measured value moved beyond ncu's own noise at the "
                     f"launch's duration ({_diff.NCU_NOISE_NS:g} ns + {_diff.NCU_NOISE_PCT:g} % of it) where that "
                     "exceeds the threshold (the launches' summed duration: launch by launch, each against the "
                     "noise at its own duration); a rate only with the launches' time (shown, not judged where the "
                     "time did not move or moved the other way); launch settings, theoretical occupancy and warp "
                     "states are shown, not judged, and so is a duration that moved in as many cycles at an SM "
                     "clock that moved the other way (the clock, not the code)")
    if "sweep" in scopes:
        rules.append(f"request latency per bs x nc point: the median counts beyond "
                     f"{max(threshold, _diff.HOST_NOISE_PCT):g} %, the p95 beyond "
                     f"{max(threshold, _diff.HOST_TAIL_NOISE_PCT):g} %, and must pass Mann-Whitney U "
                     f"(p < {_diff.ALPHA:g})")
    return rules


def _compared_charts(tk, df: pl.DataFrame, base, new, label: str, threshold: float,
                     repeats: list | None = None) -> list[tuple]:
    """The sections that draw two runs compared (``base`` the run compared with and ``new``
    the report's run, tracekit.diff.Sides): two ncu runs' roofline (``charts.diff_roofline``),
    two nsys runs' typical requests on one time axis (``charts.diff_timeline_data``); none where a side is a
    sweep, the chart's reason in its place where it cannot be drawn (no kernel with
    floating-point work, no NVTX range both runs have)."""
    from . import charts

    if base.run_id is None or new.run_id is None:
        return []
    run_id = new.run_id
    out = []
    if "ncu" in set(df["scope"]):
        judged = _judged_params(threshold, _repeat_options(tk, base.run_id, [run_id], repeats, chart=True))
        sec = Section("diff-roofline", f"Roofline compared with {label}", None, chart="diff-roofline", intro=(
            "Of the kernels with floating-point work, up to 20 (those judged changed first, then the largest "
            f"changes), each at its roofline point in {label} (hollow) and in this run (filled), joined by a line and "
            "coloured by the verdict of its median launch's duration: its launches together, their FLOP over their "
            "DRAM bytes and over their time. A kernel that moved up and right did more work per byte and per second; "
            "only its duration says whether it got faster (tracekit chart diff-roofline "
            f"-p base={base.run_id} -p new={run_id}{judged}; -p limit=0 draws every kernel)."))
        out.append((sec, lambda: charts.diff_roofline(charts.diff_roofline_points(tk, df, base, new, threshold))))
    if "nsys" in base.kinds and "nsys" in new.kinds:
        sec = Section("diff-timeline", f"Timeline compared with {label}", None, chart="diff-timeline", intro=(
            f"The typical request of {label} (its most repeated NVTX range's median instance, as this report's "
            "timeline picks it) above this run's median instance of that range, each from its own start to the end "
            "of the GPU work it launched: what the diff's numbers moved, in place (tracekit chart diff-timeline "
            f"-p base={base.run_id} -p new={run_id} [-p nvtx=NAME -p instance=N] draws another)."))
        out.append((sec, lambda: charts.timeline(charts.diff_timeline_data(tk, base=base.run_id, new=run_id))))
    return _drawn(out)


def _compared_lines(tk, df: pl.DataFrame, base, new, label: str, threshold: float,
                    repeats: list | None = None) -> list[tuple]:
    """Two ncu runs that both hold ncu's Source Counters with line information: their kernels
    compared line by line (``tk.diff(..., by="source")``, with the comparison's ``repeats``), a
    section of its table; none otherwise, or where a side is a sweep. Where the line comparison
    fails (a repeat without Source Counters), the section says why, and the report goes on."""
    from . import diff as _diff

    if base.run_id is None or new.run_id is None or "ncu" not in set(df["scope"]):
        return []
    lines = tk.con.execute("SELECT count(DISTINCT run_id) FROM ncu_source WHERE run_id IN (?, ?) AND function IS NULL "
                           "AND line IS NOT NULL", [base.run_id, new.run_id]).fetchone()[0]
    if lines < 2:
        return []
    title = f"Source lines compared with {label}"
    with warnings.catch_warnings(record=True) as caught:  # (the comparison's own are said in its section)
        warnings.simplefilter("always", CaptureWarning)
        try:
            src = tk.diff(base.run_id, new.run_id, by="source", threshold_pct=threshold, repeats=repeats or [])
        except QueryError as err:
            return [(Section("diff-source", title, None, intro=f"Not compared line by line: {err}"), "", None, None)]
    # (what the line-by-line comparison alone says: the kernels whose lines it could not compare)
    said = [str(w.message).removeprefix("diff --by source: ") for w in caught
            if str(w.message).startswith("diff --by source: ")]
    for w in caught:  # (any other kind of warning goes on as it came)
        if not issubclass(w.category, CaptureWarning):
            warn_from_caller(w.message, at=(w.filename, w.lineno))
    moved = _diff.moved(src)
    sec = Section("diff-source", title, None, intro=(
        f"Each kernel's source lines in {label} and in this run, from ncu's Source Counters: a line's time per "
        "launch (each launch's duration weighed by the line's share of its warp stall samples) is regressed or "
        f"improved beyond {threshold:g} % or ncu's noise at the kernel's mean launch (a kernel's smallest moves "
        f"held while together under {_diff.MATERIAL_LINE_PCT:g} % of that launch), where its samples moved beyond "
        "their Poisson noise (p below 0.01 over the kernel's lines), and only the way the kernel's mean launch moved; "
        "beside it, its share of the samples, instructions, uncoalesced L2 sectors and bank conflicts per launch."
        + (f" What moved: {'. '.join(moved)}." if moved else " No line was judged changed.")
        + "".join(f" {m[0].upper()}{m[1:]}." for m in said)
        + f" (tracekit diff {base.run_id} {new.run_id} --by source)"))
    return [(sec, diff_table_html(src), None, None)]


def _judged_params(threshold: float, options: list[str]) -> str:
    """The chart parameters that judged a comparison as the report did: its threshold, and
    ``options``, the repeats' (``_repeat_options``)."""
    return (f" -p threshold={threshold:g}" if threshold != 5.0 else "") + \
        "".join(f" {shlex.quote(a)}" for a in options)


def _repeat_options(tk, base, compared: list, repeats: list | None, chart: bool = False) -> list[str]:
    """The options of a command the report shows (``tracekit diff``, ``compare``, or with
    ``chart`` a comparison's chart) that judge as the report did: the repeats that measured
    the noise, each named; ``--no-repeats`` where none did though the store holds repeats of
    ``base`` (``stored_repeats``), which the command would take without it."""
    if repeats:
        return ["-p", f"repeats={','.join(map(str, repeats))}"] if chart else \
            [a for r in repeats for a in ("--repeat", str(r))]
    return ["--no-repeats"] if tk.stored_repeats(base, [str(c) for c in compared], "report", quiet=True) else []


def _drawn(charts_: list[tuple[Section, Callable[[], Any]]]) -> list[tuple]:
    """Each (section, its chart's builder) as a report's section: the chart's spec, or the
    reason it cannot be drawn in its place."""
    from . import charts

    drawn = []
    for sec, draw in charts_:
        try:
            drawn.append((sec, "", json.dumps(charts.spec(draw()), separators=(",", ":"), default=str), None))
        except QueryError as err:
            drawn.append((sec, "", None, str(err)))
    return drawn


def _other_job(tk, run_ids: list[int], vs: str | int) -> int | None:
    """The run ``vs`` names where it and each of the runs ``run_ids`` are ranks of jobs of
    several ranks each, the runs' jobs other than its own (the jobs are then compared too);
    else None."""
    from . import diff as _diff
    from .registry import job_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)  # (the run comparison says it)
        base = _diff.resolve(tk, vs)
    if not run_ids or base.run_id is None or base.pending:
        return None
    theirs = {r for r, _, _ in job_runs(tk, base.run_id)}
    if len(theirs) < 2:
        return None
    for run_id in run_ids:
        mine = {r for r, _, _ in job_runs(tk, run_id)}
        if len(mine) < 2 or mine == theirs:
            return None
    return base.run_id


def _job_name(tk, run_id: int) -> str | None:
    """The job run ``run_id`` is a rank of (``rank_captures``), or None."""
    got = tk.con.execute("SELECT job FROM rank_captures WHERE run_id = ?", [run_id]).fetchall()
    return got[0][0] if got else None


def _repeat_jobs(tk, compared: list[int], repeats: list | None) -> tuple[dict[str, int], str]:
    """The jobs of ``repeats`` (the base's, again: the runs ``report --repeat`` gives) that
    measure the noise of the jobs compared (``compared``: a rank's run of each), each job
    once (two ranks of one repeat job are that job), and a rank's run of each; or none, and
    why, where a repeat is no rank of a job of several, or every repeat is a rank of a job
    compared (a repeat that is no rank of another job cannot measure the jobs' noise)."""
    from . import diff as _diff
    from .registry import job_runs

    again: dict[str, int] = {}
    alone = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)  # (the run comparison says it)
        for ref in repeats or []:
            side = _diff.resolve(tk, ref)
            if side.run_id is not None and len(job_runs(tk, side.run_id)) > 1:
                again.setdefault(_job_name(tk, side.run_id), side.run_id)
            else:
                alone.append(side.label)
    for run_id in compared:
        again.pop(_job_name(tk, run_id), None)
    why = (f"the repeats are not all ranks of a job of several ({', '.join(alone)})" if alone else
           "the repeats are ranks of the jobs compared" if repeats and not again else "")
    return ({} if why else again), why


def _job_comparison(tk, run_id: int, base_id: int, threshold: float, repeats: list | None = None) -> tuple:
    """The section of the job of ``run_id`` against the job of ``base_id``
    (``tk.diff_jobs``): the job's rows as a table, each rank's change per key as a chart; the
    jobs of ``repeats`` (the base's, again: the runs ``report --repeat`` gives) measure each
    rank's noise, as ``diff --jobs --repeat`` does, where each is a rank of a job of several."""
    from . import charts, job_diff
    from . import diff as _diff
    from .compare import jobs_with_repeats

    again, why = _repeat_jobs(tk, [base_id, run_id], repeats)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CaptureWarning)
        df = long = None
        if again:
            try:
                df, long = jobs_with_repeats(tk, str(base_id), str(run_id), [str(r) for r in again.values()],
                                             threshold_pct=threshold)
            except TracekitError as err:  # (the report stands without the repeats' noise, saying why)
                why, again = str(err).removeprefix("diff --jobs: "), {}
        if df is None:
            df, long = job_diff.compare_jobs(tk, str(base_id), str(run_id), threshold_pct=threshold)
    said = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, CaptureWarning)))
    for w in caught:
        warn_from_caller(w.message, at=(w.filename, w.lineno))
    held = _diff.held_by_repeats(df).removeprefix("; ") if again else ""
    df = df.drop("noise_pct", strict=False)
    counts = _verdict_counts(df)
    moved = job_diff.moved(df)
    spec = json.dumps(charts.spec(charts.job_diff(job_diff.changes_by_rank(long, 20))), separators=(",", ":"),
                      default=str)
    ranks = long["rank"].n_unique()
    command = f"tracekit diff --jobs {base_id} {run_id}" + "".join(f" --repeat {r}" for r in again.values())
    noise = _jobs_noise(again, held, why)
    sec = Section("job-diff", f"This job against run {base_id}'s", "job-diff", intro=(
        f"Every rank of this run's job against its namesake rank of run {base_id}'s job ({ranks} ranks; "
        f"{command}): {counts}." + (f" What moved: {'. '.join(moved)}." if moved else "") + noise
        + " Each row is the job's: the ranks' values summed (a median: the median rank's), its verdict the harm "
        "where ranks were judged differently (ranks: how many were judged so), the note where. The job scope is "
        "the job's own time: per NVTX path and step, its slowest rank's duration (host time, shown and not judged "
        "where the ranks traced CUDA) and which rank was slowest most often. Chart: each rank's change in each "
        "key's time, a dot where the rank's change was judged."
        + "".join(f" Warning: {m.removeprefix('diff --jobs: ')}." for m in said)))
    return sec, job_table_html(df), spec, None


def _jobs_noise(again: dict[str, int], held: str, why: str) -> str:
    """The sentence of a jobs' comparison on the repeats' jobs (``_repeat_jobs``): what they
    measured (``held``: ``held_by_repeats``'s words), or why the jobs are compared without them."""
    from .names import numbered

    if why:
        return f" The jobs are compared without the repeats' noise: {why}."
    return (f" The {'job' if len(again) == 1 else 'jobs'} of {numbered(again.values(), 'run', 'runs')}, the base's "
            f"again, measured the noise rank by rank: a rank's change no larger than the repeat's on that rank is "
            f"not judged ({held})." if again else "")


def _jobs_compared(tk, ids: list[int], base_id: int, threshold: float, repeats: list | None = None) -> tuple:
    """The section of the jobs of the runs ``ids`` (ranks of jobs of several, each job once,
    in the order given) against the job of ``base_id`` (``tk.compare(jobs=True)``, as
    ``tracekit compare --jobs``): each job's rows side by side as a table and the compare
    chart of the jobs; the jobs of ``repeats`` measure each rank's noise where each is a rank
    of another job of several (``_repeat_jobs``)."""
    from . import charts
    from . import diff as _diff
    from .compare import counts

    jobs: dict[str | None, int] = {}  # (a rank's run of each job: two ranks of one job are that job)
    for run_id in ids:
        jobs.setdefault(_job_name(tk, run_id), run_id)
    runs = [str(r) for r in jobs.values()]
    again, why = _repeat_jobs(tk, [base_id, *jobs.values()], repeats)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CaptureWarning)
        df = None
        if again:
            try:
                df = tk.compare(str(base_id), runs, threshold_pct=threshold, repeats=[str(r) for r in again.values()],
                                jobs=True)
            except TracekitError as err:  # (the report stands without the repeats' noise, saying why)
                why, again = str(err).removeprefix("compare --jobs: "), {}
        if df is None:
            df = tk.compare(str(base_id), runs, threshold_pct=threshold, jobs=True)
    said = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, CaptureWarning)))
    for w in caught:
        warn_from_caller(w.message, at=(w.filename, w.lineno))
    held = _diff.held_by_repeats(df.filter(~pl.col("repeat"))).removeprefix("; ") if again else ""
    label = df["base_run"][0] if df.height else f"run {base_id}'s job"
    command = shlex.join(["tracekit", "compare", "--jobs", str(base_id), *runs,
                          *(a for r in again.values() for a in ("--repeat", str(r)))])
    spec = json.dumps(charts.spec(charts.compare(charts.compare_rows(df, threshold, 20, True, label))),
                      separators=(",", ":"), default=str)
    ranks = df["ranks"].drop_nulls().max() if df.height else 0
    noise = _jobs_noise(again, held, why)
    sec = Section("compare-jobs", f"These jobs against {label}", None, chart="compare", intro=(
        f"Every rank of each run's job against its namesake rank of the job of run {base_id}, {label} (up to "
        f"{ranks} ranks; {command}): {'; '.join(counts(df))}." + noise
        + " A cell is the job's: the ranks' values summed (a median: the median rank's), its verdict the harm where "
        "ranks were judged differently, the note where; the job scope is the job's own time (per NVTX path and "
        "step, its slowest rank's duration). Bars: each key's change in each job, solid where judged on some rank."
        + "".join(f" Warning: {m.removeprefix('compare: ')}." for m in said)))
    return sec, compare_table_html(df), spec, None


def build(tk, run: str | int | None = None, vs: str | int | None = None, threshold_pct: float = 5.0,
          repeats: list | None = None) -> Report:
    """The report of one run (default: the latest): its header and the sections its kind
    gets; with ``vs``, first the comparison with that run, sweep or file (``tk.diff``, the
    noise measured by ``repeats`` of it where given)."""
    from .registry import resolve_run

    run_id = resolve_run(tk, run, "runs", "report", spans_runs=False)
    info = _run_info(tk, run_id)
    kinds = set(info["kind"].split(","))
    try:
        in_sweep = bool(json.loads(info["params"] or "{}").get("sweep"))
    except (json.JSONDecodeError, AttributeError):
        in_sweep = False
    sections: list[Section] = []
    job_lines: list[tuple[str, str]] = []
    if "nsys" in kinds:
        job_sections, job_lines = _job(tk, run_id)
        sections += job_sections + list(NSYS)  # the job first, then this rank
    # sections about events a capture did not trace: left out, named in the header
    sections, left_out = _left_out(tk, run_id, sections)
    if "ncu" in kinds:
        sections += NCU
    if "bench" in kinds:
        sections += BENCH
    if in_sweep:
        sections += SWEEP
    if not sections:
        raise QueryError(f"report: run {run_id} ({info['kind']}) is neither an nsys, ncu or bench run nor a sweep "
                         "point; nothing to report (see `tracekit runs`)")
    if in_sweep and not kinds & {"nsys", "ncu"}:
        sweep = json.loads(info["params"])["sweep"]
        title = f"tracekit report · {sweep} (latest point: run {run_id}, {info['name']})"
    else:
        what = "/".join(sorted(kinds & {"nsys", "ncu", "bench"}))
        title = f"tracekit report · {what} run {run_id}: {info['name']}"
    rep = Report(title=title, header=_header(info), run=(run_id, info["name"]))
    rep.header += job_lines + left_out
    if vs is not None:
        repeats = tk.repeats_asked(vs, [str(run_id)], "report", repeats)  # (named in the comparison's intro)
        line, (diffed, *drawn) = _comparison(tk, run_id, vs, threshold_pct, repeats)
        rep.header.insert(1, line)
        rep.sections.append(diffed)
        other = _other_job(tk, [run_id], vs) if "nsys" in kinds else None
        if other is not None:  # (two ranks of two jobs: the jobs compared, rank by rank)
            rep.sections.append(_job_comparison(tk, run_id, other, threshold_pct, repeats))
        rep.sections += drawn  # (the two runs drawn: after the numbers)
    for sec in sections:
        got = _section(tk, sec, run_id)
        if got is not None:  # (None: the table the section needs holds nothing of the run)
            rep.sections.append((sec, *got))
    return rep


def build_many(tk, runs: list[str | int], threshold_pct: float = 5.0, vs: str | int | None = None,
               repeats: list | None = None) -> Report:
    """One report of several runs (the runs of one experiment: a point timed, under nsys and
    under ncu; or any runs side by side): each run's header and sections as ``build`` gives
    them, one run after the other, each section titled and anchored by its run; with ``vs``,
    first their comparison with that run, sweep or file (``_compared_many``)."""
    from dataclasses import replace

    from .registry import resolve_run

    if len(runs) < 2:
        raise ParamError("report: give two runs or more to report together (one: --run R)")
    ids = [resolve_run(tk, r, "runs", "report", spans_runs=False) for r in runs]
    twice = [r for i, r in enumerate(ids) if r in ids[:i]]
    if twice:
        raise ParamError(f"report: run {twice[0]} is given twice; name each run once")
    if vs is not None:
        return _compared_many(tk, ids, vs, threshold_pct, repeats)
    parts = [build(tk, run_id, threshold_pct=threshold_pct) for run_id in ids]
    rep = Report(title="tracekit report · " + ", ".join(f"run {i}: {n}" for i, n in (p.run for p in parts)),
                 header=[])
    for (run_id, name), part in ((p.run, p) for p in parts):
        rep.header += [(f"run {run_id} · {k}" if k != "run" else k, v) for k, v in part.header]
        rep.sections += [(replace(sec, key=f"r{run_id}-{sec.key}", title=f"{name} · {sec.title}"), table, spec, note)
                         for sec, table, spec, note in part.sections]
    return rep


def _compared_many(tk, ids: list[int], vs: str | int, threshold: float, repeats: list | None) -> Report:
    """Runs ``ids`` against ``vs`` in one report: first their comparison (``tk.compare``, the
    noise measured by ``repeats`` of the base where given): its table (``compare_table_html``)
    and chart (charts.compare), then the runs drawn against the base (``_compared_runs_charts``),
    then each run's header and sections as ``build_many`` gives them without ``vs``."""
    from . import charts
    from . import diff as _diff
    from .compare import counts, labels_given

    repeats = tk.repeats_asked(vs, [str(i) for i in ids], "report", repeats)  # (their labels are left out)
    with warnings.catch_warnings(record=True) as caught:  # (shown in the section, and passed on)
        warnings.simplefilter("always", CaptureWarning)
        df = tk.compare(vs, [str(i) for i in ids], threshold_pct=threshold, repeats=repeats or [])
    partial = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, CaptureWarning)))
    for w in caught:
        warn_from_caller(w.message, at=(w.filename, w.lineno))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)  # (the comparison said it)
        sides = [_diff.resolve(tk, vs), *(_diff.resolve(tk, str(i)) for i in ids)]
    labels = [df["base_run"][0] if df.height else sides[0].label, *labels_given(df, len(repeats or []))]
    label = labels[0]
    held = _diff.held_by_repeats(df.filter(~pl.col("repeat"))).removeprefix("; ")
    rules = _rules(set(df["scope"]), threshold)
    command = shlex.join(["tracekit", "compare", str(vs), *map(str, ids), *_repeat_options(tk, vs, ids, repeats)])
    spec = json.dumps(charts.spec(charts.compare(charts.compare_rows(df, threshold, 20))), separators=(",", ":"),
                      default=str)
    sec = Section("compare", f"Compared with {label}", None, chart="compare", intro=(
        f"Each run against {label} by tracekit diff's rules ({command}): {'; '.join(counts(df))}. "
        f"A change is regressed or improved only beyond {threshold:g} % and real"
        + (f" ({'; '.join(rules)})" if rules else "") + ". "
        + (f"Repeats of the base ({', '.join(map(str, repeats))}) measured the noise: a change no larger than a "
           f"repeat's is not judged ({held}). " if repeats else "")
        + "A cell is the run's value, its change and verdict, or what held the change back; a click on a run's "
        "column sorts by its change. Bars: each key's change in each run (kernels, memory ops, GPUs: total time; "
        "NVTX: kernel time; ncu: duration; request latency: its median), solid where judged."
        + "".join(f" Warning: {m.removeprefix('compare: ')}." for m in partial)))
    many = build_many(tk, ids, threshold)
    rep = Report(title=f"{many.title} against {label}", header=[("compared with", f"{label} ({command})"), *many.header])
    other = _other_job(tk, ids, vs) if all("nsys" in s.kinds for s in sides) else None  # (nsys ranks of jobs)
    jobs = [] if other is None else [_jobs_compared(tk, ids, other, threshold, repeats)]
    rep.sections = [(sec, compare_table_html(df), spec, None), *jobs,
                    *_compared_runs_charts(tk, df, sides, labels, threshold, repeats), *many.sections]
    return rep


def _compared_runs_charts(tk, df: pl.DataFrame, sides: list, labels: list[str], threshold: float,
                          repeats: list | None = None) -> list[tuple]:
    """The sections that draw several runs against one base (``sides``: the base, then each
    run, tracekit.diff.Sides; ``labels`` as compare names them): ncu runs on one roofline
    (``charts.compare_roofline``), nsys runs' requests on one time axis
    (``charts.compare_timeline_data``); none where a side is a sweep, the chart's reason in its
    place where it cannot be drawn."""
    from . import charts

    if any(s.run_id is None for s in sides):
        return []
    base, runs = sides[0].run_id, ",".join(str(s.run_id) for s in sides[1:])
    label = labels[0]
    out = []
    if "ncu" in set(df["scope"]):
        judged = _judged_params(threshold, _repeat_options(tk, base, [s.run_id for s in sides[1:]], repeats,
                                                           chart=True))
        sec = Section("compare-roofline", f"Roofline compared with {label}", None, chart="compare-roofline", intro=(
            "Of the kernels with floating-point work, those judged changed in any run, then the largest others, up "
            f"to 20 in all, each at its roofline point in {label} (hollow) and in each run (filled, a colour per run), "
            "a line from the base's point to each run's, solid where that run's median launch was judged regressed "
            "or improved: a kernel's launches together, their FLOP over their DRAM bytes and over their time. A point "
            "that moved up and right did more work per byte and per second; only its duration says whether it got "
            f"faster (tracekit chart compare-roofline -p base={base} -p runs={runs}{judged}; -p limit=0 draws every "
            "kernel)."))
        out.append((sec, lambda: charts.compare_roofline(
            charts.compare_roofline_points(tk, df, sides, labels, threshold))))
    if all("nsys" in s.kinds for s in sides):
        sec = Section("compare-timeline", f"Timeline compared with {label}", None, chart="compare-timeline", intro=(
            f"The typical request of {label} (its most repeated NVTX range's median instance, as a report's timeline "
            "picks it), then each run's median instance of that range, each from its own start to the end of the GPU "
            "work it launched (tracekit chart compare-timeline "
            f"-p base={base} -p runs={runs} [-p nvtx=NAME -p instance=N] draws another)."))
        out.append((sec, lambda: charts.timeline(charts.compare_timeline_data(tk, base=str(base), runs=runs))))
    return _drawn(out)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1f24;background:#fff}
header{background:#1f3b57;color:#fff;padding:18px 28px}
header h1{margin:0 0 10px;font-size:20px;font-weight:600;overflow-wrap:anywhere}
header dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 18px;margin:0;font-size:13px}
header dt{color:#b9cde0}header dd{margin:0;word-break:break-word}
nav{padding:8px 28px;border-bottom:1px solid #d8dee4;background:#f6f8fa;font-size:13px}
nav a{margin-right:16px;color:#0b5cad;text-decoration:none}
main{padding:0 28px 40px}
section{margin:26px 0;border-bottom:1px solid #eaeef2;padding-bottom:18px}
h2{font-size:17px;margin:0 0 4px}
p.intro{margin:0 0 10px;color:#57606a}
p.note{background:#fff8c5;border:1px solid #d4a72c;padding:8px 12px;border-radius:4px}
p.empty,p.more{color:#57606a;font-style:italic}
p.caption{margin:0 0 10px;color:#57606a;font-size:13px}
.chart,.scroll{margin:8px 0 14px;overflow-x:auto;max-width:100%}
table.sortable{border-collapse:collapse;font-size:12.5px;margin-top:6px}
th,td{padding:4px 10px;border-bottom:1px solid #eaeef2;text-align:left;white-space:nowrap}
th{background:#f6f8fa;cursor:pointer;user-select:none;position:sticky;top:0}
th.num,td.num{text-align:right;font-variant-numeric:tabular-nums}
th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
td.name{max-width:520px;overflow:hidden;text-overflow:ellipsis}
table.diff th{white-space:normal}td.key{white-space:normal;min-width:220px;overflow-wrap:anywhere}td.note{white-space:normal;min-width:260px;color:#57606a;overflow-wrap:anywhere}
table.prose{width:100%}td.prose{white-space:normal;min-width:240px;overflow-wrap:anywhere}
td.verdict{font-weight:600}td.v-regressed{color:#c62828}td.v-improved{color:#2e7d32}
td.v-unchanged,td.v-not-judged{color:#8c959f;font-weight:400}td.v-added,td.v-removed{color:#6a3fb5}
tbody tr:hover{background:#f3f8ff}
footer{padding:12px 28px;color:#57606a;font-size:12px}
"""

# Sort a table by the clicked column: numbers by their data-v value, text as text;
# a second click reverses. Then embed every chart and record what it drew.
_JS = r"""
document.querySelectorAll("table.sortable th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0];
    var asc = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[idx], y = b.cells[idx];
      var vx = x.dataset.v, vy = y.dataset.v, r;
      if (vx !== undefined || vy !== undefined) {
        if (vx === undefined) return 1;
        if (vy === undefined) return -1;
        r = parseFloat(vx) - parseFloat(vy);
      } else {
        r = x.textContent.localeCompare(y.textContent);
      }
      return asc ? r : -r;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
(function () {
  var state = {charts: 0, rendered: 0, failed: 0, marks: {}, errors: [], done: false};
  window.tracekitReport = state;
  function dataMarks(node) {  // items of the data marks (role "mark"), not axes or legends
    var n = 0;
    if (node.marktype && node.role === "mark" && node.marktype !== "group") n += (node.items || []).length;
    (node.items || []).forEach(function (it) { n += dataMarks(it); });
    return n;
  }
  var els = document.querySelectorAll("div.chart[data-spec]");
  state.charts = els.length;
  var pending = [];
  if (typeof vegaEmbed !== "function") {  // the inlined libraries did not load: say so, do not hang
    state.errors.push("vegaEmbed is not defined");
    console.error("tracekit report: the Vega libraries did not load");
    state.done = true;
    return;
  }
  els.forEach(function (el) {
    var spec = JSON.parse(document.getElementById(el.dataset.spec).textContent);
    pending.push(vegaEmbed(el, spec, {actions: false, renderer: "svg"}).then(function (res) {
      var n = dataMarks(res.view.scenegraph().root);
      el.dataset.marks = String(n);
      state.marks[el.id] = n;
      state.rendered += 1;
    }).catch(function (err) {
      state.failed += 1;
      state.errors.push(el.id + ": " + err);
      console.error("tracekit report: chart " + el.id + " failed: " + err);
    }));
  });
  Promise.all(pending).then(function () { state.done = true; document.body.dataset.rendered = "1"; });
})();
"""


def render(rep: Report) -> str:
    """The report as one HTML document (scripts and data inlined)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(rep.title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{html.escape(rep.title)}</h1><dl>",
        *(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in rep.header),
        "</dl></header><nav>",
        *(f'<a href="#{s.key}">{html.escape(s.title)}</a>' for s, *_ in rep.sections),
        "</nav><main>",
    ]
    specs = []
    for sec, table, spec, note in rep.sections:
        parts.append(f'<section id="{sec.key}"><h2>{html.escape(sec.title)}</h2>')
        if sec.intro:
            parts.append(f'<p class="intro">{html.escape(sec.intro)}</p>')
        if note:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
        if spec is not None:
            sid = f"spec-{sec.key}"
            safe = vega.script_json(spec)
            specs.append(f'<script type="application/json" id="{sid}">{safe}</script>')
            parts.append(f'<div class="chart" id="chart-{sec.key}" data-spec="{sid}"></div>')
        parts.append(table)
        parts.append("</section>")
    parts += [
        "</main><footer>Written by tracekit. Click a column header to sort; hover a shortened name for "
        "the full one. Opens offline: the Vega libraries and the data are in this file.</footer>",
        *specs,
        f"<script>{vega.bundle()}</script>",
        f"<script>{_JS}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)


def write_report(tk, path: str | Path, run: str | int | list | None = None, vs: str | int | None = None,
                 repeats: list | None = None) -> Path:
    """Build the run's report (compared with ``vs`` if given, ``repeats`` of it measuring the
    noise: None, those the store holds of it; an empty list, none; several runs, a list: one
    page of them, ``build_many``, compared with ``vs`` if given) and write it to ``path``
    through ``write_output`` (a temporary file renamed into place, never over the store)."""
    from .diff import _is_file
    from .outputs import check_output, output_suffix, write_output

    check_output(path, tk.path)
    path = Path(path)
    if output_suffix(path, (".html", ".htm")) not in ("", ".html", ".htm"):
        raise ParamError(f"{path}: a report is an HTML page; name a .html file")
    # a file to compare with is ingested for the report: kept only when the report is written
    ingests = vs is not None and not tk.read_only and any(_is_file(r) for r in (vs, *(repeats or [])))
    if repeats is not None and vs is None:
        raise ParamError("report: --repeat is a capture of the --vs base again; give --vs BASE with it" if repeats else
                         "report: --no-repeats judges a comparison with --vs BASE without its stored repeats; give "
                         "--vs BASE with it")
    with tk.one_transaction() if ingests else contextlib.nullcontext():
        if isinstance(run, list | tuple):
            text = render(build_many(tk, list(run), vs=vs, repeats=repeats) if len(run) > 1
                          else build(tk, run[0] if run else None, vs, repeats=repeats))
        else:
            text = render(build(tk, run, vs, repeats=repeats))
        return write_output(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), tk.path)
