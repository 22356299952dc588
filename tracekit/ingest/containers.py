"""The tightest container of each NVTX range: nsys's nesting rule where ranges cross.

nsys (``nvtx_gpu_proj_trace``, and the levels and child counts of ``nvtx_gpu_proj_sum``)
makes a range's parent the range of the same thread that contains it (starts no later,
ends no earlier) with the least slack, ``(start - parent start) + (parent end - end)``:
the shortest container. Push/pop ranges nest, so there the shortest container is also
the last one opened; a start/end range may cross them (start inside one push/pop range,
end inside a later one), and then the two rules part: a push/pop range inside both an
earlier start/end range and a later, longer push/pop range belongs to the start/end one.

``tightest(start, end, first)`` takes ranges in (thread, start, -end) order (``first``
marks each thread's first range) and returns each range's parent (position; -1: none)
and depth. Of containers equally short the last in that order wins (the last opened, as
with push/pop ranges; nsys leaves that tie to SQLite's scan order). Every candidate comes earlier in the order, so a range's
candidates are the earlier ranges of its thread that end no earlier, and the answer is a
minimum over a two-sided condition (earlier, and end no earlier): a Fenwick tree over the
ends in C (_nest.c), O(n log n); NumPy takes the same minimum over the Fenwick blocks of
each prefix, one level of blocks at a time (O(n log² n)).
"""

from __future__ import annotations

import numpy as np

try:  # the same pass in C (optional, like the rest of _nest.c)
    from tracekit.ingest import _nest as _nest_native
except ImportError:
    _nest_native = None


def tightest(start: np.ndarray, end: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent (position, -1: none) and depth of every range; see the module's doc."""
    n = len(end)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    thread = np.cumsum(np.asarray(first, bool)) - 1
    pos = np.arange(n, dtype=np.int64)
    # rank of each range's end among all (thread, end), and the lowest rank of its
    # (thread, end): the candidates of range i are the earlier ranges with a rank at
    # least lower[i] (earlier threads rank lower, later ones come later)
    by_end = np.lexsort((end, thread))
    rank = np.empty(n, np.int64)
    rank[by_end] = pos
    t, e = thread[by_end], end[by_end]
    new = np.r_[True, (t[1:] != t[:-1]) | (e[1:] != e[:-1])]
    lower = np.empty(n, np.int64)
    lower[by_end] = np.maximum.accumulate(np.where(new, pos, 0))
    # the order of preference: shortest first, then the last in range order
    by_key = np.lexsort((-pos, end - start))
    key = np.empty(n, np.int64)
    key[by_key] = pos
    if _nest_native is not None:
        best, depth = np.empty(n, np.int64), np.empty(n, np.int64)
        _nest_native.tightest(rank, lower, key, by_key, best, depth)
        return best, depth
    best = _prefix_minimum(rank, lower, key)
    parent = np.where(best < n, by_key[np.minimum(best, n - 1)], -1)
    return parent, _chain_length(parent)


def _prefix_minimum(rank: np.ndarray, lower: np.ndarray, key: np.ndarray) -> np.ndarray:
    """For each i: the least ``key[p]`` over p < i with ``rank[p] >= lower[i]`` (n: none).
    The prefix 0 .. i-1 is the union of the Fenwick blocks of i (one per set bit k of i,
    ending where i's bits below k+1 are cleared); per level, the blocks sorted by rank with
    the minimum of each block's suffix, and one binary search per range."""
    n = len(rank)
    pos = np.arange(n, dtype=np.int64)
    best = np.full(n, n, np.int64)
    for k in range(max(n - 1, 1).bit_length()):
        block = pos >> k
        order = np.argsort(block * n + rank, kind="stable")
        b = block[order]
        sorted_key = b * n + rank[order]
        # minimum of each block's suffix: offset by block so that no minimum leaks into
        # the block before (blocks descend in the reversed array)
        suffix = np.minimum.accumulate((key[order] + b * n)[::-1])[::-1] - b * n
        q = pos[(block & 1) == 1]
        qb = (q >> k) - 1
        at = np.searchsorted(sorted_key, qb * n + lower[q])
        inside = at < n
        inside[inside] = sorted_key[at[inside]] < (qb[inside] + 1) * n
        q, at = q[inside], at[inside]
        best[q] = np.minimum(best[q], suffix[at])
    return best


def _chain_length(parent: np.ndarray) -> np.ndarray:
    """Ancestors of each node of a forest given by ``parent`` (-1: root), by pointer
    doubling."""
    depth = (parent >= 0).astype(np.int64)
    up = parent.copy()
    active = np.flatnonzero(up >= 0)
    while active.size:
        u = up[active]
        depth[active] += depth[u]
        up[active] = up[u]
        active = active[up[active] >= 0]
    return depth
