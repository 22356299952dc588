"""Sweeps: bookkeeping, failures, interruption, configs; the sweep queries and export."""

import csv
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import DATA
from tracekit.capture import sweep as sw
from tracekit.capture.export import export_sweep

from tracekit.errors import CaptureError, Interrupted

pytestmark = pytest.mark.usefixtures("reference_kernels")


class FakeRunner:
    """Stands in for capture(): records calls, fails or interrupts at chosen points."""

    def __init__(self, tmp_path, fail=(), interrupt=None):
        self.calls, self.fail, self.interrupt, self.tmp = [], set(fail), interrupt, tmp_path

    def __call__(self, bs, nc, **kw):
        self.calls.append((bs, nc, kw))
        if (bs, nc) == self.interrupt:
            raise KeyboardInterrupt
        d = self.tmp / f"run-{bs}-{nc}"
        if (bs, nc) in self.fail:
            raise CaptureError(f"capture failed (workload exited with status 1: boom); partial results in {d}", d)
        return d


def _manifest(result):
    return json.loads(result.manifest.read_text())


def test_sweep_runs_every_point_and_records_failures(tmp_path):
    runner = FakeRunner(tmp_path, fail={(2, 256)})
    res = sw.sweep("1,2", "128,256", tool="none", preset="small", warmup_ms=0, iters=2,
                   out_dir=tmp_path / "runs", progress=False, runner=runner)
    assert [(b, n) for b, n, _ in runner.calls] == [(1, 128), (1, 256), (2, 128), (2, 256)]
    kw = runner.calls[0][2]
    assert kw["tool"] == "none" and kw["preset"] == "small" and kw["iters"] == 2
    assert kw["extra_params"] == {"sweep": res.sweep_id, "sweep_point": 0}
    assert [p.status for p in res.points] == ["ok", "ok", "ok", "failed"]
    assert res.points[3].run_dir == str(tmp_path / "run-2-256")
    m = _manifest(res)
    assert m["status"] == "partial" and m["finished_at"]
    assert m["settings"]["grid"] == {"bs": [1, 2], "nc": [128, 256]}
    assert [p["status"] for p in m["points"]] == ["ok", "ok", "ok", "failed"]
    assert "boom" in m["points"][3]["error"]


def test_sweep_survives_unexpected_crash(tmp_path):
    calls = []

    def runner(bs, nc, **kw):
        calls.append(bs)
        if bs == 1:
            raise RuntimeError("CUDA error: out of memory\nmore")
        return tmp_path

    res = sw.sweep([1, 2], [8], preset="small", out_dir=tmp_path, progress=False, runner=runner)
    assert calls == [1, 2]
    assert res.points[0].error == "RuntimeError: CUDA error: out of memory"
    assert _manifest(res)["status"] == "partial"


def test_interrupted_sweep_keeps_and_labels_points(tmp_path):
    runner = FakeRunner(tmp_path, interrupt=(2, 128))
    with pytest.raises(Interrupted, match=r"^sweep interrupted at bs=2 nc=128 after 2 of 4 points; their runs are "
                                          r"kept and ingested; manifest ") as err:
        sw.sweep("1,2", "128,256", preset="small", out_dir=tmp_path / "runs", progress=False,
                 runner=runner)
    assert "\n" not in str(err.value)
    (manifest,) = (tmp_path / "runs").glob("sweep-*.json")
    m = json.loads(manifest.read_text())
    assert m["status"] == "interrupted"
    assert [p["status"] for p in m["points"]] == ["ok", "ok", "interrupted", "not_run"]


@pytest.mark.parametrize("bs, nc, match", [
    ("1,0", "128", r"--bs '1,0': 0 must be a positive integer"),
    ("1", "128,-1", r"--nc '128,-1': -1 must be"),
    ("1,a", "128", r"'a' is not an integer"),
    ("", "128", r"is not an integer"),
    ("1,2,1", "128", r"^--bs '1,2,1': 1 twice; give each value once$"),  # (a typo, not a point captured twice)
    ("1", "128,0128", r"^--nc '128,0128': 128 twice"),
    ("1", "128", r"^--tool '': unknown profiler; choose one of"),  # (not the default profiler)
])
def test_bad_grid_rejected_before_any_point(tmp_path, bs, nc, match):
    runner = FakeRunner(tmp_path)
    tool = "" if "--tool" in match else None
    with pytest.raises(CaptureError, match=match):
        sw.sweep(bs, nc, tool=tool, preset="small", out_dir=tmp_path / "runs", progress=False, runner=runner)
    assert runner.calls == [] and not (tmp_path / "runs").exists()


def test_sweep_with_missing_profiler_fails_once(tmp_path, monkeypatch):
    from tracekit.capture import profilers

    from tracekit.errors import ToolNotFoundError

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("TRACEKIT_NCU", raising=False)
    monkeypatch.setitem(profilers.KNOWN_LOCATIONS, "ncu", ())
    runner = FakeRunner(tmp_path)
    with pytest.raises(ToolNotFoundError, match="ncu not found"):
        sw.sweep("1", "8", tool="ncu", preset="small", out_dir=tmp_path / "runs", progress=False,
                 runner=runner)
    assert runner.calls == []


def test_configs_presets_yaml_and_errors(tmp_path):
    quick = sw.load_config("quick")
    assert quick["grid"] == {"bs": [1, 8], "nc": [128, 1024]}
    full = sw.load_config("full")
    assert full["grid"] == {"bs": [1, 2, 4, 8], "nc": [128, 256, 512, 1024]}
    y = tmp_path / "s.yaml"
    y.write_text("tool: none\npreset: small\niters: 3\nwarmup_ms: 0\ngrid:\n  bs: [1, 2]\n  nc: '16,32'\n")
    runner = FakeRunner(tmp_path)
    res = sw.sweep(config=y, out_dir=tmp_path / "runs", progress=False, runner=runner, iters=5)
    assert [(p.bs, p.nc) for p in res.points] == [(1, 16), (1, 32), (2, 16), (2, 32)]
    assert runner.calls[0][2]["iters"] == 5  # explicit argument beats the config
    assert runner.calls[0][2]["preset"] == "small"
    bad = tmp_path / "bad.yaml"
    bad.write_text("grid: {bs: [1]}\n")
    with pytest.raises(CaptureError, match="'grid' must give the lists 'bs' and 'nc'"):
        sw.load_config(bad)
    bad.write_text("grid: {bs: [1], nc: [2]}\ncolour: red\n")
    with pytest.raises(CaptureError, match="unknown key.*colour"):
        sw.load_config(bad)
    bad.write_text("grid: [1\n")
    with pytest.raises(CaptureError, match="invalid YAML"):
        sw.load_config(bad)
    toml = tmp_path / "s.toml"  # (YAML reads TOML as one plain value)
    toml.write_text('tool = "none"\n[grid]\nbs = [1, 2]\nnc = [8]\n')
    with pytest.raises(CaptureError, match=r"s\.toml: a sweep config is YAML, a mapping with a 'grid' .*; this file "
                                           "reads as a single value$"):
        sw.load_config(toml)
    bad.write_text("- 1\n")
    with pytest.raises(CaptureError, match="reads as a list$"):
        sw.load_config(bad)
    # a key given twice (YAML requires unique keys; PyYAML kept the last one silently)
    for text, said in (("iters: 5\niters: 0\ngrid: {bs: [1], nc: [2]}\n", "key 'iters' given twice, on lines 1 and 2"),
                       ("grid: {bs: [1], nc: [2], bs: [4]}\n", "key 'bs' given twice, on line 1;"),
                       ("grid: " + "[" * 100_000 + "]" * 100_000 + "\n", "lists or mappings nested too deeply")):
        bad.write_text(text)
        with pytest.raises(CaptureError, match=f"^{re.escape(str(bad))}: invalid YAML \\({re.escape(said)}"):
            sw.load_config(bad)
    bad.write_text("workload:\n  <<: {num_layers: 2}\n  num_layers: 3\ngrid: {bs: [1], nc: [2]}\n")
    assert sw.load_config(bad)["workload"] == {"num_layers": 3}  # (a merge's key overridden: not twice)
    with pytest.raises(CaptureError, match="missing.yaml: no such file; give a sweep config"):
        sw.load_config(tmp_path / "missing.yaml")
    with pytest.raises(CaptureError, match=r": a folder; give a sweep config \(a YAML file\) or a preset"):
        sw.load_config(tmp_path)
    # (a program's grid without its command: told what a program's sweep gives)
    bad.write_text("grid: {m: [1024, 4096], dtype: [fp16]}\n")
    with pytest.raises(CaptureError, match=r"'grid' must give the lists 'bs' and 'nc' of the HSTU workload \(it names "
                                           r"m, dtype: a sweep of a program of yours gives its 'command' too, e\.g\. command: python "
                                           r"bench\.py --m \{m\}\)"):
        sw.load_config(bad)


def test_real_sweep_two_points(tmp_path):
    tiny = dict(max_history_items=40, num_items=2048, num_layers=1, d_model=64, num_heads=2,
                head_dim=32, scoring_hidden=32)
    res = sw.sweep("1", "4,8", tool="none", preset="small", warmup_ms=0, iters=2,
                   out_dir=tmp_path / "runs", workload=tiny, ingest=False, progress=False)
    assert [p.status for p in res.points] == ["ok", "ok"]
    for p in res.points:
        meta = json.loads((tmp_path / "runs" / p.run_dir.split("/")[-1] / "meta.json").read_text())
        assert meta["params"]["sweep"] == res.sweep_id and meta["status"] == "ok"
    assert _manifest(res)["status"] == "ok"


# -- queries and export over a store filled by hand ---------------------------------------

def _store(tmp_path):
    import tracekit

    tk = tracekit.open(tmp_path / "q.duckdb")
    rng = np.random.default_rng(0)
    lat = {}
    run_id = 0

    def add_run(bs, nc, tool="none", status="ok", n=9, preset="large"):
        nonlocal run_id
        run_id += 1
        params = {"bs": bs, "nc": nc, "preset": preset, "tool": tool}
        kind = "nsys,timing" if tool == "nsys" else "timing"  # as a run folder with an nsys export ingests
        tk.con.execute("INSERT INTO runs (run_id, name, kind, params, meta) VALUES (?, ?, ?, ?, ?)",
                       [run_id, f"r{run_id}-bs{bs}-nc{nc}-{tool}", kind, json.dumps(params),
                        json.dumps({"status": status})])
        xs = rng.uniform(1, 20, n).round(3)
        for i, x in enumerate(xs):
            tk.con.execute("INSERT INTO requests VALUES (?, ?, 'timed', ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
                           [run_id, i + 2, bs, nc, bs, nc, float(x), 100.0 + i, 200.0])
        tk.con.execute("INSERT INTO requests VALUES (?, 0, 'warmup', ?, ?, 0, ?, 999.0, NULL, NULL, NULL, NULL)",
                       [run_id, bs, nc, nc])
        if status == "ok":
            lat[(preset, tool, bs, nc)] = xs
        return run_id

    add_run(1, 128)
    stale = add_run(8, 128)
    del stale
    add_run(8, 128)  # a newer run of the same point replaces the older one
    add_run(8, 1024)
    add_run(8, 1024, status="failed")  # failed runs never count
    nsys = add_run(8, 1024, tool="nsys", n=4)
    for name, durs in (("gemm_a", [500, 700]), ("hstu_attn", [300]), ("FillFunctor<signed char>", [9000])):
        for j, dur in enumerate(durs):
            tk.con.execute("INSERT OR IGNORE INTO _strings SELECT coalesce(max(string_id), 0) + 1, ? FROM _strings",
                           [name])
            tk.con.execute("INSERT INTO _kernels (run_id, start_ns, end_ns, name_id, short_name_id) "
                           "SELECT ?, ?, ?, string_id, string_id FROM _strings WHERE value = ?",
                           [nsys, j * 10_000, j * 10_000 + dur, name])
    return tk, lat


def test_sweep_latency_query(tmp_path):
    tk, lat = _store(tmp_path)
    df = tk.query("sweep-latency", limit=0)
    assert df.columns == ["preset", "tool", "bs", "nc", "run", "requests", "median_ms", "p95_ms",
                          "p99_ms", "mean_ms", "min_ms", "max_ms", "peak_mem_allocated_mb", "std_ms",
                          "peak_mem_reserved_mb", "users_per_s", "candidates_per_s", "sm_clock_mhz",
                          "sm_clock_min_mhz", "temp_max_c", "slowdown", "model_gflop", "model_tflops_per_s",
                          "attention_flop_pct", "attention_tflops_per_s"]
    keys = list(zip(df["tool"], df["bs"], df["nc"], strict=True))
    assert keys == [("none", 1, 128), ("none", 8, 128), ("none", 8, 1024), ("nsys", 8, 1024)]
    assert df["run"].to_list()[1].startswith("r3-")  # the newer of the two runs
    assert df["requests"].to_list() == [9, 9, 9, 4]
    for row in df.iter_rows(named=True):
        xs = lat[(row["preset"], row["tool"], row["bs"], row["nc"])]
        assert row["median_ms"] == pytest.approx(np.percentile(xs, 50))
        assert row["p95_ms"] == pytest.approx(np.percentile(xs, 95))
        assert row["p99_ms"] == pytest.approx(np.percentile(xs, 99))
        assert row["max_ms"] == pytest.approx(xs.max())  # warm-up (999 ms) excluded
        assert row["std_ms"] == pytest.approx(np.std(xs, ddof=1))
        assert row["users_per_s"] == pytest.approx(row["bs"] * 1000 / xs.mean())
        assert row["candidates_per_s"] == pytest.approx(row["bs"] * row["nc"] * 1000 / xs.mean())
    assert df["peak_mem_allocated_mb"][0] == 108.0
    assert tk.query("sweep-latency", limit=2).height == 2


def test_sweep_kernels_query(tmp_path):
    tk, _ = _store(tmp_path)
    df = tk.query("sweep-kernels", limit=0)
    assert df["name"].to_list() == ["gemm_a", "hstu_attn"]  # the L2 flush is left out
    assert df["rank"].to_list() == [1, 2]
    assert df["instances"].to_list() == [2, 1] and df["total_ns"].to_list() == [1200, 300]
    assert df["per_request_us"].to_list() == pytest.approx([1200 / 4 / 1000, 300 / 4 / 1000])
    assert df["time_pct"].to_list() == [80.0, 20.0]
    assert df["point"].to_list() == ["bs=8,nc=1024"] * 2
    assert tk.query("sweep-kernels", limit=1)["name"].to_list() == ["gemm_a"]


def test_export_sweep_xlsx_and_csv(tmp_path):
    from openpyxl import load_workbook

    tk, lat = _store(tmp_path)
    (out,) = export_sweep(tk, tmp_path / "results.xlsx")
    wb = load_workbook(out)
    assert wb.sheetnames == ["summary", "grid", "chart", "results", "bs1", "bs8", "nc128", "nc1024"]
    rows = list(wb["results"].values)
    assert rows[0] == ("run", "preset", "tool", "bs", "nc", "request_idx", "kv_caches", "candidate_embeddings",
                       "latency_ms", "model_flop", "attention_flop", "model_tflops_per_s")
    assert len(rows) - 1 == 9 * 3 + 4  # timed requests of the four points
    bs1 = list(wb["bs1"].values)[1:]
    assert {r[3] for r in bs1} == {1} and len(bs1) == 9
    assert sorted(r[8] for r in bs1) == pytest.approx(sorted(lat[("large", "none", 1, 128)]))
    nc1024 = list(wb["nc1024"].values)[1:]
    assert {r[4] for r in nc1024} == {1024} and len(nc1024) == 13
    assert len(list(wb["summary"].values)) == 5
    # a grid and a chart per (preset, tool): the nsys point is not mixed into the none grid
    g = wb["grid"]
    titles = [r[0] for r in g.iter_rows(values_only=True) if isinstance(r[0], str) and r[0].startswith("median")]
    assert titles == ["median latency, ms: preset large, tool none (rows bs, columns nc)",
                      "median latency, ms: preset large, tool nsys (rows bs, columns nc)"]
    assert [c.value for c in g[2]][:3] == ["bs \\ nc", 128, 1024]
    assert g["B3"].value == pytest.approx(np.percentile(lat[("large", "none", 1, 128)], 50))
    assert g["C3"].value is None  # no bs=1, nc=1024 point: an empty cell
    assert [len(c.series) for c in wb["chart"]._charts] == [2, 1]
    csv_files = export_sweep(tk, tmp_path / "results.csv")
    assert [p.name for p in csv_files] == ["results.csv", "results-summary.csv"]
    assert csv_files[0].read_text().splitlines()[0].startswith("run,preset,tool,bs,nc,")
    with pytest.raises(Exception, match=r"writes \.xlsx or \.csv, not \.txt$"):
        export_sweep(tk, tmp_path / "results.txt")
    with pytest.raises(Exception, match=r"writes \.xlsx or \.csv, and the name has no suffix to say which$"):
        export_sweep(tk, tmp_path / "results")


def test_export_sweep_writes_the_sweep_asked(tmp_path, capsys):
    """Two sweeps of one grid (tests/data/sweep_pair, c ingested before b): `export sweep`
    writes the latest sweep's points by default, another's with --sweep, never a mix; a
    --sweep of neither is an error naming the option."""
    from tracekit.cli import main

    data = Path(__file__).parent / "data" / "sweep_pair"
    db = str(tmp_path / "s.duckdb")
    assert main(["--db", db, "ingest", str(data / "c"), str(data / "b")]) == 0

    def runs(*args):
        out = tmp_path / "x.csv"
        assert main(["--db", db, "export", "sweep", "-o", str(out), *args]) == 0
        return {line.split(",")[0] for line in out.read_text().splitlines()[1:]}

    def folders(sweep):
        return {p.name for p in (data / sweep / "runs").iterdir()}

    assert runs() == folders("b")
    assert runs("--sweep", "1") == runs("--sweep", "sweep-20261124T195459.720Z") == folders("c")
    out = tmp_path / "y.csv"
    assert main(["--db", db, "export", "sweep", "-o", str(out), "--sweep", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracekit: error: --sweep nosuch: no sweep or run 'nosuch'") and len(err.splitlines()) == 1
    assert not out.exists()
    (tmp_path / "folder").mkdir()  # (a folder without a suffix is said to be a folder, not a name without one)
    assert main(["--db", db, "export", "sweep", "-o", str(tmp_path / "folder")]) == 2
    assert capsys.readouterr().err == f"tracekit: error: {tmp_path / 'folder'}: is a folder; name a file\n"


def test_export_sweep_writes_any_preset_name_a_sheet_can_hold(tmp_path):
    """A preset that holds a control character (anyone's meta.json) is escaped in the grid's
    title and the chart's, as in every cell: the workbook is written, and opens."""
    import shutil

    from openpyxl import load_workbook

    from tracekit.cli import main

    sweep = tmp_path / "a"
    shutil.copytree(Path(__file__).parent / "data" / "sweep_pair" / "a", sweep)
    for meta in sweep.glob("runs/*/meta.json"):
        d = json.loads(meta.read_text())
        d["params"]["preset"] = "medium\x1b"
        meta.write_text(json.dumps(d))
    db, out = str(tmp_path / "s.duckdb"), tmp_path / "r.xlsx"
    assert main(["--db", db, "ingest", str(sweep)]) == 0
    assert main(["--db", db, "export", "sweep", "-o", str(out)]) == 0
    wb = load_workbook(out)
    assert wb["grid"]["A1"].value == "median latency, ms: preset medium\\x1b, tool none (rows bs, columns nc)"
    assert wb["summary"]["A2"].value == "medium\\x1b"


def test_export_of_a_store_without_a_sweep_is_an_error(tmp_path, small_store):
    """A store without a timing run (none at all, or only nsys and ncu runs) has no sweep
    to export: an error naming what is missing, and no file (not a sheet of headers)."""
    import tracekit
    from tracekit.errors import QueryError

    for db in (tmp_path / "empty.duckdb", small_store):
        tk = tracekit.open(db)
        with pytest.raises(QueryError, match="^export sweep: no timing run in .*; export sweep needs a timing run"):
            export_sweep(tk, tmp_path / "e.xlsx")
        tk.close()
        assert not (tmp_path / "e.xlsx").exists()


def test_the_model_throughput_of_each_point_is_its_requests_work_over_their_time(tmp_path):
    """A real H200 sweep whose requests counted their work (tests/data/hstu_sweep_flops):
    sweep-latency's model_gflop, model_tflops_per_s and attention_flop_pct, and sweep-requests'
    per-request columns, are those of requests.csv's timed rows; a capture from before tracekit
    counted them (hstu_headroom's) has NULL there."""
    import statistics

    import tracekit

    flops = DATA / "hstu_sweep_flops"
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in sorted(p for p in flops.iterdir() if p.is_dir()):
            tk.ingest(run)
        got = {(r["bs"], r["nc"]): r for r in tk.query("sweep-latency", limit=0).to_dicts()}
        per_request = tk.query("sweep-requests", limit=0)
        assert len(got) == 4
        for run in sorted(p for p in flops.iterdir() if p.is_dir()):
            with open(run / "requests.csv", newline="") as f:
                timed = [r for r in csv.DictReader(f) if r["phase"] == "timed"]
            r = got[(int(timed[0]["bs"]), int(timed[0]["nc"]))]
            work = [int(t["model_flop"]) for t in timed]
            assert r["model_gflop"] == pytest.approx(statistics.median(work) / 1e9, rel=1e-12)
            assert r["model_tflops_per_s"] == pytest.approx(
                sum(work) / sum(float(t["latency_ms"]) for t in timed) / 1e9, rel=1e-12)
            assert r["attention_flop_pct"] == pytest.approx(
                100 * sum(int(t["attention_flop"]) for t in timed) / sum(work), rel=1e-12)
            mine = per_request.filter(pl.col("run") == run.name)
            assert mine["model_flop"].to_list() == work
            assert mine["model_tflops_per_s"].to_list() == pytest.approx(
                [int(t["model_flop"]) / float(t["latency_ms"]) / 1e9 for t in timed], rel=1e-12)
        assert 150 < got[(8, 1024)]["model_tflops_per_s"] < 300 and got[(1, 128)]["model_tflops_per_s"] < 10
        tk.ingest(DATA / "hstu_headroom" / "nsys")
        old = tk.query("sweep-latency", sweep="all", limit=0).filter(pl.col("tool") == "nsys")
        assert old.height == 1 and old["model_gflop"].null_count() == 1 and old["model_tflops_per_s"].null_count() == 1


def test_the_attention_kernels_throughput_of_an_nsys_point_is_its_work_over_nsys_time(tmp_path):
    """Under nsys (tests/data/hstu_nsys_sweep_flops), sweep-latency's attention_tflops_per_s is
    the timed requests' attention work (requests.csv) over the time NVIDIA's nsys stats -r
    nvtx_kern_sum gives the kernels inside hstu_attention ranges; a point timed without nsys
    (hstu_sweep_flops) has none."""
    import tracekit

    sweep = DATA / "hstu_nsys_sweep_flops"
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        for run in sorted(p for p in sweep.iterdir() if p.is_dir()):
            tk.ingest(run)
        got = {r["nc"]: r for r in tk.query("sweep-latency", limit=0).to_dicts()}
        for run in sorted(p for p in sweep.iterdir() if p.is_dir()):
            with open(run / "requests.csv", newline="") as f:
                timed = [r for r in csv.DictReader(f) if r["phase"] == "timed"]
            with open(run / "stats" / "nvtx_kern_sum.csv", newline="") as f:
                ns = sum(int(r["Total Time (ns)"]) for r in csv.DictReader(f) if r["NVTX Range"] == ":hstu_attention")
            r = got[int(timed[0]["nc"])]
            assert r["tool"] == "nsys" and ns > 0
            assert r["attention_tflops_per_s"] == pytest.approx(
                sum(int(t["attention_flop"]) for t in timed) / ns / 1e3, rel=1e-12)
        assert 100 < got[128]["attention_tflops_per_s"] < got[1024]["attention_tflops_per_s"] < 989
        for run in sorted(p for p in (DATA / "hstu_sweep_flops").iterdir() if p.is_dir()):
            tk.ingest(run)
        timed_only = tk.query("sweep-latency", limit=0)  # (the latest sweep: tool none)
        assert set(timed_only["tool"]) == {"none"} and timed_only["attention_tflops_per_s"].null_count() == 4


def test_a_table_shows_the_work_and_throughput_in_their_units(tmp_path, capsys):
    """sweep-latency's model_gflop is in GFLOP and model_tflops_per_s in TFLOP/s: the terminal
    table showed 1.70 kFLOP and 217 FLOP/s for bs 8, nc 1024 of tests/data/hstu_sweep_flops
    (1,699 GFLOP a request at 216.7 TFLOP/s); the report's cells scale them the same way."""
    from tracekit import report, table
    from tracekit.cli import main

    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "ingest", str(DATA / "hstu_sweep_flops")]) == 0
    capsys.readouterr()
    assert main(["--db", str(db), "query", "sweep-latency", "--columns", "bs,nc,model_gflop,model_tflops_per_s"]) == 0
    rows = {tuple(line.split()[:2]): line for line in capsys.readouterr().out.splitlines()[2:6]}
    assert rows[("8", "1024")].split()[2:] == ["1.70", "TFLOP", "217", "TFLOP/s"]
    assert rows[("1", "128")].split()[2:] == ["25.3", "GFLOP", "7.22", "TFLOP/s"]
    assert table.prefixed_scale("model_gflop", "flop") == 1e9 and table.prefixed_scale("attention_flop", "_flop") == 1
    assert table.prefixed_scale("sm_flops_per_s", "flops_per_s") == 1  # (no prefix letter: FLOP/s)
    cell = report._Column("model_tflops_per_s", pl.Series([216.72]))
    assert (cell.header, cell.fmt(216.72)) == ("model_tflops", "217 TFLOP/s")


def test_two_sweeps_begun_within_one_millisecond_into_one_folder_take_two_ids(tmp_path, monkeypatch):
    """The clock stopped at one millisecond: the second sweep into the same folder takes the
    next free millisecond (its own id and manifest), the first's manifest untouched; sweep ids
    keep their form (tracekit.names.SWEEP_ID)."""
    from datetime import UTC, datetime

    from tracekit.names import SWEEP_ID

    frozen = datetime(2026, 12, 4, 21, 0, 0, 123456, tzinfo=UTC)

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return frozen

    monkeypatch.setattr(sw, "datetime", Clock)
    out = tmp_path / "runs"
    first, second = (sw.sweep("1", "128", tool="none", preset="small", warmup_ms=0, iters=2, out_dir=out,
                              progress=False, runner=FakeRunner(tmp_path)) for _ in range(2))
    assert (first.sweep_id, second.sweep_id) == ("sweep-20261204T210000.123Z", "sweep-20261204T210000.124Z")
    assert all(SWEEP_ID.fullmatch(r.sweep_id) for r in (first, second))
    assert _manifest(first)["sweep"] == first.sweep_id and _manifest(second)["sweep"] == second.sweep_id
    assert sorted(p.name for p in out.glob("sweep-*.json")) == [f"{first.sweep_id}.json", f"{second.sweep_id}.json"]
    assert _manifest(first)["started_at"] == _manifest(second)["started_at"] == "2026-12-04T21:00:00.123+00:00"
