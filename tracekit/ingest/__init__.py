"""Ingest plugins: turn a profiler output into Arrow tables for the store.

One mechanism serves every source. A plugin module defines::

    KIND = "nsys"                                   # runs.kind
    def sniff(path: Path, head: bytes) -> bool      # decide from the content (head only)
    def read(path: Path) -> Parsed                  # final tables, no run_id
    def rank(path: Path, head: bytes) -> int        # optional: which of several exports of
                                                    # one kind a run folder reads (lowest)
    def read_exports(paths: list[Path]) -> Parsed   # optional: a run folder's exports of one
                                                    # capture, best-ranked first, read together

The store (``tracekit.store``) does the rest for all of them: content hash (the
same file twice is a no-op), one transaction per file, the ``runs`` row, prepending
``run_id``, rollback on any error. Compressed inputs (``.xz``, ``.gz``, ``.bz2``,
``.zst``) are decompressed to a temporary file first.
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import itertools
import lzma
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import xxhash

from ..errors import InputError, TracekitError, shown_as

#: Plugin modules, tried in order by ``detect``.
PLUGINS = ["tracekit.ingest.nsys", "tracekit.ingest.ncu", "tracekit.ingest.requests", "tracekit.ingest.benchlog",
           "tracekit.ingest.bench"]

HEAD_BYTES = 64 * 1024


@dataclass
class Parsed:
    """What a plugin returns: the run's kind, metadata for ``runs``, and its tables."""

    kind: str
    meta: dict = field(default_factory=dict)
    tables: dict[str, pa.Table] = field(default_factory=dict)
    #: callables ``(con, run_id, *, memory_limit) -> {table: rows}`` that write straight
    #: into the store inside the ingest transaction (for sources reshaped by SQL, like
    #: nsys exports); ``memory_limit``: the store's limit, a budget of the whole process
    #: (``tracekit.ingest.budget``), which a loader that changes DuckDB's limit sets back after
    loaders: list = field(default_factory=list)
    #: callables ``(con) -> None`` that add to the store's shared tables what the run's
    #: rows will refer to (the names of ``_strings``), each in its own transaction. Where
    #: several runs are written at once (tracekit.parallel) they are called in input
    #: order, before the run's own transaction, so that ids are those a serial ingest
    #: gives; a serial ingest does not call them (its loaders add the names themselves).
    #: One with a ``missing(con) -> bool`` that says False (the store has all it would
    #: add) is not called: checked before the file's turn, outside it.
    interns: list = field(default_factory=list)
    #: the run's parameters the input states itself (a benchmark log's bs and nc, from its
    #: name); those given to the ingest (``--param``) take precedence
    params: dict = field(default_factory=dict)
    #: estimated peak resident memory of the ingest, bytes (``budget``; None: not
    #: estimated): the store refuses the run before writing where its limit is smaller
    memory_need: int | None = None


def _plugins():
    mods = []
    for name in PLUGINS:
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError as err:  # a plugin not written yet / optional
            if err.name != name:
                raise
    return mods


#: the file name suffixes of the compressed inputs read (by content: ``_opener``)
COMPRESSED_SUFFIXES = (".xz", ".gz", ".bz2", ".zst")

_OPENERS = {
    b"\xfd7zXZ\x00": lzma.open,
    b"\x1f\x8b": gzip.open,
    b"BZh": bz2.open,
}


def _zstd_open(path):
    try:
        import zstandard
    except ImportError as err:  # pragma: no cover - optional
        raise InputError(f"{path}: zstd-compressed; pip install zstandard or decompress it") from err
    return zstandard.open(path, "rb")


def _opener(path: Path):
    """The decompressing opener for ``path`` (by its magic bytes), or None if plain."""
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic.startswith(b"\x28\xb5\x2f\xfd"):
        return _zstd_open
    return next((op for m, op in _OPENERS.items() if magic.startswith(m)), None)


def tool_version(line: str | None) -> str | None:
    """A profiler's version from a line that says it (``ncu --version``'s last line, an
    Nsight Compute report's "2025.3.1.0 (build 36398880) (public-release)"): the dotted
    number and its build, ``2025.3.1.0 (build 36398880)``; a line without a dotted number
    as it is; None for none."""
    if not line or not str(line).strip():
        return None
    m = re.search(r"(\d+(?:\.\d+)+)(?:\s*\(build (\d+)\))?", str(line))
    if m is None:
        return str(line).strip()
    return m[1] + (f" (build {m[2]})" if m[2] else "")


#: what a damaged compressed file raises while it is read (a bad deflate stream: zlib.error)
_DAMAGED = (OSError, EOFError, lzma.LZMAError, zlib.error)


def not_a_file_why(path: Path) -> str | None:
    """Why ``path`` cannot be read as an input: a pipe, socket or device (reading a pipe
    waits for its writer, if ever; an export needs seeking); None for a file or folder."""
    if path.exists() and not (path.is_file() or path.is_dir()):
        return (f"{path}: not a regular file or folder (a pipe, socket or device); ingest an export, a report or "
                "a run folder")
    return None


def head_of(path: Path) -> bytes:
    """The first HEAD_BYTES of the (decompressed) content, without decompressing the rest."""
    opener = _opener(path) or open
    try:
        with opener(path, "rb") as fh:
            return fh.read(HEAD_BYTES)
    except _DAMAGED as err:
        raise InputError(f"{path}: cannot decompress ({err}); the file is truncated or corrupt") from err


@contextmanager
def materialized(path: Path) -> Iterator[Path]:
    """Yield a plain file for ``path``: compressed inputs are decompressed and nsys
    reports (``.nsys-rep``) exported to SQLite, into a temp folder. Callers keep ``path``
    for everything the user sees (the run's name, source path, rank and job)."""
    from .nsysrep import REPORT_SUFFIXES, export_if_needed

    if path.suffix in REPORT_SUFFIXES:
        with export_if_needed(path) as plain, _named_as(path, plain):
            yield plain
        return
    opener = _opener(path)
    if opener is None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tracekit-") as tmp:
        out = Path(tmp) / uncompressed_name(path)
        try:
            with opener(path) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except _DAMAGED as err:
            from ..outputs import no_room

            if no_room(err):  # (the temporary folder is full, not the file bad)
                raise InputError(f"{path}: no room to decompress it in the temporary folder {tmp} ({err.strerror}); "
                                 "free space there or set TMPDIR to a folder with room") from err
            raise InputError(f"{path}: cannot decompress ({err}); the file is truncated or corrupt") from err
        with _named_as(path, out):
            yield out


@contextmanager
def _named_as(path: Path, plain: Path) -> Iterator[None]:
    """An error or a warning about the temporary ``plain`` names the user's ``path`` instead."""
    try:
        with shown_as(plain, path):
            yield
    except TracekitError as err:
        if plain != path and err.args and isinstance(err.args[0], str) and str(plain) in err.args[0]:
            err.args = (err.args[0].replace(str(plain), str(path)), *err.args[1:])
        raise


def file_hash(path: Path) -> str:
    """The content hash that makes re-ingesting a file a no-op: XXH3-128 (an identity,
    not a signature; 3x faster than SHA-256 here, and it runs beside every ingest)."""
    h = xxhash.xxh3_128()
    buf = bytearray(1 << 20)  # one buffer, refilled: no fresh 1 MB object (and its pages) per read
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


#: files of a run folder no plugin reads (logs, the capture's own JSON, the .nsys-rep beside its
#: export, spreadsheets)
NOT_READ_SUFFIXES = (".log", ".txt", ".json", ".nsys-rep", ".qdstrm", ".xlsx")


def not_read(f: Path) -> bool:
    """Whether a file of a run folder is one no plugin reads (``NOT_READ_SUFFIXES``), compressed
    or not: a ``capture.log.xz`` holds the lines a benchmark log has, yet is not the run's."""
    return f.name == "meta.json" or Path(uncompressed_name(f)).suffix in NOT_READ_SUFFIXES


def run_folders(paths: list[Path]) -> list[Path]:
    """The inputs of one ingest command: each folder that is not a run folder (no meta.json:
    a sweep's folder, a folder of sweeps) stands for the run folders below it, in path order
    (a run folder's own subfolders are its files, not runs; links are followed, each folder
    once). A run folder of a capture that failed and left nothing to ingest is left out with a
    ``CaptureWarning``, as ``tracekit sweep`` leaves it out; a run folder found twice, or also
    given itself, counts once. Any other path, a folder with no run folder below it included,
    is kept as given: the store says what is wrong with it."""
    import os

    from ..errors import CaptureWarning, warn_from_caller

    out: list[Path] = []
    met = {os.path.realpath(p) for p in paths}  # (a path given twice stays twice: the same run, said so)
    left_out: dict[str, str | None] = {}  # run folder found below a folder -> why it is left out (None: kept)
    for path in paths:
        found = _below(path) if path.is_dir() and not (path / "meta.json").exists() else []
        kept = []
        for folder in found:
            real = os.path.realpath(folder)
            if real not in left_out:  # (found again: said once)
                left_out[real] = _left_nothing(folder)
                if left_out[real] is not None:
                    warn_from_caller(CaptureWarning(left_out[real]))
            if left_out[real] is None:
                kept.append(folder)
        if not kept:  # (no run folder below it, or only failed ones: the store says so, for it alone)
            out.append(path)
            continue
        for folder in kept:
            real = os.path.realpath(folder)
            if real not in met:
                met.add(real)
                out.append(folder)
    return out


def _below(folder: Path) -> list[Path]:
    """The run folders below ``folder`` (not itself), in path order."""
    return list(_run_folders_below(folder))


def _run_folders_below(folder: Path):
    """``_below``'s folders one at a time (a caller that needs one stops the walk there)."""
    import os

    seen = set()
    for top, dirs, files in os.walk(folder, followlinks=True):  # (a link to a folder seen before: not again)
        st = os.stat(top)
        if (st.st_dev, st.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        if "meta.json" in files and Path(top) != folder:
            yield Path(top)
            dirs.clear()


def _left_nothing(folder: Path) -> str | None:
    """Why a run folder found below a folder is not ingested: it holds no timed request and
    no profile, because its capture failed (meta.json's status) or recorded none (a command
    run under ``tracekit capture --tool none``: its meta.json and log); None for any other.
    A capture that says ok and left a requests.csv without a timed request is none of these:
    the file was cut or edited, which the store's ingest of the folder says."""
    from ..jsonfile import load_json

    try:
        meta = load_json(folder / "meta.json")
    except (OSError, ValueError):
        return None  # (the store says what is wrong with it)
    status = meta.get("status") if isinstance(meta, dict) else None
    requests = False
    for f in folder.rglob("*"):
        if not f.is_file() or not_read(f):
            continue
        if f.name != "requests.csv":
            return None
        requests = True
        with open(f, encoding="utf-8", errors="replace") as fh:
            if any(line.split(",")[1:2] == ["timed"] for line in fh):  # (request_idx,phase,...)
                return None
    if status in (None, "ok"):
        if requests or not (isinstance(meta, dict) and meta.get("tool") == "none"):
            return None  # (the store says what it lacks)
        return (f"{folder}: not ingested: a run under --tool none recorded no profile and no timed request "
                "(its meta.json and log only)")
    error = meta.get("error")
    return (f"{folder}: not ingested: the capture's status is {status!r}" + (f" ({error})" if error else "")
            + " and it left no timed request or profile")


def not_a_run_folder(folder: Path) -> str:
    """Why a folder without a meta.json is not one run, and what to give instead: the run
    folders below it (a sweep's), or the exports it holds, named one by one (a folder may hold
    one capture in several forms, an .nsys-rep beside its .sqlite, an ncu report beside its CSV
    pages)."""
    found = _below(folder)
    why = f"{folder}: not a run folder (no meta.json)"
    if found and all(_left_nothing(f) for f in found):
        return (f"{why}; its {len(found)} run folder{'s hold' if len(found) > 1 else ' holds'} no timed request or "
                "profile: captures that failed (each capture.log says why; capture again) or runs under --tool none")
    if found:
        held = "1 run folder: ingest it" if len(found) == 1 else f"{len(found)} run folders: ingest them"
        return f"{why}; it holds {held} (the ingest command takes the folder; tracekit.ingest.run_folders lists them)"
    exports = list(itertools.islice(exports_below(folder), 2))
    if not exports:
        from .benchlog import logs_below

        logs = list(itertools.islice(logs_below(folder), 2))
        if logs:  # (run_bench.sh's logs/: each log is a point, named one by one as exports are)
            return (f"{why} and no run folder below it; name the benchmark logs it holds "
                    f"({logs[0]}{', ...' if len(logs) > 1 else ''})")
        return f"{why} and no run folder below it, nor an nsys export or ncu report: nothing to ingest"
    more = ", ..." if len(exports) > 1 else ""
    return f"{why} and no run folder below it; name the exports it holds ({exports[0]}{more})"


#: the names of profiles, compressed or not: an nsys export and report, an ncu report
EXPORT_SUFFIXES = (".sqlite", ".nsys-rep", ".ncu-rep")


def uncompressed_name(path: Path) -> str:
    """The file's name without its compression suffix (``export.sqlite.xz``: ``export.sqlite``)."""
    name = path.name
    for ext in COMPRESSED_SUFFIXES:
        name = name.removesuffix(ext)
    return name


def file_stem(path: Path) -> str:
    """The file's name without its compression and its kind: its last suffix alone, so that
    the dots of a name stay (``bs8.nc1024.nsys-rep``, ``model_v1.2.sqlite.xz``: ``bs8.nc1024``,
    ``model_v1.2``)."""
    return Path(uncompressed_name(path)).stem


def export_name(path: Path) -> tuple[str, str | None]:
    """The file's name without its compression, split into its stem and which of
    ``EXPORT_SUFFIXES`` it ends with (None: none; the stem is then the whole name)."""
    name = uncompressed_name(path)
    suffix = next((s for s in EXPORT_SUFFIXES if name.endswith(s)), None)
    return name.removesuffix(suffix or ""), suffix


def export_suffix(path: Path) -> str | None:
    """Which of ``EXPORT_SUFFIXES`` the file's name ends with, compressed or not."""
    return export_name(path)[1]


def exports_below(folder: Path, suffixes: tuple[str, ...] = EXPORT_SUFFIXES) -> Iterator[Path]:
    """The files below ``folder`` named as profiles of ``suffixes`` (``export_suffix``), in
    path order."""
    for f in sorted(folder.rglob("*")):
        if export_suffix(f) in suffixes and f.is_file():
            yield f


def plugin_for(path: Path, head: bytes):
    """The plugin module that recognises this content, or None."""
    return next((m for m in _plugins() if head and m.sniff(path, head)), None)


def detect(path: Path):
    """Return the plugin module that recognises ``path``."""
    head = head_of(path)
    why = _unrecognised(path, head)
    if why is not None:
        raise InputError(why)
    return plugin_for(path, head)


def _unrecognised(path: Path, head: bytes) -> str | None:
    if not head:
        return f"{path}: empty file"
    if plugin_for(path, head) is None:
        from .ncu_head import not_an_export_why

        if (ncu_why := not_an_export_why(head)) is not None:
            return f"{path}: {ncu_why}"
        return (f"{path}: not a recognised profile (expected an nsys SQLite export, an ncu report "
                "or CSV export, a tracekit run folder, a benchmark log: benchmark_bs8_nc1024.log, or the JSON of "
                "tracekit bench --json)")
    return None


def nothing_to_ingest(path: Path) -> str | None:
    """Why ``tracekit ingest PATH`` finds nothing to read at ``path`` (a path that exists): a
    folder that is no run folder and has none below it, an empty file, a file no plugin
    recognises. None where it holds an input, even one whose reading fails (a truncated
    export, an unreadable file: the ingest says what is wrong with it)."""
    if path.is_dir():
        if (path / "meta.json").exists() or next(_run_folders_below(path), None) is not None:
            return None
        return not_a_run_folder(path)
    if (why := not_a_file_why(path)) is not None:
        return why
    try:
        head = head_of(path)
    except (InputError, OSError):
        return None
    return _unrecognised(path, head)
