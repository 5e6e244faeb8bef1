/* opendata_kv.native._accel: the hot native calls of calls.py made from C (see
 * native/accel.py and docs/native.md). The library's entry points come from the ctypes handles the
 * generated binding loaded (init), so this never links slatedb. Futures are driven with a C
 * continuation: a sync wait is a futex wait without the GIL that checks signals every
 * SLICE_NS (Ctrl-C cancels the call); an awaited call parks on an asyncio future only when
 * the Rust future pends. A read that pends first spins up to SPIN_NS (spin_until_fired). Poll, cancel, free and complete run without the GIL: a runtime
 * thread waking a parked future holds the future's scheduler lock while it takes the GIL. */
#include "accel.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ABI 1
#define SLICE_NS (50L * 1000 * 1000)
#define SPIN_NS (20L * 1000) /* how long a wait spins before it sleeps or parks */
#define N_SOURCES 4

typedef void (*cont_fn)(uint64_t, int8_t);
typedef void (*poll_fn)(uint64_t, cont_fn, uint64_t);
typedef void (*fut_fn)(uint64_t);
typedef uint64_t (*clone_fn)(uint64_t, RustCallStatus *);
typedef uint64_t (*point_fn)(uint64_t, RustBuffer);

enum { RB = 0, U64 = 1, VOID = 2 };
enum { LIFT_VALUE, LIFT_ROW, LIFT_COLUMNS, LIFT_WRITE, LIFT_NONE };

static RustBuffer (*p_alloc)(uint64_t, RustCallStatus *);
static void (*p_rbfree)(RustBuffer, RustCallStatus *);
static poll_fn p_poll[3];
static fut_fn p_cancel[3], p_free[3];
static RustBuffer (*p_complete_rb)(uint64_t, RustCallStatus *);
static uint64_t (*p_complete_u64)(uint64_t, RustCallStatus *);
static void (*p_complete_void)(uint64_t, RustCallStatus *);
static clone_fn p_clone_db, p_clone_iterator, p_clone_batch;
static uint64_t (*p_next_batch)(uint64_t, uint32_t);
static uint64_t (*p_db_put)(uint64_t, RustBuffer, RustBuffer);
static uint64_t (*p_db_put_with_options)(uint64_t, RustBuffer, RustBuffer, RustBuffer, RustBuffer);
static uint64_t (*p_db_delete)(uint64_t, RustBuffer);
static uint64_t (*p_db_write)(uint64_t, uint64_t);
static void (*p_batch_put)(uint64_t, RustBuffer, RustBuffer, RustCallStatus *);
static void (*p_free_write_handle)(uint64_t, RustCallStatus *);
static void (*p_free_db)(uint64_t, RustCallStatus *);
static uint64_t (*p_seek)(uint64_t, RustBuffer);
static void (*p_batch_delete)(uint64_t, RustBuffer, RustCallStatus *);
static void (*p_batch_put_with_options)(uint64_t, RustBuffer, RustBuffer, RustBuffer, RustCallStatus *);

typedef struct {
    PyTypeObject *type;
    clone_fn clone;
    point_fn get, get_key_value;
} Source;
static Source sources[N_SOURCES];
static PyTypeObject *db_type, *iterator_type, *batch_type;
static PyObject *raise_status_hook; /* (raw RustCallStatus bytes) -> raises slatedb's error */
static PyObject *syncing_fn, *get_running_loop_fn, *wake_fn;
enum { FB_GET_NOW, FB_GET_ROW_NOW, FB_GET_VALUES_NOW, FB_GET_ROWS_NOW, FB_READ_VALUE, FB_READ_ROW,
       FB_GET_VALUES, FB_GET_ROWS, FB_NEXT_COLUMNS, FB_PUT, FB_DELETE, FB_WRITE, FB_BATCH_PUT,
       FB_SEEK, FB_BATCH_DELETE, FB_BATCH_PUT_EXPIRING, FB_BATCH_PUT_MANY, FB_PUT_EXPIRING, FB_EXPIRE_AFTER, FB_COUNT };
static PyObject *fallback[FB_COUNT]; /* the pure calls.py functions, by FB_* */
static const char *fallback_names[FB_COUNT] = {
    "get_now", "get_row_now", "get_values_now", "get_rows_now", "read_value", "read_row",
    "get_values", "get_rows", "next_columns", "put", "delete", "write", "batch_put",
    "seek", "batch_delete", "batch_put_expiring", "batch_put_many", "put_expiring", "expire_after"};
static PyObject *str_handle;
static _Atomic int shutting_down;
static int ready;

/* --- errors -------------------------------------------------------------------------- */

/* raise the error a failed call status carries, as the generated code would */
static void raise_status(RustCallStatus *st) {
    PyObject *raw = PyBytes_FromStringAndSize((const char *)st, sizeof *st);
    if (raw == NULL) return;
    PyObject *r = PyObject_CallOneArg(raise_status_hook, raw);
    Py_DECREF(raw);
    if (r != NULL) { /* the hook must raise */
        Py_DECREF(r);
        PyErr_SetString(PyExc_SystemError, "call status hook returned");
    }
}

static void free_buffer(RustBuffer b) {
    RustCallStatus st = {0};
    p_rbfree(b, &st);
}

/* --- the continuation and the waits -------------------------------------------------- */

/* states: 0 armed, 1 fired, 2 a thread sleeps on it, 3 an asyncio task is parked on it,
 * 4 detached (cancelled: nothing to wake) */
enum { ARMED, FIRED, SLEEPING, PARKED, DETACHED };

struct Call;
typedef struct {
    _Atomic int32_t state;
    int8_t code;
    struct Call *owner; /* the awaitable parked on it (state PARKED), else unused */
} Waiter;

static void wake_parked(struct Call *call);

static void continuation(uint64_t data, int8_t code) {
    Waiter *w = (Waiter *)(uintptr_t)data;
    w->code = code;
    int32_t old = atomic_exchange_explicit(&w->state, FIRED, memory_order_acq_rel);
    if (old == SLEEPING)
        syscall(SYS_futex, &w->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    else if (old == PARKED)
        wake_parked(w->owner);
}

static void arm_and_poll(Waiter *w, int kind, uint64_t fut) {
    atomic_store_explicit(&w->state, ARMED, memory_order_relaxed);
    p_poll[kind](fut, continuation, (uint64_t)(uintptr_t)w);
}

/* GIL released: whether w fired within SPIN_NS, looking again after each sched_yield (which
 * hands the CPU to slatedb's runtime thread when it waits on the same one). A warm SST get
 * spawns its block read onto that thread: when the thread runs on the other CPU, the future
 * completes a few µs after the first poll, sooner than a futex sleep and wake (or an asyncio
 * park and loop wake-up) take (docs/performance.md, "Warm SST gets") */
static int spin_until_fired(Waiter *w) {
    struct timespec start, now;
    if (atomic_load_explicit(&w->state, memory_order_acquire) != ARMED) return 1;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        sched_yield();
        if (atomic_load_explicit(&w->state, memory_order_acquire) != ARMED) return 1;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) >= SPIN_NS)
            return 0;
    }
}

/* with the GIL released (*save): block until w fired (a read spins SPIN_NS first; a write,
 * which waits on slatedb's writer, sleeps at once). 0, or -1 when a signal handler raised
 * (the exception is set; the GIL is released again on return either way) */
static int sleep_until_fired(Waiter *w, int read, PyThreadState **save) {
    if (read && spin_until_fired(w)) return 0;
    int32_t expected = ARMED;
    if (!atomic_compare_exchange_strong(&w->state, &expected, SLEEPING)) return 0;
    struct timespec slice = {0, SLICE_NS};
    for (;;) {
        long r = syscall(SYS_futex, &w->state, FUTEX_WAIT_PRIVATE, SLEEPING, &slice, NULL, 0);
        if (atomic_load_explicit(&w->state, memory_order_acquire) != SLEEPING) return 0;
        if (r == -1 && errno == EAGAIN) continue;
        PyEval_RestoreThread(*save);
        int failed = PyErr_CheckSignals();
        *save = PyEval_SaveThread();
        if (failed < 0) return -1;
    }
}

/* cancel a future whose waiter may still be armed: cancel fires a stored continuation (with
 * READY) before it returns, so the waiter can go afterwards */
static void cancel_waiting(Waiter *w, int kind, uint64_t fut) {
    int32_t old = atomic_exchange_explicit(&w->state, DETACHED, memory_order_acq_rel);
    if (old == ARMED || old == SLEEPING) p_cancel[kind](fut);
}

/* GIL released: poll fut until READY. 0, or -1 when interrupted (cancelled; the caller frees) */
static int drive_now(uint64_t fut, int kind, Waiter *w, int polled, PyThreadState **save) {
    for (;;) {
        if (!polled) arm_and_poll(w, kind, fut);
        polled = 0;
        if (sleep_until_fired(w, 1, save) < 0) { /* drive_now serves point reads only */
            cancel_waiting(w, kind, fut);
            return -1;
        }
        if (w->code == 0) return 0;
    }
}

/* --- lowering ------------------------------------------------------------------------ */

/* GIL released: a RustBuffer holding i32 BE length + the bytes (Rust owns it once passed) */
static RustBuffer lower(const char *data, Py_ssize_t size, RustCallStatus *st) {
    RustBuffer b = p_alloc((uint64_t)size + 4, st);
    if (st->code) return b;
    uint32_t n = (uint32_t)size;
    b.data[0] = (uint8_t)(n >> 24);
    b.data[1] = (uint8_t)(n >> 16);
    b.data[2] = (uint8_t)(n >> 8);
    b.data[3] = (uint8_t)n;
    memcpy(b.data + 4, data, (size_t)size);
    b.len = (uint64_t)size + 4;
    return b;
}

static inline int small_bytes(PyObject *o) {
    return PyBytes_CheckExact(o) && PyBytes_GET_SIZE(o) <= INT32_MAX - 4;
}

static const Source *source_of(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    for (int i = 0; i < N_SOURCES; i++)
        if (sources[i].type == t) return &sources[i];
    return NULL;
}

/* the object's `_handle` (a u64), or -1 with an exception */
static int handle_of(PyObject *o, uint64_t *out) {
    PyObject *h = PyObject_GetAttr(o, str_handle);
    if (h == NULL) return -1;
    *out = PyLong_AsUnsignedLongLong(h);
    Py_DECREF(h);
    return PyErr_Occurred() ? -1 : 0;
}

/* GIL released: start a point read of key on a clone of handle; 0 or -1 (st set) */
static int start_point(const Source *src, uint64_t handle, PyObject *key, int rows,
                       uint64_t *fut, RustCallStatus *st) {
    RustBuffer kb = lower(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), st);
    if (st->code) return -1;
    uint64_t clone = src->clone(handle, st);
    if (st->code) {
        free_buffer(kb);
        return -1;
    }
    *fut = (rows ? src->get_key_value : src->get)(clone, kb);
    return 0;
}

static PyObject *lift_point(RustBuffer out, int rows) {
    PyObject *r = rows ? accel_parse_point_row(out.data, (size_t)out.len)
                       : accel_parse_optional_bytes(out.data, (size_t)out.len);
    free_buffer(out);
    return r;
}

static PyObject *call_fallback(int which, PyObject *const *args, Py_ssize_t n) {
    if (fallback[which] == NULL)
        return PyErr_Format(PyExc_TypeError, "%s: no pure function to fall back on", fallback_names[which]);
    return PyObject_Vectorcall(fallback[which], args, (size_t)n, NULL);
}

/* --- the sync face: point reads run to completion on this thread --------------------- */

static PyObject *point_now(PyObject *const *args, Py_ssize_t n, int rows) {
    if (n != 2) return PyErr_Format(PyExc_TypeError, "expected (source, key)");
    const Source *src = source_of(args[0]);
    if (src == NULL || !small_bytes(args[1]))
        return call_fallback(rows ? FB_GET_ROW_NOW : FB_GET_NOW, args, n);
    uint64_t handle;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    RustBuffer out = {0};
    Waiter w;
    uint64_t fut;
    int rc = 0;
    PyThreadState *save = PyEval_SaveThread();
    if (start_point(src, handle, args[1], rows, &fut, &st) == 0) {
        rc = drive_now(fut, RB, &w, 0, &save);
        if (rc == 0) out = p_complete_rb(fut, &st);
        p_free[RB](fut);
    }
    PyEval_RestoreThread(save);
    if (rc < 0) return NULL;
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    return lift_point(out, rows);
}

static PyObject *f_get_now(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    return point_now(args, n, 0);
}

static PyObject *f_get_row_now(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    return point_now(args, n, 1);
}

/* the keys as a tuple of bytes (a copy: the list cannot change under us), or NULL with no
 * exception when any key is not bytes (the pure path takes those) */
static PyObject *bytes_tuple(PyObject *keys) {
    if (!PyList_CheckExact(keys) && !PyTuple_CheckExact(keys)) return NULL;
    PyObject *t = PySequence_Tuple(keys);
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        if (!small_bytes(PyTuple_GET_ITEM(t, i))) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

static PyObject *points_now(PyObject *const *args, Py_ssize_t n, int rows) {
    if (n != 2) return PyErr_Format(PyExc_TypeError, "expected (source, keys)");
    int which = rows ? FB_GET_ROWS_NOW : FB_GET_VALUES_NOW;
    const Source *src = source_of(args[0]);
    if (src == NULL) return call_fallback(which, args, n);
    PyObject *keys = bytes_tuple(args[1]);
    if (keys == NULL) return PyErr_Occurred() ? NULL : call_fallback(which, args, n);
    uint64_t handle;
    if (handle_of(args[0], &handle) < 0) {
        Py_DECREF(keys);
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(keys), started = 0, done = 0;
    uint64_t *futs = PyMem_Malloc(sizeof(uint64_t) * (size_t)(count ? count : 1));
    Waiter *ws = PyMem_Malloc(sizeof(Waiter) * (size_t)(count ? count : 1));
    RustBuffer *outs = PyMem_Calloc((size_t)(count ? count : 1), sizeof(RustBuffer));
    PyObject *result = NULL;
    if (futs == NULL || ws == NULL || outs == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    RustCallStatus st = {0};
    int rc = 0;
    PyThreadState *save = PyEval_SaveThread();
    for (; started < count; started++)
        if (start_point(src, handle, PyTuple_GET_ITEM(keys, started), rows, &futs[started], &st) < 0)
            break;
    if (!st.code) {
        for (Py_ssize_t i = 0; i < count; i++) arm_and_poll(&ws[i], RB, futs[i]);
        for (; done < count; done++) {
            rc = drive_now(futs[done], RB, &ws[done], 1, &save);
            if (rc < 0) break;
            outs[done] = p_complete_rb(futs[done], &st);
            if (st.code) break;
        }
        for (Py_ssize_t i = done + 1; i < count; i++) cancel_waiting(&ws[i], RB, futs[i]);
    }
    for (Py_ssize_t i = 0; i < started; i++) p_free[RB](futs[i]);
    PyEval_RestoreThread(save);
    if (rc == 0 && st.code) raise_status(&st);
    if (rc == 0 && !st.code) {
        result = PyList_New(count);
        for (Py_ssize_t i = 0; result != NULL && i < count; i++) {
            PyObject *item = lift_point(outs[i], rows);
            outs[i].data = NULL;
            if (item == NULL) Py_CLEAR(result);
            else PyList_SET_ITEM(result, i, item);
        }
    }
    for (Py_ssize_t i = 0; i < done && i < count; i++)
        if (outs[i].data != NULL) free_buffer(outs[i]);
out:
    PyMem_Free(futs);
    PyMem_Free(ws);
    PyMem_Free(outs);
    Py_DECREF(keys);
    return result;
}

static PyObject *f_get_values_now(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    return points_now(args, n, 0);
}

static PyObject *f_get_rows_now(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    return points_now(args, n, 1);
}

/* --- Call: started futures as one awaitable, for either face ------------------------- */

typedef struct Call {
    PyObject_HEAD
    Py_ssize_t count, next; /* futures, and the first not yet completed */
    int kind, lift, many, closed;
    uint64_t *futs;
    Waiter *ws;
    PyObject *results; /* a list when many */
    PyObject *loop, *parked;
    PyObject *keep; /* what the futures' buffers came from (keys), held until freed */
} Call;

static PyTypeObject CallType;

static void wake_parked(Call *call) {
    if (atomic_load(&shutting_down) || Py_IsInitialized() == 0) return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_CallMethod(call->loop, "call_soon_threadsafe", "OO", wake_fn, call->parked);
    if (r == NULL) PyErr_WriteUnraisable(call->loop);
    else Py_DECREF(r);
    Py_DECREF((PyObject *)call); /* the reference held for the continuation while parked */
    PyGILState_Release(g);
}

static Call *call_new(Py_ssize_t count, int kind, int lift, int many) {
    Call *c = PyObject_New(Call, &CallType);
    if (c == NULL) return NULL;
    c->count = count;
    c->next = 0;
    c->kind = kind;
    c->lift = lift;
    c->many = many;
    c->closed = 0;
    c->results = NULL;
    c->loop = c->parked = c->keep = NULL;
    c->futs = PyMem_Malloc(sizeof(uint64_t) * (size_t)(count ? count : 1));
    c->ws = PyMem_Malloc(sizeof(Waiter) * (size_t)(count ? count : 1));
    if (c->futs == NULL || c->ws == NULL) {
        c->count = 0;
        Py_DECREF(c);
        return (Call *)PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        atomic_store(&c->ws[i].state, ARMED);
        c->ws[i].code = -1;
        c->ws[i].owner = c;
    }
    return c;
}

/* cancel and free every future not yet completed (once; GIL released around the calls) */
static void call_release(Call *c) {
    Py_ssize_t from = c->next, to = c->count;
    c->next = c->count;
    if (from >= to) return;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = from; i < to; i++) {
        int32_t old = atomic_exchange(&c->ws[i].state, DETACHED);
        if (old == PARKED) c->ws[i].owner = NULL; /* its reference is dropped below */
        if (old == ARMED || old == PARKED || old == SLEEPING) p_cancel[c->kind](c->futs[i]);
        p_free[c->kind](c->futs[i]);
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = from; i < to; i++)
        if (c->ws[i].owner == NULL) {
            c->ws[i].owner = c;
            Py_DECREF((PyObject *)c);
        }
}

static void call_dealloc(Call *c) {
    call_release(c); /* nothing is parked: a parked Call is referenced by its continuation */
    PyMem_Free(c->futs);
    PyMem_Free(c->ws);
    Py_XDECREF(c->results);
    Py_XDECREF(c->loop);
    Py_XDECREF(c->parked);
    Py_XDECREF(c->keep);
    PyObject_Free(c);
}

/* complete the READY future `next` and lift its result (new ref), freeing it */
static PyObject *call_finish_one(Call *c) {
    Py_ssize_t i = c->next;
    uint64_t fut = c->futs[i];
    RustCallStatus st = {0};
    RustBuffer out = {0};
    uint64_t value = 0;
    Py_BEGIN_ALLOW_THREADS
    if (c->kind == RB) out = p_complete_rb(fut, &st);
    else if (c->kind == U64) value = p_complete_u64(fut, &st);
    else p_complete_void(fut, &st);
    p_free[c->kind](fut);
    Py_END_ALLOW_THREADS
    c->next = i + 1;
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    switch (c->lift) {
    case LIFT_VALUE: return lift_point(out, 0);
    case LIFT_ROW: return lift_point(out, 1);
    case LIFT_COLUMNS: {
        PyObject *r = accel_parse_columns(out.data, (size_t)out.len);
        free_buffer(out);
        return r;
    }
    default:
        if (c->kind == U64) {
            p_free_write_handle(value, &st);
            if (st.code) {
                raise_status(&st);
                return NULL;
            }
        }
        Py_RETURN_NONE;
    }
}

static PyObject *call_fail(Call *c) {
    call_release(c);
    return NULL;
}

/* end the iteration with StopIteration(r) (an instance: a tuple result stays one value) */
static PyObject *stop_with(PyObject *r) {
    PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, r);
    Py_DECREF(r);
    if (e != NULL) {
        PyErr_SetObject(PyExc_StopIteration, e);
        Py_DECREF(e);
    }
    return NULL;
}

static PyObject *call_next(Call *c) {
    if (c->closed) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse an awaited native call");
        return NULL;
    }
    if (c->many && c->results == NULL) {
        if ((c->results = PyList_New(0)) == NULL) return call_fail(c);
    }
    while (c->next < c->count) {
        Waiter *w = &c->ws[c->next];
        int32_t state = atomic_load_explicit(&w->state, memory_order_acquire);
        if (state == FIRED) {
            if (w->code != 0) { /* WAKE: poll again */
                Py_BEGIN_ALLOW_THREADS
                arm_and_poll(w, c->kind, c->futs[c->next]);
                Py_END_ALLOW_THREADS
                continue;
            }
            PyObject *r = call_finish_one(c);
            if (r == NULL) return call_fail(c);
            if (!c->many) {
                c->closed = 1;
                return stop_with(r);
            }
            int rc = PyList_Append(c->results, r);
            Py_DECREF(r);
            if (rc < 0) return call_fail(c);
            continue;
        }
        if (state == PARKED) { /* resumed before the wake: keep waiting on the same future */
            return Py_NewRef(c->parked);
        }
        /* ARMED: pending */
        PyObject *sync = PyObject_CallNoArgs(syncing_fn);
        if (sync == NULL) return call_fail(c);
        int blocking = PyObject_IsTrue(sync);
        Py_DECREF(sync);
        int read = c->lift == LIFT_VALUE || c->lift == LIFT_ROW || c->lift == LIFT_COLUMNS;
        if (blocking) {
            int rc;
            PyThreadState *save = PyEval_SaveThread();
            rc = sleep_until_fired(w, read, &save);
            PyEval_RestoreThread(save);
            if (rc < 0) return call_fail(c);
            continue;
        }
        if (read) {
            int fired;
            Py_BEGIN_ALLOW_THREADS
            fired = spin_until_fired(w);
            Py_END_ALLOW_THREADS
            if (fired) continue;
        }
        if (c->loop == NULL && (c->loop = PyObject_CallNoArgs(get_running_loop_fn)) == NULL)
            return call_fail(c);
        Py_XSETREF(c->parked, PyObject_CallMethod(c->loop, "create_future", NULL));
        if (c->parked == NULL) return call_fail(c);
        if (PyObject_SetAttrString(c->parked, "_asyncio_future_blocking", Py_True) < 0)
            return call_fail(c);
        Py_INCREF(c); /* the continuation's reference */
        int32_t expected = ARMED;
        if (!atomic_compare_exchange_strong(&w->state, &expected, PARKED)) {
            Py_DECREF(c); /* it fired meanwhile */
            continue;
        }
        return Py_NewRef(c->parked);
    }
    c->closed = 1;
    if (c->many) {
        PyObject *r = c->results;
        c->results = NULL;
        return stop_with(r);
    }
    PyErr_SetNone(PyExc_StopIteration);
    return NULL;
}

static PyObject *call_send(Call *c, PyObject *value) { return call_next(c); }

static PyObject *call_throw(Call *c, PyObject *args) {
    PyObject *type, *value = NULL, *tb = NULL;
    if (!PyArg_ParseTuple(args, "O|OO", &type, &value, &tb)) return NULL;
    call_release(c);
    c->closed = 1;
    if (PyExceptionInstance_Check(type)) PyErr_SetObject((PyObject *)Py_TYPE(type), type);
    else PyErr_SetObject(type, value);
    return NULL;
}

static PyObject *call_close(Call *c, PyObject *unused) {
    call_release(c);
    c->closed = 1;
    Py_RETURN_NONE;
}

static PyObject *call_await(PyObject *self) { return Py_NewRef(self); }

static PyAsyncMethods call_as_async = {call_await, NULL, NULL, NULL};
static PyMethodDef call_methods[] = {
    {"send", (PyCFunction)call_send, METH_O, NULL},
    {"throw", (PyCFunction)call_throw, METH_VARARGS, NULL},
    {"close", (PyCFunction)call_close, METH_NOARGS, NULL},
    {NULL}};
static PyTypeObject CallType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opendata_kv.native._accel.Call",
    .tp_doc = "Started native calls awaited together (either face); await once.",
    .tp_basicsize = sizeof(Call),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)call_dealloc,
    .tp_as_async = &call_as_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)call_next,
    .tp_methods = call_methods,
};

/* poll every future of a new Call once (all in flight), GIL released */
static PyObject *call_started(Call *c) {
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < c->count; i++) arm_and_poll(&c->ws[i], c->kind, c->futs[i]);
    Py_END_ALLOW_THREADS
    return (PyObject *)c;
}

/* --- the awaitable calls ------------------------------------------------------------- */

static PyObject *points(PyObject *const *args, Py_ssize_t n, int rows, int many) {
    if (n != 2) return PyErr_Format(PyExc_TypeError, "expected 2 arguments");
    int which = many ? (rows ? FB_GET_ROWS : FB_GET_VALUES) : (rows ? FB_READ_ROW : FB_READ_VALUE);
    const Source *src = source_of(args[0]);
    if (src == NULL) return call_fallback(which, args, n);
    PyObject *keys;
    if (many) {
        if ((keys = bytes_tuple(args[1])) == NULL)
            return PyErr_Occurred() ? NULL : call_fallback(which, args, n);
    } else {
        if (!small_bytes(args[1])) return call_fallback(which, args, n);
        keys = PyTuple_Pack(1, args[1]);
        if (keys == NULL) return NULL;
    }
    uint64_t handle;
    if (handle_of(args[0], &handle) < 0) {
        Py_DECREF(keys);
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(keys), started = 0;
    Call *c = call_new(count, RB, rows ? LIFT_ROW : LIFT_VALUE, many);
    if (c == NULL) {
        Py_DECREF(keys);
        return NULL;
    }
    c->keep = keys;
    RustCallStatus st = {0};
    Py_BEGIN_ALLOW_THREADS
    for (; started < count; started++)
        if (start_point(src, handle, PyTuple_GET_ITEM(keys, started), rows, &c->futs[started], &st) < 0)
            break;
    Py_END_ALLOW_THREADS
    if (st.code) {
        c->count = started; /* free what started */
        Py_DECREF(c);
        raise_status(&st);
        return NULL;
    }
    return call_started(c);
}

static PyObject *f_read_value(PyObject *m, PyObject *const *a, Py_ssize_t n) { return points(a, n, 0, 0); }
static PyObject *f_read_row(PyObject *m, PyObject *const *a, Py_ssize_t n) { return points(a, n, 1, 0); }
static PyObject *f_get_values(PyObject *m, PyObject *const *a, Py_ssize_t n) { return points(a, n, 0, 1); }
static PyObject *f_get_rows(PyObject *m, PyObject *const *a, Py_ssize_t n) { return points(a, n, 1, 1); }

/* a Call of one future started by the caller (GIL held), or NULL */
static PyObject *one(uint64_t fut, int kind, int lift) {
    Call *c = call_new(1, kind, lift, 0);
    if (c == NULL) {
        Py_BEGIN_ALLOW_THREADS
        p_free[kind](fut);
        Py_END_ALLOW_THREADS
        return NULL;
    }
    c->futs[0] = fut;
    return call_started(c);
}

static PyObject *f_next_columns(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 2 || Py_TYPE(args[0]) != iterator_type || !PyLong_CheckExact(args[1]))
        return call_fallback(FB_NEXT_COLUMNS, args, n);
    unsigned long long limit = PyLong_AsUnsignedLongLong(args[1]);
    if ((limit == (unsigned long long)-1 && PyErr_Occurred()) || limit >= (1ULL << 32)) {
        PyErr_Clear();
        return call_fallback(FB_NEXT_COLUMNS, args, n); /* it raises the ValueError */
    }
    uint64_t handle, fut;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    uint64_t clone = p_clone_iterator(handle, &st);
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    fut = p_next_batch(clone, (uint32_t)limit);
    return one(fut, RB, LIFT_COLUMNS);
}

static PyObject *f_put(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 3 || Py_TYPE(args[0]) != db_type || !small_bytes(args[1]) || !small_bytes(args[2]))
        return call_fallback(FB_PUT, args, n);
    uint64_t handle, fut = 0;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    Py_BEGIN_ALLOW_THREADS
    RustBuffer kb = lower(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), &st);
    if (!st.code) {
        RustBuffer vb = lower(PyBytes_AS_STRING(args[2]), PyBytes_GET_SIZE(args[2]), &st);
        if (st.code) free_buffer(kb);
        else {
            uint64_t clone = p_clone_db(handle, &st);
            if (st.code) {
                free_buffer(kb);
                free_buffer(vb);
            } else fut = p_db_put(clone, kb, vb);
        }
    }
    Py_END_ALLOW_THREADS
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    return one(fut, U64, LIFT_WRITE);
}

static PyObject *f_delete(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 2 || Py_TYPE(args[0]) != db_type || !small_bytes(args[1]))
        return call_fallback(FB_DELETE, args, n);
    uint64_t handle, fut = 0;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    Py_BEGIN_ALLOW_THREADS
    RustBuffer kb = lower(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), &st);
    if (!st.code) {
        uint64_t clone = p_clone_db(handle, &st);
        if (st.code) free_buffer(kb);
        else fut = p_db_delete(clone, kb);
    }
    Py_END_ALLOW_THREADS
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    return one(fut, U64, LIFT_WRITE);
}

static PyObject *f_write(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 2 || Py_TYPE(args[0]) != db_type || Py_TYPE(args[1]) != batch_type)
        return call_fallback(FB_WRITE, args, n);
    uint64_t handle, batch, fut;
    if (handle_of(args[0], &handle) < 0 || handle_of(args[1], &batch) < 0) return NULL;
    RustCallStatus st = {0};
    uint64_t clone = p_clone_db(handle, &st);
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    uint64_t batch_clone = p_clone_batch(batch, &st);
    if (st.code) {
        RustCallStatus s2 = {0};
        p_free_db(clone, &s2); /* the db clone is ours until the call takes it */
        raise_status(&st);
        return NULL;
    }
    fut = p_db_write(clone, batch_clone);
    return one(fut, U64, LIFT_WRITE);
}

static PyObject *f_batch_put(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 3 || Py_TYPE(args[0]) != batch_type || !small_bytes(args[1]) || !small_bytes(args[2]))
        return call_fallback(FB_BATCH_PUT, args, n);
    uint64_t handle;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    /* short and never blocking: no GIL release (a WriteBatch put takes no lock a runtime
     * thread holds while it waits for the GIL) */
    RustBuffer kb = lower(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), &st);
    if (!st.code) {
        RustBuffer vb = lower(PyBytes_AS_STRING(args[2]), PyBytes_GET_SIZE(args[2]), &st);
        if (st.code) free_buffer(kb);
        else {
            uint64_t clone = p_clone_batch(handle, &st);
            if (st.code) {
                free_buffer(kb);
                free_buffer(vb);
            } else p_batch_put(clone, kb, vb, &st);
        }
    }
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *f_seek(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 2 || Py_TYPE(args[0]) != iterator_type || !small_bytes(args[1]))
        return call_fallback(FB_SEEK, args, n);
    uint64_t handle, fut = 0;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    Py_BEGIN_ALLOW_THREADS
    RustBuffer kb = lower(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), &st);
    if (!st.code) {
        uint64_t clone = p_clone_iterator(handle, &st);
        if (st.code) free_buffer(kb);
        else fut = p_seek(clone, kb);
    }
    Py_END_ALLOW_THREADS
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    return one(fut, VOID, LIFT_NONE);
}

static PyObject *f_batch_delete(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 2 || Py_TYPE(args[0]) != batch_type || !small_bytes(args[1]))
        return call_fallback(FB_BATCH_DELETE, args, n);
    uint64_t handle;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    RustBuffer kb = lower(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), &st);
    if (!st.code) {
        uint64_t clone = p_clone_batch(handle, &st);
        if (st.code) free_buffer(kb);
        else p_batch_delete(clone, kb, &st);
    }
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* PutOptions{ttl: Ttl::ExpireAt(ms)} as the generated converter lowers it: i32 BE variant 4,
 * i64 BE ms (12 bytes, no length prefix) */
static RustBuffer lower_expire_at(int64_t ms, RustCallStatus *st) {
    RustBuffer b = p_alloc(12, st);
    if (st->code) return b;
    uint64_t v = (uint64_t)ms;
    b.data[0] = b.data[1] = b.data[2] = 0;
    b.data[3] = 4;
    for (int i = 0; i < 8; i++) b.data[4 + i] = (uint8_t)(v >> (56 - 8 * i));
    b.len = 12;
    return b;
}

static PyObject *f_batch_put_expiring(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 4 || Py_TYPE(args[0]) != batch_type || !small_bytes(args[1]) ||
        !small_bytes(args[2]) || !PyLong_CheckExact(args[3]))
        return call_fallback(FB_BATCH_PUT_EXPIRING, args, n);
    int overflow = 0;
    long long ms = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (overflow || (ms == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return call_fallback(FB_BATCH_PUT_EXPIRING, args, n);
    }
    uint64_t handle;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    RustBuffer kb = lower(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), &st);
    if (st.code) goto done;
    RustBuffer vb = lower(PyBytes_AS_STRING(args[2]), PyBytes_GET_SIZE(args[2]), &st);
    if (st.code) {
        free_buffer(kb);
        goto done;
    }
    RustBuffer ob = lower_expire_at(ms, &st);
    if (st.code) {
        free_buffer(kb);
        free_buffer(vb);
        goto done;
    }
    uint64_t clone = p_clone_batch(handle, &st);
    if (st.code) {
        free_buffer(kb);
        free_buffer(vb);
        free_buffer(ob);
        goto done;
    }
    p_batch_put_with_options(clone, kb, vb, ob, &st);
done:
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* WriteOptions() as its converter lowers it: the u64 seqnum 0 (8 bytes) */
static RustBuffer lower_write_options(RustCallStatus *st) {
    RustBuffer b = p_alloc(8, st);
    if (st->code) return b;
    memset(b.data, 0, 8);
    b.len = 8;
    return b;
}

/* calls.put_expiring: Db.put_with_options(key, value, PutOptions{ttl: ExpireAt(ms)},
 * WriteOptions()), started as f_put starts a put */
static PyObject *f_put_expiring(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 4 || Py_TYPE(args[0]) != db_type || !small_bytes(args[1]) || !small_bytes(args[2]) ||
        !PyLong_CheckExact(args[3]))
        return call_fallback(FB_PUT_EXPIRING, args, n);
    int overflow = 0;
    long long ms = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (overflow || (ms == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return call_fallback(FB_PUT_EXPIRING, args, n);
    }
    uint64_t handle, fut = 0;
    if (handle_of(args[0], &handle) < 0) return NULL;
    RustCallStatus st = {0};
    RustBuffer bufs[4];
    int made = 0;
    Py_BEGIN_ALLOW_THREADS
    bufs[made] = lower(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), &st);
    if (!st.code) made++;
    if (!st.code) {
        bufs[made] = lower(PyBytes_AS_STRING(args[2]), PyBytes_GET_SIZE(args[2]), &st);
        if (!st.code) made++;
    }
    if (!st.code) {
        bufs[made] = lower_expire_at(ms, &st);
        if (!st.code) made++;
    }
    if (!st.code) {
        bufs[made] = lower_write_options(&st);
        if (!st.code) made++;
    }
    uint64_t clone = 0;
    if (!st.code) clone = p_clone_db(handle, &st);
    if (st.code) {
        for (int i = 0; i < made; i++) free_buffer(bufs[i]);
    } else {
        fut = p_db_put_with_options(clone, bufs[0], bufs[1], bufs[2], bufs[3]);
    }
    Py_END_ALLOW_THREADS
    if (st.code) {
        raise_status(&st);
        return NULL;
    }
    return one(fut, U64, LIFT_WRITE);
}

/* one put queued in the WriteBatch `handle` (a clone of it is consumed): a plain put, or
 * with PutOptions{ttl: ExpireAt(ms)} when `expiring`; 0, or -1 with st set and every buffer
 * made here freed. The GIL is held (short, never blocking, as f_batch_put) */
static int queue_put(uint64_t handle, PyObject *key, PyObject *value, int expiring, int64_t ms,
                     RustCallStatus *st) {
    RustBuffer kb = lower(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), st);
    if (st->code) return -1;
    RustBuffer vb = lower(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), st);
    if (st->code) {
        free_buffer(kb);
        return -1;
    }
    RustBuffer ob = {0};
    if (expiring) {
        ob = lower_expire_at(ms, st);
        if (st->code) {
            free_buffer(kb);
            free_buffer(vb);
            return -1;
        }
    }
    uint64_t clone = p_clone_batch(handle, st);
    if (st->code) {
        free_buffer(kb);
        free_buffer(vb);
        if (expiring) free_buffer(ob);
        return -1;
    }
    if (expiring) p_batch_put_with_options(clone, kb, vb, ob, st); /* Rust owns them from here */
    else p_batch_put(clone, kb, vb, st);
    return st->code ? -1 : 0;
}

/* the expiry column of batch_put_many as a tuple (a copy) of `count` items, each None or an
 * exact int within i64, the ints read into *ms (PyMem, freed by the caller; unset where None);
 * NULL with no exception when it is not that (the pure function decides, and names what is
 * wrong), NULL with one when memory ran out */
static PyObject *expiry_column(PyObject *expires, Py_ssize_t count, int64_t **ms) {
    if (!PyList_CheckExact(expires) && !PyTuple_CheckExact(expires)) return NULL;
    PyObject *t = PySequence_Tuple(expires);
    if (t == NULL) return NULL;
    if (PyTuple_GET_SIZE(t) != count) {
        Py_DECREF(t);
        return NULL;
    }
    *ms = PyMem_Malloc(sizeof(int64_t) * (size_t)(count ? count : 1));
    if (*ms == NULL) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *at = PyTuple_GET_ITEM(t, i);
        if (at == Py_None) continue;
        int overflow = 0;
        long long v = PyLong_CheckExact(at) ? PyLong_AsLongLongAndOverflow(at, &overflow) : -1;
        if (!PyLong_CheckExact(at) || overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyMem_Free(*ms);
            *ms = NULL;
            Py_DECREF(t);
            return NULL;
        }
        (*ms)[i] = (int64_t)v;
    }
    return t;
}

/* calls.batch_put_many(batch, keys, values, expires=None): every put queued in order in one
 * call, the batch's handle read once; `expires` (None, or one Unix-ms expiry or None per
 * put) makes a put expiring where it holds an int, so plain and TTL puts share the call */
static PyObject *f_batch_put_many(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if ((n != 3 && n != 4) || Py_TYPE(args[0]) != batch_type)
        return call_fallback(FB_BATCH_PUT_MANY, args, n);
    PyObject *keys = bytes_tuple(args[1]);
    if (keys == NULL) return PyErr_Occurred() ? NULL : call_fallback(FB_BATCH_PUT_MANY, args, n);
    PyObject *values = bytes_tuple(args[2]), *expires = NULL, *result = NULL;
    int64_t *ms = NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(keys);
    if (values == NULL || PyTuple_GET_SIZE(values) != count) goto pure;
    if (n == 4 && args[3] != Py_None && (expires = expiry_column(args[3], count, &ms)) == NULL)
        goto pure;
    uint64_t handle;
    if (handle_of(args[0], &handle) < 0) goto out;
    RustCallStatus st = {0};
    for (Py_ssize_t i = 0; i < count; i++) {
        int expiring = expires != NULL && PyTuple_GET_ITEM(expires, i) != Py_None;
        if (queue_put(handle, PyTuple_GET_ITEM(keys, i), PyTuple_GET_ITEM(values, i), expiring,
                      expiring ? ms[i] : 0, &st) < 0) {
            raise_status(&st);
            goto out;
        }
    }
    result = Py_NewRef(Py_None);
    goto out;
pure:
    if (!PyErr_Occurred()) result = call_fallback(FB_BATCH_PUT_MANY, args, n);
out:
    PyMem_Free(ms);
    Py_DECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(expires);
    return result;
}

/* calls.expire_after(ms): the wall clock in Unix ms (time.time_ns() // 1_000_000, the clock
 * slatedb stamps with) plus `ms`, without Python's big-int arithmetic on nanoseconds: the
 * expiry of a batched TTL put, read per put */
static PyObject *f_expire_after(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 1 || !PyLong_CheckExact(args[0])) return call_fallback(FB_EXPIRE_AFTER, args, n);
    int overflow = 0;
    long long ms = PyLong_AsLongLongAndOverflow(args[0], &overflow);
    struct timespec now;
    if (overflow || (ms == -1 && PyErr_Occurred()) || ms < 0 || ms > ((long long)1 << 62) ||
        clock_gettime(CLOCK_REALTIME, &now) != 0) {
        PyErr_Clear();
        return call_fallback(FB_EXPIRE_AFTER, args, n);
    }
    /* floor division as Python's, for a clock before 1970 too */
    long long sec_ms = (long long)now.tv_sec * 1000, frac = now.tv_nsec / 1000000;
    return PyLong_FromLongLong(sec_ms + frac + ms);
}

/* --- parsers, for the differential fuzz (exact-size copies, so ASan sees any overread) --- */

/* send_to_end(awaitable, sentinel): driver.drive's one step of a coroutine (or a TimedAwait)
 * through its am_send, which hands the result back without a StopIteration: the result when
 * it ended, `sentinel` when it awaited something (drive closes it and raises) */
static PyObject *f_send_to_end(PyObject *m, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "send_to_end(awaitable, sentinel)");
        return NULL;
    }
    PyObject *result;
    PySendResult s = PyIter_Send(args[0], Py_None, &result);
    if (s == PYGEN_RETURN) return result;
    if (s == PYGEN_ERROR) return NULL;
    Py_DECREF(result);
    return Py_NewRef(args[1]);
}

static PyObject *parse_with(PyObject *arg, PyObject *(*parse)(const uint8_t *, size_t)) {
    Py_buffer b;
    if (!ready) return PyErr_Format(PyExc_RuntimeError, "_accel.init has not run");
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    uint8_t *copy = PyMem_RawMalloc(b.len ? (size_t)b.len : 1);
    if (copy == NULL) {
        PyBuffer_Release(&b);
        return PyErr_NoMemory();
    }
    memcpy(copy, b.buf, (size_t)b.len);
    PyObject *r = parse(copy, (size_t)b.len);
    PyMem_RawFree(copy);
    PyBuffer_Release(&b);
    return r;
}

static PyObject *f_parse_columns(PyObject *m, PyObject *a) { return parse_with(a, accel_parse_columns); }
static PyObject *f_parse_point_row(PyObject *m, PyObject *a) { return parse_with(a, accel_parse_point_row); }
static PyObject *f_parse_optional_bytes(PyObject *m, PyObject *a) {
    return parse_with(a, accel_parse_optional_bytes);
}

/* --- init ---------------------------------------------------------------------------- */

static int address(PyObject *table, const char *name, void **out) {
    PyObject *v = PyDict_GetItemString(table, name);
    if (v == NULL) {
        PyErr_Format(PyExc_KeyError, "native entry point %s missing", name);
        return -1;
    }
    void *p = PyLong_AsVoidPtr(v);
    if (p == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "native entry point %s is NULL", name);
        return -1;
    }
    *out = p;
    return 0;
}

#define ADDR(var, name) if (address(table, name, (void **)&(var)) < 0) return NULL

static PyObject *f_init(PyObject *m, PyObject *args, PyObject *kw) {
    static char *names[] = {"table", "sources", "types", "hooks", "fallbacks", NULL};
    PyObject *table, *srcs, *types, *hooks, *fbs;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!O!O!", names, &PyDict_Type, &table,
                                     &PyTuple_Type, &srcs, &PyTuple_Type, &types, &PyTuple_Type,
                                     &hooks, &PyDict_Type, &fbs))
        return NULL;
    static const char *kinds[3] = {"rust_buffer", "u64", "void"};
    char name[96];
    ADDR(p_alloc, "rustbuffer_alloc");
    ADDR(p_rbfree, "rustbuffer_free");
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "poll_%s", kinds[k]);
        ADDR(p_poll[k], name);
        snprintf(name, sizeof name, "cancel_%s", kinds[k]);
        ADDR(p_cancel[k], name);
        snprintf(name, sizeof name, "free_%s", kinds[k]);
        ADDR(p_free[k], name);
    }
    ADDR(p_complete_rb, "complete_rust_buffer");
    ADDR(p_complete_u64, "complete_u64");
    ADDR(p_complete_void, "complete_void");
    ADDR(p_clone_db, "clone_db");
    ADDR(p_clone_iterator, "clone_dbiterator");
    ADDR(p_clone_batch, "clone_writebatch");
    ADDR(p_next_batch, "dbiterator_next_batch");
    ADDR(p_db_put, "db_put");
    ADDR(p_db_put_with_options, "db_put_with_options");
    ADDR(p_db_delete, "db_delete");
    ADDR(p_db_write, "db_write");
    ADDR(p_batch_put, "writebatch_put");
    ADDR(p_free_write_handle, "free_writehandle");
    ADDR(p_free_db, "free_db");
    ADDR(p_seek, "dbiterator_seek");
    ADDR(p_batch_delete, "writebatch_delete");
    ADDR(p_batch_put_with_options, "writebatch_put_with_options");
    /* sources: ((class, clone_name_suffix), ...) in order, N_SOURCES of them */
    if (PyTuple_GET_SIZE(srcs) != N_SOURCES || PyTuple_GET_SIZE(types) != 3 || PyTuple_GET_SIZE(hooks) != 5)
        return PyErr_Format(PyExc_ValueError, "init: wrong table sizes");
    for (int i = 0; i < N_SOURCES; i++) {
        PyObject *cls, *suffix;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(srcs, i), "O!U", &PyType_Type, &cls, &suffix)) return NULL;
        const char *s = PyUnicode_AsUTF8(suffix);
        if (s == NULL) return NULL;
        snprintf(name, sizeof name, "clone_%s", s);
        ADDR(sources[i].clone, name);
        snprintf(name, sizeof name, "%s_get", s);
        ADDR(sources[i].get, name);
        snprintf(name, sizeof name, "%s_get_key_value", s);
        ADDR(sources[i].get_key_value, name);
        Py_INCREF(cls);
        sources[i].type = (PyTypeObject *)cls;
    }
    for (int i = 0; i < 3; i++)
        if (!PyType_Check(PyTuple_GET_ITEM(types, i))) return PyErr_Format(PyExc_TypeError, "init: types");
    db_type = (PyTypeObject *)Py_NewRef(PyTuple_GET_ITEM(types, 0));
    iterator_type = (PyTypeObject *)Py_NewRef(PyTuple_GET_ITEM(types, 1));
    batch_type = (PyTypeObject *)Py_NewRef(PyTuple_GET_ITEM(types, 2));
    raise_status_hook = Py_NewRef(PyTuple_GET_ITEM(hooks, 0));
    syncing_fn = Py_NewRef(PyTuple_GET_ITEM(hooks, 1));
    get_running_loop_fn = Py_NewRef(PyTuple_GET_ITEM(hooks, 2));
    wake_fn = Py_NewRef(PyTuple_GET_ITEM(hooks, 3));
    accel_internal_error = Py_NewRef(PyTuple_GET_ITEM(hooks, 4));
    for (int i = 0; i < FB_COUNT; i++) { /* a name calls.py lacks is never rebound either */
        PyObject *f = PyDict_GetItemString(fbs, fallback_names[i]);
        Py_XSETREF(fallback[i], Py_XNewRef(f));
    }
    ready = 1;
    Py_RETURN_NONE;
}

static PyObject *f_shutdown(PyObject *m, PyObject *unused) {
    atomic_store(&shutting_down, 1);
    Py_RETURN_NONE;
}

#define FAST(name, f, doc) {name, (PyCFunction)(void (*)(void))f, METH_FASTCALL, doc}
static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))f_init, METH_VARARGS | METH_KEYWORDS,
     "Bind the library's entry points, the binding classes, the hooks and the pure fallbacks."},
    {"shutdown", f_shutdown, METH_NOARGS, "At exit: continuations stop touching Python."},
    FAST("get_now", f_get_now, "calls.get_now in C."),
    FAST("get_row_now", f_get_row_now, "calls.get_row_now in C."),
    FAST("get_values_now", f_get_values_now, "calls.get_values_now in C."),
    FAST("get_rows_now", f_get_rows_now, "calls.get_rows_now in C."),
    FAST("read_value", f_read_value, "calls.read_value in C."),
    FAST("read_row", f_read_row, "calls.read_row in C."),
    FAST("get_values", f_get_values, "calls.get_values in C."),
    FAST("get_rows", f_get_rows, "calls.get_rows in C."),
    FAST("next_columns", f_next_columns, "calls.next_columns in C."),
    FAST("put", f_put, "calls.put in C."),
    FAST("put_expiring", f_put_expiring, "calls.put_expiring in C."),
    FAST("delete", f_delete, "calls.delete in C."),
    FAST("write", f_write, "calls.write in C."),
    FAST("batch_put", f_batch_put, "calls.batch_put in C."),
    FAST("seek", f_seek, "calls.seek in C."),
    FAST("batch_delete", f_batch_delete, "calls.batch_delete in C."),
    FAST("batch_put_expiring", f_batch_put_expiring, "calls.batch_put_expiring in C."),
    FAST("batch_put_many", f_batch_put_many, "calls.batch_put_many in C."),
    FAST("expire_after", f_expire_after, "calls.expire_after in C."),
    FAST("pack_value", accel_pack_value, "calls.pack_value in C: msgpack of the common types."),
    FAST("send_to_end", f_send_to_end, "driver.drive's step of a coroutine, without StopIteration."),
    {"_parse_columns", f_parse_columns, METH_O, "wire.read_columns's parser in C (tests)."},
    {"_parse_point_row", f_parse_point_row, METH_O, "wire.parse_point_row in C (tests)."},
    {"_parse_optional_bytes", f_parse_optional_bytes, METH_O, "wire.parse_optional_bytes in C (tests)."},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_accel",
                                    "The optional C accelerator of opendata_kv.native.", -1, methods};

PyMODINIT_FUNC PyInit__accel(void) {
    if (PyType_Ready(&CallType) < 0) return NULL;
    if ((str_handle = PyUnicode_InternFromString("_handle")) == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "ABI", ABI) < 0 || PyModule_AddType(m, &CallType) < 0 ||
        accel_records_add(m) < 0 || accel_timing_add(m) < 0 || accel_keyenc_add(m) < 0 ||
        accel_cachekeys_add(m) < 0 || accel_columns_add(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
