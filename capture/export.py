"""``export_sweep``: the seed benchmark's spreadsheet, from the store (no log parsing).

xlsx: sheet ``results`` (every timed request of the sweep grid: the seed's columns
file/batch_size/num_candidate/kv_caches/candidate_embeddings/total_time_ms, with the
run name as ``file``), ``summary`` (the ``sweep-latency`` grid), then one sheet per batch
size (``bs8``) and one per candidate count (``nc1024``), as the seed's notebook made.
CSV: the ``results`` table at PATH and the summary beside it (``<stem>-summary.csv``).
A store without a timing run (no sweep ingested) is an error, as for the sweep queries;
timing runs none of which is an ok sweep point give sheets of headers only.
"""

from __future__ import annotations

import os
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.outputs import check_not_store, write_output

RESULT_COLUMNS = ("file", "batch_size", "num_candidate", "kv_caches", "candidate_embeddings",
                  "total_time_ms", "request_idx", "preset", "tool")


def _frames(tk):
    requests = tk.query("sweep-requests", limit=0)
    summary = tk.query("sweep-latency", limit=0)
    results = requests.rename({"run": "file"}).select(list(RESULT_COLUMNS))
    return results, summary


def export_sweep(tk, path: str | os.PathLike) -> list[Path]:
    """Write the sweep spreadsheet (``.xlsx``) or CSV (``.csv``); returns the files written."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".xlsx", ".csv"):
        raise TracekitError(f"{path}: export sweep writes .xlsx or .csv, not {path.suffix or 'no suffix'}")
    side = path.with_name(f"{path.stem}-summary.csv")
    for out in (path, side) if suffix == ".csv" else (path,):
        check_not_store(out, tk.path)  # before either file is written
    results, summary = _frames(tk)
    if suffix == ".csv":
        write_output(path, results.write_csv, tk.path)
        write_output(side, summary.write_csv, tk.path)
        return [path, side]
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "results"
    _sheet(ws, results)
    _sheet(wb.create_sheet("summary"), summary)
    for bs in sorted(set(results["batch_size"].to_list())):
        _sheet(wb.create_sheet(f"bs{bs}"), results.filter(results["batch_size"] == bs))
    for nc in sorted(set(results["num_candidate"].to_list())):
        _sheet(wb.create_sheet(f"nc{nc}"), results.filter(results["num_candidate"] == nc))
    write_output(path, wb.save, tk.path)
    return [path]


def _sheet(ws, df) -> None:
    ws.append(list(df.columns))
    for row in df.iter_rows():
        ws.append(list(row))
    ws.freeze_panes = "A2"
