"""The Python threads' sampled stacks (nsys --python-sampling=true): python-stacks, its flame graph
and folded export, python-hotspots and gpu-idle-python, checked against what
tests/data/programs/nsys_python_hot.py measured of itself (tests/data/nsys_python_hot/README.md) and
against the GPU ops' own intervals; diff's python scope on identical captures (the noise) and on the
planted 2x."""

from __future__ import annotations

import json
import re
import warnings

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS

import tracekit
from tracekit.errors import CaptureWarning, QueryError


def _spent(scen: str) -> dict[str, tuple[int, float]]:
    """What a capture's program printed: per function, its last line and the milliseconds it took
    over the steps (time.perf_counter around each call)."""
    text = (DATA / f"nsys_{scen}" / "profile.log").read_text()
    return {f: (int(line), float(ms)) for f, line, ms in
            re.findall(r"^(\w+): line (\d+), ([\d.]+) ms in \d+ calls$", text, re.M)}


HOT = ("python_hot", "python_hot_again", "python_hot_again2", "python_hot_again3", "python_hot_slow")


@pytest.fixture(scope="module")
def hot(tmp_path_factory):
    """python_hot, captured four times (noise) and with parse twice as long, in one store of their
    own (the session's store holds the first alone)."""
    with tracekit.open(tmp_path_factory.mktemp("python") / "s.duckdb") as tk:
        for scen in HOT:
            tk.ingest(DATA / f"nsys_{scen}" / "export.sqlite.xz", name=scen)
        yield tk


@pytest.mark.parametrize("scen", HOT)
def test_the_samples_shares_are_the_time_each_function_took(hot, scen):
    """Inside the steps (range=step), the samples under parse, under prepare (pack, one call
    deeper) and under run_model (the GEMM and .item()'s wait) are the shares of the time the
    program measured for them, within 2 points: nsys samples the thread 1,000 times a second. So
    in the captures again, and in the one whose parse took twice as long (its share 23.6 % -> 38 %)."""
    spent = _spent(scen)
    assert set(spent) == {"parse", "prepare", "run_model"}
    stacks = hot.query("python-stacks", run=scen, range="step", limit=0)
    assert stacks["stack"].str.starts_with("<module> (nsys_python_hot.py:").all()
    total = sum(ms for _, ms in spent.values())
    for fn, (line, ms) in spent.items():
        under = stacks.filter(pl.col("stack").str.contains(f";{fn} (nsys_python_hot.py:{line})", literal=True))
        assert abs(under["pct"].sum() - 100 * ms / total) < 2, (fn, under["pct"].sum(), 100 * ms / total)
    assert stacks["samples"].sum() == pytest.approx(total, rel=0.05)  # (a sample a millisecond)
    assert round(stacks["pct"].sum()) == 100
    deep = stacks.filter(pl.col("stack").str.contains(";prepare (", literal=True))
    assert deep["stack"].str.contains(";pack (nsys_python_hot.py:", literal=True).all()
    assert (deep["modules"].str.split(";").list.len() == deep["frames"]).all()
    assert deep["modules"].str.split(";").list.first().eq("nsys_python_hot.py").all()


def _python_rows(tk, base: str, new: str) -> dict[tuple[str, str], dict]:
    df = tk.diff(base, new, by="python")
    assert set(df["scope"]) == {"python"} and set(df["metric"]) == {"self_ns", "total_ns"}
    assert set(df["verdict"]) == {"unchanged"} and df["note"].str.ends_with("host-timed, not judged").all()
    return {(r["key"], r["metric"]): r for r in df.iter_rows(named=True)}


def test_diff_says_where_the_python_time_moved_and_judges_none_of_it(hot):
    """diff's python scope: per function (file as on any machine, no line), its sampled wall time
    itself and under it, the samples in the note. The planted 2x reads as one: parse's time doubles
    (as the program measured, 320 -> 640 ms), with pack and run_model unmoved, p and interval
    beside; the four identical captures move as much or more in torch's import and in a function
    it runs, so nothing is judged (diff._python_scope)."""
    rows = _python_rows(hot, "python_hot", "python_hot_slow")
    parse = rows[("parse (nsys_python_hot.py)", "total_ns")]
    assert "samples 308 -> 629" in parse["note"] and 95 < parse["delta_pct"] < 115 and parse["p_value"] < 1e-20
    assert ("parse (nsys_python_hot.py)", "self_ns") not in rows  # (never innermost: _spin's generator is)
    assert rows[("<genexpr> (nsys_python_hot.py)", "self_ns")]["delta_pct"] > 50
    assert parse["delta_pct_low"] < parse["delta_pct"] < parse["delta_pct_high"]
    for fn in ("pack", "run_model"):
        moved = rows[(f"{fn} (nsys_python_hot.py)", "total_ns")]
        assert abs(moved["delta_pct"]) < 12 and moved["p_value"] > 0.01, moved
    assert parse["new"] == pytest.approx(640e6, rel=0.05)  # (samples x the interval: ~1 ms each)
    # the noise of identical captures, in the docstring's figures: torch's import up to 43 % apart
    key = ("<module> (torch/__init__.py)", "total_ns")
    torch = {again: _python_rows(hot, "python_hot", again)[key] for again in HOT[1:4]}
    assert "samples 2,799 -> 3,570" in torch["python_hot_again"]["note"]
    assert "samples 2,799 -> 4,065" in torch["python_hot_again3"]["note"]
    assert torch["python_hot_again"]["p_value"] < 1e-18 and torch["python_hot_again3"]["p_value"] < 1e-18
    spent = [torch["python_hot_again"]["base"], *(r["new"] for r in torch.values())]  # (each capture's time)
    assert round(100 * (max(spent) / min(spent) - 1)) == 43
    wrapper = _python_rows(hot, "python_hot_again2", "python_hot_again3")[
        ("out_wrapper (torch/_prims_common/wrappers.py)", "self_ns")]
    assert "samples 63 -> 1" in wrapper["note"] and wrapper["p_value"] < 1e-10
    assert {k for k, _ in rows} >= {"_find_and_load (<frozen importlib._bootstrap>)", "get_data (<frozen "
                                    "importlib._bootstrap_external>)", "update_wrapper (functools.py)"}


def test_diff_of_the_pipelines_python_time_across_identical_captures(python_captures):
    """The inference pipeline captured with --python-samples three times (hstu_capture_python,
    then _again and _again2 minutes apart on another lease): its Triton launcher and attention call
    move by 2-3x with nothing changed, the noise that keeps the scope from judging. A run without
    Python samples has no python scope, and asking for it says what the capture lacked."""
    with tracekit.open(python_captures, read_only=True) as tk, warnings.catch_warnings():
        # (the first was captured by the code before its commit: the workload's the same)
        warnings.filterwarnings("ignore", "diff: the captures differ in setup: code 23e51ed28589[+]dirty -> ",
                                CaptureWarning)
        launcher = _python_rows(tk, "hstu_capture_python_again", "hstu_capture_python_again2")[
            ("launch_gluon (_cached_gluon.py)", "total_ns")]
        assert "samples 30 -> 68" in launcher["note"] and launcher["p_value"] < 0.01
        attention = _python_rows(tk, "hstu_capture_python", "hstu_capture_python_again2")[
            ("attention (model.py)", "total_ns")]
        assert "samples 45 -> 154" in attention["note"] and attention["p_value"] < 1e-10
        assert "python" in set(tk.diff("hstu_capture_python", "hstu_capture_python_again")["scope"])
        warnings.simplefilter("ignore", CaptureWarning)  # (two unrelated programs: their setups differ)
        assert "python" not in set(tk.diff("hstu_capture_python", "backtrace")["scope"])
        with pytest.raises(tracekit.TracekitError, match=r"^--by python: run 4 \(backtrace\) \[nsys without "
                                                         r"Python sample trace\] has no python scope"):
            tk.diff("hstu_capture_python", "backtrace", by="python")


def test_python_hotspots_are_the_functions_time_itself_and_with_callees(hot, nsys_db):
    """python-hotspots inside the steps: parse, prepare and run_model each on every stack of their
    share of the steps (total_pct as python-stacks counts them, the program's measured shares
    within 2 points); run_model has the most self time, .item()'s wait for the GPU, which spins
    (Running), then the spinning generator, nearly all of it running; the frames above them are on every
    stack (total 100 %). Each sample has one innermost frame: the self samples sum to those asked.
    Over the whole run, CUDA's lazy init waits in the driver (Uninterruptible): not running."""
    spent = _spent("python_hot")
    total = sum(ms for _, ms in spent.values())
    rows = hot.query("python-hotspots", run="python_hot", range="step", limit=0)
    by = {(r["function"], r["file"]): r for r in rows.iter_rows(named=True)}
    asked = hot.query("python-stacks", run="python_hot", range="step", limit=0)["samples"].sum()
    assert rows["self_samples"].sum() == asked
    for fn, (_, ms) in spent.items():
        assert abs(by[(fn, "nsys_python_hot.py")]["total_pct"] - 100 * ms / total) < 2, fn
    assert rows["function"].head(2).to_list() == ["run_model", "<genexpr>"]
    assert by[("<genexpr>", "nsys_python_hot.py")]["running_pct"] > 95
    assert by[("run_model", "nsys_python_hot.py")]["running_pct"] > 90
    assert by[("main", "nsys_python_hot.py")]["total_pct"] == by[("<module>", "nsys_python_hot.py")]["total_pct"] == 100
    interval = hot.sql("SELECT interval_ns FROM python_sample_interval((SELECT run_id FROM runs "
                       "WHERE name = 'python_hot'))").item()
    parse = by[("parse", "nsys_python_hot.py")]
    assert parse["self_samples"] == 0 and parse["total_ns"] == round(parse["total_samples"] * interval)
    callers = hot.query("python-hotspots", run="python_hot", range="step", order="total", limit=3)
    assert set(callers["function"]) == {"<module>", "main", "run_model"}
    whole = hot.query("python-hotspots", run="python_hot", limit=0).filter(pl.col("function") == "_lazy_init")
    assert whole.row(0, named=True)["file"] == "torch/cuda/__init__.py" and whole["running_pct"][0] < 10
    with pytest.raises(QueryError, match=r"captured without Python sample tracing; capture with nsys profile "
                                         r"--python-sampling=true"):
        nsys_db.query("python-hotspots", run="backtrace")


def _idle_by_function(tk, run: str) -> dict[tuple[str, str], int]:
    """Per innermost function, the run's Python samples taken while device 0 ran nothing, between its
    first op's start and its last op's start, counted here from the ops' own intervals."""
    import numpy as np

    run_id = tk.sql(f"SELECT run_id FROM runs WHERE name = '{run}'").item()
    ops = tk.sql(f"SELECT start_ns, end_ns FROM gpu_ops WHERE run_id = {run_id} AND device_id = 0 ORDER BY start_ns")
    starts, ends = ops["start_ns"].to_numpy(), np.maximum.accumulate(ops["end_ns"].to_numpy())
    samples = tk.sql(f"SELECT s.ts_ns, f.function, f.file FROM python_samples s JOIN python_stack_functions({run_id}) f "
                     f"USING (stack_id) WHERE s.run_id = {run_id} AND f.innermost")
    ts = samples["ts_ns"].to_numpy()
    before = np.searchsorted(starts, ts, side="right") - 1  # (the last op to start at or before the sample)
    inside = (ts > starts[0]) & (ts < starts[-1])
    idle = inside & (ts >= ends[np.maximum(before, 0)])  # (every op before it had ended)
    out: dict[tuple[str, str], int] = {}
    for fn, file in samples.filter(pl.Series(idle)).select("function", "file").rows():
        out[(fn, file)] = out.get((fn, file), 0) + 1
    return out


def test_gpu_idle_python_is_the_python_code_running_while_the_gpu_sat_idle(hot, nsys_db, tmp_path):
    """gpu-idle-python: the samples inside device 0's idle gaps by function, as counted here from the
    ops' intervals. In python_hot's steps parse and prepare (pack) run between the last step's
    .item() and the next GEMM: all of their time the GPU is idle; run_model waits on the GEMM: almost
    none of it. In the HSTU pipeline the batch's data is drawn with numpy (searchsorted) while the
    GPU waits: all of its time idle, among the top three functions of the idle time. A run without
    Python samples is an error that says so."""
    interval = hot.sql("SELECT interval_ns FROM python_sample_interval((SELECT run_id FROM runs "
                       "WHERE name = 'python_hot'))").item()
    rows = hot.query("gpu-idle-python", run="python_hot", limit=0)
    counted = {(r["function"], r["file"]): round(r["self_ns"] / interval) for r in rows.iter_rows(named=True)
               if r["self_ns"]}
    assert counted == _idle_by_function(hot, "python_hot")
    assert rows["self_pct"].sum() == pytest.approx(100, abs=0.5) and set(rows["device_id"]) == {0}
    steps = {r["function"]: r for r in hot.query("gpu-idle-python", run="python_hot", range="step",
                                                  limit=0).iter_rows(named=True)}
    assert steps["parse"]["idle_share_pct"] == steps["pack"]["idle_share_pct"] == 100
    assert steps["run_model"]["idle_share_pct"] < 5 and steps["main"]["total_pct"] == 100
    total = hot.query("gpu-idle-python", run="python_hot", range="step", order="total", limit=2)
    assert set(total["function"]) == {"<module>", "main"}
    with tracekit.open(tmp_path / "h.duckdb") as tk:
        tk.ingest(DATA / "hstu_capture_python", name="hstu_py")
        pipeline = tk.query("gpu-idle-python", run="hstu_py", limit=0)
        head = pipeline.head(3).filter(pl.col("function") == "_wrapfunc").row(0, named=True)
        assert head["file"] == "numpy/_core/fromnumeric.py" and head["idle_share_pct"] == 100
        interval = tk.sql("SELECT interval_ns FROM python_sample_interval(1)").item()
        assert {(r["function"], r["file"]): round(r["self_ns"] / interval) for r in pipeline.iter_rows(named=True)
                if r["self_ns"]} == _idle_by_function(tk, "hstu_py")
    with pytest.raises(QueryError, match=r"captured without Python sample tracing"):
        nsys_db.query("gpu-idle-python", run="backtrace")


@pytest.mark.parametrize("file, named", [
    ("/opt/torch/.venv/lib/python3.12/site-packages/torch/cuda/__init__.py", "torch/cuda/__init__.py"),
    ("/usr/lib/python3/dist-packages/numpy/_core/numeric.py", "numpy/_core/numeric.py"),
    ("/usr/lib/python3.12/json/decoder.py", "json/decoder.py"),
    ("C:\\Python312\\Lib\\site-packages\\torch\\nn\\functional.py", "torch/nn/functional.py"),
    ("C:\\Python312\\Lib\\json\\decoder.py", "json/decoder.py"),
    ("/work/main/tests/data/programs/nsys_python_hot.py", "nsys_python_hot.py"),
    ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap>"),
    (None, "?")])
def test_a_python_file_is_named_as_on_any_machine(nsys_db, file, named):
    """How python-hotspots, gpu-idle-python and diff's python scope name a function's file: below the
    packages' folder or the standard library's, else by its name, '/' between folders (Windows' too)."""
    assert nsys_db.con.execute("SELECT python_module_path(?)", [file]).fetchall()[0][0] == named


def test_the_filters_ask_for_part_of_the_samples(nsys_db):
    whole = nsys_db.query("python-stacks", run="python_hot", limit=0)
    assert whole["samples"].sum() > nsys_db.query("python-stacks", run="python_hot", range="step",
                                                  limit=0)["samples"].sum()
    tid = nsys_db.sql("SELECT any_value(tid) FROM python_samples s JOIN runs USING (run_id) "
                      "WHERE name = 'python_hot'").item()
    assert nsys_db.query("python-stacks", run="python_hot", thread=str(tid), limit=0).equals(whole)
    model = nsys_db.query("python-stacks", run="python_hot", function="RUN_MODEL", limit=0)
    assert model.height and model["stack"].str.contains(";run_model (", literal=True).all()
    states = nsys_db.sql("SELECT thread_state, count(*) AS n FROM python_samples JOIN runs USING (run_id) "
                         "WHERE name = 'python_hot' GROUP BY 1 ORDER BY 1")
    running = nsys_db.query("python-stacks", run="python_hot", state="Running", limit=0)
    assert running["samples"].sum() == dict(states.iter_rows())["Running"] < whole["samples"].sum()
    for params, error in (({"state": "Asleep"}, r"no Python sample of the run is of a thread in state 'Asleep' "
                                                 r"\(Running, Uninterruptible\)"),
                          ({"thread": "nope"}, rf"no Python sample of the run is of a thread 'nope' \(give a tid or a "
                                               rf"thread's name: the run's are of tids {tid}\)"),
                          ({"range": "nope"}, r"the run has no NVTX range named 'nope'"),
                          ({"function": "nosuch"}, r"no stack asked has a function whose name contains 'nosuch'")):
        with pytest.raises(QueryError, match=error):
            nsys_db.query("python-stacks", run="python_hot", **params)
    with pytest.raises(QueryError, match=r"captured without Python sample tracing; capture with nsys profile "
                                         r"--python-sampling=true, exported with .*tracekit capture --python-samples"):
        nsys_db.query("python-stacks", run="backtrace")


def test_the_flame_graph_and_the_folded_file(nsys_db, tmp_path):
    from tracekit import charts
    from tracekit.stacks import export_stacks

    stacks = nsys_db.query("python-stacks", run="python_hot", limit=0)
    spec = charts.python_flame(stacks).to_dict()
    assert spec["title"]["text"] == "Python call stacks (sampled)"
    assert "file" in str(spec["layer"][0]["encoding"]["color"]["title"])
    out = tmp_path / "py.folded"
    res = export_stacks(nsys_db, out, run="python_hot", python=True)
    assert (res.stacks, res.samples) == (stacks.height, stacks["samples"].sum())
    lines = out.read_text().splitlines()
    assert lines == [f"{s} {n}" for s, n in zip(stacks["stack"], stacks["samples"], strict=True)]
    # one line per distinct stack the export holds (the fixture's README: 1,155): two files of one
    # name (torch/__init__.py, zipfile/__init__.py) are two frames, where they made 1,146
    distinct = nsys_db.sql("SELECT count(DISTINCT stack_id) FROM python_frames f JOIN runs USING (run_id) "
                           "WHERE name = 'python_hot'")
    assert res.stacks == distinct[0, 0] == 1155
    assert "torch/__init__.py:" in "".join(lines) and "zipfile/__init__.py:" in "".join(lines)


def test_the_hstu_workload_captured_with_python_samples(tmp_path):
    """`tracekit capture --bs 8 --nc 1024 --python-samples` on the H200 (hstu_capture_python, a run
    folder): nsys samples only inside the capture range, so every sample is of the timed requests
    (under the harness's run_requests); the HSTU layers' Python code is where they are."""
    run = DATA / "hstu_capture_python"
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(run)
        stacks = tk.query("python-stacks", limit=0)
        assert stacks["samples"].sum() > 200
        assert stacks["stack"].str.contains(";run_requests (timing.py:", literal=True).all()
        layers = stacks.filter(pl.col("stack").str.contains(";layer (model.py:", literal=True))
        assert layers["pct"].sum() > 20
        assert json.loads(tk.sql("SELECT params FROM runs").item())["python_samples"] is True


def test_the_report_draws_the_python_flame_graph(tmp_path):
    """A run with Python samples has the sections (its functions' time, what ran while the GPU sat
    idle, then the flame graph), after the CPU's; a run without leaves them out without a word."""
    from test_report import _column, _parse

    from tracekit import report

    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["python_hot"], name="hot")
        tk.ingest(NSYS_EXPORTS["hstu_mixed"], name="plain")
        page = _parse(report.write_report(tk, tmp_path / "hot.html", run="hot"))
        keys = list(page.sections)
        assert keys.index("gpu-idle-python") == keys.index("python-hotspots") + 1
        assert keys.index("python-flame") == keys.index("gpu-idle-python") + 1
        (idle,) = page.sections["gpu-idle-python"]
        assert {shown for shown, _, _ in _column(idle, "function")} >= {"parse", "pack", "<genexpr>"}
        (table,) = page.sections["python-hotspots"]
        assert table["columns"][-2:] == ["function", "file"] and len(table["rows"]) == 15
        functions = {shown for shown, _, _ in _column(table, "function")}
        assert {"run_model", "<genexpr>", "_lazy_init"} <= functions
        plain = _parse(report.write_report(tk, tmp_path / "plain.html", run="plain")).sections
        assert "python-flame" not in plain and "python-hotspots" not in plain


@pytest.mark.parametrize("query", ["python-stacks", "python-hotspots", "gpu-idle-python"])
def test_a_thread_the_run_has_no_sample_of_is_an_error_in_every_python_query(tmp_path, query):
    """A thread name no Python sample is of answered an empty table in a store of that run
    alone (DuckDB skipped the check where the samples asked were none): an error naming the
    tids sampled, as for a tid; a thread that was sampled answers."""
    with tracekit.open(tmp_path / "hot.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["python_hot"], name="hot")
        tid = tk.sql("SELECT any_value(tid) FROM python_samples").item()
        for thread in ("zzz", "python3x", str(tid + 1)):
            with pytest.raises(QueryError, match=rf"^{query}: no Python sample of the run is of a thread "
                                                 rf"'{thread}' \(give a tid or a thread's name: the run's are of "
                                                 rf"tids {tid}\)$"):
                tk.query(query, thread=thread)
        assert tk.query(query, thread="python3").height
