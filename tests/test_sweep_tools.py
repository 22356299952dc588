"""A sweep under several profilers (``tracekit sweep --tool none,nsys,ncu``): one sweep per
profiler, every profiler checked before the first point runs, and where tuning can save time at
each point from the nsys and ncu sweeps of one grid (real captures: tests/data/command_sweep's
nsys and ncu sweeps of one program's grid, taken on the H200)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from conftest import DATA, sweep_of_manifest
from tracekit.capture import runinfo
from tracekit.capture import sweep as sw

import tracekit
from tracekit.errors import CaptureError, Interrupted, ToolNotFoundError
from tracekit.ingest import run_folders

SWEEPS = DATA / "command_sweep"


def test_tools_are_one_or_several_comma_separated():
    assert sw.parse_tools(None) == [None] and sw.parse_tools("ncu") == ["ncu"]
    assert sw.parse_tools("none, nsys,ncu") == ["none", "nsys", "ncu"]
    with pytest.raises(CaptureError, match=r"--tool 'none,perf': 'perf' is not a profiler; give nsys, ncu, none"):
        sw.parse_tools("none,perf")
    with pytest.raises(CaptureError, match="nsys twice; each profiler sweeps the grid once"):
        sw.parse_tools("nsys,none,nsys")


def _fake_tool(folder: Path, name: str) -> Path:
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


def test_every_profiler_is_checked_before_the_first_sweep(tmp_path, monkeypatch):
    """A missing ncu (or no GPU for the workload) is said before the none and nsys sweeps run,
    not after them; with both found, each runs in the order given."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("TRACEKIT_NSYS", str(_fake_tool(tmp_path / "bin", "nsys")))
    monkeypatch.delenv("TRACEKIT_NCU", raising=False)
    monkeypatch.setitem(sw.profilers.KNOWN_LOCATIONS, "ncu", (str(tmp_path / "none/*/ncu"),))
    ran = []

    def run(tool):
        ran.append(tool)
        return sw.SweepResult(f"sweep-{tool}", tmp_path / f"{tool}.json", [], tool)

    with pytest.raises(ToolNotFoundError, match="ncu not found"):
        sw.sweep_each(["none", "nsys", "ncu"], run)
    assert ran == []
    monkeypatch.setenv("TRACEKIT_NCU", str(_fake_tool(tmp_path / "bin", "ncu")))
    monkeypatch.setattr(runinfo, "has_gpu", lambda: False)
    with pytest.raises(CaptureError, match="--tool nsys profiles the workload's GPU work and this machine has no GPU"):
        sw.sweep_each(["none", "nsys", "ncu"], run, gpu_device="auto")
    assert ran == []
    told = []
    results = sw.sweep_each(["none", "nsys", "ncu"], run, on_sweep=lambda r: told.append(r.sweep_id))
    assert ran == ["none", "nsys", "ncu"] and told == ["sweep-none", "sweep-nsys", "sweep-ncu"]
    assert [r.tool for r in results] == ran


def test_a_ctrl_c_says_which_sweeps_did_not_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_NSYS", str(_fake_tool(tmp_path / "bin", "nsys")))
    monkeypatch.setenv("TRACEKIT_NCU", str(_fake_tool(tmp_path / "bin", "ncu")))
    said = f"sweep interrupted at bs=1 nc=128 after 0 of 2 points; manifest {tmp_path}/m.json"

    def stopped_at(where):
        def run(tool):
            if tool == where:
                raise Interrupted(said)
            return sw.SweepResult(f"sweep-{tool}", tmp_path / f"{tool}.json", [], tool)
        return run

    with pytest.raises(Interrupted) as err:
        sw.sweep_each(["none", "nsys", "ncu"], stopped_at("none"))
    assert str(err.value) == f"{said}; not run: the nsys, ncu sweeps"
    with pytest.raises(Interrupted) as err:
        sw.sweep_each(["none", "nsys", "ncu"], stopped_at("ncu"))
    assert str(err.value) == said


def test_the_cli_refuses_a_bad_list_before_any_point(tmp_path, capsys):
    from tracekit.cli import main

    out = tmp_path / "runs"
    assert main(["sweep", "--bs", "1", "--nc", "4", "--tool", "none,nsys,nsys", "--preset", "small",
                 "--out", str(out), "--no-ingest"]) == 2
    assert capsys.readouterr().err == ("tracekit: error: --tool 'none,nsys,nsys': nsys twice; each profiler sweeps "
                                       "the grid once\n")
    assert not out.exists()


def _points(manifest: Path) -> sw.SweepResult:
    """The sweep of a committed manifest, its run folders where the fixture keeps them."""
    return sweep_of_manifest(manifest, manifest.parent / "runs")


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("sweep_tools") / "s.duckdb"
    with tracekit.open(db) as tk:
        for sub in ("base", "ncu"):
            for folder in sorted((SWEEPS / sub / "runs").iterdir()):
                tk.ingest(folder)
    return db


def test_each_point_of_the_nsys_sweep_says_where_tuning_can_save_time(both):
    """Each point's nsys run beside the ncu run of the same program and point (not another
    point's: m=4096 runs larger GEMMs), its headroom as kernel-headroom gives it."""
    nsys = _points(next((SWEEPS / "base").glob("sweep-*.json")))
    ncu = _points(next((SWEEPS / "ncu").glob("sweep-*.json")))
    lines = sw.headroom_by_point(both, nsys, ncu)
    assert lines[0].startswith("where tuning can save time at each point")
    with tracekit.open(both, read_only=True) as tk:
        runs = {r["source_path"]: r["run_id"] for r in tk.sql("SELECT run_id, source_path FROM runs").iter_rows(named=True)}
        grid = {r["run_id"]: r["point"] for r in tk.sql("SELECT run_id, grid_point(params) AS point FROM runs").iter_rows(named=True)}
        heads = [ln for ln in lines if ln.startswith("  ") and not ln.startswith("    ")]
        assert len(heads) == len(nsys.ok) == 4
        for point, head in zip(nsys.ok, heads, strict=True):
            run_id = runs[str(Path(point.run_dir).resolve())]
            ncu = int(head.split("ncu run ")[1].split(")")[0])
            assert head.startswith(f"  {point.label} (nsys run {run_id}, ncu run {ncu}): ")
            assert grid[ncu] == grid[run_id]  # the same point of the grid
            rows = tk.query("kernel-headroom", run=run_id, ncu=ncu, limit=0)
            share = 100 * rows["headroom_ns"].sum() / rows["total_ns"].sum()
            measured = rows.filter(rows["headroom_ns"].is_not_null()).height
            assert head.endswith(f": {share:.1f}% of its kernel time, {measured} of its {rows.height} kernels measured")
            body = lines[lines.index(head) + 1:][:3]
            top = rows.filter(rows["headroom_ns"].is_not_null()).head(3)
            assert top.height and [ln.split(maxsplit=3)[3] for ln in body[:top.height]] == [n[:90] for n in top["name"]]
            assert [ln.split()[:3] for ln in body[:top.height]] == [
                [f"{r['headroom_pct']:.1f}%", f"{r['sol_pct']:.1f}%", r["bottleneck"]] for r in top.iter_rows(named=True)]


def test_a_point_without_an_ncu_run_says_so(tmp_path):
    """A point whose ncu capture failed (or is not in the store) is said so, not paired with
    another ncu run of its workload from an earlier command."""
    db = tmp_path / "s.duckdb"
    with tracekit.open(db) as tk:
        for folder in sorted((SWEEPS / "base" / "runs").iterdir())[:2]:
            tk.ingest(folder)
        tk.ingest(sorted((SWEEPS / "ncu" / "runs").iterdir())[1])
    nsys = _points(next((SWEEPS / "base").glob("sweep-*.json")))
    ncu = _points(next((SWEEPS / "ncu").glob("sweep-*.json")))
    ncu.points[0].status = "failed"
    lines = sw.headroom_by_point(db, nsys, ncu)
    assert lines[1] == f"  {nsys.ok[0].label}: no ok run of it in the ncu sweep {ncu.sweep_id} in the store"
    assert lines[2].startswith(f"  {nsys.ok[1].label} (nsys run 2, ncu run 3): ")
    assert len([ln for ln in lines if not ln.startswith("    ")]) == 3  # (the other two points: not in the store)


HSTU = DATA / "hstu_sweep_tools" / "runs"


@pytest.fixture(scope="module")
def hstu(tmp_path_factory) -> tuple[Path, list[sw.SweepResult]]:
    """The store of `tracekit sweep --bs 1,8 --nc 128 --tool none,nsys,ncu` (H200), and its three
    sweeps in the order they ran, each from its manifest."""
    db = tmp_path_factory.mktemp("hstu_sweep_tools") / "s.duckdb"
    with tracekit.open(db) as tk:
        for folder in run_folders([HSTU]):
            tk.ingest(folder)
    return db, [sweep_of_manifest(manifest, HSTU) for manifest in sorted(HSTU.glob("sweep-*.json"))]


def test_the_workloads_three_sweeps_pair_point_by_point(hstu):
    """Every point of the nsys sweep beside the ncu sweep's run of the same bs and nc; the
    kernel time under nsys is NVIDIA's (nsys stats), and the cached attention kernel, latency-
    bound at bs 1, has most of the headroom at both batch sizes."""
    import csv

    db, (none, nsys, ncu) = hstu
    assert [r.tool for r in (none, nsys, ncu)] == ["none", "nsys", "ncu"]
    lines = sw.headroom_by_point(db, nsys, ncu)
    with tracekit.open(db, read_only=True) as tk:
        ids = {r["name"]: r["run_id"] for r in tk.sql("SELECT name, run_id FROM runs").iter_rows(named=True)}
        for i, point in enumerate(nsys.ok):
            run_id, ncu_id = ids[Path(point.run_dir).name], ids[Path(ncu.ok[i].run_dir).name]
            head = next(ln for ln in lines if ln.startswith(f"  {point.label} "))
            assert head.startswith(f"  bs={point.bs} nc={point.nc} (nsys run {run_id}, ncu run {ncu_id}): ")
            rows = tk.query("kernel-headroom", run=run_id, ncu=ncu_id, limit=0)
            with open(Path(point.run_dir) / "stats" / "cuda_gpu_kern_sum.csv", newline="") as f:
                nvidia = {r["Name"]: int(r["Total Time (ns)"]) for r in csv.DictReader(f)}
            assert dict(zip(rows["name"], rows["total_ns"], strict=True)) == nvidia
            top = rows.row(0, named=True)
            assert top["name"] == "_hstu_cached_gl_kernel" and top["profiled"] > 0
            assert lines[lines.index(head) + 1].split()[-1] == "_hstu_cached_gl_kernel"
        bs1, bs8 = (tk.query("kernel-headroom", run=ids[Path(p.run_dir).name], ncu=ids[Path(q.run_dir).name],
                             limit=1).row(0, named=True) for p, q in zip(nsys.ok, ncu.ok, strict=True))
    assert bs1["bottleneck"] == "latency" and bs1["sol_pct"] < bs8["sol_pct"]


def test_the_sweeps_table_has_every_sweeps_points_in_their_order(hstu):
    from tracekit.capture.cli import latency_table

    db, results = hstu
    table = latency_table(db, results, width=160).splitlines()
    body = [ln.split()[:4] for ln in table[2:8]]
    assert body == [["large", t, str(bs), "128"] for t in ("none", "nsys", "ncu") for bs in (1, 8)]
    assert table[8] == "6 rows"


@pytest.mark.parametrize("query", ["sweep-latency", "sweep-requests"])
def test_the_latency_of_a_sweep_under_ncu_says_whose_it_is(hstu, query, tmp_path, capsys):
    """After --tool none,nsys,ncu the latest sweep is the ncu one, whose requests took 3.5-4.1x
    their untraced time (ncu's replay): its latency comes with a warning naming the sweep timed
    untraced; the untraced and the nsys sweeps' come without one."""
    import warnings

    from tracekit.cli import main
    from tracekit.errors import CaptureWarning

    db, (none, nsys, ncu) = hstu
    with tracekit.open(db, read_only=True) as tk:
        with pytest.warns(CaptureWarning) as caught:
            under_ncu = tk.query("sweep-latency")
        assert [str(w.message) for w in caught] == [
            f"sweep {ncu.sweep_id} was captured under ncu, which serialises the launches and replays each kernel it "
            f"profiles: its requests' latency is mostly the profiler's; the latest sweep timed untraced: "
            f"{none.sweep_id}"]
        with warnings.catch_warnings():
            warnings.simplefilter("error", CaptureWarning)
            untraced = tk.query("sweep-latency", sweep=none.sweep_id)
            tk.query(query, sweep=nsys.sweep_id, limit=1)
    ratios = (under_ncu["median_ms"] / untraced["median_ms"]).to_list()
    assert set(under_ncu["tool"]) == {"ncu"} and all(3.4 < r < 4.2 for r in ratios), ratios
    assert main(["--db", str(db), "query", query, "--limit", "1"]) == 0
    err = capsys.readouterr().err
    assert err == (f"tracekit: warning: sweep {ncu.sweep_id} was captured under ncu, which serialises the launches "
                   "and replays each kernel it profiles: its requests' latency is mostly the profiler's; the latest "
                   f"sweep timed untraced: {none.sweep_id}\n")
    # the spreadsheet of both queries: the one line, as the query says it (it was Python's warning, twice)
    assert main(["--db", str(db), "export", "sweep", "-o", str(tmp_path / f"{query}.xlsx")]) == 0
    assert capsys.readouterr().err == err


def test_the_noise_between_repeats_of_an_ncu_sweep_says_no_warning_per_sweep(hstu):
    """repeat_spread reads each repeat's sweep-latency; under ncu that query warns (its latency is
    the profiler's), which the command's table says once in a line: not a warning per repeat."""
    import warnings

    from tracekit.errors import CaptureWarning

    db, (_, _, ncu) = hstu
    again = sw.SweepResult(ncu.sweep_id, ncu.manifest, ncu.points, "ncu", repeat_of=ncu.sweep_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        lines = sw.repeat_spread(db, [ncu, again])
    assert lines[1].startswith("  bs=1 nc=128 (ncu): 16.364, 16.364 ms: 0.0 %")


def test_a_programs_sweep_gives_each_profiler_its_own_options(tmp_path, monkeypatch, capsys):
    """--kernel-name goes to the ncu sweep and --gpu-metrics to the nsys one (each would refuse
    the other's); an option none of the profilers takes is refused before any sweep."""
    from tracekit.cli import main

    monkeypatch.setenv("TRACEKIT_NSYS", str(_fake_tool(tmp_path / "bin", "nsys")))
    monkeypatch.setenv("TRACEKIT_NCU", str(_fake_tool(tmp_path / "bin", "ncu")))
    calls = []

    def sweep_command(cmd, grid, tool, **kw):
        calls.append((tool, kw))
        return sw.SweepResult(f"sweep-{tool}", tmp_path / f"{tool}.json", [], tool)

    monkeypatch.setattr(sw, "sweep_command", sweep_command)
    args = ["sweep", "--grid", "m=1,2", "--kernel-name", "gemm", "--gpu-metrics", "--out", str(tmp_path / "runs"),
            "--no-ingest"]
    assert main([*args, "--tool", "nsys,ncu", "--", "prog", "{m}"]) == 0
    assert [t for t, _ in calls] == ["nsys", "ncu"]
    from tracekit.capture.command import own_options

    for tool, kw in calls:  # (each sweep leaves the other profiler's out: one_of_several)
        assert kw["one_of_several"] is True and (kw["kernel_regex"], kw["gpu_metrics"]) == ("gemm", True)
        mine = own_options(tool, kw)
        assert (mine["kernel_regex"], mine["gpu_metrics"]) == ((None, True) if tool == "nsys" else ("gemm", False))
    assert "sweep sweep-nsys (nsys): 0 ok, 0 failed of 0 points" in capsys.readouterr().out
    calls.clear()
    assert main([*args[:5], "--tool", "none,nsys", "--out", str(tmp_path / "runs"), "--", "prog", "{m}"]) == 2
    assert capsys.readouterr().err == ("tracekit: error: --kernel-name: an option of --tool ncu, not of --tool "
                                       "none,nsys\n")
    assert calls == []


def test_the_sweep_command_ends_with_the_table_and_the_headroom_of_its_sweeps(hstu, tmp_path, monkeypatch, capsys):
    """tracekit sweep --tool none,nsys,ncu as the CLI runs it, each sweep standing in as the H200
    fixture's: a line per sweep, one latency table of every sweep's points, then each point's
    headroom; exit 1 where a sweep had a failed point."""
    from tracekit.cli import main

    db, results = hstu
    monkeypatch.setenv("TRACEKIT_NSYS", str(_fake_tool(tmp_path / "bin", "nsys")))
    monkeypatch.setenv("TRACEKIT_NCU", str(_fake_tool(tmp_path / "bin", "ncu")))
    monkeypatch.setattr(runinfo, "has_gpu", lambda: True)
    ran = []

    def sweep(bs, nc, *, tool, **kw):
        ran.append((bs, nc, tool, kw["ingest"]))
        return next(r for r in results if r.tool == tool)

    monkeypatch.setattr(sw, "sweep", sweep)
    assert main(["--db", str(db), "sweep", "--bs", "1,8", "--nc", "128", "--tool", "none,nsys,ncu"]) == 0
    out, err = capsys.readouterr()
    assert ran == [("1,8", "128", t, True) for t in ("none", "nsys", "ncu")]
    assert err == ""  # (the ncu sweep's latency said in a line below the table)
    assert ("under ncu a request's latency is mostly the profiler's (it serialises the launches and replays the "
            "kernels it profiles); the untraced latency is a sweep's under --tool none") in out.splitlines()
    lines = out.splitlines()
    assert [ln.split(":")[0] for ln in lines[:3]] == [f"sweep {r.sweep_id} ({r.tool})" for r in results]
    head = lines.index(next(ln for ln in lines if ln.startswith("preset")))
    assert [ln.split()[1] for ln in lines[head + 2:head + 8]] == ["none", "none", "nsys", "nsys", "ncu", "ncu"]
    assert "sweep-latency -p sweep=ID (each sweep's id above) --all-columns" in out
    want = sw.headroom_by_point(db, results[1], results[2])
    assert len(want) == 9 and out.rstrip("\n").split("\n")[-len(want):] == want
    results[2].points[1].status = "failed"
    try:
        assert main(["--db", str(db), "sweep", "--bs", "1,8", "--nc", "128", "--tool", "none,nsys,ncu"]) == 1
    finally:
        results[2].points[1].status = "ok"
    assert "no ok run of it in the ncu sweep" in capsys.readouterr().out


def test_a_ctrl_c_in_a_later_sweep_still_shows_those_that_finished(hstu, tmp_path, monkeypatch, capsys):
    """Stopped in the ncu sweep, the command prints the table of the none and nsys sweeps' points
    before its line (exit 130); stopped in the last of nsys, ncu, none, the nsys and ncu sweeps'
    headroom too. A Ctrl-C in the first sweep prints no table."""
    from tracekit.cli import main

    db, results = hstu
    monkeypatch.setenv("TRACEKIT_NSYS", str(_fake_tool(tmp_path / "bin", "nsys")))
    monkeypatch.setenv("TRACEKIT_NCU", str(_fake_tool(tmp_path / "bin", "ncu")))
    monkeypatch.setattr(runinfo, "has_gpu", lambda: True)
    stop = {"at": "ncu"}

    def sweep(bs, nc, *, tool, **kw):
        if tool == stop["at"]:
            raise Interrupted("sweep interrupted at bs=1 nc=128 after 0 of 2 points; manifest m.json")
        return next(r for r in results if r.tool == tool)

    monkeypatch.setattr(sw, "sweep", sweep)
    args = ["--db", str(db), "sweep", "--bs", "1,8", "--nc", "128", "--tool"]
    assert main([*args, "none,nsys,ncu"]) == 130
    out, err = capsys.readouterr()
    lines = out.splitlines()
    head = lines.index(next(ln for ln in lines if ln.startswith("preset")))
    assert [ln.split()[1] for ln in lines[head + 2:head + 6]] == ["none", "none", "nsys", "nsys"]
    assert lines[head + 6] == "4 rows" and "where tuning can save time" not in out
    assert err == "tracekit: sweep interrupted at bs=1 nc=128 after 0 of 2 points; manifest m.json\n"
    stop["at"] = "none"
    assert main([*args, "nsys,ncu,none"]) == 130
    out = capsys.readouterr().out
    want = sw.headroom_by_point(db, results[1], results[2])
    assert len(want) == 9 and out.rstrip("\n").split("\n")[-len(want):] == want
    stop["at"] = "nsys"
    assert main([*args, "nsys,ncu"]) == 130
    out, err = capsys.readouterr()
    assert out == "" and err.endswith("; not run: the ncu sweep\n")


def test_a_config_gives_each_profiler_its_own_options_too(tmp_path, monkeypatch, capsys):
    """A program's config with an nsys option (gpu_metrics) swept under nsys and ncu: the ncu
    sweep leaves it out (it refused it after the whole nsys sweep had run); under none and ncu,
    which neither take it, it is refused before any sweep."""
    import sys

    from tracekit.cli import main

    cfg = tmp_path / "prog.yaml"
    cfg.write_text(f"command: [{json.dumps(sys.executable)}, -c, 'print(1)', '{{m}}']\ngrid: {{m: [1]}}\n"
                   "gpu_metrics: true\n")
    monkeypatch.setenv("TRACEKIT_NCU", str(_fake_tool(tmp_path / "bin", "ncu")))
    got = []

    def runner(cmd, tool, **kw):
        got.append((tool, kw.get("gpu_metrics")))
        return tmp_path / "run"

    res = sw.sweep_command(config=str(cfg), tool="ncu", one_of_several=True, runner=runner, ingest=False,
                           out_dir=tmp_path / "a", progress=False)
    assert [p.status for p in res.points] == ["ok"] and got == [("ncu", False)]
    with pytest.raises(CaptureError, match="gpu_metrics: an option of --tool nsys, not of --tool ncu"):
        sw.sweep_command(config=str(cfg), tool="ncu", runner=runner, ingest=False, out_dir=tmp_path / "b",
                         progress=False)
    out = tmp_path / "c"
    assert main(["sweep", "--config", str(cfg), "--tool", "none,ncu", "--out", str(out), "--no-ingest"]) == 2
    assert capsys.readouterr().err == (f"tracekit: error: {cfg}: gpu_metrics: an option of --tool nsys, not of "
                                       "--tool none,ncu\n")
    assert not out.exists()


@pytest.mark.parametrize("written", ["[none, nsys, ncu]", "none,nsys,ncu", "'none, nsys, ncu'"])
def test_a_config_names_several_profilers(tmp_path, written, monkeypatch, capsys):
    """A sweep kept in a file runs under several profilers as --tool does (a list, or the text
    --tool takes); sweep() itself takes one, and says what runs several."""
    import sys

    from tracekit.cli import main

    hstu, prog = tmp_path / "hstu.yaml", tmp_path / "prog.yaml"
    hstu.write_text(f"tool: {written}\ngrid: {{bs: [1], nc: [4]}}\npreset: small\n")
    prog.write_text(f"command: [{json.dumps(sys.executable)}, -c, 'print(1)', '{{m}}']\ngrid: {{m: [1]}}\n"
                    f"tool: {written}\n")
    for cfg in (hstu, prog):
        assert sw.parse_tools(None, str(cfg)) == ["none", "nsys", "ncu"]
        assert sw.parse_tools("ncu", str(cfg)) == ["ncu"]  # (--tool wins)
    with pytest.raises(CaptureError, match=r"hstu.yaml: tool names several profilers \(none,nsys,ncu\): sweep_each"):
        sw.sweep(config=str(hstu), out_dir=tmp_path / "a", progress=False, ingest=False)
    with pytest.raises(CaptureError, match=r"prog.yaml: tool names several profilers \(none,nsys,ncu\): sweep_each"):
        sw.sweep_command(config=str(prog), out_dir=tmp_path / "a", progress=False, ingest=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # (no nsys: refused before the none sweep)
    monkeypatch.delenv("TRACEKIT_NSYS", raising=False)
    monkeypatch.setitem(sw.profilers.KNOWN_LOCATIONS, "nsys", (str(tmp_path / "none/*/nsys"),))
    assert main(["sweep", "--config", str(hstu), "--out", str(tmp_path / "runs"), "--no-ingest"]) == 2
    assert "nsys not found" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_a_configs_bad_list_names_the_file_and_the_profiler(tmp_path):
    cfg = tmp_path / "s.yaml"
    cfg.write_text("tool: [none, perf]\ngrid: {bs: [1], nc: [4]}\n")
    with pytest.raises(CaptureError, match=r"s.yaml: tool \['none', 'perf'\]: 'perf' is not a profiler"):
        sw.load_config(str(cfg))
    cfg.write_text("tool: [nsys, nsys]\ngrid: {bs: [1], nc: [4]}\n")
    with pytest.raises(CaptureError, match=r"s.yaml: tool \['nsys', 'nsys'\]: nsys twice"):
        sw.load_config(str(cfg))
