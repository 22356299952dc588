"""Output files: never over the store (or its WAL), written whole or not at all."""

from __future__ import annotations

import os
import stat

import duckdb
import pytest
from conftest import DATA, through_fifo

from tracekit.cli import main as cli_main
from tracekit.errors import OutputError
from tracekit.outputs import write_output


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def _still_a_store(db) -> None:
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 2
    con.close()


@pytest.mark.parametrize("fmt", ["csv", "json", "table", "parquet"])
def test_query_output_over_the_store_is_refused(small_store, capsys, fmt):
    before = small_store.read_bytes()
    code = cli_main(["--db", str(small_store), "query", "top-kernels", "-f", fmt, "-o", str(small_store)])
    assert code == 2
    assert "is the store" in _one_error_line(capsys)
    assert small_store.read_bytes() == before
    _still_a_store(small_store)


def test_the_store_is_recognised_through_links_and_relative_paths(small_store, capsys, monkeypatch):
    before = small_store.read_bytes()
    folder = small_store.parent
    (folder / "link.csv").symlink_to(small_store)
    os.link(small_store, folder / "hard.csv")
    (folder / "sub").mkdir()
    monkeypatch.chdir(folder / "sub")
    wal = small_store.with_name(small_store.name + ".wal")
    for out in (str(folder / "link.csv"), str(folder / "hard.csv"), "../tk.duckdb", "../sub/../tk.duckdb", str(wal)):
        for cmd in (["sql", "SELECT 1 AS x"], ["runs"], ["query", "top-kernels"]):
            code = cli_main(["--db", str(small_store), *cmd, "-f", "csv", "-o", out])
            assert code == 2, (out, cmd)
            assert "is the store" in _one_error_line(capsys)
    assert small_store.read_bytes() == before
    assert not wal.exists()
    _still_a_store(small_store)


def test_chart_and_export_over_the_store_are_refused(small_store, capsys):
    before = small_store.read_bytes()
    link = small_store.with_name("chart.json")
    link.symlink_to(small_store)
    assert cli_main(["--db", str(small_store), "chart", "top-kernels", "--run", "1", "-o", str(link)]) == 2
    assert "is the store" in _one_error_line(capsys)
    csv_link = small_store.with_name("r.csv")
    csv_link.symlink_to(small_store)
    assert cli_main(["--db", str(small_store), "export", "sweep", "-o", str(csv_link)]) == 2
    assert "is the store" in _one_error_line(capsys)
    # the summary file beside it is checked before anything is written
    summary_link = small_store.with_name("s-summary.csv")
    summary_link.symlink_to(small_store)
    assert cli_main(["--db", str(small_store), "export", "sweep", "-o", str(small_store.with_name("s.csv"))]) == 2
    assert "is the store" in _one_error_line(capsys)
    assert not small_store.with_name("s.csv").exists()
    assert small_store.read_bytes() == before


def _files(folder) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_outputs_inside_a_dataset_are_refused(small_store, capsys, tmp_path):
    """A dataset is its folder: an output written into it replaces a table's file
    (-o DIR/runs.parquet left the dataset unreadable) or lands where its tables are read."""
    ds = tmp_path / "ds"
    assert cli_main(["--db", str(small_store), "export", "parquet", "-o", str(ds)]) == 0
    capsys.readouterr()
    before = _files(ds)
    table = next(p for p in ds.glob("*/run_id=1/part-0.parquet"))
    for cmd, out in ((["query", "top-kernels", "--run", "1"], ds / "runs.parquet"),
                     (["sql", "SELECT 1 AS x"], table),
                     (["runs", "-f", "csv"], ds / "new.csv"),
                     (["query", "top-kernels", "--run", "1", "-f", "json"], ds / "sub" / ".." / "k.json"),
                     (["chart", "top-kernels", "--run", "1"], ds / "chart.json"),
                     (["report", "--run", "1"], ds / "report.html"),
                     (["export", "trace", "--run", "1"], table.parent / "trace.json")):
        assert cli_main(["--db", str(ds), *cmd, "-o", str(out)]) == 2, cmd
        line = _one_error_line(capsys)
        assert f"{out}: inside the dataset" in line, line
    assert _files(ds) == before
    assert cli_main(["--db", str(ds), "query", "top-kernels", "--run", "1", "-f", "csv",
                     "-o", str(tmp_path / "k.csv")]) == 0  # beside it: written
    assert (tmp_path / "k.csv").read_text().startswith("name,instances,total_ns")


def test_output_in_a_missing_folder_is_one_line(small_store, capsys, tmp_path):
    for cmd in (["query", "top-kernels", "-f", "csv"], ["sql", "SELECT 1"], ["runs"],
                ["chart", "top-kernels", "--run", "1"], ["export", "sweep"]):
        out = tmp_path / "nonexistent" / "dir" / ("x.csv" if cmd[0] != "chart" else "x.png")
        assert cli_main(["--db", str(small_store), *cmd, "-o", str(out)]) == 2, cmd
        line = _one_error_line(capsys)
        assert "does not exist" in line and str(out) in line, line
        # a file where the folder belongs is not said to be missing
        (tmp_path / "notes").write_text("x")
        out = tmp_path / "notes" / ("x.csv" if cmd[0] != "chart" else "x.png")
        assert cli_main(["--db", str(small_store), *cmd, "-o", str(out)]) == 2, cmd
        assert _one_error_line(capsys).endswith(f"{out}: {tmp_path / 'notes'} is not a folder")


def test_an_output_that_is_a_loop_of_links_is_one_line(small_store, capsys, tmp_path):
    """-o onto a symbolic link that loops (a -> b -> a): one line naming it, as an ingest of
    one says (it was an internal error: Python's RuntimeError from resolving it)."""
    for name in ("x.csv", "x.html", "x.json", "x.xlsx", "ds"):
        (tmp_path / f"b-{name}").symlink_to(tmp_path / name)
        (tmp_path / name).symlink_to(tmp_path / f"b-{name}")
    before = small_store.read_bytes()
    for cmd, name in ((["query", "top-kernels", "-f", "csv"], "x.csv"), (["sql", "SELECT 1 AS x"], "x.csv"),
                      (["report", "--run", "1"], "x.html"), (["chart", "top-kernels", "--run", "1"], "x.html"),
                      (["export", "trace", "--run", "1"], "x.json"), (["export", "sweep"], "x.xlsx"),
                      (["export", "parquet"], "ds")):
        out = tmp_path / name
        assert cli_main(["--db", str(small_store), *cmd, "-o", str(out)]) == 2, cmd
        assert _one_error_line(capsys).endswith(f"{out}: a loop of symbolic links, leading to no file"), cmd
    assert small_store.read_bytes() == before


def test_outputs_are_written_and_overwritten(small_store, capsys, tmp_path):
    out = tmp_path / "k.csv"
    out.write_text("old\n")
    out.chmod(0o640)
    assert cli_main(["--db", str(small_store), "query", "top-kernels", "-f", "csv", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("name,instances,total_ns")
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # an existing file keeps its mode
    # a symlink is written through: the link stays, its target gets the output
    target = tmp_path / "target.csv"
    (tmp_path / "via.csv").symlink_to(target)
    assert cli_main(["--db", str(small_store), "sql", "SELECT 42 AS x", "-f", "csv", "-o", str(tmp_path / "via.csv")]) == 0
    assert (tmp_path / "via.csv").is_symlink() and target.read_text() == "x\n42\n"
    new = tmp_path / "new.csv"
    umask = os.umask(0o022)
    try:
        assert cli_main(["--db", str(small_store), "runs", "-f", "csv", "-o", str(new)]) == 0
    finally:
        os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_output_extension_picks_the_format_where_f_is_not_given(small_store, capsys, tmp_path):
    """-o FILE.parquet / .json / .csv without -f writes that format (not a text table under
    that name), and says what it wrote as chart does; another extension keeps the table. -f
    that the name's known extension contradicts (a .xlsx file of CSV text opens as no
    workbook) is an error, and nothing is written."""
    import polars as pl

    db = ["--db", str(small_store)]
    for ext, read in ((".parquet", pl.read_parquet), (".json", pl.read_json), (".CSV", pl.read_csv)):
        out = tmp_path / f"tk{ext}"
        assert cli_main([*db, "query", "top-kernels", "-o", str(out)]) == 0
        assert capsys.readouterr().out == f"wrote {out}\n"
        assert read(out).columns[:3] == ["name", "instances", "total_ns"]  # every column, unformatted
    sql = tmp_path / "one.parquet"
    assert cli_main([*db, "sql", "SELECT 42 AS x", "-o", str(sql)]) == 0
    assert pl.read_parquet(sql)["x"].to_list() == [42]
    runs = tmp_path / "runs.json"
    assert cli_main([*db, "runs", "-o", str(runs)]) == 0
    assert pl.read_json(runs).height == 2
    capsys.readouterr()
    for name, fmt in (("tk.txt", []), ("table.TXT", ["-f", "table"])):
        out = tmp_path / name
        assert cli_main([*db, "query", "top-kernels", *fmt, "-o", str(out)]) == 0
        assert out.read_text().startswith("time_") and capsys.readouterr().out == f"wrote {out}\n"
    for fmt, name, said in (("table", "table.json", "the file's name says json; leave out -f"),
                            ("csv", "q.xlsx", "the file's name says xlsx; name it q.csv or leave out -f"),
                            ("parquet", "q.csv", "the file's name says csv; name it q.parquet or leave out -f")):
        for cmd in (["query", "top-kernels"], ["sql", "SELECT 1 AS x"]):
            assert cli_main([*db, *cmd, "-f", fmt, "-o", str(tmp_path / name)]) == 2
            assert capsys.readouterr().err.startswith(f"tracekit: error: -f {fmt} -o {tmp_path / name}: {said}")
            assert not (tmp_path / name).exists()
    diff = tmp_path / "d.json"  # diff too: every row (a table's default of 30 is for the terminal)
    assert cli_main([*db, "diff", "1", "1", "-o", str(diff)]) == 0
    assert capsys.readouterr().out == f"wrote {diff}\n"
    assert set(pl.read_json(diff)["verdict"]) == {"unchanged"} and pl.read_json(diff).height > 30
    # -o - is the standard output: its "wrote" line goes to stderr, not into the data
    assert cli_main([*db, "query", "top-kernels", "-o", "-"]) == 0
    got = capsys.readouterr()
    assert got.out.startswith("time_") and got.err == "wrote -\n"


def test_xlsx_holds_the_rows_csv_holds_as_numbers(small_store, capsys, tmp_path):
    """-o FILE.xlsx (or -f xlsx) writes a workbook (it wrote a text table under that name):
    the query's every row and column, numbers as numbers (what CSV gives), a bold frozen
    header with a filter; a diff's verdicts coloured; text that starts with "=" stays text,
    control characters escaped; lists are refused, and nothing is written then."""
    import openpyxl
    import polars as pl

    db = ["--db", str(small_store)]
    xl, csv = tmp_path / "top.xlsx", tmp_path / "top.csv"
    assert cli_main([*db, "query", "top-kernels", "-o", str(xl)]) == 0
    assert cli_main([*db, "query", "top-kernels", "-o", str(csv)]) == 0
    assert capsys.readouterr().out == f"wrote {xl}\nwrote {csv}\n"
    ws = openpyxl.load_workbook(xl).active
    assert ws.title == "top-kernels" and ws.freeze_panes == "A2" and ws["A1"].font.bold
    rows = [[c.value for c in r] for r in ws.iter_rows()]
    want = pl.read_csv(csv)
    assert rows[0] == want.columns and len(rows) == want.height + 1 > 2
    assert rows[1:] == [list(r) for r in want.rows()]
    assert ws["C2"].number_format == "#,##0" and isinstance(ws["C2"].value, int)

    # a diff: its every row (as JSON has them), verdicts coloured
    pair = [str(DATA / "nsys_diff_base_a" / "export.sqlite.xz"), str(DATA / "nsys_diff_regressed" / "export.sqlite.xz")]
    d, dj = tmp_path / "d.xlsx", tmp_path / "d.json"
    ddb = ["--db", str(tmp_path / "d.duckdb")]
    assert cli_main([*ddb, "diff", *pair, "-f", "xlsx", "-o", str(d)]) == 0
    assert cli_main([*ddb, "diff", *pair, "-o", str(dj)]) == 0
    ws = openpyxl.load_workbook(d).active
    col = [c.value for c in ws[1]].index("verdict") + 1
    verdicts = [ws.cell(i, col) for i in range(2, ws.max_row + 1)]
    assert [c.value for c in verdicts] == pl.read_json(dj)["verdict"].to_list()
    fills = {c.value: c.fill.start_color.rgb[-6:] for c in verdicts}
    assert fills["regressed"] == "FFC7CE" and fills["unchanged"] == "000000"

    odd = tmp_path / "odd.xlsx"
    assert cli_main([*db, "sql", "SELECT '=1+1' AS f, 'a' || chr(1) || 'b' AS c, 1 AS \"=SUM(1)\", "
                                 "2 AS \"x\x01\"", "-o", str(odd)]) == 0
    ws = openpyxl.load_workbook(odd).active
    assert [(c.value, c.data_type) for c in ws[2]][:2] == [("=1+1", "s"), ("a\\x01b", "s")]
    assert [(c.value, c.data_type) for c in ws[1]][2:] == [("=SUM(1)", "s"), ("x\\x01", "s")]  # (a header too)
    # an integer a sheet's number (a double) cannot hold exactly is its digits as text, as CSV has them
    big = tmp_path / "big.xlsx"
    assert cli_main([*db, "sql", "SELECT 1795967826699307222::BIGINT AS id, 18446744073709551615::UBIGINT AS u, "
                                 "-(2::BIGINT ** 53)::BIGINT AS edge, 3 AS small", "-o", str(big)]) == 0
    ws = openpyxl.load_workbook(big).active
    assert [c.value for c in ws[2]] == ["1795967826699307222", "18446744073709551615", -(2**53), 3]
    # so is one DuckDB hands over as a Decimal (HUGEINT, DECIMAL(38, 0)); a fraction stays a number
    assert cli_main([*db, "sql", "SELECT 123456789012345678901234567890::HUGEINT AS h, 18446744073709551615::"
                                 "DECIMAL(38, 0) AS d, 9007199254740992::DECIMAL(38, 0) AS edge, 1.25::DECIMAL(10, 2) "
                                 "AS frac", "-o", str(big)]) == 0
    ws = openpyxl.load_workbook(big).active
    assert [(c.value, c.data_type) for c in ws[2]] == [
        ("123456789012345678901234567890", "s"), ("18446744073709551615", "s"), (2**53, "n"), (1.25, "n")]
    capsys.readouterr()
    nested = tmp_path / "nested.xlsx"
    assert cli_main([*db, "sql", "SELECT [1, 2] AS l", "-o", str(nested)]) == 2
    assert "column 'l' holds lists or structs" in _one_error_line(capsys) and not nested.exists()
    assert cli_main([*db, "query", "top-kernels", "-f", "xlsx"]) == 2
    assert "--format xlsx needs -o FILE" in _one_error_line(capsys)


def test_json_writes_a_decimal_as_a_number(small_store, capsys):
    """A sum of BIGINTs (a HUGEINT, handed over as a DECIMAL) and a DECIMAL are JSON numbers,
    as CSV prints them (Polars wrote them as strings: "2105"): a whole one its exact digits,
    past 64 bits too, a fraction a double; a NULL is null."""
    import json

    assert cli_main(["--db", str(small_store), "sql", "SELECT sum(x) AS s, 1.25::DECIMAL(10, 2) AS frac, "
                     "-9223372036854775808::HUGEINT AS lo, 123456789012345678901234567890::HUGEINT AS h, "
                     "NULL::DECIMAL(10, 0) AS n FROM range(3) t(x)", "-f", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row == {"s": 3, "frac": 1.25, "lo": -(2**63), "h": 123456789012345678901234567890, "n": None}
    assert cli_main(["--db", str(small_store), "query", "top-kernels", "--run", "1", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(not isinstance(v, str) for r in rows for k, v in r.items() if k.endswith(("_ns", "_pct")))


def test_a_time_is_one_text_in_every_file_format(small_store, capsys, tmp_path):
    """A run's ingested_at and any time `tracekit sql` gives: ISO 8601 with its T, to the
    column's precision, an offset as +00:00, alike in CSV, TSV, JSON and a sheet (Polars wrote
    JSON's with a space and CSV's offsets as +0000); read back as the same time."""
    import csv
    import datetime as dt
    import json

    import openpyxl

    sql = ("SELECT TIMESTAMP '2026-12-05 22:08:07.9' AS t, TIMESTAMPTZ '2026-12-05 22:08:07.9+00' AS tz, "
           "TIMESTAMP_NS '2026-12-05 22:08:07.123456789' AS ns, TIMESTAMP_MS '2026-12-05 22:08:07.9' AS ms")
    want = ["2026-12-05T22:08:07.900000", "2026-12-05T22:08:07.900000+00:00", "2026-12-05T22:08:07.123456789",
            "2026-12-05T22:08:07.900"]
    got = {}
    for fmt in ("csv", "tsv", "json", "xlsx"):
        out = tmp_path / f"t.{fmt}"
        assert cli_main(["--db", str(small_store), "sql", sql, "-o", str(out)]) == 0
        if fmt == "json":
            got[fmt] = list(json.loads(out.read_text())[0].values())
        elif fmt == "xlsx":
            got[fmt] = [c.value for c in openpyxl.load_workbook(out).active[2]]
        else:
            got[fmt] = list(csv.reader(out.open(), delimiter="\t" if fmt == "tsv" else ","))[1]
    assert got == dict.fromkeys(got, want)
    assert dt.datetime.fromisoformat(want[1]) == dt.datetime(2026, 12, 5, 22, 8, 7, 900000, dt.UTC)
    capsys.readouterr()
    assert cli_main(["--db", str(small_store), "runs", "-f", "json"]) == 0
    stamp = json.loads(capsys.readouterr().out)[0]["ingested_at"]
    assert "T" in stamp and dt.datetime.fromisoformat(stamp).year >= 2026


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("the old output\n")

    def half_then_interrupt(tmp):
        tmp.write_text("half of the new")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_output(out, half_then_interrupt)
    assert out.read_text() == "the old output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]

    def disk_full(tmp):
        tmp.write_text("some")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="no space left on device"):
        write_output(tmp_path / "new.csv", disk_full)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_a_folder_is_not_an_output(tmp_path):
    with pytest.raises(OutputError, match="is a folder"):
        write_output(tmp_path, lambda tmp: tmp.write_text("x"))


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_pipe_is_written_into_not_replaced(small_store, tmp_path, fmt):
    """`-o /dev/stdout` or a FIFO: the output goes into the pipe, which stays a pipe (a rename
    over it replaced it, and a device such as /dev/null, with a regular file)."""
    fifo = tmp_path / "pipe"
    code, data = through_fifo(fifo, lambda: cli_main(["--db", str(small_store), "query", "top-kernels", "-f", fmt,
                                                      "-o", str(fifo)]))
    assert code == 0
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert (data.startswith(b"name,instances,total_ns") if fmt == "csv" else data[:4] == b"PAR1")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("path", ["/dev/stdout", "/dev/fd/1"])
def test_dev_stdout_redirected_to_a_file_is_written_into_in_place(small_store, tmp_path, path):
    """`tracekit query ... -o /dev/stdout >> log`: the standard output is a regular file, and
    the output goes into it where the shell left it, as with `-o -`. A temporary file renamed
    over the file /dev/stdout leads to replaced the log: what the shell wrote before the
    command was lost, and what it wrote after went to the old, deleted file. The "wrote" line
    goes to stderr, as for a pipe."""
    import subprocess
    import sys

    (tmp_path / "out").mkdir()
    log = tmp_path / "out" / "log.txt"
    log.write_text("before\n")
    with open(log, "a") as out:
        proc = subprocess.run([sys.executable, "-m", "tracekit.cli", "--db", str(small_store), "query",
                               "top-kernels", "--limit", "1", "-f", "csv", "-o", path],
                              stdout=out, stderr=subprocess.PIPE, text=True)
        out.write("after\n")
    assert proc.returncode == 0, proc.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "before" and lines[1].startswith("name,instances,total_ns") and lines[2:] != []
    assert lines[-1] == "after" and len(lines) == 4
    assert proc.stderr.startswith(f"wrote {path}")
    assert [p.name for p in log.parent.iterdir()] == ["log.txt"]


def test_a_reader_that_stops_reading_is_no_output_error(monkeypatch):
    """`tracekit export trace -o - | head`: the pipe's reader leaves early. That is the
    reader's choice, not a failed write: BrokenPipeError goes up as such (click then exits
    quietly), where any other failure to write is an OutputError naming the output."""
    import io
    import sys

    class Closed(io.BytesIO):
        def __init__(self, err):
            super().__init__()
            self.err = err

        def write(self, data):
            raise self.err

    for err, expect in ((BrokenPipeError(32, "Broken pipe"), BrokenPipeError),
                        (OSError(28, "No space left on device"), OutputError)):
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(Closed(err)))
        with pytest.raises(expect):
            write_output("-", lambda tmp: tmp.write_text("x" * 100))


@pytest.mark.parametrize("path", [None, 5, ["out.html"]])
def test_an_output_path_of_another_type_is_an_error(small_store, path):
    import tracekit
    from tracekit.report import write_report

    with tracekit.open(small_store, read_only=True) as tk:
        with pytest.raises(OutputError, match=r"^output path .*: expected str or PathLike, not \w+$"):
            write_report(tk, path)


def test_an_output_named_only_by_its_suffix_is_one_line(small_store, capsys, tmp_path):
    """-o .html, -o dir/.csv: pathlib reads a name that starts with a dot as a name with no
    suffix, so each command would write a format its name does not say (a chart: "unknown
    format"; a query: a terminal table into .csv): every command that picks a format by
    the suffix says what is wrong, and writes nothing."""
    for cmd, name in ((["chart", "top-kernels", "--run", "1"], ".html"), (["report", "--run", "1"], ".html"),
                      (["query", "top-kernels", "--run", "1"], ".csv"), (["query", "top-kernels", "-f", "csv"], ".CSV"),
                      (["export", "trace", "--run", "1"], ".gz"), (["export", "sweep"], ".xlsx")):
        out = tmp_path / name
        assert cli_main(["--db", str(small_store), *cmd, "-o", str(out)]) == 2, cmd
        assert _one_error_line(capsys) == (f"tracekit: error: {out}: '{name}' is a suffix with no name before it (a "
                                           f"name that starts with a dot has no suffix); name the file, e.g. "
                                           f"{tmp_path / ('out' + name)}"), cmd
        assert list(tmp_path.iterdir()) == [small_store.parent], cmd


def test_a_file_the_limit_cut_says_how_many_rows_it_holds(small_store, capsys, tmp_path):
    """-o FILE of a query writes the rows its limit keeps (gpu-trace: 1,000 by default), as
    the terminal's table does; the "wrote" line says that the limit cut them, and how to get
    them all, where a table says "N of M rows (--limit 0 for all)": it said only "wrote
    FILE", and a trace written that way silently held 1,000 of the run's 3,930 GPU ops."""
    import polars as pl

    db = ["--db", str(small_store)]
    full = tmp_path / "all.csv"
    assert cli_main([*db, "query", "top-kernels", "--run", "1", "--limit", "0", "-o", str(full)]) == 0
    n = pl.read_csv(full).height
    assert n > 2 and capsys.readouterr().out == f"wrote {full}\n"
    for ext in ("csv", "json", "parquet", "xlsx"):
        out = tmp_path / f"top2.{ext}"
        assert cli_main([*db, "query", "top-kernels", "--run", "1", "--limit", "2", "-o", str(out)]) == 0
        assert capsys.readouterr().out == f"wrote {out}: 2 of {n:,} rows (--limit 0 for all)\n"
    assert pl.read_csv(full).head(2).equals(pl.read_csv(tmp_path / "top2.csv"))
    # an alias that fixes a parameter counts the rows of its own answer
    out = tmp_path / "alias.csv"
    assert cli_main([*db, "query", "cuda_gpu_kern_sum", "--run", "1", "--limit", "1", "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}: 1 of {n:,} rows (--limit 0 for all)\n"
    # -o - is the standard output: the line goes to stderr
    assert cli_main([*db, "query", "top-kernels", "--run", "1", "--limit", "2", "-f", "csv", "-o", "-"]) == 0
    got = capsys.readouterr()
    assert got.err == f"wrote -: 2 of {n:,} rows (--limit 0 for all)\n" and got.out.count("\n") == 3
