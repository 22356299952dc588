"""The JSON file ``tracekit bench attention --json FILE`` writes (tracekit.kernels.bench):
per (configuration, variant) its timing statistics, TFLOP/s, speedup against the baseline
and check against the reference, and every timed call's time (``samples_ms``). A run of
kind ``bench``: ``bench_results`` and ``bench_samples`` (schema_bench.sql); the benchmark's
environment (GPU, versions, clocks, timing settings), its settings and the pairs it skipped
go into the run's meta. Each result's summary of its times (``n_rep``, ``median_ms``, …,
``tflops``, ``speedup_vs_baseline``) is what its ``samples_ms`` give (``time_summary``): a
file that says otherwise was edited, and is refused rather than let the table (the stored
median) and the diff (the samples) tell two stories."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa

from ..errors import InputError
from ..jsonfile import load_json
from . import Parsed

KIND = "bench"

#: bench_results' columns -> (the JSON row's key, type)
RESULT_COLUMNS = {
    "config": ("config", pa.string()),
    "variant": ("variant", pa.string()),
    "kind": ("kind", pa.string()),
    "baseline": ("baseline", pa.string()),
    "dtype": ("dtype", pa.string()),
    "device": ("device", pa.string()),
    "batch": ("B", pa.int32()),
    "max_seq_len": ("N", pa.int32()),
    "heads": ("H", pa.int32()),
    "d_qk": ("d_qk", pa.int32()),
    "d_v": ("d_v", pa.int32()),
    "tokens": ("tokens", pa.int64()),
    "calls": ("n_rep", pa.int32()),
    "median_ms": ("median_ms", pa.float64()),
    "mean_ms": ("mean_ms", pa.float64()),
    "std_ms": ("std_ms", pa.float64()),
    "min_ms": ("min_ms", pa.float64()),
    "max_ms": ("max_ms", pa.float64()),
    "p95_ms": ("p95_ms", pa.float64()),
    "p99_ms": ("p99_ms", pa.float64()),
    "host_ms": ("host_ms", pa.float64()),
    "late_calls": ("late_calls", pa.int32()),
    "flops": ("flops", pa.float64()),
    "tflops": ("tflops", pa.float64()),
    "speedup_vs_baseline": ("speedup_vs_baseline", pa.float64()),
    "speedup_low": ("speedup_low", pa.float64()),
    "speedup_high": ("speedup_high", pa.float64()),
    "rel_err": ("rel_err", pa.float64()),
    "max_abs_err": ("max_abs_err", pa.float64()),
    "err_tol": ("err_tol", pa.float64()),
    "matches_reference": ("matches_reference", pa.bool_()),
    "peak_alloc_mb": ("peak_alloc_mb", pa.float64()),
    "peak_reserved_mb": ("peak_reserved_mb", pa.float64()),
    "error": ("error", pa.string()),
    "check_error": ("check_error", pa.string()),
}
#: the file's own keys, as ``bench_attention`` writes them
TOP_KEYS = ("environment", "results")


#: how far a stored summary may stray from the one its samples give (a float's rounding, not a change)
SUMMARY_REL_TOL = 1e-9


def time_summary(times_ms: list[float]) -> dict[str, float | int]:
    """The statistics of a result's per-call times, as ``tracekit bench`` writes them: the
    quantiles interpolate linearly between the sorted times (NumPy's default), ``std_ms``
    is the sample standard deviation (0 for one call)."""
    import statistics

    from ..numbers import quantile

    xs = sorted(times_ms)
    return dict(median_ms=quantile(xs, 0.5), mean_ms=statistics.fmean(xs),
                std_ms=statistics.stdev(xs) if len(xs) > 1 else 0.0, min_ms=xs[0], max_ms=xs[-1],
                p95_ms=quantile(xs, 0.95), p99_ms=quantile(xs, 0.99), n_rep=len(xs))


def _agrees(stored, computed: float) -> bool:
    return stored is None or math.isclose(stored, computed, rel_tol=SUMMARY_REL_TOL, abs_tol=1e-12)


def _check_summaries(results: list[dict], path: Path) -> None:
    """Each result's summary against its samples (module docstring); a median of 0 ms, which
    makes every ratio to it infinite, is no measurement."""
    medians = {}
    for i, row in enumerate(results):
        where = f"{path}: result {i + 1} ({row['variant']} on {row['config']})"
        times = row.get("samples_ms") or []
        if not times:
            continue
        try:
            got = time_summary(times)
        except OverflowError:  # (finite times whose sum or spread a float cannot hold: 1e308 ms)
            raise InputError(f"{where}: samples_ms: times too large to summarise (their sum or spread overflows a "
                             "float); a time is in milliseconds") from None
        for key in sorted(got, key=lambda k: k != "n_rep"):  # (the count first: a cut list changes every figure)
            value = got[key]
            if not _agrees(row.get(key), value):
                raise InputError(f"{where}: {key} {row[key]!r} is not what its {len(times)} samples_ms give "
                                 f"({value!r}): the file was edited; each summary follows from the calls' times")
        if got["median_ms"] <= 0 and row.get("error") is None:
            raise InputError(f"{where}: the median of its {len(times)} timed calls is 0 ms: no time was measured")
        medians[(row["config"], row["variant"])] = got["median_ms"]
        if row.get("flops") is not None and got["median_ms"] > 0 \
                and not _agrees(row.get("tflops"), row["flops"] / (got["median_ms"] * 1e-3) / 1e12):
            raise InputError(f"{where}: tflops {row['tflops']!r} is not its flops over its median time "
                             f"({row['flops'] / (got['median_ms'] * 1e-3) / 1e12!r}): the file was edited; each "
                             "summary follows from the calls' times")
    for i, row in enumerate(results):
        base = medians.get((row["config"], row.get("baseline")))
        own = medians.get((row["config"], row["variant"]))
        if base is not None and own and not _agrees(row.get("speedup_vs_baseline"), base / own):
            raise InputError(f"{path}: result {i + 1} ({row['variant']} on {row['config']}): speedup_vs_baseline "
                             f"{row['speedup_vs_baseline']!r} is not {row['baseline']}'s median time over its own "
                             f"({base / own!r})")


def sniff(path: Path, head: bytes) -> bool:
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return text.startswith(b"{") and b'"environment"' in text[:4096] and b'"rep_ms"' in text


def _value(row: dict, key: str, typ: pa.DataType, where: str):
    """A result's value of ``key`` as ``typ`` (None where absent); another type is an error."""
    v = row.get(key)
    if v is None:
        return None
    if pa.types.is_string(typ):
        if not isinstance(v, str):
            raise InputError(f"{where}: {key} {v!r} is not text")
        return v
    if pa.types.is_boolean(typ):
        if not isinstance(v, bool):
            raise InputError(f"{where}: {key} {v!r} is not true or false")
        return v
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(f"{where}: {key} {v!r} is not a number")
    if pa.types.is_integer(typ):
        top = 2**(typ.bit_width - 1)  # (a signed column's range)
        if not (isinstance(v, int) or (math.isfinite(v) and v == int(v))) or not 0 <= v < top:
            raise InputError(f"{where}: {key} {v!r}: a count is a whole number, 0 or more (below {top:,})")
        return int(v)
    if not math.isfinite(v):
        raise InputError(f"{where}: {key} {v!r} is not a finite number")
    return float(v)


def _table(columns: dict[str, list], types: dict[str, pa.DataType]) -> pa.Table:
    """Python lists as an Arrow table of ``types``, through Polars: pyarrow imports pandas to
    read a Python list (0.2-0.5 s a command), which no ingest does."""
    import polars as pl

    as_polars = {pa.string(): pl.String, pa.int32(): pl.Int32, pa.int64(): pl.Int64, pa.float64(): pl.Float64,
                 pa.bool_(): pl.Boolean}
    df = pl.DataFrame(columns, schema={c: as_polars[t] for c, t in types.items()})
    return df.to_arrow().cast(pa.schema(types))


def read(path: Path) -> Parsed:
    try:
        doc = load_json(path)
    except ValueError as err:
        raise InputError(f"{path}: not valid JSON ({str(err).splitlines()[0]}); a tracekit bench file is the JSON "
                         "`tracekit bench attention --json FILE` writes") from None
    if not isinstance(doc, dict) or any(k not in doc for k in TOP_KEYS):
        raise InputError(f"{path}: a JSON file without {' and '.join(repr(k) for k in TOP_KEYS)}: not a tracekit "
                         "bench file (`tracekit bench attention --json FILE` writes one)")
    results = doc["results"]
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise InputError(f"{path}: 'results' is not a list of objects")
    if not results:
        raise InputError(f"{path}: no result (the benchmark measured nothing)")
    columns: dict[str, list] = {c: [] for c in RESULT_COLUMNS}
    samples: dict[str, list] = {"config": [], "variant": [], "call_idx": [], "ms": []}
    seen: dict[tuple[str, str], int] = {}
    for i, row in enumerate(results):
        where = f"{path}: result {i + 1}"
        for key in ("config", "variant"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise InputError(f"{where}: no {key} (each result names its configuration and variant)")
        pair = (row["config"], row["variant"])
        if pair in seen:
            raise InputError(f"{where}: {pair[1]} on {pair[0]} again (result {seen[pair] + 1}): each pair is one "
                             "result")
        seen[pair] = i
        where = f"{path}: result {i + 1} ({pair[1]} on {pair[0]})"
        for col, (key, typ) in RESULT_COLUMNS.items():
            columns[col].append(_value(row, key, typ, where))
        times = row.get("samples_ms")
        if times is None:
            times = []
        if not isinstance(times, list):
            raise InputError(f"{where}: samples_ms is not a list of times")
        for j, t in enumerate(times):
            if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
                raise InputError(f"{where}: samples_ms[{j}] {t!r}: a time is a finite number, 0 or more")
        if row.get("error") is None and not times:
            raise InputError(f"{where}: neither times (samples_ms) nor an error")
        samples["config"] += [pair[0]] * len(times)
        samples["variant"] += [pair[1]] * len(times)
        samples["call_idx"] += list(range(len(times)))
        samples["ms"] += [float(t) for t in times]
    _check_summaries(results, path)
    sample_types = {"config": pa.string(), "variant": pa.string(), "call_idx": pa.int32(), "ms": pa.float64()}
    tables = {
        "bench_results": _table(columns, {c: t for c, (_, t) in RESULT_COLUMNS.items()}),
        "bench_samples": _table(samples, sample_types),
    }
    env = doc["environment"] if isinstance(doc["environment"], dict) else {}
    yours = {"variant_sources": doc["variant_sources"]} if isinstance(doc.get("variant_sources"), dict) else {}
    meta = {"bench": {**{k: doc.get(k) for k in ("warmup_ms", "rep_ms", "baseline", "dtype", "err_tol", "skipped")},
                      **yours},
            "environment": env, "gpu": env.get("device_name") if isinstance(env.get("device_name"), str) else None}
    return Parsed(kind=KIND, meta=meta, tables=tables)
