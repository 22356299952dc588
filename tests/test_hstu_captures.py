"""The real `tracekit capture` outputs of the HSTU workload (large preset, H200) analyse end to end."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import DATA

import tracekit


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("hstu") / "h.duckdb")
    t.ingest(DATA / "hstu_capture_nsys", name="nsys")
    t.ingest(DATA / "hstu_capture_ncu", name="ncu")
    yield t
    t.close()


def test_run_parameters_and_requests(tk):
    runs = {r["name"]: r for r in tk.runs().to_dicts()}
    assert json.loads(runs["nsys"]["params"])["bs"] == 8 and json.loads(runs["nsys"]["params"])["nc"] == 1024
    assert runs["nsys"]["kind"] == "nsys,timing" and runs["nsys"]["gpu"] == "NVIDIA H200"
    timed = tk.sql("SELECT count(*) AS n FROM requests r JOIN runs USING (run_id) WHERE runs.name = 'nsys' AND phase = 'timed'")
    assert timed["n"][0] == 30


def test_tool_versions(tk):
    """nsys says its version in the export, an ncu report in its "Nsight Compute Target"
    entry (the folder's raw page, read first, does not: the report beside it does); the
    run folder's ``ncu --version`` (meta.json, at capture) says the same."""
    runs = {r["name"]: r for r in tk.runs().to_dicts()}
    assert runs["nsys"]["tool_version"].startswith("2025.")
    assert runs["ncu"]["tool_version"] == "2025.3.1.0 (build 36398880)"


def test_nvtx_paths_of_the_workload(tk):
    df = tk.query("kernels-by-nvtx", run="nsys", depth=3, limit=0)
    paths = set(df["path"].to_list())
    for layer in range(8):
        assert f"hstu.request/hstu.layer{layer}/hstu_attention" in paths
    attn = df.filter(df["path"].str.ends_with("/hstu_attention"))
    assert set(attn["top_kernel"].to_list()) == {"_hstu_cached_kernel"}
    # outside every range: only the L2-flush fill kernel run before each timed request
    outside = df.filter(df["path"] == "(no range)")
    assert outside["launches"].to_list() == [30] and outside["distinct_kernels"].to_list() == [1]


def test_ncu_kernel_classes(tk):
    k = tk.query("ncu-kernels", run="ncu", limit=0)
    ranges = set(k["nvtx_range"].to_list())
    assert {"hstu.embedding", "uvqk_linear", "hstu_attention"} <= ranges
    roof = tk.query("roofline", run="ncu", limit=0)
    attn = roof.filter(roof["name"].str.contains("_hstu_cached"))  # the persistent _hstu_cached_sk_kernel
    assert attn.height == 8 and (attn["tensor_flops_per_s"] > 0).all()


def test_the_capture_says_why_the_attention_kernel_stalls(tk):
    """tracekit capture --tool ncu collects the warp states and their sampling, and the
    report carries ncu's rule results: both answer for the HSTU attention kernel."""
    stalls = tk.query("warp-stalls", run="ncu", kernel="_hstu_cached", limit=0)
    assert stalls["kernel_id"].n_unique() == 8 and stalls["samples"].sum() > 0
    assert "gmma" in set(stalls["reason"]) and stalls["cycles_per_issue"].is_not_null().sum() >= 8 * 19
    rules = tk.query("ncu-rules", run="ncu", kernel="_hstu_cached", limit=0)
    assert rules.height > 0 and set(rules["kernel_id"]) == set(stalls["kernel_id"])
    # 65 launches: the chart draws one bar per kernel and NVTX range, the mean of its launches
    from tracekit import charts

    spec = charts.chart(tk, "warp-stalls", run="ncu").to_dict()
    totals = {r["label"]: r["total"] for r in spec["layer"][1]["data"]["values"]}
    attn = next(label for label in totals if label.endswith("hstu_attention"))
    assert attn.startswith(f"{stalls['kernel_id'].min()} (x8): ")
    per_launch = stalls.group_by("kernel_id").agg(pl.col("cycles_per_issue").sum())["cycles_per_issue"]
    assert totals[attn] == pytest.approx(per_launch.mean())
    assert 1 < len(totals) <= charts.MAX_BARS


def test_roofline_chart_of_the_capture(tk, tmp_path):
    from tracekit import charts

    out = tmp_path / "roofline.png"
    charts.save(charts.chart(tk, "roofline", run="ncu"), out)
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"
    roof = tk.query("roofline", run="ncu", limit=0)
    gemm = roof.filter(roof["nvtx_range"] == "uvqk_linear")
    assert gemm.height == 8 and (gemm["bound"] == "compute").all() and gemm["missing_metrics"].is_null().all()
