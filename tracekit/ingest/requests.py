"""``requests.csv`` written by ``tracekit capture``: one row per timed request."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import InputError
from . import Parsed
from .arrow import to_numpy

KIND = "timing"

COLUMNS = {
    "request_idx": pa.int32(),
    "phase": pa.string(),
    "bs": pa.int32(),
    "nc": pa.int32(),
    "kv_caches": pa.int32(),
    "candidate_embeddings": pa.int32(),
    "latency_ms": pa.float64(),
    "peak_mem_allocated_mb": pa.float64(),
    "peak_mem_reserved_mb": pa.float64(),
}


def sniff(path: Path, head: bytes) -> bool:
    # (a UTF-8 byte order mark first: the file saved again by a spreadsheet or a Windows editor)
    first = head.removeprefix(b"\xef\xbb\xbf").split(b"\n", 1)[0].strip().decode("utf-8", "replace")
    return first.split(",")[:3] == ["request_idx", "phase", "bs"]


def read(path: Path) -> Parsed:
    try:
        tbl = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=COLUMNS))
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"{path}: bad requests CSV ({str(err).splitlines()[0]})") from err
    missing = [c for c in COLUMNS if c not in tbl.column_names]
    if missing:
        raise InputError(f"{path}: requests CSV lacks column {missing[0]}")
    for col in ("latency_ms", "peak_mem_allocated_mb", "peak_mem_reserved_mb"):
        values = to_numpy(tbl.column(col), fill=0.0)  # (an empty cell is no value: allowed)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{path}: {col} {float(values[i])!r} in data row {i + 1}: a time or size is a finite "
                             "number, 0 or more")
    return Parsed(kind=KIND, meta={}, tables={"requests": tbl.select(list(COLUMNS))})
