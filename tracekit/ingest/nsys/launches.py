"""A GPU op's launching CUDA API call, and the idle time before each GPU op.

A GPU op (kernel, copy, memset, graph execution) was launched by the runtime API call
with its correlation id in its process; ``add_launches`` carries that call's thread,
times, name and innermost NVTX range onto the op's raw rows (``_tk_api_*`` columns),
which is how the NVTX projection reaches GPU work. ``idle_gaps`` gives each op the
idle time before it on its stream and on its device. NumPy over the Arrow rows, before
anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ..arrow import from_numpy
from .arrays import int_values
from .columns import GAP_INPUTS, GAP_TABLES

if TYPE_CHECKING:
    from .nvtx import Nest

#: what makes a stream: the process's (globalPid) stream of a context on a device (each
#: read as 0 where a table lacks it); a device is shared by every process
_GAP_SCOPE = ("deviceId", "globalPid", "contextId", "streamId")


def idle_gaps(raw: dict[str, pa.Table]) -> dict[str, list[pa.Array]]:
    """The idle time before each GPU op on its stream and on its device (columns
    ``_tk_stream_gap`` and ``_tk_device_gap`` of the raw op tables; NULL where the op
    does not start an idle gap), so that gpu-utilization is a plain aggregation.

    In time order, an op ends an idle gap when it starts after every earlier op of its
    scope has ended; the gap runs from that latest end to its start. Ops of all three
    tables share the scopes. One time sort for all ops (inputs come nearly sorted), a
    stable sort by scope only when there is more than one, a running max per scope."""
    tables = [t for t in GAP_TABLES if t in raw and set(GAP_INPUTS) <= set(raw[t].column_names)]
    if sum(raw[t].num_rows for t in tables) == 0:
        return {t: [pa.nulls(0, pa.int64())] * 2 for t in tables}
    import pyarrow.compute as pc

    def values(t, c):  # NULL (or a column the table lacks) as 0
        if c not in raw[t].column_names:
            return np.zeros(raw[t].num_rows, np.int64)
        return int_values(raw[t].column(c))[0]

    def column(c):  # all ops' values (a copy only where there are several tables)
        parts = [values(t, c) for t in tables if raw[t].num_rows]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def one_value(c):  # every op has the same value, as column() reads it (then no key array is made)
        seen = set()
        for t in (t for t in tables if raw[t].num_rows):
            col = raw[t].column(c) if c in raw[t].column_names else None
            if col is None or col.null_count:
                seen.add(0)
            if col is not None and col.null_count < len(col):
                mm = pc.min_max(col)
                seen.update((mm["min"].as_py(), mm["max"].as_py()))
        return len(seen) == 1

    start, end = column("start"), column("end")
    by_time = np.argsort(start, kind="stable")

    def gaps_in(order, key):
        # ``order``: every op, scope by scope, in time order within its scope. Few large
        # arrays, updated in place (each new one costs its first touch of memory).
        s, latest = start[order], end[order]
        firsts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key is not None else np.array([0])
        for lo, hi in zip(firsts, np.r_[firsts[1:], len(s)], strict=True):
            np.maximum.accumulate(latest[lo:hi], out=latest[lo:hi])
        s[1:] -= latest[:-1]
        s[firsts] = 0  # the first op of a scope follows no idle time
        out = np.empty_like(s)
        out[order] = s
        return out

    def scoped(key):  # stable: time order kept within each scope
        order = by_time[np.argsort(key[by_time], kind="stable")]
        return gaps_in(order, key[order])

    # a stream: (device, process, context, stream); only the columns that vary make the key
    varying = [c for c in _GAP_SCOPE if not one_value(c)]
    if not varying:  # one scope: both gaps in time order
        gaps = [gaps_in(by_time, None)] * 2
    else:
        gaps = [scoped(scope_key([column(c) for c in varying])),
                scoped(column("deviceId")) if "deviceId" in varying else gaps_in(by_time, None)]
    out, at = {}, 0
    for t in tables:
        n = raw[t].num_rows
        out[t] = [from_numpy(g[at:at + n], mask=g[at:at + n] <= 0) for g in gaps]
        at += n
    return out


def scope_key(cols: list[np.ndarray]) -> np.ndarray:
    """One int64 per row that is equal where every column is: the columns' offsets from
    their minimum packed side by side (process ids, contexts, streams and devices are
    small numbers), or the rows' rank among the distinct tuples where they do not fit."""
    if len(cols) == 1:
        return cols[0]
    lows = [int(c.min()) for c in cols]
    bits = [max(int(c.max()) - lo, 0).bit_length() for c, lo in zip(cols, lows, strict=True)]
    if sum(bits) > 63:
        return np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    key = np.zeros(len(cols[0]), np.int64)
    for c, lo, b in zip(cols, lows, bits, strict=True):
        key <<= b
        key |= c - lo
    return key



class LaunchIndex:
    """The CUDA API calls by (process, correlation id): the key that ties a GPU op to the
    call that launched it (the process: the ``globalPid`` bits of the call's ``globalTid``).

    Correlation ids are small counters: with one process they index a lookup table
    directly; otherwise (or where ids are sparse or repeat) the keys are sorted once and
    each op found by binary search. A repeated key resolves to its first call either way."""

    def __init__(self, api: pa.Table):
        corr, ok = int_values(api.column("correlationId"))
        tid, tok = int_values(api.column("globalTid"))
        if tok is not None:  # a call without a thread matches nothing, as in SQL
            ok = tok if ok is None else ok & tok
        self.rows = np.flatnonzero(ok) if ok is not None else None
        if self.rows is not None:
            corr, tid = corr[self.rows], tid[self.rows]
        self.empty = len(corr) == 0
        if self.empty:
            return
        # the process: the globalPid bits of globalTid (clearing the low bits keeps the
        # order, so one process is min == max, found without a pass over every call)
        mask = -16777216
        one = int(tid.min()) & mask == int(tid.max()) & mask
        proc = None if one else tid & mask
        self.procs = np.array([int(tid[0]) & mask]) if one else np.unique(proc)
        self.lo, hi = int(corr.min()), int(corr.max())
        self.width = hi - self.lo + 1
        if self.width * len(self.procs) >= 2**62:
            raise InputError(f"correlation ids from {self.lo} to {hi} in {len(self.procs)} processes: too wide to match")
        key = corr - self.lo
        if len(self.procs) > 1:
            key += np.searchsorted(self.procs, proc) * self.width
        n = len(key)
        span = self.width * len(self.procs)
        self.table = None
        if span <= 4 * n + (1 << 20):  # dense: a direct lookup table
            table = np.full(span, -1, np.int32 if n < 2**31 else np.int64)
            table[key] = np.arange(n, dtype=table.dtype)
            if np.count_nonzero(table >= 0) == n:  # n slots filled: no repeated key
                self.table = table
        if self.table is None:
            self.order = np.argsort(key, kind="stable")
            self.sorted = key[self.order]

    def find(self, ops: pa.Table) -> np.ndarray:
        """Row of each op's launching call in the API table; -1 where there is none."""
        corr, ok = int_values(ops.column("correlationId"))
        proc, pok = int_values(ops.column("globalPid"))
        if self.empty:
            return np.full(len(corr), -1, np.int64)
        valid = (corr >= self.lo) & (corr < self.lo + self.width)
        for v in (ok, pok):
            if v is not None:
                valid &= v
        key = corr - self.lo
        if len(self.procs) == 1:
            valid &= proc == self.procs[0]
        else:
            pi = np.minimum(np.searchsorted(self.procs, proc), len(self.procs) - 1)
            valid &= self.procs[pi] == proc
            key += pi * self.width
        key[~valid] = 0
        if self.table is not None:
            found = self.table[key].astype(np.int64)
            found[~valid] = -1
        else:
            at = np.minimum(np.searchsorted(self.sorted, key), len(self.order) - 1)
            found = np.where(valid & (self.sorted[at] == key), self.order[at], -1)
        if self.rows is not None:  # back to rows of the whole table
            found = np.where(found >= 0, self.rows[np.maximum(found, 0)], -1)
        return found


def launch_rows(api: pa.Table, ops: pa.Table) -> np.ndarray:
    """Row in ``api`` of each op's launching call (-1: none)."""
    return LaunchIndex(api).find(ops)


def add_launches(ops: pa.Table, api: pa.Table, index: LaunchIndex,
                  nest: Nest) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """``ops`` with its launching calls' thread, start, end, name id and innermost NVTX
    range as ``_tk_api_*`` columns (NULL where no call matches): one Arrow take, then
    the range of each launching call (only those: most calls launch nothing). Also
    each op's row in ``api`` and its range id (-1: none)."""
    rows = index.find(ops)
    names = {"globalTid": "_tk_api_tid", "start": "_tk_api_start", "end": "_tk_api_end", "nameId": "_tk_api_name"}
    picked = api.select([c for c in names if c in api.column_names]).take(from_numpy(rows, mask=rows < 0))
    for src, name in names.items():
        ops = ops.append_column(name, picked.column(src) if src in picked.column_names
                                else pa.nulls(ops.num_rows, pa.int64()))
    inner = nest.innermost(picked.column("globalTid"), picked.column("start"))
    if inner is None:
        inner = np.full(ops.num_rows, -1, np.int64)
    ops = ops.append_column("_tk_api_range", from_numpy(inner, mask=inner < 0))
    return ops, rows, inner

