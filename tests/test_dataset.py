"""The Parquet dataset (tracekit.dataset): every named query answers on it as on the
DuckDB store, for runs of every set of tables the fixtures fill; ingest into a dataset (serial and
from Dask workers); the Dask example of docs/dataset.md; bad datasets."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from conftest import NSYS_EXPORTS, NSYS_SCENARIOS, let_go

import tracekit
from tracekit import dataset
from tracekit.cli import main
from tracekit.registry import get_registry

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parents[1]
SWEEP = sorted((DATA / "hstu_sweep" / "runs").iterdir())[:3]
#: with every nsys scenario's run (the nsys_store_file fixture's), every kind of run: ncu reports,
#: run folders (nsys and ncu with timed requests; the nsys one takes the place of its export's run,
#: hstu_capture's), sweep points (timed requests only)
OTHER_SOURCES = [DATA / "ncu_sections" / "report.ncu-rep.xz", DATA / "ncu_full" / "raw.csv.xz",
                 DATA / "hstu_capture_nsys", DATA / "hstu_capture_ncu", *SWEEP, DATA / "bench_pair" / "base.json.xz",
                 DATA / "bench_yours" / "yours.json.xz"]  # (the latest bench run: kernels of the user's, their sources)


@pytest.fixture(scope="module")
def store_and_dataset(tmp_path_factory, nsys_store_file):
    tmp = tmp_path_factory.mktemp("dataset")
    shutil.copyfile(nsys_store_file, tmp / "store.duckdb")
    tk = tracekit.open(tmp / "store.duckdb")
    for src in OTHER_SOURCES:
        tk.ingest(src)
    tk.close()
    assert main(["--db", str(tmp / "store.duckdb"), "export", "parquet", "-o", str(tmp / "ds")]) == 0
    store = tracekit.open(tmp / "store.duckdb", read_only=True)
    ds = tracekit.open(tmp / "ds")
    assert isinstance(ds, dataset.Dataset)
    yield store, ds, tmp
    store.close()
    ds.close()


def _answer(tk, name, **params):
    try:
        return tk.query(name, **params)
    except tracekit.TracekitError as err:
        return f"{type(err).__name__}: {err}".replace(str(tk.path), "DB")


#: the module store's answers, by (query, params), for the tests that compare a dataset with it
_STORE_ANSWERS: dict = {}


def _same_answers(a, b, runs: pl.DataFrame, a_answers: dict | None = None, filled: dict | None = None) -> int:
    """Every named query on every run (and on its default run) of ``a`` equals ``b``'s;
    ``a_answers`` keeps ``a``'s answers for the next call. ``filled`` (run -> the tables it has
    rows in): a query is asked of one run per set of the tables it reads that runs fill."""
    compared = 0
    a_answers = {} if a_answers is None else a_answers
    reads = _tables_read(a) if filled is not None else None
    for name, q in get_registry().queries.items():
        calls = [{}]
        if "run" in q.params:
            ask = _runs_to_ask(q, runs)
            if reads is not None:  # (what a query answers of a dataset can differ only by the tables it reads)
                mine = reads(q.sql) | {"runs", "graph_execs"}  # (and what the registry's own checks read)
                ask = list({frozenset(filled[r] & mine): r for r in reversed(ask)}.values())[::-1]
            calls += [{"run": r} for r in ask] + [{"run": "all"}]
        if "limit" in q.params:
            calls = [{**c, "limit": 0} for c in calls]
        for params in calls:
            key = (name, tuple(sorted(params.items())))
            if key not in a_answers:
                a_answers[key] = _answer(a, name, **params)
            x, y = a_answers[key], _answer(b, name, **params)
            if isinstance(x, str) or isinstance(y, str):
                assert x == y, (name, params)
                continue
            # (when each was ingested is all that tells two ingests of the same files apart)
            x, y = x.drop("ingested_at", strict=False), y.drop("ingested_at", strict=False)
            assert x.schema == y.schema, (name, params)
            assert x.equals(y), (name, params)
            compared += x.height
    return compared


def _runs_to_ask(q, runs: pl.DataFrame) -> list[int]:
    """The runs to ask ``q`` of: every run of its profiler (an nsys or ncu query), and one run of
    another kind, whose answer is the wrong-kind error (the others' is the same error)."""
    if q.source not in ("nsys", "ncu"):
        return runs.get_column("run_id").to_list()
    own = runs.filter(pl.col("kind").str.split(",").list.contains(q.source))
    other = runs.filter(~pl.col("run_id").is_in(own["run_id"].implode())).head(1)
    return own.vstack(other).get_column("run_id").to_list()


def _tables_read(tk):
    """A function of a query's SQL: the store's base tables it reads, through the views and
    macros it names (their definitions read in turn)."""
    con = tk.con
    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() "
                                        "WHERE database_name = current_database()").fetchall()}
    defs = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
    defs.update(con.execute("SELECT function_name, any_value(macro_definition) FROM duckdb_functions() "
                            "WHERE function_type IN ('macro', 'table_macro') AND NOT internal "
                            "AND macro_definition IS NOT NULL GROUP BY 1").fetchall())
    ident = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

    def reads(sql: str, seen: frozenset = frozenset()) -> frozenset:
        out = set()
        for w in set(ident.findall(sql)):
            if w in tables:
                out.add(w)
            elif w in defs and w not in seen:
                out |= reads(defs[w], seen | {w})
        return frozenset(out)
    return reads


def _filled(tk) -> dict[int, frozenset]:
    """Each run -> the base tables it has rows in."""
    tables = [t for (t,) in tk.con.execute(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = 'main' AND column_name = 'run_id' "
        "AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')").fetchall()]
    out: dict[int, set] = {}
    for t in tables:
        for (r,) in tk.con.execute(f'SELECT DISTINCT run_id FROM "{t}"').fetchall():
            out.setdefault(r, set()).add(t)
    return {r: frozenset(ts) for r, ts in out.items()}


def _runs_of_each_table_set(tk, per_set: int = 1) -> pl.DataFrame:
    """Of the runs that fill the same set of tables, the ``per_set`` with the most rows: what a
    query reads of a dataset differs from a store by table (a view over a table's files, or
    a table missing where no run has its rows), so these meet every table a run can have."""
    tables = tk.sql("SELECT table_name FROM information_schema.columns WHERE table_schema = 'main' "
                    "AND column_name = 'run_id' AND table_name IN (SELECT table_name FROM information_schema.tables "
                    "WHERE table_type = 'BASE TABLE') ORDER BY 1")["table_name"].to_list()
    counts = tk.sql(" UNION ALL ".join(
        f"SELECT run_id, '{t}' AS t, count(*) AS n FROM \"{t}\" GROUP BY run_id" for t in tables))
    sets = counts.group_by("run_id").agg(pl.col("t").sort().str.join(",").alias("tables"), pl.col("n").sum())
    keep = sets.sort(["n", "run_id"], descending=[True, False]).group_by("tables", maintain_order=True).head(per_set)
    return tk.runs().filter(pl.col("run_id").is_in(keep["run_id"].implode()))


def test_every_named_query_equals_the_store(store_and_dataset):
    """Every named query (on each run, its default run and every run) answers on the dataset as
    on the store, for the run of each set of tables the fixtures fill with the most rows."""
    store, ds, _ = store_and_dataset
    runs = store.runs()
    assert runs.height == len(NSYS_SCENARIOS) + len(OTHER_SOURCES) - 1  # (hstu_capture's run: its folder's)
    assert ds.runs().equals(runs)
    some = _runs_of_each_table_set(store)
    assert some.height > 20 and set(some["kind"]) == set(runs["kind"])
    assert _same_answers(store, ds, some, _STORE_ANSWERS, filled=_filled(store)) > 5_000


def _kinds(ds) -> dict[str, str]:
    """Each table of a dataset's connection: 'BASE TABLE' (read into memory) or 'VIEW'."""
    return dict(ds.con.execute("SELECT table_name, table_type FROM information_schema.tables "
                               "WHERE table_schema = 'main'").fetchall())


def test_every_named_query_over_views_of_the_files_equals_the_store(store_and_dataset, monkeypatch):
    """With no table read into memory at open, every table is a view over its files
    (the large tables' path, which the small fixtures would not take): same answers."""
    store, _, tmp = store_and_dataset
    monkeypatch.setattr(dataset, "IN_MEMORY_BYTES", 0)
    ds = tracekit.open(tmp / "ds")
    try:
        kinds = _kinds(ds)
        assert kinds["_kernels"] == kinds["_strings"] == kinds["runs"] == "VIEW"
        # one run of each kind (and every run at once): the tables' paths are what differ here,
        # and the test above compares every run
        one_each = store.runs().unique("kind", keep="first", maintain_order=True)
        assert one_each.height >= 4
        assert _same_answers(store, ds, one_each, _STORE_ANSWERS) > 2_000
    finally:
        ds.close()


def test_the_smallest_tables_are_read_into_memory_at_open(store_and_dataset, monkeypatch):
    _, _, tmp = store_and_dataset
    root = tmp / "ds"
    sizes = {p.name: sum(f.stat().st_size for f in p.glob("run_id=*/part-0.parquet"))
             for p in root.iterdir() if p.is_dir()}
    sizes["runs"] = (root / "runs.parquet").stat().st_size
    sizes["_store"] = (root / "_store.parquet").stat().st_size
    budget = sizes["_strings"] + sizes["runs"] + sizes["_store"]
    monkeypatch.setattr(dataset, "IN_MEMORY_BYTES", budget)
    ds = tracekit.open(root)
    try:
        kinds = _kinds(ds)
        in_memory = {t for t in sizes if kinds[t] == "BASE TABLE"}
        assert {t for t in sizes if kinds[t] == "VIEW"} == set(sizes) - in_memory
        want, left = set(), budget  # the smallest first, while they fit
        for t in sorted(sizes, key=lambda t: (sizes[t], t)):
            if sizes[t] <= left:
                want.add(t)
                left -= sizes[t]
        assert in_memory == want and {"runs", "_store"} <= in_memory
        assert kinds["_kernels"] == kinds["_api_calls"] == "VIEW"
        assert ds.query("top-kernels", limit=0).height > 0
    finally:
        ds.close()


def test_dataset_layout_is_hive_partitioned(store_and_dataset):
    store, _, tmp = store_and_dataset
    root = tmp / "ds"
    ids = store.runs().get_column("run_id").to_list()
    assert (root / "runs.parquet").is_file() and (root / "_store.parquet").is_file()
    for table in ("_kernels", "_api_calls", "nvtx_ranges", "ncu_metrics", "requests", "_strings"):
        assert sorted(int(p.name.split("=")[1]) for p in (root / table).iterdir()) == ids
    k = pl.read_parquet(root / "_kernels" / f"run_id={ids[0]}" / "part-0.parquet")
    assert "run_id" not in k.columns and k.height == store.sql(f"SELECT count(*) n FROM kernels WHERE run_id = {ids[0]}")["n"][0]
    # a notebook reads the runs' params and meta as JSON text (Parquet's JSON type: bytes in Polars)
    runs = pl.read_parquet(root / "runs.parquet")
    assert runs["params"].dtype == runs["meta"].dtype == pl.String
    want = {r: json.loads(p or "{}") for r, p in store.sql("SELECT run_id, params FROM runs").iter_rows()}
    assert {r: json.loads(p or "{}") for r, p in runs.select("run_id", "params").iter_rows()} == want


def test_the_dask_example_of_the_docs_equals_top_kernels(store_and_dataset, monkeypatch):
    pytest.importorskip("dask.dataframe")
    store, _, tmp = store_and_dataset
    code = re.search(r"## Reading it with Dask.*?```python\n(.*?)```", (ROOT / "docs" / "dataset.md").read_text(), re.S)
    (tmp / "profiles").unlink(missing_ok=True)
    (tmp / "profiles").symlink_to(tmp / "ds")
    monkeypatch.chdir(tmp)
    scope: dict = {}
    exec(compile(code.group(1), "docs/dataset.md", "exec"), scope)  # noqa: S102 - our own docs
    top = pl.from_pandas(scope["top"])
    # every nsys run with kernels (a capture without CUDA has none to rank)
    nsys_runs = store.sql("SELECT run_id FROM runs WHERE list_contains(string_split(kind, ','), 'nsys') "
                          "AND run_id IN (SELECT run_id FROM kernels)")["run_id"]
    assert top.get_column("run_id").unique().sort().to_list() == nsys_runs.sort().to_list()
    for run in nsys_runs:
        want = store.query("top-kernels", run=run, limit=0)
        got = top.filter(pl.col("run_id") == run)
        assert sorted(got.get_column("value").to_list()) == sorted(want.get_column("name").to_list())
        got = {r["value"]: r for r in got.iter_rows(named=True)}
        for w in want.iter_rows(named=True):
            g = got[w["name"]]
            assert (g["count"], g["sum"], g["min"], g["max"]) == (w["instances"], w["total_ns"], w["min_ns"], w["max_ns"])
            # top-kernels rounds these to 0.1: half of that apart at most (63904.75 is 63904.8)
            half = 0.05 + 1e-9
            assert math.isclose(g["mean"], w["avg_ns"], abs_tol=half)
            assert math.isclose(g["std"], w["stddev_ns"], abs_tol=half)
            assert math.isclose(g["time_pct"], w["time_pct"], abs_tol=half)


INGESTED = [NSYS_EXPORTS["hstu_mixed"], DATA / "ncu_sections" / "report.ncu-rep.xz", DATA / "hstu_capture_nsys",
            NSYS_EXPORTS["multiproc"], NSYS_EXPORTS["hstu_mixed"]]


@pytest.fixture(scope="module")
def ingested_store(tmp_path_factory):
    """INGESTED ingested into a store as `tracekit ingest FILES` names them, and its answers
    (``_same_answers``' cache) for each dataset ingest compared with it."""
    db = tmp_path_factory.mktemp("ingested") / "store.duckdb"
    with tracekit.open(db) as store, store.one_command(INGESTED):
        for f in INGESTED:
            store.ingest(f)
    with tracekit.open(db, read_only=True) as store:
        yield store, {}


@pytest.fixture(scope="module")
def small_pair(ingested_store, tmp_path_factory):
    """ingested_store's store (released: a test's CLI may open it) and its export, for the
    tests that copy, change or break both (the module's store of every scenario would only
    make them slower)."""
    store, _ = ingested_store
    tmp = tmp_path_factory.mktemp("small")
    shutil.copyfile(store.path, tmp / "store.duckdb")
    assert main(["--db", str(tmp / "store.duckdb"), "export", "parquet", "-o", str(tmp / "ds")]) == 0
    with tracekit.open(tmp / "store.duckdb", read_only=True) as small:
        yield small, tmp


@pytest.mark.parametrize("workers", [None, 2], ids=["serial", "workers"])
def test_ingest_into_a_dataset_equals_an_export_of_a_store(tmp_path, ingested_store, workers, capsys):
    files = INGESTED
    store, answers = ingested_store
    root = tmp_path / "ds"
    root.mkdir()  # an empty folder: a new dataset
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not an export\n")
    many = ["--workers", str(workers)] if workers else []
    # a file that fails leaves no gap in the run ids: those of a serial ingest, with workers too
    assert main(["--db", str(root), "ingest", str(files[0]), str(bad), *map(str, files[1:]), *many]) == 2
    ds = tracekit.open(root)
    assert ds.runs().drop("ingested_at").equals(store.runs().drop("ingested_at"))
    assert _same_answers(store, ds, store.runs(), answers) > 1000
    assert not [p for p in root.iterdir() if p.name.startswith(".")]
    # a second ingest adds runs after the last one; a known file is skipped (no gap either), and so
    # is the export of a run folder the dataset holds (it is part of that run)
    assert main(["--db", str(root), "ingest", str(files[0]), str(NSYS_EXPORTS["graphs_graph"]),
                 str(NSYS_EXPORTS["hstu_capture"]), *many]) == 0
    ds = tracekit.open(root)
    runs = ds.runs()
    assert runs.get_column("run_id").to_list() == [1, 2, 3, 4, 5]
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"{NSYS_EXPORTS['hstu_capture']}: already ingested as run 3 (") for line in out)
    # the new run's names are its own: its slot's name ids clash with no other run's
    ids = ds.sql("SELECT count(*) AS n, count(DISTINCT string_id) AS ids FROM _strings")
    assert ids["n"][0] == ids["ids"][0]
    with tracekit.open(tmp_path / "s.duckdb") as again:
        again.ingest(NSYS_EXPORTS["graphs_graph"])
        assert ds.query("top-kernels", run=5, limit=0).equals(again.query("top-kernels", limit=0))


def test_export_one_run(small_pair, tmp_path, capsys):
    store, tmp = small_pair
    let_go(store)  # (the CLI below opens the same store)
    runs = store.runs()
    run = runs.filter(pl.col("kind") == "nsys")["run_id"][-1]
    name = runs.filter(pl.col("run_id") == run)["name"][0]
    one = tmp_path / "one"
    assert main(["--db", str(tmp / "store.duckdb"), "export", "parquet", "--run", str(run), "-o", str(one)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {one}: 1 run"
    ds = tracekit.open(one)
    assert ds.runs()["run_id"].to_list() == [run]  # its id kept
    for q in ("top-kernels", "nvtx-summary", "gpu-utilization", "memcpy-time"):
        assert ds.query(q, limit=0).equals(store.query(q, run=run, limit=0)), q
    assert main(["--db", str(tmp / "store.duckdb"), "export", "parquet", "--run", "no-such-run",
                 "-o", str(tmp_path / "none")]) == 2
    _one_error_line(capsys, "no run 'no-such-run'")
    assert not (tmp_path / "none").exists()
    typo = tmp_path / "no-such-folder" / "ds"  # a mistyped folder is refused, not created
    assert main(["--db", str(tmp / "store.duckdb"), "export", "parquet", "-o", str(typo)]) == 2
    _one_error_line(capsys, f"{typo}: folder {typo.parent} does not exist")
    assert not typo.parent.exists()
    assert name  # (a run is named by its name too)
    assert main(["--db", str(tmp / "store.duckdb"), "export", "parquet", "--run", "all", "-o", str(tmp_path / "all")]) == 0
    assert tracekit.open(tmp_path / "all").runs().height == runs.height


def test_rename_and_remove_runs_of_a_dataset_as_of_a_store(small_pair, tmp_path, capsys):
    store, tmp = small_pair
    let_go(store)
    shutil.copyfile(tmp / "store.duckdb", tmp_path / "s.duckdb")
    shutil.copytree(tmp / "ds", tmp_path / "ds")
    ids = store.runs()["run_id"].to_list()
    for db in (tmp_path / "s.duckdb", tmp_path / "ds"):
        assert main(["--db", str(db), "runs", "rename", str(ids[1]), "renamed"]) == 0
        assert main(["--db", str(db), "runs", "rm", str(ids[2]), "renamed"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == out[3:] and out[2] == f"removed run {ids[1]} (renamed)"
    a, b = tracekit.open(tmp_path / "s.duckdb", read_only=True), tracekit.open(tmp_path / "ds")
    runs = a.runs()
    assert runs["run_id"].to_list() == [i for i in ids if i not in ids[1:3]]
    assert b.runs().drop("ingested_at").equals(runs.drop("ingested_at"))
    assert not list((tmp_path / "ds").glob(f"*/run_id={ids[1]}")) and not list((tmp_path / "ds").glob(".*"))
    assert _same_answers(a, b, runs.head(3)) > 100
    for bad, msg in (("7", "--run reads it as a run id"), ("all", "as a keyword"), ("a\tb", "control characters")):
        assert main(["--db", str(tmp_path / "ds"), "runs", "rename", str(ids[0]), bad]) == 2
        _one_error_line(capsys, "cannot name a run", msg)
    # a run may be named by its own input's path (read as a file, it is that run), not by another's
    own, other = (a.con.execute("SELECT source_path FROM runs WHERE run_id = ?", [i]).fetchone()[0] for i in (ids[0], ids[3]))
    let_go(a)
    for db in (tmp_path / "s.duckdb", tmp_path / "ds"):
        assert main(["--db", str(db), "runs", "rename", str(ids[0]), other]) == 2
        _one_error_line(capsys, f"'{other}' cannot name a run: it is a file here")
        assert main(["--db", str(db), "runs", "rename", str(ids[0]), own]) == 0
        assert capsys.readouterr().out.strip() == f"run {ids[0]}: renamed {runs['name'][0]!r} to {own!r}"


def test_a_removed_runs_id_is_never_given_again(small_pair, tmp_path, capsys):
    """As a store's sequence: a diff or a note naming the removed run's id must not come
    to mean the next run ingested."""
    store, tmp = small_pair
    let_go(store)
    shutil.copyfile(tmp / "store.duckdb", tmp_path / "s.duckdb")
    shutil.copytree(tmp / "ds", tmp_path / "ds")
    runs = store.runs()
    top, source = runs["run_id"][-1], runs["source_path"][-1]
    for db in (tmp_path / "s.duckdb", tmp_path / "ds"):
        assert main(["--db", str(db), "runs", "rm", str(top)]) == 0
        assert main(["--db", str(db), "ingest", source]) == 0  # the same content, gone with the run: a new run
        assert f": run {top + 1} (" in capsys.readouterr().out
    with tracekit.open(tmp_path / "ds") as ds:
        assert ds.runs()["run_id"].to_list() == [*runs["run_id"][:-1], top + 1]
        assert ds.sql("SELECT value FROM _store WHERE key = 'last_run_id'").item() == str(top)
    assert main(["--db", str(tmp_path / "ds"), "query", "top-kernels", "--run", str(top)]) == 2
    assert f"no run '{top}'" in capsys.readouterr().err


def _one_error_line(capsys, *parts) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracekit: error: "), err
    for p in parts:
        assert p in err, err
    return err


def test_a_db_written_as_a_folder_must_be_one(tmp_path, capsys, monkeypatch):
    """--db DIR/ asks for a folder (a dataset): where none exists, or a file has that name,
    one line and nothing made (Path would drop the slash and make a store file); an empty
    folder that exists becomes a dataset at the first ingest."""
    export = str(NSYS_EXPORTS["cpu_only"])
    missing = tmp_path / "new"
    assert main(["--db", f"{missing}/", "ingest", export]) == 2
    _one_error_line(capsys, "no such folder; a Parquet dataset is a folder that exists")
    assert not missing.exists()
    (tmp_path / "file").write_text("x")
    assert main(["--db", f"{tmp_path / 'file'}/", "runs"]) == 2
    _one_error_line(capsys, "not a folder")
    with pytest.raises(tracekit.TracekitError, match="no such folder"):
        tracekit.open(f"{missing}/")
    monkeypatch.setenv("TRACEKIT_DB", f"{missing}/")  # (the default store, named the same way)
    assert main(["ingest", export]) == 2
    _one_error_line(capsys, "no such folder")
    assert not missing.exists()
    missing.mkdir()
    assert main(["ingest", export]) == 0
    assert (missing / "runs.parquet").exists()


def test_bad_datasets(small_pair, tmp_path, capsys):
    store, tmp = small_pair
    let_go(store)  # (the CLI below opens the same store)
    (tmp_path / "empty").mkdir()
    assert main(["--db", str(tmp_path / "empty"), "query", "top-kernels"]) == 2
    _one_error_line(capsys, "not a tracekit dataset")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    assert main(["--db", str(tmp_path / "other"), "runs"]) == 2
    _one_error_line(capsys, "not a tracekit dataset")
    broken = tmp_path / "broken"
    shutil.copytree(tmp / "ds", broken)
    shutil.rmtree(broken / "memcpy")
    assert main(["--db", str(broken), "query", "memcpy-time"]) == 2
    _one_error_line(capsys, "dataset lacks table memcpy")
    (broken / "runs.parquet").write_text("not parquet")
    assert main(["--db", str(broken), "runs"]) == 2
    _one_error_line(capsys, "runs.parquet: not readable")
    # export into a folder that holds something else, or over the store itself
    assert main(["--db", str(tmp / "store.duckdb"), "export", "parquet", "-o", str(tmp_path / "other")]) == 2
    _one_error_line(capsys, "not empty")
    assert main(["--db", str(tmp / "store.duckdb"), "export", "parquet", "-o", str(tmp / "store.duckdb")]) == 2
    _one_error_line(capsys, "store itself")


def test_dataset_sql_reads_only_its_folder(store_and_dataset, tmp_path):
    _, ds, tmp = store_and_dataset
    before = sorted(p.relative_to(tmp / "ds") for p in (tmp / "ds").rglob("*"))
    assert ds.sql("SELECT count(*) AS n FROM kernels")["n"][0] > 0
    for bad in (f"COPY (SELECT 1) TO '{tmp / 'ds' / 'x.csv'}'", "SELECT * FROM read_csv('/etc/passwd')",
                f"ATTACH '{tmp / 'ds' / 'x.duckdb'}'", "SET threads = 1",
                f"SELECT 1; COPY (SELECT 1) TO '{tmp / 'ds' / 'runs.parquet'}' (FORMAT parquet)"):
        with pytest.raises(tracekit.QueryError):
            ds.sql(bad)
    # its tables and views are an in-memory catalog DuckDB would let change: a statement that
    # writes is refused, as a read-only store refuses it, not answered as if it had been done
    runs = ds.runs()
    for bad in ("DELETE FROM runs", "UPDATE runs SET name = 'x'", "INSERT INTO runs SELECT * FROM runs",
                "CREATE TABLE t AS SELECT 1 AS a", "DROP VIEW kernels", "ALTER TABLE runs RENAME TO r",
                "SELECT 1; TRUNCATE runs", "PREPARE p AS DELETE FROM runs",
                # (EXPLAIN ANALYZE runs the statement it explains)
                f"EXPLAIN ANALYZE COPY (SELECT * FROM runs WHERE false) TO '{tmp / 'ds' / 'runs.parquet'}' "
                "(FORMAT parquet)", "/* a */ explain (format json, analyze) CREATE TABLE t AS SELECT 1 AS a",
                "EXPLAIN ANALYZE DROP VIEW kernels",
                # (DuckDB's PRAGMA, which runs the folder's schema.sql and load.sql)
                f"/* i */ IMPORT DATABASE '{tmp / 'ds'}'"):
        with pytest.raises(tracekit.QueryError, match=r"^SQL error: [A-Z ]+ statements are refused: tracekit sql "
                                                      "reads the store and writes nothing"):
            ds.sql(bad)
    assert ds.runs().equals(runs) and ds.sql("SELECT count(*) AS n FROM kernels")["n"][0] > 0
    assert ds.sql("EXPLAIN SELECT 1").height and ds.sql("EXPLAIN ANALYZE SELECT count(*) FROM runs").height
    assert ds.sql("DESCRIBE runs").height and ds.sql("PRAGMA version").height
    assert sorted(p.relative_to(tmp / "ds") for p in (tmp / "ds").rglob("*")) == before


def test_report_over_a_dataset_is_the_stores(store_and_dataset, tmp_path):
    """`tracekit --db DIR report` writes the report the store gives, for each kind of run."""
    store, _, tmp = store_and_dataset
    runs = store.runs()
    picks = {}
    for r in runs.iter_rows(named=True):  # the first run of each kind
        picks.setdefault(r["kind"], r["run_id"])
    assert {"nsys", "ncu", "nsys,timing", "timing"} <= set(picks)
    for kind, run in picks.items():
        a, b = tmp_path / f"store-{run}.html", tmp_path / f"dataset-{run}.html"
        assert main(["--db", str(tmp / "store.duckdb"), "report", "--run", str(run), "-o", str(a)]) == 0
        assert main(["--db", str(tmp / "ds"), "report", "--run", str(run), "-o", str(b)]) == 0
        assert a.read_bytes() == b.read_bytes(), kind
    assert not list((tmp / "ds").glob("*.html"))


@pytest.mark.parametrize(("dest", "message"), [
    (None, r"export: folder None: expected str or PathLike, not NoneType"),
    (5, r"export: folder 5: expected str or PathLike, not int"),
    ("/proc/tracekit-dataset", r"/proc/tracekit-dataset: cannot create the dataset folder \(.*\)"),
])
def test_export_into_a_bad_folder_is_an_error(small_store, dest, message):
    from tracekit.errors import InputError

    with tracekit.open(small_store, read_only=True) as tk:
        with pytest.raises(InputError, match=f"^{message}$"):
            dataset.export(tk, dest)


def test_export_over_the_stores_wal_is_an_error_and_the_store_opens(small_store, capsys):
    """`export parquet -o STORE.wal` made a folder where DuckDB replays the store's WAL: every
    command on the store failed after it. Refused, as every other output over it is."""
    wal = small_store.with_name(small_store.name + ".wal")
    assert main(["--db", str(small_store), "export", "parquet", "-o", str(wal)]) == 2
    assert capsys.readouterr().err == f"tracekit: error: {wal}: this is the store WAL ({wal.resolve()}); write the " \
                                      "output to another file\n"
    assert not wal.exists()
    assert main(["--db", str(small_store), "runs"]) == 0


def test_the_stores_integers_are_integers_in_the_files(small_store, tmp_path):
    """A notebook reading the files meets the store's integers as integers: every integer column
    of every table is an integer column of its Parquet files, with the store's values (api_sum's
    total_ns, a HUGEINT in the store, which Parquet has no type for)."""
    import pyarrow.dataset as pads

    with tracekit.open(small_store, read_only=True) as tk:
        dataset.export(tk, tmp_path / "ds")
        ints = tk.con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND data_type IN ('TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', "
            "'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT') AND table_name IN (SELECT table_name FROM duckdb_tables() "
            "WHERE database_name = current_database())").fetchall()
        totals = tk.con.execute("SELECT run_id, raw_name_id, total_ns FROM api_sum ORDER BY 1, 2").fetchall()
    assert ("api_sum", "total_ns", "HUGEINT") in ints and totals
    for table, column, typ in ints:
        folder = tmp_path / "ds" / table
        if folder.is_dir():
            field = pads.dataset(folder, format="parquet", partitioning="hive").schema.field(column)
            assert pa.types.is_integer(field.type), (table, column, typ, field.type)
    got = pl.read_parquet(tmp_path / "ds" / "api_sum" / "**" / "*.parquet", hive_partitioning=True)
    assert got["total_ns"].dtype == pl.Int64
    assert sorted(zip(got["run_id"], got["raw_name_id"] - got["run_id"].cast(pl.Int64) * 2**32, got["total_ns"],
                      strict=True)) == totals  # (name ids are (run_id << 32) + id in the files)


def _dataset_state(ds: Path) -> tuple[list[int], dict[str, list[int]]]:
    """runs.parquet's run ids, and the run ids each table has partitions of."""
    import duckdb

    runs = sorted(r[0] for r in duckdb.connect().execute(
        f"SELECT run_id FROM read_parquet('{ds / dataset.RUNS_FILE}')").fetchall())
    parts = {t.name: sorted(int(p.name.split("=")[1]) for p in t.glob("run_id=*"))
             for t in ds.iterdir() if t.is_dir() and not t.name.startswith(".")}
    return runs, parts


def test_a_ctrl_c_while_a_run_lands_waits_for_it_and_says_it_is_in(tmp_path, capsys, monkeypatch):
    """A SIGINT while the run's partitions move into the dataset (here: at the first move,
    and at the rename of runs.parquet) waits for the run to be in whole, and the command
    says so (it said "nothing of it is in the store" of a run that was in, or left its
    partitions without its row: a dataset no later ingest could write)."""
    import os
    import signal

    ds = tmp_path / "ds"
    ds.mkdir()  # (an empty folder: a new dataset)
    one, two, three = (str(NSYS_EXPORTS[k]) for k in ("many_kernels", "nccl", "autograd"))
    assert main(["--db", str(ds), "ingest", one]) == 0
    real = os.replace
    for at, source in ((0, two), (-1, three)):  # the first move; runs.parquet, the last
        calls = []

        def interrupting(src, dst, at=at, calls=calls):
            calls.append(dst)
            if (at == 0 and len(calls) == 1) or (at == -1 and Path(dst).name == dataset.RUNS_FILE):
                os.kill(os.getpid(), signal.SIGINT)
            return real(src, dst)

        monkeypatch.setattr(dataset.os, "replace", interrupting)
        capsys.readouterr()
        assert main(["--db", str(ds), "ingest", source]) == 130
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "interrupted after the commit: it is in the store as run" in err[0], err
        monkeypatch.setattr(dataset.os, "replace", real)
        runs, parts = _dataset_state(ds)
        assert all(p == runs for p in parts.values()), parts  # every table has a partition of every run, no other
    assert _dataset_state(ds)[0] == [1, 2, 3]
    assert main(["--db", str(ds), "query", "top-kernels", "--run", "3"]) == 0


def test_what_a_killed_ingest_left_is_swept_by_the_next(tmp_path, capsys):
    """A process killed while its run landed (SIGKILL: nothing can wait) leaves partitions of
    a run id runs.parquet does not list, a half-written runs.parquet and its staging folder;
    the next writer (holding the dataset's lock) removes them and writes its run there (the
    dataset refused every later ingest: "already holds _api_calls/run_id=2")."""
    ds = tmp_path / "ds"
    ds.mkdir()
    assert main(["--db", str(ds), "ingest", str(NSYS_EXPORTS["many_kernels"])]) == 0
    for table in ("_kernels", "_api_calls"):
        shutil.copytree(ds / table / "run_id=1", ds / table / "run_id=2")
    (ds / f".{dataset.RUNS_FILE}.4242.tmp").write_bytes(b"PAR1 half")
    (ds / ".tracekit-stage-dead").mkdir()
    with tracekit.open(ds) as tk:  # a reader meanwhile reads the runs runs.parquet lists, only
        assert set(tk.sql("SELECT DISTINCT run_id FROM _kernels")["run_id"]) == {1}
    assert main(["--db", str(ds), "ingest", str(NSYS_EXPORTS["nccl"])]) == 0
    runs, parts = _dataset_state(ds)
    assert runs == [1, 2] and all(p == [1, 2] for p in parts.values())
    assert not list(ds.glob(".runs.parquet.*")) and not list(ds.glob(".tracekit-stage-*"))
    with tracekit.open(ds) as tk:
        assert tk.query("top-kernels", run=2, limit=0)["instances"].sum() == \
            tk.sql("SELECT count(*) AS n FROM kernels WHERE run_id = 2")["n"][0] > 0


def test_a_second_writer_of_a_dataset_is_refused_at_once(tmp_path, capsys):
    """The dataset's writer lock (flock, let go when its process ends however it ends): an
    ingest, a rename or a removal while another process holds it is one line, exit 2, and
    the dataset as it was."""
    import subprocess
    import sys

    ds = tmp_path / "ds"
    ds.mkdir()
    assert main(["--db", str(ds), "ingest", str(NSYS_EXPORTS["many_kernels"])]) == 0
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from tracekit import dataset\n"
        f"with dataset.writer_lock(Path({str(ds)!r})):\n    print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _dataset_state(ds)
        capsys.readouterr()
        for args in (["ingest", str(NSYS_EXPORTS["nccl"])], ["runs", "rename", "1", "x"], ["runs", "rm", "1"]):
            assert main(["--db", str(ds), *args]) == 2, args
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "another tracekit process is writing this dataset" in err[0], err
        assert _dataset_state(ds) == before
    finally:
        holder.kill()
        holder.wait()
    assert main(["--db", str(ds), "runs", "rename", "1", "x"]) == 0  # (its process gone, so is its lock)


def test_a_writer_that_fails_lets_go_of_the_lock(tmp_path, monkeypatch):
    """An ingest that fails after taking the dataset's writer lock (here: in its sweep, and in
    its staging folder) lets go of it: a long-lived process (a notebook) does not keep every
    other writer out."""
    import tempfile as tf

    ds = tmp_path / "ds"
    ds.mkdir()
    with tracekit.open(ds) as tk:
        tk.ingest(NSYS_EXPORTS["many_kernels"])
    for target, attr in ((dataset, "_sweep"), (tf, "mkdtemp")):
        with monkeypatch.context() as m:
            m.setattr(target, attr, lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left on device")))
            with tracekit.open(ds) as tk, pytest.raises(tracekit.errors.OutputError, match="no space left on device"):
                tk.ingest(NSYS_EXPORTS["nccl"])  # (the full disk's one line)
        assert dataset._HELD == {} and not (ds / dataset.LOCK_FILE).exists(), attr
    with tracekit.open(ds) as tk:
        assert tk.ingest(NSYS_EXPORTS["nccl"]).run_id == 2


def test_a_run_whose_file_of_a_table_is_gone_is_an_error_not_an_empty_answer(tmp_path, capsys):
    """Every run has a file of every table (an empty one where it has no rows): a dataset copied
    in part, one run's kernels file lost, is refused in one line naming the run and the file,
    not read as a run that launched no kernel (top-kernels: "no rows")."""
    store = tmp_path / "s.duckdb"
    with tracekit.open(store) as tk:
        tk.ingest(NSYS_EXPORTS["odd_nvtx"], name="odd")
        tk.ingest(NSYS_EXPORTS["multithread"], name="multi")
    ds = tmp_path / "ds"
    assert main(["--db", str(store), "export", "parquet", "-o", str(ds)]) == 0
    capsys.readouterr()
    (ds / "_kernels" / "run_id=1" / "part-0.parquet").unlink()
    for args in (["query", "top-kernels", "--run", "odd"], ["query", "top-kernels", "--run", "multi"], ["runs"]):
        assert main(["--db", str(ds), *args]) == 2
        _one_error_line(capsys, f"{ds}: dataset lacks run 1's file of table _kernels "
                                f"({ds.resolve()}/_kernels/run_id=1/part-0.parquet)")
    shutil.rmtree(ds / "_kernels" / "run_id=1")
    assert main(["--db", str(ds), "query", "top-kernels", "--run", "odd"]) == 2
    _one_error_line(capsys, "dataset lacks run 1's file of table _kernels")


def test_a_dataset_in_a_folder_whose_name_reads_as_a_pattern(tmp_path, capsys, monkeypatch):
    """A dataset folder named with '[' or '?' (DuckDB reads those in a path as a pattern): export
    into it, ingest into it (a file it holds already is that run) and read it as any other; an
    export that fails leaves no folder, or the empty folder it was given."""
    store = tmp_path / "s.duckdb"
    with tracekit.open(store) as tk:
        tk.ingest(NSYS_EXPORTS["odd_nvtx"], name="odd")
    for name in ("ds[1]", "ds?x"):
        ds = tmp_path / name
        assert main(["--db", str(store), "export", "parquet", "-o", str(ds)]) == 0
        assert main(["--db", str(ds), "ingest", str(NSYS_EXPORTS["odd_nvtx"])]) == 0
        assert "already ingested as run 1 (odd)" in capsys.readouterr().out
        assert main(["--db", str(ds), "ingest", str(NSYS_EXPORTS["multithread"])]) == 0
        assert main(["--db", str(ds), "query", "top-kernels", "--run", "2", "-f", "csv"]) == 0
        assert capsys.readouterr().out.count("\n") > 2

    def fail(*args, **kwargs):
        raise tracekit.InputError("stopped")

    monkeypatch.setattr(dataset, "write_run", fail)
    assert main(["--db", str(store), "export", "parquet", "-o", str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert main(["--db", str(store), "export", "parquet", "-o", str(tmp_path / "empty")]) == 2
    assert list((tmp_path / "empty").iterdir()) == []
