"""GPU memory allocated and freed (nsys --cuda-memory-usage=true): ingest, gpu-memory,
gpu-memory-live, nvtx-memory, gpu-memory-timeline, the gpu-memory chart and report section,
and diff's memory scope.

nsys stats has no report of these events, so the evidence is the raw tables of the real exports
and the accounting tests/data/programs/nsys_mem.cu prints of what it allocated (the first lines
of each fixture's profile.log: nsys_mem/README.md), tests/data/nsys_memops, whose program
allocates device, pinned, managed, pitched and pool memory and frees the last of it outside
every NVTX range, and tests/data/nsys_mem_odd, the allocators that are not cudaMalloc (virtual
memory management, a CUDA graph's memory nodes, a pool of its own, host memory).
"""

from __future__ import annotations

import lzma
import re
import shutil
import sqlite3

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS, edited_export

import tracekit
from tracekit.cli import main as cli_main
from tracekit.errors import QueryError
from tracekit.ingest import materialized

MIB = 1 << 20
QUERIES = ("gpu-memory", "gpu-memory-live", "nvtx-memory", "gpu-memory-timeline")


def _accounting(scen: str) -> dict[str, int]:
    """What nsys_mem.cu printed of its device memory: allocations, bytes, peak, live at exit."""
    text = (DATA / f"nsys_{scen}" / "profile.log").read_text()
    allocs, total = map(int, re.search(r"device: (\d+) allocations, (\d+) bytes", text).groups())
    peak = int(re.search(r"device peak: (\d+) bytes live, in (\w+)", text).group(1))
    live = int(re.search(r"device live at exit: (\d+) bytes", text).group(1))
    return {"allocations": allocs, "allocated_bytes": total, "peak_bytes": peak, "live_at_end_bytes": live}


def _kinds(tk, scen: str) -> dict[str, dict]:
    return {r["memory_kind"]: r for r in tk.query("gpu-memory", run=scen, limit=0).iter_rows(named=True)}


@pytest.mark.parametrize("scen", ["mem", "mem_grow", "memops"])
def test_memory_events_land_as_the_export_has_them(nsys_db, scen):
    """One store row per CUDA_GPU_MEMORY_USAGE_EVENTS row (its kind, operation, bytes, address and
    variable name resolved) and per CUDA_GPU_MEMORY_POOL_EVENTS row; every event of an API call
    has that call's name, and the run says it traced them."""
    with materialized(NSYS_EXPORTS[scen]) as path, sqlite3.connect(path) as sq:
        events = sq.execute(
            "SELECT e.start, e.deviceId, k.label, CASE e.memoryOperationType WHEN 0 THEN 'allocation' ELSE 'free' END, "
            "e.address, e.bytes, nullif(e.name, ''), nullif(e.correlationId, 0) FROM CUDA_GPU_MEMORY_USAGE_EVENTS e "
            "JOIN ENUM_CUDA_MEM_KIND k ON k.id = e.memKind ORDER BY 1, 5, 4").fetchall()
        pools = sq.execute("SELECT e.start, e.address, o.label, e.localMemoryPoolSize FROM CUDA_GPU_MEMORY_POOL_EVENTS e "
                           "JOIN ENUM_CUDA_MEMPOOL_OPER o ON o.id = e.operationType ORDER BY 1").fetchall()
    run = f"(SELECT run_id FROM runs WHERE name = '{scen}')"
    assert len(events) > 30 and nsys_db.sql(
        f"SELECT ts_ns, device_id, memory_kind, operation, address, bytes, name, correlation_id FROM gpu_memory "
        f"WHERE run_id = {run} ORDER BY 1, 5, 4").rows() == events
    assert len(pools) >= 7 and nsys_db.sql(
        f"SELECT ts_ns, pool_address, operation, pool_reserved_bytes FROM gpu_memory_pools WHERE run_id = {run} "
        "ORDER BY 1").rows() == pools
    calls = nsys_db.sql(f"SELECT api_name, count(*) FROM gpu_memory WHERE run_id = {run} GROUP BY ALL").rows()
    assert dict(calls).get(None, 0) == sum(1 for e in events if e[7] is None)  # (static memory: no call)
    # (named as nsys stats names them: cudaMallocAsync_v11020, a suffix it does not strip)
    assert {"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaMallocManaged"} <= {
        re.sub(r"_v\d+$", "", c) for c, _ in calls if c}
    traced = nsys_db.sql(f"SELECT meta->>'$.nsys_options' FROM runs WHERE run_id = {run}").item()
    assert '"--cuda-memory-usage":"true"' in traced.replace(" ", "")


@pytest.mark.parametrize("scen", ["mem", "mem_again", "mem_grow"])
def test_gpu_memory_is_the_programs_own_accounting(nsys_db, scen):
    """Device memory's allocations, bytes, peak and what was left equal what the program counted
    of its cudaMalloc and cudaMallocAsync calls (nsys records the bytes asked for: 16 MiB + 1000);
    the peak was reached in the last step's forward; the pool held more than was allocated from it."""
    tk = nsys_db
    kinds = _kinds(tk, scen)
    device, truth = kinds["Device"], _accounting(scen)
    assert {k: device[k] for k in truth} == truth
    assert device["peak_nvtx_path"] == "step/forward" and device["unmatched_frees"] == 0
    assert device["largest_bytes"] == (96 if scen == "mem_grow" else 64) * MIB
    assert device["unfreed"] == (8 if scen == "mem_grow" else 0)
    assert device["pool_reserved_max_bytes"] >= (96 if scen == "mem_grow" else 48) * MIB
    for kind, size in (("Pinned", 8 * MIB), ("Managed", 4 * MIB)):
        assert (kinds[kind]["allocations"], kinds[kind]["frees"], kinds[kind]["peak_bytes"],
                kinds[kind]["live_at_end_bytes"]) == (1, 1, size, 0)
    assert (kinds["Device Static"]["peak_bytes"], kinds["Device Static"]["unfreed"]) == (256 * 1024, 1)
    assert list(kinds)[0] == "Device"  # (the most memory first)


def test_memops_memory_outside_every_range_and_pitched_allocations(nsys_db):
    """nsys_memops: its device allocations (4 buffers, 2 pitched, a pool buffer per iteration)
    all freed at the end, outside every NVTX range; the symbol copy's __constant__ is static."""
    tk = nsys_db
    kinds = _kinds(tk, "memops")
    assert (kinds["Device"]["allocations"], kinds["Device"]["frees"], kinds["Device"]["live_at_end_bytes"]) == (12, 12, 0)
    # 4 x 4 MiB + 2 x 2 MiB pitched live together, a 4 MiB pool buffer at a time on top
    assert kinds["Device"]["peak_bytes"] == 24 * MIB and kinds["Device"]["peak_nvtx_path"] == "iteration/pool"
    assert kinds["Managed"]["peak_bytes"] == 8 * MIB
    rows = tk.query("nvtx-memory", run="memops", limit=0)
    outside = rows.filter(rows["nvtx_path"].is_null() & (rows["memory_kind"] == "Device")).row(0, named=True)
    assert (outside["allocations"], outside["frees"], outside["freed_bytes"]) == (0, 6, 20 * MIB)
    # setup: 4 + 2 pitched device buffers, 2 managed, 1 pinned (the __constant__ symbol: static, no call)
    assert rows.filter(rows["nvtx_path"] == "setup")["allocations"].sum() == 9


def test_the_allocations_live_at_the_peak_make_it_up(nsys_db):
    """gpu-memory-live at the peak: the weights, 7 KV-cache blocks, the last step's activations and
    its workspace (from the pool), summing to the peak; the oldest first among equals."""
    tk = nsys_db
    live = tk.query("gpu-memory-live", run="mem", limit=0)
    assert live["bytes"].sum() == _accounting("mem")["peak_bytes"] == live["live_bytes"][0]
    assert live["bytes"].to_list() == [64 * MIB, 48 * MIB, 32 * MIB, 24 * MIB, 16 * MIB + 1000] + [4 * MIB] * 7
    assert live.filter(live["pool"])["api_name"].to_list() == ["cudaMallocAsync_v11020"]
    assert set(live["nvtx_path"]) == {"load", "step/cache", "step/forward"}
    assert abs(live["share_pct"].sum() - 100) < 0.5 and (live["age_ns"] >= 0).all()
    assert live.filter(live["nvtx_path"] == "load")["age_ns"].min() > live.filter(live["pool"])["age_ns"].max()


def test_what_was_never_freed_is_the_leak(nsys_db):
    """gpu-memory-live at=end of the leaking program: the 8 scratch buffers, allocated by cudaMalloc
    in step/forward; of the one that leaks nothing, none; the static table stays (kind=Device Static)."""
    tk = nsys_db
    left = tk.query("gpu-memory-live", run="mem_grow", at="end", limit=0)
    assert left.height == 8 and set(left["bytes"]) == {2 * MIB} and set(left["nvtx_path"]) == {"step/forward"}
    assert set(left["api_name"]) == {"cudaMalloc"} and left["address"].str.starts_with("0x").all()
    assert tk.query("gpu-memory-live", run="mem", at="end").is_empty()
    static = tk.query("gpu-memory-live", run="mem", at="end", kind="device static")
    assert static.select("name", "bytes", "api_name").rows() == [("table", 256 * 1024, None)]


def test_nvtx_memory_names_the_range_that_leaks(nsys_db):
    tk = nsys_db
    rows = {(r["nvtx_path"], r["memory_kind"]): r for r in tk.query("nvtx-memory", run="mem_grow", limit=0).iter_rows(named=True)}
    forward, cache = rows[("step/forward", "Device")], rows[("step/cache", "Device")]
    assert (forward["allocations"], forward["unfreed"], forward["unfreed_bytes"]) == (24, 8, 16 * MIB)
    assert forward["allocated_bytes"] == 8 * (24 + 96 + 2) * MIB and forward["frees"] == 16
    assert (cache["allocations"], cache["allocated_bytes"], cache["unfreed"]) == (8, 32 * MIB, 0)
    assert rows[("unload", "Device")]["freed_bytes"] == (112 + 32) * MIB + 1000  # (the weights and the cache)
    first = tk.query("nvtx-memory", run="mem_grow", limit=1).row(0, named=True)
    assert first["nvtx_path"] == "step/forward"  # (what was never freed first)
    pinned = tk.query("nvtx-memory", run="mem_grow", kind="pinned", limit=0)  # (the kind in any case)
    assert pinned.select("nvtx_path", "allocations", "frees").rows() == [("load", 1, 0), ("unload", 0, 1)]


def test_the_timeline_steps_through_every_event(nsys_db):
    tk = nsys_db
    t = tk.query("gpu-memory-timeline", run="mem_grow", kind="Device")
    assert t.height == 35 + 27 and t["ts_ns"].is_sorted()
    assert t["live_bytes"].max() == _accounting("mem_grow")["peak_bytes"]
    assert t["live_bytes"][-1] == 16 * MIB and (t["live_bytes"] >= 0).all()


def test_frees_of_memory_allocated_before_the_capture_are_not_taken_off(tmp_path):
    """A capture that began after some allocations (the first 4 events of nsys_mem taken out of a
    copy of its export: the weights' allocations and the pinned buffer's) sees their frees without
    them: counted apart (unmatched_frees), live memory never below zero."""
    export = edited_export(NSYS_EXPORTS["mem"], tmp_path / "late.sqlite",
                           "DELETE FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE rowid IN "
                           "(SELECT rowid FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start LIMIT 4)")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(export, name="late")
        device = _kinds(tk, "late")["Device"]
        assert device["unmatched_frees"] == 3 and device["live_at_end_bytes"] == 0
        assert device["peak_bytes"] == _accounting("mem")["peak_bytes"] - (112 * MIB + 1000)
        assert _kinds(tk, "late")["Pinned"]["unmatched_frees"] == 1
        assert tk.query("gpu-memory-timeline", run="late", limit=0)["live_bytes"].min() >= 0


def _odd_accounting() -> dict[str, int]:
    """What nsys_mem_odd.cu printed: its VMM chunks, graph memory nodes, pool allocations, pitch."""
    text = (DATA / "nsys_mem_odd" / "profile.log").read_text()
    chunks, chunk = map(int, re.search(r"(\d+) chunks of (\d+) bytes created", text).groups())
    nodes = [int(n) for n in re.search(r"memory nodes of (\d+) and (\d+) bytes", text).groups()]
    pool_allocs, pool_bytes = map(int, re.search(r"pool: (\d+) allocations of (\d+) bytes", text).groups())
    pitched = int(re.search(r"pitch \d+: (\d+) bytes", text).group(1))
    host = [int(n) for n in re.search(r"cudaHostAlloc (\d+) bytes, cudaHostRegister (\d+) bytes", text).groups()]
    return {"chunks": chunks, "chunk": chunk, "nodes": nodes, "pool_allocs": pool_allocs, "pool_bytes": pool_bytes,
            "pitched": pitched, "host": host}


def test_memory_of_the_allocators_that_are_not_cudamalloc(nsys_db):
    """nsys_mem_odd (README there): virtual memory management (what PyTorch's expandable segments
    use), a CUDA graph's memory nodes, a pool of its own, pitched and host memory. Per NVTX range,
    what the program asked for: the mapped chunks (allocated at cuMemSetAccess, freed at
    cuMemUnmap); the graph's memory, recorded with address 0 as the graph pool's 32 MiB chunks (two a
    launch, the 8 MiB node in a chunk of its own; again after the trim), every one paired with its
    free; the pool's allocations; pitch x rows. The peak, 3 mapped chunks with the graph's 2, is
    reached first in graph; nothing is left and no free goes unpaired."""
    tk = nsys_db
    truth = _odd_accounting()
    graph_chunk = 32 * MIB  # (the graph pool's granularity: each node of up to 32 MiB takes a chunk)
    assert truth["nodes"] == [32 * MIB, 8 * MIB]
    rows = {(r["nvtx_path"], r["memory_kind"]): r for r in tk.query("nvtx-memory", run="mem_odd", limit=0).iter_rows(named=True)}
    pick = lambda key: tuple(rows[key][c] for c in ("allocations", "allocated_bytes", "frees", "freed_bytes", "unfreed"))  # noqa: E731
    assert pick(("vmm", "Device")) == (truth["chunks"], truth["chunks"] * truth["chunk"], 1, truth["chunk"], 0)
    assert pick(("graph", "Device")) == (4, 4 * graph_chunk, 4, 4 * graph_chunk, 0)
    assert pick(("pool", "Device")) == (truth["pool_allocs"], truth["pool_allocs"] * truth["pool_bytes"],
                                        truth["pool_allocs"], truth["pool_allocs"] * truth["pool_bytes"], 0)
    assert pick(("pitch", "Device")) == (1, truth["pitched"], 0, 0, 0)
    assert pick(("host", "Pinned")) == (2, sum(truth["host"]), 0, 0, 0)
    # (the mapped chunks left and the pitched buffer)
    assert pick(("release", "Device"))[2:4] == (truth["chunks"] - 1 + 1, (truth["chunks"] - 1) * truth["chunk"] + truth["pitched"])
    device = _kinds(tk, "mem_odd")["Device"]
    peak = (truth["chunks"] - 1) * truth["chunk"] + 2 * graph_chunk
    assert peak == (truth["chunks"] - 1) * truth["chunk"] + truth["pool_allocs"] * truth["pool_bytes"]  # (reached twice)
    assert (device["peak_bytes"], device["peak_nvtx_path"], device["live_at_end_bytes"], device["unmatched_frees"]) == (
        peak, "graph", 0, 0)
    assert device["pool_reserved_max_bytes"] == truth["pool_allocs"] * truth["pool_bytes"]
    events = tk.sql("SELECT api_name, address, operation, freed_ns - ts_ns AS held_ns FROM gpu_memory_events("
                    "(SELECT run_id FROM runs WHERE name = 'mem_odd')) WHERE memory_kind = 'Device'").to_dicts()
    mapped = [e for e in events if e["api_name"] in ("cuMemSetAccess", "cuMemUnmap")]
    assert sorted(e["operation"] for e in mapped) == ["allocation"] * truth["chunks"] + ["free"] * truth["chunks"]
    graph = [e for e in events if e["address"] == 0 and e["operation"] == "allocation"]
    assert len(graph) == 4 and all(0 < e["held_ns"] < 10**9 for e in graph)


def test_graph_memory_frees_pair_with_the_earliest_allocation_not_freed(tmp_path):
    """Graph memory has address 0 in the export: with the first graph chunk's allocation taken out
    of a copy of nsys_mem_odd (as if allocated before the capture began), the first trim's second
    free has nothing to pair with (an unmatched free), and the chunks allocated after the trim are
    still paired with the second trim's frees: nothing is left, the peak one chunk lower."""
    export = edited_export(NSYS_EXPORTS["mem_odd"], tmp_path / "late.sqlite",
                           "DELETE FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE rowid IN (SELECT rowid FROM "
                           "CUDA_GPU_MEMORY_USAGE_EVENTS WHERE address = 0 AND memoryOperationType = 0 "
                           "ORDER BY start LIMIT 1)")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(export, name="late")
        device = _kinds(tk, "late")["Device"]
        truth = _odd_accounting()
        assert (device["unmatched_frees"], device["live_at_end_bytes"]) == (1, 0)
        assert device["peak_bytes"] == (truth["chunks"] - 1) * truth["chunk"] + truth["pool_allocs"] * truth["pool_bytes"]
        graph = tk.query("nvtx-memory", run="late", limit=0).filter(pl.col("nvtx_path") == "graph").row(0, named=True)
        assert (graph["allocations"], graph["frees"], graph["unfreed"]) == (3, 3, 0)


@pytest.mark.parametrize("query", QUERIES)
def test_a_run_captured_without_memory_usage_is_an_error(nsys_db, query):
    tk = nsys_db
    with pytest.raises(QueryError, match="captured without CUDA memory usage tracing.*--cuda-memory-usage=true"):
        tk.query(query, run="cpu_hot")


def test_a_kind_nsys_does_not_record_is_a_one_line_error(capsys, tmp_path):
    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(NSYS_EXPORTS["mem"], name="mem")
    assert cli_main(["--db", str(db), "query", "gpu-memory-live", "--run", "mem", "-p", "kind=Devce"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gpu-memory-live: kind 'Devce': not a kind of memory nsys records (Device, Pinned" in err[0]


def test_diff_of_two_captures_calls_nothing_changed(nsys_db):
    """nsys_mem against nsys_mem_again: the same allocations to the byte, every memory row unchanged."""
    tk = nsys_db
    d = tk.diff("mem", "mem_again", by=["memory"])
    assert d.height > 10 and set(d["verdict"]) == {"unchanged"} and set(d["scope"]) == {"memory"}


def test_diff_finds_the_planted_leak_and_the_larger_workspace(nsys_db):
    """nsys_mem against nsys_mem_grow: the device memory's peak (+64 MiB), what was left (0 -> 16 MiB),
    its allocations and bytes, and step/forward's, regressed; the rest unchanged. Reversed, improved."""
    tk = nsys_db
    d = tk.diff("mem", "mem_grow", by=["memory"])
    changed = {(r["key"], r["metric"]): r for r in d.filter(d["verdict"] != "unchanged").iter_rows(named=True)}
    assert set(changed) == {
        ("GPU 0 Device memory", m) for m in ("peak_bytes", "live_at_end_bytes", "allocations", "allocated_bytes")
    } | {("Device memory in step/forward", m) for m in ("allocations", "allocated_bytes", "unfreed_bytes")}
    assert {r["verdict"] for r in changed.values()} == {"regressed"}
    assert changed[("GPU 0 Device memory", "peak_bytes")]["delta"] == 64 * MIB
    assert d["key"][0] == "GPU 0 Device memory"  # (the most memory first)
    back = tk.diff("mem_grow", "mem", by=["memory"])
    assert set(back.filter(back["verdict"] != "unchanged")["verdict"]) == {"improved"}


def test_the_memory_scope_is_asked_only_of_runs_that_traced_it(nsys_db):
    tk = nsys_db
    assert "memory" not in set(tk.diff("cpu_hot", "cpu_hot_again")["scope"])  # (by default: scopes both have)
    assert "memory" in set(tk.diff("mem", "mem_grow")["scope"])
    with pytest.raises(QueryError, match="CUDA memory usage"):
        tk.diff("cpu_hot", "mem", by=["memory"])


def test_the_chart_and_the_report_section(nsys_db, tmp_path):
    from tracekit import charts
    from tracekit.report import write_report

    tk = nsys_db
    spec = charts.chart(tk, "gpu-memory", run="mem_grow").to_dict()
    layers = spec["layer"]
    values = [v for layer in layers for v in (layer.get("data", {}).get("values") or [])]
    assert any(v.get("label") == "peak 289.4 MB" for v in values)  # (the device memory's peak, 289,407,976 B)
    assert {v["series"] for v in values} >= {"Device", "Pinned", "Managed", "Device Static"}
    out = tmp_path / "r.html"
    write_report(tk, out, run="mem_grow")
    html = out.read_text()
    assert "GPU memory over time" in html and "step/forward" in html
    write_report(tk, out, run="cpu_hot")
    assert "GPU memory" not in out.read_text()  # (a run that did not trace it: no section, no line)


def test_the_hstu_workload_captured_with_memory_usage(tmp_path, capsys):
    """`tracekit capture --bs 8 --nc 1024 --cuda-memory-usage` on the H200 (hstu_capture_mem, a run
    folder). The capture range opens after the model is built and warmed up: nsys reports the memory
    allocated by then at the range's start (time 0, no API call), and PyTorch's caching allocator
    neither allocates nor frees during the timed requests. So what the workload holds is all there,
    live at the end: its largest block the item-embedding table (num_items x d_model bf16 values, 8 GiB).
    Against the same capture without memory tracing, the setup warning says so and there is no
    memory scope."""
    import json

    db = tmp_path / "h.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(DATA / "hstu_capture_nsys"), str(DATA / "hstu_capture_mem")]) == 0
    workload = json.loads((DATA / "hstu_capture_mem" / "meta.json").read_text())["workload"]
    with tracekit.open(db) as tk:
        device = _kinds(tk, "2")["Device"]
        assert device["largest_bytes"] == workload["num_items"] * workload["d_model"] * 2 == 8 << 30
        assert device["frees"] == 0 and device["live_at_end_bytes"] == device["peak_bytes"] == device["allocated_bytes"]
        assert device["allocations"] > 30 and device["peak_nvtx_path"] is None
        top = tk.query("gpu-memory-live", run="2", limit=1).row(0, named=True)
        assert top["bytes"] == 8 << 30 and top["api_name"] is None and top["allocated_ns"] == 0
        assert _kinds(tk, "2")["Device Static"]["allocations"] > 100  # (the kernels' modules: Triton's, cuBLAS's)
        with pytest.warns(tracekit.errors.CaptureWarning, match=r"--cuda-memory-usage false -> true"):
            df = tk.diff("1", "2")
        assert "memory" not in set(df["scope"])
    capsys.readouterr()


def test_the_hstu_workload_with_expandable_segments(tmp_path):
    """The same capture with PyTorch's expandable segments (hstu_capture_mem_vmm:
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which the run folder records): the allocator
    maps its memory in 20 MiB pieces of reserved address space, so nsys records hundreds of
    allocations where cudaMalloc made 39, of the same bytes (within a piece a segment) and all live
    at the end. diff names the setting among the setups' differences, and calls the peak unchanged
    and the allocations' count what moved."""
    db = tmp_path / "h.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(DATA / "hstu_capture_mem"), str(DATA / "hstu_capture_mem_vmm")]) == 0
    with tracekit.open(db) as tk:
        plain, vmm = _kinds(tk, "1")["Device"], _kinds(tk, "2")["Device"]
        assert plain["allocations"] < 50 and vmm["allocations"] > 500
        assert 0 <= vmm["allocated_bytes"] - plain["allocated_bytes"] <= 20 * MIB * 3
        assert vmm["live_at_end_bytes"] == vmm["peak_bytes"] == vmm["allocated_bytes"]
        pieces = tk.query("gpu-memory-live", run="2", at="end", limit=0)
        assert pieces.filter(pl.col("bytes") == 20 * MIB)["bytes"].sum() > 0.95 * vmm["allocated_bytes"]
        with pytest.warns(tracekit.errors.CaptureWarning,
                          match=r"env PYTORCH_CUDA_ALLOC_CONF \(unset\) -> expandable_segments:True"):
            df = tk.diff("1", "2", by=["memory"])
        device = {r["metric"]: r["verdict"] for r in df.filter(pl.col("key") == "GPU 0 Device memory").iter_rows(named=True)}
        assert device["peak_bytes"] == "unchanged" and device["allocations"] == "regressed"


def test_the_hstu_workload_with_the_stream_ordered_allocator(tmp_path):
    """The same capture with PyTorch's cudaMallocAsync backend (hstu_capture_mem_async): each tensor
    is a cudaMallocAsync from the device's pool. The capture range opens after the warm-up, and nsys
    reports what was allocated and freed before it at its start, at time 0, in the order it happened
    (the export's order: hundreds of frees at time 0 follow their allocations). Paired in that order,
    every free finds its allocation; the warm-up peaked above what the requests hold; each request
    frees what it allocates, so the memory live at the end is that at the range's start, and no NVTX
    range leaves any; the pool holds at least the peak."""
    db = tmp_path / "h.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(DATA / "hstu_capture_mem_async")]) == 0
    with tracekit.open(db) as tk:
        device = _kinds(tk, "1")["Device"]
        assert device["allocations"] > 5000 and device["unmatched_frees"] == 0
        events = tk.sql("SELECT ts_ns, operation, matched, live_bytes FROM gpu_memory_events(1) "
                        "WHERE memory_kind = 'Device' ORDER BY seq")
        before = events.filter(pl.col("ts_ns") == 0)
        assert before.filter(pl.col("operation") == "free").height > 200 and before["matched"].all()
        at_start = before["live_bytes"][-1]
        assert device["live_at_end_bytes"] == at_start and device["peak_ns"] == 0
        during = events.filter(pl.col("ts_ns") > 0)["live_bytes"]
        assert at_start <= during.min() and during.max() < device["peak_bytes"] <= device["pool_reserved_max_bytes"]
        ranges = tk.query("nvtx-memory", run="1", kind="device", limit=0).filter(pl.col("nvtx_path").is_not_null())
        assert ranges["allocations"].sum() > 5000 and ranges["unfreed"].sum() == 0
        assert set(tk.query("gpu-memory-live", run="1", at="end", limit=0)["allocated_ns"]) == {0}


def test_the_trace_has_a_counter_of_live_memory(nsys_db, tmp_path):
    """export trace: in the program's process, a counter track per device and kind of memory that
    steps at each allocation and free, to the peak and back to what was left; a window opens at
    the level live at its start (the last step's forward: the weights, 7 cache blocks, 7 leaked
    scratch buffers)."""
    import json

    from tracekit.trace import export_trace

    res = export_trace(nsys_db, tmp_path / "t.json", run="mem_grow")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    device = [e for e in events if e.get("cat") == "gpu_memory" and e["name"] == "GPU 0 Device memory [bytes]"]
    assert res.counts["gpu_memory"] == 67 and len(device) == 62
    values = [e["args"]["value"] for e in device]
    assert max(values) == _accounting("mem_grow")["peak_bytes"] and values[-1] == 16 * MIB
    assert {e["pid"] for e in device} == {e["pid"] for e in events if e.get("cat") == "cuda_api"}
    res = export_trace(nsys_db, tmp_path / "w.json", run="mem_grow", nvtx="forward", instance=8)
    window = [e for e in json.loads((tmp_path / "w.json").read_text())["traceEvents"]
              if e.get("name") == "GPU 0 Device memory [bytes]"]
    assert window[0]["args"]["value"] == (112 + 7 * 4 + 7 * 2) * MIB + 1000
    assert max(e["args"]["value"] for e in window) == _accounting("mem_grow")["peak_bytes"]


def test_a_negative_size_is_refused_and_an_unknown_kind_is_unknown(tmp_path, capsys):
    """A copy of nsys_mem's export with one allocation's size made negative is refused with one
    line (exit 2, the store as it was); one with a kind id its enum does not name ingests, the
    kind 'Unknown'."""
    export = tmp_path / "bad.sqlite"
    with lzma.open(NSYS_EXPORTS["mem"]) as src, open(export, "wb") as dst:
        shutil.copyfileobj(src, dst)
    odd = tmp_path / "odd.sqlite"
    shutil.copyfile(export, odd)
    with sqlite3.connect(export) as sq:
        sq.execute("UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET bytes = -4096 WHERE rowid = 3")
    with sqlite3.connect(odd) as sq:
        sq.execute("UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET memKind = 42 WHERE memKind = 4")
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(odd)]) == 0
    before = db.read_bytes()
    assert cli_main(["--db", str(db), "ingest", str(export)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 row with a negative size (the first: row 3, -4096 bytes); the export is corrupt" in err[0]
    assert db.read_bytes() == before
    with tracekit.open(db) as tk:
        kinds = _kinds(tk, "1")
        assert "Managed" not in kinds and kinds["Unknown"]["allocations"] == 1


def test_the_rank_that_holds_more_memory_stands_out(tmp_path):
    """tests/data/nsys_ranks_mem: 4 ranks on one GPU, each recording its GPU memory; rank 1 holds
    512 MiB more (allocated in its warm-up, kept). rank-summary's peak says so, the others equal;
    gpu-memory-live names the allocation; a job captured without memory usage has no peak (NULL)."""
    with tracekit.open(tmp_path / "r.duckdb") as tk:
        for r in range(4):
            tk.ingest(DATA / "nsys_ranks_mem" / f"rank{r}" / "export.sqlite.xz", name=f"mem_rank{r}")
        ranks = tk.query("rank-summary", run="mem_rank0")
        peaks = dict(zip(ranks["rank"], ranks["gpu_memory_peak_bytes"], strict=True))
        assert peaks[1] - peaks[0] == 512 * MIB and peaks[0] == peaks[2] == peaks[3] > 0
        assert ranks.filter(ranks["rank"] == 1)["memory_vs_median_pct"].item() > 400
        held = tk.query("gpu-memory-live", run="mem_rank1", limit=1).row(0, named=True)
        assert held["bytes"] == 512 * MIB and held["nvtx_path"] == "warmup" and held["api_name"] == "cudaMalloc"
        for r in range(2):
            tk.ingest(DATA / "nsys_ranks" / f"rank{r}" / "export.sqlite.xz", name=f"plain_rank{r}")
        assert tk.query("rank-summary", run="plain_rank0")["gpu_memory_peak_bytes"].is_null().all()


def test_jobs_whose_ranks_traced_other_things_are_compared_in_what_every_rank_traced(tmp_path, capsys):
    """tests/data/nsys_jobs_mem (real, one H100): base, more (rank 1 holds 512 MiB more) and
    mixed (base's job again, rank 0 captured without NVTX, rank 2 without GPU memory). Against
    mixed, a job comparison says what each rank lacks and leaves those scopes out on every rank;
    rank 0's pair alone compares its GPU memory per GPU, with no allocation read as moved out of
    its NVTX range (before: it said nothing and judged 'Device memory outside NVTX ranges'
    +4906 % regressed), and says so asked --by memory too. mixed as a repeat of base measures
    the noise of the other scopes and says which rows go without it; the plant reads as the
    exports' peaks (plant.json) have it. Against more's ranks 1 and 3 alone, mixed measures the
    noise of every scope on those two ranks; a repeat that shares none of the compared ranks
    with the base is compared with it as given."""
    import json
    import warnings

    from tracekit.errors import CaptureWarning, UntracedScopes

    jobs = DATA / "nsys_jobs_mem"
    peaks = {j: json.loads((jobs / j / "plant.json").read_text())["device_memory_peak_bytes"] for j in ("base", "more")}
    with tracekit.open(tmp_path / "j.duckdb") as tk:
        for job in ("base", "more", "mixed"):
            for rank in range(4):
                tk.ingest(jobs / job / f"rank{rank}" / "export.sqlite.xz", params={"job": job})
        runs = {(r["job"], r["rank"]): f"run {r['run_id']} ({r['name']})" for r in tk.sql(
            "SELECT run_id, name, params->>'job' AS job, (params->>'rank')::INT AS rank FROM runs").to_dicts()}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = tk.diff_jobs("base", "mixed")
        said = [str(w.message) for w in caught if issubclass(w.category, UntracedScopes)]
        assert said == ["diff --jobs: rank 0 of the new job [nsys without NVTX trace] has no job or nvtx scope; rank 2 "
                        "of the new job [nsys without CUDA memory usage trace] has no memory scope: the job, nvtx "
                        "and memory rows are not compared"], said
        assert set(df["scope"]) == {"kernel", "api", "memcpy", "gpu"}
        # (the rank whose setup differs named: each rank's own comparison says it without its rank)
        setups = [str(w.message) for w in caught if "differ in setup" in str(w.message)]
        assert setups == ["diff --jobs: the captures differ in setup on rank 2: nsys --cuda-memory-usage true -> "
                          "false"], setups
        # (the same program: nothing judged a change; rank 2's host-to-device copies, 10.9 % apart at
        # p = 8.7e-4, were judged improved under a 10 % copy noise floor)
        assert df["verdict"].is_in(["unchanged"]).all(), df.filter(pl.col("verdict") != "unchanged")
        # one rank's pair: its nvtx scope said, its GPU memory per GPU alone, unchanged
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pair = tk.diff(*(runs[(job, 0)].split()[1] for job in ("base", "mixed")))
        said = [str(w.message) for w in caught if issubclass(w.category, UntracedScopes)]
        assert said == [f"diff: {runs[('mixed', 0)]} [nsys without NVTX trace] has no nvtx scope: the nvtx rows are "
                        "not compared; GPU memory is compared per GPU, not per NVTX path"], said
        memory = pair.filter(pl.col("scope") == "memory")
        assert memory.height and memory["key"].str.starts_with("GPU 0 ").all()
        assert set(memory["verdict"]) == {"unchanged"}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asked = tk.diff(*(runs[(job, 0)].split()[1] for job in ("base", "mixed")), by="memory")
        said = [str(w.message) for w in caught if issubclass(w.category, UntracedScopes)]
        assert said == [f"diff: {runs[('mixed', 0)]} [nsys without NVTX trace]: GPU memory is compared per GPU, not "
                        "per NVTX path"], said
        assert asked.equals(memory)
        # mixed as the repeat: the plant judged, the rows mixed lacks said to go without its noise
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = tk.diff_jobs("base", "more", repeats=["mixed"])
        said = [str(w.message) for w in caught if issubclass(w.category, CaptureWarning) and "scope" in str(w.message)]
        assert said == ["diff --jobs: mixed (a repeat of the base): rank 0 [nsys without NVTX trace] has no job or "
                        "nvtx scope; rank 2 [nsys without CUDA memory usage trace] has no memory scope: the job, "
                        "nvtx and memory rows are judged without its noise"], said
        peak = df.filter((pl.col("scope") == "memory") & (pl.col("key") == "GPU 0 Device memory")
                         & (pl.col("metric") == "peak_bytes")).row(0, named=True)
        assert peak["new"] - peak["base"] == peaks["more"]["rank1"] - peaks["base"]["rank1"] == 512 * MIB
        assert peak["base"] == sum(peaks["base"].values()) and peak["verdict"] == "regressed"
        assert peak["top_rank"] == 1 and peak["noise_pct"] is None
        for scope in ("job", "nvtx", "memory"):
            rows = df.filter(pl.col("scope") == scope)
            assert rows.height > 0 and rows["noise_pct"].null_count() == rows.height, scope
        assert df.filter(pl.col("scope") == "kernel")["noise_pct"].drop_nulls().len() > 5
        # more's ranks 1 and 3 alone (a folder of their exports): mixed measures the noise on
        # those ranks, which traced all of it; what its ranks 0 and 2 lack is no matter here
        # (before, the job, nvtx and memory rows went without its noise, said as above)
        part = tmp_path / "more_1_3"
        for rank in (1, 3):
            (part / f"rank{rank}").mkdir(parents=True)
            shutil.copy(jobs / "more" / f"rank{rank}" / "export.sqlite.xz", part / f"rank{rank}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = tk.diff_jobs("base", str(part), repeats=["mixed"])
        said = [str(w.message) for w in caught]
        assert said == ["diff --jobs: ranks 0, 2 of the base job (base) not in the other: left out of the ranks' "
                        "comparison"], said
        timed = df.filter(pl.col("scope").is_in(["job", "nvtx", "memory", "kernel"]) & (pl.col("metric") != "slowest_rank"))
        assert set(timed["scope"]) == {"job", "nvtx", "memory", "kernel"} and timed["noise_pct"].null_count() == 0
        peak = df.filter((pl.col("scope") == "memory") & (pl.col("key") == "GPU 0 Device memory")
                         & (pl.col("metric") == "peak_bytes")).row(0, named=True)
        assert peak["new"] - peak["base"] == 512 * MIB and peak["verdict"] == "regressed" and peak["top_rank"] == 1
        # base's ranks 0 and 1 against more's 1 and 3, mixed's 0 and 3 the repeat: on the compared
        # ranks the repeat and the base share none, so they are compared as given (on rank 0)
        for job, ranks in (("base", (0, 1)), ("mixed", (0, 3))):
            for rank in ranks:
                (tmp_path / f"{job}_part" / f"rank{rank}").mkdir(parents=True)
                shutil.copy(jobs / job / f"rank{rank}" / "export.sqlite.xz", tmp_path / f"{job}_part" / f"rank{rank}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = tk.diff_jobs(str(tmp_path / "base_part"), str(part), repeats=[str(tmp_path / "mixed_part")])
        assert any("rank 1 of the base job (base) not in the other: no noise measured for it" in str(w.message)
                   for w in caught), [str(w.message) for w in caught]
        assert df.filter(pl.col("scope") == "kernel").height > 5 and df["noise_pct"].null_count() == df.height
    rc = cli_main(["--db", str(tmp_path / "j.duckdb"), "diff", "--jobs", "base", "mixed", "-f", "csv"])
    err = capsys.readouterr().err
    assert rc == 0 and "rank 0 of the new job [nsys without NVTX trace] has no job or nvtx scope" in err
    # every rank with its GPU memory (mixed's rank 2 taken from more): the memory scope compared,
    # per GPU alone on rank 0, whose capture did not trace NVTX
    with tracekit.open(tmp_path / "k.duckdb") as tk:
        for job, rank in [*(("base", r) for r in range(4)), ("mixed", 0), ("mixed", 1), ("more", 2), ("mixed", 3)]:
            tk.ingest(jobs / job / f"rank{rank}" / "export.sqlite.xz", params={"job": "x" if job != "base" else job})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = tk.diff_jobs("base", "x")
        said = [str(w.message) for w in caught if issubclass(w.category, UntracedScopes)]
        assert said == ["diff --jobs: rank 0 of the new job [nsys without NVTX trace] has no job or nvtx scope: the job "
                        "and nvtx rows are not compared; on rank 0, GPU memory is compared per GPU, not per NVTX path"]
        memory = df.filter(pl.col("scope") == "memory")
        assert set(memory["verdict"]) == {"unchanged"}  # (no allocation of rank 0 read as moved out of its range)
        forward = memory.filter((pl.col("key") == "Device memory in warmup/forward") & (pl.col("metric") == "allocations"))
        assert forward["ranks"].to_list() == [3]  # (ranks 1-3: rank 0's allocations have no range on one side)
        assert memory.filter(pl.col("key") == "GPU 0 Device memory")["ranks"].to_list() == [4] * 4
