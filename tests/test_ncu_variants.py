"""ncu reports of the kinds other than kernel replay with sections, against NVIDIA's own
exports of the same real reports (tests/data/ncu_<variant>, made by capture_fixtures.sh on
an H200 with ncu 2025.3.1: ``--page raw`` and ``--page details`` with base units and
metric names, and the Source page):

- app_replay: ``--replay-mode application --set full``, three kernels of
  programs/ncu_variants.cu (saxpy, dfma_loop, block_sum), each pass a run of the program;
- range: ``--replay-mode range --set full``, two ranges marked by cudaProfilerStart/Stop
  (step0: saxpy + block_sum; step1: dfma_loop + saxpy);
- app_range: ``--replay-mode app-range`` (default set), the same two ranges marked by NVTX
  push/pop (region_a, region_b);
- metrics: ``--metrics`` with seven metrics, no sections (so no rules, no Source page);
- graph: ``--graph-profiling graph --set full``: a saxpy launch, then a 3-kernel graph
  launched twice (two results named graph);
- multiproc: ``--target-processes all --set full``: a Python parent and two children it
  starts, four PyTorch kernels.

Each is ingested from the report, the raw page and the details page; every ncu query
either answers as NVIDIA's pages do or, where the question cannot apply, is a one-line
error naming the run and what the report lacks.
"""

from __future__ import annotations

import csv
import lzma
import re

import polars as pl
import pytest
from conftest import DATA, NCU_MWA_METRICS, NCU_SOL_METRICS

import tracekit
from tracekit import charts, report
from tracekit.cli import main as cli_main
from tracekit.errors import InputError, QueryError
from tracekit.ingest import ncu_rep

#: variant -> what each of its results profiled, in ncu's ID order
WORKLOADS = {
    "app_replay": ["kernel"] * 3,
    "range": ["range"] * 2,
    "app_range": ["range"] * 2,
    "metrics": ["kernel"] * 3,
    "graph": ["kernel", "graph", "graph"],
    "multiproc": ["kernel"] * 4,
}
SOURCES = {"report": "report.ncu-rep.xz", "raw": "raw.csv.xz", "details": "details.csv.xz"}
N, D, ITERS = 1 << 22, 1 << 16, 256  # programs/ncu_variants.cu

OCCUPANCY = {
    "block_size": "launch__block_size",
    "grid_size": "launch__grid_size",
    "registers_per_thread": "launch__registers_per_thread",
    "block_limit_registers": "launch__occupancy_limit_registers",
    "block_limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "block_limit_warps": "launch__occupancy_limit_warps",
    "block_limit_blocks": "launch__occupancy_limit_blocks",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "achieved_warps_per_sm": "sm__warps_active.avg.per_cycle_active",
    "waves_per_sm": "launch__waves_per_multiprocessor",
}


def text(variant: str, name: str) -> str:
    return lzma.decompress((DATA / f"ncu_{variant}" / name).read_bytes()).decode()


def raw_rows(variant: str) -> list[dict[str, str]]:
    """The raw page's launch rows (base units), the units row left out."""
    return [r for r in csv.DictReader(text(variant, "raw.csv.xz").splitlines()) if r["ID"].strip()]


def details(variant: str) -> tuple[dict[tuple[int, str], str], set[tuple[int, str, str]]]:
    """(launch ID, metric) -> value as the details page printed it; its rule rows (ID, rule, message)."""
    rows = list(csv.reader(text(variant, "details.csv.xz").splitlines()))
    h = rows[0]
    i_id, i_name, i_val = h.index("ID"), h.index("Metric Name"), h.index("Metric Value")
    values = {(int(r[i_id]), r[i_name]): r[i_val] for r in rows[1:] if r[i_name]}
    rules = set()
    if "Rule Name" in h:
        i_rule, i_desc = h.index("Rule Name"), h.index("Rule Description")
        rules = {(int(r[i_id]), r[i_rule], r[i_desc]) for r in rows[1:] if len(r) > i_rule and r[i_rule]}
    return values, rules


def as_printed(ours, printed: str, what: str) -> None:
    """ours, rounded to the decimals ncu printed, equals the printed value."""
    s = printed.replace(",", "")
    decimals = len(s.split(".")[1]) if "." in s else 0
    assert ours is not None, f"{what}: NULL, ncu printed {printed}"
    assert abs(ours - float(s)) <= 0.5 * 10**-decimals + 1e-9 * abs(float(s)), f"{what}: {ours} vs {printed}"


def dims(cell: str) -> tuple[int, ...] | None:
    nums = re.findall(r"\d+", cell or "")
    return tuple(int(x) for x in nums) if nums else None


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("ncu_variants") / "v.duckdb")
    for variant in WORKLOADS:
        for source, name in SOURCES.items():
            t.ingest(DATA / f"ncu_{variant}" / name, name=f"{variant}/{source}")
    yield t
    t.close()


# -- what each result is --------------------------------------------------------------


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("variant", list(WORKLOADS))
def test_results_as_the_raw_page_lists_them(tk, variant, source):
    """Every export gives each result its ID, what it profiled, its launch shape (a kernel's
    only), stream, process and NVTX path as ncu's raw page prints them."""
    raw = raw_rows(variant)
    k = tk.query("ncu-kernels", run=f"{variant}/{source}")
    assert k["kernel_id"].to_list() == [int(r["ID"]) for r in raw]
    assert k["workload"].to_list() == WORKLOADS[variant]
    stored = tk.sql(f"SELECT * FROM ncu_kernels JOIN runs USING (run_id) WHERE runs.name = '{variant}/{source}' "
                    "ORDER BY kernel_id")
    for r, row, q in zip(raw, stored.iter_rows(named=True), k.iter_rows(named=True), strict=True):
        what = f"{variant}/{source} ID {r['ID']}"
        assert row["process_id"] == int(r["Process ID"]), what  # (the report: from its block headers)
        assert (row["process_name"], row["host_name"]) == (r["Process Name"], r["Host Name"]), what
        assert row["stream_id"] == (None if r["Stream"] == "n/a" else int(r["Stream"])), what
        if row["workload"] == "kernel":
            assert (dims(q["grid"]), dims(q["block"])) == (dims(r["Grid Size"]), dims(r["Block Size"])), what
        else:  # a range prints none; a graph the maxima over its kernels (test below): not a launch's
            assert q["grid"] is None and q["block"] is None and row["grid_x"] is None, what
            assert row["name"] == row["workload"] == r["Kernel Name"], what
        path = re.findall(r'"<default domain>:([^:]*):', r["thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:"
                                                             "Color:Msg_Type:Msg"])
        assert row["nvtx_path"] == "/".join(path), what


def test_a_graphs_launch_shape_is_the_maxima_over_its_kernels(tmp_path):
    """Why a graph has no grid or block in ncu_kernels: ncu gives it the per-dimension
    maxima over the kernels it ran, which no launch had (block (512,1,1) with grid (16384,1,1))."""
    import ncu_report

    raw = raw_rows("graph")
    nodes = [r for r in raw if r["Kernel Name"] == "graph"]
    assert len(nodes) == 2
    report = tmp_path / "graph.ncu-rep"
    report.write_bytes(lzma.decompress((DATA / "ncu_graph" / "report.ncu-rep.xz").read_bytes()))
    action = ncu_report.load_report(str(report)).range_by_idx(0).action_by_idx(1)
    per_node = {}
    for m in ("launch__grid_dim_x", "launch__block_dim_x"):
        metric = action.metric_by_name(m)
        per_node[m] = [metric.as_uint64(i) for i in range(metric.num_instances())]
    names = action.metric_by_name("launch__kernel_name")
    assert [names.as_string(i) for i in range(names.num_instances())] == ["saxpy", "block_sum", "dfma_loop"]
    assert per_node == {"launch__grid_dim_x": [N // 256, N // 512, D // 128], "launch__block_dim_x": [256, 512, 128]}
    for r in nodes:
        assert dims(r["Grid Size"])[0] == max(per_node["launch__grid_dim_x"]) == N // 256
        assert dims(r["Block Size"])[0] == max(per_node["launch__block_dim_x"]) == 512


def test_processes_of_a_multiprocess_report(tk):
    for source in SOURCES:
        k = tk.sql("SELECT kernel_id, process_id, nvtx_path FROM ncu_kernels JOIN runs USING (run_id) "
                   f"WHERE runs.name = 'multiproc/{source}' ORDER BY kernel_id")
        pids = k["process_id"].to_list()
        assert pids[0] != pids[1] != pids[2] == pids[3], source  # parent, child0, child1 twice
        assert [p.split("/")[1] for p in k["nvtx_path"]] == ["parent", "child0", "child1", "child1"]


def test_the_containers_results_and_modules(tmp_path):
    """The walk counts every kind of result (a range's or a graph's block says NumResults 0:
    the check read such a report as damaged before) and finds the modules' functions."""
    for variant, n in (("range", 2), ("app_range", 2), ("graph", 3), ("multiproc", 4), ("app_replay", 3)):
        p = tmp_path / f"{variant}.ncu-rep"
        p.write_bytes(lzma.decompress((DATA / f"ncu_{variant}" / "report.ncu-rep.xz").read_bytes()))
        c = ncu_rep.check_container(p)
        assert len(c.processes) == n, variant
        symbols = set(ncu_rep.module_functions(p, c.sources).values())
        if variant != "multiproc":
            assert symbols == {"_Z5saxpyifPKfPf", "_Z9dfma_loopiPdi", "_Z9block_sumPKfPfi"}, variant
    assert ncu_rep.function_name("_Z9block_sumPKfPfi") == "block_sum"
    assert ncu_rep.function_name("_ZN2at6native13reduce_kernelILi512ELi1EEEvT1_") == "at::native::reduce_kernel"
    assert ncu_rep.function_name("softmax_kernel") == "softmax_kernel"
    # a range report cut short, or with an entry's size damaged, is refused as before
    rep = (tmp_path / "range.ncu-rep").read_bytes()
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(rep[: len(rep) - 1000])
    with pytest.raises(InputError, match="truncated report"):
        ncu_rep.check_container(cut)
    c = ncu_rep.check_container(tmp_path / "range.ncu-rep")
    offset = c.sources[0][1] - 4  # the first entry's size field
    bad = bytearray(rep)
    bad[offset:offset + 4] = (c.sources[0][2] + 7).to_bytes(4, "little")
    broken = tmp_path / "broken.ncu-rep"
    broken.write_bytes(bytes(bad))
    with pytest.raises(InputError, match="corrupt payload .* the report is damaged"):
        ncu_rep.check_container(broken)


# -- the section queries against the details page --------------------------------------


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("variant", ["app_replay", "range", "app_range", "graph", "multiproc", "metrics"])
def test_speed_of_light_equals_the_details_page(tk, variant, source):
    gold, _ = details(variant)
    df = tk.query("speed-of-light", run=f"{variant}/{source}")
    assert df["kernel_id"].to_list() == list(range(len(WORKLOADS[variant])))
    checked = 0
    for row in df.iter_rows(named=True):
        for col, metric in NCU_SOL_METRICS.items():
            printed = gold.get((row["kernel_id"], metric))
            if printed is None:  # (--metrics: the two it asked for; nothing made up for the rest)
                assert variant == "metrics" and row[col] is None, (source, row["kernel_id"], col)
                continue
            as_printed(row[col], printed, f"{variant}/{source} ID {row['kernel_id']} {col}")
            checked += 1
    assert checked == (2 if variant == "metrics" else 10) * df.height
    if variant == "metrics":  # says what it lacks
        assert all("gpc__cycles_elapsed.max" in m for m in df["missing_metrics"])


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("variant", ["app_replay", "graph", "multiproc", "metrics"])
def test_occupancy_of_kernel_launches_equals_the_details_page(tk, variant, source):
    gold, _ = details(variant)
    df = tk.query("occupancy", run=f"{variant}/{source}")
    kernels = [i for i, w in enumerate(WORKLOADS[variant]) if w == "kernel"]
    assert df["kernel_id"].to_list() == kernels  # (a graph's results left out)
    checked = 0
    for row in df.iter_rows(named=True):
        for col, metric in OCCUPANCY.items():
            printed = gold.get((row["kernel_id"], metric))
            if printed is not None:
                as_printed(row[col], printed, f"{variant}/{source} ID {row['kernel_id']} {col}")
                checked += 1
    # (a details page prints what --metrics asked for; with --graph-profiling graph, ncu's Occupancy
    # section of a kernel launch too holds the achieved occupancy alone)
    printed = sum((k, m) in gold for k in kernels for m in OCCUPANCY.values())
    assert checked == printed >= (2 if variant in ("metrics", "graph") else 11) * df.height
    if source != "details":  # the report and the raw page hold them all
        assert df["limiter"].null_count() == 0 and df["theoretical_occupancy_pct"].null_count() == 0


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("variant", ["range", "app_range"])
def test_occupancy_of_ranges_is_an_error(tk, variant, source):
    run = f"{variant}/{source}"
    with pytest.raises(QueryError, match=rf"^occupancy: run \d+ \({run}\) has no kernel launches: its results are "
                                         r"ranges \(ncu --replay-mode range or app-range\), which run several kernels"):
        tk.query("occupancy", run=run)


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("variant", ["app_replay", "range", "graph", "multiproc"])
def test_memory_workload_equals_the_details_page(tk, variant, source):
    gold, _ = details(variant)
    raw = {int(r["ID"]): r for r in raw_rows(variant)}
    df = tk.query("memory-workload", run=f"{variant}/{source}")
    assert df.height == len(WORKLOADS[variant])
    for row in df.iter_rows(named=True):
        k = row["kernel_id"]
        for col, metric in NCU_MWA_METRICS.items():
            as_printed(row[col], gold[(k, metric)], f"{variant}/{source} ID {k} {col}")
        if source != "details":  # (the details page prints no read/write split)
            for col, metric in (("dram_read_bytes", "dram__bytes_read.sum"), ("dram_write_bytes", "dram__bytes_write.sum")):
                as_printed(row[col], raw[k][metric], f"{variant}/{source} ID {k} {col}")
    if variant in ("app_replay", "range"):  # saxpy and block_sum each read the 16 MiB x from DRAM once
        reads = df["dram_read_bytes"].to_list() if source != "details" else None
        assert reads is None or min(r for r in reads) > 0.5e6


# -- roofline ---------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["report", "raw"])
def test_roofline_of_planted_flop(tk, source):
    """saxpy does 2 FLOP (one FFMA) per element, dfma_loop 2 per FMA: exactly, through
    ncu's .per_cycle_elapsed rates at the launches' own clocks."""
    df = tk.query("roofline", run=f"app_replay/{source}")
    rel = 1e-9 if source == "report" else 1e-3  # (the raw page prints the rates to 2 decimals)
    saxpy, dfma, block_sum = df.iter_rows(named=True)
    assert saxpy["fp32_flops_per_s"] * saxpy["duration_ns"] * 1e-9 == pytest.approx(2 * N, rel=rel)
    assert saxpy["precision"] == "fp32" and saxpy["bound"] == "memory"
    assert dfma["flop"] == pytest.approx(2 * D * ITERS, rel=rel) and dfma["precision"] == "fp64"
    assert dfma["fp32_flops_per_s"] == 0
    # block_sum adds in fp32, but the compiler zeroes a register with HFMA2.MMA (one per thread,
    # 4 FLOP in ncu's FP16 formula): ncu's counters make it "fp16"
    assert block_sum["fp16_flops_per_s"] * block_sum["duration_ns"] * 1e-9 == pytest.approx(4 * N, rel=rel)
    assert block_sum["missing_metrics"] is None


@pytest.mark.parametrize("source", list(SOURCES))
def test_roofline_without_its_metrics_is_an_error(tk, source):
    for variant in ("metrics", "app_range"):
        run = f"{variant}/{source}"
        with pytest.raises(QueryError, match=rf"^roofline: run \d+ \({run}\) has no roofline input: no FLOP rate .* "
                                             r"profile with ncu --section SpeedOfLight_RooflineChart"):
            tk.query("roofline", run=run)


@pytest.mark.parametrize("variant", ["app_replay", "multiproc"])
def test_roofline_of_a_details_page_is_an_error(tk, variant, tmp_path):
    """ncu's details CSV page prints the DRAM bandwidth but no FLOP counter (the roofline
    sections are charts there): no roofline, not rows of blanks. The query, the chart and the
    report's section say the same one line, which sends to the report or its raw page (they
    have the counters: the same launches' rooflines from them)."""
    printed = text(variant, "details.csv.xz")
    assert "dram__bytes.sum.per_second" in printed and "smsp__sass_thread_inst_executed_op_" not in printed
    run = f"{variant}/details"
    said = (rf"^roofline: run \d+ \({re.escape(run)}\) has no roofline input: no FLOP rate \([^)]*\); ncu's details "
            r"CSV page prints no FLOP counters: ingest the \.ncu-rep \(or ncu -i REPORT --csv --page raw\)")
    with pytest.raises(QueryError, match=said):
        tk.query("roofline", run=run)
    with pytest.raises(QueryError, match=said):
        charts.chart(tk, "roofline", run=run)
    for source in ("report", "raw"):
        assert tk.query("roofline", run=f"{variant}/{source}")["flops_per_s"].null_count() == 0
    page = report.write_report(tk, tmp_path / "details.html", run=run).read_text()
    roof = re.search(r'<section id="roofline">(.*?)</section>', page, flags=re.S).group(1)
    assert re.search(r'<p class="note">roofline: run \d+ .* has no roofline input: no FLOP rate', roof)
    assert "<table" not in roof


@pytest.mark.parametrize("variant", ["range", "graph"])
def test_roofline_of_ranges_and_graphs_says_what_ncu_did_not_collect(tk, variant):
    """ncu collects no SASS counters in range replay nor when it profiles whole graphs
    (its own FP32/FP64/FP16 rooflines are empty there): the bytes are there, the FLOP rates NULL."""
    raw = {int(r["ID"]): r for r in raw_rows(variant)}
    assert not any(c.startswith("smsp__sass_thread_inst_executed_op_") for c in next(iter(raw.values())))
    df = tk.query("roofline", run=f"{variant}/report")
    for row in df.iter_rows(named=True):
        assert row["fp32_flops_per_s"] is None and row["bound"] is None
        assert "smsp__sass_thread_inst_executed_op_{fadd,fmul,ffma}" in row["missing_metrics"]
        assert row["dram_bytes_per_s"] == pytest.approx(num(raw[row["kernel_id"]]["dram__bytes.sum.per_second"]),
                                                        rel=1e-9)


# -- warp states, rules -----------------------------------------------------------------


@pytest.mark.parametrize("variant", ["range", "graph", "app_replay"])
def test_warp_stalls_equal_the_raw_page(tk, variant):
    raw = {int(r["ID"]): r for r in raw_rows(variant)}
    df = tk.query("warp-stalls", run=f"{variant}/raw")
    assert set(df["kernel_id"]) == set(raw)
    checked = 0
    for row in df.iter_rows(named=True):
        r = raw[row["kernel_id"]]
        state = f"smsp__average_warps_issue_stalled_{row['reason']}_per_issue_active.ratio"
        if row["cycles_per_issue"] is not None:
            assert row["cycles_per_issue"] == pytest.approx(float(r[state].replace(",", "")), rel=1e-12)
            checked += 1
        sample = "smsp__pcsamp_warps_issue_stalled_" + row["reason"].replace("no_instruction", "no_instructions")
        if row["samples"] is not None:
            assert row["samples"] == float(r[sample].replace(",", ""))
    assert checked > 10 * len(raw)
    # the report gives the same (the raw page prints 2 decimals)
    rep = {(r["kernel_id"], r["reason"]): r for r in tk.query("warp-stalls", run=f"{variant}/report").iter_rows(named=True)}
    assert set(rep) == {(r["kernel_id"], r["reason"]) for r in df.iter_rows(named=True)}
    for row in df.iter_rows(named=True):
        mine = rep[(row["kernel_id"], row["reason"])]
        assert mine["samples"] == row["samples"]
        assert mine["cycles_per_issue"] == pytest.approx(row["cycles_per_issue"], abs=0.005, nan_ok=True) \
            if row["cycles_per_issue"] is not None else mine["cycles_per_issue"] is None


@pytest.mark.parametrize("variant", ["range", "graph", "app_range"])
def test_rules_equal_the_details_page(tk, variant):
    _, gold = details(variant)
    assert gold
    for source in ("report", "details"):
        df = tk.query("ncu-rules", run=f"{variant}/{source}")
        ours = {(r["kernel_id"], r["rule"], r["message"]) for r in df.iter_rows(named=True)}
        assert ours == gold, source


@pytest.mark.parametrize("source", list(SOURCES))
def test_rules_of_a_metrics_only_report_are_an_error(tk, source):
    run = f"metrics/{source}"
    why = ("its report holds no sections \\(ncu --metrics alone, or an Nsight Compute too old to record "
           "them\\), so ncu ran no rules on it" if source != "raw" else "ncu's raw CSV page has none")
    with pytest.raises(QueryError, match=rf"^ncu-rules: run \d+ \({run}\) has no rule results: {why}"):
        tk.query("ncu-rules", run=run)
    meta = tk.sql(f"SELECT json_extract(meta, '$.sections')::INTEGER AS s FROM runs WHERE name = '{run}'")["s"][0]
    assert meta == (None if source == "raw" else 0)


@pytest.mark.parametrize("query", ["warp-stalls", "ncu-source"])
def test_metrics_only_lacks_the_rest(tk, query):
    with pytest.raises(QueryError, match=rf"^{query}: run \d+ \(metrics/report\) has no "):
        tk.query(query, run="metrics/report")


# -- the Source page ----------------------------------------------------------------------


def page_blocks(variant: str) -> list[dict]:
    """The Source page's blocks (``--print-source sass``) in print order: results in ID
    order, one block per function a result ran."""
    blocks: list[dict] = []
    for row in csv.reader(text(variant, "source_sass.csv.xz").splitlines()):
        if not row or row[0].startswith("=="):
            continue
        if row[0] == "Kernel Name":
            blocks.append({"name": row[1], "rows": []})
        elif row[0] == "Address":
            blocks[-1]["header"] = row
        else:
            blocks[-1]["rows"].append(dict(zip(blocks[-1]["header"], row, strict=True)))
    return blocks


def bare(sass: str) -> tuple[str, str]:
    """Opcode and operand characters sorted, spaces, commas and dots out (the two
    disassemblers write a few operands differently; test_ncu_source.py)."""
    words = [w for w in sass.split() if not w.startswith("@")]
    return words[0], "".join(sorted(re.sub(r"[\s,.]", "", " ".join(words[1:]))))


def num(cell: str) -> float:
    return 0.0 if cell in ("", "-") else float(cell.replace(",", ""))


@pytest.mark.parametrize("variant", ["app_replay", "range", "graph", "multiproc"])
def test_instructions_equal_the_source_page(tk, variant):
    """Every instruction of every result, attributed to its function (a range or a graph
    runs several), with the page's samples and counts."""
    rows = tk.sql("SELECT s.*, k.name FROM ncu_source s JOIN ncu_kernels k USING (run_id, kernel_id) "
                  f"JOIN runs r USING (run_id) WHERE r.name = '{variant}/report' ORDER BY kernel_id, address")
    stalls = tk.sql("SELECT kernel_id, address, sum(samples) AS samples FROM ncu_source_stalls JOIN runs r "
                    f"USING (run_id) WHERE r.name = '{variant}/report' GROUP BY ALL")
    stall_sum = {(k, a): v for k, a, v in stalls.iter_rows()}
    blocks = iter(page_blocks(variant))
    checked = 0
    for kid in range(len(WORKLOADS[variant])):
        mine = rows.filter(pl.col("kernel_id") == kid)
        functions = mine["function"].n_unique()  # (one for a kernel launch: NULL)
        page = {}
        for _ in range(functions):
            b = next(blocks)
            for r in b["rows"]:
                page[int(r["Address"], 16)] = (b["name"], r)
        assert mine.height > 0 and len(page) >= mine.height
        for got in mine.iter_rows(named=True):
            name, want = page[got["address"]]
            if got["function"] is not None:  # ncu prints a function's demangled name with its parameters
                assert name == got["function"] or name.startswith(got["function"] + "("), (kid, name, got["function"])
            else:
                assert WORKLOADS[variant][kid] == "kernel"
            assert bare(got["sass"]) == bare(want["Source"]), (kid, hex(got["address"]))
            assert (got["samples"] or 0) == num(want["Warp Stall Sampling (All Samples)"])
            assert (got["samples"] or 0) == stall_sum.get((kid, got["address"]), 0)
            if "Instructions Executed" in want:
                assert (got["inst_executed"] or 0) == num(want["Instructions Executed"])
            else:  # a graph: sampling only
                assert WORKLOADS[variant][kid] == "graph" and got["inst_executed"] is None
            checked += 1
    assert next(blocks, None) is None and checked > 100


@pytest.mark.parametrize("variant", ["range", "graph", "app_replay"])
def test_source_lines_equal_the_source_page(tk, variant):
    """ncu-source per function and line over all results = the page's line rows (cuda,sass)
    summed over the results, functions named as the page names them. (An instruction of an
    inlined function, atomicAdd's REDG, the page lists under its call site and again under
    the header it was inlined from; ncu_report's line information, and so ncu-source, gives
    the call site: the header's rows are left out.)"""
    want: dict[tuple[str, str, int], list[float]] = {}
    function = path = None
    header = None
    for row in csv.reader(text(variant, "source_cuda_sass.csv.xz").splitlines()):
        if not row or row[0].startswith("=="):
            continue
        if row[0] == "File Path":
            path = row[1]
        elif row[0] == "Function Name":
            function = row[1]
        elif row[0] == "Line No":
            header = row
        elif row[0]:  # a line row (its instructions follow with an empty Line No)
            r = dict(zip(["_line", "_text"] + header[2:], row, strict=True))
            acc = want.setdefault((function, path, int(row[0])), [0.0, 0.0])
            acc[0] += num(r["Warp Stall Sampling (All Samples)"])
            acc[1] += num(r.get("Instructions Executed", "0"))
    inlined = {k for k in want if k[1].endswith("sm_20_atomic_functions.hpp")}
    assert inlined  # (block_sum's atomicAdd)
    want = {k: v for k, v in want.items() if k not in inlined}
    got = tk.query("ncu-source", run=f"{variant}/report", limit=0)
    ours = {}
    for r in got.iter_rows(named=True):
        page_name = next(f for f, p, n in want if p == r["file"] and n == r["line"]
                         and (f == r["name"] or f.startswith(r["name"] + "(")))
        ours[(page_name, r["file"], r["line"])] = [r["samples"], r["inst_executed"] or 0.0]
    assert ours == want
    if variant == "range":  # the functions of both ranges count together: saxpy ran in both
        saxpy = got.filter(pl.col("name").str.starts_with("saxpy"))
        assert saxpy["launches"].unique().to_list() == [2]


def test_source_kernel_filter_names_functions(tk):
    both = tk.query("ncu-source", run="range/report", limit=0)
    saxpy = tk.query("ncu-source", run="range/report", kernel="saxpy", limit=0)
    assert saxpy.height > 0 and set(saxpy["name"]) == {"saxpy"}
    assert tk.query("ncu-source", run="range/report", kernel="range", limit=0).equals(both)
    with pytest.raises(QueryError, match=r"^ncu-source: no kernel of the run has a name containing 'gemm'"):
        tk.query("ncu-source", run="range/report", kernel="gemm")


# -- the CLI and the report ----------------------------------------------------------------


def test_cli_errors_are_one_line_exit_2_and_reports_say_why(tmp_path, capsys):
    """On the command line, a query that cannot apply is one line and exit status 2;
    ``tracekit report`` works on every kind, the sections that cannot apply saying why."""
    db = str(tmp_path / "cli.duckdb")
    for variant in WORKLOADS:
        assert cli_main(["--db", db, "ingest", str(DATA / f"ncu_{variant}" / "report.ncu-rep.xz"), "--name", variant]) == 0
    assert cli_main(["--db", db, "ingest", str(DATA / "ncu_metrics" / "raw.csv.xz"), "--name", "metrics-raw"]) == 0
    capsys.readouterr()
    for args, needle in (
        (["query", "occupancy", "--run", "range"], "occupancy: run 2 (range) has no kernel launches"),
        (["query", "occupancy", "--run", "app_range"], "its results are ranges"),
        (["query", "roofline", "--run", "metrics-raw"], "roofline: run 7 (metrics-raw) has no roofline input"),
        (["query", "ncu-rules", "--run", "metrics"], "so ncu ran no rules"),
        (["query", "warp-stalls", "--run", "app_range"], "has no warp state metrics"),
        (["query", "ncu-source", "--run", "metrics"], "has no instruction-level data"),
    ):
        assert cli_main(["--db", db, *args]) == 2, args
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err
    notes = {}
    for variant in WORKLOADS:
        out = tmp_path / f"{variant}.html"
        assert cli_main(["--db", db, "report", "--run", variant, "-o", str(out)]) == 0, variant
        notes[variant] = re.findall(r'<p class="note">([^<]*)</p>', out.read_text())
    assert any("has no kernel launches" in n for n in notes["range"])
    assert any("roofline: nothing to plot" in n for n in notes["range"])  # (the bytes, no FLOP rates)
    assert any("ncu ran no rules" in n for n in notes["metrics"])
    assert any("has no roofline input" in n for n in notes["metrics"])
    assert not any("occupancy" in n for n in notes["graph"])  # (its saxpy launch has one)
    assert notes["app_replay"] == [] and notes["multiproc"] == []
