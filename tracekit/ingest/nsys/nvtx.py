"""NVTX ranges: names, nesting, paths, and the GPU work each range projects to.

The rules, as ``nsys stats`` applies them (``nvtx_sum``, ``nvtx_gpu_proj_sum``):

- **Name.** ``domain:text``: the domain's name from the NvtxDomainCreate event of that
  domain in that process (the default domain has none, hence ``:step``), the text inline
  or registered (``textId`` -> StringIds).
- **Nesting.** A range's parent is the shortest range on the same thread that contains
  it (starts no later, ends no earlier; ``containers.tightest``): among push/pop ranges,
  which nest, the last one opened; ranges that end on another thread, and marks, take
  no part. Range ids follow (start, thread, -end), so every range comes after the
  ranges that enclose it. A range's path is its ancestors' labels and its own, from the
  root down, '/'-separated.
- **Attribution.** A GPU op (kernel, memcpy, memset) belongs to a range when the API call
  that launched it (same correlation id, same process: ``launches``) lies inside the
  range on the range's thread. For push/pop ranges that is the innermost push/pop range
  open when the call starts (``Nest.innermost``: open from its start up to, not
  including, its end) and every push/pop range enclosing it (``Nest.roll_up``); for
  start/end ranges an inequality join of the call's interval with the range's.
- **Projection.** Per range: first op start, last op end, GPU ops counted by distinct
  correlation id (one per launching call), children's ops included (not subtracted).

Everything by range id in NumPy over Arrow columns (no join of every range with its
ancestors or with every launch); the nesting's sequential pass in C where ``_nest`` is
built (``tracekit/ingest/_nest.c``), else NumPy's pointer jumping.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ...errors import InputError
from .. import containers
from ..arrow import from_numpy, strings, to_numpy
from .arrays import NO_END, NO_START, int_values
from .columns import (
    NVTX_COLUMNS,
    NVTX_DOMAIN,
    NVTX_MARK,
    NVTX_PUSHPOP,
    NVTX_STARTEND,
    NVTXT_PUSHPOP,
    NVTXT_STARTEND,
)

try:  # the nesting of NVTX ranges in C (optional, like the page decoder)
    from tracekit.ingest import _nest as _nest_native
except ImportError:  # not built: NumPy does it
    _nest_native = None


def index_type(n: int) -> type:
    """The integer type of range ids and positions among ``n`` ranges: 32 bits where they
    fit (millions of ranges: each array by range is half the size)."""
    return np.int32 if n < 2**31 else np.int64


#: columns of the named ranges that are often NULL in every row (``with_nulls``)
NULLABLE = ("end_global_tid", "category", "color")


def with_nulls(relation: str, columns: list[str]) -> str:
    """SELECT of ``relation`` (named ranges with ``columns``) with the ``NULLABLE``
    columns it lacks as NULL BIGINTs."""
    missing = "".join(f", NULL::BIGINT AS {c}" for c in NULLABLE if c not in columns)
    return f"SELECT *{missing} FROM {relation}"


class Projection(NamedTuple):
    """GPU projection per range: the ranges that have GPU ops, their first op start and
    last op end (``NO_START`` / ``NO_END`` where no op had one) and their number of ops."""

    range_id: np.ndarray
    first_start: np.ndarray
    last_end: np.ndarray
    ops: np.ndarray

    @classmethod
    def empty(cls) -> Projection:
        return cls(*(np.zeros(0, np.int64),) * 4)


class OpenRanges(NamedTuple):
    """The push/pop ranges by thread and start (range order), each with the position of
    its enclosing push/pop range among them (-1: none): what ``Nest.innermost`` searches."""

    tid: np.ndarray
    start: np.ndarray
    end: np.ndarray
    range_id: np.ndarray
    up: np.ndarray


def enclosing(end: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For ranges in (thread, start, -end) order, the position of each one's innermost
    enclosing range: the nearest earlier range of its thread that ends no earlier
    (-1: none). ``first`` marks each thread's first range.

    Every earlier range of the thread starts no later, so it encloses the range exactly
    when it ends no earlier; the nearest such one opened last. Found by pointer jumping,
    all ranges at once: a candidate that ends too early is replaced by its own
    candidate, since every range between the two ends earlier still (the invariant
    that keeps the answer exact). Converged ranges stop; rounds grow with the nesting
    depth and the logarithm of the run of siblings, not with the number of ranges."""
    n = len(end)
    idx = np.int32 if n < 2**31 else np.int64
    cand = np.arange(-1, n - 1, dtype=idx)
    cand[first] = -1
    at = np.flatnonzero(cand >= 0).astype(idx, copy=False)  # unresolved ranges,
    e, c = end[at], cand[at]  # their ends and candidates, kept compact
    while at.size:
        short = end[c] < e
        at, e, c = at[short], e[short], cand[c[short]]
        cand[at] = c
        more = c >= 0
        if not more.all():
            at, e, c = at[more], e[more], c[more]
    return cand.astype(np.int64)


def enclosing_depth(end: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``enclosing`` and the depth along it (``containers.chain_length``): in one sequential pass
    where the compiled helper is built (_nest.c), else by NumPy's pointer jumping. Both as
    ``index_type``."""
    idx = index_type(len(end))
    if _nest_native is None:
        parent = enclosing(end, first)
        return parent.astype(idx), containers.chain_length(parent).astype(idx)
    parent, depth = np.empty(len(end), np.int64), np.empty(len(end), np.int64)
    _nest_native.enclosing(np.ascontiguousarray(end, np.int64), np.ascontiguousarray(first, np.bool_).view(np.uint8),
                           parent, depth)
    return parent.astype(idx), depth.astype(idx)


class Nest:
    """Parent, depth, path and push/pop parent of every range that nests (same-thread
    ranges), by range id; and the push/pop chains for the GPU projection.

    Built from the ranges in (thread, range id) order: ``parent``/``depth`` the innermost
    enclosing range of any style (positions, -1: none) and the depth along that chain,
    ``pp_parent``/``pp_depth`` the same among the push/pop ranges only. Ids, positions
    and depths are kept as ``index_type`` (32 bits below 2**31 ranges)."""

    def __init__(self, range_id, parent, pp_parent, depth, pp_depth, *, tid, start, end, is_pp, label):
        idx = index_type(len(range_id))
        range_id, parent, pp_parent, depth, pp_depth = (
            a.astype(idx, copy=False) for a in (range_id, parent, pp_parent, depth, pp_depth))
        if is_pp.all():  # (the usual case: no copies, a range's position is its position among them)
            self.open = OpenRanges(tid, start, end, range_id, pp_parent)
        else:
            at = np.flatnonzero(is_pp)
            pos = np.full(len(range_id), -1, idx)
            pos[at] = np.arange(len(at), dtype=idx)
            up = pp_parent[at]
            self.open = OpenRanges(tid[at], start[at], end[at], range_id[at],
                                   np.where(up >= 0, pos[np.maximum(up, 0)], -1))
            del at, pos, up

        # every nesting range's depth, parent (range id, -1: none) and path: what
        # nvtx_ranges stores
        self.range_id, self.depth = range_id, depth
        self.named: pa.Table | None = None  # the named ranges (``prepare`` sets them)
        self.parent = np.where(parent >= 0, range_id[np.maximum(parent, 0)], -1)
        self.path = paths(parent, depth, label)
        # push/pop ranges with their enclosing push/pop range, deepest first
        pp = np.flatnonzero(pp_parent >= 0)
        level = pp_depth[pp]
        top = int(level.max(initial=0))
        level = (top - level).astype(np.int16) if top < 2**15 else -level  # (16 bits: a radix sort)
        pp = pp[np.argsort(level, kind="stable")]
        del level
        self.pp_child, self.pp_up, self.pp_level = range_id[pp], range_id[pp_parent[pp]], pp_depth[pp]

    def launches_matched(self) -> None:
        """Free what only ``innermost`` needs (the push/pop ranges' threads, starts, ends
        and chains: hundreds of MB with millions of ranges) once every launch has its range."""
        self.open = None

    @property
    def tree(self) -> pa.Table:
        """range_id, depth, parent_id and path of every nesting range, as a table."""
        return pa.table({"range_id": from_numpy(self.range_id), "depth": from_numpy(self.depth),
                         "parent_id": from_numpy(self.parent, mask=self.parent < 0), "path": self.path})

    def innermost(self, tid: pa.ChunkedArray, start: pa.ChunkedArray) -> np.ndarray | None:
        """The id of the innermost push/pop range open on thread ``tid`` at time ``start``
        (the launching calls of the GPU ops; -1 outside every range and where either is
        NULL); None without push/pop ranges.

        Push/pop ranges nest, so the ranges open at a time are the last range of the
        thread to start by then and its enclosing ranges: one binary search per call,
        then up the chain past the ranges that ended."""
        r = self.open
        if len(tid) == 0 or len(r.start) == 0:
            return None
        g, gok = int_values(tid)
        t, tok = int_values(start)
        tids, first = np.unique(r.tid, return_index=True)
        # one search for all threads: each thread's range starts shifted into a time band
        # of its own (call times clamped to the starts' span, which keeps every answer)
        t0, t1 = int(r.start.min()), int(r.start.max())
        width = t1 - t0 + 2
        if width * len(tids) >= 2**62:
            raise InputError(f"NVTX ranges spanning {width} ns on {len(tids)} threads: too long to attribute")
        r_band = np.repeat(np.arange(len(tids), dtype=np.int64), np.diff(np.append(first, len(r.start))))
        keys = r_band * width + (r.start - t0)
        q = np.clip(t, t0 - 1, t1)
        q -= t0
        if len(tids) == 1:
            band, hit = None, g == tids[0]
        else:
            band = np.searchsorted(tids, g)
            np.minimum(band, len(tids) - 1, out=band)
            hit = tids[band] == g
            q += band * width
        for ok in (gok, tok):
            if ok is not None:
                hit &= ok
        i = np.searchsorted(keys, q, side="right")
        i -= 1
        hit &= i >= 0
        if band is not None:
            hit &= r_band[np.maximum(i, 0)] == band
        i[~hit] = -1
        # up the chain while the candidate ended at or before the call's start
        todo = np.flatnonzero(hit)
        while todo.size:
            c = i[todo]
            ended = r.end[c] <= t[todo]
            todo = todo[ended]
            i[todo] = r.up[c[ended]]
            todo = todo[i[todo] >= 0]
        return np.where(i >= 0, r.range_id[np.maximum(i, 0)], -1).astype(np.int64)

    def roll_up(self, own: Projection) -> Projection:
        """Per-range GPU projection from the innermost ranges' own figures (``own``),
        summed up the push/pop chains: each range takes its descendants' ops."""
        s, e, n, has = self.rolled_up(own, 0)
        ids = np.flatnonzero(has)
        return Projection(ids, s[ids], e[ids], n[ids])

    def rolled_up(self, own: Projection, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``roll_up`` as arrays by range id, at least ``size`` long: first op start
        (``NO_START``: none), last op end (``NO_END``), ops, and whether the range has any."""
        size = max(size, int(max(own.range_id.max(initial=-1), self.pp_up.max(initial=-1),
                                 self.pp_child.max(initial=-1))) + 1)
        s = np.full(size, NO_START)
        e = np.full(size, NO_END)
        n = np.zeros(size, np.int64)
        s[own.range_id], e[own.range_id], n[own.range_id] = own.first_start, own.last_end, own.ops
        has = np.zeros(size, bool)
        has[own.range_id] = True
        # one level at a time, deepest first: a level's totals are complete before they
        # are passed up
        bounds = np.flatnonzero(np.r_[True, self.pp_level[1:] != self.pp_level[:-1], True])
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            child, up = self.pp_child[lo:hi], self.pp_up[lo:hi]
            keep = has[child]
            child, up = child[keep], up[keep]
            np.minimum.at(s, up, s[child])
            np.maximum.at(e, up, e[child])
            np.add.at(n, up, n[child])
            has[up] = True
        return s, e, n, has


def repeated(pos: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Whether each (pos, key) pair repeats an earlier one (all but the first of equal pairs)."""
    order = np.lexsort((key, pos))
    out = np.zeros(len(pos), bool)
    out[order[1:]] = (pos[order[1:]] == pos[order[:-1]]) & (key[order[1:]] == key[order[:-1]])
    return out


def paths(parent: np.ndarray, depth: np.ndarray, label: pa.ChunkedArray) -> pa.DictionaryArray:
    """Each node's labels from its root down, '/'-separated ('hstu.request/hstu.layer0/
    hstu_attention'), as a dictionary array. ``parent``: positions (-1: a root),
    ``depth``: ancestors. Paths are interned level by level, a node's path being its
    parent's path and its own label: only the distinct ones become strings (a run
    repeats a few paths millions of times)."""
    import pyarrow.compute as pc

    n = len(parent)
    idx = index_type(n)
    if n == 0:
        return pa.DictionaryArray.from_arrays(from_numpy(np.empty(0, idx)), strings([]))
    enc = pc.dictionary_encode(label).combine_chunks()
    lab = to_numpy(enc.indices)
    words = enc.dictionary.to_pylist()
    del enc
    width = max(len(words), 1)
    path = np.empty(n, idx)  # (a path id is at most a node's position)
    texts: list[str] = []
    levels = depth.astype(np.int16) if depth.max() < 2**15 else depth  # 16 bits: a radix sort
    order = np.argsort(levels, kind="stable")
    cuts = np.flatnonzero(np.r_[True, np.diff(levels[order]) != 0, True])
    above, count = 0, 0  # the level above: its paths are ids above .. above + count - 1
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        at = order[lo:hi]
        root = depth[at[0]] == 0
        key = lab[at].astype(np.int64) if root else (path[parent[at]].astype(np.int64) - above) * width + lab[at]
        uniq, index = distinct(key, width if root else count * width)
        first = len(texts)
        if root:
            texts += [words[k] for k in uniq.tolist()]
        else:
            texts += [f"{texts[above + k // width]}/{words[k % width]}" for k in uniq.tolist()]
        path[at] = first + index
        above, count = first, len(uniq)
    return pa.DictionaryArray.from_arrays(from_numpy(path), strings(texts))


def distinct(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``key`` (in 0 .. size - 1), sorted, and each key's index
    among them: a pass over a table of ``size`` flags where that is small."""
    if size > 4 * len(key) + (1 << 20):
        uniq, index = np.unique(key, return_inverse=True)
        return uniq, index.reshape(-1)
    seen = np.zeros(size, bool)
    seen[key] = True
    return np.flatnonzero(seen), (np.cumsum(seen) - 1)[key]


def nest(con) -> Nest:
    """Nesting of the same-thread ranges (``_nsys_rng``: range_id, global_tid, start_ns,
    end_ns, style, label): each range's tightest container of any style
    (containers.tightest: nsys's rule where start/end ranges cross push/pop ones), its
    depth (ancestors along that chain), and its innermost enclosing push/pop range
    (push/pop ranges only; this chain carries the GPU projection and the launches'
    ranges).

    Range ids follow (start, thread, -end), so by thread and id the ranges come in
    (start, -end) order, every range after those that enclose it."""
    r = con.sql("SELECT range_id, global_tid, start_ns, end_ns, style = 'PushPop' AS pp, label FROM _nsys_rng "
                "ORDER BY global_tid, range_id").to_arrow_table()
    range_id, tid, start, end = (to_numpy(r.column(c)).astype(np.int64, copy=False)
                                 for c in ("range_id", "global_tid", "start_ns", "end_ns"))
    is_pp = to_numpy(r.column("pp")).astype(bool, copy=False)
    ranges = dict(tid=tid, start=start, end=end, is_pp=is_pp, label=r.column("label"))
    del r  # (the other columns' Arrow copies)

    def firsts(t):
        return np.r_[True, t[1:] != t[:-1]] if len(t) else np.zeros(0, bool)

    if is_pp.all():  # push/pop ranges only (the usual case): they nest, the last opened is the tightest
        parent, depth = enclosing_depth(end, firsts(tid))
        return Nest(range_id, parent, parent, depth, depth, **ranges)
    pp = np.flatnonzero(is_pp)
    pp_in, pp_in_depth = enclosing_depth(end[pp], firsts(tid[pp]))  # push/pop ranges among themselves
    pp_parent = np.full(len(range_id), -1, np.int64)
    pp_parent[pp] = np.where(pp_in >= 0, pp[np.maximum(pp_in, 0)], -1)
    pp_depth = np.zeros(len(range_id), np.int64)
    pp_depth[pp] = pp_in_depth
    parent, depth = containers.tightest(start, end, firsts(tid), is_pp, pp_parent)
    return Nest(range_id, parent, pp_parent, depth, pp_depth, **ranges)


def prepare(con, raw: dict[str, pa.Table]) -> Nest:
    """NVTX ranges named (``_nsys_named``: a view of an Arrow table also kept as ``Nest.named``)
    and nested (``Nest``; the view ``_nsys_rng`` of the ranges that nest, and the temp
    table ``_nsys_bands`` for the start/end projection) from the raw NVTX_EVENTS rows,
    taken out of ``raw`` (``raw["nvtx"]``; absent: the export has none) so that they are
    freed once named."""
    nvtx = raw.pop("nvtx", None)
    # the events as DuckDB reads them: the raw Arrow rows with their row numbers, and the
    # columns this export lacks as NULLs (not copied into a temp table, whose memory a
    # transaction would hold to its end)
    n = 0 if nvtx is None else nvtx.num_rows
    have = set() if nvtx is None else set(nvtx.column_names)
    ev = pa.table({**{c: nvtx.column(c) if c in have else pa.nulls(n, pa.string() if c == "text" else pa.int64())
                      for c in NVTX_COLUMNS}, "_row": from_numpy(np.arange(n, dtype=np.int64))})
    if not pa.types.is_string(ev.schema.field("text").type):
        # SQLite types a column by its values: text NULL in every row (every name a
        # registered string, through textId) reads as integers; as SQLite prints values
        ev = ev.set_column(ev.schema.get_field_index("text"), "text", ev.column("text").cast(pa.string()))
    con.register("_nsys_ev", ev)
    # columns an export leaves NULL throughout (often all three): not held, read as NULLs
    raw_names = {"end_global_tid": "endGlobalTid", "category": "category", "color": "color"}
    kept = [c for c in NULLABLE if ev.column(raw_names[c]).null_count < n]
    # (an Arrow table: the nvtx_ranges rows are this table with the nesting and
    # projection columns added; Arrow memory is freed when dropped, a temp table's only
    # at the transaction's end)
    named = con.sql(f"""
        WITH domains AS (
            SELECT e.domainId AS id, e.globalTid & 1099494850560 AS proc,
                   arg_min(coalesce(s.value, e.text), e.start) AS name
            FROM _nsys_ev e LEFT JOIN _nsys_strings s ON s.id = e.textId
            WHERE e.eventType = {NVTX_DOMAIN}
            GROUP BY 1, 2
        ), maxts AS (SELECT greatest(max(start), max("end")) AS m FROM _nsys_ev
        ), ord AS (
            -- range ids in (start, thread, -end) order; numbered over the row ids alone,
            -- as a window that carries every column (text among them) costs 4x more
            SELECT _row AS r,
                   row_number() OVER (ORDER BY start, globalTid, coalesce("end", (SELECT m FROM maxts)) DESC) - 1
                       AS range_id
            FROM _nsys_ev
            WHERE eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTXT_PUSHPOP}, {NVTXT_STARTEND}, {NVTX_MARK})
        )
        SELECT o.range_id,
               e.start AS start_ns,
               coalesce(e."end", (SELECT m FROM maxts)) AS end_ns,
               e."end" IS NOT NULL AS ended,
               CAST(CASE WHEN e.eventType IN ({NVTX_PUSHPOP}, {NVTXT_PUSHPOP}) THEN 'PushPop'
                         WHEN e.eventType IN ({NVTX_STARTEND}, {NVTXT_STARTEND}) THEN 'StartEnd'
                         ELSE 'Mark' END AS ENUM('PushPop', 'StartEnd', 'Mark')) AS style,
               e.domainId AS domain_id,
               coalesce(d.name, '') AS domain,
               coalesce(s.value, e.text, '') AS text,  -- (name: domain || ':' || text, made where written)
               e.globalTid AS global_tid{"".join(f", e.{raw_names[c]} AS {c}" for c in kept)}
        FROM _nsys_ev e
        JOIN ord o ON o.r = e._row
        LEFT JOIN _nsys_strings s ON s.id = e.textId
        LEFT JOIN domains d ON d.id = e.domainId AND d.proc = (e.globalTid & 1099494850560)
    """).to_arrow_table()
    con.unregister("_nsys_ev")
    del ev, nvtx
    con.register("_nsys_named_rows", named)
    con.execute(f"CREATE TEMP VIEW _nsys_named AS {with_nulls('_nsys_named_rows', named.column_names)}")
    # the ranges that nest (nest() computes their nesting in NumPy); the bands put each
    # thread's ranges in a time band of their own for the start/end projection join
    con.execute("""
        CREATE TEMP TABLE _nsys_bands AS
        SELECT global_tid, dense_rank() OVER (ORDER BY global_tid) AS band,
               min(min(start_ns)) OVER () AS t0
        FROM _nsys_named WHERE style <> 'Mark' AND end_global_tid IS NULL GROUP BY global_tid
    """)
    # (a view: a temp table's memory would be held to the transaction's end)
    con.execute("""
        CREATE TEMP VIEW _nsys_rng AS
        SELECT range_id, global_tid, start_ns, end_ns, style,
               CASE WHEN domain = '' THEN text ELSE domain || ':' || text END AS label
        FROM _nsys_named
        WHERE style <> 'Mark' AND end_global_tid IS NULL
    """)
    out = nest(con)
    out.named = named
    return out


def range_totals(ranges: list[np.ndarray], ops: list[pa.Table], calls: list[np.ndarray], n_calls: int) -> Projection:
    """Per innermost push/pop range of the GPU ops' launching calls: the first op start,
    the last op end and the number of launching calls (nsys counts a range's GPU ops
    by distinct correlation id: one per launching call, as a call has one id and every
    op of a call has the call's range). ``ranges``: each op's range id (-1: none, as
    ``launches.add_launches`` gives it); ``calls``: each op's row in the API table."""
    rng, start, end, call = [], [], [], []
    for r, tbl, c in zip(ranges, ops, calls, strict=True):
        keep = np.flatnonzero(r >= 0)
        rng.append(r[keep])
        call.append(c[keep])
        for col, out, fill in (("start", start, NO_START), ("end", end, NO_END)):
            v, vok = int_values(tbl.column(col))
            out.append(v[keep] if vok is None else np.where(vok[keep], v[keep], fill))
    rng, start, end, call = (np.concatenate(a) if a else np.zeros(0, np.int64) for a in (rng, start, end, call))
    if len(rng) == 0:
        return Projection.empty()
    size = int(rng.max()) + 1
    s = np.full(size, NO_START)
    e = np.full(size, NO_END)
    np.minimum.at(s, rng, start)
    np.maximum.at(e, rng, end)
    owner = np.full(n_calls, -1, np.int64)  # one op of each call counts it
    at = np.arange(len(call))
    owner[call] = at
    n = np.bincount(rng, weights=owner[call] == at, minlength=size).astype(np.int64)
    ids = np.flatnonzero(np.bincount(rng, minlength=size))
    return Projection(ids, s[ids], e[ids], n[ids])


class RangeColumns:
    """The nesting and projection columns of ``nvtx_ranges`` as arrays by range id:
    depth, parent, path (-1 where the range does not nest: marks, ranges ended on another
    thread), the GPU projection (first op start ``NO_START`` / last op end ``NO_END`` where
    none) and the children with GPU work (nsys "Num Child": direct children in the
    nesting that have a projection). ``take`` gives them for a batch of ranges, so that
    the rows are written a batch at a time rather than as one table."""

    NAMES = ("depth", "parent_id", "path", "children", "proj_start_ns", "proj_end_ns", "gpu_ops")

    def __init__(self, nest: Nest, pushpop: tuple[np.ndarray, ...], startend: Projection, pp_parent: np.ndarray):
        """Consumes ``nest`` (its arrays are freed as they are copied by range id) and
        ``pushpop`` (``Nest.rolled_up``, whose arrays become the projection's); keeps
        ``pp_parent``, each push/pop range's push/pop parent by range id."""
        s, e, n, has = pushpop
        size = len(s)
        idx = index_type(size)
        s[startend.range_id], e[startend.range_id], n[startend.range_id] = (
            startend.first_start, startend.last_end, startend.ops)
        has[startend.range_id] = True
        self.proj_start, self.proj_end, self.ops = s, e, n.astype(np.int32)
        del n
        self.parent = np.full(size, -1, idx)
        self.parent[nest.range_id] = nest.parent
        nest.parent = None
        kids = self.parent[has & (self.parent >= 0)]
        del has
        self.children = np.bincount(kids, minlength=size).astype(np.int32)
        del kids
        self.depth = np.full(size, -1, np.int32)
        self.depth[nest.range_id] = nest.depth
        nest.depth = None
        self.path = np.full(size, -1, idx)
        self.path[nest.range_id] = to_numpy(nest.path.indices)
        self.words = nest.path.dictionary
        nest.path = nest.range_id = None
        self.pp_parent = pp_parent

    def release(self) -> None:
        """Free the columns once written (hundreds of MB with millions of ranges): only the
        push/pop parents stay, for ``pushpop_containers``."""
        self.proj_start = self.proj_end = self.ops = self.parent = self.children = self.depth = None
        self.path = self.words = None

    def pushpop_containers(self, range_id: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, range id, repeat) triples: for each of ``range_id`` (innermost push/pop
        ranges, -1: none), itself and every push/pop range around it, the push/pop ranges
        that contain a call made inside it on its thread (push/pop ranges nest); ``repeat``
        where a range nearer the call has the same ``key`` (by range id: a name)."""
        at = np.flatnonzero(range_id >= 0)
        cur = range_id[at]
        pos, ids, repeats, below = [], [], [], []
        while at.size:
            k = key[cur]
            repeat = np.zeros(len(at), bool)
            for b in below:
                repeat |= b == k
            pos.append(at)
            ids.append(cur)
            repeats.append(repeat)
            below.append(k)
            up = self.pp_parent[cur]
            keep = np.flatnonzero(up >= 0)
            at, cur = at[keep], up[keep]
            below = [b[keep] for b in below]
        if not pos:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
        return (np.concatenate(pos).astype(np.int64, copy=False), np.concatenate(ids).astype(np.int64, copy=False),
                np.concatenate(repeats))

    def paths(self, range_id: np.ndarray) -> pa.DictionaryArray:
        """The paths of the ranges ``range_id`` (NULL where a range does not nest)."""
        path = self.path[range_id]
        return pa.DictionaryArray.from_arrays(from_numpy(path, mask=path == -1), self.words)

    def take(self, range_id: np.ndarray) -> dict[str, pa.Array]:
        """The columns (``NAMES``) of the ranges ``range_id``, NULL where there is no value."""
        def masked(values, fill):
            return from_numpy(values, mask=values == fill)

        return {"depth": masked(self.depth[range_id], -1), "parent_id": masked(self.parent[range_id].astype(np.int64), -1),
                "path": self.paths(range_id),
                "children": from_numpy(self.children[range_id]),
                "proj_start_ns": masked(self.proj_start[range_id], NO_START),
                "proj_end_ns": masked(self.proj_end[range_id], NO_END), "gpu_ops": from_numpy(self.ops[range_id])}


def startend_around(calls: str) -> str:
    """SQL of the start/end ranges around each call of ``calls`` (a SELECT with the call's
    thread ``gtid``, start ``s`` and end ``e``) on its thread: one row per (range, call),
    ``range_id`` and the call's columns. Each thread's ranges and calls are keyed into a
    time band of their own (``_nsys_bands``), so the containment is one inequality join;
    nothing is keyed where there is no start/end range."""
    return f"""
        WITH startend AS (
            SELECT r.range_id,
                   b.band::HUGEINT * 18446744073709551616 + (r.start_ns - b.t0)::HUGEINT AS _k0,
                   b.band::HUGEINT * 18446744073709551616 + (r.end_ns - b.t0)::HUGEINT AS _k1
            FROM _nsys_rng r JOIN _nsys_bands b USING (global_tid) WHERE r.style = 'StartEnd'
        ), keyed AS (
            SELECT c.*, b.band::HUGEINT * 18446744073709551616 + (c.s - b.t0)::HUGEINT AS _k0,
                   b.band::HUGEINT * 18446744073709551616 + (c.e - b.t0)::HUGEINT AS _k1
            FROM ({calls}) c JOIN _nsys_bands b ON b.global_tid = c.gtid
            WHERE EXISTS (SELECT 1 FROM startend)
        )
        SELECT r.range_id, l.* EXCLUDE (_k0, _k1) FROM startend r JOIN keyed l ON r._k0 <= l._k0 AND r._k1 >= l._k1
    """


def project(con, ops_sql: str, nest: Nest, own: Projection, size: int) -> RangeColumns:
    """The nesting and GPU projection columns of the ranges (ids below ``size``). Push/pop
    ranges take ``own`` (the innermost ranges' totals, ``range_totals``) rolled up their
    chains; start/end ranges the ops of ``ops_sql`` (correlation_id, start_ns, end_ns,
    launch_global_tid, api_start_ns, api_end_ns: the written GPU ops) whose launching
    call lies inside them on their thread. Consumes ``nest``: its arrays are freed as
    they are used (millions of ranges: hundreds of MB each)."""
    pushpop = nest.rolled_up(own, size)
    pp_parent = np.full(max(size, 1), -1, index_type(size))  # each push/pop range's push/pop parent
    pp_parent[nest.pp_child] = nest.pp_up
    nest.pp_child = nest.pp_up = nest.pp_level = nest.open = None
    se = con.sql(f"""
        SELECT range_id, min(start_ns) AS proj_start_ns, max(end_ns) AS proj_end_ns,
               count(DISTINCT correlation_id) AS gpu_ops
        FROM ({startend_around(f"SELECT correlation_id, start_ns, end_ns, launch_global_tid AS gtid, "
                               f"api_start_ns AS s, api_end_ns AS e FROM ({ops_sql})")})
        GROUP BY range_id
    """).to_arrow_table()
    startend = Projection(*(to_numpy(se.column(c), fill=none).astype(np.int64, copy=False) for c, none in (
        ("range_id", -1), ("proj_start_ns", NO_START), ("proj_end_ns", NO_END), ("gpu_ops", 0))))
    return RangeColumns(nest, pushpop, startend, pp_parent)
