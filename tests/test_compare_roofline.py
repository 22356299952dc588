"""Several ncu runs against one base on one roofline (chart compare-roofline), on real reports:

* tests/data/hstu_capture_ncu_pair: base, base_again (the same command again: noise) and
  half_sms (the cached attention kernel given half the SMs: its 8 launches about 70 % slower,
  the same work);
* tests/data/ncu_shapes_a, _a_again and _a_again2 (noise) and _slow (one Triton kernel made to
  read its input four times), _int (the kernel on int32: no floating-point work), and
  ncu_diff_a (another kernel, matched by launch order).

Each run's point of a kernel is the point diff-roofline draws for the pair (base, that run):
one mechanism, the base's kernels as the keys every run is placed by.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import spec_datasets

import tracekit
from tracekit import charts
from tracekit.cli import main as cli_main
from tracekit.errors import ParamError, QueryError

DATA = Path(__file__).parent / "data"
NCU_PAIR = DATA / "hstu_capture_ncu_pair"
SWEEP_NCU = sorted((DATA / "hstu_sweep_tools" / "runs").glob("*-ncu"))

#: hstu_capture_ncu_pair's half_sms ran with a tiles file: compare says so, as it should
pytestmark = [pytest.mark.filterwarnings("ignore:compare. half_sms. the captures differ in setup"),
              pytest.mark.filterwarnings("ignore:diff. the captures differ in setup")]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("compare_roofline") / "r.duckdb"
    with tracekit.open(db) as tk:
        for v in ("a", "a_again", "slow"):
            tk.ingest(DATA / f"ncu_shapes_{v}" / "report.ncu-rep.xz", name=f"shapes_{v}")
        for run in ("base", "base_again", "half_sms"):
            tk.ingest(NCU_PAIR / run, name=run)
        for v in ("ncu_diff_a", "ncu_range", "ncu_diff_b"):
            tk.ingest(DATA / v / "report.ncu-rep.xz", name=v)
        tk.ingest(DATA / "nsys_diff_base_a" / "export.sqlite.xz", name="nsys")
        tk.ingest(SWEEP_NCU[0], name="point_bs1")
        for v in ("a_again2", "int"):
            tk.ingest(DATA / f"ncu_shapes_{v}" / "report.ncu-rep.xz", name=f"shapes_{v}")
    return db


def _point(df: pl.DataFrame, key: str, side: int) -> dict:
    rows = df.filter((pl.col("key") == key) & (pl.col("side") == side)).to_dicts()
    assert len(rows) == 1, (key, side, rows)
    return rows[0]


POINT = ["launches", "duration_ns", "flop", "dram_bytes", "ai_dram", "flops_per_s", "roof_pct", "precision", "bound"]


def test_each_runs_point_is_the_point_of_its_own_pair_with_the_base(store):
    """hstu_capture_ncu_pair: every kernel with floating-point work at its point in the base,
    base_again and half_sms; each run's point and verdict are those diff-roofline gives for
    that run against the base, the base's the same in both; the attention kernel's 8 keys
    regressed in half_sms alone, at the same FLOP and a lower rate."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.compare_roofline_data(tk, base="base", runs="base_again,half_sms", limit=0)
        pairs = {run: charts.diff_roofline_data(tk, base="base", new=run, limit=0) for run in ("base_again", "half_sms")}
    assert df.filter(pl.col("side") == 0)["run"].unique().to_list() == ["base: base"]
    assert set(df["run"]) == {"base: base", "base_again", "half_sms"}
    keys = set(df["key"])
    assert keys == set(pairs["base_again"]["key"]) == set(pairs["half_sms"]["key"])
    assert df.height == 3 * len(keys)
    for side, run in ((1, "base_again"), (2, "half_sms")):
        pair = pairs[run]
        for key in keys:
            mine, base, new = _point(df, key, side), _point(pair, key, 0), _point(pair, key, 1)
            assert {c: mine[c] for c in POINT} == {c: new[c] for c in POINT}
            assert {c: _point(df, key, 0)[c] for c in POINT} == {c: base[c] for c in POINT}
            assert (mine["verdict"], mine["delta_pct"]) == (new["verdict"], new["delta_pct"])
    assert df.filter(pl.col("side") == 0)["verdict"].is_null().all()
    attention = sorted(k for k in keys if k.startswith("_hstu_cached_sk_kernel"))
    assert len(attention) == 8
    for key in attention:
        base, again, half = (_point(df, key, s) for s in (0, 1, 2))
        assert again["verdict"] == "unchanged" and half["verdict"] == "regressed" and half["delta_pct"] > 60
        assert half["flop"] == pytest.approx(base["flop"], rel=0.01) and half["flops_per_s"] < 0.7 * base["flops_per_s"]
    regressed = set(df.filter(pl.col("verdict") == "regressed")["key"])
    assert regressed == set(attention)


def test_a_kernel_regressed_in_one_run_and_unchanged_in_its_repeat(store):
    """ncu_shapes: the slow kernel moved up and right (more FLOP per byte and per second) and
    regressed; the capture again sits on the base's point, unchanged."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.compare_roofline_data(tk, base="shapes_a", runs="shapes_a_again,shapes_slow")
        launches = {v: tk.query("roofline", run=f"shapes_{v}") for v in ("a", "a_again", "slow")}
    assert df["key"].to_list() == ["shapes_kernel"] * 3 and df["side"].to_list() == [0, 1, 2]
    for side, v in enumerate(("a", "a_again", "slow")):
        point, rows = _point(df, "shapes_kernel", side), launches[v]
        assert point["launches"] == rows.height == 6
        assert point["flops_per_s"] == pytest.approx(rows["flop"].sum() / rows["duration_ns"].sum() * 1e9)
        assert point["ai_dram"] == pytest.approx(rows["flop"].sum() / rows["dram_bytes"].sum())
    base, again, slow = (_point(df, "shapes_kernel", s) for s in (0, 1, 2))
    assert again["verdict"] == "unchanged" and abs(again["ai_dram"] / base["ai_dram"] - 1) < 0.01
    assert slow["verdict"] == "regressed" and slow["delta_pct"] == pytest.approx(14.5, abs=0.5)
    assert slow["ai_dram"] > 2 * base["ai_dram"] and slow["flops_per_s"] > 2 * base["flops_per_s"]


def test_a_kernel_of_another_name_is_placed_by_the_base_kernel_it_was_matched_to(store):
    """ncu_diff_a's one kernel (scale_add_kernel) is matched to ncu_shapes_a's (shapes_kernel)
    by launch order, as diff matches them: it is drawn under the base's kernel, with its own
    name, beside shapes_slow's point of the same kernel matched by name."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.compare_roofline_data(tk, base="shapes_a", runs="ncu_diff_a,shapes_slow")
        spec = charts.chart(tk, "compare-roofline", base="shapes_a", runs="ncu_diff_a,shapes_slow").to_dict()
    other, slow = _point(df, "shapes_kernel", 1), _point(df, "shapes_kernel", 2)
    assert (other["name"], other["how"]) == ("scale_add_kernel", "matched by launch order to base kernel shapes_kernel")
    assert (slow["name"], slow["how"]) == ("shapes_kernel", "matched by name and NVTX path")
    assert other["run"] == "ncu_diff_a" and other["launches"] == 3
    assert "matched by launch order, another kernel's name in a run (1)" in " ".join(spec["title"]["subtitle"])


def test_repeats_of_the_base_hold_a_change_no_larger_than_theirs(store):
    """-p repeats=base_again: half_sms's attention kernel moved far beyond the repeat's noise
    (still regressed); the repeat itself is not drawn, and the subtitle names it."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.compare_roofline_data(tk, base="base", runs="half_sms", repeats="base_again", limit=0)
        plain = charts.compare_roofline_data(tk, base="base", runs="half_sms", limit=0)
        rows = tk.compare("base", ["half_sms"], by="ncu", repeats=["base_again"])
        spec = charts.compare_roofline(df).to_dict()
    assert set(df["side"]) == {0, 1} and set(df["run"]) == {"base: base", "half_sms"}
    assert set(df["key"]) == set(plain["key"])
    durations = rows.filter((pl.col("metric") == "duration_ns") & ~pl.col("repeat"))
    held = {k for k, n in zip(durations["key"], durations["note"], strict=True) if "within the repeats' noise" in (n or "")}
    for r in df.filter(pl.col("side") == 1).iter_rows(named=True):
        assert (r["verdict"] == "within the repeats' noise") == (r["key"] in held)
    assert set(df.filter(pl.col("verdict") == "regressed")["key"]) == \
        {k for k in df["key"] if k.startswith("_hstu_cached_sk_kernel")}
    assert "repeats of the base measured the noise (base_again)" in " ".join(spec["title"]["subtitle"])


def test_the_chart_draws_the_base_hollow_each_run_filled_and_a_line_to_each(store, tmp_path):
    with tracekit.open(store, read_only=True) as tk:
        df = charts.compare_roofline_data(tk, base="shapes_a", runs="shapes_a_again,shapes_slow")
        spec = charts.chart(tk, "compare-roofline", base="shapes_a", runs="shapes_a_again,shapes_slow").to_dict()
    marks = [layer.get("mark") for layer in spec["layer"]]
    points = [m for m in marks if isinstance(m, dict) and m.get("type") == "point"]
    assert [m.get("filled") for m in points] == [True, False]
    rows = [r for ds in spec_datasets(spec) for r in ds if "pair" in r]
    assert sorted({r["pair"] for r in rows}) == ["1|shapes_kernel", "2|shapes_kernel"]
    assert {(r["pair"], r["end"], r["ai_dram"]) for r in rows} == {
        (f"{s}|shapes_kernel", end, _point(df, "shapes_kernel", 0 if end == 0 else s)["ai_dram"])
        for s in (1, 2) for end in (0, 1)}
    judged = {r["pair"]: r["judged"] for r in rows}
    assert judged == {"1|shapes_kernel": False, "2|shapes_kernel": True}
    assert spec["title"]["text"] == "Roofline: 2 runs against the base"
    for name in ("r.png", "r.html"):
        out = tmp_path / name
        assert cli_main(["--db", str(store), "chart", "compare-roofline", "-p", "base=shapes_a", "-p",
                         "runs=shapes_a_again,shapes_slow", "-o", str(out)]) == 0
        assert out.stat().st_size > 10_000


def test_the_limit_and_the_kernel_filter(store):
    """-p limit=N: the kernels judged changed in any run first (the 8 attention keys), then
    the largest others; -p kernel=TEXT: the kernels of that name in some run."""
    with tracekit.open(store, read_only=True) as tk:
        ten = charts.compare_roofline_data(tk, base="base", runs="base_again,half_sms", limit=10)
        nvjet = charts.compare_roofline_data(tk, base="base", runs="base_again,half_sms", kernel="NVJET", limit=0)
        other = charts.compare_roofline_data(tk, base="shapes_a", runs="ncu_diff_a", kernel="scale_add")
    assert ten["key"].n_unique() == 10
    assert sum(k.startswith("_hstu_cached_sk_kernel") for k in ten["key"].unique()) == 8
    assert nvjet["key"].n_unique() > 1 and all(k.startswith("nvjet") for k in nvjet["key"])
    assert other["key"].unique().to_list() == ["shapes_kernel"] and other.height == 2


@pytest.mark.parametrize("params, error, said", [
    ({"base": "shapes_a"}, ParamError, "chart compare-roofline: give the ncu runs as -p base=RUN -p runs=RUN,RUN,..."),
    ({"base": "shapes_a", "runs": " , "}, ParamError, "chart compare-roofline: give the ncu runs as"),
    ({"base": "shapes_a", "runs": "shapes_slow,nsys"}, QueryError,
     "chart compare-roofline: run 10 (nsys) [nsys] has no ncu scope"),
    ({"base": "shapes_a", "runs": "shapes_slow", "kernel": "gemm"}, QueryError,
     "chart compare-roofline: no kernel of run 1 (shapes_a), run 3 (shapes_slow) with floating-point work has 'gemm'"),
    ({"base": "shapes_a", "runs": "shapes_slow,shapes_a"}, ParamError,
     "chart compare-roofline: 'shapes_a' is run 1 (shapes_a), the base; name each run once"),
    ({"base": "shapes_a", "runs": "ncu_range"}, QueryError,
     "chart compare-roofline: run 8 (ncu_range): nothing to plot; metrics not in the report: "),
    ({"base": "shapes_a", "runs": "shapes_slow,99"}, QueryError, "chart compare-roofline: no run or sweep '99' in "),
    ({"base": "shapes_a", "runs": "shapes_slow", "limit": "x"}, ParamError, "chart compare-roofline: limit='x': an integer expected"),
])
def test_wrong_runs_and_values_are_errors(store, params, error, said):
    with tracekit.open(store, read_only=True) as tk, pytest.raises(error) as err:
        charts.chart(tk, "compare-roofline", **params)
    assert str(err.value).startswith(said), str(err.value)


def test_a_sweep_is_refused_and_the_cli_says_it_in_one_line(store, tmp_path, capsys):
    with tracekit.open(store, read_only=True) as tk:
        sweep = tk.con.execute("SELECT json_extract_string(params, '$.sweep') FROM runs WHERE name = 'point_bs1'"
                               ).fetchall()[0][0]
    capsys.readouterr()
    out = tmp_path / "x.html"
    assert cli_main(["--db", str(store), "chart", "compare-roofline", "-p", "base=shapes_a", "-p",
                     f"runs={sweep}", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tracekit: error: chart compare-roofline: sweep {sweep} is not a run; compare several ncu runs (a sweep's "
                   f"points on one roofline: tracekit chart sweep-roofline -p sweep=ID)"]
    assert not out.exists()


def test_a_run_given_as_a_file_is_ingested_by_the_comparison(store, tmp_path):
    """A report given by its path joins the store as compare ingests it, and is drawn under
    its file's name."""
    db = tmp_path / "w.duckdb"
    shutil.copy(store, db)
    report = DATA / "ncu_shapes_slow" / "report.ncu-rep.xz"
    with tracekit.open(db) as tk:
        before = tk.con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
        df = charts.compare_roofline_data(tk, base="shapes_a", runs=str(report))
        after = tk.con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
    # (the same content as run shapes_slow: the same run, nothing added)
    assert after == before
    assert _point(df, "shapes_kernel", 1)["verdict"] == "regressed"
    assert _point(df, "shapes_kernel", 1)["run"] == str(report)


def test_the_runs_keep_the_order_given_when_a_later_runs_key_comes_first(store, capsys, monkeypatch):
    """ncu_diff_a against ncu_shapes_a and ncu_diff_b: the comparison's first key is ncu_diff_b's
    (scale_add_kernel, matched by name), shapes_a's kernel is matched by launch order; compare's
    runs, its table's columns and the chart's points keep the order given, each point with its own
    run's verdict (that run's diff-roofline against the base)."""
    from tracekit.compare import runs_of

    with tracekit.open(store, read_only=True) as tk:
        df = tk.compare("ncu_diff_a", ["shapes_a", "ncu_diff_b"])
        points = charts.compare_roofline_data(tk, base="ncu_diff_a", runs="shapes_a,ncu_diff_b")
        pairs = [charts.diff_roofline_data(tk, base="ncu_diff_a", new=run) for run in ("shapes_a", "ncu_diff_b")]
    assert list(dict.fromkeys(df["run"].cast(pl.String))) == ["ncu_diff_b", "shapes_a"]  # (the rows' order)
    assert runs_of(df) == ["shapes_a", "ncu_diff_b"]
    assert points["run"].to_list() == ["base: ncu_diff_a", "shapes_a", "ncu_diff_b"]
    for side, pair in enumerate(pairs, start=1):
        mine, theirs = points.filter(pl.col("side") == side).row(0, named=True), pair.filter(pl.col("side") == 1)
        assert (mine["name"], mine["verdict"], mine["delta_pct"]) == (theirs["name"][0], theirs["verdict"][0],
                                                                       theirs["delta_pct"][0])
    assert points.filter(pl.col("side") == 1)["verdict"][0] == "improved"
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "120")
    assert cli_main(["--db", str(store), "compare", "ncu_diff_a", "shapes_a", "ncu_diff_b"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[next(i for i, line in enumerate(lines) if line.startswith("-----")) - 1].split()  # (over the rule)
    assert head[-2:] == ["shapes_a", "ncu_diff_b"], lines[:3]


def test_a_change_within_the_repeats_noise_is_drawn_as_held(store):
    """A point whose change a repeat's matched is drawn as held, as compare holds its row. The
    fixtures have no third capture of one setup, so base_again stands as the repeat of half_sms
    (which it is not: the mechanism is what is tested): base's GEMMs and short kernels changed
    against half_sms as much as base_again did, and are held."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.compare_roofline_data(tk, base="half_sms", runs="base", repeats="base_again", limit=0)
        rows = tk.compare("half_sms", ["base"], by="ncu", repeats=["base_again"])
    durations = rows.filter((pl.col("metric") == "duration_ns") & ~pl.col("repeat"))
    held = {k for k, n in zip(durations["key"], durations["note"], strict=True) if "within the repeats' noise" in (n or "")}
    drawn = set(df.filter(pl.col("verdict") == "within the repeats' noise")["key"])
    assert held & set(df["key"]) and drawn == held & set(df["key"])


def test_a_run_labelled_as_compare_labels_it(store, tmp_path):
    """A run named like a column of compare's table (``metric``) is labelled with its id by
    compare; the chart draws its points under compare's label, with a repeat given too."""
    db = tmp_path / "named.duckdb"
    shutil.copy(store, db)
    with tracekit.open(db) as tk:
        tk.rename_run("half_sms", "metric")
        df = charts.compare_roofline_data(tk, base="base", runs="metric", repeats="base_again", limit=0)
        spec = charts.compare_roofline(df).to_dict()
    assert set(df["run"]) == {"base: base", "metric (run 6)"}
    assert df.filter(pl.col("side") == 1).height == df.filter(pl.col("side") == 0).height > 0
    colour = next(layer["encoding"]["color"] for layer in spec["layer"] if "color" in layer.get("encoding", {})
                  and layer["encoding"]["color"].get("field") == "run")
    assert colour["scale"]["domain"] == ["base: base", "metric (run 6)"]


def _placed(spec: dict) -> list[dict]:
    """The point labels a roofline's spec places: the rows of its text layers of ``label``."""
    out = []
    for layer in spec["layer"]:
        mark = layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]
        if mark == "text" and layer["encoding"]["text"]["field"] == "label":
            data = layer["data"]
            out += spec["datasets"][data["name"]] if "name" in data else data["values"]
    return out


def test_points_whose_markers_meet_get_one_label_of_their_kernel_and_count(store):
    """The eight layers' cached attention keys sit on one spot in every roofline of the pair:
    one label says the kernel and how many, at one of their points (the base's in
    compare-roofline, the new run's in diff-roofline, a launch's in the run's roofline); a spot
    of one key keeps its own label."""
    attention = "_hstu_cached_sk_kernel ×8"
    with tracekit.open(store, read_only=True) as tk:
        df = charts.compare_roofline_data(tk, base="base", runs="base_again,half_sms")
        compared = charts.compare_roofline(df).to_dict()
        pair = charts.diff_roofline_data(tk, base="base", new="half_sms")
        diffed = charts.diff_roofline(pair).to_dict()
        run = tk.query("roofline", run="base")
        one = charts.roofline(run).to_dict()
    for spec, rows, side in ((compared, df, 0), (diffed, pair, 1)):
        placed = {p["label"]: p for p in _placed(spec)}
        assert attention in placed and 0 < len(placed) <= charts.ROOF_LABELS, sorted(placed)
        at = rows.filter(pl.col("name").str.starts_with("_hstu_cached_sk_kernel") & (pl.col("side") == side))
        assert at.height == 8 and placed[attention]["key"] in at["key"].to_list()
        single = [k for k in placed if "×" not in k and " more" not in k]
        assert single and all(placed[k]["label"] == k for k in single)
    placed = {p["label"]: p for p in _placed(one)}
    launches = run.filter(pl.col("name").str.starts_with("_hstu_cached_sk_kernel"))
    assert attention in placed and launches.height == 8
    assert placed[attention]["ai_dram"] in launches["ai_dram"].to_list()


def test_a_spot_of_several_kernels_names_the_first_and_past_the_cap_no_label_is_placed(store):
    """Markers of different kernels that meet: the first one's label and how many more; more
    spots than ROOF_LABELS (the run's launches spread apart): no label, the tooltips name the
    points."""
    rows = [{"label": "a @ x", "name": "a"}, {"label": "b @ x", "name": "b"}, {"label": "b @ y", "name": "b"}]
    assert charts._spot_label(rows[:1]) == "a @ x"
    assert charts._spot_label(rows) == "a @ x +2 more" and charts._spot_label(rows[1:]) == "b ×2"
    with tracekit.open(store, read_only=True) as tk:
        run = tk.query("roofline", run="base").filter(pl.col("flops_per_s") > 0)
    n = charts.ROOF_LABELS + 1
    spread = run.head(n).with_columns(pl.Series("ai_dram", [2.0 ** i for i in range(n)]))
    assert run.height > n and _placed(charts.roofline(spread).to_dict()) == []
    assert len(_placed(charts.roofline(spread.head(n - 1)).to_dict())) > 0


def test_a_run_or_base_whose_kernel_does_no_floating_point_work_is_said_not_left_blank(store):
    """ncu_shapes_int runs the kernel on int32: its launches are paired with shapes_a's, but have
    no point. As a run, its legend entry has no mark and the subtitle says how many of the base's
    kernels it lacks; as the base, the runs' points are in runs only."""
    with tracekit.open(store, read_only=True) as tk:
        as_run = charts.compare_roofline_data(tk, base="shapes_a", runs="shapes_int,shapes_slow,shapes_a_again2")
        as_base = charts.compare_roofline_data(tk, base="shapes_int", runs="shapes_a,shapes_slow")
    assert as_run["runs"][0].to_list() == ["base: shapes_a", "shapes_int", "shapes_slow", "shapes_a_again2"]
    assert sorted(as_run["run"].unique()) == ["base: shapes_a", "shapes_a_again2", "shapes_slow"]
    subtitle = charts.compare_roofline(as_run).to_dict()["title"]["subtitle"]
    assert "the base's kernels with no point in a run: shapes_int (1) (removed, or no floating-point work or no " \
           "DRAM byte measured there)" in subtitle
    assert (as_base["side"] > 0).all() and as_base.height == 2
    subtitle = charts.compare_roofline(as_base).to_dict()["title"]["subtitle"]
    assert "in runs only, no point in the base (1): added, or no floating-point work or no DRAM byte measured in " \
           "the base" in subtitle
    assert not any(line.startswith("the base's kernels with no point") for line in subtitle)


def test_a_kernel_judged_changed_in_a_run_is_labelled_before_larger_unjudged_ones(store):
    """A kernel's label sits at its base point, which has no verdict of its own: the kernel is
    judged first where a run's point of it was judged. Ten of hstu_capture_ncu_pair's keys set on
    a tight diagonal (their labels compete for room), the one judged regressed in half_sms (an
    attention layer) given the least time: it is labelled, ahead of GEMMs with more time."""
    with tracekit.open(store, read_only=True) as tk:
        df = charts.compare_roofline_data(tk, base="base", runs="half_sms", limit=0)
    judged = set(df.filter(pl.col("verdict") == "regressed")["key"])
    others = df.filter((pl.col("side") == 0) & ~pl.col("key").is_in(list(judged))).sort("duration_ns")["key"]
    pick = [sorted(judged)[0], *others.tail(9).to_list()]
    at = {k: (i + 5) % len(pick) for i, k in enumerate(pick)}  # (the judged one amid the others)
    crowded = df.filter(pl.col("key").is_in(pick)).with_columns(
        pl.col("key").replace_strict(at, return_dtype=pl.Int64).alias("_at")).with_columns(
        (0.5 * 1.25 ** pl.col("_at")).alias("ai_dram"), (1e12 * 1.25 ** pl.col("_at")).alias("flops_per_s"),
        pl.when(pl.col("key") == pick[0]).then(1000.0).otherwise(pl.col("duration_ns")).alias("duration_ns"),
    ).drop("_at")
    placed = [p["key"] for p in _placed(charts.compare_roofline(crowded).to_dict())]
    assert pick[0] in placed and 0 < len(placed) < len(pick), placed
