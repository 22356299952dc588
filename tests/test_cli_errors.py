"""Bad input is a one-line error with exit code 2, never an internal error (exit 1)."""

from __future__ import annotations

import re

import pytest
from conftest import DATA, NSYS_EXPORTS, scenario_of

import tracekit
import tracekit.errors
from tracekit.cli import main as cli_main


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("tracekit: error: "), err
    assert "internal error" not in err[0] and "Traceback" not in err[0]
    return err[0]


def test_csv_of_a_nested_column_names_it(small_store, capsys):
    assert cli_main(["--db", str(small_store), "sql", "SELECT 1 AS a, [1, 2] AS l", "-f", "csv"]) == 2
    assert "'l'" in one_error_line(capsys)
    # JSON holds it
    assert cli_main(["--db", str(small_store), "sql", "SELECT 1 AS a, [1, 2] AS l", "-f", "json"]) == 0
    assert capsys.readouterr().out.strip() == '[{"a":1,"l":[1,2]}]'


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_plain_query_still_answers(small_store, capsys, fmt):
    assert cli_main(["--db", str(small_store), "query", "top-kernels", "--run", "nsys_run", "-f", fmt]) == 0


def _cli(db, *args) -> int:
    return cli_main(["--db", str(db), *args])


@pytest.mark.parametrize("run", ["²", "١", "1.0", "0x1", "+1", "99999999999999999999999"])
def test_run_that_is_no_id_is_looked_up_as_a_name(small_store, capsys, run):
    assert _cli(small_store, "query", "top-kernels", "--run", run) == 2
    line = one_error_line(capsys)
    assert "no run" in line or "no nsys run" in line, line


def test_limit_out_of_range_is_a_parameter_error(small_store, capsys):
    assert _cli(small_store, "query", "top-kernels", "--limit", "99999999999999999999999") == 2
    assert "out of range" in one_error_line(capsys)
    assert _cli(small_store, "query", "top-kernels", "-p", "limit=-99999999999999999999999") == 2
    assert "out of range" in one_error_line(capsys)


BIG = "99999999999999999999999"  # past 64 bits


@pytest.mark.parametrize("args, option", [
    (["diff", "1", "1", "--limit", BIG], "--limit"),
    (["diff", "1", "1", "--threshold", "1e400"], "--threshold"),
    (["export", "trace", "--from", BIG], "--from"),
    (["export", "trace", "--to", "-" + BIG], "--to"),
    (["export", "trace", "--nvtx", "x", "--instance", BIG], "--instance"),
    (["ingest", "--workers", BIG, "{export}"], "--workers"),
    (["capture", "--bs", BIG], "--bs"),
    (["capture", "--iters", BIG], "--iters"),
    (["capture", "--warmup-ms", "nan"], "--warmup-ms"),
    (["bench", "attention", "--rep-ms", "inf"], "--rep-ms"),
])
def test_a_number_option_past_its_range_is_a_bad_value(small_store, capsys, tmp_path, args, option):
    """Every integer option takes a 64-bit integer and every number option a finite one
    (cli_params, for all commands): past that, one line naming the option and the value,
    nothing written."""
    from conftest import NSYS_EXPORTS, store_state

    before = store_state(small_store)
    args = [a.replace("{export}", str(NSYS_EXPORTS["odd_nvtx_cuda_only"])) for a in args]
    assert _cli(small_store, *args, *(["-o", str(tmp_path / "t.json")] if args[0] == "export" else [])) == 2
    line = one_error_line(capsys)
    assert f"Invalid value for '{option}'" in line and args[args.index(option) + 1] in line, line
    assert "out of range (a 64-bit integer" in line or "is not a finite number" in line, line
    assert store_state(small_store) == before and not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("args", [["query", "top-kernels"], ["runs"], ["diff", "{export}", "{export}"],
                                  ["diff", "--jobs", "{export}", "{export}"]])
def test_columns_and_all_columns_together_are_one_line(small_store, capsys, args):
    """--columns with --all-columns (the table said to give --all-columns, which was given):
    one line before anything is read or written; a file to compare is not ingested."""
    from conftest import NSYS_EXPORTS, store_state

    before = store_state(small_store)
    args = [a.replace("{export}", str(NSYS_EXPORTS["odd_nvtx"])) for a in args]
    assert _cli(small_store, *args, "--columns", "name", "--all-columns") == 2
    assert one_error_line(capsys) == ("tracekit: error: --columns and --all-columns: give one (--columns names the "
                                      "columns shown, --all-columns shows every one)")
    assert store_state(small_store) == before


@pytest.mark.parametrize("param", [f"rank={BIG}", "rank=2147483648", "bs=2147483648"])
def test_a_rank_or_count_parameter_past_32_bits(small_store, capsys, param):
    """The rank and sweep queries read rank, bs and nc as 32-bit integers: a larger one
    made every rank query of the store an internal error."""
    from conftest import NSYS_EXPORTS, store_state

    before = store_state(small_store)
    assert _cli(small_store, "ingest", str(NSYS_EXPORTS["odd_nvtx_cuda_only"]), "-p", param) == 2
    assert "is a whole number from " in one_error_line(capsys)
    assert store_state(small_store) == before


def test_schema_version_that_is_text(small_store, capsys):
    import duckdb

    con = duckdb.connect(str(small_store))
    con.execute("UPDATE _store SET value = 'eight' WHERE key = 'schema_version'")
    con.close()
    before = small_store.read_bytes()
    for cmd in (["runs"], ["query", "top-kernels"], ["ingest", "tests/data/nsys_capture_range/export.sqlite.xz"]):
        assert _cli(small_store, *cmd) == 2, cmd
        assert "'eight' is not a number" in one_error_line(capsys)
    assert small_store.read_bytes() == before


@pytest.mark.parametrize("keep", [5000, 12288, 300_000, 1_000_000])
def test_truncated_store(small_store, capsys, keep):
    data = small_store.read_bytes()[:keep]
    small_store.write_bytes(data)
    for cmd in (["runs"], ["query", "top-kernels", "--run", "1"], ["query", "roofline"],
                ["sql", "SELECT count(*) FROM ncu_metrics"], ["chart", "roofline", "-o", str(small_store.with_name("r.json"))]):
        assert _cli(small_store, *cmd) == 2, cmd
        line = one_error_line(capsys)
        assert str(small_store.name) in line, line
    assert small_store.read_bytes() == data
    assert not small_store.with_name("r.json").exists()


def test_an_sqlite_file_is_not_a_store_and_nothing_downloads(tmp_path, capsys, monkeypatch):
    import lzma
    import shutil

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    export = tmp_path / "export.sqlite"
    with lzma.open("tests/data/nsys_capture_range/export.sqlite.xz") as src, export.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    before = export.read_bytes()
    for cmd in (["runs"], ["query", "top-kernels"], ["sql", "SELECT 1"],
                ["ingest", "tests/data/nsys_capture_range/export.sqlite.xz"]):
        assert cli_main(["--db", str(export), *cmd]) == 2, cmd
        line = one_error_line(capsys)
        assert "an SQLite database, not a tracekit store" in line, line
    assert export.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.sqlite"]  # no -wal, no ~/.duckdb


def test_other_databases_and_folders_are_not_stores(tmp_path, capsys):
    import duckdb

    foreign = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE mine AS SELECT 1 AS x")
    con.close()
    before = foreign.read_bytes()
    blank = tmp_path / "blank.duckdb"
    duckdb.connect(str(blank)).close()
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database\n")
    empty, short = tmp_path / "empty.duckdb", tmp_path / "short.duckdb"  # (touched; cut short)
    empty.write_bytes(b"")
    short.write_bytes(b"DUCK\n")
    cases = [(foreign, "not a tracekit store"), (tmp_path, "is a folder"), (junk, "not a valid DuckDB"),
             (empty, "empty.duckdb: an empty file, not a tracekit store; name the store's file (--db FILE), or "
                     "remove it for a new store there"), (short, "short.duckdb: a file of 5 bytes, not a tracekit store")]
    for db, what in cases:
        for cmd in (["runs"], ["sql", "SELECT 1"], ["ingest", "tests/data/nsys_capture_range/export.sqlite.xz"]):
            assert cli_main(["--db", str(db), *cmd]) == 2, (db, cmd)
            assert what in one_error_line(capsys)
    assert foreign.read_bytes() == before and empty.read_bytes() == b"" and short.read_bytes() == b"DUCK\n"
    assert cli_main(["--db", str(blank), "runs"]) == 2
    assert "empty database; ingest a capture first" in one_error_line(capsys)


def test_a_new_store_in_a_missing_folder_names_the_folder(tmp_path, capsys):
    """A store to create whose folder is missing (directly, or as a dangling link's
    target): one line naming that folder, nothing created."""
    link = tmp_path / "link.duckdb"
    link.symlink_to(tmp_path / "gone" / "x.duckdb")
    export = "tests/data/nsys_capture_range/export.sqlite.xz"
    for db, named in ((tmp_path / "missing" / "x.duckdb", "missing"), (link, "gone")):
        assert cli_main(["--db", str(db), "ingest", export]) == 2
        line = one_error_line(capsys)
        assert f"folder {tmp_path / named} does not exist" in line, line
        assert ("a link to" in line) == (db == link), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.duckdb"]
    (tmp_path / "a.duckdb").symlink_to(tmp_path / "b.duckdb")
    (tmp_path / "b.duckdb").symlink_to(tmp_path / "a.duckdb")
    assert cli_main(["--db", str(tmp_path / "a.duckdb"), "ingest", export]) == 2
    assert "a.duckdb: a loop of symbolic links, leading to no file" in one_error_line(capsys)
    assert cli_main(["--db", str(tmp_path / "a.duckdb"), "runs"]) == 2  # (not "no such database; ingest a capture")
    assert "a.duckdb: a loop of symbolic links, leading to no file" in one_error_line(capsys)
    assert cli_main(["--db", str(link), "runs"]) == 2
    assert "link.duckdb: no such database" in one_error_line(capsys)


# -- a question asked of the wrong kind of run --------------------------------------


def test_nsys_query_of_an_ncu_run(small_store, capsys):
    for run in ("2", "ncu_run"):
        assert _cli(small_store, "query", "top-kernels", "--run", run) == 2
        assert one_error_line(capsys) == (
            "tracekit: error: run 2 (ncu_run) is an ncu run; top-kernels needs an nsys run (see `tracekit runs`)")


def test_ncu_query_and_chart_of_an_nsys_run(small_store, capsys):
    out = small_store.with_name("roof.html")
    assert _cli(small_store, "query", "roofline", "--run", "1") == 2
    assert "run 1 (nsys_run) is an nsys run; roofline needs an ncu run" in one_error_line(capsys)
    assert _cli(small_store, "chart", "roofline", "--run", "1", "-o", str(out)) == 2
    assert "run 1 (nsys_run) is an nsys run; roofline needs an ncu run" in one_error_line(capsys)
    assert not out.exists()


def test_run_all_only_where_the_query_spans_runs(small_store, capsys):
    assert _cli(small_store, "query", "top-kernels", "--run", "all") == 2
    assert "--run all" in one_error_line(capsys)
    assert _cli(small_store, "query", "roofline", "--run", "all", "-f", "csv") == 0
    assert capsys.readouterr().out.count("\n") > 1


def test_the_right_kind_with_no_rows_is_a_valid_empty_answer(small_store, capsys):
    assert _cli(small_store, "query", "nvtx-ranges", "--run", "1", "-p", "min_dur_ns=9000000000000000", "-f", "csv") == 0
    out = capsys.readouterr()
    assert out.err == "" and len(out.out.splitlines()) == 1  # the header only
    assert _cli(small_store, "query", "nvtx-ranges", "--run", "1", "-p", "min_dur_ns=9000000000000000") == 0
    assert "no rows" in capsys.readouterr().out


def _chart_kinds():
    from tracekit.charts import CHARTS
    from tracekit.registry import get_registry

    for name, spec in sorted(CHARTS.items()):
        if spec.query is not None:
            yield name, get_registry().get(spec.query)


@pytest.mark.parametrize("chart", [name for name, _ in _chart_kinds()])
def test_every_chart_of_a_run_of_the_wrong_kind_is_an_error_and_no_file(small_store, capsys, chart):
    """Run 1 is nsys, run 2 ncu: each chart asked of the run its query cannot read says
    so (a chart over all runs says it takes no --run); the one it can read is drawn."""
    q = dict(_chart_kinds())[chart]
    out = small_store.with_name(f"{chart}.html")
    if "run" not in q.params:
        assert _cli(small_store, "chart", chart, "--run", "1", "-o", str(out)) == 2
        assert "takes no --run" in one_error_line(capsys)
        assert not out.exists()
        return
    if q.source == "bench":  # neither run is a bench run
        for run, kind in (("1", "nsys"), ("2", "ncu")):
            assert _cli(small_store, "chart", chart, "--run", run, "-o", str(out)) == 2
            assert f"is an {kind} run; {q.name} needs a bench run" in one_error_line(capsys)
        assert not out.exists()
        return
    if q.source not in ("nsys", "ncu"):  # the rank charts: runs 1 and 2 are ranks of no job
        for run in ("1", "2"):
            assert _cli(small_store, "chart", chart, "--run", run, "-o", str(out)) == 2
            assert f"run {run} has no rank" in one_error_line(capsys)
        assert not out.exists()
        return
    kind = q.source  # (kernel-headroom reads an ncu run too: its -p ncu=)
    wrong, right = ("2", "1") if kind == "nsys" else ("1", "2")
    other = "ncu" if kind == "nsys" else "nsys"
    assert _cli(small_store, "chart", chart, "--run", wrong, "-o", str(out)) == 2
    line = one_error_line(capsys)
    assert f"is an {other} run; {q.name} needs an {kind} run" in line, line
    assert not out.exists()
    code = _cli(small_store, "chart", chart, "--run", right, "-o", str(out))
    # drawn, or (roofline: run 2 lacks the roofline sections) refused for that reason
    assert code == 0 or "needs an" not in one_error_line(capsys)


@pytest.mark.parametrize("args", [
    ["query", "sweep-latency"], ["query", "sweep-requests"],
    ["chart", "sweep-latency"], ["chart", "sweep-heatmap"], ["export", "sweep"],
])
def test_sweep_questions_of_a_store_without_a_sweep_are_errors(small_store, capsys, args):
    """The store holds an nsys and an ncu run, no timing run: not an empty table, chart or
    spreadsheet but the reason."""
    out = small_store.with_name("sweep.xlsx" if args[0] == "export" else "sweep.html")
    extra = ["-o", str(out)] if args[0] != "query" else []
    assert _cli(small_store, *args, *extra) == 2
    line = one_error_line(capsys)
    assert "no timing run in" in line and "needs a timing run" in line, line
    if args[0] == "export":  # (the command is named, not the query it reads)
        assert line.startswith("tracekit: error: export sweep: no timing run in "), line
    assert not out.exists()


def test_sweep_kernels_without_a_point_captured_under_nsys_is_an_error(small_store, capsys):
    """A bare nsys export alone is no sweep's point. A sweep of timing points beside it: the
    store has both kinds, but no point of the sweep was captured under nsys."""
    assert _cli(small_store, "query", "sweep-kernels") == 2
    assert one_error_line(capsys).startswith(
        "tracekit: error: sweep-kernels: no point of a sweep captured under nsys outside a sweep: no ok nsys run "
        "outside any sweep has grid values")
    point = sorted((DATA / "hstu_sweep" / "runs").iterdir())[0]
    assert _cli(small_store, "ingest", str(point)) == 0
    capsys.readouterr()
    assert _cli(small_store, "query", "sweep-kernels") == 2
    assert one_error_line(capsys) == (
        "tracekit: error: sweep-kernels: sweep sweep-20261122T012018.110Z (the latest) was captured under none, not "
        "nsys: tracekit query sweep-latency -p sweep=sweep-20261122T012018.110Z")
    assert _cli(small_store, "ingest", str(DATA / "hstu_capture_nsys")) == 0
    capsys.readouterr()
    # a `tracekit capture --tool nsys` run is outside the sweep: the latest sweep still has no nsys
    # point, and the capture answers where asked for (a run outside any sweep, or every run)
    assert _cli(small_store, "query", "sweep-kernels") == 2
    assert "(the latest) was captured under none, not nsys: tracekit query sweep-latency" in one_error_line(capsys)
    for sweep in ("4", "all"):  # (run 4: the capture; 1, 2: the small store, 3: the point)
        assert _cli(small_store, "query", "sweep-kernels", "--limit", "1", "-p", f"sweep={sweep}") == 0
        assert "_hstu_" in capsys.readouterr().out


def test_run_all_of_a_store_without_that_kind_is_an_error(tmp_path, capsys):
    import tracekit

    db = tmp_path / "ncu_only.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz")
    assert _cli(db, "query", "roofline", "--run", "all") == 0  # an ncu query: the one ncu run
    capsys.readouterr()
    with tracekit.open(tmp_path / "nsys_only.duckdb") as tk:
        tk.ingest(DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz")
    assert _cli(tmp_path / "nsys_only.duckdb", "query", "roofline", "--run", "all") == 2
    line = one_error_line(capsys)
    assert "roofline: no ncu run in" in line and "needs an ncu run" in line, line


@pytest.mark.parametrize("cmd", [["query", "nvtx-ranges"], ["query", "top-kernels", "-f", "csv"],
                                 ["chart", "top-kernels", "-o", "x.png"]])
@pytest.mark.parametrize("param", ["name", "tk", "self"])
def test_a_parameter_named_like_an_argument_is_unknown(small_store, capsys, cmd, param, tmp_path, monkeypatch):
    """-p name=x (or tk, self) is an unknown parameter of the query, not a TypeError of the
    function that runs it."""
    monkeypatch.chdir(tmp_path)
    assert _cli(small_store, *cmd, "--run", "nsys_run", "-p", f"{param}=x") == 2
    assert f"unknown parameter '{param}'" in one_error_line(capsys)
    assert not (tmp_path / "x.png").exists()


def test_chart_run_given_as_a_parameter(small_store, capsys, tmp_path):
    out = tmp_path / "k.json"
    assert _cli(small_store, "chart", "top-kernels", "-p", "run=nsys_run", "-o", str(out)) == 0
    assert out.exists()


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json", "parquet"])
def test_columns_of_a_file_format(small_store, capsys, tmp_path, fmt):
    out = tmp_path / f"k.{fmt}"
    assert _cli(small_store, "query", "top-kernels", "--run", "nsys_run", "-f", fmt, "-o", str(out),
                "--columns", "name,instances") == 0
    import polars as pl

    df = {"csv": pl.read_csv, "tsv": lambda p: pl.read_csv(p, separator="\t"), "json": pl.read_json,
          "parquet": pl.read_parquet}[fmt](out)
    assert df.columns == ["name", "instances"] and df.height > 0


@pytest.mark.parametrize("cmd", [["query", "top-kernels", "--run", "nsys_run"], ["diff", "nsys_run", "nsys_run"],
                                 ["sql", "SELECT 'a\tb' AS name, 1 AS n"]])
def test_a_tsv_output_holds_the_csvs_rows(small_store, capsys, tmp_path, cmd):
    """-o x.tsv (or -f tsv) writes the rows CSV does, tab-separated, for pasting into a
    spreadsheet (before: the terminal table in a file named .tsv); a tab in a value is quoted."""
    import polars as pl

    assert _cli(small_store, *cmd, "-o", str(tmp_path / "k.csv")) == 0
    assert _cli(small_store, *cmd, "-o", str(tmp_path / "k.tsv")) == 0
    assert _cli(small_store, *cmd, "-f", "tsv") == 0
    out = capsys.readouterr().out
    text = (tmp_path / "k.tsv").read_text()
    assert text == out[out.index(text.splitlines()[0]):] and "\t" in text.splitlines()[0]
    assert pl.read_csv(tmp_path / "k.tsv", separator="\t").equals(pl.read_csv(tmp_path / "k.csv"))


@pytest.mark.parametrize("cmd", [["query", "top-kernels", "--run", "nsys_run"], ["sql", "SELECT 1 AS a"],
                                 ["diff", "nsys_run", "nsys_run"]])
def test_a_gz_output_is_the_format_before_it_compressed(small_store, capsys, tmp_path, cmd):
    """-o x.csv.gz (or .json.gz, or -f csv -o x.gz) is what -o x.csv writes, gzip-compressed; a
    name ending in .gz that names no text format is one line, and no file (before: the terminal
    table, uncompressed, in a file named .csv.gz)."""
    import gzip

    for name, fmt in (("k.csv.gz", None), ("k.tsv.gz", None), ("k.json.gz", None), ("k.gz", "csv")):
        plain = tmp_path / f"plain.{fmt or name.split('.')[1]}"
        assert _cli(small_store, *cmd, *(["-f", fmt] if fmt else []), "-o", str(plain)) == 0
        assert _cli(small_store, *cmd, *(["-f", fmt] if fmt else []), "-o", str(tmp_path / name)) == 0
        assert gzip.decompress((tmp_path / name).read_bytes()) == plain.read_bytes()
    capsys.readouterr()
    bad = tmp_path / "bad"
    bad.mkdir()
    for name, fmt in (("k.xlsx.gz", None), ("k.txt.gz", None), ("k.gz", None), ("k.csv.gz", "parquet")):
        assert _cli(small_store, *cmd, *(["-f", fmt] if fmt else []), "-o", str(bad / name)) == 2
        assert f"-o {bad / name}: a .gz output is gzip-compressed CSV, TSV or JSON" in one_error_line(capsys)
    assert not list(bad.iterdir())


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_a_querys_own_error_is_shown_once(small_store, capsys, fmt):
    """A query's error('NAME: ...') reads as the query wrote it, in a table and in a file format."""
    assert _cli(small_store, "query", "top-kernels", "--run", "nsys_run", "-p", "group=kind", "-f", fmt) == 2
    assert one_error_line(capsys) == "tracekit: error: top-kernels: group=kind: choose name or family"


@pytest.mark.parametrize("query, run, param", [("top-kernels", "nsys_run", "group=family"),
                                               ("nvtx-summary", "nsys_run", "style=PushPop"),
                                               ("ncu-rules", "ncu_run", "group=kernel")])
def test_blanks_around_a_choice_are_ignored(small_store, capsys, query, run, param):
    """As around a number (-p limit=' 2 ') or a run: -p 'group=family ' is group=family, not
    an error saying it is neither name nor family (nor, passed on to the query, the default)."""
    assert _cli(small_store, "query", query, "--run", run, "-p", param, "-f", "csv") == 0
    plain = capsys.readouterr().out
    name, value = param.split("=")
    assert _cli(small_store, "query", query, "--run", run, "-p", f"{name}= {value} ", "-f", "csv") == 0
    assert capsys.readouterr().out == plain


def test_control_characters_of_a_name_are_escaped_in_the_error(small_store, capsys, tmp_path):
    """A file name or run name with a newline or a terminal escape: still one line, shown
    escaped (the terminal's cursor and colours untouched)."""
    bad = tmp_path / "two\nlines\x1b[31m.sqlite"
    bad.write_text("hello")
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(bad)]) == 2
    line = one_error_line(capsys)
    assert "two\\nlines\\x1b[31m.sqlite: not a recognised profile" in line and "\x1b" not in line
    assert cli_main(["--db", str(small_store), "query", "top-kernels", "--run", "a\nb"]) == 2
    assert "no run 'a\\nb'" in one_error_line(capsys)


def test_control_characters_of_an_output_name_are_escaped_in_the_wrote_line(small_store, capsys, tmp_path):
    """-o FILE named with a newline and a terminal escape (a name made from a capture's): the
    file is written under its name, and the line that says so is one line, shown escaped."""
    for args, name in ((["query", "top-kernels", "--run", "1"], "k\nx\x1b[2J.csv"),
                       (["export", "parquet"], "ds\x1b]0;t\x07"),
                       (["export", "trace", "--run", "1"], "t\r\x1b]0;x\x07.json")):
        out = tmp_path / name
        capsys.readouterr()
        assert cli_main(["--db", str(small_store), *args, "-o", str(out)]) == 0
        said = capsys.readouterr()
        assert out.exists() and said.err == ""
        assert said.out.startswith("wrote ")
        assert said.out.count("\n") == 1 and not any(c in said.out for c in "\x1b\r\x07"), said.out
        assert f"{tmp_path}/{name.encode('unicode_escape').decode()}" in said.out, said.out


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_an_ingest_whose_every_file_failed_says_nothing_landed(tmp_path, capsys, workers):
    """Two files, neither a profile: an error line each, then one that says none landed (not
    "the others landed"), exit 2, and no store."""
    files = [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    for f in files:
        f.write_text("not a profile")
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", *map(str, files), *workers]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(": not a recognised profile" in line for line in err[:2])
    assert err[2] == "tracekit: error: none of the 2 files ingested (errors above); nothing landed"
    assert not db.exists()


def test_sql_values_every_format_can_show(small_store, capsys):
    """Infinities and NaN (DuckDB 2 returns inf for 1/0) print as themselves; bytes are hex in
    CSV and JSON; intervals are text; what a format cannot hold is one line naming it."""
    q = "SELECT 1/0 AS x, 'nan'::DOUBLE AS y, -1/0 AS total_ns, 1.25 AS z"
    assert _cli(small_store, "sql", q) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["inf", "nan", "-inf", "1.25"]
    assert _cli(small_store, "sql", "SELECT 'ab'::BLOB AS b, INTERVAL 1 DAY AS i", "-f", "csv") == 0
    assert capsys.readouterr().out == "b,i\n6162,1 day\n"
    assert _cli(small_store, "sql", "SELECT 'ab'::BLOB AS b, INTERVAL 1 DAY AS i", "-f", "json") == 0
    assert capsys.readouterr().out == '[{"b":"6162","i":"1 day"}]\n'
    assert _cli(small_store, "sql", "SELECT map([1], [2]) AS m", "-f", "json") == 2
    assert "--format json: the result cannot be written as JSON" in one_error_line(capsys)


def test_paths_that_cannot_be_read_or_written(small_store, tmp_path, capsys):
    """A pipe, a folder where a file belongs, an output under a file: one line naming the
    path, exit 2, the store as it was."""
    import os
    import shutil

    from conftest import store_state

    before = store_state(small_store)
    fifo = tmp_path / "p.sqlite"
    os.mkfifo(fifo)
    assert _cli(small_store, "ingest", str(fifo)) == 2
    assert f"{fifo}: not a regular file or folder" in one_error_line(capsys)
    # (diff, compare and report --vs waited for the pipe's writer, deaf to Ctrl-C)
    for argv in (["diff", "1", str(fifo)], ["compare", "1", str(fifo)],
                 ["report", "--run", "1", "--vs", str(fifo), "-o", str(tmp_path / "r.html")]):
        assert _cli(small_store, *argv) == 2
        assert f"{fifo}: not a regular file or folder (a pipe, socket or device)" in one_error_line(capsys), argv
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(DATA / "nsys_capture_range" / "export.sqlite.xz", run / "nsys.sqlite.xz")
    (run / "meta.json").mkdir()
    assert _cli(small_store, "ingest", str(run)) == 2
    assert f"{run / 'meta.json'}: Is a directory" in one_error_line(capsys)
    (tmp_path / "file").write_text("x")
    assert _cli(small_store, "export", "parquet", "-o", str(tmp_path / "file" / "ds")) == 2
    assert str(tmp_path / "file") in one_error_line(capsys)
    assert store_state(small_store) == before


@pytest.mark.parametrize("param", ["bs=eight", "nc=0", "bs=1.5", "world_size=-2"])
def test_a_count_parameter_that_is_no_count(small_store, capsys, param):
    """bs, nc and world_size are read as whole numbers by the sweep and rank queries: text
    there would make those queries fail for the whole store."""
    from conftest import store_state

    before = store_state(small_store)
    assert _cli(small_store, "ingest", str(DATA / "nsys_capture_range" / "export.sqlite.xz"), "-p", param) == 2
    key, value = param.split("=")
    assert f"--param {key}='{value}': {key} (" in one_error_line(capsys)
    assert store_state(small_store) == before


@pytest.mark.parametrize("args", [["--run", "1"], ["-p", "run=1"]])
def test_run_given_to_a_query_over_every_run(small_store, capsys, args):
    """The documented --run of a query that reads every run says so, not "unknown parameter"."""
    assert _cli(small_store, "query", "sweep-latency", *args) == 2
    assert "sweep-latency: --run does not apply: sweep-latency answers over every run" in one_error_line(capsys)


def test_a_store_in_a_folder_that_is_not_writable(small_store, capsys, monkeypatch):
    """DuckDB writes its log beside the store: a folder that is not writable is said before
    the ingest reads anything (it failed at the commit). The suite runs as root, for whom
    every folder is writable: the permission is what os.access says."""
    import os

    from conftest import store_state

    import tracekit.store

    real = os.access
    monkeypatch.setattr(tracekit.store.os, "access",
                        lambda p, mode: False if os.fspath(p) == os.fspath(small_store.parent) else real(p, mode))
    before = store_state(small_store)
    for args in (["ingest", str(DATA / "nsys_multithread" / "export.sqlite.xz")], ["runs", "rm", "1"]):
        assert _cli(small_store, *args) == 2
        line = one_error_line(capsys)
        assert f"{small_store}: cannot write the store: its folder {small_store.parent} is not writable" in line
    assert store_state(small_store) == before
    assert _cli(small_store, "query", "top-kernels", "--run", "nsys_run", "--limit", "1") == 0  # reading is fine


@pytest.mark.parametrize("text", ["", "  ", "-- a comment only"])
def test_sql_without_a_statement(small_store, capsys, text):
    assert _cli(small_store, "sql", "--", text) == 2
    assert "SQL error: no statement given" in one_error_line(capsys)


def test_a_file_whose_name_starts_with_a_dash_says_where_it_goes(tmp_path, monkeypatch, capsys):
    """`tracekit ingest -run.sqlite`: click reads it as options (-r ...); the error names the
    file and the two ways to give it, and both ingest it."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copyfile(NSYS_EXPORTS["diff_base_a"], tmp_path / "-run.sqlite.xz")
    db = str(tmp_path / "s.duckdb")
    assert cli_main(["--db", db, "ingest", "-run.sqlite.xz"]) == 2
    assert one_error_line(capsys).endswith("; -run.sqlite.xz is a file: give it as ./-run.sqlite.xz (or after --)")
    # (only the file taken for the unknown option is named: not another argument starting with -)
    assert cli_main(["--db", db, "query", "top-kernels", "-o", "-run.sqlite.xz", "--bogus"]) == 2
    assert "is a file" not in one_error_line(capsys)
    assert not (tmp_path / "s.duckdb").exists()
    assert cli_main(["--db", db, "ingest", "--", "-run.sqlite.xz"]) == 0
    assert cli_main(["--db", db, "ingest", "./-run.sqlite.xz"]) == 0
    assert "already ingested" in capsys.readouterr().out


def test_sql_that_starts_with_a_comment_says_to_put_it_after_dashes(small_store, capsys):
    """Click reads an argument that starts with - as an option: SQL whose first line is a comment
    says where it goes (after --), and there it runs."""
    sql = "-- the top kernel\nSELECT 1 AS a"
    assert _cli(small_store, "sql", sql) == 2
    assert one_error_line(capsys).endswith('an argument that starts with - goes after -- (tracekit sql -- "-- ...")')
    assert _cli(small_store, "sql", "-f", "csv", "--", sql) == 0
    assert capsys.readouterr().out == "a\n1\n"


@pytest.mark.parametrize("args, message", [
    (["--run", "nsys_run", "-p", "run=2"], "--run nsys_run and -p run=2: give the run once"),
    (["--limit", "2", "-p", "limit=3"], "--limit 2 and -p limit=3: give the limit once"),
    (["--columns", "name,name,total_ns"], "--columns: 'name' named twice"),
])
def test_an_option_given_twice_differently(small_store, capsys, args, message):
    assert _cli(small_store, "query", "top-kernels", *args) == 2
    assert message in one_error_line(capsys)
    assert _cli(small_store, "query", "top-kernels", "--run", "nsys_run", "-p", "run=nsys_run", "--limit", "1") == 0
    # one limit written two ways (as a table prints it, and plain) is given once
    assert _cli(small_store, "query", "top-kernels", "-p", "limit=1,000", "--limit", "1000", "-f", "csv") == 0


# -- found by the audit of every command x option x hostile value ----------------------------


@pytest.mark.parametrize("how", ["option", "environment"])
@pytest.mark.parametrize("args", [["ingest", "{export}"], ["runs"], ["query", "top-kernels"],
                                  ["sweep", "--bs", "1", "--nc", "4", "--tool", "none", "--out", "{tmp}/runs"]])
def test_a_store_in_memory_is_a_bad_value(tmp_path, capsys, monkeypatch, how, args):
    """--db :memory: (or TRACEKIT_DB=:memory:) is DuckDB's database in memory: an ingest said
    "run 1 ... rows" and kept nothing, a query said DuckDB's "Cannot launch in-memory database
    in read-only mode!"; a sweep would run every point before its ingest lost them."""
    from conftest import NSYS_EXPORTS

    monkeypatch.chdir(tmp_path)
    args = [a.replace("{export}", str(NSYS_EXPORTS["odd_nvtx_cuda_only"])).replace("{tmp}", str(tmp_path))
            for a in args]
    if how == "option":
        argv = ["--db", ":memory:", *args]
    else:
        monkeypatch.setenv("TRACEKIT_DB", ":memory:")
        argv = args
    assert cli_main(argv) == 2
    line = one_error_line(capsys)
    assert "':memory:' is DuckDB's database in memory, gone when the command ends" in line, line
    assert line.startswith("tracekit: error: Invalid value for '--db'" if how == "option"
                           else "tracekit: error: TRACEKIT_DB=':memory:'"), line
    assert list(tmp_path.iterdir()) == []  # (no run folder, no store file)


@pytest.mark.parametrize("args", [
    ["--db", "", "runs"], ["--db", " ", "sql", "SELECT 1"], ["--db", "", "ingest", "{export}"],
    ["ingest", ""], ["query", "top-kernels", "-f", "csv", "-o", " "], ["export", "trace", "-o", ""],
    ["chart", "top-kernels", "-o", ""], ["report", "-o", " "], ["export", "parquet", "-o", ""],
])
def test_an_empty_or_blank_path_is_a_bad_value(small_store, capsys, tmp_path, monkeypatch, args):
    """`--db "$DB"` with DB unset was the current folder: `ingest` made it a Parquet dataset
    (a folder per table) and `runs` read it; `-o " "` wrote a file named " "."""
    from conftest import NSYS_EXPORTS, store_state

    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    before = store_state(small_store)
    args = [a.replace("{export}", str(NSYS_EXPORTS["odd_nvtx_cuda_only"])) for a in args]
    argv = args if args[0] == "--db" else ["--db", str(small_store), *args]
    assert cli_main(argv) == 2
    assert "is not a path (it is empty or blank)" in one_error_line(capsys)
    assert list(here.iterdir()) == [] and store_state(small_store) == before


def test_a_parquet_file_is_not_a_store(tmp_path, capsys):
    """DuckDB opens a Parquet file as an in-memory database over it: an ingest "into" it said
    "run 1: 1,592 rows" and kept nothing."""
    import duckdb

    pq = tmp_path / "runs.parquet"
    duckdb.sql(f"COPY (SELECT 1 AS a) TO '{pq}' (FORMAT parquet)")
    before = pq.read_bytes()
    for cmd in (["ingest", "tests/data/nsys_odd_nvtx_cuda_only/export.sqlite.xz"], ["runs"], ["sql", "SELECT 1"]):
        assert cli_main(["--db", str(pq), *cmd]) == 2, cmd
        assert f"{pq}: not a valid DuckDB database file (a Parquet file)" in one_error_line(capsys)
    assert pq.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["runs.parquet"]


@pytest.mark.parametrize("args", [
    ["query", "top-kernels", "--run", ""], ["query", "roofline", "-p", "run= "], ["query", "run-info", "--run", ""],
    ["chart", "top-kernels", "--run", "", "-o", "{tmp}/c.json"], ["report", "--run", " ", "-o", "{tmp}/r.html"],
    ["export", "trace", "--run", "", "-o", "{tmp}/t.json"], ["export", "parquet", "--run", "", "-o", "{tmp}/ds"],
])
def test_an_empty_run_reference_is_an_error_not_the_latest_run(small_store, capsys, tmp_path, args):
    """`--run "$RUN"` with RUN unset answered about the latest run (`diff "" 1` already said
    "an empty run reference")."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert _cli(small_store, *args) == 2
    assert "an empty run reference" in one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


@pytest.mark.parametrize(("limit", "said"), [("-1", "must be >= 0 (0 = all rows)"),
                                             (str(2**64), None)])
def test_chart_diff_limit_out_of_range(small_store, capsys, tmp_path, limit, said):
    """limit=-1 drew every change but the last (a negative head()); a limit past 64 bits was
    an internal error (Polars' head())."""
    out = tmp_path / "d.json"
    assert _cli(small_store, "chart", "diff", "-p", "base=1", "-p", "new=1", "-p", f"limit={limit}", "-o", str(out)) == 2
    said = f"limit={limit}: {said}" if said else f"limit={limit} is out of range (64-bit integers)"
    assert f"chart diff: {said}" in one_error_line(capsys)
    assert not out.exists()


@pytest.mark.parametrize("args", [["query", "top-kernels", "-f", "csv"], ["sql", "SELECT 1 AS total_ns", "-f", "json"]])
def test_a_bad_timeunit_is_an_error_in_every_format(small_store, capsys, args):
    """(A file format keeps ns, so --timeunit bogus was ignored without a word.)"""
    assert _cli(small_store, *args, "--timeunit", "bogus") == 2
    assert one_error_line(capsys) == "tracekit: error: --timeunit 'bogus': choose one of auto, ns, us, ms, s"


def _name_filters():
    from tracekit.registry import get_registry

    return [(q.name, p.name) for q in get_registry().queries.values() for p in q.params.values()
            if p.type == "TEXT" and re.search(r"^only .*(contains this text|of this (path or )?name)", p.doc)]


def test_every_name_filter_is_known():
    assert {"gpu-trace", "nvtx-kernels", "warp-stalls", "ncu-source"} <= {q for q, _ in _name_filters()}


@pytest.mark.parametrize(("query", "param"), [f for f in _name_filters()
                                             if not f[0].startswith("strag") and not f[0].startswith("sweep-")])
def test_a_name_filter_that_matches_nothing_in_the_run_is_an_error(small_store, capsys, query, param):
    """A filter by name (text a name contains, or a range's name) that no row of the run
    matches is most likely a typo: a one-line error naming the value and where the names
    are listed, not an empty table that reads as "none of them ran" (stragglers: test_ranks;
    sweep-points and sweep-ncu, of a sweep's points: test_command_sweep)."""
    from tracekit.registry import get_registry

    q = get_registry().get(query)
    run = "ncu_run" if q.source == "ncu" else "nsys_run"
    if q.source == "bench":
        with tracekit.open(small_store) as tk:
            tk.ingest(DATA / "bench_pair" / "base.json.xz", name="bench_run")
        run = "bench_run"
    scen = scenario_of(q)  # (a run with what it is about: the GPU's or CPU's samples, the calls' stacks, ...)
    if scen is not None:
        with tracekit.open(small_store) as tk:
            tk.ingest(NSYS_EXPORTS[scen], name="sampled_run")
        run = "sampled_run"
    assert _cli(small_store, "query", query, "--run", run, "-p", f"{param}=no such thing", "-f", "csv") == 2
    line = one_error_line(capsys)
    assert line.startswith(f"tracekit: error: {query}: ") and "'no such thing'" in line, line
    assert "`tracekit query " in line, line  # where the names are listed


@pytest.mark.parametrize("args", [["query", "top-kernels", "--debug"], ["query", "--debug", "top-kernels"],
                                  ["runs", "--debug"]])
def test_debug_after_the_subcommand_is_the_global_option(small_store, capsys, monkeypatch, args):
    """--debug anywhere on the command line is tracekit's --debug (a subcommand has no such
    option: its parser called it unknown, through a traceback)."""
    assert _cli(small_store, *args) == 0
    got = capsys.readouterr()
    assert got.err == "" and got.out.strip()
    # and it does what it says: an error then shows its traceback before its line, and exits 2
    # as without it (not 1, which `diff --gate` says a regression with)
    for argv, error in ((["query", "nope", "--debug"], "QueryError: unknown query 'nope'"),
                        (["ingest", "--debug", str(small_store.parent / "missing.sqlite")], "InputError: ")):
        assert _cli(small_store, *argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("Traceback (most recent call last):") and f"tracekit.errors.{error}" in err, err
        assert err.splitlines()[-1].startswith("tracekit: error: "), err
    # an internal error (a bug): exit 1, the traceback under --debug, and no advice to use it there
    monkeypatch.setattr("tracekit.cli._query_out", lambda *a, **k: 1 / 0)
    assert _cli(small_store, "runs") == 1
    assert capsys.readouterr().err == ("tracekit: internal error: ZeroDivisionError: division by zero (rerun with "
                                       "--debug)\n")
    assert _cli(small_store, "--debug", "runs") == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("\ntracekit: internal error: ZeroDivisionError: division by "
                                                        "zero\n"), err
    # a command group without its command: the help, no traceback
    assert _cli(small_store, "--debug", "export") == 0
    assert "Traceback" not in capsys.readouterr().err
    # after --, it is an argument (here a run folder's name), not the option
    assert _cli(small_store, "ingest", "--", "--debug") == 2
    assert "--debug: no such file" in one_error_line(capsys)


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_a_link_to_nothing_says_what_it_is(tmp_path, capsys, workers):
    """A symbolic link that loops, or points at nothing, is named as such (Python calls both
    absent, as it does a path that is not there); no store is created."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone.sqlite")
    db = tmp_path / "t.duckdb"
    for name, text in (("a", "a loop of symbolic links, leading to no file"),
                       ("dangling", f"a symbolic link to {tmp_path / 'gone.sqlite'}, which does not exist"),
                       ("nothere", "no such file or directory")):
        assert cli_main(["--db", str(db), "ingest", str(tmp_path / name), *workers]) == 2
        assert one_error_line(capsys) == f"tracekit: error: {tmp_path / name}: {text}"
    assert not db.exists()


def test_a_typer_too_old_for_the_command_line_is_one_line(monkeypatch, capsys):
    """Before 0.29 Typer converts through click's types, which know neither of tracekit's
    own (every command failed with an internal error): ``install`` says False, and every
    command says which Typer it needs, exit 2. pyproject asks for that Typer."""
    import sys
    import tomllib
    from pathlib import Path

    import typer

    from tracekit import cli, cli_params

    monkeypatch.delattr(typer, "_coercion")  # a Typer without the hook
    monkeypatch.setitem(sys.modules, "typer._coercion", None)
    assert cli_params.install() is False
    monkeypatch.setattr(cli, "_CONVERTING", False)
    assert cli_main(["runs"]) == 2
    line = one_error_line(capsys)
    assert f"typer {cli_params.TYPER_NEEDED} or later" in line and "too old" in line
    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    assert f"typer>={cli_params.TYPER_NEEDED}" in project["dependencies"]


def test_comparisons_of_what_cannot_be_compared_say_what_is_wrong(small_store, tmp_path, capsys):
    """Folders that hold no run folder, into a store not there yet: what the folder lacks (a
    job's, with --jobs suggested), not a missing store, and no store is left; compare's
    errors name compare; a file not yet ingested is said to *may* have its kind's scopes;
    capture with nothing after -- is no run of the HSTU workload."""
    jobs = DATA / "nsys_jobs"
    db = tmp_path / "none.duckdb"
    for cmd in ("diff", "compare"):
        assert _cli(db, cmd, str(jobs / "base"), str(jobs / "after")) == 2
        line = one_error_line(capsys)
        assert line.startswith(f"tracekit: error: {jobs / 'base'}: not a run folder (no meta.json)"), line
        assert line.endswith("; a folder of a multi-rank job's exports compares with --jobs"), line
        assert not db.exists()
    assert _cli(db, "diff", str(DATA / "nsys_diff_base_a"), str(jobs / "after")) == 2
    assert "--jobs" not in one_error_line(capsys)  # (a folder of one export)
    assert _cli(small_store, "compare", "1", "99") == 2
    assert one_error_line(capsys).startswith("tracekit: error: compare: no run or sweep '99' in ")
    export = DATA / "nsys_diff_base_a" / "export.sqlite.xz"
    assert _cli(tmp_path / "s.duckdb", "diff", str(DATA / "sweep_pair" / "a"), str(export)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"tracekit: error: diff: {DATA / 'sweep_pair' / 'a'} and {export}: a sweep is compared "
                           "with a sweep, point by point, and a run with a run; give two sweeps or two runs (the "
                           f"points of {DATA / 'sweep_pair' / 'a'}: tracekit query sweep-latency -p sweep=sweep-"), line
    assert not (tmp_path / "s.duckdb").exists()
    # a file whose ingest warns (its capture's window missed the GPU work) in a comparison that
    # fails: the error alone, as the run it ingested is removed again
    missed = DATA / "nsys_window_missed" / "export.sqlite.xz"
    assert _cli(tmp_path / "m.duckdb", "diff", str(missed), str(DATA / "ncu_full" / "report.ncu-rep.xz")) == 2
    assert one_error_line(capsys).startswith(f"tracekit: error: diff: {missed} [nsys] and ")
    assert not (tmp_path / "m.duckdb").exists()
    assert cli_main(["capture", "--tool", "none", "--"]) == 2
    assert one_error_line(capsys) == ("tracekit: error: capture: nothing after --; give the program to run "
                                      "(tracekit capture --tool nsys -- python my_bench.py), or leave -- out to run "
                                      "the HSTU workload")


def test_an_error_that_repeats_a_huge_value_is_a_line_of_readable_length(small_store, capsys):
    """A 100 KB -p value was repeated whole: one 100 KB line. The line keeps its start (what)
    and its end (why) and says how much of the middle it leaves out."""
    from tracekit.cli import ERROR_CHARS

    assert _cli(small_store, "query", "nvtx-summary", "-p", "skip=" + "x" * 100_000) == 2
    line = one_error_line(capsys)
    assert line.startswith("tracekit: error: nvtx-summary: parameter skip='xxx") and line.endswith("' is not an integer")
    assert len(line) < ERROR_CHARS + 100 and "characters left out ...]" in line
    assert _cli(small_store, "query", "nvtx-summary", "-p", "skip=abc") == 2  # (a short one is whole)
    assert one_error_line(capsys) == "tracekit: error: nvtx-summary: parameter skip='abc' is not an integer"


def test_a_corrupt_gzip_export_is_one_line_and_the_others_land(small_store, tmp_path, capsys):
    """A .gz whose deflate data is damaged raised zlib's error, an internal error that stopped
    the ingest of the files after it; now refused as the corrupt .xz and .bz2 are."""
    import gzip
    import lzma

    raw = lzma.open(DATA / "nsys_diff_base_a" / "export.sqlite.xz").read()
    bad = bytearray(gzip.compress(raw))
    bad[20:40] = b"\xff" * 20
    (tmp_path / "bad.sqlite.gz").write_bytes(bytes(bad))
    good = DATA / "nsys_diff_base_b" / "export.sqlite.xz"
    assert _cli(small_store, "ingest", str(tmp_path / "bad.sqlite.gz"), str(good)) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"tracekit: error: {tmp_path / 'bad.sqlite.gz'}: cannot decompress (Error -3 while decompressing "
                   "data: invalid literal/lengths set); the file is truncated or corrupt",
                   "tracekit: error: 1 of 2 files not ingested (errors above); the others landed"], err
    with tracekit.open(small_store, read_only=True) as tk:
        assert tk.runs().height == 3  # (the store's two, and the good file)


def test_an_export_whose_schema_sqlite_cannot_decode_is_one_line(small_store, tmp_path, capsys):
    """One byte of a table's name in sqlite_master made not UTF-8: SQLite's "malformed database
    schema (NAME)" reached Python's sqlite3 as a UnicodeDecodeError, an internal error (exit 1)
    in ingest and diff and a bare exception name with --workers; now the file is refused as
    corrupt, SQLite's words with the byte replaced, and the store is as it was."""
    import lzma

    from conftest import store_state

    raw = bytearray(lzma.open(DATA / "nsys_diff_base_a" / "export.sqlite.xz").read())
    name = b"TARGET_INFO_CUDA_CONTEXT_INFO"
    at = raw.index(name)  # (its first place: the name column of its sqlite_master row)
    raw[at + 5] = 0xEC
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(bytes(raw))
    said = (f"tracekit: error: {bad}: not a readable SQLite database (malformed database schema "
            "(TARGE\ufffd_INFO_CUDA_CONTEXT_INFO)); the file is truncated or corrupt")
    before = store_state(small_store)
    assert _cli(small_store, "ingest", str(bad)) == 2
    assert one_error_line(capsys) == said
    assert _cli(small_store, "diff", "1", str(bad)) == 2
    assert one_error_line(capsys) == said
    assert _cli(small_store, "ingest", "--workers", "2", str(bad)) == 2
    assert capsys.readouterr().err.splitlines() == [
        said, "tracekit: error: none of the 1 files ingested (errors above); nothing landed"]
    assert store_state(small_store) == before


def test_a_full_temporary_folder_is_not_the_files_fault(small_store, monkeypatch, capsys):
    """A compressed export decompressed into a full temporary folder was called "truncated or
    corrupt"; the line now says where there was no room and what to do."""
    import errno
    import shutil

    def full(*_args, **_kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", full)
    export = DATA / "nsys_diff_base_b" / "export.sqlite.xz"
    assert _cli(small_store, "ingest", str(export)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"tracekit: error: {export}: no room to decompress it in the temporary folder ")
    assert line.endswith("(No space left on device); free space there or set TMPDIR to a folder with room")


def test_paths_whose_names_are_not_utf8_are_one_line(small_store, tmp_path, capsys):
    """A file or store named by bytes that are not UTF-8 reaches Python as surrogates, which
    DuckDB cannot take: an internal error (ingest into a store, --db), or the file blamed as
    corrupt. Refused by name, the store as it was."""
    import os
    import shutil

    from conftest import store_state

    export = tmp_path / os.fsdecode(b"bad\xffname.sqlite")
    shutil.copy(DATA / "nsys_diff_base_b" / "export.sqlite.xz", export)
    said = f"{str(export)!r}: a path whose name is not UTF-8, which tracekit cannot hand to DuckDB; rename it"
    before = store_state(small_store)
    for argv in (["ingest", str(export)], ["ingest", str(export), "--workers", "2"], ["diff", "1", str(export)]):
        assert _cli(small_store, *argv) == 2
        assert one_error_line(capsys).startswith(f"tracekit: error: {said}"), argv
    assert store_state(small_store) == before
    store = tmp_path / os.fsdecode(b"s\xff.duckdb")
    shutil.copy(small_store, store)
    assert cli_main(["--db", str(store), "runs"]) == 2
    assert one_error_line(capsys).startswith(f"tracekit: error: {str(store)!r}: a path whose name is not UTF-8")
