"""Shared fixtures: real captures under tests/data/, ingested once per session."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

# The tests send themselves SIGINT to stand for Ctrl-C. A process started with SIGINT ignored
# (a background job of a script, nohup) keeps ignoring it, as tracekit does on purpose; the
# tests restore Python's own handler so that they do not depend on how they were started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: where the tests' temporary files go when the machine has a RAM-backed file system with this
#: much room, unless PYTEST_DEBUG_TEMPROOT (pytest's own setting) names a place: DuckDB syncs
#: every commit to disk, and an ingest-heavy pair of test files took 148 s with its files on
#: the 2-core machine's disk against 104 s in /dev/shm (docs/performance.md)
IN_MEMORY_TEMP, IN_MEMORY_ROOM = Path("/dev/shm"), 6 << 30
if ("PYTEST_DEBUG_TEMPROOT" not in os.environ and os.access(IN_MEMORY_TEMP, os.W_OK)
        and IN_MEMORY_TEMP.is_dir() and shutil.disk_usage(IN_MEMORY_TEMP).free >= IN_MEMORY_ROOM):
    os.environ["PYTEST_DEBUG_TEMPROOT"] = str(IN_MEMORY_TEMP)

#: the cores each pytest-xdist worker of this run has: the workers share the machine's cores (CI:
#: two workers on two cores), while DuckDB, Polars and PyTorch each start a thread per core in
#: every worker, so that two workers ran four busy threads on two cores. Each library is given
#: the worker's share (test_job_diff and test_dataset: 0.93x the time, docs/performance.md); a
#: single process keeps their defaults.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
CORES_EACH = max(1, (os.cpu_count() or 1) // WORKERS)
if WORKERS > 1:
    import duckdb

    for _var in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS"):  # (read when polars and torch are imported)
        os.environ.setdefault(_var, str(CORES_EACH))
    _duckdb_connect = duckdb.connect

    def _connect_with_the_workers_share(database=":memory:", read_only=False, config=None, **kw):
        """``duckdb.connect``, with ``threads`` the worker's share of the cores unless given."""
        return _duckdb_connect(database, read_only=read_only, config={"threads": CORES_EACH, **(config or {})},
                               **kw)

    duckdb.connect = _connect_with_the_workers_share

DATA = Path(__file__).parent / "data"
NCU_SOL_METRICS = {  # speed-of-light column -> the metric ncu's details page prints
    "duration_ns": "gpu__time_duration.sum",
    "elapsed_cycles": "gpc__cycles_elapsed.max",
    "sm_active_cycles": "sm__cycles_active.avg",
    "sm_frequency_hz": "gpc__cycles_elapsed.avg.per_second",
    "dram_frequency_hz": "dram__cycles_elapsed.avg.per_second",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l1_throughput_pct": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
}
NCU_MWA_METRICS = {  # memory-workload column -> the metric of ncu's Memory Workload Analysis (details page)
    "dram_bytes_per_s": "dram__bytes.sum.per_second",
    "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "mem_busy_pct": "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
    "max_bandwidth_pct": "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
    "mem_pipes_busy_pct": "sm__memory_throughput.avg.pct_of_peak_sustained_elapsed",
}

#: a host program traced without CUDA (nsys -t nvtx,osrt): 40 batches, 60, 40 again, 40 with host regressions
CPU_ONLY = ("cpu_only", "cpu_only_more", "cpu_only_again", "cpu_only_slow")
#: the first three and hstu_capture are the issue's scenarios; the rest are what real captures
#: also hold (several processes and GPUs, graph-level tracing, odd NVTX, a host program traced without CUDA,
#: NVTX names only registered, cut captures, a capture whose window missed the GPU work, Unified Memory and the
#: runtime's other memory operations,
#: PyTorch's autograd NVTX ranges with CPU sampling, Inductor's kernels replayed in CUDA graphs under an
#: NVTX-started capture, per-thread default streams with priority streams and the launch APIs, NCCL over
#: two GPUs, JAX/XLA through the driver API on two GPUs in one process, an export that nsys's own
#: import left incomplete, host-to-device copies of many sizes from pinned or pageable memory, a data-staging
#: program of copies and memsets that launches no kernel, and the GPU's
#: counters sampled (nsys --gpu-metrics-devices), and a managed-memory program traced with Unified Memory's
#: page faults (twice, and with its buffers prefetched) and with the GPU's alone, a host-bound loop
#: captured with CPU sampling (twice, and with a host function made slower), and a program's GPU memory
#: allocations recorded (twice, and with a planted leak and a larger workspace), and GPU memory from virtual
#: memory management, a CUDA graph's memory nodes, a pool of its own, pitched and host memory, and CUDA API
#: calls captured with their call stacks, native and Python (nsys --cudabacktrace --python-backtrace=cuda), and
#: Python functions with planted shares of the time, their stacks sampled (nsys --python-sampling))
NSYS_SCENARIOS = ["hstu_mixed", "many_kernels", "multithread", "hstu_capture", "multiproc", "graphs_node",
                  "graphs_graph", "odd_nvtx", "odd_nvtx_cuda_only", *CPU_ONLY, "capture_range", "window_missed",
                  "diff_base_a", "diff_base_b", "diff_base_c", "diff_regressed", *(f"ranks_rank{r}" for r in range(4)),
                  *(f"ranks_2gpu_rank{r}" for r in range(2)), *(f"ranks_nccl_rank{r}" for r in range(2)),
                  "jobs_after_rank1", "jobs_missed_rank3",
                  "registered_nvtx", "registered_nvtx_domains", "memops", "autograd",
                  "inductor", "streams", "nccl", "nccl_overlap", "jax", "jax_graph", "jax_whole",
                  "copies_pinned", "copies_pinned_again", "copies_pageable", "copies_only",
                  "gpu_metrics", "gpu_metrics_again", "gpu_metrics_zeros", "um_faults", "um_faults_again", "um_gpu_only",
                  "um_prefetch", "cpu_hot", "cpu_hot_again", "cpu_hot_slow", "mem", "mem_again", "mem_grow",
                  "mem_odd", "backtrace", "python_hot", *(f"pair_{r}" for r in ("base", "base_again", "half_sms")),
                  *(f"pace_{r}" for r in ("before", "before2", "after"))]
#: a store table of events nsys records only when told (a query's @traced) -> the scenario that
#: has them, which a question about them is asked of: the GPU's sampled counters, Unified Memory's
#: page faults, the CPU's samples, GPU memory's allocations, the CUDA API calls' stacks, the Python
#: threads' sampled stacks
TRACED_IN = {"gpu_metrics": "gpu_metrics", "um_cpu_faults": "memops", "um_gpu_faults": "memops",
             "cpu_samples": "cpu_hot", "gpu_memory": "mem_grow", "api_frames": "backtrace",
             "python_samples": "python_hot"}


def scenario_of(q) -> str | None:
    """The scenario a named query about such events is asked of (TRACED_IN); None for the others."""
    return next((scen for table, scen in TRACED_IN.items() if table in q.traced), None)


#: scenario -> (its folder, the export in it); each folder has stats/ with nsys's own CSVs
NSYS_EXPORTS = {
    "hstu_mixed": DATA / "nsys_hstu_mixed" / "export.sqlite.xz",
    "many_kernels": DATA / "nsys_many_kernels" / "export.sqlite.xz",
    "multithread": DATA / "nsys_multithread" / "export.sqlite.xz",
    "hstu_capture": DATA / "hstu_capture_nsys" / "nsys.sqlite.xz",  # `tracekit capture --tool nsys`
    **{s: DATA / f"nsys_{s}" / "export.sqlite.xz" for s in (
        "multiproc", "graphs_node", "graphs_graph", "odd_nvtx", "odd_nvtx_cuda_only", *CPU_ONLY, "capture_range",
        "window_missed",
        "diff_base_a", "diff_base_b", "diff_base_c", "diff_regressed", "registered_nvtx", "registered_nvtx_domains",
        "memops", "autograd", "inductor", "streams", "nccl", "nccl_overlap", "jax", "jax_graph", "jax_whole",
        "copies_pinned", "copies_pinned_again", "copies_pageable", "copies_only", "gpu_metrics", "gpu_metrics_again",
        "gpu_metrics_zeros", "um_faults", "um_faults_again", "um_gpu_only", "um_prefetch", "cpu_hot", "cpu_hot_again",
        "cpu_hot_slow", "mem", "mem_again", "mem_grow", "mem_odd", "backtrace", "python_hot")},
    # one export per rank of a 4-process job (tests/data/nsys_ranks/PLANT.md)
    **{f"ranks_rank{r}": DATA / "nsys_ranks" / f"rank{r}" / "export.sqlite.xz" for r in range(4)},
    # two ranks of the job spread over 2 GPUs: rank 1 ran on device 1 (nsys_ranks_2gpu/PLANT.md)
    **{f"ranks_2gpu_rank{r}": DATA / "nsys_ranks_2gpu" / f"rank{r}" / "export.sqlite.xz" for r in range(2)},
    # two ranks over NCCL, one GPU each: rank 1 the straggler, rank 0 waits in NCCL's kernel (nsys_ranks_nccl/PLANT.md)
    **{f"ranks_nccl_rank{r}": DATA / "nsys_ranks_nccl" / f"rank{r}" / "export.sqlite.xz" for r in range(2)},
    # the straggler rank of the job that nsys_jobs compares with its base (more backward layers; PLANT.md)
    "jobs_after_rank1": DATA / "nsys_jobs" / "after" / "rank1" / "export.sqlite.xz",
    # a rank of a job whose capture range, a host-only NVTX range after its GPU work, missed it (nsys_jobs/missed)
    "jobs_missed_rank3": DATA / "nsys_jobs" / "missed" / "rank3" / "export.sqlite.xz",
    # the inference capture twice, and with one kernel on half the SMs (hstu_capture_pair/README.md)
    **{f"pair_{r}": DATA / "hstu_capture_pair" / r / "nsys.sqlite.xz" for r in ("base", "base_again", "half_sms")},
    # the inference capture twice minutes apart (the host's pace moved), and with the Gluon cached
    # kernel (hstu_host_pace/README.md)
    **{f"pace_{r}": DATA / "hstu_host_pace" / r / "nsys.sqlite.xz" for r in ("before", "before2", "after")},
}


@pytest.fixture(scope="session", autouse=True)
def _reports_read_once(tmp_path_factory):
    """Each .ncu-rep content is read by NVIDIA's ncu_report once per test run (``built_once``);
    a later read of the same bytes, in this process or another worker of the run, takes that
    answer. The child interpreter that reads a report takes 1.5-6 s of the 2-core machine, and
    the suite read the same dozen committed reports 180 times. What the child gives is a
    function of the file's bytes alone (it runs in a fresh interpreter for that reason), so
    nothing it decides is skipped: the ingest around it runs in full. A failed read is never
    kept, and a test that reads reports in its own process (``ncu_rep._read_here``) is not
    served from here. The answers live in this run's temporary folder, so a change to the
    reader is never hidden by an earlier run's answer. The child starts when its answer is
    asked for, not beside the parse of a CSV page."""
    import hashlib
    import json

    import polars as pl

    from tracekit.ingest import ncu_rep

    real = ncu_rep.ReportRead
    parts = ("kernels", "metrics", "rules")

    def write(folder: Path, answer) -> None:
        meta, *frames, source = answer
        folder.mkdir()
        (folder / "meta.json").write_text(json.dumps(meta))
        for name, f in [*zip(parts, frames, strict=True), *source.items()]:
            if f is not None:
                f.write_parquet(folder / f"{name}.parquet")

    def read(folder: Path):
        frames = {f.stem: pl.read_parquet(f) for f in folder.glob("*.parquet")}
        return json.loads((folder / "meta.json").read_text()), *(frames.pop(n, None) for n in parts), frames

    class ReadOnce:
        """``ncu_rep.ReportRead``'s interface: ``path``, ``result()``, ``cancel()``."""

        def __init__(self, path: Path, source_only: bool) -> None:
            self.path, self.source_only = Path(path), source_only

        def result(self):
            with open(self.path, "rb") as f:
                name = f"ncu-report-{hashlib.file_digest(f, 'sha1').hexdigest()}-{int(self.source_only)}"
            return read(built_once(tmp_path_factory, name,
                                   lambda folder: write(folder, real(self.path, self.source_only).result())))

        def cancel(self) -> None:
            """Nothing runs before ``result()``."""

    mp = pytest.MonkeyPatch()
    mp.setattr(ncu_rep, "ReportRead", ReadOnce)
    yield real
    mp.undo()


@pytest.fixture
def reports_read_each_time(_reports_read_once, monkeypatch):
    """For a test of the child interpreter itself: every report read starts one."""
    from tracekit.ingest import ncu_rep

    monkeypatch.setattr(ncu_rep, "ReportRead", _reports_read_once)


def _run_folder(tmp_path_factory) -> Path:
    """This test run's temporary folder that all its workers share."""
    import os

    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The file or folder ``build(path)`` makes, made by the first worker of the run that asks
    for it (the others wait for it): a store every worker needs, ingested once. What a build
    that failed left is made again by the next."""
    import fcntl

    shared = _run_folder(tmp_path_factory) / "built-once"
    shared.mkdir(exist_ok=True)
    out = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            tmp = shared / f"{name}.part"
            if tmp.is_dir():
                shutil.rmtree(tmp)
            else:
                tmp.unlink(missing_ok=True)
            build(tmp)
            tmp.rename(out)
    return out


@pytest.fixture(scope="session")
def nsys_store_file(tmp_path_factory) -> Path:
    """The store file with every nsys fixture ingested, one run per scenario (named after
    it), that the run ingests once (never to be written: copy it). Ingested in two threads
    (tracekit.parallel, whose store equals a serial ingest's: test_parallel.py): the other
    worker waits for it at the run's start, so its core is free."""
    import tracekit
    from tracekit import parallel

    def build(path: Path) -> None:
        with tracekit.open(path) as tk:
            outcomes = parallel.ingest_many(tk, [NSYS_EXPORTS[s] for s in NSYS_SCENARIOS], workers=2)
            for scen, o in zip(NSYS_SCENARIOS, outcomes, strict=True):
                assert o.error is None, o.error
                tk.rename_run(o.result.run_id, scen)

    return built_once(tmp_path_factory, "nsys.duckdb", build)


#: the inference pipeline captured three times with one command (tracekit capture --python-samples;
#: _again and _again2 by the same commit, minutes apart on another machine)
PYTHON_CAPTURES = ("hstu_capture_python", "hstu_capture_python_again", "hstu_capture_python_again2")


@pytest.fixture(scope="session")
def python_captures(tmp_path_factory) -> Path:
    """The store file with the three captures of PYTHON_CAPTURES (named after their folders) and
    backtrace (a capture without Python samples), ingested once per run: open it read-only."""
    import tracekit

    def build(path: Path) -> None:
        with tracekit.open(path) as tk:
            for name in PYTHON_CAPTURES:
                tk.ingest(DATA / name, name=name)
            tk.ingest(NSYS_EXPORTS["backtrace"], name="backtrace")

    return built_once(tmp_path_factory, "python_captures.duckdb", build)


@pytest.fixture(scope="session")
def nsys_db(nsys_store_file, tmp_path_factory):
    """A store with every nsys fixture ingested, one run per scenario (named after it):
    this worker's copy of ``nsys_store_file``."""
    import tracekit

    db = tmp_path_factory.mktemp("store") / "nsys.duckdb"
    shutil.copyfile(nsys_store_file, db)
    tk = tracekit.open(db)
    yield tk
    tk.close()


@pytest.fixture
def page_decoder_off(monkeypatch):
    """The page decoder declines every table, so ingest reads them all through SQLite."""
    from tracekit.ingest import sqlite_ints

    def decline(*args, **kwargs):
        raise sqlite_ints.Unsupported("declined for the test")

    monkeypatch.setattr(sqlite_ints, "read_int_columns", decline)


def compiled_or_numpy(request, monkeypatch, module, attr: str, source: str) -> str:
    """For a fixture with params ["native", "numpy"]: the test runs with the compiled
    helper ``module.attr`` (built from ``source`` at install) and with it set to None,
    the NumPy fallback. A compiled helper missing where a C compiler is present fails."""
    if request.param == "numpy":
        monkeypatch.setattr(module, attr, None)
    elif getattr(module, attr) is None:
        if shutil.which("cc") is None and shutil.which("gcc") is None:
            pytest.skip(f"no C compiler: {source} is not built here")
        pytest.fail(f"{source} was not built although a C compiler is present: "
                    "reinstall (pip install -e .) and read the build output")
    return request.param


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """The HSTU workload under a stand-in profiler on this machine without a GPU: the
    capture's GPU check (``capture.run.check_gpu``) passes and the workload runs on the CPU."""
    from tracekit.capture import runinfo

    monkeypatch.setattr(runinfo, "has_gpu", lambda: True)


@pytest.fixture(scope="module")
def reference_kernels():
    """The HSTU workload's attention through tracekit.kernels' PyTorch references for a whole
    module: the capture tests check runs, folders and tables, not kernels, and get the same
    backend whether or not test_kernels_hstu.py, collected in the same session, has turned
    the Triton interpreter on for it (10-100x slower there; the kernels are tested there)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACEKIT_KERNELS_BACKEND", "reference")
        yield


@pytest.fixture(scope="session")
def _small_store_template(tmp_path_factory):
    """A store file with one real nsys run (capture_range) and one real ncu run (ncu_sections)."""
    import tracekit

    db = tmp_path_factory.mktemp("small") / "small.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(NSYS_EXPORTS["capture_range"], name="nsys_run")
        tk.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="ncu_run")
    return db


@pytest.fixture
def small_store(_small_store_template, tmp_path) -> Path:
    """A fresh copy of the small two-run store (run 1: nsys, run 2: ncu) in tmp_path/store/."""
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "tk.duckdb"
    shutil.copyfile(_small_store_template, db)
    return db


def linked_copy(folder: Path, dest: Path) -> Path:
    """A copy of a committed run folder whose files are links to the committed ones, except
    meta.json, a file of its own to edit: the same run folder under another path, without
    copying its reports."""
    dest.mkdir(parents=True)
    for f in folder.iterdir():
        if f.name == "meta.json":
            shutil.copyfile(f, dest / f.name)
        else:
            (dest / f.name).symlink_to(f.resolve())
    return dest


def sweep_of_manifest(manifest: Path, runs: Path):
    """The ``SweepResult`` a committed sweep manifest records (the HSTU workload's bs x nc points
    or a program's grid values, the sweep it repeats), its run folders where the fixture keeps
    them (``runs``: run_dir as written on the device is not there)."""
    import json

    from tracekit.capture import sweep as sw

    m = json.loads(manifest.read_text())
    points = []
    for p in m["points"]:
        point = (sw.SweepPoint(values=p["values"], status=p["status"]) if "values" in p
                 else sw.SweepPoint(p["bs"], p["nc"], status=p["status"]))
        point.run_dir = str(runs / Path(p["run_dir"]).name)
        points.append(point)
    return sw.SweepResult(m["sweep"], manifest, points, m["settings"]["tool"], m["settings"].get("repeat_of"))


def let_go(tk) -> None:
    """``tk``'s connection and lock released, the object kept for a module's later tests
    (its next call opens the store again; ``close()`` would end it): a test's CLI opens the
    same store file in this process."""
    tk._release()


def store_state(db: Path) -> dict | None:
    """What a store holds, for "the store is unchanged" (None: no store file): every
    table's rows (count and an order-free hash of them), its views and sequences: its
    content, for cases where a write was begun and rolled back (DuckDB may then
    rewrite the file's header); a refusal before any write keeps the bytes too."""
    import duckdb

    if not db.exists():
        return None
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        state = {t: con.execute(f'SELECT count(*), sum(hash(t)) FROM "{t}" t').fetchone() for t in tables}
        state["views"] = con.execute("SELECT list(view_name ORDER BY view_name) FROM duckdb_views() "
                                     "WHERE NOT internal").fetchone()
        state["sequences"] = con.execute("SELECT list((sequence_name, last_value) ORDER BY sequence_name) "
                                         "FROM duckdb_sequences()").fetchone()
        return state
    finally:
        con.close()


def spec_datasets(spec: dict) -> list[list[dict]]:
    """The inline datasets of a Vega-Lite spec (every ``data.values`` in it and its
    ``datasets``), each as its rows; JSON text (a chart's data past
    ``charts.JSON_TEXT_ROWS`` rows) parsed."""
    import json

    out = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("data"), dict) and "values" in node["data"]:
                out.append(node["data"]["values"])
            for k, v in node.items():
                if k == "datasets":
                    out.extend(v.values())
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return [json.loads(d) if isinstance(d, str) else d for d in out]


def edited_export(export: Path, dest: Path, *statements: str) -> Path:
    """The nsys export ``export`` (possibly .xz) written to ``dest``, the SQL ``statements``
    run on it (a capture that lacks, or holds, what the real one did not)."""
    import lzma
    import sqlite3

    dest.parent.mkdir(parents=True, exist_ok=True)
    with (lzma.open if export.suffix == ".xz" else open)(export, "rb") as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(dest)
    try:
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()
    return dest


def captured_again(export: Path, dest: Path) -> Path:
    """The nsys export ``export`` written to ``dest`` with one metadata row more: the same
    events as other content, as a second capture of the program is to the store (a new run,
    not the same one)."""
    return edited_export(export, dest, "INSERT INTO META_DATA_EXPORT (name, value) "
                                       "VALUES ('tracekit-test', 'another capture')")


def through_fifo(fifo: Path, write):
    """Make the FIFO ``fifo`` and call ``write()`` (which writes into it) while a thread
    reads it; returns what ``write`` returned and the bytes read. A ``write`` that never
    opens the pipe does not leave the reader waiting."""
    import os
    import threading

    os.mkfifo(fifo)
    got = [b""]
    reader = threading.Thread(target=lambda: got.__setitem__(0, fifo.read_bytes()))
    reader.start()
    try:
        result = write()
    finally:
        if reader.is_alive():  # nothing opened the pipe for writing: let the reader go
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    return result, got[0]
