"""CUDA API calls with their call stacks (nsys --cudabacktrace, with the CPU sampled) and their
Python stacks (--python-backtrace=cuda): each call counted once, not with the backtrace event nsys
writes beside it, and api-stacks, checked against what tests/data/programs/nsys_backtrace.py says
it ran (tests/data/nsys_backtrace/README.md)."""

from __future__ import annotations

import csv
import re
import sqlite3
from contextlib import closing

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS, edited_export

import tracekit
from tracekit.errors import CaptureWarning, QueryError
from tracekit.ingest import materialized

FIXTURE = DATA / "nsys_backtrace"


def _ran() -> dict[str, int]:
    """What the program printed: each function and how many times it ran."""
    text = (FIXTURE / "profile.log").read_text()
    return {f: int(n) for f, n in re.findall(r"^(\w+): line \d+, (\d+) calls$", text, re.M)}


def _lines() -> dict[str, int]:
    """What the program printed: each function's last line (its return statement)."""
    text = (FIXTURE / "profile.log").read_text()
    return {f: int(n) for f, n in re.findall(r"^(\w+): line (\d+), \d+ calls$", text, re.M)}


def _calls_of(scen: str, classes: str) -> dict[str, int]:
    """The export's CUPTI_ACTIVITY_KIND_RUNTIME rows of the event classes ``classes`` (SQL),
    counted by name as recorded."""
    with materialized(NSYS_EXPORTS[scen]) as path, closing(sqlite3.connect(path)) as sq:
        return dict(sq.execute("SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                               f"ON s.id = r.nameId WHERE r.eventClass IN ({classes}) GROUP BY 1").fetchall())


def test_each_call_is_counted_once_not_with_its_backtrace_event(nsys_db):
    """nsys writes a "CUDA backtrace" event (eventClass 67) beside each call it unwound, and nsys
    stats counts it as a call (stats_with_backtrace_events: cudaHostAlloc on two rows); tracekit
    counts the runtime's and the driver's calls, each once, as NVIDIA's reports of the export
    without those events do (stats/, the goldens)."""
    run = "(SELECT run_id FROM runs WHERE name = 'backtrace')"
    ours = dict(nsys_db.sql(f"SELECT raw_name, count(*) FROM api_calls WHERE run_id = {run} GROUP BY 1").rows())
    assert ours == _calls_of("backtrace", "0, 1")
    unwound = _calls_of("backtrace", "67")  # (named without the _vNNNN of the call's name)
    assert len(unwound) >= 8 and all(any(re.fullmatch(rf"{n}(_v\d+)?", o) for o in ours) for n in unwound)
    calls = nsys_db.query("api-summary", run="backtrace", limit=0)
    with open(FIXTURE / "stats_with_backtrace_events" / "cuda_api_sum.csv", newline="") as fh:
        doubled = [r["Name"] for r in csv.DictReader(fh)]
    assert doubled.count("cudaHostAlloc") == 2 and list(calls["name"]).count("cudaHostAlloc") == 1
    with_stack = nsys_db.sql(f"SELECT count(*) FROM api_calls WHERE run_id = {run} AND callchain_id IS NOT NULL").item()
    assert with_stack == sum(unwound.values()) - 1  # (the first cudaHostAlloc's event has no stack: callchainId 0)


def test_api_stacks_name_the_code_that_made_each_call(nsys_db):
    """read_loss's .item() (ATen's _local_scalar_dense) made a copy to the host and a
    synchronization each time it ran; forward's relu (ATen's clamp_min) a kernel launch each
    time; upload's .to("cuda") (THPVariable_to) a copy each time. Each stack runs from the
    outermost caller to the runtime function called, CUPTI's and the driver's frames left out
    (cuBLAS's calls, through the runtime linked into it, end in its unresolved frames)."""
    ran = _ran()
    assert ran == {"upload": 2, "forward": 20, "read_loss": 4}
    stacks = nsys_db.query("api-stacks", run="backtrace", frames="native", limit=0)

    def calls(frame: str) -> dict[str, int]:
        hit = stacks.filter(pl.col("stack").str.contains(frame, literal=True))
        return dict(hit.group_by("name").agg(pl.col("calls").sum()).iter_rows())

    item = calls("at::native::_local_scalar_dense")
    assert (item["cudaMemcpyAsync"], item["cudaStreamSynchronize"]) == (ran["read_loss"], ran["read_loss"])
    assert calls("clamp_min") == {"cudaLaunchKernel": ran["forward"]}
    assert calls("THPVariable_to")["cudaMemcpyAsync"] == ran["upload"]
    assert stacks["stack"].str.starts_with("_start;").all()
    ends = stacks["stack"].str.split(";").list.last() == stacks["name"]
    assert (ends | stacks["stack"].str.contains("cublasCreate", literal=True)).all() and ends.sum() > stacks.height / 2
    assert (stacks["total_ns"] >= stacks["max_ns"]).all() and stacks["calls"].sum() == 49
    syncs = nsys_db.query("api-stacks", run="backtrace", name="synchronize", frames="native", limit=0)
    assert set(syncs["name"]) == {"cudaStreamSynchronize", "cudaDeviceSynchronize"}


def test_the_python_stacks_name_the_line_that_made_each_call(nsys_db):
    """Each call nsys unwound has its Python stack too (a mark nsys wrote on the call's thread at
    its backtrace event's start, its payload decoded): the innermost frame is the function of the
    program that made the call, at the line that made it, under main and the module; read_loss made
    the copies and syncs of .item(), forward the relu launches, upload the copies to the GPU."""
    ran, lines = _ran(), _lines()
    run = "(SELECT run_id FROM runs WHERE name = 'backtrace')"
    with_python = nsys_db.sql(f"SELECT count(python_stack_id) FROM api_calls WHERE run_id = {run}").item()
    assert with_python == sum(_calls_of("backtrace", "67").values())  # (every unwound call, the first one too)
    stacks = nsys_db.query("api-stacks", run="backtrace", frames="python", limit=0)
    assert stacks["stack"].str.starts_with("<module> (nsys_backtrace.py:").all()

    def calls(fn: str) -> dict[str, int]:
        hit = stacks.filter(pl.col("stack").str.ends_with(f";{fn} (nsys_backtrace.py:{lines[fn]})"))
        return dict(hit.group_by("name").agg(pl.col("calls").sum()).iter_rows())

    assert (calls("read_loss")["cudaMemcpyAsync"], calls("read_loss")["cudaStreamSynchronize"]) == (ran["read_loss"],) * 2
    assert calls("forward")["cudaLaunchKernel"] == ran["forward"]
    assert calls("upload")["cudaMemcpyAsync"] == ran["upload"] and calls("upload")["cudaHostAlloc"] == 1
    frames = nsys_db.sql(f"SELECT DISTINCT function FROM python_frames WHERE run_id = {run}")["function"].to_list()
    assert {"<module>", "main", *ran} <= set(frames)  # (nsys writes <module> as &lt;module&gt;: unescaped)


def test_mixed_stacks_put_the_native_frames_below_the_python_ones(nsys_db):
    """The default stack: the Python frames, then the native ones below the innermost frame of the
    interpreter: .item()'s copies go from read_loss's line to THPVariable_item and on to the
    runtime's function; no frame of the interpreter between (they are what the Python frames
    replace); a call nsys unwound without a native stack (the first cudaHostAlloc) has its
    Python frames alone."""
    lines = _lines()
    mixed = nsys_db.query("api-stacks", run="backtrace", limit=0)
    native = nsys_db.query("api-stacks", run="backtrace", frames="native", limit=0)
    python = nsys_db.query("api-stacks", run="backtrace", frames="python", limit=0)
    assert mixed["calls"].sum() == python["calls"].sum() == native["calls"].sum() + 1
    assert mixed["stack"].str.starts_with("<module> (nsys_backtrace.py:").all()
    assert not mixed["stack"].str.contains("_PyEval_EvalFrameDefault|Py_RunMain|_start").any()
    item = mixed.filter(pl.col("name") == "cudaStreamSynchronize", pl.col("stack").str.contains("read_loss"))
    head = f"read_loss (nsys_backtrace.py:{lines['read_loss']});torch::autograd::THPVariable_item("
    assert item["calls"].item() == 4 and head in item["stack"].item()
    assert item["stack"].item().endswith(";cudaStreamSynchronize")
    alone = mixed.filter(pl.col("stack").str.ends_with(f"upload (nsys_backtrace.py:{lines['upload']})"))
    assert alone["name"].to_list() == ["cudaHostAlloc"] and alone["calls"].item() == 1
    with pytest.raises(QueryError, match=r"frames 'both': one of mixed, python, native"):
        nsys_db.query("api-stacks", run="backtrace", frames="both")


def test_an_export_without_the_payloads_says_how_to_get_the_python_stacks(nsys_db, tmp_path):
    """An export made without --include-blobs has the marks of the Python stacks but not their
    frames: a warning that says how to export them, the native stacks as before, and frames=python
    an error that says the same; the marks are not NVTX marks of the program's either way."""
    export = edited_export(NSYS_EXPORTS["backtrace"], tmp_path / "blobless.sqlite",
                           "UPDATE NVTX_EVENTS SET binaryData = NULL")
    with tracekit.open(tmp_path / "s.duckdb") as tk, pytest.warns(CaptureWarning) as seen:
        tk.ingest(export, name="blobless")
    assert any(re.search(r"50 Python call stacks without their frames .*`nsys export --type sqlite "
                         r"--include-blobs=true", str(w.message)) for w in seen)
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        assert tk.query("api-stacks", run="blobless", limit=0).equals(
            nsys_db.query("api-stacks", run="backtrace", frames="native", limit=0))
        with pytest.raises(QueryError, match=r"frames=python, but the run has no Python stack of a CUDA API call "
                                             r".*--include-blobs=true"):
            tk.query("api-stacks", run="blobless", frames="python")
        assert tk.sql("SELECT count(*) FROM nvtx_marks").item() == 0


def test_payloads_not_laid_out_as_their_schema_says_are_left_out(nsys_db, tmp_path):
    """Python stacks whose payload is cut short, or says more frames than it holds, or names another
    schema, are left out with a warning; the others are read as before."""
    export = edited_export(NSYS_EXPORTS["backtrace"], tmp_path / "odd.sqlite",
                           "UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, 40) WHERE rowid % 5 = 1",
                           "UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, 44) || X'FF' || "
                           "substr(binaryData, 46) WHERE rowid % 5 = 2",
                           "UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, 8) || X'07' || "
                           "substr(binaryData, 10) WHERE rowid % 5 = 3")
    with tracekit.open(tmp_path / "s.duckdb") as tk, pytest.warns(CaptureWarning, match=r"Python call stacks whose "
                                                                        r"payload is not laid out as nsys"):
        tk.ingest(export, name="odd")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        kept = tk.sql("SELECT count(python_stack_id) FROM api_calls").item()
        assert 0 < kept < 50
        python = tk.query("api-stacks", run="odd", frames="python", limit=0)
        whole = nsys_db.query("api-stacks", run="backtrace", frames="python", limit=0)
        assert set(python["stack"]) <= set(whole["stack"]) and python["calls"].sum() == kept


@pytest.mark.parametrize("edit", ["UPDATE NVTX_PAYLOAD_SCHEMAS SET domainId = NULL WHERE rowid = 1",
                                  "UPDATE NVTX_PAYLOAD_SCHEMAS SET payloadSize = 'abc'",
                                  "UPDATE NVTX_PAYLOAD_SCHEMA_ENTRIES SET offset = 'abc'",
                                  "UPDATE NVTX_PAYLOAD_ENUMS SET size = NULL",
                                  "UPDATE NVTX_PAYLOAD_SCHEMA_ENTRIES SET offset = 'abc' WHERE name = 'Frames'"])
def test_payload_schemas_holding_what_nsys_does_not_write_leave_the_python_stacks_out(tmp_path, edit):
    """A payload schema row with a NULL or text where nsys writes integers (a damaged export):
    the run ingests with a warning that the Python stacks were left out, not an internal error
    (a TypeError, exit 1); a Python question of it then says it has none."""
    export = edited_export(NSYS_EXPORTS["python_hot"], tmp_path / "odd.sqlite", edit)
    with tracekit.open(tmp_path / "s.duckdb") as tk, pytest.warns(CaptureWarning, match=r"payload schemas "
                                                                        r"\(NVTX_PAYLOAD_SCHEMAS\) hold values nsys"):
        tk.ingest(export, name="odd")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        assert tk.sql("SELECT count(*) FROM python_samples").item() == 0
        with pytest.raises(QueryError, match=r"captured without Python sample tracing"):
            tk.query("python-hotspots", run="odd")


def test_a_question_the_run_cannot_answer_is_an_error(nsys_db):
    with pytest.raises(QueryError, match=r"api-stacks: .* captured without CUDA API backtrace tracing; capture with "
                                         r"nsys profile --cudabacktrace=all --sample=process-tree"):
        nsys_db.query("api-stacks", run="hstu_mixed")
    with pytest.raises(QueryError, match=r"no CUDA API call of the run with a call stack has a name containing 'nosuch'"):
        nsys_db.query("api-stacks", run="backtrace", name="nosuch")


def test_calls_that_carry_their_stack_themselves_keep_it(nsys_db, tmp_path):
    """An export whose calls hold their callchainId themselves, with no backtrace events (a copy of
    the fixture's, each event's stack moved onto its call, its Python stack's mark to the call's
    start, and the events taken out): the same stacks."""
    export = edited_export(NSYS_EXPORTS["backtrace"], tmp_path / "inline.sqlite",
                           "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME AS c SET callchainId = b.callchainId "
                           "FROM CUPTI_ACTIVITY_KIND_RUNTIME AS b WHERE b.eventClass = 67 AND c.eventClass <> 67 "
                           "AND b.correlationId = c.correlationId AND b.globalTid = c.globalTid",
                           "UPDATE NVTX_EVENTS AS m SET start = c.start FROM CUPTI_ACTIVITY_KIND_RUNTIME AS b, "
                           "CUPTI_ACTIVITY_KIND_RUNTIME AS c WHERE m.eventType = 34 AND b.eventClass = 67 "
                           "AND b.globalTid = m.globalTid AND b.start = m.start AND c.eventClass <> 67 "
                           "AND c.correlationId = b.correlationId AND c.globalTid = b.globalTid",
                           "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(export, name="inline")
        assert tk.query("api-stacks", run="inline", limit=0).equals(nsys_db.query("api-stacks", run="backtrace", limit=0))


def test_the_hstu_workload_captured_with_cuda_backtraces(tmp_path):
    """`tracekit capture --bs 8 --nc 1024 --cuda-backtrace` on the H200 (hstu_capture_backtrace, a run
    folder): each timed request makes three synchronizations, each found in the code that makes
    it: the harness's torch.cuda.synchronize() (THCPModule_cudaSynchronize) and end.synchronize()
    (THCPEvent_synchronize, capture/timing.py), and the scores' copy to the host (scores.cpu(),
    capture/model.py: a copy and the wait for it, under ATen's _to_copy); every launch nsys unwound
    is counted once."""
    run = DATA / "hstu_capture_backtrace"
    with open(run / "requests.csv", newline="") as fh:
        timed = sum(r["phase"] == "timed" for r in csv.DictReader(fh))
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(run)
        syncs = tk.query("api-stacks", run="1", name="synchronize", frames="native", limit=0)
        by = {r["name"]: r for r in syncs.iter_rows(named=True)}
        assert set(by) == {"cudaDeviceSynchronize", "cudaEventSynchronize", "cudaStreamSynchronize"}
        assert {n: r["calls"] for n, r in by.items()} == dict.fromkeys(by, timed) and timed == 50
        assert "THCPModule_cudaSynchronize" in by["cudaDeviceSynchronize"]["stack"]
        assert "THCPEvent_synchronize" in by["cudaEventSynchronize"]["stack"]
        assert "at::native::_to_copy" in by["cudaStreamSynchronize"]["stack"]
        # their Python lines, as the code was when captured (meta.json's git_commit): timing.py's
        # torch.cuda.synchronize() and end.synchronize(), model.py's `return scores.cpu()`
        python = {r["name"]: r["stack"] for r in tk.query("api-stacks", run="1", name="synchronize", frames="python",
                                                           limit=0).iter_rows(named=True)}
        assert python["cudaDeviceSynchronize"].endswith(";one (timing.py:110);synchronize (torch/cuda/__init__.py:1162)")
        assert python["cudaEventSynchronize"].endswith(";one (timing.py:116);synchronize (torch/cuda/streams.py:254)")
        assert python["cudaStreamSynchronize"].endswith(";one (timing.py:114);request (workload.py:134);"
                                                        "score (model.py:211)")
        copies = tk.query("api-stacks", run="1", name="memcpy", frames="native", limit=0)
        to_host = copies.filter(pl.col("calls") == timed)
        assert to_host.height == 1 and "at::native::_to_copy" in to_host["stack"][0]
        calls = tk.query("api-summary", run="1", limit=0)
        launches = calls.filter(pl.col("name") == "cudaLaunchKernel")["calls"].item()
        unwound = tk.query("api-stacks", run="1", name="cudaLaunchKernel", frames="native", limit=0)["calls"].sum()
        assert 0 < unwound <= launches and calls["name"].is_unique().all()


def test_the_report_shows_where_the_calls_come_from(tmp_path):
    """A run with CUDA API backtraces has the section after the CUDA API calls, its rows
    api-stacks' (each stack whole); a run without leaves it out without a word."""
    from test_report import _column, _parse

    from tracekit import report

    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["backtrace"], name="bt")
        tk.ingest(NSYS_EXPORTS["hstu_mixed"], name="plain")
        page = _parse(report.write_report(tk, tmp_path / "bt.html", run="bt"))
        stacks = tk.query("api-stacks", run="bt", limit=10)
        keys = list(page.sections)
        assert keys.index("api-stacks") == keys.index("api") + 1
        (table,) = page.sections["api-stacks"]
        assert [shown for shown, _, _ in _column(table, "stack")] == stacks["stack"].to_list()
        assert "api-stacks" not in _parse(report.write_report(tk, tmp_path / "plain.html", run="plain")).sections
