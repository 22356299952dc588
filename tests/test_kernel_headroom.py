"""kernel-headroom: an nsys run's kernels beside an ncu run of the same workload, on the real
pair tests/data/hstu_headroom (README.md there), against NVIDIA's own numbers: the nsys side
equals `nsys stats -r cuda_gpu_kern_sum`, the ncu side is computed here from ncu's details
page."""

from __future__ import annotations

import csv
import io
import lzma
import re
from collections import defaultdict

import pytest
from conftest import DATA

import tracekit
from tracekit.errors import QueryError

PAIR = DATA / "hstu_headroom"


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    tk = tracekit.open(tmp_path_factory.mktemp("headroom") / "s.duckdb")
    tk.ingest(PAIR / "nsys", name="nsys")
    tk.ingest(PAIR / "ncu", name="ncu")
    yield tk
    tk.close()


def _key(name: str) -> str:
    """A kernel's name as ncu's CSV pages and nsys both give it: casts of template arguments
    and namespaces dropped (the rule macro kernel_match_key states in SQL)."""
    name = re.sub(r"\((?:unsigned |signed )?(?:long long|int|long|bool|char|short)\)(-?\d)", r"\1", name)
    return re.sub(r"(?:\w+::|<unnamed>::|\(anonymous namespace\)::)+", "", name)


def _details() -> tuple[dict[int, dict], dict[int, float]]:
    """Per launch ID of the ncu run's details page: its name and the four metrics the query
    reads; and each launch's largest global speedup estimate."""
    text = lzma.decompress((PAIR / "ncu" / "ncu_details.csv.xz").read_bytes()).decode()
    launches: dict[int, dict] = defaultdict(dict)
    estimate: dict[int, float] = defaultdict(float)
    wanted = {"gpu__time_duration.sum": "d", "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm",
              "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "mem",
              "sm__warps_active.avg.pct_of_peak_sustained_active": "occ"}
    for row in csv.DictReader(io.StringIO(text)):
        i = int(row["ID"])
        launches[i]["name"] = row["Kernel Name"]
        if row["Metric Name"] in wanted:
            launches[i][wanted[row["Metric Name"]]] = float(row["Metric Value"].replace(",", ""))
        if row["Estimated Speedup Type"] == "global" and row["Estimated Speedup"]:
            estimate[i] = max(estimate[i], float(row["Estimated Speedup"]))
    return launches, estimate


def test_every_kernel_equals_nvidias_numbers(tk):
    got = {r["name"]: r for r in tk.query("kernel-headroom", run="nsys", ncu="ncu", limit=0).to_dicts()}
    stats = list(csv.DictReader((PAIR / "nsys" / "stats" / "cuda_gpu_kern_sum.csv").open()))
    assert set(got) == {r["Name"] for r in stats} and len(got) == 14
    for r in stats:
        g = got[r["Name"]]
        assert (g["total_ns"], g["instances"], g["med_ns"], g["time_pct"]) == (
            int(r["Total Time (ns)"]), int(r["Instances"]), float(r["Med (ns)"]), float(r["Time (%)"])), r["Name"]
    launches, estimate = _details()
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, launch in launches.items():
        by_key[_key(launch["name"])].append(i)
    # every kernel found, once: ncu's page spells 11 of the 14 names otherwise than nsys
    assert {_key(n) for n in got} == set(by_key)
    assert sum(n != launches[by_key[_key(n)][0]]["name"] for n in got) == 11
    run_ns = sum(g["total_ns"] for g in got.values())
    for name, g in got.items():
        ids = by_key[_key(name)]
        d = sum(launches[i]["d"] for i in ids)
        sm = sum(launches[i]["d"] * launches[i]["sm"] for i in ids) / d
        mem = sum(launches[i]["d"] * launches[i]["mem"] for i in ids) / d
        sol = max(sm, mem)
        assert g["profiled"] == len(ids)
        assert g["sm_throughput_pct"] == pytest.approx(sm, abs=1e-9)
        assert g["memory_throughput_pct"] == pytest.approx(mem, abs=1e-9)
        assert g["sol_pct"] == round(sol, 1)
        assert g["bottleneck"] == ("latency" if sol < 60 else "compute" if sm >= mem else "memory")
        assert g["achieved_occupancy_pct"] == pytest.approx(
            sum(launches[i]["d"] * launches[i]["occ"] for i in ids) / d, abs=0.051)
        assert g["headroom_ns"] == pytest.approx(g["total_ns"] * (100 - sol) / 100, abs=1)
        assert g["headroom_pct"] == pytest.approx(100 * g["total_ns"] * (100 - sol) / 100 / run_ns, abs=0.051)
        assert g["ncu_estimate_ns"] == pytest.approx(
            g["total_ns"] * sum(launches[i]["d"] * estimate[i] for i in ids) / d / 100, abs=1)
    # in headroom order: the KV-cached attention kernel first, memory-bound, a sixth of the kernel time
    rows = tk.query("kernel-headroom", run="nsys", ncu="ncu", limit=3).to_dicts()
    assert [r["headroom_ns"] for r in rows] == sorted((g["headroom_ns"] for g in got.values()), reverse=True)[:3]
    assert rows[0]["name"] == "_hstu_cached_gl_kernel" and rows[0]["bottleneck"] == "memory"
    assert 15 < rows[0]["headroom_pct"] < 18


def test_a_terminal_under_a_limit_counts_every_row(tk):
    """test_registry's check of the count a terminal gives beside a cut table, for the query whose
    second run nsys_db lacks."""
    from tracekit.registry import count_sql, get_registry

    rows = get_registry().fetch(tk, "kernel-headroom", run="nsys", ncu="ncu", limit=2)
    assert len(rows.rows) == 2 and rows.total == 14
    assert "$limit" not in count_sql(get_registry().get("kernel-headroom"))


def test_the_chart_stacks_each_kernels_time_in_the_querys_order(tk):
    """The chart's bars are the query's rows, in its order: each profiled kernel's time at its
    speed of light and its headroom (coloured by what holds it back), which add up to its time
    in the nsys run; a kernel ncu left out is one grey bar."""
    from tracekit import charts

    spec = charts.chart(tk, "kernel-headroom", run="nsys", ncu="ncu").to_dict()
    rows = tk.query("kernel-headroom", run="nsys", ncu="ncu").to_dicts()
    data = spec["layer"][0]["data"]["values"]
    assert [d["name"] for d in data if d["i"] != 0] == [r["name"] for r in rows]
    for r in rows:
        parts = {d["part"]: d["ms"] for d in data if d["name"] == r["name"]}
        assert parts == {"its busiest unit at peak": pytest.approx((r["total_ns"] - r["headroom_ns"]) / 1e6),
                         f"headroom: {r['bottleneck']}": pytest.approx(r["headroom_ns"] / 1e6)}
    left = charts.kernel_headroom(tk.query("kernel-headroom", run="nsys", ncu="ncu").with_columns(
        headroom_ns=None, headroom_pct=None, sol_pct=None, bottleneck=None)).to_dict()
    assert {d["part"] for d in left["layer"][0]["data"]["values"]} == {"not profiled by ncu"}


def test_a_report_and_its_pages_spell_names_apart_and_the_key_joins_them(tmp_path):
    """ncu's report and its CSV pages name a launch by two demanglers; every launch's key is the
    same from both, and equals the key of the name nsys gives the kernel (hstu_capture_ncu, a
    report and its details page)."""
    tk = tracekit.open(tmp_path / "s.duckdb")
    tk.ingest(DATA / "hstu_capture_ncu" / "ncu.ncu-rep.xz", name="report")
    tk.ingest(DATA / "hstu_capture_ncu" / "ncu_details.csv.xz", name="page")
    pairs = tk.sql("SELECT r.name AS report, p.name AS page, kernel_match_key(r.name) = kernel_match_key(p.name) "
                   "AS same FROM ncu_kernels r JOIN ncu_kernels p USING (kernel_id) WHERE r.run_id = 1 AND "
                   "p.run_id = 2").to_dicts()
    assert len(pairs) > 0 and all(p["same"] for p in pairs)
    assert any(p["report"] != p["page"] for p in pairs)
    assert all(tk.sql("SELECT kernel_match_key($n) AS k", {"n": p["report"]})["k"][0] == _key(p["page"]) for p in pairs)
    tk.close()


def test_a_kernel_ncu_did_not_profile_has_no_headroom(tmp_path):
    """The pair's nsys run beside the capture's ncu run of three kernel classes: the kernels it
    left out (layer norm, the element-wise kernels) have profiled 0 and blank ncu columns, and come
    after those it profiled."""
    tk = tracekit.open(tmp_path / "s.duckdb")
    tk.ingest(PAIR / "nsys", name="nsys")
    tk.ingest(DATA / "hstu_capture_ncu", name="classes")
    rows = tk.query("kernel-headroom", limit=0).to_dicts()  # (the latest of each kind)
    left = [r for r in rows if r["profiled"] == 0]
    assert left and all(r["headroom_ns"] is None and r["sol_pct"] is None and r["ncu_estimate_ns"] is None
                        for r in left)
    assert any("layer_norm" in r["name"] for r in left)
    assert rows.index(left[0]) == len(rows) - len(left)
    tk.close()


def test_the_wrong_runs_are_errors(tmp_path):
    tk = tracekit.open(tmp_path / "s.duckdb")
    tk.ingest(PAIR / "nsys", name="nsys")
    with pytest.raises(QueryError, match="kernel-headroom: no ncu run in"):
        tk.query("kernel-headroom")
    tk.ingest(DATA / "ncu_full" / "details.csv.xz", name="other")  # a small program of its own: no kernel of the HSTU workload
    with pytest.raises(QueryError, match=r"kernel-headroom: run 2 \(other\) has no kernel of a name run 1 ran; "
                                         r"give the ncu run of the same workload: -p ncu=RUN"):
        tk.query("kernel-headroom", ncu="other")
    with pytest.raises(QueryError, match=r"run 1 \(nsys\) is an nsys run; kernel-headroom needs an ncu run"):
        tk.query("kernel-headroom", ncu="nsys")
    with pytest.raises(QueryError, match=r"run 2 \(other\) is an ncu run; kernel-headroom needs an nsys run"):
        tk.query("kernel-headroom", run="other")
    tk.close()


def test_a_captures_summary_says_where_tuning_can_save_time_once_both_runs_are_in(tmp_path):
    """The summary `tracekit capture` prints of either run folder of the pair ends with the
    headroom's first rows where the store holds the other run of its workload, and says nothing
    of it before."""
    from tracekit.capture.run import summary

    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(PAIR / "nsys")
    assert "where tuning can save time" not in summary(PAIR / "nsys", db)
    with tracekit.open(db) as tk:
        tk.ingest(PAIR / "ncu")
        first = tk.query("kernel-headroom", limit=3)
    for folder in ("nsys", "ncu"):
        lines = summary(PAIR / folder, db, top=3).splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("where tuning can save time (nsys run 1 "
                                                                        "beside ncu run 2"))
        assert [line.split()[-1] for line in lines[at + 1:]] == [n[:90].split()[-1] for n in first["name"]]
        assert lines[at + 1].split()[:3] == [f"{first['headroom_pct'][0]:.1f}%", f"{first['sol_pct'][0]:.1f}%",
                                             "memory"]


def test_the_report_of_the_nsys_run_shows_the_headroom_beside_the_ncu_run_of_its_workload(tmp_path):
    """The nsys run's report has the section, beside the latest ncu run of its workload (the same
    command: bs, nc, preset; the profiler alone differs), drawn in a browser; a run whose store
    has no ncu run of its workload (only another bs, or a bare export) has none."""
    from browser import chromium, load
    from test_report import DONE, _column, _parse

    from tracekit import report

    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(PAIR / "nsys", name="nsys")
        alone = report.write_report(tk, tmp_path / "alone.html", run="nsys")
        tk.ingest(PAIR / "ncu", name="ncu")
        out = report.write_report(tk, tmp_path / "r.html", run="nsys")
        rows = tk.query("kernel-headroom", run="nsys", ncu="ncu", limit=15)
        assert report.ncu_of_the_workload(tk, 1) == {"ncu": 2}
        tk.sql("UPDATE runs SET params = json_merge_patch(params, '{\"bs\": 4}') WHERE run_id = 2")
        assert report.ncu_of_the_workload(tk, 1) is None
    assert "kernel-headroom" not in _parse(alone).sections
    page = _parse(out)
    keys = list(page.sections)
    assert keys.index("kernel-headroom") == keys.index("kernel-durations") + 1 and "chart-kernel-headroom" in page.charts
    (table,) = page.sections["kernel-headroom"]
    names = [title or shown for shown, _, title in _column(table, "name")]
    assert names == rows["name"].to_list() and names[0] == "_hstu_cached_gl_kernel"
    if chromium() is None:
        return
    state = load(out, DONE, "window.tracekitReport").value
    assert state["rendered"] == state["charts"] and state["failed"] == 0
    assert state["marks"]["chart-kernel-headroom"] == 2 * rows.height + rows.height  # two parts and a label each
