"""Ctrl-C (SIGINT) handling: ``SigintWatch`` counts the interrupts of a block, holds them
back where a block must not be cut, never interrupts an import, and stops the statements
of the DuckDB connections registered with ``interruptible`` at once.

An interrupt raised while a compiled module initialises (DuckDB's and Polars's nanobind
modules build Python enums then) aborts the process ("Critical nanobind error", SIGABRT)
instead of raising KeyboardInterrupt; so an interrupt that arrives during an import is
delivered again shortly after, once the import is done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import weakref

from .errors import Interrupted

#: how long an interrupt that arrived during an import waits before it is tried again, s
_RETRY_S = 0.05
#: the DuckDB connections whose running statement a Ctrl-C stops (``interruptible``)
_CONNECTIONS: weakref.WeakSet = weakref.WeakSet()
#: a watch entering ``held()`` against the interrupts of those statements
_LOCK = threading.Lock()
#: a watch's exit against its retries (an interrupt that came during an import, sent again)
_RETRY_LOCK = threading.Lock()
#: the SIGINTs the waker has read, each counted before it interrupts the statements, so that
#: the error a stopped statement raises is known for an interrupt whatever ran first
_RECEIVED = [0]


#: the signal (SIGTERM, SIGHUP) that stopped the command as a Ctrl-C would (``stop_as_ctrl_c``)
_TERMINATED: list[int | None] = [None]
#: the handlers ``stop_as_ctrl_c`` replaced, put back by ``stop_at_once``
_REPLACED: dict[int, object] = {}
#: a process started ignoring SIGINT (a shell script's background job): it keeps ignoring it,
#: and the watches take the SIGTERM and SIGHUP that stop it in its place (``stop_as_ctrl_c``)
_DEAF = [False]
#: there: whether the first of them was taken as the interrupt (by a watch's handler or
#: ``_forward``; by the waker), and the ones sent again after an import (``SigintWatch._retry``)
_TAKEN = {"handler": False, "waker": False, "resent": 0}
#: against the threads' changes of ``_TAKEN`` (reentrant: a handler may run in the main thread
#: while it holds the lock)
_TAKE_LOCK = threading.RLock()


def stop_as_ctrl_c() -> None:
    """SIGTERM (``kill``, ``timeout``, a batch scheduler's end of a job) and SIGHUP (the
    terminal closed) stop this process's command as a Ctrl-C does, so that what it started
    is stopped (``terminated``), a sweep's point and manifest say it was interrupted and the
    store is left as it was. The first one only: one that comes while the command stops does
    not cut its clean-up. A signal this process was started ignoring (``nohup``: SIGHUP)
    keeps being ignored. Forwarded as a SIGINT to itself; but a process started ignoring
    SIGINT (a shell script's background job, which the terminal's Ctrl-C is not for) keeps
    ignoring it, and its watches take the SIGTERM and SIGHUP themselves (``_signals``): a
    handler on SIGINT would be reset to the default in the programs it starts, where an
    ignored SIGINT stays ignored. Called once, from the main thread."""
    current = signal.getsignal(signal.SIGINT)
    if current is signal.SIG_IGN:
        _DEAF[0] = True
    elif current is not signal.default_int_handler:
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            _REPLACED[sig] = signal.signal(sig, _forward)


def _forward(signum, frame) -> None:
    """``stop_as_ctrl_c``'s handler of SIGTERM and SIGHUP outside the watches of a process
    started ignoring SIGINT, and everywhere in one that was not (a SIGINT to itself)."""
    if _DEAF[0]:
        if _take(signum):
            raise KeyboardInterrupt
        return
    if _TERMINATED[0] is not None:
        return
    _TERMINATED[0] = signum
    os.kill(os.getpid(), signal.SIGINT)


def _signals() -> tuple[int, ...]:
    """The signals the watches take: SIGINT, or in a process started ignoring it, the
    SIGTERM and SIGHUP it stops on (``stop_as_ctrl_c``)."""
    return tuple(_REPLACED) if _DEAF[0] else (signal.SIGINT,)


def _take(signum: int, by: str = "handler") -> bool:
    """Whether a SIGTERM or SIGHUP that reached a process started ignoring SIGINT is its
    interrupt, for a handler (the main thread's) or ``by`` the waker: the first one for
    each, or for a handler one sent again after an import."""
    with _TAKE_LOCK:
        if _TERMINATED[0] is None:
            _TERMINATED[0] = signum
        if by == "handler" and _TAKEN["resent"]:
            _TAKEN["resent"] -= 1
            return True
        first, _TAKEN[by] = not _TAKEN[by], True
        return first


def stop_at_once() -> None:
    """The handlers ``stop_as_ctrl_c`` replaced put back (the command has ended: nothing to
    stop as a Ctrl-C would)."""
    while _REPLACED:
        sig = next(iter(_REPLACED))
        signal.signal(sig, _REPLACED[sig])
        del _REPLACED[sig]  # (after: a Ctrl-C inside signal.signal leaves it to be put back again)


def terminated() -> bool:
    """Whether the interrupt came from a SIGTERM or SIGHUP (``stop_as_ctrl_c``): unlike a
    Ctrl-C at a terminal, nothing told the processes the command started."""
    return _TERMINATED[0] is not None


def interruptible(con):
    """Register ``con`` (a DuckDB connection; returned) so that a Ctrl-C during an active
    ``SigintWatch`` stops the statement it runs at once. DuckDB looks for Python's pending
    signals only between the tasks the calling thread runs: on several threads a long
    statement may run to its end (a ``tracekit sql`` scan ran on for minutes after Ctrl-C
    on the 2-core box, two times in three). Python's C-level handler writes each signal to
    the wakeup fd whatever the main thread is doing; the outermost watch's thread reads it
    and calls ``interrupt()`` on these connections (never inside ``held()``)."""
    _CONNECTIONS.add(con)
    return con


def _interrupt_statements() -> None:
    signals = _signals()
    watch = getattr(signal.getsignal(signals[0]), "__self__", None) if signals else None
    with _LOCK:
        _RECEIVED[0] += 1
        if isinstance(watch, SigintWatch) and watch._holding:
            return  # the block ends first; the watch raises the interrupt then
        for con in list(_CONNECTIONS):
            with contextlib.suppress(Exception):  # (closed meanwhile)
                con.interrupt()


def _stopped_statement() -> bool:
    """Whether the exception this thread is handling is, or came from, a DuckDB statement
    stopped by an interrupt: the waker stopped it before this handler ran (Python runs a
    handler only between bytecodes, so it runs after the statement has returned)."""
    err, seen = sys.exc_info()[1], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if type(err).__name__ == "InterruptException" or (
                isinstance(err, RuntimeError) and str(err).startswith("Query interrupted")):
            return True
        err = err.__cause__ or err.__context__
    return False


class _Waker:
    """A thread that interrupts the registered statements when SIGINT reaches the process,
    through the wakeup fd (main thread only; not where something else holds that fd)."""

    def __init__(self) -> None:
        self._r, self._w = socket.socketpair()
        self._w.setblocking(False)
        self._previous = signal.set_wakeup_fd(self._w.fileno(), warn_on_full_buffer=False)
        self.active = self._previous == -1
        if not self.active:  # (an event loop's): left to it
            signal.set_wakeup_fd(self._previous)
            self._close_sockets()
            return
        self._thread = threading.Thread(target=self._run, name="tracekit-sigint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                data = self._r.recv(64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGINT in data or next((_take(s, by="waker") for s in _signals() if s in data), False):
                _interrupt_statements()

    def _close_sockets(self) -> None:
        self._w.close()
        self._r.close()

    def close(self) -> None:
        if not self.active:
            return
        signal.set_wakeup_fd(-1)
        self._w.shutdown(socket.SHUT_RDWR)  # the thread's recv returns b""
        self._thread.join()
        self._close_sockets()


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
        self._handled = 0  # the SIGINTs this watch's handler ran for
        self._since: int | None = None  # _RECEIVED when the watch was entered
        self._until: int | None = None  # and when it exited
        self._previous = None
        self._holding = False
        self._deferred = False
        self._waker: _Waker | None = None
        self._retries: list[tuple[threading.Timer, dict]] = []  # interrupts to deliver again (imports)

    @property
    def count(self) -> int:
        """The SIGINTs that arrived while the watch was active: those its handler ran for, or
        those the waker read (its thread may count one before the handler runs, and an inner
        watch's handler counts those of its block)."""
        if self._since is None:  # never entered
            return self._handled
        until = _RECEIVED[0] if self._until is None else self._until
        return max(self._handled, until - self._since)

    def _handler(self, signum, frame) -> None:
        if signum != signal.SIGINT and not _take(signum):
            return  # (a SIGTERM after the first: the command is stopping)
        self._handled += 1
        if self._holding:
            self._deferred = True
            return
        if _importing(frame):
            state = {"fired": False}
            retry = threading.Timer(_RETRY_S, self._retry, (state,))
            retry.daemon = True
            self._retries.append((retry, state))
            retry.start()
            return
        if _stopped_statement():
            return  # the statement's error already unwinds the block; the count marks it an interrupt
        raise KeyboardInterrupt

    def __enter__(self) -> SigintWatch:
        self._since, self._until = _RECEIVED[0], None
        signals = _signals()
        current = signal.getsignal(signals[0]) if signals else None
        outermost = current is signal.default_int_handler or current is _forward
        if threading.current_thread() is threading.main_thread() and (
                outermost or isinstance(getattr(current, "__self__", None), SigintWatch)):
            self._previous = {sig: signal.signal(sig, self._handler) for sig in signals}
            if outermost:
                self._waker = _Waker()
        return self

    def _retry(self, state: dict) -> None:
        """An interrupt that came during an import, sent again while the watch is active
        (after it, ``__exit__`` raises it: sent then, another handler would take it)."""
        with _RETRY_LOCK:
            if self._previous is not None:
                state["fired"] = True
                if _DEAF[0]:
                    with _TAKE_LOCK:
                        _TAKEN["resent"] += 1
                    # (what the waker does for a SIGINT sent again; it takes the first SIGTERM only:
                    # a statement started after the import would run to its end)
                    _interrupt_statements()
                os.kill(os.getpid(), _TERMINATED[0] if _DEAF[0] else signal.SIGINT)

    def __exit__(self, *exc) -> None:
        deliver, previous = False, None
        try:
            with _RETRY_LOCK:  # (no retry is sent once this holds; one sent before is handled here)
                retries, self._retries = self._retries, []
                previous, self._previous = self._previous, None
            for retry, state in retries:
                retry.cancel()
                deliver = deliver or not state["fired"]
        finally:
            try:
                if self._waker is not None:
                    self._waker.close()
                    self._waker = None
                if self._since is not None:
                    self._until = _RECEIVED[0]
            finally:  # (whatever a late interrupt raised above, the handler before is back)
                previous = previous if previous is not None else self._previous
                self._previous = None
                for sig, handler in (previous or {}).items():
                    signal.signal(sig, handler)
        if deliver and exc[0] is None:  # a Ctrl-C during an import at the block's end: raised at its end
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self):
        """A block a Ctrl-C does not cut: one that arrives meanwhile is raised at its end."""
        with _LOCK:
            self._holding = True
        try:
            yield
        finally:
            self._holding = False
            if self._deferred:
                self._deferred = False
                raise KeyboardInterrupt


@contextlib.contextmanager
def stoppable():
    """A library call (a query, SQL, a diff) that Ctrl-C stops at once, raising
    KeyboardInterrupt as Python code does, not the "Query interrupted" RuntimeError or the
    tracekit error DuckDB's stopped statement became (a notebook's interrupt button sends
    the same SIGINT). ``Interrupted``, which says what the call left in the store, is
    raised as it is. Inside the CLI's watch it nests; outside the main thread it only
    converts the error."""
    with SigintWatch() as sigints:
        try:
            yield
        except Exception as err:
            if sigints.count and not isinstance(err, Interrupted):
                raise KeyboardInterrupt from err
            raise
