"""What a demanding user meets on the command line. Each is a one-line error (exit 2)
that leaves the store as it was, or the answer asked for."""

from __future__ import annotations

import lzma
import shutil

import pytest
from conftest import DATA, store_state, through_fifo
from test_cli_errors import one_error_line

import tracekit
from tracekit.cli import main as cli_main


def _cli(db, *args) -> int:
    return cli_main(["--db", str(db), *args])


#: a small nsys export not in small_store (which holds capture_range and ncu_sections)
OTHER_NSYS = DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz"


@pytest.mark.parametrize("cmd", [["query", "top-kernels"], ["chart", "top-kernels", "-o", "{tmp}/c.json"],
                                 ["ingest", str(OTHER_NSYS)]])
def test_a_parameter_given_twice_with_two_values_is_an_error(small_store, capsys, tmp_path, cmd):
    before = store_state(small_store)
    args = [a.replace("{tmp}", str(tmp_path)) for a in cmd]
    assert _cli(small_store, *args, "-p", "group=name", "-p", "group=family") == 2
    assert "--param group: given twice (group=name, group=family); give it once" in one_error_line(capsys)
    assert store_state(small_store) == before and not (tmp_path / "c.json").exists()
    # the same value twice is that value
    assert _cli(small_store, "query", "top-kernels", "-p", "group=family", "-p", "group=family") == 0


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_diff_columns_in_every_format(small_store, capsys, tmp_path, fmt):
    out = tmp_path / f"d.{fmt}"
    assert _cli(small_store, "diff", "nsys_run", "nsys_run", "-f", fmt, "-o", str(out),
                "--columns", "scope,key,p_value") == 0
    import polars as pl

    df = {"csv": pl.read_csv, "json": pl.read_json, "parquet": pl.read_parquet}[fmt](out)
    assert df.columns == ["scope", "key", "p_value"] and df.height > 0
    # a table's columns are the table's (p), and the file formats' names of the same (p_value)
    capsys.readouterr()
    assert _cli(small_store, "diff", "nsys_run", "nsys_run", "--columns", "scope,p") == 0
    table = capsys.readouterr().out
    assert _cli(small_store, "diff", "nsys_run", "nsys_run", "--columns", "scope,p_value") == 0
    assert capsys.readouterr().out == table
    assert _cli(small_store, "diff", "nsys_run", "nsys_run", "--columns", "p_values") == 2
    assert "no column 'p_values'" in one_error_line(capsys)


@pytest.mark.parametrize(("args", "message"), [
    (["-f", "parquet"], "--format parquet needs -o FILE"),
    (["-f", "csv", "-o", "{tmp}/missing/d.csv"], "does not exist"),
    (["-f", "csv", "-o", "{store}"], "this is the store"),
    (["--columns", "nope"], "no column 'nope'"),
])
def test_diff_options_are_checked_before_a_file_is_ingested(small_store, capsys, tmp_path, args, message):
    before = store_state(small_store)
    args = [a.replace("{tmp}", str(tmp_path)).replace("{store}", str(small_store)) for a in args]
    assert _cli(small_store, "diff", "nsys_run", str(OTHER_NSYS), *args) == 2
    assert message in one_error_line(capsys)
    assert store_state(small_store) == before


def test_a_diff_of_two_files_that_fails_keeps_neither(small_store, capsys, tmp_path):
    """The first file is ingested, then the second cannot be (cut) or cannot be compared
    with it (another kind): the store keeps neither, and a store the diff created goes."""
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(lzma.decompress(OTHER_NSYS.read_bytes())[:60_000])
    ncu_csv = tmp_path / "details.csv"
    ncu_csv.write_bytes(lzma.decompress((DATA / "ncu_sections" / "details.csv.xz").read_bytes()))
    before = store_state(small_store)
    first = DATA / "nsys_memops" / "export.sqlite.xz"
    assert _cli(small_store, "diff", str(first), str(cut)) == 2
    assert "cut.sqlite" in one_error_line(capsys)
    assert store_state(small_store) == before
    assert _cli(small_store, "diff", str(first), str(ncu_csv)) == 2
    line = one_error_line(capsys)  # the file is named, not a run id the store does not keep
    assert f"{first} [nsys] and {ncu_csv} [ncu] share no scope" in line, line
    assert store_state(small_store) == before
    fresh = tmp_path / "fresh.duckdb"
    assert _cli(fresh, "diff", str(first), str(cut)) == 2
    capsys.readouterr()
    assert not fresh.exists() and not fresh.with_name("fresh.duckdb.wal").exists()
    # a comparison that succeeds keeps both runs
    assert _cli(small_store, "diff", str(first), str(OTHER_NSYS), "-f", "csv") == 0
    capsys.readouterr()
    assert _cli(small_store, "runs", "-f", "csv", "--columns", "name") == 0
    # two files of one name: each run is named by its file's folder too (`--run` tells them apart)
    assert capsys.readouterr().out.split() == ["name", "nsys_run", "ncu_run", "nsys_memops/export",
                                               "nsys_odd_nvtx_cuda_only/export"]


def test_a_copy_of_the_store_is_unchanged_by_a_failed_diff(small_store, capsys, tmp_path):
    """(The run ids too: the next ingest gets the id it would have got.)"""
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(lzma.decompress(OTHER_NSYS.read_bytes())[:60_000])
    other = tmp_path / "other.duckdb"
    shutil.copyfile(small_store, other)
    assert _cli(small_store, "diff", str(DATA / "nsys_memops" / "export.sqlite.xz"), str(cut)) == 2
    capsys.readouterr()
    for db in (small_store, other):
        assert _cli(db, "ingest", str(OTHER_NSYS)) == 0
    outs = capsys.readouterr().out.splitlines()
    assert outs[0].split(":")[1] == outs[1].split(":")[1], outs  # the same run id in both


def test_dash_is_the_standard_output(small_store, capsys, tmp_path, monkeypatch):
    """`-o -` writes the data to stdout (not a file named '-'); the "wrote" line goes to
    stderr, out of the data's way."""
    import json

    monkeypatch.chdir(tmp_path)
    assert _cli(small_store, "export", "trace", "--run", "nsys_run", "-o", "-") == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["traceEvents"] and got.err.startswith("wrote -: run 1")
    assert _cli(small_store, "query", "top-kernels", "-f", "csv", "-o", "-") == 0
    assert capsys.readouterr().out.startswith("name,instances,total_ns")
    assert _cli(small_store, "report", "--run", "nsys_run", "-o", "-") == 0
    got = capsys.readouterr()
    assert got.out.rstrip().endswith("</html>") and got.err == "wrote -\n"
    assert _cli(small_store, "export", "parquet", "-o", "-") == 2
    assert "-o -: a dataset is a folder of files" in one_error_line(capsys)
    assert [p.name for p in tmp_path.iterdir()] == ["store"]  # (small_store's folder), no file "-"


def test_the_wrote_line_stays_out_of_a_pipe(small_store, capsys, tmp_path):
    """A trace written into a pipe (`-o /dev/stdout | ...`) is the JSON alone."""
    import json

    fifo = tmp_path / "pipe"
    code, data = through_fifo(fifo, lambda: _cli(small_store, "export", "trace", "--run", "nsys_run", "-o", str(fifo)))
    assert code == 0
    assert json.loads(data)["traceEvents"]
    assert capsys.readouterr().err.startswith(f"wrote {fifo}: run 1")


@pytest.mark.parametrize(("expr", "text"), [
    ("union_value(k := 1)", "1"), ("[union_value(k := 1)]", "[1]"), ("{'i': INTERVAL 1 DAY}", "{'i': 1 day}"),
    ("12::VARINT", "12"), ("TIMETZ '01:02:03+02'", "01:02:03+02"), ("5::BIT", "0" * 29 + "101"),
    ("340282366920938463463374607431768211455::UHUGEINT", "340282366920938463463374607431768211455"),
])
def test_sql_values_polars_cannot_read_are_their_text(small_store, capsys, expr, text):
    """Unions, intervals inside lists or structs (a Polars panic or error before: exit 1 and a
    traceback), BIT and VARINT (shown as raw bytes), a time with its zone (the zone lost), a
    UHUGEINT past 2^127 (-1, through Arrow's signed decimal): DuckDB's text of the value, in
    every format."""
    for fmt, want in (("table", f"{text}\n1 row"), ("csv", f"v\n{text}\n")):
        assert _cli(small_store, "sql", f"SELECT {expr} AS v", "-f", fmt) == 0
        out = capsys.readouterr().out
        assert (out.splitlines()[2].strip() + "\n" + out.splitlines()[3] if fmt == "table" else out) == want, out
    assert _cli(small_store, "sql", f"SELECT {expr} AS v", "-f", "json") == 0
    import json

    assert json.loads(capsys.readouterr().out) == [{"v": text}]


def test_a_table_shows_integers_past_2_to_the_53_exactly(small_store, capsys):
    """A table printed 9007199254740993 as 9,007,199,254,740,992 (through a float): counts,
    sums (HUGEINT, a Decimal in Python) and times in their own unit are exact."""
    q = ("SELECT 9007199254740993 AS n, 9007199254740993 AS start_ns, "
         "sum(x) AS s FROM (VALUES (9007199254740993), (1)) t(x)")
    assert _cli(small_store, "sql", q) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == [
        "9,007,199,254,740,993", "9,007,199,254,740,993", "9,007,199,254,740,994"]
    # a DECIMAL past a float's digits, rounded as a decimal (through a float: ...768 and ...741,440)
    assert _cli(small_store, "sql", "SELECT 1234567890123456789.5::DECIMAL(38,1) AS d, "
                "12345678901234567890123.25::DECIMAL(38,2) AS e") == 0
    assert capsys.readouterr().out.splitlines()[2].split() == [
        "1,234,567,890,123,456,790", "12,345,678,901,234,567,890,123"]
    # a HUGEINT of 39 digits (Polars hands Python a Decimal of 38: ...410,573 followed by a 0)
    top = "170141183460469231731687303715884105727"
    for sign in (1, -1):
        assert _cli(small_store, "sql", f"SELECT {sign} * {top}::HUGEINT AS h") == 0
        assert capsys.readouterr().out.splitlines()[2].split() == [f"{sign * int(top):,}"]


@pytest.mark.parametrize("expr", [
    "'infinity'::TIMESTAMP", "'-infinity'::TIMESTAMPTZ", "'infinity'::DATE", "'-infinity'::DATE",
    "'5877642-06-25'::DATE", "'290309-12-22 (BC) 00:00:00'::TIMESTAMP", "'infinity'::TIMESTAMP_NS",
    "'-infinity'::TIMESTAMP_S", "'infinity'::TIMESTAMP_MS", "'10000-01-01 12:00:00'::TIMESTAMP",
    "'0001-01-01 (BC)'::DATE", "'0044-03-15 (BC) 10:00:00'::TIMESTAMPTZ", "'24:00:00'::TIME",
    "['infinity'::DATE, DATE '2024-01-02']", "{'t': 'infinity'::TIMESTAMP}",
])
def test_dates_python_cannot_hold_are_their_text_in_every_format(small_store, capfd, tmp_path, expr):
    """DuckDB's infinite dates and timestamps, years past 9999 or before 1, 24:00:00: Polars
    panics on them (its message, and with RUST_BACKTRACE a backtrace, written on stderr by
    Rust, below Python: hence capfd), fails (year 10000), or shows another value
    (TIMESTAMP_NS's infinity as 2262-04-11, TIMESTAMP_S's as 1969-12-31, 24:00:00 as
    nothing). They are DuckDB's text, in every format, and nothing reaches stderr."""
    import csv
    import json

    import duckdb
    import pyarrow.parquet as pq

    text = duckdb.sql(f"SELECT CAST({expr} AS VARCHAR)").fetchall()[0][0]  # (the time zone of this machine)
    sql = f"SELECT {expr} AS v, 1 AS n"
    assert _cli(small_store, "sql", sql) == 0
    out, err = capfd.readouterr()
    assert out.splitlines()[2].split("  ")[0].strip() == text and err == ""
    assert _cli(small_store, "sql", sql, "-f", "csv") == 0
    out, err = capfd.readouterr()
    assert list(csv.reader(out.splitlines())) == [["v", "n"], [text, "1"]] and err == ""
    assert _cli(small_store, "sql", sql, "-f", "json") == 0
    out, err = capfd.readouterr()
    assert json.loads(out) == [{"v": text, "n": 1}] and err == ""
    assert _cli(small_store, "sql", sql, "-f", "parquet", "-o", str(tmp_path / "v.parquet")) == 0
    out, err = capfd.readouterr()
    assert pq.read_table(tmp_path / "v.parquet").to_pylist() == [{"v": text, "n": 1}] and err == ""


def test_dates_python_can_hold_keep_their_type(small_store, capfd, tmp_path):
    """A column of ordinary dates and times stays one (Parquet keeps the timestamp type)."""
    import datetime as dt

    import pyarrow.parquet as pq

    sql = "SELECT TIMESTAMP '2024-05-01 10:00:00' AS t, DATE '9999-12-31' AS d, TIME '23:59:59' AS h"
    assert _cli(small_store, "sql", sql, "-f", "parquet", "-o", str(tmp_path / "v.parquet")) == 0
    assert pq.read_table(tmp_path / "v.parquet").to_pylist() == [
        {"t": dt.datetime(2024, 5, 1, 10), "d": dt.date(9999, 12, 31), "h": dt.time(23, 59, 59)}]
    capfd.readouterr()  # (the "wrote" line)
    assert _cli(small_store, "sql", sql) == 0
    out, err = capfd.readouterr()
    assert out.splitlines()[2].split() == ["2024-05-01", "10:00:00", "9999-12-31", "23:59:59"] and err == ""


def test_a_join_of_tables_with_dates_numbers_its_columns_of_one_name(small_store):
    """A join's columns of one name come numbered (name, name_1), as DuckDB's own Polars
    export numbers them, whether or not the result holds dates (runs.ingested_at does)."""
    with tracekit.open(small_store, read_only=True) as tk:
        df = tk.sql("SELECT * FROM runs a JOIN runs b USING (run_id) ORDER BY run_id")
        assert {"name", "name_1", "ingested_at", "ingested_at_1"} <= set(df.columns)
        assert df["name"].to_list() == df["name_1"].to_list() and df["ingested_at"].dtype == df["ingested_at_1"].dtype
        plain = tk.sql("SELECT 1 AS a, 2 AS a, 3 AS a, 4 AS a_1")
        assert plain.columns == ["a", "a_1", "a_2", "a_1_1"] and plain.row(0) == (1, 2, 3, 4)


def test_a_file_compared_in_a_dataset_says_how_to_compare_it(small_store, capsys, tmp_path):
    """A dataset opens read-only for questions: the file is not ingested, and the error says
    the commands that do it (it said "open the store writable", which no option does)."""
    ds = tmp_path / "ds"
    assert _cli(small_store, "export", "parquet", "-o", str(ds)) == 0
    capsys.readouterr()
    assert _cli(ds, "diff", str(OTHER_NSYS), "nsys_run") == 2
    line = one_error_line(capsys)
    assert f"ingest it (tracekit --db {ds} ingest {OTHER_NSYS}) and compare its run" in line, line
    assert _cli(ds, "ingest", str(OTHER_NSYS), "--name", "other") == 0
    assert _cli(ds, "diff", "other", "nsys_run", "-f", "csv") == 0


def test_a_cut_ncu_report_says_where_its_block_ends(tmp_path):
    """(It said the blocks end one byte past the file's end, wherever it was cut.)"""
    import re

    from tracekit.errors import InputError
    from tracekit.ingest.ncu_rep import check_container

    rep = lzma.decompress((DATA / "ncu_sections" / "report.ncu-rep.xz").read_bytes())
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(rep[:1000])
    with pytest.raises(InputError) as err:
        check_container(cut)
    m = re.search(r"truncated report \(a block ends at byte (\d+), past the file's 1000 bytes\)", str(err.value))
    assert m and 1001 < int(m[1]) <= len(rep), str(err.value)


def test_a_report_compared_with_a_file_that_fails_keeps_it_out(small_store, capsys, tmp_path):
    """`report --vs FILE` ingested the file, then failed to compare it (a host-only run and
    a run without NVTX share no scope, which shows only once the file is read): the run
    stayed in the store, named by an id in the error. As `diff FILE RUN`, it keeps nothing
    and names the file; a report that is written keeps it."""
    assert _cli(small_store, "ingest", str(DATA / "nsys_cpu_only" / "export.sqlite.xz"), "--name", "host") == 0
    capsys.readouterr()
    before = store_state(small_store)
    out = tmp_path / "r.html"
    assert _cli(small_store, "report", "--run", "host", "--vs", str(OTHER_NSYS), "-o", str(out)) == 2
    assert f"report --vs: {OTHER_NSYS} [nsys without NVTX trace] and run 3 (host)" in one_error_line(capsys)
    assert store_state(small_store) == before and not out.exists()
    assert _cli(small_store, "report", "--run", "nsys_run", "--vs", str(OTHER_NSYS), "-o", str(out)) == 0
    assert out.exists()
    capsys.readouterr()
    assert _cli(small_store, "runs", "-f", "csv", "--columns", "run_id") == 0
    assert capsys.readouterr().out.split() == ["run_id", "1", "2", "3", "4"]


def test_a_reader_that_stops_early_is_not_a_regression(small_store):
    """`diff --gate | head`: the reader closes the pipe while the table is written; the command
    ends quietly with 141 (as a process SIGPIPE ends), never with 1, which --gate means for
    "regressed" (click's own exit for a closed pipe is 1)."""
    import subprocess
    import sys

    for _ in range(2):
        p = subprocess.Popen([sys.executable, "-m", "tracekit.cli", "--db", str(small_store), "diff", "1", "1",
                              "--gate", "--limit", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()  # (before the command writes: its first write meets the closed pipe)
        err = p.stderr.read().decode()
        assert p.wait() == 141 and err == "", err


def test_limit_cuts_the_answer_of_a_query_that_takes_none(tmp_path, capsys):
    """--limit, an option of every query, on queries that take no limit of their own
    (comm-overlap, run-info): their first rows (it was "unknown parameter 'limit'"); its
    checks are limit's."""
    db = str(tmp_path / "n.duckdb")
    assert cli_main(["--db", db, "ingest", str(DATA / "nsys_nccl_overlap" / "export.sqlite.xz")]) == 0
    capsys.readouterr()
    assert cli_main(["--db", db, "query", "comm-overlap", "--limit", "1", "-f", "csv"]) == 0
    one = capsys.readouterr().out.splitlines()
    assert cli_main(["--db", db, "query", "comm-overlap", "--limit", "0", "-f", "csv"]) == 0
    every = capsys.readouterr().out.splitlines()
    assert len(every) == 3 and one == every[:2]
    assert cli_main(["--db", db, "query", "comm-overlap", "--limit", "1"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("1 of 2 rows (--limit 0 for all)")
    assert cli_main(["--db", db, "query", "run-info", "--limit", "-1"]) == 2
    assert "limit must be >= 0" in one_error_line(capsys)


def test_every_command_lets_go_of_the_store_when_it_returns(small_store, capsys, tmp_path):
    """A command run in-process (a notebook, a script calling ``main``) leaves no connection
    to the store behind, whether it succeeded or failed: the next opener of the file, with
    any settings, gets it at once. Garbage collection is off, as it may be at that moment: a
    connection reachable only through a reference cycle (Altair keeps exception frames in
    one) would otherwise still hold the file."""
    import gc

    t = tmp_path
    commands = [(0, ["query", "top-kernels", "--run", "nsys_run"]), (2, ["query", "top-kernels", "--run", "nosuch"]),
                (0, ["sql", "SELECT 1"]), (0, ["chart", "top-kernels", "--run", "nsys_run", "-o", f"{t}/c.json"]),
                (0, ["diff", "nsys_run", str(OTHER_NSYS), "-f", "csv"]),  # (the file is run 3 now)
                (0, ["compare", "nsys_run", "3", "-f", "csv"]), (2, ["compare", "nsys_run", "nsys_run"]),
                (0, ["chart", "compare", "-p", "base=nsys_run", "-p", "runs=3", "-o", f"{t}/c.json"]),
                (0, ["report", "--run", "nsys_run", "-o", f"{t}/r.html"]),
                (0, ["export", "trace", "--run", "nsys_run", "-o", f"{t}/t.json.gz"]),
                (0, ["export", "parquet", "--run", "nsys_run", "-o", f"{t}/ds"]), (2, ["export", "parquet", "-o", "-"])]
    gc.collect()
    gc.disable()
    try:
        for code, cmd in commands:
            assert _cli(small_store, *cmd) == code, cmd
            capsys.readouterr()
            assert store_state(small_store) is not None, cmd  # (DuckDB refuses a second configuration)
    finally:
        gc.enable()


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_what_many_files_lack_alike_is_said_a_few_times_then_counted(tmp_path, capsys, workers):
    """The ranks of a job whose capture window missed the GPU work each warned, a line per file
    (a thousand ranks: a thousand lines). Six copies of nsys_window_missed (each its own run):
    the first three files' lines, then one line with how many more and which."""
    import sqlite3

    data = lzma.open(DATA / "nsys_window_missed" / "export.sqlite.xz").read()
    files = []
    for k in range(6):
        files.append(tmp_path / f"rank{k}.sqlite")
        files[-1].write_bytes(data)
        con = sqlite3.connect(files[-1])
        con.execute(f"PRAGMA user_version = {k + 1}")  # (another file: another run)
        con.commit()
        con.close()
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "ingest", *map(str, files), *workers]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    text = ": nsys traced CUDA but recorded no CUDA event (no API call, kernel or copy): the capture's window"
    assert len(said) == 4 and all(text in line for line in said)
    shown = [line.split(": ")[2] for line in said[:3]]  # (in the order the files were read: with workers, any)
    assert shown == [str(f) for f in files[:3]] or workers
    rest = [str(f) for f in files if str(f) not in shown]
    assert said[3].startswith(f"tracekit: warning: 3 more files ({rest[0]} ... {rest[2]}){text}")
    with tracekit.open(tmp_path / "s.duckdb", read_only=True) as tk:
        assert tk.sql("SELECT count(*) AS n FROM runs")["n"][0] == 6
    # a text that names no file is said each time, whatever the folder it is said in
    from tracekit.cli import _SameWarnings

    said = _SameWarnings([tmp_path, "."])
    assert all(said.show(f"run {k} (r{k}) holds no memsets: its capture traced CUDA and recorded none")
               for k in range(6))
    assert all(said.show(f"{tmp_path}/x\0y: odd") for _ in range(6))


def test_a_capture_whose_window_missed_the_gpu_work_says_so(small_store, capsys):
    """nsys_window_missed: the capture range set on a host-only NVTX range after the program's
    GEMMs, so CUDA was traced and nothing of it recorded. Ingest says so; a kernel question
    answers no row and one line saying why; a question the run has rows for says nothing more."""
    assert _cli(small_store, "ingest", str(DATA / "nsys_window_missed" / "export.sqlite.xz"), "--name", "missed") == 0
    err = capsys.readouterr().err
    assert "nsys_window_missed/export.sqlite.xz: nsys traced CUDA but recorded no CUDA event (no API call, kernel " \
           "or copy): the capture's window (nsys --delay, --duration, --capture-range) held none" in err
    assert _cli(small_store, "query", "top-kernels", "--run", "missed") == 0
    said = capsys.readouterr()
    assert said.err.splitlines() == [
        "tracekit: warning: run 3 (missed) holds no CUDA event at all (no API call, kernel or copy), "
        "though its capture traced CUDA: the capture's window (nsys --delay, --duration, --capture-range) held none "
        "of the program's GPU work, or the work ran in a process nsys did not follow"]
    # findings of nothing (nsys-rules' cases all 0) would read as a fact of the program: said too
    assert _cli(small_store, "query", "nsys-rules", "--run", "missed") == 0
    said = capsys.readouterr()
    assert "Synchronous memsets" in said.out and said.err.splitlines() == [
        "tracekit: warning: run 3 (missed) holds no CUDA event at all (no API call, kernel or copy), though its "
        "capture traced CUDA: the capture's window (nsys --delay, --duration, --capture-range) held none of the "
        "program's GPU work, or the work ran in a process nsys did not follow"]
    assert _cli(small_store, "query", "nvtx-summary", "--run", "missed") == 0
    said = capsys.readouterr()
    assert said.err == "" and ":step" in said.out and ":host" in said.out
    # a diff against it: every kernel would read as removed by the program; the capture missed them
    assert _cli(small_store, "diff", "nsys_run", "missed") == 0
    said = capsys.readouterr()
    assert "removed" in said.out and said.err.splitlines() == [
        "tracekit: warning: diff: run 3 (missed) holds no CUDA event at all (no API call, kernel or copy), though its "
        "capture traced CUDA: the capture's window (nsys --delay, --duration, --capture-range) held none of the "
        "program's GPU work, or the work ran in a process nsys did not follow; its kernels, CUDA API calls, copies "
        "and GPU time are compared as none"]
    # a run with kernels and no memset: the note names the events none of which happened
    assert _cli(small_store, "query", "sync-memsets", "--run", "nsys_run") == 0
    assert capsys.readouterr().err.splitlines() == [
        "tracekit: warning: run 1 (nsys_run) holds no memsets: its capture traced CUDA and recorded none"]
    assert _cli(small_store, "query", "gpu-gaps", "--run", "nsys_run") == 0
    assert capsys.readouterr().err == ""


#: kernels of the nsys run with what `sql` reads specially: a name twice, an interval, a BLOB, and
#: a timestamp column whose one infinite value lies in a late part (the whole column is text)
_PARTS_SQL = ("SELECT k.start_ns, k.name, k.name, INTERVAL (k.correlation_id % 3) DAY AS i, 'ab'::BLOB AS b, "
              "CASE WHEN row_number() OVER (ORDER BY k.start_ns, k.correlation_id) = 12 THEN 'infinity'::TIMESTAMP "
              "ELSE TIMESTAMP '2024-01-01' + INTERVAL (k.correlation_id) SECOND END AS t "
              "FROM kernels k ORDER BY k.start_ns, k.correlation_id")


def test_sql_writes_a_result_in_parts_that_equal_it_read_whole(small_store, capsys, tmp_path, monkeypatch):
    """`tracekit sql -f csv|json|parquet` held the whole result (a result larger than memory: an
    out-of-memory error, exit 1); it now writes it part by part as DuckDB streams it. Written in
    parts of 3 rows, the real kernels of a capture (and a table without rows) are the same
    files, byte for byte, as in one part (Parquet: the same table); no part is ever read whole. An
    error of the SQL after the first part is the SQL's one line, and no file is left."""
    import json

    import pyarrow.parquet as pq

    from tracekit import store

    with tracekit.open(small_store, read_only=True) as tk:
        n = tk.sql("SELECT count(*) AS n FROM kernels")["n"][0]
        whole = tk.sql(_PARTS_SQL)
        assert n > 12 and whole.columns[1:3] == ["name", "name_1"] and whole["t"].dtype.is_(whole["i"].dtype)
        monkeypatch.setattr(store.Tracekit, "frame", lambda *a: pytest.fail("a result read whole"))
        parts = []
        tk.sql_each(_PARTS_SQL, parts.append, batch_rows=3)
        assert [p.height for p in parts] == [3] * (n // 3) + ([n % 3] if n % 3 else [])
        assert parts[0].vstack(parts[1]).vstack(parts[-1]).columns == whole.columns
        monkeypatch.undo()

    def files(rows: int, tag: str) -> dict[str, bytes]:
        monkeypatch.setattr(store, "SQL_BATCH_ROWS", rows)
        out = {}
        for sql, what in ((_PARTS_SQL, "kernels"), (_PARTS_SQL + " LIMIT 0", "none")):
            for fmt in ("csv", "json", "parquet", "csv.gz"):
                path = tmp_path / f"{tag}_{what}.{fmt}"
                assert _cli(small_store, "sql", sql, "-o", str(path)) == 0
                out[f"{what}.{fmt}"] = pq.read_table(path) if fmt == "parquet" else path.read_bytes()
            capsys.readouterr()
            assert _cli(small_store, "sql", sql, "-f", "json") == 0
            out[f"{what} on stdout"] = capsys.readouterr().out.encode()
        return out

    in_parts, in_one = files(3, "parts"), files(1 << 30, "one")
    assert in_parts == in_one
    text = in_parts["kernels.csv"].decode().splitlines()
    assert len(text) == n + 1 and text[0] == "start_ns,name,name_1,i,b,t" and "infinity" in text[12]
    assert len(json.loads(in_parts["kernels on stdout"])) == n and json.loads(in_parts["none on stdout"]) == []
    assert in_parts["none.csv"].decode() == "start_ns,name,name_1,i,b,t\n"
    # (DuckDB's error past the first part came through pyarrow as an OSError: "cannot write")
    monkeypatch.setattr(store, "SQL_BATCH_ROWS", 4096)
    failing = "SELECT CASE WHEN i > 250000 THEN error('boom at ' || i) ELSE i END AS x FROM range(300000) t(i)"
    for fmt in ("csv", "json", "parquet"):
        assert _cli(small_store, "sql", failing, "-o", str(tmp_path / f"f.{fmt}")) == 2
        assert one_error_line(capsys) == "tracekit: error: SQL error: boom at 250001"
        assert not (tmp_path / f"f.{fmt}").exists()


@pytest.mark.parametrize(("call", "said"), [
    (lambda db, tk: tracekit.open(db, read_only="yes"), "open: read_only 'yes': expected bool, not str"),
    (lambda db, tk: tracekit.open(123), "open: db 123: expected str or PathLike or None, not int"),
    (lambda db, tk: tracekit.open("a\0b", read_only=True), "--db 'a\\x00b': a path holds no NUL character"),
    (lambda db, tk: tk.sql_each("SELECT 1", None), "sql_each: each None: a function of one DataFrame"),
    (lambda db, tk: tk.sql_each("SELECT 1", print, batch_rows=0), "sql_each: batch_rows 0: a number of rows >= 1"),
    (lambda db, tk: tk.sql_each("SELECT 1", print, batch_rows="a"), "sql_each: batch_rows 'a': expected int or None"),
    (lambda db, tk: tk.sql_head("SELECT 1", rows=-1), "sql: rows -1: a number of rows >= 0"),
])
def test_the_python_api_says_what_is_wrong_with_an_argument(small_store, call, said):
    """Wrong types and values given to tracekit.open and the SQL methods were Python's and
    DuckDB's errors (a TypeError of duckdb.connect, several lines); one ParamError line each."""
    from tracekit.errors import ParamError

    with tracekit.open(small_store, read_only=True) as tk, pytest.raises(ParamError) as err:
        call(small_store, tk)
    assert str(err.value).startswith(said) and "\n" not in str(err.value)
