"""Nsight Compute's instruction-level data (its Source page), read from a report.

With the SourceCounters section (in ``--set full``), a report holds per-instruction
metrics of each launch: instructions executed, the warp stall samples by reason, global
sectors against the ideal count (uncoalesced accesses), shared-memory wavefronts against
the ideal (bank conflicts), divergent branches. ``ncu_report`` gives them as instanced
metrics whose correlation ids are the instructions' addresses, and per address the SASS
text and, for code built with line information (Triton's kernels always are; CUDA with
``-lineinfo``), its source file and line. With ``--import-source yes`` the report also
carries the source files' text.

A range (``--replay-mode range``/``app-range``) or a whole graph (``--graph-profiling
graph``) runs several functions: its instructions are told apart by the functions' first
addresses (``launch__function_pcs``, one instance per function, in address order) and
named from the report's module entries (``ncu_rep.module_functions``), as ncu's Source
page names them (the instances of ``launch__kernel_name`` follow the launch order, not
the addresses'). A graph's result has the warp stall sampling only (no instructions
executed), as ncu's Source page shows it.

Three tables (no run_id: the store prepends it):

- ``ncu_source``: one row per instruction of a launch that ran or was sampled;
- ``ncu_source_stalls``: its warp stall samples per reason (rows with samples only);
- ``ncu_source_lines``: the text of every line of the source files the report carries.

Disassembling an address is ncu_report's slowest call (75-175 us), so the SASS and line of
an address are read once per function and start address (the launches of a kernel share
them), and a metric whose total is 0 is not read instance by instance.
"""

from __future__ import annotations

import bisect
import re

#: ncu_report's per-instruction metric -> ncu_source column (ncu's Source page column)
METRICS = {
    "inst_executed": "inst_executed",  # Instructions Executed
    "thread_inst_executed": "thread_inst_executed",  # Thread Instructions Executed
    "thread_inst_executed_true": "thread_inst_executed_pred_on",  # Predicated-On Thread Instructions Executed
    "smsp__pcsamp_sample_count": "samples",  # Warp Stall Sampling (All Samples)
    "smsp__branch_targets_threads_divergent": "divergent_branches",  # Divergent Branches
    "memory_l1_tag_requests_global": "l1_tag_requests_global",  # L1 Tag Requests Global
    "derived__memory_l1_conflicts_shared_nway": "shared_conflicts_nway",  # L1 Conflicts Shared N-Way
    "memory_l1_wavefronts_shared": "shared_wavefronts",  # L1 Wavefronts Shared
    "memory_l1_wavefronts_shared_ideal": "shared_wavefronts_ideal",  # L1 Wavefronts Shared Ideal
    "derived__memory_l1_wavefronts_shared_excessive": "shared_wavefronts_excess",  # L1 Wavefronts Shared Excessive
    "memory_l2_theoretical_sectors_global": "l2_sectors_global",  # L2 Theoretical Sectors Global
    "memory_l2_theoretical_sectors_global_ideal": "l2_sectors_global_ideal",  # L2 Theoretical Sectors Global Ideal
    "derived__memory_l2_theoretical_sectors_global_excessive": "l2_sectors_global_excess",  # ... Excessive
    "memory_l2_theoretical_sectors_local": "l2_sectors_local",  # L2 Theoretical Sectors Local
}
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
#: a branch target's label as ncu_report writes it (``BRA `(.L_x_0) 0x7f...``); the Source page prints the address alone
_LABEL = re.compile(r"`\([^)]*\)\s*")

#: columns of ncu_source (Polars types by name), in order
SCHEMA = {
    "kernel_id": "Int64",
    "function": "Utf8",
    "address": "Int64",
    "pc_offset": "Int64",
    "sass": "Utf8",
    "file": "Utf8",
    "line": "Int64",
    **{col: "Float64" for col in METRICS.values()},
    "samples_not_issued": "Float64",
}
STALL_SCHEMA = {"kernel_id": "Int64", "address": "Int64", "reason": "Utf8", "samples": "Float64",
                "samples_not_issued": "Float64"}
LINE_SCHEMA = {"file": "Utf8", "line": "Int64", "text": "Utf8"}


def stall_reason(metric: str) -> str:
    """``smsp__pcsamp_warps_issue_stalled_long_scoreboard[_not_issued]`` -> ``long_scoreboard``,
    named as the warp-state metrics name it (the sampling's ``no_instructions`` is
    ``no_instruction`` there), so both views of a stall join on one name."""
    reason = metric.removeprefix(STALL_PREFIX).removesuffix("_not_issued")
    return "no_instruction" if reason == "no_instructions" else reason


def _instances(C, metric, known: dict[int, list[int]]) -> tuple[list[int], list[float]]:
    """(addresses, values) of an instanced metric. The metrics of one launch mostly list the
    same addresses in the same order (all stall reasons: the sampled ones; the executed-
    instruction counters: every one), so a list read before (``known``, by length) is taken
    again when it agrees at both ends and two points between; reading the addresses is half
    the cost of a metric."""
    n = C.IMetric_num_instances(metric)
    ids = C.IMetric_correlation_ids(metric)
    pcs = known.get(n)
    if pcs is None or any(C.IMetric_as_uint64(ids, i) != pcs[i] for i in {0, n // 3, 2 * n // 3, n - 1}):
        pcs = [C.IMetric_as_uint64(ids, i) for i in range(n)]
        known[n] = pcs
    return pcs, [C.IMetric_as_double(metric, i) for i in range(n)]


class Reader:
    """Collects the instruction-level rows of a report's launches (``add``), then the frames."""

    def __init__(self, functions: dict[int, dict[int, str]] | None = None):
        # the SWIG layer's functions: a third of the wrappers' cost
        from ncu_report import _ncu_report

        self._C = _ncu_report
        self._names = functions or {}  # kernel_id -> {function's first address: name}, for ranges and graphs
        self.rows: dict[str, list] = {c: [] for c in SCHEMA}
        self.stalls: dict[str, list] = {c: [] for c in STALL_SCHEMA}
        self.files: dict[str, str] = {}
        self._code: dict[tuple[str, int], dict[int, tuple]] = {}  # (function, start) -> address -> (sass, file, line)

    def add(self, kernel_id: int, action) -> bool:
        """The launch's instructions; False where the report has no Source Counters for it."""
        C = self._C
        names = set(action.metric_names())
        if "inst_executed" not in names and "smsp__pcsamp_sample_count" not in names:
            return False
        per: dict[str, dict[int, float]] = {}
        known: dict[int, list[int]] = {}
        for metric, col in METRICS.items():
            if metric in names:
                m = action.metric_by_name(metric)
                if m is not None and C.IMetric_has_correlation_ids(m):
                    # (a metric's value is the sum of its instances: 0 means every instance is)
                    per[col] = dict(zip(*_instances(C, m, known), strict=True)) if C.IMetric_as_double(m) else {}
        stall: dict[tuple[int, str], list[float]] = {}
        for metric in sorted(n for n in names if n.startswith(STALL_PREFIX)):
            m = action.metric_by_name(metric)
            if m is None or not C.IMetric_has_correlation_ids(m) or not C.IMetric_as_double(m):
                continue
            slot = 1 if metric.endswith("_not_issued") else 0
            reason = stall_reason(metric)
            for pc, v in zip(*_instances(C, m, known), strict=True):
                if v:
                    stall.setdefault((pc, reason), [0.0, 0.0])[slot] += v
        # every instruction that executed or was sampled
        pcs = sorted(set(per.get("inst_executed", ())) | set(per.get("samples", ())))
        if not pcs:
            return False  # (a launch that executed nothing)
        functions = self._functions(kernel_id, action, pcs[0])
        starts = [f[0] for f in functions]
        where = [functions[max(bisect.bisect_right(starts, pc) - 1, 0)] for pc in pcs]
        for start, function in set(where):
            code = self._code.setdefault((function or action.name(), start), {})
            if not code:  # the launch that brings a code in brings its source files
                for name, text in dict(action.source_files() or {}).items():  # (~20 ms a call)
                    self.files.setdefault(name, text)
            for pc, (s, f) in zip(pcs, where, strict=True):
                if (s, f) == (start, function) and pc not in code:
                    code[pc] = self._disassemble(action, pc)
        sass, files, lines = zip(*(self._code[(f or action.name(), s)][pc] for pc, (s, f) in zip(pcs, where, strict=True)),
                                 strict=True)
        not_issued: dict[int, float] = {}
        for (pc, _), (_, ni) in stall.items():
            not_issued[pc] = not_issued.get(pc, 0.0) + ni
        r = self.rows
        n = len(pcs)
        r["kernel_id"] += [kernel_id] * n
        r["function"] += [f for _, f in where]
        r["address"] += pcs
        r["pc_offset"] += [pc - s for pc, (s, _) in zip(pcs, where, strict=True)]
        r["sass"] += sass
        r["file"] += files
        r["line"] += lines
        for col in METRICS.values():
            vals = per.get(col)
            r[col] += [None] * n if vals is None else [vals.get(pc, 0.0) for pc in pcs]
        has_samples = "samples" in per
        r["samples_not_issued"] += [not_issued.get(pc, 0.0) if has_samples else None for pc in pcs]
        s = self.stalls
        for (pc, reason), (v, ni) in sorted(stall.items()):
            s["kernel_id"].append(kernel_id)
            s["address"].append(pc)
            s["reason"].append(reason)
            s["samples"].append(v)
            s["samples_not_issued"].append(ni)
        return True

    def _functions(self, kernel_id: int, action, first_pc: int) -> list[tuple[int, str | None]]:
        """(first address, name) of the functions the result ran, by address: a kernel
        launch's one function (name None: the launch's), its first address
        ``launch__function_pcs`` else its first instruction's; a range's or a graph's
        functions from the instances of ``launch__function_pcs``, named as given."""
        C = self._C
        m = action.metric_by_name("launch__function_pcs")
        n = m.num_instances() if m is not None else 0
        if n > 1:
            names = self._names.get(kernel_id, {})
            pcs = sorted(C.IMetric_as_uint64(m, i) for i in range(n))
            return [(pc, names.get(pc) or f"function at {pc:#x}") for pc in pcs]
        if n == 1:
            v = C.IMetric_as_uint64(m, 0)
            if 0 < v <= first_pc:
                return [(v, None)]
        return [(first_pc, None)]

    def _disassemble(self, action, pc: int) -> tuple[str | None, str | None, int | None]:
        C = self._C
        sass = _LABEL.sub("", C.IAction_sass_by_pc(action, pc) or "").strip() or None
        info = C.IAction_source_info(action, pc)
        if info is None:
            return sass, None, None
        line = C.ISourceInfo_line(info)
        return sass, C.ISourceInfo_file_name(info) or None, line if line > 0 else None

    def frames(self) -> tuple:
        """(ncu_source, ncu_source_stalls, ncu_source_lines) as Polars frames, in the order of
        their keys (launches in order, their instructions by address)."""
        import polars as pl

        lines: dict[str, list] = {"file": [], "line": [], "text": []}
        for name, text in sorted(self.files.items()):
            for i, t in enumerate(text.splitlines(), 1):
                lines["file"].append(name)
                lines["line"].append(i)
                lines["text"].append(t)
        return tuple(pl.DataFrame(cols, schema={c: getattr(pl, t) for c, t in schema.items()})
                     for cols, schema in ((self.rows, SCHEMA), (self.stalls, STALL_SCHEMA), (lines, LINE_SCHEMA)))


def launches(ctx) -> list:
    """A loaded report's results in the report's order: a launch's kernel_id is its position."""
    return [ctx.range_by_idx(r).action_by_idx(a) for r in range(ctx.num_ranges())
            for a in range(ctx.range_by_idx(r).num_actions())]


def read(actions: list, functions: dict[int, dict[int, str]] | None = None):
    """The instruction-level data of a report's launches ``actions`` (``launches``: a
    launch's kernel_id is its position) as (ncu_source, ncu_source_stalls, ncu_source_lines)
    Polars frames, or None where no launch has Source Counters. ``functions``: kernel_id ->
    {first address: name} of the functions of the ranges and graphs among them. Read in this
    process: workers forked from it, where the threads Polars, Arrow and NumPy start at import
    run, can wait forever on a lock such a thread held at the fork, and workers started afresh each load
    the report again, which costs more than they save (docs/performance.md)."""
    reader = Reader(functions)
    added = sum(reader.add(kid, action) for kid, action in enumerate(actions))
    return reader.frames() if added else None
