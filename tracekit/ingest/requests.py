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
    "model_flop": pa.int64(),
    "attention_flop": pa.int64(),
}
#: columns a requests.csv written before the capture counted them lacks (NULL then)
OPTIONAL = ("model_flop", "attention_flop")


#: a request's phase, as capture writes it (capture/timing.py); only timed requests are timed
PHASES = ("warmup", "timed")
#: the counts and the index of a request, each at least this
LEAST = {"request_idx": 0, "bs": 1, "nc": 1, "kv_caches": 0, "candidate_embeddings": 0, "model_flop": 0,
         "attention_flop": 0}


def sniff(path: Path, head: bytes) -> bool:
    # (a UTF-8 byte order mark first: the file saved again by a spreadsheet or a Windows editor)
    first = head.removeprefix(b"\xef\xbb\xbf").split(b"\n", 1)[0].strip().decode("utf-8", "replace")
    return first.split(",")[:3] == ["request_idx", "phase", "bs"]


def read(path: Path) -> Parsed:
    try:
        with pa.input_stream(str(path), compression="detect") as f:
            raw = f.read()
        tbl = pacsv.read_csv(pa.BufferReader(raw), convert_options=pacsv.ConvertOptions(column_types=COLUMNS))
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"{path}: bad requests CSV ({str(err).splitlines()[0]})") from err
    if tbl.num_rows and not raw.endswith(b"\n"):
        # (capture writes each row whole with its line end: a last row without one was cut short, and
        # a cut inside its last column still parses, as a wrong number)
        raise InputError(f"{path}: its last row (data row {tbl.num_rows}) has no line end: the file was cut short "
                         "while written or copied; remove that row, or end it with a line end if it is whole")
    for col in OPTIONAL:
        if col not in tbl.column_names:
            tbl = tbl.append_column(col, pa.nulls(tbl.num_rows, COLUMNS[col]))
    missing = [c for c in COLUMNS if c not in tbl.column_names]
    if missing:
        raise InputError(f"{path}: requests CSV lacks column {missing[0]}")
    phases = tbl.column("phase").to_pylist()
    bad = next((i for i, v in enumerate(phases) if v not in PHASES), None)
    if bad is not None:  # (another phase would be left out of every timed statistic without a word)
        raise InputError(f"{path}: phase {phases[bad]!r} in data row {bad + 1}: a request's phase is "
                         f"{' or '.join(PHASES)}")
    latency = tbl.column("latency_ms").to_pylist()
    empty = next((i for i, (phase, ms) in enumerate(zip(phases, latency, strict=True)) if phase == "timed" and ms is None),
                 None)
    if empty is not None:  # (a timed request without its time would count in `requests` and in no quantile)
        raise InputError(f"{path}: latency_ms is empty in data row {empty + 1}, a timed request: each timed request "
                         "has its time (nan, NA, N/A and NULL read as empty)")
    for col, least in LEAST.items():
        values = to_numpy(tbl.column(col), fill=least)  # (an empty cell is no value: allowed)
        if (values < least).any():
            i = int(np.flatnonzero(values < least)[0])
            raise InputError(f"{path}: {col} {int(values[i])} in data row {i + 1}: must be {least} or more")
    idx = to_numpy(tbl.column("request_idx"), fill=-1)
    seen: dict[int, int] = {}
    for i, v in enumerate(idx.tolist()):
        if v >= 0 and seen.setdefault(v, i) != i:  # (two files joined, or a row copied: counted twice)
            raise InputError(f"{path}: request_idx {v} in data rows {seen[v] + 1} and {i + 1}: each request is one "
                             "row")
    for col in ("latency_ms", "peak_mem_allocated_mb", "peak_mem_reserved_mb"):
        values = to_numpy(tbl.column(col), fill=0.0)  # (an empty cell is no value: allowed)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{path}: {col} {float(values[i])!r} in data row {i + 1}: a time or size is a finite "
                             "number, 0 or more")
    return Parsed(kind=KIND, meta={}, tables={"requests": tbl.select(list(COLUMNS))})
