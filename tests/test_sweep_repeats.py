"""A sweep taken again (``tracekit sweep --repeat N``): each profiler's sweep N times in a row,
the later ones naming the first (``sweep_repeat_of``); the noise between processes at each
point; a diff or comparison against a sweep with repeats in the store judged against their
noise. Real data: tests/data/hstu_sweep_repeats, the HSTU workload's bs 1,8 x nc 128,1024
untraced, three times in a row on the H200."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA, sweep_of_manifest
from test_capture_sweep import FakeRunner
from tracekit.capture import sweep as sw

import tracekit
from tracekit import diff as D
from tracekit.errors import CaptureError, CaptureWarning, Interrupted
from tracekit.ingest import run_folders

pytestmark = pytest.mark.usefixtures("reference_kernels")

@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """The fixture's run folders and manifests (kept as runs.tar.xz: their warm-up requests are
    most of their text), unpacked."""
    import tarfile

    folder = tmp_path_factory.mktemp("repeat_runs")
    with tarfile.open(DATA / "hstu_sweep_repeats" / "runs.tar.xz") as tar:
        tar.extractall(folder, filter="data")
    return folder / "runs"


def _results(runs: Path) -> list[sw.SweepResult]:
    """The three sweeps, in the order they ran, each from its manifest."""
    return [sweep_of_manifest(manifest, runs) for manifest in sorted(runs.glob("sweep-*.json"))]


@pytest.fixture(scope="module")
def store(tmp_path_factory, runs) -> Path:
    db = tmp_path_factory.mktemp("repeats") / "s.duckdb"
    with tracekit.open(db) as tk:
        for folder in run_folders([runs]):
            tk.ingest(folder)
    return db


def test_the_repeats_run_in_a_row_each_naming_the_first(tmp_path):
    """Each profiler's sweep, then its repeats, each repeat told the first sweep's id; a Ctrl-C
    says which repeats did not run."""
    ran = []

    def run(tool, repeat_of=None):
        ran.append((tool, repeat_of))
        return sw.SweepResult(f"sweep-{tool}-{len(ran)}", tmp_path / "m.json", [], tool, repeat_of)

    results = sw.sweep_each(["none"], run, repeats=3)
    assert ran == [("none", None), ("none", "sweep-none-1"), ("none", "sweep-none-1")]
    assert [r.repeat_of for r in results] == [None, "sweep-none-1", "sweep-none-1"]

    def stopped(tool, repeat_of=None):
        if repeat_of:
            raise Interrupted("sweep interrupted at bs=1 nc=128 after 0 of 2 points; manifest m.json")
        return run(tool, repeat_of)

    with pytest.raises(Interrupted) as err:
        sw.sweep_each(["none"], stopped, repeats=3)
    assert str(err.value).endswith("; not run: the none (repeat 3) sweep")
    assert [r.sweep_id for r in err.value.finished] == ["sweep-none-4"]


def test_a_repeat_names_its_first_sweep_in_its_manifest_and_its_runs(tmp_path):
    runner = FakeRunner(tmp_path)
    first = sw.sweep("1", "128", tool="none", preset="small", warmup_ms=0, iters=2, out_dir=tmp_path / "runs",
                     progress=False, runner=runner)
    again = sw.sweep("1", "128", tool="none", preset="small", warmup_ms=0, iters=2, out_dir=tmp_path / "again",
                     progress=False, runner=runner, repeat_of=first.sweep_id)  # (another folder: the fake runner's
    # sweeps can start within one millisecond, which names a sweep)
    assert runner.calls[0][2]["extra_params"] == {"sweep": first.sweep_id, "sweep_point": 0}
    assert runner.calls[1][2]["extra_params"] == {"sweep": again.sweep_id, "sweep_point": 0,
                                                  "sweep_repeat_of": first.sweep_id}
    assert "repeat_of" not in json.loads(first.manifest.read_text())["settings"]
    assert json.loads(again.manifest.read_text())["settings"]["repeat_of"] == first.sweep_id
    assert (first.repeat_of, again.repeat_of) == (None, first.sweep_id)
    with pytest.raises(CaptureError, match="sweep_repeat_of"):  # (a name tracekit sets: no grid parameter's)
        sw.sweep_command(["prog", "{sweep_repeat_of}"], ["sweep_repeat_of=1"], "none", out_dir=tmp_path / "p",
                         progress=False)


def _timed_median(run_dir: Path) -> float:
    with open(run_dir / "requests.csv", newline="") as f:
        return statistics.median(float(r["latency_ms"]) for r in csv.DictReader(f) if r["phase"] == "timed")


def test_the_noise_between_the_repeats_at_each_point(store, runs):
    """Each point's median latency in each of the three sweeps (that of its requests.csv) and
    their spread: on the H200 the GPU-bound point (bs 8, nc 1024) stayed within 2.3 %, the
    three host-bound ones moved 58-83 % between processes (SM clock at its maximum in all)."""
    results = _results(runs)
    assert [r.repeat_of for r in results] == [None, results[0].sweep_id, results[0].sweep_id]
    lines = sw.repeat_spread(store, results)
    assert lines[0].startswith("the noise between the repeats at each point")
    spreads = {}
    for point in results[0].ok:
        line = next(ln for ln in lines if ln.startswith(f"  {point.label} (none): "))
        want = [_timed_median(Path(r.ok[results[0].ok.index(point)].run_dir)) for r in results]
        assert line == (f"  {point.label} (none): {', '.join(f'{m:.3f}' for m in want)} ms: "
                        f"{100 * (max(want) / min(want) - 1):.1f} %")
        spreads[point.label] = max(want) / min(want) - 1
    assert spreads["bs=8 nc=1024"] < 0.03 and min(v for k, v in spreads.items() if k != "bs=8 nc=1024") > 0.5
    assert lines[-1] == (f"  a later sweep against these (none): tracekit diff {results[0].sweep_id} NEW "
                         f"--repeat {results[1].sweep_id} --repeat {results[2].sweep_id}")
    assert sw.repeat_spread(store, results[:1]) == []


def test_a_diff_of_a_sweep_taken_again_is_judged_against_its_repeats(store, runs, tmp_path):
    """The first sweep against the second, identical ones: without the third in the store two
    host-bound points read regressed (+82.5 %) and improved (-37.5 %); with it the diff takes
    it as --repeat would, with a warning naming it, and holds the second; the first (+82.5 %
    against the repeat's ±40.4 %) is still read regressed: one repeat's noise is what it caught."""
    first, second, third = (r.sweep_id for r in _results(runs))
    with tracekit.open(store, read_only=True) as tk:
        with pytest.warns(CaptureWarning) as caught:
            auto = tk.diff(first, second, by="sweep")
        assert [str(w.message) for w in caught] == [
            f"diff: sweep {first} was taken again (tracekit sweep --repeat): its repeats {third} measure the noise "
            "between processes a change must pass, as --repeat gives them"]
        assert auto.equals(tk.diff(first, second, by="sweep", repeats=[third]))
        with pytest.warns(CaptureWarning, match=f"compare: sweep {first} was taken again .*: its repeats {third} "
                                                "measure"):
            cmp = tk.compare(first, [second], by="sweep")
        assert cmp.filter(pl.col("repeat")).height > 0 and cmp.filter(~pl.col("repeat")).height > 0
        with pytest.warns(CaptureWarning, match=f"its repeats {third} measure"):  # (a run of the second names it)
            run = tk.sql(f"SELECT min(run_id) FROM runs WHERE json_extract_string(params, '$.sweep') = '{second}'").item()
            tk.diff(first, str(run), by="sweep")
    latency = auto.filter(pl.col("metric") == "latency_med_ms")
    held = dict(zip(latency["key"], latency["verdict"], strict=True))
    assert (held["bs=1,nc=1024"], held["bs=8,nc=128"]) == ("unchanged", "regressed")
    assert auto["noise_pct"].is_not_null().all()
    with tracekit.open(tmp_path / "two.duckdb") as tk:  # (the first two alone: no repeat to judge against)
        for r in _results(runs)[:2]:
            for p in r.ok:
                tk.ingest(p.run_dir)
        alone = tk.diff(first, second, by="sweep").filter(pl.col("metric") == "latency_med_ms")
    verdicts = dict(zip(alone["key"], alone["verdict"], strict=True))
    assert (verdicts["bs=8,nc=128"], verdicts["bs=1,nc=1024"]) == ("regressed", "improved")
    assert "noise_pct" not in alone.columns


def test_a_point_whose_run_was_removed_is_said_in_the_diff(store, runs, tmp_path):
    """The first two sweeps, bs 8 nc 128's run removed from the first: that point is not judged (not
    'added': the first ran it), and the note says the first's run there is not in the store, with
    the folder to ingest; removed from the second too, the point is still a row, each side's
    absence said."""
    import shutil

    first, second = (r.sweep_id for r in _results(runs)[:2])
    db = tmp_path / "s.duckdb"
    shutil.copy(store, db)
    key = "bs=8,nc=128"
    with tracekit.open(db) as tk:
        at = {sweep: tk.con.execute("SELECT run_id, source_path FROM runs WHERE grid_point(params) = ? "
                                    "AND json_extract_string(params, '$.sweep') = ?", [key, sweep]).fetchone()
              for sweep in (first, second)}
        said = {sweep: f"{role} sweep {sweep}'s run at {key} is not in the store (tracekit ingest {at[sweep][1]})"
                for sweep, role in ((first, "base"), (second, "new"))}
        tk.remove_run(at[first][0])
        rows = tk.diff(first, second, by="sweep", repeats=[]).filter(pl.col("key") == key)
        assert D.shown_verdicts(rows) == ["not judged"] * 2 and rows["base"].is_null().all()
        assert set(rows["note"]) == {f"{said[first]}: nothing to compare, not judged"}
        tk.remove_run(at[second][0])
        rows = tk.diff(first, second, by="sweep", repeats=[]).filter(pl.col("key") == key)
    assert rows["metric"].to_list() == ["latency_med_ms", "latency_p95_ms"]
    assert rows["base"].is_null().all() and rows["new"].is_null().all()
    assert set(rows["note"]) == {f"{said[first]}; {said[second]}: nothing to compare, not judged"}


def test_the_sweep_command_takes_each_sweep_again_and_ends_with_the_noise(store, runs, monkeypatch, capsys):
    """`tracekit sweep --repeat 3` as the CLI runs it, each sweep standing in as the H200
    fixture's: the sweeps in a row, the later told the first's id, then the latency table and
    the noise between them; --repeat 0 is one line before anything runs."""
    from tracekit.capture import runinfo

    from tracekit.cli import main

    results = _results(runs)
    monkeypatch.setattr(runinfo, "has_gpu", lambda: True)
    ran = []

    def sweep(bs, nc, *, tool, repeat_of=None, **kw):
        ran.append((tool, repeat_of))
        return results[len(ran) - 1]

    monkeypatch.setattr(sw, "sweep", sweep)
    assert main(["--db", str(store), "sweep", "--bs", "1,8", "--nc", "128,1024", "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert ran == [(None, None), (None, results[0].sweep_id), (None, results[0].sweep_id)]  # (None: the default)
    assert out.rstrip("\n").split("\n")[-6:] == sw.repeat_spread(store, results)
    assert main(["--db", str(store), "sweep", "--bs", "1", "--nc", "128", "--repeat", "0"]) == 2
    assert capsys.readouterr().err == "tracekit: error: --repeat 0: a count of sweeps, 1 or more\n"
    assert len(ran) == 3


def test_the_repeats_in_the_store_can_be_left_out_and_give_the_noise_column(store, runs, capsys):
    """diff --no-repeats judges without them (the two host-bound points read regressed and
    improved again); --columns may name noise_pct where the store's repeats measure it, and
    not where they are left out; --repeat with --no-repeats is one line."""
    from tracekit.cli import main

    first, second, third = (r.sweep_id for r in _results(runs))
    args = ["--db", str(store), "diff", first, second, "--by", "sweep"]
    assert main([*args, "--no-repeats", "-f", "csv"]) == 0
    out, err = capsys.readouterr()
    rows = {(r["key"], r["metric"]): r for r in csv.DictReader(out.splitlines())}
    assert "noise_pct" not in out.splitlines()[0] and "taken again" not in err
    assert rows[("bs=8,nc=128", "latency_med_ms")]["verdict"] == "regressed"
    assert rows[("bs=1,nc=1024", "latency_med_ms")]["verdict"] == "improved"
    assert main([*args, "--columns", "key,metric,verdict,noise_pct", "-f", "csv"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "key,metric,verdict,noise_pct" and f"its repeats {third}" in err
    assert main([*args, "--no-repeats", "--columns", "key,noise_pct", "-f", "csv"]) == 2
    assert "no column 'noise_pct'" in capsys.readouterr().err
    assert main([*args, "--no-repeats", "--repeat", third]) == 2
    assert capsys.readouterr().err == "tracekit: error: --no-repeats: and --repeat: give one of the two\n"
    assert main(["--db", str(store), "compare", first, second, "--by", "sweep", "--no-repeats", "-f", "csv"]) == 0
    out = capsys.readouterr().out
    assert {r["repeat"] for r in csv.DictReader(out.splitlines())} == {"false"}


def test_a_ctrl_c_in_a_repeat_of_the_default_profiler_names_it(tmp_path):
    def run(tool, repeat_of=None):
        if repeat_of:
            raise Interrupted("sweep interrupted at bs=1 nc=128 after 0 of 2 points; manifest m.json")
        return sw.SweepResult("sweep-1", tmp_path / "m.json", [], "none")

    with pytest.raises(Interrupted) as err:
        sw.sweep_each([None], run, repeats=3)  # (no --tool: each sweep's default)
    assert str(err.value).endswith("; not run: the default (repeat 3) sweep")


def test_the_sweeps_table_tells_the_repeats_apart_by_their_runs(store, runs):
    from tracekit.capture.cli import latency_table

    results = _results(runs)
    lines = latency_table(store, results, width=200).splitlines()
    assert lines[0].split()[:5] == ["preset", "tool", "bs", "nc", "run"] and lines[14] == "12 rows"
    assert [ln.split()[4] for ln in lines[2:14]] == [Path(p.run_dir).name for r in results for p in r.ok]
    assert "run" not in latency_table(store, results[:1], width=200).splitlines()[0].split()


def _point_run(tk, sweep: str, bs: int, nc: int) -> int:
    return tk.sql(f"SELECT run_id FROM runs WHERE json_extract_string(params, '$.sweep') = '{sweep}' AND "
                  f"(params->>'bs')::INT = {bs} AND (params->>'nc')::INT = {nc}").item()


def test_a_point_of_a_sweep_taken_again_is_judged_against_that_point_of_its_repeats(store, runs):
    """A run that is a point of a sweep taken again, as the base (by id or name): that point's
    run in each repeat other than the sweeps compared measures the noise, as --repeat would,
    with a warning naming it; --no-repeats (an empty list) leaves it out."""
    first, second, third = (r.sweep_id for r in _results(runs))
    with tracekit.open(store, read_only=True) as tk:
        one, two, three = (_point_run(tk, s, 8, 128) for s in (first, second, third))
        with pytest.warns(CaptureWarning) as caught:
            auto = tk.diff(str(one), str(two), by="sweep")
        assert [str(w.message) for w in caught] == [
            f"diff: run {one} is point bs=8,nc=128 of sweep {first}, which was taken again (tracekit sweep --repeat): "
            f"that point's runs in its repeats (run {three} of {third}) measure the noise between processes a change "
            "must pass, as --repeat gives them"]
        assert auto.equals(tk.diff(str(one), str(two), by="sweep", repeats=[str(three)]))
        assert auto["noise_pct"].is_not_null().all()
        assert "noise_pct" not in tk.diff(str(one), str(two), by="sweep", repeats=[]).columns
        name = tk.sql(f"SELECT name FROM runs WHERE run_id = {one}").item()
        assert tk.stored_repeats(name, [str(three)], "x", quiet=True) == [str(two)]  # (by name; the third compared)
        assert tk.stored_repeats(str(two), [str(one)], "x", quiet=True) == [str(three)]  # (a repeat's point too)
        assert tk.stored_repeats(str(one), [second, third], "x", quiet=True) == []  # (every repeat compared)


@pytest.fixture(scope="module")
def declared(tmp_path_factory) -> Path:
    """tests/data/hstu_nsys_sweep's three sweeps under nsys, ``again`` ingested as a repeat of
    ``base`` (``ingest -p sweep_repeat_of=BASE``: the same command taken again, declared so),
    then ``reference`` (PyTorch's attention)."""
    sweeps = DATA / "hstu_nsys_sweep"
    base = json.loads(next((sweeps / "base").glob("sweep-*.json")).read_text())["sweep"]
    db = tmp_path_factory.mktemp("declared") / "d.duckdb"
    with tracekit.open(db) as tk:
        for which in ("base", "again", "reference"):
            for run in sorted((sweeps / which / "runs").iterdir()):
                tk.ingest(run, params={"sweep_repeat_of": base} if which == "again" else None)
    return db


def test_a_point_under_nsys_takes_the_same_points_run_of_its_repeat_in_a_report_too(declared, tmp_path):
    """Under nsys a point is a run of its own: the repeat's run of that point (and kind) measures
    its kernels' noise; a report against the point names the repeat in its comparison's intro,
    and a report of several runs labels each run compared as its own (the repeat's first in
    compare's long form)."""
    from tracekit.report import build, build_many

    with tracekit.open(declared, read_only=True) as tk:
        sweeps = tk.sql("SELECT DISTINCT params->>'sweep' AS s, min(run_id) AS r FROM runs GROUP BY 1 ORDER BY 2")["s"]
        base, again, ref = (_point_run(tk, s, 4, 512) for s in sweeps)
        with pytest.warns(CaptureWarning, match=f"that point's runs in its repeats \\(run {again} of {sweeps[1]}\\)"):
            auto = tk.diff(str(base), str(ref), by="kernel")
        assert auto.equals(tk.diff(str(base), str(ref), by="kernel", repeats=[str(again)]))
        assert auto["noise_pct"].is_not_null().any()
        with pytest.warns(CaptureWarning, match="that point's runs in its repeats"):
            rep = build(tk, str(ref), vs=str(base))
        assert f"Repeats of the base ({again}) measured the noise" in rep.sections[0][0].intro
        other = _point_run(tk, sweeps[2], 1, 128)
        with pytest.warns(CaptureWarning, match="that point's runs in its repeats"):
            many = build_many(tk, [str(ref), str(other)], vs=str(base))
        sec = next(s for s in many.sections if s[0].key == "compare")[0]
        assert f"--repeat {again})" in sec.intro and f"Repeats of the base ({again})" in sec.intro
        timeline = next(s for s in many.sections if s[0].key == "compare-timeline")
        names = dict(tk.sql(f"SELECT run_id, name FROM runs WHERE run_id IN ({ref}, {other}, {again})").iter_rows())
        spec = timeline[2]
        assert names[ref] in spec and names[other] in spec and names[again] not in spec


def test_a_report_against_a_point_can_leave_its_stored_repeats_out(declared, tmp_path, capsys):
    """report --no-repeats: the comparison with --vs judged without the repeat the store holds
    (no warning naming it, no noise sentence); with --repeat, or without --vs, it is one line."""
    from tracekit.cli import main

    with tracekit.open(declared, read_only=True) as tk:
        sweeps = tk.sql("SELECT DISTINCT params->>'sweep' AS s, min(run_id) AS r FROM runs GROUP BY 1 ORDER BY 2")["s"]
        base, again, ref = (_point_run(tk, s, 4, 512) for s in sweeps)
    args = ["--db", str(declared), "report", "--run", str(ref), "--vs", str(base)]
    assert main([*args, "-o", str(tmp_path / "with.html")]) == 0
    assert "that point's runs in its repeats" in capsys.readouterr().err
    assert f"Repeats of the base ({again}) measured the noise" in (tmp_path / "with.html").read_text()
    assert main([*args, "--no-repeats", "-o", str(tmp_path / "without.html")]) == 0
    assert "repeats" not in capsys.readouterr().err
    text = (tmp_path / "without.html").read_text()
    assert "Repeats of the base" not in text and 'id="diff"' in text
    assert main([*args, "--no-repeats", "--repeat", str(again), "-o", str(tmp_path / "x.html")]) == 2
    assert capsys.readouterr().err == "tracekit: error: --no-repeats: and --repeat: give one of the two\n"
    assert main(["--db", str(declared), "report", "--run", str(ref), "--no-repeats", "-o", str(tmp_path / "x.html")]) == 2
    assert capsys.readouterr().err.startswith("tracekit: error: report: --no-repeats judges a comparison with --vs")
    assert not (tmp_path / "x.html").exists()


def test_the_commands_a_report_shows_judge_as_it_did(declared, tmp_path, capsys):
    """The diff and compare commands a report against a point shows name the repeats it used,
    or --no-repeats where it left the store's out; chart diff --no-repeats judges without them
    (no warning naming them), as diff --no-repeats does; --no-repeats of a chart that judges no
    comparison, or with -p repeats=, is one line."""
    from tracekit.cli import main

    with tracekit.open(declared, read_only=True) as tk:
        sweeps = tk.sql("SELECT DISTINCT params->>'sweep' AS s, min(run_id) AS r FROM runs GROUP BY 1 ORDER BY 2")["s"]
        base, again, ref = (_point_run(tk, s, 4, 512) for s in sweeps)
        other = _point_run(tk, sweeps[2], 1, 128)
    for runs, shown in (([ref], f"tracekit diff {base} {ref}"), ([ref, other], f"tracekit compare {base} {ref} {other}")):
        args = ["--db", str(declared), "report", *(a for r in runs for a in ("--run", str(r))), "--vs", str(base)]
        assert main([*args, "-o", str(tmp_path / "with.html")]) == 0
        assert f"({shown} --repeat {again})" in (tmp_path / "with.html").read_text()
        assert main([*args, "--no-repeats", "-o", str(tmp_path / "without.html")]) == 0
        assert f"({shown} --no-repeats)" in (tmp_path / "without.html").read_text()
    capsys.readouterr()
    chart = ["--db", str(declared), "chart", "diff", "-p", f"base={base}", "-p", f"new={ref}"]
    assert main([*chart, "-o", str(tmp_path / "with.json")]) == 0
    assert "that point's runs in its repeats" in capsys.readouterr().err
    assert main([*chart, "--no-repeats", "-o", str(tmp_path / "without.json")]) == 0
    assert "repeats" not in capsys.readouterr().err
    from tracekit import charts

    with tracekit.open(declared, read_only=True) as tk:
        judged = charts._diff_data(tk, str(base), str(ref), repeats=[])
        assert judged.equals(charts.diff_rows(tk.diff(str(base), str(ref), repeats=[]), 5.0, 20))
        with pytest.warns(CaptureWarning, match="that point's runs in its repeats"):
            assert charts._diff_data(tk, str(base), str(ref)).equals(
                charts._diff_data(tk, str(base), str(ref), repeats=str(again)))
    assert main([*chart, "--no-repeats", "-p", f"repeats={again}", "-o", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err == "tracekit: error: --no-repeats: and -p repeats=: give one of the two\n"
    assert main(["--db", str(declared), "chart", "top-kernels", "--run", str(ref), "--no-repeats",
                 "-o", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.startswith("tracekit: error: chart top-kernels: --no-repeats: the chart judges no "
                                              "comparison by repeats' noise (those that do: compare, ")
    assert not (tmp_path / "x.json").exists()
