"""What an Nsight Compute file is, from its first bytes: a report's magic, an ``ncu --csv``
export's header row. Light (no Polars): every ingest asks it while detecting the plugin."""

from __future__ import annotations

import csv
import io

#: The first bytes of an .ncu-rep report
MAGIC = b"NVR\x00"


def header_of(head: bytes) -> list[str] | None:
    """The CSV header row of an ncu export from the first bytes of a file, else None."""
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = head.decode("utf-8", errors="ignore")
    found = find_header(text.splitlines())
    return None if found is None else found[1]


def find_header(lines: list[str]) -> tuple[int, list[str]] | None:
    """(index, columns) of the header row of an ncu CSV export among the lines of a file, else
    None. Before it may stand ncu's messages (``==PROF==``, ``==WARNING==``), blank lines and
    the profiled program's own output: ``ncu --csv ... > FILE`` writes them all to stdout. A
    line that starts with a quote, as every row of ncu's CSV does, and is no header ends the
    search."""
    for i, line in enumerate(lines):
        if is_message(line):
            continue
        row = _row(line)
        if row and row[0] == "ID" and "Kernel Name" in row:
            return i, row
        if line.startswith('"'):
            return None
    return None


def is_message(line: str) -> bool:
    """A line of ncu's own (``==PROF==``, ``==WARNING==``, ``==ERROR==``) or a blank one: no row
    of its CSV."""
    return line.startswith("==") or not line.strip()


def _row(line: str) -> list[str]:
    """The line parsed as a CSV row (an unreadable one as no fields)."""
    try:
        return next(csv.reader(io.StringIO(line)))
    except (csv.Error, StopIteration):
        return []


#: the columns of an ncu CSV export made with --print-summary (per-kernel, per-gpu, per-nvtx):
#: launches aggregated, one row per metric and group
SUMMARY_COLUMNS = ("Kernel Name", "Invocations", "Metric Name", "Minimum", "Maximum", "Average")


def not_an_export_why(head: bytes) -> str | None:
    """Why an ncu CSV output tracekit does not read is none (None: not such an output): a
    --print-summary export (launches aggregated, no launch IDs), a Source page export (a
    launch's instructions), or a file holding only ncu's own messages (``ncu -i REPORT --csv
    ... > FILE`` where ncu refused the options)."""
    text = head.decode("utf-8", errors="ignore")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    rows = [line for line in lines if not line.startswith("==")]
    if not rows:
        error = next((line for line in lines if line.startswith("==ERROR==")), None)
        if error is None:
            return None
        return f"ncu's messages alone, no CSV (ncu wrote: {error.removeprefix('==ERROR==').strip()}); export again"
    first = [_row(line) for line in rows[:4]]
    header = first[0]
    if any(row[:2] in (["Address", "Source"], ["Line No", "Source"]) for row in first):
        # (after a "File Path" or "Kernel Name" line: the Source page of one function or launch)
        return ("an ncu Source page export (--page source): tracekit reads the Source page's numbers from the "
                ".ncu-rep report (captured with --section SourceCounters), which carries every launch's; ingest "
                "the report (tracekit query ncu-source)")
    if all(c in header for c in SUMMARY_COLUMNS) and "ID" not in header:
        return ("an ncu CSV export made with --print-summary: its launches aggregated per kernel (Invocations, "
                "Minimum, Maximum, Average), no launch IDs; export one row per launch without --print-summary "
                "(ncu -i REPORT --csv --page details, or --page raw)")
    return None
