"""The occupancy query's what-if columns (what would raise a launch's occupancy) against NVIDIA's
own occupancy calculator: the curve of ncu's Occupancy section "Impact of Varying Register Count
Per Thread" (warps per SM at each register count, read from the committed real reports with
``ncu_report``) and ncu's block limits. The query counts shared memory against the SM's largest
carveout, where ncu's shared memory curve holds the launch's own: the shared memory rule is checked
against ncu's block limit and allocations at each launch's own carveout, and the query's values as
the most that fit at the largest."""

from __future__ import annotations

import lzma
import math
from pathlib import Path

import pytest
from conftest import spec_datasets

import tracekit
from tracekit import charts

DATA = Path(__file__).parent / "data"
SWEEP = DATA / "command_sweep" / "ncu" / "runs"
#: reports of different kernels: PyTorch's, cuBLAS GEMMs with 200 kB of shared memory, Triton's,
#: CUDA C at 32 threads per block, the HSTU capture's attention at 255 registers
REPORTS = {
    "hstu": DATA / "hstu_capture_ncu" / "ncu.ncu-rep.xz",
    "full": DATA / "ncu_full" / "report.ncu-rep.xz",
    "libs": DATA / "ncu_libs" / "report.ncu-rep.xz",
    "diff_b": DATA / "ncu_diff_b" / "report.ncu-rep.xz",
    "levels": DATA / "ncu_levels" / "report.ncu-rep.xz",
    "app_replay": DATA / "ncu_app_replay" / "report.ncu-rep.xz",
    "occupancy_a": DATA / "ncu_occupancy_a" / "report.ncu-rep.xz",  # (a Triton GEMM: registers bind;
    "occupancy_b": DATA / "ncu_occupancy_b" / "report.ncu-rep.xz",  # in 4 stages: shared memory binds)
    **{p.name.split("-ncu-")[1]: p / "ncu.ncu-rep.xz" for p in sorted(SWEEP.iterdir())},
}


def curves(report: Path, metric: str = "launch__occupancy_per_register_count") -> dict[int, dict[int, float]]:
    """kernel_id -> {registers per thread: warps per SM}, the curve of ncu's Occupancy section
    ("Impact of Varying Register Count Per Thread") of each kernel launch; with
    ``launch__occupancy_per_shared_mem_size``, {shared memory per block, the driver's part
    included: warps per SM} ("Impact of Varying Shared Memory Usage Per Block")."""
    import ncu_report

    ctx = ncu_report.load_report(str(report))
    out, kid = {}, 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for i in range(rng.num_actions()):
            m = rng.action_by_idx(i).metric_by_name(metric)
            if m is not None and m.num_instances():
                ids = m.correlation_ids()
                out[kid] = {ids.as_uint64(j): m.as_double(j) for j in range(m.num_instances())}
            kid += 1
    return out


#: ncu's metrics the tests read beside the query's columns -> their names in a row
DEVICE = {"launch__shared_mem_per_block_allocated": "allocated",
          "device__attribute_max_shared_memory_per_multiprocessor": "smem_per_sm",
          "device__attribute_max_registers_per_multiprocessor": "regs_per_sm",
          "device__attribute_max_warps_per_multiprocessor": "warps_per_sm",
          "device__attribute_max_warps_per_scheduler": "warps_per_scheduler"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> (the occupancy query's rows by kernel_id, each with ncu's shared memory allocated per
    block, the SM's largest carveout, registers and warps, and ncu's block size curve
    (``block_curve``), ncu's register curves by kernel_id)."""
    d = tmp_path_factory.mktemp("occupancy")
    out = {}
    with tracekit.open(d / "s.duckdb") as tk:
        for name, path in REPORTS.items():
            plain = d / f"{name}.ncu-rep"
            plain.write_bytes(lzma.decompress(path.read_bytes()))
            tk.ingest(plain, name=name)
            rows = {r["kernel_id"]: r for r in tk.query("occupancy", run=name).iter_rows(named=True)}
            for kid, metric, value in tk.sql(
                    "SELECT kernel_id, metric, value FROM ncu_metrics WHERE metric IN (" + ", ".join(
                        f"'{m}'" for m in DEVICE) + ") AND run_id = (SELECT run_id FROM runs WHERE name = ?)",
                    params=[name]).iter_rows():
                if kid in rows:
                    rows[kid][DEVICE[metric]] = value
            for kid, curve in curves(plain, "launch__occupancy_per_block_size").items():
                if kid in rows:
                    rows[kid]["block_curve"] = curve
            out[name] = rows, curves(plain)
    return out


def alloc(smem: int, row: dict) -> int:
    """A block's shared memory as allocated: its static and dynamic bytes and the driver's, in
    units of 128 bytes (compute capability 8.0 and later)."""
    return 128 * math.ceil((smem + row["shared_mem_driver_bytes"]) / 128)


def test_the_limits_kept_are_those_ncu_computes(runs):
    """registers_per_thread_max, the most registers a launch may use and keep its blocks per SM, is
    where ncu's register curve steps down: at it the SM holds the launch's warps, one register
    more, fewer. Shared memory is allocated in units of 128 bytes, and ncu's block limit is the
    launch's carveout over that allocation: by that rule shared_mem_max_bytes is the most that
    keeps the blocks at the SM's largest carveout."""
    checked = {"registers": 0, "shared_mem_limit": 0}
    for name, (rows, curve) in runs.items():
        for kid, row in rows.items():
            regs = curve[kid]
            warps = math.ceil(row["block_size"] / 32) * row["blocks_per_sm"]
            assert warps == row["theoretical_warps_per_sm"] == regs[row["registers_per_thread"]], (name, kid)
            assert row["missing_metrics"] is None, (name, kid)
            assert regs[row["registers_per_thread_max"]] == warps, (name, kid)
            if row["registers_per_thread_max"] < 255:
                assert regs[row["registers_per_thread_max"] + 1] < warps, (name, kid)
                checked["registers"] += 1
            used = row["shared_mem_static_bytes"] + row["shared_mem_dynamic_bytes"] + row["shared_mem_driver_bytes"]
            assert row["allocated"] == 128 * math.ceil(used / 128), (name, kid)
            assert row["block_limit_shared_mem"] == row["shared_mem_config_bytes"] // row["allocated"], (name, kid)
            # the launch's own use keeps its blocks; shared_mem_max_bytes is the most that does at the
            # SM's largest carveout, 128 bytes more does not
            n, top = row["blocks_per_sm"], row["smem_per_sm"]
            assert used - row["shared_mem_driver_bytes"] <= row["shared_mem_max_bytes"], (name, kid)
            assert top // alloc(row["shared_mem_max_bytes"], row) >= n > top // alloc(row["shared_mem_max_bytes"] + 128,
                                                                                       row), (name, kid)
            # the driver picks the carveout a launch needs: none is held back by its shared memory alone
            # below the largest
            if row["shared_mem_config_bytes"] < top and row["block_limit_shared_mem"] == n:
                assert n in (row["block_limit_registers"], row["block_limit_warps"], row["block_limit_blocks"],
                             row["block_limit_barriers"]), (name, kid)
            checked["shared_mem_limit"] += 1
    assert checked["registers"] >= 60 and checked["shared_mem_limit"] >= 100, checked


def test_one_block_more_is_what_ncu_computes(runs):
    """Where one block more per SM is in reach: at next_registers_per_thread_max the register
    curve (the shared memory held) reaches the next step, one register more it does not; where
    registers alone stand in the way, next_occupancy_pct is the curve's occupancy there; where the
    launch has the SM's largest carveout, next_shared_mem_max_bytes is where the shared memory
    curve reaches the step. Where it is out of reach, next_needs says which of the SM's limits
    stops it."""
    steps = exact = out_of_reach = 0
    for name, (rows, curve) in runs.items():
        for kid, row in rows.items():
            regs = curve[kid]
            w = math.ceil(row["block_size"] / 32)
            n = row["blocks_per_sm"]
            caps = min(row["block_limit_blocks"], row["block_limit_warps"], row["block_limit_barriers"])
            if row["theoretical_occupancy_pct"] >= 100:
                assert row["next_needs"] is None and row["next_occupancy_pct"] is None, (name, kid)
                continue
            if n + 1 > caps:
                assert row["next_occupancy_pct"] is None and row["next_needs"].startswith("none at "), (name, kid)
                out_of_reach += 1
                continue
            nr = row["next_registers_per_thread_max"]
            assert nr is not None and row["next_occupancy_pct"] > row["theoretical_occupancy_pct"], (name, kid)
            assert row["next_needs"], (name, kid)
            ns, top = row["next_shared_mem_max_bytes"], row["smem_per_sm"]
            assert top // alloc(ns, row) >= n + 1 > top // alloc(ns + 128, row), (name, kid)
            if min(caps, row["block_limit_shared_mem"]) >= n + 1:  # (the shared memory allows the step)
                assert regs[nr] >= (n + 1) * w, (name, kid)
                if nr < 255:
                    assert regs[nr + 1] < (n + 1) * w, (name, kid)
                steps += 1
                if row["next_needs"].startswith("registers") and ";" not in row["next_needs"]:
                    used = min(row["registers_per_thread"], nr)
                    assert row["next_occupancy_pct"] == pytest.approx(100 * regs[used] / 64), (name, kid)
                    exact += 1
    assert steps >= 15 and exact >= 5 and out_of_reach >= 1, (steps, exact, out_of_reach)


def test_the_hstu_attention_kernel_needs_half_its_registers_and_less_shared_memory(runs):
    """The HSTU capture's KV-cached attention kernel: 255 registers per thread and 160 kB of shared
    memory, one block of 8 warps per SM (12.5 %); two blocks need 128 registers and at most
    115,712 bytes each at its carveout, the SM's largest (228 kB)."""
    rows, _ = runs["hstu"]
    row = next(r for r in rows.values() if r["name"] == "_hstu_cached_sk_kernel")
    assert (row["registers_per_thread"], row["blocks_per_sm"], row["theoretical_occupancy_pct"]) == (255, 1, 12.5)
    assert (row["next_registers_per_thread_max"], row["next_shared_mem_max_bytes"], row["next_occupancy_pct"]) == (
        128, 115712, 25.0)
    assert row["next_needs"] == "registers 255 -> 128; shared memory 163,840 -> 115,712 B"


def test_a_gemm_held_by_its_shared_memory_needs_what_ncus_curve_says(runs, tmp_path):
    """ncu_occupancy_b's Triton GEMM pipelines 4 stages of its tiles: 128 kB of shared memory a
    block at the SM's largest carveout (228 kB), one block of 4 warps per SM, where registers
    (208) allow two. Two blocks need at most 115,712 bytes each: on ncu's own shared memory curve
    (the driver's 1 kB included) that is the last size at which the SM holds 8 warps."""
    rows, _ = runs["occupancy_b"]
    plain = tmp_path / "b.ncu-rep"
    plain.write_bytes(lzma.decompress(REPORTS["occupancy_b"].read_bytes()))
    smem = curves(plain, "launch__occupancy_per_shared_mem_size")
    gemms = [r for r in rows.values() if r["name"] == "matmul_kernel"]
    assert len(gemms) == 2
    for row in gemms:
        assert (row["limiter"], row["blocks_per_sm"], row["block_limit_registers"]) == ("shared_mem", 1, 2)
        assert row["shared_mem_config_bytes"] == row["smem_per_sm"] == 233472
        assert row["next_needs"] == "shared memory 131,072 -> 115,712 B"
        assert row["next_occupancy_pct"] == 12.5
        curve = smem[row["kernel_id"]]
        at = row["next_shared_mem_max_bytes"] + row["shared_mem_driver_bytes"]
        assert curve[at] == 8 and curve[min(k for k in curve if k > at)] == 4
        assert curve[row["shared_mem_dynamic_bytes"] + row["shared_mem_driver_bytes"]] == 4


def test_one_block_more_may_need_a_larger_carveout(runs):
    """ncu_libs' flash attention kernel: 255 registers and 48 kB of shared memory a block at a
    132 kB carveout, 2 blocks per SM; a third needs 168 registers and a carveout of 3 x 50,176
    bytes, which the driver picks where the kernel asks for one."""
    rows, _ = runs["libs"]
    row = rows[2]
    assert (row["registers_per_thread"], row["shared_mem_dynamic_bytes"], row["shared_mem_config_bytes"],
            row["blocks_per_sm"]) == (255, 49152, 135168, 2)
    assert row["next_needs"] == "registers 255 -> 168; a shared memory carveout of at least 150,528 B (now 135,168)"
    assert row["next_occupancy_pct"] == 18.75


def test_a_page_without_the_device_attributes_names_them(tmp_path):
    """ncu's details page prints no device attributes: the what-if is left blank (blocks_per_sm,
    from ncu's own block limits, stays), and missing_metrics names what it needs."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(DATA / "ncu_full" / "details.csv.xz", name="details")
        df = tk.query("occupancy", run="details")
    assert df["blocks_per_sm"].is_not_null().all()
    for col in ("registers_per_thread_max", "shared_mem_max_bytes", "next_occupancy_pct",
                "next_registers_per_thread_max", "next_shared_mem_max_bytes", "next_needs", "best_block_size",
                "best_block_occupancy_pct"):
        assert df[col].is_null().all(), col
    assert all("device__attribute_max_registers_per_multiprocessor" in m for m in df["missing_metrics"])


def test_a_zero_block_limit_is_no_error(tmp_path):
    """A block limit of 0 (a launch that could not run as configured) leaves the what-if blank
    instead of failing the query: the rest of the run's rows are answered."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(DATA / "ncu_levels" / "report.ncu-rep.xz", name="levels")
        tk.con.execute("UPDATE ncu_metrics SET value = 0 WHERE kernel_id = 2 "
                       "AND metric = 'launch__occupancy_limit_shared_mem'")
        df = tk.query("occupancy", run="levels")
    assert df.height == 4 and df["next_needs"][2] is None and df["registers_per_thread_max"][2] is None
    assert df["best_block_size"][2] is None and df["best_block_size"][3] == df["block_size"][3]
    assert df["next_needs"][3] == "registers 36 -> 32"


def nearest_best(curve: dict[int, float], own: int) -> tuple[int, float]:
    """The block size of whole warps at which ``curve`` (warps per SM by block size) is highest:
    the launch's own where it is as high, else the nearest in warps (of two as near, the larger);
    and the warps there."""
    sizes = [s for s in curve if s % 32 == 0]
    top = max(curve[s] for s in sizes)
    own_warps = math.ceil(own / 32)
    if curve[32 * own_warps] == top:
        return own, top
    best = min((s for s in sizes if curve[s] == top), key=lambda s: (abs(s // 32 - own_warps), -s))
    return best, top


def block_size_curve(row: dict, smem_blocks: float) -> dict[int, int]:
    """Warps per SM at each block size of whole warps up to 1,024 threads, by cuda_occupancy.h's
    rules, the launch's registers per thread held and its shared memory allowing ``smem_blocks``
    blocks: registers per warp in units of 256 from each sub-partition, the SM's warps, its block
    slots and its barriers."""
    parts = row["warps_per_sm"] // row["warps_per_scheduler"]
    per_warp = 256 * math.ceil(row["registers_per_thread"] / 8)
    out = {}
    for n in range(1, 33):
        by_regs = (row["regs_per_sm"] // parts // per_warp) * parts // n if per_warp else math.inf
        out[32 * n] = n * min(row["block_limit_blocks"], row["block_limit_barriers"], row["warps_per_sm"] // n,
                              by_regs, smem_blocks)
    return out


def test_the_block_size_rule_is_ncus_curve_and_its_peak_the_best_block_size(runs):
    """The rule the query's best_block_* follow, at the launch's own carveout (the blocks its shared
    memory allows there: ncu's block limit), is ncu's own "Impact of Varying Block Size" curve at
    every block size of whole warps, on every launch. At the SM's largest carveout (the query's,
    as for next_*), the same rule's peak nearest the launch's own block size is best_block_size,
    and its occupancy best_block_occupancy_pct. On these reports ncu's own curve peaks at the same
    block size."""
    launches = moved = carveout = 0
    for name, (rows, _) in runs.items():
        for kid, row in rows.items():
            ncu = row["block_curve"]
            assert max(ncu) == 1024, (name, kid)
            own = block_size_curve(row, row["block_limit_shared_mem"])
            assert own == {size: ncu[size] for size in own}, (name, kid)
            top_blocks = row["smem_per_sm"] // row["allocated"] if row["allocated"] else math.inf
            top = block_size_curve(row, top_blocks)
            best, warps = nearest_best(top, row["block_size"])
            assert (row["best_block_size"], row["best_block_occupancy_pct"]) == (
                best, 100 * warps / row["warps_per_sm"]), (name, kid)
            assert nearest_best(ncu, row["block_size"])[0] == best, (name, kid)
            launches += 1
            moved += best != row["block_size"]
            carveout += top != own
    assert launches >= 110 and moved >= 5 and carveout >= 10, (launches, moved, carveout)

def test_more_warps_per_block_hold_more_of_a_gemm_held_by_its_shared_memory(runs):
    """ncu_occupancy_b's Triton GEMM holds one block of 4 warps per SM by its 128 kB of shared memory,
    where its registers (208) allow 8 warps: at 256 threads a block, the same shared memory holds
    8 warps (12.5 %, as one block more would at 115,712 bytes). ncu_diff_b's kernel of one warp a
    block is held by the SM's 32 block slots at 50 %: 64 threads fill the SM. A launch at its
    curve's peak keeps its own block size (the HSTU attention kernel, held by registers at 8 warps)."""
    for row in (r for r in runs["occupancy_b"][0].values() if r["name"] == "matmul_kernel"):
        assert (row["block_size"], row["theoretical_occupancy_pct"]) == (128, 6.25)
        assert (row["best_block_size"], row["best_block_occupancy_pct"]) == (256, 12.5)
    for row in runs["diff_b"][0].values():
        assert (row["block_size"], row["block_limit_blocks"], row["theoretical_occupancy_pct"]) == (32, 32, 50.0)
        assert (row["best_block_size"], row["best_block_occupancy_pct"]) == (64, 100.0)
    row = next(r for r in runs["hstu"][0].values() if r["name"] == "_hstu_cached_sk_kernel")
    assert (row["block_size"], row["best_block_size"], row["best_block_occupancy_pct"]) == (256, 256, 12.5)


def test_of_two_block_sizes_as_near_the_larger(tmp_path):
    """ncu_occupancy_a's polynomial kernel (22 registers, no shared memory) made a launch of 96
    threads, 21 blocks of 3 warps by the SM's 64 warps (98.4 %; the limits as ncu would give them):
    64 and 128 threads both fill the SM and are as near; the column is 128, the larger, as
    cudaOccupancyMaxPotentialBlockSize prefers. At 100 threads (4 warps, the last one part-filled)
    the launch holds as many warps as 128 would: its own size stays."""
    def launch(threads: int, warps_limit: int, registers_limit: int, warps: int) -> dict:
        for metric, value in (("launch__block_size", threads), ("launch__occupancy_limit_warps", warps_limit),
                              ("launch__occupancy_limit_registers", registers_limit),  # (84 warps' registers)
                              ("sm__maximum_warps_per_active_cycle_pct", 100 * warps / 64),
                              ("sm__maximum_warps_avg_per_active_cycle", warps)):
            tk.con.execute("UPDATE ncu_metrics SET value = ? WHERE kernel_id = ? AND metric = ?", [value, kid, metric])
        return tk.query("occupancy", run="a", kernel="poly").row(0, named=True)

    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(REPORTS["occupancy_a"], name="a")
        kid = tk.query("occupancy", run="a", kernel="poly")["kernel_id"][0]
        row = launch(96, 21, 28, 63)
        part_filled = launch(100, 16, 21, 64)
    assert (row["block_size"], row["blocks_per_sm"], row["limiter"]) == (96, 21, "warps")
    assert (row["best_block_size"], row["best_block_occupancy_pct"]) == (128, 100.0)
    assert (part_filled["best_block_size"], part_filled["best_block_occupancy_pct"]) == (100, 100.0)


def test_the_best_block_size_counts_the_largest_carveout(tmp_path):
    """ncu_occupancy_b's GEMM made one of 100,000 bytes of shared memory a block at a carveout of
    132 kB, one block (4 warps) per SM by it, where the SM's largest (228 kB) holds two, as many as
    its registers allow: at the largest carveout its own block size holds 8 warps, which no other
    does more, so best_block_size stays its own (at its own carveout 256 threads would hold 8) and
    next_needs names the carveout. The occupancy chart draws no diamond for it."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(REPORTS["occupancy_b"], name="b")
        for metric, value in (("launch__shared_mem_per_block_dynamic", 100_000),
                              ("launch__shared_mem_config_size", 135_168),
                              ("launch__occupancy_limit_shared_mem", 1)):
            tk.con.execute("UPDATE ncu_metrics SET value = ? WHERE kernel_id = 0 AND metric = ?", [value, metric])
        row = tk.query("occupancy", run="b").row(0, named=True)
        spec = charts.chart(tk, "occupancy", run="b").to_dict()
    assert (row["block_size"], row["blocks_per_sm"], row["theoretical_occupancy_pct"]) == (128, 1, 6.25)
    assert (row["best_block_size"], row["best_block_occupancy_pct"]) == (128, 12.5)
    assert row["next_needs"] == "a shared memory carveout of at least 202,240 B (now 135,168)"
    diamonds = [r["label"] for ds in spec_datasets(spec) for r in ds if "best_size" in r]
    assert diamonds == ["1: matmul_kernel · matmul"]
