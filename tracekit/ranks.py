"""Which rank of which job a run is, and on which host.

A multi-GPU job profiled with nsys gives one export per rank. At ingest each run gets
``rank``, ``host`` and ``job`` in its ``params`` (what ``rank-summary``, ``stragglers``
and ``rank-ranges`` group by), from, in order of precedence:

1. ``--param rank=3`` / ``host=`` / ``job=`` (``tk.ingest(..., params=...)``), one file's
   rank at a time; it overrides the rank the export recorded (2.; said, as a warning: a
   launcher may number each node's processes from 0) and the name's (3.: a guess);
2. the export itself: the launched process's environment as nsys recorded it
   (``META_DATA_CAPTURE``: ``RANK``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``,
   ``SLURM_PROCID``, ...) and the target's host name (``TARGET_INFO_SYSTEM_ENV``);
3. the file name, or its folder's: ``rank3``, ``rank_3``, ``rank-3``, ``_r3_``.

``job`` (which runs are ranks of one job) defaults to the launcher's job id in that
environment (``SLURM_JOB_ID``, ``TORCHELASTIC_RUN_ID``, ...; not torchrun's default
``none``, which every static launch shares), else the source path with
the rank's digits replaced by ``*`` where the name carries the rank, the export's
suffix dropped (``/prof/rank*/export`` for ``/prof/rank3/export.sqlite.xz`` and
``/prof/rank3/export.nsys-rep`` alike), else the source's folder. (``MASTER_ADDR:MASTER_PORT``
is not used: every local job on the default port shares it.) A job captured again (the same
path profiled and ingested again, or two launches of one SLURM job) is a job of its own,
``JOB#2``: the store tells captures apart by when each ran, from nsys's session start to its
stop, and by the ranks they repeat (schema_runs.sql's ``rank_captures``); one capture ingested
twice counts each rank's latest run. ``JOB#N`` is that name: a ``--param job=`` ending so is refused.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

from .errors import InputError, ParamError, TracekitError

#: Launcher variables holding the global rank, the most specific first.
RANK_ENV = ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")
#: ... the job's size and its id.
SIZE_ENV = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS")
JOB_ENV = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "LSB_JOBID", "PBS_JOBID")
#: each rank variable's job size, where its launcher sets one
SIZE_OF = {"RANK": "WORLD_SIZE", "OMPI_COMM_WORLD_RANK": "OMPI_COMM_WORLD_SIZE", "PMI_RANK": "PMI_SIZE",
           "MV2_COMM_WORLD_RANK": "MV2_COMM_WORLD_SIZE", "SLURM_PROCID": "SLURM_NTASKS"}
#: job ids that name no job: torchrun's ``--rdzv-id`` default, which every launch of a static
#: rendezvous (multi-node, or with ``--master-port``) shares
NO_JOB_IDS = frozenset({"none"})

#: the largest rank: the store reads ranks as 32-bit integers (schema_runs.sql's rank_runs)
MAX_RANK = 2**31 - 1

_NAME_RE = re.compile(r"(?:(?<=[^a-z0-9])|^)(?:rank[_-]?|r)(\d+)(?=[^a-z0-9]|$)", re.IGNORECASE)
_ENV_RE = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)="?(.*?)"?$', re.S)


def rank_from_name(path: Path) -> tuple[int, str] | None:
    """The rank a file or folder name carries, and the path with it masked and the
    export's suffix dropped (the job: ``/prof/rank*/export`` for ``/prof/rank3/export.sqlite.xz``;
    ``/prof/rank*/trace_rank*`` for ``/prof/rank3/trace_rank3.sqlite.xz``: the same rank in
    both names is masked in both)."""
    parts = list(path.parts)

    def carried(i: int) -> re.Match | None:  # (the one rank a name carries, if one)
        matches = list(_NAME_RE.finditer(parts[i])) if i >= 0 else []
        return matches[0] if len(matches) == 1 and int(matches[0].group(1)) <= MAX_RANK else None

    for i in (len(parts) - 1, len(parts) - 2):
        m = carried(i)
        if m is None:
            continue
        from .ingest import export_name  # (pyarrow: only an ingest asks)

        rank, masked = int(m.group(1)), list(parts)
        for j in range(max(len(parts) - 2, 0), len(parts)):
            if (mj := carried(j)) is not None and int(mj.group(1)) == rank:
                masked[j] = parts[j][:mj.start(1)] + "*" + parts[j][mj.end(1):]
        # the export's kind and compression dropped: one capture's .nsys-rep and .sqlite.xz name one job
        name, suffix = export_name(Path(masked[-1]))
        masked[-1] = name if suffix and name else masked[-1]
        return rank, str(Path(*masked))
    return None


def from_export(path: Path) -> dict[str, str]:
    """Launcher variables and the host name recorded in an nsys SQLite export
    (``{}`` for anything else: the export is opened read-only, immutable)."""
    from .ingest.sqlite_ints import ERRORS  # (SQLite's errors, and a message it cannot decode)

    out: dict[str, str] = {}
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    except ERRORS:
        return out
    try:
        # (few result rows: Python's sqlite3 gives up the interpreter lock around each
        # step, which costs much where several ingests run in threads; source.py says more)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
                                            "('META_DATA_CAPTURE', 'TARGET_INFO_SYSTEM_ENV')")}
        if "META_DATA_CAPTURE" in tables:
            wanted = RANK_ENV + SIZE_ENV + JOB_ENV
            for (value,) in con.execute(
                    "SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE' "
                    f"AND substr(value, 1, instr(value, '=') - 1) IN ({', '.join('?' * len(wanted))})", wanted):
                m = _ENV_RE.match(str(value))
                if m and m.group(1) in wanted:
                    out.setdefault(m.group(1), m.group(2))
        if "TARGET_INFO_SYSTEM_ENV" in tables:
            row = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1").fetchone()
            if row and row[0]:
                out["HOSTNAME"] = str(row[0])
    except ERRORS:
        return {}
    finally:
        con.close()
    return out


def check_params(params: dict, where: str = "--param ", error: type[TracekitError] = ParamError) -> None:
    """A run's ``rank`` given is a whole number from 0 to MAX_RANK, below its ``world_size``
    where one is given, its ``job`` a name, not blank and not ending in #N; the error names the value as
    ``where`` says it came (``--param ``, or a run folder's meta.json), as
    ``numbers.check_counts`` does."""
    if "job" in params and not str(params["job"]).strip():  # (a job named '' or ' ': every blank rank's)
        raise error(f"{where}job={params['job']!r}: an empty job name; name the job its ranks share (or leave "
                    "job out: the ranks' folder names it)")
    if "host" in params and not str(params["host"]).strip():  # (a host named '' reads as none in every table)
        raise error(f"{where}host={params['host']!r}: an empty host name; name the host the rank ran on (or leave "
                    "host out: the export's host name is taken)")
    if re.search(r"#[0-9]+$", str(params.get("job", ""))):
        raise error(f"{where}job={params['job']!r}: a job named JOB#N is the N-th capture of job JOB "
                    "(schema_runs.sql's rank_captures); choose a name that does not end in #N")
    if "rank" in params:
        v = params["rank"]
        try:  # (2.5 or true in a meta.json: no rank, not rank 2 or 1)
            ok = not isinstance(v, bool) and float(v) == int(v) and 0 <= int(v) <= MAX_RANK
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise error(f"{where}rank={params['rank']!r}: a rank is a whole number from 0 to {MAX_RANK}")
        try:  # (a world_size that is no count: numbers.check_counts says so)
            size = None if isinstance(params.get("world_size"), bool) else int(float(params["world_size"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            size = None
        if size is not None and size >= 1 and int(v) >= size:
            raise error(f"{where}rank={params['rank']!r} with world_size={params['world_size']!r}: a job of "
                        f"{size} rank{'s' if size > 1 else ''} has ranks 0 to {size - 1}")


def identify(source: Path, export: Path | None, params: dict) -> dict:
    """``params`` with ``rank``, ``host``, ``world_size`` and ``job`` filled in where
    known (given values win). ``export``: the plain nsys export, if the run has one."""
    out = dict(params)
    check_params(out)
    env = from_export(export) if export is not None else {}
    # the folder above the export's own folder resolved (one job however its path was typed, through
    # whichever links), the export's folder and file as given: a link's name is the rank it stands for
    given = Path(os.path.abspath(source))
    given = given.parent.parent.resolve() / given.parent.name / given.name if given.parent.name else given
    named = rank_from_name(given)
    recorded = next((k for k in RANK_ENV if env.get(k, "").isdigit() and int(env[k]) <= MAX_RANK), None)
    if "rank" not in out:
        if recorded is not None:
            out["rank"] = int(env[recorded])
        elif named is not None:
            out["rank"] = named[0]
    else:
        out["rank"] = int(out["rank"])
    if "rank" not in out:
        return out
    if "host" not in out and env.get("HOSTNAME"):
        out["host"] = env["HOSTNAME"]
    # a rank given where the launcher recorded another (one numbering each node's processes from 0):
    # the launcher's job size is of its numbering, not the one given
    renumbered = "rank" in params and recorded is not None and out["rank"] != int(env[recorded])
    # the job's size the launcher that numbered the rank recorded (RANK with WORLD_SIZE, SLURM_PROCID
    # with SLURM_NTASKS, ...), else the first recorded
    paired = SIZE_OF.get(recorded) if recorded is not None else None
    size = paired if paired is not None and env.get(paired, "").isdigit() else \
        next((k for k in SIZE_ENV if env.get(k, "").isdigit()), None)
    if "world_size" not in out and size is not None and not renumbered:
        out["world_size"] = int(env[size])
        if 1 <= out["world_size"] <= out["rank"]:  # (rank 7 of a job whose launcher said 4 ranks)
            said = (f"--param rank={out['rank']}" if "rank" in params else
                    f"{source}: rank {out['rank']} ({recorded}={env[recorded]})" if recorded is not None else
                    f"{source}: rank {out['rank']} by its name")
            raise (ParamError if "rank" in params else InputError)(
                f"{said}, but the export recorded {size}={env[size]}, a job of ranks 0 to {out['world_size'] - 1}; "
                "give the job's size (--param world_size=N)")
    if renumbered:
        from .errors import CaptureWarning, warn_from_caller

        size_too = (f"; its {size}={env[size]}, of that numbering, is not taken (--param world_size=N gives the "
                    "job's)") if size is not None and "world_size" not in params else ""
        warn_from_caller(CaptureWarning(f"{source}: rank {out['rank']} as given, not {env[recorded]} as the export "
                                        f"recorded ({recorded}={env[recorded]}){size_too}"))
    if "job" not in out:
        job = next((env[k] for k in JOB_ENV if env.get(k) and env[k].strip().lower() not in NO_JOB_IDS), None)
        if job is None and named is not None:
            job = named[1]
        out["job"] = job or str(given.parent)
    return out
