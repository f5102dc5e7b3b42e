/* index/vectors_pg and index/vector_feed: clause vectors and document states on PostgreSQL, the change feed its
 * triggers write, and the per-node FAISS caches it keeps current. Two "nodes" are two feeds (two connections, two
 * data folders) over one database: vectors added through one are found by the other's search within a second,
 * deleted ones are gone within a second, a node started later (or restarted, or cut off) catches up. The
 * propagation times are printed (docs/SCALE.md). Run through tests/pg/cluster.sh (CLAUSEQA_PG). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>

#include "db/db.h"
#include "pg_handle.h"
#include "search/vector_feed.h"
#include "search/vectors.h"
#include "store/vectors.h"
#include "pg_fixture.h"

#define DIM 16
#define MODEL "m1"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef struct {
    char info[512];
    char dir_a[64], dir_b[64], dir_c[64];
    cq_pg *pg; /* the SQL of the checks */
    cq_store *s; /* the writer: node A's requests */
    int64_t kb;
    unsigned seed;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || pg_fresh_database("w", f->info, sizeof f->info)) return -1;
    cq_err err = {0};
    if (cq_pg_open(f->info, &f->pg, &err) || cq_store_open_uri(f->info, &f->s, &err) ||
        cq_store_kb_ensure(f->s, "kb", &f->kb, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    snprintf(f->dir_a, sizeof f->dir_a, "/tmp/cq-vfa-XXXXXX");
    snprintf(f->dir_b, sizeof f->dir_b, "/tmp/cq-vfb-XXXXXX");
    snprintf(f->dir_c, sizeof f->dir_c, "/tmp/cq-vfc-XXXXXX");
    if (!mkdtemp(f->dir_a) || !mkdtemp(f->dir_b) || !mkdtemp(f->dir_c)) return -1;
    f->seed = 12345;
    *state = f;
    return 0;
}

static void remove_dir(const char *dir) {
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", dir);
}

static int teardown(void **state) {
    fixture *f = *state;
    pg_store_close();
    cq_store_close(f->s);
    cq_pg_close(f->pg);
    remove_dir(f->dir_a);
    remove_dir(f->dir_b);
    remove_dir(f->dir_c);
    free(f);
    return 0;
}

/* A document of n clauses in KB kb (ids into ids) and n random unit vectors for them (into x). */
static int64_t add_doc(fixture *f, int64_t kb, size_t n, int64_t *ids, float *x) {
    static int k;
    cq_err err = {0};
    char name[32], sha[32];
    snprintf(name, sizeof name, "doc%d", ++k);
    snprintf(sha, sizeof sha, "sha%d", k);
    int64_t doc = 0;
    assert_int_equal(cq_store_doc_create(pg_store(f->pg), kb, name, name, "md", sha, 1, &doc, &err), CQ_OK);
    cq_store_clause c[64];
    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++) c[i] = (cq_store_clause){.ord = (int)i, .kind = 1, .text = "clause text"};
    assert_int_equal(cq_pg_doc_add_clauses(f->pg, doc, name, c, n, ids, &err), CQ_OK);
    for (size_t i = 0; i < n; i++) {
        double norm = 0;
        for (int d = 0; d < DIM; d++) {
            float v = (float)rand_r(&f->seed) / RAND_MAX - 0.5f;
            x[i * DIM + d] = v;
            norm += (double)v * v;
        }
        for (int d = 0; d < DIM; d++) x[i * DIM + d] /= (float)sqrt(norm);
    }
    return doc;
}

/* Does v's nearest vector to q have id `id`? */
static bool nearest_is(cq_vectors *v, const float *q, int64_t id) {
    int64_t ids[1];
    float scores[1];
    size_t n = 0;
    cq_err err = {0};
    assert_int_equal(cq_vectors_search(v, q, 1, ids, scores, &n, &err), CQ_OK);
    return n == 1 && ids[0] == id;
}

/* Waits (up to limit_ms) until v's nearest to q is id (want) or is not (!want); the milliseconds it took, or -1. */
static double wait_for(cq_vectors *v, const float *q, int64_t id, bool want, double limit_ms) {
    double t0 = now_ms();
    for (;;) {
        double t = now_ms() - t0;
        if (nearest_is(v, q, id) == want) return t;
        if (t > limit_ms) return -1;
        usleep(1000);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the store and its feed rows -------------------------------------------------------------------------- */

static void test_vectors_store_and_feed(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    int64_t ids[4];
    float x[4 * DIM];
    int64_t doc = add_doc(f, f->kb, 4, ids, x);
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, ids, x, 4, NULL, &err), CQ_OK);
    size_t n = 0;
    assert_int_equal(cq_store_vectors_count(f->s, f->kb, MODEL, &n, &err), CQ_OK);
    assert_int_equal(n, 4);
    /* one change row for the statement's document, with its clause ids */
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM vector_changes WHERE op = 'add'"), 1);
    cq_vector_change *c = NULL;
    assert_int_equal(cq_store_vector_changes(f->s, 0, 100, &c, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(c[0].doc_id, doc);
    assert_int_equal(c[0].kb_id, f->kb);
    assert_false(c[0].deleted);
    assert_int_equal(c[0].n_clause_ids, 4);
    assert_memory_equal(c[0].clause_ids, ids, sizeof ids);
    cq_vector_changes_free(c, n);
    /* read back: bit for bit, in id order, with the feed position they include */
    int64_t *all_ids = NULL, seq = 0;
    float *all = NULL;
    assert_int_equal(cq_store_vectors_read_all(f->s, f->kb, MODEL, DIM, &all_ids, &all, &n, &seq, &err), CQ_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(all_ids, ids, sizeof ids);
    assert_memory_equal(all, x, sizeof x);
    assert_int_equal(seq, 1);
    free(all_ids);
    free(all);
    assert_int_equal(cq_store_vectors_read_all(f->s, f->kb, MODEL, DIM + 1, &all_ids, &all, &n, &seq, &err),
                     CQ_ERR_FORMAT);
    /* a replacement is a delete and an add */
    x[0] = -x[0];
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, ids, x, 2, NULL, &err), CQ_OK);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM vector_changes"), 3);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM vector_changes WHERE op = 'delete' AND "
                                     "cardinality(clause_ids) = 2"), 1);
    int64_t got_ids[4];
    float got[4 * DIM];
    assert_int_equal(cq_store_vectors_get(f->s, f->kb, MODEL, DIM, ids, 4, got_ids, got, &n, &err), CQ_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(got, x, sizeof x);
    /* a clause of no KB of this name, a clause of another KB: refused, nothing stored */
    int64_t other_kb = 0, other_ids[1];
    float other_x[DIM];
    assert_int_equal(cq_store_kb_ensure(pg_store(f->pg), "other", &other_kb, &err), CQ_OK);
    add_doc(f, other_kb, 1, other_ids, other_x);
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, other_ids, other_x, 1, NULL, &err), CQ_ERR_NOT_FOUND);
    int64_t missing = 999999;
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, &missing, other_x, 1, NULL, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM clause_vectors"), 4);
    /* a rolled-back transaction leaves neither rows nor changes */
    assert_int_equal(cq_db_exec(cq_store_conn(f->s), "BEGIN", NULL), CQ_OK);
    assert_int_equal(cq_store_vectors_store(f->s, other_kb, MODEL, DIM, other_ids, other_x, 1, NULL, &err), CQ_OK);
    assert_int_equal(cq_db_exec(cq_store_conn(f->s), "ROLLBACK", NULL), CQ_OK);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM vector_changes"), 3);
    /* the hits a search may serve */
    int64_t hits[3] = {ids[2], 999999, ids[0]};
    float scores[3] = {0.9f, 0.8f, 0.7f};
    n = 3;
    assert_int_equal(cq_store_vectors_keep_stored(f->s, f->kb, MODEL, hits, scores, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(hits[1], ids[0]);
    assert_true(scores[1] == 0.7f);
    n = 3;
    hits[1] = ids[1];
    assert_int_equal(cq_store_vectors_keep_stored(f->s, f->kb, "m2", hits, scores, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    /* a document vector (its calls, a KB's model and a document's clause ids are store/vectors.c's on both stores:
     * tests/store/vectors_bodies.h) */
    const float dv[4] = {1, 0, 0, 0};
    assert_int_equal(cq_store_doc_vector_put(f->s, f->kb, doc, MODEL, "head", 4, dv, &err), CQ_OK);
    /* deleting the document: its vectors and document vector go by cascade, and one change says so */
    int64_t kb_of = 0;
    assert_int_equal(cq_store_doc_kb(f->s, doc, &kb_of, &err), CQ_OK);
    assert_int_equal(kb_of, f->kb);
    assert_int_equal(cq_store_doc_delete(pg_store(f->pg), doc, &err), CQ_OK);
    assert_int_equal(cq_store_doc_kb(f->s, doc, &kb_of, &err), CQ_OK);
    assert_int_equal(kb_of, -1);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM clause_vectors"), 0);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM doc_vectors"), 0);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM vector_changes"), 4);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM vector_changes WHERE op = 'delete' AND "
                                     "cardinality(clause_ids) = 4"), 1);
    /* deleting a KB: one change per document that had vectors */
    assert_int_equal(cq_store_vectors_store(f->s, other_kb, MODEL, DIM, other_ids, other_x, 1, NULL, &err), CQ_OK);
    assert_int_equal(cq_store_kb_delete(pg_store(f->pg), other_kb, &err), CQ_OK);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM vector_changes"), 6);
    /* pruning moves the horizon past whole transactions */
    int64_t pruned_to = 0, last = 0, pruned = 0;
    assert_int_equal(cq_store_vector_feed_bounds(f->s, &pruned_to, &last, &err), CQ_OK);
    assert_int_equal(pruned_to, 0);
    assert_true(last >= 6);
    assert_int_equal(cq_store_vector_changes_prune(f->s, 3600, &pruned, &err), CQ_OK);
    assert_int_equal(pruned, 0);
    pg_exec(f->pg, "UPDATE vector_changes SET created_at = created_at - 7200 WHERE seq <= 4");
    assert_int_equal(cq_store_vector_changes_prune(f->s, 3600, &pruned, &err), CQ_OK);
    assert_int_equal(pruned, 3); /* seq 4 went with the rolled-back transaction */
    assert_int_equal(cq_store_vector_feed_bounds(f->s, &pruned_to, &last, &err), CQ_OK);
    assert_int_equal(pruned_to, 3);
    assert_int_equal(pg_count(f->pg, "SELECT min(seq) FROM vector_changes"), 5);
}

/* ---- two nodes --------------------------------------------------------------------------------------------- */

#define N_DOCS 20
#define CLAUSES 5

static void summary(const char *what, double *ms, size_t n) {
    qsort(ms, n, sizeof *ms, cmp_double);
    printf("propagation, %s: %zu documents, p50 %.1f ms, p95 %.1f ms, max %.1f ms\n", what, n, ms[n / 2],
           ms[(size_t)(0.95 * (double)(n - 1) + 0.5)], ms[n - 1]);
}

static void test_vectors_two_nodes(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    /* a long poll: what arrives within a second arrives by NOTIFY */
    const cq_vector_feed_options slow_poll = {.poll_ms = 60000};
    cq_vector_feed *a = NULL, *b = NULL;
    assert_int_equal(cq_vector_feed_start(f->s, f->dir_a, &slow_poll, &a, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_start(f->s, f->dir_b, &slow_poll, &b, &err), CQ_OK);
    cq_vectors *va = NULL, *vb = NULL;
    assert_int_equal(cq_vector_feed_kb(a, f->kb, MODEL, DIM, &va, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_kb(b, f->kb, MODEL, DIM, &vb, &err), CQ_OK);
    cq_vectors *again = NULL;
    assert_int_equal(cq_vector_feed_kb(b, f->kb, MODEL, DIM, &again, &err), CQ_OK);
    assert_ptr_equal(again, vb);
    assert_int_equal(cq_vector_feed_kb(b, f->kb, "m2", DIM, &again, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_vectors_count(vb), 0);

    static int64_t ids[N_DOCS][CLAUSES], docs[N_DOCS];
    static float x[N_DOCS][CLAUSES * DIM];
    double added_ms[N_DOCS], deleted_ms[N_DOCS];
    for (int i = 0; i < N_DOCS; i++) {
        docs[i] = add_doc(f, f->kb, CLAUSES, ids[i], x[i]);
        assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, ids[i], x[i], CLAUSES, NULL, &err), CQ_OK);
        added_ms[i] = wait_for(vb, x[i] + 2 * DIM, ids[i][2], true, 1000);
        assert_true(added_ms[i] >= 0); /* searchable on node B within a second */
        assert_true(wait_for(va, x[i] + 2 * DIM, ids[i][2], true, 1000) >= 0);
    }
    assert_int_equal(cq_vectors_count(vb), N_DOCS * CLAUSES);
    for (int i = 0; i < N_DOCS; i++) {
        assert_int_equal(cq_store_doc_delete(pg_store(f->pg), docs[i], &err), CQ_OK);
        deleted_ms[i] = wait_for(vb, x[i] + 2 * DIM, ids[i][2], false, 1000);
        assert_true(deleted_ms[i] >= 0); /* gone from node B within a second */
    }
    assert_int_equal(cq_vectors_count(vb), 0);
    double t0 = now_ms(); /* node A's feed took the same changes; it may be a moment behind B's */
    while (cq_vectors_count(va) && now_ms() - t0 < 1000) usleep(1000);
    assert_int_equal(cq_vectors_count(va), 0);
    /* one feed, two KBs: each index takes its own KB's changes */
    int64_t kb2 = 0, ids2[CLAUSES];
    float x2[CLAUSES * DIM];
    cq_vectors *vb2 = NULL;
    assert_int_equal(cq_store_kb_ensure(pg_store(f->pg), "second", &kb2, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_kb(b, kb2, MODEL, DIM, &vb2, &err), CQ_OK);
    add_doc(f, kb2, CLAUSES, ids2, x2);
    assert_int_equal(cq_store_vectors_store(f->s, kb2, MODEL, DIM, ids2, x2, CLAUSES, NULL, &err), CQ_OK);
    assert_true(wait_for(vb2, x2, ids2[0], true, 1000) >= 0);
    assert_int_equal(cq_vectors_count(vb2), CLAUSES);
    assert_int_equal(cq_vectors_count(vb), 0);
    cq_vector_feed_stats st;
    cq_vector_feed_stats_get(b, &st);
    assert_true(st.n_notifications >= 2 * N_DOCS);
    assert_int_equal(st.n_applied, 2 * N_DOCS + 1);
    assert_int_equal(st.n_rebuilt, 2);
    summary("added (store commit to node B's search)", added_ms, N_DOCS);
    summary("deleted (document delete commit to gone from node B's search)", deleted_ms, N_DOCS);
    cq_vector_feed_stop(a);
    cq_vector_feed_stop(b);
}

/* A node started after the changes rebuilds; a node restarted loads its file and catches up; a node whose file is
 * older than the feed's horizon rebuilds; a node cut off from the server reconnects and catches up. */
static void test_vectors_catch_up(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    const cq_vector_feed_options fast_poll = {.poll_ms = 100};
    int64_t ids[3][CLAUSES];
    float x[3][CLAUSES * DIM];
    int64_t doc0 = add_doc(f, f->kb, CLAUSES, ids[0], x[0]);
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, ids[0], x[0], CLAUSES, NULL, &err), CQ_OK);

    /* node B, started after the change: rebuilt from clause_vectors, then current */
    cq_vector_feed *b = NULL;
    cq_vectors *vb = NULL;
    assert_int_equal(cq_vector_feed_start(f->s, f->dir_b, &fast_poll, &b, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_kb(b, f->kb, MODEL, DIM, &vb, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(vb), CLAUSES);
    assert_true(nearest_is(vb, x[0] + DIM, ids[0][1]));
    cq_vector_feed_stop(b); /* saves kb<ID>.faiss and its seq */

    /* changes while B is away; B comes back from its file and catches up */
    add_doc(f, f->kb, CLAUSES, ids[1], x[1]);
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, ids[1], x[1], CLAUSES, NULL, &err), CQ_OK);
    assert_int_equal(cq_store_doc_delete(pg_store(f->pg), doc0, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_start(f->s, f->dir_b, &fast_poll, &b, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_kb(b, f->kb, MODEL, DIM, &vb, &err), CQ_OK);
    cq_vector_feed_stats st;
    cq_vector_feed_stats_get(b, &st);
    assert_int_equal(st.n_loaded, 1);
    assert_int_equal(st.n_rebuilt, 0);
    assert_int_equal(cq_vectors_count(vb), CLAUSES);
    assert_true(nearest_is(vb, x[1] + 3 * DIM, ids[1][3]));
    assert_false(nearest_is(vb, x[0] + DIM, ids[0][1]));

    /* cut off: the server ends B's feed connection; a change made meanwhile arrives once it is back */
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d)", st.backend_pid);
    pg_exec(f->pg, sql);
    add_doc(f, f->kb, CLAUSES, ids[2], x[2]);
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, ids[2], x[2], CLAUSES, NULL, &err), CQ_OK);
    assert_true(wait_for(vb, x[2], ids[2][0], true, 3000) >= 0);
    cq_vector_feed_stats_get(b, &st);
    assert_true(st.n_reconnects >= 1);
    assert_int_equal(cq_vectors_count(vb), 2 * CLAUSES);
    cq_vector_feed_stop(b);

    /* the changes after B's file pruned away: B rebuilds, and has the same vectors */
    pg_exec(f->pg, "UPDATE vector_changes SET created_at = 0");
    int64_t pruned = 0;
    assert_int_equal(cq_store_vector_changes_prune(f->s, 3600, &pruned, &err), CQ_OK);
    assert_true(pruned >= 4);
    int64_t extra_ids[CLAUSES];
    float extra[CLAUSES * DIM];
    add_doc(f, f->kb, CLAUSES, extra_ids, extra);
    assert_int_equal(cq_db_exec(cq_store_conn(f->s), "BEGIN", NULL), CQ_OK);
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, extra_ids, extra, CLAUSES, NULL, &err), CQ_OK);
    assert_int_equal(cq_db_exec(cq_store_conn(f->s), "COMMIT", NULL), CQ_OK);
    pg_exec(f->pg, "UPDATE vector_changes SET created_at = 0");
    assert_int_equal(cq_store_vector_changes_prune(f->s, 3600, &pruned, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_start(f->s, f->dir_b, &fast_poll, &b, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_kb(b, f->kb, MODEL, DIM, &vb, &err), CQ_OK);
    cq_vector_feed_stats_get(b, &st);
    assert_int_equal(st.n_rebuilt, 1);
    assert_int_equal(cq_vectors_count(vb), 3 * CLAUSES);
    assert_true(nearest_is(vb, extra + 4 * DIM, extra_ids[4]));

    /* a third node, C, from an empty folder: the same index */
    cq_vector_feed *c = NULL;
    cq_vectors *vc = NULL;
    assert_int_equal(cq_vector_feed_start(f->s, f->dir_c, &fast_poll, &c, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_kb(c, f->kb, MODEL, DIM, &vc, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(vc), 3 * CLAUSES);
    for (int i = 1; i < 3; i++)
        for (int k = 0; k < CLAUSES; k++) assert_true(nearest_is(vc, x[i] + k * DIM, ids[i][k]));
    cq_vector_feed_stop(c);
    cq_vector_feed_stop(b);
}

/* Writers of vectors are serialised from their insert to their commit, so seq order is commit order: a second
 * writer waits for the first's commit (without that, it could commit a higher seq first, a node's feed would move
 * past it, and the first writer's change, committed later with a lower seq, would never reach that node). */
typedef struct {
    const char *info;
    int64_t kb, *ids;
    float *x;
    cq_status rc;
} writer_args;

static void *second_writer(void *arg) {
    writer_args *w = arg;
    cq_store *s = NULL;
    cq_err err = {0};
    w->rc = cq_store_open_uri(w->info, &s, &err);
    if (!w->rc) w->rc = cq_store_vectors_store(s, w->kb, MODEL, DIM, w->ids, w->x, CLAUSES, NULL, &err);
    cq_store_close(s);
    return NULL;
}

static void test_vectors_writers_in_commit_order(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    const cq_vector_feed_options slow_poll = {.poll_ms = 60000};
    cq_vector_feed *b = NULL;
    cq_vectors *vb = NULL;
    assert_int_equal(cq_vector_feed_start(f->s, f->dir_b, &slow_poll, &b, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_kb(b, f->kb, MODEL, DIM, &vb, &err), CQ_OK);
    int64_t ids1[CLAUSES], ids2[CLAUSES];
    float x1[CLAUSES * DIM], x2[CLAUSES * DIM];
    add_doc(f, f->kb, CLAUSES, ids1, x1);
    add_doc(f, f->kb, CLAUSES, ids2, x2);
    assert_int_equal(cq_db_exec(cq_store_conn(f->s), "BEGIN", NULL), CQ_OK);
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, ids1, x1, CLAUSES, NULL, &err), CQ_OK); /* seq s1 */
    writer_args w = {.info = f->info, .kb = f->kb, .ids = ids2, .x = x2};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, second_writer, &w), 0);
    usleep(300 * 1000);
    assert_false(nearest_is(vb, x2, ids2[0])); /* the second writer waits */
    assert_int_equal(cq_db_exec(cq_store_conn(f->s), "COMMIT", NULL), CQ_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, CQ_OK);
    assert_true(wait_for(vb, x1, ids1[0], true, 1000) >= 0);
    assert_true(wait_for(vb, x2, ids2[0], true, 1000) >= 0);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM vector_changes WHERE op = 'add'"), 2);
    cq_vector_feed_stop(b);
}

/* A flat index that the feed grows past CQ_VECTORS_IVF_MIN becomes an inverted file (rebuilt from the store inside
 * the catch-up), and stays current after. */
static void test_vectors_feed_grows_ivf(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    const size_t n = CQ_VECTORS_IVF_MIN;
    cq_vector_feed *b = NULL;
    cq_vectors *vb = NULL;
    const cq_vector_feed_options slow_poll = {.poll_ms = 60000};
    assert_int_equal(cq_vector_feed_start(f->s, f->dir_b, &slow_poll, &b, &err), CQ_OK);
    assert_int_equal(cq_vector_feed_kb(b, f->kb, MODEL, DIM, &vb, &err), CQ_OK);
    assert_false(cq_vectors_is_ivf(vb));
    int64_t doc = 0;
    assert_int_equal(cq_store_doc_create(pg_store(f->pg), f->kb, "big", "big", "md", "big", 1, &doc, &err), CQ_OK);
    cq_store_clause *c = calloc(n, sizeof *c);
    int64_t *ids = calloc(n, sizeof *ids);
    float *x = calloc(n * DIM, sizeof *x);
    assert_non_null(c);
    assert_non_null(ids);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) c[i] = (cq_store_clause){.ord = (int)i, .kind = 1, .text = "t"};
    assert_int_equal(cq_pg_doc_add_clauses(f->pg, doc, "big", c, n, ids, &err), CQ_OK);
    for (size_t i = 0; i < n * DIM; i++) x[i] = (float)rand_r(&f->seed) / RAND_MAX - 0.5f;
    for (size_t i = 0; i < n; i++) {
        double norm = 0;
        for (int d = 0; d < DIM; d++) norm += (double)x[i * DIM + d] * x[i * DIM + d];
        for (int d = 0; d < DIM; d++) x[i * DIM + d] /= (float)sqrt(norm);
    }
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, ids, x, n, NULL, &err), CQ_OK);
    double t0 = now_ms();
    while (cq_vectors_count(vb) < n && now_ms() - t0 < 20000) usleep(5000);
    assert_int_equal(cq_vectors_count(vb), n);
    assert_true(cq_vectors_is_ivf(vb));
    printf("feed: %zu vectors arrived as an IVF index in %.0f ms\n", n, now_ms() - t0);
    int64_t more_ids[3];
    float more[3 * DIM];
    add_doc(f, f->kb, 3, more_ids, more);
    assert_int_equal(cq_store_vectors_store(f->s, f->kb, MODEL, DIM, more_ids, more, 3, NULL, &err), CQ_OK);
    assert_true(wait_for(vb, more + DIM, more_ids[1], true, 1000) >= 0);
    assert_int_equal(cq_vectors_count(vb), n + 3);
    cq_vector_feed_stop(b);
    free(c);
    free(ids);
    free(x);
}

int main(void) {
    PG_FIXTURE_REQUIRE_SERVER();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_vectors_store_and_feed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vectors_two_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vectors_catch_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vectors_writers_in_commit_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vectors_feed_grows_ivf, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
