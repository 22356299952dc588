"""The README's tour runs as written: every `tracekit` command of its first code blocks (the
bundled capture, the captures of tests/data that recorded what nsys records only when told,
the HSTU inference under ncu), in order, in the repository's folder as a reader types them,
exits 0; its store is $TRACEKIT_DB and its output files land in a temporary folder. The
occupancy the README quotes for the HSTU attention kernel is the command's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tracekit.cli import main

ROOT = Path(__file__).parent.parent
#: the tour's code blocks run here: those before the capture block (which needs a GPU)
BLOCKS = 3


def tour_commands() -> list[list[str]]:
    """Each command of the tour's first ``BLOCKS`` bash blocks, as arguments after `tracekit`
    (a line's `&&` parts apart, its comment left out)."""
    text = (ROOT / "README.md").read_text()
    tour = text[text.index("## A two-minute tour"):]
    tour = tour[:tour.index("\n## ", 1)]
    blocks = re.findall(r"```bash\n(.*?)```", tour, re.S)[:BLOCKS]
    return [shlex.split(part, comments=True)[1:] for block in blocks for line in block.splitlines()
            if line.startswith("tracekit ") for part in line.split(" && ")]


def test_the_tour_runs_as_written(tmp_path, monkeypatch, capsys):
    commands = tour_commands()
    assert len(commands) > 60 and commands[0][:2] == ["ingest", "examples/hstu_bs8_nc1024_nsys"]
    assert any(c[:2] == ["ingest", "tests/data/hstu_capture_ncu"] for c in commands)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRACEKIT_DB", str(tmp_path / "tour.duckdb"))
    monkeypatch.setenv("COLUMNS", "200")
    said = {}
    for args in commands:
        for i, a in enumerate(args[:-1]):  # (files written in the temporary folder, not the checkout)
            if a in ("-o", "--output"):
                args[i + 1] = str(tmp_path / Path(args[i + 1]).name)
        rc = main(args)
        out, err = capsys.readouterr()
        assert rc == 0 and "tracekit: error" not in err, (args, err[-1000:])
        said[" ".join(args[:2])] = out
    # (the occupancy of the HSTU attention kernel, as the README's comment and text say)
    assert "registers 255 -> 128; shared memory 163,840 -> 115,712 B" in said["query occupancy"]
    # (compute-workload of the --set full report: the cuBLAS GEMM's busiest pipe, the tensor pipe at 95 %)
    gemm = next(line for line in said["query compute-workload"].splitlines() if "nvjet" in line)
    assert re.search(r"\btensor_op_hmma +95\.0\b", gemm), gemm
    assert not list(ROOT.glob("*.duckdb")), "the tour wrote a store in the checkout"
