"""nsys's Python call stacks, decoded from the NVTX payloads it writes them in.

With ``--python-backtrace=cuda`` (beside --cudabacktrace, the CPU sampled) nsys records the
Python stack of the thread at each CUDA API call it unwinds; with ``--python-sampling=true``,
each Python thread's stack 1,000 times a second (--python-sampling-frequency). Each is an NVTX
mark (NVTX_EVENTS, eventType 34) of a domain nsys registers, "Python Backtrace on CUDA" or
"Python Periodic Sampling", whose binary payload (``binaryData``: only in exports made with
``nsys export --include-blobs=true``) is laid out as the export's NVTX_PAYLOAD_SCHEMAS say: the
thread's state (an enum: Running, Blocking Wait, ...), the number of frames and the frames,
innermost first, each a function and a file (StringIds ids) and a line. ``read`` decodes every
mark at once (NumPy over the blobs' bytes) into stacks that the marks with the same frames share.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CaptureWarning, warn_from_caller
from .. import sqlite_ints
from ..arrow import from_numpy
from .columns import NVTX_MARK
from .source import Export

#: nsys's NVTX domains of Python stacks -> the kind of mark (a CUDA API call's stack, a sample)
DOMAINS = {"Python Backtrace on CUDA": "call", "Python Periodic Sampling": "sample"}
#: the byte size of the payload entry types read here (nvToolsExtPayload.h: the integer types,
#: and 80, a registered string handle, which the export writes as a StringIds id)
_SIZES = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 8, 8: 8, 9: 8, 10: 8, 11: 1, 12: 1, 13: 2, 14: 2, 15: 4, 16: 4,
          17: 8, 18: 8, 80: 8}
_SIGNED = {1, 3, 5, 7, 9, 11, 13, 15, 17}
#: a blob: the number of payloads (u64), then per payload its schema id, size and offset (u64 each)
_HEADER, _ENTRY = 8, 24


class Field(NamedTuple):
    """An integer of a payload: its byte offset (in the payload, or in a frame), size, sign."""

    offset: int
    size: int
    signed: bool


class Layout(NamedTuple):
    """Where a domain's payload keeps what is read: the thread state, the frame count, the
    frames (offset; each ``frame_size`` bytes), and in a frame the function, file and line."""

    schema_id: int
    state: Field
    states: dict[int, str]
    count: Field
    frames: int
    frame_size: int
    function: Field
    file: Field
    line: Field


class Stacks(NamedTuple):
    """The decoded marks (start, globalTid, kind, stack_id: NULL for none, thread_state) and the
    distinct stacks' frames (stack_id, depth: 0 the innermost, function, file, line)."""

    marks: pa.Table
    frames: pa.Table


def read(export: Export, path: Path, strings: pa.Table | None) -> Stacks | None:
    """The Python stacks of the export; None where it has none. Marks of the Python domains
    without a payload (an export made without --include-blobs) are a warning that says how to
    export them, and so is a payload whose schema is not the one described above."""
    if "NVTX_PAYLOAD_SCHEMAS" not in export.tables or "NVTX_EVENTS" not in export.tables:
        return None
    try:
        layouts = _layouts(export)
    except sqlite_ints.ERRORS:
        layouts = {}
    except (TypeError, ValueError):  # (a schema row with a NULL or text where nsys writes integers)
        warn_from_caller(CaptureWarning(f"{path}: the Python call stacks' payload schemas (NVTX_PAYLOAD_SCHEMAS) "
                                        "hold values nsys does not write; the Python stacks left out"))
        layouts = {}
    domains = {d: kind for d, (kind, _) in layouts.items()}
    if not domains:
        return None
    where = f"eventType = {NVTX_MARK} AND domainId IN ({', '.join(str(int(d)) for d in domains)})"
    nvtx = export.tables["NVTX_EVENTS"]
    rows = export.query(f'SELECT start, globalTid, domainId, binaryData FROM "{nvtx}" WHERE {where} '
                        "AND binaryData IS NOT NULL ORDER BY rowid", nvtx)
    if rows.num_rows == 0:
        blobless = export.sq.execute(f'SELECT count(*) FROM "{nvtx}" WHERE {where}').fetchone()[0]
        if blobless:
            warn_from_caller(CaptureWarning(
                f"{path}: {blobless:,} Python call stacks without their frames (nsys writes them as NVTX payloads, "
                "which an export leaves out unless made with `nsys export --type sqlite --include-blobs=true "
                "REPORT.nsys-rep`); the Python stacks left out"))
        return None
    parts, frames, next_id, bad = [], [], 0, 0
    for domain, (kind, layout) in layouts.items():
        sel = rows.filter(pc.equal(rows.column("domainId"), domain))
        if sel.num_rows == 0:
            continue
        if layout is None:
            bad += sel.num_rows
            continue
        ok, state, stack, found = _decode(sel.column("binaryData"), layout, next_id)
        bad += int((~ok).sum())
        keep = from_numpy(ok)
        states, which = np.unique(state[ok], return_inverse=True)  # (a few values: named once each)
        parts.append(pa.table({
            "start": sel.column("start").filter(keep), "globalTid": sel.column("globalTid").filter(keep),
            "kind": pa.repeat(pa.scalar(kind, pa.string()), int(ok.sum())),
            "stack_id": from_numpy(stack[ok], mask=stack[ok] < 0),
            "thread_state": pa.array([layout.states.get(int(v)) for v in states], pa.string()).take(
                from_numpy(which.reshape(-1).astype(np.int64))),
        }))
        if len(found):
            frames.append(found)
            next_id = int(found["stack_id"].max()) + 1
    if bad:
        warn_from_caller(CaptureWarning(f"{path}: {bad:,} Python call stacks whose payload is not laid out as nsys "
                                        "2025.3 writes it (NVTX_PAYLOAD_SCHEMAS); left out"))
    if not parts:
        return None
    return Stacks(pa.concat_tables(parts), _named_frames(frames, strings))


def _layouts(export: Export) -> dict[int, tuple[str, Layout | None]]:
    """Per NVTX domain id of a Python domain, its kind and its payload's layout (None where the
    schema lacks what is read)."""
    sq = export.sq
    named = {}
    for domain, schema, name in sq.execute("SELECT domainId, schemaId, name FROM NVTX_PAYLOAD_SCHEMAS"):
        if name in DOMAINS:
            if not (isinstance(domain, int) and isinstance(schema, int)):
                raise ValueError(f"domain {domain!r}, schema {schema!r}")
            named[domain] = (DOMAINS[name], schema)
    if not named:
        return {}
    entries: dict[tuple[int, int], dict[str, tuple[int, int, int | None]]] = {}
    for domain, schema, name, typ, detail, offset in sq.execute(
            "SELECT domainId, schemaId, name, type, arrayOrUnionDetail, offset FROM NVTX_PAYLOAD_SCHEMA_ENTRIES"):
        entries.setdefault((domain, schema), {})[name] = (typ, offset or 0, detail)
    sizes = dict(((d, s), n) for d, s, n in sq.execute("SELECT domainId, schemaId, payloadSize FROM NVTX_PAYLOAD_SCHEMAS"))
    enums: dict[tuple[int, int], dict[int, str]] = {}
    if "NVTX_PAYLOAD_ENUM_ENTRIES" in export.tables:
        for domain, schema, name, value in sq.execute(
                "SELECT domainId, schemaId, name, value FROM NVTX_PAYLOAD_ENUM_ENTRIES"):
            enums.setdefault((domain, schema), {})[value] = name
    enum_sizes = {}
    if "NVTX_PAYLOAD_ENUMS" in export.tables:
        enum_sizes = dict(((d, s), n) for d, s, n in sq.execute("SELECT domainId, schemaId, size FROM NVTX_PAYLOAD_ENUMS"))

    def field(domain: int, schema: int, name: str) -> Field | None:
        typ, offset, _ = entries.get((domain, schema), {}).get(name, (None, 0, None))
        if typ in _SIZES:
            size, signed = _SIZES[typ], typ in _SIGNED
        elif (domain, typ) in enum_sizes:  # (an enum of the domain: its values are unsigned)
            size, signed = enum_sizes[(domain, typ)], False
        else:
            return None
        if not (isinstance(offset, int) and isinstance(size, int)):  # (read: the schemas hold what nsys writes)
            raise ValueError(f"{name}: offset {offset!r}, size {size!r}")
        return Field(offset, size, signed)

    out: dict[int, tuple[str, Layout | None]] = {}
    for domain, (kind, schema) in named.items():
        top = entries.get((domain, schema), {})
        frames = top.get("Frames")
        frame_schema = frames[0] if frames else None
        if frames and not isinstance(frames[1], int):
            raise ValueError(f"Frames: offset {frames[1]!r}")
        parts = (field(domain, schema, "Thread state"), field(domain, schema, "Frames count"),
                 *(field(domain, frame_schema, n) for n in ("Function", "File", "Line")))
        size = sizes.get((domain, frame_schema))
        if (frames is None or None in parts or not size
                or any(f.offset < 0 or f.offset + f.size > size for f in parts[2:])):
            out[domain] = (kind, None)
            continue
        state, count, function, file, line = parts
        out[domain] = (kind, Layout(schema, state, enums.get((domain, entries[(domain, schema)]["Thread state"][0]), {}),
                                    count, frames[1], size, function, file, line))
    return out


def _ints(buf: np.ndarray, pos: np.ndarray, f: Field) -> np.ndarray:
    """The little-endian integers of field ``f`` at each position of ``pos`` in ``buf`` (as int64):
    ``buf`` seen as integers of the field's size from each of its first ``size`` bytes, each
    position read from the view it falls on a whole integer of."""
    at = pos + f.offset
    dtype = np.dtype(f"<{'i' if f.signed else 'u'}{f.size}")
    out = np.empty(len(at), np.int64)
    phase = at % f.size
    for k in range(f.size):
        which = np.flatnonzero(phase == k)
        if len(which):
            view = buf[k:k + (len(buf) - k) // f.size * f.size].view(dtype)
            out[which] = view[(at[which] - k) // f.size]
    return out


def _decode(blobs: pa.ChunkedArray, layout: Layout, first_id: int):
    """Decode the payloads: per blob, whether it fits the layout, its thread state and its
    stack's id (from ``first_id``; -1 for a stack of no frames), and the distinct stacks' frames
    (a dict of arrays: stack_id, depth, function id, file id, line)."""
    arr = blobs.combine_chunks().cast(pa.large_binary())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + n + 1]
    buf = np.frombuffer(arr.buffers()[2], np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    start, length = offsets[:-1], np.diff(offsets)
    ok = length >= _HEADER + _ENTRY
    u64 = Field(0, 8, False)
    safe = np.where(ok, start, 0)
    if len(buf) < _HEADER + _ENTRY:  # (every blob too short: nothing to read)
        buf = np.zeros(_HEADER + _ENTRY, np.uint8)
    schema = _ints(buf, safe + _HEADER, u64)
    size = _ints(buf, safe + _HEADER + 8, u64)
    at = _ints(buf, safe + _HEADER + 16, u64)
    payload_fits = (at >= 0) & (size >= 0) & (at <= length) & (size <= length - at)
    ok &= (_ints(buf, safe, u64) >= 1) & (schema == layout.schema_id) & payload_fits
    ok &= size >= max(layout.state.offset + layout.state.size, layout.count.offset + layout.count.size)
    payload = np.where(ok, start + at, 0)
    state = np.where(ok, _ints(buf, payload, layout.state), 0)
    count = np.where(ok, _ints(buf, payload, layout.count), 0)
    ok &= (count >= 0) & (layout.frames + count * layout.frame_size <= np.where(ok, size, 0))
    count = np.where(ok, count, 0)
    # every frame's place: its blob's frames, then its index among them
    total = int(count.sum())
    first = np.cumsum(count) - count
    depth = np.arange(total) - np.repeat(first, count)
    pos = np.repeat(payload, count) + layout.frames + depth * layout.frame_size
    triples = np.empty((total, 3), np.int64)
    for i, f in enumerate((layout.function, layout.file, layout.line)):
        triples[:, i] = _ints(buf, pos, f)
    # each blob's frames are one run of rows of ``triples``: as bytes, one binary value per blob,
    # whose distinct values (Arrow's hash encoding: exact) are the stacks
    ends = np.append(first, total).astype(np.int64) * triples.itemsize * 3
    by_blob = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(ends), pa.py_buffer(triples)])
    encoded = pc.dictionary_encode(by_blob)
    inverse = np.asarray(encoded.indices, np.int64)
    distinct = encoded.dictionary
    d_offsets = np.frombuffer(distinct.buffers()[1], np.int64)[distinct.offset:distinct.offset + len(distinct) + 1]
    d_frames = np.diff(d_offsets) // (triples.itemsize * 3)
    each = (np.frombuffer(distinct.buffers()[2], np.int64, count=int(d_offsets[-1]) // 8, offset=int(d_offsets[0]))
            .reshape(-1, 3)) if len(distinct) else np.zeros((0, 3), np.int64)
    stack = np.where(ok & (count > 0), first_id + inverse, -1)
    found = {"stack_id": np.repeat(first_id + np.arange(len(distinct)), d_frames),
             "depth": np.arange(len(each)) - np.repeat(np.cumsum(d_frames) - d_frames, d_frames),
             "function": each[:, 0], "file": each[:, 1], "line": each[:, 2]}
    return ok, state, stack, found if len(each) else {}


def _named_frames(frames: list[dict[str, np.ndarray]], strings: pa.Table | None) -> pa.Table:
    """The frames with their function and file names (StringIds; nsys writes a name's < > &
    as HTML entities, ``&lt;module&gt;``: unescaped)."""
    cols = {c: np.concatenate([f[c] for f in frames]) if frames else np.zeros(0, np.int64)
            for c in ("stack_id", "depth", "function", "file", "line")}
    ids = np.unique(np.concatenate([cols["function"], cols["file"]]))
    names: dict[int, str | None] = {}
    if strings is not None and len(ids):
        where = pc.index_in(strings.column("id"), value_set=pa.array(ids, pa.int64()))
        found = strings.filter(pc.is_valid(where))
        names = {i: html.unescape(v) if v is not None else None
                 for i, v in zip(found.column("id").to_pylist(), found.column("value").to_pylist(), strict=True)}
    return pa.table({
        "stack_id": from_numpy(cols["stack_id"]), "depth": from_numpy(cols["depth"].astype(np.int32)),
        "function": pa.array([names.get(int(i)) for i in cols["function"]], pa.string()),
        "file": pa.array([names.get(int(i)) for i in cols["file"]], pa.string()),
        "line": from_numpy(cols["line"].astype(np.int32)),
    })
