#include "index/store.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/utf8.h"
#include "db/db.h"
#include "index/bm25.h"
#include "index/fts_cjk.h"
#include "index/router.h"
#include "index/store_internal.h"
#include "index/store_pg.h"

/* A document's clauses on PostgreSQL, held until its finish (or the commit): the keyword index there holds one
 * postings list per token and document, so they are written together (cq_pg_doc_add_clauses_as). Each has its id
 * from the moment it is added, from a block reserved ahead (ids left over are never used: ids may have gaps). */
typedef struct {
    int64_t doc_id;
    char *label;
    cq_store_clause *clauses; /* deep copies */
    int64_t *ids;
    size_t n, cap;
    int64_t reserved[64];
    size_t n_reserved, next_reserved;
} pending_clauses;

struct cq_store {
    cq_db *conn;         /* SQLite's connection (db/db.h); on PostgreSQL the cq_pg's */
    sqlite3 *db;         /* SQLite's handle of conn, NULL on PostgreSQL */
    cq_pg *pg;           /* the PostgreSQL backend (index/store_pg.h), or NULL: SQLite */
    pending_clauses pending; /* PostgreSQL only */
    void *router_cache; /* index/router.c */
    void *versions_seen; /* index/versions.c */
    void *bm25_cache;    /* index/bm25.c */
    /* cq_store_clause_add's statements, prepared once (preparing them took as long as the insert of a short
     * clause); the FTS one is for the table of fts_kb */
    sqlite3_stmt *clause_insert, *fts_insert;
    int64_t fts_kb;
};

static void clause_statements_drop(cq_store *s) {
    sqlite3_finalize(s->clause_insert);
    sqlite3_finalize(s->fts_insert);
    s->clause_insert = s->fts_insert = NULL;
    s->fts_kb = 0;
}

void **cq_store_router_slot(cq_store *s) { return &s->router_cache; }
void **cq_store_versions_slot(cq_store *s) { return &s->versions_seen; }
void **cq_store_bm25_slot(cq_store *s) { return &s->bm25_cache; }

/* Migrations run in order; migration i brings user_version from i to i + 1. Only ever append. */
static const char *const migrations[] = {
    "CREATE TABLE kbs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  name TEXT NOT NULL UNIQUE,\n"
    "  created_at INTEGER NOT NULL);\n"
    "CREATE TABLE documents(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  name TEXT NOT NULL,\n"
    "  filename TEXT NOT NULL,\n"
    "  format TEXT NOT NULL,\n"
    "  sha256 TEXT NOT NULL,\n"
    "  size_bytes INTEGER NOT NULL,\n"
    "  title TEXT,\n"
    "  n_pages INTEGER NOT NULL DEFAULT 0,\n"
    "  n_clauses INTEGER NOT NULL DEFAULT 0,\n"
    "  status TEXT NOT NULL DEFAULT 'processing',\n"
    "  error TEXT,\n"
    "  quality REAL NOT NULL DEFAULT 1,\n"
    "  quality_reason TEXT NOT NULL DEFAULT '',\n"
    "  created_at INTEGER NOT NULL);\n"
    "CREATE UNIQUE INDEX documents_kb_hash ON documents(kb_id, sha256);\n"
    "CREATE INDEX documents_kb_name ON documents(kb_id, name);\n"
    "CREATE TABLE pages(\n"
    "  doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  page_no INTEGER NOT NULL,\n"
    "  width REAL NOT NULL, height REAL NOT NULL,\n"
    "  n_chars INTEGER NOT NULL,\n"
    "  quality REAL NOT NULL,\n"
    "  quality_reason TEXT NOT NULL DEFAULT '',\n"
    "  PRIMARY KEY(doc_id, page_no)) WITHOUT ROWID;\n"
    "CREATE TABLE clauses(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  ord INTEGER NOT NULL,\n"
    "  kind INTEGER NOT NULL,\n"
    "  label TEXT, label_key TEXT,\n"
    "  path TEXT NOT NULL DEFAULT '',\n"
    "  text TEXT NOT NULL,\n"
    "  page_first INTEGER NOT NULL DEFAULT 0, page_last INTEGER NOT NULL DEFAULT 0,\n"
    "  start_off INTEGER NOT NULL, end_off INTEGER NOT NULL,\n"
    "  boxes BLOB);\n"
    "CREATE INDEX clauses_doc ON clauses(doc_id, ord);\n"
    "CREATE INDEX clauses_label ON clauses(doc_id, label_key);\n"
    "CREATE INDEX clauses_label_key ON clauses(label_key) WHERE label_key IS NOT NULL;\n"

    "CREATE TABLE jobs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  doc_id INTEGER REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  state TEXT NOT NULL,\n"
    "  done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0,\n"
    "  error TEXT,\n"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);\n",
    /* 2: SSM encoder output (index/vectors.h): clause vectors and document states, each naming its model */
    "CREATE TABLE clause_vectors(\n"
    "  clause_id INTEGER PRIMARY KEY REFERENCES clauses(id) ON DELETE CASCADE,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  model TEXT NOT NULL,\n"
    "  vec BLOB NOT NULL);\n"
    "CREATE INDEX clause_vectors_kb ON clause_vectors(kb_id, model);\n"
    "CREATE TABLE doc_states(\n"
    "  doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  model TEXT NOT NULL,\n"
    "  n_tokens INTEGER NOT NULL,\n"
    "  state BLOB NOT NULL);\n",
    /* 3: API keys (store/keys.h) and what an ingestion job needs to resume after a restart (store/jobs.h) */
    "CREATE TABLE api_keys(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  name TEXT NOT NULL,\n"
    "  prefix TEXT NOT NULL,\n"
    "  hash TEXT NOT NULL UNIQUE,\n"
    "  role TEXT NOT NULL,\n"
    "  kb TEXT,\n"
    "  created_at INTEGER NOT NULL, last_used_at INTEGER, revoked_at INTEGER);\n"
    "ALTER TABLE jobs ADD COLUMN filename TEXT;\n"
    "ALTER TABLE jobs ADD COLUMN upload_path TEXT;\n"
    "ALTER TABLE jobs ADD COLUMN size_bytes INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE jobs ADD COLUMN replace_doc INTEGER NOT NULL DEFAULT 0;\n"
    "CREATE INDEX jobs_state ON jobs(state);\n",
    /* 4: conversations (store/conversations.h): a key's questions and answers in one KB; the code of a job's
     * failure (cq_status_name), so that clients can say it in their own language */
    "CREATE TABLE conversations(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  owner_key_id INTEGER NOT NULL,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  title TEXT NOT NULL,\n"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);\n"
    "CREATE INDEX conversations_owner ON conversations(owner_key_id, updated_at);\n"
    "CREATE INDEX conversations_kb ON conversations(kb_id);\n"
    "CREATE TABLE conversation_turns(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  question TEXT NOT NULL,\n"
    "  reply TEXT NOT NULL,\n"
    "  created_at INTEGER NOT NULL);\n"
    "CREATE INDEX conversation_turns_conversation ON conversation_turns(conversation_id, id);\n"
    "ALTER TABLE jobs ADD COLUMN error_code TEXT;\n",
    /* 5: versions of a regulation (index/versions.h): each document's version — its group key, label, dates as
     * yyyymmdd (0 unknown), whether a person corrected it — and the regulations its text repeals (同时废止).
     * Documents ingested before this migration get their rows when their KB is first asked about, or by
     * `clauseqa reindex`. */
    "CREATE TABLE doc_versions(\n"
    "  doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  key TEXT NOT NULL,\n"
    "  label TEXT NOT NULL DEFAULT '',\n"
    "  promulgated INTEGER NOT NULL DEFAULT 0,\n"
    "  effective INTEGER NOT NULL DEFAULT 0,\n"
    "  repealed INTEGER NOT NULL DEFAULT 0,\n"
    "  by_user INTEGER NOT NULL DEFAULT 0,\n"
    "  analysed_at INTEGER NOT NULL);\n"
    "CREATE INDEX doc_versions_key ON doc_versions(kb_id, key);\n"
    "CREATE TABLE doc_repeals(\n"
    "  doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  kb_id INTEGER NOT NULL,\n"
    "  key TEXT NOT NULL,\n"
    "  PRIMARY KEY(doc_id, key)) WITHOUT ROWID;\n"
    "CREATE INDEX doc_repeals_key ON doc_repeals(kb_id, key);\n",
    /* 6: ids are never used twice. Without AUTOINCREMENT SQLite gives a new row the largest id + 1, so deleting the
     * newest KB, document, clause, job, key or conversation handed its id to the next one: an old clause id opened
     * another KB's clause, a KB's FAISS files (named by id) could meet a new KB, a new key could inherit a revoked
     * key's conversations (owner_key_id). Each table is rebuilt (the SQLite way: new table, copy, drop, rename;
     * foreign keys are off during migrations) keeping every id and every column the migrations before this one
     * added, so every reference and every FTS rowid stays as it was. The tables keyed by another table's id
     * (pages, clause_vectors, doc_states, doc_versions, doc_repeals) need no rebuild. */
    "CREATE TABLE kbs_v6(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  name TEXT NOT NULL UNIQUE,\n"
    "  created_at INTEGER NOT NULL);\n"
    "INSERT INTO kbs_v6(id, name, created_at) SELECT id, name, created_at FROM kbs;\n"
    "DROP TABLE kbs;\n"
    "ALTER TABLE kbs_v6 RENAME TO kbs;\n"
    "CREATE TABLE documents_v6(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  name TEXT NOT NULL,\n"
    "  filename TEXT NOT NULL,\n"
    "  format TEXT NOT NULL,\n"
    "  sha256 TEXT NOT NULL,\n"
    "  size_bytes INTEGER NOT NULL,\n"
    "  title TEXT,\n"
    "  n_pages INTEGER NOT NULL DEFAULT 0,\n"
    "  n_clauses INTEGER NOT NULL DEFAULT 0,\n"
    "  status TEXT NOT NULL DEFAULT 'processing',\n"
    "  error TEXT,\n"
    "  quality REAL NOT NULL DEFAULT 1,\n"
    "  quality_reason TEXT NOT NULL DEFAULT '',\n"
    "  created_at INTEGER NOT NULL);\n"
    "INSERT INTO documents_v6(id, kb_id, name, filename, format, sha256, size_bytes, title, n_pages, n_clauses, "
    "status, error, quality, quality_reason, created_at) SELECT id, kb_id, name, filename, format, sha256, "
    "size_bytes, title, n_pages, n_clauses, status, error, quality, quality_reason, created_at FROM documents;\n"
    "DROP TABLE documents;\n"
    "ALTER TABLE documents_v6 RENAME TO documents;\n"
    "CREATE UNIQUE INDEX documents_kb_hash ON documents(kb_id, sha256);\n"
    "CREATE INDEX documents_kb_name ON documents(kb_id, name);\n"
    "CREATE TABLE clauses_v6(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  ord INTEGER NOT NULL,\n"
    "  kind INTEGER NOT NULL,\n"
    "  label TEXT, label_key TEXT,\n"
    "  path TEXT NOT NULL DEFAULT '',\n"
    "  text TEXT NOT NULL,\n"
    "  page_first INTEGER NOT NULL DEFAULT 0, page_last INTEGER NOT NULL DEFAULT 0,\n"
    "  start_off INTEGER NOT NULL, end_off INTEGER NOT NULL,\n"
    "  boxes BLOB);\n"
    "INSERT INTO clauses_v6(id, doc_id, ord, kind, label, label_key, path, text, page_first, page_last, start_off, "
    "end_off, boxes) SELECT id, doc_id, ord, kind, label, label_key, path, text, page_first, page_last, start_off, "
    "end_off, boxes FROM clauses;\n"
    "DROP TABLE clauses;\n"
    "ALTER TABLE clauses_v6 RENAME TO clauses;\n"
    "CREATE INDEX clauses_doc ON clauses(doc_id, ord);\n"
    "CREATE INDEX clauses_label ON clauses(doc_id, label_key);\n"
    "CREATE INDEX clauses_label_key ON clauses(label_key) WHERE label_key IS NOT NULL;\n"
    "CREATE TABLE jobs_v6(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  doc_id INTEGER REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  state TEXT NOT NULL,\n"
    "  done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0,\n"
    "  error TEXT,\n"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,\n"
    "  filename TEXT,\n"
    "  upload_path TEXT,\n"
    "  size_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  replace_doc INTEGER NOT NULL DEFAULT 0,\n"
    "  error_code TEXT);\n"
    "INSERT INTO jobs_v6(id, kb_id, doc_id, state, done, total, error, created_at, updated_at, filename, "
    "upload_path, size_bytes, replace_doc, error_code) SELECT id, kb_id, doc_id, state, done, total, error, "
    "created_at, updated_at, filename, upload_path, size_bytes, replace_doc, error_code FROM jobs;\n"
    "DROP TABLE jobs;\n"
    "ALTER TABLE jobs_v6 RENAME TO jobs;\n"
    "CREATE INDEX jobs_state ON jobs(state);\n"
    "CREATE TABLE api_keys_v6(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  name TEXT NOT NULL,\n"
    "  prefix TEXT NOT NULL,\n"
    "  hash TEXT NOT NULL UNIQUE,\n"
    "  role TEXT NOT NULL,\n"
    "  kb TEXT,\n"
    "  created_at INTEGER NOT NULL, last_used_at INTEGER, revoked_at INTEGER);\n"
    "INSERT INTO api_keys_v6(id, name, prefix, hash, role, kb, created_at, last_used_at, revoked_at) SELECT id, "
    "name, prefix, hash, role, kb, created_at, last_used_at, revoked_at FROM api_keys;\n"
    "DROP TABLE api_keys;\n"
    "ALTER TABLE api_keys_v6 RENAME TO api_keys;\n"
    "CREATE TABLE conversations_v6(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  owner_key_id INTEGER NOT NULL,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  title TEXT NOT NULL,\n"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);\n"
    "INSERT INTO conversations_v6(id, owner_key_id, kb_id, title, created_at, updated_at) SELECT id, owner_key_id, "
    "kb_id, title, created_at, updated_at FROM conversations;\n"
    "DROP TABLE conversations;\n"
    "ALTER TABLE conversations_v6 RENAME TO conversations;\n"
    "CREATE INDEX conversations_owner ON conversations(owner_key_id, updated_at);\n"
    "CREATE INDEX conversations_kb ON conversations(kb_id);\n"
    "CREATE TABLE conversation_turns_v6(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  question TEXT NOT NULL,\n"
    "  reply TEXT NOT NULL,\n"
    "  created_at INTEGER NOT NULL);\n"
    "INSERT INTO conversation_turns_v6(id, conversation_id, question, reply, created_at) SELECT id, "
    "conversation_id, question, reply, created_at FROM conversation_turns;\n"
    "DROP TABLE conversation_turns;\n"
    "ALTER TABLE conversation_turns_v6 RENAME TO conversation_turns;\n"
    "CREATE INDEX conversation_turns_conversation ON conversation_turns(conversation_id, id);\n",
    /* 7: settings of the installation (store/keys.h: once a key has existed, authentication stays on until an
     * admin turns open mode on again). A database that has had a key has authentication on. */
    "CREATE TABLE settings(\n"
    "  name TEXT PRIMARY KEY,\n"
    "  value TEXT NOT NULL,\n"
    "  updated_at INTEGER NOT NULL);\n"
    "INSERT INTO settings(name, value, updated_at) SELECT 'auth_required', '1', CAST(strftime('%s', 'now') AS INTEGER) "
    "WHERE EXISTS (SELECT 1 FROM api_keys);\n",
    /* 8: how many times a job has been started (store/jobs.h). A job found running at a start was cut off by a
     * crash (a shutdown puts its job back in the queue uncounted); after CQ_JOB_MAX_ATTEMPTS such starts it fails
     * for good instead of taking the server down at every start. */
    "ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;\n",
    /* 9: a key's grant names its KB by id (issue 29 item 10): a KB deleted and made again under the same name is a
     * new KB, which the old keys must not reach. Keys made before are bound to the KB of their name now; one whose
     * KB does not exist any more reaches nothing (store/keys.h). */
    "ALTER TABLE api_keys ADD COLUMN kb_id INTEGER;\n"
    "UPDATE api_keys SET kb_id = (SELECT id FROM kbs WHERE kbs.name = api_keys.kb) "
    "WHERE kb IS NOT NULL AND kb <> '*';\n",
    /* 10: feedback on answers and the quality log (store/feedback.h, issue 30 items 5 and 6): a turn's thumbs up or
     * down with a comment (one a turn, gone with the turn: a regenerated answer starts unrated), and one row an
     * answer with what /metrics and GET /api/v1/quality count per KB and day, and the documents it cited (kept
     * without a foreign key: a cited document deleted since is what is counted). */
    "CREATE TABLE turn_feedback(\n"
    "  turn_id INTEGER PRIMARY KEY REFERENCES conversation_turns(id) ON DELETE CASCADE,\n"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  rating INTEGER NOT NULL CHECK (rating IN (-1, 1)),\n"
    "  comment TEXT NOT NULL DEFAULT '',\n"
    "  day TEXT NOT NULL,\n"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);\n"
    "CREATE INDEX turn_feedback_kb ON turn_feedback(kb_id, day);\n"
    "CREATE INDEX turn_feedback_conversation ON turn_feedback(conversation_id);\n"
    "CREATE TABLE answer_log(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  kb_id INTEGER NOT NULL REFERENCES kbs(id) ON DELETE CASCADE,\n"
    "  day TEXT NOT NULL,\n"
    "  created_at INTEGER NOT NULL,\n"
    "  abstained INTEGER NOT NULL, fallback INTEGER NOT NULL, low_confidence INTEGER NOT NULL,\n"
    "  confidence REAL NOT NULL);\n"
    "CREATE INDEX answer_log_kb_day ON answer_log(kb_id, day);\n"
    "CREATE TABLE answer_log_docs(\n"
    "  answer_id INTEGER NOT NULL REFERENCES answer_log(id) ON DELETE CASCADE,\n"
    "  doc_id INTEGER NOT NULL,\n"
    "  PRIMARY KEY(answer_id, doc_id)) WITHOUT ROWID;\n",
    /* 11: accounts (issue 30): KB grants of keys and users, many KBs each (store/grants.h; a key's one-KB grant of
     * migration 9 moves there), local users with argon2id password hashes and their sign-in sessions (store/users.h;
     * only a session token's SHA-256 is kept), the user a conversation belongs to (store/conversations.h), and the
     * audit trail (store/audit.h). */
    "CREATE TABLE kb_grants(\n"
    "  subject TEXT NOT NULL,\n"
    "  subject_id INTEGER NOT NULL,\n"
    "  kb_id INTEGER NOT NULL,\n"
    "  kb TEXT NOT NULL,\n"
    "  PRIMARY KEY(subject, subject_id, kb_id));\n"
    "INSERT INTO kb_grants(subject, subject_id, kb_id, kb) SELECT 'key', id, kb_id, kb FROM api_keys "
    "WHERE kb_id IS NOT NULL AND kb IS NOT NULL AND kb <> '*';\n"
    "CREATE TABLE users(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  name TEXT NOT NULL UNIQUE,\n"
    "  password_hash TEXT NOT NULL,\n"
    "  role TEXT NOT NULL,\n"
    "  kb TEXT,\n"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, last_login_at INTEGER);\n"
    "CREATE TABLE sessions(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,\n"
    "  hash TEXT NOT NULL UNIQUE,\n"
    "  created_at INTEGER NOT NULL, last_seen_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,\n"
    "  revoked_at INTEGER);\n"
    "CREATE INDEX sessions_user ON sessions(user_id);\n"
    "ALTER TABLE conversations ADD COLUMN owner_user_id INTEGER;\n"
    "CREATE TABLE audit(\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  at INTEGER NOT NULL,\n"
    "  actor_kind TEXT NOT NULL, actor_id INTEGER NOT NULL DEFAULT 0, actor_name TEXT NOT NULL DEFAULT '',\n"
    "  action TEXT NOT NULL, kb TEXT NOT NULL DEFAULT '', target TEXT NOT NULL DEFAULT '',\n"
    "  client TEXT NOT NULL DEFAULT '');\n"
    "CREATE INDEX audit_action ON audit(action, id);\n",
};

static cq_status db_error(cq_store *s, cq_err *err, const char *what) {
    return cq_err_set(err, CQ_ERR_DB, "%s: %s", what, sqlite3_errmsg(s->db));
}

static cq_status exec(cq_store *s, const char *sql, cq_err *err) {
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        cq_err_set(err, CQ_ERR_DB, "%s", msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return CQ_ERR_DB;
    }
    return CQ_OK;
}

static cq_status prepare(cq_store *s, const char *sql, sqlite3_stmt **st, cq_err *err) {
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK) return db_error(s, err, "prepare");
    return CQ_OK;
}

static cq_status migrate_steps(cq_store *s, int target, cq_err *err);

static cq_status schema_version(cq_store *s, int *version, cq_err *err) {
    sqlite3_stmt *st;
    if (prepare(s, "PRAGMA user_version", &st, err)) return CQ_ERR_DB;
    *version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return CQ_OK;
}

/* Brings the schema to the newest version, one migration per transaction. The version is read again under the
 * write lock: two processes opening a fresh database at once must not both run a migration. Foreign keys are off
 * while migrations run (a table rebuild drops a table others refer to; SQLite ignores the pragma inside a
 * transaction, so it is set around them). */
static cq_status migrate(cq_store *s, cq_err *err) {
    const int target = (int)(sizeof migrations / sizeof migrations[0]);
    int version;
    if (schema_version(s, &version, err)) return CQ_ERR_DB;
    if (version >= target) return migrate_steps(s, target, err);
    if (exec(s, "PRAGMA foreign_keys=OFF", err)) return CQ_ERR_DB;
    cq_status rc = migrate_steps(s, target, err);
    cq_err ignored = {0};
    if (exec(s, "PRAGMA foreign_keys=ON", rc ? &ignored : err) && !rc) rc = CQ_ERR_DB;
    return rc;
}

static cq_status migrate_steps(cq_store *s, int target, cq_err *err) {
    for (;;) {
        int version;
        if (schema_version(s, &version, err)) return CQ_ERR_DB;
        if (version > target)
            return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                              "database schema version %d is newer than this program (%d): upgrade clauseqa", version,
                              target);
        if (version == target) return CQ_OK;
        if (exec(s, "BEGIN IMMEDIATE", err)) return CQ_ERR_DB;
        if (schema_version(s, &version, err)) {
            cq_store_rollback(s);
            return CQ_ERR_DB;
        }
        if (version < target) {
            char pragma[64];
            snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", version + 1);
            if (exec(s, migrations[version], err) || exec(s, pragma, err)) {
                cq_store_rollback(s);
                return cq_err_prefix(err, "schema migration %d: ", version + 1);
            }
        }
        if (exec(s, "COMMIT", err)) return CQ_ERR_DB;
    }
}

/* SQLite's process-wide setup, once before its first use: no memory statistics. With them on (SQLite's default)
 * every allocation of every connection takes one global mutex, and a BM25 search allocates a lot: asks retrieving
 * at once on different connections then wait on each other (issue 15: on the 16-core H200 box, retrieval-only asks
 * gave about the same asks/s at 4 clients as at 1). Nothing here reads sqlite3_memory_used. */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static void sqlite_setup(void) {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); /* SQLITE_MISUSE when something initialized SQLite before: harmless */
    sqlite3_initialize();
}

cq_status cq_store_open(const char *path, cq_store **out, cq_err *err) {
    *out = NULL;
    pthread_once(&sqlite_once, sqlite_setup);
    cq_store *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    /* db/db_sqlite.c: the file (0600 when new), WAL, the busy timeout, foreign keys */
    cq_status rc = cq_db_sqlite_open(path, &s->conn, err);
    if (rc) {
        cq_store_close(s);
        return rc;
    }
    s->db = cq_db_sqlite(s->conn);
    rc = cq_fts_cjk_register(s->db, err);
    if (!rc) rc = cq_bm25_register(s->db, err);
    if (!rc) rc = migrate(s, err);
    if (rc) {
        cq_err_prefix(err, "database %s: ", path);
        cq_store_close(s);
        return rc;
    }
    *out = s;
    return CQ_OK;
}

static void pending_drop(cq_store *s);

void cq_store_close(cq_store *s) {
    if (!s) return;
    pending_drop(s);
    free(s->pending.clauses);
    free(s->pending.ids);
    cq_pg_close(s->pg);
    cq_router_cache_free(s->router_cache);
    free(s->versions_seen);
    cq_bm25_cache_free(s->bm25_cache);
    clause_statements_drop(s);
    if (!s->pg) cq_db_close(s->conn);
    free(s);
}

sqlite3 *cq_store_db(cq_store *s) { return s->db; }
cq_pg *cq_store_pg(cq_store *s) { return s->pg; }
cq_db *cq_store_conn(cq_store *s) { return s->conn; }
cq_status cq_store_check(cq_store *s, cq_err *err) { return cq_db_check(s->conn, err); }

cq_status cq_store_open_uri(const char *where, cq_store **out, cq_err *err) {
    *out = NULL;
    if (!where || !*where) return cq_err_set(err, CQ_ERR_INVALID, "no store given");
    if (cq_db_where_kind(where) == CQ_DB_SQLITE) return cq_store_open(cq_db_where_path(where), out, err);
    cq_store *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = cq_pg_open(where, &s->pg, err);
    if (!rc) s->conn = cq_pg_db(s->pg);
    if (rc) {
        char shown[512];
        cq_db_where_redact(where, shown, sizeof shown);
        cq_err_prefix(err, "store %s: ", shown);
        free(s);
        return rc;
    }
    *out = s;
    return CQ_OK;
}

/* ---- clauses held for PostgreSQL ------------------------------------------------------------------------------ */

static void pending_drop(cq_store *s) {
    pending_clauses *p = &s->pending;
    for (size_t i = 0; i < p->n; i++) {
        cq_store_clause *c = &p->clauses[i];
        free((char *)c->label);
        free((char *)c->label_key);
        free((char *)c->path);
        free((char *)c->text);
        free((cq_store_box *)c->boxes);
    }
    free(p->label);
    p->label = NULL;
    p->n = 0;
    p->doc_id = 0;
}

static cq_status pending_flush(cq_store *s, cq_err *err) {
    pending_clauses *p = &s->pending;
    if (!p->n) return CQ_OK;
    cq_status rc = cq_pg_doc_add_clauses_as(s->pg, p->doc_id, p->label, p->clauses, p->n, p->ids, err);
    pending_drop(s);
    return rc;
}

static char *dup_or_null(const char *v, bool *failed) {
    if (!v) return NULL;
    char *d = strdup(v);
    if (!d) *failed = true;
    return d;
}

static cq_status pending_add(cq_store *s, int64_t doc_id, const char *doc_label, const cq_store_clause *c,
                             int64_t *clause_id, cq_err *err) {
    pending_clauses *p = &s->pending;
    if (p->n && p->doc_id != doc_id) {
        cq_status rc = pending_flush(s, err);
        if (rc) return rc;
    }
    if (p->next_reserved == p->n_reserved) {
        size_t want = sizeof p->reserved / sizeof p->reserved[0];
        cq_status rc = cq_pg_clause_ids_next(s->pg, want, p->reserved, err);
        if (rc) return rc;
        p->n_reserved = want;
        p->next_reserved = 0;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        cq_store_clause *c2 = realloc(p->clauses, cap * sizeof *c2);
        if (c2) p->clauses = c2;
        int64_t *i2 = c2 ? realloc(p->ids, cap * sizeof *i2) : NULL;
        if (i2) p->ids = i2;
        if (!c2 || !i2) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        p->cap = cap;
    }
    bool failed = false;
    cq_store_clause copy = *c;
    copy.label = dup_or_null(c->label, &failed);
    copy.label_key = dup_or_null(c->label_key, &failed);
    copy.path = dup_or_null(c->path, &failed);
    copy.text = dup_or_null(c->text ? c->text : "", &failed);
    copy.boxes = NULL;
    if (c->n_boxes) {
        cq_store_box *b = malloc(c->n_boxes * sizeof *b);
        if (b) memcpy(b, c->boxes, c->n_boxes * sizeof *b);
        else failed = true;
        copy.boxes = b;
    }
    if (!p->n && !failed) p->label = dup_or_null(doc_label ? doc_label : "", &failed);
    if (failed) {
        free((char *)copy.label);
        free((char *)copy.label_key);
        free((char *)copy.path);
        free((char *)copy.text);
        free((cq_store_box *)copy.boxes);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    p->doc_id = doc_id;
    p->clauses[p->n] = copy;
    p->ids[p->n] = p->reserved[p->next_reserved++];
    if (clause_id) *clause_id = p->ids[p->n];
    p->n++;
    return CQ_OK;
}

cq_status cq_store_begin(cq_store *s, cq_err *err) {
    if (s->pg) return cq_pg_begin(s->pg, err);
    return exec(s, "BEGIN IMMEDIATE", err);
}

cq_status cq_store_commit(cq_store *s, cq_err *err) {
    if (s->pg) {
        cq_status rc = pending_flush(s, err);
        if (rc) {
            cq_pg_rollback(s->pg);
            return rc;
        }
        return cq_pg_commit(s->pg, err);
    }
    return exec(s, "COMMIT", err);
}

void cq_store_rollback(cq_store *s) {
    if (s->pg) {
        pending_drop(s);
        cq_pg_rollback(s->pg);
        return;
    }
    if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

cq_status cq_store_bulk(cq_store *s, bool on, cq_err *err) {
    if (s->pg) return CQ_OK;
    return exec(s, on ? "PRAGMA cache_size = -262144; PRAGMA temp_store = MEMORY"
                      : "PRAGMA cache_size = -2000; PRAGMA temp_store = DEFAULT", err);
}

/* ---- the keyword index and clauses (SQLite: FTS5; PostgreSQL: clauses held for their postings) --------------- */

/* Deletes the FTS rows of the clauses selected by `where` (which binds ?1 = id) from the KB's FTS table. */
static cq_status delete_fts_rows(cq_store *s, int64_t kb_id, const char *where, int64_t id, cq_err *err) {
    char sql[320];
    snprintf(sql, sizeof sql, "DELETE FROM " CQ_FTS_TABLE_FMT " WHERE rowid IN (SELECT c.id FROM clauses c %s)",
             (long long)kb_id, where);
    sqlite3_stmt *st;
    if (prepare(s, sql, &st, err)) return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? CQ_OK : db_error(s, err, "delete index rows");
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v) {
    if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, i);
}

cq_status cq_store_clause_add(cq_store *s, int64_t kb_id, int64_t doc_id, const char *doc_label,
                              const cq_store_clause *c, int64_t *clause_id, cq_err *err) {
    if (s->pg) return pending_add(s, doc_id, doc_label, c, clause_id, err);
    if (s->fts_insert && s->fts_kb != kb_id) {
        sqlite3_finalize(s->fts_insert);
        s->fts_insert = NULL;
    }
    if (!s->clause_insert &&
        prepare(s,
                "INSERT INTO clauses(doc_id, ord, kind, label, label_key, path, text, page_first, page_last, "
                "start_off, end_off, boxes) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                &s->clause_insert, err))
        return CQ_ERR_DB;
    if (!s->fts_insert) {
        char sql[128];
        snprintf(sql, sizeof sql, "INSERT INTO " CQ_FTS_TABLE_FMT "(rowid, title, path, body) VALUES(?, ?, ?, ?)",
                 (long long)kb_id);
        if (prepare(s, sql, &s->fts_insert, err)) return CQ_ERR_DB;
        s->fts_kb = kb_id;
    }
    sqlite3_stmt *st = s->clause_insert;
    sqlite3_bind_int64(st, 1, doc_id);
    sqlite3_bind_int(st, 2, c->ord);
    sqlite3_bind_int(st, 3, c->kind);
    bind_text_or_null(st, 4, c->label);
    bind_text_or_null(st, 5, c->label_key);
    sqlite3_bind_text(st, 6, c->path ? c->path : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, c->text, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 8, c->page_first);
    sqlite3_bind_int(st, 9, c->page_last);
    sqlite3_bind_int64(st, 10, c->start_off);
    sqlite3_bind_int64(st, 11, c->end_off);
    if (c->n_boxes) sqlite3_bind_blob(st, 12, c->boxes, (int)(c->n_boxes * sizeof *c->boxes), SQLITE_STATIC);
    else sqlite3_bind_null(st, 12);
    int rc = sqlite3_step(st);
    cq_status out = rc == SQLITE_DONE ? CQ_OK : db_error(s, err, "add clause");
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (out) return out;
    int64_t id = sqlite3_last_insert_rowid(s->db);
    st = s->fts_insert;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, doc_label ? doc_label : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, c->path ? c->path : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, c->text, -1, SQLITE_STATIC);
    cq_fts_tokens_offer(c->text_tokens); /* the body's tokens, when the caller made them */
    rc = sqlite3_step(st);
    cq_fts_tokens_offer(NULL);
    out = rc == SQLITE_DONE ? CQ_OK : db_error(s, err, "index clause");
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (out) return out;
    if (clause_id) *clause_id = id;
    return CQ_OK;
}

/* ---- the keyword index (index/store_internal.h) -------------------------------------------------------------- */

bool cq_store_keyword_takes_tokens(cq_store *s) { return !s->pg; }

cq_status cq_store_keyword_kb_add(cq_store *s, int64_t kb_id, cq_err *err) {
    if (s->pg) return CQ_OK; /* postings come with each document's clauses */
    char sql[160];
    snprintf(sql, sizeof sql,
             "CREATE VIRTUAL TABLE IF NOT EXISTS " CQ_FTS_TABLE_FMT " USING fts5(title, path, body, tokenize='cjk')",
             (long long)kb_id);
    return exec(s, sql, err);
}

cq_status cq_store_keyword_kb_drop(cq_store *s, int64_t kb_id, cq_err *err) {
    if (s->pg) return CQ_OK; /* documents_postings_gone, a trigger, deletes the postings with the documents */
    clause_statements_drop(s); /* its FTS table goes */
    char sql[96];
    snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS " CQ_FTS_TABLE_FMT, (long long)kb_id);
    return exec(s, sql, err);
}

cq_status cq_store_keyword_doc_drop(cq_store *s, int64_t kb_id, int64_t doc_id, cq_err *err) {
    if (s->pg) {
        if (s->pending.doc_id == doc_id) pending_drop(s);
        return CQ_OK;
    }
    return kb_id ? delete_fts_rows(s, kb_id, "WHERE c.doc_id = ?", doc_id, err) : CQ_OK;
}

cq_status cq_store_keyword_doc_flush(cq_store *s, int64_t doc_id, cq_err *err) {
    return s->pg && s->pending.doc_id == doc_id ? pending_flush(s, err) : CQ_OK;
}
