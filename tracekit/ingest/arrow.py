"""Arrow arrays from NumPy arrays and back, built from their buffers.

pyarrow's own conversions (``pa.array``, ``Array.to_numpy``, a table of NumPy columns, a
Python number given to a compute function) ask whether a value is a pandas object, and
the first to ask imports pandas wherever it is installed: 0.2-0.5 s of every ingest
command, which never needs it. These helpers make the same arrays from and into their
buffers, for the fixed-width types an ingest converts (integers, floats, booleans);
anything else goes through pyarrow's own conversion.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def _bits(flags: np.ndarray) -> pa.Buffer:
    """A boolean NumPy array as an Arrow bitmap (least significant bit first)."""
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def from_numpy(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """``pa.array(values, mask=mask)`` for a 1-D NumPy array of integers, floats or
    booleans: the values as the array's data buffer (copied only if not contiguous),
    null where ``mask`` is true (or masked, in a masked array)."""
    if isinstance(values, np.ma.MaskedArray):
        hidden = np.ma.getmaskarray(values)
        mask = hidden if mask is None else (np.asarray(mask, dtype=bool) | hidden)
        values = values.data
    values = np.ascontiguousarray(values)
    if values.ndim != 1 or values.dtype.kind not in "iufb":
        return pa.array(values, mask=mask)
    n = len(values)
    data = _bits(values) if values.dtype.kind == "b" else pa.py_buffer(values)
    typ = pa.bool_() if values.dtype.kind == "b" else pa.from_numpy_dtype(values.dtype)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if len(mask) != n:
            raise ValueError(f"a mask of {len(mask)} values for {n} values")
    if mask is None or not mask.any():
        return pa.Array.from_buffers(typ, n, [None, data], null_count=0)
    return pa.Array.from_buffers(typ, n, [_bits(~mask), data], null_count=int(mask.sum()))


def _dtype(typ: pa.DataType) -> np.dtype | None:
    """The NumPy dtype of an Arrow integer or float type (None for any other)."""
    if pa.types.is_integer(typ) or pa.types.is_floating(typ):
        return np.dtype(typ.to_pandas_dtype())
    return None


def to_numpy(col: pa.Array | pa.ChunkedArray, fill=None) -> np.ndarray:
    """``col`` as a NumPy array, with ``fill`` in place of its nulls (a column with nulls
    and no ``fill`` is an error). An integer or float array of one chunk without nulls is
    a view of its data buffer (read-only); booleans are unpacked from their bitmap."""
    typ = col.type
    dtype = _dtype(typ)
    if dtype is None and not pa.types.is_boolean(typ):
        if col.null_count and fill is None:
            raise ValueError(f"a {typ} column with {col.null_count} nulls and no fill")
        return (col if not col.null_count else col.fill_null(fill)).to_numpy(zero_copy_only=False)
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 0:
            return np.empty(0, dtype or bool)
        col = col.chunk(0) if col.num_chunks == 1 else pa.concat_arrays(col.chunks)
    n, offset = len(col), col.offset
    if n == 0:
        return np.empty(0, dtype or bool)
    buffers = col.buffers()
    if dtype is None:  # booleans: one bit a value
        out = np.unpackbits(np.frombuffer(buffers[1], np.uint8), bitorder="little", count=offset + n)[offset:].view(bool)
    else:
        out = np.frombuffer(buffers[1], dtype, count=n, offset=offset * dtype.itemsize)
    if col.null_count:
        if fill is None:
            raise ValueError(f"a {typ} column with {col.null_count} nulls and no fill")
        valid = valid_flags(col)
        out = np.where(valid, out, np.asarray(fill).astype(out.dtype))
    return out


def valid_flags(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Where ``col`` holds a value (True) or a null, as a NumPy boolean array."""
    if isinstance(col, pa.ChunkedArray):
        return np.concatenate([valid_flags(c) for c in col.chunks]) if col.num_chunks else np.empty(0, bool)
    n, offset = len(col), col.offset
    bitmap = col.buffers()[0]
    if col.null_count == 0 or bitmap is None:
        return np.ones(n, bool) if col.null_count == 0 else np.zeros(n, bool)  # (a null type has no bitmap)
    return np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little", count=offset + n)[offset:].view(bool)


def strings(values) -> pa.Array:
    """``pa.array(values, pa.string())`` for a sequence of str (None: null), from the
    UTF-8 bytes and their offsets."""
    values = list(values)
    encoded = [b"" if v is None else v.encode("utf-8") for v in values]
    n = len(encoded)
    lengths = np.fromiter(map(len, encoded), np.int64, count=n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    wide = offsets[-1] > np.iinfo(np.int32).max
    nulls = np.fromiter((v is None for v in values), bool, count=n)
    validity = _bits(~nulls) if nulls.any() else None
    return pa.Array.from_buffers(pa.large_string() if wide else pa.string(), n,
                                 [validity, pa.py_buffer(offsets if wide else offsets.astype(np.int32)),
                                  pa.py_buffer(b"".join(encoded))], null_count=int(nulls.sum()))


def scalar(value, typ: pa.DataType | None = None) -> pa.Scalar:
    """``pa.scalar(value, typ)`` for None (of ``typ``), a str, or a number or bool (its
    NumPy type, cast to ``typ`` if given): a compute function given a Python value
    converts it as ``pa.scalar`` does (see the module's docstring)."""
    if value is None:
        return pa.nulls(1, typ or pa.null())[0]
    arr = strings([value]) if isinstance(value, str) else from_numpy(np.asarray([value]))
    return (arr if typ is None or arr.type == typ else arr.cast(typ))[0]
