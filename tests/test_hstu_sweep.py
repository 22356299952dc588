"""The real 16-point sweep (H200, large preset, --tool none): run folders -> sweep queries,
the seed's spreadsheet and the chart. The expected figures are what tracekit computed on
the GPU machine right after the sweep (tests/data/hstu_sweep/sweep-latency.csv)."""

from __future__ import annotations

import csv

import pytest
from conftest import DATA

import tracekit
from tracekit import charts

SWEEP = DATA / "hstu_sweep"


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("sweep") / "s.duckdb")
    for run in sorted((SWEEP / "runs").iterdir()):
        t.ingest(run)
    yield t
    t.close()


def test_sweep_latency_as_computed_on_the_gpu_machine(tk):
    ours = {(r["bs"], r["nc"]): r for r in tk.query("sweep-latency", limit=0).to_dicts()}
    with open(SWEEP / "sweep-latency.csv", newline="") as fh:
        golden = [r for r in csv.DictReader(fh) if r["tool"] == "none"]
    assert len(ours) == len(golden) == 16
    for g in golden:
        r = ours[(int(g["bs"]), int(g["nc"]))]
        assert r["requests"] == int(g["requests"]) == 20
        for col in ("median_ms", "p95_ms", "p99_ms", "min_ms", "max_ms"):
            assert r[col] == pytest.approx(float(g[col]), rel=1e-9), col



def test_sweep_latency_spread_memory_and_throughput_from_the_requests(tk):
    """std_ms, peak_mem_reserved_mb, users_per_s and candidates_per_s of each point, from
    its run folder's requests.csv (the timed requests) as numpy computes them."""
    import numpy as np

    ours = {r["run"]: r for r in tk.query("sweep-latency", limit=0).to_dicts()}
    assert len(ours) == 16
    for folder in sorted((SWEEP / "runs").iterdir()):
        with open(folder / "requests.csv", newline="") as fh:
            timed = [r for r in csv.DictReader(fh) if r["phase"] == "timed"]
        lat = np.array([float(r["latency_ms"]) for r in timed])
        r = ours[folder.name]
        assert r["std_ms"] == pytest.approx(np.std(lat, ddof=1), rel=1e-9)
        assert r["peak_mem_reserved_mb"] == pytest.approx(max(float(x["peak_mem_reserved_mb"]) for x in timed))
        assert r["peak_mem_reserved_mb"] >= r["peak_mem_allocated_mb"] > 0
        assert r["users_per_s"] == pytest.approx(r["bs"] * 1000 / lat.mean(), rel=1e-9)
        assert r["candidates_per_s"] == pytest.approx(r["bs"] * r["nc"] * 1000 / lat.mean(), rel=1e-9)


def test_sweep_spreadsheet_and_chart(tk, tmp_path):
    from openpyxl import load_workbook
    from tracekit.capture.export import export_sweep

    out = tmp_path / "sweep.xlsx"
    export_sweep(tk, out)
    wb = load_workbook(out)
    assert wb.sheetnames == ["summary", "grid", "chart", "results", "bs1", "bs2", "bs4", "bs8",
                             "nc128", "nc256", "nc512", "nc1024"]
    latency = tk.query("sweep-latency", limit=0)
    # one vocabulary: the queries' column names, in every sheet
    summary = list(wb["summary"].iter_rows(values_only=True))
    assert summary[0] == tuple(latency.columns)
    rows = list(wb["results"].iter_rows(values_only=True))
    assert rows[0] == ("run", "preset", "tool", "bs", "nc", "request_idx", "kv_caches", "candidate_embeddings",
                       "latency_ms", "model_flop", "attention_flop", "model_tflops_per_s")
    assert len(rows) - 1 == 16 * 20
    bs8 = list(wb["bs8"].iter_rows(values_only=True))
    assert len(bs8) - 1 == 4 * 20 and all(r[3] == 8 for r in bs8[1:])
    # tables: frozen header, an autofilter over the table, ms with three decimals, widths
    for name in ("summary", "results", "bs8", "nc1024"):
        ws = wb[name]
        assert ws.freeze_panes == "A2" and ws.auto_filter.ref == f"A1:{ws.cell(1, ws.max_column).column_letter}{ws.max_row}"
        assert ws["A1"].font.b
    s = wb["summary"]
    col = {c.value: c.column_letter for c in s[1]}
    assert s[f"{col['median_ms']}2"].number_format == "#,##0.000" and s[f"{col['requests']}2"].number_format == "#,##0"
    assert s.column_dimensions[col["run"]].width >= len("20261122T012018.159Z-bs1-nc128-none")
    assert wb["results"]["I2"].number_format == "#,##0.000"
    # the bs x nc grid holds sweep-latency's medians, under a colour scale
    g = wb["grid"]
    assert [c.value for c in g[2]] == ["bs \\ nc", 128, 256, 512, 1024]
    grid = {(g.cell(r, 1).value, g.cell(2, c).value): g.cell(r, c).value for r in range(3, 7) for c in range(2, 6)}
    # (xlsx keeps 15 significant digits)
    assert grid == pytest.approx({(r["bs"], r["nc"]): r["median_ms"] for r in latency.iter_rows(named=True)}, rel=1e-14)
    assert g["C4"].number_format == "#,##0.000"
    (cf,) = g.conditional_formatting
    assert str(cf.sqref) == "B3:E6" and [r.type for r in cf.rules] == ["colorScale"]
    # the chart: median latency against nc, one line per bs, drawn from the grid
    (chart,) = wb["chart"]._charts
    assert chart.tagname == "lineChart" and len(chart.series) == 4
    assert [s.tx.v for s in chart.series] == ["bs=1", "bs=2", "bs=4", "bs=8"]
    assert chart.series[3].val.numRef.f == "'grid'!$B$6:$E$6" and chart.series[0].cat.numRef.f == "'grid'!$B$2:$E$2"
    png = tmp_path / "sweep.png"
    charts.save(charts.chart(tk, "sweep-latency"), png)
    assert png.read_bytes()[:4] == b"\x89PNG"
