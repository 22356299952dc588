"""The GPU's state as the timed requests ran (capture/nvml.py, meta.json's gpu_timed): its
summary of NVML's reads, and the sweep-latency columns over the real sweep that recorded it
(tests/data/hstu_sweep_clocks) and one taken before tracekit read it (tests/data/hstu_sweep)."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from conftest import DATA
from tracekit.capture.nvml import GpuSample, summary

import tracekit

CLOCKS = DATA / "hstu_sweep_clocks" / "runs"


def test_summary_of_the_reads():
    reads = [GpuSample(1980, 3201, 40, 120.5, 0x1), GpuSample(1755, 3201, 44, 300.0, 0x4 | 0x20),
             GpuSample(1900, None, 42, None, 0x4), GpuSample(None, 3201, None, 150.0, None)]
    s = summary(reads)
    assert s["samples"] == 4
    assert s["sm_clock_mhz"] == {"min": 1755, "median": 1900, "max": 1980}
    assert s["temp_c"] == {"min": 40, "median": 42, "max": 44}
    assert s["power_w"] == {"min": 120.5, "median": 150.0, "max": 300.0}
    # the idle GPU (0x1) is no slowdown; shares of the reads that told the reasons (3)
    assert s["slowdown_pct"] == {"sw_power_cap": 66.7, "sw_thermal": 33.3}
    assert summary([GpuSample(1980, 3201, 40, 100.0, 0x1)])["slowdown_pct"] == {}
    assert summary([GpuSample(None, None, None, None, None)])["sm_clock_mhz"] is None
    assert summary([]) is None


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("clocks") / "s.duckdb")
    for run in sorted(p for p in CLOCKS.iterdir() if p.is_dir()):
        t.ingest(run)
    yield t
    t.close()


def test_sweep_latency_gives_the_clock_the_requests_ran_at(tk):
    df = tk.query("sweep-latency", limit=0)
    assert df.height == 4
    for row in df.iter_rows(named=True):
        meta = json.loads((CLOCKS / row["run"] / "meta.json").read_text())
        g = meta["gpu_timed"]
        assert g["samples"] == row["requests"] == 20
        assert row["sm_clock_mhz"] == g["sm_clock_mhz"]["median"] == 1980  # (the H200's maximum: no slowdown)
        assert row["sm_clock_min_mhz"] == g["sm_clock_mhz"]["min"]
        assert row["temp_max_c"] == g["temp_c"]["max"]
        assert row["slowdown"] == ""
        # the warm-up budget counted from the end of the first request, which compiled the kernels
        assert meta["latency"]["warmup_requests"] > 10


def test_a_slowdown_is_named_with_its_share(tk, tmp_path):
    """A point whose reads saw the power cap and the thermal slowdown (the real fixture's
    meta.json with its gpu_timed as such a capture writes it)."""
    run = sorted(p for p in CLOCKS.iterdir() if p.is_dir())[0]
    copy = shutil.copytree(run, tmp_path / "slowed")
    meta = json.loads((copy / "meta.json").read_text())
    meta["params"]["sweep"] = "slowed"
    meta["gpu_timed"]["sm_clock_mhz"] = {"min": 1410, "median": 1755, "max": 1980}
    meta["gpu_timed"]["slowdown_pct"] = {"sw_thermal": 5.0, "sw_power_cap": 40.0}
    (copy / "meta.json").write_text(json.dumps(meta))
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(copy)
        (row,) = t.query("sweep-latency").iter_rows(named=True)
    assert (row["sm_clock_mhz"], row["sm_clock_min_mhz"]) == (1755, 1410)
    assert row["slowdown"] == "sw_power_cap 40.0%, sw_thermal 5.0%"


def test_a_sweep_taken_before_tracekit_read_the_clock_has_none(tmp_path):
    with tracekit.open(tmp_path / "s.duckdb") as t:
        for run in sorted((DATA / "hstu_sweep" / "runs").iterdir())[:2]:
            t.ingest(run)
        df = t.query("sweep-latency")
    assert df["sm_clock_mhz"].null_count() == df["slowdown"].null_count() == df.height == 2


def _point(src, dest, scale: float, mhz: float):
    """A copy of the real point ``src``, outside its sweep, with its requests' latencies x
    ``scale`` and its SM clock read as ``mhz``: a capture at another clock."""
    import csv

    d = shutil.copytree(src, dest)
    meta = json.loads((d / "meta.json").read_text())
    for k in ("sweep", "sweep_point"):
        meta["params"].pop(k)
    meta["gpu_timed"]["sm_clock_mhz"] = {"min": mhz, "median": mhz, "max": mhz}
    (d / "meta.json").write_text(json.dumps(meta))
    with open(d / "requests.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["latency_ms"] = repr(float(r["latency_ms"]) * scale)
    with open(d / "requests.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return d


def test_diff_holds_a_latency_change_the_clock_accounts_for(tmp_path):
    """The first point against itself 50 % slower at a third lower clock: held, the clock's
    (at the base's clock -2.3 %); 51 % slower at a 4 % lower clock: regressed, the clocks said;
    30 % slower at the same clock: regressed, no word of the clock."""
    runs = sorted(p for p in CLOCKS.iterdir() if p.is_dir())
    base = _point(runs[0], tmp_path / "base", 1, 1980)
    held = _point(runs[0], tmp_path / "held", 1.5, 1290)
    slower = _point(runs[0], tmp_path / "slower", 1.51, 1900)
    with tracekit.open(tmp_path / "s.duckdb") as t:
        for d in (base, held, slower):
            t.ingest(d, name=d.name)
        for new, verdict, said in (
                ("held", "unchanged", "moved with the SM clock (1,980 -> 1,290 MHz, -34.8%, as the timed requests "
                                      "ran): -2.3% at the base's clock, within the latency noise of identical "
                                      "captures (25%): the clock, not the code"),
                ("slower", "regressed", "SM clock 1,980 -> 1,900 MHz, -4.0%, as the timed requests ran")):
            (row,) = t.diff("base", new).filter(pl.col("metric") == "latency_med_ms").iter_rows(named=True)
            assert row["verdict"] == verdict and row["note"].endswith(said), row
        t.ingest(_point(runs[0], tmp_path / "same", 1.3, 1980), name="same")
        df = t.diff("base", "same")
    assert set(df.filter(pl.col("metric") == "latency_med_ms")["verdict"]) == {"regressed"}
    assert not df.filter(pl.col("note").str.contains("clock")).height


def test_no_nvml_or_an_old_one_reads_nothing(monkeypatch):
    """Without the driver's library (this machine), or with one that lacks a function the
    reads need, there is no sampler: the capture goes on without the GPU's state."""
    import ctypes
    from types import SimpleNamespace

    from tracekit.capture.nvml import Sampler

    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert Sampler.open(None) is None and Sampler.open("GPU-0") is None
    old = SimpleNamespace(nvmlInit_v2=lambda: 0, nvmlDeviceGetHandleByIndex=lambda *a: 0)  # (no clock reads)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: old)
    assert Sampler.open(None) is None and Sampler.open("GPU-0") is None
