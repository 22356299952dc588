"""Two multi-rank jobs compared rank by rank: ``tk.diff_jobs(base, new)``.

A job is the runs that are ranks of it (``tracekit.ranks``: one nsys export per rank);
``base`` and ``new`` name a job by any of its ranks' runs (id or name, as ``--run`` does
for ``rank-summary``), by the job itself (``tracekit query jobs``), or by a folder holding its
exports (``job_exports``: ingested first, as ``diff`` ingests a file, and compared as they are
in it; a comparison that fails keeps none of them). Rank r of the base
job is compared with rank r of the new one by ``tracekit.diff``'s rules (the same scopes,
metrics, noise floors and verdicts: ``diff RUN_R_BASE RUN_R_NEW``), over the nsys scopes
every pair of ranks has; ranks in one job only are left out and said so, as are pairs where
one rank's capture traced CUDA and holds no CUDA event while the other's holds some (its
window missed the program's GPU work: each kernel would read as removed on that rank),
where a scope of CUDA's events is compared. A job captured
again under the same path is a job of its own (``JOB#2``, ``rank_captures``): ``diff --jobs
1 5`` compares the two captures by a run of each. A run named for a job must be its rank's
latest run of its capture (``rank_runs``): naming a run that the same capture ingested again
took the place of is an error, not the later run against itself.

Each (scope, key, metric) gets one row for the job:

* ``base`` and ``new``: the ranks' values summed for what adds up (times in all,
  counts, GPU busy time: ``ADDITIVE``), the median rank's for a median (``med_ns``,
  ``range_med_ns``);
* ``verdict``: the job's, from the ranks' own: ``regressed`` where any rank regressed (a
  rank's harm is the job's, whatever the others did), else ``added``, ``improved``,
  ``removed`` where any rank was so, else ``unchanged``. ``note``: the common note where every
  rank was judged alike for one reason, else which ranks were judged what, with their
  changes, and why unchanged ranks were held (``regressed on rank 1 (+50.0 %); improved on
  rank 2 (-33.3 %); unchanged on ranks 0, 3 (identical)``);
* ``ranks``: ranks compared that have the key on either side; ``ranks_regressed``,
  ``ranks_improved``, ``ranks_added``, ``ranks_removed``: how many ranks were judged so;
  ``top_rank`` and ``top_rank_delta_pct``: the rank whose value moved
  most (largest ``|delta_pct|``); ``rank_delta_pct_min`` and ``rank_delta_pct_max``: the
  ranks' changes from least to most.

The ``job`` scope is the job's own time, which no single rank shows: per NVTX path, each
instance (its place in start order on every rank, as ``stragglers`` matches them) lasts as
long as the job's slowest rank took, over the ranks both jobs have. Metrics ``job_total_ns``
(those durations summed) and ``job_med_ns`` (their median), judged as the
nvtx scope's wall times are: host-timed where the ranks traced CUDA (reported, with the
Mann-Whitney p-value of the instances, never judged: identical captures differ there by
tens of per cent, tests/data/nsys_jobs/base against base_again: the step's median 41 % apart), beyond
``diff.HOST_NOISE_PCT`` where none did; ``slowest_rank``: the rank slowest in most instances,
the lowest of ranks tied there, the tie said in the note (a straggler that moved, or other ranks
tied, is a difference, with no better/worse direction). The job rows come
first, the paths the job spends most time in first, then the rest in the order the ranks'
diffs give them (largest change in GPU time first, on the rank where it moved most).

``per_rank=True`` gives the ranks' own rows instead: ``diff``'s columns with ``rank``.
Each rank's diff runs as ``diff`` would; their warnings (setups that differ, a capture's
status) are said once each.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from .diff import NSYS_SCOPES
from .errors import (
    CaptureWarning,
    InputError,
    ParamError,
    QueryError,
    UntracedScopes,
    expect,
    warn_from_caller,
)
from .names import RUN_ID, ranks_text

#: the scopes a job is compared in: its own time, then the nsys scopes of its ranks' runs
SCOPES = ("job", *NSYS_SCOPES)

#: the columns of the job's rows, in order
COLUMNS = ["scope", "key", "metric", "base", "new", "delta", "delta_pct", "verdict", "ranks", "ranks_regressed",
           "ranks_improved", "ranks_added", "ranks_removed", "top_rank", "top_rank_delta_pct", "rank_delta_pct_min",
           "rank_delta_pct_max", "note"]
SCHEMA = {"scope": pl.Utf8, "key": pl.Utf8, "metric": pl.Utf8, "base": pl.Float64, "new": pl.Float64,
          "delta": pl.Float64, "delta_pct": pl.Float64, "verdict": pl.Utf8, "ranks": pl.Int64,
          "ranks_regressed": pl.Int64, "ranks_improved": pl.Int64, "ranks_added": pl.Int64,
          "ranks_removed": pl.Int64, "top_rank": pl.Int64,
          "top_rank_delta_pct": pl.Float64, "rank_delta_pct_min": pl.Float64, "rank_delta_pct_max": pl.Float64,
          "note": pl.Utf8}
#: metrics that add up over ranks (the job's value: the ranks' sum); the rest are medians
ADDITIVE = {"total_ns", "instances", "calls", "count", "faults", "self_ns", "cpu_ns", "busy_ns", "kernel_total_ns",
            "proj_total_ns",
            "range_total_ns", "job_total_ns", "peak_bytes", "live_at_end_bytes", "allocations", "allocated_bytes",
            "unfreed_bytes"}
#: the job's verdict where ranks differ: the first verdict any rank has, harm first
PRECEDENCE = ("regressed", "added", "improved", "removed", "unchanged")
#: the job scope's metrics: (metric, kind, direction) as diff's _stat_rows reads them
#: (the instances are the nvtx scope's, counted on each rank)
JOB_METRICS = [("job_total_ns", "total", 1), ("job_med_ns", "median", 1)]
#: the metric that stands for a key's time in ``rank_changes`` (the diff chart's)
HEADLINE = {"kernel": "total_ns", "nvtx": "kernel_total_ns", "api": "total_ns", "memcpy": "total_ns",
            "gpu": "busy_ns"}
#: the note of a slowest_rank row: how often each side's slowest rank was the slowest
SLOWEST_NOTE = "the slowest in {} of {} instances -> {} of {}"
_SLOWEST = re.compile(r"the slowest in (\d+) of (\d+) instances -> (\d+) of (\d+)")


#: the nsys profiles of a job's folder (``job_exports``)
NSYS_SUFFIXES = (".sqlite", ".nsys-rep")


def is_job_folder(ref: Any) -> bool:
    """Whether ``ref`` names a folder that exists (a job's exports are taken from it)."""
    text = str(ref).strip()
    return bool(text) and not RUN_ID.fullmatch(text) and Path(text).is_dir()


def job_exports(folder: Path) -> list[Path]:
    """A job's exports: the nsys exports and reports below ``folder`` (compressed or not),
    in path order, one per capture: where a report lies beside its export (``x.nsys-rep``
    and ``x.sqlite``), the export, which is read without nsys."""
    from .ingest import export_suffix, exports_below

    found = list(exports_below(folder, NSYS_SUFFIXES))
    exported = {capture(f) for f in found if export_suffix(f) == ".sqlite"}
    return [f for f in found if export_suffix(f) == ".sqlite" or capture(f) not in exported]


def capture(f: Path) -> tuple[Path, str]:
    """The capture an export or report of a job's folder is of: its folder and its name
    without the export's kind and compression (``x.sqlite.xz`` and ``x.nsys-rep`` are one)."""
    from .ingest import export_name

    return f.parent, export_name(f)[0]


class Job(NamedTuple):
    """A job as a comparison takes it: its name, and its ranks' runs, [(rank, run id), ...]
    by rank (those of a folder of its exports: those the folder holds)."""

    name: str
    ranks: list[tuple[int, int]]


def _job_folder(tk, folder: Path, files: list[Path]) -> Job:
    """The job of the exports ``files`` of ``folder``, ingested here (where not in the store
    already), with their runs: one job, each rank once."""
    if tk.read_only:
        raise QueryError(f"diff --jobs: {folder}: a job's exports are ingested first, and {tk.path} is open "
                         f"read-only; ingest them (tracekit --db {tk.path} ingest {files[0]} ...) and name the job")
    ids = [tk.landed_run(f).run_id for f in files]
    rows = tk.con.execute(
        "SELECT run_id, source_path, c.job, c.rank FROM runs LEFT JOIN rank_captures c USING (run_id) "
        "WHERE run_id IN (SELECT unnest(?::BIGINT[]))", [ids]).fetchall()
    got = {int(r): (src, job, rank) for r, src, job, rank in rows}
    # two captures' files that are one run hold the same bytes (a copy of another rank's export:
    # one capture, ingested once): the rank the copy stands for would be missing without a word
    first: dict[int, Path] = {}
    for f, r in zip(files, ids, strict=True):
        seen = first.setdefault(r, f)
        if capture(seen) != capture(f):
            rank = f", rank {got[r][2]}" if got[r][2] is not None else ""
            raise QueryError(f"diff --jobs: {f} holds the same export as {seen} (run {r}{rank}): a copy is that "
                             "capture again, not a rank of its own; give a folder with each rank's own export")
    plain = [got[r][0] for r in ids if got[r][2] is None]
    if plain:
        which = "its export has" if len(files) == 1 else f"{len(plain)} of its {len(files)} exports have"
        raise QueryError(f"diff --jobs: {folder}: {which} no rank ({plain[0]}{', ...' if len(plain) > 1 else ''}); "
                         "name each rank's export or its folder rank3 or _r3_, or ingest them with --param rank=3, "
                         "and name the job")
    jobs = sorted({got[r][1] for r in ids})
    if len(jobs) > 1:
        raise QueryError(f"diff --jobs: {folder}: its {len(files)} exports are ranks of {len(jobs)} jobs ({jobs[0]}, "
                         f"{jobs[1]}{', ...' if len(jobs) > 2 else ''}); give the folder of one job")
    by_rank: dict[int, list[int]] = {}
    for r in dict.fromkeys(ids):  # (a file given twice is its one run)
        by_rank.setdefault(int(got[r][2]), []).append(r)
    twice = next(((k, rs) for k, rs in sorted(by_rank.items()) if len(rs) > 1), None)
    if twice is not None:
        k, rs = twice
        raise QueryError(f"diff --jobs: {folder}: rank {k} of its job is {len(rs)} of its exports "
                         f"({got[rs[0]][0]}, {got[rs[1]][0]}): give a folder with one export per rank")
    return Job(jobs[0], [(k, rs[0]) for k, rs in sorted(by_rank.items())])


def job_of(tk, ref: Any, side: str) -> Job:
    """The job named by a run id, a run name, the job, or a folder of its exports (ingested
    first: ``job_exports``)."""
    from .registry import job_runs

    expect(ref, (str, int, os.PathLike), f"diff --jobs: {side}")
    text = str(ref).strip()
    if not text:
        raise QueryError(f"diff --jobs: an empty {side}; give any rank's run (id or name), a job "
                         "(tracekit query jobs) or the folder of its exports")
    con = tk.con
    if is_job_folder(text):
        files = job_exports(Path(text))
        if files:
            return _job_folder(tk, Path(text), files)
        if not con.execute("SELECT count(*) FROM runs WHERE name = ? OR run_id IN (SELECT run_id FROM rank_captures "
                           "WHERE job = ?)", [text, text]).fetchall()[0][0]:
            raise InputError(f"diff --jobs: {text}: no nsys export below it ({', '.join(NSYS_SUFFIXES)}, compressed "
                             "or not): nothing to compare; give the folder of a job's exports, any rank's run or a "
                             "job (tracekit query jobs)")
        warn_from_caller(CaptureWarning(f"diff --jobs: {text!r} is a folder here that holds no nsys export: the run or "
                                        f"job {text!r} of {tk.path} is compared"))
    job = text
    rows = con.execute("SELECT run_id, rank FROM rank_runs WHERE job = ? ORDER BY rank", [job]).fetchall()
    if not rows and "*" in text and not Path(text).is_absolute():
        # a job's default name is its ranks' path, made absolute at ingest: named as the
        # exports were given here (tests/data/nsys_jobs/base/rank*/export), it is that path
        job = str(Path(text).resolve())
        rows = con.execute("SELECT run_id, rank FROM rank_runs WHERE job = ? ORDER BY rank", [job]).fetchall()
    run = None
    if RUN_ID.fullmatch(text):
        run = next(iter(con.execute("SELECT run_id FROM runs WHERE run_id = ?", [int(text)]).fetchall()), None)
    if run is None:
        run = next(iter(con.execute("SELECT max(run_id) FROM runs WHERE name = ? HAVING count(*) > 0",
                                    [text]).fetchall()), None)
    if rows and run is not None:  # (a numeric job id, SLURM's, can also be a run's id)
        raise QueryError(f"diff --jobs: {text!r} is both a job and run {run[0]} in {tk.path}: name the job by one "
                         "of its ranks' runs")
    if rows:
        return Job(job, [(int(k), int(r)) for r, k in rows])
    if run is None:
        raise QueryError(f"diff --jobs: no run or job {text!r} in {tk.path}; name any rank's run (tracekit runs), "
                         "a job (tracekit query jobs) or the folder of a job's exports")
    ranks = job_runs(tk, int(run[0]))
    if not ranks:
        name = con.execute("SELECT name FROM runs WHERE run_id = ?", [int(run[0])]).fetchall()[0][0]
        raise QueryError(f"diff --jobs: run {run[0]} ({name}) has no rank: ingest each rank's export with its rank "
                         "(a file or folder named rank3 or _r3_, or --param rank=3)")
    job, rank, name = con.execute("SELECT job, rank, name FROM rank_captures WHERE run_id = ?",
                                  [int(run[0])]).fetchall()[0]
    now = next(r for r, k, _ in ranks if k == int(rank))
    if now != int(run[0]):  # (one capture ingested again: its later run holds the rank)
        raise QueryError(f"diff --jobs: run {run[0]} ({name}) is rank {rank} of job {job}, whose rank {rank} is now "
                         f"run {now}, the same capture ingested later; name the job by run {now}, or remove run "
                         f"{run[0]} (tracekit runs rm {run[0]})")
    return Job(job, [(k, r) for r, k, _ in ranks])


def job_labels(jobs: list[str], given: list[str | None]) -> list[str]:
    """A column label per job (``tracekit compare --jobs``): its folder as given, else its
    name, without the path parts every label shares at its start and at its end
    (``/prof/base/rank*/x`` and ``/prof/after/rank*/x``: ``base``, ``after``);
    a label two jobs share, or one of the table's own columns, gets its place (``#2``)."""
    from .compare import TABLE_COLUMNS
    from .names import without_shared_parts

    names = without_shared_parts([g.rstrip("/") if g is not None else j for j, g in zip(jobs, given, strict=True)])
    taken = {*TABLE_COLUMNS, f"{names[0]} (base)"}
    return [f"{n} (#{i})" if names.count(n) > 1 or n in taken else n for i, n in enumerate(names)]


def diff_jobs(tk, base: Any, new: Any, by: list[str] | str | None = None, threshold_pct: float = 5.0,
              per_rank: bool = False, on_rank: Callable[[int, int], None] | None = None) -> pl.DataFrame:
    """Compare job ``new`` against job ``base`` rank by rank (module docstring).
    ``on_rank(done, total)`` is called as each rank pair's comparison ends (a progress bar)."""
    expect(per_rank, bool, "diff --jobs: per_rank")
    job, long = compare_jobs(tk, base, new, by, threshold_pct, job_rows=not per_rank, on_rank=on_rank)
    return long if per_rank else job


def compare_jobs(tk, base: Any, new: Any, by: list[str] | str | None = None, threshold_pct: float = 5.0,
                 job_rows: bool = True, on_rank: Callable[[int, int], None] | None = None,
                 new_side: str = "new") -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """(the job's rows, or None without ``job_rows``; the ranks' own rows, with ``rank``):
    ``diff_jobs``'s two answers from one comparison. ``base`` and ``new`` may be ``Job``s
    already found (``job_of``). ``new_side``: what the warnings call ``new`` ("repeat" where
    it is a repeat of the base, ``compare``'s)."""
    from . import diff as _diff

    expect(threshold_pct, (int, float), "--threshold")
    if not threshold_pct > 0 or math.isinf(threshold_pct):
        raise ParamError(f"--threshold {threshold_pct!r}: must be a positive percentage (e.g. 5)")
    asked = scopes_asked(by)
    jb, ranks_b = base if isinstance(base, Job) else job_of(tk, base, "base")
    jn, ranks_n = new if isinstance(new, Job) else job_of(tk, new, "new")
    of_b, of_n = dict(ranks_b), dict(ranks_n)
    if jb == jn and str(base).strip() != str(new).strip():  # (two ranks of one job: the job twice)
        warn_from_caller(CaptureWarning(f"diff --jobs: {base} and {new} name one job ({jb}): it is compared with "
                                        "itself; name a rank (or the job) of each of two jobs (tracekit query jobs)"))
    shared = sorted(set(of_b) & set(of_n))
    if not shared:
        raise QueryError(f"diff --jobs: the jobs share no rank (base {ranks_text(list(of_b))}, {new_side} "
                         f"{ranks_text(list(of_n))}): ranks are compared with their namesakes")
    for job, mine, other in ((jb, of_b, of_n), (jn, of_n, of_b)):
        alone = sorted(set(mine) - set(other))
        if alone:
            side = "base" if mine is of_b else new_side
            warn_from_caller(CaptureWarning(f"diff --jobs: {ranks_text(alone)} of the {side} job ({job}) not in the "
                                            f"other: {_left_out(new_side, side, len(alone), alone=True)}"))
    pairs = [(k, of_b[k], of_n[k]) for k in shared]
    if _diff.reads_cuda(asked or _diff.NSYS_SCOPES):  # (where diff says a rank's capture missed them)
        pairs = _without_missed_work(tk, pairs, jb, jn, new_side)
    with warnings.catch_warnings():  # (each rank's diff says what a side's capture lacks)
        warnings.simplefilter("ignore", CaptureWarning)
        sides = [(rank, _diff.resolve(tk, str(b)), _diff.resolve(tk, str(n))) for rank, b, n in pairs]
    scopes = _common_scopes(sides, [b for b in asked if b != "job"] if asked else None)
    with_job = ("job" in asked) if asked else "nvtx" in scopes
    if with_job and "nvtx" not in scopes:  # (the job's time is read from its ranks' NVTX ranges)
        _common_scopes(sides, ["nvtx"])
    _say_untraced(sides, scopes, new_side, bool(asked))
    _say_setups(tk, sides)
    # host time is the programs' own only where no rank traced CUDA (diff's host_judged)
    cuda = any("CUDA" not in side.untraced for _, sb, sn in sides for side in (sb, sn))
    per = _ranks_diffs(tk, pairs, scopes, threshold_pct, on_rank) if scopes else []
    long = pl.concat(per, how="vertical") if per else pl.DataFrame(schema={**_diff.SCHEMA, "rank": pl.Int64})
    if not job_rows:
        return None, long
    rows = _job_scope(tk, [b for _, b, _ in pairs], [n for _, _, n in pairs], float(threshold_pct),
                      host_judged=not cuda) if with_job else []
    out = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    if per:
        out = pl.concat([out, aggregate(long)], how="vertical")
    return out, long


def _say_untraced(sides: list[tuple[int, Any, Any]], scopes: list[str], new_side: str, asked: bool) -> None:
    """Warns of the scopes some rank of either job has that another rank's capture did not
    trace (``diff.untraced_scopes``: CUDA, NVTX, a kind of sample, GPU memory), which the jobs
    are compared without where no scope was ``asked``, naming the ranks that lack them and why;
    and of the ranks whose GPU memory is compared per GPU alone, a side not having traced NVTX
    (each rank's own comparison says it without its rank)."""
    from . import diff as _diff
    from .registry import listed

    have = {s for _, sb, sn in sides for side in (sb, sn) for s in _scopes(side)}
    compared = {*scopes, *(("job",) if "nvtx" in scopes else ())}
    lacking = [] if asked else [s for s in SCOPES if s in have and s not in compared]
    unranged = [k for k, sb, sn in sides if "nvtx" not in _scopes(sb) & _scopes(sn)] if "memory" in scopes else []
    memory = f"on {ranks_text(unranged)}, {_diff.MEMORY_WITHOUT_PATHS}" if unranged else ""
    if lacking:
        who = _who_lacks(sides, lacking, ((f" of the {new_side} job", 2), (" of the base job", 1)))
        warn_from_caller(UntracedScopes(f"diff --jobs: {who}: the {listed(lacking)} rows are not compared"
                                        + (f"; {memory}" if memory else "")))
    elif memory:
        warn_from_caller(UntracedScopes(f"diff --jobs: {memory}"))


#: how diff begins its warning of two captures' setups (``_say_setups`` says a job's, with its ranks)
SETUP_SAID = "diff: the captures differ in setup: "


def _say_setups(tk, sides: list[tuple[int, Any, Any]]) -> None:
    """Warns of what differs between the setups of each pair of ranks (``diff.setup_differences``),
    with the ranks it differs on: ``diff --jobs: the captures differ in setup on rank 2: nsys
    --cuda-memory-usage true -> false`` (each rank's own comparison says it without them)."""
    from . import diff as _diff

    on: dict[str, list[int]] = {}
    for rank, sb, sn in sides:
        for difference in _diff.setup_differences(tk.con, sb, sn):
            on.setdefault(difference, []).append(rank)
    said: dict[tuple[int, ...], list[str]] = {}
    for difference, ranks in on.items():
        said.setdefault(tuple(ranks), []).append(difference)
    for ranks, differences in said.items():
        warn_from_caller(CaptureWarning(f"diff --jobs: the captures differ in setup on {ranks_text(ranks)}: "
                                        f"{'; '.join(differences)}"))


def _left_out(new_side: str, side: str, n: int, alone: bool) -> str:
    """What becomes of ``n`` ranks of ``side``'s job left out of its pair (``alone``: the other
    job has no such rank; else its capture missed the GPU work). Of a base and a new job, they
    are not compared. Of a base and its repeat (``new_side`` 'repeat'), a base rank the repeat
    lacks, or whose repeat capture missed the work, is still compared with the new job, only
    without a noise; the others are left out there as well."""
    if new_side == "repeat" and (side == "base") == alone:
        return (f"no noise measured for {'them' if n > 1 else 'it'}: {'their' if n > 1 else 'its'} changes are judged "
                "without the repeat's")
    return "left out of the ranks' comparison"


def _without_missed_work(tk, pairs: list[tuple[int, int, int]], jb: str, jn: str,
                         new_side: str = "new") -> list[tuple[int, int, int]]:
    """``pairs`` (rank, base run, new run), compared in a scope of CUDA's events, without those
    where one rank's capture traced CUDA and holds no CUDA event at all while the other's
    holds some: its window missed the program's GPU work (``registry.no_cuda_event``), and
    compared as none, every kernel would read as removed (or added) on that rank and the
    job's sums would add up one rank less on one side. They are said and left out, as ranks
    in one job only are; ranks whose captures both missed it are compared (their windows
    alike), said once for the job. An error where no pair is left."""
    from .registry import CUDA_EVENTS, no_cuda_words, ranks_without_cuda

    missed = [{rank for rid, rank in ranks_without_cuda(tk, pairs[0][i], CUDA_EVENTS)
               if rid in {p[i] for p in pairs}} for i in (1, 2)]
    one = [sorted(missed[i] - missed[1 - i]) for i in (0, 1)]
    kept = [p for p in pairs if p[0] not in {*one[0], *one[1]}]
    if not kept:
        said = " and ".join(f"{ranks_text(r)} of the {side} job" for r, side in zip(one, ("base", new_side), strict=True)
                            if r)
        many = len(pairs) > 1
        raise QueryError(f"diff --jobs: no rank pair left to compare: {said} {no_cuda_words(many=many)}, and "
                         f"{'their namesakes hold' if many else 'its namesake holds'} CUDA events; capture "
                         f"{'those ranks' if many else 'it'} again with a window that holds the GPU work")
    for ranks, side, job in ((one[0], "base", jb), (one[1], new_side, jn)):
        if ranks:
            warn_from_caller(CaptureWarning(f"diff --jobs: {ranks_text(ranks)} of the {side} job ({job}) "
                                            f"{no_cuda_words(many=len(ranks) > 1)}: "
                                            f"{_left_out(new_side, side, len(ranks), alone=False)}"))
    both = sorted(missed[0] & missed[1])
    if both:
        warn_from_caller(CaptureWarning(f"diff --jobs: {ranks_text(both)} of both jobs {no_cuda_words(many=True)}; "
                                        "their kernels, CUDA API calls, copies and GPU time are compared as none"))
    return kept


def _common_scopes(sides: list[tuple[int, Any, Any]], by: list[str] | None) -> list[str]:
    """The nsys scopes every pair of ranks has (``by``'s, each checked on every pair);
    ``sides``: (rank, base side, new side) as ``diff.resolve`` gives them."""
    from . import diff as _diff

    if by == []:
        return []
    common: set[str] | None = None
    for rank, sb, sn in sides:
        try:
            have = set(_diff._scopes(sb, sn, by)) & set(_diff.NSYS_SCOPES)
        except QueryError as err:
            raise QueryError(f"diff --jobs: rank {rank}: {str(err).removeprefix('diff: ')}") from None
        common = have if common is None else common & have
    scopes = [s for s in _diff.NSYS_SCOPES if s in (common or set())]
    if not scopes and by is None:
        raise QueryError(f"diff --jobs: the ranks share no nsys scope to compare ({', '.join(_diff.NSYS_SCOPES)})")
    return scopes


def scopes_asked(by: list[str] | str | None) -> list[str]:
    """The scopes ``--by`` names of a job's (``SCOPES``; [] where not given: every scope),
    as ``diff.scopes_asked`` checks them."""
    from . import diff as _diff

    return _diff.scopes_asked(by, SCOPES, lambda b: " (a job is compared in the nsys scopes)" if b in _diff.SCOPES
                              else "")


def measured_scopes(tk, base: Job, new: Job, by: list[str] | str | None = None,
                    wanted: set[str] | frozenset[str] = frozenset()) -> tuple[list[str], list[str], str] | None:
    """The scopes ``compare_jobs(tk, base, new, by)`` compares where ``by`` is cut to those
    every pair of the jobs' ranks has (None: every scope they share; ``job`` where they
    share nvtx), in ``SCOPES``' order; those of ``wanted`` it lacks (the scopes the other
    jobs are compared with the base in, whose noise a repeat of the base job, ``new``,
    measures: ``compare --jobs``); and which ranks lack which of them, with what their
    captures did not trace (diff's words: ``rank 0 [nsys without Python sample trace] has no
    python scope; ranks 2, 3 [nsys without CPU sample trace] have no cpu scope``; the base's
    ranks where the repeat's have it). None where the jobs share no rank or no scope
    (``compare_jobs`` says why)."""
    from . import diff as _diff

    asked = scopes_asked(by)
    of_b, of_n = dict(base.ranks), dict(new.ranks)
    with warnings.catch_warnings():  # (what resolving them says, the comparison says)
        warnings.simplefilter("ignore", CaptureWarning)
        sides = [(k, _diff.resolve(tk, str(of_b[k])), _diff.resolve(tk, str(of_n[k]))) for k in sorted(of_b)
                 if k in of_n]
    common = set.intersection(*(_scopes(sb) & _scopes(sn) for _, sb, sn in sides)) if sides else set()
    if not common:
        return None
    scopes = [s for s in SCOPES if s in common and (not asked or s in asked)]
    lacking = [s for s in SCOPES if s in wanted and s not in scopes]
    # (the repeat's ranks; else the base's paired with them)
    return scopes, lacking, _who_lacks(sides, lacking, (("", 2), (" of the base job", 1)), first=True)


def _who_lacks(sides: list[tuple[int, Any, Any]], lacking: list[str], roles: tuple[tuple[str, int], ...],
               first: bool = False) -> str:
    """Which ranks lack each of the scopes ``lacking``, with what their captures did not trace,
    in diff's words (``rank 0 of the new job [nsys without NVTX trace] has no job or nvtx
    scope``). ``sides``: (rank, base side, new side); ``roles``: (the words after the ranks, the
    index of their side in ``sides``), in the order said; ``first``: the first role whose ranks
    lack a scope alone."""
    from . import diff as _diff
    from .registry import listed

    said: dict[str, list[str]] = {}  # (who lacks them, with why -> the scopes)
    for scope in lacking:
        events = "nvtx" if scope == "job" else scope  # (the job's time is read from its ranks' NVTX ranges)
        for role, at in roles:
            ranks = [(pair[0], pair[at]) for pair in sides if events not in _scopes(pair[at])]
            if ranks:
                many = len(ranks) > 1
                who = f"{ranks_text(k for k, _ in ranks)}{role} [{_diff._kinds(ranks[0][1], events)}] " \
                      f"{'have' if many else 'has'}"
                said.setdefault(who, []).append(scope)
                if first:
                    break
    return "; ".join(f"{who} no {listed(sc, 'or')} scope" for who, sc in said.items())


def _scopes(side) -> set[str]:
    """A rank's run's scopes of ``SCOPES`` (``diff.Side``'s): ``job`` where it has nvtx."""
    have = side.scopes() & set(SCOPES)
    return have | {"job"} if "nvtx" in have else have


#: rank pairs compared at once, each in a thread on its own connection (``_ranks_diffs``)
MAX_THREADS = 8


class _Reader:
    """The store ``tk`` read through ``con``, another connection of it: what a rank
    pair's ``diff`` uses of a Tracekit in a thread of its own."""

    def __init__(self, tk, con):
        self._tk, self.con = tk, con

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tk, name)


def _ranks_diffs(tk, pairs: list[tuple[int, int, int]], scopes: list[str], threshold: float,
                 on_rank: Callable[[int, int], None] | None = None) -> list[pl.DataFrame]:
    """Each pair's ``diff`` with its rank, in the pairs' order, and their warnings said once
    for the job. Pairs run several at once, in threads each reading through a connection of
    its own (``Tracekit.thread_connection``): a pair is some ten DuckDB queries, which run
    beside the other threads' (64 ranks on 2 cores: 1.65x one pair after another,
    docs/performance.md)."""
    import queue
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from .diff import diff
    from .registry import NO_CUDA_EVENT

    # (runs not committed yet, a job folder's or report --vs FILE's just ingested, are seen by this connection alone)
    threads = 1 if tk._one_transaction else min(len(pairs), MAX_THREADS, 2 * (os.cpu_count() or 1))
    out: list[pl.DataFrame | None] = [None] * len(pairs)
    readers: queue.SimpleQueue = queue.SimpleQueue()
    opened = []

    def one(i: int) -> None:
        rank, b, n = pairs[i]
        reader = readers.get()
        try:
            df = diff(reader, str(b), str(n), by=scopes, threshold_pct=threshold)
        finally:
            readers.put(reader)
        out[i] = df.with_columns(pl.lit(rank, dtype=pl.Int64).alias("rank"))

    with warnings.catch_warnings(record=True) as caught:  # (the threads' too: the filters are the process's)
        warnings.simplefilter("always")
        try:
            if threads <= 1:
                readers.put(tk)
                for i in range(len(pairs)):
                    one(i)
                    if on_rank is not None:
                        on_rank(i + 1, len(pairs))
            else:
                for _ in range(threads):
                    opened.append(tk.thread_connection())
                    readers.put(_Reader(tk, opened[-1]))
                with ThreadPoolExecutor(threads, thread_name_prefix="tracekit-diff-jobs") as pool:
                    futures = [pool.submit(one, i) for i in range(len(pairs))]
                    try:
                        for done, f in enumerate(as_completed(futures), 1):
                            f.result()
                            if on_rank is not None:
                                on_rank(done, len(pairs))
                    except BaseException:  # (Ctrl-C, or a pair's error: the others stop now)
                        for f in futures:
                            f.cancel()
                        for con in opened:
                            con.interrupt()
                        raise
        finally:
            for con in opened:
                con.close()
    said: dict[str, type[Warning]] = {}
    for w in caught:  # (the job said which ranks: _without_missed_work, _say_setups, _say_untraced)
        text = str(w.message)
        if NO_CUDA_EVENT not in text and not text.startswith(SETUP_SAID) and not issubclass(w.category, UntracedScopes):
            said.setdefault(text, w.category)
    for text, category in said.items():
        warn_from_caller(text, category)
    return out  # type: ignore[return-value]


def aggregate(long: pl.DataFrame) -> pl.DataFrame:
    """The ranks' rows (``diff``'s, with ``rank``) as one row per scope, key and metric, a
    key's rows together as ``diff`` gives them: keys by the best place any rank's diff gave
    them, a key's metrics in its own order."""
    from .diff import _join, _pct

    long = (long.with_row_index("_pos")
            .with_columns(pl.col("_pos").rank("ordinal").over("rank").alias("_place"))  # (its place in its rank's diff)
            .with_columns(pl.col("_place").min().over("rank", "scope", "key").alias("_key_place"))
            .with_columns((pl.col("_place") - pl.col("_key_place")).alias("_in_key")))
    out = []
    for (scope, key, metric), g in long.group_by("scope", "key", "metric", maintain_order=True):
        rows = g.sort("rank").to_dicts()
        additive = metric in ADDITIVE
        base = _combine([r["base"] for r in rows], additive)
        new = _combine([r["new"] for r in rows], additive)
        delta = None if base is None or new is None else new - base
        pct = _pct(delta, base)
        verdicts = [r["verdict"] for r in rows]
        verdict = next(v for v in PRECEDENCE if v in verdicts)
        note = _note(rows)
        away = [r for r in rows if r["verdict"] in ("added", "removed")]
        if scope == "gpu" and away and base is not None and new is not None:
            # a device both jobs used, which some ranks ran on in one job only (a job spread
            # over more GPUs): those ranks' work moved, not the device's; it is judged by the
            # ranks that ran on it in both, and its own change is not judged
            stayed = [r for r in rows if r not in away]
            verdict = next((v for v in PRECEDENCE if v in [r["verdict"] for r in stayed]), "unchanged")
            moved = [f"{ranks_text([r['rank'] for r in away if r['verdict'] == v])} on another device in the "
                     f"{'new' if v == 'removed' else 'base'} job" for v in ("removed", "added")
                     if any(r["verdict"] == v for r in away)]
            note = _join(f"{'; '.join(moved)}: the device's change not judged", _note(stayed) if stayed else "")
        pcts = [(r["rank"], r["delta_pct"]) for r in rows if r["delta_pct"] is not None
                and not math.isnan(r["delta_pct"])]
        top = max(pcts, key=lambda x: (abs(x[1]), -x[0])) if pcts else (None, None)
        out.append({
            "scope": scope, "key": key, "metric": metric, "base": base, "new": new, "delta": delta,
            "delta_pct": pct, "verdict": verdict, "ranks": len(rows),
            "ranks_regressed": verdicts.count("regressed"), "ranks_improved": verdicts.count("improved"),
            "ranks_added": verdicts.count("added"), "ranks_removed": verdicts.count("removed"),
            "top_rank": top[0], "top_rank_delta_pct": top[1],
            "rank_delta_pct_min": min((p for _, p in pcts), default=None),
            "rank_delta_pct_max": max((p for _, p in pcts), default=None),
            "note": note, "_order": (scope == "api", min(r["_key_place"] for r in rows), scope, key,
                                            min(r["_in_key"] for r in rows)),
        })
    out.sort(key=lambda r: r.pop("_order"))
    return pl.DataFrame(out, schema=SCHEMA, orient="row") if out else pl.DataFrame(schema=SCHEMA)


def _combine(values: list[float | None], additive: bool) -> float | None:
    """The job's value from its ranks': a sum, or the median rank's (None where no rank has one)."""
    have = [v for v in values if v is not None and not math.isnan(v)]
    if not have:
        return None
    if additive:
        return float(sum(have))
    have.sort()
    mid = len(have) // 2
    return float(have[mid]) if len(have) % 2 else (have[mid - 1] + have[mid]) / 2


def _note(rows: list[dict]) -> str:
    """The ranks' common note where they were all judged alike for one reason; else each
    verdict with its ranks, their changes, and for unchanged ranks why (``_reason``)."""
    verdicts = {r["verdict"] for r in rows}
    notes = {r["note"] or "" for r in rows}
    if len(verdicts) == 1 and len(notes) == 1:
        return notes.pop()
    parts = []
    for v in PRECEDENCE:
        mine = [r for r in rows if r["verdict"] == v]
        if not mine:
            continue
        if v == "unchanged":
            reasons: dict[str, list[int]] = {}
            for r in mine:
                reasons.setdefault(_reason(r["note"]), []).append(r["rank"])
            parts.append("unchanged on " + ", ".join(
                ranks_text(ks) + (f" ({why})" if why else "") for why, ks in reasons.items()))
            continue
        pcts = sorted(r["delta_pct"] for r in mine if r["delta_pct"] is not None and not math.isnan(r["delta_pct"]))
        how = "" if v in ("added", "removed") or not pcts else \
            f" ({pcts[0]:+z.1f} %)" if len(pcts) == 1 else f" ({pcts[0]:+z.1f} to {pcts[-1]:+z.1f} %)"
        parts.append(f"{v} on {ranks_text([r['rank'] for r in mine])}{how}")
    return "; ".join(parts)


def _reason(note: str | None) -> str:
    """Why diff held a rank's change, without its figures: ``within threshold``, ``not
    significant``, ``immaterial``, ``host-timed, not judged``, ``identical``, ..."""
    text = (note or "").split("; ")[-1]  # (a match note, "matched by ...", comes first)
    for end in (" (", ":"):
        text = text.split(end)[0]
    return text.strip()


def _job_scope(tk, base_runs: list[int], new_runs: list[int], threshold: float, host_judged: bool) -> list[dict]:
    """The job scope's rows: per NVTX path, each instance's slowest rank (samples_job.sql)."""
    from . import diff as _diff

    con = tk.con
    con.register("_job_sides", pl.DataFrame({"side": [0] * len(base_runs) + [1] * len(new_runs),
                                             "run_id": [*base_runs, *new_runs]}, schema={"side": pl.Int32,
                                                                                          "run_id": pl.Int64}))
    try:  # (the ranks' ranges read once: the samples are one row per path and instance)
        samples = tk.frame(con.sql(_diff._sql("samples_job")))
    finally:
        con.unregister("_job_sides")
    con.register("_job_samples", samples)
    try:
        summary = _diff._compare(con, "SELECT side, key, value FROM _job_samples", {})
    finally:
        con.unregister("_job_samples")
    # per side and path: the rank slowest in most instances (the lowest on a tie), how many
    # instances it was the slowest in, the instances, the most ranks an instance had, and
    # every rank slowest in as many instances (a tie)
    slowest = {(side, key): (rank, n, total, ranks, tied) for side, key, rank, n, total, ranks, tied in (
        samples.group_by("side", "key", "slowest_rank").agg(pl.len().alias("n"), pl.col("ranks").max().alias("r"))
        .with_columns(pl.col("n").sum().over("side", "key").alias("total"),
                      pl.col("r").max().over("side", "key").alias("ranks"))
        .filter(pl.col("n") == pl.col("n").max().over("side", "key"))
        .group_by("side", "key", maintain_order=True)
        .agg(pl.col("slowest_rank").min(), pl.col("n").first(), pl.col("total").first(), pl.col("ranks").first(),
             pl.col("slowest_rank").sort().alias("tied"))
        .iter_rows())}
    # the paths the job spends most time in first (their changes are host-timed: rarely judged)
    spent = summary.select(pl.max_horizontal(pl.col("total_base").fill_null(0), pl.col("total_new").fill_null(0))
                           .alias("t"))["t"].to_list()
    order = sorted(range(summary.height), key=lambda i: (-spent[i], str(summary["key"][i])))
    out: list[dict] = []
    for i in order:
        r = summary.row(i, named=True)
        key = str(r["key"])
        if r["n_base"] == 0 or r["n_new"] == 0:
            made = _diff._one_side_rows("job", key, r, JOB_METRICS, "", 0.0)
            for m in made:
                m.note = m.note.replace(" run", " job")
        else:
            made = _diff._stat_rows("job", key, r, JOB_METRICS, threshold, "", 0.0, host_judged=host_judged)
        ranks = max(slowest.get((s, key), (0, 0, 0, 0, []))[3] for s in (0, 1))
        for m in made:
            out.append(_job_row(key, m.metric, m.base, m.new, m.verdict, ranks, _diff._join(
                m.note, f"p={_diff._fmt_p(m.p_value)}" if m.p_value is not None and m.verdict == "unchanged"
                and "host-timed" in m.note else "")))
        sides = [slowest.get((s, key)) for s in (0, 1)]
        if all(sides):
            (rb, nb, tb, _, tied_b), (rn, nn, tn, _, tied_n) = sides
            same = tied_b == tied_n
            ties = [f"{ranks_text(t)} tied in the {side}"
                    for t, side in ((tied_b, "base"), (tied_n, "new")) if len(t) > 1]
            row = _job_row(key, "slowest_rank", float(rb), float(rn), "unchanged", ranks, SLOWEST_NOTE.format(
                nb, tb, nn, tn) + "".join(f"; {t}" for t in ties)
                + ("" if same else "; differs; a rank has no better/worse direction: not judged"))
            out.append({**row, "delta": None, "delta_pct": None})  # (a rank is no quantity)
    return out


def _job_row(key: str, metric: str, base: float | None, new: float | None, verdict: str, ranks: int,
             note: str) -> dict:
    """A row of the job scope (the per-rank columns empty: the job's own time has none)."""
    from .diff import _pct

    delta = None if base is None or new is None else new - base
    return {**dict.fromkeys(COLUMNS), "scope": "job", "key": key, "metric": metric, "base": base, "new": new,
            "delta": delta, "delta_pct": _pct(delta, base), "verdict": verdict, "ranks": ranks, "note": note}


def rank_changes(tk, base: Any, new: Any, by: list[str] | str | None = None, threshold_pct: float = 5.0,
                 limit: int = 20) -> pl.DataFrame:
    """Per rank, the change of the keys that moved most in the job (``chart job-diff``):
    each key by its time (``diff``'s headline metric: a kernel's or memory operation's total,
    an NVTX path's kernel time, a GPU's busy time, an API's call time), the keys the job
    judged changed first, each group in the job's order, the first ``limit`` keys (0: all);
    one row per key and rank with the rank's ``base``, ``new``, ``delta_pct``, ``verdict``
    and ``note``, and the job's ``job_verdict`` and ``order`` (the key's place)."""
    expect(limit, int, "chart job-diff: limit")
    return changes_by_rank(diff_jobs(tk, base, new, by=by, threshold_pct=threshold_pct, per_rank=True), limit)


def changes_by_rank(long: pl.DataFrame, limit: int = 20) -> pl.DataFrame:
    """``rank_changes`` of the ranks' rows ``long`` (``diff_jobs(per_rank=True)``'s)."""
    head = long.filter(pl.col("metric") == pl.col("scope").replace_strict(HEADLINE, default=None))
    job = aggregate(head).with_row_index("_i").sort(pl.col("verdict") == "unchanged", "_i").drop("_i")
    job = (job.head(limit) if limit else job).with_row_index("order")
    return (head.join(job.select("scope", "key", "order", pl.col("verdict").alias("job_verdict")),
                      on=["scope", "key"])
            .select("order", "scope", "key", "metric", "rank", "base", "new", "delta_pct", "verdict", "note",
                    "job_verdict").sort("order", "rank"))


# -- terminal table -----------------------------------------------------------------

#: the columns a terminal shows by default
DISPLAY = ["scope", "key", "metric", "base", "new", "delta", "verdict", "ranks", "top_rank", "note"]


def display_columns(df: pl.DataFrame) -> list[str]:
    """The table's columns: ``DISPLAY``, with the repeats' noise after the change where a
    repeat measured it (``diff --jobs --repeat``)."""
    if "noise_pct" not in df.columns:
        return DISPLAY
    at = DISPLAY.index("delta") + 1
    return [*DISPLAY[:at], "noise", *DISPLAY[at:]]


def display(df: pl.DataFrame, among: pl.DataFrame | None = None) -> pl.DataFrame:
    """The job's rows for a terminal: values in human units (diff's), keys told apart from
    ``among`` as ``tracekit.diff.display`` tells them, ``ranks`` as the ranks judged as the
    row's verdict of those compared (``3/4``), the rank that moved most with its change."""
    from .diff import _human, short_keys, shown_verdicts

    short = short_keys(df if among is None else among)

    def human(metric: str, v: float | None, other: float | None) -> str:
        return "" if v is None else f"{v:.0f}" if metric == "slowest_rank" else _human(metric, v, other)

    def judged(r: dict) -> str:
        if r["scope"] == "job":
            return str(r["ranks"] or "")
        n = r.get(f"ranks_{r['verdict']}")
        return f"{n if n is not None else r['ranks']}/{r['ranks']}"

    rows = df.to_dicts()
    cols = {
        "scope": df["scope"].to_list(),
        "key": [short[k] for k in df["key"]],
        "metric": df["metric"].to_list(),
        "base": [human(r["metric"], r["base"], r["new"]) for r in rows],
        "new": [human(r["metric"], r["new"], r["base"]) for r in rows],
        "delta": ["" if r["delta_pct"] is None else f"{r['delta_pct']:+z.1f}%" for r in rows],
        **({"noise": ["" if r["noise_pct"] is None else f"±{r['noise_pct']:.1f}%" for r in rows]}
           if "noise_pct" in df.columns else {}),  # (the repeats' largest change of the key: --repeat)
        "verdict": shown_verdicts(df),
        "ranks": [judged(r) for r in rows],
        "top_rank": ["" if r["top_rank"] is None or r["top_rank_delta_pct"] in (None, 0.0) else
                     f"{r['top_rank']} ({r['top_rank_delta_pct']:+z.1f}%)" for r in rows],
        "note": df["note"].to_list(),
    }
    return pl.DataFrame(cols, schema=dict.fromkeys(cols, pl.Utf8))


def moved(df: pl.DataFrame, top: int = 3) -> list[str]:
    """What moved, in a few lines: the job's time where it was judged changed (jobs that
    traced no CUDA: the paths that moved most), the straggler of each NVTX path whose
    slowest rank changed (where a rank was the slowest in most instances on a side), then
    ``diff``'s lines over the ranks' summed values, each saying so, and over the median rank's
    NVTX median wall times, saying that."""
    from .diff import moved as diff_moved
    from .diff import signed_human

    lines = []
    judged = df.filter((pl.col("scope") == "job") & (pl.col("verdict") != "unchanged")
                       & pl.col("metric").is_in(["job_total_ns", "job_med_ns"]))
    if judged.height:
        rows: dict[str, dict] = {}  # a path's total where it was judged, else its median
        for r in judged.iter_rows(named=True):
            if r["key"] not in rows or r["metric"] == "job_total_ns":
                rows[r["key"]] = r
        shown = sorted(rows.values(), key=lambda r: -abs((r["new"] or 0) - (r["base"] or 0)))[:top]

        def change(r: dict) -> str:
            if r["verdict"] in ("added", "removed"):
                return r["verdict"]
            d = r["new"] - r["base"]
            return f"{signed_human(r['metric'], d)} ({r['delta_pct']:+z.1f} %, {r['verdict']})"

        lines.append("Job time (the slowest rank's, instance by instance): " + "; ".join(
            f"{r['key']} {'total' if r['metric'] == 'job_total_ns' else 'median'} {change(r)}" for r in shown))
    for r in df.filter((pl.col("scope") == "job") & (pl.col("metric") == "slowest_rank")
                       & (pl.col("base") != pl.col("new"))).iter_rows(named=True):
        m = _SLOWEST.match(r["note"] or "")
        if m is None:
            continue
        nb, tb, nn, tn = map(int, m.groups())
        counts = [(nb, tb), (nn, tn)]
        if any(n > t / 2 for n, t in counts) and max(tb, tn) >= 3:
            lines.append(f"Slowest rank of {r['key']}: rank {r['base']:.0f} (in {counts[0][0]} of {counts[0][1]} "
                         f"instances) -> rank {r['new']:.0f} (in {counts[1][0]} of {counts[1][1]})")
    rows = df.filter(pl.col("scope") != "job").with_columns(pl.lit(None, pl.Float64).alias("p_value"))
    ranks = rows["ranks"].max()
    # each line says how its values are the job's: the ranks' sum, but for an NVTX path's median
    # wall time (judged where no rank traced CUDA), which is the median rank's, on a line of its own
    median = pl.col("metric") == "range_med_ns"
    lines += [f"{line} (summed over the job's {ranks} ranks)" for line in diff_moved(rows.filter(~median))]
    lines += [f"{line} (the median rank's of the job's {ranks})" for line in diff_moved(rows.filter(median))]
    return lines
