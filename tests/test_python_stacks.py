"""The Python threads' sampled stacks (nsys --python-sampling=true): python-stacks, its flame graph
and folded export, checked against what tests/data/programs/nsys_python_hot.py measured of itself
(tests/data/nsys_python_hot/README.md)."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS

import tracekit
from tracekit.errors import QueryError


def _spent(scen: str) -> dict[str, tuple[int, float]]:
    """What a capture's program printed: per function, its last line and the milliseconds it took
    over the steps (time.perf_counter around each call)."""
    text = (DATA / f"nsys_{scen}" / "profile.log").read_text()
    return {f: (int(line), float(ms)) for f, line, ms in
            re.findall(r"^(\w+): line (\d+), ([\d.]+) ms in \d+ calls$", text, re.M)}


@pytest.fixture(scope="module")
def hot(nsys_db, tmp_path_factory):
    """nsys_db's python_hot, and its captures again and with parse twice as long (stored apart:
    the session's store holds the first alone)."""
    with tracekit.open(tmp_path_factory.mktemp("python") / "s.duckdb") as tk:
        for scen in ("python_hot_again", "python_hot_slow"):
            tk.ingest(DATA / f"nsys_{scen}" / "export.sqlite.xz", name=scen)
        yield {"python_hot": nsys_db, "python_hot_again": tk, "python_hot_slow": tk}


@pytest.mark.parametrize("scen", ["python_hot", "python_hot_again", "python_hot_slow"])
def test_the_samples_shares_are_the_time_each_function_took(hot, scen):
    """Inside the steps (range=step), the samples under parse, under prepare (pack, one call
    deeper) and under run_model (the GEMM and .item()'s wait) are the shares of the time the
    program measured for them, within 2 points: nsys samples the thread 1,000 times a second. So
    in the capture again, and in the one whose parse took twice as long (its share 23.6 % -> 38 %)."""
    spent = _spent(scen)
    assert set(spent) == {"parse", "prepare", "run_model"}
    stacks = hot[scen].query("python-stacks", run=scen, range="step", limit=0)
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
    """A run with Python samples has the section, after the CPU's; a run without leaves it out
    without a word."""
    from test_report import _parse

    from tracekit import report

    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["python_hot"], name="hot")
        tk.ingest(NSYS_EXPORTS["hstu_mixed"], name="plain")
        assert "python-flame" in _parse(report.write_report(tk, tmp_path / "hot.html", run="hot")).sections
        assert "python-flame" not in _parse(report.write_report(tk, tmp_path / "plain.html", run="plain")).sections
