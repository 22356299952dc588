"""The seed procedure's benchmark logs (run_bench.sh: logs/benchmark_bs{BS}_nc{NC}.log, a line
``KV Caches: 8, Candidate Embeddings: 1024, Total time(ms): 12.345`` per measurement) ingest as
timed runs at their point, so that the sweep queries, `export sweep` and `diff` answer what
process_data.ipynb's spreadsheet did. The logs here are real: the capture.log of
tests/data/hstu_capture_pair's run folders (the same line, tagged [warmup N] / [timed N])."""

from __future__ import annotations

import csv
import io
import re
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import tracekit
from tracekit.cli import main as cli_main
from tracekit.errors import InputError

PAIR = Path(__file__).parent / "data" / "hstu_capture_pair"


def _requests(folder: Path) -> list[float]:
    """The folder's timed latencies as its capture.log prints them (ms, three decimals)."""
    with open(folder / "requests.csv", newline="") as fh:
        return [round(float(r["latency_ms"]), 3) for r in csv.DictReader(fh) if r["phase"] == "timed"]


def _log(tmp: Path, folder: str, name: str = "benchmark_bs8_nc1024.log", untagged: bool = False) -> Path:
    out = tmp / folder / name
    out.parent.mkdir(parents=True, exist_ok=True)
    text = (PAIR / folder / "capture.log").read_text()
    if untagged:  # as the benchmark itself prints it, without tracekit capture's phase tag
        text = re.sub(r"^\[(?:warmup|timed) \d+\] ", "", text, flags=re.M)
    out.write_text(text)
    return out


def test_a_benchmark_log_is_a_timed_run_at_its_point(tmp_path):
    log = _log(tmp_path, "base")
    with tracekit.open(tmp_path / "l.duckdb") as tk:
        res = tk.ingest(log, params={"tool": "nsys"})  # (this log's run was under nsys: said, not assumed)
        run = tk.sql("SELECT kind, params FROM runs").row(0, named=True)
        assert run["kind"] == "timing"
        assert run["params"] == '{"bs": 8, "nc": 1024, "tool": "nsys"}'
        got = tk.sql("SELECT latency_ms FROM requests WHERE phase = 'timed' ORDER BY request_idx")["latency_ms"]
        assert got.to_list() == _requests(PAIR / "base")
        lat = tk.query("sweep-latency", sweep=res.run_id).row(0, named=True)
    want = np.array(_requests(PAIR / "base"))
    assert (lat["bs"], lat["nc"], lat["tool"], lat["requests"]) == (8, 1024, "nsys", 30)
    assert lat["median_ms"] == pytest.approx(np.median(want), rel=1e-12)
    assert lat["p95_ms"] == pytest.approx(np.percentile(want, 95), rel=1e-12)


def test_an_untagged_log_counts_every_line_as_the_notebook_does(tmp_path):
    """Without tags every line is a measurement (tool none unless said): 32 lines, the two
    warm-up requests of the capture among them."""
    log = _log(tmp_path, "base", untagged=True)
    with tracekit.open(tmp_path / "l.duckdb") as tk:
        tk.ingest(log)
        lat = tk.query("sweep-latency").row(0, named=True)
    lines = [float(m) for m in re.findall(r"Total time\(ms\): ([0-9.]+)", log.read_text())]
    assert len(lines) == 32 and lat["requests"] == 32 and lat["tool"] == "none"
    assert lat["max_ms"] == max(lines) and lat["median_ms"] == pytest.approx(np.median(lines), rel=1e-12)


def test_lines_naming_the_fields_that_do_not_read_as_the_line_are_said(tmp_path, capsys):
    """The real log with one line's time blanked and one missing its candidates: the notebook's
    pattern passes both over without a word; tracekit leaves them out too, and says so (how
    many, the first one and its line number), once."""
    log = _log(tmp_path, "base", untagged=True)
    lines = log.read_text().splitlines(keepends=True)
    timed = [i for i, line in enumerate(lines) if "Total time(ms)" in line]
    lines[timed[3]] = re.sub(r"Total time\(ms\): [0-9.]+", "Total time(ms): ", lines[timed[3]])
    lines[timed[5]] = re.sub(r"Candidate Embeddings: \d+, ", "", lines[timed[5]])
    log.write_text("".join(lines))
    assert cli_main(["--db", str(tmp_path / "l.duckdb"), "ingest", str(log)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"tracekit: warning: {log}: 2 lines naming the benchmark's fields but not reading as 'KV Caches: "
                   f"N, Candidate Embeddings: M, Total time(ms): T' (line {timed[3] + 1}: "
                   f"{lines[timed[3]].strip()!r}): left out"]
    with tracekit.open(tmp_path / "l.duckdb", read_only=True) as tk:
        assert tk.query("sweep-latency").row(0, named=True)["requests"] == 30
    # a log refused all the same is one line, its error; a tab in a line said as \t, once
    only = tmp_path / "only" / "benchmark_bs8_nc1024.log"
    only.parent.mkdir()
    only.write_text("[warmup 0] " + lines[timed[0]] + lines[timed[3]])  # (a warm-up line, and a timed one blank)
    assert cli_main(["--db", str(tmp_path / "o.duckdb"), "ingest", str(only)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tracekit: error: {only}: no timed 'KV Caches: N, Candidate Embeddings: M, Total time(ms): T' line"]
    ok = lines[timed[0]]
    only.write_text(ok + lines[timed[5]].replace(" ", "\t", 1))
    assert cli_main(["--db", str(tmp_path / "o.duckdb"), "ingest", str(only)]) == 0
    assert "(line 2: 'KV\\tCaches:" in capsys.readouterr().err


def test_two_folders_of_logs_compare_point_by_point(tmp_path, capsys):
    """Each folder's logs given a sweep name (--param sweep=...), then `diff before after`:
    the point's latency from both logs, judged as two captures' requests are (the kernel given
    half the SMs: +9.1 % in median latency, within the noise of identical captures)."""
    db = str(tmp_path / "l.duckdb")
    before, after = _log(tmp_path, "base"), _log(tmp_path, "half_sms")
    assert cli_main(["--db", db, "ingest", str(before), "-p", "sweep=before", "-p", "tool=nsys"]) == 0
    assert cli_main(["--db", db, "ingest", str(after), "-p", "sweep=after", "-p", "tool=nsys"]) == 0
    capsys.readouterr()
    assert cli_main(["--db", db, "diff", "before", "after", "-f", "csv"]) == 0
    df = pl.read_csv(io.StringIO(capsys.readouterr().out))
    med = df.filter(pl.col("metric") == "latency_med_ms").row(0, named=True)
    assert med["key"] == "bs=8,nc=1024" and med["verdict"] == "unchanged"
    assert (med["base"], med["new"]) == pytest.approx((np.median(_requests(PAIR / "base")),
                                                       np.median(_requests(PAIR / "half_sms"))), rel=1e-12)


def test_a_log_that_does_not_name_its_point_is_refused(tmp_path):
    with tracekit.open(tmp_path / "l.duckdb") as tk:
        with pytest.raises(InputError, match=r"capture\.log: a benchmark log names its point as run_bench\.sh does"):
            tk.ingest(shutil.copy(PAIR / "base" / "capture.log", tmp_path / "capture.log"))
        with pytest.raises(InputError, match=r"its name says nc=512 but its lines scored Candidate Embeddings: 1024; "
                                             r"a log is one point: name it after the point it ran at, one log a "
                                             r"point$"):
            tk.ingest(_log(tmp_path, "base", name="benchmark_bs8_nc512.log"))
        # two points' lines in one log would blend into one median
        mixed = _log(tmp_path / "mixed", "base")
        text = mixed.read_text()
        mixed.write_text(text + text.replace("Candidate Embeddings: 1024", "Candidate Embeddings: 512"))
        with pytest.raises(InputError, match=r"its name says nc=1024 but its lines scored Candidate Embeddings: 512, "
                                             r"1024; a log is one point"):
            tk.ingest(mixed)
        # a time that is not one, not a time read in part (1.5e+02 ms is 150 ms, not 1.5; a decimal
        # comma's 12,5 was read as 12), nor a line passed over (nan and inf were)
        odd = _log(tmp_path / "odd", "base")
        first = re.search(r"Total time\(ms\): ([0-9.]+)", odd.read_text())[1]
        for value, ok in (("1.5e+02", True), ("-3.0", False), ("1.2.3", False), ("12,5", False), ("nan", False),
                          ("-inf", False), ("Infinity", False)):
            odd.write_text(odd.read_text().replace(f"Total time(ms): {first}", f"Total time(ms): {value}", 1))
            first = value
            if ok:
                with tracekit.open(tmp_path / f"{value}.duckdb") as other:
                    other.ingest(odd)
                    assert other.sql("SELECT max(latency_ms) AS m FROM requests")["m"][0] >= 150.0
            else:
                with pytest.raises(InputError, match=rf"'Total time\(ms\): {re.escape(value)}' is not a time"):
                    tk.ingest(odd)
        assert tk.sql("SELECT count(*) AS n FROM runs")["n"][0] == 0


@pytest.mark.parametrize("name, line, message", [
    ("benchmark_bs0_nc1024.log", None, "its name's bs=0: bs (the batch size) is a whole number from 1 to 2147483647"),
    ("benchmark_bs8_nc0.log", "Candidate Embeddings: 0,", "its name's nc=0: nc (the number of candidates) is a whole"),
    ("benchmark_bs3000000000_nc1024.log", None, "its name's bs=3000000000: bs (the batch size) is a whole number"),
    ("benchmark_bs8_nc99999999999999999999.log", "Candidate Embeddings: 99999999999999999999,",
     "its name's nc=99999999999999999999: nc (the number of candidates)"),
    ("benchmark_bs8_nc1024.log", "KV Caches: 99999999999999999999,",
     "'KV Caches: 99999999999999999999' is past 2147483647, no count of caches"),
])
def test_a_log_of_a_point_that_is_no_count_is_one_line(tmp_path, capsys, name, line, message):
    """The point a log's name gives, and the counts of its lines, are checked as --param bs=
    and nc= are: a count past 32 bits was an internal error (Arrow's or Python's overflow), a
    0 a run of a point no sweep has; and the store is left as it was."""
    from conftest import store_state

    db = tmp_path / "l.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(_log(tmp_path, "base", untagged=True))]) == 0
    log = _log(tmp_path / "odd", "base", name=name, untagged=True)
    if line is not None:
        key = line.split(":")[0]
        log.write_text(re.sub(rf"{key}: \d+,", line, log.read_text()))
    capsys.readouterr()
    before = store_state(db)
    assert cli_main(["--db", str(db), "ingest", str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"tracekit: error: {log}: ") and message in err[0], err
    assert store_state(db) == before


def test_a_folder_of_logs_says_to_name_them(tmp_path, capsys):
    """`tracekit ingest logs/` (a folder, no run folder): the error names the logs to give."""
    log = _log(tmp_path / "logs", "base")
    assert cli_main(["--db", str(tmp_path / "l.duckdb"), "ingest", str(tmp_path / "logs")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tracekit: error: {tmp_path / 'logs'}: not a run folder (no meta.json) and no run folder below it; "
        f"name the benchmark logs it holds ({log})")


def test_the_logs_spreadsheet_is_the_notebooks(tmp_path, capsys):
    """`export sweep` of logs, which record no preset: the grid titled by what they record,
    the median at the log's point, a sheet per bs and per nc (process_data.ipynb's split)."""
    import openpyxl

    db, out = str(tmp_path / "l.duckdb"), tmp_path / "results.xlsx"
    assert cli_main(["--db", db, "ingest", str(_log(tmp_path, "base", untagged=True)), "-p", "sweep=logs"]) == 0
    assert cli_main(["--db", db, "export", "sweep", "--sweep", "logs", "-o", str(out)]) == 0
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == ["summary", "grid", "chart", "results", "bs8", "nc1024"]
    grid = list(wb["grid"].iter_rows(values_only=True))
    lines = [float(m) for m in re.findall(r"Total time\(ms\): ([0-9.]+)", (PAIR / "base" / "capture.log").read_text())]
    assert grid[0][0] == "median latency, ms: tool none (rows bs, columns nc)"
    assert grid[1:] == [("bs \\ nc", 1024), (8, pytest.approx(np.median(lines), rel=1e-12))]
    assert wb["bs8"].max_row == 1 + len(lines)


def test_a_run_folders_compressed_capture_log_is_not_read_as_a_benchmark_log(tmp_path):
    """A run folder's capture.log holds the benchmark's lines; compressed (capture.log.xz),
    it is still the capture's log, not a second timing file: the folder is the same run."""
    import lzma

    folder = shutil.copytree(PAIR / "base", tmp_path / "base")
    (folder / "capture.log.xz").write_bytes(lzma.compress((folder / "capture.log").read_bytes()))
    (folder / "capture.log").unlink()
    with tracekit.open(tmp_path / "a.duckdb") as tk:
        plain = tk.ingest(PAIR / "base")
    with tracekit.open(tmp_path / "b.duckdb") as tk:
        packed = tk.ingest(folder)
    assert (packed.kind, packed.rows) == (plain.kind, plain.rows)
