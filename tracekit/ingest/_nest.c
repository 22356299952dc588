/* Nesting of NVTX ranges, in C: the compiled twin of nsys.nvtx.enclosing and
 * nsys.nvtx.chain_length (same inputs, same outputs), one sequential pass instead of
 * NumPy's rounds of pointer jumping, and of containers.tightest (below). It is
 * optional: where it is not built, NumPy does the same.
 *
 * enclosing(end, first, parent, depth)
 *   end     int64[n]: range ends, ranges in (thread, start, -end) order
 *   first   uint8[n]: 1 at each thread's first range
 *   parent  int64[n] (writable): position of each range's innermost enclosing range,
 *           the nearest earlier range of its thread that ends no earlier (-1: none)
 *   depth   int64[n] (writable): number of enclosing ranges
 *
 * The candidates of range i are i - 1 and then, while a candidate ends too early, that
 * candidate's own parent: every range between the two ends earlier still. Each range
 * is skipped over at most once per thread's chain of open ranges, as with a stack:
 * linear in n.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int get(PyObject *o, Py_buffer *b, int writable, Py_ssize_t itemsize, Py_ssize_t n, const char *what) {
    if (PyObject_GetBuffer(o, b, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (b->len != n * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd", what, b->len, n * itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *enclosing(PyObject *self, PyObject *args) {
    PyObject *o[4];
    if (!PyArg_ParseTuple(args, "OOOO", &o[0], &o[1], &o[2], &o[3])) return NULL;
    (void)self;
    Py_buffer b[4];
    if (PyObject_GetBuffer(o[0], &b[0], PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = b[0].len / 8;
    if (b[0].len % 8) {
        PyErr_SetString(PyExc_ValueError, "end: not int64");
        PyBuffer_Release(&b[0]);
        return NULL;
    }
    const int writable[4] = {0, 0, 1, 1};
    const Py_ssize_t items[4] = {8, 1, 8, 8};
    static const char *what[4] = {"end", "first", "parent", "depth"};
    int got = 1;
    for (; got < 4; got++)
        if (get(o[got], &b[got], writable[got], items[got], n, what[got]) < 0) goto done;
    const int64_t *end = b[0].buf;
    const uint8_t *first = b[1].buf;
    int64_t *parent = b[2].buf, *depth = b[3].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t c = (first[i] || i == 0) ? -1 : (int64_t)i - 1;
        while (c >= 0 && end[c] < end[i]) c = parent[c];
        parent[i] = c;
        depth[i] = c >= 0 ? depth[c] + 1 : 0;
    }
    Py_END_ALLOW_THREADS
done:
    while (got-- > 0) PyBuffer_Release(&b[got]);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* tightest(start, end, first, pp, pp_parent, se_rank, se_thread, se_end, parent, depth):
 * the C pass of containers.tightest, ranges in (thread, start, -end) order
 *   start, end  int64[n]; first uint8[n]: 1 at each thread's first range
 *   pp          uint8[n]: 1 for a push/pop range, 0 for a start/end one
 *   pp_parent   int64[n]: a push/pop range's innermost push/pop container (-1: none)
 *   se_rank     int64[q]: the k-th start/end range's rank among them by (thread, end)
 *   se_thread, se_end  int64[q]: thread (0, 1, ... in range order) and end by rank
 *   parent      int64[n] (writable): the shorter (of equal ones the later) of the
 *               innermost push/pop container and the shortest earlier start/end range
 *               of the thread that ends no earlier; depth int64[n] (writable)
 * A start/end range's push/pop container is found up the push/pop chain from the last
 * push/pop range before it. A Fenwick tree over the reversed ranks holds, per node,
 * the best start/end range inserted so far (the earlier ones): those of the range's
 * thread that end no earlier are a prefix of it (one binary search for where). */
static inline int better(const int64_t *start, const int64_t *end, int64_t a, int64_t b) {
    if (a < 0) return 0;
    if (b < 0) return 1;
    int64_t da = end[a] - start[a], db = end[b] - start[b];
    return da < db || (da == db && a > b);
}

static PyObject *tightest(PyObject *self, PyObject *args) {
    PyObject *o[10];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9]))
        return NULL;
    (void)self;
    Py_buffer b[10];
    if (PyObject_GetBuffer(o[0], &b[0], PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = b[0].len / 8, q = 0;
    int got = 1;
    int64_t *tree = NULL;
    if (b[0].len % 8) {
        PyErr_SetString(PyExc_ValueError, "start: not int64");
        goto done;
    }
    static const char *what[10] = {"start", "end", "first", "pp", "pp_parent", "se_rank", "se_thread", "se_end",
                                   "parent", "depth"};
    for (; got < 10; got++) {
        if (got == 5) {  /* se_rank: its length q is that of the start/end arrays */
            if (PyObject_GetBuffer(o[5], &b[5], PyBUF_C_CONTIGUOUS) < 0) goto done;
            q = b[5].len / 8;
            if (b[5].len % 8) {
                got++;
                PyErr_SetString(PyExc_ValueError, "se_rank: not int64");
                goto done;
            }
            continue;
        }
        Py_ssize_t len = got == 6 || got == 7 ? q : n, item = got == 2 || got == 3 ? 1 : 8;
        if (get(o[got], &b[got], got >= 8, item, len, what[got]) < 0) goto done;
    }
    const int64_t *start = b[0].buf, *end = b[1].buf, *pp_parent = b[4].buf;
    const uint8_t *first = b[2].buf, *pp = b[3].buf;
    const int64_t *se_rank = b[5].buf, *se_thread = b[6].buf, *se_end = b[7].buf;
    int64_t *parent = b[8].buf, *depth = b[9].buf;
    Py_ssize_t seen = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (pp_parent[i] < -1 || pp_parent[i] >= i || (pp_parent[i] >= 0 && !pp[pp_parent[i]])) {
            PyErr_SetString(PyExc_ValueError, "tightest: pp_parent is not an earlier push/pop range");
            goto done;
        }
        seen += !pp[i];
    }
    for (Py_ssize_t k = 0; k < q; k++)
        if (se_rank[k] < 0 || se_rank[k] >= q) seen = -1;
    if (seen != q) {
        PyErr_SetString(PyExc_ValueError, "tightest: the start/end ranks do not match the ranges");
        goto done;
    }
    tree = PyMem_Malloc((size_t)(q + 1) * sizeof(int64_t));
    if (tree == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t x = 0; x <= q; x++) tree[x] = -1;
    int64_t thread = -1, last_pp = -1, se_max_end = INT64_MIN;
    Py_ssize_t k = 0;  /* start/end ranges so far */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (first[i] || i == 0) {
            thread++;
            last_pp = -1;
            se_max_end = INT64_MIN;  /* the latest end of the thread's start/end ranges so far */
        }
        int64_t up;
        if (pp[i]) {
            up = pp_parent[i];
        } else {
            up = last_pp;
            while (up >= 0 && end[up] < end[i]) up = pp_parent[up];
        }
        int64_t best = -1;
        if (se_max_end >= end[i]) {  /* else no start/end range of the thread so far contains it */
            /* lowest rank with (thread, end) no less than this range's */
            Py_ssize_t lo = 0, hi = q;
            while (lo < hi) {
                Py_ssize_t m = lo + (hi - lo) / 2;
                if (se_thread[m] < thread || (se_thread[m] == thread && se_end[m] < end[i])) lo = m + 1;
                else hi = m;
            }
            for (Py_ssize_t x = q - lo; x > 0; x -= x & -x)  /* reversed ranks 0 .. q-1-lo, 1-based */
                if (better(start, end, tree[x], best)) best = tree[x];
        }
        int64_t p = better(start, end, best, up) ? best : up;
        parent[i] = p;
        depth[i] = p >= 0 ? depth[p] + 1 : 0;
        if (pp[i]) {
            last_pp = i;
        } else {
            for (Py_ssize_t x = q - se_rank[k]; x <= q; x += x & -x)
                if (better(start, end, (int64_t)i, tree[x])) tree[x] = i;
            k++;
            if (end[i] > se_max_end) se_max_end = end[i];
        }
    }
    Py_END_ALLOW_THREADS
done:
    PyMem_Free(tree);
    while (got-- > 0) PyBuffer_Release(&b[got]);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"enclosing", enclosing, METH_VARARGS, "Innermost enclosing range and depth of sorted ranges (see _nest.c)."},
    {"tightest", tightest, METH_VARARGS, "Tightest container and depth of sorted ranges (see containers.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nest", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nest(void) { return PyModule_Create(&module); }
