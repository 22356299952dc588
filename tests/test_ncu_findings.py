"""ncu's guided analysis (ncu-rules) and warp states (warp-stalls) against the committed
real reports.

Goldens: every rule row of ``ncu --page details --csv`` for the same report (section, rule,
type, message as printed, speedup type, speedup to the 4 significant digits it prints),
read from the report through ncu_report and from the details page itself; the warp
states and stall samples equal the raw page's metrics (``ncu --page raw --print-units
base``), whose printed decimals the report's values round to.
"""

from __future__ import annotations

import csv
import io
import lzma

import polars as pl
import pytest
from conftest import DATA, spec_datasets

import tracekit
from tracekit.errors import ParamError, QueryError
from tracekit.ingest import ncu_rules

#: fixture -> (report, details page, raw page)
REPORTS = {
    "ncu_full": ("report.ncu-rep.xz", "details.csv.xz", "raw.csv.xz"),
    "ncu_sections": ("report.ncu-rep.xz", "details.csv.xz", "raw.csv.xz"),
    "ncu_diff_a": ("report.ncu-rep.xz", "details.csv.xz", "raw.csv.xz"),
    "ncu_diff_b": ("report.ncu-rep.xz", "details.csv.xz", "raw.csv.xz"),
    "hstu_capture_ncu": ("ncu.ncu-rep.xz", "ncu_details.csv.xz", "ncu_raw.csv.xz"),
    "ncu_libs": ("report.ncu-rep.xz", "details.csv.xz", "raw.csv.xz"),
}
#: fixtures profiled with the WarpStateStats and SourceCounters sections (--set full)
WARP_STATES = ["ncu_full", "ncu_diff_a", "ncu_diff_b", "ncu_libs"]


def csv_rows(path) -> list[dict]:
    text = lzma.decompress(path.read_bytes()).decode()
    return list(csv.DictReader(io.StringIO("\n".join(line for line in text.splitlines() if not line.startswith("==")))))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Every fixture's report, details page and raw page, one run each (name fixture/kind)."""
    tk = tracekit.open(tmp_path_factory.mktemp("findings") / "s.duckdb")
    for fixture, files in REPORTS.items():
        for kind, f in zip(("report", "details", "raw"), files, strict=True):
            tk.ingest(DATA / fixture / f, name=f"{fixture}/{kind}")
    yield tk
    tk.close()


@pytest.mark.parametrize("source", ["report", "details"])
@pytest.mark.parametrize("fixture", list(REPORTS))
def test_rules_equal_the_details_page(store, fixture, source):
    want = sorted(
        (int(r["ID"]), r["Section Name"], r["Rule Name"], r["Rule Type"], r["Rule Description"],
         r["Estimated Speedup Type"] or None, r["Estimated Speedup"] or None)
        for r in csv_rows(DATA / fixture / REPORTS[fixture][1]) if r["Rule Name"]
    )
    got = store.query("ncu-rules", run=f"{fixture}/{source}", limit=0)
    assert sorted(
        (r["kernel_id"], r["section"], r["rule"], r["rule_type"], r["message"], r["speedup_type"],
         None if r["speedup_pct"] is None else format(r["speedup_pct"], ".4g"))
        for r in got.to_dicts()
    ) == want
    assert len(want) >= 10
    if source == "report":  # titles come with the report only
        assert got["title"].drop_nulls().len() > 0
    else:
        assert got["title"].null_count() == got.height


def test_rules_rank_by_time_saved(store):
    df = store.query("ncu-rules", run="ncu_full/report", limit=0)
    dur = store.query("ncu-kernels", run="ncu_full/report").select("kernel_id", "duration_ns")
    df = df.join(dur, on="kernel_id", suffix="_k")
    assert (df["duration_ns"] == df["duration_ns_k"]).all()
    glob = df.filter(pl.col("speedup_type") == "global")
    assert glob.height > 0
    assert ((glob["est_saved_ns"] - glob["duration_ns"] * glob["speedup_pct"] / 100).abs() < 1e-6).all()
    others = df.filter(pl.col("speedup_type").fill_null("") != "global")
    assert others.height == df.height - glob.height and others["est_saved_ns"].null_count() == others.height
    saved = df["est_saved_ns"].drop_nulls().to_list()
    assert saved == sorted(saved, reverse=True) and df["est_saved_ns"][: len(saved)].null_count() == 0
    # the finding that saves most: the GEMM's L2 compression (17 % of its 176 us)
    top = df.row(0, named=True)
    assert top["rule"] == "MemoryL2Compression" and top["name"].startswith("nvjet")


def test_rules_filters(store):
    all_rows = store.query("ncu-rules", run="ncu_full/report", limit=0)
    opt = store.query("ncu-rules", run="ncu_full/report", type="opt", limit=0)
    assert set(opt["rule_type"]) == {"OPT"} and opt.height == (all_rows["rule_type"] == "OPT").sum()
    two = store.query("ncu-rules", run="ncu_full/report", type="WRN, INF", limit=0)
    assert set(two["rule_type"]) == {"WRN", "INF"}
    soft = store.query("ncu-rules", run="ncu_full/report", kernel="SOFTMAX", limit=0)
    assert soft.height > 0 and set(soft["name"]) == {"softmax_kernel"}
    assert store.query("ncu-rules", run="all", limit=0).height == sum(
        store.query("ncu-rules", run=f"{f}/{s}", limit=0).height for f in REPORTS for s in ("report", "details"))
    with pytest.raises(ParamError, match="type=OPTS: choose from OPT, WRN, ERR, INF, all"):
        store.query("ncu-rules", run="ncu_full/report", type="OPTS")
    with pytest.raises(ParamError, match="type=OPT,X: choose from"):  # even where nothing matched
        store.query("ncu-rules", run="ncu_full/report", type="OPT,X", kernel="no such kernel")


def test_rules_per_kernel(store):
    """group=kernel: one row per kernel, NVTX range and finding, over its launches; a finding
    ncu writes several rows of for one launch (WorkloadImbalance of SMs, SMSPs, L1 and L2
    slices) counts once per launch, at its largest estimate."""
    keys = ["name", "nvtx_range", "section", "rule", "rule_type", "speedup_type"]
    for fixture in REPORTS:
        launch = store.query("ncu-rules", run=f"{fixture}/report", limit=0)
        kernel = store.query("ncu-rules", run=f"{fixture}/report", group="kernel", limit=0)
        best = pl.col("est_saved_ns").fill_null(-1), pl.col("speedup_pct").fill_null(-1), pl.col("message")
        once = launch.group_by("kernel_id", *keys).agg(
            pl.col("speedup_pct").max(), pl.col("est_saved_ns").max(),
            pl.col("message").sort_by(*best, descending=True).first())
        want = (once.group_by(keys).agg(pl.len().alias("launches"), pl.col("kernel_id").min(),
                                        pl.col("speedup_pct").median(), pl.col("est_saved_ns").sum(),
                                        pl.col("message").sort_by(pl.col("est_saved_ns").fill_null(-1),
                                                                  pl.col("speedup_pct").fill_null(-1),
                                                                  -pl.col("kernel_id"), descending=True).first()))
        got = kernel.select(*want.columns).join(want, on=keys, nulls_equal=True, suffix="_want")
        assert got.height == kernel.height == want.height, fixture
        for c in ("launches", "kernel_id", "message"):
            assert (got[c] == got[f"{c}_want"]).all(), (fixture, c)
        for c in ("speedup_pct", "est_saved_ns"):
            assert ((got[c] - got[f"{c}_want"]).abs() <= 1e-9 * got[f"{c}_want"].abs()).all(), (fixture, c)
        # a kernel's launches: never more than it has
        launches = launch.group_by("name", "nvtx_range").agg(pl.col("kernel_id").n_unique().alias("n"))
        over = kernel.join(launches, on=["name", "nvtx_range"], nulls_equal=True).filter(pl.col("launches") > pl.col("n"))
        assert over.is_empty(), (fixture, over)
    # ncu_full's reduce_kernel, one launch: its four WorkloadImbalance rows of the details page (8.30, 7.89,
    # 8.30, 6.25 %) are one finding of 8.30 % of 23.36 us, not 4 launches saving 7.18 us
    imbalance = store.query("ncu-rules", run="ncu_full/report", group="kernel", kernel="reduce", limit=0).filter(
        pl.col("rule") == "WorkloadImbalance").row(0, named=True)
    details = [r for r in csv_rows(DATA / "ncu_full" / "details.csv.xz")
               if r["Rule Name"] == "WorkloadImbalance" and "reduce" in r["Kernel Name"]]
    assert len(details) == 4 and imbalance["launches"] == 1
    assert imbalance["speedup_pct"] == pytest.approx(max(float(r["Estimated Speedup"]) for r in details), abs=0.01)
    assert imbalance["est_saved_ns"] == pytest.approx(imbalance["duration_ns"] * imbalance["speedup_pct"] / 100)
    run = "hstu_capture_ncu/report"
    kernel = store.query("ncu-rules", run=run, group="kernel", limit=0)
    saved = kernel["est_saved_ns"].drop_nulls().to_list()
    assert saved == sorted(saved, reverse=True)
    # the attention kernel's 8 launches are one row per finding
    attn = kernel.filter(pl.col("name") == "_hstu_cached_sk_kernel")
    assert attn.height > 0 and set(attn["launches"]) == {8}
    with pytest.raises(ParamError, match="group=name: choose launch or kernel"):
        store.query("ncu-rules", run=run, group="name")
    with pytest.raises(ParamError, match="group=name: choose launch or kernel"):  # even where nothing matched
        store.query("ncu-rules", run=run, group="name", kernel="no such kernel")


def test_rules_of_a_raw_page_run_are_an_error(store, tmp_path):
    with pytest.raises(QueryError, match=r"^ncu-rules: run \d+ \(ncu_full/raw\) has no rule results: ncu's raw CSV "
                                         "page has none"):
        store.query("ncu-rules", run="ncu_full/raw")
    tk = tracekit.open(tmp_path / "raw.duckdb")
    tk.ingest(DATA / "ncu_full" / "raw.csv.xz")
    with pytest.raises(QueryError, match="^ncu-rules: no run has rule results"):
        tk.query("ncu-rules", run="all")
    tk.close()


def test_markup_rendered_as_the_details_page_prints_it():
    r = ncu_rules.render
    assert r("See @section:SourceCounters:Source Counters@ and the @url:Profiling Guide:https://x.y/z#a@.") == (
        "See Source Counters and the Profiling Guide (https://x.y/z#a).")
    assert r("@url:https://x.y@") == "https://x.y"  # no display text
    assert r("no markup, an e-mail a@b and 50%") == "no markup, an e-mail a@b and 50%"
    assert r(None) is None


def test_details_page_without_speedup_columns(tmp_path):
    """A details page from before ncu estimated speedups: the rules, without estimates."""
    rows = list(csv.reader(io.StringIO(lzma.decompress((DATA / "ncu_sections" / "details.csv.xz").read_bytes())
                                       .decode())))
    header = rows[0]
    keep = [i for i, c in enumerate(header) if c not in ("Estimated Speedup Type", "Estimated Speedup")]
    with open(tmp_path / "old.csv", "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        for r in rows:  # (metric rows end after their value; rule rows are whole)
            w.writerow([r[i] for i in keep] if len(r) == len(header) else r)
    tk = tracekit.open(tmp_path / "s.duckdb")
    tk.ingest(tmp_path / "old.csv")
    got = tk.query("ncu-rules", limit=0)
    want = [r for r in csv_rows(DATA / "ncu_sections" / "details.csv.xz") if r["Rule Name"]]
    assert sorted(got["message"]) == sorted(r["Rule Description"] for r in want)
    assert got["speedup_pct"].null_count() == got["speedup_type"].null_count() == got.height
    tk.close()


def test_a_speedup_that_is_not_a_number_is_refused(tmp_path):
    text = lzma.decompress((DATA / "ncu_sections" / "details.csv.xz").read_bytes()).decode()
    lines = text.splitlines()
    i, rule = next((i, line) for i, line in enumerate(lines) if line.endswith('"global","50"'))
    lines[i] = rule.replace('"global","50"', '"global","9.5 %"')
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    tk = tracekit.open(tmp_path / "s.duckdb")
    with pytest.raises(tracekit.errors.InputError, match=r"d.csv: launch ID \d+, rule \w+: estimated speedup "
                                                         r"'9.5 %' is not a number"):
        tk.ingest(tmp_path / "d.csv")
    assert tk.sql("SELECT count(*) AS n FROM runs")["n"][0] == 0
    tk.close()


def test_a_speedup_out_of_range_is_refused_and_one_ncu_could_not_compute_is_no_estimate(tmp_path):
    """A global estimated speedup is a share of the launch's time, 0 to 100 % (the real pages' run
    from 0 to 99.76): -5 or 150 is an edited or damaged page (it made a negative or larger
    than the launch est_saved_ns); a local one goes past 100 on a real page (hstu_headroom's
    CPIStall 103.4) and is kept, but not below 0; "nan" or "inf" is none ncu could compute, NULL
    as a metric's value, from a page as from a report."""
    from tracekit.ingest import ncu

    text = lzma.decompress((DATA / "ncu_sections" / "details.csv.xz").read_bytes()).decode()
    lines = text.splitlines()
    i, rule = next((i, line) for i, line in enumerate(lines) if line.endswith('"global","50"'))
    (tmp_path / "d.csv").write_text(text)
    estimates = pl.from_arrow(ncu.read(tmp_path / "d.csv").tables["ncu_rules"])["speedup_pct"].count()
    for kind, given, said in (("global", "-5", "'-5' is not a percentage from 0 to 100"),
                              ("global", "150", "'150' is not a percentage"),
                              ("local", "-5", "'-5' is not a percentage"),
                              ("global", "nan", None), ("global", "inf", None)):
        lines[i] = rule.replace('"global","50"', f'"{kind}","{given}"')
        (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
        if said:
            with pytest.raises(tracekit.errors.InputError, match=rf"d.csv: launch ID \d+, rule \w+: estimated speedup {said}"):
                ncu.read(tmp_path / "d.csv")
            continue
        got = pl.from_arrow(ncu.read(tmp_path / "d.csv").tables["ncu_rules"])["speedup_pct"]
        assert got.is_nan().sum() == got.is_infinite().sum() == 0 and got.count() == estimates - 1, given
    lines[i] = rule.replace('"global","50"', '"local","103.4"')
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    got = pl.from_arrow(ncu.read(tmp_path / "d.csv").tables["ncu_rules"])
    assert got.filter(pl.col("speedup_pct") > 100)["speedup_type"].to_list() == ["local"]
    nan = {"rule_message": {"message": "m", "type": 2}, "speedup_estimation": {"type": 2, "speedup": float("nan")}}
    assert [r["speedup_pct"] for r in ncu_rules.from_report(0, [nan])] == [None]


def test_rule_of_an_unknown_launch_is_refused(tmp_path):
    text = lzma.decompress((DATA / "ncu_sections" / "details.csv.xz").read_bytes()).decode()
    lines = text.splitlines()
    rule = next(line for line in lines[1:] if line.split('","')[-5:][0])  # a rule row
    assert rule.startswith('"0"')
    (tmp_path / "d.csv").write_text("\n".join([*lines, '"9"' + rule[3:]]) + "\n")
    tk = tracekit.open(tmp_path / "s.duckdb")
    with pytest.raises(tracekit.errors.InputError, match="rule result of launch ID 9"):
        tk.ingest(tmp_path / "d.csv")
    assert tk.sql("SELECT count(*) AS n FROM runs")["n"][0] == 0
    tk.close()


@pytest.mark.parametrize("source", ["report", "raw"])
@pytest.mark.parametrize("fixture", WARP_STATES)
def test_warp_stalls_equal_the_raw_page(store, fixture, source):
    raw = csv_rows(DATA / fixture / REPORTS[fixture][2])[1:]  # (the units row)
    df = store.query("warp-stalls", run=f"{fixture}/{source}", limit=0)
    assert set(df["kernel_id"]) == {int(r["ID"]) for r in raw}
    for r in raw:
        k = df.filter(pl.col("kernel_id") == int(r["ID"]))
        state = {c[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]: v
                 for c, v in r.items() if c.startswith("smsp__average_warps_issue_stalled_") and v}
        sampled = {c[len("smsp__pcsamp_warps_issue_stalled_"):].replace("no_instructions", "no_instruction"): v
                   for c, v in r.items()
                   if c.startswith("smsp__pcsamp_warps_issue_stalled_") and not c.endswith("_not_issued") and v}
        assert set(k["reason"]) == set(state) | set(sampled) and len(state) >= 19
        for row in k.to_dicts():
            printed = state.get(row["reason"])
            if printed is None:
                assert row["cycles_per_issue"] is None
            else:  # the report's value rounds to the printed decimals
                decimals = len(printed.split(".")[1]) if "." in printed else 0
                assert round(row["cycles_per_issue"], decimals) == pytest.approx(float(printed.replace(",", ""))), row
            assert row["samples"] == (float(sampled[row["reason"]].replace(",", "")) if row["reason"] in sampled
                                      else None), row
        count = float(r["smsp__pcsamp_sample_count"].replace(",", ""))
        assert k["samples"].sum() == count and k["samples_pct"].sum() == pytest.approx(100)
        assert k["cycles_pct"].sum() == pytest.approx(100)
        top = k.row(0, named=True)  # ordered by cycles, largest first
        assert top["cycles_per_issue"] == k["cycles_per_issue"].max()


def test_warp_stalls_agree_with_ncus_own_stall_rule(store):
    """ncu's CPIStall rule names the dominant stall and its cycles per issued instruction."""
    rules = store.query("ncu-rules", run="ncu_full/report", limit=0).filter(
        (pl.col("rule") == "CPIStall") & pl.col("message").str.starts_with("On average, each warp"))
    stalls = store.query("warp-stalls", run="ncu_full/report", limit=0)
    assert rules.height == 4
    for r in rules.to_dicts():
        top = stalls.filter(pl.col("kernel_id") == r["kernel_id"]).row(0, named=True)
        cycles = float(r["message"].split("spends ")[1].split(" cycles")[0])
        assert round(top["cycles_per_issue"], 1) == cycles


def test_warp_stalls_without_the_section_is_an_error(store):
    with pytest.raises(QueryError, match=r"^warp-stalls: run \d+ \(ncu_sections/report\) has no warp state metrics; "
                                         "profile with ncu --section WarpStateStats"):
        store.query("warp-stalls", run="ncu_sections/report")
    # a kernel filter no launch of the run matches is an error too, in every ncu query that takes one
    for query in ("warp-stalls", "ncu-rules", "ncu-source", "memory-workload"):
        with pytest.raises(QueryError, match=rf"^{query}: no kernel of the run has a name containing 'no such "
                                             r"kernel' \(`tracekit query ncu-kernels` lists them\)$"):
            store.query(query, run="ncu_full/report", kernel="no such kernel")
        assert store.query(query, run="ncu_full/report", kernel="SOFTMAX", limit=0).height > 0


@pytest.mark.parametrize("fixture", WARP_STATES)
def test_warp_stalls_of_a_details_page_send_to_the_report(store, fixture):
    """A --set full capture's details page has the Warp State Statistics section, but only its
    summary metrics (warp latency per issued instruction, ...), not the per-reason stall
    metrics: re-profiling with --section WarpStateStats would not help; its report and raw
    page have them (the same launches' stalls from them)."""
    rows = csv_rows(DATA / fixture / REPORTS[fixture][1])
    assert any(r["Section Name"] == "Warp State Statistics" for r in rows)
    assert not any(r["Metric Name"].startswith("smsp__average_warps_issue_stalled_") for r in rows)
    with pytest.raises(QueryError, match=rf"^warp-stalls: run \d+ \({fixture}/details\) has no warp state metrics; "
                                         r"ncu's details CSV page prints the section's summary, not its stall "
                                         r"reasons: ingest the \.ncu-rep \(or ncu -i REPORT --csv --page raw\)$"):
        store.query("warp-stalls", run=f"{fixture}/details")
    for source in ("report", "raw"):
        assert store.query("warp-stalls", run=f"{fixture}/{source}", limit=0).height > 0


@pytest.mark.parametrize("source", ["report", "details", "raw"])
@pytest.mark.parametrize("fixture", ["hstu_capture_ncu", "ncu_full"])
def test_occupancy_names_no_limiter_at_the_maximum(store, fixture, source):
    """A block limit that allows the SM's maximum warps holds nothing back: ncu's details page
    gives a TheoreticalOccupancy rule ("...limited by the number of required registers")
    exactly for the launches below 100 % theoretical occupancy, none for the others, though
    their limits tie (hstu's 128-thread kernels: 16 blocks by registers and by warps, 64
    warps). The limiter is 'none' there, in occupancy and ncu-summary, and the occupancy
    chart writes no limit beside them."""
    from tracekit import charts

    rows = csv_rows(DATA / fixture / REPORTS[fixture][1])
    theoretical = {int(r["ID"]): float(r["Metric Value"]) for r in rows
                   if r["Metric Name"] == "sm__maximum_warps_per_active_cycle_pct"}
    limited = {int(r["ID"]) for r in rows if r["Rule Name"] == "TheoreticalOccupancy"}
    run = f"{fixture}/{source}"
    occ = store.query("occupancy", run=run, limit=0)
    assert set(occ["kernel_id"]) == set(theoretical)
    at_max = {k for k, v in theoretical.items() if v == 100}
    assert at_max and limited and at_max == set(theoretical) - limited
    for row in occ.iter_rows(named=True):
        if row["kernel_id"] in at_max:
            assert row["limiter"] == "none", row
        else:
            assert row["limiter"] not in (None, "none"), row
            assert row["theoretical_occupancy_pct"] < 100
    summary = store.query("ncu-summary", run=run, limit=0)
    assert set(summary.filter(pl.col("theoretical_occupancy_pct") == 100)["limiter"]) == {"none"}
    drawn = [r for ds in spec_datasets(charts.chart(store, "occupancy", run=run).to_dict()) for r in ds]
    said = {r["label"]: r["text"] for r in drawn if "text" in r}
    assert set(said) == {r["label"] for r in drawn if r.get("measure") == "theoretical" and r["pct"] < 100}
    assert all(t.startswith("limit: ") and t != "limit: none" for t in said.values())
