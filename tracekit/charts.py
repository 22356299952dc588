"""Altair charts built from named queries (never from ad-hoc data paths).

``CHARTS`` maps a chart name to the named query it is drawn from, the query parameters
it needs and a builder taking the query's Polars DataFrame; a chart drawn from a
comparison or from several queries (diff, compare, timeline) has a ``data`` function
instead, whose parameters are the chart's (``run``: --run). ``chart(tk, name, run=...)``
runs the query and builds the chart; ``save(chart, path)`` writes .html (interactive,
self-contained), .png / .svg (vl-convert, no browser) or .json (the Vega-Lite spec).

Builders check the columns they need and raise ``QueryError`` naming what is missing;
a roofline whose inputs the report lacks is refused with the query's missing_metrics
rather than drawn wrong.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import re
import shlex
import statistics
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .errors import ParamError, QueryError, TracekitError
from .names import (
    UNNAMED,
    cut_text,
    distinct_labels,
    escape_controls,
    ranks_text,
    short_name,
    text_width,
    unknown_name,
)
from .numbers import INT_RANGE, whole_number


class _OnFirstUse:
    """A module imported when one of its names is first used: listing the charts
    (``tracekit charts``) needs neither Altair nor Polars (0.27 s of imports)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)


alt = _OnFirstUse("altair")
pl = _OnFirstUse("polars")

WIDTH, HEIGHT = 760, 460
PALETTE = "tableau10"

#: past this many rows a chart's data is inline JSON text, which Vega-Lite parses in the
#: page: a list of rows is checked against the Vega-Lite schema row by row when the chart
#: is built and again when it is written (8,192 rows: 3.8 s; as text: 0.1 s)
JSON_TEXT_ROWS = 500


def _data(rows: list[dict]) -> alt.Data:
    """A chart's inline data: the rows, as a list or past ``JSON_TEXT_ROWS`` as JSON text;
    a value that is not a finite number is null (JSON has no NaN: the page's parser
    would refuse the whole chart)."""
    rows = [{k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in r.items()} for r in rows]
    if len(rows) <= JSON_TEXT_ROWS:
        return alt.Data(values=rows)
    return alt.Data(values=json.dumps(rows, separators=(",", ":")), format=alt.DataFormat(type="json"))


@dataclass
class ChartSpec:
    query: str | None
    #: the chart from the query's DataFrame, or from what ``data`` returns
    build: Callable[[Any], alt.TopLevelMixin]
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    #: the data of a chart that is not drawn from one named query: (tk, **params) -> its
    #: data; its parameters are the chart's -p parameters, but ``run``, which takes --run
    data: Callable[..., Any] | None = None
    #: where the data of such a chart comes from and the runs it needs (``tracekit charts``)
    source: str = ""


# -- helpers -------------------------------------------------------------------


def _need(df: pl.DataFrame, chart: str, query: str, cols: list[str]) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise QueryError(
            f"chart {chart}: query {query} returned no column(s) {', '.join(missing)} (got {', '.join(df.columns)})"
        )


def _si(v: float, unit: str) -> str:
    if v is None or not math.isfinite(v) or v <= 0:
        return f"0 {unit}"
    exp = min(max(int(math.floor(math.log10(v) / 3)), -3), 5)
    prefix = {-3: "n", -2: "µ", -1: "m", 0: "", 1: "K", 2: "M", 3: "G", 4: "T", 5: "P"}[exp]
    x = v / 10 ** (3 * exp)
    return f"{x:.3g} {prefix}{unit}"


def _labels(df: pl.DataFrame) -> pl.DataFrame:
    """Add `label` (one per launch: run, id, the kernel's short name and its NVTX range's
    innermost name, which alone would read alike for every kernel of one range) and `group`
    (colour: a sweep's point where the rows have one, else the NVTX range, else the kernel)."""
    by_point = "point" in df.columns
    multi_run = "run_id" in df.columns and df["run_id"].n_unique() > 1 and not by_point
    has_nvtx = "nvtx_range" in df.columns and df["nvtx_range"].is_not_null().any()
    labels, groups = [], []
    for r in df.iter_rows(named=True):
        base = short_name(r.get("name"), 32)
        if has_nvtx and r.get("nvtx_range"):
            base = f"{short_name(r.get('name'), 24)} · {str(r['nvtx_range']).rsplit('/', 1)[-1]}"
        lab = f"{r['point']} · {short_name(r.get('name'), 24)}" if by_point else f"{r['kernel_id']}: {base}"
        if multi_run:
            lab = f"run {r['run_id']} · {lab}"
        labels.append(lab)
        groups.append(
            r.get("point") if by_point
            else r.get("nvtx_range") if has_nvtx
            else r.get("kernel_class") or short_name(r.get("name"), 24)
        )
    return df.with_columns(
        pl.Series("label", labels), pl.Series("group", [g or "(none)" for g in groups])
    )


MAX_BARS = 24


def _fold_repeats(df: pl.DataFrame) -> pl.DataFrame:
    """Past MAX_BARS launches, one bar per (kernel, NVTX range, limiter, what one block more
    needs, the best block size): mean occupancy, labelled with the first launch id and the number
    of launches folded into it."""
    if df.height <= MAX_BARS:
        return df
    keys = [c for c in ("run_id", "name", "nvtx_range", "limiter", "next_needs", "block_size", "best_block_size")
            if c in df.columns]
    nexts = [pl.col(c).mean() for c in ("next_occupancy_pct", "best_block_occupancy_pct") if c in df.columns]
    return (
        df.group_by(keys, maintain_order=True)
        .agg(
            pl.col("kernel_id").min(),
            pl.col("theoretical_occupancy_pct").mean(),
            pl.col("achieved_occupancy_pct").mean(),
            *nexts,
            pl.len().alias("launches"),
        )
        .with_columns(
            pl.when(pl.col("launches") > 1)
            .then(pl.col("kernel_id").cast(pl.Utf8) + pl.lit(" (x") + pl.col("launches").cast(pl.Utf8) + pl.lit(")"))
            .otherwise(pl.col("kernel_id").cast(pl.Utf8))
            .alias("kernel_id")
        )
    )


def _signed(value: float | None, digits: int = 1) -> str | None:
    """``value`` with its sign, to ``digits`` decimals, as the tables write it (``+1.5``, ``-0.3``;
    ``+0.0`` where it rounds to zero): a chart's label or tooltip text, as d3's format, which
    has no ``z``, writes -0.03 as ``−0.0``; None for none."""
    return None if value is None or not math.isfinite(value) else f"{value:+z.{digits}f}"


def _end_labels(chart: alt.Chart, **encoding) -> alt.Chart:
    """Value labels just past the end of horizontal bars (``encoding``: their y, x and text)."""
    return chart.mark_text(align="left", dx=3, fontSize=10, color="#222").encode(**encoding)


def _no_data(title: str, why: list[str] | None = None) -> alt.Chart:
    """A chart with nothing to draw: its title, and ``why`` as its subtitle where said."""
    return (
        alt.Chart(_data([{"t": "no rows for this run"}]))
        .mark_text(size=16)
        .encode(text="t:N")
        .properties(title=alt.Title(title, subtitle=" · ".join(why)) if why else title, width=WIDTH, height=120)
    )


# -- roofline --------------------------------------------------------------------

_PRECISIONS = [  # (achieved column, peak column, label)
    ("fp64_flops_per_s", "peak_fp64_flops_per_s", "FP64"),
    ("fp32_flops_per_s", "peak_fp32_flops_per_s", "FP32"),
    ("fp16_flops_per_s", "peak_fp16_flops_per_s", "FP16"),
    ("tensor_tf32_flops_per_s", "peak_tensor_tf32_flops_per_s", "Tensor TF32"),
    ("tensor_bf16_flops_per_s", "peak_tensor_bf16_flops_per_s", "Tensor BF16"),
    ("tensor_fp16_flops_per_s", "peak_tensor_fp16_flops_per_s", "Tensor FP16"),
    ("tensor_fp8_flops_per_s", "peak_tensor_fp8_flops_per_s", "Tensor FP8"),
    ("tensor_fp64_flops_per_s", "peak_tensor_fp64_flops_per_s", "Tensor FP64"),
]
_MEMORY = [
    ("peak_dram_bytes_per_s", "DRAM"),
    ("peak_l2_bytes_per_s", "L2"),
    ("peak_l1_bytes_per_s", "L1"),
]


class _Roof(NamedTuple):
    """A roofline's frame: the ceilings (lines and their labels, as layers), the log scales
    of both axes, the plot's domain and whether the launches a ceiling was drawn for ran at
    different clocks (it is drawn at the highest)."""

    layers: list
    texts: list[dict]
    xs: Any
    ys: Any
    domain: tuple[float, float, float, float]  # (ai_lo, ai_hi, y_lo, y_hi)
    clocks_differ: bool


def _roof(pts: pl.DataFrame, ai: str = "ai_dram", x_title: str = "Arithmetic intensity at DRAM [FLOP/byte]",
          chart: str = "roofline") -> _Roof:
    """The ceilings and axes of a roofline of ``pts`` (points with their arithmetic intensity
    in column ``ai``, flops_per_s, the peak_* columns of query roofline and, where known, their
    precision). No ceiling of either kind (the report lacks every .peak_sustained counter of
    the plotted launches' precisions, or of their memory) is ``chart``'s one-line error."""
    # Ceilings are per launch (measured clocks differ): a precision's ceiling is drawn at
    # the clocks of the launches whose dominant precision it is (the highest of those),
    # else the highest among all plotted launches; memory ceilings at the highest clocks.
    mem = [(lab, pts[c].max()) for c, lab in _MEMORY if c in pts.columns and pts[c].max()]
    prec_of = {
        lab: key
        for key, lab in [
            ("fp64", "FP64"),
            ("fp32", "FP32"),
            ("fp16", "FP16"),
            ("tensor_tf32", "Tensor TF32"),
            ("tensor_bf16", "Tensor BF16"),
            ("tensor_fp16", "Tensor FP16"),
            ("tensor_fp8", "Tensor FP8"),
            ("tensor_fp64", "Tensor FP64"),
        ]
    }
    comp = []
    clocks_differ = False  # (a ceiling drawn at the highest of its launches' clocks: above the others')
    for a, p, lab in _PRECISIONS:
        if a not in pts.columns or p not in pts.columns or not pts[p].max():
            continue
        if lab != "FP32" and not (pts[a].fill_null(0) > 0).any():
            continue
        own = (
            pts.filter(pl.col("precision") == prec_of[lab])[p]
            if "precision" in pts.columns
            else pts[p].head(0)
        )
        comp.append((lab, own.max() if len(own.drop_nulls()) else pts[p].max()))
        drawn_for = own.drop_nulls() if len(own.drop_nulls()) else pts[p].drop_nulls()
        clocks_differ = clocks_differ or drawn_for.min() < 0.99 * drawn_for.max()
    if not mem or not comp:
        raise QueryError(f"{chart}: nothing to plot; the report has no {'bandwidth' if not mem else 'compute'} ceiling "
                         "for the launches (their .peak_sustained counters); re-profile with --set full")
    ai_lo = min(pts[ai].min(), min(c / b for _, c in comp for _, b in mem)) / 4
    ai_hi = max(pts[ai].max(), max(c / b for _, c in comp for _, b in mem)) * 6
    top = max(c for _, c in comp)
    y_lo = min(pts["flops_per_s"].min(), min(p for _, p in comp)) / 4
    y_hi = top * 3
    # on-screen angle of a slope-1 line in log-log with this domain and plot size
    angle = math.degrees(
        math.atan((HEIGHT / math.log10(y_hi / y_lo)) / (WIDTH / math.log10(ai_hi / ai_lo)))
    )
    lines, texts = [], []
    for lab, bw in mem:
        x_end = top / bw
        x_lab = max(ai_lo * 1.5, y_lo * 1.5 / bw)
        lines.append(
            {
                "ceiling": f"{lab} {_si(bw, 'B/s')}",
                "kind": "memory",
                "x": ai_lo,
                "y": ai_lo * bw,
                "order": 0,
            }
        )
        lines.append(
            {
                "ceiling": f"{lab} {_si(bw, 'B/s')}",
                "kind": "memory",
                "x": x_end,
                "y": top,
                "order": 1,
            }
        )
        texts.append(
            {"text": f"{lab} {_si(bw, 'B/s')}", "x": x_lab, "y": x_lab * bw, "kind": "memory"}
        )
    for lab, peak in comp:
        x_start = peak / max(bw for _, bw in mem)
        lines.append(
            {
                "ceiling": f"{lab} {_si(peak, 'FLOP/s')}",
                "kind": "compute",
                "x": x_start,
                "y": peak,
                "order": 0,
            }
        )
        lines.append(
            {
                "ceiling": f"{lab} {_si(peak, 'FLOP/s')}",
                "kind": "compute",
                "x": ai_hi,
                "y": peak,
                "order": 1,
            }
        )
        texts.append(
            {"text": f"{lab} {_si(peak, 'FLOP/s')}", "x": ai_hi / 1.3, "y": peak, "kind": "compute"}
        )
    xs = alt.Scale(type="log", domain=[ai_lo, ai_hi], nice=False)
    ys = alt.Scale(type="log", domain=[y_lo, y_hi], nice=False)
    x_ax = alt.Axis(title=x_title, format="~g", grid=True)
    y_ax = alt.Axis(title="Performance [FLOP/s]", format="~s", grid=True)
    base_lines = alt.Chart(_data(lines))
    ceil = base_lines.mark_line(strokeWidth=2, clip=True).encode(
        x=alt.X("x:Q", scale=xs, axis=x_ax),
        y=alt.Y("y:Q", scale=ys, axis=y_ax),
        detail="ceiling:N",
        order="order:Q",
        color=alt.value("#555555"),
        strokeDash=alt.StrokeDash(
            "kind:N",
            scale=alt.Scale(domain=["memory", "compute"], range=[[1, 0], [6, 3]]),
            legend=None,
        ),
        tooltip=[alt.Tooltip("ceiling:N", title="ceiling")],
    )
    ceil_text = [
        alt.Chart(_data([t for t in texts if t["kind"] == kind]))
        .mark_text(fontSize=11, color="#333333", dy=-8, align=align, angle=rot)
        .encode(x=alt.X("x:Q", scale=xs), y=alt.Y("y:Q", scale=ys), text="text:N")
        for kind, align, rot in (("memory", "left", 360 - angle), ("compute", "right", 0))
    ]
    return _Roof([ceil, *ceil_text], texts, xs, ys, (ai_lo, ai_hi, y_lo, y_hi), clocks_differ)


#: the most labels a roofline places (points whose markers meet count once: ``_roof_labels``)
ROOF_LABELS = 12


def _roof_labels(data: list[dict], roof: _Roof, avoid: tuple | list = (), ai: str = "ai_dram") -> list:
    """Text layers labelling the points of ``data`` (``ai``, flops_per_s, label, name) where a
    label hits no marker (of ``data`` or of the unlabelled points ``avoid``), no ceiling's
    label and no other label; a point with no free spot is left to its tooltip rather than
    overprinted. Points whose markers meet (a kernel's launches, or one kernel in every layer,
    at one spot) get one label: their kernel's name and how many (``_spot_label``). The spots
    judged changed are labelled first, then those with the most time. None past
    ``ROOF_LABELS`` spots: too many labels hide the points."""
    ai_lo, ai_hi, y_lo, y_hi = roof.domain
    xs, ys, texts = roof.xs, roof.ys, roof.texts
    layers = []

    def px(d):
        fx = math.log(d[ai] / ai_lo) / math.log(ai_hi / ai_lo)
        fy = math.log(d["flops_per_s"] / y_lo) / math.log(y_hi / y_lo)
        return WIDTH * fx, HEIGHT * (1 - fy)

    spots: list[list[dict]] = []  # the points whose markers meet the first one's (7 px: a marker's radius)
    at: list[tuple[float, float]] = []  # (each spot's first point, in pixels)
    for d in sorted(data, key=lambda d: -d["flops_per_s"]):
        x, y = px(d)
        near = next((i for i, (sx, sy) in enumerate(at) if abs(sx - x) < 7 and abs(sy - y) < 7), None)
        if near is None:
            if len(spots) == ROOF_LABELS:  # (one spot more than labels: none, and no more grouping)
                return []
            spots.append([d])
            at.append((x, y))
        else:
            spots[near].append(d)

    def first(spot):  # (labelled first: a spot judged changed, then the one with the most time)
        judged = any(d.get("judged") or d.get("verdict") in ("regressed", "improved") for d in spot)
        return not judged, -sum(d.get("duration_us") or 0 for d in spot)

    spots.sort(key=first)
    # (beside the marker first; then further above or below it, clear of the markers at its
    # height: a hierarchical roofline's three points of a launch sit side by side)
    corners = [(9, -9, "left"), (9, 14, "left"), (-9, -9, "right"), (-9, 14, "right"), (11, 3, "left"),
               (-11, 3, "right"),
               *[(dx, dy, align) for dy in (-12, 21) for dx, align in ((0, "center"), (4, "left"), (-4, "right"))]]
    boxes = [(x - 7, y - 7, x + 7, y + 7) for x, y in map(px, [*data, *avoid])]
    for t in texts:  # the compute-ceiling labels (right-aligned, above their line)
        if t["kind"] == "compute":
            x, y = px({ai: t["x"], "flops_per_s": t["y"]})
            boxes.append((x - 7.0 * len(t["text"]), y - 21, x, y - 3))
    placed: dict[tuple, list] = {c: [] for c in corners}
    for spot in spots:
        d = {**spot[0], "label": _spot_label(spot)}
        x, y = px(d)
        w = 7.0 * len(d["label"])
        for dx, dy, align in corners:
            x0 = x + dx if align == "left" else x + dx - w / 2 if align == "center" else x + dx - w
            box = (x0, y + dy - 10, x0 + w, y + dy + 3)
            clear = all(
                box[2] < b[0] or box[0] > b[2] or box[3] < b[1] or box[1] > b[3] for b in boxes
            )
            if clear and 0 <= box[0] and box[2] <= WIDTH:
                break
        else:  # no free spot: leave it to the tooltip rather than overprint
            continue
        boxes.append(box)
        placed[(dx, dy, align)].append(d)
    for (dx, dy, align), rows in placed.items():
        if rows:
            layers.append(
                alt.Chart(_data(rows))
                .mark_text(align=align, dx=dx, dy=dy, fontSize=11)
                .encode(
                    x=alt.X(f"{ai}:Q", scale=xs),
                    y=alt.Y("flops_per_s:Q", scale=ys),
                    text="label:N",
                )
            )
    return layers


def _spot_label(points: list[dict]) -> str:
    """The label of points whose markers meet: one point's own; several of one kernel, its
    name and how many (``_hstu_cached_sk_kernel ×8``); of several kernels, the first one's
    label and how many more (the tooltip names each)."""
    if len(points) == 1:
        return points[0]["label"]
    names = {d.get("name") for d in points}
    if len(names) == 1 and None not in names:
        return f"{short_name(points[0]['name'], 32)} ×{len(points)}"
    return f"{points[0]['label']} +{len(points) - 1} more"


def _point_lacks(rf: pl.DataFrame) -> str | None:
    """What keeps launches of ``rf`` (roofline rows) off the DRAM roofline for want of metrics,
    said with the advice to re-profile: the metrics missing where a launch has no FLOP rate, or
    FLOP but no DRAM byte rate; the L2 and L1 counters (lts__, l1tex__) left out, as the DRAM
    point needs none. None when every launch without a point has its inputs (no FP work, or no
    DRAM byte moved)."""
    fp = pl.col("flops_per_s")
    lacking = rf.filter(pl.col("missing_metrics").is_not_null()
                        & (fp.is_null() | ((fp > 0) & pl.col("dram_bytes_per_s").is_null())))
    missing = sorted({m for ms in lacking["missing_metrics"] for m in ms.split(", ")
                      if not m.startswith(("lts__", "l1tex__"))})
    return (f"metrics not in the report: {', '.join(missing)} (re-profile with --set full or the "
            "SpeedOfLight_Hierarchical*RooflineChart sections)") if missing else None


def roofline(df: pl.DataFrame) -> alt.LayerChart:
    """Log-log roofline: memory and per-precision compute ceilings, one point per launch at AI(DRAM)."""
    _need(
        df,
        "roofline",
        "roofline",
        ["kernel_id", "name", "flops_per_s", "ai_dram", "peak_dram_bytes_per_s"],
    )
    if df.is_empty():
        return _no_data("Roofline")
    pts = df.filter(
        pl.col("flops_per_s").is_not_null()
        & (pl.col("flops_per_s") > 0)
        & pl.col("ai_dram").is_not_null()
    )
    if pts.is_empty():
        lacks = _point_lacks(df)
        if lacks:
            raise QueryError(f"roofline: nothing to plot; {lacks}")
        flop = df.filter(pl.col("flops_per_s").fill_null(0) > 0).height
        if flop:  # (their data stayed in cache: no arithmetic intensity at DRAM to place them by)
            raise QueryError(f"roofline: nothing to plot; the {flop} launch(es) with floating-point work moved no DRAM "
                             "byte, so they have no arithmetic intensity at DRAM (tracekit query roofline shows "
                             "ai_l2 and ai_l1)")
        # (the counters were collected and are zero: integer or data-movement kernels, no FLOP to place)
        raise QueryError(
            "roofline: nothing to plot; no launch does floating-point work (its FP instruction counters are zero: a "
            "FLOP roofline has no point for integer or data-movement kernels; tracekit query speed-of-light and "
            "memory-workload show how near they run to the memory's peak, tracekit query ncu-summary its dram_roof_pct)"
        )
    pts = _labels(pts)
    roof = _roof(pts)
    xs, ys = roof.xs, roof.ys
    by_point = "point" in pts.columns  # (sweep-roofline: a colour per point, a line per kernel family)
    data = pts.select(
        "label",
        "group",
        *(("family", "sweep_point") if by_point else ()),
        pl.col("name"),
        (pl.col("duration_ns") / 1000).alias("duration_us")
        if "duration_ns" in pts.columns
        else pl.lit(None).alias("duration_us"),
        "ai_dram",
        "flops_per_s",
        (pl.col("roof_pct") if "roof_pct" in pts.columns else pl.lit(None)).alias("roof_pct"),
        (pl.col("bound") if "bound" in pts.columns else pl.lit(None)).alias("bound"),
        (pl.col("precision") if "precision" in pts.columns else pl.lit(None)).alias("precision"),
    ).to_dicts()
    group_title = (
        "sweep point" if by_point
        else "NVTX range" if "nvtx_range" in pts.columns and pts["nvtx_range"].is_not_null().any()
        else "kernel class"
    )
    points = (
        alt.Chart(_data(data))
        .mark_point(filled=True, size=140, opacity=0.9, stroke="black", strokeWidth=0.8)
        .encode(
            x=alt.X("ai_dram:Q", scale=xs),
            y=alt.Y("flops_per_s:Q", scale=ys),
            color=alt.Color("group:N", title=group_title, scale=alt.Scale(scheme=PALETTE)),
            shape=alt.Shape("bound:N", title="bound"),
            tooltip=[
                alt.Tooltip("name:N", title="kernel"),
                alt.Tooltip("label:N", title="launch"),
                alt.Tooltip("duration_us:Q", title="duration [µs]", format=",.1f"),
                alt.Tooltip("ai_dram:Q", title="AI DRAM [FLOP/B]", format=".3~g"),
                alt.Tooltip("flops_per_s:Q", title="FLOP/s", format=".3~s"),
                alt.Tooltip("precision:N", title="precision"),
                alt.Tooltip("roof_pct:Q", title="% of roof", format=".1f"),
                alt.Tooltip("bound:N", title="bound"),
            ],
        )
    )
    layers = [*roof.layers, points]
    if by_point:  # each kernel family's path from point to point, under the markers
        layers.insert(-1, alt.Chart(_data(data)).mark_line(color="#888888", strokeWidth=1, opacity=0.7).encode(
            x=alt.X("ai_dram:Q", scale=xs), y=alt.Y("flops_per_s:Q", scale=ys), detail="family:N",
            order="sweep_point:Q"))
    layers += _roof_labels(data, roof)  # (where a label hits no marker and no other label)
    return alt.layer(*layers).properties(
        width=WIDTH,
        height=HEIGHT,
        title=alt.Title(
            "Roofline per sweep point" if by_point else "Roofline",
            subtitle=("a colour per point, a line per kernel family from point to point; " if by_point else "")
            + "one point per launch at its DRAM arithmetic intensity; ceilings at the measured clocks of the "
            "launches using them" + ("; where those differ, at the highest: a launch at a lower clock sits further below "
                                     "the line than its % of roof (tooltip), which is against its own clock's ceiling"
                                     if roof.clocks_differ else ""),
        ),
    )


#: the memory levels of a hierarchical roofline, innermost first: (the query's level, its colour, its marker)
_LEVELS = (("L1", "#4c78a8", "circle"), ("L2", "#f58518", "square"), ("DRAM", "#54a24b", "triangle-up"))


def hierarchical_roofline(df: pl.DataFrame) -> alt.LayerChart:
    """Log-log hierarchical roofline (ncu's Hierarchical*RooflineChart): each launch at its
    arithmetic intensity at L1, L2 and DRAM, its three points joined, under the three bandwidth
    ceilings and its precision's compute ceiling; the point of the level that bounds it filled."""
    _need(df, "hierarchical-roofline", "hierarchical-roofline",
          ["kernel_id", "name", "precision", "flops_per_s", "peak_flops_per_s", "ai_l1", "ai_l2", "ai_dram",
           "l1_roof_pct", "l2_roof_pct", "dram_roof_pct", "limiter", "roof_pct"])
    if df.is_empty():
        return _no_data("Hierarchical roofline")
    fp = df.filter(pl.col("flops_per_s").fill_null(0) > 0)
    if fp.is_empty():
        if df["flops_per_s"].is_null().all():
            missing = sorted({m for ms in df["missing_metrics"].drop_nulls() for m in ms.split(", ")}
                             if "missing_metrics" in df.columns else set())
            raise QueryError("hierarchical-roofline: nothing to plot; no launch has its precision's FLOP rate"
                             + (f" (metrics not in the report: {', '.join(missing)})" if missing else "")
                             + "; re-profile with --set full or the SpeedOfLight_Hierarchical*RooflineChart sections, "
                             "or draw one precision whose counters it has (-p precision=NAME)")
        raise QueryError("hierarchical-roofline: nothing to plot; no launch does floating-point work (tracekit query "
                         "speed-of-light and memory-workload show how near the memory's peak they run)")
    fp = _labels(fp)
    keep = [c for c in ("label", "group", "name", "precision", "flops_per_s", "limiter", "roof_pct", "duration_ns",
                        "peak_flops_per_s", "peak_l1_bytes_per_s", "peak_l2_bytes_per_s", "peak_dram_bytes_per_s")
            if c in fp.columns]
    pts = pl.concat([  # (one row per launch and level)
        fp.select(*keep, pl.col(f"ai_{lv}").alias("ai"), pl.lit(level).alias("level"),
                  pl.col(f"{lv}_roof_pct").alias("level_roof_pct"))
        for level, lv in (("L1", "l1"), ("L2", "l2"), ("DRAM", "dram"))
    ]).filter(pl.col("ai").is_not_null() & (pl.col("ai") > 0))
    if pts.is_empty():
        raise QueryError("hierarchical-roofline: nothing to plot; no launch moved a byte the report counts at L1, L2 "
                         "or DRAM (tracekit query hierarchical-roofline --columns missing_metrics)")
    # (the ceilings _roof draws: each precision's where it is a launch's, each level's bandwidth)
    ceil = pts.with_columns(
        *[pl.when(pl.col("precision") == a.removesuffix("_flops_per_s")).then(pl.col("flops_per_s")).otherwise(0)
          .alias(a) for a, _, _ in _PRECISIONS],
        *[pl.when(pl.col("precision") == a.removesuffix("_flops_per_s")).then(pl.col("peak_flops_per_s"))
          .alias(peak) for a, peak, _ in _PRECISIONS],
    )
    roof = _roof(ceil, ai="ai", x_title="Arithmetic intensity at L1, L2 and DRAM [FLOP/byte]",
                 chart="hierarchical-roofline")
    xs, ys = roof.xs, roof.ys
    data = pts.select(
        "label", "group", "name", "level", "ai", "flops_per_s", "precision", "limiter", "roof_pct", "level_roof_pct",
        (pl.col("duration_ns") / 1000 if "duration_ns" in pts.columns else pl.lit(None)).alias("duration_us"),
        (pl.col("level") == pl.col("limiter")).fill_null(False).alias("limits"),
    ).to_dicts()
    enc = {
        "x": alt.X("ai:Q", scale=xs), "y": alt.Y("flops_per_s:Q", scale=ys),
        "color": alt.Color("level:N", title="memory level", scale=alt.Scale(
            domain=[lv for lv, _, _ in _LEVELS], range=[c for _, c, _ in _LEVELS])),
        "shape": alt.Shape("level:N", title="memory level", scale=alt.Scale(
            domain=[lv for lv, _, _ in _LEVELS], range=[s for _, _, s in _LEVELS])),
        "tooltip": [
            alt.Tooltip("name:N", title="kernel"), alt.Tooltip("label:N", title="launch"),
            alt.Tooltip("duration_us:Q", title="duration [µs]", format=",.1f"),
            alt.Tooltip("level:N", title="level"), alt.Tooltip("ai:Q", title="AI [FLOP/B]", format=".3~g"),
            alt.Tooltip("flops_per_s:Q", title="FLOP/s", format=".3~s"), alt.Tooltip("precision:N"),
            alt.Tooltip("level_roof_pct:Q", title="% of this level's roof", format=".1f"),
            alt.Tooltip("limiter:N", title="limiter"), alt.Tooltip("roof_pct:Q", title="% of the lowest roof",
                                                                   format=".1f"),
        ],
    }
    joins = alt.Chart().mark_line(color="#999999", strokeWidth=1, opacity=0.6).encode(
        x=enc["x"], y=enc["y"], detail="label:N", order="ai:Q")
    bound = alt.Chart().transform_filter("datum.limits").mark_point(
        filled=True, size=150, opacity=0.95, stroke="black", strokeWidth=0.8).encode(**enc)
    other = alt.Chart().transform_filter("!datum.limits").mark_point(filled=False, size=110, strokeWidth=1.8).encode(
        **enc)
    # a launch's label at the point of its limiting level (its DRAM point where compute bounds it)
    by_launch: dict[str, dict] = {}
    for d in data:
        if d["limits"] or (d["label"] not in by_launch and d["level"] == "DRAM"):
            by_launch[d["label"]] = d
    for d in data:
        by_launch.setdefault(d["label"], d)
    labelled = list(by_launch.values())
    layers = [*roof.layers, alt.layer(joins, other, bound, data=_data(data)),  # (the points' rows once)
              *_roof_labels(labelled, roof, avoid=[d for d in data if d not in labelled], ai="ai")]
    precisions = sorted({d["precision"] for d in data})
    named = {a.removesuffix("_flops_per_s"): lab for a, _, lab in _PRECISIONS}
    return alt.layer(*layers).properties(
        width=WIDTH,
        height=HEIGHT,
        title=alt.Title(
            "Hierarchical roofline" + (f", {named.get(precisions[0], precisions[0])}" if len(precisions) == 1 else ""),
            subtitle="each launch's FLOP/s in " + ("its precision" if len(precisions) > 1 else "that precision")
            + " at its arithmetic intensity at L1, L2 and DRAM, its three points joined; filled: the level whose roof "
            "is lowest there, which bounds it (none filled: compute does"
            + (", or the report lacks a level's counters: tooltip" if any(d["limiter"] is None for d in data) else "")
            + "); ceilings at the measured clocks of the launches using them"
            + ("; where those differ, at the highest" if roof.clocks_differ else ""),
        ),
    )


def sweep_roofline_data(tk, run: str | int | None = None, sweep: str | None = None,
                        kernel: str | None = None) -> pl.DataFrame:
    """The roofline of every launch at each point of a sweep captured under ncu (the points'
    ncu runs, as sweep-ncu picks them: ``sweep``, or the sweep ``run`` is a point of, default
    the latest), with its point, its place in the grid and its kernel family."""
    if run is not None and sweep is not None:
        raise ParamError("chart sweep-roofline: give the sweep as -p sweep= or --run (a run of it), not both")
    points = tk.query("sweep-ncu", sweep=sweep if sweep is not None else run, kernel=kernel)
    kernels = points.select("run_id", "name", "family", "sweep_point", "point").unique(["run_id", "name"])
    frames = [tk.query("roofline", run=run_id, kernel=kernel) for run_id in points["run_id"].unique(maintain_order=True)]
    return pl.concat(frames, how="diagonal_relaxed").join(kernels, on=["run_id", "name"], how="left",
                                                          maintain_order="left")


# -- occupancy -------------------------------------------------------------------


#: the occupancy chart's step between a kernel's two bars, px
OCCUPANCY_STEP = 34


def occupancy(df: pl.DataFrame) -> alt.LayerChart:
    """Theoretical vs achieved occupancy per launch, with the binding block limit and, as a tick
    on the theoretical bar, the occupancy one block more per SM would give (its tooltip: what it
    needs), and as a diamond the occupancy at the best block size where that alone raises it."""
    _need(
        df,
        "occupancy",
        "occupancy",
        ["kernel_id", "name", "theoretical_occupancy_pct", "achieved_occupancy_pct"],
    )
    if df.is_empty():
        return _no_data("Occupancy")
    df = _labels(_fold_repeats(df))
    lim = df["limiter"] if "limiter" in df.columns else pl.Series([None] * df.height)
    rows = []
    for r, limiter in zip(df.iter_rows(named=True), lim, strict=True):
        for what, col in (
            ("theoretical", "theoretical_occupancy_pct"),
            ("achieved", "achieved_occupancy_pct"),
        ):
            rows.append(
                {
                    "label": r["label"],
                    "name": r["name"],
                    "measure": what,
                    "pct": r[col],
                    "limiter": limiter or "n/a",
                }
            )
    order = df["label"].to_list()
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=420))
    bars = (
        alt.Chart(_data(rows))
        .mark_bar(height=12)
        .encode(
            y=y,
            yOffset=alt.YOffset("measure:N", sort=["theoretical", "achieved"]),
            x=alt.X(
                "pct:Q",
                title="Occupancy [% of max warps per SM]",
                scale=alt.Scale(domain=[0, 118]),
                axis=alt.Axis(values=[0, 20, 40, 60, 80, 100]),
            ),
            color=alt.Color(
                "measure:N",
                title=None,
                sort=["theoretical", "achieved"],
                scale=alt.Scale(range=["#9ecae1", "#08519c"]),
            ),
            tooltip=[
                alt.Tooltip("name:N", title="kernel"),
                "measure:N",
                alt.Tooltip("pct:Q", title="occupancy [%]", format=".1f"),
                "limiter:N",
            ],
        )
    )
    values = bars.mark_text(align="left", dx=3, fontSize=10).encode(
        text=alt.Text("pct:Q", format=".1f"), color=alt.value("#222")
    )
    lim_rows = [  # (none at 100 % theoretical occupancy: no limit holds it back, none is written)
        {"label": r["label"], "text": f"limit: {r['limiter']}", "x": 101}
        for r in rows
        if r["measure"] == "theoretical" and r["limiter"] != "none"
    ]
    # the limit, between the kernel's two bars: at its first bar's offset (a layer without the
    # bars' yOffset sizes the y scale another way, which Vega warns of), half a bar's step down
    lim_text = (
        alt.Chart(_data(lim_rows))
        .mark_text(align="left", fontSize=11, color="#a50f15", fontWeight="bold", dx=12, dy=OCCUPANCY_STEP / 2)
        .encode(y=y, yOffset=alt.YOffset(datum="theoretical"), x=alt.X("x:Q"), text="text:N")
    )
    layers = [bars, values, lim_text]
    ahead, better = [], []
    if "next_occupancy_pct" in df.columns:
        ahead = [{"label": r["label"], "name": r["name"], "next_pct": r["next_occupancy_pct"],
                  "needs": r.get("next_needs")}
                 for r in df.iter_rows(named=True) if r["next_occupancy_pct"] is not None]
        if ahead:  # (at its first bar's offset, as the limit text)
            layers.append(
                alt.Chart(_data(ahead))
                .mark_tick(color="#a50f15", thickness=2, size=OCCUPANCY_STEP / 2)
                .encode(y=y, yOffset=alt.YOffset(datum="theoretical"), x=alt.X("next_pct:Q"),
                        tooltip=[alt.Tooltip("name:N", title="kernel"),
                                 alt.Tooltip("next_pct:Q", title="one block more per SM [%]", format=".1f"),
                                 alt.Tooltip("needs:N", title="it needs")])
            )
    if "best_block_size" in df.columns and "block_size" in df.columns:
        # (the query moves off the launch's own block size only for more warps: where it stays, no
        # diamond, even where the largest carveout would hold more than the launch's own does)
        better = [{"label": r["label"], "name": r["name"], "best_pct": r.get("best_block_occupancy_pct"),
                   "best_size": r["best_block_size"]}
                  for r in df.iter_rows(named=True)
                  if r["best_block_size"] is not None and r.get("best_block_occupancy_pct") is not None
                  and r["best_block_size"] != r["block_size"]]
        if better:
            layers.append(
                alt.Chart(_data(better))
                .mark_point(shape="diamond", filled=True, color="#e6550d", size=70)
                .encode(y=y, yOffset=alt.YOffset(datum="theoretical"), x=alt.X("best_pct:Q"),
                        tooltip=[alt.Tooltip("name:N", title="kernel"),
                                 alt.Tooltip("best_size:Q", title="best block size [threads]"),
                                 alt.Tooltip("best_pct:Q", title="occupancy there [%]", format=".1f")])
            )
    subtitle = "theoretical vs achieved; red: the block limit that binds" + (
        ", and a tick where one block more per SM would be (hover: what it needs)" if ahead else "") + (
        "; a diamond where another block size alone would put it (registers and shared memory per block held)"
        if better else "")
    return alt.layer(*layers).properties(
        width=WIDTH - 200,
        height=alt.Step(OCCUPANCY_STEP),
        title=alt.Title("Occupancy", subtitle=subtitle),
    )


#: stall reasons drawn apiece in the warp-stalls chart; the others are summed as "other"
STALL_REASONS = 9


def warp_stalls(df: pl.DataFrame) -> alt.LayerChart:
    """Cycles per issued instruction per launch, stacked by stall reason (warp-stalls):
    the reasons with the most cycles over all launches apiece, the rest as "other"."""
    _need(df, "warp-stalls", "warp-stalls", ["kernel_id", "name", "reason", "cycles_per_issue"])
    d = df.filter(pl.col("cycles_per_issue").is_not_null())
    if d.is_empty():
        return _no_data("Warp stalls")
    keys = [c for c in ("run_id", "kernel_id") if c in d.columns]
    top = (d.group_by("reason").agg(pl.col("cycles_per_issue").sum())
           .sort(["cycles_per_issue", "reason"], descending=[True, False])["reason"].head(STALL_REASONS).to_list())
    d = d.with_columns(pl.when(pl.col("reason").is_in(top)).then(pl.col("reason")).otherwise(pl.lit("other"))
                       .alias("reason"))
    extra = ["nvtx_range"] if "nvtx_range" in d.columns else []
    d = d.group_by(*keys, "name", *extra, "reason", maintain_order=True).agg(pl.col("cycles_per_issue").sum())
    launches = d.select(*keys, "name", *extra).unique(keys, maintain_order=True)
    if launches.height > MAX_BARS:  # one bar per (run, kernel, NVTX range): its mean launch
        group = [c for c in ("run_id", "name", "nvtx_range") if c in d.columns]
        launches = (launches.group_by(group, maintain_order=True)
                    .agg(pl.col("kernel_id").min(), pl.len().alias("launches")).sort("kernel_id")
                    .with_columns(pl.when(pl.col("launches") > 1)  # labelled "first id (x launches)"
                                  .then(pl.format("{} (x{})", pl.col("kernel_id"), pl.col("launches")))
                                  .otherwise(pl.col("kernel_id").cast(pl.Utf8)).alias("shown_id")))
        d = (d.group_by(*group, "reason", maintain_order=True).agg(pl.col("cycles_per_issue").sum())
             .join(launches, on=group)  # a launch without a reason counts 0 in the mean
             .with_columns(pl.col("cycles_per_issue") / pl.col("launches")))
    labelled = _labels(launches.with_columns(pl.col("shown_id").alias("kernel_id")) if "shown_id" in launches.columns
                       else launches)
    launches = launches.with_columns(labelled["label"])
    d = d.join(launches.select(*keys, "label"), on=keys)
    totals = d.group_by("label", maintain_order=True).agg(pl.col("cycles_per_issue").sum().alias("total"))
    d = d.join(totals, on="label").with_columns((100 * pl.col("cycles_per_issue") / pl.col("total")).alias("pct"))
    order = launches["label"].to_list()
    reasons = [*top, "other"]
    bars = (
        alt.Chart(_data(d.to_dicts()))
        .mark_bar(height=16)
        .encode(
            y=alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=420)),
            x=alt.X("cycles_per_issue:Q", stack="zero", title="Warp cycles per issued instruction"),
            color=alt.Color("reason:N", sort=reasons, title="stall reason", scale=alt.Scale(scheme="tableau10")),
            order=alt.Order("pct:Q", sort="descending"),
            tooltip=[alt.Tooltip("name:N", title="kernel"), "reason:N",
                     alt.Tooltip("cycles_per_issue:Q", title="cycles per issued instruction", format=".2f"),
                     alt.Tooltip("pct:Q", title="share [%]", format=".1f")],
        )
    )
    text = _end_labels(alt.Chart(_data(totals.to_dicts())), y=alt.Y("label:N", sort=order), x="total:Q",
                       text=alt.Text("total:Q", format=".1f"))
    return alt.layer(bars, text).properties(
        width=WIDTH - 250,
        height=alt.Step(24),
        title=alt.Title("Warp stalls", subtitle="where a warp's cycles between two issued instructions go, "
                        "by stall reason (ncu Warp State Statistics)"),
    )


def source_hot_spots(df: pl.DataFrame) -> alt.LayerChart:
    """Warp stall samples per source line (ncu-source), the lines with the most samples,
    coloured by their largest stall reason; library code without line information is one
    bar per kernel."""
    _need(df, "ncu-source", "ncu-source", ["name", "location", "samples", "top_stall"])
    d = df.filter(pl.col("samples") > 0).head(MAX_BARS)
    if d.is_empty():
        return _no_data("Source hot spots")
    multi = d["name"].n_unique() > 1
    multi_run = "run_id" in d.columns and d["run_id"].n_unique() > 1
    labels = []
    for r in d.iter_rows(named=True):
        where = r["location"] or "no line information"
        if r.get("pc_offset") is not None:
            where += f" +{r['pc_offset']:#x}"
        text = (r.get("sass") or r.get("source") or "").strip()
        label = f"{where}  {text[:48]}" if text else where
        label = f"{short_name(r['name'], 28)}: {label}" if multi else label
        labels.append(f"run {r['run_id']} · {label}" if multi_run else label)
    d = d.with_columns(pl.Series("label", labels), pl.col("top_stall").fill_null("(none)"))
    order = d["label"].to_list()
    tips = [alt.Tooltip("name:N", title="kernel"), alt.Tooltip("label:N", title="where"),
            alt.Tooltip("samples:Q", format=","), alt.Tooltip("samples_pct:Q", title="of the kernel's [%]", format=".1f")]
    tips += [alt.Tooltip(f"{c}:{t}", format=f) if f else alt.Tooltip(f"{c}:{t}")
             for c, t, f in (("top_stalls", "N", None), ("inst_executed", "Q", ","),
                             ("l2_excess_sectors", "Q", ","), ("shared_excess_wavefronts", "Q", ","))
             if c in d.columns]
    bars = (
        alt.Chart(_data(d.to_dicts()))
        .mark_bar(height=16)
        .encode(
            y=alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=420)),
            x=alt.X("samples:Q", title="warp stall samples"),
            color=alt.Color("top_stall:N", title="largest stall reason", scale=alt.Scale(scheme=PALETTE)),
            tooltip=tips,
        )
    )
    text = _end_labels(alt.Chart(_data(d.to_dicts())), y=alt.Y("label:N", sort=order), x="samples:Q",
                       text=alt.Text("samples_pct:Q", format=".1f"))
    return alt.layer(bars, text).properties(
        width=WIDTH - 350,
        height=alt.Step(24),
        title=alt.Title("Source hot spots", subtitle="warp stall samples per source line (ncu Source Counters); "
                        "label: % of the kernel's samples"),
    )


# -- nsys charts ---------------------------------------------------------------------


def top_kernels(df: pl.DataFrame) -> alt.LayerChart:
    """Horizontal bars of kernel time from the top-kernels query."""
    _need(df, "top-kernels", "top-kernels", ["name", "total_ns"])
    if df.is_empty():
        return _no_data("Top kernels")
    d = df.with_columns(
        pl.Series("short", distinct_labels(df["name"].to_list(), 60, short_name), dtype=pl.Utf8),
        (pl.col("total_ns") / 1e6).alias("total_ms"),
    )
    if "time_pct" not in d.columns:
        d = d.with_columns((100 * pl.col("total_ns") / pl.col("total_ns").sum()).alias("time_pct"))
    if "instances" not in d.columns:
        d = d.with_columns(pl.lit(None).alias("instances"))
    d = d.with_row_index("rank").with_columns(
        pl.format("{}. {}", pl.col("rank") + 1, pl.col("short")).alias("short")
    )
    data = d.select("short", "name", "total_ms", "time_pct", "instances").to_dicts()
    return _time_bars(data, "short", "#4c78a8", "Total GPU time [ms]", "Top kernels", [
        alt.Tooltip("name:N", title="kernel"),
        alt.Tooltip("total_ms:Q", title="total [ms]", format=",.3f"),
        alt.Tooltip("time_pct:Q", title="time [%]", format=".1f"),
        alt.Tooltip("instances:Q", title="launches"),
    ])


#: kernel-headroom's parts of a kernel's time, in the stack's order, with their colours
_HEADROOM_PARTS = {"its busiest unit at peak": "#9ecae9", "headroom: latency": "#e45756",
                   "headroom: memory": "#f58518", "headroom: compute": "#4c78a8", "not profiled by ncu": "#bab0ac"}


def kernel_headroom(df: pl.DataFrame) -> alt.LayerChart:
    """Horizontal stacked bars from the kernel-headroom query, in its order (most headroom
    first): each kernel's time in the nsys run, split into what its busiest unit would take at
    its peak (sol_pct of it) and the rest, its headroom, coloured by what ncu says holds it
    back (latency, memory, compute); a kernel ncu did not profile is one grey bar. Label: the
    headroom as % of the run's kernel time."""
    _need(df, "kernel-headroom", "kernel-headroom", ["name", "total_ns", "headroom_ns", "headroom_pct",
                                                      "bottleneck", "sol_pct", "profiled"])
    if df.is_empty():
        return _no_data("Kernel headroom")
    labels = distinct_labels(df["name"].to_list(), 60, short_name)
    order = [f"{i + 1}. {s}" for i, s in enumerate(labels)]
    data = []
    for label, r in zip(order, df.to_dicts(), strict=True):
        common = {"label": label, "name": r["name"], "total_ms": r["total_ns"] / 1e6, "sol_pct": r["sol_pct"],
                  "headroom_pct": r["headroom_pct"], "bottleneck": r["bottleneck"], "profiled": r["profiled"]}
        if r["headroom_ns"] is None:
            data.append({**common, "part": "not profiled by ncu", "ms": r["total_ns"] / 1e6, "i": 2})
            continue
        data.append({**common, "part": "its busiest unit at peak", "ms": (r["total_ns"] - r["headroom_ns"]) / 1e6,
                     "i": 0})
        data.append({**common, "part": f"headroom: {r['bottleneck']}", "ms": r["headroom_ns"] / 1e6, "i": 1})
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=420))
    bars = alt.Chart(_data(data)).mark_bar().encode(
        y=y,
        x=alt.X("sum(ms):Q", title="GPU time in the nsys run [ms]"),
        color=alt.Color("part:N", title=None, scale=alt.Scale(domain=list(_HEADROOM_PARTS),
                                                              range=list(_HEADROOM_PARTS.values()))),
        order=alt.Order("i:Q"),
        tooltip=[alt.Tooltip("name:N", title="kernel"), alt.Tooltip("part:N"),
                 alt.Tooltip("ms:Q", title="part [ms]", format=",.3f"),
                 alt.Tooltip("total_ms:Q", title="total [ms]", format=",.3f"),
                 alt.Tooltip("sol_pct:Q", title="speed of light [%]", format=".1f"),
                 alt.Tooltip("headroom_pct:Q", title="headroom [% of kernel time]", format=".1f"),
                 alt.Tooltip("profiled:Q", title="ncu launches")],
    )
    totals = [{"label": r["label"], "total_ms": r["total_ms"], "headroom_pct": r["headroom_pct"]}
              for r in data if r["i"] != 0]
    text = alt.Chart(_data(totals)).mark_text(align="left", dx=4, fontSize=11).encode(
        y=y, x="total_ms:Q", text=alt.Text("headroom_pct:Q", format=".1f"))
    return alt.layer(bars, text).properties(
        width=WIDTH - 250, height=alt.Step(20),
        title=alt.Title("Kernel headroom", subtitle=[
            "each kernel's time in the nsys run: what its busiest unit needs at peak (ncu's speed of light) "
            "and the rest, which tuning can save at most", "label: headroom, % of the run's kernel time"]))


def _time_bars(data: list[dict], label: str, colour: str, x_title: str, title: str,
               tooltip: list, subtitle: str = "bar label: % of kernel time") -> alt.LayerChart:
    """Horizontal bars of ``total_ms`` per ``label``, in the rows' order, each labelled
    with its ``time_pct``."""
    bars = (
        alt.Chart(_data(data))
        .mark_bar(color=colour)
        .encode(
            y=alt.Y(f"{label}:N", sort=None, title=None, axis=alt.Axis(labelLimit=420)),
            x=alt.X("total_ms:Q", title=x_title),
            tooltip=tooltip,
        )
    )
    text = _end_labels(bars, text=alt.Text("time_pct:Q", format=".1f"))
    return alt.layer(bars, text).properties(
        width=WIDTH - 250,
        height=alt.Step(20),
        title=alt.Title(title, subtitle=subtitle),
    )


def api_summary(df: pl.DataFrame) -> alt.LayerChart:
    """Horizontal bars of host time in each CUDA API function, from the api-summary query:
    where the CPU threads spent their time calling CUDA (launches, copies, synchronizations)."""
    _need(df, "api-summary", "api-summary", ["name", "calls", "total_ns", "time_pct"])
    if df.is_empty():
        return _no_data("CUDA API calls")
    d = df.with_columns((pl.col("total_ns") / 1e6).alias("total_ms"))
    extra = [c for c in ("med_ns", "max_ns") if c in d.columns]
    data = d.select("name", "calls", "total_ms", "time_pct", *extra).to_dicts()
    return _time_bars(data, "name", "#f28e2b", "Total host time [ms]", "CUDA API calls", [
        alt.Tooltip("name:N", title="function"),
        alt.Tooltip("calls:Q", title="calls", format=","),
        alt.Tooltip("total_ms:Q", title="total [ms]", format=",.3f"),
        alt.Tooltip("time_pct:Q", title="time [%]", format=".1f"),
        *(alt.Tooltip(f"{c}:Q", title=f"{c[:3]} [ns]", format=",.0f") for c in extra),
    ], subtitle="bar label: % of CUDA API time (summed over threads)")


def cpu_hotspots(df: pl.DataFrame) -> alt.LayerChart:
    """Horizontal bars of the CPU time in each function from the cpu-hotspots query: its own
    (dark, labelled with its % of the samples) over the time in it and what it called (light):
    where the host's threads spend their CPU time, sampled."""
    _need(df, "cpu-hotspots", "cpu-hotspots", ["function", "module", "self_ns", "self_pct", "total_ns", "total_pct"])
    if df.is_empty():
        return _no_data("CPU time by function")
    d = df.with_columns((pl.col("self_ns") / 1e6).alias("self_ms"), (pl.col("total_ns") / 1e6).alias("total_ms"),
                        pl.Series("short", distinct_labels(df["function"].to_list(), 60, short_name), dtype=pl.Utf8))
    data = d.select("short", "function", "module", "self_ms", "self_pct", "total_ms", "total_pct").to_dicts()
    y = alt.Y("short:N", sort=None, title=None, axis=alt.Axis(labelLimit=420))
    tooltip = [alt.Tooltip("function:N"), alt.Tooltip("module:N"),
               alt.Tooltip("self_ms:Q", title="self [ms]", format=",.1f"),
               alt.Tooltip("self_pct:Q", title="self [%]", format=".1f"),
               alt.Tooltip("total_ms:Q", title="with callees [ms]", format=",.1f"),
               alt.Tooltip("total_pct:Q", title="with callees [%]", format=".1f")]
    base = alt.Chart(_data(data)).encode(y=y, tooltip=tooltip)
    total = base.mark_bar(color="#c6dbef").encode(x=alt.X("total_ms:Q", title="CPU time [ms] (sampled)"))
    own = base.mark_bar(color="#2171b5").encode(x="self_ms:Q")
    text = _end_labels(base, x="self_ms:Q", text=alt.Text("self_pct:Q", format=".1f"))
    return alt.layer(total, own, text).properties(
        width=WIDTH - 250, height=alt.Step(20),
        title=alt.Title("CPU time by function", subtitle="dark: in the function itself (label: % of the samples); "
                                                         "light: with the functions it called"))


#: the most points a series of the gpu-memory chart draws: past it, each slice of the time keeps
#: the most bytes live in it (the peaks stay where they were)
MEMORY_POINTS = 2000


def gpu_memory(df: pl.DataFrame) -> alt.LayerChart:
    """Step lines of the GPU memory live over time, from the gpu-memory-timeline query: one per
    kind of memory (and per device and process, where a run has several), each peak marked."""
    _need(df, "gpu-memory", "gpu-memory-timeline", ["ts_ns", "live_bytes", "operation", "bytes", "memory_kind",
                                                    "device_id", "pid", "api_name", "nvtx_path"])
    if df.is_empty():
        return _no_data("GPU memory over time")
    several = df.select(pl.struct("pid", "device_id").n_unique()).item() > 1
    series = (pl.format("{} (GPU {}, pid {})", "memory_kind", "device_id", "pid") if several
              else pl.col("memory_kind").cast(pl.Utf8))
    t0 = df["ts_ns"].min()
    d = df.with_columns(series.alias("series"), ((pl.col("ts_ns") - t0) / 1e6).alias("t_ms"),
                        (pl.col("live_bytes") / 1e6).alias("live_mb"), (pl.col("bytes") / 1e6).alias("mb"),
                        pl.col("nvtx_path").fill_null("(none)"), pl.col("api_name").fill_null("(none)"))
    span = max(float(d["t_ms"].max()), 1e-9)
    d = d.with_columns(pl.len().over("series").alias("n"), (pl.col("t_ms") / span * MEMORY_POINTS).floor().alias("slice"))
    # a long series: per slice of time, its event with the most bytes live, and its last (the level it leaves)
    keep = (pl.col("n") <= MEMORY_POINTS) | (pl.col("live_mb") == pl.col("live_mb").max().over("series", "slice")) \
        | (pl.int_range(pl.len()).over("series", "slice") == pl.len().over("series", "slice") - 1)
    cols = ["series", "t_ms", "live_mb", "operation", "mb", "api_name", "nvtx_path"]
    drawn = d.filter(keep).select(cols)
    peaks = d.sort("t_ms").group_by("series", maintain_order=True).agg(pl.all().sort_by("live_mb").last()) \
        .select(cols).with_columns(pl.format("peak {} MB", pl.col("live_mb").round(1)).alias("label"))
    colour = alt.Color("series:N", title="memory", scale=alt.Scale(scheme="tableau10"))
    tooltip = [alt.Tooltip("series:N", title="memory"), alt.Tooltip("t_ms:Q", title="time [ms]", format=",.3f"),
               alt.Tooltip("live_mb:Q", title="live [MB]", format=",.1f"), alt.Tooltip("operation:N"),
               alt.Tooltip("mb:Q", title="size [MB]", format=",.2f"), alt.Tooltip("api_name:N", title="call"),
               alt.Tooltip("nvtx_path:N", title="NVTX path")]
    line = alt.Chart(_data(drawn.to_dicts())).mark_line(interpolate="step-after").encode(
        x=alt.X("t_ms:Q", title="Time since the first memory event [ms]"),
        y=alt.Y("live_mb:Q", title="Live [MB]"), color=colour, tooltip=tooltip)
    marks = alt.Chart(_data(peaks.to_dicts())).encode(x="t_ms:Q", y="live_mb:Q", color=colour, tooltip=tooltip)
    return alt.layer(line, marks.mark_point(filled=True, size=60),
                     marks.mark_text(align="left", dx=6, dy=-8).encode(text="label:N")).properties(
        width=WIDTH, height=HEIGHT - 140,
        title=alt.Title("GPU memory over time", subtitle="allocated and not yet freed, by kind of memory "
                                                         "(nsys --cuda-memory-usage); dot: the peak"))


#: the flame graph's narrowest frame drawn, a share of the unwound samples (a narrower one's
#: samples stay in its caller's width), and the most frames drawn (the widest first)
FLAME_MIN_SHARE = 0.002
FLAME_MAX_FRAMES = 3000
#: modules coloured apiece (the others: "other")
FLAME_MODULES = 10


def cpu_flame(df: pl.DataFrame) -> alt.LayerChart:
    """An icicle graph (a flame graph, callers on top) of the sampled CPU call stacks, from the
    cpu-stacks query with every stack (``flame``)."""
    _need(df, "cpu-flame", "cpu-stacks", ["samples", "stack", "modules"])
    return flame(df, "CPU call stacks", "unwound samples", "module")


def python_flame(df: pl.DataFrame) -> alt.LayerChart:
    """An icicle graph of the sampled Python stacks, from the python-stacks query with every
    stack (``flame``): each frame a function at a line, coloured by its file."""
    _need(df, "python-flame", "python-stacks", ["samples", "stack", "modules"])
    return flame(df, "Python call stacks", "samples", "file")


def flame(df: pl.DataFrame, what: str, samples: str, part: str) -> alt.LayerChart:
    """An icicle graph (a flame graph, callers on top) of folded stacks (columns samples,
    stack, modules): each function under its caller, as wide as its share of the ``samples``,
    siblings widest first, coloured by module (``part`` names it); frames narrower than ``FLAME_MIN_SHARE``
    left out."""
    if df.is_empty():
        return _no_data(what)
    root: dict[str, list] = {}  # function -> [samples, module, its callees]
    total = 0
    for stack, modules, n in zip(df["stack"], df["modules"], df["samples"], strict=True):
        total += n
        level = root
        for fn, module in zip(stack.split(";"), (modules or "").split(";") + [""] * stack.count(";"), strict=False):
            node = level.setdefault(fn, [0, module, {}])
            node[0] += n
            level = node[2]
    rows: list[dict] = []
    stack_: list[tuple[dict, int, int]] = [(root, 0, 0)]  # (callees, their x, their depth)
    while stack_:
        level, x, depth = stack_.pop()
        for fn, (n, module, callees) in sorted(level.items(), key=lambda kv: (-kv[1][0], kv[0])):
            if n < FLAME_MIN_SHARE * total:
                break
            chars = int(n / total * (WIDTH - 20) / 6.5)
            name = short_name(fn, 80)
            label = "" if chars < 4 else name if len(name) <= chars else name[:chars - 1] + "…"
            rows.append({"function": fn, "module": module, "depth": depth, "x0": x, "x1": x + n, "samples": n,
                         "pct": round(100 * n / total, 1), "label": label})
            stack_.append((callees, x, depth + 1))
            x += n
    rows = sorted(rows, key=lambda r: -r["samples"])[:FLAME_MAX_FRAMES]
    by_module: dict[str, int] = {}
    for r in rows:
        by_module[r["module"]] = by_module.get(r["module"], 0) + r["samples"]  # (the area it covers)
    shown = sorted(by_module, key=lambda m: -by_module[m])[:FLAME_MODULES]
    for r in rows:
        r["colour"] = r["module"] if r["module"] in shown else "other"
    depth = max(r["depth"] for r in rows) + 1
    base = alt.Chart(_data(rows)).encode(
        x=alt.X("x0:Q", scale=alt.Scale(domain=[0, total], nice=False), axis=None),
        y=alt.Y("depth:Q", scale=alt.Scale(domain=[0, depth], reverse=True, nice=False), axis=None))
    boxes = base.mark_rect(stroke="white", strokeWidth=0.5).encode(
        x2="x1:Q", y2="depth1:Q",
        color=alt.Color("colour:N", title=part, scale=alt.Scale(scheme="tableau20"),
                        legend=alt.Legend(orient="bottom", columns=3, labelLimit=220)),
        tooltip=[alt.Tooltip("function:N"), alt.Tooltip("module:N", title=part),
                 alt.Tooltip("samples:Q", format=","), alt.Tooltip("pct:Q", title=f"% of the {samples}")],
    ).transform_calculate(depth1="datum.depth + 1")
    text = base.mark_text(align="left", baseline="middle", dx=3, dy=9, fontSize=10, color="#111").encode(
        text="label:N")
    return alt.layer(boxes, text).properties(
        width=WIDTH, height=18 * depth,
        title=alt.Title(f"{what} (sampled)", subtitle=f"{total:,} {samples}; callers on top, each "
                        f"function as wide as its share; hover a frame for its name and {part}"))


def kernel_durations(df: pl.DataFrame) -> alt.LayerChart:
    """Each kernel's launch durations from the top-kernels query, on a log axis: a line from
    the shortest to the longest launch, a bar from the median to the 95th percentile, a tick
    at the 99th: the kernels whose launches vary (another size, a cold cache, a clock that
    moved) beside those that repeat."""
    _need(df, "kernel-durations", "top-kernels", ["name", "instances", "med_ns", "min_ns", "max_ns", "p95_ns",
                                                  "p99_ns"])
    if df.is_empty():
        return _no_data("Kernel durations")
    us = [(pl.col(c) / 1e3).alias(c.replace("_ns", "_us")) for c in ("med_ns", "min_ns", "max_ns", "p95_ns", "p99_ns")]
    d = df.with_columns(pl.Series("short", distinct_labels(df["name"].to_list(), 60, short_name), dtype=pl.Utf8),
                        *us).with_row_index("rank")
    d = d.with_columns(pl.format("{}. {}", pl.col("rank") + 1, pl.col("short")).alias("short"))
    data = d.select("short", "name", "instances", "med_us", "min_us", "max_us", "p95_us", "p99_us").to_dicts()
    x = alt.Scale(type="log")
    y = alt.Y("short:N", sort=None, title=None, axis=alt.Axis(labelLimit=420))
    tooltip = [alt.Tooltip("name:N", title="kernel"), alt.Tooltip("instances:Q", title="launches", format=","),
               *(alt.Tooltip(f"{c}_us:Q", title=f"{c} [us]", format=",.2f") for c in ("min", "med", "p95", "p99",
                                                                                     "max"))]
    base = alt.Chart(_data(data)).encode(y=y, tooltip=tooltip)
    span = base.mark_rule(color="#9aa5b1").encode(
        x=alt.X("min_us:Q", scale=x, title="Launch duration [us] (log)"), x2="max_us:Q")
    body = base.mark_bar(color="#4c78a8", height=10).encode(x=alt.X("med_us:Q", scale=x), x2="p95_us:Q")
    p99 = base.mark_tick(color="#e15759", thickness=2, size=14).encode(x=alt.X("p99_us:Q", scale=x))
    med = base.mark_tick(color="#222", thickness=2, size=14).encode(x=alt.X("med_us:Q", scale=x))
    return alt.layer(span, body, p99, med).properties(
        width=WIDTH - 250, height=alt.Step(20),
        title=alt.Title("Kernel durations", subtitle="line: shortest to longest launch; bar: median to p95; "
                                                      "black tick: median; red tick: p99"))


def _nvtx_lanes(df: pl.DataFrame) -> pl.DataFrame:
    """NVTX ranges (nvtx-ranges rows) with their ``lane``, one per thread and nesting depth
    (``tid T · depth D``), sorted by thread and depth; a start/end range has no depth (it
    need not nest): a lane of its own per thread."""
    return df.with_columns(
        pl.when(pl.col("depth").is_null())
        .then(pl.format("tid {} · start/end", pl.col("tid").cast(pl.Utf8).fill_null("?")))
        .otherwise(pl.format("tid {} · depth {}", pl.col("tid").cast(pl.Utf8).fill_null("?"), pl.col("depth")))
        .alias("lane"),
    ).sort("tid", "depth")


def nvtx_timeline(df: pl.DataFrame) -> alt.Chart:
    """Gantt of NVTX ranges per thread and nesting depth (nvtx-ranges query)."""
    _need(df, "nvtx-timeline", "nvtx-ranges", ["range", "start_ns", "end_ns", "depth", "tid"])
    if df.is_empty():
        return _no_data("NVTX timeline")
    t0 = df["start_ns"].min()
    keep = _nvtx_coloured(df)  # (as the timeline colours them)
    d = _nvtx_lanes(df.with_columns(
        ((pl.col("start_ns") - t0) / 1e6).alias("start_ms"),
        ((pl.col("end_ns") - t0) / 1e6).alias("end_ms"),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1e6).alias("dur_ms"),
        pl.when(pl.col("range").is_in(keep))
        .then(pl.col("range"))
        .otherwise(pl.lit("(other)"))
        .alias("colour"),
    ))
    data = d.select("range", "colour", "lane", "start_ms", "end_ms", "dur_ms").to_dicts()
    return (
        alt.Chart(_data(data))
        .mark_bar(height=14)
        .encode(
            x=alt.X("start_ms:Q", title="Time since first range [ms]"),
            x2="end_ms:Q",
            y=alt.Y("lane:N", title=None, sort=d["lane"].unique(maintain_order=True).to_list()),
            color=alt.Color("colour:N", title="NVTX range", scale=_nvtx_scale(keep, d["colour"])),
            tooltip=[
                "range:N",
                alt.Tooltip("start_ms:Q", format=",.3f"),
                alt.Tooltip("dur_ms:Q", title="duration [ms]", format=",.3f"),
            ],
        )
        .properties(width=WIDTH, height=alt.Step(22), title="NVTX timeline")
    )


# -- timeline ------------------------------------------------------------------------

#: the most bars (NVTX ranges and GPU ops) the timeline draws; past it the chart asks for a
#: window. The page of 5,000 (the HSTU capture's first 5,000 events) is drawn in headless
#: Chromium in 1.1 s, one of 8 bars in 0.5 s (a loaded 2-core box); tests/test_timeline.py
#: draws one at the bound in Chromium
TIMELINE_BARS = 5000
#: Python functions and kernel names coloured apiece on the timeline (those with the most time
#: in the window; the NVTX ranges: ``_nvtx_coloured``); the others are "(other Python)" and
#: "(other kernels)"
TIMELINE_COLOURS = 12
TIMELINE_WIDTH = 1000

# NVTX ranges, one apiece for the first 18 ``_nvtx_coloured`` picks: ColorBrewer's Paired (its six
# light hues, then their six dark ones), then six of other hues, so that ranges coloured one after
# another (a request's layers) differ in hue before they differ in shade. (The pastels of Paired
# and Set3 mixed read alike: #fdbf6f and #fdb462, #b2df8a and #b3de69.) Every two are at least 20
# apart in CIELAB (ΔE*ab), and from the grey of "(other)": a test checks both
_NVTX_COLOURS = ["#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f", "#cab2d6", "#ffff99",
                 "#1f78b4", "#33a02c", "#e31a1c", "#ff7f00", "#6a3d9a", "#b15928",
                 "#c51b7d", "#01665e", "#bcbd22", "#de77ae", "#17becf", "#8c564b"]
# kernels: tableau20 without its reds and greys, which mark copies and memsets
_KERNEL_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#b79a20", "#439894", "#393b79", "#b279a2", "#9e765f",
                   "#9ecae9", "#ffbf79", "#88d27a", "#83bcb6"]
_COPY_COLOURS = ["#e45756", "#ff9d98", "#a11d21", "#f7b6b2", "#7b1113"]
_MEMSET_COLOURS = ["#555555", "#8c8c8c", "#333333"]
# Python functions: Set2 then Dark2, apart from the NVTX ranges' pastels and the kernels' tableau
_PYTHON_COLOURS = ["#66c2a5", "#fc8d62", "#8da0cb", "#e78ac3", "#a6d854", "#ffd92f", "#e5c494", "#1b9e77",
                   "#d95f02", "#7570b3", "#e7298a", "#66a61e"]
_GRAPH_COLOURS = ["#6a3d9a", "#9467bd", "#c5b0d5", "#3f007d"]
#: Unified Memory page faults: the GPU's by access type (olives), the CPU's (cyan); in no other palette
_FAULT_COLOURS = {"Read": "#637939", "Write": "#8ca252", "Atomic": "#b5cf6b", "Prefetch": "#cedb9c",
                  "Unknown": "#7f7f7f", "CPU": "#17becf"}
_OTHER_COLOUR = "#c9c3bf"

#: an event in a window [$lo, $hi] (NULL: unbounded) as gpu-trace and nvtx-ranges take it
_IN_WINDOW = "($lo IS NULL OR end_ns > $lo) AND ($hi IS NULL OR start_ns < $hi)"
#: the NVTX ranges and GPU ops (gpu-trace's kernels, copies and memsets, and CUDA graph
#: launches traced whole) in the window, and the span of the run's events
_TIMELINE_EVENTS = f"""
SELECT (SELECT count(*) FROM nvtx_ranges WHERE $nvtx AND run_id = $run AND {_IN_WINDOW}),
       (SELECT count(*) FROM gpu_ops WHERE $gpu AND run_id = $run AND {_IN_WINDOW}),
       (SELECT min(lo) FROM (SELECT min(start_ns) AS lo FROM nvtx_ranges WHERE $nvtx AND run_id = $run UNION ALL
                             SELECT min(start_ns) FROM gpu_ops WHERE $gpu AND run_id = $run)),
       (SELECT max(hi) FROM (SELECT max(end_ns) AS hi FROM nvtx_ranges WHERE $nvtx AND run_id = $run UNION ALL
                             SELECT max(end_ns) FROM gpu_ops WHERE $gpu AND run_id = $run))
"""

#: Unified Memory page faults in the window: the GPU's fault groups (the handler's servicing of
#: a page's faults) and the CPU's faults (instants), a run that traced none: no rows
_TIMELINE_FAULTS = f"""
SELECT 'GPU' AS side, device_id, pid, start_ns, end_ns, faults, coalesce(access_type, 'Unknown') AS access_type,
       hex_address(address) AS address, NULL::VARCHAR AS instruction
FROM um_gpu_faults WHERE run_id = $run AND {_IN_WINDOW}
UNION ALL
SELECT 'CPU', NULL, pid, ts_ns, ts_ns, 1, NULL, hex_address(address), instruction
FROM um_cpu_faults WHERE run_id = $run AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)
ORDER BY side DESC, device_id, pid, start_ns
"""
_TIMELINE_FAULT_COUNT = f"""
SELECT (SELECT count(*) FROM um_gpu_faults WHERE run_id = $run AND {_IN_WINDOW})
     + (SELECT count(*) FROM um_cpu_faults WHERE run_id = $run AND ($lo IS NULL OR ts_ns >= $lo)
        AND ($hi IS NULL OR ts_ns <= $hi))
"""

#: CUDA graph launches traced whole (nsys --cuda-graph-trace=graph) in the window, with
#: gpu-trace's columns: nsys's GPU trace leaves them out (their kernels are not traced
#: apiece), but the GPU ran the graph's work then, so the timeline draws them
_TIMELINE_GRAPHS = f"""
SELECT g.start_ns, g.dur_ns, g.correlation_id, g.device_id, g.stream_id, g.name, 'graph' AS op_kind,
       ((g.global_pid >> 24) & 16777215)::INTEGER AS pid, g.end_ns, r.path AS nvtx_path, g.graph_id, g.graph_exec_id
FROM (SELECT *, graph_op_name(graph_id) AS name FROM graph_execs WHERE run_id = $run AND {_IN_WINDOW}) g
LEFT JOIN nvtx_ranges r ON r.run_id = $run AND r.range_id = g.nvtx_range_id
ORDER BY g.start_ns, g.correlation_id
"""

#: NVTX domains of libraries rather than of the program: NCCL's own ranges (its collectives
#: and communicators), XLA's (TSL: its modules and thunks, under JAX) and the CUDA libraries'
#: API calls nsys records as ranges (cuBLAS, cuDNN); compared without case
LIBRARY_DOMAINS = ("NCCL", "TSL", "cuBLAS", "cuDNN")
#: the nesting depths ``typical_instance`` looks for a repeated range at: 0 (the outermost) to 3
TYPICAL_DEPTHS = 4

#: per nesting depth below $depths (0: the outermost, with the start/end ranges that have no
#: depth), the most repeated range (domain, text) of those in no domain of $skip, ties broken
#: by the most time; and how many such ranges lie at that depth
_MOST_REPEATED = """
SELECT level, domain, text, n, ranges FROM (
    SELECT level, domain, text, count(*) AS n, sum(count(*)) OVER (PARTITION BY level) AS ranges,
           row_number() OVER (PARTITION BY level ORDER BY count(*) DESC, sum(dur_ns) DESC, domain, text) AS rank
    FROM (SELECT coalesce(depth, 0) AS level, coalesce(domain, '') AS domain, text, dur_ns FROM nvtx_ranges
          WHERE run_id = $run AND coalesce(text, '') <> '' AND NOT list_contains($skip, coalesce(domain, ''))
            AND coalesce(depth, 0) < $depths)
    GROUP BY level, domain, text)
WHERE rank = 1 ORDER BY level
"""
#: of the outermost ranges in no domain of $skip, the one whose duration is the median (the
#: lower middle of an even count; ranges of equal duration in start order)
_MEDIAN_OUTERMOST = """
SELECT coalesce(domain, '') AS domain, text, range_id FROM nvtx_ranges
WHERE run_id = $run AND coalesce(text, '') <> '' AND NOT list_contains($skip, coalesce(domain, ''))
  AND coalesce(depth, 0) = 0
ORDER BY dur_ns, start_ns, range_id LIMIT 1 OFFSET ($ranges - 1) // 2
"""


@dataclass
class Instance:
    """The run's typical request (``typical_instance``): ``--nvtx name --instance
    instance`` of the ``instances`` ranges so named, its duration, and how it was chosen:
    the median duration of the ``among`` ranges of that name at nesting ``depth``, the
    most repeated name there (``repeated``), or of the run's ``among`` outermost ranges,
    where no name repeats (``repeated`` False); ``left_aside``: the library domains
    (``LIBRARY_DOMAINS``) of the run whose ranges were not considered."""

    name: str
    instance: int
    instances: int
    dur_ns: int
    depth: int = 0
    among: int = 1
    repeated: bool = True
    left_aside: tuple[str, ...] = ()

    def median_of(self) -> str:
        """What its duration is the median of, in words ('its median instance of 30')."""
        if not self.repeated:
            return f"the median of the run's {self.among:,} outermost NVTX ranges"
        if self.depth == 0 and self.among == self.instances:
            return f"its median instance of {self.instances:,}"
        if self.depth == 0:
            return f"the median of its {self.among:,} outermost instances"
        return f"the median of its {self.among:,} instances at nesting depth {self.depth}"


def _nvtx_name(tk, run_id: int, domain: str, text: str) -> str:
    """The name ``--nvtx`` takes for the ranges of ``domain`` and ``text``, and only them:
    the text in the default domain (what the program wrote), 'domain:text' in a named one;
    ':text' where a range of a named domain has the same text (the text alone takes both)."""
    if domain:
        return f"{domain}:{text}"
    shared = tk.con.execute("SELECT 1 FROM nvtx_ranges WHERE run_id = ? AND text = ? AND coalesce(domain, '') <> '' "
                            "LIMIT 1", [run_id, text]).fetchall()
    return f":{text}" if shared else text


def typical_instance(tk, run_id: int) -> Instance | None:
    """The run's typical request: an instance of its most repeated NVTX range whose
    duration is the median, so not the warm-up's first. The rule:

    - the ranges considered are the program's own: those of the default domain (its
      ``torch.cuda.nvtx.range_push``) and of any domain not in ``LIBRARY_DOMAINS`` (NCCL's
      collectives and the like, which the program's steps wrap); a run whose every range
      is a library's is taken as it is;
    - of the outermost ranges (depth 0, with the start/end ranges, which have no depth) the
      name with the most instances, ties broken by the most time;
    - where that name occurs once (a single wrapper such as ``profile``, or ``iter 0`` ...
      ``iter 7`` each named once) the same one nesting level down, at depth 1 (the
      outermost ranges' children), then 2 and 3, to the first depth whose most repeated
      name occurs at least twice; of that name's instances at that depth, the one whose
      duration is the median (the lower middle of an even count: a duration one of them
      has; equal durations in start order);
    - where no name occurs twice at depths 0 to 3, the outermost range whose duration is
      the median of theirs (not the longest, a warm-up's).

    The name is the one ``--nvtx`` takes (the text; ``domain:text`` in a named domain) and
    the instance its number among every range of that name, at any depth, as ``--nvtx NAME
    --instance N`` numbers them (tracekit.trace.nvtx_instances). None where the run has no
    NVTX range with a text."""
    domains = [d for (d,) in tk.con.execute(
        "SELECT DISTINCT coalesce(domain, '') FROM nvtx_ranges WHERE run_id = ? AND coalesce(text, '') <> ''",
        [run_id]).fetchall()]
    libraries = {d.lower() for d in LIBRARY_DOMAINS}
    skip = sorted(d for d in domains if d.lower() in libraries)
    if len(skip) == len(domains):  # (only a library's ranges, or none: take them as they are)
        skip = []
    # (where the program's own ranges all lie inside a library's and none repeats: every range)
    return _typical(tk, run_id, skip) or (_typical(tk, run_id, []) if skip else None)


def _typical(tk, run_id: int, skip: list[str]) -> Instance | None:
    """``typical_instance`` of the ranges in no domain of ``skip``; None where none of them
    repeats at depths 0 to 3 and none is outermost."""
    from .trace import nvtx_instances

    levels = tk.con.execute(_MOST_REPEATED, {"run": run_id, "skip": skip, "depths": TYPICAL_DEPTHS}).fetchall()
    chosen = next((row for row in levels if row[3] >= 2), None)
    if chosen is None:
        outermost = levels[0][4] if levels and levels[0][0] == 0 else 0
        if outermost == 0:
            return None
        domain, text, range_id = tk.con.execute(
            _MEDIAN_OUTERMOST, {"run": run_id, "skip": skip, "ranges": outermost}).fetchall()[0]
        name = _nvtx_name(tk, run_id, domain, text)
        total, rows = nvtx_instances(tk, run_id, name)
        pick = next(r for r in rows if r.range_id == range_id)
        return Instance(name, pick.instance, total, pick.end_ns - pick.start_ns, 0, outermost, False, tuple(skip))
    depth, domain, text, _, _ = chosen
    name = _nvtx_name(tk, run_id, domain, text)
    total, rows = nvtx_instances(tk, run_id, name, depth=depth)
    order = sorted(range(len(rows)), key=lambda i: (rows[i].end_ns - rows[i].start_ns, i))
    pick = rows[order[(len(rows) - 1) // 2]]
    return Instance(name, pick.instance, total, pick.end_ns - pick.start_ns, depth, len(rows), True, tuple(skip))


#: the GPU ops the timeline of a run with too many events and no NVTX range to choose by
#: shows (report) or proposes (chart timeline): so many in the middle of the run, where a
#: program's steady state is (its first ops are the warm-up's)
MIDDLE_OPS = 1000

#: the ``$ops`` GPU ops (gpu_ops: kernels, copies, memsets, CUDA graph launches) in the
#: middle of the run's in start order: their span, how many, and the run's count
_MIDDLE_OPS = """
WITH o AS (SELECT start_ns, end_ns, row_number() OVER (ORDER BY start_ns, end_ns) AS i, count(*) OVER () AS n
           FROM gpu_ops WHERE run_id = $run)
SELECT min(start_ns), max(end_ns), count(*), any_value(n)
FROM o WHERE i > (n - least(n, $ops)) // 2 AND i <= (n - least(n, $ops)) // 2 + least(n, $ops)
"""


class Stretch(NamedTuple):
    """``ops`` GPU ops in the middle of the run's ``total``, from ``start_ns`` to ``end_ns``
    (``middle_stretch``)."""

    start_ns: int
    end_ns: int
    ops: int
    total: int

    def said(self) -> str:
        """What it is, in words ('the middle 1,000 of the run's 8,196 GPU ops')."""
        return f"the middle {self.ops:,} of the run's {self.total:,} GPU ops"

    def params(self) -> str:
        """The chart timeline options that draw it."""
        return f"-p from_ns={self.start_ns} -p to_ns={self.end_ns}"


def middle_stretch(tk, run_id: int) -> Stretch | None:
    """The window a run too large to draw whole is shown in where no NVTX range picks one
    (``typical_instance``): the ``MIDDLE_OPS`` GPU ops in the middle of the run, in start
    order; None where it has no GPU op. The ops of other streams overlapping them are drawn
    too."""
    lo, hi, n, total = tk.con.execute(_MIDDLE_OPS, {"run": run_id, "ops": MIDDLE_OPS}).fetchall()[0]
    return None if not n else Stretch(lo, hi, n, total)


@dataclass
class Timeline:
    """What the timeline draws (``timeline_data``): the run, the window (a
    tracekit.trace.Window), the rows of nvtx-ranges and of gpu-trace in it (empty where
    the capture did not trace them) and the kinds of event it did not trace."""

    run_id: int
    run_name: str
    window: Any
    nvtx: pl.DataFrame
    gpu: pl.DataFrame
    untraced: tuple[str, ...] = ()
    #: the ranks of the run's job drawn (``ranks=``; the rows' ``rank``), and what some did not trace
    ranks: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    #: whether the run's export said what its capture traced (tracekit.registry.traced_said)
    said: bool = True
    #: Unified Memory page faults in the window (``_TIMELINE_FAULTS``; empty: none, or none traced)
    faults: pl.DataFrame = field(default_factory=lambda: pl.DataFrame())  # (polars imported when one is made)
    #: the Python samples in the window as slices per thread and level below the frames every
    #: sample of the thread shares (``_python_rows``; empty: none, or none sampled)
    python: pl.DataFrame = field(default_factory=lambda: pl.DataFrame())
    #: what names each part's lanes, by the rows' ``rank`` (default ``rank N``: a job's ranks;
    #: ``base``/``new``: two runs compared, ``diff_timeline_data``)
    labels: dict[int, str] = field(default_factory=dict)
    #: the title, where it is not the run's (two runs compared), and each part's own end of the
    #: window by its ``rank`` where the parts' windows differ (two requests of other lengths)
    title: str | None = None
    ends: dict[int, int] = field(default_factory=dict)

    def label(self, rank: int) -> str:
        return self.labels.get(rank, f"rank {rank}")


def _int_param(name: str, value: Any, what: str, chart: str = "timeline") -> int | None:
    """A -p value of chart ``chart`` that is an integer: an int, or text from the command line
    (tracekit.numbers: 12,100,481 as tables print it works)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return whole_number(str(value))
    except ValueError as err:
        raise ParamError(f"chart {chart}: {name}={value!r}: {what} expected") from err


#: how chart timeline spells the window's options in tracekit.trace.resolve_window's errors
_TIMELINE_OPTIONS = {"command": "chart timeline", "window": "-p from_ns=/-p to_ns=", "start": "from_ns={}",
                     "end": "to_ns={}", "nvtx": "-p nvtx=NAME", "instance_n": "-p instance=N",
                     "instance": "instance={}", "instance_alone": "-p instance=N"}


def timeline_data(tk, run: str | int | None = None, nvtx: str | None = None, instance: int | str | None = None,
                  from_ns: int | str | None = None, to_ns: int | str | None = None,
                  ranks: str | None = None) -> Timeline:
    """The timeline's data: the nvtx-ranges and gpu-trace rows of the run (an nsys run;
    default: the latest) in a window chosen as ``tracekit export trace`` chooses it
    (tracekit.trace.resolve_window): ``nvtx=NAME`` and ``instance=N`` (the N-th range of
    that name, 1 = the first, from its start to the end of the GPU work it launched), or
    ``from_ns``/``to_ns`` on the capture's clock, or the whole run. ``ranks`` (``all``, or
    ``0-3,7``): the ranks of the run's job over the same span of time, each rank's rows with
    ``rank`` and its times on the run's clock (tracekit.trace.job_parts: by each export's
    session start). More than ``TIMELINE_BARS`` events in the window is a QueryError that says
    how to choose one."""
    from .registry import (
        no_cuda_event,
        no_cuda_words,
        resolve_run,
        retell,
        traced_said,
        untraced_words,
    )
    from .trace import Options, Part, job_parts, job_span_outside, ranks_that_fit, resolve_window

    run_id = resolve_run(tk, run, "nsys", "chart timeline", spans_runs=False)
    number = _int_param("instance", instance, "an instance number (1 = the first)")
    lo = _int_param("from_ns", from_ns, "a time in ns on the capture's clock")
    hi = _int_param("to_ns", to_ns, "a time in ns on the capture's clock")
    run_name = tk.con.execute("SELECT name FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0]
    if nvtx is None and number is None and lo is not None and hi is not None and lo >= hi:
        raise ParamError(f"chart timeline: from_ns={lo} is not before to_ns={hi}: the window is empty; "
                         "give from_ns < to_ns")
    window = resolve_window(tk, run_id, lo, hi, nvtx, number, Options(**_TIMELINE_OPTIONS))
    if nvtx is not None and window.end_ns <= window.start_ns:
        raise QueryError(f"chart timeline: {window.label} of run {run_id} ({run_name}) lasts 0 ns and launched no GPU "
                         "work: nothing to draw; choose another instance")
    if ranks is None:
        parts = [Part(run_id, window)]
    else:
        parts = job_parts(tk, run_id, window, ranks, onto_run=True, said=("chart timeline", "-p ranks="))
    got = [_timeline_rows(tk, part, run_name if part.run_id == run_id else None) for part in parts]
    events = sum(g.events for g in got)
    if events > TIMELINE_BARS:
        if ranks is None:
            raise QueryError(_too_many(tk, run_id, run_name, window, got[0].ranges, got[0].ops, got[0].first,
                                       got[0].last))
        fit = ranks_that_fit(parts, [g.events for g in got], TIMELINE_BARS)
        raise QueryError(f"chart timeline: {window.label} of the {len(parts):,} ranks of run {run_id}'s job holds "
                         f"{events:,} events, more than the {TIMELINE_BARS:,} a timeline draws; choose "
                         + (f"fewer ranks (-p ranks={fit}) or " if fit else "")
                         + "a shorter window (-p nvtx=NAME -p instance=N); `tracekit export trace --ranks` writes "
                         "any window for ui.perfetto.dev")
    if ranks is None:
        one = got[0]
        if events == 0 and nvtx is None:
            _outside(run_id, run_name, window, lo, hi, one.first, one.last)
        said = traced_said(tk, run_id) if one.missing else True
        return Timeline(run_id, run_name, window, one.nvtx, one.gpu, one.missing, said=said, notes=one.notes,
                        faults=one.faults, python=one.python)
    missing = tuple(k for k in ("NVTX", "CUDA") if all(k in g.missing for g in got))
    if len(missing) == 2:
        asked = ranks_text([x.rank for x in parts])
        told = traced_said(tk, *(x.run_id for x in parts))
        lacks = ("traced NVTX or CUDA" if told else "has NVTX or CUDA events, and their exports (nsys before 2023.3) "
                 "do not say whether they were traced")
        raise QueryError(f"chart timeline: no rank of run {run_id}'s job asked for ({asked}) {lacks}: nothing to "
                         f"draw; capture with nsys -t nvtx,cuda{retell(told, many=True)}")
    if events == 0 and nvtx is None:  # (a window outside every rank's events, as outside the run's alone)
        span = job_span_outside(parts, window, [(g.first, g.last) for g in got], inclusive=False)
        if span is not None:
            raise QueryError(f"chart timeline: the window {window.label} is outside the events of "
                             f"{ranks_text([x.rank for x in parts])} of run {run_id}'s job ({run_name}), which span "
                             f"{span[0]} to {span[1]} ns on its clock (`tracekit query nvtx-ranges` prints times on "
                             "this clock)")
    pairs = list(zip(parts, got, strict=True))
    notes = tuple(f"rank {part.rank} {untraced_words(k, traced_said(tk, part.run_id))}" for part, g in pairs
                  for k in g.missing if k not in missing)
    notes += tuple(f"rank {part.rank}: nothing in this span (its capture began {part.shift_ns / 1e9:+z,.3f} s from "
                   "this run's)" for part, g in pairs if g.events == 0 and len(g.missing) < 2)
    notes += tuple(f"rank {part.rank}: {note}" for part, g in pairs for note in g.notes)
    if none := [part.rank for part, g in pairs if "CUDA" not in g.missing and not g.ops and no_cuda_event(tk, part.run_id)]:
        notes += (f"{ranks_text(none)} {no_cuda_words(many=len(none) > 1)}",)

    return Timeline(run_id, run_name, window, _joined(pairs, "nvtx"), _joined(pairs, "gpu"), missing,
                    tuple(x.rank for x in parts), notes, faults=_joined(pairs, "faults"), python=_joined(pairs, "python"))


def _joined(pairs: list, kind: str) -> pl.DataFrame:
    """The ``kind`` rows (nvtx, gpu, faults, python) of a timeline's parts, each with its part's
    ``rank``: ``pairs`` of (tracekit.trace.Part, its ``_Rows``)."""
    frames = [getattr(g, kind).with_columns(pl.lit(part.rank).alias("rank")) for part, g in pairs
              if not getattr(g, kind).is_empty()]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


class _Rows(NamedTuple):
    """A timeline part's rows (``_timeline_rows``): its nvtx-ranges and gpu-trace rows (the
    graph launches among them), how many events its window holds (ranges, GPU ops), the
    first and last event's time of the run, and the kinds of event it did not trace."""

    nvtx: pl.DataFrame
    gpu: pl.DataFrame
    events: int
    ranges: int
    ops: int
    first: int | None
    last: int | None
    missing: tuple[str, ...]
    #: its Unified Memory page faults (``_TIMELINE_FAULTS``), and what it says of those and of the
    #: Python samples not drawn
    faults: pl.DataFrame
    notes: tuple[str, ...]
    #: its Python samples' slices (``_python_rows``)
    python: pl.DataFrame


def diff_timeline_data(tk, base: str | int | None = None, new: str | int | None = None, nvtx: str | None = None,
                       instance: int | str | None = None) -> Timeline:
    """Two nsys runs' requests on one time axis, the base's lanes (``base · ...``) above the
    new run's (``new · ...``): ``requests_timeline`` of the two."""
    if base is None or new is None:
        raise ParamError("chart diff-timeline: give the nsys runs to compare as -p base=RUN -p new=RUN")
    return requests_timeline(tk, [("base", base), ("new", new)], nvtx, instance, "diff-timeline",
                             lambda i, run_id, point: "base" if i == 0 else "new")


def compare_timeline_data(tk, base: str | int | None = None, runs: str | None = None, nvtx: str | None = None,
                          instance: int | str | None = None) -> Timeline:
    """Several nsys runs' requests on one time axis, the base's lanes first, then each run's in
    the order given, named by its sweep point where it is one (``bs=8,nc=1024 · ...``), else
    by its run id: ``requests_timeline`` of them all."""
    if base is None or runs is None or not _run_list(runs):
        raise ParamError("chart compare-timeline: give the nsys runs as -p base=RUN -p runs=RUN,RUN,...")
    return requests_timeline(tk, [("base", base), *(("runs", r) for r in _run_list(runs))], nvtx, instance,
                             "compare-timeline", lambda i, run_id, point: "base" if i == 0 else point or f"run {run_id}")


def _distinct(labels: dict[int, str], ids: list[int]) -> dict[int, str]:
    """Lane names told apart (a timeline draws a name's lanes as one): a name two runs share
    (two captures at one sweep point) with its run id, a run given twice with its place."""
    from collections import Counter

    alike = Counter(labels.values())
    out = {i: f"{lab} (run {ids[i]})" if alike[lab] > 1 and lab != f"run {ids[i]}" else lab
           for i, lab in labels.items()}
    alike = Counter(out.values())
    return {i: f"{lab} (#{i + 1})" if alike[lab] > 1 else lab for i, lab in out.items()}


def requests_timeline(tk, refs: list[tuple[str, Any]], nvtx: str | None, instance: int | str | None, chart: str,
                      label: Callable[[int, int, str | None], str]) -> Timeline:
    """Nsys runs' requests on one time axis, each run's lanes below the one before, each
    request from its own start (a run's times moved onto the first's): the first run's typical
    request (``typical_instance``) and each other run's instance of that range whose duration
    is the median of those at the same nesting depth; ``nvtx=NAME``: that range's median
    instance in each run; with ``instance=N``, the N-th in each. Each window runs to the end of
    the GPU work its range launched (``tracekit.trace.resolve_window``). ``refs``: (the
    parameter that named it, the run); ``label(index, run id, its sweep point or None)``: what
    names a run's lanes."""
    from .registry import resolve_run, traced_said, untraced_words
    from .trace import Options, Part, Window, nvtx_instances, resolve_window

    said = f"chart {chart}"
    every = "both runs have" if len(refs) == 2 else "every run has"
    for what, ref in refs:
        text = str(ref).strip()
        if not text:
            raise ParamError(f"{said}: {what}={ref!r}: an empty run reference; give a run id or name")
        if tk.con.execute("SELECT 1 FROM runs WHERE json_extract_string(params, '$.sweep') = ? LIMIT 1",
                          [text]).fetchall():
            raise QueryError(f"{said}: {what}={text} is a sweep; give nsys runs (a sweep's runs, one per point: "
                             "`tracekit runs`)")
    ids = [resolve_run(tk, r, "nsys", said, spans_runs=False) for _, r in refs]
    info = [tk.con.execute("SELECT name, grid_point(params) FROM runs WHERE run_id = ?", [i]).fetchall()[0] for i in ids]
    names = [n for n, _ in info]
    labels = {i: label(i, run_id, point or None) for i, (run_id, (_, point)) in enumerate(zip(ids, info, strict=True))}
    labels = _distinct(labels, ids)
    number = _int_param("instance", instance, "an instance number (1 = the first)", chart)
    options = Options(**{**_TIMELINE_OPTIONS, "command": said})
    depth, pick = None, None
    if nvtx is None:
        if number is not None:
            raise ParamError(f"{said}: -p instance needs -p nvtx (the range it counts)")
        pick = typical_instance(tk, ids[0])
        if pick is None:
            raise QueryError(f"{said}: run {ids[0]} ({names[0]}) has no NVTX range: the chart draws a request of each "
                             f"run, a range {every} (capture with nsys -t nvtx; `tracekit chart timeline -p from_ns= "
                             "-p to_ns=` draws a window of one run)")
        nvtx, depth = pick.name, (pick.depth if pick.repeated else None)
    windows, picked = [], []
    for i, (run_id, name) in enumerate(zip(ids, names, strict=True)):
        n = pick.instance if pick is not None and i == 0 else number  # (the first run's typical request)
        if n is None:  # (the median duration of the range's instances at that depth, as the typical request)
            total, rows = nvtx_instances(tk, run_id, nvtx, depth=depth)
            if not rows:
                raise QueryError(f"{said}: run {run_id} ({name}) has no NVTX range named {nvtx!r}"
                                 + (f" at nesting depth {depth}" if total else "")
                                 + f"; give -p nvtx=NAME of a range {every} (`tracekit query nvtx-summary`)")
            order = sorted(range(len(rows)), key=lambda k, r=rows: (r[k].end_ns - r[k].start_ns, k))
            n = rows[order[(len(rows) - 1) // 2]].instance
        w = resolve_window(tk, run_id, nvtx=nvtx, instance=n, options=options)
        if w.end_ns <= w.start_ns:
            raise QueryError(f"{said}: {w.label} of run {run_id} ({name}) lasts 0 ns and launched no GPU work: nothing "
                             "to draw; choose another instance")
        windows.append(w)
        picked.append(f"{labels[i]}: {w.label}, {(w.end_ns - w.start_ns) / 1e6:,.3f} ms")
    parts = [Part(run_id, w, i, windows[0].start_ns - w.start_ns) for i, (run_id, w) in enumerate(zip(ids, windows,
                                                                                                      strict=True))]
    got = [_timeline_rows(tk, part, name) for part, name in zip(parts, names, strict=True)]
    events = sum(g.events for g in got)
    if events > TIMELINE_BARS:
        raise QueryError(f"{said}: the {len(parts)} {nvtx!r} ranges hold {events:,} events, more than the "
                         f"{TIMELINE_BARS:,} a timeline draws; choose a shorter range (-p nvtx=NAME of an inner one)"
                         + (" or fewer runs" if len(parts) > 2 else ""))
    if all(g.events == 0 for g in got):
        raise QueryError(f"{said}: the {nvtx!r} ranges of runs {', '.join(map(str, ids))} hold no event to draw")

    pairs = list(zip(parts, got, strict=True))
    span = max(w.end_ns - w.start_ns for w in windows)
    notes = tuple(f"{labels[part.rank]}: {note}" for part, g in pairs for note in g.notes)
    missing = tuple(k for k in ("NVTX", "CUDA") if all(k in g.missing for g in got))
    notes += tuple(f"{labels[part.rank]} {untraced_words(k, traced_said(tk, part.run_id))}"
                   for part, g in pairs for k in g.missing if k not in missing)
    runs = [f"run {run_id} ({name})" if labels[i] == f"run {run_id}" else f"{labels[i]}: run {run_id} ({name})"
            for i, (run_id, name) in enumerate(zip(ids, names, strict=True))]
    return Timeline(ids[-1], names[-1], Window(windows[0].start_ns, windows[0].start_ns + span, "; ".join(picked)),
                    _joined(pairs, "nvtx"), _joined(pairs, "gpu"), missing, tuple(range(len(parts))), notes,
                    faults=_joined(pairs, "faults"), python=_joined(pairs, "python"), labels=labels,
                    title="Timeline compared · " + " · ".join(runs),
                    ends={part.rank: part.window.end_ns + part.shift_ns for part in parts})


def _timeline_rows(tk, part, run_name: str | None) -> _Rows:
    """The rows of ``part``'s window (tracekit.trace.Part), their times moved by its shift;
    none read where the window holds more than ``TIMELINE_BARS`` events. A run alone
    captured without NVTX and CUDA tracing is an error; a job's rank so captured, no rows."""
    from .interrupts import stoppable
    from .registry import (
        NO_CUDA_EVENT,
        get_registry,
        no_cuda_event,
        retell,
        traced_said,
        untraced,
        untraced_words,
    )

    run_id, w = part.run_id, part.window
    if run_name is None:
        run_name = tk.con.execute("SELECT name FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0]
    missing = tuple(what for what, _ in untraced(tk, run_id, ["nvtx_ranges", "kernels"]))
    if len(missing) == 2:  # (a job's rank: said in a note, unless no rank traced either)
        if part.rank is None:
            said = traced_said(tk, run_id)
            raise QueryError(f"chart timeline: run {run_id} ({run_name}) {untraced_words('NVTX and CUDA', said)}: "
                             f"nothing to draw; capture with nsys -t nvtx,cuda{retell(said)}")
        return _Rows(pl.DataFrame(), pl.DataFrame(), 0, 0, 0, None, None, missing, pl.DataFrame(), (), pl.DataFrame())
    params = {"run": run_id, "lo": w.start_ns, "hi": w.end_ns, "nvtx": "NVTX" not in missing,
              "gpu": "CUDA" not in missing}
    ranges, ops, first, last = tk.con.execute(_TIMELINE_EVENTS, params).fetchall()[0]
    if ranges + ops > TIMELINE_BARS:  # (not read: too many to draw)
        return _Rows(pl.DataFrame(), pl.DataFrame(), ranges + ops, ranges, ops, first, last, missing, pl.DataFrame(),
                     (), pl.DataFrame())

    def rows(kind: str, query: str, found: int) -> pl.DataFrame:
        if kind in missing or not found:  # (not asked: a window outside the run is the query's error)
            return pl.DataFrame()
        with stoppable():  # (graphs_shown: the launches gpu-trace leaves out are drawn below)
            return get_registry().run(tk, query, graphs_shown=True, run=run_id, from_ns=w.start_ns,
                                      to_ns=w.end_ns, limit=0)

    gpu = rows("CUDA", "gpu-trace", ops)
    if "CUDA" not in missing:
        graphs = tk.frame(tk.con.sql(_TIMELINE_GRAPHS, params={k: params[k] for k in ("run", "lo", "hi")}))
        if not graphs.is_empty():
            gpu = pl.concat([gpu, graphs], how="diagonal_relaxed").sort("start_ns", maintain_order=True)
    nv = rows("NVTX", "nvtx-ranges", ranges)
    window = {k: params[k] for k in ("run", "lo", "hi")}
    faults, notes = pl.DataFrame(), ()
    count = tk.con.execute(_TIMELINE_FAULT_COUNT, window).fetchall()[0][0]
    if count and ranges + ops + count <= TIMELINE_BARS:
        faults = tk.frame(tk.con.sql(_TIMELINE_FAULTS, params=window))
    elif count:  # (drawn with the rest, they would pass what a timeline draws)
        notes = (f"{count:,} Unified Memory page faults in the window not drawn (`tracekit export trace` writes "
                 "them)",)
    python, said = _python_rows(tk, part, TIMELINE_BARS - ranges - ops - faults.height)
    notes += said
    if part.rank is None and "CUDA" not in missing and not ops and no_cuda_event(tk, run_id):  # (no GPU lane: why)
        notes += (f"the run {NO_CUDA_EVENT}",)  # (a job's ranks: said once of them all, timeline_data)
    if part.shift_ns:
        moved = [pl.col(c) + part.shift_ns for c in ("start_ns", "end_ns")]
        nv, gpu, faults, python = (f.with_columns(moved) if not f.is_empty() else f for f in (nv, gpu, faults, python))
    return _Rows(nv, gpu, ranges + ops, ranges, ops, first, last, missing, faults, notes, python)


def _python_rows(tk, part, room: int) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """The Python samples of ``part``'s window as slices (tracekit.trace.python_slices) with their
    ``depth`` on the thread's Python lanes: the frames every sample of the thread in the window
    shares (its trunk: the program's entry down to the request loop) are not drawn but said, and
    depth 1 is the first level where the samples part; none drawn, said so, where they would pass
    ``room`` bars."""
    from .trace import python_slices

    py = python_slices(tk, part.run_id, part.window)
    if py.is_empty():
        return py, ()
    notes: list[str] = []
    kept = []
    for (_, tid), d in py.group_by("pid", "tid", maintain_order=True):
        n = d.filter(pl.col("level") == 0)["samples"].sum()
        per = d.group_by("level").agg(pl.len().alias("slices"), pl.col("samples").first(),
                                      pl.col("name").first()).sort("level")
        trunk = 0
        for level, slices, samples in per.select("level", "slices", "samples").rows():
            if slices != 1 or samples != n or level == per["level"].max():
                break
            trunk = level + 1
        if trunk:  # (the innermost of them say most: the outer ones go first where they are many)
            names = per["name"].head(trunk).to_list()
            while len(names) > 1 and len(" > ".join(names)) > 150:
                names = names[1:] if names[0] == "…" else ["…", *names[2:]]
            notes.append(f"tid {tid}'s Python frames in every sample, not drawn: {' > '.join(names)}")
        kept.append(d.filter(pl.col("level") >= trunk).with_columns((pl.col("level") - trunk + 1).alias("depth")))
    py = pl.concat(kept)
    if py.height > room:
        return pl.DataFrame(), (f"{py.height:,} slices of Python samples in the window not drawn (`tracekit export "
                                "trace` writes them)",)
    return py, tuple(notes)


def _outside(run_id: int, run_name: str, window, lo: int | None, hi: int | None, first: int | None,
             last: int | None) -> None:
    """A from_ns/to_ns window wholly outside the run's events: an error giving their span."""
    if first is not None and ((hi is not None and hi <= first) or (lo is not None and lo >= last)):
        raise QueryError(f"chart timeline: the window {window.label} is outside run {run_id} ({run_name})'s "
                         f"events, which span {first} to {last} ns (`tracekit query nvtx-ranges` prints times "
                         "on this clock)")


def _too_many(tk, run_id: int, run_name: str, window, ranges: int, ops: int, first: int | None,
              last: int | None) -> str:
    """The error of a window with more than ``TIMELINE_BARS`` events: how many, and a
    window to choose instead (an instance of the run's most repeated NVTX range, the one
    the report shows)."""
    whole = window.start_ns is None and window.end_ns is None
    held = f"run {run_id} ({run_name}) has" if whole else f"{window.label} of run {run_id} ({run_name}) holds"
    lo = first if window.start_ns is None else window.start_ns
    hi = last if window.end_ns is None else window.end_ns
    span = f"; {'the run' if whole else 'the window'} spans {lo} to {hi}" if lo is not None else ""
    when = f"-p from_ns=START -p to_ns=END (ns on the capture's clock{span})"
    typical = typical_instance(tk, run_id)
    stretch = middle_stretch(tk, run_id) if whole and typical is None else None
    if typical is not None and typical.among > 1 and whole:
        choose = (f"choose a window: -p {shlex.quote('nvtx=' + typical.name)} -p instance={typical.instance} "
                  f"({typical.median_of()}), or {when}")
    elif stretch is not None:
        choose = f"choose a window: {stretch.params()} ({stretch.said()}, which its report shows), or {when}"
    else:
        choose = f"choose a shorter window: {when}, or an NVTX range inside it (-p nvtx=NAME -p instance=N)"
    return (f"chart timeline: {held} {ranges + ops:,} events ({ranges:,} NVTX ranges, {ops:,} GPU ops), more than "
            f"the {TIMELINE_BARS:,} a timeline draws; {choose}; `tracekit export trace` writes any window "
            "for ui.perfetto.dev")


def _gpu_lanes(gpu: pl.DataFrame) -> pl.DataFrame:
    """GPU ops (gpu-trace rows) with their ``lane``: ``GPU d · stream s`` (``no stream``:
    Unified Memory migrations), with the process where the device's ops in the window
    come from several (their stream ids are unrelated), sorted by device, process, stream."""
    several = gpu.group_by("device_id").agg(pl.col("pid").n_unique().alias("pids"))
    stream = pl.when(pl.col("stream_id").is_null()).then(pl.lit("no stream")).otherwise(
        pl.format("stream {}", pl.col("stream_id")))
    return gpu.join(several, on="device_id", how="left").with_columns(
        pl.when(pl.col("pids") > 1)
        .then(pl.format("GPU {} · pid {} · {}", pl.col("device_id"), pl.col("pid"), stream))
        .otherwise(pl.format("GPU {} · {}", pl.col("device_id"), stream))
        .alias("lane"),
    ).sort("device_id", "pid", "stream_id", "start_ns", nulls_last=True, maintain_order=True)


def _op_detail(r: dict) -> str:
    """A GPU op's launch shape (kernels), size and memory kinds (copies, memsets), or
    graph and instantiation (a CUDA graph launch traced whole)."""
    if r["op_kind"] == "graph":
        return f"graph {r['graph_id']} · instantiation {r['graph_exec_id']} · its kernels not traced apiece"
    if r["op_kind"] == "kernel":
        return (f"grid {r['grid_x']}×{r['grid_y']}×{r['grid_z']} · block {r['block_x']}×{r['block_y']}×"
                f"{r['block_z']} · {r['registers_per_thread']} registers/thread")
    size = _si(r["bytes"] or 0, "B")
    if r["op_kind"] == "memcpy":
        return f"{size} · {r['src_kind'] or '?'} → {r['dst_kind'] or '?'}"
    return f"{size} · {r['src_kind'] or '?'} memory"


def _busy(gpu: pl.DataFrame, t0: int, t1: int, t: Timeline | None = None, ends: dict[int, int] | None = None) -> list[str]:
    """Per device (per rank and device, a job's, named as ``t`` names its parts), the share
    of the window it ran a GPU op (the union of its ops); ``ends``: a part's own end of the
    window, where it is not ``t1`` (two runs compared, each over its own request)."""
    out = []
    keys = ["rank", "device_id"] if "rank" in gpu.columns else ["device_id"]
    for key, ops in gpu.sort(*keys, "start_ns").group_by(keys, maintain_order=True):
        busy, end = 0, t0
        stop = (ends or {}).get(key[0], t1) if len(keys) == 2 else t1
        for s, e in ops.select("start_ns", "end_ns").iter_rows():
            s, e = max(s, end), min(e, stop)
            if e > s:
                busy += e - s
                end = e
        pct = 100 * busy / max(stop - t0, 1)
        rank = f"{t.label(key[0]) if t is not None else f'rank {key[0]}'} " if len(keys) == 2 else ""
        out.append(f"{rank}GPU {key[-1]} busy {pct:.{0 if pct >= 10 else 1}f} %")
    return out


def _ranked(df: pl.DataFrame, t: Timeline) -> pl.DataFrame:
    """A job's timeline rows (with ``rank``): each lane named for its rank (``t.label``), the
    ranks in order (each rank's lanes in the order they had); other rows as they are."""
    if "rank" not in df.columns:
        return df
    names = {r: t.label(r) for r in df["rank"].unique()}
    return df.with_columns(pl.format("{} · {}", pl.col("rank").replace_strict(names, return_dtype=pl.String),
                                     pl.col("lane")).alias("lane")).sort("rank", maintain_order=True)


def _legend(columns: int, width: int) -> alt.Legend:
    """A timeline's legend: below the lanes (the chart takes the page's width), in
    ``columns`` of labels cut at ``width`` px."""
    return alt.Legend(orient="bottom", direction="vertical", columns=columns, labelLimit=width)


def _bars(rows: list[dict], x: alt.X, title: str, scale: alt.Scale, legend: alt.Legend, tooltip: list) -> alt.Chart:
    """A timeline's bars from ``start_ms`` to ``end_ms``, coloured by ``colour``; outlined
    in their colour, so an op of a few µs in a window of ms still shows as a line."""
    return alt.Chart(_data(rows)).mark_bar(height=16, clip=True, strokeWidth=1).encode(
        x=x, x2="end_ms:Q", color=alt.Color("colour:N", title=title, scale=scale, legend=legend),
        stroke=alt.Stroke("colour:N", scale=scale, legend=legend), tooltip=tooltip)


def _nvtx_coloured(df: pl.DataFrame) -> list[str]:
    """The NVTX range names (``range``) coloured apiece, one per ``_NVTX_COLOURS`` at most, in
    the order they take them: outer ranges before inner ones (by the shallowest depth a name
    is at; start/end ranges, of no depth, after those), and of one depth the one that starts
    first first; the rest are "(other)". The structure of a request (its stages, its layers)
    keeps its colours before what the stages contain, and of sibling ranges (hstu.layer0 to
    hstu.layer7) none is grey while a later one is coloured. (By time alone, the 12 with the
    most, the layers' inner ranges, summed over the layers, took colours first and layers of
    nearly the same time were coloured or not by a few microseconds: hstu.layer7 coloured,
    layers 2, 4, 5 and 6 grey.)"""
    return (df.group_by("range").agg(pl.col("depth").min(), pl.col("start_ns").min())
            .sort(["depth", "start_ns", "range"], nulls_last=True)["range"].head(len(_NVTX_COLOURS)).to_list())


def _nvtx_scale(coloured: list[str], colour: pl.Series) -> alt.Scale:
    """The colour scale of NVTX ranges: ``coloured`` (``_nvtx_coloured``) in ``_NVTX_COLOURS``,
    then "(other)" in grey where the ``colour`` column holds it."""
    other = ["(other)"] if colour.eq("(other)").any() else []
    return alt.Scale(domain=coloured + other, range=_NVTX_COLOURS[:len(coloured)] + [_OTHER_COLOUR] * len(other))


def _top(df: pl.DataFrame, key: str, in_window: pl.Expr) -> list[str]:
    """The ``TIMELINE_COLOURS`` values of ``key`` with the most time in the window."""
    return (df.group_by(key).agg(in_window.sum().alias("t")).sort(["t", key], descending=[True, False])[key]
            .head(TIMELINE_COLOURS).to_list())


def timeline(t: Timeline) -> alt.LayerChart | alt.Chart:
    """The run's window as nsys draws it: NVTX ranges per thread and nesting depth above,
    the Python calls sampled per thread and level where the capture sampled them (a flame chart
    over time below the frames every sample shares, tracekit.trace.python_slices), the GPU's
    kernels, copies, memsets and CUDA graph launches traced whole per device and stream below,
    then the Unified Memory page faults where the capture traced them (the GPU's fault groups
    per device, the CPU's faults per process), on one time axis in ms since the window's start
    (events that overlap its edges cut there); colours: the ``TIMELINE_COLOURS`` NVTX ranges
    outermost and first (``_nvtx_coloured``), Python functions and kernels with the most time
    in the window apiece, copies in reds,
    memsets in greys, graph launches in purples, GPU faults in olives by access type, CPU
    faults in cyan. Zooms on the time axis (scroll, drag). A job's ranks (``t.ranks``): each
    rank's lanes together, named ``rank N · ...``, on the run's clock."""
    from .registry import untraced_words

    title = t.title or (f"Timeline · run {t.run_id} ({t.run_name})" if not t.ranks else
                        f"Timeline · {ranks_text(t.ranks)} of run {t.run_id}'s job ({t.run_name})")
    nv, gpu, w = t.nvtx, t.gpu, t.window
    if nv.is_empty() and gpu.is_empty():  # (what the run did not trace, a rank with nothing in the span: said)
        return _no_data(f"{title} · {w.label}", [*(untraced_words(what, t.said, verb=False) for what in t.untraced),
                                                 *t.notes])
    frames = [f for f in (nv, gpu) if not f.is_empty()]
    t0 = w.start_ns if w.start_ns is not None else min(int(f["start_ns"].min()) for f in frames)
    t1 = max(w.end_ns if w.end_ns is not None else max(int(f["end_ns"].max()) for f in frames), t0 + 1)
    in_window = pl.min_horizontal(pl.col("end_ns"), pl.lit(t1)) - pl.max_horizontal(pl.col("start_ns"), pl.lit(t0))
    since = [((pl.col(c) - t0) / 1e6).alias(c.replace("_ns", "_ms")) for c in ("start_ns", "end_ns")]
    since_what = "each request" if t.ends else "the window" if w.start_ns is not None else "the first event"
    x = alt.X("start_ms:Q", title=f"Time since {since_what}'s start [ms]",
              scale=alt.Scale(domain=[0, (t1 - t0) / 1e6], nice=False))
    start = alt.Tooltip("start_ms:Q", title="start [ms]", format=",.3f")
    lanes: list[str] = []
    layers = []
    graphs: list[str] = []
    if not nv.is_empty():  # named as the path names them: the default domain's ':text' as 'text'
        nv = _ranked(_nvtx_lanes(nv.with_columns(pl.col("range").str.strip_prefix(":"))), t)
        top = _nvtx_coloured(nv)
        d = nv.with_columns(*since, (pl.col("dur_ns") / 1e6).alias("dur_ms"),
                            pl.when(pl.col("range").is_in(top)).then(pl.col("range")).otherwise(pl.lit("(other)"))
                            .alias("colour"))
        scale = _nvtx_scale(top, d["colour"])
        rows = d.select("range", "path", "colour", "lane", "start_ms", "end_ms", "dur_ms", "gpu_ops").to_dicts()
        layers.append(_bars(rows, x, "NVTX range", scale, _legend(3, 150), [
            alt.Tooltip("range:N", title="NVTX range"), alt.Tooltip("path:N"), alt.Tooltip("lane:N"), start,
            alt.Tooltip("dur_ms:Q", title="duration [ms]", format=",.3f"),
            alt.Tooltip("gpu_ops:Q", title="GPU ops launched")]))
        lanes += d["lane"].unique(maintain_order=True).to_list()
    if not t.python.is_empty():  # the Python samples as a flame chart over time, per thread below its trunk
        d = _ranked(t.python.sort("tid", "depth", "start_ns").with_columns(
            pl.format("tid {} · Python {}", pl.col("tid"), pl.col("depth")).alias("lane")), t)
        top = _top(d, "name", in_window)
        d = d.with_columns(*since, ((pl.col("end_ns") - pl.col("start_ns")) / 1e6).alias("dur_ms"),
                           pl.when(pl.col("name").is_in(top)).then(pl.col("name")).otherwise(pl.lit("(other Python)"))
                           .alias("colour"),
                           pl.format("{}:{}", pl.col("file"), pl.col("line").cast(pl.Utf8).fill_null("?")).alias("where"))
        other = ["(other Python)"] if d["colour"].eq("(other Python)").any() else []
        scale = alt.Scale(domain=top + other, range=_PYTHON_COLOURS[:len(top)] + [_OTHER_COLOUR] * len(other))
        rows = d.select("name", "where", "colour", "lane", "start_ms", "end_ms", "dur_ms", "samples").to_dicts()
        layers.append(_bars(rows, x, "Python function", scale, _legend(3, 150), [
            alt.Tooltip("name:N", title="Python function"), alt.Tooltip("where:N", title="file:line (first sample)"),
            alt.Tooltip("lane:N"), start, alt.Tooltip("dur_ms:Q", title="duration [ms]", format=",.3f"),
            alt.Tooltip("samples:Q")]))
        lanes += d["lane"].unique(maintain_order=True).to_list()
    if not gpu.is_empty():
        ran = gpu.filter(pl.col("op_kind") == "kernel")
        kernels = _top(ran, "name", in_window)
        if t.labels and "rank" in ran.columns:  # (runs compared: a kernel one of them ran alone coloured first)
            alone = ran.group_by("name").agg(pl.col("rank").n_unique() < gpu["rank"].n_unique()).filter(
                pl.col("rank"))["name"]
            first = _top(ran.filter(pl.col("name").is_in(alone.implode())), "name", in_window)
            kernels = [*first, *(k for k in kernels if k not in first)][:TIMELINE_COLOURS]
        shown = dict(zip(kernels, distinct_labels(kernels, 48, short_name), strict=True))
        d = _ranked(_gpu_lanes(gpu), t)
        colour = [shown.get(n, "(other kernels)") if k == "kernel" else n for n, k in d.select("name", "op_kind").rows()]
        d = d.with_columns(*since, (pl.col("dur_ns") / 1e3).alias("dur_us"), pl.Series("colour", colour, pl.Utf8),
                           pl.Series("detail", [_op_detail(r) for r in d.iter_rows(named=True)], pl.Utf8))
        other = ["(other kernels)"] if "(other kernels)" in colour else []
        copies = sorted(set(d.filter(pl.col("op_kind") == "memcpy")["name"]))
        memsets = sorted(set(d.filter(pl.col("op_kind") == "memset")["name"]))
        graphs = sorted(set(d.filter(pl.col("op_kind") == "graph")["name"]))
        scale = alt.Scale(domain=[shown[k] for k in kernels] + other + copies + memsets + graphs,
                          range=(_KERNEL_COLOURS[:len(kernels)] + [_OTHER_COLOUR] * len(other)
                                 + [_COPY_COLOURS[i % len(_COPY_COLOURS)] for i in range(len(copies))]
                                 + [_MEMSET_COLOURS[i % len(_MEMSET_COLOURS)] for i in range(len(memsets))]
                                 + [_GRAPH_COLOURS[i % len(_GRAPH_COLOURS)] for i in range(len(graphs))]))
        rows = d.select("name", "op_kind", "colour", "lane", "start_ms", "end_ms", "dur_us", "detail",
                        "nvtx_path").to_dicts()
        layers.append(_bars(rows, x, "GPU op", scale, _legend(2, 280), [
            alt.Tooltip("name:N", title="GPU op"), alt.Tooltip("op_kind:N", title="kind"), alt.Tooltip("lane:N"),
            start, alt.Tooltip("dur_us:Q", title="duration [µs]", format=",.1f"), alt.Tooltip("detail:N"),
            alt.Tooltip("nvtx_path:N", title="NVTX path")]))
        lanes += d["lane"].unique(maintain_order=True).to_list()
    if not t.faults.is_empty():  # Unified Memory page faults: the GPU's per device, the CPU's per process
        gpu_side = pl.col("side") == "GPU"
        d = _ranked(t.faults.with_columns(
            pl.when(gpu_side).then(pl.format("GPU {} · page faults", pl.col("device_id")))
            .otherwise(pl.format("pid {} · CPU page faults", pl.col("pid"))).alias("lane"),
            pl.when(gpu_side).then(pl.col("access_type")).otherwise(pl.lit("CPU")).alias("colour"),
            *since, ((pl.col("end_ns") - pl.col("start_ns")) / 1e3).alias("dur_us")), t)
        kinds = [k for k in _FAULT_COLOURS if k in set(d["colour"])]
        scale = alt.Scale(domain=kinds, range=[_FAULT_COLOURS[k] for k in kinds])
        rows = d.select("colour", "lane", "start_ms", "end_ms", "dur_us", "faults", "address", "instruction").to_dicts()
        layers.append(_bars(rows, x, "Unified Memory page fault", scale, _legend(3, 150), [
            alt.Tooltip("colour:N", title="page fault"), alt.Tooltip("lane:N"), start,
            alt.Tooltip("dur_us:Q", title="servicing [µs]", format=",.1f"), alt.Tooltip("faults:Q"),
            alt.Tooltip("address:N", title="page"), alt.Tooltip("instruction:N", title="CPU function")]))
        lanes += d["lane"].unique(maintain_order=True).to_list()
    if t.ranks:  # (each rank's NVTX lanes, then its GPU lanes)
        order = {f"{t.label(r)} · ": i for i, r in enumerate(sorted(t.ranks))}
        lanes = sorted(lanes, key=lambda lane: next(i for prefix, i in order.items() if lane.startswith(prefix)))
    y = alt.Y("lane:N", sort=lanes, title=None, axis=alt.Axis(labelLimit=240))
    layers = [layer.encode(y=y) for layer in layers]
    layers[0] = layers[0].add_params(alt.selection_interval(bind="scales", encodings=["x"]))
    said = [w.label if t.ends else f"{w.label} · {(t1 - t0) / 1e6:,.3f} ms",
            *(_busy(gpu, t0, t1, t, t.ends) if not gpu.is_empty() else []),
            *(untraced_words(what, t.said, verb=False) for what in t.untraced), *t.notes]
    return alt.layer(*layers).resolve_scale(color="independent", stroke="independent").properties(
        width=TIMELINE_WIDTH, height=alt.Step(20),
        title=alt.Title(title, subtitle=[" · ".join(said), "; ".join([", then ".join(  # (the lanes drawn)
            ["NVTX ranges per thread and nesting depth"] * (not nv.is_empty())
            + ["the Python calls sampled per thread and level"] * (not t.python.is_empty())
            + ["GPU kernels, copies (reds)"
               + (", memsets (greys) and CUDA graph launches traced whole (purples)" if graphs else " and memsets (greys)")
               + " per device and stream"] * (not gpu.is_empty())),
            *["Unified Memory page faults (the GPU's by access type, the CPU's per process)"] * (not t.faults.is_empty()),
            "hover for each one's numbers, scroll or drag to zoom, double-click to reset"])]))


def sweep_latency(df: pl.DataFrame) -> alt.LayerChart:
    """Median (solid) and p95 (dashed) request latency against batch size, one line per candidate count."""
    _need(df, "sweep-latency", "sweep-latency", ["bs", "nc", "median_ms", "p95_ms"])
    if df.is_empty():
        return _no_data("Sweep latency")
    d = df.unpivot(
        index=["bs", "nc", *(c for c in ("preset", "tool") if c in df.columns)],
        on=["median_ms", "p95_ms"], variable_name="stat", value_name="ms",
    ).with_columns(
        pl.col("stat").str.replace("_ms", ""), pl.format("nc={}", pl.col("nc")).alias("candidates")
    )
    data = d.to_dicts()
    base = alt.Chart(_data(data)).encode(
        x=alt.X(
            "bs:Q",
            title="Batch size [users per request]",
            scale=alt.Scale(type="log", base=2),
            axis=alt.Axis(values=sorted({r["bs"] for r in data}), format="d"),
        ),
        y=alt.Y("ms:Q", title="Request latency [ms]"),
        color=alt.Color("nc:O", title="candidates (nc)", scale=alt.Scale(scheme=PALETTE)),
        tooltip=["bs:Q", "nc:Q", *(f"{c}:N" for c in ("preset", "tool") if c in df.columns), "stat:N",
                 alt.Tooltip("ms:Q", format=",.3f")],
    )
    # one line per statistic and per (preset, tool) where the store holds several: a point
    # captured under nsys is not joined to the timing-only points beside it
    series = [c for c in ("preset", "tool") if c in df.columns and df[c].n_unique() > 1]
    lines = base.mark_line().encode(
        strokeDash=alt.StrokeDash(
            "stat:N",
            title="statistic",
            sort=["median", "p95"],
            scale=alt.Scale(domain=["median", "p95"], range=[[1, 0], [6, 3]]),
        ),
        detail=[alt.Detail("stat:N"), *(alt.Detail(f"{c}:N") for c in series)],
    )
    return alt.layer(lines, base.mark_point(filled=True, size=40)).properties(
        width=WIDTH,
        height=HEIGHT,
        title=alt.Title("Latency across the sweep", subtitle="solid: median, dashed: p95"),
    )


def sweep_points(df: pl.DataFrame) -> alt.LayerChart:
    """GPU kernel time per point of a sweep of any grid (sweep-points), one bar per point in
    the grid's order, labelled with the time against the first point; the tooltip has the
    run, the launches and the top kernel."""
    _need(df, "sweep-points", "sweep-points", ["point", "run", "kernel_total_ns", "vs_first", "launches",
                                               "top_kernel", "top_kernel_pct"])
    if df.is_empty():
        return _no_data("Sweep points")
    rows = [{**r, "ms": r["kernel_total_ns"] / 1e6} for r in df.iter_rows(named=True)]
    y = alt.Y("point:N", sort=[r["point"] for r in rows], title=None)
    tip = [alt.Tooltip("point:N"), alt.Tooltip("run:N"), alt.Tooltip("ms:Q", title="kernel time [ms]", format=",.3f"),
           alt.Tooltip("launches:Q", format=","),
           alt.Tooltip("vs_first:Q", title="against the first point", format=",.3f"),
           alt.Tooltip("top_kernel:N"), alt.Tooltip("top_kernel_pct:Q", title="its share [%]", format=".1f")]
    base = alt.Chart()
    bars = base.mark_bar().encode(y=y, x=alt.X("ms:Q", title="kernel time [ms]"), tooltip=tip)
    labels = _end_labels(base, y=y, x="ms:Q", text=alt.Text("vs_first:Q", format=",.2f"))
    return alt.layer(bars, labels, data=_data(rows)).properties(width=WIDTH, height=alt.Step(22)).properties(
        title=alt.Title("GPU kernel time per sweep point",
                        subtitle="the kernels of each point's nsys run (-p name=: those whose name holds it); "
                                 "label: x the first point's"))


def sweep_heatmap(df: pl.DataFrame) -> alt.LayerChart:
    """The bs x nc grid of median request latency (sweep-latency), one cell per point."""
    _need(df, "sweep-heatmap", "sweep-latency", ["bs", "nc", "median_ms", "p95_ms", "requests"])
    if df.is_empty():
        return _no_data("Sweep latency grid")
    keys = [c for c in ("preset", "tool") if c in df.columns and df[c].n_unique() > 1]
    d = df.with_columns(
        (pl.concat_str([pl.col(k) for k in keys], separator=" · ") if keys else pl.lit("")).alias("facet")
    )
    data = d.select("bs", "nc", "median_ms", "p95_ms", "requests", "facet").to_dicts()
    base = alt.Chart(_data(data)).encode(
        x=alt.X("nc:O", title="Candidates per user (nc)", sort="ascending", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("bs:O", title="Batch size (bs)", sort="descending"),
    )
    cells = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.Color("median_ms:Q", title="median [ms]", scale=alt.Scale(scheme="viridis", reverse=True)),
        tooltip=[
            "bs:O",
            "nc:O",
            alt.Tooltip("median_ms:Q", title="median [ms]", format=",.3f"),
            alt.Tooltip("p95_ms:Q", title="p95 [ms]", format=",.3f"),
            alt.Tooltip("requests:Q", title="timed requests"),
        ],
    )
    text = base.mark_text(fontSize=12).encode(
        text=alt.Text("median_ms:Q", format=",.2f"),
        color=alt.condition(
            alt.datum.median_ms > (d["median_ms"].min() + d["median_ms"].max()) / 2,
            alt.value("white"),
            alt.value("black"),
        ),
    )
    chart = alt.layer(cells, text).properties(width=alt.Step(90), height=alt.Step(44))
    if keys:
        chart = chart.facet(column=alt.Column("facet:N", title=None))
    return chart.properties(
        title=alt.Title("Median request latency [ms]", subtitle="one cell per sweep point (bs x nc)")
    )


def kernels_by_nvtx(df: pl.DataFrame) -> alt.LayerChart:
    """Horizontal bars of kernel time per NVTX path (kernels-by-nvtx query)."""
    _need(df, "kernels-by-nvtx", "kernels-by-nvtx", ["path", "total_ns", "launches"])
    if df.is_empty():
        return _no_data("Kernel time by NVTX path")
    d = df.with_columns(
        (pl.col("total_ns") / 1e6).alias("total_ms"),
        (pl.col("time_pct") if "time_pct" in df.columns else pl.lit(None)).alias("time_pct"),
        (pl.col("top_kernel") if "top_kernel" in df.columns else pl.lit(None))
        .map_elements(lambda s: short_name(s, 60), return_dtype=pl.Utf8)
        .alias("top"),
    )
    # each path's label as the table reads it (a range without text: (unnamed)), two never alike: the
    # axis cuts a label at its end, where deep paths differ
    paths = d["path"].to_list()
    label = distinct_labels(paths, 64, lambda v, w: UNNAMED if not v.strip() else cut_text(v, w))
    data = d.select("path", "total_ms", "time_pct", "launches", "top").with_columns(
        pl.Series("label", label, dtype=pl.Utf8)).to_dicts()
    return _time_bars(data, "label", "#59a14f", "Kernel time [ms]", "Kernel time by NVTX path", [
        alt.Tooltip("path:N", title="NVTX path"),
        alt.Tooltip("total_ms:Q", title="kernel time [ms]", format=",.3f"),
        alt.Tooltip("time_pct:Q", title="of all kernel time [%]", format=".1f"),
        alt.Tooltip("launches:Q", title="launches", format=","),
        alt.Tooltip("top:N", title="top kernel"),
    ])
# -- diff -----------------------------------------------------------------------------

#: the metric that stands for a key in the diff chart: its time (or latency)
_DIFF_HEADLINE = {"kernel": "total_ns", "nvtx": "kernel_total_ns", "api": "total_ns", "memcpy": "total_ns",
                  "gpu": "busy_ns", "um": "faults", "cpu": "self_ns", "python": "total_ns",
                  "memory": "peak_bytes", "ncu": "duration_ns", "source": "time_ns",
                  "sweep": "latency_med_ms"}
_VERDICT_COLOURS = {"regressed": "#d62728", "improved": "#2ca02c", "unchanged": "#9e9e9e",
                    "host-timed, not judged": "#d9d9d9", "moved with the SM clock": "#b7a6d6",
                    "moved with the host's pace": "#e3c17a"}


def _diff_data(tk, base: str | None = None, new: str | None = None, by: str | None = None,
               threshold: float | str = 5.0, limit: int | str = 20, repeats: str | None = None) -> pl.DataFrame:
    """The rows of ``tk.diff`` the chart draws: per key its headline metric (time, or
    latency for sweeps), the ``limit`` largest changes, with the threshold as a column;
    ``repeats`` (comma-separated) of the base measure the noise (``diff --repeat``)."""
    if base is None or new is None:
        raise ParamError("chart diff: give the runs to compare as -p base=RUN -p new=RUN")
    threshold, limit = _threshold_and_limit("diff", threshold, limit)
    df = tk.diff(base, new, by=by, threshold_pct=threshold, repeats=_repeats_given(repeats))
    return diff_rows(df.drop("noise_pct", strict=False), threshold, limit)


def _run_list(text: str) -> list[str]:
    """``-p runs=A,B`` / ``-p repeats=A,B``: the runs named, in order."""
    return [r.strip() for r in str(text).split(",") if r.strip()]


def _repeats_given(repeats: str | list | None) -> list[str] | None:
    """A comparison chart's ``repeats``: ``-p repeats=A,B``, those runs; an empty list
    (``chart --no-repeats``), none; None, the repeats the store holds of the base, as
    ``diff`` takes them where no ``--repeat`` is given."""
    if repeats is None or isinstance(repeats, list):
        return repeats
    return _run_list(repeats) or None


def _threshold_and_limit(chart: str, threshold: float | str, limit: int | str) -> tuple[float, int]:
    """A comparison chart's ``-p threshold=`` and ``-p limit=``, each checked alone (the error
    names the value given, not the other one's default, and the -p it was given as, not
    the --threshold of the diff commands); a threshold > 0 and finite, a limit >= 0 (0: all)."""
    values = {}
    for name, value, kind, what in (("threshold", threshold, float, "a number"), ("limit", limit, int, "an integer")):
        try:  # (text as -p takes it: a limit of 1,000 as tables print it; digits 0-9 only)
            if isinstance(value, str) and not value.isascii():
                raise ValueError(value)
            values[name] = whole_number(value) if kind is int and isinstance(value, str) else kind(value)
        except (TypeError, ValueError) as err:
            raise ParamError(f"chart {chart}: {name}={value!r}: {what} expected") from err
    if not (values["threshold"] > 0 and math.isfinite(values["threshold"])):  # (nan, inf, 0, -5)
        raise ParamError(f"chart {chart}: threshold={threshold!r}: must be a positive percentage (e.g. 5)")
    if values["limit"] < 0:  # (a negative head() would drop rows from the end)
        raise ParamError(f"chart {chart}: limit={values['limit']}: must be >= 0 (0 = all rows)")
    if values["limit"] > INT_RANGE[1]:  # (as a query's -p limit: Polars takes 64-bit integers)
        raise ParamError(f"chart {chart}: limit={values['limit']} is out of range (64-bit integers)")
    return values["threshold"], values["limit"]


def diff_rows(df: pl.DataFrame, threshold: float = 5.0, limit: int = 20) -> pl.DataFrame:
    """The rows of a diff (``tk.diff``'s result) that the chart draws: per key its
    headline metric, in the diff's order (largest change first), every key judged changed
    and the largest others up to ``limit`` rows (0: all), and the sweep points with nothing
    to compare (named in the subtitle, not drawn), with ``threshold`` as a column."""
    d = df.with_row_index("_i")
    head = d.filter(pl.col("metric") == pl.col("scope").replace_strict(_DIFF_HEADLINE, default=None))
    # an NVTX path that launched no kernel stands by its sampled CPU time where both runs
    # sampled the CPU (judged), else by its wall time; an NVTX path's GPU memory by the bytes it allocated
    for scope, metric in (("nvtx", "cpu_ns"), ("nvtx", "range_total_ns"), ("memory", "allocated_bytes")):
        rest = d.filter((pl.col("scope") == scope) & (pl.col("metric") == metric)
                        & ~pl.col("key").is_in(head.filter(pl.col("scope") == scope)["key"].implode()))
        head = pl.concat([head, rest])
    head = head.sort("_i")
    # the points with nothing to compare are named (not drawn) whatever the limit; of the rest,
    # every key judged changed and then the largest others, at most ``limit`` in the diff's order
    from .diff import changes_first, nothing_to_compare

    absent = head.filter(nothing_to_compare())
    drawn = head.filter(~nothing_to_compare())
    if limit:
        drawn = changes_first(drawn, limit).head(limit)
    shown = pl.concat([drawn, absent]).sort("_i").drop("_i")
    return shown.with_columns(pl.lit(float(threshold)).alias("threshold_pct"))


def diff(df: pl.DataFrame) -> alt.LayerChart:
    """Diverging bars of the largest changes (delta %, coloured by verdict) with their
    intervals; keys in one run only are listed in the subtitle."""
    _need(df, "diff", "diff", ["scope", "key", "metric", "delta_pct", "verdict", "delta_pct_low", "delta_pct_high"])
    if df.is_empty():
        return _no_data("Diff")
    from .diff import held_by, limit, nothing_to_compare, short_keys

    threshold = float(df["threshold_pct"][0]) if "threshold_pct" in df.columns else 5.0
    one_side = df.filter(pl.col("verdict").is_in(["added", "removed"]))
    d = df.filter(~pl.col("verdict").is_in(["added", "removed"]) & pl.col("delta_pct").is_not_null()
                  & (pl.col("delta") != 0))
    short = short_keys(df, 56)
    rows, floors = [], {}  # the limits the drawn rows were judged by -> what each is
    for r in d.iter_rows(named=True):
        unjudged = "host-timed, not judged" in (r["note"] or "")
        judged_by = limit(r["scope"], r["metric"], threshold, host_judged=not unjudged)
        if judged_by is not None:  # (a noise floor, named by what it is the noise of; or the threshold)
            floors.setdefault(judged_by[0], set()).add(
                judged_by[1].removeprefix("the ").removesuffix(" of identical captures"))
        rows.append({"label": f"{r['scope']} · {short[r['key']]}", "key": r["key"], "metric": r["metric"],
                     "delta_pct": r["delta_pct"], "low": r["delta_pct_low"], "high": r["delta_pct_high"],
                     "delta_pct_said": _signed(r["delta_pct"], 2), "low_said": _signed(r["delta_pct_low"], 2),
                     "high_said": _signed(r["delta_pct_high"], 2), "delta_pct_label": _signed(r["delta_pct"]),
                     "verdict": "host-timed, not judged" if unjudged else
                     (r["verdict"] == "unchanged" and held_by(r["note"])) or r["verdict"],
                     "note": r["note"] or "", "p": r["p_value"]})
    subtitle = ["bar: change of each key's time (kernels, memory ops, GPUs: total; NVTX: kernel time, or sampled "
                "CPU time or wall time without kernels;",
                "functions: sampled CPU time; Python functions: sampled wall time, with callees; ncu: duration; "
                "sweeps: median latency; Unified Memory: page faults;",
                "GPU memory: peak bytes, an NVTX path's bytes allocated)",
                "whisker: its interval; dashed: the " + " and the ".join(
                    f"±{f:g}% " + ("threshold" if "threshold" in floors.get(f, {"threshold"}) else
                                   " and ".join(sorted(floors[f])))
                    + f" (+{f:g}% / {-100 * f / (100 + f):.3g}% of base: either run that much above the other)"
                    for f in sorted(floors or {threshold}))]
    if one_side.height:
        subtitle.append(_in_one_run_only(one_side))
    failed = df.filter(pl.col("verdict").is_in(["regressed", "improved"]) & pl.col("delta_pct").is_null())
    if failed.height:  # (a sweep point whose capture failed on one side: no change to draw)
        subtitle.append(f"not drawn (its capture failed on one side): {', '.join(failed['key'].unique().sort())}")
    absent = df.filter(nothing_to_compare())
    if absent.height:  # (a sweep point with no run in the store, or failed, on a side: diff's note says which)
        subtitle.append(f"not drawn (not judged: nothing to compare, `tracekit diff` says why): "
                        f"{', '.join(absent['key'].unique().sort())}")
    if not rows:
        return (alt.Chart(_data([{"t": "no key changed"}])).mark_text(size=16).encode(text="t:N")
                .properties(title=alt.Title("Largest changes", subtitle=subtitle), width=WIDTH, height=120))
    order = [r["label"] for r in rows]
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=460))
    # the axis holds the bars and their whiskers (an interval reaching past its change is drawn whole)
    ends = [v for r in rows for v in (r["delta_pct"], r["low"], r["high"]) if v is not None and math.isfinite(v)]
    lim = max(max(abs(v) for v in ends) * 1.15, max(floors or {threshold}) * 2)
    if lim <= 300:
        scale = alt.Scale(domain=[-lim, lim], clamp=True)
        x_title = "change [% of base]"
    else:  # -90 % and +6000 % both readable: symmetric log (linear within +-100 %)
        low = min([-2 * threshold] + [max(v, -100) * 1.15 for v in ends])  # time cannot fall below -100 %
        scale = alt.Scale(type="symlog", constant=100, domain=[low, lim], clamp=True)
        x_title = "change [% of base], symmetric log scale"
    base = alt.Chart(_data(rows))
    colour = alt.Color("verdict:N", title="verdict", legend=alt.Legend(orient="bottom"), scale=alt.Scale(
        domain=list(_VERDICT_COLOURS), range=list(_VERDICT_COLOURS.values())))
    bars = base.mark_bar(height=14).encode(
        y=y, x=alt.X("delta_pct:Q", title=x_title, scale=scale, axis=_change_axis(scale)), color=colour,
        tooltip=[alt.Tooltip("key:N"), alt.Tooltip("metric:N"), alt.Tooltip("delta_pct_said:N", title="delta_pct"),
                 alt.Tooltip("low_said:N", title="low"), alt.Tooltip("high_said:N", title="high"),
                 alt.Tooltip("verdict:N"), alt.Tooltip("p:Q", format=".2g"), alt.Tooltip("note:N")])
    whiskers = base.transform_filter("datum.low != null && datum.high != null").mark_rule(
        color="#222", strokeWidth=1.5).encode(y=y, x=alt.X("low:Q", scale=scale), x2="high:Q")
    zero = alt.Chart(_data([{"x": 0}])).mark_rule(color="#444").encode(x=alt.X("x:Q", scale=scale))
    # a change is beyond a limit f where either run is more than f % above the other
    # (tracekit.diff._beyond): +f % of the base, or -100 f / (100 + f) %
    lines = alt.Chart(_data([{"x": x} for f in sorted(floors) for x in (-100 * f / (100 + f), f)])).mark_rule(
        strokeDash=[5, 4], color="#777").encode(x=alt.X("x:Q", scale=scale))
    text = base.mark_text(align="left", dx=4, fontSize=10, color="#222").encode(
        y=y, x=alt.value(WIDTH - 255), text="delta_pct_label:N")
    return alt.layer(lines, zero, bars, whiskers, text).properties(
        width=WIDTH - 260, height=alt.Step(22), title=alt.Title("Largest changes", subtitle=subtitle))


#: the rates of a kernel's launches taken over its time in the diff roofline (the ceilings
#: read which precisions ran), and its ceilings at their highest
_RATES = [a for a, _, _ in _PRECISIONS]
_PEAKS = [p for _, p, _ in _PRECISIONS] + [c for c, _ in _MEMORY]


def _roof_colours() -> dict[str, str]:
    """A verdict's colour in the diff roofline: diff's, the repeats' noise, and a kernel of one
    run only."""
    from .compare import NOISE_NOTE  # (not at import: listing the charts imports no polars)

    return {**{k: v for k, v in _VERDICT_COLOURS.items() if k != "host-timed, not judged"},
            NOISE_NOTE: "#a6bddb", "added": "#1f77b4", "removed": "#555555"}


def diff_roofline_data(tk, base: str | None = None, new: str | None = None, kernel: str | None = None,
                       threshold: float | str = 5.0, limit: int | str = 20, repeats: str | None = None) -> pl.DataFrame:
    """Each kernel two ncu runs have, as ``tk.diff`` compares them (its ncu key, how it was
    matched, and the verdict of its median launch's duration), at its roofline point in each
    run: its launches taken together (their FLOP over their DRAM bytes, and over their time;
    the % of roof and each precision's rate weighted by the launches' time; the precision with
    the most FLOP, the bound of the most time) with the highest of its ceilings; of the keys
    with floating-point work, those ``diff_rows`` picks (``limit``: every key judged changed,
    then the largest others), those whose name holds ``kernel`` (any case) where given."""
    from . import diff as _diff
    from .compare import as_command

    if base is None or new is None:
        raise ParamError("chart diff-roofline: give the ncu runs to compare as -p base=RUN -p new=RUN")
    threshold, limit = _threshold_and_limit("diff-roofline", threshold, limit)
    # (a sweep is said before it is compared; a file is ingested by the diff first, resolved after)
    sides = {i: _not_a_sweep(as_command("chart diff-roofline", _diff.resolve, tk, ref))
             for i, ref in enumerate((base, new)) if not _diff._is_file(ref)}
    try:
        df = tk.diff(base, new, by=["ncu"], threshold_pct=threshold, repeats=_repeats_given(repeats))
    except QueryError as err:  # (a run without an ncu report: diff names it by its scope)
        if not str(err).startswith("--by ncu: "):
            raise
        raise QueryError(f"chart diff-roofline: {str(err).removeprefix('--by ncu: ')}; the chart compares two "
                         "ncu runs") from None
    sides = [sides[i] if i in sides else _not_a_sweep(_diff.resolve(tk, r)) for i, r in enumerate((base, new))]
    if kernel is not None:
        df = df.filter(pl.col("key").str.to_lowercase().str.contains(str(kernel).lower(), literal=True))
        if df.is_empty():
            raise QueryError(f"chart diff-roofline: no kernel of {sides[0].label} or {sides[1].label} has "
                             f"{kernel!r} in its name")
    return diff_roofline_points(tk, df, sides[0], sides[1], threshold, limit)


def _not_a_sweep(side, chart: str = "diff-roofline", what: str = "two ncu runs"):
    if side.run_id is None:
        raise QueryError(f"chart {chart}: {side.label} is not a run; compare {what} (a sweep's points on "
                         "one roofline: tracekit chart sweep-roofline -p sweep=ID)")
    return side


def diff_roofline_points(tk, df: pl.DataFrame, base, new, threshold: float = 5.0, limit: int = 20) -> pl.DataFrame:
    """``diff_roofline_data``'s points from a diff already made (``tk.diff`` of ncu runs
    ``base`` and ``new``, ``tracekit.diff.Side``s; its ncu scope's rows are read). A run whose
    launches have no point because its report lacks the roofline's metrics is an error that
    names them (as ``roofline``), not a chart of the other run's points alone."""
    from . import diff as _diff

    sides = [base, new]
    ncu = df.filter(pl.col("scope") == "ncu").drop("noise_pct", strict=False)
    keys = _diff.ncu_launch_keys(tk.con, base.run_id, new.run_id).filter(pl.col("key").is_in(ncu["key"].implode()))
    pts = key_points(tk, keys, sides, "diff-roofline")
    if pts.is_empty():
        raise QueryError(f"chart diff-roofline: nothing to plot; no kernel of {sides[0].label} or {sides[1].label} "
                         "compared does floating-point work")
    head = diff_rows(ncu.filter(pl.col("key").is_in(pts["key"].implode())), threshold, limit)
    verdicts = {r["key"]: (_roof_verdict(r), r["delta_pct"]) for r in head.iter_rows(named=True)}
    order = {k: i for i, k in enumerate(head["key"])}
    runs = [f"{'base' if i == 0 else 'new'}: {s.label}" for i, s in enumerate(sides)]
    return pts.filter(pl.col("key").is_in(list(order))).with_columns(
        pl.col("key").replace_strict({k: v[0] for k, v in verdicts.items()}, return_dtype=pl.String).alias("verdict"),
        pl.col("key").replace_strict({k: v[1] for k, v in verdicts.items()}, return_dtype=pl.Float64).alias("delta_pct"),
        pl.col("side").replace_strict({0: runs[0], 1: runs[1]}, return_dtype=pl.String).alias("run"),
        pl.col("key").replace_strict(order, return_dtype=pl.Int64).alias("_order"),
        pl.lit(float(threshold)).alias("threshold_pct"),
    ).sort("_order", "side").drop("_order")


def _roof_verdict(row: dict) -> str:
    """A diff row's verdict as the rooflines compared colour it: diff's, or what held it back
    (the SM clock, the repeats' noise) where a change was not judged one."""
    from . import diff as _diff
    from .compare import NOISE_NOTE

    if row["verdict"] == "unchanged" and NOISE_NOTE in (row["note"] or ""):
        return NOISE_NOTE
    return (row["verdict"] == "unchanged" and _diff.held_by(row["note"])) or row["verdict"]


def key_points(tk, launches: pl.DataFrame, sides: list, chart: str) -> pl.DataFrame:
    """Per (key, side) of ``launches`` (side, kernel_id, key, how: ncu launches of the run
    ``sides[side]``, a ``tracekit.diff.Side``, under the key they are compared by), their roofline
    point: the launches taken together (their FLOP over their DRAM bytes, and over their time;
    the % of roof and each precision's rate weighted by the launches' time; the precision with
    the most FLOP, the bound of the most time) with the highest of its ceilings; the keys with
    floating-point work only. A run with launches but no point at all for want of the
    roofline's metrics is an error naming them (as ``roofline`` says it), not a chart of the
    other runs' points alone."""
    frames = []
    for side in sorted(set(launches["side"])):
        try:
            rf = tk.query("roofline", run=sides[side].run_id, limit=0)
        except QueryError as err:
            raise QueryError(f"chart {chart}: {err}") from err
        frames.append(rf.with_columns(pl.lit(side).alias("side")))
    if not frames:
        return pl.DataFrame(schema={"key": pl.String, "side": pl.Int64})
    rf = pl.concat(frames, how="diagonal_relaxed").join(launches, on=["side", "kernel_id"], how="inner")
    rates, peaks = [c for c in _RATES if c in rf.columns], [c for c in _PEAKS if c in rf.columns]
    t = pl.col("duration_ns")

    def over_time(c: str) -> pl.Expr:  # a rate over the launches' time (those that have it)
        has = pl.col(c).is_not_null() & t.is_not_null()
        return ((pl.col(c) * t).filter(has).sum() / t.filter(has).sum()).alias(c)

    flop_by = rf.group_by("key", "side", "precision").agg(pl.col("flop").sum()).sort("flop", descending=True, nulls_last=True)
    time_by = rf.group_by("key", "side", "bound").agg(t.sum()).sort("duration_ns", descending=True, nulls_last=True)
    pts = rf.group_by("key", "side").agg(
        pl.col("name").first(), pl.col("how").first(), pl.len().alias("launches"), t.sum(), pl.col("flop").sum(),
        pl.col("dram_bytes").sum(), over_time("roof_pct"), *(over_time(c) for c in rates),
        *(pl.col(c).max() for c in peaks),
    ).join(flop_by.filter(pl.col("precision").is_not_null()).unique(["key", "side"], keep="first", maintain_order=True)
           .select("key", "side", "precision"), on=["key", "side"], how="left") \
     .join(time_by.filter(pl.col("bound").is_not_null()).unique(["key", "side"], keep="first", maintain_order=True)
           .select("key", "side", "bound"), on=["key", "side"], how="left")
    pts = pts.with_columns(
        pl.when(t > 0).then(pl.col("flop") / t * 1e9).alias("flops_per_s"),
        pl.when(pl.col("dram_bytes") > 0).then(pl.col("flop") / pl.col("dram_bytes")).alias("ai_dram"),
    ).filter((pl.col("flops_per_s") > 0) & (pl.col("ai_dram") > 0))
    for side in sorted(set(rf["side"])):  # (no point at all for want of metrics: said, as roofline says it)
        if not pts.filter(pl.col("side") == side).height and (lacks := _point_lacks(rf.filter(pl.col("side") == side))):
            raise QueryError(f"chart {chart}: {sides[side].label}: nothing to plot; {lacks}")
    return pts


def diff_roofline(df: pl.DataFrame) -> alt.LayerChart:
    """The roofline of two ncu runs compared: each kernel's point in the base run (hollow) and
    in the new one (filled), joined by a line, coloured by the verdict of its duration."""
    _need(df, "diff-roofline", "diff", ["key", "side", "run", "verdict", "ai_dram", "flops_per_s", "peak_dram_bytes_per_s"])
    pts = df
    roof, data = _roof_points(pts, "diff-roofline")
    xs, ys = roof.xs, roof.ys
    runs = pts.sort("side")["run"].unique(maintain_order=True).to_list()
    colours = _roof_colours()
    present = [v for v in colours if v in set(pts["verdict"])]
    colour = alt.Color("verdict:N", title="verdict of its duration", scale=alt.Scale(
        domain=present, range=[colours[v] for v in present]))
    enc = {"x": alt.X("ai_dram:Q", scale=xs), "y": alt.Y("flops_per_s:Q", scale=ys), "color": colour,
           "tooltip": _roof_tooltip(alt.Tooltip("verdict:N"))}
    lines = alt.Chart(_data(data)).mark_line(strokeWidth=2, opacity=0.7).encode(
        detail="key:N", order="side:Q", **enc)
    hollow = alt.Chart(_data([d for d in data if d["side"] == 0])).mark_point(
        filled=False, size=130, strokeWidth=2).encode(**enc)
    filled = alt.Chart(_data([d for d in data if d["side"] == 1])).mark_point(
        filled=True, size=130, opacity=0.95, stroke="black", strokeWidth=0.8).encode(**enc)
    layers = [*roof.layers, lines, hollow, filled]
    # a kernel's label at its new point (at its base point where the new run lacks it)
    shown = list({d["key"]: d for d in data}.values())
    layers += _roof_labels(shown, roof, avoid=[d for d in data if d not in shown])
    one_side = sorted({d["key"] for d in data} - {d["key"] for d in data if d["side"] == 0}
                      | ({d["key"] for d in data} - {d["key"] for d in data if d["side"] == 1}))
    subtitle = [f"hollow: {runs[0]}; filled: {runs[-1]}" if len(runs) > 1 else f"{runs[0]} alone has points",
                "a kernel's launches together: their FLOP over their DRAM bytes and over their time; "
                "the line joins its two points",
                "colour: the verdict of its median launch's duration (tracekit diff --by ncu); ceilings at the "
                "highest measured clocks"]
    if one_side:
        subtitle.append(f"a point in one run only ({len(one_side)}): added, removed, or no floating-point work or no DRAM "
                        "byte measured in the other")
    subtitle += _by_launch_order(data, "each run")
    return alt.layer(*layers).properties(width=WIDTH, height=HEIGHT,
                                         title=alt.Title("Roofline compared", subtitle=subtitle))


def _roof_points(df: pl.DataFrame, chart: str, *more: pl.Expr) -> tuple[_Roof, list[dict]]:
    """The frame of a roofline of runs compared and its points' rows (the columns the tooltip
    shows, ``more``, and each kernel's short ``label``); nothing to plot is an error."""
    if df.is_empty():
        raise QueryError(f"chart {chart}: nothing to plot; no kernel compared does floating-point work, or the "
                         "reports lack its metrics (re-profile with --set full)")
    from .diff import short_keys

    short = short_keys(df["key"].unique(maintain_order=True).to_list(), 40)
    data = df.select(
        "key", "name", "how", "side", "run", "verdict", "launches", (pl.col("duration_ns") / 1000).alias("duration_us"),
        "ai_dram", "flops_per_s", "roof_pct", "bound", "precision", "delta_pct", *more,
    ).with_columns(pl.col("key").replace_strict(short, return_dtype=pl.String).alias("label")).to_dicts()
    for d in data:
        d["delta_pct_said"] = _signed(d["delta_pct"])
    return _roof(df, chart=f"chart {chart}"), data


def _roof_tooltip(verdict: alt.Tooltip) -> list[alt.Tooltip]:
    """The tooltip of a point of a roofline of runs compared, its ``verdict`` as titled there."""
    return [alt.Tooltip("key:N", title="kernel"), alt.Tooltip("run:N"), alt.Tooltip("name:N", title="its name here"),
            alt.Tooltip("how:N", title="matched"), alt.Tooltip("launches:Q"),
            alt.Tooltip("duration_us:Q", title="time [µs]", format=",.1f"),
            alt.Tooltip("ai_dram:Q", title="AI DRAM [FLOP/B]", format=".3~g"),
            alt.Tooltip("flops_per_s:Q", title="FLOP/s", format=".3~s"),
            alt.Tooltip("roof_pct:Q", title="% of roof", format=".1f"), alt.Tooltip("precision:N"),
            alt.Tooltip("bound:N"), verdict,
            alt.Tooltip("delta_pct_said:N", title="median duration change [%]")]


def _by_launch_order(data: list[dict], where: str) -> list[str]:
    """The subtitle line of the kernels matched by launch order (another name ``where``), if any."""
    by_order = sorted({d["key"] for d in data if (d["how"] or "").startswith("matched by launch order")})
    return [f"matched by launch order, another kernel's name in {where} ({len(by_order)}): the tooltip names each"] \
        if by_order else []


def compare_roofline_data(tk, base: str | None = None, runs: str | None = None, kernel: str | None = None,
                          threshold: float | str = 5.0, limit: int | str = 20, repeats: str | None = None) -> pl.DataFrame:
    """Several ncu runs against one base on one roofline (``tk.compare``'s ncu scope): each
    kernel of the base (its launches grouped by name and NVTX path, keyed as a diff of the base
    with itself keys them) at its point in the base (side 0) and in each run (side i, the i-th
    of ``runs``), a run's launches being those ``tk.diff`` pairs with the base's (by name and
    path, by name, then by launch order); a kernel in runs only is keyed as its run's diff with
    the base keys it (its name, with its NVTX path where the name has several). Per point:
    ``key_points``'s columns; ``run`` (the run's label, as ``compare``'s table names it),
    ``verdict`` and ``delta_pct`` of its median launch's duration against the base (held by the
    repeats' noise where given; the base's own point: none); ``runs``, every run's label in
    order (the base first), those without a point too. The keys with
    floating-point work that ``compare.changed_first`` picks (``limit``: every kernel judged
    changed in any run, then the largest others), those whose name holds ``kernel`` (any
    case) in some run where given."""
    from . import diff as _diff
    from .compare import as_command, labels_given

    refs = [base, *_run_list(runs or "")]
    if base is None or len(refs) < 2:
        raise ParamError("chart compare-roofline: give the ncu runs as -p base=RUN -p runs=RUN,RUN,...")
    threshold, limit = _threshold_and_limit("compare-roofline", threshold, limit)
    # (a sweep is said before it is compared; a file is ingested by the comparison first, resolved after)
    said = {i: _not_a_sweep(as_command("chart compare-roofline", _diff.resolve, tk, ref), "compare-roofline",
                            "several ncu runs") for i, ref in enumerate(refs) if not _diff._is_file(ref)}
    try:  # (the repeats found first: the labels of the runs compared leave theirs out)
        again = tk.repeats_asked(base, refs[1:], "chart compare-roofline", _repeats_given(repeats))
        df = tk.compare(base, refs[1:], by=["ncu"], threshold_pct=threshold, repeats=again or [])
    except TracekitError as err:  # (said as the chart's; a run without an ncu report: diff names it by its scope)
        text = str(err).removeprefix("compare: ")
        if text.startswith("--by ncu: "):
            text = f"{text.removeprefix('--by ncu: ')}; the chart compares ncu runs"
        raise type(err)(f"chart compare-roofline: {text}") from None
    sides = [said[i] if i in said else _not_a_sweep(_diff.resolve(tk, r), "compare-roofline", "several ncu runs")
             for i, r in enumerate(refs)]
    labels = [df["base_run"][0] if df.height else sides[0].label,
              *labels_given(df, len(again or []))]
    return compare_roofline_points(tk, df, sides, labels, threshold, limit, kernel)


def compare_roofline_points(tk, df: pl.DataFrame, sides: list, labels: list[str], threshold: float = 5.0,
                            limit: int = 20, kernel: str | None = None) -> pl.DataFrame:
    """``compare_roofline_data``'s points from a comparison already made (``tk.compare``'s
    long form of ncu runs; its ncu rows of the runs that are not repeats are read): ``sides``
    the base and each run (``tracekit.diff.Side``s), ``labels`` their labels as compare
    names them."""
    from . import diff as _diff
    from .compare import changed_first

    ncu = df.filter((pl.col("scope") == "ncu") & ~pl.col("repeat"))
    repeats = [r for r in df.schema["run"].categories if r not in labels[1:]]
    b = sides[0].run_id
    own = _diff.ncu_launch_keys(tk.con, b, b).filter(pl.col("side") == 0)
    canon = dict(zip(own["kernel_id"], own["key"], strict=True))  # base launch -> its kernel's key
    launches = [own.with_columns(pl.lit("").alias("how"))]
    heads = []
    for i, side in enumerate(sides[1:], start=1):
        pair = _diff.ncu_launch_keys(tk.con, b, side.run_id)
        # a key of this comparison is the base kernel its base launches belong to; one in this run only, its own
        of_base = {k: canon[kid] for k, kid in pair.filter(pl.col("side") == 0).select("key", "kernel_id").iter_rows()}
        to = {k: of_base.get(k, k) for k in pair["key"].unique(maintain_order=True)}
        launches.append(pair.filter(pl.col("side") == 1).with_columns(
            pl.col("key").replace_strict(to, return_dtype=pl.String), pl.lit(i, pl.Int64).alias("side")))
        rows = ncu.filter(pl.col("run") == labels[i]).drop("base_run", "run", "repeat", "noise_pct").rename({"value": "new"})
        heads.append(diff_rows(rows, threshold, 0).with_columns(pl.col("key").replace(to), pl.lit(i, pl.Int64).alias("side")))
    pts = key_points(tk, pl.concat(launches), sides, "compare-roofline")
    if pts.is_empty():
        raise QueryError(f"chart compare-roofline: nothing to plot; no kernel of {', '.join(s.label for s in sides)} "
                         "compared does floating-point work")
    if kernel is not None:
        text = str(kernel).lower()
        named = pts.filter(pl.col("key").str.to_lowercase().str.contains(text, literal=True)
                           | pl.col("name").str.to_lowercase().str.contains(text, literal=True))["key"]
        pts = pts.filter(pl.col("key").is_in(named.implode()))
        if pts.is_empty():
            raise QueryError(f"chart compare-roofline: no kernel of {', '.join(s.label for s in sides)} with "
                             f"floating-point work has {kernel!r} in its name")
    head = pl.concat(heads).filter(pl.col("key").is_in(pts["key"].implode()))
    keys = changed_first(head.select("scope", "key", "metric", "verdict", "note"), limit)["key"].unique(
        maintain_order=True)
    judged = head.select("key", "side", pl.Series("verdict", [_roof_verdict(r) for r in head.iter_rows(named=True)],
                                                  dtype=pl.String), "delta_pct")
    order = {k: i for i, k in enumerate(keys)}
    names = {0: f"base: {labels[0]}", **{i: labels[i] for i in range(1, len(sides))}}
    return pts.filter(pl.col("key").is_in(keys.implode())).join(judged, on=["key", "side"], how="left").with_columns(
        pl.col("side").replace_strict(names, return_dtype=pl.String).alias("run"),
        pl.col("key").replace_strict(order, return_dtype=pl.Int64).alias("_order"),
        pl.lit(float(threshold)).alias("threshold_pct"), pl.lit(", ".join(repeats)).alias("repeats"),
        pl.lit(pl.Series([[names[i] for i in range(len(sides))]], dtype=pl.List(pl.String))).first().alias("runs"),
    ).sort("_order", "side").drop("_order")


def compare_roofline(df: pl.DataFrame) -> alt.LayerChart:
    """The roofline of several ncu runs against one base: each kernel's point in the base
    (hollow) and in each run (filled, a colour per run), a line from its base point to each
    run's, solid where that run's median launch was judged regressed or improved, faded where
    not."""
    _need(df, "compare-roofline", "compare", ["key", "side", "run", "runs", "verdict", "ai_dram", "flops_per_s",
                                             "peak_dram_bytes_per_s"])
    roof, data = _roof_points(df, "compare-roofline", pl.col("verdict").is_in(["regressed", "improved"]).alias("judged"))
    xs, ys = roof.xs, roof.ys
    runs = df["runs"][0].to_list()  # (every run compared, those without a point too)
    colour = alt.Color("run:N", sort=runs, scale=alt.Scale(domain=runs, range=["#333333", *_KERNEL_COLOURS]),
                       legend=alt.Legend(orient="bottom", columns=4, labelLimit=320))
    enc = {"x": alt.X("ai_dram:Q", scale=xs), "y": alt.Y("flops_per_s:Q", scale=ys), "color": colour,
           "tooltip": _roof_tooltip(alt.Tooltip("verdict:N", title="verdict against the base"))}
    base = {d["key"]: d for d in data if d["side"] == 0}
    # a line per (kernel, run): from the base's point to the run's, in the run's colour
    segments = [{**p, "pair": f"{d['side']}|{d['key']}", "end": e} for d in data if d["side"] and d["key"] in base
                for e, p in ((0, {**base[d["key"]], "run": d["run"], "verdict": d["verdict"], "judged": d["judged"],
                                  "delta_pct": d["delta_pct"], "delta_pct_said": d["delta_pct_said"]}), (1, d))]
    opacity = alt.condition("datum.judged", alt.value(0.95), alt.value(0.3))
    lines = alt.Chart(_data(segments)).mark_line(strokeWidth=2).encode(
        detail="pair:N", order="end:Q", opacity=opacity, **enc)
    hollow = alt.Chart(_data(list(base.values()))).mark_point(filled=False, size=130, strokeWidth=2).encode(**enc)
    filled = alt.Chart(_data([d for d in data if d["side"]])).mark_point(
        filled=True, size=110, stroke="black", strokeWidth=0.6).encode(
        opacity=alt.condition("datum.judged", alt.value(0.95), alt.value(0.45)), **enc)
    layers = [*roof.layers, lines, filled, hollow]  # (the base's ring over a run's point where they meet)
    first = {}  # a kernel's label at its base point (at its first run's point where the base lacks it)
    for d in data:
        first.setdefault(d["key"], d)
    shown = list(first.values())
    avoid = [d for d in data if d not in shown]
    changed = {d["key"] for d in data if d["judged"]}  # (a base point is judged changed where a run's is)
    layers += _roof_labels([{**d, "judged": d["key"] in changed} for d in shown], roof, avoid=avoid)
    subtitle = [f"hollow: the base, {runs[0].removeprefix('base: ')}; filled: each run, a colour each; a line from "
                "a kernel's base point to each run's",
                "a kernel's launches together: their FLOP over their DRAM bytes and over their time; the runs' launches "
                "paired with the base's as tracekit diff --by ncu pairs them",
                "solid: that run's median launch duration judged regressed or improved against the base (tracekit "
                "compare --by ncu); faded: not; ceilings at the highest measured clocks"]
    if "repeats" in df.columns and df["repeats"][0]:
        subtitle.append(f"repeats of the base measured the noise ({df['repeats'][0]}): a change no larger than a "
                        "repeat's is not judged")
    alone = sorted({d["key"] for d in data} - set(base))
    if alone:
        subtitle.append(f"in runs only, no point in the base ({len(alone)}): added, or no floating-point work or no DRAM "
                        "byte measured in the base")
    lacking = [f"{run} ({n})" for run in runs[1:] if (n := len(set(base) - {d["key"] for d in data if d["run"] == run}))]
    if lacking:  # (a run's legend entry with no mark, or fewer marks than the base's: said, not left to be noticed)
        subtitle.append(f"the base's kernels with no point in a run: {', '.join(lacking)} (removed, or no "
                        "floating-point work or no DRAM byte measured there)")
    subtitle += _by_launch_order(data, "a run")
    return alt.layer(*layers).properties(width=WIDTH, height=HEIGHT, title=alt.Title(
        f"Roofline: {len(runs) - 1} run{'s' if len(runs) > 2 else ''} against the base", subtitle=subtitle))


#: the ticks of a change's symmetric log axis, % of base: about evenly apart on it (Vega's own
#: crowd where the scale turns logarithmic, "700800" at +700 and +800 %)
_SYMLOG_TICKS = (-100, -50, -20, 0, 20, 50, 100, 200, 500, *(m * 10 ** e for e in range(3, 7) for m in (1, 2, 5)))


def _change_axis(scale) -> alt.Axis:
    """The axis of a change in % of base: on a symmetric log scale, ticks at _SYMLOG_TICKS within
    its domain (labels that still meet are left out); else Vega's."""
    if scale.to_dict().get("type") != "symlog":
        return alt.Axis()
    low, high = scale.to_dict()["domain"]
    return alt.Axis(values=[t for t in _SYMLOG_TICKS if low <= t <= high], labelOverlap="greedy")


def _compare_data(tk, base: str | None = None, runs: str | None = None, by: str | None = None,
                  threshold: float | str = 5.0, limit: int | str = 20, repeats: str | None = None,
                  jobs: bool | str = False) -> pl.DataFrame:
    """The rows of ``tk.compare`` the chart draws: per run, each key's headline metric
    (``diff_rows``), for the ``limit`` keys that come first (changed in any run first, in
    the comparisons' order), with the threshold as a column. ``jobs``: the runs are
    multi-rank jobs (``compare --jobs``: each job's rows, the ranks' sums)."""
    if base is None or runs is None:
        raise ParamError("chart compare: give the runs as -p base=RUN -p runs=RUN,RUN,...")
    threshold, limit = _threshold_and_limit("compare", threshold, limit)
    words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    if not isinstance(jobs, bool):
        if str(jobs).strip().lower() not in words:
            raise ParamError(f"chart compare: jobs={jobs}: give true or false")
        jobs = words[str(jobs).strip().lower()]
    names = _run_list(runs)
    df = tk.compare(base, names, by=by, threshold_pct=threshold, repeats=_repeats_given(repeats), jobs=jobs)
    return compare_rows(df, threshold, limit, jobs, str(base))


def compare_rows(df: pl.DataFrame, threshold: float = 5.0, limit: int = 20, jobs: bool = False,
                 base: str = "the base") -> pl.DataFrame:
    """The rows of a comparison already made (``tk.compare``'s long form) that the compare
    chart draws: per run, each key's headline metric (``diff_rows``), for the ``limit`` keys
    that come first (changed in any run first, in the comparisons' order), with the threshold
    as a column; ``base``: the base's label where the comparison has no row."""
    from .compare import changed_first, runs_of

    heads = [diff_rows(df.filter(pl.col("run") == run).drop("base_run", "run", "repeat", "noise_pct")
                       .rename({"value": "new"}),
                       threshold, 0).with_columns(pl.lit(run).alias("run")) for run in runs_of(df)]
    head = pl.concat(heads) if heads else df.head(0)
    keys = changed_first(head.select("scope", "key", "metric", "verdict", "note"), limit).select(
        "scope", "key", "metric").unique(maintain_order=True)
    return keys.join(head, on=["scope", "key", "metric"], how="left", maintain_order="left").with_columns(
        pl.col("run").cast(pl.Enum(runs_of(df))),  # (the runs' order given, for the chart's)
        pl.lit(df["base_run"][0] if df.height else base).alias("base_run"), pl.lit(jobs).alias("jobs"))


def _in_one_run_only(one_side: pl.DataFrame) -> str:
    """The subtitle line of a comparison chart's keys in one run only, which have no change to
    draw: how many of each verdict (added, removed), a row each."""
    parts = [f"{v} {n}" for v, n in one_side.group_by("verdict").len().sort("verdict").iter_rows()]
    return "not drawn (in one run only): " + ", ".join(parts)


def compare(df: pl.DataFrame) -> alt.LayerChart:
    """Per key, a bar per run: its change against the base (delta %), coloured by run,
    faded where it was not judged a change (within the threshold or the noise, or held)."""
    _need(df, "compare", "compare", ["scope", "key", "metric", "run", "delta_pct", "verdict"])
    d = df.filter(pl.col("delta_pct").is_not_null())
    if d.is_empty():
        return _no_data("Runs against their base")
    from .compare import runs_of
    from .diff import short_keys

    short = short_keys(d, 56)
    runs = runs_of(d)
    jobs = "jobs" in df.columns and bool(df["jobs"][0])  # (compare --jobs's)
    rows = [{"label": f"{r['scope']} · {short[r['key']]}", "key": r["key"], "metric": r["metric"], "run": r["run"],
             "delta_pct": r["delta_pct"], "delta_pct_said": _signed(r["delta_pct"], 2), "verdict": r["verdict"],
             "judged": r["verdict"] in ("regressed", "improved"), "note": r["note"] or ""} for r in d.iter_rows(named=True)]
    order = list(dict.fromkeys(r["label"] for r in rows))
    lim = max(max(abs(r["delta_pct"]) for r in rows) * 1.15, 10.0)
    scale = alt.Scale(domain=[-lim, lim], clamp=True) if lim <= 300 else \
        alt.Scale(type="symlog", constant=100, domain=[max(-100.0, -lim), lim], clamp=True)
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=460))
    bars = alt.Chart(_data(rows)).mark_bar(height={"band": 0.8}).encode(
        y=y, yOffset=alt.YOffset("run:N", sort=runs),
        x=alt.X("delta_pct:Q", title="change [% of base]" + ("" if lim <= 300 else ", symmetric log scale"),
                scale=scale, axis=_change_axis(scale)),
        color=alt.Color("run:N", sort=runs, title="job" if jobs else "run", legend=alt.Legend(orient="bottom")),
        opacity=alt.condition("datum.judged", alt.value(1.0), alt.value(0.3)),
        tooltip=[alt.Tooltip("run:N"), alt.Tooltip("key:N"), alt.Tooltip("metric:N"),
                 alt.Tooltip("delta_pct_said:N", title="delta_pct"), alt.Tooltip("verdict:N"), alt.Tooltip("note:N")])
    zero = alt.Chart(_data([{"x": 0}])).mark_rule(color="#444").encode(x=alt.X("x:Q", scale=scale))
    base = df["base_run"][0] if "base_run" in df.columns and df.height else "the base"
    subtitle = [
        "bar: change of each key's time against the base (kernels, memory ops, GPUs: total; NVTX: kernel "
        "time; functions: sampled CPU time; Python functions: sampled wall time, with callees; ncu: duration; "
        "sweeps: median latency)",
        "solid: judged regressed or improved (tracekit diff's rules); faded: within the threshold or the noise"]
    if jobs:
        subtitle = ["bar: change of each key's time over the ranks the job shares with the base job (their sum)",
                    "solid: judged regressed or improved on some rank (tracekit diff --jobs); faded: on none"]
    # keys in one side only have no change to draw: said, as the diff chart says them
    one_side = df.filter(pl.col("delta_pct").is_null() & pl.col("verdict").is_in(["added", "removed"]))
    if one_side.height:  # (a key's rows: one per run and metric)
        subtitle.append(_in_one_run_only(one_side.unique(["verdict", "key"])) + " (the table lists them)")
    return alt.layer(zero, bars).properties(
        width=WIDTH - 260, height=alt.Step(10 * max(len(runs), 2)),
        title=alt.Title(f"{'Jobs' if jobs else 'Runs'} against {base}", subtitle=subtitle))


# -- multi-rank --------------------------------------------------------------------

#: past this many ranks a rank is a thin band of a fixed-height chart (no value labels,
#: every n-th rank named): a job of 1,000 ranks fits a screen, its outliers stand out by
#: length or colour and the tooltip gives each value
DENSE_RANKS = 48
DENSE_HEIGHT = 1000  # px: a dense chart's height (48 ranks at their step take about as much)


def _rank_axis(ranks: list[str], step: int) -> tuple[alt.Y, Any, str]:
    """The y encoding of one band per rank (field ``r``, in ``ranks``' order), the chart's
    height and what to add to its subtitle: a step of ``step`` px with every rank named,
    or past ``DENSE_RANKS`` ``DENSE_HEIGHT`` px with a rank named every 12 px or more."""
    if len(ranks) <= DENSE_RANKS:
        return alt.Y("r:N", sort=ranks, title=None), alt.Step(step), ""
    every = -(-len(ranks) // (DENSE_HEIGHT // 12))
    axis = alt.Axis(values=ranks[::every], ticks=False, labelFontSize=9)
    named = "" if every == 1 else f", one in {every} named"
    return (alt.Y("r:N", sort=ranks, title=None, axis=axis, scale=alt.Scale(paddingInner=0)), DENSE_HEIGHT,
            f"{len(ranks):,} ranks{named}: hover for the values")


def rank_summary(df: pl.DataFrame) -> alt.FacetChart:
    """Per rank: GPU busy time, kernel time and outermost-NVTX time (ms), and where the job
    communicates through NCCL the exposed NCCL time (a rank waiting for a straggler inside
    the all-reduce has the most), one panel per measure with its own scale (NVTX time dwarfs
    GPU time), from the rank-summary query; the bar label is the rank against the median
    rank in that measure (not past ``DENSE_RANKS``: the tooltip has it)."""
    _need(df, "rank-summary", "rank-summary", ["rank", "kernel_ns", "gpu_busy_ns", "nvtx_ns"])
    if df.is_empty():
        return _no_data("Ranks")
    measures = [("gpu_busy_ns", "GPU busy"), ("kernel_ns", "kernel time"), ("nvtx_ns", "outermost NVTX ranges")]
    nccl = "exposed_nccl_ns" in df.columns and df.get_column("exposed_nccl_ns").is_not_null().any()
    if nccl:
        measures.append(("exposed_nccl_ns", "exposed NCCL"))
    rows = []
    for col, label in measures:
        values = [v for v in df.get_column(col).to_list() if v is not None]
        med = statistics.median(values) if values else None
        for r in df.iter_rows(named=True):
            if r[col] is not None:
                vs = 100.0 * (r[col] - med) / med if med else None
                rows.append({"r": f"rank {r['rank']}", "measure": label, "ms": r[col] / 1e6, "host": r.get("host"),
                             "vs_median": vs, "vs_median_said": _signed(vs)})
    order = [f"rank {r}" for r in df.get_column("rank").to_list()]
    y, height, dense = _rank_axis(order, 22)
    tip = [alt.Tooltip("r:N", title="rank"), alt.Tooltip("host:N"), alt.Tooltip("measure:N"),
           alt.Tooltip("ms:Q", title="time [ms]", format=",.3f"),
           alt.Tooltip("vs_median_said:N", title="vs the median rank [%]")]
    base = alt.Chart()
    bars = base.mark_bar().encode(
        y=y, x=alt.X("ms:Q", title="time [ms]"), tooltip=tip,
        color=alt.Color("measure:N", sort=[m[1] for m in measures], scale=alt.Scale(scheme=PALETTE), legend=None))
    layers = [bars]
    if not dense:
        layers.append(_end_labels(base, y=y, x="ms:Q", text="vs_median_said:N"))
    label = dense or "label: % against the median rank"
    return alt.layer(*layers, data=_data(rows)).properties(width=260, height=height).facet(
        column=alt.Column("measure:N", sort=[m[1] for m in measures], title=None)
    ).resolve_scale(x="independent").properties(
        title=alt.Title("Time per rank", subtitle="GPU busy (union of the rank's GPU ops), kernel time, outermost "
                        f"NVTX ranges{', NCCL kernels with no compute beside' if nccl else ''}; {label}"))


#: the characters of a stragglers row's label (its axis shows 320 px of it)
STRAGGLER_LABEL_CHARS = 52


def _path_and_instance(label: str, width: int) -> str:
    """``path #N`` in ``width`` columns: the path cut as ``cut_text`` cuts one, the ``#N`` kept."""
    path, _, n = label.rpartition(" #")
    return cut_text(path, width - text_width(f" #{n}")) + f" #{n}"


def stragglers(df: pl.DataFrame) -> alt.LayerChart:
    """Range instances with the most skew across ranks, each as % of its median rank's
    duration (a warm-up of seconds and a step of milliseconds on one axis): a line from
    the fastest to the slowest rank, a tick at the median (100 %), the slowest rank
    labelled."""
    _need(df, "stragglers", "stragglers", ["path", "instance", "min_ns", "med_ns", "max_ns", "slowest_rank",
                                             "slowest_lag_pct"])
    if df.is_empty():
        return _no_data("Stragglers")
    med = pl.when(pl.col("med_ns") > 0).then(pl.col("med_ns")).otherwise(None)
    # (a long path is cut before its instance, which tells a row from the path's others)
    full = [f"{path} #{n}" for path, n in zip(df["path"], df["instance"], strict=True)]
    d = df.with_columns(
        pl.Series("label", distinct_labels(full, STRAGGLER_LABEL_CHARS, _path_and_instance), dtype=pl.Utf8),
        pl.Series("full", full, dtype=pl.Utf8),
        (pl.col("min_ns") / 1e6).alias("min_ms"), (pl.col("med_ns") / 1e6).alias("med_ms"),
        (pl.col("max_ns") / 1e6).alias("max_ms"),
        (100.0 * pl.col("min_ns") / med).alias("min_pct"), (100.0 * pl.col("max_ns") / med).alias("max_pct"),
        pl.lit(100.0).alias("med_pct"),
        pl.format("rank {}", pl.col("slowest_rank")).alias("slowest"),
    )
    data = [{**r, "slowest_lag_said": _signed(r["slowest_lag_pct"])} for r in d.select(
        "label", "full", "min_ms", "med_ms", "max_ms", "min_pct", "med_pct", "max_pct", "slowest",
        "slowest_lag_pct").to_dicts()]
    y = alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=320))
    tip = [alt.Tooltip("full:N", title="NVTX path #instance"), alt.Tooltip("min_ms:Q", title="fastest [ms]", format=",.3f"),
           alt.Tooltip("med_ms:Q", title="median [ms]", format=",.3f"),
           alt.Tooltip("max_ms:Q", title="slowest [ms]", format=",.3f"), alt.Tooltip("slowest:N", title="slowest"),
           alt.Tooltip("slowest_lag_said:N", title="slowest vs median [%]")]
    base = alt.Chart(_data(data))
    rule = base.mark_rule(color="#888", strokeWidth=2).encode(
        y=y, x=alt.X("min_pct:Q", title="duration across ranks [% of the median rank's]"), x2="max_pct:Q", tooltip=tip)
    med_tick = base.mark_tick(color="#4c78a8", thickness=2, size=14).encode(y=y, x="med_pct:Q", tooltip=tip)
    slow = base.mark_point(color="#e45756", filled=True, size=60).encode(y=y, x="max_pct:Q", tooltip=tip)
    text = base.mark_text(align="left", dx=6, fontSize=10, color="#e45756").encode(y=y, x="max_pct:Q", text="slowest:N")
    return alt.layer(rule, med_tick, slow, text).properties(
        width=WIDTH - 300, height=alt.Step(18),
        title=alt.Title("Stragglers", subtitle="per range instance across ranks: fastest to slowest as % of the "
                        "median, tick = median, label = slowest rank"))


def rank_heatmap(df: pl.DataFrame) -> alt.LayerChart | alt.Chart:
    """Rank x NVTX path: colour = the rank's total time in the path's ranges against the median
    rank's (diverging around 0), text = its total in ms (not past ``DENSE_RANKS``), from the
    rank-ranges query."""
    _need(df, "rank-heatmap", "rank-ranges", ["path", "rank", "total_ns", "vs_median_pct"])
    if df.is_empty():
        return _no_data("Ranks x NVTX ranges")
    d = df.with_columns((pl.col("total_ns") / 1e6).alias("total_ms"), pl.format("rank {}", pl.col("rank")).alias("r"))
    data = [{**r, "vs_median_said": _signed(r["vs_median_pct"])}
            for r in d.select("path", "r", "rank", "total_ms", "vs_median_pct", "instances").to_dicts()]
    ranks = [f"rank {r}" for r in sorted(set(df.get_column("rank").to_list()))]
    lim = max(5.0, float(df.get_column("vs_median_pct").abs().max() or 0.0))
    y, height, dense = _rank_axis(ranks, 28)
    # a dense chart names the paths on top: its bottom is a screen away
    x_axis = alt.Axis(labelAngle=-40, labelLimit=200, orient="top" if dense else "bottom")
    base = alt.Chart(_data(data)).encode(x=alt.X("path:N", title="NVTX path", axis=x_axis), y=y)
    cells = base.mark_rect().encode(
        color=alt.Color("vs_median_pct:Q", title="vs median rank [%]",
                        scale=alt.Scale(scheme="redblue", reverse=True, domain=[-lim, lim])),
        tooltip=[alt.Tooltip("r:N", title="rank"), alt.Tooltip("path:N", title="NVTX path"),
                 alt.Tooltip("total_ms:Q", title="total [ms]", format=",.3f"), alt.Tooltip("instances:Q"),
                 alt.Tooltip("vs_median_said:N", title="vs median rank [%]")],
    )
    if dense:
        return cells.properties(width=alt.Step(90), height=height, title=alt.Title(
            "Time per rank and NVTX path", subtitle=f"colour: total time against the median rank; {dense}"))
    # (dark text on the pale middle of the scale, white on its dark ends)
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text("total_ms:Q", format=",.1f"),
        color=alt.condition(f"abs(datum.vs_median_pct) > {0.6 * lim!r}", alt.value("white"), alt.value("#222")))
    return alt.layer(cells, text).properties(
        width=alt.Step(90), height=height,
        title=alt.Title("Time per rank and NVTX path", subtitle="cell: total ms; colour: against the median rank"))


def _job_diff_data(tk, base: str | None = None, new: str | None = None, by: str | None = None,
                   threshold: float | str = 5.0, limit: int | str = 20, repeats: str | None = None) -> pl.DataFrame:
    """``job_diff.rank_changes``: per rank, the change of the keys that moved most in the job;
    ``repeats`` (comma-separated) of the base job measure each rank's noise (``diff --jobs
    --repeat``)."""
    from .job_diff import changes_by_rank, rank_changes

    if base is None or new is None:
        raise ParamError("chart job-diff: give the jobs to compare as -p base=RUN -p new=RUN (any rank's run, "
                         "or the job)")
    threshold, limit = _threshold_and_limit("job-diff", threshold, limit)
    again = _repeats_given(repeats)  # (a job's repeats are given: diff --jobs takes none from the store)
    if not again:
        return rank_changes(tk, base, new, by=by, threshold_pct=threshold, limit=limit)
    from .compare import as_command, jobs_with_repeats

    long = as_command("chart job-diff", jobs_with_repeats, tk, base, new, again, by, threshold)[1]
    return changes_by_rank(long, limit)


def job_diff(df: pl.DataFrame) -> alt.LayerChart | alt.Chart:
    """Rank x key: colour = the rank's change in the key's time (diverging around 0, red =
    more), a dot where diff's rules judged that rank's change (regressed or improved), grey
    where the key is in one job only; keys in the job's order (its changes first)."""
    _need(df, "job-diff", "diff --jobs", ["order", "scope", "key", "rank", "delta_pct", "verdict", "job_verdict"])
    if df.is_empty():
        return _no_data("Job against job, per rank")
    from .diff import short_keys

    short = short_keys(df, 34)  # (with its scope, within the axis's labelLimit: 260 px)
    rows = [{"label": f"{r['scope']} · {short[r['key']]}", "key": r["key"], "metric": r["metric"],
             "r": f"rank {r['rank']}", "delta_pct": r["delta_pct"], "delta_pct_said": _signed(r["delta_pct"]),
             "verdict": r["verdict"],
             "judged": r["verdict"] in ("regressed", "improved"), "one_side": r["verdict"] in ("added", "removed"),
             "job": r["job_verdict"], "note": r["note"] or "", "base": r["base"], "new": r["new"]}
            for r in df.sort("order", "rank").iter_rows(named=True)]
    keys = list(dict.fromkeys(r["label"] for r in rows))
    ranks = [f"rank {k}" for k in sorted(set(df["rank"].to_list()))]
    lim = max([5.0, *(abs(r["delta_pct"]) for r in rows if r["delta_pct"] is not None and not r["one_side"])])
    y, height, dense = _rank_axis(ranks, 22)
    x = alt.X("label:N", sort=keys, title=None, axis=alt.Axis(labelAngle=-40, labelLimit=260,
                                                               orient="top" if dense else "bottom"))
    tooltip = [alt.Tooltip("r:N", title="rank"), alt.Tooltip("key:N"), alt.Tooltip("metric:N"),
               alt.Tooltip("base:Q", format=",.0f"), alt.Tooltip("new:Q", format=",.0f"),
               alt.Tooltip("delta_pct_said:N", title="change [%]"), alt.Tooltip("verdict:N"),
               alt.Tooltip("job:N", title="the job's verdict"), alt.Tooltip("note:N")]
    chart = alt.Chart(_data(rows)).encode(x=x, y=y)
    cells = chart.transform_filter("!datum.one_side").mark_rect().encode(
        color=alt.Color("delta_pct:Q", title="change [%]",
                        scale=alt.Scale(scheme="redblue", reverse=True, domain=[-lim, lim], clamp=True)),
        tooltip=tooltip)
    one_side = chart.transform_filter("datum.one_side").mark_rect(color="#bdbdbd").encode(tooltip=tooltip)
    dots = chart.transform_filter("datum.judged").mark_point(filled=True, color="#222", size=18 if dense else 30)
    n_keys = len(keys)
    return alt.layer(cells, one_side, dots).properties(
        width=alt.Step(34 if n_keys > 12 else 60), height=height,
        title=alt.Title("Job against job, per rank", subtitle=[
            "colour: each rank's change in the key's time (kernels, memory ops, API: total; NVTX: kernel time; "
            "GPUs: busy), red = more; grey: in one job only",
            "dot: judged regressed or improved on that rank (tracekit diff's rules)" + (f"; {dense}" if dense else "")]))


def bench_speedups(df: pl.DataFrame) -> alt.LayerChart:
    """A ``tracekit bench`` run's speedup of each variant against its baseline, per
    configuration (bench-results): a dot at the ratio of the medians with its 95 % bootstrap
    interval, a rule at 1 (the baseline), on a log scale; a variant whose output did not
    match the reference is drawn red, one that failed is left out (named in the subtitle)."""
    _need(df, "bench-results", "bench-results", ["config", "variant", "speedup_vs_baseline", "speedup_low",
                                                  "speedup_high", "baseline", "matches_reference"])
    d = df.filter(pl.col("speedup_vs_baseline").is_not_null() & (pl.col("variant") != pl.col("baseline")))
    failed = df.filter(pl.col("speedup_vs_baseline").is_null())
    if d.is_empty():
        return _no_data("Speedup against the baseline", ["no variant other than the baseline was timed"])
    runs = "run_id" in d.columns and d["run_id"].n_unique() > 1
    d = d.with_columns(
        pl.format("{} · {}", pl.col("config"), pl.col("variant")).alias("label") if not runs else
        pl.format("run {} · {} · {}", pl.col("run_id"), pl.col("config"), pl.col("variant")).alias("label"),
        pl.when(pl.col("matches_reference") == False).then(pl.lit("does not match the reference"))  # noqa: E712
        .otherwise(pl.lit("matches or not checked")).alias("check"))
    order = d["label"].to_list()
    data = d.select("label", "config", "variant", "baseline", "speedup_vs_baseline", "speedup_low", "speedup_high",
                    "median_ms", "check").to_dicts()
    lo = min(min(r["speedup_low"] or r["speedup_vs_baseline"] for r in data), 1.0)
    hi = max(max(r["speedup_high"] or r["speedup_vs_baseline"] for r in data), 1.0)
    scale = alt.Scale(type="log", domain=[lo / 1.15, hi * 1.15], nice=False)
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=420))
    tooltip = [alt.Tooltip("config:N"), alt.Tooltip("variant:N"), alt.Tooltip("baseline:N"),
               alt.Tooltip("speedup_vs_baseline:Q", title="speedup", format=".3f"),
               alt.Tooltip("speedup_low:Q", title="95% low", format=".3f"),
               alt.Tooltip("speedup_high:Q", title="95% high", format=".3f"),
               alt.Tooltip("median_ms:Q", title="median [ms]", format=".4f"), alt.Tooltip("check:N")]
    base = alt.Chart(_data(data)).encode(y=y, tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("speedup_low:Q", scale=scale), x2="speedup_high:Q")
    color = alt.Color("check:N", title=None, scale=alt.Scale(domain=["matches or not checked",
                                                                    "does not match the reference"],
                                                            range=["#4c78a8", "#e45756"]))
    dots = base.mark_point(filled=True, size=70).encode(
        x=alt.X("speedup_vs_baseline:Q", scale=scale, title="speedup against the baseline (x, log scale)"),
        color=color)
    one = alt.Chart(_data([{"x": 1.0}])).mark_rule(color="#888", strokeDash=[4, 3]).encode(x="x:Q")
    text = base.mark_text(align="left", dx=8, fontSize=11).encode(
        x="speedup_high:Q", text=alt.Text("speedup_vs_baseline:Q", format=".2f"))
    baselines = ", ".join(sorted(set(d["baseline"].to_list())))
    subtitle = [f"the baseline's median over the variant's, same process (baseline: {baselines}); "
                "line: 95 % bootstrap interval"]
    if failed.height:
        subtitle.append("not timed: " + ", ".join(f"{c} · {v}" for c, v in failed.select("config", "variant").rows()))
    return alt.layer(bars, dots, text, one).properties(
        width=WIDTH - 250, height=alt.Step(22),
        title=alt.Title("Speedup against the baseline", subtitle=subtitle))


CHARTS: dict[str, ChartSpec] = {
    "roofline": ChartSpec("roofline", roofline, {"limit": 0}, "ncu roofline, one point per launch"),
    "hierarchical-roofline": ChartSpec("hierarchical-roofline", hierarchical_roofline, {"limit": 0},
                                       "ncu roofline at L1, L2 and DRAM, each launch in its precision or in one "
                                       "(-p precision=)"),
    "occupancy": ChartSpec(
        "occupancy", occupancy, {"limit": 0}, "ncu theoretical vs achieved occupancy"
    ),
    "sweep-roofline": ChartSpec(None, roofline, {}, "ncu roofline of each point of a sweep: a colour per point, a "
                                "line per kernel family from point to point (-p sweep=, -p kernel=)",
                                data=sweep_roofline_data,
                                source="queries sweep-ncu and roofline, needs a sweep captured under ncu"),
    "diff-roofline": ChartSpec(None, diff_roofline, {}, "ncu roofline of two runs compared: each kernel's point in "
                               "the base and the new run, joined, coloured by its verdict (-p base=A -p new=B "
                               "[-p kernel=TEXT] [-p limit=N])", data=diff_roofline_data,
                               source="tracekit diff's ncu scope and query roofline, needs two ncu runs"),
    "compare-roofline": ChartSpec(None, compare_roofline, {}, "ncu roofline of several runs against one base: "
                                  "each kernel's point in the base and in each run, a line from the base's to each "
                                  "(-p base=A -p runs=B,C [-p kernel=TEXT] [-p limit=N] [-p repeats=R])",
                                  data=compare_roofline_data,
                                  source="tracekit compare's ncu scope and query roofline, needs ncu runs"),
    "warp-stalls": ChartSpec("warp-stalls", warp_stalls, {"limit": 0}, "ncu warp cycles per issued instruction by stall reason"),
    "ncu-source": ChartSpec("ncu-source", source_hot_spots, {"limit": MAX_BARS},
                            "ncu warp stall samples per source line, by the largest stall reason"),
    "top-kernels": ChartSpec(
        "top-kernels", top_kernels, {"limit": 20}, "nsys kernels by total time"
    ),
    "kernel-headroom": ChartSpec("kernel-headroom", kernel_headroom, {"limit": 20},
                                 "nsys kernel time beside ncu's speed of light: what tuning can save (-p ncu=RUN)"),
    "kernel-durations": ChartSpec(
        "top-kernels", kernel_durations, {"limit": 20}, "nsys each kernel's launch durations: min, median-p95, p99, max"
    ),
    "api-summary": ChartSpec("api-summary", api_summary, {"limit": 20}, "nsys host time in CUDA API calls"),
    "cpu-hotspots": ChartSpec("cpu-hotspots", cpu_hotspots, {"limit": 20}, "nsys CPU time by function (sampled)"),
    "gpu-memory": ChartSpec("gpu-memory-timeline", gpu_memory, {"limit": 0}, "nsys GPU memory live over time by kind "
                                                                             "(--cuda-memory-usage; kind=)"),
    "cpu-flame": ChartSpec("cpu-stacks", cpu_flame, {"limit": 0}, "nsys sampled CPU call stacks as a flame graph "
                                                                    "(callers on top; thread=, range=)"),
    "python-flame": ChartSpec("python-stacks", python_flame, {"limit": 0}, "nsys sampled Python stacks as a flame "
                                                                          "graph (callers on top; thread=, range=)"),
    "nvtx-timeline": ChartSpec(
        "nvtx-ranges", nvtx_timeline, {"limit": 2000}, "nsys NVTX ranges over time"
    ),
    "timeline": ChartSpec(None, timeline, {}, "nsys NVTX ranges and GPU work per stream of one request or window "
                          "(-p nvtx=NAME -p instance=N, or -p from_ns=A -p to_ns=B; -p ranks=all: the run's job)",
                          data=timeline_data,
                          source="queries nvtx-ranges and gpu-trace with whole CUDA graph launches, needs an nsys run"),
    "diff-timeline": ChartSpec(None, timeline, {}, "nsys two runs' requests on one time axis, the base's lanes "
                               "above the new run's, each from its start (-p base=A -p new=B [-p nvtx=NAME "
                               "[-p instance=N]]; default: the base's typical request)", data=diff_timeline_data,
                               source="queries nvtx-ranges and gpu-trace of each run, needs two nsys runs"),
    "compare-timeline": ChartSpec(None, timeline, {}, "nsys several runs' requests on one time axis, the base's "
                                  "lanes first, each run's named by its sweep point or id (-p base=A -p runs=B,C "
                                  "[-p nvtx=NAME [-p instance=N]])", data=compare_timeline_data,
                                  source="queries nvtx-ranges and gpu-trace of each run, needs nsys runs"),
    "rank-summary": ChartSpec("rank-summary", rank_summary, {"limit": 0}, "multi-rank: time per rank"),
    "stragglers": ChartSpec("stragglers", stragglers, {"limit": 20}, "multi-rank: range instances by skew"),
    "rank-heatmap": ChartSpec("rank-ranges", rank_heatmap, {"limit": 0}, "multi-rank: time per rank and NVTX path"),
    "sweep-latency": ChartSpec(
        "sweep-latency", sweep_latency, {"limit": 0}, "latency across a bs x nc sweep"
    ),
    "sweep-points": ChartSpec(
        "sweep-points", sweep_points, {}, "GPU kernel time per point of a sweep of any grid (-p name=: one kernel)"
    ),
    "sweep-heatmap": ChartSpec(
        "sweep-latency", sweep_heatmap, {"limit": 0}, "median latency over the bs x nc grid"
    ),
    "kernels-by-nvtx": ChartSpec(
        "kernels-by-nvtx", kernels_by_nvtx, {"limit": 20}, "nsys kernel time per NVTX path"
    ),
    "diff": ChartSpec(None, diff, {}, "largest changes between two runs (-p base=A -p new=B [-p repeats=R])",
                      data=_diff_data, source="tracekit diff's comparison, needs two runs or two sweeps"),
    "job-diff": ChartSpec(None, job_diff, {}, "multi-rank: a job against a job, each rank's change per key "
                          "(-p base=A -p new=B: any rank's run, or the job; [-p repeats=R])", data=_job_diff_data,
                          source="tracekit diff --jobs's comparison, needs two multi-rank jobs"),
    "bench-results": ChartSpec("bench-results", bench_speedups, {"limit": 0},
                               "tracekit bench: each variant's speedup against the baseline with its 95% interval"),
    "compare": ChartSpec(None, compare, {}, "several runs against one base (-p base=A -p runs=B,C; "
                         "-p jobs=true: multi-rank jobs, as compare --jobs)",
                         data=_compare_data, source="tracekit compare's comparison, needs two runs or two sweeps"),
}


def chart(tk, name: str, /, run: str | int | None = None, **params: Any) -> alt.TopLevelMixin:
    """Run the chart's named query (``run`` and ``params`` bound), or its ``data`` function,
    and build the Altair chart."""
    spec = CHARTS.get(name)
    if spec is None:
        raise QueryError(unknown_name("chart", "charts", name, list(CHARTS), "tracekit charts"))
    declared = [p for p in inspect.signature(spec.data).parameters if p != "tk"] if spec.data is not None else []
    if params.get("repeats") == [] and "repeats" not in declared:  # (chart --no-repeats)
        judged = sorted(n for n, s in CHARTS.items() if s.data is not None
                        and "repeats" in inspect.signature(s.data).parameters)
        raise ParamError(f"chart {name}: --no-repeats: the chart judges no comparison by repeats' noise (those "
                         f"that do: {', '.join(judged)})")
    if spec.data is not None:
        if run is not None and "run" not in declared:
            given = "-p base=RUN -p runs=RUN,RUN" if "runs" in declared else "-p base=RUN -p new=RUN"
            raise ParamError(f"chart {name}: give the runs as {given}, not --run")
        known = [p for p in declared if p != "run"]
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ParamError(f"chart {name}: unknown parameter {unknown[0]!r} (declared: {', '.join(known)})")
        if run is not None:
            params["run"] = run
        try:
            data = spec.data(tk, **params)
        except (ParamError, QueryError) as err:  # (diff's --by, given to a chart as -p by=; a scope a run lacks)
            if not str(err).startswith("--by "):
                raise
            raise type(err)(f"chart {name}: by={str(err).removeprefix('--by ')}") from None
        return _with_subtitle(spec.build(data))
    from .registry import get_registry

    q = get_registry().get(spec.query)
    bound = {k: v for k, v in spec.params.items() if k in q.params}
    bound.update(params)
    if run is not None:
        if "run" not in q.params:
            takes = [f"-p {p}=" for p in q.params if p != "limit"]  # (what picks its runs: a sweep's run)
            raise ParamError(f"chart {name}: its query {spec.query} spans runs and takes no --run"
                             + (f"; it takes {', '.join(takes)}" if takes else "")
                             + f" (see `tracekit queries {spec.query}`)")
        bound["run"] = run
    try:
        df = tk.query(spec.query, **bound)
    except QueryError as err:  # a wrong kind of run, no run of its kind: say which chart asked
        if spec.query == name:
            raise
        raise QueryError(f"chart {name}: {err}") from err
    total = get_registry().total(tk, spec.query, df.height, **bound) if df.height else 0
    cut = [f"the first {df.height:,} of the {total:,} rows of query {spec.query} drawn (-p limit=0 for all)"]
    # (a limit that cut the rows is said: a timeline that ends early must not read as the capture's end)
    return _with_subtitle(spec.build(df), *(cut if total > df.height else []))


#: the most characters in a line of a chart's subtitle: Vega does not wrap a title, and a
#: longer line widens the chart past the page (the roofline's 275 characters: 1,616 px, the
#: plot pushed right and the line cut at the page's edge)
SUBTITLE_CHARS = 120


def _with_subtitle(ch: alt.TopLevelMixin, *lines: str) -> alt.TopLevelMixin:
    """``ch`` with ``lines`` added under its title (a title of its own where it had none),
    and its subtitle's lines past ``SUBTITLE_CHARS`` wrapped at a space."""
    title = ch.title
    if title is alt.Undefined or isinstance(title, str):
        if not lines:
            return ch
        d: dict[str, Any] = {"text": "" if title is alt.Undefined else title}
    else:
        d = title.to_dict()
    sub = d.get("subtitle", [])
    had = [sub] if isinstance(sub, str) else list(sub)
    if not lines and all(len(x) <= SUBTITLE_CHARS for x in had):
        return ch
    d["subtitle"] = [w for x in [*had, *lines] for w in _wrapped(x)]
    return ch.properties(title=alt.Title(**d))


def _wrapped(line: str, width: int = SUBTITLE_CHARS) -> list[str]:
    """``line`` in lines of at most ``width`` characters, broken at a space, but not inside a
    short `` · ``-separated part of it (``rank 3 GPU 0 busy 1.2 %`` stays whole on a line) nor
    inside ``rank 3`` in a longer one."""
    glue = "\0"  # (a short part's spaces, and a rank's, which textwrap does not break at)
    parts = [p.replace(" ", glue) if len(p) <= _WHOLE_PART else _RANK_WORDS.sub(f"rank{glue}\\1", p)
             for p in line.split(" · ")]
    return [w.replace(glue, " ") for w in textwrap.wrap(" · ".join(parts), width, break_on_hyphens=False) or [""]]


#: the longest `` · ``-separated part of a subtitle's line kept whole on one of its lines
_WHOLE_PART = 40
#: ``rank 3`` in a longer part, kept on one line
_RANK_WORDS = re.compile(r"\brank (\d+)")


def spec(ch: alt.TopLevelMixin) -> dict:
    """The chart's Vega-Lite spec, not validated against the schema: the charts are this
    module's, and the tests validate each on the real captures (``to_dict()``); validating
    at every drawing made a report's build 6-20 % longer (docs/performance.md). Its
    subtitle's long lines are wrapped (``_with_subtitle``), whoever built it."""
    return _with_subtitle(ch).to_dict(validate=False)


#: the files ``save`` writes, by extension
CHART_FORMATS = (".json", ".html", ".htm", ".png", ".svg")

#: the characters XML 1.0 forbids (the C0 controls but tab, line feed and carriage return), which
#: a kernel name or an NVTX range's text may hold: vl-convert's SVG parser aborts the process
#: on one (a Rust panic), for a PNG too
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_safe(value: Any) -> Any:
    """``value`` (a Vega-Lite spec) with each character XML forbids written as Python escapes
    it (``\\x1b``), as the terminal table shows it; in data given as JSON text (``_data``) too."""
    if isinstance(value, str):
        return _NOT_XML.sub(lambda m: escape_controls(m.group()), value) if _NOT_XML.search(value) else value
    if isinstance(value, dict):
        out = {k: _xml_safe(v) for k, v in value.items()}
        rows = value.get("values")
        if isinstance(rows, str) and "\\u" in rows and (value.get("format") or {}).get("type") == "json":
            out["values"] = json.dumps(_xml_safe(json.loads(rows)), separators=(",", ":"))
        return out
    if isinstance(value, list):
        return [_xml_safe(v) for v in value]
    return value


def save(ch: alt.TopLevelMixin, path: str | Path, store_path: str | Path | None = None) -> Path:
    """Write the chart; the format follows the extension: .html, .png, .svg, .json.
    Written through ``write_output`` (never over the store ``store_path``; no half file).
    The extension and the output are checked before the chart is drawn: a chart that
    cannot be written is not rendered, and leaves nothing behind (the Vega bundle's cache
    is made by the first rendering, ``vega.bundle``)."""
    from .outputs import check_output, output_suffix, write_output

    path = Path(path)
    ext = output_suffix(path, CHART_FORMATS)
    if ext not in CHART_FORMATS:
        raise ParamError(f"{path}: unknown chart format {ext or '(none)'}; use .html, .png, .svg or .json")
    check_output(path, store_path)
    vl = spec(ch)
    if ext == ".json":
        data: str | bytes = json.dumps(vl, indent=2)
    elif ext in (".html", ".htm"):
        from .vega import html_page

        data = html_page(vl, title=f"tracekit · {path.stem}")
    elif ext == ".png":
        import vl_convert as vlc

        data = vlc.vegalite_to_png(_xml_safe(vl), scale=2)
    else:
        import vl_convert as vlc

        data = vlc.vegalite_to_svg(_xml_safe(vl))
    if isinstance(data, bytes):
        return write_output(path, lambda tmp: tmp.write_bytes(data), store_path)
    return write_output(path, lambda tmp: tmp.write_text(data), store_path)
