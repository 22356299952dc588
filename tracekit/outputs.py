"""Writing output files (query results, charts, exports) safely.

``write_output(path, write_fn, store_path)`` is the one way tracekit writes a file the
user named: it refuses a path that is the store or its ``.wal`` (through symlinks and
hard links), or any path inside a store that is a folder (a Parquet dataset), writes to a
temporary file in the target's folder and renames it over the target, so an interrupted
or failed write leaves the old file (or none), never half a file. A path that is a device
or a pipe (``-o /dev/stdout``, a FIFO) is written into as it is: there is no file to
leave half, and renaming over it would replace the device with a file. So is a path that
names an open file descriptor (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``),
through the descriptor, whatever it is open on: the standard output redirected to a file
(``-o /dev/stdout >> log``) gets the bytes where the shell left it, where a rename would
replace the log. ``-`` is the standard output, as for most Unix tools (``tracekit export
trace -o - | gzip``), written in place like a device; ``is_stream`` tells a command to
print its "wrote" line on stderr then, not into the data. ``check_output(path,
store_path)`` makes the same checks up front, for a command that works long before it
writes. Errors are ``OutputError``: one line naming the file and the problem.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from .errors import OutputError, expect


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def resolved(path: Path) -> Path:
    """``path`` with its symbolic links followed; a loop of them is an ``OutputError`` (Python
    raises RuntimeError there), as an ingest names one."""
    try:
        return path.resolve()
    except RuntimeError:
        raise OutputError(f"{path}: a loop of symbolic links, leading to no file") from None


def check_not_store(path: str | os.PathLike, store_path: str | os.PathLike | None) -> None:
    """Raise ``OutputError`` when ``path`` would overwrite the store ``store_path`` or its
    ``.wal`` file: the same path once symlinks are resolved, or the same file (a hard link).
    A store that is a folder (a Parquet dataset) is every file in it: a file written there
    would replace one of its tables (``-o DIR/runs.parquet``) or be read as part of one."""
    if store_path is None or str(store_path) == ":memory:":
        return
    target = resolved(Path(path))
    store = Path(store_path).resolve()
    if store.is_dir() and target.is_relative_to(store):
        raise OutputError(f"{path}: inside the dataset {store} (the store); write the output outside its folder")
    for protected in (store, store.with_name(store.name + ".wal")):
        if target == protected or _same_file(target, protected):
            raise OutputError(f"{path}: this is the store {'' if protected == store else 'WAL '}"
                              f"({protected}); write the output to another file")


#: the output path that means the standard output
STDOUT = "-"

#: a path of an open file descriptor of a process (/dev/stdout is a link to /proc/self/fd/1)
_FD_PATH = re.compile(r"/(?:dev|proc/(self|\d+))/fd/(\d+)")


def _descriptor(path: str | os.PathLike) -> int | None:
    """The file descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/1``,
    ``/proc/self/fd/1``, or a link to one), else None. Its links are followed one at a time:
    the last one, /proc/self/fd/1 to the file the descriptor is open on, would lose what it
    names (the descriptor, its offset and append mode)."""
    current = os.path.abspath(path)
    for _ in range(40):  # (the kernel's limit on links in a path)
        m = _FD_PATH.fullmatch(current)
        if m:
            return int(m.group(2)) if m.group(1) in (None, "self", str(os.getpid())) else None
        try:
            link = os.readlink(current)
        except OSError:  # not a link (or not there): a path of the file system
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    return None


def is_stream(path: str | os.PathLike) -> bool:
    """Whether writing ``path`` writes into a stream (``-``, ``/dev/stdout``, a pipe) rather
    than a file: a command's own lines must not go where the data goes then."""
    if str(path) == STDOUT or _descriptor(path) is not None:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def output_suffix(path: str | os.PathLike, formats: tuple[str, ...] | dict[str, str]) -> str:
    """The lower-case suffix of ``path`` that names its format ("" for none). A name that is
    one of the command's ``formats`` alone (``-o .html``, ``-o out/.csv``) is an error:
    pathlib reads a name that starts with a dot as one with no suffix, so the file would
    be named as a format and written as another (or as none)."""
    shown = Path(path)
    if not shown.suffix and shown.name.lower() in formats:
        raise OutputError(f"{path}: {shown.name!r} is a suffix with no name before it (a name that starts with a dot "
                          f"has no suffix); name the file, e.g. {shown.with_name('out' + shown.name)}")
    return shown.suffix.lower()


#: suffixes naming what a text output (a trace's JSON, folded stacks) is not: another compression
#: or another format's file, which the output would be mislabelled as
NOT_TEXT = {".xz": "xz-compressed", ".bz2": "bzip2-compressed", ".zst": "zstd-compressed", ".lz4": "lz4-compressed",
            ".zip": "a zip archive", ".7z": "a 7-Zip archive", ".svg": "an SVG image", ".png": "a PNG image",
            ".pdf": "a PDF", ".html": "an HTML page", ".xlsx": "a spreadsheet", ".parquet": "Parquet",
            ".csv": "CSV", ".tsv": "TSV", ".json": "JSON"}


def text_output(path: str | os.PathLike, what: str, example: str) -> bool:
    """Whether the text output ``path`` (``what``: 'a folded-stacks file') is written
    gzip-compressed: its name ends in ``.gz``. A name whose suffix, or whose suffix before
    ``.gz``, says another compression or format (``NOT_TEXT``, less ``example``'s own suffix:
    ``stacks.json.gz``, ``trace.xz.gz``) is an error rather than a file named as what it is
    not; ``example`` (``stacks.folded``) is the name the error suggests."""
    if str(path) == STDOUT:
        return False
    suffix = output_suffix(path, (".gz", *NOT_TEXT))
    own = Path(example).suffix.lower()
    # (the name's format under the compression too: stacks.json.gz is gzip-compressed JSON)
    inner = Path(Path(path).stem).suffix.lower() if suffix == ".gz" else suffix
    if inner in NOT_TEXT and inner != own:
        raise OutputError(f"-o {path}: {what} is text, not {NOT_TEXT[inner]}; name it {example} (or {example}.gz, "
                          "gzip-compressed)")
    return suffix == ".gz"


def check_output(path: str | os.PathLike, store_path: str | os.PathLike | None = None) -> bool:
    """Raise ``OutputError`` where ``write_output`` would refuse ``path`` before writing a
    byte (the store or its WAL, a missing folder, a folder): a command that works long
    before it writes checks first. Returns False for a special file (``/dev/stdout``, a
    pipe, ``-``), which is written in place, True for a regular file (renamed into place)."""
    expect(path, (str, os.PathLike), "output path", OutputError)
    if str(path) == STDOUT:
        return False
    shown = Path(path)
    check_not_store(shown, store_path)
    if _descriptor(shown) is not None:
        return False
    try:
        mode = os.stat(shown).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return False
    target = resolved(shown)
    if not target.parent.is_dir():
        if target.parent.exists():  # (a file where its folder belongs: not a missing folder)
            raise OutputError(f"{shown}: {shown.parent} is not a folder")
        raise OutputError(f"{shown}: folder {shown.parent} does not exist")
    if target.is_dir():
        raise OutputError(f"{shown}: is a folder; name a file")
    return True


@contextlib.contextmanager
def text_file(path: Path, gz: bool = False, level: int = 6) -> Iterator[TextIO]:
    """``path`` open to write UTF-8 text with ``\\n`` line ends; gzip-compressed at ``level``
    where ``gz``, its header without a file name or a time (the same text, the same bytes)."""
    with open(path, "wb") as raw:
        if gz:
            import gzip

            with gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=level, mtime=0) as z, \
                    io.TextIOWrapper(z, encoding="utf-8", newline="\n") as f:
                yield f
        else:
            with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as f:
                yield f


def write_output(path: str | os.PathLike, write_fn: Callable[[Path], object],
                 store_path: str | os.PathLike | None = None) -> Path:
    """Write the file ``path`` through ``write_fn(tmp)``, which writes a temporary file
    ``tmp`` in the same folder; the temporary file is then renamed over ``path``.

    ``-`` writes to the standard output. A symlink ``path`` is written through (its target
    is replaced, the link kept). The new file gets the mode an ordinary ``open(path, 'w')`` would give it (an existing
    file's mode is kept). Returns ``path``. Raises ``OutputError`` when ``path`` is the
    store or its WAL (``store_path``), its folder does not exist, it is a folder, or
    the write fails (permissions, a full disk); the temporary file is removed then.
    """
    shown = Path(path)
    if not check_output(shown, store_path):
        # a special file (a pipe, /dev/stdout) gets the bytes of a regular file written first:
        # the writers then never see a pipe (Polars 2.1's parquet sink once waited forever
        # writing into a FIFO whose reader was there, in a full test run)
        try:
            with tempfile.TemporaryDirectory(prefix="tracekit-out-") as folder:
                tmp = Path(folder) / shown.name
                write_fn(tmp)
                with open(tmp, "rb") as src:
                    fd = None if str(path) == STDOUT else _descriptor(shown)
                    if str(path) == STDOUT:
                        sys.stdout.flush()
                        shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
                        sys.stdout.buffer.flush()
                    elif fd is not None:  # where the descriptor is, not over the file it is open on
                        sys.stdout.flush()
                        sys.stderr.flush()
                        with open(fd, "wb", closefd=False) as dst:
                            shutil.copyfileobj(src, dst, 1 << 20)
                    else:
                        with open(shown, "wb") as dst:
                            shutil.copyfileobj(src, dst, 1 << 20)
        except BrokenPipeError:
            raise  # the reader stopped reading (`| head`): no error of the output's (click exits quietly, 1)
        except Exception as err:
            reason = io_reason(err)
            if reason is None:
                raise
            raise OutputError(f"{shown}: cannot write ({reason})") from err
        return shown
    target = resolved(shown)
    folder = target.parent
    try:
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as err:
        raise OutputError(f"{shown}: cannot write in {shown.parent} ({err.strerror or err})") from err
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        write_fn(tmp)
        os.replace(tmp, target)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        reason = None if isinstance(err, OutputError) else io_reason(err)  # (one of another file written within)
        if reason is None:
            raise
        raise OutputError(f"{shown}: cannot write ({reason}); nothing was written") from err
    return shown


def plain_columns(df, fmt: str, cannot_nest: str | None = None):
    """``df`` for a text format ``fmt``: bytes (a BLOB) as hex text, which none of them
    holds; times as ISO 8601 text, alike in all of them; in JSON a DECIMAL as a number, not the
    string Polars writes (a sum of BIGINTs is a HUGEINT, which reaches Polars as a DECIMAL):
    a whole one as an exact integer, of any size, one with a fraction as a double; lists or
    structs a one-line error where ``cannot_nest`` (what of the format cannot hold them:
    ``CSV``, ``a cell``) says the format has no place for them."""
    import polars as pl

    from .errors import ParamError

    nested = [c for c, t in df.schema.items() if t.is_nested()]
    if nested and cannot_nest is not None:
        raise ParamError(f"--format {fmt}: column {nested[0]!r} holds lists or structs, which {cannot_nest} cannot; "
                         "use --format json or parquet")
    blobs = [c for c, t in df.schema.items() if t == pl.Binary]
    # A time as one text in every text format: ISO 8601 with its T, to the column's precision,
    # an offset as +00:00 (RFC 3339). Polars writes JSON's naive times with a space, and CSV's
    # offsets as +0000.
    stamps = {c: t for c, t in df.schema.items() if isinstance(t, pl.Datetime)}
    # (by the column's type, not its values: one type in every part a long result is written in)
    decimals = {c: t for c, t in df.schema.items() if isinstance(t, pl.Decimal)} if fmt == "json" else {}
    # a rounded change of nothing, round(-0.02, 1), as 0.0, not -0.0 (-0.0 == 0)
    floats = [c for c, t in df.schema.items() if t in (pl.Float32, pl.Float64)]
    if not (blobs or stamps or decimals or floats):
        return df
    return df.with_columns(
        *(pl.when(pl.col(c) == 0).then(0.0).otherwise(pl.col(c)).cast(df.schema[c]).alias(c) for c in floats),
        *(pl.col(c).cast(pl.Int128 if t.scale == 0 else pl.Float64) for c, t in decimals.items()),
        *(pl.col(c).bin.encode("hex") for c in blobs),
        *(pl.col(c).dt.to_string(f"%Y-%m-%dT%H:%M:%S%.{_DIGITS[t.time_unit]}f{'%:z' if t.time_zone else ''}")
          for c, t in stamps.items()))


#: the digits of a second's fraction of a Polars time unit
_DIGITS = {"ms": 3, "us": 6, "ns": 9}


def _reason(err: OSError) -> str:
    if os_errno(err) == errno.ENOSPC:  # (Polars's OSError has no errno, its text says "(os error 28)")
        return "no space left on device"
    return err.strerror or str(err)


#: the OS error a library's own exception holds in its text: Polars's "(os error 28)", DuckDB's
#: '"errno":"28"'
_OS_ERRNO = re.compile(r'\(os error (\d+)\)|"errno":\s*"?(\d+)')


def os_errno(err: BaseException) -> int | None:
    """The operating system's error number ``err`` is, or carries in its text (a writer's own
    exception: Polars's ComputeError, DuckDB's IOException); None for none."""
    if isinstance(err, OSError) and err.errno is not None:
        return err.errno
    m = _OS_ERRNO.search(str(err)) if isinstance(err, Exception) else None
    return int(m.group(1) or m.group(2)) if m else None


def io_reason(err: BaseException) -> str | None:
    """What a failed write met, in words (``no space left on device``), where ``err`` is the
    operating system's error (``os_errno``); None for any other error."""
    if isinstance(err, OSError):
        return _reason(err)
    code = os_errno(err)
    return None if code is None else _reason(OSError(code, os.strerror(code)))


def no_room(err: BaseException) -> bool:
    """Whether ``err`` is a full disk's or an exhausted quota's."""
    return os_errno(err) in (errno.ENOSPC, errno.EDQUOT)
