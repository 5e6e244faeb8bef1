/* Shared declarations of the optional C accelerator (opendata_kv.native._accel): the UniFFI
 * ABI of slatedb 0.17 (RustBuffer, RustCallStatus), the byte parsers of wire.c and the
 * Record builder of records.c. */
#ifndef OPENDATA_KV_ACCEL_H
#define OPENDATA_KV_ACCEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t capacity;
    uint64_t len;
    uint8_t *data;
} RustBuffer;

typedef struct {
    int8_t code;
    RustBuffer error_buf;
} RustCallStatus;

/* the exception classes the parsers raise, as wire.py does (set by init) */
extern PyObject *accel_internal_error;

/* parsers of the bytes of a returned RustBuffer: a new reference, or NULL with the same
 * exception (type and message) as wire.py's parse_* / read_columns */
PyObject *accel_parse_optional_bytes(const uint8_t *data, size_t size);
PyObject *accel_parse_point_row(const uint8_t *data, size_t size);
PyObject *accel_parse_columns(const uint8_t *data, size_t size);

/* pack.c: pack_value(value, max_len, max_depth) -> msgpack bytes, or None when not ours */
PyObject *accel_pack_value(PyObject *m, PyObject *const *args, Py_ssize_t n);
/* pack.c: the same for C callers: bytes, Py_None (a new reference) when not ours, NULL on error */
PyObject *accel_pack(PyObject *value, Py_ssize_t max_len, int max_depth);

/* keyenc.c: adds KeyEncoder, queue_put and queue_puts (typed keys and batch puts) */
int accel_keyenc_add(PyObject *module);

/* records.c: adds the RecordDecoder type (scanned rows to typed Records) to the module */
int accel_records_add(PyObject *module);

/* timing.c: adds Durations, Timed and TimedAwait (store metrics' durations) to the module */
int accel_timing_add(PyObject *module);

/* cachekeys.c: adds KeyFilter (which keys the writer's record cache may hold) to the module */
int accel_cachekeys_add(PyObject *module);

/* columns.c: adds entry_column and count_into (index upkeep's column passes) to the module */
int accel_columns_add(PyObject *module);

#endif
