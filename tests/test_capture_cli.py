"""The capture CLI sub-app (what tracekit/cli.py registers): options reach the library."""

import json

import pytest
import typer
from conftest import DATA
from tracekit.capture import cli
from typer.testing import CliRunner

from tracekit.errors import CaptureError

runner = CliRunner()


def test_capture_command_small_preset(tmp_path):
    out = tmp_path / "runs"
    res = runner.invoke(cli.app, ["capture", "--bs", "1", "--nc", "4", "--tool", "none", "--preset", "small",
                                  "--iters", "1", "--warmup-ms", "0", "--out", str(out), "--no-ingest",
                                  "--name", "cli-run"])
    assert res.exit_code == 0, res.output
    assert "KV Caches: 1, Candidate Embeddings: 4, Total time(ms):" in res.output
    assert f"run folder: {out / 'cli-run'}" in res.output
    assert "latency over 1 timed requests" in res.output
    meta = json.loads((out / "cli-run" / "meta.json").read_text())
    assert meta["params"]["preset"] == "small" and meta["params"]["iters"] == 1
    assert meta["workload"]["num_layers"] == 3 and meta["workload"]["d_model"] == 512


@pytest.mark.parametrize("args, match", [
    (["capture", "--bs", "0", "--nc", "8", "--tool", "none"], "--bs 0"),
    (["capture", "--bs", "8", "--nc", "-1", "--tool", "none"], "--nc -1"),
    (["capture", "--bs", "8", "--nc", "8", "--tool", "none", "--preset", "xl"], "--preset 'xl'"),
    (["sweep", "--bs", "1,2"], "sweep needs --bs and --nc lists or --config"),
    (["sweep", "--config", "nosuch"], "neither a sweep preset"),
])
def test_bad_values_raise_library_errors(tmp_path, args, match):
    res = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "runs")])
    assert isinstance(res.exception, CaptureError), res.output
    assert match in str(res.exception)
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
