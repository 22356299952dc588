"""Run folders (what `tracekit capture` writes) ingest as one run with their parameters."""

from __future__ import annotations

import json
import lzma
import re
import shutil
from pathlib import Path

import pytest
from conftest import DATA

import tracekit
from tracekit.errors import InputError, QueryError


def ncu_run_folder(run, fixture: str):
    """A capture's ncu run folder at ``run``: the report and its raw and details pages of a fixture."""
    run.mkdir()
    src = DATA / fixture
    shutil.copy(src / "report.ncu-rep.xz", run / "ncu.ncu-rep.xz")
    shutil.copy(src / "raw.csv.xz", run / "ncu_raw.csv.xz")
    shutil.copy(src / "details.csv.xz", run / "ncu_details.csv.xz")
    return run


def test_run_folder_with_ncu_exports_and_requests(tmp_path, monkeypatch, reports_read_each_time):
    run = ncu_run_folder(tmp_path / "20261122T000000Z-bs8-nc1024-ncu", "ncu_sections")
    (run / "requests.csv").write_text(
        "request_idx,phase,bs,nc,kv_caches,candidate_embeddings,latency_ms,peak_mem_allocated_mb,peak_mem_reserved_mb\n"
        "0,warmup,8,1024,8,1024,20.5,100.0,200.0\n1,timed,8,1024,8,1024,12.25,100.0,200.0\n")
    (run / "meta.json").write_text(json.dumps({"name": run.name, "tool": "ncu", "params": {"bs": 8, "nc": 1024}}))
    (run / "capture.log").write_text("not ingested\n")
    from tracekit.ingest import ncu_rep

    real_start_report = ncu_rep.start_report
    reads = []

    def source_only(path, **kw):  # the raw page and the details page are there: the report is read
        reads.append(kw)
        return real_start_report(path, **kw)  # for its instruction-level data alone

    monkeypatch.setattr(ncu_rep, "start_report", source_only)
    tk = tracekit.open(tmp_path / "s.duckdb")
    res = tk.ingest(run)
    assert res.kind == "ncu,timing" and res.rows["requests"] == 2 and res.rows["ncu_kernels"] == 4
    row = tk.sql("SELECT name, params, meta FROM runs").to_dicts()[0]
    assert row["name"] == run.name and json.loads(row["params"]) == {"bs": 8, "nc": 1024}
    # the raw CSV is read first (every metric, fastest); the rule results come from the
    # details page beside it; every export is a source of the run
    assert json.loads(row["meta"])["ncu_export"] == "csv-raw"
    assert tk.query("ncu-rules", limit=0).height == res.rows["ncu_rules"] == 10
    sources = tk.sql("SELECT path FROM run_sources ORDER BY path")["path"].to_list()
    assert [s.rsplit("/", 1)[1] for s in sources] == ["ncu.ncu-rep.xz", "ncu_details.csv.xz", "ncu_raw.csv.xz",
                                                      "requests.csv"]
    assert reads == [{"source_only": True}], "the .ncu-rep was read whole although its CSV exports are there"
    assert tk.ingest(run).skipped  # same folder content: no-op
    assert tk.ingest(run / "ncu_details.csv.xz").run_id == res.run_id  # an export of the folder is its run
    assert tk.query("ncu-kernels", limit=0).height == 4
    tk.close()
    # without the details page, the rule results come from the report
    reads.clear()
    (run / "ncu_details.csv.xz").unlink()
    tk = tracekit.open(tmp_path / "s2.duckdb")
    tk.ingest(run)
    assert reads == [{"source_only": False}]
    assert json.loads(tk.sql("SELECT meta FROM runs")["meta"][0])["ncu_export"] == "csv-raw"
    assert tk.query("ncu-rules", limit=0).height == 10
    tk.close()
    # with the raw page alone there are none
    (run / "ncu.ncu-rep.xz").unlink()
    tk = tracekit.open(tmp_path / "s3.duckdb")
    tk.ingest(run)
    with pytest.raises(QueryError, match="raw CSV page has none"):
        tk.query("ncu-rules")
    tk.close()
    # a CSV page that cannot be read: one line naming it, the report's child stopped and its files gone
    (run / "ncu.ncu-rep.xz").write_bytes((DATA / "ncu_sections" / "report.ncu-rep.xz").read_bytes())
    raw = lzma.decompress((DATA / "ncu_sections" / "raw.csv.xz").read_bytes())
    (run / "ncu_raw.csv.xz").write_bytes(lzma.compress(raw[:len(raw) // 2] + b'"cut'))
    started = []
    monkeypatch.setattr(ncu_rep, "start_report", lambda path, **kw: started.append(real_start_report(path, **kw))
                        or started[-1])
    tk = tracekit.open(tmp_path / "s5.duckdb")
    with pytest.raises(InputError, match="ncu_raw.csv.xz: malformed CSV"):
        tk.ingest(run)
    tk.close()
    assert len(started) == 1 and started[0]._proc.returncode is not None
    assert not Path(started[0]._tmp.name).exists()
    (run / "ncu.ncu-rep.xz").unlink()
    (run / "ncu_raw.csv.xz").write_bytes((DATA / "ncu_sections" / "raw.csv.xz").read_bytes())
    # exports of two reports in one folder are refused, the store left as it was
    shutil.copy(DATA / "hstu_capture_ncu" / "ncu_details.csv.xz", run / "ncu_details.csv.xz")
    tk = tracekit.open(tmp_path / "s4.duckdb")
    with pytest.raises(InputError, match="its launches are not those of ncu_raw.csv in the same run folder"):
        tk.ingest(run)
    assert tk.sql("SELECT count(*) AS n FROM runs")["n"][0] == 0
    tk.close()


def test_run_folder_takes_source_from_the_report(tmp_path):
    """A run folder reads the raw page first; the instruction-level data comes from its report."""
    run = ncu_run_folder(tmp_path / "run", "ncu_source")
    (run / "meta.json").write_text('{"name": "run", "tool": "ncu"}')
    tk = tracekit.open(tmp_path / "s.duckdb")
    res = tk.ingest(run)
    direct = tracekit.open(tmp_path / "d.duckdb")
    direct.ingest(DATA / "ncu_source" / "report.ncu-rep.xz")
    assert res.rows["ncu_source"] == direct.sql("SELECT count(*) AS n FROM ncu_source")["n"][0] > 0
    a = tk.query("ncu-source", by="instruction", limit=0).drop("run_id")
    b = direct.query("ncu-source", by="instruction", limit=0).drop("run_id")
    assert a.equals(b)
    tk.close()
    direct.close()


@pytest.mark.parametrize("case, file, why", [
    ("meta_not_json", "meta.json", "invalid JSON"),
    ("meta_not_utf8", "meta.json", "invalid JSON (not UTF-8 text (byte 11: invalid start byte)); fix it"),
    ("meta_nested_deep", "meta.json", "invalid JSON (arrays or objects nested too deeply to read); fix it"),
    ("meta_a_list", "meta.json", "not a JSON object"),
    ("params_a_list", "meta.json", "'params' must be a JSON object, not [8, 1024]"),
    ("name_a_number", "meta.json", "'name' must be a JSON string, not 7"),
    ("name_an_id", "meta.json", "'name': '7' cannot name a run: --run reads it as a run id"),
    ("name_with_controls", "meta.json", "'name': 'a\\x1bb' cannot name a run: it holds control characters"),
    ("requests_of_another_tool", "requests.csv", "not the requests CSV tracekit capture writes"),
    ("export_not_sqlite", "nsys.sqlite.xz", "neither an nsys SQLite export nor an ncu report"),
    ("no_meta", "", "not a run folder (no meta.json) and no run folder below it; name the exports it holds ("),
    ("nothing_to_ingest", "", "holds no profile or requests.csv"),
    ("bs_not_a_number", "meta.json", "'params' bs='eight': bs (the batch size) is a whole number from 1 to 2147483647"),
    ("rank_negative", "meta.json", "'params' rank=-1: a rank is a whole number from 0 to 2147483647"),
    ("rank_not_whole", "meta.json", "'params' rank=2.5: a rank is a whole number from 0 to 2147483647"),
    ("rank_past_world_size", "meta.json", "'params' rank=4 with world_size=4: a job of 4 ranks has ranks 0 to 3"),
    ("job_of_a_capture_again", "meta.json", "'params' job='train#2': a job named JOB#N is the N-th capture"),
    ("requests_of_another_point", "meta.json", "'params' bs=8: the requests of {run} ran at bs=4; a run is one point"),
    ("latency_infinite", "requests.csv", "latency_ms inf in data row 1: a time or size is a finite number"),
    ("latency_negative", "requests.csv", "latency_ms -5.0 in data row 1"),
    ("latency_nan", "requests.csv", "latency_ms is empty in data row 1, a timed request: each timed request has its"),
    ("two_exports", "", "the run folder holds 2 nsys files (extra/more.sqlite, nsys.sqlite.xz); a run is one capture"),
])
def test_a_bad_run_folder_is_one_line_naming_the_file_and_the_store_is_unchanged(tmp_path, small_store, case, file,
                                                                                    why):
    """Each file of a run folder that tracekit reads is checked: a meta.json of the wrong
    shape, or a requests.csv or export it cannot read, is an error, never a run that
    silently lacks its requests or profile."""
    from conftest import store_state

    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"name": "r", "tool": "nsys", "params": {"bs": 8, "nc": 1024}}))
    shutil.copy(DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz", run / "nsys.sqlite.xz")
    (run / "requests.csv").write_text(
        "request_idx,phase,bs,nc,kv_caches,candidate_embeddings,latency_ms,peak_mem_allocated_mb,peak_mem_reserved_mb\n"
        "0,timed,8,1024,8,1024,12.25,100.0,200.0\n")
    (run / "notes.md").write_text("beside the run: not read\n")
    edit = {
        "meta_not_json": lambda: (run / "meta.json").write_text("{bad"),
        "meta_not_utf8": lambda: (run / "meta.json").write_bytes(b'{"name": "a\xff\xfeb", "params": {}}'),
        "meta_nested_deep": lambda: (run / "meta.json").write_text(
            '{"name": "r", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        "meta_a_list": lambda: (run / "meta.json").write_text("[1]"),
        "params_a_list": lambda: (run / "meta.json").write_text('{"name": "r", "params": [8, 1024]}'),
        "name_a_number": lambda: (run / "meta.json").write_text('{"name": 7, "params": {}}'),
        "name_an_id": lambda: (run / "meta.json").write_text('{"name": "7", "params": {}}'),
        "name_with_controls": lambda: (run / "meta.json").write_text('{"name": "a\\u001bb", "params": {}}'),
        "requests_of_another_tool": lambda: (run / "requests.csv").write_text("request,latency_ms\n0,12.5\n"),
        "export_not_sqlite": lambda: (run / "nsys.sqlite.xz").write_bytes(lzma.compress(b"not a database\n")),
        "no_meta": lambda: (run / "meta.json").unlink(),
        "nothing_to_ingest": lambda: [(run / f).unlink() for f in ("nsys.sqlite.xz", "requests.csv")],
        "bs_not_a_number": lambda: (run / "meta.json").write_text('{"name": "r", "params": {"bs": "eight"}}'),
        "rank_negative": lambda: (run / "meta.json").write_text('{"name": "r", "params": {"rank": -1}}'),
        "rank_not_whole": lambda: (run / "meta.json").write_text('{"name": "r", "params": {"rank": 2.5}}'),
        "rank_past_world_size": lambda: (run / "meta.json").write_text(
            '{"name": "r", "params": {"rank": 4, "world_size": 4}}'),
        "job_of_a_capture_again": lambda: (run / "meta.json").write_text('{"name": "r", "params": {"job": "train#2"}}'),
        "requests_of_another_point": lambda: (run / "requests.csv").write_text(
            (run / "requests.csv").read_text().replace("0,timed,8,1024,", "0,timed,4,1024,")),
        "latency_infinite": lambda: (run / "requests.csv").write_text(
            (run / "requests.csv").read_text().replace(",12.25,", ",inf,")),
        "latency_nan": lambda: (run / "requests.csv").write_text(
            (run / "requests.csv").read_text().replace(",12.25,", ",nan,")),
        "latency_negative": lambda: (run / "requests.csv").write_text(
            (run / "requests.csv").read_text().replace(",12.25,", ",-5,")),
        "two_exports": lambda: ((run / "extra").mkdir(), shutil.copy(DATA / "nsys_capture_range" / "export.sqlite.xz",
                                                                      run / "extra" / "more.sqlite")),
    }
    edit[case]()
    before = store_state(small_store)
    tk = tracekit.open(small_store)
    with pytest.raises(InputError) as info:
        tk.ingest(run)
    tk.close()
    msg = str(info.value)
    why = why.format(run=run)
    assert msg.startswith(f"{run / file}:" if file else f"{run}:") and why in msg and "\n" not in msg, msg
    assert store_state(small_store) == before


def test_a_requests_csv_with_a_request_out_of_range_or_twice_is_one_line(tmp_path):
    """A request's phase is warmup or timed (another was left out of every timed statistic
    without a word), its counts and index are 0 or more (bs and nc 1 or more), and each
    request is one row, and the last row ends with its line end (cut inside its last column, it
    parsed as a wrong number): a real capture's requests.csv, edited, is refused naming the row."""
    from tracekit.ingest import requests

    real = (DATA / "hstu_capture_ncu" / "requests.csv").read_text()
    lines = real.splitlines(keepends=True)
    assert requests.read(DATA / "hstu_capture_ncu" / "requests.csv").tables["requests"].num_rows == len(lines) - 1
    for edited, said in ((real.replace("\n4,timed,", "\n4,Timed,", 1), "phase 'Timed' in data row 5: a request's "
                                                                          "phase is warmup or timed"),
                         (real.replace("\n4,timed,8,", "\n4,timed,-8,", 1), "bs -8 in data row 5: must be 1 or more"),
                         (real.replace("\n4,timed,8,1024,8,", "\n4,timed,8,1024,-1,", 1),
                          "kv_caches -1 in data row 5: must be 0 or more"),
                         (real + lines[9], f"request_idx 8 in data rows 9 and {len(lines)}: each request is one row"),
                         (real.rstrip("\r\n")[:-3], f"its last row (data row {len(lines) - 1}) has no line end: the "
                                                    "file was cut short while written or copied; remove that row, "
                                                    "or end it with a line end if it is whole")):
        path = tmp_path / "requests.csv"
        path.write_text(edited)
        with pytest.raises(InputError, match=f"^{re.escape(f'{path}: {said}')}$"):
            requests.read(path)
    # a --param that names another point than the requests ran at (as a run folder's meta.json)
    with tracekit.open(tmp_path / "s.duckdb") as tk, pytest.raises(
            InputError, match=f"^--param nc=512: the requests of {re.escape(str(DATA))}.* ran at nc=1024; a run is one"):
        tk.ingest(DATA / "hstu_capture_ncu" / "requests.csv", params={"nc": 512})


@pytest.mark.parametrize("into", ["store", "dataset"])
def test_a_run_folder_whose_requests_are_not_the_ones_it_counts_is_one_line(tmp_path, capsys, into):
    """A run folder of hstu_sweep (ok, 20 timed requests counted in its meta.json) with its
    requests.csv edited: its timed rows all gone (its point left every sweep query without a
    word), or one of them gone (its latencies another capture's); refused, naming the counts;
    a failed capture's folder, which may hold fewer, still lands."""
    from conftest import store_state

    from tracekit.cli import main as cli_main

    point = sorted((DATA / "hstu_sweep" / "runs").iterdir())[0]
    lines = (point / "requests.csv").read_text().splitlines(keepends=True)
    timed = [i for i, line in enumerate(lines) if ",timed," in line]
    assert json.loads((point / "meta.json").read_text())["latency"]["requests"] == len(timed) == 20
    db = tmp_path / ("s.duckdb" if into == "store" else "ds")
    if into == "dataset":
        db.mkdir()
    assert cli_main(["--db", str(db), "ingest", str(sorted((DATA / "hstu_sweep" / "runs").iterdir())[1])]) == 0

    def state():  # (a dataset: its files as they are)
        return store_state(db) if into == "store" else sorted((str(f.relative_to(db)), f.read_bytes())
                                                              for f in db.rglob("*") if f.is_file())
    before = state()
    for name, keep, held in (("none", [i for i in range(len(lines)) if i not in timed], 0),
                             ("one_less", [i for i in range(len(lines)) if i != timed[-1]], 19)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "meta.json").write_text((point / "meta.json").read_text())
        (folder / "requests.csv").write_text("".join(lines[i] for i in keep))
        capsys.readouterr()
        assert cli_main(["--db", str(db), "ingest", str(folder)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert err == [f"tracekit: error: {folder}: its requests.csv holds {held} timed request"
                       f"{'s' if held != 1 else ''}, but its meta.json counts 20: the file was cut or edited, or is "
                       "another capture's; capture the point again"]
        assert state() == before
    meta = json.loads((point / "meta.json").read_text())
    meta.update(status="interrupted", error="interrupted by the user")
    (tmp_path / "none" / "meta.json").write_text(json.dumps(meta))
    assert cli_main(["--db", str(db), "ingest", str(tmp_path / "none")]) == 0


def test_a_sweeps_point_whose_requests_were_cut_is_an_error_not_a_point_left_out(tmp_path, capsys):
    """A sweep's folder ingested whole: a point whose capture says ok but whose requests.csv was
    cut short, or holds no timed request any more, is that file's error (exit 2, the other
    points landed), not a run said to have recorded nothing and passed over."""
    from tracekit.cli import main as cli_main

    sweep = tmp_path / "a"
    shutil.copytree(DATA / "sweep_pair" / "a", sweep)
    point = sorted((sweep / "runs").iterdir())[0]
    text = (point / "requests.csv").read_text()
    for name, edited, said in (("cut", text[:230], "requests.csv: its last row (data row 2) has no line end"),
                               ("no_timed", text.replace(",timed,", ",warmup,"),
                                "its requests.csv holds 0 timed requests, but its meta.json counts 40")):
        (point / "requests.csv").write_text(edited)
        db = tmp_path / f"{name}.duckdb"
        assert cli_main(["--db", str(db), "ingest", str(sweep)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 2 and said in err[0] and str(point) in err[0], err
        assert err[1] == "tracekit: error: 1 of 4 files not ingested (errors above); the others landed"
        with tracekit.open(db, read_only=True) as tk:
            assert tk.runs().height == 3


def test_a_sweeps_point_whose_run_folder_is_gone_is_said_so(tmp_path, capsys):
    """A point the manifest says ran whose run folder is neither beside it nor in the store:
    the warning says its folder is gone, not a folder to ingest that is not there."""
    from tracekit.cli import main as cli_main

    sweep = tmp_path / "a"
    shutil.copytree(DATA / "sweep_pair" / "a", sweep)
    gone = sorted((sweep / "runs").iterdir())[0]
    shutil.rmtree(gone)
    db = str(tmp_path / "s.duckdb")
    assert cli_main(["--db", db, "ingest", str(sweep)]) == 0
    capsys.readouterr()
    assert cli_main(["--db", db, "query", "sweep-latency"]) == 0
    assert f"bs=1,nc=128: not ingested, and its run folder {gone.name} is not beside the sweep's manifest" in \
        capsys.readouterr().err
    first = next(sweep.glob("sweep-*.json")).stem
    assert cli_main(["--db", db, "diff", str(sweep), str(DATA / "sweep_pair" / "b"), "-f", "csv"]) == 0
    assert f"base sweep {first}'s run at bs=1,nc=128 is not in the store, and its run folder {gone.name} is not " \
           "beside its manifest: nothing to compare, not judged" in capsys.readouterr().out


@pytest.mark.parametrize(("into", "workers"), [("store", None), ("store", 2), ("dataset", None), ("dataset", 2)])
def test_a_failed_capture_lands_with_a_warning_and_runs_shows_its_status(tmp_path, capsys, into, workers):
    from tracekit.cli import main as cli_main

    points = sorted((DATA / "hstu_sweep" / "runs").iterdir())[:2]
    failed = shutil.copytree(points[0], tmp_path / points[0].name)
    meta = json.loads((failed / "meta.json").read_text())
    meta.update(status="failed", error="worker exited with code 1: CUDA out of memory")
    (failed / "meta.json").write_text(json.dumps(meta))
    ok = shutil.copytree(points[1], tmp_path / points[1].name)
    db = tmp_path / "s.duckdb"
    if into == "dataset":
        db = tmp_path / "ds"
        db.mkdir()
    more = [] if workers is None else ["--workers", str(workers)]
    assert cli_main(["--db", str(db), "ingest", str(failed), str(ok), *more]) == 0
    out, err = capsys.readouterr()
    assert out.count(": run ") == 2, out
    warning = [line for line in err.splitlines() if "warning" in line]
    assert warning == [f"{failed}: warning: the capture's status is 'failed' (worker exited with code 1: CUDA out "
                       "of memory); its rows are kept, but the sweep queries (sweep-latency, sweep-kernels, "
                       "sweep-points, sweep-ncu) and sweep diffs leave the run out"], err
    with tracekit.open(db) as tk:
        statuses = dict(tk.query("runs").select("name", "status").iter_rows())
        assert statuses == {failed.name: "failed", ok.name: "ok"}
        assert tk.query("sweep-latency", limit=0)["run"].to_list() == [ok.name]
    # again: already there, no second warning
    assert cli_main(["--db", str(db), "ingest", str(failed)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_comparing_a_failed_capture_warns(tmp_path, capsys):
    """diff and report --vs of a run whose capture failed still answer, with a warning
    naming the run and the error (stderr in the CLI, CaptureWarning in the library, a
    line in the report's comparison); a run compared with itself warns once."""
    import warnings

    from tracekit.cli import main as cli_main
    from tracekit.errors import CaptureWarning

    failed = shutil.copytree(DATA / "hstu_capture_nsys", tmp_path / "capture")
    meta = json.loads((failed / "meta.json").read_text())
    meta.update(status="failed", error="worker exited with code 1")
    (failed / "meta.json").write_text(json.dumps(meta))
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(failed), str(DATA / "nsys_hstu_mixed" / "export.sqlite.xz")]) == 0
    capsys.readouterr()
    warning = f"tracekit: warning: diff: run 1 ({meta['name']}): the capture's status is 'failed' (worker exited with " \
              "code 1); its numbers may be partial"
    # (the capture traced graph launches whole, the export node by node: said too)
    modes = {("1", "2"): "Graph -> Node", ("2", "1"): "Node -> Graph"}
    for args in (["1", "2"], ["2", "1"], ["1", "1"]):
        assert cli_main(["--db", str(db), "diff", *args]) == 0
        out, err = capsys.readouterr()
        setup = [f"tracekit: warning: diff: the captures differ in setup: nsys --cuda-graph-trace {modes[tuple(args)]}"] \
            if tuple(args) in modes else []
        assert err.splitlines() == [warning, *setup] and "unchanged" in out, err
    assert cli_main(["--db", str(db), "diff", "2", "2"]) == 0
    assert capsys.readouterr().err == ""
    html = tmp_path / "r.html"
    assert cli_main(["--db", str(db), "report", "--run", "2", "--vs", "1", "-o", str(html)]) == 0
    assert capsys.readouterr().err.splitlines() == [warning, "tracekit: warning: diff: the captures differ in setup: "
                                                             "nsys --cuda-graph-trace Graph -> Node"]
    assert f"Warning: run 1 ({meta['name']}): the capture&#x27;s status is &#x27;failed&#x27;" in html.read_text()
    with tracekit.open(db) as tk, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tk.diff(2, 1)
    assert [(w.category, str(w.message)) for w in caught] == [
        (CaptureWarning, warning.removeprefix("tracekit: warning: ")),
        (CaptureWarning, "diff: the captures differ in setup: nsys --cuda-graph-trace Node -> Graph")]


@pytest.mark.parametrize("workers", [None, 2])
def test_a_sweeps_folder_ingests_every_point_as_its_run_folders_named_one_by_one(tmp_path, capsys, workers):
    """`tracekit ingest SWEEP`: the folder `tracekit sweep` writes (no meta.json of its own)
    stands for the run folders below it; a folder inside a run folder is the run's, not a run."""
    from tracekit.cli import main as cli_main

    sweep = shutil.copytree(DATA / "hstu_sweep", tmp_path / "sweep")
    points = sorted((sweep / "runs").iterdir())
    inner = points[0] / "notes"
    inner.mkdir()
    (inner / "meta.json").write_text('{"name": "not a run"}')
    more = [] if workers is None else ["--workers", str(workers)]
    assert cli_main(["--db", str(tmp_path / "folder.duckdb"), "ingest", str(sweep), *more]) == 0
    out = capsys.readouterr().out
    assert out.count(": run ") == len(points) == 16, out
    assert cli_main(["--db", str(tmp_path / "named.duckdb"), "ingest", *map(str, points)]) == 0
    capsys.readouterr()
    answers = []
    for db in ("folder", "named"):
        with tracekit.open(tmp_path / f"{db}.duckdb") as tk:
            answers.append((tk.query("runs").select("run_id", "name", "params").rows(),
                            tk.query("sweep-latency", limit=0).rows()))
    assert answers[0] == answers[1]
    assert [r[1] for r in answers[0][0]] == [p.name for p in points]
    assert len(answers[0][1]) == 16


@pytest.mark.parametrize(("layout", "why"), [
    ("exports", "not a run folder (no meta.json) and no run folder below it; name the exports it holds "
                "({folder}/rank0/export.sqlite.xz, ...)"),
    ("empty", "not a run folder (no meta.json) and no run folder below it, nor an nsys export or ncu report: "
              "nothing to ingest"),
    ("sweep_named", "--name 'one' names one run: give it one file or run folder ({folder} holds 2 run folders)"),
])
def test_a_folder_without_run_folders_or_named_as_one_run_is_one_line(tmp_path, small_store, capsys, layout, why):
    """A folder of loose exports is not guessed at (one capture may sit there in several
    forms: an .nsys-rep beside its .sqlite, an ncu report beside its pages): the error names
    one to ingest; nothing is written."""
    from conftest import store_state

    from tracekit.cli import main as cli_main

    folder = tmp_path / "job"
    args = [str(folder)]
    if layout == "exports":
        for rank in ("rank0", "rank1"):
            (folder / rank).mkdir(parents=True)
            shutil.copy(DATA / "nsys_ranks_2gpu" / rank / "export.sqlite.xz", folder / rank)
    elif layout == "empty":
        (folder / "logs").mkdir(parents=True)
        (folder / "logs" / "sweep.log").write_text("no runs\n")
    else:
        for p in sorted((DATA / "hstu_sweep" / "runs").iterdir())[:2]:
            shutil.copytree(p, folder / "runs" / p.name)
        args += ["--name", "one"]
    before = store_state(small_store)
    assert cli_main(["--db", str(small_store), "ingest", *args]) == 2
    err = capsys.readouterr().err.strip()
    prefix = "tracekit: error: " if layout == "sweep_named" else f"tracekit: error: {folder}: "
    assert err == prefix + why.format(folder=folder), err
    assert store_state(small_store) == before


def test_a_sweeps_folder_through_links_each_run_folder_once(tmp_path):
    """Links are followed (a sweep's runs/ may live elsewhere), each folder once: a link
    back up the tree or a second link to the same runs is no loop and no second run."""
    from tracekit.ingest import run_folders

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "runs").symlink_to(DATA / "hstu_sweep" / "runs")
    (sweep / "up").symlink_to(tmp_path)
    (sweep / "again").symlink_to(DATA / "hstu_sweep" / "runs")
    found = run_folders([sweep])
    assert [p.name for p in found] == sorted(p.name for p in (DATA / "hstu_sweep" / "runs").iterdir())
    assert {p.parent.name for p in found} == {"again"}  # (the first in path order: again/ before runs/)


def test_a_sweeps_failed_point_is_left_out_with_a_warning(tmp_path, capsys):
    """A point whose capture failed before it timed a request (meta.json status failed, no
    requests.csv: as `tracekit sweep` leaves it) is left out of the folder's runs with a
    warning, as the sweep's own ingest leaves it out; diff reads the point as the new sweep's
    failed capture (its folder says so, though the manifest says ok), regressed."""
    from tracekit.cli import main as cli_main

    sweeps = {}
    for side in ("a", "c"):
        sweeps[side] = shutil.copytree(DATA / "sweep_pair" / side, tmp_path / side)
    failed = next((sweeps["c"] / "runs").glob("*-bs4-nc512-none"))
    meta = json.loads((failed / "meta.json").read_text())
    meta.update(status="failed", error="worker exited with code 1: CUDA out of memory")
    (failed / "meta.json").write_text(json.dumps(meta))
    (failed / "requests.csv").unlink()
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(sweeps["c"])]) == 0
    out, err = capsys.readouterr()
    assert out.count(": run ") == 3 and err.strip() == (
        f"tracekit: warning: {failed}: not ingested: the capture's status is 'failed' (worker exited with code 1: "
        "CUDA out of memory) and it left no timed request or profile")
    assert cli_main(["--db", str(tmp_path / "d.duckdb"), "diff", str(sweeps["a"]), str(sweeps["c"]), "-f", "csv"]) == 0
    out, err = capsys.readouterr()
    # (the point the new sweep lacks: its two rows, its capture failed as its folder says, said once)
    rows = [line for line in out.splitlines() if line.startswith('sweep,"bs=4,nc=512",latency')]
    assert len(rows) == 2 and all(",regressed,,the new sweep's capture of this point failed: worker exited with code "
                                  "1: CUDA out of memory," in r for r in rows), rows
    assert err.count("not ingested: the capture's status is 'failed'") == 1, err


def test_inputs_met_twice_count_once_and_a_bad_folder_fails_alone(tmp_path, small_store, capsys):
    """A run folder named beside the sweep's folder that holds it is one input (its name is
    the one it has alone); a folder of loose exports among other inputs fails alone, the
    others land; in Python, ingesting a sweep's folder says how to."""
    from tracekit.cli import main as cli_main

    points = sorted((DATA / "hstu_sweep" / "runs").iterdir())
    db = tmp_path / "s.duckdb"
    assert cli_main(["--db", str(db), "ingest", str(DATA / "hstu_sweep"), str(points[0]), str(DATA / "hstu_sweep")]) == 0
    assert capsys.readouterr().out.count(": run ") == 16
    with tracekit.open(db) as tk:
        assert sorted(tk.query("runs", limit=0)["name"]) == sorted(p.name for p in points)
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(DATA / "nsys_ranks_2gpu" / "rank0" / "export.sqlite.xz", loose)
    assert cli_main(["--db", str(tmp_path / "m.duckdb"), "ingest", str(points[0]), str(loose), str(points[1])]) == 2
    out, err = capsys.readouterr()
    assert out.count(": run ") == 2 and f"{loose}: not a run folder (no meta.json)" in err
    with tracekit.open(small_store) as tk, pytest.raises(InputError, match=r"not a run folder \(no meta.json\); "
                                                                       "it holds 16 run folders: ingest them"):
        tk.ingest(DATA / "hstu_sweep")


def test_a_sweep_of_failed_points_fails_alone_and_warns_once(tmp_path, capsys):
    """A sweep's folder whose points all failed before a timed request (one left only warm-up
    requests) is an input that fails alone: the other inputs land; given twice, each point is
    warned of once."""
    from tracekit.cli import main as cli_main

    sweep = tmp_path / "failed"
    for i, point in enumerate(sorted((DATA / "sweep_pair" / "b" / "runs").iterdir())[:2]):
        run = shutil.copytree(point, sweep / "runs" / point.name)
        meta = json.loads((run / "meta.json").read_text())
        meta.update(status="failed", error="killed")
        (run / "meta.json").write_text(json.dumps(meta))
        lines = (run / "requests.csv").read_text().splitlines()
        (run / "requests.csv").write_text("\n".join([lines[0], *[x for x in lines[1:] if ",warmup," in x]][:1 + i])
                                          + "\n")
    good = sorted((DATA / "sweep_pair" / "a" / "runs").iterdir())[0]
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(sweep), str(good), str(sweep)]) == 2
    out, err = capsys.readouterr()
    assert out.count(": run ") == 1
    lines = err.strip().splitlines()
    assert sum("not ingested: the capture's status is 'failed' (killed)" in x for x in lines) == 2, lines
    assert f"tracekit: error: {sweep}: not a run folder (no meta.json); its 2 run folders hold no timed request or " \
           "profile: captures that failed (each capture.log says why; capture again) or runs under --tool none" in lines


def test_a_requests_csv_saved_with_a_byte_order_mark_is_read(tmp_path):
    """A run folder's requests.csv saved again by a spreadsheet or a Windows editor starts with
    a UTF-8 byte order mark: it is the same requests, not 'not the requests CSV tracekit
    capture writes'."""
    run = tmp_path / "run"
    shutil.copytree(DATA / "hstu_capture_nsys", run)
    plain = (run / "requests.csv").read_bytes()
    (run / "requests.csv").write_bytes(b"\xef\xbb\xbf" + plain)
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        tk.ingest(run)
        got = tk.sql("SELECT * FROM requests ORDER BY request_idx")
    with tracekit.open(tmp_path / "plain.duckdb") as tk:
        tk.ingest(DATA / "hstu_capture_nsys")
        assert got.equals(tk.sql("SELECT * FROM requests ORDER BY request_idx")) and got.height > 30
