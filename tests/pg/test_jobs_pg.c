/* The shared job queue on PostgreSQL (store/job_claim.h) against a throwaway cluster (tests/pg/cluster.sh): what
 * the conformance bodies (tests/store/jobs_bodies.h, run by test_store_backends_pg on both stores) cannot build
 * through the store's own functions — a dead attempt's half-written document, cleared when the job is taken over —
 * and the uploads kept by content (originals) that any node fetches. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/job_claim.h"
#include "store/jobs.h"
#include "store/originals.h"
#include "store/store.h"
#include "pg_handle.h"
#include "pg_fixture.h"

static const char SHA_A[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char SHA_B[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
#define SHA_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

static void test_schema(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int version = 0;
    assert_int_equal(cq_pg_schema_version(pg, &version, &err), CQ_OK);
    assert_int_equal(version, CQ_PG_SCHEMA_VERSION);
    const char *tables[] = {"jobs", "api_keys", "conversations", "conversation_turns"};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_tables WHERE tablename = '%s'", tables[i]);
        assert_int_equal(pg_count(pg, sql), 1);
    }
}

/* A node dies mid-ingest: its document's rows are there, half written. The one that takes the job over starts
 * from nothing, so a clean run's counts come out; another job's document of the same content is left alone. */
/* Another store (a node) on pg's database. */
static cq_store *store_again(cq_pg *pg) {
    char info[512];
    snprintf(info, sizeof info, "%s dbname=%s", conninfo, PQdb(cq_pg_conn(pg)));
    cq_store *s = NULL;
    cq_err err = {0};
    if (cq_store_open_uri(info, &s, &err)) fail_msg("%s", err.msg);
    return s;
}

static void test_take_over_clears_the_dead_attempt(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int64_t kb, kb2, id = 0, doc, keep, other_kb_doc, job;
    assert_int_equal(cq_store_kb_ensure(pg_store(pg), "k", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_kb_ensure(pg_store(pg), "k2", &kb2, &err), CQ_OK);
    cq_store *a = store_again(pg), *b = store_again(pg);
    assert_int_equal(cq_store_job_create(b, kb, 0, &job, &err), CQ_OK);
    assert_int_equal(cq_store_job_set_upload(b, job, "a.md", "uploads/job-1.md", 5, 0, "auto", &err), CQ_OK);
    assert_int_equal(cq_store_job_set_upload_sha256(b, job, SHA_A, &err), CQ_OK);
    cq_job_lease la, lb;
    int taken = -1;
    assert_int_equal(cq_store_job_claim(a, "node-a", 30, &id, &la, &taken, &err), CQ_OK);
    assert_int_equal(id, job);
    assert_int_equal(taken, 0);
    /* a's ingest got this far: its document, a page, its clauses and their keyword index */
    cq_pg *a_pg = cq_store_pg(a);
    assert_int_equal(cq_store_doc_create(a, kb, "a", "a.md", "md", SHA_A, 5, &doc, &err), CQ_OK);
    cq_store_clause c[2] = {{.ord = 0, .kind = 1, .text = "劳动合同的订立"},
                            {.ord = 1, .kind = 1, .text = "试用期"}};
    assert_int_equal(cq_pg_doc_add_clauses(a_pg, doc, "a", c, 2, NULL, &err), CQ_OK);
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT INTO pages(doc_id, page_no, width, height, n_chars, quality) VALUES(%lld, 1, 1, 1, 1, 1)",
             (long long)doc);
    pg_exec(pg, sql);
    assert_int_equal(cq_store_doc_create(pg_store(pg), kb, "b", "b.md", "md", SHA_B, 5, &keep, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(pg_store(pg), kb2, "a", "a.md", "md", SHA_A, 5, &other_kb_doc, &err), CQ_OK);
    int64_t postings = pg_count(pg, "SELECT count(*) FROM keyword_postings");
    assert_true(postings > 0);

    /* a dies; b takes over: a's document and what hangs on it are gone, the others are not */
    cq_store_close(a);
    pg_exec(pg, "UPDATE jobs SET lease_until = now() - interval '1 second'");
    assert_int_equal(cq_store_job_claim(b, "node-b", 30, &id, &lb, &taken, &err), CQ_OK);
    assert_int_equal(id, job);
    assert_int_equal(taken, 1);
    assert_int_equal(lb.attempt, 2);
    assert_string_equal(lb.upload_sha256, SHA_A);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM documents WHERE id = %lld", (long long)doc);
    assert_int_equal(pg_count(pg, sql), 0);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM clauses"), 0);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM keyword_postings"), 0);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM pages"), 0);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM documents"), 2);

    /* b redoes it: the same content comes in once */
    int64_t redo;
    assert_int_equal(cq_store_doc_create(b, kb, "a", "a.md", "md", SHA_A, 5, &redo, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_add_clauses(cq_store_pg(b), redo, "a", c, 2, NULL, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM keyword_postings"), postings);
    assert_int_equal(cq_store_job_update(b, id, CQ_JOB_READY, 1, 1, NULL, &err), CQ_OK);
    assert_int_equal(cq_store_job_finish(b, id, redo, &err), CQ_OK);
    cq_job_info j;
    assert_int_equal(cq_store_job_get(b, id, &j, &err), CQ_OK);
    assert_int_equal(j.doc_id, redo);
    assert_int_equal(j.state, CQ_JOB_READY);
    cq_job_info_free(&j);
    cq_store_close(b);
}

static void test_upload_by_content(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    char in[128], out[128];
    snprintf(in, sizeof in, "/tmp/cq_test_jobs_pg_in_%d", (int)getpid());
    snprintf(out, sizeof out, "/tmp/cq_test_jobs_pg_out_%d", (int)getpid());
    size_t size = (5u << 20) / 2 + 17; /* three parts, the last short */
    unsigned char *bytes = malloc(size);
    assert_non_null(bytes);
    uint32_t x = 12345;
    for (size_t i = 0; i < size; i++) bytes[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    FILE *fp = fopen(in, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, size, fp), size);
    fclose(fp);
    assert_int_equal(cq_store_original_put_file(pg_store(pg), SHA_A, in, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM originals"), 3);
    assert_int_equal(cq_store_original_put_file(pg_store(pg), SHA_A, in, &err), CQ_OK); /* there already: nothing added */
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM originals"), 3);
    assert_int_equal(cq_store_original_get_file(pg_store(pg), SHA_A, out, &err), CQ_OK);
    fp = fopen(out, "rb");
    assert_non_null(fp);
    unsigned char *back = malloc(size + 1);
    assert_non_null(back);
    assert_int_equal(fread(back, 1, size + 1, fp), size);
    fclose(fp);
    assert_memory_equal(back, bytes, size);
    assert_int_equal(cq_store_original_get_file(pg_store(pg), SHA_B, out, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_original_put_file(pg_store(pg), SHA_B, "/nonexistent/x", &err), CQ_ERR_IO);
    /* A part missing: an error, and the file there before is left as it was (the fetch writes a temporary). */
    assert_int_equal(pg_count(pg, "WITH d AS (DELETE FROM originals WHERE part = 1 RETURNING 1) SELECT count(*) "
                                  "FROM d"),
                     1);
    assert_int_equal(cq_store_original_get_file(pg_store(pg), SHA_A, out, &err), CQ_ERR_DB);
    assert_non_null(strstr(err.msg, "incomplete"));
    fp = fopen(out, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(back, 1, size + 1, fp), size);
    fclose(fp);
    free(bytes);
    free(back);
    unlink(in);
    unlink(out);
}

/* Originals stream a part at a time (issue 20): storing and fetching a 48 MiB file grows the process's peak
 * resident memory by a few MiB, not by the file. Not under AddressSanitizer, whose quarantine keeps freed parts. */
static void test_upload_streams(void **state) {
#if defined(__SANITIZE_ADDRESS__)
    (void)state;
    skip();
#else
    cq_pg *pg = *state;
    cq_err err = {0};
    char in[128], out[128];
    snprintf(in, sizeof in, "/tmp/cq_test_jobs_pg_big_%d", (int)getpid());
    snprintf(out, sizeof out, "/tmp/cq_test_jobs_pg_big_out_%d", (int)getpid());
    const size_t size = 48u << 20;
    FILE *fp = fopen(in, "wb");
    assert_non_null(fp);
    unsigned char block[65536];
    uint32_t x = 777;
    for (size_t done = 0; done < size; done += sizeof block) {
        for (size_t i = 0; i < sizeof block; i++) block[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
        assert_int_equal(fwrite(block, 1, sizeof block, fp), sizeof block);
    }
    fclose(fp);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    assert_int_equal(cq_store_original_put_file(pg_store(pg), SHA_C, in, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM originals WHERE sha256 = '" SHA_C "'"), 48);
    assert_int_equal(cq_store_original_get_file(pg_store(pg), SHA_C, out, &err), CQ_OK);
    getrusage(RUSAGE_SELF, &after);
    long grown_kib = after.ru_maxrss - before.ru_maxrss;
    printf("storing and fetching 48 MiB: peak resident memory grew by %ld KiB\n", grown_kib);
    assert_true(grown_kib < 16 * 1024);
    struct stat sb;
    assert_int_equal(stat(out, &sb), 0);
    assert_int_equal((size_t)sb.st_size, size);
    unlink(in);
    unlink(out);
#endif
}

int main(void) {
    PG_FIXTURE_REQUIRE_SERVER();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_schema, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_take_over_clears_the_dead_attempt, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_upload_by_content, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_upload_streams, pg_setup, pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
