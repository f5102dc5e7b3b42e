/* store/jobs.h's and store/job_claim.h's conformance bodies (tests/store/conformance.h): the same on SQLite and
 * PostgreSQL. The job rows behave alike on both; the claim is what a shared queue adds, so the claim bodies check
 * that SQLite refuses it (its queue is the node's own) and run the race, the lease take-over with its fencing, the
 * cancel request and the clearing of a dead attempt where the queue is shared. */
#ifndef CQ_TESTS_STORE_JOBS_BODIES_H
#define CQ_TESTS_STORE_JOBS_BODIES_H

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "store/job_claim.h"
#include "store/jobs.h"
#include "tests/store/conformance.h"

#define CONF_SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CONF_SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* Job id of s, fetched (the test fails when it is not there). */
static cq_job_info conf_job(cq_store *s, int64_t id) {
    cq_err err = {0};
    cq_job_info j;
    CONF_EXPECT(cq_store_job_get(s, id, &j, &err), CQ_OK);
    return j;
}

static void conf_jobs_states(void **state) {
    (void)state;
    const char *names[] = {"queued", "running", "ready", "failed", "duplicate", "cancelled"};
    for (int i = 0; i < 6; i++) {
        cq_job_state st = CQ_JOB_QUEUED;
        assert_string_equal(cq_job_state_name((cq_job_state)i), names[i]);
        assert_true(cq_job_state_parse(names[i], &st));
        assert_int_equal(st, i);
        assert_int_equal(cq_job_state_ended(st), i >= 2);
    }
    cq_job_state st = CQ_JOB_READY;
    assert_false(cq_job_state_parse("Queued", &st));
    assert_false(cq_job_state_parse("", &st));
    assert_false(cq_job_state_parse(NULL, &st));
    assert_int_equal(st, CQ_JOB_READY);
    assert_string_equal(cq_job_state_name((cq_job_state)99), "unknown");
}

/* A job's life: created, its upload recorded, started, interrupted by a shutdown, ended ready, failed with a
 * reason's code, cancelled; lists; a job that is not there; deletes by document and by KB; ids never reused. */
static void conf_jobs_rows(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, kb2, doc, ids[4];
    CONF_EXPECT(cq_store_kb_ensure(s, "合同", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_ensure(s, "other", &kb2, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_create(s, kb, "a", "a.md", "md", CONF_SHA_A, 5, &doc, &err), CQ_OK);
    for (int i = 0; i < 3; i++) CONF_EXPECT(cq_store_job_create(s, kb, 0, &ids[i], &err), CQ_OK);
    CONF_EXPECT(cq_store_job_create(s, kb2, 0, &ids[3], &err), CQ_OK);
    assert_true(ids[0] > 0 && ids[1] > ids[0] && ids[2] > ids[1] && ids[3] > ids[2]);
    cq_job_info j = conf_job(s, ids[0]);
    assert_int_equal(j.kb_id, kb);
    assert_string_equal(j.kb, "合同");
    assert_int_equal(j.state, CQ_JOB_QUEUED);
    assert_int_equal(j.doc_id, 0);
    assert_null(j.error);
    assert_null(j.filename);
    assert_null(j.upload_path);
    assert_int_equal(j.attempts, 0);
    assert_string_equal(j.error_code, "");
    assert_string_equal(j.ocr, ""); /* none recorded */
    assert_true(j.created_at > 0 && j.updated_at == j.created_at);
    cq_job_info_free(&j);
    int64_t queued = 0;
    CONF_EXPECT(cq_store_job_count_queued(s, &queued, &err), CQ_OK);
    assert_int_equal(queued, 4);

    /* upload recorded; a start counted; progress; a shutdown's interruption (uncounted, queued again) */
    CONF_EXPECT(cq_store_job_set_upload(s, ids[0], "合同 (1).pdf", "uploads/job-1.pdf", 12345, 1, "force", &err), CQ_OK);
    int attempts = 0;
    CONF_EXPECT(cq_store_job_begin_attempt(s, ids[0], &attempts, &err), CQ_OK);
    assert_int_equal(attempts, 1);
    CONF_EXPECT(cq_store_job_update(s, ids[0], CQ_JOB_RUNNING, 3, 10, NULL, &err), CQ_OK);
    j = conf_job(s, ids[0]);
    assert_int_equal(j.state, CQ_JOB_RUNNING);
    assert_int_equal(j.done, 3);
    assert_int_equal(j.total, 10);
    assert_string_equal(j.filename, "合同 (1).pdf");
    assert_string_equal(j.upload_path, "uploads/job-1.pdf");
    assert_int_equal(j.size_bytes, 12345);
    assert_int_equal(j.replace, 1);
    assert_string_equal(j.ocr, "force");
    cq_job_info_free(&j);
    CONF_EXPECT(cq_store_job_interrupted(s, ids[0], &err), CQ_OK);
    j = conf_job(s, ids[0]);
    assert_int_equal(j.state, CQ_JOB_QUEUED);
    assert_int_equal(j.done, 0);
    assert_int_equal(j.total, 10);
    assert_int_equal(j.attempts, 0);
    cq_job_info_free(&j);
    CONF_EXPECT(cq_store_job_interrupted(s, ids[0], &err), CQ_OK); /* never below zero */
    j = conf_job(s, ids[0]);
    assert_int_equal(j.attempts, 0);
    cq_job_info_free(&j);

    /* ends: ready with its document (the upload forgotten) */
    CONF_EXPECT(cq_store_job_begin_attempt(s, ids[0], NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_update(s, ids[0], CQ_JOB_READY, 10, 10, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_finish(s, ids[0], doc, &err), CQ_OK);
    j = conf_job(s, ids[0]);
    assert_int_equal(j.state, CQ_JOB_READY);
    assert_int_equal(j.doc_id, doc);
    assert_int_equal(j.attempts, 1);
    assert_null(j.upload_path);
    assert_string_equal(j.filename, "合同 (1).pdf");
    cq_job_info_free(&j);

    /* failed: without a code, with a status's code, with a reader's finer reason; in the caller's transaction */
    CONF_EXPECT(cq_store_job_set_upload(s, ids[1], "b.pdf", "uploads/job-2.pdf", 7, 0, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_update(s, ids[1], CQ_JOB_FAILED, 0, 0, "not a PDF", &err), CQ_OK);
    j = conf_job(s, ids[1]);
    assert_string_equal(j.error, "not a PDF");
    assert_string_equal(j.error_code, "");
    cq_job_info_free(&j);
    cq_err why = {0};
    cq_err_set(&why, CQ_ERR_FORMAT, "named .pdf but not a PDF");
    CONF_EXPECT(cq_store_job_fail(s, ids[1], 0, 0, &why, &err), CQ_OK);
    j = conf_job(s, ids[1]);
    assert_int_equal(j.state, CQ_JOB_FAILED);
    assert_string_equal(j.error, "named .pdf but not a PDF");
    assert_string_equal(j.error_code, "bad_format");
    cq_job_info_free(&j);
    cq_err_set_reason(&why, CQ_ERR_TOO_LARGE, "too_large", "the document has 9000 pages (at most 2000)");
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_fail(s, ids[1], 2, 9000, &why, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_finish(s, ids[1], 0, &err), CQ_OK);
    CONF_EXPECT(cq_store_commit(s, &err), CQ_OK);
    j = conf_job(s, ids[1]);
    assert_string_equal(j.error_code, "too_large");
    assert_int_equal(j.done, 2);
    assert_int_equal(j.total, 9000);
    assert_null(j.upload_path);
    assert_int_equal(j.doc_id, 0);
    cq_job_info_free(&j);
    cq_err plain = {0};
    cq_err_set(&plain, CQ_ERR_INTERNAL, "x");
    plain.code = 0; /* a failure without a status: internal */
    CONF_EXPECT(cq_store_job_fail(s, ids[3], 0, 0, &plain, &err), CQ_OK);
    j = conf_job(s, ids[3]);
    assert_string_equal(j.error_code, cq_status_name(CQ_ERR_INTERNAL));
    cq_job_info_free(&j);

    /* cancelled before it started; a failed write rolled back with the caller's transaction */
    CONF_EXPECT(cq_store_job_update(s, ids[2], CQ_JOB_CANCELLED, 0, 0, "cancelled before it started", &err), CQ_OK);
    CONF_EXPECT(cq_store_job_finish(s, ids[2], 0, &err), CQ_OK);
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_update(s, ids[2], CQ_JOB_DUPLICATE, 1, 1, NULL, &err), CQ_OK);
    cq_store_rollback(s);
    j = conf_job(s, ids[2]);
    assert_int_equal(j.state, CQ_JOB_CANCELLED);
    assert_string_equal(j.error, "cancelled before it started");
    cq_job_info_free(&j);

    /* a job that is not there: get says so; writes change nothing and are no error (its KB went meanwhile) */
    CONF_EXPECT(cq_store_job_get(s, 999, &j, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_job_update(s, 999, CQ_JOB_READY, 1, 1, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_finish(s, 999, 0, &err), CQ_OK);

    /* lists: newest first, per KB or all, limited; unfinished oldest first */
    cq_job_info *list;
    size_t n;
    CONF_EXPECT(cq_store_job_list(s, kb, 100, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_int_equal(list[0].id, ids[2]);
    assert_int_equal(list[2].id, ids[0]);
    assert_int_equal(list[0].state, CQ_JOB_CANCELLED);
    cq_job_info_free_array(list, n);
    CONF_EXPECT(cq_store_job_list(s, 0, 2, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(list[0].id, ids[3]);
    assert_string_equal(list[0].kb, "other");
    cq_job_info_free_array(list, n);
    int64_t later, later2;
    CONF_EXPECT(cq_store_job_create(s, kb, 0, &later, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_create(s, kb, doc, &later2, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_update(s, later2, CQ_JOB_RUNNING, 1, 2, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_unfinished(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(list[0].id, later);
    assert_int_equal(list[1].id, later2);
    assert_int_equal(list[1].doc_id, doc);
    cq_job_info_free_array(list, n);
    CONF_EXPECT(cq_store_job_count_queued(s, &queued, &err), CQ_OK);
    assert_int_equal(queued, 1);

    /* deleting the document deletes its jobs; deleting a KB, the KB's */
    CONF_EXPECT(cq_store_doc_delete(s, doc, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_get(s, ids[0], &j, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_job_get(s, later2, &j, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_kb_delete(s, kb2, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_get(s, ids[3], &j, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_job_list(s, 0, 100, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 3); /* ids[1], ids[2], later */
    cq_job_info_free_array(list, n);
    /* ids are never reused */
    int64_t again;
    CONF_EXPECT(cq_store_job_create(s, kb, 0, &again, &err), CQ_OK);
    assert_true(again > later2);
}

/* A row the store cannot read is an error, not a guess. */
static void conf_jobs_unknown_state(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, id;
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_create(s, kb, 0, &id, &err), CQ_OK);
    conf_sql(s, "UPDATE jobs SET state = 'paused'");
    cq_job_info j;
    CONF_EXPECT(cq_store_job_get(s, id, &j, &err), CQ_ERR_DB);
    assert_non_null(strstr(err.msg, "'paused'"));
    cq_job_info *list = NULL;
    size_t n = 5;
    CONF_EXPECT(cq_store_job_list(s, 0, 10, &list, &n, &err), CQ_ERR_DB);
    assert_null(list);
    assert_int_equal(n, 0);
}

static void conf_jobs_page_list(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, doc;
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_create(s, kb, "d", "d.pdf", "pdf", CONF_SHA_A, 5, &doc, &err), CQ_OK);
    cq_store_page p2 = {2, 595.5f, 842, 10, 0.25, "scanned, no text layer"}, p1 = {1, 612, 792, 1500, 1, ""};
    CONF_EXPECT(cq_store_page_add(s, doc, &p2, &err), CQ_OK);
    CONF_EXPECT(cq_store_page_add(s, doc, &p1, &err), CQ_OK);
    cq_page_info *p;
    size_t n;
    CONF_EXPECT(cq_store_page_list(s, doc, &p, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(p[0].page_no, 1);
    assert_int_equal(p[0].n_chars, 1500);
    assert_true(p[0].width == 612.0f && p[0].height == 792.0f && p[0].quality == 1.0);
    assert_string_equal(p[0].quality_reason, "");
    assert_int_equal(p[1].page_no, 2);
    assert_true(p[1].width == 595.5f && p[1].quality == 0.25);
    assert_string_equal(p[1].quality_reason, "scanned, no text layer");
    free(p);
    CONF_EXPECT(cq_store_page_list(s, doc + 1, &p, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    free(p);
}

/* ---- the claim ------------------------------------------------------------------------------------------------ */

/* n queued jobs with their uploads recorded, in KB kb. */
static void conf_make_jobs(cq_store *s, int64_t kb, int n, int64_t *ids) {
    cq_err err = {0};
    for (int i = 0; i < n; i++) {
        char path[64];
        int64_t id;
        CONF_EXPECT(cq_store_job_create(s, kb, 0, &id, &err), CQ_OK);
        snprintf(path, sizeof path, "uploads/job-%lld.md", (long long)id);
        CONF_EXPECT(cq_store_job_set_upload(s, id, "x.md", path, 1, 0, "auto", &err), CQ_OK);
        if (ids) ids[i] = id;
    }
}

/* The store's queue is the node's own: nothing is claimed, nothing fenced, an upload stays where it is. True then
 * (the caller skips the shared queue's checks). */
static bool conf_jobs_local_queue(cq_store *s) {
    if (cq_store_job_queue_shared(s)) return false;
    cq_err err = {0};
    int64_t kb, ids[1], id = -1;
    cq_job_lease lease = {.job_id = 1, .owner = "n", .attempt = 1};
    int taken = -1, cancel = -1;
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    conf_make_jobs(s, kb, 1, ids);
    CONF_EXPECT(cq_store_job_claim(s, "node-a", 30, &id, &lease, &taken, &err), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "node's own"));
    assert_int_equal(id, 0);
    assert_int_equal(taken, 0);
    CONF_EXPECT(cq_store_job_renew(s, &lease, 30, &cancel, &err), CQ_ERR_UNSUPPORTED);
    assert_int_equal(cancel, 0);
    CONF_EXPECT(cq_store_job_release(s, &err), CQ_ERR_UNSUPPORTED);
    CONF_EXPECT(cq_store_job_request_cancel(s, ids[0], &err), CQ_ERR_UNSUPPORTED);
    CONF_EXPECT(cq_store_job_set_upload_sha256(s, ids[0], CONF_SHA_A, &err), CQ_ERR_UNSUPPORTED);
    CONF_EXPECT(cq_store_job_fetch_upload(s, &lease, "/nonexistent/x", &err), CQ_ERR_UNSUPPORTED);
    CONF_EXPECT(cq_store_job_share_upload(s, ids[0], CONF_SHA_A, "/nonexistent/x", &err), CQ_OK); /* nothing to do */
    cq_job_info j = conf_job(s, ids[0]);
    assert_int_equal(j.state, CQ_JOB_QUEUED);
    cq_job_info_free(&j);
    return true;
}

#define CONF_RACE_JOBS 60

typedef struct {
    cq_store *s;
    char owner[CQ_JOB_OWNER_BYTES];
    int64_t got[CONF_RACE_JOBS];
    int n;
    cq_status rc;
    char msg[600];
} conf_node;

/* A node's worker: claims until nothing is left, running each job to its end. */
static void *conf_node_main(void *arg) {
    conf_node *w = arg;
    cq_err err = {0};
    for (;;) {
        int64_t id = 0;
        cq_job_lease lease;
        w->rc = cq_store_job_claim(w->s, w->owner, 30, &id, &lease, NULL, &err);
        if (w->rc || !id) break;
        if (w->n < CONF_RACE_JOBS) w->got[w->n] = id;
        w->n++;
        if ((w->rc = cq_store_job_update(w->s, id, CQ_JOB_READY, 1, 1, NULL, &err))) break;
        if ((w->rc = cq_store_job_finish(w->s, id, 0, &err))) break;
        if ((w->rc = cq_store_job_release(w->s, &err))) break;
    }
    if (w->rc) snprintf(w->msg, sizeof w->msg, "%s", err.msg);
    return NULL;
}

/* Two nodes claiming from one queue at once never get the same job, and neither waits for the other. */
static void conf_jobs_claim_race(void **state) {
    cq_store *s = conf_store(state);
    if (conf_jobs_local_queue(s)) skip();
    cq_err err = {0};
    int64_t kb, unclaimable, queued = 0;
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    conf_make_jobs(s, kb, CONF_RACE_JOBS, NULL);
    CONF_EXPECT(cq_store_job_count_queued(s, &queued, &err), CQ_OK);
    assert_int_equal(queued, CONF_RACE_JOBS);
    CONF_EXPECT(cq_store_job_create(s, kb, 0, &unclaimable, &err), CQ_OK); /* upload not recorded yet */
    conf_node nodes[2] = {{.s = conf_reopen(state), .owner = "node-1"}, {.s = conf_reopen(state), .owner = "node-2"}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, conf_node_main, &nodes[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        if (nodes[i].rc) fail_msg("%s: %s", nodes[i].owner, nodes[i].msg);
        cq_store_close(nodes[i].s);
    }
    /* every job once, by exactly one node, at its first attempt */
    assert_int_equal(nodes[0].n + nodes[1].n, CONF_RACE_JOBS);
    for (int a = 0; a < nodes[0].n; a++)
        for (int b = 0; b < nodes[1].n; b++) assert_true(nodes[0].got[a] != nodes[1].got[b]);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM jobs WHERE state = 'ready' AND attempt = 1 AND attempts = 1"),
                     CONF_RACE_JOBS);
    assert_int_equal(conf_count(s, "SELECT count(DISTINCT lease_owner) FROM jobs WHERE state = 'ready'"),
                     (nodes[0].n > 0) + (nodes[1].n > 0));
    cq_job_info j = conf_job(s, unclaimable);
    assert_int_equal(j.state, CQ_JOB_QUEUED);
    cq_job_info_free(&j);
    CONF_EXPECT(cq_store_job_count_queued(s, &queued, &err), CQ_OK);
    assert_int_equal(queued, 1);
}

/* A lease runs out and another node takes the job over with attempt + 1; the old owner's writes are refused after,
 * and so are those of a connection that holds no lease while a node holds the job. */
static void conf_jobs_lease_takeover(void **state) {
    cq_store *s = conf_store(state); /* an HTTP request's connection: holds no lease */
    if (conf_jobs_local_queue(s)) skip();
    cq_err err = {0};
    int64_t kb, ids[2], id = 0, none = 0;
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    conf_make_jobs(s, kb, 2, ids);
    cq_store *a = conf_reopen(state), *b = conf_reopen(state);
    cq_job_lease la, lb;
    int taken = -1, cancel = -1;
    CONF_EXPECT(cq_store_job_claim(a, "node-a", 30, &id, &la, &taken, &err), CQ_OK);
    assert_int_equal(id, ids[0]);
    assert_int_equal(la.attempt, 1);
    assert_int_equal(taken, 0);
    assert_string_equal(la.upload_sha256, "");
    CONF_EXPECT(cq_store_job_update(a, id, CQ_JOB_RUNNING, 1, 4, NULL, &err), CQ_OK);
    /* while a's lease lasts, b gets the other job, not a's; nobody else writes a's job */
    CONF_EXPECT(cq_store_job_claim(b, "node-b", 30, &none, &lb, NULL, &err), CQ_OK);
    assert_int_equal(none, ids[1]);
    CONF_EXPECT(cq_store_job_interrupted(b, none, &err), CQ_OK); /* b stops: queued again for anyone */
    CONF_EXPECT(cq_store_job_renew(b, &lb, 30, NULL, &err), CQ_ERR_CANCELLED); /* requeued: no longer b's */
    CONF_EXPECT(cq_store_job_release(b, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_update(s, id, CQ_JOB_CANCELLED, 0, 0, NULL, &err), CQ_ERR_CANCELLED);
    assert_non_null(strstr(err.msg, "node-a"));
    CONF_EXPECT(cq_store_job_update(b, id, CQ_JOB_READY, 4, 4, NULL, &err), CQ_ERR_CANCELLED);
    CONF_EXPECT(cq_store_job_renew(a, &la, 30, &cancel, &err), CQ_OK);
    assert_int_equal(cancel, 0);

    /* a's node hangs: its lease runs out (made to, rather than waited for) and b takes the job over */
    conf_sql(s, "UPDATE jobs SET lease_until = now() - interval '1 second' WHERE lease_owner = 'node-a'");
    CONF_EXPECT(cq_store_job_claim(b, "node-b", 30, &none, &lb, &taken, &err), CQ_OK);
    assert_int_equal(none, id);
    assert_int_equal(lb.attempt, 2);
    assert_int_equal(taken, 1);
    cq_job_info j = conf_job(s, id);
    assert_int_equal(j.state, CQ_JOB_RUNNING);
    assert_int_equal(j.done, 0);
    assert_int_equal(j.attempts, 2);
    cq_job_info_free(&j);

    /* a wakes up: every write it tries is refused, the lease cannot be renewed, nothing of the row changes */
    CONF_EXPECT(cq_store_job_update(a, id, CQ_JOB_READY, 4, 4, NULL, &err), CQ_ERR_CANCELLED);
    assert_non_null(strstr(err.msg, "lease lost"));
    CONF_EXPECT(cq_store_job_finish(a, id, 0, &err), CQ_ERR_CANCELLED);
    cq_err why = {0};
    cq_err_set(&why, CQ_ERR_IO, "x");
    CONF_EXPECT(cq_store_job_fail(a, id, 0, 0, &why, &err), CQ_ERR_CANCELLED);
    CONF_EXPECT(cq_store_job_interrupted(a, id, &err), CQ_ERR_CANCELLED);
    CONF_EXPECT(cq_store_job_begin_attempt(a, id, NULL, &err), CQ_ERR_CANCELLED);
    CONF_EXPECT(cq_store_job_set_upload(a, id, "y.md", "uploads/y.md", 1, 0, "off", &err), CQ_ERR_CANCELLED);
    CONF_EXPECT(cq_store_job_renew(a, &la, 30, NULL, &err), CQ_ERR_CANCELLED);
    /* writes in a's transaction fail before its commit: the document it was saving goes with the rollback */
    CONF_EXPECT(cq_store_begin(a, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_update(a, id, CQ_JOB_READY, 4, 4, NULL, &err), CQ_ERR_CANCELLED);
    cq_store_rollback(a);
    /* ... and a's token names another job than the one it may touch: the other job is out of reach too */
    CONF_EXPECT(cq_store_job_update(a, ids[1], CQ_JOB_READY, 1, 1, NULL, &err), CQ_ERR_CANCELLED);
    j = conf_job(s, id);
    assert_int_equal(j.state, CQ_JOB_RUNNING);
    assert_int_equal(j.done, 0);
    assert_string_equal(j.filename, "x.md");
    cq_job_info_free(&j);

    /* b works and ends it; a, even after b's end, still cannot write */
    CONF_EXPECT(cq_store_job_renew(b, &lb, 30, &cancel, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_update(b, id, CQ_JOB_READY, 4, 4, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_finish(b, id, 0, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_release(b, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_update(a, id, CQ_JOB_FAILED, 0, 0, "late", &err), CQ_ERR_CANCELLED);
    CONF_EXPECT(cq_store_job_update(s, id, CQ_JOB_FAILED, 0, 0, "late", &err), CQ_ERR_CANCELLED);
    /* ended: nothing to renew, but still b's (its end stands), never a's */
    CONF_EXPECT(cq_store_job_renew(b, &lb, 30, NULL, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM jobs WHERE lease_until IS NOT NULL AND state = 'ready'"), 0);
    CONF_EXPECT(cq_store_job_renew(a, &la, 30, NULL, &err), CQ_ERR_CANCELLED);
    j = conf_job(s, id);
    assert_int_equal(j.state, CQ_JOB_READY);
    assert_int_equal(j.done, 4);
    cq_job_info_free(&j);
    /* an ended job is never claimed again; a released connection claims the queued one */
    CONF_EXPECT(cq_store_job_release(a, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_claim(a, "node-a", 30, &none, &la, NULL, &err), CQ_OK);
    assert_int_equal(none, ids[1]);
    assert_int_equal(la.attempt, 2); /* b's interrupted claim was attempt 1 */
    CONF_EXPECT(cq_store_job_claim(b, "node-b", 30, &none, &lb, NULL, &err), CQ_OK);
    assert_int_equal(none, 0);
    cq_store_close(a);
    cq_store_close(b);
}

/* Another connection renews with the token; a cancel asked anywhere reaches the worker at its next renewal; bad
 * arguments are refused with a reason. */
static void conf_jobs_cancel_request_and_renew(void **state) {
    cq_store *s = conf_store(state);
    if (conf_jobs_local_queue(s)) skip();
    cq_err err = {0};
    int64_t kb, ids[1], id = 0, none;
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    conf_make_jobs(s, kb, 1, ids);
    cq_store *a = conf_reopen(state), *renewer = conf_reopen(state);
    cq_job_lease la;
    CONF_EXPECT(cq_store_job_claim(a, "node-a", 2, &id, &la, NULL, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM jobs WHERE lease_until > now() + interval '1 second' AND "
                                   "lease_until <= now() + interval '2 seconds'"),
                     1);
    int cancel = -1;
    CONF_EXPECT(cq_store_job_renew(renewer, &la, 60, &cancel, &err), CQ_OK);
    assert_int_equal(cancel, 0);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM jobs WHERE lease_until > now() + interval '50 seconds'"), 1);
    CONF_EXPECT(cq_store_job_request_cancel(s, id, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_request_cancel(s, id + 100, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_job_renew(renewer, &la, 60, &cancel, &err), CQ_OK);
    assert_int_equal(cancel, 1);
    CONF_EXPECT(cq_store_job_update(a, id, CQ_JOB_CANCELLED, 0, 0, "cancelled on request", &err), CQ_OK);
    CONF_EXPECT(cq_store_job_finish(a, id, 0, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_claim(s, "", 30, &none, NULL, NULL, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_job_claim(s, "x", 0, &none, NULL, NULL, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_job_set_upload_sha256(s, id, "not-a-hash", &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_job_claim(s, "x", 30, &none, NULL, NULL, &err), CQ_ERR_INTERNAL);
    cq_store_rollback(s);
    char owner[CQ_JOB_OWNER_BYTES], other[CQ_JOB_OWNER_BYTES];
    cq_job_owner_name(owner);
    usleep(2000);
    cq_job_owner_name(other);
    assert_true(strlen(owner) > 5 && strcmp(owner, other) != 0);
    cq_store_close(a);
    cq_store_close(renewer);
}

/* An upload shared by content comes back on a node that lacks the file; a lease without one says so. */
static void conf_jobs_share_upload(void **state) {
    cq_store *s = conf_store(state);
    if (conf_jobs_local_queue(s)) skip();
    cq_err err = {0};
    int64_t kb, ids[1], id = 0;
    char in[128], out[128];
    snprintf(in, sizeof in, "/tmp/cq_conf_jobs_in_%d", (int)getpid());
    snprintf(out, sizeof out, "/tmp/cq_conf_jobs_out_%d", (int)getpid());
    FILE *fp = fopen(in, "wb");
    assert_non_null(fp);
    fputs("# 第一条\n劳动合同\n", fp);
    fclose(fp);
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    conf_make_jobs(s, kb, 1, ids);
    CONF_EXPECT(cq_store_job_share_upload(s, ids[0], CONF_SHA_B, in, &err), CQ_OK);
    cq_job_lease lease;
    CONF_EXPECT(cq_store_job_claim(s, "node-a", 30, &id, &lease, NULL, &err), CQ_OK);
    assert_int_equal(id, ids[0]);
    assert_string_equal(lease.upload_sha256, CONF_SHA_B);
    CONF_EXPECT(cq_store_job_fetch_upload(s, &lease, out, &err), CQ_OK);
    fp = fopen(out, "rb");
    assert_non_null(fp);
    char back[64] = "";
    assert_int_equal(fread(back, 1, sizeof back - 1, fp), strlen("# 第一条\n劳动合同\n"));
    fclose(fp);
    assert_string_equal(back, "# 第一条\n劳动合同\n");
    lease.upload_sha256[0] = 0;
    CONF_EXPECT(cq_store_job_fetch_upload(s, &lease, out, &err), CQ_ERR_IO);
    CONF_EXPECT(cq_store_job_release(s, &err), CQ_OK);
    unlink(in);
    unlink(out);
}

#endif
