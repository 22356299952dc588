"""Ctrl-C (SIGINT) handling: ``SigintWatch`` counts the interrupts of a block, holds them
back where a block must not be cut, and never interrupts an import.

An interrupt raised while a compiled module initialises (DuckDB's and Polars's nanobind
modules build Python enums then) aborts the process ("Critical nanobind error", SIGABRT)
instead of raising KeyboardInterrupt; so an interrupt that arrives during an import is
delivered again shortly after, once the import is done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

#: how long an interrupt that arrived during an import waits before it is tried again, s
_RETRY_S = 0.05


def _importing(frame) -> bool:
    """Whether the interrupted code runs inside an import (a module's initialisation)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


class SigintWatch:
    """Counts the SIGINTs (Ctrl-C) that arrive while it is active, raising
    KeyboardInterrupt as Python's own handler does: an interrupt is then recognised
    whatever DuckDB or a library turned it into (DuckDB raises "Query interrupted"
    as a RuntimeError, a replacement scan wraps it in an InvalidInputException).
    Inside ``held()`` an interrupt waits until the block is done (a COMMIT and the
    note of what it committed are not split); during an import it is delivered again
    once the import is done. Active only in the main thread, in place of Python's
    default handler or of another watch (restored on exit)."""

    def __init__(self) -> None:
        self.count = 0
        self._previous = None
        self._holding = False
        self._deferred = False

    def _handler(self, signum, frame) -> None:
        self.count += 1
        if self._holding:
            self._deferred = True
            return
        if _importing(frame):
            retry = threading.Timer(_RETRY_S, os.kill, (os.getpid(), signal.SIGINT))
            retry.daemon = True
            retry.start()
            return
        raise KeyboardInterrupt

    def __enter__(self) -> SigintWatch:
        current = signal.getsignal(signal.SIGINT)
        if threading.current_thread() is threading.main_thread() and (
                current is signal.default_int_handler or isinstance(getattr(current, "__self__", None), SigintWatch)):
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    @contextlib.contextmanager
    def held(self):
        """A block a Ctrl-C does not cut: one that arrives meanwhile is raised at its end."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            if self._deferred:
                self._deferred = False
                raise KeyboardInterrupt
