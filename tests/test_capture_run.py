"""tracekit.capture.run on CPU: the --tool none run end to end, run folders, profiler
discovery and command lines, bad input."""

import csv
import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest
from tracekit.capture import profilers, run, runinfo

from tracekit.errors import CaptureError, ToolNotFoundError

pytestmark = pytest.mark.usefixtures("reference_kernels")

TINY = dict(max_history_items=40, num_items=2048, num_layers=2, d_model=64, num_heads=2,
            head_dim=32, scoring_hidden=32, new_items_per_request=4)
SEED_LINE = re.compile(r"KV Caches:\s*(\d+),\s*Candidate Embeddings:\s*(\d+),\s*Total time\(ms\):\s*([0-9.]+)")
META_KEYS = {"name", "tool", "params", "command", "workload", "versions", "gpu", "git_commit", "settings",
             "started_at", "finished_at", "status", "error"}


def _capture(tmp_path, **kw):
    args = dict(tool="none", preset="small", warmup_ms=0, iters=3, out_dir=tmp_path / "runs",
                workload=TINY, ingest=False, command=["tracekit", "capture", "--tool", "none"])
    args.update(kw)
    return run.capture(2, 8, **args)


@pytest.fixture(scope="module")
def none_run(tmp_path_factory):
    return _capture(tmp_path_factory.mktemp("cap"))


def test_none_run_writes_complete_run_folder(none_run):
    d = none_run
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-bs2-nc8-none", d.name)
    meta = json.loads((d / "meta.json").read_text())
    assert META_KEYS <= set(meta)
    assert meta["status"] == "ok" and meta["error"] is None
    assert meta["name"] == d.name and meta["tool"] == "none"
    assert meta["params"] == {"bs": 2, "nc": 8, "preset": "small", "tool": "none", "warmup_ms": 0.0,
                              "iters": 3, "flush_l2": True, "device": "auto"}
    assert meta["command"] == ["tracekit", "capture", "--tool", "none"]
    assert meta["workload"]["d_model"] == 64 and meta["workload"]["preset"] == "small"
    assert set(meta["versions"]) == {"python", "torch", "triton", "nsys", "ncu", "tracekit"}
    assert meta["versions"]["torch"] and meta["versions"]["nsys"] is None
    assert set(meta["gpu"]) == {"name", "driver", "clocks_sm_mhz", "clocks_max_sm_mhz", "clocks_mem_mhz"}
    assert meta["device"] == "cpu"
    assert meta["settings"]["env"]["TRACEKIT_KERNELS_BACKEND"] == "reference"  # (the module's fixture)
    assert meta["finished_at"] >= meta["started_at"]
    assert meta["profiler_commands"][0][1:4] == ["-m", "tracekit.capture.worker", str(d / "spec.json")]

    with open(d / "requests.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["request_idx", "phase", "bs", "nc", "kv_caches", "candidate_embeddings",
                             "latency_ms", "peak_mem_allocated_mb", "peak_mem_reserved_mb", "model_flop",
                             "attention_flop"]
    assert all(int(r["model_flop"]) > int(r["attention_flop"]) > 0 for r in rows)
    timed = [r for r in rows if r["phase"] == "timed"]
    warm = [r for r in rows if r["phase"] == "warmup"]
    assert len(timed) == 3 and len(warm) >= 2
    assert [int(r["request_idx"]) for r in rows] == list(range(len(rows)))
    assert warm[0]["kv_caches"] == "0"  # first request: every user misses the cache
    assert all(r["kv_caches"] == "2" and r["candidate_embeddings"] == "8" for r in timed)
    assert all(float(r["latency_ms"]) > 0 for r in rows)
    assert all(r["peak_mem_allocated_mb"] == "" for r in rows)  # not tracked on CPU

    lat = sorted(float(r["latency_ms"]) for r in timed)
    assert meta["latency"]["requests"] == 3
    assert meta["latency"]["median_ms"] == pytest.approx(lat[1])
    assert meta["latency"]["max_ms"] == pytest.approx(lat[2])

    # the log has the seed's line for every request, matching requests.csv
    log = (d / "capture.log").read_text()
    found = SEED_LINE.findall(log)
    assert len(found) == len(rows)
    assert [float(x[2]) for x in found] == pytest.approx([float(r["latency_ms"]) for r in rows], abs=6e-4)


def test_settings_tell_captures_with_other_tiles_apart(tmp_path, monkeypatch):
    """A run folder records the TRACEKIT_* variables (and PyTorch's allocator's, CUDA's) and the
    tiles file the kernels read, with its content's sha256: the same capture with other tuned
    tiles is told apart; no file is the built-in tiles."""
    from tracekit.capture import runinfo

    tiles = tmp_path / "tiles.json"
    monkeypatch.setenv("TRACEKIT_TILES", str(tiles))
    none = runinfo.settings()
    assert none["tiles_file"] == str(tiles) and none["tiles_sha256"] is None
    assert none["env"]["TRACEKIT_TILES"] == str(tiles)
    monkeypatch.setenv("TRACEKIT_DB", "/somewhere/store.duckdb")  # (an ingest setting: not recorded)
    assert "TRACEKIT_DB" not in runinfo.settings()["env"]
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")  # (the allocator: recorded)
    assert runinfo.settings()["env"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    monkeypatch.setenv("TRACEKIT_TILES", "/dev/zero")  # not a regular file: not read
    assert runinfo.settings()["tiles_sha256"] is None
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACEKIT_TILES", tiles.name)  # a relative path is recorded absolute
    assert runinfo.settings()["tiles_file"] == str(tiles)
    sums = []
    for programs in (132, 66):
        tiles.write_text(json.dumps({"tiles": {"cached|NVIDIA H200|bfloat16|256|256|8192": {"PROGRAMS": programs}}}))
        sums.append(runinfo.settings()["tiles_sha256"])
    assert sums[0] != sums[1] and all(re.fullmatch(r"[0-9a-f]{64}", s) for s in sums)


def test_summary_reports_latency(none_run):
    text = run.summary(none_run, db=None)
    assert "status ok" in text and "3 timed requests" in text and "median" in text


@pytest.mark.parametrize("kw, match", [
    (dict(bs=0), r"--bs 0"),
    (dict(nc=-1), r"--nc -1"),
    (dict(bs="x"), r"--bs 'x'"),
    (dict(preset="huge"), r"--preset 'huge'"),
    (dict(tool="perf"), r"--tool 'perf'"),
    (dict(iters=0), r"--iters 0"),
    (dict(warmup_ms=-5), r"--warmup-ms -5"),
    (dict(name="a/b"), r"run name 'a/b': must be a plain folder name"),
    (dict(name="7"), r"run name: '7' cannot name a run: --run reads it as a run id"),
    (dict(name="latest"), r"run name: 'latest' cannot name a run"),
    (dict(gpu_metrics=True), r"--gpu-metrics: nsys samples the GPU's counters; --tool none does not"),
    (dict(gpu_metrics="yes"), r"gpu_metrics 'yes': must be true or false"),
    (dict(cpu_samples=True), r"--cpu-samples: nsys samples the CPU; --tool none does not"),
    (dict(cpu_samples=1), r"cpu_samples 1: must be true or false"),
    (dict(cuda_memory_usage=True), r"--cuda-memory-usage: nsys records the GPU memory's allocations; --tool none does not"),
    (dict(cuda_memory_usage="on"), r"cuda_memory_usage 'on': must be true or false"),
    (dict(cuda_backtrace=True), r"--cuda-backtrace: nsys unwinds the CUDA API calls; --tool none does not"),
])
def test_bad_input_is_one_line_error_before_anything_runs(tmp_path, kw, match):
    args = dict(bs=2, nc=8, tool="none", preset="small", out_dir=tmp_path / "runs", ingest=False)
    args.update(kw)
    with pytest.raises(CaptureError, match=match) as err:
        run.capture(**args)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()


def test_unknown_workload_setting(tmp_path):
    with pytest.raises(CaptureError, match="unknown workload setting.*bogus"):
        _capture(tmp_path, workload={"bogus": 1})


def test_existing_run_folder_is_an_error_and_untouched(tmp_path):
    d = tmp_path / "runs" / "mine"
    d.mkdir(parents=True)
    (d / "keep.txt").write_text("x")
    with pytest.raises(CaptureError, match=r"run folder .*mine already exists"):
        _capture(tmp_path, name="mine")
    assert [p.name for p in d.iterdir()] == ["keep.txt"]


def _fake_tool(tmp_path, name, body):
    p = tmp_path / "bin" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


def test_find_tool_order_path_env_known(tmp_path, monkeypatch):
    on_path = _fake_tool(tmp_path / "a", "nsys", "exit 0\n")
    via_env = _fake_tool(tmp_path / "b", "nsys", "exit 0\n")
    old = tmp_path / "opt/nvidia/nsight-compute/2024.1.0/host/target-linux-x64/nsys"
    new = tmp_path / "opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys"
    for p in (old, new):
        p.parent.mkdir(parents=True)
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    known = [str(tmp_path / "opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys")]
    env = {"PATH": str(on_path.parent), "TRACEKIT_NSYS": str(via_env)}
    assert profilers.find_tool("nsys", env=env, known=known) == str(on_path)
    env["PATH"] = str(tmp_path / "empty")
    assert profilers.find_tool("nsys", env=env, known=known) == str(via_env)
    del env["TRACEKIT_NSYS"]
    assert profilers.find_tool("nsys", env=env, known=known) == str(new)
    # the machine's real Nsight Compute folder is among the known ones
    assert "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys" in profilers.KNOWN_LOCATIONS["nsys"]


def test_missing_profiler_lists_where_it_looked(tmp_path):
    env = {"PATH": str(tmp_path), "TRACEKIT_NCU": str(tmp_path / "nope")}
    with pytest.raises(ToolNotFoundError) as err:
        profilers.find_tool("ncu", env=env, known=[str(tmp_path / "opt/*/ncu")])
    msg = str(err.value)
    assert "\n" not in msg and "ncu not found" in msg and "PATH" in msg
    assert f"$TRACEKIT_NCU={tmp_path / 'nope'} (not an executable file)" in msg
    assert "set TRACEKIT_NCU=" in msg


def test_missing_profiler_fails_capture_before_run_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("TRACEKIT_NSYS", raising=False)
    monkeypatch.setitem(profilers.KNOWN_LOCATIONS, "nsys", (str(tmp_path / "none/*/nsys"),))
    with pytest.raises(ToolNotFoundError, match="nsys not found"):
        _capture(tmp_path, tool="nsys")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("tool", ["nsys", "ncu"])
def test_a_profiled_capture_without_a_gpu_fails_before_the_workload_runs(tmp_path, monkeypatch, tool):
    """Without a GPU the workload ran on the CPU under the profiler (84 s at the large preset),
    then failed with "ncu wrote no report"; now one line says why before anything runs, and
    a sweep says it once, not per point."""
    fake = _fake_tool(tmp_path, tool, "exit 0\n")
    monkeypatch.setenv(f"TRACEKIT_{tool.upper()}", str(fake))
    monkeypatch.setattr(runinfo, "has_gpu", lambda: False)
    with pytest.raises(CaptureError, match=f"--tool {tool} profiles the workload's GPU work and this machine has "
                                           "no GPU .*use --tool none") as err:
        _capture(tmp_path, tool=tool)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()

    from tracekit.capture import sweep as sw

    calls = []
    with pytest.raises(CaptureError, match="this machine has no GPU"):
        sw.sweep("1,2", "8", tool=tool, preset="small", out_dir=tmp_path / "runs", progress=False,
                 runner=lambda *a, **kw: calls.append(a))
    assert calls == [] and not (tmp_path / "runs").exists()

    monkeypatch.setattr(runinfo, "has_gpu", lambda: True)  # a GPU, and the workload told to stay off it
    with pytest.raises(CaptureError, match=f"device cpu: --tool {tool} profiles the workload's GPU work"):
        _capture(tmp_path, tool=tool, device="cpu")
    with pytest.raises(CaptureError, match="device cpu: "):
        sw.sweep("1", "8", tool=tool, device="cpu", preset="small", out_dir=tmp_path / "runs", progress=False,
                 runner=lambda *a, **kw: calls.append(a))
    assert calls == [] and not (tmp_path / "runs").exists()
    _capture(tmp_path, tool="none", device="cpu", name="cpu")  # timing alone runs on the CPU


def test_nsys_argv():
    cmd = ["python", "-m", "tracekit.capture.worker", "/r/spec.json"]
    argv = profilers.nsys_argv("/x/nsys", Path("/r/nsys"), cmd)
    assert argv[:2] == ["/x/nsys", "profile"]
    assert "--trace=cuda,nvtx,osrt" in argv
    assert "--capture-range=cudaProfilerApi" in argv and "--capture-range-end=stop" in argv
    assert not any(a.startswith("--export") for a in argv)  # (exported after, with the NVTX payloads)
    i = argv.index("-o")
    assert argv[i + 1] == "/r/nsys"
    assert argv[-4:] == cmd
    assert all(isinstance(a, str) for a in argv)
    assert not any(a.startswith("--gpu-metrics") for a in argv)  # (off by default)
    sampled = profilers.nsys_argv("/x/nsys", Path("/r/nsys"), cmd, gpu_metrics=True)
    assert sampled == argv[:3] + ["--gpu-metrics-devices=all"] + argv[3:]
    assert "--sample=none" in argv and "--cpuctxsw=none" in argv  # (CPU sampling off by default)
    cpu = profilers.nsys_argv("/x/nsys", Path("/r/nsys"), cmd, cpu_samples=True)
    assert cpu == [{"--sample=none": "--sample=process-tree", "--cpuctxsw=none": "--cpuctxsw=process-tree"}.get(a, a)
                   for a in argv]
    assert not any(a.startswith("--cuda-memory-usage") for a in argv)  # (off by default)
    memory = profilers.nsys_argv("/x/nsys", Path("/r/nsys"), cmd, cuda_memory_usage=True)
    assert memory == argv[:3] + ["--cuda-memory-usage=true"] + argv[3:]
    unwound = profilers.nsys_argv("/x/nsys", Path("/r/nsys"), cmd, cuda_backtrace=True)
    # (the CPU sampled: nsys unwinds only then; the workload is Python: its stacks too)
    assert unwound == cpu[:3] + ["--cudabacktrace=all", "--python-backtrace=cuda"] + cpu[3:]
    python = profilers.nsys_argv("/x/nsys", Path("/r/nsys"), cmd, python_samples=True)
    assert python == argv[:3] + ["--python-sampling=true"] + argv[3:]


def test_ncu_argv_and_exports():
    cmd = ["python", "-m", "tracekit.capture.worker", "/r/spec.json"]
    argv = profilers.ncu_argv("/x/ncu", Path("/r/ncu"), cmd, launch_skip=2, launch_count=40)
    pairs = list(zip(argv, argv[1:], strict=False))
    assert ("--clock-control", "none") in pairs
    assert ("--nvtx-include", "tracekit_ncu/") in pairs and "--nvtx" in argv
    assert ("--launch-skip", "2") in pairs and ("--launch-count", "40") in pairs
    regex = dict(pairs)["--kernel-name"]
    assert regex.startswith("regex:")
    pattern = re.compile(regex[len("regex:"):])
    for kernel in ("indexSelectLargeIndex", "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNT",
                   "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64",
                   "ampere_bf16_s16816gemm_bf16_256x128_ldg8_relu_f2f_stages_64x3_tn",
                   "_hstu_cached_kernel", "_hstu_cached_sk_kernel"):
        assert pattern.search(kernel), kernel
    assert not pattern.search("vectorized_elementwise_kernel")
    sections = [b for a, b in pairs if a == "--section"]
    assert {"SpeedOfLight_RooflineChart", "Occupancy", "LaunchStats", "SourceCounters"} <= set(sections)
    assert ("--import-source", "yes") in pairs
    assert argv[argv.index("-o") + 1] == "/r/ncu" and argv[-4:] == cmd
    assert "--launch-count" not in profilers.ncu_argv("/x/ncu", Path("/r/ncu"), cmd)
    ex = profilers.ncu_export_argvs("/x/ncu", Path("/r/ncu.ncu-rep"))
    assert ex["ncu_raw.csv"] == ["/x/ncu", "-i", "/r/ncu.ncu-rep", "--csv", "--page", "raw",
                                 "--print-units", "base"]
    assert ex["ncu_details.csv"][4:6] == ["--page", "details"]


def test_failing_profiler_keeps_labelled_folder(tmp_path, monkeypatch, stand_in_gpu):
    argv_file = tmp_path / "argv.txt"
    fake = _fake_tool(tmp_path, "nsys",
                      f'printf "%s\\n" "$@" > {argv_file}\necho "fake nsys: Error: no CUDA" >&2\nexit 3\n')
    monkeypatch.setenv("PATH", str(tmp_path / "empty") + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("TRACEKIT_NSYS", str(fake))
    if shutil.which("nsys"):
        pytest.skip("a real nsys is on PATH")
    with pytest.raises(CaptureError, match=r"capture failed \(nsys exited with status 3.*; partial results in") as err:
        _capture(tmp_path, tool="nsys", name="bad")
    assert "\n" not in str(err.value)
    d = tmp_path / "runs" / "bad"
    meta = json.loads((d / "meta.json").read_text())
    assert meta["status"] == "failed" and "status 3" in meta["error"]
    assert meta["profiler_commands"][0][0] == str(fake)
    got = argv_file.read_text().split("\n")[:-1]
    assert got == meta["profiler_commands"][0][1:] and "--gpu-metrics-devices=all" not in got
    assert got[-3:] == ["-m", "tracekit.capture.worker", str(d / "spec.json")]
    assert "fake nsys: Error: no CUDA" in (d / "capture.log").read_text()


def test_capture_ingests_run_folder(tmp_path):
    import tracekit

    db = tmp_path / "t.duckdb"
    d = _capture(tmp_path, ingest=True, db=db, iters=4)
    with tracekit.open(db, read_only=True) as tk:
        runs = tk.sql("SELECT name, params, meta FROM runs")
        assert runs["name"].to_list() == [d.name]
        params = json.loads(runs["params"][0])
        assert (params["bs"], params["nc"], params["preset"], params["tool"]) == (2, 8, "small", "none")
        assert json.loads(runs["meta"][0])["status"] == "ok"
        req = tk.sql("SELECT phase, count(*) AS n FROM requests GROUP BY phase ORDER BY phase")
        assert dict(zip(req["phase"].to_list(), req["n"].to_list(), strict=True))["timed"] == 4
        lat = tk.query("sweep-latency", limit=0)
        assert lat.height == 1 and lat["requests"][0] == 4


def test_worker_reports_failure(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"bs": 1, "nc": 1, "tool": "none", "warmup_ms": 0, "iters": 1,
                                "workload": {"preset": "small", "bogus": 1}}))
    from tracekit.capture import worker

    assert worker.main([str(spec)]) == 1
    out = json.loads((tmp_path / "worker.json").read_text())
    assert out["status"] == "failed" and "bogus" in out["error"]
    assert sys.executable


def test_capture_package_does_not_import_torch():
    import subprocess

    code = ("import sys, tracekit.capture.run, tracekit.capture.sweep, tracekit.capture.export, "
            "tracekit.capture.cli; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_gpu_metrics_cpu_samples_and_memory_usage_reach_nsys_and_the_runs_params(tmp_path, monkeypatch,
                                                                                 stand_in_gpu):
    """``--gpu-metrics``, ``--cpu-samples``, ``--cuda-memory-usage``: nsys is told to sample the
    GPU's counters and the CPU and to record the GPU memory's allocations, and the run says so in
    its parameters (a run without them has no such key: older runs compare alike)."""
    argv_file = tmp_path / "argv.txt"
    fake = _fake_tool(tmp_path, "nsys", f'printf "%s\\n" "$@" > {argv_file}\nexit 3\n')
    monkeypatch.setenv("PATH", str(tmp_path / "empty") + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("TRACEKIT_NSYS", str(fake))
    if shutil.which("nsys"):
        pytest.skip("a real nsys is on PATH")
    with pytest.raises(CaptureError, match="capture failed"):
        _capture(tmp_path, tool="nsys", name="gm", gpu_metrics=True, cpu_samples=True, cuda_memory_usage=True,
                 cuda_backtrace=True)
    told = argv_file.read_text().split("\n")
    assert {"--gpu-metrics-devices=all", "--sample=process-tree", "--cpuctxsw=process-tree",
            "--cuda-memory-usage=true", "--cudabacktrace=all"} <= set(told)
    meta = json.loads((tmp_path / "runs" / "gm" / "meta.json").read_text())
    assert meta["params"]["gpu_metrics"] is True and meta["params"]["cpu_samples"] is True
    assert meta["params"]["cuda_memory_usage"] is True and meta["params"]["cuda_backtrace"] is True


def test_a_failed_workloads_traceback_goes_to_the_log_not_the_console(tmp_path, capsys):
    """The worker printed its traceback, and the console showed it above the one-line error;
    each line now carries a mark the console leaves out (capture.log keeps every line)."""
    from tracekit.capture import worker
    from tracekit.capture.run import _Console

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"bs": 1, "nc": 1, "tool": "none", "warmup_ms": 0, "iters": 1,
                                "workload": {"preset": "small", "bogus": 1}}))
    assert worker.main([str(spec)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{worker.TRACEBACK_MARK}Traceback (most recent call last):"
    assert all(line.startswith(worker.TRACEBACK_MARK) for line in err[:-1]) and len(err) > 3
    assert err[-1].startswith("workload failed: ") and "bogus" in err[-1]
    console = _Console(1)
    for line in err:
        console.line(line + "\n")
    assert capsys.readouterr().out == err[-1] + "\n"


def test_a_worker_told_to_stop_again_as_it_stops_ends_quietly(tmp_path):
    """A Ctrl-C reaches the worker from the terminal and again from capture (or nsys) as it
    stops: the first SIGINT stops it, the rest are let go while it ends (its exit runs torch's
    atexit handlers): it writes worker.json, prints no traceback and exits 130."""
    import signal
    import subprocess
    import time

    spec = tmp_path / "spec.json"
    from tracekit.capture.config import workload_config

    spec.write_text(json.dumps({"bs": 1, "nc": 8, "tool": "none", "warmup_ms": 0, "iters": 1_000_000,
                                "device": "cpu", "workload": workload_config("small").to_dict()}))
    proc = subprocess.Popen([sys.executable, "-m", "tracekit.capture.worker", str(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    deadline = time.monotonic() + 120
    csv_path = tmp_path / "requests.csv"
    while time.monotonic() < deadline and (not csv_path.exists() or csv_path.read_text().count("\n") < 5):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    for _ in range(40):  # (the first SIGINT, then more while it ends)
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGINT)
        time.sleep(0.005)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert json.loads((tmp_path / "worker.json").read_text())["status"] == "interrupted"
