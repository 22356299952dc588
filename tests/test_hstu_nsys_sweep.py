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
    manifest = _manifest(which)
    df = store.query("sweep-points", sweep=manifest["sweep"])
    assert df["point"].to_list() == [f"bs={p['bs']},nc={p['nc']}" for p in manifest["points"]]
    for row, point in zip(df.iter_rows(named=True), manifest["points"], strict=True):
        with open(_run(which, point) / "stats" / "cuda_gpu_kern_sum.csv", newline="") as f:
            stats = list(csv.DictReader(f))
        assert row["kernels"] == len(stats)
        assert row["launches"] == sum(int(s["Instances"]) for s in stats)
        assert row["kernel_total_ns"] == sum(int(s["Total Time (ns)"]) for s in stats)
        assert row["top_kernel"] == max(stats, key=lambda s: int(s["Total Time (ns)"]))["Name"]


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
