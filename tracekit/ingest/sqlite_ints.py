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
It never answers where SQLite would not: whatever SQLite reports as corrupt when it
reads those columns (a child page without cells, pages past the header's page count,
a tree deeper than SQLite descends, a record whose header disagrees with its size)
is declined too, and SQLite's own error reaches the user (``tests/test_fuzz_exports.py``).

The file is read with ``pread``, never mapped: a mapped file that another process
truncates kills the reader with SIGBUS; a read that ends early raises ``Changed``.

The decoding itself has two implementations with the same checks and results: the
compiled ``_pages`` module (one pass over each record, the chunk's pages read by the
same call, all without the GIL, so that other ingests' Python runs meanwhile; built at
install where a C compiler is present) and NumPy (a dozen vector passes over all records of a chunk),
used where ``_pages`` is not built or ``TRACEKIT_PAGE_DECODER=numpy`` is set.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np
import pyarrow as pa

from .arrow import from_numpy

try:
    from tracekit.ingest import _pages as _native
except ImportError:  # not built (no C compiler at install): the NumPy decoder does it
    _native = None
if os.environ.get("TRACEKIT_PAGE_DECODER") == "numpy":
    _native = None

#: what Python's sqlite3 raises for a file SQLite cannot read: SQLite's errors, and
#: UnicodeDecodeError where SQLite's message quotes a corrupt schema's bytes ("malformed database
#: schema (...)": sqlite3 decodes the message as strict UTF-8, whatever the text_factory)
ERRORS = (sqlite3.Error, UnicodeDecodeError)


def said(err: Exception) -> str:
    """What SQLite said of an ``ERRORS`` error, its undecodable bytes replaced."""
    if isinstance(err, UnicodeDecodeError) and isinstance(err.object, bytes):
        return err.object.decode("utf-8", "replace")
    return str(err)


#: rows decoded per chunk: temporaries stay small (cache-resident, no fresh pages)
CHUNK_ROWS = 8192

# serial type -> value size in bytes (types 0-11; text/blob types >= 12 only get skipped)
_SIZE = np.array([0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0] + [(t - 12) // 2 for t in range(12, 128)], np.int64)
# serial type -> right shift that turns the 8 bytes read at the value into the value
# (arithmetic shift: sign-extends 1..6-byte values); 0-byte types are fixed up after
_SHIFT = np.array([0] + [64 - 8 * int(s) for s in _SIZE[1:7]] + [0] * 121, np.int64)


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _forget_pool() -> None:
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


# a forked child has none of the pool's threads (and would wait on them forever): it starts its own
os.register_at_fork(after_in_child=_forget_pool)


def _run(tasks: list) -> None:
    """Run ``tasks`` (callables) to their end, on the threads of one pool this module
    keeps (as many as cores: ingests running at once share them, and no thread is
    started per table); a single task in this thread. The first error is raised."""
    global _POOL
    if len(tasks) <= 1:
        for task in tasks:
            task()
        return
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                       thread_name_prefix="tracekit-pages")
    futures = [_POOL.submit(task) for task in tasks]
    try:
        for fut in futures:
            fut.result()
    finally:  # (after an error: the others finish before their buffers go)
        for fut in futures:
            fut.cancel()
        wait(futures)


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
            return f"a write-ahead log ({wal.name}) whose changes SQLite would read first"
    with contextlib.suppress(OSError), open(journal, "rb") as fh:
        if fh.read(1) not in (b"", b"\x00"):
            return f"a rollback journal of an unfinished write ({journal.name}) that SQLite would roll back first"
    return None


def _schema(path: Path, table: str) -> tuple[int, list[str], str | None]:
    """Root page, column names and the INTEGER PRIMARY KEY column (a rowid alias) if any."""
    try:
        # (closed here, not left to the garbage collector: sqlite3's close gives up the interpreter
        # lock, which deadlocks CPython 3.11 when a collection runs inside sys._current_frames(),
        # as Dask's worker profiler calls it, while a thread exits)
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as sq:
            row = sq.execute("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                             [table]).fetchone()
            info = sq.execute(f'PRAGMA table_info("{table}")').fetchall()
    except ERRORS as err:  # SQLite's own reader reports it, with its words
        raise Unsupported(said(err)) from err
    if row is None:
        raise Unsupported(f"no table {table}")
    if "WITHOUT ROWID" in (row[1] or "").upper():
        raise Unsupported("WITHOUT ROWID table")
    pks = [r for r in info if r[5]]
    ipk = pks[0][1] if len(pks) == 1 and (pks[0][2] or "").upper() == "INTEGER" else None
    return int(row[0]), [r[1] for r in info], ipk


class Changed(Exception):
    """The file shrank while it was read (another process truncated or rewrote it)."""


class _File:
    """The file, read with ``pread`` into buffers of our own: never mapped, as a mapped
    file that another process truncates kills the reader with SIGBUS. Its header is
    checked as SQLite checks it before reading anything."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        try:
            self._header()
        except BaseException:
            os.close(self.fd)
            raise

    def _header(self) -> None:
        size = os.fstat(self.fd).st_size
        head = os.pread(self.fd, 100, 0)
        if len(head) < 100 or head[:16] != b"SQLite format 3\x00":
            raise Unsupported("not an SQLite file")
        ps = int.from_bytes(head[16:18], "big")
        self.page_size = 65536 if ps == 1 else ps
        self.usable = self.page_size - head[20]
        # what SQLite requires to open the file (btree.c lockBtree)
        if self.page_size & (self.page_size - 1) or not 512 <= self.page_size <= 65536:
            raise Unsupported("page size is not a power of two from 512 to 65536")
        if head[18] not in (1, 2) or head[19] not in (1, 2) or head[21:24] != b"\x40\x20\x20" or self.usable < 480:
            raise Unsupported("file header SQLite does not open")
        if size % self.page_size:
            raise Unsupported("file size is not a whole number of pages")
        if sys.byteorder != "little":
            raise Unsupported("big-endian host")
        # pages in the database: the header's count where it is valid (SQLite reads no page
        # past it), else the file's; a count past the file's end is corruption to SQLite
        self.pages = size // self.page_size
        counted = int.from_bytes(head[28:32], "big")
        if counted and head[24:28] == head[92:96]:
            if counted > self.pages:
                raise Unsupported("header counts more pages than the file holds")
            self.pages = counted

    def read_into(self, buf: memoryview, offset: int) -> None:
        """Fill ``buf`` with the file's bytes from ``offset``; Changed if the file ends first."""
        done = 0
        while done < len(buf):
            got = os.preadv(self.fd, [buf[done:]], offset + done)
            if got <= 0:
                self._check_ended(offset + done)
            done += got

    def page(self, pgno: int) -> np.ndarray:
        """One page's bytes (pgno checked against the page count)."""
        if not 1 <= pgno <= self.pages:
            raise Unsupported("page number outside the file")
        out = np.empty(self.page_size, np.uint8)
        self.read_into(memoryview(out), (pgno - 1) * self.page_size)
        return out

    def read_pages(self, pages: np.ndarray, buf: np.ndarray) -> None:
        """``pages`` read into ``buf`` in that order, page i at ``i * page_size`` (each run
        of consecutive pages in one read)."""
        if len(pages) and ((pages < 1) | (pages > self.pages)).any():
            raise Unsupported("page number outside the file")
        ps, mv = self.page_size, memoryview(buf)
        starts = np.flatnonzero(np.diff(pages, prepend=-1) != 1).tolist()
        for a, b in zip(starts, [*starts[1:], len(pages)], strict=True):
            self.read_into(mv[a * ps:b * ps], (int(pages[a]) - 1) * ps)

    def headers(self, pages: np.ndarray, threads: int) -> np.ndarray:
        """The first 8 bytes of each page's B-tree header, (len(pages), 8), the pages read
        in blocks into a buffer of each thread's own (the compiled decoder: one call per
        thread, without the GIL)."""
        out = np.empty((len(pages), 8), np.uint8)
        block, ps = max(1, (1 << 20) // self.page_size), self.page_size
        if len(pages) and ((pages < 1) | (pages > self.pages)).any():
            raise Unsupported("page number outside the file")

        def part(lo: int, hi: int) -> None:
            if _native is not None:
                self._check_ended(_native.headers(self.fd, pages[lo:hi], ps, out[lo:hi]))
                return
            buf = np.empty(min(block, hi - lo) * ps, np.uint8)
            for a in range(lo, hi, block):
                b = min(a + block, hi)
                self.read_pages(pages[a:b], buf)
                at = np.arange(b - a, dtype=np.int64) * ps + np.where(pages[a:b] == 1, 100, 0)
                out[a:b] = buf[at[:, None] + np.arange(8)]

        cuts = np.linspace(0, len(pages), max(1, threads) + 1).astype(int).tolist()
        _run([lambda a=a, b=b: part(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a])
        return out

    def _check_ended(self, ended: int | None) -> None:
        """``Changed`` where a compiled read found the file ending at byte ``ended``."""
        if ended is not None:
            raise Changed(f"the file ended at byte {ended:,} while it was read (it was "
                          f"{self.pages * self.page_size:,} bytes)")

    def close(self) -> None:
        os.close(self.fd)


class _Pages:
    """Pages read into one buffer (page i of the buffer at ``i * page_size``, 8 bytes
    after the last): bytes, aligned 64-bit words, and big-endian 16/32-bit integers at
    every byte offset."""

    def __init__(self, buf: np.ndarray, page_size: int, usable: int):
        self.buf, self.page_size, self.usable = buf, page_size, usable
        self.size = len(buf)
        self.words = np.frombuffer(buf, dtype=np.uint64, count=self.size // 8)
        self.u32 = self._view(4, ">u4")
        self.u16 = self._view(2, ">u2")

    def _view(self, width: int, dtype: str) -> np.ndarray:
        return np.ndarray(shape=(self.size - width + 1,), dtype=dtype, buffer=self.buf, strides=(1,))


#: B-tree levels SQLite descends at most (BTCURSOR_MAX_DEPTH): a deeper tree is corrupt to it
_MAX_DEPTH = 20


def _page_header(f: _File, data: np.ndarray, pgno: int, leaf: bool) -> tuple[int, int, int]:
    """Offset of a page's B-tree header, its cell count and cell content start, checked
    as for every page the decoder reads: the cell pointers end before the content area,
    which starts inside the usable bytes (0 stands for 65536)."""
    h = 100 if pgno == 1 else 0
    n = int(data[h + 3]) << 8 | int(data[h + 4])
    content = (int(data[h + 5]) << 8 | int(data[h + 6])) or 65536
    if h + (8 if leaf else 12) + 2 * n > content or content > f.usable:
        raise Unsupported("page header inconsistent")
    return h, n, content


def _leaves(f: _File, root: int) -> np.ndarray:
    """The table B-tree's leaf pages in key order (all leaves lie at one depth: a level
    whose first page is a leaf is taken for the leaves, and the caller checks each).

    Declined where SQLite finds the tree corrupt (a child page without cells, an
    interior root without cells, deeper than SQLite descends) or where a cell lies
    outside its page's content area."""
    level = np.array([root], np.int64)
    for _ in range(_MAX_DEPTH):
        first = int(level[0])
        if f.page(first)[100 if first == 1 else 0] == 0x0D:
            return level
        children = []
        for p in level.tolist():
            data = f.page(p)
            h, n, content = _page_header(f, data, p, leaf=False)
            if data[h] != 0x05:
                raise Unsupported("unexpected page type in the table B-tree")
            if n == 0:  # a child page without cells, or a root of other than page 1: corrupt to SQLite
                raise Unsupported("interior page without cells")
            ptr = data[h + 12:h + 12 + 2 * n].view(">u2").astype(np.int64)
            if ((ptr < content) | (ptr > f.usable - 4)).any():
                raise Unsupported("cell outside its page's content area")
            at = ptr[:, None] + np.arange(4)
            children.append(data[at].astype(np.int64) @ np.array([1 << 24, 1 << 16, 1 << 8, 1], np.int64))
            children.append(np.array([int.from_bytes(data[h + 8:h + 12].tobytes(), "big")], np.int64))
        level = np.concatenate(children)
    raise Unsupported("B-tree deeper than SQLite descends")


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


def _decode_chunk(f: _Pages, w: _Work, cells: np.ndarray, wanted: np.ndarray, out: np.ndarray,
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
    # a header read to its end must describe the whole record (SQLite checks it then)
    if ((hs == ncols + 1) & (acc[ncols] != end)).any():
        raise Unsupported("record longer than its values")
    stw = np.take(st, wanted, axis=0, out=w.get("stw", n), mode="clip")
    if ((stw >= 10) | (stw == 7)).any():
        raise Unsupported("REAL, TEXT or BLOB value in an integer column")
    off = np.take(acc, wanted, axis=0, out=w.get("off", n), mode="clip")
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
    order, or ``Unsupported``. Rows are decoded in chunks by ``threads`` tasks on the
    module's pool (the compiled decoder reads and decodes a chunk in one call without
    the GIL; NumPy releases it in its vector ops)."""
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
    except OSError as err:  # unreadable
        raise Unsupported(str(err)) from err
    try:
        leaves = _leaves(f, root)
        ps = f.page_size
        hoff = np.where(leaves == 1, 100, 0)  # page 1's B-tree header follows the file header
        head = f.headers(leaves, threads).astype(np.int64)
        counts = head[:, 3] << 8 | head[:, 4]
        if (head[:, 0] != 0x0D).any():
            raise Unsupported("unexpected page type in the table B-tree")
        if len(leaves) > 1 and (counts == 0).any():  # a child page without cells: corrupt to SQLite
            raise Unsupported("leaf page without cells")
        # the page headers SQLite would check: the cell pointers end before the cell
        # content area, which starts inside the page (0 stands for 65536)
        content = head[:, 5] << 8 | head[:, 6]
        content[content == 0] = 65536
        if ((hoff + 8 + 2 * counts > content) | (content > f.usable)).any():
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
        most_pages = max((b - a for a, b in spans), default=0)
        local, lock = threading.local(), threading.Lock()

        def chunk(a: int, b: int) -> None:
            # the chunk's pages read (again: the headers were read apart) into a buffer of
            # the thread's own, reused: cache-resident, no fresh pages to fault in
            if not hasattr(local, "buf"):
                local.buf = np.empty(most_pages * ps + 8, np.uint8)
            if _native is not None:  # read and decoded in one call, without the GIL
                got = _native.read_decode(f.fd, leaves[a:b], ps, f.usable, content[a:b], counts[a:b], local.buf,
                                          wanted, int(wanted[-1]) + 1, out, nulls, total, int(first_row[a]))
                if isinstance(got, int):
                    f._check_ended(got)
                if isinstance(got, str):
                    raise Unsupported(got)
                with lock:
                    np.logical_or(has_null, np.frombuffer(got, bool), out=has_null)
                return
            f.read_pages(leaves[a:b], local.buf)
            buf = local.buf[:(b - a) * ps + 8]
            buf[-8:] = 0
            bases = np.arange(b - a, dtype=np.int64) * ps
            heads = bases + hoff[a:b]
            if not hasattr(local, "work"):
                local.work = _Work(most, int(wanted[-1]) + 1, len(wanted))
            c = counts[a:b]
            n = int(c.sum())
            if n == 0:
                return
            pages = _Pages(buf, ps, f.usable)
            k = np.arange(n, dtype=np.int64) - np.repeat(first_row[a:b] - first_row[a], c)
            ptr = np.repeat(heads + 8, c) + 2 * k
            at = pages.u16[ptr].astype(np.int64)
            if ((at < np.repeat(content[a:b], c)) | (at >= f.usable)).any():
                raise Unsupported("cell outside its page's content area")
            cells = np.repeat(bases, c) + at
            _decode_chunk(pages, local.work, cells, wanted, out, nulls, has_null, int(first_row[a]), lock)

        # ``threads`` tasks, each taking the next chunk until none is left
        todo, taking = iter(spans), threading.Lock()

        def worker() -> None:
            while True:
                with taking:
                    span = next(todo, None)
                if span is None:
                    return
                chunk(*span)

        _run([worker] * (min(threads, len(spans)) if threads > 1 else 1))
    except (IndexError, ValueError) as err:  # offsets outside the file: not a sound B-tree
        raise Unsupported(f"inconsistent pages ({err})") from err
    except OSError as err:  # a read that failed (not one that ended early: Changed)
        raise Unsupported(str(err)) from err
    finally:
        f.close()
    row = {names[j]: i for i, j in enumerate(wanted.tolist())}
    return pa.table({c: from_numpy(out[row[c]], mask=nulls[row[c]] if has_null[row[c]] else None) for c in columns})
