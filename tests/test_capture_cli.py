"""The capture CLI sub-app (what tracekit/cli.py registers): options reach the library."""

import json
import os
import pty
import re
import subprocess
import sys

import pytest
import typer
from conftest import DATA
from tracekit.capture import cli
from typer.testing import CliRunner

from tracekit.errors import CaptureError, TracekitError

pytestmark = pytest.mark.usefixtures("reference_kernels")

runner = CliRunner()


def test_capture_command_small_preset(tmp_path):
    out = tmp_path / "runs"
    res = runner.invoke(cli.app, ["capture", "--bs", "1", "--nc", "4", "--tool", "none", "--preset", "small",
                                  "--iters", "1", "--warmup-ms", "0", "--out", str(out), "--no-ingest",
                                  "--name", "cli-run"])
    assert res.exit_code == 0, res.output
    # no line per request (capture.log has them) and one summary: the median once
    assert "KV Caches:" not in res.output and "[warmup" not in res.output
    assert "KV Caches: 1, Candidate Embeddings: 4, Total time(ms):" in (out / "cli-run" / "capture.log").read_text()
    assert f"run folder: {out / 'cli-run'}" in res.output
    assert res.output.count("latency over 1 timed requests") == 1 and res.output.count("median") == 1
    meta = json.loads((out / "cli-run" / "meta.json").read_text())
    assert meta["params"]["preset"] == "small" and meta["params"]["iters"] == 1
    assert meta["workload"]["num_layers"] == 3 and meta["workload"]["d_model"] == 512


@pytest.mark.parametrize("args, match", [
    (["capture", "--bs", "0", "--nc", "8", "--tool", "none"], "--bs 0"),
    (["capture", "--bs", "8", "--nc", "-1", "--tool", "none"], "--nc -1"),
    (["capture", "--bs", "8", "--nc", "8", "--tool", "none", "--preset", "xl"], "--preset 'xl'"),
    (["sweep", "--bs", "1,2"], "sweep needs --bs and --nc lists or --config"),
    (["sweep", "--config", "nosuch"], "--config nosuch: no such file; give a sweep config (a YAML file) or a preset (quick"),
    (["sweep", "--config", str(DATA / "ncu_full" / "report.ncu-rep.xz")], "not a YAML file (not UTF-8 text)"),
    (["capture", "--bs", "1", "--nc", "4", "--tool", "none", "--name", ""], "run name ''"),
    (["capture", "--bs", "1000", "--nc", "3000000", "--tool", "none", "--preset", "small"], "--bs 1000 --nc 3000000"),
    (["sweep", "--bs", "1,100000", "--nc", "100000"], "--bs 100000 --nc 100000: a request of"),
])
def test_bad_values_raise_library_errors(tmp_path, args, match):
    res = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "runs")])
    assert isinstance(res.exception, CaptureError), res.output
    assert match in str(res.exception)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args, message", [
    (["capture", "--bs", "1", "--nc", "4", "--tool", "none", "--warmup-ms", "inf"],
     "Invalid value for '--warmup-ms': 'inf' is not a finite number."),
    (["sweep", "--bs", "1", "--nc", "4", "--warmup-ms", "inf"],
     "Invalid value for '--warmup-ms': 'inf' is not a finite number."),
    (["capture", "--bs", "100000000000000000000", "--nc", "4", "--tool", "none"],
     "Invalid value for '--bs': '100000000000000000000' is out of range (a 64-bit integer"),
])
def test_values_no_option_takes_are_refused_by_the_cli(tmp_path, capsys, args, message):
    """A number that is not finite, or an integer past 64 bits, is refused where every
    command's options are converted (tracekit.cli_params), before the library is called."""
    from tracekit.cli import main

    assert main([*args, "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tracekit: error: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "runs").exists()


def test_export_sweep_command_and_register(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_GET_DB", [cli._GET_DB[0]])  # register() sets it; restore after
    db = tmp_path / "x.duckdb"
    import tracekit

    tk = tracekit.open(db)
    tk.ingest(DATA / "hstu_sweep" / "runs" / sorted(p.name for p in (DATA / "hstu_sweep" / "runs").iterdir())[0])
    tk.close()
    res = runner.invoke(cli.app, ["export", "sweep", "-o", str(tmp_path / "s.xlsx"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "s.xlsx").exists() and "wrote" in res.output

    main = typer.Typer()
    export_group = typer.Typer()
    main.add_typer(export_group, name="export")
    cli.register(main, get_db=lambda: db, export_group=export_group)
    res = runner.invoke(main, ["export", "sweep", "-o", str(tmp_path / "t.csv")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "t.csv").exists() and (tmp_path / "t-summary.csv").exists()
    assert {c.name for c in main.registered_commands} == {"capture", "sweep"}


def test_capture_on_a_terminal_shows_one_progress_bar(tmp_path):
    """stderr a terminal: a progress bar over the timed requests (rich, on stderr, gone
    when done), no line per request; stdout the one summary."""
    out = tmp_path / "runs"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracekit.cli", "capture", "--bs", "1", "--nc", "4", "--tool", "none",
         "--preset", "small", "--iters", "5", "--warmup-ms", "0", "--out", str(out), "--no-ingest",
         "--name", "tty-run"],
        stdout=subprocess.PIPE, stderr=slave, text=True, env={**os.environ, "COLUMNS": "100"})
    os.close(slave)
    terminal = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        terminal += chunk
    stdout = proc.stdout.read()
    assert proc.wait() == 0, terminal.decode(errors="replace")
    os.close(master)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.decode(errors="replace"))
    assert "timed requests" in shown and "5/5" in shown
    assert "KV Caches:" not in shown + stdout
    assert stdout.count("latency over 5 timed requests") == 1 and stdout.count("median") == 1


def test_sweep_ends_with_a_table_of_its_points(tmp_path):
    """The sweep's own points (not the store's other runs), ms with three decimals,
    through the terminal-table renderer (no Polars repr)."""
    db = tmp_path / "s.duckdb"
    import tracekit

    with tracekit.open(db) as tk:  # another sweep's point in the store: not this sweep's
        tk.ingest(DATA / "hstu_sweep" / "runs" / "20261122T012018.159Z-bs1-nc128-none")
    res = runner.invoke(cli.app, ["sweep", "--bs", "1", "--nc", "4,8", "--tool", "none", "--preset", "small",
                                  "--iters", "2", "--warmup-ms", "0", "--out", str(tmp_path / "runs"),
                                  "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "shape:" not in res.output and "│" not in res.output
    lines = res.output.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("preset"))
    assert lines[head].split() == ["preset", "tool", "bs", "nc", "requests", "median_ms", "p95_ms", "p99_ms",
                                   "max_ms"]
    body = lines[head + 2:head + 4]
    assert [ln.split()[:5] for ln in body] == [["small", "none", "1", "4", "2"], ["small", "none", "1", "8", "2"]]
    assert all(re.fullmatch(r"[\d,]+\.\d{3}", cell) for ln in body for cell in ln.split()[5:])
    assert lines[head + 4] == "2 rows"


@pytest.mark.parametrize("store, match", [
    ("text", "not a valid DuckDB database file"),
    ("sqlite", "an SQLite database, not a tracekit store"),
    ("no-folder", "folder"),
])
@pytest.mark.parametrize("command", ["capture", "sweep"])
def test_a_store_that_cannot_take_the_run_is_refused_before_the_workload_runs(tmp_path, store, match, command):
    """--db is checked before any point runs, not found unusable by the ingest after it."""
    db = {"text": tmp_path / "notes.txt", "sqlite": tmp_path / "export.sqlite",
          "no-folder": tmp_path / "missing" / "x.duckdb"}[store]
    if store == "text":
        db.write_text("not a store\n")
    elif store == "sqlite":
        import sqlite3

        sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    before = db.read_bytes() if db.exists() else None
    args = ["capture", "--bs", "1"] if command == "capture" else ["sweep", "--bs", "1,2"]
    res = runner.invoke(cli.app, [*args, "--nc", "4", "--tool", "none", "--preset", "small", "--iters", "1",
                                  "--warmup-ms", "0", "--out", str(tmp_path / "runs"), "--db", str(db)])
    assert isinstance(res.exception, TracekitError), res.output
    assert match in str(res.exception) and str(db) in str(res.exception)
    assert not (tmp_path / "runs").exists()  # no run folder, no manifest: nothing ran
    assert (db.read_bytes() if db.exists() else None) == before


@pytest.mark.parametrize("command", ["capture", "sweep"])
def test_a_tiles_file_that_is_not_one_is_refused_before_the_workload_runs(tmp_path, monkeypatch, command):
    """$TRACEKIT_TILES naming a file that is not a tiles file (here cut short): one error naming
    it before any point runs, not a workload that fails at its first kernel call (or, as it was,
    times the built-in tiles in a capture recorded as run with that file)."""
    tiles = tmp_path / "tiles.json"
    tiles.write_text('{"tiles": {')
    monkeypatch.setenv("TRACEKIT_TILES", str(tiles))
    args = ["capture", "--bs", "1"] if command == "capture" else ["sweep", "--bs", "1,2"]
    res = runner.invoke(cli.app, [*args, "--nc", "4", "--tool", "none", "--preset", "small", "--iters", "1",
                                  "--warmup-ms", "0", "--out", str(tmp_path / "runs"), "--no-ingest"])
    assert isinstance(res.exception, TracekitError), res.output
    assert str(res.exception).startswith(f"{tiles}: the tiles file is not JSON (")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("config, match", [
    ("workload: {bogus: 1}", "unknown workload setting(s) bogus"),
    ("workload: [1]", "'workload' must be a mapping of workload settings"),
    ("workload: null", "'workload' must be a mapping of workload settings"),
    ("workload: {preset: large}", "unknown workload setting(s) preset"),
    ("workload: {zipf_exponent: abc}", "workload setting zipf_exponent='abc' must be a finite number"),
    ("workload: {zipf_exponent: .nan}", "workload setting zipf_exponent=nan must be a finite number"),
    ("workload: {seed: -1}", "workload setting seed=-1 must be an integer >= 0"),
    ("workload: {num_actions: 0}", "workload setting num_actions=0 must be a positive integer"),
    ("workload: {num_time_buckets: abc}", "workload setting num_time_buckets='abc' must be a positive integer"),
    ("workload: {page_size: 7}", "workload setting page_size=7 must be 32"),
    ("workload: {gpu_dtype: int8}", "workload setting gpu_dtype='int8' must be one of bfloat16, float16, float32"),
    ("1: 2", "unknown key(s) 1;"),
    ("preset: [small]", "preset ['small']: unknown preset; choose one of small, medium, large"),
    ("preset: {small: 1}", "preset {'small': 1}: unknown preset"),
    ("preset: huge", "preset 'huge': unknown preset"),
    ("tool: gdb", "tool 'gdb': unknown profiler; choose one of nsys, ncu, none"),
    ("iters: 0", "iters 0: timed requests must be a positive integer (>= 1)"),
    ("iters: 2147483648", "iters 2147483648: timed requests must be at most 2,147,483,647"),
    ("warmup_ms: -1", "warmup_ms -1: must be a finite number of milliseconds >= 0"),
    ("warmup_ms: .inf", "warmup_ms inf: must be a finite number"),
    ("warmup_ms: yes", "warmup_ms True: must be a number of milliseconds"),
    ("workload: {max_history_items: 2000000000}", "grid.bs 2 grid.nc 4: a request of 8,000,000,008 tokens"),
    ("null: x", "unknown key(s) None;"),
    ("workload: {1: 2, num_layers: 2}", "unknown workload setting(s) 1;"),
    ("device: gpu", "device 'gpu'"),
    ("flush_l2: maybe", "flush_l2 'maybe'"),
    ("ncu_launch_skip: -1", "ncu_launch_skip -1"),
    ("ncu_launch_count: two", "ncu_launch_count 'two'"),
])
def test_a_sweep_configs_bad_setting_is_refused_before_the_first_point(tmp_path, config, match):
    """Not one failed point per grid point (each a worker that fails on the setting): one
    error naming the file and the key (not the flag that would override it), exit 2, no
    folder, no manifest."""
    path = tmp_path / "sweep.yaml"
    path.write_text(f"grid: {{bs: [1, 2], nc: [4]}}\n{config}\n")
    res = runner.invoke(cli.app, ["sweep", "--config", str(path), "--out", str(tmp_path / "runs"), "--no-ingest"])
    assert isinstance(res.exception, CaptureError), res.output
    assert str(res.exception).startswith(f"{path}: ") and match in str(res.exception)
    assert "--" not in str(res.exception).replace(str(path), "")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("field, flag, what", [("bs", "--bs", "batch size"), ("nc", "--nc", "candidates per user"),
                                              ("iters", "--iters", "timed requests")])
def test_a_count_past_32_bits_is_refused_before_anything_runs(field, flag, what):
    """A point's bs and nc and a request's index are 32-bit in the store: a config's (or the
    library's) larger count is one line, not a sweep that runs until killed."""
    from tracekit.capture.config import validate_params

    given = {"bs": 1, "nc": 4, "iters": 1, field: 2**31}
    with pytest.raises(CaptureError, match=rf"^{flag} 2147483648: {what} must be at most 2,147,483,647$"):
        validate_params(given["bs"], given["nc"], "none", "small", 0, given["iters"])
    assert validate_params(1, 4, "none", "small", 0, 1) == (1, 4, "none", "small", 0.0, 1)


def test_a_sweep_grid_of_one_value_and_out_that_is_a_file(tmp_path):
    from tracekit.capture.sweep import load_config

    assert load_config({"grid": {"bs": 4, "nc": [8, 16]}})["grid"] == {"bs": [4], "nc": [8, 16]}
    with pytest.raises(CaptureError, match=r"grid.nc \[8, 8\]: 8 twice; give each value once"):
        load_config({"grid": {"bs": 4, "nc": [8, 8]}})
    with pytest.raises(CaptureError, match="grid.bs True"):
        load_config({"grid": {"bs": True, "nc": [8]}})
    (tmp_path / "runs").write_text("")
    res = runner.invoke(cli.app, ["sweep", "--bs", "1", "--nc", "4", "--out", str(tmp_path / "runs"), "--no-ingest"])
    assert isinstance(res.exception, CaptureError) and "--out" in str(res.exception) and "is a file" in str(res.exception)


def test_capture_into_an_empty_folder_makes_it_a_dataset(tmp_path):
    """The check before the workload takes an empty --db folder as an ingest does: a new dataset."""
    import tracekit

    ds = tmp_path / "ds"
    ds.mkdir()
    res = runner.invoke(cli.app, ["capture", "--bs", "1", "--nc", "4", "--tool", "none", "--preset", "small",
                                  "--iters", "1", "--warmup-ms", "0", "--out", str(tmp_path / "runs"), "--db", str(ds)])
    assert res.exit_code == 0, res.output
    with tracekit.open(ds) as tk:
        assert tk.runs()["kind"].to_list() == ["timing"]
