"""A report of several runs against one base (``tracekit report --vs BASE --run A --run B``):
their comparison (compare's table with coloured verdicts, the compare chart), the runs drawn
against the base (ncu: one roofline; nsys: their requests on one time axis), then each run's
own sections; on real captures:

* tests/data/ncu_shapes_a, _a_again (the same program again) and _slow (its kernel made to
  read its input four times: +14.5 % per launch);
* tests/data/nsys_diff_base_a, _base_b (again) and _regressed (silu 4.3x slower, a kernel
  added).
"""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest
from browser import chromium, report_drawn

import tracekit
from tracekit import report
from tracekit.cli import main as cli_main
from tracekit.diff import shown_verdicts

DATA = Path(__file__).parent / "data"
NCU_PAIR = DATA / "hstu_capture_ncu_pair"

pytestmark = [pytest.mark.filterwarnings("ignore:compare. half_sms. the captures differ in setup"),
              pytest.mark.filterwarnings("ignore:diff. the captures differ in setup")]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("report_compared") / "r.duckdb"
    with tracekit.open(db) as tk:
        for v in ("a", "a_again", "slow"):
            tk.ingest(DATA / f"ncu_shapes_{v}" / "report.ncu-rep.xz", name=f"shapes_{v}")
        for v in ("base_a", "base_b", "regressed"):
            tk.ingest(DATA / f"nsys_diff_{v}" / "export.sqlite.xz", name=v)
        for run in ("base", "base_again", "half_sms"):
            tk.ingest(NCU_PAIR / run, name=run)
        tk.ingest(DATA / "ncu_diff_a" / "report.ncu-rep.xz", name="ncu_diff_a")
    return db


def _sections(text: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', text)


def _cells(text: str) -> dict[tuple[str, str, str], list[tuple[str, str]]]:
    """The compare table's rows: (scope, key, metric) -> each run's (verdict class, cell text)."""
    body = text[text.index('<section id="compare">'):]
    body = body[:body.index("</table>")]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S):
        cells = re.findall(r'<td([^>]*)>(.*?)</td>', row, re.S)
        scope, metric = (html_lib.unescape(cells[i][1]) for i in (0, 2))
        key = html_lib.unescape(re.search(r'title="([^"]*)"', cells[1][0]).group(1))
        rows[(scope, key, metric)] = [(re.search(r"v-([\w-]+)", a).group(1) if "v-" in a else "",
                                       html_lib.unescape(t)) for a, t in cells[4:]]
    return rows


def test_ncu_runs_against_a_base_compared_drawn_then_each_run(store, tmp_path):
    """Two ncu runs against shapes_a: the comparison first (its table's cells as compare words
    and judges them), the roofline of the three, then each run's own sections; the page draws
    every chart in Chromium."""
    with tracekit.open(store) as tk:
        path = report.write_report(tk, tmp_path / "r.html", run=["shapes_a_again", "shapes_slow"], vs="shapes_a")
        df = tk.compare("shapes_a", ["2", "3"])
    text = path.read_text()
    sections = _sections(text)
    assert sections[:2] == ["compare", "compare-roofline"]
    assert sections[2] == "r2-roofline" and "r3-roofline" in sections
    assert sections.index("r3-roofline") > max(i for i, s in enumerate(sections) if s.startswith("r2-"))
    assert "<dt>compared with</dt><dd>shapes_a (tracekit compare shapes_a 2 3)</dd>" in text
    assert "shapes_a_again: 28 unchanged, 2 not judged; shapes_slow: " in text
    cells = _cells(text)
    runs = ["shapes_a_again", "shapes_slow"]
    shown = dict(zip(zip(df["scope"], df["key"], df["metric"], df["run"], strict=True), shown_verdicts(df),
                     strict=True))
    assert len(cells) == df.select("scope", "key", "metric").unique().height
    for k, per_run in cells.items():
        assert [v for v, _ in per_run] == [shown.get((*k, run), "").replace(" ", "-") for run in runs], k
    assert cells[("ncu", "shapes_kernel", "duration_ns")] == [("unchanged", "5.296 µs (+0.0%)"),
                                                              ("regressed", "6.064 µs (+14.5%, regressed)")]
    assert "tracekit chart compare-roofline -p base=1 -p runs=2,3" in text
    if chromium() is None:
        pytest.skip("no chromium")
    page = report_drawn(path)
    assert page.console_errors == [] and page.exceptions == [] and page.external_requests == []
    state = page.value
    assert state["failed"] == 0 and state["rendered"] == state["charts"]
    assert state["marks"]["chart-compare"] > 0 and state["marks"]["chart-compare-roofline"] > 0


def test_nsys_runs_against_a_base_draw_their_requests(store, tmp_path):
    """Two nsys runs against base_a: the comparison's table holds the plant (silu_kernel
    regressed and attn_bias_kernel added in regressed, nothing judged in base_b's kernels), and
    the requests of the three are drawn on one time axis."""
    with tracekit.open(store) as tk:
        path = report.write_report(tk, tmp_path / "r.html", run=["base_b", "regressed"], vs="base_a")
    text = path.read_text()
    assert _sections(text)[:2] == ["compare", "compare-timeline"]
    cells = _cells(text)
    assert cells[("kernel", "silu_kernel", "total_ns")][1][0] == "regressed"
    assert cells[("kernel", "attn_bias_kernel", "total_ns")][1][0] == "added"
    assert not [k for k, c in cells.items() if k[0] == "kernel" and c[0][0] in ("regressed", "improved")]
    assert "tracekit chart compare-timeline -p base=4 -p runs=5,6" in text
    if chromium() is None:
        pytest.skip("no chromium")
    page = report_drawn(path)
    assert page.console_errors == [] and page.exceptions == []
    state = page.value
    assert state["failed"] == 0 and state["marks"]["chart-compare-timeline"] > 0


def test_repeats_of_the_base_measure_the_noise_from_the_cli(store, tmp_path):
    """report --vs shapes_a --run shapes_slow --run ncu_diff_a --repeat shapes_a_again: the
    repeat's column is marked, the intro and the roofline say it measured the noise, and
    ncu_diff_a's kernel of another name is placed by the base's it was matched to."""
    out = tmp_path / "r.html"
    assert cli_main(["--db", str(store), "report", "--vs", "shapes_a", "--run", "shapes_slow", "--run", "ncu_diff_a",
                     "--repeat", "shapes_a_again", "-o", str(out)]) == 0
    text = out.read_text()
    assert _sections(text)[:2] == ["compare", "compare-roofline"]
    assert "(tracekit compare shapes_a 3 10 --repeat shapes_a_again)" in text
    assert "Repeats of the base (shapes_a_again) measured the noise" in text
    assert '<th scope="col" class="text" title="shapes_a_again (repeat)">' in text
    assert "-p base=1 -p runs=3,10 -p repeats=shapes_a_again" in text
    assert "repeats of the base measured the noise (shapes_a_again)" in text
    assert "matched by launch order to base kernel shapes_kernel" in text


def test_runs_that_share_no_scope_with_the_base_are_one_line(store, tmp_path, capsys):
    """An nsys run against an ncu base: compare's error in one line, exit 2, no page."""
    out = tmp_path / "r.html"
    capsys.readouterr()
    assert cli_main(["--db", str(store), "report", "--vs", "shapes_a", "--run", "shapes_slow", "--run", "regressed",
                     "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tracekit: error: compare: run 1 (shapes_a) [ncu] and run 6 "
                                               "(regressed) [nsys] share no scope"), err
    assert not out.exists()


def test_a_run_given_twice_and_repeats_without_a_base_are_one_line(store, tmp_path, capsys):
    out = tmp_path / "r.html"
    for args, said in ((["--run", "shapes_slow", "--run", "3", "--vs", "shapes_a"], "report: run 3 is given twice; name each run once"),
                       (["--run", "shapes_slow", "--run", "shapes_a", "--vs", "shapes_a"],
                        "compare: '1' is run 1 (shapes_a), the base; name each run once")):
        capsys.readouterr()
        assert cli_main(["--db", str(store), "report", *args, "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"tracekit: error: {said}"], err
        assert not out.exists()


def test_the_cells_sort_by_the_base_value_and_each_runs_change(store, tmp_path):
    """The base's column sorts by its value, each run's by its change against the base."""
    with tracekit.open(store) as tk:
        path = report.write_report(tk, tmp_path / "r.html", run=["base_b", "regressed"], vs="base_a")
        df = tk.compare("base_a", ["5", "6"])
    text = path.read_text()
    body = text[text.index('<section id="compare">'):]
    body = body[body.index("<tbody>"):body.index("</table>")]
    rows = {(r["scope"], r["key"], r["metric"], r["run"]): r for r in df.iter_rows(named=True)}
    checked = 0
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td([^>]*)>(.*?)</td>", row, re.S)
        scope, metric = (html_lib.unescape(cells[i][1]) for i in (0, 2))
        key = html_lib.unescape(re.search(r'title="([^"]*)"', cells[1][0]).group(1))
        for col, run in ((4, "base_b"), (5, "regressed")):
            r = rows.get((scope, key, metric, run))
            got = re.search(r'data-v="([^"]+)"', cells[col][0])
            if r is None or r["delta_pct"] is None:
                assert got is None
            else:
                assert float(got.group(1)) == r["delta_pct"]
                base = re.search(r'data-v="([^"]+)"', cells[3][0])
                assert float(base.group(1)) == r["base"]
                checked += 1
    assert checked > 100
