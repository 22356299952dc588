"""Arrow arrays from NumPy arrays and back, built from their buffers.

pyarrow's own conversions (``pa.array``, ``Array.to_numpy``, a table of NumPy columns, a
Python number given to a compute function) ask whether a value is a pandas object, and
the first to ask imports pandas wherever it is installed: 0.2-0.5 s of every ingest
command, which never needs it. These helpers make the same arrays from and into their
buffers, for what an ingest converts (integers, floats, booleans, strings, scalars of
them); anything else goes through pyarrow's own conversion.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def _bits(flags: np.ndarray) -> pa.Buffer:
    """A boolean NumPy array as an Arrow bitmap (least significant bit first)."""
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def _unbits(bitmap: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Bits ``offset`` .. ``offset + n - 1`` of an Arrow bitmap as a boolean NumPy array
    (only the bytes that hold them are unpacked)."""
    first, skip = divmod(offset, 8)
    count = (skip + n + 7) // 8
    raw = np.frombuffer(bitmap, np.uint8, count=count, offset=first)
    return np.unpackbits(raw, bitorder="little", count=skip + n)[skip:].view(bool)


def from_numpy(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """``pa.array(values, mask=mask)`` for a 1-D NumPy array of integers, floats or
    booleans: the values as the array's data buffer (numbers copied only if not
    contiguous or not in the machine's byte order; booleans packed into bits), null where
    ``mask`` is true (or masked, in a masked array)."""
    if isinstance(values, np.ma.MaskedArray):
        hidden = np.ma.getmaskarray(values)
        mask = hidden if mask is None else (np.asarray(mask, dtype=bool) | hidden)
        values = values.data
    if values.ndim != 1 or values.dtype.kind not in "iufb":
        return pa.array(values, mask=mask)
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
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
    """The NumPy dtype of an Arrow integer or float type (None for any other), from its
    width (``DataType.to_pandas_dtype`` imports pandas in pyarrow before 26)."""
    if pa.types.is_integer(typ):
        return np.dtype(f"{'i' if pa.types.is_signed_integer(typ) else 'u'}{typ.bit_width // 8}")
    if pa.types.is_floating(typ):
        return np.dtype(f"f{typ.bit_width // 8}")
    return None


def to_numpy(col: pa.Array | pa.ChunkedArray, fill=None) -> np.ndarray:
    """``col`` as a NumPy array, with ``fill`` in place of its nulls (a column with nulls
    and no ``fill``, or a ``fill`` its type cannot hold, is an error). An integer or float
    array of one chunk without nulls is a read-only view of its data buffer; booleans are
    unpacked from their bitmap."""
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
    if dtype is None:  # booleans: one bit a value
        out = _unbits(col.buffers()[1], offset, n)
    else:
        out = np.frombuffer(col.buffers()[1], dtype, count=n, offset=offset * dtype.itemsize)
        out.flags.writeable = False  # (Arrow's memory: as pyarrow's own view)
    if col.null_count:
        if fill is None:
            raise ValueError(f"a {typ} column with {col.null_count} nulls and no fill")
        value = np.asarray(fill).astype(out.dtype)
        if not np.array_equal(value, fill, equal_nan=True):
            raise ValueError(f"a fill of {fill!r} for a {typ} column, which cannot hold it")
        out = np.where(valid_flags(col), out, value)
    return out


def valid_flags(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Where ``col`` holds a value (True) or a null, as a NumPy boolean array."""
    if isinstance(col, pa.ChunkedArray):
        return np.concatenate([valid_flags(c) for c in col.chunks]) if col.num_chunks else np.empty(0, bool)
    n = len(col)
    bitmap = col.buffers()[0]
    if col.null_count == 0 or bitmap is None:
        return np.ones(n, bool) if col.null_count == 0 else np.zeros(n, bool)  # (a null type has no bitmap)
    return _unbits(bitmap, col.offset, n)


def strings(values) -> pa.Array:
    """``pa.array(values, pa.string())`` for a sequence of str (None: null), from the
    UTF-8 bytes and their offsets."""
    values = list(values)
    nulls = np.fromiter((v is None for v in values), bool, count=len(values)) if None in values else None
    texts = [v or "" for v in values] if nulls is not None else values
    data = "".join(texts).encode("utf-8")
    if len(data) == sum(map(len, texts)):  # ASCII: a character is a byte
        lengths = np.fromiter(map(len, texts), np.int64, count=len(texts))
    else:
        encoded = [t.encode("utf-8") for t in texts]
        lengths = np.fromiter(map(len, encoded), np.int64, count=len(texts))
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    wide = offsets[-1] > np.iinfo(np.int32).max
    validity = _bits(~nulls) if nulls is not None else None
    return pa.Array.from_buffers(pa.large_string() if wide else pa.string(), len(texts),
                                 [validity, pa.py_buffer(offsets if wide else offsets.astype(np.int32)),
                                  pa.py_buffer(data)], null_count=0 if nulls is None else int(nulls.sum()))


def scalar(value, typ: pa.DataType | None = None) -> pa.Scalar:
    """An Arrow scalar for None (of ``typ``), a str, or a number or bool: its NumPy type,
    cast (as ``Array.cast`` casts, not as ``pa.scalar`` converts) to ``typ`` if given. For
    compute functions, which convert a Python value through ``pa.scalar`` (see the
    module's docstring)."""
    if value is None:
        return pa.nulls(1, typ or pa.null())[0]
    arr = strings([value]) if isinstance(value, str) else from_numpy(np.asarray([value]))
    return (arr if typ is None or arr.type == typ else arr.cast(typ))[0]
