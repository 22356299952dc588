"""diff's ncu scope where a tuning change moved a kernel's theoretical occupancy through another
limit: tests/data/ncu_occupancy_a/_b, real reports of one H100 (programs/ncu_occupancy.py). A
Triton GEMM pipelined in 4 stages instead of 2 (twice the shared memory a block), and an
elementwise kernel given 64 elements per thread instead of 8 (more registers). The diff shows the
shared memory per block, names the limit that binds on each side as ncu's TheoreticalOccupancy
rule does, and where the occupancy fell, what one block more per SM needs."""

from __future__ import annotations

import csv
import io
import lzma
import re
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit import diff as D
from tracekit.cli import main as cli_main

DATA = Path(__file__).parent / "data"
A, B = (DATA / f"ncu_occupancy_{v}" / "report.ncu-rep.xz" for v in "ab")
#: the limit ncu's TheoreticalOccupancy rule names ("... is limited by the number of required
#: registers") as the occupancy query names it
RULE_LIMITS = {"number of required registers": "registers", "required amount of shared memory": "shared_mem",
               "number of warps within each block": "warps", "number of blocks that can fit on the SM": "blocks"}


def details(variant: str) -> dict[str, dict]:
    """Kernel name -> what ncu's details page says of its first launch: its metrics by name, and
    the limit its TheoreticalOccupancy rule names ('none' without the rule: not limited)."""
    text = lzma.decompress((DATA / f"ncu_occupancy_{variant}" / "details.csv.xz").read_bytes()).decode()
    out: dict[str, dict] = {}
    for r in csv.DictReader(io.StringIO(text)):
        k = out.setdefault(r["Kernel Name"], {"id": r["ID"], "limit": "none"})
        if r["ID"] != k["id"]:
            continue
        if r["Metric Name"].startswith(("launch__shared_mem", "sm__maximum_warps")):
            k[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
        if r["Rule Name"] == "TheoreticalOccupancy":
            said = re.search(r"is limited by the (.+?)\.", r["Rule Description"]).group(1)
            k["limit"] = RULE_LIMITS[said]
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The diff of b against a, and of a against b, by (kernel, metric)."""
    with tracekit.open(tmp_path_factory.mktemp("occ") / "s.duckdb") as tk:
        tk.ingest(A, name="occ_a")
        tk.ingest(B, name="occ_b")
        return [{(r["key"].split(" @ ")[0], r["metric"]): r for r in tk.diff(base, new).iter_rows(named=True)}
                for base, new in (("occ_a", "occ_b"), ("occ_b", "occ_a"))]


def test_the_shared_memory_per_block_is_ncus(both):
    """shared_mem_per_block_bytes is ncu's static + dynamic shared memory per block of each side:
    the GEMM's doubled (65,536 -> 131,072 B), a launch setting shown, not judged."""
    fwd, _ = both
    a, b = details("a"), details("b")
    for kernel in ("matmul_kernel", "poly_kernel"):
        row = fwd[(kernel, "shared_mem_per_block_bytes")]
        want = [d[kernel]["launch__shared_mem_per_block_static"] + d[kernel]["launch__shared_mem_per_block_dynamic"]
                for d in (a, b)]
        assert [row["base"], row["new"]] == want, kernel
    gemm = fwd[("matmul_kernel", "shared_mem_per_block_bytes")]
    assert (gemm["base"], gemm["new"], gemm["verdict"]) == (65536, 131072, "unchanged")
    assert gemm["note"].endswith("a launch setting with no better/worse direction: not judged")
    assert fwd[("poly_kernel", "shared_mem_per_block_bytes")]["note"].endswith("identical")


def test_a_fallen_occupancy_says_which_limit_binds_and_what_one_block_more_needs(both):
    """The GEMM: registers bound its 12.5 % before, its shared memory binds 6.25 % after, and a
    second block per SM needs 115,712 B of it (test_occupancy_whatif checks that number against
    ncu's own curve); the elementwise kernel: 100 % (no limit) before, its registers bind 31.25 %
    after, and a sixth block needs 80 of its 86. Each side's limit is the one ncu's
    TheoreticalOccupancy rule names. The GEMM's shared memory would hold 8 warps in blocks of 256
    threads (its registers allow 8); the elementwise kernel's registers allow 20 warps at any
    block size: no other is named."""
    fwd, _ = both
    a, b = details("a"), details("b")
    gemm, poly = fwd[("matmul_kernel", "theoretical_occupancy_pct")], fwd[("poly_kernel", "theoretical_occupancy_pct")]
    assert (gemm["base"], gemm["new"], poly["base"], poly["new"]) == (12.5, 6.25, 100.0, 31.25)
    for kernel, row in (("matmul_kernel", gemm), ("poly_kernel", poly)):
        assert row["base"] == a[kernel]["sm__maximum_warps_per_active_cycle_pct"]
        assert row["new"] == pytest.approx(b[kernel]["sm__maximum_warps_per_active_cycle_pct"], abs=0.05)
        assert f"limiter: {a[kernel]['limit']} -> {b[kernel]['limit']}" in row["note"], row["note"]
        assert row["verdict"] == "unchanged" and "a launch setting with no better/worse direction" in row["note"]
    setting = "differs; a launch setting with no better/worse direction: not judged"
    assert gemm["note"] == ("matched by name and NVTX path; limiter: registers -> shared_mem; one block more per SM: "
                            f"shared memory 131,072 -> 115,712 B; block size 256: 12.5 %; {setting}")
    assert poly["note"] == ("matched by name and NVTX path; limiter: none -> registers; one block more per SM: "
                            f"registers 86 -> 80; {setting}")


def test_a_risen_occupancy_names_the_limits_alone(both):
    """The other way round the occupancy rose: the limits are named, and no block more is asked
    for (the base's launches had it)."""
    _, back = both
    gemm, poly = back[("matmul_kernel", "theoretical_occupancy_pct")], back[("poly_kernel", "theoretical_occupancy_pct")]
    assert gemm["note"].startswith("matched by name and NVTX path; limiter: shared_mem -> registers; differs; ")
    assert poly["note"].startswith("matched by name and NVTX path; limiter: registers -> none; differs; ")
    assert "one block more" not in gemm["note"] + poly["note"] and "block size" not in gemm["note"] + poly["note"]


def _launch(block: int, best: int | None, pct: float | None = 100.0, limiter: str = "registers") -> dict:
    return {"block_size": block, "best_block_size": best, "best_block_occupancy_pct": pct,
            "occupancy_limiter": limiter, "next_needs": None}


@pytest.mark.parametrize(("base", "new", "said"), [
    ([_launch(128, 128)], [_launch(128, 256, 12.5)], "block size 256: 12.5 %"),  # (ncu_occupancy_b's GEMM)
    ([_launch(64, 64), _launch(256, 256)], [_launch(64, 128, 10.416666), _launch(256, 128, 10.416666)],
     "block size 128: 10.4 %"),  # (48 warps per SM: three significant digits, as the table)
    ([_launch(64, 64), _launch(128, 128)], [_launch(64, 128), _launch(128, 128)], None),  # (one is at its best)
    ([_launch(128, 128)], [_launch(128, 64), _launch(128, 256)], None),  # (launches of other best sizes)
    ([_launch(128, 128)], [_launch(128, None, None)], None),  # (a report without the inputs)
    ([_launch(128, 128)], [_launch(32, 64)], None),  # (the block size changed: its row says so)
])
def test_the_block_size_a_fallen_occupancy_names(base, new, said):
    """The block size the note names where a kernel's occupancy fell: the one every new launch would
    hold more warps at, where none is at it already and the block size is the base's."""
    note = D._occupancy_moved(base, new, fell=True)
    if said:
        assert note.split("; ")[-1] == said, note
    else:
        assert "block size" not in note, note


def test_the_table_shows_why(tmp_path, capsys, monkeypatch):
    """`tracekit diff A B` on the two report files, in a terminal 160 characters wide: the
    occupancy rows' notes start with why (a key matched as it is goes unsaid in the table), the
    shared memory row is there, and no launch setting is judged; what moved says the whole why
    of the GEMM, whose time improved, that the table cuts (the elementwise kernel's time did not
    move: not said there); a CSV keeps how each key was matched."""
    monkeypatch.setenv("COLUMNS", "160")
    db = str(tmp_path / "t.duckdb")
    assert cli_main(["--db", db, "diff", str(A), str(B), "--by", "ncu", "--limit", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    occupancy = [line for line in lines if "theoretical_occupancy_pct" in line]
    table, moved = lines[:lines.index("what moved:")], lines[lines.index("what moved:") + 1:]
    assert len(occupancy) == 2 and all(len(line) <= 160 for line in table)
    assert moved == ["  ncu matmul_kernel, 2 launches: -246.880 µs in all (-35.0 %, improved); the median launch "
                     "-123.440 µs; theoretical occupancy 12.5 % -> 6.25 % (limiter: registers -> shared_mem; one "
                     "block more per SM: shared memory 131,072 -> 115,712 B; block size 256: 12.5 %)"], moved
    assert "not judged  limiter: registers -> shared_mem; one block" in occupancy[0]
    assert "not judged  limiter: none -> registers; one block more" in occupancy[1]
    smem = [line for line in lines if "shared_mem_per_block_bytes" in line]
    assert len(smem) == 2 and "65.5 kB     131 kB" in smem[0]
    assert cli_main(["--db", db, "diff", "1", "2", "--by", "ncu", "-f", "csv"]) == 0
    df = pl.read_csv(io.StringIO(capsys.readouterr().out))
    rows = df.filter(pl.col("metric").is_in(["theoretical_occupancy_pct", "shared_mem_per_block_bytes"]))
    assert rows.height == 4 and set(rows["verdict"]) == {"unchanged"}
    assert rows["note"].str.starts_with("matched by name and NVTX path; ").all()


def _with_registers(tmp_path, registers: dict[int, int]) -> dict[tuple[str, str], dict]:
    """The diff of ncu_occupancy_a against _b with b's launches (kernel_id) given these registers per
    thread, by (kernel, metric)."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(A, name="a")
        tk.ingest(B, name="b")
        for kernel_id, value in registers.items():
            tk.con.execute("UPDATE ncu_metrics SET value = ? WHERE run_id = 2 AND kernel_id = ? "
                           "AND metric = 'launch__registers_per_thread'", [value, kernel_id])
        return {(r["key"].split(" @ ")[0], r["metric"]): r for r in tk.diff("a", "b", by="ncu").iter_rows(named=True)}


def test_a_small_change_of_a_launch_setting_is_said(tmp_path):
    """A launch setting is exact (the same in every replay): 188 -> 190 registers (+1.1 %, inside
    the 5 % threshold) is a change, said as one, not "within threshold". Planted in ncu_occupancy_b's
    GEMM launches (208 registers) as ingested; the elementwise kernel's 22 -> 86 is as it was."""
    rows = _with_registers(tmp_path, {0: 190, 1: 190})
    for kernel, values in (("matmul_kernel", (188, 190)), ("poly_kernel", (22, 86))):
        regs = rows[(kernel, "registers_per_thread")]
        assert (regs["base"], regs["new"], regs["verdict"]) == (*values, "unchanged")
        assert regs["note"].endswith("differs; a launch setting with no better/worse direction: not judged"), kernel


@pytest.mark.parametrize(("planted", "note"), [
    ({0: 188}, "differs; a launch setting with no better/worse direction: not judged"),  # (one launch of two moved)
    ({0: 180, 1: 196}, "the same median; launches 188 -> 180 / 196: a launch setting with no better/worse "
                       "direction: not judged"),
])
def test_a_launch_setting_that_moved_in_some_launches_is_said(tmp_path, planted, note):
    """ncu_occupancy_b's GEMM launches planted with a's 188 registers in one launch (the median
    198), or with 180 and 196 (the median a's 188): a change in any launch is said, with no sign
    test over the launches and no median that hides it."""
    row = _with_registers(tmp_path, planted)[("matmul_kernel", "registers_per_thread")]
    assert row["verdict"] == "unchanged" and row["note"] == f"matched by name and NVTX path; {note}", row["note"]
    assert D.shown_verdicts(pl.DataFrame([row]))[0] == "not judged"


def test_what_moved_names_the_nvtx_path_of_each_occupancy_that_moved_its_own_way(tmp_path):
    """A kernel under two NVTX paths (a key each, ``kernel @ path``) whose occupancy moved unlike
    under each: what moved names the path of each; alike under both, it is said once, unnamed.
    The GEMM's real rows, given under two paths, one's occupancy moved otherwise."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(A, name="occ_a")
        tk.ingest(B, name="occ_b")
        df = tk.diff("occ_a", "occ_b", by="ncu")
    gemm = df.filter(pl.col("key").str.starts_with("matmul_kernel"))
    two = pl.concat([gemm.with_columns(pl.lit("matmul_kernel @ fwd").alias("key")),
                     gemm.with_columns(pl.lit("matmul_kernel @ bwd").alias("key"))])
    (line,) = [x for x in D.moved(two) if x.startswith("ncu matmul_kernel")]
    assert line.count("theoretical occupancy 12.5 % -> 6.25 % (limiter: registers -> shared_mem;") == 1, line
    other = two.with_columns(pl.when((pl.col("key") == "matmul_kernel @ bwd")
                                     & (pl.col("metric") == "theoretical_occupancy_pct"))
                             .then(pl.lit(9.375)).otherwise(pl.col("new")).alias("new"))
    (line,) = [x for x in D.moved(other) if x.startswith("ncu matmul_kernel")]
    assert "theoretical occupancy @ fwd 12.5 % -> 6.25 % (limiter" in line, line
    assert "theoretical occupancy @ bwd 12.5 % -> 9.38 % (limiter" in line, line
