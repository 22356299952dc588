"""What a run folder records about the machine: GPU and clocks as found, versions, git, and the
tracekit settings the workload ran with."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path

GPU_FIELDS = ("name", "driver", "clocks_sm_mhz", "clocks_max_sm_mhz", "clocks_mem_mhz")


def _run(argv: list[str], cwd: Path | None = None, timeout: float = 30) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def gpu_info() -> dict:
    """GPU 0 (of the visible ones) as ``nvidia-smi`` reports it; all None without one.
    Clocks are read, never set."""
    info: dict = dict.fromkeys(GPU_FIELDS)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return info
    out = _run([smi, "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem",
                "--format=csv,noheader,nounits"])
    if not out or not out.strip():
        return info
    parts = [p.strip() for p in out.strip().splitlines()[0].split(",")]
    if len(parts) == 5:
        info["name"], info["driver"] = parts[0], parts[1]
        info["clocks_sm_mhz"], info["clocks_max_sm_mhz"], info["clocks_mem_mhz"] = map(_num, parts[2:])
    return info


def has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        out = _run([smi, "-L"])
        if out and "GPU" in out:
            return True
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(nsys: str | None = None, ncu: str | None = None) -> dict:
    return {
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "triton": package_version("triton"),
        "nsys": nsys,
        "ncu": ncu,
        "tracekit": package_version("tracekit"),
    }


def git_commit() -> str | None:
    """HEAD of the checkout this package runs from, ``+dirty`` when it has changes."""
    here = Path(__file__).resolve().parent
    head = _run(["git", "rev-parse", "HEAD"], cwd=here)
    if not head:
        return None
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here)
    return head.strip() + ("+dirty" if status and status.strip() else "")


#: environment variables that change what a capture runs: the kernels' backend and tiles,
#: the profiler binaries, PyTorch's caching allocator (expandable segments map GPU memory in
#: 20 MiB pieces: other allocations, the same bytes), CUDA's launches made synchronous and its
#: module loading (lazy: each module's static memory and load time at its first launch)
SETTINGS_ENV = ("TRACEKIT_KERNELS_BACKEND", "TRACEKIT_TILES", "TRACEKIT_NSYS", "TRACEKIT_NCU",
                "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING")
#: a tiles file larger than this is not hashed (the kernels' own files are a few kB)
TILES_HASH_MAX_BYTES = 16 << 20


def settings() -> dict:
    """The settings that change what the workload runs: those of ``SETTINGS_ENV`` that are
    set, and the tiles file the kernels read: its absolute path and, for a regular file of
    up to ``TILES_HASH_MAX_BYTES``, the sha256 of its content (None: no such file, the
    built-in tiles; or not hashed), so that two captures with other tuned tiles are told
    apart."""
    from tracekit.kernels.tiles import tiles_path

    path = tiles_path().expanduser().absolute()
    digest = None
    try:
        if path.is_file() and path.stat().st_size <= TILES_HASH_MAX_BYTES:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
    except OSError:
        digest = None  # (unreadable: not hashed; an HSTU capture refuses it before it runs, run.check_tiles_file)
    env = {k: os.environ[k] for k in SETTINGS_ENV if k in os.environ}
    return {"env": env, "tiles_file": str(path), "tiles_sha256": digest}
