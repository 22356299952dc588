"""nsys's CPU samples and the host's call stacks: ingest, cpu-hotspots, cpu-threads (with the
threads' scheduling), nvtx-cpu, cpu-stacks, export stacks, osrt-stacks.

nsys stats has no report of these, so the evidence is the raw tables of the real exports and
what tests/data/programs/nsys_cpu_hot.cu plants (nsys_cpu_hot/README.md): ``prepare_batch``
does as much work itself as in ``mix_row``, which it calls; with it, four times
``pack_inputs``' work (4:3 with --slow-pack); the ``hasher`` thread runs ``background_hash``
and sleeps (usleep) in turn.
"""

from __future__ import annotations

import sqlite3

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS, let_go
from test_nsys_ingest import _older_export

import tracekit
from tracekit.cli import main as cli_main
from tracekit.errors import CaptureWarning, ParamError, QueryError
from tracekit.ingest import materialized
from tracekit.stacks import export_stacks

QUERIES = ("cpu-hotspots", "cpu-threads", "cpu-stacks")


def _rows(tk, scen: str, **params) -> dict[str, dict]:
    """cpu-hotspots of the run ``scen``, every row, by function."""
    return {r["function"]: r for r in tk.query("cpu-hotspots", run=scen, limit=0, **params).iter_rows(named=True)}


def _thread_named(name: str) -> pl.Expr:
    return pl.col("thread").str.contains(name)


@pytest.mark.parametrize("scen", ["cpu_hot", "cpu_hot_slow", "autograd"])
def test_samples_and_their_stacks_land_as_the_export_has_them(nsys_db, scen):
    """One store row per COMPOSITE_EVENTS sample (its thread, CPU and state), per
    SAMPLING_CALLCHAINS frame (the function and module names resolved) and per SCHED_EVENTS
    scheduling; the run says it traced them."""
    with materialized(NSYS_EXPORTS[scen]) as path, sqlite3.connect(path) as sq:
        samples = sq.execute("SELECT e.id, e.start, e.globalTid, e.cpu, t.label FROM COMPOSITE_EVENTS e "
                             "JOIN ENUM_SAMPLING_THREAD_STATE t ON t.id = e.threadState ORDER BY 1").fetchall()
        frames = sq.execute("SELECT c.id, c.stackDepth, s.value, m.value, c.unresolved <> 0 FROM SAMPLING_CALLCHAINS c "
                            "JOIN StringIds s ON s.id = c.symbol JOIN StringIds m ON m.id = c.module "
                            "ORDER BY 1, 2").fetchall()
    run = f"(SELECT run_id FROM runs WHERE name = '{scen}')"
    assert len(samples) > 2000 and nsys_db.sql(
        f"SELECT sample_id, ts_ns, global_tid, cpu, thread_state FROM cpu_samples WHERE run_id = {run} ORDER BY 1"
    ).rows() == samples
    assert len(frames) > 5000 and nsys_db.sql(
        f"SELECT sample_id, depth, function, module, unresolved FROM cpu_sample_frames WHERE run_id = {run} "
        "ORDER BY 1, 2").rows() == frames
    with materialized(NSYS_EXPORTS[scen]) as path, sqlite3.connect(path) as sq:
        sched = sq.execute("SELECT start, globalTid, cpu, isSchedIn <> 0 FROM SCHED_EVENTS ORDER BY 1, 2, 4").fetchall()
    assert len(sched) > 2000 and nsys_db.sql(
        f"SELECT ts_ns, global_tid, cpu, sched_in FROM thread_sched WHERE run_id = {run} ORDER BY 1, 2, 4").rows() == sched
    traced = nsys_db.sql(f"SELECT json_extract_string(meta, '$.traced[*]') FROM runs WHERE run_id = {run}").item()
    assert {"cpu_samples", "cpu_sample_frames"} <= set(traced)


@pytest.mark.parametrize("scen", ["cpu_hot", "cpu_hot_again"])
def test_hotspots_find_the_planted_shares(nsys_db, scen):
    """Self samples: prepare_batch's own equal mix_row's (each 2 units); total: prepare_batch
    with mix_row under it is their sum, four times pack_inputs'; the times are the samples
    times the sampling interval (2 ms, nsys's default timer)."""
    f = _rows(nsys_db, scen)
    prep, mix, pack = f["prepare_batch(float)"], f["mix_row(float)"], f["pack_inputs(float, long)"]
    assert 0.85 < prep["self_samples"] / mix["self_samples"] < 1.15
    assert abs(prep["total_pct"] - (prep["self_pct"] + mix["self_pct"])) < 4
    assert 3.3 < prep["total_pct"] / pack["total_pct"] < 4.8
    assert mix["total_pct"] < 1.2 * mix["self_pct"] + 2  # (mix_row calls nothing)
    interval = nsys_db.sql(f"SELECT * FROM cpu_sample_interval((SELECT run_id FROM runs WHERE name = '{scen}'))").item()
    assert 1.99e6 < interval < 2.01e6
    assert prep["self_ns"] == round(prep["self_samples"] * interval)
    assert prep["threads"] == 1 and prep["module"].endswith("/nsys_cpu_hot")
    # the four planted functions first, in the bottom-up order: most self samples first
    top = nsys_db.query("cpu-hotspots", run=scen, limit=4)
    assert set(top["function"]) == {"prepare_batch(float)", "mix_row(float)", "background_hash(float)",
                                    "pack_inputs(float, long)"}
    assert top["self_samples"].to_list() == sorted(top["self_samples"], reverse=True)
    # the callers by their total: main holds every sample of the main thread that has a stack
    callers = nsys_db.query("cpu-hotspots", run=scen, order="total", limit=10)
    assert "main" in set(callers["function"]) and callers["total_pct"][0] >= callers["total_pct"][-1]
    assert not any(fn.startswith("[") for fn in callers["function"])  # (nsys's markers are not callers)


def test_the_slower_function_shows_in_its_share(nsys_db):
    """--slow-pack: pack_inputs does 3 units instead of 1; its samples about triple and it
    leads the hot spots, prepare_batch with mix_row now 4:3 to it."""
    base, slow = _rows(nsys_db, "cpu_hot"), _rows(nsys_db, "cpu_hot_slow")
    pack = "pack_inputs(float, long)"
    assert 2.4 < slow[pack]["self_samples"] / base[pack]["self_samples"] < 3.6
    assert nsys_db.query("cpu-hotspots", run="cpu_hot_slow", limit=1)["function"].item() == pack
    assert 1.0 < slow["prepare_batch(float)"]["total_pct"] / slow[pack]["total_pct"] < 1.7


def test_a_thread_and_an_nvtx_range_narrow_the_samples(nsys_db):
    """thread= (by name or tid) keeps that thread's samples; range= the samples taken inside
    NVTX ranges of that name on their own thread: the prepare range holds prepare_batch and
    mix_row, the pack range pack_inputs, the hasher thread background_hash."""
    hasher = _rows(nsys_db, "cpu_hot", thread="hasher")
    user = {fn: r for fn, r in hasher.items() if not fn.startswith("0x") and r["self_samples"]}
    assert max(user, key=lambda fn: user[fn]["self_samples"]) == "background_hash(float)"
    assert hasher["background_hash(float)"]["self_pct"] > 95
    tid = nsys_db.query("cpu-threads", run="cpu_hot").filter(_thread_named("hasher"))["tid"].item()
    assert _rows(nsys_db, "cpu_hot", thread=str(tid)) == hasher
    prepare = _rows(nsys_db, "cpu_hot", range="prepare")
    assert prepare["prepare_batch(float)"]["self_pct"] + prepare["mix_row(float)"]["self_pct"] > 97
    assert prepare["prepare_batch(float)"]["total_pct"] > 97
    assert _rows(nsys_db, "cpu_hot", range=":pack")["pack_inputs(float, long)"]["self_pct"] > 95
    # each sample once, however ranges nest: step holds prepare, pack and launch
    step = nsys_db.query("cpu-hotspots", run="cpu_hot", range="step", limit=0)
    parts = [nsys_db.query("cpu-hotspots", run="cpu_hot", range=r, limit=0)["self_samples"].sum()
             for r in ("prepare", "pack", "launch")]
    assert step["self_samples"].sum() >= sum(parts) > 0.95 * step["self_samples"].sum()


def test_nvtx_ranges_hold_their_samples(nsys_db):
    """nvtx-cpu: a path's samples are those its ranges hold, nested ranges included: prepare's
    are cpu-hotspots' with range=prepare (prepare_batch's and mix_row's), pack's all pack_inputs'
    own, step holds its three nested ranges' and no more than its thread's."""
    paths = {r["path"]: r for r in nsys_db.query("nvtx-cpu", run="cpu_hot", limit=0).iter_rows(named=True)}
    assert set(paths) == {"step", "step/prepare", "step/pack", "step/launch"}
    inside = nsys_db.query("cpu-hotspots", run="cpu_hot", range="prepare", limit=0)
    assert paths["step/prepare"]["samples"] == inside["self_samples"].sum()
    assert paths["step/pack"]["top_function"] == "pack_inputs(float, long)" and paths["step/pack"]["top_function_pct"] == 100
    nested = sum(paths[f"step/{p}"]["samples"] for p in ("prepare", "pack", "launch"))
    main_thread = nsys_db.query("cpu-threads", run="cpu_hot").row(0, named=True)["samples"]
    assert nested <= paths["step"]["samples"] <= main_thread and paths["step"]["samples"] - nested < 0.05 * nested


def test_threads_say_who_burns_the_cpu(nsys_db):
    """cpu-threads: the main loop's thread first, prepare_batch its top function; the hasher
    thread's top function background_hash; the shares sum to 100 %."""
    threads = nsys_db.query("cpu-threads", run="cpu_hot", limit=0)
    assert abs(threads["cpu_pct"].sum() - 100) < 0.5
    main_thread = threads.row(0, named=True)
    assert main_thread["thread"] == "nsys_cpu_hot" and main_thread["top_function"] in ("prepare_batch(float)",
                                                                                       "mix_row(float)")
    hasher = threads.filter(_thread_named("hasher")).row(0, named=True)
    assert hasher["top_function"] == "background_hash(float)" and hasher["top_function_pct"] > 95
    assert 0.55 < main_thread["cpu_pct"] / 100 < 0.85
    # the scheduler's time: the main loop never sleeps (CPU-bound), the hasher sleeps 2 ms a unit;
    # the samples' estimate of the hasher's time is within 3 % of it, the main thread's a little under
    assert main_thread["busy_pct"] > 90 and 20 < hasher["busy_pct"] < 60
    assert abs(hasher["cpu_ns"] / hasher["on_cpu_ns"] - 1) < 0.03
    assert 0.8 < main_thread["cpu_ns"] / main_thread["on_cpu_ns"] <= 1.0
    assert hasher["switches"] > 600  # (a sleep a unit: 600+ iterations)
    quiet = threads.filter(pl.col("samples") == 0)  # scheduled, never sampled
    assert quiet.height > 0 and quiet["on_cpu_ns"].min() > 0 and quiet["top_function"].null_count() == quiet.height


def test_the_autograd_capture_shows_the_interpreter_and_blas_threads(nsys_db):
    """A real PyTorch program (nsys_autograd, sampled): OpenBLAS's worker threads spin in
    blas_thread_server, and the Python interpreter's eval loop is under most of the main
    thread's stacks."""
    f = _rows(nsys_db, "autograd")
    assert f["blas_thread_server"]["threads"] >= 8 and f["blas_thread_server"]["self_pct"] > 10
    assert f["_PyEval_EvalFrameDefault"]["total_pct"] > 50
    threads = nsys_db.query("cpu-threads", run="autograd", limit=0)
    assert threads["top_function"].to_list().count("blas_thread_server") >= 8


def test_stacks_are_folded_from_the_outermost_caller(nsys_db, tmp_path):
    """cpu-stacks: each unwound sample once, its functions outermost first joined by ';';
    function= keeps the stacks through a function; export stacks writes `STACK COUNT` lines."""
    stacks = nsys_db.query("cpu-stacks", run="cpu_hot", limit=0)
    unwound = nsys_db.sql("SELECT count(DISTINCT sample_id) FROM cpu_sample_frames WHERE depth > 0 AND run_id = "
                          "(SELECT run_id FROM runs WHERE name = 'cpu_hot')").item()
    assert stacks["samples"].sum() == unwound and abs(stacks["pct"].sum() - 100) < 1
    mix = nsys_db.query("cpu-stacks", run="cpu_hot", function="MIX_ROW", limit=0)
    assert all(s.endswith("main;prepare_batch(float);mix_row(float)") for s in mix["stack"])
    assert mix["samples"].sum() > 100
    assert all(";[" not in s for s in stacks["stack"])  # (nsys's markers left out)
    out = tmp_path / "hot.folded"
    res = export_stacks(nsys_db, out, run="cpu_hot", range="prepare")
    lines = [ln.rsplit(" ", 1) for ln in out.read_text().splitlines()]
    assert lines and all(n.isdigit() for _, n in lines)
    assert {s.rsplit(";", 1)[-1] for s, _ in lines} >= {"prepare_batch(float)", "mix_row(float)"}
    asked = nsys_db.query("cpu-stacks", run="cpu_hot", range="prepare", limit=0)
    assert sum(int(n) for _, n in lines) == asked["samples"].sum() == res.samples and len(lines) == res.stacks


def test_a_folded_file_is_gzipped_as_named_and_an_empty_selection_is_one_line(nsys_db, tmp_path, capsys):
    """-o NAME.gz writes the folded lines gzip-compressed; a name that says another compression
    or format (.xz, .svg: flamegraph.pl's output, not its input) is refused, as export trace
    refuses one that its JSON is not; a thread and a range that select no sample together are
    an error, not an empty file flamegraph.pl refuses."""
    import gzip

    plain, packed = tmp_path / "hot.folded", tmp_path / "hot.folded.gz"
    export_stacks(nsys_db, plain, run="cpu_hot")
    export_stacks(nsys_db, packed, run="cpu_hot")
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes() and plain.stat().st_size > 0
    for name, said in (("hot.svg", "not an SVG image"), ("hot.xz", "not xz-compressed"), ("hot.json", "not JSON"),
                       ("hot.json.gz", "not JSON"), ("hot.xz.gz", "not xz-compressed")):
        with pytest.raises(tracekit.errors.OutputError, match=rf"^-o {tmp_path / name}: a folded-stacks file is text, "
                                                              rf"{said}; name it stacks.folded \(or stacks.folded.gz"):
            export_stacks(nsys_db, tmp_path / name, run="cpu_hot")
    db = str(nsys_db.path)
    let_go(nsys_db)  # (the CLI opens the store; the module's later tests open it again)
    for args, said in ((["stacks", "-o", str(tmp_path / "t.xz")], "a folded-stacks file is text, not xz-compressed"),
                       (["trace", "-o", str(tmp_path / "t.xz")], "a trace (Chrome Trace Event JSON) is text, not xz"),
                       (["trace", "-o", str(tmp_path / "t.svg")], "not an SVG image; name it trace.json (or "
                                                                   "trace.json.gz, gzip-compressed)"),
                       (["trace", "-o", str(tmp_path / "t.csv.gz")], "a trace (Chrome Trace Event JSON) is text, not "
                                                                      "CSV; name it trace.json"),
                       (["stacks", "--thread", "hasher", "--nvtx", "step", "-o", str(tmp_path / "e.folded")],
                        "holds no CPU sample that --thread 'hasher' and --nvtx 'step' select together; nothing to "
                        "write"),
                       (["stacks", "--thread", "99999", "-o", str(tmp_path / "e.folded")],
                        "export stacks: no CPU sample of the run is of a thread '99999'"),  # (not cpu-stacks:)
                       (["stacks", "--nvtx", "nosuch", "-o", str(tmp_path / "e.folded")],
                        "export stacks: the run has no NVTX range named 'nosuch'")):
        assert cli_main(["--db", db, "export", args[0], "--run", "cpu_hot", *args[1:]]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and said in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hot.folded", "hot.folded.gz"]


def test_a_line_break_in_a_function_name_cannot_add_a_stack_to_the_folded_file(tmp_path):
    """A function name holding a line break and digits ('evil\\nfunc 99'): the folded file still
    has one `STACK COUNT` line per stack, each count the samples', never a stack the name made up;
    the break reads as a space (cpu-stacks keeps the name as the capture has it)."""
    from tracekit.ingest import materialized

    export = tmp_path / "hot.sqlite"
    with materialized(NSYS_EXPORTS["cpu_hot"]) as src:
        export.write_bytes(src.read_bytes())
    with sqlite3.connect(export) as con:
        con.execute("UPDATE StringIds SET value = 'evil' || char(10) || 'func 99' || char(13) || char(8232) || 'x' "
                    "WHERE value = 'prepare_batch(float)'")
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(export, name="hot")
        asked = tk.query("cpu-stacks", run="hot", limit=0)
        assert asked["stack"].str.contains("evil\nfunc 99\r\u2028x", literal=True).any()
        out = tmp_path / "hot.folded"
        res = export_stacks(tk, out, run="hot")
    text = out.read_text()
    lines = text.split("\n")[:-1]
    assert len(lines) == asked.height == res.stacks and text.splitlines() == lines
    assert all(n.isdigit() for n in (ln.rsplit(" ", 1)[1] for ln in lines))
    assert sum(int(ln.rsplit(" ", 1)[1]) for ln in lines) == asked["samples"].sum()
    assert any(";evil func 99  x" in ln for ln in lines)


@pytest.mark.parametrize("params, message", [
    ({"thread": "nope"}, "no CPU sample of the run is of a thread 'nope'"),
    ({"range": "nope"}, "the run has no NVTX range named 'nope'"),
])
def test_a_thread_or_range_the_run_lacks_is_an_error(nsys_db, params, message):
    for q in QUERIES[::2]:
        with pytest.raises(QueryError, match=f"^{q}: {message}"):
            nsys_db.query(q, run="cpu_hot", **params)
    with pytest.raises(ParamError, match="^cpu-hotspots: order=x: choose self or total$"):
        nsys_db.query("cpu-hotspots", run="cpu_hot", order="x")
    assert nsys_db.query("cpu-hotspots", run="cpu_hot", order="TOTAL").equals(
        nsys_db.query("cpu-hotspots", run="cpu_hot", order="total"))
    with pytest.raises(QueryError, match="^cpu-stacks: no unwound stack asked has a function whose name contains 'zz'"):
        nsys_db.query("cpu-stacks", run="cpu_hot", function="zz")


def test_a_run_without_cpu_samples_is_an_error_not_an_empty_table(nsys_db, tmp_path, capsys):
    """Captured with --sample=none (memops): each query and export stacks say so and how to
    capture them; traced with none taken (the tables gone, the settings say sampled), empty
    answers; an export too old to say, no CPU sample events and a re-export tells."""
    for q in QUERIES:
        with pytest.raises(QueryError, match=rf"^{q}: run \d+ \(memops\) was captured without CPU sample tracing; "
                                             r"capture with nsys profile --sample=process-tree \(tracekit capture "
                                             r"--cpu-samples does\)$"):
            nsys_db.query(q, run="memops")
    out = tmp_path / "x.folded"
    with pytest.raises(QueryError, match=r"^export stacks: run \d+ \(memops\) was captured without CPU sample"):
        export_stacks(nsys_db, out, run="memops")
    assert not out.exists()
    src = NSYS_EXPORTS["cpu_hot"]
    quiet = _older_export(src, tmp_path / "quiet.sqlite", ["DROP TABLE COMPOSITE_EVENTS", "DROP TABLE SAMPLING_CALLCHAINS"])
    unsaid = _older_export(src, tmp_path / "unsaid.sqlite", ["DROP TABLE COMPOSITE_EVENTS",
                                                             "DROP TABLE SAMPLING_CALLCHAINS", "DROP TABLE META_DATA_CAPTURE"])
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(quiet, name="quiet")
        tk.ingest(unsaid, name="unsaid")
        for q in QUERIES:  # (cpu-threads: the threads the scheduler ran, none sampled)
            got = tk.query(q, run="quiet", limit=0)
            assert got.is_empty() if q != "cpu-threads" else got.height > 4 and got["samples"].sum() == 0
            with pytest.raises(QueryError, match=rf"^{q}: run \d+ \(unsaid\) has no CPU sample events, and its export "
                                                 r"\(nsys before 2023.3\) does not say"):
                tk.query(q, run="unsaid")
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "export", "stacks", "--run", "unsaid", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracekit: error: export stacks: run 2 (unsaid) has no CPU sample events") \
        and err.count("\n") == 1 and not out.exists()
    # (sampled, and no sample landed: nothing to draw, said rather than an empty file flamegraph.pl refuses)
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "export", "stacks", "--run", "quiet", "-o", str(out)]) == 2
    assert capsys.readouterr().err == ("tracekit: error: export stacks: run 1 holds no CPU sample with a call stack; "
                                       "nothing to write\n") and not out.exists()


def test_an_odd_sampling_table_leaves_the_samples_out_not_the_export(tmp_path):
    """A COMPOSITE_EVENTS without its sample ids (another nsys's schema) is left out with a
    warning; the rest of the export ingests."""
    src = NSYS_EXPORTS["cpu_hot"]
    odd = _older_export(src, tmp_path / "odd.sqlite", [
        "CREATE TABLE c2 AS SELECT start, cpu, threadState, globalTid FROM COMPOSITE_EVENTS",
        "DROP TABLE COMPOSITE_EVENTS", "ALTER TABLE c2 RENAME TO COMPOSITE_EVENTS"])
    with tracekit.open(tmp_path / "s.duckdb") as tk, pytest.warns(CaptureWarning,
                                                                   match="table COMPOSITE_EVENTS lacks column id"):
        tk.ingest(odd, name="odd")
        assert tk.sql("SELECT count(*) FROM cpu_samples").item() == 0
        assert tk.sql("SELECT count(*) FROM kernels").item() == 4800



def test_the_hstu_workload_captured_with_cpu_samples(tmp_path, capsys):
    """`tracekit capture --bs 8 --nc 1024 --cpu-samples` on the H200 (hstu_capture_cpu, a run
    folder): the Python thread that drives the model holds nearly every sample, the interpreter's
    eval loop under most of its stacks; against the same capture without sampling, the setup
    warning says so (the committed capture without it ran fewer requests) and there is no cpu scope."""
    db = tmp_path / "h.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(DATA / "hstu_capture_nsys"), str(DATA / "hstu_capture_cpu")]) == 0
    with tracekit.open(db) as tk:
        assert tk.sql("SELECT json_extract(params, '$.cpu_samples') FROM runs WHERE run_id = 2").item() == "true"
        threads = tk.query("cpu-threads", run="2", limit=0)
        assert threads["thread"][0] == "python3" and threads["cpu_pct"][0] > 80
        f = _rows(tk, "2")
        assert f["_PyEval_EvalFrameDefault"]["total_pct"] > 50
        # the request's stages: the embedding's host work is mostly NumPy's searchsorted (binsearch)
        stages = {r["path"]: r for r in tk.query("nvtx-cpu", run="2", limit=0).iter_rows(named=True)}
        embedding = stages["hstu.request/hstu.embedding"]
        assert embedding["top_function"].startswith("void binsearch<") and embedding["top_function_pct"] > 50
        assert stages["hstu.request"]["samples"] > embedding["samples"] > 20
        with pytest.warns(CaptureWarning, match=r"differ in setup: .*; nsys --sample none -> process-tree$"):
            df = tk.diff("1", "2")
        assert "cpu" not in set(df["scope"])
    capsys.readouterr()


def test_os_runtime_calls_keep_their_call_stacks(nsys_db):
    """The OS runtime calls nsys unwound (past its 80 us threshold) keep their stacks
    (osrt_frames, as OSRT_CALLCHAINS has them); osrt-stacks folds them: the hasher thread's
    usleep between its units of work, every such call, under hasher()."""
    with materialized(NSYS_EXPORTS["cpu_hot"]) as path, sqlite3.connect(path) as sq:
        frames = sq.execute("SELECT c.id, c.stackDepth, s.value FROM OSRT_CALLCHAINS c JOIN StringIds s "
                            "ON s.id = c.symbol ORDER BY 1, 2").fetchall()
        sleeps = sq.execute("SELECT count(*), sum(o.\"end\" - o.start) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
                            "WHERE s.value = 'usleep' AND o.callchainId > 0").fetchone()
    run = "(SELECT run_id FROM runs WHERE name = 'cpu_hot')"
    assert len(frames) > 5000 and nsys_db.sql(f"SELECT callchain_id, depth, function FROM osrt_frames "
                                              f"WHERE run_id = {run} ORDER BY 1, 2").rows() == frames
    (row,) = nsys_db.query("osrt-stacks", run="cpu_hot", name="USLEEP").iter_rows(named=True)
    assert (row["calls"], row["total_ns"]) == sleeps and row["calls"] > 600
    assert row["stack"].endswith(";hasher(void*);usleep") and row["threads"] == 1
    everything = nsys_db.query("osrt-stacks", run="cpu_hot", limit=0)
    assert everything["calls"].sum() == nsys_db.sql(f"SELECT count(callchain_id) FROM osrt_calls WHERE run_id = {run}").item()


@pytest.mark.parametrize("params", [{}, {"range": "step"}])
def test_self_and_total_times_read_in_one_unit(nsys_db, params):
    """A function's own time is part of its total (nsys's bottom-up view): the table shows
    self_ns and total_ns in one unit, not self in ms beside total in s (range=step: self
    1,436 ms, total 2.866 s before), whatever each column's median would pick alone."""
    from tracekit.registry import get_registry
    from tracekit.table import time_units

    rows = get_registry().fetch(nsys_db, "cpu-hotspots", run="cpu_hot", limit=6, **params)
    units = time_units(rows)
    assert units["self_ns"] == units["total_ns"], units
