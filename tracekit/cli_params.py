"""Command-line values converted without Pydantic.

Typer (0.2x) converts every parameter's value through a Pydantic ``TypeAdapter``: the
first command-line value a command parses imports Pydantic, 0.15–0.2 s of every
``tracekit`` command's start on the 2-core machine, more than DuckDB's import.
tracekit's parameters are plain ``str``, ``int``, ``float``, ``bool`` and ``Path`` values
(or lists of them, ``None`` allowed) with no parser, bounds or path checks:
``install()`` converts those here, with messages like Typer's for bad values, and leaves
every other parameter to Typer. Checks beyond Typer's, for every option and argument of
every command: an empty or blank path is a bad value (``--db "$DB"`` with DB unset is not
the current folder), an integer is read as every integer given as text is (``numbers``:
``--limit 1,000`` as tables print it; digits 0-9 only) and must fit in 64 bits (what DuckDB
and every count here take: ``--limit 99999999999999999999999`` is no row count) and a number must be finite
(``1e400`` is inf); each a one-line error naming the option, exit 2. Two types of its own:
``DbPath`` (``--db`` as given, a trailing / kept) and ``Ns`` (a time in ns, grouped digits
allowed). A Typer without the hook (before 0.29: it converts through click's types, which
know neither type) cannot run tracekit's commands: ``install`` then says False, and the
command line says which Typer it needs (``too_old``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, get_args, get_origin

from .numbers import INT_RANGE, whole_number

_NAMES = {int: "integer", float: "number"}
#: the first Typer with the conversion hook ``install`` uses (pyproject's lower bound)
TYPER_NEEDED = "0.29"

_BOOLS = {**dict.fromkeys(("1", "on", "t", "true", "y", "yes"), True),
          **dict.fromkeys(("", "0", "off", "f", "false", "n", "no"), False)}  # Pydantic's words


class DbPath(str):
    """``--db`` as given: a store file, or a dataset folder (the trailing / kept, which
    ``Path`` drops: a folder asked for); empty or blank is an error, as for any path."""


class Ns(int):
    """A time in ns: a 64-bit integer, plain or grouped as tables print it (12,100,481) or
    as Python writes it (12_100_481)."""


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    try:
        return _BOOLS[str(v).strip().lower()]
    except KeyError:
        raise ValueError(f"{v!r} is not a valid boolean.") from None


def _path_checks(info: Any) -> bool:
    """Whether the parameter asks for path checks or conversions beyond ``Path(value)``."""
    return bool(getattr(info, "exists", False) or getattr(info, "resolve_path", False)
                or getattr(info, "allow_dash", False) or getattr(info, "path_type", None) is not None
                or getattr(info, "writable", False) or not getattr(info, "file_okay", True)
                or not getattr(info, "dir_okay", True))


def converter(annotation: Any, info: Any):
    """A function converting one command-line string to ``annotation``, or None where
    Typer's own conversion is needed (a parser, bounds, choices, path checks, other types)."""
    if (getattr(info, "parser", None) is not None or getattr(info, "min", None) is not None
            or getattr(info, "max", None) is not None):
        return None
    if annotation is str:
        return lambda v: v if isinstance(v, str) else os.fsdecode(v)
    if annotation is bool:
        return _bool
    if annotation in (int, float):
        def number(v, kind=annotation):
            if isinstance(v, kind) and not isinstance(v, bool):
                return v
            try:  # (an integer in numbers' one grammar, as -p takes it: 1,000 yes, Arabic-Indic digits no)
                if isinstance(v, str):
                    out = whole_number(v) if kind is int else kind(v.strip())
                else:
                    out = kind(v)
            except (TypeError, ValueError):
                raise ValueError(f"{v!r} is not a valid {_NAMES[kind]}.") from None
            if kind is int and not INT_RANGE[0] <= out <= INT_RANGE[1]:
                raise ValueError(f"{v!r} is out of range (a 64-bit integer, {INT_RANGE[0]} to {INT_RANGE[1]}).")
            if kind is float and not math.isfinite(out):  # '1e400' is inf, 'nan' no number
                raise ValueError(f"{v!r} is not a finite number.")
            return out
        return number
    if annotation is Path and not _path_checks(info):
        return _path
    if annotation is DbPath:
        return _db_path
    if annotation is Ns:
        return _ns
    return None


#: DuckDB's name of a database in memory: a store that ends with the command
IN_MEMORY = ":memory:"
IN_MEMORY_ERROR = (f"{IN_MEMORY!r} is DuckDB's database in memory, gone when the command ends (what it ingests is "
                   "lost, and it holds nothing to query); name a store file (FILE.duckdb) or a dataset folder")


def _db_path(v: Any) -> DbPath:
    """``--db`` as written (``_path``'s check: not empty or blank; nor ``:memory:``)."""
    if isinstance(v, DbPath):
        return v
    _path(v)
    if os.fsdecode(v).strip() == IN_MEMORY:
        raise ValueError(IN_MEMORY_ERROR)
    return DbPath(os.fsdecode(v))


def _ns(v: Any) -> Ns:
    if isinstance(v, int) and not isinstance(v, bool):
        return Ns(v)
    try:
        out = whole_number(str(v))
    except ValueError:
        raise ValueError(f"{v!r} is not a whole number of ns (12100481, or 12,100,481 as tables print it).") from None
    if not INT_RANGE[0] <= out <= INT_RANGE[1]:
        raise ValueError(f"{v!r} is out of range (a 64-bit integer, {INT_RANGE[0]} to {INT_RANGE[1]}).")
    return Ns(out)


def _path(v: Any) -> Path:
    """A path given on the command line; an empty or blank one is an error (``--db "$DB"``
    with DB unset would be ``Path("")``, the current folder)."""
    if isinstance(v, Path):
        return v
    text = os.fsdecode(v)
    if not text.strip():
        raise ValueError(f"{text!r} is not a path (it is empty or blank).")
    return Path(text)


def too_old() -> str:
    """The one line for a Typer without the hook ``install`` needs."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("typer")
    except PackageNotFoundError:
        found = "of unknown version"
    return (f"the installed Typer ({found}) is too old for tracekit's command line: it needs typer "
            f"{TYPER_NEEDED} or later (pip install 'typer>={TYPER_NEEDED}')")


def install() -> bool:
    """Make Typer convert tracekit's plain parameters with ``converter``; True if it did."""
    try:
        from typer import _coercion, core
        from typer._click.exceptions import BadParameter
    except ImportError:  # a Typer without Pydantic conversion
        return False
    typer_build = getattr(core, "build_runtime_param", None)
    base = getattr(_coercion, "RuntimeParam", None)
    if typer_build is None or base is None:
        return False
    if getattr(typer_build, "_tracekit", False):  # installed already
        return True

    class _Plain(base):
        """One plain value, or a list of them (``convert`` applies to each item)."""

        def __init__(self, descriptor, convert, is_list):
            super().__init__(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
            object.__setattr__(self, "convert", convert)
            object.__setattr__(self, "is_list", is_list)

        def _coerce_value(self, value, param, ctx):
            try:
                if self.is_list:
                    return [self.convert(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
                return self.convert(value)
            except ValueError as err:
                raise BadParameter(str(err), ctx=ctx, param=param) from None

    def build(descriptor):
        annotation, info = descriptor.annotation, descriptor.parameter_info
        if descriptor.file_annotation is None:
            is_list = get_origin(annotation) is list
            item = get_args(annotation)[0] if is_list and len(get_args(annotation)) == 1 else annotation
            convert = None if get_origin(item) is not None else converter(item, info)
            if convert is not None:
                return _Plain(descriptor, convert, is_list)
        return typer_build(descriptor)

    build._tracekit = True
    core.build_runtime_param = build
    return True
