"""The TracekitError hierarchy.

Every error the library raises on bad input is a ``TracekitError``; the CLI prints its
one-line message and exits with ``exit_code`` (2), showing a traceback only with
``--debug``. Messages name the file or value and say what to do.
"""

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class TracekitError(Exception):
    """Base class: a problem the user can fix; ``str(err)`` is one line."""

    exit_code = 2


class InputError(TracekitError):
    """A file that cannot be ingested (missing, truncated, wrong kind, wrong schema)."""


class QueryError(TracekitError):
    """An unknown query, a bad parameter, or a query the data cannot answer."""


class ParamError(QueryError):
    """A parameter value that does not fit its declared type."""


class ToolNotFoundError(TracekitError):
    """A profiler (nsys, ncu) that is needed but cannot be found."""


class RunFolderError(TracekitError):
    """An error that may name the run folder a capture left (``run_dir``; None where it left
    none): a sweep's manifest names it for the point."""

    def __init__(self, message: str, run_dir: str | os.PathLike | None = None) -> None:
        super().__init__(message)
        self.run_dir = None if run_dir is None else str(run_dir)


class CaptureError(RunFolderError):
    """A capture that failed (profiler exit status, workload crash, bad settings)."""


class OutputError(TracekitError):
    """An output file that cannot be written (no such folder, the store itself, a full disk)."""


class StoreBusy(TracekitError):
    """The store is locked by another process (an ingest under way): try again later."""


class Interrupted(RunFolderError):
    """Ctrl-C during a command that writes the store; the message says what was kept."""

    exit_code = 130


#: (temporary path, the user's path) pairs in force in this thread (``shown_as``)
_SHOWN_AS: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("shown_as", default=())


@contextmanager
def shown_as(plain, path) -> Iterator[None]:
    """Within it, in this thread, a ``CaptureWarning`` that names ``plain`` (a file's
    temporary copy: decompressed, or exported from a report) names the user's ``path``
    instead. Per thread, so files ingested at once in threads each keep their own name
    (``warnings.catch_warnings``, which could rename them afterwards, is one setting for the
    whole process: threads entering it at once lose each other's warnings)."""
    token = _SHOWN_AS.set((*_SHOWN_AS.get(), (str(plain), str(path))))
    try:
        yield
    finally:
        _SHOWN_AS.reset(token)


class CaptureWarning(UserWarning):
    """What a comparison should be read with: a run whose capture did not finish well (its
    run folder recorded a status other than ok: its numbers may be partial), or two
    captures whose setups differ (preset, GPU, versions, settings). The CLI prints it as a
    warning line; a report shows it in the comparison's section."""

    def __init__(self, message="", *args):
        for plain, path in _SHOWN_AS.get():
            message = message.replace(plain, path) if isinstance(message, str) else message
        super().__init__(message, *args)


class UntracedScopes(CaptureWarning):
    """Of two captures compared, one did not trace what a scope of the other's needs (CUDA,
    NVTX, a kind of sample, GPU memory): the comparison leaves that scope out, or, without NVTX,
    compares GPU memory per GPU alone. A repeat of the base (``--repeat``) says it in its own
    terms instead: which rows go without its noise."""


class NoneRecorded(CaptureWarning):
    """A question that answered no row of a run that holds none of the events of a kind it
    reads, though its capture traced them: none happened in the capture's window; or any
    question about CUDA events of a run (or across a job's ranks, of a rank) that holds none
    at all: the window missed the program's GPU work. A report says it in the section, or in
    its header where it leaves the run's CUDA sections out."""


#: the folder of tracekit's modules: a frame whose file is below it is tracekit's own
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


@functools.cache
def _own_folders() -> tuple[str, ...]:
    """The folders of tracekit's code: the package's, and those of its subpackages that a
    checkout keeps beside it (capture, kernels: ``package-dir``), found once, unrun."""
    import importlib.util

    found = [_PACKAGE]
    for sub in ("tracekit.capture", "tracekit.kernels"):
        spec = importlib.util.find_spec(sub)
        if spec is not None:
            found += [os.path.abspath(f) + os.sep for f in spec.submodule_search_locations or []]
    return tuple(dict.fromkeys(found))


def warn_from_caller(message: Warning | str, category: type[Warning] = CaptureWarning,
                     at: tuple[str, int] | None = None) -> None:
    """Warn ``message`` at the line that called into tracekit, as ``warnings.warn`` does at
    that frame (its module's warning registry; tracekit's own ``catch_warnings`` reset it, as
    any does, so a call made again says its warnings again): the frame that called tracekit's
    outermost frame, whatever lies between (another module's code that tracekit called, a
    context manager's, that called tracekit back), so that no warning names a line inside the
    package, however deep it is made or passed on (``compare``, a report, the threads of
    ``diff --jobs`` pass on what they catch). A ``Warning`` given is of its own category, as
    ``warnings`` takes it. ``at``: the file and line a warning caught was given, kept where
    they lie outside tracekit (another library's warning, or one already at the caller's
    line). In a thread tracekit started (files ingested at once), the line that called
    tracekit in the one other thread in tracekit, which waits on it; where there are several
    (a program's own threads), the thread's start: which one waits is not known."""
    import sys
    import threading
    import warnings

    if at is not None and not at[0].startswith(_own_folders()):
        warnings.warn_explicit(message, category, *at)
        return
    caller = _caller(sys._getframe(1))
    if caller.f_code.co_filename in _thread_starts():  # (a thread of tracekit's: the one caller waiting on it)
        me = threading.get_ident()
        waiting = [c for t, f in sys._current_frames().items() if t != me
                   for c in [_caller(f)] if c is not f and c.f_code.co_filename not in _thread_starts()]
        if len(waiting) == 1:
            caller = waiting[0]
    names = caller.f_globals  # (not its module_globals: a loader without the source, python -c's, would raise)
    warnings.warn_explicit(message, category, caller.f_code.co_filename, caller.f_lineno,
                           module=names.get("__name__", "<string>"),
                           registry=names.setdefault("__warningregistry__", {}))


def _caller(frame):
    """The frame that called tracekit's outermost frame of ``frame``'s stack (``frame`` itself
    where none of it is tracekit's; the outermost where nothing called it)."""
    own = _own_folders()
    outermost = None
    at = frame
    while at is not None:
        if at.f_code.co_filename.startswith(own):
            outermost = at
        at = at.f_back
    return frame if outermost is None else (outermost.f_back or outermost)


@functools.cache
def _thread_starts() -> frozenset[str]:
    """The files of the frames a thread starts in: a thread whose outermost tracekit frame
    one of them called was started by tracekit (its pools)."""
    import concurrent.futures.thread
    import threading

    return frozenset((threading.__file__, concurrent.futures.thread.__file__))


def expect(value, types: type | tuple[type, ...], what: str, error: type[TracekitError] = ParamError) -> None:
    """Raise ``error`` (one line naming ``what`` and the value) unless ``value`` is one of
    ``types``: a public function given the wrong kind of value says so, rather than failing
    later with Python's TypeError or AttributeError. A bool is no number here."""
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
        return
    names = " or ".join("None" if t is type(None) else t.__name__ for t in types)
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise error(f"{what} {shown}: expected {names}, not {type(value).__name__}")


def missing(path) -> str:
    """What a path that does not exist is, for its error: ``PATH: no such file or
    directory``, or a symbolic link that leads nowhere or round in a loop (which
    ``Path.exists`` also calls absent)."""
    import errno
    import os

    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return f"{path}: a loop of symbolic links, leading to no file"
        if os.path.islink(path):
            return f"{path}: a symbolic link to {os.readlink(path)}, which does not exist"
    return f"{path}: no such file or directory"
