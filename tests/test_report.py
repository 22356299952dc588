"""`tracekit report`: one self-contained HTML file per run, checked as HTML and in a real
browser (headless Chromium, network off): no console errors, every chart drew its data
marks, a screenshot that is not blank, tables that sort.

Set TRACEKIT_SCREENSHOTS=DIR to keep the screenshots for a human to look at.
"""

from __future__ import annotations

import csv
import html
import json
import lzma
import math
import os
import re
import statistics
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import COMPARISONS_OVERFLOW_JS, chromium, load, png_pixels
from conftest import captured_again

import tracekit
from tracekit import charts, report
from tracekit import diff as D
from tracekit.cli import main as cli_main

DATA = Path(__file__).parent / "data"
SWEEP = sorted((DATA / "hstu_sweep" / "runs").iterdir())
DONE = "window.tracekitReport && window.tracekitReport.done"
DIFF_BASE, DIFF_NEW = DATA / "nsys_diff_base_a", DATA / "nsys_diff_regressed"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Five stores' worth of runs in one: an nsys capture (run folder), two ncu reports
    (full set; SpeedOfLight_RooflineChart only), a 16-point sweep, and one program captured
    before and after planted changes (tests/data/nsys_diff_regressed/PLANT.md)."""
    db = tmp_path_factory.mktemp("report") / "r.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "hstu_capture_nsys", name="hstu")
        tk.ingest(DATA / "ncu_full" / "report.ncu-rep.xz", name="ncu_full")
        tk.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="ncu_sections")
        for run in SWEEP:
            tk.ingest(run)
        tk.ingest(DIFF_BASE / "export.sqlite.xz", name="diff_base")
        tk.ingest(DIFF_NEW / "export.sqlite.xz", name="diff_regressed")
    return db


@pytest.fixture(scope="module")
def reports(store, tmp_path_factory):
    folder = tmp_path_factory.mktemp("html")
    out = {}
    with tracekit.open(store, read_only=True) as tk:
        for name, run in (("nsys", "hstu"), ("ncu", "ncu_full"), ("ncu_sections", "ncu_sections"),
                          ("sweep", SWEEP[-1].name)):
            out[name] = report.write_report(tk, folder / f"{name}.html", run=run)
        out["diff"] = report.write_report(tk, folder / "diff.html", run="diff_regressed", vs="diff_base")
    return out


class _Tables(HTMLParser):
    """Sections (by id) -> their tables as header texts, header titles (the query's column
    names) and rows of (text, data-v, title) per cell; plus every src/href."""

    def __init__(self):
        super().__init__()
        self.sections: dict[str, list[dict]] = {}
        self.links: list[str] = []
        self.charts: list[str] = []
        self.section = None
        self.cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href"):
            if k in a:
                self.links.append(a[k])
        if tag == "section":
            self.section = a["id"]
            self.sections[self.section] = []
        elif tag == "table":
            self.sections[self.section].append({"headers": [], "columns": [], "rows": []})
        elif tag == "tr" and self.section and self.sections[self.section]:
            self.sections[self.section][-1]["rows"].append([])
        elif tag in ("td", "th"):
            self.cell = [tag, "", a.get("data-v"), a.get("title")]
        elif tag == "div" and "data-spec" in a:
            self.charts.append(a["id"])

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[1] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            t = self.sections[self.section][-1]
            if self.cell[0] == "th":
                t["headers"].append(self.cell[1])
                t["columns"].append(self.cell[3])
                t["rows"].pop() if t["rows"] and not t["rows"][-1] else None
            else:
                t["rows"][-1].append(tuple(self.cell[1:]))
            self.cell = None


def _parse(path: Path) -> _Tables:
    p = _Tables()
    p.feed(path.read_text())
    return p


def _osrt_table(page, fixture: Path) -> tuple[list[tuple], list[tuple]]:
    """The report's OS runtime table as (name, calls, total ns) rows, and the fixture's
    nsys stats osrt_sum.csv as the same."""
    with open(fixture / "stats" / "osrt_sum.csv") as f:
        osrt = [(r["Name"], int(r["Num Calls"]), int(r["Total Time (ns)"])) for r in csv.DictReader(f)]
    (table,) = page.sections["osrt"]
    got = [(t, int(c), int(n)) for (t, c, n) in zip([title for _, _, title in _column(table, "name")],
                                                    [v for _, v, _ in _column(table, "calls")],
                                                    [v for _, v, _ in _column(table, "total_ns")], strict=True)]
    return got, osrt


def _timeline_bars(tk, run: str) -> int:
    """The bars of the report's timeline of ``run``: the NVTX ranges and GPU ops (those its
    capture traced) in the window of its typical request, as export trace takes it."""
    from tracekit.charts import typical_instance
    from tracekit.registry import untraced
    from tracekit.trace import resolve_window

    run_id = int(tk.query("run-info", run=run)["run_id"][0])
    pick = typical_instance(tk, run_id)
    w = resolve_window(tk, run_id, nvtx=pick.name, instance=pick.instance) if pick else resolve_window(tk, run_id)
    missing = {what for what, _ in untraced(tk, run_id)}
    return sum(tk.query(q, run=run_id, from_ns=w.start_ns, to_ns=w.end_ns, limit=0).height
               for q, what in (("nvtx-ranges", "NVTX"), ("gpu-trace", "CUDA")) if what not in missing)


def _column(table: dict, name: str) -> list[tuple]:
    i = table["columns"].index(name)
    return [row[i] for row in table["rows"]]


def test_nsys_report_sections_and_numbers(reports):
    page = _parse(reports["nsys"])
    assert list(page.sections) == ["top-kernels", "kernel-durations", "kernels-by-nvtx", "nvtx-gpu", "gpu-utilization",
                                   "idle-gaps", "nsys-rules", "launch-overhead", "api", "memcpy", "osrt", "osrt-stacks", "timeline"]
    assert page.charts == ["chart-top-kernels", "chart-kernel-durations", "chart-kernels-by-nvtx", "chart-api",
                           "chart-timeline"]
    # the top-kernels table is nsys stats' cuda_gpu_kern_sum: full names in the title, exact ns in data-v
    with open(DATA / "hstu_capture_nsys" / "stats" / "cuda_gpu_kern_sum.csv") as f:
        nsys = [(r["Name"], int(r["Instances"]), int(r["Total Time (ns)"])) for r in csv.DictReader(f)]
    (table,) = page.sections["top-kernels"]
    names = [title for _, _, title in _column(table, "name")]
    totals = [int(v) for _, v, _ in _column(table, "total_ns")]
    instances = [int(v) for _, v, _ in _column(table, "instances")]
    assert list(zip(names, instances, totals, strict=True)) == nsys[:20]
    assert table["headers"][:3] == ["name", "instances", "total [ms]"]
    # shortened names never read alike
    shown = [text for text, _, _ in _column(table, "name")]
    assert len(set(shown)) == len(shown) and max(map(len, shown)) <= 70
    # the OS runtime table is nsys stats' osrt_sum
    got, osrt = _osrt_table(page, DATA / "hstu_capture_nsys")
    assert got == osrt[:10] and osrt
    # the header: GPU, driver and clocks as the capture recorded them (meta.json)
    meta = json.loads((DATA / "hstu_capture_nsys" / "meta.json").read_text())
    text = reports["nsys"].read_text()
    assert meta["gpu"]["driver"] in text and f"SM max {meta['gpu']['clocks_max_sm_mhz']:,.0f} MHz" in text
    assert "bs=8 · nc=1024" in text


def test_ncu_report_and_a_roofline_the_report_cannot_draw(reports, store):
    page = _parse(reports["ncu"])
    assert list(page.sections) == ["roofline", "hierarchical-roofline", "occupancy", "speed-of-light",
                                   "memory-workload", "compute-workload", "ncu-rules", "warp-stalls", "ncu-source"]
    (cwa,) = page.sections["compute-workload"]
    assert [t for t, _, _ in _column(cwa, "top_pipe")][0] == "tensor_op_hmma"  # (the bf16 GEMM: 95 % of its cycles)
    (mem,) = page.sections["memory-workload"]
    assert [float(v) for _, v, _ in _column(mem, "l2_hit_rate_pct")][0] == pytest.approx(70.93, abs=0.005)
    assert page.charts == ["chart-roofline", "chart-hierarchical-roofline", "chart-occupancy", "chart-warp-stalls",
                           "chart-ncu-source"]
    # the source lines where warps waited most: the query's first rows, shares of each kernel's samples
    (hot,) = page.sections["ncu-source"]
    with tracekit.open(store, read_only=True) as tk:
        want = tk.query("ncu-source", run="ncu_full", limit=15)
    assert [float(v) for _, v, _ in _column(hot, "samples")] == want["samples"].to_list()
    (occ,) = page.sections["occupancy"]
    assert [t for t, _, _ in _column(occ, "limiter")] == ["registers, shared_mem", "registers", "none", "none"]
    with tracekit.open(store, read_only=True) as tk:
        occupancy = tk.query("occupancy", run="ncu_full")
    assert [t or None for t, _, _ in _column(occ, "next_needs")] == occupancy["next_needs"].to_list()
    assert occupancy["next_needs"][1] == "registers 40 -> 32" and occupancy["next_occupancy_pct"][1] == 100
    assert [int(v) for _, v, _ in _column(occ, "best_block_size")] == occupancy["best_block_size"].to_list()
    # each launch's memory level, as the query names it
    (hier,) = page.sections["hierarchical-roofline"]
    with tracekit.open(store, read_only=True) as tk:
        want = tk.query("hierarchical-roofline", run="ncu_full")
    assert [t for t, _, _ in _column(hier, "limiter")] == want["limiter"].to_list() == ["compute", "DRAM", "DRAM", "DRAM"]
    assert [float(v) for _, v, _ in _column(hier, "roof_pct")] == want["roof_pct"].to_list()
    # what ncu suggests: the details page's OPT/WRN/ERR rule rows, most time saved first,
    # each message whole (wrapped, not cut)
    (rules,) = page.sections["ncu-rules"]
    with lzma.open(DATA / "ncu_full" / "details.csv.xz", "rt") as f:
        printed = {r["Rule Description"] for r in csv.DictReader(f) if r["Rule Type"] in ("OPT", "WRN", "ERR")}
    messages = [t for t, _, _ in _column(rules, "message")]
    assert len(messages) == 15 and set(messages) <= printed
    saved = [float(v) for _, v, _ in _column(rules, "est_saved_ns") if v]
    assert saved == sorted(saved, reverse=True) and len(saved) == 15
    assert '<td class="prose">' in reports["ncu"].read_text()
    # the roofline's subtitle (its launches ran at different clocks: 275 characters) in lines within the
    # page, as `tracekit chart` draws it (Vega does not wrap a title)
    specs = {m[1]: json.loads(m[2]) for m in re.finditer(r'<script type="application/json" id="spec-([^"]+)">(.*?)'
                                                         r'</script>', reports["ncu"].read_text(), re.S)}
    subtitle = specs["roofline"]["title"]["subtitle"]
    assert len(subtitle) > 1 and " ".join(subtitle).endswith("which is against its own clock's ceiling")
    for spec in specs.values():
        sub = spec.get("title", {}).get("subtitle", []) if isinstance(spec.get("title"), dict) else []
        assert all(len(line) <= charts.SUBTITLE_CHARS for line in ([sub] if isinstance(sub, str) else sub))
    # a report made with --section SpeedOfLight_RooflineChart has no FP16/tensor counters:
    # the section says so instead of a wrong chart, and the rest of the report is there
    text = reports["ncu_sections"].read_text()
    page = _parse(reports["ncu_sections"])
    assert "chart-roofline" not in page.charts and "chart-occupancy" in page.charts
    assert re.search(r'<p class="note">roofline: nothing to plot', text)
    # the roofline by memory level draws the FP32 work it has counters of, at DRAM alone
    assert "chart-hierarchical-roofline" in page.charts
    # nor warp states or instruction-level data: those sections say what to profile with
    assert "chart-warp-stalls" not in page.charts and "chart-ncu-source" not in page.charts
    assert re.search(r'<p class="note">ncu-source: run \d+ \(ncu_sections\) has no instruction-level data; '
                     r'profile with ncu --section SourceCounters', text)
    assert re.search(r'<p class="note">warp-stalls: run \d+ \(ncu_sections\) has no warp state metrics; profile '
                     r'with ncu --section WarpStateStats', text)


def test_unified_memory_section(tmp_path):
    """A run captured with Unified Memory page-fault tracing has the section, its rows nsys's
    um_sum in nsys's order (the other runs leave it out without a word: the nsys report above)."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(DATA / "nsys_memops" / "export.sqlite.xz", name="memops")
        page = _parse(report.write_report(tk, tmp_path / "um.html", run="memops"))
    assert list(page.sections).index("unified-memory") == list(page.sections).index("memcpy") + 1
    (table,) = page.sections["unified-memory"]
    with open(DATA / "nsys_memops" / "stats" / "um_sum.csv") as f:
        nsys = [(r["Virtual Address"], r["CPU Page Faults"], r[" GPU Page Faults"]) for r in csv.DictReader(f)]
    got = zip(*(_column(table, c) for c in ("address", "cpu_faults", "gpu_faults")), strict=True)
    assert [tuple(shown for shown, _, _ in row) for row in got] == nsys


def test_cpu_sections(tmp_path):
    """A run captured with CPU sampling has the CPU time by function (cpu-hotspots' rows, the
    planted functions first), by NVTX range and the call stacks' flame graph, after the OS
    runtime calls;
    drawn in a browser, a box per frame the flame graph keeps. A run without samples leaves
    both out without a word (the nsys report above)."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(DATA / "nsys_cpu_hot" / "export.sqlite.xz", name="hot")
        out = report.write_report(tk, tmp_path / "cpu.html", run="hot")
        flame = tk.query("cpu-stacks", run="hot", limit=0)
    page = _parse(out)
    keys = list(page.sections)
    assert keys.index("cpu-hotspots") == keys.index("osrt-stacks") + 1
    assert keys.index("nvtx-cpu") == keys.index("cpu-hotspots") + 1 and keys.index("cpu-flame") == keys.index("nvtx-cpu") + 1
    (stages,) = page.sections["nvtx-cpu"]
    assert [shown for shown, _, _ in _column(stages, "path")] == ["step", "step/prepare", "step/pack", "step/launch"]
    (table,) = page.sections["cpu-hotspots"]
    assert {shown for shown, _, _ in _column(table, "function")[:4]} == {
        "prepare_batch(float)", "mix_row(float)", "background_hash(float)", "pack_inputs(float, long)"}
    assert page.sections["cpu-flame"] == [] and {"chart-cpu-hotspots", "chart-cpu-flame"} <= set(page.charts)
    if chromium() is None:
        return
    page = load(out, DONE, "window.tracekitReport")
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
    state = page.value
    assert state["rendered"] == state["charts"] and state["failed"] == 0
    boxes = len(_flame_rows(flame))
    assert state["marks"]["chart-cpu-flame"] == 2 * boxes and boxes > 20  # (a box and its label each)


def test_a_time_too_small_for_its_columns_unit_does_not_read_as_zero(tmp_path):
    """nsys_cpu_hot's CUDA API calls: cuLibraryGetKernel's 227 ns in a column of ms (beside
    cudaMalloc's 167 ms) reads <0.001, not 0.000; no time that is not zero reads as zero."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(DATA / "nsys_cpu_hot" / "export.sqlite.xz", name="hot")
        out = report.write_report(tk, tmp_path / "hot.html", run="hot")
    page = _parse(out)
    small, zero = [], []
    for key, tables in page.sections.items():
        for t in tables:
            for head, col in zip(t["headers"], t["columns"], strict=True):
                if not (col or "").endswith("_ns"):
                    continue
                for shown, v, _ in _column(t, col):
                    if v is not None and float(v) != 0:
                        (small if shown == "<0.001" else zero if float(shown.replace(",", "")) == 0 else []).append(
                            (key, head, shown, v))
    assert zero == [] and any(k == "api" and h.endswith("[ms]") for k, h, _, _ in small), (zero, small)


def _flame_rows(stacks):
    """The frames the flame graph of ``stacks`` (cpu-stacks) draws: those at least
    FLAME_MIN_SHARE of the unwound samples wide."""
    total = stacks["samples"].sum()
    widths: dict[tuple, int] = {}
    for stack, n in zip(stacks["stack"], stacks["samples"], strict=True):
        frames = stack.split(";")
        for i in range(len(frames)):
            widths[tuple(frames[:i + 1])] = widths.get(tuple(frames[:i + 1]), 0) + n
    return [k for k, w in widths.items() if w >= charts.FLAME_MIN_SHARE * total]


def test_sweep_report(reports):
    page = _parse(reports["sweep"])
    # (no kernels: its points were timed without a profiler, no section that could only say so)
    assert list(page.sections) == ["sweep-grid", "sweep-lines"]
    (lat,) = page.sections["sweep-lines"]
    # the 16 points of the sweep; not the nsys capture's timed requests (a run outside the sweep)
    assert [t for t, _, _ in _column(lat, "tool")] == ["none"] * 16
    want = {}  # the median of each point's timed requests, from the run folders' requests.csv
    for run in SWEEP:
        with open(run / "requests.csv") as f:
            rows = [r for r in csv.DictReader(f) if r["phase"] == "timed"]
        want[(int(rows[0]["bs"]), int(rows[0]["nc"]))] = statistics.median(float(r["latency_ms"]) for r in rows)
    got = {(int(bs[1]), int(nc[1])): float(med[1]) for bs, nc, med, tool in zip(
        _column(lat, "bs"), _column(lat, "nc"), _column(lat, "median_ms"), _column(lat, "tool"), strict=True)
        if tool[0] == "none"}
    assert got == pytest.approx(want)
    assert "sweep-20261122T012018.110Z" in reports["sweep"].read_text()


def _medians(sweep: Path) -> dict[tuple[int, int], float]:
    """(bs, nc) -> the median of the timed requests of each run folder of a sweep's folder."""
    out = {}
    for run in sorted((sweep / "runs").iterdir()):
        with open(run / "requests.csv") as f:
            rows = [r for r in csv.DictReader(f) if r["phase"] == "timed"]
        out[(int(rows[0]["bs"]), int(rows[0]["nc"]))] = statistics.median(float(r["latency_ms"]) for r in rows)
    return out


def test_a_sweep_with_a_point_captured_under_nsys_shows_its_kernels(tmp_path):
    """The bundled capture (bs 8 x nc 1024 under nsys) as a point of a sweep: its report
    holds the sweep's sections, its kernels per point among them, as sweep-kernels gives
    them (a sweep timed without a profiler leaves that section out: test_sweep_report)."""
    import shutil

    point = shutil.copytree(DATA / "hstu_capture_nsys", tmp_path / "sweep-x" / "runs" / "p-bs8-nc1024-nsys")
    meta = json.loads((point / "meta.json").read_text())
    meta["params"]["sweep"] = "sweep-x"
    (point / "meta.json").write_text(json.dumps(meta))
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(tmp_path / "sweep-x")]) == 0
    assert cli_main(["--db", str(db), "report", "--run", "1", "-o", str(tmp_path / "r.html")]) == 0
    page = _parse(tmp_path / "r.html")
    assert [k for k in page.sections if k.startswith("sweep")] == ["sweep-grid", "sweep-lines", "sweep-kernels",
                                                                   "sweep-points"]
    (table,) = page.sections["sweep-kernels"]
    with tracekit.open(db, read_only=True) as tk:
        want = tk.query("sweep-kernels", sweep="sweep-x", limit=5)
    assert [r[0] for r in _column(table, "rank")] == [str(r) for r in want["rank"]] and want.height == 5


def test_sweep_report_shows_its_own_sweep(tmp_path):
    """The report of a point of sweep c, with sweep b (same grid) ingested after it, shows
    c's grid, in its table and its heatmap: not b's points, the latest per point in the store."""
    c, b = DATA / "sweep_pair" / "c", DATA / "sweep_pair" / "b"
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(c), str(b)]) == 0
    assert cli_main(["--db", str(db), "report", "--run", "1", "-o", str(tmp_path / "r.html")]) == 0
    page = _parse(tmp_path / "r.html")
    (lat,) = page.sections["sweep-lines"]
    got = {(int(bs[1]), int(nc[1])): float(med[1])
           for bs, nc, med in zip(_column(lat, "bs"), _column(lat, "nc"), _column(lat, "median_ms"), strict=True)}
    want, other = _medians(c), _medians(b)
    assert got == pytest.approx(want) and min(want.values()) > 1.5 * max(other.values())  # (c: 12-14 ms, b: 4-6)
    text = (tmp_path / "r.html").read_text()
    for v in want.values():  # the tables' and the heatmap's data: c's medians, none of b's
        assert text.count(repr(v)) >= 2
    for v in other.values():
        assert repr(v) not in text
    # the queries: the latest sweep by default (b, ingested last), another by a run of it or its id
    with tracekit.open(db, read_only=True) as tk:
        def medians(**kw):
            df = tk.query("sweep-latency", limit=0, **kw)
            return dict(zip(zip(df["bs"], df["nc"], strict=True), df["median_ms"], strict=True))

        assert medians() == pytest.approx(other)
        assert medians(sweep=1) == pytest.approx(want) == medians(sweep="sweep-20261124T195459.720Z")
        assert tk.query("sweep-requests", sweep=1, limit=0).height == 4 * 40
        with pytest.raises(tracekit.errors.QueryError, match="no sweep or run 'nope'"):
            tk.query("sweep-latency", sweep="nope")


def test_report_vs_base_shows_the_planted_changes(reports):
    """--vs: the comparison comes first; its table flags exactly the plant's kernels, with
    the plant's verdicts, and the rest of the report is the run's own."""
    plant = json.loads((DIFF_NEW / "plant.json").read_text())
    page = _parse(reports["diff"])
    assert list(page.sections) == ["diff", "diff-timeline", "top-kernels", "kernel-durations", "kernels-by-nvtx", "nvtx-gpu",
                                   "gpu-utilization", "idle-gaps", "nsys-rules", "launch-overhead", "api", "memcpy", "osrt",
                                   "osrt-stacks", "timeline"]
    assert page.charts[0] == "chart-diff"
    text = reports["diff"].read_text()
    assert re.search(r"<dt>compared with</dt><dd>run \d+ \(diff_base\)", text)
    (table,) = page.sections["diff"]
    assert table["columns"][:8] == ["scope", "key", "metric", "base", "new", "delta_pct", "interval", "verdict"]
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
    flagged = {}
    for r in rows:
        if r["scope"][0] == "kernel" and r["verdict"][0] != "unchanged":
            flagged.setdefault(r["key"][2], set()).add((r["metric"][0], r["verdict"][0]))
    want = {c["key"]: c for c in plant["changes"]}
    assert set(flagged) == set(want)  # the key cell's title is the full name, as nsys prints it
    for key, c in want.items():
        assert (c["metric"], c["expected_verdict"]) in flagged[key], (key, flagged[key])
    # verdicts are coloured by class; the change column sorts by its exact value
    assert 'class="verdict v-regressed">regressed</td>' in text and 'class="verdict v-added">added</td>' in text
    changes = [float(v) for _, v, _ in (r["delta_pct"] for r in rows) if v is not None]
    assert changes and all(math.isfinite(v) for v in changes)



def test_the_comparison_counts_and_shows_verdicts_as_diff_does(store, reports, capsys, monkeypatch):
    """Host-timed values (API durations, NVTX wall time) are held from any verdict: diff's table
    shows them as not judged and counts them so; the report's comparison does the same, in its
    table and in the count its intro opens with (not `unchanged` for an API's +72 % time)."""
    monkeypatch.setenv("COLUMNS", "200")
    assert cli_main(["--db", str(store), "diff", "diff_base", "diff_regressed"]) == 0
    out = capsys.readouterr().out.splitlines()
    counts = out[out.index("what moved:") - 1].split("; ")[0]
    assert "not judged" in counts
    text = reports["diff"].read_text()
    assert re.search(rf"This run against run \d+ \(diff_base\): {re.escape(counts)}\.", html.unescape(text))
    (table,) = _parse(reports["diff"]).sections["diff"]
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
    host = [r for r in rows if r["note"][0] == "host-timed, not judged"]
    assert host and {r["verdict"][0] for r in host} == {"not judged"}
    assert 'class="verdict v-not-judged">not judged</td>' in text

def test_the_comparison_says_how_its_scopes_were_judged(store, reports, tmp_path):
    """The comparison's intro names the rule of each scope it has, and only those: rank tests
    for nsys runs, ncu's noise at the launch's duration for ncu reports."""
    def intro(path):
        return html.unescape(re.search(r'<section id="diff".*?<p[^>]*>(.*?)</p>', path.read_text(), re.S).group(1))

    nsys = intro(reports["diff"])
    assert "Mann-Whitney" in nsys and "host-timed" in nsys and "ncu's own noise" not in nsys
    with tracekit.open(store, read_only=True) as tk:
        path = report.write_report(tk, tmp_path / "ncu_vs.html", run="ncu_sections", vs="ncu_full")
    ncu = intro(path)
    assert "ncu's own noise" in ncu and f"{D.NCU_NOISE_NS:g} ns" in ncu
    assert "Mann-Whitney" not in ncu and "host-timed" not in ncu


def test_report_is_self_contained(reports):
    for path in reports.values():
        text = path.read_text()
        page = _parse(path)
        # no script, stylesheet or image from elsewhere (tags as the HTML parser sees them:
        # script bodies are text): only in-page anchors. The browser test checks requests.
        assert all(link.startswith("#") for link in page.links), page.links
        assert "vegaEmbed" in text and text.count("<script") >= 2


def test_cli_report(store, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli_main(["--db", str(store), "report", "--run", "ncu_full", "-o", str(out)]) == 0
    assert out.exists() and "wrote" in capsys.readouterr().out
    bad = tmp_path / "bad.html"
    assert cli_main(["--db", str(store), "report", "--run", "nope", "-o", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "no run 'nope'" in err and err.count("\n") == 1 and not bad.exists()
    assert cli_main(["--db", str(store), "report", "--run", "all", "-o", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "report answers for one run at a time" in err and err.count("\n") == 1 and not bad.exists()
    assert cli_main(["--db", str(store), "report", "--run", "diff_regressed", "--vs", "nope", "-o", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "no run or sweep 'nope'" in err and err.count("\n") == 1 and not bad.exists()
    png = tmp_path / "r.png"
    assert cli_main(["--db", str(store), "report", "--run", "ncu_full", "-o", str(png)]) == 2
    err = capsys.readouterr().err
    assert "a report is an HTML page; name a .html file" in err and err.count("\n") == 1 and not png.exists()
    before = store.read_bytes()
    assert cli_main(["--db", str(store), "report", "--run", "ncu_full", "-o", str(store)]) == 2
    assert "this is the store" in capsys.readouterr().err and store.read_bytes() == before


@pytest.mark.parametrize("cmd", [
    ["report", "--run", "hstu", "--vs", "{file}", "-o", "{out}"],
    ["diff", "{file}", "hstu"],
    ["diff", "hstu", "{file}"],
])
def test_a_file_the_run_cannot_be_compared_with_is_not_ingested(store, tmp_path, capsys, cmd):
    """--vs FILE (and diff's file sides) of a kind the other side shares no scope with: one
    error, and the store as it was (the file is read, checked, not written)."""
    db = tmp_path / "r.duckdb"
    db.write_bytes(store.read_bytes())
    out = tmp_path / "r.html"
    file = DATA / "ncu_diff_a" / "report.ncu-rep.xz"
    args = [a.format(file=file, out=out) for a in cmd]
    assert cli_main(["--db", str(db), *args]) == 2
    err = capsys.readouterr().err
    assert f"{file} [ncu]" in err and "share no scope to compare" in err and err.count("\n") == 1
    assert db.read_bytes() == store.read_bytes() and not out.exists()
    # a file that can be compared lands as before
    assert cli_main(["--db", str(db), "report", "--run", "hstu", "--vs", str(DATA / "nsys_diff_base_b"
                                                                              / "export.sqlite.xz"), "-o", str(out)]) == 0
    with tracekit.open(db, read_only=True) as tk:
        assert tk.sql("SELECT count(*) AS n FROM runs WHERE kind = 'ncu'")["n"][0] == 2


@pytest.fixture(scope="module")
def cpu_reports(tmp_path_factory):
    """Reports of two captures of a host program without CUDA (nsys -t nvtx,osrt; 40 and 60
    batches): the run alone, and the second against the first."""
    folder = tmp_path_factory.mktemp("cpu")
    out = {}
    with tracekit.open(folder / "c.duckdb") as tk:
        tk.ingest(DATA / "nsys_cpu_only" / "export.sqlite.xz", name="cpu_only")
        tk.ingest(DATA / "nsys_cpu_only_more" / "export.sqlite.xz", name="cpu_only_more")
        out["bars"] = {run: _timeline_bars(tk, run) for run in ("cpu_only", "cpu_only_more")}
        out["cpu"] = report.write_report(tk, folder / "cpu.html", run="cpu_only")
        out["cpu_vs"] = report.write_report(tk, folder / "cpu_vs.html", run="cpu_only_more", vs="cpu_only")
    return out


def test_report_of_a_capture_without_cuda(cpu_reports):
    """No CUDA trace: the OS runtime calls and the timeline, and a header line that says
    the run was captured without CUDA tracing and which sections that leaves out (no empty
    kernel tables, no errors); with --vs, the comparison of the NVTX ranges first."""
    page = _parse(cpu_reports["cpu"])
    assert list(page.sections) == ["osrt", "osrt-stacks", "timeline"] and page.charts == ["chart-timeline"]
    text = cpu_reports["cpu"].read_text()
    assert ("<dt>no CUDA trace</dt><dd>captured without CUDA tracing (capture with nsys -t cuda); left out: "
            "Top kernels, Kernel durations, Kernel time by NVTX path, NVTX ranges on the GPU, GPU utilization, "
            "Longest idle gaps, What nsys analyze finds, Launch overhead, CUDA API calls, Memory operations</dd>") in text
    assert '<p class="note">' not in text
    got, osrt = _osrt_table(page, DATA / "nsys_cpu_only")
    assert got == osrt[:10] and "pthread_cond_wait" in [name for name, _, _ in got]
    page = _parse(cpu_reports["cpu_vs"])
    assert list(page.sections) == ["diff", "diff-timeline", "osrt", "osrt-stacks", "timeline"]
    (table,) = page.sections["diff"]
    assert {r[0][0] for r in table["rows"]} == {"nvtx"}


def test_report_of_a_capture_whose_window_missed_the_gpu_work(tmp_path, capsys):
    """CUDA traced and none recorded (nsys_window_missed: the capture range a host-only NVTX
    range after the GPU work): the sections about CUDA events are left out as of a capture
    without CUDA, with one header line saying why (no empty kernel tables, no "Nothing found"
    of nsys analyze's rules, which nsys itself skips); a section about events the run traced
    and holds none of (capture_range's OS runtime calls) says so in its note, not on the
    terminal as well."""
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(DATA / "nsys_window_missed" / "export.sqlite.xz", name="missed")
        tk.ingest(DATA / "nsys_capture_range" / "export.sqlite.xz", name="ranged")
        missed = report.write_report(tk, tmp_path / "missed.html", run="missed")
    page = _parse(missed)
    assert list(page.sections) == ["osrt", "osrt-stacks", "timeline"]
    assert ("<dt>no CUDA event</dt><dd>the run holds no CUDA event at all (no API call, kernel or copy), though its "
            "capture traced CUDA: the capture&#x27;s window (nsys --delay, --duration, --capture-range) held none of "
            "the program&#x27;s GPU work, or the work ran in a process nsys did not follow; left out: Top kernels, "
            "Kernel durations, Kernel time by NVTX path, NVTX ranges on the GPU, GPU utilization, Longest idle gaps, "
            "What nsys analyze finds, Launch overhead, CUDA API calls, Memory operations</dd>") in missed.read_text()
    assert '<p class="note">' not in missed.read_text()
    capsys.readouterr()
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "report", "--run", "ranged", "-o", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr().err == ""
    text = (tmp_path / "r.html").read_text()
    for key in ("osrt", "osrt-stacks"):
        section = text[text.index(f'<section id="{key}">'):]
        assert section[:section.index("</section>")].count(
            '<p class="note">run 2 (ranged) holds no OS runtime calls: its capture traced OS runtime and recorded '
            "none</p>") == 1
    assert "top-kernels" in _parse(tmp_path / "r.html").sections


RANKS = DATA / "nsys_ranks"  # a real 4-rank job, rank 2 planted as a straggler in step/forward (PLANT.md)
RANK_PLANT = json.loads((RANKS / "plant.json").read_text())


@pytest.fixture(scope="module")
def rank_reports(tmp_path_factory):
    """The reports of rank 1 of the real 4-rank job and of a run of another program ingested
    beside it (no rank), and the job's rank-summary and stragglers as the queries give them."""
    folder = tmp_path_factory.mktemp("ranks")
    out = {}
    with tracekit.open(folder / "j.duckdb") as tk:
        tk.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz", name="alone")
        for v in sorted(RANK_PLANT["ranks"].values(), key=lambda v: v["rank"]):
            tk.ingest(RANKS / v["export"], name=f"r{v['rank']}")
        out["summary"] = tk.query("rank-summary", run="r1")
        out["stragglers"] = tk.query("stragglers", run="r1", limit=20)
        out["cells"] = tk.query("rank-ranges", run="r1").height
        out["rank"] = report.write_report(tk, folder / "rank.html", run="r1")
        out["alone"] = report.write_report(tk, folder / "alone.html", run="alone")
    return out


def test_report_of_a_rank_shows_its_job_first(rank_reports):
    """A rank's report opens with its job: every rank side by side, the stragglers (the
    planted one: rank 2 slowest in step/forward) and the rank x NVTX path heatmap; then the
    rank's own sections. A run of no job gets none of them."""
    page = _parse(rank_reports["rank"])
    assert list(page.sections) == ["rank-summary", "stragglers", "rank-heatmap", "job-timeline", "top-kernels",
                                   "kernel-durations", "kernels-by-nvtx", "nvtx-gpu", "gpu-utilization", "idle-gaps",
                                   "nsys-rules", "launch-overhead", "api", "memcpy", "osrt", "osrt-stacks", "timeline"]
    assert page.charts[:3] == ["chart-rank-summary", "chart-stragglers", "chart-rank-heatmap"]
    job = f"{RANKS.resolve()}/rank*/export"  # (the job's default name: its ranks' path, the rank masked)
    assert f"<dt>job</dt><dd>{job}: rank 1 of 4 ranks ingested, 0 to 3</dd>" in rank_reports["rank"].read_text()
    (summary,) = page.sections["rank-summary"]
    want = rank_reports["summary"]
    assert [int(t) for t, _, _ in _column(summary, "rank")] == want["rank"].to_list() == [0, 1, 2, 3]
    assert [int(v) for _, v, _ in _column(summary, "kernel_ns")] == want["kernel_ns"].to_list()
    assert [int(v) for _, v, _ in _column(summary, "gpu_busy_ns")] == want["gpu_busy_ns"].to_list()
    (strag,) = page.sections["stragglers"]
    want = rank_reports["stragglers"]
    rows = list(zip([t for t, _, _ in _column(strag, "path")], [int(t) for t, _, _ in _column(strag, "instance")],
                    [int(t) for t, _, _ in _column(strag, "slowest_rank")], strict=True))
    assert rows == list(want.select("path", "instance", "slowest_rank").iter_rows()) and len(rows) == 20
    planted = RANK_PLANT["straggler"]
    slowest = [r for p, _, r in rows if p == planted["nvtx_path"]]
    assert slowest and statistics.mode(slowest) == planted["rank"]
    assert not page.sections["rank-heatmap"]  # a chart alone: the numbers are rank-ranges'
    alone = _parse(rank_reports["alone"])
    assert not {"rank-summary", "stragglers", "rank-heatmap"} & set(alone.sections)
    assert "<dt>job</dt>" not in rank_reports["alone"].read_text()


def test_report_of_the_only_rank_ingested_of_its_job(tmp_path):
    """One rank of the real 4-rank job: no job sections (nothing to compare it with), and
    a header line that says the other three were not ingested."""
    with tracekit.open(tmp_path / "one.duckdb") as tk:
        tk.ingest(RANKS / "rank2" / "export.sqlite.xz", name="r2")
        path = report.write_report(tk, tmp_path / "one.html", run="r2")
    assert list(_parse(path).sections)[0] == "top-kernels"
    assert (f"<dt>job</dt><dd>{RANKS.resolve()}/rank*/export: rank 2; the only rank of its job ingested; ranks 0-1, 3 not "
            "ingested, world size 4</dd>") in path.read_text()


def test_report_of_a_rank_whose_job_has_a_rank_without_nvtx(tmp_path):
    """Ranks 0 and 1 of the real job and a rank 2 captured with nsys -t cuda (no NVTX): the
    job's GPU time compares, its NVTX ranges do not; the header names rank 2 and what is
    left out (not stragglers of two ranks that read as the whole job), and that the
    launcher's world size has a rank more than were ingested. The report of rank 2 says
    so in one line; that of a rank's run ingested again later names the later run."""
    with tracekit.open(tmp_path / "m.duckdb") as tk:
        for rank, f in enumerate([RANKS / "rank0" / "export.sqlite.xz", RANKS / "rank1" / "export.sqlite.xz",
                                  DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz"]):
            tk.ingest(f, name=f"mixed-r{rank}", params={"rank": str(rank), "job": "mixed"})
        path = report.write_report(tk, tmp_path / "m.html", run="mixed-r0")
        # the job's timeline: rank 2, another program captured days apart, is said to have nothing there
        notes = charts.timeline_data(tk, run="mixed-r0", nvtx="step", ranks="all").notes
        assert notes[0] == "rank 2 was captured without NVTX tracing"
        assert re.fullmatch(r"rank 2: nothing in this span \(its capture began -[0-9,]+\.[0-9]{3} s from this "
                            r"run's\)", notes[1]) and len(notes) == 2
    page = _parse(path)
    assert list(page.sections)[:3] == ["rank-summary", "job-timeline", "top-kernels"]
    assert [int(t) for t, _, _ in _column(page.sections["rank-summary"][0], "rank")] == [0, 1, 2]
    assert ("<dt>ranks without NVTX trace</dt><dd>rank 2 (run 3) of its job was captured without NVTX tracing "
            "(capture every rank with nsys -t nvtx); left out: Stragglers, Time per rank and NVTX path</dd>"
            ) in path.read_text()
    # the real ranks' launcher recorded WORLD_SIZE=4: the header says a rank is missing
    assert "<dt>job</dt><dd>mixed: rank 0 of 3 ranks ingested, 0 to 2; rank 3 not ingested, world size 4</dd>" in path.read_text()
    # the rank without NVTX: one line for its own sections and the job's it leaves out
    with tracekit.open(tmp_path / "m.duckdb") as tk:
        own = report.write_report(tk, tmp_path / "own.html", run="mixed-r2")
        # rank 0 captured again (other content): its first run's report reads the job's latest runs
        again = captured_again(RANKS / "rank0" / "export.sqlite.xz", tmp_path / "again.sqlite")
        tk.ingest(again, name="mixed-r0-again", params={"rank": "0", "job": "mixed"})
        first = report.write_report(tk, tmp_path / "first.html", run="mixed-r0")
    lines = dict(re.findall(r"<dt>([^<]*trace)</dt><dd>([^<]*)</dd>", own.read_text()))
    assert set(lines) == {"no NVTX trace", "no OS runtime trace"}  # (nsys -t cuda)
    assert lines["no NVTX trace"].startswith("captured without NVTX tracing (capture with nsys -t nvtx); left out: Stragglers, "
                                  "Time per rank and NVTX path, ")
    assert "rank-summary" in _parse(own).sections and "stragglers" not in _parse(own).sections
    assert ("<dt>job</dt><dd>mixed: rank 0 (superseded by run 4, the same capture ingested later: the job&#x27;s sections read that run) "
            "of 3 ranks ingested, 0 to 2; rank 3 not ingested, world size 4</dd>") in first.read_text()
    assert list(_parse(first).sections)[:1] == ["rank-summary"]
    # rank 2's export not saying what its capture traced (nsys before 2023.3): it has no NVTX events
    with tracekit.open(tmp_path / "m.duckdb") as tk:
        tk.con.execute("""UPDATE runs SET meta = json_merge_patch(meta, '{"traced_said": false}') WHERE run_id = 3""")
        unsaid = report.write_report(tk, tmp_path / "unsaid.html", run="mixed-r1").read_text()
    assert ("<dt>ranks without NVTX trace</dt><dd>rank 2 (run 3) of its job has no NVTX events, and its export (nsys "
            "before 2023.3) does not say whether they were traced (capture every rank with nsys -t nvtx, or re-export "
            "its .nsys-rep with nsys 2023.3 or later (nsys export -t sqlite) to tell); left out: ") in unsaid


# -- in a real browser ------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (Debian: apt-get install "
                                                             "chromium; CI installs it)")

#: clicks the first numeric column of the first table twice (ascending, then descending)
#: and returns the column's data-v values after each click
_SORT_JS = """(function () {
  var th = document.querySelector("table.sortable th.num");
  var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
  var col = function () { return Array.prototype.map.call(th.closest("table").tBodies[0].rows,
      function (r) { return parseFloat(r.cells[idx].dataset.v); }); };
  th.click(); var first = col(); th.click(); var second = col();
  var prose = Array.prototype.map.call(document.querySelectorAll("table.prose"), function (t) {
      return [t.getBoundingClientRect().right, t.closest("section").getBoundingClientRect().right]; });
  return {state: window.tracekitReport, first: first, second: second, prose: prose};
})()"""


@needs_chromium
@pytest.mark.parametrize("name", ["nsys", "ncu", "sweep"])
def test_report_in_chromium(name, reports, store, tmp_path):
    page = load(reports[name], DONE, _SORT_JS, screenshot=True)
    keep = os.environ.get("TRACEKIT_SCREENSHOTS")
    shot = Path(keep) if keep else tmp_path
    shot.mkdir(parents=True, exist_ok=True)
    (shot / f"report-{name}.png").write_bytes(page.png)
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == []
    assert page.external_requests == []
    state = page.value["state"]
    charts = _parse(reports[name]).charts
    assert state["charts"] == len(charts) == state["rendered"] and state["failed"] == 0 and state["errors"] == []
    assert set(state["marks"]) == set(charts) and all(n > 0 for n in state["marks"].values()), state["marks"]
    with tracekit.open(store, read_only=True) as tk:
        if name == "nsys":  # a bar per NVTX range and GPU op of the timeline's request; bar + label per top kernel
            assert state["marks"]["chart-timeline"] == _timeline_bars(tk, "hstu")
            assert state["marks"]["chart-top-kernels"] == 2 * tk.query("top-kernels", run="hstu").height
        if name == "sweep":  # a cell and its label per point
            assert state["marks"]["chart-sweep-grid"] == 2 * tk.query("sweep-latency", limit=0).height
    assert page.value["first"] == sorted(page.value["first"])
    assert page.value["second"] == sorted(page.value["second"], reverse=True)
    # a table of sentences (ncu's messages, the advice of nsys's rules) wraps them inside the
    # page, not past its edge
    assert len(page.value["prose"]) == (name in ("ncu", "nsys"))
    assert all(right <= section + 1 for right, section in page.value["prose"])
    # not blank: the 1/8-scale screenshot has ink in many colours over a good part of the page
    width, height, rows = png_pixels(page.thumb)
    step = len(rows[0]) // width
    pixels = [bytes(r[i:i + 3]) for r in rows for i in range(0, len(r), step)]
    ink = sum(1 for p in pixels if min(p) < 235)
    assert height > 100 and ink / len(pixels) > 0.05 and len(set(pixels)) > 50


#: sorts the comparison table by its change column (ascending, then descending) and
#: returns the column's values after each click (null cells: no value)
_DIFF_SORT_JS = """(function () {
  var table = document.querySelector("#diff table.sortable");
  var th = table.querySelector("th[title=delta_pct]");
  var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
  var col = function () { return Array.prototype.map.call(table.tBodies[0].rows, function (r) {
      var v = r.cells[idx].dataset.v; return v === undefined ? null : parseFloat(v); }); };
  var overflow = OVERFLOW;
  th.click(); var first = col(); th.click(); var second = col();
  return {state: window.tracekitReport, first: first, second: second, overflow: overflow,
          colours: Array.prototype.map.call(table.querySelectorAll("td.verdict"), function (td) {
              return [td.textContent, getComputedStyle(td).color]; })};
})()""".replace("OVERFLOW", COMPARISONS_OVERFLOW_JS)


@needs_chromium
@pytest.mark.parametrize("name", ["cpu", "cpu_vs"])
def test_report_without_cuda_in_chromium(name, cpu_reports):
    """The report of a capture without CUDA draws in a browser: one bar per NVTX range of the
    timeline's request (and the diff's chart), no console error, no request."""
    page = load(cpu_reports[name], DONE, "window.tracekitReport")
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
    state = page.value
    charts = _parse(cpu_reports[name]).charts
    assert charts == (["chart-timeline"] if name == "cpu" else ["chart-diff", "chart-diff-timeline", "chart-timeline"])
    assert state["charts"] == len(charts) == state["rendered"] and state["failed"] == 0 and state["errors"] == []
    run = "cpu_only" if name == "cpu" else "cpu_only_more"
    assert state["marks"]["chart-timeline"] == cpu_reports["bars"][run]
    assert all(n > 0 for n in state["marks"].values())


@needs_chromium
def test_report_of_a_rank_in_chromium(rank_reports):
    """The job's charts draw in a browser: a bar per rank and measure, a cell per rank and
    NVTX path (each with its label); no console error, no request."""
    page = load(rank_reports["rank"], DONE, "window.tracekitReport")
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
    state = page.value
    charts = _parse(rank_reports["rank"]).charts
    assert state["charts"] == len(charts) == state["rendered"] and state["failed"] == 0 and state["errors"] == []
    assert all(n > 0 for n in state["marks"].values()), state["marks"]
    assert state["marks"]["chart-rank-summary"] == 2 * 3 * 4  # bar and label: 3 measures x 4 ranks
    assert state["marks"]["chart-rank-heatmap"] == 2 * rank_reports["cells"] == 2 * 4 * len(RANK_PLANT["nvtx_paths"])


@needs_chromium
def test_report_vs_base_in_chromium(reports, tmp_path):
    page = load(reports["diff"], DONE, _DIFF_SORT_JS, regions=((0, 1400),))
    keep = os.environ.get("TRACEKIT_SCREENSHOTS")
    shot = Path(keep) if keep else tmp_path
    shot.mkdir(parents=True, exist_ok=True)
    (shot / "report-diff.png").write_bytes(page.png)
    (shot / "report-diff-top.png").write_bytes(page.crops[0])
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
    state = page.value["state"]
    assert state["failed"] == 0 and state["rendered"] == state["charts"] and state["marks"]["chart-diff"] > 0
    for values, reverse in ((page.value["first"], False), (page.value["second"], True)):
        numbers = [v for v in values if v is not None]
        assert numbers == sorted(numbers, reverse=reverse) and numbers
        assert values[: len(numbers)] == numbers  # rows without a change (added, removed) last
    colours = {v: c for v, c in page.value["colours"]}
    assert len({colours["regressed"], colours["unchanged"], colours["added"]}) == 3
    assert page.value["overflow"] == []  # (at 1,400 px: the keys and notes wrap, no column past the edge)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """One point of the HSTU workload captured under nsys (with its timed requests) and under
    ncu (tests/data/hstu_capture_pair/base, hstu_capture_ncu): their reports alone, and the
    one report of both."""
    folder = tmp_path_factory.mktemp("experiment")
    db = folder / "x.duckdb"
    with tracekit.open(db) as tk:
        nsys = tk.ingest(DATA / "hstu_capture_pair" / "base").run_id
        ncu = tk.ingest(DATA / "hstu_capture_ncu").run_id
        out = {"ids": (nsys, ncu),
               "nsys": report.write_report(tk, folder / "nsys.html", run=nsys),
               "ncu": report.write_report(tk, folder / "ncu.html", run=ncu),
               "both": report.write_report(tk, folder / "both.html", run=[str(nsys), str(ncu)])}
    return db, out


def test_one_report_of_several_runs_holds_each_runs_report(experiment, capsys, tmp_path):
    """`tracekit report --run A --run B`: each run's header and sections, as its own report
    has them (the same tables), titled and anchored by its run, one run after the other;
    errors: a run given twice, the --vs base among the runs."""
    db, out = experiment
    nsys, ncu = out["ids"]
    both, alone = _parse(out["both"]), {k: _parse(out[k]) for k in ("nsys", "ncu")}
    want = [f"r{nsys}-{k}" for k in alone["nsys"].sections] + [f"r{ncu}-{k}" for k in alone["ncu"].sections]
    assert list(both.sections) == want and len(want) > 10
    for run_id, k in ((nsys, "nsys"), (ncu, "ncu")):
        for key, tables in alone[k].sections.items():
            assert both.sections[f"r{run_id}-{key}"] == tables, key
    assert both.charts == [f"chart-r{nsys}-{c[len('chart-'):]}" for c in alone["nsys"].charts] + \
        [f"chart-r{ncu}-{c[len('chart-'):]}" for c in alone["ncu"].charts]
    text = out["both"].read_text()
    assert f"<dt>run {nsys} · GPU</dt>" in text and f"<dt>run {ncu} · GPU</dt>" in text
    for args, said in ((["--run", str(nsys), "--run", str(nsys)], f"run {nsys} is given twice"),
                       (["--run", str(nsys), "--run", str(ncu), "--vs", str(nsys)], "the base; name each run once")):
        assert cli_main(["--db", str(db), "report", *args, "-o", str(tmp_path / "x.html")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err
        assert not (tmp_path / "x.html").exists()


@needs_chromium
def test_a_report_of_several_runs_draws_every_chart_in_chromium(experiment):
    page = load(experiment[1]["both"], DONE, "window.tracekitReport")
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.external_requests == []
    state, charts = page.value, _parse(experiment[1]["both"]).charts
    assert state["charts"] == len(charts) == state["rendered"] > 5 and state["failed"] == 0
    assert all(n > 0 for n in state["marks"].values()), state["marks"]
