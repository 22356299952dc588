"""tracekit.ingest.arrow: Arrow arrays from NumPy and back through their buffers, equal to
pyarrow's own conversions; and the commands that use them never import pandas."""

from __future__ import annotations

import contextlib
import importlib.util
import lzma
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import DATA

from tracekit.ingest.arrow import from_numpy, scalar, strings, to_numpy, valid_flags

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64", "float32", "float64", "bool"]


def _values(rng, dtype: str, n: int) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.startswith("float"):
        return rng.normal(size=n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 8, 13, 1000])
def test_from_numpy_equals_pa_array(dtype, n):
    rng = np.random.default_rng(n)
    values = _values(rng, dtype, n)
    for mask in (None, rng.integers(0, 2, n).astype(bool), np.zeros(n, bool), np.ones(n, bool)):
        got = from_numpy(values, mask=mask)
        got.validate(full=True)
        assert got.equals(pa.array(values, mask=mask)), (dtype, n, mask)
    stepped = values[::3]  # not contiguous: copied
    assert from_numpy(stepped).equals(pa.array(stepped))
    if dtype != "bool":  # the other byte order: read in the machine's (pyarrow refuses it)
        swapped = values.astype(values.dtype.newbyteorder("S"))
        assert from_numpy(swapped).equals(pa.array(values))


def test_from_numpy_of_what_it_does_not_build_is_pyarrows():
    assert from_numpy(np.array(["a", "b"], dtype=object)).equals(pa.array(["a", "b"]))
    with pytest.raises(pa.ArrowInvalid):  # (a 0-d array is not a column: refused as pyarrow refuses it)
        from_numpy(np.array(5))


def test_from_numpy_takes_a_masked_array_mask_and_all():
    values = np.ma.MaskedArray([5, 6, 7, 8], mask=[False, True, False, False])
    got = from_numpy(values, mask=np.array([False, False, True, False]))
    assert got.to_pylist() == [5, None, None, 8]
    assert from_numpy(values).to_pylist() == [5, None, 7, 8]
    with pytest.raises(ValueError, match="a mask of 2 values for 4 values"):
        from_numpy(np.arange(4), mask=np.array([True, False]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_numpy_of_slices_chunks_and_nulls(dtype):
    """Offsets into the buffers (a slice), several chunks, nulls filled; booleans from bits."""
    rng = np.random.default_rng(7)
    values = _values(rng, dtype, 203)
    mask = rng.integers(0, 4, 203) == 0
    arr = pa.array(values, mask=mask)
    fill = np.zeros(1, values.dtype)[0]
    for lo, hi in ((0, 203), (1, 202), (9, 10), (17, 17), (3, 140)):
        part = arr.slice(lo, hi - lo)
        want = np.where(mask[lo:hi], fill, values[lo:hi])
        got = to_numpy(part, fill=fill)
        assert got.dtype == values.dtype and np.array_equal(got, want), (lo, hi)
        assert np.array_equal(valid_flags(part), ~mask[lo:hi])
        chunked = pa.chunked_array([part, arr.slice(5, 7), part], arr.type)
        want3 = np.concatenate([want, np.where(mask[5:12], fill, values[5:12]), want])
        assert np.array_equal(to_numpy(chunked, fill=fill), want3)
        assert np.array_equal(valid_flags(chunked), chunked.is_valid().to_numpy(zero_copy_only=False))
        plain = pa.array(values[lo:hi])
        assert np.array_equal(to_numpy(plain), values[lo:hi])
    empty = pa.chunked_array([], arr.type)
    assert to_numpy(empty).dtype == values.dtype and len(to_numpy(empty)) == 0 and len(valid_flags(empty)) == 0
    with pytest.raises(ValueError, match="nulls and no fill"):
        to_numpy(arr)


def test_to_numpy_views_are_read_only_and_fills_fit():
    """A view of Arrow's memory cannot be written (as pyarrow's own view); a fill the
    column's type cannot hold is refused, not wrapped around."""
    source = np.arange(5, dtype=np.int64)
    view = to_numpy(from_numpy(source))
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 9
    assert source[0] == 0
    with_nulls = pa.array(np.array([1, 2], np.int32), mask=np.array([False, True]))
    assert to_numpy(with_nulls, fill=-1).tolist() == [1, -1]
    with pytest.raises(ValueError, match="cannot hold it"):
        to_numpy(with_nulls, fill=2**40)
    with pytest.raises(ValueError, match="cannot hold it"):
        to_numpy(pa.array(np.array([1, 2], np.uint8), mask=np.array([True, False])), fill=-1)
    assert np.isnan(to_numpy(pa.array([1.5, None]), fill=np.nan)[1])


def test_the_numpy_type_of_each_arrow_number_is_pyarrows():
    """Each Arrow integer and float type maps to the NumPy dtype pyarrow gives it (taken
    from its width: pyarrow's own mapping imports pandas before pyarrow 26)."""
    from tracekit.ingest.arrow import _dtype

    for typ in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
                pa.float16(), pa.float32(), pa.float64()):
        assert _dtype(typ) == np.dtype(typ.to_pandas_dtype()), typ
    assert _dtype(pa.bool_()) is None and _dtype(pa.string()) is None and _dtype(pa.timestamp("ns")) is None


def test_to_numpy_of_other_types_is_pyarrows():
    ts = pa.array([1, None, 3], pa.timestamp("ns"))
    assert to_numpy(ts, fill=0).tolist() == ts.fill_null(0).to_numpy(zero_copy_only=False).tolist()
    assert to_numpy(pa.array(["a", "b"])).tolist() == ["a", "b"]


def test_strings_and_scalars_equal_pyarrows():
    for texts in (["", "a", None, "ünïcödé/µs", "x" * 300, None, "日本"], ["plain", "", "ascii"], [None]):
        got = strings(iter(texts))
        got.validate(full=True)
        assert got.equals(pa.array(texts, pa.string())), texts
    assert strings([]).equals(pa.array([], pa.string()))
    for value, typ in ((0, None), (True, None), (2.5, None), ("StartEnd", None), (None, pa.string()), (3, pa.int32())):
        assert scalar(value, typ).equals(pa.scalar(value, typ)), (value, typ)


# -- no pandas --------------------------------------------------------------------------------------

PROBE = """
import sys, tracekit
from tracekit.cli import main
db, dataset, hstu, renamed, ncu, sweep_a, sweep_b, startend, latin1, broken, bench_a, bench_b = sys.argv[1:13]
def cli(*args, code=0):
    try:
        main(["--db", args[0], *args[1:]])
    except SystemExit as e:
        assert (e.code or 0) == code, (args, e.code)
cli(db, "ingest", hstu, renamed, ncu, *sweep_a.split(","), *sweep_b.split(","), startend, latin1)
cli(db, "ingest", broken, code=2)
cli(db, "diff", "1", "2")
cli(db, "diff", sweep_a.split(",")[0], sweep_b.split(",")[0])
cli(db, "diff", bench_a, bench_b)  # (tracekit bench's JSON, ingested first)
cli(dataset, "ingest", hstu, renamed, "--workers", "2")
with tracekit.open(dataset) as tk:
    notes = tk.diff("1", "2")["note"].drop_nulls().to_list()
print(sum("matched by place" in n for n in notes))
print("pandas" in sys.modules)
"""


def _export(source: Path, out: Path, *sql: str) -> Path:
    """The export ``source`` (.xz) decompressed to ``out``, with ``sql`` statements applied."""
    with lzma.open(source) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    with contextlib.closing(sqlite3.connect(out)) as con:
        for stmt in sql:
            con.execute(stmt)
        con.commit()
    return out


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed: nothing to load")
def test_ingest_and_diff_never_import_pandas(tmp_path):
    """pyarrow's conversions import pandas wherever it is installed (0.2-0.5 s a command):
    ingests of every kind (start/end ranges, text that is not UTF-8, a corrupt export's
    error, tracekit bench's JSON among them) and diffs (kernels matched by place; a dataset's names numbered
    apart) go around them."""
    capture = DATA / "hstu_capture_nsys" / "nsys.sqlite.xz"
    hstu = _export(capture, tmp_path / "hstu.sqlite")
    renamed = _export(capture, tmp_path / "renamed.sqlite",  # a kernel under a new name, same places
                      "UPDATE StringIds SET value = value || '_v2' WHERE id = (SELECT demangledName "
                      "FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY count(*) DESC LIMIT 1)")
    latin1 = _export(DATA / "nsys_odd_nvtx" / "export.sqlite.xz", tmp_path / "latin1.sqlite",  # not UTF-8
                     "UPDATE NVTX_EVENTS SET text = CAST(x'72e96e6765' AS TEXT) "
                     "WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS WHERE text IS NOT NULL)")
    broken = _export(capture, tmp_path / "broken.sqlite",  # kernels that end before they start: refused
                     'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 1000 WHERE rowid IN (3, 7)')
    sweeps = [",".join(str(p) for p in sorted((DATA / "sweep_pair" / s / "runs").iterdir())[:2]) for s in "ab"]
    startend = DATA / "nsys_registered_nvtx_domains" / "export.sqlite.xz"  # start/end ranges
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "s.duckdb"), str(tmp_path / "ds"),
                           str(hstu), str(renamed), str(DATA / "ncu_diff_a" / "report.ncu-rep.xz"), *sweeps,
                           str(startend), str(latin1), str(broken),
                           str(DATA / "bench_pair" / "base.json.xz"), str(DATA / "bench_pair" / "slow.json.xz")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    *_, matched, pandas = proc.stdout.strip().splitlines()
    assert int(matched) >= 1  # the place matching ran (and the names numbered apart met)
    assert pandas == "False", proc.stdout[-2000:]
