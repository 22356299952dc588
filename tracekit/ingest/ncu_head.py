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
    for line in text.splitlines():
        if line.startswith("==") or not line.strip():
            continue
        try:
            row = next(csv.reader(io.StringIO(line)))
        except (csv.Error, StopIteration):
            return None
        if row and row[0] == "ID" and "Kernel Name" in row:
            return row
        return None
    return None
