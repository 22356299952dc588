"""The one progress bar of long commands (ingest --workers, capture, sweep): on stderr,
and only when stderr is a terminal, so pipes and logs get none."""

from __future__ import annotations

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
