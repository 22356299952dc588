"""The thin CLI over the library: ``tracekit ingest|runs|queries|query|sql|chart|...``.

Library errors (``TracekitError``) become one line on stderr and exit code 2; a
traceback only with ``--debug``. Each command imports what it needs when it runs
(``tracekit query`` reads rows through DuckDB alone: no Polars, Arrow or Altair), and
the capture commands live in ``tracekit.capture``, loaded only when one of them is
invoked (``_LAZY``): the analysis CLI never imports capture at start.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import re
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from typer.core import TyperGroup

from . import __version__, cli_params
from .cli_params import DbPath, Ns
from .errors import InputError, Interrupted, ParamError, TracekitError
from .interrupts import SigintWatch, stop_as_ctrl_c, stop_at_once
from .names import escape_controls

#: plain values converted without importing Pydantic (see cli_params); False: a Typer too old
_CONVERTING = cli_params.install()

#: group -> {command: (module, Typer app whose command of that name it is)}; loaded on use
_LAZY: dict[str, dict[str, tuple[str, str]]] = {
    "tracekit": {
        "capture": ("tracekit.capture.cli", "app"),
        "sweep": ("tracekit.capture.cli", "app"),
    },
    "export": {"sweep": ("tracekit.capture.cli", "export_app")},
}


class _LazyGroup(TyperGroup):
    """A command group whose commands are made only when one is invoked, listed in the
    help or needed to name the closest to an unknown one: ``tracekit query`` reads the
    signature and options of one command, not of all (``built_lazily``); and whose
    ``_LAZY`` commands are imported only then too."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: name -> the function making the command or sub-group of that name, in the order
        #: of creation (the help lists them in it)
        self.makers: dict[str, Callable[[], Any]] = {}

    def _lazy(self) -> dict[str, tuple[str, str]]:
        return _LAZY.get(self.name or "", {})

    def list_commands(self, ctx):
        return list(dict.fromkeys([*self.makers, *super().list_commands(ctx), *self._lazy()]))

    def get_command(self, ctx, cmd_name):
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in self.makers:
            cmd = self.commands[cmd_name] = self.makers[cmd_name]()
        elif cmd is None and cmd_name in self._lazy():
            import importlib

            module, attr = self._lazy()[cmd_name]
            built = typer.main.get_command(getattr(importlib.import_module(module), attr))
            # a Typer app of one command builds that command, not a group
            cmd = built.get_command(ctx, cmd_name) if hasattr(built, "get_command") else built
            if cmd is not None:
                self.commands[cmd_name] = cmd
        elif cmd is None:
            # an unknown name: every command made, for the parser's closest names
            for name, make in self.makers.items():
                if name not in self.commands:
                    self.commands[name] = make()
        return cmd


def built_lazily(typer_app: typer.Typer) -> _LazyGroup:
    """``typer_app`` (of class ``_LazyGroup``) as the click group that parses its command
    lines, its own options made now and its commands and sub-groups when first asked for
    (``_LazyGroup.get_command``)."""
    shell = copy.copy(typer_app)  # (the group's callback and settings, none of its commands)
    shell.registered_commands, shell.registered_groups = [], []
    group = typer.main.get_command(shell)
    settings = {"pretty_exceptions_short": typer_app.pretty_exceptions_short,
                "rich_markup_mode": typer_app.rich_markup_mode}
    makers: dict[str, Callable[[], Any]] = {}
    for info in typer_app.registered_commands:
        name = info.name or typer.main.get_command_name(info.callback.__name__)
        makers[name] = functools.partial(typer.main.get_command_from_info, info, **settings)
    for info in typer_app.registered_groups:
        makers[info.name] = functools.partial(typer.main.get_group_from_info, info, **settings,
                                              suggest_commands=typer_app.suggest_commands)
    group.makers = makers
    return group


app = typer.Typer(
    cls=_LazyGroup,
    name="tracekit",
    add_completion=False,
    no_args_is_help=True,
    help="Capture and analyse Nsight Systems / Nsight Compute profiles of HSTU inference.",
    pretty_exceptions_enable=False,
)

_STATE: dict = {"db": None, "debug": False, "opened": []}

DbOpt = Annotated[
    DbPath | None,
    typer.Option("--db", help="DuckDB store (default: $TRACEKIT_DB or ./tracekit.duckdb)", show_default=False),
]
FormatOpt = Annotated[str | None, typer.Option(
    "--format", "-f", help="table, csv, tsv, json, parquet or xlsx (default: from -o FILE's extension, .csv, .tsv, "
    ".json, .parquet or .xlsx; a table otherwise, also for -o FILE of another extension)", show_default=False)]
OutOpt = Annotated[Path | None, typer.Option("--output", "-o", help="write to FILE instead of stdout (- is stdout); "
                                             "its extension picks the format when -f is not given")]
ColumnsOpt = Annotated[str | None, typer.Option(
    "--columns", help="columns to show, comma-separated (every format)", show_default=False)]
AllColumnsOpt = Annotated[bool, typer.Option("--all-columns", help="table: every column, not the query's default few")]
TimeunitOpt = Annotated[str, typer.Option(
    "--timeunit", help="table: unit of the time columns: auto, ns, us, ms or s (csv/json/parquet/xlsx keep ns)")]
WorkersOpt = Annotated[int | None, typer.Option(
    "--workers", help="ingest the files given (a sweep's run folders, a job folder's exports) N at once, in N "
    "threads, each run committed as it lands (with --jobs the rank pairs compared in threads too); a comparison "
    "that fails removes the runs it added (default: one after another, in one transaction)", show_default=False)]
FORMATS = ("table", "csv", "tsv", "json", "parquet", "xlsx")
#: the text formats of rows: written part by part (``_TextParts``), gzip-compressed where -o ends in .gz
TEXT_FORMATS = ("csv", "tsv", "json")
#: rows of a row group of a Parquet output written in parts (``_emit_each``): Parquet readers
#: read a file of few large groups fastest; pyarrow writes a group of 1 M rows in one go
PARQUET_GROUP_ROWS = 1 << 20
SQL_TABLE_ROWS = 1000  # `tracekit sql` shows at most this many rows as a table


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tracekit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    db: DbOpt = None,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
    version: Annotated[bool, typer.Option("--version", help="print the version and exit",
                                          callback=_version, is_eager=True)] = False,
):
    _STATE["db"] = db
    _STATE["debug"] = debug


def _open(db: DbPath | None, read_only: bool = False):
    from . import store

    tk = store.open(db if db is not None else _STATE["db"], read_only=read_only)
    _STATE["opened"].append(tk)  # (what a Ctrl-C leaves in it is said: _interrupted_line)
    return tk


def _interrupted_line() -> str:
    """The line of a Ctrl-C that stopped the command: what a comparison that ended before
    it (its rows being written, the store closed) ingested and kept, if anything."""
    for tk in _STATE.get("opened", []):
        kept = getattr(tk, "comparison_kept", [])
        if len(kept) == 1:
            return (f"interrupted after the comparison; the run it ingested is kept in {tk.path} (run {kept[0]}; "
                    "tracekit runs rm removes it)")
        if kept:
            ids = f"{kept[0]}-{kept[-1]}" if kept[-1] - kept[0] == len(kept) - 1 else ", ".join(map(str, kept))
            return (f"interrupted after the comparison; the {len(kept)} runs it ingested are kept in {tk.path} "
                    f"(runs {ids}; tracekit runs rm removes them)")
    return "interrupted"


#: output file extension -> the format it means where -f is not given
FORMAT_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".parquet": "parquet", ".xlsx": "xlsx"}


def _format(fmt: str | None, out: Path | None) -> str:
    """The format asked (``-f``), else the one ``-o FILE``'s extension names (``tk.parquet``
    is Parquet, not a text table in a file so named), else a table: an output of another
    extension (``top.txt``) or none is the terminal table, as it always was. A name ending
    in ``.gz`` is gzip-compressed CSV, TSV or JSON (``top.csv.gz``; ``_write``), else an error: the
    name says compressed, and a table or Parquet would not be; so is a format that another
    known extension's name contradicts (``-f csv -o top.xlsx``)."""
    from .outputs import output_suffix

    suffix = output_suffix(out, FORMAT_EXTENSIONS) if out is not None and str(out) != "-" else None
    if suffix == ".gz":
        inner = FORMAT_EXTENSIONS.get(Path(out).with_suffix("").suffix.lower())
        fmt = fmt or inner
        if fmt not in TEXT_FORMATS:
            raise ParamError(f"-o {out}: a .gz output is gzip-compressed CSV, TSV or JSON: name it results.csv.gz, "
                             "results.tsv.gz or results.json.gz, or give -f csv, -f tsv or -f json"
                             + ("" if fmt is None else f" ({fmt.upper()} is not written compressed)"))
        return fmt
    named = FORMAT_EXTENSIONS.get(suffix)
    if fmt in FORMATS and named is not None and named != fmt:  # (a .xlsx file of CSV text opens as no workbook)
        other = next((ext for ext, f in FORMAT_EXTENSIONS.items() if f == fmt), None)
        raise ParamError(f"-f {fmt} -o {out}: the file's name says {named}; "
                         + (f"name it {Path(out).with_suffix(other).name} or " if other else "")
                         + "leave out -f (the name's extension says the format)")
    if fmt is not None:
        return fmt
    return FORMAT_EXTENSIONS.get(suffix, "table")


def _check_format(fmt: str, out: Path | None) -> None:
    if fmt not in FORMATS:
        raise ParamError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt in ("parquet", "xlsx") and out is None:
        raise ParamError(f"--format {fmt} needs -o FILE")


def _check_timeunit(timeunit: str) -> None:
    """--timeunit checked whatever the format (csv/json/parquet/xlsx keep ns, but a bad value is
    still a bad value)."""
    from .table import check_timeunit

    check_timeunit(timeunit)


def _columns(text: str | None, all_columns: bool = False) -> list[str] | None:
    """--columns as a list (None: not given); given with --all-columns, one line."""
    if text is None:
        return None
    if all_columns:
        raise ParamError("--columns and --all-columns: give one (--columns names the columns shown, --all-columns "
                         "shows every one)")
    cols = [c.strip() for c in text.split(",") if c.strip()]
    if not cols:
        raise ParamError("--columns: name at least one column (e.g. --columns name,total_ns)")
    twice = [c for i, c in enumerate(cols) if c in cols[:i]]
    if twice:
        raise ParamError(f"--columns: {twice[0]!r} named twice")
    return cols


def _write(text: str, out: Path | None, store_path: Path | None) -> None:
    """``text`` to stdout, or to ``out`` (``_write_stream``)."""
    _write_stream(lambda f: f.write(text), out, store_path)


def _write_stream(produce: Callable[[TextIO], object], out: Path | None, store_path: Path | None) -> None:
    """What ``produce(f)`` writes to the text stream ``f``, to stdout, or to ``out`` through
    ``write_output``: a temporary file renamed into place, never over the store ``store_path``;
    gzip-compressed where ``out``'s name ends in ``.gz`` (``_format``)."""
    if not out:
        produce(sys.stdout)
        return
    from .outputs import text_file, write_output

    gz = str(out) != "-" and Path(out).suffix.lower() == ".gz"

    def write_file(tmp: Path) -> None:
        with text_file(tmp, gz) as f:
            produce(f)

    write_output(out, write_file, store_path)


def _wrote(out: Path, line: str) -> None:
    """The line that says what was written: on stderr where the output is a stream (``-o -``,
    ``/dev/stdout``, a pipe), so that it does not end up in the data."""
    from .outputs import is_stream

    typer.echo(escape_controls(line), err=is_stream(out))  # (a file's name, a range's: one line, shown)


def _emit(df, fmt: str, out: Path | None, columns: list[str] | None = None,
          store_path: Path | None = None, title: str = "table") -> None:
    """A Polars DataFrame in ``fmt``: complete and unformatted, except for a table."""
    _emit_each(lambda each: each(df), fmt, out, columns, store_path, title)


def _emit_each(read: Callable[[Callable], object], fmt: str, out: Path | None, columns: list[str] | None = None,
               store_path: Path | None = None, title: str = "table") -> None:
    """One result, which ``read(each)`` hands to ``each`` in parts (Polars DataFrames of one
    schema: ``Tracekit.sql_each``), in ``fmt``: CSV, JSON and Parquet written part by part as
    they come (a result larger than memory is never held), a table and xlsx made of the whole;
    complete and unformatted, except for a table."""
    _check_format(fmt, out)

    def shaped(df):
        if columns is not None:
            from .table import Rows

            # (one line for an unknown column; a time column named as the table shows it, total_ms: total_ns)
            df = df.select(Rows(list(df.columns), [str(t) for t in df.dtypes], []).select(columns).columns)
        if fmt in TEXT_FORMATS:
            from .outputs import plain_columns

            df = plain_columns(df, fmt, None if fmt == "json" else fmt.upper())
        return df

    if fmt in ("table", "xlsx"):
        import polars as pl

        parts: list = []
        read(parts.append)
        df = shaped(pl.concat(parts) if len(parts) > 1 else parts[0])
        if fmt == "table":
            _show(_table_rows(df), out, store_path=store_path)
            return
        from . import xlsx
        from .outputs import write_output

        df = xlsx.cells(df)  # (its errors before a file is made)
        write_output(out, lambda tmp: xlsx.write(df, tmp, title), store_path)
    elif fmt == "parquet":
        from .outputs import write_output

        def write_parquet(tmp: Path) -> None:
            import polars as pl
            import pyarrow.parquet as pq

            # parts gathered into row groups of PARQUET_GROUP_ROWS; a result of one group is
            # written by Polars, as a whole frame always was (its writer encodes smaller)
            writer, group = None, []

            def flush(last: bool) -> None:
                nonlocal writer
                df = pl.concat(group) if len(group) > 1 else group[0]
                group.clear()
                if writer is None and last:
                    df.write_parquet(tmp)
                    return
                table = df.to_arrow()
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
                writer.write_table(table, row_group_size=PARQUET_GROUP_ROWS)

            def each(df) -> None:
                group.append(shaped(df))
                if sum(part.height for part in group) >= PARQUET_GROUP_ROWS:
                    flush(last=False)

            try:
                read(each)
                if group:
                    flush(last=True)
            finally:
                if writer is not None:
                    writer.close()

        write_output(out, write_parquet, store_path)
    else:
        def produce(f: TextIO) -> None:
            parts = _TextParts(f, fmt, shaped)
            read(parts)
            parts.close()

        _write_stream(produce, out, store_path)


class _TextParts:
    """``each`` of ``_emit_each`` for CSV, TSV or JSON: each part of one result as text on
    ``f``, CSV's (TSV's) header once and JSON's rows in one array, ended by ``close``."""

    def __init__(self, f: TextIO, fmt: str, shaped: Callable):
        self.f, self.fmt, self.shaped = f, fmt, shaped
        self.parts = self.rows = 0
        self.last = ""

    def __call__(self, df) -> None:
        import polars as pl

        df = self.shaped(df)
        try:
            text = df.write_json() if self.fmt == "json" else \
                df.write_csv(include_header=not self.parts, separator="\t" if self.fmt == "tsv" else ",")
        except BaseException as err:  # Polars's errors, and its panics (pyo3's PanicException: a BaseException)
            if not (isinstance(err, pl.exceptions.PolarsError) or type(err).__name__ == "PanicException"):
                raise
            raise ParamError(f"--format {self.fmt}: the result cannot be written as {self.fmt.upper()} "
                             f"({str(err).splitlines()[0]}); use --format parquet") from None
        if self.fmt == "json":  # (the part's rows, without its array's brackets)
            rows = text[text.index("[") + 1:text.rindex("]")]
            text = ("" if self.parts else "[") + ("," if rows and self.rows else "") + rows
            self.rows += df.height
        self.parts += 1
        self.write(text)

    def close(self) -> None:
        if self.fmt == "json":
            self.write("]" if self.parts else "[]")
        if self.last != "\n":
            self.write("\n")

    def write(self, text: str) -> None:
        if text:
            self.f.write(text)
            self.last = text[-1]


def _table_rows(df):
    """A Polars DataFrame as ``table.Rows``; a value Polars cannot hand to Python (it panics)
    is a one-line error. (Dates and times Python cannot hold, DuckDB's infinite timestamps
    among them, come as DuckDB's text already: ``Tracekit.frame``.)"""
    from .table import Rows

    try:
        return Rows.from_polars(df)
    except BaseException as err:  # pyo3's PanicException is a BaseException
        if type(err).__name__ != "PanicException":
            raise
        raise ParamError(f"--format table: the result cannot be shown as a table ({str(err).splitlines()[0]}); "
                         "use --format parquet, or cast the column in the SQL (e.g. col::VARCHAR)") from None


def _show(rows, out: Path | None, display: list[str] | None = None, columns: list[str] | None = None,
          all_columns: bool = False, timeunit: str = "auto", more: str | None = None,
          store_path: Path | None = None) -> None:
    """Render ``rows`` (a ``table.Rows``) as a terminal table: ``columns`` if given, else
    every column with ``all_columns``, else ``display`` (a query's @display) if any, less
    the display columns that hold no value in any row (such as a query's columns of
    another mode: ncu-source's instruction by line), which the footer names. Where the
    result names metrics the report lacks (an ncu query's ``missing_metrics``), a line
    says so, and where to read which."""
    from .table import render

    lacking = ""
    if columns is not None:
        rows = rows.select(columns)
    elif display and not all_columns:
        full, rows = rows, rows.select(display).without_empty()
        at = full.columns.index("missing_metrics") if "missing_metrics" in full.columns else None
        if rows.empty and at is not None and any(r[at] for r in full.rows):
            lacking = "the report lacks metrics (--columns missing_metrics names them)\n"
    width = shutil.get_terminal_size((120, 24)).columns if out is None else 10**6
    _write(render(rows, width=width, timeunit=timeunit, more=more) + lacking, out, store_path)


def _runs_shown(params: dict, rows, display: list[str]) -> list[str]:
    """A query's @display, with ``run_id`` first where it was asked of every run (``--run all``
    of an ncu query): kernel 0 of one report and kernel 0 of another are told apart (always,
    not only where the rows shown happen to hold two runs: the columns do not change with
    --limit)."""
    every = str(params.get("run", "")).strip().lower() == "all"
    if not every or not display or "run_id" in display or "run_id" not in rows.columns:
        return display
    return ["run_id", *display]


def _with_options(params: dict[str, Any], **options: Any) -> dict[str, Any]:
    """``params`` (``-p``) with the options given (``--run``, ``--limit``); one given both
    ways with two values is an error."""
    for key, value in options.items():
        if value is None:
            continue
        if key in params and not _same_value(key, params[key], value):
            raise ParamError(f"--{key} {value} and -p {key}={params[key]}: give the {key} once")
        params[key] = value
    return params


def _same_value(key: str, given: Any, option: Any) -> bool:
    """Whether ``-p KEY=given`` says what ``--KEY option`` does: the same text, or for the
    limit the same whole number however it is written (1,000 and 1000)."""
    if str(given).strip() == str(option).strip():
        return True
    if key != "limit":  # (a run's name is text: "1,000" may name a run)
        return False
    from .numbers import whole_number

    try:
        return whole_number(str(given)) == whole_number(str(option))
    except ValueError:
        return False


def _params(pairs: list[str]) -> dict[str, str]:
    """``-p NAME=VALUE`` pairs as a dict; a name given twice with two values is an error
    (the last one would win without a word)."""
    out: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise ParamError(f"--param {p!r}: expected NAME=VALUE")
        k, v = p.split("=", 1)
        k = k.strip()
        if not k:
            raise ParamError(f"--param {p!r}: expected NAME=VALUE (the name is empty)")
        if k in out and out[k].strip() != v.strip():
            raise ParamError(f"--param {k}: given twice ({k}={out[k]}, {k}={v}); give it once")
        out[k] = v
    return out


@app.command()
def ingest(
    files: Annotated[list[Path], typer.Argument(
        help="nsys .sqlite/.nsys-rep, ncu .ncu-rep/.csv, run folders, or folders of run folders (a sweep's), "
        "benchmark logs (benchmark_bs8_nc1024.log)")],
    name: Annotated[str | None, typer.Option(
        "--name", help="run name; renames a run already ingested (default: the file's stem or the run "
        "folder's name, qualified by its folder, b/export, where a run or another file of the command has it "
        "too, then numbered, b/export-2)")] = None,
    param: Annotated[list[str], typer.Option(
        "--param", "-p", help="run parameter NAME=VALUE (e.g. rank=3), repeatable; set when a run is first "
        "ingested")] = [],  # noqa: B006
    workers: Annotated[int | None, typer.Option(
        "--workers", help="ingest N files at once, in N threads of this process (with --scheduler or "
        "$DASK_SCHEDULER_ADDRESS: on that Dask cluster)")] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="prepare the files on an existing Dask cluster, by scheduler address "
        "($DASK_SCHEDULER_ADDRESS does the same; needs tracekit\\[dask])")] = None,
    db: DbOpt = None,
):
    """Ingest profiler outputs into the store (one run per file; the same content twice is the same run)."""
    from .ingest import not_a_file_why, run_folders
    from .store import check_utf8_path

    params = _params(param) or None
    for f in files:  # (a pipe would be read until its writer ends, if ever; an export needs seeking)
        if (why := not_a_file_why(f)) is not None:
            raise InputError(why)
        check_utf8_path(f)
    warned = _SameWarnings(files)  # (a thousand ranks' exports that lack one thing: a few lines, then a count)
    with capture_warnings(said=warned):  # (a sweep's point whose capture failed and left nothing: said, left out)
        given, files = files, run_folders(files)  # (a sweep's folder: its points' run folders)
    from .parallel import check_one_run

    check_one_run(len(files), name, params,
                  f"{len(files)} given" if len(given) > 1 else f"{given[0]} holds {len(files)} run folders")
    if name is not None and files:  # (checked here once: the many-file paths read inputs before a name is)
        from .names import asked_run_name

        name = asked_run_name(name, files[0])
    if workers is not None or scheduler is not None:
        landed: list = []
        try:
            with warned, capture_warnings(said=warned), _open(db) as tk:
                _ingest_distributed(tk, files, workers, scheduler, name, params, landed)
        except KeyboardInterrupt:  # (after the files: printing, closing the store; during them, ingest_many says)
            from .parallel import interrupted_line

            raise Interrupted(interrupted_line(len(landed), len(files), "store")) from None
        return
    tk, f, failed, added, kept = None, None, 0, [], 0  # (kept: files before f that are in the store)
    try:
        with warned, _open(db) as tk, tk.one_command(files):
            for f in files:
                kept += tk.last_ingest is not None
                tk.last_ingest = None
                try:
                    with capture_warnings(said=warned):  # (what an export lacks and is left out of it: a line each)
                        res = tk.ingest(f, name=name, params=params)
                except InputError as err:  # a file that cannot be ingested: say so, go on with the others
                    if len(files) == 1:
                        raise
                    from .parallel import error_line

                    failed += 1
                    typer.echo(f"tracekit: error: {escape_controls(error_line(str(f), err))}", err=True)
                    continue
                _echo_result(f, res)
                if not res.skipped:
                    added.append(res.run_id)
            _say_captures(tk, added)
    except (KeyboardInterrupt, Interrupted):  # also outside tk.ingest: printing, closing
        if tk is None or f is None:
            raise Interrupted("interrupted; not ingested, nothing was written") from None
        stopped = tk.interrupted(f)
        if len(files) == 1:
            raise stopped from None
        kept += tk.last_ingest is not None
        raise Interrupted(f"{stopped}; {kept} of the {len(files)} files are in the store") from None
    if failed:
        raise TracekitError(_not_ingested(failed, len(files)))


class _SameWarnings:
    """The warning lines of one command over many files (``capture_warnings``): a text said
    of several of them (``FILE: text``, FILE one of ``files`` or in one of their folders) is
    shown for the first ``SHOWN`` files, then counted; on leaving, one line says how many more
    files it was said of, and the first and last of them in the order given."""

    SHOWN = 3

    def __init__(self, files):
        self.order = {Path(os.path.realpath(f)): i for i, f in enumerate(files)}  # (realpath: a link loop is no error)
        self.more: dict[str, list[tuple[int, str]]] = {}
        self.shown: dict[str, int] = {}

    def show(self, message: str) -> bool:
        """Whether to show ``message`` now (else it is counted)."""
        file, sep, text = message.partition(": ")
        try:  # (a message that names no file: "run 3 (r3) holds ...")
            at = Path(os.path.realpath(file)) if sep and os.path.lexists(file) else None
        except ValueError:  # (a NUL in it)
            at = None
        given = next((self.order[p] for p in (at, *at.parents) if p in self.order), None) if at else None
        if given is None:
            return True
        self.shown[text] = self.shown.get(text, 0) + 1
        if self.shown[text] <= self.SHOWN:
            return True
        self.more.setdefault(text, []).append((given, file))
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        for text, files in self.more.items():
            files.sort()
            which = files[0][1] if len(files) == 1 else f"{files[0][1]} ... {files[-1][1]}"
            typer.echo(f"tracekit: warning: {len(files):,} more file{'s' if len(files) > 1 else ''} ({which}): "
                       f"{escape_controls(text)}", err=True)


@contextlib.contextmanager
def capture_warnings(comparison: bool = False, said: _SameWarnings | None = None):
    """Comparisons that use a run whose capture failed warn (``CaptureWarning``): one
    ``tracekit: warning:`` line each on stderr (a text said twice, of both sides of
    ``diff A A``, once; ``said``: a text said of many files, of the first few, then
    counted); other warnings as Python shows them. ``comparison``: a comparison
    that fails says its error alone, not the warnings given meanwhile (those of the files it
    ingested first, whose runs it removes again, among them)."""
    import warnings

    from .errors import CaptureWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CaptureWarning)
        failed = False
        try:
            yield
        except TracekitError as err:
            failed = comparison and not isinstance(err, Interrupted)
            raise
        finally:
            seen = set()
            for w in caught:
                if issubclass(w.category, CaptureWarning):
                    if failed:
                        continue
                    if str(w.message) not in seen and (said is None or said.show(str(w.message))):
                        typer.echo(f"tracekit: warning: {escape_controls(str(w.message))}", err=True)
                    seen.add(str(w.message))
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _say_captures(tk, run_ids: list[int]) -> None:
    """A line per job of which runs just ingested are another capture, or took the place
    of a rank's earlier run (``registry.captures_said``)."""
    from .registry import captures_said

    for kind, line in captures_said(tk, run_ids) if run_ids else []:
        typer.echo(f"tracekit: {kind}: {escape_controls(line)}", err=True)


def _not_ingested(failed: int, files: int) -> str:
    """The closing error of an ingest some of whose files failed."""
    if failed == files:
        return f"none of the {files} files ingested (errors above); nothing landed"
    return f"{failed} of {files} files not ingested (errors above); the others landed"


def _echo_result(f, res) -> None:
    f = escape_controls(str(f))  # a file's name cannot break the line or move the cursor
    if res.skipped:
        renamed = f", renamed from {res.renamed_from!r}" if res.renamed_from is not None else ""
        typer.echo(f"{f}: already ingested as run {res.run_id} ({res.name}{renamed})")
        return
    n = sum(res.rows.values())
    replaced = ", in place of the same capture ingested before" if res.replaced else ""
    if res.absorbed:  # (its export ingested alone as well: one capture, one run)
        many = len(res.absorbed) > 1
        replaced += (f"; run{'s' if many else ''} {', '.join(map(str, res.absorbed))}, of the same capture, "
                     f"{'are' if many else 'is'} removed")
    typer.echo(f"{f}: run {res.run_id} ({res.name}, {res.kind}): {n:,} rows{replaced}")
    if res.status not in (None, "ok"):  # a capture that failed or was stopped still lands: say so
        why = f" ({escape_controls(res.error)})" if res.error else ""
        typer.echo(f"{f}: warning: the capture's status is {escape_controls(res.status)!r}{why}; its rows are kept, "
                   "but the sweep queries (sweep-latency, sweep-kernels, sweep-points, sweep-ncu) and sweep diffs leave "
                   "the run out", err=True)


def _ingest_distributed(tk, files, workers, scheduler, name, params, landed: list) -> None:
    """Many files at once: in threads here (tracekit.parallel), or prepared on a Dask
    cluster given by address and landed here (tracekit.distributed); a failing file is
    reported and the others land (exit 2 when any failed). ``landed``: each file's result
    as it lands."""
    from contextlib import nullcontext

    from . import parallel
    from .progress import progress_bar

    here = scheduler is None and not os.environ.get("DASK_SCHEDULER_ADDRESS")
    if here:
        parallel.check_workers(workers, " (or --scheduler ADDRESS)")  # (one line before anything is opened)

    bar = progress_bar()
    failed, added = [], []

    def report(o) -> None:
        if o.error is not None:
            failed.append(o)
            typer.echo(f"tracekit: error: {escape_controls(o.error)}", err=True)
        else:
            landed.append(o.result)
            _echo_result(o.source, o.result)
            if not o.result.skipped:
                added.append(o.result.run_id)
        if bar is not None:
            bar.advance(task)

    with bar if bar is not None else nullcontext():
        task = bar.add_task("ingest", total=len(files)) if bar is not None else None
        if here:
            parallel.ingest_many(tk, files, workers=workers, name=name, params=params, on_outcome=report)
        else:
            from . import distributed

            distributed.ingest_many(tk, files, workers=workers, scheduler=scheduler, name=name, params=params,
                                    on_outcome=report)
    _say_captures(tk, added)
    if failed:
        raise TracekitError(_not_ingested(len(failed), len(files)))


runs_app = typer.Typer(help="List the runs in the store; rename or remove one.", invoke_without_command=True)
app.add_typer(runs_app, name="runs")


@runs_app.callback()
def runs(
    ctx: typer.Context,
    db: DbOpt = None,
    fmt: FormatOpt = None,
    out: OutOpt = None,
    columns: ColumnsOpt = None,
    all_columns: AllColumnsOpt = False,
):
    """List the runs in the store with their parameters (rename, rm: see below)."""
    if ctx.invoked_subcommand is not None:
        return
    _query_out("runs", {"limit": 0}, _format(fmt, out), out, _columns(columns, all_columns), all_columns, "auto", db)


@runs_app.command("rename")
def runs_rename(
    run: Annotated[str, typer.Argument(help="run id or name")],
    new_name: Annotated[str, typer.Argument(help="the run's new name")],
    db: DbOpt = None,
):
    """Give a run a new name."""
    with _open(db) as tk:
        run_id, old = tk.rename_run(run, new_name)
    typer.echo(f"run {run_id}: renamed {old!r} to {new_name.strip()!r}")


@runs_app.command("rm")
def runs_rm(
    run: Annotated[list[str], typer.Argument(help="run ids or names")],
    db: DbOpt = None,
):
    """Remove runs and all their rows from the store."""
    with _open(db) as tk:
        # every reference resolved before anything is removed: a bad one removes nothing
        ids = list(dict.fromkeys(tk.resolve(r)[0] for r in run))
        for run_id in ids:
            run_id, name = tk.remove_run(run_id)
            typer.echo(f"removed run {run_id} ({name})")


@app.command()
def queries(
    name: Annotated[str | None, typer.Argument(help="a query: show its parameters and columns",
                                               show_default=False)] = None,
):
    """List the named queries, or describe one."""
    import textwrap

    from .registry import get_registry

    reg = get_registry()
    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    if name is None:
        key_w = max(map(len, reg.queries)) + 2
        for q in reg.queries.values():
            text = f"[{q.source}] {q.summary}"
            lines = textwrap.wrap(text, max(width - key_w, 30)) or [""]
            typer.echo(f"{q.name.ljust(key_w)}{lines[0]}")
            for line in lines[1:]:
                typer.echo(" " * key_w + line)
        typer.echo("\ntracekit queries NAME: its parameters and columns; tracekit query NAME: run it")
        return
    q = reg.get(name)
    wrap = textwrap.TextWrapper(width=width, subsequent_indent="  ", initial_indent="  ")
    also = [a + (f" ({', '.join(f'{k}={v}' for k, v in q.alias_params[a].items())})" if a in q.alias_params else "")
            for a in q.aliases]
    typer.echo(f"{q.name}  [{q.source}]" + (f"  (also: {', '.join(also)})" if also else ""))
    typer.echo(wrap.fill(" ".join(q.description.split())))
    if q.params:
        opts = [f"--{o}" for o in ("run", "limit") if o in q.params] + ["-p NAME=VALUE"]  # the options it takes
        typer.echo(f"\nparameters ({', '.join(opts[:-1])}{',' if len(opts) > 2 else ''}"
                   f"{' or ' if len(opts) > 1 else ''}{opts[-1]}):")
        key_w = max(map(len, q.params)) + 2
        for p in q.params.values():
            default = p.default if p.default is not None else "none"
            doc = _DEFAULT_TEXT.sub("", p.doc).strip()
            typer.echo(textwrap.fill(f"{p.name.ljust(key_w)}{p.type.lower():8} {doc} (default: {default})", width,
                                     initial_indent="  ", subsequent_indent=" " * (key_w + 11)))
    typer.echo("\ncolumns (* shown in a table by default; csv/json/parquet/xlsx carry all):")
    key_w = max(map(len, q.columns)) + 2
    for c, doc in q.columns.items():
        mark = "*" if c in q.display or not q.display else " "
        typer.echo(textwrap.fill(f"{mark} {c.ljust(key_w)}{doc}", width,
                                 initial_indent="  ", subsequent_indent=" " * (key_w + 4)))
    if q.requires:
        typer.echo(f"\nneeds tables: {', '.join(q.requires)}")


_DEFAULT_TEXT = re.compile(r"\s*\(default:[^)]*\)")


@app.command()
def charts():
    """List the charts, the query each is drawn from and the run it needs."""
    import textwrap

    from .charts import CHARTS
    from .registry import RUN_KINDS, get_registry

    reg = get_registry()
    needs = {"nsys": "an nsys run", "ncu": "an ncu run", "runs": "runs of a sweep"}
    width = min(shutil.get_terminal_size((100, 24)).columns, 100)  # (as `tracekit queries` wraps)
    key_w = max(map(len, CHARTS)) + 2
    for name, spec in CHARTS.items():
        if spec.query is None:  # drawn from a computation, not from one named query
            source = spec.source
        else:
            q = reg.get(spec.query)
            more = [needs[k] for k in RUN_KINDS if k in q.params and k in needs]  # (a second run: -p ncu=)
            source = f"query {spec.query}, needs {' and '.join([needs.get(q.source, q.source), *more])}"
        lines = textwrap.wrap(f"{spec.description}; {source}", max(width - key_w, 30), break_on_hyphens=False)
        typer.echo(f"{name.ljust(key_w)}{lines[0]}")
        for line in lines[1:]:
            typer.echo(" " * key_w + line)
    typer.echo("\ntracekit chart NAME [--run R] -o FILE.html|.png|.svg|.json")


def _query_out(name: str, params: dict, fmt: str, out: Path | None, columns: list[str] | None,
               all_columns: bool, timeunit: str, db: DbPath | None) -> None:
    from .registry import get_registry

    _check_format(fmt, out)
    reg = get_registry()
    # --limit of a query that returns a few rows and takes no limit (comm-overlap, run-info):
    # the first rows of its answer, as for any other
    cut = params.pop("limit", None) if "limit" not in reg.get(name).params else None
    if cut is not None:
        from .registry import Param

        cut = Param("limit", "INTEGER", "", None, minimum=0).convert(cut, name)  # (a query's limit's checks)
    wrote = f"wrote {out}"
    with _open(db, read_only=True) as tk, capture_warnings():
        if fmt != "table":
            df = tk.query(name, **params)
            total = df.height if cut else reg.total(tk, name, df.height, **reg.with_alias(name, params))
            df = df.head(cut) if cut else df
            _emit(df, fmt, out, columns, tk.path, title=name)
            if total > df.height:  # the limit cut the rows: said, as a table says it
                wrote += f": {df.height:,} of {total:,} rows (--limit 0 for all)"
        else:
            rows = reg.fetch(tk, name, **params)
            if cut and len(rows.rows) > cut:
                rows.total, rows.rows = len(rows.rows), rows.rows[:cut]
            _show(rows, out, _runs_shown(params, rows, reg.get(name).display), columns, all_columns, timeunit,
                  more="--limit 0 for all", store_path=tk.path)
    if out is not None:  # as chart and export say what they wrote
        _wrote(out, wrote)


@app.command()
def query(
    name: Annotated[str, typer.Argument(help="query name (see `tracekit queries`) or its nsys stats report name")],
    run: Annotated[str | None, typer.Option("--run", help="run id or name, or 'all' (default: latest)")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="rows; 0 = all (default: the query's, `tracekit queries NAME` says it)")] = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="NAME=VALUE, repeatable")] = [],  # noqa: B006
    fmt: FormatOpt = None,
    out: OutOpt = None,
    columns: ColumnsOpt = None,
    all_columns: AllColumnsOpt = False,
    timeunit: TimeunitOpt = "auto",
    db: DbOpt = None,
):
    """Run a named query (a table shows the query's main columns in human units)."""
    _check_timeunit(timeunit)
    params = _with_options(_params(param), run=run, limit=limit)
    _query_out(name, params, _format(fmt, out), out, _columns(columns, all_columns), all_columns, timeunit, db)


@app.command()
def sql(
    text: Annotated[str, typer.Argument(help="SQL to run (read-only)")],
    fmt: FormatOpt = None,
    out: OutOpt = None,
    columns: ColumnsOpt = None,
    timeunit: TimeunitOpt = "auto",
    db: DbOpt = None,
):
    """Run ad-hoc read-only SQL against the store."""
    _check_timeunit(timeunit)
    fmt = _format(fmt, out)
    _check_format(fmt, out)
    with _open(db, read_only=True) as tk:  # (never the whole result held: a huge one is counted, or written in parts)
        if fmt != "table":
            _emit_each(lambda each: tk.sql_each(text, each), fmt, out, _columns(columns), tk.path, title="sql")
        else:
            df, total = tk.sql_head(text, rows=SQL_TABLE_ROWS)
    if fmt == "table" and not df.width:
        typer.echo("done: the last statement returns no result set (a SELECT returns rows)")
        return
    if fmt == "table":
        rows = _table_rows(df)
        rows.total = total
        _show(rows, out, columns=_columns(columns), timeunit=timeunit,
              more="-f csv for all, or LIMIT in the SQL", store_path=tk.path)
    if out is not None:
        _wrote(out, f"wrote {out}")


@app.command("diff")
def diff_cmd(
    base: Annotated[str, typer.Argument(help="base: run id, run name, sweep id, or a file, run folder or sweep's "
                                                "folder to ingest")],
    new: Annotated[str, typer.Argument(help="new: run id, run name, sweep id, or a file, run folder or sweep's "
                                                "folder to ingest")],
    by: Annotated[list[str], typer.Option("--by", help="scope: kernel, nvtx, api, memcpy, gpu, um (Unified Memory "
                                          "page faults), cpu (sampled CPU time by function), python (sampled Python time by "
                                          "function, not judged), memory (GPU memory "
                                          "allocated, at its peak, left allocated), ncu, source (ncu's Source "
                                          "Counters per kernel and source line; only when asked), bench (tracekit "
                                          "bench's time per call) or sweep (request "
                                          "latency per bs x nc point, of sweeps or captures; with --jobs: job, "
                                          "kernel, nvtx, api, memcpy, gpu, um, cpu, python or memory; repeatable; default: "
                                          "every scope both have)")] = [],  # noqa: B006
    threshold: Annotated[float, typer.Option("--threshold", help="smallest change that counts, % (request latency, "
                                             "and host time between runs without CUDA: 25 at least, a p95 "
                                             "latency 45, a memory operation's time 10, Unified Memory page "
                                             "faults 35, sampled CPU time 25, the noise of identical runs; an "
                                             "ncu value: 0.5 us + "
                                             "3 % of its launch's duration at least)")] = 5.0,
    repeat: Annotated[list[str], typer.Option("--repeat", help="a capture of the base's program again (repeatable): "
                                              "a change no larger than a repeat's is not judged a change "
                                              "(noise_pct; with --jobs: a job, its change on each rank)")] = [],  # noqa: B006
    no_repeats: Annotated[bool, typer.Option("--no-repeats", help="judge without the repeats that a sweep taken "
                                             "again (tracekit sweep --repeat) has in the store, which are used "
                                             "where no --repeat is given")] = False,
    gate: Annotated[bool, typer.Option("--gate", help="exit 1 when anything regressed (CI)")] = False,
    jobs: Annotated[bool, typer.Option("--jobs", help="base and new are multi-rank jobs (any rank's run, the "
                                       "job: tracekit query jobs, or the folder of its exports, ingested first), "
                                       "compared rank by rank: a row per key for "
                                       "the job, how many ranks moved, and the job scope (per NVTX path, the "
                                       "slowest rank's time)")] = False,
    per_rank: Annotated[bool, typer.Option("--per-rank", help="with --jobs: each rank's own rows (rank column)")] = False,
    workers: WorkersOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", help="rows: every row judged changed, then the largest "
                                              "unchanged ones up to N rows in all; 0 = all (default: 30 in a table, "
                                              "all otherwise)")] = None,
    fmt: FormatOpt = None,
    out: OutOpt = None,
    columns: ColumnsOpt = None,
    all_columns: AllColumnsOpt = False,
    db: DbOpt = None,
):
    """Compare two runs (or two sweeps, or two multi-rank jobs): what changed, with noise-aware verdicts."""
    from . import diff as _diff

    if limit is not None and limit < 0:
        raise ParamError(f"--limit {limit}: must be >= 0 (0 = all rows)")
    if per_rank and not jobs:
        raise ParamError("--per-rank: compares jobs rank by rank; give --jobs too")
    _check_workers(workers)
    fmt = _format(fmt, out)
    _check_format(fmt, out)
    repeats = _repeats_asked(repeat, no_repeats)
    if jobs:
        _diff_jobs(base, new, repeat, by, threshold, per_rank, gate, limit, fmt, out, _columns(columns, all_columns),
                   all_columns, db, workers)
        return
    cols = _columns(columns, all_columns)
    if cols is not None and fmt == "table":
        cols = _table_names(cols)

    def check_columns(noise: bool) -> None:  # the columns of the table (values in human units) or of the files
        import polars as pl

        from .table import Rows

        empty = pl.DataFrame(schema={**_diff.SCHEMA, **({"noise_pct": pl.Float64} if noise else {})})
        have = _diff.display(empty) if fmt == "table" else empty
        Rows(list(have.columns), [str(t) for t in have.dtypes], []).select(cols)  # one line for an unknown one

    if cols is not None:
        check_columns(noise=True)  # (before any store is opened; the repeats it may hold: below)
    # a file to compare is ingested first; a path that holds nothing to ingest is said as one
    # where the store is not there yet (not as a missing store: a store it creates goes again)
    files = any(_diff._is_file(r) or _diff._exists(r) for r in (base, new, *repeat))
    with _open(db, read_only=not files) as tk:
        if out is not None:  # checked before a file is ingested: an output that cannot be written changes nothing
            from .outputs import check_output

            check_output(out, tk.path)
        if cols is not None and not repeat:  # (noise: where repeats measured it, given or the sweep's in the store)
            check_columns(noise=not no_repeats and bool(tk.stored_repeats(base, [new], "diff", quiet=True)))
        from .progress import steps

        with capture_warnings(comparison=True), steps() as step:
            df = tk.diff(base, new, by=by or None, threshold_pct=threshold, repeats=repeats, workers=workers,
                         on_file=step("files ingested"))
        _say_stand_ins(tk, base, [new], "diff", by)
    _diff_out(df, _diff.display, _diff.display_columns(df), _diff.moved, _diff.held_by_repeats(df), threshold, gate,
              limit, fmt, out, cols, all_columns, tk.path)


def _say_stand_ins(tk, base: str, runs: list[str], command: str, by: list[str]) -> None:
    """A ``tracekit: note:`` line for each pair compared where a side stood for another than
    its column names (``diff.stand_in``): a program's sweep by its run at the run's point, a
    sweep's run by its whole sweep in the sweep scope."""
    from .diff import stand_in

    for run in runs:
        line = stand_in(tk, base, run, by or None)
        if line:
            typer.echo(f"tracekit: note: {command}: " + (f"{escape_controls(run)}: " if command == "compare" else "")
                       + escape_controls(line), err=True)


def _table_names(cols: list[str]) -> list[str]:
    """A comparison's ``--columns`` as its table names them: the file formats' names of the
    table's columns (``delta_pct``, ``p_value``, ``noise_pct``) are the same ones."""
    return list(dict.fromkeys({"delta_pct": "delta", "p_value": "p", "noise_pct": "noise"}.get(c, c) for c in cols))


def _diff_out(df, display, columns: list[str], moved, held: str, threshold: float, gate: bool, limit: int | None,
              fmt: str, out: Path | None, cols: list[str] | None, all_columns: bool, store_path: Path) -> None:
    """A comparison's rows (``diff``'s, or ``diff --jobs``'s) as the command shows them: a
    table of every change then the largest unchanged rows (``display``: its cells;
    ``columns``: those shown), the verdicts counted (``held``: what repeats held), what
    moved (``moved``: its lines); or the file formats, the same rows (``limit``: every change,
    then the largest others up to that many; all by default). ``gate``: exit 1 where a row
    regressed, naming the limits it passed."""
    from . import diff as _diff

    rows = limit if limit is not None else (30 if fmt == "table" else 0)
    if fmt == "table":
        from .table import Rows

        shown = _diff.changes_first(df, rows)  # every change, then the largest unchanged rows
        cells = display(shown, df)  # (keys told apart from every key)
        table = Rows.from_polars(cells)
        labels = _diff.short_keys(df)
        table.shorteners = {"key": _diff.label_shortener(df, labels)}  # (an ncu key its kernel, then its NVTX path's end)
        table.floors = {"key": _diff.key_floor(df, labels)}  # (a key that says what it is, else a block per row)
        _show(table, out, display=columns, columns=cols, all_columns=all_columns, store_path=store_path)
        counts = _diff.verdict_counts(df)  # (as the table shows them)
        more = (f"; {df.height - shown.height} more rows, none judged a change (--limit 0 for all)"
                if shown.height < df.height else "")
        typer.echo(", ".join(f"{n} {v}" for v, n in counts) + more + held)
        summary = moved(df)
        if summary:
            typer.echo("what moved:\n" + "\n".join(f"  {escape_controls(line)}" for line in summary))
    else:
        _emit(_diff.changes_first(df, rows), fmt, out, cols, store_path=store_path, title="diff")  # (as the table)
    if out is not None:
        _wrote(out, f"wrote {out}")
    regressed = df.filter(df["verdict"] == "regressed")
    if gate and regressed.height:
        limits = sorted({_diff.limit(scope, metric, threshold, True)[0]  # (a regressed row was judged)
                         for scope, metric in regressed.select("scope", "metric").unique().iter_rows()})
        typer.echo(f"tracekit: gate: {regressed.height} regressed row(s) beyond "
                   f"{' or '.join(f'{x:g}%' for x in limits)}", err=True)
        raise typer.Exit(1)


def _repeats_asked(repeat: list[str], no_repeats: bool) -> list[str] | None:
    """``--repeat``/``--no-repeats`` of ``diff``, ``compare`` and ``report`` as ``repeats``: those
    given; none (an empty list) with ``--no-repeats``; None (the store's, where it holds some)
    without either. Both at once is one line."""
    if repeat and no_repeats:
        raise ParamError("--no-repeats: and --repeat: give one of the two")
    return repeat or ([] if no_repeats else None)


def _check_workers(workers: int | None) -> None:
    """``--workers`` of ``diff`` and ``compare``: at least 1 (one line before anything is opened)."""
    if workers is not None:
        from .parallel import check_workers

        check_workers(workers)


def _diff_jobs(base: str, new: str, repeat: list[str], by: list[str], threshold: float, per_rank: bool, gate: bool,
               limit: int | None, fmt: str, out: Path | None, cols: list[str] | None, all_columns: bool,
               db: DbPath | None, workers: int | None) -> None:
    """``tracekit diff --jobs``: two jobs rank by rank (``tracekit.job_diff``)."""
    from . import diff as _diff
    from . import job_diff

    folders = any(job_diff.is_job_folder(r) for r in (base, new, *repeat))
    with _open(db, read_only=not folders) as tk:  # (a job's folder: its exports are ingested first)
        if out is not None:  # checked before an export is ingested: an output that cannot be written changes nothing
            from .outputs import check_output

            check_output(out, tk.path)
        if cols is not None:  # (one line for an unknown column, before the comparison)
            import polars as pl

            from .table import Rows

            noise = {"noise_pct": pl.Float64} if repeat else {}
            empty = pl.DataFrame(schema={**_diff.SCHEMA, "rank": pl.Int64, **noise} if per_rank else
                                 {**job_diff.SCHEMA, **noise})
            if fmt == "table":
                cols = _table_names(cols)
                empty = _per_rank_display(empty) if per_rank else job_diff.display(empty)
            Rows(list(empty.columns), [str(t) for t in empty.dtypes], []).select(cols)
        from .progress import steps

        # (a job of many ranks takes a while: 0.12 s a rank pair at 64 ranks on 2 cores)
        with capture_warnings(comparison=True), steps() as step:
            df = tk.diff_jobs(base, new, by=by or None, threshold_pct=threshold, per_rank=per_rank,
                              on_rank=step("ranks compared"), repeats=repeat or None, workers=workers,
                              on_file=step("files ingested"))
    if per_rank:
        _diff_out(df, _per_rank_display, ["rank", *_diff.display_columns(df)], lambda _: [], _diff.held_by_repeats(df),
                  threshold, gate, limit, fmt, out, cols, all_columns, tk.path)
    else:
        _diff_out(df, job_diff.display, job_diff.display_columns(df), job_diff.moved, _diff.held_by_repeats(df),
                  threshold, gate, limit, fmt, out, cols, all_columns, tk.path)


def _per_rank_display(df, among=None):
    """``diff --jobs --per-rank``'s table: diff's, with each row's rank."""
    from . import diff as _diff

    return _diff.display(df, among).with_columns(df["rank"].cast(str))


@app.command("compare")
def compare_cmd(
    base: Annotated[str, typer.Argument(help="base: run id, run name, sweep id, or a file, run folder or sweep's "
                                             "folder to ingest")],
    runs: Annotated[list[str], typer.Argument(help="runs (or sweeps, files) to compare with the base, each "
                                                   "against it as `tracekit diff BASE RUN` would")],
    by: Annotated[list[str], typer.Option("--by", help="scope: kernel, nvtx, api, memcpy, gpu, um, cpu, python, memory, ncu, source, bench or "
                                          "sweep (repeatable; default: every scope the base and each run have, "
                                          "source only when asked)")] = [],  # noqa: B006
    threshold: Annotated[float, typer.Option("--threshold", help="smallest change that counts, % (as diff's, "
                                             "with its noise floors)")] = 5.0,
    repeat: Annotated[list[str], typer.Option("--repeat", help="a capture of the base's program again (repeatable): "
                                              "a run's change no larger than a repeat's is not judged a change")] = [],  # noqa: B006
    no_repeats: Annotated[bool, typer.Option("--no-repeats", help="judge without the repeats that a sweep taken "
                                             "again (tracekit sweep --repeat) has in the store, which are used "
                                             "where no --repeat is given")] = False,
    gate: Annotated[bool, typer.Option("--gate", help="exit 1 when anything regressed in any run but the repeats "
                                       "(CI)")] = False,
    jobs: Annotated[bool, typer.Option("--jobs", help="the base, runs and repeats are multi-rank jobs (any rank's "
                                       "run, the job, or the folder of its exports), each against the base job "
                                       "as `tracekit diff --jobs BASE JOB` would")] = False,
    workers: WorkersOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", help="keys: every key changed in a run, then unchanged "
                                              "keys up to this many in all; 0 = all (default: 30 in a table, all "
                                              "otherwise)")] = None,
    fmt: FormatOpt = None,
    out: OutOpt = None,
    db: DbOpt = None,
):
    """Compare several runs with one base, side by side: a value and a noise-aware change per run.

    The table has a row per key and metric; csv/json/parquet/xlsx hold a row per key, metric
    and run (diff's columns, with run and value)."""
    from . import compare as _compare
    from .diff import _exists, _is_file
    from .job_diff import is_job_folder

    if limit is not None and limit < 0:
        raise ParamError(f"--limit {limit}: must be >= 0 (0 = all rows)")
    _check_workers(workers)
    repeats = _repeats_asked(repeat, no_repeats)
    fmt = _format(fmt, out)
    _check_format(fmt, out)
    given = (base, *repeat, *runs)
    files = any(is_job_folder(r) for r in given) if jobs else any(_is_file(r) or _exists(r) for r in given)
    with _open(db, read_only=not files) as tk:  # files (a job's folder) to compare are ingested first
        if out is not None:  # checked before a file is ingested
            from .outputs import check_output

            check_output(out, tk.path)
        from .progress import steps

        with capture_warnings(comparison=True), steps() as step:
            df = tk.compare(base, runs, by=by or None, threshold_pct=threshold, repeats=repeats, jobs=jobs,
                            workers=workers, on_file=step("files ingested"))
        if not jobs:
            _say_stand_ins(tk, base, runs, "compare", by)
    keys = limit if limit is not None else (30 if fmt == "table" else 0)
    if fmt == "table":
        table = _compare.table(df, keys)
        _show(table, out, store_path=tk.path)
        shown = len(table.rows)
        every = df.select("scope", "key", "metric").unique().height
        more = f" ({every - shown} more rows, none judged a change in any run: --limit 0 for all)" if shown < every else ""
        typer.echo("; ".join(_compare.counts(df)) + more)
    else:
        shown = _compare.changed_first(df, keys) if keys else df
        _emit(shown, fmt, out, store_path=tk.path, title="compare")
    if out is not None:
        _wrote(out, f"wrote {out}")
    judged = df.filter((df["verdict"] == "regressed") & ~df["repeat"])  # (a repeat's are the base's noise)
    if gate and judged.height:
        typer.echo(f"tracekit: gate: {judged.height} regressed row(s) in {judged['run'].n_unique()} run(s)", err=True)
        raise typer.Exit(1)


@app.command()
def chart(
    name: Annotated[str, typer.Argument(help="chart name: roofline, occupancy, top-kernels, ...")],
    run: Annotated[str | None, typer.Option("--run", help="run id or name (default: latest)")] = None,
    out: Annotated[Path, typer.Option("--output", "-o", help=".html, .png, .svg or .json")] = Path("chart.html"),
    param: Annotated[list[str], typer.Option("--param", "-p", help="NAME=VALUE, repeatable")] = [],  # noqa: B006
    no_repeats: Annotated[bool, typer.Option("--no-repeats", help="a comparison's chart (diff, compare, the "
                                             "rooflines compared) judged without the repeats that a sweep taken "
                                             "again (tracekit sweep --repeat) has in the store, which are used "
                                             "where no -p repeats= is given")] = False,
    db: DbOpt = None,
):
    """Draw a chart from a named query and save it (format from the file extension)."""
    from . import charts

    params = _with_options(_params(param), run=run)
    if no_repeats:  # (as diff's --repeat and --no-repeats: one of the two)
        if "repeats" in params:
            raise ParamError("--no-repeats: and -p repeats=: give one of the two")
        params["repeats"] = []
    # (chart diff: a setup difference is one warning line, as for tracekit diff)
    with _open(db, read_only=True) as tk, capture_warnings():
        ch = charts.chart(tk, name, **params)
    charts.save(ch, out, store_path=tk.path)
    _wrote(out, f"wrote {out}")


@app.command()
def report(
    run: Annotated[list[str] | None, typer.Option("--run", help="run id or name (default: latest); repeatable: "
                                                  "several runs in one page (a point timed, under nsys, under ncu)")] = None,
    vs: Annotated[str | None, typer.Option("--vs", help="compare with this run, sweep or file (tracekit diff BASE RUN; "
                                           "several --run: tracekit compare BASE RUN RUN ...; ranks of jobs: "
                                           "the jobs compared too, diff --jobs, compare --jobs)")] = None,
    repeat: Annotated[list[str], typer.Option("--repeat", help="with --vs: a capture of the base again (repeatable), "
                                              "the noise a change must pass (tracekit diff --repeat)")] = [],  # noqa: B006
    no_repeats: Annotated[bool, typer.Option("--no-repeats", help="with --vs: judge without the repeats that a sweep "
                                             "taken again (tracekit sweep --repeat) has in the store, which are used "
                                             "where no --repeat is given")] = False,
    out: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write; - for stdout")] = Path("report.html"),
    db: DbOpt = None,
):
    """Write one self-contained HTML report of a run (nsys, ncu or a sweep point), or of several; opens offline."""
    from .diff import _is_file
    from .report import write_report

    repeats = _repeats_asked(repeat, no_repeats)
    with capture_warnings():
        files = vs is not None and any(_is_file(r) for r in (vs, *repeat))  # (a file is ingested)
        with _open(db, read_only=not files) as tk:
            write_report(tk, out, run=run or None, vs=vs, repeats=repeats)
    _wrote(out, f"wrote {out}")


export_app = typer.Typer(cls=_LazyGroup, name="export", no_args_is_help=True,
                         help="Export a run: a timeline for Perfetto, CPU stacks for a flame graph, a Parquet dataset, "
                              "the sweep spreadsheet.")
app.add_typer(export_app, name="export")


@export_app.command("trace")
def export_trace_cmd(
    out: Annotated[Path, typer.Option("--output", "-o", help="trace.json.gz (gzip) or trace.json; - for stdout (JSON)")] = Path("trace.json.gz"),
    run: Annotated[str | None, typer.Option("--run", help="nsys run id or name (default: latest)")] = None,
    start_ns: Annotated[Ns | None, typer.Option("--from", help="window start, ns on the capture's clock "
                                                           "(12,100,481 as tables print it works)")] = None,
    end_ns: Annotated[Ns | None, typer.Option("--to", help="window end, ns on the capture's clock")] = None,
    nvtx: Annotated[str | None, typer.Option("--nvtx", help="window: an NVTX range ('hstu.request' or ':hstu.request')")] = None,
    instance: Annotated[int | None, typer.Option("--instance", help="which range of that name, 1 = the first")] = None,
    force: Annotated[bool, typer.Option("--force", help="write even when the JSON would exceed 100 MB")] = False,
    osrt: Annotated[bool, typer.Option("--osrt", help="with the OS runtime calls (poll, ioctl, waits): a track per thread")] = False,
    gpu_metrics: Annotated[bool, typer.Option("--gpu-metrics", help="with counter tracks of the GPU's sampled counters "
                                                                    "(SM clock, SMs and tensor pipes active, DRAM)")] = False,
    ranks: Annotated[str | None, typer.Option("--ranks", help="the run's job in one timeline: its ranks (all, or e.g. "
                                                              "0-3,7), on one clock (each capture's start)")] = None,
    db: DbOpt = None,
):
    """Write the run's timeline in the Chrome Trace Event format (open it in ui.perfetto.dev)."""
    from .names import ranks_text
    from .trace import export_trace

    with _open(db, read_only=True) as tk:
        res = export_trace(tk, out, run=run, start_ns=start_ns, end_ns=end_ns, nvtx=nvtx, instance=instance,
                           force=force, osrt=osrt, gpu_metrics=gpu_metrics, ranks=ranks)
    events = ", ".join(f"{n:,} {k}" for k, n in res.counts.items() if n)
    what = (f"run {res.run_id}" if ranks is None else
            f"{ranks_text([x.rank for x in res.parts])} of run {res.run_id}'s job")
    _wrote(out, f"wrote {out}: {what}, {res.window.label}: {events or 'no events'}")


@export_app.command("stacks")
def export_stacks_cmd(
    out: Annotated[Path, typer.Option("--output", "-o", help="folded-stacks file to write: stacks.folded, or "
                                                             "stacks.folded.gz (gzip); - for stdout")] = Path("stacks.folded"),
    run: Annotated[str | None, typer.Option("--run", help="nsys run id or name (default: latest)")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="only this thread's samples: its tid or name")] = None,
    nvtx: Annotated[str | None, typer.Option("--nvtx", help="only samples inside NVTX ranges of this name on their "
                                                            "thread ('step' or ':step')")] = None,
    python: Annotated[bool, typer.Option("--python", help="the Python samples' stacks (nsys --python-sampling), "
                                                          "not the CPU samples'")] = False,
    db: DbOpt = None,
):
    """Write the run's sampled CPU call stacks (or Python stacks: --python), folded (`a;b;c 12` a line), for
    flamegraph.pl, speedscope or inferno. A selection that holds no sample is an error, not an empty file."""
    from .stacks import export_stacks

    with _open(db, read_only=True) as tk:
        res = export_stacks(tk, out, run=run, thread=thread, range=nvtx, python=python)
    _wrote(out, f"wrote {out}: run {res.run_id}, {res.stacks:,} stacks of {res.samples:,} samples")


@export_app.command("parquet")
def export_parquet(
    out: Annotated[Path, typer.Option("--output", "-o", help="dataset folder to write (new or empty)")],
    run: Annotated[str, typer.Option("--run", help="run id or name, or 'all'")] = "all",
    db: DbOpt = None,
):
    """Write the store as a Hive-partitioned Parquet dataset (DIR/_kernels/run_id=3/part-0.parquet,
    ..., DIR/runs.parquet) that `tracekit --db DIR query ...`, Dask, Spark or Trino read."""
    from . import dataset

    with _open(db, read_only=True) as tk:
        if isinstance(tk, dataset.Dataset):
            raise ParamError(f"--db {tk.path}: is a dataset already; export from a DuckDB store")
        if str(out) == "-":
            raise ParamError("-o -: a dataset is a folder of files, not a stream; name a new or empty folder")
        ids = dataset.export(tk, out, run)
    _wrote(out, f"wrote {out}: {len(ids)} run{'s' if len(ids) != 1 else ''}")


bench_app = typer.Typer(help="Benchmarks of the HSTU kernels (needs torch; a GPU for real figures).")
app.add_typer(bench_app, name="bench")


@bench_app.command("attention")
def bench_attention_cmd(
    config: Annotated[list[str], typer.Option("--config", help="named configuration (repeatable; default: standard set)")] = [],  # noqa: B006
    variants: Annotated[str, typer.Option("--variants", help="comma-separated variants: ours (an unknown name "
                                          "lists them) or yours, NAME=FILE.py:FUNCTION or NAME=MODULE:FUNCTION, "
                                          "called as tracekit.kernels.api.hstu_attention")] = "triton_dense,triton_block_sparse,triton_cached,reference,sdpa",
    baseline: Annotated[str, typer.Option("--baseline", help="variant the speedups are relative to (one of yours "
                                          "by its NAME)")] = "reference",
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp16 or fp32")] = "bf16",
    warmup_ms: Annotated[float, typer.Option("--warmup-ms", help="warm-up time budget per measurement, ms")] = 100.0,
    rep_ms: Annotated[float, typer.Option("--rep-ms", help="timed budget per measurement, ms")] = 500.0,
    json_path: Annotated[Path | None, typer.Option(
        "--json", help="write results as JSON (gzip-compressed where the name ends in .gz)")] = None,
    csv_path: Annotated[Path | None, typer.Option(
        "--csv", help="write results as CSV (gzip-compressed where the name ends in .gz)")] = None,
    list_configs: Annotated[bool, typer.Option("--list", help="list the named configurations")] = False,
    no_gpu_delay: Annotated[bool, typer.Option(
        "--no-gpu-delay", help="no GPU-side wait before each timed call: short kernels then time the host's "
        "launch too (for comparison)")] = False,
):
    """Time HSTU attention variants (CUDA events, L2 flush, quantiles, TFLOP/s)."""
    if dtype not in ("bf16", "fp16", "fp32"):
        raise ParamError(f"--dtype {dtype!r}: choose bf16, fp16 or fp32")
    from .kernels import bench

    # (each value joined to its option: one that starts with '-' is the value, not another option)
    argv = [f"--variants={variants}", f"--baseline={baseline}", f"--dtype={dtype}",
            f"--warmup-ms={warmup_ms}", f"--rep-ms={rep_ms}"]
    for c in config:
        argv.append(f"--config={c}")
    if json_path:
        argv.append(f"--json={json_path}")
    if csv_path:
        argv.append(f"--csv={csv_path}")
    if list_configs:
        argv.append("--list")
    if no_gpu_delay:
        argv.append("--no-gpu-delay")
    raise typer.Exit(bench.main(argv))


#: the exit code where the reader of the output stopped reading (`| head`): a process killed by
#: SIGPIPE ends with it in a shell (128 + 13)
BROKEN_PIPE = 141


#: the characters of an error line past which its middle is left out (a 100 KB -p value,
#: repeated whole, would be one 100 KB line)
ERROR_CHARS = 2000


def _error_text(text: str) -> str:
    """An error's text as one line on the terminal: control characters escaped, and past
    ``ERROR_CHARS`` its middle left out (the start says what, the end why)."""
    text = escape_controls(text)
    if len(text) <= ERROR_CHARS:
        return text
    head, tail = ERROR_CHARS * 3 // 4, ERROR_CHARS // 5
    return f"{text[:head]} [... {len(text) - head - tail:,} characters left out ...] {text[-tail:]}"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: the process's arguments) and return the exit code;
    as the process's command, a SIGTERM or SIGHUP stops it as a Ctrl-C does, and a Ctrl-C
    that comes once the command has returned its code changes nothing."""
    if argv is not None:
        return _main(list(argv))
    stop_as_ctrl_c()
    codes: list[int] = []
    try:
        try:
            codes.append(_main(sys.argv[1:]))
        finally:
            _ended()
    except KeyboardInterrupt:
        # one the command did not catch (the outer try: it may come as _ended is called):
        # before the command had its code, it stopped it; after, too late to change anything
        _ended()
        if not codes:
            typer.echo(f"tracekit: {escape_controls(_interrupted_line())}", err=True)
            return 130
    return codes[0]


def _ended() -> None:
    """The process ends with the command: a Ctrl-C from now on changes nothing. The handlers
    ``stop_as_ctrl_c`` replaced are put back first (a SIGTERM forwarded as a SIGINT once SIGINT
    is ignored would be lost); called again where a Ctrl-C cut it, it finishes the job."""
    stop_at_once()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _debug_first(args: list[str]) -> list[str]:
    """``args`` with ``--debug`` taken from wherever it was given (``tracekit query NAME --debug``)
    to the front, where the group's option is parsed: a subcommand has no option of that name,
    and its parser would call it an unknown option. A ``--debug`` after ``--`` is an argument."""
    end = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:end]:
        return args
    return ["--debug", *(a for a in args[:end] if a != "--debug"), *args[end:]]


def _main(args: list[str]) -> int:
    _STATE["opened"] = []
    try:
        return _run(args)
    finally:
        _STATE["opened"] = []  # (the stores the command opened are not kept alive after it)


@contextlib.contextmanager
def _ctrl_c_not_raisable():
    """A Ctrl-C whose KeyboardInterrupt lands where Python cannot raise it (a finalizer, a
    callback from C): not printed as a traceback ("Exception ignored in ..."), as Python's
    hook would; the command goes on, as it does there."""
    hook = sys.unraisablehook

    def quiet(unraisable) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            hook(unraisable)

    sys.unraisablehook = quiet
    try:
        yield
    finally:
        sys.unraisablehook = hook


@functools.cache
def _command():
    """``app`` as the click group that parses a command line, made at the first call of a
    process (a program that calls ``main`` many times, the tests, makes it once)."""
    return built_lazily(app)


def _run(args: list[str]) -> int:
    if not _CONVERTING:
        typer.echo(f"tracekit: error: {cli_params.too_old()}", err=True)
        return 2
    args = _debug_first(args)
    debug = args[:1] == ["--debug"]
    if args[-1:] == ["--"] and "capture" in args[:-1]:  # (`capture -- $CMD` with $CMD empty: not the workload)
        typer.echo("tracekit: error: capture: nothing after --; give the program to run (tracekit capture "
                   "--tool nsys -- python my_bench.py), or leave -- out to run the HSTU workload", err=True)
        return 2
    if args[-1:] == ["--"] and "sweep" in args[:-1]:
        typer.echo("tracekit: error: sweep: nothing after --; give the program to run at each point (tracekit sweep "
                   "--grid m=1,2 -- python my_bench.py --m {m}), or leave -- out to sweep the HSTU workload", err=True)
        return 2
    sigints = SigintWatch()
    try:
        # without standalone mode, typer returns a command's typer.Exit code instead of raising
        # it, and 130 for a Ctrl-C it caught (the command's own message, if any, is printed);
        # the watch keeps a Ctrl-C from cutting an import (DuckDB's module would abort)
        with sigints, _ctrl_c_not_raisable():
            code = _command()(args=args, prog_name="tracekit", standalone_mode=False)
    except typer.Exit as err:
        return getattr(err, "exit_code", 0)
    except SystemExit:
        # click's exit on a closed stdout (`| head`): quietly, having wrapped stdout (its own
        # click or typer's copy of it) so that the last flush says nothing
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":
            return BROKEN_PIPE  # not click's 1: `diff --gate` says "regressed" with 1
        raise
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except Exception as err:
        if debug and type(err).__name__ != "NoArgsIsHelpError":
            # the traceback, then the line and exit code as without --debug (2: not `diff --gate`'s 1)
            import traceback

            traceback.print_exc()
        if sigints.count and not isinstance(err, Interrupted):
            # what a Ctrl-C became: DuckDB's InterruptException or "Query interrupted", or the
            # error a command made of it
            code = 130
        elif isinstance(err, TracekitError):
            label = "" if isinstance(err, Interrupted) else "error: "  # a Ctrl-C is no error of the user's
            typer.echo(f"tracekit: {label}{_error_text(str(err))}", err=True)
            return err.exit_code
        elif isinstance(err, OSError) and err.filename is not None:  # a path the command cannot read or write
            typer.echo(f"tracekit: error: {escape_controls(str(err.filename))}: {err.strerror or type(err).__name__}",
                       err=True)
            return 2
        elif type(err).__name__ == "NoArgsIsHelpError":  # `tracekit`, `tracekit export`: the help was printed
            return 0
        elif hasattr(err, "format_message"):  # a usage error from the CLI parser
            message = (err.format_message().strip().splitlines() or [type(err).__name__])[0]
            option = getattr(err, "option_name", None)
            where = getattr(getattr(err, "ctx", None), "command_path", None) or "tracekit COMMAND"
            end = args.index("--") if "--" in args else len(args)
            dashed = next((a for a in args[:end] if a.startswith(option) and os.path.exists(a)), None) \
                if isinstance(option, str) and len(option) > 1 else None
            if isinstance(option, str) and any(c.isspace() for c in option):  # text, not an option: SQL after a comment
                message += f"; an argument that starts with - goes after -- ({where} -- \"-- ...\")"
            elif dashed is not None:  # a file named -x.sqlite, read as options (-x)
                message += f"; {dashed} is a file: give it as ./{dashed} (or after --)"
            typer.echo(f"tracekit: error: {_error_text(message)}", err=True)
            return 2
        else:
            rerun = "" if debug else " (rerun with --debug)"
            typer.echo(f"tracekit: internal error: {type(err).__name__}: {escape_controls(str(err))}{rerun}", err=True)
            return 1
    if code == 130:
        typer.echo(f"tracekit: {escape_controls(_interrupted_line())}", err=True)
    return code if isinstance(code, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
