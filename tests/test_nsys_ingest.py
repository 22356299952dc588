"""nsys ingest beyond the twin reports: nesting, projection per range, ids, bad input."""

from __future__ import annotations

import csv
import gzip
import io
import lzma
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import warnings

import pytest
from conftest import CPU_ONLY, DATA, NSYS_EXPORTS, compiled_or_numpy

import tracekit
from tracekit import parallel
from tracekit.errors import CaptureWarning, InputError
from tracekit.ingest import materialized
from tracekit.ingest.nsys.source import resolve_tables


def _trace(scen: str) -> list[dict]:
    with lzma.open(NSYS_EXPORTS[scen].parent / "stats" / "nvtx_gpu_proj_trace.csv.xz", "rt") as fh:
        return list(csv.DictReader(io.StringIO(fh.read())))


@pytest.mark.parametrize("scen", ["hstu_mixed", "multithread", "many_kernels", "hstu_capture", "odd_nvtx", "multiproc",
                                  "registered_nvtx", "registered_nvtx_domains", "memops", "autograd", "inductor",
                                  "streams", "nccl", "jax", "jax_graph", "jax_whole"])
def test_projection_per_range_matches_nsys_trace(nsys_db, scen):
    """Every projected range instance: start, duration, op count, level, children, pid/tid."""
    ours = nsys_db.sql(
        "SELECT name, start_ns, proj_start_ns, proj_dur_ns, gpu_ops, depth, children, pid, tid "
        "FROM nvtx_ranges WHERE run_id = (SELECT run_id FROM runs WHERE name = ?) AND gpu_ops > 0 "
        "AND end_global_tid IS NULL", [scen]).to_dicts()
    ours = {(r["name"], r["start_ns"]): r for r in ours}
    golden = _trace(scen)
    assert len(ours) == len(golden)
    for g in golden:
        r = ours[(g["Name"], int(g["Orig Start (ns)"]))]
        assert r["proj_start_ns"] == int(g["Projected Start (ns)"])
        assert r["proj_dur_ns"] == int(g["Projected Duration (ns)"])
        assert r["gpu_ops"] == int(g["NumGPUOps"])
        assert r["depth"] == int(g["Lvl"])
        assert r["children"] == int(g["NumChild"])
        assert (r["pid"], r["tid"]) == (int(g["PID"]), int(g["TID"]))


def test_nesting_paths_and_domains(nsys_db):
    rows = nsys_db.sql(
        "SELECT name, path, depth, domain FROM nvtx_ranges WHERE run_id = 1 ORDER BY range_id").to_dicts()
    by_name = {}
    for r in rows:
        by_name.setdefault(r["name"], r)  # first instance
    assert by_name[":hstu.request"]["depth"] == 0  # warm-up requests are outermost
    assert {r["depth"] for r in rows if r["name"] == ":hstu.request"} == {0, 1, 2}
    attn = [r for r in rows if r["name"] == ":hstu_attention" and r["path"].startswith("step 0/")]
    assert attn and attn[0]["path"] == "step 0/hstu.request/hstu.layer0/hstu_attention"
    assert by_name["tracekit:named.inner"]["path"] == "tracekit:registered.section/tracekit:named.inner"
    assert by_name["tracekit:registered.section"]["domain"] == "tracekit"  # registered string (textId)
    marks = nsys_db.sql("SELECT name FROM nvtx_marks WHERE run_id = 1 ORDER BY ts_ns")["name"].to_list()
    assert marks == [":steady_state", "tracekit:named.mark"]


def test_cross_thread_range_has_no_nesting(nsys_db):
    r = nsys_db.sql("SELECT style, tid, end_tid, depth FROM nvtx_ranges WHERE run_id = 3 AND name = ':cross.thread'").to_dicts()
    assert len(r) == 1 and r[0]["style"] == "StartEnd" and r[0]["tid"] != r[0]["end_tid"] and r[0]["depth"] is None


@pytest.mark.parametrize("scen", CPU_ONLY)
def test_ranges_of_a_capture_without_cuda_are_nsys_pushpop_trace(nsys_db, scen):
    """A host program traced without CUDA (nsys -t nvtx,osrt): every push/pop range as nsys's
    own nvtx_pushpop_trace has it (start, end, level, pid, tid, its parent), in the default
    and a created domain; no GPU work (projection NULL, 0 ops, no child with GPU work); the
    start/end ranges that the worker thread ends carry that thread and no nesting."""
    with lzma.open(NSYS_EXPORTS[scen].parent / "stats" / "nvtx_pushpop_trace.csv.xz", "rt") as fh:
        golden = list(csv.DictReader(io.StringIO(fh.read())))
    rows = nsys_db.sql("SELECT * FROM nvtx_ranges WHERE run_id = (SELECT run_id FROM runs WHERE name = ?)",
                       [scen]).to_dicts()
    ours = {(r["name"], r["start_ns"]): r for r in rows if r["style"] == "PushPop"}
    by_id = {r["range_id"]: r for r in rows}
    nsys_ids = {g["RangeId"]: g for g in golden}
    assert len(ours) == len(golden) > 0
    for g in golden:
        r = ours[(g["Name"], int(g["Start (ns)"]))]
        assert (r["end_ns"], r["depth"], r["pid"], r["tid"]) == (int(g["End (ns)"]), int(g["Lvl"]), int(g["PID"]),
                                                               int(g["TID"]))
        parent = nsys_ids.get(g["ParentId"])
        want = (parent["Name"], int(parent["Start (ns)"])) if parent else None
        mine = by_id.get(r["parent_id"])
        assert ((mine["name"], mine["start_ns"]) if mine else None) == want
    assert {r["path"] for r in rows if r["style"] == "PushPop"} == {
        "batch", "batch/schedule", "batch/schedule/read_input", "loader:decode", "loader:decode/loader:parse"}
    assert all(r["proj_start_ns"] is None and r["proj_dur_ns"] is None and r["gpu_ops"] == 0 and r["children"] == 0
               for r in rows)
    crossing = [r for r in rows if r["style"] == "StartEnd"]
    assert {r["name"] for r in crossing} == {":request", "loader:drain"}
    assert all(r["end_tid"] is not None and r["end_tid"] != r["tid"] and r["depth"] is None for r in crossing)
    assert {r["domain"] for r in rows} == {"", "loader"} and any(r["text"] == "decode" for r in rows)


def test_ids_and_names(nsys_db):
    api = nsys_db.sql("SELECT DISTINCT name, raw_name FROM api_calls WHERE run_id = 1").to_dicts()
    assert any(r["raw_name"] != r["name"] and r["raw_name"].startswith(r["name"] + "_v") for r in api)
    assert not any(re.search(r"_v\d{4}$", r["name"]) for r in api)  # nsys strips _vNNNN only
    k = nsys_db.sql("SELECT DISTINCT pid FROM kernels WHERE run_id = 3").to_dicts()
    t = nsys_db.sql("SELECT DISTINCT pid FROM api_calls WHERE run_id = 3").to_dicts()
    assert {r["pid"] for r in k} <= {r["pid"] for r in t}
    gpu = nsys_db.sql("SELECT name, sm_count, cc_major FROM gpus WHERE run_id = 1").to_dicts()
    assert gpu == [{"name": "NVIDIA H200", "sm_count": 132, "cc_major": 9}]
    graph = nsys_db.sql("SELECT count(*) AS n FROM kernels WHERE run_id = 1 AND graph_node_id IS NOT NULL")
    assert graph["n"][0] > 0


def test_kernels_by_nvtx_accounts_for_all_kernel_time(nsys_db):
    df = nsys_db.query("kernels-by-nvtx", run="hstu_mixed", limit=0)
    total = nsys_db.sql("SELECT sum(dur_ns) AS s FROM kernels WHERE run_id = 1")["s"][0]
    assert df["total_ns"].sum() == total
    paths = set(df["path"].to_list())
    assert "step 0/hstu.request/hstu.layer0/hstu_attention" in paths
    assert "graph.section/graph.replay" in paths  # graph kernels via their cudaGraphLaunch
    top = nsys_db.query("kernels-by-nvtx", run="hstu_mixed", depth=1, limit=0)
    assert top["total_ns"].sum() == total and all("/" not in p for p in top["path"].to_list())
    assert {p.split("/")[0] for p in paths} == set(top["path"].to_list())


def test_kernels_by_nvtx_no_range_is_outside_every_push_pop_range(nsys_db):
    """kernels-by-nvtx files a kernel under the innermost push/pop range around its launch:
    its '(no range)' row holds the launches gpu-trace gives no nvtx_path, those inside a
    start/end range alone included (hstu_mixed: 3 launched inside graph.section, which
    nvtx-kernels, counting start/end ranges too, lists under it), and its header says so:
    not 'outside every range', which a reader checks against nvtx-kernels' no-range row."""
    import polars as pl

    from tracekit.registry import get_registry

    outside = nsys_db.query("kernels-by-nvtx", run="hstu_mixed", limit=0).filter(pl.col("path") == "(no range)")
    trace = nsys_db.query("gpu-trace", run="hstu_mixed", limit=0).filter(
        (pl.col("op_kind") == "kernel") & pl.col("nvtx_path").is_null())
    assert (outside["launches"][0], outside["total_ns"][0]) == (len(trace), trace["dur_ns"].sum())
    in_none = nsys_db.query("nvtx-kernels", run="hstu_mixed", limit=0).filter(pl.col("range").is_null())
    assert (len(trace), in_none["kernel_instances"].sum()) == (19, 16)
    said = " ".join(get_registry().queries["kernels-by-nvtx"].description.split())
    assert "launched outside every push/pop range" in said and "outside every range are" not in said


def test_kernels_by_nvtx_cuts_paths_by_nesting_not_by_slashes(nsys_db):
    """`depth` keeps N levels of nesting: a range named 'io/read' is one level, and the
    24-deep stack of odd_nvtx is cut where asked; the kernel time is kept whole."""
    full = nsys_db.query("kernels-by-nvtx", run="odd_nvtx", limit=0)
    for depth in (1, 2, 5):
        cut = nsys_db.query("kernels-by-nvtx", run="odd_nvtx", depth=depth, limit=0)
        assert cut["total_ns"].sum() == full["total_ns"].sum()
        paths = set(cut["path"].to_list())
        assert "io/read" in paths and "io" not in paths
        deep = [p for p in paths if p == "deep" or p.startswith("deep/")]  # 'deep' and 24 levels below
        assert max(len(p.split("/")) for p in deep) == depth
    one = dict(zip(*nsys_db.query("kernels-by-nvtx", run="odd_nvtx", depth=1, limit=0)
                   .select("path", "launches").to_dict(as_series=False).values(), strict=True))
    assert one["deep"] == full.filter(full["path"].str.starts_with("deep"))["launches"].sum()


def test_launches_outside_every_range_have_no_range(nsys_db):
    """Between two outermost ranges a launch has no range (NULL), as before the first."""
    rows = nsys_db.sql("""
        SELECT k.run_id, count(*) FILTER (WHERE k.nvtx_range_id < 0) AS negative,
               count(*) FILTER (WHERE k.nvtx_range_id IS NULL AND k.api_start_ns > f.first_ns) AS between
        FROM kernels k JOIN (SELECT run_id, min(start_ns) AS first_ns FROM nvtx_ranges
                             WHERE style = 'PushPop' GROUP BY 1) f USING (run_id)
        GROUP BY 1 ORDER BY 1""").to_dicts()
    assert all(r["negative"] == 0 for r in rows)
    assert sum(r["between"] for r in rows) > 0


def test_gpu_utilization_is_consistent(nsys_db):
    df = nsys_db.query("gpu-utilization", run="multithread")
    assert (df["busy_ns"] <= df["span_ns"]).all()
    dev = df.filter(df["pid"].is_null())
    streams = df.filter(df["pid"].is_not_null())
    assert dev["ops"][0] == streams["ops"].sum()
    assert dev["busy_ns"][0] >= streams["busy_ns"].max()
    assert dev["busy_ns"][0] <= streams["busy_ns"].sum()


def _interval_union(intervals, min_gap):
    """Busy time, gaps >= min_gap (count, total) and the longest gap of a set of intervals,
    by merging them in start order: the reference for gpu-utilization."""
    busy, gaps, gap_total, max_gap, cur = 0, 0, 0, 0, None
    for s, e in sorted(intervals):
        if cur is None:
            cur = [s, e]
        elif s > cur[1]:
            busy += cur[1] - cur[0]
            gap = s - cur[1]
            max_gap = max(max_gap, gap)
            if gap >= min_gap:
                gaps, gap_total = gaps + 1, gap_total + gap
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return busy + cur[1] - cur[0], gaps, gap_total, max_gap


@pytest.mark.parametrize("scen", ["hstu_mixed", "multithread", "multiproc", "graphs_graph", "memops", "autograd",
                                  "streams", "nccl", "jax", "jax_graph"])
def test_gpu_utilization_is_the_interval_union(nsys_db, scen, tmp_path):
    # several streams with overlapping work, copies and memsets; three processes with
    # equal stream ids on two GPUs; CUDA graph launches traced whole; Unified Memory
    # migrations, on no stream (context and stream 0 in the export); priority streams overlapping;
    # a process per GPU (nccl) and one process on two GPUs with graph-level tracing and no
    # memset table (jax_graph): every number equals a plain merge of the export's own
    # intervals, per (process, context, stream) and per device
    raw = tmp_path / "e.sqlite"
    raw.write_bytes(lzma.open(NSYS_EXPORTS[scen]).read())
    con = sqlite3.connect(raw)
    ops = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                  "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if con.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", [table]).fetchone()[0]:
            ops += con.execute(f'SELECT deviceId, (globalPid >> 24) & 16777215, nullif(contextId, 0), '
                               f'nullif(streamId, 0), start, "end" FROM {table}').fetchall()
    con.close()
    streams = {op[:4] for op in ops}
    if scen == "multiproc":  # the case that needs the process in the key
        assert len(streams) > len({(d, st) for d, _, _, st in streams})
    if scen == "memops":  # the migrations: one lane of the process, on no stream
        assert sum(st is None for *_, st in streams) == 1
    for min_gap in (0, 10_000):
        df = nsys_db.query("gpu-utilization", run=scen, min_gap_ns=min_gap, limit=0)
        assert df.height == len(streams) + len({d for d, *_ in ops})
        for row in df.iter_rows(named=True):
            key = (row["device_id"], row["pid"], row["context_id"], row["stream_id"])
            mine = [(s, e) for *k, s, e in ops
                    if k[0] == key[0] and (row["pid"] is None or tuple(k) == key)]
            busy, gaps, gap_total, max_gap = _interval_union(mine, min_gap)
            assert row["ops"] == len(mine)
            assert row["span_ns"] == max(e for _, e in mine) - min(s for s, _ in mine)
            assert (row["busy_ns"], row["gaps"], row["gap_total_ns"], row["max_gap_ns"]) == (busy, gaps, gap_total, max_gap)


def test_ops_on_no_stream_have_no_stream_or_context(nsys_db):
    """Unified Memory migrations run on no stream and in no context: the export writes 0
    for both (CUPTI's ids start at 1) and nsys stats prints neither (cuda_gpu_trace's
    NULLIF). The store holds NULL: gpu-trace prints what nsys prints (its golden test),
    gpu-utilization gives them one lane of their process beside its streams (device rows:
    pid NULL), idle-gaps names no stream. Every other op of every capture has both."""
    memops = nsys_db.sql("SELECT run_id FROM runs WHERE name = 'memops'")["run_id"][0]
    um = nsys_db.sql(f"""
        SELECT count(*) AS n, count(context_id) AS ctx, count(stream_id) AS stream,
               count(*) FILTER (WHERE correlation_id = 0) AS corr0
        FROM memcpy WHERE run_id = {memops} AND operation LIKE '[CUDA memcpy Unified %'""").row(0, named=True)
    assert um == {"n": 2229, "ctx": 0, "stream": 0, "corr0": 2229}
    assert nsys_db.sql("SELECT count(*) AS n FROM gpu_ops WHERE (context_id IS NULL OR stream_id IS NULL) "
                       "AND NOT starts_with(name, '[CUDA memcpy Unified ')")["n"][0] == 0
    util = nsys_db.query("gpu-utilization", run="memops", limit=0)
    assert util["pid"][0] is None and util["ops"][0] == nsys_db.sql(
        f"SELECT count(*) AS n FROM gpu_ops WHERE run_id = {memops}")["n"][0]
    lanes = util.filter(util["pid"].is_not_null())
    assert lanes["stream_id"].to_list() == [7, 13, 14, 15, None]  # the process's streams, then its ops on none
    assert lanes["context_id"].to_list() == [1, 1, 1, 1, None] and lanes["ops"][-1] == 2229
    gaps = nsys_db.query("idle-gaps", run="memops", limit=0)
    unified = gaps["next_op"].str.starts_with("[CUDA memcpy Unified ")
    assert unified.any() and gaps.filter(unified)["stream_id"].is_null().all()
    assert gaps.filter(~unified)["stream_id"].is_not_null().all()


@pytest.mark.parametrize("scen", ["hstu_mixed", "many_kernels", "multithread"])
def test_launch_overhead(nsys_db, scen):
    """The ingest-time summary equals the statistics computed from every launch."""
    df = nsys_db.query("launch-overhead", run=scen, limit=0)
    run = nsys_db.sql("SELECT run_id FROM runs WHERE name = ?", [scen])["run_id"][0]
    assert df["launches"].sum() == nsys_db.sql(
        f"SELECT count(*) AS n FROM kernels WHERE run_id = {run} AND api_start_ns IS NOT NULL")["n"][0]
    assert (df["latency_min_ns"] <= df["latency_med_ns"]).all()
    assert (df["latency_med_ns"] <= df["latency_p90_ns"]).all() and (df["latency_p90_ns"] <= df["latency_p99_ns"]).all()
    want = nsys_db.sql(f"""
        SELECT name, count(*) AS launches, median(api_end_ns - api_start_ns) AS api_med_ns,
               min(start_ns - api_start_ns) AS latency_min_ns, median(start_ns - api_start_ns) AS latency_med_ns,
               quantile_cont(start_ns - api_start_ns, 0.9) AS latency_p90_ns,
               quantile_cont(start_ns - api_start_ns, 0.99) AS latency_p99_ns,
               max(start_ns - api_start_ns) AS latency_max_ns,
               median(start_ns - api_end_ns) FILTER (WHERE start_ns > api_end_ns) AS queue_med_ns,
               sum(start_ns - api_start_ns)::BIGINT AS total_latency_ns
        FROM kernels WHERE run_id = {run} AND api_start_ns IS NOT NULL GROUP BY name ORDER BY name""").to_dicts()
    got = {r["name"]: r for r in df.to_dicts()}
    assert len(got) == len(want)
    for w in want:
        g = got[w["name"]]
        for col, value in w.items():
            if value is None or isinstance(value, str):
                assert g[col] == value, (w["name"], col)
            else:  # the query rounds its medians and percentiles to 0.1 ns
                assert g[col] == pytest.approx(value, rel=1e-12, abs=0.05 + 1e-9), (w["name"], col)


def test_resolve_versioned_tables():
    got = resolve_tables(["A", "A_V2", "A_V3", "MEMCPY2", "B_V2"])
    assert got == {"A": "A_V3", "MEMCPY2": "MEMCPY2", "B": "B_V2"}


# --- re-ingest and bad input ---------------------------------------------------------

@pytest.fixture()
def plain_export(tmp_path):
    out = tmp_path / "mt.sqlite"
    with lzma.open(DATA / "nsys_multithread" / "export.sqlite.xz") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _snapshot(db):
    tk = tracekit.open(db)
    try:
        tables = tk.sql("SELECT table_name FROM information_schema.tables ORDER BY 1")["table_name"].to_list()
        return {t: tk.sql(f'SELECT count(*) AS n FROM "{t}"')["n"][0] for t in tables}, tk.runs().to_dicts()
    finally:
        tk.close()


def test_same_content_twice_is_a_noop(tmp_path, plain_export):
    db = tmp_path / "s.duckdb"
    tk = tracekit.open(db)
    first = tk.ingest(plain_export)
    again = tk.ingest(DATA / "nsys_multithread" / "export.sqlite.xz")  # same content, compressed
    assert not first.skipped and again.skipped and again.run_id == first.run_id
    assert len(tk.runs()) == 1
    # nothing of the second copy was written
    assert tk.sql("SELECT count(*) AS n FROM kernels")["n"][0] == first.rows["kernels"]
    assert tk.sql("SELECT count(*) AS n FROM nvtx_ranges")["n"][0] == first.rows["nvtx_ranges"]
    tk.close()


def _drop_column(src, table, column, dst):
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
    con.commit()
    con.close()
    return dst


def _bad_inputs(tmp_path, plain):
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(plain.read_bytes()[: plain.stat().st_size // 3])
    notsqlite = tmp_path / "notes.sqlite"
    notsqlite.write_text("hello\n")
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    noevents = tmp_path / "noevents.sqlite"  # no CUDA, NVTX or OS runtime table: nothing to answer
    shutil.copy(plain, noevents)
    con = sqlite3.connect(noevents)
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                "(name LIKE 'CUPTI_ACTIVITY_KIND_%' OR name IN ('NVTX_EVENTS', 'OSRT_API'))").fetchall():
        con.execute(f'DROP TABLE "{table}"')
    con.commit()
    con.close()
    oldschema = _drop_column(plain, "CUPTI_ACTIVITY_KIND_KERNEL", "correlationId", tmp_path / "old.sqlite")
    badxz = tmp_path / "cut.sqlite.xz"
    badxz.write_bytes((DATA / "nsys_multithread" / "export.sqlite.xz").read_bytes()[:5000])
    # whole archives of bad content: the error names the archive, not its temporary copy
    packed = {}
    for src, name, pack, why in ((truncated, "truncated2.sqlite.gz", gzip.compress, "truncated or corrupt"),
                                 (other, "other2.sqlite.xz", lzma.compress, "not an Nsight Systems export"),
                                 (noevents, "noevents2.sqlite.xz", lzma.compress,
                                  "without CUDA, NVTX or OS runtime events")):
        (tmp_path / name).write_bytes(pack(src.read_bytes()))
        packed[tmp_path / name] = why
    return {
        truncated: "truncated or corrupt",
        notsqlite: "not a recognised profile",
        other: "not an Nsight Systems export",
        noevents: "without CUDA, NVTX or OS runtime events",
        oldschema: "lacks column correlationId",
        badxz: "cannot decompress",
        tmp_path / "missing.sqlite": "no such file",
        **packed,
    }


def test_an_export_without_events_says_whether_they_were_traced(tmp_path):
    """No CUDA, NVTX or OS runtime table: where the capture traced them (META_DATA_CAPTURE),
    none happened in the profiled processes, and the error says so rather than suggest the
    options the capture had; where it did not, the error names the options."""
    def without_events(name: str, sql: list[str]):
        path = _older_export(NSYS_EXPORTS["multithread"], tmp_path / name, sql)
        con = sqlite3.connect(path)
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                    "(name LIKE 'CUPTI_ACTIVITY_KIND_%' OR name IN ('NVTX_EVENTS', 'OSRT_API'))"
                                    ).fetchall():
            con.execute(f'DROP TABLE "{table}"')
        con.commit()
        con.close()
        return path

    quiet = without_events("quiet.sqlite", [])
    bare = without_events("bare.sqlite", ["DELETE FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE'"])
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        with pytest.raises(InputError, match=r"quiet.sqlite: nsys export without CUDA, NVTX or OS runtime events: "
                                             r"nsys traced CUDA, NVTX(, OS runtime)? but recorded none \("):
            tk.ingest(quiet)
        with pytest.raises(InputError, match=r"bare.sqlite: nsys export without CUDA, NVTX or OS runtime events "
                                             r"\(no CUPTI_ACTIVITY_KIND_\*.*profile with `nsys profile -t cuda,nvtx,osrt`$"):
            tk.ingest(bare)
    assert not (tmp_path / "s.duckdb").exists()


def test_a_capture_window_that_missed_the_gpu_work_ingests_with_a_warning(tmp_path):
    """nsys_window_missed: CUDA traced, the capture range a host-only NVTX range after the GPU
    work. The run ingests (its NVTX ranges and OS runtime calls answer questions), with one
    warning naming the user's file (not the decompressed copy) and what its kernel questions
    will answer; a capture with CUDA events in its window says nothing of the kind."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            tk.ingest(NSYS_EXPORTS["window_missed"], name="missed")
        said = [str(w.message) for w in seen if issubclass(w.category, CaptureWarning)]
        assert [w.filename for w in seen if issubclass(w.category, CaptureWarning)] == [__file__]  # (the line that asked)
        assert len(said) == 1 and said[0].startswith(
            f"{NSYS_EXPORTS['window_missed']}: nsys traced CUDA but recorded no CUDA event (no API call, kernel or "
            "copy): the capture's window (nsys --delay, --duration, --capture-range) held none"), said
        counts = tk.sql("SELECT (SELECT count(*) FROM nvtx_ranges) AS nvtx, (SELECT count(*) FROM osrt_calls) AS osrt, "
                        "(SELECT count(*) FROM kernels) + (SELECT count(*) FROM api_calls) AS cuda").to_dicts()
        assert counts == [{"nvtx": 11, "osrt": 52, "cuda": 0}]  # (1 "host", 10 "step"; stats/osrt_sum.csv's 52 calls)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CaptureWarning)
            tk.ingest(NSYS_EXPORTS["capture_range"])
    # files ingested at once in threads: each keeps its warning and its own name
    scens = ("capture_range", "window_missed", "cpu_only", "hstu_mixed")
    with tracekit.open(tmp_path / "t.duckdb") as tk, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert all(o.error is None for o in parallel.ingest_many(tk, [NSYS_EXPORTS[s] for s in scens], workers=2))
    assert [str(w.message)[:90] for w in seen if issubclass(w.category, CaptureWarning)] == [said[0][:90]]
    assert [w.filename for w in seen if issubclass(w.category, CaptureWarning)] == [__file__]  # (said in a thread)


def test_bad_input_errors_leave_the_store_unchanged(tmp_path, plain_export):
    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk0:
        tk0.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz")
    before = _snapshot(db)
    for path, why in _bad_inputs(tmp_path, plain_export).items():
        tk = tracekit.open(db)
        with pytest.raises(InputError) as err:
            tk.ingest(path)
        tk.close()
        msg = str(err.value)
        assert str(path) in msg and why in msg and "\n" not in msg, msg
        assert _snapshot(db) == before, f"store changed by {path.name}"


def test_bad_input_on_a_fresh_db_creates_nothing(tmp_path):
    db = tmp_path / "new.duckdb"
    bad = tmp_path / "x.sqlite"
    bad.write_text("nope")
    with pytest.raises(InputError):
        tracekit.open(db).ingest(bad)
    assert not db.exists()


def test_optional_columns_missing_still_ingest(tmp_path, plain_export):
    src = _drop_column(plain_export, "CUPTI_ACTIVITY_KIND_KERNEL", "demangledName", tmp_path / "a.sqlite")
    src = _drop_column(src, "CUPTI_ACTIVITY_KIND_KERNEL", "graphNodeId", tmp_path / "b.sqlite")
    tk = tracekit.open(tmp_path / "s.duckdb")
    res = tk.ingest(src)
    assert res.rows["kernels"] == 247
    names = tk.sql("SELECT count(*) AS n FROM kernels WHERE name IS NULL")["n"][0]
    assert names == 0  # falls back to shortName
    tk.close()


def test_os_runtime_calls_without_their_optional_columns(tmp_path, plain_export):
    """The OS runtime calls are the export's event class 27 (the others are zero-length
    markers); an OSRT_API without nameId or eventClass still ingests, its names NULL and
    every row kept, and the rest of the run is unchanged."""
    with sqlite3.connect(plain_export) as sq:
        calls, every = sq.execute("SELECT count(*) FILTER (WHERE eventClass = 27), count(*) FROM OSRT_API").fetchone()
    assert 0 < calls < every
    tk = tracekit.open(tmp_path / "a.duckdb")
    assert tk.ingest(plain_export).rows["osrt_calls"] == calls
    assert tk.sql("SELECT count(*) AS n FROM osrt_calls WHERE name IS NULL OR dur_ns <= 0")["n"][0] == 0
    src = _drop_column(plain_export, "OSRT_API", "nameId", tmp_path / "a.sqlite")
    src = _drop_column(src, "OSRT_API", "eventClass", tmp_path / "b.sqlite")
    tk2 = tracekit.open(tmp_path / "b.duckdb")
    res = tk2.ingest(src)
    assert res.rows["osrt_calls"] == every and res.rows["kernels"] == 247
    assert tk2.sql("SELECT count(*) AS n FROM osrt_calls WHERE name IS NOT NULL")["n"][0] == 0
    tk.close()
    tk2.close()


def test_cli_bad_input_is_one_line_exit_2(tmp_path, plain_export):
    db = tmp_path / "s.duckdb"
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(plain_export.read_bytes()[:4096])
    for args in (["ingest", str(bad)], ["query", "nope"], ["query", "top-kernels", "--limit", "x"],
                 ["ingest", str(tmp_path / "none.sqlite")], ["query", "top-kernels", "-p", "oops"]):
        proc = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(db), *args],
                              capture_output=True, text=True)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tracekit: error:"), (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(db), "--debug", "ingest", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" in proc.stderr  # (--debug adds the traceback, not another code)


def test_cli_formats(tmp_path, plain_export):
    db = tmp_path / "s.duckdb"
    run = [sys.executable, "-m", "tracekit.cli", "--db", str(db)]
    assert subprocess.run([*run, "ingest", str(plain_export), "--name", "mt"], capture_output=True).returncode == 0
    out = subprocess.run([*run, "query", "top-kernels", "--limit", "0", "-f", "csv"], capture_output=True, text=True)
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == 8 and list(rows[0])[0] == "name"  # all rows, as in cuda_gpu_kern_sum.csv
    pq = tmp_path / "k.parquet"
    assert subprocess.run([*run, "query", "top-kernels", "-f", "parquet", "-o", str(pq)]).returncode == 0
    import polars as pl

    assert pl.read_parquet(pq).columns[:3] == ["name", "instances", "total_ns"]
    js = subprocess.run([*run, "sql", "SELECT count(*) AS n FROM kernels", "-f", "json"], capture_output=True, text=True)
    assert '"n":247' in js.stdout.replace(" ", "")


def _report_and_nsys(tmp_path, monkeypatch, export, check: str):
    """A stand-in .nsys-rep, and a stand-in nsys ($TRACEKIT_NSYS) that runs the bash lines ``check``
    on its arguments, then writes ``export`` where -o says."""
    fake = tmp_path / "nsys"
    fake.write_text(f"#!/usr/bin/env bash\n{check}"
                    'while [ $# -gt 1 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                    f'cp "{export}" "$out"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("TRACEKIT_NSYS", str(fake))
    rep = tmp_path / "capture.nsys-rep"
    rep.write_bytes(b"not sqlite: a report")
    return rep


def test_nsys_rep_is_exported_with_nsys(tmp_path, plain_export, monkeypatch):
    """A .nsys-rep goes through `nsys export --type sqlite` (here a stand-in nsys that
    writes the export it was asked for, checking the arguments it gets)."""
    rep = _report_and_nsys(tmp_path, monkeypatch, plain_export,
                           '[ "$1" = export ] && [ "$2" = --type ] && [ "$3" = sqlite ] || exit 9\n')
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    db = tmp_path / "s.duckdb"
    proc = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(db), "ingest", str(rep)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "run 1 (capture, nsys)" in proc.stdout
    monkeypatch.setenv("TRACEKIT_NSYS", str(tmp_path / "missing"))
    proc = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(tmp_path / "t.duckdb"), "ingest", str(rep)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "nsys not found" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_an_empty_nsys_rep_is_an_empty_file_not_a_missing_nsys(tmp_path, monkeypatch, capsys):
    """A zero-byte .nsys-rep (a copy that failed) says it is empty, as a zero-byte export does,
    rather than asking for nsys, which could not export it either; nothing is created."""
    from tracekit.cli import main as cli_main

    rep = tmp_path / "capture.nsys-rep"
    rep.write_bytes(b"")
    monkeypatch.setenv("TRACEKIT_NSYS", str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", str(tmp_path))
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(rep)]) == 2
    assert capsys.readouterr().err == f"tracekit: error: {rep}: empty file\n"
    assert not db.exists()


def test_nsys_rep_is_exported_with_its_nvtx_payloads_where_nsys_can(tmp_path, plain_export, monkeypatch):
    """The export asks for the NVTX payloads (--include-blobs: the Python stacks); an nsys that
    does not know the option (a stand-in that refuses it as nsys refuses an unknown one) exports
    without them."""
    calls = tmp_path / "calls"
    rep = _report_and_nsys(tmp_path, monkeypatch, plain_export, f'echo "$*" >> "{calls}"\n'
                           'for a in "$@"; do [ "$a" = --include-blobs=true ] && '
                           '{ echo "unrecognised option \'$a\'" >&2; exit 1; }; done\n')
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(rep)
        assert tk.sql("SELECT count(*) AS n FROM kernels")["n"][0] == 247
    tried = calls.read_text().splitlines()
    assert len(tried) == 2 and "--include-blobs=true" in tried[0] and "--include-blobs" not in tried[1]


def test_sql_is_read_only(tmp_path, plain_export):
    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(plain_export)
    proc = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(db), "sql", "DELETE FROM _kernels"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "read-only" in proc.stderr.lower()
    with tracekit.open(db) as tk:
        assert tk.sql("SELECT count(*) AS n FROM kernels")["n"][0] == 247


def test_tables_read_in_parts_give_the_same_store(tmp_path, nsys_db, monkeypatch, page_decoder_off):
    """Big integer tables that the page decoder declines are read through SQLite as
    parallel rowid ranges: same rows as one read."""
    from tracekit.ingest.nsys import source

    monkeypatch.setattr(source, "SPLIT_ROWS", 1000)
    with tracekit.open(tmp_path / "parts.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["many_kernels"], name="many_kernels")
        for q in ("top-kernels", "api-summary", "kernel-exec", "nvtx-gpu-projection"):
            assert tk.query(q, limit=0).equals(nsys_db.query(q, run="many_kernels", limit=0)), q


def test_table_output_keeps_bracketed_names(tmp_path, plain_export):
    """Names like '[CUDA memcpy Host-to-Device]' are text, not terminal markup."""
    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(plain_export)
    out = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(db), "query", "memcpy-time"],
                         capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"})  # pytest sets 80
    assert out.returncode == 0 and "[CUDA memcpy Device-to-Host]" in out.stdout
    out = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(db), "sql", "SELECT '[bold]x' AS t"],
                         capture_output=True, text=True)
    assert "[bold]x" in out.stdout
    out = subprocess.run([sys.executable, "-m", "tracekit.cli", "queries"], capture_output=True, text=True)
    assert "[nsys]" in out.stdout


def test_store_of_another_schema_is_refused(tmp_path):
    import duckdb

    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))  # a store as tracekit wrote it before names became ids
    con.execute("CREATE TABLE runs (run_id INTEGER PRIMARY KEY); CREATE TABLE kernels (run_id INTEGER, name VARCHAR)")
    con.close()
    for read_only in (False, True):
        with pytest.raises(tracekit.TracekitError, match="older tracekit .*store schema 1.*new database"):
            tracekit.open(old, read_only=read_only).con  # noqa: B018 - opening is the test


def test_store_of_other_views_is_read_with_this_code_s_views(tmp_path, plain_export):
    """A store whose views and macros an older tracekit of the same schema version set
    up (one changed, one missing, a macro changed) answers with this code's own on a
    read-only open, and the file stays as it was; a writable open brings it up to date."""
    import duckdb

    from tracekit.store import schema_digest

    db = tmp_path / "s.duckdb"
    asked = ("top-kernels", "gpu-utilization", "api-summary", "nvtx-gpu-projection")
    with tracekit.open(db) as tk:
        tk.ingest(plain_export)
        want = {q: tk.query(q, limit=0) for q in asked}
    con = duckdb.connect(str(db))
    con.execute("CREATE OR REPLACE VIEW gpu_ops AS SELECT * FROM gpu_ops WHERE false")
    con.execute("DROP VIEW kernels")
    con.execute("CREATE OR REPLACE MACRO round1(x) AS -1")
    con.execute("UPDATE _store SET value = 'older' WHERE key = 'schema_hash'")
    con.close()
    before = db.read_bytes()
    with tracekit.open(db, read_only=True) as tk:
        for q in asked:
            assert tk.query(q, limit=0).equals(want[q]), q
    assert db.read_bytes() == before
    out = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(db), "query", "top-kernels",
                          "-f", "csv"], capture_output=True, text=True)
    assert out.returncode == 0 and want["top-kernels"]["name"][0] in out.stdout, out.stderr
    with tracekit.open(db) as tk:
        tk.con  # noqa: B018 - a writable open sets the schema up again
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT value FROM _store WHERE key = 'schema_hash'").fetchall() == [(schema_digest(),)]
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'kernels'").fetchall() == [(1,)]
    con.close()


def test_names_are_stored_once_across_runs(nsys_db):
    # every kernel/API name of every run once in _strings, and the views resolve them
    dup = nsys_db.sql("SELECT count(*) - count(DISTINCT value) AS n FROM _strings")["n"][0]
    assert dup == 0
    unresolved = nsys_db.sql("SELECT count(*) AS n FROM kernels WHERE name IS NULL OR api_name IS NULL AND api_start_ns IS NOT NULL")
    assert unresolved["n"][0] == 0
    shared = nsys_db.sql("SELECT count(DISTINCT run_id) AS runs FROM api_calls WHERE name = 'cudaLaunchKernel'")["runs"][0]
    ids = nsys_db.sql("SELECT count(DISTINCT name_id) AS n FROM api_calls WHERE name = 'cudaLaunchKernel'")["n"][0]
    assert shared >= 2 and ids == 1


@pytest.mark.parametrize("case", ["dense", "sparse", "processes", "repeats", "nulls"])
def test_launch_rows_match_a_plain_join(case):
    """Each GPU op's launching call: same correlation id, same process; the first call
    where a key repeats; -1 where none matches (NULL keys match nothing)."""
    import random

    import pyarrow as pa

    from tracekit.ingest.nsys.launches import launch_rows

    rng = random.Random(case)
    procs = [(7 << 24), (9 << 24) | (1 << 56)] if case == "processes" else [(7 << 24)]
    spread = 10**12 if case == "sparse" else 5000
    calls = [(rng.choice(procs) | rng.randrange(1, 50), rng.randrange(-3, spread)) for _ in range(3000)]
    if case != "repeats":
        seen = set()
        calls = [c for c in calls if not ((c[0] & -16777216, c[1]) in seen or seen.add((c[0] & -16777216, c[1])))]
    other = [11 << 24] + ([0] if case == "nulls" else [])  # 0: the process bits of a NULL globalTid
    ops = [(rng.choice(procs + other), rng.randrange(-3, spread) if rng.random() < 0.2 else rng.choice(calls)[1])
           for _ in range(4000)]
    api_corr = [c[1] for c in calls]
    api_tid = [c[0] for c in calls]
    ops_pid = [o[0] for o in ops]
    if case == "nulls":
        api_corr = [None if i % 7 == 0 else c for i, c in enumerate(api_corr)]
        api_tid = [None if i % 13 == 0 else t for i, t in enumerate(api_tid)]
        ops_pid = [None if i % 11 == 0 else p for i, p in enumerate(ops_pid)]
    api = pa.table({"correlationId": pa.array(api_corr, pa.int64()), "globalTid": pa.array(api_tid, pa.int64())})
    tbl = pa.table({"correlationId": [o[1] for o in ops], "globalPid": pa.array(ops_pid, pa.int64())})
    first = {}
    for i, (tid, corr) in enumerate(zip(api_tid, api_corr, strict=True)):
        if corr is not None and tid is not None:
            first.setdefault((tid & -16777216, corr), i)
    want = [first.get((p, c), -1) if p is not None else -1 for p, c in zip(ops_pid, [o[1] for o in ops], strict=True)]
    got = launch_rows(api, tbl).tolist()
    assert got == want
    assert sum(g >= 0 for g in got) > 500


@pytest.mark.parametrize("limit", ["1MB", "100MB"])
def test_a_memory_limit_too_small_says_how_much_is_needed(tmp_path, limit):
    """An ingest estimated to need more than TRACEKIT_MEMORY_LIMIT (a budget of the whole
    process) is refused before anything is written: one line saying how much it needs
    and the setting that gives it that, exit 2, the store byte for byte as it was (or not
    created). Ingested under the setting it names, it goes through."""
    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz")
    before = _snapshot(db)
    fresh = tmp_path / "fresh.duckdb"
    export = str(NSYS_EXPORTS["many_kernels"])

    def ingest(target, setting):
        env = {**os.environ, "TRACEKIT_MEMORY_LIMIT": setting}
        return subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(target), "ingest", export],
                              capture_output=True, text=True, env=env)

    wanted = set()
    for target in (db, fresh):
        proc = ingest(target, limit)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        m = re.search(r"needs about ([0-9.]+) GB of memory, more than its memory limit "
                      rf"TRACEKIT_MEMORY_LIMIT={limit}; set TRACEKIT_MEMORY_LIMIT=([0-9.]+GB) or more", lines[0])
        assert m and float(m.group(1)) * 10**9 > 1.125 * int(limit.removesuffix("MB")) * 10**6, lines[0]
        wanted.add(m.group(2))
    assert _snapshot(db) == before
    assert not fresh.exists()
    (setting,) = wanted
    proc = ingest(db, setting)
    assert proc.returncode == 0, proc.stderr
    with tracekit.open(db, read_only=True) as tk:
        assert len(tk.runs()) == 2


def test_a_memory_limit_too_small_is_refused_before_the_rows_are_read(tmp_path, monkeypatch):
    """The estimate comes from the export's row counts, before its tables are read: read
    first, their rows alone could take more than the budget."""
    from tracekit.errors import InputError
    from tracekit.ingest.nsys import memory_need
    from tracekit.ingest.nsys.source import Export

    def no_read(self, jobs):
        raise AssertionError("the export's rows were read before the refusal")

    monkeypatch.setattr(Export, "read", no_read)
    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", "100MB")
    export = NSYS_EXPORTS["many_kernels"]
    with pytest.raises(InputError, match=r"needs about [0-9.]+ GB of memory, more than its memory limit "
                                         r"TRACEKIT_MEMORY_LIMIT=100MB"), tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(export)
    assert not (tmp_path / "s.duckdb").exists()
    monkeypatch.undo()
    # the estimate before reading is the one made from the rows read (row counts by max(rowid))
    import tracekit.ingest as ingest

    with ingest.materialized(export) as plain:
        assert memory_need(plain) == pytest.approx(ingest.detect(plain).read(plain).memory_need, rel=1e-3)


def test_out_of_memory_inside_the_ingest_is_the_same_line(tmp_path, monkeypatch):
    """DuckDB running out of memory where the estimate let the ingest start: the same one
    line (how much is needed, what to set), the store as it was."""
    import tracekit.ingest.budget as budget
    from tracekit.errors import InputError

    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz")
    before = _snapshot(db)
    monkeypatch.setattr(budget, "DUCKDB_FLOOR", 10**6)  # DuckDB kept to a 1 MB budget,
    monkeypatch.setattr(budget, "OVER_BUDGET", 10**6)  # which the estimate lets through
    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", "1MB")
    with tracekit.open(db) as tk, pytest.raises(InputError) as err:
        tk.ingest(NSYS_EXPORTS["many_kernels"])
    assert "\n" not in str(err.value)
    assert re.search(r"needs about [0-9.]+ GB of memory, more than its memory limit TRACEKIT_MEMORY_LIMIT=1MB; "
                     r"set TRACEKIT_MEMORY_LIMIT=[0-9.]+GB or more \(nothing was written\)$", str(err.value)), err.value
    import duckdb

    assert isinstance(err.value.__cause__, duckdb.OutOfMemoryException)
    monkeypatch.undo()
    assert _snapshot(db) == before


@pytest.mark.parametrize("workers", [None, 2], ids=["serial", "threads"])
def test_out_of_memory_before_the_write_is_the_same_line(tmp_path, monkeypatch, capsys, workers):
    """DuckDB running out of memory while the store is asked whether it holds the file (before
    anything is written; seen on a store of 1 MB): the same one line, serial or in threads."""
    import duckdb

    from tracekit.cli import main
    from tracekit.store import Tracekit

    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz")
    before = _snapshot(db)
    existing = Tracekit._existing

    def out_of_memory(self, digest):
        self.con.execute("SET memory_limit = '1MB'")  # a real DuckDB query past its limit
        self.con.execute("SELECT list(i) FROM range(10000000) t(i)").fetchall()
        return existing(self, digest)

    monkeypatch.setattr(Tracekit, "_existing", out_of_memory)
    with pytest.raises(duckdb.OutOfMemoryException), tracekit.open(db) as tk:  # (the query does run out)
        out_of_memory(tk, "x")
    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", "2GB")
    export = str(NSYS_EXPORTS["many_kernels"])
    capsys.readouterr()
    assert main(["--db", str(db), "ingest", export, *(["--workers", str(workers)] if workers else [])]) == 2
    err = capsys.readouterr().err.splitlines()
    assert re.fullmatch(rf"tracekit: error: {re.escape(export)}: needs about [0-9.]+ GB of memory, more than its "
                        r"memory limit TRACEKIT_MEMORY_LIMIT=2GB; set TRACEKIT_MEMORY_LIMIT=[0-9.]+GB or more "
                        r"\(nothing was written\)", err[0]), err
    monkeypatch.undo()
    assert _snapshot(db) == before


def test_default_ingest_memory_limit(monkeypatch):
    from tracekit.store import ingest_memory_limit

    monkeypatch.delenv("TRACEKIT_MEMORY_LIMIT", raising=False)
    assert int(ingest_memory_limit().removesuffix("MB")) >= 800
    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", "3GB")
    assert ingest_memory_limit() == "3GB"


@pytest.mark.parametrize("workers", [None, 2], ids=["serial", "threads"])
@pytest.mark.parametrize("setting", ["-5GB", " -1"])
def test_a_negative_memory_limit_is_a_bad_value_not_no_limit(tmp_path, monkeypatch, capsys, setting, workers):
    """DuckDB reads a negative memory_limit as no limit at all: TRACEKIT_MEMORY_LIMIT=-5GB ingested
    with none. It is a one-line error naming the setting, and the store is left as it was."""
    from conftest import store_state

    from tracekit.cli import main

    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(NSYS_EXPORTS["odd_nvtx"])
    before = store_state(db)
    monkeypatch.setenv("TRACEKIT_MEMORY_LIMIT", setting)
    capsys.readouterr()
    assert main(["--db", str(db), "ingest", str(NSYS_EXPORTS["multithread"]), str(NSYS_EXPORTS["memops"]),
                 *(["--workers", str(workers)] if workers else [])]) == 2
    err = capsys.readouterr().err
    assert err == (f"tracekit: error: TRACEKIT_MEMORY_LIMIT={setting!r}: a memory limit is a size of 0 or more "
                   "(e.g. 4GB); unset it for half the machine's memory\n")
    assert store_state(db) == before
    new = tmp_path / "new.duckdb"
    assert main(["--db", str(new), "ingest", str(NSYS_EXPORTS["multithread"])]) == 2 and not new.exists()


def test_memory_limit_is_a_budget_of_the_whole_process():
    """TRACEKIT_MEMORY_LIMIT bounds the process: DuckDB is given the budget less the
    process's other resident memory (at least DUCKDB_FLOOR), and while rows are written
    at most what it holds plus WRITING_MEMORY_MARGIN; the configured limit is set back
    after, also when a write fails."""
    import duckdb

    from tracekit.ingest.budget import (
        DUCKDB_FLOOR,
        WRITING_MEMORY_MARGIN,
        MemoryBudget,
        duckdb_setting,
        rss,
        setting_bytes,
    )

    con = duckdb.connect()

    def limit():  # (DuckDB shows it cut to 0.1 GiB)
        return setting_bytes(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])

    assert [setting_bytes(t) for t in ("4GB", "800 MB", "3.7 GiB", "1.5gib", "80%")] == [
        4 * 10**9, 800 * 10**6, int(3.7 * 2**30), int(1.5 * 2**30), None]

    con.execute("CREATE TEMP TABLE held AS SELECT range(10000000) AS i")  # ~80 MB held
    for configured, margin in (("3GB", None), ("3GB", WRITING_MEMORY_MARGIN), (f"{(rss() + 400 * 10**6) // 10**6}MB", None),
                               ("100MB", None)):
        con.execute(f"SET memory_limit = '{duckdb_setting(configured)}'")  # (as the store sets it)
        before = limit()
        budget = MemoryBudget(con, configured)
        held = budget.duckdb_bytes()
        other = rss() - held
        budget.share(margin)
        total = setting_bytes(configured)
        want = max(total - other, DUCKDB_FLOOR)
        if margin is not None:
            want = min(want, held + margin)
        assert abs(limit() - want) < 0.1 * 2**30 + 30 * 10**6, (configured, margin, limit(), want)
        budget.restore()
        assert limit() == before
    assert duckdb_setting("100MB") == f"{DUCKDB_FLOOR // 10**6}MB" and duckdb_setting("3GB") == "3GB"
    # while rows are written: no more than DuckDB holds plus the margin
    con.execute("SET memory_limit = '3GB'")
    budget = MemoryBudget(con, "3GB")
    with pytest.raises(RuntimeError), budget.writing():
        assert limit() < budget.duckdb_bytes() + WRITING_MEMORY_MARGIN + 10**6
        raise RuntimeError("an insert failed")
    assert limit() > budget.duckdb_bytes() + WRITING_MEMORY_MARGIN  # the share without margin again
    budget.restore()
    assert limit() == setting_bytes("2.7 GiB")


def test_memory_budget_of_a_small_export_sets_the_limit_once():
    """An export whose estimated arrays fit in WRITING_MEMORY_MARGIN is not capped while
    it writes (it cannot write more than that margin) and DuckDB's limit is set again only
    where it moves by more than 1 % of the budget; a budget that never set the limit leaves
    it as configured. A large or unestimated export keeps the cap. Ingests that share the
    instance share what was set last."""
    import duckdb

    from tracekit.ingest.budget import (
        NEED_BASE,
        WRITING_MEMORY_MARGIN,
        MemoryBudget,
        setting_bytes,
        shared,
    )

    con = duckdb.connect()
    con.execute("SET memory_limit = '3GB'")
    sets = []

    class Counted:  # the connection, counting the SETs of memory_limit
        def execute(self, sql, *args):
            if sql.startswith("SET memory_limit"):
                sets.append(sql)
            return con.execute(sql, *args)

    def limit():
        return setting_bytes(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])

    small = MemoryBudget(Counted(), "3GB", NEED_BASE + WRITING_MEMORY_MARGIN)
    assert not small.large
    small.restore()
    assert sets == [] and limit() == setting_bytes("2.7 GiB")
    small.share()
    with small.writing():
        assert limit() > small.duckdb_bytes() + 2 * WRITING_MEMORY_MARGIN  # not capped
    small.share()
    assert len(sets) == 1, sets
    small.restore()
    assert len(sets) == 2 and limit() == setting_bytes("2.7 GiB")
    for need in (NEED_BASE + WRITING_MEMORY_MARGIN + 1, None):
        large = MemoryBudget(Counted(), "3GB", need)
        assert large.large
        with large.writing():
            assert limit() < large.duckdb_bytes() + WRITING_MEMORY_MARGIN + 10**6
        large.restore()

    # ingests sharing the instance (tracekit.parallel) compute one target: set once for
    # them all; set back by those that set it
    sets.clear()
    with shared():
        a, b = (MemoryBudget(Counted(), "3GB", NEED_BASE) for _ in range(2))
        a.share()
        b.share()
        b.restore()
        assert len(sets) == 1 and limit() < setting_bytes("2.7 GiB")
        a.restore()
        assert len(sets) == 2 and limit() == setting_bytes("2.7 GiB")
        b.share()
        assert len(sets) == 3


def _ranges(rng, threads: int, n: int) -> list[tuple]:
    """Random NVTX ranges per thread: push/pop ranges from a random push/pop sequence
    (some left open at the end), start/end ranges anywhere on the thread (crossing
    them), and the edge cases of equal times: identical ranges, zero-length ranges,
    ranges that touch."""
    out = []
    for tid in range(1, threads + 1):
        t, stack = 0, []
        for _ in range(n):
            t += int(rng.integers(0, 3))  # 0: several events at one time
            if stack and rng.random() < 0.45:
                s = stack.pop()
                out.append((tid, s, t, "PushPop"))
            else:
                stack.append(t)
        out += [(tid, s, None, "PushPop") for s in stack]  # never popped
        for _ in range(n // 10):
            a, b = sorted(int(x) for x in rng.integers(0, t + 1, 2))
            out.append((tid, a, b, "StartEnd"))
        if out:
            out.append(out[-1])  # an identical twin
    return out


def _nest_brute(rows):
    """Reference: the parent of a range is the tightest earlier range of its thread that
    contains it (nsys's rule: the least slack, i.e. the shortest; of equal ones the last;
    of push/pop containers only the innermost, the last opened, competes: push order
    decides between push/pop ranges that only touch), its push/pop parent the innermost
    push/pop one; "earlier" in (start, -end, id) order, the order range ids follow."""
    parent, pp_parent = {}, {}
    for i, (tid, s, e, style, _) in enumerate(rows):
        cands = [j for j, (t2, s2, e2, st2, _) in enumerate(rows)
                 if t2 == tid and (s2, -e2, j) < (s, -e, i) and s2 <= s and e2 >= e]
        pp = [j for j in cands if rows[j][3] == "PushPop"]
        mine = [j for j in cands if rows[j][3] != "PushPop"] + pp[-1:]
        parent[i] = max(mine, key=lambda j: (rows[j][1] - rows[j][2], j), default=None)
        if style == "PushPop":
            pp = [j for j in cands if rows[j][3] == "PushPop"]
            pp_parent[i] = max(pp, key=lambda j: (rows[j][1], -rows[j][2], j), default=None)
    return parent, pp_parent


@pytest.fixture(params=["native", "numpy"])
def nesting(request, monkeypatch):
    """The NVTX nesting in C (_nest.c) and in NumPy: the tests using this run with both."""
    from tracekit.ingest import containers
    from tracekit.ingest.nsys import nvtx

    if request.param == "numpy":
        monkeypatch.setattr(containers, "_nest_native", None)
    return compiled_or_numpy(request, monkeypatch, nvtx, "_nest_native", "tracekit/ingest/_nest.c")


@pytest.mark.parametrize("seed", range(4))
def test_tightest_container_matches_a_brute_force_rule(seed, nesting):
    """containers.tightest on random ranges of a few threads (push/pop ranges, start/end
    ranges crossing them, identical, zero-length and touching ones): of the earlier ranges
    of the thread that end no earlier (start/end ones, and the last such push/pop one:
    push order decides between push/pop ranges that only touch), the shortest, of equal
    ones the last; depth along those parents."""
    import numpy as np

    from tracekit.ingest import containers

    rng = np.random.default_rng(seed)
    for _ in range(15):
        raw = _ranges(rng, threads=int(rng.integers(1, 4)), n=int(rng.integers(5, 40)))
        tmax = max((s if e is None else e for _, s, e, _ in raw), default=0)
        rows = sorted(((t, s, tmax if e is None else e, st) for t, s, e, st in raw), key=lambda r: (r[0], r[1], -r[2]))
        tid, start, end = (np.array([r[k] for r in rows], np.int64) for k in range(3))
        is_pp = np.array([r[3] == "PushPop" for r in rows], bool)
        first = np.r_[True, tid[1:] != tid[:-1]] if len(rows) else np.zeros(0, bool)
        cands = [[p for p in range(i) if rows[p][0] == rows[i][0] and rows[p][2] >= rows[i][2]]
                 for i in range(len(rows))]
        pp_parent = np.array([max((p for p in c if is_pp[p]), default=-1) if is_pp[i] else -1
                              for i, c in enumerate(cands)], np.int64)
        parent, depth = containers.tightest(start, end, first, is_pp, pp_parent)
        for i, c in enumerate(cands):
            mine = [p for p in c if not is_pp[p]] + ([max(p for p in c if is_pp[p])] if is_pp[c].any() else [])
            want = min(mine, key=lambda p: (rows[p][2] - rows[p][1], -p), default=-1)
            assert parent[i] == want, (rows, i)
            assert depth[i] == (0 if want < 0 else depth[want] + 1)


@pytest.mark.parametrize("seed", range(6))
def test_nesting_matches_a_brute_force_rule(seed, nesting):
    """nest (pointer jumping, all ranges at once; the tightest container where start/end
    ranges cross push/pop ones) against the rule checked pair by pair: the one nsys's
    own projection trace follows (tests/data/nsys_registered_nvtx)."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    from tracekit.ingest.nsys.nvtx import Projection, nest

    rng = np.random.default_rng(seed)
    raw = _ranges(rng, threads=3, n=60)
    tmax = max(s if e is None else e for _, s, e, _ in raw)
    raw = [(tid, s, tmax if e is None else e, style) for tid, s, e, style in raw]  # open: to the end
    # range ids as _nsys_named gives them: (start, thread, -end), ties in any order
    order = sorted(range(len(raw)), key=lambda i: (raw[i][1], raw[i][0], -raw[i][2], rng.random()))
    rows = [(*raw[i], k) for k, i in enumerate(order)]
    con = duckdb.connect()
    con.execute("CREATE TEMP TABLE _nsys_rng (range_id BIGINT, global_tid BIGINT, start_ns BIGINT, end_ns BIGINT, "
                "style VARCHAR, label VARCHAR)")
    con.executemany("INSERT INTO _nsys_rng VALUES (?, ?, ?, ?, ?, ?)",
                    [(r[4], r[0], r[1], r[2], r[3], f"r{r[4]}") for r in rows])
    nested = nest(con)
    got = {r["range_id"]: r for r in nested.tree.to_pylist()}
    pp_up = dict(zip(nested.pp_child.tolist(), nested.pp_up.tolist(), strict=True))
    parent, pp_parent = _nest_brute(rows)
    assert any(p is not None for p in parent.values()) and any(rows[i][3] == "StartEnd" for i in parent)
    for i in range(len(rows)):
        assert got[i]["parent_id"] == parent[i], i
        assert pp_up.get(i) == (pp_parent.get(i) if rows[i][3] == "PushPop" else None), i
        chain, p = [f"r{i}"], parent[i]  # the path: labels from the root down
        while p is not None:
            chain, p = [f"r{p}", *chain], parent[p]
        assert got[i]["path"] == "/".join(chain), i
        depth, p = 0, parent[i]
        while p is not None:
            depth, p = depth + 1, parent[p]
        assert got[i]["depth"] == depth
        # the tightest push/pop container; not for a zero-length range where one range
        # ends and the next begins: it lies in both, and the push order decides
        if rows[i][3] == "PushPop" and pp_parent[i] is not None and rows[i][2] > rows[i][1]:
            cont = [j for j in range(len(rows)) if j != i and rows[j][0] == rows[i][0] and rows[j][3] == "PushPop"
                    and rows[j][1] <= rows[i][1] and rows[j][2] >= rows[i][2] and (rows[j][1:3] != rows[i][1:3] or j < i)]
            slack = min((rows[i][1] - rows[j][1]) + (rows[j][2] - rows[i][2]) for j in cont)
            p = pp_parent[i]
            assert (rows[i][1] - rows[p][1]) + (rows[p][2] - rows[i][2]) == slack

    # The innermost push/pop range open at each time a call may start (every boundary,
    # and between): open from its start up to, not including, its end.
    calls = [(tid, t) for tid in range(0, 5) for t in range(-1, tmax + 2)]
    calls.append((None, 5))  # a launch without its call's thread: no range
    inner = [None if r < 0 else r for r in nested.innermost(
        pa.chunked_array([pa.array([c[0] for c in calls], pa.int64())]),
        pa.chunked_array([pa.array([c[1] for c in calls], pa.int64())])).tolist()]
    pp = [r for r in rows if r[3] == "PushPop"]
    for (tid, t), got_range in zip(calls, inner, strict=True):
        want = max((r[4] for r in pp if tid is not None and r[0] == tid and r[1] <= t < r[2]), default=None)
        assert got_range == want, (tid, t)

    # GPU projection: each range takes its push/pop descendants' ops
    inner = [i for i in range(len(rows)) if rows[i][3] == "PushPop" and rng.random() < 0.5]
    s = {i: int(rng.integers(0, 1000)) for i in inner}
    e = {i: s[i] + int(rng.integers(0, 1000)) for i in inner}
    n = {i: int(rng.integers(1, 5)) for i in inner}
    proj = {int(r): {"proj_start_ns": a, "proj_end_ns": b, "gpu_ops": c}
            for r, a, b, c in zip(*(x.tolist() for x in nested.roll_up(Projection(
                *(np.array([d[i] for i in inner], dtype=np.int64) for d in ({i: i for i in inner}, s, e, n))))),
                                  strict=True)}
    for i in range(len(rows)):
        below = [i] if rows[i][3] == "PushPop" else []
        for j in range(len(rows)):
            p = pp_parent.get(j)
            while p is not None and p != i:
                p = pp_parent.get(p)
            if p == i:
                below.append(j)
        mine = [j for j in below if j in s]
        if not mine:
            assert i not in proj
            continue
        assert (proj[i]["proj_start_ns"], proj[i]["proj_end_ns"], proj[i]["gpu_ops"]) == (
            min(s[j] for j in mine), max(e[j] for j in mine), sum(n[j] for j in mine))


def test_range_totals_count_launching_calls_once():
    """Per innermost range: first start, last end, and distinct launching calls (a
    graph launch's many kernels count once), over several op tables; ops without a
    range take no part."""
    import numpy as np
    import pyarrow as pa

    from tracekit.ingest.nsys.nvtx import range_totals

    rng = np.random.default_rng(7)
    tables, calls, ranges = [], [], []
    for n in (500, 40, 0):
        call = rng.integers(-1, 120, n)  # -1: no launching call
        rid = np.where(call >= 0, call % 9 * 3, -1)  # a call's ops share its range
        start = rng.integers(0, 10**6, n)
        tables.append(pa.table({"_tk_api_range": pa.array(rid, mask=rid < 0), "start": start,
                                "end": start + rng.integers(0, 1000, n)}))
        calls.append(call)
        ranges.append(rid)
    ids, s, e, n = range_totals(ranges, tables, calls, 120)
    for i, r in enumerate(ids):
        rows = [(t.column("start")[j].as_py(), t.column("end")[j].as_py(), c[j])
                for t, c in zip(tables, calls, strict=True) for j in range(t.num_rows)
                if t.column("_tk_api_range")[j].as_py() == r]
        assert (s[i], e[i], n[i]) == (min(x[0] for x in rows), max(x[1] for x in rows), len({x[2] for x in rows}))
    assert set(ids.tolist()) == {int(c) % 9 * 3 for c in np.concatenate(calls) if c >= 0}


def test_deep_nesting_paths(nesting):
    """A chain of 1,000 nested ranges (twice): every depth and path, in one recursion."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    from tracekit.ingest.nsys.nvtx import prepare

    depth, chains = 1000, 2
    start = np.concatenate([c * 10**6 + np.arange(depth) for c in range(chains)])
    end = np.concatenate([c * 10**6 + 2 * depth - np.arange(depth) for c in range(chains)])
    n = len(start)
    con = duckdb.connect()
    events = pa.table({
        "start": start, "end": end, "eventType": np.full(n, 59), "text": [f"r{i % depth}" for i in range(n)],
        "globalTid": np.full(n, (7 << 24) | 5)})
    con.register("_nsys_strings", pa.table({"id": pa.array([], pa.int64()), "value": pa.array([], pa.string())}))
    con.register("_nsys_tree", prepare(con, {"nvtx": events}).tree)
    rows = con.execute("SELECT r.label, t.depth, t.path FROM _nsys_tree t JOIN _nsys_rng r USING (range_id)").fetchall()
    assert len(rows) == n
    for text, d, path in rows:
        assert d == int(text[1:])
        assert path == "/".join(f"r{i}" for i in range(d + 1))


def test_huge_page_advice_restored_after_overlapping_ingests():
    """NumPy's huge-page advice is off while any ingest runs and back as it was after the
    last one, also when two ingests overlap (enter A, enter B, exit A, exit B)."""
    np_core = pytest.importorskip("numpy._core.multiarray")
    from tracekit.ingest.nsys.arrays import small_pages

    def advice():
        now = np_core._set_madvise_hugepage(False)
        np_core._set_madvise_hugepage(now)
        return now

    before = advice()
    a, b = small_pages(), small_pages()
    a.__enter__()
    b.__enter__()
    assert advice() is False
    a.__exit__(None, None, None)
    assert advice() is False  # B still runs
    b.__exit__(None, None, None)
    assert advice() == before


def test_two_fresh_stores_get_the_same_name_ids(tmp_path, plain_export):
    """Name ids are given in name order: the same export makes the same store."""
    got = []
    for i in range(2):
        tk = tracekit.open(tmp_path / f"s{i}.duckdb")
        tk.ingest(plain_export)
        got.append((tk.sql("SELECT * FROM _strings ORDER BY string_id").to_dicts(),
                    tk.sql("SELECT name_id, count(*) AS n FROM _kernels GROUP BY 1 ORDER BY 1").to_dicts()))
        tk.close()
    assert got[0] == got[1] and got[0][0]
    values = [r["value"] for r in got[0][0]]
    assert values == sorted(values)


VIEW_COLUMNS = {
    "kernels": "run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT, device_id BIGINT, context_id BIGINT, "
               "green_context_id BIGINT, stream_id BIGINT, correlation_id BIGINT, global_pid BIGINT, pid INTEGER, graph_node_id BIGINT, "
               "name VARCHAR, short_name VARCHAR, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, "
               "block_y INTEGER, block_z INTEGER, registers_per_thread INTEGER, static_smem_bytes INTEGER, "
               "dynamic_smem_bytes INTEGER, launch_global_tid BIGINT, launch_tid INTEGER, api_start_ns BIGINT, "
               "api_end_ns BIGINT, api_name VARCHAR, nvtx_range_id BIGINT, stream_gap_ns BIGINT, "
               "device_gap_ns BIGINT, name_id BIGINT",
    "api_calls": "run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT, global_tid BIGINT, global_pid BIGINT, "
                 "pid INTEGER, tid INTEGER, correlation_id BIGINT, name VARCHAR, raw_name VARCHAR, "
                 "return_value BIGINT, nvtx_range_id BIGINT, name_id BIGINT, callchain_id BIGINT, python_stack_id BIGINT",
    "gpu_ops": "run_id INTEGER, op_kind VARCHAR, name VARCHAR, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT, "
               "device_id BIGINT, context_id BIGINT, stream_id BIGINT, correlation_id BIGINT, global_pid BIGINT, "
               "stream_gap_ns BIGINT, device_gap_ns BIGINT",
}


def test_views_keep_their_columns_and_derive_them_from_the_export(nsys_db):
    """The views' columns (names and types) stay what they were when the derived ones
    (durations, pid/tid) were stored; their values agree with the export's raw rows."""
    for view, spec in VIEW_COLUMNS.items():
        got = ", ".join(f"{r[0]} {r[1]}" for r in nsys_db.con.execute(f"DESCRIBE SELECT * FROM {view}").fetchall())
        assert got == spec, view
    with materialized(NSYS_EXPORTS["multithread"]) as path, sqlite3.connect(path) as sq:
        want = {
            "api_calls": sq.execute("SELECT correlationId, \"end\" - start, globalTid & -16777216, "
                                    "(globalTid >> 24) & 16777215, globalTid & 16777215 "
                                    "FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY 1").fetchall(),
            "kernels": sq.execute("SELECT k.correlationId, k.\"end\" - k.start, (k.globalPid >> 24) & 16777215, "
                                  "r.globalTid & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                  "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
                                  "AND r.globalTid & -16777216 = k.globalPid ORDER BY 1").fetchall(),
        }
    run = nsys_db.con.execute("SELECT run_id FROM runs WHERE name = 'multithread'").fetchall()[0][0]
    got = {
        "api_calls": nsys_db.con.execute("SELECT correlation_id, dur_ns, global_pid, pid, tid FROM api_calls "
                                         "WHERE run_id = ? ORDER BY 1", [run]).fetchall(),
        "kernels": nsys_db.con.execute("SELECT correlation_id, dur_ns, pid, launch_tid FROM kernels "
                                       "WHERE run_id = ? ORDER BY 1", [run]).fetchall(),
    }
    assert got == want and len(want["kernels"]) > 100


def test_graph_launches_traced_whole(nsys_db):
    """--cuda-graph-trace=graph records each graph launch as one GPU op: graph_execs holds
    every one with its launching cudaGraphLaunch and NVTX range; with =node the graphs'
    kernels are in kernels instead, and graph_execs is empty."""
    with materialized(NSYS_EXPORTS["graphs_graph"]) as path, sqlite3.connect(path) as sq:
        want = sq.execute('SELECT g.start, g."end", g.graphId, r.globalTid & 16777215 '
                          "FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                          "ON r.correlationId = g.correlationId ORDER BY 1").fetchall()
    got = nsys_db.sql("""
        SELECT g.start_ns, g.end_ns, g.graph_id, g.launch_tid, g.api_name, r.name AS range
        FROM graph_execs g JOIN runs USING (run_id)
        LEFT JOIN nvtx_ranges r ON r.run_id = g.run_id AND r.range_id = g.nvtx_range_id
        WHERE runs.name = 'graphs_graph' ORDER BY 1""").to_dicts()
    assert [(g["start_ns"], g["end_ns"], g["graph_id"], g["launch_tid"]) for g in got] == want
    assert len(want) == 7 and {g["api_name"] for g in got} == {"cudaGraphLaunch_v10000"}
    # four replays inside replay.outer/replay.inner on the main thread, three on the other thread
    assert sorted(g["range"] for g in got) == [":replay.inner"] * 4 + [":thread.replay"] * 3
    ops = nsys_db.sql("SELECT o.op_kind, o.name, count(*) AS n FROM gpu_ops o JOIN runs USING (run_id) "
                      "WHERE runs.name = 'graphs_graph' AND o.op_kind = 'graph' GROUP BY ALL ORDER BY 2").rows()
    assert ops == [("graph", "[CUDA graph 1]", 4), ("graph", "[CUDA graph 4]", 3)]
    node = nsys_db.sql("SELECT (SELECT count(*) FROM graph_execs JOIN runs USING (run_id) WHERE runs.name = 'graphs_node') AS g, "
                       "(SELECT count(*) FROM kernels JOIN runs USING (run_id) WHERE runs.name = 'graphs_node' "
                       "AND graph_node_id IS NOT NULL) AS k").rows()[0]
    assert node[0] == 0 and node[1] > 0


def test_exports_without_enum_tables_get_cupti_labels(tmp_path):
    """Older exports have no ENUM_* tables: copy kinds, memory kinds and sync types are
    then CUPTI's ids with nsys's labels, so memcpy-time still matches nsys stats. The
    built-in labels do not shadow a later export's own tables."""
    src = tmp_path / "e.sqlite"
    src.write_bytes(lzma.open(NSYS_EXPORTS["hstu_mixed"]).read())
    con = sqlite3.connect(src)
    for t in ("ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ENUM_CUPTI_SYNC_TYPE"):
        con.execute(f"DROP TABLE {t}")
    con.execute("UPDATE META_DATA_EXPORT SET value = value || 'x' WHERE rowid = 1")  # other content, other run
    con.commit()
    con.close()
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(src, name="no_enums")
        tk.ingest(NSYS_EXPORTS["hstu_mixed"], name="with_enums")
        cols = "operation, src_kind, dst_kind, count(*) AS n, sum(bytes) AS b"
        old, new = (tk.sql(f"SELECT {cols} FROM memcpy JOIN runs USING (run_id) WHERE runs.name = '{r}' "
                           "GROUP BY ALL ORDER BY ALL").rows() for r in ("no_enums", "with_enums"))
        assert old == new and len(new) >= 3 and all(r[0].startswith("[CUDA memcpy ") for r in new)
        for table, col in (("memset", "mem_kind"), ("syncs", "sync_type")):
            got = [tk.sql(f"SELECT {col}, count(*) FROM {table} JOIN runs USING (run_id) WHERE runs.name = '{r}' "
                          "GROUP BY ALL ORDER BY ALL").rows() for r in ("no_enums", "with_enums")]
            assert got[0] == got[1] and got[1] and all(v[0] for v in got[1])
        with open(DATA / "nsys_hstu_mixed" / "stats" / "cuda_gpu_mem_time_sum.csv", newline="") as fh:
            golden = {r["Operation"]: int(r["Count"]) for r in csv.DictReader(fh)}
        assert {r["operation"]: r["count"] for r in tk.query("memcpy-time", run="no_enums").to_dicts()} == golden


@pytest.mark.parametrize("size", [50, 10**9])
def test_distinct_keys_by_flags_or_by_sorting(size):
    """distinct (the interning of NVTX paths): a flag table for small key ranges,
    np.unique for large ones; both give np.unique's answer."""
    import numpy as np

    from tracekit.ingest.nsys.nvtx import distinct

    key = np.random.default_rng(size).integers(0, min(size, 50), 1000) * (size // 50)
    uniq, index = distinct(key, size)
    want, inverse = np.unique(key, return_inverse=True)
    assert (uniq == want).all() and (index == inverse.reshape(-1)).all()


def test_gpu_utilization_without_process_or_context_columns(tmp_path):
    """Op tables without contextId (another nsys version's schema): the idle gaps still
    cover every op, read as one context per process, and give the same utilization."""
    src = tmp_path / "e.sqlite"
    src.write_bytes(lzma.open(NSYS_EXPORTS["hstu_mixed"]).read())
    con = sqlite3.connect(src)
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        con.execute(f'ALTER TABLE "{t}" DROP COLUMN contextId')
    con.commit()
    con.close()
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["hstu_mixed"], name="full")
        tk.ingest(src, name="no_context")
        cols = "device_id, pid, stream_id, ops, span_ns, busy_ns, gaps, gap_total_ns, max_gap_ns"
        full, cut = (tk.query("gpu-utilization", run=r, limit=0).select(cols.split(", ")).rows()
                     for r in ("full", "no_context"))
        assert cut == full and len(full) > 2


def test_repeated_pairs_are_all_but_the_first():
    """nvtx.repeated marks each (kernel, range name) pair met before: a kernel inside two
    start/end ranges of one name on its thread counts once among that name's kernels
    (nsys: count(DISTINCT kernel)), whatever the order the pairs come in."""
    import numpy as np

    from tracekit.ingest.nsys.nvtx import repeated

    pos = np.array([3, 1, 3, 3, 2, 1])
    key = np.array([7, 7, 8, 7, 7, 7])
    got = repeated(pos, key)
    assert got.tolist() == [False, False, False, True, False, True]
    assert not repeated(np.zeros(0, np.int64), np.zeros(0, np.int64)).any()


def _older_export(src, dst, sql: list[str]):
    """A real export made to look like another nsys version's: ``sql`` run on a copy."""
    dst.write_bytes(lzma.open(src).read())
    con = sqlite3.connect(dst)
    con.execute("UPDATE META_DATA_EXPORT SET value = value || 'x' WHERE rowid = 1")  # other content, other run
    for statement in sql:
        con.execute(statement)
    con.commit()
    con.close()
    return dst


def test_exports_before_nsys_2025_map_gpus_by_their_cuda_device(tmp_path):
    """nsys before 2025 writes no TARGET_INFO_CUDA_DEVICE (2024.5 and 2022.2 exports of A100
    nodes; the 2022.2 one names its META_DATA_EXPORT EXPORT_META_DATA): TARGET_INFO_GPU's cuDevice says which CUDA device each GPU is, and its id need
    not be that (a 4-GPU node's export had GPU id 0 as CUDA device 3). Rank 1 of the 2-GPU
    job ran on CUDA device 1: with the GPU ids swapped and the CUDA-device table gone, its
    kernels still land on the same GPU (bus location, UUID) as in the export itself; an
    export that says neither takes the GPU id."""
    src = NSYS_EXPORTS["ranks_2gpu_rank1"]
    swapped = ["DROP TABLE TARGET_INFO_CUDA_DEVICE", "UPDATE TARGET_INFO_GPU SET id = 1 - id",
               "ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA"]  # (its name before nsys 2023)
    older = _older_export(src, tmp_path / "older.sqlite", swapped)
    bare = _older_export(src, tmp_path / "bare.sqlite", [*swapped, "ALTER TABLE TARGET_INFO_GPU DROP COLUMN cuDevice"])
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for name, path in (("now", src), ("older", older), ("bare", bare)):
            tk.ingest(path, name=name)
        used = {name: tk.sql("SELECT DISTINCT g.device_id, g.bus_location, g.uuid FROM kernels k "
                             "JOIN gpus g USING (run_id, device_id) JOIN runs r USING (run_id) "
                             f"WHERE r.name = '{name}'").rows() for name in ("now", "older", "bare")}
        assert len(used["now"]) == 1 and used["now"][0][0] == 1
        assert used["older"] == used["now"]
        assert [r[0] for r in used["bare"]] == [1] and used["bare"] != used["now"]  # (the other GPU's bus)
        assert tk.query("gpu-utilization", run="older").to_dicts() == tk.query("gpu-utilization", run="now").to_dicts()
        versions = tk.sql("SELECT name, tool_version FROM runs").rows()
        assert len({v for _, v in versions}) == 1 and versions[0][1].startswith("2025."), versions


def test_untraced_events_are_told_from_traced_ones_that_never_happened(tmp_path):
    """nsys writes no NVTX_EVENTS table where no range happened, traced or not: its capture
    settings (META_DATA_CAPTURE's CAPTURE_EVENT_TYPE) tell the two apart. Traced with none
    (a 2024.5 export of a program without NVTX): an empty answer. Not traced, or an export
    too old to say, without the table: an error naming the option; the one too old to say
    does not claim the capture did not trace them (nsys before 2023.3; a re-export says)."""
    src = NSYS_EXPORTS["hstu_mixed"]
    quiet = _older_export(src, tmp_path / "quiet.sqlite", ["DROP TABLE NVTX_EVENTS"])
    untraced = _older_export(src, tmp_path / "untraced.sqlite", [
        "DROP TABLE NVTX_EVENTS", "DELETE FROM META_DATA_CAPTURE WHERE value = 'NvtxEvents'"])
    unsaid = _older_export(src, tmp_path / "unsaid.sqlite", ["DROP TABLE NVTX_EVENTS", "DROP TABLE META_DATA_CAPTURE"])
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for path in (quiet, untraced, unsaid):
            tk.ingest(path, name=path.stem)
        for q in ("nvtx-summary", "nvtx-ranges", "nvtx-gpu-projection", "nvtx-kernels", "kernels-by-nvtx"):
            got = tk.query(q, run="quiet", limit=0)
            assert got.is_empty() or got["path"].to_list() == ["(no range)"], q
            with pytest.raises(tracekit.TracekitError, match=rf"^{q}: run \d+ \(untraced\) was captured without "
                                                             "NVTX tracing; capture with nsys -t nvtx"):
                tk.query(q, run="untraced")
            with pytest.raises(tracekit.TracekitError) as err:
                tk.query(q, run="unsaid")
            assert re.fullmatch(rf"{q}: run \d+ \(unsaid\) has no NVTX events, and its export \(nsys before 2023.3\) "
                                r"does not say whether they were traced; capture with nsys -t nvtx \(tracekit capture "
                                r"does\), or re-export its .nsys-rep with nsys 2023.3 or later \(nsys export -t "
                                r"sqlite\) to tell", str(err.value)), str(err.value)
        assert not tk.query("osrt-summary", run="unsaid").is_empty()  # (its OSRT_API table says it was traced)
        # the report and the timeline say the same
        from tracekit import charts, report

        page = report.write_report(tk, tmp_path / "unsaid.html", run="unsaid").read_text()
        assert "no NVTX events, and its export (nsys before 2023.3) does not say whether they were traced" in page
        assert "captured without NVTX" not in page
        subtitle = " ".join(charts.chart(tk, "timeline", run="unsaid").to_dict()["title"]["subtitle"])
        assert "no NVTX events, and its export (nsys before 2023.3) does not say whether they were traced" in subtitle
        assert "captured without NVTX tracing" in " ".join(
            charts.chart(tk, "timeline", run="untraced").to_dict()["title"]["subtitle"])


def test_unified_memory_faults_and_migrations(tmp_path):
    """The Unified Memory page faults (nsys --cuda-um-cpu-page-faults / --cuda-um-gpu-page-faults)
    land one store row per export row with their names resolved, and the migrations keep
    their address and cause (other copies: NULL). Traced with no fault (nsys then writes no
    table: its capture settings say it traced them), the twins answer without faults; not
    traced, or an export too old to say, they are errors naming the option."""
    src = NSYS_EXPORTS["memops"]
    with materialized(src) as path, sqlite3.connect(path) as sq:
        cpu = sq.execute("SELECT c.start, c.address, i.value, m.value, c.originalFaultPc, c.sourceLine "
                         "FROM CUDA_UM_CPU_PAGE_FAULT_EVENTS c JOIN StringIds i ON i.id = c.CpuInstruction "
                         "JOIN StringIds m ON m.id = c.module ORDER BY 1, 2, 5").fetchall()
        gpu = sq.execute('SELECT g.start, g."end", g.deviceId, g.address, g.numberOfPageFaults, a.label '
                         "FROM CUDA_UM_GPU_PAGE_FAULT_EVENTS g JOIN ENUM_CUDA_UNIF_MEM_ACCESS_TYPE a "
                         "ON a.id = g.faultAccessType ORDER BY 1, 4").fetchall()
        moved = sq.execute("SELECT c.start, c.copyKind, c.virtualAddress, e.label FROM CUPTI_ACTIVITY_KIND_MEMCPY c "
                           "JOIN ENUM_CUDA_UNIF_MEM_MIGRATION e ON e.id = c.migrationCause "
                           "WHERE c.copyKind IN (11, 12, 13) ORDER BY 1, 3").fetchall()
    quiet = _older_export(src, tmp_path / "quiet.sqlite", [
        "DROP TABLE CUDA_UM_CPU_PAGE_FAULT_EVENTS", "DROP TABLE CUDA_UM_GPU_PAGE_FAULT_EVENTS"])
    untraced = _older_export(src, tmp_path / "untraced.sqlite", [
        "DROP TABLE CUDA_UM_CPU_PAGE_FAULT_EVENTS", "DROP TABLE CUDA_UM_GPU_PAGE_FAULT_EVENTS",
        "UPDATE META_DATA_CAPTURE SET value = 'false' WHERE name LIKE '%COLLECT_UVM%'"])
    unsaid = _older_export(src, tmp_path / "unsaid.sqlite", [
        "DROP TABLE CUDA_UM_CPU_PAGE_FAULT_EVENTS", "DROP TABLE CUDA_UM_GPU_PAGE_FAULT_EVENTS",
        "DROP TABLE META_DATA_CAPTURE"])
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(src, name="um")
        for path in (quiet, untraced, unsaid):
            tk.ingest(path, name=path.stem)
        run = "(SELECT run_id FROM runs WHERE name = 'um')"
        assert len(cpu) == 150 and tk.sql(f"SELECT ts_ns, address, instruction, module, pc, source_line "
                                          f"FROM um_cpu_faults WHERE run_id = {run} ORDER BY 1, 2, 5").rows() == cpu
        assert len(gpu) == 81 and tk.sql(f"SELECT start_ns, end_ns, device_id, address, faults, access_type "
                                         f"FROM um_gpu_faults WHERE run_id = {run} ORDER BY 1, 4").rows() == gpu
        assert len(moved) == 2229 and tk.sql(f"SELECT start_ns, copy_kind, virtual_address, migration_cause "
                                             f"FROM memcpy WHERE run_id = {run} AND virtual_address IS NOT NULL "
                                             "ORDER BY 1, 3").rows() == moved
        assert tk.sql(f"SELECT count(*) FROM memcpy WHERE run_id = {run} AND copy_kind NOT IN (11, 12, 13) "
                      "AND virtual_address IS NULL AND migration_cause IS NULL").item() == 91
        assert tk.query("um-cpu-faults", run="quiet").is_empty()
        totals = tk.query("um-totals", run="quiet").row(0, named=True)
        assert (totals["cpu_faults"], totals["gpu_faults"], totals["htod_migrations"]) == (0, 0, 1941)
        per_address = tk.query("um-summary", run="quiet", limit=0)  # (one row per migrated address, no fault)
        addresses = tk.sql(f"SELECT count(DISTINCT virtual_address) FROM memcpy WHERE run_id = {run} "
                           "AND copy_kind IN (11, 12)").item()
        assert per_address.height == addresses == per_address["cpu_faults"].null_count() == per_address["gpu_faults"].null_count()
        for q in ("um-summary", "um-totals", "um-cpu-faults"):
            with pytest.raises(tracekit.TracekitError, match=rf"^{q}: run \d+ \(untraced\) was captured without "
                                                             "Unified Memory CPU page fault tracing; capture with nsys "
                                                             "profile --cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true "
                                                             r"\(tracekit capture --um-faults -- CMD does\)$"):
                tk.query(q, run="untraced")
            with pytest.raises(tracekit.TracekitError, match=rf"^{q}: run \d+ \(unsaid\) has no Unified Memory CPU "
                                                             r"page fault events, and its export \(nsys before 2023.3\)"):
                tk.query(q, run="unsaid")


#: the nsys queries about CUDA's events (@traced for CUDA)
CUDA_QUERIES = ("top-kernels", "api-summary", "gpu-trace", "gpu-summary", "kernel-exec", "launch-overhead",
                "memcpy-time", "memcpy-size", "idle-gaps", "gpu-utilization", "nvtx-gpu-projection",
                "kernels-by-nvtx", "nvtx-kernels")


def test_cuda_untraced_is_told_from_traced_with_no_cuda_call(tmp_path):
    """CUDA as NVTX above: a capture that traced CUDA in a program that made no CUDA call has no
    CUPTI table, but its CAPTURE_EVENT_TYPE lists Cuda: the CUDA queries answer, with nothing.
    Not listed (nsys -t nvtx,osrt), or an export too old to say, without a CUPTI table: an
    error naming nsys -t cuda (that says which of the two). Too old to say with CUPTI tables (any of them; here no kernel
    table): CUDA was traced."""
    src = NSYS_EXPORTS["cpu_only"]
    quiet = _older_export(src, tmp_path / "quiet.sqlite", [
        "INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('CAPTURE_EVENT_TYPE', 'Cuda')"])
    unsaid = _older_export(src, tmp_path / "unsaid.sqlite", ["DROP TABLE META_DATA_CAPTURE"])
    copies = _older_export(NSYS_EXPORTS["hstu_mixed"], tmp_path / "copies.sqlite", [
        "DROP TABLE META_DATA_CAPTURE", "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL"])
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for path in (quiet, unsaid, copies):
            tk.ingest(path, name=path.stem)
        tk.ingest(src, name="cpu_only")
        for q in CUDA_QUERIES:
            got = tk.query(q, run="quiet", limit=0)
            assert got.is_empty() or q in ("nvtx-gpu-projection", "kernels-by-nvtx"), q
            with pytest.raises(tracekit.TracekitError, match=rf"^{q}: run \d+ \(cpu_only\) was captured without "
                                                             "CUDA tracing; capture with nsys -t cuda"):
                tk.query(q, run="cpu_only")
            with pytest.raises(tracekit.TracekitError, match=rf"^{q}: run \d+ \(unsaid\) has no CUDA events, and its "
                                                             r"export \(nsys before 2023.3\) does not say whether they "
                                                             "were traced; capture with nsys -t cuda"):
                tk.query(q, run="unsaid")
            tk.query(q, run="copies", limit=0)
        assert tk.query("top-kernels", run="copies").is_empty() and not tk.query("memcpy-time", run="copies").is_empty()
        for name in ("quiet", "unsaid", "cpu_only"):  # (the NVTX and OS runtime tables say those were traced)
            assert not tk.query("nvtx-summary", run=name).is_empty() and not tk.query("osrt-summary", run=name).is_empty()


def test_cli_cuda_question_of_a_run_without_cuda(tmp_path, capsys):
    """The CLI: a capture without CUDA ingests; a CUDA question of it is one line, exit 2, the
    store unchanged; the NVTX and OS runtime ones answer."""
    from conftest import store_state

    from tracekit.cli import main as cli_main

    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(NSYS_EXPORTS["cpu_only"]), "--name", "host"]) == 0
    capsys.readouterr()
    before = store_state(db)
    for q in ("top-kernels", "api-summary", "gpu-trace", "nvtx-gpu-projection", "kernels-by-nvtx"):
        assert cli_main(["--db", str(db), "query", q]) == 2, q
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"tracekit: error: {q}: run 1 (host) was captured without CUDA tracing; "
                       "capture with nsys -t cuda (tracekit capture does)"], err
    assert store_state(db) == before
    for q in ("nvtx-summary", "nvtx-ranges", "osrt-summary", "runs", "run-info"):
        assert cli_main(["--db", str(db), "query", q, "-f", "csv"]) == 0, q
        assert capsys.readouterr().out.count("\n") > 1, q


def test_runs_ingested_before_cuda_was_recorded_whole_keep_their_answers(tmp_path):
    """A store's runs ingested before a capture without CUDA could be: their meta.traced lists
    the CUDA tables their export had (always one; not memset, graph_execs or syncs where none
    happened), or nothing where it predates the list; every query answers as before."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(NSYS_EXPORTS["hstu_mixed"], name="now")
        want = {q: tk.query(q, run="now", limit=0) for q in CUDA_QUERIES}
        for meta in ('{"traced": ["api_calls", "gpus", "kernels", "memcpy", "nvtx_ranges", "osrt_calls"]}', "{}"):
            tk.con.execute("UPDATE runs SET meta = ? WHERE name = 'now'", [meta])
            for q in CUDA_QUERIES:
                assert tk.query(q, run="now", limit=0).equals(want[q]), (meta, q)


def test_exports_of_nsys_2021_and_of_windows(tmp_path):
    """Shapes seen in public exports of other nsys versions, made from a real export:
    the GPU table of nsys 2020-21 (vmId, deviceId, name, busLocation, isDiscrete: the
    details lived elsewhere), a Windows laptop's display adapters CUDA cannot use (0 SMs)
    listed beside its GPU, and export metadata in the system's code page, not UTF-8
    (a user name with 0xE1). Each ingests, with the same GPUs as the export itself."""
    src = NSYS_EXPORTS["ranks_2gpu_rank1"]
    old_gpus = ["CREATE TABLE g AS SELECT vmId, cuDevice AS deviceId, name, busLocation, isDiscrete FROM TARGET_INFO_GPU",
                "DROP TABLE TARGET_INFO_GPU", "ALTER TABLE g RENAME TO TARGET_INFO_GPU",
                "DROP TABLE TARGET_INFO_CUDA_DEVICE"]
    adapters = ["INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, isDiscrete, smCount, cuDevice) "
                "SELECT vmId, 10 + i, n, '', 1, 0, 0 FROM (SELECT vmId FROM TARGET_INFO_GPU LIMIT 1), "
                "(SELECT 0 AS i, 'Intel(R) HD Graphics 630' AS n UNION ALL SELECT 1, 'Microsoft Basic Render Driver')",
                "UPDATE META_DATA_EXPORT SET value = CAST(x'416c6578616e6465722047656ae1' AS TEXT) "
                "WHERE name = 'EXPORT_USER'"]
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(src, name="now")
        tk.ingest(_older_export(src, tmp_path / "old.sqlite", old_gpus), name="old")
        tk.ingest(_older_export(src, tmp_path / "win.sqlite", adapters), name="win")
        gpus = {name: tk.sql("SELECT g.device_id, g.name, g.bus_location FROM gpus g JOIN runs r USING (run_id) "
                             f"WHERE r.name = '{name}' ORDER BY 1").rows() for name in ("now", "old", "win")}
        assert len(gpus["now"]) == 2 and gpus["old"] == gpus["now"] == gpus["win"]
        assert len(set(tk.sql("SELECT gpu FROM runs").rows())) == 1
        assert tk.query("top-kernels", run="old").to_dicts() == tk.query("top-kernels", run="now").to_dicts()


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"path": None}, InputError, r"ingest: path None: expected str or PathLike, not NoneType"),
    ({"path": 5}, InputError, r"ingest: path 5: expected str or PathLike, not int"),
    ({"name": 5}, tracekit.ParamError, r"run name 5: expected str, not int"),
    ({"name": ["a"]}, tracekit.ParamError, r"run name \['a'\]: expected str, not list"),
    ({"params": "bs=8"}, tracekit.ParamError, r"ingest: params 'bs=8': expected dict or None, not str"),
    ({"params": [("bs", 8)]}, tracekit.ParamError, r"ingest: params \[\('bs', 8\)\]: expected dict or None, not list"),
])
def test_ingest_arguments_of_another_type_are_errors(small_store, kwargs, error, message):
    from conftest import store_state

    before = store_state(small_store)
    with tracekit.open(small_store) as tk:
        with pytest.raises(error, match=f"^{message}$"):
            tk.ingest(**{"path": NSYS_EXPORTS["cpu_only"], **kwargs})
        with pytest.raises(tracekit.ParamError, match="^run name 5: expected str, not int$"):
            tk.rename_run("nsys_run", 5)
    assert store_state(small_store) == before


@pytest.mark.parametrize("write", ["ingest", "ingest held", "rename", "remove"])
def test_a_read_only_store_refuses_writes(small_store, write):
    """Asked to write, a store opened read-only says so, naming what was asked, before
    it begins (not DuckDB's error, nor a TypeError from the ingest's memory setting)."""
    from conftest import store_state

    if write == "ingest held":
        with tracekit.open(small_store) as tk:
            tk.ingest(NSYS_EXPORTS["cpu_only"], name="cpu")
    before = store_state(small_store)
    with tracekit.open(small_store, read_only=True) as tk:
        call, what = {"ingest": (lambda: tk.ingest(NSYS_EXPORTS["streams"]), "cannot ingest .*streams.*"),
                      "ingest held": (lambda: tk.ingest(NSYS_EXPORTS["cpu_only"], name="again"), "cannot ingest .*"),
                      "rename": (lambda: tk.rename_run("nsys_run", "x"), r"cannot rename run 1 \(nsys_run\)"),
                      "remove": (lambda: tk.remove_run(2), r"cannot remove run 2 \(ncu_run\)")}[write]
        with pytest.raises(tracekit.TracekitError, match=f"^{re.escape(str(small_store))}: {what}: the store is "
                           r"open read-only; open it with tracekit.open\(db, read_only=False\) to write it$"):
            call()
    assert store_state(small_store) == before
