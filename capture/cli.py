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

from .run import DEFAULT_ITERS, DEFAULT_WARMUP_MS

_GET_DB: list[Callable[[], Path | None]] = [lambda: None]

ToolOpt = Annotated[str, typer.Option("--tool", help="profiler: nsys, ncu or none (timing only)")]
PresetOpt = Annotated[str | None, typer.Option(
    "--preset", help="workload: small, medium, large (default: large with a GPU, small without)",
    show_default=False)]
WarmupOpt = Annotated[float | None, typer.Option(
    "--warmup-ms", help=f"warm-up time budget, ms (default: {DEFAULT_WARMUP_MS:g})", show_default=False)]
ItersOpt = Annotated[int | None, typer.Option(
    "--iters", help=f"timed requests (default: {DEFAULT_ITERS})", show_default=False)]
OutDirOpt = Annotated[Path, typer.Option("--out", help="folder the run folders go into")]
DbOpt = Annotated[DbPath | None, typer.Option(
    "--db", help="DuckDB store to ingest into (default: $TRACEKIT_DB or ./tracekit.duckdb)",
    show_default=False)]
NoIngestOpt = Annotated[bool, typer.Option("--no-ingest", help="write the run folder only")]


def _db(ctx: typer.Context, db: DbPath | None) -> DbPath | Path | None:
    """The command's --db, else the main CLI's global --db (its root context's), else
    what ``register`` was given."""
    if db is not None:
        return db
    root = ctx.find_root().params.get("db")
    return root if root is not None else _GET_DB[0]()


def capture_cmd(
    ctx: typer.Context,
    bs: Annotated[int, typer.Option("--bs", help="batch size: users per request")] = 8,
    nc: Annotated[int, typer.Option("--nc", help="candidates per user")] = 1024,
    tool: ToolOpt = "nsys",
    preset: PresetOpt = None,
    warmup_ms: WarmupOpt = None,
    iters: ItersOpt = None,
    out: OutDirOpt = Path("runs"),
    db: DbOpt = None,
    name: Annotated[str | None, typer.Option("--name", help="run folder name (default: <utc>-bs<bs>-nc<nc>-<tool>)",
                                             show_default=False)] = None,
    no_ingest: NoIngestOpt = False,
    gpu_metrics: Annotated[bool, typer.Option(
        "--gpu-metrics", help="nsys: sample the GPU's counters too (SM clock, SMs and tensor pipes active, DRAM "
                              "bandwidth): tracekit query nvtx-gpu-metrics; diff reads times against the clock")] = False,
) -> None:
    """Run the HSTU inference workload at one (bs, nc) point under nsys, ncu or none."""
    from .run import capture, summary

    run_dir = capture(bs, nc, tool=tool, preset=preset,
                      warmup_ms=DEFAULT_WARMUP_MS if warmup_ms is None else warmup_ms,
                      iters=DEFAULT_ITERS if iters is None else iters, out_dir=out,
                      db=_db(ctx, db), name=name, ingest=not no_ingest, echo=True,
                      command=list(sys.argv), gpu_metrics=gpu_metrics)
    typer.echo(f"run folder: {run_dir}")
    typer.echo(summary(run_dir, None if no_ingest else _db(ctx, db)))


def sweep_cmd(
    ctx: typer.Context,
    bs: Annotated[str | None, typer.Option("--bs", help="batch sizes, comma-separated, e.g. 1,2,4,8 (default: "
                                           "the --config's grid; one of the two is needed)",
                                           show_default=False)] = None,
    nc: Annotated[str | None, typer.Option("--nc", help="candidate counts, comma-separated, e.g. 128,256,512,1024 "
                                           "(default: the --config's grid)", show_default=False)] = None,
    config: Annotated[str | None, typer.Option(
        "--config", help="sweep preset (quick, full) or YAML file", show_default=False)] = None,
    tool: Annotated[str | None, typer.Option("--tool", help="nsys, ncu or none (default: the --config's, else none)",
                                             show_default=False)] = None,
    preset: PresetOpt = None,
    warmup_ms: Annotated[float | None, typer.Option(
        "--warmup-ms", help=f"warm-up time budget, ms (default: the --config's, else {DEFAULT_WARMUP_MS:g})",
        show_default=False)] = None,
    iters: Annotated[int | None, typer.Option(
        "--iters", help=f"timed requests per point (default: the --config's, else {DEFAULT_ITERS})",
        show_default=False)] = None,
    out: OutDirOpt = Path("runs"),
    db: DbOpt = None,
    no_ingest: Annotated[bool, typer.Option("--no-ingest", help="write the run folders only")] = False,
) -> None:
    """Capture every point of a bs x nc grid (one run folder each); failures are recorded, the sweep goes on."""
    from .sweep import sweep

    def show(point):
        if point.status != "ok":
            typer.echo(f"bs={point.bs} nc={point.nc}: {point.status}: {point.error}", err=True)

    result = sweep(bs, nc, config=config, tool=tool, preset=preset, warmup_ms=warmup_ms, iters=iters,
                   out_dir=out, db=_db(ctx, db), ingest=not no_ingest, progress=True,
                   command=list(sys.argv), on_point=show)
    typer.echo(f"sweep {result.sweep_id}: {len(result.ok)} ok, {len(result.failed)} failed of "
               f"{len(result.points)} points; manifest {result.manifest}")
    if not no_ingest and result.ok:
        typer.echo(latency_table(_db(ctx, db), {Path(p.run_dir).name for p in result.ok}), nl=False)
    if result.failed:
        raise typer.Exit(1)


def latency_table(db: Path | None, runs: set[str], width: int | None = None) -> str:
    """The sweep-latency rows of ``runs`` (this sweep's points) as a terminal table,
    latencies in ms with three decimals."""
    import shutil

    import tracekit
    from tracekit.registry import get_registry
    from tracekit.table import render

    with tracekit.open(db, read_only=True) as tk:
        rows = get_registry().fetch(tk, "sweep-latency", limit=0)
    i = rows.columns.index("run")
    rows.rows = [r for r in rows.rows if r[i] in runs]
    rows = rows.select(["preset", "tool", "bs", "nc", "requests", "median_ms", "p95_ms", "p99_ms", "max_ms"])
    rows.hidden = []  # the hint below says where the rest is
    width = width or shutil.get_terminal_size((120, 24)).columns
    return (render(rows, width=width, timeunit="ms")
            + "every column: tracekit query sweep-latency --all-columns; the spreadsheet: "
              "tracekit export sweep -o results.xlsx\n")


def export_sweep_cmd(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option("--output", "-o", help="results.xlsx or results.csv")],
    sweep: Annotated[str | None, typer.Option(
        "--sweep", help="the sweep: its id, a run of it (id or name), latest or all (every run, the latest per "
        "point) (default: latest)", show_default=False)] = None,
    db: Annotated[DbPath | None, typer.Option(
        "--db", help="DuckDB store to read (default: $TRACEKIT_DB or ./tracekit.duckdb)", show_default=False)] = None,
) -> None:
    """Write one sweep's spreadsheet (.xlsx: summary, bs x nc grid, chart, every request) or CSV."""
    import tracekit

    from .export import export_sweep

    with tracekit.open(_db(ctx, db), read_only=True) as tk:
        written = export_sweep(tk, output, sweep=sweep)
    for path in written:
        typer.echo(f"wrote {path}")


export_app = typer.Typer(help="Export tables.", no_args_is_help=True, add_completion=False)
export_app.command("sweep")(export_sweep_cmd)

app = typer.Typer(help="HSTU inference captures.", no_args_is_help=True, add_completion=False)
app.command("capture")(capture_cmd)
app.command("sweep")(sweep_cmd)
app.add_typer(export_app, name="export")


def register(main_app: typer.Typer, get_db: Callable[[], Path | None] | None = None,
             export_group: typer.Typer | None = None) -> None:
    """Add ``capture`` and ``sweep`` to ``main_app``, and ``sweep`` to its ``export``
    group (``export_group`` when the main CLI has one, else this module's)."""
    if get_db is not None:
        _GET_DB[0] = get_db
    main_app.command("capture")(capture_cmd)
    main_app.command("sweep")(sweep_cmd)
    if export_group is not None:
        export_group.command("sweep")(export_sweep_cmd)
    else:
        main_app.add_typer(export_app, name="export")
