"""A table (a Polars DataFrame) as a worksheet: what ``-f xlsx`` writes for any query or
diff, and the sweep spreadsheet's tables (``capture.export``).

A sheet is the frame's rows under a bold, frozen header row with an autofilter; numbers
stay numbers (ns as integers with thousands separators, ms with three decimals, other
floats with three), each column as wide as its widest value (at most ``MAX_WIDTH``
characters). A ``verdict`` column (a diff's) is coloured: regressed red, improved
green. Values the format has no cell for (lists, structs) are an error naming the
column; bytes are written as hex, as CSV and JSON do.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

from .errors import ParamError

MS = "#,##0.000"  # ms with three decimals
MAX_WIDTH = 48
#: columns named by their own value (no thousands separator)
PLAIN = ("bs", "nc", "request_idx", "kv_caches", "candidate_embeddings", "run_id", "pid", "tid",
         "device_id", "rank", "instance")
#: a verdict's fill (regressed red, improved green; Excel's light tones)
VERDICT_FILLS = {"regressed": "FFC7CE", "improved": "C6EFCE", "added": "FFEB9C", "removed": "FFEB9C"}
#: the largest sheet Excel opens (rows, header included)
MAX_ROWS = 1_048_576


def number_format(col: str, dtype) -> str | None:
    if col.endswith("_ms"):
        return MS
    if col.endswith("_mb"):
        return "#,##0.0"
    if dtype.is_integer():
        return "0" if col in PLAIN else "#,##0"
    if dtype.is_float():
        return "#,##0.000"
    return None


def _shown(v, fmt: str | None) -> str:
    """About what Excel shows for ``v`` in format ``fmt``: for column widths."""
    if v is None:
        return ""
    if fmt and isinstance(v, int | float) and not isinstance(v, bool):
        decimals = len(fmt.split(".")[1]) if "." in fmt else 0
        return f"{v:,.{decimals}f}" if "," in fmt else f"{v:.{decimals}f}"
    return str(v)


def cells(df):
    """``df`` with what a cell cannot hold made writable: bytes as hex; lists or structs
    are an error naming the column."""
    import polars as pl

    from .outputs import plain_columns

    df = plain_columns(df, "xlsx", "a cell")
    if df.height + 1 > MAX_ROWS:
        raise ParamError(f"--format xlsx: {df.height:,} rows, more than a sheet holds ({MAX_ROWS - 1:,}); "
                         "use --format parquet or csv, or --limit")
    # times of day and durations as text: a cell's date system is not DuckDB's
    temporal = [c for c, t in df.schema.items() if t.is_temporal()]
    if temporal:
        df = df.with_columns(pl.col(c).cast(pl.Utf8) for c in temporal)
    return df


def sheet(ws, df) -> None:
    """Write ``df`` into the worksheet ``ws`` as a table (the module's docstring)."""
    from openpyxl.styles import Font, PatternFill
    from openpyxl.utils import get_column_letter

    for j, col in enumerate(df.columns, start=1):  # (a column named in `tracekit sql` is anyone's text)
        put(ws, 1, j, col).font = Font(bold=True)
    for i, row in enumerate(df.iter_rows(), start=2):
        for j, v in enumerate(row, start=1):
            put(ws, i, j, v)
    for j, (col, dtype) in enumerate(df.schema.items(), start=1):
        fmt = number_format(col, dtype)
        values = df[col].to_list()
        if fmt is not None:
            for (cell,) in ws.iter_rows(min_row=2, max_row=df.height + 1, min_col=j, max_col=j):
                cell.number_format = fmt
        if col == "verdict":
            for (cell,) in ws.iter_rows(min_row=2, max_row=df.height + 1, min_col=j, max_col=j):
                if cell.value in VERDICT_FILLS:
                    cell.fill = PatternFill("solid", start_color=VERDICT_FILLS[cell.value])
        width = max([len(col), *(len(_shown(v, fmt)) for v in values)])
        ws.column_dimensions[get_column_letter(j)].width = min(width + 2, MAX_WIDTH)
    ws.freeze_panes = "A2"
    ws.auto_filter.ref = f"A1:{get_column_letter(max(len(df.columns), 1))}{df.height + 1}"


def put(ws, row: int, col: int, v):
    """The cell of ``ws`` at (``row``, ``col``) set to ``v`` as a sheet can hold it (``cell_value``):
    text stays text, never a formula ("=..." in a kernel's or a run's name)."""
    cell = ws.cell(row, col, cell_value(v))
    if isinstance(v, str) and cell.data_type == "f":
        cell.data_type = "s"
    return cell


#: the largest integer a sheet's number (a double) holds exactly
EXACT_INT = 2**53


def cell_value(v):
    """A value as a cell holds it: NaN and infinities (which a sheet has no number for) and
    integers a double cannot hold exactly (past 2**53: an id, a hash; a whole Decimal, as
    DuckDB's HUGEINT and DECIMAL(38, 0) come, too) as their text; the control characters a
    sheet's XML cannot hold escaped (``\\x01``)."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    whole = (isinstance(v, int) and not isinstance(v, bool)) or (
        isinstance(v, Decimal) and v.is_finite() and v == v.to_integral_value())
    if whole and abs(v) > EXACT_INT:
        return str(v)
    if isinstance(v, str):
        from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

        return ILLEGAL_CHARACTERS_RE.sub(lambda m: m.group().encode("unicode_escape").decode(), v)
    return v


def write(df, path: str | os.PathLike, title: str = "table") -> None:
    """``df`` as a workbook of one sheet named ``title`` at ``path``."""
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = title[:31]  # (Excel's limit on a sheet's name)
    sheet(ws, cells(df))
    save(wb, path)


def save(wb, path: str | os.PathLike) -> None:
    """The workbook ``wb`` written to ``path``: made in memory, then written whole, so that a
    failed write (a full disk) is the file's error alone (openpyxl's zip file, left open by
    one, printed a traceback of its own when Python collected it)."""
    import io

    buf = io.BytesIO()
    wb.save(buf)
    Path(path).write_bytes(buf.getbuffer())
