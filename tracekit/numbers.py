"""Whole numbers as people type them: plain (12100481), grouped in thousands as
tracekit's tables print them (12,100,481), or with underscores as Python writes them
(12_100_481). One grammar for every integer given as text: a query's ``-p`` parameter,
a chart's, a CLI option of type ``Ns``. A number copied from a table works anywhere, and
a comma in the wrong place (``1,2``) is an error, not 12. And the counts a run's parameters
hold (``bs``, ``nc``, ``world_size``), however they came (``--param``, a run folder's
meta.json, a benchmark log's name): whole numbers the queries read as 32-bit integers. And
the one quantile rule of the summaries tracekit writes (a capture's requests, a bench's calls)."""

from __future__ import annotations

import math
import re

from .errors import ParamError, TracekitError

#: the integers an option or a parameter takes: DuckDB's BIGINT, and the largest any count or time here needs
INT_RANGE = (-(2**63), 2**63 - 1)
_WHOLE = re.compile(r"[-+]?(\d+|\d{1,3}(,\d{3})+|\d+(_\d+)+)", re.ASCII)  # (0-9 only: not ١٢٣)


def whole_number(text: str) -> int:
    """``text`` (blanks around it ignored) as an int; ValueError where it is not a whole
    number in one of the forms above."""
    s = text.strip()
    if not _WHOLE.fullmatch(s):
        raise ValueError(f"{text!r} is not a whole number")
    return int(s.replace(",", "").replace("_", ""))


#: run parameters the sweep and rank queries read as whole numbers (schema_runs.sql)
COUNT_PARAMS = {"bs": "the batch size", "nc": "the number of candidates", "world_size": "the job's ranks"}
#: the largest of them: the queries read them as 32-bit integers
MAX_COUNT = 2**31 - 1


def check_counts(params: dict, where: str, error: type[TracekitError] = ParamError) -> None:
    """Each of COUNT_PARAMS given is a whole number from 1 to MAX_COUNT (a JSON number or
    its text: ``--param bs=8``), not a value the queries would fail to cast for the whole store."""
    for key, what in COUNT_PARAMS.items():
        if key not in params:
            continue
        v = params[key]
        try:
            ok = not isinstance(v, bool) and float(v) == int(v) and 1 <= int(v) <= MAX_COUNT
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise error(f"{where}{key}={v!r}: {key} ({what}) is a whole number from 1 to {MAX_COUNT}")


def quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile of an ascending list, interpolated linearly between its two nearest
    values (NumPy's default, and DuckDB's quantile_cont, which the sweep queries use); NaN
    for an empty list."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)
