"""The HSTU inference benchmark's own logs (``run_bench.sh``: ``logs/benchmark_bs8_nc1024.log``).

Each line ``KV Caches: 8, Candidate Embeddings: 1024, Total time(ms): 12.345`` is one timed
measurement; ``process_data.ipynb`` of the seed procedure reads them with the same pattern
(anywhere in the line) and takes the batch size and candidate count from the file's name,
``benchmark_bs{BS}_nc{NC}.log``. A line tagged as ``tracekit capture`` writes it
(``[warmup 0] KV Caches: ...``, ``[timed 2] ...``: its ``capture.log``) keeps its phase; an
untagged line is timed, as the notebook counts it. The run's parameters are the point
(``bs``, ``nc``) and ``tool=none`` (the program ran without a profiler), so that the sweep
queries, charts and ``export sweep`` read a folder of such logs as the notebook's grid;
the point's counts are checked as ``--param bs=`` and ``nc=`` are (1 to 2**31 - 1).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pyarrow as pa

from ..errors import InputError
from ..numbers import MAX_COUNT, check_counts
from . import Parsed
from .requests import COLUMNS

KIND = "timing"

#: the seed notebook's line pattern, and tracekit capture's optional phase tag before it
LINE = re.compile(r"(?:\[(warmup|timed) \d+\]\s*)?"
                  r"KV Caches:\s*(\d+),\s*Candidate Embeddings:\s*(\d+),\s*Total time\(ms\):\s*"
                  # (a decimal comma, nan and inf taken whole, to be refused: not cut to 12 from 12,5, nor passed over)
                  r"((?i:[-+]?(?:nan|inf(?:inity)?))|[-+0-9.eE]+(?:,\d+)?)")
#: a line that names one of the line's fields: one that does not read as LINE is said, not passed over
FIELDS = re.compile(r"KV Caches:|Candidate Embeddings:|Total time\(ms\)")
#: the notebook's file name pattern (searched, so that a prefix or a copy's suffix is allowed)
NAME = re.compile(r"bs(\d+)_nc(\d+)")


def logs_below(folder: Path):
    """The files below ``folder`` named as the benchmark's logs (``benchmark_bs8_nc1024.log``,
    compressed or not), in path order."""
    from . import uncompressed_name

    for f in sorted(folder.rglob("*.log*")):
        name = uncompressed_name(f)
        if name.endswith(".log") and NAME.search(name) and f.is_file():
            yield f


def sniff(path: Path, head: bytes) -> bool:
    """True for a text file holding the benchmark's line (in its first 64 KiB)."""
    if b"\0" in head:
        return False
    return LINE.search(head.decode("utf-8", "replace")) is not None


def read(path: Path) -> Parsed:
    m = NAME.search(path.name)
    if m is None:
        raise InputError(f"{path}: a benchmark log names its point as run_bench.sh does "
                         "(benchmark_bs8_nc1024.log): rename it so, the batch size and candidates it ran at")
    bs, nc = int(m[1]), int(m[2])
    # the point as --param bs=, nc= would be checked (its lines' counts are 32-bit columns too)
    check_counts({"bs": bs, "nc": nc}, f"{path}: its name's ", InputError)
    rows, odd = [], []  # odd: (line number, text) of lines with the line's fields that do not read as it
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if (hit := LINE.search(line)) is None:
                if FIELDS.search(line):
                    odd.append((number, line.strip()))
                continue
            if int(hit[2]) > MAX_COUNT:  # (Candidate Embeddings: the name's nc, checked below)
                raise InputError(f"{path}: line {line.strip()!r}: 'KV Caches: {hit[2]}' is past {MAX_COUNT}, "
                                 "no count of caches")
            try:
                latency = float(hit[4])
            except ValueError:
                latency = math.nan
            if not (math.isfinite(latency) and latency >= 0):
                raise InputError(f"{path}: line {line.strip()!r}: 'Total time(ms): {hit[4]}' is not a "
                                 "time (a number of ms, 0 or more)") from None
            rows.append((len(rows), hit[1] or "timed", bs, nc, int(hit[2]), int(hit[3]), latency))
    if not any(r[1] == "timed" for r in rows):
        raise InputError(f"{path}: no timed 'KV Caches: N, Candidate Embeddings: M, Total time(ms): T' line")
    scored = {r[5] for r in rows}
    if scored != {nc}:  # (a log copied under another point's name, or two points' lines in one, would blend)
        raise InputError(f"{path}: its name says nc={nc} but its lines scored Candidate Embeddings: "
                         f"{', '.join(map(str, sorted(scored)))}; a log is one point: name it after the point it "
                         "ran at, one log a point")
    if odd:  # (said once the log is read: the notebook's pattern passed them over without a word)
        from ..errors import CaptureWarning, warn_from_caller
        from ..names import cut_end

        number, text = odd[0]
        warn_from_caller(CaptureWarning(
            f"{path}: {len(odd)} line{'s' if len(odd) > 1 else ''} naming the benchmark's fields but not reading as "
            f"'KV Caches: N, Candidate Embeddings: M, Total time(ms): T' (line {number}: "
            f"{cut_end(text, 100)!r}): left out"))
    names = ("request_idx", "phase", "bs", "nc", "kv_caches", "candidate_embeddings", "latency_ms")
    data = {name: [r[i] for r in rows] for i, name in enumerate(names)}
    for col in ("peak_mem_allocated_mb", "peak_mem_reserved_mb", "model_flop", "attention_flop"):
        data[col] = [None] * len(rows)  # (the log has none)
    tbl = pa.table({c: pa.array(data[c], type=t) for c, t in COLUMNS.items()})
    return Parsed(kind=KIND, meta={"source_format": "benchmark log"}, tables={"requests": tbl},
                  params={"bs": bs, "nc": nc, "tool": "none"})
