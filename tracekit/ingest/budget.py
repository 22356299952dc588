"""``TRACEKIT_MEMORY_LIMIT`` as a budget of the whole ingest process, not only of DuckDB.

An ingest holds NumPy and Arrow arrays beside DuckDB's buffers (12 M NVTX ranges: GBs of
each). DuckDB keeps to its own ``memory_limit`` (it spills and evicts past it), so the
loader gives it, phase by phase, what the rest of the process leaves of the budget: the
budget less the process's resident memory that DuckDB does not hold. A phase that only
writes rows needs little of DuckDB (its inserts go to disk a row group at a time) and is
given at most what DuckDB holds plus a margin: under a high limit DuckDB would keep what
it wrote cached.
"""

from __future__ import annotations

import contextlib
import re
import threading

#: What DuckDB may use beyond what it holds already while rows are written (when the
#: budget leaves it more): the 6 M-row benchmark's activity inserts took 1.35-1.43 GB peak
#: RSS without this cap, 1.20-1.21 GB with it, in the same time (docs/performance.md).
WRITING_MEMORY_MARGIN = 500 * 10**6
#: The least DuckDB is given, whatever the arrays hold (a budget smaller than the process
#: itself is refused by the estimate, before DuckDB fails on its first table)
DUCKDB_FLOOR = 200 * 10**6


_UNITS = {"": 1, "b": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50}


def setting_bytes(text: str) -> int | None:
    """A memory limit as DuckDB reads it ('4GB', '800 MB', '3.7 GiB': its
    ``current_setting`` form) in bytes; None for a form not read."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


#: The process may go this share over its budget where the arrays alone leave DuckDB
#: less than its floor (12 M NVTX ranges under 4GB: 4.3 GB); an ingest estimated to need
#: more than the budget and this share is refused before it starts
OVER_BUDGET = 0.125

# What an nsys ingest needs at its peak (resident memory of the process), calibrated on
# benchmarks/ingest_bench.py's exports (docs/performance.md, eighth session) and on a
# kernel-only export of 2.15 M kernels (twenty-ninth session: a kernel row weighs three API
# call rows): the process with its libraries, plus per row of the export's kernels, of its
# other activity tables and of NVTX_EVENTS (the named ranges, their nesting arrays and
# projection, their Arrow copies), and per kernel the overlap step of a run with NCCL
# kernels (tracekit/ingest/nsys/overlap.py).
NEED_BASE = 250 * 10**6
NEED_PER_KERNEL_ROW = 310
NEED_PER_ACTIVITY_ROW = 110
NEED_PER_NVTX_ROW = 250
NEED_PER_NCCL_RUN_KERNEL = 190


def nsys_need(activity_rows: int, nvtx_rows: int, kernel_rows: int = 0, nccl: bool = False) -> int:
    """Estimated peak resident memory, bytes, of ingesting an nsys export with these rows
    (``activity_rows``: those of its activity tables other than the kernels'; ``nccl``: it
    names NCCL, whose kernels the ingest then overlaps with the others)."""
    per_kernel = NEED_PER_KERNEL_ROW + (NEED_PER_NCCL_RUN_KERNEL if nccl else 0)
    return NEED_BASE + NEED_PER_ACTIVITY_ROW * activity_rows + per_kernel * kernel_rows + NEED_PER_NVTX_ROW * nvtx_rows


def duckdb_setting(memory_limit: str) -> str:
    """DuckDB's limit for a budget ``memory_limit``: the budget, but not below ``DUCKDB_FLOOR``
    (a budget smaller than the process itself is refused by the estimate, not by DuckDB
    failing to create a table)."""
    n = setting_bytes(memory_limit)
    return f"{DUCKDB_FLOOR // 10**6}MB" if n is not None and n < DUCKDB_FLOOR else memory_limit


def shortage(source: str, need: int, memory_limit: str) -> str:
    """The one line for an ingest that does not fit its memory limit: how much it needs,
    and the setting that gives it that."""
    gb = -(-need // 10**8) / 10  # up to the next 0.1 GB
    return (f"{source}: needs about {gb:.1f} GB of memory, more than its memory limit "
            f"TRACEKIT_MEMORY_LIMIT={memory_limit}; set TRACEKIT_MEMORY_LIMIT={gb:.1f}GB or more "
            f"(nothing was written)")


def fits(need: int | None, memory_limit: str) -> bool:
    """Whether an ingest estimated to need ``need`` bytes (None: not estimated) may run
    under ``memory_limit``."""
    budget = setting_bytes(memory_limit)
    return need is None or budget is None or need <= budget * (1 + OVER_BUDGET)


def rss() -> int:
    """The process's resident memory, bytes."""
    import psutil

    return psutil.Process().memory_info().rss


_SHARED_LOCK = threading.Lock()
_shared = [0]  # ingests under way that write through one DuckDB instance at once
_shared_set: list[int | None] = [None]  # that instance's limit as they last set it, MB


@contextlib.contextmanager
def shared():
    """Inside: several ingests write through one DuckDB instance at once (tracekit.parallel).
    Its limit is then the process budget less the rest of the process, set by each
    ingest's phases in turn, without a phase's writing cap (``WRITING_MEMORY_MARGIN``):
    one ingest's writing phase must not squeeze another's join."""
    with _SHARED_LOCK:
        if _shared[0] == 0:
            _shared_set[0] = None
        _shared[0] += 1
    try:
        yield
    finally:
        with _SHARED_LOCK:
            _shared[0] -= 1


class MemoryBudget:
    """The process budget of an ingest on connection ``con``: DuckDB's limit set by
    ``share`` at each phase, and set back to the configured ``memory_limit`` (the budget,
    as the user gave it) by ``restore``."""

    def __init__(self, con, memory_limit: str, need: int | None = None):
        self.con, self.setting = con, memory_limit
        # (DuckDB shows its limit to 0.1 GiB: the setting as given where it reads it)
        self.budget = setting_bytes(memory_limit) or setting_bytes(
            con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])  # None: left as configured
        #: the ingest's arrays (``need``, its estimate, beyond the process's own) may take
        #: more than ``WRITING_MEMORY_MARGIN``; else what it writes is less than that margin
        #: too, and the writing cap and the allocator's flushing cannot lower its peak
        self.large = need is None or need - NEED_BASE > WRITING_MEMORY_MARGIN
        self._set: list[int | None] = [None]  # DuckDB's limit as this budget last set it, MB
        self.ever_set = False

    def duckdb_bytes(self) -> int:
        """What DuckDB's buffer manager holds now."""
        return int(self.con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()[0][0] or 0)

    def share(self, margin: int | None = None) -> None:
        """DuckDB's limit: the budget less the rest of the process's memory (at least
        ``DUCKDB_FLOOR``), and with ``margin`` at most what DuckDB
        holds plus it. Set lower than what DuckDB holds, it evicts as it needs room
        (written rows cost nothing to evict; temporary ones go to its spill files)."""
        if self.budget is None:
            return
        held = self.duckdb_bytes()
        target = max(self.budget - max(rss() - held, 0), DUCKDB_FLOOR)
        if margin is not None and not _shared[0] and self.large:
            target = min(target, held + margin)
        mb = target // 10**6
        # A limit within 1 % of the one set last is not set again (a SET costs a millisecond
        # or two, several per small export). Where ingests share the instance, each computes
        # the same target (the process's memory and the instance's) and they share what was
        # set last.
        with _SHARED_LOCK:
            last = _shared_set if _shared[0] else self._set
            if last[0] is not None and abs(mb - last[0]) * 10**6 <= self.budget // 100:
                return
            last[0] = mb
            self.ever_set = True
        self.con.execute(f"SET memory_limit = '{mb}MB'")

    def restore(self) -> None:
        if not self.ever_set:
            return  # never set by this ingest: DuckDB's limit is the configured one, or another's to set back
        with _SHARED_LOCK:
            self._set[0] = _shared_set[0] = None
        # (after a failure the store sets it back: a statement here would fail in the aborted
        # transaction; after success its error is raised, or the COMMIT would drop the run)
        self.con.execute(f"SET memory_limit = '{duckdb_setting(self.setting)}'")

    @contextlib.contextmanager
    def writing(self):
        """Inside: DuckDB's share while rows are written (``WRITING_MEMORY_MARGIN``);
        the share without margin after. After a failure that share is tried quietly (an
        aborted transaction refuses it, and the store sets the limit back); after success its
        error is raised, or the COMMIT would drop the run."""
        self.share(WRITING_MEMORY_MARGIN)
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.share()
            raise
        self.share()
