"""ncu named queries against the committed real reports.

Goldens: occupancy and speed-of-light equal what ``ncu --page details`` printed for the
same report (to the printed precision); roofline is recomputed here, independently of
the SQL, from the raw metrics read with ncu_report and the formulas of Nsight Compute's
roofline section files; the bf16 GEMM's tensor FLOP count is 2*M*N*K.
"""

from __future__ import annotations

import csv
import lzma
import math
import re
from pathlib import Path

import polars as pl
import pytest
from conftest import NCU_MWA_METRICS, NCU_SOL_METRICS

import tracekit
from tracekit.errors import QueryError
from tracekit.registry import get_registry

DATA = Path(__file__).parent / "data"
GEMM_FLOP = 2 * 4096**3  # M = N = K = 4096
NCU_QUERIES = ["ncu-kernels", "occupancy", "roofline", "hierarchical-roofline", "speed-of-light", "ncu-rules",
               "warp-stalls", "memory-workload", "ncu-summary", "compute-workload"]

CWA_GOLDEN = {  # compute-workload column -> the metric of ncu's details page (Compute Workload Analysis,
    # Scheduler Statistics, Instruction Statistics)
    "executed_ipc_active": "sm__inst_executed.avg.per_cycle_active",
    "executed_ipc_elapsed": "sm__inst_executed.avg.per_cycle_elapsed",
    "issued_ipc_active": "sm__inst_issued.avg.per_cycle_active",
    "issue_slots_busy_pct": "sm__inst_issued.avg.pct_of_peak_sustained_elapsed",
    "sm_busy_pct": "sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed",
    "one_or_more_eligible_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "no_eligible_pct": "smsp__issue_inst0.avg.pct_of_peak_sustained_active",
    "issued_warps_per_scheduler": "smsp__issue_active.avg.per_cycle_active",
    "active_warps_per_scheduler": "smsp__warps_active.avg.per_cycle_active",
    "eligible_warps_per_scheduler": "smsp__warps_eligible.avg.per_cycle_active",
    "executed_instructions": "smsp__inst_executed.sum",
    "issued_instructions": "smsp__inst_issued.sum",
}

OCCUPANCY_GOLDEN = {  # query column -> metric ncu prints on the details page
    "block_size": "launch__block_size",
    "grid_size": "launch__grid_size",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_static_bytes": "launch__shared_mem_per_block_static",
    "shared_mem_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
    "shared_mem_driver_bytes": "launch__shared_mem_per_block_driver",
    "shared_mem_config_bytes": "launch__shared_mem_config_size",
    "block_limit_registers": "launch__occupancy_limit_registers",
    "block_limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "block_limit_warps": "launch__occupancy_limit_warps",
    "block_limit_blocks": "launch__occupancy_limit_blocks",
    "block_limit_barriers": "launch__occupancy_limit_barriers",
    "theoretical_warps_per_sm": "sm__maximum_warps_avg_per_active_cycle",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "achieved_warps_per_sm": "sm__warps_active.avg.per_cycle_active",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "waves_per_sm": "launch__waves_per_multiprocessor",
}


def unxz(src: Path, dst: Path) -> Path:
    dst.write_bytes(lzma.decompress(src.read_bytes()))
    return dst


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    """Runs: full (.ncu-rep), sections (.ncu-rep), full-csv (raw, base units)."""
    d = tmp_path_factory.mktemp("ncu_store")
    t = tracekit.open(d / "ncu.duckdb")
    t.ingest(DATA / "ncu_full" / "report.ncu-rep.xz", name="full")
    t.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="sections")
    t.ingest(unxz(DATA / "ncu_full" / "raw.csv.xz", d / "raw.csv"), name="full-csv")
    yield t
    t.close()


@pytest.fixture(scope="module")
def levels(tmp_path_factory):
    """ncu_levels as runs levels (.ncu-rep) and levels-csv (its raw page)."""
    d = tmp_path_factory.mktemp("ncu_levels")
    t = tracekit.open(d / "levels.duckdb")
    t.ingest(DATA / "ncu_levels" / "report.ncu-rep.xz", name="levels")
    t.ingest(unxz(DATA / "ncu_levels" / "raw.csv.xz", d / "raw.csv"), name="levels-csv")
    yield t
    t.close()


def details_golden(variant: str) -> dict[tuple[int, str], str]:
    """(launch ID, metric) -> value string as ncu --page details --print-units base printed it."""
    text = lzma.decompress((DATA / f"ncu_{variant}" / "details.csv.xz").read_bytes()).decode()
    rows = list(csv.reader(text.splitlines()))
    h = rows[0]
    i_id, i_name, i_val = h.index("ID"), h.index("Metric Name"), h.index("Metric Value")
    return {(int(r[i_id]), r[i_name]): r[i_val] for r in rows[1:] if r[i_name]}


def details_rules(variant: str) -> dict[tuple[int, str], str]:
    text = lzma.decompress((DATA / f"ncu_{variant}" / "details.csv.xz").read_bytes()).decode()
    rows = list(csv.reader(text.splitlines()))
    h = rows[0]
    return {
        (int(r[0]), r[h.index("Rule Name")]): r[h.index("Rule Description")]
        for r in rows[1:]
        if r[h.index("Rule Name")]
    }


def assert_as_printed(ours: float, printed: str, what: str) -> None:
    """ours, rounded to the decimals ncu printed, equals the printed value."""
    s = printed.replace(",", "")
    decimals = len(s.split(".")[1]) if "." in s else 0
    assert ours is not None, f"{what}: NULL, ncu printed {printed}"
    assert abs(ours - float(s)) <= 0.5 * 10**-decimals + 1e-9 * abs(float(s)), (
        f"{what}: {ours} vs printed {printed}"
    )


def as_printed_rows(df: pl.DataFrame, columns: dict[str, str], gold: dict, what: str) -> int:
    """Every column of ``columns`` (column -> details-page metric) of every launch of ``df`` is
    what the page ``gold`` printed, where it printed the metric; how many were checked."""
    checked = 0
    for row in df.iter_rows(named=True):
        for col, metric in columns.items():
            printed = gold.get((row["kernel_id"], metric))
            if printed is not None:
                assert_as_printed(row[col], printed, f"{what} ID {row['kernel_id']} {col}")
                checked += 1
    return checked


def test_headers_declare_exactly_the_result_columns(tk):
    reg = get_registry()
    for q in NCU_QUERIES:
        query = reg.get(q)
        assert query.source == "ncu"
        assert {"run", "limit"} <= set(query.params)
        df = tk.query(q, run="all")
        assert df.columns == list(query.columns), q
        assert {"kernel_id", "name"} <= set(df.columns)


@pytest.mark.parametrize(
    "run,variant", [("full", "full"), ("full-csv", "full"), ("sections", "sections")]
)
def test_occupancy_equals_details_page(tk, run, variant):
    gold = details_golden(variant)
    df = tk.query("occupancy", run=run)
    assert df.height == 4
    assert as_printed_rows(df, OCCUPANCY_GOLDEN, gold, run) >= 4 * 15
    assert df["missing_metrics"].is_null().all()
    lim = dict(zip(df["kernel_id"], df["limiter"], strict=True))
    # ncu's TheoreticalOccupancy rule text names the same limiters
    rules = details_rules(variant)
    assert (
        "limited by the number of required registers, and the required amount of shared memory"
        in rules[(0, "TheoreticalOccupancy")]
    )
    assert lim[0] == "registers, shared_mem"
    assert "limited by the number of required registers." in rules[(1, "TheoreticalOccupancy")]
    assert lim[1] == "registers"


@pytest.mark.parametrize("run", ["full", "full-csv"])
def test_speed_of_light_equals_details_page(tk, run):
    gold = details_golden("full")
    df = tk.query("speed-of-light", run=run)
    assert df["kernel_id"].to_list() == [0, 1, 2, 3]
    for row in df.iter_rows(named=True):
        for col, metric in NCU_SOL_METRICS.items():
            assert_as_printed(
                row[col], gold[(row["kernel_id"], metric)], f"{run} ID {row['kernel_id']} {col}"
            )
        assert row["missing_metrics"] is None


def test_speed_of_light_of_a_report_without_its_section_is_an_error(tk):
    """ncu_sections (LaunchStats, Occupancy, SpeedOfLight_RooflineChart) has each launch's
    duration and the DRAM frequency, no metric of the Speed Of Light section: an error, not
    rows of blanks."""
    sections = tk.con.execute("SELECT duration_ns, dram_frequency_hz, sm_throughput_pct FROM ncu_kernel_metrics "
                              "JOIN runs USING (run_id) WHERE runs.name = 'sections'").fetchall()
    assert sections and all(d is not None and f is not None and s is None for d, f, s in sections)
    with pytest.raises(QueryError, match=r"^speed-of-light: run \d+ \(sections\) has no metric of the GPU Speed Of "
                                         r"Light Throughput section; profile with ncu --section SpeedOfLight"):
        tk.query("speed-of-light", run="sections")


#: memory-workload column -> metric of the Memory Workload Analysis section (details page)
MWA_GOLDEN = {
    **NCU_MWA_METRICS,
    "l2_compression_success_pct": "lrc__average_ilc_input_sector_success_rate.pct",
    "l2_compression_ratio_pct": "lrc__average_ilc_output_sector_compression_achieved_rate.pct",
    "l2_compression_input_sectors": "lrc__ilc_input_sectors.sum",
    "l2_persisting_bytes": "launch__persisting_l2_cache_size",
    "local_spilling_requests": "derived__local_spilling_requests",
    "local_spilling_overhead_pct": "derived__local_spilling_requests_pct",
}


@pytest.mark.parametrize("run", ["full", "full-csv"])
def test_memory_workload_equals_details_page(tk, run):
    gold = details_golden("full")
    raw = {int(r["ID"]): r for r in csv.DictReader(lzma.decompress(
        (DATA / "ncu_full" / "raw.csv.xz").read_bytes()).decode().splitlines()) if r["ID"].strip()}
    df = tk.query("memory-workload", run=run)
    assert df["kernel_id"].to_list() == [0, 1, 2, 3]
    for row in df.iter_rows(named=True):
        k = row["kernel_id"]
        for col, metric in MWA_GOLDEN.items():
            assert_as_printed(row[col], gold[(k, metric)], f"{run} ID {k} {col}")
        for col, metric in (("dram_read_bytes", "dram__bytes_read.sum"), ("dram_write_bytes", "dram__bytes_write.sum"),
                            ("duration_ns", "gpu__time_duration.sum")):
            assert_as_printed(row[col], raw[k][metric], f"{run} ID {k} {col}")  # (raw: base units)
        assert row["missing_metrics"] is None
    # the elementwise kernel streams 180 MB at 4 TB/s; the GEMM reuses its tiles in L2
    assert df["dram_bytes_per_s"][1] > 3.5e12 and df["l2_hit_rate_pct"][0] > 60


def test_memory_workload_says_what_a_sections_report_lacks(tk):
    df = tk.query("memory-workload", run="sections")
    assert df["duration_ns"].is_not_null().all() and df["l2_hit_rate_pct"].is_null().all()
    assert all("lts__t_sector_hit_rate.pct" in m and "gpu__time_duration" not in m for m in df["missing_metrics"])
    assert tk.query("memory-workload", run="full", kernel="softmax")["kernel_id"].to_list() == [2]


# -- roofline, recomputed from the report with ncu_report --------------------


def recompute(report: Path) -> dict[int, dict]:
    """Section formulas applied to the raw metrics of every launch, independently of the SQL."""
    import ncu_report

    ctx = ncu_report.load_report(str(report))
    out = {}
    kid = 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a_i in range(rng.num_actions()):
            a = rng.action_by_idx(a_i)

            def v(name, _a=a):
                m = _a.metric_by_name(name)
                return m.value() if m is not None and m.has_value() else None

            smsp_hz = v("smsp__cycles_elapsed.avg.per_second")
            sm_hz = v("sm__cycles_elapsed.avg.per_second")
            pc = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
            pk = "sm__sass_thread_inst_executed_op_{}_pred_on.sum.peak_sustained"
            res = {
                # SpeedOfLight_RooflineChart / HierarchicalSingle: fadd + fmul + 2 ffma at the smsp clock
                "fp32": (v(pc.format("fadd")) + v(pc.format("fmul")) + 2 * v(pc.format("ffma")))
                * smsp_hz,
                "fp64": (v(pc.format("dadd")) + v(pc.format("dmul")) + 2 * v(pc.format("dfma")))
                * smsp_hz,
                "peak_fp32": 2 * v(pk.format("ffma")) * sm_hz,
                "peak_fp64": 2 * v(pk.format("dfma")) * sm_hz,
                "dram": v("dram__bytes.sum.per_second"),
                "peak_dram": v("dram__bytes.sum.peak_sustained")
                * v("dram__cycles_elapsed.avg.per_second"),
            }
            if v(pc.format("hfma")) is not None:  # HierarchicalHalf: 2 hadd + 2 hmul + 4 hfma
                res["fp16"] = (
                    2 * v(pc.format("hadd")) + 2 * v(pc.format("hmul")) + 4 * v(pc.format("hfma"))
                ) * smsp_hz
                res["peak_fp16"] = 4 * v(pk.format("hfma")) * sm_hz
                # HierarchicalTensor (GH100): per op path, .per_cycle_elapsed x sm clock
                t = "sm__ops_path_tensor_{}.sum.{}"
                res["bf16"] = v(t.format("src_bf16_dst_fp32", "per_cycle_elapsed")) * sm_hz
                res["peak_bf16_dense"] = (
                    v(t.format("op_hgmma_src_bf16_dst_fp32_sparsity_off", "peak_sustained")) * sm_hz
                )
                res["peak_bf16_generic"] = (
                    v(t.format("src_bf16_dst_fp32", "peak_sustained")) * sm_hz
                )
                res["tensor"] = sum(
                    v(t.format(p, "per_cycle_elapsed")) * sm_hz
                    for p in (
                        "src_bf16_dst_fp32",
                        "src_fp16",
                        "src_tf32_dst_fp32",
                        "src_fp8_sparsity_off",
                        "src_fp8_sparsity_on",
                        "src_fp64",
                    )
                )
                res["tensor_flop"] = v(t.format("src_bf16_dst_fp32", "")[:-1])
                res["l2"] = 32 * v("lts__lts2xbar_cycles_active.sum.per_second")
                res["peak_l2"] = (
                    32
                    * v("lts__lts2xbar_cycles_active.sum.peak_sustained")
                    * v("lts__cycles_elapsed.avg.per_second")
                )
                res["l1"] = 128 * v("l1tex__lsu_writeback_active_mem_lgds.sum.per_second")
                res["peak_l1"] = (
                    128
                    * v("l1tex__lsu_writeback_active_mem_lgds.sum.peak_sustained")
                    * v("l1tex__cycles_elapsed.avg.per_second")
                )
                res["flops"] = res["fp32"] + res["fp64"] + res["fp16"] + res["tensor"]
            out[kid] = res
            kid += 1
    return out


@pytest.fixture(scope="module")
def recomputed(tmp_path_factory):
    d = tmp_path_factory.mktemp("ncu_rep")
    return {
        v: recompute(unxz(DATA / f"ncu_{v}" / "report.ncu-rep.xz", d / f"{v}.ncu-rep"))
        for v in ("full", "sections", "levels")
    }


def test_roofline_equals_section_formulas(tk, recomputed):
    df = tk.query("roofline", run="full")
    assert df["missing_metrics"].is_null().all()
    for row in df.iter_rows(named=True):
        ref = recomputed["full"][row["kernel_id"]]
        approx = pytest.approx
        assert row["fp32_flops_per_s"] == approx(ref["fp32"], rel=1e-12)
        assert row["fp64_flops_per_s"] == approx(ref["fp64"], rel=1e-12, abs=1e-6)
        assert row["fp16_flops_per_s"] == approx(ref["fp16"], rel=1e-12, abs=1e-6)
        assert row["tensor_flops_per_s"] == approx(ref["tensor"], rel=1e-12, abs=1e-6)
        assert row["flops_per_s"] == approx(ref["flops"], rel=1e-12)
        assert row["peak_fp32_flops_per_s"] == approx(ref["peak_fp32"], rel=1e-12)
        assert row["peak_fp64_flops_per_s"] == approx(ref["peak_fp64"], rel=1e-12)
        assert row["peak_fp16_flops_per_s"] == approx(ref["peak_fp16"], rel=1e-12)
        assert row["dram_bytes_per_s"] == approx(ref["dram"], rel=1e-12)
        assert row["peak_dram_bytes_per_s"] == approx(ref["peak_dram"], rel=1e-12)
        assert row["l2_bytes_per_s"] == approx(ref["l2"], rel=1e-12)
        assert row["peak_l2_bytes_per_s"] == approx(ref["peak_l2"], rel=1e-12)
        assert row["l1_bytes_per_s"] == approx(ref["l1"], rel=1e-12)
        assert row["peak_l1_bytes_per_s"] == approx(ref["peak_l1"], rel=1e-12)
        assert row["ai_dram"] == approx(ref["flops"] / ref["dram"], rel=1e-12)
        assert row["ai_l2"] == approx(ref["flops"] / ref["l2"], rel=1e-12)
        assert row["ai_l1"] == approx(ref["flops"] / ref["l1"], rel=1e-12)
        # the bf16 tensor ceiling is the dense wgmma path, not the generic (sparse) one
        assert row["peak_tensor_bf16_flops_per_s"] == approx(ref["peak_bf16_dense"], rel=1e-12)
        assert ref["peak_bf16_generic"] == approx(2 * ref["peak_bf16_dense"], rel=1e-12)
        # precision / ceiling / attainable / bound from the recomputed numbers
        peaks = {
            "fp32": ref["peak_fp32"],
            "fp64": ref["peak_fp64"],
            "fp16": ref["peak_fp16"],
            "tensor_bf16": ref["peak_bf16_dense"],
        }
        achieved = {
            "fp32": ref["fp32"],
            "fp64": ref["fp64"],
            "fp16": ref["fp16"],
            "tensor_bf16": ref["bf16"],
        }
        prec = max(achieved, key=achieved.get)
        assert row["precision"] == prec
        ai = ref["flops"] / ref["dram"]
        attainable = min(peaks[prec], ai * ref["peak_dram"])
        assert row["attainable_flops_per_s"] == approx(attainable, rel=1e-12)
        assert row["roof_pct"] == approx(100 * ref["flops"] / attainable, rel=1e-12)
        assert row["bound"] == ("memory" if ai < peaks[prec] / ref["peak_dram"] else "compute")


def test_roofline_gemm_and_kernel_classes(tk):
    df = tk.query("roofline", run="full")
    gemm = df.row(0, named=True)
    assert gemm["tensor_flop"] == GEMM_FLOP  # exact counter, 2*M*N*K
    assert gemm["precision"] == "tensor_bf16" and gemm["bound"] == "compute"
    assert gemm["tensor_bf16_flops_per_s"] == pytest.approx(
        GEMM_FLOP / (gemm["duration_ns"] * 1e-9), rel=2e-3
    )
    assert 80 < gemm["roof_pct"] <= 100
    assert df["bound"].to_list() == ["compute", "memory", "memory", "memory"]
    assert df["precision"].to_list()[1:] == ["fp32"] * 3
    assert df["kernel_class"].to_list() == ["gemm", "elementwise", "softmax", "reduction"]
    assert df["nvtx_range"].to_list() == [
        "gemm_bf16",
        "elementwise_fp32",
        "triton_softmax",
        "reduction",
    ]
    # clocks differ per kernel (the GEMM runs at a lower SM clock than the others)
    assert gemm["sm_clock_hz"] < 0.9 * df["sm_clock_hz"][1]


def test_roofline_sections_report_rates_and_missing(tk, recomputed):
    df = tk.query("roofline", run="sections")
    for row in df.iter_rows(named=True):
        ref = recomputed["sections"][row["kernel_id"]]
        assert row["fp32_flops_per_s"] == pytest.approx(ref["fp32"], rel=1e-12)
        assert row["peak_fp32_flops_per_s"] == pytest.approx(ref["peak_fp32"], rel=1e-12)
        assert row["dram_bytes_per_s"] == pytest.approx(ref["dram"], rel=1e-12)
        # no tensor / half / L2 / L1 counters: no made-up numbers, and the query says so
        assert (
            row["tensor_flops_per_s"] is None and row["bound"] is None and row["roof_pct"] is None
        )
        assert "sm__ops_path_tensor_" in row["missing_metrics"]
        assert "lts__lts2xbar_cycles_active" in row["missing_metrics"]
        assert "hfma" in row["missing_metrics"]
        assert "fadd" not in row["missing_metrics"]


def test_roofline_from_csv_matches_report(tk):
    rep = tk.query("roofline", run="full")
    csv_ = tk.query("roofline", run="full-csv")
    assert csv_["missing_metrics"].is_null().all()
    assert csv_["precision"].to_list() == rep["precision"].to_list()
    assert csv_["bound"].to_list() == rep["bound"].to_list()
    assert csv_["tensor_flop"][0] == GEMM_FLOP
    for col in ("flops_per_s", "ai_dram", "roof_pct"):
        for a, b in zip(rep[col], csv_[col], strict=True):
            assert b == pytest.approx(a, rel=2e-3), col  # the CSV prints rates to 2 decimals


def _hierarchical(ref: dict, prec: str) -> dict:
    """ncu's hierarchical roofline of one precision for a launch, from the section formulas
    (``recompute``): the precision's FLOP/s, its intensity at each level, and each level's roof
    at that intensity, min(peak FLOP/s, AI x peak bandwidth)."""
    key = {"tensor_bf16": "bf16"}.get(prec, prec)
    f, peak = ref[key], ref["peak_bf16_dense" if prec == "tensor_bf16" else f"peak_{prec}"]
    ai = {lv: f / ref[lv] for lv in ("l1", "l2", "dram")}
    roof = {lv: min(peak, ai[lv] * ref[f"peak_{lv}"]) for lv in ai}
    low = min(roof, key=roof.get)
    return {"flops": f, "peak": peak, "ai": ai, "pct": {lv: 100 * f / roof[lv] for lv in roof},
            "limiter": "compute" if roof[low] >= peak else {"l1": "L1", "l2": "L2", "dram": "DRAM"}[low],
            "roof_pct": 100 * f / roof[low]}


def test_hierarchical_roofline_equals_section_formulas(tk, recomputed):
    """Each launch's point at L1, L2 and DRAM, as ncu's Hierarchical{Single,Tensor}RooflineChart
    computes them from the raw metrics, in its dominant precision (roofline's) and in the
    precision asked; the level whose roof is lowest is its limiter."""
    approx = pytest.approx
    roof = tk.query("roofline", run="full")
    own = tk.query("hierarchical-roofline", run="full")
    assert own["kernel_id"].to_list() == roof["kernel_id"].to_list()
    assert own["precision"].to_list() == roof["precision"].to_list() == ["tensor_bf16", "fp32", "fp32", "fp32"]
    fp32 = tk.query("hierarchical-roofline", run="full", precision="FP32")  # (case-insensitive)
    assert fp32["kernel_id"].to_list() == [1, 2, 3]  # the GEMM does no FP32 work: not on FP32's chart
    for df in (own, fp32):
        assert df["missing_metrics"].is_null().all()
        for row in df.iter_rows(named=True):
            ref = _hierarchical(recomputed["full"][row["kernel_id"]], row["precision"])
            assert row["flops_per_s"] == approx(ref["flops"], rel=1e-12)
            assert row["peak_flops_per_s"] == approx(ref["peak"], rel=1e-12)
            for lv in ("l1", "l2", "dram"):
                assert row[f"ai_{lv}"] == approx(ref["ai"][lv], rel=1e-12), lv
                assert row[f"{lv}_roof_pct"] == approx(ref["pct"][lv], rel=1e-12), lv
            assert row["limiter"] == ref["limiter"] and row["roof_pct"] == approx(ref["roof_pct"], rel=1e-12)
    # the GEMM is right of every ridge; the FP32 kernels are at the DRAM roof before any other
    assert own["limiter"].to_list() == ["compute", "DRAM", "DRAM", "DRAM"]
    # the reduction does FP16 work too: its FP32 point leaves it out, roofline's FLOP/s counts it
    reduce_ = recomputed["full"][3]
    assert reduce_["fp16"] > 0 and roof["flops_per_s"][3] > own["flops_per_s"][3] == approx(reduce_["fp32"])
    # the DRAM point of a launch whose dominant precision is all its FP work is roofline's
    assert own["ai_dram"][1] == approx(roof["ai_dram"][1]) and own["dram_roof_pct"][1] == approx(roof["roof_pct"][1])


def test_hierarchical_roofline_names_the_level_each_kernel_was_built_to_be_bound_by(levels, recomputed):
    """ncu_levels (programs/ncu_levels.py, an H100): four kernels built so that their loads are
    served by DRAM, by L2 (a 4 MB array read 16 times, spread over it), by L1 (an 8 KB window two
    blocks share, read 64 times) and an FP64 FMA chain. Each is limited by the level it was built
    for, its numbers those of ncu's section formulas from the raw metrics; the DRAM roofline calls
    the first three memory-bound alike, and places the L1-bound one far below its DRAM roof. The
    raw CSV page gives the same levels."""
    approx = pytest.approx
    own = levels.query("hierarchical-roofline", run="levels")
    assert list(zip(own["name"], own["nvtx_range"], own["precision"], own["limiter"], strict=True)) == [
        ("dram_kernel", "DRAM", "fp32", "DRAM"), ("l2_kernel", "L2", "fp32", "L2"),
        ("l1_kernel", "L1", "fp32", "L1"), ("compute_kernel", "compute", "fp64", "compute")]
    assert own["missing_metrics"].is_null().all()
    for row in own.iter_rows(named=True):
        ref = _hierarchical(recomputed["levels"][row["kernel_id"]], row["precision"])
        assert row["flops_per_s"] == approx(ref["flops"], rel=1e-12)
        for lv in ("l1", "l2", "dram"):
            assert row[f"ai_{lv}"] == approx(ref["ai"][lv], rel=1e-12), lv
            assert row[f"{lv}_roof_pct"] == approx(ref["pct"][lv], rel=1e-12), lv
        assert row["limiter"] == ref["limiter"] and row["roof_pct"] == approx(ref["roof_pct"], rel=1e-12)
    # the L1 kernel's data stays in L1: its intensity at L2 and DRAM is 30 times its L1 one
    l1 = own.row(2, named=True)
    assert l1["ai_l2"] > 30 * l1["ai_l1"] and l1["ai_dram"] > 30 * l1["ai_l1"]
    roof = levels.query("roofline", run="levels")
    assert roof["bound"].to_list() == ["memory", "memory", "memory", "compute"]
    assert roof["roof_pct"][2] < 10 < l1["roof_pct"]  # (far below the DRAM roof, at a quarter of L1's)
    assert levels.query("hierarchical-roofline", run="levels-csv")["limiter"].to_list() == own["limiter"].to_list()


def test_hierarchical_roofline_of_a_report_without_some_counters(tk, recomputed):
    """ncu_sections has the FP32/FP64 and DRAM counters only: its FP32 points have a DRAM
    intensity and no L1/L2 one, and no limiter (not one judged on the DRAM roof alone); the
    counters named missing are those of the levels and of FP32, not of other precisions."""
    df = tk.query("hierarchical-roofline", run="sections", precision="fp32")
    assert df.height == 3
    for row in df.iter_rows(named=True):
        ref = recomputed["sections"][row["kernel_id"]]
        assert row["ai_dram"] == pytest.approx(ref["fp32"] / ref["dram"], rel=1e-12)
        assert row["ai_l1"] is None and row["ai_l2"] is None and row["limiter"] is None and row["roof_pct"] is None
        assert row["dram_roof_pct"] == pytest.approx(
            100 * ref["fp32"] / min(ref["peak_fp32"], ref["fp32"] / ref["dram"] * ref["peak_dram"]), rel=1e-12)
        missing = row["missing_metrics"]
        assert "lts__lts2xbar_cycles_active" in missing and "l1tex__lsu_writeback" in missing
        assert "hfma" not in missing and "sm__ops_path_tensor" not in missing
    # roofline names no dominant precision without every precision's counters: the launches'
    # is the one of most FLOP/s of those the report has, FP32's points, the missing counters said
    own = tk.query("hierarchical-roofline", run="sections")
    assert tk.query("roofline", run="sections")["precision"].is_null().all()
    assert own["precision"].to_list() == [None, "fp32", "fp32", "fp32"]  # (the GEMM: no FP32/FP64 work)
    assert own.filter(pl.col("kernel_id") > 0).select("flops_per_s", "ai_dram").equals(df.select(
        "flops_per_s", "ai_dram")) and own["flops_per_s"][0] is None and own["limiter"].is_null().all()
    assert all("sm__ops_path_tensor_" in m for m in own["missing_metrics"])
    # a precision the report has no counter of: said, with the section that collects them
    with pytest.raises(QueryError, match=r"^hierarchical-roofline: run \d+ \(sections\) has no tensor_bf16 FLOP "
                                         r"counters \(sm__ops_path_tensor_\*\); profile with ncu --section "
                                         r"SpeedOfLight_HierarchicalTensorRooflineChart \(or --set full\)$"):
        tk.query("hierarchical-roofline", run="sections", precision="tensor_bf16")
    with pytest.raises(QueryError, match=r"has no fp16 FLOP counters \(smsp__sass_thread_inst_executed_op_\{hadd,"
                                         r"hmul,hfma\}_pred_on.sum.per_cycle_elapsed\); profile with ncu --section "
                                         r"SpeedOfLight_HierarchicalHalfRooflineChart"):
        tk.query("hierarchical-roofline", run="sections", precision="fp16")
    # over every run: a run without the counters keeps its launches as blank rows, others answer
    both = tk.query("hierarchical-roofline", run="all", precision="tensor_bf16")
    assert both.filter(pl.col("flops_per_s").is_not_null())["kernel_id"].to_list() == [0, 0]  # (full, full-csv)
    blank = both.filter(pl.col("flops_per_s").is_null())
    assert blank.height == 4 and all("sm__ops_path_tensor_" in m for m in blank["missing_metrics"])
    with pytest.raises(QueryError, match=r"no launch of run \d+ \(full\) named like 'soft' does fp64 work \(the "
                                         r"precisions they do work in: fp32\)"):
        tk.query("hierarchical-roofline", run="full", kernel="soft", precision="fp64")
    with pytest.raises(QueryError, match="precision=int8: choose fp64, fp32"):
        tk.query("hierarchical-roofline", run="full", precision="int8")


def test_the_level_roof_and_limiter_macros(tk):
    """The store's macros that hierarchical-roofline and diff's ncu scope share: a level's roof
    is NULL where any input is (not the ceiling least() would give by skipping a NULL), the
    ceiling where the level moved no byte; the limiter is the lowest roof's level, ties to the
    outer one, compute where every roof is the ceiling, NULL where a roof is."""
    row = tk.sql(
        "SELECT ncu_level_roof(NULL, 100.0, 1.0, 10.0) AS no_flops, ncu_level_roof(50.0, NULL, 1.0, 10.0) AS no_peak, "
        "ncu_level_roof(50.0, 100.0, NULL, 10.0) AS no_bytes, ncu_level_roof(50.0, 100.0, 0.0, 10.0) AS no_byte_moved, "
        "ncu_level_roof(50.0, 100.0, 10.0, 10.0) AS memory, ncu_level_roof(50.0, 100.0, 1.0, 10.0) AS compute, "
        "ncu_level_limiter(50.0, 100.0, 80.0, 60.0, 60.0) AS tie, ncu_level_limiter(50.0, 100.0, 70.0, 60.0, 90.0) AS l2, "
        "ncu_level_limiter(50.0, 100.0, 100.0, 100.0, 100.0) AS ceiling, ncu_level_limiter(0.0, 100.0, 0.0, 0.0, 0.0) "
        "AS none, ncu_level_limiter(50.0, 100.0, 40.0, NULL, 90.0) AS unknown, "
        "ncu_in_precision('tensor_bf16', NULL, 1, 2, 3, 4, 5, 6, 7, 8) AS no_tensor_counters, "
        "ncu_in_precision('tensor_fp8', 1, 1, 2, 3, 4, 5, 6, 7, 8) AS fp8").row(0, named=True)
    assert row == {"no_flops": None, "no_peak": None, "no_bytes": None, "no_byte_moved": 100.0, "memory": 50.0,
                   "compute": 100.0, "tie": "DRAM", "l2": "L2", "ceiling": "compute", "none": "no_fp_work",
                   "unknown": None, "no_tensor_counters": None, "fp8": 7}


def test_runs_filter_and_span(tk):
    assert tk.query("ncu-kernels")["run_id"].unique().to_list() == [3]  # latest ncu run
    both = tk.query("roofline", run="all")
    assert both.height == 12 and both["run_id"].unique().sort().to_list() == [1, 2, 3]
    assert tk.query("occupancy", run="sections")["run_id"].unique().to_list() == [2]
    assert tk.query("speed-of-light", run="1", limit=2)["kernel_id"].to_list() == [0, 1]
    k = tk.query("ncu-kernels", run="full")
    assert k["nvtx_path"].to_list()[0] == "ncu/gemm_bf16"
    assert k["grid"].to_list()[0] == "(2, 66, 1)" and k["block"].to_list()[0] == "(384, 1, 1)"


def test_partial_csv_reports_missing_metrics(tk, tmp_path):
    text = lzma.decompress((DATA / "ncu_full" / "raw.csv.xz").read_bytes()).decode()
    rows = list(csv.reader(text.splitlines()))
    drop = {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "launch__occupancy_limit_warps"}
    keep = [i for i, h in enumerate(rows[0]) if h not in drop]
    rows = [[r[i] for i in keep] for r in rows]
    rows[2][rows[0].index("sm__warps_active.avg.pct_of_peak_sustained_active")] = "n/a"
    p = tmp_path / "partial.csv"
    with open(p, "w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)
    t = tracekit.open(tmp_path / "p.duckdb")
    t.ingest(p, name="partial")
    sol = t.query("speed-of-light")
    assert sol["sm_throughput_pct"].is_null().all()
    assert all(
        m == "sm__throughput.avg.pct_of_peak_sustained_elapsed" for m in sol["missing_metrics"]
    )
    occ = t.query("occupancy")
    assert (
        occ["missing_metrics"][0]
        == "launch__occupancy_limit_warps, sm__warps_active.avg.pct_of_peak_sustained_active"
    )
    assert occ["achieved_occupancy_pct"][0] is None and occ["achieved_occupancy_pct"][1] is not None
    # a limit the report lacks does not bind: the smallest of the others (missing_metrics says
    # which is absent); launches 2 and 3 reach 100 % theoretical occupancy, where none binds
    assert occ["limiter"].to_list() == ["registers, shared_mem", "registers", "none", "none"]
    t.close()


def test_occupancy_limiter_of_a_report_without_the_barrier_limit(tk, tmp_path):
    """Reports older than launch__occupancy_limit_barriers (public ncu 2022.4 A40, 2020.3
    A100 and V100 reports) have the other four limits: the limiter is the smallest of those,
    here the same as with the barrier limit (it binds no launch of ncu_full)."""
    text = lzma.decompress((DATA / "ncu_full" / "raw.csv.xz").read_bytes()).decode()
    rows = list(csv.reader(text.splitlines()))
    keep = [i for i, h in enumerate(rows[0]) if h != "launch__occupancy_limit_barriers"]
    p = tmp_path / "no_barriers.csv"
    with open(p, "w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows([[r[i] for i in keep] for r in rows])
    with tracekit.open(tmp_path / "b.duckdb") as t:
        t.ingest(p, name="no-barriers")
        occ = t.query("occupancy")
    full = tk.query("occupancy", run="full")
    assert occ["limiter"].to_list() == full["limiter"].to_list() == ["registers, shared_mem", "registers", "none", "none"]
    assert occ["block_limit_barriers"].is_null().all()
    assert occ["missing_metrics"].to_list() == ["launch__occupancy_limit_barriers"] * 4


def _reports_read_here(monkeypatch):
    """Reports read in this process (ncu_rep reads each in a child interpreter), so that a
    patch of NVIDIA's ncu_report reaches them."""
    from tracekit.ingest import ncu_rep

    monkeypatch.setattr(ncu_rep, "read_report",
                        lambda path, source_only=False: ncu_rep._read_here(Path(path), source_only))


def test_a_block_limit_ncu_could_not_compute(monkeypatch, tmp_path):
    """A public Jetson Xavier report (ncu 2020.1 or older) has launch__occupancy_limit_shared_mem
    NaN in every launch (no shared memory used: ncu divided 0 by 0); stored as a number it broke
    the occupancy query and the report's occupancy section. Here ncu_report gives that NaN for
    ncu_sections' launches: the limit is missing (NULL, its text "nan") and the limiter is the
    smallest of the others, in the query and in tracekit report."""
    import ncu_report

    from tracekit import report

    value = ncu_report.IMetric.value

    def nan_shared_mem_limit(self, idx=None):
        if self.name() == "launch__occupancy_limit_shared_mem":
            return float("nan")
        return value(self, idx)

    _reports_read_here(monkeypatch)
    monkeypatch.setattr(ncu_report.IMetric, "value", nan_shared_mem_limit)
    with tracekit.open(tmp_path / "n.duckdb") as t:
        t.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="nan")
        stored = t.sql("SELECT value, text_value FROM ncu_metrics WHERE metric = 'launch__occupancy_limit_shared_mem'")
        assert stored.rows() == [(None, "nan")] * 4
        occ = t.query("occupancy")
        assert occ["block_limit_shared_mem"].is_null().all()
        assert all("launch__occupancy_limit_shared_mem" in m for m in occ["missing_metrics"])
        limits = occ.select("block_limit_blocks", "block_limit_registers", "block_limit_warps", "block_limit_barriers")
        assert occ["limiter"].null_count() == 0
        assert occ["limiter"][0] == "registers"  # (registers and shared memory tie where ncu computed the latter)
        for row, limiter, pct in zip(limits.iter_rows(named=True), occ["limiter"], occ["theoretical_occupancy_pct"],
                                     strict=True):
            least = min(row.values())
            assert limiter.split(", ") == (["none"] if pct == 100 else
                                           [n.removeprefix("block_limit_") for n, v in row.items() if v == least])
        html = report.write_report(t, tmp_path / "nan.html", run="nan").read_text()
    section = re.search(r'<section id="occupancy".*?</section>', html, re.S).group(0)
    assert "<table" in section and 'class="note"' not in section and "can't be cast" not in html


def test_a_report_without_per_dimension_launch_metrics(tk, monkeypatch, tmp_path):
    """A public V100 report (ncu 2020.1 or older) has launch__grid_size and launch__block_size
    but no launch__{grid,block}_dim_{x,y,z} and no launch__device_id (ncu_full without them
    here): ncu-kernels leaves grid and block NULL (no dimensions invented), takes the device
    from the device's own attribute (device__attribute_device_index) and gives the totals,
    which are those of the dimensions where a report has both."""
    import ncu_report

    gone = {f"launch__{k}_dim_{d}" for k in ("grid", "block") for d in "xyz"} | {"launch__device_id"}
    names, by_name = ncu_report.IAction.metric_names, ncu_report.IAction.metric_by_name
    _reports_read_here(monkeypatch)
    monkeypatch.setattr(ncu_report.IAction, "metric_names", lambda self: tuple(n for n in names(self) if n not in gone))
    monkeypatch.setattr(ncu_report.IAction, "metric_by_name", lambda self, n: None if n in gone else by_name(self, n))
    with tracekit.open(tmp_path / "d.duckdb") as t:
        t.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="no-dims")
        k = t.query("ncu-kernels")
    assert k["grid"].is_null().all() and k["block"].is_null().all() and k["device_id"].to_list() == [0] * 4
    assert k["grid_size"].to_list() == [132, 16384, 4096, 528] and k["block_size"].to_list() == [384, 128, 128, 512]
    both = tk.query("ncu-kernels", run="sections")
    assert both.select("grid_size", "block_size").equals(k.select("grid_size", "block_size"))
    for row in both.iter_rows(named=True):
        grid, block = ([int(x) for x in re.findall(r"\d+", row[c])] for c in ("grid", "block"))
        assert (row["grid_size"], row["block_size"]) == (math.prod(grid), math.prod(block))


def test_queries_span_every_run(tk):
    """Every ncu query answers over all the store's ncu runs at once (`--run all`). (How fast:
    benchmarks, not a timed test: a wall-clock bound failed on a loaded 2-core box.)"""
    for q in NCU_QUERIES:
        assert not tk.query(q, run="all", limit=0).is_empty(), q


def test_pl_types(tk):
    df = tk.query("occupancy", run="full")
    assert (
        df.schema["registers_per_thread"] == pl.Int64
        and df.schema["achieved_occupancy_pct"] == pl.Float64
    )


# -- every full-set report against its own details page ----------------------

#: reports taken with --set full (each launch's details page prints every section the
#: queries twin); ncu_libs holds library and compiler kernels: cuBLASLt bf16 with a bias
#: epilogue, an FP8 _scaled_mm, SDPA flash attention, an Inductor Triton kernel, index_add;
#: ncu_clocks_zeros two cuBLAS GEMMs and a DRAM-bound add; ncu_shapes_int a kernel of int32 work only
DETAILS_FIXTURES = ["ncu_full", "ncu_libs", "ncu_diff_a", "ncu_source", "ncu_multiproc", "ncu_shapes_a", "ncu_shapes_a_again",
                    "ncu_shapes_a_again2", "ncu_shapes_slow", "ncu_shapes_int", "ncu_clocks_zeros"]
DETAILS_SOURCES = {"report": "report.ncu-rep.xz", "raw": "raw.csv.xz", "details": "details.csv.xz"}


def details_page(fixture: str) -> dict[tuple[int, str], str]:
    text = lzma.decompress((DATA / fixture / "details.csv.xz").read_bytes()).decode()
    rows = list(csv.reader(text.splitlines()))
    h = rows[0]
    i_id, i_name, i_val = h.index("ID"), h.index("Metric Name"), h.index("Metric Value")
    return {(int(r[i_id]), r[i_name]): r[i_val] for r in rows[1:] if r[i_name]}


@pytest.fixture(scope="module")
def full_reports(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("ncu_details") / "d.duckdb")
    for fixture in DETAILS_FIXTURES:
        for source, name in DETAILS_SOURCES.items():
            t.ingest(DATA / fixture / name, name=f"{fixture}/{source}")
    yield t
    t.close()


@pytest.mark.parametrize("source", list(DETAILS_SOURCES))
@pytest.mark.parametrize("fixture", DETAILS_FIXTURES)
def test_occupancy_speed_of_light_and_memory_workload_equal_the_details_page(full_reports, fixture, source):
    """Every column that twins a details-page metric, for every launch, from every export."""
    gold = details_page(fixture)
    launches = sorted({k for k, _ in gold})
    checked = 0
    for query, columns in (("occupancy", OCCUPANCY_GOLDEN), ("speed-of-light", NCU_SOL_METRICS),
                           ("memory-workload", MWA_GOLDEN), ("compute-workload", CWA_GOLDEN)):
        df = full_reports.query(query, run=f"{fixture}/{source}", limit=0)
        assert df["kernel_id"].to_list() == launches, query
        checked += as_printed_rows(df, columns, gold, f"{query} {fixture}/{source}")
        if query == "compute-workload":  # (every section metric on the page of a --set full report)
            assert df["missing_metrics"].is_null().all(), df["missing_metrics"]
    assert checked >= len(launches) * 47


def test_compute_workload_of_a_report_without_its_sections_is_an_error(tk):
    from tracekit.errors import QueryError

    with pytest.raises(QueryError, match=r"compute-workload: run \d+ \(sections\) has no metric of the Compute "
                                         "Workload Analysis, Scheduler Statistics or Instruction Statistics sections; "
                                         "profile with ncu --section ComputeWorkloadAnalysis"):
        tk.query("compute-workload", run="sections")


def test_the_busiest_pipe_is_the_pipe_utilization_charts_top(tmp_path):
    """ncu_triton_detailed's page with every section's charts (--print-details all): per launch,
    top_pipe_pct is the largest of the Pipe Utilization chart's bars (% of active cycles), and
    top_pipe one of the pipes the chart printed at it (of equals the most specific)."""
    text = lzma.decompress((DATA / "ncu_triton_detailed" / "details_all.csv.xz").read_bytes()).decode()
    bars: dict[int, dict[str, float]] = {}
    pipe = re.compile(r"sm__(?:inst_executed_pipe_(.+)|pipe_(.+)_cycles_active)\.avg\.pct_of_peak_sustained_active")
    for r in csv.DictReader(text.splitlines()):
        m = pipe.fullmatch(r["Metric Name"])
        if m and r["Section Name"] == "Compute Workload Analysis":
            name = m.group(1) or m.group(2)
            mine = bars.setdefault(int(r["ID"]), {})
            mine[name] = max(mine.get(name, 0.0), float(r["Metric Value"].replace(",", "")))
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(DATA / "ncu_triton_detailed" / "details_all.csv.xz", name="charts")
        df = t.query("compute-workload", limit=0)
    assert sorted(bars) == df["kernel_id"].to_list() and len(bars) == 22
    for row in df.iter_rows(named=True):
        top = max(bars[row["kernel_id"]].values())
        assert_as_printed(row["top_pipe_pct"], f"{top:.2f}", f"ID {row['kernel_id']}")
        tied = [p for p, v in bars[row["kernel_id"]].items() if v == top]
        assert row["top_pipe"] == max(tied, key=lambda p: (len(p), [-ord(c) for c in p])), (row, tied)
    # the Triton matmul's launches: the tensor pipe (the detailed set has no Scheduler Statistics)
    mm = df.filter(pl.col("name") == "mm_kernel")
    assert set(mm["top_pipe"]) == {"tensor_op_hmma"} and mm["no_eligible_pct"].is_null().all()
    assert all("smsp__warps_eligible.avg.per_cycle_active" in m for m in mm["missing_metrics"])


def test_roofline_of_library_kernels(full_reports, tmp_path):
    """ncu_libs: the exact tensor op counters give 2*M*N*K for the bf16 and FP8 GEMMs, the FP8
    GEMM is placed under the FP8 tensor ceiling (ncu's own src_fp8 dense path), and the FLOP/s
    are the section formulas recomputed from the report."""
    df = full_reports.query("roofline", run="ncu_libs/report", limit=0)
    assert df["missing_metrics"].is_null().all()
    rows = {r["nvtx_range"]: r for r in df.iter_rows(named=True)}
    assert set(rows) == {"linear_bf16", "scaled_mm_fp8", "sdpa_flash", "inductor_norm", "index_add"}
    assert rows["linear_bf16"]["tensor_flop"] == 2 * 2048 * 4096 * 4096
    assert rows["scaled_mm_fp8"]["tensor_flop"] == 2 * 4096**3
    assert [rows[r]["precision"] for r in ("linear_bf16", "scaled_mm_fp8", "sdpa_flash")] == \
        ["tensor_bf16", "tensor_fp8", "tensor_bf16"]
    assert [rows[r]["kernel_class"] for r in ("linear_bf16", "scaled_mm_fp8", "sdpa_flash")] == \
        ["gemm", "gemm", "attention"]
    raw = {int(r["ID"]): r for r in csv.DictReader(lzma.decompress(
        (DATA / "ncu_libs" / "raw.csv.xz").read_bytes()).decode().splitlines()) if r["ID"].strip()}
    fp8 = rows["scaled_mm_fp8"]
    path = "sm__ops_path_tensor_src_fp8_sparsity_off.sum"
    assert_as_printed(fp8["tensor_fp8_flops_per_s"], raw[fp8["kernel_id"]][f"{path}.per_second"], "fp8 FLOP/s")
    assert_as_printed(fp8["peak_flops_per_s"], raw[fp8["kernel_id"]][f"{path}.peak_sustained_elapsed.per_second"],
                      "fp8 ceiling")
    assert fp8["bound"] == "compute" and 50 < fp8["roof_pct"] <= 100
    ref = recompute(unxz(DATA / "ncu_libs" / "report.ncu-rep.xz", tmp_path / "libs.ncu-rep"))
    for row in df.iter_rows(named=True):
        r = ref[row["kernel_id"]]
        for col, key in (("flops_per_s", "flops"), ("tensor_flops_per_s", "tensor"), ("fp32_flops_per_s", "fp32"),
                         ("dram_bytes_per_s", "dram"), ("l2_bytes_per_s", "l2"), ("l1_bytes_per_s", "l1")):
            assert row[col] == pytest.approx(r[key], rel=1e-12, abs=1e-6), (row["nvtx_range"], col)


def test_a_details_page_with_its_charts_and_tables_reads_as_the_page(tmp_path):
    """ncu --print-details all adds each section's body items (the Speed Of Light chart, the
    memory chart, the occupancy graphs, the pipe tables) under a Body Item Label column: the
    same metrics again with the same values, and some of their own. That page is a real ncu
    export, not a corrupt one (it was refused as "metric twice ... two exports were joined"):
    its launches, twins and rules are the plain page's (ncu_triton_detailed: --set detailed,
    22 launches, a Triton kernel autotuned over 4 configs and at 2 fixed ones), and a metric
    given two values is still refused."""
    from tracekit.errors import InputError

    d = DATA / "ncu_triton_detailed"
    gold = details_page("ncu_triton_detailed")
    launches = sorted({k for k, _ in gold})
    assert len(launches) == 22
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(d / "details.csv.xz", name="page")
        t.ingest(d / "details_all.csv.xz", name="page_all")
        checked = 0
        for query, columns in (("occupancy", OCCUPANCY_GOLDEN), ("speed-of-light", NCU_SOL_METRICS),
                               ("memory-workload", MWA_GOLDEN)):
            page = t.query(query, run="page", limit=0)
            df = t.query(query, run="page_all", limit=0)
            assert df["kernel_id"].to_list() == launches, query
            checked += as_printed_rows(df, columns, gold, f"{query} page_all")
            same = [c for c in page.columns if c not in ("run_id", "missing_metrics", "dram_read_bytes",
                                                          "dram_write_bytes")]
            assert df.select(same).equals(page.select(same)), query
        assert checked >= len(launches) * 35
        # the memory chart's DRAM bytes, which the plain page leaves out
        mwa = t.query("memory-workload", run="page_all", limit=0)
        assert mwa["dram_read_bytes"].is_not_null().all() and mwa["missing_metrics"].is_null().all()
        for q in ("ncu-rules", "ncu-kernels"):
            assert t.query(q, run="page_all", limit=0).drop("run_id").equals(
                t.query(q, run="page", limit=0).drop("run_id")), q
        # the Triton kernel 13 times: 4 configs twice each in the autotuner's benchmark, the best
        # once, 2 fixed configs twice each; 4 warps or 8 (blocks of 128 and 256 threads)
        mm = t.query("ncu-kernels", run="page_all", limit=0).filter(pl.col("name") == "mm_kernel")
        assert mm.height == 13 and set(mm["block_size"]) == {128, 256}
        # the same metric of a launch with two values: refused, the store unchanged
        lines = lzma.decompress((d / "details_all.csv.xz").read_bytes()).decode().splitlines()
        i = next(i for i, line in enumerate(lines) if line.startswith('"0"')
                 and ',"GPU Throughput","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"' in line)
        lines[i] = re.sub(r'(elapsed","%",)"[0-9.]+"', r'\1"99.99"', lines[i])
        assert '"99.99"' in lines[i]
        bad = tmp_path / "two_values.csv"
        bad.write_text("\n".join(lines) + "\n")
        with pytest.raises(InputError, match="launch ID 0 has metric 'gpu__compute_memory_throughput"):
            t.ingest(bad, name="bad")
        assert "bad" not in t.query("runs", limit=0)["name"].to_list()
