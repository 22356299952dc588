"""CLI commands for capture: ``tracekit capture``, ``tracekit sweep``, ``tracekit export sweep``.

The main CLI loads ``app`` and ``export_app`` from here when one of their commands is
invoked; a command without its own ``--db`` uses the main CLI's global ``--db``. Other
Typer apps can add them with ``register(app, get_db)``. Library errors
(``TracekitError``) propagate: the main CLI prints their one line and exits 2. torch is
imported only by the workload process, never here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from tracekit.cli_params import DbPath
from tracekit.errors import Interrupted, QueryError

from .profilers import DEFAULT_LAUNCH_COUNT
from .run import DEFAULT_ITERS, DEFAULT_WARMUP_MS, STOP_GRACE_S

_GET_DB: list[Callable[[], Path | None]] = [lambda: None]

ToolOpt = Annotated[str, typer.Option("--tool", help="profiler: nsys, ncu or none (timing only)")]
PresetOpt = Annotated[str | None, typer.Option(
    "--preset", help="workload: small, medium, large (default: large with a GPU, small without)",
    show_default=False)]
WarmupOpt = Annotated[float | None, typer.Option(
    "--warmup-ms", help=f"warm-up time budget, ms, from the end of the first request (default: {DEFAULT_WARMUP_MS:g})", show_default=False)]
ItersOpt = Annotated[int | None, typer.Option(
    "--iters", help=f"timed requests (default: {DEFAULT_ITERS})", show_default=False)]
OutDirOpt = Annotated[Path, typer.Option("--out", help="folder the run folders go into")]
DbOpt = Annotated[DbPath | None, typer.Option(
    "--db", help="DuckDB store to ingest into (default: $TRACEKIT_DB or ./tracekit.duckdb)",
    show_default=False)]
NoIngestOpt = Annotated[bool, typer.Option("--no-ingest", help="write the run folder only")]
TimeoutOpt = Annotated[float | None, typer.Option(
    "--timeout", help=f"stop the profiler and its program after SECONDS (SIGINT, {STOP_GRACE_S:g} s to write their "
                      "files and end, then killed): the run folder says it timed out, nothing is ingested, exit 2 "
                      "(default: no limit)", metavar="SECONDS", show_default=False)]

GpuMetricsOpt = Annotated[bool, typer.Option(
    "--gpu-metrics", help="nsys: sample the GPU's counters too (SM clock, SMs and tensor pipes active, DRAM "
                          "bandwidth): tracekit query nvtx-gpu-metrics; diff reads times against the clock")]
UmFaultsOpt = Annotated[bool, typer.Option(
    "--um-faults", help="a command under nsys: record Unified Memory's page faults, on the CPU and the GPU "
                        "(nsys --cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true; each fault is "
                        "slowed down): tracekit query um-summary, um-cpu-faults; diff's um scope")]
CpuSamplesOpt = Annotated[bool, typer.Option(
    "--cpu-samples", help="nsys: sample the CPU with call stacks (nsys --sample=process-tree "
                          "--cpuctxsw=process-tree): tracekit query cpu-hotspots, cpu-threads, nvtx-cpu, "
                          "cpu-stacks; chart cpu-flame; export stacks; diff's cpu scope")]
CudaMemoryUsageOpt = Annotated[bool, typer.Option(
    "--cuda-memory-usage", help="nsys: record every allocation and free of GPU memory (nsys "
                                "--cuda-memory-usage=true; each allocation call takes longer): tracekit query "
                                "gpu-memory, gpu-memory-live, nvtx-memory; chart gpu-memory; diff's memory "
                                "scope")]
CudaBacktraceOpt = Annotated[bool, typer.Option(
    "--cuda-backtrace", help="nsys: the call stacks of the CUDA API calls (nsys --cudabacktrace=all, with "
                             "the CPU sampled: which code launches, copies, synchronizes; each call takes "
                             "longer, so time a run without it) and, of a Python program, their Python stacks "
                             "(nsys --python-backtrace=cuda): tracekit query api-stacks")]
PythonSamplesOpt = Annotated[bool, typer.Option(
    "--python-samples", help="nsys: sample the Python threads' stacks, 1,000 times a second (nsys "
                             "--python-sampling=true): tracekit query python-stacks, python-hotspots, "
                             "gpu-idle-python; chart python-flame, timeline; export stacks --python; diff's "
                             "python scope")]
CaptureRangeOpt = Annotated[str | None, typer.Option(
    "--capture-range", help="a command under nsys: none (the whole program, the default) or cudaProfilerApi "
                            "(between cudaProfilerStart and Stop)", show_default=False)]
NvtxCaptureOpt = Annotated[str | None, typer.Option(
    "--nvtx-capture", help="a command: only the NVTX range RANGE (nsys: its first instance; ncu: the kernels "
                           "inside the push/pop range)", metavar="RANGE", show_default=False)]
KernelNameOpt = Annotated[str | None, typer.Option(
    "--kernel-name", help="ncu: only kernels whose function name (ncu's base name: Kernel2 for "
                         "cutlass::Kernel2<...>) matches this regular expression (the HSTU workload's default: "
                         "its embedding, GEMM and attention kernels; '.' profiles every kernel of the request, "
                         "for tracekit query kernel-headroom)",
    metavar="REGEX", show_default=False)]
LaunchCountOpt = Annotated[int | None, typer.Option(
    "--launch-count", help="a command under ncu: profile at most N kernel launches (default: "
                           f"{DEFAULT_LAUNCH_COUNT})", metavar="N", show_default=False)]
ParamOpt = Annotated[list[str] | None, typer.Option(
    "--param", "-p", help="a command: run parameter NAME=VALUE in meta.json's params (e.g. bs=8), repeatable",
    show_default=False)]
ReplayModeOpt = Annotated[str | None, typer.Option(
    "--replay-mode", help="ncu: kernel (each launch replayed in place once per pass, the memory it writes saved "
                          "and restored; the default) or application (the whole program run again once per "
                          "pass, each launch measured in a run of its own: no memory saved and restored; for "
                          "kernels with large inputs or that write their own inputs). Application replay needs a "
                          "deterministic program, the same kernels in the same order every run, and takes "
                          "a run of it per pass (36 with tracekit's sections on an H200): keep it short, and "
                          "set --timeout (ncu may not exit after a failed pass). A program of yours only: the "
                          "HSTU workload takes kernel replay",
    metavar="MODE", show_default=False)]


def _db(ctx: typer.Context, db: DbPath | None) -> DbPath | Path | None:
    """The command's --db, else the main CLI's global --db (its root context's), else
    what ``register`` was given."""
    if db is not None:
        return db
    root = ctx.find_root().params.get("db")
    return root if root is not None else _GET_DB[0]()


def capture_cmd(
    ctx: typer.Context,
    cmd: Annotated[list[str] | None, typer.Argument(
        help="a program to run under the profiler instead of the HSTU workload, after -- "
             "(tracekit capture --tool nsys -- python my_bench.py --bs 8)", show_default=False)] = None,
    bs: Annotated[int | None, typer.Option("--bs", help="HSTU: batch size, users per request (default: 8)",
                                           show_default=False)] = None,
    nc: Annotated[int | None, typer.Option("--nc", help="HSTU: candidates per user (default: 1024)",
                                           show_default=False)] = None,
    tool: ToolOpt = "nsys",
    preset: PresetOpt = None,
    warmup_ms: WarmupOpt = None,
    iters: ItersOpt = None,
    out: OutDirOpt = Path("runs"),
    db: DbOpt = None,
    name: Annotated[str | None, typer.Option(
        "--name", help="run folder name (default: <utc>-bs<bs>-nc<nc>-<tool>; a command's: <utc>-<program>-<tool>)",
        show_default=False)] = None,
    no_ingest: NoIngestOpt = False,
    gpu_metrics: GpuMetricsOpt = False,
    um_faults: UmFaultsOpt = False,
    cpu_samples: CpuSamplesOpt = False,
    cuda_memory_usage: CudaMemoryUsageOpt = False,
    cuda_backtrace: CudaBacktraceOpt = False,
    python_samples: PythonSamplesOpt = False,
    capture_range: CaptureRangeOpt = None,
    nvtx_capture: NvtxCaptureOpt = None,
    kernel_name: KernelNameOpt = None,
    launch_count: LaunchCountOpt = None,
    param: ParamOpt = None,
    replay_mode: ReplayModeOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Run the HSTU inference workload at one (bs, nc) point, or a program of yours
    (after --), under nsys, ncu or none; the run folder is ingested."""
    if cmd:
        _capture_command(ctx, cmd, bs=bs, nc=nc, tool=tool, preset=preset, warmup_ms=warmup_ms, iters=iters,
                         out=out, db=db, name=name, no_ingest=no_ingest, gpu_metrics=gpu_metrics,
                         um_faults=um_faults, cpu_samples=cpu_samples, cuda_memory_usage=cuda_memory_usage,
                         cuda_backtrace=cuda_backtrace, python_samples=python_samples, capture_range=capture_range,
                         nvtx_capture=nvtx_capture, kernel_name=kernel_name, launch_count=launch_count, param=param,
                         replay_mode=replay_mode, timeout=timeout)
        return
    from tracekit.errors import CaptureError

    for opt, value in (("--capture-range", capture_range), ("--nvtx-capture", nvtx_capture),
                       ("--um-faults", um_faults), ("--launch-count", launch_count),
                       ("--param", param)):
        if value:
            raise CaptureError(f"{opt}: an option of a program's capture (tracekit capture {opt} ... -- CMD); "
                               "the HSTU workload does not take it")
    from .run import capture, summary

    run_dir = capture(8 if bs is None else bs, 1024 if nc is None else nc, tool=tool, preset=preset,
                      warmup_ms=warmup_ms, iters=iters, out_dir=out,  # (None: the capture's defaults)
                      db=_db(ctx, db), name=name, ingest=not no_ingest, echo=True,
                      command=list(sys.argv), gpu_metrics=gpu_metrics, cpu_samples=cpu_samples,
                      cuda_memory_usage=cuda_memory_usage, cuda_backtrace=cuda_backtrace,
                      python_samples=python_samples, replay_mode=replay_mode, timeout_s=timeout,
                      ncu_kernel_regex=kernel_name)
    typer.echo(f"run folder: {run_dir}")
    typer.echo(summary(run_dir, None if no_ingest else _db(ctx, db)))


def _capture_command(ctx: typer.Context, cmd: list[str], *, bs, nc, tool, preset, warmup_ms, iters, out, db, name,
                     no_ingest, gpu_metrics, um_faults, cpu_samples, cuda_memory_usage, cuda_backtrace, python_samples,
                     capture_range, nvtx_capture, kernel_name, launch_count, param, replay_mode, timeout) -> None:
    """``tracekit capture [OPTIONS] -- CMD``: the program under the profiler, its run
    folder ingested, a summary printed; the HSTU workload's options are errors."""
    from tracekit.errors import CaptureError

    from .command import capture_command, command_summary, parse_params

    for opt, value in (("--bs", bs), ("--nc", nc), ("--preset", preset), ("--warmup-ms", warmup_ms),
                       ("--iters", iters)):
        if value is not None:
            raise CaptureError(f"{opt}: an option of the HSTU workload, not of a command's capture "
                               "(the program's own arguments go after --)")
    run_dir = capture_command(cmd, tool, out_dir=out, db=_db(ctx, db), name=name, ingest=not no_ingest, echo=True,
                              command=list(sys.argv), params=parse_params(param),
                              capture_range=capture_range or "none", nvtx_capture=nvtx_capture,
                              kernel_regex=kernel_name, launch_count=launch_count, gpu_metrics=gpu_metrics,
                              um_faults=um_faults, cpu_samples=cpu_samples, cuda_memory_usage=cuda_memory_usage,
                              cuda_backtrace=cuda_backtrace, python_samples=python_samples, replay_mode=replay_mode,
                              timeout_s=timeout)
    typer.echo(f"run folder: {run_dir}")
    typer.echo(command_summary(run_dir, None if no_ingest else _db(ctx, db)))


def sweep_cmd(
    ctx: typer.Context,
    cmd: Annotated[list[str] | None, typer.Argument(
        help="a program to run at every point of --grid instead of the HSTU workload, after --, with {NAME} where "
             "each grid parameter's value goes (tracekit sweep --grid m=1024,2048 -- python bench.py --m {m})",
        show_default=False)] = None,
    grid: Annotated[list[str] | None, typer.Option(
        "--grid", help="a program's grid: NAME=VALUE1,VALUE2,... (repeatable; every combination is a point, the "
                       "first parameter's values slowest; each point's values are its run's params)",
        metavar="NAME=V1,V2", show_default=False)] = None,
    bs: Annotated[str | None, typer.Option("--bs", help="batch sizes, comma-separated, e.g. 1,2,4,8 (default: "
                                           "the --config's grid; one of the two is needed)",
                                           show_default=False)] = None,
    nc: Annotated[str | None, typer.Option("--nc", help="candidate counts, comma-separated, e.g. 128,256,512,1024 "
                                           "(default: the --config's grid)", show_default=False)] = None,
    config: Annotated[str | None, typer.Option(
        "--config", help="sweep preset (quick, full) or YAML file (a program's: its command, grid and options)",
        show_default=False)] = None,
    tool: Annotated[str | None, typer.Option("--tool", help="nsys, ncu or none, or several comma-separated (none,nsys,"
                                             "ncu: the grid under each in turn, a sweep each, then where tuning can "
                                             "save time at each point) (default: the --config's, else none; a "
                                             "program's: nsys)", show_default=False)] = None,
    preset: PresetOpt = None,
    warmup_ms: Annotated[float | None, typer.Option(
        "--warmup-ms", help=f"warm-up time budget, ms, from the end of the first request (default: the --config's, "
        f"else {DEFAULT_WARMUP_MS:g})",
        show_default=False)] = None,
    iters: Annotated[int | None, typer.Option(
        "--iters", help=f"timed requests per point (default: the --config's, else {DEFAULT_ITERS})",
        show_default=False)] = None,
    out: OutDirOpt = Path("runs"),
    db: DbOpt = None,
    no_ingest: Annotated[bool, typer.Option("--no-ingest", help="write the run folders only")] = False,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", help=f"per point: stop its profiler and workload after SECONDS (SIGINT, {STOP_GRACE_S:g} s to "
                          "end, then killed): the point is recorded failed, not ingested, and the sweep goes on "
                          "(default: no limit)", metavar="SECONDS", show_default=False)] = None,
    gpu_metrics: GpuMetricsOpt = False,
    um_faults: UmFaultsOpt = False,
    cpu_samples: CpuSamplesOpt = False,
    cuda_memory_usage: CudaMemoryUsageOpt = False,
    cuda_backtrace: CudaBacktraceOpt = False,
    python_samples: PythonSamplesOpt = False,
    capture_range: CaptureRangeOpt = None,
    nvtx_capture: NvtxCaptureOpt = None,
    kernel_name: KernelNameOpt = None,
    launch_count: LaunchCountOpt = None,
    param: ParamOpt = None,
    replay_mode: ReplayModeOpt = None,
    repeat: Annotated[int, typer.Option(
        "--repeat", help="take each profiler's sweep N times in a row, each point a new process every time: the "
                         "noise between processes at each point, which a later sweep's diff must pass (diff "
                         "--repeat)", metavar="N")] = 1,
) -> None:
    """Capture every point of a bs x nc grid of the HSTU workload, or of a --grid of a program of yours
    (after --); one run folder each; failures are recorded, the sweep goes on."""
    from tracekit.errors import CaptureError

    if repeat < 1:
        raise CaptureError(f"--repeat {repeat}: a count of sweeps, 1 or more")

    def show(point):
        if point.status != "ok":
            typer.echo(f"{point.label}: {point.status}: {point.error}", err=True)

    command = {"--capture-range": capture_range, "--nvtx-capture": nvtx_capture, "--kernel-name": kernel_name,
               "--launch-count": launch_count, "--param": param, "--replay-mode": replay_mode,
               "--gpu-metrics": gpu_metrics, "--um-faults": um_faults, "--cpu-samples": cpu_samples,
               "--cuda-memory-usage": cuda_memory_usage, "--cuda-backtrace": cuda_backtrace,
               "--python-samples": python_samples}
    from .sweep import load_config, parse_tools, sweep_each

    tools = parse_tools(tool, config)
    ingest = not no_ingest

    def said(result) -> None:
        typer.echo(f"sweep {result.sweep_id}{f' ({result.tool})' if len(tools) > 1 else ''}: {len(result.ok)} ok, "
                   f"{len(result.failed)} failed of {len(result.points)} point{'' if len(result.points) == 1 else 's'}; "
                   f"manifest {result.manifest}")

    import functools

    configured = functools.cache(lambda: load_config(config) if config is not None else {})  # (read once, when asked)
    workload = not (cmd or "command" in configured())
    if not workload:  # a program's sweep
        for opt, value in (("--bs", bs), ("--nc", nc), ("--preset", preset), ("--warmup-ms", warmup_ms),
                           ("--iters", iters)):
            if value is not None:
                raise CaptureError(f"{opt}: an option of the HSTU workload's sweep, not of a program's (its grid: "
                                   "--grid NAME=V1,V2 and {NAME} in the command)")
        from .command import foreign_option, option_given, parse_params
        from .sweep import sweep_command

        options = {"capture_range": capture_range, "nvtx_capture": nvtx_capture, "kernel_regex": kernel_name,
                   "launch_count": launch_count, "replay_mode": replay_mode, "gpu_metrics": gpu_metrics,
                   "um_faults": um_faults, "cpu_samples": cpu_samples, "cuda_memory_usage": cuda_memory_usage,
                   "cuda_backtrace": cuda_backtrace, "python_samples": python_samples}
        if len(tools) > 1:  # (an option none of the profilers takes, the config's too: refused before any sweep)
            from .sweep import PROGRAM_OPTIONS

            flags = {k: v for k, v in options.items() if option_given(k, v)}
            from_config = {k: v for k, v in configured().get("options", {}).items() if k not in flags}
            refused = foreign_option(tools, {**from_config, **flags},
                                     {arg: f"{config}: {key}" for key, arg in PROGRAM_OPTIONS.items() if arg in from_config})
            if refused:
                raise CaptureError(refused)

        def program_sweep(t, repeat_of=None):
            return sweep_command(cmd or None, grid or None, t, config=config, out_dir=out, db=_db(ctx, db),
                                 ingest=ingest, params=parse_params(param), progress=True, command=list(sys.argv),
                                 timeout_s=timeout, on_point=show, one_of_several=len(tools) > 1,
                                 repeat_of=repeat_of, **options)

        def program_said(result) -> None:
            said(result)
            if ingest and result.ok and result.tool != "none":
                try:
                    typer.echo(grid_table(_db(ctx, db), result.sweep_id, result.tool), nl=False)
                except QueryError as err:  # (the points ran no kernel: the sweep itself is done)
                    typer.echo(f"tracekit: warning: {err}", err=True)

        def run_all():
            return sweep_each(tools, program_sweep, on_sweep=program_said, repeats=repeat)
    else:
        if grid:
            raise CaptureError("--grid: the grid of a program's sweep (tracekit sweep --grid NAME=V1,V2 -- CMD ... "
                               "{NAME}); the HSTU workload's grid is --bs and --nc")
        given = [opt for opt, value in command.items() if value]
        if given:
            raise CaptureError(f"{given[0]}: an option of a program's sweep (tracekit sweep --grid ... {given[0]} ... "
                               "-- CMD); the HSTU workload's sweep does not take it")
        from .sweep import sweep

        def workload_sweep(t, repeat_of=None):
            return sweep(bs, nc, config=config, tool=t, preset=preset, warmup_ms=warmup_ms, iters=iters,
                         out_dir=out, db=_db(ctx, db), ingest=ingest, progress=True,
                         command=list(sys.argv), on_point=show, timeout_s=timeout, repeat_of=repeat_of)

        def run_all():
            return sweep_each(tools, workload_sweep, gpu_device=configured().get("device") or "auto", on_sweep=said,
                              repeats=repeat)
    try:
        results = run_all()
    except Interrupted as err:  # (a Ctrl-C in a later sweep: what those that finished say, then its line)
        if ingest:
            sweeps_end(_db(ctx, db), getattr(err, "finished", []), workload)
        raise
    if ingest:
        sweeps_end(_db(ctx, db), results, workload)
    if any(r.failed for r in results):
        raise typer.Exit(1)


def sweeps_end(db: Path | None, results: list, workload: bool) -> None:
    """What a sweep command prints after its sweeps (``results``, those that finished): the HSTU
    workload's latency table over every sweep's points, then, with an nsys and an ncu sweep of the
    grid, where tuning can save time at each point; with repeats, the noise between them."""
    from .sweep import headroom_by_point, repeat_spread

    if workload and any(r.ok for r in results):
        typer.echo(latency_table(db, results), nl=False)
    by_tool = {r.tool: r for r in results if r.ok and not r.repeat_of}
    if "nsys" in by_tool and "ncu" in by_tool:
        lines = headroom_by_point(db, by_tool["nsys"], by_tool["ncu"])
        if lines:
            typer.echo("\n".join(lines))
    lines = repeat_spread(db, results)
    if lines:
        typer.echo("\n".join(lines))


def latency_table(db: Path | None, results: list, width: int | None = None) -> str:
    """The sweep-latency rows of the ok points of ``results`` (this command's sweeps, one per
    profiler, in order) as one terminal table, latencies in ms with three decimals."""
    import shutil

    import tracekit
    from tracekit.table import render

    from .sweep import latency_rows

    results = [r for r in results if r.ok]
    if not results:
        return ""
    rows = None
    with tracekit.open(db, read_only=True) as tk:
        for result in results:
            runs = {Path(p.run_dir).name for p in result.ok}
            these = latency_rows(tk, result.sweep_id)
            i = these.columns.index("run")
            these.rows = [r for r in these.rows if r[i] in runs]
            if rows is None:
                rows = these
            else:
                rows.rows += these.rows
    again = any(r.repeat_of for r in results)  # (a sweep's repeats: their rows told apart by their runs)
    rows = rows.select(["preset", "tool", "bs", "nc", *(["run"] if again else []), "requests", "median_ms", "p95_ms",
                        "p99_ms", "max_ms"])
    rows.hidden = []  # the hint below says where the rest is
    width = width or shutil.get_terminal_size((120, 24)).columns
    which = " -p sweep=ID (each sweep's id above)" if len(results) > 1 else ""
    ncu = ("under ncu a request's latency is mostly the profiler's (it serialises the launches and replays the "
           "kernels it profiles); the untraced latency is a sweep's under --tool none\n"
           if any(r.tool == "ncu" for r in results) else "")
    return (render(rows, width=width, timeunit="ms") + ncu
            + f"every column: tracekit query sweep-latency{which} --all-columns; the spreadsheet: "
              f"tracekit export sweep{which.replace(' -p sweep=', ' --sweep ')} -o results.xlsx\n")


def grid_table(db: Path | None, sweep_id: str, tool: str = "nsys", width: int | None = None) -> str:
    """The rows of the sweep ``sweep_id`` (a program's) as a terminal table: sweep-points's
    kernel time per point under nsys, sweep-ncu's kernels per point under ncu."""
    import shutil

    import tracekit
    from tracekit.registry import SWEEP_QUERIES, get_registry
    from tracekit.table import render

    query = SWEEP_QUERIES[tool]
    param = "kernel" if tool == "ncu" else "name"  # (each query's parameter of one kernel's name)
    registry = get_registry()
    with tracekit.open(db, read_only=True) as tk:
        rows = registry.fetch(tk, query, points_said=True, sweep=sweep_id)
    rows = rows.select(registry.get(query).display).without_empty()  # (as tracekit query shows it)
    width = width or shutil.get_terminal_size((120, 24)).columns
    chart = "" if tool == "ncu" else "; the chart: tracekit chart sweep-points -o points.html"
    return (render(rows, width=width)
            + f"one kernel across the points: tracekit query {query} -p sweep={sweep_id} -p {param}=TEXT{chart}\n")


def export_sweep_cmd(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option("--output", "-o", help="results.xlsx or results.csv")],
    sweep: Annotated[str | None, typer.Option(
        "--sweep", help="the sweep: its id, a run of it (id or name), latest or all (every run, the one captured "
        "last per point) (default: latest)", show_default=False)] = None,
    db: Annotated[DbPath | None, typer.Option(
        "--db", help="DuckDB store to read (default: $TRACEKIT_DB or ./tracekit.duckdb)", show_default=False)] = None,
) -> None:
    """Write one sweep's spreadsheet (.xlsx: summary, bs x nc grid, chart, every request) or CSV."""
    import tracekit
    from tracekit.cli import capture_warnings

    from .export import export_sweep

    with tracekit.open(_db(ctx, db), read_only=True) as tk, capture_warnings():  # (a line each, as tracekit query)
        written = export_sweep(tk, output, sweep=sweep)
    for path in written:
        typer.echo(f"wrote {path}")


#: ``tracekit capture python my.py --bs 8``: everything from the program on is its own
#: (an option after it is the program's, never capture's), with or without ``--``
CAPTURE_CONTEXT = {"allow_interspersed_args": False}

export_app = typer.Typer(help="Export tables.", no_args_is_help=True, add_completion=False)
export_app.command("sweep")(export_sweep_cmd)

app = typer.Typer(help="HSTU inference captures.", no_args_is_help=True, add_completion=False)
app.command("capture", context_settings=CAPTURE_CONTEXT)(capture_cmd)
app.command("sweep", context_settings=CAPTURE_CONTEXT)(sweep_cmd)
app.add_typer(export_app, name="export")


def register(main_app: typer.Typer, get_db: Callable[[], Path | None] | None = None,
             export_group: typer.Typer | None = None) -> None:
    """Add ``capture`` and ``sweep`` to ``main_app``, and ``sweep`` to its ``export``
    group (``export_group`` when the main CLI has one, else this module's)."""
    if get_db is not None:
        _GET_DB[0] = get_db
    main_app.command("capture", context_settings=CAPTURE_CONTEXT)(capture_cmd)
    main_app.command("sweep", context_settings=CAPTURE_CONTEXT)(sweep_cmd)
    if export_group is not None:
        export_group.command("sweep")(export_sweep_cmd)
    else:
        main_app.add_typer(export_app, name="export")
