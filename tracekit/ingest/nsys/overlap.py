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
        f"WHERE run_id = {run}) AND starts_with(value, 'nccl')").fetchall()]
    if not nccl_ids:
        return {OVERLAP_SUM: 0, COMM_SUM: 0}
    k = con.sql(f"SELECT global_pid, device_id, start_ns, end_ns, short_name_id FROM _kernels "
                f"WHERE run_id = {run} AND end_ns >= start_ns ORDER BY global_pid, device_id").to_arrow_table()
    per_kernel, per_device = overlaps(k, nccl_ids)
    rows = {}
    for table, tbl, select in (
            (OVERLAP_SUM, per_kernel,
             "SELECT global_pid, device_id, short_name_id, any_value(nccl) AS nccl, count(*) AS instances, "
             "sum(end_ns - start_ns)::BIGINT AS total_ns, sum(comm_ns)::BIGINT AS comm_overlap_ns, "
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
    and device order; NCCL's: the short names ``nccl_ids``): each kernel with the time other
    NCCL kernels (comm_ns) and other compute kernels (compute_ns) of its process and device
    ran during it; and per process and device the NCCL, compute, both, NCCL-alone and
    any-kernel time."""
    def ints(col: str) -> tuple[np.ndarray, np.ndarray | None]:  # (values, where null: -1 there)
        c = k.column(col)
        if not c.null_count:
            return np.asarray(c.to_numpy(), dtype=np.int64), None
        return np.asarray(c.fill_null(-1).to_numpy(), dtype=np.int64), np.asarray(c.is_null().to_numpy(), dtype=bool)

    (pid, no_pid), (dev, no_dev), (start, _), (end, _), (name, _) = (
        ints(c) for c in ("global_pid", "device_id", "start_ns", "end_ns", "short_name_id"))
    nccl = np.isin(name, np.asarray(nccl_ids, dtype=np.int64))
    # each (process, device) a part (a kernel without one: a part of its own kind, -1)
    first = np.r_[True, (pid[1:] != pid[:-1]) | (dev[1:] != dev[:-1])] if len(pid) else np.zeros(0, dtype=bool)
    part = np.cumsum(first) - 1
    # the cuts: each distinct (part, time) where a kernel starts or ends, and what runs from it
    # to the next cut of its part (the counts of the kernels started minus those ended so far;
    # each part ends with nothing running)
    times, parts = np.concatenate([start, end]), np.concatenate([part, part])
    order = np.lexsort((times, parts))
    t_ordered, p_ordered = times[order], parts[order]
    new = (np.r_[True, (p_ordered[1:] != p_ordered[:-1]) | (t_ordered[1:] != t_ordered[:-1])] if len(times)
           else np.zeros(0, dtype=bool))
    cut, cut_part = t_ordered[new], p_ordered[new]
    m = len(cut)
    at = np.empty(len(times), dtype=np.int64)  # each start's and end's cut
    at[order] = np.cumsum(new) - 1
    s, e = at[:len(start)], at[len(start):]
    n_run = np.cumsum(np.bincount(s[nccl], minlength=m) - np.bincount(e[nccl], minlength=m))
    c_run = np.cumsum(np.bincount(s, minlength=m) - np.bincount(e, minlength=m)) - n_run
    length = np.zeros(m, dtype=np.int64)
    length[:-1] = np.where(cut_part[1:] == cut_part[:-1], cut[1:] - cut[:-1], 0)

    def before(mask: np.ndarray) -> np.ndarray:  # time before each cut in which ``mask`` held
        held = length * mask
        return np.cumsum(held) - held

    n1, n2, c1, c2 = before(n_run >= 1), before(n_run >= 2), before(c_run >= 1), before(c_run >= 2)
    # a kernel overlaps its own kind where two of it run (itself and another), the other where one does
    comm, compute = np.empty(len(s), dtype=np.int64), np.empty(len(s), dtype=np.int64)
    ns, ne, cs, ce = s[nccl], e[nccl], s[~nccl], e[~nccl]
    comm[nccl], compute[nccl] = n2[ne] - n2[ns], c1[ne] - c1[ns]
    comm[~nccl], compute[~nccl] = n1[ce] - n1[cs], c2[ce] - c2[cs]
    per_kernel = pa.table({"global_pid": from_numpy(pid, no_pid), "device_id": from_numpy(dev, no_dev),
                           "short_name_id": k.column("short_name_id"), "nccl": from_numpy(nccl),
                           "start_ns": from_numpy(start), "end_ns": from_numpy(end),
                           "comm_ns": from_numpy(comm), "compute_ns": from_numpy(compute)})
    # per part, the time in each state: 1 NCCL alone, 2 compute alone, 3 both
    parts = int(part[-1]) + 1 if len(part) else 0
    state = (n_run >= 1).astype(np.int64) + 2 * (c_run >= 1)
    time_in = np.bincount(cut_part * 4 + state, weights=length, minlength=4 * parts).reshape(parts, 4)
    time_in = np.rint(time_in).astype(np.int64)  # (sums of ns below 2^53: exact)
    per_device = pa.table({
        "global_pid": from_numpy(pid[first], None if no_pid is None else no_pid[first]),
        "device_id": from_numpy(dev[first], None if no_dev is None else no_dev[first]),
        "nccl_kernels": from_numpy(np.bincount(part[nccl], minlength=parts).astype(np.int64)),
        "nccl_ns": from_numpy(time_in[:, 1] + time_in[:, 3]), "compute_ns": from_numpy(time_in[:, 2] + time_in[:, 3]),
        "overlap_ns": from_numpy(time_in[:, 3]), "exposed_nccl_ns": from_numpy(time_in[:, 1]),
        "busy_ns": from_numpy(time_in[:, 1:].sum(axis=1))})
    return per_kernel, per_device
