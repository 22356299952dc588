"""The attention benchmark's timing on a GPU (skipped without CUDA): each timed call is GPU
time only, whatever the host's launch costs (kernels/bench.py: a GPU-side delay before each
call's start event). The figures of the H200 it was made on are in docs/performance.md
("BSA seed configurations timed as GPU time")."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)
pytest.importorskip("triton")

from tracekit.kernels.bench import bench_attention  # noqa: E402

SHORT = dict(variants=("triton_dense",), baseline="triton_dense", dtype="bf16", warmup_ms=20, rep_ms=100,
             device="cuda")


def test_timed_calls_are_gpu_time_not_the_hosts_launch():
    """The seed sizes, whose kernels take less time than the host takes to launch them: no
    timed call started before it was queued, the durations are tight (shortest at least half
    the median) and grow with the work (seed5 has 64x seed1's pairs); without the delay the
    same kernel "takes" the host's launch time, several times longer."""
    rows = {r["config"]: r for r in bench_attention(["seed1", "seed3", "seed5"], **SHORT)}
    for name, r in rows.items():
        assert r["error"] is None and r["matches_reference"], (name, r)
        assert r["late_calls"] == 0 and r["gpu_delay_ms"] > 0, (name, r)
        assert r["min_ms"] >= 0.5 * r["median_ms"], (name, r)
    assert rows["seed1"]["median_ms"] < rows["seed5"]["median_ms"]
    (host_bound,) = bench_attention(["seed1"], **SHORT, gpu_delay=False)
    assert host_bound["median_ms"] > 2 * rows["seed1"]["median_ms"], (host_bound, rows["seed1"])
