/* Ingest with the encoder on, on PostgreSQL: one document at a time (cq_ingest_file, as the server's jobs ingest)
 * and as a batch (cq_ingest_files, as `clauseqa ingest`), each into a KB of its own. Every document is ready with a
 * vector per clause and its state, and both ways store the same vectors and states. Before, each document failed
 * ("store vectors: N of N clauses are not in knowledge base"): its vector rows were written before its clauses,
 * which reach the server when the document is finished. Run through tests/pg/cluster.sh (CLAUSEQA_PG). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "../unit/test_ssm_util.h"
#include "app/ingest.h"
#include "store/store.h"
#include "search/vectors.h"
#include "pg_fixture.h"

#define N_FILES 5

/* md5 of a query's text values in order, from pg's database. */
static char *pg_text(cq_pg *pg, const char *sql) {
    PGresult *r = PQexec(cq_pg_conn(pg), sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", sql, PQerrorMessage(cq_pg_conn(pg)));
    char *v = strdup(PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static void test_ingest_dense_serial_and_batch(void **state) {
    (void)state;
    char info[512], dir[] = "/tmp/cq_ingest_dense_pg_XXXXXX", path[700], models[600];
    assert_int_equal(pg_fresh_database("ingd", info, sizeof info), 0);
    assert_non_null(mkdtemp(dir));
    char *paths[N_FILES];
    for (int i = 0; i < N_FILES; i++) {
        snprintf(path, sizeof path, "%s/law%d.md", dir, i);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fprintf(f, "# 某市第%d号条例\n\n第一章 总则\n\n第一条 为了规范第%d项工作，制定本条例。\n\n"
                   "第二条 本条例适用于本市行政区域。\n\n第三条 违反本条例的，处%d元罚款。\n", i, i, (i + 1) * 100);
        fclose(f);
        paths[i] = strdup(path);
    }
    snprintf(models, sizeof models, "%s/models/ssm", dir);
    snprintf(path, sizeof path, "%s/models", dir);
    mkdir(path, 0755);
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 16, .n_layer = 2, .d_state = 4, .d_conv = 4,
                       .expand = 2, .dt_rank = 2, .d_embed = 32, .norm_eps = 1e-5f};
    assert_int_equal(ssm_test_write_model(models, &c, 7, NULL, NULL), 0);
    assert_int_equal(ssm_test_write_doc_head(models, &c, 64, 8), 0); /* document vectors too (issue 27) */

    cq_err err = {0};
    cq_store *s = NULL;
    cq_dense *d = NULL;
    if (cq_store_open_uri(info, &s, &err)) fail_msg("%s", err.msg);
    if (cq_dense_open(dir, models, &d, &err)) fail_msg("%s", err.msg);
    int64_t serial_kb, batch_kb;
    assert_int_equal(cq_store_kb_ensure(s, "serial", &serial_kb, &err), CQ_OK);
    assert_int_equal(cq_store_kb_ensure(s, "batch", &batch_kb, &err), CQ_OK);
    cq_ingest_options o = {.dense = d, .ocr = CQ_OCR_OFF};
    for (int i = 0; i < N_FILES; i++) {
        cq_ingest_result res;
        if (cq_ingest_file(s, dir, serial_kb, paths[i], &o, &res, &err)) fail_msg("%s", err.msg);
        assert_true(res.n_clauses >= 3);
    }
    cq_ingest_batch_options bo = {.n_workers = 2};
    if (cq_ingest_files(s, dir, batch_kb, (const char *const *)paths, N_FILES, &o, &bo, &err)) fail_msg("%s", err.msg);

    cq_pg *pg = cq_store_pg(s);
    char sql[512];
    int64_t kbs[2] = {serial_kb, batch_kb};
    char *vectors[2], *states[2];
    for (int k = 0; k < 2; k++) {
        snprintf(sql, sizeof sql, "SELECT count(*) FROM documents WHERE kb_id = %lld AND status = 'ready'",
                 (long long)kbs[k]);
        assert_int_equal(pg_count(pg, sql), N_FILES);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM clauses c JOIN documents d ON d.id = c.doc_id WHERE d.kb_id = "
                 "%lld", (long long)kbs[k]);
        int64_t clauses = pg_count(pg, sql);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM clause_vectors WHERE kb_id = %lld", (long long)kbs[k]);
        assert_true(clauses >= 3 * N_FILES);
        assert_int_equal(pg_count(pg, sql), clauses);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM doc_vectors s JOIN documents d ON d.id = s.doc_id WHERE "
                 "d.kb_id = %lld AND s.kb_id = d.kb_id", (long long)kbs[k]);
        assert_int_equal(pg_count(pg, sql), N_FILES);
        /* the vectors and document vectors in document and clause order, whatever their ids */
        snprintf(sql, sizeof sql, "SELECT md5(string_agg(encode(v.vec, 'hex'), ',' ORDER BY d.name, c.ord)) FROM "
                 "clause_vectors v JOIN clauses c ON c.id = v.clause_id JOIN documents d ON d.id = c.doc_id WHERE "
                 "d.kb_id = %lld", (long long)kbs[k]);
        vectors[k] = pg_text(pg, sql);
        snprintf(sql, sizeof sql, "SELECT md5(string_agg(encode(s.vec, 'hex') || s.model || s.head, ',' ORDER BY "
                 "d.name)) FROM doc_vectors s JOIN documents d ON d.id = s.doc_id WHERE d.kb_id = %lld",
                 (long long)kbs[k]);
        states[k] = pg_text(pg, sql);
    }
    assert_string_equal(vectors[0], vectors[1]);
    assert_string_equal(states[0], states[1]);
    for (int k = 0; k < 2; k++) {
        free(vectors[k]);
        free(states[k]);
    }
    cq_dense_close(d);
    cq_store_close(s);
    for (int i = 0; i < N_FILES; i++) free(paths[i]);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

int main(void) {
    PG_FIXTURE_REQUIRE_SERVER();
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ingest_dense_serial_and_batch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
