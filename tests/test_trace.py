"""`tracekit export trace`: the Chrome Trace Event timeline of real nsys captures.

Expectations come from NVIDIA's own outputs for each capture (`nsys stats` CSVs: the GPU
trace's start, duration and name of every kernel and copy; API calls and NVTX ranges per
name) and from the store; the file is read back as JSON with decimals kept exact.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import lzma
import re
import sqlite3
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import tracekit
from tracekit import trace
from tracekit.cli import main as cli_main
from tracekit.errors import ParamError, QueryError

DATA = Path(__file__).parent / "data"
RUNS = {  # run name -> the capture's folder (each has stats/ from nsys stats)
    "hstu": DATA / "hstu_capture_nsys",          # a tracekit run folder (nsys + timed requests)
    "multiproc": DATA / "nsys_multiproc",        # 3 processes, 2 GPUs
    "mixed": DATA / "nsys_hstu_mixed",           # start/end range, marks, graphs, named domain
    "odd_nvtx": DATA / "nsys_odd_nvtx",          # a start/end range ended on another thread
    "graphs_graph": DATA / "nsys_graphs_graph",  # whole CUDA graph launches
    "memops": DATA / "nsys_memops",              # Unified Memory migrations: ops on no stream
    "cpu_only": DATA / "nsys_cpu_only",          # no CUDA (nsys -t nvtx,osrt): NVTX ranges only
    "python_hot": DATA / "nsys_python_hot",      # the Python threads' stacks sampled (--python-sampling)
    "jax": DATA / "nsys_jax",                    # XLA: GPU ops that start before the previous one on their stream ends
}


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("trace") / "t.duckdb")
    for name, folder in RUNS.items():
        t.ingest(folder if name == "hstu" else folder / "export.sqlite.xz", name=name)
    t.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="ncu")
    yield t
    t.close()


def _load(path: Path) -> dict:
    raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    return json.loads(raw, parse_float=Decimal)  # µs with 3 decimals: exact ns


def _ns(us) -> int:
    ns = Decimal(us) * 1000
    assert ns == ns.to_integral_value(), us
    return int(ns)


def _by_cat(events: list[dict]) -> Counter:
    return Counter(e["cat"] for e in events if e["ph"] in ("X", "b", "i", "C"))


@pytest.fixture(scope="module")
def exported(tk, tmp_path_factory):
    out = {}
    folder = tmp_path_factory.mktemp("traces")
    for name in RUNS:
        res = trace.export_trace(tk, folder / f"{name}.json.gz", run=name)
        out[name] = (res, _load(res.path)["traceEvents"])
    return out


@pytest.mark.parametrize("name", [n for n, f in RUNS.items() if (f / "stats" / "cuda_gpu_trace.csv.xz").exists()])
def test_gpu_ops_are_nsys_gpu_trace(name, exported):
    """Every kernel, copy and memset with the start, duration and name
    of `nsys stats -r cuda_gpu_trace`, to the nanosecond."""
    with lzma.open(RUNS[name] / "stats" / "cuda_gpu_trace.csv.xz", "rt") as f:
        want = Counter((int(r["Start (ns)"]), int(r["Duration (ns)"]), r["Name"]) for r in csv.DictReader(f))
    _, events = exported[name]
    # whole graph launches (nsys --cuda-graph-trace=graph) are not in nsys's GPU trace
    got = Counter((_ns(e["ts"]), _ns(e["dur"]), e["name"]) for e in events
                  if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy", "memset"))
    assert got == want


@pytest.mark.parametrize("name", list(RUNS))
def test_api_calls_and_nvtx_ranges_are_nsys_stats(name, exported):
    """CUDA API calls and NVTX ranges per name: the counts of cuda_api_sum and nvtx_sum."""
    _, events = exported[name]
    with open(RUNS[name] / "stats" / "cuda_api_sum.csv") as f:
        api = {r["Name"]: int(r["Num Calls"]) for r in csv.DictReader(f)}
    assert Counter(e["name"] for e in events if e["ph"] == "X" and e["cat"] == "cuda_api") == api
    with open(RUNS[name] / "stats" / "nvtx_sum.csv") as f:
        nvtx = Counter()
        for r in csv.DictReader(f):
            nvtx[r["Range"]] += int(r["Instances"])
    got = Counter(e["name"] for e in events if e.get("cat") in ("nvtx", "nvtx_startend") and e["ph"] in ("X", "b"))
    assert got == nvtx


#: runs whose capture traced OS runtime calls (nsys -t osrt)
OSRT_RUNS = ["mixed", "multiproc", "cpu_only"]


@pytest.fixture(scope="module")
def exported_osrt(tk, tmp_path_factory):
    """The traces with the OS runtime calls (--osrt), of the runs that traced them."""
    out = {}
    folder = tmp_path_factory.mktemp("traces_osrt")
    for name in OSRT_RUNS:
        res = trace.export_trace(tk, folder / f"{name}.json.gz", run=name, osrt=True)
        out[name] = (res, _load(res.path)["traceEvents"])
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_counts_equal_the_store(name, tk, exported):
    res, events = exported[name]
    run_id = res.run_id
    q = lambda sql: tk.con.execute(sql, [run_id]).fetchall()[0][0]  # noqa: E731
    want = {
        "cuda_api": q("SELECT count(*) FROM api_calls WHERE run_id = ?"),
        "nvtx": q("SELECT count(*) FROM nvtx_ranges WHERE run_id = ? AND style = 'PushPop'"),
        "nvtx_startend": q("SELECT count(*) FROM nvtx_ranges WHERE run_id = ? AND style = 'StartEnd'"),
        "nvtx_mark": q("SELECT count(*) FROM nvtx_marks WHERE run_id = ?"),
        "kernel": q("SELECT count(*) FROM kernels WHERE run_id = ?"),
        "memcpy": q("SELECT count(*) FROM memcpy WHERE run_id = ?"),
        "memset": q("SELECT count(*) FROM memset WHERE run_id = ?"),
        "graph": q("SELECT count(*) FROM graph_execs WHERE run_id = ?"),
        "um_gpu_fault": q("SELECT count(*) FROM um_gpu_faults WHERE run_id = ?"),
        "um_cpu_fault": q("SELECT count(*) FROM um_cpu_faults WHERE run_id = ?"),
        "gpu_memory": q("SELECT count(*) FROM gpu_memory WHERE run_id = ?"),  # (memops: --cuda-memory-usage)
    }
    got = _by_cat(events)
    assert {k: got.get(k, 0) for k in want} == want
    assert {k: v for k, v in res.counts.items() if k not in ("flow", "osrt", "gpu_metric", "python")} == want
    assert res.counts["python"] == got.get("python", 0) and bool(got.get("python")) == (name == "python_hot")
    assert res.counts["osrt"] == got.get("osrt", 0) == 0  # (only with --osrt)
    assert res.counts["gpu_metric"] == got.get("gpu_metric", 0) == 0  # (only with --gpu-metrics)
    # every GPU op whose launching call was recorded has its arrow
    assert res.counts["flow"] == q("SELECT count(*) FROM gpu_ops g WHERE run_id = ? AND correlation_id IN "
                                   "(SELECT correlation_id FROM api_calls a WHERE a.run_id = g.run_id)")


def _tracks(events):
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e))
    return tracks


def _assert_nested(tracks) -> None:
    """Slices on each track nest: none crosses the end of one it starts inside."""
    for key, slices in tracks.items():
        stack: list[int] = []
        for s, e, _ in sorted(slices, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], f"track {key}: slice [{s}, {e}] crosses its parent's end"
            stack.append(e)


@pytest.mark.parametrize("name", list(RUNS))
def test_tracks_nest_and_flows_bind(name, exported):
    """Slices on one track nest (Perfetto drops those that do not); each arrow starts inside
    a CUDA API call of its thread and ends at the start of a GPU op on its stream."""
    _, events = exported[name]
    tracks = _tracks(events)
    _assert_nested(tracks)
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and bool(starts) == (name != "cpu_only")  # (no CUDA: no launches)
    for fid, s in starts.items():
        t = _ns(s["ts"])
        assert any(a <= t <= b and ev["cat"] == "cuda_api" for a, b, ev in tracks[(s["pid"], s["tid"])]), fid
        f = ends[fid]
        assert f["bp"] == "e"
        assert any(a == _ns(f["ts"]) and ev["cat"] != "cuda_api" for a, b, ev in tracks[(f["pid"], f["tid"])])


def test_tracks_are_named_per_process_thread_gpu_and_stream(exported, tk):
    _, events = exported["multiproc"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    gpus = sorted(v for (pid, tid), v in names.items() if tid is None and v.startswith("GPU "))
    assert gpus == ["GPU 0: NVIDIA H200", "GPU 1: NVIDIA H200"]
    procs = {pid for (pid, tid), v in names.items() if tid is None and not v.startswith("GPU ")}
    assert procs == {r[0] for r in tk.con.execute(
        "SELECT DISTINCT pid FROM api_calls WHERE run_id = (SELECT run_id FROM runs WHERE name = 'multiproc')"
    ).fetchall()}
    # one track per (process, context, stream): stream 7 of two processes on one GPU are two tracks
    streams = tk.con.execute(
        "SELECT count(DISTINCT (device_id, global_pid, context_id, stream_id)) FROM gpu_ops "
        "WHERE run_id = (SELECT run_id FROM runs WHERE name = 'multiproc')").fetchall()[0][0]
    gpu_tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X" and e["pid"] >= trace.GPU_PID_OFFSET}
    assert len(gpu_tracks) == streams
    assert all(names[k].startswith("Stream ") for k in gpu_tracks)
    assert all(names[(e["pid"], e["tid"])].startswith("NVTX · ") for e in events
               if e["ph"] == "X" and e["cat"] == "nvtx")
    # start/end ranges on their thread's NVTX track too: a run without CUDA (nsys -t nvtx,osrt)
    # names no track of CUDA API calls (its start/end ranges' thread was one)
    for run in ("mixed", "cpu_only"):
        _, events = exported[run]
        names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events if e["name"] == "thread_name"}
        startend = [e for e in events if e.get("cat") == "nvtx_startend"]
        assert startend and all(names[(e["pid"], e["tid"])].startswith("NVTX · ") for e in startend)
    assert not [v for v in names.values() if v.startswith("CUDA API")], names


@pytest.mark.parametrize("name", list(RUNS))
def test_gpu_tracks_run_one_op_at_a_time(name, exported, tk):
    """A GPU track holds one op at a time: an op that starts before the previous op of its
    stream ended (jax: 166 of XLA's kernels and copies, by up to 320 ns) is on the stream's
    next track, ``Stream N · overlap K``, not drawn inside that op; each stream's ops are all
    there, on its tracks only."""
    res, events = exported[name]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    gpu = [e for e in events if e["ph"] == "X" and e["pid"] >= trace.GPU_PID_OFFSET]
    for key, slices in _tracks(gpu).items():
        ordered = sorted(slices, key=lambda x: x[0])
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered)), f"track {key} ({names[key]})"
    for e in gpu:
        track = "No stream" if e["args"]["stream"] is None else f"Stream {e['args']['stream']}"
        assert re.fullmatch(rf"{track}( \(pid .*\))?( · overlap \d+)?", names[(e["pid"], e["tid"])]), e
    lanes = Counter(names[(e["pid"], e["tid"])].partition(" · ")[2] for e in gpu)
    overlapping = tk.con.execute(
        "SELECT count(*) FROM (SELECT start_ns < max(end_ns) OVER (PARTITION BY device_id, global_pid, context_id, "
        "stream_id ORDER BY start_ns ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS o FROM gpu_ops "
        "WHERE run_id = ?) WHERE o", [res.run_id]).fetchall()[0][0]
    assert overlapping == (166 if name == "jax" else 0)
    assert (lanes["overlap 1"] > 0) == (overlapping > 0)  # (an op after one on the overlap track goes back on the first)
    assert set(lanes) <= {"", "overlap 1"} and sum(lanes.values()) == len(gpu)

def test_unified_memory_page_faults(exported, tk):
    """memops traced Unified Memory's page faults: each group of GPU faults is an async slice of
    its GPU's process (they overlap: 2 of its 81 groups start before the previous one ended), its
    begin and end the group's start and end, its faults and page in the args; each CPU fault an
    instant event of its process with the faulting function. The faults sum to nsys's
    um_total_sum."""
    res, events = exported["memops"]
    run = res.run_id
    groups = tk.con.execute("SELECT start_ns, end_ns, faults, '0x' || hex(address), access_type FROM um_gpu_faults "
                            "WHERE run_id = ? ORDER BY 1, 2, 4", [run]).fetchall()
    begins = {e["id"]: e for e in events if e.get("cat") == "um_gpu_fault" and e["ph"] == "b"}
    ends = {e["id"]: e for e in events if e.get("cat") == "um_gpu_fault" and e["ph"] == "e"}
    assert begins.keys() == ends.keys() and len(begins) == len(groups) == 81
    got = sorted((_ns(b["ts"]), _ns(ends[i]["ts"]), b["args"]["faults"], b["args"]["address"],
                  b["name"].removeprefix("GPU page faults (").removesuffix(")")) for i, b in begins.items())
    assert got == sorted(groups)
    with open(DATA / "nsys_memops" / "stats" / "um_total_sum.csv") as f:
        totals = next(csv.DictReader(f))
    assert sum(g[2] for g in got) == int(totals["Total GPU PageFaults"])
    cpu = [e for e in events if e.get("cat") == "um_cpu_fault"]
    assert len(cpu) == int(totals["Total CPU Page Faults"]) and {e["ph"] for e in cpu} == {"i"}
    assert {e["args"]["instruction"] for e in cpu} == {"main"} and {e["s"] for e in cpu} == {"p"}
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {names[e["pid"]] for e in begins.values()} == {"GPU 0: NVIDIA H200"}
    assert {names[e["pid"]] for e in cpu} == {"nsys_memops (pid 700)"}


def test_python_samples_are_a_flame_chart_over_time(exported, tk, tmp_path):
    """The Python samples on their thread's Python track, as slices of each level's function (they
    nest: test_tracks_nest_and_flows_bind). Each sample is in one slice per frame of its stack; the
    program's 40 calls of parse, prepare and run_model are 40 slices each inside their NVTX step,
    as long in all as the program measured them (profile.log: 320.2, 160.2, 876.1 ms) within 3 %;
    pack is one level under prepare. A window holds only its own samples' slices."""
    res, events = exported["python_hot"]
    run_id = res.run_id
    python = [e for e in events if e["ph"] == "X" and e["cat"] == "python"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    tid = tk.con.execute("SELECT any_value(tid) FROM python_samples WHERE run_id = ?", [run_id]).fetchall()[0][0]
    assert {names[(e["pid"], e["tid"])] for e in python} == {f"Python · python3 [{tid}]"}
    assert {e["tid"] for e in python} == {tid + trace.PYTHON_TID_OFFSET}
    frames = tk.con.execute("SELECT count(*) FROM python_samples s JOIN python_frames f USING (run_id, stack_id) "
                            "WHERE run_id = ?", [run_id]).fetchall()[0][0]
    assert sum(e["args"]["samples"] for e in python) == frames
    steps = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events if e["ph"] == "X" and e["name"] == ":step"]
    assert len(steps) == 40
    mine = [e for e in python if e["args"]["file"].endswith("/nsys_python_hot.py")]
    for fn, ms in (("parse", 320.2), ("prepare", 160.2), ("pack", 160.2), ("run_model", 876.1)):
        calls = [e for e in mine if e["name"] == fn and any(a <= _ns(e["ts"]) <= b for a, b in steps)]
        assert len(calls) == 40, fn
        assert sum(_ns(e["dur"]) for e in calls) / 1e6 == pytest.approx(ms, rel=0.03), fn
        assert all(e["args"]["line"] is not None for e in calls)
    pack = next(e for e in mine if e["name"] == "pack")
    assert any(e["name"] == "prepare" and _ns(e["ts"]) <= _ns(pack["ts"]) and
               _ns(pack["ts"]) + _ns(pack["dur"]) <= _ns(e["ts"]) + _ns(e["dur"]) for e in mine)
    one = trace.export_trace(tk, tmp_path / "step.json", run="python_hot", nvtx="step", instance=3)
    lo, hi = one.window.start_ns, one.window.end_ns
    sliced = [e for e in _load(one.path)["traceEvents"] if e.get("cat") == "python"]
    inside = tk.con.execute("SELECT count(*) FROM python_samples s JOIN python_frames f USING (run_id, stack_id) "
                            "WHERE run_id = ? AND ts_ns BETWEEN ? AND ?", [run_id, lo, hi]).fetchall()[0][0]
    assert sliced and sum(e["args"]["samples"] for e in sliced) == inside and one.counts["python"] == len(sliced)
    assert [e["name"] for e in sliced if e["args"]["file"].endswith("/nsys_python_hot.py")][:2] == ["<module>", "main"]


def test_ops_on_no_stream_have_their_own_track(exported, tk):
    """Unified Memory migrations run on no stream (the export's context and stream 0): all
    of them on one track of their process, named 'No stream', with a null stream; the
    process's streams keep their names (one process: no pid or context in them)."""
    _, events = exported["memops"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    gpu = [e for e in events if e["ph"] == "X" and e["pid"] >= trace.GPU_PID_OFFSET]
    migrations = [e for e in gpu if e["name"].startswith("[CUDA memcpy Unified ")]
    assert len(migrations) == tk.con.execute(
        "SELECT count(*) FROM memcpy WHERE run_id = (SELECT run_id FROM runs WHERE name = 'memops') "
        "AND stream_id IS NULL").fetchall()[0][0] == 2229
    assert {names[(e["pid"], e["tid"])] for e in migrations} == {"No stream"}
    assert all(e["args"]["stream"] is None for e in migrations)
    assert sorted({names[(e["pid"], e["tid"])] for e in gpu if e not in migrations}) == [
        "Stream 13", "Stream 14", "Stream 15", "Stream 7"]


def test_window_by_nvtx_instance(tk, tmp_path):
    res = trace.export_trace(tk, tmp_path / "w.json", run="hstu", nvtx="hstu.request", instance=3)
    events = _load(tmp_path / "w.json")["traceEvents"]
    run_id = res.run_id
    (rid, lo, end, proj_end), = tk.con.execute(
        "SELECT range_id, start_ns, end_ns, proj_end_ns FROM nvtx_ranges WHERE run_id = ? AND name = ':hstu.request' "
        "ORDER BY start_ns LIMIT 1 OFFSET 2", [run_id]).fetchall()
    hi = max(end, proj_end)
    assert (res.window.start_ns, res.window.end_ns) == (lo, hi)
    overlap = "run_id = ? AND end_ns >= ? AND start_ns <= ?"
    want = {
        "cuda_api": f"SELECT count(*) FROM api_calls WHERE {overlap}",
        "nvtx": f"SELECT count(*) FROM nvtx_ranges WHERE {overlap}",
        "kernel": f"SELECT count(*) FROM kernels WHERE {overlap}",
        "memcpy": f"SELECT count(*) FROM memcpy WHERE {overlap}",
        "memset": f"SELECT count(*) FROM memset WHERE {overlap}",
    }
    got = _by_cat(events)
    for cat, sql in want.items():
        assert got[cat] == tk.con.execute(sql, [run_id, lo, hi]).fetchall()[0][0], cat
    # the request's own GPU work is all there: the kernels launched inside it (nsys's projection)
    (gpu_ops,) = tk.con.execute("SELECT gpu_ops FROM nvtx_ranges WHERE run_id = ? AND range_id = ?",
                                [run_id, rid]).fetchall()[0]
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy", "memset")]
    assert gpu_ops > 0 and len(kernels) >= gpu_ops
    # nothing outside the window; the other requests are not in it
    for e in events:
        if e["ph"] == "X":
            assert _ns(e["ts"]) <= hi and _ns(e["ts"]) + _ns(e["dur"]) >= lo
    assert sum(1 for e in events if e["ph"] == "X" and e["name"] == ":hstu.request") == 1


def test_window_from_to_and_plain_json(tk, tmp_path):
    run_id = tk.con.execute("SELECT run_id FROM runs WHERE name = 'mixed'").fetchall()[0][0]
    lo, hi = tk.con.execute("SELECT quantile_disc(start_ns, 0.4), quantile_disc(start_ns, 0.6) FROM kernels "
                            "WHERE run_id = ?", [run_id]).fetchall()[0]
    res = trace.export_trace(tk, tmp_path / "w.json", run="mixed", start_ns=lo, end_ns=hi)
    text = (tmp_path / "w.json").read_text()
    events = json.loads(text, parse_float=Decimal)["traceEvents"]
    assert len(text.encode()) == res.json_bytes
    n = tk.con.execute("SELECT count(*) FROM kernels WHERE run_id = ? AND end_ns >= ? AND start_ns <= ?",
                       [run_id, lo, hi]).fetchall()[0][0]
    assert _by_cat(events)["kernel"] == n == res.counts["kernel"] and 0 < n < 315


def test_a_window_outside_the_capture_is_an_error(tk, tmp_path, capsys):
    """A --from/--to window wholly before or after the run's events would write an empty
    trace: an error naming the window and the events' span in ns, and no file. A window
    that overlaps the span in part keeps the events it overlaps."""
    first, last = tk.con.execute(_SPAN_SQL, ["mixed"] * 4).fetchall()[0]
    out = tmp_path / "w.json"
    for lo, hi, asked in ((1, first - 1, f"--from 1 --to {first - 1}"), (last + 1, None, f"--from {last + 1}"),
                          (None, first - 1, f"--to {first - 1}"), (5, 5, "--from 5 --to 5"),
                          (last + 1, last + 1, f"--from {last + 1} --to {last + 1}")):  # (one instant: no event)
        with pytest.raises(QueryError) as err:
            trace.export_trace(tk, out, run="mixed", start_ns=lo, end_ns=hi)
        assert str(err.value).startswith(f"export trace: {asked} (ns) is outside run ")
        assert f"whose events span {first} to {last} ns" in str(err.value) and not out.exists()
    res = trace.export_trace(tk, out, run="mixed", start_ns=1, end_ns=first)  # the first event only
    assert out.exists() and 0 < sum(res.counts.values()) < 10
    res = trace.export_trace(tk, out, run="mixed", start_ns=last)
    assert 0 < sum(res.counts.values()) < 10
    res = trace.export_trace(tk, out, run="mixed", start_ns=first, end_ns=first)  # the instant an event starts
    assert 0 < sum(res.counts.values()) < 10


_SPAN_SQL = """SELECT min(lo), max(hi) FROM (
    SELECT min(start_ns) AS lo, max(end_ns) AS hi FROM api_calls JOIN runs USING (run_id) WHERE runs.name = ?
    UNION ALL SELECT min(start_ns), max(end_ns) FROM nvtx_ranges JOIN runs USING (run_id) WHERE runs.name = ?
    UNION ALL SELECT min(ts_ns), max(ts_ns) FROM nvtx_marks JOIN runs USING (run_id) WHERE runs.name = ?
    UNION ALL SELECT min(start_ns), max(end_ns) FROM gpu_ops JOIN runs USING (run_id) WHERE runs.name = ?)"""


@pytest.mark.parametrize("name", list(RUNS))
def test_size_estimate(name, exported):
    res, _ = exported[name]
    assert res.json_bytes == pytest.approx(res.estimated_bytes, rel=0.15)


def test_large_trace_is_refused_with_the_estimate(tk, tmp_path, capsys):
    out = tmp_path / "big.json.gz"
    with pytest.raises(QueryError, match=r"would be about [\d,.]+ MB of JSON .*--force"):
        trace.export_trace(tk, out, run="hstu", max_bytes=1_000_000)
    assert not out.exists() and not list(tmp_path.iterdir())
    res = trace.export_trace(tk, out, run="hstu", max_bytes=1_000_000, force=True)
    assert out.exists() and res.json_bytes > 1_000_000


def test_exact_nanoseconds_survive_large_timestamps():
    # a capture clock far from zero: a float of µs would round these
    import duckdb

    values = [1_795_310_365_293_350_647, -1_500, 0, 999, 1001, -1, 12_345_678_901]
    con = duckdb.connect()
    texts = [con.execute(f"SELECT {trace._us('$v::BIGINT')}", {"v": ns}).fetchall()[0][0] for ns in values]
    assert [int(Decimal(t) * 1000) for t in texts] == values
    assert texts[1] == "-1.500" and texts[4] == "1.001" and texts[5] == "-0.001" and texts[6] == "12345678.901"
    assert float(texts[0]) * 1000 != values[0]  # what a reader of doubles gets instead


def test_events_before_the_session_start_are_moved_to_zero_not_dropped(exported, exported_osrt, tmp_path):
    """Perfetto drops events before 0. The mixed capture with every time of its export moved
    back, its first CUDA API call to 5 ms before its session's start (an export whose first
    events began before the start; its OS runtime calls, earlier still, are written with
    --osrt only): the trace moves the whole run later by as much as its earliest written event
    began before 0, says so in its header, and holds the same events, each the same distance
    apart, as the export taken as captured."""
    export = tmp_path / "early.sqlite"
    export.write_bytes(lzma.open(RUNS["mixed"] / "export.sqlite.xz").read())
    con = sqlite3.connect(export)
    back = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()[0][0] + 5_000_000
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        for col in ("start", "end", "timestamp"):
            if col in [r[1] for r in con.execute(f"PRAGMA table_info('{table}')")]:
                con.execute(f'UPDATE "{table}" SET "{col}" = "{col}" - ?', [back])
    con.commit()
    con.close()

    def moved(evs, by):  # each event with its time on the export's clock, and the rest of it
        return sorted(json.dumps({**e, "ts": _ns(e["ts"]) + by}, sort_keys=True, default=str)
                      for e in evs if e["ph"] != "M")

    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(export, name="early")
        osrt_first = t.con.execute("SELECT min(start_ns) FROM osrt_calls").fetchall()[0][0]  # (those nsys stats has)
        for osrt, expect_shift, (as_captured, original) in ((False, 5_000_000, exported["mixed"]),
                                                            (True, -osrt_first, exported_osrt["mixed"])):
            res = trace.export_trace(t, tmp_path / f"early{osrt}.json.gz", run="early", osrt=osrt)
            doc = _load(res.path)
            events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
            assert doc["otherData"]["shift_ns"] == expect_shift
            assert min(_ns(e["ts"]) for e in events) == 0
            assert f"the {expect_shift} ns by which the earliest event began before" in doc["otherData"]["clock"]
            assert res.counts == as_captured.counts
            assert moved(events, back - expect_shift) == moved(original, 0)
        # a window's trace is on the same clock as the whole run's
        lo = t.con.execute("SELECT min(start_ns) FROM kernels").fetchall()[0][0]
        res = trace.export_trace(t, tmp_path / "w.json", run="early", start_ns=lo, end_ns=lo + 1)
        assert _load(res.path)["otherData"]["shift_ns"] == 5_000_000


def test_window_errors_are_param_errors(tk):
    run_id = tk.con.execute("SELECT run_id FROM runs WHERE name = 'hstu'").fetchall()[0][0]
    with pytest.raises(ParamError):
        trace.resolve_window(tk, run_id, nvtx="hstu.request", instance=0)
    assert trace.resolve_window(tk, run_id).label == "whole run"


@pytest.mark.parametrize("name", OSRT_RUNS)
def test_osrt_calls_on_their_threads_tracks(name, tk, exported, exported_osrt):
    """--osrt: every OS runtime call of the store once, on its thread's 'OS runtime' track,
    nested under the call it was made in (a call inside another traced call); the rest of
    the trace as without it; the estimate holds."""
    res, events = exported_osrt[name]
    run_id = res.run_id
    want = sorted(tk.con.execute("SELECT pid, tid, name, start_ns, end_ns FROM osrt_calls WHERE run_id = ?",
                                 [run_id]).fetchall())
    calls = [e for e in events if e["ph"] == "X" and e["cat"] == "osrt"]
    assert len(want) > 0 and res.counts["osrt"] == len(calls)
    assert sorted((e["pid"], e["tid"] - trace.OSRT_TID_OFFSET, e["name"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
                  for e in calls) == want
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(names[(e["pid"], e["tid"])].startswith("OS runtime · ") for e in calls)
    _assert_nested(_tracks(calls))  # they nest on each track
    assert _by_cat([e for e in events if e.get("cat") != "osrt"]) == _by_cat(exported[name][1])
    assert res.json_bytes == pytest.approx(res.estimated_bytes, rel=0.15)


def test_osrt_of_a_run_without_them_is_an_error(tmp_path):
    """A capture made without nsys -t osrt (the odd_nvtx export with its OS runtime events
    taken out, and its capture settings saying so): --osrt is an error, nothing written."""
    export = tmp_path / "no_osrt.sqlite"
    export.write_bytes(lzma.open(RUNS["odd_nvtx"] / "export.sqlite.xz").read())
    con = sqlite3.connect(export)
    con.execute("DROP TABLE OSRT_API")
    con.execute("DELETE FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE' AND value = 'OSRuntime'")
    con.commit()
    con.close()
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(export, name="no_osrt")
        with pytest.raises(QueryError, match=r"^export trace --osrt: run 1 \(no_osrt\) was captured without OS "
                                             r"runtime tracing; capture with nsys -t osrt, or leave out --osrt$"):
            trace.export_trace(t, tmp_path / "t.json.gz", run="no_osrt", osrt=True)
        assert not (tmp_path / "t.json.gz").exists()
        assert trace.export_trace(t, tmp_path / "t.json.gz", run="no_osrt").counts["nvtx"] > 0


# -- a job's ranks in one timeline ---------------------------------------------------

RANKS_NCCL = DATA / "nsys_ranks_nccl"  # 2 ranks, 2 GPUs, a barrier before every step, an all-reduce in each


@pytest.fixture(scope="module")
def job_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("job") / "j.duckdb"
    with tracekit.open(db) as t:
        for r in (0, 1):
            t.ingest(RANKS_NCCL / f"rank{r}" / "export.sqlite.xz")
        t.ingest(DATA / "nsys_multiproc" / "export.sqlite.xz", name="alone")  # (no rank)
    return db


def _ranks_events(events: list[dict]) -> dict[int, list[dict]]:
    """A job's timeline's events (metadata aside) by the rank their process is named for."""
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    out: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        if e["ph"] != "M":
            out[int(names[e["pid"]].removeprefix("rank ").split(" ")[0])].append(e)
    return out


def test_a_jobs_ranks_in_one_timeline_on_one_clock(job_db, tmp_path):
    """--ranks all: each rank's events are its own export's, its processes named `rank N ·`
    and apart from the other rank's, its times its own plus the distance of its session's
    start from the earliest rank's. The all-reduce both ranks wait in together (a barrier
    before every step) then ends at the same time on both GPUs, within 10 µs, where the
    exports' own clocks put the ends 7.4 ms apart."""
    with tracekit.open(job_db, read_only=True) as tk:
        res = trace.export_trace(tk, tmp_path / "job.json", run="2", ranks="all")
        doc = _load(res.path)
        by_rank = _ranks_events(doc["traceEvents"])
        assert [(x.rank, x.run_id, x.shift_ns) for x in res.parts] == [(0, 1, 7_409_155), (1, 2, 0)]
        assert doc["otherData"]["ranks"] == [{"rank": 0, "run_id": 1, "shift_ns": 7_409_155},
                                             {"rank": 1, "run_id": 2, "shift_ns": 0}]
        ends, own_ends = {}, {}
        for part in res.parts:
            alone = trace.export_trace(tk, tmp_path / f"r{part.rank}.json", run=str(part.run_id))
            own = [e for e in _load(alone.path)["traceEvents"] if e["ph"] != "M"]
            mine = by_rank[part.rank]
            assert _by_cat(mine) == _by_cat(own) and len(mine) == len(own) > 10_000
            assert sorted(_ns(e["ts"]) for e in mine) == sorted(_ns(e["ts"]) + part.shift_ns for e in own)
            nccl = [e for e in mine if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel")]
            ends[part.rank] = sorted(_ns(e["ts"]) + _ns(e["dur"]) for e in nccl)
            own_ends[part.rank] = sorted(_ns(e["ts"]) + _ns(e["dur"]) for e in own
                                         if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel"))
        assert len(ends[0]) == len(ends[1]) >= 20
        assert max(abs(a - b) for a, b in zip(ends[0], ends[1], strict=True)) < 10_000
        assert min(abs(a - b) for a, b in zip(own_ends[0], own_ends[1], strict=True)) > 7_000_000
        events = doc["traceEvents"]
        named = [e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
        own_pids = sum(len({e["pid"] for e in _load(tmp_path / f"r{x.rank}.json")["traceEvents"]}) for x in res.parts)
        assert len(named) == len(set(named)) == own_pids  # (each rank's processes and GPUs apart)
        starts = [e["id"] for e in events if e["ph"] == "s"]
        assert len(starts) == len(set(starts)) == res.counts["flow"] > 0


def test_start_end_ranges_of_ranks_keep_ids_of_their_own(tmp_path):
    """Two ranks of one capture whose start/end ranges carry the same range ids (one export
    read as rank 0 and, with other content, as rank 1): each range's begin and end pair up
    within its rank in the job's timeline, never with the other rank's."""
    from conftest import captured_again

    mixed = DATA / "nsys_hstu_mixed" / "export.sqlite.xz"
    with tracekit.open(tmp_path / "m.duckdb") as tk:
        tk.ingest(mixed, params={"rank": 0, "job": "m"})
        tk.ingest(captured_again(mixed, tmp_path / "again.sqlite"), params={"rank": 1, "job": "m"})
        alone = trace.export_trace(tk, tmp_path / "one.json", run="1")
        res = trace.export_trace(tk, tmp_path / "job.json", run="1", ranks="all")
    one = [e for e in _load(alone.path)["traceEvents"] if e["ph"] == "b"]
    assert len(one) > 0
    by_rank = _ranks_events(_load(res.path)["traceEvents"])
    ids = {r: [e["id"] for e in evs if e["ph"] == "b"] for r, evs in by_rank.items()}
    assert len(ids[0]) == len(ids[1]) == len(one) and not set(ids[0]) & set(ids[1])
    for evs in by_rank.values():
        assert Counter(e["id"] for e in evs if e["ph"] == "b") == Counter(e["id"] for e in evs if e["ph"] == "e")


def test_a_window_of_a_jobs_timeline_is_each_ranks_same_span(job_db, tmp_path):
    """--nvtx step --instance 3 of rank 0's run: the window is that step's span on rank 0's
    clock, and rank 1's part holds what rank 1's own export holds over the same span (its
    --from/--to moved onto its clock); --ranks 1 writes that part alone."""
    with tracekit.open(job_db, read_only=True) as tk:
        res = trace.export_trace(tk, tmp_path / "w.json", run="1", nvtx="step", instance=3, ranks="all")
        by_rank = _ranks_events(_load(res.path)["traceEvents"])
        one = res.parts[1]
        assert one.window.start_ns == res.window.start_ns - one.shift_ns + res.parts[0].shift_ns
        alone = trace.export_trace(tk, tmp_path / "a.json", run=str(one.run_id), start_ns=one.window.start_ns,
                                   end_ns=one.window.end_ns)
        own = [e for e in _load(alone.path)["traceEvents"] if e["ph"] != "M"]
        assert _by_cat(by_rank[1]) == _by_cat(own) and len(own) > 50
        only = trace.export_trace(tk, tmp_path / "o.json", run="1", nvtx="step", instance=3, ranks="1")
        assert [x.rank for x in only.parts] == [1] and set(_ranks_events(_load(only.path)["traceEvents"])) == {1}
        for kw, err, text in (
                ({"run": "1", "ranks": "0-2"}, QueryError, r"--ranks 0-2: rank 2 not in run 1's job, which has ranks 0-1"),
                ({"run": "1", "ranks": "one"}, ParamError, r"--ranks 'one': 'one' is not a number or a span"),
                ({"run": "alone", "ranks": "all"}, QueryError, r"run 3 \(alone\) has no rank; give a rank's run"),
                ({"run": "1", "ranks": "all", "max_bytes": 1000}, QueryError,  # (no rank fits alone: no fewer)
                 r"the trace of the 2 ranks of run 1's job \(whole run\) would be about .*\) or pass --force$")):
            with pytest.raises(err, match=text):
                trace.export_trace(tk, tmp_path / "bad.json", **kw)
            assert not (tmp_path / "bad.json").exists()
        # where rank 0 fits and both do not, the error names rank 0, which then exports
        bound = trace.export_trace(tk, tmp_path / "r0.json", run="1", ranks="0").estimated_bytes
        with pytest.raises(QueryError, match=r"whole run\) would be .* or fewer ranks \(--ranks 0\) or pass --force$"):
            trace.export_trace(tk, tmp_path / "bad.json", run="1", ranks="all", max_bytes=bound)
        assert trace.export_trace(tk, tmp_path / "r0.json", run="1", ranks="0", max_bytes=bound).parts[0].rank == 0


def test_a_jobs_window_is_checked_against_every_ranks_capture(job_db, tmp_path):
    """The ranks' captures span other times: rank 1's began 7.4 ms before rank 0's, and its
    first CUDA calls come 0.19 s before rank 0's first event. A window on rank 0's clock before
    that event holds rank 1's calls (it was refused as outside rank 0's capture); a window past
    every rank's events is an error naming the job's span on the run's clock, for export trace
    and chart timeline alike (chart timeline drew an empty chart)."""
    from tracekit.charts import timeline_data

    with tracekit.open(job_db, read_only=True) as tk:
        (first,) = tk.con.execute("SELECT min(start_ns) FROM _api_calls WHERE run_id = 1").fetchone()
        res = trace.export_trace(tk, tmp_path / "w.json", run="1", ranks="all", end_ns=first - 1)
        assert res.counts["cuda_api"] == 5 and set(_ranks_events(_load(res.path)["traceEvents"])) == {1}
        for kw, option in (({"start_ns": 7 * 10**9}, "--from 7000000000"), ({"end_ns": 4 * 10**9}, "--to 4000000000")):
            with pytest.raises(QueryError, match=rf"^export trace: {option} \(ns\) is outside the captures of ranks "
                                                 r"0-1 of run 1's job, whose events span 4008173563 to 6467808951 ns "
                                                 r"on run 1's clock; choose a window inside it"):
                trace.export_trace(tk, tmp_path / "bad.json", run="1", ranks="all", **kw)
        for kw in ({"from_ns": 7 * 10**9}, {"to_ns": 4 * 10**9}):
            with pytest.raises(QueryError, match=r"^chart timeline: the window .* ns is outside the events of ranks "
                                                 r"0-1 of run 1's job \(export\), which span 4940316619 to "
                                                 r"6467808951 ns on its clock"):
                timeline_data(tk, run="1", ranks="all", **kw)
    assert not (tmp_path / "bad.json").exists()


def test_the_command_writes_a_jobs_timeline(job_db, tmp_path, capsys):
    out = tmp_path / "job.json.gz"
    assert cli_main(["--db", str(job_db), "export", "trace", "--run", "1", "--ranks", "all", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}: ranks 0-1 of run 1's job, whole run: ") and "kernel" in said
    assert set(_ranks_events(_load(out)["traceEvents"])) == {0, 1}
    assert cli_main(["--db", str(job_db), "export", "trace", "--run", "alone", "--ranks", "all",
                     "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no rank" in err and not (tmp_path / "x.json").exists()



@pytest.mark.parametrize("query", ["gpu-trace", "api-trace", "kernel-exec-trace", "nvtx-ranges"])
def test_a_query_window_outside_the_capture_is_an_error_not_an_empty_table(tk, query):
    """A window no event of the run can be in (a time of another run, or in ms) is the
    error export trace gives, naming the run's span; a window that reaches into it by one
    ns holds the run's first or last events."""
    first, last = tk.con.execute("SELECT min(start_ns), max(end_ns) FROM gpu_ops WHERE run_id = "
                                 "(SELECT run_id FROM runs WHERE name = 'hstu')").fetchall()[0]
    span_first, span_last = tk.con.execute(  # (API calls and NVTX ranges reach beyond the GPU's ops)
        "SELECT min(start_ns), max(end_ns) FROM (SELECT start_ns, end_ns FROM api_calls WHERE run_id = $r UNION ALL "
        "SELECT start_ns, end_ns FROM nvtx_ranges WHERE run_id = $r UNION ALL SELECT start_ns, end_ns FROM gpu_ops "
        "WHERE run_id = $r UNION ALL SELECT start_ns, end_ns FROM osrt_calls WHERE run_id = $r)",
        {"r": tk.con.execute("SELECT run_id FROM runs WHERE name = 'hstu'").fetchall()[0][0]}).fetchall()[0]
    for window in ({"to_ns": span_first}, {"from_ns": span_last}, {"from_ns": 1, "to_ns": 1000}):
        with pytest.raises(QueryError, match=rf"^{query}: .*\(ns\) is outside run \d+ \(hstu\)'s capture, whose "
                           rf"events span {span_first} to {span_last} ns; choose a window inside it"):
            tk.query(query, run="hstu", **window)
    if query == "gpu-trace":
        assert tk.query(query, run="hstu", to_ns=first + 1, limit=0).height >= 1
        assert tk.query(query, run="hstu", from_ns=last - 1, limit=0).height >= 1
    with pytest.raises(QueryError, match="is not before to_ns=5: the window is empty"):  # (its own error first)
        tk.query(query, run="hstu", from_ns=10, to_ns=5)

def test_cli(tk, tmp_path, capsys):
    """Last in the module: the CLI opens the store read-only, so the fixture's connection is closed."""
    db = str(tk.path)
    tk.close()
    out = tmp_path / "t.json.gz"
    assert cli_main(["--db", db, "export", "trace", "--run", "multiproc", "-o", str(out)]) == 0
    assert "176 kernel" in capsys.readouterr().out and out.exists()
    with gzip.open(out) as fh:  # (the gzip header names no temporary file)
        fh.read(1)
    assert out.read_bytes()[3] & 0x08 == 0  # FNAME flag unset
    for args, msg in [
        (["--run", "ncu"], "export trace needs an nsys run"),
        (["--run", "hstu", "--from", "10", "--to", "5"], "--from 10 is after --to 5"),
        (["--run", "hstu", "--instance", "2"], "--instance needs --nvtx"),
        (["--run", "hstu", "--nvtx", "nope"], "no NVTX range named 'nope'"),
        (["--run", "hstu", "--nvtx", ":hstu.request", "--instance", "31"], "has 30 range(s)"),
        (["--run", "hstu", "--nvtx", "hstu.request", "--instance", "99999999999999999999"], "is out of range (a 64-bit"),
        (["--run", "all"], "export trace answers for one run at a time"),
        (["--run", "hstu", "--nvtx", "hstu.request", "--from", "1"], "not both"),
        (["--run", "hstu", "--from", "1", "--to", "1,000"], "--from 1 --to 1000 (ns) is outside run "),
        (["--run", "hstu", "--from", "12.5"], "Invalid value for '--from': '12.5' is not a whole number of ns"),
        (["--run", "hstu", "--from", "12,10,0481"], "'12,10,0481' is not a whole number of ns"),
        (["--run", "hstu", "--from", "\u0661\u0662\u0663"], "is not a whole number of ns"),  # (digits 0-9 only)
    ]:
        bad = tmp_path / "bad.json.gz"
        assert cli_main(["--db", db, "export", "trace", *args, "-o", str(bad)]) == 2, args
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1 and not bad.exists(), err
    # never over the store; a folder that does not exist is one line
    before = Path(db).read_bytes()
    for out, msg in [(db, "this is the store"), (str(tmp_path / "no" / "t.json.gz"), "does not exist")]:
        assert cli_main(["--db", db, "export", "trace", "--run", "multiproc", "-o", out]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err
    assert Path(db).read_bytes() == before


def test_python_samples_before_the_session_start_set_the_shift(tmp_path):
    """The Python stacks' samples count in the run's span: the sampled capture with its
    samples alone moved back, the first 2 ms before the session's start (earlier than any
    other event), is moved later by those 2 ms, and the Python slices begin at 0 (before,
    they were written before 0, where Perfetto drops them)."""
    export = tmp_path / "early.sqlite"
    export.write_bytes(lzma.open(RUNS["python_hot"] / "export.sqlite.xz").read())
    con = sqlite3.connect(export)
    marks = "eventType = 34 AND binaryData IS NOT NULL"  # (the Python domains' marks: a stack each)
    back = con.execute(f"SELECT min(start) FROM NVTX_EVENTS WHERE {marks}").fetchall()[0][0] + 2_000_000
    con.execute(f"UPDATE NVTX_EVENTS SET start = start - ? WHERE {marks}", [back])
    con.commit()
    con.close()
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(export, name="early")
        res = trace.export_trace(t, tmp_path / "early.json", run="early")
        doc = _load(res.path)
        assert doc["otherData"]["shift_ns"] == 2_000_000
        python = [e for e in doc["traceEvents"] if e.get("cat") == "python"]
        assert python and min(_ns(e["ts"]) for e in python) == 0
        assert min(_ns(e["ts"]) for e in doc["traceEvents"] if e["ph"] != "M") == 0
