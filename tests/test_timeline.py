"""`tracekit chart timeline` and the report's timeline: one request (or any window) of a
real nsys capture as nsys draws it, NVTX ranges per thread and depth above the GPU's
kernels, copies, memsets and whole CUDA graph launches per device and stream. The chart's
bars are the rows of nvtx-ranges and gpu-trace (and graph_execs) in the window `tracekit
export trace` takes; the report shows
the run's typical request: the median instance of the program's most repeated outermost
NVTX range, or of the most repeated one a few nesting levels down where no outermost one
repeats (charts.typical_instance)."""

from __future__ import annotations

import html
import json
import re
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from browser import chromium, load
from conftest import DATA, NSYS_EXPORTS, let_go, spec_datasets

import tracekit
from tracekit import charts, report
from tracekit.cli import main as cli_main
from tracekit.errors import CaptureWarning, ParamError, QueryError
from tracekit.trace import export_trace, resolve_window

SWEEP_POINT = sorted((DATA / "hstu_sweep" / "runs").iterdir())[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The HSTU inference capture (30 requests, 5,760 events: above the bound), a smaller
    HSTU program (535 events), a capture without NVTX (nsys -t cuda), one without CUDA
    (nsys -t nvtx,osrt), an ncu report and a sweep point timed without a profiler."""
    db = tmp_path_factory.mktemp("timeline") / "t.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "hstu_capture_nsys", name="hstu")
        tk.ingest(NSYS_EXPORTS["hstu_mixed"], name="mixed")
        tk.ingest(NSYS_EXPORTS["odd_nvtx_cuda_only"], name="cuda_only")
        tk.ingest(NSYS_EXPORTS["cpu_only"], name="cpu_only")
        tk.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="ncu")
        tk.ingest(SWEEP_POINT, name="sweep_point")
    return db


@pytest.fixture
def tk(store):
    t = tracekit.open(store, read_only=True)
    yield t
    t.close()


def _run_id(tk, name: str) -> int:
    return int(tk.query("run-info", run=name)["run_id"][0])


def _bars(spec: dict) -> tuple[list[dict], list[dict]]:
    """The timeline's NVTX bars and GPU bars, as the spec holds them."""
    rows = [r for ds in spec_datasets(spec) for r in ds]
    return [r for r in rows if "range" in r], [r for r in rows if "op_kind" in r]


def _window_rows(tk, run_id: int, lo: int | None, hi: int | None):
    return (tk.query("nvtx-ranges", run=run_id, from_ns=lo, to_ns=hi, limit=0),
            tk.query("gpu-trace", run=run_id, from_ns=lo, to_ns=hi, limit=0))


def test_nvtx_ranges_takes_a_window(tk):
    """nvtx-ranges -p from_ns -p to_ns: the ranges that overlap the window (as gpu-trace
    takes its ops), an empty window an error; without one, every range as before."""
    full = tk.query("nvtx-ranges", run="hstu", limit=0)
    assert full.height == 1830
    lo, hi = int(full["start_ns"][100]), int(full["start_ns"][200])
    got = tk.query("nvtx-ranges", run="hstu", from_ns=lo, to_ns=hi, limit=0)
    assert got.equals(full.filter((full["end_ns"] > lo) & (full["start_ns"] < hi))) and got.height == 101
    assert tk.query("nvtx-ranges", run="hstu", from_ns=lo, limit=0).height < full.height
    with pytest.raises(QueryError, match=r"^nvtx-ranges: from_ns=5 is not before to_ns=5: the window is empty"):
        tk.query("nvtx-ranges", run="hstu", from_ns=5, to_ns=5)


def test_an_instance_is_export_traces_window_and_its_bars_are_the_queries_rows(tk, store, tmp_path):
    """-p nvtx=hstu.request -p instance=2: the window export trace writes for --nvtx
    hstu.request --instance 2, and a bar per nvtx-ranges and gpu-trace row in it, per lane
    as many, the first and last op the queries' first and last, in ms since its start."""
    run_id = _run_id(tk, "hstu")
    data = charts.timeline_data(tk, run="hstu", nvtx="hstu.request", instance="2")
    w = data.window
    exported = export_trace(tk, tmp_path / "t.json", run="hstu", nvtx="hstu.request", instance=2).window
    resolved = resolve_window(tk, run_id, nvtx="hstu.request", instance=2)
    assert ((w.start_ns, w.end_ns, w.label) == (exported.start_ns, exported.end_ns, exported.label)
            == (resolved.start_ns, resolved.end_ns, "hstu.request instance 2 of 30"))
    # (named as its path and the legend name it: the default domain's ':hstu.request' as 'hstu.request')
    header = json.loads((tmp_path / "t.json").read_text())["otherData"]
    assert (header["window_start_ns"], header["window_end_ns"], header["window"]) == (w.start_ns, w.end_ns, w.label)
    # the request's range starts the window; its GPU work ends it
    req = tk.sql(f"SELECT start_ns, end_ns, proj_end_ns FROM nvtx_ranges WHERE run_id = {run_id} "
                 "AND text = 'hstu.request' ORDER BY start_ns LIMIT 1 OFFSET 1").row(0)
    assert (w.start_ns, w.end_ns) == (req[0], max(req[1], req[2]))
    nv, gpu = _window_rows(tk, run_id, w.start_ns, w.end_ns)
    assert data.nvtx.equals(nv) and data.gpu.equals(gpu) and nv.height == 61 and gpu.height == 130

    spec = charts.chart(tk, "timeline", run="hstu", nvtx="hstu.request", instance=2).to_dict()
    nv_bars, gpu_bars = _bars(spec)
    assert Counter(r["lane"] for r in nv_bars) == Counter(f"tid {t} · depth {d}" for t, d in nv.select("tid", "depth").rows())
    assert Counter(r["lane"] for r in gpu_bars) == Counter(
        f"GPU {d} · stream {s}" for d, s in gpu.select("device_id", "stream_id").rows())
    assert [r["name"] for r in gpu_bars] == gpu["name"].to_list()  # (one stream: in start order)
    for bar, i in ((gpu_bars[0], 0), (gpu_bars[-1], -1)):
        assert bar["start_ms"] == pytest.approx((gpu["start_ns"][i] - w.start_ns) / 1e6, abs=1e-9)
        assert bar["end_ms"] == pytest.approx((gpu["end_ns"][i] - w.start_ns) / 1e6, abs=1e-9)
    # the first bar of the top lane is the request itself, from 0 ms
    request = next(r for r in nv_bars if r["range"] == "hstu.request")
    assert request["start_ms"] == 0 and request["lane"] == "tid 546 · depth 0"
    # copies and memsets carry their size and memory kinds, kernels their launch shape
    copy = next(r for r in gpu_bars if r["op_kind"] == "memcpy")
    row = gpu.filter(gpu["op_kind"] == "memcpy").row(0, named=True)
    assert copy["detail"].endswith(f"{row['src_kind']} → {row['dst_kind']}") and "B" in copy["detail"]
    kernel = next(r for r in gpu_bars if r["op_kind"] == "kernel")
    assert re.fullmatch(r"grid \d+×\d+×\d+ · block \d+×\d+×\d+ · \d+ registers/thread", kernel["detail"])
    # the axis is the window, in ms; the subtitle names it
    assert [layer["encoding"]["x"]["scale"]["domain"] for layer in spec["layer"]] == [
        [0, (w.end_ns - w.start_ns) / 1e6]] * 2
    assert spec["title"]["subtitle"][0].startswith("hstu.request instance 2 of 30 · ")


def test_from_to_and_the_whole_run(tk):
    """-p from_ns/-p to_ns (as tables print them: 12,100,481 works) takes the same rows as
    the queries with that window; a run within the bound is drawn whole."""
    run_id = _run_id(tk, "hstu")
    first = tk.sql(f"SELECT start_ns FROM nvtx_ranges WHERE run_id = {run_id} ORDER BY start_ns LIMIT 3")["start_ns"]
    lo, hi = int(first[1]), int(first[1]) + 3_000_000
    data = charts.timeline_data(tk, run=run_id, from_ns=f"{lo:,}", to_ns=str(hi))
    assert (data.window.start_ns, data.window.end_ns) == (lo, hi)
    nv, gpu = _window_rows(tk, run_id, lo, hi)
    assert data.nvtx.equals(nv) and data.gpu.equals(gpu) and nv.height and gpu.height
    whole = charts.timeline_data(tk, run="mixed")
    nv, gpu = _window_rows(tk, _run_id(tk, "mixed"), None, None)
    assert whole.window.label == "whole run" and whole.nvtx.equals(nv) and whole.gpu.equals(gpu)
    assert nv.height + gpu.height == 535 < charts.TIMELINE_BARS
    nv_bars, gpu_bars = _bars(charts.chart(tk, "timeline", run="mixed").to_dict())
    assert (len(nv_bars), len(gpu_bars)) == (nv.height, gpu.height)
    assert min(r["start_ms"] for r in nv_bars + gpu_bars) == 0  # since the first event


def test_cuda_graph_launches_traced_whole_are_drawn(tmp_path, monkeypatch):
    """A capture with --cuda-graph-trace=graph: nsys's GPU trace (gpu-trace) leaves the
    graph launches out, but the GPU ran their kernels then; the timeline draws each launch
    (graph_execs) as a bar on its stream, counts it against the bound, and its busy share
    includes it."""
    def silent(fn, *args, **kwargs):  # (gpu-trace's warning of the kernels it leaves out: the timeline draws them)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CaptureWarning)
            return fn(*args, **kwargs)

    with tracekit.open(tmp_path / "g.duckdb") as tk, warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)  # (the test's own gpu-trace queries)
        tk.ingest(NSYS_EXPORTS["graphs_graph"], name="graphs")
        run_id = _run_id(tk, "graphs")
        execs = tk.sql(f"SELECT start_ns, end_ns, device_id, stream_id, graph_id FROM graph_execs "
                       f"WHERE run_id = {run_id} ORDER BY start_ns")
        assert execs.height == 7 and execs["graph_id"].n_unique() == 2 and execs["stream_id"].n_unique() == 2
        data = silent(charts.timeline_data, tk, run="graphs")
        nv, gpu = _window_rows(tk, run_id, None, None)
        graphs = data.gpu.filter(pl.col("op_kind") == "graph")
        assert data.nvtx.equals(nv) and data.gpu.filter(pl.col("op_kind") != "graph").select(gpu.columns).equals(gpu)
        assert graphs.select("start_ns", "end_ns", "device_id", "stream_id", "graph_id").equals(execs)
        assert graphs["name"].to_list() == [f"[CUDA graph {g}]" for g in execs["graph_id"]]
        assert data.gpu["start_ns"].is_sorted()

        spec = silent(charts.chart, tk, "timeline", run="graphs").to_dict()
        bars = [r for r in _bars(spec)[1] if r["op_kind"] == "graph"]
        assert Counter(r["lane"] for r in bars) == Counter(
            f"GPU {d} · stream {s}" for d, s in execs.select("device_id", "stream_id").rows())
        assert all(r["detail"].startswith("graph ") and "not traced apiece" in r["detail"] for r in bars)
        t0, t1 = int(min(nv["start_ns"].min(), data.gpu["start_ns"].min())), int(data.gpu["end_ns"].max())
        busy = charts._busy(data.gpu, t0, t1)
        assert busy != charts._busy(gpu, t0, t1) and busy[0] in spec["title"]["subtitle"][0]
        assert "CUDA graph launches traced whole (purples)" in " ".join(spec["title"]["subtitle"][1:])
        # an NVTX range's window ends where the graph it launched ends (as for its kernels)
        outer = tk.sql(f"SELECT start_ns, end_ns, global_tid FROM nvtx_ranges WHERE run_id = {run_id} "
                       "AND text = 'replay.outer' ORDER BY start_ns")
        assert outer.height == 4
        for i, (start, end, tid) in enumerate(outer.rows(), 1):
            own = execs.join(tk.sql(f"SELECT start_ns, api_start_ns, api_end_ns, launch_global_tid FROM graph_execs "
                                    f"WHERE run_id = {run_id}"), on="start_ns").filter(
                (pl.col("launch_global_tid") == tid) & (pl.col("api_start_ns") >= start) & (pl.col("api_end_ns") <= end))
            assert own.height == 1
            w = silent(charts.timeline_data, tk, run="graphs", nvtx=":replay.outer", instance=i)
            assert (w.window.start_ns, w.window.end_ns) == (start, max(end, own["end_ns"][0]))
            assert own["start_ns"][0] in w.gpu.filter(pl.col("op_kind") == "graph")["start_ns"].to_list()
        # the launches count against the bound
        monkeypatch.setattr(charts, "TIMELINE_BARS", nv.height + gpu.height)
        with pytest.raises(QueryError, match=rf"has {nv.height + gpu.height + 7} events \({nv.height} NVTX ranges, "
                                             rf"{gpu.height + 7} GPU ops\)"):
            charts.timeline_data(tk, run="graphs")


def test_run_by_name_and_by_id(tk):
    run_id = _run_id(tk, "mixed")
    specs = [charts.chart(tk, "timeline", run=r, nvtx="hstu.request", instance=3).to_dict()
             for r in ("mixed", run_id, str(run_id))]
    assert specs[0] == specs[1] == specs[2]
    assert specs[0]["title"]["text"] == f"Timeline · run {run_id} (mixed)"


def test_captures_without_nvtx_or_without_cuda(tk):
    """Without NVTX tracing: the GPU lanes alone; without CUDA: the NVTX lanes alone; the
    subtitle says what the capture did not trace."""
    for run, missing, empty in (("cuda_only", "NVTX", "nvtx"), ("cpu_only", "CUDA", "gpu")):
        data = charts.timeline_data(tk, run=run)
        assert data.untraced == (missing,) and getattr(data, empty).is_empty()
        spec = charts.chart(tk, "timeline", run=run).to_dict()
        assert f"captured without {missing} tracing" in spec["title"]["subtitle"][0]
        nv_bars, gpu_bars = _bars(spec)
        assert len(nv_bars) == data.nvtx.height and len(gpu_bars) == data.gpu.height
        assert len(nv_bars) + len(gpu_bars) > 0
        # the lanes the subtitle describes are those drawn
        lanes = " ".join(spec["title"]["subtitle"])
        assert ("NVTX ranges per thread" in lanes, "GPU kernels" in lanes) == (bool(nv_bars), bool(gpu_bars)), lanes


def test_a_capture_whose_window_missed_the_gpu_work_says_why_no_gpu_lane_is_drawn(tmp_path):
    """nsys traced CUDA but its window held none of the program's GPU work: the timeline of
    its NVTX ranges says so, as the report's header does, and describes no GPU lane."""
    with tracekit.open(tmp_path / "m.duckdb") as tk, pytest.warns(CaptureWarning):
        tk.ingest(NSYS_EXPORTS["window_missed"], name="missed")
    with tracekit.open(tmp_path / "m.duckdb", read_only=True) as tk:
        spec = charts.chart(tk, "timeline", run="missed").to_dict()
    nv_bars, gpu_bars = _bars(spec)
    *said, lanes = spec["title"]["subtitle"]  # (long lines wrapped)
    said = " ".join(said)
    assert nv_bars and not gpu_bars
    assert "the run holds no CUDA event at all (no API call, kernel or copy), though its capture traced CUDA" in said
    assert lanes.startswith("NVTX ranges per thread and nesting depth; hover") and "GPU" not in lanes, lanes


def test_more_than_the_bound_is_an_error_that_says_how_to_choose_a_window(tk, monkeypatch):
    """The whole HSTU capture (1,830 NVTX ranges and 3,930 GPU ops) is above the bound: one
    line naming the count and the run's typical request as a window to choose; a window
    above the bound (the bound made small) says so too; at the bound it is drawn."""
    with pytest.raises(QueryError) as err:
        charts.chart(tk, "timeline", run="hstu")
    said = str(err.value)
    assert "\n" not in said
    assert said.startswith("chart timeline: run 1 (hstu) has 5,760 events (1,830 NVTX ranges, 3,930 GPU ops), "
                           "more than the 5,000 a timeline draws; choose a window: -p nvtx=hstu.request "
                           "-p instance=27 (its median instance of 30)")
    # the window it names is drawn
    assert charts.chart(tk, "timeline", run="hstu", nvtx="hstu.request", instance=27)
    monkeypatch.setattr(charts, "TIMELINE_BARS", 190)
    with pytest.raises(QueryError, match=r"^chart timeline: hstu.request instance 2 of 30 of run 1 \(hstu\) holds "
                                         r"191 events \(61 NVTX ranges, 130 GPU ops\), more than the 190 a timeline "
                                         r"draws; choose a shorter window: -p from_ns=START -p to_ns=END"):
        charts.chart(tk, "timeline", run="hstu", nvtx="hstu.request", instance=2)
    monkeypatch.setattr(charts, "TIMELINE_BARS", 191)
    nv_bars, gpu_bars = _bars(charts.chart(tk, "timeline", run="hstu", nvtx="hstu.request", instance=2).to_dict())
    assert len(nv_bars) + len(gpu_bars) == 191


@pytest.mark.parametrize("params, error, said", [
    ({"nvtx": "hstu.request", "instance": 31}, QueryError,
     "chart timeline: instance=31: run 1 (hstu) has 30 range(s) named 'hstu.request'"),
    ({"nvtx": "hstu.request", "instance": 0}, ParamError, "chart timeline: instance=0: instances count from 1"),
    ({"nvtx": "hstu.request", "instance": "third"}, ParamError,
     "chart timeline: instance='third': an instance number (1 = the first) expected"),
    ({"nvtx": "no.such.range"}, QueryError,
     "chart timeline: run 1 (hstu) has no NVTX range named 'no.such.range' (`tracekit query nvtx-summary --run 1` "
     "lists them)"),
    ({"instance": 2}, ParamError, "chart timeline: -p instance=N needs -p nvtx=NAME (the range it counts)"),
    ({"nvtx": "hstu.request", "from_ns": 5}, ParamError,
     "chart timeline: give either -p from_ns=/-p to_ns= or -p nvtx=NAME -p instance=N, not both"),
    ({"from_ns": 20, "to_ns": 10}, ParamError,
     "chart timeline: from_ns=20 is not before to_ns=10: the window is empty; give from_ns < to_ns"),
    ({"from_ns": "1.5e7"}, ParamError, "chart timeline: from_ns='1.5e7': a time in ns on the capture's clock expected"),
    ({"to_ns": "1,2"}, ParamError, "chart timeline: to_ns='1,2': a time in ns on the capture's clock expected"),
    ({"from_ns": 1, "to_ns": 1000}, QueryError,
     "chart timeline: the window 1 to 1000 ns is outside run 1 (hstu)'s events, which span 11899934 to 389229314 ns"),
    ({"run_name": "x"}, ParamError,
     "chart timeline: unknown parameter 'run_name' (declared: nvtx, instance, from_ns, to_ns, ranks)"),
])
def test_bad_windows_are_one_line_errors(tk, params, error, said):
    with pytest.raises(error) as err:
        charts.chart(tk, "timeline", run="hstu", **params)
    assert str(err.value).startswith(said) and "\n" not in str(err.value)


@pytest.mark.parametrize("run, kind", [("ncu", "an ncu"), ("sweep_point", "a timing")])
def test_a_run_of_another_kind_is_an_error(tk, run, kind):
    with pytest.raises(QueryError, match=rf"^run \d+ \({run}\) is {kind} run; chart timeline needs an nsys run "
                                         r"\(see `tracekit runs`\)$"):
        charts.chart(tk, "timeline", run=run)


#: the NVTX domains of libraries in these captures (NCCL's collectives, XLA's modules and
#: thunks, cuBLAS's API calls): never a typical request where the program has ranges of its own
LIBRARIES = ["NCCL", "TSL", "cuBLAS"]


def _assert_typical(tk, run: str, name: str, depth: int) -> charts.Instance:
    """The run's typical instance is ``name``'s median instance at nesting ``depth``,
    checked against the run's NVTX ranges directly: numbered by start (ties by range id)
    over every range of that text, as --nvtx numbers them; its duration the median of
    those at that depth (numpy's median; the lower middle of an even count); that name the
    most repeated (ties: the most time) of the program's own ranges at that depth, and
    every name of theirs above it occurring once."""
    run_id = _run_id(tk, run)
    pick = charts.typical_instance(tk, run_id)
    rows = tk.sql(f"SELECT range_id, domain, text, depth, start_ns, dur_ns FROM nvtx_ranges WHERE run_id = {run_id}")
    rows = rows.with_columns(pl.col("depth").fill_null(0).alias("level"))
    own = rows.filter(~pl.col("domain").is_in(LIBRARIES))
    named = rows.filter(pl.col("text") == name).sort("start_ns", "range_id")
    assert (pick.name, pick.instances, pick.depth, pick.repeated) == (name, named.height, depth, True)
    chosen = named.row(pick.instance - 1, named=True)
    assert (chosen["level"], chosen["domain"], chosen["dur_ns"]) == (depth, "", pick.dur_ns)
    durs = named.filter(pl.col("level") == depth)["dur_ns"].to_numpy()
    assert pick.among == len(durs) >= 2
    median = np.median(durs)
    assert pick.dur_ns == np.sort(durs)[(len(durs) - 1) // 2] and abs(pick.dur_ns - median) == np.min(
        np.abs(durs - median))
    at = (own.filter(pl.col("level") == depth).group_by("domain", "text")
          .agg(pl.len().alias("n"), pl.col("dur_ns").sum().alias("t")).sort(["n", "t"], descending=True))
    assert at.row(0)[:2] == ("", name) and at["n"][0] >= 2
    for above in range(depth):
        assert own.filter(pl.col("level") == above).group_by("domain", "text").len()["len"].max() == 1
    return pick


def test_the_typical_instance_is_the_median_of_the_most_repeated_outermost_range(tk, monkeypatch):
    """Of the outermost ranges, the name with the most instances (ties: the most time); of
    its outermost instances, the one whose duration is the median, numbered as --nvtx
    numbers every range of that name: not the warm-up's first request. hstu.request in the
    mixed capture is also nested (2 outermost instances of 7); cpu_only has 40 each of
    batch, loader:decode and the start/end range request (no depth: outermost): the most
    time wins."""
    assert _assert_typical(tk, "hstu", "hstu.request", 0).instance == 27  # (of 30: the error above names it)
    pick = _assert_typical(tk, "mixed", "hstu.request", 0)
    assert (pick.among, pick.instances) == (2, 7)
    assert _assert_typical(tk, "cpu_only", "batch", 0).among == 40
    assert charts.typical_instance(tk, _run_id(tk, "cuda_only")) is None
    # the chart names it where the whole run is above the bound, with what it is the median of
    monkeypatch.setattr(charts, "TIMELINE_BARS", 100)
    with pytest.raises(QueryError, match=rf"^chart timeline: run {_run_id(tk, 'mixed')} \(mixed\) has 535 events .*"
                                         rf"choose a window: -p nvtx=hstu.request -p instance={pick.instance} "
                                         r"\(the median of its 2 outermost instances\), or -p from_ns="):
        charts.chart(tk, "timeline", run="mixed")


@pytest.fixture(scope="module")
def ranges_store(tmp_path_factory):
    """Captures whose NVTX ranges try the typical request's rule: NCCL's own ranges beside
    the program's steps (one process per GPU; two ranks, NCCL's collectives also nested in
    the steps), a name nested in itself, a single wrapper range (inductor's profile, the
    parent process's), eight outermost ranges each named once (iter 0 ... iter 7), JAX with
    XLA's (TSL) and NCCL's domains."""
    db = tmp_path_factory.mktemp("typical") / "t.duckdb"
    with tracekit.open(db) as tk:
        for name in ("nccl", "ranks_nccl_rank0", "ranks_nccl_rank1", "odd_nvtx", "inductor", "multiproc",
                     "many_kernels", "jax"):
            tk.ingest(NSYS_EXPORTS[name], name=name)
    return db


@pytest.fixture
def rtk(ranges_store):
    t = tracekit.open(ranges_store, read_only=True)
    yield t
    t.close()


@pytest.mark.parametrize("run, name, depth, left_aside", [
    ("nccl", "step", 0, ("NCCL",)),              # not NCCL:ncclAllReduce, 40 outermost against step's 12
    ("ranks_nccl_rank0", "step", 0, ("NCCL",)),  # not NCCL:ncclAllReduce, 21 outermost against 20
    ("ranks_nccl_rank1", "step", 0, ("NCCL",)),  # (was NCCL:ncclAllReduce instance 23 of 42, at depth 2)
    ("odd_nvtx", "same", 0, ()),                 # (was same instance 5 of 9, at depth 1)
    ("inductor", "step", 1, ()),                 # inside the one range profile
    ("multiproc", "step", 1, ()),                # inside parent, child0 and child1, each named once
    ("many_kernels", "adds", 1, ()),             # inside iter 0 ... iter 7 (adds, muls, mixed: 8 each)
    ("jax", "step", 1, ("NCCL", "TSL")),         # inside the one range steps; not XLA's modules (12 outermost)
])
def test_the_typical_instance_of_real_captures(rtk, run, name, depth, left_aside):
    """The program's own ranges before a library's; a single outermost range, or outermost
    names that each occur once, send the pick one nesting level down; the instance shown
    lies at the depth its median was taken at (not a nested one of the same name)."""
    pick = _assert_typical(rtk, run, name, depth)
    assert pick.left_aside == left_aside
    run_id = _run_id(rtk, run)
    outermost = rtk.sql(f"SELECT domain, text, count(*) AS n FROM nvtx_ranges WHERE run_id = {run_id} "
                        "AND coalesce(depth, 0) = 0 GROUP BY ALL ORDER BY n DESC, sum(dur_ns) DESC")
    if left_aside:  # the most repeated outermost range is a library's: it is not taken
        assert outermost["domain"][0] in LIBRARIES
    if run == "many_kernels":  # the warm-up iter 0 is the longest outermost range: never shown
        assert outermost.height == 8 and set(outermost["n"]) == {1}
        longest = rtk.sql(f"SELECT text FROM nvtx_ranges WHERE run_id = {run_id} AND depth = 0 ORDER BY dur_ns DESC")
        assert longest["text"][0] == "iter 0"
    # the window shown is that instance's, as export trace and the chart take it
    w = resolve_window(rtk, run_id, nvtx=pick.name, instance=pick.instance)
    assert w.label == f"{name} instance {pick.instance} of {pick.instances}"
    first = rtk.sql(f"SELECT start_ns FROM nvtx_ranges WHERE run_id = {run_id} AND text = '{name}' "
                    f"ORDER BY start_ns, range_id LIMIT 1 OFFSET {pick.instance - 1}")["start_ns"][0]
    assert w.start_ns == first


def test_where_no_range_repeats_the_median_outermost_range(rtk, monkeypatch):
    """Where no name occurs twice at the depths looked at (here the outermost only), the
    outermost range whose duration is their median: in many_kernels iter 2 (51.9 ms) of
    iter 0 ... iter 7, not the longest (iter 0's warm-up, 83 ms); inductor's profile, the only one."""
    monkeypatch.setattr(charts, "TYPICAL_DEPTHS", 1)
    run_id = _run_id(rtk, "many_kernels")
    outermost = rtk.sql(f"SELECT text, dur_ns FROM nvtx_ranges WHERE run_id = {run_id} AND depth = 0 "
                        "ORDER BY dur_ns, start_ns")
    median = outermost.row((outermost.height - 1) // 2)
    pick = charts.typical_instance(rtk, run_id)
    assert (pick.name, pick.instance, pick.instances, pick.dur_ns) == (median[0], 1, 1, median[1])
    assert (pick.repeated, pick.among, pick.depth) == (False, 8, 0) and pick.name == "iter 2"
    assert report.typical_request(rtk, run_id)[1].startswith(
        "Shown: iter 2 instance 1 of 1, one of the run's 8 outermost NVTX ranges: its duration, 51.898 ms, is their "
        "median (no NVTX range occurs twice at nesting depth 0). `tracekit export trace --run ")
    pick = charts.typical_instance(rtk, _run_id(rtk, "inductor"))
    assert (pick.name, pick.instances, pick.repeated, pick.among) == ("profile", 1, False, 1)
    assert report.typical_request(rtk, _run_id(rtk, "inductor"))[1].startswith(
        "Shown: profile instance 1 of 1, the run's only outermost NVTX range (no NVTX range occurs twice at nesting "
        "depth 0). ")


def test_a_run_of_library_ranges_only(rtk, monkeypatch):
    """Where every range is a library's (here: the default domain counted as one), they are
    taken as they are: NCCL's allreduce, the most repeated outermost range, its median
    outermost instance of the 48 so named."""
    monkeypatch.setattr(charts, "LIBRARY_DOMAINS", (*charts.LIBRARY_DOMAINS, ""))
    run_id = _run_id(rtk, "nccl")
    pick = charts.typical_instance(rtk, run_id)
    assert (pick.name, pick.instances, pick.among, pick.depth, pick.left_aside) == ("NCCL:ncclAllReduce", 48, 40, 0, ())
    durs = rtk.sql(f"SELECT dur_ns, depth FROM nvtx_ranges WHERE run_id = {run_id} AND name = 'NCCL:ncclAllReduce' "
                   "ORDER BY start_ns, range_id")
    assert durs["depth"][pick.instance - 1] == 0
    assert pick.dur_ns == np.sort(durs.filter(pl.col("depth") == 0)["dur_ns"].to_numpy())[(40 - 1) // 2]


@pytest.mark.parametrize("run, caption", [
    ("nccl", "Shown: step instance 11 of 14: its duration, 5.147 ms, is the median of its 12 outermost instances (step "
             "is the outermost NVTX range with the most instances; the ranges of NCCL, a library, left aside). "),
    ("inductor", "Shown: step instance 7 of 8: its duration, 0.820 ms, is the median of the 8 (step is the most "
                 "repeated NVTX range at nesting depth 1: no outermost range occurs twice). "),
    ("jax", "Shown: step instance 4 of 6: its duration, 5.123 ms, is the median of the 6 (step is the most repeated "
            "NVTX range at nesting depth 1: no outermost range occurs twice; the ranges of NCCL and TSL, libraries, "
            "left aside). "),
])
def test_the_report_caption_says_why(rtk, run, caption):
    params, said = report.typical_request(rtk, _run_id(rtk, run))
    assert said.startswith(caption) and params == {"nvtx": "step", "instance": int(caption.split()[3])}


def _timeline_section(path: Path) -> str:
    text = path.read_text()
    return text[text.index('<section id="timeline">'):text.index("</section>", text.index('<section id="timeline">'))]


def _spec(path: Path) -> dict:
    text = path.read_text()
    start = text.index('<script type="application/json" id="spec-timeline">') + len(
        '<script type="application/json" id="spec-timeline">')
    return json.loads(text[start:text.index("</script>", start)])


def test_the_report_shows_the_median_request(tk, store, tmp_path, capsys):
    """The report's timeline is the typical request's chart, with a caption naming it and the
    export trace command that writes it, which writes that window."""
    path = report.write_report(tk, tmp_path / "r.html", run="hstu")
    section = _timeline_section(path)
    assert ("Shown: hstu.request instance 27 of 30: its duration, 11.843 ms, is the median of the 30 (hstu.request is "
            "the outermost NVTX range with the most instances).") in section
    command = re.search(r"<code>tracekit (export trace [^<]*)</code> writes it for ui.perfetto.dev", section)[1]
    assert command == "export trace --run 1 --nvtx hstu.request --instance 27 -o request.json"
    spec = _spec(path)
    assert spec == json.loads(json.dumps(charts.chart(tk, "timeline", run="hstu", nvtx="hstu.request",
                                                      instance=27).to_dict(), default=str))
    let_go(tk)
    out = tmp_path / "request.json"
    args = command.split()[:-1] + [str(out)]
    assert cli_main(["--db", str(store), *args]) == 0
    capsys.readouterr()
    header = json.loads(out.read_text())["otherData"]
    w = resolve_window(tk, 1, nvtx="hstu.request", instance=27)
    assert (header["window_start_ns"], header["window_end_ns"]) == (w.start_ns, w.end_ns)
    assert spec["title"]["subtitle"][0].startswith(f"{header['window']} · ")


def test_the_report_of_a_run_without_nvtx_or_above_the_bound(tk, tmp_path, monkeypatch):
    """No NVTX range: the whole run, said so; a window above the bound: the section says why
    it is left out, in the note other sections use, and the report is still written."""
    path = report.write_report(tk, tmp_path / "c.html", run="cuda_only")
    section = _timeline_section(path)
    assert "Shown: the whole run (it has no NVTX range to pick a request from)." in section
    assert "or the whole run where it has no NVTX range (its middle GPU ops where it has more than a timeline draws" in section
    assert _bars(_spec(path))[1] and '<p class="note">' not in section
    monkeypatch.setattr(charts, "TIMELINE_BARS", 100)
    path = report.write_report(tk, tmp_path / "h.html", run="hstu")
    section = _timeline_section(path)
    assert re.search(r'<p class="note">chart timeline: hstu.request instance 27 of 30 of run 1 \(hstu\) holds '
                     r"\d+ events .*more than the 100 a timeline draws", section)
    assert 'id="chart-timeline"' not in section and 'class="caption"' not in section


def test_a_run_without_nvtx_above_the_bound_is_shown_by_its_middle_ops(tk, store, tmp_path, monkeypatch, capsys):
    """No NVTX range to pick a request by, and more events than a timeline draws (the bound
    made small): the report shows the middle MIDDLE_OPS GPU ops in start order (not the
    warm-up's first), saying so; chart timeline's error proposes that window, which draws
    those ops and the ones overlapping them."""
    ops = tk.query("gpu-trace", run="cuda_only", limit=0).sort("start_ns", "end_ns", maintain_order=True)
    n = ops.height
    monkeypatch.setattr(charts, "TIMELINE_BARS", n - 1)
    monkeypatch.setattr(charts, "MIDDLE_OPS", 10)
    middle = ops.slice((n - 10) // 2, 10)
    lo, hi = middle["start_ns"].min(), middle["end_ns"].max()
    assert lo > ops["start_ns"][0]
    with pytest.raises(QueryError) as err:
        charts.chart(tk, "timeline", run="cuda_only")
    assert (f"; choose a window: -p from_ns={lo} -p to_ns={hi} (the middle 10 of the run's {n:,} GPU ops, which "
            "its report shows), or -p from_ns=START -p to_ns=END") in str(err.value)
    drawn = _bars(charts.chart(tk, "timeline", run="cuda_only", from_ns=lo, to_ns=hi).to_dict())[1]
    assert len(drawn) == tk.query("gpu-trace", run="cuda_only", from_ns=lo, to_ns=hi, limit=0).height >= 10
    path = report.write_report(tk, tmp_path / "c.html", run="cuda_only")
    section = _timeline_section(path)
    assert html.escape(f"Shown: the middle 10 of the run's {n:,} GPU ops, {(hi - lo) / 1e6:,.3f} ms from {lo} ns") in section
    assert len(_bars(_spec(path))[1]) == len(drawn) and '<p class="note">' not in section
    # the command the caption gives writes the window shown, not the whole run
    command = re.search(r"<code>tracekit (export trace [^<]*)</code> writes it for ui.perfetto.dev", section)[1]
    assert command == f"export trace --run {_run_id(tk, 'cuda_only')} --from {lo} --to {hi} -o window.json"
    let_go(tk)
    out = tmp_path / "window.json"
    assert cli_main(["--db", str(store), *command.split()[:-1], str(out)]) == 0
    capsys.readouterr()
    header = json.loads(out.read_text())["otherData"]
    assert (header["window_start_ns"], header["window_end_ns"]) == (lo, hi)


def _lab(colour: str) -> tuple[float, float, float]:
    """An sRGB colour (#rrggbb) in CIELAB (D65)."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x, y, z = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
               (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in (x, y, z))
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def test_nvtx_colours_are_told_apart_and_outer_ranges_keep_theirs(tk):
    """A request of the HSTU capture (instance 3): every NVTX range coloured apiece has a
    colour of its own that reads apart from each other one and from "(other)"'s grey (at
    least 20 apart in CIELAB: #fdbf6f and #fdb462, hstu.embedding's and hstu.layer7's
    oranges, were 6 apart); outer ranges are coloured before inner ones and, of one depth,
    the earlier before the later, so no range is grey while a later sibling or a deeper range
    has a colour (layers 2, 4, 5 and 6 were grey, layer 7 orange)."""
    import math

    spec = charts.chart(tk, "timeline", run="hstu", nvtx="hstu.request", instance=3).to_dict()
    scale = next(layer["encoding"]["color"]["scale"] for layer in spec["layer"]
                 if layer["encoding"]["color"]["title"] == "NVTX range")
    colours = dict(zip(scale["domain"], scale["range"], strict=True))
    grey = colours.pop("(other)", None)
    named = list(colours.values())
    assert len(set(named)) == len(named) >= 12
    for i, a in enumerate(named):
        for b in named[i + 1:] + ([grey] if grey else []):
            assert math.dist(_lab(a), _lab(b)) >= 20, (a, b)
    nv = charts.timeline_data(tk, run="hstu", nvtx="hstu.request", instance="3").nvtx.with_columns(
        pl.col("range").str.strip_prefix(":"))
    first = nv.group_by("range").agg(pl.col("depth").min(), pl.col("start_ns").min())
    layers = sorted(r for r in first["range"] if r.startswith("hstu.layer"))
    assert len(layers) == 8 and all(r in colours for r in layers)  # every layer, each its own colour
    assert "hstu.candidate_scoring" in colours and "hstu.embedding" in colours
    order = {r: (d, s) for r, d, s in first.rows()}
    for r in order:  # greyed: only ranges deeper than, or of one depth later than, every coloured one
        if r not in colours:
            assert all(order[c] < order[r] for c in colours), r


def test_the_cli(store, tk, tmp_path, capsys):
    """chart timeline --run R -p nvtx=... -p instance=2 writes the page; a bad parameter
    exits 2 with one line."""
    let_go(tk)
    out = tmp_path / "t.html"
    assert cli_main(["--db", str(store), "chart", "timeline", "--run", "hstu", "-p", "nvtx=hstu.request",
                     "-p", "instance=2", "-o", str(out)]) == 0
    assert out.stat().st_size > 100_000 and "hstu.request instance 2 of 30" in out.read_text()
    capsys.readouterr()
    for bad, said in ((["-p", "instance=x", "-p", "nvtx=hstu.request"], "instance='x'"),
                      (["-p", "instance=99", "-p", "nvtx=hstu.request"], "instance=99"),
                      ([], "5,760 events")):
        assert cli_main(["--db", str(store), "chart", "timeline", "--run", "1", *bad, "-o",
                         str(tmp_path / "bad.html")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("tracekit: error: chart timeline: ") and said in err[0], err
        assert not (tmp_path / "bad.html").exists()


# -- in a real browser ----------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium)")

#: the data marks the chart page drew (as the report counts them: items of non-group marks)
_MARKS_JS = """(function () {
  function marks(node) {
    var n = 0;
    if (node.marktype && node.role === "mark" && node.marktype !== "group") n += (node.items || []).length;
    (node.items || []).forEach(function (it) { n += marks(it); });
    return n;
  }
  var c = window.tracekitChart;
  return {error: c.error || null, marks: c.view ? marks(c.view.scenegraph().root) : 0};
})()"""


@needs_chromium
def test_a_window_at_the_bound_draws_in_chromium(tk, tmp_path):
    """The first 5,000 events of the HSTU capture (a window that holds as many as the bound
    allows) draw in a browser, a bar each, with no console error."""
    run_id = _run_id(tk, "hstu")
    starts = tk.sql(f"SELECT start_ns FROM (SELECT start_ns FROM nvtx_ranges WHERE run_id = {run_id} UNION ALL "
                    f"SELECT start_ns FROM gpu_ops WHERE run_id = {run_id}) ORDER BY 1")["start_ns"]
    lo, hi = int(starts[0]), int(starts[charts.TIMELINE_BARS])  # (to_ns: before the next event's start)
    data = charts.timeline_data(tk, run=run_id, from_ns=lo, to_ns=hi)
    bars = data.nvtx.height + data.gpu.height
    assert charts.TIMELINE_BARS - 10 <= bars <= charts.TIMELINE_BARS  # (an op that ended before lo is not in it)
    out = charts.save(charts.timeline(data), tmp_path / "big.html")
    page = load(out, "window.tracekitChart && window.tracekitChart.done", _MARKS_JS)
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
    assert page.value == {"error": None, "marks": bars}


@needs_chromium
def test_a_request_draws_without_a_vega_warning(tk, tmp_path):
    """A request's timeline draws in a browser without a warning of Vega's in the console:
    its bars are filled and outlined by one colour field, and the outline's legend (none)
    conflicted with the fill's, which Vega logged twice a chart ("WARN Conflicting legend
    property "disable" (false and true)"), in every report with a timeline too."""
    data = charts.timeline_data(tk, run="hstu", nvtx="hstu.request", instance="3")
    out = charts.save(charts.timeline(data), tmp_path / "request.html")
    page = load(out, "window.tracekitChart && window.tracekitChart.done", _MARKS_JS)
    assert page.console_errors == [] and page.exceptions == [] and page.console_warnings == []
    assert page.value == {"error": None, "marks": data.nvtx.height + data.gpu.height}


@needs_chromium
def test_cuda_graph_launches_draw_in_chromium(tmp_path):
    """The whole-graph capture's timeline draws in a browser, a bar per NVTX range, GPU op
    and graph launch, with no console error."""
    with tracekit.open(tmp_path / "g.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["graphs_graph"], name="graphs")
        data = charts.timeline_data(tk, run="graphs")
    assert data.gpu.filter(pl.col("op_kind") == "graph").height == 7
    out = charts.save(charts.timeline(data), tmp_path / "graphs.html")
    page = load(out, "window.tracekitChart && window.tracekitChart.done", _MARKS_JS)
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
    assert page.value == {"error": None, "marks": data.nvtx.height + data.gpu.height}


@needs_chromium
def test_unified_memory_page_faults_are_drawn(tmp_path, monkeypatch):
    """A capture with Unified Memory's page faults (nsys_um_faults): the timeline of an
    iteration draws the GPU's fault groups of the window on a lane of their device and the
    CPU's faults on a lane of their process, the store's rows; in a browser a bar each beside
    the ranges and ops, with no console error. Where they would pass the bound with the rest,
    they are left out and the subtitle says how many (the ranges and ops are still drawn)."""
    with tracekit.open(tmp_path / "um.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["um_faults"], name="um")
        data = charts.timeline_data(tk, run="um", nvtx="iteration", instance=2)
        lo, hi, run_id = data.window.start_ns, data.window.end_ns, _run_id(tk, "um")
        gpu = tk.sql(f"SELECT start_ns, end_ns, faults FROM um_gpu_faults WHERE run_id = {run_id} "
                     f"AND end_ns > {lo} AND start_ns < {hi} ORDER BY 1, 2")
        cpu = tk.sql(f"SELECT ts_ns FROM um_cpu_faults WHERE run_id = {run_id} AND ts_ns BETWEEN {lo} AND {hi} ORDER BY 1")
        assert gpu.height > 20 and cpu.height > 20
        got = data.faults.sort("start_ns", "end_ns")
        assert got.filter(pl.col("side") == "GPU").select("start_ns", "end_ns", "faults").equals(gpu)
        assert got.filter(pl.col("side") == "CPU")["start_ns"].to_list() == cpu["ts_ns"].to_list()
        spec = charts.timeline(data).to_dict()
        rows = [r for ds in spec_datasets(spec) for r in ds if "faults" in r]
        pid = int(tk.sql(f"SELECT DISTINCT pid FROM um_cpu_faults WHERE run_id = {run_id}").item())
        assert Counter(r["lane"] for r in rows) == {"GPU 0 · page faults": gpu.height,
                                                    f"pid {pid} · CPU page faults": cpu.height}
        assert "Unified Memory page faults" in spec["title"]["subtitle"][1]
        out = charts.save(charts.timeline(data), tmp_path / "um.html")
        page = load(out, "window.tracekitChart && window.tracekitChart.done", _MARKS_JS)
        assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
        assert page.value == {"error": None, "marks": data.nvtx.height + data.gpu.height + data.faults.height}
        monkeypatch.setattr(charts, "TIMELINE_BARS", data.nvtx.height + data.gpu.height + data.faults.height - 1)
        held = charts.timeline_data(tk, run="um", nvtx="iteration", instance=2)
        assert held.faults.is_empty() and held.gpu.height == data.gpu.height
        assert held.notes == (f"{data.faults.height:,} Unified Memory page faults in the window not drawn "
                              "(`tracekit export trace` writes them)",)
        assert held.notes[0] in charts.timeline(held).to_dict()["title"]["subtitle"][0]


@needs_chromium
def test_python_samples_are_drawn_below_the_frames_every_sample_shares(tmp_path, monkeypatch):
    """A capture with the Python threads' stacks sampled: a step of nsys_python_hot draws, below
    its NVTX range, the Python calls per level (tracekit.trace.python_slices) below the frames every
    sample of the window shares (<module> > main, said in the subtitle): parse, prepare and
    run_model one after another at depth 1 (the program spent 8, 4 and ~22 ms in them), pack under
    prepare; every sample of the window in one slice per drawn level; in a browser a bar each, with
    no console error. A request of the HSTU workload (hstu_capture_python) shares the harness's
    frames down to `request`. Where they would pass the bound, none are drawn, said so."""
    with tracekit.open(tmp_path / "py.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["python_hot"], name="hot")
        tk.ingest(DATA / "hstu_capture_python", name="hstu_py")
        data = charts.timeline_data(tk, run="hot", nvtx="step", instance=5)
        tid = int(tk.sql("SELECT any_value(tid) FROM python_samples").item())
        assert data.notes == (f"tid {tid}'s Python frames in every sample, not drawn: <module> > main",)
        top = data.python.filter(pl.col("depth") == 1).sort("start_ns")
        assert top["name"].to_list() == ["parse", "prepare", "run_model"]
        ms = dict(zip(top["name"], (top["end_ns"] - top["start_ns"]) / 1e6, strict=True))
        assert 6.5 < ms["parse"] < 9.5 and 3 < ms["prepare"] < 5.5 and ms["run_model"] > 15, ms
        pack = data.python.filter(pl.col("name") == "pack").row(0, named=True)
        assert pack["depth"] == 2 and top.row(1, named=True)["start_ns"] == pack["start_ns"]
        lo, hi = data.window.start_ns, data.window.end_ns
        inside = tk.sql(f"SELECT count(*) FROM python_samples WHERE ts_ns BETWEEN {lo} AND {hi} "
                        "AND run_id = (SELECT run_id FROM runs WHERE name = 'hot')").item()
        assert top["samples"].sum() == inside > 25
        spec = charts.timeline(data).to_dict()
        rows = [r for ds in spec_datasets(spec) for r in ds if "samples" in r]
        assert {r["lane"] for r in rows} == {f"tid {tid} · Python {d}" for d in range(1, 5)}
        assert "the Python calls sampled per thread and level" in spec["title"]["subtitle"][1]
        assert data.notes[0] in spec["title"]["subtitle"][0]
        out = charts.save(charts.timeline(data), tmp_path / "py.html")
        page = load(out, "window.tracekitChart && window.tracekitChart.done", _MARKS_JS)
        assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
        assert page.value == {"error": None, "marks": data.nvtx.height + data.gpu.height + data.python.height}
        request = charts.timeline_data(tk, run="hstu_py", nvtx="hstu.request", instance=10)
        assert request.notes[0].endswith(" > run_requests > one > request") and not request.python.is_empty()
        assert "layer" in set(request.python.filter(pl.col("depth") == 1)["name"])
        monkeypatch.setattr(charts, "TIMELINE_BARS", data.nvtx.height + data.gpu.height + data.python.height - 1)
        held = charts.timeline_data(tk, run="hot", nvtx="step", instance=5)
        assert held.python.is_empty() and held.gpu.height == data.gpu.height
        assert held.notes == (f"{data.python.height:,} slices of Python samples in the window not drawn "
                              "(`tracekit export trace` writes them)",)


def test_a_timeline_of_ranks_with_nothing_in_the_span_says_why(tmp_path):
    """The real job whose rank 3 captured a window after its GPU work (nsys_jobs/missed):
    asked alone, rank 3 has nothing in rank 0's step 3, and the chart said only "no rows"
    (the note that says why was dropped with the empty frames)."""
    with tracekit.open(tmp_path / "j.duckdb") as tk:
        for r in range(4):
            tk.ingest(DATA / "nsys_jobs" / "missed" / f"rank{r}" / "export.sqlite.xz", name=f"r{r}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CaptureWarning)
            t = charts.timeline_data(tk, run="r0", nvtx="step", instance=3, ranks="3")
        spec = charts.timeline(t).to_dict()
    assert t.nvtx.is_empty() and t.gpu.is_empty()
    assert spec["title"]["text"] == "Timeline · rank 3 of run 1's job (r0) · step instance 3 of 20"
    assert re.fullmatch(r"rank 3: nothing in this span \(its capture began \+[0-9,]+\.[0-9]{3} s from this run's\) · "
                        r"rank 3 holds no CUDA event at all \(no API call, kernel or copy\), though its "
                        r"capture traced CUDA: .*", spec["title"]["subtitle"]), spec["title"]
