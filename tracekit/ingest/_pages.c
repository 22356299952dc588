/* Integer columns of SQLite table B-tree leaf pages, decoded in C.
 *
 * The compiled twin of the NumPy decoder in sqlite_ints.py (same inputs, same checks,
 * same outputs): one pass over each record instead of a dozen vector passes over all
 * of them. It is optional: where it is not built, sqlite_ints uses NumPy.
 *
 * decode(buf, heads, bases, content, counts, usable, wanted, ncols, out, nulls, total, row0)
 *   buf      the leaf pages (any buffer: the pages read into one)
 *   heads    int64[n]: byte offset of each leaf page's B-tree header in buf, in key order
 *   bases    int64[n]: byte offset of each leaf page in buf
 *   content  int64[n]: each page's cell content area start (checked by the caller)
 *   counts   int64[n]: cells per page
 *   usable   usable bytes per page
 *   wanted   int64[k]: record columns to decode, ascending
 *   ncols    columns each record must have (wanted[k - 1] + 1)
 *   out      int64[k * total] (writable): column c of row r at out[c * total + r]
 *   nulls    uint8[k * total] (writable, zeroed): 1 where the value is NULL
 *   row0     first row of these pages
 * Returns bytes of k flags (column c held a NULL) or, for a record it does not decode
 * exactly, a str saying why (the caller then reads the table through SQLite).
 *
 * read_decode(fd, pages, page_size, usable, content, counts, buf, wanted, ncols, out, nulls, total, row0)
 *   the same for leaf pages still in the file: reads ``pages`` (int64[n], page numbers
 *   checked by the caller) from file descriptor ``fd`` into ``buf`` (at least
 *   n * page_size + 8 bytes), page i at i * page_size (each run of consecutive pages in
 *   one pread), then decodes them as decode does. Also returns an int: the byte offset
 *   at which the file ended before every page was read (the file shrank).
 *
 * headers(fd, pages, page_size, out)
 *   the first 8 bytes of each page's B-tree header (after the 100-byte file header on
 *   page 1) into out (uint8[n * 8]), the pages read in blocks of about 1 MB; None, or
 *   the byte offset at which the file ended.
 *
 * A read that fails raises OSError. The GIL is released while reading and decoding, so
 * that the Python steps of other ingests run meanwhile.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* A varint at p (at most 9 bytes, none at or past lim); returns its length, 0 if it runs past lim. */
static inline __attribute__((always_inline)) int varint(const uint8_t *p, const uint8_t *lim, uint64_t *v) {
    if (p < lim && p[0] < 0x80) { *v = p[0]; return 1; }  /* most are one byte */
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) {
        if (p + i >= lim) return 0;
        x = (x << 7) | (p[i] & 0x7F);
        if (!(p[i] & 0x80)) { *v = x; return i + 1; }
    }
    if (p + 8 >= lim) return 0;
    *v = (x << 8) | p[8];
    return 9;
}

static const char *decode_pages(const uint8_t *buf, Py_ssize_t size, const int64_t *heads,
                                const int64_t *bases, const int64_t *content, const int64_t *counts,
                                Py_ssize_t npages, int64_t usable, const int8_t *slot, int64_t ncols, int64_t *out, uint8_t *nulls,
                                int64_t total, int64_t row0, uint8_t *has_null) {
    int64_t row = row0;
    for (Py_ssize_t i = 0; i < npages; i++) {
        const int64_t base = bases[i], h = heads[i], n = counts[i];
        if (base < 0 || base + usable > size || h < base || h + 8 + 2 * n > base + usable)
            return "inconsistent pages";
        if (row + n > total) return "more cells than the page headers count";
        const uint8_t *page_end = buf + base + usable;
        for (int64_t c = 0; c < n; c++, row++) {
            const uint8_t *ptr = buf + h + 8 + 2 * c;
            int64_t at = ((int64_t)ptr[0] << 8) | ptr[1];
            if (at < content[i] || at >= usable) return "cell outside its page's content area";
            const uint8_t *p = buf + base + at;
            uint64_t payload, rowid, hs;
            int l = varint(p, page_end, &payload);
            if (!l) return "record past its page";
            if (payload > (uint64_t)(usable - 35)) return "record spills to overflow pages";
            p += l;
            l = varint(p, page_end, &rowid);
            if (!l) return "record past its page";
            p += l;
            const uint8_t *rec = p;
            if (payload > (uint64_t)(page_end - rec)) return "record past its page";
            const uint8_t *end = rec + payload;
            l = varint(rec, end, &hs);
            if (!l || hs < (uint64_t)l || hs > payload) return "record header past the end of its record";
            const uint8_t *hp = rec + l, *hend = rec + hs, *val = hend;
            for (int64_t j = 0; j < ncols; j++) {
                uint64_t st;
                if (hp >= hend) return "record with fewer columns than the table";
                l = varint(hp, hend, &st);
                if (!l) return "record header past the end of its record";
                hp += l;
                uint64_t sz;
                if (st <= 4) sz = st;
                else if (st == 5) sz = 6;
                else if (st <= 7) sz = 8;
                else if (st <= 9) sz = 0;
                else if (st <= 11) return "reserved serial type";
                else sz = (st - 12) >> 1;
                if (sz > (uint64_t)(end - val)) return "values past the end of their record";
                int s = slot[j];
                if (s >= 0) {
                    int64_t v;
                    if (st == 7 || st >= 10) return "REAL, TEXT or BLOB value in an integer column";
                    if (st == 0) {
                        v = 0;
                        nulls[s * total + row] = 1;
                        has_null[s] = 1;
                    } else if (st >= 8) {
                        v = (int64_t)st - 8;
                    } else if (val + 8 <= buf + size) {
                        uint64_t w;
                        memcpy(&w, val, 8);
                        w = __builtin_bswap64(w);
                        v = (int64_t)w >> (64 - 8 * sz);  /* arithmetic: sign-extends */
                    } else {  /* the buffer's last bytes: one at a time */
                        uint64_t w = 0;
                        for (uint64_t b = 0; b < sz; b++) w = (w << 8) | val[b];
                        v = sz == 8 ? (int64_t)w : (int64_t)(w << (64 - 8 * sz)) >> (64 - 8 * sz);
                    }
                    out[s * total + row] = v;
                }
                val += sz;
            }
            /* a header read to its end must describe the whole record (SQLite checks it then) */
            if (hp == hend && val != end) return "record longer than its values";
        }
    }
    return NULL;
}

static int get(PyObject *o, Py_buffer *b, int writable, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(o, b, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (b->len % itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: buffer of %zd bytes is not a whole number of items", what, b->len);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *o[9];
    long long usable, ncols, total, row0;
    if (!PyArg_ParseTuple(args, "OOOOOLOLOOLL", &o[0], &o[1], &o[2], &o[3], &o[4], &usable, &o[5],
                          &ncols, &o[6], &o[7], &total, &row0))
        return NULL;
    (void)self;
    Py_buffer b[8];
    const int writable[8] = {0, 0, 0, 0, 0, 0, 1, 1};
    const Py_ssize_t items[8] = {1, 8, 8, 8, 8, 8, 8, 1};
    static const char *what[8] = {"buf", "heads", "bases", "content", "counts", "wanted", "out", "nulls"};
    int got = 0;
    PyObject *result = NULL;
    for (; got < 8; got++)
        if (get(o[got], &b[got], writable[got], items[got], what[got]) < 0) goto done;
    Py_ssize_t npages = b[1].len / 8, k = b[5].len / 8;
    if (b[2].len / 8 != npages || b[3].len / 8 != npages || b[4].len / 8 != npages) {
        PyErr_SetString(PyExc_ValueError, "heads, bases, content and counts differ in length");
        goto done;
    }
    if (ncols < 1 || ncols > 32767 || k < 1 || total < 0 || row0 < 0 || usable < 480 || usable > 65536 ||
        b[6].len / 8 != k * total || b[7].len != k * total) {
        PyErr_SetString(PyExc_ValueError, "decode: inconsistent sizes");
        goto done;
    }
    const int64_t *wanted = b[5].buf;
    int8_t *slot = PyMem_Malloc(ncols);
    uint8_t *has_null = PyMem_Calloc(k, 1);
    if (!slot || !has_null) {
        PyMem_Free(slot);
        PyMem_Free(has_null);
        PyErr_NoMemory();
        goto done;
    }
    memset(slot, -1, ncols);
    for (Py_ssize_t c = 0; c < k; c++) {
        if (k > 127 || wanted[c] < 0 || wanted[c] >= ncols || (c && wanted[c] <= wanted[c - 1])) {
            PyMem_Free(slot);
            PyMem_Free(has_null);
            PyErr_SetString(PyExc_ValueError, "decode: wanted columns must ascend within the table (at most 127)");
            goto done;
        }
        slot[wanted[c]] = (int8_t)c;
    }
    const char *why;
    Py_BEGIN_ALLOW_THREADS
    why = decode_pages(b[0].buf, b[0].len, b[1].buf, b[2].buf, b[3].buf, b[4].buf, npages, usable, slot, ncols, b[6].buf, b[7].buf, total, row0, has_null);
    Py_END_ALLOW_THREADS
    result = why ? PyUnicode_FromString(why) : PyBytes_FromStringAndSize((const char *)has_null, k);
    PyMem_Free(slot);
    PyMem_Free(has_null);
done:
    while (got-- > 0) PyBuffer_Release(&b[got]);
    return result;
}

/* pread pages (1-based numbers) into buf, page i at i * ps, a run of consecutive pages in
 * one read. 0: read; -1: an OS error (errno); 1: the file ended at byte *ended. No GIL needed. */
static int read_pages_fd(int fd, const int64_t *pages, Py_ssize_t n, int64_t ps, uint8_t *buf, int64_t *ended) {
    Py_ssize_t a = 0;
    while (a < n) {
        Py_ssize_t b = a + 1;
        while (b < n && pages[b] == pages[b - 1] + 1) b++;
        const size_t want = (size_t)(b - a) * (size_t)ps;
        const off_t off = (off_t)(pages[a] - 1) * ps;
        size_t done = 0;
        while (done < want) {
            ssize_t got = pread(fd, buf + (size_t)a * ps + done, want - done, off + (off_t)done);
            if (got < 0) {
                if (errno == EINTR) continue;
                return -1;
            }
            if (got == 0) {
                *ended = (int64_t)(off + (off_t)done);
                return 1;
            }
            done += (size_t)got;
        }
        a = b;
    }
    return 0;
}

static int page_size_ok(long long ps) {
    if (ps < 512 || ps > 65536 || (ps & (ps - 1))) {
        PyErr_SetString(PyExc_ValueError, "page size is not a power of two from 512 to 65536");
        return 0;
    }
    return 1;
}

static PyObject *headers(PyObject *self, PyObject *args) {
    int fd;
    long long ps;
    PyObject *po, *oo;
    (void)self;
    if (!PyArg_ParseTuple(args, "iOLO", &fd, &po, &ps, &oo) || !page_size_ok(ps)) return NULL;
    Py_buffer pb, ob;
    if (get(po, &pb, 0, 8, "pages") < 0) return NULL;
    if (get(oo, &ob, 1, 1, "out") < 0) {
        PyBuffer_Release(&pb);
        return NULL;
    }
    PyObject *result = NULL;
    const Py_ssize_t n = pb.len / 8;
    if (ob.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "headers: out must hold 8 bytes per page");
        goto done;
    }
    const Py_ssize_t block = ps >= (1 << 20) ? 1 : (1 << 20) / ps;
    uint8_t *buf = PyMem_RawMalloc((size_t)(n < block ? (n ? n : 1) : block) * (size_t)ps);
    if (!buf) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *pages = pb.buf;
    uint8_t *out = ob.buf;
    int rc = 0, err = 0;
    int64_t ended = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t a = 0; a < n && !rc; a += block) {
        const Py_ssize_t b = a + block < n ? a + block : n;
        rc = read_pages_fd(fd, pages + a, b - a, ps, buf, &ended);
        if (rc < 0) err = errno;
        for (Py_ssize_t i = a; i < b && !rc; i++)
            memcpy(out + i * 8, buf + (size_t)(i - a) * ps + (pages[i] == 1 ? 100 : 0), 8);
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(buf);
    if (rc < 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    } else if (rc > 0) {
        result = PyLong_FromLongLong(ended);
    } else {
        result = Py_NewRef(Py_None);
    }
done:
    PyBuffer_Release(&ob);
    PyBuffer_Release(&pb);
    return result;
}

static PyObject *read_decode(PyObject *self, PyObject *args) {
    int fd;
    long long ps, usable, ncols, total, row0;
    PyObject *o[8];  /* pages, content, counts, buf, wanted, out, nulls */
    (void)self;
    if (!PyArg_ParseTuple(args, "iOLLOOOOLOOLL", &fd, &o[0], &ps, &usable, &o[1], &o[2], &o[3], &o[4],
                          &ncols, &o[5], &o[6], &total, &row0) || !page_size_ok(ps))
        return NULL;
    Py_buffer b[7];
    const int writable[7] = {0, 0, 0, 1, 0, 1, 1};
    const Py_ssize_t items[7] = {8, 8, 8, 1, 8, 8, 1};
    static const char *what[7] = {"pages", "content", "counts", "buf", "wanted", "out", "nulls"};
    int got = 0;
    PyObject *result = NULL;
    int8_t *slot = NULL;
    uint8_t *has_null = NULL;
    int64_t *pos = NULL;
    for (; got < 7; got++)
        if (get(o[got], &b[got], writable[got], items[got], what[got]) < 0) goto done;
    const Py_ssize_t npages = b[0].len / 8, k = b[4].len / 8;
    if (b[1].len / 8 != npages || b[2].len / 8 != npages) {
        PyErr_SetString(PyExc_ValueError, "pages, content and counts differ in length");
        goto done;
    }
    if (ncols < 1 || ncols > 32767 || k < 1 || k > 127 || total < 0 || row0 < 0 || usable < 480 || usable > ps ||
        b[3].len < npages * ps + 8 || b[5].len / 8 != k * total || b[6].len != k * total) {
        PyErr_SetString(PyExc_ValueError, "read_decode: inconsistent sizes");
        goto done;
    }
    const int64_t *wanted = b[4].buf;
    slot = PyMem_Malloc(ncols);
    has_null = PyMem_Calloc(k, 1);
    pos = PyMem_Malloc(2 * (npages ? npages : 1) * sizeof(int64_t));
    if (!slot || !has_null || !pos) {
        PyErr_NoMemory();
        goto done;
    }
    memset(slot, -1, ncols);
    for (Py_ssize_t c = 0; c < k; c++) {
        if (wanted[c] < 0 || wanted[c] >= ncols || (c && wanted[c] <= wanted[c - 1])) {
            PyErr_SetString(PyExc_ValueError, "read_decode: wanted columns must ascend within the table");
            goto done;
        }
        slot[wanted[c]] = (int8_t)c;
    }
    const int64_t *pages = b[0].buf;
    int64_t *bases = pos, *heads = pos + npages;
    for (Py_ssize_t i = 0; i < npages; i++) {
        bases[i] = (int64_t)i * ps;
        heads[i] = bases[i] + (pages[i] == 1 ? 100 : 0);
    }
    uint8_t *buf = b[3].buf;
    const char *why = NULL;
    int rc, err = 0;
    int64_t ended = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = read_pages_fd(fd, pages, npages, ps, buf, &ended);
    if (rc < 0) err = errno;
    if (!rc) {
        memset(buf + npages * ps, 0, 8);
        why = decode_pages(buf, npages * ps + 8, heads, bases, b[1].buf, b[2].buf, npages, usable, slot, ncols,
                           b[5].buf, b[6].buf, total, row0, has_null);
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    } else if (rc > 0) {
        result = PyLong_FromLongLong(ended);
    } else {
        result = why ? PyUnicode_FromString(why) : PyBytes_FromStringAndSize((const char *)has_null, k);
    }
done:
    PyMem_Free(slot);
    PyMem_Free(has_null);
    PyMem_Free(pos);
    while (got-- > 0) PyBuffer_Release(&b[got]);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "Decode integer columns of SQLite table leaf pages (see _pages.c)."},
    {"read_decode", read_decode, METH_VARARGS, "Read leaf pages from a file and decode them (see _pages.c)."},
    {"headers", headers, METH_VARARGS, "The B-tree headers of pages read from a file (see _pages.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pages", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pages(void) { return PyModule_Create(&module); }
