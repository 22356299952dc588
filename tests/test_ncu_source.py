"""ncu's Source page (instruction-level data) against the committed real reports.

Goldens: ``ncu -i REPORT --csv --page source --print-source sass`` (every instruction of
every launch: address, SASS, samples by stall reason, instructions executed, sectors) and
``--print-source cuda,sass`` (each source line with the metrics summed over its
instructions), exported by ncu 2025.3.1 on the H200 from the very reports. Launches print
in ID order, one block each (cuda,sass: one block per source file of the launch).

``ncu_source`` is a planted capture (tests/data/programs/ncu_source.py): a strided gather
on one line, a long math chain on another; the instruction-level data must say so.
"""

from __future__ import annotations

import csv
import lzma
import re

import polars as pl
import pytest
from conftest import DATA

import tracekit
from tracekit.errors import QueryError

#: ncu's Source page column -> ncu_source column
COLUMNS = {
    "Warp Stall Sampling (All Samples)": "samples",
    "Warp Stall Sampling (Not-issued Samples)": "samples_not_issued",
    "Instructions Executed": "inst_executed",
    "Thread Instructions Executed": "thread_inst_executed",
    "Predicated-On Thread Instructions Executed": "thread_inst_executed_pred_on",
    "Divergent Branches": "divergent_branches",
    "L1 Tag Requests Global": "l1_tag_requests_global",
    "L1 Conflicts Shared N-Way": "shared_conflicts_nway",
    "L2 Theoretical Sectors Global Excessive": "l2_sectors_global_excess",
    "L2 Theoretical Sectors Global": "l2_sectors_global",
    "L2 Theoretical Sectors Global Ideal": "l2_sectors_global_ideal",
    "L2 Theoretical Sectors Local": "l2_sectors_local",
}
#: the page's stall columns (stall_<short>) -> the reasons as ncu_source_stalls names them
STALLS = {
    "barrier": "barrier", "branch_resolving": "branch_resolving", "dispatch": "dispatch_stall", "drain": "drain",
    "imc": "imc_miss", "lg": "lg_throttle", "long_sb": "long_scoreboard", "math": "math_pipe_throttle",
    "membar": "membar", "mio": "mio_throttle", "misc": "misc", "no_inst": "no_instruction",
    "not_selected": "not_selected", "selected": "selected", "short_sb": "short_scoreboard", "sleep": "sleeping",
    "tex": "tex_throttle", "wait": "wait",
}
#: fixture -> (report, Source page export, its kind)
PAGES = {
    "ncu_source": ("report.ncu-rep.xz", "source_sass.csv.xz"),
    "ncu_full": ("report.ncu-rep.xz", "source_sass.csv.xz"),
    "hstu_capture_ncu": ("ncu.ncu-rep.xz", "ncu_source_cuda_sass.csv.xz"),
    "ncu_diff_a": ("report.ncu-rep.xz", "source_cuda_sass.csv.xz"),
    "ncu_libs": ("report.ncu-rep.xz", "source_sass.csv.xz"),
    "ncu_clocks_zeros": ("report.ncu-rep.xz", "source_sass.csv.xz"),
    "ncu_shapes_int": ("report.ncu-rep.xz", "source_sass.csv.xz"),
}
LINE_PAGES = {"ncu_source": "source_cuda_sass.csv.xz", "ncu_diff_a": "source_cuda_sass.csv.xz",
              "hstu_capture_ncu": "ncu_source_cuda_sass.csv.xz", "ncu_libs": "source_cuda_sass.csv.xz",
              "ncu_shapes_int": "source_cuda_sass.csv.xz"}


def page_blocks(path) -> list[dict]:
    """The export's blocks: {"kernel" or "file", "header", "rows"} in print order."""
    blocks: list[dict] = []
    with lzma.open(path, "rt", newline="") as fh:
        for row in csv.reader(fh):
            if not row or row[0].startswith("=="):
                continue
            if row[0] in ("Kernel Name", "File Path"):
                blocks.append({row[0]: row[1], "rows": []})
            elif row[0] == "Function Name":
                blocks[-1]["function"] = row[1]
            elif row[0] in ("Address", "Line No"):
                blocks[-1]["header"] = row
            else:
                blocks[-1]["rows"].append(row)
    return blocks


def launches_of(blocks: list[dict]) -> list[list[dict]]:
    """cuda,sass blocks grouped per launch: a launch's files print one after another, so a
    file seen again (or another function) starts the next launch."""
    out: list[list[dict]] = []
    for b in blocks:
        key = (b.get("File Path"), b.get("function"))
        if not out or any((x.get("File Path"), x.get("function")) == key for x in out[-1]) \
                or out[-1][0].get("function") != b.get("function"):
            out.append([])
        out[-1].append(b)
    return out


def bare(sass: str) -> tuple[str, str]:
    """The opcode with its modifiers and the operands' characters, sorted, without spaces,
    commas and dots: the pip package's disassembler and ncu 2025.3.1's write some operands
    differently (``R88.gsb0`` against ``R88, gsb0``) or in another order (LDGSTS)."""
    words = [w for w in sass.split() if not w.startswith("@")]
    return words[0], "".join(sorted(re.sub(r"[\s,.]", "", " ".join(words[1:]))))


def num(text: str) -> float:
    return 0.0 if text in ("", "-") else float(text.replace(",", ""))


def instruction_rows(block: dict) -> list[dict]:
    """The block's instruction rows as {column: text}; cuda,sass line rows left out."""
    h = block["header"]
    if h[0] == "Line No":  # Line No, Source, Address, Source, metrics...
        h = ["_line", "_text"] + h[2:]
        rows = [r for r in block["rows"] if r[0] == "" and r[2] != "..."]  # ("...": a gap between address runs)
    else:
        rows = block["rows"]
    return [dict(zip(h, r, strict=True)) for r in rows]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tk = tracekit.open(tmp_path_factory.mktemp("source") / "s.duckdb")
    for fixture, (report, _) in PAGES.items():
        tk.ingest(DATA / fixture / report, name=fixture)
    yield tk
    tk.close()


def ours(tk, fixture: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    run = f"(SELECT run_id FROM runs WHERE name = '{fixture}')"
    return (tk.sql(f"SELECT * FROM ncu_source WHERE run_id = {run} ORDER BY kernel_id, address"),
            tk.sql(f"SELECT * FROM ncu_source_stalls WHERE run_id = {run}"))


@pytest.mark.parametrize("fixture", list(PAGES))
def test_instructions_equal_the_source_page(store, fixture):
    rows, stalls = ours(store, fixture)
    blocks = page_blocks(DATA / fixture / PAGES[fixture][1])
    if "File Path" in blocks[0]:
        blocks = [{"rows": [], "header": g[0]["header"], "parts": g} for g in launches_of(blocks)]
    ids = sorted(set(rows["kernel_id"]))
    if fixture == "hstu_capture_ncu":  # the export holds the attention kernel's first launch
        first = store.sql("SELECT min(kernel_id) AS k FROM ncu_kernels k JOIN runs USING (run_id) "
                          f"WHERE runs.name = '{fixture}' AND k.name = '_hstu_cached_sk_kernel'")["k"][0]
        ids = [first]
    assert len(blocks) == len(ids)
    by_reason = {(k, a, r): v for k, a, r, v in stalls.select("kernel_id", "address", "reason", "samples").iter_rows()}
    checked = 0
    for kid, block in zip(ids, blocks, strict=True):
        page = [r for part in block.get("parts", [block]) for r in instruction_rows(part)]
        mine = {r["address"]: r for r in rows.filter(pl.col("kernel_id") == kid).iter_rows(named=True)}
        assert len(page) >= len(mine) > 0
        seen = set()
        for want in page:
            addr = int(want["Address"], 16)
            got = mine.get(addr)
            if got is None:  # listed by ncu, never executed nor sampled: every count is 0
                assert all(num(want[c]) == 0 for c in COLUMNS if c in want), want
                continue
            seen.add(addr)
            assert bare(got["sass"]) == bare(want["Source"]), hex(addr)
            for col, name in COLUMNS.items():
                if col in want:
                    assert (got[name] or 0) == pytest.approx(num(want[col]), rel=1e-9), (hex(addr), col)
            for short, reason in STALLS.items():
                assert by_reason.get((kid, addr, reason), 0) == num(want[f"stall_{short}"]), (hex(addr), short)
            checked += 1
        assert seen == set(mine)  # every row of ours is an instruction ncu lists
    assert checked > 0


@pytest.mark.parametrize("fixture", list(LINE_PAGES))
def test_lines_equal_the_source_page(store, fixture):
    """Per source line of each launch: ncu's line rows against ncu-source by=line."""
    groups = launches_of(page_blocks(DATA / fixture / LINE_PAGES[fixture]))
    kernel = groups[0][0]["function"]
    launches = store.sql(f"SELECT k.kernel_id FROM ncu_kernels k JOIN runs USING (run_id) WHERE runs.name = "
                         f"'{fixture}' AND k.name = '{kernel}' ORDER BY k.kernel_id")["kernel_id"].to_list()
    assert len(groups) == (1 if fixture == "hstu_capture_ncu" else len(launches))  # (that one: its first launch)
    for kid, group in zip(launches, groups, strict=False):
        got = store.query("ncu-source", run=fixture, launch=kid, limit=0)
        got = {(r["file"], r["line"]): r for r in got.iter_rows(named=True)}
        want = {}
        for block in group:
            h = block["header"]
            for r in block["rows"]:
                if r[0]:
                    want[(block["File Path"], int(r[0]))] = dict(zip(["_line", "_text"] + h[2:], r, strict=True))
        assert set(got) == set(want)
        for key, w in want.items():
            g = got[key]
            assert g["samples"] == num(w["Warp Stall Sampling (All Samples)"]), key
            assert g["inst_executed"] == num(w["Instructions Executed"]), key
            assert g["l2_sectors"] == num(w["L2 Theoretical Sectors Global"]), key
            assert g["l2_excess_sectors"] == num(w["L2 Theoretical Sectors Global Excessive"]), key
            page_stalls = {STALLS[c[6:]]: num(w[c]) for c in w if c.startswith("stall_") and "(" not in c}
            if g["samples"]:
                best = max(page_stalls.values())
                assert page_stalls[g["top_stall"]] == best, key


def test_planted_lines(store):
    """The strided gather holds every excess sector, the math chain most samples; the
    report carries the program's source, so the rows name the lines' text."""
    rows = store.query("ncu-source", run="ncu_source", limit=0)
    assert rows["launches"].unique().to_list() == [2]
    by_text = {r["source"].split("#")[-1].strip() if r["source"] else None: r for r in rows.iter_rows(named=True)}
    gather, chain, coalesced = by_text["PLANT gather"], by_text["PLANT chain"], by_text["PLANT coalesced"]
    assert rows["samples"][0] == chain["samples"] and chain["samples_pct"] > 50
    assert gather["l2_excess_sectors"] == rows["l2_excess_sectors"].sum() > 0
    assert gather["l2_excess_pct"] > 80  # 4 bytes used of each 32-byte sector: 7/8 excess
    assert coalesced["l2_excess_sectors"] == 0 and coalesced["l2_sectors"] > 0
    assert gather["top_stall"] == "lg_throttle"
    assert rows["samples_pct"].sum() == pytest.approx(100)
    assert chain["source"].strip().startswith("a = a * 0.999 + tl.sin(a)")
    # by instruction: each row one address, the lines' rows add up
    ins = store.query("ncu-source", run="ncu_source", by="instruction", limit=0)
    assert ins.filter(pl.col("line") == gather["line"])["l2_excess_sectors"].sum() == gather["l2_excess_sectors"]
    assert ins["samples"].sum() == rows["samples"].sum()
    assert ins.select("name", "pc_offset").is_unique().all() and ins["sass"].null_count() == 0


def test_library_kernels_have_no_lines(store):
    rows = store.query("ncu-source", run="ncu_full", kernel="nvjet", limit=0)
    assert rows.height == 1 and rows["line"][0] is None and rows["samples"][0] > 0
    assert store.query("ncu-source", run="ncu_full", kernel="softmax", limit=0)["line"].null_count() == 0


def test_a_launch_the_run_does_not_have_is_an_error(store):
    """launch=ID names a launch as kernel= names a kernel: an ID the run does not have (a typo, a
    launch of another run) is an error that says where the IDs are, not an answer of no rows
    that reads as "nothing ran"."""
    ids = store.query("ncu-kernels", run="ncu_full", limit=0)["kernel_id"]
    with pytest.raises(QueryError, match=rf"^ncu-source: no launch of the run has ID {ids.max() + 1} "
                                         r"\(`tracekit query ncu-kernels` lists them: kernel_id\)$"):
        store.query("ncu-source", run="ncu_full", launch=ids.max() + 1)
    # a launch the run has, of another kernel than kernel= asks: the filters leave nothing
    nvjet = store.query("ncu-kernels", run="ncu_full", kernel="nvjet", limit=0)["kernel_id"][0]
    assert store.query("ncu-source", run="ncu_full", launch=nvjet, kernel="softmax").height == 0


def test_runs_without_source_counters(store, tmp_path):
    tk = tracekit.open(tmp_path / "s.duckdb")
    tk.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz")  # no SourceCounters section
    with pytest.raises(QueryError, match="instruction-level data; profile with ncu --section SourceCounters"):
        tk.query("ncu-source")
    tk.ingest(DATA / "ncu_source" / "raw.csv.xz", name="raw")  # ncu's raw page carries none
    with pytest.raises(QueryError, match=r"^ncu-source: run \d+ \(raw\) has no instruction-level data"):
        tk.query("ncu-source", run="raw")
    tk.close()

