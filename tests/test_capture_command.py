"""``tracekit capture [OPTIONS] -- CMD`` on CPU: a user's program under --tool none, and under
fake nsys/ncu executables (Python scripts that record their argv, run the program and write a
real fixture's export where the real tool would), the argv built for each profiler option,
failures, the HSTU options refused, and what diff's setup comparison reads."""

import json
import os
import re
import shutil
import stat
import sys
import warnings
from pathlib import Path

import pytest
from conftest import DATA
from tracekit.capture import cli, command, profilers
from typer.testing import CliRunner

import tracekit.cli  # noqa: F401  (the CLI's value converters: --db DbPath)
from tracekit.errors import CaptureError, CaptureWarning
from tracekit.ingest import nsysrep

runner = CliRunner()
META_KEYS = {"name", "tool", "params", "command", "program", "profiler_commands", "versions", "gpu",
             "git_commit", "settings", "started_at", "finished_at", "status", "error", "exit_code"}
CMD = ["/x/python", "bench.py", "--bs", "8"]
SECTIONS = [a for s in profilers.NCU_SECTIONS for a in ("--section", s)]

# A fake profiler: records its argv in $FAKE_ARGV, runs the program after `-o OUT` (with the
# variable nsys -e sets), writes the report a real one would and exits with the program's
# status, as nsys and ncu 2025.3.1 do on the H200 (ncu saying so on a ==ERROR== line); exports
# a report as a fixture's export (nsys export: its argv in $FAKE_ARGV.export).
FAKE = r'''#!{python}
import json, lzma, os, shutil, subprocess, sys
argv = sys.argv[1:]
tool = os.path.basename(sys.argv[0])
src = os.environ["FAKE_DATA"]
if "-i" in argv:  # ncu -i REPORT --csv --page raw|details
    page = argv[argv.index("--page") + 1]
    sys.stdout.write(lzma.open(os.path.join(src, page + ".csv.xz"), "rt").read())
    sys.exit(0)
if argv[0] == "export":  # nsys export --type sqlite ... -o OUT REPORT
    with open(os.environ["FAKE_ARGV"] + ".export", "w") as f:
        json.dump(argv, f)
    with lzma.open(os.path.join(src, "export.sqlite.xz")) as f, open(argv[argv.index("-o") + 1], "wb") as g:
        shutil.copyfileobj(f, g)
    sys.exit(0)
with open(os.environ["FAKE_ARGV"], "w") as f:
    json.dump(argv, f)
out = argv[argv.index("-o") + 1]
cmd = argv[argv.index("-o") + 2:]
env = dict(os.environ)
if "-e" in argv:
    k, v = argv[argv.index("-e") + 1].split("=", 1)
    env[k] = v
print("Collecting data...", flush=True)
rc = subprocess.call(cmd, env=env)
if os.environ.get("FAKE_NO_EXPORT"):
    sys.exit(0)
if tool == "nsys":
    open(out + ".nsys-rep", "wb").close()
    sys.exit(rc)
with lzma.open(os.path.join(src, "report.ncu-rep.xz")) as f, open(out + ".ncu-rep", "wb") as g:
    shutil.copyfileobj(f, g)
if rc:
    print(f"==ERROR== The application returned an error code ({{rc}}).")
sys.exit(rc)
'''


def _fake(tmp_path, monkeypatch, tool: str, data: Path) -> Path:
    p = tmp_path / "bin" / tool
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(FAKE.format(python=sys.executable))
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(f"TRACEKIT_{tool.upper()}", str(p))
    monkeypatch.setenv("FAKE_ARGV", str(tmp_path / "argv.json"))
    monkeypatch.setenv("FAKE_DATA", str(data))
    return p


def _meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "meta.json").read_text())


# -- the argv of each profiler option: pure functions, exactly -------------------------


def test_nsys_command_argv_for_each_option():
    tail = ["--sample=none", "--cpuctxsw=none", "--force-overwrite=true", "-o", "/r/nsys", *CMD]
    head = ["/x/nsys", "profile", "--trace=cuda,nvtx,osrt"]
    argv = profilers.nsys_command_argv
    assert argv("/x/nsys", Path("/r/nsys"), CMD) == [*head, "--capture-range=none", *tail]
    assert argv("/x/nsys", Path("/r/nsys"), CMD, capture_range="cudaProfilerApi") == \
        [*head, "--capture-range=cudaProfilerApi", "--capture-range-end=stop", *tail]
    assert argv("/x/nsys", Path("/r/nsys"), CMD, nvtx_capture="step") == \
        [*head, "--capture-range=nvtx", "--nvtx-capture=step", "--capture-range-end=stop",
         "-e", "NSYS_NVTX_PROFILER_REGISTER_ONLY=0", *tail]
    assert argv("/x/nsys", Path("/r/nsys"), CMD, gpu_metrics=True) == \
        [*head, "--gpu-metrics-devices=all", "--capture-range=none", *tail]
    assert argv("/x/nsys", Path("/r/nsys"), CMD, um_faults=True) == \
        [*head, "--cuda-um-cpu-page-faults=true", "--cuda-um-gpu-page-faults=true", "--capture-range=none", *tail]
    sampled = [*head, "--capture-range=none", "--sample=process-tree", "--cpuctxsw=process-tree", *tail[2:]]
    assert argv("/x/nsys", Path("/r/nsys"), CMD, cpu_samples=True) == sampled
    assert argv("/x/nsys", Path("/r/nsys"), CMD, cuda_memory_usage=True) == \
        [*head, "--cuda-memory-usage=true", "--capture-range=none", *tail]
    # (nsys unwinds CUDA API calls only where it samples the CPU: sampling comes with it; their
    # Python stacks of a Python program only: nsys crashed a CUDA C++ program given the option)
    assert argv("/x/nsys", Path("/r/nsys"), CMD, cuda_backtrace=True) == \
        [*head, "--cudabacktrace=all", "--python-backtrace=cuda", *sampled[len(head):]]
    native = ["/x/app", "--n", "3"]
    assert argv("/x/nsys", Path("/r/nsys"), native, cuda_backtrace=True) == \
        [*head, "--cudabacktrace=all", *sampled[len(head):-len(CMD)], *native]
    assert argv("/x/nsys", Path("/r/nsys"), CMD, python_samples=True) == \
        [*head, "--python-sampling=true", "--capture-range=none", *tail]
    with pytest.raises(ValueError, match="give one"):
        argv("/x/nsys", Path("/r/nsys"), CMD, capture_range="cudaProfilerApi", nvtx_capture="step")
    with pytest.raises(ValueError, match="--capture-range 'nvtx'"):
        argv("/x/nsys", Path("/r/nsys"), CMD, capture_range="nvtx")


def test_a_python_program_is_told_by_its_executable_or_its_first_line(tmp_path):
    script = tmp_path / "torchrun"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    shell = tmp_path / "run.sh"
    shell.write_text("#!/bin/sh\npython3 x.py\n")
    binary = tmp_path / "app"
    binary.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(64))
    for cmd, python in ((["python"], True), (["/usr/bin/python3.12", "-m", "x"], True), ([str(script), "--nproc", "2"], True),
                        ([str(shell)], False), ([str(binary)], False), (["/no/such/program"], False), ([], False)):
        assert profilers.is_python(cmd) is python, cmd


def test_ncu_command_argv_for_each_option():
    head = ["/x/ncu", "--clock-control", "none", "--target-processes", "all"]
    tail = [*SECTIONS, "--import-source", "yes", "--force-overwrite", "-o", "/r/ncu", *CMD]
    argv = profilers.ncu_command_argv
    assert argv("/x/ncu", Path("/r/ncu"), CMD) == [*head, "--launch-count", "50", *tail]
    assert argv("/x/ncu", Path("/r/ncu"), CMD, nvtx_capture="step") == \
        [*head, "--nvtx", "--nvtx-include", "step/", "--launch-count", "50", *tail]
    assert argv("/x/ncu", Path("/r/ncu"), CMD, kernel_regex="gemm|attn", launch_count=3) == \
        [*head, "--kernel-name", "regex:gemm|attn", "--launch-count", "3", *tail]
    assert profilers.DEFAULT_LAUNCH_COUNT == 50


@pytest.mark.parametrize("cmd, stem", [
    (["python", "my_bench.py", "--bs", "8"], "my_bench"),
    (["python3.12", "-u", "/a/b/train.py"], "train"),
    (["python", "-m", "pkg.bench", "x"], "bench"),
    (["python", "-c", "print(1)"], "python"),
    (["./run_all.sh"], "run_all"),
    (["/usr/bin/my app"], "my_app"),
])
def test_program_stem(cmd, stem):
    assert command.program_stem(cmd) == stem


# -- --tool none: run and recorded ------------------------------------------------------


def test_tool_none_writes_a_complete_run_folder(tmp_path):
    code = "import sys; print('out line'); print('err line', file=sys.stderr)"
    res = runner.invoke(cli.app, ["capture", "--tool", "none", "--out", str(tmp_path / "runs"), "--param", "bs=8",
                                  "-p", "variant=b", "--", sys.executable, "-c", code])
    assert res.exit_code == 0, res.output
    (d,) = (tmp_path / "runs").iterdir()
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-python-none", d.name)
    assert sorted(p.name for p in d.iterdir()) == ["capture.log", "meta.json"]
    meta = _meta(d)
    assert META_KEYS <= set(meta)
    assert meta["status"] == "ok" and meta["error"] is None and meta["exit_code"] == 0
    assert meta["name"] == d.name and meta["tool"] == "none"
    assert meta["params"] == {"tool": "none", "program": "python", "bs": "8", "variant": "b"}
    assert meta["program"] == {"argv": [sys.executable, "-c", code], "executable": sys.executable,
                               "cwd": os.getcwd()}
    assert meta["profiler_commands"] == []
    assert set(meta["versions"]) == {"python", "torch", "triton", "nsys", "ncu", "tracekit"}
    assert set(meta["gpu"]) == {"name", "driver", "clocks_sm_mhz", "clocks_max_sm_mhz", "clocks_mem_mhz"}
    assert meta["finished_at"] >= meta["started_at"]
    log = (d / "capture.log").read_text()
    assert "out line" in log and "err line" in log and log.startswith("$ ")
    assert "out line" in res.output  # the program's output, as it came
    assert f"run folder: {d}" in res.output and "nothing to ingest" in res.output
    assert not (tmp_path / "tracekit.duckdb").exists()


def test_ingest_of_a_tool_none_folder_is_one_line(tmp_path):
    """What ingest does with a folder of --tool none (meta.json and capture.log only): a
    one-line error, exit 2, nothing written."""
    from tracekit.cli import main

    d = command.capture_command([sys.executable, "-c", "pass"], "none", out_dir=tmp_path, name="plain")
    assert main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(d)]) == 2
    assert not (tmp_path / "s.duckdb").exists()


@pytest.mark.parametrize("code, status, error", [
    ("import sys; print('boom', file=sys.stderr); sys.exit(3)", 3, "python exited with status 3: boom"),
    ("raise ValueError('bad input')", 1, "python exited with status 1: ValueError: bad input"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -9, "python was killed by signal 9 (SIGKILL)"),
])
def test_a_failing_command_is_recorded_failed_with_its_exit_status(tmp_path, code, status, error):
    with pytest.raises(CaptureError) as err:
        command.capture_command([sys.executable, "-c", code], "none", out_dir=tmp_path, name="bad")
    assert str(err.value) == f"capture failed ({error}); the run folder {tmp_path / 'bad'} says so"
    meta = _meta(tmp_path / "bad")
    assert (meta["status"], meta["exit_code"], meta["error"]) == ("failed", status, error)


@pytest.mark.parametrize("program, why", [("no-such-program-xyz", "not on PATH"),
                                          ("./nope/prog", "no such executable file")])
def test_a_command_that_cannot_be_found_is_recorded_failed(tmp_path, program, why):
    from tracekit.cli import main

    out = tmp_path / "runs"
    assert main(["capture", "--tool", "none", "--out", str(out), "--name", "nf", "--", program, "x"]) == 2
    meta = _meta(out / "nf")
    assert meta["status"] == "failed" and meta["exit_code"] is None
    assert meta["error"] == f"command not found: {program} ({why})"


def test_cli_failure_is_one_line_exit_2(tmp_path, capsys):
    from tracekit.cli import main

    out = tmp_path / "runs"
    assert main(["capture", "--tool", "none", "--out", str(out), "--name", "f", "--", sys.executable, "-c",
                 "raise SystemExit(5)"]) == 2
    err = capsys.readouterr().err
    assert err == f"tracekit: error: capture failed (python exited with status 5); the run folder {out / 'f'} says so\n"


def test_options_after_the_program_are_its_own(tmp_path):
    """Without --, the program's own options (--bs, --tool) are not capture's."""
    out = tmp_path / "runs"
    res = runner.invoke(cli.app, ["capture", "--tool", "none", "--out", str(out), "--name", "own", sys.executable,
                                  "-c", "import sys; print(sys.argv[1:])", "--bs", "4", "--tool", "ncu"])
    assert res.exit_code == 0, res.output
    assert "['--bs', '4', '--tool', 'ncu']" in (out / "own" / "capture.log").read_text()


# -- bad input: one line, before anything runs --------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--bs", "8"], "--bs: an option of the HSTU workload, not of a command's capture"),
    (["--nc", "64"], "--nc: an option of the HSTU workload"),
    (["--preset", "small"], "--preset: an option of the HSTU workload"),
    (["--warmup-ms", "10"], "--warmup-ms: an option of the HSTU workload"),
    (["--iters", "3"], "--iters: an option of the HSTU workload"),
    (["--kernel-name", "gemm"], "--kernel-name: an option of --tool ncu, not of --tool none"),
    (["--launch-count", "3"], "--launch-count: an option of --tool ncu, not of --tool none"),
    (["--capture-range", "cudaProfilerApi"], "--capture-range: an option of --tool nsys, not of --tool none"),
    (["--nvtx-capture", "step"], "--nvtx-capture: an option of --tool nsys or ncu, not of --tool none"),
    (["--gpu-metrics"], "--gpu-metrics: an option of --tool nsys, not of --tool none"),
    (["--um-faults"], "--um-faults: an option of --tool nsys, not of --tool none"),
    (["--cpu-samples"], "--cpu-samples: an option of --tool nsys, not of --tool none"),
    (["--cuda-memory-usage"], "--cuda-memory-usage: an option of --tool nsys, not of --tool none"),
    (["--cuda-backtrace"], "--cuda-backtrace: an option of --tool nsys, not of --tool none"),
    (["--param", "tool=x"], "--param tool: tracekit sets tool itself"),
    (["--param", "um_faults=1"], "--param um_faults: tracekit sets um_faults itself"),
    (["--param", "cpu_samples=1"], "--param cpu_samples: tracekit sets cpu_samples itself"),
    (["--param", "cuda_memory_usage=1"], "--param cuda_memory_usage: tracekit sets cuda_memory_usage itself"),
    (["--param", "cuda_backtrace=1"], "--param cuda_backtrace: tracekit sets cuda_backtrace itself"),
    (["--param", "novalue"], "--param 'novalue': expected NAME=VALUE"),
    (["--param", "bs=0"], "--param bs='0': bs (the batch size) is a whole number"),
    (["--name", "7"], "run name: '7' cannot name a run"),
])
def test_bad_options_with_a_command_are_one_line_errors(tmp_path, capsys, args, message):
    from tracekit.cli import main

    out = tmp_path / "runs"
    assert main(["capture", "--tool", "none", *args, "--out", str(out), "--", sys.executable, "-c", "pass"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tracekit: error: {message}") and err.count("\n") == 1, err
    assert not out.exists()


@pytest.mark.parametrize("tool, args, message", [
    ("nsys", ["--capture-range", "nvtx"], "--capture-range 'nvtx': choose one of none, cudaProfilerApi"),
    ("nsys", ["--capture-range", "cudaProfilerApi", "--nvtx-capture", "a"], "--capture-range cudaProfilerApi and "
                                                                           "--nvtx-capture: give one"),
    ("ncu", ["--nvtx-capture", "step/"], "--nvtx-capture 'step/': give the range's name"),
    ("ncu", ["--kernel-name", "gemm("], "--kernel-name 'gemm(': not a regular expression"),
    ("ncu", ["--launch-count", "0"], "--launch-count 0: a whole number of kernel launches, at least 1"),
    ("ncu", ["--gpu-metrics"], "--gpu-metrics: an option of --tool nsys, not of --tool ncu"),
    ("ncu", ["--um-faults"], "--um-faults: an option of --tool nsys, not of --tool ncu"),
    ("ncu", ["--cpu-samples"], "--cpu-samples: an option of --tool nsys, not of --tool ncu"),
    ("ncu", ["--cuda-memory-usage"], "--cuda-memory-usage: an option of --tool nsys, not of --tool ncu"),
    ("ncu", ["--cuda-backtrace"], "--cuda-backtrace: an option of --tool nsys, not of --tool ncu"),
])
def test_bad_profiler_options_are_refused_before_the_profiler_is_looked_for(tmp_path, tool, args, message):
    with pytest.raises(CaptureError, match=re.escape(message)):
        runner.invoke(cli.app, ["capture", "--tool", tool, *args, "--out", str(tmp_path / "runs"), "--",
                                "prog"], catch_exceptions=False)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("opt", [["--launch-count", "3"], ["--nvtx-capture", "r"],
                                 ["--capture-range", "cudaProfilerApi"], ["--param", "a=b"], ["--um-faults"]])
def test_command_options_without_a_command_are_errors(tmp_path, opt):
    res = runner.invoke(cli.app, ["capture", "--tool", "none", *opt, "--out", str(tmp_path / "runs")])
    assert isinstance(res.exception, CaptureError), res.output
    assert str(res.exception).startswith(f"{opt[0]}: an option of a program's capture")
    assert not (tmp_path / "runs").exists()


# -- under (fake) profilers: folder, argv, ingest ---------------------------------------------


def test_nsys_command_run_is_ingested_and_its_setup_compared(tmp_path, monkeypatch):
    """Two captures of a program under nsys: the folders carry the exact profiler argv, are
    ingested, and diff's setup comparison reads what their meta.json recorded."""
    from tracekit.capture import runinfo

    import tracekit

    monkeypatch.setattr(runinfo, "git_commit", lambda: "0123456789abcdef")  # (others commit meanwhile)
    fake = _fake(tmp_path, monkeypatch, "nsys", DATA / "nsys_capture_range")
    db, out = tmp_path / "s.duckdb", tmp_path / "runs"
    prog = [sys.executable, "-c", "import os; print('range env', os.environ.get('NSYS_NVTX_PROFILER_REGISTER_ONLY'))"]
    res = runner.invoke(cli.app, ["capture", "--tool", "nsys", "--nvtx-capture", "step", "--out", str(out),
                                  "--db", str(db), "--name", "base", "-p", "variant=a", "--", *prog])
    assert res.exit_code == 0, res.output
    meta = _meta(out / "base")
    assert meta["status"] == "ok" and meta["exit_code"] == 0 and meta["profiler_exit_code"] == 0
    argv = profilers.nsys_command_argv(str(fake), out / "base" / "nsys", prog, nvtx_capture="step")
    # exported after, with the NVTX payloads (the Python stacks nsys records in them)
    export = nsysrep.export_argv(str(fake), out / "base" / "nsys.nsys-rep", out / "base" / "nsys.sqlite")
    assert "--include-blobs=true" in export
    assert meta["profiler_commands"] == [argv, export]
    assert json.loads((tmp_path / "argv.json").read_text()) == argv[1:]
    assert json.loads((tmp_path / "argv.json.export").read_text()) == export[1:]
    assert "range env 0" in (out / "base" / "capture.log").read_text()
    assert meta["params"] == {"tool": "nsys", "program": "python", "nvtx_capture": "step", "variant": "a"}
    assert "top kernels" in res.output and "in the store as run 1" in res.output

    monkeypatch.setenv("TRACEKIT_KERNELS_BACKEND", "reference")
    monkeypatch.setenv("FAKE_DATA", str(DATA / "nsys_diff_base_a"))  # (another capture: another export)
    command.capture_command(prog, "nsys", out_dir=out, db=db, name="new", params={"variant": "b"})
    with tracekit.open(db) as tk:
        runs = tk.sql("SELECT name, kind, params, meta FROM runs ORDER BY run_id")
        assert runs["name"].to_list() == ["base", "new"] and runs["kind"].to_list() == ["nsys", "nsys"]
        assert json.loads(runs["params"][1])["capture_range"] == "none"
        assert json.loads(runs["meta"][1])["program"]["argv"] == prog
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            tk.diff("base", "new")
    setup = [str(w.message) for w in seen if issubclass(w.category, CaptureWarning)]
    assert setup == ["diff: the captures differ in setup: env TRACEKIT_KERNELS_BACKEND (unset) -> reference"]
    # the same program with other arguments: another setup, said with the command lines
    monkeypatch.delenv("TRACEKIT_KERNELS_BACKEND")
    monkeypatch.setenv("FAKE_DATA", str(DATA / "nsys_diff_base_b"))
    command.capture_command([*prog, "--bs", "16"], "nsys", out_dir=out, db=db, name="other")
    with tracekit.open(db) as tk, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tk.diff("base", "other")
    setup = [str(w.message) for w in seen if issubclass(w.category, CaptureWarning)]
    assert setup == ["diff: the captures differ in setup: program python … -> python … --bs 16"], setup


def test_a_failing_program_under_nsys_is_failed_and_not_ingested(tmp_path, monkeypatch):
    """nsys writes its export when the program fails and exits with its status: the run
    is failed, the error the program's last stderr line, and the export is not ingested."""
    _fake(tmp_path, monkeypatch, "nsys", DATA / "nsys_capture_range")
    db = tmp_path / "s.duckdb"
    prog = [sys.executable, "-c", "import sys; sys.stderr.write('CUDA error: out of memory\\n'); sys.exit(2)"]
    with pytest.raises(CaptureError, match=r"capture failed \(python exited with status 2: CUDA error: out of "
                                           r"memory\); the run folder .* says so, not ingested"):
        command.capture_command(prog, "nsys", out_dir=tmp_path / "runs", db=db, name="oom")
    meta = _meta(tmp_path / "runs" / "oom")
    assert (meta["status"], meta["exit_code"], meta["profiler_exit_code"]) == ("failed", 2, 2)
    assert (tmp_path / "runs" / "oom" / "nsys.sqlite").exists() and not db.exists()


def test_nsys_without_an_export_says_which_range_never_ran(tmp_path, monkeypatch):
    _fake(tmp_path, monkeypatch, "nsys", DATA / "nsys_capture_range")
    monkeypatch.setenv("FAKE_NO_EXPORT", "1")
    with pytest.raises(CaptureError, match=r"nsys wrote no report \(nsys.nsys-rep\): the NVTX range 'step' "
                                           r"never ran\?; see capture.log"):
        command.capture_command([sys.executable, "-c", "pass"], "nsys", out_dir=tmp_path, name="n",
                                nvtx_capture="step", ingest=False)
    assert _meta(tmp_path / "n")["status"] == "failed"


def test_ncu_command_run_has_the_hstu_captures_outputs(tmp_path, monkeypatch):
    import tracekit

    fake = _fake(tmp_path, monkeypatch, "ncu", DATA / "ncu_app_range")
    db, out = tmp_path / "s.duckdb", tmp_path / "runs"
    prog = [sys.executable, "-c", "pass"]
    d = command.capture_command(prog, "ncu", out_dir=out, db=db, kernel_regex="gemm", launch_count=3)
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-python-ncu", d.name)
    assert {"ncu.ncu-rep", "ncu_raw.csv", "ncu_details.csv"} <= {p.name for p in d.iterdir()}
    meta = _meta(d)
    argv = profilers.ncu_command_argv(str(fake), d / "ncu", prog, kernel_regex="gemm", launch_count=3)
    exports = profilers.ncu_export_argvs(str(fake), d / "ncu.ncu-rep")
    assert meta["profiler_commands"] == [argv, exports["ncu_raw.csv"], exports["ncu_details.csv"]]
    assert meta["params"] == {"tool": "ncu", "program": "python", "kernel_regex": "gemm", "launch_count": 3,
                              "replay_mode": "kernel"}
    assert meta["ncu"]["sections"] == list(profilers.NCU_SECTIONS) and meta["ncu"]["replay_mode"] == "kernel"
    with tracekit.open(db, read_only=True) as tk:
        assert tk.runs()["kind"].to_list() == ["ncu"]
        assert tk.query("ncu-kernels", limit=0).height > 0
    text = command.command_summary(d, db).splitlines()
    assert text[1:] == ["in the store as run 1: tracekit query ncu-summary --run 1",
                        "ncu profiled 2 kernel launches (launches, summed us, kernel):",
                        "     2    1277.216  range"]
    # the default cap
    command.capture_command(prog, "ncu", out_dir=out, name="capped", ingest=False)
    assert json.loads((tmp_path / "argv.json").read_text())[4:6] == ["--launch-count", "50"]


def test_interrupt_is_recorded_and_raised(tmp_path, monkeypatch):
    """Ctrl-C while the program runs: the folder says interrupted, and the Ctrl-C goes on as
    Interrupted naming the folder (the CLI printed a bare "interrupted")."""
    from tracekit.capture import command as mod

    from tracekit.errors import Interrupted

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(mod, "_run", interrupted)
    with pytest.raises(Interrupted, match=r"^capture interrupted; its run folder .*ctrlc says so, nothing ingested$"):
        mod.capture_command([sys.executable, "-c", "pass"], "none", out_dir=tmp_path, name="ctrlc")
    meta = _meta(tmp_path / "ctrlc")
    assert meta["status"] == "interrupted" and meta["error"] == "interrupted by the user" and meta["finished_at"]


def test_a_failing_program_under_ncu_names_the_program(tmp_path, monkeypatch):
    """ncu's own ==ERROR== line is not the program's error; the program's last stderr line is."""
    _fake(tmp_path, monkeypatch, "ncu", DATA / "ncu_app_range")
    prog = [sys.executable, "-c", "import sys; sys.exit('RuntimeError: CUDA driver too old')"]
    with pytest.raises(CaptureError, match=r"\(python exited with status 1: RuntimeError: CUDA driver too old\)"):
        command.capture_command(prog, "ncu", out_dir=tmp_path, name="old", ingest=False)
    meta = _meta(tmp_path / "old")
    assert (meta["status"], meta["exit_code"], meta["profiler_exit_code"]) == ("failed", 1, 1)
    assert "==ERROR== The application returned an error code (1)." in (tmp_path / "old" / "capture.log").read_text()


def test_an_interrupt_as_the_output_copier_starts_stops_the_program():
    """A Ctrl-C (or a SIGTERM taken as one) that lands as run.wait starts the thread copying the
    program's output stops the program too: it was raised before the stop was armed, and the
    program ran on after tracekit had exited (a review found it 3 times in 20 SIGTERMs sent
    within 5 ms of the program's start)."""
    import subprocess
    import threading

    from tracekit.capture import run

    class Cut(threading.Thread):
        def start(self):
            raise KeyboardInterrupt

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.DEVNULL)
    try:
        with pytest.raises(KeyboardInterrupt):
            run.wait(proc, [Cut(target=lambda: None)], None)
        assert proc.poll() is not None  # (stopped, not left running)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_folder_of_runs_skips_a_tool_none_run_with_a_warning(tmp_path, capsys):
    """`tracekit ingest runs/` where runs/ holds a --tool none run of a command beside a run
    with a profile: that one is left out with one warning line (as a failed capture is),
    the other is ingested; alone it is the store's one-line error."""
    from tracekit.cli import main

    runs = tmp_path / "runs"
    command.capture_command([sys.executable, "-c", "pass"], "none", out_dir=runs, name="plain")
    shutil.copytree(DATA / "hstu_capture_pair" / "base", runs / "base")
    assert main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(runs)]) == 0
    out = capsys.readouterr()
    assert "plain: not ingested: a run under --tool none recorded no profile and no timed request" in out.err
    assert "run 1 (base" in out.out


def test_a_program_past_its_deadline_is_stopped_and_recorded_failed(tmp_path):
    """timeout_s stops a program still running at its deadline (SIGINT, then a kill): the run
    folder says it timed out (a program that outlived it was recorded ok, and a hung one hung
    the capture); the HSTU capture's stream waits the same way (run.wait)."""
    import io
    import subprocess
    import time

    from tracekit.capture import run

    t = time.perf_counter()
    with pytest.raises(CaptureError, match="timed out after 1 s"):
        command.capture_command([sys.executable, "-c", "import time; time.sleep(30)"], "none", out_dir=tmp_path,
                                name="slow", timeout_s=1)
    assert time.perf_counter() - t < 15
    meta = _meta(tmp_path / "slow")
    assert meta["status"] == "failed" and meta["error"] == "timed out after 1 s"
    # the HSTU stream: a program at its deadline stopped, its output so far kept; one that ends, copied whole
    log = io.StringIO()
    with pytest.raises(subprocess.TimeoutExpired):
        run._stream([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"], log,
                    False, 0.5)
    assert "started" in log.getvalue()
    log = io.StringIO()
    assert run._stream([sys.executable, "-c", "print('\\n'.join(map(str, range(20000))))"], log, False, 30) == 0
    assert log.getvalue().rstrip().endswith("19999")
