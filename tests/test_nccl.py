"""Communication against computation on real NCCL captures: nccl-overlap against NVIDIA's own
`nsys recipe nccl_gpu_overlap_trace`, comm-overlap against the kernels' intervals read with
SQLite and unioned here.

tests/data/nsys_nccl_overlap (its README): DDP over NCCL on two GPUs, with the recipe's CSVs;
tests/data/nsys_nccl: the same program captured earlier with OS runtime calls.
"""

from __future__ import annotations

import csv
import lzma
import shutil
import sqlite3
import subprocess
import sys

import pytest
from conftest import DATA, NSYS_EXPORTS, let_go, spec_datasets

from tracekit.errors import QueryError

RECIPE = DATA / "nsys_nccl_overlap" / "recipes" / "nccl_gpu_overlap_trace"


def test_nccl_overlap_is_nvidias_recipe(nsys_db):
    """Per kernel name: launches, and the time other NCCL kernels and compute kernels ran during
    them in % of its time, as grouped_trace.csv of nccl_gpu_overlap_trace has them (every name,
    NCCL's own and the compute kernels whose time hides the all-reduces)."""
    with open(RECIPE / "grouped_trace.csv", newline="") as fh:
        want = {r["Name"]: (int(r["Count"]), float(r["Communication Overlap"]), float(r["Compute Overlap"]))
                for r in csv.DictReader(fh)}
    got = nsys_db.query("nccl-overlap", run="nccl_overlap", limit=0)
    assert {r["name"]: (r["instances"], r["comm_overlap_pct"], r["compute_overlap_pct"])
            for r in got.iter_rows(named=True)} == want
    assert {r["name"]: r["kind"] for r in got.iter_rows(named=True)} == {
        n: "nccl" if n.startswith("nccl") else "compute" for n in want}
    assert any(r[1] > 0 for r in want.values()) and any(r[2] > 0 for r in want.values())
    # the recipe's per-launch trace sums to the same overlap per name (its percentages of each launch)
    with open(RECIPE / "rank_trace.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == sum(c for c, _, _ in want.values())
    for r in got.iter_rows(named=True):
        mine = [x for x in rows if x["Name"] == r["name"]]
        dur = sum(int(x["End"]) - int(x["Start"]) for x in mine)
        assert dur == r["total_ns"], r["name"]
        for col, pct in (("Communication Overlap", "comm_overlap_ns"), ("Compute Overlap", "compute_overlap_ns")):
            # (each launch's percentage rounded to 0.1 by the recipe)
            approx = sum(float(x[col]) / 100 * (int(x["End"]) - int(x["Start"])) for x in mine)
            assert abs(approx - r[pct]) <= 0.0005 * dur + 1, (r["name"], col)


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(spans: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in spans)


def _intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@pytest.mark.parametrize("scen", ["nccl_overlap", "nccl"])
def test_comm_overlap_is_the_union_of_the_kernels_intervals(nsys_db, tmp_path, scen):
    """Per process and device: NCCL time, compute time, both at once and NCCL alone, each the
    union of the export's kernel intervals (CUPTI_ACTIVITY_KIND_KERNEL, a kernel NCCL's when
    its short name starts with nccl) computed here."""
    export = tmp_path / "e.sqlite"
    with lzma.open(NSYS_EXPORTS[scen]) as src, open(export, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(export)
    spans: dict[tuple[int, int], dict[bool, list]] = {}
    for pid, dev, start, end, name in con.execute(
            "SELECT (k.globalPid >> 24) & 16777215, k.deviceId, k.start, k.\"end\", s.value "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"):
        spans.setdefault((pid, dev), {True: [], False: []})[name.startswith("nccl")].append((start, end))
    con.close()
    got = {(r["pid"], r["device_id"]): r for r in nsys_db.query("comm-overlap", run=scen).iter_rows(named=True)}
    assert set(got) == set(spans) and len(got) == 2
    for key, by_kind in spans.items():
        nccl, compute = _union(by_kind[True]), _union(by_kind[False])
        both = _intersection(nccl, compute)
        r = got[key]
        assert (r["nccl_kernels"], r["nccl_ns"], r["compute_ns"], r["overlap_ns"], r["exposed_nccl_ns"], r["busy_ns"]) == (
            len(by_kind[True]), _length(nccl), _length(compute), both, _length(nccl) - both,
            _length(_union(by_kind[True] + by_kind[False]))), key
        assert r["overlap_pct"] == round(100 * both / _length(nccl), 1)
    assert max(r["overlap_pct"] for r in got.values()) > 1  # (the all-reduces of backward hide behind its GEMMs)
    if scen == "nccl_overlap":  # (README: of all NCCL's kernels, all-gathers and broadcasts too)
        assert {r["device_id"]: (r["nccl_kernels"], r["overlap_pct"]) for r in got.values()} == {0: (37, 24.3),
                                                                                                 1: (37, 1.7)}


@pytest.mark.parametrize("query", ["nccl-overlap", "comm-overlap"])
def test_a_run_without_nccl_is_an_error(nsys_db, query):
    """Asked of a capture with no NCCL kernel, the question has no answer: one line, exit 2."""
    with pytest.raises(QueryError, match=rf"^{query}: the run has no NCCL kernels"):
        nsys_db.query(query, run="hstu_mixed")
    let_go(nsys_db)  # (the command opens the store file)
    out = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(nsys_db.path), "query", query,
                          "--run", "hstu_mixed"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"tracekit: error: {query}: the run has no NCCL kernels")


def test_the_report_shows_communication_only_where_nccl_ran(tmp_path):
    """A report of the NCCL run has the two sections, with the queries' numbers; one of a run
    without NCCL kernels leaves them out without a word (not an error line in every report)."""
    import tracekit
    from tracekit.cli import main as cli_main

    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(NSYS_EXPORTS["nccl_overlap"], name="nccl")
        tk.ingest(NSYS_EXPORTS["diff_base_a"], name="plain")
        exposed = tk.query("comm-overlap", run="nccl")["exposed_nccl_ns"].to_list()
    text = {}
    for run in ("nccl", "plain"):
        assert cli_main(["--db", str(db), "report", "--run", run, "-o", str(tmp_path / f"{run}.html")]) == 0
        text[run] = (tmp_path / f"{run}.html").read_text()
    assert "Communication and computation" in text["nccl"] and "Overlap by kernel" in text["nccl"]
    assert all(f"{ns / 1e6:,.3f}" in text["nccl"] for ns in exposed), exposed
    assert "Communication and computation" not in text["plain"] and "NCCL" not in text["plain"]


def test_the_alias_is_the_recipes_name(nsys_db):
    assert nsys_db.query("nccl_gpu_overlap_trace", run="nccl_overlap", limit=0).equals(
        nsys_db.query("nccl-overlap", run="nccl_overlap", limit=0))


def test_nccl_cuts_reads_a_kernel_inside_another_of_its_kind(tmp_path):
    """Edge cases the capture lacks, on a copy of it: an NCCL kernel planted inside another on
    the same device (each overlaps the other's kind by the inner one's time: the recipe's
    rule, itself excluded), and a zero-length kernel (counted, overlapping nothing)."""
    import tracekit

    export = tmp_path / "planted.sqlite"
    with lzma.open(NSYS_EXPORTS["nccl_overlap"]) as src, open(export, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(export)
    cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    first = con.execute("SELECT rowid, start, \"end\", shortName FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE shortName IN "
                        "(SELECT id FROM StringIds WHERE value LIKE 'ncclDevKernel_AllGather%') ORDER BY start LIMIT 1"
                        ).fetchone()
    rowid, start, end, _ = first
    sel = {c: f'"{c}"' for c in cols}
    sel.update({"start": f"{start + (end - start) // 4}", "end": f"{start + (end - start) // 2}",
                "correlationId": "correlationId + 100000000"})
    con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(chr(34) + c + chr(34) for c in cols)}) "
                f"SELECT {', '.join(sel[c] for c in cols)} FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = ?", [rowid])
    sel.update({"start": f"{start}", "end": f"{start}", "correlationId": "correlationId + 200000000"})
    con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(chr(34) + c + chr(34) for c in cols)}) "
                f"SELECT {', '.join(sel[c] for c in cols)} FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = ?", [rowid])
    con.commit()
    con.close()
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["nccl_overlap"], name="base")
        tk.ingest(export, name="planted")
        b, p = ({r["name"]: r for r in tk.query("nccl-overlap", run=run, limit=0).iter_rows(named=True)}
                for run in ("base", "planted"))
    name = next(n for n in b if n.startswith("ncclDevKernel_AllGather"))
    inner = (end - start) // 2 - (end - start) // 4
    assert p[name]["instances"] == b[name]["instances"] + 2
    assert p[name]["total_ns"] == b[name]["total_ns"] + inner
    assert p[name]["comm_overlap_ns"] == b[name]["comm_overlap_ns"] + 2 * inner  # each of the two, by the inner one
    assert p[name]["compute_overlap_ns"] >= b[name]["compute_overlap_ns"]
    others = {n: (r["comm_overlap_ns"], r["compute_overlap_ns"]) for n, r in b.items() if n != name}
    assert others == {n: (r["comm_overlap_ns"], r["compute_overlap_ns"]) for n, r in p.items() if n != name}


def test_answers_over_a_parquet_dataset_are_the_stores(tmp_path):
    import tracekit
    from tracekit.dataset import export

    asked = {"nccl-overlap": {"limit": 0}, "comm-overlap": {}}
    with tracekit.open(tmp_path / "one.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["nccl_overlap"], name="o")
        export(tk, tmp_path / "ds")
        want = {q: tk.query(q, run="o", **p) for q, p in asked.items()}
    with tracekit.open(tmp_path / "ds") as ds:
        for q, p in asked.items():
            assert ds.query(q, run="o", **p).equals(want[q]), q


def test_a_job_over_nccl_shows_who_waits_for_the_straggler(tmp_path):
    """tests/data/nsys_ranks_nccl (PLANT.md): two ranks, one GPU each, all-reducing through
    NCCL; rank 1 runs forward with 1.5x the layers. Rank 0 waits for it inside NCCL's
    all-reduce kernel on its GPU: by NVIDIA's kernel sums 95 ms of NCCL kernel time against
    0.4 ms, nearly all of it exposed. rank-summary carries each rank's NCCL and exposed NCCL
    time (comm-overlap's, summed over the rank's devices), stragglers the slow forward, and
    the rank chart a panel of exposed NCCL time."""
    import json

    import tracekit
    from tracekit import charts

    job = DATA / "nsys_ranks_nccl"
    plant = json.loads((job / "plant.json").read_text())
    straggler, nccl = plant["straggler"]["rank"], plant["nsys_stats_nccl_kernel_total_ns"]
    with tracekit.open(tmp_path / "job.duckdb") as tk:
        for r in range(plant["world_size"]):
            tk.ingest(job / f"rank{r}" / "export.sqlite.xz")
        rows = {row["rank"]: row for row in tk.query("rank-summary").iter_rows(named=True)}
        assert set(rows) == {0, 1}
        for r, row in rows.items():
            assert row["nccl_ns"] == nccl[f"rank{r}"]  # (one NCCL kernel at a time: the union is the sum)
            over = tk.query("comm-overlap", run=row["run_id"])
            assert (row["nccl_ns"], row["exposed_nccl_ns"]) == (over["nccl_ns"].sum(), over["exposed_nccl_ns"].sum())
        waiter = 1 - straggler
        assert rows[waiter]["exposed_nccl_ns"] > 50 * rows[straggler]["exposed_nccl_ns"]
        assert rows[waiter]["top_kernel"].startswith("ncclDevKernel_AllReduce")  # (its kernel time is the wait)
        assert rows[straggler]["kernel_ns"] - rows[straggler]["nccl_ns"] > rows[waiter]["kernel_ns"] - rows[waiter]["nccl_ns"]
        forward = tk.query("stragglers", range="step/forward", limit=0)
        assert (forward["slowest_rank"] == straggler).sum() == plant["observed_per_step"]["straggler_slowest_in_forward"]
        assert (forward["slowest_rank"] == straggler).sum() >= 15
        spec = charts.chart(tk, "rank-summary").to_dict()
    panels = {r["measure"] for ds in spec_datasets(spec) for r in ds if "measure" in r}
    assert panels == {"GPU busy", "kernel time", "outermost NVTX ranges", "exposed NCCL"}
    assert "NCCL kernels with no compute beside" in json.dumps(spec["title"])


def _brute(rows: list[tuple], nccl_ids: set) -> tuple[list[tuple[int, int]], dict]:
    """Each kernel's (comm, compute) overlap and each (process, device)'s unions, the slow way:
    every other kernel of its part clipped to it, the clips unioned."""
    def part(r):
        return r[0], r[1]
    out, parts = [], {}
    for i, (pid, dev, s, e, name) in enumerate(rows):
        others = [r for j, r in enumerate(rows) if j != i and part(r) == (pid, dev)]
        clip = {kind: _union([(max(s, r[2]), min(e, r[3])) for r in others
                              if (r[4] in nccl_ids) == kind and min(e, r[3]) > max(s, r[2])]) for kind in (True, False)}
        out.append((_length(clip[True]), _length(clip[False])))
        parts.setdefault((pid, dev), {True: [], False: []})[name in nccl_ids].append((s, e))
    per = {}
    for key, by in parts.items():
        n, c = _union([x for x in by[True] if x[1] > x[0]]), _union([x for x in by[False] if x[1] > x[0]])
        both = _intersection(n, c)
        per[key] = (len(by[True]), _length(n), _length(c), both, _length(n) - both, _length(_union(n + c)))
    return out, per


def test_overlaps_against_the_slow_way_on_odd_kernels():
    """Random small runs with what a capture rarely has: identical, nested and zero-length
    kernels, a kernel without a process, device or name (NULL: its own part, kept NULL),
    negative and far-off timestamps (past half of int64: no key may wrap)."""
    import random

    import pyarrow as pa

    from tracekit.ingest.nsys.overlap import overlaps

    rng = random.Random(29)
    for _ in range(800):
        base = rng.choice([0, -10**6, 10**15, 4 * 10**18])
        rows = []
        for _ in range(rng.randint(1, 10)):
            s = base + rng.randint(0, 40)
            rows.append((rng.choice([7, 9, None]), rng.choice([0, 1, None]), s, s + rng.choice([0, 0, 1, 3, 8, 20, 40]),
                         rng.choice([10, 11, 12, None])))
        if rng.random() < 0.2:
            rows += [rows[0]] * rng.randint(1, 2)
        far = rng.random() < 0.1
        if far:  # one part near 0, another far off: a run-wide axis would wrap
            rows.append((7, 1, 4 * 10**18, 4 * 10**18 + 5, 10))
            rows.append((7, 0, -(10**6), -(10**6) + 9, 12))
        rows.sort(key=lambda r: ((r[0] is None, r[0] or 0), (r[1] is None, r[1] or 0)))  # (as write() reads them)
        cols = ("global_pid", "device_id", "start_ns", "end_ns", "short_name_id")
        table = pa.table({c: pa.array([r[i] for r in rows], pa.int64()) for i, c in enumerate(cols)})
        per_kernel, per_device = overlaps(table, [10, 11])
        want, want_parts = _brute(rows, {10, 11})
        assert list(zip(per_kernel["comm_ns"].to_pylist(), per_kernel["compute_ns"].to_pylist(), strict=True)) == want
        got_parts = {(p, d): tuple(x) for p, d, *x in zip(*(per_device[c].to_pylist() for c in (
            "global_pid", "device_id", "nccl_kernels", "nccl_ns", "compute_ns", "overlap_ns", "exposed_nccl_ns",
            "busy_ns")), strict=True)}
        assert got_parts == want_parts, rows


def test_the_memory_estimate_counts_the_overlap_step(monkeypatch):
    """An export that names NCCL is estimated with the overlap step's memory per kernel, the
    same before its rows are read (row counts, a look for an nccl name) as after; one that
    does not, without it."""
    import tracekit.ingest as ingest
    from tracekit.ingest import budget
    from tracekit.ingest.nsys import memory_need

    for scen, nccl in (("nccl_overlap", True), ("hstu_mixed", False)):
        with ingest.materialized(NSYS_EXPORTS[scen]) as plain:
            before = memory_need(plain)
            assert before == pytest.approx(ingest.detect(plain).read(plain).memory_need, rel=1e-3), scen
            with monkeypatch.context() as m:
                m.setattr(budget, "NEED_PER_NCCL_RUN_KERNEL", 0)
                without = memory_need(plain)
            con = sqlite3.connect(plain)
            kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
            con.close()
        assert before - without == (budget.NEED_PER_NCCL_RUN_KERNEL * kernels if nccl else 0), scen
