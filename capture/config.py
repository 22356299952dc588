"""Workload presets and the validation of capture parameters (no torch here)."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from tracekit.errors import CaptureError
from tracekit.numbers import MAX_COUNT

TOOLS = ("nsys", "ncu", "none")


@dataclass(frozen=True)
class WorkloadConfig:
    """Shape of the HSTU ranking model and of the synthetic request stream.

    Attention uses ``num_heads`` heads of ``head_dim`` for queries/keys and values alike,
    so the UVQK projection is ``d_model -> 4 * num_heads * head_dim``. The KV cache holds
    at most ``2 * max_history_items`` history tokens per user (item and action tokens
    interleaved); older whole pages are dropped when a user's history grows past it.
    """

    preset: str
    d_model: int
    num_layers: int
    num_heads: int
    head_dim: int
    max_history_items: int
    num_items: int
    num_actions: int = 256  # 8 binary feedback signals -> 2**8 action masks
    num_time_buckets: int = 32  # log2 buckets of seconds since the previous interaction
    new_items_per_request: int = 16  # history items a user gains between two requests
    num_tasks: int = 8  # scoring head outputs (one per feedback signal)
    scoring_hidden: int = 512
    page_size: int = 32  # the page size tracekit.kernels supports
    zipf_exponent: float = 1.05
    gpu_dtype: str = "bfloat16"  # CPU runs use float32
    seed: int = 0

    @property
    def max_cache_tokens(self) -> int:
        return 2 * self.max_history_items

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


INT32_MAX = 2**31 - 1

PRESETS: dict[str, WorkloadConfig] = {
    "small": WorkloadConfig(
        preset="small", d_model=512, num_layers=3, num_heads=4, head_dim=128,
        max_history_items=256, num_items=1 << 16,
    ),
    "medium": WorkloadConfig(
        preset="medium", d_model=512, num_layers=5, num_heads=4, head_dim=128,
        max_history_items=1024, num_items=1 << 21,
    ),
    "large": WorkloadConfig(
        preset="large", d_model=1024, num_layers=8, num_heads=4, head_dim=256,
        max_history_items=2048, num_items=1 << 22,
    ),
}


def workload_config(preset: str, /, **overrides: Any) -> WorkloadConfig:
    """The preset's config with ``overrides`` applied (unknown keys are an error)."""
    if not isinstance(preset, str) or preset not in PRESETS:
        raise CaptureError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    cfg = PRESETS[preset]
    if not overrides:
        return cfg
    check_workload(overrides)
    return dataclasses.replace(cfg, **overrides)


def check_workload(overrides: dict[str, Any]) -> None:
    """Overrides of a preset's fields: each a field, with a value the worker takes."""
    fields = {f.name for f in dataclasses.fields(WorkloadConfig)} - {"preset"}  # (the preset: --preset)
    bad = sorted(set(overrides) - fields, key=str)
    if bad:
        raise CaptureError(f"unknown workload setting(s) {', '.join(map(str, bad))}; known: {', '.join(sorted(fields))}")
    for name, value in overrides.items():
        _check_workload_setting(name, value)


#: the GPU dtypes the workload runs in (torch's names; a CPU run is float32)
GPU_DTYPES = ("bfloat16", "float16", "float32")


def _check_workload_setting(name: str, value: Any) -> None:
    """A workload setting's value, checked before anything runs: the worker would fail on
    it at every point of a sweep (a seed numpy refuses, a dtype torch lacks, a page size
    the kernels do not take)."""
    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if name == "zipf_exponent":
        ok, want = (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and math.isfinite(value)), "a finite number"
    elif name == "gpu_dtype":
        ok, want = value in GPU_DTYPES, f"one of {', '.join(GPU_DTYPES)}"
    elif name == "seed":
        ok, want = whole(value) and value >= 0, "an integer >= 0"
    elif name == "page_size":
        from tracekit.kernels.cache import PAGE_SIZE

        ok, want = whole(value) and value == PAGE_SIZE, f"{PAGE_SIZE} (the page size tracekit.kernels takes)"
    else:
        ok, want = whole(value) and value >= 1, "a positive integer"
    if not ok:
        raise CaptureError(f"workload setting {name}={value!r} must be {want}")


def _positive_int(name: str, flag: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value), 10)
        except ValueError:
            raise CaptureError(f"{flag} {value!r}: {name} must be a positive integer") from None
    if value < 1:
        raise CaptureError(f"{flag} {value}: {name} must be a positive integer (>= 1)")
    if value > MAX_COUNT:  # (a run's bs and nc, and a request's index, are 32-bit in the store)
        raise CaptureError(f"{flag} {value}: {name} must be at most {MAX_COUNT:,}")
    return value


#: how the checks below name each capture parameter by default: its flag (a sweep
#: config's checks name its file and key instead)
FLAGS = {"bs": "--bs", "nc": "--nc", "tool": "--tool", "preset": "--preset", "warmup_ms": "--warmup-ms",
         "iters": "--iters"}
_COUNTS = {"bs": "batch size", "nc": "candidates per user", "iters": "timed requests"}


def check_tools(value: Any, name: str) -> list[str] | None:
    """Several profilers, as a list or a comma-separated text (``none,nsys,ncu``: the grid swept
    under each in turn, ``capture.sweep.sweep_each``), checked: each one of ``TOOLS``, none twice;
    None where ``value`` names one (its caller checks it). ``name`` says where it came from."""
    if isinstance(value, str) and "," in value:
        tools: list = [t.strip() for t in value.split(",")]
    elif isinstance(value, list) and len(value) != 1:
        tools = value
    else:
        return None
    if not tools:  # (an empty list: a sweep of nothing, not the default profiler)
        raise CaptureError(f"{name} {value!r}: no profiler; give {', '.join(TOOLS)}, or several (none,nsys,ncu)")
    for t in tools:
        if not isinstance(t, str) or t not in TOOLS:
            raise CaptureError(f"{name} {value!r}: {t!r} is not a profiler; give {', '.join(TOOLS)}, or several "
                               "(none,nsys,ncu)")
    twice = sorted({t for t in tools if tools.count(t) > 1})
    if twice:
        raise CaptureError(f"{name} {value!r}: {twice[0]} twice; each profiler sweeps the grid once")
    return tools


def check_param(key: str, value: Any, name: str | None = None) -> Any:
    """One capture parameter (a key of ``FLAGS``) checked and normalised; a one-line
    error names it as ``name`` (default: its flag)."""
    name = name or FLAGS[key]
    if key in _COUNTS:
        return _positive_int(_COUNTS[key], name, value)
    if key == "tool":
        several = check_tools(value, name)
        if several is not None:
            return several
        if not isinstance(value, str) or value not in TOOLS:  # (a YAML list: unhashable)
            raise CaptureError(f"{name} {value!r}: unknown profiler; choose one of {', '.join(TOOLS)}")
        return value
    if key == "preset":
        if value is not None and (not isinstance(value, str) or value not in PRESETS):
            raise CaptureError(f"{name} {value!r}: unknown preset; choose one of {', '.join(PRESETS)}")
        return value
    try:  # warmup_ms
        if isinstance(value, bool):  # (YAML's yes/true: float() reads it as 1)
            raise TypeError
        ms = float(value)
    except (TypeError, ValueError):
        raise CaptureError(f"{name} {value!r}: must be a number of milliseconds") from None
    if not (ms >= 0 and math.isfinite(ms)):  # (inf would warm up forever)
        raise CaptureError(f"{name} {value!r}: must be a finite number of milliseconds >= 0")
    return ms


def validate_params(bs: Any, nc: Any, tool: str, preset: str | None, warmup_ms: Any,
                    iters: Any) -> tuple[int, int, str, str | None, float, int]:
    """Check the CLI/library parameters before anything runs; one-line errors."""
    given = {"bs": bs, "nc": nc, "tool": tool, "preset": preset, "warmup_ms": warmup_ms, "iters": iters}
    checked = {key: check_param(key, value) for key, value in given.items()}
    return tuple(checked[key] for key in FLAGS)


def check_size(bs: int, nc: int, cfg: WorkloadConfig, names: tuple[str, str] = ("--bs", "--nc")) -> None:
    """One request's tokens and its KV cache's pages are indexed with 32-bit offsets (the
    kernels, the page table): a point beyond them is refused before anything runs. The
    error names bs and nc as ``names`` (their flags, or a sweep config's keys)."""
    tokens = bs * (nc + cfg.max_cache_tokens)
    pages = bs * (-(-cfg.max_cache_tokens // cfg.page_size) + 1)
    if max(tokens, pages) > INT32_MAX:
        raise CaptureError(f"{names[0]} {bs} {names[1]} {nc}: a request of {tokens:,} tokens ({pages:,} KV-cache pages) exceeds "
                           f"the {INT32_MAX:,} that 32-bit offsets index; use a smaller batch or fewer candidates")


def check_settings(device: Any = "auto", flush_l2: Any = True, ncu_launch_skip: Any = 0,
                   ncu_launch_count: Any = None) -> None:
    """Check the settings beyond ``validate_params`` (a sweep config may give them) before
    anything runs; one-line errors."""
    if device not in ("auto", "cpu", "cuda"):
        raise CaptureError(f"device {device!r}: choose auto, cpu or cuda")
    if not isinstance(flush_l2, bool):
        raise CaptureError(f"flush_l2 {flush_l2!r}: must be true or false")
    for name, value, least in (("ncu_launch_skip", ncu_launch_skip, 0), ("ncu_launch_count", ncu_launch_count, 1)):
        if value is None and name == "ncu_launch_count":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise CaptureError(f"{name} {value!r}: must be an integer >= {least}")


def check_kernel_regex(kernel_regex: Any) -> str | None:
    """``--kernel-name``: None (not given) or a regular expression over kernel names, else a
    one-line error."""
    if kernel_regex is None:
        return None
    if not isinstance(kernel_regex, str) or not kernel_regex:
        raise CaptureError(f"--kernel-name {kernel_regex!r}: a regular expression over kernel names")
    try:
        re.compile(kernel_regex)
    except re.error as err:
        raise CaptureError(f"--kernel-name {kernel_regex!r}: not a regular expression ({err})") from None
    return kernel_regex


def check_timeout(timeout_s: Any) -> float | None:
    """``--timeout``: None (no limit) or a finite number of seconds > 0, else a one-line error."""
    if timeout_s is None:
        return None
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise CaptureError(f"--timeout {timeout_s!r}: a number of seconds > 0")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise CaptureError(f"--timeout {timeout_s:g}: a number of seconds > 0")
    return timeout_s


def check_replay_mode(replay_mode: Any, tool: str) -> str | None:
    """``--replay-mode`` for ``tool``: the ncu replay mode the capture runs (``kernel`` when
    not given), None for nsys and none; given for another tool, or not one of
    ``profilers.NCU_REPLAY_MODES``, it is a one-line error."""
    from .profilers import NCU_REPLAY_MODES

    if replay_mode is None:
        return "kernel" if tool == "ncu" else None
    if tool != "ncu":
        raise CaptureError(f"--replay-mode: an option of --tool ncu, not of --tool {tool}")
    if replay_mode not in NCU_REPLAY_MODES:
        raise CaptureError(f"--replay-mode {replay_mode!r}: choose one of {', '.join(NCU_REPLAY_MODES)}")
    return replay_mode
