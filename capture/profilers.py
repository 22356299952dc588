"""nsys/ncu command lines (argv lists, never shell strings) and versions; the profilers
themselves are found by ``tracekit.tools.find_tool`` (the library's, as ingest needs nsys
for .nsys-rep reports). GPU clocks are never changed: ncu always runs with
``--clock-control none``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tracekit.tools import ENV_VARS, KNOWN_LOCATIONS, find_tool  # noqa: F401 - capture's names for them

# NVTX push/pop range around the one steady-state request ncu profiles.
NCU_RANGE = "tracekit_ncu"
# The seed's three kernel classes, as regexes over the kernel's base function name.
NCU_KERNEL_CLASSES = {
    # nn.Embedding / tensor indexing: index_select, gather and advanced-indexing kernels
    "embedding": r"indexSelect|index_select|[Ee]mbedding|vectorized_gather_kernel|index_elementwise_kernel",
    "gemm": r"gemm|Gemm|GEMM|nvjet|cutlass|xmma",
    "attention": r"hstu|attn|attention",
}
#: ncu ``--replay-mode`` values a capture takes: ``kernel`` (ncu's default: each profiled
#: launch is replayed in place once per pass, the memory it writes saved and restored
#: between passes) or ``application`` (the whole program is run again once per pass and
#: each pass collects its metrics from the launches matched again: nothing saved and
#: restored, each pass's launch sees the memory a plain run gives it; the program must
#: launch the same kernels in the same order every run). ncu's range replays profile ranges of
#: several kernels, not kernels: ``tracekit ingest`` takes such reports made by hand.
NCU_REPLAY_MODES = ("kernel", "application")
# Every precision's roofline (the roofline query needs all of them to total a kernel's
# FLOP/s), occupancy and launch statistics, the memory workload (DRAM traffic, cache hit
# rates, shared-memory bank conflicts), and the warp states with their stall sampling (the
# warp-stalls query; with them ncu's stall rules say which stall dominates), the compute
# workload (pipe utilization, issue slots, the schedulers' eligible warps, instruction counts:
# the compute-workload query), and the instruction-level counters of ncu's Source page (the
# ncu-source query).
NCU_SECTIONS = (
    "SpeedOfLight",
    "SpeedOfLight_RooflineChart",
    "SpeedOfLight_HierarchicalSingleRooflineChart",
    "SpeedOfLight_HierarchicalHalfRooflineChart",
    "SpeedOfLight_HierarchicalDoubleRooflineChart",
    "SpeedOfLight_HierarchicalTensorRooflineChart",
    "Occupancy",
    "LaunchStats",
    "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Chart",
    "MemoryWorkloadAnalysis_Tables",
    "WarpStateStats",
    "ComputeWorkloadAnalysis",
    "SchedulerStats",
    "InstructionStats",
    "SourceCounters",
)


def tool_version(exe: str) -> str | None:
    """The version line ``exe --version`` prints, or None when it cannot run."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    for line in reversed(lines):
        if "version" in line.lower():
            return line
    return lines[-1] if lines else None


#: nsys's CPU sampling and its thread scheduling trace, on (``cpu_samples``) and off (the default:
#: the samples and their stacks are most of an export's size, and sampling costs the host time)
NSYS_CPU_SAMPLES = {True: ["--sample=process-tree", "--cpuctxsw=process-tree"],
                    False: ["--sample=none", "--cpuctxsw=none"]}


#: nsys's record of every allocation and free of GPU memory (off by default: each allocation call
#: takes longer while it is recorded)
NSYS_MEMORY_USAGE = ["--cuda-memory-usage=true"]
#: nsys's call stacks of the CUDA API calls it unwinds (launches, copies, memsets, allocations,
#: synchronizations: every one, as nsys 2025.3 sets no threshold where given none; off by default:
#: each unwound call takes longer), which nsys takes only where it samples the CPU
NSYS_CUDA_BACKTRACE = ["--cudabacktrace=all"]
#: and their Python stacks, in a Python program: nsys 2025.3.1 crashed a program without Python
#: given it (a CUDA C++ program on the H200 died of SIGSEGV at its first CUDA call)
NSYS_PYTHON_BACKTRACE = ["--python-backtrace=cuda"]
#: nsys's samples of the Python threads' stacks (1,000 a second; off by default: each costs the
#: sampled thread time)
NSYS_PYTHON_SAMPLES = ["--python-sampling=true"]


def is_python(cmd: Sequence[str]) -> bool:
    """Whether ``cmd`` runs a Python program: a python executable (python, python3.12, ...), or
    a script whose #! line names one (torchrun, pytest, a console script)."""
    if not cmd:
        return False
    if re.fullmatch(r"python[0-9.]*", Path(cmd[0]).name):
        return True
    found = shutil.which(cmd[0])
    try:
        with open(found or cmd[0], "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def nsys_argv(nsys: str, out_base: Path, cmd: Sequence[str], gpu_metrics: bool = False,
              cpu_samples: bool = False, cuda_memory_usage: bool = False, cuda_backtrace: bool = False,
              python_samples: bool = False) -> list[str]:
    """``nsys profile`` of ``cmd`` (the HSTU workload, a Python program): CUDA, NVTX and OS-runtime
    traces; only the part between ``cudaProfilerStart`` and ``cudaProfilerStop`` (the timed
    requests) is captured, into ``<out_base>.nsys-rep`` (exported to SQLite after it, with the NVTX
    payloads: ``tracekit.ingest.nsysrep.export_sqlite``). ``gpu_metrics``: the
    GPUs' counters sampled too (``--gpu-metrics-devices=all``: SM clock, SMs and tensor pipes
    active, DRAM bandwidth; off by default: one sampler per GPU at a time, which a DCGM
    running its own profiling metrics already holds); ``cpu_samples``: the CPU sampled, with
    call stacks (``NSYS_CPU_SAMPLES``); ``cuda_memory_usage``: every allocation and free of GPU
    memory recorded (``NSYS_MEMORY_USAGE``); ``cuda_backtrace``: the CUDA API calls' call stacks,
    native and Python (``NSYS_CUDA_BACKTRACE``, ``NSYS_PYTHON_BACKTRACE``, the CPU sampled);
    ``python_samples``: the Python threads' stacks sampled (``NSYS_PYTHON_SAMPLES``)."""
    return [
        nsys, "profile",
        "--trace=cuda,nvtx,osrt",
        *(["--gpu-metrics-devices=all"] if gpu_metrics else []),
        *(NSYS_MEMORY_USAGE if cuda_memory_usage else []),
        *(NSYS_CUDA_BACKTRACE + NSYS_PYTHON_BACKTRACE if cuda_backtrace else []),
        *(NSYS_PYTHON_SAMPLES if python_samples else []),
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        *NSYS_CPU_SAMPLES[bool(cpu_samples or cuda_backtrace)],
        "--force-overwrite=true",
        "-o", str(out_base),
        *cmd,
    ]


def ncu_kernel_regex(classes: Sequence[str] | None = None) -> str:
    names = list(NCU_KERNEL_CLASSES) if classes is None else list(classes)
    bad = [c for c in names if c not in NCU_KERNEL_CLASSES]
    if bad:
        raise ValueError(f"unknown kernel class(es) {bad}; known: {list(NCU_KERNEL_CLASSES)}")
    return "|".join(NCU_KERNEL_CLASSES[c] for c in names)


def _replay(replay_mode: str) -> list[str]:
    """ncu's ``--replay-mode``: nothing for ``kernel`` (ncu's default), ``--replay-mode
    application`` for ``application``."""
    if replay_mode not in NCU_REPLAY_MODES:
        raise ValueError(f"--replay-mode {replay_mode!r}: one of {', '.join(NCU_REPLAY_MODES)}")
    return [] if replay_mode == "kernel" else ["--replay-mode", replay_mode]


def ncu_argv(ncu: str, out_base: Path, cmd: Sequence[str], *, kernel_regex: str | None = None,
             launch_skip: int = 0, launch_count: int | None = None, replay_mode: str = "kernel",
             sections: Sequence[str] = NCU_SECTIONS) -> list[str]:
    """``ncu`` of ``cmd``: kernels of the three classes inside the ``NCU_RANGE`` request,
    the ``NCU_SECTIONS``, clocks left alone; the report carries the kernels' source files
    (``--import-source yes``), so the instruction-level view (ncu-source) shows each line's
    text wherever the report is read. ``replay_mode``: ``NCU_REPLAY_MODES``."""
    argv = [
        ncu,
        "--clock-control", "none",
        "--target-processes", "all",
        *_replay(replay_mode),
        "--nvtx", "--nvtx-include", f"{NCU_RANGE}/",
        "--kernel-name", f"regex:{kernel_regex or ncu_kernel_regex()}",
        "--launch-skip", str(launch_skip),
    ]
    if launch_count is not None:
        argv += ["--launch-count", str(launch_count)]
    for section in sections:
        argv += ["--section", section]
    argv += ["--import-source", "yes", "--force-overwrite", "-o", str(out_base), *cmd]
    return argv


def ncu_export_argvs(ncu: str, report: Path) -> dict[str, list[str]]:
    """The raw-metrics and details CSV exports of a report (file name -> argv)."""
    return {
        "ncu_raw.csv": [ncu, "-i", str(report), "--csv", "--page", "raw", "--print-units", "base"],
        "ncu_details.csv": [ncu, "-i", str(report), "--csv", "--page", "details",
                            "--print-metric-name", "name", "--print-units", "base"],
    }


# -- a user's command under a profiler (``tracekit capture -- CMD``) ------------------

#: nsys ``--capture-range`` values ``tracekit capture -- CMD`` takes: the whole program
#: (``none``), or the part between cudaProfilerStart and cudaProfilerStop
#: (``cudaProfilerApi``); an NVTX range is ``--nvtx-capture RANGE``
NSYS_CAPTURE_RANGES = ("none", "cudaProfilerApi")
#: ncu's default cap on the kernel launches profiled in a user's command: each launch is
#: replayed once per pass of its sections (``NCU_SECTIONS``: 36 passes on the H200), so a
#: program launching thousands of kernels would otherwise take hours
DEFAULT_LAUNCH_COUNT = 50
#: nsys matches ``--nvtx-capture`` against registered NVTX strings only, unless this is set
#: in the program's environment: ``torch.cuda.nvtx.range_push("step")`` registers nothing
NSYS_NVTX_ENV = "NSYS_NVTX_PROFILER_REGISTER_ONLY=0"


#: nsys's options that record Unified Memory's page faults, on the CPU and on the GPU
NSYS_UM_FAULTS = ["--cuda-um-cpu-page-faults=true", "--cuda-um-gpu-page-faults=true"]


def nsys_command_argv(nsys: str, out_base: Path, cmd: Sequence[str], *, capture_range: str = "none",
                      nvtx_capture: str | None = None, gpu_metrics: bool = False, um_faults: bool = False,
                      cpu_samples: bool = False, cuda_memory_usage: bool = False,
                      cuda_backtrace: bool = False, python_samples: bool = False) -> list[str]:
    """``nsys profile`` of a user's command: CUDA, NVTX and OS-runtime traces of the whole
    program (``capture_range`` ``none``), of the part between cudaProfilerStart and
    cudaProfilerStop (``cudaProfilerApi``), or of the first instance of the NVTX range
    ``nvtx_capture`` (nsys ``--capture-range=nvtx --nvtx-capture=RANGE``, ``RANGE@DOMAIN``
    for a range of another domain, with unregistered strings matched: ``NSYS_NVTX_ENV``);
    a range ends the capture (``--capture-range-end=stop``), the program runs on. Into
    ``<out_base>.nsys-rep``, as ``nsys_argv``; ``gpu_metrics`` as ``nsys_argv``;
    ``um_faults``: Unified Memory's page faults recorded (``NSYS_UM_FAULTS``; off by default:
    each fault is slowed down by its recording); ``cpu_samples``, ``cuda_memory_usage``,
    ``cuda_backtrace`` and ``python_samples`` as ``nsys_argv``, the Python stacks of the CUDA
    API calls only where ``cmd`` runs a Python program (``is_python``)."""
    if nvtx_capture is not None:
        if capture_range != "none":
            raise ValueError(f"--capture-range {capture_range} and --nvtx-capture: give one")
        scope = ["--capture-range=nvtx", f"--nvtx-capture={nvtx_capture}", "--capture-range-end=stop",
                 "-e", NSYS_NVTX_ENV]
    elif capture_range == "cudaProfilerApi":
        scope = ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    elif capture_range == "none":
        scope = ["--capture-range=none"]
    else:
        raise ValueError(f"--capture-range {capture_range!r}: one of {', '.join(NSYS_CAPTURE_RANGES)}")
    return [
        nsys, "profile",
        "--trace=cuda,nvtx,osrt",
        *(["--gpu-metrics-devices=all"] if gpu_metrics else []),
        *(NSYS_UM_FAULTS if um_faults else []),
        *(NSYS_MEMORY_USAGE if cuda_memory_usage else []),
        *(NSYS_CUDA_BACKTRACE if cuda_backtrace else []),
        *(NSYS_PYTHON_BACKTRACE if cuda_backtrace and is_python(cmd) else []),
        *(NSYS_PYTHON_SAMPLES if python_samples else []),
        *scope,
        *NSYS_CPU_SAMPLES[bool(cpu_samples or cuda_backtrace)],
        "--force-overwrite=true",
        "-o", str(out_base),
        *cmd,
    ]


def ncu_command_argv(ncu: str, out_base: Path, cmd: Sequence[str], *, nvtx_capture: str | None = None,
                     kernel_regex: str | None = None, launch_count: int = DEFAULT_LAUNCH_COUNT,
                     replay_mode: str = "kernel", sections: Sequence[str] = NCU_SECTIONS) -> list[str]:
    """``ncu`` of a user's command: its first ``launch_count`` kernel launches (of every
    process it starts), with the ``NCU_SECTIONS`` of the HSTU capture, clocks left alone,
    the kernels' source in the report; only those inside the NVTX push/pop range
    ``nvtx_capture`` (ncu ``--nvtx --nvtx-include RANGE/``: the trailing slash names a
    push/pop range, ``DOMAIN@RANGE/`` one of another domain), only those whose function
    name matches ``kernel_regex`` (ncu ``--kernel-name regex:...``); ``replay_mode`` as
    ``ncu_argv``."""
    argv = [ncu, "--clock-control", "none", "--target-processes", "all", *_replay(replay_mode)]
    if nvtx_capture is not None:
        argv += ["--nvtx", "--nvtx-include", f"{nvtx_capture}/"]
    if kernel_regex is not None:
        argv += ["--kernel-name", f"regex:{kernel_regex}"]
    argv += ["--launch-count", str(launch_count)]
    for section in sections:
        argv += ["--section", section]
    argv += ["--import-source", "yes", "--force-overwrite", "-o", str(out_base), *cmd]
    return argv
