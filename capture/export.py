"""``export_sweep``: the sweep spreadsheet, from the store (no log parsing).

xlsx, every sheet's headers the queries' column names (``bs``, ``nc``, ``latency_ms``):

* ``summary``: the ``sweep-latency`` grid, one row per point;
* ``grid``: per (preset, tool), median latency as a bs × nc table with a colour scale
  (green fastest, red slowest);
* ``chart``: per (preset, tool), a line chart of median latency against nc, one line per bs;
* ``results``: every timed request (``sweep-requests``), then one sheet of them per
  batch size (``bs8``) and per candidate count (``nc1024``), as the seed's notebook made.

Times in ms with three decimals, columns as wide as their values, a frozen header row
and an autofilter on every table. CSV: the ``results`` table at PATH and the summary
beside it (``<stem>-summary.csv``), unformatted. A store without a timing run (no
sweep ingested) is an error, as for the sweep queries, and so is a sweep without an ok
run that timed requests (a program's sweep, points that all failed): it says why.
"""

from __future__ import annotations

import os
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.outputs import check_output, output_suffix, write_output
from tracekit.registry import check_sweep_timed, get_registry, resolve_sweep
from tracekit.xlsx import MS, cell_value, put, save, sheet


def _frames(tk, sweep: str | int | None = None):
    return tk.query("sweep-requests", sweep=sweep, limit=0), tk.query("sweep-latency", sweep=sweep, limit=0)


def export_sweep(tk, path: str | os.PathLike, sweep: str | int | None = None) -> list[Path]:
    """Write the sweep spreadsheet (``.xlsx``) or CSV (``.csv``) of one sweep (``sweep``: its
    id, a run of it, ``latest``, the default, or ``all``, as the sweep queries take it);
    returns the files written."""
    path = Path(path)
    if path.is_dir():
        check_output(path, tk.path)  # (a folder is said to be one, whatever its name)
    suffix = output_suffix(path, (".xlsx", ".csv"))
    if suffix not in (".xlsx", ".csv"):
        what = f"not {path.suffix}" if path.suffix else "and the name has no suffix to say which"
        raise TracekitError(f"{path}: export sweep writes .xlsx or .csv, {what}")
    side = path.with_name(f"{path.stem}-summary.csv")
    for out in (path, side) if suffix == ".csv" else (path,):
        check_output(out, tk.path)  # before either file is written or the store read
    resolved = resolve_sweep(tk, sweep, "export sweep", said="--sweep ")  # (an error names the option)
    registry = get_registry()  # (what the sweep queries check first, said with export's own option)
    registry.check_kinds(tk, registry.get("sweep-requests"), "export sweep")
    check_sweep_timed(tk, "export sweep", resolved, sweep, ask="tracekit export sweep --sweep {sweep}")
    results, summary = _frames(tk, sweep)
    if suffix == ".csv":
        def both(tmp: Path) -> None:  # (both files or neither: the results are written within the summary's write)
            summary.write_csv(tmp)
            write_output(path, results.write_csv, tk.path)

        write_output(side, both, tk.path)
        return [path, side]
    wb = workbook(results, summary)
    write_output(path, lambda tmp: save(wb, tmp), tk.path)
    return [path]


def workbook(results, summary):
    """The openpyxl Workbook of the sweep-requests rows ``results`` and the sweep-latency
    rows ``summary`` (Polars DataFrames)."""
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "summary"
    sheet(ws, summary)
    # (a run that records no preset, a benchmark log's: None, sorted first)
    groups = sorted({(r["preset"], r["tool"]) for r in summary.iter_rows(named=True)},
                    key=lambda g: tuple((v is not None, v or "") for v in g))
    grids = _grids(wb.create_sheet("grid"), summary, groups)
    _charts(wb.create_sheet("chart"), grids)
    sheet(wb.create_sheet("results"), results)
    for bs in sorted(set(results["bs"].to_list())):
        sheet(wb.create_sheet(f"bs{bs}"), results.filter(results["bs"] == bs))
    for nc in sorted(set(results["nc"].to_list())):
        sheet(wb.create_sheet(f"nc{nc}"), results.filter(results["nc"] == nc))
    return wb


def _grids(ws, summary, groups) -> list[dict]:
    """Per (preset, tool), median latency as a bs × nc block (a title row, an nc header
    row, a row per bs) with a 3-colour scale; returns where each block is, for the charts."""
    import polars as pl
    from openpyxl.formatting.rule import ColorScaleRule
    from openpyxl.styles import Font
    from openpyxl.utils import get_column_letter

    ws.column_dimensions["A"].width = 10
    blocks, row = [], 1
    for preset, tool in groups:
        sub = summary.filter(pl.col("preset").eq_missing(preset) & pl.col("tool").eq_missing(tool))
        bss, ncs = sorted(set(sub["bs"].to_list())), sorted(set(sub["nc"].to_list()))
        median = {(r["bs"], r["nc"]): r["median_ms"] for r in sub.iter_rows(named=True)}
        put(ws, row, 1, f"median latency, ms: {_group(preset, tool)} (rows bs, columns nc)").font = Font(bold=True)
        head = row + 1
        ws.cell(head, 1, "bs \\ nc").font = Font(bold=True)
        for j, nc in enumerate(ncs, start=2):
            ws.cell(head, j, nc).font = Font(bold=True)
            ws.column_dimensions[get_column_letter(j)].width = 11
        for i, bs in enumerate(bss, start=head + 1):
            ws.cell(i, 1, bs).font = Font(bold=True)
            for j, nc in enumerate(ncs, start=2):
                cell = ws.cell(i, j, median.get((bs, nc)))
                cell.number_format = MS
        last_row, last_col = head + len(bss), 1 + len(ncs)
        if bss and ncs:
            ws.conditional_formatting.add(
                f"B{head + 1}:{get_column_letter(last_col)}{last_row}",
                ColorScaleRule(start_type="min", start_color="63BE7B", mid_type="percentile", mid_value=50,
                               mid_color="FFEB84", end_type="max", end_color="F8696B"))
        blocks.append({"preset": preset, "tool": tool, "ws": ws, "head": head, "bss": bss, "ncs": ncs})
        row = last_row + 2
    ws.freeze_panes = "B1"
    return blocks


def _group(preset: str | None, tool: str | None, short: bool = False) -> str:
    """A grid's (preset, tool) as its title says it; a part the runs do not record is left out."""
    parts = [(v if short else f"{k} {v}") for k, v in (("preset", preset), ("tool", tool)) if v is not None]
    return ", ".join(parts) or "runs without preset or tool"


def _charts(ws, grids: list[dict]) -> None:
    """Per grid block, a line chart of its medians against nc, one line per bs."""
    from openpyxl.chart import LineChart, Reference
    from openpyxl.chart.series import SeriesLabel

    for k, g in enumerate(grids):
        if not g["bss"] or not g["ncs"]:
            continue
        chart = LineChart()
        chart.title = cell_value(f"median latency vs candidates per user ({_group(g['preset'], g['tool'], short=True)})")
        chart.x_axis.title = "nc (candidates per user)"
        chart.y_axis.title = "median latency, ms"
        chart.y_axis.number_format = "0.0"
        chart.height, chart.width = 9, 18
        last_col = 1 + len(g["ncs"])
        for i, bs in enumerate(g["bss"], start=g["head"] + 1):
            chart.add_data(Reference(g["ws"], min_col=2, max_col=last_col, min_row=i, max_row=i), from_rows=True)
            chart.series[-1].tx = SeriesLabel(v=f"bs={bs}")
            chart.series[-1].marker.symbol = "circle"
        chart.set_categories(Reference(g["ws"], min_col=2, max_col=last_col, min_row=g["head"], max_row=g["head"]))
        # visible axes (openpyxl >= 3.1 hides them unless told)
        chart.x_axis.delete = False
        chart.y_axis.delete = False
        ws.add_chart(chart, f"A{1 + 20 * k}")
