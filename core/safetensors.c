#include "core/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cq_st_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static cq_st_dtype dtype_of(const char *name, size_t *esize) {
    if (!strcmp(name, "F32")) return *esize = 4, CQ_ST_F32;
    if (!strcmp(name, "F16")) return *esize = 2, CQ_ST_F16;
    if (!strcmp(name, "BF16")) return *esize = 2, CQ_ST_BF16;
    if (!strcmp(name, "I8")) return *esize = 1, CQ_ST_I8;
    *esize = 0;
    return CQ_ST_OTHER;
}

/* One header entry into t (name already set). */
static cq_status parse_entry(const cJSON *e, size_t data_len, const uint8_t *data, cq_st_tensor *t, cq_err *err) {
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) ||
        cJSON_GetArraySize(offs) != 2)
        return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: header entry lacks dtype, shape or data_offsets", t->name);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dtype->valuestring);
    size_t esize;
    t->dtype = dtype_of(dtype->valuestring, &esize);
    t->ndim = cJSON_GetArraySize(shape);
    if (t->ndim > CQ_ST_MAX_DIMS) return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: %d dimensions", t->name, t->ndim);
    t->numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        const cJSON *d = cJSON_GetArrayItem(shape, i);
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble != floor(d->valuedouble) || d->valuedouble > 1e12)
            return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: dimension %d of its shape is not a size", t->name, i);
        t->shape[i] = (int64_t)d->valuedouble;
        t->numel *= (size_t)t->shape[i];
    }
    const cJSON *o0 = cJSON_GetArrayItem(offs, 0), *o1 = cJSON_GetArrayItem(offs, 1);
    double b = cJSON_IsNumber(o0) ? o0->valuedouble : -1, en = cJSON_IsNumber(o1) ? o1->valuedouble : -1;
    if (b < 0 || en < b || en > (double)data_len)
        return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: data_offsets [%.0f, %.0f] are not inside the %zu data bytes",
                          t->name, b, en, data_len);
    t->size_bytes = (size_t)(en - b);
    t->data = esize ? data + (size_t)b : NULL;
    return CQ_OK;
}

cq_status cq_safetensors_parse(const void *buf, size_t len, cq_safetensors *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    const uint8_t *p = buf;
    if (len < 8) return cq_err_set(err, CQ_ERR_FORMAT, "file too short for a safetensors header");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | p[i];
    if (hlen > len - 8)
        return cq_err_set(err, CQ_ERR_FORMAT, "header length %llu exceeds the file (truncated?)", (unsigned long long)hlen);
    cJSON *hdr = cJSON_ParseWithLength((const char *)p + 8, (size_t)hlen);
    if (!hdr || !cJSON_IsObject(hdr)) {
        cJSON_Delete(hdr);
        return cq_err_set(err, CQ_ERR_FORMAT, "header is not a JSON object");
    }
    const uint8_t *data = p + 8 + hlen;
    const size_t data_len = len - 8 - (size_t)hlen;
    size_t n = 0;
    for (const cJSON *e = hdr->child; e; e = e->next) n += strcmp(e->string, "__metadata__") != 0;
    cq_status rc = CQ_OK;
    out->tensors = calloc(n ? n : 1, sizeof *out->tensors);
    if (!out->tensors) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (const cJSON *e = hdr->child; e && !rc; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        if (cq_safetensors_find(out, e->string)) {
            rc = cq_err_set(err, CQ_ERR_FORMAT, "tensor %s appears twice in the header", e->string);
            break;
        }
        cq_st_tensor *t = &out->tensors[out->n++];
        if (!(t->name = strdup(e->string))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        else rc = parse_entry(e, data_len, data, t, err);
    }
    cJSON_Delete(hdr);
    if (rc) cq_safetensors_free(out);
    return rc;
}

void cq_safetensors_free(cq_safetensors *st) {
    for (size_t i = 0; st->tensors && i < st->n; i++) free(st->tensors[i].name);
    free(st->tensors);
    memset(st, 0, sizeof *st);
}

const cq_st_tensor *cq_safetensors_find(const cq_safetensors *st, const char *name) {
    for (size_t i = 0; i < st->n; i++)
        if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
    return NULL;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (!man) {
            bits = sign;
        } else { /* subnormal: renormalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

cq_status cq_st_to_f32(const cq_st_tensor *t, float *dst, cq_err *err) {
    const uint8_t *src = t->data;
    size_t esize;
    dtype_of(t->dtype_name, &esize);
    if (esize && t->size_bytes != t->numel * esize)
        return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: its %zu data bytes do not hold %zu %s values", t->name,
                          t->size_bytes, t->numel, t->dtype_name);
    switch (t->dtype) {
    case CQ_ST_F32: memcpy(dst, src, t->numel * 4); break;
    case CQ_ST_F16:
    case CQ_ST_BF16:
        for (size_t i = 0; i < t->numel; i++) {
            uint16_t v = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
            if (t->dtype == CQ_ST_BF16) {
                uint32_t bits = (uint32_t)v << 16;
                memcpy(&dst[i], &bits, 4);
            } else {
                dst[i] = half_to_float(v);
            }
        }
        break;
    default:
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "tensor %s: dtype %s; expected F32, F16 or BF16%s", t->name,
                          t->dtype_name, t->dtype == CQ_ST_I8 ? " (an I8 tensor needs its scales)" : "");
    }
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(dst[i])) return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: element %zu is not finite", t->name, i);
    return CQ_OK;
}

cq_status cq_st_rows_i8_to_f32(const cq_st_tensor *q, const cq_st_tensor *scale, float *dst, cq_err *err) {
    if (q->dtype != CQ_ST_I8 || q->ndim != 2 || q->size_bytes != q->numel)
        return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: expected a 2-D I8 matrix (dtype %s, %d dimensions, %zu bytes "
                          "for %zu values)", q->name, q->dtype_name, q->ndim, q->size_bytes, q->numel);
    const size_t rows = (size_t)q->shape[0], cols = (size_t)q->shape[1];
    if (scale->ndim != 1 || (size_t)scale->shape[0] != rows) {
        char have[96];
        cq_st_shape_str(have, sizeof have, scale->ndim, scale->shape);
        return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: shape %s; its matrix %s has %zu rows, one scale each",
                          scale->name, have, q->name, rows);
    }
    float *s = malloc((rows ? rows : 1) * sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = cq_st_to_f32(scale, s, err);
    for (size_t i = 0; i < rows && !rc; i++) {
        const int8_t *row = (const int8_t *)q->data + i * cols;
        for (size_t j = 0; j < cols; j++) dst[i * cols + j] = (float)row[j] * s[i];
    }
    free(s);
    return rc;
}
