"""CUDA API calls with their call stacks (nsys --cudabacktrace, with the CPU sampled): each call
counted once, not with the backtrace event nsys writes beside it, and api-stacks, checked against
what tests/data/programs/nsys_backtrace.py says it ran (tests/data/nsys_backtrace/README.md)."""

from __future__ import annotations

import csv
import re
import sqlite3
from contextlib import closing

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS, edited_export

import tracekit
from tracekit.errors import QueryError
from tracekit.ingest import materialized

FIXTURE = DATA / "nsys_backtrace"


def _ran() -> dict[str, int]:
    """What the program printed: each function and how many times it ran."""
    text = (FIXTURE / "profile.log").read_text()
    return {f: int(n) for f, n in re.findall(r"^(\w+): line \d+, (\d+) calls$", text, re.M)}


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
    stacks = nsys_db.query("api-stacks", run="backtrace", limit=0)

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
    syncs = nsys_db.query("api-stacks", run="backtrace", name="synchronize", limit=0)
    assert set(syncs["name"]) == {"cudaStreamSynchronize", "cudaDeviceSynchronize"}


def test_a_question_the_run_cannot_answer_is_an_error(nsys_db):
    with pytest.raises(QueryError, match=r"api-stacks: .* captured without CUDA API backtrace tracing; capture with "
                                         r"nsys profile --cudabacktrace=all --sample=process-tree"):
        nsys_db.query("api-stacks", run="hstu_mixed")
    with pytest.raises(QueryError, match=r"no CUDA API call of the run with a call stack has a name containing 'nosuch'"):
        nsys_db.query("api-stacks", run="backtrace", name="nosuch")


def test_calls_that_carry_their_stack_themselves_keep_it(nsys_db, tmp_path):
    """An export whose calls hold their callchainId themselves, with no backtrace events (a copy of
    the fixture's, each event's stack moved onto its call and the events taken out): the same
    stacks."""
    export = edited_export(NSYS_EXPORTS["backtrace"], tmp_path / "inline.sqlite",
                           "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME AS c SET callchainId = b.callchainId "
                           "FROM CUPTI_ACTIVITY_KIND_RUNTIME AS b WHERE b.eventClass = 67 AND c.eventClass <> 67 "
                           "AND b.correlationId = c.correlationId AND b.globalTid = c.globalTid",
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
        syncs = tk.query("api-stacks", run="1", name="synchronize", limit=0)
        by = {r["name"]: r for r in syncs.iter_rows(named=True)}
        assert set(by) == {"cudaDeviceSynchronize", "cudaEventSynchronize", "cudaStreamSynchronize"}
        assert {n: r["calls"] for n, r in by.items()} == dict.fromkeys(by, timed) and timed == 50
        assert "THCPModule_cudaSynchronize" in by["cudaDeviceSynchronize"]["stack"]
        assert "THCPEvent_synchronize" in by["cudaEventSynchronize"]["stack"]
        assert "at::native::_to_copy" in by["cudaStreamSynchronize"]["stack"]
        copies = tk.query("api-stacks", run="1", name="memcpy", limit=0)
        to_host = copies.filter(pl.col("calls") == timed)
        assert to_host.height == 1 and "at::native::_to_copy" in to_host["stack"][0]
        calls = tk.query("api-summary", run="1", limit=0)
        launches = calls.filter(pl.col("name") == "cudaLaunchKernel")["calls"].item()
        unwound = tk.query("api-stacks", run="1", name="cudaLaunchKernel", limit=0)["calls"].sum()
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
