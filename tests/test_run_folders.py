"""Run folders (what `tracekit capture` writes) ingest as one run with their parameters."""

from __future__ import annotations

import json
import shutil

from conftest import DATA

import tracekit


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

    def never(*a, **k):  # NVIDIA's module crashed in-process on the GPU machine: not loaded here
        raise AssertionError("the .ncu-rep was read although the raw CSV is there")

    monkeypatch.setattr(ncu_rep, "read_report", never)
    tk = tracekit.open(tmp_path / "s.duckdb")
    res = tk.ingest(run)
    assert res.kind == "ncu,timing" and res.rows["requests"] == 2 and res.rows["ncu_kernels"] == 4
    row = tk.sql("SELECT name, params, meta FROM runs").to_dicts()[0]
    assert row["name"] == run.name and json.loads(row["params"]) == {"bs": 8, "nc": 1024}
    # the raw CSV wins over the report and the details page (one export per kind)
    assert json.loads(row["meta"])["ncu_export"] == "csv-raw"
    assert tk.ingest(run).skipped  # same folder content: no-op
    assert tk.query("ncu-kernels", limit=0).height == 4
    tk.close()
