"""Nsight Compute CSV exports: ``ncu --csv --page raw`` and ``ncu --csv --page details``.

Both pages start with the same identity columns (ID, Process ID, ..., Kernel Name, ...,
CC). The raw page then has one column per metric, a second row with the units and one
row per profiled launch; the details page is long (Section Name, Metric Name, Metric
Unit, Metric Value, then rule columns). Values carry thousands separators ("1,024"),
may be "n/a" / "no data" / "nan", and are in display units ("Ghz", "Mbyte", "us")
unless the export used ``--print-units base``; everything is converted to base units
(byte, hz, ns, cycle, ...). The parsing is columnar (Polars), not a loop over cells.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import polars as pl

from ..errors import InputError
from . import ncu_rules
from .ncu_head import find_header, header_of, is_message
from .ncu_labels import LABELS

#: identity columns shared by the raw and details pages -> ncu_kernels column
IDENTITY = {
    "ID": "kernel_id",
    "Process ID": "process_id",
    "Process Name": "process_name",
    "Host Name": "host_name",
    "Kernel Name": "name",
    "Context": "context_id",
    "Stream": "stream_id",
    "Block Size": "block",
    "Grid Size": "grid",
    "Device": "device_id",
    "CC": "cc",
}
#: what an ncu result profiled (ncu_report's IAction.WorkloadType_*, lower case)
WORKLOADS = ("kernel", "range", "cmdlist", "graph", "subgrid_schedule")
#: the details page's section of the metrics given with ncu --metrics (not a section of ncu's)
METRICS_SECTION = "Command line profiler metrics"
NVTX_PUSHPOP_PREFIX = "thread Domain:Push/Pop_Range"
NVTX_STARTEND_PREFIX = "Id:Domain:Start/Stop_Range"
DETAILS_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
#: the details page's column of the body item (chart, table) a row belongs to: ncu --print-details body|all
BODY_ITEM = "Body Item Label"
#: the launch's duration (its .sum, .avg, .min, .max), which the ncu queries read as ns
DURATION_PREFIX = "gpu__time_duration."

#: a number as ncu prints it: optional sign, thousands separated by ",", "." decimals
NUMBER_RE = r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?$"
#: digits mixed with separators that are not ncu's (e.g. "1.234,5", "70,01", "1 024")
NUMBERISH_RE = r"^[-+]?[\d.,'\s\u00a0\u202f]*\d[\d.,'\s\u00a0\u202f]*$"
_METRIC_NAME = re.compile(r"^[A-Za-z0-9_]+__[A-Za-z0-9_.]+$")

_PREFIX = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
}
# base units as ncu --print-units base prints them; time is ns in a numerator, s in a rate
_TIME_NUM = {
    "ns": 1.0,
    "us": 1e3,
    "ms": 1e6,
    "s": 1e9,
    "nsecond": 1.0,
    "usecond": 1e3,
    "msecond": 1e6,
    "second": 1e9,
}
_TIME_DEN = {
    "ns": 1e9,
    "us": 1e6,
    "ms": 1e3,
    "s": 1.0,
    "nsecond": 1e9,
    "usecond": 1e6,
    "msecond": 1e3,
    "second": 1.0,
}
_PREFIXABLE = ("byte", "hz", "bit")
#: a side of a unit that is a time, or a scaled byte, hz or bit, in a spelling not ncu's
#: ("usec", "ps", "MHz", "kbyte", "KiB", "GB"): its factor is unknown, never taken as 1
_TIME_LIKE = re.compile(r"^[pnuµμmkKMGT]?(s|secs?|seconds?)$", re.IGNORECASE)
_SCALED_LIKE = re.compile(r"^.+(bytes?|hz|bits?)$|^[kKMGTP]i?B$", re.IGNORECASE)


def _part_to_base(part: str, denominator: bool) -> tuple[str, float]:
    """One side of a unit ("Mbyte", "us", "sector") -> (base unit, factor); ValueError for
    a time or a scaled unit in a spelling ncu does not write."""
    if not denominator and part in _TIME_NUM:
        return "ns", _TIME_NUM[part]
    for base in _PREFIXABLE:
        if part.endswith(base) and part[: -len(base)] in _PREFIX and part != base:
            return base, _PREFIX[part[: -len(base)]]
    if _TIME_LIKE.match(part) or _SCALED_LIKE.match(part):
        raise ValueError(part)
    return part, 1.0


def unit_to_base(unit: str) -> tuple[str, float]:
    """Display unit -> (base unit, multiplier): "Ghz" -> ("hz", 1e9), "sector/us" -> ("sector/s", 1e6);
    ValueError for one ncu does not write that tracekit would have to scale ("usec", "MHz")."""
    unit = (unit or "").strip()
    if not unit:
        return "", 1.0
    num, _, den = unit.partition("/")
    nb, nf = _part_to_base(num, False)
    if not den:
        return nb, nf
    if den in _TIME_DEN:  # a rate: "sector/ns" -> "sector/s" is x 1e9
        return f"{nb}/s", nf * _TIME_DEN[den]
    db, df = _part_to_base(den, True)  # "%/Kbyte" -> "%/byte" is / 1e3
    return f"{nb}/{db}", nf / df


def _text_lines(path: Path) -> tuple[list[str], int]:
    """The file's lines (utf-8), without the ncu messages (==PROF==, ==WARNING==) and blank
    lines after the CSV, and how many lines before its header to skip: ncu's messages, blank
    lines, the profiled program's output (``find_header``). Lines end at \\n, \\r\\n or \\r
    only: a name may hold any other line separator (U+2028, U+0085), kept as it is."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text; export the CSV again with ncu --csv") from err
    lines = _LINE_END.split(text)
    while lines and is_message(lines[-1]):
        lines.pop()
    found = find_header(lines)
    if found is not None:
        return lines, found[0]
    skip = 0  # (no header: the first line that is not a message says what the file is)
    while skip < len(lines) and is_message(lines[skip]):
        skip += 1
    return lines, skip


#: a CSV's line ends (str.splitlines would split at U+2028, U+0085, form feeds... inside a name too)
_LINE_END = re.compile(r"\r\n|\n|\r")


def page_of(header: list[str]) -> str:
    """'raw' | 'details' | 'other' for an ncu CSV header."""
    if all(c in header for c in DETAILS_COLUMNS):
        return "details"
    if any("__" in c for c in header):
        return "raw"
    return "other"


#: the largest grid or block dimension CUDA launches (gridDim.x: 2**31 - 1), and a launch ID's
MAX_DIM = INT32_MAX = 2**31 - 1


def _parse_dim(s: str | None) -> tuple[int | None, int | None, int | None]:
    """``(32, 32, 1)`` -> (32, 32, 1); unknown (None) where the page prints no triple, or
    ``(0, 0, 0)``: a launch whose launch metrics ncu did not collect (a report has none).
    ValueError for a dimension no launch has: negative, or past ``MAX_DIM``."""
    nums = [int(n) for n in re.findall(r"-?\d+", s or "")]
    if any(not 0 <= n <= MAX_DIM for n in nums):
        raise ValueError(s)
    if len(nums) != 3 or 0 in nums:
        return None, None, None
    return nums[0], nums[1], nums[2]


def parse_nvtx_pushpop(cell: str | None) -> list[str]:
    """`870  "<default domain>:ncu:none:..."  "<default domain>:gemm:none:..."` -> ["ncu", "gemm"]."""
    out = []
    for entry in re.findall(r'"([^"]*)"', cell or ""):
        parts = entry.rsplit(
            ":", 6
        )  # PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg follow the range
        head = parts[0] if len(parts) == 7 else entry
        domain, _, text = head.partition(":")
        if not _:
            domain, text = "<default domain>", head
        out.append(text if domain == "<default domain>" else f"{domain}:{text}")
    return out


def _launch_ids(df: pl.DataFrame, path: Path) -> pl.Series:
    """The ID column as Int64: digits with ncu's thousands separators, below 2**31 (the
    store's kernel_id is an INTEGER)."""
    text = df["ID"].str.replace_all(",", "", literal=True).str.strip_chars()
    ok = text.str.contains(r"^\d{1,19}$").fill_null(False)
    ids = text.cast(pl.Int64, strict=False)
    bad = ~ok | ids.is_null() | (ids > INT32_MAX).fill_null(False)
    if bad.any():
        raise InputError(
            f"{path}: bad launch ID {df['ID'][bad.arg_max()]!r}; the export is corrupt or not an ncu CSV"
        )
    return ids.alias("kernel_id")


def _check_rows(text: str, header: list[str], page: str, path: Path, first_line: int) -> None:
    """Every row has the header's fields and every quoted field its closing quote: a
    row cut short (a truncated export) would lose its last metrics silently. On the
    details page a metric row ends after its value (with an empty field: ncu writes a
    trailing comma), a rule row is whole."""
    allowed = {len(header)}
    if page == "details":
        allowed.add(header.index("Metric Value") + 2)
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        for row in reader:
            if row and len(row) not in allowed:
                raise InputError(
                    f"{path}: line {first_line + reader.line_num - 1} has {len(row)} fields where the header "
                    f"has {len(header)}; the export is truncated or corrupt"
                )
    except csv.Error as err:
        raise InputError(
            f"{path}: malformed CSV at line {first_line + reader.line_num - 1} ({err}); the export is "
            "truncated or corrupt: export again with ncu --csv"
        ) from err


def _kernel_rows(df: pl.DataFrame, path: Path) -> pl.DataFrame:
    """One row per launch from the identity columns of a raw or details page."""
    cols = df.columns
    pushpop = next((c for c in cols if c.startswith(NVTX_PUSHPOP_PREFIX)), None)
    startend = next((c for c in cols if c.startswith(NVTX_STARTEND_PREFIX)), None)
    first = df.with_columns(_launch_ids(df, path)).unique(subset=["kernel_id"], keep="first", maintain_order=True)
    rows = []
    for r in first.iter_rows(named=True):
        kid = r["kernel_id"]
        try:
            (gx, gy, gz), (bx, by, bz) = (_parse_dim(r.get(c)) for c in ("Grid Size", "Block Size"))
        except ValueError as err:
            column = "Grid Size" if r.get("Grid Size") == err.args[0] else "Block Size"
            raise InputError(f"{path}: launch {kid}: {column} {err.args[0][:60]!r} holds a dimension no launch has "
                             f"(each is 0 to {MAX_DIM:,}); the export is corrupt: export again with ncu --csv") from None
        ranges = parse_nvtx_pushpop(r.get(pushpop)) if pushpop else []
        se = parse_nvtx_pushpop(r.get(startend)) if startend else []
        cc = (r.get("CC") or "").strip() or None

        def _int(key, _r=r):
            v = (_r.get(key) or "").replace(",", "").strip()
            if not v or v == "n/a":  # (n/a: a range's stream)
                return None
            limit = 2**31 if KERNEL_SCHEMA[IDENTITY[key]] == pl.Int32 else 2**63
            if not (v.isascii() and v.isdigit() and int(v) < limit):
                raise InputError(f"{path}: launch {_r['kernel_id']}: {key} {v[:40]!r} is not a whole number "
                                 f"below 2**{limit.bit_length() - 1}; the export is corrupt: export again with ncu --csv")
            return int(v)

        rows.append(
            {
                "kernel_id": kid,
                "name": r.get("Kernel Name"),
                "mangled_name": None,
                "function_name": None,
                "workload": "kernel",
                "process_id": _int("Process ID"),
                "process_name": r.get("Process Name") or None,
                "host_name": r.get("Host Name") or None,
                "device_id": _int("Device"),
                "context_id": _int("Context"),
                "stream_id": _int("Stream"),
                "cc": cc,
                "grid_x": gx,
                "grid_y": gy,
                "grid_z": gz,
                "block_x": bx,
                "block_y": by,
                "block_z": bz,
                "nvtx_ranges": ranges,
                "nvtx_start_end": se,
            }
        )
    return pl.DataFrame(rows, schema=KERNEL_SCHEMA)


KERNEL_SCHEMA = {
    "kernel_id": pl.Int64,
    "name": pl.Utf8,
    "mangled_name": pl.Utf8,
    "function_name": pl.Utf8,
    "workload": pl.Utf8,
    "process_id": pl.Int64,
    "process_name": pl.Utf8,
    "host_name": pl.Utf8,
    "device_id": pl.Int32,
    "context_id": pl.Int64,
    "stream_id": pl.Int64,
    "cc": pl.Utf8,
    "grid_x": pl.Int64,
    "grid_y": pl.Int64,
    "grid_z": pl.Int64,
    "block_x": pl.Int64,
    "block_y": pl.Int64,
    "block_z": pl.Int64,
    "nvtx_ranges": pl.List(pl.Utf8),
    "nvtx_start_end": pl.List(pl.Utf8),
}


def with_workloads(kernels: pl.DataFrame, metrics: pl.DataFrame, page: str) -> pl.DataFrame:
    """``kernels`` with what each result profiled, which ncu's CSV pages do not print (a
    report says it): a range (``--replay-mode range``/``app-range``) is named ``range`` and
    has no grid or block; a whole graph (``--graph-profiling graph``) is named ``graph``
    and has ncu's ``launch__graph_*`` metrics on the raw page, and on the details page,
    which prints none of those, no Waves Per SM (ncu gives every kernel's Launch
    Statistics one): a kernel named ``graph`` read from a details page without Launch
    Statistics is taken for a graph. A graph's grid and block, as ncu prints them, are the
    maxima over its kernels, not a launch's: NULL here, as read from a report."""
    def ids(pattern: str) -> pl.Series:
        return metrics.filter(pl.col("metric").str.contains(pattern))["kernel_id"].unique()

    marked, waves = ids(r"^launch__graph_"), ids(r"^launch__waves_per_multiprocessor$")
    ranged = (pl.col("name") == "range") & pl.col("grid_x").is_null() & pl.col("block_x").is_null()
    graph = (pl.col("name") == "graph") & (
        pl.col("kernel_id").is_in(marked.implode())
        | ((pl.lit(page) == "details") & ~pl.col("kernel_id").is_in(waves.implode())))
    workload = pl.when(ranged).then(pl.lit("range")).when(graph).then(pl.lit("graph")).otherwise(pl.lit("kernel"))
    launch = [f"{k}_{d}" for k in ("grid", "block") for d in "xyz"]
    return kernels.with_columns(workload.alias("workload")).with_columns(
        pl.when(pl.col("workload") == "kernel").then(pl.col(c)).otherwise(None).alias(c) for c in launch)


def _values(long: pl.DataFrame, path: Path) -> pl.DataFrame:
    """long(kernel_id, metric, unit, raw) -> (kernel_id, metric, unit, value, text_value), base units.

    Empty cells (metric not collected for that launch) are dropped; "n/a", "no data",
    "nan" (a value ncu could not compute) and strings keep a row with value NULL and the
    text. One rule with ``ncu_rep._value``: a value is a finite number, anything else is text.
    """
    long = long.filter(pl.col("raw").is_not_null() & (pl.col("raw").str.strip_chars() != ""))
    raw = pl.col("raw").str.strip_chars()
    bad = long.filter(~raw.str.contains(NUMBER_RE) & raw.str.contains(NUMBERISH_RE))
    if bad.height:
        b = bad.row(0, named=True)
        raise InputError(
            f"{path}: localized number {b['raw']!r} (metric {b['metric']}, launch ID {b['kernel_id']}); "
            "export again in the C locale: LC_ALL=C ncu -i REPORT --csv --page raw"
        )
    units = long.select("unit").unique(maintain_order=True)
    conv = []
    for u in units["unit"].to_list():
        try:
            conv.append(unit_to_base(u))
        except ValueError:
            b = long.filter(pl.col("unit") == u).row(0, named=True)
            raise InputError(
                f"{path}: unit {u!r} of metric {b['metric']} (launch ID {b['kernel_id']}) is not one ncu writes (times "
                "ns, us, ms, s or nsecond, usecond, msecond, second; byte, hz, bit with the prefixes K, M, G, T, P), "
                "so its values cannot be converted; export the page again with ncu"
            ) from None
    units = units.with_columns(
        pl.Series("base_unit", [c[0] for c in conv], dtype=pl.Utf8),
        pl.Series("factor", [c[1] for c in conv], dtype=pl.Float64),
    )
    long = long.join(units, on="unit", how="left", nulls_equal=True)
    untimed = long.filter(pl.col("metric").str.starts_with(DURATION_PREFIX) & (pl.col("base_unit") != "ns")
                          & raw.str.contains(NUMBER_RE))  # ("n/a": no value, whatever its unit)
    if untimed.height:
        b = untimed.row(0, named=True)
        raise InputError(
            f"{path}: unit {b['unit']!r} of metric {b['metric']} (launch ID {b['kernel_id']}) is not a time (ns, us, "
            "ms, s or nsecond, usecond, msecond, second), so the launches' durations are unknown; export the page "
            "again with ncu"
        )
    number = raw.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)
    is_num = raw.str.contains(NUMBER_RE) & number.is_finite()  # ("1e999" overflows to inf: text too)
    return long.select(
        "kernel_id",
        "metric",
        pl.col("base_unit").alias("unit"),
        pl.when(is_num).then(number * pl.col("factor")).otherwise(None).alias("value"),
        pl.when(is_num).then(None).otherwise(raw).alias("text_value"),
    )


def read_csv_export(path: Path) -> tuple[dict, pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    """Parse a raw or details CSV export -> (meta, kernels, metrics, rule results; None
    from the raw page, which has none)."""
    lines, skip = _text_lines(path)
    if skip >= len(lines):
        raise InputError(
            f"{path}: empty ncu CSV export (no header); export with ncu -i REPORT --csv --page raw"
        )
    header = header_of("\n".join(lines[skip : skip + 1]).encode())
    if header is None:
        raise InputError(
            f"{path}: not an ncu CSV export (first row is not ID, ..., Kernel Name, ...)"
        )
    page = page_of(header)
    if page == "other":
        raise InputError(
            f"{path}: an ncu CSV of a page tracekit does not read; export with --page raw (or --page details)"
        )
    if len(set(header)) != len(header):
        raise InputError(
            f"{path}: duplicate column names in the CSV header; export again with ncu --csv --page raw"
        )
    body = "\n".join(lines[skip:])
    _check_rows(body, header, page, path, skip + 1)
    try:
        df = pl.read_csv(
            io.StringIO(body),
            infer_schema=False,
            has_header=True,
            quote_char='"',
        )
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as err:
        msg = str(err).splitlines()[0]
        raise InputError(f"{path}: malformed CSV ({msg}); export again with ncu --csv") from err
    missing = [c for c in ("ID", "Kernel Name") if c not in df.columns]
    if missing:
        raise InputError(f"{path}: column {missing[0]!r} missing; not an ncu CSV export")
    meta = {"ncu_export": f"csv-{page}"}
    rules = None
    if page == "raw":
        units_row = None
        if df.height and (df["ID"][0] or "").strip() == "":
            units_row = df.row(0, named=True)
            df = df.slice(1)
        if df.height == 0:
            raise InputError(f"{path}: no profiled launches in the export (empty report)")
        if units_row is None:
            raise InputError(f"{path}: no units row under the header (ncu --csv --page raw writes one), so the "
                             "values' units are unknown; export the page again with ncu")
        if "gpu__time_duration.sum" in df.columns and not (units_row.get("gpu__time_duration.sum") or "").strip():
            raise InputError(f"{path}: the units row gives no unit for gpu__time_duration.sum (ncu writes one for "
                             "every metric with a unit), so the values' units are unknown; export the page again "
                             "with ncu")
        nvtx_cols = [
            c for c in df.columns if c.startswith((NVTX_PUSHPOP_PREFIX, NVTX_STARTEND_PREFIX))
        ]
        metric_cols = [c for c in df.columns if c not in IDENTITY and c not in nvtx_cols]
        ids = _launch_ids(df, path)
        if ids.is_duplicated().any():
            raise InputError(
                f"{path}: launch ID {ids.filter(ids.is_duplicated())[0]} is in two rows (one row per launch on "
                "the raw page); the export is corrupt or two exports were joined"
            )
        kernels = _kernel_rows(df, path)
        units = pl.DataFrame(
            {
                "metric": metric_cols,
                "unit": [(units_row or {}).get(c, "") or "" for c in metric_cols],
            },
            schema={"metric": pl.Utf8, "unit": pl.Utf8},
        )
        long = (
            df.select(ids, *metric_cols)
            .unpivot(index="kernel_id", variable_name="metric", value_name="raw")
            .join(units, on="metric", how="left")
        )
    else:
        rules = ncu_rules.from_details(df, _launch_ids(df, path), path)
        df = df.filter(pl.col("Metric Name").str.strip_chars() != "")
        if BODY_ITEM in df.columns:
            # ncu --print-details all (or body): each section's charts and tables follow its header,
            # repeating its metrics (the Speed Of Light chart its throughputs, the occupancy graphs
            # the launch's figures) with the same values: one row each, the page's own order kept;
            # a metric printed twice with two values is still refused below
            df = df.unique(subset=["ID", *DETAILS_COLUMNS], keep="first", maintain_order=True)
        if df.height == 0:
            raise InputError(f"{path}: no metric rows in the details export (empty report)")
        ids = _launch_ids(df, path)
        twice = df.with_columns(ids).filter(pl.struct("kernel_id", "Section Name", "Metric Name").is_duplicated())
        if twice.height:
            t = twice.row(0, named=True)
            raise InputError(
                f"{path}: launch ID {t['kernel_id']} has metric {t['Metric Name']!r} (section "
                f"{t['Section Name']!r}) twice; the export is corrupt or two exports were joined"
            )
        kernels = _kernel_rows(df, path)
        names = df["Metric Name"].to_list()
        sections = df["Section Name"].to_list()
        mapped, labels = [], 0
        for sec, n in zip(sections, names, strict=True):
            if _METRIC_NAME.match(n):
                mapped.append(n)
            else:
                labels += 1
                mapped.append(LABELS.get((sec, n), f"label:{sec}:{n}"))
        meta["metric_names"] = "label" if labels > len(names) / 2 else "name"
        long = pl.DataFrame(
            {
                "kernel_id": ids,
                "metric": mapped,
                "unit": df["Metric Unit"],
                "raw": df["Metric Value"],
            }
        ).unique(subset=["kernel_id", "metric"], keep="first", maintain_order=True)
    metrics = _values(long, path)  # (every unit checked: each converts)
    if page == "raw":
        meta["units"] = "base" if all(unit_to_base(u)[1] == 1.0 for u in units["unit"].to_list()) else "display"
    if page == "details":
        # ncu --metrics alone: no sections, so ncu ran no rules (the page has no rule columns)
        meta["sections"] = df.filter(pl.col("Section Name") != METRICS_SECTION)["Section Name"].n_unique()
        rules = rules if meta["sections"] else None
    return meta, with_workloads(kernels, metrics, page), metrics, rules
