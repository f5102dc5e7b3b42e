/* safetensors reader, shared by the SSM encoder's weights (ssm/weights.c) and the decoder's adapters
 * (decoder/lora.c).
 *
 * The format: an 8-byte little-endian header length n, n bytes of JSON {"name": {"dtype", "shape",
 * "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data; offsets count from the end of the header.
 * Parsing checks every entry: a shape of non-negative integers and offsets inside the data; converting
 * (cq_st_to_f32) checks the dtype (F32, F16, BF16; I8 with a scale a row through cq_st_rows_i8_to_f32; others are
 * listed with their names but cannot be converted) and
 * that the bytes hold exactly the shape's elements, so that a caller can first say what shape it expected. */
#ifndef CQ_CORE_SAFETENSORS_H
#define CQ_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define CQ_ST_MAX_DIMS 8

typedef enum { CQ_ST_F32 = 0, CQ_ST_F16 = 1, CQ_ST_BF16 = 2, CQ_ST_I8 = 3, CQ_ST_OTHER = 4 } cq_st_dtype;

typedef struct {
    char *name;
    char dtype_name[16]; /* as stored: "F32", "BF16", "I64" ... */
    cq_st_dtype dtype;
    int ndim;
    int64_t shape[CQ_ST_MAX_DIMS];
    size_t numel;
    const uint8_t *data; /* into the caller's buffer; NULL for CQ_ST_OTHER */
    size_t size_bytes;
} cq_st_tensor;

typedef struct {
    cq_st_tensor *tensors; /* in header order */
    size_t n;
} cq_safetensors;

/* Parses buf (which must outlive the result: tensors point into it). Errors name the tensor and what is wrong. */
cq_status cq_safetensors_parse(const void *buf, size_t len, cq_safetensors *out, cq_err *err);
void cq_safetensors_free(cq_safetensors *st);
const cq_st_tensor *cq_safetensors_find(const cq_safetensors *st, const char *name); /* NULL when absent */

/* "[2, 3]" */
void cq_st_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);
/* Copies t into dst (t->numel floats) as F32; CQ_ERR_UNSUPPORTED for a dtype other than F32/F16/BF16,
 * CQ_ERR_FORMAT for a value that is not finite. */
cq_status cq_st_to_f32(const cq_st_tensor *t, float *dst, cq_err *err);
/* An I8 matrix q (rows x cols) stored with one scale a row (scale: F32/F16/BF16, shape [rows]) into dst as F32:
 * dst[i][j] = q[i][j] * scale[i]. CQ_ERR_FORMAT for a q that is not a 2-D I8 tensor, a scale of another shape, or a
 * scale that is not finite. */
cq_status cq_st_rows_i8_to_f32(const cq_st_tensor *q, const cq_st_tensor *scale, float *dst, cq_err *err);

#endif
