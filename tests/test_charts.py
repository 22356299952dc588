"""Charts: built from named queries, saved as html/png/svg/json; the roofline's points and
ceilings are the roofline query's numbers."""

from __future__ import annotations

import json
import lzma
import math
import re
import warnings
from pathlib import Path

import polars as pl
import pytest
from browser import chart_marks, chromium, load
from conftest import spec_datasets

import tracekit
from tracekit import charts
from tracekit.cli import main as cli_main
from tracekit.errors import ParamError, QueryError

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("charts") / "c.duckdb")
    t.ingest(DATA / "ncu_full" / "report.ncu-rep.xz", name="full")
    t.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="sections")
    t.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz", name="hstu")
    yield t
    t.close()


def _label(row: dict) -> str:
    """A launch's label in the ncu charts: its id, kernel and NVTX range (one range holds
    several kernels: hstu.candidate_scoring a gather and two GEMMs)."""
    return f"{row['kernel_id']}: {charts.short_name(row['name'], 24)} · {row['nvtx_range'].rsplit('/', 1)[-1]}"


def test_roofline_chart_is_the_query(tk):
    q = tk.query("roofline", run="full")
    spec = charts.chart(tk, "roofline", run="full").to_dict()
    rows = [r for ds in spec_datasets(spec) for r in ds]
    points = {r["label"]: r for r in rows if "ai_dram" in r}
    assert len(points) == 4
    for row in q.iter_rows(named=True):
        p = points[_label(row)]
        assert p["ai_dram"] == pytest.approx(row["ai_dram"]) and p["flops_per_s"] == pytest.approx(
            row["flops_per_s"]
        )
        assert p["roof_pct"] == pytest.approx(row["roof_pct"]) and p["bound"] == row["bound"]
    ceilings = {r["ceiling"] for r in rows if "ceiling" in r}
    names = {c.split(" ")[0] for c in ceilings}
    assert {
        "DRAM",
        "L2",
        "L1",
        "FP32",
        "Tensor",
    } <= names and "FP64" not in names  # no FP64 work: no FP64 ceiling
    # the bf16 tensor ceiling is drawn at the GEMM's own clock: its roof_pct reads off the chart
    bf16 = next(r for r in rows if r.get("ceiling", "").startswith("Tensor BF16"))
    assert bf16["y"] == pytest.approx(q["peak_tensor_bf16_flops_per_s"][0])
    layer_titles = json.dumps(spec)
    assert (
        "Arithmetic intensity at DRAM [FLOP/byte]" in layer_titles
        and "Performance [FLOP/s]" in layer_titles
    )
    assert '"type": "log"' in layer_titles.replace('":"', '": "')
    # the FP32 launches ran at three SM clocks: their ceiling is drawn at the highest, which the
    # subtitle says (a launch at a lower clock reads further below it than its roof_pct)
    fp32 = q.filter(pl.col("precision") == "fp32")["peak_fp32_flops_per_s"]
    assert fp32.min() < 0.99 * fp32.max()
    assert "where those differ, at the highest" in " ".join(spec["title"]["subtitle"])
    one = charts.roofline(q.filter(pl.col("kernel_id") == 0)).to_dict()
    assert "where those differ" not in one["title"]["subtitle"]


def test_roofline_chart_refuses_missing_metrics(tk):
    with pytest.raises(QueryError, match="sm__ops_path_tensor_"):
        charts.chart(tk, "roofline", run="sections")


def test_roofline_of_integer_kernels_says_they_have_no_point_rather_than_to_re_profile(tmp_path, capsys):
    """ncu_shapes_int (--set full, an int32 kernel): its FP counters were collected and are zero,
    so the chart says why it has no point and where to look instead; re-profiling would not help.
    The report's roofline section says the same, the rest of the report is drawn."""
    db = str(tmp_path / "int.duckdb")
    assert cli_main(["--db", db, "ingest", str(DATA / "ncu_shapes_int" / "report.ncu-rep.xz"), "--name", "int"]) == 0
    with tracekit.open(db, read_only=True) as t:
        df = t.query("roofline", run="int", limit=0)
        assert df.height == 6 and df["missing_metrics"].is_null().all() and (df["flop"] == 0).all()
        with pytest.raises(QueryError, match="no launch does floating-point work") as err:
            charts.chart(t, "roofline", run="int")
    assert "re-profile" not in str(err.value) and "speed-of-light" in str(err.value) and "ncu-summary" in str(err.value)
    # a report without the L2 and L1 counters still has all the DRAM point needs: not re-profiled for them
    l2 = "lts__lts2xbar_cycles_active.sum.{per_second,peak_sustained}"
    with pytest.raises(QueryError, match="no launch does floating-point work"):
        charts.roofline(df.with_columns(pl.lit(l2).alias("missing_metrics"), pl.lit(None).alias("ai_l2")))
    # a launch without its FP counters: only the metrics the DRAM point needs are asked for
    fp = "smsp__sass_thread_inst_executed_op_{fadd,fmul,ffma}_pred_on.sum.per_cycle_elapsed"
    with pytest.raises(QueryError, match=re.escape(f"metrics not in the report: {fp} (re-profile")):
        charts.roofline(df.with_columns(pl.lit(f"{fp}, {l2}").alias("missing_metrics"),
                                        pl.lit(None, pl.Float64).alias("flops_per_s")))
    capsys.readouterr()
    assert cli_main(["--db", db, "report", "--run", "int", "-o", str(tmp_path / "int.html")]) == 0
    text = (tmp_path / "int.html").read_text()
    assert '<p class="note">roofline: nothing to plot; no launch does floating-point work (its FP instruction' in text
    assert 'id="chart-occupancy"' in text


def _hierarchical_layers(spec: dict) -> tuple[list[dict], list[dict], set[str]]:
    """A hierarchical roofline's points (one row per launch and level), the rows its labels
    are drawn at, and the names of its ceilings."""
    points = next(layer for layer in spec["layer"] if "layer" in layer)
    assert [sub["mark"]["type"] for sub in points["layer"]] == ["line", "point", "point"]
    labels = [r for layer in spec["layer"] if layer.get("mark", {}).get("type") == "text"
              and layer["encoding"]["text"]["field"] == "label" for r in layer["data"]["values"]]
    ceilings = {r["ceiling"].rsplit(" ", 2)[0] for r in spec["layer"][0]["data"]["values"]}
    return points["data"]["values"], labels, ceilings


def test_hierarchical_roofline_chart_is_the_query(tk):
    """Each launch at its L1, L2 and DRAM intensities (the query's numbers), the point of its
    limiting level filled, every launch labelled once; the ceilings of the three levels and of
    the launches' precisions, or of the one precision asked."""
    q = tk.query("hierarchical-roofline", run="full")
    spec = charts.chart(tk, "hierarchical-roofline", run="full").to_dict()
    rows, labels, ceilings = _hierarchical_layers(spec)
    points = {(r["label"], r["level"]): r for r in rows}
    assert len(rows) == len(points) == 12
    for row in q.iter_rows(named=True):
        for level, col in (("L1", "ai_l1"), ("L2", "ai_l2"), ("DRAM", "ai_dram")):
            p = points[(_label(row), level)]
            assert p["ai"] == pytest.approx(row[col]) and p["flops_per_s"] == pytest.approx(row["flops_per_s"])
            assert p["limits"] == (level == row["limiter"]) and p["limiter"] == row["limiter"]
    # filled: the DRAM points of the three DRAM-bound launches; the compute-bound GEMM has none
    assert sorted(k for k, p in points.items() if p["limits"]) == sorted(
        (_label(r), "DRAM") for r in q.rows(named=True) if r["limiter"] == "DRAM") and len(
        [p for p in rows if p["limits"]]) == 3
    filled = next(layer for layer in spec["layer"] if "layer" in layer)["layer"][2]
    assert filled["mark"]["filled"] is True and filled["transform"] == [{"filter": "datum.limits"}]
    assert sorted(r["label"] for r in labels) == sorted(_label(r) for r in q.rows(named=True))  # (each once)
    assert ceilings == {"L1", "L2", "DRAM", "FP32", "Tensor BF16"}
    assert spec["title"]["text"] == "Hierarchical roofline" and "L1, L2 and DRAM" in json.dumps(spec["layer"][0])
    one = charts.chart(tk, "hierarchical-roofline", run="full", precision="fp32").to_dict()
    rows, _, ceilings = _hierarchical_layers(one)
    assert ceilings == {"L1", "L2", "DRAM", "FP32"} and len(rows) == 9
    assert one["title"]["text"] == "Hierarchical roofline, FP32"


@pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_hierarchical_roofline_draws_every_point_in_chromium(tk, tmp_path):
    """In a browser: the 12 points of ncu_full's 4 launches (hollow and filled, one dataset
    for both and the lines joining them), a line per launch, a label per launch."""
    page = chart_marks(charts.save(charts.chart(tk, "hierarchical-roofline", run="full"), tmp_path / "h.html"))
    assert page.console_errors == [] and page.exceptions == [] and page.console_warnings == []
    marks = page.value["marks"]
    assert page.value["error"] is None and marks["symbol"] == 12
    # (a line mark's items are its vertices: a launch's three points; two for each ceiling: L1,
    # L2, DRAM, FP32, Tensor BF16)
    assert marks["line"] == 4 * 3 + 5 * 2
    assert marks["text"] == 4 + 5  # (a label per launch; the ceilings' labels)


def test_hierarchical_roofline_chart_of_a_report_without_some_counters(tk):
    """ncu_sections has no L1, L2, FP16 or tensor counters: its FP32 points are drawn at DRAM
    alone, under the DRAM ceiling alone, none filled, which the subtitle says is for want of
    counters, not compute; launches with no FLOP rate at all: the metrics to profile for."""
    for precision in (None, "fp32"):  # (the launches' own: FP32, of the precisions the report has)
        spec = charts.chart(tk, "hierarchical-roofline", run="sections", precision=precision).to_dict()
        rows, _, ceilings = _hierarchical_layers(spec)
        assert [r["level"] for r in rows] == ["DRAM"] * 3 and ceilings == {"DRAM", "FP32"}
        assert not any(r["limits"] for r in rows)  # (no limiter judged on one level)
        assert "compute does, or the report lacks a level's counters" in " ".join(spec["title"]["subtitle"])
    full = charts.chart(tk, "hierarchical-roofline", run="full").to_dict()
    assert "lacks a level's counters" not in " ".join(full["title"]["subtitle"])
    df = tk.query("hierarchical-roofline", run="sections").with_columns(pl.lit(None, pl.Float64).alias("flops_per_s"))
    with pytest.raises(QueryError, match=r"nothing to plot; no launch has its precision's FLOP rate \(metrics not in "
                                         r"the report: .*lts__lts2xbar_cycles_active.*sm__ops_path_tensor_"):
        charts.hierarchical_roofline(df)
    # no ceiling to draw (the peak counters missing): one line, not a ValueError of min() over nothing
    with pytest.raises(QueryError, match=r"^hierarchical-roofline: nothing to plot; the report has no compute "
                                         r"ceiling for the launches"):
        charts.hierarchical_roofline(tk.query("hierarchical-roofline", run="full").with_columns(
            pl.lit(None, pl.Float64).alias("peak_flops_per_s")))


def test_occupancy_chart(tk):
    spec = charts.chart(tk, "occupancy", run="full").to_dict()
    rows = [r for ds in spec_datasets(spec) for r in ds]
    bars = [
        json.loads(b)
        for b in sorted({json.dumps(r, sort_keys=True) for r in rows if "measure" in r})
    ]
    assert len(bars) == 8
    gemm = [r for r in bars if r["label"] == "0: nvjet_sm90_tst_256x128_… · gemm_bf16"]
    assert {r["measure"]: round(r["pct"], 2) for r in gemm} == {
        "theoretical": 18.75,
        "achieved": 14.64,
    }
    assert any(r.get("text") == "limit: registers, shared_mem" for r in rows)
    # a tick where one block more per SM would put each launch that has room for it, as the query says
    q = tk.query("occupancy", run="full").filter(pl.col("next_occupancy_pct").is_not_null())
    ticks = {r["label"]: (r["next_pct"], r["needs"]) for r in rows if "next_pct" in r}
    assert sorted(ticks.values()) == sorted(zip(q["next_occupancy_pct"], q["next_needs"], strict=True))
    assert ticks["0: nvjet_sm90_tst_256x128_… · gemm_bf16"] == (
        37.5, "registers 168 -> 80; shared memory 213,188 -> 115,712 B")


def test_occupancy_chart_marks_a_better_block_size(tmp_path):
    """ncu_occupancy_b's GEMM, held at 6.25 % by its shared memory per block, would hold twice the
    warps at 256 threads a block: a diamond at 12.5 % says so (hover: the size); its polynomial
    kernel is at its best block size already: no diamond."""
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(DATA / "ncu_occupancy_b" / "report.ncu-rep.xz", name="b")
        spec = charts.chart(t, "occupancy", run="b").to_dict()
    rows = [r for ds in spec_datasets(spec) for r in ds]
    diamonds = sorted((r["label"], r["best_size"], r["best_pct"]) for r in rows if "best_size" in r)
    assert diamonds == [("0: matmul_kernel · matmul", 256, 12.5), ("1: matmul_kernel · matmul", 256, 12.5)]
    assert "a diamond where another block size" in " ".join(spec["title"]["subtitle"])


@pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_occupancy_chart_draws_its_diamonds_in_chromium(tmp_path):
    """In a browser: ncu_occupancy_b's two GEMM launches' diamonds are the chart's only symbols."""
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(DATA / "ncu_occupancy_b" / "report.ncu-rep.xz", name="b")
        page = chart_marks(charts.save(charts.chart(t, "occupancy", run="b"), tmp_path / "o.html"))
    assert page.console_errors == [] and page.exceptions == [] and page.console_warnings == []
    assert page.value["error"] is None and page.value["marks"]["symbol"] == 2


def test_warp_stalls_chart(tk):
    q = tk.query("warp-stalls", run="full", limit=0)
    rows = [r for ds in spec_datasets(charts.chart(tk, "warp-stalls", run="full").to_dict()) for r in ds]
    segments = [r for r in rows if "reason" in r]
    totals = {r["label"]: r["total"] for r in rows if "reason" not in r}
    # one bar per launch: its states add up to the query's, the small ones folded as "other"
    launches = q.select("kernel_id", "name", "nvtx_range").unique().sort("kernel_id").iter_rows(named=True)
    assert list(totals) == [_label(r) for r in launches]
    assert list(totals)[2] == "2: softmax_kernel · triton_softmax"
    for kid, label in enumerate(totals):
        want = q.filter(pl.col("kernel_id") == kid)["cycles_per_issue"].sum()
        assert totals[label] == pytest.approx(want)
        assert sum(r["cycles_per_issue"] for r in segments if r["label"] == label) == pytest.approx(want)
    reasons = {r["reason"] for r in segments}
    assert len(reasons) == charts.STALL_REASONS + 1 and "other" in reasons and "long_scoreboard" in reasons
    gemm = {r["reason"]: r["cycles_per_issue"] for r in segments if r["label"].endswith(" · gemm_bf16")}
    assert round(gemm["barrier"], 2) == 5.96  # ncu: "6.0 cycles being stalled ... at a CTA barrier"
    with pytest.raises(QueryError, match=r"^warp-stalls: run \d+ \(sections\) has no warp state metrics"):
        charts.chart(tk, "warp-stalls", run="sections")


def test_source_hot_spots_chart(tk):
    q = tk.query("ncu-source", run="full", limit=charts.MAX_BARS)
    rows = [r for ds in spec_datasets(charts.chart(tk, "ncu-source", run="full").to_dict()) for r in ds]
    bars = [r for r in rows if "top_stall" in r]
    # one bar per row of the query with samples, in its order; four kernels: the name leads the label
    want = q.filter(pl.col("samples") > 0)
    assert [r["samples"] for r in bars[: want.height]] == want["samples"].to_list()
    labels = [r["label"] for r in bars[: want.height]]
    assert len(set(labels)) == len(labels)
    assert any("no line information" in x for x in labels)  # the library kernels (nvjet, reduce)
    assert any(x.startswith("triton_softmax") or "ncu_kernels.py:" in x for x in labels)
    with pytest.raises(QueryError, match=r"^ncu-source: run \d+ \(sections\) has no instruction-level data"):
        charts.chart(tk, "ncu-source", run="sections")


def test_top_kernels_and_nvtx_timeline(tk):
    q = tk.query("top-kernels", run="hstu")
    rows = [
        r for ds in spec_datasets(charts.chart(tk, "top-kernels", run="hstu").to_dict()) for r in ds
    ]
    assert len(rows) == q.height
    assert rows[0]["total_ms"] == pytest.approx(q["total_ns"][0] / 1e6)
    labels = [r["short"] for r in rows]
    assert len(set(labels)) == len(labels)  # instantiations of one template told apart
    tl = [
        r for ds in spec_datasets(charts.chart(tk, "nvtx-timeline", run="hstu").to_dict()) for r in ds
    ]
    assert tl and all(r["end_ms"] >= r["start_ms"] for r in tl)


def test_a_chart_its_limit_cut_says_so(tmp_path):
    """nsys_cpu_hot has 2,400 NVTX ranges over 3.6 s; nvtx-timeline draws the first 2,000
    (its limit): its subtitle says how many of how many, so that a timeline ending early
    does not read as the capture's end; -p limit=0 draws them all, and says nothing."""
    with tracekit.open(tmp_path / "c.duckdb") as t:
        t.ingest(DATA / "nsys_cpu_hot" / "export.sqlite.xz", name="cpu")
        cut = charts.chart(t, "nvtx-timeline", run="cpu").to_dict()
        whole = charts.chart(t, "nvtx-timeline", run="cpu", limit="0").to_dict()
        api = charts.chart(t, "api-summary", run="cpu", limit="3").to_dict()
        calls = t.query("api-summary", run="cpu", limit=0).height
    assert len([r for ds in spec_datasets(cut) for r in ds]) == 2000
    assert cut["title"] == {"text": "NVTX timeline", "subtitle": [
        "the first 2,000 of the 2,400 rows of query nvtx-ranges drawn (-p limit=0 for all)"]}
    assert len([r for ds in spec_datasets(whole) for r in ds]) == 2400 and whole["title"] == "NVTX timeline"
    assert calls > 3 and api["title"]["subtitle"] == [
        "bar label: % of CUDA API time (summed over threads)",
        f"the first 3 of the {calls} rows of query api-summary drawn (-p limit=0 for all)"]


def test_api_summary_and_kernel_durations_charts_are_their_queries(tk):
    """chart api-summary: a bar per CUDA API function, its host time and share as the
    query gives them (the nsys stats twin); chart kernel-durations: per kernel the
    top-kernels row's min, median, p95, p99 and max in us, also with -p skip."""
    api = tk.query("api-summary", run="hstu", limit=20)
    rows = [r for ds in spec_datasets(charts.chart(tk, "api-summary", run="hstu").to_dict()) for r in ds]
    assert [r["name"] for r in rows] == api["name"].to_list() and len(rows) > 5
    assert [r["total_ms"] for r in rows] == pytest.approx([v / 1e6 for v in api["total_ns"]])
    assert [r["time_pct"] for r in rows] == api["time_pct"].to_list()
    for skip in (0, 2):
        top = tk.query("top-kernels", run="hstu", limit=20, skip=skip)
        rows = [r for ds in spec_datasets(charts.chart(tk, "kernel-durations", run="hstu", skip=skip).to_dict())
                for r in ds]
        assert [r["name"] for r in rows] == top["name"].to_list()
        for r, q in zip(rows, top.iter_rows(named=True), strict=True):
            assert [r[f"{c}_us"] for c in ("min", "med", "p95", "p99", "max")] == pytest.approx(
                [q[f"{c}_ns"] / 1e3 for c in ("min", "med", "p95", "p99", "max")])
            assert r["min_us"] <= r["med_us"] <= r["p95_us"] <= r["p99_us"] <= r["max_us"]
    with pytest.raises(QueryError, match="is an ncu run; api-summary needs an nsys run"):
        charts.chart(tk, "api-summary", run="full")


def test_short_name():
    assert (
        charts.short_name("void at::native::reduce_kernel<512, 1, at::ReduceOp<float>>(T3)")
        == "at::native::reduce_kernel"
    )
    assert charts.short_name(
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>(int)"
    ) == ("at::native::vectorized_layer_norm_kernel")


@pytest.mark.parametrize(
    "ext,magic",
    [(".png", b"\x89PNG"), (".svg", b"<svg"), (".html", b"<!DOCTYPE html>"), (".json", b"{")],
)
def test_save_formats(tk, tmp_path, ext, magic):
    out = charts.save(charts.chart(tk, "roofline", run="full"), tmp_path / f"r{ext}")
    data = out.read_bytes()
    assert data.lstrip().startswith(magic), data[:40]
    if ext == ".json":
        assert "vega-lite" in json.loads(data)["$schema"]
    if ext == ".html":
        assert b"vega" in data and b"cdn.jsdelivr" not in data  # self-contained, works offline


def test_names_with_control_characters_are_drawn_to_svg_and_png(tmp_path):
    """A kernel name or NVTX text holding a terminal escape (real captures, edited: ncu_full's
    raw CSV, an nsys export's StringIds) aborted the process in vl-convert's SVG parser (a
    Rust panic, exit 134, no file) for chart -o .svg and .png; now drawn, each character XML
    forbids written as the terminal table writes it (``\\x1b``)."""
    import csv
    import io
    import sqlite3
    import xml.etree.ElementTree as ET

    rows = list(csv.reader(io.StringIO(lzma.open(DATA / "ncu_full" / "raw.csv.xz", "rt", newline="").read())))
    name = rows[0].index("Kernel Name")
    rows[2][name] = "k\x1b[31mRED\x07"
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    (tmp_path / "raw.csv").write_text(text.getvalue())
    export = tmp_path / "export.sqlite"
    export.write_bytes(lzma.open(DATA / "nsys_diff_base_a" / "export.sqlite.xz").read())
    with sqlite3.connect(export) as con:  # (every string: kernel names, NVTX texts registered or not)
        con.execute("UPDATE StringIds SET value = value || char(27) || '[0m'")
        con.execute("UPDATE NVTX_EVENTS SET text = text || char(27) || '[0m' WHERE text IS NOT NULL")
    con.close()
    db = str(tmp_path / "s.duckdb")
    assert cli_main(["--db", db, "ingest", str(tmp_path / "raw.csv"), str(export)]) == 0
    for chart, run in (("roofline", "raw"), ("top-kernels", "export"), ("nvtx-timeline", "export")):
        for ext in (".svg", ".png"):
            out = tmp_path / f"{chart}{ext}"
            assert cli_main(["--db", db, "chart", chart, "--run", run, "-o", str(out)]) == 0
            if ext == ".png":
                assert out.read_bytes().startswith(b"\x89PNG")
                continue
            svg = out.read_text()
            ET.fromstring(svg)  # (well-formed XML)
            assert "\x1b" not in svg and "\x07" not in svg
            assert ("k\\x1b[31mRED\\x07" if chart == "roofline" else "\\x1b[0m") in svg, chart


#: the data marks a Vega view drew (items of marks with role "mark", not axes or legends)
_MARKS_JS = """(function () {
  var c = window.tracekitChart;
  if (c.error) return {error: c.error};
  function n(node) {
    var k = 0;
    if (node.marktype && node.role === "mark" && node.marktype !== "group") k += (node.items || []).length;
    (node.items || []).forEach(function (it) { k += n(it); });
    return k;
  }
  return {marks: n(c.view.scenegraph().root)};
})()"""


@pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_html_chart_draws_offline_in_chromium(tk, tmp_path):
    """The .html chart (tracekit's page, the cached Vega bundle inlined) draws every
    roofline point in a real browser with the network off, within the page's width: the
    full report's launches ran at different clocks, which the subtitle explains in 275
    characters, in lines (Vega does not wrap a title: one line drew the chart 1,616 px wide)."""
    ch = charts.chart(tk, "roofline", run="full")
    out = charts.save(ch, tmp_path / "roof.html")
    page = load(out, "window.tracekitChart && window.tracekitChart.done",
                f"Object.assign({_MARKS_JS}, {{width: document.documentElement.scrollWidth, actions: "
                "Array.from(document.querySelectorAll('.vega-actions a'), a => a.textContent)})")
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
    # (its menu saves and shows the chart; it sends nothing to the Vega Editor's site)
    assert page.value["actions"] == ["Save as SVG", "Save as PNG", "View Source", "View Compiled Vega"]
    points = tk.query("roofline", run="full", limit=0).height
    assert page.value.get("error") is None and page.value["marks"] >= points > 0
    assert page.value["width"] <= 1400  # (the window's: no horizontal scroll)
    subtitle = ch.to_dict()["title"]["subtitle"]
    assert isinstance(subtitle, list) and len(subtitle) > 1
    assert all(len(line) <= charts.SUBTITLE_CHARS for line in subtitle)
    assert " ".join(subtitle).endswith("which is against its own clock's ceiling")


@pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
@pytest.mark.parametrize("name", ["roofline", "hierarchical-roofline", "occupancy", "warp-stalls", "ncu-source"])
def test_an_ncu_chart_draws_without_a_vega_warning(tk, tmp_path, name):
    """Each ncu chart draws in a browser without a warning of Vega's in the console: the
    occupancy chart's limit text, a layer without the bars' yOffset, sized the y scale
    another way than the bars ("WARN Conflicting scale property "range""), in every ncu
    report too."""
    out = charts.save(charts.chart(tk, name, run="full"), tmp_path / f"{name}.html")
    page = load(out, "window.tracekitChart && window.tracekitChart.done", _MARKS_JS)
    assert page.console_errors == [] and page.exceptions == [] and page.console_warnings == []
    assert page.value.get("error") is None and page.value["marks"] > 0


@pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_kernel_names_with_markup_do_not_stop_the_page(tmp_path):
    """Kernel names are user text: `<!--<script>` inside the chart's JSON turned the HTML
    parser's script states on and the page drew nothing. A real export with every kernel
    renamed so draws every bar."""
    import shutil
    import sqlite3

    from tracekit.ingest import materialized

    export = tmp_path / "markup.sqlite"
    with materialized(DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz") as src:
        shutil.copy(src, export)
    with sqlite3.connect(export) as con:
        con.execute("UPDATE StringIds SET value = '<!--<script>k' || id || '</script>&amp;' WHERE id IN "
                    "(SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL UNION "
                    "SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    with tracekit.open(tmp_path / "m.duckdb") as t:
        t.ingest(export)
        rows = t.query("top-kernels", limit=0)
        assert rows.height >= 2 and rows["name"].str.starts_with("<!--<script>k").all()
        out = charts.save(charts.chart(t, "top-kernels"), tmp_path / "top.html")
    html = out.read_text()
    assert "<!--<script>k" not in html and "</script>&amp;" not in html  # escaped inside the JSON
    page = load(out, "window.tracekitChart && window.tracekitChart.done", _MARKS_JS)
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == []
    assert page.value.get("error") is None and page.value["marks"] >= rows.height


@pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_data_past_json_text_rows_draws_with_markup_and_non_finite_values(tmp_path):
    """A chart's data past JSON_TEXT_ROWS rows is JSON text Vega-Lite parses in the page:
    names with markup (escaped inside the page, text inside text) and NaN/inf (null: JSON
    has none) draw in a browser, a mark per finite value, and in the PNG vl-convert
    renders; below the threshold, the same rows as a list."""
    import altair as alt

    rows = [{"name": f"<!--<script>k{i}</script>&amp;", "ms": float("nan") if i % 7 == 0 else
             float("inf") if i % 11 == 0 else float(i)} for i in range(charts.JSON_TEXT_ROWS + 100)]
    data = charts._data(rows)
    assert isinstance(data.values, str) and data.format.type == "json"
    parsed = json.loads(data.values)
    assert [r["name"] for r in parsed] == [r["name"] for r in rows]
    assert all(p["ms"] is None for p, r in zip(parsed, rows, strict=True) if r["ms"] != r["ms"] or r["ms"] == float("inf"))
    small = charts._data(rows[:10])
    assert isinstance(small.values, list) and small.values[0]["ms"] is None and small.values[1]["ms"] == 1.0
    ch = alt.Chart(data).mark_tick().encode(x=alt.X("name:N", axis=None), y="ms:Q")
    html = charts.save(ch, tmp_path / "text.html")
    assert "<!--<script>" not in html.read_text() and "</script>&amp;" not in html.read_text()
    page = load(html, "window.tracekitChart && window.tracekitChart.done", _MARKS_JS)
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.value.get("error") is None
    assert page.value["marks"] == sum(math.isfinite(r["ms"]) for r in rows) == 467  # (Vega-Lite leaves nulls out)
    assert charts.save(ch, tmp_path / "text.png").read_bytes().startswith(b"\x89PNG")


def test_vega_bundle_is_built_once_then_cached(tmp_path, monkeypatch):
    import vl_convert as vlc

    from tracekit import vega

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    js = vega.bundle()
    (cached,) = (tmp_path / "cache" / "tracekit").iterdir()
    assert cached.read_text(encoding="utf-8") == js and "vegaEmbed" in js and "</script" not in js

    def rebuilt(**kw):
        raise AssertionError("the bundle was built again")

    monkeypatch.setattr(vlc, "javascript_bundle", rebuilt)
    assert vega.bundle() == js
    # a cache folder that cannot be written: built each time, nothing fails
    monkeypatch.undo()
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert vega.bundle() == js


def test_a_chart_that_cannot_be_written_is_not_drawn_and_leaves_nothing(small_store, tmp_path, monkeypatch, capsys):
    """The output and its format are checked before the chart is drawn: a command that fails
    on them writes no file, not even the Vega bundle's cache (made by the first drawing)."""
    for var in ("HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / "home"))
    db = str(small_store)
    (tmp_path / "d.html").mkdir()
    for out, msg in ((tmp_path / "no" / "x.html", "does not exist"), (tmp_path / "x.pdf", "unknown chart format"),
                     (tmp_path / "d.html", "is a folder")):
        assert cli_main(["--db", db, "chart", "top-kernels", "--run", "nsys_run", "-o", str(out)]) == 2
        assert msg in capsys.readouterr().err
        assert not (tmp_path / "home").exists() and not (tmp_path / "no").exists()
    assert cli_main(["--db", db, "chart", "top-kernels", "--run", "nsys_run", "-o", str(tmp_path / "x.html")]) == 0
    assert [p.name for p in (tmp_path / "home" / "tracekit").iterdir()][0].startswith("vega-bundle-")


def test_errors(tk, tmp_path):
    with pytest.raises(QueryError, match="unknown chart"):
        charts.chart(tk, "pie")
    with pytest.raises(ParamError, match="unknown chart format"):
        charts.save(charts.chart(tk, "occupancy", run="full"), tmp_path / "x.pdf")
    with pytest.raises(ParamError, match="chart diff: unknown parameter 'bogus' .declared: base, new, by"):
        charts.chart(tk, "diff", base="full", new="full", bogus="3")


def test_a_sweep_chart_asked_for_a_run_says_how_to_pick_its_sweep(tmp_path):
    """sweep-latency spans runs: chart sweep-heatmap --run R is an error that names what
    picks the sweep (-p sweep=), which then draws the sweep of R, not the latest one."""
    with tracekit.open(tmp_path / "s.duckdb") as t:
        from tracekit.ingest import run_folders

        for folder in run_folders([DATA / "hstu_sweep" / "runs", DATA / "sweep_pair" / "a"]):
            t.ingest(folder)  # (sweep_pair's a, the latest sweep: 4 points)
        run = t.sql("SELECT min(run_id) FROM runs")[0, 0]  # (a point of hstu_sweep: 16 points)
        with pytest.raises(ParamError, match=r"^chart sweep-heatmap: its query sweep-latency spans runs and takes "
                                             r"no --run; it takes -p sweep= \(see `tracekit queries sweep-latency`\)$"):
            charts.chart(t, "sweep-heatmap", run=str(run))
        cells = [r for ds in spec_datasets(charts.chart(t, "sweep-heatmap", sweep=str(run)).to_dict()) for r in ds]
        assert len({(r["bs"], r["nc"]) for r in cells}) == 16


def test_done_when_fresh_clone_flow(tmp_path, capsys):
    """tracekit ingest report.ncu-rep && tracekit query roofline && tracekit chart roofline -o roofline.png"""
    rep = tmp_path / "report.ncu-rep"
    rep.write_bytes(lzma.decompress((DATA / "ncu_full" / "report.ncu-rep.xz").read_bytes()))
    db = str(tmp_path / "tracekit.duckdb")
    assert cli_main(["--db", db, "ingest", str(rep)]) == 0
    capsys.readouterr()
    assert cli_main(["--db", db, "query", "roofline", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split(",")
    assert header[:3] == ["run_id", "kernel_id", "name"] and "bound" in header
    png = tmp_path / "roofline.png"
    assert cli_main(["--db", db, "chart", "roofline", "-o", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 50_000


def test_sweep_latency_builder():
    import polars as pl

    df = pl.DataFrame(
        {
            "bs": [1, 2, 1, 2],
            "nc": [256, 256, 1024, 1024],
            "median_ms": [1.0, 2.0, 3.0, 4.0],
            "p95_ms": [1.5, 2.5, 3.5, 4.5],
        }
    )
    rows = [r for ds in spec_datasets(charts.sweep_latency(df).to_dict()) for r in ds]
    assert {(r["bs"], r["nc"], r["stat"]): r["ms"] for r in rows}[(2, 1024, "p95")] == 4.5
    with pytest.raises(QueryError, match="p95_ms"):
        charts.sweep_latency(df.drop("p95_ms"))


def test_diff_chart_axis_holds_the_intervals_and_its_cli_says_warnings_and_bad_values(tmp_path, capsys):
    """chart diff on real pairs: (a) ncu_shapes_a against _slow, whose interval reaches past
    its change (+13 … +35 %): the x domain holds the whole whisker; (b) two sweeps of other
    attention backends (sweep_pair a, c): the setup warning is the CLI's one `tracekit:
    warning:` line, not Python's warning text; (c) a bad value is named alone."""
    db = str(tmp_path / "d.duckdb")
    assert cli_main(["--db", db, "ingest", str(DATA / "ncu_shapes_a" / "report.ncu-rep.xz"),
                     str(DATA / "ncu_shapes_slow" / "report.ncu-rep.xz")]) == 0
    with tracekit.open(db, read_only=True) as tk:
        spec = charts.chart(tk, "diff", base="1", new="2").to_dict()
    rows = [r for ds in spec_datasets(spec) for r in ds if "high" in r]
    ends = [abs(v) for r in rows for v in (r["low"], r["high"], r["delta_pct"]) if v is not None]
    assert max(ends) > 1.5 * max(abs(r["delta_pct"]) for r in rows)  # (an interval past its change)
    domains = {tuple(d) for d in _domains(spec)}
    assert domains and all(lo <= -max(ends) and hi >= max(ends) for lo, hi in domains)

    sweeps = str(tmp_path / "s.duckdb")
    assert cli_main(["--db", sweeps, "ingest", str(DATA / "sweep_pair" / "a"), str(DATA / "sweep_pair" / "c")]) == 0
    capsys.readouterr()
    assert cli_main(["--db", sweeps, "chart", "diff", "-p", "base=1", "-p", "new=5", "-o", str(tmp_path / "s.json")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("tracekit: warning: diff: the captures differ in setup: attention"), err

    for bad, said in (("threshold=abc", "threshold='abc': a number expected"),
                      ("limit=x", "limit='x': an integer expected"),
                      # what the user typed, as -p: not the --threshold of tracekit diff
                      ("threshold=nan", "threshold='nan': must be a positive percentage (e.g. 5)"),
                      ("threshold=-5", "threshold='-5': must be a positive percentage (e.g. 5)"),
                      # digits 0-9 only, as every integer given as text (tracekit.numbers)
                      ("limit=\u0663", "limit='\u0663': an integer expected"),
                      ("threshold=\u0663", "threshold='\u0663': a number expected"),
                      # diff's --by, named as the chart's -p
                      ("by=gpux", "by='gpux': choose from kernel, nvtx, api, memcpy, gpu, um, cpu, python, memory, "
                                  "ncu, source, bench, sweep"),
                      # a scope the runs lack, said as -p too
                      ("by=ncu", "by=ncu: run 1 (20261124T195347.140Z-bs1-nc128-none) [timing, sweep "
                                 "sweep-20261124T195347.082Z] has no ncu scope (it has sweep)")):
        assert cli_main(["--db", sweeps, "chart", "diff", "-p", "base=1", "-p", "new=5", "-p", bad,
                         "-o", str(tmp_path / "s.json")]) == 2
        assert capsys.readouterr().err == f"tracekit: error: chart diff: {said}\n"
    # a limit as tables print it, as a query's -p limit takes it
    assert cli_main(["--db", sweeps, "chart", "diff", "-p", "base=1", "-p", "new=5", "-p", "limit=1,000",
                     "-o", str(tmp_path / "s.json")]) == 0


def _axes(node):
    """Every (scale, axis) of an x encoding of a Vega-Lite spec."""
    if isinstance(node, dict):
        x = node.get("encoding", {}).get("x") if isinstance(node.get("encoding"), dict) else None
        if isinstance(x, dict) and "scale" in x:
            yield x["scale"], x.get("axis", {})
        for v in node.values():
            yield from _axes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _axes(v)


def test_a_symmetric_log_axis_of_changes_has_ticks_apart(tmp_path):
    """The HSTU sweep against the reference attention backend (real, the H200): changes up to
    +1,500 %, drawn on a symmetric log scale whose ticks are set about evenly apart on it (Vega's
    own read '700800' at +700 and +800 %); a chart of small changes keeps Vega's ticks."""
    sweeps = DATA / "hstu_nsys_sweep"
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(sweeps / "base"), str(sweeps / "reference"),
                     str(sweeps / "again")]) == 0
    ids = [json.loads(next((sweeps / w).glob("sweep-*.json")).read_text())["sweep"] for w in ("base", "reference", "again")]
    with tracekit.open(db, read_only=True) as tk, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the setup differs: the attention backend)
        for spec in (charts.chart(tk, "diff", base=ids[0], new=ids[1]).to_dict(),
                     charts.chart(tk, "compare", base=ids[0], runs=ids[1]).to_dict()):
            # (the layers share the scale and its axis: the bars' sets the ticks)
            axes = [(sc, ax) for sc, ax in _axes(spec) if sc.get("type") == "symlog" and ax]
            assert axes, spec
            for scale, axis in axes:
                low, high = scale["domain"]
                assert high > 1500 and axis["values"] == [t for t in charts._SYMLOG_TICKS if low <= t <= high]
                assert {0, 100, 1000} <= set(axis["values"]) and axis["labelOverlap"] == "greedy"
        quiet = charts.chart(tk, "diff", base=ids[0], new=ids[2]).to_dict()
        assert not any(sc.get("type") == "symlog" or "values" in ax for sc, ax in _axes(quiet))


def _domains(node):
    """Every numeric scale domain of a Vega-Lite spec."""
    if isinstance(node, dict):
        d = node.get("domain")
        if isinstance(d, list) and len(d) == 2 and all(isinstance(x, int | float) for x in d):
            yield d
        for v in node.values():
            yield from _domains(v)
    elif isinstance(node, list):
        for v in node:
            yield from _domains(v)


def test_nvtx_paths_are_labelled_as_the_table_reads_them(tmp_path):
    """kernels-by-nvtx of nsys_odd_nvtx: the range pushed without text reads (unnamed), not a
    blank label; the deep paths (deep/level/level/...), which the axis would cut alike at
    their end, each get a label of their own; the tooltip keeps the path as nsys has it."""
    from conftest import NSYS_EXPORTS

    with tracekit.open(tmp_path / "odd.duckdb") as t:
        t.ingest(NSYS_EXPORTS["odd_nvtx"])
        df = t.query("kernels-by-nvtx", limit=0)
        spec = charts.chart(t, "kernels-by-nvtx", limit=0).to_dict()
    rows = [r for ds in spec_datasets(spec) for r in ds if "label" in r]
    assert sorted(r["path"] for r in rows) == sorted(df["path"].to_list())
    by_path = {r["path"]: r["label"] for r in rows}
    assert by_path[""] == "(unnamed)" and len(set(by_path.values())) == len(by_path)
    assert all(len(lab) <= 64 for lab in by_path.values())
    assert spec["layer"][0]["encoding"]["y"]["field"] == "label"
