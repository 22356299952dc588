"""``tracekit sweep --grid NAME=V1,V2 -- CMD``: a program of the user's swept over a grid of its
own parameters (each point a run folder with the values in the command and in its params),
bad grids refused before any point runs, a failing point recorded; ``sweep-points`` over the
real sweeps of tests/data/command_sweep against NVIDIA's ``nsys stats`` of each point."""

import csv
import json
import re
import shutil
import sys
import warnings
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS
from tracekit.capture import cli
from tracekit.capture import sweep as sw
from tracekit.capture.export import export_sweep
from typer.testing import CliRunner

import tracekit
import tracekit.cli  # noqa: F401  (the CLI's value converters: --db DbPath)
from tracekit.errors import CaptureError, CaptureWarning, Interrupted, QueryError
from tracekit.ingest import run_folders

runner = CliRunner()
SWEEPS = DATA / "command_sweep"
#: the program each point runs: writes its arguments where $ARGS_TO says, fails where told
ECHO = ("import json, os, sys; a = sys.argv[1:]; "
        "open(os.path.join(os.environ['ARGS_TO'], '-'.join(a) + '.json'), 'w').write(json.dumps(a)); "
        "sys.exit(3 if 'fail' in a else 0)")


def _sweep(tmp_path, monkeypatch, *args: str):
    monkeypatch.setenv("ARGS_TO", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return runner.invoke(cli.app, ["sweep", *args])


def test_every_point_runs_the_command_with_its_values(tmp_path, monkeypatch):
    res = _sweep(tmp_path, monkeypatch, "--tool", "none", "--out", "runs", "--grid", "m=64,128", "--grid",
                 "dtype=fp16,fp32", "-p", "note=first", "--", sys.executable, "-c", ECHO, "--m", "{m}",
                 "--dtype={dtype}", "{not_ours}")
    assert res.exit_code == 0, res.output
    seen = sorted(json.loads(p.read_text()) for p in tmp_path.glob("--m-*.json"))
    assert seen == [["--m", m, f"--dtype={d}", "{not_ours}"] for m in ("128", "64") for d in ("fp16", "fp32")]
    manifest = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())
    sweep_id = manifest["sweep"]
    assert manifest["status"] == "ok" and manifest["settings"]["grid"] == {"m": ["64", "128"],
                                                                          "dtype": ["fp16", "fp32"]}
    values = [p["values"] for p in manifest["points"]]
    assert values == [{"m": m, "dtype": d} for m in ("64", "128") for d in ("fp16", "fp32")]  # first name slowest
    for i, point in enumerate(manifest["points"]):
        run = Path(point["run_dir"])
        assert run.name.endswith(f"-python-none-m={point['values']['m']}-dtype={point['values']['dtype']}")
        meta = json.loads((run / "meta.json").read_text())
        assert meta["status"] == "ok"
        assert meta["params"] == {"tool": "none", "program": "python", "note": "first", **point["values"],
                                  "sweep": sweep_id, "sweep_point": i, "sweep_grid": "m,dtype"}
        assert meta["program"]["argv"] == [sys.executable, "-c", ECHO, "--m", point["values"]["m"],
                                           f"--dtype={point['values']['dtype']}", "{not_ours}"]


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    res = _sweep(tmp_path, monkeypatch, "--tool", "none", "--out", "runs", "--grid", "what=ok,fail,again", "--",
                 sys.executable, "-c", ECHO, "{what}")
    assert res.exit_code == 1
    assert "what=fail: failed: capture failed (python exited with status 3" in res.output
    manifest = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())
    assert [p["status"] for p in manifest["points"]] == ["ok", "failed", "ok"] and manifest["status"] == "partial"
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["again.json", "fail.json", "ok.json"]


@pytest.mark.parametrize("args, said", [
    (["--grid", "m=1,2", "--", "prog", "--n", "{n}"], "--grid m: the command has no {m}"),
    (["--grid", "m=1,,2", "--", "prog", "{m}"], "--grid m=1,,2: an empty value"),
    (["--grid", "m", "--", "prog", "{m}"], "--grid 'm': expected NAME=VALUE1,VALUE2"),
    (["--grid", "2m=1", "--", "prog", "{2m}"], "--grid '2m': a parameter's name is letters, digits and _"),
    (["--grid", "m=1", "--grid", "m=2", "--", "prog", "{m}"], "--grid m: given twice"),
    (["--grid", "m=1", "--tool", "", "--", "prog", "{m}"], "--tool '': choose one of nsys, ncu, none"),
    (["--grid", "tool=a", "--", "prog", "{tool}"], "--grid tool: tracekit sets tool itself"),
    (["--grid", "sweep_point=1", "--", "prog", "{sweep_point}"], "--grid sweep_point: tracekit sets"),
    (["--grid", "bs=1,x", "--", "prog", "{bs}"], "--grid bs='x': bs (the batch size) is a whole number"),
    (["--grid", "m=1", "-p", "m=2", "--", "prog", "{m}"], "--grid m and --param m: give m once"),
    (["--grid", "m=1", "-p", "sweep=x", "--", "prog", "{m}"], "--param sweep: tracekit sets sweep on a sweep's"),
    (["--grid", "m=1", "--bs", "1", "--", "prog", "{m}"], "--bs: an option of the HSTU workload's sweep"),
    (["--grid", "m=1,2", "--", "no-such-program-here", "{m}"],
     "command not found: no-such-program-here (not on PATH); no point run"),
    (["--grid", "m=1", "--kernel-name", "x", "--tool", "nsys", "--", "prog", "{m}"],
     "--kernel-name: an option of --tool ncu, not of --tool nsys"),
    (["--", "prog", "{m}"], "a program's sweep needs --grid NAME=V1,V2"),
    (["--grid", "m=1", "--bs", "1"], "--grid: the grid of a program's sweep"),
    (["--bs", "1", "--nc", "128", "--nvtx-capture", "step"], "--nvtx-capture: an option of a program's sweep"),
])
def test_bad_grids_are_one_line_before_any_point(tmp_path, monkeypatch, args, said):
    res = _sweep(tmp_path, monkeypatch, "--tool", "none", "--out", "runs", *args) if "--tool" not in args else \
        _sweep(tmp_path, monkeypatch, "--out", "runs", *args)
    assert res.exit_code != 0
    assert isinstance(res.exception, CaptureError), res.output
    assert said in str(res.exception) and "\n" not in str(res.exception)
    assert not (tmp_path / "runs").exists()  # nothing ran, no manifest


def test_parse_grid_orders_and_refuses_a_value_twice():
    assert sw.parse_grid(["m=1, 2", "dtype=fp16;n=3"]) == {"m": ["1", "2"], "dtype": ["fp16"], "n": ["3"]}
    with pytest.raises(CaptureError, match=r"^--grid m=1, 2,1: 1 twice; give each value once$"):
        sw.parse_grid(["m=1, 2,1"])
    assert sw.parse_grid({"m": [1, 2], "dtype": "bf16"}) == {"m": ["1", "2"], "dtype": ["bf16"]}
    with pytest.raises(CaptureError, match="give at least one parameter"):
        sw.parse_grid([])


def test_a_config_file_holds_the_sweep_and_flags_override_it(tmp_path, monkeypatch):
    (tmp_path / "prog.yaml").write_text(
        f"command: [{json.dumps(sys.executable)}, -c, {json.dumps(ECHO)}, '{{m}}', '{{n}}']\n"
        "grid: {m: [1, 2], n: [x]}\ntool: none\nparams: {note: from_config}\ntimeout: 60\n")
    res = _sweep(tmp_path, monkeypatch, "--config", "prog.yaml", "--out", "a")
    assert res.exit_code == 0, res.output
    manifest = json.loads(next((tmp_path / "a").glob("sweep-*.json")).read_text())
    assert manifest["settings"]["config"] == "prog.yaml" and manifest["settings"]["timeout_s"] == 60
    assert [p["values"] for p in manifest["points"]] == [{"m": "1", "n": "x"}, {"m": "2", "n": "x"}]
    meta = json.loads((Path(manifest["points"][0]["run_dir"]) / "meta.json").read_text())
    assert meta["params"]["note"] == "from_config" and meta["tool"] == "none"
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["1-x.json", "2-x.json"]
    # the flags: --grid replaces the config's grid, -p adds to its params
    res = _sweep(tmp_path, monkeypatch, "--config", "prog.yaml", "--out", "b", "--grid", "m=7", "--grid", "n=y",
                 "-p", "extra=1")
    assert res.exit_code == 0, res.output
    manifest = json.loads(next((tmp_path / "b").glob("sweep-*.json")).read_text())
    assert [p["values"] for p in manifest["points"]] == [{"m": "7", "n": "y"}]
    assert manifest["settings"]["params"] == {"note": "from_config", "extra": "1"}


def test_a_configs_values_go_into_the_command_as_written(tmp_path, monkeypatch):
    """YAML reads 010 as 8, 1.10 as 1.1 and on as True; a program's sweep puts the text the
    file gives into its command line (and its params)."""
    (tmp_path / "prog.yaml").write_text(
        f"command: [{json.dumps(sys.executable)}, -c, {json.dumps(ECHO)}, '{{m}}', 1.10, on]\n"
        "grid: {m: [010, 1.10, on, 0x10, 1_000, '1.1', 1e3]}\ntool: none\nparams: {note: 1.50}\n")
    res = _sweep(tmp_path, monkeypatch, "--config", "prog.yaml", "--out", "runs")
    assert res.exit_code == 0, res.output
    manifest = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())
    values = ["010", "1.10", "on", "0x10", "1_000", "1.1", "1e3"]
    assert [p["values"]["m"] for p in manifest["points"]] == values
    assert manifest["settings"]["params"] == {"note": "1.50"}
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(f"{v}-1.10-on.json" for v in values)


@pytest.mark.parametrize("text, said", [
    ("command: 5\ngrid: {m: [1]}", "prog.yaml: command 5: the program and its arguments"),
    ("command: []\ngrid: {m: [1]}", "prog.yaml: command: empty"),
    ("command: 'python -c \"x {m}'\ngrid: {m: [1]}", "prog.yaml: command 'python -c \"x {m}': not a command line "
                                                        "(No closing quotation)"),
    ("command: x {m}\ngrid: {m: []}", "prog.yaml: grid.m: no values"),
    ("command: x {m}\ngrid: {m: [1, null]}", "prog.yaml: grid.m ['1', None]: each value a number or text"),
    ("command: x {m}\ngrid: 3", "prog.yaml: grid: a mapping of each parameter to its values"),
    ("command: x {m}\ngrid: {m: [1]}\ngpu_metrics: maybe", "prog.yaml: gpu_metrics 'maybe': true or false"),
    ("command: x {m}\ngrid: {m: [1]}\nfoo: 1", "prog.yaml: unknown key(s) foo in a program's sweep config"),
    ("command: x {m}\ngrid: {m: [1]}\nparams: {tool: a}", "prog.yaml: params.tool: tracekit sets tool itself"),
    ("command: x {m}\ngrid: {m: [1]}\ntimeout: -1", "prog.yaml: timeout -1: a number of seconds > 0"),
    ("command: x {m}\ngrid: {m: [1]}\ntool: perf", "prog.yaml: tool 'perf': choose one of nsys, ncu, none"),
    ("command: x {m}\ngrid: {m: [1]}\ntool: []", "prog.yaml: tool []: no profiler"),  # (a sweep of nothing, exit 0)
    ("command: x {m}\ngrid: {m: [1]}\nparams: {a: [1, 2]}", "prog.yaml: params.a ['1', '2']: one value"),
    ("command: x {m}\ngrid: {m: [1]}\nparams: {a: {b: 1}}", "prog.yaml: params.a {'b': '1'}: one value"),
    ("command: x {m}\ngrid: {m: [1]}\nparams: {a: null}", "prog.yaml: params.a empty (null): one value"),
    ("command: x {m}\ngrid: {m: [1]}\nbs: [1]", "prog.yaml: unknown key(s) bs in a program's sweep config"),
    # the capture options a config gives, checked with the command's: named as the file's keys, not as flags
    ("command: x {m}\ngrid: {m: [1]}\ntool: ncu\nreplay_mode: range", "prog.yaml: replay_mode 'range': choose one"),
    ("command: x {m}\ngrid: {m: [1]}\ntool: nsys\nkernel_name: gemm",
     "prog.yaml: kernel_name: an option of --tool ncu, not of --tool nsys"),
    ("command: x {m}\ngrid: {m: [1]}\ntool: ncu\nlaunch_count: 0", "prog.yaml: launch_count 0: a whole number"),
    ("command: x {m}\ngrid: {m: [1]}\ntool: nsys\ncapture_range: all", "prog.yaml: capture_range 'all': choose one"),
    ("command: x {m}\ngrid: {m: [1]}\ncapture_range: cudaProfilerApi\nnvtx_capture: step",
     "prog.yaml: capture_range cudaProfilerApi and nvtx_capture: give one"),
])
def test_bad_program_configs_are_one_line_naming_the_key(tmp_path, monkeypatch, text, said):
    (tmp_path / "prog.yaml").write_text(text + "\n")
    res = _sweep(tmp_path, monkeypatch, "--config", "prog.yaml", "--out", "runs")
    assert isinstance(res.exception, CaptureError), res.output
    assert str(res.exception).startswith(said) and "\n" not in str(res.exception)
    assert not (tmp_path / "runs").exists()


def test_repeats_of_a_program_under_no_profiler_suggest_no_diff(tmp_path, monkeypatch):
    """Under --tool none a program's sweep lands nothing in the store: no `tracekit diff ...
    --repeat` line for its repeats, which could only fail."""
    res = _sweep(tmp_path, monkeypatch, "--tool", "none", "--repeat", "2", "--out", "runs", "--grid", "m=1", "--",
                 sys.executable, "-c", "print({m})")
    assert res.exit_code == 0, res.output
    assert len(list((tmp_path / "runs").glob("sweep-*.json"))) == 2 and "tracekit diff" not in res.output


def test_out_that_is_a_run_folder_is_one_line(tmp_path, monkeypatch):
    """--out naming a run folder (a sweep's point, a capture): a run folder inside it would
    leave neither ingestible (two timing files, two meta.json); refused, nothing written."""
    point = tmp_path / "runs" / "a-run"
    point.mkdir(parents=True)
    (point / "meta.json").write_text("{}")
    res = _sweep(tmp_path, monkeypatch, "--tool", "none", "--out", str(point), "--grid", "m=1", "--",
                 sys.executable, "-c", "print({m})")
    assert isinstance(res.exception, CaptureError) and str(res.exception) == (
        f"--out {point}: is a run folder (it holds meta.json); name the folder the run folders go into (its parent)")
    res = runner.invoke(cli.app, ["capture", "--tool", "none", "--out", str(point), "--", sys.executable, "-c", "1"])
    assert isinstance(res.exception, CaptureError) and str(res.exception).startswith(f"--out {point}: is a run folder")
    assert sorted(p.name for p in point.iterdir()) == ["meta.json"]


def test_a_workload_config_with_a_command_is_one_line(tmp_path, monkeypatch):
    res = _sweep(tmp_path, monkeypatch, "--config", "quick", "--grid", "m=1", "--", "prog", "{m}")
    assert isinstance(res.exception, CaptureError)
    assert str(res.exception).startswith("--config quick: a sweep config of the HSTU workload (no command)")


# -- the real sweeps: tests/data/command_sweep (base, again, slow) -------------------------


def _manifest(which: str) -> dict:
    return json.loads(next((SWEEPS / which).glob("sweep-*.json")).read_text())


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """The three sweeps ingested, in the order they were taken."""
    db = tmp_path_factory.mktemp("command_sweep") / "s.duckdb"
    with tracekit.open(db) as tk:
        for which in ("base", "again", "slow"):
            for run in sorted((SWEEPS / which / "runs").iterdir()):
                tk.ingest(run)
    tk = tracekit.open(db, read_only=True)
    yield tk
    tk.close()


def _stats(run_dir: Path) -> list[dict]:
    with open(run_dir / "stats" / "cuda_gpu_kern_sum.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("which", ["base", "slow"])
def test_sweep_points_equal_nsys_stats_of_each_point(sweeps, which):
    manifest = _manifest(which)
    df = sweeps.query("sweep-points", sweep=manifest["sweep"])
    assert df["sweep_point"].to_list() == [0, 1, 2, 3]
    assert df["point"].to_list() == [f"m={p['values']['m']},dtype={p['values']['dtype']}"
                                      for p in manifest["points"]]
    firsts = None
    for row, point in zip(df.iter_rows(named=True), manifest["points"], strict=True):
        run = SWEEPS / which / "runs" / Path(point["run_dir"]).name
        stats = _stats(run)
        assert row["run"] == run.name
        assert row["kernels"] == len(stats)
        assert row["launches"] == sum(int(s["Instances"]) for s in stats)
        assert row["kernel_total_ns"] == sum(int(s["Total Time (ns)"]) for s in stats)
        top = max(stats, key=lambda s: int(s["Total Time (ns)"]))
        assert row["top_kernel_pct"] == pytest.approx(float(top["Time (%)"]), abs=0.051)
        firsts = firsts or row["kernel_total_ns"]
        assert row["vs_first"] == round(row["kernel_total_ns"] / firsts, 3)
        softmax = [s for s in stats if "softmax" in s["Name"].lower()]
        one = sweeps.query("sweep-points", sweep=manifest["sweep"], name="SoftMax").row(row["sweep_point"], named=True)
        assert (one["kernels"], one["launches"], one["kernel_total_ns"]) == (
            len(softmax), sum(int(s["Instances"]) for s in softmax), sum(int(s["Total Time (ns)"]) for s in softmax))
    # the planted change: the softmax twice per step at every point, nothing else
    if which == "slow":
        base = sweeps.query("sweep-points", sweep=_manifest("base")["sweep"], name="softmax")
        slow = sweeps.query("sweep-points", sweep=manifest["sweep"], name="softmax")
        assert [s - b for b, s in zip(base["launches"], slow["launches"], strict=True)] == [23] * 4


@pytest.mark.parametrize("which", ["base", "slow"])
def test_sweep_kernels_of_a_programs_sweep_equal_nsys_stats_of_each_point(sweeps, which):
    """sweep-kernels keys a program's points by their grid values, as sweep-points does (it
    took the runs, which have no bs or nc, for one point, and asked for timed requests): at
    each point every kernel, as nsys stats gives it, ranked by time; none of them is the HSTU
    workload's L2 flush, so none is left out."""
    manifest = _manifest(which)
    df = sweeps.query("sweep-kernels", sweep=manifest["sweep"], limit=0)
    points = sweeps.query("sweep-points", sweep=manifest["sweep"])
    assert df["point"].unique(maintain_order=True).to_list() == points["point"].to_list()
    for point in manifest["points"]:
        run = SWEEPS / which / "runs" / Path(point["run_dir"]).name
        mine = df.filter(pl.col("run") == run.name)
        stats = sorted(_stats(run), key=lambda s: (-int(s["Total Time (ns)"]), s["Name"]))
        assert set(mine["sweep_point"]) == {manifest["points"].index(point)}
        assert mine["rank"].to_list() == list(range(1, len(stats) + 1))
        assert [(r["name"], r["instances"], r["total_ns"]) for r in mine.iter_rows(named=True)] == [
            (s["Name"], int(s["Instances"]), int(s["Total Time (ns)"])) for s in stats]
        assert mine["time_pct"].to_list() == pytest.approx([float(s["Time (%)"]) for s in stats], abs=0.051)
        assert mine["per_request_us"].null_count() == mine.height  # (a program times no request)
    assert sweeps.query("sweep-kernels", sweep=manifest["sweep"], limit=1)["name"].to_list() == \
        points["top_kernel"].to_list()


def test_sweep_points_picks_the_sweep(sweeps):
    from tracekit.registry import get_registry

    latest = sweeps.query("sweep-points")  # the sweep of the latest run ingested: slow
    assert latest.columns == list(get_registry().get("sweep-points").columns)
    assert set(latest["run"]) == {Path(p["run_dir"]).name for p in _manifest("slow")["points"]}
    by_run = sweeps.query("sweep-points", sweep=Path(_manifest("base")["points"][2]["run_dir"]).name)
    assert set(by_run["run"]) == {Path(p["run_dir"]).name for p in _manifest("base")["points"]}
    assert sweeps.query("sweep-points", sweep="all")["run"].to_list() == latest["run"].to_list()


def test_sweep_all_takes_each_point_captured_last_whatever_the_ingest_order(tmp_path):
    """sweep=all stands each point by the run captured last (meta.started_at), not the one
    ingested last: the slow sweep, taken after base, ingested before it."""
    from datetime import datetime

    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for which in ("slow", "base"):
            for run in sorted((SWEEPS / which / "runs").iterdir()):
                tk.ingest(run)
        slow = {Path(p["run_dir"]).name for p in _manifest("slow")["points"]}
        base = {Path(p["run_dir"]).name for p in _manifest("base")["points"]}
        assert set(tk.query("sweep-points")["run"]) == base  # (latest: the sweep ingested last)
        assert set(tk.query("sweep-points", sweep="all")["run"]) == slow
        assert set(tk.query("sweep-kernels", sweep="all", limit=0)["run"]) == slow
        captured = tk.sql("SELECT name, run_captured_us(meta) AS us FROM runs")
        for name, us in captured.iter_rows():
            meta = json.loads(next(SWEEPS / w / "runs" / name / "meta.json" for w in ("slow", "base")
                                    if (SWEEPS / w / "runs" / name).is_dir()).read_text())
            assert us == int(datetime.fromisoformat(meta["started_at"]).timestamp() * 1000) * 1000
        bare = tk.ingest(NSYS_EXPORTS["many_kernels"])  # (an export alone: nsys's session start)
        (us, session), = tk.con.execute("SELECT run_captured_us(meta), json_extract(meta, '$.session_start_utc_ns') "
                                        "FROM runs WHERE run_id = ?", [bare.run_id]).fetchall()
        assert us == int(session) // 1000 > 0


def test_a_kernel_name_no_point_has_is_an_error(sweeps):
    with pytest.raises(QueryError, match="sweep-points: no kernel of the sweep's points has a name containing "
                                         "'no such kernel' .`tracekit query top-kernels --run RUN"):
        sweeps.query("sweep-points", name="no such kernel")
    assert sweeps.query("sweep-points", name="nvjet")["kernels"].to_list() == [1, 0, 1, 0]  # (fp16's GEMMs alone)


def test_sweep_points_of_a_store_without_sweeps_is_an_error(nsys_db):
    with pytest.raises(QueryError, match="sweep-points: no point of a sweep captured under nsys outside a sweep"):
        nsys_db.query("sweep-points")  # (its runs are outside any sweep, and none has a grid's values)


def test_the_sweeps_table_after_a_sweep(sweeps):
    text = cli.grid_table(sweeps.path, _manifest("base")["sweep"], width=160)
    rows = [line.split() for line in text.splitlines() if line.split()[:1] in (["0"], ["1"], ["2"], ["3"])]
    assert [r[1] for r in rows] == ["m=1024,dtype=fp16", "m=1024,dtype=fp32", "m=4096,dtype=fp16", "m=4096,dtype=fp32"]
    assert "4 rows" in text
    assert "tracekit query sweep-points -p sweep=" in text


def test_the_chart_draws_each_point_in_the_grids_order(sweeps):
    from conftest import spec_datasets

    from tracekit import charts

    sweep = _manifest("again")["sweep"]
    want = sweeps.query("sweep-points", sweep=sweep, name="softmax")
    spec = charts.chart(sweeps, "sweep-points", sweep=sweep, name="softmax").to_dict()  # (validated)
    (rows,) = [ds for ds in spec_datasets(spec) if ds and "point" in ds[0]]
    assert [r["point"] for r in rows] == want["point"].to_list()
    assert [r["ms"] for r in rows] == [t / 1e6 for t in want["kernel_total_ns"]]
    assert [r["vs_first"] for r in rows] == want["vs_first"].to_list()


# -- two sweeps compared, point by point ---------------------------------------------


def _sweep_id(which: str) -> str:
    return _manifest(which)["sweep"]


def test_a_sweep_taken_again_is_unchanged_at_every_point(sweeps):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (one program, one setup: nothing to warn of)
        df = sweeps.diff(_sweep_id("base"), _sweep_id("again"))
    points = {k.split(": ", 1)[0] for k in df["key"]}
    assert points == {f"m={m},dtype={d}" for m in (1024, 4096) for d in ("fp16", "fp32")}
    assert set(df["scope"]) == {"kernel", "nvtx", "api", "memcpy", "gpu"}  # (no sweep scope: no timed requests)
    assert set(df["verdict"]) <= {"unchanged", "not judged"}


def test_the_planted_change_regresses_at_every_point_and_nothing_else(sweeps):
    # (the command differs by its --slow, the same at every point: said once, at the first point)
    with pytest.warns(tracekit.errors.CaptureWarning, match=r"differ in setup: program python3 … -> python3 … --slow$"):
        df = sweeps.diff(_sweep_id("base"), _sweep_id("slow"))
    kernels = df.filter((df["scope"] == "kernel") & (df["verdict"] == "regressed"))
    assert set(kernels["metric"]) == {"instances", "total_ns"}
    assert all("softmax" in k.lower() for k in kernels["key"])  # the softmax alone, twice as often
    moved = kernels.filter(kernels["metric"] == "instances")
    assert sorted(k.split(": ", 1)[0] for k in moved["key"]) == sorted(
        f"m={m},dtype={d}" for m in (1024, 4096) for d in ("fp16", "fp32"))
    assert moved["delta_pct"].to_list() == [100.0] * 4
    gemms = df.filter((df["scope"] == "kernel") & ~df["key"].str.to_lowercase().str.contains("softmax"))
    assert set(gemms["verdict"]) <= {"unchanged"}
    # what moved names the three kernels that moved most, each at its point, and counts the fourth
    from tracekit.diff import moved as said_moved

    (line,) = [t for t in said_moved(df) if t.startswith("Kernel time")]
    named = line.split(" in all: ", 1)[1].split("; ")
    assert named[-1] == "and 1 more" and all(n.split(": ", 1)[0] in set(moved["key"].str.split(": ").list.first())
                                                 and "softmax" in n.lower() for n in named[:-1]), line


def test_a_sweep_against_itself_is_one_line_and_against_a_run_its_point(sweeps, tmp_path):
    base = _sweep_id("base")
    with pytest.raises(QueryError, match=f"diff: both sides are sweep {base}: a sweep is compared with another"):
        sweeps.diff(base, base)
    # a run against a program's sweep: the sweep's run at the run's point
    run = Path(_manifest("again")["points"][3]["run_dir"]).name
    at = Path(_manifest("base")["points"][3]["run_dir"]).name
    assert sweeps.diff(base, run).equals(sweeps.diff(at, run))
    assert sweeps.diff(run, base).equals(sweeps.diff(run, at))
    from tracekit import report

    (tmp_path / "r.html").write_text(report.render(report.build(sweeps, run=run, vs=base)))
    assert f"Compared with run {sweeps.resolve(at)[0]} ({at}), this point of sweep {base}" in \
        (tmp_path / "r.html").read_text()


def test_the_sweeps_run_that_stood_in_is_said(sweeps, capsys):
    """diff SWEEP RUN and compare SWEEP RUN RUN: the table's column names the sweep, so a note
    line names the run of the sweep at each run's point; between two runs, or two sweeps, none."""
    from tracekit.cli import main
    from tracekit.diff import stand_in

    base = _sweep_id("base")
    runs = [Path(_manifest("again")["points"][i]["run_dir"]).name for i in (1, 3)]
    at = [Path(_manifest("base")["points"][i]["run_dir"]).name for i in (1, 3)]
    points = ["m=1024,dtype=fp32", "m=4096,dtype=fp32"]
    said = [f"base sweep {base} is compared by its run at {p}, run {sweeps.resolve(a)[0]} ({a})"
            for p, a in zip(points, at, strict=True)]
    assert stand_in(sweeps, base, runs[1]) == said[1]
    assert stand_in(sweeps, runs[1], base) == said[1].replace("base sweep", "new sweep", 1)
    assert stand_in(sweeps, at[1], runs[1]) is None and stand_in(sweeps, base, _sweep_id("again")) is None
    db = str(sweeps.path)
    assert main(["--db", db, "diff", base, runs[1]]) == 0
    assert f"tracekit: note: diff: {said[1]}" in capsys.readouterr().err.splitlines()
    assert main(["--db", db, "compare", base, *runs]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("tracekit: note:")] == [
        f"tracekit: note: compare: {r}: {s}" for r, s in zip(runs, said, strict=True)]
    assert main(["--db", db, "diff", at[1], runs[1]]) == 0
    assert "tracekit: note:" not in capsys.readouterr().err


def test_a_run_at_no_point_of_the_sweep_is_one_line(tmp_path):
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in sorted((SWEEPS / "base" / "runs").iterdir())[:3]:
            tk.ingest(run)
        lone = tk.ingest(NSYS_EXPORTS["diff_base_a"]).run_id
        for other in (lone, tk.ingest(sorted((SWEEPS / "again" / "runs").iterdir())[3]).run_id):
            with pytest.raises(QueryError, match=rf"diff: run {other} \(.*\) is at none of the points of sweep {_sweep_id('base')} the store holds "
                                                 rf"\(the run is {'of no grid' if other == lone else 'at m=4096,dtype=fp32'}"
                                                 "; the sweep's: m=1024,dtype=fp16, m=1024,dtype=fp32, m=4096,dtype=fp16: "
                                                 r"tracekit query sweep-points .*\): a program's sweep is compared with "
                                                 "a run by its run at the run's point"):
                tk.diff(_sweep_id("base"), other)  # (no point of a grid; m=4096,dtype=fp32, which base lacks here)


def test_points_one_sweep_lacks_are_said_and_the_rest_compared(tmp_path):
    """A point one sweep lacks: where its manifest (one folder above its run folders, as the
    fixture holds them) says the point ran, its run is not ingested, with the folder to ingest;
    where nothing says why (its run folders moved without the manifest), the other sweep has it alone."""
    import shutil

    moved = tmp_path / "moved"
    for run in sorted((SWEEPS / "base" / "runs").iterdir())[:3]:
        shutil.copytree(run, moved / run.name)
    fourth = sorted((SWEEPS / "base" / "runs").iterdir())[3]
    for i, (base_runs, said) in enumerate((
            (sorted((SWEEPS / "base" / "runs").iterdir())[:3],
             f"base sweep {_sweep_id('base')}'s run at m=4096,dtype=fp32 is not in the store (tracekit ingest {fourth})"),
            (sorted(moved.iterdir()), f"new sweep {_sweep_id('again')} alone has m=4096,dtype=fp32"))):
        with tracekit.open(tmp_path / f"s{i}.duckdb") as tk:
            for run in [*base_runs, *sorted((SWEEPS / "again" / "runs").iterdir())]:
                tk.ingest(run)
            with pytest.warns(tracekit.errors.CaptureWarning) as seen:
                df = tk.diff(_sweep_id("base"), _sweep_id("again"))
            assert [str(w.message) for w in seen] == [f"diff: {said}: compared at the points both have"]
            assert [w.filename for w in seen] == [__file__]  # (the line that asked, however deep it was said)
            assert {k.split(": ", 1)[0] for k in df["key"]} == {"m=1024,dtype=fp16", "m=1024,dtype=fp32",
                                                                "m=4096,dtype=fp16"}
    # a point both lack (neither sweep's run there ingested): said of each, not left out
    again_fourth = next(r for r in sorted((SWEEPS / "again" / "runs").iterdir()) if r.name.endswith("m=4096-dtype=fp32"))
    with tracekit.open(tmp_path / "both.duckdb") as tk:
        for run in [*sorted((SWEEPS / "base" / "runs").iterdir())[:3],
                    *(r for r in sorted((SWEEPS / "again" / "runs").iterdir()) if r != again_fourth)]:
            tk.ingest(run)
        with pytest.warns(tracekit.errors.CaptureWarning) as seen:
            tk.diff(_sweep_id("base"), _sweep_id("again"))
    assert [str(w.message) for w in seen] == [
        f"diff: base sweep {_sweep_id('base')}'s run at m=4096,dtype=fp32 is not in the store (tracekit ingest "
        f"{fourth}); new sweep {_sweep_id('again')}'s run at m=4096,dtype=fp32 is not in the store (tracekit ingest "
        f"{again_fourth}): compared at the points both have"]


def test_compare_sweeps_with_a_repeat(sweeps):
    with pytest.warns(tracekit.errors.CaptureWarning, match="differ in setup: program python3 … -> python3 … --slow"):
        df = sweeps.compare(_sweep_id("base"), [_sweep_id("slow")], repeats=[_sweep_id("again")])
    slow = df.filter((df["run"] == _sweep_id("slow")) & (df["verdict"] == "regressed") & (df["scope"] == "kernel"))
    assert slow.height and all("softmax" in k.lower() for k in slow["key"])


def test_a_compare_of_sweeps_reads_whole_or_a_block_per_row(sweeps, monkeypatch, capsys):
    """compare base --repeat again slow: where the terminal gives each key its point and 20
    characters of its kernel, and each run's value its change, a table (at 160 columns, a run's
    header on two lines); where
    it cannot (120), a block per row with each key and value whole, not keys cut to their point
    (m=4096,dtype=fp32: sm80_…) and verdicts to (+102.1%, regr…; without the repeat, 120 is a table."""
    from tracekit.cli import main as cli_main

    args = ["--db", str(sweeps.path), "compare", _sweep_id("base"), _sweep_id("slow"), "--repeat", _sweep_id("again")]
    monkeypatch.setenv("COLUMNS", "160")
    assert cli_main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("------"))  # (each column's dashes)
    assert lines[rule - 1].startswith("scope ") and len(lines[rule].split()[1]) >= len("m=4096,dtype=fp32: ") + 20
    # (a run's header over two lines: its sweep, then what it is to the comparison)
    assert lines[rule - 1].split()[3:5] == ["(base)", "(repeat)"] and max(map(len, lines[:20])) <= 160
    softmax = next(line for line in lines if "m=4096,dtype=fp32: cunn_SoftMax" in line and " total_ns " in line)
    assert softmax.rstrip().endswith("2.544 ms (+102.1%, regressed)"), softmax
    monkeypatch.setenv("COLUMNS", "120")
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("-[ row 1 ]")
    keys = [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("key ")]
    assert "m=4096,dtype=fp32: cunn_SoftMaxForwardReg [float]" in keys
    assert any(line.endswith("2.544 ms (+102.1%, regressed)") for line in out.splitlines()), out
    assert cli_main(args[:5]) == 0  # (without the repeat: a table)
    assert not capsys.readouterr().out.startswith("-[ row 1 ]")


def test_short_labels_keep_the_point(sweeps):
    from tracekit.diff import short_keys

    with pytest.warns(tracekit.errors.CaptureWarning, match="differ in setup: program"):
        keys = sweeps.diff(_sweep_id("base"), _sweep_id("slow"))["key"].to_list()
    labels = short_keys(keys, 60)
    assert all(label.startswith(key.split(": ", 1)[0] + ": ") for key, label in labels.items())
    # (the softmax of floats and of halves, told apart as the rests of every point's keys tell them apart)
    softmax = {label for key, label in labels.items() if "cunn_SoftMaxForwardReg" in key}
    assert softmax == {f"m=4096,dtype={d}: {name}" for d, name in (
        ("fp32", "cunn_SoftMaxForwardReg [float]"), ("fp16", "at::native::cunn_SoftMaxForwardReg [c10]"))}, softmax


def test_a_points_report_shows_its_sweeps_points_and_no_latency(sweeps, tmp_path):
    from test_report import _column, _parse

    from tracekit import report

    run = Path(_manifest("base")["points"][1]["run_dir"]).name
    (tmp_path / "r.html").write_text(report.render(report.build(sweeps, run=run)))
    page = _parse(tmp_path / "r.html")
    assert [k for k in page.sections if k.startswith("sweep")] == ["sweep-kernels", "sweep-points"]  # (no latency)
    (table,) = page.sections["sweep-points"]
    want = sweeps.query("sweep-points", sweep=_sweep_id("base"))
    assert [r[0] for r in _column(table, "point")] == want["point"].to_list()
    (table,) = page.sections["sweep-kernels"]  # (without per_request_us: a program times no request)
    kernels = sweeps.query("sweep-kernels", sweep=_sweep_id("base"), limit=5)
    assert [r[0] for r in _column(table, "point")] == kernels["point"].to_list()
    assert "per_request_us" not in table["columns"] and "total_ns" in table["columns"]
    assert "chart-sweep-points" in page.charts


def test_two_sweeps_folders_compare_point_by_point(tmp_path, capsys):
    """`tracekit diff BASE_FOLDER NEW_FOLDER` (each a sweep's --out): both ingested, compared as
    sweeps; a sweep's folder against one export is one line, and no store is left."""
    from conftest import NSYS_EXPORTS

    from tracekit.cli import main as cli_main

    db = tmp_path / "s.duckdb"
    base, slow = SWEEPS / "base" / "runs", SWEEPS / "slow" / "runs"
    assert cli_main(["--db", str(db), "diff", str(base), str(slow), "-f", "csv", "-o", str(tmp_path / "d.csv")]) == 0
    with open(tmp_path / "d.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["scope"] == "kernel" and r["verdict"] == "regressed"]
    assert rows and all("softmax" in r["key"].lower() for r in rows)
    assert len({r["key"].split(": ", 1)[0] for r in rows}) == 4  # at every point
    capsys.readouterr()
    other = tmp_path / "t.duckdb"
    assert cli_main(["--db", str(other), "diff", str(base), str(NSYS_EXPORTS["diff_base_a"])]) == 2
    err = capsys.readouterr().err.strip()
    assert "a sweep is compared with a sweep, point by point, and a run with a run" in err and "\n" not in err
    assert not other.exists()


# -- sweeps with and without GPU memory: tests/data/command_sweep/plain, mem, mem_again -----


def _failed_copy(run: Path, into: Path) -> Path:
    """A copy of run folder ``run`` in ``into``, its meta.json marking the capture failed."""
    failed = into / run.name
    shutil.copytree(run, failed)
    meta = json.loads((failed / "meta.json").read_text())
    (failed / "meta.json").write_text(json.dumps({**meta, "status": "failed", "error": "planted"}))
    return failed


def _diffed(tk, base: str, new: str, **kwargs) -> tuple[pl.DataFrame, list[str], list[str]]:
    """``tk.diff``'s rows, every warning it gave, and those saying a scope is left out."""
    from tracekit.errors import UntracedScopes

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = tk.diff(base, new, **kwargs)
    return (df, [str(w.message) for w in caught],
            [str(w.message) for w in caught if issubclass(w.category, UntracedScopes)])


def test_a_scope_a_sweeps_points_did_not_trace_is_said_and_the_rest_compared(tmp_path):
    """plain, mem and mem_again: base's sweep taken again on one H100, then twice with
    --cuda-memory-usage. plain against mem: plain's points did not record GPU memory, so the
    memory scope is left out, and said (before, it was dropped without a word), the other scopes
    compared at every point; asked --by memory, one line. mem against mem_again: GPU memory
    compared at every point (what a program allocates does not move between captures:
    unchanged), per NVTX path as well, the points' kernel totals those of NVIDIA's nsys stats."""
    sweep = {w: _manifest(w)["sweep"] for w in ("plain", "mem", "mem_again")}
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for which in sweep:
            for run in sorted((SWEEPS / which / "runs").iterdir()):
                tk.ingest(run)
        df, _, said = _diffed(tk, sweep["plain"], sweep["mem"])
        assert said == [f"diff: sweep {sweep['plain']} [points captured under nsys without CUDA memory usage trace] "
                        "has no memory scope: the memory rows are not compared"], said
        assert "memory" not in set(df["scope"]) and {"kernel", "nvtx", "gpu"} <= set(df["scope"])
        points = {f"m={p['values']['m']},dtype={p['values']['dtype']}" for p in _manifest("mem")["points"]}
        assert {k.split(": ", 1)[0] for k in df.filter(pl.col("scope") == "kernel")["key"]} == points
        with pytest.raises(QueryError, match=rf"^--by memory: sweep {sweep['plain']}, its points captured under "
                                             r"nsys without CUDA memory usage trace, has no memory scope"):
            tk.diff(sweep["plain"], sweep["mem"], by="memory")
        mem, _, said = _diffed(tk, sweep["mem"], sweep["mem_again"], by="memory")
        assert not said
        assert {k.split(": ", 1)[0] for k in mem["key"]} == points and set(mem["verdict"]) == {"unchanged"}
        peaks = mem.filter((pl.col("metric") == "peak_bytes") & pl.col("key").str.ends_with(": GPU 0 Device memory"))
        assert peaks.height == len(points) and (peaks["base"] > 100 << 20).all(), peaks  # (the GEMM's operands)
        assert mem["key"].str.ends_with(" memory in step").any()  # (per NVTX path too)
        totals = tk.query("sweep-points", sweep=sweep["mem"])["kernel_total_ns"].to_list()
        assert totals == [sum(int(s["Total Time (ns)"]) for s in _stats(SWEEPS / "mem" / "runs" / Path(p["run_dir"]).name))
                          for p in _manifest("mem")["points"]]


def test_two_sweeps_are_compared_in_the_scopes_of_the_points_they_share(tmp_path):
    """mem's first three points and plain's last (captured without --cuda-memory-usage,
    ingested as mem's point m=4096,dtype=fp32) against mem_again's first three: the sweeps
    share three points, all of which recorded GPU memory, so GPU memory is compared there
    (before, the point only mem has left the memory scope out, said of that point). With
    mem_again's fourth point, that point is compared too, and mem's lack there is said of it."""
    sweep = {w: _manifest(w)["sweep"] for w in ("plain", "mem", "mem_again")}
    runs = {w: sorted((SWEEPS / w / "runs").iterdir()) for w in sweep}
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in (*runs["mem"][:3], *runs["mem_again"][:3]):
            tk.ingest(run)
        tk.ingest(runs["plain"][3], params={"sweep": sweep["mem"]})
        df, told, said = _diffed(tk, sweep["mem"], sweep["mem_again"])
        assert not said and any("m=4096,dtype=fp32 is not in the store" in t for t in told), told
        memory = df.filter(pl.col("scope") == "memory")
        assert {k.split(": ", 1)[0] for k in memory["key"]} == {"m=1024,dtype=fp16", "m=1024,dtype=fp32",
                                                                "m=4096,dtype=fp16"}
        assert set(memory["verdict"]) == {"unchanged"}
        tk.ingest(runs["mem_again"][3])
        df, _, said = _diffed(tk, sweep["mem"], sweep["mem_again"])
        assert said == [f"diff: sweep {sweep['mem']} [points captured under nsys without CUDA memory usage trace at "
                        "m=4096,dtype=fp32] has no memory scope: the memory rows are not compared"], said
        assert "memory" not in set(df["scope"]) and {"kernel", "nvtx", "gpu"} <= set(df["scope"])


def test_a_sweep_folder_is_checked_before_ingest_at_the_points_it_shares(tmp_path):
    """The sweep of the test above (mem's first three points, plain's last) against a folder of
    mem_again's first three runs, --by memory: each run of the folder is checked, before it is
    written, against the sweep's run at its point, where GPU memory was traced (before, against
    every point of the sweep, so the point the folder lacks refused it); GPU memory compared at
    the three points. The folder's fourth point is refused where the sweep's run there traced no
    memory, and not checked where it is a failed capture, which is not compared. A run of the folder
    whose params name no point is checked against the whole sweep."""
    sweep = {w: _manifest(w)["sweep"] for w in ("plain", "mem", "mem_again")}
    runs = {w: sorted((SWEEPS / w / "runs").iterdir()) for w in sweep}
    folder = tmp_path / "mem_again"
    for run in runs["mem_again"][:3]:
        shutil.copytree(run, folder / run.name)
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in runs["mem"][:3]:
            tk.ingest(run)
        tk.ingest(runs["plain"][3], params={"sweep": sweep["mem"]})
        df, told, _ = _diffed(tk, sweep["mem"], str(folder), by="memory")
        assert told == [f"diff: base sweep {sweep['mem']} alone has m=4096,dtype=fp32: compared at the points both "
                        "have"], told
        assert {k.split(": ", 1)[0] for k in df["key"]} == {"m=1024,dtype=fp16", "m=1024,dtype=fp32",
                                                           "m=4096,dtype=fp16"}
        assert set(df["scope"]) == {"memory"} and set(df["verdict"]) == {"unchanged"}
        # (the folder's fourth point, where the sweep's run traced no memory: refused before it is
        # written, the store as it was)
        shutil.copytree(runs["mem_again"][3], folder / runs["mem_again"][3].name)
        before = tk.con.execute("SELECT count(*) FROM runs").fetchall()
        with pytest.raises(QueryError, match="has no memory scope"):
            tk.diff(str(folder), sweep["mem"], by="memory")
        assert tk.con.execute("SELECT count(*) FROM runs").fetchall() == before
        shutil.rmtree(folder / runs["mem_again"][3].name)
        _failed_copy(runs["mem_again"][3], folder)
        df, told, _ = _diffed(tk, str(folder), sweep["mem"], by="memory")
        assert told == [f"diff: base {folder}'s capture of m=4096,dtype=fp32 failed (planted): compared at the points "
                        "both have"], told
        assert set(df["scope"]) == {"memory"} and len({k.split(": ", 1)[0] for k in df["key"]}) == 3
    # a run of the folder whose params name no point of the grid: checked against the whole sweep,
    # which has no memory scope, so refused before anything is written
    folder = tmp_path / "at_no_point"
    for run in runs["mem_again"][:3]:
        shutil.copytree(run, folder / run.name)
    lone = folder / runs["mem_again"][3].name
    shutil.copytree(runs["mem_again"][3], lone)
    meta = json.loads((lone / "meta.json").read_text())
    meta["params"].pop("sweep_grid")
    (lone / "meta.json").write_text(json.dumps(meta))
    with tracekit.open(tmp_path / "lone.duckdb") as tk:
        for run in runs["mem"][:3]:
            tk.ingest(run)
        tk.ingest(runs["plain"][3], params={"sweep": sweep["mem"]})
        before = tk.con.execute("SELECT run_id, name FROM runs ORDER BY run_id").fetchall()
        with pytest.raises(QueryError, match=f"sweep {sweep['mem']}, .* at m=4096,dtype=fp32, has no memory scope"):
            tk.diff(sweep["mem"], str(folder), by="memory")
        assert tk.con.execute("SELECT run_id, name FROM runs ORDER BY run_id").fetchall() == before


def test_a_repeat_sweep_measures_the_noise_at_the_points_of_the_sweeps_compared(tmp_path):
    """compare mem against mem_again at three points (its m=4096,dtype=fp16 not ingested), with
    plain as the repeat of the base: the repeat is compared at those three points alone (before,
    also at m=4096,dtype=fp16, which gave the repeat's rows alone in the table), also once that
    point is in as a failed capture; where it lacks one of them, that is said of it, and only that
    one; where it has none of them, compare says so and diff asked at them is an error."""
    sweep = {w: _manifest(w)["sweep"] for w in ("plain", "mem", "mem_again")}
    runs = {w: sorted((SWEEPS / w / "runs").iterdir()) for w in sweep}
    compared = {"m=1024,dtype=fp16", "m=1024,dtype=fp32", "m=4096,dtype=fp32"}
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in (*runs["mem"], *(r for i, r in enumerate(runs["mem_again"]) if i != 2), *runs["plain"][:3]):
            tk.ingest(run)

        def compared_by_the_repeat() -> tuple[pl.DataFrame, set[str], list[str]]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                df = tk.compare(sweep["mem"], [sweep["mem_again"]], repeats=[sweep["plain"]])
            points = {k.split(": ", 1)[0] for k in df.filter(pl.col("repeat"))["key"]}
            return df, points, [str(w.message) for w in caught if sweep["plain"] in str(w.message)]

        _, points, said = compared_by_the_repeat()
        assert points == compared - {"m=4096,dtype=fp32"}, points
        lacks = [t for t in said if "m=4096" in t]
        assert len(lacks) == 1 and "m=4096,dtype=fp32 is not in the store" in lacks[0], said
        tk.ingest(runs["plain"][3])
        df, points, said = compared_by_the_repeat()
        assert points == compared and not [t for t in said if "m=4096" in t], said
        # (the repeat's noise is applied at every point compared)
        kernel = df.filter(~pl.col("repeat") & (pl.col("scope") == "kernel"))
        assert kernel.height and kernel["noise_pct"].is_not_null().all()
        # (mem_again's m=4096,dtype=fp16 a failed capture: still not a point compared)
        tk.ingest(_failed_copy(runs["mem_again"][2], tmp_path))
        _, points, _ = compared_by_the_repeat()
        assert points == compared, points
    # a repeat with no run at the points compared measures nothing there: said, every row judged
    # without its noise (not its rows at the other points, nor an error)
    with tracekit.open(tmp_path / "none.duckdb") as tk:
        for run in (*runs["mem"], runs["mem_again"][0], *runs["plain"][1:]):
            tk.ingest(run)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = tk.compare(sweep["mem"], [sweep["mem_again"]], repeats=[sweep["plain"]])
        assert not df["repeat"].any() and df.height and df["noise_pct"].is_null().all()
        said = [str(w.message) for w in caught if sweep["plain"] in str(w.message)]
        assert said == [f"compare: {sweep['plain']} (a repeat of the base) has no run at the points compared: "
                        "every row is judged without its noise"], said
        # (diff itself, asked at those points: an error naming them, not a comparison at every point)
        from tracekit.diff import NoPointsCompared, at_points, diff, resolve

        at = at_points(tk.con, [resolve(tk, sweep["mem_again"])])
        assert at == {"m=1024,dtype=fp16"}
        with pytest.raises(NoPointsCompared, match=f"diff: sweep {sweep['mem']} and sweep {sweep['plain']} have no run "
                                                   r"compared at any of the points compared \(m=1024,dtype=fp16\)"):
            diff(tk, sweep["mem"], sweep["plain"], at=at)


def test_sweep_latency_of_a_store_of_program_sweeps_says_they_time_no_request(sweeps):
    """A store holding programs' sweeps alone: sweep-latency says how to get a timing sweep and
    that a program's sweep times none (it said only to ingest the folders `tracekit sweep`
    writes, which these are)."""
    with pytest.raises(QueryError, match=r"^sweep-latency: no timing run in .*; .*tracekit sweep --bs 1,8 --nc "
                                         r"128,1024`: tracekit ingest runs/\*; a program's sweep \(--grid\) times no "
                                         r"request: its points, tracekit query sweep-points\)$"):
        sweeps.query("sweep-latency")


def test_a_sweep_or_run_of_another_grid_is_an_error(tmp_path, capsys):
    """The HSTU workload's bs x nc sweep given as the repeat of a program's m x dtype sweep:
    it cannot measure the noise at any point compared, so it is refused naming both grids
    (it was a warning, every row judged without its noise, as if it were the same sweep
    whose runs there failed). One of its runs against the program's sweep: at none of its
    points (it said a sweep is compared with a sweep, not that a run may be)."""
    from tracekit.cli import main as cli_main

    base, slow = (_manifest(w)["sweep"] for w in ("base", "slow"))
    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        for run in (*sorted((SWEEPS / "base" / "runs").iterdir()), *sorted((SWEEPS / "slow" / "runs").iterdir()),
                    *sorted((DATA / "hstu_sweep" / "runs").iterdir())):
            tk.ingest(run)
        row = tk.runs().filter(pl.col("name").str.ends_with("-bs1-nc128-none")).row(0, named=True)
    hstu, hstu_run = json.loads(row["params"])["sweep"], row["run_id"]
    before = db.read_bytes()
    for command in ("diff", "compare"):
        assert cli_main(["--db", str(db), command, base, slow, "--repeat", hstu]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"tracekit: error: {command}: --repeat {hstu}: sweep {hstu}'s grid (bs, nc) is not that of the "
                       "points compared (m, dtype): it cannot measure their noise; give a sweep of that grid taken "
                       "again"], err
    # (a run of that grid against the program's sweep: at none of its points, said so)
    assert cli_main(["--db", str(db), "diff", base, str(hstu_run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.fullmatch(
        rf"tracekit: error: diff: run {hstu_run} \(.*-bs1-nc128-none\) is at none of the points of sweep {base} the "
        r"store holds \(the run is at bs=1,nc=128; the sweep's: m=1024,dtype=fp16, m=1024,dtype=fp32, "
        rf"m=4096,dtype=fp16, m=4096,dtype=fp32: tracekit query sweep-points -p sweep={base}\): a program's sweep is "
        r"compared with a run by its run at the run's point; give a run at one of those points \(or ingest the "
        r"sweep's run at the run's point\), or two sweeps", err[0]), err
    assert db.read_bytes() == before


def test_two_sweeps_setups_are_those_of_the_points_they_share(tmp_path):
    """plain's first three points and mem's last (ingested as plain's point m=4096,dtype=fp32)
    against mem_again's first three: at every point compared, plain's capture lacked
    --cuda-memory-usage and mem_again's had it, which is said (before, the point plain's sweep
    has alone made its points differ in that setup, so it was left out: nothing was said). With
    mem_again's fourth point, the sweeps share a point where both traced memory: their points
    differ among themselves, and nothing is said. A run that is not compared (a failed capture
    at a point both have, mem's there marked failed) does not count either."""
    sweep = {w: _manifest(w)["sweep"] for w in ("plain", "mem", "mem_again")}
    runs = {w: sorted((SWEEPS / w / "runs").iterdir()) for w in sweep}
    setup = "the captures differ in setup"
    failed = _failed_copy(runs["mem"][1], tmp_path)
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in (*runs["plain"][:3], *runs["mem_again"][:3]):
            tk.ingest(run)
        tk.ingest(runs["mem"][3], params={"sweep": sweep["plain"]})
        for _ in range(2):
            _, told, _ = _diffed(tk, sweep["plain"], sweep["mem_again"], by="kernel")
            differs = [t for t in told if setup in t]
            assert len(differs) == 1 and "--cuda-memory-usage false -> true" in differs[0], told
            tk.ingest(failed, params={"sweep": sweep["plain"]})
        tk.ingest(runs["mem_again"][3])
        _, told, _ = _diffed(tk, sweep["plain"], sweep["mem_again"], by="kernel")
        assert not [t for t in told if "cuda-memory-usage" in t], told


def test_a_sweep_whose_points_ran_out_of_memory_is_compared_at_the_rest(tmp_path):
    """tests/data/command_sweep/oom: plain's grid with m=524288 as well, whose two points failed
    for real on the H100 (CUDA out of memory at the first allocation: 512 GiB, 1 TiB), each
    failed point's folder as the sweep left it, with the export of what ran before the failure
    (no kernel). The folder is ingested whole, the two runs labelled failed; its points query
    says which two points have no row and why; against plain (the same GPU, its four points)
    it is compared at those four, and its two failed points are said with their error (before,
    nothing was said of a point only the failed sweep's grid has)."""
    sweep = {w: _manifest(w)["sweep"] for w in ("plain", "oom")}
    oom = "python3 exited with status 1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in run_folders([SWEEPS / "oom" / "runs"]):
            tk.ingest(run)
        status = dict(tk.sql("SELECT grid_point(params), json_extract_string(meta, '$.status') FROM runs").rows())
        assert status == {**{f"m={m},dtype={d}": "ok" for m in (1024, 4096) for d in ("fp16", "fp32")},
                          "m=524288,dtype=fp16": "failed", "m=524288,dtype=fp32": "failed"}
        with pytest.warns(CaptureWarning) as seen:
            points = tk.query("sweep-points", sweep=sweep["oom"])
        assert len(points) == 4 and any(str(w.message).startswith(
            f"sweep {sweep['oom']}: 2 of its 6 points have no ok run in the store, so no row: m=524288,dtype=fp16: "
            f"its capture failed ({oom} 512.00 GiB") for w in seen), [str(w.message) for w in seen]
        for run in sorted((SWEEPS / "plain" / "runs").iterdir()):
            tk.ingest(run)
        df, told, _ = _diffed(tk, sweep["plain"], sweep["oom"], by="kernel")
    (failed,) = [t for t in told if "524288" in t]
    assert failed.startswith(f"diff: new sweep {sweep['oom']}'s capture of m=524288,dtype=fp16 failed ({oom} 512.00 GiB")
    assert f"; new sweep {sweep['oom']}'s capture of m=524288,dtype=fp32 failed ({oom} 1024.00 GiB" in failed
    assert failed.endswith(": compared at the points both have")
    assert {k.split(": ", 1)[0] for k in df["key"]} == {f"m={m},dtype={d}" for m in (1024, 4096) for d in ("fp16", "fp32")}


# -- a sweep under ncu: tests/data/command_sweep/ncu --------------------------------


@pytest.fixture(scope="module")
def ncu_sweep(tmp_path_factory):
    db = tmp_path_factory.mktemp("ncu_sweep") / "s.duckdb"
    with tracekit.open(db) as tk:
        for run in sorted((SWEEPS / "ncu" / "runs").iterdir()):
            tk.ingest(run)
    tk = tracekit.open(db, read_only=True)
    yield tk
    tk.close()


def test_a_points_label_is_read_whole_where_the_kernel_names_give_way(ncu_sweep, monkeypatch, capsys):
    """sweep-ncu in 120 columns: the point's grid values whole (m=1024,dtype=fp16), the kernel
    families narrowed instead; only where even the families at their least leave no room
    would it be cut."""
    from tracekit.cli import main

    monkeypatch.setenv("COLUMNS", "120")
    assert main(["--db", str(ncu_sweep.path), "query", "sweep-ncu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if re.match(r"^ +\d+  m=", line)]
    assert len(rows) > 4 and all(len(line) <= 120 for line in lines)
    points = {re.match(r"^ +\d+  (\S+)", line).group(1) for line in rows}
    assert points == {"m=1024,dtype=fp16", "m=1024,dtype=fp32", "m=4096,dtype=fp16", "m=4096,dtype=fp32"}, points
    assert any("…" in line.split()[-1] for line in rows)  # (the families narrowed)


def _details(run_dir: Path) -> dict[tuple[int, str], float]:
    """(launch ID, metric) -> the value ncu --page details printed, for the point's report."""
    import lzma

    return {(int(r["ID"]), r["Metric Name"]): float(r["Metric Value"].replace(",", ""))
            for r in csv.DictReader(lzma.open(run_dir / "ncu_details.csv.xz", "rt"))
            if r["Metric Name"] and r["Metric Value"].replace(",", "").replace(".", "", 1).isdigit()}


def test_sweep_ncu_equals_the_details_page_of_each_point(ncu_sweep):
    """Each point's kernels (its launches matched by ncu's launch ID): launches, durations (sum
    and median, whole ns as printed), registers, the throughputs and achieved occupancy to the
    printed precision (two decimals); vs_first against the family's first point."""
    import statistics

    from tracekit.registry import get_registry

    manifest = _manifest("ncu")
    df = ncu_sweep.query("sweep-ncu", sweep=manifest["sweep"])
    assert df.columns == list(get_registry().get("sweep-ncu").columns)
    assert sorted(set(df["sweep_point"])) == [0, 1, 2, 3]
    firsts: dict[str, float] = {}
    for i, point in enumerate(manifest["points"]):
        run = Path(point["run_dir"]).name
        gold = _details(SWEEPS / "ncu" / "runs" / run)
        launches = ncu_sweep.query("ncu-kernels", run=run).group_by("name").agg("kernel_id")
        rows = {r["name"]: r for r in df.filter(df["sweep_point"] == i).iter_rows(named=True)}
        assert set(rows) == set(launches["name"])
        for name, ids in launches.iter_rows():
            r = rows[name]
            assert r["point"] == f"m={point['values']['m']},dtype={point['values']['dtype']}" and r["run"] == run
            durations = [gold[(k, "gpu__time_duration.sum")] for k in ids]
            assert (r["launches"], r["total_ns"], r["duration_ns"]) == (len(ids), sum(durations),
                                                                        statistics.median(durations))
            assert r["registers_per_thread"] == gold[(ids[0], "launch__registers_per_thread")]
            for col, metric in (("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                                ("dram_throughput_pct", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
                                ("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active")):
                assert r[col] == pytest.approx(statistics.median(gold[(k, metric)] for k in ids), abs=0.005), col
        for r in sorted(rows.values(), key=lambda r: -r["total_ns"]):
            firsts.setdefault(r["family"], r["duration_ns"])
            assert r["vs_first"] == round(r["duration_ns"] / firsts[r["family"]], 3)
    assert df.filter(df["family"] == "softmax_warp_forward")["vs_first"].to_list() == [1.0, 0.86]  # fp32's faster
    # cuBLAS's fp16 GEMM, tiled and scheduled otherwise at m=4096 (…_256x128_64x4_1x2_h_bz_coopA_NNT): one
    # family, 25.7x its time at m=1024 (before, its schedule made it a family of its own there: 1.0)
    gemm = df.filter(pl.col("name").str.starts_with("nvjet_sm90_hsh_"))
    assert set(gemm["family"]) == {"nvjet_sm90_hsh_bz_NNT"} and gemm["vs_first"].to_list() == [1.0, 25.733]


def test_sweep_ncu_asked_wrong_is_one_line(ncu_sweep, sweeps):
    with pytest.raises(QueryError, match="sweep-ncu: no kernel ncu profiled at the sweep's points has a name "
                                         "containing 'nothing'"):
        ncu_sweep.query("sweep-ncu", kernel="nothing")
    assert set(ncu_sweep.query("sweep-ncu", kernel="SOFTMAX")["family"]) == {"softmax_warp_forward",
                                                                             "at::native::cunn_SoftMaxForwardReg"}
    with pytest.raises(QueryError, match=f"sweep-ncu: sweep {_sweep_id('slow')} .the latest. was captured under "
                                         "nsys, not ncu: tracekit query sweep-points"):
        sweeps.query("sweep-ncu")  # (nsys sweeps only: the wrong kind of run)


def test_an_ncu_points_report_shows_its_sweeps_kernels(ncu_sweep, tmp_path):
    from test_report import _column, _parse

    from tracekit import report

    run = Path(_manifest("ncu")["points"][3]["run_dir"]).name
    (tmp_path / "r.html").write_text(report.render(report.build(ncu_sweep, run=run)))
    page = _parse(tmp_path / "r.html")
    assert [k for k in page.sections if k.startswith("sweep")] == ["sweep-ncu", "sweep-roofline"]
    (table,) = page.sections["sweep-ncu"]
    want = ncu_sweep.query("sweep-ncu", sweep=_sweep_id("ncu"))
    assert [r[0] for r in _column(table, "point")] == want["point"].to_list()


def test_the_sweep_roofline_draws_each_points_launches_in_its_colour(ncu_sweep, sweeps, tmp_path):
    """sweep-roofline: every launch of each point's ncu run as roofline gives it, with the point
    (its colour) and its kernel family (a line through the points that profiled the family);
    -p kernel= keeps one kernel's; the report of an ncu point draws it in a browser; of a sweep
    under nsys it is the one line sweep-ncu says."""
    import polars as pl
    from browser import chromium, load
    from test_report import DONE, _parse

    from tracekit import charts, report

    df = charts.sweep_roofline_data(ncu_sweep)
    points = ncu_sweep.query("sweep-ncu").select("run_id", "point").unique()
    assert points.height == 4 and df["run_id"].n_unique() == 4
    for run_id, point in points.rows():
        roof = ncu_sweep.query("roofline", run=run_id)
        mine = df.filter(pl.col("run_id") == run_id)
        assert mine.select(roof.columns).equals(roof) and set(mine["point"]) == {point}
    spec = charts.chart(ncu_sweep, "sweep-roofline").to_dict()
    marks = {layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]: layer for layer in spec["layer"]}
    assert {d["group"] for d in marks["point"]["data"]["values"]} == set(points["point"])
    assert marks["line"]["encoding"]["detail"]["field"] == "family"
    moved = {d["family"] for d in marks["line"]["data"]["values"]}
    assert "softmax_warp_forward" in moved  # (fp16 and fp32 at m=1024)
    soft = charts.sweep_roofline_data(ncu_sweep, kernel="softmax_warp")
    assert set(soft["family"]) == {"softmax_warp_forward"} and soft["sweep_point"].to_list() == sorted(soft["sweep_point"])
    with pytest.raises(QueryError, match="was captured under nsys, not ncu"):
        charts.chart(sweeps, "sweep-roofline")
    with pytest.raises(QueryError, match="give the sweep as -p sweep= or --run"):
        charts.chart(ncu_sweep, "sweep-roofline", run=1, sweep="latest")
    run = Path(_manifest("ncu")["points"][0]["run_dir"]).name
    out = tmp_path / "r.html"
    out.write_text(report.render(report.build(ncu_sweep, run=run)))
    assert "chart-sweep-roofline" in _parse(out).charts
    if chromium() is None:
        return
    state = load(out, DONE, "window.tracekitReport").value
    assert state["rendered"] == state["charts"] and state["failed"] == 0
    assert state["marks"]["chart-sweep-roofline"] > df.height


def test_a_program_from_the_grid_names_each_points_folder(tmp_path, monkeypatch):
    res = _sweep(tmp_path, monkeypatch, "--tool", "none", "--out", "runs", "--grid", f"py={sys.executable}",
                 "--", "{py}", "-c", ECHO, "x")
    assert res.exit_code == 0, res.output
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert "-python-none-py=" in run.name, run.name  # (was "-py-none-": the placeholder's name)


def test_values_go_in_once_each():
    assert sw._point_command(["p", "{m}/{n}", "--a={m}", "{mm}", "{}", "{n"], {"m": "{n}", "n": "1"}) == [
        "p", "{n}/1", "--a={n}", "{mm}", "{}", "{n"]  # (m's value is text, not a placeholder)


def test_ctrl_c_labels_the_sweep_and_its_points(tmp_path):
    calls = []

    def runner(cmd, tool, **kw):
        calls.append(cmd)
        if len(calls) == 2:
            raise KeyboardInterrupt
        (tmp_path / "runs" / kw["name"]).mkdir(parents=True)
        return tmp_path / "runs" / kw["name"]

    with pytest.raises(Interrupted, match=r"^sweep interrupted at m=2 after 1 of 3 points; its run is kept; "
                                          r"manifest .*sweep-.*\.json$"):
        sw.sweep_command([sys.executable, "{m}"], ["m=1,2,3"], "none", out_dir=tmp_path / "runs", runner=runner,
                         progress=False)
    manifest = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())
    assert manifest["status"] == "interrupted"
    assert [p["status"] for p in manifest["points"]] == ["ok", "interrupted", "not_run"]
    assert calls == [[sys.executable, "1"], [sys.executable, "2"]]


def test_a_points_run_folder_whose_ingest_was_cut_is_named(tmp_path, monkeypatch):
    """A Ctrl-C while a point's whole run folder is ingested: the Interrupted names the folder
    (the sweep's manifest gives it for the point, to ingest by hand)."""
    from tracekit.capture import run as capture_run

    class Cut:
        def __enter__(self):
            raise Interrupted(f"{tmp_path}: interrupted; not ingested, nothing of it is in the store")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(tracekit, "open", lambda db: Cut())
    with pytest.raises(Interrupted) as cut:
        capture_run._ingest(tmp_path, tmp_path / "s.duckdb", True)
    assert cut.value.run_dir == str(tmp_path)


@pytest.mark.parametrize("ingest, kept", [(True, "their runs are kept and ingested"),
                                          (False, "their runs are kept (not ingested)")])
def test_ctrl_c_in_a_points_ingest_stops_the_sweep(tmp_path, monkeypatch, ingest, kept):
    """A Ctrl-C while a point's run is ingested comes as Interrupted (a TracekitError): the sweep
    stops there, as at any other moment, rather than record one more failed point and go on."""
    from tracekit.capture import profilers

    monkeypatch.setattr(profilers, "find_tool", lambda tool: Path("/usr/bin/true"))
    calls = []

    def runner(cmd, tool, **kw):
        calls.append(cmd)
        if len(calls) == 3:
            raise Interrupted("runs/x: interrupted; not ingested, nothing of it is in the store")
        return tmp_path / kw["name"]

    with pytest.raises(Interrupted, match=rf"^sweep interrupted at m=3 after 2 of 4 points; {re.escape(kept)};"):
        sw.sweep_command([sys.executable, "{m}"], ["m=1,2,3,4"], "nsys", out_dir=tmp_path / "runs", runner=runner,
                         progress=False, ingest=ingest, db=tmp_path / "t.duckdb")
    assert len(calls) == 3
    points = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())["points"]
    assert [(p["status"], p["error"]) for p in points] == [
        ("ok", None), ("ok", None),
        ("interrupted", "runs/x: interrupted; not ingested, nothing of it is in the store"), ("not_run", None)]


def test_a_real_ctrl_c_prints_what_the_sweep_kept(tmp_path):
    """Ctrl-C at the terminal (SIGINT to the process group: tracekit and the program) in the
    middle of a sweep: exit 130 and the sweep's own line, its manifest named (it was a bare
    "interrupted": the CLI took the Ctrl-C's error for one it made itself)."""
    import os
    import signal
    import subprocess
    import time

    marks = tmp_path / "marks"
    marks.mkdir()
    program = f"import pathlib, time; pathlib.Path({str(marks)!r}, '{{n}}').touch(); time.sleep(30)"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tracekit.cli import main; sys.exit(main())", "sweep", "--tool",
         "none", "--out", str(tmp_path / "runs"), "--grid", "n=1,2,3", "--timeout", "3", "--", sys.executable,
         "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (marks / "2").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (marks / "2").exists()
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert re.fullmatch(r"tracekit: sweep interrupted at n=2 after 1 of 3 points \(1 failed\); its run is "
                        r"kept; manifest .*sweep-.*\.json\n", err.splitlines(keepends=True)[-1] if err else ""), err
    manifest = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())
    assert [p["status"] for p in manifest["points"]] == ["failed", "interrupted", "not_run"]
    assert not (marks / "3").exists()


#: a program that starts a second one and waits: each writes its pid, and on a SIGINT (Ctrl-C)
#: its name with "-stopped" (killed, it writes nothing)
_TREE = """
import os, pathlib, signal, subprocess, sys, time
marks, name = pathlib.Path(sys.argv[1]), sys.argv[2]
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # (started ignoring it, it handles it: as the HSTU worker)
    (marks / (name + "-ignoring")).touch()
    signal.signal(signal.SIGINT, signal.default_int_handler)
try:
    if name.endswith("-child"):
        (marks / name).write_text(str(os.getpid()))
        time.sleep(30)
    else:
        child = subprocess.Popen([sys.executable, __file__, str(marks), name + "-child"])
        (marks / name).write_text(str(os.getpid()))
        child.wait()
except KeyboardInterrupt:
    (marks / (name + "-stopped")).touch()
"""


def _sweep_of_a_tree(tmp_path, sig_ign=()):
    """`tracekit sweep --grid n=1,2` of ``_TREE`` in a process of its own (started ignoring
    ``sig_ign``), once point 1's program and its child are up: (the process, the marks)."""
    import signal
    import subprocess
    import time

    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "tree.py").write_text(_TREE)

    def ignore():  # (what this process was started with aside: nohup's SIGHUP, a background job's SIGINT)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN if s in sig_ign else signal.SIG_DFL)

    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tracekit.cli import main; sys.exit(main())", "sweep", "--tool",
         "none", "--out", str(tmp_path / "runs"), "--grid", "n=1,2", "--", sys.executable, str(tmp_path / "tree.py"),
         str(marks), "p{n}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=ignore)
    deadline = time.monotonic() + 60
    while not ((marks / "p1-child").exists() and (marks / "p1-child").read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc, marks


@pytest.mark.parametrize("background", [False, True], ids=["", "background"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_sweep_told_to_stop_ends_as_a_ctrl_c_does(tmp_path, sig, background):
    """SIGTERM (kill, timeout, a batch scheduler) or SIGHUP (the terminal closed) to tracekit
    alone: the program and the one it started get the SIGINT a terminal's Ctrl-C would give
    them (nothing else told them), exit 130, the sweep's line, its manifest interrupted with
    the cut point's run folder; a second signal meanwhile does not cut that clean-up. So in a
    shell script's background job too (started ignoring SIGINT), which keeps ignoring a
    Ctrl-C and starts its program ignoring it (it used to die at once on a SIGTERM, its
    program left running and its manifest "running")."""
    import os
    import signal
    import time

    proc, marks = _sweep_of_a_tree(tmp_path, sig_ign=(signal.SIGINT,) if background else ())
    try:
        if background:
            os.kill(proc.pid, signal.SIGINT)  # (a Ctrl-C at the terminal: not for a background job)
            time.sleep(1)
            assert proc.poll() is None
        os.kill(proc.pid, getattr(signal, sig))
        os.kill(proc.pid, getattr(signal, sig))
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert re.fullmatch(r"tracekit: sweep interrupted at n=1 before any point finished; manifest .*sweep-.*\.json\n",
                        err.splitlines(keepends=True)[-1] if err else ""), err
    assert (marks / "p1-stopped").exists() and (marks / "p1-child-stopped").exists()
    assert (marks / "p1-ignoring").exists() == background  # (its child it starts handling SIGINT)
    for pid in (int((marks / "p1").read_text()), int((marks / "p1-child").read_text())):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # (ended before tracekit did)
    manifest = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())
    (cut, rest) = manifest["points"]
    assert manifest["status"] == "interrupted" and (cut["status"], rest["status"]) == ("interrupted", "not_run")
    assert json.loads((tmp_path / "runs" / Path(cut["run_dir"]).name / "meta.json").read_text())["status"] == \
        "interrupted"
    assert not (marks / "p2").exists()


def test_a_sweep_under_nohup_runs_on_after_a_sighup(tmp_path):
    """Started ignoring SIGHUP (nohup), a sweep goes on when the terminal closes."""
    import os
    import signal
    import time

    proc, marks = _sweep_of_a_tree(tmp_path, sig_ign=(signal.SIGHUP,))
    try:
        os.kill(proc.pid, signal.SIGHUP)
        os.kill(int((marks / "p1-child").read_text()), signal.SIGINT)  # (point 1 ends; point 2 then runs)
        deadline = time.monotonic() + 60
        while not ((marks / "p2-child").exists() and (marks / "p2-child").read_text()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        os.kill(int((marks / "p2-child").read_text()), signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    manifest = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())
    assert manifest["status"] == "ok" and [p["status"] for p in manifest["points"]] == ["ok", "ok"]


def test_nothing_after_the_dashes_is_one_line(tmp_path, monkeypatch, capsys):
    from tracekit.cli import main as cli_main

    monkeypatch.chdir(tmp_path)
    assert cli_main(["sweep", "--tool", "none", "--grid", "m=1,2", "--"]) == 2
    assert capsys.readouterr().err == ("tracekit: error: sweep: nothing after --; give the program to run at each "
                                       "point (tracekit sweep --grid m=1,2 -- python my_bench.py --m {m}), or leave "
                                       "-- out to sweep the HSTU workload\n")
    assert not (tmp_path / "runs").exists()


def _replaying(monkeypatch, sources: list[Path]):
    """capture_command standing in for the profiler: point i's run is ``sources[i]`` (a real
    export or report) ingested with the point's params and name, as a capture would leave it."""
    from tracekit.capture import command, profilers

    monkeypatch.setattr(profilers, "find_tool", lambda tool: Path("/usr/bin/true"))

    def capture(cmd, tool, *, out_dir, db, name, ingest, params, **_):
        with tracekit.open(db) as tk:
            tk.ingest(sources[params["sweep_point"]], name=name, params={"tool": tool, **params})
        (Path(out_dir) / name).mkdir(parents=True)
        return Path(out_dir) / name

    monkeypatch.setattr(command, "capture_command", capture)


def test_an_ncu_sweeps_end_table_is_its_kernels_per_point(tmp_path, monkeypatch):
    """The table after a sweep under ncu is sweep-ncu's (sweep-points asks for nsys runs: the
    sweep ended with an error, exit 2, once all its points had run)."""
    runs = sorted((SWEEPS / "ncu" / "runs").iterdir())
    _replaying(monkeypatch, [run / "ncu.ncu-rep.xz" for run in runs])
    monkeypatch.setenv("COLUMNS", "200")  # (a table of a row per line)
    res = _sweep(tmp_path, monkeypatch, "--tool", "ncu", "--db", "s.duckdb", "--grid", "m=1024,4096", "--grid",
                 "dtype=fp16,fp32", "--", sys.executable, "{m}", "{dtype}")
    assert res.exit_code == 0, res.output
    sweep_id = json.loads(next((tmp_path / "runs").glob("sweep-*.json")).read_text())["sweep"]
    with tracekit.open(tmp_path / "s.duckdb", read_only=True) as tk:
        want = tk.query("sweep-ncu", sweep=sweep_id)
    assert len(want) >= 4
    lines = res.output.splitlines()
    for point in want["point"].unique().to_list():
        assert any(line.lstrip().split()[1:2] == [point] for line in lines), (point, res.output)
    assert lines[-1] == f"one kernel across the points: tracekit query sweep-ncu -p sweep={sweep_id} -p kernel=TEXT"


def test_a_sweep_whose_points_ran_no_kernel_warns_and_succeeds(tmp_path, monkeypatch):
    """Every point captured (a program that ran no CUDA kernel, profiled by nsys): the sweep is
    done, its table has nothing to show; a warning, not an error."""
    _replaying(monkeypatch, [DATA / "nsys_cpu_only" / "export.sqlite.xz"])
    res = _sweep(tmp_path, monkeypatch, "--tool", "nsys", "--db", "s.duckdb", "--grid", "m=1", "--",
                 sys.executable, "{m}")
    assert res.exit_code == 0, res.output
    assert "sweep sweep-" in res.output and "1 ok, 0 failed of 1 point;" in res.output
    assert "tracekit: warning: sweep-points: " in res.output and "Traceback" not in res.output


def _failing(tmp_path: Path, which: str, point: int, export: bool) -> Path:
    """A copy of sweep ``which`` laid out as `tracekit sweep --out` leaves it (its manifest
    beside its run folders), its point ``point`` failed as a capture leaves it: meta.json and
    the manifest say so; the run folder keeps its export (a program that failed after it ran
    kernels: ``tracekit ingest`` takes it, labelled failed) or only its meta.json and log."""
    import shutil

    out = tmp_path / which
    shutil.copytree(SWEEPS / which / "runs", out)
    manifest = _manifest(which)
    p = manifest["points"][point]
    run = out / Path(p["run_dir"]).name
    p["status"], p["error"] = "failed", f"capture failed (python3 exited with status 1); the run folder {run} says so"
    manifest["status"] = "partial"
    (out / f"{manifest['sweep']}.json").write_text(json.dumps(manifest))
    meta = json.loads((run / "meta.json").read_text())
    meta["status"], meta["error"] = "failed", "python3 exited with status 1"
    (run / "meta.json").write_text(json.dumps(meta))
    if not export:
        for f in [f for f in run.rglob("*") if f.is_file() and f.name not in ("meta.json", "capture.log")]:
            f.unlink()
    return out


def test_a_point_that_failed_is_said_failed_not_absent(tmp_path):
    """A point whose capture failed in one sweep is said failed (its run in the store, labelled
    failed, or the sweep's manifest beside its run folders), not a point the other sweep has alone."""
    from tracekit.ingest import run_folders

    base = _failing(tmp_path, "base", 2, export=True)  # (m=4096,dtype=fp16: ingested, status failed)
    slow = _failing(tmp_path, "slow", 3, export=False)  # (m=4096,dtype=fp32: not ingested)
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for run in run_folders([base, slow]):  # (slow's failed point left out: nothing to ingest)
                tk.ingest(run)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            df = tk.diff(_sweep_id("base"), _sweep_id("slow"))
    said = [str(w.message) for w in seen if "compared at the points both have" in str(w.message)]
    assert said == [f"diff: base sweep {_sweep_id('base')}'s capture of m=4096,dtype=fp16 failed (python3 exited "
                    f"with status 1); new sweep {_sweep_id('slow')}'s capture of m=4096,dtype=fp32 failed (python3 exited "
                    "with status 1): compared at the points both have"], [str(w.message) for w in seen]
    assert {k.split(": ", 1)[0] for k in df["key"]} == {"m=1024,dtype=fp16", "m=1024,dtype=fp32"}
    # a point its manifest says ran, whose run was not ingested: said so, with the folder to ingest
    with tracekit.open(tmp_path / "t.duckdb") as tk:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for run in run_folders([base])[:2] + run_folders([SWEEPS / "slow" / "runs"]):
                tk.ingest(run)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            tk.diff(_sweep_id("base"), _sweep_id("slow"))
    assert f"diff: base sweep {_sweep_id('base')}'s capture of m=4096,dtype=fp16 failed (python3 exited with " \
           f"status 1); base sweep {_sweep_id('base')}'s run at m=4096,dtype=fp32 is not in the store (tracekit " \
           f"ingest {run_folders([base])[3]}): compared at the points both have" in [str(w.message) for w in seen]


def test_a_point_captured_whose_ingest_failed_is_said_not_ingested(tmp_path):
    """The manifest says failed of a point whose capture is done (its run folder says ok) but
    whose ingest into the sweep's store failed: the folder is there to ingest, which the diff
    says, not a failed capture (which a gate would fail on)."""
    from tracekit.ingest import run_folders

    out = tmp_path / "slow"
    shutil.copytree(SWEEPS / "slow" / "runs", out)
    manifest = _manifest("slow")
    point = manifest["points"][3]
    folder = out / Path(point["run_dir"]).name
    point.update(status="failed", run_dir=str(folder),
                 error=f"run folder {folder} written, but ingest failed: {tmp_path}/s.duckdb: the store is busy")
    (out / f"{manifest['sweep']}.json").write_text(json.dumps(manifest))
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in run_folders([SWEEPS / "base" / "runs"]) + run_folders([out])[:3]:
            tk.ingest(run)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            df = tk.diff(_sweep_id("base"), _sweep_id("slow"))
    assert f"diff: new sweep {_sweep_id('slow')}'s run at m=4096,dtype=fp32 is not in the store (tracekit ingest " \
           f"{folder}): compared at the points both have" in [str(w.message) for w in seen]
    assert not df["key"].str.starts_with("m=4096,dtype=fp32").any()


@pytest.mark.parametrize("values, point", [
    ({"m": "1024", "dtype": "fp16"}, "m=1024,dtype=fp16"),
    ({"shape": "1024,1024", "dtype": "fp16"}, 'shape="1024,1024",dtype=fp16'),  # (a --config grid's value)
    ({"a": "x,b=y", "b": "z"}, 'a="x,b=y",b=z'),  # (not a=x,b=y,b=z: which a=x, b='y,b=z' would read as too)
    ({"a": "x", "b": "y,b=z"}, 'a=x,b="y,b=z"'),
    ({"mode": "fast path", "dev": "cuda:0"}, 'mode="fast path",dev="cuda:0"'),
    ({"q": 'say "hi"', "p": "c:\\d", "u": "é/ü"}, 'q="say \\"hi\\"",p="c:\\\\d",u=é/ü'),
])
def test_a_points_key_reads_one_way(tmp_path, values, point):
    """A grid value that holds what separates the key's parts (, = :), a space or a quote is
    written as a JSON string: two points never share a key, and a diff's key splits at its point."""
    from tracekit.diff import POINT_KEY
    from tracekit.sweep_points import grid_point

    params = {**values, "sweep": "sweep-x", "sweep_point": 0, "sweep_grid": ",".join(values)}
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        assert tk.con.execute("SELECT grid_point(?)", [json.dumps(params)]).fetchone()[0] == point
    assert grid_point(values) == point
    assert POINT_KEY.fullmatch(f"{point}: at::native::softmax").groups() == (point, "at::native::softmax")


def test_a_config_grids_comma_value_is_one_point(tmp_path, monkeypatch):
    """A --config grid may hold a value with a comma (a shape the program takes as 1024,1024):
    its point reads shape="1024,1024" in sweep-points and in a diff's keys."""
    runs = sorted((SWEEPS / "base" / "runs").iterdir())
    _replaying(monkeypatch, [runs[0] / "nsys.sqlite.xz", runs[2] / "nsys.sqlite.xz"])
    (tmp_path / "prog.yaml").write_text(
        f"command: [{json.dumps(sys.executable)}, prog.py, --shape, '{{shape}}']\n"
        "grid: {shape: ['1024,1024', '4096,4096']}\ntool: nsys\n")
    monkeypatch.setenv("COLUMNS", "200")
    res = _sweep(tmp_path, monkeypatch, "--config", "prog.yaml", "--db", "s.duckdb")
    assert res.exit_code == 0, res.output
    with tracekit.open(tmp_path / "s.duckdb", read_only=True) as tk:
        assert tk.query("sweep-points")["point"].to_list() == ['shape="1024,1024"', 'shape="4096,4096"']


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The base sweep under nsys, then the sweep under ncu, then an export outside any sweep."""
    from conftest import NSYS_EXPORTS

    db = tmp_path_factory.mktemp("mixed") / "s.duckdb"
    with tracekit.open(db) as tk:
        for which in ("base", "ncu"):
            for run in sorted((SWEEPS / which / "runs").iterdir()):
                tk.ingest(run)
        tk.ingest(NSYS_EXPORTS["diff_base_a"])
    tk = tracekit.open(db, read_only=True)
    yield tk
    tk.close()


def test_a_sweep_asked_of_the_other_profilers_query_names_the_right_one(mixed, ncu_sweep, sweeps):
    """sweep-points reads nsys points, sweep-ncu ncu's: a sweep captured under the other profiler
    is an error naming the query that reads it (not "ingest them", not a store said to lack runs)."""
    base, ncu = _sweep_id("base"), _sweep_id("ncu")
    for tk, asked, want in ((mixed, {"sweep": ncu}, f"tracekit query sweep-ncu -p sweep={ncu}"),
                            (ncu_sweep, {}, f"tracekit query sweep-ncu -p sweep={ncu}"),
                            (mixed, {}, f"tracekit query sweep-ncu -p sweep={ncu}; the latest sweep under nsys: "
                                        f"tracekit query sweep-points -p sweep={base}")):
        with pytest.raises(QueryError) as err:
            tk.query("sweep-points", **asked)
        assert str(err.value).startswith(f"sweep-points: sweep {ncu}") and "\n" not in str(err.value)
        assert "captured under ncu, not nsys" in str(err.value) and str(err.value).endswith(want), str(err.value)
        assert "ingest them" not in str(err.value)
    for tk, asked in ((mixed, {"sweep": base}), (sweeps, {})):
        with pytest.raises(QueryError) as err:
            tk.query("sweep-ncu", **asked)
        which = asked.get("sweep") or _sweep_id("slow")
        assert str(err.value) == (f"sweep-ncu: sweep {which}{'' if asked else ' (the latest)'} was captured under "
                                  f"nsys, not ncu: tracekit query sweep-points -p sweep={which}")
    # a run outside any sweep names the runs outside any sweep: none has grid values, and ingesting is no help
    lone = mixed.query("runs").filter(pl.col("kind") == "nsys")["run_id"].max()
    for query, kind in (("sweep-points", "nsys"), ("sweep-ncu", "ncu")):
        with pytest.raises(QueryError) as err:
            mixed.query(query, sweep=str(lone))
        assert str(err.value).startswith(f"{query}: no point of a sweep captured under {kind} outside a sweep: ")
        assert "name a sweep (-p sweep=ID" in str(err.value) and "ingest them" not in str(err.value), str(err.value)


def test_a_diffs_hint_names_the_query_of_the_sweeps_profiler(mixed):
    ncu, lone = _sweep_id("ncu"), mixed.query("runs").filter(pl.col("kind") == "nsys")["run_id"].max()
    for pair in ((ncu, str(lone)), (ncu, ncu)):
        with pytest.raises(QueryError) as err:
            mixed.diff(*pair)
        assert f"tracekit query sweep-ncu -p sweep={ncu})" in str(err.value), str(err.value)


def test_by_a_scope_two_program_sweeps_lack_says_why(sweeps, mixed):
    base, slow, ncu = _sweep_id("base"), _sweep_id("slow"), _sweep_id("ncu")
    with pytest.raises(QueryError) as err:
        sweeps.diff(base, slow, by="sweep")
    assert str(err.value) == (f"--by sweep: sweep {base} is a program's sweep: the sweep scope compares the timed "
                              "requests' latency of the HSTU workload's sweeps, and a program's sweep timed none; "
                              "its points compare by kernel, nvtx, api, memcpy, gpu (leave --by out for all)")
    with pytest.raises(QueryError) as err:
        sweeps.diff(base, slow, by="ncu")
    assert str(err.value) == (f"--by ncu: sweep {base}, its points captured under nsys, has no ncu scope (its points "
                              "compare by kernel, nvtx, api, memcpy, gpu)")
    with pytest.raises(QueryError) as err:
        mixed.diff(base, ncu)
    assert str(err.value).startswith(f"diff: sweep {base} [points captured under nsys] and sweep {ncu} [points captured under ncu] "
                                     "share no scope to compare"), str(err.value)


def test_a_sweep_against_its_own_run_is_one_line(sweeps):
    """A sweep against a run of its own: the sweep's run at that point is the run itself, a
    comparison of a run with itself that reads "unchanged" everywhere; said instead."""
    run = Path(_manifest("base")["points"][1]["run_dir"]).name
    for pair in ((_sweep_id("base"), run), (run, _sweep_id("base"))):
        with pytest.raises(QueryError) as err:
            sweeps.diff(*pair)
        assert str(err.value) == (
            f"diff: run {sweeps.resolve(run)[0]} ({run}) is sweep {_sweep_id('base')}'s own run at m=1024,dtype=fp32: "
            "compared with itself; give another sweep's run at that point, or two sweeps")


@pytest.mark.parametrize("query", ["sweep-latency", "sweep-requests"])
def test_the_latency_of_runs_that_time_no_request_is_an_error(tmp_path, query):
    """A store holds the HSTU workload's timed sweep (sweep_pair a), a program's sweep (no
    request timed) and an nsys export outside any sweep: the latency of either of the last two
    was an empty answer; it is an error that says why (the nsys run asked as the sweep: that it
    is outside any) and names the query of the program's points and the latest sweep that
    timed requests."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["diff_base_a"], name="outside")
        for run in [*run_folders([DATA / "sweep_pair" / "a"]), *sorted((SWEEPS / "base" / "runs").iterdir())]:
            tk.ingest(run)
        program = _manifest("base")["sweep"]
        timed = json.loads(next((DATA / "sweep_pair" / "a").glob("sweep-*.json")).read_text())["sweep"]
        latest = f"; the latest sweep that did: tracekit query {query} -p sweep={timed}"
        with pytest.raises(QueryError) as err:
            tk.query(query, sweep=program)
        assert str(err.value) == (f"{query}: no ok run that timed requests in {program}: a program's sweep (--grid) "
                                  f"times no request; its points: tracekit query sweep-points -p sweep={program}")
        with pytest.raises(QueryError) as err:
            tk.query(query)  # (the latest sweep: the program's)
        assert str(err.value).startswith(f"{query}: no ok run that timed requests in {program}: ")
        assert str(err.value).endswith(latest)
        for outside in ("outside", 1):  # (the run asked is said, by name or id: not a point of a sweep)
            with pytest.raises(QueryError) as err:
                tk.query(query, sweep=outside)
            assert str(err.value) == (f"{query}: run 1 (outside) is an nsys run outside any sweep, and no ok run "
                                      f"outside a sweep timed requests{latest}")
        assert tk.query(query, sweep="all", limit=0).height == (4 if query == "sweep-latency" else 160)
        # the spreadsheet of both queries: the same, with its own option, and nothing written
        with pytest.raises(QueryError) as err:
            export_sweep(tk, tmp_path / "s.xlsx")  # (the latest sweep: the program's)
        assert str(err.value).startswith(f"export sweep: no ok run that timed requests in {program}: a program's")
        assert str(err.value).endswith(f"; the latest sweep that did: tracekit export sweep --sweep {timed}")
        assert not (tmp_path / "s.xlsx").exists()


@pytest.mark.parametrize("query", ["sweep-latency", "sweep-requests"])
def test_the_latency_of_a_sweep_whose_points_all_failed_says_why(tmp_path, query):
    """sweep_pair a with every point's capture marked failed (as `tracekit sweep` records a
    point that crashed; their requests kept): the only timing runs are failed ones, so the
    sweep, and the whole store, have no latency to answer: each says why."""
    folder = tmp_path / "a_failed"
    shutil.copytree(DATA / "sweep_pair" / "a", folder)
    for point in (folder / "runs").iterdir():
        meta = json.loads((point / "meta.json").read_text())
        meta.update(status="failed", error="torch.OutOfMemoryError: planted")
        (point / "meta.json").write_text(json.dumps(meta))
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CaptureWarning)  # (each failed run, said at ingest)
            for run in run_folders([folder]):
                tk.ingest(run)
        sweep = json.loads(next(folder.glob("sweep-*.json")).read_text())["sweep"]
        with pytest.raises(QueryError) as err:
            tk.query(query, sweep=sweep)
        assert str(err.value) == f"{query}: no ok run that timed requests in {sweep}: " + "; ".join(
            f"bs={b},nc={n}: its capture failed (torch.OutOfMemoryError: planted)" for b in (1, 4) for n in (128, 512))
        with pytest.raises(QueryError, match=rf"^{query}: no ok run that timed requests in the store; ingest the HSTU "
                                             r"workload's run folders \(tracekit sweep, tracekit capture\) or its "
                                             r"benchmark logs"):
            tk.query(query, sweep="all")
