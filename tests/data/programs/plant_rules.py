"""Plants into a copy of a real export the rows nsys's expert rules treat specially and
Nsight Systems 2025.3.1 did not write there; NVIDIA's `nsys analyze` on the result gives
the goldens (tests/data/nsys_rules_planted/stats: nsys_streams, one process on one GPU;
nsys_rules_planted_2gpu: nsys_jax, one process on two GPUs).

    python3 plant_rules.py SRC/export.sqlite.xz OUTDIR    # OUTDIR/export.sqlite.xz, PLANT.md

* PROFILER_OVERHEAD rows under the names gpu_gaps and gpu_time_util count as GPU busy time
  ('CUDA profiling overhead', 'CUDA profiling data flush overhead'), each inside one of the
  process's GPU gaps of over 1 ms on the device of its first GPU op (nsys counts an overhead
  on every device of its process whose span holds it); and, to be left out, one under another name ('CUPTI
  Buffer flush') in a third gap, one of another process, one before the process's first
  GPU op.
* srcDeviceId = dstDeviceId = 0 on three cudaMemcpy copies (device to host): a copy within
  one device, which cuda_memcpy_sync leaves out.

Stdlib only: runs on the GPU machine beside nsys.
"""

from __future__ import annotations

import lzma
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

#: each planted overhead: (name, which gap (0: the longest), its start and end in ns after the
#: gap's start, its pid: None = the process's)
OVERHEADS = [("CUDA profiling overhead", 0, 1_000_000, 2_000_000, None),
             ("CUDA profiling data flush overhead", 1, 100_000, 200_000, None),
             ("CUPTI Buffer flush", 2, 100_000, 200_000, None),
             ("CUDA profiling overhead", 2, 300_000, 400_000, 99999)]


def _gaps(con: sqlite3.Connection) -> tuple[int, int, list[tuple[int, int]]]:
    """The process of the first GPU op, that op's start and the process's gaps over 1 ms on
    that op's device, longest first."""
    tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE name IN ('CUPTI_ACTIVITY_KIND_KERNEL', "
                                        "'CUPTI_ACTIVITY_KIND_MEMCPY', 'CUPTI_ACTIVITY_KIND_MEMSET')")]
    union = " UNION ALL ".join(f'SELECT start, "end", globalPid, deviceId FROM {t}' for t in tables)
    ops = con.execute(f"""
        WITH o AS ({union}), f AS (SELECT globalPid, deviceId FROM o ORDER BY start LIMIT 1)
        SELECT start, "end", globalPid FROM o JOIN f USING (globalPid, deviceId) ORDER BY 1""").fetchall()
    gaps, busy_to = [], ops[0][1]
    for start, end, _ in ops[1:]:
        if start - busy_to > 1_000_000:
            gaps.append((busy_to, start))
        busy_to = max(busy_to, end)
    return ops[0][2], ops[0][0], sorted(gaps, key=lambda g: g[0] - g[1])


def main(src: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "export.sqlite"
        with lzma.open(src) as fin, open(db, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        con = sqlite3.connect(db)
        gpid, first, gaps = _gaps(con)
        tid = con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid >> 24 = ? >> 24 LIMIT 1",
                          [gpid]).fetchone()[0]
        lines = [f"# {out.name}", "", f"The real export of {src.parent.name}, with rows planted by "
                 "`programs/plant_rules.py` (its docstring says why); `stats/` holds `nsys analyze` on the result.", ""]
        next_id = con.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
        for name, gap, lo, hi, pid in OVERHEADS:
            row = con.execute("SELECT id FROM StringIds WHERE value = ?", [name]).fetchone()
            if row is None:
                con.execute("INSERT INTO StringIds VALUES (?, ?)", [next_id, name])
                row, next_id = (next_id,), next_id + 1
            g_tid = tid if pid is None else (tid & ~(0xFFFFFF << 24)) | (pid << 24)
            start = gaps[gap][0] + lo
            con.execute("INSERT INTO PROFILER_OVERHEAD (start, \"end\", globalTid, nameId, returnValue) VALUES (?, ?, ?, ?, 0)",
                        [start, gaps[gap][0] + hi, g_tid, row[0]])
            lines.append(f"- PROFILER_OVERHEAD '{name}' {start}..{gaps[gap][0] + hi} ns, pid "
                         f"{(g_tid >> 24) & 0xFFFFFF}: in the gap {gaps[gap][0]}..{gaps[gap][1]}")
        con.execute("INSERT INTO PROFILER_OVERHEAD (start, \"end\", globalTid, nameId, returnValue) VALUES (?, ?, ?, "
                    "(SELECT id FROM StringIds WHERE value = 'CUDA profiling overhead'), 0)", [first - 300, first - 100, tid])
        lines.append(f"- PROFILER_OVERHEAD 'CUDA profiling overhead' {first - 300}..{first - 100} ns: before the "
                     f"first GPU op ({first})")
        copies = [r[0] for r in con.execute("""
            SELECT m.rowid FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
            ON r.correlationId = m.correlationId JOIN StringIds s ON s.id = r.nameId
            WHERE s.value LIKE 'cudaMemcpy%' AND s.value NOT LIKE '%Async%' AND m.copyKind = 2
            ORDER BY m.start LIMIT 3""")]
        if copies:  # (a program of the driver API has no cudaMemcpy)
            con.executemany("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET srcDeviceId = 0, dstDeviceId = 0 WHERE rowid = ?",
                            [[c] for c in copies])
            starts = [r[0] for r in con.execute(
                f"SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE rowid IN ({','.join('?' * len(copies))})", copies)]
            lines.append(f"- srcDeviceId = dstDeviceId = 0 on the cudaMemcpy copies (device to host) starting at {starts}")
        con.commit()
        con.execute("VACUUM")
        con.close()
        with open(db, "rb") as fin, lzma.open(out / "export.sqlite.xz", "wb", preset=9) as fout:
            shutil.copyfileobj(fin, fout)
    (out / "PLANT.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
