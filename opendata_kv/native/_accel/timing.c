/* Operation durations of store metrics in C (store/metrics.py): Durations, one aggregation of
 * db.client.operation.duration (bucket counts by the histogram's boundaries, each bucket's sum
 * of nanoseconds, the least and the greatest), and Timed, a store method timed into one: it
 * reads CLOCK_MONOTONIC (the clock of time.perf_counter_ns) around the call, or, for a
 * coroutine method, from the first send of its awaitable to its end, and adds the duration.
 *
 * Every Durations field is read and written with the GIL held, by C code that calls no Python
 * between its read and its write (an add here, a take at the collection), so no other thread
 * interleaves and no count is lost. A free-threaded build has no GIL: not built there. */
#include "accel.h"

#include <string.h>
#include <time.h>

#ifdef Py_GIL_DISABLED
#error "timing.c relies on the GIL to serialize the aggregation steps"
#endif

#define NB 14 /* buckets: len(BUCKETS) + 1 */
#define NONE_YET (1LL << 62)

typedef struct {
    PyObject_HEAD
    long long bounds[NB - 1]; /* upper bounds (inclusive) in ns */
    long long counts[NB], sums[NB];
    long long least, most;
} Durations;

static inline long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* GIL held: one duration (bisect_left over the bounds: the bucket whose upper bound is the
 * first not below ns; a few µs land in the first buckets, so the scan is short) */
static inline void durations_add(Durations *d, long long ns) {
    int i = 0;
    while (i < NB - 1 && ns > d->bounds[i]) i++;
    d->counts[i]++;
    d->sums[i] += ns;
    if (ns < d->least) d->least = ns;
    if (ns > d->most) d->most = ns;
}

static void durations_reset(Durations *d) {
    memset(d->counts, 0, sizeof d->counts);
    memset(d->sums, 0, sizeof d->sums);
    d->least = NONE_YET;
    d->most = -1;
}

static PyObject *durations_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *bounds;
    if (!PyArg_ParseTuple(args, "O:Durations", &bounds)) return NULL;
    PyObject *seq = PySequence_Fast(bounds, "Durations(bounds): a sequence of ints");
    if (seq == NULL) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != NB - 1) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "Durations(bounds): %d bounds expected", NB - 1);
    }
    Durations *d = (Durations *)type->tp_alloc(type, 0);
    if (d == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (int i = 0; i < NB - 1; i++) {
        d->bounds[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (d->bounds[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            Py_DECREF(d);
            return NULL;
        }
    }
    Py_DECREF(seq);
    durations_reset(d);
    return (PyObject *)d;
}

/* the aggregation as store/metrics.py lays it out: counts, sums, least, most */
static PyObject *durations_list(Durations *d) {
    PyObject *out = PyList_New(2 * NB + 2);
    if (out == NULL) return NULL;
    for (int i = 0; i < 2 * NB + 2; i++) {
        long long v = i < NB ? d->counts[i] : i < 2 * NB ? d->sums[i - NB] : i == 2 * NB ? d->least : d->most;
        PyObject *item = PyLong_FromLongLong(v);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, item);
    }
    return out;
}

static PyObject *durations_take(Durations *d, PyObject *unused) {
    PyObject *out = durations_list(d);
    if (out != NULL) durations_reset(d);
    return out;
}

static PyObject *durations_snapshot(Durations *d, PyObject *unused) { return durations_list(d); }

static PyObject *durations_add_py(Durations *d, PyObject *arg) {
    long long ns = PyLong_AsLongLong(arg);
    if (ns == -1 && PyErr_Occurred()) return NULL;
    durations_add(d, ns);
    Py_RETURN_NONE;
}

static PyObject *durations_subscript(Durations *d, PyObject *index) {
    PyObject *all = durations_list(d);
    if (all == NULL) return NULL;
    PyObject *r = PyObject_GetItem(all, index);
    Py_DECREF(all);
    return r;
}

static PyMethodDef durations_methods[] = {
    {"take", (PyCFunction)durations_take, METH_NOARGS, "The aggregation as a list, left empty behind."},
    {"snapshot", (PyCFunction)durations_snapshot, METH_NOARGS, "The aggregation as a list."},
    {"add", (PyCFunction)durations_add_py, METH_O, "Add one duration (ns)."},
    {NULL}};
static PyMappingMethods durations_mapping = {NULL, (binaryfunc)durations_subscript, NULL};
static PyTypeObject DurationsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.Durations",
    .tp_doc = "One aggregation of operation durations (ns), laid out as store/metrics.py's.",
    .tp_basicsize = sizeof(Durations),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = durations_new,
    .tp_methods = durations_methods,
    .tp_as_mapping = &durations_mapping,
};

/* --- Timed: a method timed into a Durations ------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *method;   /* the bound method timed */
    PyObject *func, *self_; /* a bound method's function and instance: called without the method */
    Durations *found;   /* its successes */
    PyObject *on_error; /* (elapsed ns, exception) -> None: the error's own series */
    int coroutine;      /* the method returns a coroutine: time its awaiting */
    vectorcallfunc vectorcall;
    struct TimedAwait *spare; /* one ended awaitable kept for the next call (untracked) */
} Timed;

typedef struct TimedAwait {
    PyObject_HEAD
    PyObject *coro;
    Timed *owner;
    long long start;
    int state;     /* 0 not started, 1 running, 2 ended */
    int finalized; /* its tp_finalize ran (the GC then never runs it again): not kept */
} TimedAwait;

static PyTypeObject TimedAwaitType;

/* the exception set is the operation's: its duration goes to on_error, the exception stays */
static void report_error(PyObject *on_error, long long elapsed) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
    PyObject *ns = PyLong_FromLongLong(elapsed);
    PyObject *r = ns == NULL ? NULL : PyObject_CallFunctionObjArgs(on_error, ns, value ? value : Py_None, NULL);
    Py_XDECREF(ns);
    if (r == NULL) PyErr_WriteUnraisable(on_error);
    else Py_DECREF(r);
    PyErr_Restore(type, value, tb);
}

/* the method called as method_vectorcall calls a bound method (its instance in the caller's
 * spare slot before args when offered, else a copy), the function's vectorcall taken straight:
 * one layer and one result check less a call */
static PyObject *call_method(Timed *t, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (t->func == NULL) return PyObject_Vectorcall(t->method, args, nargsf, kwnames);
    vectorcallfunc f = PyVectorcall_Function(t->func);
    if (f == NULL) return PyObject_Vectorcall(t->method, args, nargsf, kwnames);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *r;
    if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {
        PyObject **spare = (PyObject **)args - 1, *kept = *spare;
        *spare = t->self_;
        r = f(t->func, spare, nargs + 1, kwnames);
        *spare = kept;
    } else {
        Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
        PyObject *small[8], **all = total + 1 <= 8 ? small : PyMem_Malloc((total + 1) * sizeof(PyObject *));
        if (all == NULL) return PyErr_NoMemory();
        all[0] = t->self_;
        memcpy(all + 1, args, total * sizeof(PyObject *));
        r = f(t->func, all, nargs + 1, kwnames);
        if (all != small) PyMem_Free(all);
    }
    return r;
}

static PyObject *timed_vectorcall(Timed *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    long long start = now_ns();
    PyObject *r = call_method(self, args, nargsf, kwnames);
    if (!self->coroutine) {
        long long elapsed = now_ns() - start;
        if (r != NULL) durations_add(self->found, elapsed);
        else report_error(self->on_error, elapsed);
        return r;
    }
    if (r == NULL) { /* the call itself failed (its arguments): one failed operation */
        report_error(self->on_error, now_ns() - start);
        return NULL;
    }
    TimedAwait *t = self->spare; /* the last call's, ended and dropped: no allocation */
    if (t != NULL) {
        self->spare = NULL;
        PyObject_Init((PyObject *)t, &TimedAwaitType);
    } else if ((t = PyObject_GC_New(TimedAwait, &TimedAwaitType)) == NULL) {
        Py_DECREF(r);
        return NULL;
    }
    t->coro = r;
    t->owner = (Timed *)Py_NewRef(self);
    t->start = 0;
    t->state = 0;
    t->finalized = 0;
    PyObject_GC_Track(t);
    return (PyObject *)t;
}

static PyObject *timed_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *method, *found, *on_error;
    int coroutine;
    if (!PyArg_ParseTuple(args, "OO!Op:Timed", &method, &DurationsType, &found, &on_error, &coroutine))
        return NULL;
    Timed *t = (Timed *)type->tp_alloc(type, 0);
    if (t == NULL) return NULL;
    t->method = Py_NewRef(method);
    t->func = t->self_ = NULL;
    if (PyMethod_Check(method)) {
        t->func = Py_NewRef(PyMethod_GET_FUNCTION(method));
        t->self_ = Py_NewRef(PyMethod_GET_SELF(method));
    }
    t->found = (Durations *)Py_NewRef(found);
    t->on_error = Py_NewRef(on_error);
    t->coroutine = coroutine;
    t->vectorcall = (vectorcallfunc)timed_vectorcall;
    return (PyObject *)t;
}

static int timed_traverse(Timed *t, visitproc visit, void *arg) {
    Py_VISIT(t->method);
    Py_VISIT(t->func);
    Py_VISIT(t->self_);
    Py_VISIT(t->found);
    Py_VISIT(t->on_error);
    return 0;
}

static int timed_clear(Timed *t) {
    Py_CLEAR(t->method);
    Py_CLEAR(t->func);
    Py_CLEAR(t->self_);
    Py_CLEAR(t->found);
    Py_CLEAR(t->on_error);
    return 0;
}

static void timed_dealloc(Timed *t) {
    PyObject_GC_UnTrack(t);
    timed_clear(t);
    if (t->spare != NULL) PyObject_GC_Del(t->spare);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

/* attributes the Timed has not (__name__, __doc__, ...) are its method's, as functools.wraps
 * gives a Python wrapper */
static PyObject *timed_getattro(Timed *t, PyObject *name) {
    PyObject *r = PyObject_GenericGetAttr((PyObject *)t, name);
    if (r != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
    PyErr_Clear();
    return PyObject_GetAttr(t->method, name);
}

static PyObject *timed_get_wrapped(Timed *t, void *unused) { return Py_NewRef(t->method); }
static PyObject *timed_get_durations(Timed *t, void *unused) { return Py_NewRef((PyObject *)t->found); }

static PyObject *timed_get_doc(Timed *t, void *unused) { return PyObject_GetAttrString(t->method, "__doc__"); }

static PyGetSetDef timed_getset[] = {
    {"__wrapped__", (getter)timed_get_wrapped, NULL, "The method timed.", NULL},
    {"__doc__", (getter)timed_get_doc, NULL, NULL, NULL},
    {"durations", (getter)timed_get_durations, NULL, "The aggregation of its successes.", NULL},
    {NULL}};

static PyTypeObject TimedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.Timed",
    .tp_doc = "Timed(method, durations, on_error, coroutine): the method, its duration added to "
              "durations (its errors' to on_error(ns, exc)).",
    .tp_basicsize = sizeof(Timed),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = timed_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Timed, vectorcall),
    .tp_traverse = (traverseproc)timed_traverse,
    .tp_clear = (inquiry)timed_clear,
    .tp_dealloc = (destructor)timed_dealloc,
    .tp_getattro = (getattrofunc)timed_getattro,
    .tp_getset = timed_getset,
};

/* --- TimedAwait: the awaitable of a timed coroutine method ---------------------------- */

static PyObject *stop_with(PyObject *r) {
    PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, r);
    Py_DECREF(r);
    if (e != NULL) {
        PyErr_SetObject(PyExc_StopIteration, e);
        Py_DECREF(e);
    }
    return NULL;
}

static void awaiting_begins(TimedAwait *t) {
    if (t->state == 0) {
        t->state = 1;
        t->start = now_ns();
    }
}

/* the inner coroutine stepped: when it ended, so did the operation */
static PySendResult ended(TimedAwait *t, PySendResult s, PyObject **result) {
    if (s == PYGEN_NEXT) return s;
    t->state = 2;
    long long elapsed = now_ns() - t->start;
    if (s == PYGEN_RETURN) durations_add(t->owner->found, elapsed);
    else report_error(t->owner->on_error, elapsed);
    return s;
}

/* am_send: what an awaiting coroutine's SEND calls (PyIter_Send), the result handed back
 * without a StopIteration */
static PySendResult await_am_send(TimedAwait *t, PyObject *value, PyObject **result) {
    if (t->state == 2) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
        *result = NULL;
        return PYGEN_ERROR;
    }
    awaiting_begins(t);
    return ended(t, PyIter_Send(t->coro, value, result), result);
}

static PyObject *as_step(PySendResult s, PyObject *result) {
    if (s == PYGEN_NEXT) return result;
    if (s == PYGEN_RETURN) return stop_with(result);
    return NULL;
}

static PyObject *await_send(TimedAwait *t, PyObject *value) {
    PyObject *result;
    PySendResult s = await_am_send(t, value, &result);
    return as_step(s, result);
}

static PyObject *await_next(TimedAwait *t) { return await_send(t, Py_None); }

static PyObject *await_throw(TimedAwait *t, PyObject *args) {
    if (t->state == 2) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
        return NULL;
    }
    awaiting_begins(t);
    PyObject *throw = PyObject_GetAttrString(t->coro, "throw");
    if (throw == NULL) return NULL;
    PyObject *r = PyObject_Call(throw, args, NULL);
    Py_DECREF(throw);
    if (r != NULL) return r;
    if (PyErr_ExceptionMatches(PyExc_StopIteration)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *returned = value ? PyObject_GetAttrString(value, "value") : Py_NewRef(Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        if (returned == NULL) return NULL;
        return as_step(ended(t, PYGEN_RETURN, &returned), returned);
    }
    r = NULL;
    return as_step(ended(t, PYGEN_ERROR, &r), r);
}

/* as a coroutine closed while it awaits: the operation ends with GeneratorExit */
static PyObject *await_close(TimedAwait *t, PyObject *unused) {
    int running = t->state == 1;
    t->state = 2;
    PyObject *r = PyObject_CallMethod(t->coro, "close", NULL);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    if (running) {
        PyErr_SetNone(PyExc_GeneratorExit);
        report_error(t->owner->on_error, now_ns() - t->start);
        PyErr_Clear();
    }
    Py_RETURN_NONE;
}

static PyObject *await_self(PyObject *self) { return Py_NewRef(self); }

static int await_traverse(TimedAwait *t, visitproc visit, void *arg) {
    Py_VISIT(t->coro);
    Py_VISIT((PyObject *)t->owner);
    return 0;
}

static int await_clear(TimedAwait *t) {
    Py_CLEAR(t->coro);
    Py_CLEAR(t->owner);
    return 0;
}

static void await_finalize(TimedAwait *t) {
    t->finalized = 1;
    if (t->state != 1 || t->coro == NULL) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = await_close(t, NULL);
    if (r == NULL) PyErr_WriteUnraisable((PyObject *)t);
    else Py_DECREF(r);
    PyErr_Restore(type, value, tb);
}

/* a running awaitable dropped is finalized (its operation ends with GeneratorExit); one
 * that ended or never started is kept as its Timed's spare when that is free, so the next
 * call allocates nothing (with call_method: a timed await 815 -> 660 instructions above a
 * plain one, callgrind) */
static void await_dealloc(TimedAwait *t) {
    if (t->state == 1 && PyObject_CallFinalizerFromDealloc((PyObject *)t) < 0) return; /* resurrected */
    PyObject_GC_UnTrack(t);
    Py_CLEAR(t->coro);
    Timed *owner = t->owner;
    t->owner = NULL;
    if (owner != NULL && owner->spare == NULL && !t->finalized && owner->method != NULL) {
        owner->spare = t;   /* owner may go with the decref below: its dealloc frees t */
        Py_DECREF(owner);
        return;
    }
    Py_XDECREF(owner);
    PyObject_GC_Del(t);
}

static PyObject *await_get_name(TimedAwait *t, void *unused) {
    return PyObject_GetAttrString(t->coro, "__qualname__");
}

static PyGetSetDef await_getset[] = {
    {"__qualname__", (getter)await_get_name, NULL, NULL, NULL},
    {"__name__", (getter)await_get_name, NULL, NULL, NULL},
    {NULL}};

static PyAsyncMethods await_as_async = {await_self, NULL, NULL, (sendfunc)await_am_send};
static PyMethodDef await_methods[] = {
    {"send", (PyCFunction)await_send, METH_O, NULL},
    {"throw", (PyCFunction)await_throw, METH_VARARGS, NULL},
    {"close", (PyCFunction)await_close, METH_NOARGS, NULL},
    {NULL}};
static PyTypeObject TimedAwaitType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.TimedAwait",
    .tp_doc = "The awaitable of a timed coroutine method (a collections.abc.Coroutine).",
    .tp_basicsize = sizeof(TimedAwait),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)await_dealloc,
    .tp_finalize = (destructor)await_finalize,
    .tp_traverse = (traverseproc)await_traverse,
    .tp_clear = (inquiry)await_clear,
    .tp_as_async = &await_as_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)await_next,
    .tp_methods = await_methods,
    .tp_getset = await_getset,
};

/* written_bytes(keys, values): the bytes of a batch's records, for the bytes-written counter:
 * the keys' lengths and those of the values that are bytes (None: a delete, no value). One C
 * loop a batch, where a Python sum over the values cost a batched put ~10% with metrics on. */
static PyObject *f_written_bytes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyList_Check(args[0]) || !PyList_Check(args[1]))
        return PyErr_Format(PyExc_TypeError, "written_bytes(keys, values): two lists");
    long long total = 0;
    PyObject *const lists[2] = {args[0], args[1]};
    for (int l = 0; l < 2; l++) {
        PyObject *list = lists[l];
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
            PyObject *item = PyList_GET_ITEM(list, i);
            if (PyBytes_CheckExact(item)) {
                total += PyBytes_GET_SIZE(item);
            } else if (item != Py_None || l == 0) {
                Py_ssize_t n = PyObject_Length(item); /* a bytes subclass, a bytearray */
                if (n < 0) return NULL;
                total += n;
            }
        }
    }
    return PyLong_FromLongLong(total);
}

static PyMethodDef timing_functions[] = {
    {"written_bytes", (PyCFunction)(void (*)(void))f_written_bytes, METH_FASTCALL,
     "The bytes of a batch's records: its keys' lengths and its values' (None skipped)."},
    {NULL, NULL, 0, NULL},
};

int accel_timing_add(PyObject *module) {
    if (PyModule_AddFunctions(module, timing_functions) < 0) return -1;
    if (PyType_Ready(&DurationsType) < 0 || PyType_Ready(&TimedType) < 0 ||
        PyType_Ready(&TimedAwaitType) < 0)
        return -1;
    if (PyModule_AddType(module, &DurationsType) < 0 || PyModule_AddType(module, &TimedType) < 0 ||
        PyModule_AddType(module, &TimedAwaitType) < 0)
        return -1;
    return 0;
}
