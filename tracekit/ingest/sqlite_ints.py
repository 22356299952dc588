"""Integer columns of an SQLite table, decoded from the file's pages with NumPy.

The big tables of an nsys export (kernels, CUDA API calls, copies) are all-integer
rows. Reading them through SQLite's C API costs a library call per value (plus, in
ADBC's driver, a type check and an append per value): about 50 ns a value, most of
an ingest (docs/performance.md). Their records, however, have a simple layout (SQLite file format,
https://www.sqlite.org/fileformat2.html): a leaf page of the table's B-tree holds
cells ``payload-size varint, rowid varint, record``; a record is a header of one
serial type per column followed by the values, big-endian, 0 to 8 bytes each. Every
step of decoding them is a gather or an arithmetic op over all rows at once, so a
column costs a handful of vector operations instead of millions of calls.

This reader decodes only what it can decode exactly: table B-trees of integer (or
NULL) values whose record headers are one byte per column. Anything else (an
overflowing record, a REAL or TEXT value, a record shorter than the table, a
``WITHOUT ROWID`` table, a page that is not what the tree says) raises
``Unsupported`` and the caller reads the table through SQLite instead, which gives
the same values (``tests/test_sqlite_ints.py`` compares the two on every fixture).

The decoding itself has two implementations with the same checks and results: the
compiled ``_pages`` module (one pass over each record; built at install where a C
compiler is present) and NumPy (a dozen vector passes over all records of a chunk),
used where ``_pages`` is not built or ``TRACEKIT_PAGE_DECODER=numpy`` is set.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sqlite3
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

try:
    from tracekit.ingest import _pages as _native
except ImportError:  # not built (no C compiler at install): the NumPy decoder does it
    _native = None
if os.environ.get("TRACEKIT_PAGE_DECODER") == "numpy":
    _native = None

#: rows decoded per chunk: temporaries stay small (cache-resident, no fresh pages)
CHUNK_ROWS = 8192

# serial type -> value size in bytes (types 0-11; text/blob types >= 12 only get skipped)
_SIZE = np.array([0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0] + [(t - 12) // 2 for t in range(12, 128)], np.int64)
# serial type -> right shift that turns the 8 bytes read at the value into the value
# (arithmetic shift: sign-extends 1..6-byte values); 0-byte types are fixed up after
_SHIFT = np.array([0] + [64 - 8 * int(s) for s in _SIZE[1:7]] + [0] * 121, np.int64)


class Unsupported(Exception):
    """The table holds something this reader does not decode; read it through SQLite."""


def pending_changes(path: Path) -> str | None:
    """What SQLite would apply to the file before reading it, as a clause naming the
    file beside it, or None when the file alone is what SQLite reads: committed frames
    in a write-ahead log (``-wal``; SQLite opens one wherever it exists, whatever the
    file's header says) or a hot rollback journal (``-journal``: not empty, its header
    not zeroed), left by a writer that is still running or crashed. Neither the page
    decoder nor an ``immutable`` SQLite connection reads them, and a connection that
    would creates ``-wal``/``-shm`` files beside the input: such a file is refused."""
    wal, journal = Path(f"{path}-wal"), Path(f"{path}-journal")
    with contextlib.suppress(OSError):
        if wal.stat().st_size > 32:  # a 32-byte header, then frames
            return f"a write-ahead log with changes not yet in the file ({wal.name})"
    with contextlib.suppress(OSError), open(journal, "rb") as fh:
        if fh.read(1) not in (b"", b"\x00"):
            return f"a rollback journal of an unfinished write ({journal.name})"
    return None


def _schema(path: Path, table: str) -> tuple[int, list[str], str | None]:
    """Root page, column names and the INTEGER PRIMARY KEY column (a rowid alias) if any."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as sq:
            row = sq.execute("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                             [table]).fetchone()
            info = sq.execute(f'PRAGMA table_info("{table}")').fetchall()
    except (sqlite3.Error, UnicodeDecodeError) as err:  # SQLite's own reader reports it, with its words
        raise Unsupported(str(err)) from err
    if row is None:
        raise Unsupported(f"no table {table}")
    if "WITHOUT ROWID" in (row[1] or "").upper():
        raise Unsupported("WITHOUT ROWID table")
    pks = [r for r in info if r[5]]
    ipk = pks[0][1] if len(pks) == 1 and (pks[0][2] or "").upper() == "INTEGER" else None
    return int(row[0]), [r[1] for r in info], ipk


class _File:
    """The file mapped read-only: bytes, aligned 64-bit words, and big-endian 16/32-bit
    integers at every byte offset (page headers and cell pointers)."""

    def __init__(self, path: Path):
        with open(path, "rb") as fh:
            self.mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.buf = np.frombuffer(self.mm, dtype=np.uint8)
        self.size = len(self.buf)
        if self.size < 100 or self.buf[:16].tobytes() != b"SQLite format 3\x00":
            raise Unsupported("not an SQLite file")
        ps = int.from_bytes(self.buf[16:18].tobytes(), "big")
        self.page_size = 65536 if ps == 1 else ps
        self.usable = self.page_size - int(self.buf[20])
        if self.size % self.page_size:
            raise Unsupported("file size is not a whole number of pages")
        self.pages = self.size // self.page_size
        if sys.byteorder != "little":
            raise Unsupported("big-endian host")
        # aligned 64-bit words (the map starts on a page): values are cut out of two
        self.words = np.frombuffer(self.mm, dtype=np.uint64, count=self.size // 8)
        self.u32 = self._view(4, ">u4")
        self.u16 = self._view(2, ">u2")

    def _view(self, width: int, dtype: str) -> np.ndarray:
        return np.ndarray(shape=(self.size - width + 1,), dtype=dtype, buffer=self.buf, strides=(1,))

    def headers(self, pages: np.ndarray) -> np.ndarray:
        """Byte offset of each page's B-tree header (page 1 starts after the file header)."""
        if len(pages) > self.pages or ((pages < 1) | (pages > self.pages)).any():
            raise Unsupported("page number outside the file")
        return (pages - 1) * self.page_size + np.where(pages == 1, 100, 0)

    def close(self) -> None:
        del self.words, self.u32, self.u16, self.buf
        try:
            self.mm.close()
        except BufferError:  # views still held by an exception's frames: unmapped when freed
            pass


def _leaves(f: _File, root: int) -> np.ndarray:
    """The table B-tree's leaf pages in key order (all leaves lie at one depth)."""
    level = np.array([root], np.int64)
    for _ in range(64):
        heads = f.headers(level)
        kinds = f.buf[heads]
        if (kinds == 0x0D).all():
            return level
        if not (kinds == 0x05).all():
            raise Unsupported("unexpected page type in the table B-tree")
        children = []
        for p, h in zip(level.tolist(), heads.tolist(), strict=True):
            n = int(f.u16[h + 3])
            base = (p - 1) * f.page_size
            cells = base + f.u16[h + 12 + 2 * np.arange(n, dtype=np.int64)].astype(np.int64)
            children.append(f.u32[cells].astype(np.int64))
            children.append(np.array([int(f.u32[h + 8])], np.int64))
        level = np.concatenate(children)
    raise Unsupported("B-tree deeper than 64 levels")


def _varint_len(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Length in bytes (1-9) of the varint starting at each position."""
    n = np.ones(len(pos), np.int64)
    more = np.flatnonzero(np.take(buf, pos) >= 0x80)
    step = 1
    while len(more) and step < 9:
        n[more] += 1
        more = more[np.take(buf, pos[more] + step) >= 0x80]
        step += 1
    return n


def _varint_small(buf: np.ndarray, pos: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Value of 1- or 2-byte varints (longer ones: Unsupported)."""
    if (length > 2).any():
        raise Unsupported("payload of 16 KiB or more")
    b0 = np.take(buf, pos).astype(np.int64)
    two = length == 2
    if two.any():
        b1 = np.take(buf, np.minimum(pos + 1, len(buf) - 1)).astype(np.int64)
        return np.where(two, ((b0 & 0x7F) << 7) | b1, b0)
    return b0


class _Work:
    """One thread's scratch arrays, reused for every chunk it decodes: temporaries of a
    few MB allocated per chunk would come back from the allocator as fresh pages (a
    page fault per 4 KiB, most of the time on a VM)."""

    def __init__(self, rows: int, ncols: int, nwanted: int):
        self.rows, self.ncols = rows, ncols
        self.col = np.arange(1, ncols + 1, dtype=np.int64)[:, None]
        self.flat = {name: np.empty(k * rows, dt) for name, k, dt in (
            ("idx", ncols, np.int64), ("st", ncols, np.uint8), ("acc", ncols + 1, np.int64),
            ("stw", nwanted, np.uint8), ("off", nwanted, np.int64), ("lo", nwanted, np.uint64),
            ("hi", nwanted, np.uint64), ("sh", nwanted, np.uint64))}

    def get(self, name: str, n: int) -> np.ndarray:
        a = self.flat[name]
        return a[: len(a) // self.rows * n].reshape(-1, n)


def _decode_chunk(f: _File, w: _Work, cells: np.ndarray, wanted: np.ndarray, out: np.ndarray,
                  nulls: np.ndarray, has_null: np.ndarray, lo: int, lock: threading.Lock) -> None:
    """Decode rows ``lo:lo + len(cells)`` (``cells``: byte offsets of their cells) of
    the columns at positions ``wanted`` (ascending) into ``out[:, lo:hi]``.

    All columns at once: a (column, row) array of serial types, their value sizes, and
    one running sum down the columns gives every value's offset; each value is then
    the 8 bytes at its offset (two aligned 64-bit words, shifted together), swapped to
    big-endian order and shifted right by what its size leaves over."""
    buf, n, ncols = f.buf, len(cells), w.ncols
    l1 = _varint_len(buf, cells)
    payload = _varint_small(buf, cells, l1)
    if (payload > f.usable - 35).any():
        raise Unsupported("record spills to overflow pages")
    rowid_at = cells + l1
    rec = rowid_at + _varint_len(buf, rowid_at)
    end = rec + payload  # the record ends inside the page's usable bytes (SQLite checks it too)
    if (end > cells // f.page_size * f.page_size + f.usable).any():
        raise Unsupported("record past its page")
    hs = np.take(buf, rec)
    if (hs >= 0x80).any() or (hs <= ncols).any():
        raise Unsupported("record header of several bytes per column, or fewer columns than the table")
    idx = np.add(rec, w.col, out=w.get("idx", n))
    st = np.take(buf, idx, out=w.get("st", n), mode="clip")  # (column, row)
    if (st >= 0x80).any():
        raise Unsupported("record header of several bytes per column")
    acc = w.get("acc", n)
    np.add(rec, hs, out=acc[0])
    np.take(_SIZE, st, out=acc[1:], mode="clip")
    for j in range(1, ncols + 1):  # acc[j]: offset of column j's value; acc[ncols]: their end
        np.add(acc[j], acc[j - 1], out=acc[j])  # row by row: cumsum(axis=0) is ~15x slower here
    if (acc[ncols] > end).any():
        raise Unsupported("values past the end of their record")
    stw = np.take(st, wanted, axis=0, out=w.get("stw", n), mode="clip")
    if ((stw >= 10) | (stw == 7)).any():
        raise Unsupported("REAL, TEXT or BLOB value in an integer column")
    off = np.take(acc, wanted, axis=0, out=w.get("off", n), mode="clip")
    late = off > f.size - 8  # values in the file's last 8 bytes: read one by one below
    sh = w.get("sh", n)
    np.bitwise_and(off, 7, out=sh, casting="unsafe")
    sh <<= np.uint64(3)
    off >>= 3
    v = np.take(f.words, off, out=w.get("lo", n), mode="clip")
    off += 1
    hi = np.take(f.words, off, out=w.get("hi", n), mode="clip")
    v >>= sh
    np.subtract(np.uint64(64), sh, out=sh)
    hi <<= sh  # a shift by 64 gives 0 in NumPy
    v |= hi
    v.byteswap(inplace=True)
    v = v.view(np.int64)
    v >>= np.take(_SHIFT, stw, out=sh.view(np.int64), mode="clip")
    if late.any():
        for c, r in zip(*np.nonzero(late), strict=True):
            at = int(acc[wanted[c], r])
            size = int(_SIZE[stw[c, r]])
            v[c, r] = int.from_bytes(buf[at:at + size].tobytes(), "big", signed=True) if size else 0
    special = stw >= 8
    if special.any():
        v[special] = stw[special] - 8  # types 8 and 9: the constants 0 and 1
    isnull = stw == 0
    if isnull.any():
        v[isnull] = 0
        rows = isnull.any(axis=1)
        nulls[rows, lo:lo + n] = isnull[rows]  # this chunk's own slice
        with lock:  # shared by the threads: no lost update
            has_null |= rows
    out[:, lo:lo + n] = v


def read_int_columns(path: str | Path, table: str, columns: list[str], threads: int = 2) -> pa.Table:
    """Columns ``columns`` of ``table`` as an Arrow table of int64 (NULLs kept), in rowid
    order, or ``Unsupported``. Rows are decoded in chunks on ``threads`` threads (NumPy
    releases the GIL in its vector ops)."""
    root, names, ipk_name = _schema(Path(path), table)
    missing = [c for c in columns if c not in names]
    if missing:
        raise Unsupported(f"no column {missing[0]}")
    if ipk_name in columns:  # stored as NULL in the record: its value is the rowid
        raise Unsupported("INTEGER PRIMARY KEY column")
    if not columns:
        raise Unsupported("no columns asked for")
    wanted = np.array(sorted({names.index(c) for c in columns}), np.int64)
    try:
        f = _File(Path(path))
    except (OSError, ValueError) as err:  # unreadable, or empty (mmap refuses it)
        raise Unsupported(str(err)) from err
    try:
        leaves = _leaves(f, root)
        heads = f.headers(leaves)
        counts = f.u16[heads + 3].astype(np.int64)
        # the page headers SQLite would check: the cell pointers end before the cell
        # content area, which starts inside the page (0 stands for 65536)
        bases = (leaves - 1) * f.page_size
        content = f.u16[heads + 5].astype(np.int64)
        content[content == 0] = 65536
        if ((heads + 8 + 2 * counts > bases + content) | (content > f.usable)).any():
            raise Unsupported("leaf page header inconsistent")
        total = int(counts.sum())
        out = np.empty((len(wanted), total), np.int64)  # a row per column: contiguous
        nulls = np.zeros((len(wanted), total), bool)  # pages touched only where a NULL is
        has_null = np.zeros(len(wanted), bool)
        # chunks of whole pages, about CHUNK_ROWS rows each
        first_row = np.concatenate([[0], np.cumsum(counts)])
        bounds = np.searchsorted(first_row, np.arange(0, total, CHUNK_ROWS), side="right") - 1
        bounds = np.unique(np.append(bounds, len(leaves)))

        spans = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
        most = max((int(first_row[b] - first_row[a]) for a, b in spans), default=0)
        local, lock = threading.local(), threading.Lock()

        def chunk(a: int, b: int) -> None:
            if _native is not None:
                got = _native.decode(f.buf, heads[a:b], bases[a:b], content[a:b], counts[a:b], f.usable,
                                     wanted, int(wanted[-1]) + 1, out, nulls, total, int(first_row[a]))
                if isinstance(got, str):
                    raise Unsupported(got)
                with lock:
                    np.logical_or(has_null, np.frombuffer(got, bool), out=has_null)
                return
            if not hasattr(local, "work"):
                local.work = _Work(most, int(wanted[-1]) + 1, len(wanted))
            c = counts[a:b]
            n = int(c.sum())
            if n == 0:
                return
            k = np.arange(n, dtype=np.int64) - np.repeat(first_row[a:b] - first_row[a], c)
            ptr = np.repeat(heads[a:b] + 8, c) + 2 * k
            at = f.u16[ptr].astype(np.int64)
            if ((at < np.repeat(content[a:b], c)) | (at >= f.usable)).any():
                raise Unsupported("cell outside its page's content area")
            cells = np.repeat(bases[a:b], c) + at
            _decode_chunk(f, local.work, cells, wanted, out, nulls, has_null, int(first_row[a]), lock)

        if threads > 1 and len(spans) > 1:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                for fut in [pool.submit(chunk, a, b) for a, b in spans]:
                    fut.result()
        else:
            for a, b in spans:
                chunk(a, b)
    except (IndexError, ValueError) as err:  # offsets outside the file: not a sound B-tree
        raise Unsupported(f"inconsistent pages ({err})") from err
    finally:
        f.close()
    row = {names[j]: i for i, j in enumerate(wanted.tolist())}
    return pa.table({c: pa.array(out[row[c]], mask=nulls[row[c]] if has_null[row[c]] else None) for c in columns})
