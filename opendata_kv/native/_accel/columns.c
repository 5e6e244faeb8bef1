/* Column passes of index upkeep (store/indexes/maintainers.py) for put_many's common case, a
 * batch of new records: the same results as the Python loops they stand in for, one C loop
 * a column instead of a Python comprehension or loop with a call a record.
 *
 * entry_column(values, field, strings): the entry key of each value of a single-field index
 * from the keys its plan already knows (Maintainer.column's fast path): strings.get(v) where
 * v = value.get(field) is exactly a str, else None; None for the whole column when a value is
 * not exactly a dict (the caller then takes the field of each value the general way).
 *
 * count_into(deltas, groups, keys, index, sign): a count index's groups added to its deltas
 * record by record in order (CountMaintainer.change_columns without an amount): a group
 * seen first gets [index, sign, 0, 0, 0, key], a group seen before has sign added to its
 * count and key set to this record's; None groups (no entry) are skipped.
 *
 * settle_counts(deltas, known, counts, put_keys, put_data, staged): CountMaintainer.settle for
 * the groups whose change is a count only (no sum) and whose value the writer knows (`known`:
 * None or a Sum of a count only): the new count's row from `counts` (its state and bytes)
 * appended to put_keys / put_data and its state to staged; groups with no change skipped;
 * the others (not known, sums, a count `counts` lacks) returned, in order, for settle.
 *
 * indexed_puts(put_type, found, keys, data, typed): Batch.indexed_ops's triples of a batch of
 * plain puts, each Put built as tuple.__new__(Put, ...) builds it, in one loop. */
#include "accel.h"

static PyObject *f_entry_column(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 3 || !PyList_CheckExact(args[0]) || !PyDict_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "entry_column(values: list, field, strings: dict)");
        return NULL;
    }
    PyObject *values = args[0], *field = args[1], *strings = args[2];
    Py_ssize_t count = PyList_GET_SIZE(values);
    for (Py_ssize_t i = 0; i < count; i++)
        if (!PyDict_CheckExact(PyList_GET_ITEM(values, i))) Py_RETURN_NONE;
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* a dict key of another type may compare with the field name in Python code, which
         * could change the lists: the value held, the list's size checked each time */
        if (i >= PyList_GET_SIZE(values)) {
            PyErr_SetString(PyExc_RuntimeError, "entry_column: the values changed size");
            goto fail;
        }
        PyObject *value = Py_NewRef(PyList_GET_ITEM(values, i));
        PyObject *found = PyDict_GetItemWithError(value, field);
        PyObject *entry = NULL;
        if (found != NULL && PyUnicode_CheckExact(found)) {
            Py_INCREF(found);
            entry = PyDict_GetItemWithError(strings, found);
            Py_DECREF(found);
        }
        Py_DECREF(value);
        if (entry == NULL && PyErr_Occurred()) goto fail;
        PyList_SET_ITEM(out, i, Py_NewRef(entry != NULL ? entry : Py_None));
    }
    return out;
fail:
    Py_DECREF(out); /* the items not set yet are NULL: the list's dealloc skips them */
    return NULL;
}

static PyObject *f_count_into(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 5 || !PyDict_CheckExact(args[0]) || !PyList_CheckExact(args[1]) ||
        !PyList_CheckExact(args[2]) || !PyLong_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "count_into(deltas: dict, groups: list, keys: list, index, sign: int)");
        return NULL;
    }
    PyObject *deltas = args[0], *groups = args[1], *keys = args[2], *index = args[3];
    PyObject *sign = args[4];
    Py_ssize_t count = PyList_GET_SIZE(groups);
    if (PyList_GET_SIZE(keys) != count) {
        PyErr_SetString(PyExc_ValueError, "count_into: groups and keys differ in length");
        return NULL;
    }
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i >= PyList_GET_SIZE(groups) || i >= PyList_GET_SIZE(keys)) {
            PyErr_SetString(PyExc_RuntimeError, "count_into: the columns changed size");
            Py_DECREF(zero);
            return NULL;
        }
        PyObject *group = PyList_GET_ITEM(groups, i), *key = PyList_GET_ITEM(keys, i);
        if (group == Py_None) continue;
        Py_INCREF(group);
        Py_INCREF(key);
        PyObject *delta = PyDict_GetItemWithError(deltas, group);
        int ok = 0;
        if (delta == NULL) {
            if (!PyErr_Occurred()) {
                PyObject *row = PyList_New(6);
                if (row != NULL) {
                    PyList_SET_ITEM(row, 0, Py_NewRef(index));
                    PyList_SET_ITEM(row, 1, Py_NewRef(sign));
                    PyList_SET_ITEM(row, 2, Py_NewRef(zero));
                    PyList_SET_ITEM(row, 3, Py_NewRef(zero));
                    PyList_SET_ITEM(row, 4, Py_NewRef(zero));
                    PyList_SET_ITEM(row, 5, Py_NewRef(key));
                    ok = PyDict_SetItem(deltas, group, row) == 0;
                    Py_DECREF(row);
                }
            }
        } else if (PyList_CheckExact(delta) && PyList_GET_SIZE(delta) == 6) {
            Py_INCREF(delta);
            PyObject *total = PyNumber_Add(PyList_GET_ITEM(delta, 1), sign);
            if (total != NULL) {
                ok = PyList_SetItem(delta, 1, total) == 0 &&
                     PyList_SetItem(delta, 5, Py_NewRef(key)) == 0;
            }
            Py_DECREF(delta);
        } else {
            PyErr_SetString(PyExc_TypeError, "count_into: a delta is not a list of 6");
        }
        Py_DECREF(group);
        Py_DECREF(key);
        if (!ok) {
            Py_DECREF(zero);
            return NULL;
        }
    }
    Py_DECREF(zero);
    Py_RETURN_NONE;
}

/* whether `v` is an exact int equal to 0 (-1: not an exact int) */
static int int_zero(PyObject *v) {
    if (!PyLong_CheckExact(v)) return -1;
    return PyObject_IsTrue(v) == 0;
}

static PyObject *f_settle_counts(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 6 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1]) ||
        !PyDict_CheckExact(args[2]) || !PyList_CheckExact(args[3]) ||
        !PyList_CheckExact(args[4]) || !PyDict_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "settle_counts(deltas, known, counts: dict, put_keys, put_data: list, "
                        "staged: dict)");
        return NULL;
    }
    PyObject *deltas = args[0], *known = args[1], *counts = args[2];
    PyObject *put_keys = args[3], *put_data = args[4], *staged = args[5];
    PyObject *left = PyList_New(0);
    if (left == NULL) return NULL;
    Py_ssize_t pos = 0;
    PyObject *group, *delta;
    /* the dict is not changed while it is walked: only other containers are written */
    while (PyDict_Next(deltas, &pos, &group, &delta)) {
        int fast = PyList_CheckExact(delta) && PyList_GET_SIZE(delta) == 6;
        PyObject *count = fast ? PyList_GET_ITEM(delta, 1) : NULL;
        if (fast) {
            int rest = 1; /* ints, floats and fine all 0 */
            for (int i = 2; i < 5 && rest == 1; i++) rest = int_zero(PyList_GET_ITEM(delta, i));
            int none = int_zero(count);
            if (rest == 1 && none == 1) continue; /* no change: no row (as settle) */
            fast = rest == 1 && none == 0;
        }
        PyObject *made = NULL;
        if (fast) {
            PyObject *have = PyDict_GetItemWithError(known, group); /* borrowed */
            if (have == NULL) {
                if (PyErr_Occurred()) goto fail;
                fast = 0; /* not known: read, then settled in Python */
            } else {
                PyObject *total;
                if (have == Py_None) {
                    total = Py_NewRef(count);
                } else if (PyTuple_Check(have) && PyTuple_GET_SIZE(have) == 4 &&
                           int_zero(PyTuple_GET_ITEM(have, 1)) == 1 &&
                           int_zero(PyTuple_GET_ITEM(have, 2)) == 1 &&
                           int_zero(PyTuple_GET_ITEM(have, 3)) == 1 &&
                           PyLong_CheckExact(PyTuple_GET_ITEM(have, 0))) {
                    total = PyNumber_Add(PyTuple_GET_ITEM(have, 0), count);
                    if (total == NULL) goto fail;
                } else {
                    total = NULL;
                }
                if (total != NULL) {
                    made = PyDict_GetItemWithError(counts, total); /* borrowed */
                    Py_DECREF(total);
                    if (made == NULL && PyErr_Occurred()) goto fail;
                }
                fast = made != NULL && PyTuple_Check(made) && PyTuple_GET_SIZE(made) == 2;
            }
        }
        if (!fast) {
            if (PyList_Append(left, group) < 0) goto fail;
            continue;
        }
        if (PyList_Append(put_keys, group) < 0 ||
            PyList_Append(put_data, PyTuple_GET_ITEM(made, 1)) < 0 ||
            PyDict_SetItem(staged, group, PyTuple_GET_ITEM(made, 0)) < 0)
            goto fail;
    }
    return left;
fail:
    Py_DECREF(left);
    return NULL;
}

/* indexed_puts(put_type, found, keys, data, typed): Batch.indexed_ops for a batch of puts
 * only, each with upkeep (found: (position, record type) of every op, in order) and its
 * typed value kept (typed: position -> value): the list of (key, record type,
 * put_type(key, data, None, value, None)), built as tuple.__new__ builds a tuple subclass;
 * None when the columns are not that (the caller then builds them in Python) */
static PyObject *f_indexed_puts(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 5 || !PyType_Check(args[0]) || !PyList_CheckExact(args[1]) ||
        !PyList_CheckExact(args[2]) || !PyList_CheckExact(args[3]) || !PyDict_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "indexed_puts(put_type, found: list, keys: list, data: list, typed: dict)");
        return NULL;
    }
    PyTypeObject *put_type = (PyTypeObject *)args[0];
    PyObject *found = args[1], *keys = args[2], *data = args[3], *typed = args[4];
    Py_ssize_t count = PyList_GET_SIZE(keys);
    if (!PyType_IsSubtype(put_type, &PyTuple_Type) ||
        put_type->tp_basicsize != PyTuple_Type.tp_basicsize || PyList_GET_SIZE(found) != count ||
        PyList_GET_SIZE(data) != count || PyDict_GET_SIZE(typed) != count)
        Py_RETURN_NONE;
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PyList_GET_ITEM(found, i);
        PyObject *key = PyList_GET_ITEM(keys, i), *row = PyList_GET_ITEM(data, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyBytes_CheckExact(key) ||
            !PyBytes_CheckExact(row) || !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 0)) ||
            PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0)) != i) {
            if (PyErr_Occurred()) goto fail;
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *at = PyTuple_GET_ITEM(pair, 0); /* the int i itself: the dict's key */
        PyObject *value = PyDict_GetItemWithError(typed, at); /* int keys: no Python code */
        if (value == NULL) {
            if (PyErr_Occurred()) goto fail;
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *put = put_type->tp_alloc(put_type, 5);
        if (put == NULL) goto fail;
        PyTuple_SET_ITEM(put, 0, Py_NewRef(key));
        PyTuple_SET_ITEM(put, 1, Py_NewRef(row));
        PyTuple_SET_ITEM(put, 2, Py_NewRef(Py_None));
        PyTuple_SET_ITEM(put, 3, Py_NewRef(value));
        PyTuple_SET_ITEM(put, 4, Py_NewRef(Py_None));
        PyObject *triple = PyTuple_New(3);
        if (triple == NULL) {
            Py_DECREF(put);
            goto fail;
        }
        PyTuple_SET_ITEM(triple, 0, Py_NewRef(key));
        PyTuple_SET_ITEM(triple, 1, Py_NewRef(PyTuple_GET_ITEM(pair, 1)));
        PyTuple_SET_ITEM(triple, 2, put);
        PyList_SET_ITEM(out, i, triple);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef column_methods[] = {
    {"entry_column", (PyCFunction)(void (*)(void))f_entry_column, METH_FASTCALL,
     "Maintainer.column's fast path: each value's single-field entry key from `strings`."},
    {"count_into", (PyCFunction)(void (*)(void))f_count_into, METH_FASTCALL,
     "CountMaintainer.change_columns without an amount: groups added to deltas in order."},
    {"indexed_puts", (PyCFunction)(void (*)(void))f_indexed_puts, METH_FASTCALL,
     "Batch.indexed_ops for puts only: (key, record type, Put) of each, built in C."},
    {"settle_counts", (PyCFunction)(void (*)(void))f_settle_counts, METH_FASTCALL,
     "CountMaintainer.settle's count-only groups the writer knows; the others returned."},
    {NULL, NULL, 0, NULL},
};

int accel_columns_add(PyObject *module) {
    return PyModule_AddFunctions(module, column_methods);
}
