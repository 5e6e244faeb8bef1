/* msgpack of the common value types in C (issue 40): the bytes msgpack.Packer(use_bin_type=True,
 * datetime=True).pack writes for exact dict, list, tuple, str, bytes, int, float, bool and None,
 * and no answer (None) for anything else, so that the caller's own encoder decides (and raises
 * its own errors): other types, ints past 64 bits, strings that are not UTF-8, nesting past
 * msgpack's limit, a value too long or too deep for the caller's decode caps to pass unread. */
#include "accel.h"

#include <limits.h>
#include <string.h>

/* msgpack-python's DEFAULT_RECURSE_LIMIT: deeper values raise there, so are not ours */
#define PACK_NEST_LIMIT 511

typedef struct {
    char *buf; /* `small` until the value outgrows it, then PyMem memory */
    char *small;
    Py_ssize_t len, cap;
    Py_ssize_t max_len; /* past this many bytes: not ours (the caps' uncapped size) */
    int max_depth;      /* this many nested containers or more: not ours */
} Packer;

enum { PACK_OK = 0, PACK_DECLINE = 1, PACK_ERROR = -1 };

static int reserve(Packer *p, Py_ssize_t more) {
    if (p->len + more <= p->cap) return PACK_OK;
    if (p->len + more > p->max_len) return PACK_DECLINE;
    Py_ssize_t cap = p->cap * 2;
    while (cap < p->len + more) cap *= 2;
    char *grown = p->buf == p->small ? PyMem_Malloc((size_t)cap) : PyMem_Realloc(p->buf, (size_t)cap);
    if (grown != NULL && p->buf == p->small) memcpy(grown, p->small, (size_t)p->len);
    if (grown == NULL) {
        PyErr_NoMemory();
        return PACK_ERROR;
    }
    p->buf = grown;
    p->cap = cap;
    return PACK_OK;
}

static int put_raw(Packer *p, const void *data, Py_ssize_t size) {
    int r = reserve(p, size);
    if (r) return r;
    memcpy(p->buf + p->len, data, (size_t)size);
    p->len += size;
    return PACK_OK;
}

static int put_head(Packer *p, uint8_t marker, uint64_t value, int width) {
    uint8_t head[9];
    head[0] = marker;
    for (int i = 0; i < width; i++) head[1 + i] = (uint8_t)(value >> (8 * (width - 1 - i)));
    return put_raw(p, head, 1 + width);
}

/* a length header: the fix form under `fix_max` (marker `fix | n`), else 8/16/32-bit forms
 * (m8 0 when the type has no 8-bit form) */
static int put_length(Packer *p, Py_ssize_t n, uint8_t fix, Py_ssize_t fix_max, uint8_t m8,
                      uint8_t m16, uint8_t m32) {
    if (n < fix_max) return put_head(p, (uint8_t)(fix | n), 0, 0);
    if (m8 && n < 256) return put_head(p, m8, (uint64_t)n, 1);
    if (n < 65536) return put_head(p, m16, (uint64_t)n, 2);
    if ((uint64_t)n <= 0xffffffffULL) return put_head(p, m32, (uint64_t)n, 4);
    return PACK_DECLINE;
}

static int put_int(Packer *p, PyObject *o) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (x == -1 && PyErr_Occurred()) return PACK_ERROR;
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(o);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear(); /* past 64 bits: msgpack's OverflowError, the caller's to raise */
            return PACK_DECLINE;
        }
        return put_head(p, 0xcf, u, 8);
    }
    if (overflow < 0) return PACK_DECLINE;
    if (x < -(1LL << 5)) {
        if (x < -(1LL << 15)) {
            if (x < -(1LL << 31)) return put_head(p, 0xd3, (uint64_t)x, 8);
            return put_head(p, 0xd2, (uint64_t)x, 4);
        }
        if (x < -(1LL << 7)) return put_head(p, 0xd1, (uint64_t)x, 2);
        return put_head(p, 0xd0, (uint64_t)x, 1);
    }
    if (x < (1LL << 7)) return put_head(p, (uint8_t)x, 0, 0); /* fixint, negative included */
    if (x < (1LL << 16)) {
        if (x < (1LL << 8)) return put_head(p, 0xcc, (uint64_t)x, 1);
        return put_head(p, 0xcd, (uint64_t)x, 2);
    }
    if (x < (1LL << 32)) return put_head(p, 0xce, (uint64_t)x, 4);
    return put_head(p, 0xcf, (uint64_t)x, 8);
}

static int pack_obj(Packer *p, PyObject *o, int depth) {
    PyTypeObject *t = Py_TYPE(o);
    int r;
    if (o == Py_None) return put_head(p, 0xc0, 0, 0);
    if (o == Py_True) return put_head(p, 0xc3, 0, 0);
    if (o == Py_False) return put_head(p, 0xc2, 0, 0);
    if (t == &PyLong_Type) return put_int(p, o);
    if (t == &PyFloat_Type) {
        double d = PyFloat_AS_DOUBLE(o);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return put_head(p, 0xcb, bits, 8);
    }
    if (t == &PyUnicode_Type) {
        Py_ssize_t size;
        const char *s = PyUnicode_AsUTF8AndSize(o, &size);
        if (s == NULL) {
            PyErr_Clear(); /* surrogates: msgpack's UnicodeEncodeError, the caller's */
            return PACK_DECLINE;
        }
        if ((r = put_length(p, size, 0xa0, 32, 0xd9, 0xda, 0xdb))) return r;
        return put_raw(p, s, size);
    }
    if (t == &PyBytes_Type) {
        Py_ssize_t size = PyBytes_GET_SIZE(o);
        if ((r = put_length(p, size, 0, 0, 0xc4, 0xc5, 0xc6))) return r;
        return put_raw(p, PyBytes_AS_STRING(o), size);
    }
    if (t == &PyList_Type || t == &PyTuple_Type || t == &PyDict_Type) {
        if (depth + 1 >= p->max_depth || depth >= PACK_NEST_LIMIT) return PACK_DECLINE;
        if (Py_EnterRecursiveCall(" in msgpack packing")) return PACK_ERROR;
        if (t == &PyDict_Type) {
            Py_ssize_t pos = 0;
            PyObject *k, *v;
            r = put_length(p, PyDict_GET_SIZE(o), 0x80, 16, 0, 0xde, 0xdf);
            while (!r && PyDict_Next(o, &pos, &k, &v)) {
                Py_INCREF(k); /* a __del__ run by a realloc cannot take them from us */
                Py_INCREF(v);
                r = pack_obj(p, k, depth + 1);
                if (!r) r = pack_obj(p, v, depth + 1);
                Py_DECREF(k);
                Py_DECREF(v);
            }
        } else {
            PyObject *seq = o;
            Py_ssize_t n = t == &PyList_Type ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
            r = put_length(p, n, 0x90, 16, 0, 0xdc, 0xdd);
            for (Py_ssize_t i = 0; !r && i < n; i++) {
                /* a list may shrink under us only through Python code, which none here runs */
                PyObject *item = t == &PyList_Type ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i);
                Py_INCREF(item);
                r = pack_obj(p, item, depth + 1);
                Py_DECREF(item);
            }
        }
        Py_LeaveRecursiveCall();
        return r;
    }
    return PACK_DECLINE; /* datetimes, subclasses, anything else: the caller's encoder */
}

/* value's msgpack bytes when it holds only the common types, is at most max_len bytes long and
 * nests fewer than max_depth containers (top level counted); Py_None (a new reference) when
 * not (the caller encodes it its own way); NULL on error */
PyObject *accel_pack(PyObject *value, Py_ssize_t max_len, int max_depth) {
    if (value == Py_None) Py_RETURN_NONE; /* no value: the caller's encoder says so */
    char small[256];
    Packer p = {small, small, 0, (Py_ssize_t)sizeof small, max_len, max_depth};
    int r = pack_obj(&p, value, 0);
    PyObject *out = NULL;
    if (r == PACK_OK && p.len <= max_len)
        out = PyBytes_FromStringAndSize(p.buf, p.len);
    else if (r != PACK_ERROR)
        out = Py_NewRef(Py_None);
    if (p.buf != small) PyMem_Free(p.buf);
    return out;
}

/* pack_value(value, max_len, max_depth) -> bytes | None: accel_pack's answer */
PyObject *accel_pack_value(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 3 || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "pack_value(value, max_len: int, max_depth: int)");
        return NULL;
    }
    Py_ssize_t max_len = PyLong_AsSsize_t(args[1]);
    long max_depth = PyLong_AsLong(args[2]);
    if ((max_len == -1 || max_depth == -1) && PyErr_Occurred()) return NULL;
    return accel_pack(args[0], max_len, max_depth > INT_MAX ? INT_MAX : (int)max_depth);
}
