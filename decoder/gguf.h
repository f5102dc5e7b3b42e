/* GGUF reader: memory-maps a GGUF v2/v3 file and indexes its metadata and tensors.
 *
 * Layout (all little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count; kv_count pairs of
 * (string key, u32 value type, value); tensor_count infos of (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
 * u64 offset); padding to `general.alignment` (default 32); the tensor data blob. A string is u64 length + bytes.
 * ne[0] is the innermost (contiguous) dimension: a PyTorch weight (out, in) is stored as ne = {in, out}.
 *
 * Everything is validated at open: counts against the file size, string and array lengths, value types, tensor
 * dimensions and types, offsets aligned and inside the file, no two tensors overlapping. A truncated or hostile
 * file gets CQ_ERR_FORMAT with a message, never a read out of bounds. The handle is read-only and may be shared
 * between threads. */
#ifndef CQ_DECODER_GGUF_H
#define CQ_DECODER_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum {
    CQ_GGUF_UINT8 = 0,
    CQ_GGUF_INT8 = 1,
    CQ_GGUF_UINT16 = 2,
    CQ_GGUF_INT16 = 3,
    CQ_GGUF_UINT32 = 4,
    CQ_GGUF_INT32 = 5,
    CQ_GGUF_FLOAT32 = 6,
    CQ_GGUF_BOOL = 7,
    CQ_GGUF_STRING = 8,
    CQ_GGUF_ARRAY = 9,
    CQ_GGUF_UINT64 = 10,
    CQ_GGUF_INT64 = 11,
    CQ_GGUF_FLOAT64 = 12,
} cq_gguf_type;

/* A string inside the mapped file: not NUL-terminated. */
typedef struct {
    const char *ptr;
    uint64_t len;
} cq_gguf_str;

typedef struct {
    const char *key;        /* NUL-terminated copy */
    cq_gguf_type type;
    union {
        uint64_t u;         /* any unsigned integer or bool */
        int64_t i;          /* any signed integer */
        double f;           /* float32 or float64 */
        cq_gguf_str s;
    } v;
    /* Arrays (type == CQ_GGUF_ARRAY): element type, count and the raw little-endian elements in the map. String
     * arrays also get `strs`, one entry per element (nested arrays are rejected at open). */
    cq_gguf_type arr_type;
    uint64_t arr_count;
    const uint8_t *arr_data;
    cq_gguf_str *strs;
} cq_gguf_kv;

#define CQ_GGUF_MAX_DIMS 4

typedef struct {
    const char *name;        /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[CQ_GGUF_MAX_DIMS]; /* ne[0] innermost; unused dimensions are 1 */
    uint32_t type;           /* cq_qtype (decoder/quant.h) */
    uint64_t offset;         /* from the start of the data blob */
    uint64_t n_elements;
    uint64_t size_bytes;
    const void *data;        /* into the map */
} cq_gguf_tensor;

typedef struct cq_gguf cq_gguf;

cq_status cq_gguf_open(const char *path, cq_gguf **out, cq_err *err);
/* Same checks over a buffer the caller keeps alive (tests; no mmap). */
cq_status cq_gguf_open_memory(const void *data, size_t size, cq_gguf **out, cq_err *err);
void cq_gguf_close(cq_gguf *g);

uint32_t cq_gguf_version(const cq_gguf *g);
size_t cq_gguf_alignment(const cq_gguf *g);
/* The file's read-only mapping (what the tensors' data point into) and its size; NULL and 0 for a buffer opened by
 * cq_gguf_open_memory (the caller's memory, never to be given back by madvise). */
const void *cq_gguf_file_map(const cq_gguf *g, size_t *size);
size_t cq_gguf_kv_count(const cq_gguf *g);
const cq_gguf_kv *cq_gguf_kv_at(const cq_gguf *g, size_t i);
const cq_gguf_kv *cq_gguf_find_kv(const cq_gguf *g, const char *key); /* NULL when absent */
size_t cq_gguf_tensor_count(const cq_gguf *g);
const cq_gguf_tensor *cq_gguf_tensor_at(const cq_gguf *g, size_t i);
const cq_gguf_tensor *cq_gguf_find_tensor(const cq_gguf *g, const char *name);

/* Typed metadata getters. Absent key: CQ_ERR_NOT_FOUND; present with an incompatible type or out of range:
 * CQ_ERR_FORMAT. Integers of any width convert when the value fits; floats accept float32/float64 and integers. */
cq_status cq_gguf_get_u32(const cq_gguf *g, const char *key, uint32_t *out, cq_err *err);
cq_status cq_gguf_get_f32(const cq_gguf *g, const char *key, float *out, cq_err *err);
cq_status cq_gguf_get_bool(const cq_gguf *g, const char *key, bool *out, cq_err *err);
/* String value copied into out (NUL-terminated, truncated to cap). */
cq_status cq_gguf_get_str(const cq_gguf *g, const char *key, char *out, size_t cap, cq_err *err);
/* Array of n elements of an integer or float type, converted. Absent: CQ_ERR_NOT_FOUND. */
cq_status cq_gguf_get_arr_i32(const cq_gguf *g, const char *key, int32_t *out, size_t n, cq_err *err);
cq_status cq_gguf_get_arr_f32(const cq_gguf *g, const char *key, float *out, size_t n, cq_err *err);

#endif
