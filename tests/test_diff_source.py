"""diff's source scope (``--by source``): ncu's Source Counters compared line by line, on real
reports of one H200 with their Source Counters (--set full):

- tests/data/ncu_shapes_a, _a_again, _a_again2: one Triton kernel profiled three times (noise);
  _a_again2's program file had four lines more above the kernel (its lines 33-39 are _a's 29-35);
- ncu_shapes_slow: the same kernel reading its input four times (line 34, the load in the loop);
- ncu_shapes_int: the kernel on int32 (other arithmetic instructions), its file's lines those of
  _a_again2 (33-39);
- ncu_diff_a/_b: one kernel at another block size, as long either way;
- ncu_occupancy_a/_b: one file, its kernels built with other constants (a GEMM in 4 stages instead of
  2, 35 % faster; an elementwise kernel unrolled further, its loop's like instructions moved);
- hstu_capture_ncu_pair: the inference capture twice (base, base_again) and with its attention
  kernel on half the SMs (half_sms), its reports carrying the source (ncu --import-source yes);
- ncu_source_sweep: ncu_shapes' kernel swept over two sizes under ``tracekit sweep --tool ncu``
  (an H100), twice (base, again) and slow: two sweeps compared line by line, point by point."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import DATA

import tracekit
from tracekit import diff as D
from tracekit import report
from tracekit.cli import main as cli_main
from tracekit.errors import CaptureWarning

SHAPES = ("shapes_a", "shapes_a_again", "shapes_a_again2", "shapes_slow", "shapes_int", "diff_a", "diff_b",
          "occupancy_a", "occupancy_b")
PAIR = ("base", "base_again", "half_sms")
LAYER0 = "_hstu_cached_sk_kernel @ tracekit_ncu/hstu.request/hstu.layer0/hstu_attention"
#: tests/data/hstu_capture_ncu: the inference capture under ncu from another checkout of tracekit, whose
#: kernel files' lines had moved by 18-32 (no source text in the report)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("source") / "s.duckdb"
    with tracekit.open(path) as tk:
        for name in SHAPES:
            tk.ingest(DATA / f"ncu_{name}" / "report.ncu-rep.xz", name=name)
        for name in PAIR:
            tk.ingest(DATA / "hstu_capture_ncu_pair" / name, name=name)
        tk.ingest(DATA / "hstu_capture_ncu" / "ncu.ncu-rep.xz", name="checkout")
    return path


def _diff(db, base: str, new: str, **kw) -> pl.DataFrame:
    with tracekit.open(db, read_only=True) as tk:
        df = tk.diff(base, new, by="source", **kw)
    assert df.group_by("key", "metric").len()["len"].max() == 1  # (a row per key and metric)
    return df


def _row(df: pl.DataFrame, key: str, metric: str) -> dict:
    rows = df.filter((pl.col("key") == key) & (pl.col("metric") == metric)).to_dicts()
    assert len(rows) == 1, (key, metric, df.select("key", "metric").to_dicts())
    return rows[0]


def test_the_line_that_got_slower_is_the_one_that_reads_more(db):
    """ncu_shapes_slow's kernel is 26 % slower in all: its load in the loop (line 34) executes
    7.7x the instructions with 5.45 M uncoalesced L2 sectors a launch where it had none, and
    its time a launch (the launches' durations weighed by its share of their warp samples)
    regressed; lines whose share of the warps' time fell while the kernel got slower are said,
    not judged improved."""
    df = _diff(db, "shapes_a", "shapes_slow")
    assert set(df["scope"]) == {"source"}
    load = _row(df, "shapes_kernel @ ncu_shapes.py:34", "time_ns")
    assert load["verdict"] == "regressed" and 40 < load["delta_pct"] < 60 and load["p_value"] < D.ALPHA
    assert load["note"] == "stalls: long_scoreboard 95% -> long_scoreboard 70%"
    quiet = _row(df, "shapes_kernel @ ncu_shapes.py:29", "time_ns")  # (176 -> 203 samples)
    assert quiet["verdict"] == "unchanged" and quiet["note"].startswith(
        "within the warp samples' noise (176 -> 203 samples, p = 0.59; 6 lines tested: p < 0.0017 needed)")
    inst = _row(df, "shapes_kernel @ ncu_shapes.py:34", "inst_executed")
    assert (inst["base"], inst["new"], inst["verdict"]) == (1_234_688, 9_551_360, "unchanged")
    excess = _row(df, "shapes_kernel @ ncu_shapes.py:34", "l2_excess_sectors")
    assert (excess["base"], excess["new"]) == (0, 5_451_264) and "not judged" in excess["note"]
    for line in (30, 32, 35):  # (their time a launch fell 56-70 %: the warps waited at the load instead)
        r = _row(df, f"shapes_kernel @ ncu_shapes.py:{line}", "time_ns")
        assert r["verdict"] == "unchanged" and r["delta_pct"] < -50, r
        assert r["note"].startswith("differs against a kernel that regressed: its warps' time moved"), r
    assert not df.filter(pl.col("verdict") == "improved").height
    # line 31 moved beyond its samples' noise (23 -> 59 samples), by 56 ns of a 17.5 us launch: too little to count
    small = _row(df, "shapes_kernel @ ncu_shapes.py:31", "time_ns")
    assert small["verdict"] == "unchanged" and small["p_value"] < D.ALPHA / 6 and small["note"].startswith(
        "immaterial: it moved by 56 ns a launch, < 1% of the kernel's 17.536 µs")
    assert df.filter(pl.col("verdict") != "unchanged")["key"].to_list() == ["shapes_kernel @ ncu_shapes.py:34"]
    # the warp samples' shares sum to 100 % on each side, the lines' times to the mean launch's
    shares = df.filter(pl.col("metric") == "samples_pct")
    assert shares["base"].sum() == pytest.approx(100, abs=0.01) and shares["new"].sum() == pytest.approx(100, abs=0.01)
    with tracekit.open(db, read_only=True) as tk:
        mean = tk.sql("SELECT r.name, avg(m.value) FROM ncu_metrics m JOIN runs r USING (run_id) WHERE r.name IN "
                      "('shapes_a', 'shapes_slow') AND m.metric = 'gpu__time_duration.sum' GROUP BY 1")
    times = df.filter(pl.col("metric") == "time_ns")
    means = dict(mean.iter_rows())
    assert times["base"].sum() == pytest.approx(means["shapes_a"]) and times["new"].sum() == pytest.approx(means["shapes_slow"])


@pytest.mark.parametrize("base, new", [("shapes_a", "shapes_a_again"), ("shapes_a_again", "shapes_a_again2"),
                                       ("base", "base_again"), ("base_again", "base")])
def test_the_same_program_profiled_again_reads_unchanged(db, base, new):
    """Two reports of one program: every line unchanged, none added or removed. The inference
    capture's lines of a few thousand samples move by up to 8 % (beyond the threshold: the warp
    samples' Poisson noise holds them); _a_again2's lines moved by four in the file, its code
    the same: each line is paired with the line its instructions sit on (34 -> 38)."""
    df = _diff(db, base, new)
    assert df.height > 10 and set(df["verdict"]) == {"unchanged"}, df.filter(pl.col("verdict") != "unchanged")
    held = df.filter(pl.col("note").str.contains("within the warp samples' noise"))
    if base.startswith("base"):
        assert held.filter(pl.col("delta_pct").abs() > 5).height > 0  # (the threshold alone would judge them)
    else:
        assert df.filter(pl.col("note").str.contains("within ncu's noise for a 17.")).height > 0  # (its mean launch)
    if new == "shapes_a_again2":  # (a line keyed as the base numbers it)
        r = _row(df, "shapes_kernel @ ncu_shapes.py:34", "time_ns")
        assert r["note"].startswith("line 34 -> 38; within ") and abs(r["delta_pct"]) < 5
        assert sorted(int(k.rsplit(":", 1)[1]) for k in df["key"].unique()) == [29, 30, 31, 32, 34, 35]  # (29-35 but 33)


def test_half_the_sms_slows_the_attention_kernels_lines_alone(db):
    """half_sms: the cached attention kernel, 1.7x longer on half the SMs, is the one whose lines
    regressed (each layer's busiest line, 434, by 78-82 %); the other kernels' lines are unchanged.
    Its lines of few samples are held: each line's p must pass 0.01 over the kernel's lines tested;
    so are a kernel's smallest moves while together they stay under 1 % of its launch (22 lines,
    2-3 a layer); 13-16 lines a layer count, the same 11 among them in each of the 8 layers."""
    df = _diff(db, "base", "half_sms")
    changed = df.filter(pl.col("verdict") != "unchanged")
    assert set(changed["verdict"]) == {"regressed"} and changed.height == 115
    per_layer = changed.group_by(pl.col("key").str.extract("^(.*) @ ").alias("kernel")).agg(
        pl.col("key").str.extract(r":(\d+)$").cast(int).alias("lines"))
    assert per_layer.height == 8
    assert set.intersection(*map(set, per_layer["lines"])) == {30, 38, 41, 429, 433, 434, 435, 436, 456, 460, 643}
    assert max(map(len, per_layer["lines"])) <= 16
    immaterial = df.filter(pl.col("note").str.starts_with("immaterial: "))
    assert immaterial.height == 22 and set(immaterial["key"].str.extract("^(.*) @ ")) == set(per_layer["kernel"])
    for kernel, held in immaterial.group_by(pl.col("key").str.extract("^(.*) @ ").alias("kernel")):
        together = float(held["delta"].sum())  # (what the held lines moved by together: under 1 % of the launch)
        launch = float(re.search(r"of the kernel's ([\d.]+) µs", held["note"][0])[1]) * 1e3
        assert 0 < together < 0.01 * launch and held["delta"].min() > 0, kernel
    few = df.filter(pl.col("note").str.contains("lines tested: p < ") & (pl.col("p_value") < D.ALPHA))
    assert few.height > 0  # (p < 0.01 alone would have judged these)
    assert {k.partition(" @ ")[0] for k in changed["key"]} == {"_hstu_cached_sk_kernel"}
    busiest = changed.filter(pl.col("key").str.ends_with(" @ _cached.py:434"))
    assert busiest.height == 8 and busiest["delta_pct"].min() > 70 and busiest["delta_pct"].max() < 90
    # (the reports carry the source: the line's code ends its note)
    assert set(busiest["note"].str.replace(r"^stalls: \S+ \d+% -> \S+ \d+%; ", "")) == {
        "code: p = _silu(tl.dot(q, k), rab, scale, False, FAST_SILU)"}
    lines = D.moved(df)
    assert len(lines) == 1 and lines[0].startswith("Source lines (mean time per launch): _hstu_cached_sk_kernel @ ")
    assert "_cached.py:434 +10" in lines[0] and lines[0].endswith(f"; and {changed.height - 3} more")


def test_a_kernel_that_took_as_long_has_no_line_judged(db):
    """ncu_diff_b runs the kernel in blocks of one warp where ncu_diff_a ran four: its warps' samples
    moved from the index arithmetic (line 28: -91 %) to the store (line 32: +10 %), and the kernel
    took as long (181 us either way): said, not judged."""
    df = _diff(db, "diff_a", "diff_b")
    assert set(df["verdict"]) == {"unchanged"}
    store = _row(df, "scale_add_kernel @ ncu_diff.py:32", "time_ns")
    assert store["delta_pct"] > 5 and store["note"].startswith("differs; the kernel's launches took as long")


def test_an_edit_above_a_line_is_followed_by_the_files_text(db, tmp_path):
    """Planted on a copy of base_again: three lines inserted at line 400 of the attention kernel's
    file (every line from 400 moved down three), and its instructions' opcodes replaced, so that
    only the reports' source text can pair the lines: each line is paired with the line its text
    moved to (434 -> 437), and the whole reads as the unedited pair does."""
    edited = tmp_path / "e.duckdb"
    shutil.copy(db, edited)
    con = duckdb.connect(str(edited))
    run = con.execute("SELECT run_id FROM runs WHERE name = 'base_again'").fetchone()[0]
    file = con.execute("SELECT file FROM ncu_source_lines WHERE run_id = ? AND file LIKE '%/_cached.py'",
                       [run]).fetchone()[0]
    for table in ("ncu_source", "ncu_source_lines"):
        con.execute(f"UPDATE {table} SET line = line + 3 WHERE run_id = ? AND file = ? AND line >= 400", [run, file])
    con.execute("INSERT INTO ncu_source_lines VALUES (?, ?, 400, '# a'), (?, ?, 401, '# b'), (?, ?, 402, '# c')",
                [run, file] * 3)
    con.execute("UPDATE ncu_source SET sass = 'NOP' WHERE run_id = ?", [run])
    con.close()
    df = _diff(edited, "base", "base_again")
    plain = _diff(db, "base", "base_again")
    assert set(df["verdict"]) == {"unchanged"} and df.height == plain.height
    layer = LAYER0
    r = _row(df, f"{layer} @ _cached.py:434", "time_ns")
    assert r["note"].startswith("line 434 -> 437; ")
    assert r["new"] == _row(plain, f"{layer} @ _cached.py:434", "time_ns")["new"]


def _cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli_main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _table_rows(out: str) -> list[str]:
    """A terminal table's rows: the lines under its rule (a header may take two lines), each
    row's first (a wrapped cell's next lines, blank in its first column, left out)."""
    lines = out.splitlines()
    return [line for line in lines[next(i for i, line in enumerate(lines) if line.startswith("-----")) + 1:]
            if not line.startswith(" ")]


def test_the_table_keeps_each_lines_location_and_the_scope_is_asked_for(db, capsys, monkeypatch):
    """In a 120-column table a key keeps its file and line whole (its kernel beside it where there
    is room), its layer's tag and line number at least, the note wrapped beside it (at 100 columns
    a block per row: no room to wrap the note); at 74 columns a block per row; what moved names the line with its kernel. A plain diff of two ncu runs has no source rows (a row per line of every kernel
    is asked for); --by source of a run without Source Counters, or not of ncu, is one line, exit 2."""
    monkeypatch.setenv("COLUMNS", "120")
    rc, out, err = _cli(capsys, "--db", str(db), "diff", "shapes_a", "shapes_slow", "--by", "source")
    assert rc == 0 and err == ""
    first = out.splitlines()[2].split()
    assert first[:3] == ["source", "ncu_shapes.py:34", "time_ns"], out  # (too narrow for the kernel beside it)
    assert "  Source lines (mean time per launch): shapes_kernel @ ncu_shapes.py:34 +6.628 µs (+48.8 %, regressed)" in out
    rc, out, _ = _cli(capsys, "--db", str(db), "diff", "base", "half_sms", "--by", "source", "--limit", "8")
    keys = [line.split("  ")[1] for line in out.splitlines()[2:] if line.startswith("source")][:8]  # (line 434 of
    # the eight layers; a row's note wrapped onto the lines below it)
    assert rc == 0 and all(re.fullmatch(r"(\S+ )?\[layer\d\] (@ )?_cached\.py:434", k.strip()) for k in keys), out
    assert len(set(keys)) == 8
    rc, out, _ = _cli(capsys, "--db", str(db), "compare", "shapes_a", "shapes_a_again", "shapes_slow", "--by", "source")
    assert rc == 0 and re.match(r"source +(\S+ @ )?ncu_shapes\.py:34 +time_ns ", _table_rows(out)[0]), out
    rc, out, _ = _cli(capsys, "--db", str(db), "compare", "base", "base_again", "half_sms", "--by", "source", "--limit", "8")
    keys = [line.split("  ")[1].strip() for line in _table_rows(out)[:8]]  # (each layer's line, told apart)
    assert rc == 0 and all(re.fullmatch(r"(\S+ )?\[layer\d\] (@ )?…?\S*\.py:\d+", k) for k in keys) and len(set(keys)) == 8, out
    # (74 columns: too narrow for three runs' values with their changes beside the line: a block per
    # row, each key whole)
    monkeypatch.setenv("COLUMNS", "74")
    rc, out, _ = _cli(capsys, "--db", str(db), "compare", "base", "base_again", "half_sms", "--by", "source", "--limit", "8")
    keys = [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("key ")][:8]
    assert rc == 0 and len(set(keys)) == 8, out
    assert all(re.fullmatch(r"_hstu_cached_sk_kernel @ \S+ \[layer\d\] @ _cached\.py:\d+", k) for k in keys), keys
    assert any(k.endswith(":434") for k in keys)
    with tracekit.open(db, read_only=True) as tk:
        assert "source" not in set(tk.diff("shapes_a", "shapes_slow")["scope"])
    plain = db.parent / "plain.duckdb"
    with tracekit.open(plain) as tk:
        tk.ingest(DATA / "ncu_triton_detailed" / "details.csv.xz", name="pages")
        tk.ingest(DATA / "ncu_shapes_a" / "report.ncu-rep.xz", name="a")
        tk.ingest(DATA / "hstu_capture_nsys", name="nsys")
    rc, out, err = _cli(capsys, "--db", str(plain), "diff", "pages", "a", "--by", "source")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("tracekit: error: --by source: run 1 (pages) has no source lines of kernel launches to "
                          "compare; profile with ncu --section SourceCounters"), err
    rc, _, err = _cli(capsys, "--db", str(plain), "diff", "nsys", "a", "--by", "source")
    assert rc == 2 and err.startswith("tracekit: error: --by source: run 3 (nsys)") and err.count("\n") == 1, err


def test_a_kernel_built_again_from_one_file_pairs_its_lines_by_number(db):
    """ncu_occupancy_a/_b build one file's kernels with other constants: their instructions differ,
    so the lines pair by number (the elementwise kernel's loop of like instructions would pair one
    off by instructions), nothing reads added or removed, and the comparison reads the same either
    way round: the GEMM's two busiest lines improved one way, regressed the other."""
    one, other = _diff(db, "occupancy_a", "occupancy_b"), _diff(db, "occupancy_b", "occupancy_a")
    assert one.filter(pl.col("verdict").is_in(["added", "removed"]) | pl.col("note").str.starts_with("line ")).is_empty()
    judged = {k for k in one.filter(pl.col("verdict") == "improved")["key"]}
    assert judged == {"matmul_kernel @ ncu_occupancy.py:36", "matmul_kernel @ ncu_occupancy.py:39"}
    assert judged == set(other.filter(pl.col("verdict") == "regressed")["key"]) and one.height == other.height


def _planted(db, tmp_path, *statements: str) -> Path:
    """A copy of the store with ``statements`` run on it (a run by name: ``{run:NAME}``)."""
    path = tmp_path / "planted.duckdb"
    shutil.copy(db, path)
    con = duckdb.connect(str(path))
    ids = dict(con.execute("SELECT name, run_id FROM runs").fetchall())
    for sql in statements:
        con.execute(re.sub(r"\{run:(\w+)\}", lambda m: str(ids[m[1]]), sql))
    con.close()
    return path


def test_odd_launches_planted_in_real_reports(db, tmp_path):
    """Planted on the real reports: a line with no samples in the base (ncu_shapes_a's load, line 34)
    is still judged against the slow kernel's; a launch without its duration (ncu_shapes_slow's
    first) leaves the others to time the lines, shown, not judged (a mean over other launches
    than the base's); a launch without samples (one of _a_again's six) times nothing, while its
    counts stay those of the same code."""
    no_samples = _planted(db, tmp_path, "UPDATE ncu_source SET samples = 0 WHERE run_id = {run:shapes_a} AND line = 34")
    r = _row(_diff(no_samples, "shapes_a", "shapes_slow"), "shapes_kernel @ ncu_shapes.py:34", "time_ns")
    assert (r["base"], r["verdict"]) == (0, "regressed") and r["p_value"] < 1e-6
    (tmp_path / "planted.duckdb").unlink()
    untimed = _planted(db, tmp_path, "DELETE FROM ncu_metrics WHERE run_id = {run:shapes_slow} AND kernel_id = 0 "
                                     "AND metric = 'gpu__time_duration.sum'")
    r = _row(_diff(untimed, "shapes_a", "shapes_slow"), "shapes_kernel @ ncu_shapes.py:34", "time_ns")
    assert r["verdict"] == "unchanged" and r["note"].startswith("differs; launches timed 6 -> 5 (profiled, with "
                                                                "samples and a duration): a mean over other launches")
    assert r["delta_pct"] > 40  # (a mean over the five other launches, the shortest left out)
    (tmp_path / "planted.duckdb").unlink()
    zero = _planted(db, tmp_path, "UPDATE ncu_metrics SET value = 0 WHERE run_id = {run:shapes_slow} AND kernel_id = 0 "
                                  "AND metric = 'gpu__time_duration.sum'")  # (a duration of 0 times nothing)
    r = _row(_diff(zero, "shapes_a", "shapes_slow"), "shapes_kernel @ ncu_shapes.py:34", "time_ns")
    assert r["note"].startswith("differs; launches timed 6 -> 5")
    (tmp_path / "planted.duckdb").unlink()
    unsampled = _planted(db, tmp_path, "UPDATE ncu_source SET samples = 0 WHERE run_id = {run:shapes_a_again} "
                                       "AND kernel_id = 0")
    df = _diff(unsampled, "shapes_a", "shapes_a_again")
    assert set(df["verdict"]) == {"unchanged"} and df.filter(pl.col("note").str.contains("launches timed 6 -> 5")).height
    assert set(df.filter(pl.col("metric") == "inst_executed")["note"]) == {"identical"}


def test_a_kernel_whose_lines_one_report_lacks_is_named(db, tmp_path):
    """Planted on ncu_occupancy_a/_b (a GEMM and an elementwise kernel, two launches each):
    occupancy_b's poly_kernel without its lines (as if profiled without Source Counters, or built
    without line information), and occupancy_a's GEMM launches without a duration. The GEMM's
    lines are compared by their counts, not their time; both kernels are named in one warning, not
    left out unsaid, in diff and in report --vs."""
    path = _planted(db, tmp_path, "DELETE FROM ncu_source WHERE run_id = {run:occupancy_b} AND kernel_id IN "
                                  "(SELECT kernel_id FROM ncu_kernels WHERE run_id = {run:occupancy_b} "
                                  "AND name = 'poly_kernel')",
                    "DELETE FROM ncu_metrics WHERE run_id = {run:occupancy_a} AND metric = 'gpu__time_duration.sum' "
                    "AND kernel_id IN (SELECT kernel_id FROM ncu_kernels WHERE run_id = {run:occupancy_a} "
                    "AND name = 'matmul_kernel')")
    with pytest.warns(CaptureWarning) as caught:
        df = _diff(path, "occupancy_a", "occupancy_b")
    said = [re.sub(r"run \d+ ", "run ", str(w.message)) for w in caught
            if str(w.message).startswith("diff --by source: ")]
    assert [Path(w.filename).name for w in caught if "line by line" in str(w.message)] == ["test_diff_source.py"]
    assert said == ["diff --by source: not compared line by line: matmul_kernel (no launch with warp samples and a "
                    "duration in run (occupancy_a): its lines' counts compared, not their time); poly_kernel "
                    "(source lines in run (occupancy_a) only)"], said
    assert set(df["key"].str.extract("^(.*) @ ")) == {"matmul_kernel"} and "time_ns" not in set(df["metric"])
    with tracekit.open(path) as tk:
        with pytest.warns(CaptureWarning) as passed_on:  # (caught inside tracekit and passed on: said here too)
            tk.compare("occupancy_a", ["occupancy_b"], by="source")
        assert [Path(w.filename).name for w in passed_on if "line by line" in str(w.message)] == ["test_diff_source.py"]
        html = report.write_report(tk, tmp_path / "r.html", run="occupancy_b", vs="occupancy_a").read_text()
    section = html[html.index('<section id="diff-source">'):]
    assert "Not compared line by line: matmul_kernel (no launch" in section[:section.index("</p>")]
    (tmp_path / "planted.duckdb").unlink()  # (a kernel too short for a warp sample on either side: nothing to say)
    unsampled = _planted(db, tmp_path, "UPDATE ncu_source SET samples = 0 WHERE run_id IN ({run:diff_a}, {run:diff_b})")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        df = _diff(unsampled, "diff_a", "diff_b")
    assert set(df["metric"]) == {"inst_executed"}


def test_a_kernel_file_under_another_name_is_paired_by_its_text(db, tmp_path):
    """Planted on the inference pair: base_again's attention kernel file under a content-hashed
    name (as TorchInductor and Triton's caches name a generated file) is still the base's file,
    each line paired as before (2,690 rows, none added or removed); the same name over another
    text is not (its lines added, the base's removed)."""
    hashed = "'/tmp/torchinductor_root/x7/cx7abc.py'"
    renamed = [f"UPDATE {t} SET file = {hashed} WHERE run_id = {{run:base_again}} AND file LIKE '%/_cached.py'"
               for t in ("ncu_source", "ncu_source_lines")]
    df = _diff(_planted(db, tmp_path, *renamed), "base", "base_again")
    assert df.height == 2690 and set(df["verdict"]) == {"unchanged"}
    assert not df.filter(pl.col("key").str.contains("cx7abc")).height  # (keyed by the base's file; the note says)
    assert _row(df, f"{LAYER0} @ _cached.py:434", "time_ns")["note"].startswith("line 434 -> cx7abc.py:434; ")
    (tmp_path / "planted.duckdb").unlink()
    rewritten = _planted(db, tmp_path, *renamed, "UPDATE ncu_source_lines SET text = 'x = ' || line "
                                                 "WHERE run_id = {run:base_again} AND file LIKE '%cx7abc.py'")
    df = _diff(rewritten, "base", "base_again")
    added = df.filter(pl.col("verdict") == "added")
    assert added.height > 700 and set(added["key"].str.extract(r" @ (\S+):")) == {"cx7abc.py"}
    assert df.filter(pl.col("verdict") == "removed").height > 700


def test_an_ncu_keys_path_that_ends_like_a_line_is_no_line():
    """Only a source scope's key keeps its location: an ncu key whose NVTX path is 'step:3' is
    shortened as an ncu key, its kernel first."""
    assert D.shorten_key("void gemm_kernel<float,128>(float*, int) @ step:3", 12).startswith("gemm")
    assert D.shorten_key("void gemm_kernel<float,128>(float*, int) @ x.py:3", 12, located=True) == "x.py:3"


@pytest.mark.parametrize("key, width, label", [
    ("k @ path/hstu_attention [layer7] @ _cached.py:633 (new)", 19, "[layer7] :633 (new)"),
    ("k @ path/hstu_attention [layer7] @ _cached.py:633 (new)", 14, "[layer7] :633"),  # (the number whole)
    ("k @ path/hstu_attention [layer7] @ _cached.py:434", 13, "[layer7] :434"),
    ("size=24: shapes_kernel @ ncu_shapes.py:41", 16, "size=24: ….py:41"),  # (a sweep's point kept first)
    ("size=24: shapes_kernel @ ncu_shapes.py:1434", 5, ":1434"),
    # (a point and a layer tag: the point where both fit beside the number, else the tag)
    ("bs=8,nc=128: k @ path/hstu_attention [layer7] @ _cached.py:641", 26, "bs=8,nc=128: [layer7] :641"),
    ("bs=8,nc=128: k @ path/hstu_attention [layer7] @ _cached.py:641", 20, "[layer7] …hed.py:641"),
])
def test_a_narrow_source_key_keeps_what_tells_it_apart(key, width, label):
    assert D.shorten_key(key, width, located=True) == label


def test_a_line_an_edit_moved_is_followed_by_the_instructions_around_it(db):
    """Without the source in the reports: ncu_shapes_a_again2's file had four lines more above the
    kernel, ncu_shapes_slow's kernel reads its input four times. The load (line 38 of _a_again2,
    34 of _slow) is the line that regressed, paired by the shift of the instructions aligned
    around it (their opcodes rare in both: the load loop's like instructions align one off), and
    no line reads added or removed. The inference capture from another checkout, its files'
    lines moved by 18-32: most lines paired, by the files' names (no path in a key), the same
    either way round."""
    df = _diff(db, "shapes_a_again2", "shapes_slow")
    load = _row(df, "shapes_kernel @ ncu_shapes.py:38", "time_ns")
    assert load["verdict"] == "regressed" and load["note"].startswith("line 38 -> 34; stalls: long_scoreboard")
    assert df.filter(pl.col("verdict").is_in(["added", "removed"])).is_empty()
    assert set(df.filter(pl.col("verdict") != "unchanged")["key"]) == {"shapes_kernel @ ncu_shapes.py:38"}
    one, other = _diff(db, "base", "checkout"), _diff(db, "checkout", "base")
    moved = one.filter((pl.col("metric") == "time_ns") & pl.col("note").str.starts_with("line "))
    alone = one.filter(pl.col("verdict").is_in(["added", "removed"]))
    assert moved.height > 700 and alone.height < 40 and not one["key"].str.contains(" @ /").any()
    assert sorted(one["verdict"].value_counts().rows()) == sorted(
        (v.replace("added", "x").replace("removed", "added").replace("x", "removed"), n)
        for v, n in other["verdict"].value_counts().rows())


def test_an_edit_inside_a_kernel_is_followed_by_each_lines_own_instructions(db, tmp_path):
    """Planted on ncu_shapes_int (the kernel on int32: other arithmetic, its lines four below
    ncu_shapes_a's): two lines inserted in the kernel's body above its line 36. Each line is paired
    with the line its own rare instructions moved to (those above the insertion by 4, those below
    by 6), either way round; none reads added or removed, and no kernel of another name (ncu_diff_a's,
    matched by its place) is compared line by line."""
    edited = _planted(db, tmp_path, "UPDATE ncu_source SET line = line + 2 WHERE run_id = {run:shapes_int} "
                                    "AND line >= 36")
    one = _diff(edited, "shapes_a", "shapes_int")
    moved = dict(one.filter(pl.col("metric") == "inst_executed").select(
        pl.col("key").str.extract(r":(\d+)$").cast(pl.Int64), pl.col("note").str.extract(r"^line \d+ -> (\d+)")
        .cast(pl.Int64)).iter_rows())
    assert moved == {29: 33, 30: 34, 31: 35, 32: 38, 34: 40, 35: 41}
    other = _diff(edited, "shapes_int", "shapes_a")
    for df in (one, other):
        assert df.filter(pl.col("verdict").is_in(["added", "removed"])).is_empty()
    with tracekit.open(db, read_only=True) as tk:
        assert tk.diff("shapes_a", "diff_a", by="source").is_empty()


# -- two sweeps point by point: tests/data/ncu_source_sweep ----------------------------
#: `tracekit sweep --tool ncu --nvtx-capture shapes --grid size=16,24 -- python3 ncu_shapes.py a --sizes {size}`
#: on an H100 (Source Counters and the source text), twice (base, again), then the slow kernel (slow)
SWEEPS = DATA / "ncu_source_sweep"


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("source_sweeps") / "s.duckdb"
    ids = {}
    with tracekit.open(path) as tk:
        for name in ("base", "again", "slow"):
            for run in sorted((SWEEPS / name / "runs").iterdir()):
                tk.ingest(run)
            ids[name] = json.loads(next((SWEEPS / name).glob("sweep-*.json")).read_text())["sweep"]
    return path, ids


def test_two_sweeps_compare_line_by_line_at_each_point(sweeps, capsys, monkeypatch):
    """The slow kernel's sweep against the base's, point by point: at 2**24 elements the load in
    the loop (line 41) regressed, the other lines' share fell (said, not judged); at 2**16 (a 3 us
    kernel of a few hundred samples) no line is judged. The base's sweep against its repeat:
    nothing judged. The terminal table keys each row by its point and line."""
    path, ids = sweeps
    with pytest.warns(CaptureWarning, match="differ in setup: program"):  # (a ... --sizes 16 -> slow ...)
        df = _diff(path, ids["base"], ids["slow"])
    assert set(df["key"].str.extract(r"^(size=\d+): ")) == {"size=16", "size=24"}
    changed = df.filter(pl.col("verdict") != "unchanged")
    assert changed["key"].to_list() == ["size=24: shapes_kernel @ ncu_shapes.py:41"] and 40 < changed["delta_pct"][0] < 50
    assert changed["note"][0].endswith("code: acc += tl.load(x_ptr + (offs + r * 4099) % n, mask=mask)")
    inst = _row(df, "size=24: shapes_kernel @ ncu_shapes.py:41", "inst_executed")
    assert inst["new"] > 7 * inst["base"]
    again = _diff(path, ids["base"], ids["again"])
    assert again.height > 20 and set(again["verdict"]) == {"unchanged"}
    monkeypatch.setenv("COLUMNS", "120")
    rc, out, _ = _cli(capsys, "--db", str(path), "diff", ids["base"], ids["slow"], "--by", "source")
    first = out.splitlines()[2].split()
    assert rc == 0 and first[:2] == ["source", "size=24:"] and first[2].endswith(".py:41") and first[3] == "time_ns", out


def test_a_sweep_point_without_lines_is_named_not_fatal(sweeps, tmp_path, capsys):
    """Planted on the real sweeps: the base sweep's 2**16 point without its Source Counters is
    named in a warning, the other point compared line by line; with neither point's lines, one
    line and exit 2."""
    path, ids = sweeps
    one = tmp_path / "one.duckdb"
    shutil.copy(path, one)
    with duckdb.connect(str(one)) as con:
        con.execute("DELETE FROM ncu_source WHERE run_id = (SELECT run_id FROM runs WHERE name = "
                    "'20261206T190855.994Z-ncu_shapes-ncu-size=16')")
    with pytest.warns(CaptureWarning) as caught:
        df = _diff(one, ids["base"], ids["again"])
    said = [str(w.message) for w in caught if str(w.message).startswith("diff --by source: ")]
    assert len(said) == 1 and re.fullmatch(r"diff --by source: not compared line by line: size=16: run \d+ "
                                           r"\(\S+-size=16\) has no source lines of kernel launches to compare", said[0]), said
    assert set(df["key"].str.extract(r"^(size=\d+): ")) == {"size=24"}
    with duckdb.connect(str(one)) as con:
        con.execute("DELETE FROM ncu_source WHERE run_id = (SELECT run_id FROM runs WHERE name = "
                    "'20261206T190910.403Z-ncu_shapes-ncu-size=24')")
    rc, out, err = _cli(capsys, "--db", str(one), "diff", ids["base"], ids["again"], "--by", "source")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--by source: no point of sweep " in err, err


def test_sweeps_say_what_was_not_compared_once(sweeps, tmp_path):
    """Planted on the real sweeps: the base sweep's launches without warp samples at both points
    are said in one warning, point by point."""
    path, ids = sweeps
    planted = tmp_path / "p.duckdb"
    shutil.copy(path, planted)
    base = "(SELECT run_id FROM runs WHERE name LIKE '20261206T1908%' OR name LIKE '20261206T190910%')"
    with duckdb.connect(str(planted)) as con:
        con.execute(f"UPDATE ncu_source SET samples = 0 WHERE run_id IN {base}")
    with pytest.warns(CaptureWarning) as caught:
        _diff(planted, ids["base"], ids["slow"])
    said = [str(w.message) for w in caught if str(w.message).startswith("diff --by source: ")]
    assert len(said) == 1 and [p[:8] for p in said[0].split(": not compared line by line: ")[1].split("; ")] == [
        "size=16:", "size=24:"], said


def test_a_stored_repeat_without_lines_leaves_them_without_its_noise(sweeps, tmp_path, capsys):
    """Planted on the real sweeps: the second sweep stored as a repeat of the first, its 2**16
    point's Source Counters deleted. ``diff`` of that point's base and slow runs (the repeat
    taken from the store) judges the lines without the repeat's noise, said once, and the ncu
    rows with it; so does ``compare``, given the repeat, and report --vs's line section. The
    repeat sweep without any point's lines leaves two sweeps' lines the same way. The base
    without lines is still an error, said of the base, not of the repeat."""
    path, ids = sweeps
    planted = tmp_path / "p.duckdb"
    shutil.copy(path, planted)
    with duckdb.connect(str(planted)) as con:
        con.execute("UPDATE runs SET params = json_merge_patch(params, $p) WHERE name BETWEEN '20261206T190920' AND "
                    "'20261206T190950'", {"p": json.dumps({"sweep_repeat_of": ids["base"]})})
        con.execute("DELETE FROM ncu_source WHERE run_id = (SELECT run_id FROM runs WHERE name = "
                    "'20261206T190928.498Z-ncu_shapes-ncu-size=16')")
        vs, again, run = (str(con.execute("SELECT run_id FROM runs WHERE name = ?", [f"20261206T{n}-ncu_shapes-ncu-size=16"])
                              .fetchone()[0]) for n in ("190855.994Z", "190928.498Z", "190958.994Z"))
    lacking = (f"a repeat of the base: run {again} (20261206T190928.498Z-ncu_shapes-ncu-size=16) has no source "
               "lines of kernel launches to compare: the lines are judged without its noise")
    for by in ("source", "ncu,source"):
        rc, out, err = _cli(capsys, "--db", str(planted), "diff", vs, run, "--by", by, "-f", "csv")
        df = pl.read_csv(out.encode())
        assert rc == 0 and err.count(f"tracekit: warning: diff --by source: {lacking}\n") == 1, err
        assert df.filter(pl.col("scope") == "source").height > 5
        assert df.filter(pl.col("scope") == "source")["noise_pct"].null_count() == df.filter(
            pl.col("scope") == "source").height
        if by == "ncu,source":  # (the repeat's ncu rows measured their noise)
            assert df.filter(pl.col("scope") == "ncu")["noise_pct"].null_count() == 0
    with tracekit.open(planted, read_only=True) as tk, pytest.warns(CaptureWarning) as caught:
        df = tk.compare(vs, [run], by="source", repeats=[again])
    assert [str(w.message) for w in caught].count(f"compare --by source: {lacking}") == 1
    assert df.filter(~pl.col("repeat")).height > 5 and df.filter(pl.col("repeat")).is_empty()
    out = tmp_path / "r.html"
    rc, _, _ = _cli(capsys, "--db", str(planted), "report", "--run", run, "--vs", vs, "-o", str(out))
    section = out.read_text().split('<section id="diff-source">')[1].split("</section>")[0]
    assert rc == 0 and f"{lacking[0].upper()}{lacking[1:]}." in section and "ncu_shapes.py:41" in section
    with duckdb.connect(str(planted)) as con:  # (the repeat sweep without lines at any point)
        con.execute("DELETE FROM ncu_source WHERE run_id IN (SELECT run_id FROM runs WHERE name LIKE '20261206T1909_%' "
                    "AND name < '20261206T190950')")
    with tracekit.open(planted, read_only=True) as tk, pytest.warns(CaptureWarning) as caught:
        df = tk.diff(ids["base"], ids["slow"], by="source")
    said = [str(w.message) for w in caught if str(w.message).startswith("diff --by source: a repeat of the base: ")]
    assert len(said) == 1 and f"no point of sweep {ids['base']} and sweep {ids['again']} has source lines" in said[0], said
    assert df.height > 10 and df["noise_pct"].null_count() == df.height
    with duckdb.connect(str(planted)) as con:  # (the base without lines: the question asked of it)
        con.execute(f"DELETE FROM ncu_source WHERE run_id = {vs}")
    rc, out, err = _cli(capsys, "--db", str(planted), "diff", vs, run, "--by", "source")
    assert rc == 2 and out == "" and err.startswith(f"tracekit: error: --by source: run {vs} (") and \
        "has no source lines" in err and "--repeat" not in err, err
