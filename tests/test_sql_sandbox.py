"""`tracekit sql` and named queries: the store, read-only, and nothing else (DuckDB's own controls)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import duckdb
import pytest

import tracekit
from tracekit.cli import main as cli_main

#: statements that must be refused: each would write, read or install outside the store.
#: {d} is a folder beside the store, {other} another DuckDB store, {home} a home folder.
REFUSED = [
    "COPY (SELECT 1 AS x) TO '{d}/x.csv'",
    "COPY (SELECT 1 AS x) TO '{d}/x.parquet' (FORMAT parquet)",
    "COPY (SELECT 1 AS x) TO '{other}' (FORMAT csv)",
    "COPY runs TO '{d}/runs.csv'",
    "EXPORT DATABASE '{d}/exported'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "INSTALL sqlite",
    "ATTACH '{other}' AS other",
    "ATTACH '{d}/new.duckdb' AS fresh",
    "ATTACH '{sqlite}' AS lite (TYPE sqlite)",
    "SET home_directory = '{home}'",
    "SET extension_directory = '{d}/ext'",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "SET temp_directory = '{d}/spill'",
    "RESET enable_external_access",
    "RESET lock_configuration",
    "PRAGMA enable_profiling = 'json'",
    "SET profiling_output = '{d}/profile.json'",
    "PRAGMA threads = 1",
    "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('{d}/plain.csv')",
    "SELECT * FROM '{d}/plain.csv'",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM read_json('{d}/plain.json')",
    "SELECT * FROM read_parquet('{d}/plain.parquet')",
    "SELECT * FROM glob('/root/*')",
    "SELECT * FROM glob('{d}/*')",
    "SELECT * FROM sqlite_scan('{sqlite}', 't')",
    "SELECT 1; COPY (SELECT 1) TO '{d}/multi.csv'",
    "SELECT 1 AS x; INSTALL httpfs; SELECT 2",
    "CREATE TABLE runs2 AS SELECT * FROM runs",
    "INSERT INTO runs SELECT * FROM runs",
    "DELETE FROM runs",
    "DROP VIEW kernels",
]

#: statements that run: they read the store or touch nothing that outlives the connection
ALLOWED = [
    "SELECT count(*) AS n FROM kernels",
    "SELECT 1 AS a; SELECT 2 AS b",
    "PRAGMA database_list",
    "CALL pragma_version()",
    "CHECKPOINT",
    "SELECT name, value FROM duckdb_settings() WHERE name = 'enable_external_access'",
    "DETACH DATABASE IF EXISTS nothing",
]


@pytest.fixture
def sandbox(small_store, tmp_path, monkeypatch):
    """The store, a folder of plain files beside it, another store, an SQLite file, and
    HOME pointed at an empty folder; returns the format keys and a snapshot function."""
    d = small_store.parent
    (d / "plain.csv").write_text("a,b\n1,2\n")
    (d / "plain.json").write_text('{"a": 1}\n')
    duckdb.sql("COPY (SELECT 1 AS a) TO '%s' (FORMAT parquet)" % (d / "plain.parquet"))
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE keep AS SELECT 42 AS answer")
    con.close()
    lite = tmp_path / "lite.sqlite"
    sq = sqlite3.connect(lite)
    sq.execute("CREATE TABLE t (x)")
    sq.commit()
    sq.close()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))

    def snapshot():
        return {p: (p.read_bytes() if p.is_file() else None) for p in sorted(tmp_path.rglob("*"))}

    keys = {"d": d, "other": other, "sqlite": lite, "home": home / "chosen"}
    return keys, snapshot


@pytest.mark.parametrize("stmt", REFUSED)
def test_sql_refuses_what_reaches_outside_the_store(sandbox, small_store, capsys, stmt):
    keys, snapshot = sandbox
    before = snapshot()
    code = cli_main(["--db", str(small_store), "sql", stmt.format(**keys)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (stmt, err)
    assert len(err) == 1 and err[0].startswith("tracekit: error: SQL error:"), err
    assert snapshot() == before  # nothing written, created or removed (store, other store, HOME)
    assert not (Path.home() / ".duckdb").exists()
    assert duckdb.connect(str(keys["other"]), read_only=True).execute("SELECT * FROM keep").fetchall() == [(42,)]


@pytest.mark.parametrize("stmt", ALLOWED)
def test_sql_still_reads_the_store(sandbox, small_store, capsys, stmt):
    keys, snapshot = sandbox
    before = snapshot()
    assert cli_main(["--db", str(small_store), "sql", stmt, "-f", "csv"]) == 0, capsys.readouterr().err
    assert snapshot() == before


@pytest.mark.parametrize("made", ["absent", "folder", "link"])
def test_sql_reaches_no_folder_beside_the_store(small_store, tmp_path, capsys, made):
    """DuckDB lets SQL read and write its temporary directory whatever else is refused, by
    default STORE.tmp beside the store: a folder anyone may make, or point elsewhere. The
    sandbox's is a private one; SQL that names STORE.tmp is refused, and where the folder
    is absent the error is the statement's, not "the store is damaged"."""
    spill = small_store.with_name(small_store.name + ".tmp")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "mine.txt").write_text("precious\n")
    if made == "folder":
        spill.mkdir()
        (spill / "mine.txt").write_text("precious\n")
    elif made == "link":
        spill.symlink_to(victim)
    before = sorted(victim.iterdir())
    for stmt in (f"COPY (SELECT 'x' AS a) TO '{spill}/x.csv'", f"SELECT * FROM read_text('{spill}/mine.txt')",
                 f"SELECT * FROM glob('{spill}/*')", f"ATTACH '{spill}/w.duckdb' AS w"):
        assert cli_main(["--db", str(small_store), "sql", stmt]) == 2, stmt
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("tracekit: error: SQL error:"), (stmt, err)
        assert "damaged" not in err[0]
    assert sorted(victim.iterdir()) == before
    assert not spill.exists() or sorted(p.name for p in spill.iterdir()) == ["mine.txt"]


def test_multiple_statements_answer_with_the_last(small_store, capsys):
    assert cli_main(["--db", str(small_store), "sql", "SELECT 1 AS a; SELECT 2 AS b", "-f", "csv"]) == 0
    assert capsys.readouterr().out == "b\n2\n"


@pytest.mark.parametrize("stmt", ["CHECKPOINT", "BEGIN", "BEGIN; COMMIT", "CREATE TEMP TABLE t (a INTEGER)",
                                  "SELECT 1 AS a; CHECKPOINT"])
def test_a_statement_without_rows_says_so_not_a_table_of_success(small_store, capsys, stmt):
    """DuckDB answers a statement that returns no result set with an empty 'Success' (or
    'Count') column: a line says that instead; a SELECT of no rows stays a table."""
    assert cli_main(["--db", str(small_store), "sql", stmt]) == 0
    assert capsys.readouterr().out == "done: the last statement returns no result set (a SELECT returns rows)\n"
    with tracekit.open(small_store, read_only=True) as tk:
        assert tk.sql(stmt).shape == (0, 0)
    assert cli_main(["--db", str(small_store), "sql", "SELECT 1 AS Success WHERE false"]) == 0
    assert capsys.readouterr().out.splitlines()[0].strip() == "Success"


def test_named_queries_run_on_the_same_locked_connection(small_store):
    tk = tracekit.open(small_store, read_only=True)
    assert tk.query("top-kernels", run="nsys_run").height > 0
    settings = dict(tk.con.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
        "'lock_configuration', 'autoinstall_known_extensions', 'autoload_known_extensions')").fetchall())
    assert settings == {"enable_external_access": "false", "lock_configuration": "true",
                        "autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    with pytest.raises(tracekit.QueryError, match="locked"):
        tk.sql("SET enable_external_access = true")
    # a cursor of that connection shares its settings
    with pytest.raises(duckdb.PermissionException):
        tk.con.cursor().execute("SELECT * FROM read_text('/etc/hostname')")
    tk.close()


def test_two_readers_of_one_store_in_one_process(small_store):
    """DuckDB shares one database instance between connections to the same file in a
    process: the second reader finds it sandboxed and locked, and still answers."""
    first = tracekit.open(small_store, read_only=True)
    assert first.query("top-kernels", run="nsys_run").height > 0
    second = tracekit.open(small_store, read_only=True)
    assert second.query("top-kernels", run="nsys_run").equals(first.query("top-kernels", run="nsys_run"))
    with pytest.raises(duckdb.PermissionException):
        second.con.execute("SELECT * FROM read_text('/etc/hostname')")
    second.close()
    first.close()


def test_allowed_directories_is_the_hook_for_a_store_made_of_files(small_store, tmp_path):
    """A store kind whose tables are files lists its folder: files under it are readable,
    nothing else is, and writing stays impossible."""
    data = tmp_path / "dataset"
    data.mkdir()
    duckdb.sql("COPY (SELECT 7 AS v) TO '%s' (FORMAT parquet)" % (data / "part.parquet"))
    (tmp_path / "secret.csv").write_text("s\n1\n")

    class FolderStore(tracekit.Tracekit):
        allowed_directories = (str(data),)

    tk = FolderStore(small_store, read_only=True)
    assert tk.sql(f"SELECT v FROM read_parquet('{data}/*.parquet')").to_dicts() == [{"v": 7}]
    for stmt in (f"SELECT * FROM read_csv('{tmp_path}/secret.csv')",
                 f"SELECT * FROM read_parquet('{data}/../secret.csv')",
                 f"COPY (SELECT 1) TO '{data}/new.csv'",
                 f"SELECT 1; COPY (SELECT 1) TO '{data}/part.parquet' (FORMAT parquet)",
                 f"EXPORT DATABASE '{data}/exported'",
                 f"ATTACH '{data}/new.duckdb' AS fresh"):
        with pytest.raises(tracekit.QueryError):
            tk.sql(stmt)
    assert sorted(os.listdir(data)) == ["part.parquet"]
    tk.close()


@pytest.mark.parametrize("stmt", ["INSTALL httpfs", "FORCE INSTALL httpfs", "LOAD sqlite", "SELECT 1; INSTALL httpfs",
                                  "UPDATE EXTENSIONS"])
def test_a_writable_store_installs_no_extension(small_store, stmt):
    """`tracekit.open(db)` (read-write, a notebook's default) runs the user's SQL as given,
    but INSTALL/LOAD would download: refused before anything runs (it tried the network,
    then blamed the store as damaged)."""
    import tracekit

    with tracekit.open(small_store) as tk:
        with pytest.raises(tracekit.QueryError, match="INSTALL, LOAD and UPDATE EXTENSIONS statements are refused"):
            tk.sql(stmt)
        assert tk.sql("SELECT count(*) AS n FROM runs")["n"][0] == 2


@pytest.mark.parametrize(("text", "params", "what"), [
    (None, None, "the SQL text None: expected str, not NoneType"),
    (b"SELECT 1", None, "the SQL text b'SELECT 1': expected str, not bytes"),
    (["SELECT 1"], None, r"the SQL text \['SELECT 1'\]: expected str, not list"),
    ("SELECT 1", 5, "params 5: expected list or tuple or dict or None, not int"),
    ("SELECT 1", {1, 2}, r"params \{1, 2\}: expected list or tuple or dict or None, not set"),
])
def test_sql_arguments_of_another_type_are_errors(small_store, text, params, what):
    with tracekit.open(small_store, read_only=True) as tk:
        with pytest.raises(tracekit.QueryError, match=rf"^sql: {what}$"):
            tk.sql(text, params)
