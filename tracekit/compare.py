"""Several runs against one base: ``tracekit compare BASE RUN [RUN ...] [--repeat R ...]``.

Each run is compared with the base by ``tracekit.diff``'s rules (the same scopes, metrics,
noise floors and verdicts a ``diff BASE RUN`` gives), and the comparisons are put side by
side: a baseline against several variants (dense, block-sparse, cached), before against
every later build, several sweeps against one.

Repeats (``repeats``: captures of the base's own program and setup, again) measure the noise
instead of assuming it: per key and metric, the largest change of any repeat against the
base, to the far end of its interval (``noise_pct``; ``_held_by_the_repeats``); a run's change
no larger than that is not judged a change ("within
the repeats' noise"), whatever diff's rules made of it. The repeats are columns of their
own, and ``--gate`` does not count them. A repeat measures the noise of the scopes it has: the
rows of a scope it lacks (one captured without Python samples; without source lines, ``--by
source``) are judged without it, said in a warning.

Multi-rank jobs compare the same way (``jobs=True``, ``compare --jobs``, ``diff --jobs
--repeat``): each job against the base job by ``tracekit.job_diff``'s rules, a job's rows
(its columns: ``ranks``, ``top_rank``, ...) where a run's would be, and a repeat of the base job
measuring the noise of each key as a repeat of a run does.

``compare`` returns the long form, one row per (scope, key, metric, run): ``base_run`` and
``run`` (labels: a file or folder as given, else a run's name or a sweep's id; ``run`` an Enum
of them in the order given, the repeats first), ``repeat``
(the run is a repeat of the base), ``base`` and ``value`` (the base's and the run's value),
``delta``, ``delta_pct``, ``verdict``, ``p_value``, ``note``, ``delta_pct_low`` and
``delta_pct_high`` as ``diff`` gives them, and ``noise_pct`` (None without repeats). Rows
come in the order of the comparisons' own (largest GPU time moved first): a key comes where
it first comes in any of them. ``wide`` turns that into one row per (scope, key, metric), a
value and a change column per run: the terminal table.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

import polars as pl

from .errors import (
    CaptureWarning,
    ParamError,
    TracekitError,
    UntracedScopes,
    expect,
    warn_from_caller,
)

#: the long form's columns (diff's, with the run's label and its value named for it)
COLUMNS = ["scope", "key", "metric", "base_run", "run", "repeat", "base", "value", "delta", "delta_pct", "verdict",
           "p_value", "note", "delta_pct_low", "delta_pct_high", "noise_pct"]
#: ... of jobs compared (``jobs=True``): a job's rows' (``tracekit.job_diff``)
JOB_COLUMNS = ["scope", "key", "metric", "base_run", "run", "repeat", "base", "value", "delta", "delta_pct",
               "verdict", "ranks", "ranks_regressed", "ranks_improved", "ranks_added", "ranks_removed", "top_rank",
               "top_rank_delta_pct", "rank_delta_pct_min", "rank_delta_pct_max", "note", "noise_pct"]
#: the note of a change held because a repeat of the base moved as much
NOISE_NOTE = "within the repeats' noise"


def compare(tk, base: Any, runs: list[Any], by: list[str] | str | None = None,
            threshold_pct: float = 5.0, repeats: list[Any] | None = None, jobs: bool = False,
            workers: int | None = None, on_file: Any = None) -> pl.DataFrame:
    """Every run of ``runs`` against ``base`` (run ids, names, sweep ids, or files and run
    folders, ingested first: all of them kept, or, where a comparison fails, none), the
    ``repeats`` of the base first (module docstring). ``jobs``: ``base``, ``runs`` and
    ``repeats`` are multi-rank jobs (as ``tk.diff_jobs`` names them, folders included).
    ``workers``: the files (a job's folder: its exports) are ingested that many at once,
    and removed again where a comparison fails (``tk.diff``'s; ``on_file(done, total)``
    called as each lands)."""
    expect(runs, (list, tuple), "compare: runs")
    expect(jobs, bool, "compare: jobs")
    df, labels, _ = _comparisons(tk, base, runs, by, threshold_pct, repeats, "compare", jobs, workers, on_file)
    first = df.group_by("scope", "key", "metric").agg(pl.col("_order").min().alias("_first"))
    run_order = {label: i for i, label in enumerate(labels[1:])}
    df = (df.join(first, on=["scope", "key", "metric"])
          .with_columns(pl.col("run").replace_strict(run_order, return_dtype=pl.Int64).alias("_run"))
          .sort("_first", "scope", "key", "metric", "_run")
          .with_columns(pl.col("run").cast(pl.Enum(labels[1:]))))  # (the order given, whichever rows a run has)
    return df.rename({"new": "value"}).select(JOB_COLUMNS if jobs else COLUMNS)


def diff_with_repeats(tk, base: Any, new: Any, repeats: list[Any], by: list[str] | str | None = None,
                      threshold_pct: float = 5.0, jobs: bool = False, workers: int | None = None,
                      on_file: Any = None) -> pl.DataFrame:
    """``diff base new`` with the noise measured by ``repeats`` of the base (``tracekit diff
    --repeat``): diff's rows, columns and order, with ``noise_pct`` and the changes no larger
    than it held, exactly as ``compare base new --repeat ...`` judges ``new``. ``jobs``: of
    multi-rank jobs (``diff --jobs --repeat``), a job's rows."""
    from .diff import SCHEMA
    from .job_diff import SCHEMA as JOB_SCHEMA

    df, _ = _with_repeats(tk, base, new, repeats, by, threshold_pct, jobs, workers, on_file)
    return df.select(*(JOB_SCHEMA if jobs else SCHEMA), "noise_pct")


def jobs_with_repeats(tk, base: Any, new: Any, repeats: list[Any], by: list[str] | str | None = None,
                      threshold_pct: float = 5.0, workers: int | None = None,
                      on_file: Any = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``diff --jobs base new --repeat ...``'s two answers from one comparison, as
    ``job_diff.compare_jobs`` gives them without repeats: the job's rows
    (``diff_with_repeats(jobs=True)``'s), and its ranks' rows (``diff``'s columns, ``rank``
    and ``noise_pct``; each rank's change held by the repeats' of that rank), from which the
    job's are made."""
    from .diff import SCHEMA
    from .job_diff import SCHEMA as JOB_SCHEMA

    df, ranks = _with_repeats(tk, base, new, repeats, by, threshold_pct, True, workers, on_file)
    return (df.select(*JOB_SCHEMA, "noise_pct"),
            ranks.filter(~pl.col("repeat")).select(*SCHEMA, "rank", "noise_pct"))


def _with_repeats(tk, base: Any, new: Any, repeats: list[Any], by, threshold_pct: float,
                  jobs: bool, workers: int | None = None,
                  on_file: Any = None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """``new`` against ``base``, the repeats' noise applied: its rows in diff's order, and
    for jobs the ranks' rows of every comparison (``_comparisons``)."""
    command = "diff --jobs" if jobs else "diff"
    expect(repeats, (list, tuple), f"{command}: repeats")
    if not repeats:
        raise ParamError(f"{command}: the repeats name no {'job' if jobs else 'run'}; give a capture of the base "
                         "again (--repeat R, -p repeats=R)")
    df, _, ranks = _comparisons(tk, base, [new], by, threshold_pct, repeats, command, jobs, workers, on_file)
    return df.filter(~pl.col("repeat")).sort("_order"), ranks


def _comparisons(tk, base: Any, runs: list[Any], by, threshold_pct: float, repeats: list[Any] | None,
                 command: str, jobs: bool = False, workers: int | None = None,
                 on_file: Any = None) -> tuple[pl.DataFrame, list[str], pl.DataFrame | None]:
    """Each of ``repeats`` and ``runs`` against ``base`` by diff's rules (``jobs``: by
    ``job_diff``'s, of jobs), one frame: diff's columns (a job's), ``_order`` (the row's
    place in its own comparison), ``base_run``, ``run``, ``repeat``, ``noise_pct``, and the
    changes within the repeats' noise held; with the labels of the base and of each run, and,
    for jobs with repeats, the ranks' rows so held (``_jobs_held``; else None)."""
    from . import diff as _diff
    from . import job_diff
    from .ingest import run_folders

    what = "job" if jobs else "run"
    expect(repeats, (list, tuple, type(None)), f"{command}: repeats")
    n_repeats = len(repeats or [])
    runs = [*(repeats or []), *runs]
    if len(runs) == n_repeats:
        raise ParamError(f"{command}: give at least one {what} to compare with the base (besides its repeats)")
    for ref in (base, *runs):
        expect(ref, (str, int, os.PathLike), f"{command}: a {what}")
    if jobs:  # (a --by that names no scope: before any file is ingested)
        job_diff.scopes_asked(by)
    else:
        _diff.scopes_asked(by, _diff.SCOPES)
    # (files and folders as given; a job's folder stands for its exports)
    if jobs:
        given = [str(r).strip() if job_diff.is_job_folder(r) else None for r in (base, *runs)]
        inputs = [f for g in given if g is not None for f in job_diff.job_exports(Path(g))]
    else:
        given = [str(r).strip() if _diff._is_file(r) else None for r in (base, *runs)]
        with warnings.catch_warnings():  # (resolve says it, where a folder is ingested)
            warnings.simplefilter("ignore", CaptureWarning)
            inputs = run_folders([Path(g) for g in given if g is not None])  # (a sweep's folder: its run folders)
    # (the inputs ingested first, named as one command's: all kept, or none where it fails)
    with tk._comparing([] if tk.read_only else inputs, workers, on_file):
        if jobs:  # (folders ingested here; each job with its ranks' runs: a folder's, those it holds)
            refs = [as_command(command, job_diff.job_of, tk, r, "base" if i == 0 else "job") for i, r in enumerate((base, *runs))]
            labels, said = job_diff.job_labels([j.name for j in refs], given), [f"job {j.name}" for j in refs]
        else:  # (files ingested here; then each by its run id)
            sides = [as_command(command, _diff.resolve, tk, r) for r in (base, *runs)]
            refs = [str(s.run_id) if s.run_id is not None else s.sweep for s in sides]
            labels, said = _labels(sides, given), [s.label for s in sides]
        for i, ref in enumerate(refs[1:], start=1):
            if ref in refs[:i]:
                again = "the base" if ref == refs[0] else "given twice"
                raise ParamError(f"{command}: {(base, *runs)[i]!r} is {said[i]}, {again}; name each {what} once")
        frames, longs = [], []
        # what the comparisons say, each text once, with the runs it was said of (a base that
        # lacks a scope, or differs in setup from all of them, is said once, not once per run)
        told: dict[tuple[str, type[Warning], bool], tuple[list[int], tuple[str, int] | None]] = {}
        wanted: set[str] = set()  # (the scopes the runs are compared in: a repeat's noise, where it has them)
        measured = job_diff.measured_scopes if jobs else _diff.measured_scopes
        for ref in refs[1 + n_repeats:] if n_repeats else []:
            wanted.update((measured(tk, refs[0], ref, by) or ([],))[0])
        # (the ranks of the jobs compared: a repeat job's noise is measured on those; the points of
        # the sweeps compared: a repeat sweep's)
        compared = {k for job in refs[1 + n_repeats:] for k, _ in job.ranks} if jobs and n_repeats else set()
        at = _diff.at_points(tk.con, sides[1 + n_repeats:]) if n_repeats and not jobs else None
        try:
            for i, (ref, label) in enumerate(zip(refs[1:], labels[1:], strict=True)):
                lacks: list[str] = []  # (what a repeat cannot measure the noise of, said after its comparison's own)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", CaptureWarning)
                    if jobs:
                        of, ref = _on_ranks(refs[0], ref, compared) if i < n_repeats else (refs[0], ref)
                        scopes = _repeat_scopes(command, tk, of, ref, label, by, wanted, lacks) if i < n_repeats else by
                        df, long = (as_command(command, job_diff.compare_jobs, tk, of, ref, scopes, threshold_pct,
                                               True, None, "repeat" if i < n_repeats else "new") if scopes != [] else
                                    (pl.DataFrame(schema=job_diff.SCHEMA),
                                     pl.DataFrame(schema={**_diff.SCHEMA, "rank": pl.Int64})))
                        longs.append(long)
                    else:
                        try:
                            df = (_repeat_diff(command, tk, refs[0], ref, label, by, threshold_pct, wanted, sides,
                                               caught, lacks, at) if i < n_repeats else
                                  _repeat_or_run(command, tk, refs[0], ref, by, threshold_pct))
                        except TracekitError as err:  # (a repeat's said to be one, but where the base lacks the lines)
                            of_repeat = i < n_repeats and getattr(err, "side", 1) == 1
                            raise _said_as_given(err, command, sides, label if of_repeat else None) from None
                for w in caught:
                    if i < n_repeats and issubclass(w.category, UntracedScopes):
                        continue  # (a repeat's lacks are said as the rows it cannot measure the noise of: lacks)
                    text, ours = str(w.message), issubclass(w.category, CaptureWarning)
                    if ours:  # (said after whom it is of: _say)
                        text = text.removeprefix("diff --jobs: ").removeprefix("diff: ")
                    whom = told.setdefault((text, w.category, ours), ([], (w.filename, w.lineno)))[0]
                    if i not in whom:
                        whom.append(i)
                for text in lacks:
                    told.setdefault((text, CaptureWarning, False), ([], None))
                frames.append(df.with_row_index("_order").with_columns(
                    pl.lit(labels[0]).alias("base_run"), pl.lit(label).alias("run"),
                    pl.lit(i < n_repeats).alias("repeat")))
        finally:  # (what the comparisons made said, also where a later one failed)
            _say(command, told, labels[1:], n_repeats)
    if jobs and n_repeats:
        held, ranks = _jobs_held(frames, longs, labels, n_repeats)
        return pl.concat(held), labels, ranks
    return _held_by_the_repeats(pl.concat(frames)), labels, None


def _on_ranks(base, repeat, ranks: set[int]):
    """A repeat of the base job and the base (``job_diff.Job``), each on those of its ranks
    that the jobs compared with the base have (``ranks``): the noise is measured where it is
    applied, and what the repeat's other ranks lack or missed is no matter of the comparison
    (a compared rank the repeat lacks is still said). As given where the two share none of
    those ranks."""
    on_b, on_r = ([(k, r) for k, r in job.ranks if k in ranks] for job in (base, repeat))
    if not {k for k, _ in on_b} & {k for k, _ in on_r}:
        return base, repeat
    return base._replace(ranks=on_b), repeat._replace(ranks=on_r)


def _say(command: str, told: dict, labels: list[str], n_repeats: int) -> None:
    """Says each text the comparisons gave (``told``: (text, category, tracekit's) -> (the
    comparisons that said it, indices of ``labels``, the repeats' first; where it was said)),
    once; tracekit's after whom it is of. Of no one where every comparison that could say it
    did (the base's: its lack of a scope, which a repeat says otherwise, or a setup all of
    them differ from it in), or where it is the one run's of a diff with repeats, which is
    not named; else the runs' labels, the repeats' marked (``B and C, R (a repeat of the
    base): ...``)."""
    from .registry import listed

    for (text, category, ours), (whom, at) in told.items():
        if ours:
            could = [i for i in range(len(labels)) if i >= n_repeats or not issubclass(category, UntracedScopes)]
            if set(whom) >= set(could) or (command != "compare" and min(whom) >= n_repeats):
                text = f"{command}: {text}"
            else:
                runs = [labels[i] for i in whom if i >= n_repeats]
                repeats = [labels[i] for i in whom if i < n_repeats]
                groups = [listed(runs)] if runs else []
                if repeats:
                    groups.append(f"{listed(repeats)} ({'repeats' if len(repeats) > 1 else 'a repeat'} of the base)")
                text = f"{command}: {', '.join(groups)}: {text}"
        warn_from_caller(text, category, at=at)


def _repeat_scopes(command: str, tk, base: Any, ref: Any, label: str, by, wanted: set[str], lacks: list[str],
                   at: frozenset[str] | None = None):
    """What a repeat of the base (``ref``, labelled ``label``; a run, or a job's ``Job``) is
    compared in: ``by``, or where it lacks scopes of ``wanted`` (those the runs are compared
    in), the scopes it has of those asked (``by`` as given where none were), the ones it
    lacks added to ``lacks`` as a warning's text, their rows judged without its noise; []
    where it has none of those asked. ``at``: a repeat sweep's points compared (``diff``'s)."""
    from . import diff as _diff
    from . import job_diff
    from .registry import listed

    jobs = isinstance(ref, job_diff.Job)
    got = job_diff.measured_scopes(tk, base, ref, by, wanted) if jobs else \
        _diff.measured_scopes(tk, base, ref, by, wanted, at)
    if got is None or not got[1]:
        return by
    # (what lacks them: the run, [nsys ...] has no ...; a job's ranks, each: rank 3 [...] has no ...)
    lacks.append(f"{command}: {label} (a repeat of the base){':' if jobs else ''} {got[2]}: the "
                 f"{listed(got[1])} rows are judged without its noise")
    asked = job_diff.scopes_asked(by) if jobs else _diff.scopes_asked(by, _diff.SCOPES)
    return got[0] if asked else by


def _repeat_diff(command: str, tk, base: str, ref: str, label: str, by, threshold_pct: float, wanted: set[str],
                 sides: list, caught: list, lacks: list[str], at: frozenset[str] | None) -> pl.DataFrame:
    """``diff`` of a repeat of the base (``ref``, labelled ``label``) in the scopes it has of
    those asked (``_repeat_scopes``), and without source lines it lacks (``--by source``),
    said in ``lacks``, their rows judged without its noise; a repeat sweep at the points of
    the sweeps compared with the base (``at``, ``diff.at_points``). ``caught``: the warnings
    its comparison gave, those of a first try without the lines left out where it is compared
    again."""
    from . import diff as _diff

    scopes = _repeat_scopes(command, tk, base, ref, label, by, wanted, lacks, at)
    try:
        return _repeat_or_run(command, tk, base, ref, scopes, threshold_pct, at)
    except _diff.NoPointsCompared:
        lacks.append(f"{command}: {label} (a repeat of the base) has no run at the points compared: every row is "
                     "judged without its noise")
        return pl.DataFrame(schema=_diff.SCHEMA)
    except _diff.NoSourceLines as err:
        if err.side == 0:  # (the base's lines: the question asked)
            raise
        lacks.append(f"{command} --by source: a repeat of the base: "
                     + str(_said_as_given(err, command, sides, None)).removeprefix("--by source: ").partition("; ")[0]
                     + ": the lines are judged without its noise")
    others = [s for s in _diff.scopes_asked(scopes, _diff.SCOPES) if s != "source"]
    if others:
        caught.clear()  # (the comparison without the lines says them again)
    return _repeat_or_run(command, tk, base, ref, others, threshold_pct, at)


def _repeat_or_run(command: str, tk, base: str, ref: str, scopes, threshold_pct: float,
                   at: frozenset[str] | None = None) -> pl.DataFrame:
    """``diff`` of one comparison in ``scopes`` (as ``by``, checked by the caller; an empty
    list: a repeat that has none of the scopes asked, which measures nothing: no row), at
    points ``at`` (``diff``'s)."""
    from . import diff as _diff

    if isinstance(scopes, list) and not scopes:
        return pl.DataFrame(schema=_diff.SCHEMA)
    return as_command(command, _diff.diff, tk, base, ref, scopes, threshold_pct, at)


def _said_as_given(err, command: str, sides: list, repeat: str | None):
    """A comparison's error with each file this command ingested named as given, not by the
    run it would have been (it is not kept); a repeat's said to be one (``repeat``: its label)."""
    text = str(err)
    for s in sides:
        if s.ingested and s.run_id is not None:
            text = text.replace(f"run {s.run_id} ({s.name})", s.label)
    if repeat is not None:
        text = f"{command}: --repeat {repeat}: {text.removeprefix(f'{command}: ')}"
    return _reworded(err, text)


def _reworded(err, text: str):
    """``err`` said as ``text``: of its class, with what it carries besides (a run folder, a side)."""
    out = type(err)(text)
    out.__dict__.update(err.__dict__)
    return out


def as_command(command: str, fn, *args):
    """``fn(*args)``, a comparison's error said as ``command``'s (``compare`` says
    ``compare: ...`` of runs, ``compare --jobs: ...`` of jobs; a chart, ``chart job-diff: ...``)."""
    from .errors import TracekitError

    try:
        return fn(*args)
    except TracekitError as err:
        text = str(err)
        prefix = next((p for p in ("diff --jobs: ", "diff: ") if text.startswith(p)), None)
        if prefix is None or command in ("diff", "diff --jobs"):
            raise
        said = command if command.startswith("chart ") else f"{command}{' --jobs' if '--jobs' in prefix else ''}"
        raise _reworded(err, f"{said}: {text.removeprefix(prefix)}") from None


def _jobs_held(frames: list[pl.DataFrame], longs: list[pl.DataFrame], labels: list[str],
               n_repeats: int) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """The jobs' rows (``frames``, the first ``n_repeats`` the repeats'; ``labels``: the base
    job's, then each one's), the repeats' noise applied rank by rank: a rank's change
    (``longs``: each comparison's ranks' rows) no larger than the repeats' change of its key on
    that rank is held, and the job's row is made again from its ranks' (``job_diff.aggregate``):
    a job's row alone would hide a rank that moved where another moved back. ``noise_pct``: the
    repeats' largest change of the key on any rank (to the far end of its interval). The job scope (the job's own time, which no
    rank has) is held as a run's row is. Also the ranks' rows so held, of every comparison
    (``_cmp``: its place; ``repeat``)."""
    from .job_diff import SCHEMA, aggregate

    keys = ["scope", "key", "metric"]
    ranks = _held_by_the_repeats(pl.concat([long.with_columns(pl.lit(i).alias("_cmp"), pl.lit(i < n_repeats)
                                                              .alias("repeat")) for i, long in enumerate(longs)]),
                                 [*keys, "rank"])
    own = _held_by_the_repeats(pl.concat([f.filter(pl.col("scope") == "job").with_columns(pl.lit(i).alias("_cmp"))
                                          for i, f in enumerate(frames)]))
    cols = [*SCHEMA, "noise_pct"]
    out = []
    for i in range(len(frames)):
        mine = ranks.filter(pl.col("_cmp") == i)
        noise = mine.group_by(keys).agg(pl.col("noise_pct").max())
        job = aggregate(mine).join(noise, on=keys, how="left", maintain_order="left").select(cols)
        rows = pl.concat([own.filter(pl.col("_cmp") == i).select(cols), job], how="vertical")
        out.append(rows.with_row_index("_order").with_columns(
            pl.lit(labels[0]).alias("base_run"), pl.lit(labels[1 + i]).alias("run"),
            pl.lit(i < n_repeats).alias("repeat")))
    return out, ranks


def _held_by_the_repeats(df: pl.DataFrame, keys: list[str] | None = None) -> pl.DataFrame:
    """``noise_pct`` per key and metric (``keys``): the repeats' largest change against the
    base, to the far end of its interval (``delta_pct_low``, ``delta_pct_high``, where the rows
    have one); and the changes of the other runs no larger than it held (``NOISE_NOTE``).
    The interval, not the change alone: a run is a capture of the program as a repeat is, and
    one that landed where the repeat did is as often a little beyond the repeat's change as
    within it (tests/data/hstu_capture_python_again against _again2, hstu_capture_python the
    repeat: the attention kernel's time +13.5 % in two NVTX paths where the repeat moved it
    +13.4 % and +13.0 %, the new run 0.1-0.2 % from the repeat)."""
    keys = keys or ["scope", "key", "metric"]
    ends = [pl.col(c).abs() for c in ("delta_pct_low", "delta_pct_high") if c in df.columns]
    noise = (df.filter(pl.col("repeat") & pl.col("delta_pct").is_not_null())
             .group_by(keys).agg(pl.max_horizontal(pl.col("delta_pct").abs(), *ends).max().alias("noise_pct")))
    df = df.join(noise, on=keys, how="left", maintain_order="left")
    held = (~pl.col("repeat") & pl.col("verdict").is_in(["regressed", "improved"]) & pl.col("noise_pct").is_not_null()
            & (pl.col("delta_pct").abs() <= pl.col("noise_pct")))
    note = pl.format(NOISE_NOTE + " (±{}%)", pl.col("noise_pct").round(2))
    return df.with_columns(
        pl.when(held).then(pl.lit("unchanged")).otherwise(pl.col("verdict")).alias("verdict"),
        pl.when(held).then(pl.when(pl.col("note").fill_null("") == "").then(note)
                           .otherwise(pl.format("{}; {}", pl.col("note"), note))).otherwise(pl.col("note")).alias("note"))


#: the table's own columns: no run's label may be one of them
TABLE_COLUMNS = ("scope", "key", "metric")


def _labels(sides, given: list[str | None]) -> list[str]:
    """A column label per side: a file or folder as given, else the run's name or the
    sweep's id, without the path parts every label shares at its start and at its end
    (``/data/base_a/export.sqlite.xz``, ``/data/regressed/export.sqlite.xz``: ``base_a``,
    ``regressed``), as jobs' are (``job_diff.job_labels``); a label two sides share, or one of
    the table's own columns (a run named ``metric``), gets its run id (a sweep, its place)."""
    from .names import without_shared_parts

    names = without_shared_parts([g.rstrip("/") if g is not None else s.sweep if s.run_id is None else str(s.name)
                                  for s, g in zip(sides, given, strict=True)])
    taken = {*TABLE_COLUMNS, f"{names[0]} (base)"}
    out = []
    for i, (n, s) in enumerate(zip(names, sides, strict=True)):
        if names.count(n) > 1 or n in taken:
            n = f"{n} (run {s.run_id})" if s.run_id is not None else f"{n} (#{i})"
        out.append(n)
    return out


def runs_of(df: pl.DataFrame) -> list[str]:
    """The runs compared that have rows in ``df``, in the order given (``compare``'s ``run``
    is an Enum of the labels in that order: a key of the second run alone may come first)."""
    present = set(df["run"].cast(pl.String).to_list())
    order = df.schema["run"].categories if isinstance(df.schema["run"], pl.Enum) else dict.fromkeys(df["run"].to_list())
    return [r for r in order if r in present]


def labels_given(df: pl.DataFrame, repeats: int = 0) -> list[str]:
    """The labels of the runs ``compare`` compared (``df`` its long form, however filtered),
    in the order given, the first ``repeats`` (the repeats') left out, rows or none."""
    return list(df.schema["run"].categories)[repeats:]


def changed_first(df: pl.DataFrame, limit: int) -> pl.DataFrame:
    """The keys a reader sees first: every key judged changed in any run, or with nothing to
    compare in one (``diff.said_first``; in the comparisons' order, however many), then the
    largest others up to ``limit`` keys in all (0: all), as diff's table shows its rows."""
    from .diff import said_first

    keys = ["scope", "key", "metric"]
    per = df.group_by(keys, maintain_order=True).agg(said_first().any().alias("_moved"))
    if limit and per.height > limit:
        per = per.with_row_index("_i")
        moved = per.filter(pl.col("_moved"))
        rest = per.filter(~pl.col("_moved")).head(max(limit - moved.height, 0))
        per = pl.concat([moved, rest]).sort("_i").drop("_i")
    return per.select(keys).join(df, on=keys, how="left", maintain_order="left")


def wide(df: pl.DataFrame, among: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per (scope, key, metric): the base's value, then per run its value and its
    change against the base (``200.788 ms (+40.9%, regressed)``; the change alone where
    unchanged), in human units (``tracekit.diff.display``'s). Where the base's value differs
    by run (jobs compared over the ranks each shares with the base), each cell starts with
    its own (``21.346 ms -> 24.537 ms (...)``) and the base's column says so. Keys are told
    apart from ``among``'s (every row compared, where ``df`` is the rows shown)."""
    from .diff import _human, short_keys

    repeat = set(df.filter(pl.col("repeat"))["run"].to_list())
    shown = {run: f"{run} (repeat)" if run in repeat else run for run in runs_of(df)}
    runs = list(shown.values())
    base = f"{df['base_run'][0]} (base)" if df.height else "base"
    short = short_keys(df if among is None else among)
    bases: dict[tuple, set] = {}
    for r in df.iter_rows(named=True):
        if r["base"] is not None:
            bases.setdefault((r["scope"], r["key"], r["metric"]), set()).add(r["base"])
    rows: dict[tuple, dict] = {}
    for r in df.iter_rows(named=True):
        k = (r["scope"], r["key"], r["metric"])
        row = rows.setdefault(k, {"scope": r["scope"], "key": short[r["key"]], "metric": r["metric"], base: ""})
        value = _human(r["metric"], r["value"], r["base"]) if r["value"] is not None else ""
        if len(bases.get(k, ())) > 1:
            row[base] = "(by run)"
            value = f"{_human(r['metric'], r['base'], r['value']) if r['base'] is not None else ''} -> {value}".strip()
        elif r["base"] is not None:
            row[base] = _human(r["metric"], r["base"], r["value"])
        row[shown[r["run"]]] = _cell(r, value)
    cols = ["scope", "key", "metric", base, *runs]
    return pl.DataFrame([[row.get(c, "") for c in cols] for row in rows.values()],
                        schema={c: pl.Utf8 for c in cols}, orient="row")


def table(df: pl.DataFrame, limit: int):
    """``tracekit compare``'s terminal table (a ``table.Rows``): ``wide``'s rows of the keys
    ``changed_first`` shows, each run's column a worded value wrapped where the
    terminal is narrow, keys narrowed further as diff's table
    narrows them (``tracekit.diff.shorten_key``: an ncu key its kernel, then its NVTX path's end;
    a source line's its location)."""
    from .diff import key_floor, label_shortener, short_keys
    from .table import Rows

    rows = Rows.from_polars(wide(changed_first(df, limit), df))
    rows.worded = tuple(c for c in rows.columns if c not in TABLE_COLUMNS)
    labels = short_keys(df)
    rows.shorteners = {"key": label_shortener(df, labels)}
    # (a key that says what it is, and each value with its change: else one block per row)
    rows.floors = {"key": key_floor(df, labels), **{c: max((_change_width(r[i]) for r in rows.rows if r[i]), default=0)
                                            for i, c in enumerate(rows.columns) if c in rows.worded}}
    return rows


def _change_width(cell: str) -> int:
    """The width a run's cell needs for its value and change (``2.544 ms (+102.1%``), its
    verdict cut after them (``…``): the whole cell where it has no verdict. A job's verdict
    on some of its ranks keeps how many (``1,512 (+0.0%, regressed on 1/4``): cut before
    them, the job's unmoved total would read as regressed."""
    head, said, rest = cell.partition(", ")
    if not said:
        return len(cell)
    some = _SOME_RANKS.match(rest)
    return len(head) + (len(said) + some.end() if some else 0) + 1


#: a job's verdict on fewer than all of its ranks (``regressed on 1/4 ranks``), to its count
_SOME_RANKS = re.compile(r"(?:regressed|improved) on (\d+)/(?!\1 )\d+")


def _cell(r: dict, value: str) -> str:
    verdict = r["verdict"]
    if r.get(f"ranks_{verdict}") is not None and r.get("ranks"):  # (a job's row: on how many of its ranks)
        verdict = f"{verdict} on {r[f'ranks_{verdict}']}/{r['ranks']} ranks"
    if r["verdict"] in ("added", "removed"):
        return f"{value} ({verdict})".strip()
    from .diff import POINT_FAILED

    if not value and POINT_FAILED in (r["note"] or ""):  # (a sweep point whose capture failed on one side)
        value = "capture failed"
    pct = "" if r["delta_pct"] is None else f"{r['delta_pct']:+z.1f}%"
    why = held(r["note"]) if r["verdict"] == "unchanged" else verdict
    change = ", ".join(p for p in (pct, why) if p)
    return f"{value} ({change})" if change else value


#: why a change was not judged, in a word or two, from diff's notes (first match)
_HELD = (("host-timed", "host-timed"), ("not significant", "not significant"), ("SM clock", "clock"),
         ("immaterial", "immaterial"), ("not judged", "not judged"), ("differs", "not judged"))


def held(note: str | None) -> str:
    """What held a change back from a verdict (``host-timed``, ``not significant``, ``clock``,
    ...), or '' where nothing did: identical, or within the threshold or the noise. (A note
    of a change the machine moved says how far within its limit: the machine held it.)"""
    from .diff import HELD_WORDS, held_by

    text = note or ""
    if NOISE_NOTE in text:
        return "repeats' noise"
    if (moved := held_by(text)) is not None:
        return HELD_WORDS[moved]
    if "within" in text or text.endswith("identical"):
        return ""
    return next((word for part, word in _HELD if part in text), "")


def counts(df: pl.DataFrame) -> list[str]:
    """Per run, how many rows each verdict has (``opt: 3 regressed, 2 improved, 40 unchanged,
    33 not judged``), counted as diff's table counts them (``tracekit.diff.shown_verdicts``: a
    change held back from any verdict, host-timed, is ``not judged``, not ``unchanged``)."""
    from .diff import verdict_counts

    out = []
    repeat = set(df.filter(pl.col("repeat"))["run"].to_list())
    for run in runs_of(df):
        got = verdict_counts(df.filter(pl.col("run") == run))
        out.append(f"{run}{' (repeat)' if run in repeat else ''}: " + ", ".join(f"{n} {v}" for v, n in got))
    return out
