/* Typed Records from a batch of scanned rows, for store/scan.py's fast path: the key fields
 * decoded for the common codecs (keys/codecs.py), the value with msgpack as
 * values/limits.py's limited_unpackb decodes a value within its uncapped size (or by a Python
 * batch function), and the Key and Record tuples built as tuple.__new__(cls, values) builds
 * them. A RecordDecoder is compiled once per record type plan by native/records.py.
 *
 * decode() returns None, with no exception, for any row it does not take (malformed or
 * truncated key, value bytes that are not one msgpack value, a type it leaves to msgpack
 * such as an extension, a value over the caps' reach): the caller then decodes the batch in
 * Python, which gives the precise error and the scan's on_error policy. Nothing is returned
 * half-decoded. tests/test_native_accel_records.py fuzzes it against the Python decoders. */
#include "accel.h"
#include <string.h>

/* key field codecs (native/records.py's FIELD_* constants) */
enum { F_UINT, F_INT, F_F64, F_BOOL, F_FIXED, F_STR, F_BYTES, F_TRAIL_STR, F_TRAIL_BYTES,
       F_VARUINT, F_INT63, F_TID, F_COUNT };
/* how values are made (native/records.py's VALUE_* constants) */
enum { V_NONE, V_RAW, V_MSGPACK, V_CALL, V_COUNT };

/* the C stack bound of nested msgpack containers: deeper values go back to Python */
#define MAX_NESTING 512
/* map keys remembered by a decoder, and the longest one */
#define NAMES 16
#define NAME_MAX_LEN 32

typedef struct {
    int kind;
    uint8_t mask;       /* 0xFF for desc(field): every byte read inverted */
    Py_ssize_t width;   /* fixed-width fields: byte count */
    int code_bits;      /* var_u32 / var_u64 */
    int max_extra;
    uint64_t max_value; /* var_u*: the largest value (limit - 1) */
} FieldOp;

typedef struct {
    PyObject_HEAD
    PyObject *head;           /* bytes every key starts with */
    FieldOp *ops;
    Py_ssize_t nfields;       /* -1: keys are not decoded (None) */
    PyTypeObject *key_class;
    PyTypeObject *record_class;
    int value_mode;
    PyObject *value_fn;       /* V_CALL: list of bytes -> list of values */
    PyObject *upgrade;        /* NULL or value -> value */
    Py_ssize_t max_bytes;     /* V_MSGPACK: longer values go back to Python */
    int max_depth;            /* V_MSGPACK: deeper containers go back to Python */
    PyObject *names[NAMES];   /* interned ASCII map keys seen lately (a record's field names) */
    int next_name;
} RecordDecoder;

/* --- keys ------------------------------------------------------------------------------- */

static inline uint64_t read_be(const uint8_t *p, Py_ssize_t width, uint8_t mask) {
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < width; i++) v = (v << 8) | (uint8_t)(p[i] ^ mask);
    return v;
}

/* keys/codecs.py's unescape of body ^ mask into out (room for n bytes): its length, or -1
 * when an 0x01 is not followed by 0x01 or 0x02 */
static Py_ssize_t unescape(const uint8_t *body, Py_ssize_t n, uint8_t mask, uint8_t *out) {
    Py_ssize_t o = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t b = body[i] ^ mask;
        if (b == 1) {
            if (i + 1 >= n) return -1;
            uint8_t c = body[++i] ^ mask;
            if (c != 1 && c != 2) return -1;
            b = c - 1;
        }
        out[o++] = b;
    }
    return o;
}

static PyObject *text_or_bytes(int as_text, const uint8_t *p, Py_ssize_t n) {
    return as_text ? PyUnicode_DecodeUTF8((const char *)p, n, NULL)
                   : PyBytes_FromStringAndSize((const char *)p, n);
}

/* bytes p[0:n] ^ mask, unescaped when `escaped`, as str or bytes; NULL when not valid */
static PyObject *span_value(int as_text, int escaped, const uint8_t *p, Py_ssize_t n,
                            uint8_t mask) {
    if (mask == 0 && (!escaped || memchr(p, 1, (size_t)n) == NULL)) return text_or_bytes(as_text, p, n);
    uint8_t small[256];
    uint8_t *buf = n <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc((size_t)n);
    if (buf == NULL) return PyErr_NoMemory();
    Py_ssize_t m;
    if (escaped) {
        m = unescape(p, n, mask, buf);
    } else {
        for (Py_ssize_t i = 0; i < n; i++) buf[i] = p[i] ^ mask;
        m = n;
    }
    PyObject *out = m < 0 ? NULL : text_or_bytes(as_text, buf, m);
    if (buf != small) PyMem_Free(buf);
    return out;
}

/* one field of key k (length len) at *pos: a new reference, *pos moved past it; NULL when the
 * bytes are not a valid encoding (an exception may be set: the caller clears it) */
static PyObject *key_field(const FieldOp *op, const uint8_t *k, Py_ssize_t len, Py_ssize_t *pos) {
    Py_ssize_t at = *pos, left = len - at;
    const uint8_t *p = k + at;
    uint8_t mask = op->mask;
    switch (op->kind) {
    case F_UINT:
    case F_INT:
    case F_F64:
    case F_BOOL:
    case F_FIXED:
    case F_INT63:
    case F_TID: {
        Py_ssize_t w = op->width;
        if (left < w) return NULL;
        *pos = at + w;
        if (op->kind == F_FIXED) return span_value(0, 0, p, w, mask);
        uint64_t raw = read_be(p, w, mask);
        if (op->kind == F_UINT) return PyLong_FromUnsignedLongLong(raw);
        if (op->kind == F_INT) {
            if (w == 4) return PyLong_FromLong((long)(int32_t)(uint32_t)(raw ^ 0x80000000u));
            return PyLong_FromLongLong((long long)(int64_t)(raw ^ 0x8000000000000000ull));
        }
        if (op->kind == F_INT63 || op->kind == F_TID) { /* keys/idfields.py: url_key, tid */
            if (raw >> 63) return NULL;
            if (op->kind == F_INT63) return PyLong_FromUnsignedLongLong(raw);
            static const char alphabet[] = "234567abcdefghijklmnopqrstuvwxyz"; /* ids/tid.py */
            char tid[13];
            for (int i = 0; i < 13; i++) tid[i] = alphabet[(raw >> (60 - 5 * i)) & 31];
            return PyUnicode_FromStringAndSize(tid, 13);
        }
        if (op->kind == F_BOOL) {
            if (raw > 1) return NULL;
            return Py_NewRef(raw ? Py_True : Py_False);
        }
        uint64_t bits = raw >> 63 ? raw ^ 0x8000000000000000ull : ~raw;
        double d;
        memcpy(&d, &bits, sizeof d);
        return PyFloat_FromDouble(d);
    }
    case F_STR:
    case F_BYTES: {
        const uint8_t *end = memchr(p, mask, (size_t)left); /* the terminator: 0x00 ^ mask */
        if (end == NULL) return NULL;
        *pos = at + (end - p) + 1;
        return span_value(op->kind == F_STR, 1, p, end - p, mask);
    }
    case F_TRAIL_STR:
    case F_TRAIL_BYTES:
        *pos = len;
        return span_value(op->kind == F_TRAIL_STR, 0, p, left, mask);
    case F_VARUINT: {
        if (left < 1) return NULL;
        int low_bits = 8 - op->code_bits;
        uint8_t first = p[0] ^ mask;
        int extra = first >> low_bits;
        if (extra > op->max_extra || left < 1 + extra) return NULL;
        uint64_t v = first & ((1u << low_bits) - 1);
        for (int i = 1; i <= extra; i++) {
            if (v >> 56) return NULL; /* 2**64 or more: over every limit */
            v = (v << 8) | (uint8_t)(p[i] ^ mask);
        }
        if (v > op->max_value) return NULL;
        if (extra && (v >> (low_bits + 8 * (extra - 1))) == 0) return NULL; /* not the shortest */
        *pos = at + 1 + extra;
        return PyLong_FromUnsignedLongLong(v);
    }
    }
    return NULL;
}

/* a new instance of a tuple subclass holding items[0:n] (stolen), as tuple.__new__(cls, t) */
static PyObject *new_tuple(PyTypeObject *cls, PyObject **items, Py_ssize_t n) {
    PyObject *t = cls->tp_alloc(cls, n);
    if (t == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) Py_DECREF(items[i]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(t, i, items[i]);
    return t;
}

static PyObject *decode_key(RecordDecoder *self, PyObject *key, int prefixed) {
    if (!PyBytes_CheckExact(key)) return NULL;
    const uint8_t *k = (const uint8_t *)PyBytes_AS_STRING(key);
    Py_ssize_t len = PyBytes_GET_SIZE(key), hlen = PyBytes_GET_SIZE(self->head);
    if (len < hlen) return NULL;
    if (!prefixed && memcmp(k, PyBytes_AS_STRING(self->head), (size_t)hlen) != 0) return NULL;
    PyObject *small[16];
    Py_ssize_t n = self->nfields;
    PyObject **items = n <= 16 ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)n);
    if (items == NULL) return PyErr_NoMemory();
    Py_ssize_t pos = hlen, i = 0;
    PyObject *out = NULL;
    for (; i < n; i++) {
        items[i] = key_field(&self->ops[i], k, len, &pos);
        if (items[i] == NULL) break;
    }
    if (i == n && pos == len) {
        out = new_tuple(self->key_class, items, n);
    } else {
        while (i > 0) Py_DECREF(items[--i]);
    }
    if (items != small) PyMem_Free(items);
    return out;
}

/* --- msgpack values ------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *p, *end;
    int depth, max_depth;
    RecordDecoder *names; /* its interned map keys */
} Reader;

static inline uint64_t be(const uint8_t *p, int width) { return read_be(p, width, 0); }

static PyObject *mp_value(Reader *r);

static PyObject *mp_bytes(Reader *r, size_t n, int as_text) {
    if ((size_t)(r->end - r->p) < n) return NULL;
    PyObject *o = text_or_bytes(as_text, r->p, (Py_ssize_t)n);
    r->p += n;
    return o;
}

static PyObject *mp_array(Reader *r, size_t n) {
    if (++r->depth > r->max_depth || n > (size_t)(r->end - r->p)) return NULL;
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list == NULL) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *item = mp_value(r);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    r->depth--;
    return list;
}

/* a str map key of n bytes at r->p, interned as msgpack interns it: the decoder keeps the
 * last NAMES short ASCII ones, so a record's field names are not decoded and looked up in
 * the interned table row after row (a kept one is that table's own object) */
static PyObject *mp_name(Reader *r, size_t n) {
    if ((size_t)(r->end - r->p) < n) return NULL;
    RecordDecoder *d = r->names;
    if (n <= NAME_MAX_LEN) {
        for (int i = 0; i < NAMES && d->names[i] != NULL; i++) {
            PyObject *name = d->names[i];
            if ((size_t)PyUnicode_GET_LENGTH(name) == n && memcmp(PyUnicode_DATA(name), r->p, n) == 0) {
                r->p += n;
                return Py_NewRef(name);
            }
        }
    }
    PyObject *k = mp_bytes(r, n, 1);
    if (k == NULL) return NULL;
    PyUnicode_InternInPlace(&k);
    if (n <= NAME_MAX_LEN && PyUnicode_IS_COMPACT_ASCII(k) && PyUnicode_CHECK_INTERNED(k)) {
        Py_XSETREF(d->names[d->next_name], Py_NewRef(k));
        d->next_name = (d->next_name + 1) % NAMES;
    }
    return k;
}

/* as msgpack's unpack_callback_map_item: str keys interned, a later key replaces an earlier
 * one, an unhashable key fails */
static PyObject *mp_map(Reader *r, size_t n) {
    if (++r->depth > r->max_depth || n > (size_t)(r->end - r->p) / 2) return NULL;
    PyObject *dict = PyDict_New();
    if (dict == NULL) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *k;
        uint8_t b = r->p < r->end ? *r->p : 0;
        if (b >= 0xa0 && b <= 0xbf) { /* fixstr: the usual field name */
            r->p++;
            k = mp_name(r, b & 0x1f);
        } else {
            k = mp_value(r);
            if (k != NULL && PyUnicode_CheckExact(k)) PyUnicode_InternInPlace(&k);
        }
        if (k == NULL) goto fail;
        PyObject *v = mp_value(r);
        if (v == NULL) {
            Py_DECREF(k);
            goto fail;
        }
        int rc = PyDict_SetItem(dict, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (rc < 0) goto fail;
    }
    r->depth--;
    return dict;
fail:
    Py_DECREF(dict);
    return NULL;
}

/* one msgpack object as msgpack.unpackb(raw=False, strict_map_key=False) makes it; NULL for
 * truncated or invalid bytes and for extensions (timestamps: left to msgpack) */
static PyObject *mp_value(Reader *r) {
    if (r->p >= r->end) return NULL;
    uint8_t b = *r->p++;
    size_t left = (size_t)(r->end - r->p);
    if (b <= 0x7f) return PyLong_FromLong(b);
    if (b >= 0xe0) return PyLong_FromLong((int8_t)b);
    if (b <= 0x8f) return mp_map(r, b & 0x0f);
    if (b <= 0x9f) return mp_array(r, b & 0x0f);
    if (b <= 0xbf) return mp_bytes(r, b & 0x1f, 1);
    static const uint8_t widths[0x20] = {
        /* c0 */ 0, 0, 0, 0, 1, 2, 4, 0, 0, 0, 4, 8, 1, 2, 4, 8,
        /* d0 */ 1, 2, 4, 8, 0, 0, 0, 0, 0, 1, 2, 4, 2, 4, 2, 4};
    int w = widths[b - 0xc0];
    if (left < (size_t)w) return NULL;
    uint64_t n = be(r->p, w);
    r->p += w;
    switch (b) {
    case 0xc0: return Py_NewRef(Py_None);
    case 0xc2: return Py_NewRef(Py_False);
    case 0xc3: return Py_NewRef(Py_True);
    case 0xc4: case 0xc5: case 0xc6: return mp_bytes(r, n, 0);
    case 0xd9: case 0xda: case 0xdb: return mp_bytes(r, n, 1);
    case 0xca: {
        uint32_t bits = (uint32_t)n;
        float f;
        memcpy(&f, &bits, sizeof f);
        return PyFloat_FromDouble((double)f);
    }
    case 0xcb: {
        double d;
        memcpy(&d, &n, sizeof d);
        return PyFloat_FromDouble(d);
    }
    case 0xcc: case 0xcd: case 0xce: case 0xcf: return PyLong_FromUnsignedLongLong(n);
    case 0xd0: return PyLong_FromLong((int8_t)n);
    case 0xd1: return PyLong_FromLong((int16_t)n);
    case 0xd2: return PyLong_FromLong((int32_t)n);
    case 0xd3: return PyLong_FromLongLong((int64_t)n);
    case 0xdc: case 0xdd: return mp_array(r, n);
    case 0xde: case 0xdf: return mp_map(r, n);
    default: return NULL; /* 0xc1 (never used), extensions */
    }
}

static PyObject *decode_msgpack(RecordDecoder *self, PyObject *data) {
    if (!PyBytes_CheckExact(data) || PyBytes_GET_SIZE(data) > self->max_bytes) return NULL;
    const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(data);
    Reader r = {p, p + PyBytes_GET_SIZE(data), 0, self->max_depth, self};
    PyObject *value = mp_value(&r);
    if (value != NULL && r.p != r.end) Py_CLEAR(value); /* bytes after the value */
    return value;
}

/* --- the decoder ---------------------------------------------------------------------------- */

static void release(PyObject **objects, Py_ssize_t n) {
    if (objects == NULL) return;
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(objects[i]);
    PyMem_Free(objects);
}

/* decode(keys, values, prefixed) -> list of Records, or None when a row is not taken */
static PyObject *rd_decode(RecordDecoder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "decode(keys: list, values: list, prefixed: bool)");
        return NULL;
    }
    PyObject *keys = args[0], *values = args[1];
    int prefixed = PyObject_IsTrue(args[2]);
    if (prefixed < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(values) != n) {
        PyErr_SetString(PyExc_ValueError, "decode: as many values as keys are needed");
        return NULL;
    }
    if (n == 0) return PyList_New(0);
    PyObject **ks = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    PyObject **vs = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    PyObject *out = NULL;
    int failed = 0; /* 1: not taken (None), 2: an error */
    if (ks == NULL || vs == NULL) {
        PyErr_NoMemory();
        failed = 2;
        goto done;
    }
    /* keys first, then values, then upgrades, as the Python fast path orders them */
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        if (self->nfields < 0) {
            ks[i] = Py_NewRef(Py_None);
        } else if ((ks[i] = decode_key(self, PyList_GET_ITEM(keys, i), prefixed)) == NULL) {
            failed = 1;
        }
    }
    if (!failed && self->value_mode == V_CALL) {
        PyObject *decoded = PyObject_CallOneArg(self->value_fn, values);
        if (decoded == NULL) {
            failed = 2;
        } else if (!PyList_Check(decoded) || PyList_GET_SIZE(decoded) != n) {
            failed = 1;
        } else {
            for (Py_ssize_t i = 0; i < n; i++) vs[i] = Py_NewRef(PyList_GET_ITEM(decoded, i));
        }
        Py_XDECREF(decoded);
    }
    for (Py_ssize_t i = 0; i < n && !failed && self->value_mode != V_CALL; i++) {
        PyObject *data = PyList_GET_ITEM(values, i);
        if (self->value_mode == V_NONE) {
            vs[i] = Py_NewRef(Py_None);
        } else if (self->value_mode == V_RAW) {
            vs[i] = Py_NewRef(data);
        } else if ((vs[i] = decode_msgpack(self, data)) == NULL) {
            failed = 1;
        }
    }
    for (Py_ssize_t i = 0; i < n && !failed && self->upgrade != NULL; i++) {
        PyObject *upgraded = PyObject_CallOneArg(self->upgrade, vs[i]);
        if (upgraded == NULL) failed = 2;
        else Py_SETREF(vs[i], upgraded);
    }
    if (!failed && PyList_GET_SIZE(keys) != n) failed = 1; /* a callback shrank it */
    if (failed) goto done;
    out = PyList_New(n);
    if (out == NULL) {
        failed = 2;
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *items[3] = {ks[i], vs[i], Py_NewRef(PyList_GET_ITEM(keys, i))};
        ks[i] = vs[i] = NULL; /* stolen by new_tuple */
        PyObject *record = new_tuple(self->record_class, items, 3);
        if (record == NULL) {
            Py_CLEAR(out);
            failed = 2;
            goto done;
        }
        PyList_SET_ITEM(out, i, record);
    }
done:
    release(ks, n);
    release(vs, n);
    if (failed == 1) {
        PyErr_Clear(); /* a malformed row: Python decodes the batch and names it */
        Py_RETURN_NONE;
    }
    return failed ? NULL : out;
}

/* --- construction ---------------------------------------------------------------------------- */

/* a tuple subclass with no other state (tuple.__new__(cls, t) is then tp_alloc + items) */
static int plain_tuple_class(PyObject *cls, const char *what) {
    if (PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyTypeObject *t = (PyTypeObject *)cls;
        if (t->tp_basicsize == PyTuple_Type.tp_basicsize &&
            t->tp_itemsize == PyTuple_Type.tp_itemsize && t->tp_dictoffset == 0 &&
            t->tp_alloc != NULL)
            return 0;
    }
    PyErr_Format(PyExc_TypeError, "RecordDecoder: %s must be a tuple subclass with no slots", what);
    return -1;
}

static int read_op(PyObject *spec, FieldOp *op) {
    /* (kind, width, inverted, code_bits, max_extra, max_value) */
    unsigned long long max_value;
    int inverted;
    if (!PyTuple_Check(spec) ||
        !PyArg_ParseTuple(spec, "inpiiK", &op->kind, &op->width, &inverted, &op->code_bits,
                          &op->max_extra, &max_value)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "RecordDecoder: a field spec is a tuple");
        return -1;
    }
    op->mask = inverted ? 0xFF : 0x00;
    op->max_value = max_value;
    int fixed = op->kind == F_UINT || op->kind == F_INT || op->kind == F_F64 ||
                op->kind == F_BOOL || op->kind == F_FIXED || op->kind == F_INT63 ||
                op->kind == F_TID;
    int ok = op->kind >= 0 && op->kind < F_COUNT;
    if (op->kind == F_UINT) ok = op->width == 1 || op->width == 2 || op->width == 4 || op->width == 8;
    if (op->kind == F_INT) ok = op->width == 4 || op->width == 8;
    if (op->kind == F_F64 || op->kind == F_INT63 || op->kind == F_TID) ok = op->width == 8;
    if (op->kind == F_BOOL) ok = op->width == 1;
    if (op->kind == F_FIXED) ok = op->width >= 1;
    if (op->kind == F_VARUINT)
        ok = op->code_bits >= 1 && op->code_bits <= 7 && op->max_extra >= 0 && op->max_extra <= 8;
    if (!fixed) ok = ok && (op->kind == F_VARUINT || op->width == 0);
    if ((op->kind == F_TRAIL_STR || op->kind == F_TRAIL_BYTES) && inverted) ok = 0;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "RecordDecoder: bad field spec (kind %d, width %zd)",
                     op->kind, op->width);
        return -1;
    }
    return 0;
}

/* the functions it holds (an upgrade, a codec's batch decoder) may reach back to it */
static int rd_traverse(RecordDecoder *self, visitproc visit, void *arg) {
    Py_VISIT(self->key_class);
    Py_VISIT(self->record_class);
    Py_VISIT(self->value_fn);
    Py_VISIT(self->upgrade);
    for (int i = 0; i < NAMES; i++) Py_VISIT(self->names[i]);
    return 0;
}

static int rd_clear(RecordDecoder *self) {
    Py_CLEAR(self->head);
    Py_CLEAR(self->key_class);
    Py_CLEAR(self->record_class);
    Py_CLEAR(self->value_fn);
    Py_CLEAR(self->upgrade);
    for (int i = 0; i < NAMES; i++) Py_CLEAR(self->names[i]);
    return 0;
}

static void rd_dealloc(RecordDecoder *self) {
    PyObject_GC_UnTrack(self);
    rd_clear(self);
    PyMem_Free(self->ops);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *rd_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"head", "fields", "key_class", "record_class", "value_mode",
                            "value_fn", "upgrade", "max_bytes", "max_depth", NULL};
    PyObject *head, *fields, *key_class, *record_class, *value_fn, *upgrade;
    int value_mode, max_depth;
    Py_ssize_t max_bytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "SOOOiOOni:RecordDecoder", names, &head,
                                     &fields, &key_class, &record_class, &value_mode, &value_fn,
                                     &upgrade, &max_bytes, &max_depth))
        return NULL;
    if (!PyBytes_CheckExact(head) || plain_tuple_class(record_class, "record_class") < 0)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "RecordDecoder: head is bytes");
    if (value_mode < 0 || value_mode >= V_COUNT || (value_mode == V_CALL && !PyCallable_Check(value_fn)) ||
        (upgrade != Py_None && !PyCallable_Check(upgrade)) || max_bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "RecordDecoder: bad value mode, function or cap");
        return NULL;
    }
    Py_ssize_t nfields = -1;
    if (fields != Py_None) {
        if (!PyTuple_Check(fields) || plain_tuple_class(key_class, "key_class") < 0)
            return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "RecordDecoder: fields is a tuple");
        nfields = PyTuple_GET_SIZE(fields);
    }
    RecordDecoder *self = (RecordDecoder *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->nfields = nfields;
    if (nfields > 0) {
        self->ops = PyMem_Calloc((size_t)nfields, sizeof(FieldOp));
        if (self->ops == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t i = 0; i < nfields; i++) {
            if (read_op(PyTuple_GET_ITEM(fields, i), &self->ops[i]) < 0) {
                Py_DECREF(self);
                return NULL;
            }
        }
    }
    self->head = Py_NewRef(head);
    self->key_class = (PyTypeObject *)Py_NewRef(nfields < 0 ? (PyObject *)&PyTuple_Type : key_class);
    self->record_class = (PyTypeObject *)Py_NewRef(record_class);
    self->value_mode = value_mode;
    self->value_fn = value_mode == V_CALL ? Py_NewRef(value_fn) : NULL;
    self->upgrade = upgrade == Py_None ? NULL : Py_NewRef(upgrade);
    self->max_bytes = max_bytes;
    self->max_depth = max_depth < 0 ? 0 : max_depth > MAX_NESTING ? MAX_NESTING : max_depth;
    return (PyObject *)self;
}

static PyMethodDef rd_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))rd_decode, METH_FASTCALL,
     "decode(keys, values, prefixed) -> the rows' Records, or None when one is not taken."},
    {NULL}};

static PyTypeObject RecordDecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.RecordDecoder",
    .tp_basicsize = sizeof(RecordDecoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A record type's rows to Records, compiled by native/records.py.",
    .tp_new = rd_new,
    .tp_dealloc = (destructor)rd_dealloc,
    .tp_traverse = (traverseproc)rd_traverse,
    .tp_clear = (inquiry)rd_clear,
    .tp_methods = rd_methods,
};

/* --- async iteration over a scan's decoded rows ------------------------------------------- */

/* ScanRows(scan): `async for` over a store/scan.py Scan. A row already decoded is handed
 * over by a Ready awaitable that completes at once (no coroutine, no StopIteration raised):
 * the step an async generator takes ~170 ns for costs less than half of that. When the
 * buffer is used up, __anext__ returns the Scan's own __anext__() coroutine, which fills it
 * (or ends the iteration) in Python. Like Scan._records it reads the Scan's _buffer and _pos
 * at every step, so next_chunk() and has_more() may be mixed with it. ScanRows(scan, next)
 * is also the sync face's `for` iterator: decoded rows in C, `next()` (its Python step)
 * when the buffer is used up. */

typedef struct {
    PyObject_HEAD
    PyObject *value; /* the row, until awaited */
} Ready;

static void ready_dealloc(Ready *self) {
    Py_XDECREF(self->value);
    PyObject_Free(self);
}

static PySendResult ready_send(Ready *self, PyObject *arg, PyObject **result) {
    if (self->value == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse an already awaited scan step");
        *result = NULL;
        return PYGEN_ERROR;
    }
    *result = self->value;
    self->value = NULL;
    return PYGEN_RETURN;
}

/* the iterator protocol of an awaitable (yield from, send): StopIteration(row) */
static PyObject *ready_next(Ready *self) {
    PyObject *value;
    if (ready_send(self, Py_None, &value) == PYGEN_ERROR) return NULL;
    PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, value); /* a Record is a tuple */
    Py_DECREF(value);
    if (stop != NULL) {
        PyErr_SetObject(PyExc_StopIteration, stop);
        Py_DECREF(stop);
    }
    return NULL;
}

static PyObject *ready_send_method(Ready *self, PyObject *arg) { return ready_next(self); }

static PyObject *ready_throw(Ready *self, PyObject *args) {
    PyObject *type, *value = NULL, *tb = NULL;
    if (!PyArg_UnpackTuple(args, "throw", 1, 3, &type, &value, &tb)) return NULL;
    Py_CLEAR(self->value);
    if (PyExceptionInstance_Check(type)) {
        PyErr_SetObject((PyObject *)Py_TYPE(type), type);
    } else if (PyExceptionClass_Check(type)) {
        PyErr_SetObject(type, value);
    } else {
        PyErr_SetString(PyExc_TypeError, "exceptions must derive from BaseException");
    }
    return NULL;
}

static PyObject *ready_close(Ready *self, PyObject *unused) {
    Py_CLEAR(self->value);
    Py_RETURN_NONE;
}

static PyObject *ready_await(PyObject *self) { return Py_NewRef(self); }

static PyMethodDef ready_methods[] = {
    {"send", (PyCFunction)ready_send_method, METH_O, NULL},
    {"throw", (PyCFunction)ready_throw, METH_VARARGS, NULL},
    {"close", (PyCFunction)ready_close, METH_NOARGS, NULL},
    {NULL}};

static PyAsyncMethods ready_async = {.am_await = ready_await, .am_send = (sendfunc)ready_send};

static PyTypeObject ReadyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.Ready",
    .tp_basicsize = sizeof(Ready),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A scan step whose row is decoded already: awaiting it returns the row.",
    .tp_dealloc = (destructor)ready_dealloc,
    .tp_as_async = &ready_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)ready_next,
    .tp_methods = ready_methods,
};

typedef struct {
    PyObject_HEAD
    PyObject *scan;
    PyObject *next;  /* for `for`: the sync face's step that fills the buffer, or NULL */
    Ready *spare;    /* the last step handed out: used again once nobody else holds it */
} ScanRows;

static PyObject *str_buffer, *str_pos, *str_anext;

/* the Scan's next decoded row, its position moved past it; NULL with no exception when the
 * buffer is used up, NULL with one on an error */
static PyObject *buffered_row(ScanRows *self) {
    PyObject *buffer = PyObject_GetAttr(self->scan, str_buffer);
    if (buffer == NULL) return NULL;
    PyObject *at = PyObject_GetAttr(self->scan, str_pos);
    Py_ssize_t pos = at == NULL ? -1 : PyLong_AsSsize_t(at);
    Py_XDECREF(at);
    if ((pos == -1 && PyErr_Occurred()) || !PyList_CheckExact(buffer) || pos < 0 ||
        pos >= PyList_GET_SIZE(buffer)) {
        Py_DECREF(buffer);
        return NULL;
    }
    PyObject *value = Py_NewRef(PyList_GET_ITEM(buffer, pos));
    Py_DECREF(buffer);
    PyObject *next = PyLong_FromSsize_t(pos + 1);
    if (next == NULL || PyObject_SetAttr(self->scan, str_pos, next) < 0) {
        Py_XDECREF(next);
        Py_DECREF(value);
        return NULL;
    }
    Py_DECREF(next);
    return value;
}

static PyObject *rows_next(ScanRows *self) {
    PyObject *value = buffered_row(self);
    if (value != NULL || PyErr_Occurred()) return value;
    if (self->next == NULL) {
        PyErr_SetString(PyExc_TypeError, "this ScanRows was made for async for");
        return NULL;
    }
    return PyObject_CallNoArgs(self->next); /* used up: the sync face fills it (or ends) */
}

static PyObject *rows_anext(ScanRows *self) {
    PyObject *value = buffered_row(self);
    if (value == NULL) /* used up: the Scan fills it (or ends) in Python */
        return PyErr_Occurred() ? NULL : PyObject_CallMethodNoArgs(self->scan, str_anext);
    Ready *ready = self->spare;
    if (ready != NULL && Py_REFCNT(ready) == 1) { /* `async for` awaited it: free to reuse */
        Py_XSETREF(ready->value, value);
        return Py_NewRef(ready);
    }
    ready = PyObject_New(Ready, &ReadyType);
    if (ready == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    ready->value = value;
    Py_XSETREF(self->spare, (Ready *)Py_NewRef(ready));
    return (PyObject *)ready;
}

static int rows_traverse(ScanRows *self, visitproc visit, void *arg) {
    Py_VISIT(self->scan);
    Py_VISIT(self->next);
    return 0;
}

static int rows_clear(ScanRows *self) {
    Py_CLEAR(self->scan);
    Py_CLEAR(self->next);
    Py_CLEAR(self->spare);
    return 0;
}

static void rows_dealloc(ScanRows *self) {
    PyObject_GC_UnTrack(self);
    rows_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *rows_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *scan, *next = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:ScanRows", &scan, &next)) return NULL;
    if (next != Py_None && !PyCallable_Check(next)) {
        PyErr_SetString(PyExc_TypeError, "ScanRows: next must be callable");
        return NULL;
    }
    ScanRows *self = (ScanRows *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->scan = Py_NewRef(scan);
        self->next = next == Py_None ? NULL : Py_NewRef(next);
    }
    return (PyObject *)self;
}

static PyAsyncMethods rows_async = {.am_aiter = ready_await, .am_anext = (unaryfunc)rows_anext};

static PyTypeObject ScanRowsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.ScanRows",
    .tp_basicsize = sizeof(ScanRows),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "ScanRows(scan, next=None): `async for` (or, given the sync face's `next`, "
              "`for`) over a Scan's rows, the decoded ones handed over in C.",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)rows_next,
    .tp_new = rows_new,
    .tp_dealloc = (destructor)rows_dealloc,
    .tp_traverse = (traverseproc)rows_traverse,
    .tp_clear = (inquiry)rows_clear,
    .tp_as_async = &rows_async,
};

int accel_records_add(PyObject *module) {
    if ((str_buffer = PyUnicode_InternFromString("_buffer")) == NULL ||
        (str_pos = PyUnicode_InternFromString("_pos")) == NULL ||
        (str_anext = PyUnicode_InternFromString("__anext__")) == NULL)
        return -1;
    if (PyType_Ready(&RecordDecoderType) < 0 || PyType_Ready(&ReadyType) < 0 ||
        PyType_Ready(&ScanRowsType) < 0)
        return -1;
    if (PyModule_AddType(module, &RecordDecoderType) < 0) return -1;
    return PyModule_AddType(module, &ScanRowsType);
}
