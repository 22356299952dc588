"""Tables for a terminal: human units, one thousands separator, the terminal's width.

``render(rows, ...)`` formats a query result (``Rows``: column names, DuckDB type
names, Python row tuples) for reading, never for further processing (CSV, JSON and
Parquet carry every column, unformatted):

- times (columns ending ``_ns``, ``_us``, ``_ms``) in one unit per column, chosen from
  the column's values or forced by ``timeunit`` (ns, us, ms, s); the header says it
  (``total_ns`` shows as ``total_ms``). Timestamps (``start_ns``, ``end_ns``) stay in ns
  unless a unit is forced;
- rates and sizes with SI prefixes per cell: FLOP/s, OP/s, B/s, B, FLOP, Hz;
- percentages with one decimal, counts with thousands separators, ids and a sweep point's
  bs and nc as they are;
- each text column cut as what it holds says (``Rows.shortener``): kernel names shortened
  by ``names.short_name``, paths to their last parts, both so that two different values
  never read alike; call stacks (and a line's location) from the left, their innermost frames kept; sentences
  (a rule's message) at the end;
- the table fits ``width``: text columns are narrowed, widest first, down to a floor;
  numbers are never cut. Where even that does not fit, one block per row
  (``column  value`` lines) instead.

Pure Python on purpose: the CLI renders a query without importing Polars or PyArrow.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from . import names
from .errors import ParamError

TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
TIMEUNIT_CHOICES = ("auto", *TIME_UNITS)
_NUMERIC = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
                      r"FLOAT|DOUBLE|REAL|DECIMAL.*|INT\d*|UINT\d*|FLOAT\d*|NUMBER)$", re.I)
#: (name suffix, unit) for values shown with an SI prefix, most specific first
_SI_UNITS = [("bytes_per_s", "B/s"), ("flops_per_s", "FLOP/s"), ("ops_per_s", "OP/s"), ("_hz", "Hz"),
             ("_bytes", "B"), ("bytes", "B"), ("_flop", "FLOP"), ("flop", "FLOP")]
#: a prefix letter before such a suffix (model_gflop, model_tflops_per_s): what its values are in
_SCALED = {"k": 1e3, "g": 1e9, "t": 1e12, "p": 1e15}
_PREFIXES = {-4: "p", -3: "n", -2: "µ", -1: "m", 0: "", 1: "k", 2: "M", 3: "G", 4: "T", 5: "P", 6: "E"}
#: columns holding kernel names, shortened by names.short_name
KERNEL_NAME_COLUMNS = ("name", "kernel_name", "top_kernel", "kernel")
#: columns holding NVTX range names or paths: an empty one (a range given no text) shows as
#: ``names.UNNAMED``, not as a blank cell that reads as "no range"
NVTX_COLUMNS = ("path", "nvtx_path", "nvtx_range")
#: what a terminal shows for kernels launched outside every NVTX range (kernels-by-nvtx's path)
NO_RANGE = "(no range)"
#: free text: narrowed before any other column, and cut at the end (no labels told apart)
FREE_TEXT_COLUMNS = ("note", "notes", "description", "command", "params", "source_path")
#: columns whose end says most, cut from the left (``names.cut_stack``): call stacks folded
#: from the outermost caller (``caller;...;callee``) and the lists of their frames' modules in
#: the same order, the innermost frames kept, as they say which code made the call; a source
#: line's location (``file.py:434``), its line kept
TAIL_COLUMNS = ("stack", "modules", "location")
#: columns of sentences and lists (a rule's message or title, nsys-rules' finding and advice,
#: a line of source or SASS, a stall breakdown, ncu-summary's differing settings, what one
#: block more per SM needs): cut at the end like free text, no labels told apart (a '/' in
#: "and/or" is no path, "19.0 of" no tag), but not narrowed first, as they are what the row says
SENTENCE_COLUMNS = ("message", "title", "finding", "advice", "source", "sass", "top_stalls", "varies", "limiter",
                    "missing_metrics", "next_needs")
#: columns of a sweep point's grid values (``m=1024,dtype=fp16``): what a row is of, short, and
#: read whole; narrowed only where the other text columns at their least leave no room
#: (up to ``POINT_WIDTH``)
POINT_COLUMNS = ("point",)
POINT_WIDTH = 32
_ID = re.compile(r"(^|_)(id|pid|tid)$")
#: integer columns that name a setting rather than count something (a sweep point's batch size
#: and candidates): written as they are, ``nc 1024`` as in ``tracekit runs``' ``nc=1024``, not 1,024
PLAIN_INTEGERS = ("bs", "nc")
GAP = "  "
MIN_TEXT = 12  # a text column is narrowed to no less than this (or its header)
#: a column that is wrapped, never cut (free text, worded values: ``Rows.wrapped``), is no
#: narrower than this (or its widest cell): narrower, the table is shown one block per row
WRAP_MIN = 24


@dataclass
class Rows:
    """A query result for the terminal: names, DuckDB type names, row tuples and, when
    the query cut it at ``limit``, the number of rows it has in all."""

    columns: list[str]
    types: list[str]
    rows: list[tuple]
    total: int | None = None
    hidden: list[str] = field(default_factory=list)  # columns left out of the display
    #: the columns that hold kernel names (shortened as such); a named query says which
    #: of its columns do (a run's ``name`` is no kernel's)
    kernel_columns: tuple[str, ...] = KERNEL_NAME_COLUMNS
    #: a column's own shortener, ``(text, width) -> label``, where its values are of a kind
    #: the defaults do not know (diff's keys: ``kernel @ NVTX path``)
    shorteners: dict[str, Callable[[str, int], str]] = field(default_factory=dict)
    #: columns of values said in words, named for what they are of, not for what they hold
    #: (compare's runs: ``24.537 ms (+14.9%, regressed on 3/4 ranks)``): wrapped, never cut
    #: (``wrapped``), no labels told apart, as sentences are (a '/' in ``3/4`` is no path)
    worded: tuple[str, ...] = ()
    #: of the hidden columns, those left out for holding no value in the rows shown
    empty: list[str] = field(default_factory=list)
    #: a text column's least width (its cells' widest, where less) below which it reads as
    #: nothing (compare's keys and worded values): where the table cannot give it, it is
    #: shown one block per row (``_expanded``) rather than cut there
    floors: dict[str, int] = field(default_factory=dict)

    def shortener(self, col: str) -> Callable[[str, int], str]:
        """How a text column's cells are shortened, by what the column holds: its own
        shortener, a kernel name's, a call stack's or a location's (from the left), a
        sentence's or a worded value's (at the end), or the path-aware cut of other text
        (names, NVTX paths, files)."""
        if col in self.shorteners:
            return self.shorteners[col]
        if col in self.worded:
            return names.cut_sentence
        low = col.lower()
        if low in self.kernel_columns:
            return _kernel_name
        if low in TAIL_COLUMNS:
            return names.cut_stack
        if low == "job":  # (a multi-rank job's name: what tells it from another job kept)
            return names.cut_job
        if low in FREE_TEXT_COLUMNS or low in SENTENCE_COLUMNS:
            return names.cut_sentence
        return names.cut_text

    def wrapped(self, col: str) -> bool:
        """Whether a text column's cells are wrapped onto more lines where they are wider than
        the column, never cut: free text (a note says why a value was held, a command what
        ran) and worded values (a verdict)."""
        return col in self.worded or col.lower() in FREE_TEXT_COLUMNS

    def told_apart(self, col: str) -> bool:
        """Whether two different values of a text column get labels that never read alike
        (``names.distinct_labels``: names, keys, paths), or are only cut (free text,
        sentences, stacks: a word in brackets or a number added reads as part of the text)."""
        low = col.lower()
        return col in self.shorteners or (col not in self.worded and (low in self.kernel_columns or low not in (
            *FREE_TEXT_COLUMNS, *SENTENCE_COLUMNS, *TAIL_COLUMNS)))

    @classmethod
    def from_relation(cls, rel) -> Rows:
        return cls(list(rel.columns), [str(t) for t in rel.types], rel.fetchall())

    @classmethod
    def from_polars(cls, df) -> Rows:
        types = ["BIGINT" if t.is_integer() else "DOUBLE" if t.is_numeric() else "VARCHAR" for t in df.dtypes]
        decimals = [c for c, t in zip(df.columns, df.dtypes, strict=True) if t.is_decimal()]
        if not decimals:
            return cls(list(df.columns), types, list(df.iter_rows()))
        # A DECIMAL through its text: Polars hands Python a Decimal of at most 38 digits, so a
        # HUGEINT of 39 (a sum of BIGINTs) would be shown rounded
        import polars as pl

        rows = df.with_columns(df[c].cast(pl.String) for c in decimals).iter_rows()
        at = [df.columns.index(c) for c in decimals]
        return cls(list(df.columns), types, [tuple(Decimal(v) if i in at and v is not None else v
                                                   for i, v in enumerate(r)) for r in rows])

    def select(self, cols: Sequence[str]) -> Rows:
        """Only ``cols``, in that order (each must be a column of the result; a time column
        also by the name the table shows it under, ``total_ms`` for ``total_ns``)."""
        cols = [self._shown_as(c) for c in cols]
        twice = next((c for i, c in enumerate(cols) if c in cols[:i]), None)
        if twice is not None:
            raise ParamError(f"--columns: {twice!r} named twice (a time column is one column in any unit)")
        unknown = [c for c in cols if c not in self.columns]
        if unknown:
            raise ParamError(f"--columns: no column {', '.join(map(repr, unknown))}; "
                             f"the result has: {', '.join(self.columns)}")
        idx = [self.columns.index(c) for c in cols]
        return Rows([self.columns[i] for i in idx], [self.types[i] for i in idx],
                    [tuple(r[i] for i in idx) for r in self.rows], self.total,
                    [c for c in self.columns if c not in cols], self.kernel_columns, self.shorteners, self.worded,
                    floors=self.floors)

    def _shown_as(self, col: str) -> str:
        """The column ``col`` names: itself, else the one time column of its stem in another
        unit (``total_ms``, ``total_s``: ``total_ns``, whose header says the unit it is shown in)."""
        m = re.match(r"^(.*?)_(ns|us|ms|s)$", col)
        if col in self.columns or m is None:
            return col
        same = [c for c in self.columns if (t := _time_unit(c)) is not None and t[0] == m.group(1)]
        return same[0] if len(same) == 1 else col

    def without_empty(self) -> Rows:
        """The columns holding a value in some row (all of them when there are no rows)."""
        keep = [i for i in range(len(self.columns)) if not self.rows or any(r[i] is not None for r in self.rows)]
        if len(keep) == len(self.columns):
            return self
        dropped = [c for i, c in enumerate(self.columns) if i not in keep]
        return replace(self, columns=[self.columns[i] for i in keep], types=[self.types[i] for i in keep],
                       rows=[tuple(r[i] for i in keep) for r in self.rows], hidden=self.hidden + dropped,
                       empty=self.empty + dropped)


# -- one column ---------------------------------------------------------------------


def _num(v: Any) -> float | int | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float):
        return v
    if isinstance(v, Decimal) and v.is_finite() and v == v.to_integral_value():
        return int(v)  # (a HUGEINT reaches Python as a Decimal: a sum of BIGINTs)
    try:
        return float(v)  # Decimal
    except (TypeError, ValueError):
        return None


def si(v: float | None, unit: str) -> str:
    """``v`` with an SI prefix and three significant digits: ``781 TFLOP/s``, ``1.23 kB``."""
    if v is None:
        return ""
    if not math.isfinite(v):
        return f"{v} {unit}"
    if v == 0:
        return f"0 {unit}"
    exp = min(max(math.floor(math.log10(abs(v)) / 3), -4), 6)
    x = v / 10 ** (3 * exp)
    if round(abs(x), 3 - len(str(int(abs(x))))) >= 1000 and exp < 6:  # 999.95 rounds up: next prefix
        exp, x = exp + 1, x / 1000
    if exp == 0 and float(v).is_integer():  # 4 B, not 4.00 B
        return f"{int(v)} {unit}"
    digits = 3 - len(str(int(abs(x))))
    return f"{x:.{max(digits, 0)}f} {_PREFIXES[exp]}{unit}"


def _time_unit(col: str) -> tuple[str, str] | None:
    """(stem, source unit) of a time column: ``total_ns`` -> (``total``, ``ns``)."""
    m = re.match(r"^(.*?)_(ns|us|ms)$", col)
    return (m.group(1), m.group(2)) if m else None


def _auto_unit(values: list[float], empty: str = "ns") -> str:
    """The unit in which the column's median magnitude reads between 1 and 1000 (``empty``
    where it has no value but zeros: the column's own)."""
    mags = sorted(abs(v) for v in values if v)
    if not mags:
        return empty
    mid = mags[len(mags) // 2]
    for unit in ("ns", "us", "ms"):
        if mid < 1000 * TIME_UNITS[unit]:
            return unit
    return "s"


def _decimals(values: list[float]) -> int:
    """Decimals for a column of plain numbers: three significant digits at its median."""
    values = [v for v in values if math.isfinite(v)]  # (inf and NaN print as themselves)
    if all(float(v).is_integer() for v in values):
        return 0
    mags = sorted(abs(v) for v in values if v)
    if not mags:
        return 1
    return min(max(2 - math.floor(math.log10(mags[len(mags) // 2])), 1), 4)


_STATS = re.compile(r"(^|_)(avg|mean|med|median|min|max|stddev|p\d+)(?=_|$)")


def _family(stem: str) -> str:
    """The family of a time column's stem (``time_units``): its statistics dropped
    (``avg``, ``med``, ...), and a function's own time (``self_ns``) in its total's family:
    a part of it, shown in the same unit (a bottom-up view's two times, side by side)."""
    fam = _STATS.sub("", stem)
    return re.sub(r"^self(?=_|$)", "total", fam)


def _is_stamp(stem: str) -> bool:
    return stem in ("start", "end") or stem.endswith(("_start", "_end"))


def time_units(rows: Rows, timeunit: str = "auto") -> dict[str, str]:
    """The unit of each time column. ``auto``: one unit per family of columns (``avg_ns``,
    ``med_ns``, ``stddev_ns`` are one family; ``total_ns`` and ``self_ns`` another;
    ``api_med_ns`` and ``api_max_ns`` a third), the one in which the family's median value
    reads between 1 and 1000; timestamps stay in their own unit."""
    families: dict[str, list[str]] = {}
    units: dict[str, str] = {}
    for c, t in zip(rows.columns, rows.types, strict=True):
        tu = _time_unit(c.lower())
        if tu is None or not _is_numeric(t):
            continue
        stem, src = tu
        if timeunit != "auto":
            units[c] = timeunit
        elif _is_stamp(stem):
            units[c] = src
        else:
            families.setdefault(_family(stem), []).append(c)
    zeros, chosen = [], []
    for cols in families.values():
        values = []
        for c in cols:
            i = rows.columns.index(c)
            f = TIME_UNITS[_time_unit(c.lower())[1]]
            values += [v * f for v in map(_num, (r[i] for r in rows.rows)) if v is not None]
        if any(values):
            unit = _auto_unit(values)
            units.update(dict.fromkeys(cols, unit))
            chosen.append(unit)
        else:
            zeros += cols
    # zeros alone (no overlap at all): in the unit the table's other times read in, which a
    # zero reads the same in (not 0 ns beside ms); with none, each in its own unit, as its name says
    common = Counter(chosen).most_common(1)[0][0] if chosen else None  # (a tie: the first family's)
    units.update({c: common or _time_unit(c.lower())[1] for c in zeros})
    return units


def _is_numeric(dtype: str) -> bool:
    return bool(_NUMERIC.match(dtype.split("(")[0].strip()))


def format_column(col: str, dtype: str, values: Sequence[Any], unit: str | None = None) -> tuple[str, list[str], bool]:
    """(header, cells, is_number) for one column; ``unit``: a time column's unit (ns, us,
    ms, s; by default the one its own values read best in)."""
    if not _is_numeric(dtype):
        if col.lower() in NVTX_COLUMNS:
            return col, [names.UNNAMED if isinstance(v, str) and not v.strip() else _text(v) for v in values], False
        if col.lower() == "range":  # nvtx-kernels' row of kernels launched outside every range: NULL,
            # as nsys stats prints it blank, read as kernels-by-nvtx names it, not as a blank cell
            return col, [NO_RANGE if v is None else _text(v) for v in values], False
        return col, [_text(v) for v in values], False
    nums = [_num(v) for v in values]
    present = [v for v in nums if v is not None]
    low = col.lower()
    t = _time_unit(low)
    if t is not None:
        stem, src = t
        ns = [None if v is None else v * TIME_UNITS[src] for v in nums]
        unit = unit or _auto_unit([v for v in ns if v is not None], src)
        # (in its own unit a value stays what it is: an integer past 2**53 is no float)
        scaled = nums if unit == src else [None if v is None else v / TIME_UNITS[unit] for v in ns]
        if unit == src and all(float(v).is_integer() for v in present):
            dec = 0
        elif unit == "ns":
            dec = 0 if all(float(v).is_integer() for v in scaled if v is not None) else 1
        else:
            dec = 3
        return f"{stem}_{unit}", [fixed_time(v, dec) for v in scaled], True
    if low.endswith("_pct"):
        return col, [_fixed(v, 1) for v in nums], True
    for suffix, unit in _SI_UNITS:
        if low.endswith(suffix):
            scale = prefixed_scale(low, suffix)
            return col, [si(None if v is None else v * scale, unit) for v in nums], True
    if _ID.search(low) or low in PLAIN_INTEGERS:
        return col, ["" if v is None else str(v) for v in values], True
    dec = _decimals(present) if present else 0
    # (a DECIMAL's value as it is: through a float, 1234567890123456789.5 would read ...768)
    exact = [v if isinstance(v, Decimal) and v.is_finite() else n for v, n in zip(values, nums, strict=True)]
    return col, [_fixed(v, dec) for v in exact], True


def prefixed_scale(name: str, suffix: str) -> float:
    """What a value of the column ``name``, whose name ends in the unit ``suffix`` (``flop``,
    ``flops_per_s``), is in: a prefix letter between an underscore and the unit scales it
    (``model_gflop``: GFLOP, 1e9; ``model_tflops_per_s``: TFLOP/s, 1e12); 1 otherwise."""
    head = name.lower()[:-len(suffix)]
    return _SCALED.get(head[-1:], 1.0) if not suffix.startswith("_") and head[-2:-1] == "_" else 1.0


def _fixed(v: float | Decimal | None, decimals: int) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, int) and decimals == 0:  # exactly: the 'f' format goes through a float
        return f"{v:,}"
    return f"{v:z,.{decimals}f}"  # (z: a value that rounds to zero reads 0.0, not -0.0)


def fixed_time(v: float | None, decimals: int) -> str:
    """A time in its column's unit; one too small for the decimals (43 us in a column of
    seconds) reads ``<0.001``, not ``0.000``: a time that is not zero must not read as one."""
    text = _fixed(v, decimals)
    if decimals and v and isinstance(v, int | float) and math.isfinite(v) and round(abs(v), decimals) == 0:
        return ("<" if v > 0 else ">-") + f"{10.0 ** -decimals:.{decimals}f}"
    return text


def _text(v: Any) -> str:
    if v is None:
        return ""
    if hasattr(v, "isoformat") and hasattr(v, "microsecond"):  # datetime: to the second
        v = v.replace(microsecond=0)
    s = str(v)
    if s.startswith("{") and s.endswith("}"):  # a JSON object (a run's params): k=v pairs
        import json

        try:
            obj = json.loads(s)
            s = " ".join(f"{k}={json.dumps(x) if isinstance(x, dict | list) else x}" for k, x in obj.items())
        except (ValueError, AttributeError):
            pass
    # one line, and nothing a terminal would act on (a capture's names are anyone's text:
    # an escape sequence in a kernel or NVTX name must not clear the screen or retitle it)
    return names.escape_controls(s.replace("\r", " ").replace("\n", " ").replace("\t", " "))


# -- the table ----------------------------------------------------------------------


def _fit(natural: list[int], floors: list[int], room: int) -> list[int] | None:
    """Widths of the text columns: the widest narrowed first (one cap for all), never
    below its floor; None when even the floors do not fit in ``room``."""
    if sum(natural) <= room:
        return natural
    if sum(floors) > room:
        return None
    lo, hi = 0, max(natural)
    while lo < hi:  # the largest cap that fits
        cap = (lo + hi + 1) // 2
        if sum(max(f, min(n, cap)) for n, f in zip(natural, floors, strict=True)) <= room:
            lo = cap
        else:
            hi = cap - 1
    widths = [max(f, min(n, lo)) for n, f in zip(natural, floors, strict=True)]
    spare = room - sum(widths)
    for i in sorted(range(len(widths)), key=lambda i: -natural[i]):  # hand out what is left
        add = min(spare, natural[i] - widths[i])
        widths[i] += add
        spare -= add
    return widths


def _fit_free_last(natural: list[int], floors: list[int], free: list[bool], room: int) -> list[int] | None:
    """``_fit``, where the free-text columns give up their width first: the others are
    fitted into what the free ones' floors leave, the free ones into the rest."""
    if not any(free) or all(free):
        return _fit(natural, floors, room)
    pick = [i for i, f in enumerate(free) if not f], [i for i, f in enumerate(free) if f]
    other = _fit([natural[i] for i in pick[0]], [floors[i] for i in pick[0]],
                 room - sum(floors[i] for i in pick[1]))
    if other is None:
        return None
    rest = _fit([natural[i] for i in pick[1]], [floors[i] for i in pick[1]], room - sum(other))
    if rest is None:
        return None
    widths = [0] * len(natural)
    for i, w in [*zip(pick[0], other, strict=True), *zip(pick[1], rest, strict=True)]:
        widths[i] = w
    return widths


def _kernel_name(text: str, width: int) -> str:
    """A kernel name shortened; other text in a name column (an API or run name) cut."""
    return names.short_name(text, width) if any(c in text for c in "<(:") else names.cut_end(text, width)


def _shorten(col: str, values: list[Any], cells: list[str], width: int, rows: Rows) -> list[str]:
    """The cells of text column ``col`` in at most ``width`` characters, as ``rows`` says
    the column is cut (``Rows.shortener``, ``Rows.told_apart``)."""
    shorten = rows.shortener(col)
    if not rows.told_apart(col):
        return [shorten(c, width) for c in cells]
    return names.distinct_labels([None if v is None else c for v, c in zip(values, cells, strict=True)],
                                 width, shorten)


#: kernel names read best short even where the terminal has room for more
NAME_WIDTH = 60


def check_timeunit(timeunit: str) -> None:
    """A one-line error unless ``timeunit`` is one of ``TIMEUNIT_CHOICES``."""
    if timeunit not in TIMEUNIT_CHOICES:
        raise ParamError(f"--timeunit {timeunit!r}: choose one of {', '.join(TIMEUNIT_CHOICES)}")


def render(rows: Rows, width: int = 120, timeunit: str = "auto", more: str | None = None) -> str:
    """The table as text, ending with a footer line (rows shown of how many, hidden
    columns). ``more`` is what to say when rows were left out (``--limit 0 for all``)."""
    check_timeunit(timeunit)
    cols = []
    units = time_units(rows, timeunit)
    for i, (c, t) in enumerate(zip(rows.columns, rows.types, strict=True)):
        values = [r[i] for r in rows.rows]
        header, cells, is_num = format_column(c, t, values, units.get(c))
        header = names.escape_controls(header)  # (an ad-hoc query's column can be named anything)
        cols.append((c, header, values, cells, is_num))
    footer = _footer(rows, more)
    if not cols:
        return footer + "\n"
    text_idx = [i for i, c in enumerate(cols) if not c[4]]
    # (a worded column's header, 'sweep-20261202T193148.143Z (base)', on two lines where the table
    # is narrow for it on one: what it is of above what it is to the comparison)
    worded_heads = {i: _worded_head(cols[i][1], cols[i][3]) for i in text_idx if cols[i][0] in rows.worded}
    natural, wrapped = [], []  # (each text column's widest, with its header on one line; wrapped)
    for i in text_idx:
        c, header, values, cells, _ = cols[i]
        if c.lower() in rows.kernel_columns:
            cells = _shorten(c, values, cells, NAME_WIDTH, rows)
            cols[i] = (c, header, values, cells, False)
        natural.append(_widest([header, *cells]))
        wrapped.append(max(_widest(worded_heads[i]), _widest(cells)) if i in worded_heads else natural[-1])
    floors = [min(n, max(MIN_TEXT, _widest(worded_heads.get(i, [cols[i][1]])), rows.floors.get(cols[i][0], 0),
                         WRAP_MIN if rows.wrapped(cols[i][0]) else 0))
              for n, i in zip(wrapped, text_idx, strict=True)]
    # (a point's label whole where the others fit beside it: its floor its width, else as any text's)
    whole = [max(f, min(n, POINT_WIDTH)) if cols[i][0].lower() in POINT_COLUMNS else f
             for n, f, i in zip(natural, floors, text_idx, strict=True)]
    free = [cols[i][0].lower() in FREE_TEXT_COLUMNS for i in text_idx]
    heads = [[c[1]] for c in cols]
    widths = None
    for wrap in (False, True):  # long headers wrapped (numbers' at '_') only where needed
        if wrap:
            heads = [_wrap(c[1], max(map(len, c[3]), default=0)) if c[4] else worded_heads.get(i, [c[1]])
                     for i, c in enumerate(cols)]
            natural = wrapped
        num_width = sum(max([*map(len, h), *map(len, c[3])]) for c, h in zip(cols, heads, strict=True) if c[4])
        room = width - num_width - len(GAP) * (len(cols) - 1)
        widths = _fit_free_last(natural, whole, free, room)
        if widths is None and whole != floors:
            widths = _fit_free_last(natural, floors, free, room)
        if widths == natural:
            break
    if widths is None:
        return _expanded(cols, width, rows) + footer + "\n"
    lines = [[[cell] for cell in c[3]] for c in cols]  # each column's cells, each on its lines
    for w, i in zip(widths, text_idx, strict=True):
        c, header, values, cells, _ = cols[i]
        if _widest(cells) > w:
            lines[i] = [_wrap_cell(cell, w) for cell in cells] if rows.wrapped(c) else \
                [[cell] for cell in _shorten(c, values, cells, w, rows)]
    texts = [[line for cell in col for line in cell] for col in lines]
    col_w = [_widest([*h, *t]) for t, h in zip(texts, heads, strict=True)]
    # (padded by str's own methods where a column is ASCII: a character is a column then)
    just = [(str.rjust if c[4] else str.ljust) if _ascii([*h, *t]) else (_rjust if c[4] else _ljust)
            for c, t, h in zip(cols, texts, heads, strict=True)]
    depth = max(map(len, heads))
    heads = [[""] * (depth - len(h)) + h for h in heads]  # headers sit on the line above the rule
    out = [GAP.join(j(h[k], w) for h, w, j in zip(heads, col_w, just, strict=True)).rstrip() for k in range(depth)]
    out.append(GAP.join("-" * w for w in col_w))
    for r in range(len(rows.rows)):
        cells = [col[r] for col in lines]
        for k in range(max(map(len, cells))):  # (a wrapped cell's lines below its first, the others blank)
            out.append(GAP.join(j(cell[k] if k < len(cell) else "", w)
                                for cell, w, j in zip(cells, col_w, just, strict=True)).rstrip())
    out.append(footer)
    return "\n".join(out) + "\n"


def _wrap_cell(text: str, width: int) -> list[str]:
    """``text`` on lines of at most ``width`` terminal columns, broken between words (a word
    longer than a line broken inside)."""
    import textwrap

    out = []
    for line in textwrap.wrap(text, width, break_on_hyphens=False) or [""]:
        while names.text_width(line) > width:  # (wide characters: textwrap counts characters)
            head = names.cut_end(line, width + 1)[:-1]
            out.append(head)
            line = line[len(head):]
        out.append(line)
    return out


def _worded_head(header: str, cells: list[str]) -> list[str]:
    """A worded column's header, on two lines before its ' (' where it is wider than its cells."""
    name, said, rest = header.rpartition(" (")
    if not said or not name or names.text_width(header) <= _widest(cells):
        return [header]
    return [name, "(" + rest]


def _ascii(texts: list[str]) -> bool:
    return all(map(str.isascii, texts))


def _widest(texts: list[str]) -> int:
    """The terminal columns the widest of ``texts`` takes (``names.text_width``)."""
    return max(map(len if _ascii(texts) else names.text_width, texts), default=0)


def _ljust(text: str, width: int) -> str:
    """``text`` padded on the right to ``width`` terminal columns (``names.text_width``)."""
    return text + " " * (width - names.text_width(text))


def _rjust(text: str, width: int) -> str:
    """``text`` padded on the left to ``width`` terminal columns."""
    return " " * (width - names.text_width(text)) + text


def _wrap(header: str, width: int) -> list[str]:
    """``header`` on lines of about ``width`` (at least 6) characters, broken after '_'."""
    width = max(width, 6)
    parts = [p + "_" for p in header.split("_")]
    parts[-1] = parts[-1][:-1]
    lines = [""]
    for p in parts:
        if lines[-1] and len(lines[-1]) + len(p) > width:
            lines.append("")
        lines[-1] += p
    return lines


def _expanded(cols, width: int, rows: Rows) -> str:
    """One block per row, ``column  value`` per line (psql's expanded display)."""
    key_w = max(names.text_width(c[1]) for c in cols)
    val_w = max(width - key_w - len(GAP), MIN_TEXT)
    shortened = []
    for c, _header, values, cells, is_num in cols:
        if not is_num and rows.wrapped(c):
            shortened.append([_wrap_cell(cell, val_w) for cell in cells])
        else:
            shortened.append([[x] for x in (cells if is_num else _shorten(c, values, cells, val_w, rows))])
    out = []
    n = len(cols[0][3])
    for r in range(n):
        title = f"-[ row {r + 1} ]"
        out.append(title + "-" * max(min(width, key_w + 2 + val_w) - len(title), 3))
        for (_, header, *_rest), cells in zip(cols, shortened, strict=True):
            first, *more = cells[r]
            out.append(f"{_ljust(header, key_w)}{GAP}{first}".rstrip())
            out += [f"{' ' * key_w}{GAP}{line}".rstrip() for line in more]
    return "\n".join(out) + ("\n" if out else "")


def _footer(rows: Rows, more: str | None) -> str:
    n = len(rows.rows)
    total = rows.total if rows.total is not None else n
    if n == 0:
        text = "no rows"
    elif total > n:
        text = f"{n:,} of {total:,} rows" + (f" ({more})" if more else "")
    else:
        text = f"{n:,} row" + ("" if n == 1 else "s")
    if rows.hidden:
        shown = len(rows.columns)
        shown_only = " these rows'" if total > n else ""  # (a column empty in the rows shown may hold values past them)
        empty = f"no value in{shown_only} {', '.join(rows.empty)}; " if rows.empty else ""
        text += f"; {shown} of {shown + len(rows.hidden)} columns ({empty}--all-columns for all)"
    return text
