/* index/jobs_pg: ingestion jobs on PostgreSQL against a throwaway cluster (tests/pg/cluster.sh): the same
 * create/update/list/get/cancel semantics as the SQLite store's jobs (index/jobs.h, compared operation by
 * operation), and the shared queue — two nodes claiming at once never get the same job, an expired lease is taken
 * over with attempt + 1 and the dead attempt's document cleared, and the old owner's writes are refused after. */
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

#include "index/jobs.h"
#include "index/jobs_pg.h"
#include "index/store.h"
#include "index/store_pg.h"
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

/* ---- the same semantics as SQLite ---------------------------------------------------------------------------- */

static void assert_same_job(const cq_job_info *a, const cq_job_info *b) {
    assert_string_equal(a->kb, b->kb);
    assert_string_equal(a->state, b->state);
    assert_int_equal(a->done, b->done);
    assert_int_equal(a->total, b->total);
    assert_int_equal(!a->error, !b->error);
    if (a->error) assert_string_equal(a->error, b->error);
    assert_string_equal(a->error_code, b->error_code);
    assert_int_equal(!a->filename, !b->filename);
    if (a->filename) assert_string_equal(a->filename, b->filename);
    assert_int_equal(!a->upload_path, !b->upload_path);
    if (a->upload_path) assert_string_equal(a->upload_path, b->upload_path);
    assert_int_equal(a->size_bytes, b->size_bytes);
    assert_int_equal(a->replace, b->replace);
    assert_int_equal(a->attempts, b->attempts);
    assert_int_equal(a->doc_id != 0, b->doc_id != 0);
    assert_true(a->created_at > 0 && b->created_at > 0 && a->updated_at >= a->created_at);
}

/* Job i of both stores (ids differ only by the stores' sequences, which start alike here). */
static void assert_same(cq_store *sq, cq_pg *pg, int64_t sq_id, int64_t pg_id) {
    cq_err err = {0};
    cq_job_info a, b;
    assert_int_equal(cq_store_job_get(sq, sq_id, &a, &err), CQ_OK);
    assert_int_equal(cq_pg_job_get(pg, pg_id, &b, &err), CQ_OK);
    assert_same_job(&a, &b);
    cq_job_info_free(&a);
    cq_job_info_free(&b);
}

static void assert_same_lists(cq_job_info *a, size_t na, cq_job_info *b, size_t nb) {
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        assert_int_equal(a[i].id, b[i].id); /* both stores count ids from 1 here */
        assert_same_job(&a[i], &b[i]);
    }
    cq_job_info_free_array(a, na);
    cq_job_info_free_array(b, nb);
}

static void test_semantics_as_sqlite(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    char path[128];
    snprintf(path, sizeof path, "/tmp/cq_test_jobs_pg_%d.db", (int)getpid());
    unlink(path);
    cq_store *sq = NULL;
    assert_int_equal(cq_store_open(path, &sq, &err), CQ_OK);
    int64_t kb_s, kb_p, kb2_s, kb2_p, doc_s, doc_p;
    assert_int_equal(cq_store_kb_ensure(sq, "合同", &kb_s, &err), CQ_OK);
    assert_int_equal(cq_pg_kb_ensure(pg, "合同", &kb_p, &err), CQ_OK);
    assert_int_equal(cq_store_kb_ensure(sq, "other", &kb2_s, &err), CQ_OK);
    assert_int_equal(cq_pg_kb_ensure(pg, "other", &kb2_p, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(sq, kb_s, "a", "a.md", "md", SHA_A, 5, &doc_s, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_create(pg, kb_p, "a", "a.md", "md", SHA_A, 5, &doc_p, &err), CQ_OK);

    int64_t s[4], p[4];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cq_store_job_create(sq, kb_s, 0, &s[i], &err), CQ_OK);
        assert_int_equal(cq_pg_job_create(pg, kb_p, 0, &p[i], &err), CQ_OK);
        assert_int_equal(s[i], p[i]);
        assert_same(sq, pg, s[i], p[i]);
    }
    assert_int_equal(cq_store_job_create(sq, kb2_s, 0, &s[3], &err), CQ_OK);
    assert_int_equal(cq_pg_job_create(pg, kb2_p, 0, &p[3], &err), CQ_OK);

    /* upload recorded; a start counted; progress; a shutdown's interruption (uncounted, queued again) */
    assert_int_equal(cq_store_job_set_upload(sq, s[0], "合同 (1).pdf", "/up/job-1.pdf", 12345, 1, &err), CQ_OK);
    assert_int_equal(cq_pg_job_set_upload(pg, p[0], "合同 (1).pdf", "/up/job-1.pdf", 12345, 1, &err), CQ_OK);
    assert_same(sq, pg, s[0], p[0]);
    int att_s = 0, att_p = 0;
    assert_int_equal(cq_store_job_begin_attempt(sq, s[0], &att_s, &err), CQ_OK);
    assert_int_equal(cq_pg_job_begin_attempt(pg, p[0], &att_p, &err), CQ_OK);
    assert_int_equal(att_s, 1);
    assert_int_equal(att_p, 1);
    assert_int_equal(cq_store_job_update(sq, s[0], "running", 3, 10, NULL, &err), CQ_OK);
    assert_int_equal(cq_pg_job_update(pg, p[0], "running", 3, 10, NULL, &err), CQ_OK);
    assert_same(sq, pg, s[0], p[0]);
    assert_int_equal(cq_store_job_interrupted(sq, s[0], &err), CQ_OK);
    assert_int_equal(cq_pg_job_interrupted(pg, p[0], &err), CQ_OK);
    assert_same(sq, pg, s[0], p[0]);
    assert_int_equal(cq_store_job_interrupted(sq, s[0], &err), CQ_OK); /* never below zero */
    assert_int_equal(cq_pg_job_interrupted(pg, p[0], &err), CQ_OK);
    assert_same(sq, pg, s[0], p[0]);

    /* ends: ready with its document; failed with a reason's code; cancelled before it started */
    assert_int_equal(cq_store_job_begin_attempt(sq, s[0], NULL, &err), CQ_OK);
    assert_int_equal(cq_pg_job_begin_attempt(pg, p[0], NULL, &err), CQ_OK);
    assert_int_equal(cq_store_job_update(sq, s[0], "ready", 10, 10, NULL, &err), CQ_OK);
    assert_int_equal(cq_pg_job_update(pg, p[0], "ready", 10, 10, NULL, &err), CQ_OK);
    assert_int_equal(cq_store_job_finish(sq, s[0], doc_s, &err), CQ_OK);
    assert_int_equal(cq_pg_job_finish(pg, p[0], doc_p, &err), CQ_OK);
    assert_same(sq, pg, s[0], p[0]);

    cq_err why = {0};
    cq_err_set_reason(&why, CQ_ERR_TOO_LARGE, "too_large", "the document has 9000 pages (at most 2000)");
    assert_int_equal(cq_store_job_set_upload(sq, s[1], "b.pdf", "/up/job-2.pdf", 7, 0, &err), CQ_OK);
    assert_int_equal(cq_pg_job_set_upload(pg, p[1], "b.pdf", "/up/job-2.pdf", 7, 0, &err), CQ_OK);
    assert_int_equal(cq_store_job_fail(sq, s[1], 2, 9000, &why, &err), CQ_OK);
    assert_int_equal(cq_pg_job_fail(pg, p[1], 2, 9000, &why, &err), CQ_OK);
    assert_int_equal(cq_store_job_finish(sq, s[1], 0, &err), CQ_OK);
    assert_int_equal(cq_pg_job_finish(pg, p[1], 0, &err), CQ_OK);
    assert_same(sq, pg, s[1], p[1]);
    cq_job_info j;
    assert_int_equal(cq_pg_job_get(pg, p[1], &j, &err), CQ_OK);
    assert_string_equal(j.error_code, "too_large");
    assert_null(j.upload_path);
    cq_job_info_free(&j);
    cq_err plain = {0};
    cq_err_set(&plain, CQ_ERR_FORMAT, "not a PDF");
    assert_int_equal(cq_store_job_fail(sq, s[3], 0, 0, &plain, &err), CQ_OK);
    assert_int_equal(cq_pg_job_fail(pg, p[3], 0, 0, &plain, &err), CQ_OK);
    assert_same(sq, pg, s[3], p[3]);

    assert_int_equal(cq_store_job_update(sq, s[2], "cancelled", 0, 0, "cancelled before it started", &err), CQ_OK);
    assert_int_equal(cq_pg_job_update(pg, p[2], "cancelled", 0, 0, "cancelled before it started", &err), CQ_OK);
    assert_int_equal(cq_store_job_finish(sq, s[2], 0, &err), CQ_OK);
    assert_int_equal(cq_pg_job_finish(pg, p[2], 0, &err), CQ_OK);
    assert_same(sq, pg, s[2], p[2]);

    /* a job that is not there: get says so; writes change nothing and are no error (its KB went meanwhile) */
    assert_int_equal(cq_store_job_get(sq, 999, &j, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_job_get(pg, 999, &j, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_job_update(sq, 999, "ready", 1, 1, NULL, &err), CQ_OK);
    assert_int_equal(cq_pg_job_update(pg, 999, "ready", 1, 1, NULL, &err), CQ_OK);

    /* lists: newest first, per KB or all, limited; unfinished oldest first */
    cq_job_info *a, *b;
    size_t na, nb;
    assert_int_equal(cq_store_job_list(sq, kb_s, 100, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_pg_job_list(pg, kb_p, 100, &b, &nb, &err), CQ_OK);
    assert_int_equal(na, 3);
    assert_true(b[0].id > b[1].id && b[1].id > b[2].id);
    assert_same_lists(a, na, b, nb);
    assert_int_equal(cq_store_job_list(sq, 0, 2, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_pg_job_list(pg, 0, 2, &b, &nb, &err), CQ_OK);
    assert_int_equal(nb, 2);
    assert_string_equal(b[0].kb, "other");
    assert_same_lists(a, na, b, nb);
    int64_t q_s, q_p;
    assert_int_equal(cq_store_job_create(sq, kb_s, 0, &q_s, &err), CQ_OK);
    assert_int_equal(cq_pg_job_create(pg, kb_p, 0, &q_p, &err), CQ_OK);
    assert_int_equal(cq_store_job_unfinished(sq, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_pg_job_unfinished(pg, &b, &nb, &err), CQ_OK);
    assert_int_equal(nb, 1);
    assert_int_equal(b[0].id, q_p);
    assert_same_lists(a, na, b, nb);

    /* deleting the document deletes its jobs; deleting a KB, the KB's */
    assert_int_equal(cq_store_doc_delete(sq, doc_s, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_delete(pg, doc_p, &err), CQ_OK);
    assert_int_equal(cq_store_job_get(sq, s[0], &j, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_job_get(pg, p[0], &j, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_kb_delete(sq, kb2_s, &err), CQ_OK);
    assert_int_equal(cq_pg_kb_delete(pg, kb2_p, &err), CQ_OK);
    assert_int_equal(cq_pg_job_get(pg, p[3], &j, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_job_list(pg, 0, 100, &b, &nb, &err), CQ_OK);
    assert_int_equal(cq_store_job_list(sq, 0, 100, &a, &na, &err), CQ_OK);
    assert_same_lists(a, na, b, nb);
    /* ids are never reused */
    int64_t again;
    assert_int_equal(cq_pg_job_create(pg, kb_p, 0, &again, &err), CQ_OK);
    assert_true(again > q_p);
    cq_store_close(sq);
    unlink(path);
}

static void test_page_list(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int64_t kb, doc;
    assert_int_equal(cq_pg_kb_ensure(pg, "k", &kb, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_create(pg, kb, "d", "d.pdf", "pdf", SHA_A, 5, &doc, &err), CQ_OK);
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO pages(doc_id, page_no, width, height, n_chars, quality, quality_reason) VALUES "
             "(%lld, 2, 595.5, 842, 10, 0.25, 'scanned, no text layer'), (%lld, 1, 612, 792, 1500, 1, '')",
             (long long)doc, (long long)doc);
    pg_exec(pg, sql);
    cq_page_info *p;
    size_t n;
    assert_int_equal(cq_pg_page_list(pg, doc, &p, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(p[0].page_no, 1);
    assert_int_equal(p[0].n_chars, 1500);
    assert_true(p[0].width == 612.0f && p[0].height == 792.0f && p[0].quality == 1.0);
    assert_int_equal(p[1].page_no, 2);
    assert_true(p[1].width == 595.5f && p[1].quality == 0.25);
    assert_string_equal(p[1].quality_reason, "scanned, no text layer");
    free(p);
    assert_int_equal(cq_pg_page_list(pg, doc + 1, &p, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    free(p);
}

/* ---- the shared queue ------------------------------------------------------------------------------------------ */

/* n queued jobs with their uploads recorded, in KB kb. */
static void make_jobs(cq_pg *pg, int64_t kb, int n, int64_t *ids) {
    cq_err err = {0};
    for (int i = 0; i < n; i++) {
        char path[64];
        int64_t id;
        assert_int_equal(cq_pg_job_create(pg, kb, 0, &id, &err), CQ_OK);
        snprintf(path, sizeof path, "/up/job-%lld.md", (long long)id);
        assert_int_equal(cq_pg_job_set_upload(pg, id, "x.md", path, 1, 0, &err), CQ_OK);
        if (ids) ids[i] = id;
    }
}

#define RACE_JOBS 60

typedef struct {
    cq_pg *pg;
    char owner[CQ_PG_JOB_OWNER_BYTES];
    int64_t got[RACE_JOBS];
    int n;
    cq_status rc;
} node;

/* A node's worker: claims until nothing is left, running each job to its end. */
static void *node_main(void *arg) {
    node *w = arg;
    cq_err err = {0};
    for (;;) {
        int64_t id = 0;
        cq_pg_job_lease lease;
        w->rc = cq_pg_job_claim(w->pg, w->owner, 30, &id, &lease, NULL, &err);
        if (w->rc || !id) break;
        if (w->n < RACE_JOBS) w->got[w->n] = id;
        w->n++;
        if ((w->rc = cq_pg_job_update(w->pg, id, "ready", 1, 1, NULL, &err))) break;
        if ((w->rc = cq_pg_job_finish(w->pg, id, 0, &err))) break;
        if ((w->rc = cq_pg_job_release(w->pg, &err))) break;
    }
    if (w->rc) fprintf(stderr, "%s: %s\n", w->owner, err.msg);
    return NULL;
}

static void test_two_nodes_never_share_a_job(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_pg_kb_ensure(pg, "k", &kb, &err), CQ_OK);
    make_jobs(pg, kb, RACE_JOBS, NULL);
    int64_t queued = 0;
    assert_int_equal(cq_pg_job_count_queued(pg, &queued, &err), CQ_OK);
    assert_int_equal(queued, RACE_JOBS);
    int64_t unclaimable;
    assert_int_equal(cq_pg_job_create(pg, kb, 0, &unclaimable, &err), CQ_OK); /* upload not recorded yet */
    node nodes[2] = {{.pg = pg_connect_again(pg)}, {.pg = pg_connect_again(pg)}};
    snprintf(nodes[0].owner, sizeof nodes[0].owner, "node-1");
    snprintf(nodes[1].owner, sizeof nodes[1].owner, "node-2");
    pthread_t t[2];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, node_main, &nodes[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(nodes[i].rc, CQ_OK);
        cq_pg_close(nodes[i].pg);
    }
    /* every job once, by exactly one node, at its first attempt; both nodes took part */
    assert_int_equal(nodes[0].n + nodes[1].n, RACE_JOBS);
    printf("node-1 ran %d jobs, node-2 %d: %.1f ms, %.2f ms per claim + end + release\n", nodes[0].n, nodes[1].n,
           ms, ms / RACE_JOBS);
    for (int a = 0; a < nodes[0].n; a++)
        for (int b = 0; b < nodes[1].n; b++) assert_true(nodes[0].got[a] != nodes[1].got[b]);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM jobs WHERE state = 'ready' AND attempt = 1 AND attempts = 1"),
                     RACE_JOBS);
    assert_int_equal(pg_count(pg, "SELECT count(DISTINCT lease_owner) FROM jobs WHERE state = 'ready'"),
                     (nodes[0].n > 0) + (nodes[1].n > 0));
    cq_job_info j;
    assert_int_equal(cq_pg_job_get(pg, unclaimable, &j, &err), CQ_OK);
    assert_string_equal(j.state, "queued");
    assert_int_equal(cq_pg_job_count_queued(pg, &queued, &err), CQ_OK);
    assert_int_equal(queued, 1);
    cq_job_info_free(&j);
}

static void test_lease_expiry_and_fencing(void **state) {
    cq_pg *pg = *state; /* an HTTP request's connection: holds no lease */
    cq_err err = {0};
    int64_t kb, ids[2], id = 0, none = 0;
    assert_int_equal(cq_pg_kb_ensure(pg, "k", &kb, &err), CQ_OK);
    make_jobs(pg, kb, 2, ids);
    cq_pg *a = pg_connect_again(pg), *b = pg_connect_again(pg);
    cq_pg_job_lease la, lb;
    int taken = -1, cancel = -1;
    assert_int_equal(cq_pg_job_claim(a, "node-a", 30, &id, &la, &taken, &err), CQ_OK);
    assert_int_equal(id, ids[0]);
    assert_int_equal(la.attempt, 1);
    assert_int_equal(taken, 0);
    assert_string_equal(la.upload_sha256, "");
    assert_int_equal(cq_pg_job_update(a, id, "running", 1, 4, NULL, &err), CQ_OK);
    /* while a's lease lasts, b gets the other job, not a's; nobody else writes a's job */
    assert_int_equal(cq_pg_job_claim(b, "node-b", 30, &none, &lb, NULL, &err), CQ_OK);
    assert_int_equal(none, ids[1]);
    assert_int_equal(cq_pg_job_interrupted(b, none, &err), CQ_OK); /* b stops: queued again for anyone */
    assert_int_equal(cq_pg_job_renew(b, &lb, 30, NULL, &err), CQ_ERR_CANCELLED); /* requeued: no longer b's */
    assert_int_equal(cq_pg_job_release(b, &err), CQ_OK);
    assert_int_equal(cq_pg_job_update(pg, id, "cancelled", 0, 0, NULL, &err), CQ_ERR_CANCELLED);
    assert_non_null(strstr(err.msg, "node-a"));
    assert_int_equal(cq_pg_job_update(b, id, "ready", 4, 4, NULL, &err), CQ_ERR_CANCELLED);
    assert_int_equal(cq_pg_job_renew(a, &la, 30, &cancel, &err), CQ_OK);
    assert_int_equal(cancel, 0);

    /* a's node hangs: its lease runs out (made to, rather than waited for) and b takes the job over */
    pg_exec(pg, "UPDATE jobs SET lease_until = now() - interval '1 second' WHERE lease_owner = 'node-a'");
    assert_int_equal(cq_pg_job_claim(b, "node-b", 30, &none, &lb, &taken, &err), CQ_OK);
    assert_int_equal(none, id);
    assert_int_equal(lb.attempt, 2);
    assert_int_equal(taken, 1);
    cq_job_info j;
    assert_int_equal(cq_pg_job_get(pg, id, &j, &err), CQ_OK);
    assert_string_equal(j.state, "running");
    assert_int_equal(j.done, 0);
    assert_int_equal(j.attempts, 2);
    cq_job_info_free(&j);

    /* a wakes up: every write it tries is refused, the lease cannot be renewed, nothing of the row changes */
    assert_int_equal(cq_pg_job_update(a, id, "ready", 4, 4, NULL, &err), CQ_ERR_CANCELLED);
    assert_non_null(strstr(err.msg, "lease lost"));
    assert_int_equal(cq_pg_job_finish(a, id, 0, &err), CQ_ERR_CANCELLED);
    cq_err why = {0};
    cq_err_set(&why, CQ_ERR_IO, "x");
    assert_int_equal(cq_pg_job_fail(a, id, 0, 0, &why, &err), CQ_ERR_CANCELLED);
    assert_int_equal(cq_pg_job_interrupted(a, id, &err), CQ_ERR_CANCELLED);
    assert_int_equal(cq_pg_job_renew(a, &la, 30, NULL, &err), CQ_ERR_CANCELLED);
    /* writes in a's transaction fail before its commit: the document it was saving goes with the rollback */
    pg_exec(a, "BEGIN");
    assert_int_equal(cq_pg_job_update(a, id, "ready", 4, 4, NULL, &err), CQ_ERR_CANCELLED);
    pg_exec(a, "ROLLBACK");
    /* ... and a's token names another job than the one it may touch: the other job is out of reach too */
    assert_int_equal(cq_pg_job_update(a, ids[1], "ready", 1, 1, NULL, &err), CQ_ERR_CANCELLED);
    assert_int_equal(cq_pg_job_get(pg, id, &j, &err), CQ_OK);
    assert_string_equal(j.state, "running");
    assert_int_equal(j.done, 0);
    cq_job_info_free(&j);

    /* b works and ends it; a, even after b's end, still cannot write */
    assert_int_equal(cq_pg_job_renew(b, &lb, 30, &cancel, &err), CQ_OK);
    assert_int_equal(cq_pg_job_update(b, id, "ready", 4, 4, NULL, &err), CQ_OK);
    assert_int_equal(cq_pg_job_finish(b, id, 0, &err), CQ_OK);
    assert_int_equal(cq_pg_job_release(b, &err), CQ_OK);
    assert_int_equal(cq_pg_job_update(a, id, "failed", 0, 0, "late", &err), CQ_ERR_CANCELLED);
    assert_int_equal(cq_pg_job_update(pg, id, "failed", 0, 0, "late", &err), CQ_ERR_CANCELLED);
    /* ended: nothing to renew, but still b's (its end stands), never a's */
    assert_int_equal(cq_pg_job_renew(b, &lb, 30, NULL, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM jobs WHERE lease_until IS NOT NULL AND state = 'ready'"), 0);
    assert_int_equal(cq_pg_job_renew(a, &la, 30, NULL, &err), CQ_ERR_CANCELLED);
    assert_int_equal(cq_pg_job_get(pg, id, &j, &err), CQ_OK);
    assert_string_equal(j.state, "ready");
    assert_int_equal(j.done, 4);
    cq_job_info_free(&j);
    /* an ended job is never claimed again; a released connection claims the queued one */
    assert_int_equal(cq_pg_job_release(a, &err), CQ_OK);
    assert_int_equal(cq_pg_job_claim(a, "node-a", 30, &none, &la, NULL, &err), CQ_OK);
    assert_int_equal(none, ids[1]);
    assert_int_equal(la.attempt, 2); /* b's interrupted claim was attempt 1 */
    assert_int_equal(cq_pg_job_claim(b, "node-b", 30, &none, &lb, NULL, &err), CQ_OK);
    assert_int_equal(none, 0);
    cq_pg_close(a);
    cq_pg_close(b);
}

static void test_cancel_request_and_renew(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int64_t kb, ids[1], id = 0;
    assert_int_equal(cq_pg_kb_ensure(pg, "k", &kb, &err), CQ_OK);
    make_jobs(pg, kb, 1, ids);
    cq_pg *a = pg_connect_again(pg), *renewer = pg_connect_again(pg);
    cq_pg_job_lease la;
    assert_int_equal(cq_pg_job_claim(a, "node-a", 2, &id, &la, NULL, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM jobs WHERE lease_until > now() + interval '1 second' AND "
                                  "lease_until <= now() + interval '2 seconds'"),
                     1);
    /* another connection renews with the token (the worker's own may be busy in its transaction) */
    int cancel = -1;
    assert_int_equal(cq_pg_job_renew(renewer, &la, 60, &cancel, &err), CQ_OK);
    assert_int_equal(cancel, 0);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM jobs WHERE lease_until > now() + interval '50 seconds'"), 1);
    /* a cancel asked on another node reaches the worker at its next renewal */
    assert_int_equal(cq_pg_job_request_cancel(pg, id, &err), CQ_OK);
    assert_int_equal(cq_pg_job_request_cancel(pg, id + 100, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_job_renew(renewer, &la, 60, &cancel, &err), CQ_OK);
    assert_int_equal(cancel, 1);
    assert_int_equal(cq_pg_job_update(a, id, "cancelled", 0, 0, "cancelled on request", &err), CQ_OK);
    assert_int_equal(cq_pg_job_finish(a, id, 0, &err), CQ_OK);
    /* bad arguments are refused with a reason */
    int64_t none;
    assert_int_equal(cq_pg_job_claim(pg, "", 30, &none, NULL, NULL, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_pg_job_claim(pg, "x", 0, &none, NULL, NULL, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_pg_job_set_upload_sha256(pg, id, "not-a-hash", &err), CQ_ERR_INVALID);
    pg_exec(pg, "BEGIN");
    assert_int_equal(cq_pg_job_claim(pg, "x", 30, &none, NULL, NULL, &err), CQ_ERR_INTERNAL);
    pg_exec(pg, "ROLLBACK");
    char owner[CQ_PG_JOB_OWNER_BYTES], other[CQ_PG_JOB_OWNER_BYTES];
    cq_pg_job_owner_name(owner);
    usleep(2000);
    cq_pg_job_owner_name(other);
    assert_true(strlen(owner) > 5 && strcmp(owner, other) != 0);
    cq_pg_close(a);
    cq_pg_close(renewer);
}

/* A node dies mid-ingest: its document's rows are there, half written. The one that takes the job over starts
 * from nothing, so a clean run's counts come out; another job's document of the same content is left alone. */
static void test_take_over_clears_the_dead_attempt(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int64_t kb, kb2, ids[1], id = 0, doc, keep, other_kb_doc;
    assert_int_equal(cq_pg_kb_ensure(pg, "k", &kb, &err), CQ_OK);
    assert_int_equal(cq_pg_kb_ensure(pg, "k2", &kb2, &err), CQ_OK);
    make_jobs(pg, kb, 1, ids);
    assert_int_equal(cq_pg_job_set_upload_sha256(pg, ids[0], SHA_A, &err), CQ_OK);
    cq_pg *a = pg_connect_again(pg), *b = pg_connect_again(pg);
    cq_pg_job_lease la, lb;
    int taken = -1;
    assert_int_equal(cq_pg_job_claim(a, "node-a", 30, &id, &la, &taken, &err), CQ_OK);
    assert_int_equal(taken, 0);
    /* a's ingest got this far: its document, a page, its clauses and their keyword index */
    assert_int_equal(cq_pg_doc_create(a, kb, "a", "a.md", "md", SHA_A, 5, &doc, &err), CQ_OK);
    cq_store_clause c[2] = {{.ord = 0, .kind = 1, .text = "劳动合同的订立"}, {.ord = 1, .kind = 1, .text = "试用期"}};
    assert_int_equal(cq_pg_doc_add_clauses(a, doc, "a", c, 2, NULL, &err), CQ_OK);
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO pages(doc_id, page_no, width, height, n_chars, quality) VALUES(%lld, 1, 1, 1, 1, 1)",
             (long long)doc);
    pg_exec(pg, sql);
    assert_int_equal(cq_pg_doc_create(pg, kb, "b", "b.md", "md", SHA_B, 5, &keep, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_create(pg, kb2, "a", "a.md", "md", SHA_A, 5, &other_kb_doc, &err), CQ_OK);
    int64_t postings = pg_count(pg, "SELECT count(*) FROM keyword_postings");
    assert_true(postings > 0);

    /* a dies; b takes over: a's document and what hangs on it are gone, the others are not */
    cq_pg_close(a);
    pg_exec(pg, "UPDATE jobs SET lease_until = now() - interval '1 second'");
    assert_int_equal(cq_pg_job_claim(b, "node-b", 30, &id, &lb, &taken, &err), CQ_OK);
    assert_int_equal(id, ids[0]);
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
    assert_int_equal(cq_pg_doc_create(b, kb, "a", "a.md", "md", SHA_A, 5, &redo, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_add_clauses(b, redo, "a", c, 2, NULL, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM keyword_postings"), postings);
    assert_int_equal(cq_pg_job_update(b, id, "ready", 1, 1, NULL, &err), CQ_OK);
    assert_int_equal(cq_pg_job_finish(b, id, redo, &err), CQ_OK);
    cq_job_info j;
    assert_int_equal(cq_pg_job_get(pg, id, &j, &err), CQ_OK);
    assert_int_equal(j.doc_id, redo);
    assert_string_equal(j.state, "ready");
    cq_job_info_free(&j);
    cq_pg_close(b);
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
    assert_int_equal(cq_pg_original_put_file(pg, SHA_A, in, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM originals"), 3);
    assert_int_equal(cq_pg_original_put_file(pg, SHA_A, in, &err), CQ_OK); /* there already: nothing added */
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM originals"), 3);
    assert_int_equal(cq_pg_original_get_file(pg, SHA_A, out, &err), CQ_OK);
    fp = fopen(out, "rb");
    assert_non_null(fp);
    unsigned char *back = malloc(size + 1);
    assert_non_null(back);
    assert_int_equal(fread(back, 1, size + 1, fp), size);
    fclose(fp);
    assert_memory_equal(back, bytes, size);
    assert_int_equal(cq_pg_original_get_file(pg, SHA_B, out, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_original_put_file(pg, SHA_B, "/nonexistent/x", &err), CQ_ERR_IO);
    /* A part missing: an error, and the file there before is left as it was (the fetch writes a temporary). */
    assert_int_equal(pg_count(pg, "WITH d AS (DELETE FROM originals WHERE part = 1 RETURNING 1) SELECT count(*) "
                                  "FROM d"),
                     1);
    assert_int_equal(cq_pg_original_get_file(pg, SHA_A, out, &err), CQ_ERR_DB);
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
    assert_int_equal(cq_pg_original_put_file(pg, SHA_C, in, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM originals WHERE sha256 = '" SHA_C "'"), 48);
    assert_int_equal(cq_pg_original_get_file(pg, SHA_C, out, &err), CQ_OK);
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
        cmocka_unit_test_setup_teardown(test_semantics_as_sqlite, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_page_list, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_two_nodes_never_share_a_job, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_lease_expiry_and_fencing, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_cancel_request_and_renew, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_take_over_clears_the_dead_attempt, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_upload_by_content, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_upload_streams, pg_setup, pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
