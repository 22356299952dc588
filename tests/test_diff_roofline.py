"""The roofline of two ncu runs compared (chart diff-roofline, and the report's section of a
comparison of two ncu runs), on real reports:

* tests/data/ncu_shapes_a against ncu_shapes_slow: one Triton kernel at three sizes, made to
  read its input four times (ncu counts 5.0 FLOP per element where it counted 1.5): it regressed, and its point moved
  up and right (more FLOP per byte and per second), which the roofline alone would read as
  better;
* tests/data/hstu_capture_ncu_pair base against half_sms: the HSTU workload's 65 launches, the
  cached attention kernel given half the SMs (regressed by about 70 %, the same work), the
  others as they were.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from browser import chromium, report_drawn
from conftest import spec_datasets

import tracekit
from tracekit import charts, report
from tracekit.cli import main as cli_main
from tracekit.errors import QueryError

DATA = Path(__file__).parent / "data"
NCU_PAIR = DATA / "hstu_capture_ncu_pair"
SHAPES = {v: DATA / f"ncu_shapes_{v}" for v in ("a", "slow")}
SWEEP_NCU = sorted((DATA / "hstu_sweep_tools" / "runs").glob("*-ncu"))  # bs 1 and 8 at nc 128, one sweep under ncu

#: hstu_capture_ncu_pair's half_sms ran with a tiles file: diff says so, as it should
pytestmark = pytest.mark.filterwarnings("ignore:diff. the captures differ in setup")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("diff_roofline") / "r.duckdb"
    with tracekit.open(db) as tk:
        for v in ("a", "slow"):
            tk.ingest(SHAPES[v] / "report.ncu-rep.xz", name=f"shapes_{v}")
        for run in ("base", "half_sms"):
            tk.ingest(NCU_PAIR / run, name=run)
        tk.ingest(DATA / "nsys_diff_base_a" / "export.sqlite.xz", name="nsys")
        tk.ingest(DATA / "nsys_diff_regressed" / "export.sqlite.xz", name="nsys_new")
        for v in ("ncu_range", "ncu_diff_a"):
            tk.ingest(DATA / v / "report.ncu-rep.xz", name=v)
        for folder, name in zip(SWEEP_NCU, ("point_bs1", "point_bs8"), strict=True):
            tk.ingest(folder, name=name)
    return db


def _by_side(df: pl.DataFrame, key: str) -> tuple[dict, dict]:
    rows = {r["side"]: r for r in df.filter(pl.col("key") == key).iter_rows(named=True)}
    return rows[0], rows[1]


def test_a_kernel_that_does_more_work_per_byte_moved_up_and_right_and_regressed(store):
    """ncu_shapes: the slow kernel reads its input four times where it read it once; each side's point is its
    six launches together, from the roofline query's rows: their FLOP over their DRAM bytes
    and over their time, and the verdict is diff's of the median launch."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.diff_roofline_data(tk, base="shapes_a", new="shapes_slow")
        launches = {v: tk.query("roofline", run=f"shapes_{v}") for v in ("a", "slow")}
        verdict = tk.diff("shapes_a", "shapes_slow", by="ncu").filter(pl.col("metric") == "duration_ns")
    assert df["key"].unique().to_list() == ["shapes_kernel"]
    base, new = _by_side(df, "shapes_kernel")
    for point, rows in ((base, launches["a"]), (new, launches["slow"])):
        assert point["launches"] == rows.height == 6
        assert point["duration_ns"] == pytest.approx(rows["duration_ns"].sum())
        assert point["flops_per_s"] == pytest.approx(rows["flop"].sum() / rows["duration_ns"].sum() * 1e9)
        assert point["ai_dram"] == pytest.approx(rows["flop"].sum() / rows["dram_bytes"].sum())
        assert point["precision"] == "fp32" and point["bound"] == "memory"
    # the same 35.8 M elements (2 x (2**16 + 2**20 + 2**24)): ncu counts 1.5 FLOP per element
    # before, 5.0 after
    elements = 2 * (2**16 + 2**20 + 2**24)
    assert _flop(base) / elements == pytest.approx(1.5) and _flop(new) / elements == pytest.approx(5.0)
    assert new["ai_dram"] > 2 * base["ai_dram"] and new["flops_per_s"] > 2 * base["flops_per_s"]
    assert new["duration_ns"] > base["duration_ns"]
    assert {base["verdict"], new["verdict"]} == {verdict["verdict"][0]} == {"regressed"}
    assert base["delta_pct"] == pytest.approx(verdict["delta_pct"][0])
    assert base["run"] == "base: run 1 (shapes_a)" and new["run"] == "new: run 2 (shapes_slow)"


def _flop(point: dict) -> float:
    return point["flops_per_s"] * point["duration_ns"] / 1e9


def test_hstu_attention_on_half_the_sms_kept_its_work_and_lost_its_rate(store):
    """hstu_capture_ncu_pair: every key diff has with floating-point work has a point on each
    side, coloured by diff's verdict; the cached attention kernel's keys (one per layer) did
    the same FLOP at a lower rate and regressed, the GEMMs kept theirs."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.diff_roofline_data(tk, base="base", new="half_sms", limit=0)
        d = tk.diff("base", "half_sms", by="ncu")
        rf = pl.concat([tk.query("roofline", run=r) for r in ("base", "half_sms")])
    durations = d.filter(pl.col("metric") == "duration_ns")
    verdicts = dict(zip(durations["key"], durations["verdict"], strict=True))
    assert set(df["key"]) <= set(verdicts) and df.height == 2 * df["key"].n_unique()
    assert all(verdicts[k] == v for k, v in zip(df["key"], df["verdict"], strict=True))
    # every launch with floating-point work is in exactly one point
    fp = rf.filter(pl.col("flop") > 0)
    assert df["launches"].sum() == fp.height
    assert sum(_flop(r) for r in df.iter_rows(named=True)) == pytest.approx(fp["flop"].sum())
    attention = [k for k in df["key"].unique() if k.startswith("_hstu_cached_sk_kernel")]
    assert len(attention) == 8
    for key in attention:
        base, new = _by_side(df, key)
        assert base["verdict"] == "regressed" and base["delta_pct"] > 60
        assert _flop(new) == pytest.approx(_flop(base), rel=0.01)
        assert new["flops_per_s"] < 0.7 * base["flops_per_s"]
        assert base["precision"] == new["precision"] and base["precision"].startswith("tensor_")
    gemms = [k for k in df["key"].unique() if k.startswith("nvjet")]
    assert gemms and all(verdicts[k] == "unchanged" for k in gemms)
    for key in gemms:
        base, new = _by_side(df, key)
        assert new["flops_per_s"] == pytest.approx(base["flops_per_s"], rel=0.05)
    # the default: of the keys with floating-point work, those diff's chart would draw (every key
    # judged changed, then the largest)
    with tracekit.open(store, read_only=True) as tk:
        default = charts.diff_roofline_data(tk, base="base", new="half_sms")
    drawn = charts.diff_rows(d.filter(pl.col("key").is_in(df["key"].implode())), 5.0, 20)
    assert set(default["key"]) == set(drawn["key"]) and default["key"].n_unique() == 20
    assert set(attention) <= set(default["key"])


def test_the_chart_draws_a_hollow_base_a_filled_new_and_a_line_per_kernel(store, tmp_path):
    with tracekit.open(store, read_only=True) as tk:
        spec = charts.chart(tk, "diff-roofline", base="shapes_a", new="shapes_slow").to_dict()
    marks = [layer.get("mark") for layer in spec["layer"]]
    kinds = [m if isinstance(m, str) else m.get("type") for m in marks]
    assert kinds.count("line") >= 2 and kinds.count("point") == 2
    points = [m for m in marks if isinstance(m, dict) and m.get("type") == "point"]
    assert [m.get("filled") for m in points] == [False, True]
    sides = sorted(r["side"] for ds in spec_datasets(spec) for r in ds if "verdict" in r and "side" in r)
    assert sides.count(0) >= 1 and sides.count(1) >= 1
    assert "hollow: base: run 1 (shapes_a); filled: new: run 2 (shapes_slow)" in str(spec["title"])
    out = tmp_path / "r.png"
    assert cli_main(["--db", str(store), "chart", "diff-roofline", "-p", "base=shapes_a", "-p", "new=shapes_slow",
                     "-o", str(out)]) == 0
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize("params, said", [
    (["-p", "base=nsys", "-p", "new=shapes_a"], "chart diff-roofline: run 5 (nsys) [nsys] has no ncu scope"),
    (["-p", "base=shapes_a"], "chart diff-roofline: give the ncu runs to compare as -p base=RUN -p new=RUN"),
    (["-p", "base=shapes_a", "-p", "new=shapes_slow", "-p", "kernel=gemm"],
     "chart diff-roofline: no kernel of run 1 (shapes_a) or run 2 (shapes_slow) has 'gemm' in its name"),
    (["-p", "base=base", "-p", "new=half_sms", "-p", "kernel=gather"],
     "chart diff-roofline: nothing to plot; no kernel of run 3 (base) or run 4 (half_sms) compared does "
     "floating-point work"),
    (["--run", "shapes_a"], "chart diff-roofline: give the runs as -p base=RUN -p new=RUN, not --run"),
    (["-p", "base=99", "-p", "new=shapes_a"], "chart diff-roofline: no run or sweep '99' in "),
    (["-p", "base=shapes_a", "-p", "new=shapes_slow", "-p", "limit=-1"], "chart diff-roofline: limit=-1"),
])
def test_wrong_runs_and_values_are_one_line(store, tmp_path, capsys, params, said):
    capsys.readouterr()
    out = tmp_path / "x.html"
    assert cli_main(["--db", str(store), "chart", "diff-roofline", *params, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"tracekit: error: {said}"), err
    assert all(line.startswith("tracekit: warning: diff: the captures differ in setup") for line in err[:-1]), err
    assert not out.exists()


def test_a_report_of_two_ncu_runs_compared_draws_their_roofline(store, tmp_path):
    """report --vs of two ncu runs: the roofline compared follows the diff, then the kernels line
    by line (their Source Counters); a comparison of nsys runs has neither."""
    with tracekit.open(store) as tk:
        ncu = report.write_report(tk, tmp_path / "ncu.html", run="shapes_slow", vs="shapes_a")
        nsys = report.write_report(tk, tmp_path / "nsys.html", run="nsys_new", vs="nsys")
    html = ncu.read_text()
    assert html.index('id="diff"') < html.index('id="diff-roofline"') < html.index('id="diff-source"') \
        < html.index('id="roofline"')
    assert "tracekit chart diff-roofline -p base=1 -p new=2" in html
    assert 'id="diff-roofline"' not in nsys.read_text() and 'id="diff-source"' not in nsys.read_text()
    # the kernel line by line: its load in the loop regressed, as diff --by source says
    lines = html[html.index('<section id="diff-source">'):html.index('id="roofline"')]
    assert "What moved: Source lines (mean time per launch): shapes_kernel @ ncu_shapes.py:34 +6.628 µs (+48.8 %, " \
           "regressed)" in lines and "(tracekit diff 1 2 --by source)" in lines
    assert lines.count('class="verdict v-regressed"') == 1, lines  # (line 34; line 31's 56 ns immaterial)
    assert "immaterial: it moved by 56 ns a launch" in lines
    if chromium() is None:
        pytest.skip("no chromium")
    page = report_drawn(ncu)
    assert page.console_errors == [] and page.exceptions == [] and page.external_requests == []
    state = page.value
    assert state["failed"] == 0 and state["rendered"] == state["charts"] and state["marks"]["chart-diff-roofline"] > 0


def test_two_points_of_a_sweep_compare_in_the_chart_and_the_report(store, tmp_path):
    """Two ncu runs that are points of one sweep (hstu_sweep_tools: bs 1 and bs 8 at nc 128):
    the chart and the report's section draw them (a sweep's run once left a query open in the
    comparison, and the report failed)."""
    with tracekit.open(store) as tk:
        df = charts.diff_roofline_data(tk, base="point_bs1", new="point_bs8")
        path = report.write_report(tk, tmp_path / "r.html", run="point_bs8", vs="point_bs1")
    assert df["key"].n_unique() == 20 and set(df["side"]) == {0, 1}
    assert 'id="diff-roofline"' in path.read_text()


def test_a_report_without_the_roofline_metrics_is_named_not_drawn_as_one_sided(store):
    """ncu_range (a --replay-mode range report without the FLOP counters) against ncu_shapes_a:
    the chart names the run and the metrics it lacks, as chart roofline does, rather than
    drawing the other run's points alone as if the kernels were added."""
    with tracekit.open(store, read_only=True) as tk, pytest.raises(QueryError) as err:
        charts.diff_roofline_data(tk, base="ncu_range", new="shapes_a")
    assert str(err.value).startswith("chart diff-roofline: run 7 (ncu_range): nothing to plot; metrics not in the "
                                     "report: sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained")


def test_kernels_matched_by_launch_order_carry_each_runs_name(store):
    """ncu_shapes_a against ncu_diff_a: one kernel each, of other names, matched by launch
    order as diff matches them: the key is the new name, each point carries its own run's name
    and how it was matched, and the subtitle says so."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.diff_roofline_data(tk, base="shapes_a", new="ncu_diff_a")
        spec = charts.chart(tk, "diff-roofline", base="shapes_a", new="ncu_diff_a").to_dict()
    base, new = _by_side(df, "scale_add_kernel")
    assert (base["name"], new["name"]) == ("shapes_kernel", "scale_add_kernel")
    assert base["how"] == new["how"] == "matched by launch order to base kernel shapes_kernel"
    assert "matched by launch order, another kernel's name in each run (1)" in " ".join(spec["title"]["subtitle"])


def test_the_limit_and_the_kernel_filter_pick_among_kernels_with_floating_point_work(store):
    """The hstu pair's at::native kernels: the gathers do no floating-point work; -p limit=1
    still draws one kernel, one that has a point in each run."""
    with tracekit.open(store, read_only=True) as tk:
        one = charts.diff_roofline_data(tk, base="base", new="half_sms", kernel="at::native", limit=1)
    assert one["key"].n_unique() == 1 and one.height == 2
    assert (one["flops_per_s"] > 0).all() and "gather" not in one["key"][0]
