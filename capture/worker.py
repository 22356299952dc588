"""The workload process: ``python -m tracekit.capture.worker RUN_DIR/spec.json``.

This is what runs under nsys/ncu (or alone for ``--tool none``). It reads the spec the
parent wrote, runs warm-up + timed requests, prints the seed's line per request, writes
``requests.csv`` row by row and ``worker.json`` (device, versions, latency statistics)
into the run folder. It exits 1 with a one-line message on stderr when the workload
fails, 130 when interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from .profilers import NCU_RANGE  # the range ncu --nvtx-include selects

#: the start of each line of a failed workload's traceback: capture.log keeps them, the
#: console leaves them out (its error is one line)
TRACEBACK_MARK = "worker traceback| "


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _gpu_sampler(device: str):
    """The NVML sampler of the GPU the workload runs on (``nvml.Sampler``); None on the CPU,
    or where NVML cannot tell that GPU."""
    if device != "cuda":
        return None
    import torch

    from .nvml import Sampler

    uuid = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None)
    if uuid is None:  # (a PyTorch without it: NVML's first GPU is this one only where it is the only one)
        return Sampler.open(None) if torch.cuda.device_count() == 1 and "CUDA_VISIBLE_DEVICES" not in os.environ \
            else None
    text = str(uuid)
    return Sampler.open(text if text.startswith("GPU-") else f"GPU-{text}")


def run(spec: dict, run_dir: Path) -> dict:
    import torch

    from .config import WorkloadConfig
    from .model import attention_backend, attention_kernel, nvtx
    from .nvml import summary as gpu_summary
    from .timing import RequestsCsv, latency_stats, run_requests
    from .workload import Workload

    cfg = WorkloadConfig(**spec["workload"])
    device = spec.get("device") or "auto"
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device cuda requested but torch.cuda.is_available() is False")
    info: dict = {
        "started_at": _now(),
        "device": device,
        "gpu_name": torch.cuda.get_device_name() if device == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "dtype": cfg.gpu_dtype if device == "cuda" else "float32",
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:  # triton is optional on CPU
        info["triton"] = None
    info["attention_backend"] = attention_backend(device)
    print(f"workload: preset={cfg.preset} bs={spec['bs']} nc={spec['nc']} device={device} "
          f"dtype={info['dtype']} attention={info['attention_backend']}", flush=True)

    torch.manual_seed(cfg.seed)
    t_build = time.perf_counter()
    with torch.inference_mode():
        workload = Workload(cfg, spec["bs"], spec["nc"], device)
        info["build_s"] = round(time.perf_counter() - t_build, 3)
        tool = spec["tool"]
        csv_out = RequestsCsv(run_dir / "requests.csv")

        sampler, samples = _gpu_sampler(device), []

        def on_row(row, line):
            if sampler is not None and row.phase == "timed":  # (after the request's end event: untimed)
                samples.append(sampler.sample())
            csv_out.write(row)
            print(f"[{row.phase} {row.request_idx}] {line}", flush=True)

        hooks: dict = {}
        if tool == "nsys":
            hooks["before_timed"] = torch.cuda.profiler.start
            hooks["after_timed"] = torch.cuda.profiler.stop
        elif tool == "ncu":
            def profiled(one):
                with nvtx(NCU_RANGE):
                    row = one("warmup")
                info["ncu_profiled_request_idx"] = row.request_idx
            hooks["between"] = profiled
        try:
            rows = run_requests(workload, warmup_ms=spec["warmup_ms"], iters=spec["iters"],
                                flush_l2=spec.get("flush_l2", True), on_row=on_row, **hooks)
        finally:
            csv_out.close()
    info["attention_kernel"] = attention_kernel()
    timed = [r.latency_ms for r in rows if r.phase == "timed"]
    info["stats"] = latency_stats(timed)
    info["warmup_requests"] = sum(r.phase == "warmup" for r in rows)
    info["gpu_timed"] = gpu_summary(samples)
    peaks = [r.peak_mem_allocated_mb for r in rows if r.phase == "timed" and r.peak_mem_allocated_mb is not None]
    info["peak_mem_allocated_mb"] = max(peaks) if peaks else None
    info["finished_at"] = _now()
    s = info["stats"]
    print(f"timed requests: {s['requests']}  median {s['median_ms']:.3f} ms  p95 {s['p95_ms']:.3f} ms  "
          f"p99 {s['p99_ms']:.3f} ms", flush=True)
    return info


def _stop_once(signum, frame) -> None:
    """SIGINT: stop the workload (KeyboardInterrupt), once. A Ctrl-C reaches the worker from the
    terminal and again from capture or the profiler as they stop it: a later one would break
    off its exit (worker.json unwritten, torch's atexit handlers' tracebacks on the console)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m tracekit.capture.worker RUN_DIR/spec.json", file=sys.stderr)
        return 2
    spec_path = Path(argv[0])
    spec = json.loads(spec_path.read_text())
    run_dir = spec_path.parent
    try:
        info = run(spec, run_dir)
        status, code = "ok", 0
    except KeyboardInterrupt:
        info, status, code = {"error": "interrupted"}, "interrupted", 130
    except Exception as exc:  # the parent reports it; the traceback goes to the log
        print("".join(f"{TRACEBACK_MARK}{line}\n" for line in traceback.format_exc().splitlines()), end="",
              file=sys.stderr, flush=True)
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0]
        info, status, code = {"error": msg}, "failed", 1
        print(f"workload failed: {msg}", file=sys.stderr, flush=True)
    info["status"] = status
    (run_dir / "worker.json").write_text(json.dumps(info, indent=2))
    return code


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _stop_once)  # (the process's own: not where main is called in another's)
    sys.exit(main())
