"""NVIDIA's expert rules (`nsys analyze`) as named queries, against nsys's own answers.

The goldens are `nsys analyze -r RULE:rows=-1 -f csv` of Nsight Systems 2025.3.1 on the
committed exports (tests/data/*/stats/analyze_RULE.csv; an empty file: the rule found
nothing), and the two rules with thresholds once more with other ones (gpu_gaps:gap=1,
gpu_time_util:threshold=90:chunks=100). Every row must be there: integers exactly, sizes
to the MB nsys prints with 3 decimals, the in-use share to its 0.1.
"""

from __future__ import annotations

import csv
import io
import lzma
import sqlite3
from collections import Counter

import pytest
from conftest import CPU_ONLY, DATA, NSYS_EXPORTS, NSYS_SCENARIOS

import tracekit
from tracekit.errors import NoneRecorded, QueryError

COPY = {"Duration (ns)": "dur_ns", "Start (ns)": "start_ns", "Src Kind": "src_kind", "Dst Kind": "dst_kind",
        "Bytes (MB)": "bytes", "PID": "pid", "Device ID": "device_id", "Context ID": "context_id",
        "Green Context ID": "green_context_id", "Stream ID": "stream_id", "API Name": "api_name"}
#: nsys analyze rule -> (the query, nsys column -> ours, the query's parameters)
RULES = {
    "cuda_api_sync": ("sync-apis", {"Duration (ns)": "dur_ns", "Start (ns)": "start_ns", "PID": "pid", "TID": "tid",
                                    "API Name": "api_name"}, {}),
    "cuda_memcpy_async": ("async-pageable-copies", COPY, {}),
    "cuda_memcpy_sync": ("sync-copies", COPY, {}),
    "cuda_memset_sync": ("sync-memsets", {**{k: v for k, v in COPY.items() if "Kind" not in k},
                                          "Memory Kind": "mem_kind"}, {}),
    "gpu_gaps": ("gpu-gaps", {"Duration (ns)": "gap_ns", "Start (ns)": "start_ns", "PID": "pid",
                              "Device ID": "device_id", "Context ID": "context_id"}, {}),
    # (not its Context ID: nsys takes it from an arbitrary op of the span, SQLite's bare column
    # of a GROUP BY; in memops a Unified Memory migration's 0)
    "gpu_time_util": ("low-gpu-utilization", {"In-Use (%)": "in_use_pct", "Duration (ns)": "dur_ns",
                                              "Start (ns)": "start_ns", "PID": "pid", "Device ID": "device_id"}, {}),
}
#: golden file -> (rule, parameters): the rules asked with other thresholds
OPTIONS = {"analyze_gpu_gaps_gap1": ("gpu_gaps", {"gap_ms": 1}),
           "analyze_gpu_time_util_threshold90_chunks100": ("gpu_time_util", {"threshold_pct": 90, "chunks": 100})}
WITH_CUDA = [s for s in NSYS_SCENARIOS if s not in CPU_ONLY]
#: captures that traced CUDA and recorded none of it (the window missed the GPU work): nsys
#: analyze skips every rule there ("Does the application use CUDA runtime APIs?")
CUDA_MISSED = ["window_missed", "jobs_missed_rank3"]
ANALYZED = [s for s in WITH_CUDA if s not in CUDA_MISSED]
#: real exports with rows nsys 2025.3.1 did not write there and its rules treat apart
#: (programs/plant_rules.py, PLANT.md): CUDA profiling overheads in their GPU gaps, copies
#: within one device; nsys_streams (one process, one GPU) and nsys_jax (one process, two GPUs)
PLANTED = {"planted": DATA / "nsys_rules_planted" / "export.sqlite.xz",
           "planted_2gpu": DATA / "nsys_rules_planted_2gpu" / "export.sqlite.xz"}
#: the captures of several processes (each numbers its API calls' correlation ids from 1)
MULTI_PROCESS = ("multiproc", "nccl", "nccl_overlap")


def _golden(scen: str, name: str) -> list[dict]:
    stats = (PLANTED[scen] if scen in PLANTED else NSYS_EXPORTS[scen]).parent / "stats"
    path = stats / f"{name}.csv"
    text = path.read_text() if path.exists() else lzma.decompress((stats / f"{name}.csv.xz").read_bytes()).decode()
    return list(csv.DictReader(io.StringIO(text)))


def _stripped(api: str) -> str:
    """nsys analyze prints the recorded API name; tracekit strips _vNNNN as nsys stats does."""
    return api[:-6] if api[-6:-4] == "_v" else api


def _cell(gcol: str, value):
    """One of our values as nsys prints it."""
    if value is None:
        return ""
    if gcol == "Bytes (MB)":
        return f"{value / 1e6:.3f}"
    if gcol == "In-Use (%)":
        return f"{value:.1f}"
    return str(value)


def _theirs(gcol: str, text: str) -> str:
    if gcol == "API Name":
        return _stripped(text)
    if gcol == "Context ID" and text == "0":  # (a Unified Memory migration's: in no context, NULL in the store)
        return ""
    if gcol == "In-Use (%)":
        return f"{float(text):.1f}"
    return text


#: the rows of a memory rule, with the API call joined as nsys joins it (CORR: by
#: correlation id alone) or as tracekit does (its own process's call)
_MEMORY_SQL = """
SELECT m.dur_ns, m.start_ns, {kinds}, m.bytes, m.pid, m.device_id, m.context_id, m.green_context_id,
       m.stream_id, a.name AS api_name
FROM {table} m JOIN api_calls a ON a.run_id = m.run_id AND a.correlation_id = m.correlation_id {same_pid}
WHERE m.run_id = (SELECT run_id FROM runs WHERE name = $scen) AND {where}
"""
_MEMORY = {
    "cuda_memcpy_async": ("memcpy", "m.src_kind, m.dst_kind",
                          "a.name ILIKE 'cudaMemcpy%Async%' AND 'Pageable' IN (m.src_kind, m.dst_kind)"),
    "cuda_memcpy_sync": ("memcpy", "m.src_kind, m.dst_kind",
                         "a.name ILIKE 'cudaMemcpy%' AND a.name NOT ILIKE '%Async%' "
                         "AND NOT (m.bytes <= 64000 AND m.copy_kind = 1)"),
    "cuda_memset_sync": ("memset", "m.mem_kind",
                         "a.name ILIKE 'cudaMemset%' AND a.name NOT ILIKE '%async%' "
                         "AND m.mem_kind IN ('Pinned', 'Managed')"),
}


def _cross_process(nsys_db, scen: str, rule: str, mapping: dict) -> Counter:
    """The rows nsys adds to a memory rule by joining each op's API call on the
    correlation id alone: in a capture of several processes, the calls of that id in the
    other processes too (so an op is listed again, or under another process's call)."""
    table, kinds, where = _MEMORY[rule]
    rows = {}
    for same_pid in ("AND a.pid = m.pid", ""):
        found = nsys_db.sql(_MEMORY_SQL.format(table=table, kinds=kinds, where=where, same_pid=same_pid),
                            params={"scen": scen}).to_dicts()
        rows[same_pid] = Counter(tuple(_cell(g, r[o]) for g, o in mapping.items()) for r in found)
    return rows[""] - rows["AND a.pid = m.pid"]


def _compare(nsys_db, scen: str, rule: str, golden: list[dict], params: dict) -> None:
    query, mapping, _ = RULES[rule]
    ours = nsys_db.query(query, run=scen, limit=0, **params).to_dicts()
    theirs = Counter(tuple(_theirs(g, row[g]) for g in mapping) for row in golden)
    mine = Counter(tuple(_cell(g, row[o]) for g, o in mapping.items()) for row in ours)
    if rule in _MEMORY:  # (ours lists each op once, under its own call)
        extra = _cross_process(nsys_db, scen, rule, mapping)
        assert not extra - theirs, f"{query} on {scen}: nsys's join explains no row {list(extra - theirs)[:2]}"
        assert not extra or scen in MULTI_PROCESS, f"{query} on {scen}: rows of other processes' calls"
        theirs -= extra
    assert mine == theirs, (f"{query} on {scen}: {sum(mine.values())} rows, nsys {len(golden)}; "
                            f"only ours: {list((mine - theirs).elements())[:3]}, "
                            f"only nsys's: {list((theirs - mine).elements())[:3]}")


@pytest.mark.parametrize(("scen", "rule"), [(s, r) for r in RULES for s in ANALYZED])
def test_rule_matches_nsys_analyze(nsys_db, scen, rule):
    _compare(nsys_db, scen, rule, _golden(scen, f"analyze_{rule}"), {})


@pytest.mark.parametrize(("scen", "golden"), [(s, g) for g in OPTIONS for s in ANALYZED])
def test_rule_thresholds_match_nsys_analyze(nsys_db, scen, golden):
    rule, params = OPTIONS[golden]
    _compare(nsys_db, scen, rule, _golden(scen, golden), params)


def test_the_goldens_hold_cases_of_every_rule():
    """Each rule fires on some fixture (so the comparisons above compare rows, not two
    empty answers), and not on every one."""
    for rule in RULES:
        fired = [s for s in ANALYZED if _golden(s, f"analyze_{rule}")]
        assert 0 < len(fired) < len(ANALYZED), rule


@pytest.mark.parametrize("scen", CUDA_MISSED)
def test_the_rules_of_a_capture_without_cuda_events_say_why(nsys_db, scen):
    """nsys analyze skips every rule of an export whose capture recorded no CUDA event (no
    analyze_*.csv); each of ours answers no case and says the capture's window missed the GPU
    work, and so does the summary, whose "Nothing found." would read as a fact of the program."""
    assert not list((NSYS_EXPORTS[scen].parent / "stats").glob("analyze_*"))
    for query in [q for q, _, _ in RULES.values()] + ["nsys-rules"]:
        with pytest.warns(NoneRecorded, match=rf"^run \d+ \({scen}\) holds no CUDA event at all"):
            cases = nsys_db.query(query, run=scen, limit=0)
        assert cases.is_empty() if query != "nsys-rules" else set(cases["cases"]) == {0}


def test_largest_first_and_the_limit(nsys_db):
    """Listed as nsys lists them, longest first; the limit keeps the longest."""
    full = nsys_db.query("sync-apis", run="diff_base_a", limit=0)
    assert len(full) == len(_golden("diff_base_a", "analyze_cuda_api_sync")) > 50
    assert full["dur_ns"].to_list() == sorted(full["dur_ns"].to_list(), reverse=True)
    assert nsys_db.query("sync-apis", run="diff_base_a").equals(full.head(50))
    util = nsys_db.query("low-gpu-utilization", run="pace_after", limit=0)
    assert util["in_use_pct"].to_list() == sorted(util["in_use_pct"].to_list())


def test_the_nvtx_range_of_each_case(nsys_db):
    """A sync call's range is the innermost push/pop range open on its thread at its
    start; a copy's, the one open at the start of the call that issued it."""
    ranges = nsys_db.query("nvtx-ranges", run="memops", limit=0).filter(style="PushPop").to_dicts()
    calls = nsys_db.query("sync-apis", run="memops", limit=0).to_dicts()
    api = {(c["start_ns"], c["tid"]): c for c in nsys_db.sql(
        "SELECT start_ns, tid FROM api_calls WHERE run_id = (SELECT run_id FROM runs WHERE name = 'memops')"
    ).to_dicts()}
    assert calls and any(c["nvtx_path"] for c in calls) and not all(c["nvtx_path"] for c in calls)
    for c in calls:
        assert api[(c["start_ns"], c["tid"])]
        around = [r for r in ranges if r["tid"] == c["tid"] and r["start_ns"] <= c["start_ns"] < r["end_ns"]]
        assert c["nvtx_path"] == (max(around, key=lambda r: r["depth"])["path"] if around else None)
    launches = {(m["start_ns"], m["stream_id"]): m for m in nsys_db.sql(
        "SELECT start_ns, stream_id, api_start_ns, api_end_ns, launch_tid FROM memcpy "
        "WHERE run_id = (SELECT run_id FROM runs WHERE name = 'memops')").to_dicts()}
    copies = nsys_db.query("sync-copies", run="memops", limit=0).to_dicts()
    assert len({c["nvtx_path"] for c in copies}) > 1
    for c in copies:
        m = launches[(c["start_ns"], c["stream_id"])]
        around = [r for r in ranges if r["tid"] == m["launch_tid"] and r["start_ns"] <= m["api_start_ns"] < r["end_ns"]]
        assert c["nvtx_path"] == (max(around, key=lambda r: r["depth"])["path"] if around else None)


@pytest.mark.parametrize("scen", WITH_CUDA)
def test_the_summary_counts_each_rules_cases(nsys_db, scen):
    summary = {r["rule"]: r for r in nsys_db.query("nsys-rules", run=scen).to_dicts()}
    assert set(summary) == set(RULES)
    for rule, (query, _, _) in RULES.items():
        cases = nsys_db.query(query, run=scen, limit=0)
        durations = cases["gap_ns" if rule == "gpu_gaps" else "dur_ns"]
        row = summary[rule]
        assert (row["query"], row["cases"]) == (query, len(cases))
        assert row["total_ns"] == durations.sum()
        assert row["longest_ns"] == (durations.max() if len(cases) else None)
        assert (row["advice"] == "Nothing found.") == (not len(cases))
    order = list(summary.values())
    assert order == sorted(order, key=lambda r: (r["cases"] == 0, -r["total_ns"]))


def test_the_summary_passes_its_thresholds_on(nsys_db):
    rows = {r["rule"]: r for r in nsys_db.query("nsys-rules", run="streams", gap_ms=1, threshold_pct=90,
                                                chunks=100).to_dicts()}
    assert rows["gpu_gaps"]["cases"] == len(_golden("streams", "analyze_gpu_gaps_gap1"))
    assert rows["gpu_time_util"]["cases"] == len(_golden("streams", "analyze_gpu_time_util_threshold90_chunks100"))
    assert rows["gpu_gaps"]["finding"] == "GPU idle for longer than 1 ms"


@pytest.mark.parametrize("query", ["nsys-rules", *(q for q, _, _ in RULES.values())])
def test_a_capture_without_cuda_is_an_error(nsys_db, query):
    """nsys skips its rules on an export without CUDA data; asked of one, a rule's query
    says the capture did not trace CUDA."""
    with pytest.raises(QueryError, match=rf"^{query}: run \d+ \(cpu_only\) was captured without CUDA tracing"):
        nsys_db.query(query, run="cpu_only")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tk = tracekit.open(tmp_path_factory.mktemp("planted") / "t.duckdb")
    for name, export in PLANTED.items():
        tk.ingest(export, name=name)
    tk.ingest(NSYS_EXPORTS["streams"], name="streams")
    tk.ingest(NSYS_EXPORTS["jax"], name="jax")
    yield tk
    tk.close()


@pytest.mark.parametrize(("scen", "golden"), [(s, g) for s in PLANTED for g in (*(f"analyze_{r}" for r in RULES), *OPTIONS)])
def test_planted_overheads_and_copies_match_nsys_analyze(planted, scen, golden):
    """nsys counts its CUDA profiling overheads (three names) inside a process's span on a
    device as that device's busy time, on each of the process's devices, and leaves out
    copies within one device: so does tracekit, as nsys analyze says on the planted exports."""
    rule, params = OPTIONS.get(golden, (golden.removeprefix("analyze_"), {}))
    _compare(planted, scen, rule, _golden(scen, golden), params)


def test_the_plant_changes_the_answers(planted):
    """What was planted shows: the overheads split one gap and close another (the gap
    under another name, of another process or outside the span stays); three copies
    fewer."""
    def gaps(run):
        return planted.query("gpu-gaps", run=run, gap_ms=1, limit=0)["gap_ns"].to_list()

    assert gaps("streams") == [7934906, 1127478, 1079702]
    assert gaps("planted") == [7934906 - 2_000_000, 1079702]
    assert len(planted.query("sync-copies", run="streams", limit=0)) - 3 == len(
        planted.query("sync-copies", run="planted", limit=0))
    assert not planted.query("low-gpu-utilization", run="streams", limit=0).equals(
        planted.query("low-gpu-utilization", run="planted", limit=0))
    # on two GPUs, an overhead planted in a gap of device 0 falls in device 1's gaps too
    jax, planted_2gpu = (planted.query("gpu-gaps", run=r, gap_ms=1, limit=0) for r in ("jax", "planted_2gpu"))
    for device in (0, 1):
        assert (jax.filter(device_id=device)["gap_ns"].to_list()
                != planted_2gpu.filter(device_id=device)["gap_ns"].to_list()), device


def test_gaps_of_seconds(nsys_db):
    """A threshold of seconds (gap_ms past 2,147: its ns past 32 bits) lists what is longer."""
    gaps = nsys_db.query("gpu-gaps", run="nccl", limit=0)["gap_ns"].to_list()
    assert [g for g in gaps if g > 6_000_000_000] == nsys_db.query("gpu-gaps", run="nccl", gap_ms=6000)["gap_ns"].to_list()
    assert len([g for g in gaps if g > 6_000_000_000]) == 2
    assert nsys_db.query("gpu-gaps", run="nccl", gap_ms=2**31 - 1).is_empty()


def test_an_odd_profiler_overhead_table_is_left_out(tmp_path, capsys):
    """PROFILER_OVERHEAD serves the rules alone: an export without it ingests, and one whose
    table lacks a column ingests with a warning that it was left out."""
    from tracekit.cli import main

    for what, sql in (("none", "DROP TABLE PROFILER_OVERHEAD"),
                      ("odd", 'ALTER TABLE PROFILER_OVERHEAD DROP COLUMN "end"')):
        export = tmp_path / f"{what}.sqlite"
        with lzma.open(PLANTED["planted"]) as src:
            export.write_bytes(src.read())
        con = sqlite3.connect(export)
        con.execute(sql)
        con.commit()
        con.close()
        db = tmp_path / f"{what}.duckdb"
        assert main(["--db", str(db), "ingest", str(export), "--name", "p"]) == 0
        err = capsys.readouterr().err
        assert (f"{export}: table PROFILER_OVERHEAD lacks column end" in err) == (what == "odd"), err
        with tracekit.open(db, read_only=True) as tk:
            assert tk.sql("SELECT count(*) AS n FROM profiler_overhead")["n"][0] == 0
            # without the planted overheads: the gaps of nsys_streams itself
            assert tk.query("gpu-gaps", run="p", gap_ms=1)["gap_ns"].to_list() == [7934906, 1127478, 1079702]
