"""`tracekit compare BASE RUN...`: several runs against one base, each by diff's rules.

Real captures: one program captured unchanged three times (nsys_diff_base_a/_b/_c, the
last five days later) and once with three planted changes (nsys_diff_regressed,
PLANT.md); the HSTU inference capture twice and with half the SMs (hstu_capture_pair);
three sweeps of one grid, the third slower (sweep_pair)."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import warnings

import polars as pl
import pytest
from conftest import DATA, store_state

import tracekit
from tracekit import compare as C
from tracekit.cli import main
from tracekit.errors import CaptureWarning, ParamError, QueryError

DIFF = {n: DATA / f"nsys_diff_{n}" / "export.sqlite.xz" for n in ("base_a", "base_b", "base_c", "regressed")}
PLANT = json.loads((DATA / "nsys_diff_regressed" / "plant.json").read_text())
SILU, BIAS = "silu_kernel", "attn_bias_kernel"


@pytest.fixture(scope="module")
def plants(tmp_path_factory):
    db = tmp_path_factory.mktemp("compare") / "c.duckdb"
    with tracekit.open(db) as tk:
        for name, f in DIFF.items():
            tk.ingest(f, name=name)
    return db


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_each_run_is_what_its_own_diff_says(plants):
    """Every row of a compare is the row `diff BASE RUN` gives, for every run: the noise
    captures unchanged throughout, the planted capture with its three plants."""
    with tracekit.open(plants, read_only=True) as tk, warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        df = C.compare(tk, "base_a", ["base_b", "regressed", "base_c"])
        assert C.runs_of(df) == ["base_b", "regressed", "base_c"]
        assert set(df["base_run"]) == {"base_a"}
        for run in ("base_b", "regressed", "base_c"):
            mine = df.filter(pl.col("run") == run).drop("base_run", "run", "repeat", "noise_pct").rename({"value": "new"})
            own = tk.diff("base_a", run)
            assert mine.sort("scope", "key", "metric").equals(own.sort("scope", "key", "metric")), run
    for run in ("base_b", "base_c"):  # identical programs: nothing regressed, improved, added or removed
        assert set(df.filter(pl.col("run") == run)["verdict"]) == {"unchanged"}, run
    reg = df.filter(pl.col("run") == "regressed")
    for plant in PLANT["changes"]:  # each plant where plant.json says, with the verdict it expects
        got = reg.filter((pl.col("scope") == plant["scope"]) & (pl.col("key") == plant["key"])
                         & (pl.col("metric") == plant["metric"]))["verdict"].to_list()
        assert got == [plant["expected_verdict"]], plant["plant"]


def test_the_table_puts_the_runs_side_by_side(plants, capsys, monkeypatch):
    """One row per key and metric: the base's value, then each run's value and change;
    the changed keys first; a line per run counting the verdicts; --gate fails on any
    run's regression."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--db", str(plants), "compare", "base_a", "base_b", "regressed", "--limit", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = out[0].split()
    assert head[:5] == ["scope", "key", "metric", "base_a", "(base)"] and head[5:] == ["base_b", "regressed"]
    silu = next(line for line in out if SILU in line and " med_ns " in line)
    assert "regressed)" in silu.split("  ")[-1] and "(+" in silu
    bias = next(line for line in out if BIAS in line and " total_ns " in line)
    assert "(added)" in bias
    counts = out[-1]
    assert counts.startswith("base_b: ") and "; regressed: " in counts and " regressed" in counts.split("; ")[1]
    assert "unchanged" in counts.split("; ")[0] and "regressed" not in counts.split("; ")[0]
    assert re.search(r" \(\d+ more rows, none judged a change in any run: --limit 0 for all\)$", counts), counts
    assert main(["--db", str(plants), "compare", "base_a", "base_b", "--gate"]) == 0
    capsys.readouterr()
    assert main(["--db", str(plants), "compare", "base_a", "base_b", "regressed", "--gate", "--by", "kernel"]) == 1
    assert "tracekit: gate:" in capsys.readouterr().err



def _verdict_counts(line: str) -> dict[str, int]:
    """``53 unchanged, 33 not judged, 10 regressed`` -> {verdict: rows}."""
    return {v: int(n) for n, v in (part.split(" ", 1) for part in line.split(", "))}


def test_each_runs_counts_are_what_its_own_diff_counts(plants, capsys, monkeypatch):
    """The line counting a run's verdicts counts them as `diff BASE RUN` does: the host-timed
    rows (API durations, NVTX wall time: regressed's cudaMemcpyAsync +72 %) are not judged,
    not unchanged."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--db", str(plants), "compare", "base_a", "base_b", "regressed"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    got = dict(re.findall(r"(\w+): ([^;(]+[^;( ])", line))
    for run in ("base_b", "regressed"):
        assert main(["--db", str(plants), "diff", "base_a", run]) == 0
        out = capsys.readouterr().out.splitlines()
        own = out[out.index("what moved:") - 1 if "what moved:" in out else -1].split("; ")[0]
        assert _verdict_counts(got[run]) == _verdict_counts(own), (run, line, own)
        assert _verdict_counts(own)["not judged"] > 20

def test_files_hold_one_row_per_key_metric_and_run(plants, tmp_path, capsys):
    out = tmp_path / "c.csv"
    assert main(["--db", str(plants), "compare", "base_a", "base_b", "regressed", "--by", "kernel", "-o", str(out)]) == 0
    df = pl.read_csv(out)
    assert df.columns == C.COLUMNS
    assert df.group_by("scope", "key", "metric").len()["len"].max() == 2
    xl = tmp_path / "c.xlsx"
    assert main(["--db", str(plants), "compare", "base_a", "regressed", "-o", str(xl)]) == 0
    import openpyxl

    ws = openpyxl.load_workbook(xl).active
    assert ws.title == "compare" and [c.value for c in ws[1]] == C.COLUMNS


def test_sweeps_compare_point_by_point(tmp_path, capsys, monkeypatch):
    """Three sweeps' folders, ingested by the compare: labelled as given; the slower
    sweep regressed at every point, the repeat within the latency noise."""
    monkeypatch.chdir(DATA / "sweep_pair")
    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "compare", "a", "b", "c", "-f", "json", "-o", str(tmp_path / "s.json")]) == 0
    df = pl.read_json(tmp_path / "s.json")
    assert set(df["scope"]) == {"sweep"} and C.runs_of(df) == ["b", "c"] and set(df["base_run"]) == {"a"}
    assert set(df.filter(pl.col("run") == "b")["verdict"]) == {"unchanged"}
    latency = pl.col("metric").str.starts_with("latency_")  # (c's peak memory: +1.6 % to +53 %, some beyond 5 %)
    assert set(df.filter((pl.col("run") == "c") & latency)["verdict"]) == {"regressed"}
    assert df.filter(pl.col("run") == "c").height == df.filter(pl.col("run") == "b").height >= 8
    # what diff says of a pair names the run, among several (c ran the reference attention)
    err = capsys.readouterr().err
    assert "tracekit: warning: compare: c: the captures differ in setup: attention " in err
    assert main(["--db", str(db), "diff", "a", "b", "--repeat", "c", "-f", "json", "-o", str(tmp_path / "d.json")]) == 0
    err = capsys.readouterr().err
    assert "tracekit: warning: diff: c (a repeat of the base): the captures differ in setup: attention " in err


def test_a_sweeps_run_that_stands_for_its_sweep_is_said(tmp_path, capsys):
    """A run of sweep a (by id) against sweep b, and against c's run: in the sweep scope each
    run stands for its whole sweep, which its column (the run's name) does not say: a note line
    does; two sweeps, or a run folder given by its path (its own point), need none."""
    from tracekit.diff import stand_in

    db = tmp_path / "s.duckdb"
    sweeps = {}
    with tracekit.open(db) as tk:
        for which in "abc":
            runs = [tk.ingest(r) for r in sorted((DATA / "sweep_pair" / which / "runs").iterdir())]
            sweeps[which] = (next((DATA / "sweep_pair" / which).glob("sweep-*.json")).stem, runs[0])
        (a, ra), (b, _), (c, rc) = (sweeps[w] for w in "abc")
        base = f"base run {ra.run_id} ({ra.name}) stands for its sweep {a}"
        assert stand_in(tk, str(ra.run_id), b) == f"{base} in the sweep scope (compared point by point)"
        assert stand_in(tk, str(ra.run_id), rc.name) == \
            f"{base} and new run {rc.run_id} ({rc.name}) stands for its sweep {c} in the sweep scope (compared point by point)"
        assert stand_in(tk, a, b) is None
        assert stand_in(tk, str(ra.run_id), str(ra.run_id)) is None  # (a run against itself: its own point)
        assert stand_in(tk, DATA / "sweep_pair" / "a" / "runs" / ra.name, DATA / "sweep_pair" / "b" / "runs") is None
    assert main(["--db", str(db), "compare", str(ra.run_id), b, rc.name]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tracekit: note:")]
    assert notes == [f"tracekit: note: compare: {b}: {base} in the sweep scope (compared point by point)",
                     f"tracekit: note: compare: {rc.name}: {base} and new run {rc.run_id} ({rc.name}) stands for "
                     f"its sweep {c} in the sweep scope (compared point by point)"]
    assert main(["--db", str(db), "diff", str(ra.run_id), b, "--by", "sweep"]) == 0
    assert f"tracekit: note: diff: {base} in the sweep scope (compared point by point)" in capsys.readouterr().err
    assert main(["--db", str(db), "diff", str(ra.run_id), str(ra.run_id), "--by", "sweep", "-f", "csv"]) == 0
    assert "tracekit: note:" not in capsys.readouterr().err


def test_bad_references_are_one_line_and_change_nothing(plants, tmp_path, capsys):
    before = store_state(plants)
    for args, said in ((["base_a", "nope"], "no run or sweep 'nope'"),
                       (["base_a", "base_b", "base_b"], "'base_b' is run 2 (base_b), given twice"),
                       (["base_a", "1"], "'1' is run 1 (base_a), the base"),
                       (["base_a", "base_b", "--threshold", "0"], "--threshold 0.0: must be a positive"),
                       (["base_a", "base_b", "--by", "gpux"], "--by 'gpux'"),
                       (["base_a", "base_b", "--limit", "-1"], "--limit -1")):
        assert main(["--db", str(plants), "compare", *args]) == 2, args
        assert said in _one_line(capsys), args
    # a file this command ingests is named as given where its comparison fails (its run is not kept),
    # and a repeat that cannot be compared is said to be the repeat
    ncu = str(DATA / "ncu_diff_a" / "report.ncu-rep.xz")
    for cmd, args, said in (("compare", ["base_a", str(DIFF["base_b"]), ncu], f"compare: run 1 (base_a) [nsys] and "
                             f"{ncu} [ncu] share no scope to compare (run 1 (base_a) has kernel, nvtx, api, memcpy, "
                             f"gpu; {ncu} has ncu)"),
                            ("compare", ["base_a", "base_b", "--repeat", ncu], f"compare: --repeat {ncu}: run 1 "),
                            ("diff", ["base_a", "base_b", "--repeat", ncu], f"diff: --repeat {ncu}: run 1 ")):
        assert main(["--db", str(plants), cmd, *args]) == 2, args
        line = _one_line(capsys)
        assert line.startswith(f"tracekit: error: {said}") and "run 5" not in line, line
    assert store_state(plants) == before
    with tracekit.open(plants, read_only=True) as tk:
        with pytest.raises(ParamError, match="at least one run"):
            C.compare(tk, "base_a", [])
        with pytest.raises(QueryError, match="open read-only"):
            C.compare(tk, "base_a", [str(DIFF["base_b"])])


def test_files_are_kept_all_or_none(tmp_path, capsys):
    """Files to compare are ingested in one transaction: a truncated last one leaves the
    store as it was (here: no store at all); all good, all are kept."""
    bad = tmp_path / "bad.sqlite"
    raw = DIFF["base_b"].read_bytes()
    bad.write_bytes(raw[: len(raw) // 3])
    shutil.copyfile(DIFF["base_b"], tmp_path / "b.sqlite.xz")
    db = tmp_path / "f.duckdb"
    assert main(["--db", str(db), "compare", str(DIFF["base_a"]), str(tmp_path / "b.sqlite.xz"), str(bad)]) == 2
    assert str(bad) in _one_line(capsys)
    assert store_state(db) is None
    assert main(["--db", str(db), "compare", str(DIFF["base_a"]), str(tmp_path / "b.sqlite.xz"),
                 str(DIFF["regressed"]), "--by", "kernel"]) == 0
    with tracekit.open(db, read_only=True) as tk:
        assert tk.sql("SELECT count(*) AS n FROM runs")["n"][0] == 3


def test_files_compared_are_named_by_what_tells_them_apart(tmp_path, capsys, monkeypatch):
    """Files given by their paths are the table's columns without the path parts they all
    share (tests/data/nsys_diff_*/export.sqlite.xz: base_a, base_b, regressed), as jobs'
    folders are: their whole paths were the headers, and the table fell back to a block
    per row at 200 columns."""
    monkeypatch.setenv("COLUMNS", "200")
    files = [str(DIFF[n]) for n in ("base_a", "base_b", "regressed")]
    assert main(["--db", str(tmp_path / "f.duckdb"), "compare", *files, "--by", "kernel"]) == 0
    out = capsys.readouterr().out
    assert "-[ row 1 ]" not in out, out
    assert out.splitlines()[0].split() == ["scope", "key", "metric", "nsys_diff_base_a", "(base)", "nsys_diff_base_b",
                                           "nsys_diff_regressed"], out
    with tracekit.open(tmp_path / "f.duckdb") as tk:  # (the files are its runs already)
        df = tk.compare(files[0], files[1:], by=["kernel"])
    assert C.runs_of(df) == ["nsys_diff_base_b", "nsys_diff_regressed"] and set(df["base_run"]) == {"nsys_diff_base_a"}


def test_the_table_says_what_held_a_change_back():
    assert C.held("host-timed, not judged") == "host-timed"
    assert C.held("per-instance p=0.2; not significant (p=0.2)") == "not significant"
    assert C.held("within threshold (|+1.00%| <= 5%)") == ""
    assert C.held("identical") == ""


def test_the_table_says_the_machine_held_a_change(tmp_path, capsys, monkeypatch):
    """A change the machine moved reads as what moved it, though its note also says how far
    within its limit: hstu_host_pace's before2 (the host slowed, +48.7 % request latency)
    reads "host pace"; ncu_clocks_zeros's GEMM (-12 % at a higher SM clock) reads "clock";
    a sweep point whose capture failed reads so, not as a blank."""
    monkeypatch.setenv("COLUMNS", "250")
    pace, clocks = DATA / "hstu_host_pace", DATA / "ncu_clocks_random"
    db = str(tmp_path / "h.duckdb")
    assert main(["--db", db, "compare", str(pace / "before"), str(pace / "before2"), str(pace / "after")]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if "latency_med_ms" in line]
    assert re.search(r"11\.891 ms \(\+48\.7%, host pace\)", row), row
    assert main(["--db", db, "compare", str(clocks / "report.ncu-rep.xz"),
                 str(DATA / "ncu_clocks_zeros" / "report.ncu-rep.xz"), "-f", "csv"]) == 0
    df = pl.read_csv(io.StringIO(capsys.readouterr().out))
    held = df.filter((pl.col("metric") == "duration_ns") & pl.col("note").str.contains("moved with the SM clock"))
    assert held.height and set(held["verdict"]) == {"unchanged"}
    cells = {C._cell(r, "v") for r in held.iter_rows(named=True)}
    assert all(c.startswith("v (") and c.endswith(", clock)") for c in cells), cells
    folder = shutil.copytree(DATA / "sweep_pair" / "b", tmp_path / "b_failed")
    (point,) = (folder / "runs").glob("*-bs1-nc512-*")
    meta = json.loads((point / "meta.json").read_text())
    (point / "meta.json").write_text(json.dumps({**meta, "status": "failed", "error": "planted"}))
    assert main(["--db", str(tmp_path / "s.duckdb"), "compare", str(DATA / "sweep_pair" / "a"), str(folder)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "bs=1,nc=512" in line and "latency_med" in line]
    assert rows and all(line.rstrip().endswith("capture failed (regressed)") for line in rows), rows


def test_the_compare_chart_draws_each_runs_change_of_each_key(plants, tmp_path, capsys):
    """chart compare: per key its headline metric, a bar per run with the change compare
    gives (solid where judged, faded otherwise); the planted kernel's bar is the regressed
    run's; bad parameters are one line."""
    from conftest import spec_datasets

    from tracekit import charts

    with tracekit.open(plants, read_only=True) as tk, warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        df = C.compare(tk, "base_a", ["base_b", "regressed"], by="kernel")
        spec = charts.chart(tk, "compare", base="base_a", runs="base_b,regressed", by="kernel").to_dict()
    rows = [r for ds in spec_datasets(spec) for r in ds if "run" in r]
    assert {r["run"] for r in rows} == {"base_b", "regressed"} and len(rows) >= 4
    want = {(r["key"], r["run"]): r for r in df.filter(pl.col("metric") == "total_ns").iter_rows(named=True)}
    for r in rows:
        w = want[(r["key"], r["run"])]
        assert r["delta_pct"] == pytest.approx(w["delta_pct"]) and r["judged"] == (w["verdict"] in ("regressed", "improved"))
    silu = [r for r in rows if SILU in r["key"]]
    assert {r["run"]: r["judged"] for r in silu} == {"base_b": False, "regressed": True}
    # the planted kernel only the regressed run has: not drawn, and said so (as chart diff says it)
    assert BIAS not in {r["key"] for r in rows}
    alone = df.filter(pl.col("delta_pct").is_null() & pl.col("verdict").is_in(["added", "removed"]))
    assert BIAS in alone["key"].to_list() and set(alone["verdict"]) == {"added"}
    assert spec["title"]["subtitle"][-1] == (f"not drawn (in one run only): added {alone['key'].n_unique()} "
                                             "(the table lists them)")
    png = tmp_path / "c.png"
    assert main(["--db", str(plants), "chart", "compare", "-p", "base=base_a", "-p", "runs=base_b,regressed",
                 "-o", str(png)]) == 0 and png.stat().st_size > 10_000
    capsys.readouterr()
    for args, said in ((["-p", "base=base_a"], "give the runs as -p base=RUN -p runs=RUN,RUN"),
                       (["-p", "base=base_a", "-p", "runs=base_b", "-p", "limit=-1"], "limit=-1: must be >= 0"),
                       (["--run", "base_a"], "chart compare: give the runs as -p base=RUN -p runs=RUN,RUN, not --run")):
        assert main(["--db", str(plants), "chart", "compare", *args, "-o", str(tmp_path / "x.png")]) == 2
        assert said in _one_line(capsys)


def test_a_run_named_like_a_column_of_the_table_is_told_apart(tmp_path, capsys, monkeypatch):
    """Runs named `metric`, `key` or `<base> (base)` (names a run may have): their columns
    get the run id, the table is drawn (it was an internal error, exit 1: --gate's code)."""
    monkeypatch.setenv("COLUMNS", "250")
    db = str(tmp_path / "n.duckdb")
    for name, f in (("base_a", DIFF["base_a"]), ("metric", DIFF["base_b"]), ("base_a (base)", DIFF["base_c"])):
        assert main(["--db", db, "ingest", str(f), "--name", name]) == 0
    capsys.readouterr()
    assert main(["--db", db, "compare", "base_a", "metric", "base_a (base)", "--by", "kernel"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "metric (run 2)" in head and "base_a (base) (run 3)" in head and head.count("base_a (base)") == 2


def test_repeats_of_the_base_measure_the_noise_a_change_must_pass(plants, capsys, monkeypatch):
    """Three captures of one program (base_a, base_b, base_c) and the planted one. At a
    0.1 % threshold diff judges base_c's kernel time in `step` improved (-0.21 %, p=1.6e-17:
    many launches); base_b, a repeat of the base, moved it -0.33 %: within the repeats' noise,
    not judged. The plants pass any noise of the repeats; --gate does not count the repeats."""
    with tracekit.open(plants, read_only=True) as tk, warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        alone = C.compare(tk, "base_a", ["base_c"], threshold_pct=0.1)
        pooled = C.compare(tk, "base_a", ["base_c", "regressed"], threshold_pct=0.1, repeats=["base_b"])
    assert alone["noise_pct"].is_null().all() and not alone["repeat"].any()
    judged = alone.filter(pl.col("verdict").is_in(["regressed", "improved"]))
    assert judged.height >= 1
    mine = pooled.filter(pl.col("run") == "base_c")
    for r in judged.iter_rows(named=True):
        row = mine.filter((pl.col("scope") == r["scope"]) & (pl.col("key") == r["key"])
                          & (pl.col("metric") == r["metric"])).row(0, named=True)
        assert abs(row["delta_pct"]) <= row["noise_pct"], row  # (the repeat moved it more)
        assert row["verdict"] == "unchanged" and C.NOISE_NOTE in row["note"]
    # every row held this way is within its noise, and the noise is the repeat's own change to
    # the far end of its interval
    repeat = pooled.filter(pl.col("run") == "base_b")
    assert set(repeat["repeat"]) == {True} and set(pooled.filter(pl.col("run") != "base_b")["repeat"]) == {False}
    for r in pooled.filter(pl.col("note").str.contains(C.NOISE_NOTE, literal=True)).iter_rows(named=True):
        own = repeat.filter((pl.col("scope") == r["scope"]) & (pl.col("key") == r["key"])
                            & (pl.col("metric") == r["metric"])).row(0, named=True)
        far = max(abs(v) for v in (own["delta_pct"], own["delta_pct_low"], own["delta_pct_high"]) if v is not None)
        assert r["noise_pct"] == pytest.approx(far) and abs(r["delta_pct"]) <= r["noise_pct"]
    reg = pooled.filter(pl.col("run") == "regressed")
    for plant in PLANT["changes"]:
        got = reg.filter((pl.col("scope") == plant["scope"]) & (pl.col("key") == plant["key"])
                         & (pl.col("metric") == plant["metric"]))["verdict"].to_list()
        assert got == [plant["expected_verdict"]], plant["plant"]
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["--db", str(plants), "compare", "base_a", "base_c", "--repeat", "base_b", "--threshold", "0.1",
                 "--gate", "--limit", "3"]) == 0  # (base_b "improved" at 0.1 %: a repeat, not gated)
    out = capsys.readouterr().out
    assert "base_b (repeat)" in out.splitlines()[0] and "repeats' noise)" in out
    assert out.splitlines()[-1].startswith("base_b (repeat): ")


def test_a_repeat_holds_a_kernel_that_moved_between_processes(python_captures, capsys):
    """The inference pipeline captured three times by one command (hstu_capture_python, _again,
    _again2): its attention kernel ran at a median 256.5 us in _again, 291.8 and 291.2 us in the
    others. _again against _again2 regresses it +13.5 %, and with it the kernel time of the NVTX
    paths around it (each layer's hstu_attention) and the device's busy time; the first capture,
    a repeat of _again, moved them as much: nothing on the GPU is judged changed, and --gate
    passes. The run lands where the repeat did, a little beyond the repeat's own change in some
    paths (layer4 +13.53 % against +13.43 %): within its interval. A repeat that did not move
    measures no noise: against it the kernel stays improved."""
    base, new, repeat = "hstu_capture_python_again", "hstu_capture_python_again2", "hstu_capture_python"
    gpu = pl.col("scope").is_in(["kernel", "gpu"]) | (pl.col("metric") == "kernel_total_ns")
    with tracekit.open(python_captures, read_only=True) as tk, warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)  # (the first by the code before its commit)
        alone = tk.diff(base, new).filter(gpu)
        got = tk.diff(base, new, repeats=[repeat]).filter(gpu)
        moved = alone.filter(pl.col("verdict") == "regressed")
        assert moved.filter(pl.col("key").str.ends_with("/hstu_attention")).height == 8
        assert {"_hstu_cached_gl_kernel", "device 0", "hstu.request"} <= set(moved["key"])
        held = got.join(moved.select("scope", "key", "metric"), on=["scope", "key", "metric"])
        assert held.height == moved.height and (held["verdict"] == "unchanged").all(), held
        assert held["note"].str.contains(C.NOISE_NOTE, literal=True).all()
        own = tk.diff(base, repeat).select("scope", "key", "metric", pl.col("delta_pct").alias("own"))
        beyond = held.join(own, on=["scope", "key", "metric"]).filter(pl.col("delta_pct").abs() > pl.col("own").abs())
        assert sorted(beyond["key"]) == ["hstu.request/hstu.layer4/hstu_attention",
                                         "hstu.request/hstu.layer6/hstu_attention"]
        assert set(got["verdict"]) == {"unchanged"}
        quiet = tk.diff("hstu_capture_python", base, repeats=["hstu_capture_python_again2"])
        row = quiet.filter((pl.col("key") == "_hstu_cached_gl_kernel") & (pl.col("metric") == "med_ns")).row(0, named=True)
        assert row["verdict"] == "improved" and row["noise_pct"] < 1
    assert main(["--db", str(python_captures), "diff", base, new, "--repeat", repeat, "--gate"]) == 0
    assert main(["--db", str(python_captures), "diff", base, new, "--gate"]) == 1
    capsys.readouterr()


def test_a_repeat_without_a_scope_leaves_its_rows_without_its_noise(python_captures, tmp_path, capsys):
    """hstu_capture_nsys, the pipeline captured without Python sampling, as a repeat of
    hstu_capture_python against _again: it measures the noise of the scopes it has, and the
    python rows are judged without it, said once, naming what it lacks; asked ``--by python``
    alone, it measures nothing, said the same way, and the rows are those of the diff without
    repeats. A run compared that lacks a scope asked is still an error."""
    db = tmp_path / "p.duckdb"
    shutil.copy(python_captures, db)
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "hstu_capture_nsys", name="no_python")
    base, new = "hstu_capture_python", "hstu_capture_python_again"
    lacks = ("no_python (a repeat of the base) [nsys,timing without Python sample trace] has no python scope: the "
             "python rows are judged without its noise")
    with tracekit.open(db, read_only=True) as tk:
        with pytest.warns(CaptureWarning) as caught:
            df = tk.diff(base, new, repeats=["no_python"])
        assert [str(w.message) for w in caught if "scope:" in str(w.message)] == [f"diff: {lacks}"]
        py = df.filter(pl.col("scope") == "python")
        assert py.height > 50 and py["noise_pct"].null_count() == py.height
        assert df.filter(pl.col("scope") == "kernel")["noise_pct"].drop_nulls().len() > 20
        with pytest.warns(CaptureWarning) as caught:
            got = tk.diff(base, new, by="python", repeats=["no_python"])
        assert [str(w.message) for w in caught if "scope:" in str(w.message)] == [f"diff: {lacks}"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CaptureWarning)
            alone = tk.diff(base, new, by="python")
        assert got.drop("noise_pct").equals(alone) and got["noise_pct"].null_count() == got.height
        with pytest.warns(CaptureWarning) as caught:
            both = tk.compare(base, ["hstu_capture_python_again2", new], by=["kernel", "python"], repeats=["no_python"])
        assert [str(w.message) for w in caught if "scope:" in str(w.message)] == [f"compare: {lacks}"]
        assert set(both.filter(pl.col("repeat"))["scope"]) == {"kernel"}
        with warnings.catch_warnings(record=True) as caught:  # (called from code whose globals name no module)
            warnings.simplefilter("always")
            exec("tk.diff(base, new, by='python', repeats=['no_python'])", {"tk": tk, "base": base, "new": new})
        assert [str(w.message) for w in caught if "scope:" in str(w.message)] == [f"diff: {lacks}"]
    capsys.readouterr()
    assert main(["--db", str(db), "diff", base, new, "--repeat", "no_python", "--by", "python,kernel", "-f", "csv"]) == 0
    out, err = capsys.readouterr()
    assert err.count(f"tracekit: warning: diff: {lacks}\n") == 1 and pl.read_csv(io.StringIO(out))["scope"].unique().len() == 2
    assert main(["--db", str(db), "diff", base, "no_python", "--by", "python", "--no-repeats"]) == 2
    assert "--by python: run " in capsys.readouterr().err
    # the warning at a caller whose module's loader has no source to give (python -c)
    code = ("import sys; from tracekit.cli import main; "
            f"sys.exit(main(['--db', {str(db)!r}, 'diff', {base!r}, {new!r}, '--repeat', 'no_python', '-f', 'csv']))")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and ran.stderr.count(f"tracekit: warning: diff: {lacks}\n") == 1, ran.stderr[-2000:]
    # a capture of another tool is no repeat: an error, as without --by
    with tracekit.open(db) as tk:
        for name in ("ncu_shapes_a", "ncu_shapes_slow"):
            tk.ingest(DATA / name / "report.ncu-rep.xz", name=name)
        with pytest.raises(QueryError, match=r"^diff: --repeat no_python: --by ncu: run \d+ \(no_python\) .* has no ncu"):
            tk.diff("ncu_shapes_a", "ncu_shapes_slow", by="ncu", repeats=["no_python"])


def test_what_the_base_lacks_is_said_once_not_once_per_run(python_captures, tmp_path, capsys):
    """hstu_capture_nsys (captured without Python sampling, and with fewer iterations) as the
    base of the two Python-sampled captures: each comparison leaves the python rows out and
    finds the setups differ, the same of both runs; each is said once, of the comparison as
    a whole (before, once per run, each naming that run). With the sampled capture as the
    base, what one run lacks is said of that run alone. With repeats: what the base lacks is
    still the base's (a repeat says no scope it lacks this way), what repeats alone say is
    theirs, named as repeats; with one run, and in diff with repeats, what the base differs
    from all of them in is said once, as the command's own; another library's warning is
    passed on as given; where a comparison fails, what those before it said is said too."""
    from tracekit.errors import UntracedScopes

    db = tmp_path / "p.duckdb"
    shutil.copy(python_captures, db)
    with tracekit.open(db) as tk:
        run = tk.ingest(DATA / "hstu_capture_nsys", name="no_python").run_id
    runs = ["hstu_capture_python", "hstu_capture_python_again"]
    lacks = (f"run {run} (no_python) [nsys,timing without Python sample trace] has no python scope: the python rows "
             "are not compared")
    with tracekit.open(db, read_only=True) as tk:
        with pytest.warns(CaptureWarning) as caught:
            df = tk.compare("no_python", runs)
        said = [str(w.message) for w in caught]
        assert [str(w.message) for w in caught if w.category is UntracedScopes] == [f"compare: {lacks}"], said
        setups = [s for s in said if "differ in setup" in s]
        assert len(setups) == 1 and setups[0].startswith("compare: the captures differ in setup: iters "), said
        assert len(said) == len(set(said)) and "python" not in set(df["scope"]) and set(df["run"]) == set(runs)
        with pytest.warns(CaptureWarning) as caught:
            tk.compare(runs[0], ["no_python", runs[1]])
        assert [str(w.message) for w in caught if w.category is UntracedScopes] == [f"compare: no_python: {lacks}"]
        assert any(str(w.message).startswith("compare: no_python: the captures differ in setup: iters ")
                   for w in caught)
        # a repeat (backtrace: no sweep scope, another sampling setup) says no scope the base
        # lacks: the runs' all said it, so it is still the base's; what the repeat alone said
        # is of the repeat, two repeats named as such
        with pytest.warns(CaptureWarning) as caught:
            tk.compare("no_python", runs, repeats=["backtrace"])
        said = [str(w.message) for w in caught]
        assert f"compare: {lacks}" in said and len(said) == len(set(said)), said
        assert "compare: backtrace (a repeat of the base): the captures differ in setup: nsys --sample none -> " \
               "process-tree" in said, said
        assert "compare: hstu_capture_python and hstu_capture_python_again: the captures differ in setup: iters 30 " \
               "-> 50; warmup_ms 1000.0 -> 2000.0" in said, said
        for repeats in ([], ["backtrace"]):  # (one run: still the base's; a compare's line, not diff's)
            with pytest.warns(CaptureWarning) as caught:
                tk.compare("no_python", runs[:1], repeats=repeats)
            said = [str(w.message) for w in caught]
            assert f"compare: {lacks}" in said and all(s.startswith("compare: ") for s in said), said
        # diff with a repeat: what the base differs from both in, said once, as diff says it
        with pytest.warns(CaptureWarning) as caught:
            tk.diff("no_python", runs[0], repeats=runs[1:])
        said = [str(w.message) for w in caught]
        assert [s for s in said if "differ in setup" in s] == ["diff: the captures differ in setup: iters 30 -> 50; "
                                                              "warmup_ms 1000.0 -> 2000.0"], said
        assert f"diff: {lacks}" in said, said
        with pytest.warns(CaptureWarning) as caught:
            tk.compare("hstu_capture_python", ["backtrace"], repeats=runs[1:] + ["hstu_capture_python_again2"])
        said = [str(w.message) for w in caught]
        assert any(s.startswith("compare: hstu_capture_python_again and hstu_capture_python_again2 (repeats of the "
                                "base): the captures differ in setup: code ") for s in said), said
        # another library's warning is passed on as it was given, not as tracekit's
        real = C._repeat_or_run

        def noisy(*args):
            warnings.warn("invalid value encountered in divide", RuntimeWarning, stacklevel=1)
            return real(*args)

        with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mp.setattr(C, "_repeat_or_run", noisy)
            tk.compare("no_python", runs)
        assert [str(w.message) for w in caught if w.category is RuntimeWarning] == ["invalid value encountered in divide"]
        # a comparison that fails: what those before it said is still said, then the error
        with warnings.catch_warnings(record=True) as caught, pytest.raises(QueryError, match=r"^--by python: run "):
            warnings.simplefilter("always")
            tk.compare(runs[0], ["hstu_capture_python_again2", "no_python"], by="python")
        assert [str(w.message) for w in caught] == ["compare: hstu_capture_python_again2: the captures differ in "
                                                    "setup: code 23e51ed28589+dirty -> 92ecf1b9d948"]
    capsys.readouterr()
    assert main(["--db", str(db), "compare", "no_python", *runs, "-f", "csv"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err.count(f"tracekit: warning: compare: {lacks}") == 1 and len(err) == len(set(err)), err


def test_diff_with_repeats_is_compare_of_its_one_run_in_diffs_own_order(plants, tmp_path, capsys, monkeypatch):
    """`diff BASE NEW --repeat R`: diff's rows and order, each verdict and note as
    `compare BASE NEW --repeat R` gives them for NEW, and noise_pct. base_c's kernel time in
    `step` (improved at 0.1 % alone) is held by base_b's larger move; the plants still
    regress and --gate still fails on them; a repeat that is the base or NEW is refused."""
    with tracekit.open(plants, read_only=True) as tk, warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        for new in ("base_c", "regressed"):
            plain = tk.diff("base_a", new, threshold_pct=0.1)
            got = tk.diff("base_a", new, threshold_pct=0.1, repeats=["base_b"])
            side = C.compare(tk, "base_a", [new], threshold_pct=0.1, repeats=["base_b"]).filter(~pl.col("repeat"))
            assert got.columns == [*plain.columns, "noise_pct"]
            keys = ["scope", "key", "metric"]
            assert got.select(keys).rows() == plain.select(keys).rows()  # (diff's order)
            assert got.drop("verdict", "note", "noise_pct").equals(plain.drop("verdict", "note"))
            assert got.join(side.rename({"verdict": "v", "note": "n", "noise_pct": "z"}), on=keys).select(
                (pl.col("verdict") == pl.col("v")).all(), (pl.col("note").eq_missing(pl.col("n"))).all(),
                (pl.col("noise_pct").eq_missing(pl.col("z"))).all()).row(0) == (True, True, True)
            held = got.filter(pl.col("verdict") != plain["verdict"])
            assert (held["verdict"] == "unchanged").all()
            assert held["note"].str.contains(C.NOISE_NOTE, literal=True).all()
            if new == "base_c":
                assert held.filter((pl.col("key") == "step") & (pl.col("metric") == "kernel_total_ns")).height == 1
            else:
                for plant in PLANT["changes"]:
                    v = got.filter((pl.col("scope") == plant["scope"]) & (pl.col("key") == plant["key"])
                                   & (pl.col("metric") == plant["metric"]))["verdict"].to_list()
                    assert v == [plant["expected_verdict"]], plant["plant"]
    monkeypatch.setenv("COLUMNS", "250")  # (a narrow terminal gets one block per row)
    assert main(["--db", str(plants), "diff", "base_a", "base_c", "--repeat", "base_b", "--threshold", "0.1",
                 "--gate"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].endswith("; 1 change(s) within the repeats' noise, not judged")
    assert out[0].split()[:7] == ["scope", "key", "metric", "base", "new", "delta", "noise"]  # (the repeats' noise shown)
    assert main(["--db", str(plants), "diff", "base_a", "regressed", "--repeat", "base_b", "--gate"]) == 1
    capsys.readouterr()
    out = tmp_path / "d.csv"
    assert main(["--db", str(plants), "diff", "base_a", "regressed", "--repeat", "base_b", "-o", str(out),
                 "--columns", "key,metric,verdict,noise_pct"]) == 0
    assert pl.read_csv(out).columns == ["key", "metric", "verdict", "noise_pct"]
    capsys.readouterr()
    before = store_state(plants)
    for bad in (["--repeat", "base_a"], ["--repeat", "regressed"], ["--repeat", "nosuch"]):
        assert main(["--db", str(plants), "diff", "base_a", "regressed", *bad]) == 2
        assert _one_line(capsys).startswith("tracekit: error: diff: ")
    assert store_state(plants) == before


def test_the_report_and_the_diff_chart_take_the_repeats(plants, tmp_path, capsys):
    """`report --vs BASE --repeat R` and `chart diff -p repeats=R` judge as `diff --repeat`:
    the report says what the repeats held, the chart's verdicts are diff's."""
    from tracekit import charts
    from tracekit import report as R

    with tracekit.open(plants, read_only=True) as tk, warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        page = R.render(R.build(tk, "base_c", vs="base_a", threshold_pct=0.1, repeats=["base_b"]))
        assert "Repeats of the base (base_b) measured the noise" in page
        assert "1 change(s) within the repeats&#x27; noise, not judged" in page
        assert "Repeats of the base" not in R.render(R.build(tk, "base_c", vs="base_a", threshold_pct=0.1))
        got = charts._diff_data(tk, base="base_a", new="base_c", threshold=0.1, repeats="base_b", limit=0)
        full = tk.diff("base_a", "base_c", threshold_pct=0.1, repeats=["base_b"])
    keys = ["scope", "key", "metric"]
    both = got.select(*keys, "verdict").join(full.select(*keys, pl.col("verdict").alias("v")), on=keys)
    assert both.height == got.height and (both["verdict"] == both["v"]).all()
    assert both.filter((pl.col("key") == "step") & (pl.col("metric") == "kernel_total_ns"))["verdict"].to_list() \
        == ["unchanged"]
    out = tmp_path / "r.html"
    assert main(["--db", str(plants), "report", "--run", "regressed", "--vs", "base_a", "--repeat", "base_b",
                 "-o", str(out)]) == 0
    assert "Repeats of the base (base_b)" in out.read_text()
    capsys.readouterr()
    assert main(["--db", str(plants), "report", "--run", "regressed", "--repeat", "base_b", "-o", str(out)]) == 2
    assert _one_line(capsys) == "tracekit: error: report: --repeat is a capture of the --vs base again; give --vs " \
                                "BASE with it"
    assert main(["--db", str(plants), "chart", "diff", "-p", "base=base_a", "-p", "new=regressed", "-p",
                 "repeats=base_b", "-o", str(tmp_path / "d.json")]) == 0
