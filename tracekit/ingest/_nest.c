/* Nesting of NVTX ranges, in C: the compiled twin of nsys._enclosing and
 * nsys._chain_length (same inputs, same outputs), one sequential pass instead of
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

/* tightest(rank, lower, key, by_key, parent, depth): the C pass of containers.tightest
 *   rank    int64[n]: rank of each range's end among all (thread, end)
 *   lower   int64[n]: the lowest rank of the range's own (thread, end)
 *   key     int64[n]: rank of the range in the order of preference (shortest first)
 *   by_key  int64[n]: the range of each preference rank (key's inverse)
 *   parent  int64[n] (writable): position of the preferred earlier range with a rank
 *           at least lower (-1: none); depth int64[n] (writable): its depth + 1
 * A Fenwick tree of prefix minima of key over reversed ranks: the ranges inserted so
 * far (the earlier ones) whose rank is at least lower are a prefix of it. */
static PyObject *tightest(PyObject *self, PyObject *args) {
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    (void)self;
    Py_buffer b[6];
    if (PyObject_GetBuffer(o[0], &b[0], PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = b[0].len / 8;
    int got = 1;
    int64_t *tree = NULL;
    if (b[0].len % 8) {
        PyErr_SetString(PyExc_ValueError, "rank: not int64");
        goto done;
    }
    static const char *what[6] = {"rank", "lower", "key", "by_key", "parent", "depth"};
    for (; got < 6; got++)
        if (get(o[got], &b[got], got >= 4, 8, n, what[got]) < 0) goto done;
    const int64_t *rank = b[0].buf, *lower = b[1].buf, *key = b[2].buf, *by_key = b[3].buf;
    int64_t *parent = b[4].buf, *depth = b[5].buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (rank[i] < 0 || rank[i] >= n || lower[i] < 0 || lower[i] > rank[i] || key[i] < 0 || key[i] >= n ||
            by_key[i] < 0 || by_key[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "tightest: ranks out of range");
            goto done;
        }
    }
    tree = PyMem_Malloc((size_t)(n + 1) * sizeof(int64_t));
    if (tree == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t x = 0; x <= n; x++) tree[x] = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t best = n;
        for (int64_t x = n - lower[i]; x > 0; x -= x & -x)  /* reversed ranks 0 .. n-1-lower, 1-based */
            if (tree[x] < best) best = tree[x];
        int64_t p = best < n ? by_key[best] : -1;
        parent[i] = p;
        depth[i] = p >= 0 ? depth[p] + 1 : 0;
        for (int64_t x = n - rank[i]; x <= n; x += x & -x)
            if (key[i] < tree[x]) tree[x] = key[i];
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
