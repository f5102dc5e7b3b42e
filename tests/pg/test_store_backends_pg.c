/* The store's conformance suite (issue 28): the same test bodies run against a SQLite file and a PostgreSQL database
 * (a fresh one per test in the throwaway cluster of tests/pg/cluster.sh, CLAUSEQA_PG), both opened by
 * cq_store_open_uri — store/store.h's KBs, documents, pages, clauses (held on PostgreSQL until the document's
 * finish: their ids must be right from the start), transactions, deletes; every store/ module (API keys,
 * users, sessions and the audit trail, conversations, feedback, jobs and their claim, the router's rows: tests/store/ bodies, which the SQLite unit tests
 * run too); the db/ driver table itself; where a store is (`--store` values, the password kept out of messages); and
 * a PostgreSQL server that goes away and comes back (db/db_pg.c reconnects; meanwhile CQ_ERR_BUSY "store
 * unreachable"). */
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

#include "app/originals.h"
#include "store/originals.h"
#include "core/clock.h"
#include "core/fileio.h"
#include "core/sha256.h"
#include "search/compare.h"
#include "store/jobs.h"
#include "store/store.h"
#include "pg_handle.h"
#include "db/db_internal.h"

static const char *conninfo;

typedef struct {
    cq_store *s;
    char where[600]; /* what cq_store_open_uri was given */
    char sqlite_path[128];
} backend;

static int open_sqlite(void **state) {
    static int n;
    backend *b = calloc(1, sizeof *b);
    if (!b) return -1;
    snprintf(b->sqlite_path, sizeof b->sqlite_path, "/tmp/cq_test_backends_%d_%d.db", (int)getpid(), ++n);
    unlink(b->sqlite_path);
    snprintf(b->where, sizeof b->where, "sqlite:%s", b->sqlite_path);
    cq_err err = {0};
    if (cq_store_open_uri(b->where, &b->s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        free(b);
        return -1;
    }
    *state = b;
    return 0;
}

static int open_pg(void **state) {
    static int n;
    char name[64], sql[128];
    snprintf(name, sizeof name, "b%d_%d", (int)getpid(), ++n);
    PGconn *admin = PQconnectdb(conninfo);
    if (PQstatus(admin) != CONNECTION_OK) return -1;
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    PGresult *r = PQexec(admin, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    PQfinish(admin);
    if (!ok) return -1;
    backend *b = calloc(1, sizeof *b);
    if (!b) return -1;
    snprintf(b->where, sizeof b->where, "%s dbname=%s", conninfo, name);
    cq_err err = {0};
    if (cq_store_open_uri(b->where, &b->s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        free(b);
        return -1;
    }
    *state = b;
    return 0;
}

static int close_backend(void **state) {
    backend *b = *state;
    cq_store_close(b->s);
    if (b->sqlite_path[0]) {
        char p[160];
        unlink(b->sqlite_path);
        snprintf(p, sizeof p, "%s-wal", b->sqlite_path);
        unlink(p);
        snprintf(p, sizeof p, "%s-shm", b->sqlite_path);
        unlink(p);
    }
    free(b);
    return 0;
}

static cq_store *conf_store(void **state) { return ((backend *)*state)->s; }
static cq_store *conf_reopen(void **state) {
    cq_store *again = NULL;
    cq_err err = {0};
    if (cq_store_open_uri(((backend *)*state)->where, &again, &err)) fail_msg("%s", err.msg);
    return again;
}

#include "tests/store/conversations_bodies.h"
#include "tests/store/documents_bodies.h"
#include "tests/store/keyword_bodies.h"
#include "tests/store/versions_bodies.h"
#include "tests/store/jobs_bodies.h"
#include "tests/store/feedback_bodies.h"
#include "tests/store/keys_bodies.h"
#include "tests/store/router_bodies.h"
#include "tests/store/users_bodies.h"
#include "tests/store/audit_bodies.h"
#include "tests/store/groups_bodies.h"
#include "tests/store/vectors_bodies.h"

/* A count by SQL, on whichever backend (the statement is plain SQL both understand). */
static int64_t count(cq_store *s, const char *sql) { return conf_count(s, sql); }

/* ---- the bodies, run on both ------------------------------------------------------------------------------ */

/* A rolled-back document leaves nothing, on either backend: no row, no clause, no page; ids are not reused. */
static void test_rollback(void **state) {
    cq_store *s = ((backend *)*state)->s;
    cq_err err = {0};
    int64_t kb, doc, id, ids[3];
    assert_int_equal(cq_store_kb_ensure(s, "t", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_begin(s, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, "gone", "gone.md", "md", "h1", 1, &doc, &err), CQ_OK);
    cq_store_clause c = {.ord = 0, .kind = 1, .label = "第一条", .label_key = "1", .path = "p", .text = "正文"};
    assert_int_equal(cq_store_clause_add(s, kb, doc, "gone", &c, &id, &err), CQ_OK);
    cq_store_rollback(s);
    assert_int_equal(count(s, "SELECT count(*) FROM documents"), 0);
    assert_int_equal(count(s, "SELECT count(*) FROM clauses"), 0);
    /* Clauses committed without a finish are written at the commit. */
    assert_int_equal(cq_store_begin(s, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, "kept", "kept.md", "md", "h2", 1, &doc, &err), CQ_OK);
    assert_int_equal(cq_store_clause_add(s, kb, doc, "kept", &c, &ids[0], &err), CQ_OK);
    assert_int_equal(cq_store_commit(s, &err), CQ_OK);
    cq_clause_row row;
    assert_int_equal(cq_store_clause_get(s, ids[0], &row, &err), CQ_OK);
    assert_string_equal(row.text, "正文");
    cq_clause_row_free(&row);
    /* A document deleted in its own transaction before its finish: its clauses go with it. */
    assert_int_equal(cq_store_begin(s, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, "half", "half.md", "md", "h3", 1, &doc, &err), CQ_OK);
    assert_int_equal(cq_store_clause_add(s, kb, doc, "half", &c, &id, &err), CQ_OK);
    assert_int_equal(cq_store_doc_delete(s, doc, &err), CQ_OK);
    assert_int_equal(cq_store_commit(s, &err), CQ_OK);
    assert_int_equal(count(s, "SELECT count(*) FROM clauses"), 1);
    assert_int_equal(cq_store_clause_get(s, id, &row, &err), CQ_ERR_NOT_FOUND);
    /* Jobs through the store's functions, on either backend (store/jobs.h; more in tests/store/jobs_bodies.h). */
    int64_t job = 0;
    assert_int_equal(cq_store_job_create(s, kb, 0, &job, &err), CQ_OK);
    assert_true(job > 0);
    assert_int_equal(cq_store_job_update(s, job, CQ_JOB_RUNNING, 1, 3, NULL, &err), CQ_OK);
    assert_int_equal(count(s, "SELECT count(*) FROM jobs WHERE state = 'running' AND done = 1 AND total = 3"), 1);
}


/* Originals (app/originals.h): kept as a file, and on PostgreSQL in the store too (in 1 MiB parts), so that a node
 * without the file fetches it; removed from both when no document uses the content. */
static void test_originals(void **state) {
    cq_store *s = ((backend *)*state)->s;
    cq_err err = {0};
    char dir[128], path[1200], again[1200];
    snprintf(dir, sizeof dir, "/tmp/cq_test_originals_%d", (int)getpid());
    size_t len = 2 * CQ_STORE_ORIGINAL_PART_BYTES + 12345;
    unsigned char *data = malloc(len);
    assert_non_null(data);
    for (size_t i = 0; i < len; i++) data[i] = (unsigned char)(i * 7919 >> 3);
    char sha[65];
    cq_sha256_hex(data, len, sha);
    assert_int_equal(cq_original_keep(s, dir, sha, "pdf", data, len, path, sizeof path, &err), CQ_OK);
    assert_int_equal(cq_original_keep(s, dir, sha, "pdf", data, len, path, sizeof path, &err), CQ_OK); /* twice: once */
    assert_int_equal(cq_original_keep(s, dir, sha, "exe", data, len, path, sizeof path, &err), CQ_ERR_INVALID);
    if (cq_store_pg(s))
        assert_int_equal(count(s, "SELECT count(*) FROM originals"), 3);
    /* A node without the file. */
    assert_int_equal(cq_original_path(dir, sha, "pdf", path, sizeof path), true);
    assert_int_equal(unlink(path), 0);
    /* store/originals.h: files (SQLite, the store holds none) or blobs (PostgreSQL) */
    assert_int_equal(cq_store_originals_shared(s), cq_store_pg(s) != NULL);
    char none[1300];
    snprintf(none, sizeof none, "%s/none", dir);
    assert_int_equal(cq_store_original_get_file(s, "00", none, &err), CQ_ERR_NOT_FOUND);
    assert_int_not_equal(access(none, F_OK), 0);
    assert_int_equal(cq_store_original_delete(s, "00", &err), CQ_OK);
    cq_status rc = cq_original_local(s, dir, sha, "pdf", again, sizeof again, &err);
    if (!cq_store_pg(s)) {
        assert_int_equal(rc, CQ_ERR_NOT_FOUND);
    } else {
        assert_int_equal(rc, CQ_OK);
        assert_string_equal(again, path);
        char *back = NULL;
        size_t back_len = 0;
        assert_int_equal(cq_file_read(again, len + 1, &back, &back_len, &err), CQ_OK);
        assert_int_equal(back_len, len);
        assert_memory_equal(back, data, len);
        free(back);
        char fetched[1300];
        snprintf(fetched, sizeof fetched, "%s/fetched", dir);
        /* An empty file is an original too. */
        char empty_sha[65];
        cq_sha256_hex("", 0, empty_sha);
        assert_int_equal(cq_original_keep(s, dir, empty_sha, "txt", "", 0, path, sizeof path, &err), CQ_OK);
        assert_int_equal(cq_store_original_get_file(s, empty_sha, fetched, &err), CQ_OK);
        struct stat sb;
        assert_int_equal(stat(fetched, &sb), 0);
        assert_int_equal(sb.st_size, 0);
        unlink(fetched);
    }
    /* In use by a document: kept; unused: gone from the store and the folder. */
    int64_t kb, doc;
    assert_int_equal(cq_store_kb_ensure(s, "t", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, "a", "a.pdf", "pdf", sha, (int64_t)len, &doc, &err), CQ_OK);
    assert_int_equal(cq_original_keep(s, dir, sha, "pdf", data, len, path, sizeof path, &err), CQ_OK);
    cq_original_remove_unused(s, dir, sha, "pdf");
    assert_int_equal(access(path, R_OK), 0);
    assert_int_equal(cq_store_doc_delete(s, doc, &err), CQ_OK);
    cq_original_remove_unused(s, dir, sha, "pdf");
    assert_int_not_equal(access(path, R_OK), 0);
    if (cq_store_pg(s)) {
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM originals WHERE sha256 = '%s'", sha);
        assert_int_equal(count(s, sql), 0);
    }
    free(data);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Two versions of a law compared clause by clause (search/compare.h) read their clauses from either store. */
static void test_compare(void **state) {
    cq_store *s = ((backend *)*state)->s;
    cq_err err = {0};
    int64_t kb, ids_a[3], ids_b[3];
    assert_int_equal(cq_store_kb_ensure(s, "t", &kb, &err), CQ_OK);
    int64_t a = conf_doc_add(s, kb, "公司法(2013)", "h1", ids_a);
    int64_t b = conf_doc_add(s, kb, "公司法(2018)", "h2", ids_b);
    cq_comparison c;
    assert_int_equal(cq_compare_docs(s, a, b, &c, &err), CQ_OK);
    assert_int_equal(c.n_a, 2); /* the articles only: both have some */
    assert_int_equal(c.n_b, 2);
    assert_int_equal(c.a[0].clause_id, ids_a[1]);
    assert_string_equal(c.b[1].text, conf_law[2][3]);
    assert_int_equal(c.al.n_same, 2);
    assert_int_equal(c.al.n_changed + c.al.n_added + c.al.n_removed, 0);
    cq_comparison_free(&c);
}

/* ---- db/db.h itself, on both ---------------------------------------------------------------------------- */

/* The driver table: one statement text, ?N placeholders used twice and out of order, every value kind, NULLs,
 * changes, last id, RETURNING, unique violations as EXISTS, transactions, and bulk insert (COPY on PostgreSQL). */
static void test_db_driver(void **state) {
    cq_store *s = conf_store(state);
    cq_db *db = cq_store_conn(s);
    cq_err err = {0};
    bool pg = cq_db_kind_of(db) == CQ_DB_POSTGRESQL;
    assert_true(pg == (cq_store_pg(s) != NULL));
    assert_int_equal(cq_db_exec(db, pg ? "CREATE TABLE t(id bigserial PRIMARY KEY, n bigint, x double precision, "
                                         "s text UNIQUE, b bytea)"
                                       : "CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER, x REAL, s TEXT UNIQUE, b BLOB)",
                                &err),
                     CQ_OK);
    cq_db_stmt *st;
    assert_int_equal(cq_db_prepare(db, "INSERT INTO t(n, x, s, b) VALUES(?2, ?3, ?1, ?4) RETURNING id, n + ?2", &st, &err),
                     CQ_OK);
    const unsigned char blob[] = {0, 1, 2, 0xff, '\\', '\t'};
    cq_db_bind_text(st, 1, "第一条 'quoted' \"x\" ?1");
    cq_db_bind_int(st, 2, INT64_C(1) << 40);
    cq_db_bind_double(st, 3, 0.1);
    cq_db_bind_blob(st, 4, blob, sizeof blob);
    assert_int_equal(cq_db_step(st, "insert", &err), CQ_DB_ROW);
    int64_t id = cq_db_col_int(st, 0);
    assert_true(id > 0);
    assert_int_equal(cq_db_col_int(st, 1), INT64_C(1) << 41);
    assert_int_equal(cq_db_step(st, "insert", &err), CQ_DB_DONE);
    cq_db_finalize(st);
    assert_int_equal(cq_db_changes(db), 1);
    /* the same text again: a unique violation is EXISTS on both */
    assert_int_equal(cq_db_run(db, "insert", NULL, &err, "INSERT INTO t(s) VALUES(?1)", "t", "第一条 'quoted' \"x\" ?1"),
                     CQ_ERR_EXISTS);
    assert_int_equal(cq_db_run(db, "insert", NULL, &err, "INSERT INTO t(n, s) VALUES(?1, ?2)", "in", (int64_t)-7),
                     CQ_OK);
    assert_int_equal(cq_db_prepare(db, "SELECT id, n, x, s, b, s IS NULL FROM t WHERE id >= ?1 ORDER BY id", &st, &err), CQ_OK);
    cq_db_bind_int(st, 1, id);
    assert_int_equal(cq_db_step(st, "select", &err), CQ_DB_ROW);
    assert_int_equal(cq_db_col_int(st, 1), INT64_C(1) << 40);
    assert_true(cq_db_col_double(st, 2) == 0.1);
    assert_string_equal(cq_db_col_text(st, 3), "第一条 'quoted' \"x\" ?1");
    char *copy = cq_db_col_strdup(st, 3);
    assert_string_equal(copy, "第一条 'quoted' \"x\" ?1");
    free(copy);
    size_t n = 0;
    const void *b = cq_db_col_blob(st, 4, &n);
    assert_int_equal(n, sizeof blob);
    assert_memory_equal(b, blob, sizeof blob);
    assert_int_equal(cq_db_col_int(st, 5), 0);
    assert_int_equal(cq_db_step(st, "select", &err), CQ_DB_ROW);
    assert_true(cq_db_col_int(st, 0) > id);
    assert_int_equal(cq_db_col_int(st, 1), -7);
    assert_true(cq_db_col_null(st, 3));
    assert_null(cq_db_col_text(st, 3));
    assert_null(cq_db_col_strdup(st, 3));
    assert_int_equal(cq_db_col_int(st, 5), 1);
    assert_int_equal(cq_db_step(st, "select", &err), CQ_DB_DONE);
    /* reset and step again, the binding kept */
    cq_db_reset(st);
    assert_int_equal(cq_db_step(st, "select", &err), CQ_DB_ROW);
    cq_db_finalize(st);
    /* a bad statement: the server's message */
    assert_int_equal(cq_db_run(db, "broken", NULL, &err, "SELECT nope FROM t", NULL), CQ_ERR_DB);
    assert_non_null(strstr(err.msg, "nope"));

    /* transactions: own or the caller's */
    bool own = false;
    assert_false(cq_db_in_transaction(db));
    assert_int_equal(cq_db_begin_own(db, &own, &err), CQ_OK);
    assert_true(own);
    assert_true(cq_db_in_transaction(db));
    bool inner = true;
    assert_int_equal(cq_db_begin_own(db, &inner, &err), CQ_OK);
    assert_false(inner);
    assert_int_equal(cq_db_run(db, "insert", NULL, &err, "INSERT INTO t(s) VALUES(?1)", "t", "rolled back"), CQ_OK);
    assert_int_equal(cq_db_end(db, inner, CQ_OK, &err), CQ_OK); /* the caller's: still open */
    assert_true(cq_db_in_transaction(db));
    assert_int_equal(cq_db_end(db, own, CQ_ERR_INVALID, &err), CQ_ERR_INVALID);
    assert_false(cq_db_in_transaction(db));
    assert_int_equal(count(s, "SELECT count(*) FROM t WHERE s = 'rolled back'"), 0);

    /* bulk insert: text with COPY's special characters, NULLs, integers, blobs; inside a transaction */
    assert_int_equal(cq_db_begin(db, &err), CQ_OK);
    assert_int_equal(cq_db_bulk_begin(db, "t", "n, s, b", 3, &st, &err), CQ_OK);
    for (int i = 0; i < 2500; i++) {
        char text[64];
        snprintf(text, sizeof text, "row\t%d\\\n第%d条\r", i, i);
        cq_db_bind_int(st, 1, i);
        if (i % 7) cq_db_bind_text(st, 2, text);
        else cq_db_bind_null(st, 2);
        cq_db_bind_blob(st, 3, blob, (size_t)(i % 7));
        assert_int_equal(cq_db_bulk_row(st, &err), CQ_OK);
    }
    assert_int_equal(cq_db_bulk_end(st, CQ_OK, &err), CQ_OK);
    assert_int_equal(cq_db_commit(db, &err), CQ_OK);
    assert_int_equal(count(s, "SELECT count(*) FROM t WHERE n >= 0"), 2501);
    assert_int_equal(count(s, "SELECT count(*) FROM t WHERE n >= 0 AND s IS NULL"), 358);
    assert_int_equal(cq_db_prepare(db, "SELECT s, b FROM t WHERE n = 2498 AND s IS NOT NULL AND id > ?1", &st, &err), CQ_OK);
    cq_db_bind_int(st, 1, id);
    assert_int_equal(cq_db_step(st, "select", &err), CQ_DB_ROW);
    assert_string_equal(cq_db_col_text(st, 0), "row\t2498\\\n第2498条\r");
    b = cq_db_col_blob(st, 1, &n);
    assert_int_equal(n, 2498 % 7);
    assert_memory_equal(b, blob, n);
    cq_db_finalize(st);
    /* a bulk insert abandoned, its transaction rolled back, leaves nothing */
    assert_int_equal(cq_db_begin(db, &err), CQ_OK);
    assert_int_equal(cq_db_bulk_begin(db, "t", "n", 1, &st, &err), CQ_OK);
    cq_db_bind_int(st, 1, 123456);
    assert_int_equal(cq_db_bulk_row(st, &err), CQ_OK);
    assert_int_equal(cq_db_bulk_end(st, CQ_ERR_INVALID, &err), CQ_ERR_INVALID);
    cq_db_rollback(db);
    assert_int_equal(count(s, "SELECT count(*) FROM t WHERE n = 123456"), 0);
    /* the check of a healthy connection */
    assert_int_equal(cq_store_check(s, &err), CQ_OK);
}

/* ---- SQLite and PostgreSQL side by side ----------------------------------------------------------------- */

/* A SQLite store and a PostgreSQL store side by side, each operation run on both and the answers compared. */
typedef struct {
    void *sq_state, *pg_state;
    cq_store *sq, *pg;
    int64_t kb_s[2], kb_p[2];
} twin;

static void twin_open(twin *t) {
    memset(t, 0, sizeof *t);
    cq_err err = {0};
    assert_int_equal(open_sqlite(&t->sq_state), 0);
    assert_int_equal(open_pg(&t->pg_state), 0);
    t->sq = ((backend *)t->sq_state)->s;
    t->pg = ((backend *)t->pg_state)->s;
    const char *names[] = {"合同", "laws"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(cq_store_kb_ensure(t->sq, names[i], &t->kb_s[i], &err), CQ_OK);
        assert_int_equal(cq_store_kb_ensure(t->pg, names[i], &t->kb_p[i], &err), CQ_OK);
    }
}

static void twin_close(twin *t) {
    close_backend(&t->sq_state);
    close_backend(&t->pg_state);
}

/* The same statement on both stores' tables (times made equal, so that the order rests on the tie-breaks). */
static void twin_sql(twin *t, const char *sql) {
    conf_sql(t->sq, sql);
    conf_sql(t->pg, sql);
}

static void assert_same_conversation(const cq_conversation *a, const cq_conversation *b) {
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->owner_key_id, b->owner_key_id);
    assert_string_equal(a->kb, b->kb);
    assert_string_equal(a->title, b->title);
    assert_int_equal(a->n_turns, b->n_turns);
    assert_int_equal(a->updated_at, b->updated_at);
}

static void assert_same_list(twin *t, int64_t owner, int kb, size_t limit, size_t expect) {
    cq_err err = {0};
    cq_conversation *a, *b;
    size_t na, nb;
    assert_int_equal(cq_store_conversation_list(t->sq, owner, kb >= 0 ? t->kb_s[kb] : 0, limit, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_list(t->pg, owner, kb >= 0 ? t->kb_p[kb] : 0, limit, &b, &nb, &err), CQ_OK);
    assert_int_equal(na, expect);
    assert_int_equal(nb, expect);
    for (size_t i = 0; i < na; i++) assert_same_conversation(&a[i], &b[i]);
    cq_conversation_free_array(a, na);
    cq_conversation_free_array(b, nb);
}

static void assert_same_turns(twin *t, int64_t id, size_t last_n, size_t expect) {
    cq_err err = {0};
    cq_conversation_turn *a, *b;
    size_t na, nb;
    assert_int_equal(cq_store_conversation_turns(t->sq, id, last_n, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_turns(t->pg, id, last_n, &b, &nb, &err), CQ_OK);
    assert_int_equal(na, expect);
    assert_int_equal(nb, expect);
    for (size_t i = 0; i < na; i++) {
        assert_int_equal(a[i].id, b[i].id);
        assert_string_equal(a[i].question, b[i].question);
        assert_string_equal(a[i].reply, b[i].reply);
        assert_true(b[i].created_at > 0);
    }
    cq_conversation_turns_free(a, na);
    cq_conversation_turns_free(b, nb);
}

static void both_add_turn(twin *t, int64_t id, const char *q, const char *r, int replace) {
    cq_err err = {0};
    assert_int_equal(cq_store_conversation_add_turn(t->sq, id, q, r, replace, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(t->pg, id, q, r, replace, &err), CQ_OK);
}

static void test_conversations_as_sqlite(void **state) {
    (void)state;
    twin t;
    twin_open(&t);
    cq_err err = {0};
    /* conversations of owners 7 and 0 (open mode) in two KBs */
    struct {
        int64_t owner;
        int kb;
        const char *title;
    } convs[] = {{7, 0, "试用期多长？"}, {7, 1, "notice period"}, {0, 0, "open mode"}, {7, 0, "第三个"}};
    int64_t ids[4];
    for (int i = 0; i < 4; i++) {
        int64_t s_id, p_id;
        assert_int_equal(cq_store_conversation_create(t.sq, convs[i].owner, t.kb_s[convs[i].kb], convs[i].title, &s_id,
                                                      &err),
                         CQ_OK);
        assert_int_equal(cq_store_conversation_create(t.pg, convs[i].owner, t.kb_p[convs[i].kb], convs[i].title, &p_id,
                                                   &err),
                         CQ_OK);
        assert_int_equal(s_id, p_id);
        ids[i] = p_id;
    }
    both_add_turn(&t, ids[0], "试用期多长？", "{\"answer\":\"六个月\"}", 0);
    both_add_turn(&t, ids[0], "那工资呢？", "{\"answer\":\"80%\"}", 0);
    both_add_turn(&t, ids[0], "那工资呢？", "{\"answer\":\"不低于80%\",\"regenerated\":true}", 1);
    both_add_turn(&t, ids[1], "notice?", "{\"answer\":\"30 days\"}", 1); /* replacing with no turn yet: appends */
    both_add_turn(&t, ids[3], "q", "{}", 0);
    assert_same_turns(&t, ids[0], 0, 2);
    assert_same_turns(&t, ids[0], 1, 1);
    assert_same_turns(&t, ids[0], 5, 2);
    assert_same_turns(&t, ids[2], 0, 0);
    assert_same_turns(&t, 999, 0, 0);
    cq_conversation_turn *turns;
    size_t n;
    assert_int_equal(cq_store_conversation_turns(t.pg, ids[0], 1, &turns, &n, &err), CQ_OK);
    assert_string_equal(turns[0].reply, "{\"answer\":\"不低于80%\",\"regenerated\":true}");
    cq_conversation_turns_free(turns, n);

    /* the list: newest by its last turn; equal times by the newest turn, then the newest conversation */
    twin_sql(&t, "UPDATE conversations SET updated_at = 1000");
    assert_same_list(&t, -1, -1, 100, 4);
    assert_same_list(&t, 7, -1, 100, 3);
    assert_same_list(&t, 7, 0, 100, 2);
    assert_same_list(&t, 0, -1, 100, 1);
    assert_same_list(&t, -1, 1, 100, 1);
    assert_same_list(&t, -1, -1, 2, 2);
    assert_same_list(&t, 8, -1, 100, 0);
    twin_sql(&t, "UPDATE conversations SET updated_at = 2000 WHERE id = 3");
    assert_same_list(&t, -1, -1, 100, 4);
    cq_conversation c;
    assert_int_equal(cq_store_conversation_get(t.pg, ids[0], &c, &err), CQ_OK);
    assert_int_equal(c.n_turns, 2);
    assert_string_equal(c.kb, "合同");
    assert_int_equal(c.kb_id, t.kb_p[0]);
    assert_true(c.created_at > 0);
    cq_conversation_free(&c);

    /* rename, delete, bad titles, ones that are not there */
    assert_int_equal(cq_store_conversation_rename(t.pg, ids[1], "通知期", &err), CQ_OK);
    assert_int_equal(cq_store_conversation_rename(t.sq, ids[1], "通知期", &err), CQ_OK);
    assert_int_equal(cq_store_conversation_rename(t.pg, 999, "x", &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_conversation_rename(t.pg, ids[1], "", &err), CQ_ERR_INVALID);
    char long_title[CQ_CONVERSATION_TITLE_MAX_BYTES + 2];
    memset(long_title, 'x', sizeof long_title - 1);
    long_title[sizeof long_title - 1] = 0;
    assert_int_equal(cq_store_conversation_rename(t.pg, ids[1], long_title, &err), CQ_ERR_INVALID);
    int64_t none;
    assert_int_equal(cq_store_conversation_create(t.pg, 7, t.kb_p[0], NULL, &none, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_conversation_create(t.pg, 7, t.kb_p[0], long_title, &none, &err), CQ_ERR_INVALID);
    long_title[CQ_CONVERSATION_TITLE_MAX_BYTES] = 0; /* at the limit: allowed */
    assert_int_equal(cq_store_conversation_rename(t.pg, ids[1], long_title, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_rename(t.sq, ids[1], long_title, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(t.pg, 999, "q", "{}", 0, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_conversation_get(t.pg, 999, &c, &err), CQ_ERR_NOT_FOUND);
    assert_same_list(&t, -1, -1, 100, 4);
    assert_int_equal(cq_store_conversation_delete(t.sq, ids[0], &err), CQ_OK);
    assert_int_equal(cq_store_conversation_delete(t.pg, ids[0], &err), CQ_OK);
    assert_int_equal(cq_store_conversation_delete(t.pg, ids[0], &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(count(t.pg, "SELECT count(*) FROM conversation_turns WHERE conversation_id = 1"), 0);
    assert_same_list(&t, -1, -1, 100, 3);
    /* a KB's deletion takes its conversations and their turns */
    assert_int_equal(cq_store_kb_delete(t.sq, t.kb_s[0], &err), CQ_OK);
    assert_int_equal(cq_store_kb_delete(t.pg, t.kb_p[0], &err), CQ_OK);
    assert_same_list(&t, -1, -1, 100, 1);
    assert_int_equal(count(t.pg, "SELECT count(*) FROM conversation_turns"), 1);
    /* ids are never reused */
    int64_t again;
    assert_int_equal(cq_store_conversation_create(t.pg, 7, t.kb_p[1], "again", &again, &err), CQ_OK);
    assert_true(again > ids[3]);
    twin_close(&t);
}

/* The same keys in both stores list the same (names, prefixes aside: the secrets differ). */
static void test_keys_as_sqlite(void **state) {
    (void)state;
    cq_err err = {0};
    twin t;
    twin_open(&t);
    cq_store *sq = t.sq, *pg = t.pg;
    int64_t kb;
    assert_int_equal(cq_store_kb_create(sq, "劳动法", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(pg, "劳动法", &kb, &err), CQ_OK);
    struct {
        const char *name;
        cq_key_role role;
        const char *kb;
    } keys[] = {{"ops", CQ_ROLE_ADMIN, NULL}, {"", CQ_ROLE_READER, "劳动法"}, {"ed", CQ_ROLE_EDITOR, "*"}};
    char secret[CQ_KEY_SECRET_BYTES];
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(cq_store_key_create(sq, keys[i].name, keys[i].role, keys[i].kb, secret, NULL, &err), CQ_OK);
        assert_int_equal(cq_store_key_create(pg, keys[i].name, keys[i].role, keys[i].kb, secret, NULL, &err), CQ_OK);
    }
    assert_int_equal(cq_store_key_revoke(sq, 2, &err), CQ_OK);
    assert_int_equal(cq_store_key_revoke(pg, 2, &err), CQ_OK);
    cq_key_info *a, *b;
    size_t na, nb;
    assert_int_equal(cq_store_key_list(sq, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_store_key_list(pg, &b, &nb, &err), CQ_OK);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        assert_int_equal(a[i].id, b[i].id);
        assert_string_equal(a[i].name, b[i].name);
        assert_int_equal(a[i].role, b[i].role);
        assert_string_equal(a[i].kb, b[i].kb);
        assert_int_equal(a[i].revoked_at != 0, b[i].revoked_at != 0);
        assert_int_equal(a[i].last_used_at, b[i].last_used_at);
        assert_int_equal(strlen(a[i].prefix), strlen(b[i].prefix));
    }
    free(a);
    free(b);
    int64_t n_sq, n_pg;
    assert_int_equal(cq_store_key_count_active(sq, &n_sq, &err), CQ_OK);
    assert_int_equal(cq_store_key_count_active(pg, &n_pg, &err), CQ_OK);
    assert_int_equal(n_sq, 2);
    assert_int_equal(n_pg, 2);
    twin_close(&t);
}

/* ---- where a store is ------------------------------------------------------------------------------------ */

static void test_where(void **state) {
    (void)state;
    assert_int_equal(cq_db_where_kind("postgresql://u@h/db"), CQ_DB_POSTGRESQL);
    assert_int_equal(cq_db_where_kind("postgres://h"), CQ_DB_POSTGRESQL);
    assert_int_equal(cq_db_where_kind("host=/tmp port=5432 dbname=x"), CQ_DB_POSTGRESQL);
    assert_int_equal(cq_db_where_kind(" dbname = x"), CQ_DB_POSTGRESQL);
    assert_int_equal(cq_db_where_kind("sqlite:host=x.db"), CQ_DB_SQLITE);
    assert_int_equal(cq_db_where_kind("data/clauseqa.db"), CQ_DB_SQLITE);
    assert_int_equal(cq_db_where_kind("/var/lib/a=b.db"), CQ_DB_SQLITE);
    char out[256];
    const char *cases[][2] = {
        {"postgresql://ann:s3cret@db.example:5432/clauseqa", "postgresql://ann@db.example:5432/clauseqa"},
        {"postgresql://ann@db/clauseqa?sslmode=verify-full&password=x&connect_timeout=5",
         "postgresql://ann@db/clauseqa?sslmode=verify-full&connect_timeout=5"},
        {"postgres://db/clauseqa?password=x", "postgres://db/clauseqa"},
        {"postgresql://db/a@b", "postgresql://db/a@b"},
        {"host=db password=s3cret dbname=clauseqa", "host=db dbname=clauseqa"},
        {"host=db password = 'a b\\' c' dbname=x", "host=db dbname=x"},
        {"host=db dbname=x", "host=db dbname=x"},
        {"sqlite:/tmp/x.db", "sqlite:/tmp/x.db"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cq_db_where_redact(cases[i][0], out, sizeof out);
        assert_string_equal(out, cases[i][1]);
        assert_int_equal(cq_db_where_has_password(cases[i][0]), strcmp(cases[i][0], cases[i][1]) != 0);
    }
    /* A server that cannot be reached: the message names the store, without its password. */
    cq_store *s = NULL;
    cq_err err = {0};
    assert_int_equal(cq_store_open_uri("postgresql://ann:s3cret@127.0.0.1:1/x?connect_timeout=2", &s, &err), CQ_ERR_DB);
    assert_null(s);
    assert_non_null(strstr(err.msg, "postgresql://ann@127.0.0.1:1/x"));
    assert_null(strstr(err.msg, "s3cret"));
    assert_int_equal(cq_store_open_uri("", &s, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_open_uri("sqlite:/nonexistent-dir/x.db", &s, &err), CQ_ERR_DB);
}

/* ?N → $N, outside quoted strings and identifiers. */
static void test_placeholders(void **state) {
    (void)state;
    int max = -1;
    char *out = cq_db_rewrite_placeholders("SELECT ?1, '?2', \"a?3\", ?12 || 'it''s ?4' WHERE x = ?1 AND y ? 1", &max);
    assert_string_equal(out, "SELECT $1, '?2', \"a?3\", $12 || 'it''s ?4' WHERE x = $1 AND y ? 1");
    assert_int_equal(max, 12);
    free(out);
    out = cq_db_rewrite_placeholders("SELECT 1", &max);
    assert_string_equal(out, "SELECT 1");
    assert_int_equal(max, 0);
    free(out);
}

/* Both backends share one cluster and one migration path: opening a PostgreSQL store twice migrates once. */
static void test_reopen(void **state) {
    backend *b = *state;
    cq_store *again = NULL;
    cq_err err = {0};
    int64_t kb, kb2;
    assert_int_equal(cq_store_kb_ensure(b->s, "kept", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_open_uri(b->where, &again, &err), CQ_OK);
    assert_int_equal(cq_store_kb_find(again, "kept", &kb2, &err), CQ_OK);
    assert_int_equal(kb, kb2);
    if (cq_store_pg(again)) {
        int version = 0;
        assert_int_equal(cq_pg_schema_version(cq_store_pg(again), &version, &err), CQ_OK);
        assert_int_equal(version, CQ_PG_SCHEMA_VERSION);
    }
    cq_store_close(again);
}

/* ---- an outage (issue 29 item 1) ----------------------------------------------------------------------------- */

/* The PostgreSQL server killed with SIGKILL and started again (tests/pg/cluster.sh's CLAUSEQA_PG_CTL): meanwhile the
 * store says it is unreachable — CQ_ERR_BUSY, reason store_unreachable, a Retry-After — and never a key problem;
 * after the restart the same cq_store works again within the backoff (at most 5 s), its data all there. */
static void test_pg_outage(void **state) {
    const char *ctl = getenv("CLAUSEQA_PG_CTL");
    if (!ctl || !*ctl) skip();
    backend *b = *state;
    cq_store *s = b->s;
    cq_err err = {0};
    int64_t kb, again;
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k;
    /* cluster.sh runs the server with synchronous_commit off, which may lose the last commits to a crash: these
     * must be durable */
    conf_sql(s, "SET synchronous_commit = on");
    assert_int_equal(cq_store_kb_create(s, "kept", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_key_create(s, "r", CQ_ROLE_READER, "kept", secret, &k, &err), CQ_OK);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s kill9", ctl);
    assert_int_equal(system(cmd), 0);
    /* a use finds the connection dead (once its backend has noticed the postmaster's death and closed it); the next
     * ones back off */
    cq_status rc;
    double t0 = cq_clock_seconds();
    while ((rc = cq_store_check(s, &err)) == CQ_OK) {
        assert_true(cq_clock_seconds() - t0 < 5.0);
        usleep(20 * 1000);
    }
    assert_int_equal(rc, CQ_ERR_BUSY);
    assert_string_equal(cq_err_name(&err), "store_unreachable");
    assert_true(err.retry_after_s >= 1);
    assert_non_null(strstr(err.msg, "store unreachable"));
    memset(&err, 0, sizeof err);
    assert_int_equal(cq_store_key_check(s, secret, &k, &err), CQ_ERR_BUSY); /* not NOT_FOUND: the key is fine */
    assert_string_equal(cq_err_name(&err), "store_unreachable");
    /* a new connection cannot be made either */
    cq_store *fresh = NULL;
    assert_int_equal(cq_store_open_uri(b->where, &fresh, &err), CQ_ERR_DB);
    assert_null(fresh);

    snprintf(cmd, sizeof cmd, "%s start", ctl);
    assert_int_equal(system(cmd), 0);
    t0 = cq_clock_seconds();
    while (cq_store_check(s, &err) != CQ_OK) {
        assert_true(cq_clock_seconds() - t0 < 8.0);
        usleep(50 * 1000);
    }
    assert_int_equal(cq_store_kb_find(s, "kept", &again, &err), CQ_OK);
    assert_int_equal(again, kb);
    CONF_EXPECT(cq_store_key_check(s, secret, &k, &err), CQ_OK);
    assert_true(cq_key_allows(&k, CQ_ROLE_READER, "kept"));
    /* a store that was never told of the outage (dead connection, not yet used) recovers on its first check too */
    cq_store *other = NULL;
    assert_int_equal(cq_store_open_uri(b->where, &other, &err), CQ_OK);
    snprintf(cmd, sizeof cmd, "%s kill9 && %s start", ctl, ctl);
    assert_int_equal(system(cmd), 0);
    t0 = cq_clock_seconds();
    while (cq_store_check(other, &err) != CQ_OK) {
        assert_int_equal(err.code, CQ_ERR_BUSY);
        assert_true(cq_clock_seconds() - t0 < 8.0);
        usleep(50 * 1000);
    }
    int64_t n = 0;
    assert_int_equal(cq_store_key_count_active(other, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    cq_store_close(other);
}

#define BOTH(fn)                                                                                                    \
    cmocka_unit_test_setup_teardown(fn, open_sqlite, close_backend),                                                \
        cmocka_unit_test_setup_teardown(fn, open_pg, close_backend)

int main(void) {
    conninfo = getenv("CLAUSEQA_PG");
    if (!conninfo || !*conninfo) {
        fprintf(stderr, "SKIP: CLAUSEQA_PG is not set (run through tests/pg/cluster.sh)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        BOTH(conf_documents_kbs), BOTH(conf_documents_rows), BOTH(conf_documents_ensure_two_connections),
        BOTH(conf_documents_delete_rolled_back), BOTH(test_rollback), BOTH(test_reopen), BOTH(test_originals), BOTH(test_compare),
        BOTH(test_db_driver),
        BOTH(conf_keys_create_check_revoke), BOTH(conf_keys_create_validates), BOTH(conf_keys_bound_to_kb_id), BOTH(conf_keys_several_kbs),
        BOTH(conf_keys_last_use_once_a_minute), BOTH(conf_keys_auth_stays_required), BOTH(conf_keys_revoke_race),
        BOTH(conf_users_add_verify), BOTH(conf_users_sessions), BOTH(conf_users_conversations), BOTH(conf_audit_add_list), BOTH(conf_groups),
        BOTH(conf_conversations_turns), BOTH(conf_conversations_list_rename_delete),
        BOTH(conf_conversations_two_writers), BOTH(conf_vectors_rows), BOTH(conf_vectors_store_rows),
        BOTH(conf_vectors_doc_means), BOTH(conf_vectors_doc_vectors),
        cmocka_unit_test(conf_jobs_states), BOTH(conf_jobs_rows), BOTH(conf_jobs_unknown_state),
        BOTH(conf_jobs_page_list), BOTH(conf_clause_search), BOTH(conf_keyword_bm25), BOTH(conf_versions_groups), BOTH(conf_versions_repeal_and_corrections),
        BOTH(conf_versions_from_clauses), BOTH(conf_jobs_claim_race), BOTH(conf_jobs_lease_takeover),
        BOTH(conf_jobs_cancel_request_and_renew), BOTH(conf_jobs_share_upload), BOTH(conf_router_rows),
        BOTH(conf_feedback_rate), BOTH(conf_feedback_rated_export), BOTH(conf_quality_days),
        BOTH(conf_conversations_search),
        cmocka_unit_test(test_keys_as_sqlite), cmocka_unit_test(test_conversations_as_sqlite),
        cmocka_unit_test(test_where), cmocka_unit_test(test_placeholders),
        cmocka_unit_test_setup_teardown(test_pg_outage, open_pg, close_backend), /* last: it stops the server */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
