"""Two nsys runs' requests on one time axis (chart diff-timeline, and the report's section of a
comparison of two nsys runs), on real captures:

* tests/data/nsys_diff_base_a against nsys_diff_regressed (PLANT.md): per `step`, silu_kernel
  4.2x as long, a new kernel `attn_bias_kernel` in `attn`, the conversion at the end of `mlp`
  launched twice;
* tests/data/hstu_capture_pair base against half_sms: the cached attention kernel on half the
  SMs, +77 % per launch.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from browser import chromium, report_drawn

import tracekit
from tracekit import charts, report
from tracekit.cli import main as cli_main
from tracekit.errors import ParamError, QueryError
from tracekit.trace import resolve_window

DATA = Path(__file__).parent / "data"
#: the conversion the plant launches twice per step (PLANT.md: more_launches, in step/mlp)
CONVERSION = "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl<at::native::direct_copy"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("diff_timeline") / "t.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "nsys_diff_base_a" / "export.sqlite.xz", name="base_a")
        tk.ingest(DATA / "nsys_diff_regressed" / "export.sqlite.xz", name="regressed")
        tk.ingest(DATA / "hstu_capture_pair" / "base", name="hstu")
        tk.ingest(DATA / "hstu_capture_pair" / "half_sms", name="hstu_half")
        tk.ingest(DATA / "ncu_shapes_a" / "report.ncu-rep.xz", name="ncu")
        tk.ingest(DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz", name="no_nvtx")
        for folder, name in zip(sorted((DATA / "hstu_sweep_tools" / "runs").glob("*-nsys")), ("bs1", "bs8"),
                                strict=True):  # (bs 1 and bs 8 at nc 128: two points of one sweep under nsys)
            tk.ingest(folder, name=name)
    return db


def _median_step(tk, run: int, name: str) -> int:
    """The instance number (in start order) of the run's outermost ``name`` range whose duration
    is the lower median, equal durations in start order: read from the store alone."""
    rows = tk.con.execute("SELECT end_ns - start_ns FROM nvtx_ranges WHERE run_id = ? AND text = ? "
                          "ORDER BY start_ns", [run, name]).fetchall()
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], i))
    return order[(len(rows) - 1) // 2] + 1


def test_the_planted_changes_show_in_place_each_request_from_its_start(store):
    """The base's typical step and the regressed run's median step, the new run's times moved
    onto the base's clock so both start at 0: the new kernel and the doubled conversion are in
    the new lanes alone, silu_kernel over four times as long."""
    with tracekit.open(store, read_only=True) as tk:
        t = charts.diff_timeline_data(tk, base="base_a", new="regressed")
        pick = charts.typical_instance(tk, 1)
        windows = [resolve_window(tk, 1, nvtx="step", instance=pick.instance),
                   resolve_window(tk, 2, nvtx="step", instance=_median_step(tk, 2, "step"))]
        assert pick.name == "step" and pick.instance == _median_step(tk, 1, "step")
    assert t.ranks == (0, 1) and t.labels == {0: "base", 1: "new"}
    assert t.window.start_ns == windows[0].start_ns
    lengths = [w.end_ns - w.start_ns for w in windows]
    assert t.window.end_ns - t.window.start_ns == max(lengths)
    assert t.ends == {0: windows[0].end_ns, 1: windows[0].start_ns + lengths[1]}
    steps = t.nvtx.filter(pl.col("range").str.strip_prefix(":") == "step").sort("rank")
    assert steps["rank"].to_list() == [0, 1] and set(steps["start_ns"]) == {windows[0].start_ns}
    gpu = {r: t.gpu.filter(pl.col("rank") == r) for r in (0, 1)}
    names = {r: gpu[r]["name"].to_list() for r in (0, 1)}
    assert "attn_bias_kernel" in names[1] and "attn_bias_kernel" not in names[0]
    assert [sum(n.startswith(CONVERSION) for n in names[r]) for r in (0, 1)] == [1, 2]
    silu = [gpu[r].filter(pl.col("name") == "silu_kernel")["dur_ns"].to_list() for r in (0, 1)]
    assert len(silu[0]) == len(silu[1]) == 1 and silu[1][0] > 3.5 * silu[0][0]
    # every new op inside its own window once moved: from the base window's start on
    assert gpu[1]["start_ns"].min() >= t.window.start_ns and gpu[1]["end_ns"].max() <= t.ends[1]
    assert "base: step instance" in t.window.label and "; new: step instance" in t.window.label


def test_a_kernel_one_run_ran_alone_has_a_colour_of_its_own(store):
    """The new attn_bias_kernel (a few µs of the request) is not among the kernels with the
    most time: in the colour of the other kernels, the plant would be seen only by hovering.
    A kernel some of the runs compared lack is coloured first, and named in the legend."""
    with tracekit.open(store, read_only=True) as tk:
        spec = charts.chart(tk, "diff-timeline", base="base_a", new="regressed").to_dict()
        compared = charts.chart(tk, "compare-timeline", base="base_a", runs="regressed").to_dict()
    for s in (spec, compared):
        layer = next(x for x in s["layer"] if x.get("encoding", {}).get("color", {}).get("title") == "GPU op")
        domain = layer["encoding"]["color"]["scale"]["domain"]
        assert domain[0] == "attn_bias_kernel" and "silu_kernel" in domain, domain


def test_a_range_and_instance_given_are_that_instance_in_each_run(store):
    with tracekit.open(store, read_only=True) as tk:
        t = charts.diff_timeline_data(tk, base="base_a", new="regressed", nvtx="attn", instance="7")
        w = [resolve_window(tk, r, nvtx="attn", instance=7) for r in (1, 2)]
        median = charts.diff_timeline_data(tk, base="base_a", new="regressed", nvtx="attn")
        m = resolve_window(tk, 2, nvtx="attn", instance=_median_step(tk, 2, "attn"))
    assert t.window.start_ns == w[0].start_ns and t.ends[1] == w[0].start_ns + (w[1].end_ns - w[1].start_ns)
    assert t.window.label.startswith("base: attn instance 7 of 400") and "new: attn instance 7 of 400" in t.window.label
    assert "attn_bias_kernel" in t.gpu.filter(pl.col("rank") == 1)["name"].to_list()
    assert median.ends[1] - median.window.start_ns == m.end_ns - m.start_ns


def test_the_hstu_attention_on_half_the_sms_is_longer_in_the_new_lanes(store):
    with tracekit.open(store, read_only=True) as tk:
        t = charts.diff_timeline_data(tk, base="hstu", new="hstu_half")
    assert "hstu.request instance" in t.window.label
    attention = t.gpu.filter(pl.col("name") == "_hstu_cached_sk_kernel").group_by("rank").agg(
        pl.len().alias("n"), pl.col("dur_ns").median().alias("med")).sort("rank")
    assert attention["n"].to_list() == [8, 8]  # (one launch per layer)
    assert attention["med"][1] > 1.6 * attention["med"][0]


def test_the_chart_names_each_runs_lanes_base_then_new(store, tmp_path):
    with tracekit.open(store, read_only=True) as tk:
        spec = charts.chart(tk, "diff-timeline", base="base_a", new="regressed").to_dict()
    lanes = spec["layer"][0]["encoding"]["y"]["sort"]
    assert lanes and [lane.split(" · ")[0] for lane in lanes] == sorted(
        (lane.split(" · ")[0] for lane in lanes), key=["base", "new"].index)
    assert {lane.split(" · ")[0] for lane in lanes} == {"base", "new"}
    assert spec["title"]["text"] == "Timeline compared · base: run 1 (base_a) · new: run 2 (regressed)"
    assert spec["layer"][0]["encoding"]["x"]["title"] == "Time since each request's start [ms]"
    said = " ".join(spec["title"]["subtitle"])
    assert said.startswith("base: step instance") and "base GPU 0 busy" in said and "new GPU 0 busy" in said
    out = tmp_path / "t.png"
    assert cli_main(["--db", str(store), "chart", "diff-timeline", "-p", "base=base_a", "-p", "new=regressed",
                     "-o", str(out)]) == 0
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize("params, said", [
    (["-p", "base=base_a"], "give the nsys runs to compare as -p base=RUN -p new=RUN"),
    (["-p", "base=base_a", "-p", "new=regressed", "-p", "nvtx=nope"],
     "run 1 (base_a) has no NVTX range named 'nope'; give -p nvtx=NAME of a range both runs have"),
    (["-p", "base=base_a", "-p", "new=hstu", "-p", "nvtx=step"], "run 3 (hstu) has no NVTX range named 'step'"),
    (["-p", "base=base_a", "-p", "new=hstu"], "run 3 (hstu) has no NVTX range named 'step'"),
    (["-p", "base=base_a", "-p", "new=regressed", "-p", "nvtx=step", "-p", "instance=401"],
     "instance=401: run 1 (base_a) has 400 range(s) named 'step'"),
    (["-p", "base=base_a", "-p", "new=regressed", "-p", "instance=3"], "-p instance needs -p nvtx"),
    (["-p", "base=base_a", "-p", "new=regressed", "-p", "nvtx=step", "-p", "instance=x"],
     "instance='x': an instance number (1 = the first) expected"),
    (["-p", "base=ncu", "-p", "new=regressed"], "run 5 (ncu) is an ncu run; chart diff-timeline needs an nsys run"),
    (["-p", "base= ", "-p", "new=regressed"], "base=' ': an empty run reference; give a run id or name"),
    (["-p", "base=no_nvtx", "-p", "new=regressed"], "run 6 (no_nvtx) has no NVTX range: the chart draws a request of "
     "each run, a range both runs have (capture with nsys -t nvtx;"),
])
def test_wrong_runs_and_values_are_one_line(store, tmp_path, capsys, params, said):
    capsys.readouterr()
    out = tmp_path / "x.html"
    assert cli_main(["--db", str(store), "chart", "diff-timeline", *params, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    said = said if said.startswith("run 5 (ncu)") else f"chart diff-timeline: {said}"
    assert len(err) == 1 and err[0].startswith(f"tracekit: error: {said}"), err
    assert not out.exists()


@pytest.mark.filterwarnings("ignore:diff. the captures differ in setup")  # (hstu against base_a: other programs)
def test_a_report_of_two_nsys_runs_compared_draws_their_requests(store, tmp_path):
    """report --vs of two nsys runs: the requests' timeline follows the diff; where the runs
    share no NVTX range, the section says why in place of the chart."""
    with tracekit.open(store) as tk:
        path = report.write_report(tk, tmp_path / "r.html", run="regressed", vs="base_a")
        apart = report.write_report(tk, tmp_path / "apart.html", run="hstu", vs="base_a")
    html = path.read_text()
    assert html.index('id="diff"') < html.index('id="diff-timeline"') < html.index('id="top-kernels"')
    assert "tracekit chart diff-timeline -p base=1 -p new=2" in html
    assert "run 3 (hstu) has no NVTX range named &#x27;step&#x27;" in apart.read_text()
    if chromium() is None:
        pytest.skip("no chromium")
    page = report_drawn(path)
    assert page.console_errors == [] and page.exceptions == [] and page.external_requests == []
    state = page.value
    assert state["failed"] == 0 and state["rendered"] == state["charts"] and state["marks"]["chart-diff-timeline"] > 0


def test_several_runs_stack_in_the_order_given_each_named_by_its_point_or_id(store):
    """compare-timeline: the base's typical step, then each run's median step in the order given
    (a run may come twice), lanes named base, then by run id; two points of a sweep are named by
    their point."""
    with tracekit.open(store, read_only=True) as tk:
        t = charts.compare_timeline_data(tk, base="base_a", runs="regressed,base_a")
        two = charts.diff_timeline_data(tk, base="base_a", new="regressed")
        points = charts.compare_timeline_data(tk, base="bs1", runs="bs8")
        sweep = tk.con.execute("SELECT json_extract_string(params, '$.sweep') FROM runs WHERE name = 'bs8'").fetchall()
    assert t.labels == {0: "base", 1: "run 2", 2: "run 1"} and t.ranks == (0, 1, 2)
    assert t.title == "Timeline compared · base: run 1 (base_a) · run 2 (regressed) · run 1 (base_a)"
    # the same requests as the two-run chart picks, and the base's again as the third
    assert t.ends[0] == two.ends[0] and t.ends[1] == two.ends[1] and t.ends[2] == t.ends[0]
    assert t.gpu.filter(pl.col("rank") == 2).height == t.gpu.filter(pl.col("rank") == 0).height
    assert points.labels == {0: "base", 1: "bs=8,nc=128"}
    assert points.title == "Timeline compared · base: run 7 (bs1) · bs=8,nc=128: run 8 (bs8)" and "hstu.request instance" in points.window.label
    spec = charts.timeline(points).to_dict()
    assert {lane.split(" · ")[0] for lane in spec["layer"][0]["encoding"]["y"]["sort"]} == {"base", "bs=8,nc=128"}
    with tracekit.open(store, read_only=True) as tk:  # (a run given twice: two sets of lanes, told apart)
        twice = charts.compare_timeline_data(tk, base="base_a", runs="regressed,regressed")
    assert twice.labels == {0: "base", 1: "run 2 (#2)", 2: "run 2 (#3)"}
    lanes = charts.timeline(twice).to_dict()["layer"][0]["encoding"]["y"]["sort"]
    assert [sum(lane.startswith(f"{lab} · ") for lane in lanes) for lab in twice.labels.values()] == [3, 3, 3]
    with tracekit.open(store, read_only=True) as tk, pytest.raises(QueryError, match=r"^chart compare-timeline: "
                                                                    r"runs=sweep-\S+ is a sweep; give nsys runs"):
        charts.compare_timeline_data(tk, base="bs1", runs=sweep[0][0])
    with tracekit.open(store, read_only=True) as tk, pytest.raises(ParamError, match=r"^chart compare-timeline: "
                                                                    r"give the nsys runs as -p base=RUN -p runs="):
        charts.compare_timeline_data(tk, base="bs1", runs=" , ")
