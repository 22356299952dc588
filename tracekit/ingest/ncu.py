"""Nsight Compute ingest: .ncu-rep reports and ``ncu --csv`` raw / details exports.

The kind is decided from the content: ``NVR\\0`` magic for a report; for CSV the header
row (``"ID","Process ID",...,"Kernel Name",...``) and then metric columns (raw page) or
Section/Metric Name/Unit/Value columns (details page). Tables (no run_id; the store
prepends it):

- ``ncu_kernels``: one row per profiled result (ncu's ID, names, what it profiled: a
  kernel launch, a range of ``--replay-mode range``/``app-range`` or a whole graph of
  ``--graph-profiling graph``; grid, block (a kernel's only), device, CC, stream,
  process, NVTX push/pop path);
- ``ncu_metrics``: long (kernel_id, metric, unit, value in base units, text_value);
- ``ncu_rules``: ncu's rule results per launch, from a report or a details page
  (``ncu_rules``); the raw page has none, and a run read from it alone has no such rows
  and no ``rule_results`` in its meta;
- ``ncu_source``, ``ncu_source_stalls``, ``ncu_source_lines``: the instruction-level data
  of launches profiled with Source Counters (ncu's Source page), from a report only
  (``ncu_source``); ``source_launches`` in the run's meta counts those launches.

Every source gives the same metric names and base units, so the named queries in
``queries/ncu`` work on any of them and report the metrics a source lacks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from . import head_of
from .ncu_head import MAGIC, header_of

if TYPE_CHECKING:
    import polars as pl

KIND = "ncu"


def sniff(path: Path, head: bytes) -> bool:
    """True for an .ncu-rep (magic) or an ncu CSV export (its header row)."""
    if head.startswith(MAGIC):
        return True
    return header_of(head) is not None


def rank(path: Path, head: bytes) -> int:
    """Which of several exports of one report a run folder reads first (lower wins).

    The raw CSV: ncu wrote it itself, it holds every metric and it reads fastest (the
    capture's 83 MB report, SourceCounters included, took 3.1-3.3 s and 970 MB through
    ncu_report against 0.8-0.9 s and 285 MB for its raw page); then the report (every
    metric and the rule results), then the details page (the sections' metrics and the rules).
    ``read_exports`` takes the rule results from a details page or report beside the raw page,
    and the instruction-level data from the report (which alone carries it).
    """
    if head.startswith(MAGIC):
        return 1
    header = header_of(head)
    return 0 if header is not None and "Section Name" not in header else 2


def _check_launches(rows: pl.DataFrame, kernels: pl.DataFrame, what: str, path: Path) -> None:
    """InputError where ``rows`` (of ``what``) name a launch the export does not hold."""
    import polars as pl

    unknown = rows.filter(~pl.col("kernel_id").is_in(kernels["kernel_id"].implode()))
    if unknown.height:
        raise InputError(f"{path}: {what} of launch ID {unknown['kernel_id'][0]}, which the export "
                         "does not hold; the export is corrupt")


def _check_times(metrics: pl.DataFrame, path: Path) -> None:
    """InputError where a time (a value in ns: a duration, an interval) is negative: no ncu
    metric measured in time is, so the export was edited or damaged. (Counters ncu derives
    by subtraction can be: its sector and % metrics, which are not times.)"""
    import polars as pl

    neg = metrics.filter((pl.col("unit") == "ns") & (pl.col("value") < 0))
    if neg.height:
        n = neg.row(0, named=True)
        raise InputError(f"{path}: launch ID {n['kernel_id']}: {n['metric']} is {n['value']:g} ns; a time is never "
                         "negative: the export was edited or is damaged (export it again from the report)")


#: the metrics the named queries read as whole numbers (``::BIGINT``: occupancy, ncu-summary,
#: ncu-kernels, compute-workload): a launch's configuration and its instruction counts
COUNT_METRICS = (
    "launch__block_size", "launch__grid_size", "launch__registers_per_thread",
    "launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic",
    "launch__shared_mem_per_block_driver", "launch__shared_mem_config_size",
    "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks", "launch__occupancy_limit_barriers",
    "smsp__inst_executed.sum", "smsp__inst_issued.sum",
)


def _check_counts(metrics: pl.DataFrame, path: Path) -> None:
    """InputError where a count of ``COUNT_METRICS`` is negative or beyond a 64-bit integer
    (registers per thread 1e23): ncu writes none such, so the export was edited or damaged. One
    past 2**63 fails every query that reads it (DuckDB's cast error); a negative one reads as a
    count no launch has."""
    import polars as pl

    bad = metrics.filter(pl.col("metric").is_in(COUNT_METRICS) & ~pl.col("value").is_between(0, 2.0**63, "left"))
    if bad.height:
        b = bad.row(0, named=True)
        raise InputError(f"{path}: launch ID {b['kernel_id']}: {b['metric']} is {b['value']:g}; a count is 0 or more "
                         "and below 2**63: the export was edited or is damaged (export it again from the report)")


def _add_source(meta: dict, tables: dict, kernels: pl.DataFrame, source: dict, path: Path) -> None:
    """The instruction-level tables of a report (none: nothing added), checked against the launches."""
    if not source:
        return
    rows = source["ncu_source"]
    _check_launches(rows, kernels, "instruction-level data", path)
    meta["source_launches"] = rows["kernel_id"].n_unique()
    tables.update({name: df.to_arrow() for name, df in source.items()})


def _finish(meta: dict, kernels: pl.DataFrame, metrics: pl.DataFrame, rules: pl.DataFrame | None, path: Path,
            source: dict | None = None):
    import polars as pl

    from . import Parsed

    if kernels.height == 0:
        raise InputError(f"{path}: no profiled launches (empty report)")
    _check_times(metrics, path)
    _check_counts(metrics, path)
    dup = kernels["kernel_id"].is_duplicated()
    if dup.any():
        raise InputError(
            f"{path}: launch ID {kernels.filter(dup)['kernel_id'][0]} appears twice; the export is corrupt"
        )
    kernels = kernels.with_columns(
        pl.when(pl.col("nvtx_ranges").list.len() > 0)
        .then(pl.col("nvtx_ranges").list.join("/"))
        .otherwise(None)
        .alias("nvtx_path"),
        pl.col("nvtx_ranges").list.last().alias("nvtx_range"),
    ).select(
        "kernel_id",
        "name",
        "mangled_name",
        "function_name",
        "workload",
        "nvtx_path",
        "nvtx_range",
        "nvtx_ranges",
        "nvtx_start_end",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "device_id",
        "cc",
        "context_id",
        "stream_id",
        "process_id",
        "process_name",
        "host_name",
    )
    if "gpu" not in meta:
        gpu = (
            metrics.filter(pl.col("metric") == "device__attribute_display_name")["text_value"]
            .drop_nulls()
            .unique()
        )
        if len(gpu):
            meta["gpu"] = ", ".join(sorted(gpu.to_list()))
    meta.setdefault("tool_version", None)
    meta["launches"] = kernels.height
    meta["metrics"] = metrics["metric"].n_unique()
    tables = {"ncu_kernels": kernels.to_arrow(), "ncu_metrics": metrics.to_arrow()}
    if rules is not None:  # the source carries rule results (none found is 0)
        _check_launches(rules, kernels, "a rule result", path)
        meta["rule_results"] = rules.height
        tables["ncu_rules"] = rules.to_arrow()
    _add_source(meta, tables, kernels, source or {}, path)
    return Parsed(kind=KIND, meta={k: v for k, v in meta.items() if v is not None}, tables=tables)


def read(path: Path):
    """Parse ``path`` -> Parsed(kind="ncu", meta, {ncu_kernels, ncu_metrics[, ncu_rules][, ncu_source...]})."""
    path = Path(path)
    head = head_of(path)
    if not head:
        raise InputError(f"{path}: empty file")
    from . import ncu_csv, ncu_rep  # (Polars: only where an ncu file is read)

    source = {}
    if head.startswith(MAGIC):
        meta, kernels, metrics, rules, source = ncu_rep.read_report(path)
    elif header_of(head) is not None:
        meta, kernels, metrics, rules = ncu_csv.read_csv_export(path)
    else:
        raise InputError(f"{path}: neither an .ncu-rep report nor an ncu --csv export")
    return _finish(meta, kernels, metrics, rules, path, source)


def read_exports(paths: list[Path]):
    """A run folder's exports of one report, best-ranked first (``rank``): the first read
    whole; where it has no rule results (the raw page), they come from a details page
    beside it, else from the report; where it has no instruction-level data, that comes
    from the report, and so does the ncu version (a CSV page does not say it). The exports
    must hold the same launches."""
    from . import ncu_rep

    heads = {p: head_of(p) for p in paths}
    reports = {p: heads[p].startswith(MAGIC) for p in paths[1:]}
    pending = None
    if any(reports.values()) and not heads[paths[0]].startswith(MAGIC):
        # a CSV page first: the report is read for its instruction-level data, and for the
        # rule results where no details page gives them; its child starts now, beside the parse
        details = any(rank(p, heads[p]) == 2 for p in paths)
        pending = ncu_rep.start_report(next(p for p in paths[1:] if reports[p]), source_only=details)
    try:
        return _read_exports(paths, reports, pending)
    finally:
        if pending is not None:
            pending.cancel()


def _read_exports(paths: list[Path], reports: dict[Path, bool], pending):
    from . import ncu_csv, ncu_rep

    parsed = read(paths[0])
    need_rules = "ncu_rules" not in parsed.tables
    need_source = "ncu_source" not in parsed.tables and any(reports.values())
    import polars as pl

    for other in sorted(paths[1:], key=reports.get):  # a details page parses in a fraction of a report's time
        if not (need_rules or need_source) or (not need_rules and not reports[other]):
            continue
        if reports[other]:
            if pending is not None and pending.path == other:
                meta, kernels, _, rules, source = pending.result()  # (started with source_only = not need_rules)
            else:
                meta, kernels, _, rules, source = ncu_rep.read_report(other, source_only=not need_rules)
            need_source = False  # (a report without Source Counters has none to give)
        else:
            meta, kernels, _, rules = ncu_csv.read_csv_export(other)
            source = {}
        if need_rules and meta.get("sections") == 0:  # (ncu --metrics alone: ncu ran no rules)
            parsed.meta["sections"] = 0
        version = None if parsed.meta.get("tool_version") else meta.get("tool_version")  # (a report says it)
        if rules is None and not source and version is None:
            continue
        # (names differ between a CSV and a report: two demanglers; ids and launch shapes do not)
        launch = ["kernel_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
        ours = pl.from_arrow(parsed.tables["ncu_kernels"]).select(launch).sort("kernel_id")
        if not ours.equals(kernels.select(launch).sort("kernel_id")):
            raise InputError(f"{other.name}: its launches are not those of {paths[0].name} in the same run folder; "
                             "a run folder's ncu exports must come from one report (export them again from it)")
        if version is not None:
            parsed.meta["tool_version"] = version
        if need_rules and rules is not None:
            parsed.meta["rule_results"] = rules.height
            parsed.tables["ncu_rules"] = rules.to_arrow()
            need_rules = False
        _add_source(parsed.meta, parsed.tables, kernels, source, other)
    return parsed
