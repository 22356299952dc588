"""Finding NVIDIA's profilers (nsys, ncu) on this machine.

Lookup order: ``PATH``, then ``TRACEKIT_NSYS`` / ``TRACEKIT_NCU``, then known install
folders (newest version first), including the ``nsys`` that ships inside an Nsight
Compute install (``/opt/nvidia/nsight-compute/<ver>/host/target-linux-x64/nsys``).
Capture runs them; ingest needs ``nsys`` only to export an ``.nsys-rep`` report.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Mapping, Sequence

from .errors import ToolNotFoundError

ENV_VARS = {"nsys": "TRACEKIT_NSYS", "ncu": "TRACEKIT_NCU"}
KNOWN_LOCATIONS = {
    "nsys": (
        "/opt/nvidia/nsight-systems/*/bin/nsys",
        "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
        "/usr/local/cuda/bin/nsys",
        "/usr/local/cuda-*/bin/nsys",
        "/usr/local/cuda*/nsight-systems-*/bin/nsys",
        "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
        "/usr/lib/nsight-systems/bin/nsys",
    ),
    "ncu": (
        "/usr/local/cuda/bin/ncu",
        "/opt/nvidia/nsight-compute/*/ncu",
        "/usr/local/cuda-*/bin/ncu",
        "/usr/local/cuda*/nsight-compute-*/ncu",
        "/usr/lib/nsight-compute/ncu",
    ),
}


def _version_key(path: str) -> tuple:
    nums = re.findall(r"\d+", path)
    return tuple(int(n) for n in nums)


def find_tool(name: str, *, env: Mapping[str, str] | None = None, search_path: str | None = None,
              known: Sequence[str] | None = None) -> str:
    """The profiler's executable, or ``ToolNotFoundError`` saying where it looked."""
    env = os.environ if env is None else env
    looked: list[str] = []
    found = shutil.which(name, path=search_path if search_path is not None else env.get("PATH"))
    looked.append("PATH")
    if found:
        return found
    var = ENV_VARS[name]
    value = env.get(var)
    if value:
        if os.path.isfile(value) and os.access(value, os.X_OK):
            return value
        looked.append(f"${var}={value} (not an executable file)")
    else:
        looked.append(f"${var} (unset)")
    patterns = KNOWN_LOCATIONS[name] if known is None else known
    for pattern in patterns:
        hits = [p for p in glob.glob(pattern) if os.path.isfile(p) and os.access(p, os.X_OK)]
        if hits:
            return sorted(hits, key=_version_key, reverse=True)[0]
    looked.extend(patterns)
    raise ToolNotFoundError(
        f"{name} not found; looked in: {', '.join(looked)}; install it or set {var}=/path/to/{name}")
