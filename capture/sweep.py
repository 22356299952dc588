"""``sweep()``: one capture per point of a batch-size x candidates grid of the HSTU workload;
``sweep_command()``: one capture of a program of yours per point of a grid of any parameters.

Every point is a normal run folder (``params.sweep`` names the sweep); a point that fails
is recorded and the sweep goes on. ``<out_dir>/<sweep_id>.json`` is the manifest,
rewritten after every point: the config, and per point its status (``ok`` | ``failed``
| ``interrupted`` | ``not_run``), run folder and error. An interrupted sweep keeps the
finished points (ingested) and labels the rest.

Configs: the named presets ``quick`` and ``full`` or a YAML file::

    preset: large          # workload preset (default: large with a GPU, small without)
    tool: none             # nsys | ncu | none, or several: [none, nsys, ncu] (a sweep each)
    warmup_ms: 2000
    iters: 50
    grid:
      bs: [1, 2, 4, 8]
      nc: [128, 256, 512, 1024]
    workload: {}           # optional overrides of preset fields

A program's grid names its parameters (``--grid m=1024,2048 --grid dtype=fp16,bf16``) and the
command says where each goes (``python bench.py --m {m} --dtype {dtype}``): each point runs the
command with its values put in, under ``capture_command``, with the values among its run's
params, as text (``m``, ``dtype``), beside ``sweep``, ``sweep_point`` (its index in the grid's
order, the first name's values slowest) and ``sweep_grid`` (the names, comma-separated).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tracekit.errors import CaptureError, Interrupted, QueryError, RunFolderError, TracekitError

from . import profilers
from .config import (
    FLAGS,
    TOOLS,
    check_param,
    check_settings,
    check_size,
    check_timeout,
    check_tools,
    check_workload,
    validate_params,
    workload_config,
)
from .run import (
    DEFAULT_ITERS,
    DEFAULT_WARMUP_MS,
    _iso,
    _utc_stamp,
    _write_json,
    capture,
    check_gpu,
    check_out,
    check_tiles_file,
    default_preset,
    headroom_lines,
    run_of_folder,
)

SWEEP_PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"tool": "none", "warmup_ms": 500.0, "iters": 20,
              "grid": {"bs": [1, 8], "nc": [128, 1024]}},
    "full": {"tool": "none", "warmup_ms": DEFAULT_WARMUP_MS, "iters": DEFAULT_ITERS,
             "grid": {"bs": [1, 2, 4, 8], "nc": [128, 256, 512, 1024]}},
}
CONFIG_KEYS = {"preset", "tool", "warmup_ms", "iters", "grid", "workload", "device", "flush_l2",
               "ncu_launch_skip", "ncu_launch_count"}


@dataclass
class SweepPoint:
    bs: int | None = None  # the HSTU workload's point
    nc: int | None = None
    status: str = "not_run"  # ok | failed | interrupted | not_run
    run_dir: str | None = None
    error: str | None = None
    values: dict[str, str] | None = None  # a program's point: its grid's values, by name

    @property
    def label(self) -> str:
        """``bs=8 nc=1024``: the point's grid values."""
        values = self.values if self.values is not None else {"bs": self.bs, "nc": self.nc}
        return " ".join(f"{k}={v}" for k, v in values.items())

    def as_json(self) -> dict[str, Any]:
        """The manifest's entry: a workload point's bs and nc, a program's values."""
        where = {"bs": self.bs, "nc": self.nc} if self.values is None else {"values": self.values}
        return {**where, "status": self.status, "run_dir": self.run_dir, "error": self.error}


@dataclass
class SweepResult:
    sweep_id: str
    manifest: Path
    points: list[SweepPoint] = field(default_factory=list)
    tool: str = "none"  # the profiler its points ran under
    repeat_of: str | None = None  # the sweep this one took again (sweep_each's repeats)

    @property
    def failed(self) -> list[SweepPoint]:
        return [p for p in self.points if p.status == "failed"]

    @property
    def ok(self) -> list[SweepPoint]:
        return [p for p in self.points if p.status == "ok"]


def parse_tools(tool: str | None, config: str | os.PathLike | dict | None = None) -> list[str | None]:
    """The profilers a sweep command runs under, in order: ``--tool``'s (one, or several comma-
    separated: ``none,nsys,ncu``), else the ``config``'s (its ``tool``, which may be a list), else
    ``[None]`` (each sweep's default). Several mean the grid captured under each in turn, one sweep
    each (``sweep_each``), so that a point's untimed latency, its timeline and its kernels'
    metrics come from one command. One profiler is checked by its sweep."""
    if tool is not None:
        return check_tools(tool, "--tool") or [tool]
    configured = load_config(config).get("tool") if config is not None else None
    return configured if isinstance(configured, list) else [None]


def sweep_each(tools: list[str | None], run: Callable[..., SweepResult], *, gpu_device: str | None = None,
               on_sweep: Callable[[SweepResult], None] | None = None, repeats: int = 1) -> list[SweepResult]:
    """``run(tool)`` (a ``sweep`` or ``sweep_command`` of one profiler) for each of ``tools`` in
    turn. Of several, every profiler is found, and with ``gpu_device`` (the HSTU workload's
    device) a GPU for each that needs one, before the first runs: a missing ncu is said before the
    nsys sweep, not after it (one sweep checks its own, after its options). ``on_sweep`` is told
    each finished sweep. A Ctrl-C ends them all, its one line (``Interrupted``) saying which
    profilers' sweeps did not run, and its ``finished`` the sweeps that had (their results kept
    for the command's closing table). ``repeats``: each profiler's sweep taken that many times
    in a row, the later ones ``run(tool, repeat_of=FIRST_SWEEP_ID)``: the noise between
    processes at each point (``repeat_spread``), which a later sweep's diff must pass
    (``--repeat``)."""
    for t in tools if len(tools) > 1 else ():
        if t != "none":
            profilers.find_tool(t)
            if gpu_device is not None:
                check_gpu(t, gpu_device)
    results = []
    runs = [(t, k) for t in tools for k in range(repeats)]
    for i, (t, k) in enumerate(runs):
        try:
            results.append(run(t, repeat_of=results[-k].sweep_id) if k else run(t))
        except Interrupted as err:
            rest = [f"{t or 'default'} (repeat {k + 1})" if k else t for t, k in runs[i + 1:]]
            stopped = Interrupted(f"{err}; not run: the {', '.join(map(str, rest))} sweep{'s' if len(rest) > 1 else ''}"
                                  ) if rest else err
            stopped.finished = results
            raise stopped from None
        if on_sweep is not None:
            on_sweep(results[-1])
    return results


def headroom_by_point(db: str | os.PathLike | None, nsys: SweepResult, ncu: SweepResult, top: int = 3) -> list[str]:
    """Where tuning can save time at each ok point of the nsys sweep ``nsys``, beside the ncu
    sweep ``ncu``'s run of the same point (one grid under both, ``sweep_each``): kernel-headroom's
    first ``top`` rows with a headroom, after the point's headroom in all (that of the kernels ncu
    measured), as lines for the terminal; a point the ncu sweep has no ok run of is said so.
    Empty where the store holds none of the nsys points."""
    import tracekit

    ncu_dirs = {p.label: p.run_dir for p in ncu.ok}
    out: list[str] = []
    with tracekit.open(db, read_only=True) as tk:
        for point in nsys.ok:
            run_id = run_of_folder(tk.con, point.run_dir)
            if run_id is None:
                continue
            ncu_id = run_of_folder(tk.con, ncu_dirs[point.label]) if point.label in ncu_dirs else None
            if ncu_id is None:
                out.append(f"  {point.label}: no ok run of it in the ncu sweep {ncu.sweep_id} in the store")
                continue
            try:
                rows = tk.query("kernel-headroom", run=run_id, ncu=ncu_id, limit=0)
            except QueryError as err:  # (the ncu run profiled none of the point's kernels)
                out.append(f"  {point.label}: {err}")
                continue
            kernel_ns = rows["total_ns"].sum()
            measured = rows.filter(rows["headroom_ns"].is_not_null())
            share = 100.0 * measured["headroom_ns"].sum() / kernel_ns if kernel_ns else 0.0
            out.append(f"  {point.label} (nsys run {run_id}, ncu run {ncu_id}): {share:.1f}% of its kernel time, "
                       f"{measured.height} of its {rows.height} kernels measured")
            out += headroom_lines(rows, top, indent="    ")
    if not out:
        return []
    return ["where tuning can save time at each point (headroom % of the point's kernel time, speed of light %, "
            "bottleneck; tracekit query kernel-headroom --run NSYS_RUN -p ncu=NCU_RUN):", *out]


def latency_rows(tk, sweep_id: str):
    """sweep-latency's rows (``Rows``) of the sweep ``sweep_id``, as ``tracekit sweep`` ends with
    them: its failed points said already, and a sweep under ncu said once below its table, not
    by the query's warning for each sweep."""
    import warnings

    from tracekit.errors import CaptureWarning
    from tracekit.registry import get_registry

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"sweep \S+ was captured under ncu", CaptureWarning)
        return get_registry().fetch(tk, "sweep-latency", points_said=True, limit=0, sweep=sweep_id)


def repeat_spread(db: str | os.PathLike | None, results: list[SweepResult]) -> list[str]:
    """The noise between the repeats of each sweep of ``results`` (``sweep_each``'s, a sweep and
    the sweeps taken again after it, ``repeat_of``), as lines for the terminal: for the HSTU
    workload, each point's median request latency in each repeat and their spread (the largest
    over the smallest, less one); then how a later sweep is compared against them (``diff
    --repeat``: a change no larger than the repeats' is not judged). Empty without repeats."""
    import tracekit

    groups: dict[str, list[SweepResult]] = {}  # the first sweep's id -> it and its repeats
    for r in results:
        groups.setdefault(r.repeat_of or r.sweep_id, []).append(r)
    out: list[str] = []
    hints: list[str] = []
    for group in groups.values():
        ok = [r for r in group if r.ok]
        if len(group) < 2:
            continue
        program_untimed = ok and ok[0].points[0].bs is None and group[0].tool == "none"
        if len(ok) > 1 and not program_untimed:  # (a program's sweep under no profiler: nothing in the store)
            hints.append(f"  a later sweep against these ({group[0].tool}): tracekit diff {ok[0].sweep_id} NEW "
                         + " ".join(f"--repeat {r.sweep_id}" for r in ok[1:]))
        if not ok or ok[0].points[0].bs is None:  # (a program's sweep times no request)
            continue
        medians: dict[str, list[float]] = {}
        with tracekit.open(db, read_only=True) as tk:
            for r in ok:
                runs = {Path(p.run_dir).name: p.label for p in r.ok}
                rows = latency_rows(tk, r.sweep_id)
                named = [dict(zip(rows.columns, row, strict=True)) for row in rows.rows]
                for row in named:
                    if row["run"] in runs:
                        medians.setdefault(runs[row["run"]], []).append(row["median_ms"])
        for label, ms in medians.items():
            spread = f"{100 * (max(ms) / min(ms) - 1):.1f} %" if len(ms) > 1 and min(ms) > 0 else "one repeat"
            out.append(f"  {label} ({group[0].tool}): {', '.join(f'{m:.3f}' for m in ms)} ms: {spread}")
    if not out and not hints:
        return []
    head = ["the noise between the repeats at each point (median latency in each; spread: the largest over the "
            "smallest, less one):"] if out else []
    return [*head, *out, *hints]


def parse_list(text: str | Sequence[int], flag: str) -> list[int]:
    """``"1,2,4,8"`` (or a list) -> ``[1, 2, 4, 8]``; each value must be a positive int, given once."""
    if isinstance(text, str):
        items = text.split(",")
    elif isinstance(text, (list, tuple)):
        items = list(text)
    else:  # one value where a list belongs (a YAML `bs: 4`)
        items = [text]
    out = []
    for item in items:
        s = str(item).strip()
        try:
            value = int(s, 10)
        except ValueError:
            raise CaptureError(f"{flag} {text!r}: {s!r} is not an integer") from None
        if value < 1:
            raise CaptureError(f"{flag} {text!r}: {value} must be a positive integer (>= 1)")
        if value in out:  # (one point per value: a value twice is a typo, not a point captured twice)
            raise CaptureError(f"{flag} {text!r}: {value} twice; give each value once")
        out.append(value)
    if not out:
        raise CaptureError(f"{flag} {text!r}: give at least one value")
    return out


def _unique_keys_loader():
    """PyYAML's SafeLoader, refusing a mapping that gives a key twice (YAML requires keys to
    be unique; PyYAML keeps the last silently: ``iters: 5`` then ``iters: 0`` ran 0)."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":  # (<<: a merge; its keys are overridden at will)
                        continue
                    key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                    try:
                        twice = key in seen
                    except TypeError:  # (a list as a key: construct_mapping says so)
                        continue
                    if twice:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key!r} given twice, on line{f's {seen[key]} and' if seen[key] != line else ''}"
                            f" {line}; give each key once",
                            key_node.start_mark)
                    seen[key] = line
            return super().construct_mapping(node, deep)

    return UniqueKeys


def _as_written(node) -> Any:
    """A composed YAML node as the file writes it: each scalar its text (``010``, ``1.10``,
    ``on``, where a YAML reader gives 8, 1.1 and True), a null None; lists and mappings
    alike. A program's grid values and arguments are text put into its command line."""
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return None if node.tag == "tag:yaml.org,2002:null" else node.value
    if isinstance(node, yaml.SequenceNode):
        return [_as_written(n) for n in node.value]
    if isinstance(node, yaml.MappingNode):
        return {_as_written(k): _as_written(v) for k, v in node.value}
    return None


def load_config(config: str | os.PathLike | dict) -> dict[str, Any]:
    """A sweep config from a preset name, a YAML file or a dict, validated: the HSTU
    workload's, or, where it gives a ``command``, a program's (``_program_config``)."""
    if isinstance(config, dict):
        data, where = dict(config), "sweep config"
    elif str(config) in SWEEP_PRESETS:
        data, where = json.loads(json.dumps(SWEEP_PRESETS[str(config)])), f"sweep preset {config}"
    else:
        path = Path(config)
        if not path.is_file():
            what = "a folder" if path.is_dir() else "not a file" if path.exists() else "no such file"
            raise CaptureError(f"--config {config}: {what}; give a sweep config (a YAML file) or a preset "
                               f"({', '.join(SWEEP_PRESETS)})")
        import yaml

        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=_unique_keys_loader())  # noqa: S506 (a SafeLoader)
        except UnicodeDecodeError:  # (a store, an export: not a text file)
            raise CaptureError(f"{path}: not a YAML file (not UTF-8 text); give a sweep config or preset") from None
        except yaml.YAMLError as err:
            raise CaptureError(f"{path}: invalid YAML ({str(err).splitlines()[0]})") from None
        except RecursionError:  # (PyYAML composes nested lists and mappings by recursion)
            raise CaptureError(f"{path}: invalid YAML (lists or mappings nested too deeply to read)") from None
        if not isinstance(data, dict):
            read = "nothing" if data is None else "a list" if isinstance(data, list) else "a single value"
            raise CaptureError(f"{path}: a sweep config is YAML, a mapping with a 'grid' (grid: {{bs: [1, 8], ...}}); "
                               f"this file reads as {read}")
        if "command" in data:  # a program's values are its arguments' text: 010, 1.10 and on as written
            written = _as_written(yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader))  # noqa: S506
            data.update({k: written[k] for k in ("command", "grid", "params")
                         if k in written and type(written[k]) is type(data[k])
                         and not (isinstance(written[k], dict) and "<<" in written[k])})  # (a merge: as read)
        where = str(path)
    if "command" in data:  # a program's sweep
        return _program_config(data, where)
    unknown = sorted(map(str, set(data) - CONFIG_KEYS))  # (YAML reads a key 1 or null as no text)
    if unknown:
        raise CaptureError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(CONFIG_KEYS))}")
    if not isinstance(data.get("workload", {}), dict):
        raise CaptureError(f"{where}: 'workload' must be a mapping of workload settings (e.g. {{num_layers: 2}}), "
                           f"not {data['workload']!r}")
    if "workload" in data:  # (its keys are keyword arguments: a key 1 or null is the unknown setting "1", "None")
        data["workload"] = {str(k): v for k, v in data["workload"].items()}
    grid = data.get("grid")
    if not isinstance(grid, dict) or set(grid) != {"bs", "nc"}:
        others = [str(k) for k in grid if k not in ("bs", "nc")] if isinstance(grid, dict) else []
        program = (f" (it names {', '.join(others)}: a sweep of a program of yours gives its 'command' too, "
                   f"e.g. command: python bench.py --{others[0]} {{{others[0]}}})") if others else ""
        raise CaptureError(f"{where}: 'grid' must give the lists 'bs' and 'nc' of the HSTU workload{program}")
    try:  # every value the config gives, checked here: its errors name the file and the key, not a flag
        data["grid"] = {"bs": parse_list(grid["bs"], "grid.bs"), "nc": parse_list(grid["nc"], "grid.nc")}
        for key in [k for k in FLAGS if k in data]:
            data[key] = check_param(key, data[key], key)
        check_settings(**{k: data[k] for k in ("device", "flush_l2", "ncu_launch_skip", "ncu_launch_count")
                          if k in data})
        check_workload(data.get("workload", {}))
    except CaptureError as err:
        raise CaptureError(f"{where}: {err}") from None
    return data


#: a program's sweep config: its keys beside ``command`` and ``grid`` (the capture options' names as
#: the command line spells them, with _ for -), and the ``capture_command`` argument each sets
PROGRAM_OPTIONS = {"capture_range": "capture_range", "nvtx_capture": "nvtx_capture", "kernel_name": "kernel_regex",
                   "launch_count": "launch_count", "replay_mode": "replay_mode", "gpu_metrics": "gpu_metrics",
                   "um_faults": "um_faults", "cpu_samples": "cpu_samples", "cuda_memory_usage": "cuda_memory_usage",
                   "cuda_backtrace": "cuda_backtrace", "python_samples": "python_samples"}
PROGRAM_KEYS = {"command", "grid", "tool", "params", "timeout", *PROGRAM_OPTIONS}


def _program_config(data: dict, where: str) -> dict[str, Any]:
    """A program's sweep config (a YAML file's mapping)::

        command: python bench.py --m {m} --dtype {dtype}   # or a list of arguments
        grid: {m: [1024, 4096], dtype: [fp16, fp32]}
        tool: nsys            # nsys | ncu | none (default: nsys)
        params: {note: a}     # as --param
        timeout: 600          # seconds, each point
        nvtx_capture: step    # and the other capture options (PROGRAM_OPTIONS)

    -> ``{"command": [...], "grid": {...}, "tool", "params", "timeout_s", "options"}`` (options:
    ``capture_command``'s arguments), every value checked, its errors naming the file and key."""
    import shlex

    from .command import parse_params

    unknown = sorted(map(str, set(data) - PROGRAM_KEYS))
    if unknown:
        raise CaptureError(f"{where}: unknown key(s) {', '.join(unknown)} in a program's sweep config; known: "
                           f"{', '.join(sorted(PROGRAM_KEYS))}")
    command = data["command"]
    try:
        if isinstance(command, str):
            try:
                command = shlex.split(command)
            except ValueError as err:  # (an unclosed quote)
                raise CaptureError(f"command {command!r}: not a command line ({err}); quote it as a shell "
                                   "would, or give a list of arguments") from None
        elif isinstance(command, list) and all(isinstance(a, (str, int, float)) and not isinstance(a, bool)
                                               for a in command):
            command = [str(a) for a in command]
        else:
            raise CaptureError(f"command {command!r}: the program and its arguments, as one line or a list")
        if not command:
            raise CaptureError("command: empty; give the program and its arguments")
        grid = data.get("grid")
        if not isinstance(grid, dict) or not grid:
            raise CaptureError("grid: a mapping of each parameter to its values (e.g. {m: [1024, 4096]})")
        grid = parse_grid(grid, "grid.")
        tool = data.get("tool", "nsys")
        tool = check_tools(tool, "tool") or tool
        if not isinstance(tool, list) and tool not in TOOLS:
            raise CaptureError(f"tool {tool!r}: choose one of {', '.join(TOOLS)}")
        params = data.get("params") or {}
        if not isinstance(params, dict):
            raise CaptureError(f"params {params!r}: a mapping of names to values (e.g. {{note: a}})")
        odd = next((k for k, v in params.items() if v is None or isinstance(v, (list, dict))), None)
        if odd is not None:  # (its Python text would be the value)
            said = "empty (null)" if params[odd] is None else repr(params[odd])
            raise CaptureError(f"params.{odd} {said}: one value, a number or text")
        try:  # (named as the config's keys, not as the flags')
            params = parse_params([f"{k}={v}" for k, v in params.items()])
            timeout_s = check_timeout(data.get("timeout"))
        except CaptureError as err:
            raise CaptureError(re.sub(r"^--param |^--timeout", lambda m: "params." if "param" in m[0] else "timeout",
                                      str(err))) from None
        options = {}
        for key, arg in PROGRAM_OPTIONS.items():
            if key not in data:
                continue
            value = data[key]
            flag = arg in ("gpu_metrics", "um_faults", "cpu_samples", "cuda_memory_usage", "cuda_backtrace",
                           "python_samples")
            if flag and not isinstance(value, bool):
                raise CaptureError(f"{key} {value!r}: true or false")
            if not flag and key != "launch_count" and not isinstance(value, str):
                raise CaptureError(f"{key} {value!r}: text")
            options[arg] = value
    except CaptureError as err:
        raise CaptureError(f"{where}: {err}") from None
    return {"command": command, "grid": grid, "tool": tool, "params": params, "timeout_s": timeout_s,
            "options": options}


def _as_keys(text: str, keys: list[str]) -> str:
    """``text`` with the flags of ``keys`` (``--nvtx-capture`` of ``nvtx_capture``) named as
    the keys: what a sweep config gave, said as the file says it."""
    flags = {"--" + key.replace("_", "-"): key for key in keys}
    return re.sub(r"--[a-z][a-z-]*\b", lambda m: flags.get(m[0], m[0]), text)


def _write_manifest(path: Path, sweep_id: str, status: str, settings: dict, started: datetime,
                    points: list[SweepPoint], finished: bool) -> None:
    _write_json(path, {
        "sweep": sweep_id, "status": status, "settings": settings,
        "started_at": _iso(started),
        "finished_at": _iso(datetime.now(UTC)) if finished else None,
        "points": [p.as_json() for p in points],
    })


def sweep(bs: str | Sequence[int] | None = None, nc: str | Sequence[int] | None = None, *,
          config: str | os.PathLike | dict | None = None, tool: str | None = None,
          preset: str | None = None, warmup_ms: float | None = None, iters: int | None = None,
          out_dir: str | os.PathLike = "runs", db: str | os.PathLike | None = None,
          workload: dict | None = None, device: str | None = None, ingest: bool = True,
          progress: bool = True, command: list[str] | None = None,
          runner: Callable[..., Path] = capture, timeout_s: float | None = None,
          on_point: Callable[[SweepPoint], None] | None = None, repeat_of: str | None = None) -> SweepResult:
    """Capture every (bs, nc) point of a grid. The grid comes from ``bs``/``nc`` or from
    ``config`` (preset name, YAML path or dict); explicit arguments override the config.
    ``timeout_s``: each point's limit (``capture``'s): a point past it is stopped and
    recorded failed, and the sweep goes on. Bad values are rejected before any point runs;
    a missing profiler too. ``repeat_of``: the sweep this one takes again (``sweep_each``'s
    repeats), in its manifest's settings and its runs' params (``sweep_repeat_of``)."""
    cfg = load_config(config) if config is not None else {}
    grid = cfg.get("grid", {})
    bs_list = parse_list(bs, "--bs") if bs is not None else grid.get("bs")
    nc_list = parse_list(nc, "--nc") if nc is not None else grid.get("nc")
    if not bs_list or not nc_list:
        raise CaptureError("sweep needs --bs and --nc lists or --config")
    tool = cfg.get("tool", "none") if tool is None else tool
    if isinstance(tool, list):
        raise CaptureError(f"{config}: tool names several profilers ({','.join(tool)}): sweep_each runs a sweep under "
                           "each (tracekit sweep --config does); give sweep() one")
    preset = preset or cfg.get("preset")
    warmup_ms = warmup_ms if warmup_ms is not None else cfg.get("warmup_ms", DEFAULT_WARMUP_MS)
    iters = iters if iters is not None else cfg.get("iters", DEFAULT_ITERS)
    workload = {**cfg.get("workload", {}), **(workload or {})}
    device = device or cfg.get("device", "auto")
    _, _, tool, preset, warmup_ms, iters = validate_params(bs_list[0], nc_list[0], tool, preset,
                                                           warmup_ms, iters)
    if tool != "none":
        profilers.find_tool(tool)  # fail before the first point, not once per point
    if preset is None:
        preset = default_preset()
    extra = {k: cfg[k] for k in ("flush_l2", "ncu_launch_skip", "ncu_launch_count") if k in cfg}
    # what every point would refuse, refused once before the first point
    src = "sweep config" if isinstance(config, dict) else config  # (the config's grid: named as its file's keys)
    names = (f"{src}: grid.bs", "grid.nc") if bs is None and nc is None else (
        "--bs" if bs is not None else f"{src}'s grid.bs", "--nc" if nc is not None else f"{src}'s grid.nc")
    check_size(max(bs_list), max(nc_list), workload_config(preset, **workload), names)
    check_settings(device, **extra)
    check_gpu(tool, device)
    timeout_s = check_timeout(timeout_s)
    out = check_out(out_dir)
    if ingest:
        from tracekit.store import check_ingest_target

        check_ingest_target(db)
    check_tiles_file()

    settings = {"grid": {"bs": bs_list, "nc": nc_list}, "tool": tool, "preset": preset,
                "warmup_ms": warmup_ms, "iters": iters, "workload": workload, "device": device,
                "config": str(config) if config is not None and not isinstance(config, dict) else None,
                **extra, **({"timeout_s": timeout_s} if timeout_s is not None else {}),
                **({"repeat_of": repeat_of} if repeat_of else {})}
    points = [SweepPoint(b, n) for b, n in itertools.product(bs_list, nc_list)]
    again = {"sweep_repeat_of": repeat_of} if repeat_of else {}

    def run_point(i: int, point: SweepPoint, sweep_id: str) -> Path:
        return runner(point.bs, point.nc, tool=tool, preset=preset, warmup_ms=warmup_ms,
                      iters=iters, out_dir=out, db=db, workload=workload or None,
                      device=device, ingest=ingest, command=command,
                      extra_params={"sweep": sweep_id, "sweep_point": i, **again},
                      **{k: v for k, v in extra.items()},
                      **({"timeout_s": timeout_s} if timeout_s is not None else {}))

    return _run_points(out, points, settings, run_point, tool, progress, on_point, ingest)


#: the params a program's sweep sets on each point (besides ``command.RESERVED_PARAMS``)
SWEEP_PARAMS = ("sweep", "sweep_point", "sweep_grid", "sweep_repeat_of")
#: a grid parameter's name: what ``{NAME}`` in the command and the params' JSON take as is
GRID_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_grid(grid: Sequence[str] | dict[str, Any], flag: str = "--grid") -> dict[str, list[str]]:
    """A program's grid: ``["m=1024,2048", "dtype=fp16,bf16"]`` (``--grid NAME=V1,V2,...``,
    repeatable; ``;`` also separates names in one item) or a mapping of names to values ->
    ``{"m": ["1024", "2048"], "dtype": ["fp16", "bf16"]}``, names and values in the order
    given, the values as text, each value once."""
    if isinstance(grid, dict):
        items = [(str(k), v if isinstance(v, (list, tuple)) else [v]) for k, v in grid.items()]
    else:
        items = []
        for text in grid or []:
            for part in str(text).split(";"):
                if "=" not in part:
                    raise CaptureError(f"{flag} {text!r}: expected NAME=VALUE1,VALUE2,... (e.g. {flag} bs=1,2,4)")
                name, values = part.split("=", 1)
                items.append((name.strip(), values.split(",")))
    out: dict[str, list[str]] = {}
    for name, values in items:
        said = f"{flag}{name}" if flag.endswith(".") else f"{flag} {name}"  # (grid.m: a config's key)
        if not GRID_NAME.fullmatch(name):
            which = f"{flag}{name}" if flag.endswith(".") else f"{flag} {name!r}"
            raise CaptureError(f"{which}: a parameter's name is letters, digits and _, not starting with a digit "
                               "(it goes into the command as {NAME})")
        if name in out:
            raise CaptureError(f"{said}: given twice; give each parameter's values once")
        if any(v is None or isinstance(v, (dict, list)) for v in values):
            raise CaptureError(f"{said} {values!r}: each value a number or text")
        taken = [str(v).strip() for v in values]
        if not taken:
            raise CaptureError(f"{said}: no values; give at least one")
        if any(not v for v in taken):
            raise CaptureError(f"{said}={','.join(map(str, values))}: an empty value; give the values "
                               "comma-separated, each not empty")
        twice = next((v for i, v in enumerate(taken) if v in taken[:i]), None)
        if twice is not None:
            raise CaptureError(f"{said}={','.join(map(str, values))}: {twice} twice; give each value once")
        out[name] = taken
    if not out:
        raise CaptureError(f"{flag.rstrip('.')}: give at least one parameter and its values (e.g. --grid bs=1,2,4)")
    return out


def _point_command(cmd: list[str], values: dict[str, str]) -> list[str]:
    """``cmd`` with each ``{NAME}`` of the grid replaced by the point's value, in one pass (a
    value that reads ``{n}`` stays as it is); other braces are left as they are: a program's
    own ``{}`` is not ours."""
    names = re.compile("|".join(re.escape("{" + n + "}") for n in values))
    return [names.sub(lambda m: values[m[0][1:-1]], arg) for arg in cmd]


def _point_name(cmd: list[str], tool: str, values: dict[str, str]) -> str:
    """``<utc>-<program>-<tool>-m=1024-dtype=fp16``: a point's run folder (a value's other
    characters than letters, digits, ``.``, ``_`` and ``-`` as ``_``; cut to 120 characters)."""
    from .command import command_run_name

    where = "-".join(f"{k}={re.sub(r'[^A-Za-z0-9._-]+', '_', v)}" for k, v in values.items())
    return f"{command_run_name(cmd, tool)}-{where}"[:120].rstrip("-_.")


def sweep_command(cmd: list[str] | None = None, grid: Sequence[str] | dict[str, Any] | None = None,
                  tool: str | None = None, *, config: str | os.PathLike | dict | None = None,
                  out_dir: str | os.PathLike = "runs", db: str | os.PathLike | None = None, ingest: bool = True,
                  params: dict[str, Any] | None = None, progress: bool = True, command: list[str] | None = None,
                  timeout_s: float | None = None, on_point: Callable[[SweepPoint], None] | None = None,
                  runner: Callable[..., Path] | None = None, one_of_several: bool = False,
                  repeat_of: str | None = None, **options: Any) -> SweepResult:
    """Capture the program ``cmd`` at every point of ``grid`` (``parse_grid``'s) under
    ``tool`` (default nsys): each point's command has its values in place of the grid's
    ``{NAME}`` (every name must be used), and its run folder, ingested unless ``ingest`` is
    false or ``tool`` is none, has them among its params (module docstring), beside ``params``
    (``--param``). ``options``: ``capture_command``'s profiler options (``nvtx_capture``,
    ``kernel_regex``, ``gpu_metrics``, ...), the same at every point. ``config``: a program's
    sweep config (``_program_config``: a YAML file or a dict) giving what the arguments do not
    (``grid`` replaces its grid; ``params`` and ``options`` add to its own). A point that fails
    is recorded and the sweep goes on; everything each point would refuse is refused before the
    first runs. ``one_of_several``: the sweep is one of a grid's under several profilers
    (``sweep_each``): the options (the config's too) of another profiler are left out, not refused.
    ``repeat_of``: as ``sweep``'s."""
    from .command import RESERVED_PARAMS, _check, _find_program, capture_command, own_options

    runner = runner or capture_command
    cfg: dict[str, Any] = {}
    if config is not None:
        cfg = load_config(config)
        if "command" not in cfg:
            raise CaptureError(f"--config {config}: a sweep config of the HSTU workload (no command); a program's "
                               "gives command and grid (tracekit sweep --config FILE alone runs it)")
    cmd = cmd or cfg.get("command")
    grid = grid or cfg.get("grid")
    if grid is None:
        raise CaptureError("a program's sweep needs --grid NAME=V1,V2,... (repeatable) and {NAME} in the command "
                           "where each value goes")
    tool = cfg.get("tool", "nsys") if tool is None else tool
    if isinstance(tool, list):
        raise CaptureError(f"{config}: tool names several profilers ({','.join(tool)}): sweep_each runs a sweep under "
                           "each (tracekit sweep --config does); give sweep_command() one")
    params = {**cfg.get("params", {}), **(params or {})}
    timeout_s = timeout_s if timeout_s is not None else cfg.get("timeout_s")
    given = {k: v for k, v in options.items() if v is not None and v is not False}
    from_config = [key for key, arg in PROGRAM_OPTIONS.items() if arg in cfg.get("options", {}) and arg not in given]
    options = {**cfg.get("options", {}), **given}
    unknown = set(options) - set(PROGRAM_OPTIONS.values())
    if unknown:
        raise TypeError(f"sweep_command: unknown option(s) {', '.join(sorted(unknown))}")
    if one_of_several:
        options = own_options(tool, options)
    grid = parse_grid(grid)
    if not isinstance(cmd, (list, tuple)) or not cmd:
        raise CaptureError(f"command {cmd!r}: a program and its arguments (tracekit sweep --grid ... -- CMD [ARGS...])")
    for name in grid:
        if name in RESERVED_PARAMS or name in SWEEP_PARAMS:
            raise CaptureError(f"--grid {name}: tracekit sets {name} itself; choose another name (and write "
                               "{that name} in the command)")
        if not any("{" + name + "}" in str(arg) for arg in cmd):
            raise CaptureError(f"--grid {name}: the command has no {{{name}}}; write {{{name}}} where its value goes "
                               f"(e.g. -- python bench.py --{name} {{{name}}})")
    params = dict(params or {})
    both = [n for n in grid if n in params]
    if both:
        raise CaptureError(f"--grid {both[0]} and --param {both[0]}: give {both[0]} once (a grid's values are its "
                           "points' params)")
    clash = [n for n in params if n in SWEEP_PARAMS]
    if clash:
        raise CaptureError(f"--param {clash[0]}: tracekit sets {clash[0]} on a sweep's points; choose another name")
    from tracekit.numbers import check_counts

    points = [SweepPoint(values=dict(zip(grid, combo, strict=True))) for combo in itertools.product(*grid.values())]
    for point in points:  # what any point would refuse, refused before the first runs
        check_counts(point.values, "--grid ", CaptureError)  # (bs=abc: the queries read bs as a count)
        try:
            _check(_point_command(list(cmd), point.values), tool, options.get("capture_range") or "none",
                   options.get("nvtx_capture"), options.get("kernel_regex"), options.get("launch_count"),
                   options.get("gpu_metrics", False), params, options.get("replay_mode"), timeout_s,
                   **{k: options.get(k, False) for k in ("um_faults", "cpu_samples", "cuda_memory_usage",
                                                         "cuda_backtrace", "python_samples")})
        except CaptureError as err:  # the options the config gave: named as the file's keys
            said = _as_keys(str(err), from_config)
            if said == str(err):
                raise
            where = "sweep config" if isinstance(config, dict) else str(config)
            raise CaptureError(f"{where}: {said}") from None
    if tool != "none":
        profilers.find_tool(tool)  # fail before the first point, not once per point
    if not any("{" + n + "}" in cmd[0] for n in grid) and _find_program(cmd[0], dict(os.environ)) is None:
        where = "no such executable file" if os.sep in cmd[0] else "not on PATH"
        raise CaptureError(f"command not found: {cmd[0]} ({where}); no point run")
    timeout_s = check_timeout(timeout_s)
    out = check_out(out_dir)
    if ingest and tool != "none":
        from tracekit.store import check_ingest_target

        check_ingest_target(db)
    settings = {"grid": grid, "tool": tool, "command": list(cmd), "params": params,
                "config": str(config) if config is not None and not isinstance(config, dict) else None,
                "options": {k: v for k, v in options.items() if v not in (None, False)},
                **({"timeout_s": timeout_s} if timeout_s is not None else {}),
                **({"repeat_of": repeat_of} if repeat_of else {})}
    again = {"sweep_repeat_of": repeat_of} if repeat_of else {}

    def run_point(i: int, point: SweepPoint, sweep_id: str) -> Path:
        point_cmd = _point_command(list(cmd), point.values)  # (its program too: -- {python} bench.py)
        return runner(point_cmd, tool, out_dir=out, db=db,
                      name=_point_name(point_cmd, tool, point.values), ingest=ingest, command=command,
                      params={**params, **point.values, "sweep": sweep_id, "sweep_point": i,
                              "sweep_grid": ",".join(grid), **again},
                      timeout_s=timeout_s, **options)

    return _run_points(out, points, settings, run_point, tool, progress, on_point,
                       None if tool == "none" else ingest)


def _claim_manifest(out: Path, started: datetime) -> tuple[str, Path]:
    """The sweep's id (its start, to the millisecond) and its manifest in ``out``, the file
    created empty so that no other sweep takes the name: a sweep begun within the same
    millisecond into the same folder (two fake sweeps in a test, two scripts at once) takes
    the next free millisecond rather than failing or sharing the id."""
    stamp = started
    for _ in range(1000):
        sweep_id = f"sweep-{_utc_stamp(stamp)}"
        manifest = out / f"{sweep_id}.json"
        try:
            with open(manifest, "x"):
                return sweep_id, manifest
        except FileExistsError:
            stamp += timedelta(milliseconds=1)
        except OSError as err:
            raise CaptureError(f"--out {out}: cannot write the sweep's manifest {manifest.name} "
                               f"({err.strerror or err})") from err
    raise CaptureError(f"--out {out}: the sweep manifests of the 1,000 milliseconds from {_iso(started)} all exist; "
                       "choose another --out")


def _run_points(out: Path, points: list[SweepPoint], settings: dict, run_point: Callable[..., Path], tool: str,
                progress: bool, on_point: Callable[[SweepPoint], None] | None,
                ingested: bool | None) -> SweepResult:
    """Run every point (``run_point(index, point, sweep_id)`` returns its run folder) into
    ``out``, the manifest rewritten after each; a point that fails is recorded and the next
    runs; Ctrl-C labels the sweep interrupted and raises ``Interrupted``, one line saying what
    is kept (``ingested``: whether a point's run lands in the store; None: nothing to ingest)."""
    started = datetime.now(UTC)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CaptureError(f"--out {out}: cannot create the folder ({err.strerror or err})") from err
    sweep_id, manifest = _claim_manifest(out, started)
    result = SweepResult(sweep_id, manifest, points, tool, settings.get("repeat_of"))
    _write_manifest(manifest, sweep_id, "running", settings, started, points, False)

    bar = _progress(progress)
    task = bar.add_task(f"{sweep_id}", total=len(points)) if bar else None
    current: SweepPoint | None = None
    try:
        if bar:
            bar.start()
        for i, point in enumerate(points):
            current = point
            if bar:
                bar.update(task, description=f"{point.label} ({tool})")
            try:
                point.run_dir = str(run_point(i, point, sweep_id))
                point.status = "ok"
            except (KeyboardInterrupt, Interrupted) as err:  # (Interrupted: a Ctrl-C during the point's ingest)
                point.status = "interrupted"
                point.error = str(err) if isinstance(err, Interrupted) else "interrupted by the user"
                point.run_dir = err.run_dir if isinstance(err, RunFolderError) else None
                raise KeyboardInterrupt from None
            except TracekitError as err:
                point.status, point.error = "failed", str(err)
                point.run_dir = err.run_dir if isinstance(err, RunFolderError) else None
            except Exception as err:  # a crash in one point must not end the sweep
                point.status, point.error = "failed", f"{type(err).__name__}: {err}".splitlines()[0]
            current = None
            if on_point is not None:
                on_point(point)
            _write_manifest(manifest, sweep_id, "running", settings, started, points, False)
            if bar:
                bar.advance(task)
    except KeyboardInterrupt:
        _write_manifest(manifest, sweep_id, "interrupted", settings, started, points, True)
        done = sum(p.status in ("ok", "failed") for p in points)
        failed = sum(p.status == "failed" for p in points)
        where = f" at {current.label}" if current else ""
        kept = ("before any point finished" if not done else
                f"after {done} of {len(points)} points{f' ({failed} failed)' if failed else ''}; "
                f"{'its run is' if done == 1 else 'their runs are'} kept"
                + (" and ingested" if ingested else " (not ingested)" if ingested is not None else ""))
        raise Interrupted(f"sweep interrupted{where} {kept}; manifest {manifest}") from None
    finally:
        if bar:
            bar.stop()
    status = "ok" if not result.failed else ("failed" if not result.ok else "partial")
    _write_manifest(manifest, sweep_id, status, settings, started, points, True)
    return result


def _progress(enabled: bool):
    """A bar over the points, on stderr and only when stderr is a terminal."""
    from tracekit.progress import progress_bar

    return progress_bar(transient=False) if enabled else None
