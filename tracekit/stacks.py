"""The sampled call stacks of an nsys run as a folded-stacks file, for flame-graph tools.

``export_stacks(tk, path, run=..., thread=..., range=..., python=...)`` writes one line per
distinct stack, ``outermost;...;hit function COUNT`` (the cpu-stacks query, every row; the
python-stacks query's with ``python``: the Python samples' stacks, each frame function
(file:line)): the format Brendan Gregg's flamegraph.pl reads, and speedscope and inferno open.
Only the CPU samples nsys unwound (one in ``--samples-per-backtrace``) have a stack. Written
through ``write_output`` (a temporary file renamed into place, never over the store),
gzip-compressed where the name ends in ``.gz`` (``stacks.folded.gz``: ``zcat`` it into
flamegraph.pl); a name that says another format (``.json``, ``.svg``,
``.xz``, also before ``.gz``) is refused (``outputs.text_output``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

#: what ends a line for the tools that read the file (Python's str.splitlines: \v, \f, \x1c-\x1e,
#: \x85, \u2028, \u2029 too)
_LINE_BREAKS = re.compile("[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


@dataclass
class StacksResult:
    run_id: int
    stacks: int   # distinct stacks written
    samples: int  # the samples they hold


def export_stacks(tk, path: str | os.PathLike, run: str | int | None = None, thread: str | None = None,
                  range: str | None = None, python: bool = False) -> StacksResult:  # noqa: A002 (the query's parameter name)
    """Write the run's CPU call stacks (``python``: its Python stacks), folded (see the module
    docstring); ``thread`` and ``range`` as the cpu-stacks query's. A run without such samples,
    or a selection that holds none (an empty file, which flamegraph.pl and speedscope refuse), is
    an error."""
    from .errors import QueryError
    from .outputs import text_file, text_output, write_output
    from .registry import check_traced, resolve_run

    gz = text_output(path, "a folded-stacks file", "stacks.folded")
    run_id = resolve_run(tk, run, "nsys", "export stacks", spans_runs=False)
    check_traced(tk, "export stacks", run_id, ["python_samples" if python else "cpu_samples"])
    query = "python-stacks" if python else "cpu-stacks"
    try:
        df = tk.query(query, run=run_id, thread=thread, range=range, limit=0)
    except QueryError as err:  # (a thread or range the run lacks: said as this command's)
        if not str(err).startswith(f"{query}: "):
            raise
        raise QueryError(f"export stacks: {str(err).removeprefix(f'{query}: ')}") from err
    if df.height == 0:  # (an empty file: flamegraph.pl and speedscope refuse it, and it says nothing)
        asked = [f"{o} {v!r}" for o, v in (("--thread", thread), ("--nvtx", range)) if v is not None]
        which = ("with a call stack" if not asked else f"that {asked[0]} selects" if len(asked) == 1 else
                 f"that {' and '.join(asked)} select together")
        raise QueryError(f"export stacks: run {run_id} holds no {'Python' if python else 'CPU'} sample {which}; "
                         "nothing to write")

    def write_file(tmp: Path) -> None:
        with text_file(tmp, gz) as fh:
            for stack, samples in zip(df["stack"], df["samples"], strict=True):
                # one stack a line: a line break in a function's name (anyone's text) would
                # start a stack of its own, with a count of its choosing
                fh.write(f"{_LINE_BREAKS.sub(' ', stack)} {samples}\n")

    write_output(path, write_file, tk.path)
    return StacksResult(run_id, df.height, int(df["samples"].sum()))
