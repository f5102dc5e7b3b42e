/* GGUF reader: a synthetic file parses with the right metadata and tensors; every truncation, a set of targeted
 * corruptions and random byte flips give a clear error, never a crash (ASan checks the reads); the real model
 * file opens, and the same file cut short is refused. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "decoder/gguf.h"
#include "decoder/quant.h"

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

/* Offsets of interesting fields in the synthetic file, for targeted corruption. */
typedef struct {
    size_t version, n_tensors, key0_len, t0_ndims, t0_type, t1_offset, t1_dim0;
} layout;

/* A small GGUF: 5 metadata entries and two tensors (F32 4x2, Q8_0 32x1), alignment 32. */
static buf make_file(layout *lay, size_t alignment) {
    buf b = {0};
    put(&b, "GGUF", 4);
    lay->version = b.n;
    put_u32(&b, 3);
    lay->n_tensors = b.n;
    put_u64(&b, 2);
    put_u64(&b, 5);
    lay->key0_len = b.n;
    put_str(&b, "general.architecture");
    put_u32(&b, 8);
    put_str(&b, "gemma3");
    put_str(&b, "test.block_count");
    put_u32(&b, 4);
    put_u32(&b, 18);
    put_str(&b, "test.eps");
    put_u32(&b, 6);
    float eps = 1e-6f;
    put(&b, &eps, 4);
    put_str(&b, "test.list");
    put_u32(&b, 9);
    put_u32(&b, 5);
    put_u64(&b, 3);
    int32_t l[3] = {7, -1, 5};
    put(&b, l, 12);
    put_str(&b, "general.alignment");
    put_u32(&b, 4);
    put_u32(&b, (uint32_t)alignment);
    /* tensor 0: F32, ne = {4, 2} */
    put_str(&b, "a.weight");
    lay->t0_ndims = b.n;
    put_u32(&b, 2);
    put_u64(&b, 4);
    put_u64(&b, 2);
    lay->t0_type = b.n;
    put_u32(&b, CQ_QTYPE_F32);
    put_u64(&b, 0);
    /* tensor 1: Q8_0, ne = {32} at the next aligned offset */
    put_str(&b, "b.weight");
    put_u32(&b, 1);
    lay->t1_dim0 = b.n;
    put_u64(&b, 32);
    put_u32(&b, CQ_QTYPE_Q8_0);
    lay->t1_offset = b.n;
    size_t off1 = (32 + alignment - 1) / alignment * alignment;
    put_u64(&b, off1);
    while (b.n % alignment) put(&b, "", 1);
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    put(&b, a, sizeof a);
    while (b.n % alignment) put(&b, "", 1);
    uint8_t q[34] = {0x00, 0x3c}; /* d = 1.0 */
    for (int i = 0; i < 32; i++) q[2 + i] = (uint8_t)(i - 16);
    put(&b, q, sizeof q);
    return b;
}

/* Parses an exact-size heap copy so that ASan flags any read past the end. */
static cq_status parse_copy(const uint8_t *p, size_t n, cq_err *err) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    cq_gguf *g = NULL;
    cq_status s = cq_gguf_open_memory(copy, n, &g, err);
    if (!s) {
        /* Touch everything a reader could: all tensors' data and all metadata. */
        for (size_t i = 0; i < cq_gguf_tensor_count(g); i++) {
            const cq_gguf_tensor *t = cq_gguf_tensor_at(g, i);
            volatile uint8_t sink = 0;
            for (uint64_t k = 0; k < t->size_bytes; k++) sink ^= ((const uint8_t *)t->data)[k];
            (void)sink;
        }
        cq_gguf_close(g);
    }
    free(copy);
    return s;
}

static void test_valid_file(void **state) {
    (void)state;
    layout lay;
    buf b = make_file(&lay, 32);
    cq_gguf *g;
    cq_err err = {0};
    assert_int_equal(cq_gguf_open_memory(b.p, b.n, &g, &err), CQ_OK);
    assert_int_equal(cq_gguf_version(g), 3);
    assert_int_equal(cq_gguf_alignment(g), 32);
    assert_int_equal(cq_gguf_kv_count(g), 5);
    char s[16];
    assert_int_equal(cq_gguf_get_str(g, "general.architecture", s, sizeof s, &err), CQ_OK);
    assert_string_equal(s, "gemma3");
    uint32_t u;
    assert_int_equal(cq_gguf_get_u32(g, "test.block_count", &u, &err), CQ_OK);
    assert_int_equal(u, 18);
    float f;
    assert_int_equal(cq_gguf_get_f32(g, "test.eps", &f, &err), CQ_OK);
    assert_true(f == 1e-6f);
    assert_int_equal(cq_gguf_get_f32(g, "test.block_count", &f, &err), CQ_OK); /* integers widen to float */
    assert_true(f == 18.0f);
    int32_t l[3];
    assert_int_equal(cq_gguf_get_arr_i32(g, "test.list", l, 3, &err), CQ_OK);
    assert_int_equal(l[1], -1);
    assert_int_equal(cq_gguf_get_arr_i32(g, "test.list", l, 2, &err), CQ_ERR_FORMAT); /* wrong length */
    assert_int_equal(cq_gguf_get_u32(g, "missing.key", &u, &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "missing.key"));
    assert_int_equal(cq_gguf_get_u32(g, "general.architecture", &u, &err), CQ_ERR_FORMAT);
    assert_int_equal(cq_gguf_tensor_count(g), 2);
    const cq_gguf_tensor *a = cq_gguf_find_tensor(g, "a.weight"), *q = cq_gguf_find_tensor(g, "b.weight");
    assert_non_null(a);
    assert_non_null(q);
    assert_int_equal(a->ne[0], 4);
    assert_int_equal(a->ne[1], 2);
    assert_int_equal(a->n_elements, 8);
    assert_true(((const float *)a->data)[7] == 8.0f);
    float row[32];
    cq_dequant_row(q->type, q->data, row, 32);
    assert_true(row[0] == -16.0f && row[31] == 15.0f);
    assert_null(cq_gguf_find_tensor(g, "c.weight"));
    cq_gguf_close(g);
    free(b.p);
}

static void test_every_truncation_fails_cleanly(void **state) {
    (void)state;
    layout lay;
    buf b = make_file(&lay, 32);
    for (size_t n = 0; n < b.n; n++) {
        cq_err err = {0};
        cq_status s = parse_copy(b.p, n, &err);
        if (s == CQ_OK) {
            fprintf(stderr, "a file cut to %zu of %zu bytes was accepted\n", n, b.n);
            fail();
        }
        assert_true(strlen(err.msg) > 0);
    }
    free(b.p);
}

static void expect_error(buf *b, size_t at, const void *bytes, size_t n, const char *needle) {
    uint8_t *copy = malloc(b->n);
    memcpy(copy, b->p, b->n);
    memcpy(copy + at, bytes, n);
    cq_err err = {0};
    cq_status s = parse_copy(copy, b->n, &err);
    if (s == CQ_OK || !strstr(err.msg, needle)) {
        fprintf(stderr, "expected an error with '%s', got status %d: %s\n", needle, s, err.msg);
        fail();
    }
    free(copy);
}

static void test_targeted_corruptions(void **state) {
    (void)state;
    layout lay;
    buf b = make_file(&lay, 32);
    uint32_t v32;
    uint64_t v64;
    expect_error(&b, 0, "GGUG", 4, "bad magic");
    v32 = 99;
    expect_error(&b, lay.version, &v32, 4, "version 99");
    v64 = 1ull << 60;
    expect_error(&b, lay.n_tensors, &v64, 8, "cannot fit");
    v64 = 1ull << 40;
    expect_error(&b, lay.key0_len, &v64, 8, "length");
    v32 = 5;
    expect_error(&b, lay.t0_ndims, &v32, 4, "dimensions");
    v32 = 77;
    expect_error(&b, lay.t0_type, &v32, 4, "unsupported type 77");
    v64 = 40; /* not a multiple of the alignment */
    expect_error(&b, lay.t1_offset, &v64, 8, "not aligned");
    v64 = 0; /* same place as tensor 0 */
    expect_error(&b, lay.t1_offset, &v64, 8, "overlap");
    v64 = 1u << 20; /* past the end of the data */
    expect_error(&b, lay.t1_offset, &v64, 8, "truncated");
    v64 = 48; /* not a whole number of Q8_0 blocks */
    expect_error(&b, lay.t1_dim0, &v64, 8, "multiple of the Q8_0 block");
    v64 = 0;
    expect_error(&b, lay.t1_dim0, &v64, 8, "bad dimension");
    free(b.p);
    /* alignment must be a power of two */
    buf c = make_file(&lay, 24);
    cq_err err = {0};
    assert_int_equal(parse_copy(c.p, c.n, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "alignment"));
    free(c.p);
}

static void test_random_flips_never_crash(void **state) {
    (void)state;
    layout lay;
    buf b = make_file(&lay, 32);
    uint64_t x = 88172645463325252ull;
    uint8_t *copy = malloc(b.n);
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(copy, b.p, b.n);
        for (int k = 0; k < 1 + iter % 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            copy[(x >> 16) % b.n] ^= (uint8_t)(1u << ((x >> 8) & 7));
        }
        cq_err err = {0};
        (void)parse_copy(copy, b.n, &err); /* either outcome is fine; no crash, no leak, no bad read */
    }
    free(copy);
    free(b.p);
}

static void test_real_model_and_cut_copy(void **state) {
    (void)state;
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/data/models/gemma-3-270m-q4_k_m.gguf", root ? root : ".");
    cq_gguf *g;
    cq_err err = {0};
    cq_status s = cq_gguf_open(path, &g, &err);
    if (s) fprintf(stderr, "the model must be present (make setup fetches it): %s\n", err.msg);
    assert_int_equal(s, CQ_OK);
    assert_int_equal(cq_gguf_tensor_count(g), 236);
    const cq_gguf_tensor *emb = cq_gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(emb);
    assert_int_equal(emb->ne[0], 640);
    assert_int_equal(emb->ne[1], 262144);
    assert_int_equal(emb->type, CQ_QTYPE_Q8_0);
    cq_gguf_close(g);

    /* The same bytes cut short, as an interrupted download would leave them. */
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    fstat(fd, &st);
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    assert_true(p != MAP_FAILED);
    const size_t cuts[] = {(size_t)st.st_size - 1, (size_t)st.st_size / 2, 1000000, 4096, 100};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        err = (cq_err){0};
        assert_int_equal(cq_gguf_open_memory(p, cuts[i], &g, &err), CQ_ERR_FORMAT);
        assert_non_null(strstr(err.msg, "truncated"));
    }
    munmap(p, (size_t)st.st_size);

    assert_int_equal(cq_gguf_open("/nonexistent/model.gguf", &g, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_gguf_open("/dev/null", &g, &err), CQ_ERR_IO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file),
        cmocka_unit_test(test_every_truncation_fails_cleanly),
        cmocka_unit_test(test_targeted_corruptions),
        cmocka_unit_test(test_random_flips_never_crash),
        cmocka_unit_test(test_real_model_and_cut_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
