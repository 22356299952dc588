"""Communication against computation on the GPU: how much of each kernel's time its device
also ran NCCL's kernels or compute kernels, for the runs that have NCCL kernels.

A kernel is NCCL's when its short name starts with "nccl" (ncclDevKernel_*, ncclKernel_*),
compute otherwise: the rule of nsys's NCCL recipes. Per process and device, the kernels'
starts and ends cut time into pieces, each with how many kernels of each kind run; a
kernel overlaps the other kind where at least one of it runs, its own kind where at least
two do (itself and another), each piece counted once however many run (the union): what
`nsys recipe nccl_gpu_overlap_trace` sums per kernel. NumPy over the run's kernels once
they are written (a sort of their starts and ends: ~1 s for 2 M kernels, where the same
in SQL window functions took 8 s a query; docs/performance.md); the named queries
nccl-overlap and comm-overlap read the sums.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..arrow import from_numpy

#: a kernel is NCCL's when its short name starts with this (nsys's NCCL recipes' rule)
PREFIX = "nccl"
#: per kernel name and process/device: launches, time, and the time other kernels of each kind ran during them
OVERLAP_SUM = "nccl_overlap_sum"
#: per process/device: the time NCCL kernels, compute kernels, both and any ran (unions)
COMM_SUM = "comm_overlap_sum"


def write(con, run_id: int) -> dict[str, int]:
    """Compute and insert the run's two sums (no rows where it has no NCCL kernel: the
    queries then say so). Returns the rows written per table."""
    run = int(run_id)
    nccl_ids = [i for (i,) in con.execute(
        "SELECT string_id FROM _strings WHERE string_id IN (SELECT DISTINCT short_name_id FROM _kernels "
        f"WHERE run_id = {run}) AND starts_with(value, ?)", [PREFIX]).fetchall()]
    if not nccl_ids:
        return {OVERLAP_SUM: 0, COMM_SUM: 0}
    k = con.sql(f"SELECT global_pid, device_id, start_ns, end_ns, short_name_id FROM _kernels "
                f"WHERE run_id = {run} AND end_ns >= start_ns ORDER BY global_pid, device_id").to_arrow_table()
    per_kernel, per_device = overlaps(k, nccl_ids)
    rows = {}
    for table, tbl, select in (
            (OVERLAP_SUM, per_kernel,
             "SELECT global_pid, device_id, short_name_id, any_value(nccl) AS nccl, count(*) AS instances, "
             "sum(dur_ns)::BIGINT AS total_ns, sum(comm_ns)::BIGINT AS comm_overlap_ns, "
             "sum(compute_ns)::BIGINT AS compute_overlap_ns FROM {t} GROUP BY global_pid, device_id, short_name_id"),
            (COMM_SUM, per_device, "SELECT * FROM {t}")):
        name = f"_tk_{table}"
        con.register(name, tbl)
        try:
            n = con.execute(f"INSERT INTO {table} BY NAME SELECT {run}::INTEGER AS run_id, * "
                            f"FROM ({select.format(t=name)})").fetchall()
        finally:
            con.unregister(name)
        rows[table] = int(n[0][0]) if n else 0
    return rows


def overlaps(k: pa.Table, nccl_ids: list[int]) -> tuple[pa.Table, pa.Table]:
    """For kernels ``k`` (global_pid, device_id, start_ns, end_ns, short_name_id, in process
    and device order; NCCL's: the short names ``nccl_ids``): each kernel's process, device,
    name, duration and the time other NCCL kernels (comm_ns) and other compute kernels
    (compute_ns) of its process and device ran during it; and per process and device the
    NCCL, compute, both, NCCL-alone and any-kernel time. The large arrays go as soon as
    they are used (2 M kernels: ~0.3 GB at the peak)."""
    def ints(col: str) -> np.ndarray:  # (a kernel without a process, device or name: -1, a part or name of its own)
        c = k.column(col)
        return np.asarray((c.fill_null(-1) if c.null_count else c).to_numpy(), dtype=np.int64)

    n = k.num_rows
    pid, dev = ints("global_pid"), ints("device_id")
    first = np.r_[True, (pid[1:] != pid[:-1]) | (dev[1:] != dev[:-1])] if n else np.zeros(0, dtype=bool)
    del pid, dev
    part = np.cumsum(first) - 1  # each (process, device) a part
    parts = int(part[-1]) + 1 if n else 0
    nccl = np.isin(ints("short_name_id"), np.asarray(nccl_ids, dtype=np.int64))
    start, end = ints("start_ns"), ints("end_ns")
    dur = end - start
    # the cuts: each distinct (part, time) where a kernel starts or ends, and what runs from it
    # to the next cut of its part (the counts of the kernels started minus those ended so far;
    # each part ends with nothing running)
    times = np.concatenate([start, end])
    del start, end
    twice = np.concatenate([part, part])
    order = np.lexsort((times, twice))
    times, twice = times[order], twice[order]
    new = np.r_[True, (twice[1:] != twice[:-1]) | (times[1:] != times[:-1])] if len(times) else np.zeros(0, dtype=bool)
    cut, cut_part = times[new], twice[new]
    del times, twice
    m = len(cut)
    at = np.empty(len(order), dtype=np.int32 if m < 2**31 else np.int64)  # each start's and end's cut
    at[order] = np.cumsum(new) - 1
    del order, new
    s, e = at[:n], at[n:]
    n_run = np.cumsum(np.bincount(s[nccl], minlength=m) - np.bincount(e[nccl], minlength=m))
    c_run = np.cumsum(np.bincount(s, minlength=m) - np.bincount(e, minlength=m)) - n_run
    length = np.zeros(m, dtype=np.int64)
    length[:-1] = np.where(cut_part[1:] == cut_part[:-1], cut[1:] - cut[:-1], 0)
    del cut
    # a kernel overlaps its own kind where two of it run (itself and another), the other where
    # one does: the time before its end in which that held, less the time before its start
    comm, compute = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for out, nccl_rule, compute_rule in ((comm, n_run >= 2, n_run >= 1), (compute, c_run >= 1, c_run >= 2)):
        for kind, held in ((nccl, nccl_rule), (~nccl, compute_rule)):
            before = np.cumsum(length * held) - length * held
            out[kind] = before[e[kind]] - before[s[kind]]
            del before
    del at, s, e
    per_kernel = pa.table({"global_pid": k.column("global_pid"), "device_id": k.column("device_id"),
                           "short_name_id": k.column("short_name_id"), "nccl": from_numpy(nccl),
                           "dur_ns": from_numpy(dur), "comm_ns": from_numpy(comm), "compute_ns": from_numpy(compute)})
    # per part, the time in each state: 1 NCCL alone, 2 compute alone, 3 both
    state = (n_run >= 1).astype(np.int64) + 2 * (c_run >= 1)
    time_in = np.bincount(cut_part * 4 + state, weights=length, minlength=4 * parts).reshape(parts, 4)
    time_in = np.rint(time_in).astype(np.int64)  # (sums of ns below 2^53: exact)
    firsts = pa.array(np.flatnonzero(first))
    per_device = pa.table({
        "global_pid": k.column("global_pid").take(firsts), "device_id": k.column("device_id").take(firsts),
        "nccl_kernels": from_numpy(np.bincount(part[nccl], minlength=parts).astype(np.int64)),
        "nccl_ns": from_numpy(time_in[:, 1] + time_in[:, 3]), "compute_ns": from_numpy(time_in[:, 2] + time_in[:, 3]),
        "overlap_ns": from_numpy(time_in[:, 3]), "exposed_nccl_ns": from_numpy(time_in[:, 1]),
        "busy_ns": from_numpy(time_in[:, 1:].sum(axis=1))})
    return per_kernel, per_device
