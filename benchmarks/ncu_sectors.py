"""Which instructions of a kernel move wasted L2 sectors, and where its warps wait, from an ncu report.

    python benchmarks/ncu_sectors.py REPORT[.xz] [--kernel NAME] [--launch ID] [--top 12]

Reads a report taken with the SourceCounters section (``ncu_report``, the pip package of Nsight
Compute's Python report interface; an ``.xz`` report is decompressed to a temporary file) and prints,
for one launch of the kernel (default: its first), the global accesses by source line and opcode:
PCs, warp instructions, theoretical L2 sectors, the ideal count and the excess (the per-PC figures
behind ncu's UncoalescedGlobalAccess rule), largest excess first; then, over every launch of the
kernel in the report, the share of PC samples per source line with its three largest stall reasons
(where the report has WarpStateStats' sampling). Used for docs/performance.md's "helper coalesce"
entry on ``tests/data/hstu_capture_ncu``.
"""

from __future__ import annotations

import argparse
import collections
import lzma
import shutil
import tempfile
from pathlib import Path


def _per_pc(action, name: str) -> dict:
    m = action[name]
    ids = m.correlation_ids()
    return {ids.as_uint64(i): m.as_double(i) for i in range(m.num_instances())}


def _line(action, pc) -> int:
    try:
        return action.source_info(pc).line()
    except Exception:  # noqa: BLE001  (no source correlation for this PC)
        return -1


def _opcode(sass: str) -> str:
    return next((w for w in sass.split() if not w.startswith("@")), "?")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("report")
    p.add_argument("--kernel", default="_hstu_cached_sk_kernel")
    p.add_argument("--launch", type=int, default=None, help="the action index (ncu's ID) of the launch")
    p.add_argument("--top", type=int, default=12)
    a = p.parse_args()
    import ncu_report

    with tempfile.TemporaryDirectory() as tmp:
        path = a.report
        if path.endswith(".xz"):
            path = str(Path(tmp) / "r.ncu-rep")
            with lzma.open(a.report) as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        rng = ncu_report.load_report(path).range_by_idx(0)
        launches = [i for i in range(rng.num_actions()) if rng.action_by_idx(i).name() == a.kernel]
        if not launches:
            raise SystemExit(f"no launch of {a.kernel} in {a.report}")
        act = rng.action_by_idx(a.launch if a.launch is not None else launches[0])
        sec = _per_pc(act, "memory_l2_theoretical_sectors_global")
        ideal = _per_pc(act, "memory_l2_theoretical_sectors_global_ideal")
        excess = _per_pc(act, "derived__memory_l2_theoretical_sectors_global_excessive")
        inst = _per_pc(act, "inst_executed")
        rows = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
        for pc, s in sec.items():
            r = rows[(_line(act, pc), _opcode(act.sass_by_pc(pc)))]
            r[0] += 1
            r[1] += inst.get(pc, 0)
            r[2] += s
            r[3] += ideal.get(pc, 0)
            r[4] += excess.get(pc, 0)
        tot, exc = sum(sec.values()), sum(excess.values())
        print(f"{a.kernel}, launch {a.launch if a.launch is not None else launches[0]} of {launches}: "
              f"{act['gpu__time_duration.sum'].as_double() / 1e3:.1f} us, {tot:,.0f} theoretical L2 sectors "
              f"(global), {exc:,.0f} excess ({100 * exc / max(tot, 1):.2f} %)")
        print(f"{'line':>6} {'opcode':28} {'PCs':>4} {'warp inst':>10} {'sectors':>11} {'ideal':>11} {'excess':>10}")
        for (line, op), r in sorted(rows.items(), key=lambda kv: (-kv[1][4], -kv[1][2]))[: a.top]:
            print(f"{line:>6} {op:28} {r[0]:>4} {r[1]:>10,.0f} {r[2]:>11,.0f} {r[3]:>11,.0f} {r[4]:>10,.0f}")
        samples = collections.Counter()
        stalls = collections.defaultdict(collections.Counter)
        for i in launches:
            act = rng.action_by_idx(i)
            if "smsp__pcsamp_sample_count" not in act.metric_names():
                break
            names = [n for n in act.metric_names()
                     if n.startswith("smsp__pcsamp_warps_issue_stalled_") and not n.endswith("_not_issued")]
            per = {n: _per_pc(act, n) for n in names}
            for pc, c in _per_pc(act, "smsp__pcsamp_sample_count").items():
                line = _line(act, pc)
                samples[line] += c
                for n in names:
                    stalls[line][n.removeprefix("smsp__pcsamp_warps_issue_stalled_")] += per[n].get(pc, 0)
        total = sum(samples.values())
        if total:
            print(f"\nPC samples over {len(launches)} launches: {total:,.0f}")
            for line, c in samples.most_common(a.top):
                top = ", ".join(f"{k} {v / c:.0%}" for k, v in stalls[line].most_common(3))
                print(f"{line:>6} {100 * c / total:5.1f} %  {top}")


if __name__ == "__main__":
    main()
