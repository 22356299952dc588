"""`tracekit diff` / `tk.diff`: verdicts on real captures.

Expectations come from NVIDIA's outputs (the `nsys stats` CSVs beside each export, the
`ncu --page details` CSVs) or from the change a test makes to a real export itself (a
kernel made slower, renamed, dropped), never from tracekit's output.
"""

from __future__ import annotations

import csv
import json
import lzma
import math
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import tracekit
from tracekit import diff as D
from tracekit.cli import main as cli_main

HSTU = DATA / "hstu_capture_nsys" / "nsys.sqlite.xz"  # `tracekit capture --tool nsys`, H200
NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"
LAYER_NORM = ("void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, (bool)0>"
              "(int, T2, const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)")


def _golden_kernels(export: Path) -> dict[str, dict]:
    with open(export.parent / "stats" / "cuda_gpu_kern_sum.csv", newline="") as fh:
        return {r["Name"]: r for r in csv.DictReader(fh)}


def _export_copy(tmp: Path, name: str, *sql: tuple) -> Path:
    """The real HSTU export, decompressed, with ``sql`` statements applied to it."""
    out = tmp / f"{name}.sqlite"
    with lzma.open(HSTU) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(out)
    for stmt, args in sql:
        con.execute(stmt, args)
    con.commit()
    con.close()
    return out


def _name_id(text: str) -> tuple:
    return ("SELECT id FROM StringIds WHERE value = ?", [text])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The real HSTU capture, and copies of it with changes the tests plant themselves."""
    tmp = tmp_path_factory.mktemp("diff")
    tk = tracekit.open(tmp / "diff.duckdb")
    tk.ingest(HSTU, name="hstu")
    slow = _export_copy(tmp, "slow", (  # layer norm 30 % slower, every launch
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + ("end" - start) * 3 / 10 '
        "WHERE demangledName = (SELECT id FROM StringIds WHERE value = ?)", [LAYER_NORM]))
    tk.ingest(slow, name="slow")
    renamed = _export_copy(  # the nvjet GEMM under another tile shape: a new name, same places
        tmp, "renamed",
        ("INSERT INTO StringIds VALUES ((SELECT max(id) + 1 FROM StringIds), ?)",
         [NVJET.replace("256x128_64x4_1x2", "128x256_64x3_2x1")]),
        ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = (SELECT max(id) FROM StringIds) "
         "WHERE demangledName = (SELECT id FROM StringIds WHERE value = ?)", [NVJET]))
    tk.ingest(renamed, name="renamed")
    dropped = _export_copy(tmp, "dropped", (
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName = (SELECT id FROM StringIds WHERE value = ?)",
        [LAYER_NORM]))
    tk.ingest(dropped, name="dropped")
    yield tk
    tk.close()


def _flagged(df: pl.DataFrame, scope: str | None = None) -> pl.DataFrame:
    out = df.filter(pl.col("verdict") != "unchanged")
    return out if scope is None else out.filter(pl.col("scope") == scope)


# -- the statistics --------------------------------------------------------------------


def test_mann_whitney_matches_the_textbook_formula():
    """p from compare.sql's rank sum and tie term equals U computed pair by pair."""
    con = tracekit.open(":memory:").con
    base = [5, 7, 7, 9, 12, 12, 12, 15]
    new = [7, 9, 11, 12, 14, 16, 16, 18, 20]
    samples = " UNION ALL ".join([f"SELECT 0 AS side, 'k' AS key, {v} AS value" for v in base]
                                 + [f"SELECT 1, 'k', {v}" for v in new])
    r = D._compare(con, samples, {}).row(0, named=True)
    u = sum((b > n) + 0.5 * (b == n) for b in base for n in new)  # U of the base sample
    n1, n2 = len(base), len(new)
    pooled = base + new
    ties = sum(pooled.count(v) ** 3 - pooled.count(v) for v in set(pooled))
    sigma = math.sqrt(n1 * n2 / 12 * ((n1 + n2 + 1) - ties / ((n1 + n2) * (n1 + n2 - 1))))
    p = math.erfc((abs(u - n1 * n2 / 2) - 0.5) / sigma / math.sqrt(2))
    assert r["p_value"] == pytest.approx(p, rel=1e-12)
    assert r["med_base"] == 10.5 and r["med_new"] == 14  # (9 + 12) / 2; the 5th of 9
    assert r["total_base"] == sum(base) and r["n_new"] == n2
    assert r["p95_new"] == pytest.approx(18 + 0.6 * 2)  # linear: position 0.95 * 8 = 7.6
    assert r["var_base"] == pytest.approx(sum((b - sum(base) / n1) ** 2 for b in base) / (n1 - 1))


# -- kernel family ---------------------------------------------------------------------

FAMILIES = {  # real names from the fixtures -> the family macros.sql documents
    NVJET: "nvjet_sm90_tst_h_bz_coopA_bias_TNT",
    "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT": "nvjet_sm90_tst_v_bz_NNT",
    "nvjet_sm90_tst_64x80_64x11_1x4_h_bz_NNT": "nvjet_sm90_tst_h_bz_NNT",
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_split_k_kernel__5x_cublas":
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_ffma_execute_split_k_kernel_5x_cublas",
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas":
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_ffma_execute_kernel_5x_cublas",
    LAYER_NORM: "at::native::vectorized_layer_norm_kernel",
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<float>, std::array<char *, "
    "(unsigned long)2>>(int, T2, T3)": "at::native::vectorized_elementwise_kernel",
    "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::[lambda(float, float) "
    "(instance 1)]>, unsigned int, float, (int)4, (int)4>>(T3)": "at::native::reduce_kernel",
    "_hstu_cached_kernel": "_hstu_cached_kernel",  # Triton: the function name
    "silu_mul_kernel": "silu_mul_kernel",
    "softmax_kernel": "softmax_kernel",
    # CUTLASS's generic wrapper is named by the operation in its first template argument
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(T1::Params)":
        "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_tn",
    "cudnn_infer_ampere_scudnn_128x32_relu_small_nn_v1": "cudnn_infer_ampere_scudnn_relu_small_nn_v1",
    "triton_poi_fused_add_mul_0": "triton_poi_fused_add_mul_0",
    "kernel_0123456789abcdef0123": "kernel",
}


def test_kernel_family_macro():
    con = tracekit.open(":memory:").con
    for name, family in FAMILIES.items():
        assert con.execute("SELECT kernel_family(?)", [name]).fetchone()[0] == family, name


def test_top_kernels_by_family_sums_nsys_rows(store):
    """group=family: each family's instances and time are the sum of nsys's rows of its names."""
    golden = _golden_kernels(HSTU)
    df = store.query("top-kernels", run="hstu", limit=0, group="family")
    fam = {r["name"]: r for r in df.iter_rows(named=True)}
    nvjet_rows = [r for n, r in golden.items() if n.startswith("nvjet_sm90_tst_") and n.endswith("_h_bz_coopA_bias_TNT")]
    assert len(nvjet_rows) >= 1
    row = fam["nvjet_sm90_tst_h_bz_coopA_bias_TNT"]
    assert row["instances"] == sum(int(r["Instances"]) for r in nvjet_rows)
    assert row["total_ns"] == sum(int(r["Total Time (ns)"]) for r in nvjet_rows)
    elementwise = [r for n, r in golden.items() if n.startswith("void at::native::vectorized_elementwise_kernel<")]
    assert len(elementwise) > 1  # several instantiations become one row
    assert fam["at::native::vectorized_elementwise_kernel"]["total_ns"] == sum(int(r["Total Time (ns)"]) for r in elementwise)
    assert df["total_ns"].sum() == sum(int(r["Total Time (ns)"]) for r in golden.values())
    assert df["instances"].sum() == sum(int(r["Instances"]) for r in golden.values())
    with pytest.raises(tracekit.QueryError, match="group=kind: choose name or family"):
        store.query("top-kernels", run="hstu", group="kind")


# -- nsys scopes -----------------------------------------------------------------------


def test_same_run_twice_is_all_unchanged_with_nsys_numbers(store):
    df = store.diff("hstu", "hstu")
    assert df.columns == D.COLUMNS
    assert set(df["scope"]) == set(D.NSYS_SCOPES)
    assert set(df["verdict"]) == {"unchanged"}
    assert (df["delta"] == 0).all()
    golden = _golden_kernels(HSTU)
    k = df.filter(pl.col("scope") == "kernel")
    assert set(k["key"]) == set(golden)
    for r in k.iter_rows(named=True):
        g = golden[r["key"]]
        want = {"total_ns": float(g["Total Time (ns)"]), "instances": float(g["Instances"]),
                "med_ns": float(g["Med (ns)"])}[r["metric"]]
        assert r["base"] == pytest.approx(want, abs=0.05), (r["key"], r["metric"])


def test_slower_kernel_is_the_only_kernel_regression(store):
    df = store.diff("hstu", "slow")
    k = _flagged(df, "kernel")
    assert set(k["key"]) == {LAYER_NORM}
    assert dict(zip(k["metric"], k["verdict"], strict=True)) == {"total_ns": "regressed", "med_ns": "regressed"}
    med = k.filter(pl.col("metric") == "med_ns").row(0, named=True)
    assert med["delta_pct"] == pytest.approx(30, abs=0.5)
    assert med["p_value"] < D.ALPHA
    assert med["delta_pct_low"] <= med["delta_pct"] <= med["delta_pct_high"]
    inst = df.filter((pl.col("key") == LAYER_NORM) & (pl.col("metric") == "instances")).row(0, named=True)
    assert inst["verdict"] == "unchanged" and inst["base"] == float(_golden_kernels(HSTU)[LAYER_NORM]["Instances"])
    # the layer norm's change leads the table: it is the largest change in GPU time
    assert df.row(0, named=True)["key"] in (LAYER_NORM, "device 0") or df["scope"][0] == "nvtx"
    # CPU-side scopes did not move at all
    assert _flagged(df, "api").is_empty() and _flagged(df, "memcpy").is_empty()
    # the reverse direction is an improvement
    back = _flagged(store.diff("slow", "hstu", by="kernel"))
    assert set(back["verdict"]) == {"improved"} and set(back["key"]) == {LAYER_NORM}


def test_renamed_kernel_is_matched_by_place_and_family(store):
    df = store.diff("hstu", "renamed", by=["kernel"])
    assert df.filter(pl.col("verdict").is_in(["added", "removed"])).is_empty()
    assert set(df["verdict"]) == {"unchanged"}
    renamed = NVJET.replace("256x128_64x4_1x2", "128x256_64x3_2x1")
    rows = df.filter(pl.col("key") == renamed)
    assert rows.height == 3
    note = rows["note"][0]
    assert note.startswith("matched by place") and "family nvjet_sm90_tst_h_bz_coopA_bias_TNT" in note
    assert NVJET in note
    g = _golden_kernels(HSTU)[NVJET]
    assert rows.filter(pl.col("metric") == "total_ns")["new"][0] == float(g["Total Time (ns)"])


def test_dropped_kernel_is_removed_with_its_time(store):
    df = store.diff("hstu", "dropped", by=["kernel"])
    flagged = _flagged(df)
    assert set(flagged["key"]) == {LAYER_NORM} and set(flagged["verdict"]) == {"removed"}
    total = flagged.filter(pl.col("metric") == "total_ns").row(0, named=True)
    assert total["base"] == float(_golden_kernels(HSTU)[LAYER_NORM]["Total Time (ns)"]) and total["new"] is None
    assert store.diff("dropped", "hstu", by="kernel").filter(pl.col("verdict") == "added")["key"].unique().to_list() == [LAYER_NORM]


# -- the CLI -----------------------------------------------------------------------------


def test_cli_gate_and_formats(store, tmp_path, capsys):
    db = str(store.path)
    store.close()
    assert cli_main(["--db", db, "diff", "hstu", "hstu", "--gate"]) == 0
    capsys.readouterr()
    assert cli_main(["--db", db, "diff", "hstu", "slow", "--gate", "--by", "kernel", "-f", "csv"]) == 1
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(out.splitlines()))
    assert list(rows[0]) == D.COLUMNS
    assert "gate: 2 regressed" in err
    assert cli_main(["--db", db, "diff", "hstu", "slow", "--threshold", "50", "--gate"]) == 0  # 30 % < 50 %
    capsys.readouterr()
    out_json = tmp_path / "d.json"
    assert cli_main(["--db", db, "diff", "1", "2", "--by", "kernel,api", "-f", "json", "-o", str(out_json)]) == 0
    assert {r["scope"] for r in json.loads(out_json.read_text())} == {"kernel", "api"}
    assert cli_main(["--db", db, "diff", "hstu", "slow", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "regressed" in out and "more rows (--limit 0 for all)" in out


@pytest.mark.parametrize("args, message", [
    (["hstu", "nope"], "no run or sweep 'nope'"),
    (["hstu", "slow", "--threshold", "0"], "--threshold 0.0: must be a positive percentage"),
    (["hstu", "slow", "--threshold", "-5"], "--threshold -5.0: must be a positive percentage"),
    (["hstu", "slow", "--by", "kernels"], "--by 'kernels': choose from kernel, nvtx, api, memcpy, gpu, ncu, sweep"),
    (["hstu", "slow", "--by", "ncu"], "--by ncu: run 1 (hstu) [nsys] has no ncu scope"),
    (["hstu", "slow", "--by", "sweep"], "has no sweep scope"),
    (["hstu", "slow", "--limit", "-1"], "--limit -1: must be >= 0"),
])
def test_bad_input_is_one_line_exit_2_and_leaves_the_store(store, capsys, args, message):
    db = Path(store.path)
    store.close()
    before = db.read_bytes()
    assert cli_main(["--db", str(db), "diff", *args, "--gate"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert db.read_bytes() == before


def test_files_are_ingested_first_and_a_known_file_is_its_run(store, tmp_path, capsys):
    db = tmp_path / "files.duckdb"
    assert cli_main(["--db", str(db), "diff", str(HSTU), str(HSTU), "-f", "csv"]) == 0
    out = capsys.readouterr().out
    assert {r["verdict"] for r in csv.DictReader(out.splitlines())} == {"unchanged"}
    tk = tracekit.open(db, read_only=True)
    assert tk.runs().height == 1  # the same file twice is one run
    tk.close()


def test_nsys_against_ncu_shares_no_scope(tmp_path):
    tk = tracekit.open(tmp_path / "mixed.duckdb")
    tk.ingest(HSTU, name="hstu")
    tk.ingest(DATA / "ncu_full" / "report.ncu-rep.xz", name="ncu")
    with pytest.raises(tracekit.QueryError, match=r"run 1 \(hstu\) \[nsys\] and run 2 \(ncu\) \[ncu\] share no scope"):
        tk.diff("hstu", "ncu")
    with pytest.raises(tracekit.QueryError, match=r"--by kernel: run 2 \(ncu\) \[ncu\] has no kernel scope"):
        tk.diff("hstu", "ncu", by="kernel")
    tk.close()


# -- sweeps ------------------------------------------------------------------------------

SWEEP = DATA / "hstu_sweep" / "runs"  # one real sweep: bs 1-8 x nc 128-1024, large preset, H200


def _timed(folder: Path) -> list[float]:
    with open(folder / "requests.csv", newline="") as fh:
        return [float(r["latency_ms"]) for r in csv.DictReader(fh) if r["phase"] == "timed"]


def _sweep_copy(tmp: Path, sweep_id: str, slower: dict[str, float]) -> list[Path]:
    """The real sweep's run folders under another sweep id; points named in ``slower``
    ('bs8-nc1024') get every timed latency multiplied by the factor."""
    out = []
    for src in sorted(SWEEP.iterdir()):
        dst = tmp / sweep_id / src.name
        shutil.copytree(src, dst)
        meta = json.loads((dst / "meta.json").read_text())
        meta["params"]["sweep"] = sweep_id
        (dst / "meta.json").write_text(json.dumps(meta))
        factor = next((f for point, f in slower.items() if src.name.endswith(f"-{point}-none")), 1.0)
        with open(src / "requests.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        for r in rows:
            if r["phase"] == "timed" and factor != 1.0:
                r["latency_ms"] = str(float(r["latency_ms"]) * factor)
        # Rewritten even unchanged, as other bytes (line ending, column order told by the
        # sweep id): the same bytes would be the same run, since a copy of a capture is it.
        term = "\n" if b"\r\n" in (src / "requests.csv").read_bytes() else "\r\n"
        head, rest = list(rows[0])[:3], list(rows[0])[3:]  # the first three identify the file
        turn = sum(map(ord, sweep_id)) % len(rest)
        with open(dst / "requests.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=head + rest[turn:] + rest[:turn], lineterminator=term)
            w.writeheader()
            w.writerows(rows)
        out.append(dst)
    return out


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweeps")
    tk = tracekit.open(tmp / "sweeps.duckdb")
    for f in sorted(SWEEP.iterdir()):
        tk.ingest(f)
    for f in _sweep_copy(tmp, "sweep-same", {}) + _sweep_copy(tmp, "sweep-slow", {"bs8-nc1024": 1.3}):
        tk.ingest(f)
    yield tk
    tk.close()


def test_sweep_against_itself_and_a_slower_point(sweeps):
    orig = json.loads((next(SWEEP.iterdir()) / "meta.json").read_text())["params"]["sweep"]
    same = sweeps.diff(orig, "sweep-same")
    assert set(same["scope"]) == {"sweep"} and same.height == 16 * 2
    assert set(same["verdict"]) == {"unchanged"}
    # medians and p95 from the requests themselves (numpy's linear interpolation)
    import numpy as np

    for folder in sorted(SWEEP.iterdir()):
        bs, nc = folder.name.split("-")[1:3]
        key = f"bs={bs[2:]},nc={nc[2:]}"
        lat = _timed(folder)
        row = same.filter(pl.col("key") == key)
        assert row.filter(pl.col("metric") == "latency_med_ms")["base"][0] == pytest.approx(np.median(lat), rel=1e-12)
        assert row.filter(pl.col("metric") == "latency_p95_ms")["new"][0] == pytest.approx(np.percentile(lat, 95), rel=1e-12)
    slow = sweeps.diff(orig, "sweep-slow")
    flagged = _flagged(slow)
    assert set(flagged["key"]) == {"bs=8,nc=1024"} and set(flagged["verdict"]) == {"regressed"}
    assert flagged.filter(pl.col("metric") == "latency_med_ms")["delta_pct"][0] == pytest.approx(30, abs=0.01)
    assert slow.row(0, named=True)["key"] == "bs=8,nc=1024"  # the largest change in latency first
    # a sweep is also named by any of its runs
    run_of_slow = sweeps.sql("SELECT max(name) AS n FROM runs WHERE json_extract_string(params, '$.sweep') = 'sweep-slow'")["n"][0]
    by_run = sweeps.diff(orig, run_of_slow, by="sweep")
    assert by_run.equals(slow)


# -- ncu ---------------------------------------------------------------------------------

#: ncu metric (as `ncu --page details --print-metric-name name` prints it) -> diff metric
NCU_DETAILS = {
    "gpu__time_duration.sum": "duration_ns",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_throughput_pct",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "launch__block_size": "block_size",
    "launch__grid_size": "grid_size",
    "launch__waves_per_multiprocessor": "waves_per_sm",
}
_TIME = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}


def ncu_details(path: Path) -> dict[tuple[int, str], tuple[float, float]]:
    """(launch ID, diff metric) -> (value, printed precision), from the details CSV."""
    out: dict[tuple[int, str], tuple[float, float]] = {}
    with lzma.open(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            metric = NCU_DETAILS.get(r["Metric Name"])
            if metric is None or not r["Metric Value"]:
                continue
            text = r["Metric Value"].replace(",", "")
            scale = _TIME.get(r["Metric Unit"], 1) if metric == "duration_ns" else 1
            decimals = len(text.split(".")[1]) if "." in text else 0
            out[(int(r["ID"]), metric)] = (float(text) * scale, 0.5 * 10 ** -decimals * scale)
    return out


def _ncu_expected(tk, run: str, details: Path, key: str, metric: str) -> tuple[float, float] | None:
    """The median over the launches of ``key`` (a kernel name, or 'name @ NVTX path') of
    what the details CSV prints for them (the CSV's demangler spells names differently
    from the report's, so launches are found by their ID)."""
    import numpy as np

    name, _, path = key.partition(" @ ")
    ids = tk.sql("SELECT kernel_id FROM ncu_kernels JOIN runs USING (run_id) WHERE runs.name = ? AND ncu_kernels.name = ?"
                 + (" AND nvtx_path = ?" if path else ""), [run, name] + ([path] if path else []))["kernel_id"]
    want = ncu_details(details)
    values = [want[(i, metric)] for i in ids if (i, metric) in want]
    if not values:
        return None
    return float(np.median([v for v, _ in values])), max(p for _, p in values)


@pytest.mark.parametrize("base, new", [("ncu_full", "ncu_sections")])
def test_ncu_values_are_what_ncu_prints(tmp_path, base, new):
    tk = tracekit.open(tmp_path / "ncu.duckdb")
    tk.ingest(DATA / base / "report.ncu-rep.xz", name="a")
    tk.ingest(DATA / new / "report.ncu-rep.xz", name="b")
    df = tk.diff("a", "b")
    assert set(df["scope"]) == {"ncu"}
    checked = 0
    for r in df.iter_rows(named=True):
        for side, run, folder in (("base", "a", base), ("new", "b", new)):
            want = _ncu_expected(tk, run, DATA / folder / "details.csv.xz", r["key"], r["metric"])
            if want is None:
                continue
            value, precision = want
            assert r[side] == pytest.approx(value, abs=precision * 1.0001), (r["key"], r["metric"], side)
            checked += 1
    assert checked >= 2 * 4 * 5  # both reports, every kernel, the metrics both have
    # launch settings have no better/worse direction; the two reports are of the same launches
    assert df.filter(pl.col("metric").is_in(["block_size", "grid_size", "registers_per_thread"]))["delta"].abs().max() == 0
    tk.close()


# -- chart -------------------------------------------------------------------------------


def test_diff_chart(store, tmp_path):
    from tracekit import charts

    ch = charts.chart(store, "diff", base="hstu", new="slow")
    spec = ch.to_dict()
    bars = [v for layer in spec["layer"] for v in layer.get("data", {}).get("values", []) if "verdict" in v]
    assert bars[0]["label"].startswith("kernel · ") or bars[0]["label"].startswith("nvtx · ")
    regressed = {b["key"] for b in bars if b["verdict"] == "regressed"}
    assert LAYER_NORM in regressed
    assert all(b["delta_pct"] != 0 for b in bars)  # keys that did not move are not drawn
    png = charts.save(ch, tmp_path / "diff.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    same = charts.chart(store, "diff", base="hstu", new="hstu").to_dict()
    assert "no key changed" in json.dumps(same)
    with pytest.raises(tracekit.ParamError, match="-p base=RUN -p new=RUN"):
        charts.chart(store, "diff", base="hstu")
    with pytest.raises(tracekit.ParamError, match="not --run"):
        charts.chart(store, "diff", run="hstu", base="hstu", new="slow")


def test_a_bad_reference_does_not_ingest_the_other_file(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "diff", str(HSTU), "no-such-run"]) == 2
    assert "no run or sweep 'no-such-run'" in capsys.readouterr().err
    assert not db.exists()  # nothing ingested, no store created


def test_diff_sql_headers_declare_their_parameters():
    from importlib import resources

    from tracekit.registry import get_registry, parse_header, sql_parameters

    files = sorted(f for f in (resources.files("tracekit.queries") / "_diff").iterdir() if f.name.endswith(".sql"))
    assert len(files) >= 9
    for f in files:
        q = parse_header(f.name[:-4], "_diff", f.read_text())
        assert set(q.params) == sql_parameters(q.sql), f.name
        assert q.columns, f.name
    assert not any(q.source == "_diff" for q in get_registry().queries.values())  # not named queries
