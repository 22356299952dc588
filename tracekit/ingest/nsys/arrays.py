"""NumPy over the Arrow columns of an export: integer columns as arrays, the markers of
a missing first start / last end, and NumPy's memory advice while an ingest runs."""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pyarrow as pa

from ..arrow import to_numpy, valid_flags

#: a missing first op start / last op end in the NumPy arrays of the NVTX projection
#: (the extremes, so that min and max pass over them; NULL once written)
NO_START, NO_END = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def int_values(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | None]:
    """An integer column as int64 NumPy values (NULLs as 0; no copy when there are none
    and it is one chunk) and its validity (None: no NULLs)."""
    values = to_numpy(col, fill=0).astype(np.int64, copy=False)
    return values, (valid_flags(col) if col.null_count else None)


_PAGES_LOCK = threading.Lock()
_pages_users = [0, None]  # ingests in progress, NumPy's advice before the first of them


@contextlib.contextmanager
def small_pages():
    """NumPy without its huge-page advice while any ingest runs in this process
    (restored after the last one). NumPy advises transparent huge pages for every array
    of 4 MB or more; where the kernel's THP defrag setting is ``madvise`` (a common
    default), each such fault may compact memory first, and an ingest allocates a few
    GB of fresh arrays (the benchmark ingest: 3.77 s instead of 4.40 s on the 2-core
    development VM; docs/performance.md)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # NumPy 1.x
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            _set_madvise_hugepage = None
    if _set_madvise_hugepage is None:
        yield
        return
    with _PAGES_LOCK:
        if _pages_users[0] == 0:
            _pages_users[1] = _set_madvise_hugepage(False)
        _pages_users[0] += 1
    try:
        yield
    finally:
        with _PAGES_LOCK:
            _pages_users[0] -= 1
            if _pages_users[0] == 0:
                _set_madvise_hugepage(_pages_users[1])
