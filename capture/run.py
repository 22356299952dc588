"""``capture()``: one run of the HSTU workload under a profiler, as a run folder, ingested.

A run folder ``<out_dir>/<utc>-bs<bs>-nc<nc>-<tool>/`` holds:

* ``meta.json``: name, tool, params, the exact command, the profiler commands, the
  workload config, versions, GPU and clocks as found, git commit, start/finish times,
  status (``ok`` | ``failed`` | ``interrupted``) and error, latency statistics;
* ``spec.json`` (what the workload process ran) and ``worker.json`` (what it reported);
* ``capture.log``: the workload's and profiler's output, one line per request;
* ``requests.csv``: one row per request (warm-up and timed);
* nsys: ``nsys.nsys-rep`` and ``nsys.sqlite``; ncu: ``ncu.ncu-rep``, ``ncu_raw.csv``,
  ``ncu_details.csv``.

``meta.json`` is written before the workload starts with status ``failed`` and error
"did not finish", so a folder left by a killed process is labelled; it is rewritten
when the run ends, then the folder is ingested (not for interrupted runs, nor for runs
stopped at their ``--timeout``; ingest those with ``tracekit ingest FOLDER`` if wanted).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracekit.errors import CaptureError, Interrupted, TracekitError
from tracekit.names import check_run_name

from . import profilers, runinfo
from .config import (
    check_kernel_regex,
    check_replay_mode,
    check_settings,
    check_size,
    check_timeout,
    validate_params,
    workload_config,
)
from .worker import TRACEBACK_MARK

DEFAULT_WARMUP_MS = 2000.0
DEFAULT_ITERS = 50
#: why the HSTU workload does not take ncu's application replay (a program of yours does):
#: on the H200 (ncu 2025.3.1, small preset, bs 2, nc 128) ncu ran the workload 33 times as its
#: passes, failed to profile the embedding's gather kernel in the 34th and then did not exit
HSTU_APP_REPLAY = ("--replay-mode application: for a program of yours (tracekit capture --tool ncu --replay-mode "
                   "application -- CMD); the HSTU workload takes kernel replay only (under application replay ncu "
                   "2025.3.1 failed to profile its vectorized_gather_kernel in the 34th of 36 passes on an H200, "
                   "then hung)")
LOG = "capture.log"
#: seconds a stopped program (Ctrl-C, --timeout) has after SIGINT to write its files and end
#: (nsys writes its report and SQLite export then) before it is killed
STOP_GRACE_S = 30.0
#: seconds a process the program started (the program under a profiler) may outlive it
#: once stopped, before it is killed: a stopped capture leaves no process behind
ORPHAN_GRACE_S = 5.0


def _utc_stamp(now: datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"


def _iso(now: datetime) -> str:
    return now.isoformat(timespec="milliseconds")


def default_preset() -> str:
    return "large" if runinfo.has_gpu() else "small"


def check_gpu(tool: str, device: str) -> None:
    """The HSTU workload under nsys or ncu runs on a GPU: on the CPU (``device`` cpu, or
    ``auto`` on a machine without a GPU) the profiler would record no GPU work, after the
    whole workload ran. A one-line error before anything runs."""
    if tool not in ("nsys", "ncu"):
        return
    if device == "cpu":
        raise CaptureError(f"device cpu: --tool {tool} profiles the workload's GPU work and on the CPU there is "
                           "none; use --tool none to time the workload on the CPU")
    if not runinfo.has_gpu():
        raise CaptureError(f"--tool {tool} profiles the workload's GPU work and this machine has no GPU (none that "
                           "nvidia-smi lists or PyTorch sees); capture on a GPU machine, or use --tool none to time "
                           "the workload on the CPU")


def check_tiles_file() -> None:
    """The kernels' tuning file ($TRACEKIT_TILES), where there is one, can be used: one that
    cannot (not JSON, say) fails the workload's first kernel call on a GPU. A capture refuses
    it whatever its device and backend, in one line before anything runs: the run records the
    file as one of its settings (runinfo.settings)."""
    from tracekit.kernels.tiles import TilesFileError, read_file

    try:
        read_file()
    except TilesFileError as err:
        raise CaptureError(str(err)) from None


def run_folder_name(bs: int, nc: int, tool: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{_utc_stamp(now)}-bs{bs}-nc{nc}-{tool}"


def check_out(out_dir: str | os.PathLike) -> Path:
    """``--out``, the folder run folders go into: a file, or a run folder itself (its
    meta.json: a second run in it would leave neither ingestible), is a one-line error."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CaptureError(f"--out {out}: is a file; name the folder the run folders go into")
    if (out / "meta.json").is_file():
        raise CaptureError(f"--out {out}: is a run folder (it holds meta.json); name the folder the run folders go "
                           "into (its parent)")
    return out


def new_run_dir(out_dir: str | os.PathLike, run_name: str) -> Path:
    """``<out_dir>/<run_name>``, created; a name that is no plain folder name or that no
    run can have (``check_run_name``), an ``--out`` that cannot take run folders
    (``check_out``), or a folder that exists, is a one-line error."""
    check_out(out_dir)
    if "/" in run_name or run_name in ("", ".", ".."):
        raise CaptureError(f"run name {run_name!r}: must be a plain folder name")
    try:
        check_run_name(run_name)  # the name the run will have in the store
    except TracekitError as err:
        raise CaptureError(f"run name: {err}") from None
    run_dir = Path(out_dir) / run_name
    if run_dir.exists():
        raise CaptureError(f"run folder {run_dir} already exists; remove it or choose another name")
    try:
        run_dir.mkdir(parents=True)
    except OSError as err:
        raise CaptureError(f"cannot create run folder {run_dir}: {err.strerror or err}") from err
    return run_dir


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


#: the workload's line per request (``[timed 12] KV Caches: ...``) and its closing
#: latency line: in capture.log, not on the console (a progress bar and one summary are)
_REQUEST_LINE = re.compile(r"^\[(warmup|timed) \d+\] ")
_WORKER_STATS = "timed requests: "


class _Console:
    """What the console shows while the workload runs: its other output (the workload's
    settings, the profiler's messages, errors) as it comes, and in place of a line per
    request one progress bar over the timed requests, drawn only when stderr is a
    terminal (nothing otherwise). The summary is printed once, after the run."""

    def __init__(self, iters: int):
        self.iters, self.timed, self.warmup, self.bar = iters, 0, 0, None

    def __enter__(self):
        from tracekit.progress import progress_bar

        self.bar = progress_bar()
        if self.bar is not None:
            self.task = self.bar.add_task("warm-up", total=self.iters)
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()

    def line(self, line: str) -> None:
        m = _REQUEST_LINE.match(line)
        if m:
            if m[1] == "timed":
                self.timed += 1
            else:
                self.warmup += 1
            if self.bar is not None:
                what = "timed requests" if self.timed else f"warm-up ({self.warmup} requests)"
                self.bar.update(self.task, description=what, completed=self.timed)
        elif not line.startswith((_WORKER_STATS, TRACEBACK_MARK)):
            if self.bar is not None:  # above the bar
                self.bar.console.print(line.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
            else:
                print(line, end="", flush=True)


def _stream(argv: list[str], log, echo: bool, timeout_s: float | None,
            env: dict | None = None, iters: int = 0) -> int:
    """Run ``argv``, copying its stdout+stderr to ``log``; when ``echo``, the console
    shows it less the per-request lines, with a progress bar over the ``iters`` timed
    requests (``_Console``)."""
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1, env=env)
    except OSError as err:
        raise CaptureError(f"cannot start {argv[0]}: {err.strerror or err}") from err
    console = _Console(iters) if echo else None

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            if console is not None:
                console.line(line)

    with console or contextlib.nullcontext():
        return wait(proc, [threading.Thread(target=pump, daemon=True)], timeout_s)


def wait(proc: subprocess.Popen, pumps: list[threading.Thread], timeout_s: float | None) -> int:
    """``proc``'s exit status, its output copied by the ``pumps`` (threads, started here)
    meanwhile; this thread waits with the deadline ``timeout_s``. A Ctrl-C or the deadline
    (``subprocess.TimeoutExpired``): the program is stopped (``stop``; its whole tree where no
    terminal told it: at the deadline, or after a SIGTERM or SIGHUP); the exception goes on."""
    from tracekit.interrupts import terminated

    try:
        for t in pumps:  # (inside: a Ctrl-C as one starts stops the program too)
            t.start()
        rc = proc.wait(timeout=timeout_s)
    except BaseException as exc:
        if proc.poll() is None:
            stop(proc, whole_tree=isinstance(exc, subprocess.TimeoutExpired) or terminated())
        raise
    finally:
        for t in pumps:
            if t.ident is not None:  # (started)
                t.join(timeout=10)  # (the rest of its output: the pipes end with the program)
    return rc


def stop(proc: subprocess.Popen, whole_tree: bool) -> None:
    """Stop ``proc`` and what it started: SIGINT, ``STOP_GRACE_S`` to write its files and end,
    then killed; a process it started (in its process group: the program a profiler runs,
    not a daemon of its own session) still running ``ORPHAN_GRACE_S`` after it ended is
    killed. ``whole_tree``: those processes are sent the SIGINT too, as a Ctrl-C in their
    terminal does (at a deadline nothing else has told them; after a Ctrl-C the terminal has)."""
    tree: dict[int, Any] = {}  # pid -> psutil.Process: every one seen while proc ran

    def look() -> list:
        """The processes of proc's tree not seen before (it may start more as it stops:
        ncu's application replay starts a program per pass)."""
        new = [p for p in _process_tree(proc.pid) if p.pid not in tree]
        tree.update((p.pid, p) for p in new)
        return new

    def interrupt(procs: list) -> None:
        for p in procs:
            with contextlib.suppress(OSError, _psutil_error()):
                p.send_signal(signal.SIGINT)

    first = look()
    interrupt([proc, *first] if whole_tree else [proc])
    deadline = time.monotonic() + STOP_GRACE_S
    while proc.poll() is None and time.monotonic() < deadline:
        new = look()
        if whole_tree:  # (a program started meanwhile is told too)
            interrupt(new)
        time.sleep(0.05)
    if proc.poll() is None:
        look()
        proc.kill()
    proc.wait()
    alive = _still_running(list(tree.values()), ORPHAN_GRACE_S)
    for p in alive:
        with contextlib.suppress(_psutil_error()):
            p.kill()
    _still_running(alive, 5.0)  # (a SIGKILL ends a process a moment later: ended when this returns)


def _still_running(procs: list, seconds: float) -> list:
    """Those of ``procs`` (``psutil.Process``) still running after waiting up to ``seconds``
    for them to end (a zombie has ended)."""
    deadline = time.monotonic() + seconds
    while (alive := [p for p in procs if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive


def _psutil_error() -> type[Exception]:
    import psutil

    return psutil.Error


def _process_tree(pid: int) -> list:
    """The processes ``pid`` started, at any depth, that are in its process group
    (``psutil.Process`` objects; none where it has ended)."""
    import psutil

    try:
        group = os.getpgid(pid)
        children = psutil.Process(pid).children(recursive=True)
    except (OSError, psutil.Error):
        return []
    out = []
    for p in children:
        with contextlib.suppress(OSError):
            if os.getpgid(p.pid) == group:
                out.append(p)
    return out


def _running(p) -> bool:
    """Whether the ``psutil.Process`` is still running (a zombie has ended)."""
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _profiler_error(log_path: Path) -> str | None:
    """The profiler's first error line in the capture's log (``==ERROR== ...``, as nsys and
    ncu print them), if any."""
    try:
        with open(log_path, errors="replace") as f:
            return next((ln.strip()[:300] for ln in f if ln.startswith("==ERROR==")), None)
    except OSError:
        return None


def _last_error_line(log_path: Path) -> str | None:
    try:
        lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return None
    for ln in reversed(lines):
        if "error" in ln.lower() or "failed" in ln.lower():
            return ln[:300]
    return lines[-1][:300] if lines else None


def capture(bs: int, nc: int, tool: str = "nsys", preset: str | None = None,
            warmup_ms: float | None = None, iters: int | None = None,
            out_dir: str | os.PathLike = "runs", db: str | os.PathLike | None = None, *,
            name: str | None = None, workload: dict[str, Any] | None = None,
            device: str = "auto", flush_l2: bool = True, ingest: bool = True,
            echo: bool = False, command: list[str] | None = None,
            extra_params: dict[str, Any] | None = None, ncu_launch_skip: int = 0,
            ncu_launch_count: int | None = None, ncu_kernel_classes: list[str] | None = None,
            ncu_kernel_regex: str | None = None,
            timeout_s: float | None = None, gpu_metrics: bool = False,
            replay_mode: str | None = None, cpu_samples: bool = False, cuda_memory_usage: bool = False,
            cuda_backtrace: bool = False, python_samples: bool = False) -> Path:
    """Run the HSTU workload at (``bs``, ``nc``) under ``tool`` and return its run folder.

    ``tool``: ``nsys`` (timed requests inside a cudaProfilerStart/Stop capture range,
    exported to SQLite), ``ncu`` (the embedding / GEMM / attention kernels of one
    steady-state request, or those whose function name matches ``ncu_kernel_regex`` ('.':
    every kernel; the headroom of each, kernel-headroom), roofline + occupancy + launch-stats
    sections, raw and details CSV) or ``none`` (timing only); ``gpu_metrics``: under nsys, the GPU's counters sampled
    too, ``cpu_samples``: the CPU sampled with call stacks, ``cuda_memory_usage``: every
    allocation and free of GPU memory recorded, ``cuda_backtrace``: the CUDA API calls' call
    stacks, native and Python, ``python_samples``: the Python threads' stacks sampled
    (``nsys_argv``). ``replay_mode``
    (ncu only): ``kernel``, the default and the only mode the workload takes
    (``HSTU_APP_REPLAY``). ``warmup_ms`` and ``iters`` default to
    ``DEFAULT_WARMUP_MS`` and ``DEFAULT_ITERS``. ``preset`` defaults to ``large``
    with a GPU and ``small`` without. ``workload`` overrides preset fields (tests use tiny
    models). ``timeout_s``: the profiler and the workload are stopped (``stop``) when they
    run longer, the run is failed with "timed out after N s" and not ingested. The folder
    is ingested into ``db`` ($TRACEKIT_DB or ./tracekit.duckdb) unless ``ingest`` is False.
    Raises ``CaptureError``/``ToolNotFoundError`` with one line; a failed run still leaves
    (and, unless it timed out, ingests) its labelled folder.
    """
    bs, nc, tool, preset, warmup_ms, iters = validate_params(
        bs, nc, tool, preset, DEFAULT_WARMUP_MS if warmup_ms is None else warmup_ms,
        DEFAULT_ITERS if iters is None else iters)
    replay_mode = check_replay_mode(replay_mode, tool)
    if replay_mode == "application":
        raise CaptureError(HSTU_APP_REPLAY)
    timeout_s = check_timeout(timeout_s)
    check_settings(device, flush_l2, ncu_launch_skip, ncu_launch_count)
    for flag, value, what in (("gpu_metrics", gpu_metrics, "samples the GPU's counters"),
                              ("cpu_samples", cpu_samples, "samples the CPU"),
                              ("cuda_memory_usage", cuda_memory_usage, "records the GPU memory's allocations"),
                              ("cuda_backtrace", cuda_backtrace, "unwinds the CUDA API calls"),
                              ("python_samples", python_samples, "samples the Python threads' stacks")):
        if not isinstance(value, bool):
            raise CaptureError(f"{flag} {value!r}: must be true or false")
        if value and tool != "nsys":
            raise CaptureError(f"--{flag.replace('_', '-')}: nsys {what}; --tool {tool} does not (use --tool nsys)")
    check_kernel_regex(ncu_kernel_regex)
    if ncu_kernel_regex is not None and tool != "ncu":
        raise CaptureError(f"--kernel-name: an option of --tool ncu, not of --tool {tool}")
    if ncu_kernel_regex is not None and ncu_kernel_classes is not None:
        raise CaptureError("--kernel-name and kernel classes: give one")
    exe = profilers.find_tool(tool) if tool != "none" else None
    check_gpu(tool, device)
    kernel_regex = ncu_kernel_regex or profilers.ncu_kernel_regex(ncu_kernel_classes) if tool == "ncu" else None
    preset = preset or default_preset()
    cfg = workload_config(preset, **(workload or {}))
    check_size(bs, nc, cfg)
    if ingest:  # a store that cannot take the run is found before the workload runs, not after
        from tracekit.store import check_ingest_target

        check_ingest_target(db)
    check_tiles_file()

    started = datetime.now(UTC)
    run_dir = new_run_dir(out_dir, name if name is not None else run_folder_name(bs, nc, tool, started))
    run_name = run_dir.name

    spec = {"bs": bs, "nc": nc, "tool": tool, "warmup_ms": warmup_ms, "iters": iters,
            "flush_l2": flush_l2, "device": device, "workload": cfg.to_dict()}
    spec_path = run_dir / "spec.json"
    _write_json(spec_path, spec)
    worker_cmd = [sys.executable, "-m", "tracekit.capture.worker", str(spec_path)]
    if tool == "nsys":
        argv = profilers.nsys_argv(exe, run_dir / "nsys", worker_cmd, gpu_metrics=gpu_metrics, cpu_samples=cpu_samples,
                                   cuda_memory_usage=cuda_memory_usage, cuda_backtrace=cuda_backtrace,
                                   python_samples=python_samples)
    elif tool == "ncu":
        argv = profilers.ncu_argv(exe, run_dir / "ncu", worker_cmd, kernel_regex=kernel_regex,
                                  launch_skip=ncu_launch_skip, launch_count=ncu_launch_count,
                                  replay_mode=replay_mode)
    else:
        argv = worker_cmd
    tool_versions = {"nsys": None, "ncu": None}
    if exe is not None:
        tool_versions[tool] = profilers.tool_version(exe)

    params = {"bs": bs, "nc": nc, "preset": preset, "tool": tool, "warmup_ms": warmup_ms,
              "iters": iters, "flush_l2": flush_l2, "device": device, **(extra_params or {}),
              **({"gpu_metrics": True} if gpu_metrics else {}),
              **({"cpu_samples": True} if cpu_samples else {}),
              **({"cuda_memory_usage": True} if cuda_memory_usage else {}),
              **({"cuda_backtrace": True} if cuda_backtrace else {}),
              **({"python_samples": True} if python_samples else {}),
              **({"replay_mode": replay_mode} if replay_mode is not None else {}),
              **({"kernel_regex": ncu_kernel_regex} if ncu_kernel_regex is not None else {})}
    meta: dict[str, Any] = {
        "name": run_name,
        "tool": tool,
        "params": params,
        "command": list(command) if command is not None else list(sys.argv),
        "profiler_commands": [argv],
        "workload": cfg.to_dict(),
        "versions": runinfo.versions(**tool_versions),
        "gpu": runinfo.gpu_info(),
        "git_commit": runinfo.git_commit(),
        "settings": runinfo.settings(),
        "started_at": _iso(started),
        "finished_at": None,
        "status": "failed",
        "error": "did not finish (the capture process was killed?)",
    }
    if tool == "ncu":
        meta["ncu"] = {"nvtx_range": profilers.NCU_RANGE, "kernel_regex": kernel_regex,
                       "kernel_classes": None if ncu_kernel_regex is not None else {
                           c: profilers.NCU_KERNEL_CLASSES[c] for c in (ncu_kernel_classes or profilers.NCU_KERNEL_CLASSES)},
                       "launch_skip": ncu_launch_skip, "launch_count": ncu_launch_count,
                       "replay_mode": replay_mode, "sections": list(profilers.NCU_SECTIONS)}
    _write_json(run_dir / "meta.json", meta)

    env = dict(os.environ)
    with recorded(run_dir, meta, timeout_s, finish=lambda m: m.update(_from_worker(_read_worker(run_dir)))) as out:
        with open(run_dir / LOG, "a", encoding="utf-8") as log:
            rc = _stream(argv, log, echo, timeout_s, env, iters)
            worker = _read_worker(run_dir)
            if rc == 0 and worker.get("status") == "ok":
                out.status, out.error = "ok", None
            else:
                error = worker.get("error") or _last_error_line(run_dir / LOG) or f"exit status {rc}"
                out.error = f"{tool if tool != 'none' else 'workload'} exited with status {rc}: {error}"
            # (a failed workload's report is exported too, as nsys itself would: `tracekit ingest` takes it)
            if tool == "nsys" and (out.status == "ok" or (run_dir / "nsys.nsys-rep").exists()):
                error = _nsys_export(exe, run_dir, log, meta)
                if error and out.status == "ok":
                    out.status, out.error = "failed", error
            if out.status == "ok" and tool == "ncu":
                out.error = _ncu_exports(exe, run_dir, log, meta)
                if out.error:
                    out.status = "failed"
    status, error = out.status, out.error
    ingest_error = None
    if ingest and not out.timed_out:  # (a run stopped at its deadline is not ingested: tracekit ingest takes it)
        ingest_error = _ingest(run_dir, db, required=(status == "ok"))
    if status != "ok":
        raise CaptureError(f"capture failed ({error}); partial results in {run_dir}", run_dir)
    if ingest_error:
        raise CaptureError(f"run folder {run_dir} written, but ingest failed: {ingest_error}", run_dir)
    return run_dir


@dataclass
class Outcome:
    """How a capture ended, as meta.json says it: ``failed`` until the capture says ``ok``;
    ``timed_out``: stopped at its deadline."""

    status: str = "failed"
    error: str | None = None
    timed_out: bool = False


@contextlib.contextmanager
def recorded(run_dir: Path, meta: dict, timeout_s: float | None, finish=None):
    """The block runs the capture; its ``Outcome`` (yielded, set by the block) is written into
    meta.json however the block ends: a Ctrl-C as ``interrupted`` (then raised as
    ``Interrupted``, naming the run folder), the deadline or a tracekit error as ``failed``
    with the reason. ``finish(meta)`` adds what the run left (the workload's report) before
    the write."""
    out = Outcome()
    try:
        yield out
    except KeyboardInterrupt:
        out.status, out.error = "interrupted", "interrupted by the user"
    except subprocess.TimeoutExpired:
        said = _profiler_error(run_dir / LOG)  # (ncu may not exit after a pass it failed)
        out.status, out.timed_out = "failed", True
        out.error = f"timed out after {timeout_s:g} s" + (f", after the profiler said: {said}" if said else "")
    except TracekitError as err:
        out.status, out.error = "failed", str(err)
    finally:
        if finish is not None:
            finish(meta)
        meta["finished_at"] = _iso(datetime.now(UTC))
        meta["status"], meta["error"] = out.status, out.error
        _write_json(run_dir / "meta.json", meta)
    if out.status == "interrupted":
        raise Interrupted(f"capture interrupted; its run folder {run_dir} says so, nothing ingested", run_dir)


def _read_worker(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "worker.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _from_worker(worker: dict) -> dict:
    """The workload process's report, as meta.json fields."""
    out: dict[str, Any] = {}
    if not worker:
        return out
    out["device"] = worker.get("device")
    out["attention_backend"] = worker.get("attention_backend")
    if worker.get("attention_kernel"):
        out["attention_kernel"] = worker["attention_kernel"]
    out["dtype"] = worker.get("dtype")
    if worker.get("stats"):
        out["latency"] = {**worker["stats"], "peak_mem_allocated_mb": worker.get("peak_mem_allocated_mb"),
                          "warmup_requests": worker.get("warmup_requests")}
    if worker.get("gpu_timed"):  # (the GPU's clocks, temperature, power as the timed requests ran: nvml.summary)
        out["gpu_timed"] = worker["gpu_timed"]
    if worker.get("ncu_profiled_request_idx") is not None:
        out["ncu_profiled_request_idx"] = worker["ncu_profiled_request_idx"]
    out["runtime"] = {k: worker.get(k) for k in ("torch", "triton", "cuda", "gpu_name", "build_s")}
    return out


def _nsys_export(nsys: str, run_dir: Path, log, meta: dict, why: str = "") -> str | None:
    """Export the run's nsys report to ``nsys.sqlite``, with its NVTX payloads (the Python
    stacks: ``tracekit.ingest.nsysrep.export_sqlite``); the error, or None. ``why``: what to add
    to the error where nsys wrote no report."""
    from tracekit.ingest.nsysrep import export_sqlite, last_line

    report = run_dir / "nsys.nsys-rep"
    if not report.exists():
        return f"nsys wrote no report (nsys.nsys-rep){why}; see capture.log"
    try:
        argv, res = export_sqlite(nsys, report, run_dir / "nsys.sqlite", timeout=600)
    except (OSError, subprocess.SubprocessError) as err:
        return f"nsys export failed: {err}"
    meta["profiler_commands"].append(argv)
    log.write(f"$ {' '.join(argv)}\n{res.stdout}{res.stderr}")
    log.flush()
    if res.returncode != 0 or not (run_dir / "nsys.sqlite").exists():
        return f"nsys export exited with status {res.returncode}: {last_line(res)[:200]}"
    return None


def _ncu_exports(ncu: str, run_dir: Path, log, meta: dict) -> str | None:
    report = run_dir / "ncu.ncu-rep"
    if not report.exists():
        return "ncu wrote no report (ncu.ncu-rep): no kernel matched the filters? see capture.log"
    for fname, argv in profilers.ncu_export_argvs(ncu, report).items():
        meta["profiler_commands"].append(argv)
        log.write(f"$ {' '.join(argv)} > {fname}\n")
        log.flush()
        with open(run_dir / fname, "w", encoding="utf-8") as out:
            try:
                res = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True, timeout=600)
            except (OSError, subprocess.SubprocessError) as err:
                return f"ncu export {fname} failed: {err}"
        if res.returncode != 0:
            log.write(res.stderr)
            return f"ncu export {fname} exited with status {res.returncode}: {res.stderr.strip()[:200]}"
    return None


def _ingest(run_dir: Path, db, required: bool) -> str | None:
    """Ingest the folder; returns the error message (None on success). A failed run's
    folder is ingested when it has anything to ingest. A Ctrl-C is raised as it came
    (``Interrupted``, saying what of the folder is in the store): it stops the command, and a
    sweep, rather than being one more failed ingest."""
    import tracekit

    if not required and not _has_rows(run_dir / "requests.csv"):
        return None
    try:
        with tracekit.open(db) as tk:
            tk.ingest(run_dir)
    except Interrupted as err:
        err.run_dir = err.run_dir or str(run_dir)  # (the folder whole, its ingest cut: a sweep's manifest names it)
        raise
    except TracekitError as err:
        return str(err)
    except Exception as err:  # a store bug must not lose the run folder
        return f"{type(err).__name__}: {err}".splitlines()[0]
    return None


def _has_rows(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for _ in f) > 1
    except OSError:
        return False


def summary(run_dir: str | os.PathLike, db: str | os.PathLike | None = None, top: int = 5) -> str:
    """A short text summary of a run: latency statistics, and from the store (nsys runs)
    the top kernels and each NVTX range's share of request time, (ncu runs) the kernels
    profiled."""
    run_dir = Path(run_dir)
    meta = json.loads((run_dir / "meta.json").read_text())
    p = meta["params"]
    lines = [f"run {meta['name']}  status {meta['status']}  preset {p['preset']}  bs {p['bs']}  "
             f"nc {p['nc']}  tool {meta['tool']}  device {meta.get('device')}  "
             f"gpu {meta['gpu'].get('name') or 'none'}  attention {meta.get('attention_backend')}"
             + (f" ({meta['attention_kernel']})" if meta.get("attention_kernel") else "")]
    if meta.get("error"):
        lines.append(f"error: {meta['error']}")
    lat = meta.get("latency")
    if lat and lat.get("requests"):
        peak = lat.get("peak_mem_allocated_mb")
        lines.append(
            f"latency over {lat['requests']} timed requests: median {lat['median_ms']:.3f} ms  "
            f"p95 {lat['p95_ms']:.3f} ms  p99 {lat['p99_ms']:.3f} ms  min {lat['min_ms']:.3f} ms"
            + (f"  peak memory {peak:.0f} MB" if peak is not None else ""))

    def from_store(tk, found: int | None) -> list[str]:
        run = str(found) if found is not None else meta["name"]
        if meta["tool"] == "nsys":
            return _nsys_summary(tk, run, top) + _headroom_summary(tk, found, "ncu", top)
        return _ncu_summary(tk, run, top) + _headroom_summary(tk, found, "nsys", top) if meta["tool"] == "ncu" else []

    return "\n".join(lines + stored_lines(run_dir, db, from_store))


def stored_lines(run_dir: Path, db: str | os.PathLike | None,
                 lines: Callable[[Any, int | None], list[str]]) -> list[str]:
    """What ``lines(tk, run id)`` says of the run a folder became in the store (found by the
    folder's path: its name is qualified, runs/NAME, where another run had it; None where the
    store does not hold it), the store opened read-only; nothing where no store is named or
    found, the store's error as one line."""
    if db is None and not os.environ.get("TRACEKIT_DB") and not Path("tracekit.duckdb").exists():
        return []
    import tracekit

    try:
        with tracekit.open(db, read_only=True) as tk:
            return lines(tk, run_of_folder(tk.con, run_dir))
    except TracekitError as err:
        return [f"(store: {err})"]


def run_of_folder(con, run_dir: str | os.PathLike) -> int | None:
    """The id of the run a run folder became in the store (the latest ingest of its path), or None."""
    return con.execute("SELECT max(run_id) FROM runs WHERE source_path = ?", [str(Path(run_dir).resolve())]).fetchall()[0][0]


def _nsys_summary(tk, run: str, top: int) -> list[str]:
    out = []
    kern = tk.query("top-kernels", run=run, limit=top)
    if kern.height:
        out.append("top kernels (time %, total ms, instances):")
        for r in kern.iter_rows(named=True):
            out.append(f"  {r['time_pct']:5.1f}%  {r['total_ns'] / 1e6:9.3f}  {r['instances']:6d}  {r['name'][:90]}")
    nvtx = tk.query("nvtx-summary", run=run, limit=0)
    if nvtx.height:
        req = nvtx.filter(nvtx["range"].str.ends_with(":hstu.request"))
        total = float(req["total_ns"].sum()) if req.height else float(nvtx["total_ns"].max())
        out.append("NVTX ranges (share of hstu.request time):")
        for r in nvtx.iter_rows(named=True):
            if r["range"].endswith(":hstu.request"):
                continue
            out.append(f"  {100 * r['total_ns'] / total:5.1f}%  {r['range']}  x{r['instances']}")
    return out


def _headroom_summary(tk, run_id: int | None, other: str, top: int) -> list[str]:
    """Where tuning can save time (kernel-headroom), where the store holds a run of this run's
    workload under the ``other`` profiler (nsys beside an ncu run, ncu beside an nsys run)."""
    from tracekit.diff import same_workload
    from tracekit.errors import QueryError

    found = None if run_id is None else same_workload(tk.con, run_id, other)
    if found is None:
        return []
    nsys, ncu = (run_id, found) if other == "ncu" else (found, run_id)
    try:
        rows = tk.query("kernel-headroom", run=nsys, ncu=ncu, limit=top)
    except QueryError as err:  # (an ncu run of the workload that profiled none of its kernels)
        return [str(err)]
    return [f"where tuning can save time (nsys run {nsys} beside ncu run {ncu}; tracekit query kernel-headroom): "
            "headroom % of kernel time, speed of light %, bottleneck:", *headroom_lines(rows, top)]


def headroom_lines(rows, top: int, indent: str = "  ") -> list[str]:
    """The first ``top`` rows of kernel-headroom with a headroom, one line each: headroom % of
    the kernel time, speed of light %, bottleneck, name."""
    rows = rows.filter(rows["headroom_ns"].is_not_null()).head(top)
    return [f"{indent}{r['headroom_pct']:5.1f}%  {r['sol_pct']:5.1f}%  {r['bottleneck']:10s}  {r['name'][:90]}"
            for r in rows.iter_rows(named=True)]


def _ncu_summary(tk, run: str, top: int) -> list[str]:
    rows = tk.sql(
        "SELECT k.kernel_id, k.name, k.nvtx_range FROM ncu_kernels k JOIN runs r USING (run_id) "
        "WHERE r.run_id = (SELECT max(run_id) FROM runs WHERE name = $run OR run_id::VARCHAR = $run) "
        "ORDER BY k.kernel_id",
        {"run": run})
    if not rows.height:
        return ["ncu: no kernel launch profiled"]
    out = [f"ncu profiled {rows.height} kernel launches (id, NVTX range, kernel):"]
    for r in rows.head(top * 6).iter_rows(named=True):
        out.append(f"  {r['kernel_id']:4d}  {str(r['nvtx_range'])[:18]:18s}  {str(r['name'])[:90]}")
    return out
