"""The GPU's clocks, temperature, power and clock-slowdown reasons, read through NVML (the
driver's ``libnvidia-ml.so.1``, by ctypes: no package needed) while the workload runs:
the state the timed requests ran in, where ``nvidia-smi`` before the run sees an idle GPU.
Read only; nothing is set.

``Sampler.open(uuid)`` gives a sampler of one GPU (None where NVML or the GPU is not
there); ``sample()`` reads it once; ``summary(samples)`` is what a run folder records.
"""

from __future__ import annotations

import ctypes
import statistics
from dataclasses import dataclass

NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
NVML_TEMPERATURE_GPU = 0

#: the clock event reasons (nvmlClocksEventReasons) that hold the SM clock below what the
#: work asks for, by bit; the others (the GPU idle, sync boost, the clocks an application or
#: the display set) are not a slowdown of the work
SLOWDOWNS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}


@dataclass(frozen=True)
class GpuSample:
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    temp_c: int | None
    power_w: float | None
    reasons: int | None  # the clock event reasons' bits


class Sampler:
    """One GPU's state through NVML."""

    def __init__(self, lib, handle):
        self._lib, self._handle = lib, handle
        # (the reasons' function took its newer name in driver 535; the old one stays)
        self._reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)

    @classmethod
    def open(cls, uuid: str | None) -> Sampler | None:
        """The sampler of the GPU of ``uuid`` (``GPU-...``, as PyTorch's device properties
        give it; None: the first GPU NVML lists); None where NVML cannot be loaded or
        started, or has no such GPU."""
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError:
            return None
        init = getattr(lib, "nvmlInit_v2", None) or getattr(lib, "nvmlInit", None)
        if init is None or init() != 0:
            return None
        handle = ctypes.c_void_p()
        get = (getattr(lib, "nvmlDeviceGetHandleByUUID", None) if uuid is not None else
               getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or getattr(lib, "nvmlDeviceGetHandleByIndex", None))
        if get is None or any(getattr(lib, f, None) is None for f in (
                "nvmlDeviceGetClockInfo", "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage")):
            return None  # (a library without them: no reads, the capture goes on)
        found = get(uuid.encode() if uuid is not None else ctypes.c_uint(0), ctypes.byref(handle))
        return cls(lib, handle) if found == 0 else None

    def _uint(self, fn, *args) -> int | None:
        out = ctypes.c_uint()
        return out.value if fn(self._handle, *args, ctypes.byref(out)) == 0 else None

    def sample(self) -> GpuSample:
        lib = self._lib
        power_mw = self._uint(lib.nvmlDeviceGetPowerUsage)
        reasons = None
        if self._reasons is not None:
            bits = ctypes.c_ulonglong()
            if self._reasons(self._handle, ctypes.byref(bits)) == 0:
                reasons = bits.value
        return GpuSample(self._uint(lib.nvmlDeviceGetClockInfo, ctypes.c_int(NVML_CLOCK_SM)),
                         self._uint(lib.nvmlDeviceGetClockInfo, ctypes.c_int(NVML_CLOCK_MEM)),
                         self._uint(lib.nvmlDeviceGetTemperature, ctypes.c_int(NVML_TEMPERATURE_GPU)),
                         None if power_mw is None else power_mw / 1000, reasons)


def _spread(values: list) -> dict | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"min": min(present), "median": statistics.median(present), "max": max(present)}


def summary(samples: list[GpuSample]) -> dict | None:
    """What a run folder records of the samples (one after each timed request): their count,
    the SM and memory clocks, temperature and power (min, median, max), and per slowdown
    reason the share of the samples it was active in (%, only those seen); None for none."""
    if not samples:
        return None
    reasons = [s.reasons for s in samples if s.reasons is not None]
    return {
        "samples": len(samples),
        "sm_clock_mhz": _spread([s.sm_clock_mhz for s in samples]),
        "mem_clock_mhz": _spread([s.mem_clock_mhz for s in samples]),
        "temp_c": _spread([s.temp_c for s in samples]),
        "power_w": _spread([s.power_w for s in samples]),
        "slowdown_pct": {name: round(100 * sum(bool(r & bit) for r in reasons) / len(reasons), 1)
                         for bit, name in SLOWDOWNS.items() if any(r & bit for r in reasons)} if reasons else None,
    }
