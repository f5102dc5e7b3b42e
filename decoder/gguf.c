#include "decoder/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder/quant.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_STRING (1u << 30) /* 1 GiB: far above any real key, name or token */

struct cq_gguf {
    const uint8_t *base;
    size_t size;
    bool mapped; /* munmap at close */
    uint32_t version;
    size_t alignment;
    cq_gguf_kv *kvs;
    size_t n_kv;
    cq_gguf_tensor *tensors;
    size_t n_tensors;
};

/* ---- bounded little-endian cursor --------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *base;
    size_t size, pos;
    cq_err *err;
    const char *what; /* what is being read, for the message */
} cursor;

static cq_status truncated(cursor *c, size_t need) {
    return cq_err_set(c->err, CQ_ERR_FORMAT,
                      "GGUF truncated or corrupt: reading %s needs %zu bytes at offset %zu, file has %zu", c->what,
                      need, c->pos, c->size);
}

static cq_status need(cursor *c, uint64_t n) {
    if (n > c->size - c->pos) return truncated(c, n > SIZE_MAX ? SIZE_MAX : (size_t)n);
    return CQ_OK;
}

static cq_status rd_bytes(cursor *c, void *out, size_t n) {
    cq_status s = need(c, n);
    if (s) return s;
    memcpy(out, c->base + c->pos, n);
    c->pos += n;
    return CQ_OK;
}

static cq_status rd_u32(cursor *c, uint32_t *v) {
    uint8_t b[4];
    cq_status s = rd_bytes(c, b, 4);
    if (s) return s;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return CQ_OK;
}

static cq_status rd_u64(cursor *c, uint64_t *v) {
    uint32_t lo, hi;
    cq_status s = rd_u32(c, &lo);
    if (!s) s = rd_u32(c, &hi);
    if (!s) *v = (uint64_t)hi << 32 | lo;
    return s;
}

static cq_status rd_str(cursor *c, cq_gguf_str *out) {
    uint64_t len;
    cq_status s = rd_u64(c, &len);
    if (s) return s;
    if (len > GGUF_MAX_STRING)
        return cq_err_set(c->err, CQ_ERR_FORMAT, "GGUF corrupt: %s has length %llu at offset %zu", c->what,
                          (unsigned long long)len, c->pos - 8);
    if ((s = need(c, len))) return s;
    out->ptr = (const char *)c->base + c->pos;
    out->len = len;
    c->pos += (size_t)len;
    return CQ_OK;
}

static size_t scalar_size(cq_gguf_type t) {
    switch (t) {
    case CQ_GGUF_UINT8: case CQ_GGUF_INT8: case CQ_GGUF_BOOL: return 1;
    case CQ_GGUF_UINT16: case CQ_GGUF_INT16: return 2;
    case CQ_GGUF_UINT32: case CQ_GGUF_INT32: case CQ_GGUF_FLOAT32: return 4;
    case CQ_GGUF_UINT64: case CQ_GGUF_INT64: case CQ_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static uint64_t load_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Decodes a scalar of type t at p into the kv union. */
static void decode_scalar(cq_gguf_type t, const uint8_t *p, cq_gguf_kv *kv) {
    uint64_t raw = load_le(p, scalar_size(t));
    switch (t) {
    case CQ_GGUF_INT8: kv->v.i = (int8_t)raw; break;
    case CQ_GGUF_INT16: kv->v.i = (int16_t)raw; break;
    case CQ_GGUF_INT32: kv->v.i = (int32_t)raw; break;
    case CQ_GGUF_INT64: kv->v.i = (int64_t)raw; break;
    case CQ_GGUF_FLOAT32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, 4);
        kv->v.f = f;
        break;
    }
    case CQ_GGUF_FLOAT64: memcpy(&kv->v.f, &raw, 8); break;
    default: kv->v.u = raw; break;
    }
}

static char *dup_str(cq_gguf_str s) {
    char *p = malloc((size_t)s.len + 1);
    if (!p) return NULL;
    memcpy(p, s.ptr, (size_t)s.len);
    p[s.len] = 0;
    return p;
}

static cq_status read_kv(cursor *c, size_t index, cq_gguf_kv *kv) {
    cq_gguf_str key;
    c->what = "a metadata key";
    cq_status s = rd_str(c, &key);
    if (s) return cq_err_prefix(c->err, "metadata %zu: ", index);
    if (key.len == 0 || memchr(key.ptr, 0, (size_t)key.len))
        return cq_err_set(c->err, CQ_ERR_FORMAT, "GGUF corrupt: metadata %zu has an empty or binary key", index);
    if (!(kv->key = dup_str(key))) return cq_err_set(c->err, CQ_ERR_NOMEM, "out of memory reading GGUF metadata");
    uint32_t type;
    c->what = kv->key;
    if ((s = rd_u32(c, &type))) return s;
    kv->type = (cq_gguf_type)type;
    if (type == CQ_GGUF_STRING) return rd_str(c, &kv->v.s);
    if (type == CQ_GGUF_ARRAY) {
        uint32_t at;
        uint64_t count;
        if ((s = rd_u32(c, &at)) || (s = rd_u64(c, &count))) return s;
        kv->arr_type = (cq_gguf_type)at;
        kv->arr_count = count;
        kv->arr_data = c->base + c->pos;
        if (at == CQ_GGUF_STRING) {
            /* Each element is at least 8 bytes: bound the count by the file before allocating. */
            if (count > (c->size - c->pos) / 8) return truncated(c, SIZE_MAX);
            kv->strs = malloc((size_t)(count ? count : 1) * sizeof *kv->strs);
            if (!kv->strs) return cq_err_set(c->err, CQ_ERR_NOMEM, "out of memory reading %s", kv->key);
            for (uint64_t i = 0; i < count; i++)
                if ((s = rd_str(c, &kv->strs[i]))) return s;
            return CQ_OK;
        }
        size_t es = scalar_size((cq_gguf_type)at);
        if (!es)
            return cq_err_set(c->err, CQ_ERR_FORMAT, "GGUF: metadata %s is an array of unsupported type %u",
                              kv->key, at);
        if (count > (c->size - c->pos) / es) return truncated(c, SIZE_MAX);
        c->pos += (size_t)count * es;
        return CQ_OK;
    }
    size_t es = scalar_size(kv->type);
    if (!es) return cq_err_set(c->err, CQ_ERR_FORMAT, "GGUF: metadata %s has unknown value type %u", kv->key, type);
    if ((s = need(c, es))) return s;
    decode_scalar(kv->type, c->base + c->pos, kv);
    c->pos += es;
    return CQ_OK;
}

static cq_status read_tensor_info(cursor *c, size_t index, cq_gguf_tensor *t) {
    cq_gguf_str name;
    c->what = "a tensor name";
    cq_status s = rd_str(c, &name);
    if (s) return cq_err_prefix(c->err, "tensor %zu: ", index);
    if (!(t->name = dup_str(name))) return cq_err_set(c->err, CQ_ERR_NOMEM, "out of memory reading GGUF tensors");
    c->what = t->name;
    if ((s = rd_u32(c, &t->n_dims))) return s;
    if (t->n_dims == 0 || t->n_dims > CQ_GGUF_MAX_DIMS)
        return cq_err_set(c->err, CQ_ERR_FORMAT, "GGUF: tensor %s has %u dimensions (1..%d supported)", t->name,
                          t->n_dims, CQ_GGUF_MAX_DIMS);
    uint64_t n = 1;
    for (uint32_t d = 0; d < CQ_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if ((s = rd_u64(c, &ne))) return s;
        if (ne == 0 || ne > (uint64_t)1 << 40 || n > UINT64_MAX / ne)
            return cq_err_set(c->err, CQ_ERR_FORMAT, "GGUF: tensor %s has a bad dimension %llu", t->name,
                              (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        n *= ne;
    }
    t->n_elements = n;
    if ((s = rd_u32(c, &t->type)) || (s = rd_u64(c, &t->offset))) return s;
    size_t be, bb;
    if (!cq_qtype_block(t->type, &be, &bb))
        return cq_err_set(c->err, CQ_ERR_UNSUPPORTED, "GGUF: tensor %s has unsupported type %u", t->name, t->type);
    if (t->ne[0] % (int64_t)be)
        return cq_err_set(c->err, CQ_ERR_FORMAT, "GGUF: tensor %s: row of %lld elements is not a multiple of the %s "
                          "block (%zu)", t->name, (long long)t->ne[0], cq_qtype_name(t->type), be);
    if (n / be > UINT64_MAX / bb)
        return cq_err_set(c->err, CQ_ERR_FORMAT, "GGUF: tensor %s is too large", t->name);
    t->size_bytes = n / be * bb;
    return CQ_OK;
}

static int cmp_offset(const void *a, const void *b) {
    const cq_gguf_tensor *x = *(const cq_gguf_tensor *const *)a, *y = *(const cq_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const cq_gguf_tensor *const *)a)->name, (*(const cq_gguf_tensor *const *)b)->name);
}

static cq_status parse(cq_gguf *g, cq_err *err) {
    cursor c = {g->base, g->size, 0, err, "the header"};
    uint8_t magic[4];
    cq_status s = rd_bytes(&c, magic, 4);
    if (s) return cq_err_set(err, CQ_ERR_FORMAT, "not a GGUF file: only %zu bytes", g->size);
    if (memcmp(magic, "GGUF", 4)) return cq_err_set(err, CQ_ERR_FORMAT, "not a GGUF file (bad magic)");
    uint64_t n_tensors, n_kv;
    if ((s = rd_u32(&c, &g->version))) return s;
    if (g->version < 2 || g->version > 3)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "GGUF version %u not supported (2 and 3 are)", g->version);
    if ((s = rd_u64(&c, &n_tensors)) || (s = rd_u64(&c, &n_kv))) return s;
    /* Each kv takes at least 8+1+4+1 bytes and each tensor info at least 8+1+4+8+4+8: bound before allocating. */
    if (n_kv > g->size / 14 || n_tensors > g->size / 33)
        return cq_err_set(err, CQ_ERR_FORMAT, "GGUF truncated or corrupt: %llu tensors and %llu metadata entries cannot fit in "
                          "%zu bytes", (unsigned long long)n_tensors, (unsigned long long)n_kv, g->size);
    g->kvs = calloc(n_kv ? n_kv : 1, sizeof *g->kvs);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kvs || !g->tensors) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading GGUF");
    for (size_t i = 0; i < n_kv; i++) {
        g->n_kv = i + 1;
        if ((s = read_kv(&c, i, &g->kvs[i]))) return s;
    }
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const cq_gguf_kv *al = cq_gguf_find_kv(g, "general.alignment");
    if (al) {
        if (al->type != CQ_GGUF_UINT32 || al->v.u == 0 || (al->v.u & (al->v.u - 1)))
            return cq_err_set(err, CQ_ERR_FORMAT, "GGUF: general.alignment must be a power-of-two u32");
        g->alignment = (size_t)al->v.u;
    }
    for (size_t i = 0; i < n_tensors; i++) {
        g->n_tensors = i + 1;
        if ((s = read_tensor_info(&c, i, &g->tensors[i]))) return s;
    }
    size_t data_start = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (n_tensors && data_start > g->size)
        return cq_err_set(err, CQ_ERR_FORMAT, "GGUF truncated: tensor data would start at %zu, file has %zu bytes",
                          data_start, g->size);
    size_t data_size = n_tensors ? g->size - data_start : 0;
    cq_gguf_tensor **by_offset = malloc((n_tensors ? n_tensors : 1) * sizeof *by_offset);
    if (!by_offset) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading GGUF");
    for (size_t i = 0; i < n_tensors; i++) {
        cq_gguf_tensor *t = &g->tensors[i];
        by_offset[i] = t;
        if (t->offset % g->alignment) {
            free(by_offset);
            return cq_err_set(err, CQ_ERR_FORMAT, "GGUF: tensor %s offset %llu is not aligned to %zu", t->name,
                              (unsigned long long)t->offset, g->alignment);
        }
        if (t->offset > data_size || t->size_bytes > data_size - t->offset) {
            free(by_offset);
            return cq_err_set(err, CQ_ERR_FORMAT, "GGUF truncated: tensor %s needs bytes %llu..%llu of the data, "
                              "which has %zu (file cut short?)", t->name, (unsigned long long)t->offset,
                              (unsigned long long)(t->offset + t->size_bytes), data_size);
        }
        t->data = g->base + data_start + t->offset;
    }
    qsort(by_offset, n_tensors, sizeof *by_offset, cmp_offset);
    for (size_t i = 1; i < n_tensors; i++) {
        if (by_offset[i - 1]->offset + by_offset[i - 1]->size_bytes > by_offset[i]->offset) {
            s = cq_err_set(err, CQ_ERR_FORMAT, "GGUF corrupt: tensors %s and %s overlap", by_offset[i - 1]->name,
                           by_offset[i]->name);
            free(by_offset);
            return s;
        }
    }
    /* Duplicate names would make lookups ambiguous: sort by name and compare neighbours. */
    qsort(by_offset, n_tensors, sizeof *by_offset, cmp_name);
    for (size_t i = 1; i < n_tensors; i++) {
        if (!strcmp(by_offset[i - 1]->name, by_offset[i]->name)) {
            s = cq_err_set(err, CQ_ERR_FORMAT, "GGUF: tensor %s appears twice", by_offset[i]->name);
            free(by_offset);
            return s;
        }
    }
    free(by_offset);
    return CQ_OK;
}

static cq_status open_common(cq_gguf *g, cq_gguf **out, cq_err *err) {
    cq_status s = parse(g, err);
    if (s) {
        cq_gguf_close(g);
        return s;
    }
    *out = g;
    return CQ_OK;
}

cq_status cq_gguf_open_memory(const void *data, size_t size, cq_gguf **out, cq_err *err) {
    *out = NULL;
    cq_gguf *g = calloc(1, sizeof *g);
    if (!g) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    g->base = data;
    g->size = size;
    return open_common(g, out, err);
}

cq_status cq_gguf_open(const char *path, cq_gguf **out, cq_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cq_err_set(err, errno == ENOENT ? CQ_ERR_NOT_FOUND : CQ_ERR_IO, "cannot open %s: %s", path,
                                  strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cq_err_set(err, CQ_ERR_IO, "%s is not a regular file", path);
    }
    if (st.st_size < 24) {
        close(fd);
        return cq_err_set(err, CQ_ERR_FORMAT, "%s: not a GGUF file (%lld bytes)", path, (long long)st.st_size);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return cq_err_set(err, CQ_ERR_IO, "cannot map %s: %s", path, strerror(errno));
    cq_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(p, (size_t)st.st_size);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    g->base = p;
    g->size = (size_t)st.st_size;
    g->mapped = true;
    cq_status s = open_common(g, out, err);
    if (s) cq_err_prefix(err, "%s: ", path);
    return s;
}

void cq_gguf_close(cq_gguf *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) {
        free((char *)g->kvs[i].key);
        free(g->kvs[i].strs);
    }
    for (size_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kvs);
    free(g->tensors);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g);
}

uint32_t cq_gguf_version(const cq_gguf *g) { return g->version; }
size_t cq_gguf_alignment(const cq_gguf *g) { return g->alignment; }
const void *cq_gguf_file_map(const cq_gguf *g, size_t *size) {
    *size = g->mapped ? g->size : 0;
    return g->mapped ? g->base : NULL;
}
size_t cq_gguf_kv_count(const cq_gguf *g) { return g->n_kv; }
const cq_gguf_kv *cq_gguf_kv_at(const cq_gguf *g, size_t i) { return i < g->n_kv ? &g->kvs[i] : NULL; }
size_t cq_gguf_tensor_count(const cq_gguf *g) { return g->n_tensors; }
const cq_gguf_tensor *cq_gguf_tensor_at(const cq_gguf *g, size_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const cq_gguf_kv *cq_gguf_find_kv(const cq_gguf *g, const char *key) {
    for (size_t i = 0; i < g->n_kv; i++)
        if (g->kvs[i].key && !strcmp(g->kvs[i].key, key)) return &g->kvs[i];
    return NULL;
}

const cq_gguf_tensor *cq_gguf_find_tensor(const cq_gguf *g, const char *name) {
    for (size_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].name && !strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* ---- typed getters ------------------------------------------------------------------------------------------ */

static bool is_unsigned(cq_gguf_type t) {
    return t == CQ_GGUF_UINT8 || t == CQ_GGUF_UINT16 || t == CQ_GGUF_UINT32 || t == CQ_GGUF_UINT64 ||
           t == CQ_GGUF_BOOL;
}
static bool is_signed(cq_gguf_type t) {
    return t == CQ_GGUF_INT8 || t == CQ_GGUF_INT16 || t == CQ_GGUF_INT32 || t == CQ_GGUF_INT64;
}
static bool is_float(cq_gguf_type t) { return t == CQ_GGUF_FLOAT32 || t == CQ_GGUF_FLOAT64; }

static const cq_gguf_kv *find_or_err(const cq_gguf *g, const char *key, cq_err *err) {
    const cq_gguf_kv *kv = cq_gguf_find_kv(g, key);
    if (!kv) cq_err_set(err, CQ_ERR_NOT_FOUND, "GGUF metadata %s is missing", key);
    return kv;
}

cq_status cq_gguf_get_u32(const cq_gguf *g, const char *key, uint32_t *out, cq_err *err) {
    const cq_gguf_kv *kv = find_or_err(g, key, err);
    if (!kv) return CQ_ERR_NOT_FOUND;
    if (is_unsigned(kv->type) && kv->v.u <= UINT32_MAX) {
        *out = (uint32_t)kv->v.u;
        return CQ_OK;
    }
    if (is_signed(kv->type) && kv->v.i >= 0 && kv->v.i <= (int64_t)UINT32_MAX) {
        *out = (uint32_t)kv->v.i;
        return CQ_OK;
    }
    return cq_err_set(err, CQ_ERR_FORMAT, "GGUF metadata %s is not a u32 (type %d)", key, (int)kv->type);
}

cq_status cq_gguf_get_f32(const cq_gguf *g, const char *key, float *out, cq_err *err) {
    const cq_gguf_kv *kv = find_or_err(g, key, err);
    if (!kv) return CQ_ERR_NOT_FOUND;
    if (is_float(kv->type) && isfinite(kv->v.f)) *out = (float)kv->v.f;
    else if (is_unsigned(kv->type)) *out = (float)kv->v.u;
    else if (is_signed(kv->type)) *out = (float)kv->v.i;
    else return cq_err_set(err, CQ_ERR_FORMAT, "GGUF metadata %s is not a finite number", key);
    return CQ_OK;
}

cq_status cq_gguf_get_bool(const cq_gguf *g, const char *key, bool *out, cq_err *err) {
    const cq_gguf_kv *kv = find_or_err(g, key, err);
    if (!kv) return CQ_ERR_NOT_FOUND;
    if (!is_unsigned(kv->type) && !is_signed(kv->type))
        return cq_err_set(err, CQ_ERR_FORMAT, "GGUF metadata %s is not a bool", key);
    *out = kv->v.u != 0;
    return CQ_OK;
}

cq_status cq_gguf_get_str(const cq_gguf *g, const char *key, char *out, size_t cap, cq_err *err) {
    const cq_gguf_kv *kv = find_or_err(g, key, err);
    if (!kv) return CQ_ERR_NOT_FOUND;
    if (kv->type != CQ_GGUF_STRING) return cq_err_set(err, CQ_ERR_FORMAT, "GGUF metadata %s is not a string", key);
    if (cap == 0) return CQ_OK;
    size_t n = kv->v.s.len < cap - 1 ? (size_t)kv->v.s.len : cap - 1;
    memcpy(out, kv->v.s.ptr, n);
    out[n] = 0;
    return CQ_OK;
}

/* Reads element i of a numeric array as double (integers exactly up to 2^53). */
static double arr_elem(const cq_gguf_kv *kv, size_t i) {
    size_t es = scalar_size(kv->arr_type);
    cq_gguf_kv tmp = {0};
    decode_scalar(kv->arr_type, kv->arr_data + i * es, &tmp);
    if (is_float(kv->arr_type)) return tmp.v.f;
    if (is_signed(kv->arr_type)) return (double)tmp.v.i;
    return (double)tmp.v.u;
}

static cq_status numeric_array(const cq_gguf *g, const char *key, size_t n, const cq_gguf_kv **out, cq_err *err) {
    const cq_gguf_kv *kv = find_or_err(g, key, err);
    if (!kv) return CQ_ERR_NOT_FOUND;
    if (kv->type != CQ_GGUF_ARRAY || kv->arr_type == CQ_GGUF_STRING || kv->arr_count != n)
        return cq_err_set(err, CQ_ERR_FORMAT, "GGUF metadata %s is not a numeric array of %zu elements", key, n);
    *out = kv;
    return CQ_OK;
}

cq_status cq_gguf_get_arr_i32(const cq_gguf *g, const char *key, int32_t *out, size_t n, cq_err *err) {
    const cq_gguf_kv *kv;
    cq_status s = numeric_array(g, key, n, &kv, err);
    if (s) return s;
    for (size_t i = 0; i < n; i++) {
        double v = arr_elem(kv, i);
        if (!(v >= INT32_MIN && v <= INT32_MAX))
            return cq_err_set(err, CQ_ERR_FORMAT, "GGUF metadata %s[%zu] does not fit an i32", key, i);
        out[i] = (int32_t)v;
    }
    return CQ_OK;
}

cq_status cq_gguf_get_arr_f32(const cq_gguf *g, const char *key, float *out, size_t n, cq_err *err) {
    const cq_gguf_kv *kv;
    cq_status s = numeric_array(g, key, n, &kv, err);
    if (s) return s;
    for (size_t i = 0; i < n; i++) out[i] = (float)arr_elem(kv, i);
    return CQ_OK;
}
