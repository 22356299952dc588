"""The attention benchmark (tracekit.kernels.bench) on the CPU: the Triton kernels under the
interpreter (TRITON_INTERPRET=1, set before triton is imported, as tests/test_kernels_hstu.py
does), fp32, tiny shapes. The seed configurations run the dense and block-sparse kernels,
variants that cannot run are said, each output is checked against its reference, speedups
come with an interval."""

from __future__ import annotations

import csv
import json
import math
import os

import pytest

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("interpreter tests: run them without CUDA (CUDA_VISIBLE_DEVICES=)", allow_module_level=True)
os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")
from _interpreter import without_rescans  # noqa: E402

without_rescans()

from tracekit.kernels import api, bench  # noqa: E402
from tracekit.kernels.bench import (  # noqa: E402
    CONFIGS,
    DEFAULT_CONFIGS,
    bench_attention,
    format_table,
    gpu_delay,
    skip_lines,
    speedup_interval,
)

from tracekit.errors import ParamError  # noqa: E402

FAST = dict(dtype="fp32", warmup_ms=0, rep_ms=0, device="cpu")
SEED_VARIANTS = ("triton_dense", "triton_block_sparse", "reference_block_sparse")
DENSE = "B=1,N=32,H=1,d=16,targets=4"
BSA = "kind=bsa,B=1,N=64,H=1,d=16,bs=16,counts=1"


@pytest.fixture(scope="module")
def seed1(tmp_path_factory):
    """seed1 (N=64 < block_size 32 x block_counts 4) with the seed benchmark's variants."""
    out = tmp_path_factory.mktemp("seed1")
    skipped = []
    rows = bench_attention(["seed1"], variants=(*SEED_VARIANTS, "sdpa"), baseline="triton_dense",
                           json_path=out / "r.json", csv_path=out / "r.csv",
                           on_skip=lambda *a: skipped.append(a), **FAST)
    return rows, skipped, out


def test_seed_configs_run_dense_and_block_sparse(seed1):
    want = [(1, 64, 4, 16, 32), (2, 128, 8, 32, 64), (4, 256, 8, 32, 64), (8, 512, 8, 32, 64),
            (16, 1024, 8, 32, 64)]
    for i, dims in enumerate(want, 1):
        c = CONFIGS[f"seed{i}"]
        assert (c["B"], c["N"], c["H"], c["d_qk"], c["d_v"]) == dims
        assert (c["kind"], c["bs"], c["counts"]) == ("bsa", 32, 4)
        assert all(bench.skip_reason(v, c) is None for v in (*SEED_VARIANTS, "reference", "peer"))
    rows, skipped, _ = seed1
    assert [r["variant"] for r in rows] == list(SEED_VARIANTS)
    for r in rows:
        assert r["error"] is None and r["check_error"] is None, r
        assert r["block_size"] == 32 and r["block_counts"] == 4
        assert r["matches_reference"] is True and r["rel_err"] < 1e-5 and r["max_abs_err"] < 1e-5
    bsa = [r for r in rows if "block_sparse" in r["variant"]]
    assert [r["sel_agree"] for r in bsa] == [1.0, 1.0]
    assert rows[0]["sel_agree"] is None  # dense: no selection
    assert skipped == [("seed1", "sdpa", "sdpa needs d_qk == d_v and sequences of one length")]


def test_json_and_csv_carry_samples_intervals_and_errors(seed1):
    rows, _, out = seed1
    doc = json.loads((out / "r.json").read_text())
    assert doc["skipped"] == [dict(config="seed1", variant="sdpa",
                                   reason="sdpa needs d_qk == d_v and sequences of one length")]
    assert doc["err_tol"] == 1e-4
    new = ("speedup_low", "speedup_high", "max_abs_err", "rel_err", "err_tol", "matches_reference", "sel_agree")
    for r in doc["results"]:
        assert set(new) <= set(r) and len(r["samples_ms"]) == r["n_rep"] >= 3
        assert min(r["samples_ms"]) == r["min_ms"] and max(r["samples_ms"]) == r["max_ms"]
    base = doc["results"][0]
    assert base["variant"] == "triton_dense" and base["speedup_low"] == base["speedup_high"] == 1.0
    with open(out / "r.csv", newline="") as f:
        got = list(csv.DictReader(f))
    assert set(new) <= set(got[0]) and "samples_ms" not in got[0]
    assert [g["matches_reference"] for g in got] == ["True"] * 3
    for r in rows:
        assert r["speedup_low"] <= r["speedup_vs_baseline"] <= r["speedup_high"]
    text = format_table(rows)
    body = "\n".join(text.splitlines()[2:2 + len(rows)])
    assert "95%_interval" in text and "ok sel 100%" in body and "MISMATCH" not in body


def test_json_and_csv_named_gz_are_gzip_compressed_and_other_formats_refused(tmp_path):
    """--json r.json.gz writes gzip-compressed JSON (tracekit ingest and diff read it as it is;
    it was plain JSON under a .gz name), --csv r.csv.gz gzip-compressed CSV; a name that says
    another format or compression is refused before anything runs."""
    import gzip

    from tracekit.cli import main as cli_main

    rows = bench_attention([DENSE], variants=("triton_dense",), baseline="triton_dense",
                           json_path=tmp_path / "r.json.gz", csv_path=tmp_path / "r.csv.gz", **FAST)
    with gzip.open(tmp_path / "r.json.gz", "rt") as f:
        assert [r["median_ms"] for r in json.load(f)["results"]] == [r["median_ms"] for r in rows]
    with gzip.open(tmp_path / "r.csv.gz", "rt", newline="") as f:
        assert [float(r["median_ms"]) for r in csv.DictReader(f)] == [r["median_ms"] for r in rows]
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(tmp_path / "r.json.gz")]) == 0
    for json_path, csv_path, said in ((tmp_path / "r.csv", None, "the JSON of tracekit bench is text, not CSV"),
                                      (tmp_path / "r.json.xz", None, "is text, not xz-compressed"),
                                      (None, tmp_path / "r.json", "the CSV of tracekit bench is text, not JSON")):
        with pytest.raises(Exception, match=said):
            bench_attention([DENSE], variants=("triton_dense",), json_path=json_path, csv_path=csv_path, **FAST)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv.gz", "r.json.gz", "s.duckdb"]


def test_skipped_variants_are_said_and_nothing_to_run_is_an_error(capsys):
    rows = bench_attention([DENSE], variants=("reference", "triton_block_sparse"),
                           baseline="reference_block_sparse", **FAST)
    assert [r["variant"] for r in rows] == ["reference"]
    assert rows[0]["speedup_vs_baseline"] is None and rows[0]["matches_reference"] is True
    err = capsys.readouterr().err.splitlines()
    assert err == [f"skipped reference_block_sparse (the baseline, not asked for: no speedups there) on 1 "
                   f"configuration: 1 of other kinds (dense: {DENSE}); it runs on bsa configurations",
                   f"skipped triton_block_sparse on 1 configuration: 1 of other kinds (dense: {DENSE}); it runs on "
                   "bsa configurations"], err
    with pytest.raises(ParamError, match=r"--variants triton_cached: none runs on the configurations asked for "
                                         r"\(seed1: a bsa configuration runs"):
        bench_attention(["seed1", DENSE], variants=("triton_cached",), **FAST)


def test_cli_nothing_to_run_is_one_line(capsys):
    from tracekit.cli import main

    assert main(["bench", "attention", "--config", "seed2", "--variants", "triton_cached,reference_cached"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracekit: error: --variants triton_cached,reference_cached: none runs") and \
        err.count("\n") == 1
    # the module's own command line says it the same way (it printed a traceback)
    for args in (["--config", "nosuch"], ["--config", "seed2", "--variants", "triton_cached,reference_cached"]):
        assert bench.cli(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("python -m tracekit.kernels.bench: error: ") and err.count("\n") == 1, err


def test_configurations_given_twice_or_empty_and_values_that_start_with_a_dash(monkeypatch, capsys, tmp_path):
    """--config given twice (each would be measured twice, and its JSON refused by ingest) or
    empty (no configuration, not the standard set) is one line before anything runs; a value
    that starts with '-' is the option's, not another option; every measurement failing is
    exit 1, not 0."""
    from tracekit.cli import main

    for args, said in ((["--config", "seed1;seed1"], "--config: 'seed1' given twice"),
                       (["--config", "seed1", "--config", " seed1 "], "--config: 'seed1' given twice"),
                       (["--config", ""], "--config '': no configuration"),
                       (["--config", ";"], "--config ';': no configuration"),
                       (["--config", "seed1", "--json", "r.out", "--csv", "./r.out"], "--json and --csv name one file")):
        assert main(["bench", "attention", *args, "--variants", "reference"]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith(f"tracekit: error: {said}") and err.count("\n") == 1, err
    seen = []
    monkeypatch.setattr(bench, "bench_attention", lambda *a, **kw: seen.append(kw) or [{"error": "X: failed"}])
    monkeypatch.setattr(bench, "format_table", lambda rows: "")
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "attention", "--config", "seed1", "--json", "-r.json", "--variants", "-x"]) == 1
    assert seen[0]["json_path"] == "-r.json" and seen[0]["variants"] == ("-x",)
    assert capsys.readouterr().err.endswith("tracekit: bench: no measurement succeeded; each row above says why\n")


def test_triton_on_the_cpu_without_the_interpreter_is_one_line(monkeypatch, capsys):
    """On the CPU without TRITON_INTERPRET=1 the Triton variants cannot run: one line before
    anything runs, saying how (it was a table whose Triton rows held 'KernelInputError: ...
    needs TRI' in their time's column, exit 0); the PyTorch variants run."""
    from tracekit.cli import main

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ParamError, match=r"^--variants: on the CPU, triton_dense run only in Triton's interpreter: "
                                         r"set TRITON_INTERPRET=1 before tracekit starts"):
        bench_attention(["seed1"], variants=("triton_dense", "reference"), baseline="reference", **FAST)
    if not torch.cuda.is_available():
        assert main(["bench", "attention", "--config", "seed1", "--dtype", "fp32"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tracekit: error: --variants: on the CPU, triton_dense, triton_block_sparse") and \
            err.count("\n") == 1, err
    rows = bench_attention(["seed1"], variants=("reference",), **FAST)
    assert [r["error"] for r in rows] == [None]


def test_bf16_on_the_cpu_is_refused_where_triton_would_interpret_it(capsys):
    """On the CPU the Triton variants run in Triton's interpreter, which computes bfloat16 on
    its bit patterns (the default dtype gave triton_dense rel_err 1e10, MISMATCH): one line
    before anything runs, naming those variants; the reference alone, or fp16, runs."""
    from tracekit.cli import main

    with pytest.raises(ParamError, match=r"^--dtype bf16: on the CPU, triton_dense, triton_block_sparse run in "
                                         r"Triton's interpreter, which does not compute bfloat16"):
        bench_attention(["seed2"], variants=("triton_dense", "triton_block_sparse"), dtype="bf16", device="cpu",
                        warmup_ms=0, rep_ms=0)
    if torch.cuda.is_available():
        pytest.skip("the command's device is the GPU here")
    assert main(["bench", "attention", "--config", "seed2"]) == 2  # (the defaults: bf16, the Triton variants)
    err = capsys.readouterr().err
    assert err.startswith("tracekit: error: --dtype bf16: on the CPU, ") and err.count("\n") == 1, err
    rows = bench_attention(["seed2"], variants=("reference",), dtype="bf16", device="cpu", warmup_ms=0, rep_ms=0)
    assert [r["matches_reference"] for r in rows] == [True]
    capsys.readouterr()


def _scaled(fn):
    def wrong(*a, **kw):
        res = fn(*a, **kw)
        return (res[0] * 1.1, res[1]) if isinstance(res, tuple) else res * 1.1
    return wrong


@pytest.mark.parametrize("wrong", [False, True], ids=["correct", "output_times_1.1"])
def test_error_columns_catch_a_wrong_kernel(wrong, monkeypatch):
    if wrong:
        monkeypatch.setattr(api, "hstu_attention", _scaled(api.hstu_attention))
        monkeypatch.setattr(api, "hstu_attention_block_sparse", _scaled(api.hstu_attention_block_sparse))
    rows = bench_attention([DENSE, BSA], variants=("triton_dense", "triton_block_sparse", "reference"), **FAST)
    got = {(r["kind"], r["variant"]): r for r in rows}
    assert set(got) == {("dense", "triton_dense"), ("dense", "reference"), ("bsa", "triton_dense"),
                        ("bsa", "triton_block_sparse"), ("bsa", "reference")}
    for (_, variant), r in got.items():
        bad = wrong and variant != "reference"
        assert r["matches_reference"] is not bad, r
        if bad:
            assert r["rel_err"] == pytest.approx(0.1, rel=1e-3) and r["max_abs_err"] > 1e-4
        else:
            assert r["rel_err"] < 1e-5
    assert got[("bsa", "triton_block_sparse")]["sel_agree"] == 1.0
    text = format_table(rows)
    body = "\n".join(text.splitlines()[2:2 + len(rows)])
    assert body.count("MISMATCH") == (3 if wrong else 0)
    assert ("3 rows failed the correctness check" in text) is wrong


def _times(n, centre, seed):
    g = torch.Generator().manual_seed(seed)
    return (centre * torch.exp(0.1 * torch.randn(n, generator=g, dtype=torch.float64))).tolist()


def test_speedup_interval_contains_the_estimate_and_narrows():
    widths = []
    for n in (10, 40, 400):
        base, var = _times(n, 2.0, 1), _times(n, 1.0, 2)
        point = torch.tensor(base).quantile(0.5).item() / torch.tensor(var).quantile(0.5).item()
        lo, hi = speedup_interval(base, var)
        assert lo < point < hi and 1.5 < lo and hi < 2.6
        assert speedup_interval(base, var) == (lo, hi)  # fixed seed
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2] and widths[2] < 0.5 * widths[0]
    same = _times(50, 1.0, 3)
    lo, hi = speedup_interval(same, same)
    assert lo < 1.0 < hi


def test_default_run_says_each_skipped_variant_once():
    """The standard set with the default variants skips 46 (configuration, variant) pairs: one
    line per variant on stderr, every pair in the list the JSON keeps."""
    variants = ("triton_dense", "triton_block_sparse", "triton_cached", "reference", "sdpa")
    plans, skipped = bench._plan(DEFAULT_CONFIGS, variants, "reference")
    assert len(plans) == len(DEFAULT_CONFIGS)
    ran = sum(len(todo) for _, _, todo in plans)
    assert ran + len(skipped) == len(DEFAULT_CONFIGS) * len(variants) and len(skipped) == 46
    assert all(set(s) == {"config", "variant", "reason"} for s in skipped)
    lines = skip_lines(skipped)
    assert [line.split()[1] for line in lines] == ["triton_cached", "sdpa", "triton_block_sparse"]
    assert lines[2] == ("skipped triton_block_sparse on 16 configurations: 16 of other kinds (dense, cached: "
                        "hstu_T512, hstu_T1024, hstu_T2048, +13 more); it runs on bsa configurations")
    assert lines[0].startswith("skipped triton_cached on 15 configurations: 15 of other kinds (bsa, dense: seed1, ")
    assert lines[1] == ("skipped sdpa on 15 configurations: 8 of other kinds (cached: cached_C0_n256, "
                        "cached_C1024_n256, cached_C2048_n256, +5 more); it runs on dense, bsa configurations; "
                        "7 (seed1, seed2, seed3, +4 more): sdpa needs d_qk == d_v and sequences of one length")
    assert skip_lines([]) == []


def test_gpu_delay_covers_the_host_within_bounds():
    """The GPU-side delay before each timed call: twice the host's median enqueue time, at
    least the floor, at most the cap, in SM cycles rounded up."""
    khz = 1_980_000.0  # an H200 at 1980 MHz: cycles per ms
    assert gpu_delay([0.1, 0.2, 0.3], khz) == (pytest.approx(0.4), math.ceil(0.4 * khz))
    assert gpu_delay([0.2, 0.2, 50.0], khz)[0] == pytest.approx(0.4)  # one stall: the median holds
    assert gpu_delay([0.001] * 5, khz)[0] == bench.GPU_DELAY_FLOOR_MS
    assert gpu_delay([100.0], khz) == (bench.GPU_DELAY_CAP_MS, math.ceil(bench.GPU_DELAY_CAP_MS * khz))
    assert gpu_delay([0.1], 1000.5, factor=3, floor_ms=0, cap_ms=1) == (pytest.approx(0.3), math.ceil(0.3 * 1000.5))
    for bad in (dict(host_ms=[]), dict(host_ms=[float("nan")]), dict(host_ms=[-1.0]),
                dict(host_ms=[0.1], cycles_per_ms=0.0), dict(host_ms=[0.1], floor_ms=2.0, cap_ms=1.0)):
        kw = dict(cycles_per_ms=khz) | bad
        with pytest.raises(ValueError):
            gpu_delay(**kw)


def test_cpu_rows_carry_no_gpu_timing_columns(seed1):
    """On the CPU (_time_cpu, unchanged) the GPU timing columns are there and empty."""
    rows, _, out = seed1
    for r in json.loads((out / "r.json").read_text())["results"]:
        assert r["host_ms"] is None and r["gpu_delay_ms"] is None and r["late_calls"] is None
    assert "timing" not in json.loads((out / "r.json").read_text())["environment"]
    text = format_table(rows)
    assert "host_ms" in text.splitlines()[0] and "late_calls" not in text


def test_cli_passes_no_gpu_delay(monkeypatch):
    """`tracekit bench attention --no-gpu-delay` reaches bench_attention as gpu_delay=False
    (the default keeps the delay)."""
    from tracekit.cli import main

    seen = []
    monkeypatch.setattr(bench, "bench_attention", lambda *a, **kw: seen.append(kw["gpu_delay"]) or [])
    monkeypatch.setattr(bench, "format_table", lambda rows: "")
    for args, want in ((["--no-gpu-delay"], False), ([], True)):
        assert main(["bench", "attention", "--config", "seed1", *args]) == 0
        assert seen.pop() is want


def test_the_table_ends_with_each_variants_speedups_over_the_configurations():
    """The BSA seed's mean, min and max speedup: per variant timed on several configurations
    (tests/data/bench_pair's H200 run), the geometric mean of its speedups and the extremes."""
    import json
    import lzma

    from conftest import DATA

    rows = json.loads(lzma.open(DATA / "bench_pair" / "slow.json.xz").read())["results"]
    dense = [r["speedup_vs_baseline"] for r in rows if r["variant"] == "triton_dense"]
    mean = math.exp(sum(map(math.log, dense)) / 3)
    lines = format_table(rows).splitlines()
    assert (f"triton_dense vs sdpa over 3 configurations: geometric mean {mean:.2f}x, min {min(dense):.2f}x "
            f"(bsa_T4096), max {max(dense):.2f}x (hstu_T1024)") in lines
    assert not any(line.startswith("triton_block_sparse vs") for line in lines)  # (one configuration)


PROGRAMS = os.path.join(os.path.dirname(__file__), "data", "programs")
VARIANT_FILE = os.path.join(PROGRAMS, "attention_variant.py")
CACHED = "kind=cached,B=2,N=32,H=1,d=16,cache=16,new=16"


def test_a_variant_of_yours_runs_on_every_kind_is_checked_and_can_be_the_baseline(tmp_path):
    """A kernel of yours named NAME=FILE.py:FUNCTION runs on a dense, a block-sparse and a cached
    configuration (there: cache and new tokens recomputed, as triton_dense), checked against the
    reference: tests/data/programs/attention_variant.py's loop matches; its causal-only mask
    (candidates attending to each other) is a MISMATCH where there are targets, not elsewhere."""
    import lzma

    import tracekit

    rows = bench_attention([DENSE, BSA, CACHED], variants=("triton_dense", f"loop={VARIANT_FILE}:hstu_loop",
                                                           f"{VARIANT_FILE}:hstu_causal_only"),
                           baseline="loop", json_path=tmp_path / "r.json", **FAST)
    got = {(r["config"], r["variant"]): r for r in rows}
    assert set(got) == {(c, v) for c in (DENSE, BSA, CACHED) for v in ("triton_dense", "loop", "hstu_causal_only")}
    for (config, variant), r in got.items():
        assert r["error"] is None and r["check_error"] is None, r
        assert r["matches_reference"] is (variant != "hstu_causal_only" or config != DENSE), r
        assert r["baseline"] == "loop"
    assert got[(DENSE, "hstu_causal_only")]["rel_err"] > 0.01 and got[(DENSE, "loop")]["rel_err"] < 1e-5
    assert all(got[(c, "loop")]["speedup_vs_baseline"] == 1.0 for c in (DENSE, BSA, CACHED))
    assert got[(CACHED, "loop")]["tokens"] == got[(CACHED, "triton_dense")]["tokens"]
    assert got[(DENSE, "loop")]["source"] == f"{VARIANT_FILE}:hstu_loop" and "source" not in got[(DENSE, "triton_dense")]
    text = format_table(rows).splitlines()
    assert f"yours: loop = {VARIANT_FILE}:hstu_loop, hstu_causal_only = {VARIANT_FILE}:hstu_causal_only" in text
    assert "1 row failed the correctness check" in text
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["variant_sources"] == {"loop": f"{VARIANT_FILE}:hstu_loop",
                                      "hstu_causal_only": f"{VARIANT_FILE}:hstu_causal_only"}
    with open(tmp_path / "r.json.xz", "wb") as f:  # (a store keeps them: the ingest reads the file's sources too)
        f.write(lzma.compress((tmp_path / "r.json").read_bytes()))
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(tmp_path / "r.json.xz")
        res = tk.query("bench-results", limit=0)
        meta = json.loads(tk.sql("SELECT meta FROM runs").item())
    assert sorted(set(res["variant"])) == ["hstu_causal_only", "loop", "triton_dense"]
    assert meta["bench"]["variant_sources"] == doc["variant_sources"]


def test_a_variant_of_yours_from_a_module_or_as_a_function(monkeypatch):
    """MODULE:FUNCTION imports it (from sys.path, as Python does: not found off it); the library
    takes a (name, function) pair too; the same item as variant and baseline is one variant."""
    import sys

    monkeypatch.setattr(sys, "path", [p for p in sys.path if os.path.abspath(p or ".") != PROGRAMS])
    monkeypatch.delitem(sys.modules, "attention_variant", raising=False)
    with pytest.raises(ParamError, match="attention_variant could not be loaded .ModuleNotFoundError"):
        bench_attention([DENSE], variants=("mod=attention_variant:hstu_loop",), **FAST)
    monkeypatch.syspath_prepend(PROGRAMS)
    import attention_variant

    rows = bench_attention([DENSE], variants=("mod=attention_variant:hstu_loop",
                                              ("fn", attention_variant.hstu_causal_only)),
                           baseline="mod=attention_variant:hstu_loop", **FAST)
    assert [(r["variant"], r["matches_reference"], r["speedup_vs_baseline"] is not None) for r in rows] == \
        [("mod", True, True), ("fn", False, True)]  # (DENSE has candidates: the causal-only mask mismatches)
    assert rows[1]["source"] == "attention_variant:hstu_causal_only"


@pytest.mark.parametrize(("item", "said"), [
    ("mine=nosuch/attn.py:f", "nosuch/attn.py: no such file"),
    (f"mine={VARIANT_FILE}:nosuch", f"{VARIANT_FILE} has no nosuch"),
    ("mine=tracekit_no_such_module:f", "tracekit_no_such_module could not be loaded (ModuleNotFoundError: No module "
                                       "named 'tracekit_no_such_module')"),
    (f"mine={VARIANT_FILE}:torch", f"{VARIANT_FILE}'s torch is a module, not a function"),
    (f"triton_dense={VARIANT_FILE}:hstu_loop", "'triton_dense' names one of ours; give yours another name"),
    (f"my attn={VARIANT_FILE}:hstu_loop", "the name 'my attn' is not a word (letters, digits, _ . -)"),
    (f"x/y={VARIANT_FILE}:hstu_loop", "x/y=" + VARIANT_FILE + ": no such file"),
    ("reference=nosuch.py:f", "'reference' names one of ours"),  # (named before the file is looked for)
    (f"mine={VARIANT_FILE}:_attention", "cannot be called as fn(q, k, v, seq_offsets, max_seq_len=, alpha=, "
                                        "num_targets=), as tracekit.kernels.api.hstu_attention is (its arguments: "
                                        "(q, k, v, seq_offsets, max_seq_len, alpha, num_targets, candidates_apart"),
    ("mine", "unknown variant; known: triton_dense"),
])
def test_a_variant_of_yours_that_cannot_run_is_one_line_before_anything_runs(item, said, capsys):
    from tracekit.cli import main

    with pytest.raises(ParamError) as err:
        bench_attention([DENSE], variants=("triton_dense", item), **FAST)
    assert str(err.value).startswith(f"--variants {item!r}: ") and said in str(err.value), str(err.value)
    assert main(["bench", "attention", "--config", DENSE, "--dtype", "fp32", "--variants", f"reference,{item}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("tracekit: error: --variants ") and said in err and err.count("\n") == 1, err


def test_one_function_given_twice_is_one_variant_and_odd_items_are_one_line(tmp_path):
    """The same source as a variant and as the baseline is one variant; a path holding '=' is a
    path; an item neither text nor a (name, function) pair is refused in one line."""
    import shutil

    rows = bench_attention([DENSE], variants=(f"a={VARIANT_FILE}:hstu_loop",), baseline=f"{VARIANT_FILE}:hstu_loop",
                           **FAST)
    assert [(r["variant"], r["baseline"]) for r in rows] == [("a", "a")]
    odd = tmp_path / "x=y"
    odd.mkdir()
    shutil.copy(VARIANT_FILE, odd / "attn.py")
    rows = bench_attention([DENSE], variants=(f"{odd}/attn.py:hstu_loop",), baseline=f"{odd}/attn.py:hstu_loop",
                           **FAST)
    assert [r["variant"] for r in rows] == ["hstu_loop"] and rows[0]["matches_reference"] is True
    with pytest.raises(ParamError, match=r"^--variants \[\['t', 1\]\]: unknown variant"):
        bench_attention([DENSE], variants=([["t", 1]],), **FAST)


def test_a_file_of_yours_that_fails_to_load_is_said_with_its_error(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "raises.py").write_text("import sys\nsys.exit('needs a GPU')\n")
    (tmp_path / "twice.py").write_text("def f(q, k, v, seq_offsets, **kw):\n    return q\n")
    with pytest.raises(ParamError, match=r"broken\.py could not be loaded \(SyntaxError: "):
        bench_attention([DENSE], variants=(f"b={tmp_path}/broken.py:f",), **FAST)
    with pytest.raises(ParamError, match=r"raises\.py could not be loaded \(SystemExit: needs a GPU\)"):
        bench_attention([DENSE], variants=(f"r={tmp_path}/raises.py:f",), **FAST)
    import sys

    assert not [m for m, mod in sys.modules.items() if str(getattr(mod, "__file__", "")) == str(tmp_path / "raises.py")]
    with pytest.raises(ParamError, match=r"^--variants 'a=.*attention_variant\.py:hstu_loop': 'a' names another of "
                                         "yours"):
        bench_attention([DENSE], variants=(f"a={tmp_path}/twice.py:f", f"a={VARIANT_FILE}:hstu_loop"), **FAST)
    rows = bench_attention([DENSE], variants=(f"a={tmp_path}/twice.py:f", f"b={tmp_path}/twice.py:f "), **FAST)
    assert [(r["variant"], r["matches_reference"]) for r in rows] == [("a", False)]  # (one source: one variant)
