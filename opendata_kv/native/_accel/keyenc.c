/* Typed keys encoded in C (issue 40): KeyEncoder, a record type's key layout (its head and the
 * field specs of native/records.py, records.c's) compiled once, called as RecordType's
 * fast_encode is: encoder(*fields) -> the key bytes; and queue_put / queue_puts, a batch's
 * put (or put_many's items) encoded, key and msgpack value, and queued in one C call.
 *
 * Only exact types are encoded here (int, float, bool, str, bytes), each as keys/codecs.py
 * encodes it; anything else (a subclass, a numpy int, an int given to f64, a value out of its
 * field's range, a str UTF-8 cannot encode, a TID that is not one) is declined: the encoder
 * raises ValueError, which the caller's fallback (RecordType.encode) turns into the error
 * that names the record and the field, and queue_put / queue_puts leave the put to Python.
 * tests/test_native_accel_keyenc.py checks the bytes against the pure path's. */
#include "accel.h"

#include <string.h>
#include <time.h>

/* native/records.py's FIELD_* constants (records.c's) */
enum { F_UINT, F_INT, F_F64, F_BOOL, F_FIXED, F_STR, F_BYTES, F_TRAIL_STR, F_TRAIL_BYTES,
       F_VARUINT, F_INT63, F_TID, F_COUNT };

typedef struct {
    int kind;
    uint8_t mask;       /* 0xFF for desc(field): every byte written inverted */
    Py_ssize_t width;   /* fixed-width fields: byte count */
    int code_bits;      /* var_u32 / var_u64 */
    int max_extra;
    uint64_t max_value; /* var_u*: the largest value (limit - 1) */
} EncOp;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *head; /* bytes every key starts with */
    EncOp *ops;
    Py_ssize_t nfields;
} KeyEncoder;

static PyTypeObject KeyEncoderType;
static PyObject *decline_error; /* the ValueError instance a declined encode raises */

typedef struct {
    uint8_t *buf; /* `small` until the key outgrows it, then PyMem memory */
    uint8_t *small;
    Py_ssize_t len, cap;
} Buf;

static int grow(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap * 2;
    while (cap < b->len + more) cap *= 2;
    uint8_t *grown = b->buf == b->small ? PyMem_Malloc((size_t)cap) : PyMem_Realloc(b->buf, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->buf == b->small) memcpy(grown, b->small, (size_t)b->len);
    b->buf = grown;
    b->cap = cap;
    return 0;
}

static int put_be(Buf *b, uint64_t v, Py_ssize_t width, uint8_t mask) {
    if (grow(b, width) < 0) return -1;
    for (Py_ssize_t i = 0; i < width; i++)
        b->buf[b->len + i] = (uint8_t)(v >> (8 * (width - 1 - i))) ^ mask;
    b->len += width;
    return 0;
}

/* keys/codecs.py's escape (0x01 -> 01 02, 0x00 -> 01 01) of p[0:n], then the 0x00 terminator
 * when `terminated`, every byte ^ mask */
static int put_span(Buf *b, const uint8_t *p, Py_ssize_t n, int terminated, uint8_t mask) {
    Py_ssize_t specials = 0;
    if (terminated)
        for (Py_ssize_t i = 0; i < n; i++) specials += p[i] <= 1;
    if (grow(b, n + specials + terminated) < 0) return -1;
    uint8_t *out = b->buf + b->len;
    if (specials == 0) {
        if (mask == 0) {
            memcpy(out, p, (size_t)n);
        } else {
            for (Py_ssize_t i = 0; i < n; i++) out[i] = p[i] ^ mask;
        }
        out += n;
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            if (p[i] <= 1) {
                *out++ = 1 ^ mask;
                *out++ = (uint8_t)(p[i] == 1 ? 2 : 1) ^ mask;
            } else {
                *out++ = p[i] ^ mask;
            }
        }
    }
    if (terminated) *out++ = mask;
    b->len = out - b->buf;
    return 0;
}

enum { ENC_OK = 0, ENC_DECLINE = 1, ENC_ERROR = -1 };

/* an exact int in [lo, hi] (as long long) or [0, hi] unsigned; ENC_DECLINE when not */
static int exact_uint(PyObject *o, uint64_t max, uint64_t *out) {
    if (!PyLong_CheckExact(o)) return ENC_DECLINE;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (x == -1 && PyErr_Occurred()) return ENC_ERROR;
    if (overflow < 0 || (overflow == 0 && x < 0)) return ENC_DECLINE;
    uint64_t u = (uint64_t)x;
    if (overflow > 0) {
        u = PyLong_AsUnsignedLongLong(o);
        if (u == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Clear(); /* past 64 bits */
            return ENC_DECLINE;
        }
    }
    if (u > max) return ENC_DECLINE;
    *out = u;
    return ENC_OK;
}

static const char tid_alphabet[] = "234567abcdefghijklmnopqrstuvwxyz"; /* ids/tid.py */

/* ids/tid.py's decode of an exact str: 13 characters of the alphabet, the value under 2**63 */
static int tid_value(PyObject *o, uint64_t *out) {
    if (!PyUnicode_CheckExact(o) || PyUnicode_GET_LENGTH(o) != 13 || !PyUnicode_IS_ASCII(o))
        return ENC_DECLINE;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(o);
    uint64_t v = 0;
    for (int i = 0; i < 13; i++) {
        const char *at = memchr(tid_alphabet, s[i], 32);
        if (s[i] == 0 || at == NULL) return ENC_DECLINE;
        v = (v << 5) | (uint64_t)(at - tid_alphabet);
        if (i == 0 && v >= 8) return ENC_DECLINE; /* the top bit of the 64: TidError there */
    }
    *out = v;
    return ENC_OK;
}

static int encode_field(const EncOp *op, PyObject *o, Buf *b) {
    uint64_t u;
    int r;
    uint8_t mask = op->mask;
    switch (op->kind) {
    case F_UINT: {
        uint64_t max = op->width == 8 ? UINT64_MAX : (1ULL << (8 * op->width)) - 1;
        if ((r = exact_uint(o, max, &u))) return r;
        return put_be(b, u, op->width, mask);
    }
    case F_INT: {
        if (!PyLong_CheckExact(o)) return ENC_DECLINE;
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (x == -1 && PyErr_Occurred()) return ENC_ERROR;
        if (overflow) return ENC_DECLINE;
        if (op->width == 4) {
            if (x < INT32_MIN || x > INT32_MAX) return ENC_DECLINE;
            return put_be(b, (uint64_t)(uint32_t)((int32_t)x) ^ 0x80000000u, 4, mask);
        }
        return put_be(b, (uint64_t)x ^ 0x8000000000000000ULL, 8, mask);
    }
    case F_F64: {
        if (!PyFloat_CheckExact(o)) return ENC_DECLINE; /* an int: f64's exactness check */
        double d = PyFloat_AS_DOUBLE(o);
        memcpy(&u, &d, sizeof u);
        u = u >> 63 ? ~u : u | 0x8000000000000000ULL;
        return put_be(b, u, 8, mask);
    }
    case F_BOOL:
        if (o != Py_True && o != Py_False) return ENC_DECLINE;
        return put_be(b, o == Py_True, 1, mask);
    case F_FIXED:
        if (!PyBytes_CheckExact(o) || PyBytes_GET_SIZE(o) != op->width) return ENC_DECLINE;
        return put_span(b, (const uint8_t *)PyBytes_AS_STRING(o), op->width, 0, mask);
    case F_STR:
    case F_TRAIL_STR: {
        if (!PyUnicode_CheckExact(o)) return ENC_DECLINE;
        Py_ssize_t size;
        const char *s = PyUnicode_AsUTF8AndSize(o, &size);
        if (s == NULL) {
            PyErr_Clear(); /* surrogates: the codec's KeyEncodeError */
            return ENC_DECLINE;
        }
        return put_span(b, (const uint8_t *)s, size, op->kind == F_STR, mask);
    }
    case F_BYTES:
    case F_TRAIL_BYTES:
        if (!PyBytes_CheckExact(o)) return ENC_DECLINE;
        return put_span(b, (const uint8_t *)PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o),
                        op->kind == F_BYTES, mask);
    case F_VARUINT: {
        if ((r = exact_uint(o, op->max_value, &u))) return r;
        int low_bits = 8 - op->code_bits, extra = 0;
        while (extra < 8 && (u >> (low_bits + 8 * extra)) != 0) extra++;
        if (extra > op->max_extra) return ENC_DECLINE;
        /* (extra << (low_bits + 8 * extra)) | u in extra + 1 bytes: the code in the first */
        if (grow(b, extra + 1) < 0) return ENC_ERROR;
        uint8_t *out = b->buf + b->len;
        for (int i = 0; i < extra; i++) out[extra - i] = (uint8_t)(u >> (8 * i)) ^ mask;
        uint8_t first = extra < 8 ? (uint8_t)(u >> (8 * extra)) : 0;
        out[0] = (uint8_t)(first | (extra << low_bits)) ^ mask;
        b->len += extra + 1;
        return ENC_OK;
    }
    case F_INT63:
        if ((r = exact_uint(o, INT64_MAX, &u))) return r;
        return put_be(b, u, 8, mask);
    case F_TID:
        if ((r = tid_value(o, &u))) return r;
        return put_be(b, u, 8, mask);
    }
    return ENC_DECLINE;
}

/* the key of values[0:n]: a new bytes, Py_None (a new reference) when declined, NULL on error */
static PyObject *encode_key(KeyEncoder *self, PyObject *const *values, Py_ssize_t n) {
    if (n != self->nfields) return Py_NewRef(Py_None);
    uint8_t small[256];
    Buf b = {small, small, 0, (Py_ssize_t)sizeof small};
    Py_ssize_t hlen = PyBytes_GET_SIZE(self->head);
    int r = grow(&b, hlen);
    if (!r) {
        memcpy(b.buf, PyBytes_AS_STRING(self->head), (size_t)hlen);
        b.len = hlen;
    }
    for (Py_ssize_t i = 0; !r && i < n; i++) r = encode_field(&self->ops[i], values[i], &b);
    PyObject *out = NULL;
    if (r == ENC_OK)
        out = PyBytes_FromStringAndSize((const char *)b.buf, b.len);
    else if (r == ENC_DECLINE)
        out = Py_NewRef(Py_None);
    if (b.buf != small) PyMem_Free(b.buf);
    return out;
}

static PyObject *ke_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "KeyEncoder takes the key's fields by position");
        return NULL;
    }
    PyObject *key = encode_key((KeyEncoder *)callable, args, PyVectorcall_NARGS(nargsf));
    if (key == Py_None) {
        Py_DECREF(key);
        PyErr_SetObject(PyExc_ValueError, decline_error);
        return NULL;
    }
    return key;
}

static int read_op(PyObject *spec, EncOp *op) {
    /* (kind, width, inverted, code_bits, max_extra, max_value): records.c's spec */
    unsigned long long max_value;
    int inverted;
    if (!PyTuple_Check(spec) ||
        !PyArg_ParseTuple(spec, "inpiiK", &op->kind, &op->width, &inverted, &op->code_bits,
                          &op->max_extra, &max_value)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "KeyEncoder: a field spec is a tuple");
        return -1;
    }
    op->mask = inverted ? 0xFF : 0x00;
    op->max_value = max_value;
    int ok = op->kind >= 0 && op->kind < F_COUNT;
    if (op->kind == F_UINT) ok = op->width == 1 || op->width == 2 || op->width == 4 || op->width == 8;
    if (op->kind == F_INT) ok = op->width == 4 || op->width == 8;
    if (op->kind == F_F64 || op->kind == F_INT63 || op->kind == F_TID) ok = op->width == 8;
    if (op->kind == F_BOOL) ok = op->width == 1;
    if (op->kind == F_FIXED) ok = op->width >= 1;
    if (op->kind == F_VARUINT)
        ok = op->code_bits >= 1 && op->code_bits <= 7 && op->max_extra >= 0 && op->max_extra <= 8;
    if ((op->kind == F_TRAIL_STR || op->kind == F_TRAIL_BYTES) && inverted) ok = 0;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "KeyEncoder: bad field spec (kind %d, width %zd)", op->kind,
                     op->width);
        return -1;
    }
    return 0;
}

static PyObject *ke_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"head", "fields", NULL};
    PyObject *head, *fields;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!:KeyEncoder", names, &PyBytes_Type, &head,
                                     &PyTuple_Type, &fields))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    for (Py_ssize_t i = 0; i + 1 < n; i++) { /* a trailing field only last */
        PyObject *kind = PyTuple_Check(PyTuple_GET_ITEM(fields, i)) &&
                                 PyTuple_GET_SIZE(PyTuple_GET_ITEM(fields, i)) > 0
                             ? PyTuple_GET_ITEM(PyTuple_GET_ITEM(fields, i), 0)
                             : NULL;
        long k = kind != NULL && PyLong_Check(kind) ? PyLong_AsLong(kind) : -1;
        if (k == F_TRAIL_STR || k == F_TRAIL_BYTES)
            return PyErr_Format(PyExc_ValueError, "KeyEncoder: a trailing field only last");
    }
    KeyEncoder *self = (KeyEncoder *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = ke_vectorcall;
    self->head = Py_NewRef(head);
    self->nfields = n;
    self->ops = PyMem_Calloc(n ? (size_t)n : 1, sizeof(EncOp));
    if (self->ops == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (read_op(PyTuple_GET_ITEM(fields, i), &self->ops[i]) < 0) {
            Py_DECREF(self);
            return NULL;
        }
    }
    return (PyObject *)self;
}

static void ke_dealloc(KeyEncoder *self) {
    Py_XDECREF(self->head);
    PyMem_Free(self->ops);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ke_try(KeyEncoder *self, PyObject *const *args, Py_ssize_t n) {
    return encode_key(self, args, n);
}

static PyMethodDef ke_methods[] = {
    {"try_encode", (PyCFunction)(void (*)(void))ke_try, METH_FASTCALL,
     "try_encode(*fields) -> the key bytes, or None when the fields are not ones it encodes."},
    {NULL}};

static PyTypeObject KeyEncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.KeyEncoder",
    .tp_basicsize = sizeof(KeyEncoder),
    .tp_dealloc = (destructor)ke_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(KeyEncoder, vectorcall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "KeyEncoder(head, fields): encoder(*fields) -> key bytes, as RecordType.fast_encode "
              "(ValueError for the fields it does not encode: the caller's fallback names them).",
    .tp_methods = ke_methods,
    .tp_new = ke_new,
};

/* --- a batch's puts ------------------------------------------------------------------------ */

/* the key and value of one put through `plan` (views.PutEncoders: a tuple whose first item is
 * a KeyEncoder and whose last is (max_len, max_depth)): 1 with both set, 0 when either is
 * declined (nothing set), -1 on error */
static int encode_put(PyObject *plan, PyObject *fields, PyObject *value, PyObject **key,
                      PyObject **data) {
    if (plan == NULL || !PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) < 2 ||
        !PyTuple_CheckExact(fields))
        return 0;
    PyObject *encoder = PyTuple_GET_ITEM(plan, 0);
    PyObject *packing = PyTuple_GET_ITEM(plan, PyTuple_GET_SIZE(plan) - 1);
    if (Py_TYPE(encoder) != &KeyEncoderType || !PyTuple_CheckExact(packing) ||
        PyTuple_GET_SIZE(packing) != 2)
        return 0;
    Py_ssize_t max_len = PyLong_AsSsize_t(PyTuple_GET_ITEM(packing, 0));
    long max_depth = PyLong_AsLong(PyTuple_GET_ITEM(packing, 1));
    if ((max_len == -1 || max_depth == -1) && PyErr_Occurred()) return -1;
    PyObject *k = encode_key((KeyEncoder *)encoder, &PyTuple_GET_ITEM(fields, 0),
                             PyTuple_GET_SIZE(fields));
    if (k == NULL) return -1;
    if (k == Py_None) {
        Py_DECREF(k);
        return 0;
    }
    PyObject *d = accel_pack(value, max_len, (int)(max_depth > 1 << 30 ? 1 << 30 : max_depth));
    if (d == NULL || d == Py_None) {
        Py_DECREF(k);
        if (d == NULL) return -1;
        Py_DECREF(d);
        return 0;
    }
    *key = k;
    *data = d;
    return 1;
}

/* key, data and expire_at (None, or a TTL put's expiry in Unix ms) appended to the batch's
 * three columns; -1 on error (the columns as they were) */
static int append_put(PyObject *keys, PyObject *data, PyObject *expires, PyObject *key,
                      PyObject *value, PyObject *expire_at) {
    Py_ssize_t at = PyList_GET_SIZE(keys);
    int r = PyList_Append(keys, key);
    if (!r) r = PyList_Append(data, value);
    if (!r) r = PyList_Append(expires, expire_at);
    if (r) { /* out of memory: undo what was appended */
        if (PyList_GET_SIZE(keys) > at) PyList_SetSlice(keys, at, PY_SSIZE_T_MAX, NULL);
        if (PyList_GET_SIZE(data) > at) PyList_SetSlice(data, at, PY_SSIZE_T_MAX, NULL);
        if (PyList_GET_SIZE(expires) > at) PyList_SetSlice(expires, at, PY_SSIZE_T_MAX, NULL);
    }
    return r;
}

static int columns(PyObject *const *args, const char *name) {
    for (int i = 0; i < 3; i++)
        if (!PyList_CheckExact(args[i])) {
            PyErr_Format(PyExc_TypeError, "%s: keys, data and expires are lists", name);
            return -1;
        }
    return 0;
}

/* the plan of `target` in `plans` (borrowed; NULL when absent or unhashable, no error) */
static PyObject *plan_of(PyObject *plans, PyObject *target) {
    PyObject *plan = PyDict_GetItemWithError(plans, target);
    if (plan == NULL) PyErr_Clear(); /* unhashable: the Python path names it */
    return plan;
}

/* queue_put(plans, target, fields, value, keys, data, expires[, expire_at]) -> bool:
 * Batch.put's common case in one call (True: queued), with a TTL put's expiry (Unix ms, an
 * int) when given; False, nothing queued, for the Python path to take */
static PyObject *f_queue_put(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if ((n != 7 && n != 8) || !PyDict_CheckExact(args[0]) ||
        (n == 8 && args[7] != Py_None && !PyLong_CheckExact(args[7]))) {
        PyErr_SetString(PyExc_TypeError,
                        "queue_put(plans, target, fields, value, keys, data, expires[, expire_at])");
        return NULL;
    }
    if (columns(args + 4, "queue_put") < 0) return NULL;
    PyObject *key, *data;
    int r = encode_put(plan_of(args[0], args[1]), args[2], args[3], &key, &data);
    if (r <= 0) return r < 0 ? NULL : Py_NewRef(Py_False);
    r = append_put(args[4], args[5], args[6], key, data, n == 8 ? args[7] : Py_None);
    Py_DECREF(key);
    Py_DECREF(data);
    return r < 0 ? NULL : Py_NewRef(Py_True);
}

/* queue_puts(plans, items, start, keys, data, expires) -> int: put_many's items from `start`
 * queued while each is (target, fields, value) or (target, fields, value, None) with a plan
 * that encodes it; the position of the first item it leaves to Python (len(items): none) */
static PyObject *f_queue_puts(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 6 || !PyDict_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "queue_puts(plans, items: list, start, keys, data, expires)");
        return NULL;
    }
    if (columns(args + 3, "queue_puts") < 0) return NULL;
    Py_ssize_t at = PyLong_AsSsize_t(args[2]);
    if (at == -1 && PyErr_Occurred()) return NULL;
    PyObject *items = args[1];
    for (; at >= 0 && at < PyList_GET_SIZE(items); at++) {
        PyObject *item = PyList_GET_ITEM(items, at);
        if (!PyTuple_CheckExact(item)) break;
        Py_ssize_t size = PyTuple_GET_SIZE(item);
        if (size != 3 && !(size == 4 && PyTuple_GET_ITEM(item, 3) == Py_None)) break;
        Py_INCREF(item); /* the list may change under a __hash__ or __eq__ of the target */
        PyObject *key, *data;
        int r = encode_put(plan_of(args[0], PyTuple_GET_ITEM(item, 0)), PyTuple_GET_ITEM(item, 1),
                           PyTuple_GET_ITEM(item, 2), &key, &data);
        Py_DECREF(item);
        if (r < 0) return NULL;
        if (r == 0) break;
        r = append_put(args[3], args[4], args[5], key, data, Py_None);
        Py_DECREF(key);
        Py_DECREF(data);
        if (r < 0) return NULL;
    }
    return PyLong_FromSsize_t(at);
}

/* --- BatchPut: a sync batch's put with its common case in C --------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fallback; /* the bound Batch.put: every other put, and all once switched off */
    PyObject *plans, *keys, *data, *expires;
    PyObject *ttl;      /* the ttl object Batch.put last checked (remember_ttl), or NULL */
    long long ttl_ms;   /* and its milliseconds */
    int off;
} BatchPut;

/* the expiry of a put with the remembered ttl: the wall clock in Unix ms (as
 * calls.expire_after) plus its ms; NULL with no error when the clock fails (fallback) */
static PyObject *remembered_expiry(BatchPut *self) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) return NULL;
    long long sec_ms = (long long)now.tv_sec * 1000, frac = now.tv_nsec / 1000000;
    return PyLong_FromLongLong(sec_ms + frac + self->ttl_ms);
}

static PyObject *bp_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    BatchPut *self = (BatchPut *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!self->off && nargs == 3) {
        /* put(target, fields, value), or with ttl= the object Batch.put checked last (the
         * same object: an immutable number or timedelta, so the same ms) */
        PyObject *expire_at = Py_None;
        int ttl_put = kwnames != NULL;
        if (ttl_put) {
            if (PyTuple_GET_SIZE(kwnames) != 1 || self->ttl == NULL || args[3] != self->ttl ||
                PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "ttl") != 0)
                return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
        }
        PyObject *key, *data;
        int r = encode_put(plan_of(self->plans, args[0]), args[1], args[2], &key, &data);
        if (r < 0) return NULL;
        if (r > 0 && ttl_put && (expire_at = remembered_expiry(self)) == NULL) {
            Py_DECREF(key);
            Py_DECREF(data);
            if (PyErr_Occurred()) return NULL;
            r = 0; /* no clock: the Python path */
        }
        if (r > 0) {
            r = append_put(self->keys, self->data, self->expires, key, data, expire_at);
            Py_DECREF(key);
            Py_DECREF(data);
            if (ttl_put) Py_DECREF(expire_at);
            return r < 0 ? NULL : Py_NewRef(Py_None);
        }
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static PyObject *bp_remember_ttl(BatchPut *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 2 || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "remember_ttl(ttl, ms: int)");
        return NULL;
    }
    long long ms = PyLong_AsLongLong(args[1]);
    if (ms == -1 && PyErr_Occurred()) return NULL;
    Py_XSETREF(self->ttl, Py_NewRef(args[0]));
    self->ttl_ms = ms;
    Py_RETURN_NONE;
}

static PyObject *bp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fallback, *plans, *keys, *data, *expires;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "BatchPut takes its arguments by position");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!O!O!:BatchPut", &fallback, &PyDict_Type, &plans,
                          &PyList_Type, &keys, &PyList_Type, &data, &PyList_Type, &expires))
        return NULL;
    BatchPut *self = (BatchPut *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = bp_vectorcall;
    self->fallback = Py_NewRef(fallback);
    self->plans = Py_NewRef(plans);
    self->keys = Py_NewRef(keys);
    self->data = Py_NewRef(data);
    self->expires = Py_NewRef(expires);
    return (PyObject *)self;
}

static int bp_traverse(BatchPut *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback);
    Py_VISIT(self->plans);
    Py_VISIT(self->keys);
    Py_VISIT(self->data);
    Py_VISIT(self->expires);
    Py_VISIT(self->ttl);
    return 0;
}

static int bp_clear(BatchPut *self) {
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->plans);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->data);
    Py_CLEAR(self->expires);
    Py_CLEAR(self->ttl);
    return 0;
}

static void bp_dealloc(BatchPut *self) {
    PyObject_GC_UnTrack(self);
    bp_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *bp_switch_off(BatchPut *self, PyObject *unused) {
    self->off = 1;
    Py_RETURN_NONE;
}

static PyMethodDef bp_methods[] = {
    {"switch_off", (PyCFunction)bp_switch_off, METH_NOARGS,
     "Every later put through the fallback (the batch was written)."},
    {"remember_ttl", (PyCFunction)(void (*)(void))bp_remember_ttl, METH_FASTCALL,
     "remember_ttl(ttl, ms): a later put(..., ttl=) of this same object is queued in C, "
     "its expiry the wall clock in Unix ms plus ms (the ttl Batch.put checked)."},
    {NULL}};

static PyTypeObject BatchPutType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.BatchPut",
    .tp_basicsize = sizeof(BatchPut),
    .tp_dealloc = (destructor)bp_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(BatchPut, vectorcall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "BatchPut(fallback, plans, keys, data, expires): put(target, fields, value) queued "
              "as queue_put does, anything else (and all once switched off) by fallback.",
    .tp_traverse = (traverseproc)bp_traverse,
    .tp_clear = (inquiry)bp_clear,
    .tp_methods = bp_methods,
    .tp_new = bp_new,
};

static PyMethodDef functions[] = {
    {"queue_put", (PyCFunction)(void (*)(void))f_queue_put, METH_FASTCALL,
     "Batch.put's common case: key and msgpack value encoded and queued in one call."},
    {"queue_puts", (PyCFunction)(void (*)(void))f_queue_puts, METH_FASTCALL,
     "put_many's common items encoded and queued in one call."},
    {NULL}};

int accel_keyenc_add(PyObject *module) {
    decline_error = PyUnicode_InternFromString("not a key the C encoder takes");
    if (decline_error == NULL || PyType_Ready(&KeyEncoderType) < 0 ||
        PyType_Ready(&BatchPutType) < 0)
        return -1;
    if (PyModule_AddFunctions(module, functions) < 0) return -1;
    if (PyModule_AddType(module, &BatchPutType) < 0 ||
        PyModule_AddObjectRef(module, "batch_putter", (PyObject *)&BatchPutType) < 0)
        return -1;
    return PyModule_AddType(module, &KeyEncoderType);
}
