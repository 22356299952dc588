"""Nsight Compute's rule results (its guided analysis): one schema for both sources.

ncu runs its rules over every profiled launch and stores what they find in the report;
the details page prints them after each section's metrics (``ncu --page details --csv``:
Rule Name, Rule Type, Rule Description, Estimated Speedup Type, Estimated Speedup). The
raw page has none. From a report (``ncu_report``) a result's message carries markup
(``@section:MemoryWorkloadAnalysis:Memory Workload Analysis@``,
``@url:Profiling Guide:https://...@``) that the details page prints as text
(``Memory Workload Analysis``, ``Profiling Guide (https://...)``): rendered here the same
way, so both sources give the same rows.
"""

from __future__ import annotations

import math
import re

#: ncu_report's message type -> the details page's Rule Type
MESSAGE_TYPES = {0: None, 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
#: ncu_report's speedup estimation type -> the details page's Estimated Speedup Type
SPEEDUP_TYPES = {1: "local", 2: "global"}

#: columns of ncu_rules (no run_id: the store prepends it), as Polars types by name
SCHEMA = {
    "kernel_id": "Int64",
    "section": "Utf8",
    "rule": "Utf8",
    "rule_type": "Utf8",
    "title": "Utf8",
    "message": "Utf8",
    "speedup_type": "Utf8",
    "speedup_pct": "Float64",
}

_MARKUP = re.compile(r"@([a-z_]+):([^@]*)@")


def _markup(m: re.Match) -> str:
    kind, body = m.group(1), m.group(2)
    if kind == "url":  # @url:Text:https://...@ -> Text (https://...)
        if re.match(r"[a-z]+://", body):  # a bare address
            return body
        text, _, url = body.partition(":")
        return f"{text} ({url})" if url else text
    # @section:Id:Text@ and the others: the text after the identifier
    _, sep, text = body.partition(":")
    return text if sep else body


def render(message: str | None) -> str | None:
    """A rule message's markup as the details page prints it."""
    if message is None:
        return None
    return _MARKUP.sub(_markup, message)


def _finite(v):
    """A speedup ncu could not compute (NaN, an infinity) is no estimate: None, as a
    metric's value (``ncu_rep._value``)."""
    return v if v is None or math.isfinite(v) else None


def from_report(kernel_id: int, results: list[dict]) -> list[dict]:
    """Rows of one launch from ``IAction.rule_results_as_dicts()``; a result with no
    message (a rule that ran and has nothing to say, only a table of source locations)
    is left out, as the details page leaves it out."""
    rows = []
    for d in results:
        msg = d.get("rule_message") or {}
        if not msg.get("message"):
            continue
        speedup = d.get("speedup_estimation") or {}
        rows.append({
            "kernel_id": kernel_id,
            "section": d.get("section_identifier") or None,
            "rule": d.get("rule_identifier") or None,
            "rule_type": MESSAGE_TYPES.get(msg.get("type")),
            "title": msg.get("title") or None,
            "message": render(msg.get("message")) or None,
            "speedup_type": SPEEDUP_TYPES.get(speedup.get("type")),
            "speedup_pct": _finite(speedup.get("speedup")),
        })
    return rows


def frame(rows: list[dict]):
    """The rows as a Polars frame of the ncu_rules columns (empty: no results)."""
    import polars as pl

    return pl.DataFrame(rows, schema={k: getattr(pl, t) for k, t in SCHEMA.items()})


def from_details(df, ids, path):
    """Rows from the rule rows of a details page (``df``: its text columns, ``ids``: the
    launch IDs as Int64), as the page prints them; None where the export has no rule
    columns (a page written before ncu had rules; one without the speedup columns, from
    before ncu estimated speedups, gives rows without them). A speedup that is not a
    number is an InputError naming ``path``."""
    import polars as pl

    from ..errors import InputError

    if any(c not in df.columns for c in ("Rule Name", "Rule Type", "Rule Description")):
        return None
    rules = df.with_columns(ids).filter(pl.col("Rule Name").fill_null("").str.strip_chars() != "")

    def text(c):
        if c not in rules.columns:
            return pl.lit(None, pl.Utf8)
        return pl.col(c).str.strip_chars().replace("", None)

    speedup = text("Estimated Speedup").str.replace_all(",", "", literal=True)
    bad = rules.filter(speedup.is_not_null() & speedup.cast(pl.Float64, strict=False).is_null())
    if bad.height:
        b = bad.row(0, named=True)
        raise InputError(f"{path}: launch ID {b['kernel_id']}, rule {b['Rule Name']}: estimated speedup "
                         f"{b['Estimated Speedup']!r} is not a number; export again in the C locale: "
                         "LC_ALL=C ncu -i REPORT --csv --page details")
    value = speedup.cast(pl.Float64, strict=False)
    # A global estimate is a share of the launch's time, 0 to 100 %; a local one is of the part the
    # rule looks at, as ncu reckons it, and goes past 100 on real pages (CPIStall 103.4: a stall of
    # "about 103.4% of the total average of 33.4 cycles between issuing two instructions").
    glob = text("Estimated Speedup Type") == "global"
    bad = rules.filter(value.is_finite() & ((value < 0) | (glob & (value > 100))))
    if bad.height:
        b = bad.row(0, named=True)
        raise InputError(f"{path}: launch ID {b['kernel_id']}, rule {b['Rule Name']}: estimated speedup "
                         f"{b['Estimated Speedup']!r} is not a percentage from 0 to 100; the export was edited or "
                         "is damaged (export it again from the report)")
    return rules.select(
        "kernel_id",
        text("Section Name").alias("section"),
        text("Rule Name").alias("rule"),
        text("Rule Type").alias("rule_type"),
        pl.lit(None, pl.Utf8).alias("title"),
        text("Rule Description").alias("message"),
        text("Estimated Speedup Type").alias("speedup_type"),
        pl.when(value.is_finite()).then(value).alias("speedup_pct"),  # (nan, inf: no estimate, as for a metric)
    ).cast({k: getattr(pl, t) for k, t in SCHEMA.items()})
