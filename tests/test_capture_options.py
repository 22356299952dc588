"""``--timeout`` and ``--replay-mode`` of ``tracekit capture`` (the HSTU workload and a command
after --) and ``tracekit sweep`` on CPU: the argv ncu is given, what meta.json records, bad
values refused in one line before anything runs, and a run past its deadline stopped (the
profiler, its program and whatever they started), recorded failed and not ingested; under
the fake nsys/ncu of test_capture_command."""

import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

import psutil
import pytest
from conftest import DATA
from test_capture_command import _fake, _meta
from tracekit.capture import cli, command, profilers, run
from tracekit.capture import sweep as sw
from typer.testing import CliRunner

import tracekit.cli  # noqa: F401  (the CLI's value converters)
from tracekit.errors import CaptureError, CaptureWarning

pytestmark = pytest.mark.usefixtures("reference_kernels")

runner = CliRunner()
CMD = ["/x/python", "bench.py"]
TINY = dict(max_history_items=40, num_items=2048, num_layers=2, d_model=64, num_heads=2,
            head_dim=32, scoring_hidden=32, new_items_per_request=4)


def _main(args: list[str], capsys) -> tuple[int, str]:
    from tracekit.cli import main

    code = main(args)
    return code, capsys.readouterr().err


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- --replay-mode: ncu's argv, meta.json ----------------------------------------------------


def test_the_replay_mode_in_ncus_argv():
    """kernel (the default) leaves the argv as it was; application adds ncu's option after
    the process options; another mode is no argv."""
    command_argv = profilers.ncu_command_argv("/x/ncu", Path("/r/ncu"), CMD, launch_count=3)
    assert profilers.ncu_command_argv("/x/ncu", Path("/r/ncu"), CMD, launch_count=3, replay_mode="kernel") == \
        command_argv and "--replay-mode" not in command_argv
    assert profilers.ncu_command_argv("/x/ncu", Path("/r/ncu"), CMD, launch_count=3, replay_mode="application") == \
        [*command_argv[:5], "--replay-mode", "application", *command_argv[5:]]
    hstu = profilers.ncu_argv("/x/ncu", Path("/r/ncu"), CMD)
    assert "--replay-mode" not in hstu
    assert profilers.ncu_argv("/x/ncu", Path("/r/ncu"), CMD, replay_mode="application") == \
        [*hstu[:5], "--replay-mode", "application", *hstu[5:]]
    with pytest.raises(ValueError, match="--replay-mode 'range': one of kernel, application"):
        profilers.ncu_command_argv("/x/ncu", Path("/r/ncu"), CMD, replay_mode="range")


def test_a_command_under_application_replay_is_recorded_and_ingested(tmp_path, monkeypatch):
    """The mode reaches ncu's argv, the run's params and meta.json's ncu settings (kernel too,
    when not given: two ncu runs of other modes differ there), and the run is ingested."""
    import tracekit

    fake = _fake(tmp_path, monkeypatch, "ncu", DATA / "ncu_app_range")
    db, out = tmp_path / "s.duckdb", tmp_path / "runs"
    prog = [sys.executable, "-c", "pass"]
    res = runner.invoke(cli.app, ["capture", "--tool", "ncu", "--replay-mode", "application", "--kernel-name", "gemm",
                                  "--launch-count", "3", "--out", str(out), "--db", str(db), "--name", "app",
                                  "--", *prog])
    assert res.exit_code == 0, res.output
    meta = _meta(out / "app")
    argv = profilers.ncu_command_argv(str(fake), out / "app" / "ncu", prog, kernel_regex="gemm", launch_count=3,
                                      replay_mode="application")
    assert meta["profiler_commands"][0] == argv and "--replay-mode" in argv
    assert json.loads((tmp_path / "argv.json").read_text()) == argv[1:]
    assert meta["params"] == {"tool": "ncu", "program": "python", "kernel_regex": "gemm", "launch_count": 3,
                              "replay_mode": "application"}
    assert meta["ncu"]["replay_mode"] == "application"
    monkeypatch.setenv("FAKE_DATA", str(DATA / "ncu_diff_a"))  # (another capture: another report)
    command.capture_command(prog, "ncu", out_dir=out, db=db, name="kern", launch_count=3)
    meta = _meta(out / "kern")
    assert "--replay-mode" not in meta["profiler_commands"][0]
    assert meta["params"]["replay_mode"] == meta["ncu"]["replay_mode"] == "kernel"
    with tracekit.open(db, read_only=True) as tk:
        runs = tk.sql("SELECT name, params FROM runs ORDER BY run_id")
        assert runs["name"].to_list() == ["app", "kern"]
        assert [json.loads(p)["replay_mode"] for p in runs["params"]] == ["application", "kernel"]
        assert tk.query("ncu-kernels", run="app", limit=0).height > 0
        with warnings.catch_warnings(record=True) as seen:  # diff names the other replay among setup differences
            warnings.simplefilter("always")
            tk.diff("kern", "app")
    setup = [str(w.message) for w in seen if issubclass(w.category, CaptureWarning)]
    assert len(setup) == 1 and "ncu replay kernel -> application" in setup[0], setup


def test_the_hstu_workload_takes_kernel_replay_only(tmp_path, monkeypatch, stand_in_gpu):
    """Under application replay ncu 2025.3.1 failed the workload on an H200 (its gather kernel
    in the 34th pass of 36, then did not exit): refused in one line, nothing written; kernel
    replay is recorded as such and its argv is unchanged."""
    fake = _fake(tmp_path, monkeypatch, "ncu", DATA / "ncu_app_range")
    out = tmp_path / "runs"
    with pytest.raises(CaptureError, match="--replay-mode application: for a program of yours .* the HSTU workload "
                                           "takes kernel replay only"):
        run.capture(2, 8, tool="ncu", preset="small", out_dir=out, workload=TINY, ingest=False, name="app",
                    replay_mode="application")
    assert not out.exists()
    d = run.capture(2, 8, tool="ncu", preset="small", warmup_ms=0, iters=1, out_dir=out, workload=TINY,
                    ingest=False, name="kern", replay_mode="kernel")
    meta = _meta(d)
    assert meta["status"] == "ok", meta["error"]
    assert meta["params"]["replay_mode"] == meta["ncu"]["replay_mode"] == "kernel"
    assert meta["profiler_commands"][0][0] == str(fake) and "--replay-mode" not in meta["profiler_commands"][0]


def test_the_hstu_workload_under_ncu_profiles_the_kernels_named(tmp_path, monkeypatch, stand_in_gpu):
    """--kernel-name takes the place of the three kernel classes: in ncu's argv, the run's
    params (two ncu runs of other kernels differ there) and meta.json; '.' is every kernel
    of the request (kernel-headroom's). Under another tool, or not a regular expression, it
    is refused in one line before anything is written."""
    fake = _fake(tmp_path, monkeypatch, "ncu", DATA / "ncu_app_range")
    out = tmp_path / "runs"
    d = run.capture(2, 8, tool="ncu", preset="small", warmup_ms=0, iters=1, out_dir=out, workload=TINY,
                    ingest=False, name="every", ncu_kernel_regex=".")
    meta = _meta(d)
    argv = meta["profiler_commands"][0]
    assert meta["status"] == "ok", meta["error"]
    assert argv[0] == str(fake) and argv[argv.index("--kernel-name") + 1] == "regex:."
    assert meta["params"]["kernel_regex"] == meta["ncu"]["kernel_regex"] == "."
    assert meta["ncu"]["kernel_classes"] is None
    meta = _meta(run.capture(2, 8, tool="ncu", preset="small", warmup_ms=0, iters=1, out_dir=out, workload=TINY,
                             ingest=False, name="classes"))
    assert "kernel_regex" not in meta["params"]
    assert set(meta["ncu"]["kernel_classes"]) == {"embedding", "gemm", "attention"}
    for tool, regex, message in (("nsys", ".", "--kernel-name: an option of --tool ncu, not of --tool nsys"),
                                 ("none", "gemm", "--kernel-name: an option of --tool ncu, not of --tool none"),
                                 ("ncu", "gemm(", "--kernel-name 'gemm(': not a regular expression")):
        with pytest.raises(CaptureError, match=re.escape(message)):
            run.capture(2, 8, tool=tool, preset="small", out_dir=tmp_path / "bad", workload=TINY, ingest=False,
                        ncu_kernel_regex=regex)
    assert not (tmp_path / "bad").exists()
    seen = {}
    monkeypatch.setattr(run, "capture", lambda *a, **kw: seen.update(kw) or (_ for _ in ()).throw(CaptureError("x")))
    runner.invoke(cli.app, ["capture", "--tool", "ncu", "--kernel-name", "layer_norm", "--out", str(out)])
    assert seen["ncu_kernel_regex"] == "layer_norm"


@pytest.mark.parametrize("args, message", [
    (["--tool", "nsys", "--replay-mode", "application"], "--replay-mode: an option of --tool ncu, not of --tool nsys"),
    (["--tool", "none", "--replay-mode", "kernel"], "--replay-mode: an option of --tool ncu, not of --tool none"),
    (["--tool", "ncu", "--replay-mode", "range"], "--replay-mode 'range': choose one of kernel, application"),
    (["--tool", "ncu", "--param", "replay_mode=x"], "--param replay_mode: tracekit sets replay_mode itself"),
    (["--tool", "none", "--timeout", "0"], "--timeout 0: a number of seconds > 0"),
    (["--tool", "none", "--timeout", "-2.5"], "--timeout -2.5: a number of seconds > 0"),
    (["--tool", "none", "--timeout", "soon"], "Invalid value for '--timeout': 'soon' is not a valid number."),
    (["--tool", "none", "--timeout", "inf"], "Invalid value for '--timeout': 'inf' is not a finite number."),
])
def test_bad_options_of_a_commands_capture_are_one_line_errors(tmp_path, capsys, monkeypatch, args, message):
    """Refused before the profiler is looked for (none is here) or anything is written."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = tmp_path / "runs"
    code, err = _main(["capture", *args, "--out", str(out), "--", sys.executable, "-c", "pass"], capsys)
    assert code == 2 and err.startswith(f"tracekit: error: {message}") and err.count("\n") == 1, err
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["capture", "--tool", "nsys", "--replay-mode", "application"],
     "--replay-mode: an option of --tool ncu, not of --tool nsys"),
    (["capture", "--tool", "none", "--replay-mode", "kernel"], "--replay-mode: an option of --tool ncu, not of --tool none"),
    (["capture", "--tool", "ncu", "--replay-mode", "app-range"],
     "--replay-mode 'app-range': choose one of kernel, application"),
    (["capture", "--tool", "ncu", "--replay-mode", "application"],
     "--replay-mode application: for a program of yours (tracekit capture --tool ncu --replay-mode application"),
    (["capture", "--tool", "none", "--timeout", "0"], "--timeout 0: a number of seconds > 0"),
    (["capture", "--tool", "none", "--timeout", "x"], "Invalid value for '--timeout': 'x' is not a valid number."),
    (["sweep", "--timeout", "-1"], "--timeout -1: a number of seconds > 0"),
    (["sweep", "--timeout", "nan"], "Invalid value for '--timeout': 'nan' is not a finite number."),
])
def test_bad_options_of_an_hstu_capture_are_one_line_errors(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = tmp_path / "runs"
    code, err = _main([*args, "--bs", "1", "--nc", "4", "--preset", "small", "--out", str(out)], capsys)
    assert code == 2 and err.startswith(f"tracekit: error: {message}") and err.count("\n") == 1, err
    assert not out.exists()


def test_the_library_checks_the_same(tmp_path):
    for kw, message in ((dict(timeout_s=True), "--timeout True: a number of seconds > 0"),
                        (dict(timeout_s="5"), "--timeout '5': a number of seconds > 0"),
                        (dict(timeout_s=float("inf")), "--timeout inf: a number of seconds > 0"),
                        (dict(replay_mode="application"), "--replay-mode: an option of --tool ncu, not of --tool none")):
        with pytest.raises(CaptureError, match=message):
            run.capture(1, 4, tool="none", preset="small", out_dir=tmp_path / "runs", ingest=False, **kw)
        with pytest.raises(CaptureError, match=message):
            command.capture_command([sys.executable, "-c", "pass"], "none", out_dir=tmp_path / "runs", **kw)
    with pytest.raises(CaptureError, match="--timeout 0: a number of seconds > 0"):
        sw.sweep("1", "4", preset="small", out_dir=tmp_path / "runs", progress=False, timeout_s=0)
    assert not (tmp_path / "runs").exists()


def test_the_cli_passes_both_options_on(tmp_path, monkeypatch):
    """To the HSTU capture (warm-up and iters left to it) and to the sweep."""
    seen = {}

    def fake(*args, **kw):
        seen.update(kw)
        raise CaptureError("stop here")

    monkeypatch.setattr(run, "capture", fake)
    res = runner.invoke(cli.app, ["capture", "--tool", "ncu", "--replay-mode", "kernel", "--timeout", "90",
                                  "--out", str(tmp_path)])
    assert str(res.exception) == "stop here"
    assert (seen["replay_mode"], seen["timeout_s"], seen["warmup_ms"], seen["iters"]) == ("kernel", 90.0, None, None)
    monkeypatch.setattr(sw, "sweep", fake)
    res = runner.invoke(cli.app, ["sweep", "--bs", "1", "--nc", "4", "--timeout", "2.5", "--out", str(tmp_path)])
    assert str(res.exception) == "stop here" and seen["timeout_s"] == 2.5


def test_a_sweep_gives_each_point_its_timeout(tmp_path):
    calls = []

    def runner_(bs, nc, **kw):
        calls.append(kw)
        if nc == 8:
            raise CaptureError(f"capture failed (timed out after 2 s); partial results in {tmp_path / 'p8'}",
                                   tmp_path / "p8")
        return tmp_path / "p4"

    res = sw.sweep("1", "4,8", preset="small", out_dir=tmp_path / "runs", progress=False, runner=runner_,
                   timeout_s=2)
    assert [c["timeout_s"] for c in calls] == [2, 2]
    assert [p.status for p in res.points] == ["ok", "failed"] and res.points[1].run_dir == str(tmp_path / "p8")
    assert json.loads(res.manifest.read_text())["settings"]["timeout_s"] == 2
    calls.clear()
    sw.sweep("1", "4", preset="small", out_dir=tmp_path / "runs2", progress=False, runner=runner_)
    assert "timeout_s" not in calls[0]  # (no limit: the keyword is not passed, so a runner need not take it)


# -- --timeout: stopped, recorded, not ingested, nothing left running ---------------------------


def test_a_command_under_nsys_past_its_deadline(tmp_path, monkeypatch, capsys):
    """The profiler and its program get the SIGINT a Ctrl-C would give them; the folder says
    it timed out, the store is not written, the command exits 2 with one line, and the
    program is not left running."""
    _fake(tmp_path, monkeypatch, "nsys", DATA / "nsys_capture_range")
    pid_file, out, db = tmp_path / "pid", tmp_path / "runs", tmp_path / "s.duckdb"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    t = time.perf_counter()
    rc, err = _main(["--db", str(db), "capture", "--tool", "nsys", "--timeout", "1.5", "--out", str(out), "--name",
                     "slow", "--", sys.executable, "-c", code], capsys)
    assert time.perf_counter() - t < 20
    # (above it, what the profiler and program printed as they were stopped: echoed as it came)
    assert rc == 2 and err.endswith(f"\ntracekit: error: capture failed (timed out after 1.5 s); the run folder "
                                    f"{out / 'slow'} says so, not ingested\n"), err
    meta = _meta(out / "slow")
    assert (meta["status"], meta["error"]) == ("failed", "timed out after 1.5 s") and meta["finished_at"]
    assert not db.exists()
    assert _gone(int(pid_file.read_text()))


@pytest.mark.parametrize("profiler", [
    # a profiler that ignores SIGINT (its program inherits that): both killed after the grace
    "import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); subprocess.call(sys.argv[1:])",
    # one that ends at once, leaving its program (which ignores SIGINT) behind: that one is killed
    "import subprocess, sys; subprocess.Popen(sys.argv[1:]).wait()",
])
def test_nothing_is_left_running_after_a_timeout(tmp_path, monkeypatch, profiler):
    monkeypatch.setattr(run, "STOP_GRACE_S", 0.5)
    monkeypatch.setattr(run, "ORPHAN_GRACE_S", 0.5)
    pid_file = tmp_path / "pid"
    prog = ("import os, signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)")
    t = time.perf_counter()
    with pytest.raises(CaptureError, match=r"capture failed \(timed out after 2 s\)"):
        command.capture_command([sys.executable, "-c", profiler, sys.executable, "-c", prog], "none",
                                out_dir=tmp_path, name="stubborn", timeout_s=2)
    assert time.perf_counter() - t < 15
    assert _meta(tmp_path / "stubborn")["error"] == "timed out after 2 s"
    assert _gone(int(pid_file.read_text()))


def test_programs_started_while_the_profiler_stops_are_stopped_too(tmp_path, monkeypatch):
    """ncu's application replay starts a program per pass: one started during the grace after
    the SIGINT is not left running either."""
    monkeypatch.setattr(run, "STOP_GRACE_S", 1.5)
    monkeypatch.setattr(run, "ORPHAN_GRACE_S", 0.5)
    pids = tmp_path / "pids"
    prog = ("import os, signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            f"open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(60)")
    profiler = ("import signal, subprocess, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "while True:\n    subprocess.Popen(sys.argv[1:]); time.sleep(0.2)")
    with pytest.raises(CaptureError, match=r"capture failed \(timed out after 1 s\)"):
        command.capture_command([sys.executable, "-c", profiler, sys.executable, "-c", prog], "none",
                                out_dir=tmp_path, name="passes", timeout_s=1)
    started = [int(x) for x in pids.read_text().split()]
    assert len(started) >= 8  # (several started after the deadline's SIGINT)
    assert all(_gone(pid) for pid in started), [pid for pid in started if not _gone(pid)]


def test_a_profiler_that_hangs_after_its_error_is_stopped_and_its_error_said(tmp_path, monkeypatch):
    """ncu under application replay printed its error for a failed pass and did not exit (the
    H200): at the deadline the run's error names the profiler's first ==ERROR== line."""
    monkeypatch.setattr(run, "STOP_GRACE_S", 0.5)
    profiler = ("import sys, time; print('==PROF== Connected to process 1', flush=True); "
                "print('==ERROR== Failed to profile \"vectorized_gather_kernel\" in process 1', flush=True); "
                "print('==ERROR== An error occurred while trying to profile.', flush=True); time.sleep(60)")
    said = '==ERROR== Failed to profile "vectorized_gather_kernel" in process 1'
    with pytest.raises(CaptureError, match=r"capture failed \(timed out after 2 s, after the profiler said: "
                                           r"==ERROR== Failed to profile \"vectorized_gather_kernel\""):
        command.capture_command([sys.executable, "-c", profiler], "none", out_dir=tmp_path, name="hung", timeout_s=2)
    assert _meta(tmp_path / "hung")["error"] == f"timed out after 2 s, after the profiler said: {said}"


def test_an_hstu_capture_past_its_deadline_is_not_ingested(tmp_path, monkeypatch):
    """A failed HSTU run with requests is ingested, labelled failed; one stopped at its deadline
    is not (as an interrupted one is not): `tracekit ingest FOLDER` takes it if wanted."""
    ingested = []
    monkeypatch.setattr(run, "_ingest", lambda *a, **kw: ingested.append(a))
    with pytest.raises(CaptureError, match=r"capture failed \(timed out after 3 s\); partial results in "):
        run.capture(1, 4, tool="none", preset="small", warmup_ms=0, iters=10**7, out_dir=tmp_path, workload=TINY,
                    name="long", db=tmp_path / "s.duckdb", timeout_s=3)
    meta = _meta(tmp_path / "long")
    assert (meta["status"], meta["error"]) == ("failed", "timed out after 3 s")
    assert ingested == []
    assert os.path.exists(tmp_path / "long" / "capture.log")
