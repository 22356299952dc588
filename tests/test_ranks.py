"""Multi-rank runs (tracekit.ranks) and the queries over a job's ranks (queries/ranks),
on the real 4-rank capture tests/data/nsys_ranks: rank 2 planted as a straggler in
step/forward (PLANT.md). Expectations come from the plant's per-step durations (read
from the exports by the fixture's own script) and from NVIDIA's `nsys stats` CSVs."""

from __future__ import annotations

import csv
import functools
import gzip
import html
import io
import json
import lzma
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from browser import chart_marks, chromium, load
from conftest import captured_again, let_go, spec_datasets, store_state

import tracekit
from tracekit import charts
from tracekit.cli import main
from tracekit.errors import CaptureWarning, QueryError

DATA = Path(__file__).parent / "data"


def _job(folder: Path) -> SimpleNamespace:
    """A real multi-rank fixture and what its plant.json (programs/plant.py) says of it."""
    plant = json.loads((folder / "plant.json").read_text())
    return SimpleNamespace(
        name=folder.name, plant=plant, world=plant["world_size"], straggler=plant["straggler"]["rank"],
        exports={v["rank"]: folder / v["export"] for v in plant["ranks"].values()},
        per_step=plant["observed_per_step"]["duration_ns"],  # rankN -> range -> [ns per step]
    )


# 4 ranks on one GPU, and 4 ranks round-robin over 2 GPUs (nvidia-h200-x2); the job over NCCL: test_nccl.py
JOBS = {j.name: j for j in (_job(DATA / "nsys_ranks"), _job(DATA / "nsys_ranks_2gpu"))}
ONE_GPU = JOBS["nsys_ranks"]
PLANT, WORLD, EXPORTS = ONE_GPU.plant, ONE_GPU.world, ONE_GPU.exports
OTHER = DATA / "nsys_hstu_mixed" / "export.sqlite.xz"  # a single-process run, no rank


@pytest.fixture(scope="module", params=list(JOBS))
def job(request, tmp_path_factory):
    j = JOBS[request.param]
    db = tmp_path_factory.mktemp("ranks") / "ranks.duckdb"
    tk = tracekit.open(db)
    tk.ingest(OTHER)  # run 1: not part of the job
    for r in sorted(j.exports):
        tk.ingest(j.exports[r])
    tk.close()
    tk = tracekit.open(db, read_only=True)
    yield tk, db, j
    tk.close()


def _stats(j: SimpleNamespace, rank: int, report: str) -> list[dict]:
    f = j.exports[rank].parent / "stats" / f"{report}.csv"
    text = lzma.open(f.with_suffix(".csv.xz"), "rt").read() if not f.exists() else f.read_text()
    return list(csv.DictReader(io.StringIO(text)))


@functools.cache
def _hostname(export: Path) -> str:
    """The host name the export records, read with SQLite."""
    with tempfile.TemporaryDirectory() as tmp:
        with lzma.open(export) as src, open(plain := Path(tmp) / "export.sqlite", "wb") as dst:
            shutil.copyfileobj(src, dst)
        con = sqlite3.connect(plain)
        try:
            return con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'").fetchone()[0]
        finally:
            con.close()


# -- which rank a run is --------------------------------------------------------------


def test_each_export_is_its_rank_of_one_job(job):
    tk, _, j = job
    runs = {r["run_id"]: json.loads(r["params"]) for r in tk.sql("SELECT run_id, params FROM runs").iter_rows(named=True)}
    assert runs[1] == {}  # the single-process capture has no rank (its name and export say none)
    got = {p["rank"]: p for rid, p in runs.items() if rid != 1}
    assert sorted(got) == sorted(j.exports)
    assert {p["world_size"] for p in got.values()} == {j.world}  # WORLD_SIZE of the launched process
    assert len({p["job"] for p in got.values()}) == 1
    host = _hostname(j.exports[0])
    assert host and {p["host"] for p in got.values()} == {host}
    ranks = tk.sql("SELECT rank, run_id FROM rank_runs ORDER BY rank")
    assert ranks["rank"].to_list() == sorted(j.exports) and ranks["run_id"].to_list() == [2, 3, 4, 5]


def test_rank_from_the_environment_the_file_name_or_a_param(tmp_path, capsys):
    # the launcher's RANK recorded in the export, under a name that says nothing
    (tmp_path / "a").mkdir()
    shutil.copy(EXPORTS[1], tmp_path / "a" / "export.sqlite.xz")
    # a name carrying the rank, on an export that records none
    shutil.copy(OTHER, tmp_path / "prof_r3_.sqlite.xz")
    (tmp_path / "rank_5").mkdir()
    shutil.copy(OTHER, tmp_path / "rank_5" / "trace.sqlite.xz")
    tk = tracekit.open(tmp_path / "s.duckdb")
    assert tk.ingest(tmp_path / "a" / "export.sqlite.xz").run_id == 1
    assert tk.ingest(tmp_path / "prof_r3_.sqlite.xz").run_id == 2
    tk.close()
    db = str(tmp_path / "s2.duckdb")
    assert main(["--db", db, "ingest", str(tmp_path / "rank_5" / "trace.sqlite.xz")]) == 0
    capsys.readouterr()
    assert main(["--db", str(tmp_path / "s3.duckdb"), "ingest", str(EXPORTS[2]),
                 "--param", "rank=7", "--param", "job=train-42"]) == 0
    said = capsys.readouterr().err.splitlines()
    params = [json.loads(tracekit.open(p, read_only=True).sql("SELECT params FROM runs ORDER BY run_id")["params"][i])
              for p, i in ((tmp_path / "s.duckdb", 0), (tmp_path / "s.duckdb", 1), (db, 0), (tmp_path / "s3.duckdb", 0))]
    assert params[0]["rank"] == 1 and params[0]["world_size"] == WORLD
    assert params[0]["job"] == str((tmp_path / "a").resolve())  # no launcher job id: the export's folder
    assert params[1]["rank"] == 3 and params[1]["job"] == str((tmp_path / "prof_r*_").resolve())
    assert params[2]["rank"] == 5 and params[2]["job"] == str((tmp_path / "rank_*" / "trace").resolve())
    assert params[3]["rank"] == 7 and params[3]["job"] == "train-42"  # given values win over the export's ...
    # ... said (a launcher may number each node's processes from 0); one where it agrees, not
    assert said == [f"tracekit: warning: {EXPORTS[2]}: rank 7 as given, not 2 as the export recorded (RANK=2); its "
                    f"WORLD_SIZE={WORLD}, of that numbering, is not taken (--param world_size=N gives the job's)"]
    assert "world_size" not in params[3]  # (rank 7 of a job of 4: the job's size as given, or none)
    assert main(["--db", str(tmp_path / "s5.duckdb"), "ingest", str(EXPORTS[2]), "--param", "rank=2"]) == 0
    assert "warning" not in capsys.readouterr().err
    # one rank given to several files: each would be that rank, one replacing another's data
    for files, held in (([EXPORTS[0], EXPORTS[1]], "2 given"), ([DATA / "hstu_sweep" / "runs"], "runs holds 16 run folders")):
        assert main(["--db", str(tmp_path / "s4.duckdb"), "ingest", *map(str, files), "-p", "rank=3"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--param rank=3 names one rank: give it one file or run folder (" in err
        assert held in err, err
    from tracekit import distributed, parallel
    from tracekit.errors import ParamError

    with tracekit.open(tmp_path / "s6.duckdb") as tk:  # (the library's many-file ingests, the same)
        for many in (lambda: parallel.ingest_many(tk, [EXPORTS[0], EXPORTS[1]], workers=1, params={"rank": 3}),
                     lambda: distributed.ingest_many(tk, [EXPORTS[0], EXPORTS[1]], workers=1, params={"rank": 3})):
            with pytest.raises(ParamError, match=r"^--param rank=3 names one rank: give it one file or run folder "
                                                 r"\(2 given\)"):
                many()
        assert tk.runs().height == 0
    assert main(["--db", str(tmp_path / "s4.duckdb"), "ingest", str(OTHER), "--param", "rank=two"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--param rank='two': a rank is a whole number" in err
    assert not (tmp_path / "s4.duckdb").exists()
    for bad, msg in (("rank=-1", "a rank is a whole number from 0 to 2147483647"), ("=3", "the name is empty")):
        assert main(["--db", str(tmp_path / "s4.duckdb"), "ingest", str(OTHER), "--param", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and msg in err, err
    # a rank past the job's size (ranks 0 to world_size - 1)
    assert main(["--db", str(tmp_path / "s4.duckdb"), "ingest", str(OTHER), "-p", "rank=2", "-p", "world_size=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--param rank='2' with world_size='2': a job of 2 ranks has ranks 0 to 1" in err
    assert not (tmp_path / "s4.duckdb").exists()


def test_a_job_named_by_its_path_whatever_form_each_export_has(tmp_path):
    """The export's suffix is no part of a job named by its path: ranks kept as .sqlite.xz,
    .sqlite and .sqlite.gz (or .nsys-rep) are ranks of one job, `.../rank*/export`."""
    for r, suffix in ((0, ".sqlite.xz"), (1, ".sqlite"), (2, ".sqlite.gz")):
        dest = tmp_path / "prof" / f"rank{r}" / f"export{suffix}"
        dest.parent.mkdir(parents=True)
        plain = lzma.decompress(EXPORTS[r].read_bytes())
        dest.write_bytes({".sqlite.xz": EXPORTS[r].read_bytes(), ".sqlite": plain,
                          ".sqlite.gz": gzip.compress(plain, compresslevel=1)}[suffix])
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for r in range(3):
            tk.ingest(next((tmp_path / "prof" / f"rank{r}").iterdir()))
        jobs = tk.query("jobs").to_dicts()
    assert [(j["job"], j["ranks"]) for j in jobs] == [(str((tmp_path / "prof" / "rank*" / "export").resolve()), 3)]


def test_a_rank_in_the_folder_and_the_file_names_one_job(tmp_path):
    """`prof/rank3/trace_rank3.sqlite.xz`: the rank masked in both names, the ranks one job
    (`prof/rank*/trace_rank*`), not a job of one rank per folder; exports reached through
    links are the ranks their links' names say (the names given, not the targets')."""
    for r in range(3):
        (tmp_path / "prof" / f"rank{r}").mkdir(parents=True)
        shutil.copy(EXPORTS[r], tmp_path / "prof" / f"rank{r}" / f"trace_rank{r}.sqlite.xz")
    (tmp_path / "links").mkdir()
    for r, target in enumerate((DATA / "nsys_diff_base_a", DATA / "nsys_diff_base_b")):
        (tmp_path / "links" / f"rank{r}.sqlite.xz").symlink_to(target / "export.sqlite.xz")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for r in range(3):
            tk.ingest(tmp_path / "prof" / f"rank{r}" / f"trace_rank{r}.sqlite.xz")
        for r in range(2):
            tk.ingest(tmp_path / "links" / f"rank{r}.sqlite.xz")
        jobs = {j["job"]: j["ranks"] for j in tk.query("jobs").to_dicts()}
    assert jobs == {str(tmp_path / "prof" / "rank*" / "trace_rank*"): 3, str(tmp_path / "links" / "rank*"): 2}


def test_a_rank_beyond_the_job_size_its_export_recorded_is_an_error(tmp_path, capsys):
    """A rank from a name that the export's WORLD_SIZE cannot hold (the export recording no
    RANK) is an error naming both and what to give, and the store is left as it was; the job's
    size given, it is ingested. A host given empty is refused as a job given empty is."""
    db = str(tmp_path / "s.duckdb")
    assert main(["--db", db, "ingest", str(EXPORTS[1]), "--param", "rank=1"]) == 0
    capsys.readouterr()
    before = store_state(tmp_path / "s.duckdb")
    # (the export records its RANK, which wins over a name's: dropped here, its WORLD_SIZE kept)
    (tmp_path / "r5").mkdir()
    plain = tmp_path / "r5" / "rank5.sqlite"
    plain.write_bytes(lzma.decompress(EXPORTS[1].read_bytes()))
    con = sqlite3.connect(plain)
    con.execute("DELETE FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE' AND value LIKE 'RANK=%'")
    con.commit()
    con.close()
    assert main(["--db", db, "ingest", str(tmp_path / "r5" / "rank5.sqlite")]) == 2
    assert capsys.readouterr().err == (f"tracekit: error: {tmp_path / 'r5' / 'rank5.sqlite'}: rank 5 by its name, but "
                                       f"the export recorded WORLD_SIZE={WORLD}, a job of ranks 0 to {WORLD - 1}; give "
                                       "the job's size (--param world_size=N)\n")
    assert main(["--db", db, "ingest", str(tmp_path / "r5" / "rank5.sqlite"), "--param", f"world_size={WORLD + 4}"]) == 0
    capsys.readouterr()
    before = store_state(tmp_path / "s.duckdb")
    assert main(["--db", db, "ingest", str(EXPORTS[2]), "--param", "host="]) == 2
    assert capsys.readouterr().err == ("tracekit: error: --param host='': an empty host name; name the host the rank "
                                       "ran on (or leave host out: the export's host name is taken)\n")
    assert store_state(tmp_path / "s.duckdb") == before


def test_parameters_of_a_run_ingested_again_must_be_its_own(tmp_path, capsys):
    """The same content ingested again is the same run: the same parameters, or none, are
    fine; others are an error that says how to change them, and the store is unchanged."""
    from conftest import store_state

    db = str(tmp_path / "s.duckdb")
    shutil.copy(OTHER, tmp_path / "copy.sqlite.xz")
    assert main(["--db", db, "ingest", str(OTHER), "--param", "rank=3"]) == 0
    before = store_state(Path(db))
    for source in (OTHER, tmp_path / "copy.sqlite.xz"):  # the path seen before, and another
        assert main(["--db", db, "ingest", str(source), "--param", "rank=3"]) == 0
        assert main(["--db", db, "ingest", str(source)]) == 0
        for args, has in ((["--param", "rank=4", "--name", "r4"], "rank=3, not rank=4"),
                          (["--param", "bs=8"], "no bs, not bs=8"),
                          (["--param", "rank=4", "--workers", "2"], "rank=3, not rank=4")):
            capsys.readouterr()
            assert main(["--db", db, "ingest", str(source), *args]) == 2
            err = capsys.readouterr().err.splitlines()
            assert err[0].startswith(f"tracekit: error: {source}") and has in err[0], err
            assert "tracekit runs rm 1" in err[0]
    assert store_state(Path(db)) == before


def _fake_nsys(tmp_path, monkeypatch) -> None:
    """An `nsys` on PATH whose `export --type sqlite -o OUT IN` decompresses IN (an
    xz-compressed real export standing in for the report) into OUT."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nsys"
    script.write_text(f"#!{sys.executable}\n"
                      "import lzma, shutil, sys\n"
                      "args = sys.argv[1:]\n"
                      "with lzma.open(args[-1]) as src, open(args[args.index('-o') + 1], 'wb') as dst:\n"
                      "    shutil.copyfileobj(src, dst)\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_an_nsys_report_is_its_own_run_not_its_temporary_export(tmp_path, monkeypatch, capsys):
    # the export to SQLite goes to a temp folder; the run's name, source path, rank and
    # job are the report's, through every way in: ingest, --workers' staging, diff
    _fake_nsys(tmp_path, monkeypatch)
    (tmp_path / "job42").mkdir()
    report = tmp_path / "job42" / "trainer_rank3.nsys-rep"
    shutil.copy(OTHER, report)
    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "ingest", str(report)]) == 0
    assert f"{report}: run 1 (trainer_rank3, nsys)" in capsys.readouterr().out
    tk = tracekit.open(db, read_only=True)
    name, source, params = tk.sql("SELECT name, source_path, params FROM runs").row(0)
    tk.close()
    params = json.loads(params)
    assert (name, source) == ("trainer_rank3", str(report.resolve()))
    assert params["rank"] == 3 and params["job"] == str((tmp_path / "job42" / "trainer_rank*").resolve())
    # the same report again is the same run; diff takes a report as a run
    assert main(["--db", str(db), "ingest", str(report)]) == 0
    assert "already ingested as run 1" in capsys.readouterr().out
    assert main(["--db", str(db), "diff", str(report), "1", "--format", "csv"]) == 0
    tk = tracekit.open(db, read_only=True)
    assert tk.sql("SELECT count(*) AS n FROM runs")["n"][0] == 1
    tk.close()
    pytest.importorskip("distributed")
    db2 = tmp_path / "w.duckdb"
    assert main(["--db", str(db2), "ingest", str(report), "--workers", "1"]) == 0
    tk = tracekit.open(db2, read_only=True)
    name2, source2, params2 = tk.sql("SELECT name, source_path, params FROM runs").row(0)
    assert (name2, source2, json.loads(params2)) == (name, source, params)
    tk.close()


# -- stragglers -----------------------------------------------------------------------


def test_stragglers_find_the_planted_straggler(job):
    tk, _, j = job
    df = tk.query("stragglers", limit=0)
    by = {(r["path"], r["instance"]): r for r in df.iter_rows(named=True)}
    steps = j.plant["observed_per_step"]["steps"]
    slowest_forward = fastest_exchange = 0
    for part, path in (("forward", "step/forward"), ("exchange", "step/exchange"),
                       ("backward", "step/backward"), ("step", "step")):
        for i in range(steps):
            durs = [j.per_step[f"rank{r}"][part][i] for r in range(j.world)]
            row = by[(path, i + 1)]
            assert row["ranks"] == j.world
            assert (row["min_ns"], row["max_ns"]) == (min(durs), max(durs)), (path, i)
            assert row["med_ns"] == pytest.approx(statistics.median(durs)), (path, i)
            assert row["slowest_rank"] == durs.index(max(durs)) and row["fastest_rank"] == durs.index(min(durs))
            assert row["skew_ns"] == max(durs) - min(durs)
            slowest_forward += path == "step/forward" and row["slowest_rank"] == j.straggler
            fastest_exchange += path == "step/exchange" and row["fastest_rank"] == j.straggler
    # the plant: rank 2 is the slowest in forward and waits least in exchange, step after step
    assert slowest_forward == j.plant["observed_per_step"]["straggler_slowest_in_forward"] >= steps * 3 // 4
    assert fastest_exchange == j.plant["observed_per_step"]["straggler_shortest_exchange"] >= steps * 3 // 4
    # the warm-up step is apart from the steps: one instance of warmup/forward
    assert by[("warmup/forward", 1)]["ranks"] == j.world and ("warmup/forward", 2) not in by
    # rows ordered by skew, largest first; range= takes a path or a range name
    assert df["skew_ns"].to_list() == sorted(df["skew_ns"].to_list(), reverse=True)
    assert tk.query("stragglers", range="step/forward", limit=0).height == steps
    assert set(tk.query("stragglers", range=":forward", limit=0)["path"]) == {"step/forward", "warmup/forward"}
    assert tk.query("stragglers", range="forward", limit=0).equals(tk.query("stragglers", range=":forward", limit=0))
    assert set(tk.query("stragglers", range="step", limit=0)["path"]) == {"step"}  # (a path: that path alone)
    # the slowest rank's lag behind the median rank, not the spread (skew_ns) over the median
    lag = ((df["max_ns"] - df["med_ns"]) * 100.0 / df["med_ns"]).round(1)
    assert (df["slowest_lag_pct"] - lag).abs().max() < 0.051 and (df["skew_ns"] > df["max_ns"] - df["med_ns"]).any()
    with pytest.raises(QueryError, match="^stragglers: no NVTX range of path or name 'step/fwd' in the job's ranks "):
        tk.query("stragglers", range="step/fwd")


def test_rank_ranges_totals_per_rank_and_path(job):
    tk, _, j = job
    df = tk.query("rank-ranges")
    rows = {(r["path"], r["rank"]): r for r in df.iter_rows(named=True)}
    assert {p for p, _ in rows} == set(j.plant["nvtx_paths"])
    for r in range(j.world):
        for part, path in (("forward", "step/forward"), ("exchange", "step/exchange"), ("step", "step")):
            assert rows[(path, r)]["total_ns"] == sum(j.per_step[f"rank{r}"][part])
            assert rows[(path, r)]["instances"] == j.plant["steps"]
            # (the mean rounded to 0.1, as every named query's avg_ns)
            avg = rows[(path, r)]["avg_ns"]
            assert avg == round(avg, 1) and avg == pytest.approx(sum(j.per_step[f"rank{r}"][part]) / j.plant["steps"],
                                                                 abs=0.05 + 1e-9)
        # nsys stats nvtx_sum: a range name's total is the sum of its paths' (warmup/x + step/x)
        stats = {s["Range"]: int(s["Total Time (ns)"]) for s in _stats(j, r, "nvtx_sum")}
        for name in ("forward", "exchange", "backward"):
            assert rows[(f"step/{name}", r)]["total_ns"] + rows[(f"warmup/{name}", r)]["total_ns"] == stats[f":{name}"]
    # against the median rank, from the plant's per-step durations: the straggler is the
    # slowest in forward and waits least in exchange
    for part, pick in (("forward", max), ("exchange", min)):
        totals = {r: sum(j.per_step[f"rank{r}"][part]) for r in range(j.world)}
        med = statistics.median(totals.values())
        got = {r: rows[(f"step/{part}", r)]["vs_median_pct"] for r in range(j.world)}
        assert got == {r: pytest.approx(round(100 * (t - med) / med, 1), abs=0.051) for r, t in totals.items()}
        assert pick(got, key=got.get) == j.straggler


# -- rank-summary against nsys stats --------------------------------------------------


def _busy(j: SimpleNamespace, rank: int) -> tuple[int, int]:
    """Union of every GPU op's [start, end) in nsys's cuda_gpu_trace, and its span."""
    ops = sorted((int(r["Start (ns)"]), int(r["Start (ns)"]) + int(r["Duration (ns)"]))
                 for r in _stats(j, rank, "cuda_gpu_trace"))
    busy, cur_s, cur_e = 0, *ops[0]
    for s, e in ops[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return busy + cur_e - cur_s, max(e for _, e in ops) - ops[0][0]


def test_rank_summary_is_nsys_stats_per_rank(job):
    tk, _, j = job
    df = tk.query("rank-summary")
    assert df["rank"].to_list() == sorted(j.exports)
    kernel_ns = {}
    for row in df.iter_rows(named=True):
        r = row["rank"]
        kern = _stats(j, r, "cuda_gpu_kern_sum")
        kernel_ns[r] = sum(int(k["Total Time (ns)"]) for k in kern)
        assert row["kernels"] == sum(int(k["Instances"]) for k in kern)
        assert row["kernel_ns"] == kernel_ns[r]
        top = max(kern, key=lambda k: int(k["Total Time (ns)"]))
        assert (row["top_kernel"], row["top_kernel_ns"]) == (top["Name"], int(top["Total Time (ns)"]))
        assert (row["gpu_busy_ns"], row["gpu_span_ns"]) == _busy(j, r)
        nvtx = {s["Range"]: int(s["Total Time (ns)"]) for s in _stats(j, r, "nvtx_sum")}
        assert row["nvtx_ns"] == nvtx[":warmup"] + nvtx[":step"]  # the outermost ranges
        assert row["host"] == _hostname(j.exports[0]) and row["run_id"] == r + 2
        # the GPUs as NVIDIA's trace names them: "NVIDIA H200 (0)"
        devices = sorted({int(t["Device"].rsplit("(", 1)[1].rstrip(")")) for t in _stats(j, r, "cuda_gpu_trace")})
        assert row["gpus"] == ",".join(map(str, devices)) == ",".join(map(str, j.plant["ranks"][f"rank{r}"]["devices"]))
    med = statistics.median(kernel_ns.values())
    for row in df.iter_rows(named=True):
        assert row["kernel_vs_median_pct"] == pytest.approx(round(100 * (kernel_ns[row["rank"]] - med) / med, 1))
    # the straggler's extra forward layers are extra GEMMs; over gloo no NCCL kernel
    assert max(kernel_ns, key=kernel_ns.get) == j.straggler
    assert df["nccl_ns"].is_null().all() and df["exposed_nccl_ns"].is_null().all()


# -- the job of --run, and runs that are no rank --------------------------------------


def test_any_rank_names_the_job_and_a_run_without_rank_is_an_error(job, capsys):
    tk, db, j = job
    latest = tk.query("rank-summary")
    for run in (2, 4, "5"):
        assert tk.query("rank-summary", run=run).equals(latest)
    let_go(tk)
    assert main(["--db", str(db), "query", "stragglers", "--run", "1"]) == 2
    err = capsys.readouterr().err
    assert err == ("tracekit: error: stragglers: run 1 has no rank: ingest each rank's export with its rank "
                   "(a file or folder named rank3 or _r3_, or --param rank=3)\n")
    empty = db.parent / "no-ranks.duckdb"
    tracekit.open(empty).ingest(OTHER)
    for q in ("rank-summary", "jobs"):
        assert main(["--db", str(empty), "query", q]) == 2
        err = capsys.readouterr().err
        assert err == (f"tracekit: error: {q}: no multi-rank run in {empty}; ingest each rank's export with its "
                       "rank (a file or folder named rank3 or _r3_, its launcher's RANK as nsys recorded it, or "
                       "--param rank=3)\n")


@pytest.mark.parametrize("name", ["rank-summary", "stragglers", "rank-ranges"])
def test_a_query_over_a_job_names_the_job_it_shows(nsys_db, name):
    """A store of several jobs (the shared store: nsys_ranks' 4 ranks, two of nsys_ranks_2gpu's,
    nsys_ranks_nccl's two): each query over the job of --run shows which job it answered
    (`job`, as `tracekit query jobs` names it), first in its table."""
    from tracekit.registry import get_registry

    q = get_registry().get(name)
    assert q.spans_job and q.display[0] == "job"
    jobs = set(nsys_db.query("jobs")["job"])
    shown = set()
    for run in ("ranks_rank3", "ranks_2gpu_rank0", "ranks_nccl_rank1"):
        (job,) = nsys_db.con.execute("SELECT job FROM rank_captures JOIN runs USING (run_id) WHERE runs.name = ?",
                                     [run]).fetchone()
        got = nsys_db.query(name, run=run, limit=0)
        assert got.height and set(got["job"]) == {job}, run
        shown.add(job)
    assert len(shown) == 3 and shown <= jobs


# -- the jobs of a store ---------------------------------------------------------------


def test_jobs_lists_each_job_and_the_ranks_it_lacks(tmp_path, capsys):
    """Both real jobs and a run of no job: a row per job with its 4 ranks of the launcher's
    WORLD_SIZE=4 and none missing, and the run to name it by. Ranks 0 and 3 alone: 1-2
    missing; with --param world_size=8, 1-2, 4-7. A rank ingested again (other content)
    counts once among the ranks, twice among the runs."""
    db = tmp_path / "jobs.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(OTHER)
        for j in JOBS.values():
            for r in sorted(j.exports):
                tk.ingest(j.exports[r])
        jobs = tk.query("jobs")
        assert jobs.height == 2 and jobs["ranks"].to_list() == [4, 4]
        assert jobs["world_size"].to_list() == [4, 4] and jobs["missing"].to_list() == [0, 0]
        assert jobs["missing_ranks"].to_list() == [None, None] and jobs["runs"].to_list() == [4, 4]
        assert jobs["hosts"].to_list() == [1, 1]
        for row, j in zip(jobs.iter_rows(named=True), JOBS.values(), strict=True):
            assert "*" in row["job"] and row["job"].endswith("/export") and j.name in row["job"]
            with warnings.catch_warnings():
                warnings.simplefilter("error", CaptureWarning)  # (every rank in the store: nothing to say)
                assert tk.query("rank-summary", run=row["run"])["rank"].to_list() == [0, 1, 2, 3]
            assert tk.query("run-info", run=row["run"])["source_path"][0] == str(j.exports[0])
    for extra, missing, listed in (([], 2, "1-2"), (["-p", "world_size=8"], 6, "1-2, 4-7")):
        db = tmp_path / f"part{missing}.duckdb"
        assert main(["--db", str(db), "ingest", str(EXPORTS[0]), str(EXPORTS[3]), *extra]) == 0
        with tracekit.open(db, read_only=True) as tk:
            row = tk.query("jobs").row(0, named=True)
        assert (row["ranks"], row["first_rank"], row["last_rank"]) == (2, 0, 3)
        assert (row["missing"], row["missing_ranks"]) == (missing, listed)
        # a question across the job's ranks says which it could not compare
        capsys.readouterr()
        assert main(["--db", str(db), "query", "stragglers", "--limit", "1"]) == 0
        err = capsys.readouterr().err
        size = " (world size 8)" if extra else " (world size 4)"
        assert err == (f"tracekit: warning: job {row['job']}: ranks {listed} not ingested{size}: its questions across "
                       "ranks (rank-summary, stragglers, rank-ranges) compare the 2 in the store, and a rank left out "
                       "may be the slowest; ingest their exports to compare every rank (tracekit query jobs)\n"), err
    again = captured_again(EXPORTS[3], tmp_path / "rank3" / "export.sqlite")
    part = tmp_path / "part2.duckdb"
    with tracekit.open(part, read_only=True) as tk:
        job = tk.query("jobs")["job"][0]
    assert main(["--db", str(part), "ingest", str(again), "-p", f"job={job}"]) == 0
    with tracekit.open(part, read_only=True) as tk:
        row = tk.query("jobs").row(0, named=True)
        assert tk.query("rank-summary", run=row["run"])["run"].to_list() == ["rank0/export", "export"]
        # asked of the run whose place the rank's later ingest took, which the job's queries take too
        with pytest.warns(CaptureWarning, match=r": ranks 1-2 not ingested \(world size 4\): its questions across"):
            tk.query("stragglers", run="rank3/export", limit=1)
    assert (row["job"], row["ranks"], row["runs"], row["missing_ranks"]) == (job, 2, 3, "1-2")


def test_jobs_where_the_world_size_is_unknown_changed_or_huge(tmp_path):
    """Ranks 0 and 3 of a job whose launcher recorded no world size (captures of other
    programs given their rank): 1-2 missing all the same (below the highest rank). The
    world size is what each rank's latest run recorded: a rank ingested again with a
    corrected one replaces the first. A world size of 10^12: counted, not listed."""
    db = tmp_path / "j.duckdb"
    for rank, f in ((0, CPU_ONLY[0]), (3, CPU_ONLY[1])):
        assert main(["--db", str(db), "ingest", str(f), "-p", f"rank={rank}", "-p", "job=gap"]) == 0
    with tracekit.open(db, read_only=True) as tk:
        row = tk.query("jobs").row(0, named=True)
    assert (row["world_size"], row["missing"], row["missing_ranks"], row["hosts"]) == (None, 2, "1-2", 1)
    db = tmp_path / "w.duckdb"
    assert main(["--db", str(db), "ingest", str(EXPORTS[0]), str(EXPORTS[1]), "-p", "world_size=16"]) == 0
    again = captured_again(EXPORTS[1], tmp_path / "rank1" / "export.sqlite")  # (its world size: 4)
    with tracekit.open(db, read_only=True) as tk:
        job = tk.query("jobs")["job"][0]
        assert tk.query("jobs")["missing_ranks"][0] == "2-15"
    assert main(["--db", str(db), "ingest", str(again), "-p", f"job={job}"]) == 0
    with tracekit.open(db, read_only=True) as tk:
        row = tk.query("jobs").row(0, named=True)
    assert (row["world_size"], row["missing"], row["missing_ranks"], row["runs"]) == (16, 14, "2-15", 3)
    with tracekit.open(db) as tk:  # rank 0 again too: no latest run says 16 any more
        tk.con.execute("UPDATE runs SET params = json_merge_patch(params, '{\"world_size\": 4}') WHERE run_id = 1")
        row = tk.query("jobs").row(0, named=True)
        assert (row["world_size"], row["missing"], row["missing_ranks"]) == (4, 2, "2-3")
        tk.con.execute("UPDATE runs SET params = json_merge_patch(params, '{\"world_size\": 1000000000000}') "
                       "WHERE run_id = 1")
        row = tk.query("jobs").row(0, named=True)
        assert (row["world_size"], row["missing"], row["missing_ranks"]) == (10**12, 10**12 - 2, None)


# -- ranks that did not trace what a query reads ---------------------------------------

CPU_ONLY = [DATA / "nsys_cpu_only" / "export.sqlite.xz", DATA / "nsys_cpu_only_more" / "export.sqlite.xz"]
CUDA_ONLY = DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz"  # nsys -t cuda: no NVTX


def _as_job(db: Path, exports: list[Path], job: str) -> None:
    """``exports`` ingested as ranks 0, 1, ... of one job, named JOB-rN (two captures of
    other programs are one job only when told: their job would be each one's folder)."""
    for rank, f in enumerate(exports):
        assert main(["--db", str(db), "ingest", str(f), "-p", f"rank={rank}", "-p", f"job={job}",
                     "--name", f"{job}-r{rank}"]) == 0


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracekit: error: ") and "Traceback" not in err, err
    return err.removeprefix("tracekit: error: ").strip()


def test_a_cpu_only_job_has_no_rank_summary_but_its_nvtx_ranges_compare(tmp_path, capsys):
    """Ranks captured with nsys -t nvtx,osrt: rank-summary (GPU busy and kernel time) is an
    error naming the ranks and nsys -t cuda, not a table of zero GPU time; their NVTX
    ranges compare across the ranks (rank-ranges, stragglers, the heatmap)."""
    db = tmp_path / "cpu.duckdb"
    _as_job(db, CPU_ONLY, "cpu-job")
    capsys.readouterr()
    for run in ("1", "2"):
        assert main(["--db", str(db), "query", "rank-summary", "--run", run]) == 2
        assert _error(capsys) == (f"rank-summary: the job of run {run} (cpu-job-r{int(run) - 1}) was captured "
                                  "without CUDA tracing on every rank (ranks 0 and 1: runs 1 and 2); capture its "
                                  "ranks with nsys -t cuda (tracekit capture does)")
    assert main(["--db", str(db), "chart", "rank-summary", "-o", str(tmp_path / "s.json")]) == 2
    assert "without CUDA tracing" in _error(capsys) and not (tmp_path / "s.json").exists()
    with tracekit.open(db, read_only=True) as tk:
        with pytest.raises(QueryError, match="nsys -t cuda"):
            tk.query("rank-summary")
        assert set(tk.query("rank-ranges")["rank"]) == {0, 1}
        assert tk.query("stragglers", limit=0)["ranks"].max() == 2
        assert {v["rank"] for v in _values(charts.chart(tk, "rank-heatmap").to_dict())} == {0, 1}


def test_a_rank_that_did_not_trace_is_named_not_left_out(tmp_path, capsys):
    """Ranks 0 and 1 of the real job, and a rank 2 captured with nsys -t cuda (no NVTX):
    stragglers, rank-ranges and the heatmap would compare ranks 0 and 1 alone, as if the
    job had two ranks: an error naming rank 2 and nsys -t nvtx, asked of any rank. Its
    GPU time compares (rank-summary; its NVTX time NULL). A CPU-only rank in a GPU job:
    rank-summary names it."""
    db = tmp_path / "mixed.duckdb"
    _as_job(db, [EXPORTS[0], EXPORTS[1], CUDA_ONLY], "mixed")
    capsys.readouterr()
    for run in ("1", "3"):
        for q in ("stragglers", "rank-ranges"):
            assert main(["--db", str(db), "query", q, "--run", run]) == 2
            assert _error(capsys) == (f"{q}: rank 2 of the job of run {run} (mixed-r{int(run) - 1}) was captured "
                                      "without NVTX tracing (run 3), so the job's 3 ranks cannot all be compared; "
                                      "capture every rank with nsys -t nvtx (tracekit capture does)")
    assert main(["--db", str(db), "chart", "rank-heatmap", "--run", "2", "-o", str(tmp_path / "h.html")]) == 2
    assert _error(capsys).startswith("chart rank-heatmap: rank-ranges: rank 2 of the job of run 2 (mixed-r1)")
    with tracekit.open(db, read_only=True) as tk:
        summary = tk.query("rank-summary", run=1)
        assert summary["rank"].to_list() == [0, 1, 2] and summary["kernels"].min() > 0
        assert summary["nvtx_ns"].to_list()[2] is None and None not in summary["nvtx_ns"].to_list()[:2]
    _as_job(db, [EXPORTS[2], CPU_ONLY[0]], "gpu-and-cpu")
    capsys.readouterr()
    assert main(["--db", str(db), "query", "rank-summary", "--run", "4"]) == 2
    assert _error(capsys) == ("rank-summary: rank 1 of the job of run 4 (gpu-and-cpu-r0) was captured without CUDA "
                              "tracing (run 5), so the job's 2 ranks cannot all be compared; capture every rank "
                              "with nsys -t cuda (tracekit capture does)")
    assert main(["--db", str(db), "query", "stragglers", "--run", "5", "-f", "csv"]) == 0  # (both traced NVTX)
    # an export that does not say what its capture traced (nsys before 2023.3): not said to
    # be captured without it, and a re-export tells
    with tracekit.open(db) as tk:
        tk.con.execute("""UPDATE runs SET meta = json_merge_patch(meta, '{"traced_said": false}') WHERE run_id = 3""")
    assert main(["--db", str(db), "query", "stragglers", "--run", "1"]) == 2
    assert _error(capsys) == ("stragglers: rank 2 of the job of run 1 (mixed-r0) has no NVTX events, and its export "
                              "(nsys before 2023.3) does not say whether they were traced (run 3), so the job's 3 "
                              "ranks cannot all be compared; capture every rank with nsys -t nvtx (tracekit capture "
                              "does), or re-export its .nsys-rep with nsys 2023.3 or later (nsys export -t sqlite) "
                              "to tell")


def test_a_rank_whose_capture_missed_the_gpu_work_is_said(tmp_path, capsys):
    """A real job whose rank 3 was captured with its capture range on a host-only NVTX range
    after its GPU work (nsys_jobs/missed: CUDA traced, none recorded): rank-summary answers
    its row of no kernel time (-100 % against the median of the ranks with GPU work, which its
    0 no longer pulls down) with one line saying why, asked of
    any rank; the report's section says it too. A question of NVTX ranges alone says nothing
    of it."""
    db = tmp_path / "missed.duckdb"
    _as_job(db, [DATA / "nsys_jobs" / "missed" / f"rank{r}" / "export.sqlite.xz" for r in range(4)], "missed")
    capsys.readouterr()
    said = ("run {run} (missed-r{r}): rank 3 of its job (run 4) holds no CUDA event at all (no API call, kernel or "
            "copy), though its capture traced CUDA: the capture's window (nsys --delay, --duration, --capture-range) "
            "held none of the program's GPU work, or the work ran in a process nsys did not follow")
    for run in (1, 4):
        assert main(["--db", str(db), "query", "rank-summary", "--run", str(run), "-f", "csv"]) == 0
        out, err = capsys.readouterr()
        assert err.splitlines() == ["tracekit: warning: " + said.format(run=run, r=run - 1)]
        rows = pl.read_csv(io.StringIO(out))
        assert rows["kernel_vs_median_pct"].to_list()[3] == -100.0
        # the others against the median of the ranks with GPU work: rank 3's 0 left out of it
        med = sorted(rows["kernel_ns"].to_list()[:3])[1]
        assert rows["kernel_vs_median_pct"].to_list()[:3] == [round(100 * (k - med) / med, 1)
                                                              for k in rows["kernel_ns"].to_list()[:3]]
    assert main(["--db", str(db), "query", "rank-ranges", "--run", "1"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["--db", str(db), "report", "--run", "1", "-o", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr().err == ""  # (said in the section)
    text = (tmp_path / "r.html").read_text()
    section = text[text.index('<section id="rank-summary">'):]
    assert f'<p class="note">{html.escape(said.format(run=1, r=0))}</p>' in section[:section.index("</section>")]


# -- charts ---------------------------------------------------------------------------


def _values(spec: dict) -> list[dict]:
    return [row for rows in spec_datasets(spec) for row in rows]


def test_a_rounded_change_of_nothing_is_written_as_zero(job, tmp_path):
    """rank-summary's % against the median rank, rounded: on nsys_ranks_2gpu rank 3's kernel time
    is 0.02 % below the median, round(-0.02, 1) = -0.0, which CSV and JSON wrote as '-0.0'."""
    import math

    tk, db, j = job
    df = tk.query("rank-summary")
    negative_zero = [r["rank"] for r in df.iter_rows(named=True)
                     if r["kernel_vs_median_pct"] == 0 and math.copysign(1, r["kernel_vs_median_pct"]) < 0]
    if j.name == "nsys_ranks_2gpu":
        assert negative_zero == [3]
    let_go(tk)
    for fmt in ("csv", "json"):
        out = tmp_path / f"r.{fmt}"
        assert main(["--db", str(db), "query", "rank-summary", "-o", str(out)]) == 0
        assert "-0.0" not in out.read_text()


def test_rank_charts_draw_the_queries(job, tmp_path):
    tk, db, j = job
    heat = _values(charts.chart(tk, "rank-heatmap").to_dict())
    cells = {(v["path"], v["rank"]): v for v in heat}
    q = tk.query("rank-ranges")
    assert len(cells) == q.height == len(j.plant["nvtx_paths"]) * j.world
    for row in q.iter_rows(named=True):
        c = cells[(row["path"], row["rank"])]
        assert c["total_ms"] == pytest.approx(row["total_ns"] / 1e6) and c["vs_median_pct"] == row["vs_median_pct"]
    # a cell's label is white on the scale's dark ends (the straggler's cells), dark on its pale middle
    label = _layers(charts.chart(tk, "rank-heatmap").to_dict())[1]["encoding"]["color"]
    m = re.fullmatch(r"abs\(datum\.vs_median_pct\) > ([0-9.]+)", label["condition"]["test"])
    white = q["vs_median_pct"].abs() > float(m[1])
    assert label["condition"]["value"] == "white" and label["value"] == "#222"
    top = q["vs_median_pct"].abs().max()  # (the scale's ends: ± the largest change)
    assert white[q["vs_median_pct"].abs().arg_max()] and not (white & (q["vs_median_pct"].abs() < top / 2)).any()
    top = _values(charts.chart(tk, "stragglers").to_dict())
    q = tk.query("stragglers")
    assert [v["label"] for v in top] == [f"{r['path']} #{r['instance']}" for r in q.iter_rows(named=True)]
    # a path too long for the axis is cut before its instance, which tells its rows apart
    long = q.with_columns(pl.concat_str(pl.lit("<b>outer &amp; \"more\"</b> " * 20 + "/"), "path").alias("path"))
    rows = _values(charts.stragglers(long).to_dict())
    labels = [v["label"] for v in rows]
    assert [v["full"] for v in rows] == [f"{r['path']} #{r['instance']}" for r in long.iter_rows(named=True)]
    assert [lab.rsplit(" #", 1)[1] for lab in labels] == [str(n) for n in q["instance"]]
    assert len(set(labels)) == len(labels) and max(map(len, labels)) <= charts.STRAGGLER_LABEL_CHARS
    summary = _values(charts.chart(tk, "rank-summary").to_dict())
    busy = {v["r"]: v["ms"] for v in summary if v["measure"] == "GPU busy"}
    assert busy == {f"rank {r['rank']}": pytest.approx(r["gpu_busy_ns"] / 1e6)
                    for r in tk.query("rank-summary").iter_rows(named=True)}
    # the bars' labels, as drawn: % against the median rank as the tables write it, a rank within
    # 0.05 % of it +0.0 (rank 0's kernel time is 0.027 % below the median: d3's +.1f writes −0.0)
    import vl_convert as vlc

    drawn = re.findall(r">([+\-−][0-9.]+)</text>", vlc.vegalite_to_svg(charts.chart(tk, "rank-summary").to_dict()))
    want = [f"{v['vs_median']:+z.1f}" for v in summary]
    assert sorted(drawn) == sorted(want) and "+0.0" in drawn, (drawn, want)
    let_go(tk)
    out = tmp_path / "heat.html"
    assert main(["--db", str(db), "chart", "rank-heatmap", "-o", str(out)]) == 0
    assert out.stat().st_size > 1000


def _layers(spec: dict) -> list[dict]:
    """A chart's layers (itself where it has none)."""
    inner = _inner(spec)
    return inner.get("layer", [inner])


def test_rank_charts_of_a_large_job_fit_a_screen(job, tmp_path):
    """The real job's answers as those of 1,000 ranks (rank k: rank k % 4's rows): each
    rank a thin band of a chart of fixed height (no value labels, a rank named every 12 px,
    the heatmap's paths named on top), every rank and cell still drawn; the job's own 4
    ranks keep a labelled step each, and 49 ranks are each named."""
    tk, _, j = job
    ranges, summary = tk.query("rank-ranges"), tk.query("rank-summary")
    for df, build, step in ((ranges, charts.rank_heatmap, 28), (summary, charts.rank_summary, 22)):
        small = build(df).to_dict()
        assert _inner(small)["height"] == {"step": step} and len(_layers(small)) == 2  # marks and their labels
        big = pl.concat([df.filter(pl.col("rank") == k % j.world).with_columns(pl.lit(k).alias("rank"))
                         for k in range(1000)])
        spec = build(big).to_dict()
        assert _inner(spec)["height"] == charts.DENSE_HEIGHT and len(_layers(spec)) == 1
        y = _layers(spec)[0]["encoding"]["y"]
        assert y["sort"] == [f"rank {k}" for k in range(1000)]
        named = y["axis"]["values"]  # a name every 12 px or more: one rank in 13
        assert named == [f"rank {k}" for k in range(0, 1000, 13)] and 12 * len(named) <= charts.DENSE_HEIGHT
        assert "1,000 ranks, one in 13 named" in str(spec["title"]["subtitle"])
        assert len(_values(spec)) == big.height * (3 if build is charts.rank_summary else 1)
        just_dense = build(big.filter(pl.col("rank") < charts.DENSE_RANKS + 1)).to_dict()
        assert _inner(just_dense)["height"] == charts.DENSE_HEIGHT and len(_layers(just_dense)) == 1
        assert _layers(just_dense)[0]["encoding"]["y"]["axis"]["values"] == [f"rank {k}" for k in range(49)]
        if build is charts.rank_heatmap:
            assert _layers(spec)[0]["encoding"]["x"]["axis"]["orient"] == "top"
            assert _layers(small)[0]["encoding"]["x"]["axis"]["orient"] == "bottom"
            dense_heatmap = build(big)
    if chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; CI installs it)")
    # in a browser: a cell per rank and path drawn, on a page that fits a screen
    out = charts.save(dense_heatmap, tmp_path / "heat.html")
    page = chart_marks(out)
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.value["error"] is None
    assert page.value["marks"]["rect"] == 1000 * len(j.plant["nvtx_paths"]) and page.value["height"] < 1400


def _inner(spec: dict) -> dict:
    """A chart's own spec (a faceted chart's inner one)."""
    return spec.get("spec", spec)


def _rank_runs(tk) -> dict[int, int]:
    return dict(tk.con.execute("SELECT rank, run_id FROM rank_runs").fetchall())


def test_the_jobs_timeline_draws_each_rank_over_the_same_span(job, tmp_path):
    """chart timeline -p ranks=all: rank 0's step 5 on every rank of the job, each rank's
    rows those of its own timeline over the same span of time (the window moved onto its
    clock by the distance of the captures' starts, its times moved back onto the run's), its
    lanes named for it, rank by rank; drawn in Chromium, a bar per row. A rank not in the job,
    or more events than a timeline draws, is one line that says what to choose."""
    tk, _, j = job
    runs = _rank_runs(tk)
    t = charts.timeline_data(tk, run=str(runs[0]), nvtx="step", instance=5, ranks="all")
    assert t.ranks == tuple(range(j.world)) and t.window.label == "step instance 5 of 20"
    starts = dict(tk.con.execute("SELECT run_id, json_extract_string(meta, '$.session_start_utc_ns')::HUGEINT "
                                 "FROM runs").fetchall())
    for r in range(j.world):
        shift = int(starts[runs[r]] - starts[runs[0]])
        own = charts.timeline_data(tk, run=str(runs[r]), from_ns=t.window.start_ns - shift,
                                   to_ns=t.window.end_ns - shift)
        for mine, theirs in ((t.nvtx, own.nvtx), (t.gpu, own.gpu)):
            got = mine.filter(pl.col("rank") == r).drop("rank")
            assert got.height > 0 and got.equals(theirs.with_columns(pl.col("start_ns", "end_ns") + shift)), r
    spec = charts.timeline(t).to_dict()
    lanes = spec["layer"][0]["encoding"]["y"]["sort"]
    assert [int(lane.split()[1]) for lane in lanes] == sorted(int(lane.split()[1]) for lane in lanes)
    assert {lane.split(" · ")[0] for lane in lanes} == {f"rank {r}" for r in range(j.world)}
    assert spec["title"]["text"] == f"Timeline · ranks 0-{j.world - 1} of run {runs[0]}'s job (rank0/export)"
    with pytest.raises(QueryError, match=rf"^chart timeline: -p ranks=7: rank 7 not in run {runs[0]}'s job, "
                                         rf"which has ranks 0-{j.world - 1}$"):
        charts.timeline_data(tk, run=str(runs[0]), nvtx="step", ranks="7")
    with pytest.raises(QueryError, match=rf"^chart timeline: whole run of the {j.world} ranks of run {runs[0]}'s "
                                         r"job holds [0-9,]+ events, more than the 5,000 a timeline draws; choose "
                                         r"fewer ranks \(-p ranks=[0-9,-]+\) or a shorter window") as err:
        charts.timeline_data(tk, run=str(runs[0]), ranks="all")
    fewer = re.search(r"-p ranks=([0-9,-]+)\)", str(err.value)).group(1)  # the first ranks that fit: they draw
    assert 0 < len(charts.timeline_data(tk, run=str(runs[0]), ranks=fewer).ranks) < j.world
    if chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; CI installs it)")
    page = chart_marks(charts.save(charts.timeline(t), tmp_path / "job.html"))
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.value["error"] is None
    assert page.value["marks"]["rect"] == t.nvtx.height + t.gpu.height


def test_a_rank_that_traced_nothing_drawn_is_a_note_on_the_jobs_timeline(tmp_path):
    """A rank of the job whose capture traced neither NVTX nor CUDA: the job's timeline draws
    the others and says so of it; asked for that rank alone, one line."""
    db = tmp_path / "j.duckdb"
    with tracekit.open(db) as tk:
        for r in (0, 1):
            tk.ingest(EXPORTS[r], params={"rank": r, "job": "j"})
        again = captured_again(EXPORTS[1], tmp_path / "r2.sqlite")  # (rank 1's capture: the same span of time)
        tk.ingest(again, params={"rank": 2, "job": "j"})
        tk.con.execute("""UPDATE runs SET meta = json_merge_patch(meta, '{"traced": ["threads", "osrt_calls"]}')
                          WHERE run_id = 3""")
        t = charts.timeline_data(tk, run="1", nvtx="step", instance=3, ranks="all")
        assert t.ranks == (0, 1, 2) and set(t.nvtx["rank"]) == {0, 1} and set(t.gpu["rank"]) == {0, 1}
        assert t.notes == ("rank 2 was captured without NVTX tracing", "rank 2 was captured without CUDA tracing")
        with pytest.raises(QueryError, match=r"^chart timeline: no rank of run 1's job asked for \(rank 2\) traced "
                                             r"NVTX or CUDA: nothing to draw"):
            charts.timeline_data(tk, run="1", nvtx="step", instance=3, ranks="2")
        # its export not saying what its capture traced (nsys before 2023.3): it has none of them
        tk.con.execute("""UPDATE runs SET meta = json_merge_patch(meta, '{"traced_said": false}') WHERE run_id = 3""")
        unsaid = "has no {} events, and its export (nsys before 2023.3) does not say whether they were traced"
        assert charts.timeline_data(tk, run="1", nvtx="step", instance=3, ranks="all").notes == tuple(
            f"rank 2 {unsaid.format(k)}" for k in ("NVTX", "CUDA"))
        with pytest.raises(QueryError, match=r"^chart timeline: no rank of run 1's job asked for \(rank 2\) has "
                                             r"NVTX or CUDA events, and their exports \(nsys before 2023.3\) do not "
                                             r"say whether they were traced: nothing to draw; capture with nsys -t "
                                             r"nvtx,cuda, or re-export their .nsys-rep"):
            charts.timeline_data(tk, run="1", nvtx="step", instance=3, ranks="2")


def test_a_ranks_report_shows_the_jobs_timeline(job, tmp_path, monkeypatch):
    """A rank's report: after the job's views, its typical step on every rank (a job of more
    than JOB_TIMELINE_RANKS ranks: this rank, the slowest and the fastest in that step, by
    stragglers), the caption saying which and the export trace command that writes it; in
    Chromium, a bar per NVTX range and GPU op of those ranks in the window."""
    from tracekit import report

    tk, db, j = job
    runs = _rank_runs(tk)
    rep = report.build(tk, str(runs[1]))
    keys = [sec.key for sec, *_ in rep.sections]
    assert keys[:4] == ["rank-summary", "stragglers", "rank-heatmap", "job-timeline"]
    params, caption = report.typical_step(tk, runs[1])
    step = params["instance"]
    assert params == {"nvtx": "step", "instance": step, "ranks": "all"}
    assert f"on every rank of the job (ranks 0-{j.world - 1})" in caption
    assert f"`tracekit export trace --run {runs[1]} --ranks all --nvtx step --instance {step} -o step.json`" in caption
    monkeypatch.setattr(report, "JOB_TIMELINE_RANKS", 2)
    t = charts.timeline_data(tk, run=str(runs[1]), nvtx="step", instance=step, ranks="all")
    span = (t.window.start_ns, t.window.end_ns)
    steps = t.nvtx.filter(pl.col("path") == "step").with_columns(  # (each rank's step over the span)
        (pl.min_horizontal("end_ns", pl.lit(span[1])) - pl.max_horizontal("start_ns", pl.lit(span[0]))).alias("in"))
    longest = steps.sort("in", descending=True).unique("rank", keep="first").sort("dur_ns", "rank", descending=[True, False])
    slow, fast = longest["rank"][0], longest.sort("dur_ns", "rank")["rank"][0]
    assert slow != fast
    params, caption = report.typical_step(tk, runs[1])
    assert params["ranks"] == ",".join(map(str, sorted({1, slow, fast})))
    assert (f"on this run's rank 1, rank {slow}, whose step there took longest, rank {fast}, shortest (of the "
            f"job's {j.world} ranks)") in caption
    monkeypatch.undo()
    if chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; CI installs it)")
    out = tmp_path / "r.html"
    out.write_text(report.render(rep))  # (the report built above: write_report builds the same)
    page = load(out, "window.tracekitReport && window.tracekitReport.done", "window.tracekitReport")
    t = charts.timeline_data(tk, run=str(runs[1]), nvtx="step", instance=step, ranks="all")
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.value["failed"] == 0
    assert page.value["marks"]["chart-job-timeline"] == t.nvtx.height + t.gpu.height


def test_the_ranks_ingested_by_dask_workers_are_the_serial_ones(tmp_path, capsys):
    pytest.importorskip("distributed")
    from _stores import assert_same_stores

    serial = tmp_path / "serial.duckdb"
    dist = tmp_path / "dist.duckdb"
    files = [str(EXPORTS[r]) for r in sorted(EXPORTS)]
    assert main(["--db", str(serial), "ingest", *files]) == 0
    assert main(["--db", str(dist), "ingest", *files, "--workers", "2"]) == 0
    capsys.readouterr()
    a, b = tracekit.open(serial, read_only=True), tracekit.open(dist, read_only=True)
    assert_same_stores(a.con, b.con)
    assert b.query("stragglers", limit=0).equals(a.query("stragglers", limit=0))


def test_a_job_with_one_rank_in_the_store_is_not_compared(tmp_path, capsys):
    """One rank of the real 4-rank job ingested (or all of them, then all but one removed):
    rank-summary, stragglers, rank-ranges and their charts are an error naming the job and
    what to do, not a table of one rank against itself (skew 0 %); with a second rank they
    answer."""
    db = str(tmp_path / "one.duckdb")
    assert main(["--db", db, "ingest", str(EXPORTS[0])]) == 0
    capsys.readouterr()

    def refused():
        for args in (["query", "rank-summary"], ["query", "stragglers"], ["query", "rank-ranges"],
                     ["chart", "rank-heatmap", "-o", str(tmp_path / "h.png")]):
            assert main(["--db", db, *args]) == 2, args
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "is the only rank of its job" in err[0] and "tracekit query jobs" in err[0], err
        assert not (tmp_path / "h.png").exists()

    refused()
    assert main(["--db", db, "query", "jobs"]) == 0  # (what the job has: one rank, the others missing)
    assert main(["--db", db, "ingest", str(EXPORTS[1])]) == 0
    capsys.readouterr()
    assert main(["--db", db, "query", "rank-summary", "-f", "csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3  # a header and the two ranks
    assert main(["--db", db, "runs", "rm", "2"]) == 0
    capsys.readouterr()
    refused()


@pytest.mark.parametrize(("run_id", "job"), [("none", None), ("NONE", None), ("", None),
                                             ("3f2a9c1e-7d1b-4c55-9d2e-0a6b8e1f2c3d", "3f2a9c1e-7d1b-4c55-9d2e-0a6b8e1f2c3d")])
def test_torchruns_default_run_id_names_no_job(tmp_path, run_id, job):
    """torchrun's TORCHELASTIC_RUN_ID is `none` unless --rdzv-id (or a single-node launch's
    uuid) set it: every such launch would be one job, each capture superseding the last. The
    job is then the export's path, as without a launcher id. (A real rank export, with the
    variable added to the environment nsys recorded.)"""
    from tracekit.ranks import identify

    export = tmp_path / "rank2" / "export.sqlite"
    export.parent.mkdir()
    with lzma.open(DATA / "nsys_jobs" / "base" / "rank2" / "export.sqlite.xz") as src:
        export.write_bytes(src.read())
    con = sqlite3.connect(export)
    con.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)",
                [f'TORCHELASTIC_RUN_ID="{run_id}"'])
    con.commit()
    con.close()
    got = identify(export, export, {})
    assert got["rank"] == 2 and got["world_size"] == 4
    assert got["job"] == (job or str(tmp_path.resolve() / "rank*" / "export"))
