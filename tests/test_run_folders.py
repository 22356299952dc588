"""Run folders (what `tracekit capture` writes) ingest as one run with their parameters."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DATA

import tracekit
from tracekit.errors import QueryError


def test_run_folder_with_ncu_exports_and_requests(tmp_path, monkeypatch):
    run = tmp_path / "20261122T000000Z-bs8-nc1024-ncu"
    run.mkdir()
    src = DATA / "ncu_sections"
    shutil.copy(src / "report.ncu-rep.xz", run / "ncu.ncu-rep.xz")
    shutil.copy(src / "raw.csv.xz", run / "ncu_raw.csv.xz")
    shutil.copy(src / "details.csv.xz", run / "ncu_details.csv.xz")
    (run / "requests.csv").write_text(
        "request_idx,phase,bs,nc,kv_caches,candidate_embeddings,latency_ms,peak_mem_allocated_mb,peak_mem_reserved_mb\n"
        "0,warmup,8,1024,8,1024,20.5,100.0,200.0\n1,timed,8,1024,8,1024,12.25,100.0,200.0\n")
    (run / "meta.json").write_text(json.dumps({"name": run.name, "tool": "ncu", "params": {"bs": 8, "nc": 1024}}))
    (run / "capture.log").write_text("not ingested\n")
    from tracekit.ingest import ncu_rep

    def never(*a, **k):  # NVIDIA's module crashed in-process beside DuckDB on the GPU machine
        raise AssertionError("the .ncu-rep was read in the ingesting process")

    monkeypatch.setattr(ncu_rep, "_read_here", never)  # the child interpreter reads it
    tk = tracekit.open(tmp_path / "s.duckdb")
    res = tk.ingest(run)
    assert res.kind == "ncu,timing" and res.rows["requests"] == 2 and res.rows["ncu_kernels"] == 4
    row = tk.sql("SELECT name, params, meta FROM runs").to_dicts()[0]
    assert row["name"] == run.name and json.loads(row["params"]) == {"bs": 8, "nc": 1024}
    # the report wins over the raw CSV and the details page (one export per kind): every
    # metric and ncu's rule results
    assert json.loads(row["meta"])["ncu_export"] == "ncu-rep"
    assert tk.query("ncu-rules", limit=0).height == res.rows["ncu_rules"] == 10
    assert tk.ingest(run).skipped  # same folder content: no-op
    assert tk.query("ncu-kernels", limit=0).height == 4
    # without the report, the raw CSV wins over the details page; it has no rule results
    tk.close()
    (run / "ncu.ncu-rep.xz").unlink()
    tk = tracekit.open(tmp_path / "s2.duckdb")
    tk.ingest(run)
    assert json.loads(tk.sql("SELECT meta FROM runs")["meta"][0])["ncu_export"] == "csv-raw"
    with pytest.raises(QueryError, match="raw CSV page has none"):
        tk.query("ncu-rules")
    tk.close()
