/* index/store: schema, KBs, documents, delete. The router and retrieval have their own tests (test_index_router,
 * test_index_retrieve). */
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
#include <sqlite3.h>

#include "store/conversations.h"
#include "store/fts_cjk.h"
#include "store/jobs.h"
#include "store/store.h"
#include "store/schema.h"
#include "test_store_util.h"

/* No store: the test makes its own database at test_db_path. */
static int setup_empty(void **state) {
    snprintf(test_db_path, sizeof test_db_path, "/tmp/cq_test_store_%d.db", (int)getpid());
    unlink(test_db_path);
    *state = NULL;
    return 0;
}

static const char *const company_law[][4] = {
    {NULL, NULL, "", "中华人民共和国公司法"},
    {"第一条", "1", "第一章 总则 > 第一条", "第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。"},
    {"第十二条", "12", "第一章 总则 > 第十二条",
     "第十二条 公司的经营范围由公司章程规定，并依法登记。\n公司可以修改公司章程，改变经营范围，但是应当办理变更登记。"},
    {"第二十条之一", "20-1", "第二章 有限责任公司 > 第二十条之一", "第二十条之一 股东会会议由股东按照出资比例行使表决权。"},
};
static const char *const labour_law[][4] = {
    {"第四十四条", "44", "第四章 工作时间和休息休假 > 第四十四条",
     "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：安排劳动者延长工作时间的，"
     "支付不低于工资的百分之一百五十的工资报酬。"},
    {"第三条", "3", "第一章 总则 > 第三条", "第三条 劳动者享有平等就业和选择职业的权利。"},
};

static void test_kb(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t a, b;
    assert_int_equal(cq_store_kb_create(s, "laws", &a, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "laws", &b, &err), CQ_ERR_EXISTS);
    assert_int_equal(cq_store_kb_ensure(s, "laws", &b, &err), CQ_OK);
    assert_int_equal(a, b);
    assert_int_equal(cq_store_kb_create(s, "../etc", &b, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_kb_create(s, "", &b, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_kb_create(s, "法规库-2024", &b, &err), CQ_OK);
    assert_int_equal(cq_store_kb_find(s, "nope", &b, &err), CQ_ERR_NOT_FOUND);
    /* By id, with its counts. */
    cq_kb_info info;
    assert_int_equal(cq_store_kb_get(s, a, &info, &err), CQ_OK);
    assert_string_equal(info.name, "laws");
    assert_int_equal(info.id, a);
    assert_int_equal(info.n_documents, 0);
    assert_true(info.created_at > 0);
    assert_int_equal(cq_store_kb_get(s, a + b + 100, &info, &err), CQ_ERR_NOT_FOUND);
    cq_kb_info *list;
    size_t n;
    assert_int_equal(cq_store_kb_list(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    free(list);
}

static void test_doc_delete(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_ensure(s, "t", &kb, &err), CQ_OK);
    test_add_doc(s, kb, "公司法(2013-12-28)", "中华人民共和国公司法", "h1", company_law, 4);
    test_add_doc(s, kb, "公司法(2018-10-26)", "中华人民共和国公司法", "h2", company_law, 4);
    int64_t labour = test_add_doc(s, kb, "劳动法(2018-12-29)", "中华人民共和国劳动法", "h3", labour_law, 2);

    /* Delete: rows, FTS entries and jobs all go. */
    int64_t job;
    assert_int_equal(cq_store_job_create(s, kb, labour, &job, &err), CQ_OK);
    assert_int_equal(cq_store_doc_delete(s, labour, &err), CQ_OK);
    assert_int_equal(test_count(s, "SELECT count(*) FROM clauses WHERE doc_id NOT IN (SELECT id FROM documents)"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM jobs"), 0);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM fts_kb%lld", (long long)kb);
    assert_int_equal(test_count(s, sql), test_count(s, "SELECT count(*) FROM clauses"));
    /* The originals' contents in use: any document of any KB, in any state. */
    bool in_use = false;
    assert_int_equal(cq_store_content_in_use(s, "h1", &in_use, &err), CQ_OK);
    assert_true(in_use);
    assert_int_equal(cq_store_content_in_use(s, "h3", &in_use, &err), CQ_OK); /* deleted above */
    assert_false(in_use);
    int64_t other, failed;
    assert_int_equal(cq_store_kb_ensure(s, "other", &other, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, other, "x", "x.pdf", "pdf", "h9", 10, &failed, &err), CQ_OK);
    assert_int_equal(cq_store_doc_finish(s, failed, CQ_DOC_FAILED, "not a PDF", NULL, 0, 0, 0, "", &err), CQ_OK);
    assert_int_equal(cq_store_content_in_use(s, "h9", &in_use, &err), CQ_OK);
    assert_true(in_use);
    cq_kb_info info;
    assert_int_equal(cq_store_kb_get(s, kb, &info, &err), CQ_OK);
    assert_int_equal(info.n_documents, 2);
    assert_int_equal(info.n_clauses, 8);
    /* Deleting the KB removes everything of it. */
    assert_int_equal(cq_store_kb_delete(s, kb, &err), CQ_OK);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM documents WHERE kb_id = %lld", (long long)kb);
    assert_int_equal(test_count(s, sql), 0);
    assert_int_equal(cq_store_content_in_use(s, "h1", &in_use, &err), CQ_OK);
    assert_false(in_use);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'fts_kb%lld%%'", (long long)kb);
    assert_int_equal(test_count(s, sql), 0);
}

static void test_schema_reopen(void **state) {
    (void)state;
    /* Opening an existing database runs no migration twice and keeps data. */
    cq_store *s2;
    cq_err err = {0};
    assert_int_equal(cq_store_open(test_db_path, &s2, &err), CQ_OK);
    assert_int_equal(test_count(s2, "PRAGMA user_version"), CQ_STORE_SCHEMA_VERSION);
    cq_store_close(s2);
    cq_store *bad;
    assert_int_equal(cq_store_open("/nonexistent-dir/x.db", &bad, &err), CQ_ERR_DB);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.db"));
}

/* Ids are never used twice: an id a client kept (a clause in a citation, a job it polls) names what it named or
 * nothing, never another KB's row. */
/* store/schema.c: one list, each dialect's steps counted apart; the versions the headers promise are the lists'. */
static void test_schema_list(void **state) {
    (void)state;
    assert_int_equal(cq_store_schema_target(CQ_DB_SQLITE), CQ_STORE_SCHEMA_VERSION);
    assert_int_equal(cq_store_schema_target(CQ_DB_POSTGRESQL), CQ_STORE_PG_SCHEMA_VERSION);
}

static void test_ids_never_reused(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb_a, kb_b, kb_c, job1, job2;
    assert_int_equal(cq_store_kb_create(s, "a", &kb_a, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "b", &kb_b, &err), CQ_OK);
    int64_t doc1 = test_add_doc(s, kb_a, "公司法", "中华人民共和国公司法", "h1", company_law, 4);
    int64_t last_clause = test_count(s, "SELECT max(id) FROM clauses");
    assert_int_equal(cq_store_job_create(s, kb_a, doc1, &job1, &err), CQ_OK);
    /* the newest document, its clauses and its job go */
    assert_int_equal(cq_store_doc_delete(s, doc1, &err), CQ_OK);
    cq_clause_row row;
    assert_int_equal(cq_store_clause_get(s, last_clause, &row, &err), CQ_ERR_NOT_FOUND);
    int64_t doc2 = test_add_doc(s, kb_b, "劳动法", "中华人民共和国劳动法", "h2", labour_law, 2);
    assert_true(doc2 > doc1);
    assert_true(test_count(s, "SELECT min(id) FROM clauses") > last_clause);
    assert_int_equal(cq_store_clause_get(s, last_clause, &row, &err), CQ_ERR_NOT_FOUND); /* not b's clause */
    assert_int_equal(cq_store_job_create(s, kb_b, doc2, &job2, &err), CQ_OK);
    assert_true(job2 > job1);
    /* the newest KB goes: the next one has a new id (its FTS table and vector files are named by it) */
    assert_int_equal(cq_store_kb_delete(s, kb_b, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "c", &kb_c, &err), CQ_OK);
    assert_true(kb_c > kb_b);
}

/* A database file is private to its owner, with its -wal and -shm files. */
static void test_file_mode(void **state) {
    (void)state;
    struct stat st;
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s%s", test_db_path, suffixes[i]);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
    }
}

/* The schema at version 3 (migrations 1 to 3), as the program wrote it before ids were kept unique. */
#define SCHEMA_V3                                                                                                      \
    "CREATE TABLE kbs(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL);"                \
    "CREATE TABLE documents(id INTEGER PRIMARY KEY, kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,"      \
    " name TEXT NOT NULL, filename TEXT NOT NULL, format TEXT NOT NULL, sha256 TEXT NOT NULL,"                         \
    " size_bytes INTEGER NOT NULL, title TEXT, n_pages INTEGER NOT NULL DEFAULT 0,"                                    \
    " n_clauses INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'processing', error TEXT,"                    \
    " quality REAL NOT NULL DEFAULT 1, quality_reason TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL);"         \
    "CREATE UNIQUE INDEX documents_kb_hash ON documents(kb_id, sha256);"                                               \
    "CREATE INDEX documents_kb_name ON documents(kb_id, name);"                                                        \
    "CREATE TABLE pages(doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"                           \
    " page_no INTEGER NOT NULL, width REAL NOT NULL, height REAL NOT NULL, n_chars INTEGER NOT NULL,"                  \
    " quality REAL NOT NULL, quality_reason TEXT NOT NULL DEFAULT '', PRIMARY KEY(doc_id, page_no)) WITHOUT ROWID;"    \
    "CREATE TABLE clauses(id INTEGER PRIMARY KEY, doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE"          \
    " CASCADE, ord INTEGER NOT NULL, kind INTEGER NOT NULL, label TEXT, label_key TEXT,"                               \
    " path TEXT NOT NULL DEFAULT '', text TEXT NOT NULL, page_first INTEGER NOT NULL DEFAULT 0,"                       \
    " page_last INTEGER NOT NULL DEFAULT 0, start_off INTEGER NOT NULL, end_off INTEGER NOT NULL, boxes BLOB);"        \
    "CREATE INDEX clauses_doc ON clauses(doc_id, ord);"                                                                \
    "CREATE TABLE jobs(id INTEGER PRIMARY KEY, kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,"           \
    " doc_id INTEGER REFERENCES documents(id) ON DELETE CASCADE, state TEXT NOT NULL,"                                 \
    " done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0, error TEXT,"                                  \
    " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, filename TEXT, upload_path TEXT,"                      \
    " size_bytes INTEGER NOT NULL DEFAULT 0, replace_doc INTEGER NOT NULL DEFAULT 0);"                                 \
    "CREATE TABLE clause_vectors(clause_id INTEGER PRIMARY KEY REFERENCES clauses(id) ON DELETE CASCADE,"              \
    " kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE, model TEXT NOT NULL, vec BLOB NOT NULL);"           \
    "CREATE TABLE doc_states(doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,"                   \
    " model TEXT NOT NULL, n_tokens INTEGER NOT NULL, state BLOB NOT NULL);"                                           \
    "CREATE TABLE api_keys(id INTEGER PRIMARY KEY, name TEXT NOT NULL, prefix TEXT NOT NULL,"                          \
    " hash TEXT NOT NULL UNIQUE, role TEXT NOT NULL, kb TEXT, created_at INTEGER NOT NULL,"                            \
    " last_used_at INTEGER, revoked_at INTEGER);"                                                                      \
    "CREATE VIRTUAL TABLE fts_kb1 USING fts5(title, path, body, tokenize='cjk');"                                      \
    "CREATE VIRTUAL TABLE fts_kb2 USING fts5(title, path, body, tokenize='cjk');"

/* A version 3 database (before ids were kept unique and settings existed) is migrated keeping every row, id,
 * reference and FTS row; a database that has had a key keeps authentication on. */
static void test_migration_from_v3(void **state) {
    (void)state;
    sqlite3 *db;
    cq_err err = {0};
    assert_int_equal(sqlite3_open(test_db_path, &db), SQLITE_OK);
    assert_int_equal(cq_fts_cjk_register(db, &err), CQ_OK);
    const char *v3 =
        SCHEMA_V3
        "INSERT INTO kbs VALUES(1, 'a', 0), (2, 'b', 0);"
        "INSERT INTO documents(id, kb_id, name, filename, format, sha256, size_bytes, status, created_at)"
        " VALUES(1, 1, 'x', 'x.md', 'md', 'h1', 1, 'ready', 0), (2, 2, 'y', 'y.md', 'md', 'h2', 1, 'ready', 0);"
        "INSERT INTO pages VALUES(1, 1, 595, 842, 10, 1, ''), (2, 1, 595, 842, 10, 1, '');"
        "INSERT INTO clauses(id, doc_id, ord, kind, label, label_key, text, start_off, end_off) VALUES"
        " (1, 1, 0, 1, '第一条', '1', '第一条 总则', 0, 1), (2, 1, 1, 1, '第二条', '2', '第二条 工资', 1, 2),"
        " (3, 2, 0, 1, '第三条', '3', '第三条 休假', 0, 1);"
        "INSERT INTO fts_kb1(rowid, title, path, body) VALUES(1, 'x', '', '第一条 总则'), (2, 'x', '', '第二条 工资');"
        "INSERT INTO fts_kb2(rowid, title, path, body) VALUES(3, 'y', '', '第三条 休假');"
        "INSERT INTO jobs(id, kb_id, doc_id, state, created_at, updated_at) VALUES(7, 2, 2, 'ready', 0, 0);"
        "INSERT INTO clause_vectors VALUES(3, 2, 'm', x'00');"
        "INSERT INTO api_keys(id, name, prefix, hash, role, created_at, revoked_at)"
        " VALUES(1, 'ops', 'cq_1', 'h', 'admin', 0, 5);"
        "PRAGMA user_version = 3;";
    char *msg = NULL;
    if (sqlite3_exec(db, v3, NULL, NULL, &msg) != SQLITE_OK) fail_msg("v3 schema: %s", msg);
    sqlite3_close(db);

    cq_store *s;
    assert_int_equal(cq_store_open(test_db_path, &s, &err), CQ_OK);
    assert_int_equal(test_count(s, "PRAGMA user_version"), CQ_STORE_SCHEMA_VERSION);
    assert_int_equal(test_count(s, "PRAGMA foreign_keys"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                              "('kbs', 'documents', 'clauses', 'jobs', 'api_keys') AND sql LIKE '%AUTOINCREMENT%'"),
                     5);
    assert_int_equal(test_count(s, "SELECT count(*) FROM sqlite_schema WHERE name LIKE '%\\_v6' ESCAPE '\\'"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN "
                              "('documents_kb_hash', 'documents_kb_name', 'clauses_doc', 'clauses_label', "
                              "'clauses_label_key', 'jobs_state')"),
                     6);
    assert_int_equal(test_count(s, "SELECT count(*) FROM clauses"), 3);
    assert_int_equal(test_count(s, "SELECT count(*) FROM pages"), 2);
    assert_int_equal(test_count(s, "SELECT id FROM jobs WHERE doc_id = 2"), 7);
    assert_int_equal(test_count(s, "SELECT count(*) FROM fts_kb1 WHERE fts_kb1 MATCH '工资'"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM settings WHERE name = 'auth_required' AND value = '1'"), 1);
    cq_clause_row row;
    assert_int_equal(cq_store_clause_get(s, 3, &row, &err), CQ_OK);
    assert_string_equal(row.text, "第三条 休假");
    cq_clause_row_free(&row);

    /* references still cascade; ids go on from the largest */
    int64_t kb;
    assert_int_equal(cq_store_kb_find(s, "b", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_kb_delete(s, kb, &err), CQ_OK);
    assert_int_equal(test_count(s, "SELECT count(*) FROM clauses"), 2);
    assert_int_equal(test_count(s, "SELECT count(*) FROM jobs"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM clause_vectors"), 0);
    int64_t doc = test_add_doc(s, 1, "劳动法", "中华人民共和国劳动法", "h3", labour_law, 2);
    assert_true(doc > 2);
    assert_true(test_count(s, "SELECT max(id) FROM clauses") > 3);
    assert_int_equal(cq_store_clause_get(s, 3, &row, &err), CQ_ERR_NOT_FOUND);
    cq_store_close(s);
}

/* What main's migrations 4 and 5 added (the schema of a database made by clauseqa at 831b75d, before this branch's
 * migrations): conversations and the jobs' error code; versions of a regulation. */
#define SCHEMA_V5_ADDS                                                                                                 \
    "CREATE TABLE conversations(id INTEGER PRIMARY KEY, owner_key_id INTEGER NOT NULL,"                                \
    " kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE, title TEXT NOT NULL,"                               \
    " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);"                                                      \
    "CREATE INDEX conversations_owner ON conversations(owner_key_id, updated_at);"                                     \
    "CREATE INDEX conversations_kb ON conversations(kb_id);"                                                           \
    "CREATE TABLE conversation_turns(id INTEGER PRIMARY KEY,"                                                          \
    " conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE, question TEXT NOT NULL,"        \
    " reply TEXT NOT NULL, created_at INTEGER NOT NULL);"                                                              \
    "CREATE INDEX conversation_turns_conversation ON conversation_turns(conversation_id, id);"                         \
    "ALTER TABLE jobs ADD COLUMN error_code TEXT;"                                                                     \
    "CREATE TABLE doc_versions(doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,"                 \
    " kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE, key TEXT NOT NULL,"                                 \
    " label TEXT NOT NULL DEFAULT '', promulgated INTEGER NOT NULL DEFAULT 0, effective INTEGER NOT NULL DEFAULT 0,"    \
    " repealed INTEGER NOT NULL DEFAULT 0,"                                                                            \
    " by_user INTEGER NOT NULL DEFAULT 0, analysed_at INTEGER NOT NULL);"                                              \
    "CREATE INDEX doc_versions_key ON doc_versions(kb_id, key);"                                                       \
    "CREATE TABLE doc_repeals(doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"                     \
    " kb_id INTEGER NOT NULL, key TEXT NOT NULL, PRIMARY KEY(doc_id, key)) WITHOUT ROWID;"                             \
    "CREATE INDEX doc_repeals_key ON doc_repeals(kb_id, key);"

/* A version 5 database (made by main before this branch's migrations 6 to 8) is migrated keeping its conversations,
 * their turns, the jobs' error codes and the versions of its documents, with every id and reference; conversation
 * ids are then never used twice either. */
static void test_migration_from_v5(void **state) {
    (void)state;
    sqlite3 *db;
    cq_err err = {0};
    assert_int_equal(sqlite3_open(test_db_path, &db), SQLITE_OK);
    assert_int_equal(cq_fts_cjk_register(db, &err), CQ_OK);
    const char *v5 =
        SCHEMA_V3 SCHEMA_V5_ADDS
        "INSERT INTO kbs VALUES(1, 'a', 0), (2, 'b', 0);"
        "INSERT INTO documents(id, kb_id, name, filename, format, sha256, size_bytes, status, created_at) VALUES"
        " (1, 1, 'x(2018)', 'x.md', 'md', 'h1', 1, 'ready', 0), (2, 2, 'y', 'y.md', 'md', 'h2', 1, 'ready', 0),"
        " (3, 1, 'x(2023)', 'x2.md', 'md', 'h3', 1, 'ready', 0);"
        "INSERT INTO clauses(id, doc_id, ord, kind, label, label_key, text, start_off, end_off) VALUES"
        " (1, 1, 0, 1, '第一条', '1', '第一条 总则', 0, 1), (2, 2, 0, 1, '第二条', '2', '第二条 工资', 0, 1),"
        " (3, 3, 0, 1, '第一条', '1', '第一条 总则（修订）', 0, 1);"
        "INSERT INTO fts_kb1(rowid, title, path, body) VALUES(1, 'x', '', '第一条 总则'), (3, 'x', '', '第一条 总则（修订）');"
        "INSERT INTO fts_kb2(rowid, title, path, body) VALUES(2, 'y', '', '第二条 工资');"
        "INSERT INTO jobs(id, kb_id, doc_id, state, error, error_code, created_at, updated_at) VALUES"
        " (7, 2, 2, 'failed', 'no text layer', 'empty', 0, 0), (8, 1, 1, 'ready', NULL, NULL, 0, 0);"
        "INSERT INTO api_keys(id, name, prefix, hash, role, created_at) VALUES(4, 'ops', 'cq_4', 'h4', 'admin', 0);"
        "INSERT INTO api_keys(id, name, prefix, hash, role, kb, created_at) VALUES(11, 'r', 'cq_r', 'h11', 'reader',"
        " 'a', 0), (12, 'g', 'cq_g', 'h12', 'reader', 'gone', 0), (13, 'e', 'cq_e', 'h13', 'editor', '*', 0);"
        "INSERT INTO conversations VALUES(5, 4, 1, '总则', 10, 20), (6, 4, 2, '工资', 10, 30);"
        "INSERT INTO conversation_turns VALUES(9, 5, '第一条？', '{\"answer\": \"x\"}', 20), (10, 6, '工资？', '{}', 30);"
        "INSERT INTO doc_versions VALUES(1, 1, 'x', '2018', 20181229, 20190101, 20231229, 1, 5),"
        " (3, 1, 'x', '2023', 20231229, 20240701, 0, 0, 5);"
        "INSERT INTO doc_repeals VALUES(3, 1, 'x-old');"
        "PRAGMA user_version = 5;";
    char *msg = NULL;
    if (sqlite3_exec(db, v5, NULL, NULL, &msg) != SQLITE_OK) fail_msg("v5 schema: %s", msg);
    sqlite3_close(db);

    cq_store *s;
    assert_int_equal(cq_store_open(test_db_path, &s, &err), CQ_OK);
    assert_int_equal(test_count(s, "PRAGMA user_version"), CQ_STORE_SCHEMA_VERSION);
    assert_int_equal(test_count(s, "PRAGMA foreign_keys"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                              "('kbs', 'documents', 'clauses', 'jobs', 'api_keys', 'conversations', "
                              "'conversation_turns') AND sql LIKE '%AUTOINCREMENT%'"),
                     7);
    assert_int_equal(test_count(s, "SELECT count(*) FROM sqlite_schema WHERE name LIKE '%\\_v6' ESCAPE '\\'"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN "
                              "('conversations_owner', 'conversations_kb', 'conversation_turns_conversation', "
                              "'doc_versions_key', 'doc_repeals_key', 'jobs_state', 'clauses_label_key')"),
                     7);
    assert_int_equal(test_count(s, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM settings WHERE name = 'auth_required' AND value = '1'"), 1);
    /* a key's one KB is a grant row (migrations 9 and 10); a KB that did not exist and "*" have none */
    assert_int_equal(test_count(s, "SELECT count(*) FROM kb_grants"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM kb_grants WHERE subject = 'key' AND subject_id = 11 AND "
                                   "kb_id = 1 AND kb = 'a'"),
                     1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM users"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM conversations WHERE owner_user_id IS NULL"), 2);

    /* jobs keep their failure code and start with no attempts counted */
    cq_job_info j;
    assert_int_equal(cq_store_job_get(s, 7, &j, &err), CQ_OK);
    assert_string_equal(j.error_code, "empty");
    assert_string_equal(j.error, "no text layer");
    assert_int_equal(j.attempts, 0);
    cq_job_info_free(&j);
    /* conversations and their turns, versions and repeals, as they were */
    cq_conversation c;
    assert_int_equal(cq_store_conversation_get(s, 5, &c, &err), CQ_OK);
    assert_string_equal(c.title, "总则");
    assert_int_equal(c.owner_key_id, 4);
    cq_conversation_free(&c);
    assert_int_equal(test_count(s, "SELECT count(*) FROM conversation_turns WHERE conversation_id = 5 AND id = 9"), 1);
    assert_int_equal(test_count(s, "SELECT effective FROM doc_versions WHERE doc_id = 3"), 20240701);
    assert_int_equal(test_count(s, "SELECT by_user FROM doc_versions WHERE doc_id = 1"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM doc_repeals WHERE doc_id = 3"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM fts_kb1 WHERE fts_kb1 MATCH '修订'"), 1);

    /* references still cascade: a KB takes its conversations, turns and jobs; a document its version rows */
    assert_int_equal(cq_store_kb_delete(s, 2, &err), CQ_OK);
    assert_int_equal(test_count(s, "SELECT count(*) FROM conversations"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM conversation_turns"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM jobs"), 1);
    assert_int_equal(cq_store_doc_delete(s, 3, &err), CQ_OK);
    assert_int_equal(test_count(s, "SELECT count(*) FROM doc_versions"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM doc_repeals"), 0);
    /* the newest conversation went with its KB: the next one has a new id, and so has the next turn */
    int64_t conv;
    assert_int_equal(cq_store_conversation_create(s, 4, 1, "新的", &conv, &err), CQ_OK);
    assert_true(conv > 6);
    assert_int_equal(cq_store_conversation_add_turn(s, conv, "问", "{}", 0, &err), CQ_OK);
    assert_true(test_count(s, "SELECT max(id) FROM conversation_turns") > 10);
    cq_store_close(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kb, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_doc_delete, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_schema_reopen, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_ids_never_reused, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_file_mode, test_store_setup, test_store_teardown),
        cmocka_unit_test(test_schema_list),
        cmocka_unit_test_setup_teardown(test_migration_from_v3, setup_empty, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_migration_from_v5, setup_empty, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
