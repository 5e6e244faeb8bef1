/* The byte layouts wire.py reads, parsed in C with the same checks and the same errors:
 * bytes = i32 BE length + bytes; option = flag byte (0 none, 1 some) + value; list = i32 BE
 * count + items; KeyValue = key, value, u64 seq, i64 create_ts, option<i64> expire_ts.
 * Every read is bounded by `size`; tests/test_native_accel_wire.py fuzzes them against wire.py. */
#include "accel.h"

PyObject *accel_internal_error;

static inline int32_t be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}

static PyObject *past_end(void) {
    PyErr_SetString(accel_internal_error, "read past end of rust buffer");
    return NULL;
}

static PyObject *bad_flag(void) {
    PyErr_SetString(accel_internal_error, "Unexpected flag byte for optional type");
    return NULL;
}

/* wire._exact: 0, or -1 with RuntimeError when pos is not the end (the count may be < 0) */
static int exact(int64_t pos, size_t size) {
    if (pos == (int64_t)size) return 0;
    PyErr_Format(PyExc_RuntimeError, "junk data left in buffer at end of consume_with_stream %lld",
                 (long long)((int64_t)size - pos));
    return -1;
}

PyObject *accel_parse_optional_bytes(const uint8_t *d, size_t size) {
    if (size == 0) return past_end();
    if (d[0] == 0) return exact(1, size) < 0 ? NULL : Py_NewRef(Py_None);
    if (d[0] != 1) return bad_flag();
    if (size < 5) return past_end();
    int32_t n = be32(d + 1);
    if (n < 0) {
        PyErr_SetString(accel_internal_error, "Unexpected negative byte string length");
        return NULL;
    }
    if ((size_t)n > size - 5) return past_end();
    if (exact(5 + (int64_t)n, size) < 0) return NULL;
    return PyBytes_FromStringAndSize((const char *)d + 5, n);
}

PyObject *accel_parse_point_row(const uint8_t *d, size_t size) {
    if (size == 0) return past_end();
    if (d[0] == 0) return exact(1, size) < 0 ? NULL : Py_NewRef(Py_None);
    if (d[0] != 1) return bad_flag();
    if (size < 5) return past_end();
    int32_t n = be32(d + 1);
    if (n < 0 || (size_t)n > size - 5) return past_end();
    size_t pos = 5 + (size_t)n;
    if (size - pos < 4) return past_end();
    n = be32(d + pos);
    pos += 4;
    if (n < 0 || (size_t)n > size - pos) return past_end();
    size_t start = pos, stop = pos + (size_t)n;
    if (size - stop <= 16) return past_end(); /* the flag after seq and create_ts */
    uint8_t flag = d[stop + 16];
    if (flag == 0) {
        if (exact((int64_t)stop + 17, size) < 0) return NULL;
        PyObject *value = PyBytes_FromStringAndSize((const char *)d + start, n);
        return value ? Py_BuildValue("(NO)", value, Py_None) : NULL;
    }
    if (flag == 1) {
        if (exact((int64_t)stop + 25, size) < 0) return NULL;
        PyObject *value = PyBytes_FromStringAndSize((const char *)d + start, n);
        return value ? Py_BuildValue("(NL)", value, (long long)be64(d + stop + 17)) : NULL;
    }
    return bad_flag();
}

/* one field of bytes at *pos into `list` (index i, or appended past the preallocation) */
static int take_bytes(const uint8_t *d, size_t size, size_t *pos, PyObject *list, Py_ssize_t i) {
    if (size - *pos < 4) return past_end(), -1;
    int32_t n = be32(d + *pos);
    *pos += 4;
    if (n < 0 || (size_t)n > size - *pos) return past_end(), -1;
    PyObject *item = PyBytes_FromStringAndSize((const char *)d + *pos, n);
    if (item == NULL) return -1;
    *pos += (size_t)n;
    if (i < PyList_GET_SIZE(list)) {
        PyList_SET_ITEM(list, i, item);
        return 0;
    }
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static int put_item(PyObject *list, Py_ssize_t i, PyObject *item) {
    if (item == NULL) return -1;
    if (i < PyList_GET_SIZE(list)) {
        PyList_SET_ITEM(list, i, item);
        return 0;
    }
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

PyObject *accel_parse_columns(const uint8_t *d, size_t size) {
    if (size < 4) return past_end();
    int32_t count = be32(d);
    if (count < 0) {
        PyErr_SetString(accel_internal_error, "Unexpected negative sequence length");
        return NULL;
    }
    /* a row takes at least 25 bytes: a huge count preallocates no more than the data holds
     * (rows past that are appended, and the buffer runs out before it succeeds) */
    Py_ssize_t room = (Py_ssize_t)((size - 4) / 25);
    Py_ssize_t prealloc = count < room ? count : room;
    PyObject *keys = PyList_New(prealloc), *values = PyList_New(prealloc);
    PyObject *expires = PyList_New(prealloc);
    if (keys == NULL || values == NULL || expires == NULL) goto fail;
    /* unset slots are NULL: list_dealloc copes if we fail part-way */
    size_t pos = 4;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (take_bytes(d, size, &pos, keys, i) < 0) goto fail;
        if (take_bytes(d, size, &pos, values, i) < 0) goto fail;
        if (size - pos <= 16) {
            past_end();
            goto fail;
        }
        uint8_t flag = d[pos + 16];
        PyObject *expire;
        if (flag == 0) {
            expire = Py_NewRef(Py_None);
            pos += 17;
        } else if (flag == 1) {
            if (size - pos < 25) {
                past_end();
                goto fail;
            }
            expire = PyLong_FromLongLong(be64(d + pos + 17));
            pos += 25;
        } else {
            bad_flag();
            goto fail;
        }
        if (put_item(expires, i, expire) < 0) goto fail;
    }
    if (exact((int64_t)pos, size) < 0) goto fail;
    return Py_BuildValue("(NNN)", keys, values, expires);
fail:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(expires);
    return NULL;
}
