"""The HSTU workload's bs x nc sweep under nsys, real (tests/data/hstu_nsys_sweep, the H200): each
point's kernels against NVIDIA's nsys stats, and two sweeps compared point by point in every scope:
the same sweep taken again (noise) and with the reference attention backend (the planted change)."""

import csv
import json
import warnings
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import tracekit
from tracekit.errors import CaptureWarning

SWEEPS = DATA / "hstu_nsys_sweep"
POINTS = {f"bs={b},nc={n}" for b in (1, 4) for n in (128, 512)}


def _manifest(which: str) -> dict:
    return json.loads(next((SWEEPS / which).glob("sweep-*.json")).read_text())


def _run(which: str, point: dict) -> Path:
    return SWEEPS / which / "runs" / Path(point["run_dir"]).name


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("hstu_nsys_sweep") / "s.duckdb"
    with tracekit.open(db) as tk:
        for which in ("base", "again", "reference"):
            for run in sorted((SWEEPS / which / "runs").iterdir()):
                tk.ingest(run)
    tk = tracekit.open(db, read_only=True)
    yield tk
    tk.close()


@pytest.mark.parametrize("which", ["base", "reference"])
def test_each_points_kernels_are_nsys_stats(store, which):
    """Each point's kernels as NVIDIA's cuda_gpu_kern_sum gives them, less the workload's L2-flush
    fill between requests (not workload time: it was the top kernel of three base points, 29.7 %),
    as sweep-kernels leaves it out: the two queries' totals agree."""
    manifest = _manifest(which)
    df = store.query("sweep-points", sweep=manifest["sweep"])
    assert df["point"].to_list() == [f"bs={p['bs']},nc={p['nc']}" for p in manifest["points"]]
    kernels = store.query("sweep-kernels", sweep=manifest["sweep"], limit=0)
    fills = 0
    for row, point in zip(df.iter_rows(named=True), manifest["points"], strict=True):
        with open(_run(which, point) / "stats" / "cuda_gpu_kern_sum.csv", newline="") as f:
            every = list(csv.DictReader(f))
        stats = [s for s in every if "FillFunctor<signed char>" not in s["Name"]]
        fills += len(every) - len(stats)
        assert row["kernel_total_ns"] == kernels.filter(pl.col("point") == row["point"])["total_ns"].sum()
        assert row["kernels"] == len(stats)
        assert row["launches"] == sum(int(s["Instances"]) for s in stats)
        assert row["kernel_total_ns"] == sum(int(s["Total Time (ns)"]) for s in stats)
        assert row["top_kernel"] == max(stats, key=lambda s: int(s["Total Time (ns)"]))["Name"]
    assert fills == len(manifest["points"])  # (each point flushed the L2 between its requests)


def test_each_points_nvtx_ranges_are_nsys_stats(store):
    for point in _manifest("base")["points"]:
        run = _run("base", point)
        with open(run / "stats" / "nvtx_sum.csv", newline="") as f:
            stats = {s["Range"]: s for s in csv.DictReader(f)}
        df = store.query("nvtx-summary", run=run.name, limit=0)
        assert set(df["range"]) == set(stats)
        for row in df.iter_rows(named=True):
            assert row["instances"] == int(stats[row["range"]]["Instances"])
            assert row["total_ns"] == int(stats[row["range"]]["Total Time (ns)"])


def test_the_sweep_taken_again_is_unchanged_in_every_scope(store):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (one command, one setup: nothing to warn of)
        df = store.diff(_manifest("base")["sweep"], _manifest("again")["sweep"])
    assert {k.split(": ", 1)[0] for k in df["key"]} == POINTS
    assert set(df["scope"]) == {"sweep", "kernel", "nvtx", "api", "memcpy", "gpu"}
    assert set(df["verdict"]) <= {"unchanged", "not judged"}


def test_the_reference_backend_regresses_every_point_where_it_should(store):
    with pytest.warns(CaptureWarning, match=r"differ in setup: .*TRACEKIT_KERNELS_BACKEND auto -> reference"):
        df = store.diff(_manifest("base")["sweep"], _manifest("reference")["sweep"])

    def at(scope: str, metric: str, key: str) -> pl.DataFrame:
        return df.filter((pl.col("scope") == scope) & (pl.col("metric") == metric)
                         & pl.col("key").str.ends_with(key))

    # the Triton (Gluon on sm_90) attention kernel gone at every point, PyTorch's ops in its place
    gone = at("kernel", "total_ns", ": _hstu_cached_gl_kernel")
    assert {k.split(": ", 1)[0] for k in gone["key"]} == POINTS and set(gone["verdict"]) == {"removed"}
    # each layer's attention range: its kernels' time regressed at every point, and so the request
    for layer in range(3):
        attention = at("nvtx", "kernel_total_ns", f"hstu.request/hstu.layer{layer}/hstu_attention")
        assert len(attention) == 4 and set(attention["verdict"]) == {"regressed"}
    for scope, metric, key in (("nvtx", "kernel_total_ns", ": hstu.request"), ("gpu", "busy_ns", ": device 0")):
        rows = at(scope, metric, key)
        assert len(rows) == 4 and set(rows["verdict"]) == {"regressed"}, rows
    latency = df.filter((pl.col("scope") == "sweep") & (pl.col("metric") == "latency_med_ms"))
    assert set(latency["key"]) == POINTS and set(latency["verdict"]) == {"regressed"}
    # each key read with its point first, the kernels told apart within their point: one kernel
    # reads alike at every point (before, some lost their point, told apart as whole keys), and in
    # what moved, each kernel named at its point
    from tracekit.diff import POINT_KEY, moved, short_keys

    for width in (60, 40):
        labels = short_keys(df, width)
        assert len(set(labels.values())) == len(labels)
        by_rest: dict[str, set[str]] = {}
        for key, label in labels.items():
            if point := POINT_KEY.fullmatch(key):
                assert label.startswith(point[1] + ": "), (key, label)
                by_rest.setdefault(point[2], set()).add(label.split(": ", 1)[1])
        assert all(len(rest) == 1 for rest in by_rest.values()), [r for r in by_rest.values() if len(r) > 1]
    (kernels,) = [line for line in moved(df) if line.startswith("Kernel time")]
    *named, more = kernels.split(" in all: ", 1)[1].split("; ")
    assert len(named) == 3 and all(n.split(": ", 1)[0] in POINTS for n in named), kernels
    judged = df.filter((pl.col("scope") == "kernel") & (pl.col("verdict") != "unchanged"))["key"].n_unique()
    assert more == f"and {judged - 3} more", kernels


@pytest.mark.parametrize("query", ["sweep-kernels", "sweep-points"])
def test_a_sweep_without_nsys_asked_of_its_kernels_names_the_query_that_reads_it(tmp_path, query):
    """The HSTU sweep taken under --tool none (its requests' latency alone) ingested after one under
    nsys: the kernel queries of the latest sweep say where its numbers are, and the sweep they read."""
    from tracekit.errors import QueryError

    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in sorted((SWEEPS / "base" / "runs").iterdir()):
            tk.ingest(run)
        for run in sorted((DATA / "hstu_sweep" / "runs").iterdir()):
            tk.ingest(run)
        none = json.loads((DATA / "hstu_sweep" / "runs" / sorted(
            p.name for p in (DATA / "hstu_sweep" / "runs").iterdir())[0] / "meta.json").read_text())["params"]["sweep"]
        with pytest.raises(QueryError) as err:
            tk.query(query)
        assert str(err.value) == (
            f"{query}: sweep {none} (the latest) was captured under none, not nsys: tracekit query sweep-latency "
            f"-p sweep={none}; the latest sweep under nsys: tracekit query {query} -p sweep={_manifest('base')['sweep']}")
        assert len(tk.query(query, sweep=_manifest("base")["sweep"])) > 0


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 139.8 GiB total)"


def _with_points(tmp_path: Path, statuses: dict[int, str], sweep_status: str = "partial") -> Path:
    """A copy of the base sweep as `tracekit sweep` leaves it where its points ``statuses``
    did not end ok: a failed capture (out of GPU memory) keeps its run folder's meta.json and
    log, the manifest says so; an interrupted or never-run point has no run folder."""
    import shutil

    out = tmp_path / "base"
    shutil.copytree(SWEEPS / "base", out)
    manifest = _manifest("base")
    for i, status in statuses.items():
        p = manifest["points"][i]
        run = out / "runs" / Path(p["run_dir"]).name
        p["status"] = status
        if status == "failed":
            p["error"] = f"capture failed ({OOM.split(' Tried')[0]}); the run folder {run} says so"
            meta = json.loads((run / "meta.json").read_text())
            meta["status"], meta["error"] = "failed", OOM
            (run / "meta.json").write_text(json.dumps(meta))
            for f in [f for f in run.rglob("*") if f.is_file() and f.name not in ("meta.json", "capture.log")]:
                f.unlink()
        else:
            p["run_dir"], p["error"] = None, "interrupted by the user" if status == "interrupted" else None
            shutil.rmtree(run)
    manifest["status"] = sweep_status
    (out / f"{manifest['sweep']}.json").write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize("query", ["sweep-points", "sweep-latency", "sweep-kernels", "sweep-requests"])
def test_a_point_whose_capture_failed_is_said_by_each_query_of_its_sweep(tmp_path, query):
    """The point bs=4,nc=512 ran out of GPU memory: nothing of it is in the store, and each query of
    the sweep says which point it lacks and why (its manifest and run folder say), not one row fewer
    without a word; the whole sweep's queries say nothing."""
    from tracekit.ingest import run_folders

    sweep = _manifest("base")["sweep"]
    copy = _with_points(tmp_path, {3: "failed"})
    with pytest.warns(CaptureWarning, match="bs4-nc512-nsys: not ingested: the capture's status is 'failed'"):
        runs = run_folders([copy])  # (the failed point's folder: nothing to ingest)
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in runs:
            tk.ingest(run)
        every = {} if query == "sweep-points" else {"limit": 0}
        with pytest.warns(CaptureWarning) as seen:
            df = tk.query(query, sweep=sweep, **every)
    assert [str(w.message) for w in seen] == [
        f"sweep {sweep}: 1 of its 4 points has no ok run in the store, so no row: bs=4,nc=512: its capture failed ({OOM})"]
    shown = set(df["point"]) if "point" in df.columns else {f"bs={r['bs']},nc={r['nc']}" for r in df.iter_rows(named=True)}
    assert shown == POINTS - {"bs=4,nc=512"}
    with tracekit.open(tmp_path / "whole.duckdb") as tk:
        for run in run_folders([SWEEPS / "base"]):
            tk.ingest(run)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tk.query(query, sweep=sweep)


def test_points_interrupted_never_run_or_not_ingested_are_said_and_once_on_the_command_line(tmp_path):
    """A sweep stopped at its third point (interrupted; the fourth never ran) whose second point's
    run was not ingested: one line says each, with the folder to ingest; a report, which asks
    several queries of the sweep, says it once; `tracekit sweep`'s own table does not say it again."""
    from tracekit.capture.cli import grid_table
    from typer.testing import CliRunner

    from tracekit.cli import app
    from tracekit.ingest import run_folders

    sweep = _manifest("base")["sweep"]
    copy = _with_points(tmp_path, {2: "interrupted", 3: "not_run"})
    runs = run_folders([copy])
    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(runs[0])
    said = (f"tracekit: warning: sweep {sweep}: 3 of its 4 points have no ok run in the store, so no row: "
            f"bs=1,nc=512: not ingested (tracekit ingest {runs[1]}); bs=4,nc=128: its capture was interrupted; "
            "bs=4,nc=512: never ran (the sweep stopped before)")
    res = CliRunner().invoke(app, ["--db", str(db), "query", "sweep-points", "-p", f"sweep={sweep}"])
    assert res.exit_code == 0, res.output
    assert said in res.stderr.splitlines()
    res = CliRunner().invoke(app, ["--db", str(db), "report", "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines().count(said) == 1, res.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "bs=1,nc=128" in grid_table(db, sweep, "nsys")


def test_a_point_a_running_sweep_has_not_reached_is_said_not_run_yet(tmp_path):
    """Asked while the sweep runs (its points land as they finish): its last point is not run
    yet, not one the sweep stopped before."""
    from tracekit.ingest import run_folders

    sweep = _manifest("base")["sweep"]
    copy = _with_points(tmp_path, {3: "not_run"}, sweep_status="running")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in run_folders([copy]):
            tk.ingest(run)
        with pytest.warns(CaptureWarning) as seen:
            tk.query("sweep-points", sweep=sweep)
    assert [str(w.message) for w in seen] == [
        f"sweep {sweep}: 1 of its 4 points has no ok run in the store, so no row: bs=4,nc=512: not run yet (the "
        "sweep's manifest says it is running)"]


def test_a_point_that_failed_in_the_base_sweep_is_said_in_the_diff(tmp_path):
    """The base sweep's capture at bs=4,nc=512 ran out of memory and the reference sweep's ran:
    the point's latency reads improved with the base's error (its manifest says it), and the
    other scopes say the point failed and compare the three points both have."""
    from tracekit.ingest import run_folders

    copy = _with_points(tmp_path, {3: "failed"})
    with pytest.warns(CaptureWarning, match="bs4-nc512-nsys: not ingested: the capture's status is 'failed'"):
        runs = run_folders([copy, SWEEPS / "reference"])
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in runs:
            tk.ingest(run)
        with pytest.warns(CaptureWarning) as seen:
            df = tk.diff(_manifest("base")["sweep"], _manifest("reference")["sweep"])
    assert f"diff: base sweep {_manifest('base')['sweep']}'s capture of bs=4,nc=512 failed ({OOM}): compared at " \
           "the points both have" in [str(w.message) for w in seen]
    point = df.filter((pl.col("scope") == "sweep") & (pl.col("key") == "bs=4,nc=512")
                      & pl.col("metric").str.starts_with("latency"))
    assert len(point) == 2 and set(point["verdict"]) == {"improved"}
    assert set(point["note"]) == {f"the base sweep's capture of this point failed: {OOM}"}
    assert {k.split(": ", 1)[0] for k in df.filter(pl.col("scope") != "sweep")["key"]} == POINTS - {"bs=4,nc=512"}
