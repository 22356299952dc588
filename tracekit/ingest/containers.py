"""The tightest container of each NVTX range: nsys's nesting rule where ranges cross.

nsys (``nvtx_gpu_proj_trace``, and the levels and child counts of ``nvtx_gpu_proj_sum``)
makes a range's parent the range of the same thread that contains it (starts no later,
ends no earlier) with the least slack, ``(start - parent start) + (parent end - end)``:
the shortest container. Push/pop ranges nest, so there the shortest container is also
the last one opened; a start/end range may cross them (start inside one push/pop range,
end inside a later one), and then the two rules part: a push/pop range inside both an
earlier start/end range and a later, longer push/pop range belongs to the start/end one.

``tightest`` takes ranges in (thread, start, -end) order, where every container of a
range comes before it, and the innermost push/pop container of each push/pop range
(the chain nsys._enclosing finds). A range's tightest container is the shorter of two:
its innermost push/pop container (for a start/end range: up the push/pop chain from the
last push/pop range opened before it) and its shortest start/end container, the least
over the earlier start/end ranges of its thread that end no earlier. That second one is
a minimum under two conditions (earlier; end no earlier): a Fenwick tree over the
start/end ranges' ends in C (_nest.c), or in NumPy the Fenwick blocks of the start/end
ranges before each range, one level at a time. Only the start/end ranges are sorted or
stored: an export with a few of them among millions of push/pop ranges costs little
more than one with none. Of containers equally short the last opened wins, as with
push/pop ranges (nsys leaves that tie to SQLite's scan order).
"""

from __future__ import annotations

import numpy as np

try:  # the same pass in C (optional, like the rest of _nest.c)
    from tracekit.ingest import _nest as _nest_native
except ImportError:
    _nest_native = None


def tightest(start: np.ndarray, end: np.ndarray, first: np.ndarray, is_pp: np.ndarray,
             pp_parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent (position; -1: none) and depth of every range. ``first`` marks each
    thread's first range, ``pp_parent`` is each push/pop range's innermost push/pop
    container (position; -1: none, and for start/end ranges)."""
    n = len(end)
    start, end = np.ascontiguousarray(start, np.int64), np.ascontiguousarray(end, np.int64)
    first, is_pp = np.ascontiguousarray(first, np.bool_), np.ascontiguousarray(is_pp, np.bool_)
    pp_parent = np.ascontiguousarray(pp_parent, np.int64)
    se = np.flatnonzero(~is_pp)
    # the start/end ranges ranked by (thread, end)
    se_thread = np.searchsorted(np.flatnonzero(first), se, side="right") - 1
    by_rank = np.lexsort((end[se], se_thread))
    se_rank = np.empty(len(se), np.int64)
    se_rank[by_rank] = np.arange(len(se))
    if _nest_native is not None:
        parent, depth = np.empty(n, np.int64), np.empty(n, np.int64)
        _nest_native.tightest(start, end, first.view(np.uint8), is_pp.view(np.uint8), pp_parent, se_rank,
                              np.ascontiguousarray(se_thread[by_rank], np.int64), end[se][by_rank], parent, depth)
        return parent, depth
    thread = np.cumsum(first) - 1
    pp_up = np.where(is_pp, pp_parent, _pp_container(end, thread, is_pp, pp_parent, se))
    # each range's lowest rank with (its thread, its end) or after: the start/end ranges
    # of its thread that end no earlier, or of a later thread (those come later in range
    # order, never before it)
    ends = np.unique(end[se])
    width = len(ends) + 1
    se_key = (se_thread * width + np.searchsorted(ends, end[se]))[by_rank]
    lower = np.searchsorted(se_key, thread * width + np.searchsorted(ends, end))
    dur = end - start
    se_up = _shortest_before(se, se_rank, lower, dur)
    take = (se_up >= 0) & ((pp_up < 0) | (dur[se_up] < dur[pp_up]) | ((dur[se_up] == dur[pp_up]) & (se_up > pp_up)))
    parent = np.where(take, se_up, pp_up)
    return parent, chain_length(parent)


def _pp_container(end, thread, is_pp, pp_parent, se) -> np.ndarray:
    """For the start/end ranges ``se``: the innermost push/pop range that contains each
    (-1: none), by rounds up the push/pop chain from the last push/pop range opened
    before it on its thread; every container lies on that chain (push/pop ranges nest)."""
    n = len(end)
    out = np.full(n, -1, np.int64)
    last_pp = np.maximum.accumulate(np.where(is_pp, np.arange(n), -1))
    c = np.where(se > 0, last_pp[np.maximum(se - 1, 0)], -1)
    at, c = se, np.where((c >= 0) & (thread[np.maximum(c, 0)] == thread[se]), c, -1)
    while at.size:
        keep = c >= 0
        at, c = at[keep], c[keep]
        ok = end[c] >= end[at]
        out[at[ok]] = c[ok]
        at, c = at[~ok], pp_parent[c[~ok]]
    return out


def _shortest_before(se: np.ndarray, se_rank: np.ndarray, lower: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """For every range i: of the start/end ranges before it (positions ``se``, ranks
    ``se_rank``) whose rank is at least ``lower[i]``, the shortest (of equal ones the
    last); -1: none. The ones before i are the first ``before[i]`` of ``se``, the union
    of the Fenwick blocks of
    ``before[i]`` (one per set bit k, ending where its bits below k+1 are cleared); per
    level, each block sorted by rank with its suffix minima, one binary search per range."""
    n, q = len(dur), len(se)
    out = np.full(n, -1, np.int64)
    if q == 0:
        return out
    # preference among the start/end ranges: shortest first, then the last
    pref = np.lexsort((-se, dur[se]))
    key = np.empty(q, np.int64)
    key[pref] = np.arange(q)
    is_se = np.zeros(n, np.int64)
    is_se[se] = 1
    before = np.cumsum(is_se) - is_se  # start/end ranges before each range
    best = np.full(n, q, np.int64)
    idx = np.arange(q, dtype=np.int64)
    for k in range(max(q, 1).bit_length()):
        block = idx >> k
        order = np.argsort(block * q + se_rank, kind="stable")
        b = block[order]
        sorted_key = b * q + se_rank[order]
        # minimum of each block's suffix: offset by block so that no minimum leaks into
        # the block before (blocks descend in the reversed array)
        suffix = np.minimum.accumulate((key[order] + b * q)[::-1])[::-1] - b * q
        i = np.flatnonzero((before >> k) & 1)
        qb = (before[i] >> k) - 1
        at = np.searchsorted(sorted_key, qb * q + lower[i])
        inside = at < q
        inside[inside] = sorted_key[at[inside]] < (qb[inside] + 1) * q
        i, at = i[inside], at[inside]
        best[i] = np.minimum(best[i], suffix[at])
    found = best < q
    out[found] = se[pref[best[found]]]
    return out


def chain_length(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each node of a forest given by ``parent`` (-1: root), by
    pointer doubling: log2(depth) rounds."""
    depth = (parent >= 0).astype(np.int64)
    up = parent.copy()
    active = np.flatnonzero(up >= 0)
    while active.size:
        u = up[active]
        depth[active] += depth[u]
        up[active] = up[u]
        active = active[up[active] >= 0]
    return depth
