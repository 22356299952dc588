"""Every nsys-stats twin query against NVIDIA's own CSV for every real fixture.

The goldens are `nsys stats -r REPORT -f csv` outputs of Nsight Systems 2025.3.1 on the
same exports (tests/data/nsys_*/stats/). Integers must match exactly; averages,
medians and standard deviations to the precision nsys prints (0.1 ns; memory sizes in
MB to 0.001).
"""

from __future__ import annotations

import csv
import lzma
import math
import re
import warnings

import polars as pl
import pytest
from conftest import CPU_ONLY, NSYS_EXPORTS, NSYS_SCENARIOS

from tracekit.errors import NoneRecorded, QueryError
from tracekit.registry import get_registry, untraced

NS = {"Total Time (ns)": "total_ns", "Avg (ns)": "avg_ns", "Med (ns)": "med_ns",
      "Min (ns)": "min_ns", "Max (ns)": "max_ns", "StdDev (ns)": "stddev_ns", "Time (%)": "time_pct"}

REPORTS = {
    "cuda_gpu_kern_sum": ("top-kernels", {**NS, "Instances": "instances", "Name": "name"}),
    "cuda_api_sum": ("api-summary", {**NS, "Num Calls": "calls", "Name": "name"}),
    "cuda_gpu_mem_time_sum": ("memcpy-time", {**NS, "Count": "count", "Operation": "operation"}),
    "cuda_gpu_mem_size_sum": ("memcpy-size", {
        "Total (MB)": "total_bytes", "Count": "count", "Avg (MB)": "avg_bytes", "Med (MB)": "med_bytes",
        "Min (MB)": "min_bytes", "Max (MB)": "max_bytes", "StdDev (MB)": "stddev_bytes",
        "Operation": "operation"}),
    "nvtx_sum": ("nvtx-summary", {**NS, "Instances": "instances", "Style": "style", "Range": "range"}),
    # the ranges of one style: nvtx-summary -p style=...
    "nvtx_pushpop_sum": ("nvtx-summary", {**NS, "Instances": "instances", "Range": "range"}),
    "nvtx_startend_sum": ("nvtx-summary", {**NS, "Instances": "instances", "Range": "range"}),
    "nvtx_gpu_proj_sum": ("nvtx-gpu-projection", {
        "Range": "range", "Style": "style", "Total Proj Time (ns)": "proj_total_ns",
        "Total Range Time (ns)": "range_total_ns", "Range Instances": "instances",
        "Proj Avg (ns)": "proj_avg_ns", "Proj Med (ns)": "proj_med_ns", "Proj Min (ns)": "proj_min_ns",
        "Proj Max (ns)": "proj_max_ns", "Proj StdDev (ns)": "proj_stddev_ns",
        "Total GPU Ops": "gpu_ops", "Avg GPU Ops": "avg_gpu_ops", "Avg Range Lvl": "avg_depth",
        "Avg Num Child": "avg_children"}),
    "cuda_kern_exec_sum": ("kernel-exec", {
        "PID": "pid", "TID": "tid", "DevId": "device_id", "Count": "count", "QCount": "queue_count",
        **{f"{p}{s} (ns)": f"{w}_{s.lower()}_ns" for p, w in (("T", "total"), ("A", "api"), ("Q", "queue"), ("K", "kernel"))
           for s in ("Avg", "Med", "Min", "Max", "StdDev")},
        "API Name": "api_name", "Kernel Name": "kernel_name"}),
    "osrt_sum": ("osrt-summary", {**NS, "Num Calls": "calls", "Name": "name"}),
    "nvtx_kern_sum": ("nvtx-kernels", {
        "NVTX Range": "range", "Style": "style", "PID": "pid", "TID": "tid", "NVTX Inst": "range_instances",
        "Kern Inst": "kernel_instances", **{k: v for k, v in NS.items() if k != "Time (%)"}, "Kernel Name": "name"}),
    "cuda_gpu_sum": ("gpu-summary", {**NS, "Instances": "instances", "Category": "category", "Operation": "name"}),
}
#: scenario -> why nsys printed no osrt_sum (no golden file): an error or an empty answer
NO_OSRT = {"odd_nvtx_cuda_only": "captured with -t cuda only: nsys says the export has no OS runtime data",
           "capture_range": "traced, but no OS runtime call inside the capture range: nsys prints no rows",
           "nccl_overlap": "captured with -t cuda,nvtx: nsys says the export has no OS runtime data",
           **dict.fromkeys(("ranks_nccl_rank0", "ranks_nccl_rank1"), "captured with -t cuda,nvtx: no OS runtime data")}
#: the reports about CUDA's events: nsys skips each of them on an export without CUDA data
CUDA_REPORTS = ("cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum",
                "nvtx_gpu_proj_sum", "cuda_kern_exec_sum", "nvtx_kern_sum", "cuda_gpu_sum")
#: scenario -> the reports of events its capture did not trace: nsys printed nothing (an
#: empty CSV) and the twin is an error naming the nsys option, not an empty answer
NOT_TRACED = {"odd_nvtx_cuda_only": {"osrt_sum": "OS runtime", "nvtx_sum": "NVTX", "nvtx_gpu_proj_sum": "NVTX",
                                     "nvtx_kern_sum": "NVTX", "nvtx_pushpop_sum": "NVTX", "nvtx_startend_sum": "NVTX"},
              **{s: dict.fromkeys(CUDA_REPORTS, "CUDA") for s in CPU_ONLY}}
#: the scenarios captured without CUDA tracing (nsys -t nvtx,osrt)
NO_CUDA = [s for s, reports in NOT_TRACED.items() if "CUDA" in reports.values()]
#: the reports about kernels: nsys skips each of them on an export without kernel data
KERNEL_REPORTS = ("cuda_gpu_kern_sum", "cuda_gpu_kern_gb_sum", "cuda_kern_exec_sum", "nvtx_kern_sum")
#: scenario -> the reports of events its capture traced and recorded none of: nsys printed
#: nothing (no golden file: no row) and the twin answers no row, with a warning where the run
#: holds none of the events the query reads (window_missed: CUDA traced, the GPU work before
#: the window; copies_only: CUDA API calls, copies and memsets, no kernel; no start/end NVTX range)
NONE_RECORDED = {**dict.fromkeys(("window_missed", "jobs_missed_rank3"),
                                 (*CUDA_REPORTS, "cuda_gpu_kern_gb_sum", "nvtx_startend_sum")),
                 "copies_only": (*KERNEL_REPORTS, "nvtx_startend_sum")}
MB = 1e6


def _golden(scen: str, report: str) -> list[dict]:
    """nsys's CSV of ``report`` on ``scen`` (REPORT.csv, or the trace reports' REPORT.csv.xz); no
    row where nsys printed nothing as the capture's window held none of its events."""
    if report in NONE_RECORDED.get(scen, ()):
        assert not (NSYS_EXPORTS[scen].parent / "stats" / f"{report}.csv").exists()
        return []
    path = NSYS_EXPORTS[scen].parent / "stats" / f"{report}.csv"
    with open(path, newline="") if path.exists() else lzma.open(f"{path}.xz", "rt", newline="") as fh:
        return list(csv.DictReader(fh))


def _num(text: str):
    if text == "":
        return None
    return float(text)


def _close(ours, theirs: str, col: str, scale: float) -> bool:
    t = _num(theirs)
    if t is None:
        return ours is None
    if ours is None:
        return False
    if scale != 1.0:  # MB printed with 3 decimals
        return abs(ours / scale - t) <= 0.0005 + 1e-9
    if float(t).is_integer() and "." not in theirs:
        return ours == int(t)  # integers exact
    return abs(ours - t) <= 1e-6  # same digits as printed (0.1 ns)


@pytest.mark.parametrize(("scen", "report"), [(s, r) for r in sorted(REPORTS) for s in NSYS_SCENARIOS
                                              if not (r == "osrt_sum" and s in NO_OSRT)
                                              and r not in NOT_TRACED.get(s, {})])
def test_twin_matches_nsys_stats(nsys_db, scen, report):
    query, mapping = REPORTS[report]
    assert get_registry().get(report).name == query  # (asked by nsys's name: an alias, with its parameters)
    golden = _golden(scen, report)
    ours = nsys_db.query(report, run=scen, limit=0).to_dicts()
    assert len(ours) == len(golden), f"{query} on {scen}: {len(ours)} rows, nsys has {len(golden)}"
    text_cols = [g for g, o in mapping.items() if isinstance(golden[0][g] if golden else "", str)
                 and o in ("name", "operation", "range", "style", "api_name", "kernel_name", "category")]
    int_keys = [g for g in ("PID", "TID", "DevId") if g in mapping]
    # (a NULL key, such as the range of kernels launched outside every range, is nsys's empty field)
    key = lambda row, pick: tuple("" if (v := pick(row, g)) is None else v for g in text_cols + int_keys)  # noqa: E731
    # rows with equal keys (e.g. two API names that strip to one) are matched by total
    total_col = next(g for g in mapping if g.startswith(("Total", "Count")))
    theirs_by = {}
    for g in golden:
        theirs_by.setdefault(key(g, lambda r, c: r[c] if c in text_cols or r[c] == "" else int(r[c])), []).append(g)
    scale = MB if report == "cuda_gpu_mem_size_sum" else 1.0
    for row in ours:
        k = key(row, lambda r, c: r[mapping[c]])
        cands = theirs_by.get(k)
        assert cands, f"{query} on {scen}: row {k} not in nsys output"
        match = next((g for g in cands if _close(row[mapping[total_col]], g[total_col], total_col, scale)), None)
        assert match is not None, f"{query} on {scen}: {k} total {row[mapping[total_col]]} vs {[g[total_col] for g in cands]}"
        cands.remove(match)
        for gcol, ocol in mapping.items():
            if gcol in text_cols:
                continue
            col_scale = scale if "(MB)" in gcol else 1.0
            assert _close(row[ocol], match[gcol], gcol, col_scale), (
                f"{query} on {scen}, {k}: {ocol}={row[ocol]} but nsys {gcol}={match[gcol]}")


def test_osrt_summary_without_os_runtime_calls(nsys_db):
    """No golden where nsys printed nothing: an export without OS runtime tracing is an
    error naming the nsys option; one traced with no call in its range, an empty answer."""
    assert {s for s in NSYS_SCENARIOS if not (NSYS_EXPORTS[s].parent / "stats" / "osrt_sum.csv").exists()} == set(NO_OSRT)
    with pytest.raises(QueryError, match="without OS runtime tracing.*nsys -t osrt"):
        nsys_db.query("osrt-summary", run="odd_nvtx_cuda_only")
    assert nsys_db.query("osrt-summary", run="capture_range", limit=0).is_empty()


@pytest.mark.parametrize(("scen", "report"), [(s, r) for s, reports in NOT_TRACED.items() for r in reports])
def test_twin_of_untraced_events_is_an_error(nsys_db, scen, report):
    """nsys prints nothing for events its capture did not trace (`-t cuda` alone: no NVTX,
    no OS runtime); the twin says so and names the option."""
    golden = NSYS_EXPORTS[scen].parent / "stats" / f"{report}.csv"
    assert not golden.exists() or golden.stat().st_size == 0
    query = REPORTS[report][0]
    option = {"NVTX": "nvtx", "OS runtime": "osrt", "CUDA": "cuda"}[NOT_TRACED[scen][report]]
    with pytest.raises(QueryError, match=rf"^{query}: run \d+ \({scen}\) was captured without "
                                         rf"{NOT_TRACED[scen][report]} tracing; capture with nsys -t {option}"):
        nsys_db.query(query, run=scen)


@pytest.mark.parametrize(("scen", "report"), [(s, r) for s, reports in NONE_RECORDED.items() for r in reports
                                              if r in REPORTS])
def test_twin_of_events_none_of_which_happened_says_why(nsys_db, scen, report):
    """nsys prints nothing for events traced and not recorded, and the twin answers no row
    (test_twin_matches_nsys_stats); where the run holds no CUDA event at all, it says the
    capture's window missed the GPU work, and where it holds CUDA API calls but no kernel, a
    question about kernels (launches and their kernels: kernel-exec; kernels in NVTX ranges:
    nvtx-kernels) says it holds no kernel."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert nsys_db.query(report, run=scen, limit=0).is_empty()
    said = [str(w.message) for w in seen if issubclass(w.category, NoneRecorded)]
    if scen == "copies_only" and report in KERNEL_REPORTS:
        assert len(said) == 1 and re.fullmatch(rf"run \d+ \({scen}\) holds no kernels: its capture traced CUDA "
                                               "and recorded none", said[0]), said
    elif report in CUDA_REPORTS:
        assert len(said) == 1, said
        assert re.match(rf"^run \d+ \({scen}\) holds no CUDA event at all \(no API call, kernel or copy\), "
                        r"though its capture traced CUDA: the capture's window \(nsys --delay, --duration, "
                        r"--capture-range\) held none", said[0]), said[0]
    else:  # (the run holds NVTX ranges: none of them start/end is an answer, not a capture's mistake)
        assert said == []


#: nsys's Unified Memory reports -> (twin, its parameters, nsys's column -> ours); um_sum_rows=-1 is
#: um_sum with every address (nsys's default rows=10)
UM_REPORTS = {
    **{report: ("um-summary", {"limit": limit}, {
        "Virtual Address": "address", "HtoD Migration size (MB)": "htod_bytes", "DtoH Migration size (MB)": "dtoh_bytes",
        "CPU Page Faults": "cpu_faults", " GPU Page Faults": "gpu_faults",
        "Migration Throughput (MB/s)": "throughput_bytes_per_s"}) for report, limit in (("um_sum", 10), ("um_sum_rows=-1", 0))},
    "um_total_sum": ("um-totals", {}, {
        "Total HtoD Migration Size (MB)": "htod_bytes", "Total DtoH Migration Size (MB)": "dtoh_bytes",
        "Total CPU Page Faults": "cpu_faults", "Total GPU PageFaults": "gpu_faults",
        "Minimum Virtual Address": "min_address", "Maximum Virtual Address": "max_address"}),
    "um_cpu_page_faults_sum": ("um-cpu-faults", {"limit": 0}, {
        "CPU Page Faults": "faults", "CPU Instruction Address": "instruction", "Source File": "source_file",
        "Source Line": "source_line"}),
}
#: the scenarios captured with --cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true (nsys's UM reports)
UM_SCENARIOS = [s for s in NSYS_SCENARIOS if (NSYS_EXPORTS[s].parent / "stats" / "um_sum.csv").exists()]


@pytest.mark.parametrize(("scen", "report"), [(s, r) for s in UM_SCENARIOS for r in sorted(UM_REPORTS)
                                              if (NSYS_EXPORTS[s].parent / "stats" / f"{r}.csv").exists()])
def test_unified_memory_twins_match_nsys_stats(nsys_db, scen, report):
    """The Unified Memory twins give nsys's rows in nsys's order: addresses and names as
    printed, sizes and throughputs in MB (1e6 bytes) to its 3 decimals, counts exactly.
    Addresses of equal throughput are in address order here, in no set order in nsys."""
    query, params, mapping = UM_REPORTS[report]
    golden = _golden(scen, report)
    ours = nsys_db.query(query, run=scen, **params).to_dicts()
    assert len(ours) == len(golden) > 0
    if query == "um-summary":
        tput = "Migration Throughput (MB/s)"
        assert [round(r["throughput_bytes_per_s"] / MB, 3) if r["throughput_bytes_per_s"] is not None else None
                for r in ours] == [_num(g[tput]) for g in golden]
        if params["limit"] == 0:  # (the whole table: ties in nsys's order matched by address)
            by_address = {r["address"]: r for r in ours}
            ours = [by_address[g["Virtual Address"]] for g in golden]
    for row, want in zip(ours, golden, strict=True):
        for gcol, ocol in mapping.items():
            if "Address" in gcol or gcol == "Source File":
                assert (row[ocol] or "") == want[gcol], (report, gcol, row, want)
            else:
                assert _close(row[ocol], want[gcol], gcol, MB if "(MB" in gcol else 1.0), (report, gcol, row, want)


@pytest.mark.parametrize("scen", [s for s in NSYS_SCENARIOS if s not in UM_SCENARIOS])
def test_unified_memory_twins_of_runs_without_page_fault_tracing(nsys_db, scen):
    """nsys refuses its Unified Memory reports on an export without page-fault tracing (of
    the CPU's; um_gpu_only traced the GPU's alone); the twins are an error naming the
    options that trace them, not an empty answer."""
    if scen in NO_CUDA:
        with pytest.raises(QueryError, match="without CUDA tracing"):
            nsys_db.query("um-summary", run=scen)
        return
    for query in ("um-summary", "um-totals", "um-cpu-faults"):
        with pytest.raises(QueryError, match=rf"^{query}: run \d+ \({scen}\) was captured without Unified Memory "
                                             "CPU page fault tracing; capture with nsys profile "
                                             "--cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true "
                                             r"\(tracekit capture --um-faults -- CMD does\)$"):
            nsys_db.query(query, run=scen)
    gpu = nsys_db.sql("SELECT count(*) FROM um_gpu_faults JOIN runs USING (run_id) WHERE name = $s", params={"s": scen})
    assert gpu.item() > 0 if scen == "um_gpu_only" else gpu.item() == 0


@pytest.mark.parametrize("scen", [s for s in NSYS_SCENARIOS if s not in NO_CUDA])
def test_twin_order_matches(nsys_db, scen):
    """The ranking is nsys's: top-kernels by total time, then instances, then name."""
    golden = [g["Name"] for g in _golden(scen, "cuda_gpu_kern_sum")]
    ours = nsys_db.query("top-kernels", run=scen, limit=0)["name"].to_list()
    assert ours == golden


def test_limit_and_all_rows(nsys_db):
    assert len(nsys_db.query("top-kernels", run="hstu_mixed", limit=3)) == 3
    full = nsys_db.query("top-kernels", run="hstu_mixed", limit=0)
    assert len(full) == len(_golden("hstu_mixed", "cuda_gpu_kern_sum"))
    assert math.isclose(full["time_pct"].sum(), 100.0, abs_tol=0.05 * len(full))


# `nsys stats -r cuda_gpu_trace` column -> gpu-trace column; sizes in MB, throughput in MB/s
TRACE = {"Start (ns)": "start_ns", "Duration (ns)": "dur_ns", "CorrId": "correlation_id",
         "GrdX": "grid_x", "GrdY": "grid_y", "GrdZ": "grid_z", "BlkX": "block_x", "BlkY": "block_y",
         "BlkZ": "block_z", "Reg/Trd": "registers_per_thread", "StcSMem (MB)": "static_smem_bytes",
         "DymSMem (MB)": "dynamic_smem_bytes", "Bytes (MB)": "bytes", "Throughput (MB/s)": "throughput_bytes_per_s",
         "SrcMemKd": "src_kind", "DstMemKd": "dst_kind", "Device": "device", "Ctx": "context_id",
         "GreenCtx": "green_context_id", "Strm": "stream_id", "Name": "name"}
TRACE_SCENARIOS = [s for s in NSYS_SCENARIOS if (NSYS_EXPORTS[s].parent / "stats" / "cuda_gpu_trace.csv.xz").exists()
                   and s not in NO_CUDA]


def _trace_cell(value) -> str:
    """A gpu-trace value of a column nsys prints as is ('' for NULL)."""
    return "" if value is None else str(value)


@pytest.mark.parametrize("scen", TRACE_SCENARIOS)
def test_gpu_trace_is_nsys_cuda_gpu_trace(nsys_db, scen):
    """Every GPU op of nsys's own trace report, with every column it prints, in start order."""
    golden = _golden(scen, "cuda_gpu_trace")
    df = nsys_db.query("gpu-trace", run=scen, limit=0)
    starts = df["start_ns"].to_list()
    assert starts == sorted(starts)
    ours = df.to_dicts()
    assert len(ours) == len(golden), f"gpu-trace on {scen}: {len(ours)} rows, nsys has {len(golden)}"
    # ops that start at the same ns may come in another order: compare sorted by start, id, name
    order = lambda row, start, corr, name: (int(row[start]), int(row[corr] or 0), row[name])  # noqa: E731
    golden.sort(key=lambda g: order(g, "Start (ns)", "CorrId", "Name"))
    ours.sort(key=lambda o: order(o, "start_ns", "correlation_id", "name"))
    for g, o in zip(golden, ours, strict=True):
        for gcol, ocol in TRACE.items():
            theirs, mine = g[gcol], o[ocol]
            if "(MB" in gcol:
                ok = _close(mine, theirs, gcol, MB)
            else:
                ok = _trace_cell(mine) == theirs
            assert ok, f"gpu-trace on {scen}, op at {g['Start (ns)']} ns: {ocol}={mine!r} but nsys {gcol}={theirs!r}"


def test_gpu_trace_filters(nsys_db):
    """name (case-insensitive substring) and the window (ops overlapping [from_ns, to_ns))."""
    full = nsys_db.query("gpu-trace", run="hstu_mixed", limit=0)
    copies = nsys_db.query("gputrace", run="hstu_mixed", limit=0, name="MEMCPY")
    assert len(copies) == sum("memcpy" in n for n in full["name"].to_list()) > 0
    assert set(copies["op_kind"].to_list()) == {"memcpy"}
    mid = full.row(len(full) // 2, named=True)
    window = nsys_db.query("gpu-trace", run="hstu_mixed", limit=0, from_ns=mid["start_ns"], to_ns=mid["end_ns"])
    expect = [r for r in full.to_dicts() if r["end_ns"] > mid["start_ns"] and r["start_ns"] < mid["end_ns"]]
    assert window.to_dicts() == expect and mid in expect
    for start, end in ((mid["end_ns"], mid["start_ns"]), (mid["start_ns"], mid["start_ns"])):  # an empty window
        with pytest.raises(QueryError, match=rf"^gpu-trace: from_ns={start} is not before to_ns={end}: the window is empty"):
            nsys_db.query("gpu-trace", run="hstu_mixed", from_ns=start, to_ns=end)


def test_gpu_trace_nvtx_path_is_the_launch_range(nsys_db):
    """Each op's NVTX path is the path of the innermost push/pop range around its launch
    call, looked up for the page asked for as for every row."""
    want = dict(nsys_db.sql("""
        SELECT o.correlation_id, r.path FROM gpu_ops o
        JOIN runs USING (run_id)
        LEFT JOIN (SELECT run_id, correlation_id, nvtx_range_id FROM kernels UNION ALL
                   SELECT run_id, correlation_id, nvtx_range_id FROM memcpy UNION ALL
                   SELECT run_id, correlation_id, nvtx_range_id FROM memset) a USING (run_id, correlation_id)
        LEFT JOIN nvtx_ranges r ON r.run_id = o.run_id AND r.range_id = a.nvtx_range_id
        WHERE runs.name = 'hstu_mixed' AND o.op_kind <> 'graph'
    """).rows())
    full = nsys_db.query("gpu-trace", run="hstu_mixed", limit=0)
    assert dict(zip(full["correlation_id"], full["nvtx_path"], strict=True)) == want
    assert sum(p is not None for p in want.values()) > len(want) // 2
    page = nsys_db.query("gpu-trace", run="hstu_mixed", limit=7, from_ns=full["start_ns"][len(full) // 2])
    assert page.to_dicts() == full.filter(full["end_ns"] > full["start_ns"][len(full) // 2]).head(7).to_dicts()


def test_nvtx_kernels_of_one_range(nsys_db):
    """range= keeps the rows of one range name, given as nsys names it or, in the default
    domain, by its text alone."""
    full = nsys_db.query("nvtx-kernels", run="hstu_mixed", limit=0)
    name = next(r for r in full["range"].to_list() if r and r.startswith(":"))
    want = full.filter(full["range"] == name).to_dicts()
    assert want and nsys_db.query("nvtx-kernels", run="hstu_mixed", limit=0, range=name).to_dicts() == want
    assert nsys_db.query("nvtx-kernels", run="hstu_mixed", limit=0, range=name[1:]).to_dicts() == want
    # a name the run has no range of is an error, not an empty table; one without kernels is empty
    with pytest.raises(QueryError, match=r"^nvtx-kernels: the run has no NVTX range named 'hstu\.nope' "):
        nsys_db.query("nvtx-kernels", run="hstu_mixed", range="hstu.nope")
    assert nsys_db.query("nvtx-kernels", run="odd_nvtx", range="no_gpu_work").is_empty()  # (a real range)



@pytest.mark.parametrize("scen", NSYS_SCENARIOS)
def test_every_chart_and_the_report_of_every_capture(nsys_db, scen, tmp_path):
    """Every chart an nsys run has, and its HTML report, build on every real capture: start/end
    ranges without a depth, ranges closed on another thread, graphs, several processes (the
    NVTX timeline's lane was NULL for a start/end range, and the report failed with it)."""
    import json

    from tracekit import charts
    from tracekit.registry import get_registry
    from tracekit.report import write_report

    run_id = nsys_db.sql(f"SELECT run_id FROM runs WHERE name = '{scen}'").item()
    for name, spec in sorted(charts.CHARTS.items()):
        if spec.query is None or get_registry().get(spec.query).source != "nsys" or "ncu" in get_registry().get(
                spec.query).params:  # (kernel-headroom: nsys_db holds no ncu run; test_kernel_headroom draws it)
            continue
        # (what the capture did not trace, as the store knows it: an option few captures use,
        # CPU sampling or Unified Memory's page faults, as well as NOT_TRACED's)
        missing = [what for what, _ in untraced(nsys_db, run_id, get_registry().get(spec.query).traced)]
        if missing:
            with pytest.raises(QueryError, match=f"captured without {missing[0]} tracing|has no {missing[0]} events"):
                charts.chart(nsys_db, name, run=scen)
            continue
        chart = charts.chart(nsys_db, name, run=scen)
        assert json.dumps(chart.to_dict()), name  # (Altair validates the spec)
    out = write_report(nsys_db, tmp_path / "r.html", run=scen)
    assert out.stat().st_size > 10_000


def test_the_later_captures_hold_what_they_were_taken_for(nsys_db):
    """What each capture added on 2026-11-29 was taken for is in it (a re-capture that lost it
    fails here, not silently in the goldens): the programs and options are in capture_fixtures.sh."""
    api = set(nsys_db.query("api-summary", run="streams", limit=0)["name"])
    # per-thread default streams: the _ptsz/_ptds entry points, of the runtime and the driver; nsys
    # strips only a 4-digit _vNNNN, so the 5-digit versions stay (cudaMemcpyBatchAsync_ptsz_v13000)
    assert {"cudaLaunchKernel_ptsz", "cudaMemcpy_ptds", "cuLaunchKernel_ptsz", "cuMemcpyDtoDAsync_v2_ptsz",
            "cudaLaunchKernelExC_ptsz_v11060", "cudaLaunchCooperativeKernel_ptsz",
            "cudaMemcpyBatchAsync_ptsz_v13000", "cudaMallocFromPoolAsync_ptsz_v11020"} <= api
    launches = nsys_db.query("kernel-exec", run="streams", limit=0)
    assert launches["tid"].n_unique() == 2 and launches["api_name"].n_unique() == 4
    # inductor: the capture starts at the NVTX range "profile" (compilation is outside it), and
    # Inductor's Triton kernels run there as nodes of CUDA graph replays
    ranges = dict(nsys_db.query("nvtx-summary", run="inductor", limit=0).select("range", "instances").iter_rows())
    assert ranges[":profile"] == 1 and ranges[":step"] == 8
    assert sum(n.startswith("triton_") for n in nsys_db.query("top-kernels", run="inductor", limit=0)["name"]) >= 4
    # nccl: one process per GPU in one export, NCCL's kernels and its own NVTX domain
    assert nsys_db.query("kernel-exec", run="nccl", limit=0).select("pid", "device_id").unique().height == 2
    assert any(n.startswith("ncclDevKernel_AllReduce") for n in nsys_db.query("top-kernels", run="nccl", limit=0)["name"])
    for run, domains in (("nccl", {"", "NCCL"}), ("jax", {"", "TSL", "NCCL"})):
        names = nsys_db.query("nvtx-summary", run=run, limit=0)["range"]
        assert {r.split(":")[0] for r in names} == domains, run
    # jax: one process drives both GPUs (XLA's command buffers: CUDA graphs traced node by node)
    exec_ = nsys_db.query("kernel-exec", run="jax", limit=0)
    assert exec_["pid"].n_unique() == 1 and set(exec_["device_id"]) == {0, 1}
    assert "cuGraphLaunch" in set(nsys_db.query("api-summary", run="jax", limit=0)["name"])
    # jax_whole: nsys's import failed part-way ("Cannot find string for an exterior index"): kernels
    # without a name (string id 0) print as [Unknown], in nsys's CSV and in the twin alike
    assert "[Unknown]" in set(nsys_db.query("top-kernels", run="jax_whole", limit=0)["name"])


def _raw_kernels(scen: str) -> dict[str, list[tuple[int, int]]]:
    """Each demangled name's launches (start, duration) in the raw export, start order."""
    import sqlite3
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "e.sqlite"
        plain.write_bytes(lzma.decompress(NSYS_EXPORTS[scen].read_bytes()))
        con = sqlite3.connect(plain)
        rows = con.execute("SELECT s.value, k.start, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                           "JOIN StringIds s ON s.id = k.demangledName ORDER BY k.start, k.end").fetchall()
        con.close()
    out: dict[str, list[tuple[int, int]]] = {}
    for name, start, dur in rows:
        out.setdefault(name, []).append((start, dur))
    return out


@pytest.mark.parametrize("scen", ["hstu_mixed", "many_kernels", "diff_regressed"])
def test_percentiles_and_the_warm_up_left_out(nsys_db, scen):
    """p95_ns/p99_ns of top-kernels are numpy's linear percentiles of each name's launch
    durations in the raw export; skip=N leaves out each name's first N launches (its other
    columns then are those of the rest); skip=0 is the twin above."""
    import numpy as np

    raw = _raw_kernels(scen)
    for skip in (0, 1, 3):
        got = {r["name"]: r for r in nsys_db.query("top-kernels", run=scen, limit=0, skip=skip).to_dicts()}
        want = {n: [d for _, d in launches[skip:]] for n, launches in raw.items() if len(launches) > skip}
        assert set(got) == set(want), (scen, skip)
        for name, durs in want.items():
            r = got[name]
            assert r["instances"] == len(durs) and r["total_ns"] == sum(durs) and r["max_ns"] == max(durs)
            for col, q in (("med_ns", 50), ("p95_ns", 95), ("p99_ns", 99)):
                assert r[col] == pytest.approx(float(np.percentile(durs, q)), abs=0.06), (scen, name, col)


def test_nvtx_percentiles_and_the_warm_up_left_out(nsys_db):
    """nvtx-summary's p95/p99 and skip over the store's ranges, by name and style in start
    order: the real HSTU capture's first request (836 ms: compilation) left out, its
    steady state is what the seeds' benchmarks report."""
    import numpy as np

    ranges = nsys_db.sql("SELECT name, style, range_id, dur_ns FROM nvtx_ranges WHERE run_id = "
                         "(SELECT run_id FROM runs WHERE name = 'hstu_mixed') ORDER BY range_id").to_dicts()
    by: dict[tuple, list[int]] = {}
    for r in ranges:
        by.setdefault((r["name"], r["style"]), []).append(r["dur_ns"])
    for skip in (0, 1, 2):
        got = {(r["range"], r["style"]): r for r in nsys_db.query("nvtx-summary", run="hstu_mixed", limit=0,
                                                                    skip=skip).to_dicts()}
        want = {k: v[skip:] for k, v in by.items() if len(v) > skip}
        assert set(got) == set(want)
        for k, durs in want.items():
            assert got[k]["instances"] == len(durs)
            for col, q in (("med_ns", 50), ("p95_ns", 95), ("p99_ns", 99)):
                assert got[k][col] == pytest.approx(float(np.percentile(durs, q)), abs=0.06)
    request = next(r for r in nsys_db.query("nvtx-summary", run="hstu_mixed", limit=0, skip=1).to_dicts()
                   if r["range"] == ":hstu.request")
    assert request["max_ns"] < 10_000_000 < by[(":hstu.request", "PushPop")][0]
    with pytest.raises(QueryError, match="skip must be >= 0"):
        nsys_db.query("nvtx-summary", run="hstu_mixed", skip=-1)
    for q in ("nvtx-summary", "top-kernels"):  # (past what DuckDB's top-N takes: said as the parameter's limit)
        with pytest.raises(QueryError, match="skip must be <= 999,999, got 1000000"):
            nsys_db.query(q, run="hstu_mixed", skip=1_000_000)


@pytest.mark.parametrize("scen", ["memops", "copies_pageable", "copies_pinned", "hstu_mixed"])
def test_memcpy_throughput_by_memory_kind(nsys_db, scen):
    """memcpy-throughput: each (operation, source memory, destination memory) row sums to
    NVIDIA's own per-operation counts, times and sizes (cuda_gpu_mem_time_sum /
    cuda_gpu_mem_size_sum), and its memory kinds, bytes and throughputs are those of the
    raw export's CUPTI records (the kinds by ENUM_CUDA_MEM_KIND)."""
    import sqlite3
    import tempfile
    from pathlib import Path

    import numpy as np

    got = nsys_db.query("memcpy-throughput", run=scen, limit=0).to_dicts()
    by_op: dict[str, list[dict]] = {}
    for r in got:
        by_op.setdefault(r["operation"], []).append(r)
    times, sizes = _golden(scen, "cuda_gpu_mem_time_sum"), _golden(scen, "cuda_gpu_mem_size_sum")
    assert set(by_op) == {g["Operation"] for g in times}
    for g in times:
        rows = by_op[g["Operation"]]
        assert sum(r["count"] for r in rows) == int(g["Count"])
        assert sum(r["total_ns"] for r in rows) == int(g["Total Time (ns)"])
    for g in sizes:
        assert sum(r["total_bytes"] for r in by_op[g["Operation"]]) / MB == pytest.approx(float(g["Total (MB)"]), abs=6e-4)
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "e.sqlite"
        plain.write_bytes(lzma.decompress(NSYS_EXPORTS[scen].read_bytes()))
        con = sqlite3.connect(plain)
        kind = dict(con.execute("SELECT id, label FROM ENUM_CUDA_MEM_KIND").fetchall())
        raw = con.execute("SELECT srcKind, dstKind, bytes, \"end\" - start FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchall()
        has_memset = con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_MEMSET'").fetchone()[0]
        raw += [(None, k, b, d) for k, b, d in con.execute(
            "SELECT memKind, bytes, \"end\" - start FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall()] if has_memset else []
        con.close()
    want: dict[tuple, list[tuple[int, int]]] = {}
    for s, d, b, dur in raw:
        want.setdefault((kind.get(s), kind.get(d)), []).append((b, dur))
    mine: dict[tuple, list[dict]] = {}
    for r in got:
        mine.setdefault((r["src_kind"], r["dst_kind"]), []).append(r)
    assert set(mine) == set(want)
    for k, ops in want.items():
        rows = mine[k]
        assert sum(r["count"] for r in rows) == len(ops) and sum(r["total_bytes"] for r in rows) == sum(b for b, _ in ops)
        if len(rows) == 1:  # one operation of those kinds: its throughputs, op by op
            r, per = rows[0], [b * 1e9 / d for b, d in ops if d > 0]
            assert r["throughput_bytes_per_s"] == pytest.approx(sum(b for b, _ in ops) * 1e9 / sum(d for _, d in ops))
            assert r["med_throughput_bytes_per_s"] == pytest.approx(float(np.median(per)))
            assert r["max_throughput_bytes_per_s"] == pytest.approx(max(per))
    if scen == "copies_pageable":  # the point of the query: pageable copies are the slow ones
        pageable = next(r for r in got if r["src_kind"] == "Pageable")
        pinned = next(r for r in got if r["src_kind"] == "Pinned")
        assert pageable["throughput_bytes_per_s"] < pinned["throughput_bytes_per_s"]


#: `nsys stats -r cuda_gpu_kern_gb_sum` column -> kernel-grids column
GRIDS = {"Time (%)": "time_pct", "Total Time (ns)": "total_ns", "Instances": "instances", "Avg (ns)": "avg_ns",
         "Med (ns)": "med_ns", "Min (ns)": "min_ns", "Max (ns)": "max_ns", "StdDev (ns)": "stddev_ns"}


@pytest.mark.parametrize("scen", [s for s in NSYS_SCENARIOS if s not in NO_CUDA])
def test_kernel_grids_is_nsys_cuda_gpu_kern_gb_sum(nsys_db, scen):
    """One row per kernel, grid and block, with nsys's numbers (GridXYZ and BlockXYZ
    printed as three right-aligned numbers), ranked by total time."""
    golden = _golden(scen, "cuda_gpu_kern_gb_sum")
    ours = nsys_db.query("kernel-grids", run=scen, limit=0).to_dicts()
    assert len(ours) == len(golden)

    def key(name, grid, block):
        return (name, tuple(int(v) for v in grid.split()), tuple(int(v) for v in block.split()))

    theirs = {key(g["Name"], g["GridXYZ"], g["BlockXYZ"]): g for g in golden}
    assert len(theirs) == len(golden)
    for row in ours:
        g = theirs[(row["name"], (row["grid_x"], row["grid_y"], row["grid_z"]),
                    (row["block_x"], row["block_y"], row["block_z"]))]
        assert row["grid"] == "({}, {}, {})".format(*g["GridXYZ"].split())
        for gcol, ocol in GRIDS.items():
            assert _close(row[ocol], g[gcol], gcol, 1.0), f"{scen} {row['name'][:40]} {row['grid']}: {ocol}"
    assert [r["total_ns"] for r in ours] == sorted((r["total_ns"] for r in ours), reverse=True)
    by_name = {}
    for r in ours:
        by_name[r["name"]] = by_name.get(r["name"], 0) + r["total_ns"]
    tops = {r["name"]: r["total_ns"] for r in nsys_db.query("top-kernels", run=scen, limit=0).to_dicts()}
    assert by_name == tops


#: `nsys stats -r cuda_api_trace` column -> api-trace column
API_TRACE = {"Start (ns)": "start_ns", "Duration (ns)": "dur_ns", "Name": "name", "Result": "result",
             "CorrID": "correlation_id", "Pid": "pid", "Tid": "tid", "T-Pri": "thread_priority",
             "Thread Name": "thread_name"}
API_TRACE_SCENARIOS = [s for s in NSYS_SCENARIOS
                       if (NSYS_EXPORTS[s].parent / "stats" / "cuda_api_trace.csv.xz").exists()]


def _assert_trace_is_nsys(nsys_db, query: str, scen: str, report: str, mapping: dict[str, str], start: str,
                          theirs=lambda col, text: text) -> None:
    """``query``'s every row of ``scen`` is a row of nsys's trace report, every column it
    prints equal (``theirs``: nsys's text of a column as tracekit prints it), in order of
    ``start``."""
    golden = _golden(scen, report)
    df = nsys_db.query(query, run=scen, limit=0)
    assert df[start].to_list() == sorted(df[start].to_list())
    assert len(df) == len(golden), f"{query} on {scen}: {len(df)} rows, nsys has {len(golden)}"
    mine = sorted(tuple(_trace_cell(row[o]) for o in mapping.values()) for row in df.to_dicts())
    ours_of_theirs = sorted(tuple(theirs(c, g[c]) for c in mapping) for g in golden)
    assert mine == ours_of_theirs, next((m, t) for m, t in zip(mine, ours_of_theirs, strict=True) if m != t)


@pytest.mark.parametrize("scen", API_TRACE_SCENARIOS)
def test_api_trace_is_nsys_cuda_api_trace(nsys_db, scen):
    """Every CUDA API call of nsys's own trace report, with every column it prints, in
    start order."""
    _assert_trace_is_nsys(nsys_db, "api-trace", scen, "cuda_api_trace", API_TRACE, "start_ns")


def test_api_trace_filters(nsys_db):
    """name= and the window keep what they say, as the full trace filtered; a name no call
    has and an empty window are errors, not empty answers."""
    full = nsys_db.query("api-trace", run="streams", limit=0)
    syncs = nsys_db.query("api-trace", run="streams", name="synchronize", limit=0)
    assert len(syncs) and syncs.equals(full.filter(pl.col("name").str.to_lowercase().str.contains("synchronize")))
    lo, hi = full["start_ns"][len(full) // 3], full["start_ns"][2 * len(full) // 3]
    window = nsys_db.query("api-trace", run="streams", from_ns=lo, to_ns=hi, limit=0)
    assert window.equals(full.filter((pl.col("end_ns") > lo) & (pl.col("start_ns") < hi)))
    assert nsys_db.query("api-trace", run="streams", limit=5).equals(full.head(5))
    with pytest.raises(QueryError, match="no CUDA API call of the run has a name containing 'nosuchcall'"):
        nsys_db.query("api-trace", run="streams", name="nosuchcall")
    with pytest.raises(QueryError, match="the window is empty"):
        nsys_db.query("api-trace", run="streams", from_ns=hi, to_ns=lo)


#: `nsys stats -r cuda_kern_exec_trace` column -> kernel-exec-trace column
EXEC_TRACE = {"API Start (ns)": "api_start_ns", "API Dur (ns)": "api_dur_ns", "Queue Start (ns)": "queue_start_ns",
              "Queue Dur (ns)": "queue_dur_ns", "Kernel Start (ns)": "kernel_start_ns",
              "Kernel Dur (ns)": "kernel_dur_ns", "Total Dur (ns)": "total_dur_ns", "PID": "pid", "TID": "tid",
              "DevId": "device_id", "API Function": "api_name", "GridXYZ": "grid", "BlockXYZ": "block",
              "Kernel Name": "name"}
EXEC_TRACE_SCENARIOS = [s for s in NSYS_SCENARIOS
                        if (NSYS_EXPORTS[s].parent / "stats" / "cuda_kern_exec_trace.csv.xz").exists()]


def _dims(text: str) -> str:
    """nsys's '%4d %4d %4d' (its CSV leaves it unquoted, the comma after it a separator) as
    tracekit prints dimensions, '(x, y, z)'."""
    return "({}, {}, {})".format(*text.split())


@pytest.mark.parametrize("scen", EXEC_TRACE_SCENARIOS)
def test_kernel_exec_trace_is_nsys_cuda_kern_exec_trace(nsys_db, scen):
    """Every launch of nsys's own trace report, with every column it prints, in the order
    of the launching calls."""
    _assert_trace_is_nsys(nsys_db, "kernel-exec-trace", scen, "cuda_kern_exec_trace", EXEC_TRACE, "api_start_ns",
                          lambda col, text: _dims(text) if col in ("GridXYZ", "BlockXYZ") else text)


def test_kernel_exec_sums_kernel_exec_trace(nsys_db):
    """kernel-exec is kernel-exec-trace summed per process, thread, device, launch API and
    kernel (as cuda_kern_exec_sum is cuda_kern_exec_trace): its queue statistics are over the
    launches with a queue time, those whose kernel started at or after the call's end. A
    kernel that started the very nanosecond the call returned waited 0 ns, and counts
    (jobs_after_rank1 has one: nsys's QCount 410, QMin 0); the header says so, not that only
    a positive queue time counts."""
    q = get_registry().queries["kernel-exec"]
    keys = ["pid", "tid", "device_id", "api_name", "kernel_name"]
    for scen in ("jobs_after_rank1", "hstu_mixed", "multithread"):
        trace = nsys_db.query("kernel-exec-trace", run=scen, limit=0).rename({"name": "kernel_name"})
        summed = trace.group_by(keys).agg(
            count=pl.len(), queue_count=pl.col("queue_dur_ns").count(), queue_min_ns=pl.col("queue_dur_ns").min(),
            queue_max_ns=pl.col("queue_dur_ns").max(), kernel_max_ns=pl.col("kernel_dur_ns").max(),
            total_max_ns=pl.col("total_dur_ns").max(), api_min_ns=pl.col("api_dur_ns").min())
        ours = nsys_db.query("kernel-exec", run=scen, limit=0).select(summed.columns)
        assert ours.sort(keys).equals(summed.select(ours.columns).cast(ours.schema).sort(keys)), scen
    zero = nsys_db.query("kernel-exec-trace", run="jobs_after_rank1", limit=0).filter(pl.col("queue_dur_ns") == 0)
    assert len(zero) == 1
    nsys = _golden("jobs_after_rank1", "cuda_kern_exec_sum")
    row = next(r for r in nsys if r["Kernel Name"] == zero["name"][0])
    assert (row["QCount"], row["QMin (ns)"]) == ("410", "0")
    assert "positive" not in q.columns["queue_count"] + q.description, "a queue of 0 ns counts"


def test_kernel_exec_trace_filters(nsys_db):
    """name= and the window keep what they say; the trace's launches are the kernels of
    top-kernels whose launching call the capture recorded."""
    full = nsys_db.query("kernel-exec-trace", run="hstu_mixed", limit=0)
    assert len(full) == nsys_db.query("top-kernels", run="hstu_mixed", limit=0)["instances"].sum()
    some = nsys_db.query("kernel-exec-trace", run="hstu_mixed", name="elementwise", limit=0)
    assert len(some) and some.equals(full.filter(pl.col("name").str.to_lowercase().str.contains("elementwise")))
    lo, hi = full["api_start_ns"][len(full) // 3], full["api_start_ns"][2 * len(full) // 3]
    window = nsys_db.query("kernel-exec-trace", run="hstu_mixed", from_ns=lo, to_ns=hi, limit=0)
    ends = pl.max_horizontal(pl.col("api_start_ns") + pl.col("api_dur_ns"), pl.col("kernel_start_ns") + pl.col("kernel_dur_ns"))
    assert window.equals(full.filter((ends > lo) & (pl.col("api_start_ns") < hi)))
    with pytest.raises(QueryError, match="no kernel of the run has a name containing 'nosuchkernel'"):
        nsys_db.query("kernel-exec-trace", run="hstu_mixed", name="nosuchkernel")
