"""The name a run gets when none is asked for: its file's stem, unless a run of the store
or another file of the same command has it; then qualified by the file's folders, as few as
tell it apart, and only then numbered. The same serially, in threads, into a dataset and for the files of a diff."""

from __future__ import annotations

import json
import lzma
import shutil

import pytest
from conftest import DATA

import tracekit
from tracekit.cli import main
from tracekit.names import RunNames

#: two different exports of one file name (export.sqlite.xz)
A = DATA / "nsys_diff_base_a" / "export.sqlite.xz"
B = DATA / "nsys_diff_base_b" / "export.sqlite.xz"
#: a third export of that name, and one of a name of its own
C = DATA / "nsys_diff_regressed" / "export.sqlite.xz"
NCU = DATA / "ncu_sections" / "report.ncu-rep.xz"


def _names(db) -> list[str]:
    with tracekit.open(db, read_only=True) as tk:
        return tk.runs().get_column("name").to_list()


def test_run_names_rule():
    never = lambda name: False  # noqa: E731 - a store with no run
    names = RunNames([("export", ("a", "x")), ("export", ("b", "x")), ("report", ("a", "x"))])
    assert names.choose("export", ("a", "x"), never) == "a/export"  # shared in the command: every one qualified
    assert names.choose("export", ("b", "x"), never) == "b/export"
    assert names.choose("report", ("a", "x"), never) == "report"
    assert names.choose("export", ("b", "x"), never) == "x/b/export"  # (a third input there: the next folder)
    # the ranks of two jobs (job/rankN/export): by as many folders as tell them apart
    ranks = [("export", (f"rank{r}", job, "jobs")) for job in ("base", "again") for r in (0, 1)]
    names = RunNames(ranks)
    assert [names.choose(own, folders, never) for own, folders in ranks] == [
        "base/rank0/export", "base/rank1/export", "again/rank0/export", "again/rank1/export"]
    # export.sqlite and export.sqlite.xz of one folder: its name, then numbered
    names = RunNames([("export", ("b", "x")), ("export", ("b", "x"))])
    assert [names.choose("export", ("b", "x"), never) for _ in range(2)] == ["b/export", "b/export-2"]
    held = {"hstu", "runs/hstu", "lab/runs/hstu"}.__contains__
    assert RunNames().choose("hstu", ("runs",), held) == "runs/hstu-2"  # the store has both
    assert RunNames().choose("hstu", ("runs", "lab", "home"), held) == "home/lab/runs/hstu"  # (by more folders)
    assert RunNames().choose("hstu", (), held) == "hstu-2"  # a file in the root folder
    assert RunNames().choose("x", ("a\nb",), never) == "x"
    assert RunNames().choose("hstu", ("a\nb",), held) == "a\\nb/hstu"  # (a folder's control characters escaped)


def test_the_dots_of_a_file_name_stay_in_its_runs_name(tmp_path, capsys):
    """A run is named after its file without the compression and the kind: only the last
    suffix goes, so names with dots (sweep points, versions) stay apart; a stem --run would
    read as an id keeps its whole name."""
    files = {"bs8.nc1024.sqlite.xz": A, "bs8.nc2048.sqlite.xz": B, "model_v1.2.ncu-rep.xz": NCU, "3.sqlite.xz": C}
    for name, src in files.items():
        shutil.copyfile(src, tmp_path / name)
    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "ingest", *(str(tmp_path / n) for n in files)]) == 0
    assert _names(db) == ["bs8.nc1024", "bs8.nc2048", "model_v1.2", "3.sqlite"]
    capsys.readouterr()
    assert main(["--db", str(db), "diff", "bs8.nc1024", "bs8.nc2048", "-f", "csv"]) == 0


@pytest.mark.parametrize("workers", [None, 2], ids=["serial", "workers"])
def test_files_of_one_name_in_one_command(tmp_path, capsys, workers):
    db = tmp_path / "s.duckdb"
    extra = ["--workers", str(workers)] if workers else []
    assert main(["--db", str(db), "ingest", str(A), str(NCU), str(B), *extra]) == 0
    out = capsys.readouterr().out
    assert "run 1 (nsys_diff_base_a/export, nsys)" in out and "run 3 (nsys_diff_base_b/export, nsys)" in out
    assert _names(db) == ["nsys_diff_base_a/export", "report", "nsys_diff_base_b/export"]
    # each is a run of its own name: --run and diff take them
    assert main(["--db", str(db), "query", "top-kernels", "--run", "nsys_diff_base_b/export", "-f", "csv"]) == 0
    assert main(["--db", str(db), "diff", "nsys_diff_base_a/export", "nsys_diff_base_b/export", "-f", "csv"]) == 0
    capsys.readouterr()
    # the same content again keeps its run and name; the other file of that name in the
    # command is named by its folder (whether or not the store holds the first already)
    assert main(["--db", str(db), "ingest", str(C), str(B), *extra]) == 0
    assert "already ingested as run 3 (nsys_diff_base_b/export)" in capsys.readouterr().out
    assert _names(db) == ["nsys_diff_base_a/export", "report", "nsys_diff_base_b/export",
                          "nsys_diff_regressed/export"]


@pytest.mark.parametrize("workers", [None, 2], ids=["serial", "workers"])
def test_a_file_given_twice_keeps_its_own_name(tmp_path, capsys, monkeypatch, workers):
    """One file named twice in one command (a glob and its file, ./x and x) is one input,
    not two files of one name: its run is named after it alone, as ingested once."""
    monkeypatch.chdir(NCU.parent)
    db = tmp_path / "s.duckdb"
    extra = ["--workers", str(workers)] if workers else []
    assert main(["--db", str(db), "ingest", NCU.name, f"../{NCU.parent.name}/{NCU.name}", str(NCU), *extra]) == 0
    out = capsys.readouterr().out
    assert "run 1 (report, ncu)" in out and out.count("already ingested as run 1 (report)") == 2, out
    assert _names(db) == ["report"]


def test_threads_name_as_a_serial_ingest(tmp_path):
    files = [A, NCU, B, C, A]
    serial = tmp_path / "serial.duckdb"
    assert main(["--db", str(serial), "ingest", *map(str, files)]) == 0
    threads = tmp_path / "threads.duckdb"
    assert main(["--db", str(threads), "ingest", *map(str, files), "--workers", "3"]) == 0
    assert _names(threads) == _names(serial) == ["nsys_diff_base_a/export", "report", "nsys_diff_base_b/export",
                                                 "nsys_diff_regressed/export"]


def test_a_name_the_store_has_is_qualified_then_numbered(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "ingest", str(A)]) == 0
    assert main(["--db", str(db), "ingest", str(B)]) == 0  # the store has `export`: B's folder tells it apart
    other = tmp_path / "nsys_diff_base_b" / "export.sqlite.xz"  # another export in a folder of that name
    other.parent.mkdir()
    shutil.copyfile(DATA / "nsys_cpu_only" / "export.sqlite.xz", other)
    assert main(["--db", str(db), "ingest", str(other)]) == 0
    third = f"{tmp_path.name}/nsys_diff_base_b/export"  # (by the next folder out)
    assert _names(db) == ["export", "nsys_diff_base_b/export", third]
    # the same content again keeps its name
    assert main(["--db", str(db), "ingest", str(B), str(A)]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        f"{B}: already ingested as run 2 (nsys_diff_base_b/export)", f"{A}: already ingested as run 1 (export)"]
    assert _names(db) == ["export", "nsys_diff_base_b/export", third]
    # another export there (export.sqlite, uncompressed): by the next folder out again
    fourth = other.with_name("export.sqlite")
    fourth.write_bytes(lzma.open(DATA / "nsys_odd_nvtx" / "export.sqlite.xz").read())
    assert main(["--db", str(db), "ingest", str(fourth)]) == 0
    assert _names(db)[-1] == f"{tmp_path.parent.name}/{third}"


@pytest.mark.parametrize("dataset", [False, True], ids=["store", "dataset"])
def test_a_name_asked_for_is_no_other_runs(tmp_path, capsys, dataset):
    """`runs rename` and `ingest --name` refuse a name another run has (`--run NAME`
    would pick the latest of the two, not necessarily the run just named): one line,
    exit 2, the store as it was. A run keeps its own name, and one name is one run."""
    db = tmp_path / "ds" if dataset else tmp_path / "s.duckdb"
    if dataset:
        db.mkdir()
    assert main(["--db", str(db), "ingest", str(A), str(B)]) == 0
    capsys.readouterr()
    before = _names(db)
    for args in (["runs", "rename", "1", "nsys_diff_base_b/export"],  # run 2's
                 ["ingest", str(C), "--name", "nsys_diff_base_b/export"],  # a new run
                 ["ingest", str(A), "--name", "nsys_diff_base_b/export"],  # run 1 again: a rename
                 ["ingest", str(C), str(NCU), "--name", "x"]):  # two runs of one name
        assert main(["--db", str(db), *args]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "Traceback" not in err, args
        assert ("is taken by run 2; choose another name" in err if args[-1] != "x"
                else "--name 'x' names one run: give it one file" in err), err
        assert _names(db) == before
    with tracekit.open(db) as tk, pytest.raises(tracekit.QueryError, match="is taken by run 1"):
        tk.rename_run(2, "nsys_diff_base_a/export")
    assert main(["--db", str(db), "runs", "rename", "1", "nsys_diff_base_a/export"]) == 0  # its own name
    assert main(["--db", str(db), "ingest", str(C), "--name", "export"]) == 0  # a name no run has
    assert _names(db) == [*before, "export"]


def test_run_folders_of_one_name(tmp_path):
    """A run folder is named after itself (its meta.json's name, else the folder's):
    qualified by the folder it is in."""
    for side, export in (("a", A), ("b", B)):
        folder = tmp_path / side / "run"
        folder.mkdir(parents=True)
        (folder / "meta.json").write_text("{}")
        shutil.copyfile(export, folder / "nsys.sqlite.xz")
    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "ingest", str(tmp_path / "a" / "run"), str(tmp_path / "b" / "run")]) == 0
    assert _names(db) == ["a/run", "b/run"]


def test_a_diff_of_two_files_of_one_name(tmp_path, capsys):
    db = tmp_path / "d.duckdb"
    assert main(["--db", str(db), "diff", str(A), str(B), "-f", "csv"]) == 0
    capsys.readouterr()
    assert _names(db) == ["nsys_diff_base_a/export", "nsys_diff_base_b/export"]
    # a file of a name the store has
    assert main(["--db", str(db), "ingest", str(NCU)]) == 0
    assert main(["--db", str(db), "diff", "nsys_diff_base_a/export", str(C), "-f", "csv"]) == 0
    assert _names(db) == ["nsys_diff_base_a/export", "nsys_diff_base_b/export", "report", "export"]


@pytest.mark.parametrize("workers", [None, 2], ids=["serial", "workers"])
def test_into_a_dataset(tmp_path, capsys, workers):
    root = tmp_path / "ds"
    root.mkdir()
    extra = ["--workers", str(workers)] if workers else []
    assert main(["--db", str(root), "ingest", str(A), str(B), *extra]) == 0
    assert _names(root) == ["nsys_diff_base_a/export", "nsys_diff_base_b/export"]
    assert main(["--db", str(root), "ingest", str(C), *extra]) == 0  # no run is named export yet
    assert main(["--db", str(root), "ingest", str(C.with_name("nothing")), str(A), *extra]) == 2
    capsys.readouterr()
    assert _names(root) == ["nsys_diff_base_a/export", "nsys_diff_base_b/export", "export"]


def test_a_capture_summary_reads_its_own_run_whatever_its_name(tmp_path):
    """`tracekit capture` prints a summary of the run it ingested, found by its folder: a
    capture named as a run the store holds (its folder's name) is that folder's run,
    named by the folder it is in, not the older run of that name."""
    from tracekit.capture import run as capture_run

    for side, export in (("a", DATA / "hstu_capture_nsys" / "nsys.sqlite.xz"), ("b", A)):
        folder = tmp_path / side / "capture-x"
        folder.mkdir(parents=True)
        shutil.copyfile(DATA / "hstu_capture_nsys" / "meta.json", folder / "meta.json")
        shutil.copyfile(export, folder / "nsys.sqlite.xz")
    db = tmp_path / "s.duckdb"
    name = json.loads((DATA / "hstu_capture_nsys" / "meta.json").read_text())["name"]
    for side in ("a", "b"):
        assert main(["--db", str(db), "ingest", str(tmp_path / side / "capture-x")]) == 0
    assert _names(db) == [name, f"b/{name}"]
    with tracekit.open(db, read_only=True) as tk:
        top = tk.query("top-kernels", run=2, limit=1)["name"][0]
        assert top != tk.query("top-kernels", run=1, limit=1)["name"][0]
    text = capture_run.summary(tmp_path / "b" / "capture-x", db)
    assert top[:90] in text.split("top kernels")[1].splitlines()[1]
