"""``capture_command()``: any program (``python my_bench.py --bs 8``) under nsys, ncu or
none, as a run folder, ingested: ``tracekit capture --tool nsys|ncu|none [OPTIONS] -- CMD``.

A run folder ``<out_dir>/<utc>-<program stem>-<tool>/`` holds, as the HSTU capture's does:

* ``meta.json``: name, tool, params (``tool``, ``program`` and the profiler options given,
  under ncu its launch cap and replay mode always, then the user's ``--param K=V``), the
  ``ncu`` settings (under ncu), the tracekit command, the program's command
  (``program``: argv, the executable found, the working folder), the exact profiler
  commands, versions, GPU and clocks as found, git commit, the tracekit settings,
  start/finish times, status (``ok`` | ``failed`` | ``interrupted``), error and the
  program's exit code;
* ``capture.log``: the profiler's command, then the program's and the profiler's output;
* nsys: ``nsys.nsys-rep`` and ``nsys.sqlite``; ncu: ``ncu.ncu-rep``, ``ncu_raw.csv``,
  ``ncu_details.csv``; none: nothing more (no timed requests: nothing to ingest).

``meta.json`` is written before the program starts with status ``failed`` and error
"did not finish", then rewritten when it ends. A run is ``ok`` when the program and the
profiler exited with status 0 and the profiler wrote its export; only an ok nsys or ncu
run is ingested (a failed run's export, if any, stays in its folder: ``tracekit ingest
FOLDER`` takes it, labelled failed).
"""

from __future__ import annotations

import collections
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracekit.errors import CaptureError, TracekitError

from . import profilers, runinfo
from .config import TOOLS, check_kernel_regex, check_replay_mode, check_timeout
from .run import (
    LOG,
    _iso,
    _ncu_exports,
    _nsys_export,
    _utc_stamp,
    _write_json,
    new_run_dir,
    recorded,
    stored_lines,
    wait,
)

#: params tracekit sets itself; a ``--param`` may not take these names
RESERVED_PARAMS = ("tool", "program", "capture_range", "nvtx_capture", "kernel_regex", "launch_count",
                   "gpu_metrics", "um_faults", "cpu_samples", "cuda_memory_usage", "cuda_backtrace", "python_samples",
                   "replay_mode")
#: the options of a program's capture that belong to one profiler or two (``capture_command``'s
#: argument -> its flag, the profilers that take it): refused under another; a sweep under several
#: profilers gives each its own (``own_options``)
PROFILER_OPTIONS = {"capture_range": ("--capture-range", ("nsys",)), "gpu_metrics": ("--gpu-metrics", ("nsys",)),
                    "um_faults": ("--um-faults", ("nsys",)), "cpu_samples": ("--cpu-samples", ("nsys",)),
                    "cuda_memory_usage": ("--cuda-memory-usage", ("nsys",)),
                    "cuda_backtrace": ("--cuda-backtrace", ("nsys",)), "python_samples": ("--python-samples", ("nsys",)),
                    "kernel_regex": ("--kernel-name", ("ncu",)), "launch_count": ("--launch-count", ("ncu",)),
                    "replay_mode": ("--replay-mode", ("ncu",)), "nvtx_capture": ("--nvtx-capture", ("nsys", "ncu"))}


def option_given(arg: str, value: Any) -> bool:
    """Whether ``value`` of the option ``arg`` asks for anything (None, False and a capture range of
    none do not)."""
    return value is not None and value is not False and not (arg == "capture_range" and value == "none")


def foreign_option(tools: Sequence[str], options: dict[str, Any], said: dict[str, str] | None = None) -> str | None:
    """The refusal of the first option given in ``options`` (``capture_command``'s arguments) that
    none of ``tools`` takes, the option named as ``said`` names it (default: its flag); None where
    each is one's."""
    for arg, (flag, takes) in PROFILER_OPTIONS.items():
        if option_given(arg, options.get(arg)) and not set(tools) & set(takes):
            return f"{(said or {}).get(arg, flag)}: an option of --tool {' or '.join(takes)}, not of --tool {','.join(tools)}"
    return None


def own_options(tool: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with those ``tool`` does not take left unset (another profiler's)."""
    return {k: v if k not in PROFILER_OPTIONS or tool in PROFILER_OPTIONS[k][1] else False if isinstance(v, bool)
            else None for k, v in options.items()}


#: how ncu reports the program's own exit status (2025.3.1 then exits with it too, as nsys
#: does; the line is read in case a profiler's own status differs)
_PROGRAM_EXIT = (re.compile(r"==ERROR== The application returned an error code \((-?\d+)\)"),)
#: lines the profilers print on stderr: never the program's error
_PROFILER_LINE = re.compile(
    r"^(==[A-Z]+==|Generating '|Processing \[|Exporting |Exported successfully|Saved report file|Collecting data"
    r"|Capture range |The target application |WARNING: |\[\d+/\d+\]|Failed to create '|Use the '--force-overwrite')")


def parse_params(pairs: list[str] | None) -> dict[str, str]:
    """``K=V`` pairs (``--param``, repeatable) as a dict, the values as text (as ``tracekit
    ingest --param`` takes them); a name given twice with two values, an empty name or one
    tracekit sets itself (``RESERVED_PARAMS``) is a one-line error."""
    out: dict[str, str] = {}
    for p in pairs or []:
        if not isinstance(p, str) or "=" not in p:
            raise CaptureError(f"--param {p!r}: expected NAME=VALUE")
        k, v = p.split("=", 1)
        k = k.strip()
        if not k:
            raise CaptureError(f"--param {p!r}: expected NAME=VALUE (the name is empty)")
        if k in RESERVED_PARAMS:
            raise CaptureError(f"--param {k}: tracekit sets {k} itself ({', '.join(RESERVED_PARAMS)}); "
                               "choose another name")
        if k in out and out[k].strip() != v.strip():
            raise CaptureError(f"--param {k}: given twice ({k}={out[k]}, {k}={v}); give it once")
        out[k] = v
    return out


def program_stem(cmd: list[str]) -> str:
    """What a run of ``cmd`` is named after: a Python program's script (``python
    my_bench.py``: ``my_bench``) or module (``python -m pkg.bench``: ``bench``), else the
    executable's name; in letters, digits, ``.``, ``_`` and ``-``."""
    exe = Path(cmd[0]).name
    stem = exe
    if re.fullmatch(r"python[0-9.]*", exe):
        rest = cmd[1:]
        while rest:
            a = rest.pop(0)
            if a == "-m" and rest:
                stem = rest[0].rsplit(".", 1)[-1]
                break
            if a == "-c":
                break
            if not a.startswith("-"):
                stem = Path(a).stem
                break
    else:
        stem = Path(exe).stem if Path(exe).suffix in (".py", ".sh") else exe
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._-")[:40]
    return stem or "program"


def command_run_name(cmd: list[str], tool: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{_utc_stamp(now)}-{program_stem(cmd)}-{tool}"


def _check(cmd, tool, capture_range, nvtx_capture, kernel_regex, launch_count, gpu_metrics, params,
           replay_mode=None, timeout_s=None, um_faults=False, cpu_samples=False, cuda_memory_usage=False,
           cuda_backtrace=False, python_samples=False) -> str | None:
    """One-line errors for what cannot run, before anything does; the ncu replay mode the
    capture runs (``check_replay_mode``)."""
    if not isinstance(cmd, (list, tuple)) or not cmd or not all(isinstance(a, str) for a in cmd):
        raise CaptureError(f"command {cmd!r}: a program and its arguments (tracekit capture -- CMD [ARGS...])")
    if not cmd[0]:
        raise CaptureError("command: the program's name is empty")
    if tool not in TOOLS:
        raise CaptureError(f"--tool {tool!r}: choose one of {', '.join(TOOLS)}")
    for flag, value in (("gpu_metrics", gpu_metrics), ("um_faults", um_faults), ("cpu_samples", cpu_samples),
                        ("cuda_memory_usage", cuda_memory_usage), ("cuda_backtrace", cuda_backtrace),
                        ("python_samples", python_samples)):
        if not isinstance(value, bool):
            raise CaptureError(f"{flag} {value!r}: must be true or false")
    if capture_range not in profilers.NSYS_CAPTURE_RANGES:
        raise CaptureError(f"--capture-range {capture_range!r}: choose one of "
                           f"{', '.join(profilers.NSYS_CAPTURE_RANGES)} (an NVTX range: --nvtx-capture RANGE)")
    refused = foreign_option([tool], {
        "capture_range": capture_range, "gpu_metrics": gpu_metrics, "um_faults": um_faults, "cpu_samples": cpu_samples,
        "cuda_memory_usage": cuda_memory_usage, "cuda_backtrace": cuda_backtrace, "python_samples": python_samples,
        "kernel_regex": kernel_regex, "launch_count": launch_count, "replay_mode": replay_mode,
        "nvtx_capture": nvtx_capture})
    if refused:
        raise CaptureError(refused)
    if nvtx_capture is not None:
        if not isinstance(nvtx_capture, str) or not nvtx_capture.strip():
            raise CaptureError(f"--nvtx-capture {nvtx_capture!r}: the name of an NVTX range")
        if capture_range != "none":
            raise CaptureError(f"--capture-range {capture_range} and --nvtx-capture: give one")
        if nvtx_capture.endswith("/"):
            raise CaptureError(f"--nvtx-capture {nvtx_capture!r}: give the range's name (the / ncu needs is "
                               "added)")
    check_kernel_regex(kernel_regex)
    if launch_count is not None and (isinstance(launch_count, bool) or not isinstance(launch_count, int)
                                     or launch_count < 1):
        raise CaptureError(f"--launch-count {launch_count!r}: a whole number of kernel launches, at least 1")
    replay_mode = check_replay_mode(replay_mode, tool)
    check_timeout(timeout_s)
    from tracekit.numbers import check_counts

    try:
        check_counts(params, "--param ")
    except TracekitError as err:
        raise CaptureError(str(err)) from None
    return replay_mode


def _find_program(name: str, env: dict) -> str | None:
    """The executable ``name`` runs (a path, or found on the program's PATH), or None."""
    if os.sep in name:
        return str(Path(name).absolute()) if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH", os.defpath))


def capture_command(cmd: list[str], tool: str = "nsys", *, out_dir: str | os.PathLike = "runs",
                    db: str | os.PathLike | None = None, name: str | None = None, ingest: bool = True,
                    echo: bool = False, command: list[str] | None = None, params: dict[str, Any] | None = None,
                    capture_range: str = "none", nvtx_capture: str | None = None,
                    kernel_regex: str | None = None, launch_count: int | None = None,
                    gpu_metrics: bool = False, timeout_s: float | None = None,
                    replay_mode: str | None = None, um_faults: bool = False, cpu_samples: bool = False,
                    cuda_memory_usage: bool = False, cuda_backtrace: bool = False,
                    python_samples: bool = False) -> Path:
    """Run ``cmd`` under ``tool`` and return its run folder (see the module docstring).

    nsys: the whole program (``capture_range`` ``none``), the part between
    cudaProfilerStart and cudaProfilerStop (``cudaProfilerApi``) or the first instance of
    the NVTX range ``nvtx_capture``; ``gpu_metrics``: the GPU's counters sampled too;
    ``um_faults``: Unified Memory's page faults recorded, on the CPU and the GPU;
    ``cpu_samples``: the CPU sampled, with call stacks; ``cuda_memory_usage``: every allocation
    and free of GPU memory recorded; ``cuda_backtrace``: the CUDA API calls' call stacks (and
    their Python stacks, of a Python program); ``python_samples``: the Python threads' stacks
    sampled. ncu:
    the first ``launch_count`` kernel launches (default ``profilers.DEFAULT_LAUNCH_COUNT``)
    inside the NVTX push/pop range ``nvtx_capture`` (if given) whose names match
    ``kernel_regex`` (if given), with the HSTU capture's sections, clocks left alone, each
    launch replayed in place (``replay_mode`` ``kernel``, the default) or the whole program
    run once per pass (``application``: it must launch the same kernels in the same order
    every run). none: the program run and recorded, nothing profiled or ingested.
    ``params``: the run's parameters (``--param``). ``echo``: the program's output shown as
    it comes. ``timeout_s``: the profiler and the program are stopped (``run.stop``) when they
    run longer, and the run is failed with "timed out after N s".
    Raises ``CaptureError``/``ToolNotFoundError`` with one line; a program that cannot be
    found or fails (or a profiler that does) leaves its folder labelled failed, not ingested.
    """
    params = dict(params or {})
    replay_mode = _check(cmd, tool, capture_range, nvtx_capture, kernel_regex, launch_count, gpu_metrics, params,
                         replay_mode, timeout_s, um_faults, cpu_samples, cuda_memory_usage, cuda_backtrace,
                         python_samples)
    cmd = list(cmd)
    bad = sorted(set(params) & set(RESERVED_PARAMS))
    if bad:
        raise CaptureError(f"--param {bad[0]}: tracekit sets {bad[0]} itself; choose another name")
    if tool == "ncu" and launch_count is None:
        launch_count = profilers.DEFAULT_LAUNCH_COUNT
    exe = profilers.find_tool(tool) if tool != "none" else None
    ingest = ingest and tool != "none"  # (a run of no profiler has no requests and no export)
    if ingest:  # a store that cannot take the run is found before the program runs, not after
        from tracekit.store import check_ingest_target

        check_ingest_target(db)

    started = datetime.now(UTC)
    run_dir = new_run_dir(out_dir, name if name is not None else command_run_name(cmd, tool, started))
    if tool == "nsys":
        argv = profilers.nsys_command_argv(exe, run_dir / "nsys", cmd, capture_range=capture_range,
                                           nvtx_capture=nvtx_capture, gpu_metrics=gpu_metrics, um_faults=um_faults,
                                           cpu_samples=cpu_samples, cuda_memory_usage=cuda_memory_usage,
                                           cuda_backtrace=cuda_backtrace, python_samples=python_samples)
    elif tool == "ncu":
        argv = profilers.ncu_command_argv(exe, run_dir / "ncu", cmd, nvtx_capture=nvtx_capture,
                                          kernel_regex=kernel_regex, launch_count=launch_count,
                                          replay_mode=replay_mode)
    else:
        argv = cmd
    env = dict(os.environ)
    found = _find_program(cmd[0], env)

    options = {"capture_range": capture_range if tool == "nsys" and nvtx_capture is None else None,
               "nvtx_capture": nvtx_capture, "kernel_regex": kernel_regex, "launch_count": launch_count,
               "replay_mode": replay_mode, "gpu_metrics": True if gpu_metrics else None,
               "um_faults": True if um_faults else None, "cpu_samples": True if cpu_samples else None,
               "cuda_memory_usage": True if cuda_memory_usage else None,
               "cuda_backtrace": True if cuda_backtrace else None,
               "python_samples": True if python_samples else None}
    run_params = {"tool": tool, "program": program_stem(cmd),
                  **{k: v for k, v in options.items() if v is not None}, **params}
    meta: dict[str, Any] = {
        "name": run_dir.name,
        "tool": tool,
        "params": run_params,
        "command": list(command) if command is not None else list(sys.argv),
        "program": {"argv": cmd, "executable": found, "cwd": os.getcwd()},
        "profiler_commands": [argv] if tool != "none" else [],
        "versions": runinfo.versions(**{t: (profilers.tool_version(exe) if t == tool else None)
                                        for t in ("nsys", "ncu")}),
        "gpu": runinfo.gpu_info(),
        "git_commit": runinfo.git_commit(),
        "settings": runinfo.settings(),
        "started_at": _iso(started),
        "finished_at": None,
        "status": "failed",
        "error": "did not finish (the capture process was killed?)",
        "exit_code": None,
    }
    if tool == "ncu":
        meta["ncu"] = {"nvtx_range": nvtx_capture, "kernel_regex": kernel_regex, "launch_count": launch_count,
                       "replay_mode": replay_mode, "sections": list(profilers.NCU_SECTIONS)}
    _write_json(run_dir / "meta.json", meta)

    program = Path(cmd[0]).name
    error = None
    with recorded(run_dir, meta, timeout_s) as out:
        with open(run_dir / LOG, "a", encoding="utf-8") as log:
            if found is None:
                log.write(f"$ {shlex.join(argv)}\n{cmd[0]}: command not found\n")
                where = "no such executable file" if os.sep in cmd[0] else "not on PATH"
                error = f"command not found: {cmd[0]} ({where})"
            else:
                rc, err_lines = _run(argv, log, echo, timeout_s, env)
                code = _program_exit(rc, run_dir / LOG) if tool != "none" else rc
                meta["exit_code"] = code
                if tool != "none":
                    meta["profiler_exit_code"] = rc
                why = _error_line(err_lines)
                if code != 0:
                    error = f"{program} {_exited(code)}" + (f": {why}" if why else "")
                elif rc != 0:
                    error = f"{tool} {_exited(rc)}" + (f": {why}" if why else "")
                if tool == "nsys" and (error is None or (run_dir / "nsys.nsys-rep").exists()):
                    # (a failed program's report is exported too, as nsys itself would: `tracekit ingest` takes it)
                    exported = _nsys_export(exe, run_dir, log, meta, why=(
                        f": the NVTX range {nvtx_capture!r} never ran?" if nvtx_capture is not None else
                        ": the program never called cudaProfilerStart?" if capture_range == "cudaProfilerApi"
                        else ""))
                    error = error or exported
                elif error is None and tool == "ncu":
                    error = _ncu_exports(exe, run_dir, log, meta)
            out.status, out.error = ("ok", None) if error is None else ("failed", error)
    status, error = out.status, out.error
    if status != "ok":
        raise CaptureError(f"capture failed ({error}); the run folder {run_dir} says so"
                           + ("" if tool == "none" else ", not ingested"), run_dir)
    if ingest:
        from .run import _ingest

        ingest_error = _ingest(run_dir, db, required=True)
        if ingest_error:
            raise CaptureError(f"run folder {run_dir} written, but ingest failed: {ingest_error}", run_dir)
    return run_dir


def _exited(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _run(argv: list[str], log, echo: bool, timeout_s: float | None, env: dict) -> tuple[int, list[str]]:
    """Run ``argv``, its stdout and stderr copied to ``log`` as they come (and, when
    ``echo``, to this process's stdout and stderr); returns its exit status and the last
    lines of its stderr. A Ctrl-C or timeout: the program is sent SIGINT (30 s to end,
    then killed) and the exception goes on (``run.wait``)."""
    log.write(f"$ {shlex.join(argv)}\n")
    log.flush()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", bufsize=1, env=env)
    except OSError as err:
        raise CaptureError(f"cannot start {argv[0]}: {err.strerror or err}") from err
    lock = threading.Lock()
    tail: collections.deque[str] = collections.deque(maxlen=200)

    def pump(stream, out, keep) -> None:
        for line in stream:
            with lock:
                log.write(line)
                log.flush()
                if keep is not None:
                    keep.append(line.rstrip("\n"))
                if echo:
                    out.write(line)
                    out.flush()

    pumps = [threading.Thread(target=pump, args=(proc.stderr, sys.stderr, tail), daemon=True),
             threading.Thread(target=pump, args=(proc.stdout, sys.stdout, None), daemon=True)]
    return wait(proc, pumps, timeout_s), list(tail)


def _program_exit(rc: int, log_path: Path) -> int:
    """The program's exit status under a profiler: the one ncu reported in its output,
    else the profiler's own (nsys exits with the program's)."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return rc
    for pattern in _PROGRAM_EXIT:
        found = pattern.findall(text)
        if found:
            return int(found[-1])
    return rc


def _error_line(lines: list[str]) -> str | None:
    """The program's last line on stderr (a Python traceback's exception line), less the
    profilers' own lines; cut to 300 characters."""
    for line in reversed(lines):
        line = line.strip()
        if line and not _PROFILER_LINE.match(line):
            return line[:300]
    return None


def command_summary(run_dir: str | os.PathLike, db: str | os.PathLike | None = None, top: int = 5) -> str:
    """A short text summary of a command's run: its status and, from the store, the top
    kernels and NVTX ranges (nsys) or the kernel launches profiled (ncu)."""
    import json

    run_dir = Path(run_dir)
    meta = json.loads((run_dir / "meta.json").read_text())
    gpu = (meta.get("gpu") or {}).get("name")
    lines = [f"run {meta['name']}  status {meta['status']}  tool {meta['tool']}  exit status {meta.get('exit_code')}"
             f"  gpu {gpu}  command: {shlex.join(meta['program']['argv'])}"]
    if meta.get("error"):
        lines.append(f"error: {meta['error']}")
    if meta["tool"] == "none":
        lines.append("--tool none: the program was run and recorded (meta.json, capture.log); nothing profiled, "
                     "nothing to ingest")
        return "\n".join(lines)

    def from_store(tk, found: int | None) -> list[str]:
        if found is None:
            return []
        run = str(found)
        query = "top-kernels" if meta["tool"] == "nsys" else "ncu-summary"
        return [f"in the store as run {run}: tracekit query {query} --run {run}",
                *(_nsys_summary(tk, run, top) if meta["tool"] == "nsys" else _ncu_summary(tk, found, top))]

    return "\n".join(lines + stored_lines(run_dir, db, from_store))


def _nsys_summary(tk, run: str, top: int) -> list[str]:
    """The top kernels (no Polars: the registry's rows, as a terminal table reads them)."""
    from tracekit.registry import get_registry

    rows = get_registry().fetch(tk, "top-kernels", run=run, limit=top)
    if not rows.rows:
        return ["no kernel ran in the capture"]
    out = ["top kernels (time %, total ms, instances):"]
    for r in rows.rows:
        r = dict(zip(rows.columns, r, strict=True))
        out.append(f"  {r['time_pct']:5.1f}%  {r['total_ns'] / 1e6:9.3f}  {r['instances']:6d}  {r['name'][:90]}")
    return out


def _ncu_summary(tk, run_id: int, top: int) -> list[str]:
    """The kernel launches ncu profiled, by name: launches and summed duration."""
    rows = tk.con.execute(
        "SELECT name, count(*), sum(duration_ns) FROM ncu_kernel_metrics WHERE run_id = ? GROUP BY name "
        "ORDER BY 3 DESC NULLS LAST, 1 LIMIT ?", [run_id, top]).fetchall()
    if not rows:
        return ["ncu: no kernel launch profiled"]
    total = tk.con.execute("SELECT count(*) FROM ncu_kernels WHERE run_id = ?", [run_id]).fetchall()[0][0]
    out = [f"ncu profiled {total} kernel launches (launches, summed us, kernel):"]
    for name, n, dur in rows:
        out.append(f"  {n:4d}  {(dur or 0) / 1e3:10.3f}  {str(name)[:90]}")
    return out
