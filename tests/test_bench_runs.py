"""`tracekit bench` results as runs (tests/data/bench_pair: the benchmark three times on the
H200, the last with a slower dense tile): ingested from the JSON it writes, queried
(bench-results) and compared (diff's bench scope), and hostile files refused."""

from __future__ import annotations

import json
import lzma
import re
import statistics

import polars as pl
import pytest
from conftest import DATA

import tracekit
from tracekit import diff as D
from tracekit.cli import main as cli_main
from tracekit.errors import InputError, QueryError
from tracekit.ingest.bench import time_summary

PAIR = DATA / "bench_pair"


def _doc(name: str) -> dict:
    return json.loads(lzma.open(PAIR / f"{name}.json.xz").read())


@pytest.fixture(scope="module")
def tk(tmp_path_factory):
    t = tracekit.open(tmp_path_factory.mktemp("bench") / "s.duckdb")
    for name in ("base", "base_again", "slow"):
        t.ingest(PAIR / f"{name}.json.xz", name=name)
    yield t
    t.close()


def test_bench_results_are_the_files_with_each_calls_time(tk):
    for name in ("base", "slow"):
        doc = _doc(name)
        df = tk.query("bench-results", run=name)
        assert df.height == len(doc["results"]) == 7
        mine = {(r["config"], r["variant"]): r for r in df.iter_rows(named=True)}
        for want in doc["results"]:
            got = mine[(want["config"], want["variant"])]
            assert got["calls"] == want["n_rep"] == len(want["samples_ms"])
            for col in ("median_ms", "p95_ms", "mean_ms", "min_ms", "max_ms", "p99_ms", "std_ms", "tflops",
                        "speedup_vs_baseline", "speedup_low", "speedup_high", "peak_alloc_mb", "peak_reserved_mb"):
                assert got[col] == want[col], col
            assert got["matches_reference"] == want["matches_reference"] and got["baseline"] == "sdpa"
        # each call's time kept: the median of a pair's calls is the one the benchmark printed
        samples = tk.sql(f"SELECT config, variant, list(ms ORDER BY call_idx) AS ms FROM bench_samples "
                         f"WHERE run_id = (SELECT run_id FROM runs WHERE name = '{name}') GROUP BY ALL")
        for r in samples.iter_rows(named=True):
            want = next(w for w in doc["results"] if (w["config"], w["variant"]) == (r["config"], r["variant"]))
            assert r["ms"] == want["samples_ms"]
            assert statistics.median(r["ms"]) == pytest.approx(want["median_ms"], rel=1e-12)
    run = tk.runs().filter(pl.col("name") == "base").row(0, named=True)
    assert (run["kind"], run["gpu"]) == ("bench", "NVIDIA H200")
    # the baseline first within each configuration; name= as a filter of configurations and variants
    assert tk.query("bench-results", run="base")["variant"].to_list()[:2] == ["sdpa", "triton_block_sparse"]
    assert set(tk.query("bench-results", run="base", name="DENSE")["variant"]) == {"triton_dense"}
    with pytest.raises(QueryError, match="bench-results: no configuration or variant of run 1 has a name "
                                         "containing 'flash' .`tracekit query bench-results` lists them.$"):
        tk.query("bench-results", run="base", name="flash")


def test_the_same_benchmark_twice_is_unchanged(tk):
    """Each variant's time per call within 1 %, its peak memory in a call the same to the byte."""
    df = tk.diff("base", "base_again")
    assert set(df["scope"]) == {"bench"} and df.height == 7 * 3
    assert set(df["verdict"]) == {"unchanged"}
    assert df.filter(pl.col("metric") == "med_ns")["delta_pct"].abs().max() < 1.0
    memory = df.filter(pl.col("metric").str.starts_with("peak_"))
    assert memory.height == 14 and (memory["delta"] == 0).all()
    assert D.moved(df) == []


def test_the_slower_tile_regresses_the_dense_kernel_alone(tk):
    df = tk.diff("base", "slow")
    changed = df.filter(pl.col("verdict") != "unchanged")
    assert sorted(changed["key"]) == ["bsa_T4096/triton_dense", "hstu_T1024/triton_dense", "hstu_T4096/triton_dense"]
    assert set(changed["verdict"]) == {"regressed"} and (changed["delta_pct"] > 100).all()
    row = changed.filter(pl.col("key") == "hstu_T1024/triton_dense").row(0, named=True)
    assert row["note"] == "speedup vs sdpa 0.90x -> 0.40x" and row["p_value"] < 1e-100
    assert D.moved(df) == ["Benchmark, median time of a call: bsa_T4096/triton_dense +467.168 µs (+179.7 %, regressed); "
                           "hstu_T4096/triton_dense +465.600 µs (+179.2 %, regressed); hstu_T1024/triton_dense "
                           "+127.040 µs (+124.2 %, regressed)"]
    # the 697 calls its 500 ms allowed against 1,000: another count of one kernel, not another mix
    assert tk.query("bench-results", run="slow", name="T4096")["calls"].to_list() == [1000, 1000, 697, 1000, 701]


def _planted(tmp_path, name: str, change) -> str:
    """base_again's file changed by ``change(doc)``: what another run of the benchmark may give."""
    doc = _doc("base_again")
    change(doc)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_machine_slower_throughout_is_held_and_a_wrong_output_is_not(tk, tmp_path):
    """Every call 15 % slower (another machine's pace: the speedups, timed in one process, the
    same): held, the baselines too; a variant whose output no longer matches the reference is
    regressed whatever its time; one that failed is said."""
    def slower(doc):
        for r in doc["results"]:
            r["samples_ms"] = [t * 1.15 for t in r["samples_ms"]]
            r.update(time_summary(r["samples_ms"]), tflops=r["tflops"] / 1.15)
        wrong = next(r for r in doc["results"] if (r["config"], r["variant"]) == ("hstu_T1024", "triton_dense"))
        wrong["matches_reference"] = False
        failed = next(r for r in doc["results"] if r["variant"] == "triton_block_sparse")
        failed.update(samples_ms=[], median_ms=None, error="OutOfMemoryError: CUDA out of memory")
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(PAIR / "base.json.xz", name="base")
        t.ingest(_planted(tmp_path, "slower", slower), name="slower")
        df = t.diff("base", "slower")
    rows = {r["key"]: r for r in df.filter(pl.col("metric") == "med_ns").iter_rows(named=True)}
    for key in ("hstu_T4096/triton_dense", "bsa_T4096/triton_dense"):
        assert rows[key]["verdict"] == "unchanged" and "moved with its baseline (sdpa +" in rows[key]["note"]
    for key in ("hstu_T1024/sdpa", "hstu_T4096/sdpa", "bsa_T4096/sdpa"):
        assert rows[key]["verdict"] == "unchanged" and rows[key]["note"].startswith("moved with its variants")
    wrong = rows["hstu_T1024/triton_dense"]
    assert wrong["verdict"] == "regressed" and wrong["note"].endswith("its output no longer matches the reference")
    failed = rows["bsa_T4096/triton_block_sparse"]
    assert failed["verdict"] == "regressed" and failed["new"] is None
    assert failed["note"].endswith("failed in the new run: OutOfMemoryError: CUDA out of memory")


def test_a_variant_that_allocates_more_is_regressed_in_memory(tk, tmp_path):
    """base_again with the block-sparse kernel's workspace doubled (its call's allocation 33.1 ->
    66.1 MiB, the allocator's cache 594 -> 627 MiB): its memory regressed at its time unchanged,
    said in what moved; the other variants' memory unchanged."""
    def bigger(doc):
        r = next(r for r in doc["results"] if r["variant"] == "triton_block_sparse")
        r["peak_alloc_mb"] *= 2
        r["peak_reserved_mb"] += 33
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(PAIR / "base.json.xz", name="base")
        t.ingest(_planted(tmp_path, "bigger", bigger), name="bigger")
        df = t.diff("base", "bigger")
    changed = df.filter(pl.col("verdict") != "unchanged")
    assert set(zip(changed["key"], changed["metric"], changed["verdict"], strict=True)) == {
        ("bsa_T4096/triton_block_sparse", "peak_alloc_mb", "regressed"),
        ("bsa_T4096/triton_block_sparse", "peak_reserved_mb", "regressed")}
    assert D.moved(df) == ["Peak memory: bsa_T4096/triton_block_sparse allocated (+100.0 %, regressed), reserved "
                           "(+5.6 %, regressed)"]
    # (a call that allocated nothing, then half a MiB: no share of none to judge, immaterial)
    def none_then(mb):
        def change(doc):
            next(r for r in doc["results"] if r["variant"] == "sdpa")["peak_alloc_mb"] = mb
        return change
    with tracekit.open(tmp_path / "z.duckdb") as t:
        t.ingest(_planted(tmp_path, "none", none_then(0.0)), name="none")
        t.ingest(_planted(tmp_path, "half", none_then(0.5)), name="half")
        row = t.diff("none", "half").filter(pl.col("metric") == "peak_alloc_mb").filter(pl.col("new") == 0.5).row(0, named=True)
    assert (row["base"], row["verdict"]) == (0.0, "unchanged") and row["note"].startswith("immaterial"), row


def test_a_bench_run_against_a_capture_shares_no_scope(tk):
    tk.ingest(DATA / "nsys_hstu_mixed" / "export.sqlite.xz", name="mixed")
    with pytest.raises(QueryError, match=r"run 1 \(base\) \[bench\] and run 4 \(mixed\) \[nsys\] share no scope"):
        tk.diff("base", "mixed")
    with pytest.raises(QueryError, match=r"run 4 \(mixed\) is an nsys run; bench-results needs a bench run"):
        tk.query("bench-results", run="mixed")


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: d.pop("results"), "a JSON file without 'environment' and 'results': not a tracekit bench file"),
    (lambda d: d.update(results=[]), "no result (the benchmark measured nothing)"),
    (lambda d: d.update(results={"a": 1}), "'results' is not a list of objects"),
    (lambda d: d["results"].append(dict(d["results"][0])), "result 8: sdpa on hstu_T1024 again (result 1)"),
    (lambda d: d["results"][2].update(samples_ms=[0.1, float("nan")]),
     "result 3 (sdpa on hstu_T4096): samples_ms[1] nan: a time is a finite number, 0 or more"),
    (lambda d: d["results"][0].update(samples_ms=[0.1, -1]), "samples_ms[1] -1: a time is a finite number"),
    (lambda d: d["results"][0].update(samples_ms=[1e308] * 5),
     "result 1 (sdpa on hstu_T1024): samples_ms: times too large to summarise (their sum or spread overflows"),
    (lambda d: d["results"][0].update(samples_ms="fast"), "samples_ms is not a list of times"),
    (lambda d: d["results"][0].update(n_rep=-3), "n_rep -3: a count is a whole number, 0 or more"),
    (lambda d: d["results"][0].update(median_ms="0.1"), "median_ms '0.1' is not a number"),
    (lambda d: d["results"][0].update(config=None), "result 1: no config"),
    (lambda d: d["results"][0].update(matches_reference="yes"), "matches_reference 'yes' is not true or false"),
    (lambda d: d["results"][0].update(samples_ms=[], error=None), "neither times (samples_ms) nor an error"),
    # a summary the samples contradict: the table (the stored median) and the diff (the samples) would disagree
    (lambda d: d["results"][1].update(median_ms=d["results"][1]["median_ms"] * 0.5),
     "result 2 (triton_dense on hstu_T1024): median_ms 0.05114399828016758 is not what its 1000 samples_ms give "
     "(0.10228799656033516): the file was edited"),
    (lambda d: d["results"][1].update(n_rep=d["results"][1]["n_rep"] + 1),
     "n_rep 1001 is not what its 1000 samples_ms give (1000): the file was edited"),
    (lambda d: d["results"][1].update(samples_ms=d["results"][1]["samples_ms"][:10]),
     "n_rep 1000 is not what its 10 samples_ms give (10)"),
    (lambda d: d["results"][1].update(p99_ms=d["results"][1]["p99_ms"] * 1.01), "p99_ms "),
    (lambda d: d["results"][1].update(tflops=d["results"][1]["tflops"] * 2),
     "tflops 630.6545996523585 is not its flops over its median time"),
    (lambda d: d["results"][1].update(speedup_vs_baseline=d["results"][1]["speedup_vs_baseline"] * 2),
     "speedup_vs_baseline"),
    (lambda d: d["results"][1].update(samples_ms=[0.0] * 1000, **time_summary([0.0] * 1000), flops=None,
                                       tflops=None, speedup_vs_baseline=None),
     "the median of its 1000 timed calls is 0 ms: no time was measured"),
])
def test_hostile_bench_files_are_one_line_and_leave_the_store(tmp_path, capsys, change, said):
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(PAIR / "base.json.xz")]) == 0
    before = db.read_bytes()
    capsys.readouterr()
    bad = _planted(tmp_path, "bad", change)
    assert cli_main(["--db", str(db), "ingest", bad]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"tracekit: error: {bad}: ") and said in err[0], err
    assert db.read_bytes() == before


def test_a_file_that_is_not_json_is_one_line(tmp_path, capsys):
    bad = tmp_path / "cut.json"
    bad.write_bytes(lzma.open(PAIR / "base.json.xz").read()[:5000])
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tracekit: error: {bad}: not valid JSON (") and not (tmp_path / "s.duckdb").exists()
    from tracekit.ingest import bench

    for text, said in ((b'{"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "arrays or objects nested too "
                        "deeply to read"), (b'{"results\xff": []}', "not UTF-8 text (byte 9: invalid start byte)")):
        bad.write_bytes(text)
        with pytest.raises(InputError, match=re.escape(f"{bad}: not valid JSON ({said}); ")):
            bench.read(bad)
        assert cli_main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(bad)]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"tracekit: error: {bad}: ") and not (tmp_path / "s.duckdb").exists()


def test_the_report_of_a_bench_run(tk, tmp_path):
    """The report of the slowed run against the first: the comparison, then its results as
    bench-results gives them."""
    from test_report import _column, _parse

    from tracekit import report

    (tmp_path / "r.html").write_text(report.render(report.build(tk, run="slow", vs="base")))
    page = _parse(tmp_path / "r.html")
    assert "bench-results" in page.sections
    (table,) = page.sections["bench-results"]
    want = tk.query("bench-results", run="slow")
    assert [t for t, _, _ in _column(table, "variant")] == want["variant"].to_list()
    assert "tracekit report · bench run 3: slow" in (tmp_path / "r.html").read_text()


def test_the_speedup_chart(tk, tmp_path):
    """Each variant but the baseline at its speedup with its interval; a wrong output red, a
    failed variant named; drawn to PNG."""
    from conftest import spec_datasets

    from tracekit import charts

    spec = charts.chart(tk, "bench-results", run="slow").to_dict()
    rows = [r for ds in spec_datasets(spec) for r in ds if "label" in r]
    want = tk.query("bench-results", run="slow").filter(pl.col("variant") != "sdpa")
    assert {r["label"]: r["speedup_vs_baseline"] for r in rows} == {
        f"{c} · {v}": x for c, v, x in want.select("config", "variant", "speedup_vs_baseline").rows()}
    assert {r["check"] for r in rows} == {"matches or not checked"}

    def wrong_and_failed(doc):
        next(r for r in doc["results"] if r["variant"] == "triton_dense")["matches_reference"] = False
        next(r for r in doc["results"] if r["variant"] == "triton_block_sparse").update(
            samples_ms=[], median_ms=None, speedup_vs_baseline=None, speedup_low=None, speedup_high=None,
            error="OutOfMemoryError")
    with tracekit.open(tmp_path / "s.duckdb") as t:
        t.ingest(_planted(tmp_path, "odd", wrong_and_failed), name="odd")
        spec = charts.chart(t, "bench-results").to_dict()
        assert charts.save(charts.chart(t, "bench-results"), tmp_path / "b.png").stat().st_size > 10_000
    rows = [r for ds in spec_datasets(spec) for r in ds if "label" in r]
    assert {r["check"] for r in rows if r["label"] == "hstu_T1024 · triton_dense"} == {"does not match the reference"}
    assert "not timed: bsa_T4096 · triton_block_sparse" in spec["title"]["subtitle"]


def test_kernels_of_yours_benchmarked_on_the_h200(tmp_path):
    """tests/data/bench_yours: two kernels of a user's (tests/data/programs/attention_variant.py)
    beside ours on the H200. The loop version matches the reference and the causal-only mask is
    a mismatch on every configuration (each has candidates); the loop reads its offsets on the
    host, so every one of its timed calls was late: its times hold host time, as the table says."""
    from tracekit.kernels.bench import format_table

    doc = json.loads(lzma.open(DATA / "bench_yours" / "yours.json.xz").read())
    from test_report import _column, _parse

    from tracekit import report

    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(DATA / "bench_yours" / "yours.json.xz")
        df = tk.query("bench-results", limit=0)
        meta = json.loads(tk.sql("SELECT meta FROM runs").item())
        (tmp_path / "r.html").write_text(report.render(report.build(tk)))
    (table,) = _parse(tmp_path / "r.html").sections["bench-results"]  # (the report: where each came from, late calls)
    assert [t for t, _, _ in _column(table, "source")] == [s or "" for s in df["source"]]
    assert [t for t, _, _ in _column(table, "late_calls")] == [f"{n:,}" for n in df["late_calls"]]
    configs = ["hstu_T1024", "jagged_T4096", "bsa_T4096", "cached_C1024_n256"]
    assert df.height == 16 and sorted(set(df["config"])) == sorted(configs)
    by = {(r["config"], r["variant"]): r for r in df.iter_rows(named=True)}
    for config in configs:
        assert by[(config, "loop")]["matches_reference"] is True
        assert by[(config, "hstu_causal_only")]["matches_reference"] is False
        assert by[(config, "hstu_causal_only")]["rel_err"] > 0.05
        assert by[(config, "triton_dense")]["speedup_vs_baseline"] == 1.0
        assert by[(config, "loop")]["speedup_vs_baseline"] < 0.05
        assert by[(config, "loop")]["late_calls"] == by[(config, "loop")]["calls"] > 0
        assert by[(config, "triton_dense")]["late_calls"] == 0
        assert by[(config, "triton_dense")]["source"] is None
    f = "tests/data/programs/attention_variant.py"
    assert {(r["variant"], r["source"]) for r in by.values() if r["source"]} == {("loop", f"{f}:hstu_loop"),
                                                                               ("hstu_causal_only", f"{f}:hstu_causal_only")}
    assert meta["bench"]["variant_sources"] == doc["variant_sources"] == {"loop": f"{f}:hstu_loop",
                                                                         "hstu_causal_only": f"{f}:hstu_causal_only"}
    text = format_table(doc["results"]).splitlines()
    assert f"yours: loop = {f}:hstu_loop, hstu_causal_only = {f}:hstu_causal_only" in text
    assert "4 rows failed the correctness check" in text
    assert any(line.startswith("12 rows with calls the GPU reached before the host had enqueued them") for line in text)


def test_a_kernel_of_yours_from_another_file_is_said_in_the_diff(tmp_path):
    """The kernel writer's loop: `loop` benchmarked from one file, then from its next version. The
    H200 file and a copy of it naming another file for `loop` (the same times): diff says where
    each came from on loop's rows, and nowhere else."""
    doc = json.loads(lzma.open(DATA / "bench_yours" / "yours.json.xz").read())
    (tmp_path / "v1.json").write_text(json.dumps(doc))
    doc["variant_sources"]["loop"] = "attention_v2.py:hstu_loop"
    (tmp_path / "v2.json").write_text(json.dumps(doc))
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        df = tk.diff(str(tmp_path / "v1.json"), str(tmp_path / "v2.json"))
    said = df.filter(pl.col("note").str.contains("yours: "))
    assert sorted(said["key"]) == sorted(f"{c}/loop" for c in ("hstu_T1024", "jagged_T4096", "bsa_T4096",
                                                                "cached_C1024_n256"))
    assert all("yours: tests/data/programs/attention_variant.py:hstu_loop -> attention_v2.py:hstu_loop" in n
               for n in said["note"])
    assert set(df["verdict"]) == {"unchanged"}
