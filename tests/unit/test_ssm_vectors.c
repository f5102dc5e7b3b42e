/* index/vectors: clause vectors in SQLite and FAISS — add, search, replace, remove, document delete, repair of a
 * missing or stale FAISS file from SQLite, document states; and the encoder feeding it end to end. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "store/store.h"
#include "search/vectors.h"
#include "ssm/ssm.h"
#include "test_ssm_util.h"

#define DIM 16

typedef struct {
    char dir[128];
    cq_store *s;
    int64_t kb, doc_a, doc_b;
    int64_t clauses[20]; /* 0..9 in doc_a, 10..19 in doc_b */
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/cq_test_vectors_%d", (int)getpid());
    char path[256];
    mkdir(f->dir, 0755);
    snprintf(path, sizeof path, "%s/clauseqa.db", f->dir);
    cq_err err = {0};
    if (cq_store_open(path, &f->s, &err) || cq_store_kb_create(f->s, "kb", &f->kb, &err) ||
        cq_store_doc_create(f->s, f->kb, "a", "a.txt", "txt", "aa", 1, &f->doc_a, &err) ||
        cq_store_doc_create(f->s, f->kb, "b", "b.txt", "txt", "bb", 1, &f->doc_b, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    for (int i = 0; i < 20; i++) {
        char text[32];
        snprintf(text, sizeof text, "第%d条", i + 1);
        cq_store_clause c = {.ord = i, .text = text, .path = "", .start_off = 0, .end_off = 1};
        if (cq_store_clause_add(f->s, f->kb, i < 10 ? f->doc_a : f->doc_b, "doc", &c, &f->clauses[i], &err)) {
            fprintf(stderr, "setup: %s\n", err.msg);
            return -1;
        }
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    cq_store_close(f->s);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd)) return -1;
    free(f);
    return 0;
}

/* vector i: a unit vector along axis i % DIM, tilted by i / DIM */
static void vec(int i, float *v) {
    memset(v, 0, DIM * sizeof *v);
    v[i % DIM] = 1.0f;
    v[(i + 1) % DIM] = 0.1f * (float)(i / DIM);
    float n = sqrtf(1.0f + v[(i + 1) % DIM] * v[(i + 1) % DIM]);
    v[i % DIM] /= n;
    v[(i + 1) % DIM] /= n;
}

static void add_all(fixture *f, cq_vectors *v) {
    float x[20 * DIM];
    for (int i = 0; i < 20; i++) vec(i, x + i * DIM);
    cq_err err = {0};
    if (cq_vectors_add(v, f->s, f->clauses, x, 20, &err)) fail_msg("%s", err.msg);
}

static int64_t top1(cq_vectors *v, int i) {
    float q[DIM], scores[3];
    int64_t ids[3];
    size_t n = 0;
    cq_err err = {0};
    vec(i, q);
    if (cq_vectors_search(v, q, 3, ids, scores, &n, &err)) fail_msg("%s", err.msg);
    assert_true(n >= 1);
    assert_true(n < 2 || scores[0] >= scores[1]);
    return ids[0];
}

static size_t sql_count(fixture *f, const char *sql) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(cq_store_db(f->s), sql, -1, &st, NULL), SQLITE_OK);
    size_t n = sqlite3_step(st) == SQLITE_ROW ? (size_t)sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return n;
}

static void test_add_search_remove(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_vectors *v = NULL;
    if (cq_vectors_open(f->s, f->dir, f->kb, "model-1", DIM, &v, &err)) fail_msg("%s", err.msg);
    assert_int_equal(cq_vectors_count(v), 0);
    add_all(f, v);
    assert_int_equal(cq_vectors_count(v), 20);
    assert_false(cq_vectors_is_ivf(v));
    for (int i = 0; i < 20; i++) assert_int_equal(top1(v, i), f->clauses[i]);
    /* replacing a clause's vector keeps one entry */
    float x[DIM];
    vec(3, x);
    assert_int_equal(cq_vectors_add(v, f->s, &f->clauses[5], x, 1, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), 20);
    /* removing a document's clauses (before deleting it) */
    int64_t *ids;
    size_t n;
    assert_int_equal(cq_vectors_doc_clause_ids(f->s, f->doc_b, &ids, &n, &err), CQ_OK);
    assert_int_equal(n, 10);
    assert_int_equal(cq_vectors_remove(v, f->s, ids, n, &err), CQ_OK);
    free(ids);
    assert_int_equal(cq_vectors_count(v), 10);
    assert_int_equal(sql_count(f, "SELECT count(*) FROM clause_vectors"), 10);
    for (int i = 10; i < 20; i++) assert_true(top1(v, i) < f->clauses[10]);
    cq_vectors_close(v); /* saves */

    /* reopened from the file */
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "model-1", DIM, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), 10);
    assert_int_equal(top1(v, 0), f->clauses[0]);
    cq_vectors_close(v);

    /* a document deleted without telling the index: SQLite cascades, open repairs */
    assert_int_equal(cq_store_doc_delete(f->s, f->doc_a, &err), CQ_OK);
    assert_int_equal(sql_count(f, "SELECT count(*) FROM clause_vectors"), 0);
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "model-1", DIM, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), 0);
    float q[DIM], sc[3];
    int64_t got[3];
    vec(0, q);
    assert_int_equal(cq_vectors_search(v, q, 3, got, sc, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    cq_vectors_close(v);
}

static void test_repair_and_models(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_vectors *v = NULL;
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "model-1", DIM, &v, &err), CQ_OK);
    add_all(f, v);
    cq_vectors_close(v);
    /* the FAISS file lost: rebuilt from SQLite */
    char path[256];
    snprintf(path, sizeof path, "%s/vectors/kb%lld.faiss", f->dir, (long long)f->kb);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "model-1", DIM, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), 20);
    assert_int_equal(top1(v, 7), f->clauses[7]);
    cq_vectors_close(v);
    /* a corrupt file: rebuilt */
    FILE *fp = fopen(path, "w");
    fputs("garbage", fp);
    fclose(fp);
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "model-1", DIM, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), 20);
    /* a row added behind the index's back (a crash before the save): the count differs, open rebuilds */
    cq_vectors_close(v);
    assert_int_equal(sqlite3_exec(cq_store_db(f->s), "DELETE FROM clause_vectors WHERE rowid IN "
                                                      "(SELECT rowid FROM clause_vectors LIMIT 3)", NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "model-1", DIM, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), 17);
    cq_vectors_close(v);
    /* vectors of other weights are not served */
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "model-2", DIM, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), 0);
    cq_vectors_close(v);
}

static void test_doc_vectors(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    float va[DIM], vb[DIM], va2[DIM];
    for (int i = 0; i < DIM; i++) {
        va[i] = (float)i;
        vb[i] = -(float)i;
        va2[i] = 0.5f * (float)i;
    }
    assert_int_equal(cq_store_doc_vector_put(f->s, f->kb, f->doc_b, "m", "h", DIM, vb, &err), CQ_OK);
    assert_int_equal(cq_store_doc_vector_put(f->s, f->kb, f->doc_a, "m", "h", DIM, va, &err), CQ_OK);
    int64_t *ids;
    float *x;
    size_t n;
    assert_int_equal(cq_store_doc_vectors_kb(f->s, f->kb, "m", "h", DIM, &ids, &x, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_true(ids[0] == f->doc_a && ids[1] == f->doc_b); /* ids ascending */
    assert_memory_equal(x, va, sizeof va);
    assert_memory_equal(x + DIM, vb, sizeof vb);
    free(ids);
    free(x);
    /* another model or head reads none; another dimension is refused */
    assert_int_equal(cq_store_doc_vectors_kb(f->s, f->kb, "m", "h2", DIM, &ids, &x, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cq_store_doc_vectors_kb(f->s, f->kb, "m2", "h", DIM, &ids, &x, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cq_store_doc_vectors_kb(f->s, f->kb, "m", "h", DIM + 1, &ids, &x, &n, &err), CQ_ERR_FORMAT);
    assert_null(ids);
    /* a document encoded again (another head): its one row is replaced */
    assert_int_equal(cq_store_doc_vector_put(f->s, f->kb, f->doc_a, "m", "h2", DIM, va2, &err), CQ_OK);
    assert_int_equal(cq_store_doc_vectors_kb(f->s, f->kb, "m", "h2", DIM, &ids, &x, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_memory_equal(x, va2, sizeof va2);
    free(ids);
    free(x);
    assert_int_equal(sql_count(f, "SELECT count(*) FROM doc_vectors"), 2);
    /* a document that is not there has none; a deleted document's goes with it */
    assert_int_equal(cq_store_doc_vector_put(f->s, f->kb, f->doc_b + 1000, "m", "h", DIM, va, &err), CQ_ERR_DB);
    assert_int_equal(sql_count(f, "SELECT count(*) FROM doc_vectors"), 2);
    assert_int_equal(cq_store_doc_delete(f->s, f->doc_a, &err), CQ_OK);
    assert_int_equal(sql_count(f, "SELECT count(*) FROM doc_vectors"), 1);
    /* the full encoder states are gone from the schema (nothing read them; docs/SSM.md) */
    assert_int_equal(sql_count(f, "SELECT count(*) FROM sqlite_master WHERE name = 'doc_states'"), 0);
}

/* Document vectors written inside a transaction leave FTS5's pending terms alone: two documents' clauses with a
 * document vector after each (one of them written twice: the update) make the same FTS index as without them. A
 * statement that opens a statement journal (INSERT OR REPLACE, a savepoint) makes FTS5 write its pending terms out
 * as a segment, so in a batch's transaction each document would become a segment of its own (docs/PERF.md); the
 * upsert does not, on SQLite 3.40. */
static void test_doc_vectors_keep_fts_segments(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    float dv[DIM] = {1, 2, 3};
    int64_t kbs[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(cq_store_kb_create(f->s, k ? "without" : "with", &kbs[k], &err), CQ_OK);
        assert_int_equal(cq_store_begin(f->s, &err), CQ_OK);
        for (int d = 0; d < 2; d++) {
            char name[16], text[64];
            int64_t doc, id;
            snprintf(name, sizeof name, "d%d", d);
            assert_int_equal(cq_store_doc_create(f->s, kbs[k], name, "d.txt", "txt", name, 1, &doc, &err), CQ_OK);
            for (int i = 0; i < 5; i++) {
                snprintf(text, sizeof text, "第%d条 文件%d规定的事项%d", i + 1, d, i * 7);
                cq_store_clause c = {.ord = i, .text = text, .path = "", .start_off = 0, .end_off = 1};
                assert_int_equal(cq_store_clause_add(f->s, kbs[k], doc, "doc", &c, &id, &err), CQ_OK);
            }
            for (int put = 0; !k && put <= !d; put++)
                assert_int_equal(cq_store_doc_vector_put(f->s, kbs[k], doc, "m", put ? "h11" : "h10", DIM, dv, &err),
                                 CQ_OK);
        }
        assert_int_equal(cq_store_commit(f->s, &err), CQ_OK);
    }
    char sql[2][96];
    for (int k = 0; k < 2; k++)
        snprintf(sql[k], sizeof sql[k], "SELECT count(*) FROM fts_kb%lld_data", (long long)kbs[k]);
    assert_true(sql_count(f, sql[1]) >= 3); /* the averages, the structure, a segment's leaf */
    assert_int_equal(sql_count(f, sql[0]), sql_count(f, sql[1]));
    assert_int_equal(sql_count(f, "SELECT count(*) FROM doc_vectors WHERE head = 'h11'"), 1);
}

/* past CQ_VECTORS_IVF_MIN the index becomes an inverted file: trained, searchable, removable, reloadable */
static void test_ivf(void **state) {
    fixture *f = *state;
    const size_t n = CQ_VECTORS_IVF_MIN + 500;
    sqlite3 *db = cq_store_db(f->s);
    assert_int_equal(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO clauses(doc_id, ord, kind, text, start_off, end_off) "
                                            "VALUES(?, ?, 0, 'x', 0, 1)", -1, &st, NULL), SQLITE_OK);
    int64_t *ids = malloc(n * sizeof *ids);
    float *x = malloc(n * DIM * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 1, f->doc_b);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)(100 + i));
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
        ids[i] = sqlite3_last_insert_rowid(db);
        double n2 = 0;
        for (int j = 0; j < DIM; j++) {
            x[i * DIM + j] = ssm_test_normal();
            n2 += (double)x[i * DIM + j] * x[i * DIM + j];
        }
        for (int j = 0; j < DIM; j++) x[i * DIM + j] /= (float)sqrt(n2);
    }
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    cq_err err = {0};
    cq_vectors *v;
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "m", DIM, &v, &err), CQ_OK);
    if (cq_vectors_add(v, f->s, ids, x, n, &err)) fail_msg("%s", err.msg);
    assert_true(cq_vectors_is_ivf(v));
    assert_int_equal(cq_vectors_count(v), n);
    int64_t got[2];
    float sc[2];
    size_t k;
    for (size_t i = 0; i < n; i += 997) { /* a stored vector finds itself: its own list is always probed */
        assert_int_equal(cq_vectors_search(v, x + i * DIM, 2, got, sc, &k, &err), CQ_OK);
        assert_int_equal(got[0], ids[i]);
    }
    assert_int_equal(cq_vectors_remove(v, f->s, ids, 10, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), n - 10);
    assert_int_equal(cq_vectors_search(v, x, 2, got, sc, &k, &err), CQ_OK);
    assert_int_not_equal(got[0], ids[0]);
    cq_vectors_close(v);
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, "m", DIM, &v, &err), CQ_OK); /* from the file */
    assert_true(cq_vectors_is_ivf(v));
    assert_int_equal(cq_vectors_count(v), n - 10);
    assert_int_equal(cq_vectors_search(v, x + 5000 * DIM, 2, got, sc, &k, &err), CQ_OK);
    assert_int_equal(got[0], ids[5000]);
    cq_vectors_close(v);
    free(ids);
    free(x);
}

/* ingest's path with the encoder: a document's clauses encoded, stored, found again by a question */
static void test_encoder_to_index(void **state) {
    fixture *f = *state;
    char mdir[160];
    snprintf(mdir, sizeof mdir, "%s/model", f->dir);
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 16, .n_layer = 1, .d_state = 4, .d_conv = 4,
                       .expand = 2, .dt_rank = 2, .d_embed = DIM, .norm_eps = 1e-5f};
    cq_err err = {0};
    cq_ssm_model *m;
    cq_ssm_encoder *e;
    assert_int_equal(ssm_test_write_model(mdir, &c, 5, NULL, NULL), 0);
    if (cq_ssm_model_load(mdir, &m, &err) || cq_ssm_encoder_new(m, CQ_SSM_BACKEND_CPU, 1, &e, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(strlen(cq_ssm_model_id(m)), 64);
    const char *texts[10];
    size_t lens[10];
    char buf[10][64];
    for (int i = 0; i < 10; i++) {
        snprintf(buf[i], sizeof buf[i], "第%d条 clause number %d about topic %c", i + 1, i, 'a' + i);
        texts[i] = buf[i];
        lens[i] = strlen(buf[i]);
    }
    float vecs[10 * DIM];
    cq_ssm_state *st;
    assert_int_equal(cq_ssm_state_new(m, &st, &err), CQ_OK);
    assert_int_equal(cq_ssm_encode_document(e, st, texts, lens, 10, vecs, &err), CQ_OK);
    cq_vectors *v;
    assert_int_equal(cq_vectors_open(f->s, f->dir, f->kb, cq_ssm_model_id(m), DIM, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_add(v, f->s, f->clauses, vecs, 10, &err), CQ_OK);
    /* a stored vector is its own nearest neighbour */
    int64_t ids[1];
    float score;
    size_t n;
    assert_int_equal(cq_vectors_search(v, vecs + 4 * DIM, 1, ids, &score, &n, &err), CQ_OK);
    assert_int_equal(ids[0], f->clauses[4]);
    assert_true(fabsf(score - 1.0f) < 1e-4f);
    cq_vectors_close(v);
    cq_ssm_state_free(st);
    cq_ssm_encoder_free(e);
    cq_ssm_model_free(m);
    ssm_test_rm_model(mdir);
}

/* dense retrieval as retrieve.c calls it: a clear refusal without weights, results with them */
static void test_dense(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_dense *d = NULL;
    char mdir[200];
    snprintf(mdir, sizeof mdir, "%s/models/ssm", f->dir);
    assert_int_equal(cq_dense_open(f->dir, NULL, &d, &err), CQ_ERR_UNSUPPORTED);
    assert_null(d);
    assert_non_null(strstr(err.msg, "dense retrieval needs trained encoder weights"));
    assert_int_equal(cq_dense_open(f->dir, mdir, &d, &err), CQ_ERR_UNSUPPORTED); /* a folder without them */
    assert_null(d);
    snprintf(mdir, sizeof mdir, "%s/models", f->dir);
    mkdir(mdir, 0755);
    snprintf(mdir, sizeof mdir, "%s/models/ssm", f->dir);
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 16, .n_layer = 1, .d_state = 4, .d_conv = 4,
                       .expand = 2, .dt_rank = 2, .d_embed = DIM, .norm_eps = 1e-5f};
    assert_int_equal(ssm_test_write_model(mdir, &c, 9, NULL, NULL), 0);
    if (cq_dense_open(f->dir, mdir, &d, &err)) fail_msg("%s", err.msg);
    const char *texts[3] = {"第一条 总则", "第二条 劳动合同", "Section 7.2 Termination"};
    size_t lens[3] = {strlen(texts[0]), strlen(texts[1]), strlen(texts[2])};
    float vecs[3 * DIM];
    cq_ssm_state *st;
    assert_int_equal(cq_ssm_state_new(cq_dense_model(d), &st, &err), CQ_OK);
    assert_int_equal(cq_dense_encode_document(d, st, texts, lens, 3, vecs, NULL, &err), CQ_OK);
    cq_vectors *v;
    assert_int_equal(cq_dense_kb(d, f->s, f->kb, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_add(v, f->s, f->clauses, vecs, 3, &err), CQ_OK);
    int64_t ids[5];
    float scores[5];
    size_t n;
    assert_int_equal(cq_dense_search(d, f->s, f->kb, "劳动合同", 5, ids, scores, &n, &err), CQ_OK);
    assert_int_equal(n, 3); /* every stored clause, best first */
    for (size_t i = 0; i < n; i++) assert_true(ids[i] >= f->clauses[0] && ids[i] <= f->clauses[2]);
    assert_true(scores[0] >= scores[1] && scores[1] >= scores[2]);
    cq_ssm_state_free(st);
    cq_dense_close(d);
    ssm_test_rm_model(mdir);
}

/* weights on a lent vocabulary (docs/SSM.md "Input layer"): cq_dense_open asks the registered source for it by
 * name, with the source's context, and closes its handle with the retriever (tests/data/ssm/table: "test-table") */
typedef struct {
    int opened, closed;
    const char *table_id;
    char asked[32];
} lender;

static cq_status lent_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n, cq_err *err) {
    (void)ctx;
    *ids = malloc((len + 1) * sizeof **ids);
    if (!*ids) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < len; i++) (*ids)[i] = 5 + (unsigned char)text[i];
    *n = len;
    return CQ_OK;
}

static void lent_row(void *ctx, int32_t id, float *out) {
    (void)ctx;
    for (int j = 0; j < 16; j++) out[j] = 0.05f * sinf(0.37f * (float)id + (float)j);
}

static cq_ssm_vocab lent_vocab = {.name = "test-table", .n_vocab = 300, .n_embd = 16,
                                  .tokenize = lent_tokenize, .row = lent_row};
static lender *last_lender;

static cq_status lend(void *ctx, const char *name, const cq_ssm_vocab **vocab, void **handle, cq_err *err) {
    (void)err;
    lender *l = ctx;
    snprintf(l->asked, sizeof l->asked, "%s", name);
    l->opened++;
    lent_vocab.table_id = l->table_id;
    *vocab = &lent_vocab;
    *handle = l;
    last_lender = l;
    return CQ_OK;
}

static void unlend(void *handle) { ((lender *)handle)->closed++; }

static void test_dense_lent_vocab(void **state) {
    fixture *f = *state;
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char wdir[1024];
    snprintf(wdir, sizeof wdir, "%s/tests/data/ssm/table", src ? src : ".");
    cq_err err = {0};
    cq_dense *d = NULL;
    cq_dense_set_vocab_source(NULL, NULL, NULL); /* a program that lends none */
    assert_int_equal(cq_dense_open(f->dir, wdir, &d, &err), CQ_ERR_UNSUPPORTED);
    assert_null(d);
    assert_non_null(strstr(err.msg, "cannot lend"));

    lender wrong = {.table_id = "another-table"};
    cq_dense_set_vocab_source(lend, unlend, &wrong);
    cq_err_clear(&err);
    assert_int_equal(cq_dense_open(f->dir, wdir, &d, &err), CQ_ERR_FORMAT); /* not the table it was trained on */
    assert_null(d);
    assert_int_equal(wrong.opened, 1);
    assert_int_equal(wrong.closed, 1); /* the handle is given back on failure too */

    lender ok = {.table_id = "test-table-1"};
    cq_dense_set_vocab_source(lend, unlend, &ok);
    cq_err_clear(&err);
    if (cq_dense_open(f->dir, wdir, &d, &err)) fail_msg("%s", err.msg);
    assert_ptr_equal(last_lender, &ok);
    assert_string_equal(ok.asked, "test-table");
    const int E = cq_ssm_model_config(cq_dense_model(d))->d_embed;
    const char *texts[3] = {"clause one", "clause two", "termination"};
    size_t lens[3] = {strlen(texts[0]), strlen(texts[1]), strlen(texts[2])};
    float *vecs = calloc(3 * (size_t)E, sizeof *vecs);
    cq_ssm_state *st;
    assert_int_equal(cq_ssm_state_new(cq_dense_model(d), &st, &err), CQ_OK);
    assert_int_equal(cq_dense_encode_document(d, st, texts, lens, 3, vecs, NULL, &err), CQ_OK);
    cq_vectors *v;
    assert_int_equal(cq_dense_kb(d, f->s, f->kb, &v, &err), CQ_OK);
    assert_int_equal(cq_vectors_add(v, f->s, f->clauses, vecs, 3, &err), CQ_OK);
    int64_t ids[5];
    float scores[5];
    size_t n;
    assert_int_equal(cq_dense_search(d, f->s, f->kb, "termination", 5, ids, scores, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_true(scores[0] >= scores[1] && scores[1] >= scores[2]);
    cq_ssm_state_free(st);
    free(vecs);
    assert_int_equal(ok.closed, 0);
    cq_dense_close(d);
    assert_int_equal(ok.opened, 1);
    assert_int_equal(ok.closed, 1);
    cq_dense_set_vocab_source(NULL, NULL, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_add_search_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repair_and_models, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doc_vectors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doc_vectors_keep_fts_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ivf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dense, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dense_lent_vocab, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encoder_to_index, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
