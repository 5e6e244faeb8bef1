/* KeyFilter: which keys the writer's record cache (store/record_cache.py) may hold, as one bit
 * per slot of a cheap hash of the key, so that a batch's write drops its cached keys without
 * hashing each of its keys with Python's siphash and looking it up in the cache's dictionary:
 * a key whose bit is clear is not cached, and only those whose bit is set are looked up.
 *
 * The cache sets a key's bit whenever it keeps the key (add) and clears every bit when it
 * empties (clear); bits of keys it dropped or evicted stay set (a look-up for nothing), until
 * a rebuild from the keys it holds (add says when: after as many adds as a sixteenth of the
 * bits). So every key the cache holds has its bit set, and a drop never misses one.
 *
 * Sized for the keys held, not for the cache's limit: a rebuild gives it 16 to 32 slots a key
 * held (from 2**12 to 2**25 bits), so it stays small enough to sit in the CPU's caches. Sized
 * for a 64 MiB cache's 419,431 entries (512 KiB) while the cache held a few thousand keys,
 * each of a batch's 1,000 bit reads missed the CPU caches after the write's own work: the
 * batch's drop cost 0.22 us a record, 6% of a batched put (docs/performance.md, "The record
 * cache's cost to writes, in CPU time"). All calls are made with the cache's lock held (and
 * the GIL). */
#include "accel.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    uint8_t *bits;
    int shift;              /* 64 - log2(slots) */
    Py_ssize_t slots;       /* a power of two */
    Py_ssize_t adds, due;   /* adds since the last rebuild or clear; a rebuild is due past `due` */
} KeyFilter;

#define MIN_LOG 12
#define MAX_LOG 25

/* log2 of the slots for `held` keys: 16 or more a key, MIN_LOG to MAX_LOG */
static int log_for(Py_ssize_t held) {
    int log = MIN_LOG;
    while (log < MAX_LOG && held > (((Py_ssize_t)1 << log) >> 4)) log++; /* no overflow */
    return log;
}

/* the size set to 2**log slots, all clear; false (the old size kept, cleared) without memory */
static int resize(KeyFilter *f, int log) {
    Py_ssize_t slots = (Py_ssize_t)1 << log;
    if (slots != f->slots) {
        uint8_t *bits = PyMem_Calloc((size_t)slots / 8, 1);
        if (bits == NULL) {
            memset(f->bits, 0, (size_t)f->slots / 8);
            f->adds = 0;
            return 0;
        }
        PyMem_Free(f->bits);
        f->bits = bits;
        f->slots = slots;
        f->shift = 64 - log;
        f->due = slots / 16;
    } else {
        memset(f->bits, 0, (size_t)f->slots / 8);
    }
    f->adds = 0;
    return 1;
}

/* a multiply-xor hash of the key's bytes, 8 at a time: a few instructions a key */
static inline uint64_t key_hash(const char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, (size_t)n);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    }
    h ^= h >> 29;
    return h * 0x9E3779B97F4A7C15ULL;
}

/* the slot of `key`, or -1 when it is not bytes (such a key is always looked up) */
static inline Py_ssize_t slot_of(KeyFilter *f, PyObject *key) {
    if (!PyBytes_CheckExact(key)) return -1;
    return (Py_ssize_t)(key_hash(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) >> f->shift);
}

static inline void set_bit(KeyFilter *f, PyObject *key) {
    Py_ssize_t s = slot_of(f, key);
    if (s >= 0) f->bits[s >> 3] |= (uint8_t)(1u << (s & 7));
}

static PyObject *kf_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    Py_ssize_t entries = 0;
    static char *names[] = {"entries", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|n:KeyFilter", names, &entries)) return NULL;
    /* sized for `entries` keys held (none: the least size); rebuilds resize it */
    int log = log_for(entries < 0 ? 0 : entries);
    KeyFilter *f = (KeyFilter *)type->tp_alloc(type, 0);
    if (f == NULL) return NULL;
    f->slots = (Py_ssize_t)1 << log;
    f->shift = 64 - log;
    f->due = f->slots / 16;
    f->bits = PyMem_Calloc((size_t)f->slots / 8, 1);
    if (f->bits == NULL) {
        Py_DECREF(f);
        return PyErr_NoMemory();
    }
    return (PyObject *)f;
}

static void kf_dealloc(KeyFilter *f) {
    PyMem_Free(f->bits);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyObject *kf_add(KeyFilter *f, PyObject *key) {
    set_bit(f, key);
    return PyBool_FromLong(++f->adds > f->due);
}

static PyObject *kf_clear(KeyFilter *f, PyObject *unused) {
    (void)unused;
    memset(f->bits, 0, (size_t)f->slots / 8);
    f->adds = 0;
    Py_RETURN_NONE;
}

static PyObject *kf_rebuild(KeyFilter *f, PyObject *rows) {
    if (!PyDict_Check(rows)) return PyErr_Format(PyExc_TypeError, "rebuild(rows): a dict");
    /* 16 slots a key held and its growth to twice as many before the next rebuild */
    resize(f, log_for(2 * PyDict_GET_SIZE(rows)));
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (PyDict_Next(rows, &at, &key, &value)) set_bit(f, key);
    Py_RETURN_NONE;
}

static PyObject *kf_cached(KeyFilter *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyList_Check(args[1]))
        return PyErr_Format(PyExc_TypeError, "cached(rows, keys): a dict and a list");
    PyObject *rows = args[0], *keys = args[1];
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        Py_ssize_t s = slot_of(f, key);
        if (s >= 0 && !(f->bits[s >> 3] & (1u << (s & 7)))) continue;
        Py_INCREF(key);
        int held = PyDict_Contains(rows, key);
        if (held > 0 && PyList_Append(out, key) < 0) held = -1;
        Py_DECREF(key);
        if (held < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* drop(rows, keys, pop, overhead): pop (rows.pop) each key of the list `keys` that the dict
 * `rows` holds, only marked ones looked up; returns the bytes counted for them (each key's
 * length, its row's value length and `overhead`). The loop and the sum in C: a batch writing
 * cached keys paid ~600 instructions a key for them in Python. */
static PyObject *kf_drop(KeyFilter *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_Check(args[0]) || !PyList_Check(args[1]) || !PyLong_Check(args[3]))
        return PyErr_Format(PyExc_TypeError, "drop(rows, keys, pop, overhead)");
    PyObject *rows = args[0], *keys = args[1], *pop = args[2];
    long long overhead = PyLong_AsLongLong(args[3]);
    if (overhead == -1 && PyErr_Occurred()) return NULL;
    long long freed = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        Py_ssize_t s = slot_of(f, key);
        if (s >= 0 && !(f->bits[s >> 3] & (1u << (s & 7)))) continue;
        Py_INCREF(key);
        int held = PyDict_Contains(rows, key);
        if (held > 0) {
            PyObject *row = PyObject_CallOneArg(pop, key);
            Py_ssize_t size = -1, length = -1;
            if (row != NULL && PyTuple_Check(row) && PyTuple_GET_SIZE(row) > 0) {
                size = PyObject_Length(PyTuple_GET_ITEM(row, 0));
                length = size < 0 ? -1 : PyObject_Length(key);
            } else if (row != NULL) {
                PyErr_SetString(PyExc_TypeError, "drop: a cached row is a (bytes, expiry) tuple");
            }
            Py_XDECREF(row);
            if (size < 0 || length < 0) held = -1;
            else freed += (long long)length + size + overhead;
        }
        Py_DECREF(key);
        if (held < 0) return NULL;
    }
    return PyLong_FromLongLong(freed);
}

static PyObject *kf_slots(KeyFilter *f, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(f->slots);
}

static PyMethodDef kf_methods[] = {
    {"add", (PyCFunction)kf_add, METH_O,
     "Mark a key the cache keeps; True when a rebuild (from the keys it holds) is due."},
    {"clear", (PyCFunction)kf_clear, METH_NOARGS, "The cache emptied: no key marked."},
    {"rebuild", (PyCFunction)kf_rebuild, METH_O,
     "Mark exactly the keys of the dict `rows`, resized for them (16-32 bits a key)."},
    {"drop", (PyCFunction)(void (*)(void))kf_drop, METH_FASTCALL,
     "Pop (with `pop`) the keys of `keys` that `rows` holds; the bytes counted for them."},
    {"cached", (PyCFunction)(void (*)(void))kf_cached, METH_FASTCALL,
     "The keys of the list `keys` that the dict `rows` holds (only marked ones looked up)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kf_getset[] = {
    {"slots", (getter)kf_slots, NULL, "How many bits it has.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject KeyFilterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.KeyFilter",
    .tp_doc = "Which keys the record cache may hold: one bit per slot of a cheap key hash.",
    .tp_basicsize = sizeof(KeyFilter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = kf_new,
    .tp_dealloc = (destructor)kf_dealloc,
    .tp_methods = kf_methods,
    .tp_getset = kf_getset,
};

int accel_cachekeys_add(PyObject *module) {
    if (PyType_Ready(&KeyFilterType) < 0) return -1;
    return PyModule_AddType(module, &KeyFilterType);
}
