"""The GPU's sampled counters (nsys --gpu-metrics-devices) on real captures: ingest, the
gpu-metrics and nvtx-gpu-metrics queries against the export's own rows read with SQLite.

tests/data/nsys_gpu_metrics (and _again, _zeros): programs/nsys_gpu_metrics.py on an H200,
one NVTX range per phase inside a capture range: 100 bf16 GEMMs of 8192^3 (``gemm``), 200
DRAM-bound adds (``copy``), 100 ms with nothing on the GPU (``idle``); _zeros runs the GEMMs
on zeros, which draw less power: the same kernels at a higher SM clock.
"""

from __future__ import annotations

import lzma
import shutil
import sqlite3

import pytest
from conftest import DATA

import tracekit
from tracekit.errors import QueryError

GM = {v: DATA / f"nsys_gpu_metrics{'' if v == 'base' else '_' + v}" / "export.sqlite.xz"
      for v in ("base", "again", "zeros")}


@pytest.fixture(scope="module")
def gm(tmp_path_factory):
    db = tmp_path_factory.mktemp("gm") / "gm.duckdb"
    with tracekit.open(db) as tk:
        for v, path in GM.items():
            tk.ingest(path, name=v)
        tk.ingest(DATA / "nsys_diff_base_a" / "export.sqlite.xz", name="no_metrics")
    tk = tracekit.open(db, read_only=True)
    yield tk
    tk.close()


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """The exports as SQLite files, to read NVIDIA's rows with SQLite itself."""
    out = {}
    for v, path in GM.items():
        dest = tmp_path_factory.mktemp("raw") / f"{v}.sqlite"
        with lzma.open(path) as src, open(dest, "wb") as dst:
            shutil.copyfileobj(src, dst)
        out[v] = sqlite3.connect(dest)
    yield out
    for con in out.values():
        con.close()


def _samples(con: sqlite3.Connection, window: tuple[int, int] | None = None) -> dict[str, list[float]]:
    """Each metric's samples by its name in the export (the clocks in MHz: recorded in Hz)."""
    where = "" if window is None else "WHERE g.timestamp BETWEEN ? AND ?"
    out: dict[str, list[float]] = {}
    for name, value in con.execute(
            "SELECT m.metricName, g.value FROM GPU_METRICS g JOIN TARGET_INFO_GPU_METRICS m "
            f"ON m.typeId = g.typeId AND m.metricId = g.metricId {where}", window or ()):
        out.setdefault(name, []).append(value / 1e6 if name.endswith("[MHz]") else float(value))
    return out


def _window(con: sqlite3.Connection, text: str) -> tuple[int, int]:
    """The GPU projection of the NVTX range ``text`` (one instance): its first GPU op's start to
    its last one's end, of the kernels and copies whose launch call lies inside it on its
    thread; its own span where it launched none."""
    start, end, tid = con.execute(
        'SELECT n.start, n."end", n.globalTid FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId '
        "WHERE coalesce(n.text, s.value) = ? AND n.eventType = 59", [text]).fetchone()
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    ops = " UNION ALL ".join(f'SELECT correlationId, start, "end" FROM {t}' for t in (
        "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET") if t in tables)
    ops = con.execute(
        f'SELECT min(k.start), max(k."end") FROM ({ops}) k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r '
        'ON r.correlationId = k.correlationId WHERE r.globalTid = ? AND r.start >= ? AND r."end" <= ?',
        [tid, start, end]).fetchone()
    return (start, end) if ops[0] is None else ops


def test_the_samples_land_whole_with_their_units(gm, raw):
    """Every sample of the export, one row each; the metric's name without its unit and the
    unit apart; the clocks in MHz (the export's Hz / 1e6)."""
    names = gm.con.execute("SELECT metric_id, metric, unit, nsys_name FROM gpu_metric_names WHERE run_id = 1 "
                           "ORDER BY metric_id").fetchall()
    want = raw["base"].execute("SELECT metricId, metricName FROM TARGET_INFO_GPU_METRICS ORDER BY metricId").fetchall()
    assert [(i, n) for i, _, _, n in names] == want and len(want) == 22
    assert names[0][1:3] == ("GPC Clock Frequency", "MHz") and names[3][1:3] == ("SMs Active", "Throughput %")
    n = raw["base"].execute("SELECT count(*) FROM GPU_METRICS").fetchone()[0]
    assert gm.con.execute("SELECT count(*) FROM gpu_metrics WHERE run_id = 1").fetchone()[0] == n > 90_000
    hz = raw["base"].execute("SELECT max(value) FROM GPU_METRICS WHERE metricId = 0").fetchone()[0]
    assert gm.con.execute("SELECT max(value) FROM gpu_metrics WHERE run_id = 1 AND metric_id = 0").fetchone()[0] \
        == pytest.approx(hz / 1e6) and hz > 1e9


def test_gpu_metrics_over_the_capture_and_inside_a_range(gm, raw):
    """Per metric: samples, mean, min, max as SQLite reads them from the export, over the
    whole capture and inside the ``gemm`` range's GPU projection."""
    for rng, window in ((None, None), ("gemm", _window(raw["base"], "gemm"))):
        df = gm.query("gpu-metrics", run="base", range=rng)
        want = _samples(raw["base"], window)
        got = {f"{r['metric']} [{r['unit']}]": r for r in df.iter_rows(named=True)}
        assert set(got) == set(want)
        for name, values in want.items():
            r = got[name]
            assert r["samples"] == len(values) and r["min"] == pytest.approx(min(values))
            assert r["max"] == pytest.approx(max(values))
            assert r["mean"] == pytest.approx(round(sum(values) / len(values), 1), abs=0.051)
    gemm = {r["metric"]: r for r in gm.query("gpu-metrics", run="base", range="gemm").iter_rows(named=True)}
    assert gemm["Tensor Active"]["mean"] > 90 and 1_000 < gemm["GPC Clock Frequency"]["samples"] < 2_000


def test_nvtx_gpu_metrics_tell_the_phases_apart(gm, raw):
    """Per range: the mean SM clock and the pipes' and memory's activity inside it, as SQLite
    reads them; the GEMMs keep the tensor pipes busy at the lowest clock, the adds the DRAM,
    and the idle phase (no GPU work: its own span) runs at the top clock with nothing active.
    On zeros the same GEMMs ran at a higher clock."""
    rows = {r["range"]: r for r in gm.query("nvtx-gpu-metrics", run="base").iter_rows(named=True)}
    assert set(rows) == {":metrics", ":gemm", ":copy", ":idle"}
    for name in ("gemm", "copy", "idle"):
        window = _window(raw["base"], name)
        want = _samples(raw["base"], window)
        r = rows[f":{name}"]
        assert r["window_ns"] == window[1] - window[0] and r["instances"] == 1
        for col, metric in (("sm_clock_mhz", "GPC Clock Frequency [MHz]"), ("sms_active_pct", "SMs Active [Throughput %]"),
                            ("tensor_active_pct", "Tensor Active [Throughput %]"),
                            ("dram_read_pct", "DRAM Read Bandwidth [Throughput %]")):
            assert r[col] == pytest.approx(sum(want[metric]) / len(want[metric]), abs=0.051), (name, col)
        assert r["samples"] == len(want["GPC Clock Frequency [MHz]"])
    gemm, copy, idle = rows[":gemm"], rows[":copy"], rows[":idle"]
    assert gemm["tensor_active_pct"] > 90 and copy["tensor_active_pct"] == 0 and copy["dram_read_pct"] > 50
    assert idle["sms_active_pct"] == 0 and gemm["sm_clock_mhz"] < copy["sm_clock_mhz"] < idle["sm_clock_mhz"]
    zeros = {r["range"]: r for r in gm.query("nvtx-gpu-metrics", run="zeros").iter_rows(named=True)}
    assert zeros[":gemm"]["sm_clock_mhz"] > 1.1 * gemm["sm_clock_mhz"]


def test_a_run_without_gpu_metrics_is_an_error(gm):
    for q in ("gpu-metrics", "nvtx-gpu-metrics"):
        with pytest.raises(QueryError, match=rf"^{q}: run 4 \(no_metrics\) was captured without GPU metrics tracing; "
                                             r"capture with nsys profile --gpu-metrics-devices=all$"):
            gm.query(q, run="no_metrics")
    with pytest.raises(QueryError, match=r"gpu-metrics: the run has no NVTX range named 'gemmm'"):
        gm.query("gpu-metrics", run="base", range="gemmm")
