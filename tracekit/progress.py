"""The one progress bar of long commands (ingest --workers, diff and compare of files, capture, sweep): on stderr,
and only when stderr is a terminal, so pipes and logs get none."""

from __future__ import annotations

import contextlib
import sys


def progress_bar(transient: bool = True):
    """A rich ``Progress`` (description, bar, done/total, elapsed) drawn on stderr, or
    None when stderr is no terminal. ``transient``: the bar is erased when it stops."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=transient)


@contextlib.contextmanager
def steps(transient: bool = True):
    """Bars of named steps, each drawn as its first count comes: yields ``step(what)``, the
    ``(done, total)`` callback of that step's bar (None where stderr is no terminal)."""
    bar = progress_bar(transient)
    if bar is None:
        yield lambda what: None
        return
    tasks: dict[str, int] = {}

    def step(what: str):
        def done(n: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=n, total=total)
        return done

    with bar:
        yield step
