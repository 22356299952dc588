"""The thin CLI over the library: ``tracekit ingest|runs|queries|query|sql|chart|...``.

Library errors (``TracekitError``) become one line on stderr and exit code 2; a
traceback only with ``--debug``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from .errors import ParamError, TracekitError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Capture and analyse Nsight Systems / Nsight Compute profiles of HSTU inference.",
    pretty_exceptions_enable=False,
)

_STATE: dict = {"db": None, "debug": False}

DbOpt = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB store (default: $TRACEKIT_DB or ./tracekit.duckdb)", show_default=False),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, csv, json or parquet")]
OutOpt = Annotated[Path | None, typer.Option("--output", "-o", help="write to FILE instead of stdout")]
FORMATS = ("table", "csv", "json", "parquet")


@app.callback()
def _main(
    db: DbOpt = None,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
):
    _STATE["db"] = db
    _STATE["debug"] = debug


def _open(db: Path | None, read_only: bool = False):
    from . import store

    return store.open(db or _STATE["db"], read_only=read_only)


def _emit(df, fmt: str, out: Path | None, title: str | None = None, store_path: Path | None = None) -> None:
    """Print ``df`` as a table, CSV or JSON, or write it to ``out`` (any format, Parquet
    only to a file) through ``write_output``: never over the store ``store_path``."""
    from .outputs import write_output

    if fmt not in FORMATS:
        raise ParamError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if out is None:
            raise ParamError("--format parquet needs -o FILE")
        write_output(out, df.write_parquet, store_path)
        return
    if fmt == "csv":
        nested = [c for c, t in df.schema.items() if t.is_nested()]
        if nested:
            raise ParamError(f"--format csv: column {nested[0]!r} holds lists or structs, which CSV cannot; "
                             "use --format json or parquet")
        text = df.write_csv()
    elif fmt == "json":
        text = df.write_json()
        text = text if text.endswith("\n") else text + "\n"
    else:
        text = None
    if text is not None:
        if out:
            write_output(out, lambda tmp: tmp.write_text(text), store_path)
        else:
            sys.stdout.write(text)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    from rich.markup import escape

    # escape: '[CUDA memcpy Host-to-Device]' and '[nsys]' are text, not rich markup
    cells = [["" if v is None else (f"{v:,.1f}" if isinstance(v, float) else escape(str(v))) for v in row]
             for row in df.iter_rows()]
    needed = 1
    for i, col in enumerate(df.columns):
        width = max([len(col)] + [len(r[i]) for r in cells])
        if df[col].dtype.is_numeric():  # numbers are never cut or wrapped
            table.add_column(col, justify="right", no_wrap=True, min_width=width)
        else:  # long kernel names: one line each, cut with an ellipsis (csv/json keep them whole)
            width = min(width, 60)
            table.add_column(col, justify="left", no_wrap=True, overflow="ellipsis", max_width=60, min_width=width)
        needed += width + 3
    for r in cells:
        table.add_row(*r)
    # as wide as the table needs: a narrow terminal wraps lines rather than hiding columns
    width = max(needed, shutil.get_terminal_size((120, 24)).columns)

    def render(file=None) -> None:
        console = Console(file=file, width=width)
        console.print(table)
        if df.is_empty():
            console.print("(no rows)")

    if out is None:
        render()
        return

    def write(tmp: Path) -> None:
        with tmp.open("w") as f:
            render(f)

    write_output(out, write, store_path)


def _params(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ParamError(f"--param {p!r}: expected NAME=VALUE")
        k, v = p.split("=", 1)
        out[k.strip()] = v
    return out


@app.command()
def ingest(
    files: Annotated[list[Path], typer.Argument(help="nsys .sqlite/.nsys-rep, ncu .ncu-rep/.csv, or run folders")],
    name: Annotated[str | None, typer.Option("--name", help="run name (default: file stem)")] = None,
    db: DbOpt = None,
):
    """Ingest profiler outputs into the store (one run per file; the same file twice is a no-op)."""
    from .ingest.nsysrep import export_if_needed

    tk = _open(db)
    for f in files:
        with export_if_needed(f) as source:
            res = tk.ingest(source, name=name or (f.name.split(".")[0] if source != f else None))
        if res.skipped:
            typer.echo(f"{f}: already ingested as run {res.run_id} ({res.name})")
        else:
            n = sum(res.rows.values())
            typer.echo(f"{f}: run {res.run_id} ({res.name}, {res.kind}): {n:,} rows")
    tk.close()


@app.command()
def runs(db: DbOpt = None, fmt: FormatOpt = "table", out: OutOpt = None):
    """List the runs in the store with their parameters."""
    tk = _open(db, read_only=True)
    _emit(tk.runs(), fmt, out, "runs", tk.path)


@app.command()
def queries():
    """List the named queries."""
    import polars as pl

    from .registry import get_registry

    reg = get_registry()
    df = pl.DataFrame(
        {
            "name": list(reg.queries),
            "description": [f"[{q.source}] {q.summary}" for q in reg.queries.values()],
        }
    )
    _emit(df, "table", None)


@app.command()
def query(
    name: Annotated[str, typer.Argument(help="query name (see `tracekit queries`)")],
    run: Annotated[str | None, typer.Option("--run", help="run id or name, or 'all' (default: latest)")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="rows; 0 = all")] = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="NAME=VALUE, repeatable")] = [],  # noqa: B006
    fmt: FormatOpt = "table",
    out: OutOpt = None,
    db: DbOpt = None,
):
    """Run a named query."""
    params = _params(param)
    if run is not None:
        params["run"] = run
    if limit is not None:
        params["limit"] = limit
    tk = _open(db, read_only=True)
    _emit(tk.query(name, **params), fmt, out, name, tk.path)


@app.command()
def sql(
    text: Annotated[str, typer.Argument(help="SQL to run (read-only)")],
    fmt: FormatOpt = "table",
    out: OutOpt = None,
    db: DbOpt = None,
):
    """Run ad-hoc read-only SQL against the store."""
    tk = _open(db, read_only=True)
    _emit(tk.sql(text), fmt, out, store_path=tk.path)


@app.command("diff")
def diff_cmd(
    base: Annotated[str, typer.Argument(help="base: run id, run name, sweep id, or a file to ingest")],
    new: Annotated[str, typer.Argument(help="new: run id, run name, sweep id, or a file to ingest")],
    by: Annotated[list[str], typer.Option("--by", help="scope: kernel, nvtx, api, memcpy, gpu, ncu or sweep "
                                          "(repeatable; default: every scope both have)")] = [],  # noqa: B006
    threshold: Annotated[float, typer.Option("--threshold", help="smallest change that counts, %")] = 5.0,
    gate: Annotated[bool, typer.Option("--gate", help="exit 1 when anything regressed (CI)")] = False,
    limit: Annotated[int | None, typer.Option("--limit", help="rows; 0 = all (default: 30 in a table, all otherwise)")] = None,
    fmt: FormatOpt = "table",
    out: OutOpt = None,
    db: DbOpt = None,
):
    """Compare two runs (or two sweeps): what changed, with noise-aware verdicts."""
    from . import diff as _diff

    if limit is not None and limit < 0:
        raise ParamError(f"--limit {limit}: must be >= 0 (0 = all rows)")
    if fmt not in FORMATS:
        raise ParamError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    files = any(_diff._is_file(r) for r in (base, new))
    tk = _open(db, read_only=not files)  # a file to compare is ingested first
    df = tk.diff(base, new, by=by or None, threshold_pct=threshold)
    tk.close()
    regressed = df.filter(df["verdict"] == "regressed").height
    rows = limit if limit is not None else (30 if fmt == "table" else 0)
    shown = df.head(rows) if rows else df
    if fmt == "table":
        _emit(_diff.display(shown), fmt, out, f"diff {base} -> {new}", store_path=tk.path)
        counts = df["verdict"].value_counts(sort=True).rows()
        more = f"; {df.height - shown.height} more rows (--limit 0 for all)" if shown.height < df.height else ""
        typer.echo(", ".join(f"{n} {v}" for v, n in counts) + more)
    else:
        _emit(shown, fmt, out, store_path=tk.path)
    if gate and regressed:
        typer.echo(f"tracekit: gate: {regressed} regressed row(s) beyond {threshold:g}%", err=True)
        raise typer.Exit(1)


@app.command()
def chart(
    name: Annotated[str, typer.Argument(help="chart name: roofline, occupancy, top-kernels, ...")],
    run: Annotated[str | None, typer.Option("--run", help="run id or name (default: latest)")] = None,
    out: Annotated[Path, typer.Option("--output", "-o", help=".html, .png, .svg or .json")] = Path("chart.html"),
    param: Annotated[list[str], typer.Option("--param", "-p", help="NAME=VALUE, repeatable")] = [],  # noqa: B006
    db: DbOpt = None,
):
    """Draw a chart from a named query and save it (format from the file extension)."""
    from . import charts

    tk = _open(db, read_only=True)
    ch = charts.chart(tk, name, run=run, **_params(param))
    charts.save(ch, out, store_path=tk.path)
    typer.echo(f"wrote {out}")


bench_app = typer.Typer(help="Benchmarks of the HSTU kernels (needs torch; a GPU for real figures).")
app.add_typer(bench_app, name="bench")


@bench_app.command("attention")
def bench_attention_cmd(
    config: Annotated[list[str], typer.Option("--config", help="named configuration (repeatable; default: standard set)")] = [],  # noqa: B006
    variants: Annotated[str, typer.Option("--variants", help="comma-separated variants")] = "triton_dense,triton_block_sparse,triton_cached,reference,sdpa",
    baseline: Annotated[str, typer.Option("--baseline", help="variant the speedups are relative to")] = "reference",
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp16 or fp32")] = "bf16",
    warmup_ms: Annotated[float, typer.Option("--warmup-ms", help="warm-up time budget per measurement, ms")] = 100.0,
    rep_ms: Annotated[float, typer.Option("--rep-ms", help="timed budget per measurement, ms")] = 500.0,
    json_path: Annotated[Path | None, typer.Option("--json", help="write results as JSON")] = None,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="write results as CSV")] = None,
    list_configs: Annotated[bool, typer.Option("--list", help="list the named configurations")] = False,
):
    """Time HSTU attention variants (CUDA events, L2 flush, quantiles, TFLOP/s)."""
    if dtype not in ("bf16", "fp16", "fp32"):
        raise ParamError(f"--dtype {dtype!r}: choose bf16, fp16 or fp32")
    from .kernels import bench

    argv = ["--variants", variants, "--baseline", baseline, "--dtype", dtype,
            "--warmup-ms", str(warmup_ms), "--rep-ms", str(rep_ms)]
    for c in config:
        argv += ["--config", c]
    if json_path:
        argv += ["--json", str(json_path)]
    if csv_path:
        argv += ["--csv", str(csv_path)]
    if list_configs:
        argv.append("--list")
    raise typer.Exit(bench.main(argv))


def _register_optional() -> None:
    """Sub-commands that live beside the analysis core: capture, sweep, export sweep."""
    from .capture.cli import register

    register(app, get_db=lambda: _STATE["db"])


_register_optional()


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        # without standalone mode, click returns a command's typer.Exit code instead of raising it
        rc = app(args=args, prog_name="tracekit", standalone_mode=False)
        if isinstance(rc, int):
            return rc
    except TracekitError as err:
        if debug:
            raise
        typer.echo(f"tracekit: error: {err}", err=True)
        return err.exit_code
    except typer.Exit as err:
        return getattr(err, "exit_code", 0)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("tracekit: interrupted", err=True)
        return 130
    except Exception as err:
        if debug:
            raise
        if hasattr(err, "format_message"):  # a usage error from the CLI parser
            typer.echo(f"tracekit: error: {err.format_message().splitlines()[0]}", err=True)
            return 2
        typer.echo(f"tracekit: internal error: {type(err).__name__}: {err} (rerun with --debug)", err=True)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
