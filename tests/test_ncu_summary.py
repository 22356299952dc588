"""ncu-summary (one row per kernel and NVTX range) and the kernel= filter of the per-launch
ncu queries, on the committed real reports.

Every summary value is the per-launch queries' rows of its launches aggregated here, in
Python: the median as DuckDB takes it (the middle value, or lo + (hi - lo) x 0.5), sums in
launch order, the value most launches have; and against NVIDIA's own details page
(``ncu --page details``) where the fixture has one.
"""

from __future__ import annotations

import csv
import lzma
import math
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS, let_go, spec_datasets

import tracekit
from tracekit.charts import chart
from tracekit.cli import main as cli_main
from tracekit.errors import QueryError

#: every ncu fixture's raw CSV page (the report's metrics; a report takes 30 times as long to
#: read), some as their report and details page too (ncu_sections': no duration), and the HSTU
#: capture (its report: 65 launches of 10 kernels in their NVTX ranges)
NCU_FIXTURES = sorted(p.name for p in DATA.glob("ncu_*") if (p / "raw.csv.xz").exists())
MORE = {f"{f}/{kind}": DATA / f / name for f in ("ncu_full", "ncu_range", "ncu_graph", "ncu_sections")
        for kind, name in (("report", "report.ncu-rep.xz"), ("details", "details.csv.xz"))}
FILTERED = ["roofline", "occupancy", "speed-of-light", "ncu-kernels", "ncu-summary"]

#: summary column -> (per-launch query, its column): medians over the launches
MEDIANS = {
    "duration_ns": ("speed-of-light", "duration_ns"),
    "elapsed_cycles": ("speed-of-light", "elapsed_cycles"),
    "sm_active_cycles": ("speed-of-light", "sm_active_cycles"),
    "sm_frequency_hz": ("speed-of-light", "sm_frequency_hz"),
    "sm_throughput_pct": ("speed-of-light", "sm_throughput_pct"),
    "memory_throughput_pct": ("speed-of-light", "memory_throughput_pct"),
    "dram_throughput_pct": ("speed-of-light", "dram_throughput_pct"),
    "theoretical_occupancy_pct": ("occupancy", "theoretical_occupancy_pct"),
    "achieved_occupancy_pct": ("occupancy", "achieved_occupancy_pct"),
    "l1_hit_rate_pct": ("memory-workload", "l1_hit_rate_pct"),
    "l2_hit_rate_pct": ("memory-workload", "l2_hit_rate_pct"),
    "dram_bytes_per_s": ("roofline", "dram_bytes_per_s"),
    "flops_per_s": ("roofline", "flops_per_s"),
    "ai_dram": ("roofline", "ai_dram"),
    "roof_pct": ("roofline", "roof_pct"),
    "dram_roof_pct": ("roofline", "dram_roof_pct"),  # (100 x dram_bytes_per_s / peak_dram_bytes_per_s, below)
}
#: summed over the launches
SUMS = {"total_ns": ("speed-of-light", "duration_ns"), "dram_bytes": ("roofline", "dram_bytes"),
        "flop": ("roofline", "flop")}
#: the value most launches have, and named in varies where they differ
COMMON = {"registers_per_thread": ("occupancy", "registers_per_thread"), "block_size": ("occupancy", "block_size"),
          "grid_size": ("occupancy", "grid_size"), "limiter": ("occupancy", "limiter"),
          "precision": ("roofline", "precision"), "bound": ("roofline", "bound"),
          "roof_limiter": ("hierarchical-roofline", "limiter")}
#: the value most launches have (none: a value too), not named in varies (it follows from the settings that are)
COMMON_UNSAID = {"next_needs": ("occupancy", "next_needs")}


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("ncu_summary") / "s.duckdb")
    t.ingest(DATA / "hstu_capture_ncu", name="hstu")
    for fixture in NCU_FIXTURES:
        t.ingest(DATA / fixture / "raw.csv.xz", name=fixture)
    for name, path in MORE.items():
        t.ingest(path, name=name)
    t.ingest(NSYS_EXPORTS["capture_range"], name="nsys_run")
    yield t
    t.close()


def duckdb_median(values: list) -> float | None:
    """DuckDB's median (quantile_cont 0.5) of the values that are not None."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    lo, hi = v[(len(v) - 1) // 2], v[len(v) // 2]
    return lo if lo == hi else lo + (hi - lo) * 0.5


def most_common(values: list):
    seen = [v for v in values if v is not None]
    return max(seen, key=lambda v: (seen.count(v), -seen.index(v))) if seen else None


def per_launch(tk, run: str) -> dict[str, dict[int, dict]]:
    """query -> kernel_id -> its row; a query the run cannot answer (its report lacks every
    input: a one-line QueryError) has no rows, and the summary's columns from it are NULL.
    A roofline refused for want of FLOP rates (a details CSV page) still has the DRAM bytes
    the summary gives, and a speed-of-light refused for want of its section's metrics the
    durations: the rows of the view each reads (ncu_roofline, ncu_kernel_metrics), the
    query's columns."""
    out = {}
    for q in ("speed-of-light", "occupancy", "roofline", "memory-workload", "hierarchical-roofline"):
        try:
            df = tk.query(q, run=run)
        except QueryError:
            df = None
            view = {"roofline": "ncu_roofline", "speed-of-light": "ncu_kernel_metrics"}.get(q)
            if view:
                df = tk.sql(f"SELECT * FROM {view} WHERE run_id = (SELECT max(run_id) FROM runs WHERE name = ?)",
                            params=[run])
        out[q] = {} if df is None else {r["kernel_id"]: r for r in df.iter_rows(named=True)}
    for r in out["roofline"].values():
        r["dram_roof_pct"] = (None if r["dram_bytes_per_s"] is None or not r["peak_dram_bytes_per_s"]
                              else 100 * r["dram_bytes_per_s"] / r["peak_dram_bytes_per_s"])
    return out


def runs_of(tk) -> list[str]:
    return [n for n, k in tk.con.execute("SELECT name, kind FROM runs ORDER BY run_id").fetchall() if "ncu" in k]


@pytest.fixture(scope="module")
def ncu_runs(tk):
    return runs_of(tk)


@pytest.fixture(scope="module")
def launches_of(tk):
    """run -> (ncu-kernels, per_launch): asked once for both groupings."""
    asked: dict = {}

    def get(run: str):
        if run not in asked:
            asked[run] = tk.query("ncu-kernels", run=run), per_launch(tk, run)
        return asked[run]

    return get


def test_every_fixture_is_in_the_store(tk, ncu_runs):
    assert len(ncu_runs) == 1 + len(NCU_FIXTURES) + len(MORE) and len(NCU_FIXTURES) >= 18


@pytest.mark.parametrize("group", ["kernel", "shape"])
def test_summary_is_the_per_launch_rows_aggregated(tk, ncu_runs, launches_of, group):
    """On every fixture and export: one row per (kernel name, NVTX range) of ncu-kernels (with
    group=shape, per kernel name, NVTX range, grid and block), each value exactly the median,
    sum or most common value of the per-launch queries' rows of its launches (NULL where those
    have none: a report without the inputs, a range's occupancy)."""
    checked = shapes = said = moved = 0
    key = ["name", "nvtx_range"] + (["grid", "block"] if group == "shape" else [])
    for run in ncu_runs:
        launches, rows = launches_of(run)
        summary = tk.query("ncu-summary", run=run, group=group)
        groups = launches.group_by(key, maintain_order=True).agg(
            pl.col("kernel_id").sort(), pl.col("grid").alias("grids"), pl.col("block").alias("blocks"))
        assert summary.height == groups.height, run
        by_key = {tuple(r[k] for k in key): r for r in summary.iter_rows(named=True)}
        shapes += groups.height - launches.select("name", "nvtx_range").unique().height
        for *k, ids, grids, blocks in groups.iter_rows():
            name = k[0]
            s = by_key[tuple(k)]
            assert (s["launches"], s["kernel_id"]) == (len(ids), ids[0]), (run, name)
            assert (s["grid"], s["block"]) == (most_common(grids), most_common(blocks)), (run, name)
            for col, (q, src) in MEDIANS.items():
                assert s[col] == duckdb_median([rows[q].get(i, {}).get(src) for i in ids]), (run, name, col)
            known = [rows["occupancy"].get(i, {}).get("theoretical_occupancy_pct") for i in ids]
            nexts = [rows["occupancy"].get(i, {}).get("next_occupancy_pct") for i in ids]
            want = duckdb_median(nexts) if sum(v is not None for v in nexts) == sum(v is not None for v in known) \
                else None
            assert s["next_occupancy_pct"] == want, (run, name)
            at_best = [rows["occupancy"].get(i, {}).get("best_block_occupancy_pct") for i in ids]
            best = [rows["occupancy"].get(i, {}).get("best_block_size") for i in ids]
            assert s["best_block_occupancy_pct"] == (
                None if None in at_best or len(set(best)) > 1 else duckdb_median(at_best)), (run, name)
            assert s["best_block_size"] == most_common(best), (run, name)
            moved += s["best_block_size"] not in (None, s["block_size"])
            for col, (q, src) in SUMS.items():
                values = [rows[q].get(i, {}).get(src) for i in ids]
                assert s[col] == (None if None in values else sum(values)), (run, name, col)
            notes = []
            for col, (q, src) in COMMON.items():
                values = [rows[q].get(i, {}).get(src) for i in ids]
                assert s[col] == most_common(values), (run, name, col)
                distinct = sorted({v for v in values if v is not None})
                if len(distinct) > 1:
                    notes.append(f"{col}: " + " / ".join(str(v) for v in distinct))
            assert s["varies"] == ("; ".join(notes) or None), (run, name)
            for col, (q, src) in COMMON_UNSAID.items():
                values = [rows[q].get(i, {}).get(src) or "" for i in ids]
                assert s[col] == (most_common(values) or None), (run, name, col)
                said += s[col] is not None
            checked += 1
        # ordered by the kernel's time, the largest first
        totals = summary["total_ns"].to_list()
        assert totals == sorted(totals, key=lambda t: (t is None, -(t or 0))), run
    assert checked >= 60 and said >= 10 and moved >= 1, (checked, said, moved)
    assert (shapes > 5) == (group == "shape")  # (kernels launched at several shapes: rows of their own)


def test_hstu_capture_summary(tk):
    """The HSTU capture: 65 launches, 10 kernels-in-a-range; the KV-cached attention kernel's
    8 launches (one per layer) take the most time; the embedding's gather launches differ in
    grid size, and the row says so."""
    s = tk.query("ncu-summary", run="hstu")
    assert s.height == 10 and s["launches"].sum() == 65
    top = s.row(0, named=True)
    assert (top["name"], top["nvtx_range"], top["launches"]) == ("_hstu_cached_sk_kernel", "hstu_attention", 8)
    assert (top["registers_per_thread"], top["block_size"], top["grid_size"]) == (255, 256, 132)
    assert (top["precision"], top["bound"], top["varies"]) == ("tensor_bf16", "compute", None)
    gather = s.filter(pl.col("nvtx_range") == "hstu.embedding").row(0, named=True)
    assert gather["launches"] == 3 and gather["grid_size"] == 128 and gather["varies"] == "grid_size: 128 / 8320"


def test_the_memory_level_that_bounds_each_shape(tk):
    """ncu_shapes_slow runs one memory-bound kernel at three grid sizes, each reading its input
    four times: the DRAM roofline calls every launch memory-bound, the hierarchical one says
    which level: the two small grids' data stays in L2 (L2-bound), the largest streams from
    DRAM. The kernel's row takes the most launches' level and names both in varies."""
    shapes = tk.query("ncu-summary", run="ncu_shapes_slow", group="shape")
    assert set(shapes["bound"]) == {"memory"}
    assert dict(zip(shapes["grid"], shapes["roof_limiter"], strict=True)) == {
        "(64, 1, 1)": "L2", "(1024, 1, 1)": "L2", "(16384, 1, 1)": "DRAM"}
    kernel = tk.query("ncu-summary", run="ncu_shapes_slow").row(0, named=True)
    assert kernel["roof_limiter"] == "L2" and "roof_limiter: DRAM / L2" in kernel["varies"]


def details_page(path: Path) -> dict[tuple[int, str], str]:
    """(launch ID, metric) -> the value NVIDIA's details page prints (--print-units base)."""
    rows = list(csv.reader(lzma.decompress(path.read_bytes()).decode().splitlines()))
    h = rows[0]
    i_id, i_name, i_val = h.index("ID"), h.index("Metric Name"), h.index("Metric Value")
    return {(int(r[i_id]), r[i_name]): r[i_val] for r in rows[1:] if r[i_name]}


def _number(printed: str) -> float:
    return float(printed.replace(",", ""))


def _decimals(printed: str) -> int:
    return len(printed.split(".")[1]) if "." in printed else 0


@pytest.mark.parametrize(("run", "page"), [("hstu", DATA / "hstu_capture_ncu" / "ncu_details.csv.xz"),
                                           ("ncu_shapes_a", DATA / "ncu_shapes_a" / "details.csv.xz"),
                                           ("ncu_libs", DATA / "ncu_libs" / "details.csv.xz")])
@pytest.mark.parametrize("group", ["kernel", "shape"])
def test_summary_against_the_details_page(tk, run, page, group):
    """Each kernel's (or kernel at a launch shape's) launches, durations (total and median),
    registers, achieved occupancy and SM throughput from what ncu --page details printed for
    its launches: durations and registers exactly (printed whole, in ns and registers), the
    percentages to the printed precision (a median of the printed values is within half a
    printed unit of ours). At a shape, every launch has its grid and block sizes."""
    gold = details_page(page)
    key = ["name", "nvtx_range"] + (["grid", "block"] if group == "shape" else [])
    groups = tk.query("ncu-kernels", run=run).group_by(key).agg(pl.col("kernel_id"))
    summary = {tuple(r[k] for k in key): r for r in tk.query("ncu-summary", run=run, group=group).iter_rows(named=True)}
    assert set(summary) == {tuple(k) for *k, _ in groups.iter_rows()}
    for *k, ids in groups.iter_rows():
        name, s = k[0], summary[tuple(k)]
        if group == "shape" and s["grid_size"] is not None:
            assert {int(_number(gold[(i, "launch__grid_size")])) for i in ids} == {s["grid_size"]}, name
            assert {int(_number(gold[(i, "launch__block_size")])) for i in ids} == {s["block_size"]}, name
        durations = [_number(gold[(i, "gpu__time_duration.sum")]) for i in ids]
        assert s["launches"] == len(ids) and s["total_ns"] == sum(durations)
        assert s["duration_ns"] == duckdb_median(durations)
        assert s["registers_per_thread"] == most_common([int(gold[(i, "launch__registers_per_thread")]) for i in ids])
        for col, metric in (("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active"),
                            ("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed")):
            printed = [gold[(i, metric)] for i in ids]
            half = 0.5 * 10 ** -min(_decimals(p) for p in printed)
            assert abs(s[col] - duckdb_median([_number(p) for p in printed])) <= half + 1e-9, (name, col)


def test_hstu_attention_kernel_against_the_details_page(tk):
    """The figures of the HSTU attention kernel (8 launches), written out."""
    s = tk.query("ncu-summary", run="hstu", kernel="hstu_cached").row(0, named=True)
    gold = details_page(DATA / "hstu_capture_ncu" / "ncu_details.csv.xz")
    ids = [11, 18, 25, 32, 39, 46, 53, 60]
    assert [gold[(i, "gpu__time_duration.sum")] for i in ids] == \
        ["319,872", "319,968", "320,000", "322,560", "320,608", "319,616", "319,424", "318,912"]
    assert (s["launches"], s["total_ns"], s["duration_ns"]) == (8, 2_560_960, 319_920)
    assert s["registers_per_thread"] == 255 == int(gold[(11, "launch__registers_per_thread")])
    assert round(s["achieved_occupancy_pct"], 2) == 12.47 and s["limiter"] == "registers, shared_mem"
    assert round(s["sm_throughput_pct"], 3) == 43.025


def test_a_kernel_without_floating_point_work_gets_its_dram_roof(tk):
    """A gather kernel does no FP work: no roofline %, but its DRAM bandwidth against the DRAM
    ceiling; for a memory-bound kernel that figure is its roof_pct."""
    s = tk.query("ncu-summary", run="hstu")
    no_fp = s.filter(pl.col("bound") == "no_fp_work")
    assert no_fp.height == 3 and no_fp["name"].str.contains("vectorized_gather_kernel").all()
    assert no_fp["roof_pct"].is_null().all() and no_fp["flops_per_s"].to_list() == [0.0] * 3
    assert (no_fp["dram_roof_pct"] > 0).all()
    assert (no_fp["dram_roof_pct"] - no_fp["dram_throughput_pct"]).abs().max() < 0.01  # (ncu's DRAM Throughput)
    memory = s.filter(pl.col("bound") == "memory")
    assert memory.height >= 2
    for r in memory.iter_rows(named=True):
        assert math.isclose(r["dram_roof_pct"], r["roof_pct"], rel_tol=1e-12)


def test_ranges_graphs_and_subsets_are_null_not_errors(tk):
    """A range has no occupancy; a graph, and --metrics alone, no roofline; each is a row."""
    rng = tk.query("ncu-summary", run="ncu_range/report")
    assert set(rng["name"]) == {"range"} and rng["achieved_occupancy_pct"].is_null().all()
    assert rng["sm_throughput_pct"].is_not_null().all() and rng["dram_roof_pct"].is_not_null().all()
    graph = tk.query("ncu-summary", run="ncu_graph/report").filter(pl.col("name") == "graph").row(0, named=True)
    assert graph["launches"] == 2 and graph["block_size"] is None and graph["roof_pct"] is None
    metrics = tk.query("ncu-summary", run="ncu_metrics")
    assert metrics["roof_pct"].is_null().all() and metrics["duration_ns"].is_not_null().all()
    with pytest.raises(QueryError, match=r"^roofline: run \d+ \(ncu_metrics\) has no roofline input"):
        tk.query("roofline", run="ncu_metrics")


def test_summary_of_an_nsys_run_is_an_error(tk):
    with pytest.raises(QueryError, match=r"^run \d+ \(nsys_run\) is an nsys run; ncu-summary needs an ncu run"):
        tk.query("ncu-summary", run="nsys_run")


# -- kernel= ------------------------------------------------------------------------------


@pytest.mark.parametrize("query", FILTERED)
@pytest.mark.parametrize(("run", "kernel"), [("hstu", "HSTU_cached"), ("hstu", "nvjet"), ("hstu", "Gather"),
                                             ("all", "saxpy"), ("ncu_graph", "SAXPY")])
def test_kernel_filter_keeps_the_rows_of_the_matching_names(tk, query, run, kernel):
    every = tk.query(query, run=run)
    only = tk.query(query, run=run, kernel=kernel)
    assert only.height > 0
    assert only.equals(every.filter(pl.col("name").str.to_lowercase().str.contains(kernel.lower(), literal=True)))


@pytest.mark.parametrize("query", FILTERED)
def test_kernel_filter_that_matches_nothing_is_a_one_line_error(tk, capsys, query):
    let_go(tk)  # (the CLI opens the store in this process)
    capsys.readouterr()
    assert cli_main(["--db", str(tk.path), "query", query, "--run", "hstu", "-p", "kernel=no such kernel"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tracekit: error: {query}: no kernel of the run has a name containing 'no such kernel' "
                   "(`tracekit query ncu-kernels` lists them)"]


@pytest.mark.parametrize("name", ["roofline", "occupancy"])
def test_chart_passes_the_kernel_filter_to_its_query(tk, name):
    data = [row for rows in spec_datasets(chart(tk, name, run="hstu", kernel="nvjet").to_dict()) for row in rows]
    names = {row["name"] for row in data if row.get("name")}
    assert names and all("nvjet" in n for n in names)


def _poly_planted(tmp_path, kernel_id: int, registers: int, block_limit: int, warps: int):
    """ncu_occupancy_b with one poly_kernel launch made one of ``registers`` per thread, the block
    limit and theoretical warps per SM (of 64) ncu would give it: the occupancy query's poly_kernel
    launches and ncu-summary's row of them."""
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(DATA / "ncu_occupancy_b" / "report.ncu-rep.xz", name="b")
        for metric, value in (("launch__registers_per_thread", registers),
                              ("launch__occupancy_limit_registers", block_limit),
                              ("sm__maximum_warps_per_active_cycle_pct", 100 * warps / 64),
                              ("sm__maximum_warps_avg_per_active_cycle", warps)):
            t.con.execute("UPDATE ncu_metrics SET value = ? WHERE kernel_id = ? AND metric = ?",
                          [value, kernel_id, metric])
        return (t.query("occupancy", run="b", kernel="poly"),
                t.query("ncu-summary", run="b", kernel="poly").row(0, named=True))


def test_the_what_if_of_launches_that_differ(tmp_path):
    """ncu_occupancy_b's two launches of poly_kernel (86 registers: 5 blocks, 31.25 %), the second
    made a 40-register launch (12 blocks, 75 %, as ncu would give it): the summary's next_needs is
    the first launch's (a tie: most launches' value, ties to the first), its next_occupancy_pct the
    median of the two launches' (37.5 % and 100 %)."""
    launches, s = _poly_planted(tmp_path, 3, registers=40, block_limit=12, warps=48)
    assert [(r["next_needs"], r["next_occupancy_pct"]) for r in launches.iter_rows(named=True)] == [
        ("registers 86 -> 80", 37.5), ("registers 40 -> 32", 100.0)]
    assert (s["next_needs"], s["next_occupancy_pct"]) == ("registers 86 -> 80", 68.75)
    assert s["varies"].startswith("registers_per_thread: 40 / 86")


def test_a_launch_that_needs_nothing_counts(tmp_path):
    """ncu_occupancy_b's first poly_kernel launch made one at 100 % (22 registers, as in
    ncu_occupancy_a; nothing to need), the second left at 86 registers (31.25 %, needs 80): the
    summary's limiter and next_needs are the first launch's (a tie), none and nothing; no
    next_occupancy_pct, as one launch has none."""
    launches, s = _poly_planted(tmp_path, 2, registers=22, block_limit=21, warps=64)
    assert launches["next_needs"].to_list() == [None, "registers 86 -> 80"]
    assert (s["limiter"], s["next_needs"], s["next_occupancy_pct"]) == ("none", None, None)
