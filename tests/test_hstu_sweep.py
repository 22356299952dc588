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


def test_sweep_spreadsheet_and_chart(tk, tmp_path):
    from openpyxl import load_workbook
    from tracekit.capture.export import export_sweep

    out = tmp_path / "sweep.xlsx"
    export_sweep(tk, out)
    wb = load_workbook(out, read_only=True)
    names = set(wb.sheetnames)
    assert {"results", "bs1", "bs2", "bs4", "bs8", "nc128", "nc256", "nc512", "nc1024"} <= names
    rows = list(wb["results"].iter_rows(values_only=True))
    # the seed's columns first, one row per timed request
    assert rows[0][:6] == ("file", "batch_size", "num_candidate", "kv_caches", "candidate_embeddings", "total_time_ms")
    assert len(rows) - 1 == 16 * 20
    bs8 = list(wb["bs8"].iter_rows(values_only=True))
    assert len(bs8) - 1 == 4 * 20 and all(r[1] == 8 for r in bs8[1:])
    png = tmp_path / "sweep.png"
    charts.save(charts.chart(tk, "sweep-latency"), png)
    assert png.read_bytes()[:4] == b"\x89PNG"
